"""How often can issue 10's edge criterion be met, whatever the search does?

Issue 10's "Done when" asks, at each of 5 budgets, that the pick be "within one refinement
step of the largest size that survives 2 of 2" user runs. Both sides of that are draws: one
run's peak at a fixed size jitters with an sd of 14-35 MiB on CPU (``bench_child_gap.py``),
about one grid step (64-128 envs x 0.2-0.3 MiB per env). This simulation asks what share of
5-budget rounds meet the criterion for an ideal tool, as a function of the grid step measured
in sds of one run's peak. Pure numpy, seconds; no trial runs.

Model (units: one run's peak sd; the line, budget x 0.9, at 0):
- size k on the grid has mean peak ``g * k + phase`` (phase uniform over one step), one run's
  peak is that plus N(0, 1) (the measured jitter is close to normal, bench_child_gap);
- the tool: one trial per size walking up to the first failure (the bracket the predictive
  search ends on is also one run at each end), then a second run of the pick (the
  confirmation); a failed confirmation steps down one size and confirms that;
- the bench, as ``bench_fidelity.py`` + ``step3``/``step4``: the sizes above the pick, 2 user
  runs each under the line; the criterion is missed when a size 2 or more steps above the
  pick survives both.

It also reports what the pick costs (its mean peak below the line, in sds and in steps) and the
true survival rate of the size two steps above it: the figures a criterion stated in survival
rates would read.

    python benchmarks/sim_edge_criterion.py [--rounds 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
from statistics import NormalDist

import numpy as np


def simulate(step_sd: float, rounds: int, rng: np.random.Generator, above: int = 4) -> dict:
    """One budget per round; the criterion's outcome and the pick's figures for each."""
    miss = np.zeros(rounds, bool)
    below = np.zeros(rounds)
    steps_below = np.zeros(rounds)
    surv2 = np.zeros(rounds)
    start = -int(math.ceil(6.0 / step_sd)) - 1  # far below the line: always fits
    for r in range(rounds):
        phase = rng.uniform(-step_sd, 0.0)

        def mean(k: int, phase=phase) -> float:
            return step_sd * k + phase

        k = start
        while rng.normal(mean(k + 1), 1.0) < 0.0:  # one search trial per size
            k += 1
        pick = k
        while rng.normal(mean(pick), 1.0) >= 0.0:  # the confirmation; fails: one size down
            pick -= 1
        survivors = [j for j in range(1, above + 1)
                     if (rng.normal(mean(pick + j), 1.0, 2) < 0.0).all()]
        miss[r] = any(j >= 2 for j in survivors)
        below[r] = -mean(pick)
        steps_below[r] = -mean(pick) / step_sd
        surv2[r] = 1.0 - NormalDist().cdf(mean(pick + 2))
    p = float(miss.mean())
    return {"step_sd": step_sd, "p_miss": p, "p_5_of_5": (1 - p) ** 5, "p_6_of_6": (1 - p) ** 6,
            "pick_below_line_sd": float(below.mean()),
            "pick_below_line_steps": float(steps_below.mean()),
            "survival_two_above": float(surv2.mean()),
            "survival_two_above_p90": float(np.quantile(surv2, 0.9))}


def _whole(lo: int, hi: int):
    """An argparse type: a whole number in [lo, hi], else argparse's one-line error."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{n} is outside {lo} to {hi}")
        return n
    return parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # budgets a row: none has no share to report, more than a million runs for hours
    ap.add_argument("--rounds", type=_whole(1, 1_000_000), default=20000)
    ap.add_argument("--seed", type=_whole(0, 2**63 - 1), default=0)  # numpy's seeds are >= 0
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| grid step (sd of one run) | P(criterion missed at one budget) | P(met at 5 of 5) "
          "| P(met at 6 of 6) | pick's mean below the line (sd / steps) "
          "| true survival of pick + 2 steps (mean / 90th pct) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for g in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0):
        s = simulate(g, args.rounds, rng)
        print(f"| {g:g} | {s['p_miss']:.3f} | {s['p_5_of_5']:.2f} | {s['p_6_of_6']:.2f} "
              f"| {s['pick_below_line_sd']:.2f} / {s['pick_below_line_steps']:.2f} "
              f"| {s['survival_two_above']:.2f} / {s['survival_two_above_p90']:.2f} |")


if __name__ == "__main__":
    main()
