"""`report` and `compare` views of saved sweeps, from hand-built records, against golden files.

Regenerate after an intended change with
``VRAMTUNE_UPDATE_GOLDEN=1 pytest tests/unit/views/test_runs.py``.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from tests.conftest import assert_golden as shared_assert_golden
from vramtune.records import Status, TrialResult
from vramtune.results.store import Run, RunHeader
from vramtune.tune.recommend import Objective, choose
from vramtune.views import runs as cmp
from vramtune.views.sweep_table import sweep_table

MiB = 2**20
VERSIONS = {"python": "3.12.0", "jax": "0.9.2", "jaxlib": "0.9.2", "brax": "0.14.2",
            "vramtune": "0.1.0"}


def assert_golden(name: str, text: str) -> None:
    shared_assert_golden(f"report/{name}", text)


def cpu_trial(n: int, peak_mib: float | None, rate: float | None,
              status: Status = Status.OK) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="16fa582f053d812d",
                       num_envs=n, batch_size=n, num_minibatches=4, unroll_length=10,
                       backend="cpu", device_kind="cpu", device_count=1,
                       budget_bytes=1_100_000_000,
                       host_peak_rss_bytes=None if peak_mib is None else int(peak_mib * MiB),
                       compile_s=None if rate is None else 8.0, steps_per_s=rate,
                       versions=VERSIONS)


def gpu_trial(n: int, pool_mib: float | None, rate: float | None,
              status: Status = Status.OK) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="16fa582f053d812d",
                       num_envs=n, batch_size=n, num_minibatches=4, unroll_length=10,
                       backend="gpu", device_kind="NVIDIA H100", device_count=1,
                       budget_bytes=8_000_000_000,
                       jax_peak_bytes_in_use=None if pool_mib is None else int(pool_mib * 0.6 * MiB),
                       jax_peak_pool_bytes=None if pool_mib is None else int(pool_mib * MiB),
                       nvml_process_peak_bytes=None if pool_mib is None else int((pool_mib + 500) * MiB),
                       host_peak_rss_bytes=1500 * MiB, steps_per_s=rate, versions=VERSIONS,
                       gpu_name="NVIDIA H100 80GB HBM3")


def header(budget: int, gpu: str | None = None, profile_hash: str = "16fa582f053d812d",
           versions: dict[str, str] | None = None) -> RunHeader:
    return RunHeader(profile_name="quick", profile_hash=profile_hash, profile={"name": "quick"},
                     budget_bytes=budget, headroom_fraction=0.1,
                     machine={"cpu": "AMD EPYC", "hostname": "ci"},
                     versions=versions or VERSIONS, gpu_name=gpu,
                     created="2026-11-21T20:00:00+00:00")


CPU_RUN = Run(Path("runs/cpu"), header(1_100_000_000),
              (cpu_trial(128, 757.8, 21_106.8), cpu_trial(256, 760.8, 27_049.7),
               cpu_trial(512, 990.0, 26_000.0), cpu_trial(2048, 652.2, None, Status.OOM)))
GPU_RUN = Run(Path("runs/h100"), header(8_000_000_000, gpu="NVIDIA H100 80GB HBM3",
                                        versions={**VERSIONS, "jax": "0.9.3"}),
              (gpu_trial(128, 300, 90_000.0), gpu_trial(256, 420, 160_000.0),
               gpu_trial(1024, 900, 400_000.0), gpu_trial(4096, None, None, Status.OOM)))


def _report(run: Run, headroom: float = 0.1, objective: Objective = Objective.THROUGHPUT) -> str:
    rec = choose(run.results, run.header.budget_bytes, headroom, objective)
    table = sweep_table(run.results, rec, run.header.budget_bytes)
    return cmp.report_markdown(run, rec, table, run.header.budget_bytes, headroom)


def test_report_markdown_cpu_golden():
    text = _report(CPU_RUN)
    assert_golden("report-cpu.md", text)
    # 256 is the pick (512 is slower and over the 10% headroom), bold, without stray asterisks
    assert "| **\\* 256** |" in text and "***" not in text
    assert "host RAM" in text and "not VRAM" in text


def test_report_markdown_gpu_golden():
    text = _report(GPU_RUN)
    assert_golden("report-gpu.md", text)
    assert "CPU backend" not in text and "NVIDIA H100 80GB HBM3" in text


def test_headroom_override_changes_the_pick():
    assert "num_envs=256" in _report(CPU_RUN, 0.1, Objective.MAX_ENVS)
    assert "num_envs=512" in _report(CPU_RUN, 0.05, Objective.MAX_ENVS)


def test_compare_markdown_golden_and_warnings():
    text = cmp.compare_markdown(CPU_RUN, GPU_RUN, cmp.compare_table(CPU_RUN, GPU_RUN))
    assert_golden("compare.md", text)
    assert "peak A (host RAM)" in text and "peak B (VRAM)" in text
    assert "memory ratio compares different things" in text
    assert "budgets differ" in text


def test_compare_ratios_and_sizes_run_on_one_side_only():
    frame = cmp.compare_frame(CPU_RUN, GPU_RUN).set_index("num_envs")
    assert frame.loc[128, "steps_per_s_ratio"] == 90_000.0 / 21_106.8
    assert frame.loc[128, "peak_ratio"] == (800 * MiB) / int(757.8 * MiB)
    assert frame.loc[512, "status_b"] is pd.NA and frame.loc[512, "peak_ratio"] is pd.NA
    assert frame.loc[4096, "status_a"] is pd.NA and frame.loc[4096, "status_b"] == "oom"
    rows = {row[0]: row for row in cmp.compare_table(CPU_RUN, GPU_RUN).rows()}
    assert rows["512"][2] == "not run"


def test_compare_ratio_against_zero_is_not_measured():
    zero = Run(Path("z"), CPU_RUN.header, (cpu_trial(128, 0, 21_106.8),))
    frame = cmp.compare_frame(zero, CPU_RUN)
    assert frame.loc[0, "peak_ratio"] is pd.NA and frame.loc[0, "steps_per_s_ratio"] == 1.0


def test_compare_warns_when_profiles_differ():
    other = replace(CPU_RUN, header=replace(CPU_RUN.header, profile_hash="ffffffffffffffff"))
    warnings = cmp.compare_warnings(CPU_RUN, other)
    assert len(warnings) == 1 and "different profiles" in warnings[0]
    assert cmp.compare_warnings(CPU_RUN, CPU_RUN) == []


def test_compare_takes_one_record_per_size_by_the_shared_rule():
    # a resumed run that measured 256 twice, failing once: the size is not proven to fit
    resumed = Run(Path("r"), CPU_RUN.header, (*CPU_RUN.results, cpu_trial(256, 900, None, Status.OOM)))
    frame = cmp.compare_frame(resumed, CPU_RUN).set_index("num_envs")
    assert frame.loc[256, "status_a"] == "oom" and frame.loc[256, "status_b"] == "ok"
    assert list(frame.index) == [128, 256, 512, 2048]


def test_compare_csv_and_json_keep_raw_numbers():
    rows = cmp.compare_table(CPU_RUN, GPU_RUN)
    table = list(csv.DictReader(io.StringIO(rows.to_csv())))
    assert table[0]["num_envs"] == "128" and table[0]["peak_a_bytes"] == str(int(757.8 * MiB))
    assert table[-1]["steps_per_s_a"] == ""  # not measured: empty, never 0
    data = json.loads(cmp.compare_json(CPU_RUN, GPU_RUN, rows))
    assert data["a"]["memory"] == "host RAM" and data["b"]["memory"] == "VRAM"
    assert data["rows"][0]["steps_per_s_b"] == 90_000.0


def test_the_recommended_line_quotes_the_rate_the_pick_weighed_not_its_fastest_run():
    """A size re-measured alone is chosen by its fastest run, but compared on every interval
    of its runs: the line quotes that pooled median, as the throughput line does."""
    from vramtune.records import Purpose

    def run(n, rates, purpose=Purpose.SEARCH):
        return replace(cpu_trial(n, 800, rates[len(rates) // 2]), purpose=purpose,
                       steps_per_s_intervals=rates, steps_per_s_min=min(rates),
                       steps_per_s_max=max(rates), measured_intervals=len(rates))

    rows = [run(128, [9_000.0, 9_100.0, 9_200.0]),
            run(640, [13_300.0, 13_351.0, 13_400.0]),
            run(640, [12_300.0, 12_386.0, 12_400.0], Purpose.ALONE)]
    rec = choose(rows, 1_100_000_000, 0.1)
    assert rec.chosen.steps_per_s == 13_351 and rec.steady_steps_per_s == 12_850
    line = cmp.recommendation_line(rec, 1_100_000_000)
    assert "num_minibatches=4: 12,850 steps/s (median of its runs' 6 intervals), peak" in line, line
    assert rec.speed_line.startswith("steady 12,850 (95% interval")
    alone = choose(rows[:2], 1_100_000_000, 0.1)  # one run: its own figure, no words
    assert "13,351 steps/s, peak" in cmp.recommendation_line(alone, 1_100_000_000)


def test_compare_quotes_each_size_at_its_pooled_rate_and_a_failed_size_at_none():
    """Two runs of 256 (27.0k, then 25.0k alone) read as their pooled rate, not the rate of
    the run that held the higher peak; 512's failed repeat stands for it: no rate beside oom."""
    from dataclasses import replace

    from vramtune.records import Purpose

    again = replace(cpu_trial(256, 770.0, 25_000.0), purpose=Purpose.ALONE)
    failed = replace(cpu_trial(512, None, None, Status.OOM), purpose=Purpose.REPEAT)
    run = Run(Path("runs/again"), header(1_100_000_000), (*CPU_RUN.results, again, failed))
    frame = cmp.compare_frame(run, CPU_RUN).set_index("num_envs")
    assert frame.loc[256, "steps_per_s_a"] == 26_024.85  # the median of the two runs
    assert frame.loc[512, "status_a"] == "oom" and pd.isna(frame.loc[512, "steps_per_s_a"])


