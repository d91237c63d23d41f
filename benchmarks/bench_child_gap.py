#!/usr/bin/env python
"""Does vramtune's trial child need more memory than the user's own training at one size?

Runs, alternately, vramtune's trial child (``python -P -m vramtune.measure.child SPEC``, its
own environment, a confirming run of N training steps) and ``user_train.py --child`` (the
plain brax script's training process itself, no wrapper), uncapped, one at a time, and reads
each process's exact peak RSS from the kernel (getrusage RUSAGE_CHILDREN of a fresh wrapper
per run: ru_maxrss is the kernel's high-water mark, not a sample). Peak VmData is each
process's own 20 ms sample. ``--user-env K=V`` adds variants of the user's run (a malloc or
XLA setting) to tell where run-to-run jitter comes from.

    python benchmarks/bench_child_gap.py --num-envs 512 --training-steps 20 --pairs 5 \
        --user-env MALLOC_ARENA_MAX=1

Why: the fifth fidelity round saw vramtune's confirming runs peak ~25-35 MiB above the user's
script in 2-3 runs each and suspected a process difference; this measures it with enough
runs to tell a difference from the ~25 MiB run-to-run spread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MIB = 2**20


def _run(cmd: list[str], env: dict[str, str]) -> tuple[str, int]:
    # stdin stays open until the child ends: vramtune's child exits on stdin EOF (its parent
    # watch), as it would if a sweep died.
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdin is not None
    out = proc.stdout.read()
    proc.wait()
    proc.stdin.close()
    return out, proc.returncode


def vramtune_child(num_envs: int, steps: int) -> dict:
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.process import child_command, child_env
    from vramtune.workload.profile import load_profile

    profile = load_profile("quick")
    shape = profile.shape_for(num_envs, 1)
    folder = Path(tempfile.mkdtemp(prefix="vt-gap-"))
    spec = {"profile": profile.to_dict(), "num_envs": num_envs, "batch_size": shape.batch_size,
            "num_minibatches": shape.num_minibatches, "rlimit_data_bytes": None,
            "result_path": str(folder / "result.json"), "compile_cache_dir": None,
            "training_steps": steps, "import_path": None}
    (folder / "spec.json").write_text(json.dumps(spec))
    out, code = _run([*child_command(), str(folder / "spec.json")],
                     child_env(plan_cap(None, None, None, devices=1)))
    result = json.loads((folder / "result.json").read_text()) if code == 0 else {}
    return dict(exit=code, peak_vmdata=result.get("host_peak_data_bytes"),
                steps=result.get("training_steps"), tail=out[-300:] if code else "")


def user_child(num_envs: int, steps: int, extra: dict[str, str]) -> dict:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", JAX_PLATFORMS="cpu",
               PYTHONUNBUFFERED="1", **extra)
    out, code = _run([sys.executable, str(HERE / "user_train.py"), "--child", "--num-envs",
                      str(num_envs), "--training-steps", str(steps), "--sample-interval", "0.02"],
                     env)
    final = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines()
             if line.startswith("@@final")]
    return dict(exit=code, peak_vmdata=final[-1]["peak_vmdata"] if final else None,
                steps=final[-1]["training_steps"] if final else None,
                tail=out[-300:] if code else "")


def one(args: argparse.Namespace) -> None:
    """A single run in this (fresh) process, so RUSAGE_CHILDREN holds that run only."""
    extra = dict(kv.split("=", 1) for kv in args.env)
    rec = (vramtune_child(args.num_envs, args.training_steps) if args.one == "vramtune"
           else user_child(args.num_envs, args.training_steps, extra))
    rec.update(who=args.one, env=args.env, num_envs=args.num_envs,
               maxrss_mib=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
               peak_vmdata_mib=round(rec["peak_vmdata"] / MIB, 1) if rec["peak_vmdata"] else None)
    print(json.dumps(rec), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=512)
    p.add_argument("--training-steps", type=int, default=20)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--user-env", action="append", default=[],
                   help="K=V: also run the user's script with this variable, --pairs times")
    p.add_argument("--out", default=None, help="append the JSON lines here too")
    p.add_argument("--one", choices=["vramtune", "user"], help=argparse.SUPPRESS)
    p.add_argument("--env", action="append", default=[], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        one(args)
        return 0
    sys.path.insert(0, str(HERE))
    from _common import banner

    banner("trial child vs user script, exact peak RSS")
    base = [sys.executable, __file__, "--num-envs", str(args.num_envs),
            "--training-steps", str(args.training_steps)]
    plan = []
    for _ in range(args.pairs):
        plan += [["--one", "vramtune"], ["--one", "user"]]
        plan += [["--one", "user", "--env", kv] for kv in args.user_env]
    rows = []
    for extra in plan:
        line = subprocess.run(base + extra, capture_output=True, text=True).stdout.strip()
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
        rows.append(json.loads(line))
    print("\n| process | runs | peak RSS mean (MiB) | sd | range | peak VmData mean (MiB) |")
    print("| --- | --- | --- | --- | --- | --- |")
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(" ".join([row["who"], *row["env"]]), []).append(row)
    for name, group in groups.items():
        rss = [r["maxrss_mib"] for r in group if r["exit"] == 0]
        data = [r["peak_vmdata_mib"] for r in group if r["peak_vmdata_mib"]]
        sd = f"{statistics.stdev(rss):.1f}" if len(rss) > 1 else "n/a"
        print(f"| {name} | {len(rss)}/{len(group)} | {statistics.mean(rss):.1f} | {sd} | "
              f"{min(rss):.1f}-{max(rss):.1f} | "
              f"{statistics.mean(data):.1f} |" if rss and data else f"| {name} | 0/{len(group)} | "
              "n/a | n/a | n/a | n/a |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
