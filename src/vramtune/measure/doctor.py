"""``vramtune doctor``: everything to check before trusting a sweep on this machine.

Runs real, short probe processes (``measure.probe``): what jax starts with the user's own
environment (and whether the CUDA plugin came up or JAX fell back to CPU), the devices by
UUID with NVML's and the CUDA runtime's totals, MIG, which fraction variable this jaxlib
reads (asked of jaxlib), the per-process CUDA overhead, whether NVML's per-process figures
work in this container, and one capped probe that checks the cap in force against the plan:
``bytes_limit`` on GPU, RLIMIT_DATA on CPU, and that an allocation past it fails. No UI here:
the report is a frozen dataclass, the CLI prints it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata

from vramtune import machine
from vramtune.compat import stack_verdict
from vramtune.errors import UserError
from vramtune.measure.cap import Cap, cpu_cap, plan_gpu_cap, requested_platform
from vramtune.measure.nvml import Nvml
from vramtune.measure.oom import cap_not_applied
from vramtune.measure.overhead import measure_device
from vramtune.measure.probe import ProbeReport, run_probe
from vramtune.measure.process import child_env
from vramtune.measure.trial import cap_mismatch
from vramtune.units import format_bytes

CPU_PROBE_LIMIT_BYTES = 2 * 10**9  # RLIMIT_DATA for the CPU probe: room for jax, not for 2x it
GPU_PROBE_POOL_BYTES = 2 * 10**9  # the emulated card for the GPU probe (or a quarter of it)
PROBE_TIMEOUT_S = 60.0
_PLUGINS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")


@dataclass(frozen=True)
class DoctorDevice:
    """One GPU CUDA would use, as NVML and the CUDA runtime see it."""

    uuid: str
    name: str
    nvml_index: int
    mig: bool
    nvml_total_bytes: int
    runtime_total_bytes: int | None  # cuMemGetInfo's, from a probe pinned to this device


@dataclass(frozen=True)
class CapProbe:
    """A real capped process: the cap planned, the cap in force, an allocation past it."""

    backend: str  # what the cap is for: gpu or cpu
    cap: str | None  # e.g. "XLA_CLIENT_MEM_FRACTION=0.025" or "RLIMIT_DATA=2000000000"
    intended_bytes: int | None
    in_force_bytes: int | None  # bytes_limit (GPU) or soft RLIMIT_DATA (CPU)
    allocation: str | None  # outcome of allocating twice the limit: "oom: ..." is right
    mismatch: str | None  # why the cap was not the planned one, as a trial would fail
    wall_s: float | None

    @property
    def ok(self) -> bool:
        return (self.mismatch is None and self.in_force_bytes is not None
                and (self.allocation or "").startswith("oom"))


@dataclass(frozen=True)
class DoctorReport:
    stack: str  # the jax/brax verdict in one line: trains, trains patched, cannot train
    stack_patches: tuple[str, ...]  # the stand-ins every trial will run brax with
    versions: dict[str, str]
    jax_platforms: str | None  # the user's JAX_PLATFORMS
    cuda_plugins: dict[str, str]  # installed plugin packages and versions
    backend: str | None  # what jax started with the user's own environment
    backend_devices: tuple[str, ...]  # device kind per device
    plugin_errors: tuple[str, ...]  # lines saying the CUDA plugin did not start
    nvml: str  # "driver 560.35.03" or why not
    cuda_visible_devices: str | None
    device_notes: tuple[str, ...]  # how CUDA_VISIBLE_DEVICES resolved
    devices: tuple[DoctorDevice, ...]
    fraction_var: str  # the one this jaxlib reads
    overhead_bytes: int | None
    per_process_nvml: str  # "works", or why not
    cap_probe: CapProbe | None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def on_gpu(self) -> bool:
        return self.backend == "gpu"


def _plugins() -> dict[str, str]:
    found = {}
    for name in _PLUGINS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _user_probe() -> ProbeReport:
    """jax as the user's own environment starts it (no cap, no pinning)."""
    return run_probe({**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, hold_s=0.0,
                     timeout_s=PROBE_TIMEOUT_S)


def _proof(report: ProbeReport) -> dict[str, object]:
    """A probe's report in the shape a trial child reports its cap (wire.PROOF_FIELDS)."""
    gpu = any(d.platform == "gpu" for d in report.devices)
    env = report.env
    fractions = [f"{k}={env[k]}" for k in machine.FRACTION_VARS if env.get(k)]
    return {"backend": report.backend, "device_count": len(report.devices) or None,
            "device_uuids": [d.uuid for d in report.devices] if gpu else None,
            "runtime_total_bytes_per_device": ([d.runtime_total_bytes for d in report.devices]
                                               if gpu else None),
            "jax_bytes_limit_per_device": [d.bytes_limit for d in report.devices] if gpu else None,
            "fraction_in_force": ", ".join(fractions) or None,
            "allocator_in_force": env.get("XLA_PYTHON_CLIENT_ALLOCATOR"),
            "rlimit_data_bytes": report.rlimit_data_bytes}


def capped_probe(cap: Cap) -> CapProbe:
    """Run a probe under ``cap``, allocate twice its limit, compare the cap in force."""
    intended = cap.pool_limit_bytes if cap.backend == "gpu" else cap.rlimit_data_bytes
    report = run_probe(child_env(cap), rlimit_data_bytes=cap.rlimit_data_bytes,
                       allocate_bytes=2 * intended if intended else None, hold_s=0.0,
                       timeout_s=PROBE_TIMEOUT_S)
    if not report.started or report.error:
        why = report.error or "; ".join(line for _, line in cap_not_applied(report.stderr_tail))
        return CapProbe(cap.backend, cap.description, intended, None, None,
                        f"the probe failed: {why or report.stderr_tail[-300:]}", report.wall_s)
    proof = _proof(report)
    if cap.backend == "gpu":
        limits = [v for v in proof["jax_bytes_limit_per_device"] or [] if v is not None]
        in_force = limits[0] if limits else None
    else:
        in_force = report.rlimit_data_bytes
    return CapProbe(cap.backend, cap.description, intended, in_force, report.allocation,
                    cap_mismatch(cap, proof, cap.device_count), report.wall_s)


def diagnose(nvml: Nvml | None = None, *, run_cap_probe: bool = True,
             import_path: Sequence[str] | None = None) -> DoctorReport:
    """Probe this machine as a sweep would use it. Takes a few seconds per probe.
    ``import_path``: where to look for jax and brax's files (default sys.path)."""
    problems: list[str] = []
    stack = stack_verdict(import_path)
    if stack.problem is not None:
        problems.append(stack.problem)
    notes: list[str] = []
    raw_platforms = os.environ.get("JAX_PLATFORMS")
    platform = requested_platform(raw_platforms or "")
    if platform == "gpu":
        problems.append("JAX_PLATFORMS=gpu also asks for rocm and fails on CUDA-only installs "
                        "(jax-ml/jax#25315); vramtune's trials use cuda")
    plugins = _plugins()
    user = _user_probe()
    plugin_errors = tuple(line for _, line in cap_not_applied(user.stderr_tail + "\n"
                                                              + (user.error or "")))
    if user.error:
        named = (f" (JAX_PLATFORMS={raw_platforms}: is that backend's jax build installed?)"
                 if raw_platforms and platform != "cpu" else "")
        problems.append(f"jax did not start with your environment{named}: {user.error}")
    if plugins and user.backend == "cpu":
        problems.append("a CUDA plugin is installed and jax started on CPU: the plugin failed "
                        "or no GPU is visible" + (f" ({plugin_errors[0]})" if plugin_errors
                                                  else ""))
    nvml = nvml if nvml is not None else Nvml()
    fraction_var = machine.mem_fraction_var()
    devices: list[DoctorDevice] = []
    overhead = None
    per_process = "n/a: no GPU"
    cap_report: CapProbe | None = None
    gpu_path = nvml.available and bool(plugins) and platform in (None, "cuda", "gpu")
    if nvml.available:
        facts = measure_device(nvml, PROBE_TIMEOUT_S, cached=False) if gpu_path else None
        overhead = facts.overhead_bytes if facts else None
        for i, d in enumerate(nvml.devices):
            runtime = facts.runtime_total_bytes if facts is not None and i == 0 else None
            devices.append(DoctorDevice(str(d.uuid), d.name, d.index, d.mig, d.total_bytes,
                                        runtime))
        if facts is not None and facts.probe is not None:
            probe = facts.probe
            if probe.backend != "gpu":
                per_process = "n/a: the GPU probe did not start on cuda"
                problems.append(f"a process pinned to {nvml.info.uuid} with JAX_PLATFORMS=cuda "
                                f"did not start on the GPU: {probe.error or probe.stderr_tail[-300:]}")
            elif probe.nvml_notes:
                per_process = "no: " + "; ".join(probe.nvml_notes)
                notes.append("NVML gives no per-process figure here: trials fall back to device "
                             "used minus a baseline when the GPU is otherwise idle, else report "
                             "no NVML process figure")
            elif probe.process_peak_bytes:
                per_process = "works"
        if overhead is None and gpu_path:
            problems.append("the per-process CUDA overhead could not be measured: a --gpu-mem "
                            "cap will assume none and the pool gets the whole budget")
        if gpu_path and run_cap_probe:
            try:
                total = facts.runtime_total_bytes if facts else None
                budget = min(GPU_PROBE_POOL_BYTES, (total or nvml.info.total_bytes) // 4)
                cap = plan_gpu_cap(budget + (overhead or 0), nvml, overhead,
                                   runtime_total_bytes=total, platform=platform)
                cap_report = capped_probe(cap)
            except UserError as exc:
                problems.append(f"no capped probe: {exc}")
    else:
        notes.append(f"NVML: {nvml.notice}")
    if not gpu_path:
        notes.append("CPU backend: budgets are host memory, enforced with RLIMIT_DATA; memory "
                     "figures are host RAM, never VRAM")
        if run_cap_probe:
            cap_report = capped_probe(cpu_cap(CPU_PROBE_LIMIT_BYTES))
    if cap_report is not None and not cap_report.ok:
        problems.append("the capped probe did not hold its cap: "
                        + (cap_report.mismatch or f"allocating twice the limit gave "
                                                  f"{cap_report.allocation}"))
    for device in devices:
        if device.runtime_total_bytes and abs(device.runtime_total_bytes
                                              - device.nvml_total_bytes) > 0.01 * device.nvml_total_bytes:
            notes.append(f"{device.uuid}: NVML's total {format_bytes(device.nvml_total_bytes)} "
                         f"differs from the CUDA runtime's {format_bytes(device.runtime_total_bytes)}"
                         f": fractions are computed from the runtime's")
    nvml_line = (f"driver {nvml.info.driver}" if nvml.info else (nvml.notice or "unavailable"))
    if stack.patches:
        notes.append("brax runs patched in every trial (vramtune.compat.patch_brax, the stand-ins "
                     "brax main uses); your own training needs the same two lines: "
                     "import vramtune.compat; vramtune.compat.patch_brax()")
    return DoctorReport(
        stack=stack.line, stack_patches=stack.patches, versions=machine.versions(),
        jax_platforms=raw_platforms, cuda_plugins=plugins,
        backend=user.backend,
        backend_devices=tuple(d.kind for d in user.devices),
        plugin_errors=plugin_errors, nvml=nvml_line,
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        device_notes=tuple(nvml.notes), devices=tuple(devices), fraction_var=fraction_var,
        overhead_bytes=overhead, per_process_nvml=per_process, cap_probe=cap_report,
        problems=tuple(problems), notes=tuple(notes))
