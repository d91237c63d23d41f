"""A sweep as JSON (``sweep --json``): plain data, every figure with its unit in its key."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from vramtune.tune.alone import remeasure_pairs, remeasure_wall_s
from vramtune.tune.ledger import fit_roles, ledgers
from vramtune.tune.prepare import SweepState
from vramtune.tune.recommend import Recommendation


def summary(state: SweepState, recommendation: Recommendation, run_dir: Path) -> dict[str, Any]:
    chosen = recommendation.chosen
    return {
        "run_dir": str(run_dir),
        "stopped_because": state.final_step.reason if state.final_step else "interrupted",
        "memory_prior": state.prior_note,
        "trials": len(state.results), "reused": state.reused,
        "recommended": chosen.to_dict() if chosen else None,
        "confirmed": (recommendation.confirmation.to_dict() if recommendation.confirmation
                      else None),
        "confirmed_line": recommendation.confirmed_line,
        # the summary's throughput lines: the pick against the fastest fitting size, and the
        # confirming run's steady rate against its trial's
        "speed_line": recommendation.speed_line,
        "confirm_speed_line": recommendation.confirm_speed_line,
        "notice": recommendation.notice,
        "speed_remeasure": {"pairs": remeasure_pairs(state.results),
                            "wall_s": remeasure_wall_s(state.results),
                            "sizes": list(recommendation.remeasure)},
        "reasons": {str(k): v for k, v in recommendation.reasons.items()},
        # runs left out of the speed comparison (a dip the size's re-run did not repeat),
        # by their place in "results"
        "set_aside": [{"result_index": i, "num_envs": r.num_envs, "why": why}
                      for i, r in enumerate(state.results)
                      if (why := recommendation.set_aside_words(r)) is not None],
        # where the memory goes (each record's ledger_* fields): each role's bytes per env
        # and fixed over the sizes measured; [] before two sizes counted one
        "ledger_fits": [asdict(f) for f in fit_roles(ledgers(state.results))
                        if f.per_env_bytes is not None],
        "results": [r.to_dict() for r in state.results],
    }
