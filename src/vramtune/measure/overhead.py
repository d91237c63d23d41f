"""The per-process CUDA overhead and the runtime's device total, measured, never guessed.

Emulating an 8 GB card on an 80 GB one caps JAX's pool at (8 GB - overhead) / total: the
CUDA context, cuBLAS handles and the like sit outside the pool but on the card, and XLA
multiplies the fraction by the total the CUDA runtime reports, which NVML's total need not
equal (openxla/xla gpu_helpers.cc ``CreateBFCAllocator``). One trivial JAX process on the
first device answers both: NVML watches it, and it reports cuMemGetInfo's total. Remembered
per GPU/driver/jaxlib, but only when the overhead was measured: an unknown (None; NVML's 0 is
unknown too) is retried next time, never cached as "no overhead".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from vramtune import machine
from vramtune.machine import FRACTION_VARS, default_cache_dir
from vramtune.measure.cap import Cap, plan_cap
from vramtune.measure.nvml import Nvml
from vramtune.measure.probe import ProbeReport, run_probe
from vramtune.results.files import write_atomic

CACHE_FILE = "device-probe.json"


@dataclass(frozen=True)
class DeviceFacts:
    """What a trivial JAX process on the device showed; None where not measured."""

    overhead_bytes: int | None  # NVML process figure of a process with an empty pool
    runtime_total_bytes: int | None  # the CUDA runtime's total: the fraction's denominator
    probe: ProbeReport | None = None  # None when the figures came from the cache


def gpu_probe_env(uuids: tuple[str, ...]) -> dict[str, str]:
    """A CUDA process on exactly these devices, with JAX's defaults otherwise (no fraction)."""
    env = {k: v for k, v in os.environ.items() if k not in FRACTION_VARS}
    env.update({"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "JAX_PLATFORMS": "cuda",
                "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                "CUDA_VISIBLE_DEVICES": ",".join(uuids)})
    return env


def measure_device(nvml: Nvml, timeout_s: float = 120.0, *, cached: bool = True) -> DeviceFacts:
    """Overhead and runtime total of the first device CUDA would use."""
    if not nvml.available or nvml.info is None or nvml.info.uuid is None:
        return DeviceFacts(None, None)
    info = nvml.info
    cache = default_cache_dir() / CACHE_FILE
    key = f"{info.name}|{info.total_bytes}|{info.driver}|{machine.versions().get('jaxlib')}"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key)
    if cached and isinstance(entry, dict) and entry.get("overhead_bytes"):
        return DeviceFacts(int(entry["overhead_bytes"]), entry.get("runtime_total_bytes"))
    report = run_probe(gpu_probe_env((info.uuid,)), nvml=nvml, uuids=(info.uuid,),
                       timeout_s=timeout_s)
    total = report.devices[0].runtime_total_bytes if report.devices else None
    overhead = report.process_peak_bytes if report.backend == "gpu" else None
    if overhead:  # a failed or unknown measurement is retried next time
        known[key] = {"overhead_bytes": overhead, "runtime_total_bytes": total}
        remember(cache, known)
    return DeviceFacts(overhead or None, total, report)


def remember(cache: Path, known: dict) -> bool:
    """Write the device cache; False where it cannot be written. The cache only spares the
    next probe: a read-only home (a cluster's, a container's) must not end the run."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, json.dumps(known, indent=1))
    except OSError:
        return False
    return True


def device_cap(limit_bytes: int | None, nvml: Nvml | None, devices: int = 1,
               outside_room_bytes: int | None = None) -> tuple[Cap, DeviceFacts]:
    """The cap a trial runs under on this machine, and the device facts it was planned from:
    the one place a cap is planned from a limit (the sweep's executor, a lone trial, verify,
    a Ray node each call this)."""
    facts = measure_device(nvml) if nvml is not None and nvml.available else DeviceFacts(None, None)
    cap = plan_cap(limit_bytes, nvml, facts.overhead_bytes, devices=devices,
                   runtime_total_bytes=facts.runtime_total_bytes,
                   outside_room_bytes=outside_room_bytes)
    return cap, facts
