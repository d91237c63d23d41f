#!/usr/bin/env python
"""Replay the predictive search with run-to-run jitter: how many trials does noise cost?

Issue 13 asks for at most 4 trials in a row to the boundary. `bench_search.py` replays the
planner on the recorded curve *without* noise (3.89 trials); the real sweeps took 4.80. This
script replays it on the same recorded curve (the mean data-segment peak of every ok trial
in `results/search-2026-11-22.json` per size, linear between) with Gaussian jitter of a
given sd added to every trial, over many seeds, at the bench's five caps (headroom 0, as
the bench ran). Pure: nothing is trained.

    python benchmarks/replay_noise.py --sd-mib 18 25 --seeds 40
    python benchmarks/replay_noise.py --space spread=8          # a variant of search.Space
    python benchmarks/replay_noise.py --prior-mib 0.237         # with the probe's slope prior

Repeat pairs at 128 envs within one sweep (search trial, then the repeat) differ by 4-36
MiB, an sd of ~18 MiB a trial; across sweeps peaks at one size spread ~25 MiB.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import statistics
from dataclasses import replace
from pathlib import Path

from vramtune.measure.footprint import Footprint, SizeFootprint
from vramtune.records import Status
from vramtune.tune import search
from vramtune.tune.planner import candidates
from vramtune.tune.prior import slope_prior
from vramtune.tune.request import SweepRequest, resolve
from vramtune.workload.profile import load_profile

MIB = 2 ** 20
HERE = Path(__file__).resolve().parent
CAPS = (1.1e9, 1.2e9, 1.3e9, 1.45e9, 1.6e9)


def recorded_curve(path: Path):
    peaks: dict[int, list[float]] = {}
    for run in json.loads(path.read_text())["runs"]:
        for t in run["results"]:
            if t["status"] == "ok" and t.get("host_peak_data_bytes"):
                peaks.setdefault(t["num_envs"], []).append(t["host_peak_data_bytes"])
    xs = sorted(peaks)
    ys = [statistics.mean(peaks[n]) for n in xs]

    def curve(n: float) -> float:
        i = bisect.bisect_left(xs, n)
        if i < len(xs) and xs[i] == n:
            return ys[i]
        i = min(max(i, 1), len(xs) - 1)
        return ys[i - 1] + (n - xs[i - 1]) * (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1])
    return curve


def trials_to_boundary(curve, grid, cap: float, sd: float, seed: int, **space) -> int:
    rng = random.Random(seed)
    sp = search.Space(tuple(grid), cap, grid[0], **space)
    trials: list[search.Trial] = []
    for _ in range(60):
        # as the sweep's planner marks them (boundary.ruled_out): a size that fitted with
        # less room than the search keeps is past the boundary
        short = search.short_of_room(trials, sp)
        marked = [replace(t, over_limit=t.num_envs in short) for t in trials]
        proposal = search.propose(marked, sp, 1)
        if proposal.done:
            return len(trials)
        for n in proposal.sizes:
            peak = curve(n) + rng.gauss(0.0, sd)
            fits = peak <= cap
            trials.append(search.Trial(n, Status.OK if fits else Status.OOM,
                                       peak if fits else None))
    raise RuntimeError("the search did not finish")


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sd-mib", type=float, nargs="+", default=[18.0, 25.0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--space", nargs="*", default=[], help="search.Space field=value")
    parser.add_argument("--recording", type=Path,
                        default=HERE / "results" / "search-2026-11-22.json")
    parser.add_argument("--prior-mib", type=float, nargs="*", default=[],
                        help="also replay with a slope prior of this many MiB per env (the "
                             "compile-only probe's figure for quick: 0.237)")
    args = parser.parse_args()
    curve = recorded_curve(args.recording)
    config = resolve(SweepRequest(load_profile("quick"), int(1.2e9), 0.0, 128, 1 << 16))
    grid = candidates(config.space())
    variants = {"predictive": {}, "bisection on the same grid": {"use_model": False}}
    if args.space:
        variants["predictive, " + " ".join(args.space)] = {
            k: _value(v) for k, v in (item.split("=", 1) for item in args.space)}
    for mib in args.prior_mib:
        variants[f"predictive, prior {mib:g} MiB/env"] = {
            "prior": slope_prior(Footprint("cpu", 1, (SizeFootprint(1, 1, 1, 0, 0, 0, 0, 0.0),
                                                      SizeFootprint(2, 1, 1, 0, 0, 0,
                                                                    int(mib * MIB), 0.0))))}
    print("| jitter sd | search | mean trials | per cap " + " / ".join(f"{c / 1e9:g}" for c in CAPS)
          + " GB |\n|---|---|---|---|")
    for sd in args.sd_mib:
        for name, space in variants.items():
            per = [statistics.mean(trials_to_boundary(curve, grid, cap, sd * MIB, s, **space)
                                   for s in range(args.seeds)) for cap in CAPS]
            print(f"| {sd:g} MiB | {name} | {statistics.mean(per):.2f} | "
                  + " / ".join(f"{x:.2f}" for x in per) + " |")


if __name__ == "__main__":
    main()
