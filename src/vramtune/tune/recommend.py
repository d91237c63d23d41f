"""Choose among measured trials only, and say why every other row was not chosen.

A size that was not run is never recommended: Lightning's BatchSizeFinder users found the
'power' mode returning untested sizes that OOMed at once in real training.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from vramtune.fmt import rate as fmt_rate
from vramtune.measure.rates import median_interval
from vramtune.records import Objective, Purpose, Status, TrialResult
from vramtune.tune.boundary import (
    PROOF_RUNS,
    boundary_edge,
    failure_words,
    fits,
    over_failed_proof,
    short_of_room,
    under_line,
)
from vramtune.tune.speed import (
    DEFAULT_MARGIN,
    DIP_RATIO,
    Drift,
    Rates,
    SpeedPick,
    Verdict,
    comparison_words,
    dip_between,
    dip_words,
    pick_fastest,
)
from vramtune.units import format_bytes, headroom_limit_bytes

RANKED = frozenset({Purpose.SEARCH, Purpose.ALONE})  # trials whose steps/s may be compared
KNEE_TOLERANCE = 0.05  # 'knee': smallest num_envs within 5% of the best steps/s


@dataclass(frozen=True)
class Recommendation:
    chosen: TrialResult | None
    objective: Objective
    limit_bytes: int | None  # budget x (1 - headroom), the line a peak must stay under
    reasons: dict[int, str]  # num_envs -> why it was chosen / not chosen
    best_steps_per_s: float | None
    notice: str | None = None  # set when nothing fits, with what to try
    confirmation: TrialResult | None = None  # the chosen size's long run, when it passed
    speed: SpeedPick | None = None  # throughput: the comparison that decided the pick
    # The run of the chosen size with the highest peak: the pick is its fastest run, which
    # may be a run alone on a warm compile cache, lower than a cold user run will peak.
    highest: TrialResult | None = None
    runs_of_chosen: int = 0  # runs of the chosen size that fitted, proofs included
    # Ranked runs left out of the comparison, with why: each read a dip that its size's
    # later run did not repeat (a disturbed run, not the size's speed).
    set_aside: tuple[tuple[TrialResult, str], ...] = ()
    # Another objective's pick (no speed comparison): its size's kept ranked runs pooled
    chosen_rates: Rates | None = None

    def set_aside_words(self, r: TrialResult) -> str | None:
        """Why ``r`` was left out of the speed comparison; None if it was not."""
        return next((words for run, words in self.set_aside if run is r), None)

    @property
    def peak_bytes(self) -> int | None:
        """The chosen size's highest measured peak over every run of it that fitted."""
        r = self.highest if self.highest is not None else self.chosen
        return r.peak_bytes if r is not None else None

    @property
    def peak_among(self) -> str | None:
        """'the highest of its 3 runs' where the size ran more than once, else None."""
        return (f"the highest of its {self.runs_of_chosen} runs" if self.runs_of_chosen > 1
                else None)

    @property
    def steady_steps_per_s(self) -> float | None:
        """The pick's steps/s as the speed pick weighed it: the median over every interval of
        its ranked runs (after a drift in the machine's speed, its runs since), since
        ``chosen`` is its fastest run, which reads high once it ran twice; the chosen run's
        own figure where no comparison pooled intervals (another objective, or records
        without them)."""
        c = self.chosen
        rates = self._rates(c.num_envs) if c is not None else None
        if rates is not None and rates.median:
            return rates.median
        return c.steps_per_s if c is not None else None

    @property
    def steady_pooled(self) -> bool:
        """Whether ``steady_steps_per_s`` pools more than the chosen run's own figure."""
        c = self.chosen
        return c is not None and self.steady_steps_per_s != c.steps_per_s

    @property
    def steady_intervals(self) -> int | None:
        """How many intervals ``steady_steps_per_s`` is the median of (None: not known, or
        the median of runs recorded without their intervals)."""
        c = self.chosen
        if c is None:
            return None
        rates = self._rates(c.num_envs)
        if rates is not None and rates.median and rates.intervals:
            return len(rates.intervals)
        return None if self.steady_pooled else c.measured_intervals

    @property
    def remeasure(self) -> tuple[int, ...]:
        """Two sizes whose comparison is unresolved and could change the pick: measure them
        again, alone and interleaved. Empty: the pick is decided."""
        return self.speed.remeasure if self.speed is not None else ()

    @property
    def speed_line(self) -> str | None:
        """'steady 6.05M steps/s (95% interval 5.9M-6.2M); fastest fitting 1920 envs: 7.61M;
        ratio 0.79 (95% interval 0.75-0.83)': the pick against the fastest, throughput only."""
        sp, c = self.speed, self.chosen
        if sp is None or c is None:
            return None
        mine = self._rates(sp.num_envs)
        line = f"steady {_rate_with_interval(mine)} steps/s"
        if sp.fastest == sp.num_envs:
            return line + " (the fastest fitting size)"
        vs = sp.comparisons[sp.num_envs]
        ratio = (f"ratio {vs.ratio:.3f}" + (f" (95% interval {vs.low:.3f}-{vs.high:.3f})"
                                            if vs.low is not None and vs.high is not None
                                            and vs.low != vs.high else ""))
        return (f"{line}; fastest fitting {sp.fastest} envs: "
                f"{_rate_with_interval(self._rates(sp.fastest))} steps/s; {ratio}")

    @property
    def confirm_speed_line(self) -> str | None:
        """The confirming run's steady rate beside its search trial's, and their ratio; a ratio
        outside 0.9-1.1 is named as a finding (a trial's window misread the steady rate)."""
        c, run = self.chosen, self.confirmation
        if c is None or run is None or not c.steps_per_s or not run.steps_per_s:
            return None
        # Against the size's pooled rate (every ranked run of it), not its fastest run: once
        # a size was re-measured, its fastest run alone would read the ratio low.
        pooled = self._rates(c.num_envs)
        if pooled is not None and pooled.median:
            trial_rate, trial_words = pooled.median, _rate_with_interval(pooled)
        else:
            trial_rate, trial_words = c.steps_per_s, _rate_with_interval_of(c)
        ratio = run.steps_per_s / trial_rate
        line = (f"confirming run {_rate_with_interval_of(run)} steps/s beside its trial's "
                f"{trial_words}: ratio {ratio:.2f}")
        if not CONFIRM_RATIO_OK[0] <= ratio <= CONFIRM_RATIO_OK[1]:
            line += (f" (finding: {abs(ratio - 1):.0%} apart: the trial's window misread the "
                     "steady rate, or the machine's speed moved between them; comparisons "
                     "with runs from before are widened by it)")
        return line

    def _rates(self, num_envs: int) -> Rates | None:
        if self.speed is not None:
            return self.speed.rates.get(num_envs)
        r = self.chosen_rates
        return r if r is not None and r.num_envs == num_envs else None

    @property
    def confirmed_line(self) -> str | None:
        """'confirmed: 120 training steps, peak 1.02 GiB host RAM' for tables and files."""
        c = self.confirmation
        if c is None:
            return None
        peak = c.line_figure_bytes
        what = c.cap_figure_words
        room = ""  # a CPU's proof is held below its line (its budget here may be another)
        if (self.limit_bytes is not None and c.cap_bytes is not None and not c.is_gpu
                and c.cap_bytes < self.limit_bytes):
            room = (f" (a cap {format_bytes(self.limit_bytes - c.cap_bytes)} below the "
                    f"{format_bytes(self.limit_bytes)} line)")
        return (f"confirmed: {c.training_steps} training steps, peak "
                f"{format_bytes(peak)} {c.memory_label}{' ' + what if what else ''}"
                f" under {c.cap or 'no cap'}{room}")


