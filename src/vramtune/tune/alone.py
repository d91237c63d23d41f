"""Runs alone and re-measurement: the sizes whose steps/s the objective compares are measured
without a neighbour on the device, and an unresolved comparison is run again, interleaved.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from vramtune.records import Objective, Purpose, Status, TrialResult
from vramtune.tune.boundary import boundary_edge, fits
from vramtune.tune.planner import (
    SearchSpace,
    Step,
    StepKind,
    doubling_sizes,
)
from vramtune.tune.recommend import KNEE_TOLERANCE, Recommendation, choose, size_rates
from vramtune.tune.request import (
    DEFAULT_SPEED_MARGIN_FRACTION,
    SweepConfig,
)
from vramtune.tune.speed import (
    DIP_EDGE_RATIO,
    Verdict,
    can_resolve,
    compare_rates,
    dip_words,
)


class Decision:
    """The pick as the records stand, decided once a round and only as far as asked (a
    resumed file of thousands of sizes makes each ``choose`` costly): ``rec``, what the
    proof proves and the outcome reports; ``remeasure_left``, whether an interleaved
    re-measure pair may still run; ``open``, the pick as it stands with a pair left (what
    asks for the pair)."""

    def __init__(self, config: SweepConfig, results: Sequence[TrialResult]) -> None:
        self._config, self._results = config, results

    def _choose(self, remeasure_left: bool) -> Recommendation:
        c = self._config
        return choose(self._results, c.budget_bytes, c.headroom_fraction, c.objective,
                      margin=c.speed_margin, remeasure_left=remeasure_left)

    @cached_property
    def open(self) -> Recommendation:
        return self._choose(True)

    @cached_property
    def remeasure_left(self) -> bool:
        return _remeasure_left(self._config, self._results, self)

    @cached_property
    def rec(self) -> Recommendation:
        return self.open if self.remeasure_left else self._choose(False)


def decide(config: SweepConfig, results: Sequence[TrialResult]) -> Decision:
    """The sweep's ``Decision`` over ``results``."""
    return Decision(config, results)


def alone_steps(config: SweepConfig, results: Sequence[TrialResult], space: SearchSpace,
                decision: Decision) -> list[Step]:
    """After the search: a size whose steps/s the objective compares and that has not run
    alone (its only fitting runs shared the device, or, for ``knee``, a size of the doubling
    ladder below the boundary the predictive search skipped). One at a time, from the largest
    size that fits down, until a size is clearly slower than the best above it (throughput:
    their ranges do not overlap; knee: more than 5% below): below that, smaller sizes are
    taken to be slower still, as throughput grows with num_envs up to its plateau. A stop on
    one run that reads a larger drop than undisturbed neighbours show first measures the size
    below it alone (``_witness_below``). ``max-envs`` compares nothing: only the largest size
    must have run alone.
    """
    limit = config.limit_bytes
    edge = boundary_edge(results, limit)
    fitting = sorted({r.num_envs for r in results if r.status is Status.OK
                      and (edge is None or r.num_envs < edge)}, reverse=True)
    if not fitting:
        return []
    sizes = fitting
    if config.objective is Objective.MAX_ENVS:
        sizes = fitting[:1]
    elif config.objective is Objective.KNEE:
        sizes = sorted(set(fitting) | {n for n in doubling_sizes(space) if n < fitting[0]},
                       reverse=True)
    by_size: dict[int, list[TrialResult]] = {}
    for r in results:  # one pass: a resumed file may hold thousands of sizes
        by_size.setdefault(r.num_envs, []).append(r)
    best: TrialResult | None = None
    for i, n in enumerate(sizes):
        alone = [r for r in by_size.get(n, ()) if not r.shared_run]
        if not alone:
            shared = n in by_size
            why = ("its runs so far shared the device, so their steps/s do not count" if shared
                   else f"the {config.objective} objective compares its steps/s")
            return [Step(StepKind.ALONE, n, f"measuring {n} envs alone: {why}")]
        measured = [r for r in alone if fits(r, limit)]
        if not measured:
            continue  # ran alone and has no steps/s to compare: running it again will not help
        fastest = max(measured, key=lambda r: r.steps_per_s or 0.0)
        if best is not None and _clearly_slower(fastest, best, config.objective, config.speed_margin):
            witness = _witness_below(config, decision, sizes[i + 1:], measured, best, by_size)
            if witness is not None:
                return [witness]
            break
        if best is None or (fastest.steps_per_s or 0.0) > (best.steps_per_s or 0.0):
            best = fastest
    return remeasure_steps(config, results, decision)


