"""The predictive search: measured trials -> the next size(s) to run, up to k at a time, or done.

Pure (numpy via ``tune.model``), so it is tested on recorded sequences and a resumed
sweep replays it: the same trials, in any order, give the same proposal. ``tune.planner``
turns sweep records into ``Trial``s and proposals into ``Step``s.

The search runs on ``candidates``: the valid sizes the sweep may pick, thinned to round ones
(``round_grid``: with the model at most 4 significant bits, ..., 1024, 1152, 1280, ...;
``planner.candidates``). The boundary is found when the largest size that fits and the
smallest that fails are adjacent candidates. Without the model (``use_model`` False:
``--search bisect``) it doubles, then bisects (the roundest candidate in the middle half),
steps 1 and 3 below without the model's parts.

1. Bootstrap: the start and 4 x start (a longer lever for the first extrapolation than a
   doubling) for one or two workers; k > 2 workers: the first k sizes of the doubling ladder
   at once (topped up at the widest log-gaps when it is short). With a slope prior
   (``Space.prior``, XLA's compile-time footprint: ``tune.prior``) one worker needs the start
   alone: the prior stands in for the second size, and the first jump aims at P >= aim_prior.
   Until the model has what it needs, and whenever it cannot tell growth from jitter
   (``Model.growth``), doubling goes on.
2. Predict: fit the memory model on every ok trial with a peak, turn it into P(n fits) for
   each open candidate, conditioned on what was measured, P(n) = (P0(n) - P0(hi)) /
   (P0(lo) - P0(hi)), so a failure moves the next guess though it has no peak. One worker: the
   largest open candidate with P >= ``aim_open`` (0.8) for the first jump, then P >= ``aim``
   (0.5, the median edge); if none, the candidate just above the largest fit (proving the
   edge). Where peaks jitter and the model is trusted, a pick less than one refinement step
   above the largest fit becomes the largest candidate within that step
   (``_resolvable_pick``). k workers: the candidates at the quantiles j/(k+1) of the
   predicted edge, topped up with the most uncertain ones. Where peaks jitter
   (``Space.resolve_sd``: a CPU's data segment) the model aims one refinement step below the
   limit, and a size that fitted closer to it is a failure to the search
   (``short_of_room``; the planner marks it).
3. Fallback. Trials that contradict the prior: the model is refitted without it (two sizes
   at least). The smallest failure a size the model still gives P(fits) >= ``surprise``: an
   OOM has no peak, so the line is shifted up until its mean there is the limit, and the
   model aims below it. Otherwise k-ary bisection between the largest fit and the smallest
   failure (the roundest size near each split point: the bisect search's rule for k = 1), or doubling
   while nothing failed, when the model missed by more than its stated uncertainty
   (``model.misses``) or cannot place the edge between lo and hi (P(lo) - P(hi) < MIN_SPAN);
   after WALK consecutive candidates fitted at the top with nothing failed yet, a gallop up
   the grid (1, 2, 4 candidates), not a doubling past the edge. The model is asked again on
   every call. Where peaks jitter, bisection too stops at a bracket no wider than one
   refinement step (from the model that sizes a proof's room, where its slope is told from
   jitter, in envs along the steeper of it and the prior): a miss says the model cannot aim,
   not that one run resolves a finer step.

On a GPU's pool (``Space.region_bytes``: the allocator grows it in whole regions, and a trial
runs out of memory when it would grow past its limit) the model is ``tune.pool``'s: the
pool's need fitted to what each reading brackets, an OOM one of the readings (it moves the
line; no shift), P(fits) from its posterior. Nothing failed yet, it aims at
``aim_pool_open``. Its misses fall back as above.

It never proposes a size already measured (repeats are ``proof.edge_step``'s business),
proposes only candidates, and stops when the boundary is bracketed, the refine budget is spent,
nothing fails up to the largest candidate, the first size fails, or a trial ended in an error.
``Proposal.predicted`` is for display as 'predicted', never as a result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from vramtune.records import BOUNDARY_FAILURES, STOPPERS, Status
from vramtune.tune import model as mm
from vramtune.tune import pool

OK, OOM, CRASH, TIMEOUT = Status.OK, Status.OOM, Status.CRASH, Status.TIMEOUT
MIB = 2**20
MIN_SPAN = 0.2  # P(lo fits) - P(hi fits) under the model: less, and it cannot aim between them
# One room where peaks jitter, in the model's sd of one run's peak (its pooled jitter: the
# 1.5 % prior with the sweep's own residuals): the refinement step (two sizes whose expected
# peaks differ by less are not told apart by one run each, so a bracket that narrow is where
# the search stops), the room a proof run keeps under the line (its cap), and the search's
# line: a search trial that peaked above the cap its proof would run under is "short of
# room". Calibrated on users' runs, one at a time under the line (benchmarks/bench_edge.py,
# quick at 1.2, 1.3 and 1.4 GB): under a cap an ok run's data segment floats up close to the
# cap (384 envs under 1,080 MB: 1,050-1,076 MB in 4 of 4 runs; proofs passed 1-3 MB under
# their caps), so a peak says less about what a run needs than its spread suggests, and
# failure comes sharply a step above the sizes that pass (4 of 4 at 384 envs, 0 of 4 at 448).
# 2 sd for the step and the proof, 3 for the search's line, left the pick 160-192 envs under
# the largest size every user run survived at two budgets of three; 1.5 for all three puts
# it within one 64-env step of it at all three.
RESOLVE_SD = 1.5
CRAWL = 5  # that many fits within the top octave, nothing failed: double (gallop steps too short)
WALK = 3  # consecutive fitting candidates at the top, proposed one above the other: stop trusting


@dataclass(frozen=True)
class Trial:
    num_envs: int
    status: Status  # a plain string ('oom') compares equal
    peak_bytes: float | None = None  # the figure the model fits (what the cap counts); None: unknown
    shape: tuple[int, int, int] | None = None  # (batch_size, num_minibatches, unroll_length)
    over_limit: bool = False  # ran ok, but a peak the sweep holds to the limit was above it
    proof: bool = False  # a repeat or confirming run that failed: a failure, not a search trial
    live_bytes: float | None = None  # GPU: the allocator's live peak (the pool holds at least it)
    room_bytes: float = 0.0  # a proof run held this far below the limit (``proof_room_bytes``)
    # why a run that finished ok is past the boundary ('short of room', ...); None: it failed
    past_why: str | None = None


@dataclass(frozen=True)
class Space:
    candidates: tuple[int, ...]  # valid (round) sizes, any order; the search sorts them
    limit_bytes: float  # budget x (1 - headroom): a peak above it fails
    start: int | None = None  # snapped up to a candidate; default the smallest candidate
    cap_bytes: float | None = None  # where a trial runs out of memory (>= limit); default limit
    refine: int | None = None  # trials allowed beyond the bootstrap sizes (without the model:
    #                            after the first failure); None: until bracketed
    shape_of: Callable[[int], tuple[int, int, int] | None] | None = None  # the policy's batch
    aim: float = 0.5  # one worker, a failure measured: the largest size with P(fits) >= aim
    aim_open: float = 0.8  # one worker, the first jump (two sizes, no failure): cautious
    use_model: bool = True  # False: doubling + k-ary bisection only (--search bisect)
    fit_octaves: float | None = None  # fit only sizes >= largest fit / 2**octaves; None: all
    spread: int = 4  # the bootstrap ladder's factor for k <= spread_up_to workers (else 2)
    spread_up_to: int = 2
    surprise: float = 0.8  # a failure where the current model gives P(fits) >= this: bisect
    prior: mm.SlopePrior | None = None  # the growth per env from a compile-only probe
    # The figure grows in whole allocator regions of this size (a GPU's pool): the search
    # aims with ``tune.pool``'s model of the pool's need, which each reading brackets to one
    # region, and a size fits when its need stays under the highest pool level <= limit.
    region_bytes: float | None = None
    # the refinement step in sd of one run's peak (RESOLVE_SD); None: refine to the grid (a
    # GPU's allocator figures do not jitter as a CPU's data segment does)
    resolve_sd: float | None = None
    aim_prior: float = 0.4  # the first jump from one size and the prior (replays: 4.04 trials
    #                         on the recorded curve at 0.3-0.4, 4.20 at 0.5)
    # The pool model, nothing failed yet: a little past the median edge. A failure bounds the
    # pool's need from below, which fits inside one level rarely do (made-up pools,
    # benchmarks/replay_gpu.py --synthetic: 4.38 search trials on average over 7 priors, at
    # most 8, at 0.4; 4.39 and 8 at 0.5; 4.91 and 11 at 0.8; bisection 5.72 and 7)
    aim_pool_open: float = 0.4


@dataclass(frozen=True)
class Proposal:
    phase: str  # bootstrap | predict | edge | double | bisect | done
    sizes: tuple[int, ...]  # empty when done
    reason: str
    fits: int | None = None  # largest size that fitted (measured)
    fails: int | None = None  # smallest size that failed (measured)
    predicted: dict[int, tuple[float, float]] = field(default_factory=dict)  # size -> (mean, upper)
    model: mm.Model | pool.PoolModel | None = None
    missed: tuple[mm.Miss, ...] = ()

    @property
    def done(self) -> bool:
        return not self.sizes


def past_label(trials: Sequence[Trial], n: int | None) -> str:
    """Why size n is past the boundary, in a few words: 'fails' where a run of it failed (or
    none says otherwise), else its trials' ``past_why`` ('short of room', ...)."""
    runs = [t for t in trials if t.num_envs == n]
    if not runs or any(t.status != OK for t in runs):
        return "fails"
    return next((t.past_why for t in runs if t.past_why), "fails")