CONFIRM_RATIO_OK = (0.9, 1.1)  # a confirming run's steps/s over its trial's, unremarkable


def _rate_with_interval(r: Rates | None) -> str:
    if r is None:
        return "n/a"
    low, high = median_interval(r.intervals) if r.intervals else (None, None)
    if low is None or high is None:
        return fmt_rate(r.median)
    return f"{fmt_rate(r.median)} (95% interval {fmt_rate(low)}-{fmt_rate(high)})"


def _rate_with_interval_of(r: TrialResult) -> str:
    if r.steps_per_s_ci_low is None or r.steps_per_s_ci_high is None:
        return fmt_rate(r.steps_per_s)
    return (f"{fmt_rate(r.steps_per_s)} (95% interval {fmt_rate(r.steps_per_s_ci_low)}-"
            f"{fmt_rate(r.steps_per_s_ci_high)})")


def size_rates(num_envs: int, rows: Iterable[TrialResult]) -> Rates:
    """One size's throughput evidence: every interval of its ranked runs pooled; for runs
    recorded before intervals were kept, their medians, slowest and fastest intervals."""
    rows = [r for r in rows if r.steps_per_s is not None]
    pooled = [x for r in rows for x in (r.steps_per_s_intervals or ())]
    if pooled:
        return Rates(num_envs, statistics.median(pooled), tuple(pooled), low=min(pooled),
                     high=max(pooled), count=len(pooled), runs=len(rows))
    lows = [r.steps_per_s_min for r in rows if r.steps_per_s_min is not None]
    highs = [r.steps_per_s_max for r in rows if r.steps_per_s_max is not None]
    counts = [r.measured_intervals for r in rows if r.measured_intervals]
    return Rates(num_envs, statistics.median(r.steps_per_s or 0.0 for r in rows),
                 low=min(lows) if lows else None, high=max(highs) if highs else None,
                 count=sum(counts) if len(counts) == len(rows) else None, runs=len(rows))


