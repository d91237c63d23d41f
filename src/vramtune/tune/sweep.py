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
from vramtune.errors import UserError
from vramtune.machine import compile_cache_dir
from vramtune.measure.cap import plan_cap
from vramtune.measure.executor import Executor, LocalExecutor
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import DeviceFacts, measure_device
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest
from vramtune.measure.wire import Event, SweepNote, TrialStarted
from vramtune.records import Purpose, Status, TrialResult
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
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.planner import (
    Phase,
    SearchMethod,
    SearchSpace,
    Step,
    doubling_sizes,
    keeps_base_unrolls,
    plan_round,
)
from vramtune.tune.prior import PriorSource
from vramtune.tune.recommend import (
    KNEE_TOLERANCE,
    RANKED,
    Objective,
    choose,
    fits,
    past_boundary,
    ties,
)
from vramtune.tune.speed import DEFAULT_MARGIN
from vramtune.units import format_bytes, headroom_limit_bytes
from vramtune.workload.profile import (
    MAX_TIMEOUT_S,
    Profile,
    load_profile,
    profile_from_dict,
    safe_name,
)

if TYPE_CHECKING:
    from vramtune.measure.ray_executor import NodeReport


DEFAULT_SPEED_REMEASURE = 3


@dataclass(frozen=True)
class SweepConfig:
    profile: Profile
    budget_bytes: int | None
    headroom_fraction: float
    start: int
    max_envs: int
    refine: int | None  # None: the predictive search runs until the edge is bracketed
    timeout_s: float | None = None
    compile_cache_dir: str | None = None
    cache_under_cpu_cap: bool = False  # --cache given: use the cache on CPU under a cap too
    device_count: int = 1
    objective: Objective = Objective.THROUGHPUT
    confirm: bool = True  # train the chosen config much longer before recommending it
    confirm_steps: int | None = None  # None: CONFIRM_FACTOR x the trial's, at least MIN
    search: SearchMethod = SearchMethod.PREDICTIVE
    speed_margin: float = DEFAULT_MARGIN  # sizes this close in steps/s: the smaller is picked
    speed_remeasure: int = DEFAULT_SPEED_REMEASURE  # interleaved pairs at most, per sweep

    @property
    def limit_bytes(self) -> int | None:
        return headroom_limit_bytes(self.budget_bytes, self.headroom_fraction)

    def space(self) -> SearchSpace:
        prof, devices = self.profile, self.device_count
        refine = self.refine
        if refine is None and self.search is SearchMethod.BISECT:
            refine = DEFAULT_REFINE

        def shape_of(n: int) -> tuple[int, int, int] | None:
            shape = prof.shape_for(n, devices)
            return None if shape is None else (shape.batch_size, shape.num_minibatches,
                                               prof.unroll_length)

        return SearchSpace(start=self.start, max_envs=self.max_envs, refine=refine,
                           limit_bytes=self.limit_bytes,
                           is_valid=lambda n: prof.sweepable(n, devices), method=self.search,
                           shape_of=shape_of, candidate=keeps_base_unrolls(prof, devices),
                           sizes_between=lambda lo, hi: prof.sweepable_sizes(lo, hi, devices))



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
                     gpu_total_bytes=info.total_bytes if info else None, cap=cap, search=search)


def reusable(previous: Run | None, header: RunHeader, config: SweepConfig) -> list[TrialResult]:
    """Trials of an earlier run measuring exactly what this sweep would (same key)."""
    if previous is None:
        return []
    wanted = measurement_key(config.profile.hash, config.budget_bytes, header.versions,
                             header.device)
    return [r for r in previous.results if trial_key(previous.header, r)[1:] == wanted
            and (r.device_count or 1) == config.device_count]


CACHE_MODES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}  # header.search
DEFAULT_REFINE = 3
MAX_REFINE = 1000
DEFAULT_HEADROOM_FRACTION = 0.10


