"""Issue 10 "Done when": does the recommended config survive the user's own long training?

For each budget B (bytes, e.g. 1.2GB = 1.2e9):
  1. `vramtune sweep --profile quick --gpu-mem B --start 256 --no-cache --json` (confirmation
     on, the default): trials, sweep wall, the recommended num_envs/batch, the confirmed line.
     For one budget (--ratio-budget) also the same sweep with `--no-confirm`: wall ratio
     with / without confirmation (issue 10 aims at <= 1.5x).
  2. Two user-style long runs of the recommended config AT THE SAME TIME (two at once is the
     loaded case: DESIGN.md says load moves the peak under a cap): benchmarks/user_train.py,
     a plain brax PPO script with no vramtune imports, evaluation on (11 evals), 100 training
     steps, RLIMIT_DATA = the full budget B (the user's cap).
  3. The next size above N that the sweep measured: one user-style run under the line the
     pick promises, B x (1 - headroom). If it fails, N is the largest size on the sweep's
     grid whose user run fits under that line; if it survives, that is recorded as it is.
  4. (--line-runs) The same question asked both ways, 2 at once each: N's user run under
     the line B x 0.9 (does the user's own run of the pick keep the headroom the trial
     proved, or does it only fit by eating into it?), and the next size's user run under
     the full B (the largest size that survives the user's cap may lie above N by the
     headroom: that is what the headroom is for, and this says by how much).

Every step writes its JSON under --results/<B>/ as soon as it ends, and a step whose file
exists is not run again (so a run cut by --stop-at can be continued). No step starts after
--stop-at (UTC HH:MM), and user runs are given a timeout that ends there.

    nice -n 5 .venv/bin/python benchmarks/bench_fidelity.py --budgets 1.2GB 1.3GB \\
        --ratio-budget 1.2GB --stop-at 09:00
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _common import banner, load_average, save

HERE = Path(__file__).resolve().parent
USER_TRAIN = HERE / "user_train.py"
MIB = 2**20


def budget_bytes(text: str) -> int:
    if not text.upper().endswith("GB"):
        raise SystemExit(f"budget {text!r}: write it as N.NGB (decimal)")
    return int(round(float(text[:-2]) * 1e9))


def seconds_left(stop_at: dt.datetime) -> float:
    return (stop_at - dt.datetime.now(dt.UTC)).total_seconds()


SWEEP_OPTS: list[str] = ["--start", "256"]  # main() replaces it from --objective / --start
HEADROOM = 0.10  # the sweep's default headroom: its trials run under B x (1 - HEADROOM)


def run_sweep(budget: str, out: Path, confirm: bool) -> dict:
    """One sweep; stdout, stderr and a wall file beside its run directory, reused if there."""
    stem = out.parent / out.name
    wall_file = stem.with_suffix(".wall")
    if not wall_file.exists():
        args = [sys.executable, "-m", "vramtune.cli.app", "sweep", "--profile", "quick",
                "--gpu-mem", budget, *SWEEP_OPTS, "--no-cache", "--json", "--out", str(out)]
        if not confirm:
            args.append("--no-confirm")
        out.parent.mkdir(parents=True, exist_ok=True)
        load_before = load_average()
        start = time.time()
        with open(stem.with_suffix(".stdout"), "w") as so, \
                open(stem.with_suffix(".stderr"), "w") as se:
            rc = subprocess.run(["nice", "-n", "5", *args], stdout=so, stderr=se).returncode
        save(wall_file, {"rc": rc, "start": start, "end": time.time(),
                         "load_before": load_before, "load_after": load_average()})
    wall = json.loads(wall_file.read_text())
    data = json.loads(stem.with_suffix(".stdout").read_text() or "null")
    if data is None:
        raise SystemExit(f"sweep {out} printed nothing (rc {wall['rc']}): "
                         f"{stem.with_suffix('.stderr').read_text()[-2000:]}")
    rec = data.get("recommended") or {}
    rows = sorted(data["results"], key=lambda r: (r["num_envs"], r.get("purpose") or ""))
    return {
        "budget": budget, "confirm": confirm, "rc": wall["rc"],
        "wall_s": round(wall["end"] - wall["start"], 1),
        "load": [wall.get("load_before"), wall.get("load_after")],
        "trials": data["trials"], "stopped_because": data["stopped_because"],
        "recommended": {k: rec.get(k) for k in ("num_envs", "batch_size", "num_minibatches",
                                                "unroll_length", "host_peak_data_bytes",
                                                "host_peak_rss_bytes")} if rec else None,
        "confirmed": data.get("confirmed"), "confirmed_line": data.get("confirmed_line"),
        "notice": data.get("notice"),
        "rows": [{k: r.get(k) for k in ("num_envs", "status", "purpose", "batch_size",
                                        "num_minibatches", "training_steps", "cap_bytes",
                                        "host_peak_data_bytes", "host_peak_rss_bytes",
                                        "wall_s", "error_message")} for r in rows],
        # Same run, same load: the share of the sweep's wall that its proof runs took.
        "proof_wall_s": round(sum(r.get("wall_s") or 0 for r in rows
                                  if r.get("purpose") in ("confirm", "repeat")), 1),
    }


def start_user(n: int, bs: int | None, nmb: int | None, cap: int, timeout: float,
               log: Path) -> tuple[subprocess.Popen, float]:
    args = ["nice", "-n", "5", sys.executable, str(USER_TRAIN), "--num-envs", str(n),
            "--training-steps", "100", "--budget-bytes", str(cap),
            "--timeout", str(max(int(timeout), 60))]
    if bs:
        args += ["--batch-size", str(bs)]
    if nmb:
        args += ["--num-minibatches", str(nmb)]
    log.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log, "w"),
                            text=True), time.time()


def finish_user(proc: subprocess.Popen, started: float) -> dict:
    out, _ = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    data = json.loads(lines[-1]) if lines else {"status": "error", "message": out[-500:]}
    keep = ("status", "message", "exit_code", "num_envs", "batch_size", "num_minibatches",
            "budget_bytes", "run_evals", "num_evals", "peak_vmdata", "peak_rss",
            "training_steps", "wall_s")
    return {"rc": proc.returncode, "load_after": load_average(),
            "wall_outer_s": round(time.time() - started, 1),
            **{k: data.get(k) for k in keep}}


def user_runs(n: int, bs: int | None, nmb: int | None, cap: int, count: int,
              stop_at: dt.datetime, logs: Path) -> list[dict]:
    load_before = load_average()
    procs = [start_user(n, bs, nmb, cap, seconds_left(stop_at), logs / f"user_{n}_{i}.stderr")
             for i in range(count)]
    results = [finish_user(p, t) for p, t in procs]
    for r in results:
        r["load_before"] = load_before
        r["concurrent"] = count
    return results


def mib(b: int | None) -> str:
    return "n/a" if b is None else f"{b / MIB:.1f}"


def one_budget(budget: str, root: Path, ratio: bool, stop_at: dt.datetime,
               min_left: float) -> dict:
    cap = budget_bytes(budget)
    bdir = root / budget
    summary_file = bdir / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else \
        {"budget": budget, "budget_bytes": cap}

    def save_summary() -> None:
        save(summary_file, summary)

    def time_ok(step: str) -> bool:
        left = seconds_left(stop_at)
        if left < min_left:
            summary.setdefault("not_run", []).append(f"{step}: {left:.0f} s before --stop-at")
            save_summary()
            print(f"  {budget}: {step} not run ({left:.0f} s left)")
            return False
        return True

    if "sweep" not in summary:
        if not time_ok("sweep"):
            return summary
        summary["sweep"] = run_sweep(budget, bdir / "sweep-confirm", confirm=True)
        save_summary()
    sw = summary["sweep"]
    print(f"  {budget}: sweep {sw['trials']} trials, {sw['wall_s']} s, "
          f"recommended {sw['recommended']}, {sw['confirmed_line']}")
    if ratio and "sweep_no_confirm" not in summary and time_ok("sweep --no-confirm"):
        summary["sweep_no_confirm"] = run_sweep(budget, bdir / "sweep-noconfirm", confirm=False)
        nc = summary["sweep_no_confirm"]
        summary["confirm_wall_ratio"] = round(sw["wall_s"] / nc["wall_s"], 2)
        save_summary()
        print(f"  {budget}: --no-confirm {nc['wall_s']} s, recommended {nc['recommended']}: "
              f"ratio {summary['confirm_wall_ratio']}")
    rec = sw["recommended"]
    if not rec:
        return summary
    n, bs, nmb = rec["num_envs"], rec["batch_size"], rec["num_minibatches"]
    if "user_runs" not in summary and time_ok("2 user runs"):
        summary["user_runs"] = user_runs(n, bs, nmb, cap, 2, stop_at, bdir)
        save_summary()
    for r in summary.get("user_runs", []):
        print(f"  {budget}: user {n} -> {r['status']} peak VmData {mib(r['peak_vmdata'])} MiB "
              f"({r['message']}) {r['wall_s']} s")
    above = sorted({r["num_envs"] for r in sw["rows"] if r["num_envs"] > n})
    summary["next_size"] = above[0] if above else None
    # The next size is run under the cap the sweep's trials were held to, B x (1 - headroom):
    # the line the recommendation promises to stay under. Under the full B it may survive
    # by the headroom itself, which says nothing about where the sweep put the edge.
    line = int(cap * (1 - HEADROOM))
    summary["next_cap_bytes"] = line
    if above and "next_run" not in summary and time_ok(f"user run at {above[0]}"):
        # The next size's batch follows the profile's scaling (user_train's default).
        summary["next_run"] = user_runs(above[0], None, nmb, line, 1, stop_at, bdir)[0]
        save_summary()
    if "next_run" in summary:
        r = summary["next_run"]
        print(f"  {budget}: next size {above[0]} -> {r['status']} peak VmData "
              f"{mib(r['peak_vmdata'])} MiB ({r['message']})")
    if LINE_RUNS:
        if "line_runs" not in summary and time_ok(f"2 user runs of {n} under the line"):
            summary["line_runs"] = user_runs(n, bs, nmb, line, 2, stop_at, bdir / "line")
            save_summary()
        if above and "next_runs_full" not in summary and time_ok(
                f"2 user runs of {above[0]} under B"):
            summary["next_runs_full"] = user_runs(above[0], None, nmb, cap, 2, stop_at,
                                                  bdir / "full")
            save_summary()
        for key, what in (("line_runs", f"{n} under B x 0.9"),
                          ("next_runs_full", f"{summary.get('next_size')} under B")):
            for r in summary.get(key, []):
                print(f"  {budget}: user {what} -> {r['status']} peak VmData "
                      f"{mib(r['peak_vmdata'])} MiB ({r['message']})")
    save_summary()
    return summary


LINE_RUNS = False  # main() sets it from --line-runs


def runs_cell(runs: list[dict] | None) -> str:
    if not runs:
        return "not run"
    ok = sum(r["status"] == "ok" for r in runs)
    return f"{ok}/{len(runs)} ok (" + ", ".join(
        f"{r['status']} {mib(r['peak_vmdata'])}" for r in runs) + ")"


def line_table(root: Path, budgets: list[str]) -> str:
    """Step 4's table: the pick under the line, the next size under the full budget."""
    lines = ["| budget | N | line B x 0.9 (MiB) | user runs of N under the line (peak VmData "
             "MiB) | next size | user runs of it under B (MiB) |", "|" + " --- |" * 6]
    for b in budgets:
        f = root / b / "summary.json"
        s = json.loads(f.read_text()) if f.exists() else {}
        rec = (s.get("sweep") or {}).get("recommended") or {}
        if "line_runs" not in s and "next_runs_full" not in s:
            continue
        lines.append(f"| {b} | {rec.get('num_envs')} | {mib(s.get('next_cap_bytes'))} | "
                     f"{runs_cell(s.get('line_runs'))} | {s.get('next_size')} | "
                     f"{runs_cell(s.get('next_runs_full'))} |")
    return "\n".join(lines)