def choose(results: Iterable[TrialResult], budget_bytes: int | None, headroom_fraction: float,
           objective: Objective = Objective.THROUGHPUT, *, margin: float = DEFAULT_MARGIN,
           remeasure_left: bool = False) -> Recommendation:
    """The pick and why. Throughput: the smallest size known to be within ``margin`` of the
    fastest, else the fastest (``tune.speed``); an unresolved comparison that could change
    the pick is named in ``remeasure`` while ``remeasure_left`` (only a running sweep can
    measure again: report, emit-config and the API's recommend cannot), else the fastest
    median stands and the reasons say so."""
    in_order = list(results)  # as run: a later run is a later time
    rows = sorted(in_order, key=lambda r: r.num_envs)
    limit = headroom_limit_bytes(budget_bytes, headroom_fraction)
    # A size fits only if every run of it fit: one failure (on repeat, or in the long
    # confirming run) moves the boundary below it, and memory grows with num_envs, so every
    # larger size is past the boundary too, whatever it did once.
    # So does a size whose own trial left less room than the search keeps (short_of_room).
    short = short_of_room(rows, limit)
    after_proof = over_failed_proof(rows, limit)
    over = {**short, **after_proof}
    shorts = _short_reasons(rows, limit, short, over)
    edge = boundary_edge(rows, limit, over)
    # A proof run (repeat or confirmation) that ended in an error (or a Warp buffer
    # overflow: the physics was not the user's) proves nothing: its size
    # stays unproven (the next smaller one is proven instead), the boundary stays put.
    unproven = {r.num_envs for r in rows if r.purpose is not Purpose.SEARCH
                and r.status in (Status.ERROR, Status.OVERFLOW)}
    # Ranked on search trials (and sizes re-run alone, as long as one) only: a confirming
    # run's longer window must not change the pick it was run to prove; proof runs count
    # for the boundary and the confirmation.
    # A size known only by a proof run (emit-config keeps one record per size, and may keep
    # the confirming one) is ranked by it: that is all there is to rank it by.
    ranked_sizes = {r.num_envs for r in rows if r.purpose in RANKED}
    candidates = [r for r in rows if (r.purpose in RANKED or r.num_envs not in ranked_sizes)
                  and fits(r, limit) and (edge is None or r.num_envs < edge)
                  and r.num_envs not in unproven]
    chosen: TrialResult | None = None
    speed: SpeedPick | None = None
    chosen_rates: Rates | None = None
    by_size: dict[int, list[TrialResult]] = {}
    for r in candidates:
        by_size.setdefault(r.num_envs, []).append(r)
    # Sizes that ran alone but cannot be picked still trace the curve a dip is seen
    # against (the size above the boundary, often).
    witnesses = [size_rates(n, rs) for n, rs in _ranked_by_size(rows).items()
                 if n not in by_size]
    # A disturbed run is out before anything reads the size's rate, whatever the objective
    # (a max-envs pick quotes its rate too), the drift check too (its proof run would read
    # far above the pooled rate: a move that was not).
    set_aside = _disturbed(by_size, witnesses)
    aside = {id(x) for x, _ in set_aside}
    by_size = {n: [r for r in rs if id(r) not in aside] for n, rs in by_size.items()}
    candidates = [r for r in candidates if id(r) not in aside]
    best = max((r.steps_per_s or 0.0 for r in candidates), default=None)
    if candidates and best is not None:
        if objective is Objective.THROUGHPUT:
            # Decided by measurement (tune.speed): an overlap of two noisy ranges decides
            # nothing, or on a noisy CPU every row ties and the smallest always wins.
            kept = [r for r in in_order if id(r) not in aside]
            drift, since = speed_drift(kept)
            if drift is not None:  # sizes that ran again since are compared on those runs
                later = {id(r) for r in kept[since + 1:]}
                by_size = {n: ([r for r in rs if id(r) in later] if n in drift.rerun else rs)
                           for n, rs in by_size.items()}
                by_size = {n: rs for n, rs in by_size.items() if rs}
            speed = pick_fastest([size_rates(n, rs) for n, rs in by_size.items()], margin,
                                 remeasure_left, drift, witnesses)
            assert speed is not None
            chosen = max(by_size[speed.num_envs], key=lambda r: r.steps_per_s or 0.0)
        else:
            if objective is Objective.KNEE:
                size = min(r.num_envs for r in candidates
                           if (r.steps_per_s or 0) >= best * (1 - KNEE_TOLERANCE))
            else:
                size = max(r.num_envs for r in candidates)
            # its fastest run, as throughput's pick, and its rate pooled over its runs
            chosen = max(by_size[size], key=lambda r: r.steps_per_s or 0.0)
            ranked = [r for r in by_size[size] if r.purpose in RANKED and r.steps_per_s]
            chosen_rates = size_rates(size, ranked) if ranked else None
    reasons: dict[int, str] = {}
    alone = {r.num_envs for r in rows if r.status is Status.OK and not r.shared_run}
    for r in rows:
        if r.shared_run and r.num_envs in alone and r.status is Status.OK:
            continue  # the size's run alone speaks for it
        reason = _reason(r, chosen, limit, best, objective, budget_bytes, edge, speed, over,
                         shorts, after_proof)
        previous = reasons.get(r.num_envs)
        if previous is None or not (previous.startswith("recommended")
                                    or previous.startswith("fit once")):
            reasons[r.num_envs] = reason  # per size: the recommendation or a failure wins
    notice = None
    if chosen is None:
        notice = _nothing_fits(rows, limit, over)
    confirmation = None
    if chosen is not None:
        confirmation = next((r for r in rows if r.num_envs == chosen.num_envs
                             and r.purpose is Purpose.CONFIRM and r.status is Status.OK), None)
    highest, runs = None, 0
    if chosen is not None:
        same = [r for r in rows if r.num_envs == chosen.num_envs and r.status is Status.OK
                and r.peak_bytes is not None]
        highest, runs = max(same, key=lambda r: r.peak_bytes or 0, default=None), len(same)
    return Recommendation(chosen, objective, limit, reasons, best, notice, confirmation, speed,
                          highest, runs, set_aside, chosen_rates)


