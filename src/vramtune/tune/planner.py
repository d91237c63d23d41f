"""The pure search planner: results so far -> the next num_envs to run, or done and why.

Sweep records in, ``Step``s out; ``tune.search.propose`` decides, on the search's view of the
records (``as_trial``, ``search_space``). Two methods, both pure (tested on recorded
sequences; ``--resume`` replays them: the same results, in any order, give the same next
sizes):

* ``predictive`` (the default): two sizes, then a jump to the size a memory model fitted to
  the measured peaks predicts fits, then the proof of the edge; bisection when the model
  misses.
* ``bisect`` (and any sweep without a budget: nothing to predict against): doubling from the
  start size until the first failure (out of memory, a peak over budget minus headroom, a
  timeout or a crash) or the maximum; then bisection between the last size that fit and the
  first that failed, on round valid sizes, for up to ``refine`` more trials.

Both propose up to k sizes per round for k trials at once. ``plan_round`` is the entry
point: a list of steps for the next round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from vramtune.records import STOPPERS, TrialResult
from vramtune.results.settings import SearchMethod
from vramtune.tune import search
from vramtune.tune.boundary import (
    as_trial,
    failure_words,
    past_labels,
    ruled_out,
    uses_pool,
)
from vramtune.tune.model import SlopePrior
from vramtune.tune.pool import PoolModel
from vramtune.tune.recommend import does_not_fit_words
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile
from vramtune.workload.rules import ScalingPolicy


class StepKind(StrEnum):
    DOUBLING = "doubling"
    REFINING = "refining"
    PREDICTING = "predicting"  # a size the memory model aimed at, or the proof of its edge
    ALONE = "alone"  # a fitting size run alone, for the steps/s the objective compares
    REPEATING = "repeating"  # the chosen size once more, under the proof's cap
    CONFIRMING = "confirming"  # the chosen config, trained much longer
    DONE = "done"


@dataclass(frozen=True)
class SearchSpace:
    start: int
    max_envs: int
    refine: int | None  # bisect: trials after the first failure; predictive: after the
    #                     bootstrap sizes; None: until the boundary is bracketed on the grid
    limit_bytes: int | None  # budget x (1 - headroom); None: only real failures count
    is_valid: Callable[[int], bool]  # Brax's rules under the profile's scaling policy
    method: SearchMethod = SearchMethod.BISECT
    # (batch_size, num_minibatches, unroll_length) at a size: what the model's rollout term needs
    shape_of: Callable[[int], tuple[int, int, int] | None] | None = None
    # the predictive search's grid, if narrower than is_valid: sizes where memory grows
    # monotonically with num_envs (the growing policies' sizes that keep the base's unrolls
    # per step; a size that rounds up to twice the unrolls needs more than a larger one)
    candidate: Callable[[int], bool] | None = None
    # The valid sizes in [lo, hi], ascending, computed lazily from the rules; None: every
    # integer is tried with is_valid (fine for small spaces, a hang for a sparse huge one).
    sizes_between: Callable[[int, int], Iterable[int]] | None = None
    # bytes per env from XLA's compile-time footprint (tune.prior): one measured size is
    # then enough to aim the predictive search
    prior: SlopePrior | None = None

    def valid_between(self, lo: int, hi: int) -> Iterable[int]:
        lo = max(lo, 1)
        if self.sizes_between is not None:
            return self.sizes_between(lo, hi)
        return (n for n in range(lo, hi + 1) if self.is_valid(n))


@dataclass(frozen=True)
class Step:
    phase: StepKind
    num_envs: int | None  # None when done
    reason: str
    # (mean, upper) peak in bytes the memory model expected: a prediction, shown only as
    # "predicted", never as a result
    predicted_bytes: tuple[float, float] | None = None


def next_valid_at_least(n: int, space: SearchSpace) -> int | None:
    return next(iter(space.valid_between(n, space.max_envs)), None)


def doubling_sizes(space: SearchSpace) -> list[int]:
    """start, 2 x start, ... snapped up to valid sizes, capped by max_envs (included if valid)."""
    sizes: list[int] = []
    target = space.start
    while target <= space.max_envs:
        size = next_valid_at_least(target, space)
        if size is None:
            break
        if not sizes or size > sizes[-1]:
            sizes.append(size)
        target = max(size, target) * 2
    if sizes and sizes[-1] < space.max_envs and space.is_valid(space.max_envs):
        sizes.append(space.max_envs)
    return sizes


def _last_line(text: str | None) -> str:
    """The line that says why: an error message ends with the exception, after its context."""
    lines = (text or "").strip().splitlines()
    return lines[-1][:160] if lines else "no message"


# ------------------------------------------------------------- the search's view of the sweep

ROUND_GRID_BITS = 4  # the model's grid: 1024, 1152, 1280, ... (steps of 1/16 to 1/8)
# Bisection's grid (steps of 1/64 to 1/32): the sizes it picks within --refine 3 of a doubling
# bracket from a start that is not round; a finer step is well inside one run's jitter on
# quick (a refinement step, ``search.RESOLVE_SD`` sd of one run's peak, is 90-225 envs there)
BISECT_GRID_BITS = 6
_PHASES = {"bootstrap": StepKind.DOUBLING, "double": StepKind.DOUBLING, "bisect": StepKind.REFINING,
           "predict": StepKind.PREDICTING, "edge": StepKind.PREDICTING}


def aims_with_model(space: SearchSpace) -> bool:
    """The predictive search with a budget to predict against: a memory model aims it. Else
    (``bisect``, or no budget) it doubles, then bisects."""
    return space.method is SearchMethod.PREDICTIVE and space.limit_bytes is not None


def candidates(space: SearchSpace) -> list[int]:
    """The sizes the search may propose: round valid sizes between start and max_envs.

    With the model, at most ROUND_GRID_BITS significant bits, on the narrower ``candidate``
    grid when it holds at least two sizes. Without it, at most BISECT_GRID_BITS, and the
    doubling ladder, so that bisection doubles from a start that is not round and takes
    the roundest valid size in the middle of the bracket, as fine as its ``--refine``
    trials reach from there."""
    if not aims_with_model(space):
        grid = search.round_grid(space.is_valid, space.start, space.max_envs, BISECT_GRID_BITS)
        return sorted(set(grid).union(doubling_sizes(space)))

    def wanted(n: int) -> bool:
        return space.is_valid(n) and (space.candidate is None or space.candidate(n))

    grid = search.round_grid(wanted, space.start, space.max_envs, ROUND_GRID_BITS)
    if len(grid) < 2 and space.candidate is not None:
        grid = search.round_grid(space.is_valid, space.start, space.max_envs, ROUND_GRID_BITS)
    return grid


def keeps_base_unrolls(profile: Profile, device_count: int) -> Callable[[int], bool] | None:
    """The growing policies' sizes that keep the base's unrolls per training step: on them
    memory grows with num_envs (a size whose batch rounds up to more unrolls needs more than
    a larger one that does not), which the predictive search relies on. None: every size."""
    if profile.scaling is ScalingPolicy.HOLD_ENV_STEPS:
        return None
    base = profile.base_shape

    def keeps(n: int) -> bool:
        shape = profile.shape_for(n, device_count)
        return shape is not None and shape.samples_per_update * base.num_envs == \
            base.samples_per_update * n

    return keeps


# XLA's BFC allocator grew quick's pool in 256 MiB steps on an H100 and an H200 (258, 514,
# 770 MiB; 270, 526, 782 with a 12 MiB small region beside them): the granularity the pool
# model brackets each reading to. A region the allocator takes larger only widens what a
# reading says; the model's misses check catches a pool that leaves the levels.
POOL_REGION_BYTES = 256 * 2**20


def model_limit_bytes(results: Sequence[TrialResult], limit_bytes: int) -> int:
    """Where the model's figure runs out: the limit, or on GPU the allocator's own limit
    (the fraction left after the CUDA context), when the trials reported it."""
    reported = [r.jax_bytes_limit for r in results if r.is_gpu and r.jax_bytes_limit]
    return min([limit_bytes, *reported])


def search_space(results: Sequence[TrialResult], space: SearchSpace,
                 grid: Sequence[int] | None = None) -> search.Space:
    """The pure search's view of the space, given the trials so far."""
    use_model = aims_with_model(space)
    limit = (float(model_limit_bytes(results, space.limit_bytes))
             if space.limit_bytes is not None else math.inf)
    # Peaks that jitter run to run (a CPU's data segment) are refined to one run's
    # resolution, a GPU's allocator figures to the grid; a GPU's pool is fitted as a pool.
    gpu = any(r.is_gpu for r in results)
    return search.Space(tuple(grid if grid is not None else candidates(space)), limit,
                        space.start, refine=space.refine, shape_of=space.shape_of,
                        use_model=use_model, prior=space.prior,
                        # without a model nothing needs a longer lever: start, 2x, 4x, ...
                        spread=4 if use_model else 2,
                        # a pool model needs a limit to have levels under (no budget: none)
                        region_bytes=(POOL_REGION_BYTES if use_model and uses_pool(results)
                                      else None),
                        resolve_sd=None if gpu else search.RESOLVE_SD)


