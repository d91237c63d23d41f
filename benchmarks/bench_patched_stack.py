#!/usr/bin/env python
"""Does brax 0.14.2 patched on the newest jax train like brax 0.14.2 on the jax it was made for?

The user's training (benchmarks/user_train.py: plain ppo.train, evaluation on, under an
RLIMIT_DATA cap) at one size, interleaved A, B, A, B, ...:

  A: the tested set's python (jax 0.9.2 + brax 0.14.2), unpatched;
  B: a plain install's python (jax 0.10.2 + brax 0.14.2), with --patch-brax, the two lines the
     README gives users (`import vramtune.compat; vramtune.compat.patch_brax()`).

With --force-arm, a third arm C: the tested set's python with vramtune's stand-ins forced in
place of jax 0.9.2's own functions (same jax as A): the patch's own effect, apart from the
jax versions'.

Reports each run's peak RSS, peak data segment and median training steps/s, then B/A of the
medians beside each side's own spread (max/min over its runs): the patch is sound where B/A
sits inside the run-to-run jitter.

    python benchmarks/bench_patched_stack.py --python-a .venv/bin/python \
        --python-b .venv-newest/bin/python --rounds 3 --num-envs 256 --budget-bytes 1.3e9
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _common import banner, load_average, save

HERE = Path(__file__).resolve().parent


def run(python: str, flags: list[str], args: argparse.Namespace) -> dict:
    cmd = [python, str(HERE / "user_train.py"), "--num-envs", str(args.num_envs),
           "--training-steps", str(args.training_steps), "--budget-bytes", str(args.budget_bytes),
           *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"status": "error", "message": out.stderr[-500:]}
    r = json.loads(lines[-1])
    sps = r.get("sps") or []
    steady = sps[1:] or sps  # the first epoch's rate includes compilation
    return {"status": r["status"], "message": r.get("message"), "versions": r.get("versions"),
            "peak_rss": r.get("peak_rss"), "peak_vmdata": r.get("peak_vmdata"),
            "training_steps": r.get("training_steps"), "wall_s": r.get("wall_s"),
            "sps_median": statistics.median(steady) if steady else None}


def spread(values: list[float]) -> float | None:
    return max(values) / min(values) if values and min(values) > 0 else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python-a", required=True, help="the tested set's python (unpatched)")
    p.add_argument("--python-b", required=True, help="the newest stack's python (patched)")
    p.add_argument("--force-arm", action="store_true",
                   help="add arm C: python A with the stand-ins forced (the patch alone)")
    p.add_argument("--no-b", action="store_true", help="leave arm B out (with --force-arm)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--training-steps", type=int, default=100)
    p.add_argument("--budget-bytes", type=float, default=1.3e9)
    p.add_argument("--out", default=str(HERE / "results" / "patched_stack.json"))
    args = p.parse_args()
    banner("brax 0.14.2 patched on the newest jax vs unpatched on the tested jax")
    print(f"load before: {load_average()}")
    arms = [("A", args.python_a, [])]
    if not args.no_b:
        arms.append(("B", args.python_b, ["--patch-brax"]))
    if args.force_arm:
        arms.append(("C", args.python_a, ["--force-stand-ins"]))
    runs: dict[str, list[dict]] = {side: [] for side, _, _ in arms}
    for i in range(args.rounds):
        for side, python, flags in arms:
            r = run(python, flags, args)
            runs[side].append(r)
            v = r.get("versions") or {}
            print(f"round {i + 1} {side}: {r['status']}, jax {v.get('jax')}, patched "
                  f"{v.get('patched')}, peak RSS {r.get('peak_rss') or 0:,} B, peak VmData "
                  f"{r.get('peak_vmdata') or 0:,} B, {r.get('sps_median') or 0:,.0f} steps/s, "
                  f"{r.get('training_steps')} steps, {r.get('wall_s')} s", flush=True)
    summary: dict[str, dict] = {}
    for side in runs:
        if side == "A":
            continue
        for key in ("peak_rss", "peak_vmdata", "sps_median"):
            a = [r[key] for r in runs["A"] if r["status"] == "ok" and r.get(key)]
            b = [r[key] for r in runs[side] if r["status"] == "ok" and r.get(key)]
            if a and b:
                s = {"a_median": statistics.median(a), "x_median": statistics.median(b),
                     "x_over_a": statistics.median(b) / statistics.median(a),
                     "a_spread": spread(a), "x_spread": spread(b)}
                summary[f"{side}/A {key}"] = s
                print(f"{key}: {side}/A {s['x_over_a']:.3f} (A spread {s['a_spread']:.3f}, "
                      f"{side} spread {s['x_spread']:.3f} max/min)")
    print(f"load after: {load_average()}")
    save(Path(args.out), {"args": vars(args), "runs": runs, "summary": summary})
    ok = all(r["status"] == "ok" for side in runs.values() for r in side)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