def _ranked_by_size(results: Iterable[TrialResult]) -> dict[int, list[TrialResult]]:
    by_size: dict[int, list[TrialResult]] = {}
    for r in results:
        if (r.purpose in RANKED and r.status is Status.OK and not r.shared_run
                and r.steps_per_s):
            by_size.setdefault(r.num_envs, []).append(r)
    return by_size


def disturbed_runs(results: Iterable[TrialResult]) -> tuple[TrialResult, ...]:
    """Every size's disturbed run (``_disturbed``) among all ranked runs, whether the size
    could be picked or not (a view's, beside ``Recommendation.set_aside``)."""
    return tuple(r for r, _ in _disturbed(_ranked_by_size(results), ()))


def size_speeds(results: Iterable[TrialResult]) -> dict[int, float]:
    """Each size's steps/s from its ranked runs alone (search trials, re-measures): the
    median over every interval, a disturbed run set aside (``_disturbed``). Sizes with no
    such run are left out: a caller falls back to what it has, never to 0. Without a pick's
    drift check: ``weighed_speeds`` where there is a pick."""
    results = list(results)
    by_size = _ranked_by_size(results)
    aside = {id(x) for x in disturbed_runs(results)}
    out = {}
    for n, rs in sorted(by_size.items()):
        median = size_rates(n, [r for r in rs if id(r) not in aside]).median
        if median:
            out[n] = median
    return out