def plan_round(results: Sequence[TrialResult], space: SearchSpace, k: int = 1,
               over: Mapping[int, int] | None = None) -> list[Step]:
    """The next round: up to ``k`` sizes to run at once, or one DONE step that says why.

    ``bisect``: doubling then k-ary bisection, no model (``aims_with_model``). ``predictive``
    without a budget has nothing to predict against and searches as ``bisect`` does: the
    throughput curve an uncapped sweep is for. ``over``: the sizes ruled out
    (``boundary.ruled_out``) when ``results`` is not every record (a size proven by a run
    not among them is not short of room); default from ``results``.
    """
    k = max(1, int(k))
    if space.start > space.max_envs:
        return [Step(StepKind.DONE, None, f"start {space.start} is above the maximum "
                                       f"{space.max_envs}")]
    grid = candidates(space)
    if not grid:
        return [Step(StepKind.DONE, None, f"no num_envs between {space.start} and {space.max_envs} "
                                       f"satisfies Brax's batch rules for this profile")]
    sp = search_space(results, space, grid)
    if not sp.use_model:  # bisection runs its --refine trials (proof rooms still use the sd)
        sp = replace(sp, resolve_sd=None)
    pool = uses_pool(results)
    if over is None:
        over = ruled_out(results, space.limit_bytes)
    why = past_labels(results, over, space.limit_bytes)
    trials = [as_trial(r, space.limit_bytes, pool, ruled_out=r.num_envs in over,
                       past_why=why.get(r.num_envs)) for r in results]
    stopper = next((r for r in results if r.status in STOPPERS), None)
    if stopper is not None:  # the error's own last line says why
        return [Step(StepKind.DONE, None, f"stopped: num_envs={stopper.num_envs} ended in "
                                       f"{stopper.status} ({_last_line(stopper.error_message)}); "
                                       f"that is not a memory limit, fix the workload first")]
    proposal = search.propose(trials, sp, k)
    if proposal.done:
        if proposal.fits is None and proposal.fails is not None:  # nothing fitted
            last = next((r for r in reversed(results) if r.num_envs == proposal.fails), None)
            why = "failed" if last is None else failure_words(last, space.limit_bytes, over)
            return [Step(StepKind.DONE, None, does_not_fit_words(results, proposal.fails, why))]
        return [Step(StepKind.DONE, None, _done_words(proposal.reason))]
    phase = _PHASES.get(proposal.phase, StepKind.REFINING)
    return [Step(phase, n, _step_words(proposal, n), proposal.predicted.get(n))
            for n in proposal.sizes]