def _witness_below(config: SweepConfig, decision: Decision, below: Sequence[int],
                   measured: Sequence[TrialResult], best: TrialResult,
                   by_size: dict[int, list[TrialResult]]) -> Step | None:
    """Throughput: the walk would stop at a size whose one fitting run alone reads more than
    ``DIP_EDGE_RATIO`` below the best above it (undisturbed neighbours differ less), and the
    next size down has no run alone, so no size below could show that run to be a dip. That
    size, run alone, is the witness: reading over ``DIP_RATIO`` times the stopped size's
    rate, it makes the stopped size a dip, which the pick runs again
    (``speed.pick_fastest``); otherwise the walk stops where it did. One trial, only in a
    sweep whose search trials shared the device, and only while a re-measure pair is left
    (without one, a dip found could not be run again)."""
    if config.objective is not Objective.THROUGHPUT or len(measured) != 1 or not below:
        return None
    if not decision.remeasure_left:
        return None
    rate, top = measured[0].steps_per_s or 0.0, best.steps_per_s or 0.0
    if not (rate > 0 and top > DIP_EDGE_RATIO * rate):
        return None
    n, witness = measured[0].num_envs, below[0]
    if any(not r.shared_run for r in by_size.get(witness, ())):
        return None
    return Step(StepKind.ALONE, witness,
                f"measuring {witness} envs alone: {n} read {rate:,.0f} steps/s on its one run "
                f"alone, {best.num_envs} above it {top / rate:.2f}x that (over "
                f"{DIP_EDGE_RATIO:g}x: more than neighbouring sizes differ undisturbed); "
                f"{witness} tells a disturbed run from a slower size")


def remeasure_pairs(results: Sequence[TrialResult]) -> int:
    """Interleaved pairs run so far to settle a throughput comparison: runs alone beyond the
    one a size needs when its search trial shared the device."""
    extra = 0
    for n in {r.num_envs for r in results}:
        alone = sum(1 for r in results if r.num_envs == n and r.purpose is Purpose.ALONE)
        shared = any(r.num_envs == n and r.shared_run for r in results)
        extra += max(0, alone - (1 if shared else 0))
    return extra // 2


def _remeasure_left(config: SweepConfig, results: Sequence[TrialResult],
                    decision: Decision) -> bool:
    """May the sweep still run an interleaved re-measure pair? Not past ``speed_remeasure``
    pairs, and not once the pairs run so far show that the ones left could not settle the
    comparison (``speed.can_resolve``: the interval predicted from the intervals a pair adds
    would still straddle the margin). Under heavy load a pair's spread is tens of percent,
    and spending the rest of the allowance there buys wall, not an answer."""
    done = remeasure_pairs(results)
    if done >= config.speed_remeasure:
        return False
    if done == 0 or config.objective is not Objective.THROUGHPUT:
        return True
    rec = decision.open
    if rec.speed is None or len(rec.remeasure) != 2:
        return True
    fastest, contender = rec.remeasure
    # runs alone with rates: a failed one adds no intervals and predicts nothing
    last = {n: [r for r in results if r.num_envs == n and r.purpose is Purpose.ALONE
                and r.status is Status.OK and r.steps_per_s_intervals]
            for n in (fastest, contender)}
    if not all(last.values()):
        return True
    per_run = {n: len(runs[-1].steps_per_s_intervals or ()) for n, runs in last.items()}
    pairs = config.speed_remeasure - done
    rates = rec.speed.rates
    return can_resolve(rec.speed.comparisons[contender], len(rates[contender].intervals),
                       len(rates[fastest].intervals), pairs * per_run[contender],
                       pairs * per_run[fastest])


def remeasure_wall_s(results: Sequence[TrialResult]) -> float:
    """What the re-measurements cost: the wall of the runs alone that were not a size's first
    run alone after a shared one."""
    seen: set[int] = set()
    wall = 0.0
    for r in results:
        if r.purpose is not Purpose.ALONE:
            continue
        shared = any(o.num_envs == r.num_envs and o.shared_run for o in results)
        if shared and r.num_envs not in seen:
            seen.add(r.num_envs)
            continue
        wall += r.wall_s or 0.0
    return wall


def remeasure_steps(config: SweepConfig, results: Sequence[TrialResult],
                    decision: Decision) -> list[Step]:
    """Throughput: when the pick rests on an unresolved comparison, run the two sizes again,
    alone and interleaved so that load and thermal drift hit both: A B, then B A (a linear
    drift cancels over the two pairs), up to ``speed_remeasure`` pairs per sweep."""
    if config.objective is not Objective.THROUGHPUT:
        return []
    if not decision.remeasure_left:
        return []
    done = remeasure_pairs(results)
    rec = decision.open
    if len(rec.remeasure) != 2:
        return []
    a, b = rec.remeasure
    contender = b  # the size in doubt, beside the fastest
    if done % 2:
        a, b = b, a
    sides = rec.speed.dips.get(contender) if rec.speed is not None else None
    doubt = (f"{contender}'s one run is a dip ({dip_words(sides)}): a disturbed run or a real one"
             if sides else f"their steps/s do not yet say which is faster or that they are "
                           f"within {config.speed_margin:.0%}")
    why = (f"re-measuring {min(a, b)} and {max(a, b)} envs, interleaved (pair {done + 1} of at "
           f"most {config.speed_remeasure}): {doubt}")
    return [Step(StepKind.ALONE, a, why), Step(StepKind.ALONE, b, why)]


def _clearly_slower(r: TrialResult, best: TrialResult, objective: Objective,
                    margin: float = DEFAULT_SPEED_MARGIN_FRACTION) -> bool:
    """Slower by the rule the pick uses (``speed.compare_rates``): measuring sizes alone
    stops at the first one the measurements call slower, not at a range that merely misses."""
    if objective is Objective.KNEE:
        return (r.steps_per_s or 0.0) < (best.steps_per_s or 0.0) * (1 - KNEE_TOLERANCE)
    c = compare_rates(size_rates(r.num_envs, [r]), size_rates(best.num_envs, [best]), margin)
    return c.verdict is Verdict.FASTER and not c.a_faster