def weighed_speeds(rec: Recommendation, results: Iterable[TrialResult]) -> dict[int, float]:
    """Each size's steps/s as this pick weighed it: the comparison's rate where the size was
    compared (after a drift in the machine's speed, its runs since), the pick's own pooled
    rate under another objective, else ``size_speeds`` (a size past the boundary)."""
    out = size_speeds(results)
    if rec.chosen_rates is not None and rec.chosen_rates.median:
        out[rec.chosen_rates.num_envs] = rec.chosen_rates.median
    if rec.speed is not None:
        out.update({n: r.median for n, r in rec.speed.rates.items() if r.median})
    return out


def _disturbed(by_size: Mapping[int, list[TrialResult]], witnesses: Sequence[Rates]
               ) -> tuple[tuple[TrialResult, str], ...]:
    """A size's first ranked run, when it read a dip (``speed.dip_between``) that its later
    runs do not repeat (they read more than ``DIP_RATIO`` above it and are no dip
    themselves): that run was disturbed, and the size is weighed on its other runs. A dip
    its later runs repeat stays: it may be real. Only the first: a dip is asked about only
    while a size has one run (``pick_fastest``), so the run it re-measures is the first.
    ``by_size`` lists each size's runs in the order they were recorded (for several run
    folders read together, the order they were given in)."""
    measured = sorted([*(size_rates(n, rs) for n, rs in by_size.items()), *witnesses],
                      key=lambda v: v.num_envs)
    out: list[tuple[TrialResult, str]] = []
    for n, rs in by_size.items():
        if len(rs) < 2 or not rs[0].steps_per_s:
            continue
        mine, since = size_rates(n, rs[:1]), size_rates(n, rs[1:])
        if not since.median > DIP_RATIO * mine.median:
            continue
        sides = dip_between(mine, measured)
        if sides is not None and dip_between(replace(since, runs=1), measured) is None:
            out.append((rs[0], f"set aside: read {mine.median:,.0f} steps/s, a dip "
                               f"({dip_words(sides, 'that')}), and {since.median:,.0f} when "
                               f"run again: a disturbed run"))
    return tuple(out)


def speed_drift(in_order: Sequence[TrialResult]) -> tuple[Drift | None, int]:
    """Did the machine's speed move during the sweep? A proof run's rate is not ranked (its
    longer window must not change the pick it proves), but it is a second draw of a size at
    another time: when it reads outside ``CONFIRM_RATIO_OK`` of that size's earlier ranked
    runs (0.81 when a neighbour's load arrived between them), the machine moved by more than
    most leads between sizes that ran minutes apart. The largest such move (each size's
    first proof run), with the sizes that ran again after the first, and that position in
    ``in_order``; (None, -1) when nothing moved."""
    moved: list[tuple[int, float]] = []
    first = -1
    ranked: dict[int, list[TrialResult]] = {}  # one pass: a resumed file may hold thousands
    seen: set[int] = set()
    for i, r in enumerate(in_order):
        if r.status is not Status.OK or not (r.steps_per_s and math.isfinite(r.steps_per_s)
                                             and r.steps_per_s > 0):
            continue
        if r.purpose in RANKED and not r.shared_run:
            ranked.setdefault(r.num_envs, []).append(r)
            continue
        if r.purpose not in PROOF_RUNS or r.num_envs not in ranked or r.num_envs in seen:
            continue
        seen.add(r.num_envs)  # a size's first proof run only: the work stays linear
        trial = size_rates(r.num_envs, ranked[r.num_envs]).median
        if not (trial and trial > 0) or CONFIRM_RATIO_OK[0] <= r.steps_per_s / trial <= CONFIRM_RATIO_OK[1]:
            continue
        moved.append((r.num_envs, r.steps_per_s / trial))
        first = i if first < 0 else first
    if not moved:
        return None, -1
    n, ratio = max(moved, key=lambda m: abs(math.log(m[1])))
    rerun = frozenset(r.num_envs for r in in_order[first + 1:] if r.purpose in RANKED
                      and not r.shared_run and r.status is Status.OK)
    return Drift(n, ratio, rerun), first


