"""Environment sources, load-time checks and starter profiles: pure Python, no JAX."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from vramtune.errors import UserError
from vramtune.workload.build import scaled_naconmax
from vramtune.workload.profile import builtin_profiles, load_profile, profile_from_dict
from vramtune.workload.sources import Source, parse_source
from vramtune.workload.starter import render_profile_yaml

SHAPE = {"batch_size": 64, "num_minibatches": 4, "unroll_length": 10}


@pytest.mark.parametrize(("env", "expected"), [
    ("brax:ant", Source("brax", "ant")),
    ("brax:inverted_pendulum", Source("brax", "inverted_pendulum")),
    ("playground:CartpoleBalance", Source("playground", "CartpoleBalance")),
    ("my_pkg.envs:make_env", Source("factory", "my_pkg.envs:make_env")),
    ("envs:make", Source("factory", "envs:make")),
])
def test_sources_parse(env, expected):
    assert parse_source(env) == expected


def test_factory_parts():
    source = parse_source("my_pkg.envs:make_env")
    assert (source.module, source.attr) == ("my_pkg.envs", "make_env")


@pytest.mark.parametrize("env", ["ant", "brax:", "playground:", "brax:a b", ":make",
                                 "pkg.mod:", "pkg..mod:f", "pkg.mod:a.b", "1pkg:f", ""])
def test_bad_sources_name_the_three_forms(env):
    with pytest.raises(UserError) as info:
        parse_source(env)
    message = str(info.value)
    assert "\n" not in message
    assert "brax:<name>" in message and "package.module:factory" in message


def _profile(**data):
    return profile_from_dict({"name": "t", **data})


def test_bad_env_fails_at_load_not_in_the_child():
    with pytest.raises(UserError, match="expected brax:<name>"):
        _profile(env="ant")


def test_backend_is_for_brax_and_impl_for_playground():
    with pytest.raises(UserError, match="backend applies to brax"):
        _profile(env="playground:CartpoleBalance", backend="mjx", ppo=SHAPE)
    with pytest.raises(UserError, match="impl applies to playground"):
        _profile(env="brax:ant", impl="jax")
    with pytest.raises(UserError, match="generalized, positional, spring, mjx"):
        _profile(env="brax:ant", backend="physx")
    with pytest.raises(UserError, match="jax, warp"):
        _profile(env="playground:CartpoleBalance", impl="cuda", ppo=SHAPE)
    assert _profile(env="playground:CartpoleBalance", impl="warp", ppo=SHAPE).impl == "warp"


@pytest.mark.parametrize("missing", ["batch_size", "num_minibatches", "unroll_length"])
def test_playground_profile_states_its_batch_settings(missing):
    ppo = {k: v for k, v in SHAPE.items() if k != missing}
    with pytest.raises(UserError) as info:
        _profile(env="playground:CartpoleBalance", ppo=ppo)
    message = str(info.value)
    assert f"ppo.{missing}" in message
    assert "vramtune init-profile --env playground:CartpoleBalance" in message


def test_domain_randomization_is_playground_only():
    with pytest.raises(UserError, match="playground: sources only"):
        _profile(env="brax:ant", domain_randomization=True)
    with pytest.raises(UserError, match="true or false"):
        _profile(env="playground:Go1JoystickFlatTerrain", domain_randomization="yes", ppo=SHAPE)
    profile = _profile(env="playground:Go1JoystickFlatTerrain", domain_randomization=True,
                       ppo=SHAPE)
    assert profile.to_dict()["domain_randomization"] is True


def test_new_keys_leave_existing_hashes_alone():
    """domain_randomization off is not in the hashed dict: older results still resume."""
    quick = load_profile("quick")
    assert "domain_randomization" not in quick.to_dict()
    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    assert profile_from_dict({**data, "domain_randomization": False}).hash == quick.hash


def test_network_obs_keys_accepted():
    profile = _profile(env="brax:ant", network={"policy_obs_key": "state",
                                                "value_obs_key": "privileged_state"})
    assert profile.network["value_obs_key"] == "privileged_state"
    with pytest.raises(UserError, match="network: unknown key 'hidden'"):
        _profile(env="brax:ant", network={"hidden": [1]})


def test_builtin_profiles_cover_the_workloads():
    names = set(builtin_profiles())
    assert {"quick", "ant", "humanoid", "playground-cartpole", "playground-go1"} <= names
    humanoid = load_profile("humanoid")
    assert (humanoid.env, humanoid.backend) == ("brax:humanoid", "mjx")
    cartpole = load_profile("playground-cartpole")
    assert cartpole.env == "playground:CartpoleBalance" and cartpole.backend is None
    # Playground's brax_ppo_config('CartpoleBalance'), resolved into the file
    assert (cartpole.num_envs, cartpole.batch_size, cartpole.num_minibatches,
            cartpole.unroll_length) == (2048, 1024, 32, 30)
    go1 = load_profile("playground-go1")
    assert go1.network["value_obs_key"] == "privileged_state"
    # Playground's default physics, with contacts: brax_ppo_config('BallInCup') resolved
    cup = load_profile("playground-ballincup-warp")
    assert (cup.env, cup.impl) == ("playground:BallInCup", "warp")
    assert (cup.num_envs, cup.batch_size, cup.num_minibatches, cup.unroll_length) == \
        (2048, 1024, 32, 30)
    for name in names:
        profile = load_profile(name)
        assert profile.description, name
        # Trials train as the user does: evaluation on (brax's default), its memory counted.
        assert "run_evals" not in profile.ppo, f"{name}: a measurement setting in a profile"


def test_playground_go1_says_what_it_downloads():
    text = builtin_profiles()["playground-go1"].read_text()
    assert "mujoco_menagerie" in text and "git clone" in text


@pytest.mark.parametrize(("default", "canonical", "num_envs", "expected"), [
    (32768, 8192, 4096, 32768),    # at or below Playground's size: its own buffer
    (32768, 8192, 8192, 32768),
    (32768, 8192, 16384, 65536),   # above: same contacts per env
    (100_000, 2048, 3000, 146485),
    (0, 2048, 8192, 0),            # no contacts configured: nothing to scale
])
def test_naconmax_keeps_per_env_capacity_above_playgrounds_size(default, canonical, num_envs,
                                                                 expected):
    assert scaled_naconmax(default, canonical, num_envs) == expected


def test_rendered_starter_profile_loads_back():
    data = {"name": "cartpole-balance", "description": "d", "env": "playground:CartpoleBalance",
            "episode_length": 1000, "action_repeat": 1, "num_envs": 2048,
            "scaling": "hold-minibatch",
            "ppo": {"batch_size": 1024, "num_minibatches": 32, "unroll_length": 30,
                    "run_evals": False},
            "network": {"policy_hidden_layer_sizes": [32, 32], "activation": "swish"}}
    text = render_profile_yaml(data, "brax_ppo_config('CartpoleBalance')", {"playground": "0.2.0"})
    assert text.startswith("# Starter profile for playground:CartpoleBalance")
    assert "playground 0.2.0" in text
    assert "policy_hidden_layer_sizes: [32, 32]" in text
    loaded = profile_from_dict(yaml.safe_load(text))
    assert loaded.batch_size == 1024 and loaded.network["activation"] == "swish"


def test_core_imports_no_jax():
    """The parent validates sources at load time without importing JAX or Playground."""

    code = ("import sys, vramtune.workload.sources, vramtune.workload.profile; "
            "vramtune.workload.profile.load_profile('playground-go1'); "
            "bad = [m for m in ('jax', 'brax', 'mujoco_playground') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
