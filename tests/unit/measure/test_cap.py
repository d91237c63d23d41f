"""The cap: arithmetic, the platform it is for, and the child's environment as jaxlib itself
reads it (xla_client.generate_pjrt_gpu_plugin_options(), in a subprocess, no GPU needed)."""

import pytest

from tests.fakes.fake_pynvml import FakeGpu, FakeSystem
from vramtune.errors import UserError
from vramtune.machine import gpu_plugin_options, mem_fraction_var
from vramtune.measure.cap import (
    DEFAULT_GPU_FRACTION,
    backend,
    cpu_cap,
    gpu_cap,
    gpu_fraction,
    plan_cap,
    plan_gpu_cap,
    requested_platform,
)
from vramtune.measure.nvml import Nvml
from vramtune.measure.process import child_env

GB = 10**9
GIB = 1 << 30
GPU0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
GPU1 = "GPU-18ef14e9-dec6-1d7e-1284-3010c6ce98b1"


def test_no_budget_takes_095_not_jax_075():
    assert gpu_fraction(None, None, 80 * GB) == DEFAULT_GPU_FRACTION == 0.95


def test_no_budget_on_a_small_card_leaves_room_for_the_context():
    # 5% of 8 GB is 400 MB; a measured 600 MB context needs more (cuBLAS init OOM, jax#7118)
    assert gpu_fraction(None, 600 * 10**6, 8 * GB) == pytest.approx(7.4 / 8)


