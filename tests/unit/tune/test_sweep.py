"""The sweep's rounds (pure): search steps up to ``parallel`` at once, then the sizes the
objective needs measured alone, then the proof of the pick."""

from __future__ import annotations

from dataclasses import replace

from tests.sweeps import sweep_config, with_settings
from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.alone import alone_steps, decide
from vramtune.tune.planner import SearchMethod, Step, StepKind
from vramtune.tune.proof import edge_step
from vramtune.tune.recommend import Objective
from vramtune.tune.sweep import next_steps, trial_request
from vramtune.workload.profile import load_profile

MiB = 2**20
QUICK = load_profile("quick")


def config(objective=Objective.THROUGHPUT, confirm=False, search=SearchMethod.PREDICTIVE):
    return sweep_config(QUICK, int(1.2e9), 0.0, 256, 4096, None, objective=objective,
                       confirm=confirm, search=search)


def rec(n, status=Status.OK, mib=900.0, sps=10_000.0, spread=0.01, shared=False,
        purpose=Purpose.SEARCH) -> TrialResult:
    shape = QUICK.shape_for(n)
    ok = status is Status.OK
    return TrialResult(status=status, profile="quick", profile_hash=QUICK.hash, num_envs=n,
                       batch_size=shape.batch_size, num_minibatches=shape.num_minibatches,
                       unroll_length=10, backend="cpu",
                       host_peak_rss_bytes=int(mib * MiB) if ok else None,
                       host_peak_data_bytes=int(mib * MiB) if ok else None,
                       steps_per_s=sps if ok else None,
                       steps_per_s_min=sps * (1 - spread) if ok else None,
                       steps_per_s_max=sps * (1 + spread) if ok else None,
                       measured_intervals=10 if ok else None,
                       shared_run=shared, purpose=purpose)


# 256 and 1024 (bootstrap), 1408 fits, 1536 fails: adjacent on the round grid, search done
SEARCHED = [rec(256, sps=6_000), rec(1024, sps=9_000), rec(1408, sps=10_000),
            rec(1536, Status.OOM)]


def test_search_rounds_hold_up_to_parallel_sizes():
    cfg = config()
    assert [s.num_envs for s in next_steps(cfg, [], cfg.space(), 2)] == [256, 1024]
    steps = next_steps(cfg, SEARCHED[:2], cfg.space(), 3)
    assert 1 <= len(steps) <= 3 and all(s.num_envs > 1024 for s in steps)
    assert all(s.phase in (StepKind.PREDICTING, StepKind.REFINING, StepKind.DOUBLING) for s in steps)


def test_after_the_search_the_pick_is_proven_when_every_run_was_alone():
    cfg = config()
    (step,) = next_steps(cfg, SEARCHED, cfg.space(), 1)
    assert step.phase is StepKind.REPEATING and step.num_envs == 1408
    assert trial_request(cfg, SEARCHED, step).alone


def test_shared_fits_are_measured_alone_from_the_top_until_clearly_slower():
    cfg = config()
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    (step,) = next_steps(cfg, shared, cfg.space(), 2)
    assert step.phase is StepKind.ALONE and step.num_envs == 1408 and "shared" in step.reason
    request = trial_request(cfg, shared, step)
    assert request.purpose is Purpose.ALONE and request.alone
    # a run alone measures speed only: it may use the compile cache under a CPU cap; a search
    # trial, whose cold peak decides the boundary, may not
    assert request.cache_under_cpu_cap
    search = trial_request(cfg, SEARCHED, Step(StepKind.DOUBLING, 512, "search"))
    assert not search.cache_under_cpu_cap
    done = [*shared, rec(1408, sps=10_000, purpose=Purpose.ALONE)]
    (step,) = next_steps(cfg, done, cfg.space(), 2)
    assert step.num_envs == 1024  # its steps/s might still beat 1408's
    slower = [*done, rec(1024, sps=8_500, purpose=Purpose.ALONE)]
    # 1024 is clearly slower than 1408 (by 1.18x, as neighbours differ undisturbed): 256 is not
    # measured again; the pick's proof follows
    assert alone_steps(cfg, slower, cfg.space(), decide(cfg, slower)) == []
    (proof,) = next_steps(cfg, slower, cfg.space(), 2)
    assert (proof.phase, proof.num_envs) == (StepKind.REPEATING, 1408)


