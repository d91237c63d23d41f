"""Replays of the planner on recorded trials: the rounds k workers need, pure."""

from __future__ import annotations

import pytest
from benchmarks.replay import Curve, grid_truth, outcome, replay

from vramtune.records import Status, TrialResult
from vramtune.tune.boundary import short_of_room
from vramtune.tune.planner import SearchMethod, SearchSpace, candidates

MiB = 2**20


def recorded(n: int, mib: float | None, status: Status = Status.OK) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="h", num_envs=n,
                       backend="cpu", host_peak_data_bytes=int(mib * MiB) if mib else None)


# what real trials of quick recorded (data segment, MiB); 2048 ran out of memory: no peak
RECORDS = [recorded(256, 935), recorded(512, 975), recorded(1024, 1146), recorded(1536, 1290),
           recorded(2048, None, Status.OOM)]


def space(limit_mib: float, method=SearchMethod.PREDICTIVE, refine=None) -> SearchSpace:
    return SearchSpace(start=256, max_envs=4096, refine=refine,
                       limit_bytes=int(limit_mib * MiB), is_valid=lambda n: True, method=method,
                       shape_of=lambda n: (n, 4, 10))


def test_curve_is_exact_at_recorded_sizes_and_linear_between_and_beyond():
    curve = Curve.from_records(RECORDS)
    assert curve.sizes == (256, 512, 1024, 1536)  # the OOM has no peak
    assert curve(1024) == 1146 * MiB
    assert curve(768) == pytest.approx((975 + 1146) / 2 * MiB)
    assert curve(2048) == pytest.approx((1290 + (1290 - 1146)) * MiB)  # the last slope
    assert curve(128) < curve(256)
    assert curve.truth(1200 * MiB, [256, 512, 1024, 1152, 1280]) == 1152
    with pytest.raises(ValueError):
        Curve.from_records(RECORDS[:1])


def test_outcome_is_the_record_a_capped_trial_leaves():
    curve = Curve.from_records(RECORDS)
    assert outcome(curve, 1024, 1200 * MiB).status is Status.OK
    assert outcome(curve, 1536, 1200 * MiB).status is Status.OOM


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_every_k_finds_the_grid_truth_and_more_workers_need_no_more_rounds(k):
    curve = Curve.from_records(RECORDS)
    rounds = {}
    for limit in (1100, 1200, 1280):
        sp = space(limit)
        run = replay(curve, sp, k)
        truth = grid_truth(curve, sp)
        # the grid's boundary, or a bracket around it narrower than one run's jitter; below
        # it where the sizes above fitted short of the room the search keeps (short_of_room)
        short = short_of_room(run.results, sp.limit_bytes)
        above = min(r.num_envs for r in run.results if r.num_envs > run.found)
        assert run.found <= truth and (above > truth or above in short), (limit, k, run.rounds)
        assert run.found == truth or "within one run's jitter" in run.final.reason or (
            above in short and f"{above} is short of room" in run.final.reason), (
            limit, k, run.rounds, short)
        assert all(len(r) <= k for r in run.rounds)
        assert all(n in candidates(sp) for r in run.rounds for n in r)
        rounds[limit] = len(run.rounds)
        one = replay(curve, sp, 1)
        # at most one more: the room the search keeps comes from the jitter of the peaks
        # measured so far, and a size short of it under a round's estimate may have it
        # under the next round's (4 workers at 1.2 GB: 1024 short, then not: 4 rounds, not 3)
        assert len(run.rounds) <= len(one.rounds) + (k > 1)
    assert all(r <= 8 for r in rounds.values())


def test_predictive_needs_fewer_trials_than_bisection_on_the_recording():
    curve = Curve.from_records(RECORDS)
    for limit in (1000, 1100, 1200, 1280, 1400):
        new = replay(curve, space(limit), 1)
        old = replay(curve, space(limit, SearchMethod.BISECT, refine=3), 1)
        assert new.found == old.found or ("within one run's jitter" in new.final.reason
                                          and new.found < old.found) or (
            "budget spent" in old.final.reason
            and old.found < new.found <= grid_truth(curve, space(limit))), (
            limit, new, old)
        if limit <= 1100:  # 4 x start already fails: one peak, nothing to fit, it bisects
            # (and stops a trial early where the bracket is narrower than one run's jitter)
            assert new.trials <= old.trials
        else:  # two peaks, a jump, the proof of the edge
            assert new.trials <= 5 < old.trials, (limit, new.rounds, old.rounds)


def _h100_records() -> list[TrialResult]:
    """The search trials of the recorded H100 sweep of quick under 2 GB."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[3] / "benchmarks/results/gpu/sweep_2GB_results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [TrialResult(status=Status(r["status"]), profile="quick", profile_hash="h",
                        num_envs=r["num_envs"], backend="gpu",
                        jax_peak_pool_bytes=r.get("jax_peak_pool_bytes"),
                        jax_bytes_limit=r.get("jax_bytes_limit"))
            for r in rows if r.get("kind") == "trial" and r.get("purpose") == "search"]


def test_a_pool_curve_holds_the_recorded_levels_and_fails_from_the_recorded_oom():
    records = _h100_records()
    pools = {r.num_envs: r.jax_peak_pool_bytes for r in records if r.status is Status.OK}
    curve = Curve(tuple(sorted(pools)), tuple(float(pools[n]) for n in sorted(pools)),
                  steps=True, fails_from=2048)
    assert curve(1920) == 782 * MiB and curve(1664) == 782 * MiB  # the next level up
    assert curve(768) == 526 * MiB
    assert curve(2048) == float("inf")
    limit = records[0].jax_bytes_limit
    assert outcome(curve, 2048, limit, backend="gpu").status is Status.OOM
    fit = outcome(curve, 1920, limit, backend="gpu")
    assert fit.status is Status.OK and fit.jax_peak_pool_bytes == 782 * MiB


def test_the_region_model_finds_the_recorded_h100_boundary_on_the_pool():
    # The pool moves in 256 MiB regions: the pool model (tune.pool) brackets each reading
    # to its region and reaches the recorded boundary (1920 fits, 2048 fails) in 5 trials
    # without the compile-time prior (128, 512, 2048 oom, 1792, 1920; 8 before it).
    from vramtune.tune import search

    records = _h100_records()
    pools = {r.num_envs: r.jax_peak_pool_bytes for r in records if r.status is Status.OK}
    curve = Curve(tuple(sorted(pools)), tuple(float(pools[n]) for n in sorted(pools)),
                  steps=True, fails_from=2048)
    limit = float(records[0].jax_bytes_limit)
    grid = tuple(search.round_grid(lambda n: True, 128, 2048))  # quick's grid at 2 GB
    sp = search.Space(grid, limit, 128, region_bytes=256 * MiB)
    trials: list[search.Trial] = []
    for _ in range(20):
        proposal = search.propose(trials, sp)
        if proposal.done:
            break
        for n in proposal.sizes:
            peak = curve(n)
            trials.append(search.Trial(n, Status.OK, peak) if peak <= limit
                          else search.Trial(n, Status.OOM))
    assert (proposal.fits, proposal.fails) == (1920, 2048), proposal.reason
    assert len(trials) <= 5, [t.num_envs for t in trials]