@dataclass(frozen=True)
class SweepOptions:
    """What a user asks of a sweep, already parsed (bytes, fractions). None = the default:
    the profile's, or on resume the run's own."""

    profile: str | Path | Profile | None = None
    budget_bytes: int | None = None
    headroom_fraction: float | None = None
    start: int | None = None
    max_envs: int | None = None
    refine: int | None = None
    objective: Objective | None = None
    out: Path | None = None
    resume: Path | None = None
    timeout_s: float | None = None
    cache: bool | None = None  # None: on, but not on CPU under a cap (measure.trial); True: on
    standby: bool = True
    confirm: bool | None = None  # None: on, or on resume what the run had
    confirm_steps: int | None = None
    devices: int | None = None  # None: 1, or a resumed run's
    search: SearchMethod | None = None  # default predictive; on resume the run's own
    parallel: int = 1  # trials at once on this machine (LocalExecutor)
    executor: str | None = None  # "local" or "ray"; None: local, or on resume the run's own
    ray_address: str | None = None  # None: a Ray cluster of the sweep's own on this machine
    gpu_type: str | None = None  # Ray accelerator type (A100, H100, ...) the trials run on


EXECUTORS = ("local", "ray")


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


def _as_profile(profile: str | Path | Profile | None) -> Profile:
    if isinstance(profile, Profile):
        return profile
    return load_profile(profile or "quick")


