"""sweep --json carries the throughput lines the terminal summary prints."""

import json
from pathlib import Path

from vramtune.records import Status, TrialResult
from vramtune.tune.prepare import SweepState
from vramtune.tune.recommend import choose
from vramtune.views.sweep_json import summary


def _trial(n: int, sps: float) -> TrialResult:
    return TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=n,
                       backend="cpu", steps_per_s=sps, host_peak_rss_bytes=10**8,
                       steps_per_s_intervals=[sps * (1 + d) for d in (-0.01, 0, 0.01)] * 4)


def test_the_json_summary_holds_the_pick_against_the_fastest():
    state = SweepState(results=[_trial(64, 50_000.0), _trial(128, 100_000.0)])
    rec = choose(state.results, None, 0.1)
    data = json.loads(json.dumps(summary(state, rec, Path("run"))))
    assert data["speed_line"] == rec.speed_line and data["speed_line"].startswith("steady ")
    assert data["confirm_speed_line"] is None  # no confirming run


def test_a_set_aside_run_is_named_by_its_place_in_the_results(tmp_path):
    import shutil

    from vramtune.results.store import RESULTS_FILE, load_run

    golden = Path(__file__).parents[2] / "golden" / "runs" / "cpu-quick-1.3GB-dip-rerun.jsonl"
    shutil.copy(golden, tmp_path / RESULTS_FILE)
    run = load_run(tmp_path)
    state = SweepState(results=list(run.results))
    rec = choose(state.results, run.header.budget_bytes, run.header.headroom_fraction)
    data = json.loads(json.dumps(summary(state, rec, Path("run"))))
    [aside] = data["set_aside"]
    assert aside["num_envs"] == 448 and data["results"][aside["result_index"]]["num_envs"] == 448
    assert data["results"][aside["result_index"]]["purpose"] == "search"
    assert aside["why"].startswith("set aside: read 14,878 steps/s")
    clean = summary(SweepState(results=[_trial(64, 50_000.0)]),
                    choose([_trial(64, 50_000.0)], None, 0.1), Path("run"))
    assert clean["set_aside"] == []


def test_the_json_summary_carries_each_role_per_env_and_fixed_where_counted():
    from tests.unit.tune.test_ledger import trial

    bare = SweepState(results=[_trial(64, 50_000.0), _trial(128, 100_000.0)])
    assert summary(bare, choose(bare.results, None, 0.1), Path("run"))["ledger_fits"] == []
    counted = SweepState(results=[trial(64), trial(128)])
    fits = {f["field"]: f for f in json.loads(json.dumps(summary(
        counted, choose(counted.results, None, 0.1), Path("run"))))["ledger_fits"]}
    assert fits["ledger_env_state_bytes"]["per_env_bytes"] == 164
    assert fits["ledger_params_bytes"]["fixed_bytes"] == 1_588_236
