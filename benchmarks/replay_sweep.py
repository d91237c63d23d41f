#!/usr/bin/env python
"""Replay whole CPU sweeps (search, proof, step-down, pick) with run-to-run jitter: what do
the issue's sweep figures come to over many draws instead of five?

`bench_search.py --confirm` runs five real sweeps a round (15 minutes), and a median of five
is a wide figure: this replay puts its 10-90% range at about 0.25 either side. This script
drives the sweep's own planner (`tune.sweep.next_steps`, the same call a real sweep makes)
with made-up records: each run of size n peaks at the recorded mean curve plus Gaussian
jitter (one run's sd, pooled over every size searched more than once in six rounds: 24 MiB,
80 degrees of freedom), plus ``--offset-mib`` for a proof run; it fails when that peak is
above its cap (the search trials' cap is the budget, headroom 0 as the bench runs; a proof's
is `sweep.proof_cap_bytes`), and takes the wall a run of its kind and size took in the two
latest rounds (a least-squares line per kind: search ok / out of memory, proof ok / out of
memory; the first trial its own mean, the compile-only probe beside it). The pick is
`recommend.choose`'s (objective max-envs); its floor is `bench_search.floor`'s. Pure:
nothing is trained, so it says what the rules do against a noise model, not what a machine
does: a variant that wins here is then run for real with `bench_search.py`.

Survival is computed, not drawn: a user run of size n under the line L passes with
P = Phi((L - mean(n) - offset) / sd); "two steps above" is the size whose mean sits two
refinement steps (2 x search.RESOLVE_SD sd) above the pick's.

    .venv/bin/python benchmarks/replay_sweep.py --seeds 200
    .venv/bin/python benchmarks/replay_sweep.py --sd-mib 15 21 30 --offset-mib 0 9
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from dataclasses import replace
from pathlib import Path

from bench_search import floor

from vramtune.measure.footprint import Footprint, SizeFootprint
from vramtune.records import Objective, Purpose, Status, TrialResult
from vramtune.tune import planner, search
from vramtune.tune.prior import slope_prior
from vramtune.tune.recommend import choose
from vramtune.tune.request import SweepRequest, resolve
from vramtune.tune.sweep import next_steps, trial_request
from vramtune.workload.profile import load_profile

MIB = 2**20
HERE = Path(__file__).resolve().parent
ROUNDS = ("search-2026-11-26", "search-2026-11-26b", "search-2026-11-27a",
          "search-2026-11-27b", "search-2026-11-27c", "search-2026-11-27d")
# walls from the rounds run under today's proof rules (the early end, the proof's cap)
WALL_ROUNDS = ("search-2026-11-27c", "search-2026-11-27d")
BUDGETS = (1.1e9, 1.2e9, 1.3e9, 1.45e9, 1.6e9)
PRIOR_MIB = 0.237  # the compile-only probe's slope for quick on CPU (benchmarks/README)


def _records(rounds: tuple[str, ...] = ROUNDS) -> list[list[TrialResult]]:
    runs = []
    for name in rounds:
        path = HERE / "results" / name / "search.json"
        if "/" in name or name in ("", ".", "..") or not path.is_file():
            raise SystemExit(f"replay_sweep: {name!r} is not a folder of benchmarks/results "
                             f"holding a search.json (bench_search.py --json-out)")
        data = json.loads(path.read_text())
        for run in data["runs"]:
            runs.append([TrialResult.from_dict(t) for t in run["results"]])
    return runs


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


class Recorded:
    """The mean peak curve (a quadratic in num_envs, least squares over every search trial
    that fitted: quick's data segment is slightly convex) and the walls by kind."""

    def __init__(self, runs: list[list[TrialResult]], timed: list[list[TrialResult]]):
        pts = [(r.num_envs, float(r.host_peak_data_bytes)) for run in runs for r in run
               if r.purpose is Purpose.SEARCH and r.status is Status.OK
               and r.host_peak_data_bytes]
        self.coef = _quadratic(pts)
        self.first_s = statistics.mean(run[0].wall_s for run in timed if run and run[0].wall_s)
        self.walls: dict[tuple[str, str], tuple[float, float]] = {}
        for purpose in (Purpose.SEARCH, Purpose.CONFIRM):
            for status in (Status.OK, Status.OOM):
                rows = [(r.num_envs, r.wall_s) for run in timed for r in run[1:]
                        if r.purpose is purpose and r.status is status and r.wall_s]
                if not rows:  # none of this kind in these rounds (a proof that ran out
                    # of memory, most often): charged as any run that ended so
                    rows = [(r.num_envs, r.wall_s) for run in timed for r in run[1:]
                            if r.status is status and r.wall_s]
                if not rows:
                    raise SystemExit(f"replay_sweep: no run ended {status} in the wall "
                                     f"rounds; add a round that has one (--wall-rounds)")
                self.walls[(str(purpose), str(status))] = _line(*map(list, zip(*rows, strict=True)))
        self.points = len(pts)

    def mean(self, n: float) -> float:
        a, b, c = self.coef
        return a + b * n + c * n * n

    def wall(self, purpose: Purpose, status: Status, n: int) -> float:
        key = (str(purpose), str(status if status is Status.OK else Status.OOM))
        a, b = self.walls[key]
        return max(1.0, a + b * n)


def _quadratic(pts: list[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares y = a + b x + c x^2 (normal equations, 3 x 3)."""
    s = [sum(x ** k for x, _ in pts) for k in range(5)]
    t = [sum(y * x ** k for x, y in pts) for k in range(3)]
    m = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]]
    det = _det3(m)
    out = []
    for col in range(3):
        mc = [row[:] for row in m]
        for i in range(3):
            mc[i][col] = t[i]
        out.append(_det3(mc) / det)
    return out[0], out[1], out[2]


def _det3(m: list[list[float]]) -> float:
    return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))


def phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def sweep_once(rec: Recorded, budget: float, sd: float, offset: float, seed: int) -> dict:
    rng = random.Random(seed)
    config = resolve(SweepRequest(load_profile("quick"), int(budget), 0.0, 128, 4096,
                                  objective=Objective.MAX_ENVS))
    footprint = Footprint("cpu", 1, (SizeFootprint(1, 1, 1, 0, 0, 0, 0, 0.0),
                                     SizeFootprint(2, 1, 1, 0, 0, 0, int(PRIOR_MIB * MIB), 0.0)))
    space = replace(config.space(), prior=slope_prior(footprint))
    results: list[TrialResult] = []
    for _ in range(60):
        steps = next_steps(config, results, space, 1)
        if not steps:
            break
        step = steps[0]
        req = trial_request(config, results, step, space)
        n = step.num_envs
        proof = req.purpose is not Purpose.SEARCH
        peak = rec.mean(n) + (offset if proof else 0.0) + rng.gauss(0.0, sd)
        cap = req.cap_bytes if req.cap_bytes is not None else int(budget)
        status = Status.OK if peak <= cap else Status.OOM
        purpose = Purpose.CONFIRM if proof else Purpose.SEARCH
        wall = rec.first_s if not results else rec.wall(purpose, status, n)
        shape = config.profile.shape_for(n, 1)
        results.append(TrialResult(
            status=status, profile="quick", profile_hash="replay", num_envs=n,
            batch_size=shape.batch_size, num_minibatches=shape.num_minibatches,
            unroll_length=config.profile.unroll_length, backend="cpu", purpose=purpose,
            cap_bytes=cap, rlimit_data_bytes=cap, budget_bytes=int(budget),
            training_steps=20 if proof else 7, memory_steady_steps=5,
            steps_per_s=1.0 if status is Status.OK else None,
            host_peak_data_bytes=int(peak) if status is Status.OK else None,
            wall_s=wall))
    else:
        raise RuntimeError("the sweep did not finish")
    pick = choose(results, int(budget), 0.0, Objective.MAX_ENVS).chosen
    n = pick.num_envs if pick is not None else None
    fl = floor(results, n, int(budget))
    searched = sum(r.purpose is Purpose.SEARCH for r in results)
    proofs = [r for r in results if r.purpose is Purpose.CONFIRM]
    user = above = None
    if n is not None:
        user = phi((budget - rec.mean(n) - offset) / sd)
        above = phi((budget - rec.mean(n) - offset - 2 * search.RESOLVE_SD * sd) / sd)
    return {"results": results, "pick": n, "search": searched, "first_proof_ok": bool(proofs)
            and proofs[0].status is Status.OK, "user": user, "above": above,
            "wall_floor": fl["all_trials_s"] / fl["floor_s"] if fl["floor_s"] else None,
            "confirm": (fl["all_trials_s"] / fl["search_trials_s"]
                        if fl["search_trials_s"] else None)}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(rec: Recorded, sd: float, offset: float, seeds: int) -> str:
    rows = [[sweep_once(rec, b, sd, offset, 1000 * i + s) for s in range(seeds)]
            for i, b in enumerate(BUDGETS)]
    flat = [x for row in rows for x in row]
    wf = [x["wall_floor"] for x in flat if x["wall_floor"]]
    # the bench's median is over 5 sweeps (one per budget): its distribution, by resampling
    fives = [statistics.median([row[(j * 7 + 3 * i) % seeds]["wall_floor"] or math.inf
                                for i, row in enumerate(rows)]) for j in range(seeds)]
    conf = [x["confirm"] for x in flat if x["confirm"]]
    return (f"| {sd / MIB:g} | {offset / MIB:g} | "
            f"{statistics.mean(x['search'] for x in flat):.2f} | "
            f"{statistics.median(wf):.2f} | {statistics.median(fives):.2f} "
            f"({_quantile(fives, 0.1):.2f}-{_quantile(fives, 0.9):.2f}; "
            f"{sum(f <= 1.5 for f in fives) / len(fives):.0%} <= 1.5) | "
            f"{statistics.mean(conf):.2f} | "
            f"{sum(x['first_proof_ok'] for x in flat) / len(flat):.0%} | "
            f"{statistics.mean(x['user'] for x in flat if x['user'] is not None):.1%} | "
            f"{statistics.mean(x['above'] for x in flat if x['above'] is not None):.1%} | "
            + " / ".join(f"{statistics.median([x['pick'] or 0 for x in row]):.0f}" for row in rows)
            + " |")


def proof_pairs(sweeps: list[list[TrialResult]]) -> list[tuple[bool, float]]:
    """(passed, MiB) per confirming run with its size's search trial in the same sweep: the
    proof's peak minus the trial's when it passed, its cap minus the trial's when it ran out
    of memory (a lower bound on what it would have peaked at)."""
    out = []
    for results in sweeps:
        for t in results:
            if t.purpose is not Purpose.CONFIRM:
                continue
            trial = next((x for x in results if x.num_envs == t.num_envs and x.status is Status.OK
                          and x.purpose is Purpose.SEARCH and x.host_peak_data_bytes), None)
            if trial is None or trial.host_peak_data_bytes is None:
                continue
            if t.status is Status.OK and t.host_peak_data_bytes is not None:
                out.append((True, (t.host_peak_data_bytes - trial.host_peak_data_bytes) / MIB))
            elif t.cap_bytes is not None:
                out.append((False, (t.cap_bytes - trial.host_peak_data_bytes) / MIB))
    return out


def censored_fit(pairs: list[tuple[bool, float]]) -> tuple[int, int]:
    """The (mean, sd) in whole MiB that maximise the censored normal likelihood of the pairs
    (a failed proof says only: above its cap). A grid search: the figures are for reading."""
    def loglik(mean: float, sd: float) -> float:
        total = 0.0
        for passed, x in pairs:
            z = (x - mean) / sd
            total += (-0.5 * z * z - math.log(sd)) if passed else math.log(max(1e-300, 1 - phi(z)))
        return total
    best = max((loglik(m, s), m, s) for m in range(-30, 91) for s in range(6, 81, 2))
    return best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sd-mib", type=float, nargs="+", default=[24.0])
    parser.add_argument("--offset-mib", type=float, nargs="+", default=[0.0],
                        help="a proof's (and a user run's) mean peak above a search trial's")
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--resolve-sd", type=float, default=None,
                        help="search.RESOLVE_SD to replay")
    parser.add_argument("--grid-bits", type=int, default=None,
                        help="planner.ROUND_GRID_BITS to replay (the candidates' significant bits)")
    parser.add_argument("--rounds", nargs="+", default=list(ROUNDS),
                        help="result folders whose search trials make the mean peak curve")
    parser.add_argument("--wall-rounds", nargs="+", default=list(WALL_ROUNDS),
                        help="result folders whose trial walls the replay charges")
    parser.add_argument("--proof-fit", action="store_true",
                        help="also fit proof minus trial on the replayed pairs, as on the real "
                             "ones: what selection alone makes of a true offset")
    args = parser.parse_args()
    if args.resolve_sd is not None:
        search.RESOLVE_SD = args.resolve_sd
    if args.grid_bits is not None:
        planner.ROUND_GRID_BITS = args.grid_bits
    rec = Recorded(_records(tuple(args.rounds)), _records(tuple(args.wall_rounds)))
    print(f"curve: {rec.points} search trials of {len(args.rounds)} rounds; mean peak "
          f"{rec.mean(128) / MIB:.0f} MiB at 128, {rec.mean(2048) / MIB:.0f} at 2048; first "
          f"trial {rec.first_s:.1f} s; RESOLVE_SD {search.RESOLVE_SD:g}")
    print("\n| sd MiB | offset MiB | search trials | wall/floor median | median of 5 "
          "(10-90%) | confirm ratio | first proof ok | user ok under line | 2 steps above ok | "
          "median pick per budget |\n|---|---|---|---|---|---|---|---|---|---|")
    for sd in args.sd_mib:
        for off in args.offset_mib:
            print(summary(rec, sd * MIB, off * MIB, args.seeds))
    if args.proof_fit:
        real = proof_pairs(_records(tuple(args.rounds)))
        mean, spread = censored_fit(real)
        print(f"\nrecorded rounds: {len(real)} confirming runs beside their trial, "
              f"{sum(not p for p, _ in real)} out of memory: fitted offset {mean:+d} MiB, sd {spread}")
        print("\n| sd MiB | true offset MiB | pairs | out of memory | fitted offset, sd MiB |"
              "\n|---|---|---|---|---|")
        for sd in args.sd_mib:
            for off in args.offset_mib:
                sweeps = [sweep_once(rec, b, sd * MIB, off * MIB, 1000 * i + s)["results"]
                          for i, b in enumerate(BUDGETS) for s in range(args.seeds)]
                pairs = proof_pairs(sweeps)
                mean, spread = censored_fit(pairs)
                print(f"| {sd:g} | {off:g} | {len(pairs)} | {sum(not p for p, _ in pairs)} | "
                      f"{mean:+d}, {spread} |")


if __name__ == "__main__":
    main()
