"""The bench verdicts as a table, and as GitHub-flavoured Markdown (also for
$GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from vramtune import fmt
from vramtune.tune.gate import RANK_TEST_ALPHA, RANK_TEST_MIN_REPEATS, BenchReport, Metric, MetricRow, Verdict
from vramtune.views.tables import Column, Table

MARKERS = {Verdict.WORSE: "🔴 worse", Verdict.BETTER: "🟢 better",
           Verdict.SAME: "⚪ within noise", Verdict.NOISY: "⚪ within noise (repeats overlap)",
           Verdict.FAILED: "🔴 failed", Verdict.FIXED: "🟢 fixed",
           Verdict.BOTH_FAILED: "⚪ failed in both", Verdict.NEW: "🆕 no baseline",
           Verdict.UNMEASURED: "⚪ n/a"}


# --- Markdown -------------------------------------------------------------------------------

_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _bytes_with_range(values: Sequence[float]) -> str:
    if not values:
        return fmt.NA
    median = statistics.median(values)
    unit, scale = next(((u, s) for u, s in _BYTE_UNITS if median >= s), ("B", 1))
    digits = 2 if unit == "GiB" else 1
    text = f"{median / scale:,.{digits}f} {unit}"
    if len(values) > 1:
        text += f" ({min(values) / scale:,.{digits}f}–{max(values) / scale:,.{digits}f})"
    return text


def _rate_with_range(values: Sequence[float]) -> str:
    if not values:
        return fmt.NA
    text = fmt.rate(statistics.median(values))
    if len(values) > 1:
        text += f" ({fmt.rate(min(values))}–{fmt.rate(max(values))})"
    return text


def _change(change: float | None) -> str:
    if change is None:
        return fmt.NA
    return "±0.0%" if abs(change) < 0.0005 else f"{change:+.1%}"


def _cells(row: MetricRow) -> list[str]:
    if row.metric == "status":
        base, cand, change = row.baseline_statuses, row.candidate_statuses, ""
    elif row.metric == Metric.MEMORY or (row.metric == Metric.XLA and "flops" not in row.label):
        base, cand = _bytes_with_range(row.baseline_values), _bytes_with_range(row.candidate_values)
        change = _change(row.change)
    else:
        base, cand = _rate_with_range(row.baseline_values), _rate_with_range(row.candidate_values)
        change = _change(row.change)
    verdict = MARKERS[row.verdict]
    if row.tier and row.verdict in (Verdict.WORSE, Verdict.BETTER, Verdict.FAILED):
        verdict += f" ({row.tier} tier)"
    if row.detail:
        verdict += f": {row.detail}"
    return [str(row.num_envs), row.label, base, cand, change, verdict]


_COLUMNS = (Column("num_envs", "num_envs", "right"), Column("metric", "metric"),
            Column("baseline", "baseline", "right"), Column("candidate", "candidate", "right"),
            Column("change", "change", "right"), Column("verdict", "verdict", wrap=True))


def bench_table(report: BenchReport) -> Table:
    """One row per metric per num_envs: medians with the repeats' range, the change, the
    verdict. The raw figures stay in ``BenchReport.to_dict`` (``bench --json``)."""
    return Table.from_rows(_COLUMNS, (_cells(row) for row in report.rows))


def bench_markdown(report: BenchReport, *, title: str | None = None) -> str:
    """GitHub-flavoured Markdown: a heading, notes, the table, the verdict, the thresholds."""
    cand = report.candidate
    lines = [f"### {title or 'vramtune bench'}: `{cand.profile_name}` on {cand.machine.describe()}",
             ""]
    for note in report.notes:
        lines.append(f"> {note}  ")
    if report.notes:
        lines.append("")
    lines += [bench_table(report).to_markdown()]
    regressions = report.regressions
    if regressions:
        what = "; ".join(r.headline for r in regressions)
        lines.append(f"**FAIL: {len(regressions)} regression{'s' if len(regressions) > 1 else ''}** "
                     f"({what})")
    elif report.baseline is None:
        lines.append("**no baseline to compare with**")
    else:
        lines.append("**PASS: no regression**")
    t = report.thresholds
    lines += ["", f"Thresholds: XLA figures +{t.max_xla_increase:.1%} (deterministic: "
                  f"compared exactly, no repeats), peak memory +{t.max_mem_increase:.0%}, "
                  f"steps/s -{t.max_speed_drop:.0%} (per CPU second of the trial's process while "
                  f"it measured, where both sides have it). A measured change "
                  f"counts only past its threshold and with "
                  f"distinguishable repeats (non-overlapping ranges; one-sided Mann-Whitney U, "
                  f"p < {RANK_TEST_ALPHA:g}, from {RANK_TEST_MIN_REPEATS} repeats a side). "
                  f"Figures: median (min–max) over repeats."]
    return "\n".join(lines) + "\n"
