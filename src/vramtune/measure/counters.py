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

Why inherited counters, opened early: XLA runs the training on its own pools of threads,
created when the backend starts. A counter opened with ``inherit`` on a thread counts every
thread created after it from that thread or its counted descendants, and a read sums them,
live or ended. So ``ThreadInstructions()`` is made before JAX is imported, with one counter on
each thread alive then: nothing is missed and nothing counted twice. (cirron, the PyPI package
that counts instructions, counts around a block of code in the calling thread only.)

What the count does not see: a slowdown with the same instructions (cache misses, memory
bandwidth, a slower core), and kernel time (``exclude_kernel``: what ``perf_event_paranoid``
2 allows unprivileged). What it sees beside the work: threads spinning while they wait,
which load changes (above). Instruction counts depend on the instruction set XLA compiled for,
so they compare only between machines with the same CPU features (``machine.cpu_features``).
Where the kernel, the hypervisor or a container's seccomp filter refuses the counter
(``perf_event_paranoid`` above 2, as Debian's and Ubuntu's defaults are; no PMU in the VM;
Docker's default profile), ``available`` is False and every read is None. A count the kernel
had to multiplex (the PMU shared with other events) is not extrapolated: it reads None.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# perf_event_open's syscall number per architecture (asm/unistd.h); little-endian ones only:
# the flag bits below are laid out for them
_SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "riscv64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_COUNT_HW_INSTRUCTIONS = 1
_INHERIT = 1 << 1
_EXCLUDE_KERNEL = 1 << 5
_EXCLUDE_HV = 1 << 6
# read_format: value, time enabled, time running (running < enabled: multiplexed)
_READ_FORMAT = 1 | 2
_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7; the kernel accepts any size it knows
_FD_CLOEXEC = 8  # PERF_FLAG_FD_CLOEXEC: a process the trial starts does not inherit the fds


class _Attr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64), ("sample_period", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64), ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64), ("rest", ctypes.c_uint8 * (_ATTR_SIZE - 48))]


class ThreadInstructions:
    """``read()``: user-space instructions retired by this process's threads since this
    object was made (make it before the threads you want counted start), None when the
    counter is refused or a read fails. ``close()`` releases the counters."""

    def __init__(self) -> None:
        self._fds: list[int] = []
        number = _SYSCALL.get(platform.machine())
        try:
            syscall = ctypes.CDLL(None, use_errno=True).syscall if number is not None else None
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except (OSError, ValueError):
            syscall, tids = None, []
        if syscall is not None:
            attr = _Attr(type=_PERF_TYPE_HARDWARE, size=_ATTR_SIZE,
                         config=_PERF_COUNT_HW_INSTRUCTIONS, read_format=_READ_FORMAT,
                         flags=_INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV)
            for tid in tids:
                fd = syscall(number, ctypes.byref(attr), tid, -1, -1, _FD_CLOEXEC)
                if fd < 0:  # one refused: the count would miss that thread's work
                    self.close()
                    break
                self._fds.append(fd)
        self.available = bool(self._fds)

    def read(self) -> int | None:
        total = 0
        for fd in self._fds:
            try:
                value, enabled, running = struct.unpack("qqq", os.read(fd, 24))
            except (OSError, struct.error, MemoryError):  # MemoryError: at the trial's cap
                return None
            if running < enabled:  # multiplexed: the count is a part of the time
                return None
            total += value  # enabled 0: that thread has not run since the counter opened
        return total if self._fds else None

    def close(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        self.available = False


def per_step(counts: list[int | None], steps: list[float]) -> float | None:
    """Median instructions per step over consecutive reads: ``counts[i]`` taken after
    ``steps[i]`` steps in all. The median, so that one read disturbed by something else in
    the process does not move the figure; None when no two reads bracket a step's work."""
    ratios = []
    for i in range(1, len(counts)):
        c0, c1 = counts[i - 1], counts[i]
        done = steps[i] - steps[i - 1]
        if c0 is None or c1 is None or done <= 0 or c1 <= c0:
            continue
        ratios.append((c1 - c0) / done)
    if not ratios:
        return None
    ratios.sort()
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
