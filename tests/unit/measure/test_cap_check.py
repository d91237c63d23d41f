"""The parent's check that a trial ran under the cap it planned (``trial.cap_mismatch``):
what the child reports of itself against the plan. The real trials are in
tests/integration/test_devices.py; here, every way a report can disagree."""

import pytest

from vramtune.measure.cap import cpu_cap, gpu_cap
from vramtune.measure.trial import TrialRequest, cap_mismatch, invalid_result
from vramtune.records import Status
from vramtune.workload.profile import load_profile

GB = 10**9
GIB = 1 << 30
GPU0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
GPU1 = "GPU-18ef14e9-dec6-1d7e-1284-3010c6ce98b1"


def gpu(devices=(GPU0,)):
    return gpu_cap(8 * GB, GB // 2, 80 * GIB, uuids=devices, fraction_var="XLA_CLIENT_MEM_FRACTION")


def gpu_proof(cap, **over):
    n = len(cap.visible_uuids)
    proof = {"backend": "gpu", "device_count": n,
             "device_uuids": [u[4:] for u in cap.visible_uuids],  # the runtime's: no prefix
             "runtime_total_bytes_per_device": [80 * GIB] * n,
             "jax_bytes_limit_per_device": [cap.pool_limit_bytes] * n,
             "fraction_in_force": cap.description, "allocator_in_force": "bfc",
             "rlimit_data_bytes": None}
    proof.update(over)
    return proof


def test_a_gpu_trial_under_its_cap_passes():
    cap = gpu()
    assert cap_mismatch(cap, gpu_proof(cap), 1) is None


def test_within_one_percent_passes_beyond_fails():
    cap = gpu()
    near = int(cap.pool_limit_bytes * 1.009)
    assert cap_mismatch(cap, gpu_proof(cap, jax_bytes_limit_per_device=[near]), 1) is None
    far = int(cap.pool_limit_bytes * 1.02)  # e.g. the fraction applied to NVML's larger total
    why = cap_mismatch(cap, gpu_proof(cap, jax_bytes_limit_per_device=[far]), 1)
    assert why and why.startswith("bytes_limit") and "intended" in why


def test_silent_cpu_fallback_fails():
    cap = gpu()
    why = cap_mismatch(cap, gpu_proof(cap, backend="cpu", jax_bytes_limit_per_device=None), 1)
    assert "ran on cpu" in why


def test_no_allocator_limit_fails():  # XLA_PYTHON_CLIENT_ALLOCATOR=platform: no BFC pool
    cap = gpu()
    assert "no allocator limit" in cap_mismatch(
        cap, gpu_proof(cap, jax_bytes_limit_per_device=[None]), 1)
    assert "no BFC pool" in cap_mismatch(cap, gpu_proof(cap, allocator_in_force="platform"), 1)


def test_another_fraction_in_force_fails():
    cap = gpu()
    why = cap_mismatch(cap, gpu_proof(cap, fraction_in_force="XLA_CLIENT_MEM_FRACTION=0.5, "
                                                             "XLA_PYTHON_CLIENT_MEM_FRACTION=0.5"), 1)
    assert "was planned" in why


def test_another_device_than_the_one_watched_fails():
    cap = gpu()
    why = cap_mismatch(cap, gpu_proof(cap, device_uuids=[GPU1[4:]]), 1)
    assert GPU0 in why and GPU1[4:] in why


def test_device_count_differs():
    cap = gpu((GPU0, GPU1))
    assert cap_mismatch(cap, gpu_proof(cap), 2) is None
    assert "1 gpu devices, 2 asked for" in cap_mismatch(cap, gpu_proof(cap, device_count=1), 2)


def test_cpu_rlimit_in_force_must_be_the_intended_one():
    cap = cpu_cap(2 * GB)
    proof = {"backend": "cpu", "device_count": 1, "rlimit_data_bytes": 2 * GB}
    assert cap_mismatch(cap, proof, 1) is None
    assert "1.40 GiB" in cap_mismatch(cap, {**proof, "rlimit_data_bytes": 1_500_000_000}, 1)
    assert "unlimited" in cap_mismatch(cap, {**proof, "rlimit_data_bytes": None}, 1)
    assert "ran on gpu" in cap_mismatch(cap, {**proof, "backend": "gpu"}, 1)


def test_nothing_reported_proves_nothing():
    assert cap_mismatch(gpu(), {}, 1) is None


def test_the_rule_is_checked_with_the_requested_devices():
    quick = load_profile("quick")
    assert quick.sweepable(1, 1) and not quick.sweepable(1, 2)
    assert invalid_result(TrialRequest(quick, 1)) is None
    record = invalid_result(TrialRequest(quick, 1, device_count=2))
    assert record.status is Status.INVALID and record.device_count == 2
    assert "num_envs % device_count == 0" in record.error_message


@pytest.mark.parametrize("devices", [1, 2])
def test_cpu_cap_counts_devices(devices):
    assert cpu_cap(GB, devices).device_count == devices