def speed_words(speed: SpeedPick, num_envs: int) -> str | None:
    """Why a fitting size was or was not the throughput pick, in figures."""
    f = speed.fastest
    if num_envs == speed.num_envs:
        if num_envs != f:
            c = speed.comparisons[num_envs]
            if c.verdict is Verdict.FASTER:
                return f"recommended (throughput: {comparison_words(num_envs, f, c, fastest_is=f)})"
            return (f"recommended (throughput: {comparison_words(num_envs, f, c, fastest_is=f)}"
                    f": the smaller is picked)")
        # the pick is the fastest: every unresolved comparison could change it, a larger
        # size's too (it may be the faster)
        open_ = [n for n, c in speed.comparisons.items() if c.verdict is Verdict.UNRESOLVED]
        if speed.remeasure:
            other = speed.remeasure[1]
            words = comparison_words(min(other, f), max(other, f), speed.comparisons[other],
                                     fastest_is=f)
            return f"recommended for now (throughput: fastest median; {words}: re-measuring)"
        if speed.exhausted and open_:
            other = max(open_, key=lambda n: speed.comparisons[n].ratio)
            words = comparison_words(min(other, f), max(other, f), speed.comparisons[other],
                                     fastest_is=f)
            # the ratio (every pairwise ratio's median) may lean the other way within
            # noise: the medians the pick stands on are shown beside it
            medians = ", ".join(f"{n}: {fmt_rate(speed.rates[n].median)}" for n in (f, other)
                                if n in speed.rates)
            return (f"recommended (throughput: {words}; no re-measurement left: the faster "
                    f"median is picked{f' ({medians} steps/s)' if medians else ''})")
        return "recommended (throughput: fastest median)"
    c = speed.comparisons.get(num_envs)
    if num_envs == f:
        pick = speed.comparisons[speed.num_envs]
        return (f"fastest median, but {comparison_words(speed.num_envs, f, pick, fastest_is=f)}"
                f": the smaller is picked")
    if c is None:
        return None
    # The verdict leads, so a narrow table's cell ('slower [1]') says it before the figures.
    words = comparison_words(min(num_envs, f), max(num_envs, f), c, fastest_is=f)
    if c.verdict is Verdict.UNRESOLVED:
        return words  # 'unresolved: a vs b (...)' already leads with its verdict
    verdict = ("within margin" if c.verdict is Verdict.WITHIN_MARGIN
               else "faster" if c.a_faster else "slower")
    return f"{verdict}: {words}"


def _reason(r: TrialResult, chosen: TrialResult | None, limit: int | None, best: float | None,
            objective: Objective, budget: int | None, edge: int | None = None,
            speed: SpeedPick | None = None, over: Mapping[int, int] | None = None,
            shorts: Mapping[int, str] | None = None,
            after_proof: Mapping[int, int] | None = None) -> str:
    if chosen is not None and r is chosen:
        if objective is Objective.THROUGHPUT and speed is not None:
            return speed_words(speed, r.num_envs) or f"recommended ({objective})"
        return f"recommended ({objective})"
    if chosen is not None and r.num_envs == chosen.num_envs and r.status is Status.OK:
        return f"same size as the recommended row ({r.purpose})"
    if r.status is not Status.OK:
        return failure_words(r)
    if r.steps_per_s is None:
        return "no throughput measured"
    if limit is not None:
        proven = under_line(r, limit)
        if proven is None:
            return "peak memory not measured"
        if proven is False:
            figure = r.line_figure_bytes
            # name the figure held against the line: the table's % budget column is the peak
            what = f"{r.cap_figure_words} " if r.cap_figure_bytes is not None else ""
            share = f"{what}{figure / budget:.0%} of budget" if budget and figure else "over the limit"
            return f"over headroom ({share})"
    if edge is not None and r.num_envs >= edge:
        cap = (after_proof or {}).get(r.num_envs)  # a failed proof's cap, not the search's line
        if r.num_envs in (shorts or {}):
            return (shorts or {})[r.num_envs]
        if cap is not None and r.purpose not in PROOF_RUNS:
            return (f"fit its trial, but peaked above {format_bytes(cap)}, the cap a proof run "
                    f"ran out of memory under: its own would fail")
        if r.num_envs > edge:
            if edge in (over or {}):
                return f"fit once, but {edge} envs is past the boundary"
            return f"fit once, but a run at {edge} envs failed"
        return "fit once, but another run of it failed or went over the line"
    if r.shared_run:
        return "fits; shared run: its steps/s are not comparable until it runs alone"
    if speed is not None and objective is Objective.THROUGHPUT:
        words = speed_words(speed, r.num_envs)
        if words is not None:
            return words
    if best and chosen is not None:
        gap = 1 - (r.steps_per_s / best)
        if objective is Objective.MAX_ENVS:
            return "fewer envs"
        if objective is Objective.KNEE and gap <= KNEE_TOLERANCE:
            return "larger than the knee"
        if gap <= 0:
            return ("fastest median, but within noise of the smaller recommended size"
                    if chosen.num_envs < r.num_envs else "ties, more envs")
        if (r.steps_per_s_max is not None and chosen.steps_per_s_min is not None
                and r.steps_per_s_max >= chosen.steps_per_s_min):
            # Its fastest interval beat the chosen row's slowest: the medians differ, the
            # measurements do not say which is faster.
            return f"{gap:.0%} below best, within noise (ranges overlap)"
        return f"slower ({gap:.0%} below best)"
    return "not chosen"


