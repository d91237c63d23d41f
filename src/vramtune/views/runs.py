"""Reading saved sweeps back: one run's report, and two runs side by side.

``report`` re-runs the recommender on a saved run (the header's budget and headroom unless
overridden) and shows the sweep's own comparison table. ``compare`` lines up two runs by
num_envs (two GPUs, two versions of jax) with both peaks, both steps/s and the ratios, and
says when the two runs did not measure the same workload or the same kind of memory.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from vramtune import fmt
from vramtune.records import Status, TrialResult
from vramtune.results.store import Run, RunHeader
from vramtune.tune.recommend import Recommendation
from vramtune.units import format_bytes
from vramtune.views.sweep_table import ComparisonRow
from vramtune.views.sweep_table import to_markdown as table_markdown

_VERSION_KEYS = ("vramtune", "jax", "jaxlib", "brax", "mujoco_mjx", "playground")


def versions_text(versions: dict[str, str]) -> str:
    shown = [f"{k} {versions[k]}" for k in _VERSION_KEYS if k in versions]
    return ", ".join(shown) if shown else "versions unknown"


def run_is_gpu(run: Run) -> bool:
    return any(r.is_gpu for r in run.results)


def memory_kind(run: Run) -> str:
    """'VRAM' or 'host RAM': what this run's peaks are peaks of."""
    return "VRAM" if run_is_gpu(run) else "host RAM"


def run_description(run: Run) -> str:
    """One line: where, what, with which versions and budget."""
    h = run.header
    backend = "GPU" if run_is_gpu(run) else "CPU backend"
    budget = format_bytes(h.budget_bytes) if h.budget_bytes else "no budget"
    return (f"{h.profile_name} ({h.profile_hash}) on {h.device} [{backend}], {budget} "
            f"{memory_kind(run)}; {versions_text(h.versions)}; created {h.created}")


def recommendation_line(rec: Recommendation, budget_bytes: int | None) -> str:
    if rec.chosen is None:
        return f"no recommendation: {rec.notice or 'nothing fits'}"
    return f"recommended ({rec.objective}): {chosen_summary(rec.chosen, budget_bytes)}"


def chosen_summary(c: TrialResult, budget_bytes: int | None) -> str:
    """The chosen trial in one sentence: its settings, speed and labelled peak."""
    share = f" ({c.peak_bytes / budget_bytes:.0%} of budget)" if (budget_bytes and c.peak_bytes) else ""
    return (f"num_envs={c.num_envs}, batch_size={c.batch_size}, "
            f"num_minibatches={c.num_minibatches}: {fmt.rate(c.steps_per_s)} steps/s, peak "
            f"{format_bytes(c.peak_bytes)} {c.memory_label}{share}")


def report_markdown(run: Run, rec: Recommendation, rows: Sequence[ComparisonRow],
                    budget_bytes: int | None, headroom_fraction: float) -> str:
    """The sweep's comparison table with a heading and the recommendation, for a PR or wiki."""
    h = run.header
    budget = format_bytes(budget_bytes) if budget_bytes else "none"
    lines = [f"### vramtune report: `{h.profile_name}` on {h.device}", "",
             f"- run: {run_description(run)}",
             f"- budget {budget}, headroom {headroom_fraction:.0%}, objective {rec.objective}"]
    if not run_is_gpu(run):
        lines.append("- CPU backend: memory figures are host RAM (peak RSS), not VRAM")
    lines += ["", table_markdown(rows, gpu=run_is_gpu(run)).rstrip("\n"), "",
              f"**{recommendation_line(rec, budget_bytes)}**"]
    return "\n".join(lines) + "\n"


# --- compare --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompareRow:
    num_envs: int
    status_a: str | None  # None: this num_envs was not run in A
    status_b: str | None
    peak_a_bytes: int | None
    peak_b_bytes: int | None
    peak_ratio: float | None  # B / A
    steps_per_s_a: float | None
    steps_per_s_b: float | None
    steps_per_s_ratio: float | None  # B / A


def representative(results: Sequence[TrialResult]) -> dict[int, TrialResult]:
    """One record per num_envs: the last ok one, else the last one (a resumed or refined
    sweep can hold several)."""
    chosen: dict[int, TrialResult] = {}
    for r in results:
        held = chosen.get(r.num_envs)
        if held is None or r.status is Status.OK or held.status is not Status.OK:
            chosen[r.num_envs] = r
    return chosen