def test_outcome_lines_under_a_sweeps_table():
    """The lines the CLI prints under its table and api.sweep logs, from one function."""
    rec = choose(list(CPU_RUN.results), 1_100_000_000, 0.1, Objective.THROUGHPUT)
    lines = cmp.outcome_lines(rec, 1_100_000_000, Path("runs/cpu"), stopped_because="bracketed",
                              reused=2, confirm=True, interrupted=False)
    labels = [(line.tone, line.label) for line in lines]
    assert labels[:3] == [("plain", "search"), ("plain", "resumed"), ("good", "recommended")]
    assert ("warning", "not confirmed") in labels and labels[-1] == ("plain", "results")
    assert lines[2].text == cmp.chosen_summary(rec, 1_100_000_000)
    stopped = cmp.outcome_lines(rec, 1_100_000_000, Path("runs/cpu"), stopped_because=None,
                                reused=0, confirm=True, interrupted=True)
    assert {line.label for line in stopped} & {"search", "resumed", "not confirmed"} == set()
    nothing = choose([cpu_trial(2048, 652.2, None, Status.OOM)], 1_100_000_000, 0.1,
                     Objective.THROUGHPUT)
    bad = cmp.outcome_lines(nothing, 1_100_000_000, Path("runs/cpu"), stopped_because=None,
                            reused=0, confirm=True, interrupted=False)
    assert (bad[0].tone, bad[0].label, bad[0].text) == ("bad", "no recommendation", nothing.notice)