def prepare(options: SweepOptions, *, nvml: Nvml | None = None) -> PreparedSweep:
    """Reconcile the options with a resumed run, measure what the cap needs, create the run.

    On resume the run's own profile, budget, headroom and search settings win; a flag that
    contradicts them is an error rather than a silently different sweep.
    """
    o = options
    if o.refine is not None and not 0 <= o.refine <= MAX_REFINE:
        raise UserError(f"--refine must be from 0 to {MAX_REFINE}, got {o.refine}")
    if isinstance(o.parallel, bool) or not isinstance(o.parallel, int) or o.parallel < 1:
        raise UserError(f"--parallel must be a positive integer, got {o.parallel!r}")
    if o.timeout_s is not None and not 0 < o.timeout_s <= MAX_TIMEOUT_S:  # refuses nan, inf
        raise UserError(f"--timeout must be a number of seconds above 0 and at most "
                        f"{MAX_TIMEOUT_S}, got {o.timeout_s:g}")
    if o.headroom_fraction is not None and not 0 <= o.headroom_fraction < 1:
        raise UserError(f"--headroom must be at least 0% and below 100%, got "
                        f"{o.headroom_fraction:.0%}")
    previous: Run | None = None
    start, max_envs, refine, objective = o.start, o.max_envs, o.refine, o.objective
    method = o.search
    budget_bytes, headroom, devices = o.budget_bytes, o.headroom_fraction, o.devices
    confirm, confirm_n = o.confirm, o.confirm_steps
    cache = o.cache
    kind, address, gpu_type = o.executor, o.ray_address, o.gpu_type
    lock: RunLock | None = None
    if o.resume is not None:
        directory = run_directory(o.resume)
        # A damaged run, or options that contradict it, are refused before a lock file is
        # made in it (a refused resume leaves the directory as it found it).
        previous = load_run(directory)
        header = previous.header
        if o.profile is not None and _as_profile(o.profile).hash != header.profile_hash:
            raise UserError(f"--profile {o.profile} differs from the profile {o.resume} was "
                            f"measured with ({header.profile_name}); start a new sweep instead")
        if o.budget_bytes is not None and o.budget_bytes != header.budget_bytes:
            raise UserError(f"--gpu-mem differs from the budget {o.resume} was measured with "
                            f"({format_bytes(header.budget_bytes)}); start a new sweep instead")
        if headroom is not None and abs(headroom - header.headroom_fraction) > 1e-9:
            # Its trials ran under budget x (1 - its headroom): another headroom is another
            # cap, and trials measured under the old one prove nothing about the new.
            raise UserError(f"--headroom differs from the {header.headroom_fraction:.0%} "
                            f"{o.resume} was measured with; start a new sweep instead "
                            f"(`vramtune report --headroom` re-chooses without new trials)")
        prof = profile_from_dict(header.profile, source=str(o.resume))
        budget_bytes = header.budget_bytes
        if headroom is None:
            headroom = header.headroom_fraction
        searched = header.search
        start = start or searched.get("start")
        max_envs = max_envs or searched.get("max_envs")
        refine = searched.get("refine") if refine is None else refine
        if objective is None and searched.get("objective"):
            objective = Objective(searched["objective"])
        if confirm is None:
            confirm = bool(searched.get("confirm", True))
        if confirm_n is None:
            confirm_n = searched.get("confirm_steps")
        # The compile cache moves CPU peaks by 130-190 MiB: one run keeps one mode. Runs from
        # before the mode was recorded used the cache everywhere.
        ran_with = CACHE_MODES.get(searched.get("cache", "on"), True)
        if cache is not None and cache != ran_with:
            raise UserError(f"--{'no-' if cache is False else ''}cache differs from the "
                            f"compile-cache mode {o.resume} was measured with "
                            f"({searched.get('cache', 'on')}); start a new sweep instead")
        cache = ran_with
        ran_on = int(searched.get("devices") or 1)
        if devices is not None and devices != ran_on:
            raise UserError(f"--devices {devices} differs from the {ran_on} device(s) {o.resume} "
                            f"was measured on; start a new sweep instead")
        devices = ran_on
        if method is None:  # runs from before issue 13 searched by bisection
            method = SearchMethod(searched.get("search", SearchMethod.BISECT))
        if gpu_type is not None and searched.get("gpu_type") not in (None, gpu_type):
            raise UserError(f"--gpu-types {gpu_type} differs from the accelerator type {o.resume} "
                            f"was measured on ({searched['gpu_type']}); start a new sweep instead")
        if kind is None:  # the executor the run was measured with, unless told otherwise
            kind = searched.get("executor")
            if kind == "ray":
                address = address if address is not None else searched.get("ray_address")
                gpu_type = gpu_type if gpu_type is not None else searched.get("gpu_type")
    else:
        prof = _as_profile(o.profile)
    headroom = DEFAULT_HEADROOM_FRACTION if headroom is None else headroom
    method = SearchMethod.PREDICTIVE if method is None else method
    if refine is None and method is SearchMethod.BISECT:
        refine = DEFAULT_REFINE
    objective = Objective.THROUGHPUT if objective is None else objective
    start = prof.first_size if start is None else start
    max_envs = prof.max_envs if max_envs is None else max_envs
    for flag, value in (("--start", start), ("--max-envs", max_envs)):
        if not 1 <= value <= MAX_NUM_ENVS:
            raise UserError(f"{flag} must be an integer from 1 to {MAX_NUM_ENVS}, got {value}")
    if start > max_envs:
        raise UserError(f"--start {start} is above --max-envs {max_envs}")
    devices = 1 if devices is None else devices
    kind = kind or "local"
    if kind not in EXECUTORS:
        raise UserError(f"unknown executor {kind!r}: expected one of {', '.join(EXECUTORS)}")
    if kind != "ray" and (o.ray_address is not None or o.gpu_type is not None):
        raise UserError("--ray-address and --gpu-types need --executor ray")
    if kind == "ray" and o.parallel != 1:
        raise UserError("--parallel is for the local executor: on Ray as many trials run at "
                        "once as the cluster has GPUs (or CPUs)")
    confirm = True if confirm is None else confirm
    if confirm_n is not None and (isinstance(confirm_n, bool) or not isinstance(confirm_n, int)
                                  or not 1 <= confirm_n <= 1_000_000):
        raise UserError(f"--confirm-steps must be an integer from 1 to 1000000, got {confirm_n}")
    config = SweepConfig(prof, budget_bytes, headroom, start, max_envs, refine,
                         timeout_s=o.timeout_s,
                         compile_cache_dir=compile_cache_dir(cache),
                         cache_under_cpu_cap=cache is True,
                         device_count=devices, objective=objective, confirm=confirm,
                         confirm_steps=confirm_n, search=method)
    search = {"start": start, "max_envs": max_envs, "refine": refine,
              "objective": str(objective), "confirm": confirm, "confirm_steps": confirm_n,
              "devices": devices, "search": str(method), "parallel": o.parallel,
              "executor": kind, "cache": next(k for k, v in CACHE_MODES.items() if v is cache)}
    if previous is None and o.out is not None:
        check_new_run(o.out)  # before a cluster is started or joined for nothing
    if o.resume is not None:  # every option checked: lock, then read again under the lock
        lock = lock_run(directory)  # (two resumes at once would run the same size twice)
        previous = load_run(directory)
    # Trials run under budget x (1 - headroom): an ok trial has then proven the headroom
    # whatever its peak's jitter, and on CPU the cap counts the data segment, which runs
    # above RSS, so a peak compared with a line after the fact proved nothing.
    if kind == "ray":
        from vramtune.measure.ray_executor import RAY_LOG, RayExecutor  # only when asked for

        ray_executor = RayExecutor(config.limit_bytes, address=address, gpu_type=gpu_type,
                                   devices=devices)
        search.update(ray_address=address, gpu_type=gpu_type, parallel=ray_executor.parallel)
        try:
            prepared = _prepared(o, config, objective, previous, lock, nvml, ray_executor,
                                 search, node=ray_executor.node)
        except BaseException:
            ray_executor.close()
            raise
        ray_executor.set_log(prepared.run_dir / RAY_LOG)
        prepared.warnings.extend(ray_executor.warnings)
        prepared.label = gpu_type
        prepared.notice = ray_executor.node.nvml_notice
        return prepared
    nvml = nvml if nvml is not None else Nvml()
    facts = measure_device(nvml) if nvml.available else DeviceFacts(None, None)
    cap = plan_cap(config.limit_bytes, nvml, facts.overhead_bytes, devices=devices,
                   runtime_total_bytes=facts.runtime_total_bytes)
    executor = LocalExecutor(cap, nvml, overhead_bytes=facts.overhead_bytes,
                             runtime_total_bytes=facts.runtime_total_bytes, standby=o.standby,
                             parallel=o.parallel)
    prepared = _prepared(o, config, objective, previous, lock, nvml, executor, search)
    if executor.parallel_note:
        prepared.warnings.append(executor.parallel_note)
    prepared.notice = nvml.notice
    return prepared


