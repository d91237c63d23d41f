"""Sweeps on a real local Ray cluster started by the tests (`ray start --head`, 2 CPUs, two
fake accelerator types): real Ray tasks, real trial children, real signals; nothing mocked.

The cluster gets a marker in its environment; the trial children its workers start inherit
it, so "no process left" is checked for this cluster's trials only, whatever else runs on
the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests import raycluster
from tests.conftest import run_cli, sigint_default

pytest.importorskip("ray")
# a real Ray cluster and sweeps on it: not in the fast tier (-m "not slow")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

MARK = "VRAMTUNE_TEST_CLUSTER"
# A CPU-only cluster that still names two accelerator types, as a mixed GPU cluster would
# (Ray schedules by these resources; no GPU is needed to exercise the driver's side).
TYPES = {"accelerator_type:A100": 1, "accelerator_type:H100": 1}
# Small sizes of the quick profile: two rungs run at once on the 2 CPUs, then the repeat.
SMALL = ["--start", "64", "--max-envs", "128", "--refine", "0", "--no-confirm",
         "--objective", "max-envs"]


@pytest.fixture(scope="module")
def head():
    mark = uuid.uuid4().hex
    cluster = raycluster.start_head(num_cpus=2, resources=TYPES, env={MARK: mark})
    cluster.env[MARK] = mark
    yield cluster
    left = raycluster.stop_dir(cluster.temp_dir)
    assert not left, f"Ray processes left behind: {left}"


def ours(head: raycluster.Head) -> list[psutil.Process]:
    """Trial children started by this cluster's workers, still alive."""
    found = []
    for p in raycluster.trial_children():
        try:
            if p.environ().get(MARK) == head.env[MARK] and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            pass
    return found


def running_tasks(head: raycluster.Head) -> list[psutil.Process]:
    """Workers of this cluster still running a trial task (they rename themselves)."""
    return [p for p in raycluster.cluster_procs(head.temp_dir)
            if "trial_task" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _trials(run_dir: Path) -> list[dict]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def _outcomes(trials: list[dict]) -> list[tuple[int, str, str]]:
    return sorted((t["num_envs"], t["purpose"], t["status"]) for t in trials)


def _measured(trials: list[dict]) -> set[tuple[int, str]]:
    """The sizes a sweep measured and what became of each."""
    return {(t["num_envs"], t["status"]) for t in trials}


def _ray_sweep(head: raycluster.Head, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vramtune.cli.app", "sweep", *args,
                             "--executor", "ray", "--ray-address", head.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **head.env}, preexec_fn=sigint_default)


