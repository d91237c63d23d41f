"""Drive the planner with an executor, appending every finished trial to the run's file.

The orchestration is pure Python around the Executor interface, so a distributed executor
can replace local subprocesses without touching the search.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from vramtune import machine
from vramtune.errors import UserError
from vramtune.machine import default_cache_dir
from vramtune.measure.cap import plan_cap
from vramtune.measure.executor import Executor, LocalExecutor
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_overhead_bytes
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest
from vramtune.measure.wire import TrialStarted
from vramtune.records import TrialResult
from vramtune.results.store import (
    Run,
    RunHeader,
    append_result,
    create_run,
    load_run,
    measurement_key,
    trial_key,
)
from vramtune.tune.planner import Phase, SearchSpace, Step, doubling_sizes, plan
from vramtune.tune.recommend import Objective
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile, load_profile, profile_from_dict


@dataclass(frozen=True)
class SweepConfig:
    profile: Profile
    budget_bytes: int | None
    headroom_fraction: float
    start: int
    max_envs: int
    refine: int
    timeout_s: float | None = None
    compile_cache_dir: str | None = None
    device_count: int = 1

    @property
    def limit_bytes(self) -> int | None:
        return int(self.budget_bytes * (1 - self.headroom_fraction)) if self.budget_bytes else None

    def space(self) -> SearchSpace:
        return SearchSpace(start=self.start, max_envs=self.max_envs, refine=self.refine,
                           limit_bytes=self.limit_bytes,
                           is_valid=lambda n: self.profile.sweepable(n, self.device_count))


@dataclass
class SweepState:
    """What the sweep has so far: kept by the caller so an interrupt loses nothing."""

    results: list[TrialResult] = field(default_factory=list)
    reused: int = 0
    final_step: Step | None = None
    trial_wall_s: float = 0.0
    sweep_wall_s: float = 0.0


def make_header(config: SweepConfig, nvml: Nvml | None, cap: str | None,
                search: dict[str, Any]) -> RunHeader:
    info = nvml.info if nvml else None
    return RunHeader(profile_name=config.profile.name, profile_hash=config.profile.hash,
                     profile=config.profile.to_dict(), budget_bytes=config.budget_bytes,
                     headroom_fraction=config.headroom_fraction, machine=machine.machine_summary(),
                     versions=machine.versions(), gpu_name=info.name if info else None,
                     gpu_driver=info.driver if info else None,
                     gpu_total_bytes=info.total_bytes if info else None, cap=cap, search=search)


def reusable(previous: Run | None, header: RunHeader, config: SweepConfig) -> list[TrialResult]:
    """Trials of an earlier run measuring exactly what this sweep would (same key)."""
    if previous is None:
        return []
    wanted = measurement_key(config.profile.hash, config.budget_bytes, machine.versions(),
                             header.device)
    return [r for r in previous.results if trial_key(previous.header, r)[1:] == wanted]


DEFAULT_REFINE = 3
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
    cache: bool = True
    standby: bool = True


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

    def planned(self) -> int:
        """An honest upper estimate of the trials: the doubling ladder plus refinement."""
        return len(doubling_sizes(self.config.space())) + self.config.refine


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
    if o.refine is not None and o.refine < 0:
        raise UserError(f"--refine must be 0 or more, got {o.refine}")
    if o.timeout_s is not None and not (o.timeout_s > 0 and math.isfinite(o.timeout_s)):
        raise UserError(f"--timeout must be a positive number of seconds, got {o.timeout_s:g}")
    if o.headroom_fraction is not None and not 0 <= o.headroom_fraction < 1:
        raise UserError(f"--headroom must be at least 0% and below 100%, got "
                        f"{o.headroom_fraction:.0%}")
    previous: Run | None = None
    start, max_envs, refine, objective = o.start, o.max_envs, o.refine, o.objective
    budget_bytes, headroom = o.budget_bytes, o.headroom_fraction
    if o.resume is not None:
        previous = load_run(o.resume)
        header = previous.header
        if o.profile is not None and _as_profile(o.profile).hash != header.profile_hash:
            raise UserError(f"--profile {o.profile} differs from the profile {o.resume} was "
                            f"measured with ({header.profile_name}); start a new sweep instead")
        if o.budget_bytes is not None and o.budget_bytes != header.budget_bytes:
            raise UserError(f"--gpu-mem differs from the budget {o.resume} was measured with "
                            f"({format_bytes(header.budget_bytes)}); start a new sweep instead")
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
    else:
        prof = _as_profile(o.profile)
    headroom = DEFAULT_HEADROOM_FRACTION if headroom is None else headroom
    refine = DEFAULT_REFINE if refine is None else refine
    objective = Objective.THROUGHPUT if objective is None else objective
    start = prof.first_size if start is None else start
    max_envs = prof.max_envs if max_envs is None else max_envs
    if start < 1 or max_envs < 1:
        raise UserError("--start and --max-envs must be positive integers")
    if start > max_envs:
        raise UserError(f"--start {start} is above --max-envs {max_envs}")
    nvml = nvml if nvml is not None else Nvml()
    overhead = measure_overhead_bytes(nvml) if budget_bytes and nvml.available else None
    cap = plan_cap(budget_bytes, nvml, overhead)
    config = SweepConfig(prof, budget_bytes, headroom, start, max_envs, refine,
                         timeout_s=o.timeout_s,
                         compile_cache_dir=str(default_cache_dir() / "jax") if o.cache else None)
    header = make_header(config, nvml, cap.description,
                         {"start": start, "max_envs": max_envs, "refine": refine,
                          "objective": str(objective)})
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
        run_dir = o.out or Path("vramtune-runs") / f"{stamp}-{prof.name}"
        create_run(run_dir, header)
    executor = LocalExecutor(cap, nvml, overhead_bytes=overhead, standby=o.standby)
    return PreparedSweep(config, objective, header, run_dir, state, executor, nvml, warnings)


def run_sweep(config: SweepConfig, executor: Executor, run_dir: Path, state: SweepState,
              on_event: EventCallback | None = None,
              on_trial: Callable[[Step, TrialResult], None] | None = None) -> SweepState:
    """Plan, run, append, repeat until the planner is done. Resumed trials are not re-run."""
    started = time.perf_counter()
    space = config.space()
    try:
        while True:
            step = plan(state.results, space)
            if step.phase is Phase.DONE or step.num_envs is None:
                state.final_step = step
                return state
            if on_event:
                on_event(TrialStarted(len(state.results) + 1, step.num_envs, str(step.phase),
                                      step.reason))
            request = TrialRequest(config.profile, step.num_envs, budget_bytes=config.budget_bytes,
                                   timeout_s=config.timeout_s,
                                   compile_cache_dir=config.compile_cache_dir)
            result = executor.run(request, on_event)
            append_result(run_dir, result)  # fsynced before anything else can go wrong
            state.results.append(result)
            state.trial_wall_s += result.wall_s or 0.0
            if on_trial:
                on_trial(step, result)
    finally:
        executor.close()  # no standby process may outlive the sweep, however it ends
        state.sweep_wall_s += time.perf_counter() - started


def summary(state: SweepState, recommendation: Any, run_dir: Path) -> dict[str, Any]:
    chosen = recommendation.chosen
    return {
        "run_dir": str(run_dir),
        "stopped_because": state.final_step.reason if state.final_step else "interrupted",
        "trials": len(state.results), "reused": state.reused,
        "recommended": chosen.to_dict() if chosen else None,
        "notice": recommendation.notice,
        "reasons": {str(k): v for k, v in recommendation.reasons.items()},
        "results": [r.to_dict() for r in state.results],
    }
