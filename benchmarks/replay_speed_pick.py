#!/usr/bin/env python
"""Replay the throughput pick on a recorded sweep: what the measured rule picks, what it
leaves on the table against the fastest fitting size, and whether it asks to re-measure.

The default input is the H100 sweep at 2 GB in `results/gpu/` (jax 0.11.2, brax main, 8
trials). Its trials predate per-interval rates: each carries the median, slowest and fastest
of 40 intervals, so two sizes are told apart only when their ranges are disjoint (every
interval of one beat every interval of the other, significant at 40 against 40); where
they overlap the rule cannot decide and must ask for a re-measurement. The old tie rule
(overlapping min-max ranges: the smallest wins) is replayed beside it. Pure: nothing runs.

    python benchmarks/replay_speed_pick.py
    python benchmarks/replay_speed_pick.py --results some/run/results.jsonl --margin 0.02
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vramtune.records import TrialResult
from vramtune.results.store import trial_from_dict
from vramtune.tune.boundary import fits
from vramtune.tune.recommend import choose

GPU_RUN = Path(__file__).parent / "results" / "gpu" / "sweep_2GB_results.jsonl"
TARGET_LEFT = 0.03  # the bound on what the pick may leave against the fastest



def ties(r: TrialResult, best: TrialResult) -> bool:
    """The old tie rule, kept here to replay it: a steps/s range that overlaps the fastest's."""
    if r.steps_per_s_max is None or best.steps_per_s_min is None:
        return False
    return r.steps_per_s_max >= best.steps_per_s_min


def load(path: Path) -> tuple[dict, list[TrialResult]]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    header = next(x for x in lines if x.get("kind") == "header")
    trials = [trial_from_dict({k: v for k, v in x.items() if k != "kind"}, f"{path}:{i}")
              for i, x in enumerate(lines, 1) if x.get("kind") != "header"]
    return header, trials


def old_pick(results: list[TrialResult], limit: int | None) -> TrialResult | None:
    """The rule this replaces: the smallest size whose range overlaps the fastest's."""
    cands = [r for r in results if r.purpose.value in ("search", "alone") and fits(r, limit)]
    if not cands:
        return None
    fastest = max(cands, key=lambda r: (r.steps_per_s or 0.0, -r.num_envs))
    return min((r for r in cands if r is fastest or ties(r, fastest)), key=lambda r: r.num_envs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=GPU_RUN)
    parser.add_argument("--margin", type=float, default=0.02)
    args = parser.parse_args()
    header, results = load(args.results)
    budget, headroom = header["budget_bytes"], header["headroom_fraction"]
    print(f"# replay of the throughput pick on {args.results}")
    print(f"device: {header.get('gpu_name') or header['machine'].get('cpu')}, versions "
          f"{header['versions']}, budget {budget} B, headroom {headroom:.0%}, margin "
          f"{args.margin:.0%}")
    print()
    print("| num_envs | purpose | status | steps/s (median) | slowest | fastest | intervals |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for r in sorted(results, key=lambda r: (r.num_envs, r.purpose.value)):
        print(f"| {r.num_envs} | {r.purpose} | {r.status} | {r.steps_per_s or 0:,.0f} | "
              f"{r.steps_per_s_min or 0:,.0f} | {r.steps_per_s_max or 0:,.0f} | "
              f"{r.measured_intervals or 0} |")
    print()
    # A running sweep may still measure again; report and emit-config may not (choose's
    # default): both verdicts are shown.
    asking = choose(results, budget, headroom, margin=args.margin, remeasure_left=True)
    final = choose(results, budget, headroom, margin=args.margin, remeasure_left=False)
    limit = asking.limit_bytes
    old = old_pick(results, limit)
    assert asking.speed is not None and final.speed is not None and old is not None
    rates = final.speed.rates
    best = rates[final.speed.fastest].median

    def left(n: int) -> float:
        return 1 - rates[n].median / best

    print(f"fastest fitting size by median: {final.speed.fastest} "
          f"({best:,.0f} steps/s in its trial)")
    print(f"old tie rule picks {old.num_envs}: leaves {left(old.num_envs):.1%}")
    print(f"new rule, re-measurement possible: picks {asking.chosen.num_envs} for now; "
          f"asks to re-measure {asking.remeasure or 'nothing'}")
    print(f"  reason: {asking.reasons[asking.chosen.num_envs]}")
    print(f"new rule, no re-measurement left: picks {final.chosen.num_envs}: leaves "
          f"{left(final.chosen.num_envs):.1%}")
    print(f"  reason: {final.reasons[final.chosen.num_envs]}")
    for n in sorted(final.reasons):
        print(f"  {n}: {final.reasons[n]}")
    if final.speed_line:
        print(f"throughput: {final.speed_line}")
    if final.confirm_speed_line:
        print(f"throughput: {final.confirm_speed_line}")
    ok = left(final.chosen.num_envs) <= TARGET_LEFT or bool(asking.remeasure)
    print()
    print(f"target (leaves <= {TARGET_LEFT:.0%}, or asks to re-measure): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
