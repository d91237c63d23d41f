"""Process plumbing for trial children: their environment, the output reader, the outside
sampler, killing a process group, and the warm standby that imports the next trial early.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from typing import Any

import psutil

from vramtune.measure.cap import Cap
from vramtune.measure.nvml import GpuMonitor
from vramtune.measure.wire import EVENT_PREFIX, CapProof, Event, Sample, TrialPhase, decode_event

EventCallback = Callable[[Event], None]


TAIL_LINE_CHARS = 4096  # a tail line keeps its first and last this many characters


class _Delivers:
    """Hands events to the caller's callback from a capture thread. A callback that raises
    (a notebook's, a progress display's) is dropped with a warning: the thread that calls it
    also drains the child's output or samples its memory, and must outlive it, or the record
    loses its tail (an out-of-memory read as a crash), its peaks, or hangs on a full pipe."""

    on_event: EventCallback | None

    def deliver(self, event: Event) -> None:
        if self.on_event is not None and not call_or_drop(self.on_event, event):
            self.on_event = None


def call_or_drop(callback: EventCallback, event: Event) -> bool:
    """Hand ``event`` to a caller's callback; False (said once, as a warning) where it
    raised, and the caller should drop it. Never raises, not even under ``-W error``: it runs
    on the threads that capture a trial."""
    try:
        callback(event)
        return True
    except Exception as error:  # any error of the caller's code
        try:
            warnings.warn(f"vramtune: the event callback raised {type(error).__name__}: "
                          f"{error}; it gets no more events from this trial, whose "
                          f"measurement goes on", RuntimeWarning, stacklevel=3)
        except Exception:  # a warnings filter set to error: the thread must still live
            pass
        return False


class Reader(_Delivers, threading.Thread):
    """Drains the child's output: events to the callback, the rest kept as a short tail.

    Tail lines are bounded (head and end kept): the classifiers scan every tail line with
    regexes, and one line of megabytes would make that scan take minutes."""

    def __init__(self, stream: Any, on_event: EventCallback | None) -> None:
        super().__init__(daemon=True, name="vramtune-reader")
        self.stream = stream
        self.on_event = on_event
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.proof: CapProof | None = None  # the child's view of its cap, once JAX is up
        self.phase: TrialPhase | None = None  # the last phase the child reported
        self.compile_s: float | None = None  # the last compile time a phase reported

    def run(self) -> None:
        for raw in iter(self.stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            decoded = decode_event(line)
            if decoded is None:
                if not line.startswith(EVENT_PREFIX):
                    self.tail.append(_bounded(line))
                continue
            _, event = decoded
            if isinstance(event, CapProof):
                self.proof = event
            elif isinstance(event, TrialPhase):
                self.phase = event
                if event.compile_s is not None:
                    self.compile_s = event.compile_s
            self.deliver(event)


def _bounded(line: str) -> str:
    if len(line) <= 2 * TAIL_LINE_CHARS:
        return line
    cut = len(line) - 2 * TAIL_LINE_CHARS
    return f"{line[:TAIL_LINE_CHARS]} [... {cut} characters ...] {line[-TAIL_LINE_CHARS:]}"


def vm_data_bytes(pid: int) -> int | None:
    """A process's data segment (VmData), or None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Sampler(_Delivers, threading.Thread):
    """Peak RSS of the process tree, and NVML memory, at a fixed interval."""

    def __init__(self, pid: int, interval_s: float, gpu: GpuMonitor | None,
                 on_event: EventCallback | None) -> None:
        super().__init__(daemon=True, name="vramtune-sampler")
        self.pid, self.interval_s, self.gpu, self.on_event = pid, interval_s, gpu, on_event
        self.stop_event = threading.Event()
        self.tree_rss_peak: int | None = None
        self.data_peak: int | None = None  # the trial process's VmData: what RLIMIT_DATA counts
        self.data_last: int | None = None  # its last sample: the level when the process died
        self.samples = 0

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        procs: list[psutil.Process] = [root]
        tick = 0
        while not self.stop_event.is_set():
            if tick % 10 == 0:  # finding children scans all of /proc: once a second is enough
                try:
                    procs = [root, *root.children(recursive=True)]
                except psutil.Error:
                    break
            tick += 1
            rss = 0
            for proc in procs:
                try:
                    rss += proc.memory_info().rss
                except psutil.Error:
                    if proc is root:
                        self.stop_event.set()
            if self.stop_event.is_set():
                break
            self.tree_rss_peak = max(rss, self.tree_rss_peak or 0)
            data = vm_data_bytes(self.pid)
            if data is not None:
                self.data_peak = max(data, self.data_peak or 0)
                self.data_last = data
            gpu_now = self.gpu.sample({p.pid for p in procs}) if self.gpu is not None else None
            self.samples += 1
            self.deliver(Sample(rss, gpu_now))
            self.stop_event.wait(self.interval_s)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


