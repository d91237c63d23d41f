"""Every table at 80, 100 and 200 columns, from recorded sweeps: no number in an essential
column is cut, no line is wider than the terminal, and what is left out is named.

The expected figures are formatted here from the records themselves (the same helpers the
views use), and each is looked for in its own row's line, so one row cut cannot hide behind
another row's equal figure.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import GOLDEN, run_cli
from tests.unit.tune.test_gate import _golden_report
from vramtune import fmt
from vramtune.cli.tables import bench_rich, compare_rich, sweep_rich
from vramtune.records import TrialResult
from vramtune.results.baseline import key_from_results, snapshot_from_results
from vramtune.results.store import Run, load_run
from vramtune.tune.gate import BenchReport, Thresholds, Verdict, compare_snapshots
from vramtune.tune.recommend import Recommendation, choose
from vramtune.units import format_bytes
from vramtune.views import runs as cmp
from vramtune.views.gate_table import WORDS, bench_terminal_table
from vramtune.views.sweep_table import sweep_table
from vramtune.views.tables import short_form

RUNS = GOLDEN / "runs"
H100 = RUNS / "h100-quick-2GB.jsonl"
CPU_CAP = RUNS / "cpu-quick-1.15GB.jsonl"
CPU = RUNS / "cpu-quick-1.2GB.jsonl"
WIDTHS = (80, 100, 200)


def render(renderable: object, width: int) -> str:
    """What a terminal ``width`` columns wide shows (printed as the CLI prints tables)."""
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable, crop=False)
    return console.export_text()


def body_rows(text: str) -> list[str]:
    """The table's row lines: a vertical rule in them and a first cell that is not blank
    (a wrapped reason's second line has a blank first cell)."""
    rows = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) < 2:
            continue
        first = cells[1] if line.startswith("│") else cells[0]  # with or without edges
        if first.strip():
            rows.append(line)
    return rows


def recommend(run: Run) -> Recommendation:
    h = run.header
    return choose(run.results, h.budget_bytes, h.headroom_fraction)


def sweep_figures(r: TrialResult, budget: int | None) -> list[str]:
    """num_envs, status, the peak held against the budget and its share, steps/s."""
    peak = r.process_peak_bytes if r.is_gpu else r.host_peak_rss_bytes
    figures = [str(r.num_envs), str(r.status), format_bytes(peak), fmt.rate(r.steps_per_s)]
    if budget and r.peak_bytes:
        figures.append(fmt.percent(r.peak_bytes / budget))
    return figures


def assert_reason_shown(line: str, text: str, reason: str) -> None:
    """Whole in its row, or its short form with a mark whose footnote holds it whole."""
    if reason in line:
        return
    mark = re.search(re.escape(short_form(reason)) + r" \[(\d+)\]", line)
    assert mark, (reason, line)
    notes = [" ".join(line.split()) for line in text.splitlines()]
    note = next(i for i, line in enumerate(notes) if line.startswith(f"[{mark.group(1)}] "))
    whole = " ".join([notes[note], *(line for line in notes[note + 1:]
                                      if not re.match(r"\[\d+\] ", line))])
    assert " ".join(f"[{mark.group(1)}] {reason}".split()) in whole, (reason, text)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", [H100, CPU_CAP, CPU], ids=lambda p: p.stem)
def test_sweep_table_keeps_every_essential_number_whole(path: Path, width: int):
    run = load_run(path)
    rec = recommend(run)
    table = sweep_table(run.results, rec, run.header.budget_bytes)
    text = render(sweep_rich(table, title="t"), width)
    assert max(map(len, text.splitlines())) <= width, text
    assert "…" not in text
    rows = body_rows(text)
    ordered = sorted(run.results, key=lambda r: r.num_envs)
    assert len(rows) == len(ordered), text
    reasons = [row[-1] for row in table.rows()]
    for r, line, reason in zip(ordered, rows, reasons, strict=True):
        for figure in sweep_figures(r, run.header.budget_bytes):
            assert figure in line, (figure, line)
        assert_reason_shown(line, text, reason)
    if width == 200:  # a wide terminal has room for the cap's figure and the batch
        assert "batch" in text and ("capped" in text)


@pytest.mark.parametrize("width", (80, 100))
def test_a_narrow_terminal_names_the_columns_it_left_out_and_wide_shows_them(width: int):
    run = load_run(H100)
    table = sweep_table(run.results, recommend(run), run.header.budget_bytes)
    narrow = render(sweep_rich(table), width)
    assert "more columns with --wide: batch" in narrow and "compile s" in narrow
    wide = render(sweep_rich(table, wide=True), width)
    rows = body_rows(wide)
    for cells, line in zip(table.without_empty_optional().rows(), rows, strict=True):
        for cell in cells:  # every column, every reason whole, however wide the lines
            assert cell in line, (cell, line)
    assert "more columns" not in wide and "[1]" not in wide


