"""The sweep's comparison table: one row per trial, from the trials frame, as a ``Table``.

Views never decide: the recommender has chosen, this module lays its choice beside the
figures. Memory columns say what they are a peak of (allocator live, process, host), so CPU
figures are never mistaken for VRAM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from vramtune import fmt
from vramtune.records import Purpose, Status, TrialResult, any_gpu
from vramtune.results.frame import to_python, trials_frame
from vramtune.tune.boundary import failure_words, under_line
from vramtune.tune.recommend import RANKED, Recommendation
from vramtune.units import format_bytes
from vramtune.views.tables import Column, Table

RAW_COLUMNS = ("num_envs", "batch_size", "num_minibatches", "purpose", "shared_run", "status",
               "alloc_peak_bytes", "process_peak_bytes", "host_peak_bytes", "capped_peak_bytes",
               "cap_bytes", "budget_share", "compile_s",
               "steps_per_s", "steps_per_s_ci_low", "steps_per_s_ci_high", "steps_per_s_per_env",
               "relative_speed", "recommended", "reason")
"""The CSV/JSON columns: alloc = JAX allocator live peak (GPU only); process = NVML per
process, else the allocator pool (GPU only); host = exact peak RSS; capped = the figure the
cap counts (CPU: peak data segment under RLIMIT_DATA; GPU: the allocator pool) and cap_bytes
what that figure was held to (CPU: the RLIMIT_DATA cap; GPU: the pool limit in force);
purpose = search, repeat, confirm (the long run) or alone (a size
re-measured with nothing beside it); shared_run = it ran beside other trials, so its memory
verdict holds and its steps/s are not comparable; budget_share =
peak / budget; steps_per_s_ci_low/high = the 95% interval of steps/s, where measured;
relative_speed = steps/s over the best the recommender could choose."""
WARP_COLUMNS = ("contacts_max", "naconmax", "constraint_rows_per_world_max", "njmax")
"""Appended where a trial stepped MJX-Warp: the contact probe's largest demand (contacts,
all worlds together; constraint rows, the fullest world) beside the capacity in force."""


def comparison_frame(results: Sequence[TrialResult], rec: Recommendation,
                     budget_bytes: int | None) -> pd.DataFrame:
    """The raw table, sorted by num_envs: ``RAW_COLUMNS``, <NA> where not measured."""
    ordered = sorted(results, key=lambda r: r.num_envs)
    trials = trials_frame(ordered)
    # Relative to the best row the recommender could choose; over-headroom rows may exceed 100%.
    best = rec.best_steps_per_s or max((r.steps_per_s for r in results if r.steps_per_s),
                                       default=None)
    steps = trials["steps_per_s"]
    frame = pd.DataFrame({
        "num_envs": trials["num_envs"], "batch_size": trials["batch_size"],
        "num_minibatches": trials["num_minibatches"], "purpose": trials["purpose"],
        "shared_run": trials["shared_run"], "status": trials["status"],
        "alloc_peak_bytes": trials["jax_peak_bytes_in_use"],
        "process_peak_bytes": trials["process_peak_bytes"],
        "host_peak_bytes": trials["host_peak_rss_bytes"],
        "capped_peak_bytes": trials["cap_figure_bytes"], "cap_bytes": trials["cap_figure_limit_bytes"],
        "budget_share": (trials["peak_bytes"] / budget_bytes if budget_bytes
                         else pd.array([None] * len(trials), dtype="Float64")),
        "compile_s": trials["compile_s"], "steps_per_s": steps,
        "steps_per_s_ci_low": _optional_floats(ordered, "steps_per_s_ci_low"),
        "steps_per_s_ci_high": _optional_floats(ordered, "steps_per_s_ci_high"),
        "steps_per_s_per_env": steps / trials["num_envs"],
        "relative_speed": (steps / best if best
                           else pd.array([None] * len(trials), dtype="Float64")),
        "recommended": pd.array([rec.chosen is not None and r is rec.chosen for r in ordered],
                                dtype="boolean"),
        "reason": pd.array([row_reason(r, rec) for r in ordered], dtype="string"),
    })
    if not trials["warp_naconmax"].isna().all():
        for column in WARP_COLUMNS:
            frame[column] = trials[{"naconmax": "warp_naconmax", "njmax": "warp_njmax"}.get(
                column, f"warp_{column}")]
        return frame[[*RAW_COLUMNS, *WARP_COLUMNS]]
    return frame[list(RAW_COLUMNS)]


def _optional_floats(results: Sequence[TrialResult], field: str) -> pd.Series:
    """A record field that older records (and versions) may lack: <NA> there."""
    return pd.Series(pd.array([getattr(r, field, None) for r in results], dtype="Float64"))


def _interval(steps: float | None, low: float | None, high: float | None) -> str:
    """The 95% interval as ± a share of steps/s: half its width over the figure."""
    if steps is None or low is None or high is None or steps <= 0:
        return fmt.NA
    return f"±{(high - low) / 2 / steps:.1%}"


def row_reason(r: TrialResult, rec: Recommendation) -> str:
    """Why this row: the recommender's word for its size, or what a repeat / long run was."""
    if r.purpose is Purpose.CONFIRM:
        what = f"confirming run, {r.training_steps or fmt.NA} training steps"
        if r.status is not Status.OK:
            return f"{what}: {_proof_failure(r)}"
        if rec.confirmation is r:
            return what + ": passed"
        if rec.limit_bytes is not None and under_line(r, rec.limit_bytes) is False:
            return what + ": over the headroom line"  # a larger --headroom than it ran under
        return what
    if r.purpose is Purpose.REPEAT:
        return "repeat at the edge" + ("" if r.status is Status.OK else
                                       f": {_proof_failure(r)}")
    aside = rec.set_aside_words(r)
    if aside is not None:
        return aside
    if rec.chosen is not None and r is not rec.chosen and r.num_envs == rec.chosen.num_envs:
        return "same size as the recommended row"
    if r.status is not Status.OK:  # its own failure: the size's reason may be another run's
        return failure_words(r)
    return rec.reasons.get(r.num_envs, "")


