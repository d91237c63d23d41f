"""Launch ONE trial in its own process, cap its memory, sample it from outside, classify.

The parent never imports JAX: it would grab the GPU and its own pool would sit in every
measurement. The child reports what only it can see (compile time, steps/s, JAX allocator
stats); the parent measures what the child cannot report once it is dead (exact peak RSS
from ``os.wait4``, NVML, the process tree) and decides ok / oom / timeout / crash / error.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramtune import machine
from vramtune.measure.cap import CAP_TOLERANCE, Cap, plan_cap
from vramtune.measure.contacts import overflow_words
from vramtune.measure.nvml import GpuMonitor, Nvml
from vramtune.measure.oom import cap_not_applied, classify_text, diagnosed_death, split_noise
from vramtune.measure.process import (
    EventCallback,
    Reader,
    Sampler,
    Standby,
    child_command,
    child_env,
    kill_group,
    trial_dir,
)
from vramtune.measure.wire import PROOF_FIELDS, ChildReport, Launched, TrialSpec
from vramtune.records import Purpose, Status, TrialResult, utc_now
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile, profile_folder
from vramtune.workload.rules import nearest_valid, violations

DEFAULT_SAMPLE_INTERVAL_S = 0.1


@dataclass(frozen=True)
class TrialRequest:
    profile: Profile
    num_envs: int
    budget_bytes: int | None = None
    timeout_s: float | None = None
    compile_cache_dir: str | None = None
    # On CPU under a cap the cache is not used unless this is set (an explicit --cache): a
    # hit skips compilation and the host memory it holds, ~130-190 MiB of quick's peak (cold
    # 1008-1068 MiB vs warm 874-880 at 512 envs), which a user's first run pays.
    cache_under_cpu_cap: bool = False
    sample_interval_s: float | None = DEFAULT_SAMPLE_INTERVAL_S  # None: no sampling
    purpose: Purpose = Purpose.SEARCH
    training_steps: int | None = None  # train exactly this long (a confirming run)
    # with training_steps: end from this many steps on, once memory holds (child.py)
    min_training_steps: int | None = None
    cap_bytes: int | None = None  # enforce this instead of the budget (budget x (1 - headroom))
    device_count: int = 1  # devices brax pmaps over; the trial is pinned to exactly these
    alone: bool = False  # its steps/s count: the executor runs nothing beside it on the device
    # MJX-Warp buffer sizes ((naconmax, n), (njmax, n)) the sweep sized from measured demand;
    # the profile's env_kwargs win, and () leaves them to the workload's defaults
    warp_capacities: tuple[tuple[str, int], ...] = ()
    # GPU: bytes of the budget the cap leaves outside XLA's pool for MJX-Warp's own pool
    # (predicted by the sweep from the pools its earlier trials measured); None: none
    outside_room_bytes: int | None = None

    @property
    def enforced_bytes(self) -> int | None:
        return self.cap_bytes if self.cap_bytes is not None else self.budget_bytes


# Signals an allocation that failed under RLIMIT_DATA ends with when nothing checked it
# (a null pointer written to: SIGSEGV; std::terminate with no message: SIGABRT).
UNCHECKED_ALLOC_SIGNALS = frozenset({"SIGSEGV", "SIGABRT"})
# A death by one of them counts as the cap's only if the sampled data segment came this close
# to it. A choice, not a derivation: the sampler reads VmData every 100 ms, so the allocation
# that failed is not in it (at the edge one is 175-255 MB, 15-20% of a 1.17-1.26 GB cap), but
# a trial dying at the cap has repeated epochs of the same allocations, and its earlier ones
# peaked within a few % of the cap (1024 envs: 99.4%); a crash unrelated to memory this close
# to the cap is the rarer event. Deaths that say why (``oom.diagnosed_death``) never count.
NEAR_CAP_FRACTION = 0.9


def classify(child: ChildReport | None, exit_code: int | None, timed_out: bool,
             output_tail: str, *, rlimit_data_bytes: int | None = None,
             peak_data_bytes: int | None = None,
             last_data_bytes: int | None = None) -> tuple[Status, str | None, str | None]:
    """(status, error type, error message) from what the trial left behind.

    Out of memory only on a strong signal (``measure.oom``): the BFC allocator's "not a
    failure" warning is noise, a driver allocation the allocator retried is a hint, and
    cuBLAS failing to start under memory starvation is an OOM (jax-ml/jax#7118).
    A CUDA plugin that never started means the GPU cap was never applied: an error.
    Under RLIMIT_DATA, a silent SIGSEGV/SIGABRT (no diagnostic in its output) with the data
    segment's sampled peak at 90% of the cap or more is an OOM too, and its message gives
    that evidence and says it is inferred: XLA does not check every host allocation (a CI
    run saw 1024 envs die by SIGSEGV at 99.4% of the cap, beside 768 failing "Out of memory
    allocating 190812168 bytes"). ``last_data_bytes`` (the last sample) is shown beside it.
    """
    if timed_out:
        return Status.TIMEOUT, None, "killed at the time limit"
    if child is not None and child.status == "ok":
        if child.warp_overflow:
            return Status.OVERFLOW, "capacity overflow", overflow_words(
                child.warp_overflow, naconmax=child.warp_naconmax, njmax=child.warp_njmax,
                contacts=child.warp_contacts_max,
                contacts_per_world=child.warp_contacts_per_world_max,
                rows_per_world=child.warp_constraint_rows_per_world_max)
        return Status.OK, None, None
    if child is not None and child.status == "error":
        message = child.error_message or ""
        not_applied = cap_not_applied(message)
        if not_applied:
            return Status.ERROR, child.error_type, f"cap not applied: {not_applied[0][1]}"
        verdict = classify_text(message)
        status = Status.OOM if verdict.strength == "strong" else Status.ERROR
        return status, child.error_type, message
    # No result: the process died under us.
    kept, _ = split_noise(output_tail)
    tail = "\n".join(kept)
    not_applied = cap_not_applied(tail)
    verdict = classify_text(tail)
    if verdict.strength == "strong":
        return Status.OOM, "process abort", tail[-2000:] or None
    if not_applied:
        return Status.ERROR, "cap not applied", f"cap not applied: {not_applied[0][1]}"
    hint = (f" (after a recoverable allocation failure, a hint of memory pressure, not proof: "
            f"{verdict.line})" if verdict.strength == "weak" else "")
    if exit_code is not None and exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        last = f"; last output:\n{tail[-1500:]}" if tail else ""
        if (name in UNCHECKED_ALLOC_SIGNALS and rlimit_data_bytes and peak_data_bytes
                and peak_data_bytes >= NEAR_CAP_FRACTION * rlimit_data_bytes
                and not diagnosed_death(tail)):
            share = peak_data_bytes / rlimit_data_bytes
            at_death = (f", last sample {last_data_bytes / rlimit_data_bytes:.1%}"
                        if last_data_bytes is not None else "")
            return Status.OOM, f"{name} at the cap", (
                f"killed by {name} with no diagnostic after the data segment peaked at "
                f"{share:.1%} of RLIMIT_DATA (sampled peak {format_bytes(peak_data_bytes)} of "
                f"{format_bytes(rlimit_data_bytes)}{at_death}): taken for an allocation past "
                f"the cap that nothing checked, and counted as out of memory{hint}{last}")
        return Status.CRASH, name, f"killed by {name}{hint}{last}"
    return Status.CRASH, f"exit code {exit_code}", (hint.strip() + "\n" if hint else "") + \
        (tail[-2000:] or "exited without a result")


def invalid_result(request: TrialRequest, device_count: int | None = None) -> TrialResult | None:
    """A record for a size Brax's rules reject on the request's devices, or None if it may run."""
    profile, n = request.profile, request.num_envs
    device_count = request.device_count if device_count is None else device_count
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
                       unroll_length=profile.unroll_length, device_count=device_count,
                       budget_bytes=request.budget_bytes,
                       error_type="rule", error_message=message, versions=machine.versions(),
                       purpose=request.purpose,
                       timestamp=utc_now())


def _same_uuid(runtime: str | None, nvml_uuid: str) -> bool:
    """A runtime UUID (8-4-4-4-12, maybe GPU-/MIG- prefixed) names this NVML UUID."""
    if not runtime:
        return False
    return _bare_uuid(runtime) == _bare_uuid(nvml_uuid)


def _bare_uuid(uuid: str) -> str:
    return (uuid[4:] if uuid[:4].upper() in ("GPU-", "MIG-") else uuid).lower()


def _off_by(value: int, intended: int) -> bool:
    return abs(value - intended) > CAP_TOLERANCE * intended


def cap_mismatch(cap: Cap, proof: dict[str, Any], device_count: int) -> str | None:
    """Why the child did not run under ``cap`` on ``device_count`` devices, or None.

    ``proof`` is what the child reported of itself (wire.PROOF_FIELDS). Nothing reported
    (the child died before JAX started) proves nothing either way: None.
    """
    backend = proof.get("backend")
    if backend is None:
        return None
    ran_on = proof.get("device_count")
    if ran_on is not None and ran_on != device_count:
        return (f"the trial ran on {ran_on} {backend} devices, {device_count} asked for "
                f"(brax pmaps over every device it sees)")
    if cap.backend == "gpu":
        if backend != "gpu":
            return (f"{cap.description} was planned for the CUDA backend and the trial ran on "
                    f"{backend} (the CUDA plugin did not start?)")
        uuids = proof.get("device_uuids") or []
        for i, want in enumerate(cap.visible_uuids):
            got = uuids[i] if i < len(uuids) else None
            if got is not None and not _same_uuid(got, want):
                return f"device {i} is {got} in the trial, {want} was pinned and watched"
        if proof.get("fraction_in_force") != cap.description:
            return (f"the trial had {proof.get('fraction_in_force') or 'no fraction variable'}, "
                    f"{cap.description} was planned")
        if (proof.get("allocator_in_force") or "default").lower() not in ("bfc", "default"):
            return (f"XLA_PYTHON_CLIENT_ALLOCATOR={proof.get('allocator_in_force')} in the trial:"
                    f" no BFC pool, the fraction caps nothing")
        limits = proof.get("jax_bytes_limit_per_device") or []
        intended = cap.pool_limit_bytes
        for i in range(device_count):
            limit = limits[i] if i < len(limits) else None
            if limit is None:
                return f"device {i} reported no allocator limit (bytes_limit)"
            if intended is not None and _off_by(int(limit), intended):
                totals = proof.get("runtime_total_bytes_per_device") or []
                total = totals[i] if i < len(totals) else None
                return (f"bytes_limit {format_bytes(limit)} on device {i}, "
                        f"{format_bytes(intended)} intended ({cap.fraction} x "
                        f"{format_bytes(cap.total_bytes)} from {cap.total_source}; the CUDA "
                        f"runtime reports {format_bytes(total)})")
        return None
    if cap.backend == "cpu":
        if backend != "cpu":
            return f"a CPU trial was planned and it ran on {backend}"
        intended = cap.rlimit_data_bytes
        in_force = proof.get("rlimit_data_bytes")
        if intended is not None and (in_force is None or _off_by(int(in_force), intended)):
            return (f"RLIMIT_DATA in force is {format_bytes(in_force) if in_force else 'unlimited'}, "
                    f"{format_bytes(intended)} intended (a lower hard limit from the shell or "
                    f"the scheduler, ulimit -d, stays in force)")
    return None


def _proof_line(cap: Cap, proof: dict[str, Any]) -> str | None:
    """What the check found, in one line for the record and the panel."""
    if proof.get("backend") is None:
        return None
    if cap.backend == "gpu":
        limits = [v for v in proof.get("jax_bytes_limit_per_device") or [] if v is not None]
        if limits:
            return (f"bytes_limit {', '.join(format_bytes(v) for v in limits)} in force, "
                    f"{format_bytes(cap.pool_limit_bytes)} intended")
        return None
    if cap.rlimit_data_bytes is not None:
        in_force = proof.get("rlimit_data_bytes")
        return (f"RLIMIT_DATA {format_bytes(in_force) if in_force else 'unlimited'} in force, "
                f"{format_bytes(cap.rlimit_data_bytes)} intended")
    return None


def run_trial(request: TrialRequest, on_event: EventCallback | None = None, *,
              cap: Cap | None = None, nvml: Nvml | None = None,
              overhead_bytes: int | None = None,
              runtime_total_bytes: int | None = None,
              standby: Standby | None = None,
              on_tick: Callable[[], None] | None = None) -> TrialResult:
    """Run one trial to completion (or its limit) and return its record.

    With a matching ``standby`` the trial runs in it (its imports already done, so wall_s
    starts at the hand-over); ``on_tick`` is called from this thread while the trial runs.
    """
    invalid = invalid_result(request)
    if invalid is not None:
        return invalid
    if cap is None:  # a caller that planned none: the budget as given, on this machine
        cap = plan_cap(request.enforced_bytes, nvml, overhead_bytes,
                       devices=request.device_count, runtime_total_bytes=runtime_total_bytes,
                       outside_room_bytes=request.outside_room_bytes)
    timeout_s = request.timeout_s if request.timeout_s is not None else request.profile.timeout_s
    with trial_dir() as tmp:
        trial = RunningTrial.launch(request, cap, Path(tmp), on_event, nvml=nvml,
                                    standby=standby)
        trial.wait(timeout_s, on_tick)
        child = trial.report()
    return build_record(request, cap, trial, child, nvml, timeout_s)


def trial_spec(request: TrialRequest, cap: Cap, result_path: Path) -> TrialSpec:
    """What the child is asked to run: the request's shape under this cap."""
    profile = request.profile
    shape = profile.shape_for(request.num_envs, request.device_count)
    assert shape is not None, "invalid sizes never reach a child (invalid_result)"
    cache_dir = request.compile_cache_dir
    if cap.backend == "cpu" and cap.rlimit_data_bytes is not None \
            and not request.cache_under_cpu_cap:
        cache_dir = None  # the cold peak: what a first training run under this cap meets
    if cache_dir and cap.cache_tag is not None:
        cache_dir = str(Path(cache_dir) / cap.cache_tag)
    return TrialSpec(profile=profile.to_dict(), num_envs=request.num_envs,
                     batch_size=shape.batch_size, num_minibatches=shape.num_minibatches,
                     result_path=str(result_path), rlimit_data_bytes=cap.rlimit_data_bytes,
                     compile_cache_dir=cache_dir, training_steps=request.training_steps,
                     warp_capacities=dict(request.warp_capacities) or None,
                     min_training_steps=request.min_training_steps,
                     import_path=profile_folder(profile),
                     env_factory=(None if profile.factory is None
                                  else base64.b64encode(profile.factory).decode("ascii")))


@dataclass
class RunningTrial:
    """A launched trial: its process, the threads reading and sampling it, and what the
    wait saw (exit status, resource usage, a timeout or a cap found not in force)."""

    request: TrialRequest
    cap: Cap
    proc: subprocess.Popen[bytes]
    reader: Reader
    sampler: Sampler | None
    monitor: GpuMonitor | None
    result_path: Path
    started: float
    notes: list[str]
    exit_status: int | None = None
    rusage: Any = None
    timed_out: bool = False
    wall_s: float | None = None

    @classmethod
    def launch(cls, request: TrialRequest, cap: Cap, folder: Path,
               on_event: EventCallback | None, *, nvml: Nvml | None = None,
               standby: Standby | None = None) -> RunningTrial:
        """Write the spec, start the child (or hand the spec to a matching standby), start
        watching it."""
        spec = trial_spec(request, cap, folder / "result.json")
        spec_path = folder / "spec.json"
        spec.write(spec_path)
        monitor = None
        if nvml is not None and nvml.available and cap.backend == "gpu":
            monitor = GpuMonitor(nvml, cap.visible_uuids)
        notes = list(cap.notes)
        if standby is not None and (not standby.fits(cap) or not standby.usable()):
            standby.close()
            standby = None
        started = time.perf_counter()
        if standby is not None:
            standby.resume()
            proc, reader = standby.proc, standby.reader
            reader.on_event = on_event
            assert proc.stdin is not None
            try:
                proc.stdin.write(f"{spec_path}\n".encode())
                proc.stdin.flush()
            except OSError:  # it died after the check (a broken pipe): a fresh child instead
                reader.on_event = None  # its leftover output is not this trial's
                standby.close()
                standby = None
            else:
                notes.append("ran in a warm standby process: imports done before the trial "
                             "began")
        if standby is None:
            proc = subprocess.Popen([*child_command(), str(spec_path)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=child_env(cap),
                                    start_new_session=True)
            reader = Reader(proc.stdout, on_event)
            reader.start()
        if on_event:
            on_event(Launched(proc.pid, request.num_envs))
        sampler = None
        if request.sample_interval_s:
            sampler = Sampler(proc.pid, request.sample_interval_s, monitor, on_event)
            sampler.start()
        return cls(request, cap, proc, reader, sampler, monitor, Path(spec.result_path),
                   started, notes)

    def wait(self, timeout_s: float, on_tick: Callable[[], None] | None = None) -> None:
        """Until the child exits, runs past ``timeout_s``, or shows (once JAX is up) that it
        is not under its cap: a trial not under its cap is stopped then, not after training.
        Whatever ends the wait (Ctrl-C included), no trial outlives it."""
        proc, checked = self.proc, False
        try:
            deadline = self.started + timeout_s
            while True:
                pid, self.exit_status, self.rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                proof = self.reader.proof
                if not checked and proof is not None:
                    checked = True
                    if cap_mismatch(self.cap, proof.fields, self.request.device_count):
                        kill_group(proc)
                        _, self.exit_status, self.rusage = os.wait4(proc.pid, 0)
                        break
                if time.perf_counter() > deadline:
                    self.timed_out = True
                    kill_group(proc)
                    _, self.exit_status, self.rusage = os.wait4(proc.pid, 0)
                    break
                if on_tick:
                    on_tick()
                time.sleep(0.02)
        except BaseException:
            # Ctrl-C, SIGTERM turned into an exception, anything: no trial outlives us.
            kill_group(proc)
            try:
                os.wait4(proc.pid, 0)
            except ChildProcessError:
                pass
            raise
        finally:
            if self.sampler:
                self.sampler.stop_event.set()
        kill_group(proc)  # anything the child left in its group
        proc.returncode = (os.waitstatus_to_exitcode(self.exit_status)
                           if self.exit_status is not None else None)
        self.wall_s = time.perf_counter() - self.started
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass
        self.reader.join(timeout=5)
        if self.sampler:
            self.sampler.join(timeout=5)

    def report(self) -> ChildReport | None:
        """The child's report, or None when it wrote none (or died writing it)."""
        if not self.result_path.exists():
            return None
        try:
            return ChildReport.from_dict(json.loads(self.result_path.read_text()))
        except (OSError, json.JSONDecodeError, TypeError):
            return None


def build_record(request: TrialRequest, cap: Cap, trial: RunningTrial,
                 child: ChildReport | None, nvml: Nvml | None, timeout_s: float) -> TrialResult:
    """The trial's record: the child's figures, the parent's (peak RSS, NVML, the sampled
    data segment), the verdict (``classify``) and the cap check."""
    profile, reader, sampler, proc = request.profile, trial.reader, trial.sampler, trial.proc
    shape = profile.shape_for(request.num_envs, request.device_count)
    assert shape is not None
    notes = list(trial.notes)
    peak_data = _max_known(child.host_peak_data_bytes if child else None,
                           sampler.data_peak if sampler else None)
    status, error_type, message = classify(child, proc.returncode, trial.timed_out,
                                            "\n".join(reader.tail),
                                            rlimit_data_bytes=cap.rlimit_data_bytes,
                                            peak_data_bytes=peak_data,
                                            last_data_bytes=sampler.data_last if sampler
                                            else None)
    measured = child.record_fields() if child is not None else {}
    if child is None and reader.proof is not None:  # died or timed out after JAX started
        measured.update({k: v for k, v in reader.proof.fields.items() if k in PROOF_FIELDS})
    if measured.get("compile_s") is None and reader.compile_s is not None:
        measured["compile_s"] = reader.compile_s  # a timed-out trial's partial figure
    proof = {k: measured.get(k) for k in PROOF_FIELDS}
    mismatch = cap_mismatch(cap, proof, request.device_count)
    if mismatch is not None:  # never an uncapped figure under a capped label
        status, error_type, message = Status.ERROR, "cap not applied", f"cap not applied: {mismatch}"
    info = nvml.info if nvml else None
    nvml_note = None
    process_peak = device_peak = None
    process_per_device: list[int | None] | None = None
    if nvml is not None and not nvml.available:
        nvml_note = nvml.notice
    elif trial.monitor is not None and sampler is not None:
        peaks = trial.monitor.peaks()
        process_peak, device_peak = peaks.process_peak_max_bytes, peaks.device_used_peak_max_bytes
        process_per_device = peaks.process_peak_bytes
        nvml_note = "; ".join(peaks.notes) or None
    outside = _outside_pool(process_per_device, measured.get("jax_peak_pool_bytes_per_device"))
    if cap.backend == "gpu":
        notes.append("outside the pool (CUDA context, cuBLAS/cuDNN workspaces, kernels, CUDA "
                     "graphs, Warp's own allocator) nothing is capped: Warp allocations are not "
                     "capped by the fraction; the NVML process figure counts them")
    if proof.get("rlimit_data_bytes") is not None and cap.rlimit_data_bytes is None \
            and proof.get("backend") == "cpu":
        notes.append(f"RLIMIT_DATA {format_bytes(proof['rlimit_data_bytes'])} was in force "
                     f"though no budget was set (ulimit -d?)")
    steps = measured.get("steps_per_s")
    per_device_rate = steps / request.device_count if steps is not None else None
    if error_type is None and status is Status.TIMEOUT:
        error_type = "timeout"
    where = child.error_where if child is not None else None
    if status is Status.TIMEOUT:
        phase = reader.phase.phase if reader.phase is not None else None
        message = f"killed after {timeout_s:g} s" + (f" while {phase}" if phase else "")
    rusage = trial.rusage
    peak_rss = rusage.ru_maxrss * 1024 if rusage is not None and rusage.ru_maxrss else None
    return TrialResult(
        status=status, profile=profile.name, profile_hash=profile.hash,
        num_envs=request.num_envs, batch_size=shape.batch_size,
        num_minibatches=shape.num_minibatches, unroll_length=profile.unroll_length,
        budget_bytes=request.budget_bytes, cap=cap.description, cap_bytes=cap.enforced_bytes,
        purpose=request.purpose,
        **{**measured, "backend": measured.get("backend") or cap.backend},
        nvml_process_peak_bytes=process_peak, nvml_device_used_peak_bytes=device_peak,
        nvml_process_peak_bytes_per_device=process_per_device,
        outside_pool_bytes=max((v for v in outside or [] if v is not None), default=None),
        outside_pool_bytes_per_device=outside,
        pool_limit_intended_bytes=cap.pool_limit_bytes, cap_check=_proof_line(cap, proof),
        warp_pool_room_bytes=cap.outside_room_bytes,
        steps_per_s_per_device=per_device_rate,
        nvml_note=nvml_note, host_peak_rss_bytes=peak_rss,
        host_peak_data_bytes=peak_data,
        host_tree_rss_peak_bytes=sampler.tree_rss_peak if sampler else None,
        wall_s=trial.wall_s, exit_code=proc.returncode, error_type=error_type,
        error_message=message, error_where=where, versions=machine.versions(),
        gpu_name=info.name if info else None, gpu_driver=info.driver if info else None,
        gpu_total_bytes=info.total_bytes if info else None, timestamp=utc_now(),
        notes=tuple(notes))


def _outside_pool(nvml: list[int | None] | None, pool: list[int | None] | None
                  ) -> list[int | None] | None:
    """Per device: NVML's process figure minus the pool peak, what the fraction does not cap."""
    if not nvml or not pool:
        return None
    return [n - p if n is not None and p is not None else None for n, p in zip(nvml, pool,
                                                                              strict=False)]


def _max_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
