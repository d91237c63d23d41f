"""check and emit-config end to end: the real CLI, a run dir of real trials, a real ppo.train.

The run dir holds two real `quick` trials (128 and 256 envs, run side by side to keep the
module near a minute on 2 cores) under a 3 GB cap; what emit-config writes must pass
`vramtune check` and be accepted by brax's ppo.train itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from vramtune import machine
from vramtune.machine import default_cache_dir
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import Status
from vramtune.results.store import RunHeader, append_result, create_run
from vramtune.workload.profile import load_profile

CAP = 3 * 10**9


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, quick_short: str) -> Path:
    profile = load_profile(quick_short)
    directory = tmp_path_factory.mktemp("runs") / "vramtune-runs" / "20261121T200000-quick"
    create_run(directory, RunHeader(profile.name, profile.hash, profile.to_dict(), CAP, 0.1,
                                    machine.machine_summary(), machine.versions(),
                                    cap=f"RLIMIT_DATA={CAP}"))
    # The session's compile cache even under the cap: 3 GB is far above both peaks, and what
    # is asserted is emitted from these records, not a cold compile's peak.
    cache = str(default_cache_dir() / "jax")
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda n: run_trial(TrialRequest(
            profile, n, budget_bytes=CAP, compile_cache_dir=cache, cache_under_cpu_cap=True)),
            (128, 256)))
    for result in results:
        assert result.status is Status.OK, (result.error_type, result.error_message)
        append_result(directory, result)
    return directory


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_check_valid_invalid_unreadable_exit_codes(tmp_path):
    valid = _write(tmp_path, "valid.yaml", """
        experiment:
          ppo:
            NUM_ENVS: 8192
            BATCH_SIZE: 256
            NUM_MINIBATCHES: 32
    """)
    proc = run_cli("check", str(valid), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout and "experiment.ppo.NUM_ENVS" in proc.stdout

    invalid = _write(tmp_path, "invalid.yaml", "num_envs: 3000\nbatch_size: 256\n"
                                               "num_minibatches: 32\n")
    proc = run_cli("check", str(invalid), timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "batch_size * num_minibatches % num_envs == 0" in proc.stdout
    assert "not a multiple of 3000" in proc.stdout
    fixes = [line for line in proc.stdout.splitlines() if line.startswith("  - num_envs=")]
    assert 2 <= len(fixes) <= 3 and any("num_envs=2048" in f for f in fixes)

    proc = run_cli("check", str(invalid), "--json", timeout=60)
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["valid"] is False and len(data["fixes"]) >= 2
    assert data["by_policy"]["hold-env-steps"]["nearest_num_envs"] == [2048, 4096]
    assert "hold-minibatch (batch_size 256 kept): 256 x 375" in run_cli("check", str(invalid)).stdout

    defaults = _write(tmp_path, "defaults.yaml", "ppo:\n  num_envs: 1000\n")
    proc = run_cli("check", str(defaults), timeout=60)
    assert proc.returncode == 1 and "ppo.train's defaults apply" in proc.stdout
    assert "batch_size 32, num_minibatches 16" in proc.stdout

    proc = run_cli("check", str(valid), "--device-count", "3", timeout=60)
    assert proc.returncode == 1 and "num_envs % device_count == 0" in proc.stdout


@pytest.mark.parametrize("name,text,message", [
    ("missing.yaml", None, "no such file"),
    ("bad.yaml", "ppo: [1, 2\n", "not valid YAML"),
    ("none.yaml", "ppo:\n  learning_rate: 0.001\n", "looked for keys num_envs"),
])
def test_check_unreadable_is_exit_2_one_line(tmp_path, name, text, message):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    proc = run_cli("check", str(path), timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_emit_one_budget_to_stdout_from_measurements(run_dir):
    proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "3GB", timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)
    assert data["ppo"]["num_envs"] in (128, 256)  # a measured size, nothing else
    assert data["xla_env"] == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert "host RAM" in proc.stdout and str(run_dir) in proc.stdout
    assert "measured on CPU" in proc.stderr


@pytest.mark.slow
def test_emit_several_budgets_every_format_passes_check(run_dir, tmp_path):
    for fmt in ("brax", "playground", "hydra"):
        out = tmp_path / fmt
        proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "2GB,3GB", "--format", fmt,
                       "--objective", "max-envs", "-o", str(out), timeout=60)
        assert proc.returncode == 0, proc.stderr
        files = sorted(out.glob("*.yaml"))
        assert len(files) == 2, list(out.iterdir())
        table = (out / "quick-table.md").read_text()
        assert "| 2GB | 256 | 256 | 4 |" in table and "| 3GB | 256 | 256 | 4 |" in table
        assert "measured peak (host RAM)" in table
        if fmt == "hydra":
            assert "ppo.num_envs=256 ppo.batch_size=256 ppo.num_minibatches=4" in proc.stdout
        else:
            assert "| budget | num_envs |" in proc.stdout
        for file in files:
            check = run_cli("check", str(file), timeout=60)
            assert check.returncode == 0, (file.read_text(), check.stdout)
    # 256 envs on quick grows batch_size 128 -> 256: the LR hint is printed and written
    assert "sqrt(256/128)" in (tmp_path / "brax" / "quick-3GB.yaml").read_text()
    assert "sqrt(256/128)" in proc.stderr


@pytest.mark.slow
def test_emit_yaml_pattern_for_several_budgets(run_dir, tmp_path):
    proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "2GB,3GB", "-o",
                   str(tmp_path / "tuned.yaml"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"tuned-2GB.yaml", "tuned-3GB.yaml", "tuned.md"}


@pytest.mark.slow
def test_uncovered_budgets_are_said_not_extrapolated(run_dir, tmp_path):
    proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "8GB", "-o",
                   str(tmp_path / "big.yaml"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "under a 3GB budget, below this 8GB one" in " ".join(proc.stderr.split())
    assert "NOTICE: the sweep measured under a 3GB budget" in (tmp_path / "big.yaml").read_text()

    proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "100MB", "-o",
                   str(tmp_path / "tiny.yaml"), timeout=60)
    assert proc.returncode == 1
    assert "no measured trial fits" in proc.stderr and not (tmp_path / "tiny.yaml").exists()

    proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "100MB,3GB", "-o",
                   str(tmp_path / "mixed"), timeout=60)
    assert proc.returncode == 1  # one budget could not be served; the other is written
    assert (tmp_path / "mixed" / "quick-3GB.yaml").exists()
    assert "| 100MB | does not fit |" in (tmp_path / "mixed" / "quick-table.md").read_text()


@pytest.mark.slow
def test_emit_defaults_to_the_newest_run(run_dir, tmp_path):
    runs = tmp_path / "vramtune-runs"
    shutil.copytree(run_dir, runs / "20261121T200000-quick")
    proc = run_cli("emit-config", "--gpu-mem", "3GB", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "using the newest run" in proc.stderr
    proc = run_cli("emit-config", cwd=tmp_path / "vramtune-runs", timeout=60)
    assert proc.returncode == 2 and "run `vramtune sweep` first" in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args,message", [
    (["--gpu-mem", "8XB"], "invalid --gpu-mem"),
    (["--headroom", "150%"], "--headroom"),
    (["--format", "nope"], "nope"),
    (["/no/such/run"], "no results at /no/such/run"),
])
def test_emit_bad_input_is_exit_2(run_dir, args, message):
    proc = run_cli("emit-config", *([str(run_dir)] if args[0].startswith("-") else []), *args,
                   timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


TRAIN = """
import json, os, sys, functools
import yaml
cfg = yaml.safe_load(open(sys.argv[1]))
os.environ.update(cfg["xla_env"])
import jax
jax.config.update("jax_compilation_cache_dir", sys.argv[2])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
from brax import envs
from brax.training.agents.ppo import networks, train as ppo
env_cfg, kwargs = cfg["environment"], cfg["ppo"]
environment = envs.get_environment(env_cfg["env"].split(":", 1)[1], backend=env_cfg["backend"])
net = {k: tuple(v) for k, v in cfg["network"].items()}
steps = kwargs["batch_size"] * kwargs["num_minibatches"] * kwargs["unroll_length"]
_, params, metrics = ppo.train(environment, num_timesteps=steps, num_evals=2, **kwargs,
    network_factory=functools.partial(networks.make_ppo_networks, **net))
print(json.dumps({"trained": True, "num_envs": kwargs["num_envs"]}))
"""


@pytest.mark.slow
def test_emitted_kwargs_are_accepted_by_a_real_ppo_train(run_dir, tmp_path):
    files = {}
    for fmt in ("brax", "playground", "hydra"):
        files[fmt] = tmp_path / f"{fmt}.yaml"
        proc = run_cli("emit-config", str(run_dir), "--gpu-mem", "3GB", "--objective", "max-envs",
                       "--format", fmt, "-o", str(files[fmt]), timeout=60)
        assert proc.returncode == 0, proc.stderr
    brax = yaml.safe_load(files["brax"].read_text())
    playground = yaml.safe_load(files["playground"].read_text())["ppo_params"]
    hydra = yaml.safe_load(files["hydra"].read_text())
    # the three formats carry the same kwargs
    assert {k: v for k, v in playground.items() if k != "network_factory"} == brax["ppo"]
    assert playground["network_factory"] == brax["network"] == hydra["network"]
    assert hydra["ppo"] == brax["ppo"]
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, str(script), str(files["brax"]),
                           str(default_cache_dir() / "jax")], capture_output=True, text=True,
                          timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"trained": True, "num_envs": 256}
