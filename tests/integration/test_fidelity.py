"""Proofs on real trials: capped headroom, a long confirming run that holds or fails, verify.
(The plain repeat of --no-confirm: test_devices' and test_search's sweeps.)

Every run here is a real sweep or trial of brax PPO on the CPU backend under a real
RLIMIT_DATA; the confirmation that fails does so because the workload's memory really grows
past the cap after the trial window (tests.workloads_fixture:make_leaking_env).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import load_run

ROOT = Path(__file__).resolve().parents[2]
# Runs under 3 GB (far above quick's peaks at 64-128 envs) assert no cold-compile peak: they
# use the session's compile cache. The step-down test's leaky workload stays cold.
WARM = ("--cache",)


def _sweep(tmp_path: Path, *args: str) -> tuple[dict, list[TrialResult]]:
    run_dir = tmp_path / "run"
    proc = run_cli("sweep", "--out", str(run_dir), "--json", *args, timeout=1500)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), list(load_run(run_dir).results)


def search_trials(results: list[TrialResult]) -> list[TrialResult]:
    """The sweep's search trials (no proof runs, no runs alone)."""
    return [r for r in results if r.purpose is Purpose.SEARCH]


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory) -> tuple[Path, dict, list[TrialResult]]:
    """One confirmed sweep, read by the tests of confirmation and of verifying what it emits
    (one sweep, not two: ~45 s of the suite). --cache: 3 GB is far above quick's peak at
    128 envs, so nothing here needs the cold compile's peak; the session's warm cache
    (WARM) saves most of each trial's compile."""
    tmp = tmp_path_factory.mktemp("confirmed")
    # the built-in quick as it is: verify finds a built-in profile by its hash. One size: the
    # proof is the point, not the search (test_search's, test_sweep's) nor which of two
    # sizes is faster (test_speed_pick's), and each trial here measures quick's full window
    summary, results = _sweep(tmp, "--profile", "quick", "--gpu-mem", "3GB", "--start", "128",
                              "--max-envs", "128", "--confirm-steps", "20", *WARM)
    return tmp / "run", summary, results


@pytest.mark.slow
def test_the_pick_is_confirmed_by_a_long_run_held_below_the_line(confirmed):
    _, summary, results = confirmed
    chosen = summary["recommended"]
    assert chosen is not None and summary["confirmed"] is not None
    confirm = [r for r in results if r.purpose is Purpose.CONFIRM]
    assert len(confirm) == 1 and confirm[0].status is Status.OK
    assert confirm[0].num_envs == chosen["num_envs"] and confirm[0].training_steps >= 20
    # Every trial ran under budget x (1 - headroom), so ok itself proved the headroom; the
    # confirming run one refinement step below that line: 1.5 sd of one run's peak, at
    # least 1.5 x the 1.5 % prior jitter of the size's own peak.
    line = int(3e9 * 0.9)
    assert all(r.cap == f"RLIMIT_DATA={line}" and r.cap_bytes == line for r in search_trials(results))
    assert all(r.budget_bytes == int(3e9) for r in results)
    room = line - confirm[0].cap_bytes
    peak = max(r.host_peak_data_bytes for r in search_trials(results) if r.num_envs == chosen["num_envs"])
    assert 0.02 * peak < room < 0.1 * peak and confirm[0].cap == f"RLIMIT_DATA={line - room}"
    assert "below the" in summary["confirmed_line"]
    # The trial trained as the user does: evaluation on, memory steady, the capped figure kept.
    searched = search_trials(results)
    assert all(r.evals and r.evals >= 1 and r.training_steps >= 5 for r in searched)
    assert all(r.host_peak_data_bytes and r.host_peak_data_bytes > r.host_peak_rss_bytes * 0.8
               for r in searched)
    assert summary["confirmed_line"].startswith("confirmed: ")


def _leaky_profile(tmp_path: Path, leak: int) -> Path:
    quick = yaml.safe_load((ROOT / "src/vramtune/profiles/quick.yaml").read_text())
    quick.update(name="leaky", env="tests.workloads_fixture:make_leaking_env",
                 env_kwargs={"leak_bytes_per_env_step": leak})
    # Evaluation's env steps leak too: 8 eval envs keep that small (0.8 MB an evaluation at
    # 1000 B), so that the leak follows training steps and not how often a run evaluates.
    quick["ppo"] = {**quick["ppo"], "num_eval_envs": 8}
    # Its memory never stops growing, so a trial runs to max_intervals: keep that short, and
    # one epoch per interval (min_interval_s 0), so a trial trains 13 steps however fast the
    # machine is (grouped by time, a fast runner's trial ran ~4x longer and leaked as much).
    quick["measure"] = {**quick.get("measure", {}), "max_intervals": 12, "min_interval_s": 0}
    quick.pop("backend", None)
    path = tmp_path / "leaky.yaml"
    path.write_text(yaml.safe_dump(quick))
    return path


