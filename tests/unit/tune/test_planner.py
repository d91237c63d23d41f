"""The planner on recorded sequences: pure, so every branch is cheap to pin down."""

from vramtune.records import Status, TrialResult
from vramtune.tune.planner import SearchSpace, StepKind, doubling_sizes, plan_round
from vramtune.workload.profile import profile_from_dict

GiB = 2**30


def result(n: int, status: Status = Status.OK, peak: float | None = 1.0,
           sps: float | None = 1000.0) -> TrialResult:
    return TrialResult(status=status, profile="p", profile_hash="h", num_envs=n, backend="cpu",
                       host_peak_rss_bytes=int(peak * GiB) if peak is not None else None,
                       steps_per_s=sps if status is Status.OK else None)


def space(start=128, max_envs=4096, refine=3, limit=None, valid=lambda n: True) -> SearchSpace:
    return SearchSpace(start=start, max_envs=max_envs, refine=refine,
                       limit_bytes=int(limit * GiB) if limit else None, is_valid=valid)


def plan(results: list[TrialResult], sp: SearchSpace):
    """One worker's next step."""
    (step,) = plan_round(results, sp)
    return step


def replay(memory_of, sp: SearchSpace, oom_above: float | None = None, limit_steps: int = 50):
    """Run the planner against a memory model; returns the sizes tried and the last step."""
    results: list[TrialResult] = []
    for _ in range(limit_steps):
        step = plan(results, sp)
        if step.phase is StepKind.DONE:
            return [r.num_envs for r in results], step
        peak = memory_of(step.num_envs)
        if oom_above is not None and peak > oom_above:
            results.append(result(step.num_envs, Status.OOM, peak=oom_above))
        else:
            results.append(result(step.num_envs, peak=peak))
    raise AssertionError("planner did not finish")


def test_doubling_ladder_includes_the_maximum():
    assert doubling_sizes(space(128, 1000)) == [128, 256, 512, 1000]
    assert doubling_sizes(space(128, 1024)) == [128, 256, 512, 1024]


def test_doubling_snaps_to_valid_sizes():
    sp = space(100, 2048, valid=lambda n: n % 64 == 0)
    assert doubling_sizes(sp) == [128, 256, 512, 1024, 2048]


def test_first_size_already_fails_says_what_to_try():
    sizes, step = replay(lambda n: 10.0, space(limit=2.0), oom_above=3.0)
    assert sizes == [128]
    assert "does not fit even at 128" in step.reason and "--start" in step.reason


def test_nothing_fails_up_to_the_maximum():
    sizes, step = replay(lambda n: 1.0, space(max_envs=1024))
    assert sizes == [128, 256, 512, 1024]
    assert "no failure up to the largest candidate 1024" in step.reason and "--max-envs" in step.reason


def test_oom_at_fourth_doubling_found_within_doublings_plus_refine():
    # memory = 1 GiB + n * 1 MiB: 2048 envs need 3 GiB, the cap is 2.5 GiB
    sizes, step = replay(lambda n: 1 + n / 1024, space(refine=3), oom_above=2.5)
    doublings = [128, 256, 512, 1024, 2048]
    assert sizes[:5] == doublings
    assert len(sizes) <= len(doublings) + 3
    assert sizes[5] == 1536 and all(1024 < n < 2048 for n in sizes[5:])
    assert step.phase is StepKind.DONE and "refine budget spent" in step.reason


def test_headroom_counts_as_failure():
    sizes, _ = replay(lambda n: 1 + n / 1024, space(refine=0, limit=1.6))
    assert sizes == [128, 256, 512, 1024]  # 1024 -> 2 GiB is over the 1.6 GiB line


def test_refine_converges_and_never_repeats():
    sizes, step = replay(lambda n: n / 1000, space(start=64, max_envs=65536, refine=10),
                         oom_above=5.0)
    assert len(sizes) == len(set(sizes))
    assert "no candidate between" in step.reason or "refine budget spent" in step.reason


def test_timeout_in_the_middle_is_a_boundary():
    results = [result(128), result(256), result(512, Status.TIMEOUT)]
    step = plan(results, space())
    assert step.phase is StepKind.REFINING and step.num_envs == 384


def test_crash_in_the_middle_is_a_boundary():
    results = [result(128), result(256, Status.CRASH)]
    step = plan(results, space())
    assert step.num_envs == 192