_TYPE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def prepare_by_type(options: SweepOptions, gpu_types: Sequence[str] | None
                    ) -> tuple[Path, list[PreparedSweep]]:
    """One Ray sweep per accelerator type, each in its own run directory under one parent
    (<parent>/<type>); on resume the parent's runs, each with its own type. Every type is
    checked against the cluster before any directory is made."""
    o = options
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
        parent = o.out or Path("vramtune-runs") / f"{stamp}-{safe_name(_as_profile(o.profile).name)}"
        dirs = {t: parent / t for t in types}
    bad = [t for t in types if not _TYPE_NAME.fullmatch(str(t))]
    if bad:
        raise UserError(f"accelerator type {bad[0]!r} is not a name Ray uses (A100, H100, ...)")
    if o.executor not in (None, "ray"):
        raise UserError("--gpu-types needs --executor ray")
    if o.resume is None:
        for directory in dirs.values():
            check_new_run(directory)
    from vramtune.measure.ray_executor import check_types, cluster

    prepared: list[PreparedSweep] = []
    with cluster(o.ray_address) as ray:
        check_types(ray, types)
        try:
            for gpu_type, directory in dirs.items():
                one = replace(o, executor="ray", gpu_type=gpu_type, out=None, resume=directory) \
                    if o.resume is not None else replace(o, executor="ray", gpu_type=gpu_type,
                                                         out=directory)
                prepared.append(prepare(one))
        except BaseException:
            for p in prepared:
                p.executor.close()
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


