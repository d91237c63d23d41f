"""Which of two sizes trains faster, decided by their per-interval steps/s, not by a tie rule.

A trial records its steady steps/s per interval. Two sizes are compared on the ratio of their
rates: the Hodges-Lehmann estimate (median of every pairwise ratio) with its distribution-free
95% interval from the Mann-Whitney statistic (exact for small samples, normal beyond). No
randomness: the same samples always give the same verdict. The verdict is

* ``WITHIN_MARGIN``: the whole interval lies within ±margin of 1: the difference is known to be
  below the margin (then the smaller size may be picked, leaving less than the margin);
* ``FASTER``: the interval excludes 1 and is not inside the margin: one is faster with
  confidence;
* ``UNRESOLVED``: neither: measure both again (interleaved) before deciding.

The intervals within one run share that run's conditions; runs at different times need not.
Where a size's own runs at different times disagree (a proof run's steps/s beside its
trial's, outside 0.9-1.1: the machine's speed moved, say a neighbour's load came or went),
every comparison is widened by that move, except between sizes that both ran again since,
which are compared on those runs alone (``Drift``).

A load that comes and goes between two proof-less trials is not seen that way, but it leaves a
dip: one run read well below the sizes measured on both sides of it (on a 2-core CPU, 704 envs
at 13,943 steps/s between 576's 25,040 and 832's 23,743, its 3 intervals spread 1.53x, where
undisturbed runs spread 1.01-1.31x), or, the largest size measured, far below the size under
it. Such a size, known from one run, is not ranked on that run: the comparison is unresolved
and the pair is measured again (``DIP_RATIO``, ``DIP_EDGE_RATIO``). A dip that
an interleaved pair repeats is real (a GPU's tile sizes can make one) and then stands; one that
the size's next run does not repeat was the run, and that run is set aside
(``recommend.choose``).

Records from before per-interval rates were kept carry only min, median and max over a count
of intervals: two disjoint ranges are complete separation (every interval of one beat every
interval of the other), significant when the counts make it so; otherwise they resolve nothing.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from statistics import NormalDist, median

DEFAULT_MARGIN = 0.02
CONFIDENCE = 0.95
EXACT_MAX_PAIRS = 2500  # n x m up to which the Mann-Whitney null is counted exactly
# Two runs of one size at different times read within 0.9-1.1x of each other when nothing
# moved (a trial and its proof run); a size read more than this below the nearest sizes
# measured on both sides is a dip that one disturbed run explains better than the curve.
DIP_RATIO = 1.1
# The largest size measured has a neighbour below only. Throughput grows with num_envs until
# it levels off; over 248 neighbouring pairs in the recorded CPU sweeps, undisturbed drops to
# the next size up stayed within 1.19x and the 15 beyond 1.25x (1.27-2.31x) were runs beside a
# load. So there, a drop past this from the size below is a dip.
DIP_EDGE_RATIO = 1.25


class Verdict(StrEnum):
    FASTER = "faster"
    WITHIN_MARGIN = "within margin"
    UNRESOLVED = "unresolved"


@dataclass(frozen=True)
class Rates:
    """One size's steady steps/s: its per-interval rates (pooled over its runs) or, for older
    records, only their median, min, max and count."""

    num_envs: int
    median: float
    intervals: tuple[float, ...] = ()
    low: float | None = None  # slowest interval
    high: float | None = None  # fastest interval
    count: int | None = None  # intervals behind low/high when ``intervals`` is empty
    runs: int = 1  # ranked runs pooled here: a dip in one run only is re-measured


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b``: ratio = a's rate / b's, with its 95% interval (None: unbounded)."""

    verdict: Verdict
    ratio: float
    low: float | None
    high: float | None
    margin: float
    a_faster: bool | None = None  # set when the verdict is FASTER
    why: str | None = None  # why there is no interval, when there is none

    def interval_words(self) -> str:
        if self.low is None or self.high is None:
            return self.why or "95% interval unbounded: too few intervals"
        words = f"95% interval {self.low:.3f}-{self.high:.3f}"
        return f"{words}, {self.why}" if self.why else words


def _counts_u(n: int, m: int) -> list[int]:
    """How many orderings give each Mann-Whitney U (0..n*m) under the null: the coefficients
    of the Gaussian binomial [n+m choose n], built by multiplying (1 - q^(m+i)) / (1 - q^i)."""
    size = n * m + 1
    poly = [0] * size
    poly[0] = 1
    for i in range(1, n + 1):
        k = m + i
        for u in range(size - 1, k - 1, -1):  # times (1 - q^k)
            poly[u] -= poly[u - k]
        for u in range(i, size):  # divided by (1 - q^i): exact, the quotient is a polynomial
            poly[u] += poly[u - i]
    return poly


