"""Several devices, the cap each trial proves, and `vramtune doctor`, for real on the CPU
backend: brax pmaps over 2 XLA host devices (JAX_NUM_CPU_DEVICES=2), the child reports the
RLIMIT_DATA in force, and a lower hard limit from the environment fails the trial."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.fakes.fake_pynvml import FakeGpu, FakeSystem


def _under_ulimit(limit: int):
    def apply() -> None:  # what `ulimit -d` or a batch scheduler does to the whole session
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return apply


@pytest.mark.slow
def test_two_device_trial_reports_total_and_per_device_rates(quick_short):
    # --cache: the cap's figure is asserted, not a cold peak; the sweep below reuses the
    # compile. A short steps/s window: the rates' split is asserted, not their precision.
    proc = run_cli("trial", "--profile", quick_short, "--num-envs", "128", "--devices", "2",
                   "--gpu-mem", "2GB", "--json", "--cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    assert r["status"] == "ok" and r["backend"] == "cpu" and r["device_count"] == 2
    assert r["steps_per_s_per_device"] == r["steps_per_s"] / 2
    assert r["rlimit_data_bytes"] == 2 * 10**9
    assert r["cap_check"] == "RLIMIT_DATA 1.86 GiB in force, 1.86 GiB intended"
    # CPU has no allocator stats and no NVML: per-device figures unmeasured, None, never 0
    assert r["jax_peak_pool_bytes_per_device"] is None
    assert r["nvml_process_peak_bytes_per_device"] is None and r["outside_pool_bytes"] is None
    # the ledger, per process on a CPU: each device holds a replica of the params (quick's
    # 1,588,236 B), the rollout is the envs' whatever the split (2,400 B per env), and the
    # evaluation, jitted on one device, counts once (below one device's epoch temporaries)
    assert r["ledger_error"] is None
    assert r["ledger_params_bytes"] == 2 * 1_588_236
    assert r["ledger_rollout_bytes"] == 2_400 * 128
    assert r["ledger_eval_temp_bytes"] < r["ledger_epoch_temp_bytes"] / 2


@pytest.mark.slow
def test_the_rule_is_checked_with_the_devices_asked_for():
    proc = run_cli("trial", "--num-envs", "1", "--devices", "2", "--json")
    r = json.loads(proc.stdout)
    assert proc.returncode == 1 and r["status"] == "invalid" and r["device_count"] == 2
    assert "num_envs % device_count == 0" in r["error_message"]
    assert json.loads(run_cli("trial", "--num-envs", "1", "--devices", "1", "--timeout", "1",
                              "--json").stdout)["status"] != "invalid"


@pytest.mark.slow
def test_a_lower_hard_rlimit_in_the_environment_fails_the_trial_as_cap_not_applied():
    # The parent plans RLIMIT_DATA=2 GB; the session's hard limit is 1.5 GB, which the child
    # may not raise, so the cap in force is not the one the record would be labelled with.
    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "trial", "--num-envs", "128",
                           "--gpu-mem", "2GB", "--json"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ),
                          preexec_fn=_under_ulimit(1_500_000_000))
    r = json.loads(proc.stdout)
    assert proc.returncode == 1 and r["status"] == "error", r
    assert r["error_type"] == "cap not applied"
    assert r["error_message"].startswith("cap not applied: RLIMIT_DATA in force is 1.40 GiB, "
                                         "1.86 GiB intended")
    assert r["rlimit_data_bytes"] == 1_500_000_000 and r["cap"] == "RLIMIT_DATA=2000000000"
    assert r["steps_per_s"] is None  # stopped as soon as JAX was up: nothing measured under it
    assert r["wall_s"] < 60


@pytest.mark.slow
def test_two_device_sweep_runs_every_trial_on_both_devices(tmp_path, quick_short):
    run_dir = tmp_path / "run"
    proc = run_cli("sweep", "--profile", quick_short, "--devices", "2", "--start", "128",
                   "--max-envs", "128",
                   "--refine", "0", "--no-confirm", "--gpu-mem", "2GB", "--out", str(run_dir),
                   "--json", "--cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    header, trials = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header["search"]["devices"] == 2
    # --no-confirm: the pick is proven by a plain repeat, and nothing is called confirmed
    assert [(t["purpose"], t["status"]) for t in trials] == [("search", "ok"), ("repeat", "ok")]
    assert out["confirmed"] is None
    assert all(t["device_count"] == 2 and t["cap_check"] for t in trials)
    assert out["recommended"]["num_envs"] == 128
    again = run_cli("sweep", "--resume", str(run_dir), "--devices", "1")
    assert again.returncode == 2 and "differs from the 2 device(s)" in again.stderr


@pytest.mark.slow
def test_doctor_on_cpu_says_so_and_checks_rlimit_data_with_a_real_probe():
    proc = run_cli("doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    assert r["backend"] == "cpu" and r["fraction_var"] == "XLA_CLIENT_MEM_FRACTION"
    assert r["cap_probe"]["backend"] == "cpu" and r["cap_probe_ok"] is True
    assert r["cap_probe"]["in_force_bytes"] == r["cap_probe"]["intended_bytes"]
    assert r["cap_probe"]["allocation"].startswith("oom")
    assert any("CPU backend" in n for n in r["notes"]) and r["problems"] == []
    text = run_cli("doctor", "--no-probe").stdout
    assert "fraction variable this jaxlib reads: XLA_CLIENT_MEM_FRACTION" in text
    assert "verdict: no problems found" in text


@pytest.mark.slow
def test_doctor_under_a_lower_ulimit_reports_the_cap_problem():
    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "doctor"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ),
                          preexec_fn=_under_ulimit(1_500_000_000))
    assert proc.returncode == 1
    assert "cap not applied: RLIMIT_DATA in force is 1.40 GiB" in proc.stdout
    assert "PROBLEM: the capped probe did not hold its cap" in proc.stdout


def test_doctor_lists_the_gpus_nvml_resolves(monkeypatch):
    from tests.fakes import fake_pynvml
    from vramtune.measure.doctor import diagnose
    from vramtune.measure.nvml import Nvml

    uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml.build(FakeSystem(
        gpus=[FakeGpu(uuid, memory_total=80 * 2**30)])))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8932")
    report = diagnose(Nvml(), run_cap_probe=False)
    assert [d.uuid for d in report.devices] == [uuid]
    assert report.devices[0].runtime_total_bytes is None  # no CUDA plugin: not measured
    assert report.nvml == "driver 560.35.03"