def test_a_stop_on_a_drop_past_the_edge_ratio_measures_the_size_below_first():
    """In a sweep whose search trials shared the device, the walk alone would stop at 1024,
    whose one run read 1.67x below 1408: more than undisturbed neighbours differ. 256 runs
    alone first; reading over 1.1x 1024's run, it makes that run a dip, which the pick runs
    again beside 1408; reading no faster, the walk stops where it did."""
    cfg = config()
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    dropped = [*shared, rec(1408, sps=10_000, purpose=Purpose.ALONE),
               rec(1024, sps=6_000, purpose=Purpose.ALONE)]
    (step,) = alone_steps(cfg, dropped, cfg.space(), decide(cfg, dropped))
    assert (step.phase, step.num_envs) == (StepKind.ALONE, 256)
    assert step.reason == (
        "measuring 256 envs alone: 1024 read 6,000 steps/s on its one run alone, 1408 above it "
        "1.67x that (over 1.25x: more than neighbouring sizes differ undisturbed); 256 tells a "
        "disturbed run from a slower size")
    assert trial_request(cfg, dropped, step).purpose is Purpose.ALONE
    slower = [*dropped, rec(256, sps=6_100, purpose=Purpose.ALONE)]
    assert alone_steps(cfg, slower, cfg.space(), decide(cfg, slower)) == []  # no dip: 1408's proof follows
    dip = [*dropped, rec(256, sps=9_000, purpose=Purpose.ALONE)]
    steps = alone_steps(cfg, dip, cfg.space(), decide(cfg, dip))
    assert sorted(s.num_envs for s in steps) == [1024, 1408]
    assert "1024's one run is a dip (256 and 1408 on either side" in steps[0].reason
    # not once no re-measure pair is left: a dip found could not be run again
    spent = replace(cfg, speed_remeasure=0)
    assert alone_steps(spent, dropped, spent.space(), decide(spent, dropped)) == []
    # not for a size known from two runs, nor for the other objectives
    twice = [*dropped, rec(1024, sps=6_200, purpose=Purpose.ALONE)]
    assert alone_steps(cfg, twice, cfg.space(), decide(cfg, twice)) == []
    knee = config(Objective.KNEE)
    assert 256 not in [s.num_envs for s in alone_steps(knee, dropped, knee.space(), decide(knee, dropped))]


def test_a_tie_keeps_walking_down():
    cfg = config()
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    tied = [*shared, rec(1408, sps=10_000, purpose=Purpose.ALONE),
            rec(1024, sps=9_950, purpose=Purpose.ALONE)]
    assert [s.num_envs for s in alone_steps(cfg, tied, cfg.space(), decide(cfg, tied))] == [256]


def test_knee_measures_the_ladder_below_the_boundary_alone():
    cfg = config(Objective.KNEE)
    # 1024 is within 5% of 1408: the knee may lie lower, and the predictive search skipped
    # 512, a size of the doubling ladder the knee compares
    close = [rec(256, sps=6_000), rec(1024, sps=9_800), rec(1408, sps=10_000),
             rec(1536, Status.OOM)]
    (step,) = next_steps(cfg, close, cfg.space(), 1)
    assert step.phase is StepKind.ALONE and step.num_envs == 512 and "knee" in step.reason
    assert trial_request(cfg, close, step).purpose is Purpose.ALONE
    # 512 is more than 5% below: the walk stops, the pick is proven next
    more = [*close, rec(512, sps=8_000, purpose=Purpose.ALONE)]
    assert alone_steps(cfg, more, cfg.space(), decide(cfg, more)) == []
    # 1024 already more than 5% below 1408: nothing below it can be the knee
    assert alone_steps(cfg, SEARCHED, cfg.space(), decide(cfg, SEARCHED)) == []