def _rank_of_bound(n: int, m: int, confidence: float = CONFIDENCE) -> int:
    """C such that the interval is [D_(C), D_(nm+1-C)] of the sorted pairwise differences
    (1-based), i.e. the largest C with P(U <= C - 1) <= alpha / 2. 0: no interval at this
    confidence (too few intervals)."""
    alpha = 1 - confidence
    if n * m <= EXACT_MAX_PAIRS:
        counts = _counts_u(n, m)
        total = math.comb(n + m, n)
        cumulative, c = 0, 0
        for u, count in enumerate(counts):
            cumulative += count
            if cumulative / total > alpha / 2:
                break
            c = u + 1
        return c
    z = NormalDist().inv_cdf(1 - alpha / 2)
    c = math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
    return max(c, 0)


def ratio_interval(a: Sequence[float], b: Sequence[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """Hodges-Lehmann ratio of a's rates to b's and its distribution-free interval (on log
    rates, so a ratio and its inverse get the same treatment)."""
    la = [math.log(x) for x in a]
    lb = [math.log(y) for y in b]
    diffs = sorted(x - y for x in la for y in lb)
    estimate = math.exp(median(diffs))
    c = _rank_of_bound(len(la), len(lb), confidence)
    if c < 1:
        return estimate, None, None
    return estimate, math.exp(diffs[c - 1]), math.exp(diffs[len(diffs) - c])


def _verdict(ratio: float, low: float | None, high: float | None, margin: float) -> Comparison:
    if low is None or high is None:
        return Comparison(Verdict.UNRESOLVED, ratio, low, high, margin)
    if 1 - margin <= low and high <= 1 + margin:
        return Comparison(Verdict.WITHIN_MARGIN, ratio, low, high, margin)
    if low > 1:
        return Comparison(Verdict.FASTER, ratio, low, high, margin, a_faster=True)
    if high < 1:
        return Comparison(Verdict.FASTER, ratio, low, high, margin, a_faster=False)
    return Comparison(Verdict.UNRESOLVED, ratio, low, high, margin)


def can_resolve(c: Comparison, n: int, m: int, more_n: int, more_m: int) -> bool:
    """Could ``more_n`` and ``more_m`` further intervals of the two sizes settle an
    unresolved comparison of ``n`` and ``m`` intervals? Predicted as the same ratio with its
    interval narrowed the way the Mann-Whitney interval narrows with the counts (its width
    goes as sqrt(1/n + 1/m)). False: more runs like these would most likely leave it
    unresolved (a loaded machine's spread), so they are not worth their wall."""
    if c.verdict is not Verdict.UNRESOLVED:
        return False
    if c.low is None or c.high is None or n < 1 or m < 1 or not c.ratio > 0:
        return True  # no interval yet: more intervals may give one
    half = max(math.log(c.high / c.ratio), math.log(c.ratio / c.low))
    shrink = math.sqrt((1 / (n + more_n) + 1 / (m + more_m)) / (1 / n + 1 / m))
    low, high = c.ratio * math.exp(-half * shrink), c.ratio * math.exp(half * shrink)
    return _verdict(c.ratio, low, high, c.margin).verdict is not Verdict.UNRESOLVED


def _usable(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def compare(a: Sequence[float], b: Sequence[float], margin: float = DEFAULT_MARGIN) -> Comparison:
    """Compare two samples of per-interval rates."""
    xa, xb = _usable(a), _usable(b)
    if not xa or not xb:
        return Comparison(Verdict.UNRESOLVED, math.nan, None, None, margin)
    ratio, low, high = ratio_interval(xa, xb)
    return _verdict(ratio, low, high, margin)


def compare_rates(a: Rates, b: Rates, margin: float = DEFAULT_MARGIN) -> Comparison:
    """Compare two sizes: on their intervals where both have them, else on their ranges."""
    if a.intervals and b.intervals:
        return compare(a.intervals, b.intervals, margin)
    ratio = a.median / b.median if a.median and b.median else math.nan
    if not any((a.intervals, b.intervals, a.low, a.high, b.low, b.high)) and not math.isnan(ratio):
        # Neither carries any spread (hand-made records, not a trial's): taken at its word.
        return _verdict(ratio, ratio, ratio, margin)
    if None in (a.low, a.high, b.low, b.high) or not (b.low and b.high):
        return Comparison(Verdict.UNRESOLVED, ratio, None, None, margin)
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    n = a.count or len(a.intervals) or 1
    m = b.count or len(b.intervals) or 1
    # Every pairwise ratio lies in [a.low / b.high, a.high / b.low], so does the interval
    # whenever the counts allow one; disjoint ranges are complete separation.
    if _rank_of_bound(n, m) < 1:
        return Comparison(Verdict.UNRESOLVED, ratio, None, None, margin)
    low, high = a.low / b.high, a.high / b.low
    if low <= 1 <= high and not (1 - margin <= low and high <= 1 + margin):
        return Comparison(Verdict.UNRESOLVED, ratio, None, None, margin,
                          why="ranges overlap and no per-interval rates were recorded")
    return _verdict(ratio, low, high, margin)


def widen(c: Comparison, move: float, why: str) -> Comparison:
    """``c`` with its interval widened by a factor ``exp(move)`` each way (``move``: a log
    ratio two runs of one size differed by) and its verdict drawn again: a lead smaller than
    the machine's own move between runs is not a lead."""
    if not move > 0 or c.low is None or c.high is None:
        return c
    low, high = c.low * math.exp(-move), c.high * math.exp(move)
    return replace(_verdict(c.ratio, low, high, c.margin), why=why)


@dataclass(frozen=True)
class SpeedPick:
    """The throughput pick among fitting sizes and the evidence for it."""

    num_envs: int
    fastest: int  # the size with the highest median
    comparisons: dict[int, Comparison] = field(default_factory=dict)  # size vs the fastest
    remeasure: tuple[int, ...] = ()  # two sizes to measure again, interleaved; () resolved
    exhausted: bool = False  # unresolved, and no re-measurement is left: fastest median picked
    rates: dict[int, Rates] = field(default_factory=dict)  # each candidate's evidence
    # size -> the neighbours (below, above; or below alone) that read well above it
    dips: dict[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Drift:
    """The machine's speed moved during the sweep: ``num_envs``'s proof run read ``ratio`` of
    its earlier runs' steps/s (outside the band of a window's own error). ``rerun``: the sizes
    that ran again since, whose rates are then their runs since only."""

    num_envs: int
    ratio: float
    rerun: frozenset[int] = frozenset()

    @property
    def move(self) -> float:
        """The move as a log ratio, either way."""
        return abs(math.log(self.ratio))

    def words(self) -> str:
        return (f"widened {math.exp(self.move):.2f}x each way: {self.num_envs} envs' trial "
                f"and proof run differ {math.exp(self.move):.2f}x")


def pick_fastest(candidates: Sequence[Rates], margin: float = DEFAULT_MARGIN,
                 remeasure_left: bool = True, drift: Drift | None = None,
                 witnesses: Sequence[Rates] = ()) -> SpeedPick | None:
    """The smallest size known to be within ``margin`` of the fastest (or faster than it),
    else the fastest by median. A comparison that could change the pick and is unresolved
    asks for the fastest and that size to be measured again (the closest such contender
    first); with none left to ask, the fastest median stands, and ``exhausted`` says so.

    With ``drift``, a comparison is widened by the machine's move (``widen``) unless both
    sizes ran again since it (``Drift.rerun``: the same conditions, interleaved).
    ``witnesses``: sizes that ran but cannot be picked (short of room, past the boundary);
    their rates only tell whether a candidate's one run is a dip (``DIP_RATIO``)."""
    if not candidates:
        return None
    fastest = max(candidates, key=lambda c: (c.median, -c.num_envs))
    comparisons = {c.num_envs: _drifted(compare_rates(c, fastest, margin), c.num_envs,
                                        fastest.num_envs, drift)
                   for c in candidates if c is not fastest}
    measured = sorted([*candidates, *witnesses], key=lambda c: c.num_envs)
    dips: dict[int, tuple[int, ...]] = {}
    for c in candidates:
        dip = dip_between(c, measured)
        if c is fastest or dip is None:
            continue
        was = comparisons[c.num_envs]
        if was.a_faster is False or was.verdict is Verdict.UNRESOLVED:
            dips[c.num_envs] = dip
            words = (f"its one run is a dip ({dip_words(dip)}): a disturbed run or a real "
                     f"one, not ranked on one run")
            comparisons[c.num_envs] = replace(was, verdict=Verdict.UNRESOLVED, a_faster=None,
                                              why=f"{was.why}; {words}" if was.why else words)
    eligible = [c for c in candidates if c is not fastest and c.num_envs < fastest.num_envs
                and (comparisons[c.num_envs].verdict is Verdict.WITHIN_MARGIN
                     or comparisons[c.num_envs].a_faster is True)]
    pick = min(eligible, key=lambda c: c.num_envs) if eligible else fastest
    # Unresolved sizes between the pick and the fastest cannot change the pick; a smaller
    # one could become the pick, a larger one could be the faster.
    open_ = [c for c in candidates if c is not fastest
             and comparisons[c.num_envs].verdict is Verdict.UNRESOLVED
             and not pick.num_envs < c.num_envs < fastest.num_envs]
    remeasure: tuple[int, ...] = ()
    exhausted = False
    if open_:
        if remeasure_left:
            # a dip first: its median is the one figure known not to be the size's speed
            contender = max(open_, key=lambda c: (c.num_envs in dips, c.median, -c.num_envs))
            remeasure = (fastest.num_envs, contender.num_envs)
        else:
            exhausted = True
    return SpeedPick(pick.num_envs, fastest.num_envs, comparisons, remeasure, exhausted,
                     {c.num_envs: c for c in candidates}, dips)


def dip_between(c: Rates, measured: Sequence[Rates]) -> tuple[int, ...] | None:
    """The nearest sizes below and above ``c`` (``measured``: sorted by size) when both read
    more than ``DIP_RATIO`` times ``c``'s median, or the nearest below alone when nothing
    larger was measured and it read more than ``DIP_EDGE_RATIO`` times it; None when ``c``
    rests on more than one run or is no dip. (A smallest size reading below the next is the
    curve rising, not a dip.)"""
    if c.runs != 1 or not c.median > 0 or not (c.intervals or c.low is not None):
        return None  # a record with no spread at all is taken at its word (compare_rates)
    # bisect, not a scan: a resumed file may hold thousands of sizes, each asked once
    i = bisect_left(measured, c.num_envs, key=_size)
    j = bisect_right(measured, c.num_envs, key=_size)
    if i == 0:
        return None
    low = measured[i - 1]
    if j == len(measured):
        return (low.num_envs,) if low.median > DIP_EDGE_RATIO * c.median else None
    high = measured[j]
    if low.median > DIP_RATIO * c.median and high.median > DIP_RATIO * c.median:
        return low.num_envs, high.num_envs
    return None


def _size(r: Rates) -> int:
    return r.num_envs


def dip_words(sides: tuple[int, ...], of: str = "its rate") -> str:
    """'576 and 832 on either side read over 1.1x its rate', or '640, the size below it, read
    over 1.25x its rate (no larger size's speed measured)': the ratios as the rule applies
    them."""
    if len(sides) == 2:
        return f"{sides[0]} and {sides[1]} on either side read over {DIP_RATIO:g}x {of}"
    return (f"{sides[0]}, the size below it, read over {DIP_EDGE_RATIO:g}x {of} (no larger "
            f"size's speed measured)")


def _drifted(c: Comparison, a: int, b: int, drift: Drift | None) -> Comparison:
    if drift is None or (a in drift.rerun and b in drift.rerun):
        return c
    return widen(c, drift.move, drift.words())


def percent(ratio: float) -> str:
    return f"{abs(ratio - 1) * 100:.1f}%"


def comparison_words(small: int, big: int, c: Comparison, *, fastest_is: int) -> str:
    """One candidate against the fastest, in figures: 'within 1.1% (95% interval ±0.8%)',
    '26% faster (95% interval 22-30%)', 'unresolved'. ``c`` is candidate / fastest."""
    other = small if fastest_is == big else big
    if c.verdict is Verdict.WITHIN_MARGIN:
        assert c.low is not None and c.high is not None
        spread = max(abs(c.low - 1), abs(c.high - 1)) * 100
        return (f"{big} and {small} within {percent(c.ratio)} (95% interval "
                f"±{spread:.1f}%, margin {c.margin:.0%})")
    if c.verdict is Verdict.FASTER and c.low == c.high:  # no spread recorded: no interval
        return (f"{other if c.a_faster else fastest_is} is "
                f"{percent(c.ratio if c.a_faster else 1 / c.ratio)} faster than "
                f"{fastest_is if c.a_faster else other}")
    if c.verdict is Verdict.FASTER:
        assert c.low is not None and c.high is not None
        if c.a_faster:  # the candidate beat the fastest median
            return (f"{other} is {percent(c.ratio)} faster than {fastest_is} (95% interval "
                    f"{(c.low - 1) * 100:.1f}-{(c.high - 1) * 100:.1f}%)")
        lo, hi = 1 / c.high - 1, 1 / c.low - 1
        return (f"{fastest_is} is {percent(1 / c.ratio)} faster than {other} (95% interval "
                f"{lo * 100:.1f}-{hi * 100:.1f}%)")
    ratio = "n/a" if math.isnan(c.ratio) else f"{c.ratio:.3f}"
    return (f"unresolved: {other} vs {fastest_is} (ratio {ratio}, {c.interval_words()}, "
            f"margin {c.margin:.0%})")