def past_clause(n: int, label: str) -> str:
    """'1024 fails', '1024 is short of room'."""
    return f"{n} {label}" if label == "fails" else f"{n} is {label}"


def _past_clause(trials: Sequence[Trial], n: int) -> str:
    return past_clause(n, past_label(trials, n))


def past_boundary(trial: Trial, limit_bytes: float) -> bool:
    """``boundary.past_boundary`` on the search's view of a trial: out of memory, timed
    out, crashed, over the line by the recommender's rule (``over_limit``), or a model
    figure above the line the model is held to."""
    if trial.status in BOUNDARY_FAILURES or trial.over_limit:
        return True
    return trial.status == OK and trial.peak_bytes is not None and trial.peak_bytes > limit_bytes


def round_grid(is_valid: Callable[[int], bool], lo: int, hi: int,
               significant_bits: int = 4) -> list[int]:
    """Valid sizes in [lo, hi] with at most ``significant_bits`` significant binary digits
    (4: ..., 896, 960, 1024, 1152, 1280, 1408, 1536, ...: steps of 1/16 to 1/8), plus lo and
    hi themselves when valid (the start and the maximum are always candidates)."""
    out = set()
    for n in (lo, hi):
        if lo <= n <= hi and is_valid(n):
            out.add(n)
    e = 0
    while (1 << e) <= hi:
        step = 1 << max(0, e - significant_bits + 1)
        for n in range(1 << e, min(hi, (2 << e) - 1) + 1, step):
            if n >= lo and is_valid(n):
                out.add(n)
        e += 1
    return sorted(out)


def doubling_ladder(grid: Sequence[int], start: int, factor: int = 2) -> list[int]:
    """start, 2 x start, ... each snapped up to a candidate; the largest candidate closes it."""
    sizes: list[int] = []
    target = start
    while True:
        size = next((c for c in grid if c >= target), None)
        if size is None:
            break
        if not sizes or size > sizes[-1]:
            sizes.append(size)
        target = size * factor
    if sizes and sizes[-1] < grid[-1]:
        sizes.append(grid[-1])
    return sizes


def bootstrap_sizes(space: Space, k: int = 1) -> list[int]:
    """The sizes the refine budget does not count: the start, then max(k, 2) - 1 more on a
    ladder of factor ``space.spread`` (2: doubling; 4 spreads the two points the first
    extrapolation rests on three times as far apart)."""
    grid = sorted(set(space.candidates))
    start = _start(space, grid)
    if start is None:
        return []
    factor = space.spread if k <= space.spread_up_to else 2
    least = 1 if space.prior is not None else 2  # the prior stands in for the second size
    return doubling_ladder([c for c in grid if c >= start], start, factor)[:max(k, least)]


def _start(space: Space, grid: Sequence[int]) -> int | None:
    s = space.start if space.start is not None else (grid[0] if grid else None)
    return None if s is None else next((c for c in grid if c >= s), None)