def test_max_envs_needs_only_the_largest_alone():
    cfg = config(Objective.MAX_ENVS)
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    assert [s.num_envs for s in alone_steps(cfg, shared, cfg.space(), decide(cfg, shared))] == [1408]
    done = [*shared, rec(1408, purpose=Purpose.ALONE)]
    assert alone_steps(cfg, done, cfg.space(), decide(cfg, done)) == []


def test_a_size_that_ran_alone_without_steps_is_not_run_again():
    cfg = config(Objective.MAX_ENVS)
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    no_speed = [*shared, replace(rec(1408, purpose=Purpose.ALONE), steps_per_s=None)]
    assert alone_steps(cfg, no_speed, cfg.space(), decide(cfg, no_speed)) == []


def test_a_failure_alone_moves_the_boundary_and_the_walk_with_it():
    cfg = config(Objective.MAX_ENVS)
    shared = [replace(r, shared_run=True) for r in SEARCHED]
    failed = [*shared, rec(1408, Status.OOM, purpose=Purpose.ALONE)]
    assert [s.num_envs for s in alone_steps(cfg, failed, cfg.space(), decide(cfg, failed))] == [1024]


def test_bisect_config_keeps_todays_refine_default():
    cfg = config(search=SearchMethod.BISECT)
    assert cfg.space().refine == 3 and cfg.space().method is SearchMethod.BISECT
    assert config().space().refine is None


def test_quick_candidates_keep_four_unrolls_per_step():
    cfg = config()
    keeps = cfg.space().candidate
    assert keeps is not None and all(keeps(n) for n in (256, 1024, 1152, 1408))
    go1 = load_profile("playground-go1")
    grow = sweep_config(go1, int(8e9), 0.1, 1024, 16384, None).space()
    shape = go1.shape_for(1152)
    assert shape is not None and grow.is_valid(1152) and not grow.candidate(1152)


def test_a_results_file_of_thousands_of_sizes_is_planned_in_one_pass():
    """Found by the CLI fuzz pass: `sweep --resume` of a 20,000-line results file spent 132 s
    in alone_steps (one scan of every result per size). Bounded work: one pass now; the
    bound here is generous (it was ~100x over it), for a loaded CI machine."""
    import time

    from vramtune.tune.planner import SearchSpace

    results = [rec(n, sps=1_000.0 + n, shared=True) for n in range(4, 80_004, 4)]
    space = SearchSpace(start=4, max_envs=80_000, refine=0, limit_bytes=int(1.2e9),
                        is_valid=lambda n: True)
    started = time.perf_counter()
    steps = alone_steps(config(), results, space, decide(config(), results))
    assert time.perf_counter() - started < 10
    assert [s.num_envs for s in steps] == [80_000]  # the largest fitting size, run alone


