"""The GPU path, for real: runs wherever an NVIDIA GPU, NVML and a CUDA jax are present.

Elsewhere (CI, laptops, the machines this was written on) these are skipped with the reason;
the CPU path and the GPU logic (fake NVML, jaxlib's own option parser, recorded error text)
are tested by the other modules. `benchmarks/bench_gpu.py` records the figures on a GPU.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.conftest import run_cli
from vramtune.machine import has_cuda_jax, mem_fraction_var
from vramtune.measure.cap import plan_cap
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_device
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import Status
from vramtune.workload.profile import load_profile

_NVML = Nvml()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _NVML.available, reason=f"no GPU here: {_NVML.notice}"),
    pytest.mark.skipif(not has_cuda_jax(), reason="no CUDA build of jax installed "
                                                  "(pip install -e '.[cuda]')"),
]


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)  # conftest forces cpu for the rest


def test_overhead_and_runtime_total_are_measured_not_guessed():
    facts = measure_device(_NVML, cached=False)
    assert facts.overhead_bytes is not None and 50 * 2**20 < facts.overhead_bytes < 4 * 2**30
    assert facts.runtime_total_bytes is not None
    # NVML's total and the runtime's may differ (driver-reserved memory); by little on a card
    assert abs(facts.runtime_total_bytes - _NVML.info.total_bytes) < 0.1 * _NVML.info.total_bytes


def test_uncapped_trial_reports_every_view_and_proves_its_limit():
    facts = measure_device(_NVML)
    r = run_trial(TrialRequest(load_profile("quick"), 1024), nvml=_NVML,
                  overhead_bytes=facts.overhead_bytes, runtime_total_bytes=facts.runtime_total_bytes)
    assert r.status is Status.OK and r.backend == "gpu", r.error_message
    assert r.jax_peak_bytes_in_use and r.jax_peak_pool_bytes and r.jax_bytes_limit
    assert r.nvml_device_used_peak_bytes and r.nvml_process_peak_bytes
    assert r.nvml_process_peak_bytes >= r.jax_peak_bytes_in_use
    assert r.outside_pool_bytes is not None and r.outside_pool_bytes > 0  # the CUDA context
    assert r.cap.startswith(f"{mem_fraction_var()}=") and r.cap_check
    assert abs(r.jax_bytes_limit - r.pool_limit_intended_bytes) <= 0.01 * r.pool_limit_intended_bytes
    assert r.device_count == 1 and r.device_uuids and _NVML.info.uuid.endswith(r.device_uuids[0])
    assert r.memory_label == "VRAM" and any("Warp allocations are not capped" in n for n in r.notes)


def test_budget_caps_the_pool_and_a_real_gpu_oom_is_classified():
    overhead = measure_device(_NVML).overhead_bytes
    ok = run_trial(TrialRequest(load_profile("quick"), 256, budget_bytes=2 * 10**9), nvml=_NVML,
                   overhead_bytes=overhead)
    assert ok.status is Status.OK, ok.error_message
    assert ok.jax_bytes_limit <= 2 * 10**9
    oom = run_trial(TrialRequest(load_profile("quick"), 65536, budget_bytes=10**9), nvml=_NVML,
                    overhead_bytes=overhead)
    assert oom.status is Status.OOM
    assert "RESOURCE_EXHAUSTED" in (oom.error_message or "")


def test_the_cap_check_fails_a_trial_whose_limit_is_not_the_intended_one():
    facts = measure_device(_NVML)
    cap = plan_cap(2 * 10**9, _NVML, facts.overhead_bytes,
                   runtime_total_bytes=facts.runtime_total_bytes)
    wrong = dataclasses.replace(cap, pool_limit_bytes=cap.pool_limit_bytes // 2)
    r = run_trial(TrialRequest(load_profile("quick"), 256, budget_bytes=2 * 10**9), nvml=_NVML,
                  cap=wrong)
    assert r.status is Status.ERROR and r.error_type == "cap not applied"
    assert r.error_message.startswith("cap not applied: bytes_limit")
    assert r.steps_per_s is None  # stopped when JAX came up


def test_compile_cache_is_keyed_by_the_pool_limit(tmp_path):
    for budget in (2 * 10**9, 3 * 10**9):
        r = run_trial(TrialRequest(load_profile("quick"), 256, budget_bytes=budget,
                                   compile_cache_dir=str(tmp_path)), nvml=_NVML,
                      overhead_bytes=measure_device(_NVML).overhead_bytes)
        assert r.status is Status.OK
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("gpu-pool-")]) == 2


@pytest.mark.skipif(len(_NVML.devices) < 2, reason="needs two GPUs")
def test_two_gpus_per_device_figures():
    proc = run_cli("trial", "--num-envs", "1024", "--devices", "2", "--gpu-mem", "4GB", "--json",
                   env={"JAX_PLATFORMS": ""})
    r = json.loads(proc.stdout)
    assert r["status"] == "ok" and r["device_count"] == 2, r
    assert len(r["jax_peak_pool_bytes_per_device"]) == 2
    assert len(r["nvml_process_peak_bytes_per_device"]) == 2
    assert r["steps_per_s_per_device"] == r["steps_per_s"] / 2


def test_doctor_on_a_gpu():
    proc = run_cli("doctor", "--json", env={"JAX_PLATFORMS": ""})
    r = json.loads(proc.stdout)
    assert r["backend"] == "gpu" and r["cap_probe_ok"] is True, proc.stdout
    assert r["devices"] and r["devices"][0]["runtime_total_bytes"]
    assert r["overhead_bytes"] and r["fraction_var"] == mem_fraction_var()
