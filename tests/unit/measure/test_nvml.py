"""vramtune's NVML layer against the fake pynvml: which devices, which figures, and when a
figure is refused rather than guessed."""

import pytest

from tests.fakes.fake_pynvml import (
    NVML_ERROR_NO_PERMISSION,
    FakeGpu,
    FakeMig,
    FakeProcess,
    FakeSystem,
)
from vramtune.errors import UserError
from vramtune.measure.nvml import GpuMonitor, Nvml

GIB = 1 << 30
GPU0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
GPU1 = "GPU-18ef14e9-dec6-1d7e-1284-3010c6ce98b1"
CARD = "GPU-3eb79704-1571-707c-aee8-f43ce747313d"
MIG_A = "MIG-d184f67c-c95f-5ef2-a935-195bd0094fbd"
MIG_B = "MIG-37b51284-1df4-5451-979d-3231ccb0822e"
ME = 4242  # the trial's PID in these tests


def two_gpus(**kw) -> FakeSystem:
    return FakeSystem(gpus=[FakeGpu(GPU0, pci_bus_id="00000000:18:00.0", memory_total=80 * GIB),
                            FakeGpu(GPU1, pci_bus_id="00000000:3B:00.0", memory_total=80 * GIB)],
                      **kw)


def mig_card(**kw) -> FakeSystem:
    return FakeSystem(gpus=[FakeGpu(CARD, memory_total=80 * GIB, mig_capable=True,
                                    mig_enabled=True,
                                    migs=[FakeMig(MIG_A, 13, 0, 10 * GIB), None,
                                          FakeMig(MIG_B, 11, 0, 20 * GIB)])], **kw)


# -- which devices ---------------------------------------------------------------------------