def _prepared(o: SweepOptions, config: SweepConfig, objective: Objective, previous: Run | None,
              lock: RunLock | None, nvml: Nvml | None, executor: Executor,
              search: dict[str, Any], node: NodeReport | None = None) -> PreparedSweep:
    """The header, the run directory (created, or the resumed one) and what it reuses."""
    header = make_header(config, nvml, executor.cap.description, search, node)
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
        run_dir = o.out or Path("vramtune-runs") / f"{stamp}-{safe_name(config.profile.name)}"
        run_dir = Path(os.path.normpath(run_dir))  # as create_run makes it: 'next:' must work
        lock = create_run(run_dir, header)
    return PreparedSweep(config, objective, header, run_dir, state, executor,
                         nvml if nvml is not None else Nvml(), warnings, lock)


CONFIRM_FACTOR = 10  # a confirming run trains 10x a trial's training steps...
MIN_CONFIRM_STEPS = 50  # ...and at least 10 epochs of 5 steps: memory is steady by epoch 4-8


def confirm_steps(config: SweepConfig, chosen: TrialResult) -> int:
    if config.confirm_steps is not None:
        return config.confirm_steps
    return max(MIN_CONFIRM_STEPS, CONFIRM_FACTOR * (chosen.training_steps or 0))


def confirm_timeout_s(config: SweepConfig, chosen: TrialResult, steps: int) -> float:
    """Three times the time the trial's own pace predicts, never below the trial limit."""
    floor = config.timeout_s if config.timeout_s is not None else config.profile.timeout_s
    if not chosen.wall_s or not chosen.training_steps:
        return floor * CONFIRM_FACTOR
    compile_s = chosen.compile_s or 0.0
    per_step = max(chosen.wall_s - compile_s, 0.0) / chosen.training_steps
    return max(floor, 3 * (compile_s + per_step * steps))


def _proof_basis(results: Sequence[TrialResult], num_envs: int) -> TrialResult:
    """The search trial (or run alone) a proof run of this size is sized from (its training
    steps)."""
    return max((r for r in results if r.num_envs == num_envs and r.status is Status.OK
                and r.purpose in RANKED), key=lambda r: r.training_steps or 0)


def edge_step(config: SweepConfig, results: Sequence[TrialResult]) -> Step | None:
    """After the search: prove the chosen size, or None when it is proven.

    A size counts as fitting only if it fits again. With confirmation on, the second run is
    the long confirming one (the same cap, ``confirm_steps`` training steps, evaluation as
    the profile has it); without it, a plain repeat. A failure moves the boundary below that
    size (``recommend.choose``), and the next smaller fitting size is proven in turn.
    """
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective,
                 margin=config.speed_margin,
                 remeasure_left=remeasure_pairs(results) < config.speed_remeasure)
    if rec.chosen is None:
        return None
    n = rec.chosen.num_envs
    same = [r for r in results if r.num_envs == n]
    if config.confirm:
        if any(r.purpose is Purpose.CONFIRM for r in same):
            return None
        steps = confirm_steps(config, _proof_basis(results, n))
        return Step(Phase.CONFIRMING, n, f"confirming {n} envs: {steps} training steps, "
                                         f"evaluation as in training")
    if any(r.purpose is Purpose.REPEAT for r in same):
        return None  # proven (or not: choose() then moved on); one repeat per size
    return Step(Phase.REPEATING, n, f"repeating {n} envs: a size fits only if it fits again")


