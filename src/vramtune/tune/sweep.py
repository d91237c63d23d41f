"""Drive the planner with an executor, appending every finished trial to the run's file.

The orchestration is pure Python around the Executor interface, so a distributed executor
can replace local subprocesses without touching the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtune import machine
from vramtune.measure.executor import Executor
from vramtune.measure.nvml import Nvml
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest
from vramtune.measure.wire import TrialStarted
from vramtune.records import TrialResult
from vramtune.results.store import Run, RunHeader, append_result, measurement_key, trial_key
from vramtune.tune.planner import Phase, SearchSpace, Step, plan
from vramtune.workload.profile import Profile


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
        close = getattr(executor, "close", None)
        if close is not None:
            close()  # no standby process may outlive the sweep, however it ends
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
