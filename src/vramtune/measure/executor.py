"""Executors run trials: local subprocesses one at a time now; a cluster behind the same
protocol. The executor holds the cap for the whole sweep and must be closed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from vramtune.measure.cap import Cap, plan_cap
from vramtune.measure.nvml import Nvml
from vramtune.measure.process import EventCallback, Standby
from vramtune.measure.trial import TrialRequest, invalid_result, run_trial
from vramtune.measure.wire import Event, Phase
from vramtune.records import TrialResult


class Executor(Protocol):
    """Runs trials under one cap, decided once for the whole sweep; must be closed.

    Local subprocesses now, a cluster behind the same three members later.
    """

    cap: Cap
    parallel: int  # trials it can run at once; the planner proposes batches of this size

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


class LocalExecutor:
    """Trials as local subprocesses, one at a time (one GPU, one honest peak).

    With ``standby`` on, the next trial's process is started and imports while the current
    one compiles, and is stopped (SIGSTOP) if it is still importing when measuring starts,
    so it never competes with the steps/s being measured.
    """

    def __init__(self, cap: Cap | None = None, nvml: Nvml | None = None, *,
                 overhead_bytes: int | None = None, runtime_total_bytes: int | None = None,
                 standby: bool = True) -> None:
        self.cap = cap if cap is not None else plan_cap(None, nvml, overhead_bytes,
                                                        runtime_total_bytes=runtime_total_bytes)
        self.parallel = 1
        self.nvml = nvml
        self.overhead_bytes = overhead_bytes
        self.runtime_total_bytes = runtime_total_bytes
        self.use_standby = standby
        self._standby: Standby | None = None

    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        if invalid_result(request) is not None:
            return run_trial(request)  # rejected before launch: keep the standby for the next
        cap = self.cap
        if (request.enforced_bytes != cap.enforced_bytes
                or request.device_count != cap.device_count):
            # Not this executor's budget or devices (a caller mixing them): its own cap.
            cap = plan_cap(request.enforced_bytes, self.nvml, self.overhead_bytes,
                           devices=request.device_count,
                           runtime_total_bytes=self.runtime_total_bytes)
        current, self._standby = self._standby, None
        phase: dict[str, str] = {}

        def events(event: Event) -> None:  # reader thread: record, never spawn here
            if isinstance(event, Phase):
                phase["now"] = event.phase
            if on_event:
                on_event(event)

        def tick() -> None:  # the main thread, between polls of the running trial
            now = phase.get("now")
            if self.use_standby and self._standby is None and now == "compiling":
                self._standby = Standby(cap)
            if self._standby is not None and now == "measuring":
                self._standby.pause()

        try:
            return run_trial(request, events, cap=cap, nvml=self.nvml, standby=current,
                             on_tick=tick)
        finally:
            if self._standby is not None:
                self._standby.resume()

    def run_batch(self, requests: Sequence[TrialRequest],
                  on_event: EventCallback | None = None) -> Iterator[TrialResult]:
        """One after another: one GPU, one honest peak, one honest steps/s."""
        for request in requests:
            yield self.run(request, on_event)

    def close(self) -> None:
        """Kill the standby, if any: call when no further trial will come."""
        if self._standby is not None:
            self._standby.close()
            self._standby = None
