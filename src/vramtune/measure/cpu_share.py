"""The share of the machine a bench trial had while it measured: the CPU seconds its process
spent per wall second of its measuring window, read by the parent (psutil) beside it.

A trial's steps/s divided by that share (steps per CPU second) follows the training code and
not the runner: on a 2-core runner with a neighbour busy on one core the trial gets less CPU
and trains fewer steps per second, but about as many per CPU second. A separate reference
computation did not do this here: timed between trials it missed the load's bursts (seconds
long on this shared machine), and sampled beside a trial it competed with the trial itself, so
its speed depended on the size being measured (quick: 47-56 calls/s beside 64 envs, 74-81
beside 256 in one run). The share has a known limit: a runner with faster or slower cores
changes steps per CPU second too (a baseline is per machine kind), and spinning threads count
as CPU time. CPU backend only: a GPU trial's speed is the device's, not its CPU time's.
"""

from __future__ import annotations

import threading
import time

import psutil

REFERENCE = "the trial's CPU seconds per wall second over its measuring window"
INTERVAL_S = 0.1  # the window ends at the last reading before the trial exits


class CpuShare:
    """``start()`` (from the trial's event reader, when it starts measuring) finds the trial's
    process among this process's children and reads its CPU time every ``INTERVAL_S``;
    ``stop()`` (after the trial returned) gives CPU seconds per wall second over the window,
    None when it could not be read."""

    def __init__(self, exclude: frozenset[int] = frozenset()) -> None:
        self.exclude = exclude
        self._readings: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        children = [p for p in psutil.Process().children() if p.pid not in self.exclude]
        if not children:
            return
        proc = max(children, key=lambda p: p.create_time())  # the trial just started
        self._stop.clear()
        self._readings = []
        self._thread = threading.Thread(target=self._sample, args=(proc,), daemon=True,
                                        name="vramtune-cpu-share")
        self._thread.start()

    def _sample(self, proc: psutil.Process) -> None:
        while not self._stop.is_set():
            try:
                times = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                return
            self._readings.append((time.perf_counter(), times.user + times.system))
            self._stop.wait(INTERVAL_S)

    def stop(self) -> float | None:
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        self._stop.set()
        thread.join(timeout=5)
        if len(self._readings) < 2:
            return None
        (t0, c0), (t1, c1) = self._readings[0], self._readings[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 and c1 > c0 else None