def does_not_fit_words(results: Iterable[TrialResult], num_envs: int, why: str) -> str:
    """Why nothing fits from ``num_envs`` up, said as it happened: a size that fitted its
    search trial and then failed its longer proof run did not 'not fit': its memory grew
    after the trial's window, and nothing smaller was measured."""
    at = [r for r in results if r.num_envs == num_envs]
    fitted = any(r.purpose is Purpose.SEARCH and r.status is Status.OK for r in at)
    proof = next((r for r in reversed(at) if r.purpose is not Purpose.SEARCH
                  and r.status is not Status.OK), None)
    if fitted and proof is not None:
        run = "confirming run" if proof.purpose is Purpose.CONFIRM else f"{proof.purpose} run"
        return (f"{num_envs} envs fitted its search trial but its longer {run} ended in "
                f"{proof.status} (memory grows after a trial's window), and no size below "
                f"{num_envs} was measured: try a smaller --start (e.g. --start "
                f"{max(1, num_envs // 2)}) or a larger budget")
    return (f"the workload does not fit even at {num_envs} envs ({why}): try a smaller "
            f"--start, a larger budget, smaller networks or a shorter unroll_length")


def _short_reasons(rows: list[TrialResult], limit: int | None, short: Mapping[int, int],
                   over: Mapping[int, int]) -> dict[int, str]:
    """Each size short of room (and not ruled out by a failed proof instead), in words, with
    the search trial it was judged by (its highest)."""
    if limit is None:
        return {}
    top: dict[int, int] = {}
    for r in rows:
        figure = r.cap_figure_bytes
        if (r.num_envs in short and r.purpose is Purpose.SEARCH and r.status is Status.OK
                and figure is not None):
            top[r.num_envs] = max(top.get(r.num_envs, 0), figure)
    return {n: (f"short of room (fit its trial {format_bytes(limit - top[n])} under "
                f"the line, less than the {format_bytes(limit - line)} the search keeps for "
                f"another run's jitter: a proof there, a second run, fails up to one time "
                f"in two)")
            for n, line in short.items()
            if n in top and over.get(n) == line and top[n] < limit}  # else: over the line


def _nothing_fits(rows: list[TrialResult], limit: int | None, over: Mapping[int, int]) -> str:
    if not rows:
        return "no trials were measured"
    smallest = rows[0]  # never short of room (search.short_of_room): its proof decides
    cap = over.get(smallest.num_envs)
    if cap is not None:
        return (f"{smallest.num_envs} envs fitted its search trial but peaked above "
                f"{format_bytes(cap)}, the cap a larger size's proof run ran out of memory "
                f"under, and no size below {smallest.num_envs} was measured: try a smaller "
                f"--start (e.g. --start {max(1, smallest.num_envs // 2)}) or a larger budget")
    if any(r.num_envs == smallest.num_envs and r.purpose is not Purpose.SEARCH
           and r.status is not Status.OK for r in rows):
        return does_not_fit_words(rows, smallest.num_envs, str(smallest.status))
    if smallest.status is Status.OOM or (limit is not None and smallest.status is Status.OK
                                         and (smallest.peak_bytes or 0) > limit):
        return (f"the workload does not fit even at num_envs={smallest.num_envs}: try a larger "
                f"budget, a smaller --start, smaller networks, or a shorter unroll_length")
    if limit is not None and any(r.status is Status.OK for r in rows):
        return ("no size stayed under the line on every run (an ok run can still be over it "
                "at this headroom); see the why column")
    return "no trial finished ok; see the why column"
