"""The memory ledger of real trials: quick's parts by role at two sizes, on this CPU."""

from __future__ import annotations

import pytest

from tests.conftest import shared_compile_cache
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import Status
from vramtune.tune.ledger import ROLES, ledgers, size_ledger
from vramtune.workload.profile import load_profile

pytestmark = pytest.mark.slow
F32 = 4


@pytest.fixture(scope="module")
def trials(quick_short):
    """quick at 64 and 128 envs (brax's PPO as the user runs it), the session's compile cache."""
    profile = load_profile(quick_short)
    results = {n: run_trial(TrialRequest(profile, n, compile_cache_dir=shared_compile_cache()))
               for n in (64, 128)}
    for r in results.values():
        assert r.status is Status.OK, r.error_message
        assert r.ledger_error is None, r.ledger_error
    return profile, results


def test_the_parts_and_the_unexplained_part_add_up_to_the_measured_peak(trials):
    _, results = trials
    for r in results.values():
        row = size_ledger(r)
        assert all(line.bytes is not None for line in row.lines), row.lines
        assert row.peak_bytes == r.host_peak_data_bytes  # the figure the cap counts on CPU
        assert row.parts_bytes + row.unexplained_bytes == row.peak_bytes
        # what XLA counts is a small part of a CPU process's data segment: the rest is named
        assert 0 < row.parts_bytes < row.peak_bytes
        # the phases: the peak so far before the epoch's compile, after it, and at the end
        assert 0 < row.before_compile_bytes <= row.after_compile_bytes <= row.peak_bytes
        # brax evaluates once before its first epoch: that phase comes first
        assert 0 < row.before_eval_bytes <= row.after_eval_bytes <= row.before_compile_bytes
        # the epoch's scan: the trial's length, and its loss metrics stacked per step
        assert r.ledger_epoch_steps >= 2 and r.ledger_stacked_bytes_per_step > 0


def test_the_rollout_per_env_is_the_transition_from_the_spaces_times_the_batch(trials):
    import jax

    from vramtune.workload.build import build_environment

    profile, results = trials
    env, _ = build_environment(profile, 1)
    obs, act = env.observation_size, env.action_size
    metrics = len(jax.jit(env.reset)(jax.random.PRNGKey(0)).metrics)
    # observation and next observation, action, reward, discount; the policy's log_prob,
    # raw_action, distribution parameters (loc, scale); truncation, episode_done, and
    # episode_metrics (sum_reward, length, one per env metric): float32 each
    per_transition = F32 * (2 * obs + act + 1 + 1 + 1 + act + 2 * act + 1 + 1 + 2 + metrics)
    for n, r in results.items():
        unrolls_per_env = r.batch_size * r.num_minibatches // n
        assert r.ledger_rollout_bytes == n * unrolls_per_env * profile.unroll_length * per_transition
        assert r.ledger_rollout_bytes < r.ledger_epoch_temp_bytes  # a part of the temporaries


def test_doubling_num_envs_doubles_the_per_env_parts_and_keeps_the_fixed_ones(trials):
    _, results = trials
    small, large = results[64], results[128]
    for field in ("ledger_env_state_bytes", "ledger_rollout_bytes"):
        assert getattr(large, field) == 2 * getattr(small, field), field
    # the epoch's temporaries: per env, with a fixed part of a few KB (XLA's own)
    assert large.ledger_epoch_temp_bytes == pytest.approx(
        2 * small.ledger_epoch_temp_bytes, rel=0.01)
    fixed = [f for f, _ in ROLES if f not in ("ledger_env_state_bytes", "ledger_epoch_temp_bytes")]
    for field in fixed:
        assert getattr(large, field) == pytest.approx(getattr(small, field), rel=0.01), field
    assert small.ledger_params_bytes > 0 and small.ledger_optimizer_bytes > small.ledger_params_bytes
    (a, b) = ledgers(list(results.values()))
    assert (a.num_envs, b.num_envs) == (64, 128)


def test_a_run_whose_length_and_evaluation_dominate_is_warned_before_it_starts(tmp_path, capsys):
    """A real trial of a workload whose epochs stack 48 KiB of loss metrics per training step
    (16 updates x 64 minibatches of 12 metrics) and whose evaluation (65,536 eval envs through
    a 256-wide policy) holds more than 64 envs of training and over 5% of the peak: a run of
    10^9 steps with brax's default num_evals=1 is one
    epoch of 15.6 M steps, priced far past a 1.3 GB line before it starts. XLA's own count of
    the same epoch compiled 1,000 steps longer (the compile-only probe) grows by exactly what
    the jaxpr said per step."""
    from dataclasses import replace

    from vramtune.cli import app
    from vramtune.measure.cap import cpu_cap
    from vramtune.measure.footprint import FootprintProbe
    from vramtune.results.store import RunHeader, append_result, create_run
    from vramtune.workload.profile import profile_from_dict

    quick = load_profile("quick")
    data = quick.to_dict()
    data.update(name="quick-long", episode_length=10, num_envs=64,
                ppo={**data["ppo"], "batch_size": 1, "num_minibatches": 64, "unroll_length": 1,
                     "num_updates_per_batch": 16, "num_eval_envs": 65_536},
                network={"policy_hidden_layer_sizes": [256], "value_hidden_layer_sizes": [8]},
                measure={**data["measure"], "min_window_s": 1.0, "max_window_s": 1.5})
    profile = profile_from_dict(data, source="test")
    result = run_trial(TrialRequest(profile, 64, budget_bytes=int(1.3e9),
                                    compile_cache_dir=shared_compile_cache()))
    assert result.status is Status.OK, result.error_message
    assert result.ledger_error is None, result.ledger_error
    steps, per_step = result.ledger_epoch_steps, result.ledger_stacked_bytes_per_step
    assert steps >= 2 and per_step > 0 and per_step % (16 * 64 * 4) == 0  # f32 per SGD step
    row = size_ledger(result)
    assert 0 < row.before_eval_bytes <= row.after_eval_bytes <= row.before_compile_bytes

    longer = replace(profile, measure=replace(profile.measure, steps_per_epoch=steps + 1_000))
    probe = FootprintProbe(cpu_cap(None), longer.to_dict(), [(64, 1, 64)], every_size=True,
                           timeout_s=240).start()
    found = probe.result(240)
    assert found is not None and found.error is None, found
    assert found.sizes[0].temp_bytes - result.ledger_epoch_temp_bytes == 1_000 * per_step

    header = RunHeader(profile.name, profile.hash, profile.to_dict(), int(1.3e9), 0.1, {}, {})
    create_run(tmp_path / "run", header).release()
    append_result(tmp_path / "run", result)
    assert app.main(["explain", str(tmp_path / "run"), "--num-timesteps", str(10**9)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "64 envs: the run as configured will not fit: its epochs of 15,625,000" in err
    assert "the evaluation holds" in err and "num_eval_envs=65,536" in err
    assert app.main(["emit-config", str(tmp_path / "run"), "--objective", "max-envs",
                     "--gpu-mem", "1.3GB", "--num-timesteps", str(10**9)]) == 0
    out = capsys.readouterr().out
    assert "# NOTICE: 64 envs: the run as configured will not fit" in out