def roundness(n: int) -> int:
    """Trailing zero bits: prefer 1536 over 1535 when both are equally close."""
    return (n & -n).bit_length()


def _points(trials: Iterable[Trial]) -> list[mm.Point]:
    """The least-squares model's points: every ok trial with a figure."""
    pts = []
    for t in trials:
        if t.status == OK and t.peak_bytes is not None:
            bs, nmb, unroll = t.shape if t.shape else (None, None, None)
            pts.append(mm.Point(t.num_envs, float(t.peak_bytes), bs, nmb, unroll))
    return pts


def level_limit(trials: Iterable[Trial], space: Space) -> float:
    """Where the model's demand must stay: the limit, or with allocator regions the highest
    pool level under it (levels lie a whole number of regions from a measured pool, the
    largest one under the limit). A demand between that level and the limit would need one
    more region, which does not fit."""
    region = space.region_bytes
    if not region:
        return space.limit_bytes
    pools = [float(t.peak_bytes) for t in trials if t.status == OK and t.peak_bytes is not None]
    return pool.top_level(pools, space.limit_bytes, region)


def _done(reason: str, lo, hi, model=None, missed=()) -> Proposal:
    return Proposal("done", (), reason, lo, hi, {}, model, tuple(missed))


def propose(trials: Sequence[Trial], space: Space, k: int = 1) -> Proposal:
    """The next size(s) to measure (up to k, all unmeasured candidates), or done and why.

    In phases, each a function below: the grid from the start (``_start_grid``), the first
    round (``_bootstrap``), where the trials put the edge (``_bracket``, ``_bracket_done``),
    the refine budget (``_trials_left``), a proof run's failure (``_proof_bisection``), the
    model and how far it is trusted (``_fit``); then the first of: a stop within one run's
    jitter (``_jitter_stop``), the model's pick (``_model_proposal``), doubling or bisection
    (``_fallback``)."""
    k = max(1, int(k))
    grid = _start_grid(space)
    if isinstance(grid, Proposal):
        return grid
    stopper = next((t for t in trials if t.status in STOPPERS), None)
    if stopper is not None:
        return _done(f"stopped: {stopper.num_envs} envs ended in {stopper.status}; that is not "
                     f"a memory limit, fix the workload first", None, None)
    if not trials:
        return _bootstrap(space, grid, k)
    b = _bracket(trials, space, grid)
    ended = _bracket_done(trials, b)
    if ended is not None:
        return ended
    left = _trials_left(trials, space, b, k)
    if left <= 0:
        return _done(f"refine budget spent: boundary between {b.lo} (fits) and "
                     f"{b.hi if b.hi is not None else '?'} ({past_label(trials, b.hi)})",
                     b.lo, b.hi)
    k = min(k, left, len(b.open_))
    if b.hi is not None and _only_proof_failed(trials, b.hi, space.limit_bytes):
        return _proof_bisection(b, k)
    fit = _fit(trials, space, b)
    return (_jitter_stop(trials, space, b, fit)
            or _model_proposal(trials, space, b, fit, k)
            or _fallback(space, b, fit, k))


@dataclass(frozen=True)
class _Bracket:
    """Where the measured trials put the edge. ``hi``: the smallest size past the boundary
    (None: nothing failed); ``lo``: the largest measured size below it that is not; ``open_``:
    the candidates strictly between them not measured yet, ascending (never empty once
    ``_bracket_done`` let the search go on)."""
    grid: list[int]  # the candidates from the start up, ascending
    measured: set[int]
    failing: list[int]  # every size past the boundary, ascending
    fitting: list[int]  # the measured sizes below hi not past it, ascending
    lo: int | None
    hi: int | None
    open_: list[int]


@dataclass(frozen=True)
class _Fit:
    """The model the search aims with and how far it is trusted. ``aim``: the space it aims
    in (the limit lowered to the room the search keeps, or to the top pool level);
    ``missed``: where it missed (emptied once its line was raised to an out-of-memory size,
    ``shifted`` saying so); ``walk``: consecutive candidates up to lo that fitted;
    ``crawl``: fits in lo's octave while nothing failed; ``vague``: it cannot tell growth
    from jitter."""
    aim: Space
    model: mm.Model | pool.PoolModel | None
    missed: tuple[mm.Miss, ...]
    shifted: str
    walk: int
    crawl: int
    vague: bool

    @property
    def trusted(self) -> bool:
        """The least-squares model as it stands: no miss, no line raised after one, not
        walking up past it."""
        return (isinstance(self.model, mm.Model) and not self.missed and not self.vague
                and not self.shifted and self.walk < WALK)

    @property
    def aims(self) -> bool:
        """The model picks the next size (else doubling or bisection)."""
        return (self.model is not None and not self.missed and self.walk < WALK
                and self.crawl < CRAWL and not self.vague)


def _start_grid(space: Space) -> list[int] | Proposal:
    """The candidates from the start (snapped up to one) to the largest, ascending; or done
    when there is none."""
    grid_all = sorted(set(space.candidates))
    if not grid_all:
        return _done("no valid size to search", None, None)
    start = _start(space, grid_all)
    if start is None:
        return _done(f"start {space.start} is above the largest candidate {grid_all[-1]}", None, None)
    return [c for c in grid_all if c >= start]


def _bootstrap(space: Space, grid: list[int], k: int) -> Proposal:
    """Nothing measured: the bootstrap sizes, topped up to k at the widest log-gaps."""
    sizes = _spread_fill(bootstrap_sizes(space, k)[:k], grid, k)
    return Proposal("bootstrap", tuple(sizes), f"bootstrap: {_list(sizes)} envs")


def _bracket(trials: Sequence[Trial], space: Space, grid: list[int]) -> _Bracket:
    """The edge between the largest fit and the smallest failure (``past_boundary``); a size
    that fitted above a failure does not move lo past it."""
    measured = {t.num_envs for t in trials}
    failing = sorted({t.num_envs for t in trials if past_boundary(t, space.limit_bytes)})
    hi = failing[0] if failing else None
    fitting = sorted(n for n in measured - set(failing) if hi is None or n < hi)
    lo = fitting[-1] if fitting else None
    open_ = ([c for c in grid if c > lo and (hi is None or c < hi) and c not in measured]
             if lo is not None else [])
    return _Bracket(grid, measured, failing, fitting, lo, hi, open_)


