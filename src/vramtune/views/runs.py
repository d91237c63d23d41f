"""Reading saved sweeps back: one run's report, and two runs side by side.

``report`` re-runs the recommender on a saved run (the header's budget and headroom unless
overridden) and shows the sweep's own comparison table. ``compare`` lines up two runs by
num_envs (two GPUs, two versions of jax) with both peaks, both steps/s and the ratios, and
says when the two runs did not measure the same workload or the same kind of memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from vramtune import fmt
from vramtune.records import Status, any_gpu, memory_kind
from vramtune.results.frame import runs_frame, to_python
from vramtune.results.store import Run, RunHeader
from vramtune.tune.recommend import Recommendation, choose, weighed_speeds
from vramtune.units import both_units, format_bytes
from vramtune.views.sweep_table import SHARED_FOOTNOTE, unsettled_note
from vramtune.views.tables import Column, Table

_VERSION_KEYS = ("vramtune", "jax", "jaxlib", "brax", "mujoco_mjx", "playground")


def versions_text(versions: dict[str, str]) -> str:
    shown = [f"{k} {versions[k]}" for k in _VERSION_KEYS if k in versions]
    return ", ".join(shown) if shown else "versions unknown"


def run_is_gpu(run: Run) -> bool:
    return any_gpu(run.results)


def run_memory_kind(run: Run) -> str:
    """'VRAM' or 'host RAM': what this run's peaks are peaks of."""
    return memory_kind(run_is_gpu(run))


def run_description(run: Run) -> str:
    """One line: where, what, with which versions and budget."""
    h = run.header
    backend = "GPU" if run_is_gpu(run) else "CPU backend"
    budget = both_units(h.budget_bytes) if h.budget_bytes else "no budget"
    return (f"{h.profile_name} ({h.profile_hash}) on {h.device} [{backend}], {budget} "
            f"{run_memory_kind(run)}; {versions_text(h.versions)}; created {h.created}")


def recommendation_line(rec: Recommendation, budget_bytes: int | None) -> str:
    if rec.chosen is None:
        return f"no recommendation: {rec.notice or 'nothing fits'}"
    return f"recommended ({rec.objective}): {chosen_summary(rec, budget_bytes)}"


def chosen_summary(rec: Recommendation, budget_bytes: int | None) -> str:
    """The pick in one sentence: its settings, its speed as the pick weighed it (pooled over
    its runs where it ran more than once), and the highest peak of any run of that size (a
    run alone may have compiled warm and peaked lower)."""
    c = rec.chosen
    assert c is not None
    peak = rec.peak_bytes
    share = f"{peak / budget_bytes:.0%} of budget" if (budget_bytes and peak) else ""
    said = "; ".join(w for w in (rec.peak_among, share) if w)
    rate, n = rec.steady_steps_per_s, rec.steady_intervals
    pooled = ("" if not rec.steady_pooled else f" (median of its runs' {n} intervals)" if n
              else " (median over its runs)")
    return (f"num_envs={c.num_envs}, batch_size={c.batch_size}, "
            f"num_minibatches={c.num_minibatches}: {fmt.rate(rate)} steps/s{pooled}, peak "
            f"{format_bytes(peak)} {c.memory_label}{f' ({said})' if said else ''}")


@dataclass(frozen=True)
class OutcomeLine:
    """One line under a sweep's table. ``tone``: plain, good, warning or bad; ``label`` is the
    line's lead word (None: the whole line is the text)."""

    tone: str
    label: str | None
    text: str


def outcome_lines(rec: Recommendation, budget_bytes: int | None, run_dir: Path, *,
                  stopped_because: str | None, reused: int, confirm: bool,
                  interrupted: bool) -> list[OutcomeLine]:
    """What a sweep ended with: the CLI prints these under its table, the API logs them."""
    lines = []
    if stopped_because:
        lines.append(OutcomeLine("plain", "search", stopped_because))
    if reused:
        lines.append(OutcomeLine("plain", "resumed", f"{reused} trial(s) reused from the "
                                                     f"earlier run, not re-run"))
    if rec.chosen is None:
        lines.append(OutcomeLine("bad", "no recommendation", rec.notice or "no trial fit"))
    else:
        lines.append(OutcomeLine("good", "recommended", chosen_summary(rec, budget_bytes)))
        lines += [OutcomeLine("plain", "throughput", extra)
                  for extra in (rec.speed_line, rec.confirm_speed_line) if extra]
        if rec.chosen.memory_steady is False:
            lines.append(OutcomeLine("warning", "warning", "its trial ended with memory still "
                                                           "growing (measure.max_intervals "
                                                           "reached)"))
        if rec.confirmed_line:
            lines.append(OutcomeLine("good", None, rec.confirmed_line))
        elif confirm and not interrupted:
            lines.append(OutcomeLine("warning", "not confirmed", "no long run of this size passed"))
    lines.append(OutcomeLine("plain", "results", str(run_dir)))
    return lines