def test_the_h100_sweep_reasons_are_one_line_each_at_200_columns():
    """The recorded H100 sweep's reasons wrapped to 8 lines a row at 200 columns."""
    run = load_run(H100)
    table = sweep_table(run.results, recommend(run), run.header.budget_bytes)
    text = render(sweep_rich(table), 200)
    table_lines = [line for line in text.splitlines() if "│" in line]
    assert len(table_lines) == len(run.results), text


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("pair", [(CPU, H100), (CPU, CPU_CAP)], ids=["cpu-h100", "cpu-cpu"])
def test_compare_table_keeps_statuses_peaks_and_ratios_whole(pair: tuple[Path, Path],
                                                              width: int):
    a, b = (load_run(p) for p in pair)
    table = cmp.compare_table(a, b)
    text = render(compare_rich(table), width)
    assert max(map(len, text.splitlines())) <= width, text
    assert "…" not in text
    rows = body_rows(text)
    raw = table.records()
    assert len(rows) == len(raw)
    for rec, line in zip(raw, rows, strict=True):
        expected = [str(rec["num_envs"]), rec["status_a"] or "not run",
                    rec["status_b"] or "not run", format_bytes(rec["peak_a_bytes"]),
                    format_bytes(rec["peak_b_bytes"])]
        for ratio in (rec["peak_ratio"], rec["steps_per_s_ratio"]):
            expected.append(fmt.NA if ratio is None else f"{ratio:.2f}x")
        if width == 200:
            expected += [fmt.rate(rec["steps_per_s_a"]), fmt.rate(rec["steps_per_s_b"])]
        for figure in expected:
            assert figure in line, (figure, line)


def recorded_bench() -> BenchReport:
    """The gate between two recorded CPU sweeps of the same profile (256 and 512 in both)."""
    base, cand = load_run(CPU).results, load_run(CPU_CAP).results
    key = key_from_results(base, "AMD EPYC")
    assert key is not None
    profile = load_run(CPU).header.profile
    return compare_snapshots(snapshot_from_results(base, key, profile_dict=profile),
                             snapshot_from_results(cand, key, profile_dict=profile), Thresholds())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("make", [_golden_report, recorded_bench], ids=["golden", "recorded"])
def test_bench_table_keeps_medians_changes_and_verdicts_whole(make, width: int):
    report = make()
    table = bench_terminal_table(report)
    text = render(bench_rich(report), width)
    assert "…" not in text
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "num_envs" in line)
    end = max(i for i, line in enumerate(lines) if "│" in line)
    assert max(len(line) for line in lines[start:end + 1]) <= width, text
    rows = body_rows(text)
    assert len(rows) == len(report.rows)
    for row, cells, line in zip(report.rows, table.records(), rows, strict=True):
        for key in ("num_envs", "baseline_median", "candidate_median", "change"):
            assert cells[key] in line, (cells[key], line)
        tier = (f" ({row.tier} tier)" if row.tier and row.verdict in (
            Verdict.WORSE, Verdict.BETTER, Verdict.FAILED) else "")
        verdict = WORDS[row.verdict] + tier + (f": {row.detail}" if row.detail else "")
        assert_reason_shown(line, text, verdict)
    verdict_line = "PASS" if report.passed else "FAIL"
    assert verdict_line in text


def test_the_cli_fits_columns_off_a_terminal_and_is_wide_without_it():
    """Piped with COLUMNS set, the table fits it; piped without, it is not squeezed to 80."""
    narrow = run_cli("report", str(H100), env={"COLUMNS": "80"}, timeout=120)
    assert narrow.returncode == 0, narrow.stderr
    table = [line for line in narrow.stdout.splitlines() if "│" in line or "┃" in line]
    assert table and max(map(len, table)) <= 80, narrow.stdout
    assert "6,045,135" in narrow.stdout and "more columns with --wide" in narrow.stdout
    # COLUMNS that is not a number counts as unset (rich ignores it too)
    piped = run_cli("report", str(H100), env={"COLUMNS": ""}, timeout=120)
    assert piped.returncode == 0, piped.stderr
    header = next(line for line in piped.stdout.splitlines() if "num_envs" in line)
    assert len(header) > 100 and "batch" in header and "capped (VRAM pool)" in header
    wide = run_cli("report", str(H100), "--wide", env={"COLUMNS": "80"}, timeout=120)
    assert wide.returncode == 0 and "alloc peak (VRAM)" in wide.stdout
    assert "no re-measurement left: the faster median is picked (1920:" in wide.stdout
