"""A fake ``pynvml`` (nvidia-ml-py) for tests only: ``monkeypatch.setitem(sys.modules, "pynvml",
build(system))`` before ``Nvml()``. The one fake the project accepts: no GPU here.

Names, constants and error behaviour follow nvidia-ml-py 13.615.71's ``pynvml.py`` (the version
in the project venv), checked against its source:

* errors: ``NVMLError(value)`` whose ``__new__`` returns the per-code subclass
  (``NVMLError_NotFound``, ``NVMLError_FunctionNotFound``, ...), ``.value`` the code,
  ``str()`` the text from ``_errcode_to_string`` ("Not Found", "Function Not Found", ...).
* a function whose C symbol the driver lacks raises ``NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)``
  (``_nvmlGetFunctionPointer``); the unsuffixed ``nvmlDeviceGetComputeRunningProcesses`` is
  ``@throwOnVersionMismatch`` around ``_v3`` and turns that into ``NVMLLibraryMismatchError``
  (a plain ``Exception``). Bindings before 12.x called the v1 symbol instead: ``binding="legacy"``.
* ``usedGpuMemory`` equal to ``NVML_VALUE_NOT_AVAILABLE_ulonglong.value`` (2**64-1) is turned into
  ``None`` by the v2/v3 wrappers ("special case for WDDM on Windows").
* ``nvmlDeviceGetHandleByUUID`` takes the full UUID (str or bytes); no prefix matching.
* ``nvmlDeviceGetMemoryInfo(handle, version=None)``: v1 struct (total, free, used); with
  ``version=nvmlMemory_v2`` the v2 struct (version, total, reserved, free, used).

Modelled, not taken from the bindings (flagged where it matters):
* MIG: querying processes on the parent GPU returns every instance's processes with their
  ``gpuInstanceId``/``computeInstanceId``; on a MIG handle only that instance's.
  ``nvmlDeviceGetIndex`` on a MIG handle raises ``NVMLError_InvalidArgument`` (vramtune's
  nvml.py already assumes "a MIG instance has no device index of its own").
* container PIDs: each FakeProcess has the PID NVML reports (``nvml_pid``: the host PID on older
  drivers, the namespaced PID with ``used_bytes=0`` on drivers like 560.35.03,
  HAMi-core #112) separately from its real PID.
"""

from __future__ import annotations

import string
import types
from ctypes import c_uint, c_ulonglong
from dataclasses import dataclass, field
from typing import Any, ClassVar

# Return codes, same values as nvidia-ml-py.
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_MEMORY = 20
NVML_ERROR_UNKNOWN = 999

NVML_VALUE_NOT_AVAILABLE_ulonglong = c_ulonglong(-1)
NVML_VALUE_NOT_AVAILABLE_uint = c_uint(-1)
NOT_AVAILABLE = NVML_VALUE_NOT_AVAILABLE_ulonglong.value  # 2**64 - 1

NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1
nvmlMemory_v2 = 0x02000028

_ERROR_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_MEMORY: "Insufficient Memory",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}

# --- the system a test describes -------------------------------------------------------------


@dataclass
class FakeProcess:
    pid: int  # the PID the test's process really has (what vramtune compares against)
    device_uuid: str  # "GPU-..." or "MIG-..." it runs on
    used_bytes: int | None  # None: driver says NVML_VALUE_NOT_AVAILABLE; 0: namespaced-PID bug
    nvml_pid: int | None = None  # what NVML reports; None: same as pid

    @property
    def reported_pid(self) -> int:
        return self.pid if self.nvml_pid is None else self.nvml_pid


@dataclass
class FakeMig:
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    memory_total: int
    memory_used: int | None = None  # None: sum of its processes' known usage


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str = "00000000:3B:00.0"
    memory_total: int = 85_520_809_984
    memory_reserved: int = 0  # v2 struct's "reserved"
    memory_used: int | None = None  # None: reserved + sum of its processes' known usage
    mig_capable: bool = False
    mig_enabled: bool = False
    migs: list[FakeMig | None] = field(default_factory=list)  # by MIG index; None = hole
    minor_number: int = 0


