"""Property tests: emit-config of merged sweeps. A sweep's own records at its own budget give
the sweep's choice; another sweep's failures under less memory than the line never move it."""

from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.budgets import Measurements, choose_for_budget, speaking_for
from vramtune.tune.recommend import choose
from vramtune.workload.profile import load_profile

QUICK = load_profile("quick")
MiB = 2**20
BUDGET = int(1.2e9)
LINE = int(0.9 * BUDGET)


def _rec(n: int, mib: int, status: Status, purpose: Purpose, budget: int, cap: int,
         rate: float) -> TrialResult:
    ok = status is Status.OK
    return TrialResult(status=status, profile="quick", profile_hash=QUICK.hash, num_envs=n,
                       batch_size=n, num_minibatches=4, unroll_length=10, backend="cpu",
                       purpose=purpose, budget_bytes=budget, cap_bytes=cap,
                       host_peak_rss_bytes=int(mib * MiB * 0.95) if ok else None,
                       host_peak_data_bytes=int(mib * MiB) if ok else None,
                       steps_per_s=rate if ok else None,
                       steps_per_s_intervals=[rate * 0.98, rate, rate * 1.02] if ok else None,
                       measured_intervals=3 if ok else None)


records = st.builds(
    _rec, st.sampled_from([64, 128, 256, 384, 512, 768, 1024]), st.integers(700, 1100),
    st.sampled_from([Status.OK, Status.OK, Status.OK, Status.OOM, Status.CRASH]),
    st.sampled_from([Purpose.SEARCH, Purpose.SEARCH, Purpose.ALONE, Purpose.CONFIRM]),
    st.just(BUDGET), st.sampled_from([LINE, LINE - 40 * MiB, LINE - 80 * MiB]),
    st.floats(1_000, 40_000))


def _source(results: list[TrialResult]) -> Measurements:
    return Measurements((Path("run"),), QUICK, QUICK.hash, "cpu", "2026-11-29", 0.1,
                        tuple(results), (BUDGET,), tuple(results))


def _size(r: TrialResult | None) -> int | None:
    return None if r is None else r.num_envs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=12))
def test_one_sweep_at_its_own_budget_gives_the_sweeps_choice(results):
    emitted = choose_for_budget(_source(results), BUDGET, headroom_fraction=0.1)
    assert _size(emitted.chosen) == _size(choose(results, BUDGET, 0.1).chosen)
    assert speaking_for(results, BUDGET, LINE) == tuple(results)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=10),
       st.lists(st.tuples(st.sampled_from([64, 128, 256, 384, 512]),
                          st.sampled_from([Purpose.SEARCH, Purpose.CONFIRM])), max_size=5))
def test_failures_far_below_the_line_in_a_smaller_sweep_move_nothing(results, failures):
    small = int(1.0e9)
    far = [_rec(n, 0, Status.OOM, purpose, small, LINE - 400 * MiB, 0.0)
           for n, purpose in failures]
    alone = choose_for_budget(_source(results), BUDGET, headroom_fraction=0.1)
    merged = choose_for_budget(_source([*far, *results]), BUDGET, headroom_fraction=0.1)
    assert _size(merged.chosen) == _size(alone.chosen)
    # ... while for their own budget they speak
    assert all(r in speaking_for([*far, *results], small, int(0.9 * small)) for r in far)


def test_a_failure_at_the_line_of_a_smaller_sweep_moves_the_pick():
    base = [_rec(n, 800 + n // 8, Status.OK, Purpose.SEARCH, BUDGET, LINE, 1_000.0 * n)
            for n in (128, 256, 512)]
    at_line = replace(base[1], status=Status.OOM, budget_bytes=int(1.1e9), cap_bytes=LINE,
                      host_peak_rss_bytes=None, host_peak_data_bytes=None, steps_per_s=None,
                      steps_per_s_intervals=None, measured_intervals=None)
    assert _size(choose_for_budget(_source(base), BUDGET, headroom_fraction=0.1).chosen) == 512
    assert _size(choose_for_budget(_source([*base, at_line]), BUDGET,
                                   headroom_fraction=0.1).chosen) == 128