def stack_line(run: Run) -> str | None:
    """The jax/brax verdict the sweep began with, and the stand-ins its trials ran brax with
    (from their records: a run measured with brax patched says so wherever it is shown)."""
    patched = dict.fromkeys(p for r in run.results for p in (r.stack_patches or ()))
    parts = [run.header.stack] if run.header.stack else []
    if patched and not any("patched" in part for part in parts):
        parts.append("trials ran brax patched as brax main does: " + ", ".join(patched))
    return "; ".join(parts) or None


def report_markdown(run: Run, rec: Recommendation, table: Table,
                    budget_bytes: int | None, headroom_fraction: float) -> str:
    """The sweep's comparison table with a heading and the recommendation, for a PR or wiki."""
    h = run.header
    budget = both_units(budget_bytes) if budget_bytes else "none"
    lines = [f"### vramtune report: `{h.profile_name}` on {h.device}", "",
             f"- run: {run_description(run)}",
             f"- budget {budget}, headroom {headroom_fraction:.0%}, objective {rec.objective}"]
    if (stack := stack_line(run)) is not None:
        lines.insert(2, f"- stack: {stack}")
    if not run_is_gpu(run):
        lines.append("- CPU backend: memory figures are host RAM (peak RSS), not VRAM")
    if any(r.shared_run for r in run.results):
        lines.append(f"- {SHARED_FOOTNOTE}")
    if (loose := unsettled_note(run.results)) is not None:
        lines.append(f"- {loose}")
    lines += ["", table.to_markdown().rstrip("\n"), "",
              f"**{recommendation_line(rec, budget_bytes)}**"]
    return "\n".join(lines) + "\n"


# --- compare --------------------------------------------------------------------------------

COMPARE_COLUMNS = ("num_envs", "status_a", "status_b", "peak_a_bytes", "peak_b_bytes",
                   "peak_ratio", "steps_per_s_a", "steps_per_s_b", "steps_per_s_ratio")
"""The CSV/JSON columns of a comparison: ratios are B / A; a status is <NA> where that run
did not run the size."""


def _ratio(b: pd.Series, a: pd.Series) -> pd.Series:
    ratio = b.astype("Float64") / a.astype("Float64")
    return ratio.mask(a.eq(0).fillna(False))


def compare_frame(a: Run, b: Run) -> pd.DataFrame:
    """Two runs lined up by num_envs, one record per size on each side (``one_per_size``:
    its status and peak); steps/s is the size's rate as the pick weighs it
    (``recommend.weighed_speeds``: its runs alone pooled, a disturbed run set aside), not
    the rate of whichever run held the highest peak, else that run's own (a proof run's)."""
    keep = ["num_envs", "status", "peak_bytes", "steps_per_s"]
    both = _per_size(a)[keep].merge(_per_size(b)[keep], on="num_envs", how="outer",
                                    sort=True, suffixes=("_a", "_b"))
    frame = pd.DataFrame({
        "num_envs": both["num_envs"], "status_a": both["status_a"],
        "status_b": both["status_b"], "peak_a_bytes": both["peak_bytes_a"],
        "peak_b_bytes": both["peak_bytes_b"],
        "peak_ratio": _ratio(both["peak_bytes_b"], both["peak_bytes_a"]),
        "steps_per_s_a": both["steps_per_s_a"], "steps_per_s_b": both["steps_per_s_b"],
        "steps_per_s_ratio": _ratio(both["steps_per_s_b"], both["steps_per_s_a"])})
    return frame[list(COMPARE_COLUMNS)].reset_index(drop=True)


