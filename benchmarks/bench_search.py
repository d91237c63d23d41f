"""Issue 13 benchmark: today's doubling + bisection vs the predictive search, on `quick` (CPU).

1. Per budget (cap = budget, --headroom 0%), one real sweep each way, interleaved, cold
   compile cache (--no-cache: a warm cache lowers CPU peaks and would favour the second),
   --no-confirm (the proof of the pick is excluded from "trials to the boundary": only
   search trials count): trials to the boundary, the wall to the boundary (sweep start to the
   end of its last search trial) and the whole sweep's wall, the boundary found.
2. --parallel 2 vs --parallel 1 (predictive), at the --parallel-budgets ('all': each budget,
   in the same rotation): search rounds (trials in a row) and walls.
3. Ground truth: every ok trial of the benchmark leaves its data-segment peak (what
   RLIMIT_DATA counts); their curve (linear between measured sizes) gives the largest round
   size under each cap. Optionally (--verify-truth) the truth and the next round size are run
   under the cap to check it.
4. Replays on that recorded curve (pure, benchmarks/replay.py): rounds and trials for k = 1, 2, 4, 8
   over more budgets than were run for real, with the slope prior the real sweeps' compile-only
   probes reported (their footprint.json) and without it.

The predictive sweeps run their compile-only probe (the slope prior, tune/prior.py) beside
their first trial, as a user's sweep does: its cost is inside their walls.

    .venv/bin/python benchmarks/bench_search.py --budgets 1.2GB,1.4GB --parallel-budgets all

5. --confirm (with --methods predictive for the search alone): the sweeps confirm their pick
   (objective max-envs, so no speed re-measurement), and each sweep's trial walls are set
   against its floor: the pick's search trial, the failing size above it and the pick's
   confirming run, the trials no sweep can skip.

    .venv/bin/python benchmarks/bench_search.py --methods predictive --confirm \
        --budgets 1.1GB,1.2GB,1.3GB,1.45GB,1.6GB
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _common import banner
from replay import Curve, replay

from vramtune.measure.footprint import read_footprint
from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.boundary import ruled_out
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchMethod, SearchSpace, candidates
from vramtune.tune.prior import FOOTPRINT_FILE, slope_prior
from vramtune.units import parse_size
from vramtune.workload.profile import load_profile

MiB = 2**20
PROFILE = load_profile("quick")
START, MAX_ENVS = PROFILE.first_size, 4096  # the profile's own start, as a user runs it


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def sweep(budget: str, search: str, out: Path, parallel: int = 1, confirm: bool = False) -> dict:
    proof = (["--objective", "max-envs"] if confirm else ["--no-confirm"])
    args = [sys.executable, "-m", "vramtune.cli.app", "sweep", "--json", "--profile", "quick",
            "--gpu-mem", budget, "--headroom", "0%", "--start", str(START), "--max-envs",
            str(MAX_ENVS), *proof, "--no-cache", "--search", search, "--parallel",
            str(parallel), "--out", str(out)]
    load_before = load()
    started = time.time()
    proc = subprocess.run(args, capture_output=True, text=True)
    wall = time.time() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    results = [TrialResult.from_dict(r) for r in data["results"]]
    searched = [r for r in results if r.purpose is Purpose.SEARCH]
    ends = [_end(r) for r in searched]
    out_ = ruled_out(results, parse_size(budget))  # short of room: a failure to the search
    fails = [r.num_envs for r in searched if r.status is not Status.OK or r.num_envs in out_]
    edge = min(fails, default=None)
    found = max((r.num_envs for r in searched if r.status is Status.OK
                 and (edge is None or r.num_envs < edge)), default=None)
    footprint = read_footprint(out / FOOTPRINT_FILE)
    return {"budget": budget, "search": search, "parallel": parallel, "wall_s": wall,
            "prior_mib_per_env": (footprint.bytes_per_env() / MiB if footprint is not None
                                  and footprint.bytes_per_env() else None),
            "prior_wall_s": footprint.wall_s if footprint is not None else None,
            "prior_error": footprint.error if footprint is not None else None,
            "boundary_wall_s": max(ends) - started if ends else None,
            "search_trials": len(searched), "trials": len(results),
            "rounds": _rounds(results), "search_rounds": _rounds(searched),
            "sizes": [(r.num_envs, str(r.status), str(r.purpose), r.shared_run)
                      for r in results],
            "found": found, "fails": edge, "stopped": data["stopped_because"],
            "recommended": (data["recommended"] or {}).get("num_envs"),
            "load_before": load_before, "load_after": load(),
            **floor(results, (data["recommended"] or {}).get("num_envs"), parse_size(budget)),
            "results": data["results"]}


def floor(results: list[TrialResult], pick: int | None, limit_bytes: int | None = None) -> dict:
    """The sweep's floor: the walls of the trials any sweep must run (the pick's search
    trial, the smallest failing size above it, the pick's confirming run), beside the sum of
    all trial walls, of the search trials, and of the confirming runs (each a trial's own
    wall: spawn, compile, measuring window)."""
    def wall(rs: list[TrialResult]) -> float:
        return sum(r.wall_s or 0.0 for r in rs)

    search = [r for r in results if r.purpose is Purpose.SEARCH]
    confirm = [r for r in results if r.purpose is Purpose.CONFIRM]
    need: list[TrialResult] = []
    if pick is not None:
        need += [r for r in search if r.num_envs == pick][:1]
        # failing: out of memory, or fitted with less room than a proof keeps (the search
        # brackets the edge against such a size as against an OOM: boundary.ruled_out)
        out = ruled_out(results, limit_bytes)
        above = sorted((r for r in search if r.num_envs > pick
                        and (r.status is not Status.OK or r.num_envs in out)),
                       key=lambda r: r.num_envs)
        need += above[:1]
        need += [r for r in confirm if r.num_envs == pick and r.status is Status.OK][:1]
    return {"all_trials_s": wall(results), "search_trials_s": wall(search),
            "confirm_trials_s": wall(confirm), "floor_s": wall(need) if need else None,
            "floor_sizes": [r.num_envs for r in need]}


def _end(r: TrialResult) -> float:
    return datetime.fromisoformat(r.timestamp).timestamp() if r.timestamp else 0.0


def _rounds(results: list[TrialResult]) -> int:
    """Trials that started within 5 s of each other ran as one round (a batch starts its
    trials together; one after another, each trial is its own round)."""
    starts = sorted(_end(r) - (r.wall_s or 0.0) for r in results)
    rounds, last = 0, None
    for s in starts:
        if last is None or s - last > 5.0:
            rounds += 1
            last = s
    return rounds


def space(limit_bytes: int, method: SearchMethod, prior: SlopePrior | None = None
          ) -> SearchSpace:
    return SearchSpace(start=START, max_envs=MAX_ENVS,
                       refine=3 if method is SearchMethod.BISECT else None,
                       limit_bytes=limit_bytes, is_valid=PROFILE.sweepable, method=method,
                       shape_of=lambda n: (PROFILE.shape_for(n).batch_size,
                                           PROFILE.shape_for(n).num_minibatches, 10),
                       prior=prior)


def recorded_prior(runs: list[dict]) -> SlopePrior | None:
    """The slope prior the real sweeps' probes reported (their median), as the sweeps used it."""
    slopes = sorted(r["prior_mib_per_env"] for r in runs if r.get("prior_mib_per_env"))
    if not slopes:
        return None
    from vramtune.measure.footprint import Footprint, SizeFootprint

    mid = slopes[len(slopes) // 2] * MiB
    return slope_prior(Footprint("cpu", 1, (SizeFootprint(1, 1, 1, 0, 0, 0, 0, 0.0),
                                            SizeFootprint(2, 1, 1, 0, 0, 0, int(mid), 0.0))))


def verify(curve: Curve, budget: str, tmp: Path) -> list[tuple[int, str]]:
    """Run the truth and the next round size under the cap."""
    cap = parse_size(budget)
    grid = candidates(space(cap, SearchMethod.PREDICTIVE))
    truth = curve.truth(cap, grid)
    sizes = [truth] + [n for n in grid if truth is not None and n > truth][:1]
    out = []
    for n in sizes:
        if n is None:
            continue
        proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "trial", "--json",
                               "--profile", "quick", "-n", str(n), "--gpu-mem", budget,
                               "--no-cache"], capture_output=True, text=True)
        status = json.loads(proc.stdout)["status"] if proc.stdout.strip() else "crash"
        out.append((n, status))
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budgets", default="1.2GB,1.4GB", help="caps to sweep for real")
    parser.add_argument("--parallel-budgets", "--parallel-budget", default="",
                        help="budgets also swept predictive with --parallel 2, in the same "
                             "rotation as the other two ('all': every budget)")
    parser.add_argument("--replay-budgets", default="0.95,1.0,1.05,1.1,1.15,1.2,1.25,1.3,1.35",
                        help="GB caps to replay on the recorded curve (keep them where "
                             "trials measured peaks: beyond, the curve is extrapolated)")
    parser.add_argument("--verify-truth", action="store_true")
    parser.add_argument("--methods", default="bisect,predictive",
                        help="searches to run at each budget (one or both)")
    parser.add_argument("--confirm", action="store_true",
                        help="sweep with the confirming run, objective max-envs: adds the "
                             "floor and confirmation figures (trials to the boundary still "
                             "count search trials only)")
    parser.add_argument("--json-out", type=Path, default=None,
                        help="the runs so far, rewritten after each sweep (a cut run keeps them)")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the sweeps' run directories here (default: a temp dir)")
    args = parser.parse_args()
    banner(f"search benchmark: {args.methods.replace(',', ' vs ')} (quick, CPU)")
    print(f"load average at start: {load()}")
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = args.work or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)

        def keep() -> None:
            if args.json_out:
                args.json_out.write_text(json.dumps({"runs": runs}, indent=1))

        budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]
        wide = [b.strip() for b in args.parallel_budgets.split(",") if b.strip()]
        wide = budgets if wide == ["all"] else wide
        for i, budget in enumerate(budgets + [b for b in wide if b not in budgets]):
            order = ([(m.strip(), 1) for m in args.methods.split(",") if m.strip()]
                     if budget in budgets else [])
            if budget in wide:
                order.append(("predictive", 2))
            order = order[i % len(order):] + order[:i % len(order)]  # rotate: no method first always
            for method, k in order:
                run = sweep(budget, method, tmp / f"{budget}-{method}-{k}", parallel=k,
                            confirm=args.confirm)
                runs.append(run)
                keep()
                print(f"{budget} {method} --parallel {k}: {run['search_trials']} search trials "
                      f"in {run['search_rounds']} rounds {[s[0] for s in run['sizes']]}, found "
                      f"{run['found']} (fails {run['fails']}), boundary wall "
                      f"{run['boundary_wall_s']:.0f} s, sweep wall {run['wall_s']:.0f} s, load "
                      f"{run['load_before']} -> {run['load_after']}", flush=True)
        records = [TrialResult.from_dict(r) for run in runs for r in run["results"]]
        curve = Curve.from_records(records)
        checks = {}
        if args.verify_truth:
            for budget in budgets:
                checks[budget] = verify(curve, budget, tmp)
                print(f"truth check under {budget}: {checks[budget]}", flush=True)
    report(runs, curve, budgets, [float(b) for b in args.replay_budgets.split(",")], checks)
    if args.json_out:
        args.json_out.write_text(json.dumps({"runs": runs, "curve": [curve.sizes,
                                             curve.peaks_bytes], "checks": checks}, indent=1))


