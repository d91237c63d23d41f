"""Launch ONE trial in its own process, cap its memory, sample it from outside, classify.

The parent never imports JAX: it would grab the GPU and its own pool would sit in every
measurement. The child reports what only it can see (compile time, steps/s, JAX allocator
stats); the parent measures what the child cannot report once it is dead (exact peak RSS
from ``os.wait4``, NVML, the process tree) and decides ok / oom / timeout / crash / error.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from vramtune import machine
from vramtune.child import EVENT_PREFIX
from vramtune.errors import UserError
from vramtune.nvml import Nvml
from vramtune.profile import Profile
from vramtune.records import Status, TrialResult, utc_now
from vramtune.rules import nearest_valid, violations

DEFAULT_SAMPLE_INTERVAL_S = 0.1
DEFAULT_GPU_FRACTION = 0.95  # not JAX's 0.75: a probe without a cap would stop at 75% of the card
_OOM_PATTERNS = re.compile(
    r"RESOURCE_EXHAUSTED|Out of memory|out of memory|OutOfMemory|std::bad_alloc|"
    r"MemoryError|Cannot allocate memory|CUDA_ERROR_OUT_OF_MEMORY|"
    # Warp (Playground's default MJX implementation) and the CUDA libraries allocate
    # outside XLA and word it their own way.
    r"Failed to allocate \d+ bytes|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
    re.IGNORECASE)

# Not why a trial died: XLA's cache loader warns about tuning flags on every hit, and mjx
# reports the Warp import the child blocks on purpose for brax sources.
_NOISE = re.compile(r"cpu_aot_loader|^Failed to import (mujoco_)?warp: import of warp halted|^\s*$")

EventCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class TrialRequest:
    profile: Profile
    num_envs: int
    budget_bytes: int | None = None
    timeout_s: float | None = None
    compile_cache_dir: str | None = None
    sample_interval_s: float | None = DEFAULT_SAMPLE_INTERVAL_S  # None: no sampling


@dataclass(frozen=True)
class Cap:
    """How the budget is enforced, decided before launch."""

    env: dict[str, str]
    rlimit_data_bytes: int | None
    description: str | None
    notes: tuple[str, ...] = ()
    backend: str = "cpu"  # what the child will run on, known even if it never reports


class Executor(Protocol):
    """Runs trials; local subprocesses now, a cluster later."""

    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        ...


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vramtune"


def classify(child: dict[str, Any] | None, exit_code: int | None, timed_out: bool,
             output_tail: str) -> tuple[Status, str | None, str | None]:
    """(status, error type, error message) from what the trial left behind."""
    if timed_out:
        return Status.TIMEOUT, None, "killed at the time limit"
    if child and child.get("status") == "ok":
        return Status.OK, None, None
    if child and child.get("status") == "error":
        message = child.get("error_message") or ""
        status = Status.OOM if _OOM_PATTERNS.search(message) else Status.ERROR
        return status, child.get("error_type"), message
    # No result: the process died under us.
    tail = "\n".join(line for line in output_tail.splitlines()
                     if line.strip() and not _NOISE.search(line))
    if _OOM_PATTERNS.search(tail):
        return Status.OOM, "process abort", tail[-2000:] or None
    if exit_code is not None and exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return Status.CRASH, name, (f"killed by {name}" + (f"; last output:\n{tail[-1500:]}"
                                                          if tail else ""))
    return Status.CRASH, f"exit code {exit_code}", tail[-2000:] or "exited without a result"


class _Reader(threading.Thread):
    """Drains the child's output: events to the callback, the rest kept as a short tail."""

    def __init__(self, stream: Any, on_event: EventCallback | None) -> None:
        super().__init__(daemon=True, name="vramtune-reader")
        self.stream = stream
        self.on_event = on_event
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.last_event: dict[str, Any] = {}

    def run(self) -> None:
        for raw in iter(self.stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(EVENT_PREFIX):
                try:
                    event = json.loads(line[len(EVENT_PREFIX):])
                except json.JSONDecodeError:
                    continue
                self.last_event.update(event)
                if self.on_event:
                    self.on_event(dict(event))
            else:
                self.tail.append(line)


class _Sampler(threading.Thread):
    """Peak RSS of the process tree, and NVML memory, at a fixed interval."""

    def __init__(self, pid: int, interval_s: float, nvml: Nvml | None,
                 on_event: EventCallback | None, gpu_baseline: int | None) -> None:
        super().__init__(daemon=True, name="vramtune-sampler")
        self.pid, self.interval_s, self.nvml, self.on_event = pid, interval_s, nvml, on_event
        self.gpu_baseline = gpu_baseline
        self.stop_event = threading.Event()
        self.tree_rss_peak: int | None = None
        self.nvml_process_peak: int | None = None
        self.nvml_device_peak: int | None = None
        self.pid_matched = False
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
            if self.nvml is not None and self.nvml.available:
                self._sample_gpu({p.pid for p in procs})
            self.samples += 1
            if self.on_event:
                self.on_event({"sample": True, "host_rss_bytes": rss,
                               "gpu_process_bytes": self.nvml_process_peak})
            self.stop_event.wait(self.interval_s)

    def _sample_gpu(self, pids: set[int]) -> None:
        assert self.nvml is not None
        used = self.nvml.device_used_bytes()
        if used is not None:
            self.nvml_device_peak = max(used, self.nvml_device_peak or 0)
        per_pid = self.nvml.process_used_bytes() or {}
        ours = [v for pid, v in per_pid.items() if pid in pids and v is not None]
        if ours:
            self.pid_matched = True
            self.nvml_process_peak = max(sum(ours), self.nvml_process_peak or 0)


def gpu_fraction(budget_bytes: int | None, overhead_bytes: int | None, total_bytes: int) -> float:
    """JAX's pool limit is fraction x the card's total; the process also holds the CUDA
    context and libraries outside the pool, so they come off the budget first."""
    if budget_bytes is None:
        return DEFAULT_GPU_FRACTION
    fraction = (budget_bytes - (overhead_bytes or 0)) / total_bytes
    if fraction <= 0:
        raise UserError(f"budget {budget_bytes} B is below the measured per-process CUDA "
                        f"overhead ({overhead_bytes} B): nothing can run in it")
    return min(fraction, 1.0)


def plan_cap(budget_bytes: int | None, nvml: Nvml | None, overhead_bytes: int | None) -> Cap:
    """The environment and limits that enforce the budget on this machine."""
    base_env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    on_gpu = (nvml is not None and nvml.available and nvml.info is not None
              and machine.has_cuda_jax() and os.environ.get("JAX_PLATFORMS", "") in ("", "cuda",
                                                                                      "gpu"))
    if on_gpu:
        assert nvml is not None and nvml.info is not None
        var = machine.mem_fraction_var()
        notes: list[str] = []
        if budget_bytes is not None and overhead_bytes is None:
            notes.append("per-process CUDA overhead unknown: the cap assumes none")
        if budget_bytes is not None and budget_bytes > nvml.info.total_bytes:
            notes.append(f"budget exceeds the card ({nvml.info.total_bytes} B): capped at the card")
        fraction = gpu_fraction(budget_bytes, overhead_bytes, nvml.info.total_bytes)
        return Cap({**base_env, var: f"{fraction:.4f}"}, None, f"{var}={fraction:.4f}",
                   tuple(notes), backend="gpu")
    if (budget_bytes is not None and machine.has_cuda_jax()
            and os.environ.get("JAX_PLATFORMS", "") in ("", "cuda", "gpu")):
        # A CUDA jax with no NVML: the card's total is unknown, so no fraction can be set,
        # and RLIMIT_DATA would cap host memory while the trial runs on the GPU.
        raise UserError("--gpu-mem needs NVML to read the GPU's total memory, and it is "
                        f"unavailable ({nvml.notice if nvml else 'not initialised'}); set "
                        "JAX_PLATFORMS=cpu to measure host memory instead")
    if not machine.has_cuda_jax() and "JAX_PLATFORMS" not in os.environ:
        # No CUDA plugin: say so, or JAX probes other platforms and holds ~100 MB more.
        base_env["JAX_PLATFORMS"] = "cpu"
    if budget_bytes is None:
        return Cap(base_env, None, None)
    return Cap(base_env, budget_bytes, f"RLIMIT_DATA={budget_bytes}")


def invalid_result(request: TrialRequest, device_count: int = 1) -> TrialResult | None:
    """A record for a size Brax's rules reject, or None if it may run."""
    profile, n = request.profile, request.num_envs
    shape = profile.shape_for(n, device_count)
    if shape is not None:
        return None
    broken = violations(n, profile.batch_size, profile.num_minibatches, device_count)
    below, above = nearest_valid(profile.scaling, profile.base_shape, n, device_count)
    rule = broken[0].rule if broken else "no batch settings under this scaling policy"
    message = (f"num_envs={n} breaks {rule} under scaling {profile.scaling}"
               f" (batch_size={profile.batch_size}, num_minibatches={profile.num_minibatches}); "
               f"nearest valid num_envs: {below if below else 'none'} below, "
               f"{above if above else 'none'} above")
    return TrialResult(status=Status.INVALID, profile=profile.name, profile_hash=profile.hash,
                       num_envs=n, batch_size=profile.batch_size,
                       num_minibatches=profile.num_minibatches,
                       unroll_length=profile.unroll_length, budget_bytes=request.budget_bytes,
                       error_type="rule", error_message=message, versions=machine.versions(),
                       timestamp=utc_now())


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def child_env(cap: Cap) -> dict[str, str]:
    """The trial child's environment: ours, plus the cap, minus a stale fraction variable."""
    env = {**os.environ, **cap.env, "VRAMTUNE_WATCH_STDIN": "1", "PYTHONUNBUFFERED": "1"}
    for stale in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        if stale not in cap.env:
            env.pop(stale, None)
    return env


class Standby:
    """A trial child started ahead of time: capped, imports done, waiting for its spec.

    Spawned by the executor from the main thread while the previous trial compiles (never
    from a reader thread: PR_SET_PDEATHSIG fires when the *thread* that forked exits), and
    SIGSTOPped if it is still importing when that trial starts measuring. JAX backends are
    not initialised by imports, so it holds no device memory while it waits.
    """

    def __init__(self, cap: Cap, block_warp: bool) -> None:
        self.key = standby_key(cap, block_warp)
        env = {**child_env(cap), "VRAMTUNE_RLIMIT_DATA": str(cap.rlimit_data_bytes or ""),
               "VRAMTUNE_BLOCK_WARP": "1" if block_warp else "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", "vramtune.child", "--standby"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.reader = _Reader(self.proc.stdout, None)
        self.reader.start()
        self.paused = False

    def ready(self) -> bool:
        return self.reader.last_event.get("phase") == "ready"

    def usable(self) -> bool:
        try:
            return psutil.Process(self.proc.pid).status() not in (psutil.STATUS_ZOMBIE,
                                                                  psutil.STATUS_DEAD)
        except psutil.Error:
            return False

    def pause(self) -> None:
        if not self.ready() and not self.paused and self.usable():
            os.killpg(self.proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.paused = False

    def close(self) -> None:
        _kill_group(self.proc)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def standby_key(cap: Cap, block_warp: bool) -> tuple[Any, ...]:
    return (tuple(sorted(cap.env.items())), cap.rlimit_data_bytes, block_warp)


def wants_blocked_warp(profile: Profile) -> bool:
    return profile.env.startswith("brax:")


def run_trial(request: TrialRequest, on_event: EventCallback | None = None, *,
              nvml: Nvml | None = None, overhead_bytes: int | None = None,
              standby: Standby | None = None,
              on_tick: Callable[[], None] | None = None) -> TrialResult:
    """Run one trial to completion (or its limit) and return its record.

    With a matching ``standby`` the trial runs in it (its imports already done, so wall_s
    starts at the hand-over); ``on_tick`` is called from this thread while the trial runs.
    """
    invalid = invalid_result(request)
    if invalid is not None:
        return invalid
    profile = request.profile
    shape = profile.shape_for(request.num_envs)
    assert shape is not None
    cap = plan_cap(request.budget_bytes, nvml, overhead_bytes)
    timeout_s = request.timeout_s if request.timeout_s is not None else profile.timeout_s
    gpu_baseline = nvml.device_used_bytes() if nvml and nvml.available else None
    with tempfile.TemporaryDirectory(prefix="vramtune-trial-") as tmp:
        result_path = Path(tmp) / "result.json"
        spec = {"profile": profile.to_dict(), "num_envs": request.num_envs,
                "batch_size": shape.batch_size, "num_minibatches": shape.num_minibatches,
                "rlimit_data_bytes": cap.rlimit_data_bytes, "result_path": str(result_path),
                "compile_cache_dir": request.compile_cache_dir}
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        notes = list(cap.notes)
        if standby is not None and (standby.key != standby_key(cap, wants_blocked_warp(profile))
                                    or not standby.usable()):
            standby.close()
            standby = None
        started = time.perf_counter()
        if standby is not None:
            standby.resume()
            proc, reader = standby.proc, standby.reader
            reader.on_event = on_event
            assert proc.stdin is not None
            proc.stdin.write(f"{spec_path}\n".encode())
            proc.stdin.flush()
            notes.append("ran in a warm standby process: imports done before the trial began")
        else:
            proc = subprocess.Popen([sys.executable, "-m", "vramtune.child", str(spec_path)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=child_env(cap),
                                    start_new_session=True)
            reader = _Reader(proc.stdout, on_event)
            reader.start()
        if on_event:
            on_event({"pid": proc.pid, "num_envs": request.num_envs})
        sampler = None
        if request.sample_interval_s:
            sampler = _Sampler(proc.pid, request.sample_interval_s, nvml, on_event, gpu_baseline)
            sampler.start()
        timed_out = False
        exit_status = rusage = None
        try:
            deadline = started + timeout_s
            while True:
                pid, exit_status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    timed_out = True
                    _kill_group(proc)
                    _, exit_status, rusage = os.wait4(proc.pid, 0)
                    break
                if on_tick:
                    on_tick()
                time.sleep(0.02)
        except BaseException:
            # Ctrl-C, SIGTERM turned into an exception, anything: no trial outlives us.
            _kill_group(proc)
            try:
                os.wait4(proc.pid, 0)
            except ChildProcessError:
                pass
            raise
        finally:
            if sampler:
                sampler.stop_event.set()
        _kill_group(proc)  # anything the child left in its group
        proc.returncode = os.waitstatus_to_exitcode(exit_status) if exit_status is not None \
            else None
        wall_s = time.perf_counter() - started
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass
        reader.join(timeout=5)
        if sampler:
            sampler.join(timeout=5)
        child: dict[str, Any] | None = None
        if result_path.exists():
            try:
                child = json.loads(result_path.read_text())
            except (OSError, json.JSONDecodeError):
                child = None
    status, error_type, message = classify(child, proc.returncode, timed_out,
                                            "\n".join(reader.tail))
    child = child or {}
    if "compile_s" not in child and "compile_s" in reader.last_event:
        child["compile_s"] = reader.last_event["compile_s"]  # a timed-out trial's partial figure
    info = nvml.info if nvml else None
    nvml_note = None
    process_peak = sampler.nvml_process_peak if sampler else None
    device_peak = sampler.nvml_device_peak if sampler else None
    if nvml is not None and not nvml.available:
        nvml_note = nvml.notice
    elif sampler and nvml is not None and not sampler.pid_matched and device_peak is not None:
        if gpu_baseline is not None:
            process_peak = max(device_peak - gpu_baseline, 0) or None
        nvml_note = ("NVML reported no per-process figure for the trial (container PID "
                     "namespace?): process peak = device used minus the pre-trial baseline")
    if error_type is None and status is Status.TIMEOUT:
        error_type = "timeout"
    where = child.get("error_where")
    if status is Status.TIMEOUT:
        phase = reader.last_event.get("phase")
        message = f"killed after {timeout_s:g} s" + (f" while {phase}" if phase else "")
    peak_rss = rusage.ru_maxrss * 1024 if rusage is not None and rusage.ru_maxrss else None
    return TrialResult(
        status=status, profile=profile.name, profile_hash=profile.hash,
        num_envs=request.num_envs, batch_size=shape.batch_size,
        num_minibatches=shape.num_minibatches, unroll_length=profile.unroll_length,
        backend=child.get("backend") or cap.backend, device_kind=child.get("device_kind"),
        device_count=child.get("device_count"), budget_bytes=request.budget_bytes,
        cap=cap.description, compile_s=child.get("compile_s"),
        steps_per_s=child.get("steps_per_s"), steps_per_s_min=child.get("steps_per_s_min"),
        steps_per_s_max=child.get("steps_per_s_max"),
        measured_intervals=child.get("measured_intervals"),
        measure_window_s=child.get("measure_window_s"),
        jax_peak_bytes_in_use=child.get("jax_peak_bytes_in_use"),
        jax_peak_pool_bytes=child.get("jax_peak_pool_bytes"),
        jax_bytes_limit=child.get("jax_bytes_limit"),
        nvml_process_peak_bytes=process_peak, nvml_device_used_peak_bytes=device_peak,
        nvml_note=nvml_note, host_peak_rss_bytes=peak_rss,
        host_tree_rss_peak_bytes=sampler.tree_rss_peak if sampler else None,
        wall_s=wall_s, exit_code=proc.returncode, error_type=error_type,
        error_message=message, error_where=where, versions=machine.versions(),
        gpu_name=info.name if info else None, gpu_driver=info.driver if info else None,
        gpu_total_bytes=info.total_bytes if info else None, timestamp=utc_now(),
        notes=tuple(notes))


class LocalExecutor:
    """Trials as local subprocesses, one at a time (one GPU, one honest peak).

    With ``standby`` on, the next trial's process is started and imports while the current
    one compiles, and is stopped (SIGSTOP) if it is still importing when measuring starts,
    so it never competes with the steps/s being measured.
    """

    def __init__(self, nvml: Nvml | None = None, overhead_bytes: int | None = None, *,
                 standby: bool = True) -> None:
        self.nvml = nvml
        self.overhead_bytes = overhead_bytes
        self.use_standby = standby
        self._standby: Standby | None = None

    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        if invalid_result(request) is not None:
            return run_trial(request)  # rejected before launch: keep the standby for the next
        current, self._standby = self._standby, None
        phase: dict[str, str] = {}

        def events(event: dict[str, Any]) -> None:  # reader thread: record, never spawn here
            if "phase" in event:
                phase["now"] = event["phase"]
            if on_event:
                on_event(event)

        def tick() -> None:  # the main thread, between polls of the running trial
            now = phase.get("now")
            if self.use_standby and self._standby is None and now == "compiling":
                cap = plan_cap(request.budget_bytes, self.nvml, self.overhead_bytes)
                self._standby = Standby(cap, wants_blocked_warp(request.profile))
            if self._standby is not None and now == "measuring":
                self._standby.pause()

        try:
            return run_trial(request, events, nvml=self.nvml, overhead_bytes=self.overhead_bytes,
                             standby=current, on_tick=tick)
        finally:
            if self._standby is not None:
                self._standby.resume()

    def close(self) -> None:
        """Kill the standby, if any: call when no further trial will come."""
        if self._standby is not None:
            self._standby.close()
            self._standby = None


def with_notes(result: TrialResult, *notes: str) -> TrialResult:
    return dataclasses.replace(result, notes=(*result.notes, *notes))