def _per_size(run: Run) -> pd.DataFrame:
    """One row per size; where the record standing for it ran ok, the size's rate as the
    run's own pick weighs it (``weighed_speeds``: its budget and headroom)."""
    frame = runs_frame(run, per_size=True)
    h = run.header
    speeds = weighed_speeds(choose(run.results, h.budget_bytes, h.headroom_fraction),
                            run.results)
    frame["steps_per_s"] = pd.array(
        [speeds.get(int(n), s) if status == str(Status.OK) else s for n, s, status in
         zip(frame["num_envs"], to_python(frame["steps_per_s"]), frame["status"], strict=True)],
        dtype=frame["steps_per_s"].dtype)
    return frame


def compare_warnings(a: Run, b: Run) -> list[str]:
    """Why the two columns might not be comparable."""
    warnings = []
    if a.header.profile_hash != b.header.profile_hash:
        warnings.append(f"the runs measured different profiles ({a.header.profile_name} "
                        f"{a.header.profile_hash} vs {b.header.profile_name} "
                        f"{b.header.profile_hash}): differences may come from the workload, "
                        f"not the machine or versions")
    if run_memory_kind(a) != run_memory_kind(b):
        warnings.append(f"peak memory is {run_memory_kind(a)} in A and {run_memory_kind(b)} in "
                        f"B: the memory ratio compares different things")
    if a.header.budget_bytes != b.header.budget_bytes:
        warnings.append(f"budgets differ ({format_bytes(a.header.budget_bytes)} vs "
                        f"{format_bytes(b.header.budget_bytes)}): OOM sizes are not comparable")
    return warnings


def _status(value: str | None) -> str:
    return "not run" if value is None else value


def _times(value: float | None) -> str:
    return fmt.NA if value is None else f"{value:.2f}x"


def compare_table(a: Run, b: Run) -> Table:
    """The comparison as a ``Table``: both peaks labelled by what they are, both speeds,
    the B/A ratios. A narrow terminal keeps the statuses, the peaks and both ratios; the two
    speeds themselves when there is room."""
    raw = compare_frame(a, b)
    ka, kb = run_memory_kind(a), run_memory_kind(b)
    columns = (Column("num_envs", "num_envs", "right"), Column("status_a", "status A"),
               Column("status_b", "status B"), Column("peak_a", f"peak A ({ka})", "right"),
               Column("peak_b", f"peak B ({kb})", "right"),
               Column("peak_ratio", "peak B/A", "right"),
               Column("steps_a", "steps/s A", "right", priority=1),
               Column("steps_b", "steps/s B", "right", priority=1),
               Column("steps_ratio", "steps/s B/A", "right"))
    col = {name: to_python(raw[name]) for name in raw.columns}
    rows = [[str(col["num_envs"][i]), _status(col["status_a"][i]), _status(col["status_b"][i]),
             format_bytes(col["peak_a_bytes"][i]), format_bytes(col["peak_b_bytes"][i]),
             _times(col["peak_ratio"][i]), fmt.rate(col["steps_per_s_a"][i]),
             fmt.rate(col["steps_per_s_b"][i]), _times(col["steps_per_s_ratio"][i])]
            for i in range(len(raw))]
    return Table.from_rows(columns, rows, data=raw)


def run_header_lines(a: Run, b: Run) -> list[str]:
    return [f"A: {a.directory}: {run_description(a)}", f"B: {b.directory}: {run_description(b)}"]


def compare_markdown(a: Run, b: Run, table: Table) -> str:
    lines = ["### vramtune compare", ""]
    lines += [f"- {line}" for line in run_header_lines(a, b)]
    lines += [f"- **warning:** {w}" for w in compare_warnings(a, b)]
    lines += ["", table.to_markdown().rstrip("\n")]
    return "\n".join(lines) + "\n"


def _run_json(run: Run) -> dict[str, object]:
    h: RunHeader = run.header
    return {"directory": str(run.directory), "profile_name": h.profile_name,
            "profile_hash": h.profile_hash, "device": h.device, "memory": run_memory_kind(run),
            "budget_bytes": h.budget_bytes, "versions": h.versions, "created": h.created}


def compare_json(a: Run, b: Run, table: Table) -> str:
    return json.dumps({"a": _run_json(a), "b": _run_json(b), "warnings": compare_warnings(a, b),
                       "rows": table.records()}, indent=2) + "\n"
