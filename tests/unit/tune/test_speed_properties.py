"""Property tests: the speed pick over any mix of runs (disturbed, repeated, shared, failed)
keeps its promises: a set-aside run is one of the ranked runs and never the pick, its size
keeps another run, and a re-measure names two sizes that can be picked."""

from dataclasses import replace
from statistics import median

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.recommend import RANKED, choose

GB = 10**9


def _run(n: int, rate: float, spread: float, purpose: Purpose, status: Status, shared: bool,
         count: int) -> TrialResult:
    rates = [rate * (1 + spread * (2 * i / max(count - 1, 1) - 1)) for i in range(count)]
    ok = status is Status.OK
    return TrialResult(status=status, profile="p", profile_hash="h", num_envs=n, backend="cpu",
                       purpose=purpose, shared_run=shared,
                       steps_per_s=sorted(rates)[count // 2] if ok else None,
                       steps_per_s_intervals=rates if ok else None,
                       steps_per_s_min=min(rates) if ok else None,
                       steps_per_s_max=max(rates) if ok else None,
                       measured_intervals=count if ok else None,
                       host_peak_rss_bytes=int(0.5 * GB + n * 1e5))


runs = st.builds(
    _run, st.sampled_from([64, 128, 256, 448, 512, 576, 704, 832, 1024]),
    st.floats(1_000, 40_000), st.floats(0.0, 0.3),
    st.sampled_from([Purpose.SEARCH, Purpose.SEARCH, Purpose.ALONE, Purpose.CONFIRM]),
    st.sampled_from([Status.OK, Status.OK, Status.OK, Status.OOM]), st.booleans(),
    st.integers(1, 9))


# a dip its re-run does not repeat (448 between 128 and 512), for the random runs to disturb:
# alone, random lists set a run aside about 3 times in 1,000
DIPPED = [_run(128, 25_000, 0.01, Purpose.SEARCH, Status.OK, False, 5),
          _run(448, 12_000, 0.01, Purpose.SEARCH, Status.OK, False, 5),
          _run(512, 25_500, 0.01, Purpose.SEARCH, Status.OK, False, 5),
          _run(448, 26_000, 0.01, Purpose.ALONE, Status.OK, False, 5)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(runs, min_size=1, max_size=14), st.booleans(), st.booleans())
def test_the_pick_keeps_its_promises_over_any_runs(results, remeasure_left, seeded):
    if seeded:
        results = [*DIPPED, *results]
    rec = choose(results, 4 * GB, 0.1, remeasure_left=remeasure_left)
    aside = [run for run, _ in rec.set_aside]
    for run in aside:
        assert any(run is r for r in results) and run.purpose in RANKED and not run.shared_run
        assert run is not rec.chosen
        assert rec.set_aside_words(run).startswith("set aside: read ")
        assert any(r is not run and r.num_envs == run.num_envs and r.purpose in RANKED
                   for r in results)
    assert len({run.num_envs for run in aside}) == len(aside)  # one per size at most
    if rec.speed is not None:
        assert set(rec.speed.dips) <= set(rec.speed.rates)
        assert all(rec.speed.rates[n].runs == 1 for n in rec.speed.dips)
        if rec.remeasure:
            assert len(rec.remeasure) == 2 and set(rec.remeasure) <= set(rec.speed.rates)
            assert remeasure_left and not rec.speed.exhausted


@settings(max_examples=100, deadline=None)
@given(st.lists(runs, min_size=1, max_size=10))
def test_the_same_runs_give_the_same_pick(results):
    a = choose(results, 4 * GB, 0.1, remeasure_left=True)
    b = choose([replace(r) for r in results], 4 * GB, 0.1, remeasure_left=True)
    assert (a.chosen.num_envs if a.chosen else None) == (b.chosen.num_envs if b.chosen else None)
    assert a.remeasure == b.remeasure
    assert [r.num_envs for r, _ in a.set_aside] == [r.num_envs for r, _ in b.set_aside]


@settings(max_examples=200, deadline=None)
@given(st.floats(5_000, 40_000), st.floats(5_000, 40_000), st.floats(0.2, 1.0),
       st.floats(0.2, 1.5), st.integers(3, 9))
def test_a_first_run_is_set_aside_exactly_when_it_dips_and_its_rerun_does_not(
        low_rate, high_rate, first, again, count):
    """448 between 128 and 512: its first run at ``first`` and its re-run at ``again`` times
    the slower neighbour. The rule, stated directly: set aside iff the first run dips (both
    neighbours over 1.1x it), the re-run reads over 1.1x the first, and the re-run is no dip."""
    slower = min(low_rate, high_rate)
    x, y = slower * first, slower * again
    results = [_run(128, low_rate, 0.01, Purpose.SEARCH, Status.OK, False, count),
               _run(448, x, 0.01, Purpose.SEARCH, Status.OK, False, count),
               _run(512, high_rate, 0.01, Purpose.SEARCH, Status.OK, False, count),
               _run(448, y, 0.01, Purpose.ALONE, Status.OK, False, count)]
    rec = choose(results, 4 * GB, 0.1, remeasure_left=True)
    # the rule reads each size's median interval (statistics.median), as size_rates does
    lo, mx, hi, my = (median(r.steps_per_s_intervals) for r in results)

    def dips(v: float) -> bool:
        return lo > 1.1 * v and hi > 1.1 * v

    expected = dips(mx) and my > 1.1 * mx and not dips(my)
    assert bool(rec.set_aside) == expected, (lo, mx, hi, my)
    if expected:
        assert rec.set_aside[0][0] is results[1]


def test_thousands_of_sizes_and_runs_are_weighed_in_bounded_time():
    """A resumed file may hold thousands of sizes or runs: the dip checks bisect, and only a
    size's first run can be set aside (bounds generous, for a loaded CI machine)."""
    import time

    sizes = [_run(n, 20_000 + (n % 7) * 100, 0.01, Purpose.SEARCH, Status.OK, False, 3)
             for n in range(4, 16_004, 4)]
    started = time.perf_counter()
    choose(sizes, None, 0.1, remeasure_left=True)
    assert time.perf_counter() - started < 20
    one_size = [*DIPPED, *(_run(448, 26_000 + i % 50, 0.01, Purpose.ALONE, Status.OK, False, 3)
                           for i in range(4000))]
    started = time.perf_counter()
    rec = choose(one_size, None, 0.1, remeasure_left=True)
    assert time.perf_counter() - started < 20
    assert [r.num_envs for r, _ in rec.set_aside] == [448]
