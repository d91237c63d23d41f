"""The speed decision on synthetic per-interval rates: deterministic, distribution-free."""

from __future__ import annotations

import math
import random

import pytest

from vramtune.tune.speed import (
    Rates,
    Verdict,
    _rank_of_bound,
    compare,
    compare_rates,
    comparison_words,
    pick_fastest,
)


def noisy(center: float, n: int, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.mark.parametrize(("n", "bound"), [(3, 0), (5, 3), (6, 6), (8, 14), (10, 24), (20, 128)])
def test_mann_whitney_bounds_match_the_tables(n, bound):
    """Two-sided 5% critical values of U (n = m) plus one: the published table's."""
    assert _rank_of_bound(n, n) == bound


def test_normal_approximation_agrees_with_the_exact_count_where_they_meet():
    from vramtune.tune import speed

    exact = speed._rank_of_bound(50, 50)
    limit = speed.EXACT_MAX_PAIRS
    try:
        speed.EXACT_MAX_PAIRS = 0
        approx = speed._rank_of_bound(50, 50)
    finally:
        speed.EXACT_MAX_PAIRS = limit
    assert abs(exact - approx) <= 2


def test_resolved_faster():
    a, b = noisy(7.6e6, 12, 0.03, 1), noisy(6.0e6, 12, 0.03, 2)
    c = compare(a, b)
    assert c.verdict is Verdict.FASTER and c.a_faster is True
    assert c.low is not None and c.low > 1.15 and 1.2 < c.ratio < 1.33
    back = compare(b, a)
    assert back.verdict is Verdict.FASTER and back.a_faster is False


def test_resolved_within_margin():
    c = compare(noisy(1.005e6, 30, 0.01, 3), noisy(1.0e6, 30, 0.01, 4), margin=0.02)
    assert c.verdict is Verdict.WITHIN_MARGIN
    assert c.low is not None and c.high is not None and 0.98 <= c.low <= c.high <= 1.02


def test_unresolved_when_the_interval_straddles_the_margin():
    """3% apart with 10% noise over 8 intervals each: neither faster nor known to be close."""
    a = [0.93, 0.97, 1.01, 1.03, 1.05, 1.09, 1.12, 1.0]
    b = [0.90, 0.95, 0.98, 1.0, 1.02, 1.06, 1.08, 0.97]
    c = compare(a, b)
    assert c.verdict is Verdict.UNRESOLVED
    assert c.low is not None and c.high is not None and c.low < 1 < c.high


def test_too_few_intervals_resolve_nothing_however_far_apart():
    """3 against 3 cannot reach 95% (the best two-sided p is 0.1)."""
    c = compare([2.0, 2.1, 2.2], [1.0, 1.1, 1.2])
    assert c.verdict is Verdict.UNRESOLVED and c.low is None


def test_deterministic():
    a, b = noisy(1.03e6, 20, 0.05, 7), noisy(1.0e6, 20, 0.05, 8)
    assert compare(a, b) == compare(list(a), list(b))


def test_identical_rates_are_within_any_margin():
    assert compare([5.0] * 6, [5.0] * 6, margin=0.0).verdict is Verdict.WITHIN_MARGIN


def test_legacy_ranges_disjoint_with_many_intervals_are_resolved():
    """Recorded H100 trials: 40 intervals each, min/median/max only."""
    fast = Rates(1920, 7.61e6, low=5.72e6, high=8.40e6, count=40)
    slow = Rates(128, 5.26e5, low=4.65e5, high=7.16e5, count=40)
    c = compare_rates(slow, fast)
    assert c.verdict is Verdict.FASTER and c.a_faster is False


def test_legacy_overlapping_ranges_are_unresolved():
    a = Rates(1920, 7.61e6, low=5.72e6, high=8.40e6, count=40)
    b = Rates(1792, 7.02e6, low=5.24e6, high=7.82e6, count=40)
    assert compare_rates(b, a).verdict is Verdict.UNRESOLVED


def _rates(n: int, center: float, count: int, spread: float, seed: int) -> Rates:
    """``count`` rates spread evenly over center x (1 ± spread), shuffled: median = center."""
    xs = [center * (1 + spread * (2 * i / (count - 1) - 1)) for i in range(count)]
    random.Random(seed).shuffle(xs)
    return Rates(n, center, tuple(xs))


def test_pick_resolved_faster_takes_the_faster():
    pick = pick_fastest([_rates(1536, 6.0e6, 12, 0.02, 1), _rates(1920, 7.6e6, 12, 0.02, 2)])
    assert pick is not None and pick.num_envs == 1920 and pick.remeasure == ()
    words = comparison_words(1536, 1920, pick.comparisons[1536], fastest_is=1920)
    assert words.startswith("1920 is ") and "faster than 1536" in words


def test_pick_within_margin_takes_the_smaller():
    pick = pick_fastest([_rates(1792, 1.0e6, 30, 0.005, 1), _rates(1920, 1.005e6, 30, 0.005, 2)])
    assert pick is not None and pick.num_envs == 1792 and pick.fastest == 1920
    assert pick.remeasure == ()
    words = comparison_words(1792, 1920, pick.comparisons[1792], fastest_is=1920)
    assert words.startswith("1920 and 1792 within") and "95% interval ±" in words


def test_pick_unresolved_asks_to_remeasure_the_closest_pair():
    pick = pick_fastest([_rates(1024, 5.0e6, 10, 0.02, 9),
                         _rates(1792, 1.0e6 * 7.3, 6, 0.15, 3),
                         _rates(1920, 1.0e6 * 7.6, 6, 0.15, 4)])
    assert pick is not None and pick.num_envs == 1920
    assert pick.remeasure == (1920, 1792) and not pick.exhausted


def test_pick_unresolved_with_no_remeasurement_left_says_so():
    candidates = [_rates(1792, 7.3e6, 6, 0.15, 3), _rates(1920, 7.6e6, 6, 0.15, 4)]
    pick = pick_fastest(candidates, remeasure_left=False)
    assert pick is not None and pick.num_envs == 1920 and pick.exhausted
    assert pick.remeasure == ()
    words = comparison_words(1792, 1920, pick.comparisons[1792], fastest_is=1920)
    assert "unresolved" in words


def test_an_unresolved_size_between_the_pick_and_the_fastest_changes_nothing():
    tight_small = _rates(1536, 1.0e6, 40, 0.002, 1)
    vague_middle = _rates(1792, 0.99e6, 3, 0.2, 2)
    tight_fast = _rates(1920, 1.004e6, 40, 0.002, 3)
    pick = pick_fastest([tight_small, vague_middle, tight_fast])
    assert pick is not None and pick.num_envs == 1536 and pick.remeasure == ()


def test_no_candidates():
    assert pick_fastest([]) is None


def test_unusable_rates_are_unresolved():
    c = compare([math.nan, 0.0], [1.0, 2.0])
    assert c.verdict is Verdict.UNRESOLVED


def test_can_resolve_predicts_from_the_counts():
    """The interval narrows as sqrt(1/n + 1/m): a ratio of 0.97 whose interval is
    0.94-1.005 at 16 and 16 intervals reaches 0.951-0.989 with 32 more each: resolvable;
    0.90-1.04 reaches 0.921-1.02: not."""
    from vramtune.tune.speed import Comparison, can_resolve

    near = Comparison(Verdict.UNRESOLVED, 0.97, 0.94, 1.005, 0.02)
    assert can_resolve(near, 16, 16, 32, 32)
    assert not can_resolve(near, 16, 16, 0, 0)
    wide = Comparison(Verdict.UNRESOLVED, 0.97, 0.90, 1.04, 0.02)
    assert not can_resolve(wide, 16, 16, 32, 32)
    assert can_resolve(Comparison(Verdict.UNRESOLVED, 0.97, None, None, 0.02), 2, 2, 8, 8)
    assert not can_resolve(Comparison(Verdict.FASTER, 0.9, 0.85, 0.95, 0.02, a_faster=False),
                           16, 16, 32, 32)


def test_a_dip_between_two_sizes_is_measured_again_before_other_doubts():
    small, fast = _rates(128, 24_500, 8, 0.05, 1), _rates(640, 24_700, 5, 0.05, 2)
    dipped = _rates(704, 14_000, 3, 0.2, 3)
    above = _rates(832, 23_700, 3, 0.05, 4)
    pick = pick_fastest([small, fast, dipped], witnesses=[above])
    assert pick is not None and pick.dips == {704: (640, 832)}
    assert pick.comparisons[704].verdict is Verdict.UNRESOLVED
    assert "dip (640 and 832 on either side read over 1.1x its rate)" in (pick.comparisons[704].why or "")
    # 128 vs 640 is unresolved too and has the higher median; the dip goes first
    assert pick.remeasure == (640, 704)


def test_the_largest_size_measured_dips_against_the_size_under_it_only_far_below():
    small, fast = _rates(128, 24_500, 8, 0.05, 1), _rates(640, 24_700, 5, 0.05, 2)
    far = pick_fastest([small, fast, _rates(704, 14_000, 5, 0.05, 3)])
    assert far is not None and far.dips == {704: (640,)} and far.remeasure[1] == 704
    assert "640, the size below it, read over 1.25x its rate" in (far.comparisons[704].why or "")
    # a CPU's gentle decline past its peak is the curve, not a dip
    gentle = pick_fastest([small, fast, _rates(704, 21_500, 5, 0.02, 3)])
    assert gentle is not None and gentle.dips == {} and gentle.comparisons[704].a_faster is False
    # the smallest size reading below the next is the curve rising (a GPU's), not a dip
    rising = pick_fastest([_rates(128, 10_000, 5, 0.02, 1), _rates(256, 20_000, 5, 0.02, 2)])
    assert rising is not None and rising.dips == {} and rising.num_envs == 256


def test_a_dip_is_never_read_in_a_size_known_from_several_runs_or_without_spread():
    fast, above = _rates(640, 24_700, 5, 0.05, 2), _rates(832, 23_700, 3, 0.05, 4)
    twice = Rates(704, 14_000, tuple(14_000 * (1 + d) for d in (-0.01, 0, 0.01)), runs=2)
    assert pick_fastest([fast, twice], witnesses=[above]).dips == {}
    bare = Rates(704, 14_000)  # a hand-made record: taken at its word
    assert pick_fastest([fast, bare], witnesses=[above]).dips == {}
