"""Launch ONE trial in its own process, cap its memory, sample it from outside, classify.

The parent never imports JAX: it would grab the GPU and its own pool would sit in every
measurement. The child reports what only it can see (compile time, steps/s, JAX allocator
stats); the parent measures what the child cannot report once it is dead (exact peak RSS
from ``os.wait4``, NVML, the process tree) and decides ok / oom / timeout / crash / error.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vramtune import machine
from vramtune.measure.cap import Cap, plan_cap
from vramtune.measure.nvml import Nvml
from vramtune.measure.process import (
    EventCallback,
    Standby,
    _kill_group,
    _Reader,
    _Sampler,
    child_command,
    child_env,
    standby_key,
    trial_dir,
)
from vramtune.measure.wire import ChildReport, Launched
from vramtune.records import Purpose, Status, TrialResult, utc_now
from vramtune.workload.profile import Profile, profile_folder
from vramtune.workload.rules import nearest_valid, violations

DEFAULT_SAMPLE_INTERVAL_S = 0.1
_OOM_PATTERNS = re.compile(
    r"RESOURCE_EXHAUSTED|Out of memory|out of memory|OutOfMemory|std::bad_alloc|"
    r"MemoryError|Cannot allocate memory|CUDA_ERROR_OUT_OF_MEMORY|"
    # Warp (Playground's default MJX implementation) and the CUDA libraries allocate
    # outside XLA and word it their own way.
    r"Failed to allocate \d+ bytes|CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|"
    # OpenBLAS and the dynamic loader under RLIMIT_DATA, before Python can raise MemoryError
    r"Memory allocation still failed|failed to map segment from shared object",
    re.IGNORECASE)

# Not why a trial died: XLA's cache loader warns about tuning flags on every hit, and mjx
# reports the Warp import the child blocks on purpose for brax sources.
_NOISE = re.compile(r"cpu_aot_loader|^Failed to import (mujoco_)?warp: import of warp halted|^\s*$")


@dataclass(frozen=True)
class TrialRequest:
    profile: Profile
    num_envs: int
    budget_bytes: int | None = None
    timeout_s: float | None = None
    compile_cache_dir: str | None = None
    sample_interval_s: float | None = DEFAULT_SAMPLE_INTERVAL_S  # None: no sampling
    purpose: Purpose = Purpose.SEARCH
    training_steps: int | None = None  # train exactly this long (a confirming run)
    cap_bytes: int | None = None  # enforce this instead of the budget (budget x (1 - headroom))

    @property
    def enforced_bytes(self) -> int | None:
        return self.cap_bytes if self.cap_bytes is not None else self.budget_bytes


def classify(child: ChildReport | None, exit_code: int | None, timed_out: bool,
             output_tail: str) -> tuple[Status, str | None, str | None]:
    """(status, error type, error message) from what the trial left behind."""
    if timed_out:
        return Status.TIMEOUT, None, "killed at the time limit"
    if child is not None and child.status == "ok":
        return Status.OK, None, None
    if child is not None and child.status == "error":
        message = child.error_message or ""
        status = Status.OOM if _OOM_PATTERNS.search(message) else Status.ERROR
        return status, child.error_type, message
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


def run_trial(request: TrialRequest, on_event: EventCallback | None = None, *,
              cap: Cap | None = None, nvml: Nvml | None = None,
              overhead_bytes: int | None = None,
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
    if cap is None:  # a lone trial; a sweep's executor decides the cap once for all
        cap = plan_cap(request.enforced_bytes, nvml, overhead_bytes)
    timeout_s = request.timeout_s if request.timeout_s is not None else profile.timeout_s
    gpu_baseline = nvml.device_used_bytes() if nvml and nvml.available else None
    with trial_dir() as tmp:
        result_path = Path(tmp) / "result.json"
        spec = {"profile": profile.to_dict(), "num_envs": request.num_envs,
                "batch_size": shape.batch_size, "num_minibatches": shape.num_minibatches,
                "rlimit_data_bytes": cap.rlimit_data_bytes, "result_path": str(result_path),
                "compile_cache_dir": request.compile_cache_dir,
                "training_steps": request.training_steps,
                "import_path": profile_folder(profile)}
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        notes = list(cap.notes)
        if standby is not None and (standby.key != standby_key(cap)
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
            proc = subprocess.Popen([*child_command(), str(spec_path)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=child_env(cap),
                                    start_new_session=True)
            reader = _Reader(proc.stdout, on_event)
            reader.start()
        if on_event:
            on_event(Launched(proc.pid, request.num_envs))
        sampler = None
        if request.sample_interval_s:
            sampler = _Sampler(proc.pid, request.sample_interval_s, nvml, on_event)
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
        child: ChildReport | None = None
        if result_path.exists():
            try:
                child = ChildReport.from_dict(json.loads(result_path.read_text()))
            except (OSError, json.JSONDecodeError, TypeError):
                child = None
    status, error_type, message = classify(child, proc.returncode, timed_out,
                                            "\n".join(reader.tail))
    measured = child.record_fields() if child is not None else {}
    if measured.get("compile_s") is None and "compile_s" in reader.last_event:
        measured["compile_s"] = reader.last_event["compile_s"]  # a timed-out trial's partial figure
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
    where = child.error_where if child is not None else None
    if status is Status.TIMEOUT:
        phase = reader.last_event.get("phase")
        message = f"killed after {timeout_s:g} s" + (f" while {phase}" if phase else "")
    peak_rss = rusage.ru_maxrss * 1024 if rusage is not None and rusage.ru_maxrss else None
    return TrialResult(
        status=status, profile=profile.name, profile_hash=profile.hash,
        num_envs=request.num_envs, batch_size=shape.batch_size,
        num_minibatches=shape.num_minibatches, unroll_length=profile.unroll_length,
        budget_bytes=request.budget_bytes, cap=cap.description, cap_bytes=cap.enforced_bytes,
        purpose=request.purpose,
        **{**measured, "backend": measured.get("backend") or cap.backend},
        nvml_process_peak_bytes=process_peak, nvml_device_used_peak_bytes=device_peak,
        nvml_note=nvml_note, host_peak_rss_bytes=peak_rss,
        host_peak_data_bytes=_max_known(child.host_peak_data_bytes if child else None,
                                        sampler.data_peak if sampler else None),
        host_tree_rss_peak_bytes=sampler.tree_rss_peak if sampler else None,
        wall_s=wall_s, exit_code=proc.returncode, error_type=error_type,
        error_message=message, error_where=where, versions=machine.versions(),
        gpu_name=info.name if info else None, gpu_driver=info.driver if info else None,
        gpu_total_bytes=info.total_bytes if info else None, timestamp=utc_now(),
        notes=tuple(notes))


def _max_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