def alone_steps(config: SweepConfig, results: Sequence[TrialResult],
                space: SearchSpace) -> list[Step]:
    """After the search: a size whose steps/s the objective compares and that has not run
    alone (its only fitting runs shared the device, or, for ``knee``, a size of the doubling
    ladder below the boundary the predictive search skipped). One at a time, from the largest
    size that fits down, until a size is clearly slower than the best above it (throughput:
    their ranges do not overlap; knee: more than 5% below): below that, smaller sizes are
    taken to be slower still, as throughput grows with num_envs up to its plateau.
    ``max-envs`` compares nothing: only the largest size must have run alone.
    """
    limit = config.limit_bytes
    edge = min((r.num_envs for r in results if past_boundary(r, limit)), default=None)
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
    for r in results:  # one pass: a resumed file may hold thousands of sizes (was quadratic)
        by_size.setdefault(r.num_envs, []).append(r)
    best: TrialResult | None = None
    for n in sizes:
        alone = [r for r in by_size.get(n, ()) if not r.shared_run]
        if not alone:
            shared = n in by_size
            why = ("its runs so far shared the device, so their steps/s do not count" if shared
                   else f"the {config.objective} objective compares its steps/s")
            return [Step(Phase.ALONE, n, f"measuring {n} envs alone: {why}")]
        measured = [r for r in alone if fits(r, limit)]
        if not measured:
            continue  # ran alone and has no steps/s to compare: running it again will not help
        fastest = max(measured, key=lambda r: r.steps_per_s or 0.0)
        if best is not None and _clearly_slower(fastest, best, config.objective):
            break
        if best is None or (fastest.steps_per_s or 0.0) > (best.steps_per_s or 0.0):
            best = fastest
    return remeasure_steps(config, results)


def remeasure_pairs(results: Sequence[TrialResult]) -> int:
    """Interleaved pairs run so far to settle a throughput comparison: runs alone beyond the
    one a size needs when its search trial shared the device."""
    extra = 0
    for n in {r.num_envs for r in results}:
        alone = sum(1 for r in results if r.num_envs == n and r.purpose is Purpose.ALONE)
        shared = any(r.num_envs == n and r.shared_run for r in results)
        extra += max(0, alone - (1 if shared else 0))
    return extra // 2


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
    done = remeasure_pairs(results)
    if done >= config.speed_remeasure:
        return []
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective,
                 margin=config.speed_margin)
    if len(rec.remeasure) != 2:
        return []
    a, b = rec.remeasure
    if done % 2:
        a, b = b, a
    why = (f"re-measuring {min(a, b)} and {max(a, b)} envs, interleaved (pair {done + 1} of at "
           f"most {config.speed_remeasure}): their steps/s do not yet say which is faster or "
           f"that they are within {config.speed_margin:.0%}")
    return [Step(Phase.ALONE, a, why), Step(Phase.ALONE, b, why)]


def _clearly_slower(r: TrialResult, best: TrialResult, objective: Objective) -> bool:
    if objective is Objective.KNEE:
        return (r.steps_per_s or 0.0) < (best.steps_per_s or 0.0) * (1 - KNEE_TOLERANCE)
    return (r.steps_per_s or 0.0) < (best.steps_per_s or 0.0) and not ties(r, best)


def next_steps(config: SweepConfig, results: Sequence[TrialResult], space: SearchSpace,
               parallel: int = 1) -> list[Step]:
    """The trials of the next round: the search's (up to ``parallel`` sizes at once, the
    trials the executor runs together), then the sizes the objective needs measured alone,
    then the proof of the pick (``edge_step``). Empty: the sweep is done."""
    steps = plan_round(search_inputs(results, space), space, parallel)
    if steps[0].phase is not Phase.DONE:
        return steps
    alone = alone_steps(config, results, space)
    if alone:
        return alone
    proof = edge_step(config, results)
    return [proof] if proof is not None and proof.num_envs is not None else []