def _ratio(b: float | None, a: float | None) -> float | None:
    return b / a if (a and b is not None) else None


def compare_rows(a: Run, b: Run) -> list[CompareRow]:
    ra, rb = representative(a.results), representative(b.results)
    rows = []
    for n in sorted(set(ra) | set(rb)):
        x, y = ra.get(n), rb.get(n)
        pa = x.peak_bytes if x else None
        pb = y.peak_bytes if y else None
        sa = x.steps_per_s if x else None
        sb = y.steps_per_s if y else None
        rows.append(CompareRow(n, str(x.status) if x else None, str(y.status) if y else None,
                               pa, pb, _ratio(pb, pa), sa, sb, _ratio(sb, sa)))
    return rows


def compare_warnings(a: Run, b: Run) -> list[str]:
    """Why the two columns might not be comparable."""
    warnings = []
    if a.header.profile_hash != b.header.profile_hash:
        warnings.append(f"the runs measured different profiles ({a.header.profile_name} "
                        f"{a.header.profile_hash} vs {b.header.profile_name} "
                        f"{b.header.profile_hash}): differences may come from the workload, "
                        f"not the machine or versions")
    if memory_kind(a) != memory_kind(b):
        warnings.append(f"peak memory is {memory_kind(a)} in A and {memory_kind(b)} in B: the "
                        f"memory ratio compares different things")
    if a.header.budget_bytes != b.header.budget_bytes:
        warnings.append(f"budgets differ ({format_bytes(a.header.budget_bytes)} vs "
                        f"{format_bytes(b.header.budget_bytes)}): OOM sizes are not comparable")
    return warnings


def compare_titles(a: Run, b: Run) -> list[str]:
    ka, kb = memory_kind(a), memory_kind(b)
    return ["num_envs", "status A", "status B", f"peak A ({ka})", f"peak B ({kb})", "peak B/A",
            "steps/s A", "steps/s B", "steps/s B/A"]


def _status(value: str | None) -> str:
    return "not run" if value is None else value


def _times(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.2f}x"


def compare_cells(row: CompareRow) -> list[str]:
    return [str(row.num_envs), _status(row.status_a), _status(row.status_b),
            format_bytes(row.peak_a_bytes), format_bytes(row.peak_b_bytes),
            _times(row.peak_ratio), fmt.rate(row.steps_per_s_a), fmt.rate(row.steps_per_s_b),
            _times(row.steps_per_s_ratio)]


def run_header_lines(a: Run, b: Run) -> list[str]:
    return [f"A: {a.directory}: {run_description(a)}", f"B: {b.directory}: {run_description(b)}"]


def compare_markdown(a: Run, b: Run, rows: Sequence[CompareRow]) -> str:
    lines = ["### vramtune compare", ""]
    lines += [f"- {line}" for line in run_header_lines(a, b)]
    lines += [f"- **warning:** {w}" for w in compare_warnings(a, b)]
    titles = compare_titles(a, b)
    lines += ["", "| " + " | ".join(titles) + " |",
              "| ---: | --- | --- |" + " ---: |" * (len(titles) - 3)]
    for row in rows:
        lines.append("| " + " | ".join(compare_cells(row)) + " |")
    return "\n".join(lines) + "\n"


def compare_csv(rows: Sequence[CompareRow]) -> str:
    """Raw numbers (bytes, steps/s, ratios), empty where not measured."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(CompareRow.__dataclass_fields__),
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(row).items()})
    return out.getvalue()


def _run_json(run: Run) -> dict[str, object]:
    h: RunHeader = run.header
    return {"directory": str(run.directory), "profile_name": h.profile_name,
            "profile_hash": h.profile_hash, "device": h.device, "memory": memory_kind(run),
            "budget_bytes": h.budget_bytes, "versions": h.versions, "created": h.created}


def compare_json(a: Run, b: Run, rows: Sequence[CompareRow]) -> str:
    return json.dumps({"a": _run_json(a), "b": _run_json(b), "warnings": compare_warnings(a, b),
                       "rows": [asdict(r) for r in rows]}, indent=2) + "\n"
