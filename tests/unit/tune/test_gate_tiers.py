"""The gate's tiers on hand-built records: XLA figures compared exactly, instruction counts, steps/s
normalised by the reference speed, failures under a budget, and older baseline files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.tune.test_gate import CPU, VERSIONS, assert_golden, snap, trial
from vramtune.records import Status
from vramtune.results.baseline import (
    Snapshot,
    XlaFigures,
    load_baseline,
    merge_for_save,
    save_baseline,
    snapshot_from_results,
)
from vramtune.tune.gate import Thresholds, Tier, Verdict, compare_snapshots, compare_xla
from vramtune.views.gate_table import bench_markdown

OLD_FILE = Path(__file__).with_name("baseline_schema1.json")
MiB = 2**20


def xla(temp: int = 60 * MiB, flops: float = 6.3e9, alias: int = 4 * MiB,
        versions: dict[str, str] | None = None) -> XlaFigures:
    return XlaFigures(4 * MiB + 100, 4 * MiB + 900, alias, temp, 0, flops, 4.0e8,
                      versions or VERSIONS)


def tiered(trials: list, figures: dict[int, XlaFigures], refs: list[float | None],
           cap_bytes: int | None = None) -> Snapshot:
    s = snapshot_from_results(trials, CPU, profile_dict={"name": "quick"}, references=refs,
                              xla=figures, cap_bytes=cap_bytes, reference="ref v1")
    return replace(s, created="2026-11-20T10:00:00+00:00", updated="2026-11-20T10:00:00+00:00")


# --- deterministic tier ---------------------------------------------------------------------

def test_identical_figures_are_same():
    row = compare_xla(256, xla(), xla(), 0.01)
    assert row.verdict is Verdict.SAME and row.change == 0 and row.tier == Tier.DETERMINISTIC
    assert row.detail == ""


def test_a_figure_past_the_threshold_is_worse_and_named():
    row = compare_xla(256, xla(), xla(temp=int(60 * MiB * 1.062)), 0.01)
    assert row.verdict is Verdict.WORSE and row.label == "XLA temp bytes"
    assert row.change == pytest.approx(0.062, abs=1e-4)
    assert "temp bytes +6.2%" in row.detail and "total bytes" in row.detail
    assert row.headline == "XLA temp bytes +6.2% at 256 envs (deterministic tier)"


def test_below_the_threshold_is_same_but_listed():
    row = compare_xla(64, xla(), xla(flops=6.3e9 * 1.005), 0.01)
    assert row.verdict is Verdict.SAME and "flops +0.5%" in row.detail


def test_a_move_with_a_version_change_is_still_a_regression_and_names_the_versions():
    newer = {**VERSIONS, "jax": "0.9.3"}
    row = compare_xla(64, xla(), xla(temp=90 * MiB, versions=newer), 0.01)
    assert row.verdict is Verdict.WORSE
    assert "moved with the versions (jax 0.9.2 -> 0.9.3)" in row.detail
    same = compare_xla(64, xla(), xla(versions=newer), 0.01)
    assert same.verdict is Verdict.SAME and "versions" not in same.detail  # nothing moved


def test_fewer_flops_is_better_and_less_aliasing_is_worse():
    assert compare_xla(64, xla(), xla(flops=5e9), 0.01).verdict is Verdict.BETTER
    row = compare_xla(64, xla(), xla(alias=2 * MiB), 0.01)
    assert row.verdict is Verdict.WORSE and row.label.startswith("XLA ")


def test_missing_figures_are_unmeasured_with_the_reason():
    row = compare_xla(64, None, xla(), 0.01)
    assert row.verdict is Verdict.UNMEASURED and "--save" in row.detail
    row = compare_xla(64, xla(), None, 0.01, cand_why="RuntimeError: no epoch")
    assert row.verdict is Verdict.UNMEASURED and "no epoch" in row.detail


# --- normalised tier ------------------------------------------------------------------------

def test_a_slower_runner_divides_out():
    base = tiered([trial(64, 900, 70_000), trial(64, 901, 71_000)], {64: xla()}, [100.0, 101.0])
    # the whole machine 43% slower today: raw steps/s and reference fall alike
    cand = tiered([trial(64, 900, 40_000), trial(64, 902, 40_500)], {64: xla()}, [57.0, 57.5])
    report = compare_snapshots(base, cand, Thresholds(0.05, 0.08))
    speed = next(r for r in report.rows if r.metric == "steps/s")
    assert speed.label == "steps/s (normalised)" and speed.tier == Tier.NORMALISED
    assert speed.verdict is Verdict.SAME and report.passed
    assert "raw -43%" in speed.detail and "CPU share -43%" in speed.detail


def test_slower_code_on_the_same_runner_is_caught_by_the_normalised_tier():
    base = tiered([trial(64, 900, 70_000), trial(64, 901, 71_000)], {64: xla()}, [100.0, 101.0])
    cand = tiered([trial(64, 900, 60_000), trial(64, 902, 60_500)], {64: xla()}, [100.5, 99.5])
    report = compare_snapshots(base, cand, Thresholds(0.05, 0.08))
    [speed] = report.regressions
    assert speed.verdict is Verdict.WORSE and speed.tier == Tier.NORMALISED
    assert speed.headline.startswith("steps/s (normalised) -14.") and "normalised tier" in \
        speed.headline


def test_without_reference_speeds_steps_per_s_are_raw():
    base = snap([trial(64, 900, 70_000), trial(64, 901, 71_000)])
    cand = tiered([trial(64, 900, 69_000), trial(64, 902, 70_500)], {64: xla()}, [1.0, 1.0])
    speed = next(r for r in compare_snapshots(base, cand, Thresholds()).rows
                 if r.metric == "steps/s")
    assert speed.label == "steps/s" and speed.tier == Tier.RAW


# --- under a budget -------------------------------------------------------------------------

def test_out_of_memory_under_the_budget_where_the_baseline_fitted_is_a_regression():
    cap = 2 * 2**30
    base = tiered([trial(256, 900, 70_000), trial(256, 901, 71_000)], {256: xla()},
                  [100.0, 100.0], cap_bytes=cap)
    cand = tiered([trial(256, 1900, None, Status.OOM, error="RESOURCE_EXHAUSTED"),
                   trial(256, 1900, None, Status.OOM, error="RESOURCE_EXHAUSTED")],
                  {256: xla(temp=900 * MiB)}, [None, None], cap_bytes=cap)
    report = compare_snapshots(base, cand, Thresholds())
    assert not report.passed
    status = next(r for r in report.rows if r.metric == "status")
    assert status.verdict is Verdict.FAILED and "under the 2.00 GiB budget" in status.detail
    assert "baseline fitted" in status.headline
    other = compare_snapshots(replace(base, cap_bytes=None), cand, Thresholds())
    assert any("no budget" in n and "2.00 GiB" in n for n in other.notes)


# --- counted tier ---------------------------------------------------------------------------

def counted_snap(counts: list[float | None], features: str | None = "x86_64-abc",
                 n: int = 64) -> Snapshot:
    trials = [replace(trial(n, 900, 70_000), instructions_per_env_step=c) for c in counts]
    s = tiered(trials, {n: xla()}, [100.0] * len(trials))
    return replace(s, cpu_features=features)


def _counted(report) -> object:
    return next(r for r in report.rows if r.tier == Tier.COUNTED)


def test_the_same_work_idle_or_loaded_never_fails():
    # quick at 64 envs against an idle baseline: idle runs read -0.1% to +0.7%, every run
    # beside a busy loop -4.7% (XLA's pool threads spin less when they share the cores)
    idle_base = counted_snap([834.9e3, 839.6e3])
    idle = _counted(compare_snapshots(idle_base, counted_snap([838.9e3, 840.1e3]), Thresholds()))
    assert idle.verdict is Verdict.SAME and idle.label == "instructions per env step"
    loaded = compare_snapshots(idle_base, counted_snap([795.5e3, 796.5e3]), Thresholds())
    assert _counted(loaded).verdict is Verdict.SAME and loaded.passed
    # the other way round, an idle run against a baseline saved under load: +4.9%, inside 6%
    backwards = _counted(compare_snapshots(counted_snap([795.5e3, 796.5e3]), idle_base,
                                           Thresholds()))
    assert backwards.verdict is Verdict.SAME and backwards.change < 0.06


def test_more_work_per_step_is_caught_and_named():
    report = compare_snapshots(counted_snap([835.0e3, 838.0e3]),
                               counted_snap([937.9e3, 941.2e3]), Thresholds())
    row = _counted(report)
    assert row.verdict is Verdict.WORSE and not report.passed
    assert row.headline == "instructions per env step +12.3% at 64 envs (counted tier)"


def test_less_work_is_better_and_overlap_is_noise():
    better = _counted(compare_snapshots(counted_snap([835e3, 838e3]),
                                        counted_snap([700e3, 702e3]), Thresholds()))
    assert better.verdict is Verdict.BETTER
    noisy = _counted(compare_snapshots(counted_snap([835e3, 950e3]),
                                       counted_snap([945e3, 955e3]), Thresholds()))
    assert noisy.verdict is Verdict.NOISY


def test_counts_from_another_instruction_set_are_not_compared():
    report = compare_snapshots(counted_snap([835e3, 838e3], "x86_64-abc"),
                               counted_snap([1500e3, 1510e3], "x86_64-def"), Thresholds())
    row = _counted(report)
    assert row.verdict is Verdict.UNMEASURED and report.passed
    assert "another instruction set" in row.detail


def test_no_counts_on_either_side_is_no_row_and_one_side_says_why():
    assert not any(r.tier == Tier.COUNTED for r in compare_snapshots(
        counted_snap([None, None]), counted_snap([None, None]), Thresholds()).rows)
    refused = _counted(compare_snapshots(counted_snap([835e3, 838e3]),
                                         counted_snap([None, None]), Thresholds()))
    assert refused.verdict is Verdict.UNMEASURED and "refused" in refused.detail
    new = _counted(compare_snapshots(None, counted_snap([835e3, 838e3]), Thresholds()))
    assert new.verdict is Verdict.NEW


# --- files ----------------------------------------------------------------------------------

def test_round_trip_keeps_figures_references_and_budget(tmp_path):
    s = tiered([trial(64, 900, 70_000), trial(256, 950, 60_000)], {64: xla(), 256: xla()},
               [100.0, 99.0], cap_bytes=3 * 2**30)
    path = tmp_path / "b.json"
    save_baseline(path, s)
    assert load_baseline(path) == s
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and data["sizes"][0]["xla"]["temp_bytes"] == 60 * MiB
    assert data["sizes"][0]["samples"][0]["cpu_s_per_s"] == 100.0
    counted = counted_snap([835e3, 838e3])
    save_baseline(path, counted)
    assert load_baseline(path) == counted
    data = json.loads(path.read_text())
    assert data["cpu_features"] == "x86_64-abc"
    assert data["sizes"][0]["samples"][1]["instructions_per_env_step"] == 838e3


def test_a_schema_2_baseline_gates_all_but_the_counts_and_says_so(tmp_path):
    base = counted_snap([835e3, 838e3])
    data = base.to_dict()
    data["schema_version"] = 2
    del data["cpu_features"]
    for size in data["sizes"]:
        for sample in size["samples"]:
            del sample["instructions_per_env_step"]
    path = tmp_path / "b2.json"
    path.write_text(json.dumps(data))
    old = load_baseline(path)
    assert old.older_format == 2
    report = compare_snapshots(old, counted_snap([836e3, 837e3]), Thresholds())
    assert any("schema 2" in n and "no instruction counts" in n and "--save" in n
               for n in report.notes)
    row = next(r for r in report.rows if r.tier == Tier.COUNTED)
    assert row.verdict is Verdict.UNMEASURED and "the baseline has none" in row.detail


def test_an_older_baseline_loads_with_a_note_and_gates_what_it_has(tmp_path):
    old = load_baseline(OLD_FILE)
    assert old.older_format == 1 and all(s.xla is None for s in old.sizes)
    versions = old.sizes[0].versions
    cand = tiered([trial(64, 899, 72_000, profile_hash=old.profile_hash, versions=versions),
                   trial(64, 905, 71_500, profile_hash=old.profile_hash, versions=versions)],
                  {64: xla()}, [100.0, 100.0])
    report = compare_snapshots(old, cand, Thresholds())
    assert any("older format (schema 1)" in n and "--save" in n for n in report.notes)
    rows = {r.label: r for r in report.rows}
    assert rows["XLA total bytes"].verdict is Verdict.UNMEASURED
    assert rows["steps/s"].tier == Tier.RAW
    merged, note = merge_for_save(old, cand)
    assert merged is cand and "older format" in note


def test_tiers_markdown_golden():
    base = tiered([trial(64, 900, 70_000), trial(256, 950, 60_000),
                   trial(64, 902, 71_000), trial(256, 952, 61_000)],
                  {64: xla(temp=15 * MiB), 256: xla()}, [100.0, 100.0, 101.0, 99.0])
    cand = tiered([trial(64, 905, 44_000), trial(256, 1010, 50_000),
                   trial(64, 903, 45_000), trial(256, 1012, 50_500)],
                  {64: xla(temp=15 * MiB), 256: xla(temp=int(60 * MiB * 1.062))},
                  [63.0, 99.0, 64.0, 100.0])
    text = bench_markdown(compare_snapshots(base, cand, Thresholds(0.05, 0.08, 0.01)))
    assert "XLA temp bytes +6.2% at 256 envs (deterministic tier)" in text
    assert "steps/s (normalised) -1" in text and "(normalised tier)" in text
    assert_golden("tiers.md", text)


def test_a_figure_that_grows_from_zero_is_worse_and_its_row_stays_valid_json():
    import json

    # jaxlib counts no generated code on CPU (0); a release that starts to is a move from 0
    row = compare_xla(256, xla(), replace(xla(), generated_code_bytes=2 * MiB), 0.01)
    assert row.verdict is Verdict.WORSE and row.label == "XLA code bytes"
    assert row.change is None and "from 0" in row.detail
    assert row.headline.startswith("XLA code bytes from 0 to ")
    json.dumps(row.__dict__, allow_nan=False)
