"""How a budget is enforced, decided once before launch: RLIMIT_DATA on CPU, JAX's pool
fraction on GPU. Pure arithmetic plus the environment the trial child gets.

GPU: XLA's pool limit is ``fraction x total``, where total is what the CUDA runtime reports
(openxla/xla xla/pjrt/gpu/gpu_helpers.cc ``CreateBFCAllocator`` via ``cuMemGetInfo``), not
NVML's (driver-reserved memory included; the whole card on MIG). The child's environment is
set so the cap cannot silently not apply: ``JAX_PLATFORMS=cuda`` (a failed plugin would
otherwise fall back to CPU, jax/_src/xla_bridge.py; never ``gpu``, which also asks for rocm
and fails on CUDA-only installs, jax-ml/jax#25315), the BFC allocator (``platform`` has no
pool and ignores the fraction), exactly one fraction variable, and the devices pinned by
full UUID. Each trial then proves its cap (``measure.trial.cap_mismatch``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from vramtune import machine
from vramtune.errors import UserError
from vramtune.measure.nvml import Nvml
from vramtune.units import format_bytes

DEFAULT_GPU_FRACTION = 0.95  # not JAX's 0.75: a probe without a cap would stop at 75% of the card
CAP_TOLERANCE = 0.01  # a limit in force this far from the intended one: not the cap we meant
FRACTION_VARS = machine.FRACTION_VARS
# Under RLIMIT_DATA below this, Python dies before it can import JAX (OpenBLAS, threads): the
# trial would end as a crash, not an out-of-memory. 100 MB already ends as a clean OOM.
MIN_CPU_CAP_BYTES = 64 << 20


@dataclass(frozen=True)
class Cap:
    """How the budget is enforced, decided before launch."""

    env: dict[str, str]
    rlimit_data_bytes: int | None
    description: str | None
    notes: tuple[str, ...] = ()
    backend: str = "cpu"  # what the child will run on, known even if it never reports
    enforced_bytes: int | None = None  # the byte count this cap holds the trial to
    unset: tuple[str, ...] = ()  # variables removed from the child's environment
    device_count: int = 1  # devices the trial runs on (brax pmaps over all of them)
    visible_uuids: tuple[str, ...] = ()  # GPU: the devices pinned, full NVML UUIDs
    fraction_var: str | None = None
    fraction: float | None = None  # exactly as written into the environment
    pool_limit_bytes: int | None = None  # GPU: the bytes_limit each allocator must report
    total_bytes: int | None = None  # GPU: the denominator the fraction was computed from
    total_source: str | None = None  # "CUDA runtime" or "NVML"
    # GPU: bytes the fraction leaves outside XLA's pool, beside the CUDA overhead, for memory
    # the trial allocates past it (MJX-Warp's own pool); None: none asked for
    outside_room_bytes: int | None = None

    @property
    def cache_tag(self) -> str | None:
        """Part of the compile cache path. jax's persistent cache key is computed before
        jaxlib adds the pool limit to the compile options (jax/_src/cache_key.py;
        jaxlib/py_client.cc CompileAndLoadIfrtProgram sets device_memory_size from
        bytes_limit), so an executable planned for one cap must not serve another."""
        if self.backend != "gpu":
            return None
        return f"gpu-pool-{self.pool_limit_bytes}"


def requested_platform(value: str | None = None) -> str | None:
    """The platform jax will use first: JAX_PLATFORMS is a comma-separated list in
    priority order (jax/_src/xla_bridge.py ``backends``: ``jax_platforms.split(",")``)."""
    text = os.environ.get("JAX_PLATFORMS", "") if value is None else value
    first = next((p.strip().lower() for p in text.split(",") if p.strip()), None)
    return first


def gpu_fraction(budget_bytes: int | None, overhead_bytes: int | None, total_bytes: int,
                 outside_room_bytes: int | None = None) -> float:
    """JAX's pool limit is fraction x the runtime's total; the process also holds the CUDA
    context and libraries outside the pool, so they come off the budget first, and so does
    ``outside_room_bytes`` (what the trial allocates beside the pool: MJX-Warp's own pool).
    Never more than leaves room for the overhead (cuBLAS fails to start in a full card:
    jax#7118)."""
    room = (total_bytes - overhead_bytes) / total_bytes if overhead_bytes else None
    if budget_bytes is None:
        return min(DEFAULT_GPU_FRACTION, room) if room is not None else DEFAULT_GPU_FRACTION
    ceiling = room if room is not None else DEFAULT_GPU_FRACTION
    fraction = (budget_bytes - (overhead_bytes or 0) - (outside_room_bytes or 0)) / total_bytes
    if fraction <= 0:
        raise UserError(f"budget {budget_bytes} B is below the measured per-process CUDA "
                        f"overhead ({overhead_bytes} B): nothing can run in it")
    return min(fraction, ceiling)


def outside_room(budget_bytes: int | None, overhead_bytes: int | None,
                 wanted_bytes: int | None) -> tuple[int | None, str | None]:
    """The room the pool leaves for memory allocated beside it, and a note when it had to be
    cut: at most half of what the budget leaves past the CUDA overhead, so that a prediction
    larger than the budget still leaves XLA a pool to start in (the NVML process figure, which
    counts both, then judges the size). (None, None): no budget or nothing asked for."""
    if budget_bytes is None or not wanted_bytes or wanted_bytes <= 0:
        return None, None
    most = max((budget_bytes - (overhead_bytes or 0)) // 2, 0)
    if wanted_bytes <= most:
        return wanted_bytes, None
    return most, (f"room outside the pool cut to {format_bytes(most)}, half the budget past the "
                  f"CUDA overhead ({format_bytes(wanted_bytes)} predicted)")


def gpu_cap(budget_bytes: int | None, overhead_bytes: int | None, total_bytes: int, *,
            uuids: tuple[str, ...], fraction_var: str, total_source: str = "CUDA runtime",
            outside_room_bytes: int | None = None) -> Cap:
    """The GPU cap for devices of ``total_bytes`` each, leaving ``outside_room_bytes`` of the
    budget outside XLA's pool (``outside_room``). Pure: no NVML, no JAX."""
    if fraction_var not in FRACTION_VARS:
        raise ValueError(f"not a fraction variable: {fraction_var}")
    notes: list[str] = []
    if budget_bytes is not None and overhead_bytes is None:
        notes.append("per-process CUDA overhead unknown: the cap assumes none")
    room, cut = outside_room(budget_bytes, overhead_bytes, outside_room_bytes)
    if room:
        notes.append(f"{format_bytes(room)} of the budget left outside XLA's pool for MJX-Warp's "
                     f"own pool (predicted from the sizes measured before)")
    if cut:
        notes.append(cut)
    fraction = gpu_fraction(budget_bytes, overhead_bytes, total_bytes, room)
    if budget_bytes is not None \
            and budget_bytes - (overhead_bytes or 0) - (room or 0) > fraction * total_bytes:
        notes.append(f"budget exceeds what the card leaves the pool ({format_bytes(total_bytes)} "
                     f"total): capped at a fraction of {fraction:.4f}")
    text = format(fraction, ".9g")
    fraction = float(text)
    if total_source != "CUDA runtime":
        notes.append(f"fraction of {total_source}'s total: the CUDA runtime's was not measured; "
                     f"the trial checks the limit it got")
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "JAX_PLATFORMS": "cuda",
           "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
           "CUDA_VISIBLE_DEVICES": ",".join(uuids), fraction_var: text}
    return Cap(env, None, f"{fraction_var}={text}", tuple(notes), backend="gpu",
               enforced_bytes=budget_bytes,
               unset=tuple(v for v in FRACTION_VARS if v != fraction_var),
               device_count=len(uuids), visible_uuids=tuple(uuids), fraction_var=fraction_var,
               fraction=fraction, pool_limit_bytes=int(fraction * total_bytes),
               total_bytes=total_bytes, total_source=total_source, outside_room_bytes=room)


def cpu_cap(budget_bytes: int | None, devices: int = 1) -> Cap:
    """RLIMIT_DATA on the child (the data segment, where XLA:CPU's buffers live), and
    ``devices`` CPU devices (JAX_NUM_CPU_DEVICES, which jax 0.9.2's make_cpu_client passes
    over XLA_FLAGS' --xla_force_host_platform_device_count)."""
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "JAX_PLATFORMS": "cpu",
           "JAX_NUM_CPU_DEVICES": str(devices)}
    if budget_bytes is None:
        return Cap(env, None, None, unset=FRACTION_VARS, device_count=devices)
    if budget_bytes < MIN_CPU_CAP_BYTES:
        raise UserError(f"a cap of {budget_bytes} bytes is below {MIN_CPU_CAP_BYTES >> 20} MiB, "
                        f"less than a Python process needs to start and import JAX; give a "
                        f"larger --gpu-mem")
    return Cap(env, budget_bytes, f"RLIMIT_DATA={budget_bytes}", enforced_bytes=budget_bytes,
               unset=FRACTION_VARS, device_count=devices)


def _checked_platform() -> tuple[str | None, bool]:
    """JAX_PLATFORMS' first choice (None: unset) and whether a CUDA jax is installed; a
    platform vramtune cannot run trials on is one UserError."""
    raw = os.environ.get("JAX_PLATFORMS", "")
    platform = requested_platform(raw)
    if platform not in (None, "cpu", "cuda", "gpu"):
        raise UserError(f"JAX_PLATFORMS={raw}: vramtune runs trials on cuda or cpu; unset it or "
                        f"set JAX_PLATFORMS=cpu or cuda")
    cuda_jax = machine.has_cuda_jax()
    if platform in ("cuda", "gpu") and not cuda_jax:
        raise UserError(f"JAX_PLATFORMS={raw} asks for CUDA first, and no CUDA plugin for jax is "
                        f"installed (pip install -e '.[cuda]'); set JAX_PLATFORMS=cpu to measure "
                        f"host memory instead")
    return platform, cuda_jax


def backend(nvml: Nvml | None) -> str:
    """What ``plan_cap`` runs trials on here, without planning a cap: "cpu", "gpu" (a CUDA
    jax with NVML), or "unknown" (a CUDA jax without NVML: whatever jax starts)."""
    platform, cuda_jax = _checked_platform()
    if platform == "cpu" or not cuda_jax:
        return "cpu"
    return "gpu" if nvml is not None and nvml.available else "unknown"


def plan_cap(budget_bytes: int | None, nvml: Nvml | None, overhead_bytes: int | None, *,
             devices: int = 1, runtime_total_bytes: int | None = None,
             outside_room_bytes: int | None = None) -> Cap:
    """The environment and limits that enforce the budget on this machine, on ``devices``
    devices (the first ones CUDA would use; the budget is per device). On a GPU
    ``outside_room_bytes`` of the budget is left outside XLA's pool; on a CPU RLIMIT_DATA
    holds everything the process allocates (Warp's arrays too), so it needs none."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise UserError(f"--devices must be a positive integer, got {devices!r}")
    platform, cuda_jax = _checked_platform()
    if platform == "cpu" or not cuda_jax:
        return cpu_cap(budget_bytes, devices)
    if nvml is not None and nvml.available:
        return plan_gpu_cap(budget_bytes, nvml, overhead_bytes, devices=devices,
                            runtime_total_bytes=runtime_total_bytes, platform=platform,
                            outside_room_bytes=outside_room_bytes)
    if budget_bytes is not None:
        # A CUDA jax with no NVML: the card's total is unknown, so no fraction can be set,
        # and RLIMIT_DATA would cap host memory while the trial runs on the GPU.
        raise UserError("--gpu-mem needs NVML to read the GPU's total memory, and it is "
                        f"unavailable ({nvml.notice if nvml else 'not initialised'}); set "
                        "JAX_PLATFORMS=cpu to measure host memory instead")
    # No budget, no NVML: jax picks the GPU if it can start one; nothing is capped, so nothing
    # needs proving but the device count.
    return Cap({"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, None, None,
               ("NVML unavailable: the trial runs uncapped on whatever backend jax starts",),
               backend="unknown", device_count=devices)


def plan_gpu_cap(budget_bytes: int | None, nvml: Nvml, overhead_bytes: int | None, *,
                 devices: int = 1, runtime_total_bytes: int | None = None,
                 platform: str | None = "cuda", outside_room_bytes: int | None = None) -> Cap:
    """The GPU cap on the first ``devices`` GPUs NVML resolves from CUDA_VISIBLE_DEVICES,
    with the fraction of the CUDA runtime's total where it was measured, else NVML's."""
    picked = nvml.pick(devices)
    nvml_totals = sorted({d.total_bytes for d in picked})
    if max(nvml_totals) > min(nvml_totals) * (1 + CAP_TOLERANCE):
        raise UserError(f"--devices {devices}: the GPUs differ in size ("
                        + ", ".join(format_bytes(t) for t in nvml_totals) + ") and one "
                        "fraction applies to all; pin GPUs of one size with CUDA_VISIBLE_DEVICES")
    total, source = ((runtime_total_bytes, "CUDA runtime") if runtime_total_bytes
                     else (picked[0].total_bytes, "NVML"))
    cap = gpu_cap(budget_bytes, overhead_bytes, total,
                  uuids=tuple(str(d.uuid) for d in picked),
                  fraction_var=machine.mem_fraction_var(), total_source=source,
                  outside_room_bytes=outside_room_bytes)
    notes = list(nvml.notes) + list(cap.notes)
    if platform == "gpu":
        notes.append("JAX_PLATFORMS=gpu asks for rocm too and fails on CUDA-only installs "
                     "(jax-ml/jax#25315): trials run with JAX_PLATFORMS=cuda")
    return dataclasses.replace(cap, notes=tuple(notes))
