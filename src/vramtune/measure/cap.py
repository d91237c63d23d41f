"""How a budget is enforced, decided once before launch: RLIMIT_DATA on CPU, JAX's pool
fraction on GPU. Pure arithmetic plus the environment the trial child gets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from vramtune import machine
from vramtune.errors import UserError
from vramtune.measure.nvml import Nvml

DEFAULT_GPU_FRACTION = 0.95  # not JAX's 0.75: a probe without a cap would stop at 75% of the card
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
                   tuple(notes), backend="gpu", enforced_bytes=budget_bytes)
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
    if budget_bytes < MIN_CPU_CAP_BYTES:
        raise UserError(f"a cap of {budget_bytes} bytes is below {MIN_CPU_CAP_BYTES >> 20} MiB, "
                        f"less than a Python process needs to start and import JAX; give a "
                        f"larger --gpu-mem")
    return Cap(base_env, budget_bytes, f"RLIMIT_DATA={budget_bytes}", enforced_bytes=budget_bytes)