def _bracket_done(trials: Sequence[Trial], b: _Bracket) -> Proposal | None:
    """Done when nothing fitted, or no candidate is left between lo and hi (the boundary is
    found, or nothing failed up to the largest candidate); None: the search goes on."""
    if b.lo is None:
        return _done(f"the workload does not fit even at {b.hi} envs: try a smaller start, a "
                     f"larger budget, smaller networks or a shorter unroll_length", None, b.hi)
    if b.open_:
        return None
    if b.hi is None:
        return _done(f"no failure up to the largest candidate {b.grid[-1]} envs: the memory "
                     f"limit lies above it", b.lo, None)
    return _done(f"boundary found: {b.lo} fits, {_past_clause(trials, b.hi)}, no candidate "
                 f"between", b.lo, b.hi)


def _trials_left(trials: Sequence[Trial], space: Space, b: _Bracket, k: int) -> int:
    """Trials the refine budget still allows. It counts search trials, once per size, below
    the lowest failed proof run (one that failed its confirmation opens a new interval under
    it, with the budget afresh), past the bootstrap sizes. Without the model the doubling
    ladder runs until the first failure whatever the budget, and the budget counts the
    trials that bisect its bracket: those off the ladder above its largest size that fits
    (``--refine`` for bisection: trials after the first failure)."""
    if space.refine is None or (not space.use_model and b.hi is None):
        return len(b.open_)
    assert b.lo is not None
    free = set(bootstrap_sizes(space, k))
    floor = 0
    if not space.use_model:
        ladder = doubling_ladder(b.grid, b.grid[0])
        free.update(ladder)
        floor = max((n for n in ladder if n <= b.lo), default=0)
    proof_fail = min((t.num_envs for t in trials if t.proof), default=None)
    spent = len({t.num_envs for t in trials if not t.proof and t.num_envs not in free
                 and floor < t.num_envs and (proof_fail is None or t.num_envs < proof_fail)})
    return space.refine - spent


def _proof_bisection(b: _Bracket, k: int) -> Proposal:
    """hi fitted its search trial and failed only a longer run: the model, fitted to search
    trials, cannot say where that run's edge lies below it, so bisect between lo and it."""
    assert b.lo is not None and b.hi is not None
    sizes = _kary_pick(b.open_, b.lo, b.hi, k)
    return Proposal("bisect", tuple(sizes), f"refining between {b.lo} and {b.hi}: "
                    f"{_list(sizes)} envs ({b.hi} envs fitted its search trial and failed a "
                    f"longer run)", b.lo, b.hi)


def _aim_space(trials: Sequence[Trial], space: Space) -> Space:
    """The space the model aims in: with allocator regions, the demand under the top pool
    level; where peaks jitter, the line the search keeps below the limit
    (``aim_room_bytes``), so that the largest fit is a size whose proof passes, not one the
    search finds and the proof then undoes (``short_of_room``)."""
    if space.region_bytes:
        return replace(space, limit_bytes=level_limit(trials, space), cap_bytes=None)
    room = aim_room_bytes(trials, space)
    if room > 0:
        return replace(space, limit_bytes=space.limit_bytes - room,
                       cap_bytes=space.cap_bytes or space.limit_bytes)
    return space


def _fit_points(trials: Sequence[Trial], space: Space, lo: int) -> list[mm.Point]:
    """The least-squares model's points: with ``fit_octaves``, only sizes that close to lo
    (memory is only close to affine: quick is convex), the two largest at least."""
    pts = _points(trials)
    if space.fit_octaves is None:
        return pts
    floor = lo / 2 ** space.fit_octaves
    near = [p for p in pts if p.num_envs >= floor]
    if len({p.num_envs for p in near}) >= 2:
        return near
    top = sorted({p.num_envs for p in pts})[-2:]
    return [p for p in pts if p.num_envs in top]


def _fit(trials: Sequence[Trial], space: Space, b: _Bracket) -> _Fit:
    """The model checked against the trials (``_checked_model``, ``_checked_pool_model``;
    none without ``use_model``), and the counts that say whether to trust it.

    An out-of-memory trial has no peak to fit, yet it says the peak there is over the limit:
    where the least-squares model's only misses are such failures below its mean, its line
    is raised until that size sits at the limit (the slope kept) and it aims again. A
    timeout is no such evidence. Not for the pool model: an OOM is one of its readings and
    has moved its line already."""
    assert b.lo is not None
    aim = _aim_space(trials, space)
    model: mm.Model | pool.PoolModel | None
    if space.region_bytes:  # a pool's readings are brackets: all of them kept
        model, missed = _checked_pool_model(trials, space, aim, b.failing)
    else:
        model, missed = _checked_model(_fit_points(trials, space, b.lo), trials, aim, b.failing)
    walk = _walk(b.grid, b.measured, set(b.failing), b.lo)
    # fits measured in the top octave with nothing failed yet: the model keeps aiming short
    crawl = (len(set(b.fitting) & {n for n in b.measured if n >= b.lo / 2})
             if b.hi is None else 0)
    vague = model is not None and model.growth()[1] <= 0
    shifted = ""
    if (isinstance(model, mm.Model) and missed
            and all(m.what == "fail-below-mean" for m in missed)
            and _over_memory(trials, missed[0].num_envs, space.limit_bytes)):
        n = missed[0].num_envs
        model = _shifted(model, aim, n)
        shifted = f"; the line raised so that {n} envs, which ran out of memory, sits at the limit"
        missed = []
    return _Fit(aim, model, tuple(missed), shifted, walk, crawl, vague)


def _jitter_stop(trials: Sequence[Trial], space: Space, b: _Bracket, fit: _Fit
                 ) -> Proposal | None:
    """Done when lo and hi are closer than one refinement step: a size between them would be
    decided by noise. Only where the space says peaks jitter (a CPU's data segment; not a
    GPU's allocator figures, nor a pool of regions, whose rounding is the model's, not a
    run's). The step is the aiming model's where it is trusted as it stands; otherwise
    bisection takes over, and a bracket narrower than one run resolves is as much noise to
    it, so the step comes from the model that sizes a proof's room (``_jitter_model``; on
    quick at 1.1 GB, 128-512 envs peak within one run's jitter of each other and one low
    draw reads as a miss)."""
    if b.hi is None or not space.resolve_sd or space.region_bytes:
        return None
    assert b.lo is not None
    judge = fit.model if fit.trusted else _jitter_model(trials, space)
    step = _jitter_stop_step(judge, space, b.lo, fallback=not fit.trusted)
    if step is None or b.hi - b.lo > step[1]:
        return None
    return _done(f"boundary found to within one run's jitter: {b.lo} fits, "
                 f"{_past_clause(trials, b.hi)}; "
                 f"a size between them would be decided by noise (refinement step "
                 f"{step[0] / MIB:.0f} MiB = {space.resolve_sd:g} x the model's sd of one "
                 f"run's peak, {step[1]:.0f} envs at {step[2] / MIB:.3f} MiB/env)",
                 b.lo, b.hi, judge)


