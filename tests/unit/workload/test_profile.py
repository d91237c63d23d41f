import pytest
import yaml

from vramtune.errors import UserError
from vramtune.workload.profile import Measure, builtin_profiles, load_profile, profile_from_dict
from vramtune.workload.rules import ScalingPolicy


def test_builtins_load_and_validate():
    names = builtin_profiles()
    assert {"quick", "ant"} <= set(names)
    for name in names:
        profile = load_profile(name)
        assert profile.name == name
        assert profile.shape_for(profile.num_envs) == profile.base_shape


def test_hash_ignores_file_location_but_not_content(tmp_path):
    quick = load_profile("quick")
    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_profile(path).hash == quick.hash
    data["ppo"]["learning_rate"] = 1e-3
    path.write_text(yaml.safe_dump(data))
    assert load_profile(path).hash != quick.hash


def test_unknown_key_names_the_key_and_the_valid_ones():
    with pytest.raises(UserError) as info:
        profile_from_dict({"name": "x", "env": "brax:fast", "num_env": 64})
    message = str(info.value)
    assert "'num_env'" in message and "num_envs" in message and "scaling" in message


def test_unknown_nested_key():
    with pytest.raises(UserError, match="measure: unknown key 'window'"):
        profile_from_dict({"name": "x", "env": "brax:fast", "measure": {"window": 1}})


def test_every_measure_key_is_read_and_checked():
    # each field of Measure, set to a value other than its default, arrives as set
    given = {"warmup_intervals": 2, "min_intervals": 4, "max_intervals": 30,
             "min_window_s": 2.5, "steps_per_epoch": 3, "min_training_steps": 7,
             "min_evals": 2, "steady_intervals": 3, "steady_tolerance": 0.01,
             "speed_tolerance": 0.05, "min_interval_s": 0.25, "max_window_s": 12.0,
             "gpu_steps_per_epoch": 8, "contact_steps": 40}
    assert set(given) == set(Measure.__dataclass_fields__)
    p = profile_from_dict({"name": "x", "env": "brax:fast", "measure": given})
    assert {k: getattr(p.measure, k) for k in given} == given
    for bad in ("abc", -0.1, 2, float("nan")):
        with pytest.raises(UserError, match="measure.steady_tolerance"):
            profile_from_dict({"name": "x", "env": "brax:fast",
                               "measure": {"steady_tolerance": bad}})


def test_managed_ppo_key_rejected():
    with pytest.raises(UserError, match="ppo.num_envs"):
        profile_from_dict({"name": "x", "env": "brax:fast", "ppo": {"num_envs": 64}})


def test_bad_scaling_policy():
    with pytest.raises(UserError, match="hold-minibatch"):
        profile_from_dict({"name": "x", "env": "brax:fast", "scaling": "grow"})


def test_scaling_parsed():
    p = profile_from_dict({"name": "x", "env": "brax:fast", "scaling": "hold-env-steps"})
    assert p.scaling is ScalingPolicy.HOLD_ENV_STEPS


def test_unknown_profile_lists_builtins():
    with pytest.raises(UserError, match="quick"):
        load_profile("no-such-profile")


def test_bad_yaml_is_a_user_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="bad.yaml: not valid YAML at line 2"):
        load_profile(path)


def test_non_positive_sizes_rejected():
    with pytest.raises(UserError, match="num_envs"):
        profile_from_dict({"name": "x", "env": "brax:fast", "num_envs": 0})


def test_a_profile_file_without_name_is_named_after_its_file(tmp_path):
    path = tmp_path / "my-walker.yaml"
    path.write_text("env: brax:fast\nbackend: generalized\nepisode_length: 100\nnum_envs: 64\n"
                    "ppo: {batch_size: 64, num_minibatches: 4, unroll_length: 5}\n")
    assert load_profile(path).name == "my-walker"


def test_speed_measure_keys_at_their_defaults_leave_the_hash_alone():
    """Older results still resume: the new keys are hashed only when set otherwise."""
    from vramtune.workload.profile import load_profile

    quick = load_profile("quick")
    data = quick.to_dict()
    assert "speed_tolerance" not in data["measure"]
    changed = profile_from_dict({**data, "measure": {**data["measure"], "speed_tolerance": 0.05}})
    assert changed.hash != quick.hash
    assert profile_from_dict(data).hash == quick.hash