def search_outcome(results: Sequence[TrialResult], space: SearchSpace, parallel: int = 1) -> Step:
    """Why the search stopped (its DONE step), or the step it would take next."""
    return plan_round(search_inputs(results, space), space, parallel)[0]


def search_inputs(results: Sequence[TrialResult], space: SearchSpace) -> list[TrialResult]:
    """What the search plans from: its own trials, then every proof run (repeat or
    confirmation) that failed, as a failure at its size.

    A failed proof moves the boundary below that size, and the search goes on between the
    largest size that still fits and it. Without this, the next smaller *measured* size was
    proven instead: at 1.2 GB the predictive search had jumped 128 -> 512, 576 and 512 failed
    their confirmations, and 128 was recommended while the user's own run of 512 survived
    (benchmarks/README.md, fidelity, second round). Proof failures go last: a size's last
    record is what ``planner.plan`` reads."""
    searched = [r for r in results if r.purpose is Purpose.SEARCH]
    failed_proofs = [r for r in results if r.purpose in (Purpose.REPEAT, Purpose.CONFIRM)
                     and past_boundary(r, space.limit_bytes)]
    return searched + failed_proofs


def trial_request(config: SweepConfig, results: Sequence[TrialResult], step: Step) -> TrialRequest:
    """The request for a planned step: a search trial, a repeat, or the long confirming run."""
    assert step.num_envs is not None
    purpose, steps, timeout_s = Purpose.SEARCH, None, config.timeout_s
    if step.phase is Phase.ALONE:
        purpose = Purpose.ALONE
    elif step.phase is Phase.CONFIRMING:
        chosen = _proof_basis(results, step.num_envs)
        purpose, steps = Purpose.CONFIRM, confirm_steps(config, chosen)
        timeout_s = confirm_timeout_s(config, chosen, steps)
    elif step.phase is Phase.REPEATING:
        purpose = Purpose.REPEAT
    return TrialRequest(config.profile, step.num_envs, budget_bytes=config.budget_bytes,
                        timeout_s=timeout_s, compile_cache_dir=config.compile_cache_dir,
                        cache_under_cpu_cap=config.cache_under_cpu_cap,
                        purpose=purpose, training_steps=steps, cap_bytes=config.limit_bytes,
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
            needed = not prior.waiting or plan_round(
                search_inputs(state.results, space), space, executor.parallel
            )[0].phase is not Phase.DONE
            found, note = prior.get(len(state.results) > session_start, round_wall, needed)
            space = replace(space, prior=found)
            state.prior_note = note or state.prior_note
            if note and on_event:
                on_event(SweepNote(note))
            steps = next_steps(config, state.results, space, executor.parallel)
            if not steps:
                state.final_step = search_outcome(state.results, space, executor.parallel)
                return state
            requests = []
            for step in steps:
                index = len(state.results) + len(requests) + 1
                if on_event:
                    on_event(TrialStarted(index, step.num_envs, str(step.phase), step.reason))
                requests.append(trial_request(config, state.results, step))
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


def summary(state: SweepState, recommendation: Any, run_dir: Path) -> dict[str, Any]:
    chosen = recommendation.chosen
    return {
        "run_dir": str(run_dir),
        "stopped_because": state.final_step.reason if state.final_step else "interrupted",
        "memory_prior": state.prior_note,
        "trials": len(state.results), "reused": state.reused,
        "recommended": chosen.to_dict() if chosen else None,
        "confirmed": (recommendation.confirmation.to_dict() if recommendation.confirmation
                      else None),
        "confirmed_line": recommendation.confirmed_line,
        "notice": recommendation.notice,
        "speed_remeasure": {"pairs": remeasure_pairs(state.results),
                            "wall_s": remeasure_wall_s(state.results),
                            "sizes": list(recommendation.remeasure)},
        "reasons": {str(k): v for k, v in recommendation.reasons.items()},
        "results": [r.to_dict() for r in state.results],
    }