def _step_words(proposal: search.Proposal, n: int) -> str:
    """The proposal's reason, with the model's figures for this size labelled 'predicted'."""
    words = proposal.reason
    predicted = proposal.predicted.get(n)
    if predicted is not None and isinstance(proposal.model, PoolModel):
        # A pool past the top level is no reading at all (the trial runs out of memory), so
        # the median is named as a level only when it is one. The probability is the model's
        # own, before the sizes measured around n narrow it (the search aims with that).
        middle, _upper = predicted
        top = proposal.model.top_bytes
        median = (f"median pool {format_bytes(int(middle))}" if middle <= top
                  else f"median past the {format_bytes(int(top))} level (out of memory)")
        words += (f"; predicted {median}; P(fits under the {format_bytes(int(top))} level) "
                  f"{proposal.model.prob_fits(n):.2f} by the model alone (a prediction, not a "
                  f"measurement)")
    elif predicted is not None:
        mean, upper = predicted
        words += (f"; predicted peak {format_bytes(int(mean))}, upper bound "
                  f"{format_bytes(int(upper))} (a prediction, not a measurement)")
    return words


def _done_words(reason: str) -> str:
    if reason.startswith("no failure up to the largest candidate"):
        return reason + " (raise --max-envs to look)"
    if reason.startswith("the workload does not fit"):
        return reason.replace("try a smaller start", "try a smaller --start")
    return reason
