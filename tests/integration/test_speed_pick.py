"""The throughput pick on real CPU trials: too few intervals to decide, so the two sizes are
measured again, alone and interleaved, and the output shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vramtune.workload.profile import load_profile
from vramtune.yamlio import dump

pytestmark = pytest.mark.slow


def test_an_unresolved_pick_is_remeasured_and_shown(tmp_path: Path):
    data = load_profile("quick").to_dict()
    # Three intervals of one epoch each: 3 against 3 can never reach 95%, so the first
    # comparison is unresolved by construction, and the re-measurement is what decides.
    data["measure"].update(min_intervals=3, max_intervals=3, min_window_s=0.0,
                           min_interval_s=0.01)
    data["name"] = "quick-3-intervals"
    profile = tmp_path / "p.yaml"
    profile.write_text(dump(data))
    run_dir = tmp_path / "run"
    proc = run_cli("sweep", "--profile", str(profile), "--start", "64", "--max-envs", "128",
                   "--no-confirm", "--out", str(run_dir), timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "re-measuring 64 and 128 envs, interleaved (pair 1 of at most 3)" in out, out
    assert "throughput: steady" in out, out
    lines = (run_dir / "results.jsonl").read_text().splitlines()[1:]
    trials = [json.loads(line) for line in lines]
    alone = [(t["num_envs"], t["purpose"]) for t in trials if t["purpose"] == "alone"]
    assert alone[:2] in ([(128, "alone"), (64, "alone")], [(64, "alone"), (128, "alone")])
    for t in trials:
        if t["status"] == "ok":
            assert len(t["steps_per_s_intervals"]) == t["measured_intervals"]
            assert t["speed_steady"] is not None
