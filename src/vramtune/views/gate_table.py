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
# A terminal shows the words (in colour): an emoji's width differs from terminal to
# terminal and would shift the columns after it.
WORDS = {verdict: marker.split(" ", 1)[1] for verdict, marker in MARKERS.items()}
_TERMINAL_LABELS = {"peak host RAM": "peak RAM",  # beside "peak VRAM", never mistaken for it
                    "instructions per env step": "instr./env step"}


# --- Markdown -------------------------------------------------------------------------------

_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _bytes_parts(values: Sequence[float]) -> tuple[str, str]:
    """The median and the repeats' range ('' for one repeat), in the median's unit."""
    if not values:
        return fmt.NA, ""
    median = statistics.median(values)
    unit, scale = next(((u, s) for u, s in _BYTE_UNITS if median >= s), ("B", 1))
    digits = 2 if unit == "GiB" else 1
    spread = (f"{min(values) / scale:,.{digits}f}–{max(values) / scale:,.{digits}f}"
              if len(values) > 1 else "")
    return f"{median / scale:,.{digits}f} {unit}", spread


def _rate_parts(values: Sequence[float]) -> tuple[str, str]:
    if not values:
        return fmt.NA, ""
    spread = f"{fmt.rate(min(values))}–{fmt.rate(max(values))}" if len(values) > 1 else ""
    return fmt.rate(statistics.median(values)), spread


def _with_range(parts: tuple[str, str]) -> str:
    median, spread = parts
    return f"{median} ({spread})" if spread else median


def _change(change: float | None) -> str:
    if change is None:
        return fmt.NA
    return "±0.0%" if abs(change) < 0.0005 else f"{change:+.1%}"


def _parts(row: MetricRow) -> dict[str, str]:
    """One row's cells by key, the medians and the repeats' ranges apart."""
    if row.metric == "status":
        base, cand = (row.baseline_statuses, ""), (row.candidate_statuses, "")
        change = ""
    else:
        in_bytes = row.metric == Metric.MEMORY or (row.metric == Metric.XLA
                                                   and "flops" not in row.label)
        parts = _bytes_parts if in_bytes else _rate_parts
        base, cand = parts(row.baseline_values), parts(row.candidate_values)
        change = _change(row.change)
    detail = ""
    if row.tier and row.verdict in (Verdict.WORSE, Verdict.BETTER, Verdict.FAILED):
        detail = f" ({row.tier} tier)"
    if row.detail:
        detail += f": {row.detail}"
    return {"num_envs": str(row.num_envs), "metric": row.label,
            "metric_short": _TERMINAL_LABELS.get(row.label, row.label),
            "verdict_words": WORDS[row.verdict] + detail, "baseline": _with_range(base),
            "candidate": _with_range(cand), "baseline_median": base[0],
            "baseline_range": base[1], "candidate_median": cand[0], "candidate_range": cand[1],
            "change": change, "verdict": MARKERS[row.verdict] + detail}


_COLUMNS = (Column("num_envs", "num_envs", "right"), Column("metric", "metric"),
            Column("baseline", "baseline", "right"), Column("candidate", "candidate", "right"),
            Column("change", "change", "right"), Column("verdict", "verdict", wrap=True))

# A terminal's: the medians, the change and the verdict always; the repeats' ranges when
# there is room (their own columns, so a narrow terminal drops them whole, never cut).
_TERMINAL_COLUMNS = (
    Column("num_envs", "num_envs", "right"), Column("metric_short", "metric"),
    Column("baseline_median", "baseline", "right"),
    Column("baseline_range", "baseline min–max", "right", optional=True, priority=1),
    Column("candidate_median", "candidate", "right"),
    Column("candidate_range", "candidate min–max", "right", optional=True, priority=1),
    Column("change", "change", "right"),
    Column("verdict_words", "verdict", wrap=True, footnote=True))


def _table(columns: Sequence[Column], report: BenchReport) -> Table:
    return Table.from_rows(columns, ([cells[c.key] for c in columns]
                                     for cells in map(_parts, report.rows)))


def bench_table(report: BenchReport) -> Table:
    """One row per metric per num_envs: medians with the repeats' range, the change, the
    verdict. The raw figures stay in ``BenchReport.to_dict`` (``bench --json``)."""
    return _table(_COLUMNS, report)


def bench_terminal_table(report: BenchReport) -> Table:
    """``bench_table`` for a terminal: ranges in optional columns, verdicts as footnotes."""
    return _table(_TERMINAL_COLUMNS, report)


def bench_heading(report: BenchReport, *, title: str | None = None) -> str:
    cand = report.candidate
    return f"{title or 'vramtune bench'}: `{cand.profile_name}` on {cand.machine.describe()}"


def bench_verdict(report: BenchReport) -> str:
    """FAIL with the regressions, PASS, or that there was no baseline."""
    regressions = report.regressions
    if regressions:
        what = "; ".join(r.headline for r in regressions)
        return (f"FAIL: {len(regressions)} regression{'s' if len(regressions) > 1 else ''} "
                f"({what})")
    if report.baseline is None:
        return "no baseline to compare with"
    return "PASS: no regression"


def bench_thresholds(report: BenchReport) -> str:
    t = report.thresholds
    return (f"Thresholds: XLA figures +{t.max_xla_increase:.1%} (deterministic: compared "
            f"exactly, no repeats), instructions per env step "
            f"+{t.max_instructions_increase:.0%} (counted by the CPU), peak memory "
            f"+{t.max_mem_increase:.0%}, steps/s "
            f"-{t.max_speed_drop:.0%} (per CPU second of the trial's process while it "
            f"measured, where both sides have it). A measured change counts only past its "
            f"threshold and with "
            f"distinguishable repeats (non-overlapping ranges; one-sided Mann-Whitney U, "
            f"p < {RANK_TEST_ALPHA:g}, from {RANK_TEST_MIN_REPEATS} repeats a side). "
            f"Figures: median (min–max) over repeats.")


def bench_markdown(report: BenchReport, *, title: str | None = None) -> str:
    """GitHub-flavoured Markdown: a heading, notes, the table, the verdict, the thresholds."""
    lines = [f"### {bench_heading(report, title=title)}", ""]
    for note in report.notes:
        lines.append(f"> {note}  ")
    if report.notes:
        lines.append("")
    lines += [bench_table(report).to_markdown()]
    verdict = bench_verdict(report)
    if report.regressions:
        head, rest = verdict.split(" (", 1)
        lines.append(f"**{head}** ({rest}")
    else:
        lines.append(f"**{verdict}**")
    lines += ["", bench_thresholds(report)]
    return "\n".join(lines) + "\n"
