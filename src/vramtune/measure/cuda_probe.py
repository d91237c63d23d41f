"""What the CUDA driver in THIS process enumerates: ordinal -> UUID, PCI bus id, total memory.

For the trial child (after ``import jax`` and backend start, so CUDA_VISIBLE_DEVICES and
CUDA_DEVICE_ORDER have already been applied by the driver) and for ``vramtune doctor``.
Stdlib ctypes against libcuda.so.1, the way nvitop does it (nvitop/api/libcuda.py
``cuDeviceGetUuid``: tries ``cuDeviceGetUuid_v2`` first, which returns the MIG UUID on a MIG
device, then ``cuDeviceGetUuid``). Returns None where there is no driver: never raises.

Not verified on a GPU here (this machine has none): that ``cuDeviceTotalMem_v2`` equals the
``total`` of ``cuMemGetInfo`` that XLA's CreateBFCAllocator multiplies the fraction by
(xla/stream_executor/cuda/cuda_executor.cc ``CudaExecutor::DeviceMemoryUsage`` calls
``cuMemGetInfo``). The child can check it directly: bytes_limit / fraction.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass


@dataclass(frozen=True)
class CudaDevice:
    ordinal: int
    uuid: str  # 8-4-4-4-12 hex, no prefix (match with devices.runtime_uuid_to_nvml)
    pci_bus_id: str | None
    total_bytes: int | None  # cuDeviceTotalMem_v2
    mem_info_total_bytes: int | None = None  # cuMemGetInfo's total: what XLA multiplies


def probe(library: str = "libcuda.so.1", *, mem_info: bool = False) -> list[CudaDevice] | None:
    """Every device this process's CUDA driver enumerates, in ordinal order, or None.

    ``mem_info`` also reads cuMemGetInfo's total in each device's primary context (retained
    and released again): only after JAX has started, which already holds that context, or
    the probe itself would create one (~300 MB on the card).
    """
    try:
        cuda = ctypes.CDLL(library)
    except OSError:
        return None
    if cuda.cuInit(0) != 0:
        return None
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or cuda.cuDeviceGetUuid
    out = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            return None
        raw = (ctypes.c_ubyte * 16)()
        if get_uuid(raw, dev) != 0:
            return None
        hexs = "".join(f"{b:02x}" for b in raw)
        uuid = f"{hexs[:8]}-{hexs[8:12]}-{hexs[12:16]}-{hexs[16:20]}-{hexs[20:]}"
        bus = ctypes.create_string_buffer(32)
        pci = bus.value.decode() if cuda.cuDeviceGetPCIBusId(bus, 32, dev) == 0 else None
        total = ctypes.c_size_t(0)
        fn = getattr(cuda, "cuDeviceTotalMem_v2", None) or cuda.cuDeviceTotalMem
        mem = total.value if fn(ctypes.byref(total), dev) == 0 else None
        out.append(CudaDevice(ordinal, uuid, pci, mem,
                              _mem_info_total(cuda, dev) if mem_info else None))
    return out


def _mem_info_total(cuda: ctypes.CDLL, dev: ctypes.c_int) -> int | None:
    """cuMemGetInfo_v2's total in the device's primary context, the figure XLA's
    CreateBFCAllocator multiplies by the fraction (via CudaExecutor::DeviceMemoryUsage)."""
    try:
        return _mem_info_total_or_raise(cuda, dev)
    except AttributeError:  # a driver without one of the symbols
        return None


def _mem_info_total_or_raise(cuda: ctypes.CDLL, dev: ctypes.c_int) -> int | None:
    ctx = ctypes.c_void_p()
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0:
        return None
    try:
        if cuda.cuCtxPushCurrent_v2(ctx) != 0:
            return None
        try:
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            fn = getattr(cuda, "cuMemGetInfo_v2", None) or cuda.cuMemGetInfo
            return total.value if fn(ctypes.byref(free), ctypes.byref(total)) == 0 else None
        finally:
            popped = ctypes.c_void_p()
            cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
    finally:
        cuda.cuDevicePrimaryCtxRelease_v2(dev)
