"""A short JAX process that says what it got: ``python -m vramtune.measure.probe ARGS_JSON``.

Used for the per-process CUDA overhead (NVML watches it while it waits), for the CUDA
runtime's device totals (the denominator XLA multiplies the fraction by), and by ``vramtune
doctor`` as the capped probe that checks ``bytes_limit`` (GPU) or RLIMIT_DATA (CPU). The
parent side (``run_probe``) imports no JAX; the child side imports it only in ``main``.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from vramtune.measure.nvml import GpuMonitor, Nvml

PROBE_PREFIX = "@@vramtune-probe "
ENV_KEYS = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "XLA_CLIENT_MEM_FRACTION",
            "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
            "XLA_PYTHON_CLIENT_PREALLOCATE", "JAX_NUM_CPU_DEVICES")


@dataclass(frozen=True)
class ProbeDevice:
    """One device as the probe's JAX and CUDA runtime see it; None where not measured."""

    platform: str
    kind: str
    id: int
    bytes_limit: int | None = None  # the allocator's limit (GPU); None on CPU
    uuid: str | None = None  # the CUDA runtime's (cuDeviceGetUuid_v2), GPU-/MIG- prefixed
    runtime_total_bytes: int | None = None  # cuMemGetInfo's total, else cuDeviceTotalMem_v2


@dataclass(frozen=True)
class ProbeReport:
    """What a probe process reported, plus what the parent saw of it."""

    started: bool  # the child printed its report
    backend: str | None = None
    devices: tuple[ProbeDevice, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # ENV_KEYS as the child had them
    rlimit_data_bytes: int | None = None  # the child's soft RLIMIT_DATA; None: unlimited
    allocation: str | None = None  # "ok", "oom: ..." or "error: ..." (when asked to allocate)
    process_peak_bytes: int | None = None  # NVML, while the probe waited
    nvml_notes: tuple[str, ...] = ()
    error: str | None = None
    stderr_tail: str = ""
    wall_s: float | None = None


def _message(exc: BaseException) -> str:
    """The exception's text, or where it was raised when it has none (jax's own bare
    ``assert _default_backend is not None`` when JAX_PLATFORMS names a backend it lacks)."""
    text = str(exc).strip()
    if text:
        return text
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "(no message)"
    last = frames[-1]
    return f"(no message) at {os.path.basename(last.filename)}:{last.lineno} in {last.name}"


def run_probe(env: dict[str, str], *, nvml: Nvml | None = None,
              uuids: tuple[str, ...] | None = None, rlimit_data_bytes: int | None = None,
              allocate_bytes: int | None = None, hold_s: float = 1.0,
              timeout_s: float = 120.0) -> ProbeReport:
    """Start a probe with exactly ``env`` (the caller builds it), read its report, let NVML
    sample it for ``hold_s``, kill it. Never raises for what the probe does."""
    args = {"rlimit_data_bytes": rlimit_data_bytes, "allocate_bytes": allocate_bytes}
    monitor = GpuMonitor(nvml, uuids) if nvml is not None and nvml.available else None
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "vramtune.measure.probe", json.dumps(args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=True)
    report: dict[str, Any] | None = None
    err_tail = ""
    try:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = started + timeout_s
        while report is None and time.perf_counter() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline
                                                                   - time.perf_counter()))
            if not ready:
                break
            line = proc.stdout.readline()
            if not line:
                break  # the probe died
            text = line.decode(errors="replace")
            if text.startswith(PROBE_PREFIX):
                report = json.loads(text[len(PROBE_PREFIX):])
        if report is not None and monitor is not None:
            tree = {proc.pid}
            end = time.perf_counter() + hold_s
            while time.perf_counter() < end and proc.poll() is None:
                monitor.sample(tree)
                time.sleep(0.1)
    finally:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        if proc.stderr is not None:
            err_tail = proc.stderr.read().decode(errors="replace")[-4000:]
    wall_s = time.perf_counter() - started
    peaks = monitor.peaks() if monitor is not None and report is not None else None
    if report is None:
        return ProbeReport(False, error=(f"the probe exited ({proc.returncode}) without a "
                                         f"report" if time.perf_counter() - started < timeout_s
                                         else f"the probe gave no report in {timeout_s:g} s"),
                           stderr_tail=err_tail, wall_s=wall_s)
    devices = tuple(ProbeDevice(**d) for d in report.get("devices") or ())
    return ProbeReport(True, report.get("backend"), devices, dict(report.get("env") or {}),
                       report.get("rlimit_data_bytes"), report.get("allocation"),
                       peaks.process_peak_max_bytes if peaks else None,
                       tuple(peaks.notes) if peaks else (), report.get("error"), err_tail,
                       wall_s)


