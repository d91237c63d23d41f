"""Drive the planner with an executor, appending every finished trial to the run's file.

The orchestration is pure Python around the Executor interface, so a distributed executor
can replace local subprocesses without touching the search.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from vramtune.measure.executor import Executor
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest
from vramtune.measure.wire import (
    Event,
    SweepNote,
    TrialStarted,
)
from vramtune.records import Purpose, TrialResult
from vramtune.results.store import (
    append_result,
)
from vramtune.tune.alone import alone_steps, decide
from vramtune.tune.boundary import past_boundary, past_labels, ruled_out
from vramtune.tune.capacity import sweep_capacities, warp_pool_room
from vramtune.tune.planner import SearchSpace, Step, StepKind, plan_round
from vramtune.tune.prepare import PreparedSweep, SweepState
from vramtune.tune.prior import PriorSource
from vramtune.tune.proof import (
    confirm_floor_steps,
    confirm_steps,
    confirm_timeout_s,
    edge_step,
    proof_basis,
    proof_cap_bytes,
    step_down,
    step_down_steps,
)
from vramtune.tune.request import (
    SweepConfig,
)


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
    decision = decide(config, results)  # once a round: the runs alone and the proof read it
    alone = alone_steps(config, results, space, decision)
    if alone:
        return alone
    proof = edge_step(config, results, decision, space)
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
    largest size that still fits and it, rather than proving the next smaller *measured*
    size (which may sit far below the edge after a predictive jump). Proof failures go last:
    a size's last record is what the search reads."""
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
        chosen = proof_basis(results, step.num_envs)
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
                        device_count=config.settings.devices,
                        alone=purpose is not Purpose.SEARCH,
                        warp_capacities=sweep_capacities(results, step.num_envs,
                                                         config.profile.env_kwargs),
                        outside_room_bytes=warp_pool_room(results, step.num_envs))


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
        prior = PriorSource.start(config.profile, space, config.settings.devices, run_dir,
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
