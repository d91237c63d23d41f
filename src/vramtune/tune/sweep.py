"""Drive the planner with an executor, appending every finished trial to the run's file.

The orchestration is pure Python around the Executor interface, so a distributed executor
can replace local subprocesses without touching the search.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtune import machine
from vramtune.compat import stack_verdict
from vramtune.errors import UserError
from vramtune.inputs import MAX_TRAINING_STEPS
from vramtune.measure.executor import Executor, LocalExecutor
from vramtune.measure.nvml import Nvml
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest
from vramtune.measure.wire import (
    CONFIRM_MIN_EVALS,
    Event,
    SweepNote,
    TrialStarted,
    confirm_epoch_steps,
)
from vramtune.records import Objective, Purpose, Status, TrialResult
from vramtune.results.store import (
    RESULTS_FILE,
    Run,
    RunHeader,
    RunLock,
    append_result,
    create_run,
    find_runs,
    load_run,
    lock_run,
    measurement_key,
    run_directory,
    trial_key,
)
from vramtune.tune import search
from vramtune.tune.planner import (
    SearchMethod,
    SearchSpace,
    Step,
    StepKind,
    as_trial,
    candidates,
    doubling_sizes,
    past_labels,
    plan_round,
    search_space,
    uses_pool,
)
from vramtune.tune.prior import PriorSource
from vramtune.tune.recommend import (
    KNEE_TOLERANCE,
    PROOF_RUNS,
    RANKED,
    boundary_edge,
    choose,
    fits,
    past_boundary,
    ruled_out,
    size_rates,
)
from vramtune.tune.request import (
    CACHE_MODES,
    DEFAULT_REFINE,
    DEFAULT_SPEED_MARGIN_FRACTION,
    SweepConfig,
    SweepPlan,
    SweepRequest,
    as_profile,
    reconcile,
    resolve,
)
from vramtune.tune.speed import (
    DIP_EDGE_RATIO,
    Verdict,
    can_resolve,
    compare_rates,
    dip_words,
)
from vramtune.units import format_bytes
from vramtune.workload.pickled import save_factory
from vramtune.workload.profile import safe_name

__all__ = ["CACHE_MODES", "SweepConfig", "SweepRequest"]  # read from here by callers and tests

if TYPE_CHECKING:
    from vramtune.measure.ray_executor import NodeReport


@dataclass
class SweepState:
    """What the sweep has so far: kept by the caller so an interrupt loses nothing."""

    results: list[TrialResult] = field(default_factory=list)
    reused: int = 0
    final_step: Step | None = None
    prior_note: str | None = None  # where the memory model's slope prior came from, if any
    trial_wall_s: float = 0.0
    sweep_wall_s: float = 0.0


def make_header(config: SweepConfig, nvml: Nvml | None, cap: str | None,
                search: dict[str, Any], node: NodeReport | None = None) -> RunHeader:
    """The run's header: this machine's, or with ``node`` the cluster node's the trials
    run on (its CPU, card and versions are what the figures were measured with)."""
    info = node.gpu if node is not None else nvml.info if nvml else None
    return RunHeader(profile_name=config.profile.name, profile_hash=config.profile.hash,
                     profile=config.profile.to_dict(), budget_bytes=config.budget_bytes,
                     headroom_fraction=config.headroom_fraction,
                     machine=node.machine if node is not None else machine.machine_summary(),
                     versions=node.versions if node is not None else machine.versions(),
                     gpu_name=info.name if info else None,
                     gpu_driver=info.driver if info else None,
                     gpu_total_bytes=info.total_bytes if info else None, cap=cap, search=search,
                     stack=stack_verdict().line if node is None else None)


def reusable(previous: Run | None, header: RunHeader, config: SweepConfig) -> list[TrialResult]:
    """Trials of an earlier run measuring exactly what this sweep would (same key)."""
    if previous is None:
        return []
    wanted = measurement_key(config.profile.hash, config.budget_bytes, header.versions,
                             header.device)
    return [r for r in previous.results if trial_key(previous.header, r)[1:] == wanted
            and (r.device_count or 1) == config.device_count]


@dataclass
class PreparedSweep:
    """Everything decided before the first trial: the cap once, the header, the run dir."""

    config: SweepConfig
    objective: Objective
    header: RunHeader
    run_dir: Path
    state: SweepState
    executor: Executor
    nvml: Nvml
    warnings: list[str] = field(default_factory=list)
    lock: RunLock | None = None  # held on run_dir while this sweep may write it
    label: str | None = None  # the accelerator type of one sweep among several
    notice: str | None = None  # why GPU figures are missing where the trials run (NVML's)

    def release(self) -> None:
        """Let another process write the run directory (a process exit does it too)."""
        if self.lock is not None:
            self.lock.release()

    def planned(self) -> int:
        """An estimate of the trials for the progress line: the doubling ladder plus
        refinement (bisect's upper bound; the predictive search usually needs fewer)."""
        refine = self.config.space().refine
        return (len(doubling_sizes(self.config.space()))
                + (refine if refine is not None else DEFAULT_REFINE)
                + (1 if self.config.budget_bytes or self.config.confirm else 0))


def prepare(request: SweepRequest, *, nvml: Nvml | None = None) -> PreparedSweep:
    """Reconcile the request with a resumed run, build the executor (the cap planned once),
    create or lock the run directory."""
    previous: Run | None = None
    directory: Path | None = None
    if request.resume is not None:
        directory = run_directory(request.resume)
        # A damaged run, or options that contradict it, are refused before a lock file is
        # made in it (a refused resume leaves the directory as it found it).
        previous = load_run(directory)
        request = reconcile(request, previous.header)
    plan = resolve(request)
    space = plan.config.space()
    if space.start > space.max_envs:  # refused before a run folder exists: nothing to run
        raise UserError(f"start {space.start} is above the maximum {space.max_envs}")
    if not doubling_sizes(space):
        raise UserError(f"no num_envs between {space.start} and {space.max_envs} satisfies "
                        f"Brax's batch rules for this profile"
                        + (f" on {plan.config.device_count} devices (num_envs must divide by "
                           f"the device count)" if plan.config.device_count > 1 else ""))
    if previous is None and request.out is not None:
        check_new_run(request.out)  # before a cluster is started or joined for nothing
    lock: RunLock | None = None
    executor: Executor | None = None
    try:
        if directory is not None:  # every option checked: lock, then read again under it
            lock = lock_run(directory)  # (two resumes at once would run the same size twice)
            previous = load_run(directory)
        nvml = nvml if nvml is not None else Nvml()
        executor = build_executor(plan, nvml)
        prepared = _prepared(request.out, plan, previous, lock, nvml, executor)
    except BaseException:
        # Released now, not when the frame goes: a notebook keeps its last error's frames.
        if executor is not None:
            executor.close()
        if lock is not None:
            lock.release()
        raise
    prepared.warnings.extend(executor.warnings)
    prepared.notice = executor.notice
    prepared.label = plan.gpu_type
    return prepared


def build_executor(plan: SweepPlan, nvml: Nvml) -> Executor:
    """The one place a sweep's executor is made. Trials run under budget x (1 - headroom):
    an ok trial has then proven the headroom whatever its peak's jitter, and on CPU the cap
    counts the data segment, which runs above RSS, so a peak compared with a line after the
    fact proved nothing."""
    config = plan.config
    if plan.executor == "ray":
        from vramtune.measure.ray_executor import RayExecutor  # only when asked for

        ray = RayExecutor(config.limit_bytes, address=plan.ray_address, gpu_type=plan.gpu_type,
                          devices=config.device_count)
        plan.search.update(ray_address=plan.ray_address, gpu_type=plan.gpu_type,
                           parallel=ray.parallel)
        return ray
    local = LocalExecutor.planned(config.limit_bytes, nvml, devices=config.device_count,
                                  standby=plan.standby, parallel=plan.parallel)
    if plan.parallel != local.parallel:  # the header records what ran ('auto' planned 9)
        plan.search.update(parallel=local.parallel, parallel_asked=plan.parallel)
    return local


_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def prepare_by_type(request: SweepRequest) -> tuple[Path, list[PreparedSweep]]:
    """One Ray sweep per accelerator type, each in its own run directory under one parent
    (<parent>/<type>); on resume the parent's runs, each with its own type. Every type is
    checked against the cluster before any directory is made."""
    o = request
    o.check_mixed()
    gpu_types = o.gpu_types
    if o.resume is not None:
        parent = o.resume
        found = {load_run(d).header.search.get("gpu_type"): d for d in find_runs(parent)}
        types = list(gpu_types) if gpu_types else [t for t in found if t]
        lost = [t for t in types if t not in found]
        if lost or not types:
            raise UserError(f"{parent} holds no run for accelerator type(s) "
                            f"{', '.join(lost) or 'named by --gpu-types'}: it holds "
                            f"{', '.join(str(t) for t in found) or 'none'}")
        dirs = {t: found[t] for t in types}
    else:
        types = list(dict.fromkeys(gpu_types or []))
        if not types:
            raise UserError("--gpu-types needs at least one accelerator type, e.g. A100,H100")
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        parent = o.out or Path("vramtune-runs") / f"{stamp}-{safe_name(as_profile(o.profile).name)}"
        dirs = {t: parent / t for t in types}
    bad = [t for t in types if not _TYPE_NAME.fullmatch(str(t))]
    if bad:
        raise UserError(f"accelerator type {bad[0]!r} is not a name Ray uses (A100, H100, ...)")
    if o.resume is None:
        for directory in dirs.values():
            check_new_run(directory)
    from vramtune.measure.ray_executor import check_types, cluster

    prepared: list[PreparedSweep] = []
    with cluster(o.ray_address) as ray:
        check_types(ray, types)
        try:
            for gpu_type, directory in dirs.items():
                one = replace(o, executor="ray", gpu_type=gpu_type, gpu_types=None,
                              out=None if o.resume is not None else directory,
                              resume=directory if o.resume is not None else None)
                prepared.append(prepare(one))
        except BaseException:
            for p in prepared:
                p.executor.close()
                p.release()
            raise
    return parent, prepared


def check_new_run(directory: Path) -> None:
    path = directory / RESULTS_FILE
    try:
        held = path.is_file() and path.stat().st_size > 0
    except (OSError, ValueError):
        held = False  # create_run says why it cannot write there
    if held:
        raise UserError(f"{path} already holds results: use --resume {directory} to continue it")


def _prepared(out: Path | None, plan: SweepPlan, previous: Run | None, lock: RunLock | None,
              nvml: Nvml, executor: Executor) -> PreparedSweep:
    """The header, the run directory (created, or the resumed one) and what it reuses."""
    config = plan.config
    header = make_header(config, nvml, executor.cap.description, plan.search,
                         getattr(executor, "node", None))
    state = SweepState()
    warnings: list[str] = []
    if previous is not None:
        run_dir = previous.directory
        warnings.extend(previous.warnings)
        state.results = reusable(previous, header, config)
        state.reused = len(state.results)
        skipped = len(previous.results) - state.reused
        if skipped:
            warnings.append(f"{skipped} trial(s) in {run_dir} were measured with other "
                            f"versions, profile or device and are not reused")
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = out or Path("vramtune-runs") / f"{stamp}-{safe_name(config.profile.name)}"
        run_dir = Path(os.path.normpath(run_dir))  # as create_run makes it: 'next:' must work
        lock = create_run(run_dir, header)
        try:
            save_factory(run_dir, config.profile)  # a notebook's env factory, for --resume
        except BaseException:
            lock.release()
            raise
    executor.attach(run_dir)
    return PreparedSweep(config, config.objective, header, run_dir, state, executor, nvml,
                         warnings, lock)


CONFIRM_FACTOR = 10  # a confirming run trains 10x the steps its trial's memory took to settle...
MIN_CONFIRM_STEPS = 50  # ...and at least 50 (25 epochs of 2): a ceiling; it may end earlier
UNKNOWN_FLOOR_STEPS = 10  # the floor of a proof whose trial's record lacks its length


def confirm_steps(config: SweepConfig, chosen: TrialResult) -> int:
    """Training steps of the confirming run: ``--confirm-steps``, else ten times the steps
    after which the trial's memory was steady (its whole length for records without that
    figure), at least MIN_CONFIRM_STEPS. Sized by memory, not by the throughput window: a
    small workload on a CPU trains 500+ steps in its 8 s window while its memory settled by
    step 5-10, and 10x the window made its confirmation 2-3 trials long."""
    if config.confirm_steps is not None:
        return config.confirm_steps
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
    if config.confirm_steps is not None:
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


def _proof_basis(results: Sequence[TrialResult], num_envs: int) -> TrialResult:
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
    (default the config's, without it)."""
    limit = config.limit_bytes
    if limit is None:
        return None
    room = search.proof_room_bytes([as_trial(r, limit, uses_pool(results)) for r in results],
                                   search_space(results, space or config.space()), n)
    if room is None or not room > 0:
        return limit
    return max(1, limit - min(int(room), limit // 2))  # bounded: a wild model leaves half


def _room_words(config: SweepConfig, cap: int | None) -> str:
    """', capped at X: Y below the Z line, ...' for a proof held below the line; '' at it."""
    limit = config.limit_bytes
    if cap is None or limit is None or cap >= limit:
        return ""
    return (f", capped at {format_bytes(cap)}: {format_bytes(limit - cap)} below the "
            f"{format_bytes(limit)} line, room for another run's jitter")


def edge_step(config: SweepConfig, results: Sequence[TrialResult],
              space: SearchSpace | None = None) -> Step | None:
    """After the search: prove the chosen size, or None when it is proven.

    A size counts as fitting only if it fits again. With confirmation on, the second run is
    the long confirming one (``confirm_steps`` training steps, evaluation as the profile has
    it); without it, a plain repeat. Either runs under ``proof_cap_bytes``: on a CPU the line
    less one refinement step, at the line on a GPU. A failure moves the boundary below that
    size (``recommend.choose``), and the next smaller fitting size is proven in turn.
    """
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective,
                 margin=config.speed_margin, remeasure_left=remeasure_left(config, results))
    if rec.chosen is None:
        return None
    n = rec.chosen.num_envs
    same = [r for r in results if r.num_envs == n]
    if config.confirm:
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
    basis = _proof_basis(results, n)
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


def alone_steps(config: SweepConfig, results: Sequence[TrialResult],
                space: SearchSpace) -> list[Step]:
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
            witness = _witness_below(config, results, sizes[i + 1:], measured, best, by_size)
            if witness is not None:
                return [witness]
            break
        if best is None or (fastest.steps_per_s or 0.0) > (best.steps_per_s or 0.0):
            best = fastest
    return remeasure_steps(config, results)


def _witness_below(config: SweepConfig, results: Sequence[TrialResult], below: Sequence[int],
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
    if not remeasure_left(config, results):
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


def remeasure_left(config: SweepConfig, results: Sequence[TrialResult]) -> bool:
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
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective,
                 margin=config.speed_margin, remeasure_left=True)
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


def remeasure_steps(config: SweepConfig, results: Sequence[TrialResult]) -> list[Step]:
    """Throughput: when the pick rests on an unresolved comparison, run the two sizes again,
    alone and interleaved so that load and thermal drift hit both: A B, then B A (a linear
    drift cancels over the two pairs), up to ``speed_remeasure`` pairs per sweep."""
    if config.objective is not Objective.THROUGHPUT:
        return []
    if not remeasure_left(config, results):
        return []
    done = remeasure_pairs(results)
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective,
                 margin=config.speed_margin, remeasure_left=True)
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
    hi: int  # the smallest failure or size ruled out (recommend.ruled_out)
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
                    step_down_budget(config.refine))


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
            if config.confirm:
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


def next_steps(config: SweepConfig, results: Sequence[TrialResult], space: SearchSpace,
               parallel: int = 1) -> list[Step]:
    """The trials of the next round: the search's (up to ``parallel`` sizes at once, the
    trials the executor runs together), or after a failed proof run the step-down's; then
    the sizes the objective needs measured alone, then the proof of the pick
    (``edge_step``). Empty: the sweep is done."""
    down = step_down_steps(config, results, space)
    if down:
        return down
    if down is None:
        steps = search_round(results, space, parallel)
        if steps[0].phase is not StepKind.DONE:
            return steps
    alone = alone_steps(config, results, space)
    if alone:
        return alone
    proof = edge_step(config, results, space)
    return [proof] if proof is not None and proof.num_envs is not None else []


def search_outcome(results: Sequence[TrialResult], space: SearchSpace, parallel: int = 1,
                   config: SweepConfig | None = None) -> Step:
    """Why the search stopped (its DONE step), or the step it would take next. With
    ``config``, a step-down that ran says where it ended."""
    down = step_down(config, results) if config is not None else None
    if down is not None and not step_down_steps(config, results, space):
        if down.proven is not None and down.proven >= down.base:
            edge = f"{down.proven} (proven)"
        elif down.proven is not None:  # the objective proved a smaller pick than the edge
            edge = f"{down.base} (fits its search trial; {down.proven} proven)"
        else:
            edge = f"{down.base} (fits)"
        why = past_labels(results, ruled_out(results, space.limit_bytes),
                          space.limit_bytes).get(down.hi, "fails")
        return Step(StepKind.DONE, None, f"{down.words()}; boundary between {edge} "
                                      f"and {down.hi} ({why})")
    return search_round(results, space, parallel)[0]


def search_round(results: Sequence[TrialResult], space: SearchSpace,
                 parallel: int = 1) -> list[Step]:
    """The search's next round (``planner.plan_round``) from its inputs (``search_inputs``),
    with the sizes ruled out judged on every record (a proven size is judged by its proof)."""
    return plan_round(search_inputs(results, space), space, parallel,
                      over=ruled_out(results, space.limit_bytes))


def search_inputs(results: Sequence[TrialResult], space: SearchSpace) -> list[TrialResult]:
    """What the search plans from: its own trials, then every proof run (repeat or
    confirmation) that failed, as a failure at its size.

    A failed proof moves the boundary below that size, and the search goes on between the
    largest size that still fits and it. Without this, the next smaller *measured* size was
    proven instead: at 1.2 GB the predictive search had jumped 128 -> 512, 576 and 512 failed
    their confirmations, and 128 was recommended while the user's own run of 512 survived
    (benchmarks/README.md, fidelity, second round). Proof failures go last: a size's last
    record is what ``planner.plan_round`` reads."""
    searched = [r for r in results if r.purpose is Purpose.SEARCH]
    failed_proofs = [r for r in results if r.purpose in (Purpose.REPEAT, Purpose.CONFIRM)
                     and past_boundary(r, space.limit_bytes)]
    return searched + failed_proofs


def trial_request(config: SweepConfig, results: Sequence[TrialResult], step: Step,
                  space: SearchSpace | None = None) -> TrialRequest:
    """The request for a planned step: a search trial, a repeat, or the long confirming run."""
    assert step.num_envs is not None
    purpose, steps, floor, timeout_s = Purpose.SEARCH, None, None, config.timeout_s
    cap = config.limit_bytes
    if step.phase in (StepKind.CONFIRMING, StepKind.REPEATING):
        cap = proof_cap_bytes(config, results, step.num_envs, space)
    if step.phase is StepKind.ALONE:
        purpose = Purpose.ALONE
    elif step.phase is StepKind.CONFIRMING:
        chosen = _proof_basis(results, step.num_envs)
        purpose, steps = Purpose.CONFIRM, confirm_steps(config, chosen)
        floor = confirm_floor_steps(config, chosen, steps)
        timeout_s = confirm_timeout_s(config, chosen, steps)
    elif step.phase is StepKind.REPEATING:
        purpose = Purpose.REPEAT
    # A run alone measures steps/s only: its size's memory was proven by a cold search
    # trial, and a cache hit can only lower a CPU peak, never admit a size that does not fit.
    # So it may use the compile cache under a CPU cap (its steps/s are the same): re-measure
    # pairs then compile once per size instead of once per run.
    cached = config.cache_under_cpu_cap or purpose is Purpose.ALONE
    return TrialRequest(config.profile, step.num_envs, budget_bytes=config.budget_bytes,
                        timeout_s=timeout_s, compile_cache_dir=config.compile_cache_dir,
                        cache_under_cpu_cap=cached,
                        purpose=purpose, training_steps=steps, cap_bytes=cap,
                        min_training_steps=floor,
                        device_count=config.device_count,
                        alone=purpose is not Purpose.SEARCH)


def run_sweep(config: SweepConfig, executor: Executor, run_dir: Path, state: SweepState,
              on_event: EventCallback | None = None,
              on_trial: Callable[[Step, TrialResult], None] | None = None) -> SweepState:
    """Plan a round, run it, append each result as it finishes, until nothing is left to
    run. Resumed trials are not re-run."""
    started = time.perf_counter()
    space = config.space()
    session_start = len(state.results)  # trials before this session (a resume): no waiting
    round_wall = 0.0
    prior: PriorSource | None = None
    try:
        prior = PriorSource.start(config.profile, space, config.device_count, run_dir,
                                  getattr(executor, "footprint", None),  # local: a probe
                                  config.timeout_s or config.profile.timeout_s,
                                  resume=session_start > 0,
                                  beside=executor.cap.backend != "gpu",
                                  backend=executor.cap.backend)
        if prior.warning and on_event:
            on_event(SweepNote(prior.warning))
        while True:
            needed = not prior.waiting or search_round(
                state.results, space, executor.parallel)[0].phase is not StepKind.DONE
            found, note = prior.get(len(state.results) > session_start, round_wall, needed)
            space = replace(space, prior=found)
            state.prior_note = note or state.prior_note
            if note and on_event:
                on_event(SweepNote(note))
            steps = next_steps(config, state.results, space, executor.parallel)
            if not steps:
                state.final_step = search_outcome(state.results, space, executor.parallel,
                                                   config)
                return state
            requests = []
            for step in steps:
                index = len(state.results) + len(requests) + 1
                if on_event:
                    on_event(TrialStarted(index, step.num_envs, str(step.phase), step.reason))
                requests.append(trial_request(config, state.results, step, space))
            by_size = {(r.num_envs, r.purpose): s for r, s in zip(requests, steps, strict=True)}
            round_started = time.perf_counter()
            for result in executor.run_batch(requests, on_event):
                state.results.append(result)  # kept even when the write below fails
                append_result(run_dir, result)  # fsynced before anything else can go wrong
                state.trial_wall_s += result.wall_s or 0.0
                if on_trial:
                    on_trial(by_size[(result.num_envs, result.purpose)], result)
            round_wall = time.perf_counter() - round_started
    finally:
        if prior is not None:
            prior.close()  # a probe still compiling is killed with the sweep
        executor.close()  # no standby process may outlive the sweep, however it ends
        state.sweep_wall_s += time.perf_counter() - started


def run_sweeps(sweeps: Sequence[PreparedSweep],
               on_event: Callable[[str, Event], None] | None = None,
               on_trial: Callable[[str, Step, TrialResult], None] | None = None) -> None:
    """Several sweeps at once (one per accelerator type of a mixed cluster), one thread
    each; callbacks get the sweep's label. Ctrl-C (in this, the main thread) interrupts
    every executor, whose threads cancel their trials; then it is raised here."""
    failures: dict[int, BaseException] = {}

    def work(index: int, p: PreparedSweep) -> None:
        label = p.label or str(index)
        try:
            run_sweep(p.config, p.executor, p.run_dir, p.state,
                      (lambda event: on_event(label, event)) if on_event else None,
                      (lambda step, result: on_trial(label, step, result)) if on_trial else None)
        except BaseException as exc:  # handed to the main thread
            failures[index] = exc

    threads = [threading.Thread(target=work, args=(i, p), daemon=True,
                                name=f"vramtune-sweep-{p.label or i}")
               for i, p in enumerate(sweeps)]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short joins: a signal reaches this thread between them
    except BaseException:
        for p in sweeps:
            interrupt = getattr(p.executor, "interrupt", None)
            if interrupt is not None:
                interrupt()
        for thread in threads:
            thread.join(60)
        raise
    for index in sorted(failures):
        if not isinstance(failures[index], KeyboardInterrupt):
            raise failures[index]
    if failures:
        raise KeyboardInterrupt
