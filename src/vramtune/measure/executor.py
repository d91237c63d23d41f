"""Executors run trials: local subprocesses (one at a time, or several capped ones sharing the
machine), a cluster behind the same protocol. The executor holds the cap for the whole sweep
and must be closed.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import psutil

from vramtune.measure.cap import Cap, plan_cap
from vramtune.measure.footprint import FootprintProbe
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import device_cap
from vramtune.measure.process import EventCallback, Standby, call_or_drop
from vramtune.measure.trial import TrialRequest, invalid_result, run_trial
from vramtune.measure.wire import Event, TrialPhase
from vramtune.records import MAX_PARALLEL, PARALLEL_AUTO, Status, TrialResult

# CPU cores one GPU trial keeps busy, for --parallel auto: an inference, not a measured
# optimum. With one trial per core (16 at once on a 16-core H200 host, `quick`, cold
# compiles) the first to end took 3.9x as long as one alone and the other 15 had not ended by
# then; if the cores were what they shared, each trial alone keeps ~4 busy (its compile and
# its host side). Sharing the one GPU may explain part of it; benchmarks/README.md.
CORES_PER_GPU_TRIAL = 4

SHARED_NOTE = ("ran beside other trials (or the compile-only probe) on the same device: its "
               "memory verdict holds (its own cap), its steps/s do not (shared compute)")


class Executor(Protocol):
    """Runs trials under one cap, decided once for the whole sweep; must be closed.

    ``LocalExecutor`` (subprocesses on this machine) and ``ray_executor.RayExecutor`` (Ray
    tasks on a cluster) implement it.
    """

    cap: Cap
    parallel: int  # trials it can run at once; the planner proposes batches of this size
    warnings: list[str]  # what the user should know about how the trials will run
    notice: str | None  # why GPU figures are missing where the trials run (NVML's word)

    def attach(self, run_dir: Path) -> None:
        """The run directory is known: keep whatever the executor logs there."""
        ...

    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        ...

    def run_batch(self, requests: Sequence[TrialRequest],
                  on_event: EventCallback | None = None) -> Iterator[TrialResult]:
        """Run every request, yielding each result as it finishes (any order); the caller
        appends each to the run's file at once, so a later failure loses none of them."""
        ...

    def close(self) -> None:
        """Release whatever the executor holds (standby processes, workers)."""
        ...


def may_join(running: Sequence[tuple[int, bool]], cap_bytes: int, alone: bool, parallel: int,
             device_bytes: int) -> bool:
    """Whether a trial capped at ``cap_bytes`` may start beside the ``running`` ones, each
    (cap bytes, alone): the first always starts; nothing joins or is joined by a trial that
    must run alone; at most ``parallel`` at once, their caps summing to at most the device."""
    if not running:
        return True
    if alone or any(a for _, a in running) or len(running) >= parallel:
        return False
    return sum(held for held, _ in running) + cap_bytes <= device_bytes