def _model_proposal(trials: Sequence[Trial], space: Space, b: _Bracket, fit: _Fit, k: int
                    ) -> Proposal | None:
    """The model's pick (``_model_pick``), one worker's moved up to the largest size within
    one refinement step of lo where it lies closer than that (``_resolvable_pick``), with
    the model's figures for each size; None where the model does not aim or picks nothing."""
    model = fit.model
    if model is None or not fit.aims:
        return None
    assert b.lo is not None
    lo, hi = b.lo, b.hi
    sizes, phase = _model_pick(model, fit.aim, b.open_, b.grid, lo, hi, k)
    if not sizes:
        return None
    up = (_resolvable_pick(model, space, b.open_, lo, sizes[0])
          if k == 1 and fit.trusted and not space.region_bytes else None)
    if up is not None:
        above = _past_clause(trials, hi) if hi is not None else "nothing failed yet"
        words = (f"one refinement step up: {up} envs, the largest size within a step of "
                 f"{lo} ({lo} fits, {above}); the model's edge, {sizes[0]} envs, lies "
                 f"closer to {lo} than one run can tell")
        sizes, phase = [up], "edge"
    else:
        dropped = ("; without the slope prior, which the trials contradict"
                   if space.prior is not None and model.prior is None else "")
        words = (f"predicted edge: {_list(sizes)} envs (between {lo} fits and "
                 f"{hi if hi is not None else 'no failure yet'}{fit.shifted}{dropped})")
    predicted = {}
    for n in sizes:
        pred = model.interval(n, _shape(space, n))
        predicted[n] = (pred.mean_bytes, pred.upper_bytes)
    return Proposal(phase, tuple(sizes), words, lo, hi, predicted, model, ())


def _fallback(space: Space, b: _Bracket, fit: _Fit, k: int) -> Proposal:
    """Without the model's pick: while nothing failed, the bootstrap sizes left, a gallop up
    the grid where sizes kept fitting one candidate above the other (1, 2, 4, ...
    candidates, not num_envs x 2, which overshoots the edge the model has nearly found), or
    doubling; after a failure, k-ary bisection between lo and hi. The reason says why the
    model did not aim."""
    assert b.lo is not None
    lo, hi, walk, crawl, missed = b.lo, b.hi, fit.walk, fit.crawl, fit.missed
    why = ""  # without the model (use_model False) there is none to speak of
    if missed:
        why = f" (model missed: {missed[0]})"
    elif fit.vague or fit.model is not None and walk < WALK:
        why = " (the model cannot place the edge from the sizes measured yet)"
    elif space.use_model and (walk >= WALK or crawl >= CRAWL):
        why = (f" ({max(walk, crawl)} sizes fitted near the top with nothing failed: not "
               f"trusting the model)")
    if hi is None:
        boot = [n for n in bootstrap_sizes(space, k) if n in b.open_]
        how = "doubling"
        if boot:
            sizes = boot[:k]
        elif walk >= WALK and crawl < CRAWL and not missed and fit.model is not None:
            sizes, how = _gallop_pick(b.open_, walk, k), "galloping up the grid"
        else:
            sizes = _doubling_pick(b.grid, b.open_, lo, k)
        return Proposal("double", tuple(sizes), f"{how}: {_list(sizes)} envs{why}", lo, hi,
                        {}, fit.model, missed)
    sizes = _kary_pick(b.open_, lo, hi, k)
    return Proposal("bisect", tuple(sizes), f"refining between {lo} and {hi}: {_list(sizes)} "
                    f"envs{why}", lo, hi, {}, fit.model, missed)


def _resolvable_pick(model: mm.Model | pool.PoolModel, space: Space, open_: list[int],
                     lo: int, pick: int) -> int | None:
    """One worker, a trusted model, peaks that jitter: where the model's pick lies less than
    one refinement step above the largest fit lo, every size up to lo + step is a trial
    that one run cannot tell from lo, so the largest of them gains the most. If it runs out
    of memory, the bracket is no wider than the step the stop rule holds it to
    (``_jitter_stop_step``, the same step) and the search ends; short of room, it ends
    unless the refit narrows the step; if it fits, lo moves as far as one trial can move it
    (notch by notch, 896, 960, 1024 at 1.3 GB would cost a trial each; fewer search trials
    on ``benchmarks/replay_sweep.py``'s replay). Returns the size to take instead of the
    model's pick, or None to keep it."""
    step = _jitter_stop_step(model, space, lo)
    if step is None or pick - lo >= step[1]:
        return None
    within = [n for n in open_ if n <= lo + step[1]]
    return within[-1] if within and within[-1] > pick else None


def _jitter_stop_step(model: mm.Model | pool.PoolModel | None, space: Space, lo: int,
                      fallback: bool = False) -> tuple[float, float, float] | None:
    """The refinement step a bracket above lo is held to (``refinement_step``). For the
    fallback's model (``fallback``), only where it tells growth from jitter (a slope whose
    lower bound is above 0), and in envs along the slope prior where that is steeper: a
    near-flat fit through jittery peaks (0.03-0.1 MiB/env where the probe counts 0.237)
    makes a step of 500-900 envs, and the search would stop short of a size with room."""
    if not isinstance(model, mm.Model) or not space.resolve_sd:
        return None
    if fallback and not model.growth()[1] > 0:
        return None
    step = refinement_step(model, space.resolve_sd, model.interval(lo, _shape(space, lo)))
    if step is None or not fallback or space.prior is None:
        return step
    slope = max(step[2], space.prior.bytes_per_env)
    return step[0], step[0] / slope, slope


