"""The GPU pool model: readings bracketed to allocator regions, and the search it aims on the
recorded H100 and H200 sweeps of quick under 2 GB (pool limit 844 MiB)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from benchmarks.replay import Recorded, replay_answers

from vramtune.measure.footprint import read_footprint
from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import RunHeader, load_run
from vramtune.tune import pool
from vramtune.tune import search as S
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchMethod, SearchSpace, StepKind, plan_round
from vramtune.tune.prior import slope_prior
from vramtune.units import headroom_limit_bytes
from vramtune.workload.profile import profile_from_dict

MiB = 2**20
REGION, LIMIT = 256 * MiB, 844 * MiB
RESULTS = Path(__file__).parents[3] / "benchmarks" / "results"
H100 = RESULTS / "gpu" / "sweep_2GB_results.jsonl"
H200 = RESULTS / "gpu-2026-11-27" / "sweep1_results.jsonl"
FOOTPRINT = RESULTS / "gpu-2026-11-27" / "sweep1_footprint.json"


def reading(n: int, pool_mib: float | None, live_mib: float | None = None) -> pool.Reading:
    return pool.Reading(n, None if pool_mib is None else pool_mib * MiB,
                        None if live_mib is None else live_mib * MiB)


def fit(readings, prior: SlopePrior | None = None) -> pool.PoolModel:
    model = pool.fit(readings, region_bytes=REGION, limit_bytes=LIMIT, prior=prior)
    assert model is not None
    return model


# ------------------------------------------------------------------ the chunked pool fit

def test_levels_lie_whole_regions_from_the_largest_pool_under_the_limit():
    assert pool.top_level([258 * MiB], LIMIT, REGION) == 770 * MiB
    assert pool.top_level([258 * MiB, 782 * MiB], LIMIT, REGION) == 782 * MiB
    assert pool.top_level([], LIMIT, REGION) == LIMIT - REGION / 2


def test_the_fit_brackets_each_reading_to_its_region_and_aims_under_the_top_level():
    # a made-up pool: need = 0.4 MiB per env, levels 2 + 256 k MiB; 2048 runs out of memory
    def level(n: int) -> float:
        return 2 + 256 * math.ceil((0.4 * n - 2) / 256)

    sizes = (256, 1024, 1536)
    model = fit([reading(n, level(n)) for n in sizes] + [reading(2048, None)])
    assert model.top_bytes == 770 * MiB
    for n in sizes:  # each size's predicted pool is the level it read
        assert model.interval(n).mean_bytes == pytest.approx(level(n) * MiB)
    assert model.prob_fits(1536) > 0.95 and model.prob_fits(2048) < 0.1
    assert model.prob_fits(1024) >= model.prob_fits(1792) >= model.prob_fits(1920)
    slope, lower = model.growth()
    assert 0.3 * MiB < slope < 0.55 * MiB and 0 < lower < slope
    # the prediction's own probability and the pool's levels agree: a level at or under
    # the top fits; the 844 MiB limit holds no more than the 770 MiB level does
    pred = model.interval(1792)
    assert pred.prob_at_most(LIMIT) == pytest.approx(model.prob_fits(1792))
    assert pred.prob_at_most(770 * MiB) == pytest.approx(model.prob_fits(1792))
    assert pred.lower_bytes <= pred.mean_bytes <= pred.upper_bytes


def test_an_out_of_memory_reading_moves_the_line():
    before = fit([reading(128, 258), reading(1024, 514)])
    after = fit([reading(128, 258), reading(1024, 514), reading(2048, None)])
    assert before.prob_fits(2048) > 0.6 and after.prob_fits(2048) < 0.1
    assert after.prob_fits(1920) < before.prob_fits(1920) - 0.4
    assert after.prob_fits(1536) > 0.95  # not below what 1024's pool allows


def test_the_fixed_cost_floors_the_need_from_the_live_peak_at_or_below_a_size():
    # 512 MiB live at 128 envs: a fixed cost past the first region; the line under it is free
    model = fit([reading(128, 770, live_mib=512), reading(512, 770, live_mib=520)])
    assert model.floor_at(64) == 0.0
    assert model.floor_at(128) == 512 * MiB and model.floor_at(1024) == 520 * MiB
    assert model.prob_need_at_most(1024, 258 * MiB) < 0.01  # never under the fixed cost
    # without the floor the line itself must reach the third level at 128 envs
    bare = fit([reading(128, 770), reading(512, 770)])
    assert bare.growth()[0] < model.growth()[0]


def test_a_prior_off_by_more_than_its_band_is_outweighed_and_a_prior_stands_in_for_a_size():
    assert pool.fit([reading(128, 258)], region_bytes=REGION, limit_bytes=LIMIT) is None
    with_prior = fit([reading(128, 258)], SlopePrior(0.2 * MiB))
    assert with_prior.sizes == (128,) and 0 < with_prior.prob_fits(2048) < 1
    # the pool grows at 0.9 MiB/env, 4.5x the prior: three readings outweigh it
    far = fit([reading(128, 258), reading(512, 514), reading(768, 770), reading(1024, None)],
              SlopePrior(0.2 * MiB))
    assert far.growth()[0] > 0.6 * MiB


def test_misses_flag_a_pool_the_others_rule_out_and_an_oom_they_said_fits():
    assert pool.misses([reading(128, 258), reading(1024, 514), reading(1536, 770),
                        reading(2048, None)], region_bytes=REGION, limit_bytes=LIMIT) == []
    # a pool that shrank as num_envs grew: not a pool of this model
    odd = [reading(128, 770), reading(512, 770), reading(1024, 258), reading(1536, 258)]
    assert {m.what for m in pool.misses(odd, region_bytes=REGION, limit_bytes=LIMIT)}
    # an OOM far under what the others put at the first level
    early = [reading(128, 258), reading(256, None), reading(512, 258), reading(1024, 258)]
    found = pool.misses(early, region_bytes=REGION, limit_bytes=LIMIT)
    assert [m.what for m in found if m.num_envs == 256] == ["oom-at-fit"]


# ------------------------------------------------------------------ the search on a pool

def test_the_search_reads_proof_runs_and_timeouts_as_no_pool_readings():
    sp = S.Space(tuple(S.round_grid(lambda n: True, 128, 2048)), LIMIT, 128,
                 region_bytes=REGION)
    trials = [S.Trial(128, Status.OK, 258 * MiB), S.Trial(1024, Status.OK, 514 * MiB),
              S.Trial(1536, Status.TIMEOUT)]
    prop = S.propose(trials, sp)
    assert isinstance(prop.model, pool.PoolModel) and prop.model.sizes == (128, 1024)
    assert not prop.done and 1024 < prop.sizes[0] < 1536
    # a longer run at 1024 that read a pool off the levels' grid is no reading: the model
    # and the top level it aims under stay the search trials'
    proof = S.Trial(1024, Status.OK, 782 * MiB, proof=True)
    again = S.propose([*trials, proof], sp)
    assert isinstance(again.model, pool.PoolModel) and again.model.sizes == (128, 1024)
    assert again.model.top_bytes == prop.model.top_bytes and again.sizes == prop.sizes


def _recorded(path: Path) -> tuple[RunHeader, list[TrialResult]]:
    run = load_run(path)
    return run.header, list(run.results)


def _space(header: RunHeader, prior: SlopePrior | None) -> SearchSpace:
    prof = profile_from_dict(header.profile, source="header")
    return SearchSpace(start=prof.num_envs, max_envs=prof.max_envs, refine=None,
                       limit_bytes=headroom_limit_bytes(header.budget_bytes,
                                                        header.headroom_fraction),
                       is_valid=lambda n: prof.sweepable(n, 1), method=SearchMethod.PREDICTIVE,
                       shape_of=lambda n: (n, 4, 10), prior=prior)


@pytest.mark.parametrize("path, with_prior", [(H100, True), (H100, False), (H200, True)],
                         ids=["h100-prior", "h100-no-prior", "h200-prior"])
def test_recorded_gpu_sweeps_reach_their_boundary_in_at_most_5_search_trials(path, with_prior):
    # The recorded sweeps took 7 (H100, no prior then) and 6 (H200, prior) search trials,
    # the model missing at every step; the H200's footprint stands in for the H100's prior
    # (same profile and jax: a sweep today probes it after the first trial).
    header, records = _recorded(path)
    assert [r.num_envs for r in records if r.purpose is Purpose.SEARCH][-1] == 1920
    prior = slope_prior(read_footprint(FOOTPRINT)) if with_prior else None
    run = replay_answers(Recorded(records), _space(header, prior), max_rounds=10)
    sizes = [r.num_envs for r in run.results]
    assert run.final.phase is StepKind.DONE
    assert run.found == 1920 and "1920 fits, 2048 fails" in run.final.reason, sizes
    assert len(sizes) <= 5, sizes
    assert "model missed" not in " ".join(
        plan_round(list(run.results[:i]), _space(header, prior))[0].reason
        for i in range(len(sizes)))


def test_the_model_fitted_on_the_recorded_h200_trials_puts_the_edge_between_1920_and_2048():
    _, records = _recorded(H200)
    readings = [pool.Reading(r.num_envs, r.jax_peak_pool_bytes if r.status is Status.OK
                             else None, r.jax_peak_bytes_in_use)
                for r in records if r.purpose is Purpose.SEARCH]
    prior = slope_prior(read_footprint(FOOTPRINT))
    model = fit(readings, prior)
    assert pool.misses(readings, region_bytes=REGION, limit_bytes=LIMIT, prior=prior) == []
    assert model.top_bytes == 770 * MiB
    # 1920 and 2048 lie 50 MiB of need apart, three times the soft edges' sd: a re-run of
    # either is a fair bet, not a certainty
    assert model.prob_fits(1792) > 0.95 and model.prob_fits(1920) > 0.7
    assert model.prob_fits(2048) < 0.25 and model.prob_fits(1536) > 0.99
    for r in readings:  # each search trial's pool is the level the model puts it at
        if r.pool_bytes is not None:
            assert model.interval(r.num_envs).mean_bytes == r.pool_bytes
    # the pool grows about twice XLA's compile-time count per env
    assert 1.3 < model.growth()[0] / prior.bytes_per_env < 2.1


def test_the_planner_fits_a_gpu_pool_as_a_pool_and_a_cpu_figure_as_before():
    from vramtune.tune.boundary import as_trial, uses_pool
    from vramtune.tune.planner import POOL_REGION_BYTES, search_space

    def gpu(n: int, pool_mib: float, live_mib: float) -> TrialResult:
        return TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=n,
                           backend="gpu", jax_peak_pool_bytes=int(pool_mib * MiB),
                           jax_peak_bytes_in_use=int(live_mib * MiB), jax_bytes_limit=LIMIT)

    header, _ = _recorded(H200)
    space = _space(header, None)
    results = [gpu(128, 258, 195), gpu(1024, 514, 264)]
    assert uses_pool(results) and search_space(results, space).region_bytes == POOL_REGION_BYTES
    trial = as_trial(results[1], space.limit_bytes, pool=True)
    assert trial.peak_bytes == 514 * MiB and trial.live_bytes == 264 * MiB
    assert as_trial(results[1], space.limit_bytes).peak_bytes == 264 * MiB  # the live peak
    step = plan_round(results, space)[0]
    assert step.phase is StepKind.PREDICTING and 1024 < (step.num_envs or 0) <= 2048
    assert "predicted median" in step.reason and "by the model alone" in step.reason
    cpu = [TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=n,
                       backend="cpu", host_peak_data_bytes=int(mib * MiB))
           for n, mib in ((128, 900), (512, 990))]
    assert not uses_pool(cpu) and search_space(cpu, space).region_bytes is None
    assert "predicted median" not in plan_round(cpu, space)[0].reason
    # one ok GPU trial without the allocator's figures: the least-squares model, as before
    no_pool = [gpu(128, 258, 195), replace(gpu(1024, 514, 264), jax_peak_pool_bytes=None)]
    assert not uses_pool(no_pool) and search_space(no_pool, space).region_bytes is None
    # no budget: nothing to run out of, so no pool model (its levels need a limit), and a
    # round of two sizes plans without one
    uncapped = replace(space, limit_bytes=None)
    assert search_space(results, uncapped).region_bytes is None
    assert len(plan_round(results, uncapped, k=2)) == 2
