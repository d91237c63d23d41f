#!/usr/bin/env python
"""Does the throughput pick give the fastest fitting num_envs? Ground truth by long runs.

For each CPU budget (`--gpu-mem`, enforced as RLIMIT_DATA), two sweeps run side by side,
interleaved (new, old at one budget; old, new at the next): this tree's sweep (default
objective throughput, confirmation on, steady-throughput trials, the measured pick with its
interleaved re-measurement) and "today's" sweep from an older tree (`--old-src`, the code
before the speed change). Their walls give the cost ratio (target <= 1.3x).

Ground truth: every size that fits by the new sweeps' own trials (status ok, under the
budget's headroom line, below the smallest size past it) is trained in long fixed windows
(`vramtune trial` with a profile whose measuring window is fixed at `--window-s`, no budget),
alternated A B C A B C ... for `--windows` rounds, so that load drift on this shared machine
hits every size alike. A size's true steps/s is the median of its windows' medians. A size's
throughput does not depend on the budget, so each size is measured once and reused at every
budget where it fits. At each budget the pick's true steps/s is reported as a ratio of the
truly fastest fitting size's (target >= 0.97 everywhere, median >= 0.98).

Everything is saved as it completes under `--out` (sweeps/, truth.json, summary.json) and
reused on a re-run, so an interrupted benchmark continues where it stopped.

    python benchmarks/bench_speed_pick.py --old-src /tmp/old/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _common import banner, load_average, save

from vramtune.results.store import trial_from_dict
from vramtune.tune.boundary import fits, past_boundary
from vramtune.units import headroom_limit_bytes, parse_size

HERE = Path(__file__).parent
VRAMTUNE = [sys.executable, "-c", "from vramtune.cli.app import run; run()"]
HEADROOM = 0.10  # the sweep's default
TARGET_EACH, TARGET_MEDIAN, TARGET_WALL = 0.97, 0.98, 1.3


def env_for(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    return env


def run_sweep(args: argparse.Namespace, budget: str, which: str, out: Path) -> dict:
    """One sweep, its JSON summary and process wall saved beside its run directory."""
    path = out / "sweeps" / f"{budget}_{which}.json"
    if path.exists():
        return json.loads(path.read_text())
    src = Path(args.new_src if which == "new" else args.old_src).resolve()
    run_dir = out / "runs" / f"{budget}_{which}"
    cmd = [*VRAMTUNE, "sweep", "--profile", str(args.profile), "--gpu-mem", budget,
           "--start", str(args.start), "--max-envs", str(args.max_envs), "--json",
           "--out", str(run_dir), *args.sweep_args.split()]
    load_before = load_average()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env_for(src), capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    # exit 1 with a summary: the sweep ran and found nothing to recommend (at a budget on
    # the edge of the smallest size, a confirming run can fail): a wall like any other
    if proc.returncode not in (0, 1) or not proc.stdout.strip().startswith("{"):
        sys.exit(f"sweep {which} at {budget} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(proc.stdout)
    record = {"budget": budget, "which": which, "src": str(src), "wall_s": wall,
              "load_before": load_before, "load_after": load_average(), "summary": summary}
    print(f"  sweep {which:3} {budget}: {wall:6.1f} s, picked "
          f"{(summary.get('recommended') or {}).get('num_envs')}, "
          f"{summary.get('trials')} trials, load {load_before} -> {record['load_after']}",
          flush=True)
    return save(path, record)


def fitting_sizes(record: dict) -> list[int]:
    """Sizes that fit by the sweep's own trials: ok and under the headroom line, below the
    smallest size whose run went past it (the sweep's boundary)."""
    limit = headroom_limit_bytes(parse_size(record["budget"]), HEADROOM)
    rows = [trial_from_dict(r, "sweep") for r in record["summary"]["results"]]
    edge = min((r.num_envs for r in rows if past_boundary(r, limit)
                or r.status.value in ("oom", "over_cap")), default=None)
    return sorted({r.num_envs for r in rows if r.status.value == "ok" and fits(r, limit)
                   and (edge is None or r.num_envs < edge)})


def picked(record: dict) -> int | None:
    return (record["summary"].get("recommended") or {}).get("num_envs")


def truth_profile(args: argparse.Namespace, out: Path) -> Path:
    """The sweep's profile with a fixed measuring window of ``--window-s`` seconds."""
    data = yaml.safe_load(Path(args.profile).read_text())
    data["name"] = f"{data['name']}-truth"
    data["measure"] = {**data.get("measure", {}), "min_window_s": args.window_s,
                       "max_window_s": args.window_s, "speed_tolerance": 0.0,
                       "min_interval_s": 1.0, "max_intervals": 10_000}
    data["timeout_s"] = int(args.window_s * 6 + 300)
    path = out / "truth-profile.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_truth(args: argparse.Namespace, sizes: list[int], out: Path) -> dict[int, list[dict]]:
    """``--windows`` rounds over ``sizes``, A B C A B C ..., each window one long trial."""
    path = out / "truth.json"
    done: dict[str, list[dict]] = json.loads(path.read_text()) if path.exists() else {}
    profile = truth_profile(args, out)
    for round_ in range(args.windows):
        for n in sizes:
            runs = done.setdefault(str(n), [])
            if len(runs) > round_:
                continue
            load_before = load_average()
            proc = subprocess.run([*VRAMTUNE, "trial", "--profile", str(profile), "-n", str(n),
                                   "--json", "--cache"], env=env_for(Path(args.new_src)),
                                  capture_output=True, text=True, check=False)
            rec = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
            if rec.get("status") != "ok" or not rec.get("steps_per_s"):
                sys.exit(f"truth window {n} failed: {rec.get('status')} "
                         f"{rec.get('error_message') or proc.stderr[-2000:]}")
            runs.append({"round": round_, "steps_per_s": rec["steps_per_s"],
                         "window_s": rec.get("measure_window_s"),
                         "intervals": rec.get("measured_intervals"),
                         "wall_s": rec.get("wall_s"), "load_before": load_before,
                         "load_after": load_average()})
            print(f"  truth {n:5} round {round_ + 1}: {rec['steps_per_s']:9.0f} steps/s over "
                  f"{rec.get('measure_window_s') or 0:.0f} s, load {load_before}", flush=True)
            save(path, done)
    return {int(k): v for k, v in done.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default=str(HERE / "profiles" / "small.yaml"))
    p.add_argument("--budgets", nargs="+", default=["1.02GB", "1.1GB"])
    p.add_argument("--start", type=int, default=16)
    p.add_argument("--max-envs", type=int, default=256)
    p.add_argument("--sweep-args", default="--search bisect --refine 0",
                   help="passed to both sweeps; the default keeps them on the doubling ladder "
                        "so that the sizes to measure for the ground truth stay few")
    p.add_argument("--new-src", default=str(HERE.parent / "src"))
    p.add_argument("--old-src", default="/tmp/old/src",
                   help="src/ of the tree to compare walls with "
                        "(git worktree add /tmp/old 2268f58)")
    p.add_argument("--windows", type=int, default=3, help="ground-truth windows per size")
    p.add_argument("--window-s", type=float, default=60.0)
    p.add_argument("--out", default=str(HERE / "results" / "speed-pick"))
    p.add_argument("--sweeps-only", action="store_true")
    p.add_argument("--truth-only", type=int, nargs="+", default=None, metavar="N",
                   help="only the ground-truth windows of these sizes (e.g. the whole ladder, "
                        "beside the sweeps when time is short)")
    args = p.parse_args(argv)
    if args.windows < 1 or not 1 <= args.window_s <= 3600:
        p.error("--windows >= 1 and 1 <= --window-s <= 3600")
    out = Path(args.out)
    banner("bench_speed_pick: the throughput pick against long interleaved runs")
    print(f"nproc {os.cpu_count()}, load before {load_average()}; profile {args.profile}, "
          f"budgets {' '.join(args.budgets)}, sizes {args.start}..{args.max_envs}, "
          f"sweep args {args.sweep_args!r}", flush=True)
    t0 = time.monotonic()
    if args.truth_only:
        run_truth(args, sorted(args.truth_only), out)
        return 0

    sweeps: dict[str, dict[str, dict]] = {}
    for i, budget in enumerate(args.budgets):
        order = ("new", "old") if i % 2 == 0 else ("old", "new")
        sweeps[budget] = {w: run_sweep(args, budget, w, out) for w in order}
    if args.sweeps_only:
        return 0

    fitting = {b: fitting_sizes(s["new"]) for b, s in sweeps.items()}
    fitting_old = {b: fitting_sizes(s["old"]) for b, s in sweeps.items()}
    sizes = sorted(set().union(*fitting.values(), *fitting_old.values()))
    print(f"fitting sizes: new sweeps {fitting}, old sweeps {fitting_old}; ground truth for "
          f"{sizes}", flush=True)
    truth_runs = run_truth(args, sizes, out)
    truth = {n: statistics.median(w["steps_per_s"] for w in truth_runs[n]) for n in sizes}

    rows = []
    for budget, s in sweeps.items():
        fit = fitting[budget]
        best = max(fit, key=lambda n: truth[n]) if fit else None
        fit_old = fitting_old[budget]
        best_old = max(fit_old, key=lambda n: truth[n]) if fit_old else None
        new_pick, old_pick = picked(s["new"]), picked(s["old"])
        remeasure = s["new"]["summary"].get("speed_remeasure") or {}
        confirmed = s["new"]["summary"].get("confirmed") or {}
        rows.append({
            "budget": budget, "fitting": fit, "truly_fastest": best,
            "truth_steps_per_s": {str(n): truth[n] for n in fit},
            "new_pick": new_pick,
            "new_ratio": (truth[new_pick] / truth[best]
                          if best is not None and new_pick in truth else None),
            # today's pick against the fastest size its own sweep saw fit
            "old_fitting": fit_old, "old_truly_fastest": best_old, "old_pick": old_pick,
            "old_ratio": (truth[old_pick] / truth[best_old]
                          if best_old is not None and old_pick in truth else None),
            "new_wall_s": s["new"]["wall_s"], "old_wall_s": s["old"]["wall_s"],
            "wall_ratio": s["new"]["wall_s"] / s["old"]["wall_s"],
            "remeasure_pairs": remeasure.get("pairs"),
            "remeasure_wall_s": remeasure.get("wall_s"),
            "new_trials": s["new"]["summary"].get("trials"),
            "old_trials": s["old"]["summary"].get("trials"),
            "confirm_steps_per_s": confirmed.get("steps_per_s"),
        })
    ratios = [r["new_ratio"] for r in rows if r["new_ratio"] is not None]
    new_total = sum(r["new_wall_s"] for r in rows)
    old_total = sum(r["old_wall_s"] for r in rows)
    result = {
        "profile": args.profile, "budgets": args.budgets, "windows": args.windows,
        "window_s": args.window_s, "truth_steps_per_s": {str(n): truth[n] for n in sizes},
        "truth_windows": {str(n): truth_runs[n] for n in sizes}, "rows": rows,
        "min_ratio": min(ratios) if ratios else None,
        "median_ratio": statistics.median(ratios) if ratios else None,
        "wall_new_s": new_total, "wall_old_s": old_total, "wall_ratio": new_total / old_total,
        "remeasure_wall_s": sum(r["remeasure_wall_s"] or 0 for r in rows),
        "bench_wall_s": time.monotonic() - t0, "load_after": load_average(),
        "targets": {"each": TARGET_EACH, "median": TARGET_MEDIAN, "wall": TARGET_WALL},
    }
    save(out / "summary.json", result)

    print("\ntrue steps/s (median of windows): " + ", ".join(
        f"{n}: {truth[n]:,.0f} ({min(w['steps_per_s'] for w in truth_runs[n]):,.0f}-"
        f"{max(w['steps_per_s'] for w in truth_runs[n]):,.0f})" for n in sizes))
    print("\n| budget | fitting (new) | truly fastest | new pick | ratio | fitting (old) | "
          "old pick | ratio | wall new / old | re-measure |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        def fmt(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3f}"
        print(f"| {r['budget']} | {', '.join(map(str, r['fitting']))} | {r['truly_fastest']} | "
              f"{r['new_pick']} | {fmt(r['new_ratio'])} | {', '.join(map(str, r['old_fitting']))} | "
              f"{r['old_pick']} | "
              f"{fmt(r['old_ratio'])} | {r['new_wall_s']:.0f} / {r['old_wall_s']:.0f} s "
              f"({r['wall_ratio']:.2f}x) | {r['remeasure_pairs']} pairs, "
              f"{r['remeasure_wall_s'] or 0:.0f} s |")
    ok = (bool(ratios) and len(ratios) == sum(1 for r in rows if r["fitting"]) and min(ratios) >= TARGET_EACH
          and statistics.median(ratios) >= TARGET_MEDIAN and result["wall_ratio"] <= TARGET_WALL)
    print(f"\npick / truly fastest: min {result['min_ratio']}, median {result['median_ratio']} "
          f"(targets >= {TARGET_EACH}, median >= {TARGET_MEDIAN}); sweep wall new/old "
          f"{new_total:.0f} / {old_total:.0f} s = {result['wall_ratio']:.2f}x (<= {TARGET_WALL}); "
          f"re-measure {result['remeasure_wall_s']:.0f} s; load after {result['load_after']}; "
          f"{'MET' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