# --- the child side --------------------------------------------------------------------------

def rlimit_data_in_force() -> int | None:
    """This process's soft RLIMIT_DATA in bytes; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def set_rlimit_data(limit: int | str | None) -> None:
    """Cap the data segment at ``limit``. Never raises the hard limit: a lower one set by the
    user's shell or scheduler (ulimit -d) stays, and the limit in force, which the trial
    reports, then differs from the intended one."""
    if not limit:
        return
    limit = min(int(limit), sys.maxsize)  # no larger than the kernel takes (a C long)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY and limit > hard:
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
        return
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def runtime_devices(jax: Any) -> list[dict[str, Any]]:
    """Per local device: platform, kind, id, allocator limit, and on GPU the CUDA runtime's
    UUID and total (cuda_probe; ordinals match JAX's local device order)."""
    local = jax.local_devices()
    cuda = None
    if any(d.platform == "gpu" for d in local):
        from vramtune.measure import cuda_probe

        cuda = cuda_probe.probe(mem_info=True)
    out = []
    for i, d in enumerate(local):
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - a backend without allocator stats
            stats = {}
        entry: dict[str, Any] = {"platform": d.platform, "kind": d.device_kind, "id": d.id,
                                 "bytes_limit": stats.get("bytes_limit")}
        ordinal = getattr(d, "local_hardware_id", None)
        ordinal = i if ordinal is None else ordinal
        if cuda is not None and 0 <= ordinal < len(cuda):
            c = cuda[ordinal]
            entry["uuid"] = c.uuid
            entry["runtime_total_bytes"] = c.mem_info_total_bytes or c.total_bytes
        out.append(entry)
    return out


def main(argv: list[str]) -> int:
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    report: dict[str, Any] = {"env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ}}
    try:
        set_rlimit_data(args.get("rlimit_data_bytes"))
        report["rlimit_data_bytes"] = rlimit_data_in_force()
        import jax
        import jax.numpy as jnp

        report["backend"] = jax.default_backend()
        for device in jax.local_devices():  # start cuBLAS on each, as training would
            x = jax.device_put(jnp.ones((256, 256), jnp.float32), device)
            (x @ x).block_until_ready()
        report["devices"] = runtime_devices(jax)
        want = args.get("allocate_bytes")
        if want:
            try:
                big = jnp.ones((int(want) // 4,), jnp.float32)
                big.block_until_ready()
                report["allocation"] = "ok"
                del big
            except BaseException as exc:  # noqa: BLE001 - the outcome is the point
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                kind = "oom" if isinstance(exc, MemoryError) or "memory" in text.lower() \
                    or "RESOURCE_EXHAUSTED" in text else "error"
                report["allocation"] = f"{kind}: {text[:300]}"
    except BaseException as exc:  # noqa: BLE001 - report, never a traceback
        report["error"] = f"{type(exc).__name__}: {_message(exc)[:1000]}"
    sys.stdout.write(PROBE_PREFIX + json.dumps(report) + "\n")
    sys.stdout.flush()
    try:
        sys.stdin.read()  # held until the parent has sampled and kills us
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
