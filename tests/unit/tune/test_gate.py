"""The bench gate's pure logic: thresholds, distinguishability, direction, failures, baselines.

Records are built by hand so the Markdown is byte-for-byte stable. Regenerate the goldens after
an intended change with ``VRAMTUNE_UPDATE_GOLDEN=1 pytest tests/unit/test_bench.py``.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_golden as shared_assert_golden
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import (
    BASELINE_KIND,
    MachineKey,
    Snapshot,
    key_from_results,
    load_baseline,
    merge_for_save,
    save_baseline,
    snapshot_from_results,
)
from vramtune.tune.gate import BenchReport, Thresholds, Verdict, compare_snapshots, distinguishable, judge
from vramtune.views.gate_table import bench_markdown

MiB = 2**20
CPU = MachineKey("cpu", "AMD EPYC", 1)
VERSIONS = {"python": "3.12.0", "jax": "0.9.2", "brax": "0.14.2", "vramtune": "0.1.0"}


def assert_golden(name: str, text: str) -> None:
    shared_assert_golden(f"bench/{name}", text)


def trial(n: int, peak_mib: float | None, rate: float | None, status: Status = Status.OK,
          profile_hash: str = "aaaa", versions: dict[str, str] | None = None,
          error: str | None = None) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash=profile_hash, num_envs=n,
                       batch_size=n, num_minibatches=4, unroll_length=10, backend="cpu",
                       device_kind="cpu", device_count=1,
                       host_peak_rss_bytes=None if peak_mib is None else int(peak_mib * MiB),
                       steps_per_s=rate, error_message=error, versions=versions or VERSIONS,
                       timestamp="2026-11-21T20:00:00+00:00")


def snap(trials: list[TrialResult], machine: MachineKey = CPU) -> Snapshot:
    s = snapshot_from_results(trials, machine, profile_dict={"name": "quick"})
    return Snapshot(**{**s.__dict__, "created": "2026-11-20T10:00:00+00:00",
                             "updated": "2026-11-20T10:00:00+00:00"})


# --- judge: threshold AND distinguishable, direction-aware ---------------------------------

def test_memory_increase_past_threshold_and_apart_is_worse():
    verdict, change, test = judge([900, 905], [1180, 1185], higher_is_worse=True, threshold=0.05)
    assert verdict is Verdict.WORSE and change == pytest.approx(1182.5 / 902.5 - 1)
    assert test is not None and test.method == "ranges"


def test_memory_decrease_is_better_not_a_regression():
    verdict, _, _ = judge([900, 905], [700, 705], higher_is_worse=True, threshold=0.05)
    assert verdict is Verdict.BETTER


def test_speed_drop_is_worse_speed_gain_is_better():
    assert judge([100, 110], [50, 55], higher_is_worse=False, threshold=0.1)[0] is Verdict.WORSE
    assert judge([100, 110], [150, 160], higher_is_worse=False, threshold=0.1)[0] is Verdict.BETTER


def test_within_threshold_is_same_even_when_ranges_are_apart():
    # memory is nearly deterministic: 2% apart, non-overlapping, still under a 5% threshold
    verdict, change, test = judge([900, 901], [918, 919], higher_is_worse=True, threshold=0.05)
    assert verdict is Verdict.SAME and change == pytest.approx(0.02, abs=1e-3) and test is None


def test_past_threshold_but_overlapping_repeats_is_noise():
    verdict, change, test = judge([60, 100], [40, 90], higher_is_worse=False, threshold=0.1)
    assert change is not None and change < -0.1
    assert verdict is Verdict.NOISY and test is not None and not test.result


def test_threshold_is_exclusive_of_equality():
    assert judge([100], [110], higher_is_worse=True, threshold=0.10)[0] is Verdict.SAME
    assert judge([100], [110.1], higher_is_worse=True, threshold=0.10)[0] is Verdict.WORSE


def test_unmeasured_side_is_na_never_zero():
    assert judge([], [100], higher_is_worse=True, threshold=0.05)[0] is Verdict.UNMEASURED
    assert judge([100], [], higher_is_worse=True, threshold=0.05)[0] is Verdict.UNMEASURED


def test_rank_test_tolerates_a_little_overlap_from_four_repeats():
    base, cand = [100, 102, 104, 121], [120, 125, 130, 135]
    test = distinguishable(base, cand, higher=True)
    assert test.method == "mann-whitney" and test.result and test.p_value < 0.05
    # the wrong direction is never distinguishable
    assert not distinguishable(base, cand, higher=False).result


def test_three_repeats_use_the_range_test():
    test = distinguishable([100, 102, 121], [120, 125, 130], higher=True)
    assert test.method == "ranges" and not test.result
    assert distinguishable([100, 102, 104], [120, 125, 130], higher=True).result


def test_rank_test_says_no_when_samples_interleave():
    test = distinguishable([100, 110, 120, 130], [105, 115, 125, 135], higher=True)
    assert test.method == "mann-whitney" and not test.result


# --- compare: failures, new sizes, notes -----------------------------------------------------

def test_candidate_failure_where_baseline_was_ok_is_a_regression():
    base = snap([trial(64, 900, 100), trial(64, 902, 101)])
    cand = snap([trial(64, 901, 100), trial(64, 650, None, Status.OOM,
                                             error="RESOURCE_EXHAUSTED: Out of memory")])
    report = compare_snapshots(base, cand, Thresholds())
    status = next(r for r in report.rows if r.metric == "status")
    assert status.verdict is Verdict.FAILED and "oom 1/2" in status.candidate_statuses
    assert "RESOURCE_EXHAUSTED" in status.detail
    assert not report.passed
    # the failed repeat's figures are left out of the metric rows, not counted as zero
    memory = next(r for r in report.rows if r.metric == "memory")
    assert memory.candidate_values == (901 * MiB,)


def test_fixed_and_both_failed_are_not_regressions():
    base = snap([trial(64, 650, None, Status.OOM), trial(128, 650, None, Status.CRASH)])
    cand = snap([trial(64, 900, 100), trial(128, 650, None, Status.OOM)])
    verdicts = {(r.num_envs, r.metric): r.verdict for r in compare_snapshots(base, cand, Thresholds()).rows}
    assert verdicts[(64, "status")] is Verdict.FIXED
    assert verdicts[(128, "status")] is Verdict.BOTH_FAILED
    assert compare_snapshots(base, cand, Thresholds()).passed


def test_size_without_baseline_is_new_and_passes():
    report = compare_snapshots(snap([trial(64, 900, 100)]), snap([trial(256, 950, 120)]), Thresholds())
    assert {r.verdict for r in report.rows} == {Verdict.NEW} and report.passed


def test_notes_name_profile_and_version_changes_and_forced_machine():
    base = snap([trial(64, 900, 100)], MachineKey("cpu", "Intel Xeon", 1))
    cand = snap([trial(64, 900, 100, profile_hash="bbbb",
                       versions={**VERSIONS, "jax": "0.9.3"})])
    notes = compare_snapshots(base, cand, Thresholds()).notes
    assert any("another machine" in n and "Intel Xeon" in n for n in notes)
    assert any("profile differs" in n and "aaaa -> quick bbbb" in n for n in notes)
    assert any("jax 0.9.2 -> 0.9.3" in n for n in notes)


def test_machine_key_matching():
    assert CPU.matches(MachineKey("cpu", "AMD EPYC", None))  # count unknown before a trial
    assert not CPU.matches(MachineKey("cpu", "AMD EPYC", 2))
    assert not CPU.matches(MachineKey("gpu", "AMD EPYC", 1))
    assert not CPU.matches(MachineKey("cpu", "Intel Xeon", 1))
    gpu = [TrialResult(status=Status.OK, profile="q", profile_hash="h", num_envs=64, backend="gpu",
                       device_count=2, gpu_name="NVIDIA H100 80GB HBM3")]
    assert key_from_results(gpu, "AMD EPYC") == MachineKey("gpu", "NVIDIA H100 80GB HBM3", 2)
    assert key_from_results([trial(64, 900, 1)], "AMD EPYC") == CPU


# --- baseline files --------------------------------------------------------------------------

def test_baseline_round_trip(tmp_path):
    s = snap([trial(64, 900, 100), trial(256, 950, 120), trial(64, 902, 99)])
    path = tmp_path / "b.json"
    save_baseline(path, s)
    assert load_baseline(path) == s
    data = json.loads(path.read_text())
    assert data["kind"] == BASELINE_KIND and data["machine"]["device"] == "AMD EPYC"
    assert [len(x["samples"]) for x in data["sizes"]] == [2, 1]


def test_save_updates_measured_sizes_and_keeps_the_rest():
    old = snap([trial(64, 900, 100), trial(256, 950, 120)])
    new = snap([trial(64, 800, 130)])
    merged, note = merge_for_save(old, new)
    assert [s.num_envs for s in merged.sizes] == [64, 256]
    assert merged.size(64).peaks_bytes() == [800 * MiB]
    assert merged.size(256).peaks_bytes() == [950 * MiB]
    assert note and "kept num_envs 256" in note


def test_save_replaces_another_profile_or_machine_wholesale():
    old = snap([trial(64, 900, 100), trial(256, 950, 120)])
    new = snap([trial(64, 800, 130, profile_hash="bbbb")])
    merged, note = merge_for_save(old, new)
    assert [s.num_envs for s in merged.sizes] == [64] and "another profile" in note
    merged, note = merge_for_save(snap([trial(64, 1, 1)], MachineKey("cpu", "x", 1)),
                                        snap([trial(64, 2, 2)]))
    assert "another machine" in note


@pytest.mark.parametrize("content, message", [
    ("{not json", "b.json: not valid JSON"),
    ('{"kind": "something"}', "not a vramtune bench baseline"),
    (json.dumps({"kind": BASELINE_KIND, "schema_version": 99}), "schema version 99"),
    (json.dumps({"kind": BASELINE_KIND, "schema_version": 1}), "missing required key 'machine'"),
    (json.dumps({"kind": BASELINE_KIND, "schema_version": True}), "schema version True"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("{\"a\": " + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_bad_baseline_files_are_one_line_user_errors(tmp_path, content, message):
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message) as info:
        load_baseline(path)
    assert "\n" not in str(info.value)


def test_missing_baseline_says_how_to_create_it(tmp_path):
    with pytest.raises(UserError, match="--save"):
        load_baseline(tmp_path / "none.json")


# --- Markdown --------------------------------------------------------------------------------

def _golden_report() -> BenchReport:
    base = snap([trial(64, 902.3, 59_620.8), trial(256, 915.7, 76_246.8),
                 trial(64, 923.5, 67_865.5), trial(256, 909.7, 70_906.9),
                 trial(1024, 930.0, 80_000.0), trial(2048, 650, None, Status.OOM)])
    cand = snap([trial(64, 1180.6, 4_726.6, profile_hash="bbbb"),
                 trial(256, 800.0, 40_000.0, profile_hash="bbbb"),
                 trial(64, 1190.1, 4_800.2, profile_hash="bbbb"),
                 trial(256, 805.4, 81_000.0, profile_hash="bbbb"),
                 trial(1024, 931.0, 79_000.0, profile_hash="bbbb"),
                 trial(1024, 640, None, Status.OOM, profile_hash="bbbb",
                       error="RESOURCE_EXHAUSTED: Out of memory allocating 123 bytes"),
                 trial(2048, 1200, 90_000.0, profile_hash="bbbb"),
                 trial(4096, 1300, 95_000.0, profile_hash="bbbb")])
    return compare_snapshots(base, cand, Thresholds(0.05, 0.10))


def test_markdown_golden():
    assert_golden("regression.md", bench_markdown(_golden_report()))


def test_markdown_pass_golden():
    base = snap([trial(64, 902.3, 59_620.8), trial(64, 923.5, 67_865.5)])
    cand = snap([trial(64, 910.0, 61_000.0), trial(64, 915.0, 58_000.0)])
    assert_golden("pass.md", bench_markdown(compare_snapshots(base, cand, Thresholds())))


def test_markdown_markers_and_verdict_line():
    text = bench_markdown(_golden_report())
    assert "🔴 worse" in text and "🟢 better" in text and "⚪ within noise" in text
    assert "🔴 failed" in text and "🟢 fixed" in text and "🆕 no baseline" in text
    assert "**FAIL: " in text
    assert "| ---: | --- | ---: | ---: | ---: | --- |" in text


def test_json_is_serialisable_and_says_pass_or_fail():
    data = json.loads(json.dumps(_golden_report().to_dict()))
    assert data["passed"] is False and data["regressions"] >= 2
    assert {r["verdict"] for r in data["rows"]} >= {"worse", "better", "failed", "fixed", "new"}