def report(runs: list[dict], curve: Curve, budgets: list[str], replay_gb: list[float],
           checks: dict) -> None:
    print("\n## Real sweeps (search trials only; --no-confirm's repeat excluded)\n")
    print("| cap | search | search trials | found | truth | wall to boundary s | sweep wall s |"
          " slope prior (probe wall) | load before -> after |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        if run["parallel"] != 1:
            continue
        cap = parse_size(run["budget"])
        truth = curve.truth(cap, candidates(space(cap, SearchMethod.PREDICTIVE)))
        prior = (f"{run['prior_mib_per_env']:.3f} MiB/env, {run['prior_wall_s']:.1f} s"
                 if run.get("prior_mib_per_env") else run.get("prior_error") or "none")
        print(f"| {run['budget']} | {run['search']} | {run['search_trials']} | {run['found']} "
              f"| {truth} | {run['boundary_wall_s']:.0f} | {run['wall_s']:.0f} | {prior} | "
              f"{run['load_before']} -> {run['load_after']} |")
    for method in ("bisect", "predictive"):
        mine = [r for r in runs if r["search"] == method and r["parallel"] == 1]
        print(f"\n{method}: mean search trials {mean([r['search_trials'] for r in mine]):.2f}, "
              f"mean wall to boundary {mean([r['boundary_wall_s'] for r in mine]):.0f} s, "
              f"mean sweep wall {mean([r['wall_s'] for r in mine]):.0f} s")
    floored = [r for r in runs if r["parallel"] == 1 and r.get("confirm_trials_s")]
    if floored:
        print("\n## Walls against the floor (sum of trial walls; floor = the pick's search trial "
              "+ the failing size above it + the pick's confirming run)\n")
        print("| cap | search | pick | floor sizes | all trials s | floor s | / floor | search s |"
              " confirm s | all / search |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in floored:
            ratio = r["all_trials_s"] / r["floor_s"] if r["floor_s"] else float("nan")
            print(f"| {r['budget']} | {r['search']} | {r['recommended']} | {r['floor_sizes']} | "
                  f"{r['all_trials_s']:.0f} | {r['floor_s'] or 0:.0f} | {ratio:.2f} | "
                  f"{r['search_trials_s']:.0f} | {r['confirm_trials_s']:.0f} | "
                  f"{r['all_trials_s'] / r['search_trials_s']:.2f} |")
        for method in sorted({r["search"] for r in floored}):
            mine = [r["all_trials_s"] / r["floor_s"] for r in floored
                    if r["search"] == method and r["floor_s"]]
            conf = [r["all_trials_s"] / r["search_trials_s"] for r in floored
                    if r["search"] == method]
            if mine:
                print(f"\n{method}: median wall / floor {statistics.median(mine):.2f}; with the "
                      f"confirmation / search trials alone, mean {mean(conf):.2f}")
    pairs = [(b, [r for r in runs if r["budget"] == b and r["parallel"] == 1]) for b in budgets]
    ratios = [next(r for r in rs if r["search"] == "predictive")["boundary_wall_s"]
              / next(r for r in rs if r["search"] == "bisect")["boundary_wall_s"]
              for _, rs in pairs if len(rs) == 2]
    if ratios:
        print(f"wall to boundary, predictive / bisect per budget: "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (mean {mean(ratios):.2f})")
    par = [r for r in runs if r["parallel"] != 1]
    if par:
        print("\n## Predictive --parallel 2 (two capped trials at once on the 2 cores)\n")
        print("| cap | search rounds (trials) | found | wall to boundary s | / bisect | / "
              "predictive k=1 | sweep wall s (with sizes re-run alone) | rounds, all |")
        print("|---|---|---|---|---|---|---|---|")
    to_bisect, to_solo = [], []
    for run in par:
        def same(method: str, run=run) -> dict | None:
            return next((r for r in runs if r["parallel"] == 1 and r["search"] == method
                         and r["budget"] == run["budget"]), None)
        old, solo = same("bisect"), same("predictive")
        cells = []
        for other, acc in ((old, to_bisect), (solo, to_solo)):
            if other and other["boundary_wall_s"] and run["boundary_wall_s"]:
                acc.append(run["boundary_wall_s"] / other["boundary_wall_s"])
                cells.append(f"{acc[-1]:.2f}")
            else:
                cells.append("n/a")
        print(f"| {run['budget']} | {run['search_rounds']} ({run['search_trials']}) | "
              f"{run['found']} | {run['boundary_wall_s']:.0f} | {cells[0]} | {cells[1]} | "
              f"{run['wall_s']:.0f} | {run['rounds']} |")
    if par:
        print(f"\n--parallel 2: mean search rounds {mean([r['search_rounds'] for r in par]):.2f}"
              f", mean search trials {mean([r['search_trials'] for r in par]):.2f}; wall to "
              f"boundary / bisect {', '.join(f'{x:.2f}' for x in to_bisect)} (mean "
              f"{mean(to_bisect):.2f}); / predictive k=1 "
              f"{', '.join(f'{x:.2f}' for x in to_solo)} (mean {mean(to_solo):.2f})")
    print(f"\n## Recorded curve: data-segment peaks of every ok trial above, {len(curve.sizes)} "
          f"sizes\n")
    print(", ".join(f"{n}: {p / MiB:.0f} MiB" for n, p in zip(curve.sizes, curve.peaks_bytes,
                                                            strict=True)))
    for budget, found in checks.items():
        print(f"truth check under {budget}: {found}")
    prior = recorded_prior(runs)
    for label, used in (("with the probes' slope prior", prior), ("without a prior", None)):
        if label.startswith("with") and used is None:
            continue
        _replays(curve, replay_gb, used, label)


def _replays(curve: Curve, replay_gb: list[float], prior: SlopePrior | None, label: str) -> None:
    top = curve.peaks_bytes[-1]
    slope = f", {prior.bytes_per_env / MiB:.3f} MiB/env" if prior else ""
    print(f"\n## Replays on the recorded curve, {label}{slope} (pure; a cap above "
          f"{top / 1e9:.3f} GB, the largest peak recorded, relies on the curve's last slope)\n")
    print("| cap GB | truth | bisect k=1 trials, found | predictive k=1 trials, found |"
          " k=2 rounds (trials) | k=4 rounds (trials) | k=8 rounds (trials) |")
    print("|---|---|---|---|---|---|---|")
    totals: dict[str, list[float]] = {}
    for gb in replay_gb:
        cap = int(gb * 1e9)
        old = replay(curve, space(cap, SearchMethod.BISECT), 1)
        cells = [f"{old.trials}, {old.found}"]
        truth = curve.truth(cap, candidates(space(cap, SearchMethod.PREDICTIVE)))
        totals.setdefault("bisect", []).append(old.trials)
        for k in (1, 2, 4, 8):
            new = replay(curve, space(cap, SearchMethod.PREDICTIVE, prior), k)
            totals.setdefault(f"k{k}", []).append(len(new.rounds))
            totals.setdefault(f"k{k}t", []).append(new.trials)
            ok = "" if new.found == truth else f" (found {new.found})"
            cells.append(f"{new.trials}, {new.found}" if k == 1 else
                         f"{len(new.rounds)} ({new.trials}){ok}")
        print(f"| {gb:.2f} | {truth} | " + " | ".join(cells) + " |")
    print(f"| mean | | {mean(totals['bisect']):.2f} | {mean(totals['k1t']):.2f} | "
          f"{mean(totals['k2']):.2f} ({mean(totals['k2t']):.1f}) | {mean(totals['k4']):.2f} "
          f"({mean(totals['k4t']):.1f}) | {mean(totals['k8']):.2f} ({mean(totals['k8t']):.1f}) |")


if __name__ == "__main__":
    main()
