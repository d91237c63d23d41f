"""emit-config's pick for several run folders of one workload merged, at each budget.

Prints, per group of recorded folders and budget, the size chosen from all of them merged
and, where one folder swept that budget, the size that folder alone gives: merged evidence
may move a pick (another sweep's run over the line, or a proof under a cap no larger), but a
failure under less memory than the budget's line must not.

    .venv/bin/python benchmarks/merged_budgets.py
    PYTHONPATH=<older checkout>/src .venv/bin/python benchmarks/merged_budgets.py  # compare
"""

from __future__ import annotations

from pathlib import Path

from vramtune.errors import UserError
from vramtune.records import Objective
from vramtune.results.store import load_run
from vramtune.tune.budgets import choose_for_budget, merge_runs
from vramtune.units import budget_label, parse_size

RESULTS = Path(__file__).parent / "results"
GROUPS = {
    "speed-pick": (sorted((RESULTS / "speed-pick/runs").iterdir()),
                   ["1.02GB", "1.05GB", "1.1GB"]),
    "fidelity-max-envs": (sorted(RESULTS.glob("fidelity-max-envs/*/sweep-confirm")),
                          ["1.05GB", "1.075GB", "1.1GB", "1.125GB", "1.15GB", "1.2GB",
                           "1.25GB"]),
}


def pick(folders: list[Path], budget: int) -> str:
    try:
        source = merge_runs([load_run(d) for d in folders])
        # the sweeps' own objective, as emit-config chooses
        e = choose_for_budget(source, budget, source.objective or Objective.THROUGHPUT)
    except UserError as exc:
        return f"error: {exc}"[:40]
    if e.chosen is None:
        return "nothing fits"
    proof = "confirmed" if e.recommendation.confirmation is not None else "unconfirmed"
    return f"{e.chosen.num_envs} ({proof})"


def main() -> None:
    print(f"{'group':<18} {'budget':>8}  {'merged':<18} alone (the folder of that budget)")
    for name, (folders, budgets) in GROUPS.items():
        for text in budgets:
            budget = parse_size(text)
            own = [d for d in folders if load_run(d).header.budget_bytes == budget]
            alone = pick(own, budget) if own else "-"
            print(f"{name:<18} {budget_label(budget):>8}  {pick(folders, budget):<18} {alone}")


if __name__ == "__main__":
    main()
