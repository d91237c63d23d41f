"""Workloads for real: brax, MuJoCo Playground and user factories in real trial subprocesses.

Factories live in tests/workloads_fixture.py (and tests/workloads_broken_fixture.py); the
child imports them by the name in the profile, as it would a user's module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli, shared_compile_cache
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.measure.wire import Event, WorkloadInfo
from vramtune.records import Status, TrialResult
from vramtune.workload.profile import builtin_profiles, load_profile, profile_from_dict

FIXTURE = Path(__file__).resolve().parent.parent / "workloads_fixture.py"
BROKEN_FIXTURE = FIXTURE.with_name("workloads_broken_fixture.py")
# Small batch settings: a trial of any source costs seconds of training, not minutes.
SMALL_PPO = {"batch_size": 128, "num_minibatches": 4, "unroll_length": 10,
             "num_updates_per_batch": 1, "run_evals": False}
SHORT = {"warmup_intervals": 0, "min_intervals": 1, "min_window_s": 0,
         "min_training_steps": 1, "steady_intervals": 1}
# SHORT, ended after two speed intervals at most whether or not the rate or the memory has
# settled: for a trial that asserts that it trains, not a figure's precision
BRIEF = {**SHORT, "max_intervals": 2}


def _quick(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    data.update(changes)
    return data


def _trial(data: dict[str, Any], num_envs: int = 128, *, cold: bool = False
           ) -> tuple[TrialResult, list[dict]]:
    """One real trial. On the session's compile cache unless ``cold``: only a test that
    compares memory figures needs the cold compile's peak."""
    events: list[Event] = []
    cache = None if cold else shared_compile_cache()
    result = run_trial(TrialRequest(profile_from_dict(data), num_envs, compile_cache_dir=cache),
                       events.append)
    return result, [e.info for e in events if isinstance(e, WorkloadInfo)]


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines()
             if line.strip() and not line.startswith("reading the canonical")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


# ----------------------------------------------------------------------------- profiles