def _wait_for_children(head: raycluster.Head, proc: subprocess.Popen, count: int
                       ) -> list[psutil.Process]:
    deadline = time.time() + 120
    while len(found := ours(head)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, f"{count} trial(s) never started"
        time.sleep(0.2)
    return found


@pytest.mark.slowest
def test_a_ray_sweep_survives_a_killed_worker_matches_a_local_sweep_and_resumes(head, tmp_path,
                                                                              quick_short):
    """Two trials at once on the two workers; the worker of one is SIGKILLed mid-trial: the
    trial is run again, nothing is lost, the sizes measured and their statuses are a local
    sweep's, and so is the pick."""
    proc = _ray_sweep(head, "--profile", quick_short, *SMALL, "--out", str(tmp_path / "ray"),
                      "--json")
    victim = _wait_for_children(head, proc, 1)[0]
    time.sleep(4)  # importing or compiling by now: mid-trial
    worker = victim.ppid()
    os.kill(worker, signal.SIGKILL)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    json.loads(out)  # Ray's "worker died" messages went to ray.log, not into the JSON
    _, alive = psutil.wait_procs([victim], timeout=10)
    assert not alive, "the killed worker's trial child outlived it"
    trials = _trials(tmp_path / "ray")
    retried = [t for t in trials if any("retried once" in n for n in t["notes"])]
    assert len(retried) == 1, [t["notes"] for t in trials]
    notes = " ".join(retried[0]["notes"])
    assert "WorkerCrashedError" in notes and f"worker pid {worker}" in notes, notes
    assert all(any("ran as a Ray task" in n for n in t["notes"]) for t in trials)
    header = json.loads((tmp_path / "ray" / "results.jsonl").read_text().splitlines()[0])
    assert header["search"]["executor"] == "ray"
    assert header["search"]["ray_address"] == head.address
    # The same sweep locally (after Ray: the compile cache is as warm as the Ray trials left
    # it, which changes compile times, not sizes or statuses).
    local = run_cli("sweep", "--profile", quick_short, *SMALL, "--out", str(tmp_path / "local"),
                    "--json")
    assert local.returncode == 0, local.stderr
    assert _measured(trials) == _measured(_trials(tmp_path / "local")) == \
        {(64, "ok"), (128, "ok")}
    assert json.loads(out)["recommended"]["num_envs"] == \
        json.loads(local.stdout)["recommended"]["num_envs"] == 128
    # Two trials at once on one CPU node shared its cores: flagged, and the size the objective
    # compares ran again alone (as a local --parallel 2 sweep does).
    search = [t for t in trials if t["purpose"] == "search"]
    assert all(t["shared_run"] for t in search), [t["notes"] for t in search]
    assert [t["num_envs"] for t in trials if t["purpose"] == "alone"] == [128]
    # Resume a cut-off Ray run: the header names the executor and the cluster, so a plain
    # --resume runs the rest there, and reuses what was measured.
    cut = tmp_path / "cut"
    cut.mkdir()
    lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
    (cut / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # the last trial cut off
    resumed = run_cli("sweep", "--resume", str(cut), "--json", env=head.env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["reused"] == len(trials) - 1
    again = _trials(cut)
    assert [(t["num_envs"], t["purpose"]) for t in again] == \
        [(t["num_envs"], t["purpose"]) for t in trials]
    assert any("ran as a Ray task" in n for n in again[-1]["notes"])
    assert ours(head) == [] and running_tasks(head) == []


def test_ctrl_c_cancels_the_trials_and_leaves_nothing(head, tmp_path):
    run_dir = tmp_path / "run"
    proc = _ray_sweep(head, *SMALL, "--out", str(run_dir))
    children = _wait_for_children(head, proc, 2)  # both rungs at once, each its own child
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"sweep --resume {run_dir}" in out
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, "a trial outlived the interrupted sweep"
    assert running_tasks(head) == []
    assert _trials(run_dir) == []  # nothing finished, nothing half-written


def test_an_accelerator_type_the_cluster_lacks_is_a_one_line_error(head, tmp_path):
    proc = run_cli("sweep", "--executor", "ray", "--ray-address", head.address,
                   "--gpu-types", "A100,V100", "--out", str(tmp_path / "p"), env=head.env,
                   timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "V100" in lines[0] and "A100, H100" in lines[0], proc.stderr
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
def test_a_mixed_cluster_sweeps_each_type_at_once_and_emits_a_table_per_card(head, tmp_path,
                                                                             quick_short):
    parent = tmp_path / "cards"
    proc = run_cli("sweep", "--profile", quick_short, "--start", "64", "--max-envs", "64",
                   "--no-confirm", "--executor", "ray", "--ray-address", head.address,
                   "--gpu-types", "A100,H100", "--out", str(parent), env=head.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(d.name for d in parent.iterdir()) == ["A100", "H100"]
    for card in ("A100", "H100"):
        assert _outcomes(_trials(parent / card)) == [(64, "repeat", "ok"), (64, "search", "ok")]
    assert f"emit-config {parent}" in proc.stdout
    emitted = run_cli("emit-config", str(parent))
    assert emitted.returncode == 0, emitted.stderr
    assert "| A100 |" in emitted.stdout and "| H100 |" in emitted.stdout
    files = sorted(p.name for p in (parent / "configs").iterdir())
    assert files == ["quick-A100-uncapped.yaml", "quick-H100-uncapped.yaml", "quick-cards.md"]
    compared = run_cli("compare", str(parent), "--format", "json")
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)
    assert [(r["card"], r["num_envs"]) for r in rows] == [("A100", 64), ("H100", 64)]
    assert ours(head) == []
