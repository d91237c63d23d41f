"""Can a reference trial measured in the same run normalise steps/s well enough to gate a
10-15% slowdown? Rounds of three trials at 64 envs, one after another: `quick`, the slowed
env of bench_gate.py (benchmarks/gate_envs/slow_fast.py: training ~10-15% slower, memory
unchanged), `quick` again; every other round beside a busy loop on one core. A same-run
reference works if quick/quick stays near 1 and slow/quick near 0.85-0.9 in every round.

    .venv/bin/python benchmarks/bench_same_run_ratio.py --rounds 6 --out /tmp/ratio

Figures in README.md ("Same-run reference").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_gate import profiles


def trial(profile: str, num_envs: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "trial", "--profile",
                           profile, "-n", str(num_envs), "--json", "--cache"],
                          capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.stdout.strip() else {"error": proc.stderr[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/same-run-ratio"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    slow = str(profiles(args.out)["slow"])
    rows = []
    for i in range(args.rounds):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if i % 2 else None
        try:
            row: dict[str, Any] = {"round": i, "busy": busy is not None,
                                   "load": os.getloadavg()[0]}
            for name, prof in (("q1", "quick"), ("s", slow), ("q2", "quick")):
                row[name] = trial(prof, args.num_envs).get("steps_per_s")
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
        rows.append(row)
        q1, s, q2 = row["q1"], row["s"], row["q2"]
        if q1 and s and q2:
            print(f"round {i} busy={row['busy']} load {row['load']:.1f}: quick {q1:,.0f}, "
                  f"slow {s:,.0f}, quick {q2:,.0f}; slow / mean quick {2 * s / (q1 + q2):.3f}, "
                  f"quick / quick {q2 / q1:.3f}", flush=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
