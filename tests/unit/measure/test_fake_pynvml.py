"""The fake pynvml itself: its surface matches the installed nvidia-ml-py, its behaviour the
bindings' source (errors, v3/v2/v1, None and 0 memory, MIG, container PIDs)."""

import importlib
import sys

import pytest

from tests.fakes import fake_pynvml as fake
from tests.fakes.fake_pynvml import FakeGpu, FakeMig, FakeProcess, FakeSystem

GPU0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
GPU1 = "GPU-18ef14e9-dec6-1d7e-1284-3010c6ce98b1"
MIG_A = "MIG-d184f67c-c95f-5ef2-a935-195bd0094fbd"
MIG_B = "MIG-37b51284-1df4-5451-979d-3231ccb0822e"
GIB = 1 << 30


def two_gpus(**kw) -> FakeSystem:
    return FakeSystem(gpus=[FakeGpu(GPU0, pci_bus_id="00000000:18:00.0", memory_total=80 * GIB,
                                    memory_reserved=512 << 20),
                            FakeGpu(GPU1, pci_bus_id="00000000:3B:00.0", memory_total=80 * GIB)],
                      **kw)


def mig_system(**kw) -> FakeSystem:
    card = FakeGpu("GPU-3eb79704-1571-707c-aee8-f43ce747313d", memory_total=80 * GIB,
                   mig_capable=True, mig_enabled=True,
                   migs=[FakeMig(MIG_A, 13, 0, 10 * GIB), None, FakeMig(MIG_B, 11, 0, 20 * GIB)])
    return FakeSystem(gpus=[card], **kw)


@pytest.fixture
def inject(monkeypatch):
    """The way a vramtune test would do it: the fake *is* pynvml for `import pynvml`."""
    def _inject(system: FakeSystem):
        mod = fake.build(system)
        monkeypatch.setitem(sys.modules, "pynvml", mod)
        mod.nvmlInit()
        return mod
    return _inject


# -- a minimal consumer with the semantics issue 12 asks for (what vramtune's nvml.py should do)

def per_process(pynvml, handle) -> tuple[dict[int, int | None], str]:
    """pid -> bytes or None (unknown; 0 counts as unknown), and which function answered."""
    for name in ("nvmlDeviceGetComputeRunningProcesses_v3",
                 "nvmlDeviceGetComputeRunningProcesses_v2",
                 "nvmlDeviceGetComputeRunningProcesses"):
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        try:
            procs = fn(handle)
        except pynvml.NVMLError_FunctionNotFound:
            continue
        except pynvml.NVMLLibraryMismatchError:
            continue
        return {int(p.pid): (int(p.usedGpuMemory) if p.usedGpuMemory else None)
                for p in procs}, name
    return {}, "none"


# -- bindings surface -----------------------------------------------------------------------

def test_every_fake_function_and_constant_exists_in_the_real_bindings():
    real = importlib.import_module("pynvml")  # nvidia-ml-py in the venv; no driver needed
    if getattr(real, "_fake_system", None) is not None:
        pytest.skip("a fake is installed")
    mod = fake.build(FakeSystem())
    ours = {n for n in vars(mod) if n.startswith(("nvml", "NVML"))}
    missing = sorted(n for n in ours if not hasattr(real, n))
    assert missing == []
    for name in ("NVML_ERROR_FUNCTION_NOT_FOUND", "NVML_ERROR_NOT_FOUND", "NVML_DEVICE_MIG_ENABLE",
                 "nvmlMemory_v2"):
        assert getattr(mod, name) == getattr(real, name)
    assert mod.NVML_VALUE_NOT_AVAILABLE_ulonglong.value == real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
    assert str(mod.NVMLError(real.NVML_ERROR_NOT_FOUND)) == "Not Found"


def test_error_classes_behave_like_the_real_ones():
    mod = fake.build(FakeSystem())
    err = mod.NVMLError(mod.NVML_ERROR_FUNCTION_NOT_FOUND)
    assert type(err) is mod.NVMLError_FunctionNotFound
    assert isinstance(err, mod.NVMLError) and err.value == 13
    assert str(err) == "Function Not Found"
    assert mod.NVMLError_NotFound() == mod.NVMLError(mod.NVML_ERROR_NOT_FOUND)
    assert not issubclass(mod.NVMLLibraryMismatchError, mod.NVMLError)


def test_calls_before_init_raise_uninitialized():
    mod = fake.build(two_gpus())
    with pytest.raises(mod.NVMLError_Uninitialized):
        mod.nvmlDeviceGetCount()


@pytest.mark.parametrize("code,cls", [(fake.NVML_ERROR_LIBRARY_NOT_FOUND, "NVMLError_LibraryNotFound"),
                                      (fake.NVML_ERROR_DRIVER_NOT_LOADED, "NVMLError_DriverNotLoaded")])
def test_init_failures(code, cls):
    mod = fake.build(FakeSystem(init_error=code))
    with pytest.raises(getattr(mod, cls)):
        mod.nvmlInit()


def test_injection_reaches_import_pynvml(inject):
    inject(two_gpus())
    import pynvml
    assert pynvml.nvmlDeviceGetCount() == 2


# -- handles --------------------------------------------------------------------------------

def test_handles_by_index_uuid_pci(inject):
    nv = inject(two_gpus())
    h = nv.nvmlDeviceGetHandleByUUID(GPU1)
    assert h == nv.nvmlDeviceGetHandleByIndex(1) == nv.nvmlDeviceGetHandleByPciBusId("0000:3b:00.0")
    assert nv.nvmlDeviceGetIndex(h) == 1 and nv.nvmlDeviceGetUUID(h) == GPU1
    assert nv.nvmlDeviceGetHandleByUUID(GPU1.encode()) == h  # bytes, as convertStrBytes allows


def test_uuid_prefix_is_not_accepted_by_nvml(inject):
    nv = inject(two_gpus())
    with pytest.raises(nv.NVMLError_NotFound):
        nv.nvmlDeviceGetHandleByUUID("GPU-18ef14e9")  # CUDA takes this; NVML does not


def test_bad_index(inject):
    nv = inject(two_gpus())
    with pytest.raises(nv.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetHandleByIndex(2)


def test_memory_info_v1_and_v2(inject):
    sysm = two_gpus(processes=[FakeProcess(100, GPU0, 3 * GIB)])
    nv = inject(sysm)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    v1 = nv.nvmlDeviceGetMemoryInfo(h)
    assert (v1.total, v1.used) == (80 * GIB, 3 * GIB + (512 << 20))
    v2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
    assert (v2.reserved, v2.used, v2.free) == (512 << 20, 3 * GIB, v1.free)
    sysm.missing_symbols.add("nvmlDeviceGetMemoryInfo_v2")  # an old driver
    with pytest.raises(nv.NVMLError_FunctionNotFound):
        nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)


# -- MIG -------------------------------------------------------------------------------------

def test_mig_handles_and_memory(inject):
    nv = inject(mig_system())
    card = nv.nvmlDeviceGetHandleByIndex(0)
    assert nv.nvmlDeviceGetMigMode(card) == [nv.NVML_DEVICE_MIG_ENABLE] * 2
    assert nv.nvmlDeviceGetMemoryInfo(card).total == 80 * GIB  # the whole card
    a = nv.nvmlDeviceGetMigDeviceHandleByIndex(card, 0)
    assert nv.nvmlDeviceGetUUID(a) == MIG_A and nv.nvmlDeviceGetMemoryInfo(a).total == 10 * GIB
    assert nv.nvmlDeviceIsMigDeviceHandle(a) and not nv.nvmlDeviceIsMigDeviceHandle(card)
    assert (nv.nvmlDeviceGetGpuInstanceId(a), nv.nvmlDeviceGetComputeInstanceId(a)) == (13, 0)
    assert nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(a) == card
    with pytest.raises(nv.NVMLError_NotFound):
        nv.nvmlDeviceGetMigDeviceHandleByIndex(card, 1)  # a hole
    b = nv.nvmlDeviceGetHandleByUUID(MIG_B)
    assert nv.nvmlDeviceGetMemoryInfo(b).total == 20 * GIB
    with pytest.raises(nv.NVMLError_InvalidArgument):
        nv.nvmlDeviceGetIndex(b)


def test_mig_mode_not_supported_on_a_plain_gpu(inject):
    nv = inject(two_gpus())
    with pytest.raises(nv.NVMLError_NotSupported):
        nv.nvmlDeviceGetMigMode(nv.nvmlDeviceGetHandleByIndex(0))


def test_processes_on_mig(inject):
    nv = inject(mig_system(processes=[FakeProcess(10, MIG_A, GIB), FakeProcess(11, MIG_B, 2 * GIB)]))
    card = nv.nvmlDeviceGetHandleByIndex(0)
    on_card = nv.nvmlDeviceGetComputeRunningProcesses_v3(card)
    assert {(p.pid, p.gpuInstanceId) for p in on_card} == {(10, 13), (11, 11)}
    on_a = nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByUUID(MIG_A))
    assert [(p.pid, p.usedGpuMemory) for p in on_a] == [(10, GIB)]


