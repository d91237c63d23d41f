"""NVML, optional: absent driver or library gives None and a notice, never a failure.

Uses ``nvidia-ml-py`` (module ``pynvml``). Per-process figures can be unavailable (``None``
from the driver) or useless (containers report host PIDs); then device-used minus a
baseline taken before the trial stands in, and the record says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

try:  # pragma: no cover - depends on the machine
    import pynvml
except ImportError:  # pragma: no cover
    pynvml = None  # type: ignore[assignment]


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    driver: str
    total_bytes: int


class Nvml:
    """A session with one GPU's handle; every method returns None when NVML cannot answer."""

    def __init__(self) -> None:
        self.notice: str | None = None
        self._handle: Any = None
        self.info: GpuInfo | None = None
        if pynvml is None:
            self.notice = "NVML unavailable: the nvidia-ml-py package is not installed"
            return
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.notice = f"NVML unavailable ({_nvml_reason(exc)}): no GPU memory figures"
            return
        try:
            if pynvml.nvmlDeviceGetCount() < 1:
                self.notice = "NVML found no GPU: no GPU memory figures"
                return
            handle, index = _visible_handle()
            name = pynvml.nvmlDeviceGetName(handle)
            driver = pynvml.nvmlSystemGetDriverVersion()
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
        except Exception as exc:
            self.notice = f"NVML error ({_nvml_reason(exc)}): no GPU memory figures"
            return
        self._handle = handle
        self.info = GpuInfo(index, _text(name), _text(driver), int(total))

    @property
    def available(self) -> bool:
        return self._handle is not None

    def device_used_bytes(self) -> int | None:
        if not self._handle:
            return None
        try:
            return int(pynvml.nvmlDeviceGetMemoryInfo(self._handle).used)
        except Exception:
            return None

    def process_used_bytes(self) -> dict[int, int | None] | None:
        """pid -> used bytes (None where the driver does not say) for compute processes."""
        if not self._handle:
            return None
        for name in ("nvmlDeviceGetComputeRunningProcesses_v3",
                     "nvmlDeviceGetComputeRunningProcesses_v2",
                     "nvmlDeviceGetComputeRunningProcesses"):
            fn = getattr(pynvml, name, None)
            if fn is None:
                continue
            try:
                procs = fn(self._handle)
            except Exception:
                continue
            return {int(p.pid): (int(p.usedGpuMemory) if p.usedGpuMemory is not None else None)
                    for p in procs}
        return None


def _visible_handle() -> tuple[Any, int]:
    """The GPU JAX will use first: CUDA_VISIBLE_DEVICES names it by index or by UUID
    (GPU-... or MIG-..., as container runtimes and MIG set it; a MIG handle reports the
    slice's memory, not the whole card's)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        handle = pynvml.nvmlDeviceGetHandleByUUID(first)
        try:
            index = int(pynvml.nvmlDeviceGetIndex(handle))
        except Exception:
            index = -1  # a MIG instance has no device index of its own
        return handle, index
    index = int(first) if first.isdigit() else 0
    return pynvml.nvmlDeviceGetHandleByIndex(index), index


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_reason(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__