@pytest.mark.slow
@pytest.mark.slowest
def test_a_confirmation_that_fails_steps_down_to_a_smaller_size(tmp_path):
    # 1300 B per env per env step (8 eval envs, whose steps leak too), measured on CPU with
    # quick's networks under a 1.548 GB cap (1.72 GB - 10%, RLIMIT_DATA 1,476 MiB): the
    # 14-step trials peak 993 / 1,096 / 1,128 MiB at 128 / 192 / 256 envs; 256's 50-step run
    # dies at step 38, 192's at 48 (ok on a run whose base sits lower: either is a
    # step-down), 128's peaks 1,262 MiB under a 1,437 MiB cap. Peaks move by tens of MB.
    profile = _leaky_profile(tmp_path, 1300)
    summary, results = _sweep(tmp_path, "--profile", str(profile), "--gpu-mem", "1.72GB",
                              "--start", "128", "--max-envs", "256", "--objective", "max-envs",
                              "--confirm-steps", "50", "--refine", "1")
    # A failed confirmation starts the step-down: a size between 128 and 256 is searched,
    # then the pick is confirmed, before a smaller size is (was: 128, the next measured size).
    # 256's trial sat ~215 MiB under the cap, so its long run grows (a leak), not a jitter:
    # the step-down bisects. --refine 1: it searches one size (it allows min(refine, 3)); the
    # test is the step-down, not the resolution, and each long run here takes 25-30 s.
    confirm = {r.num_envs: r for r in results if r.purpose is Purpose.CONFIRM}
    assert confirm[256].status is Status.OOM, confirm[256].error_message
    between = [r.num_envs for r in results if r.purpose is Purpose.SEARCH and 128 < r.num_envs < 256]
    assert between, [(r.num_envs, r.purpose, r.status) for r in results]
    chosen = summary["recommended"]["num_envs"]
    assert chosen < 256 and summary["confirmed"]["num_envs"] == chosen
    assert confirm[chosen].status is Status.OK
    assert all(confirm[n].status is Status.OOM for n in confirm if n > chosen)
    # 256 failed its own confirmation; a smaller size's failure may be the one named
    assert summary["reasons"]["256"].startswith("fit once, "), summary["reasons"]


@pytest.mark.slow
def test_verify_a_user_style_file_against_a_profile(tmp_path):
    config = tmp_path / "train.yaml"
    config.write_text("experiment:\n  ppo:\n    num_envs: 64\n    batch_size: 64\n"
                      "    num_minibatches: 4\n    unroll_length: 10\n")
    proc = run_cli("verify", str(config), "--profile", "quick", "--gpu-mem", "3GB", "--steps", "12",
                   "--json", *WARM, timeout=900)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["status"] == "ok" and record["purpose"] == "confirm"
    assert record["training_steps"] >= 12 and record["num_envs"] == 64
    assert record["cap"] == f"RLIMIT_DATA={int(3e9 * 0.9)}"


@pytest.mark.slow
def test_verify_an_emitted_file_finds_its_profile(confirmed, tmp_path):
    run_dir, _, _ = confirmed
    out = tmp_path / "tuned.yaml"
    emitted = run_cli("emit-config", str(run_dir), "--gpu-mem", "3GB", "-o", str(out))
    assert emitted.returncode == 0, emitted.stderr
    data = yaml.safe_load(out.read_text())
    assert "run_evals" not in data["ppo"], "a measurement-only setting leaked into the config"
    proc = run_cli("verify", str(out), "--gpu-mem", "3GB", "--steps", "12", *WARM, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "verified:" in proc.stdout


@pytest.mark.parametrize("args", [
    ["--gpu-mem", "3GB"],  # a user's file without --profile: which workload?
    ["--gpu-mem", "3GB", "--steps", "0"],
    ["--profile", "quick"],  # no budget
])
def test_verify_bad_input_is_one_line(tmp_path, args):
    config = tmp_path / "train.yaml"
    config.write_text("num_envs: 64\nbatch_size: 64\nnum_minibatches: 4\n")
    proc = run_cli("verify", str(config), *args, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr
