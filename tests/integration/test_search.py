"""Real predictive sweeps: quick at small sizes on the CPU backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

# real sweeps of several trials each: not in the fast tier (-m 'not slow')
pytestmark = pytest.mark.slow

def _lines(run_dir: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return lines[0], lines[1:]


def test_predictive_sweep_jumps_with_the_model_and_recommends_a_size_it_ran(tmp_path, quick_short):
    run_dir = tmp_path / "run"
    # 64 envs fits 1.08 GB (data segment ~0.86 GB). Beside it a compile-only probe counts the
    # training epoch's buffers at 64 and 1024 envs (the slope prior), so the model aims the
    # second trial. --refine 1: one trial after the bootstrap size. --cache: the jump is under
    # test, not a cold peak; a size compiled before (64 by other tests, the jump by its own
    # search trial) meets its repeat ~150 MB lower, so the jump, aimed at the line, is not
    # stepped down from on one run's jitter (cold, it was: 7 trials, 146 s)
    proc = run_cli("sweep", "--profile", quick_short, "--start", "64", "--max-envs", "1024",
                   "--gpu-mem", "1.08GB", "--cache",
                   "--headroom", "0%", "--refine", "1", "--no-confirm", "--out", str(run_dir))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    header, trials = _lines(run_dir)
    assert header["search"]["search"] == "predictive"
    footprint = json.loads((run_dir / "footprint.json").read_text())
    searched = [t for t in trials if t["purpose"] == "search"]
    assert searched[0]["num_envs"] == 64
    out = proc.stdout
    if searched[0]["status"] == "ok":
        assert len(searched) >= 2, [t["num_envs"] for t in trials]
        jump = searched[1]["num_envs"]
        # The refine budget is one trial, but a jump that fits its search trial and fails its
        # repeat moves the boundary down, and the sizes below it are measured (the step-down:
        # 416 once fitted its search trial at 96% of the cap and ran out of memory on repeat).
        seen = [(t["num_envs"], t["purpose"], t["status"]) for t in trials]
        failed_at = next((i for i, t in enumerate(trials) if t["num_envs"] == jump
                          and t["purpose"] != "search" and t["status"] == "oom"), None)
        extra_at = [i for i, t in enumerate(trials) if t["purpose"] == "search"][2:]
        if extra_at:  # only after the jump's proof ran out of memory, only below it, bounded
            assert failed_at is not None and failed_at < extra_at[0], seen
            assert all(64 < trials[i]["num_envs"] < jump for i in extra_at), seen
            assert len(extra_at) <= 10, seen  # bisections of the ~31 round sizes in (64, 1024)
        assert 64 < jump <= 1024 and bin(jump).count("1") <= 4  # a round size
        if footprint["error"] is None:  # the prior came in time: the model aimed the jump
            assert [s["num_envs"] for s in footprint["sizes"]] == [64, 1024]
            assert "memory prior:" in out and "not a measured peak" in out
            assert "predicted peak" in out and "a prediction, not a measurement" in out
        else:  # it did not (a loaded machine): the second bootstrap size, 4 x the start
            assert "no memory prior" in out and jump == 256
        # the search's own end, or, after a failed repeat, where the step-down ended
        assert ("refine budget spent" in out or "search: step-down below" in out
                or "within one run's jitter" in out)
    table = out.split("results:")[0].split("\n")
    assert not any("predicted" in line for line in table if "|" in line or "│" in line)
    if proc.returncode == 0:
        chosen = int(out.split("recommended: num_envs=")[1].split(",")[0])
        ok = {t["num_envs"] for t in trials if t["status"] == "ok"}
        assert chosen in ok  # never a size that was not run
        again = [t for t in trials if t["num_envs"] == chosen and t["purpose"] != "search"]
        assert again and all(t["status"] == "ok" for t in again), \
            "the pick is proven by a second run, and every proof of it fitted"


def test_parallel_sweep_marks_shared_runs_and_measures_the_pick_alone(tmp_path, quick_short):
    run_dir = tmp_path / "run"
    # nothing fails up to 256 under 1.5 GB: one round of two shared trials, then the
    # largest size alone (max-envs compares no steps/s below it), then its repeat. --cache:
    # no boundary is near, so the session's warm compile cache may lower the peaks.
    proc = run_cli("sweep", "--profile", quick_short, "--start", "64", "--max-envs", "256",
                   "--gpu-mem", "1.5GB",
                   "--headroom", "0%", "--no-confirm", "--parallel", "2", "--objective",
                   "max-envs", "--cache", "--out", str(run_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header, trials = _lines(run_dir)
    assert header["search"]["parallel"] == 2
    first = trials[:2]
    assert sorted(t["num_envs"] for t in first) == [64, 256]
    assert all(t["shared_run"] and t["status"] == "ok" for t in first)
    alone = trials[2]
    assert (alone["num_envs"], alone["purpose"], alone["shared_run"]) == (256, "alone", False)
    repeat = trials[3]  # the pick's proof (--no-confirm: a plain repeat)
    assert (repeat["num_envs"], repeat["purpose"], repeat["shared_run"]) == (256, "repeat", False)
    assert len(trials) == 4
    out = proc.stdout
    assert "recommended: num_envs=256" in out
    assert "shared" in out and "its steps/s do not (shared compute)" in out
    assert "steps/s not comparable" in out  # the progress line of a shared trial