def test_unset_sees_every_gpu_in_pci_order(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    fake_nvml(two_gpus())
    nvml = Nvml()
    assert nvml.available and nvml.uuids == (GPU0, GPU1)
    assert nvml.info.uuid == GPU0 and nvml.info.total_bytes == 80 * GIB and not nvml.notes


def test_a_uuid_prefix_cuda_accepts_resolves_to_the_full_uuid(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-18ef14e9")  # NVML alone says NotFound
    fake_nvml(two_gpus())
    nvml = Nvml()
    assert nvml.available and nvml.uuids == (GPU1,) and nvml.info.index == 1


def test_legacy_mig_form_resolves_to_the_slice(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"MIG-{CARD}/11/0")
    fake_nvml(mig_card())
    nvml = Nvml()
    assert nvml.uuids == (MIG_B,) and nvml.info.mig and nvml.info.total_bytes == 20 * GIB


def test_mig_enabled_with_the_variable_unset_is_the_first_slice_not_the_card(fake_nvml):
    fake_nvml(mig_card())
    nvml = Nvml()
    assert nvml.uuids == (MIG_A,) and nvml.info.total_bytes == 10 * GIB  # not 80 GiB
    assert any("MIG enabled" in n for n in nvml.notes)


def test_integer_under_fastest_first_is_flagged_uncertain(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    fake_nvml(two_gpus())
    nvml = Nvml()
    assert nvml.uuids == (GPU1,) and any("FASTEST_FIRST" in n for n in nvml.notes)


def test_empty_variable_means_no_gpu(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    fake_nvml(two_gpus())
    nvml = Nvml()
    assert not nvml.available and "no GPU" in nvml.notice


def test_driver_missing_is_a_notice_not_a_failure(fake_nvml):
    from tests.fakes.fake_pynvml import NVML_ERROR_LIBRARY_NOT_FOUND

    fake_nvml(FakeSystem(init_error=NVML_ERROR_LIBRARY_NOT_FOUND))
    nvml = Nvml()
    assert not nvml.available and "NVML unavailable" in nvml.notice
    assert nvml.process_used_bytes() is None and nvml.device_used_bytes() is None


def test_pick_more_devices_than_visible_is_a_user_error(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU1)
    fake_nvml(two_gpus())
    nvml = Nvml()
    assert [d.uuid for d in nvml.pick(1)] == [GPU1]
    with pytest.raises(UserError, match="only 1 GPU"):
        nvml.pick(2)


# -- per-process figures: v3 -> v2 -> v1, None and 0 ---------------------------------------

def test_v3_then_v2_then_legacy_v1(fake_nvml):
    system = two_gpus(processes=[FakeProcess(ME, GPU0, 5 * GIB)])
    fake_nvml(system)
    nvml = Nvml()
    assert nvml.process_used_bytes() == {ME: 5 * GIB}
    system.missing_symbols.add("nvmlDeviceGetComputeRunningProcesses_v3")
    assert nvml.process_used_bytes() == {ME: 5 * GIB}
    assert system.calls[-1] == "nvmlDeviceGetComputeRunningProcesses_v2"
    system.missing_symbols.add("nvmlDeviceGetComputeRunningProcesses_v2")
    system.binding = "legacy"  # nvidia-ml-py < 12: the unsuffixed call is v1
    assert nvml.process_used_bytes() == {ME: 5 * GIB}
    system.binding = "modern"  # >= 12: unsuffixed is v3 again -> NVMLLibraryMismatchError
    assert nvml.process_used_bytes() is None


def test_zero_and_not_available_are_unknown(fake_nvml):
    fake_nvml(two_gpus(processes=[FakeProcess(ME, GPU0, 0), FakeProcess(7, GPU0, None)]))
    assert Nvml().process_used_bytes() == {ME: None, 7: None}


def test_other_nvml_errors_are_cannot_tell_not_no_process(fake_nvml):
    fake_nvml(two_gpus(processes=[FakeProcess(ME, GPU0, GIB)],
                       failures={"nvmlDeviceGetComputeRunningProcesses_v3":
                                 NVML_ERROR_NO_PERMISSION}))
    assert Nvml().process_used_bytes() is None


# -- one trial's peaks ------------------------------------------------------------------------

def test_known_figure_is_the_process_peak(fake_nvml):
    system = two_gpus()
    fake_nvml(system)
    monitor = GpuMonitor(Nvml())
    system.processes.append(FakeProcess(ME, GPU0, 3 * GIB))
    assert monitor.sample({ME}) == 3 * GIB
    system.processes[0].used_bytes = 2 * GIB
    monitor.sample({ME})
    peaks = monitor.peaks()
    assert peaks.process_peak_max_bytes == 3 * GIB and not peaks.notes


def test_namespaced_pid_with_zero_falls_back_to_device_used_when_alone(fake_nvml):
    system = two_gpus()
    fake_nvml(system)
    monitor = GpuMonitor(Nvml())
    system.gpus[0].memory_used = 6 * GIB  # what the device says while we run
    system.processes.append(FakeProcess(ME, GPU0, 0))  # HAMi-core#112
    assert monitor.sample({ME}) is None
    peaks = monitor.peaks()
    assert peaks.process_peak_max_bytes == 6 * GIB  # never 0: 0 would "fit" anything
    assert "minus the pre-trial baseline" in peaks.notes[0]


def test_fallback_refused_when_another_compute_process_shares_the_device(fake_nvml):
    system = two_gpus()
    fake_nvml(system)
    monitor = GpuMonitor(Nvml())
    system.processes += [FakeProcess(ME, GPU0, 0), FakeProcess(99, GPU0, 9 * GIB)]
    monitor.sample({ME})
    peaks = monitor.peaks()
    assert peaks.process_peak_max_bytes is None
    assert "other compute processes" in peaks.notes[0]


def test_fallback_refused_when_a_process_was_there_before_the_trial(fake_nvml):
    system = two_gpus(processes=[FakeProcess(99, GPU0, 9 * GIB)])
    fake_nvml(system)
    monitor = GpuMonitor(Nvml())
    system.processes[0].used_bytes = 12 * GIB  # the neighbour grows during our trial
    system.processes.append(FakeProcess(ME, GPU0, 4 * GIB, nvml_pid=645400))  # host PID
    monitor.sample({ME})
    assert monitor.peaks().process_peak_max_bytes is None


def test_host_pid_alone_falls_back(fake_nvml):
    # older drivers in containers: NVML reports the host PID, which is not ours
    system = two_gpus()
    fake_nvml(system)
    monitor = GpuMonitor(Nvml())
    system.processes.append(FakeProcess(ME, GPU0, 4 * GIB, nvml_pid=645400))
    monitor.sample({ME})
    assert monitor.peaks().process_peak_max_bytes == 4 * GIB


def test_several_devices_have_their_own_peaks(fake_nvml):
    system = two_gpus()
    fake_nvml(system)
    monitor = GpuMonitor(Nvml(), (GPU0, GPU1))
    system.processes += [FakeProcess(ME, GPU0, 3 * GIB), FakeProcess(ME, GPU1, 5 * GIB)]
    assert monitor.sample({ME}) == 8 * GIB
    peaks = monitor.peaks()
    assert peaks.process_peak_bytes == [3 * GIB, 5 * GIB]
    assert peaks.process_peak_max_bytes == 5 * GIB  # budgets are per device