def test_profiles_lists_every_builtin_on_one_line():
    proc = run_cli("profiles", timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["name", "env", "physics"]
    for name in builtin_profiles():
        profile = load_profile(name)
        (line,) = [line for line in lines[1:] if line.split()[0] == name]
        assert profile.env in line and profile.description in line
    assert len(lines) == 1 + len(builtin_profiles())
    (humanoid,) = [line for line in lines if line.startswith("humanoid ")]
    assert "backend mjx" in humanoid
    (cartpole,) = [line for line in lines if line.startswith("playground-cartpole ")]
    assert "impl auto" in cartpole


def test_profiles_json():
    proc = run_cli("profiles", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert rows["humanoid"]["backend"] == "mjx"
    assert rows["playground-go1"]["env"] == "playground:Go1JoystickFlatTerrain"


# ----------------------------------------------------------------------------- init-profile


@pytest.mark.slow
def test_init_profile_playground_resolves_its_config_and_never_overwrites(tmp_path):
    out = tmp_path / "cart.yaml"
    proc = run_cli("init-profile", "--env", "playground:CartpoleBalance", "-o", str(out),
                   timeout=180)
    assert proc.returncode == 0, proc.stderr
    profile = load_profile(out)
    # mujoco_playground.config.dm_control_suite_params.brax_ppo_config('CartpoleBalance')
    assert (profile.num_envs, profile.batch_size, profile.num_minibatches,
            profile.unroll_length) == (2048, 1024, 32, 30)
    assert profile.ppo["discounting"] == 0.995 and profile.ppo["num_updates_per_batch"] == 16
    assert "run_evals" not in profile.ppo and "num_timesteps" not in profile.ppo
    assert profile.network["value_hidden_layer_sizes"] == [256] * 5
    assert profile.backend is None and profile.impl is None
    assert "brax_ppo_config('CartpoleBalance')" in out.read_text()

    before = out.read_text()
    refused = run_cli("init-profile", "--env", "brax:ant", "-o", str(out), timeout=60)
    assert "exists" in _one_line_error(refused) and "--force" in refused.stderr
    assert out.read_text() == before

    forced = run_cli("init-profile", "--env", "brax:humanoid", "--backend", "mjx", "-o",
                     str(out), "--force", "--name", "my-humanoid", timeout=180)
    assert forced.returncode == 0, forced.stderr
    humanoid = load_profile(out)
    assert (humanoid.name, humanoid.env, humanoid.backend) == ("my-humanoid", "brax:humanoid",
                                                               "mjx")
    assert (humanoid.num_envs, humanoid.batch_size, humanoid.unroll_length) == (2048, 1024, 10)
    assert humanoid.ppo["reward_scaling"] == 0.1


def test_init_profile_factory_template_takes_the_factory_defaults(tmp_path):
    out = tmp_path / "mine.yaml"
    proc = run_cli("init-profile", "--env", "tests.workloads_fixture:make_fast_env", "-o",
                   str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    profile = load_profile(out)
    assert profile.env_kwargs == {"backend": "generalized", "obs_noise": 0.0}
    assert profile.backend is None and profile.shape_for(profile.num_envs) is not None
    assert "template" in out.read_text()


@pytest.mark.parametrize(("args", "expected"), [
    (["--env", "ant"], "expected brax:<name>"),
    (["--env", "brax:"], "expected brax:<name>"),
    (["--env", "brax:no_such_env"], "unknown brax env 'no_such_env'"),
    # imports MuJoCo Playground (seconds): not in the fast tier
    pytest.param(["--env", "playground:NoSuchEnv"], "unknown Playground env 'NoSuchEnv'",
                 marks=pytest.mark.slow),
    (["--env", "tests.workloads_fixture:no_such_factory"], "no callable 'no_such_factory'"),
    (["--env", "tests.no_such_module:make"], "No module named 'tests.no_such_module'"),
    (["--env", "playground:CartpoleBalance", "--backend", "mjx"], "brax: sources only"),
    (["--env", "brax:ant", "--backend", "physx"], "not one of"),
])
def test_init_profile_bad_env_is_one_line_and_writes_nothing(tmp_path, args, expected):
    out = tmp_path / "p.yaml"
    proc = run_cli("init-profile", *args, "-o", str(out), timeout=120)
    assert expected in _one_line_error(proc)
    assert not out.exists()


def test_init_profile_missing_folder(tmp_path):
    proc = run_cli("init-profile", "--env", "brax:ant", "-o", str(tmp_path / "no" / "p.yaml"),
                   timeout=60)
    assert "does not exist" in _one_line_error(proc)


# ----------------------------------------------------------------------------- user factory


@pytest.mark.slow
def test_user_factory_trains_with_its_env_kwargs():
    result, workload = _trial(_quick(name="mine", env="tests.workloads_fixture:make_fast_env",
                                     backend=None, env_kwargs={"backend": "generalized"},
                                     measure=BRIEF))
    assert result.status is Status.OK, result.error_message
    assert result.steps_per_s and result.steps_per_s > 0
    assert result.host_peak_rss_bytes and result.host_peak_rss_bytes > 100 * 2**20
    assert workload and workload[0]["source"] == "factory"


def _factory(env: str, **env_kwargs: Any) -> dict[str, Any]:
    return _quick(name="broken", env=env, backend=None, env_kwargs=env_kwargs)


@pytest.mark.slow
@pytest.mark.parametrize(("data", "error_type", "message", "where"), [
    # the module cannot be imported: where = the import in vramtune's loader
    (_factory("tests.no_such_module:make"), "ModuleNotFoundError",
     "No module named 'tests.no_such_module'", "vramtune/workload/"),
    # the user's module fails while importing: where = the failing line of that module
    (_factory("tests.workloads_broken_fixture:make_env"), "ModuleNotFoundError",
     "No module named 'vramtune_no_such_dependency'", f"{BROKEN_FIXTURE}:"),
    # the factory itself raises: where = its raise
    (_factory("tests.workloads_fixture:make_broken_env"), "RuntimeError",
     "asset robot.xml not found", f"{FIXTURE}:"),
    (_factory("tests.workloads_fixture:no_such_factory"), "AttributeError",
     "has no attribute 'no_such_factory'", "vramtune/workload/"),
    (_factory("tests.workloads_fixture:NOT_CALLABLE"), "TypeError",
     "not a callable factory", "vramtune/workload/"),
    # env_kwargs reach the factory (this one rejects them)
    (_factory("tests.workloads_fixture:make_fast_env", obs_noise=0.5), "ValueError",
     "env_kwargs did reach the factory", f"{FIXTURE}:"),
    (_quick(name="nope", env="brax:no_such_env"), "ValueError",
     "unknown brax env 'no_such_env'; available: ant", "vramtune/workload/"),
])
def test_broken_environment_is_an_error_record_not_a_crash(data, error_type, message, where):
    result, _ = _trial(data)
    assert result.status is Status.ERROR, (result.status, result.error_message)
    assert result.error_type and result.error_type.endswith(error_type)
    assert message in (result.error_message or "")
    assert result.error_where and result.error_where.startswith("build_env: ")
    assert where in result.error_where, result.error_where
    assert "<frozen" not in result.error_where
    assert result.steps_per_s is None and result.compile_s is None
    assert result.wall_s is not None and result.wall_s < 120


# ----------------------------------------------------------------------------- overrides


@pytest.mark.slow
def test_ppo_override_reaches_ppo_train():
    """An override brax rejects proves the profile's ppo: block is what ppo.train receives."""
    data = _quick(name="override")
    data["ppo"] = {**data["ppo"], "not_a_ppo_kwarg": 1}
    result, _ = _trial(data)
    assert result.status is Status.ERROR
    assert "unexpected keyword argument 'not_a_ppo_kwarg'" in (result.error_message or "")
    assert result.error_where and result.error_where.startswith("train: ")


@pytest.mark.slow
def test_network_override_changes_measured_memory():
    """Wider hidden layers (profile network:) reach the networks ppo.train builds: the
    trial's peak host memory grows by their parameters, gradients and optimiser state."""
    # Both trials alike, and cheap: 64 envs, 8 evaluation envs (a 2048-wide policy over 128
    # of them took most of the wide trial's epochs) and at most two intervals (the wide
    # trial's memory creeps past the 0.5 % rule for many epochs). The parameters, gradients
    # and optimiser state are there from the first step: the wide peak measured ~300 MiB
    # above the narrow one this way, twice the margin asserted.
    small = {"measure": BRIEF, "ppo": {**_quick()["ppo"], "num_eval_envs": 8}}
    base, _ = _trial(_quick(name="narrow", **small), 64, cold=True)
    wide_net = {"policy_hidden_layer_sizes": [2048, 2048],
                "value_hidden_layer_sizes": [2048, 2048]}
    wide, workload = _trial(_quick(name="wide", network=wide_net, **small), 64, cold=True)
    assert base.status is Status.OK and wide.status is Status.OK, (base.error_message,
                                                                    wide.error_message)
    assert workload[0]["network"]["policy_hidden_layer_sizes"] == [2048, 2048]
    assert base.host_peak_rss_bytes and wide.host_peak_rss_bytes
    assert wide.host_peak_rss_bytes - base.host_peak_rss_bytes > 150 * 2**20, (
        base.host_peak_rss_bytes, wide.host_peak_rss_bytes)


# ----------------------------------------------------------------------------- slow tier


@pytest.mark.slow
@pytest.mark.slowest
def test_playground_cartpole_trial_on_cpu(tmp_path):
    """A hand-written Playground profile: batch settings stated, the rest from Playground's
    brax_ppo_config (filled in by the child), impl jax picked automatically on CPU."""
    # It asserts no figure's precision: two intervals are enough for the rate's bound, and
    # batch 32 x 4 minibatches is one 10-step unroll of the 128 envs per training step
    # (Playground's 10 epochs between progress calls make each call 10 training steps).
    data = {"name": "cartpole-small", "env": "playground:CartpoleBalance", "num_envs": 128,
            "ppo": {**SMALL_PPO, "batch_size": 32}, "measure": BRIEF}
    path = tmp_path / "cartpole.yaml"
    path.write_text(yaml.safe_dump(data))
    result, workload = _trial(yaml.safe_load(path.read_text()))
    assert result.status is Status.OK, (result.error_message, result.error_where)
    assert result.backend == "cpu"
    assert result.steps_per_s and result.steps_per_s > 0 and result.compile_s
    assert result.host_peak_rss_bytes and result.host_peak_rss_bytes > 100 * 2**20
    # Playground's config trains 10 epochs (num_resets_per_eval) between progress calls:
    # the training-only rate is at most ~the window's whole rate (resets and the loop
    # between), not brax's training/sps, which counts the 10 over one epoch's time (10x)
    assert result.measured_intervals and result.measured_intervals >= 2
    assert result.training_steps and result.measure_window_s
    env_steps = result.training_steps * result.batch_size * result.num_minibatches * 10
    assert result.steps_per_s < 2 * env_steps / result.measure_window_s, (
        result.steps_per_s, env_steps, result.measure_window_s)
    (info,) = workload
    assert info["source"] == "playground" and info["impl"] == "jax (auto)"
    # the ledger on MJX: the parts counted from brax's own arguments, evaluation off (not
    # counted: it stays in the unexplained part, which says so), adding up to the peak
    from vramtune.tune.ledger import size_ledger

    assert result.ledger_error is None and result.ledger_eval_temp_bytes is None
    row = size_ledger(result)
    assert row.parts_bytes + row.unexplained_bytes == row.peak_bytes
    assert result.ledger_env_state_bytes > 0 and result.ledger_params_bytes > 0
    assert 0 < result.ledger_rollout_bytes < result.ledger_epoch_temp_bytes
    # Playground's own values for what the profile left out; the profile's own win
    assert info["playground_defaults"]["discounting"] == 0.995
    assert info["playground_defaults"]["reward_scaling"] == 10.0
    assert "batch_size" not in info["playground_defaults"]
    assert "num_updates_per_batch" not in info["playground_defaults"]
    print(f"\nCartpoleBalance x128: compile {result.compile_s:.1f} s, "
          f"{result.steps_per_s:,.0f} steps/s, peak RSS {result.host_peak_rss_bytes / 2**20:.0f} MiB")


@pytest.mark.slow
@pytest.mark.slowest
def test_ant_mjx_trial_at_64_envs():
    # the shipped profile, measured briefly: it asserts that MJX trains through a trial at
    # the profile's batch rule, not how fast or how much memory. No evaluation: brax's
    # evaluator is a second XLA program around the MJX step, and compiling it took half of
    # this test (94 s -> 53 s alone on 2 cores); evaluation is in every quick trial. Episodes
    # cut to 100 steps (a reset's cost, whatever evaluation does). One speed interval (the
    # trial ends at its second progress call, memory steady or not), unrolls of one step and
    # one update per batch: batch_size and num_minibatches, the rule under test, are kept.
    data = yaml.safe_load(builtin_profiles()["ant"].read_text())
    short = {**data, "measure": {**SHORT, "max_intervals": 1}, "episode_length": 100,
             "ppo": {**data["ppo"], "run_evals": False, "unroll_length": 1,
                     "num_updates_per_batch": 1}}
    result = run_trial(TrialRequest(profile_from_dict(short), 64))
    assert result.status is Status.OK, (result.error_message, result.error_where)
    assert result.steps_per_s and result.steps_per_s > 0
    assert (result.batch_size, result.num_minibatches) == (2048, 1)  # hold-minibatch at 64
    print(f"\nant (mjx) x64: compile {result.compile_s:.1f} s, {result.steps_per_s:,.0f} "
          f"steps/s, peak RSS {result.host_peak_rss_bytes / 2**20:.0f} MiB")


@pytest.mark.slow
def test_an_error_inside_jax_is_summarised_by_the_users_exception():
    """JAX re-raises an error from inside a traced function with a note about its filtered
    frames: the record's last line is the user's exception, not that note."""
    result, _ = _trial(_factory("tests.workloads_fixture:make_env_failing_in_jit"))
    assert result.status is Status.ERROR, result.error_message
    assert result.error_type == "builtins.AttributeError"
    lines = (result.error_message or "").strip().splitlines()
    assert lines[-1] == "AttributeError: 'int' object has no attribute 'reset'"
    assert "JAX has removed" not in (result.error_message or "")
    assert result.error_where and "workloads_fixture.py" in result.error_where


@pytest.mark.slow
def test_a_factory_is_imported_from_the_profile_folder_not_the_cwd(tmp_path):
    """`my_envs_<id>:make` next to the profile file is found; the cwd is never searched."""
    module = f"vramtune_test_envs_{tmp_path.name.replace('-', '_')}"
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / f"{module}.py").write_text(
        "def make():\n    from brax import envs\n"
        "    return envs.get_environment('fast', backend='generalized')\n")
    data = _quick(name="mine", env=f"{module}:make", backend=None)
    data["measure"] = {**data.get("measure", {}), **BRIEF}
    path = folder / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_trial(TrialRequest(load_profile(path), 128,
                                    compile_cache_dir=shared_compile_cache()))
    assert result.status is Status.OK, result.error_message
    # The same profile as a dict has no folder: the module is not importable from anywhere.
    missing, _ = _trial(data)
    assert missing.status is Status.ERROR and "No module named" in (missing.error_message or "")