def test_error_stops_the_search():
    failed = TrialResult(status=Status.ERROR, profile="p", profile_hash="h", num_envs=256,
                         error_message="ModuleNotFoundError: No module named 'my_env'")
    step = plan([result(128), failed], space())
    assert step.phase is StepKind.DONE and "my_env" in step.reason and "not a memory limit" in step.reason


def test_multi_device_grid():
    sp = space(start=100, max_envs=2000, valid=lambda n: n % 8 == 0, refine=2)
    sizes, _ = replay(lambda n: n / 1000, sp, oom_above=1.0)
    assert all(n % 8 == 0 for n in sizes)
    assert sizes[:4] == [104, 208, 416, 832]


def test_start_above_maximum():
    step = plan([], space(start=4096, max_envs=1024))
    assert step.phase is StepKind.DONE and "above the maximum" in step.reason


def test_no_valid_size_at_all():
    step = plan([], space(valid=lambda n: False))
    assert "satisfies Brax's batch rules" in step.reason


def test_resume_replays_the_same_next_size():
    history = [result(128), result(256), result(512, Status.OOM)]
    assert plan(history[:2], space()).num_envs == 512
    assert plan(history, space()).num_envs == 384
    assert plan(list(reversed(history)), space()).num_envs == 384


def test_profile_rules_feed_the_grid():
    prof = profile_from_dict({"name": "x", "env": "brax:fast", "num_envs": 256,
                              "scaling": "hold-env-steps",
                              "ppo": {"batch_size": 64, "num_minibatches": 8}})
    sp = space(start=64, max_envs=4096, valid=lambda n: prof.shape_for(n) is not None)
    assert doubling_sizes(sp) == [64, 128, 256, 512]


def test_refinement_prefers_round_sizes_over_the_exact_midpoint():
    results = [result(1000), result(2000), result(4000, Status.OOM)]
    step = plan(results, space(start=1000, max_envs=8000))
    assert step.num_envs == 3072  # not 3000: multiples of large powers of two keep batches sane


def test_sweep_grid_skips_sizes_that_inflate_the_batch():
    from tests.sweeps import sweep_config
    from vramtune.workload.profile import load_profile

    ant = load_profile("ant")  # hold-minibatch, 16 unrolls per step at its 4096 envs
    sp = sweep_config(ant, None, 0.1, 64, 16384, 8).space()
    sizes, _ = replay(lambda n: 1.0 if n <= 2900 else 9.0, sp, oom_above=5.0)
    for n in sizes:
        assert ant.shape_for(n).unrolls_per_step <= 32
    assert 2880 in sizes or 2944 in sizes


# ------------------------------------------------------------------ the predictive search

MiB = 2**20


def data_result(n: int, mib: float | None, status: Status = Status.OK) -> TrialResult:
    """A CPU record whose data segment (what RLIMIT_DATA counts) peaked at ``mib``."""
    peak = int(mib * MiB) if mib is not None and status is Status.OK else None
    return TrialResult(status=status, profile="p", profile_hash="h", num_envs=n, backend="cpu",
                       batch_size=n, num_minibatches=4, unroll_length=10,
                       host_peak_data_bytes=peak, host_peak_rss_bytes=peak,
                       steps_per_s=1000.0 if status is Status.OK else None)


def predictive(limit_mib: float, start=256, max_envs=4096, refine=None, k_method=None):
    from vramtune.tune.planner import SearchMethod
    return SearchSpace(start=start, max_envs=max_envs, refine=refine,
                       limit_bytes=int(limit_mib * MiB), is_valid=lambda n: True,
                       method=k_method or SearchMethod.PREDICTIVE,
                       shape_of=lambda n: (n, 4, 10))


def replay_rounds(memory_mib, sp: SearchSpace, k: int = 1):
    """Run plan_round against a memory curve; a trial OOMs above the limit (the cap)."""
    from vramtune.tune.planner import plan_round
    results: list[TrialResult] = []
    rounds: list[list[int]] = []
    for _ in range(60):
        steps = plan_round(results, sp, k)
        if steps[0].phase is StepKind.DONE:
            return results, rounds, steps[0]
        sizes = [s.num_envs for s in steps]
        assert len(sizes) <= k and len(set(sizes)) == len(sizes)
        assert not set(sizes) & {r.num_envs for r in results}, "re-proposed a measured size"
        rounds.append(sizes)
        for n in sizes:
            mib = memory_mib(n)
            over = mib * MiB > sp.limit_bytes
            results.append(data_result(n, None if over else mib,
                                       Status.OOM if over else Status.OK))
    raise AssertionError("did not finish")