def refinement_step(model: mm.Model, resolve_sd: float = RESOLVE_SD,
                    at: mm.Prediction | None = None) -> tuple[float, float, float] | None:
    """(bytes, envs, bytes per env): the finest step one run resolves, ``resolve_sd`` x the
    model's sd of one new run's peak (``run_sd``), in num_envs along its growth. None when
    the growth is not positive."""
    slope = model.growth()[0]
    if not slope > 0:
        return None
    step = resolve_sd * run_sd(model, at)
    return step, step / slope, slope


def run_sd(model: mm.Model, at: mm.Prediction | None = None) -> float:
    """The model's sd of one new run's peak: its pooled jitter (the 1.5 % prior with this
    sweep's residuals), relative to the peak ``at`` a size (default the mean measured)."""
    peak = at.mean_bytes if at is not None else model.mean_peak_bytes
    return max(model.sigma_bytes, model.sigma_fraction * abs(peak))


def proof_room_bytes(trials: Sequence[Trial], space: Space, n: int) -> float | None:
    """How far below the limit a proof run of size n is held (its cap): one refinement step,
    ``resolve_sd`` x the sd of one run's peak there, from the search trials' model (the
    prior jitter of the size's own peak without one). None where peaks do not jitter run to
    run (a GPU's allocator figures) or nothing says how much: the proof runs at the limit.

    One run is a draw: a second run of the same size (the user's) may need more. A proof
    must leave room for that second draw, or a size that fits one run in two is proven; how
    much was measured against users' runs (``RESOLVE_SD``)."""
    return proof_rooms_bytes(trials, space, (n,))[n]


def proof_rooms_bytes(trials: Sequence[Trial], space: Space,
                      sizes: Iterable[int]) -> dict[int, float | None]:
    """``proof_room_bytes`` of each size, from one fit of the jitter model."""
    sizes = tuple(sizes)
    if not space.resolve_sd or space.region_bytes:
        return dict.fromkeys(sizes)
    model = _jitter_model(trials, space)
    return {n: _room(trials, space, model, n) for n in sizes}


def _room(trials: Sequence[Trial], space: Space, model: mm.Model | None, n: int) -> float | None:
    assert space.resolve_sd
    if model is not None:
        return space.resolve_sd * run_sd(model, model.interval(n, _shape(space, n)))
    peaks = [t.peak_bytes for t in trials if t.num_envs == n and not t.proof
             and t.peak_bytes is not None]
    return space.resolve_sd * mm.FLOOR_SD * max(peaks) if peaks else None


def short_of_room(trials: Sequence[Trial], space: Space) -> dict[int, float]:
    """Sizes whose search trial fitted under the limit with less room than a proof of it
    keeps (``proof_room_bytes``), with that line: the limit less the room.

    Such a size peaked above the cap its proof would run under; the proof (and the user's
    run) is a second draw there that passes about half the time. So it is not a fit: the
    search aims below it and brackets the edge against it, and the recommender ranks it no
    more than a size that failed, which spares the proof that would fail. Records only: the
    room comes from the search trials' own peaks, without the compile-time slope prior, so
    that a report of the same records (which has no probe) draws the same line. Empty where
    peaks do not jitter (a GPU's allocator figures) or without a resolution.

    The smallest size that fitted is never short: its proof decides, so that a sweep whose
    start sits near the line proves a size rather than ending with none (at 1.1 GB, 128, 224
    and 288 envs peaked at 1,015, 967 and 1,057 MB: with a room of 90 MB, 128 read short).
    A size is judged by its own peak, not the model's mean there: the mean moves as sizes are
    added, and a judgment that flips costs the search trials (a replay took 7 where
    bisection takes 6)."""
    if not space.resolve_sd or space.region_bytes or not math.isfinite(space.limit_bytes):
        return {}
    plain = replace(space, prior=None)
    searched = [t for t in trials if not t.proof and t.status == OK and t.peak_bytes is not None
                and t.peak_bytes <= space.limit_bytes]
    if not searched:
        return {}
    model = _jitter_model(trials, plain)
    top: dict[int, float] = {}  # one pass: a resumed file may hold thousands of sizes
    for t in searched:
        top[t.num_envs] = max(top.get(t.num_envs, 0.0), float(t.peak_bytes or 0.0))
    out: dict[int, float] = {}
    for n in sorted(top)[1:]:
        if top[n] <= space.limit_bytes / 2:
            continue  # no room is wider than that (below)
        room = _room(trials, plain, model, n)
        if room is None or not room > 0:
            continue
        line = space.limit_bytes - min(room, space.limit_bytes / 2)  # a wild model: half
        if top[n] > line:
            out[n] = line
    return out


def aim_room_bytes(trials: Sequence[Trial], space: Space) -> float:
    """How far below the limit the search aims where peaks jitter: one refinement step at the
    limit, from the search trials' own peaks as ``short_of_room`` draws its line.
    0 where peaks do not jitter."""
    if not space.resolve_sd or space.region_bytes or not math.isfinite(space.limit_bytes):
        return 0.0
    model = _jitter_model(trials, replace(space, prior=None))
    sd = (max(model.sigma_bytes, model.sigma_fraction * space.limit_bytes) if model is not None
          else mm.FLOOR_SD * space.limit_bytes)
    return min(space.resolve_sd * sd, space.limit_bytes / 2)


def _jitter_model(trials: Sequence[Trial], space: Space) -> mm.Model | None:
    """The search trials' model that sizes a refinement step after the search: with the slope
    prior unless the trials contradict it (``model.misses``), so that a few jittery peaks over
    a narrow span do not read as a flat slope and a step of hundreds of envs."""
    searched = [t for t in trials if not t.proof]
    pts = _points(searched)
    if space.prior is not None:
        model = mm.fit(pts, prior=space.prior)
        ooms = [t.num_envs for t in searched if t.status == OOM]
        if model is not None and not mm.misses(pts, ooms, space.cap_bytes or space.limit_bytes,
                                               space.shape_of, prior=space.prior):
            return model
    return mm.fit(pts)


def _only_proof_failed(trials: Sequence[Trial], n: int, limit_bytes: float) -> bool:
    """Size n failed only in a proof run (a repeat or the confirmation), not in the search."""
    here = [t for t in trials if t.num_envs == n]
    return any(t.proof for t in here) and not any(not t.proof and past_boundary(t, limit_bytes)
                                                  for t in here)


