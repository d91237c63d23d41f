"""Choose among measured trials only, and say why every other row was not chosen.

A size that was not run is never recommended: Lightning's BatchSizeFinder users found the
'power' mode returning untested sizes that OOMed at once in real training.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from vramtune.records import Status, TrialResult

KNEE_TOLERANCE = 0.05  # 'knee': smallest num_envs within 5% of the best steps/s


class Objective(StrEnum):
    THROUGHPUT = "throughput"
    KNEE = "knee"
    MAX_ENVS = "max-envs"


@dataclass(frozen=True)
class Recommendation:
    chosen: TrialResult | None
    objective: Objective
    limit_bytes: int | None  # budget x (1 - headroom), the line a peak must stay under
    reasons: dict[int, str]  # num_envs -> why it was chosen / not chosen
    best_steps_per_s: float | None
    notice: str | None = None  # set when nothing fits, with what to try


def fits(result: TrialResult, limit_bytes: int | None) -> bool:
    if result.status is not Status.OK or result.steps_per_s is None:
        return False
    if limit_bytes is None:
        return True
    peak = result.peak_bytes
    return peak is not None and peak <= limit_bytes


def choose(results: Iterable[TrialResult], budget_bytes: int | None, headroom_fraction: float,
           objective: Objective = Objective.THROUGHPUT) -> Recommendation:
    rows = sorted(results, key=lambda r: r.num_envs)
    limit = int(budget_bytes * (1 - headroom_fraction)) if budget_bytes else None
    candidates = [r for r in rows if fits(r, limit)]
    best = max((r.steps_per_s or 0.0 for r in candidates), default=None)
    chosen: TrialResult | None = None
    if candidates and best is not None:
        if objective is Objective.THROUGHPUT:
            chosen = max(candidates, key=lambda r: (r.steps_per_s or 0.0, -r.num_envs))
        elif objective is Objective.KNEE:
            chosen = min((r for r in candidates if (r.steps_per_s or 0) >= best * (1 - KNEE_TOLERANCE)),
                         key=lambda r: r.num_envs)
        else:
            chosen = max(candidates, key=lambda r: r.num_envs)
    reasons: dict[int, str] = {}
    for r in rows:
        reasons[r.num_envs] = _reason(r, chosen, limit, best, objective, budget_bytes)
    notice = None
    if chosen is None:
        notice = _nothing_fits(rows, limit)
    return Recommendation(chosen, objective, limit, reasons, best, notice)


def _reason(r: TrialResult, chosen: TrialResult | None, limit: int | None, best: float | None,
            objective: Objective, budget: int | None) -> str:
    if chosen is not None and r is chosen:
        return f"recommended ({objective})"
    if r.status is Status.CRASH and r.error_type:
        return f"crashed ({r.error_type})"
    if r.status is not Status.OK:
        return {Status.OOM: "out of memory", Status.TIMEOUT: "timed out", Status.CRASH: "crashed",
                Status.INVALID: "invalid batch settings", Status.ERROR: "error"}[r.status]
    if r.steps_per_s is None:
        return "no throughput measured"
    if limit is not None:
        peak = r.peak_bytes
        if peak is None:
            return "peak memory not measured"
        if peak > limit:
            share = f"{peak / budget:.0%} of budget" if budget else "over the limit"
            return f"over headroom ({share})"
    if best and chosen is not None:
        gap = 1 - (r.steps_per_s / best)
        if objective is Objective.MAX_ENVS:
            return "fewer envs"
        if objective is Objective.KNEE and gap <= KNEE_TOLERANCE:
            return "larger than the knee"
        if gap <= 0:
            return "ties, more envs"
        if (r.steps_per_s_max is not None and chosen.steps_per_s_min is not None
                and r.steps_per_s_max >= chosen.steps_per_s_min):
            # Its fastest interval beat the chosen row's slowest: the medians differ, the
            # measurements do not say which is faster.
            return f"{gap:.0%} below best, within noise (ranges overlap)"
        return f"slower ({gap:.0%} below best)"
    return "not chosen"


def _nothing_fits(rows: list[TrialResult], limit: int | None) -> str:
    if not rows:
        return "no trials were measured"
    smallest = rows[0]
    if smallest.status is Status.OOM or (limit is not None and smallest.status is Status.OK
                                         and (smallest.peak_bytes or 0) > limit):
        return (f"the workload does not fit even at num_envs={smallest.num_envs}: try a larger "
                f"budget, a smaller --start, smaller networks, or a shorter unroll_length")
    return "no trial finished ok under the budget; see the status column for why"
