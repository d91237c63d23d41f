#!/usr/bin/env python
"""Ground truth for the edge: at each budget, which sizes a user's run survives, and how often.

For each budget B (the line L = B x (1 - 10%), the sweep's default headroom):
  1. The boundary, roughly: one user run per size, bisecting on a grid of --step envs between
     --lo and --hi, under L (the largest size that survived: b).
  2. The grid around it: b - 2 x step, b - step, b, b + step, --runs user runs each, ONE AT A
     TIME (a user's card trains one run), interleaved over the sizes (size a, b, c, d, a, ...),
     so that a drift in the machine's state is spread over every size; a grid size's
     bisection run counts as one more.
  3. The sweep's pick at B: `vramtune sweep --profile quick --gpu-mem B --objective max-envs
     --no-cache --json` (its trials, wall, pick), and the pick's own --runs user runs under L
     (the grid's, when the pick is on it).
A user run is `benchmarks/user_train.py`: plain `ppo.train` of `quick`, evaluation on, 100
training steps, RLIMIT_DATA = L. Survival is k of n with its 95% Wilson interval; the largest
size surviving >= 90% and >= 50% is read from the grid.

Every run writes its JSON under --results/<B>/ as it ends; one whose file exists is not run
again (a cut run continues). No run starts after --stop-at (UTC HH:MM).

    .venv/bin/python benchmarks/bench_edge.py --budgets 1.2GB 1.4GB 1.6GB --runs 4 \\
        --stop-at 20:00 --results benchmarks/results/edge-2026-12-07
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
from pathlib import Path

import bench_fidelity
from _common import banner, load_average, save
from bench_fidelity import budget_bytes, finish_user, run_sweep, seconds_left, start_user

HEADROOM = 0.10


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of k successes in n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def one_run(n: int, line: int, folder: Path, tag: str, stop_at: dt.datetime) -> dict | None:
    """One user run of n envs under the line, kept in folder/tag.json; None past --stop-at."""
    path = folder / f"{tag}.json"
    if path.exists():
        return json.loads(path.read_text())
    if seconds_left(stop_at) < 90:
        return None
    proc, started = start_user(n, None, None, line, seconds_left(stop_at),
                               folder / f"{tag}.stderr")
    result = {**finish_user(proc, started), "size": n, "line_bytes": line}
    print(f"  {tag}: {n} envs {result['status']} peak "
          f"{(result.get('peak_vmdata') or 0) / 1e6:,.1f} MB (load {load_average()})",
          flush=True)
    return save(path, result)


def one_budget(budget: str, root: Path, args: argparse.Namespace, stop_at: dt.datetime) -> dict:
    line = int(budget_bytes(budget) * (1 - HEADROOM))
    folder = root / budget
    lo, hi = args.lo, args.hi  # lo is taken to survive; hi to fail
    while hi - lo > args.step:
        mid = (lo + hi) // 2 // args.step * args.step
        run = one_run(mid, line, folder, f"bisect_{mid}", stop_at)
        if run is None:
            break
        lo, hi = (mid, hi) if run["status"] == "ok" else (lo, mid)
    grid = [lo + k * args.step for k in (-2, -1, 0, 1) if lo + k * args.step > 0]
    runs: dict[int, list[dict]] = {n: [] for n in grid}
    for i in range(args.runs):
        for n in grid:
            run = one_run(n, line, folder, f"grid_{n}_{i}", stop_at)
            if run is not None:
                runs[n].append(run)
    sweep = run_sweep(budget, folder / "sweep", True) if seconds_left(stop_at) > 600 else None
    pick = ((sweep or {}).get("recommended") or {}).get("num_envs")
    pick_runs = runs.get(pick, []) if pick else []
    if pick and pick not in runs:
        pick_runs = [r for i in range(args.runs)
                     if (r := one_run(pick, line, folder, f"pick_{pick}_{i}", stop_at))]
    for n in grid:  # the bisection's run of a grid size is one more of the same protocol
        bisected = folder / f"bisect_{n}.json"
        if bisected.exists():
            runs[n].append(json.loads(bisected.read_text()))
    table = []
    for n in grid:
        k, total = sum(r["status"] == "ok" for r in runs[n]), len(runs[n])
        low, high = wilson(k, total)
        table.append({"num_envs": n, "survived": k, "runs": total, "wilson_low": round(low, 3),
                      "wilson_high": round(high, 3)})
    rated = [row for row in table if row["runs"]]
    summary = {
        "budget": budget, "line_bytes": line, "grid": table,
        "largest_90": max((r["num_envs"] for r in rated if r["survived"] >= 0.9 * r["runs"]),
                          default=None),
        "largest_50": max((r["num_envs"] for r in rated if r["survived"] >= 0.5 * r["runs"]),
                          default=None),
        "sweep": sweep, "pick": pick,
        "pick_survived": sum(r["status"] == "ok" for r in pick_runs), "pick_runs": len(pick_runs),
    }
    return save(folder / "summary.json", summary)


def markdown(summaries: list[dict], step: int) -> str:
    rows = ["| budget (line) | sizes: survived / runs [95% interval] | largest >= 90% | "
            "largest >= 50% | sweep pick (user runs) | pick >= largest 90% - step | "
            "search trials | wall s |", "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for s in summaries:
        cells = ", ".join(f"{r['num_envs']}: {r['survived']}/{r['runs']} "
                          f"[{r['wilson_low']:.2f}-{r['wilson_high']:.2f}]" for r in s["grid"])
        sweep = s.get("sweep") or {}
        pick, top = s.get("pick"), s.get("largest_90")
        meets = "n/a" if pick is None or top is None else \
            ("yes" if pick >= top - step else "no")
        rows.append(f"| {s['budget']} ({s['line_bytes'] / 1e9:.2f} GB) | {cells} | "
                    f"{top or 'n/a'} | {s.get('largest_50') or 'n/a'} | "
                    f"{pick or 'n/a'} ({s['pick_survived']}/{s['pick_runs']}) | {meets} | "
                    f"{sweep.get('trials', 'n/a')} | {sweep.get('wall_s', 'n/a')} |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budgets", nargs="+", default=["1.2GB", "1.4GB", "1.6GB"])
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--step", type=int, default=64)
    p.add_argument("--lo", type=int, default=128)
    p.add_argument("--hi", type=int, default=3072)
    p.add_argument("--results", default="benchmarks/results/edge")
    p.add_argument("--stop-at", default=None, help="UTC HH:MM: no run starts after it")
    p.add_argument("--table", action="store_true", help="only print the saved summaries")
    args = p.parse_args()
    root = Path(args.results)
    if args.table:
        print(markdown([json.loads((root / b / "summary.json").read_text())
                        for b in args.budgets if (root / b / "summary.json").exists()],
                       args.step))
        return
    now = dt.datetime.now(dt.UTC)
    stop_at = now + dt.timedelta(days=1)
    if args.stop_at:
        hh, mm = (int(x) for x in args.stop_at.split(":"))
        stop_at = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    bench_fidelity.SWEEP_OPTS[:] = ["--objective", "max-envs"]
    banner("edge: the sizes users' runs survive, one at a time, against the max-envs pick")
    print(f"load average at start: {load_average()}")
    summaries = [one_budget(b, root, args, stop_at) for b in args.budgets]
    save(root / "all.json", {"summaries": summaries})
    print(markdown(summaries, args.step))


if __name__ == "__main__":
    main()