def timed(n, rates, purpose=Purpose.SEARCH, wall_s=20.0) -> TrialResult:
    """A fitting trial with its per-interval rates, as the trial child records them."""
    ordered = sorted(rates)
    return replace(rec(n, sps=ordered[len(ordered) // 2], purpose=purpose),
                   steps_per_s_min=ordered[0], steps_per_s_max=ordered[-1],
                   steps_per_s_intervals=list(rates), measured_intervals=len(rates),
                   wall_s=wall_s)


# 1024 and 1408 three percent apart in noise of ±10%: the intervals cannot tell them apart
NOISY = [1.0, 0.92, 1.08, 0.95, 1.05, 0.9, 1.1, 0.97]
UNRESOLVED = [rec(256, sps=6_000), timed(1024, [9_700 * x for x in NOISY]),
              timed(1408, [10_000 * x for x in NOISY]), rec(1536, Status.OOM)]


def test_a_dip_is_remeasured_first_and_named_in_the_step():
    """1024's one run read 0.55 of the sizes on both sides: re-measured beside the fastest
    before anything else, and the step says why."""
    flat = [1.0, 0.99, 1.01, 1.0, 0.98, 1.02]
    results = [rec(256, sps=6_000), timed(512, [10_000 * x for x in flat]),
               timed(1024, [5_500 * x for x in flat]), timed(1408, [10_100 * x for x in flat]),
               rec(1536, Status.OOM)]
    cfg = config()
    steps = next_steps(cfg, results, cfg.space(), 1)
    assert [(s.phase, s.num_envs) for s in steps] == [(StepKind.ALONE, 1408), (StepKind.ALONE, 1024)]
    assert ("1024's one run is a dip (512 and 1408 on either side read over 1.1x its rate): a "
            "disturbed run or a real one") in steps[0].reason


def test_an_unresolved_pick_is_remeasured_interleaved_then_proven():
    cfg = config()
    steps = next_steps(cfg, UNRESOLVED, cfg.space(), 1)
    assert [(s.phase, s.num_envs) for s in steps] == [(StepKind.ALONE, 1408), (StepKind.ALONE, 1024)]
    assert "re-measuring 1024 and 1408 envs, interleaved (pair 1 of at most 3)" in steps[0].reason
    assert all(trial_request(cfg, UNRESOLVED, s).alone for s in steps)
    # Re-measured with less noise (±7%): each pair narrows the interval towards a verdict,
    # so the sweep keeps going until its allowance is spent. A B then B A.
    calmer = [1 + (x - 1) / 1.5 for x in NOISY]
    results = [UNRESOLVED[0], timed(1024, [9_700 * x for x in calmer]),
               timed(1408, [10_000 * x for x in calmer]), UNRESOLVED[3]]
    order = []
    for _ in range(3):
        steps = next_steps(cfg, results, cfg.space(), 1)
        assert len(steps) == 2 and {s.num_envs for s in steps} == {1024, 1408}
        order += [s.num_envs for s in steps]
        base = {1024: 9_700, 1408: 10_000}
        results += [timed(s.num_envs, [base[s.num_envs] * x for x in calmer], Purpose.ALONE)
                    for s in steps]
    assert order == [1408, 1024, 1024, 1408, 1408, 1024]
    # the budget of pairs is spent (the third settled it: 1408 is faster): the pick is proven
    (step,) = next_steps(cfg, results, cfg.space(), 1)
    assert step.phase is StepKind.REPEATING and step.num_envs == 1408
    from vramtune.tune.alone import remeasure_pairs, remeasure_wall_s
    from vramtune.tune.recommend import choose

    assert remeasure_pairs(results) == 3 and remeasure_wall_s(results) == 6 * 20.0
    done = choose(results, cfg.budget_bytes, cfg.headroom_fraction, remeasure_left=False)
    assert done.chosen.num_envs == 1408 and done.reasons[1408] == "recommended (throughput: fastest median)"


def test_remeasuring_stops_when_the_pairs_left_could_not_settle_it():
    """±10% noise and 3% apart: after one pair the interval is 0.92-1.02; two more pairs
    like it would narrow it to about 0.94-1.01, still across 1, so none is run."""
    from vramtune.tune.alone import remeasure_pairs
    from vramtune.tune.recommend import choose

    cfg = config()
    results = list(UNRESOLVED)
    steps = next_steps(cfg, results, cfg.space(), 1)
    results += [timed(s.num_envs, [{1024: 9_700, 1408: 10_000}[s.num_envs] * x for x in NOISY],
                      Purpose.ALONE) for s in steps]
    assert remeasure_pairs(results) == 1 and not decide(cfg, results).remeasure_left
    (step,) = next_steps(cfg, results, cfg.space(), 1)
    assert step.phase is StepKind.REPEATING and step.num_envs == 1408
    done = choose(results, cfg.budget_bytes, cfg.headroom_fraction,
                  remeasure_left=decide(cfg, results).remeasure_left)
    assert done.chosen.num_envs == 1408 and "no re-measurement left" in done.reasons[1408]


def test_a_remeasurement_that_resolves_stops_asking():
    cfg = config()
    steady = [1.0, 0.999, 1.001, 0.998, 1.002, 1.0, 0.9995, 1.0005]
    results = UNRESOLVED + [timed(1408, [10_000 * x for x in steady] * 4, Purpose.ALONE),
                            timed(1024, [9_990 * x for x in steady] * 4, Purpose.ALONE)]
    (step,) = next_steps(cfg, results, cfg.space(), 1)
    assert step.phase is StepKind.REPEATING


def test_no_remeasurement_for_other_objectives_or_a_zero_budget():
    for cfg in (config(Objective.MAX_ENVS), replace(config(), speed_remeasure=0)):
        (step,) = next_steps(cfg, UNRESOLVED, cfg.space(), 1)
        assert step.phase is StepKind.REPEATING


def test_a_confirmation_is_sized_by_when_memory_settled_not_by_the_speed_window():
    from vramtune.tune.proof import MIN_CONFIRM_STEPS, confirm_steps

    cfg = config(confirm=True)
    # 549 steps in the trial's throughput window, memory steady after 8: 80 steps, not 5,490
    settled = replace(rec(32), training_steps=549, memory_steady_steps=8)
    assert confirm_steps(cfg, settled) == 80
    assert confirm_steps(cfg, replace(settled, memory_steady_steps=2)) == MIN_CONFIRM_STEPS
    # a record from before the figure existed: its whole length, as before
    assert confirm_steps(cfg, replace(rec(32), training_steps=30)) == 300
    assert confirm_steps(with_settings(cfg, confirm_steps=150), settled) == 150
    # a resumed file's figure is bounded like --confirm-steps
    assert confirm_steps(cfg, replace(settled, memory_steady_steps=10**30)) == 1_000_000


def test_the_proof_run_is_sized_from_the_run_whose_memory_took_longest_to_settle():
    """A long run alone that settled at step 5 does not shorten the proof of a size whose
    search trial settled at step 20."""
    cfg = config(confirm=True)
    search = replace(rec(256), training_steps=30, memory_steady_steps=20)
    alone = replace(rec(256, purpose=Purpose.ALONE), training_steps=500, memory_steady_steps=5)
    results = [search, alone, rec(512, Status.OOM)]
    step = edge_step(cfg, results, decide(cfg, results))
    assert step is not None and step.num_envs == 256
    assert "200 training steps" in step.reason, step.reason


def test_a_pick_whose_confirming_run_moved_is_re_measured_and_a_new_pick_proven():
    """The machine slowed after the first trial (a neighbour's load): 1024 leads 1280 and
    1408 by 15-19% on trials minutes apart, then its confirming run reads 0.81 of its trial.
    The lead is smaller than that move: the sizes run again, interleaved, compared on those
    runs; 1408 proves faster, so it is the pick and is proven in turn."""
    cfg = config(confirm=True)
    steady = [1.0, 0.995, 1.005, 0.99, 1.01, 1.0]
    base = {1024: 12_600, 1280: 13_100, 1408: 13_400}
    results = [rec(256, sps=6_000), timed(1024, [15_600 * x for x in steady]),
               timed(1280, [13_100 * x for x in steady]),
               timed(1408, [13_500 * x for x in steady]), rec(1536, Status.OOM),
               timed(1024, [12_700 * x for x in steady], Purpose.CONFIRM)]
    steps = next_steps(cfg, results, cfg.space(), 1)
    assert [(s.phase, s.num_envs) for s in steps] == [(StepKind.ALONE, 1024), (StepKind.ALONE, 1408)]
    for _ in range(3):
        if steps[0].phase is not StepKind.ALONE:
            break
        results += [timed(s.num_envs, [base[s.num_envs] * x for x in steady], Purpose.ALONE)
                    for s in steps]
        steps = next_steps(cfg, results, cfg.space(), 1)
    (step,) = steps
    assert step.phase is StepKind.CONFIRMING and step.num_envs == 1408


def test_a_trial_leaves_room_outside_the_pool_for_the_warp_pool_its_earlier_trials_measured():
    cfg = config()
    step = Step(StepKind.DOUBLING, 512, "search")
    assert trial_request(cfg, SEARCHED, step).outside_room_bytes is None  # none measured
    pooled = [*SEARCHED[:1], replace(rec(256), warp_mempool_high_bytes=64 * MiB)]
    assert trial_request(cfg, pooled, step).outside_room_bytes == 64 * MiB * 2 * 3 // 2