def test_emulating_8gb_on_80gb_subtracts_the_overhead():
    assert gpu_fraction(8 * GB, GB // 2, 80 * GB) == pytest.approx(7.5 / 80)


def test_budget_below_overhead_is_a_user_error():
    with pytest.raises(UserError, match="overhead"):
        gpu_fraction(GB // 4, GB // 2, 80 * GB)


def test_budget_above_card_leaves_room_for_the_overhead():
    assert gpu_fraction(100 * GB, GB, 80 * GB) == pytest.approx(79 / 80)
    assert gpu_fraction(100 * GB, None, 80 * GB) == DEFAULT_GPU_FRACTION


def test_installed_jaxlib_reads_exactly_one_fraction_variable():
    # asked of jaxlib 0.9.2 itself: it reads XLA_CLIENT_MEM_FRACTION (openxla/xla PR #16457)
    assert mem_fraction_var() == "XLA_CLIENT_MEM_FRACTION"


@pytest.mark.parametrize("value,first", [("cuda,cpu", "cuda"), ("cpu,cuda", "cpu"),
                                         (" cuda , cpu", "cuda"), ("", None), (",", None),
                                         ("CUDA", "cuda")])
def test_jax_platforms_is_a_list_in_priority_order(value, first):
    assert requested_platform(value) == first


def test_cuda_first_without_a_cuda_plugin_is_a_user_error_not_a_cpu_cap(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cuda,cpu")  # read as one string, this was "cpu"
    with pytest.raises(UserError, match="no CUDA plugin"):
        plan_cap(GB, None, None)


def test_other_platforms_are_refused(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    with pytest.raises(UserError, match="cuda or cpu"):
        plan_cap(None, None, None)


def test_cpu_cap_is_rlimit_data_with_preallocation_off(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu,cuda")
    cap = plan_cap(2 * GB, None, None)
    assert cap.rlimit_data_bytes == 2 * GB and cap.description == "RLIMIT_DATA=2000000000"
    assert cap.env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert cap.env["JAX_PLATFORMS"] == "cpu" and cap.env["JAX_NUM_CPU_DEVICES"] == "1"
    assert not any("MEM_FRACTION" in k for k in cap.env) and cap.cache_tag is None


def test_no_budget_on_cpu_means_no_cap():
    cap = plan_cap(None, None, None)
    assert cap.rlimit_data_bytes is None and cap.description is None


def test_cpu_devices_are_set_by_jax_num_cpu_devices():
    assert cpu_cap(None, 2).env["JAX_NUM_CPU_DEVICES"] == "2" and cpu_cap(None, 2).device_count == 2


@pytest.mark.parametrize("devices", [0, -1, True])
def test_devices_must_be_positive(devices):
    with pytest.raises(UserError, match="--devices"):
        plan_cap(None, None, None, devices=devices)


# -- the GPU child's environment, as jaxlib reads it -----------------------------------------

def _cap(budget=8 * GB, total=80 * GIB, overhead=GB // 2, var="XLA_CLIENT_MEM_FRACTION"):
    return gpu_cap(budget, overhead, total, uuids=(GPU0,), fraction_var=var)


def test_gpu_cap_pins_the_device_and_forces_cuda_and_the_bfc_pool():
    cap = _cap()
    assert cap.env["JAX_PLATFORMS"] == "cuda"  # never "gpu" (jax#25315)
    assert cap.env["CUDA_VISIBLE_DEVICES"] == GPU0 and cap.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert cap.env["XLA_PYTHON_CLIENT_ALLOCATOR"] == "bfc"
    assert cap.unset == ("XLA_PYTHON_CLIENT_MEM_FRACTION",)
    assert cap.pool_limit_bytes == pytest.approx(7.5 * GB, rel=1e-6)
    assert cap.cache_tag == f"gpu-pool-{cap.pool_limit_bytes}"
    assert cap.description == f"XLA_CLIENT_MEM_FRACTION={cap.env['XLA_CLIENT_MEM_FRACTION']}"


def test_fraction_is_written_with_enough_digits_for_a_small_budget_on_a_big_card():
    cap = gpu_cap(GB, 300 * 10**6, 141 * GB, uuids=(GPU0,), fraction_var="XLA_CLIENT_MEM_FRACTION")
    assert abs(cap.pool_limit_bytes - 700 * 10**6) < 0.0001 * 700 * 10**6


@pytest.mark.parametrize("hostile", [
    {},
    {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"},  # both set: jaxlib raises, JAX falls to CPU
    {"XLA_CLIENT_MEM_FRACTION": "0.9", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},  # no pool
    {"XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
])
def test_child_env_is_what_jaxlib_reads_as_the_planned_cap(monkeypatch, hostile):
    for key, value in hostile.items():
        monkeypatch.setenv(key, value)
    cap = _cap()
    options = gpu_plugin_options(child_env(cap))
    assert "error" not in options, options
    assert options["memory_fraction"] == cap.fraction
    assert options["allocator"] == "bfc" and options["preallocate"] is False
    assert abs(int(options["memory_fraction"] * 80 * GIB) - cap.pool_limit_bytes) <= 1


def test_the_old_variable_name_is_emitted_for_a_jaxlib_that_reads_only_it(monkeypatch):
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", "0.9")
    cap = _cap(var="XLA_PYTHON_CLIENT_MEM_FRACTION")
    env = child_env(cap)
    assert "XLA_CLIENT_MEM_FRACTION" not in env  # never both
    assert gpu_plugin_options(env)["memory_fraction"] == cap.fraction


def test_without_the_cleaning_jaxlib_would_not_start_the_plugin(monkeypatch):
    # what the child would get by inheriting the user's variables: the check above is real
    env = {"XLA_CLIENT_MEM_FRACTION": "0.1", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}
    assert "specified together" in gpu_plugin_options(env)["error"]
    assert gpu_plugin_options({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"})["allocator"] == "platform"


def test_room_for_warp_s_own_pool_comes_off_the_budget_before_the_fraction():
    cap = gpu_cap(8 * GB, GB // 2, 80 * GIB, uuids=(GPU0,), fraction_var="XLA_CLIENT_MEM_FRACTION",
                  outside_room_bytes=GB)
    assert cap.pool_limit_bytes == pytest.approx(6.5 * GB, rel=1e-6)
    assert cap.outside_room_bytes == GB and cap.cache_tag != _cap().cache_tag
    assert any("left outside XLA's pool for MJX-Warp" in n for n in cap.notes)
    # more than half of what the budget leaves past the overhead: cut to half, said so
    cut = gpu_cap(8 * GB, GB // 2, 80 * GIB, uuids=(GPU0,), fraction_var="XLA_CLIENT_MEM_FRACTION",
                  outside_room_bytes=20 * GB)
    assert cut.outside_room_bytes == 3.75 * GB
    assert cut.pool_limit_bytes == pytest.approx(3.75 * GB, rel=1e-6)
    assert any("cut to" in n and "predicted" in n for n in cut.notes)
    assert _cap().outside_room_bytes is None  # none asked: the fraction as before


def test_a_cpu_cap_needs_no_room_outside_the_pool(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    cap = plan_cap(GB, None, None, outside_room_bytes=GB // 4)
    assert cap.rlimit_data_bytes == GB and cap.outside_room_bytes is None  # Warp's arrays count


# -- planned from NVML (the fake) ------------------------------------------------------------

def test_gpu_cap_from_nvml_uses_the_runtime_total_when_measured(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-18ef")  # a prefix CUDA accepts
    fake_nvml(FakeSystem(gpus=[FakeGpu(GPU0, pci_bus_id="0:18:00.0", memory_total=80 * GIB),
                               FakeGpu(GPU1, pci_bus_id="0:3b:00.0", memory_total=80 * GIB)]))
    nvml = Nvml()
    runtime = 79 * GIB  # cuMemGetInfo's total: less than NVML's
    cap = plan_gpu_cap(8 * GB, nvml, GB // 2, runtime_total_bytes=runtime)
    assert cap.visible_uuids == (GPU1,) and cap.env["CUDA_VISIBLE_DEVICES"] == GPU1
    assert cap.total_bytes == runtime and cap.total_source == "CUDA runtime"
    assert cap.pool_limit_bytes == pytest.approx(7.5 * GB, rel=1e-6)
    by_nvml = plan_gpu_cap(8 * GB, nvml, GB // 2)
    assert by_nvml.total_source == "NVML" and any("NVML's total" in n for n in by_nvml.notes)
    roomy = plan_gpu_cap(8 * GB, nvml, GB // 2, runtime_total_bytes=runtime,
                         outside_room_bytes=GB)
    assert roomy.pool_limit_bytes == pytest.approx(6.5 * GB, rel=1e-6)
    assert roomy.outside_room_bytes == GB


def test_backend_is_the_one_plan_cap_would_plan_on(fake_nvml, monkeypatch):
    from vramtune import machine

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert backend(None) == plan_cap(None, None, None).backend == "cpu"
    monkeypatch.delenv("JAX_PLATFORMS")
    monkeypatch.setattr(machine, "has_cuda_jax", lambda: True)  # a CUDA build of jax
    assert backend(None) == plan_cap(None, None, None).backend == "unknown"  # no NVML
    fake_nvml(FakeSystem(gpus=[FakeGpu(GPU0, pci_bus_id="0:18:00.0", memory_total=80 * GIB)]))
    nvml = Nvml()
    assert backend(nvml) == plan_cap(None, nvml, None).backend == "gpu"
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    with pytest.raises(UserError, match="cuda or cpu"):
        backend(nvml)


def test_several_gpus_of_different_sizes_are_refused(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    fake_nvml(FakeSystem(gpus=[FakeGpu(GPU0, pci_bus_id="0:18:00.0", memory_total=24 * GIB),
                               FakeGpu(GPU1, pci_bus_id="0:3b:00.0", memory_total=80 * GIB)]))
    nvml = Nvml()
    assert plan_gpu_cap(None, nvml, None, devices=1).visible_uuids == (GPU0,)
    with pytest.raises(UserError, match="differ in size"):
        plan_gpu_cap(None, nvml, None, devices=2)


def test_trials_join_a_batch_only_while_their_caps_fit_the_device():
    from vramtune.measure.executor import may_join

    GB = 10**9
    assert may_join([], 9 * GB, False, 2, 4 * GB)  # the first always starts
    assert may_join([(2 * GB, False)], 2 * GB, False, 2, 4 * GB)
    assert not may_join([(2 * GB, False)], 3 * GB, False, 2, 4 * GB)  # caps over the device
    assert not may_join([(1 * GB, False), (1 * GB, False)], 1 * GB, False, 2, 4 * GB)  # K full
    assert not may_join([(1 * GB, False)], 1 * GB, True, 4, 8 * GB)  # it must run alone
    assert not may_join([(1 * GB, True)], 1 * GB, False, 4, 8 * GB)  # the running one must


def test_parallel_trials_are_bounded_by_the_host_memory_available():
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.executor import LocalExecutor

    small = LocalExecutor(plan_cap(10**9, None, None), parallel=2, standby=False)
    assert small.parallel == 2 and small.parallel_note is None  # 2 x 1 GB fit this host
    huge = LocalExecutor(plan_cap(10**15, None, None), parallel=4, standby=False)
    assert huge.parallel == 1 and "host's available memory" in huge.parallel_note
    uncapped = LocalExecutor(parallel=3, standby=False)
    assert uncapped.parallel == 1 and "without a budget" in uncapped.parallel_note
    assert LocalExecutor(parallel=1).parallel_note is None


def test_auto_parallel_plans_capped_trials_from_the_free_memory_of_the_card(fake_nvml,
                                                                           monkeypatch):
    from vramtune.measure import executor as ex

    # An 80 GB H100 (NVML's total 85.5e9 bytes) emulating an 8 GB card on a 64-core host:
    # 10 caps fit, one is kept for the compile-only probe: 9; beside another process's 6 GB,
    # 8. A host with 16 cores drives 4 (4 cores a trial).
    monkeypatch.setattr(ex, "usable_cores", lambda: 64)
    card = FakeGpu(GPU0, pci_bus_id="0:18:00.0", memory_total=85_520_809_984)
    fake_nvml(FakeSystem(gpus=[card]))
    nvml = Nvml()
    cap = plan_gpu_cap(8 * GB, nvml, GB // 2)
    idle = ex.LocalExecutor(cap, nvml, parallel="auto", standby=False)
    assert idle.parallel == 9 and idle.requested_parallel == "auto"
    assert idle.warnings == [] and "9 capped trial(s) at once" in idle.notice
    assert "the card's free memory" in idle.notice
    card.memory_used = 6 * GB
    busy = ex.LocalExecutor(cap, nvml, parallel="auto", standby=False)
    assert busy.parallel == 8 and "79.5 GB free" in busy.notice
    monkeypatch.setattr(ex, "usable_cores", lambda: 16)
    few = ex.LocalExecutor(cap, nvml, parallel="auto", standby=False)
    assert few.parallel == 4 and "bounded by CPU cores, 4 a trial" in few.notice
    monkeypatch.setattr(ex, "usable_cores", lambda: 2)
    assert ex.LocalExecutor(cap, nvml, parallel="auto", standby=False).parallel == 1
    uncapped = ex.LocalExecutor(plan_gpu_cap(None, nvml, None), nvml, parallel="auto",
                                standby=False)
    assert uncapped.parallel == 1 and "without a budget" in uncapped.notice
    assert ex.LocalExecutor(cap, nvml, parallel=4, standby=False).parallel == 4  # asked: kept


def test_auto_parallel_runs_one_trial_at_a_time_on_cpu():
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.executor import LocalExecutor

    auto = LocalExecutor(plan_cap(10**9, None, None), parallel="auto", standby=False)
    assert auto.parallel == 1 and auto.warnings == [] and "run on the CPU" in auto.notice