def _checked_model(pts: list[mm.Point], trials: Sequence[Trial], space: Space,
                   failing: list[int]) -> tuple[mm.Model | None, list[mm.Miss]]:
    """The model to aim with and where it missed: with the slope prior first; where the trials
    contradict the prior, the trials alone (two sizes at least), so a wrong prior costs the
    trial that showed it, not the rest of the search."""
    if not space.use_model:
        return None, []
    priors = [space.prior, None] if space.prior is not None else [None]
    ooms = [t.num_envs for t in trials if t.status == OOM]
    first: tuple[mm.Model | None, list[mm.Miss]] | None = None
    for prior in priors:
        model = mm.fit(pts, prior=prior)
        if model is None:
            continue
        missed = mm.misses(pts, ooms, space.cap_bytes or space.limit_bytes, space.shape_of,
                           prior=prior)
        missed += _under_predicted(model, space, failing)
        if not missed:
            return model, []
        first = first or (model, missed)
    return first if first is not None else (None, [])


def _checked_pool_model(trials: Sequence[Trial], space: Space, aim: Space, failing: list[int]
                        ) -> tuple[pool.PoolModel | None, list[mm.Miss]]:
    """The pool model (a GPU's allocator regions) and where it missed, as ``_checked_model``:
    with the slope prior first, the trials alone where they contradict it. It reads the search
    trials' pools and their out-of-memory failures; a proof run's pool (a longer run) and a
    timeout (no memory evidence) are not readings."""
    if not space.use_model or not space.region_bytes:
        return None, []
    readings = [pool.Reading(t.num_envs, float(t.peak_bytes) if t.status == OK else None,
                             t.live_bytes)
                for t in trials if not t.proof and (
                    (t.status == OK and t.peak_bytes is not None) or t.status == OOM)]
    priors = [space.prior, None] if space.prior is not None else [None]
    first: tuple[pool.PoolModel | None, list[mm.Miss]] | None = None
    region, limit = space.region_bytes, space.limit_bytes
    for prior in priors:
        model = pool.fit(readings, region_bytes=region, limit_bytes=limit, prior=prior)
        if model is None:
            continue
        missed = pool.misses(readings, region_bytes=region, limit_bytes=limit, prior=prior)
        missed += _under_predicted(model, aim, failing)
        if not missed:
            return model, []
        first = first or (model, missed)
    return first if first is not None else (None, [])


def _under_predicted(model: mm.Model | pool.PoolModel, space: Space,
                     failing: list[int]) -> list[mm.Miss]:
    """The smallest failed size, if the current model still expects it to fit (P >= surprise).

    An OOM has no peak to fit, so a model that overshot stays as it was: trusting it again
    would walk down one candidate per trial. Until an ok trial near the edge corrects it
    (the bisection's next size usually is one), the search bisects. Order-independent: it
    asks the model fitted on everything measured now, not the one that proposed the size."""
    found = []
    for n in failing[:1]:  # the smallest failure: those above it follow from it
        pred = model.interval(n, _shape(space, n))
        if _prob_fits(model, space, n) >= space.surprise:
            found.append(mm.Miss(n, "fail-below-mean", None, pred.lower_bytes, pred.upper_bytes))
    return found


def _prob_fits(model: mm.Model | pool.PoolModel, space: Space, n: int) -> float:
    """P(n fits): the pool model's own, under the top level it fitted to (the search
    readings'; a proof run's pool off the levels' grid must not move it), and cheap (its
    interval sorts the whole posterior grid); else the peak under the space's limit."""
    if isinstance(model, pool.PoolModel):
        return model.prob_fits(n)
    return model.interval(n, _shape(space, n)).prob_at_most(space.limit_bytes)


def _shape(space: Space, n: int):
    return space.shape_of(n) if space.shape_of else None


def _walk(grid: Sequence[int], measured: set[int], failing: set[int], lo: int) -> int:
    """How many consecutive candidates ending at lo fitted (measured, not failing)."""
    i = grid.index(lo) if lo in grid else None
    if i is None:
        return 0
    run = 0
    while i >= 0 and grid[i] in measured and grid[i] not in failing:
        run += 1
        i -= 1
    return run


def _model_pick(model: mm.Model | pool.PoolModel, space: Space, open_: list[int],
                grid: list[int], lo: int, hi: int | None, k: int) -> tuple[list[int], str]:
    probs = _fit_probabilities(model, space, open_, lo, hi)
    if probs is None:
        return [], "vague"
    if k == 1:
        aim = space.aim_open if hi is None and len(model.sizes) <= 2 else space.aim
        if hi is None and len(model.sizes) == 1:
            aim = space.aim_prior
        if hi is None and isinstance(model, pool.PoolModel):
            aim = space.aim_pool_open
        fit_ok = [n for n in open_ if probs[n] >= aim]
        if fit_ok:
            return [fit_ok[-1]], "predict"
        return [open_[0]], "edge"
    # k workers: quantiles of the edge. P(edge < n) = P(n fails) = 1 - P(n fits).
    chosen: list[int] = []
    for j in range(1, k + 1):
        q = j / (k + 1)
        n = next((n for n in open_ if 1.0 - probs[n] >= q), None)
        if n is None:
            n = open_[-1]
        if n not in chosen:
            chosen.append(n)
    # Top up with the most uncertain candidates, then the neighbours of what is chosen.
    for n in sorted(open_, key=lambda n: (abs(probs[n] - 0.5), n)):
        if len(chosen) >= k:
            break
        if n not in chosen:
            chosen.append(n)
    phase = "predict" if any(probs[n] >= 0.5 for n in chosen) else "edge"
    return sorted(chosen[:k]), phase


def _fit_probabilities(model: mm.Model | pool.PoolModel, space: Space, open_: list[int],
                       lo: int, hi: int | None) -> dict[int, float] | None:
    """P(n fits | lo fitted, hi failed) for each open candidate.

    One random edge E (memory grows with num_envs): n fits iff E >= n. The model gives
    P(E >= n) = P(peak(n) <= limit); what was measured conditions it on lo <= E < hi:
    (P(n) - P(hi)) / (P(lo) - P(hi)). A failure thus pulls the next guess down even though an
    OOM has no peak to fit. If the model gives lo and hi the same probability (it thought lo
    would fail nearly as surely as hi, span < MIN_SPAN), it has nothing to aim with: None.
    """
    def p(n: int) -> float:
        return _prob_fits(model, space, n)

    p_lo = p(lo)
    p_hi = p(hi) if hi is not None else 0.0
    probs: dict[int, float] = {}
    run = 1.0
    for n in open_:  # P(fits) cannot rise with n: running minimum
        run = min(run, p(n))
        probs[n] = run
    span = p_lo - p_hi
    if span < MIN_SPAN:
        return None
    return {n: min(1.0, max(0.0, (v - p_hi) / span)) for n, v in probs.items()}


