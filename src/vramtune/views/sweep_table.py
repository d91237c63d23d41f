"""The comparison table, as data, then as Markdown / CSV / JSON by small exporters.

Views never compute: they format ``ComparisonRow``s. Memory columns say what they are a
peak of (allocator live, process, host), so CPU figures are never mistaken for VRAM.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from vramtune import fmt
from vramtune.records import TrialResult
from vramtune.tune.recommend import Recommendation
from vramtune.units import format_bytes


@dataclass(frozen=True)
class ComparisonRow:
    num_envs: int
    batch_size: int | None
    num_minibatches: int | None
    status: str
    alloc_peak_bytes: int | None  # JAX allocator live peak (GPU only)
    process_peak_bytes: int | None  # NVML per process, else the allocator pool (GPU only)
    host_peak_bytes: int | None  # exact peak RSS of the trial process
    budget_share: float | None  # peak / budget
    compile_s: float | None
    steps_per_s: float | None
    steps_per_s_per_env: float | None
    relative_speed: float | None  # steps/s / best steps/s among ok rows
    recommended: bool
    reason: str


COLUMNS = ("num_envs", "batch", "status", "alloc peak", "process peak", "host peak",
           "% budget", "compile s", "steps/s", "steps/s/env", "vs best", "why")


def comparison_rows(results: Sequence[TrialResult], rec: Recommendation,
                    budget_bytes: int | None) -> list[ComparisonRow]:
    # Relative to the best row the recommender could choose; over-headroom rows may exceed 100%.
    best = rec.best_steps_per_s or max((r.steps_per_s for r in results if r.steps_per_s),
                                       default=None)
    rows = []
    for r in sorted(results, key=lambda r: r.num_envs):
        peak = r.peak_bytes
        process = r.nvml_process_peak_bytes if r.nvml_process_peak_bytes is not None \
            else r.jax_peak_pool_bytes
        rows.append(ComparisonRow(
            num_envs=r.num_envs, batch_size=r.batch_size, num_minibatches=r.num_minibatches,
            status=str(r.status), alloc_peak_bytes=r.jax_peak_bytes_in_use,
            process_peak_bytes=process if r.is_gpu else None, host_peak_bytes=r.host_peak_rss_bytes,
            budget_share=(peak / budget_bytes) if (peak is not None and budget_bytes) else None,
            compile_s=r.compile_s, steps_per_s=r.steps_per_s,
            steps_per_s_per_env=(r.steps_per_s / r.num_envs) if r.steps_per_s else None,
            relative_speed=(r.steps_per_s / best) if (r.steps_per_s and best) else None,
            recommended=rec.chosen is not None and r is rec.chosen,
            reason=rec.reasons.get(r.num_envs, "")))
    return rows


def row_cells(row: ComparisonRow) -> list[str]:
    """One row as display strings, in COLUMNS order; 'n/a' where not measured."""
    batch = f"{row.batch_size} x {row.num_minibatches}" if row.batch_size else fmt.NA
    return [f"{'* ' if row.recommended else ''}{row.num_envs}", batch, row.status,
            format_bytes(row.alloc_peak_bytes), format_bytes(row.process_peak_bytes),
            format_bytes(row.host_peak_bytes), fmt.percent(row.budget_share),
            fmt.NA if row.compile_s is None else f"{row.compile_s:.1f}", fmt.rate(row.steps_per_s),
            fmt.NA if row.steps_per_s_per_env is None else f"{row.steps_per_s_per_env:,.1f}",
            fmt.percent(row.relative_speed), row.reason]


def column_titles(gpu: bool) -> list[str]:
    """Headers that say which memory each column is: VRAM on GPU, host RAM on CPU."""
    titles = list(COLUMNS)
    titles[3] = "alloc peak (VRAM)"
    titles[4] = "process peak (VRAM)"
    titles[5] = "host peak (RAM)"
    if not gpu:
        titles[6] = "% budget (host)"
    return titles


def to_markdown(rows: Sequence[ComparisonRow], *, gpu: bool) -> str:
    titles = column_titles(gpu)
    lines = ["| " + " | ".join(titles) + " |", "|" + "|".join(" --- " for _ in titles) + "|"]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in row_cells(row)]
        if row.recommended:
            # "**\* 256**": a bare "*** 256**" is no emphasis in GFM and shows the asterisks.
            cells[0] = f"**\\* {row.num_envs}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[ComparisonRow]) -> str:
    """Raw numbers (bytes, seconds), empty where not measured: for pandas and spreadsheets."""
    out = io.StringIO()
    fields = list(ComparisonRow.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})
    return out.getvalue()


def to_json(rows: Sequence[ComparisonRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2) + "\n"
