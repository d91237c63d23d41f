"""Instructions retired by every thread of this process, from the CPU's own counter
(Linux ``perf_event_open``, user space only). Standard library only: the trial child
imports it before JAX.

What the count is for: the work a training step costs, with the machine divided out. A
neighbour on the cores, a slower day or a busier hypervisor change how long an instruction
takes, not how many the training retires: on the 2-core machine, brax PPO on ``quick`` at
64 envs (evaluation off) counted 463-467 k instructions per env step idle and beside a busy
loop (0.8% apart) while its steps/s moved by a third; a step doing ~10% more arithmetic
counted +12%. Spinning counts too: XLA's pool threads spin while they wait for work, and spin
less when a neighbour takes their cores, so a vramtune trial of ``quick`` (evaluation on:
many small dispatches) counted 4.7% fewer at 64 envs beside a busy loop, 1.9% at 256.

Why per thread: XLA runs the training on its own pool of threads, created when the backend
starts. A counter opened with ``inherit`` adds a thread's count to its parent's only when the
thread exits, so a live pool's work would be missing; one counter per thread, opened when the
thread is first seen, reads it while it runs. (cirron, the PyPI package that counts
instructions, counts around a block of code in the calling thread only.)

What the count does not see: a slowdown with the same instructions (cache misses, memory
bandwidth), and kernel time (``exclude_kernel``: what ``perf_event_paranoid`` 2 allows
unprivileged). Instruction counts depend on the instruction set XLA compiled for, so they
compare only between machines with the same CPU features (``machine.cpu_features``).
Where the kernel, the hypervisor or a container's seccomp filter refuses the counter
(``perf_event_paranoid`` 3, no PMU, Docker's default profile), ``available`` is False and
every read is None.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# perf_event_open's syscall number per architecture (asm/unistd.h)
_SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_COUNT_HW_INSTRUCTIONS = 1
_EXCLUDE_KERNEL = 1 << 5
_EXCLUDE_HV = 1 << 6
# read_format: value, time enabled, time running (to scale a multiplexed counter)
_READ_FORMAT = 1 | 2
_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7; the kernel accepts any size it knows


class _Attr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64), ("sample_period", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64), ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64), ("rest", ctypes.c_uint8 * (_ATTR_SIZE - 48))]


class ThreadInstructions:
    """``read()``: user-space instructions retired by this process's threads since each was
    first seen by a read (the first read opens the counters and returns their start), None
    when no counter could be opened. ``close()`` releases the counters."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}
        self._gone = 0  # what threads that ended had counted by their last read
        self._last: dict[int, int] = {}
        self.multiplexed = False  # some count was scaled: the PMU was shared at some point
        number = _SYSCALL.get(platform.machine())
        self._syscall = None
        if number is not None and os.path.isdir("/proc/self/task"):
            try:
                self._syscall = ctypes.CDLL(None, use_errno=True).syscall
            except OSError:
                self._syscall = None
        self._number = number
        self.available = self._syscall is not None and self._open(os.getpid()) is not None

    def _open(self, tid: int) -> int | None:
        if self._syscall is None:
            return None
        if tid in self._fds:
            return self._fds[tid]
        attr = _Attr(type=_PERF_TYPE_HARDWARE, size=_ATTR_SIZE,
                     config=_PERF_COUNT_HW_INSTRUCTIONS, read_format=_READ_FORMAT,
                     flags=_EXCLUDE_KERNEL | _EXCLUDE_HV)
        fd = self._syscall(self._number, ctypes.byref(attr), tid, -1, -1, 0)
        if fd < 0:
            return None
        self._fds[tid] = fd
        return fd

    def _value(self, fd: int) -> int | None:
        try:
            value, enabled, running = struct.unpack("qqq", os.read(fd, 24))
        except (OSError, struct.error):
            return None
        if 0 < running < enabled:
            self.multiplexed = True
            return int(value * enabled / running)
        return value

    def read(self) -> int | None:
        if not self.available:
            return None
        try:
            tids = {int(t) for t in os.listdir("/proc/self/task")}
        except (OSError, ValueError):
            return None
        for tid in tids:
            self._open(tid)
        for tid in [t for t in self._fds if t not in tids]:
            # ended: its counter still reads its final count
            fd = self._fds.pop(tid)
            final = self._value(fd)
            self._gone += final if final is not None else self._last.get(tid, 0)
            self._last.pop(tid, None)
            os.close(fd)
        for tid, fd in self._fds.items():
            value = self._value(fd)
            if value is not None:
                self._last[tid] = value
        return self._gone + sum(self._last.values())

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()
        self.available = False


def per_step(counts: list[int | None], steps: list[float]) -> float | None:
    """Median instructions per step over consecutive reads: ``counts[i]`` taken after
    ``steps[i]`` steps in all. The median, not the window's total, so that a read where a
    new thread was first seen (its count starts there) does not move the figure."""
    ratios = []
    for i in range(1, len(counts)):
        c0, c1 = counts[i - 1], counts[i]
        done = steps[i] - steps[i - 1]
        if c0 is None or c1 is None or done <= 0 or c1 < c0:
            continue
        ratios.append((c1 - c0) / done)
    if not ratios:
        return None
    ratios.sort()
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