def table(root: Path, budgets: list[str]) -> str:
    """The README table from the saved summaries."""
    head = ("| budget | sweep: trials, boundary | recommended (N, batch x nmb) | confirmed | "
            "user runs of N, 2 at once, cap B (peak VmData MiB) | next size: user run, cap B x 0.9 | "
            "sweep wall (s), with / without confirmation |")
    lines = [head, "|" + " --- |" * 7]
    for b in budgets:
        f = root / b / "summary.json"
        if not f.exists():
            lines.append(f"| {b} | not run | | | | | |")
            continue
        s = json.loads(f.read_text())
        sw = s.get("sweep")
        if not sw:
            lines.append(f"| {b} | not run | | | | | |")
            continue
        rec = sw["recommended"] or {}
        runs = s.get("user_runs") or []
        ok = sum(r["status"] == "ok" for r in runs)
        user = (f"{ok}/{len(runs)} ok (" + ", ".join(
            f"{r['status']} {mib(r['peak_vmdata'])}" for r in runs) + ")") if runs else "not run"
        nr = s.get("next_run")
        nxt = (f"{s.get('next_size')}: {nr['status']} ({mib(nr['peak_vmdata'])}, "
               f"{nr['training_steps']} steps)") if nr else f"{s.get('next_size')}: not run"
        nc = s.get("sweep_no_confirm")
        proof = sw.get("proof_wall_s")
        within = (f"; within the run {sw['wall_s']} / {sw['wall_s'] - proof:.1f} = "
                  f"{sw['wall_s'] / (sw['wall_s'] - proof):.2f}x" if proof else "")
        wall = (f"{sw['wall_s']} / {nc['wall_s']} = {s['confirm_wall_ratio']}x" if nc
                else f"{sw['wall_s']} / n/a") + within
        conf = (sw.get("confirmed_line") or "none").replace("|", "/")
        lines.append(f"| {b} | {sw['trials']}, {sw['stopped_because']} | {rec.get('num_envs')} "
                     f"({rec.get('batch_size')} x {rec.get('num_minibatches')}) | {conf} | "
                     f"{user} | {nxt} | {wall} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budgets", nargs="+", default=["1.2GB", "1.3GB", "1.4GB", "1.5GB",
                                                    "1.6GB"])
    p.add_argument("--ratio-budget", default="1.2GB",
                   help="the budget also swept with --no-confirm")
    p.add_argument("--stop-at", default=None, help="UTC HH:MM: start no step after it")
    p.add_argument("--min-left", type=float, default=240.0,
                   help="seconds that must remain before --stop-at to start a step")
    p.add_argument("--results", default=str(HERE / "results" / "fidelity"))
    p.add_argument("--objective", default=None,
                   help="the sweep's --objective (max-envs aims at the edge, for the "
                        "'within one refinement step' criterion; default: vramtune's)")
    p.add_argument("--start", default="256", help="the sweep's --start ('' = the profile's)")
    p.add_argument("--line-runs", action="store_true",
                   help="step 4: the pick's user runs under B x 0.9 and the next size's "
                        "under B, 2 at once each")
    p.add_argument("--table", action="store_true",
                   help="only print the README table from the saved results")
    args = p.parse_args()
    if args.table:
        print(table(Path(args.results), args.budgets))
        print(line_table(Path(args.results), args.budgets))
        return
    global LINE_RUNS
    LINE_RUNS = args.line_runs
    now = dt.datetime.now(dt.UTC)
    if args.stop_at:
        hh, mm = (int(x) for x in args.stop_at.split(":"))
        stop_at = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    else:
        stop_at = now + dt.timedelta(days=1)
    SWEEP_OPTS[:] = (["--start", args.start] if args.start else []) + \
        (["--objective", args.objective] if args.objective else [])
    banner("fidelity: vramtune's recommendation vs the user's own long training (issue 10)")
    print(f"load average at start: {load_average()}; {os.cpu_count()} cores")
    root = Path(args.results)
    out = {b: one_budget(b, root, b == args.ratio_budget, stop_at, args.min_left)
           for b in args.budgets}
    save(root / "all.json", out)
    print(table(root, args.budgets))
    print(line_table(root, args.budgets))


if __name__ == "__main__":
    main()
