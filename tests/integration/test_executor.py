"""The local executor's warm standby: real processes, real trials."""

from __future__ import annotations

import time

import psutil
import pytest

from tests.conftest import shared_compile_cache
from vramtune.measure.executor import LocalExecutor
from vramtune.measure.trial import TrialRequest
from vramtune.records import Purpose, Status
from vramtune.workload.profile import load_profile

# every test runs real trials: not in the fast tier (-m 'not slow')
pytestmark = pytest.mark.slow

def _warm(profile, num_envs: int, **kwargs) -> TrialRequest:
    """A request on the session's compile cache, capped or not: nothing here asserts a cold
    compile's peak, and quick at 64/128/256 envs is compiled once per session."""
    return TrialRequest(profile, num_envs, compile_cache_dir=shared_compile_cache(),
                        cache_under_cpu_cap=True, **kwargs)


def _short(profile, num_envs: int, **kwargs) -> TrialRequest:
    """A warm run of two training steps (a fixed-length run, no steps/s window): for the
    trials whose process and limit are asserted, not their figures."""
    return _warm(profile, num_envs, purpose=Purpose.CONFIRM, training_steps=2, **kwargs)


def _standby_alive(executor: LocalExecutor) -> int | None:
    standby = executor._standby
    return standby.proc.pid if standby is not None and standby.usable() else None


def test_next_trial_runs_in_the_standby_unless_its_cap_is_higher_and_close_leaves_nothing(
        quick_short):
    executor = LocalExecutor()
    profile = load_profile(quick_short)
    first = executor.run(_warm(profile, 128))
    pid = _standby_alive(executor)
    assert first.status is Status.OK and pid is not None
    assert not any("warm standby" in n for n in first.notes)
    second = executor.run(_warm(profile, 256))
    assert second.status is Status.OK
    assert any("warm standby" in n for n in second.notes)
    assert second.host_peak_rss_bytes and second.steps_per_s
    # the standby started beside the second trial has no cap: a capped trial runs in it, the
    # standby lowering its limit to the spec's (the limit in force is the trial's)
    other = executor.run(_short(profile, 128, budget_bytes=3 * 10**9))
    assert other.status is Status.OK and other.cap == "RLIMIT_DATA=3000000000"
    assert any("warm standby" in n for n in other.notes)
    assert other.rlimit_data_bytes == 3 * 10**9
    # a lower cap (a proof run's, held below the line) runs in the standby started under 3 GB
    lower = executor.run(_short(profile, 128, budget_bytes=3 * 10**9, cap_bytes=2_500_000_000))
    assert lower.status is Status.OK and lower.cap == "RLIMIT_DATA=2500000000"
    assert any("warm standby" in n for n in lower.notes)
    assert lower.rlimit_data_bytes == 2_500_000_000
    # a higher one cannot: the standby started under 2.5 GB is closed, a fresh process runs
    higher = executor.run(_short(profile, 128, budget_bytes=3 * 10**9))
    assert higher.status is Status.OK and higher.rlimit_data_bytes == 3 * 10**9
    assert not any("warm standby" in n for n in higher.notes)
    leftover = _standby_alive(executor)
    executor.close()
    assert leftover is not None and not psutil.pid_exists(leftover) or \
        psutil.Process(leftover).status() == psutil.STATUS_ZOMBIE
    assert executor._standby is None


def test_standby_off_runs_fresh_processes(quick_short):
    executor = LocalExecutor(standby=False)
    executor.run(_short(load_profile(quick_short), 128))
    assert executor._standby is None


def _trial_children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if "vramtune.measure.child" in " ".join(p.cmdline())]


def test_capped_trials_run_together_stream_back_and_are_marked_shared(quick_short):
    """Two capped trials at once (their caps fit the host), each result as it finishes."""
    from datetime import datetime

    from vramtune.measure.cap import plan_cap

    profile = load_profile(quick_short)
    cap = int(1.5e9)
    executor = LocalExecutor(plan_cap(cap, None, None), parallel=2)
    assert executor.parallel == 2, executor.parallel_note
    results = list(executor.run_batch([_short(profile, 64, cap_bytes=cap),
                                       _short(profile, 128, cap_bytes=cap)]))
    executor.close()
    assert sorted(r.num_envs for r in results) == [64, 128]
    assert all(r.status is Status.OK and r.shared_run for r in results)
    assert all(any("memory verdict holds" in n for n in r.notes) for r in results)
    assert all(r.host_peak_data_bytes and r.host_peak_data_bytes <= cap for r in results)
    ends = [datetime.fromisoformat(r.timestamp).timestamp() for r in results]
    starts = [end - r.wall_s for end, r in zip(ends, results, strict=True)]
    assert ends == sorted(ends), "yielded in the order they finished"
    assert max(starts) < min(ends), "they ran at the same time"
    assert not _trial_children()


def test_a_batch_stopped_early_kills_what_still_runs(quick_short):
    from vramtune.measure.cap import plan_cap

    profile = load_profile(quick_short)
    cap = int(1.5e9)
    executor = LocalExecutor(plan_cap(cap, None, None), parallel=2)
    # num_envs=0 is rejected by Brax's rules before launch: it returns at once
    batch = executor.run_batch([TrialRequest(profile, 0, cap_bytes=cap),
                                TrialRequest(profile, 256, cap_bytes=cap)])
    first = next(batch)
    assert first.status is Status.INVALID and not first.shared_run
    deadline = time.monotonic() + 20  # its thread may not have launched the child yet
    while not _trial_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _trial_children(), "the second trial should be running"
    batch.close()  # what an interrupt in the sweep does to the generator
    executor.close()
    _, alive = psutil.wait_procs(_trial_children(), timeout=10)
    assert not alive
