"""Property tests: the planner's computed search picks what trying every size would, and
stays fast whatever the maximum or the profile's product."""

import dataclasses
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sweeps import sweep_config
from tests.unit.tune.test_planner import plan, replay
from vramtune.tune.planner import StepKind
from vramtune.workload.profile import load_profile, profile_from_dict
from vramtune.workload.rules import ScalingPolicy

QUICK = load_profile("quick").to_dict()


def _profile(policy: ScalingPolicy, bs: int, nmb: int, n0: int):
    return profile_from_dict({**QUICK, "scaling": str(policy), "num_envs": n0, "max_envs": n0,
                              "ppo": {**QUICK["ppo"], "batch_size": bs, "num_minibatches": nmb}})


@settings(max_examples=120, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(ScalingPolicy)), st.integers(1, 64), st.integers(1, 16),
       st.integers(1, 256), st.integers(1, 300), st.integers(1, 1200), st.integers(0, 4),
       st.floats(0.05, 3.0))
def test_computed_valid_sizes_plan_like_trying_every_size(policy, bs, nmb, n0, start, top,
                                                          refine, per_env):
    prof = _profile(policy, bs, nmb, n0)
    start, top = min(start, top), max(start, top)
    fast = sweep_config(prof, None, 0.1, start, top, refine).space()
    slow = dataclasses.replace(fast, sizes_between=None)  # every integer through is_valid

    def memory(n: int) -> float:
        return n * per_env / 100

    assert replay(memory, fast, oom_above=4.0) == replay(memory, slow, oom_above=4.0)


@settings(max_examples=30, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(ScalingPolicy)), st.sampled_from([1, 7, 64, 1 << 24]),
       st.sampled_from([1, 3, 1 << 16]), st.integers(1, 1 << 24), st.integers(1, 1 << 24))
def test_planning_is_fast_for_any_maximum(policy, bs, nmb, start, top):
    prof = _profile(policy, bs, nmb, 64)
    start, top = min(start, top), max(start, top)
    sp = sweep_config(prof, None, 0.1, start, top, 3).space()
    started = time.perf_counter()
    step = plan([], sp)
    assert step.phase in (StepKind.DOUBLING, StepKind.DONE)
    assert time.perf_counter() - started < 2.0


# deadline=None: the oracle (listing every size) is what is slow, so the time bound is on the
# planner's own call, asserted in the test
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 5000), st.integers(70_000, 150_000), st.sampled_from([1, 2, 3, 7, 12]),
       st.integers(0, 11))
def test_a_wide_gap_is_refined_like_the_full_list(lo, width, modulus, residue):
    """Over 65536 valid sizes between the last fit and the first failure, bisection picks
    from its round grid instead of listing them all: the roundest valid size in the middle
    half, nearest the midpoint among equals, wherever that size is on the grid (at most
    BISECT_GRID_BITS significant bits); else the grid's own such pick."""
    from tests.unit.tune.test_planner import result
    from vramtune.records import Status
    from vramtune.tune.planner import BISECT_GRID_BITS, SearchSpace, candidates
    from vramtune.tune.search import roundness as _roundness

    hi = lo + width

    def valid(n: int) -> bool:
        return n % modulus == residue % modulus

    sp = SearchSpace(start=lo, max_envs=hi, refine=3, limit_bytes=None, is_valid=valid)
    mid, quarter = (lo + hi) / 2, (hi - lo) / 4

    def pick(sizes: list[int]) -> int | None:
        middle = [n for n in sizes if lo + quarter <= n <= hi - quarter] or sizes
        return min(middle, key=lambda n: (-_roundness(n), abs(n - mid))) if middle else None

    started = time.perf_counter()
    step = plan([result(lo), result(hi, Status.OOM)], sp)
    assert time.perf_counter() - started < 2.0  # the oracle below is slow; the planner is not
    expected = pick([n for n in range(lo + 1, hi) if valid(n)])
    if expected is not None and (expected >> (_roundness(expected) - 1)).bit_length() <= \
            BISECT_GRID_BITS:
        assert step.num_envs == expected
    else:
        assert step.num_envs == pick([n for n in candidates(sp) if lo < n < hi])