def usable_cores() -> int:
    """The CPU cores this process may run on (a container's limit, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Cancelled(Exception):
    """Raised in a trial's thread to stop it: run_trial kills the trial's process group."""


class LocalExecutor:
    """Trials as local subprocesses: one at a time by default (one GPU, one honest peak).

    With ``standby`` on, the next trial's process is started and imports while the current
    one compiles, and is stopped (SIGSTOP) if it is still importing when measuring starts,
    so it never competes with the steps/s being measured.

    With ``parallel`` K > 1, a batch runs up to K trials at once when their caps sum to at
    most the device (GPU: the card's total; CPU: the host memory available when the batch
    starts): each has its own cap, so its memory verdict holds, but they share the compute,
    so every trial that overlapped another is marked ``shared_run`` and its steps/s do not
    count. A request marked ``alone`` runs with nothing beside it. No standby then: it is
    for one trial after another.

    ``parallel="auto"`` plans K from the device: on a GPU as many capped trials as the
    memory free on the card now holds, less one cap kept for the compile-only probe, at most
    one per ``CORES_PER_GPU_TRIAL`` CPU cores (a trial's compile and its host side keep
    several cores busy); a cap is the budget less headroom (8 GB at 10%: 7.2 GB, 10 on an
    80 GB card). On a CPU one, since
    XLA already runs each trial's step on every core and trials beside each other only
    share them (on 2 cores a trial ran 1.5-2x slower beside another).
    """

    def __init__(self, cap: Cap | None = None, nvml: Nvml | None = None, *,
                 overhead_bytes: int | None = None, runtime_total_bytes: int | None = None,
                 standby: bool = True, parallel: int | str = 1) -> None:
        self.cap = cap if cap is not None else plan_cap(None, nvml, overhead_bytes,
                                                        runtime_total_bytes=runtime_total_bytes)
        self.nvml = nvml
        self.overhead_bytes = overhead_bytes
        self.runtime_total_bytes = runtime_total_bytes
        self.use_standby = standby
        self._standby: Standby | None = None
        self._beside: list[FootprintProbe] = []  # compile-only probes, paused while a trial measures
        self.requested_parallel = parallel if parallel == PARALLEL_AUTO else max(1, int(parallel))
        self.parallel, self.parallel_note = self._slots(self.requested_parallel)
        auto_note = None
        if parallel == PARALLEL_AUTO:  # what auto planned is news, not a warning
            auto_note, self.parallel_note = self.parallel_note, None
        self.warnings = [self.parallel_note] if self.parallel_note else []
        notes = [nvml.notice if nvml is not None else None, auto_note]
        self.notice = "; ".join(n for n in notes if n) or None

    @classmethod
    def planned(cls, limit_bytes: int | None, nvml: Nvml, *, devices: int = 1,
                standby: bool = True, parallel: int | str = 1) -> LocalExecutor:
        """A sweep's executor: the cap planned once, from this machine's device facts."""
        cap, facts = device_cap(limit_bytes, nvml, devices)
        return cls(cap, nvml, overhead_bytes=facts.overhead_bytes,
                   runtime_total_bytes=facts.runtime_total_bytes, standby=standby,
                   parallel=parallel)

    def attach(self, run_dir: Path) -> None:
        """Local trials log nothing beside the results file."""

    def device_bytes(self) -> int | None:
        """What the caps of trials running together may sum to: the card's total on GPU,
        host memory available now on CPU."""
        if self.cap.backend == "gpu":
            info = self.nvml.info if self.nvml is not None else None
            return info.total_bytes if info is not None else None
        return int(psutil.virtual_memory().available)

    def free_device_bytes(self) -> int | None:
        """What more trials could take now: on GPU the least memory free on any card a trial
        is pinned to (NVML's total less its used: other processes keep theirs); on CPU the
        host memory available."""
        if self.cap.backend != "gpu":
            return int(psutil.virtual_memory().available)
        if self.nvml is None or self.nvml.info is None:
            return None
        infos = {d.uuid: d for d in self.nvml.devices}
        frees = []
        for uuid in self.cap.visible_uuids or (self.nvml.info.uuid,):
            info, used = infos.get(uuid), self.nvml.device_used_bytes(uuid)
            if info is None or used is None:
                return None
            frees.append(max(0, info.total_bytes - used))
        return min(frees)

    def _auto_slots(self) -> tuple[int, str]:
        """``--parallel auto``: K and a line that says how it was planned."""
        each = self.cap.enforced_bytes
        cores = usable_cores()
        if self.cap.backend != "gpu":
            return 1, (f"--parallel auto: one trial at a time: trials run on the CPU, where "
                       f"XLA already runs each on all {cores} core(s) (--parallel N runs N)")
        if each is None:
            return 1, ("--parallel auto: without a budget nothing bounds each trial's memory, "
                       "so trials run one at a time")
        free = self.free_device_bytes()
        if free is None:
            return 1, ("--parallel auto: NVML does not say how much of the card is free, so "
                       "trials run one at a time")
        by_memory = free // each - 1  # one cap kept for the compile-only probe beside them
        by_cores = max(1, cores // CORES_PER_GPU_TRIAL)
        fit = max(1, min(by_memory, by_cores, MAX_PARALLEL))
        bound = (f"CPU cores, {CORES_PER_GPU_TRIAL} a trial" if by_cores < by_memory
                 else "the card's free memory")
        return fit, (f"--parallel auto: {fit} capped trial(s) at once, bounded by {bound} "
                     f"({free / 1e9:.1f} GB free on the card, {each / 1e9:.2f} GB each with one "
                     f"kept for the compile-only probe; {cores} core(s)); steps/s that decide "
                     f"the pick are measured alone")

    def _slots(self, wanted: int | str) -> tuple[int, str | None]:
        """How many trials may run at once, and why fewer than asked, if so."""
        if wanted == PARALLEL_AUTO:
            return self._auto_slots()
        assert isinstance(wanted, int)
        if wanted == 1:
            return 1, None
        each = self.cap.enforced_bytes
        if each is None:
            return 1, (f"--parallel {wanted}: without a budget nothing bounds each trial's "
                       f"memory, so trials run one at a time")
        device = self.device_bytes()
        if device is None:
            return 1, (f"--parallel {wanted}: the device's memory is unknown, so trials run "
                       f"one at a time")
        fit = max(1, device // each)
        if fit < wanted:
            where = "the card" if self.cap.backend == "gpu" else "the host's available memory"
            return fit, (f"--parallel {wanted}: {fit} capped trial(s) fit in {where} "
                         f"({device / 1e9:.1f} GB at {each / 1e9:.2f} GB each); running {fit}")
        return wanted, None

    def footprint(self, profile_dict: dict, sizes: list[tuple[int, int, int]], device_count: int,
                  import_path: str | None, timeout_s: float,
                  profile_hash: str | None = None) -> FootprintProbe:
        """Start the compile-only probe (``measure.footprint``) under the sweep's cap, beside
        whatever runs (paused while a trial measures): it compiles, it trains nothing."""
        probe = FootprintProbe(self._cap_for(self.cap.enforced_bytes, device_count, None),
                               profile_dict,
                               sizes, device_count=device_count, import_path=import_path,
                               timeout_s=timeout_s, profile_hash=profile_hash).start()
        self._beside.append(probe)
        return probe

    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        if invalid_result(request) is not None:
            return run_trial(request)  # rejected before launch: keep the standby for the next
        cap = self._cap_for(request.enforced_bytes, request.device_count,
                            request.outside_room_bytes)
        current, self._standby = self._standby, None
        phase: dict[str, str] = {}

        caller = [on_event]  # the caller's callback, dropped if it raises

        def events(event: Event) -> None:  # reader thread: record, never spawn here
            if isinstance(event, TrialPhase):
                phase["now"] = event.phase
            # Its error must not drop this wrapper too (process._Delivers would): the phase
            # above pauses the standby and the probes while the trial measures.
            if caller[0] is not None and not call_or_drop(caller[0], event):
                caller[0] = None

        def tick() -> None:  # the main thread, between polls of the running trial
            now = phase.get("now")
            if self.use_standby and self._standby is None and now == "compiling":
                self._standby = Standby(cap)
            if now == "measuring":
                if self._standby is not None:
                    self._standby.pause()
                for probe in self._beside:
                    probe.pause()

        try:
            return run_trial(request, events, cap=cap, nvml=self.nvml, standby=current,
                             on_tick=tick)
        finally:
            if self._standby is not None:
                self._standby.resume()
            self._beside = [p for p in self._beside if not p.done]
            for probe in self._beside:
                probe.resume()

    def run_batch(self, requests: Sequence[TrialRequest],
                  on_event: EventCallback | None = None) -> Iterator[TrialResult]:
        """Every request, each result yielded as it finishes: one after another (parallel 1,
        or a lone request, with the standby), else up to ``parallel`` at once."""
        if self.parallel == 1 or len(requests) <= 1:
            for request in requests:
                yield self.run(request, on_event)
            return
        yield from self._run_together(list(requests), on_event)

    def _cap_for(self, enforced_bytes: int | None, device_count: int,
                 outside_room_bytes: int | None) -> Cap:
        """The sweep's cap, or (a caller mixing budgets or devices, or a GPU trial that leaves
        room outside XLA's pool) one of their own."""
        if enforced_bytes == self.cap.enforced_bytes and device_count == self.cap.device_count \
                and outside_room_bytes == self.cap.outside_room_bytes:
            return self.cap
        return plan_cap(enforced_bytes, self.nvml, self.overhead_bytes, devices=device_count,
                        runtime_total_bytes=self.runtime_total_bytes,
                        outside_room_bytes=outside_room_bytes)

    def _run_together(self, pending: list[TrialRequest],
                      on_event: EventCallback | None) -> Iterator[TrialResult]:
        if self._standby is not None:  # a standby is for one trial after another
            self._standby.close()
            self._standby = None
        device = self.device_bytes() or 0
        done: queue.Queue[tuple[int, TrialResult | BaseException]] = queue.Queue()
        cancel = threading.Event()
        running: dict[int, tuple[threading.Thread, int, bool]] = {}  # id -> (thread, bytes, alone)
        shared: set[int] = set()
        probing = [p for p in self._beside if not p.done]  # compiling beside: shared compute
        next_id = 0

        def tick() -> None:
            if cancel.is_set():
                raise _Cancelled()

        def work(ident: int, request: TrialRequest, cap: Cap) -> None:
            try:
                result: TrialResult | BaseException = run_trial(
                    request, on_event, cap=cap, nvml=self.nvml, on_tick=tick)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                result = exc
            done.put((ident, result))

        def admit(request: TrialRequest) -> bool:
            return may_join([(held, alone) for _, held, alone in running.values()],
                            request.enforced_bytes or device, request.alone, self.parallel,
                            device)

        try:
            while pending or running:
                while pending and admit(pending[0]):
                    request = pending.pop(0)
                    cap = self._cap_for(request.enforced_bytes, request.device_count,
                                        request.outside_room_bytes)
                    thread = threading.Thread(target=work, args=(next_id, request, cap),
                                              daemon=True, name=f"vramtune-trial-{next_id}")
                    running[next_id] = (thread, request.enforced_bytes or device, request.alone)
                    if len(running) > 1:
                        shared.update(running)  # every trial that overlaps another shares
                    if any(not p.done for p in probing):
                        shared.add(next_id)
                    thread.start()
                    next_id += 1
                ident, outcome = self._next_finished(done)
                thread, _, _ = running.pop(ident)
                thread.join()
                if isinstance(outcome, BaseException):
                    raise outcome
                if ident in shared and outcome.status is not Status.INVALID:
                    outcome = dataclasses.replace(
                        outcome, shared_run=True,
                        notes=(*outcome.notes, SHARED_NOTE))
                yield outcome
        finally:
            cancel.set()  # an interrupt, or the caller stopped: no trial outlives the batch
            for thread, _, _ in running.values():
                thread.join()

    @staticmethod
    def _next_finished(done: queue.Queue) -> tuple[int, TrialResult | BaseException]:
        while True:  # short waits: Ctrl-C reaches the main thread between them
            try:
                return done.get(timeout=0.2)
            except queue.Empty:
                continue

    def close(self) -> None:
        """Kill the standby and any probe still compiling: call when no further trial will come."""
        if self._standby is not None:
            self._standby.close()
            self._standby = None
        for probe in self._beside:
            probe.close()
        self._beside = []