# -- processes: fallback, None, 0 ------------------------------------------------------------

def test_v3_used_when_present(inject):
    sysm = two_gpus(processes=[FakeProcess(100, GPU0, 5 * GIB)])
    nv = inject(sysm)
    got, via = per_process(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert got == {100: 5 * GIB} and via.endswith("_v3")


def test_v3_missing_falls_back_to_v2(inject):
    sysm = two_gpus(processes=[FakeProcess(100, GPU0, 5 * GIB)],
                    missing_symbols={"nvmlDeviceGetComputeRunningProcesses_v3"})
    nv = inject(sysm)
    got, via = per_process(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert got == {100: 5 * GIB} and via.endswith("_v2")
    assert sysm.calls[-2:] == ["nvmlDeviceGetComputeRunningProcesses_v3",
                               "nvmlDeviceGetComputeRunningProcesses_v2"]


def test_modern_unsuffixed_is_v3_and_raises_library_mismatch(inject):
    sysm = two_gpus(missing_symbols={"nvmlDeviceGetComputeRunningProcesses_v3",
                                     "nvmlDeviceGetComputeRunningProcesses_v2"})
    nv = inject(sysm)
    with pytest.raises(nv.NVMLLibraryMismatchError):
        nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(0))
    assert per_process(nv, nv.nvmlDeviceGetHandleByIndex(0)) == ({}, "none")


def test_legacy_unsuffixed_is_v1(inject):
    sysm = two_gpus(processes=[FakeProcess(100, GPU0, 5 * GIB)], binding="legacy",
                    missing_symbols={"nvmlDeviceGetComputeRunningProcesses_v3",
                                     "nvmlDeviceGetComputeRunningProcesses_v2"})
    nv = inject(sysm)
    got, via = per_process(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert got == {100: 5 * GIB} and via == "nvmlDeviceGetComputeRunningProcesses"
    (p,) = nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(0))
    assert not hasattr(p, "gpuInstanceId")  # v1 struct


def test_not_available_becomes_none(inject):
    nv = inject(two_gpus(processes=[FakeProcess(100, GPU0, None)]))
    (p,) = nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByIndex(0))
    assert p.usedGpuMemory is None


def test_namespaced_pid_with_zero_memory_is_unknown_not_fits(inject):
    # HAMi-core#112 (driver 560.35.03): the container PID comes back, with mem: 0
    nv = inject(two_gpus(processes=[FakeProcess(324, GPU0, 0)]))
    got, _ = per_process(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert got == {324: None}
    # the raw figure really is 0: a consumer that trusts it would record "0 B, fits"
    (p,) = nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByIndex(0))
    assert p.usedGpuMemory == 0


def test_host_pid_in_container_does_not_match_ours(inject):
    # older drivers: NVML reports the host PID (NVIDIA/nvidia-docker#1483)
    nv = inject(two_gpus(processes=[FakeProcess(324, GPU0, 4 * GIB, nvml_pid=645400)]))
    got, _ = per_process(nv, nv.nvmlDeviceGetHandleByIndex(0))
    assert 324 not in got and got[645400] == 4 * GIB


def test_device_used_counts_other_processes(inject):
    # why device-used-minus-baseline must be refused when others run on the card
    sysm = two_gpus(processes=[FakeProcess(324, GPU0, 0), FakeProcess(9, GPU0, 6 * GIB)])
    nv = inject(sysm)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    before = nv.nvmlDeviceGetMemoryInfo(h).used
    sysm.processes[1].used_bytes = 9 * GIB  # the neighbour grows during our trial
    assert nv.nvmlDeviceGetMemoryInfo(h).used - before == 3 * GIB
    assert len(nv.nvmlDeviceGetComputeRunningProcesses_v3(h)) == 2  # others are visible


def test_injected_failure(inject):
    sysm = two_gpus(failures={"nvmlDeviceGetComputeRunningProcesses_v3": fake.NVML_ERROR_NO_PERMISSION})
    nv = inject(sysm)
    with pytest.raises(nv.NVMLError_NoPermission):
        nv.nvmlDeviceGetComputeRunningProcesses_v3(nv.nvmlDeviceGetHandleByIndex(0))