def _over_memory(trials: Sequence[Trial], n: int, limit_bytes: float) -> bool:
    """n's failure says its memory is over the limit: past the boundary (``past_boundary``)
    by anything but a timeout (under a CPU cap, bad_alloc aborts and SIGSEGVs are how some
    OOMs end, so a crash counts)."""
    return any(t.num_envs == n and t.status != TIMEOUT and past_boundary(t, limit_bytes)
               for t in trials)


def _shifted(model: mm.Model, space: Space, n: int) -> mm.Model:
    """The model with its constant raised so its mean at n (a size that failed) is the limit."""
    mean = model.interval(n, _shape(space, n)).mean_bytes
    coef = list(model.coef)
    coef[0] += max(0.0, space.limit_bytes - mean)
    return replace(model, coef=tuple(coef))


def _gallop_pick(open_: list[int], walk: int, k: int) -> list[int]:
    step = 2 ** (walk - WALK)  # 1, 2, 4, ... candidates above the top fit
    first = min(step, len(open_)) - 1
    return open_[first:first + k]


def _doubling_pick(grid: list[int], open_: list[int], lo: int, k: int) -> list[int]:
    ladder = [n for n in doubling_ladder(grid, lo) if n in open_]
    return _spread_fill(ladder[:k], open_, k)


def _spread_fill(chosen: list[int], among: Sequence[int], k: int) -> list[int]:
    """Top chosen up to k sizes from among (fewer ladder steps than workers): each time the
    size farthest, on a log scale, from every size chosen, the roundest among equals."""
    chosen = list(chosen)
    rest = [n for n in among if n not in chosen]
    while len(chosen) < k and rest:
        best = max(rest, key=lambda n: (min(abs(math.log(n / c)) for c in chosen) if chosen
                                        else 0.0, roundness(n), -n))
        chosen.append(best)
        rest.remove(best)
    return sorted(chosen)


def _kary_pick(open_: list[int], lo: int, hi: int, k: int) -> list[int]:
    """k sizes splitting (lo, hi) into k+1 parts; at each split point the roundest candidate in
    its window (the middle half for k = 1, as the bisect search takes), nearest the point among equals."""
    if len(open_) <= k:
        return list(open_)
    width = (hi - lo) / (k + 1)
    chosen: list[int] = []
    for j in range(1, k + 1):
        target = lo + j * width
        window = [n for n in open_ if abs(n - target) <= width / 2 and n not in chosen]
        pool = window or [n for n in open_ if n not in chosen]
        chosen.append(min(pool, key=lambda n: (-roundness(n), abs(n - target))))
    return sorted(chosen)


def step_down_pick(trials: Sequence[Trial], space: Space, open_: list[int], lo: int,
                   hi: int, over_cap: float | None = None) -> int | None:
    """After a proof run failed at ``hi`` (its search trial fitted): the largest open size at
    least one refinement step below it, or None when none lies above ``lo`` (no size between
    them that one run could tell from ``hi``: ``lo`` is the one to prove).

    A proof run peaks above its search trial by that trial's margin (to the proof's own cap,
    ``room_bytes`` below the limit) plus what the longer run adds. When the margin was
    within one refinement step (1.5 sd of one run's peak), the failure is what one run's
    jitter does, so the long run's edge lies about a step below ``hi``, not halfway down to
    ``lo`` (at 1.45 GB a bisection from 128 measured 1024, 1536 and 1664 below a failed
    1792, whose trial peaked 16 MiB under the cap). A wider margin says the long run grows
    past its trial (a leak, a late phase): bisection, as where peaks do not jitter
    (``resolve_sd`` None), the search trials give no model, or ``hi`` failed its own search
    trial (the edge is not a jitter below a proof). ``over_cap``: ``hi`` ran no proof, but its
    search trial peaked above this cap, which a proof run failed under, or above the line the
    search keeps (``short_of_room``; no proof of it is spent): a jitter failure as well."""
    step = _jitter_step(trials, space, hi, over_cap)
    if step is None:
        return bisect_pick(open_, lo, hi) if open_ else None
    below = [n for n in open_ if lo < n <= hi - step[1]]
    return max(below) if below else None


def proof_failed_by_jitter(trials: Sequence[Trial], space: Space, n: int) -> bool:
    """Size n fitted its search trial and failed only its proof run, and that trial peaked
    within one refinement step of the proof's cap: the failure is what one run's jitter
    does. False where the long run grew past its trial (a leak, a late phase), peaks do
    not jitter, or nothing says how much they do."""
    return _jitter_step(trials, space, n) is not None


def _jitter_step(trials: Sequence[Trial], space: Space, n: int,
                 over_cap: float | None = None) -> tuple[float, float, float] | None:
    """The refinement step at n when n failed its proof by jitter (``proof_failed_by_jitter``),
    or peaked above ``over_cap`` (a failed proof's cap, or the search's line), else None."""
    if over_cap is None and not _only_proof_failed(trials, n, space.limit_bytes):
        return None
    model = None
    if space.resolve_sd and not space.region_bytes:
        model = _jitter_model(trials, space)
    step = (refinement_step(model, space.resolve_sd, model.interval(n, _shape(space, n)))
            if model is not None else None)
    peaks = [t.peak_bytes for t in trials if t.num_envs == n and not t.proof
             and t.status == OK and t.peak_bytes is not None]
    room = max((t.room_bytes for t in trials if t.num_envs == n and t.proof), default=0.0)
    if over_cap is not None:
        room = space.limit_bytes - over_cap
    if step is None or not peaks or space.limit_bytes - room - max(peaks) > step[0]:
        return None
    return step


def bisect_pick(open_: list[int], lo: int, hi: int) -> int:
    """The one size bisection takes between lo and hi: the roundest open candidate in the
    middle half, nearest the midpoint among equals."""
    return _kary_pick(open_, lo, hi, 1)[0]


def _list(sizes: Sequence[int]) -> str:
    return ", ".join(str(n) for n in sizes)
