"""The local executor's warm standby: real processes, real trials."""

from __future__ import annotations

import psutil

from vramtune.measure.executor import LocalExecutor
from vramtune.measure.trial import TrialRequest
from vramtune.records import Status
from vramtune.workload.profile import load_profile


def _standby_alive(executor: LocalExecutor) -> int | None:
    standby = executor._standby
    return standby.proc.pid if standby is not None and standby.usable() else None


def test_next_trial_runs_in_the_standby_and_close_leaves_nothing():
    executor = LocalExecutor()
    profile = load_profile("quick")
    first = executor.run(TrialRequest(profile, 128))
    pid = _standby_alive(executor)
    assert first.status is Status.OK and pid is not None
    assert not any("warm standby" in n for n in first.notes)
    second = executor.run(TrialRequest(profile, 256))
    assert second.status is Status.OK
    assert any("warm standby" in n for n in second.notes)
    assert second.host_peak_rss_bytes and second.steps_per_s
    leftover = _standby_alive(executor)
    executor.close()
    assert leftover is not None and not psutil.pid_exists(leftover) or \
        psutil.Process(leftover).status() == psutil.STATUS_ZOMBIE
    assert executor._standby is None


def test_a_standby_with_another_cap_is_not_used():
    executor = LocalExecutor()
    profile = load_profile("quick")
    executor.run(TrialRequest(profile, 128))
    other = executor.run(TrialRequest(profile, 128, budget_bytes=3 * 10**9))
    executor.close()
    assert other.status is Status.OK and other.cap == "RLIMIT_DATA=3000000000"
    assert not any("warm standby" in n for n in other.notes)


def test_standby_off_runs_fresh_processes():
    executor = LocalExecutor(standby=False)
    executor.run(TrialRequest(load_profile("quick"), 128))
    assert executor._standby is None