def _proof_failure(r: TrialResult) -> str:
    if r.status in (Status.OOM, Status.CRASH, Status.TIMEOUT):
        return f"{r.status}, so the boundary moved below {r.num_envs}"
    return f"{r.status}, so {r.num_envs} stays unproven and a smaller size is proven instead"


SHARED_FOOTNOTE = ("shared: the trial ran beside others on the same device; its memory verdict "
                   "holds (its own cap), its steps/s do not (shared compute)")


def unsettled_note(results: Sequence[TrialResult]) -> str | None:
    """A line for the trials whose rate did not settle inside their measuring window
    (``speed_steady`` False: a 2-core CPU's, mostly): said once under the table, not on every
    row; None when every rate settled or none says."""
    ranked = [r for r in results if r.status is Status.OK and r.purpose in RANKED
              and r.speed_steady is not None]
    loose = sum(r.speed_steady is False for r in ranked)
    if not loose:
        return None
    return (f"steps/s: {loose} of {len(ranked)} trials' rates did not settle inside their "
            f"measuring window and are taken as measured (steps/s ±%: their spread; "
            f"n/a under 6 intervals); a close call between sizes is measured again, "
            f"interleaved")


def _columns(gpu: bool, capped: bool, ci: bool, warp: bool) -> tuple[Column, ...]:
    """Headers that say which memory each column is: VRAM on GPU, host RAM on CPU; the figure
    the cap counts is called capped only where a trial ran under a cap (uncapped, it is the
    same measurement with nothing holding it).

    Essential on a terminal (priority 0): num_envs, status, the peak held against the budget
    (process VRAM on GPU, host RAM on CPU) and its share of the budget, steps/s and why. The
    rest is shown as room allows: first what tells rows of one size apart (run) and the
    speed's interval, then the figure the cap counts, then the derived and secondary ones."""
    if gpu:
        cap_header = "capped (VRAM pool)" if capped else "pool (VRAM)"
    else:
        cap_header = "capped (data seg.)" if capped else "data seg. (host)"
    ci_column = (Column("steps_ci", "steps/s ±%", "right", optional=True, priority=2),) if ci else ()
    return (Column("num_envs", "num_envs", "right"), Column("batch", "batch", priority=4),
            Column("run", "run", optional=True, priority=1), Column("status", "status"),
            Column("alloc_peak", "alloc peak (VRAM)", "right", optional=True, priority=10),
            Column("process_peak", "process peak (VRAM)", "right", optional=True,
                   priority=0 if gpu else 9),
            Column("host_peak", "host peak (RAM)", "right", priority=9 if gpu else 0),
            Column("capped", cap_header, "right", optional=True, priority=3),
            Column("budget_share", "% budget" if gpu else "% budget (host)", "right",
                   optional=True),
            Column("compile_s", "compile s", "right", priority=7),
            *((Column("contacts", "contacts / naconmax", "right", priority=6),
               Column("rows", "rows/world / njmax", "right", priority=6)) if warp else ()),
            Column("steps_per_s", "steps/s", "right"), *ci_column,
            Column("steps_per_s_per_env", "steps/s/env", "right", priority=8),
            Column("vs_best", "vs best", "right", priority=5),
            Column("why", "why", wrap=True, footnote=True))