@dataclass
class FakeSystem:
    gpus: list[FakeGpu] = field(default_factory=list)
    processes: list[FakeProcess] = field(default_factory=list)
    driver_version: str = "560.35.03"
    cuda_driver_version: int = 12060
    init_error: int | None = None  # e.g. NVML_ERROR_LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED
    missing_symbols: set[str] = field(default_factory=set)  # C symbols the driver lacks
    failures: dict[str, int] = field(default_factory=dict)  # python function name -> error code
    binding: str = "modern"  # "modern" (nvidia-ml-py >= 12) or "legacy" (v1 unsuffixed)
    calls: list[str] = field(default_factory=list)


class _Handle:
    __slots__ = ("gpu", "mig")

    def __init__(self, gpu: FakeGpu, mig: FakeMig | None = None) -> None:
        self.gpu, self.mig = gpu, mig

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Handle) and (self.gpu, self.mig) == (other.gpu, other.mig)

    def __hash__(self) -> int:
        return hash((id(self.gpu), id(self.mig)))

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.mig.uuid if self.mig else self.gpu.uuid}>"


class _Friendly:
    """Like nvidia-ml-py's nvmlFriendlyObject: attributes from a dict, printable."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __repr__(self) -> str:
        return f"<{self.__dict__}>"


def build(system: FakeSystem) -> types.ModuleType:
    """A fresh module object bound to ``system`` (no state shared between tests)."""
    mod = types.ModuleType("pynvml")
    mod.__file__ = __file__
    mod.__dict__["_fake_system"] = system
    for name, value in globals().items():
        if name.startswith(("NVML_", "nvmlMemory_")) or name == "NOT_AVAILABLE":
            mod.__dict__[name] = value

    # -- errors ---------------------------------------------------------------------------
    class NVMLError(Exception):
        _valClassMapping: ClassVar[dict[int, type]] = {}
        _errcode_to_string: ClassVar[dict[int, str]] = dict(_ERROR_TEXT)

        def __new__(typ, value):
            if typ == NVMLError:
                typ = NVMLError._valClassMapping.get(value, typ)
            obj = Exception.__new__(typ)
            obj.value = value
            return obj

        def __str__(self) -> str:
            return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

        def __eq__(self, other: object) -> bool:
            return getattr(other, "value", None) == self.value

        __hash__ = Exception.__hash__

    mod.NVMLError = NVMLError
    for err_name in [n for n in list(mod.__dict__) if n.startswith("NVML_ERROR_")]:
        cls_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""),
                                                  "_").replace("_", "")
        err_val = mod.__dict__[err_name]

        def gen_new(val):
            def new(typ, *args):
                obj = Exception.__new__(typ)
                obj.value = val
                return obj
            return new

        cls = type(cls_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = "pynvml"
        mod.__dict__[cls_name] = cls
        NVMLError._valClassMapping[err_val] = cls

    class NVMLLibraryMismatchError(Exception):
        pass

    mod.NVMLLibraryMismatchError = NVMLLibraryMismatchError
    state = {"refcount": 0}

    def _call(name: str, symbol: str | None = None) -> None:
        system.calls.append(name)
        if state["refcount"] == 0 and name not in ("nvmlInit", "nvmlInitWithFlags"):
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        if (symbol or name) in system.missing_symbols:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        if name in system.failures:
            raise NVMLError(system.failures[name])

    def _h(handle: Any) -> _Handle:
        if not isinstance(handle, _Handle):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return handle

    def _text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    # -- init -----------------------------------------------------------------------------
    def nvmlInit() -> None:
        _call("nvmlInit")
        if system.init_error is not None:
            raise NVMLError(system.init_error)
        state["refcount"] += 1

    def nvmlInitWithFlags(flags: int) -> None:
        nvmlInit()

    def nvmlShutdown() -> None:
        _call("nvmlShutdown")
        state["refcount"] -= 1

    def nvmlSystemGetDriverVersion() -> str:
        _call("nvmlSystemGetDriverVersion")
        return system.driver_version

    def nvmlSystemGetCudaDriverVersion() -> int:
        _call("nvmlSystemGetCudaDriverVersion")
        return system.cuda_driver_version

    # -- handles --------------------------------------------------------------------------
    def nvmlDeviceGetCount() -> int:
        _call("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2")
        return len(system.gpus)

    def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
        _call("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2")
        if not 0 <= int(index) < len(system.gpus):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(system.gpus[int(index)])

    def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle:
        _call("nvmlDeviceGetHandleByUUID")
        text = _text(uuid)
        for gpu in system.gpus:
            if gpu.uuid == text:
                return _Handle(gpu)
            for mig in gpu.migs:
                if mig is not None and mig.uuid == text:
                    return _Handle(gpu, mig)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetHandleByPciBusId(bus_id: str | bytes) -> _Handle:
        _call("nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2")
        want = _norm_bus(_text(bus_id))
        for gpu in system.gpus:
            if _norm_bus(gpu.pci_bus_id) == want:
                return _Handle(gpu)
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    # -- attributes -----------------------------------------------------------------------
    def nvmlDeviceGetName(handle: Any) -> str:
        _call("nvmlDeviceGetName")
        h = _h(handle)
        return (f"MIG {h.mig.memory_total >> 30}GB slice of " + h.gpu.name) if h.mig else h.gpu.name

    def nvmlDeviceGetUUID(handle: Any) -> str:
        _call("nvmlDeviceGetUUID")
        h = _h(handle)
        return h.mig.uuid if h.mig else h.gpu.uuid

    def nvmlDeviceGetIndex(handle: Any) -> int:
        _call("nvmlDeviceGetIndex")
        h = _h(handle)
        if h.mig is not None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # modelled
        return system.gpus.index(h.gpu)

    def nvmlDeviceGetMinorNumber(handle: Any) -> int:
        _call("nvmlDeviceGetMinorNumber")
        return _h(handle).gpu.minor_number

    def nvmlDeviceGetPciInfo(handle: Any) -> _Friendly:
        _call("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3")
        h = _h(handle)
        bus = h.gpu.pci_bus_id
        return _Friendly({"busId": bus, "busIdLegacy": bus[-12:] if len(bus) >= 12 else bus})

    def nvmlDeviceGetMemoryInfo(handle: Any, version: int | None = None) -> _Friendly:
        _call("nvmlDeviceGetMemoryInfo",
              "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo")
        h = _h(handle)
        if h.mig is not None:
            total, reserved = h.mig.memory_total, 0
            used = h.mig.memory_used if h.mig.memory_used is not None else \
                _known_usage(p for p in system.processes if p.device_uuid == h.mig.uuid)
        else:
            total, reserved = h.gpu.memory_total, h.gpu.memory_reserved
            used = h.gpu.memory_used if h.gpu.memory_used is not None else \
                reserved + _known_usage(p for p in system.processes if _on_gpu(p, h.gpu))
        if version:
            return _Friendly({"version": version, "total": total, "reserved": reserved,
                              "free": total - used, "used": used - reserved})
        return _Friendly({"total": total, "free": total - used, "used": used})

    # -- MIG ------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(handle: Any) -> list[int]:
        _call("nvmlDeviceGetMigMode")
        h = _h(handle)
        if h.mig is not None or not h.gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        mode = NVML_DEVICE_MIG_ENABLE if h.gpu.mig_enabled else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceIsMigDeviceHandle(handle: Any) -> int:
        _call("nvmlDeviceIsMigDeviceHandle")
        return 1 if _h(handle).mig is not None else 0

    def nvmlDeviceGetMaxMigDeviceCount(handle: Any) -> int:
        _call("nvmlDeviceGetMaxMigDeviceCount")
        h = _h(handle)
        if not h.gpu.mig_capable:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return max(7, len(h.gpu.migs))

    def nvmlDeviceGetMigDeviceHandleByIndex(handle: Any, index: int) -> _Handle:
        _call("nvmlDeviceGetMigDeviceHandleByIndex")
        h = _h(handle)
        if not h.gpu.mig_enabled:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= index < len(h.gpu.migs) or h.gpu.migs[index] is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(h.gpu, h.gpu.migs[index])

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle: Any) -> _Handle:
        _call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
        h = _h(handle)
        if h.mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(h.gpu)

    def nvmlDeviceGetGpuInstanceId(handle: Any) -> int:
        _call("nvmlDeviceGetGpuInstanceId")
        h = _h(handle)
        if h.mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return h.mig.gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(handle: Any) -> int:
        _call("nvmlDeviceGetComputeInstanceId")
        h = _h(handle)
        if h.mig is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return h.mig.compute_instance_id

    # -- processes ------------------------------------------------------------------------
    def _procs(h: _Handle, with_instance_ids: bool) -> list[_Friendly]:
        if h.mig is not None:
            mine = [p for p in system.processes if p.device_uuid == h.mig.uuid]
        else:
            mine = [p for p in system.processes if _on_gpu(p, h.gpu)]
        out = []
        for p in mine:
            used = NOT_AVAILABLE if p.used_bytes is None else p.used_bytes
            values: dict[str, Any] = {"pid": p.reported_pid, "usedGpuMemory": used}
            if with_instance_ids:
                mig = _mig_of(p, h.gpu)
                values["gpuInstanceId"] = mig.gpu_instance_id if mig else 0xFFFFFFFF
                values["computeInstanceId"] = mig.compute_instance_id if mig else 0xFFFFFFFF
            obj = _Friendly(values)
            if with_instance_ids and obj.usedGpuMemory == NOT_AVAILABLE:
                obj.usedGpuMemory = None  # what the _v2/_v3 wrappers do
            out.append(obj)
        return out

    def nvmlDeviceGetComputeRunningProcesses_v3(handle: Any) -> list[_Friendly]:
        _call("nvmlDeviceGetComputeRunningProcesses_v3")
        return _procs(_h(handle), True)

    def nvmlDeviceGetComputeRunningProcesses_v2(handle: Any) -> list[_Friendly]:
        _call("nvmlDeviceGetComputeRunningProcesses_v2")
        return _procs(_h(handle), True)

    def nvmlDeviceGetComputeRunningProcesses(handle: Any) -> list[_Friendly]:
        if system.binding == "legacy":  # nvidia-ml-py < 12: the v1 C symbol, v1 struct
            _call("nvmlDeviceGetComputeRunningProcesses")
            objs = _procs(_h(handle), False)
            for o in objs:  # legacy wrappers also mapped the sentinel to None
                if o.usedGpuMemory == NOT_AVAILABLE:
                    o.usedGpuMemory = None
            return objs
        system.calls.append("nvmlDeviceGetComputeRunningProcesses")
        try:
            return nvmlDeviceGetComputeRunningProcesses_v3(handle)
        except mod.NVMLError_FunctionNotFound:
            raise NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not match the NVML "
                "lib version. Either use matching pyNVML and NVML lib versions or use a "
                "versioned function such as nvmlDeviceGetComputeRunningProcesses_v2") from None

    def nvmlErrorString(code: int) -> str:
        return _ERROR_TEXT.get(code, f"NVML Error with code {code}")

    for fn in (nvmlInit, nvmlInitWithFlags, nvmlShutdown, nvmlSystemGetDriverVersion,
               nvmlSystemGetCudaDriverVersion, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex,
               nvmlDeviceGetHandleByUUID, nvmlDeviceGetHandleByPciBusId, nvmlDeviceGetName,
               nvmlDeviceGetUUID, nvmlDeviceGetIndex, nvmlDeviceGetMinorNumber,
               nvmlDeviceGetPciInfo, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMigMode,
               nvmlDeviceIsMigDeviceHandle, nvmlDeviceGetMaxMigDeviceCount,
               nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
               nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId,
               nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetComputeRunningProcesses_v2,
               nvmlDeviceGetComputeRunningProcesses, nvmlErrorString):
        mod.__dict__[fn.__name__] = fn
    return mod


def _norm_bus(bus: str) -> str:
    """"0000:3b:00.0" and "00000000:3B:00.0" name the same device."""
    parts = bus.strip().lower().split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):08x}:{parts[1]}:{parts[2]}"
    return "00000000:" + ":".join(parts)


def _on_gpu(p: FakeProcess, gpu: FakeGpu) -> bool:
    return p.device_uuid == gpu.uuid or any(m is not None and m.uuid == p.device_uuid
                                            for m in gpu.migs)


def _mig_of(p: FakeProcess, gpu: FakeGpu) -> FakeMig | None:
    return next((m for m in gpu.migs if m is not None and m.uuid == p.device_uuid), None)


def _known_usage(procs) -> int:
    return sum(p.used_bytes for p in procs if p.used_bytes)
