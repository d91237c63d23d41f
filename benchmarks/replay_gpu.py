#!/usr/bin/env python
"""Replay the predictive search on a recorded GPU sweep: the search trials it takes to the
recorded boundary, with and without the compile-time prior. Pure: nothing runs.

A size the recording measured answers with its recorded search trial (status, live peak,
pool); another (``replay.Recorded``) out of memory at or above the smallest size
recorded out of memory, else with the pool of the next recorded size up (the pool moves in
whole allocator regions, so between two recorded sizes it stands at the larger one's level or
below: the pessimistic reading) and the live peak interpolated linearly. The search plans
through ``planner.plan_round``, as a sweep does, with the profile, budget and headroom of the
recording's header. The H100 recording predates the
compile-only probe; a sweep today has its prior from the second trial on (a GPU probes after
the first round), and the H200's footprint (same profile, same jax 0.11.2) stands in for it.

``--synthetic`` adds the pool model's replays on made-up pools (``tune.search`` directly):
need = max(190 MiB, c + b n), levels 2 + 256 k MiB under an 844 MiB pool limit, quick's grid
128..2048, for 18 truths and priors from 0.5x to 5x the pool's slope, against bisection.

    python benchmarks/replay_gpu.py -v
    python benchmarks/replay_gpu.py --results results/gpu/sweep_2GB_results.jsonl \
        --footprint results/gpu-2026-11-27/sweep1_footprint.json
    python benchmarks/replay_gpu.py --synthetic          # ~2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from replay import Recorded, replay_answers

from vramtune.measure.footprint import read_footprint
from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import RunHeader, load_run
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchMethod, SearchSpace, keeps_base_unrolls, plan_round
from vramtune.tune.prior import slope_prior
from vramtune.units import headroom_limit_bytes
from vramtune.workload.profile import profile_from_dict

HERE = Path(__file__).parent / "results"
RUNS = (("H100, 2026-11-22", HERE / "gpu" / "sweep_2GB_results.jsonl"),
        ("H200, 2026-11-27", HERE / "gpu-2026-11-27" / "sweep1_results.jsonl"))
FOOTPRINT = HERE / "gpu-2026-11-27" / "sweep1_footprint.json"
MiB = 2**20


def load(path: Path) -> tuple[RunHeader, list[TrialResult]]:
    run = load_run(path)
    return run.header, list(run.results)


def space_of(header: RunHeader, prior: SlopePrior | None) -> SearchSpace:
    prof = profile_from_dict(header.profile, source="header")
    recorded = header.search

    def shape_of(n: int) -> tuple[int, int, int] | None:
        shape = prof.shape_for(n, 1)
        return None if shape is None else (shape.batch_size, shape.num_minibatches,
                                           prof.unroll_length)

    return SearchSpace(start=recorded.start or prof.num_envs,
                       max_envs=recorded.max_envs or prof.max_envs, refine=None,
                       limit_bytes=headroom_limit_bytes(header.budget_bytes,
                                                        header.headroom_fraction),
                       is_valid=lambda n: prof.sweepable(n, 1),
                       method=SearchMethod.PREDICTIVE, shape_of=shape_of,
                       candidate=keeps_base_unrolls(prof, 1),
                       sizes_between=lambda lo, hi: prof.sweepable_sizes(lo, hi, 1), prior=prior)


def replay(recording: Recorded, space: SearchSpace) -> tuple[list[TrialResult], list[str]]:
    """The search trials to the end of the search, and why each was asked for (the last
    line: why the search ended)."""
    run = replay_answers(recording, space, 1, max_rounds=20)
    results = list(run.results)
    reasons = [f"{r.num_envs}: {plan_round(results[:i], space, 1)[0].reason}; read "
               f"{r.status}, pool {(r.jax_peak_pool_bytes or 0) / MiB:.0f} MiB"
               for i, r in enumerate(results)]
    return results, [*reasons, run.final.reason]


def edge(results: list[TrialResult]) -> tuple[int | None, int | None]:
    fails = min((r.num_envs for r in results if r.status is not Status.OK), default=None)
    fits = max((r.num_envs for r in results if r.status is Status.OK
                and (fails is None or r.num_envs < fails)), default=None)
    return fits, fails


def synthetic(aim_pool_open: float) -> dict[str, list[int]]:
    """Search trials to the grid's truth on made-up pools, per prior (and bisection)."""
    from vramtune.tune import search

    region, limit = 256 * MiB, 844 * MiB
    grid = tuple(search.round_grid(lambda n: True, 128, 2048))
    trials_by: dict[str, list[int]] = {}

    def level(need: float) -> float:
        return 2 * MiB + region * math.ceil((need - 2 * MiB) / region)

    for slope in (0.2, 0.3, 0.4, 0.5, 0.7, 1.0):
        for c in (0, 60, 150):
            def need(n: int, slope=slope, c=c) -> float:
                return max(190.0, c + slope * n) * MiB
            priors: dict[str, SlopePrior | None] = {
                f"prior {r}x": SlopePrior(slope / r * MiB) for r in (0.5, 1, 1.5, 2, 3, 5)}
            priors["no prior"] = None
            for label, prior in [*priors.items(), ("bisection", None)]:
                sp = search.Space(grid, limit, 128, region_bytes=region, prior=prior,
                                  use_model=label != "bisection", aim_pool_open=aim_pool_open)
                done: list[search.Trial] = []
                proposal = search.propose(done, sp)
                while not proposal.done:
                    for n in proposal.sizes:
                        pool = level(need(n))
                        done.append(search.Trial(n, Status.OK, pool) if pool <= limit
                                    else search.Trial(n, Status.OOM))
                    proposal = search.propose(done, sp)
                truth = max(n for n in grid if level(need(n)) <= limit)
                assert proposal.fits == truth, (slope, c, label, [t.num_envs for t in done])
                trials_by.setdefault(label, []).append(len(done))
    return trials_by


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, nargs="*", default=[p for _, p in RUNS])
    parser.add_argument("--footprint", type=Path, default=FOOTPRINT,
                        help="the compile-only probe's footprint.json that gives the prior")
    parser.add_argument("-v", "--verbose", action="store_true", help="each step's reason")
    parser.add_argument("--synthetic", action="store_true",
                        help="also replay the pool model on made-up pools")
    args = parser.parse_args()
    prior = slope_prior(read_footprint(args.footprint))
    names = {p: name for name, p in RUNS}
    print(f"# replay of the predictive search on recorded GPU sweeps; prior from "
          f"{args.footprint}: {prior.bytes_per_env / MiB:.3f} MiB/env" if prior else "no prior")
    print()
    print("| recording | prior | recorded search trials | replayed search trials | boundary | why it ended |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in args.results:
        header, trials = load(path)
        rec = Recorded(trials)
        recorded = [t.num_envs for t in trials if t.purpose is Purpose.SEARCH]
        for used in (prior, None):
            results, reasons = replay(rec, space_of(header, used))
            why = reasons[-1]
            seq = ", ".join(f"{r.num_envs}{'' if r.status is Status.OK else ' oom'}"
                            for r in results)
            fits, fails = edge(results)
            print(f"| {names.get(path, path.name)} | {'yes' if used else 'no'} | "
                  f"{len(recorded)} | {len(results)}: {seq} | {fits} fits / {fails} fails | "
                  f"{why[:90]} |")
            if args.verbose:
                print("\n".join(f"|   | {line} |" for line in reasons[:-1]))
    if args.synthetic:
        print()
        print("## made-up pools: search trials to the truth, mean (max) over 18 truths")
        print()
        print("| aim_pool_open | " + " | ".join(LABELS) + " |")
        print("| --- |" + " --- |" * len(LABELS))
        for aim in (0.4, 0.5, 0.8):
            by = synthetic(aim)
            print(f"| {aim} | " + " | ".join(
                f"{sum(by[k]) / len(by[k]):.2f} ({max(by[k])})" for k in LABELS) + " |")
    return 0


LABELS = ("prior 0.5x", "prior 1x", "prior 1.5x", "prior 2x", "prior 3x", "prior 5x",
          "no prior", "bisection")


if __name__ == "__main__":
    raise SystemExit(main())