TRIAL_DIR_PREFIX = "vramtune-trial-"
_TRIAL_DIR = re.compile(re.escape(TRIAL_DIR_PREFIX) + r"(\d+)-")


def trial_dir() -> tempfile.TemporaryDirectory[str]:
    """The trial's temporary folder, named after this process so a later trial can remove it
    if this process was killed (SIGKILL runs no cleanup): ``vramtune-trial-<pid>-<random>``."""
    remove_stale_trial_dirs()
    return tempfile.TemporaryDirectory(prefix=f"{TRIAL_DIR_PREFIX}{os.getpid()}-")


def remove_stale_trial_dirs() -> None:
    """Remove the trial folders of vramtune processes that no longer exist."""
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        match = _TRIAL_DIR.match(name)
        if match is None or int(match[1]) == os.getpid():
            continue
        try:
            os.kill(int(match[1]), 0)
            continue  # its owner still runs
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue  # another user's process, or not a PID
        path = os.path.join(root, name)
        try:
            if os.stat(path).st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def child_command() -> list[str]:
    """``python -P -m vramtune.measure.child``: -P keeps the current directory off the import
    path (a ``jax.py`` there must not run in place of JAX); PYTHONPATH still applies."""
    return [sys.executable, "-P", "-m", "vramtune.measure.child"]


def child_env(cap: Cap) -> dict[str, str]:
    """The trial child's environment: ours, plus the cap, minus what the cap unsets (the
    other fraction variable: jaxlib 0.9.2 refuses both)."""
    env = {**os.environ, **cap.env, "VRAMTUNE_WATCH_STDIN": "1", "PYTHONUNBUFFERED": "1"}
    for name in cap.unset:
        if name not in cap.env:
            env.pop(name, None)
    return env


class Standby:
    """A trial child started ahead of time: capped, imports done, waiting for its spec.

    Spawned by the executor from the main thread while the previous trial compiles (never
    from a reader thread: PR_SET_PDEATHSIG fires when the *thread* that forked exits), and
    SIGSTOPped if it is still importing when that trial starts measuring. JAX backends are
    not initialised by imports, so it holds no device memory while it waits.
    """

    def __init__(self, cap: Cap) -> None:
        self.key = standby_key(cap)
        self.rlimit_data_bytes = cap.rlimit_data_bytes
        env = {**child_env(cap), "VRAMTUNE_RLIMIT_DATA": str(cap.rlimit_data_bytes or "")}
        self.proc = subprocess.Popen([*child_command(), "--standby"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.reader = Reader(self.proc.stdout, None)
        self.reader.start()
        self.paused = False

    def ready(self) -> bool:
        return self.reader.phase is not None and self.reader.phase.phase == "ready"

    def fits(self, cap: Cap) -> bool:
        return standby_fits(self.key, self.rlimit_data_bytes, cap)

    def usable(self) -> bool:
        try:
            return psutil.Process(self.proc.pid).status() not in (psutil.STATUS_ZOMBIE,
                                                                  psutil.STATUS_DEAD)
        except psutil.Error:
            return False

    def pause(self) -> None:
        if not self.ready() and not self.paused and self.usable():
            try:
                os.killpg(self.proc.pid, signal.SIGSTOP)
            except ProcessLookupError:  # gone since the check: launch then starts a fresh one
                return
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.paused = False

    def close(self) -> None:
        kill_group(self.proc)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def standby_fits(key: tuple[Any, ...], rlimit_data_bytes: int | None, cap: Cap) -> bool:
    """Can a standby started with ``key`` under ``rlimit_data_bytes`` (None: no limit) run a
    trial under ``cap``: the same environment, and a data segment limit no higher than its
    own. The child lowers its limit to the spec's once the spec arrives (a limit can always
    be lowered, never raised past the hard limit the standby set). So a proof run, held below
    the line, runs in the standby the search trial before it left, instead of a fresh
    process (2-3 s of imports); a trial with no limit needs a standby with none."""
    if key != standby_key(cap):
        return False
    if rlimit_data_bytes is None:
        return True
    return cap.rlimit_data_bytes is not None and cap.rlimit_data_bytes <= rlimit_data_bytes


def standby_key(cap: Cap) -> tuple[Any, ...]:
    """What a standby's process was started with that a trial cannot change: its environment.
    Its RLIMIT_DATA is the spec's to lower (``Standby.fits``)."""
    return (tuple(sorted(cap.env.items())),)
