"""Proving the pick: a size counts as fitting only if it fits again, under a cap that leaves
room for another run's jitter; a failed proof starts a step-down below it.

The confirming run's length, floor and limit; the proof cap; the step-down's state and its
next size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramtune.inputs import MAX_TRAINING_STEPS
from vramtune.measure.wire import (
    CONFIRM_MIN_EVALS,
    confirm_epoch_steps,
)
from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune import search
from vramtune.tune.alone import Decision
from vramtune.tune.boundary import (
    PROOF_RUNS,
    as_trial,
    fits,
    past_boundary,
    proof_room_bytes,
    ruled_out,
    uses_pool,
)
from vramtune.tune.planner import SearchMethod, SearchSpace, Step, StepKind, candidates, search_space
from vramtune.tune.recommend import RANKED
from vramtune.tune.request import (
    SweepConfig,
)
from vramtune.units import format_bytes

CONFIRM_FACTOR = 10  # a confirming run trains 10x the steps its trial's memory took to settle...
MIN_CONFIRM_STEPS = 50  # ...and at least 50 (25 epochs of 2): a ceiling; it may end earlier
UNKNOWN_FLOOR_STEPS = 10  # the floor of a proof whose trial's record lacks its length


def confirm_steps(config: SweepConfig, chosen: TrialResult) -> int:
    """Training steps of the confirming run: ``--confirm-steps``, else ten times the steps
    after which the trial's memory was steady (its whole length for records without that
    figure), at least MIN_CONFIRM_STEPS. Sized by memory, not by the throughput window: a
    small workload on a CPU trains 500+ steps in its 8 s window while its memory settled by
    step 5-10, and 10x the window made its confirmation 2-3 trials long."""
    if config.settings.confirm_steps is not None:
        return config.settings.confirm_steps
    # bounded as --confirm-steps is: a results file (resumed) may hold any figure
    return min(MAX_TRAINING_STEPS, max(MIN_CONFIRM_STEPS, CONFIRM_FACTOR * _settled_steps(chosen)))


def confirm_floor_steps(config: SweepConfig, chosen: TrialResult, steps: int) -> int | None:
    """Where a confirming run may end once memory holds (``child``: the peak steady over the
    latter half of the run, two evaluations in): at the steps its search trial ran, so that
    it proves at least what that trial did, under a lower cap. No margin above that: over
    20 proofs at 704-2048 envs that ended at a 10-step floor, the peak held from step 4, and
    every proof that failed in the recorded sweeps died by its second epoch (where brax
    compiles its epoch again), which a floor of the trial's length (5+ epochs of 2 steps)
    covers; a size whose memory creeps keeps its proof running past the floor (18-38 steps
    at 192-576). None (run ``steps`` exactly) when the user fixed the length with
    ``--confirm-steps``."""
    if config.settings.confirm_steps is not None:
        return None
    return min(steps, max(1, chosen.training_steps or UNKNOWN_FLOOR_STEPS))


def confirm_timeout_s(config: SweepConfig, chosen: TrialResult, steps: int) -> float:
    """Three times the time the trial's own pace predicts, never below the trial limit."""
    floor = config.timeout_s if config.timeout_s is not None else config.profile.timeout_s
    if not chosen.wall_s or not chosen.training_steps:
        return floor * CONFIRM_FACTOR
    compile_s = chosen.compile_s or 0.0
    per_step = max(chosen.wall_s - compile_s, 0.0) / chosen.training_steps
    return max(floor, 3 * (compile_s + per_step * steps))


def proof_basis(results: Sequence[TrialResult], num_envs: int) -> TrialResult:
    """The search trial (or run alone) a proof run of this size is sized from: the one whose
    memory took longest to settle (``confirm_steps``)."""
    return max((r for r in results if r.num_envs == num_envs and r.status is Status.OK
                and r.purpose in RANKED), key=_settled_steps)


def _settled_steps(r: TrialResult) -> int:
    """Training steps after which a trial's memory was steady; its whole length for records
    without that figure."""
    return (r.memory_steady_steps if r.memory_steady_steps is not None
            else r.training_steps or 0)


