"""The GPU path, for real: runs wherever an NVIDIA GPU, NVML and a CUDA jax are present.

Elsewhere (CI, laptops) these are skipped with the reason; the CPU path is tested in full
by the other modules. `benchmarks/bench_gpu.py` records the figures on a GPU machine.
"""

from __future__ import annotations

import pytest

from vramtune.machine import has_cuda_jax, mem_fraction_var
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_overhead_bytes
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


def test_overhead_is_measured_not_guessed():
    overhead = measure_overhead_bytes(_NVML)
    assert overhead is not None and 50 * 2**20 < overhead < 4 * 2**30


def test_uncapped_trial_reports_all_three_views():
    r = run_trial(TrialRequest(load_profile("quick"), 1024), nvml=_NVML)
    assert r.status is Status.OK and r.backend == "gpu"
    assert r.jax_peak_bytes_in_use and r.jax_peak_pool_bytes and r.jax_bytes_limit
    assert r.nvml_device_used_peak_bytes and r.nvml_process_peak_bytes
    assert r.nvml_process_peak_bytes >= r.jax_peak_bytes_in_use
    assert r.cap == f"{mem_fraction_var()}=0.9500"
    assert r.memory_label == "VRAM"


def test_budget_caps_the_pool_and_a_real_gpu_oom_is_classified():
    overhead = measure_overhead_bytes(_NVML)
    ok = run_trial(TrialRequest(load_profile("quick"), 256, budget_bytes=2 * 10**9), nvml=_NVML,
                   overhead_bytes=overhead)
    assert ok.status is Status.OK
    assert ok.jax_bytes_limit <= 2 * 10**9
    oom = run_trial(TrialRequest(load_profile("quick"), 65536, budget_bytes=10**9), nvml=_NVML,
                    overhead_bytes=overhead)
    assert oom.status is Status.OOM
    assert "RESOURCE_EXHAUSTED" in (oom.error_message or "")
