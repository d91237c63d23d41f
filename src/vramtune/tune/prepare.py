"""Everything decided before a sweep's first trial: the request reconciled with a resumed run,
the executor (its cap planned once), the header, the run directory and what it reuses.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from vramtune import machine
from vramtune.compat import stack_verdict
from vramtune.errors import UserError
from vramtune.measure.executor import Executor, LocalExecutor
from vramtune.measure.nvml import Nvml
from vramtune.records import Objective, TrialResult
from vramtune.results.settings import ExecutorKind
from vramtune.results.store import (
    RESULTS_FILE,
    RUNS_DIR,
    Run,
    RunHeader,
    RunLock,
    create_run,
    find_runs,
    load_run,
    lock_run,
    measurement_key,
    run_directory,
    trial_key,
)
from vramtune.tune.planner import (
    Step,
    doubling_sizes,
)
from vramtune.tune.request import (
    DEFAULT_REFINE,
    SweepConfig,
    SweepRequest,
    as_profile,
    resolve,
)
from vramtune.workload.pickled import save_factory
from vramtune.workload.profile import Profile, safe_name

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
                node: NodeReport | None = None) -> RunHeader:
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
                     gpu_total_bytes=info.total_bytes if info else None, cap=cap,
                     search=config.settings,
                     stack=stack_verdict().line if node is None else None)


def reusable(previous: Run | None, header: RunHeader, config: SweepConfig) -> list[TrialResult]:
    """Trials of an earlier run measuring exactly what this sweep would (same key)."""
    if previous is None:
        return []
    wanted = measurement_key(config.profile.hash, config.budget_bytes, header.versions,
                             header.device)
    return [r for r in previous.results if trial_key(previous.header, r)[1:] == wanted
            and (r.device_count or 1) == config.settings.devices]


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
                + (1 if self.config.budget_bytes or self.config.settings.confirm else 0))


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
    config = resolve(request, previous.header if previous is not None else None)
    space = config.space()
    if space.start > space.max_envs:  # refused before a run folder exists: nothing to run
        raise UserError(f"start {space.start} is above the maximum {space.max_envs}")
    if not doubling_sizes(space):
        raise UserError(f"no num_envs between {space.start} and {space.max_envs} satisfies "
                        f"Brax's batch rules for this profile"
                        + (f" on {config.settings.devices} devices (num_envs must divide by "
                           f"the device count)" if config.settings.devices > 1 else ""))
    if previous is None and request.out is not None:
        check_new_run(request.out)  # before a cluster is started or joined for nothing
    lock: RunLock | None = None
    executor: Executor | None = None
    try:
        if directory is not None:  # every option checked: lock, then read again under it
            lock = lock_run(directory)  # (two resumes at once would run the same size twice)
            previous = load_run(directory)
        nvml = nvml if nvml is not None else Nvml()
        executor, config = build_executor(config, nvml)
        prepared = _prepared(request.out, config, previous, lock, nvml, executor)
    except BaseException:
        # Released now, not when the frame goes: a notebook keeps its last error's frames.
        if executor is not None:
            executor.close()
        if lock is not None:
            lock.release()
        raise
    prepared.warnings.extend(executor.warnings)
    prepared.notice = executor.notice
    prepared.label = config.settings.gpu_type
    return prepared


def build_executor(config: SweepConfig, nvml: Nvml) -> tuple[Executor, SweepConfig]:
    """The one place a sweep's executor is made, and the config with the trials at once it
    planned (what the header records: 'auto' planned 9). Trials run under budget x
    (1 - headroom): an ok trial has then proven the headroom whatever its peak's jitter, and
    on CPU the cap counts the data segment, which runs above RSS, so a peak compared with a
    line after the fact proved nothing."""
    s = config.settings
    if s.executor is ExecutorKind.RAY:
        from vramtune.measure.ray_executor import RayExecutor  # only when asked for

        ray = RayExecutor(config.limit_bytes, address=s.ray_address, gpu_type=s.gpu_type,
                          devices=s.devices)
        return ray, replace(config, settings=replace(s, parallel=ray.parallel))
    local = LocalExecutor.planned(config.limit_bytes, nvml, devices=s.devices,
                                  standby=config.standby, parallel=s.parallel)
    if s.parallel != local.parallel:
        s = replace(s, parallel=local.parallel, parallel_asked=s.parallel)
    return local, replace(config, settings=s)


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
        found = {load_run(d).header.search.gpu_type: d for d in find_runs(parent)}
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
        parent = o.out or new_run_dir(as_profile(o.profile))
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


def new_run_dir(profile: Profile) -> Path:
    """A new sweep's default folder: ./vramtune-runs/<date>-<time>-<profile>."""
    return RUNS_DIR / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{safe_name(profile.name)}"


def check_new_run(directory: Path) -> None:
    path = directory / RESULTS_FILE
    try:
        held = path.is_file() and path.stat().st_size > 0
    except (OSError, ValueError):
        held = False  # create_run says why it cannot write there
    if held:
        raise UserError(f"{path} already holds results: use --resume {directory} to continue it")


def _prepared(out: Path | None, config: SweepConfig, previous: Run | None,
              lock: RunLock | None, nvml: Nvml, executor: Executor) -> PreparedSweep:
    """The header, the run directory (created, or the resumed one) and what it reuses."""
    header = make_header(config, nvml, executor.cap.description, getattr(executor, "node", None))
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
        run_dir = out or new_run_dir(config.profile)
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