def quick_mib(n: float) -> float:
    """quick's measured peaks (781, 820, 957, 1003 MiB at 256..1152 envs)."""
    xs, ys = [256, 512, 1024, 1152], [781, 820, 957, 1003]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True),
                                  strict=False):
        if n <= x1:
            return y0 + (n - x0) * (y1 - y0) / (x1 - x0)
    return ys[-1] + (n - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])


def test_predictive_finds_the_bracket_in_fewer_trials_than_bisection():
    from vramtune.tune.planner import candidates
    limit = 1.2e9 / MiB
    sp = predictive(limit)
    results, rounds, done = replay_rounds(quick_mib, sp)
    from vramtune.tune.boundary import ruled_out
    grid = candidates(sp)
    # a size that fits with less room than its proof keeps is past the edge (short_of_room)
    out = ruled_out(results, sp.limit_bytes)
    fits = max(r.num_envs for r in results if r.status is Status.OK and r.num_envs not in out)
    fails = min(r.num_envs for r in results if r.status is not Status.OK or r.num_envs in out)
    assert grid.index(fails) == grid.index(fits) + 1, "the edge is bracketed on the grid"
    line = min(out.values(), default=sp.limit_bytes)
    assert sp.limit_bytes * 0.95 < line <= sp.limit_bytes
    assert all(quick_mib(n) * MiB > line for n in grid if n > fits)
    assert "boundary found" in done.reason
    old, _ = replay(lambda n: quick_mib(n) * MiB / GiB, space(256, 4096, refine=3),
                    oom_above=limit * MiB / GiB)
    assert len(results) < len(old)
    assert set(r.num_envs for r in results) <= set(grid)


def test_predictive_steps_carry_predicted_figures_labelled_as_such():
    from vramtune.tune.planner import plan_round
    steps = plan_round([data_result(256, 781), data_result(1024, 957)], predictive(1144))
    (step,) = steps
    assert step.phase is StepKind.PREDICTING and step.predicted_bytes is not None
    mean, upper = step.predicted_bytes
    assert mean <= upper <= 1144 * MiB * 1.2
    assert "predicted peak" in step.reason and "not a measurement" in step.reason


def test_predictive_k_workers_get_k_distinct_sizes():
    from vramtune.tune.planner import plan_round
    assert [s.num_envs for s in plan_round([], predictive(1144), 2)] == [256, 1024]
    steps = plan_round([data_result(256, 781), data_result(1024, 957)], predictive(1144), 4)
    assert len({s.num_envs for s in steps}) == 4


def test_predictive_is_order_independent_for_resume():
    import random

    from vramtune.tune.planner import plan_round
    history = [data_result(256, 781), data_result(1024, 957),
               data_result(1792, None, Status.OOM), data_result(1280, 1049)]
    want = [s.num_envs for s in plan_round(history, predictive(1144), 2)]
    for seed in range(4):
        shuffled = history[:]
        random.Random(seed).shuffle(shuffled)
        assert [s.num_envs for s in plan_round(shuffled, predictive(1144), 2)] == want


def test_predictive_error_stops_with_the_message():
    from vramtune.tune.planner import plan_round
    failed = TrialResult(status=Status.ERROR, profile="p", profile_hash="h", num_envs=1024,
                         error_message="ModuleNotFoundError: No module named 'my_env'")
    (step,) = plan_round([data_result(256, 781), failed], predictive(1144))
    assert step.phase is StepKind.DONE and "my_env" in step.reason


def test_predictive_model_miss_falls_back_to_bisection():
    from vramtune.tune.planner import plan_round
    history = [data_result(256, 781), data_result(1024, 957), data_result(1408, None, Status.OOM)]
    (step,) = plan_round(history, predictive(1144))
    assert step.phase is StepKind.REFINING and "model missed" in step.reason
    assert 1024 < step.num_envs < 1408


def test_predictive_without_a_budget_walks_the_doubling_ladder():
    from vramtune.tune.planner import SearchMethod, plan_round
    sp = SearchSpace(start=128, max_envs=1024, refine=3, limit_bytes=None,
                     is_valid=lambda n: True, method=SearchMethod.PREDICTIVE)
    assert [s.num_envs for s in plan_round([result(128)], sp)] == [256]


def test_bisect_with_one_worker_bisects_and_with_k_workers_splits_k_ways():
    from vramtune.tune.planner import SearchMethod, plan_round
    sp = SearchSpace(start=128, max_envs=4096, refine=3, limit_bytes=None,
                     is_valid=lambda n: True, method=SearchMethod.BISECT)
    history = [result(128), result(256), result(512, Status.OOM)]
    (step,) = plan_round(history, sp)
    assert (step.phase, step.num_envs) == (StepKind.REFINING, 384)
    # k workers: k-ary bisection between the last fit and the first failure, no model
    assert [s.num_envs for s in plan_round(history, sp, 3)] == [320, 384, 448]


def test_candidates_keep_round_sizes_and_the_narrower_grid():
    import dataclasses

    from vramtune.tune.planner import SearchMethod, candidates
    sp = SearchSpace(start=1024, max_envs=2048, refine=None, limit_bytes=GiB,
                     is_valid=lambda n: True, candidate=lambda n: n % 256 == 0,
                     method=SearchMethod.PREDICTIVE)
    assert candidates(sp) == [1024, 1280, 1536, 1792, 2048]
    sp = SearchSpace(start=1024, max_envs=2048, refine=None, limit_bytes=GiB,
                     is_valid=lambda n: True, candidate=lambda n: n == 1024,
                     method=SearchMethod.PREDICTIVE)
    assert candidates(sp)[:3] == [1024, 1152, 1280]  # too narrow: every valid round size
    # bisection: finer round sizes (at most 6 significant bits), the narrower grid unused,
    # and the doubling ladder from a start that is not round
    bisect = dataclasses.replace(sp, method=SearchMethod.BISECT)
    assert candidates(bisect)[:3] == [1024, 1056, 1088]
    odd = dataclasses.replace(bisect, start=1000, max_envs=4000)
    assert {1000, 2000, 4000} <= set(candidates(odd)) and 1008 in candidates(odd)


def test_a_size_past_the_boundary_is_named_for_why_it_is_past():
    # 1024 fitted its trial 8 MB under the 1.2 GB line (the search keeps ~25 MB): the done
    # step says it is short of room, not that it failed; an OOM is still "fails"
    import dataclasses

    from vramtune.tune.planner import SearchMethod, plan_round

    line = int(1.2e9)

    def cpu(n, data_mb, status=Status.OK):
        return TrialResult(status=status, profile="quick", profile_hash="h", num_envs=n,
                           backend="cpu", batch_size=n, num_minibatches=4, unroll_length=10,
                           steps_per_s=1000.0 + n if status is Status.OK else None,
                           host_peak_data_bytes=int(data_mb * 1e6),
                           host_peak_rss_bytes=int(data_mb * 0.9e6), cap_bytes=line,
                           budget_bytes=line)

    sp = SearchSpace(start=512, max_envs=2048, refine=0, limit_bytes=line, is_valid=lambda n: True)
    rows = [cpu(512, 1040), cpu(1024, 1192)]
    done = plan(rows, sp)
    assert done.phase is StepKind.DONE
    assert "between 512 (fits) and 1024 (short of room)" in done.reason, done.reason
    oom = [cpu(512, 1040), cpu(1024, 1150, Status.OOM)]
    assert "between 512 (fits) and 1024 (fails)" in plan(oom, sp).reason
    # past a failed proof: 768 fitted its trial, and its confirming run ran out of memory
    # under a 1.0 GB cap, which 640's trial peaked above (with room under the line to spare)
    from vramtune.records import Purpose
    proof = dataclasses.replace(cpu(768, 990, Status.OOM), purpose=Purpose.CONFIRM,
                                cap_bytes=int(1.0e9))
    rows = [cpu(512, 950), cpu(1024, 1150, Status.OOM), cpu(768, 1050), proof, cpu(640, 1010)]
    two = dataclasses.replace(sp, refine=1)  # one search trial below the failed proof
    assert "between 512 (fits) and 640 (past a failed proof)" in plan(rows, two).reason
    # a run that finished above the line (uncapped) is over it, not failed
    over = [cpu(512, 1040), dataclasses.replace(cpu(1024, 1250), cap_bytes=None)]
    assert "between 512 (fits) and 1024 (over the line)" in plan(over, sp).reason
    # the predictive search's words, on the grid's neighbours
    pred = dataclasses.replace(sp, method=SearchMethod.PREDICTIVE, refine=None, start=896,
                               max_envs=1024)
    rows = [cpu(896, 1100), cpu(960, 1150), cpu(1024, 1192)]
    steps = plan_round(rows, pred)
    assert steps[0].phase is StepKind.DONE
    assert "960 fits, 1024 is short of room" in steps[0].reason, steps[0].reason
