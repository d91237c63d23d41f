"""next_steps: what a round runs, one trial at a time or several at once."""

from __future__ import annotations

from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.planner import Phase
from vramtune.tune.sweep import SweepConfig, next_steps
from vramtune.workload.profile import load_profile


def result(n: int, status: Status = Status.OK, purpose: Purpose = Purpose.SEARCH) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="x", num_envs=n,
                       host_peak_rss_bytes=n * 1000, steps_per_s=float(n), purpose=purpose)


def config(max_envs: int = 1024) -> SweepConfig:
    return SweepConfig(load_profile("quick"), None, 0.1, 64, max_envs, 1, confirm=False)


def sizes(steps):
    return [(s.phase, s.num_envs) for s in steps]


def test_one_at_a_time_plans_as_before():
    c = config()
    assert sizes(next_steps(c, [], c.space(), 1)) == [(Phase.DOUBLING, 64)]


def test_several_at_once_take_the_next_rungs_of_the_ladder():
    c = config()
    assert sizes(next_steps(c, [], c.space(), 3)) == \
        [(Phase.DOUBLING, 64), (Phase.DOUBLING, 128), (Phase.DOUBLING, 256)]
    done = [result(64), result(128), result(256)]
    assert sizes(next_steps(c, done, c.space(), 3)) == \
        [(Phase.DOUBLING, 512), (Phase.DOUBLING, 1024)]


def test_after_a_failure_refinement_is_one_trial_and_rungs_above_it_are_ignored():
    c = config()
    done = [result(64), result(128), result(256, Status.OOM), result(512, Status.OOM)]
    steps = next_steps(c, done, c.space(), 4)
    assert len(steps) == 1 and steps[0].phase is Phase.REFINING
    assert 128 < steps[0].num_envs < 256


def test_the_proof_of_the_pick_follows_the_search_alone():
    c = config(max_envs=128)
    steps = next_steps(c, [result(64), result(128)], c.space(), 2)
    assert sizes(steps) == [(Phase.REPEATING, 128)]