def _demand(col: dict[str, list[Any]], demand: str, capacity: str, i: int) -> str:
    """'131 / 10,000': what the probe saw beside the capacity (n/a: not measured)."""
    if demand not in col:
        return fmt.NA
    return f"{_number(col[demand][i], ',')} / {_number(col[capacity][i], ',')}"


def _number(value: float | None, spec: str) -> str:
    return fmt.NA if value is None else format(value, spec)


def sweep_table(results: Sequence[TrialResult], rec: Recommendation,
                budget_bytes: int | None) -> Table:
    """The table the sweep prints and ``report`` re-prints; the recommended row is strong
    and marked '* '."""
    raw = comparison_frame(results, rec, budget_bytes)
    col = {name: to_python(raw[name]) for name in raw.columns}
    rows = []
    for i in range(len(raw)):
        batch = (f"{col['batch_size'][i]} x {col['num_minibatches'][i]}"
                 if col["batch_size"][i] else fmt.NA)
        purpose = col["purpose"][i]
        run = "" if purpose in (None, "search") else purpose
        shared = bool(col["shared_run"][i])
        if shared:
            run = f"{run}, shared" if run else "shared"
        capped = col["capped_peak_bytes"][i]
        cap = col["cap_bytes"][i]
        rows.append({
            "num_envs": f"{'* ' if col['recommended'][i] else ''}{col['num_envs'][i]}",
            "batch": batch, "run": run, "status": col["status"][i],
            "alloc_peak": format_bytes(col["alloc_peak_bytes"][i]),
            "process_peak": format_bytes(col["process_peak_bytes"][i]),
            "host_peak": format_bytes(col["host_peak_bytes"][i]),
            "capped": fmt.NA if capped is None else (format_bytes(capped)
                                                     + (f" / {format_bytes(cap)}" if cap else "")),
            "budget_share": fmt.percent(col["budget_share"][i]),
            "compile_s": _number(col["compile_s"][i], ".1f"),
            "steps_per_s": fmt.rate(col["steps_per_s"][i]) + (
                " (shared)" if shared and col["steps_per_s"][i] is not None else ""),
            "steps_ci": _interval(col["steps_per_s"][i], col["steps_per_s_ci_low"][i],
                                  col["steps_per_s_ci_high"][i]),
            "steps_per_s_per_env": _number(col["steps_per_s_per_env"][i], ",.1f"),
            "vs_best": fmt.percent(col["relative_speed"][i]), "why": col["reason"][i],
            "contacts": _demand(col, "contacts_max", "naconmax", i),
            "rows": _demand(col, "constraint_rows_per_world_max", "njmax", i)})
    any_cap = any(r.cap_bytes is not None for r in results)
    # The interval's column exists only where some trial measured one, so the files of runs
    # without it keep their columns.
    ci = any(v is not None for v in col["steps_per_s_ci_low"])
    columns = _columns(any_gpu(results), any_cap, ci, "naconmax" in col)
    return Table.from_rows(columns, ([row[c.key] for c in columns] for row in rows), data=raw,
                           strong=[bool(v) for v in col["recommended"]])
