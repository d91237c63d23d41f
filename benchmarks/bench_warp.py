"""MJX-Warp on this CPU, end to end, with the CLI as a user runs it.

On ``benchmarks/profiles/cheetah-warp-tiny.yaml`` (Playground's CheetahRun on Warp, tiny
settings; contacts from the first steps):

1. Warp's kernels cold and warm: two trials at 4 envs on a fresh kernel cache
   (WARP_CACHE_PATH), the record's kernel builds and compile time each.
2. Warp vs MJX's JAX path at the same size: the same profile with ``impl: jax``, one trial;
   env steps/s and memory (the data segment RLIMIT_DATA counts, peak RSS) side by side.
3. A sweep with the kernel cache warm (``--gpu-mem 3GB``): its wall and its pick.
4. ``emit-config`` of that run, then ``verify`` of the file (100 training steps, the emitted
   naconmax / njmax in force): no overflow; and ``verify`` of the same file with both
   capacities halved: an overflow, named.
5. The user's run of both files (``user_train_playground.py``: Playground's own loop, no
   vramtune, 100 training steps): Warp's own overflow lines counted in its output
   (``--steps 5`` runs this step alone on an --out that has the two files).

    .venv/bin/python benchmarks/bench_warp.py --out benchmarks/results/warp-2026-12-07

Everything each command printed is kept under --out; the summary is printed and written as
summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
PROFILE = HERE / "profiles" / "cheetah-warp-tiny.yaml"
BUDGET = "3GB"


def cli(out: Path, name: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``vramtune ARGS``; keep its output as OUT/NAME.{out,err}; (exit code, stdout, wall s)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200", **(env or {})})
    wall = time.perf_counter() - start
    (out / f"{name}.out").write_text(proc.stdout)
    (out / f"{name}.err").write_text(proc.stderr)
    print(f"{name}: exit {proc.returncode}, {wall:.0f} s", flush=True)
    return proc.returncode, proc.stdout, wall


def record(stdout: str) -> dict[str, Any]:
    try:
        data = json.loads(stdout)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


KEEP = ("status", "num_envs", "batch_size", "compile_s", "steps_per_s", "wall_s",
        "host_peak_data_bytes", "host_peak_rss_bytes", "training_steps", "error_message")


def trial_figures(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k in KEEP or k.startswith("warp_")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", default="1,2,3,4,5",
                        help="which numbered steps to run (4 and 5 read the files 3 and 4 left)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    steps = {int(n) for n in args.steps.split(",")}
    path = out / "summary.json"
    summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    summary["profile"] = str(PROFILE.relative_to(HERE.parent))
    # one kernel cache for the warm runs, outside the repository (binaries)
    kernels = {"WARP_CACHE_PATH": str(Path(tempfile.gettempdir()) / "bench-warp-kernels")}
    trial = ("trial", "--profile", str(PROFILE), "--num-envs", "4", "--gpu-mem", BUDGET, "--json")
    if 1 in steps:  # cold, then warm kernels, on a cache of their own
        for name in ("cold", "warm"):
            _, stdout, wall = cli(out, f"trial-{name}", *trial,
                                  env={"WARP_CACHE_PATH": tempfile.mkdtemp(prefix="warp-")}
                                  if name == "cold" else kernels)
            summary[f"trial_{name}"] = {**trial_figures(record(stdout)), "cli_wall_s": wall}
    if 2 in steps:  # the same workload on MJX's JAX path
        data = yaml.safe_load(PROFILE.read_text())
        data.update(name="cheetah-jax-tiny", impl="jax")
        jax_profile = out / "cheetah-jax-tiny.yaml"
        jax_profile.write_text(yaml.safe_dump(data, sort_keys=False))
        _, stdout, wall = cli(out, "trial-jax", "trial", "--profile", str(jax_profile),
                              "--num-envs", "4", "--gpu-mem", BUDGET, "--json")
        summary["trial_jax"] = {**trial_figures(record(stdout)), "cli_wall_s": wall}
    run_dir = out / "sweep-run"
    if 3 in steps:  # a sweep, kernels warm
        code, stdout, wall = cli(out, "sweep", "sweep", "--profile", str(PROFILE), "--gpu-mem",
                                 BUDGET, "--out", str(run_dir), "--json", env=kernels)
        sweep = record(stdout)
        summary["sweep"] = {"exit": code, "wall_s": wall, "recommended": sweep.get("recommended"),
                            "confirmed": sweep.get("confirmed"), "trials": sweep.get("trials")}
    if 4 in steps:  # emit, verify, verify with the capacities halved
        emit_and_verify(out, run_dir, kernels, summary)
    if 5 in steps:
        summary["user_runs"] = user_runs(out)
    path.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


def emit_and_verify(out: Path, run_dir: Path, kernels: dict[str, str],
                    summary: dict[str, Any]) -> None:
    tuned = out / "tuned.yaml"
    code, _, _ = cli(out, "emit", "emit-config", str(run_dir), "--gpu-mem", BUDGET, "-o", str(tuned))
    summary["emit_exit"] = code
    if code != 0:
        return
    emitted = yaml.safe_load(tuned.read_text())
    capacities = dict(emitted["environment"].get("env_kwargs") or {})
    summary["emitted_capacities"] = capacities
    summary["emitted_comments"] = [line for line in tuned.read_text().splitlines()
                                   if line.startswith("# MJX-Warp")]
    halved = out / "tuned-halved.yaml"
    emitted["environment"]["env_kwargs"] = {k: v // 2 for k, v in capacities.items()}
    halved.write_text("\n".join(line for line in tuned.read_text().splitlines()
                                if line.startswith("#")) + "\n" + yaml.safe_dump(emitted))
    for name, path in (("verify", tuned), ("verify_halved", halved)):
        code, stdout, wall = cli(out, name.replace("_", "-"), "verify", str(path), "--profile",
                                 str(PROFILE), "--gpu-mem", BUDGET, "--steps", "100", "--json",
                                 env=kernels)
        summary[name] = {"exit": code, "cli_wall_s": wall, **trial_figures(record(stdout))}


def user_runs(out: Path) -> dict[str, Any]:
    """Playground's own training of each file, 100 steps: its exit and Warp's overflow lines."""
    runs = {}
    for name in ("tuned", "tuned-halved"):
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(HERE / "user_train_playground.py"),
                               str(out / f"{name}.yaml"), "--training-steps", "100"],
                              capture_output=True, text=True)
        text = proc.stdout + proc.stderr
        (out / f"user-{name}.log").write_text(text)
        lines = [line for line in text.splitlines() if "overflow - please increase" in line]
        runs[name] = {"exit": proc.returncode, "wall_s": time.perf_counter() - start,
                      "overflow_lines": len(lines), "first": lines[0] if lines else None,
                      "last_line": text.strip().splitlines()[-1:] or None}
        print(f"user run {name}: exit {proc.returncode}, {len(lines)} overflow lines", flush=True)
    return runs


if __name__ == "__main__":
    raise SystemExit(main())
