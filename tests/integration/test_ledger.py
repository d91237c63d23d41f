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
