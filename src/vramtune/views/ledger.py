"""`vramtune explain`'s tables: one size's ledger, each role per env and fixed, and the
largest num_envs predicted for common cards. Every figure says what it is a figure of: host
memory on a CPU, a GPU's per-device memory; predicted figures are labelled predicted."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from vramtune.tune.ledger import (
    GB,
    ROLLOUT,
    CardPrediction,
    Explanation,
    RoleFit,
)
from vramtune.units import NA, format_bytes
from vramtune.views.tables import Column, Table


def _bytes(value: float | None) -> str:
    return NA if value is None else format_bytes(int(round(value)))


def _share(value: int | None, peak: int | None) -> str:
    return NA if value is None or not peak else f"{value / peak:.1%}"


def ledger_table(expl: Explanation) -> Table:
    """The shown size's roles, the part no role explains, and the peak they add up to."""
    cols = (Column("role", "role"), Column("bytes", "bytes", "right"),
            Column("share", "of the peak", "right"))
    rows, data = [], []
    peak = expl.shown_peak_bytes
    for field, role, value in expl.shown:
        label = f"  of which {role}" if field == ROLLOUT[0] else role
        rows.append([label, _bytes(value), _share(value, peak)])
        data.append({"field": field, "role": role, "bytes": value})
    return Table.from_rows(cols, rows, data=pd.DataFrame(data, columns=["field", "role", "bytes"]))


def fits_table(fits: tuple[RoleFit, ...]) -> Table:
    """Each role as fixed + per env x num_envs, with the fit's largest residual."""
    cols = (Column("role", "role"), Column("per_env", "per env", "right"),
            Column("fixed", "fixed", "right"), Column("residual", "largest residual", "right"),
            Column("sizes", "sizes", "right"))
    rows = [[f.role, _bytes(f.per_env_bytes), _bytes(f.fixed_bytes), _bytes(f.residual_bytes),
             str(f.sizes)] for f in fits]
    data = pd.DataFrame([{"field": f.field, "role": f.role, "per_env_bytes": f.per_env_bytes,
                          "fixed_bytes": f.fixed_bytes, "residual_bytes": f.residual_bytes,
                          "sizes": f.sizes} for f in fits])
    return Table.from_rows(cols, rows, data=data)


def cards_predicted_table(cards: tuple[CardPrediction, ...]) -> Table:
    """The largest num_envs predicted per card, the range the residual allows, and how far
    past the largest size measured it reaches (a straight line, extrapolated)."""
    cols = (Column("card", "card", "right"), Column("line", "line (less headroom)", "right"),
            Column("num_envs", "num_envs (predicted)", "right"),
            Column("range", "range (spread seen)", "right"),
            Column("times", "x largest measured", "right"))

    def n(value: int | None) -> str:
        return NA if value is None else f"{value:,}"

    rows = [[f"{c.card_bytes / GB:g} GB", format_bytes(c.line_bytes),
             (">= " if c.capped else "") + n(c.num_envs),
             NA if c.low_num_envs is None and c.high_num_envs is None
             else f"{n(c.low_num_envs)} .. {n(c.high_num_envs)}",
             NA if c.times_measured is None else f"{c.times_measured:,.1f}x"] for c in cards]
    return Table.from_rows(cols, rows, data=pd.DataFrame([asdict(c) for c in cards]))


def explanation_json(expl: Explanation) -> dict[str, Any]:
    """The JSON of ``explain --json``: the size shown, every size's roles, the fits, the cards."""
    return {
        "run": expl.run_dir, "profile": expl.profile, "backend": expl.backend,
        "memory": expl.memory_words, "headroom_fraction": expl.headroom_fraction,
        "num_envs": expl.num_envs, "predicted": expl.predicted,
        "ledger": {field: value for field, _, value in expl.shown},
        "peak_bytes": expl.shown_peak_bytes, "phases": expl.phases, "ledger_error": expl.error,
        "sizes": [{"num_envs": s.num_envs, "peak": s.peak_label, **s.figures(),
                   "parts_bytes": s.parts_bytes, "outside_pool_bytes": s.outside_pool_bytes,
                   "uncounted": list(s.uncounted), "ledger_error": s.error}
                  for s in expl.sizes],
        "fits": [asdict(f) for f in expl.fits],
        "cards_predicted": [asdict(c) for c in expl.cards],
        # the run's length priced: its peak is predicted, never measured
        # measured_peak_bytes is the figure the line holds: the data segment on a CPU, the
        # larger of the pool and the process (NVML) on a GPU
        "growth": None if expl.growth is None else {**asdict(expl.growth),
                                                    "crosses": expl.growth.crosses},
        "evaluation": None if expl.evaluation is None else {
            **asdict(expl.evaluation), "dominates": expl.evaluation.dominates},
        "warnings": list(expl.warnings),
    }
