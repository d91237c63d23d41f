"""Each proof run beside its size's search trial, from recorded bench_search rounds.

For every size with a search trial that fitted and a proof run (confirm or repeat), prints
the trial's data-segment peak and training steps, the proof's status, peak, steps and cap,
and the difference of the two peaks (MiB); then the mean and sd of that difference over the
proofs that passed. A proof that ran out of memory records the last sampled peak, below the
allocation that failed, and the training steps of its last progress report.

    python benchmarks/proof_vs_trial.py benchmarks/results/search-2026-11-2*/search.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

MIB = 2**20


def _mib(x: float | None) -> int | None:
    return None if x is None else round(x / MIB)


def main(paths: list[str]) -> None:
    passed: list[int] = []
    for path in paths:
        runs = json.loads(Path(path).read_text())["runs"]
        for run in runs:
            by_size: dict[int, list[dict]] = {}
            for t in run.get("results") or []:
                by_size.setdefault(t["num_envs"], []).append(t)
            for n, rows in sorted(by_size.items()):
                trial = next((t for t in rows if t["purpose"] == "search" and t["status"] == "ok"),
                             None)
                if trial is None:
                    continue
                for proof in (t for t in rows if t["purpose"] in ("confirm", "repeat")):
                    a, b = _mib(trial["host_peak_data_bytes"]), _mib(proof["host_peak_data_bytes"])
                    diff = None if a is None or b is None else b - a
                    print(f"{Path(path).parent.name} {run['budget']:>6} {n:>5}: trial {a} MiB "
                          f"({trial['training_steps']} steps) | {proof['purpose']} "
                          f"{proof['status']} {b} MiB ({proof['training_steps']} steps) under "
                          f"{_mib(proof['cap_bytes'])} MiB | {diff:+} MiB" if diff is not None
                          else f"{run['budget']} {n}: no peak")
                    if proof["status"] == "ok" and diff is not None:
                        passed.append(diff)
    if len(passed) > 1:
        print(f"passed proofs: {len(passed)}, peak minus trial's: mean "
              f"{statistics.mean(passed):+.1f} MiB, sd {statistics.stdev(passed):.1f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])