def proof_cap_bytes(config: SweepConfig, results: Sequence[TrialResult], n: int,
                    space: SearchSpace | None = None) -> int | None:
    """The cap a proof run (repeat or confirmation) of size n runs under: the line less one
    refinement step where peaks jitter run to run (``search.proof_room_bytes``: a proof that
    passes with less room is a coin flip for the user's next run), the line itself on a GPU's
    pool; None without a budget. ``space``: the sweep's, with the slope prior its probe found
    (default the config's, without it).

    The room is never wider than the one the records alone give (``boundary.proof_room_bytes``,
    the line ``short_of_room`` draws): a size the search let through peaked under the line
    less that room, so its proof never runs under a cap its own trial already exceeded."""
    limit = config.limit_bytes
    if limit is None:
        return None
    room = search.proof_room_bytes([as_trial(r, limit, uses_pool(results)) for r in results],
                                   search_space(results, space or config.space()), n)
    if room is None or not room > 0:
        return limit
    flat = proof_room_bytes(results, limit, n)
    if flat > 0:
        room = min(room, flat)
    return max(1, limit - min(int(room), limit // 2))  # bounded: a wild model leaves half


def _room_words(config: SweepConfig, cap: int | None) -> str:
    """', capped at X: Y below the Z line, ...' for a proof held below the line; '' at it."""
    limit = config.limit_bytes
    if cap is None or limit is None or cap >= limit:
        return ""
    return (f", capped at {format_bytes(cap)}: {format_bytes(limit - cap)} below the "
            f"{format_bytes(limit)} line, room for another run's jitter")


def edge_step(config: SweepConfig, results: Sequence[TrialResult], decision: Decision,
              space: SearchSpace | None = None) -> Step | None:
    """After the search: prove the chosen size, or None when it is proven.

    A size counts as fitting only if it fits again. With confirmation on, the second run is
    the long confirming one (``confirm_steps`` training steps, evaluation as the profile has
    it); without it, a plain repeat. Either runs under ``proof_cap_bytes``: on a CPU the line
    less one refinement step, at the line on a GPU. A failure moves the boundary below that
    size (``recommend.choose``), and the next smaller fitting size is proven in turn.
    """
    rec = decision.rec
    if rec.chosen is None:
        return None
    n = rec.chosen.num_envs
    same = [r for r in results if r.num_envs == n]
    if config.settings.confirm:
        if any(r.purpose is Purpose.CONFIRM for r in same):
            return None
        return confirming_step(config, results, n, space=space)
    if any(r.purpose is Purpose.REPEAT for r in same):
        return None  # proven (or not: choose() then moved on); one repeat per size
    room = _room_words(config, proof_cap_bytes(config, results, n, space))
    return Step(StepKind.REPEATING, n, f"repeating {n} envs: a size fits only if it fits "
                                       f"again{room}")


def confirming_step(config: SweepConfig, results: Sequence[TrialResult], n: int,
                    where: str = "", space: SearchSpace | None = None) -> Step:
    """The confirming run of size n, and what it will cover."""
    basis = proof_basis(results, n)
    steps = confirm_steps(config, basis)
    floor = confirm_floor_steps(config, basis, steps)
    if floor is not None:  # the child reports every confirm_epoch_steps, and needs 3 reports
        floor = max(floor, 3 * confirm_epoch_steps(steps))
    length = (f"{steps} training steps" if floor is None or floor >= steps else
              f"{floor}-{steps} training steps (ending once memory has held over the latter "
              f"half of the run, {CONFIRM_MIN_EVALS}+ evaluations in)")
    room = _room_words(config, proof_cap_bytes(config, results, n, space))
    return Step(StepKind.CONFIRMING, n, f"confirming {n} envs: {length}, evaluation as in "
                                     f"training{room}{f' ({where})' if where else ''}")


STEP_DOWN = 3  # sizes searched below a failed proof run, at most


def step_down_budget(refine: int | None) -> int:
    """Sizes a step-down may search: ``refine`` when smaller, at most STEP_DOWN. Three
    halvings leave the edge within an eighth of the interval the failed proof opened."""
    return STEP_DOWN if refine is None else max(0, min(refine, STEP_DOWN))


@dataclass(frozen=True)
class StepDown:
    """Where a step-down stands: the search trials to the first failed proof run are what the
    search found; after it, sizes between ``base`` (the largest size below ``hi`` that fitted
    its search trial or its proof) and ``hi`` (the smallest failure, proof runs included) are
    searched (``step_down_steps`` says which). Only then is the pick proven, and a failed
    proof lowers ``hi`` to it: one proof per step-down when the search's edge holds, instead
    of a proof for every size searched (a confirmation costs several search trials)."""

    first_failed: int  # the size whose proof run failed first
    base: int
    hi: int  # the smallest failure or size ruled out (boundary.ruled_out)
    proven: int | None  # the largest size below hi whose proof run fitted
    measured: tuple[int, ...]  # sizes searched since the first failed proof, in order
    budget: int

    @property
    def left(self) -> int:
        return self.budget - len(self.measured)

    def words(self, size: int | None = None) -> str:
        """What the step-down did; with ``size``, which of its sizes a step is about."""
        head = f"step-down below {self.first_failed}, whose proof run failed"
        if size is None:
            return f"{head}: {len(self.measured)} of at most {self.budget} size(s) searched"
        return f"{head}: size {size} of at most {self.budget}"


def step_down(config: SweepConfig, results: Sequence[TrialResult]) -> StepDown | None:
    """The step-down's state, or None while no proof run has failed above a size that fitted
    (then the search alone plans, and says why nothing fits)."""
    limit = config.limit_bytes
    first = next((i for i, r in enumerate(results)
                  if r.purpose in PROOF_RUNS and past_boundary(r, limit)), None)
    if first is None:
        return None
    hi = min([*(r.num_envs for r in results if r.purpose in (Purpose.SEARCH, *PROOF_RUNS)
                and past_boundary(r, limit)), *ruled_out(results, limit)])
    fitted = [r.num_envs for r in results if r.purpose is Purpose.SEARCH
              and r.num_envs < hi and not past_boundary(r, limit) and fits(r, limit)]
    proven = max((r.num_envs for r in results if r.purpose in PROOF_RUNS and r.num_envs < hi
                  and fits(r, limit) and r.status is Status.OK), default=None)
    if not fitted and proven is None:
        return None
    base = max([*fitted, *([proven] if proven is not None else [])])
    measured = tuple(dict.fromkeys(r.num_envs for r in results[first + 1:]
                                   if r.purpose is Purpose.SEARCH))
    return StepDown(results[first].num_envs, base, hi, proven, measured,
                    step_down_budget(config.settings.refine))


def step_down_steps(config: SweepConfig, results: Sequence[TrialResult],
                    space: SearchSpace) -> list[Step] | None:
    """After a failed proof run: the next size to search, or [] when the step-down's searching
    is over (its budget spent, or no size left between); the pick is then proven as usual
    (``edge_step``), and a proof that fails there lowers ``hi`` again. None: no step-down.

    Which size: while ``hi`` failed only its proof, the predictive search on a CPU starts one
    refinement step below it (``search.step_down_pick``). Otherwise it bisects base..hi:
    after a second failed proof when one of them grew past its trial by more than one run's
    jitter (each size is then proven as soon as it is searched), once a
    search trial failed below the proof (the edge is not a jitter below it), on a GPU, and
    with ``--search bisect``."""
    down = step_down(config, results)
    if down is None:
        return None
    limit = config.limit_bytes
    failed = {r.num_envs for r in results if r.purpose in PROOF_RUNS and past_boundary(r, limit)}
    trials = [as_trial(r, limit, uses_pool(results)) for r in results]
    sspace = search_space(results, space)
    eager = len(failed) > 1 and not all(search.proof_failed_by_jitter(trials, sspace, n)
                                        for n in failed)
    if eager:
        # Two proofs failed, one of them past what one run's jitter does: a long run peaks
        # well above its search trial, so a search fit says little about the proof. Prove
        # each size as it is searched, so that the bisection's base is a proven size and not
        # a fit the next proof would undo. (Proofs that each failed within a jitter of their
        # cap step down one refinement step at a time instead.)
        proofs = {r.num_envs for r in results if r.purpose in PROOF_RUNS}
        pending = [n for n in down.measured if down.base <= n < down.hi and n not in proofs
                   and any(r.num_envs == n and r.purpose is Purpose.SEARCH and fits(r, limit)
                           and not past_boundary(r, limit) for r in results)]
        if pending:
            n = max(pending)
            where = down.words(down.measured.index(n) + 1)
            if config.settings.confirm:
                return [confirming_step(config, results, n, where, space)]
            return [Step(StepKind.REPEATING, n, f"repeating {n} envs ({where})")]
    if down.left <= 0:
        return []
    taken = {r.num_envs for r in results}
    open_ = [n for n in candidates(space) if down.base < n < down.hi and n not in taken]
    if space.method is SearchMethod.PREDICTIVE:
        if eager or not open_:
            size = search.bisect_pick(open_, down.base, down.hi) if open_ else None
        else:  # one failed proof: the long run's edge is about one run's jitter below it
            size = search.step_down_pick(trials, sspace, open_, down.base, down.hi,
                                         ruled_out(results, limit).get(down.hi))
    else:
        size = search.bisect_pick(open_, down.base, down.hi) if open_ else None
    if size is None:
        return []
    return [Step(StepKind.REFINING, size, f"refining between {down.base} and {down.hi}: "
                                        f"{size} envs, searched; the largest size that fits "
                                        f"is then proven ({down.words(len(down.measured) + 1)})")]


