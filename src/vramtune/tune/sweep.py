"""Drive the planner with an executor, appending every finished trial to the run's file.

The orchestration is pure Python around the Executor interface, so a distributed executor
can replace local subprocesses without touching the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import (
    Run,
    RunHeader,
    RunLock,
    append_result,
    create_run,
    load_run,
    lock_run,
    measurement_key,
    run_directory,
    trial_key,
)
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.planner import Phase, SearchSpace, Step, doubling_sizes, plan
from vramtune.tune.recommend import Objective, choose
from vramtune.units import format_bytes, headroom_limit_bytes
from vramtune.workload.profile import (
    MAX_TIMEOUT_S,
    Profile,
    load_profile,
    profile_from_dict,
    safe_name,
)


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
    objective: Objective = Objective.THROUGHPUT
    confirm: bool = True  # train the chosen config much longer before recommending it
    confirm_steps: int | None = None  # None: CONFIRM_FACTOR x the trial's, at least MIN

    @property
    def limit_bytes(self) -> int | None:
        return headroom_limit_bytes(self.budget_bytes, self.headroom_fraction)

    def space(self) -> SearchSpace:
        return SearchSpace(start=self.start, max_envs=self.max_envs, refine=self.refine,
                           limit_bytes=self.limit_bytes,
                           is_valid=lambda n: self.profile.sweepable(n, self.device_count),
                           sizes_between=lambda lo, hi: self.profile.sweepable_sizes(
                               lo, hi, self.device_count))


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
    cache: bool = True
    standby: bool = True
    confirm: bool = True
    confirm_steps: int | None = None


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

    def release(self) -> None:
        """Let another process write the run directory (a process exit does it too)."""
        if self.lock is not None:
            self.lock.release()

    def planned(self) -> int:
        """An honest upper estimate of the trials: the doubling ladder plus refinement."""
        return (len(doubling_sizes(self.config.space())) + self.config.refine
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
    if o.timeout_s is not None and not 0 < o.timeout_s <= MAX_TIMEOUT_S:  # refuses nan, inf
        raise UserError(f"--timeout must be a number of seconds above 0 and at most "
                        f"{MAX_TIMEOUT_S}, got {o.timeout_s:g}")
    if o.headroom_fraction is not None and not 0 <= o.headroom_fraction < 1:
        raise UserError(f"--headroom must be at least 0% and below 100%, got "
                        f"{o.headroom_fraction:.0%}")
    previous: Run | None = None
    start, max_envs, refine, objective = o.start, o.max_envs, o.refine, o.objective
    budget_bytes, headroom = o.budget_bytes, o.headroom_fraction
    lock: RunLock | None = None
    if o.resume is not None:
        directory = run_directory(o.resume)
        load_run(directory)  # a damaged run is refused before a lock file is made in it
        lock = lock_run(directory)  # then read again under the lock: two resumes at once
        previous = load_run(directory)  # would run the same size twice
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
    for flag, value in (("--start", start), ("--max-envs", max_envs)):
        if not 1 <= value <= MAX_NUM_ENVS:
            raise UserError(f"{flag} must be an integer from 1 to {MAX_NUM_ENVS}, got {value}")
    if start > max_envs:
        raise UserError(f"--start {start} is above --max-envs {max_envs}")
    nvml = nvml if nvml is not None else Nvml()
    overhead = measure_overhead_bytes(nvml) if budget_bytes and nvml.available else None
    if o.confirm_steps is not None and not 1 <= o.confirm_steps <= 10_000_000:
        raise UserError(f"--confirm-steps must be an integer from 1 to 10000000, got "
                        f"{o.confirm_steps}")
    config = SweepConfig(prof, budget_bytes, headroom, start, max_envs, refine,
                         timeout_s=o.timeout_s,
                         compile_cache_dir=str(default_cache_dir() / "jax") if o.cache else None,
                         objective=objective, confirm=o.confirm, confirm_steps=o.confirm_steps)
    # Trials run under budget x (1 - headroom): an ok trial has then proven the headroom
    # whatever its peak's jitter, and on CPU the cap counts the data segment, which runs
    # above RSS, so a peak compared with a line after the fact proved nothing.
    cap = plan_cap(config.limit_bytes, nvml, overhead)
    header = make_header(config, nvml, cap.description,
                         {"start": start, "max_envs": max_envs, "refine": refine,
                          "objective": str(objective), "confirm": o.confirm,
                          "confirm_steps": o.confirm_steps})
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
        run_dir = o.out or Path("vramtune-runs") / f"{stamp}-{safe_name(prof.name)}"
        lock = create_run(run_dir, header)
    executor = LocalExecutor(cap, nvml, overhead_bytes=overhead, standby=o.standby)
    return PreparedSweep(config, objective, header, run_dir, state, executor, nvml, warnings,
                         lock)


CONFIRM_FACTOR = 10  # a confirming run trains 10x a trial's training steps...
MIN_CONFIRM_STEPS = 100  # ...and at least as long as the fidelity benchmark's user runs


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


def edge_step(config: SweepConfig, results: Sequence[TrialResult]) -> Step | None:
    """After the search: prove the chosen size, or None when it is proven.

    A size counts as fitting only if it fits again. With confirmation on, the second run is
    the long confirming one (the same cap, ``confirm_steps`` training steps, evaluation as
    the profile has it); without it, a plain repeat. A failure moves the boundary below that
    size (``recommend.choose``), and the next smaller fitting size is proven in turn.
    """
    rec = choose(results, config.budget_bytes, config.headroom_fraction, config.objective)
    if rec.chosen is None:
        return None
    n = rec.chosen.num_envs
    same = [r for r in results if r.num_envs == n]
    if config.confirm:
        if any(r.purpose is Purpose.CONFIRM for r in same):
            return None
        steps = confirm_steps(config, rec.chosen)
        return Step(Phase.CONFIRMING, n, f"confirming {n} envs: {steps} training steps, "
                                         f"evaluation as in training")
    if sum(1 for r in same if r.status is Status.OK) >= 2:
        return None
    return Step(Phase.REPEATING, n, f"repeating {n} envs: a size fits only if it fits again")


def next_steps(config: SweepConfig, results: Sequence[TrialResult], space: SearchSpace,
               parallel: int = 1) -> list[Step]:
    """The trials of the next round: the search's, or once it is done, the proof of its pick.

    ``parallel`` is how many trials the executor runs at once; the search proposes one per
    round today (a batch planner can propose up to ``parallel``). Empty: the sweep is done.
    """
    searched = [r for r in results if r.purpose is Purpose.SEARCH]
    step = plan(searched, space)
    if step.phase is not Phase.DONE and step.num_envs is not None:
        return [step]
    proof = edge_step(config, results)
    return [proof] if proof is not None and proof.num_envs is not None else []


def trial_request(config: SweepConfig, results: Sequence[TrialResult], step: Step) -> TrialRequest:
    """The request for a planned step: a search trial, a repeat, or the long confirming run."""
    assert step.num_envs is not None
    purpose, steps, timeout_s = Purpose.SEARCH, None, config.timeout_s
    if step.phase is Phase.CONFIRMING:
        chosen = max((r for r in results if r.num_envs == step.num_envs
                      and r.status is Status.OK), key=lambda r: r.training_steps or 0)
        purpose, steps = Purpose.CONFIRM, confirm_steps(config, chosen)
        timeout_s = confirm_timeout_s(config, chosen, steps)
    elif step.phase is Phase.REPEATING:
        purpose = Purpose.REPEAT
    return TrialRequest(config.profile, step.num_envs, budget_bytes=config.budget_bytes,
                        timeout_s=timeout_s, compile_cache_dir=config.compile_cache_dir,
                        purpose=purpose, training_steps=steps, cap_bytes=config.limit_bytes)


def run_sweep(config: SweepConfig, executor: Executor, run_dir: Path, state: SweepState,
              on_event: EventCallback | None = None,
              on_trial: Callable[[Step, TrialResult], None] | None = None) -> SweepState:
    """Plan a round, run it, append each result as it finishes, until nothing is left to
    run. Resumed trials are not re-run."""
    started = time.perf_counter()
    space = config.space()
    try:
        while True:
            steps = next_steps(config, state.results, space, executor.parallel)
            if not steps:
                state.final_step = plan([r for r in state.results
                                         if r.purpose is Purpose.SEARCH], space)
                return state
            requests = []
            for step in steps:
                index = len(state.results) + len(requests) + 1
                if on_event:
                    on_event(TrialStarted(index, step.num_envs, str(step.phase), step.reason))
                requests.append(trial_request(config, state.results, step))
            by_size = {(r.num_envs, r.purpose): s for r, s in zip(requests, steps, strict=True)}
            for result in executor.run_batch(requests, on_event):
                state.results.append(result)  # kept even when the write below fails
                append_result(run_dir, result)  # fsynced before anything else can go wrong
                state.trial_wall_s += result.wall_s or 0.0
                if on_trial:
                    on_trial(by_size[(result.num_envs, result.purpose)], result)
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
        "confirmed": (recommendation.confirmation.to_dict() if recommendation.confirmation
                      else None),
        "confirmed_line": recommendation.confirmed_line,
        "notice": recommendation.notice,
        "reasons": {str(k): v for k, v in recommendation.reasons.items()},
        "results": [r.to_dict() for r in state.results],
    }
