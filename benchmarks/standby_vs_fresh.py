#!/usr/bin/env python
"""One size, one cap: a search trial in the executor's warm standby (imports done while the
previous trial compiled, as every search trial after the first runs) against a fresh process
(as a proof run starts), interleaved. Prints each run's data-segment peak and wall, as JSON
lines: does the way a run starts move its peak?

    .venv/bin/python benchmarks/standby_vs_fresh.py 1024 5 2e9   # num_envs, pairs, cap bytes
"""

from __future__ import annotations

import json
import sys

from vramtune.measure.cap import plan_cap
from vramtune.measure.executor import LocalExecutor
from vramtune.measure.trial import TrialRequest
from vramtune.workload.profile import load_profile

MIB = 2**20


def main(num_envs: int, pairs: int, cap_bytes: int) -> None:
    cap = plan_cap(cap_bytes, None, None)
    warm = LocalExecutor(cap, standby=True)
    fresh = LocalExecutor(cap, standby=False)
    request = TrialRequest(load_profile("quick"), num_envs, budget_bytes=cap_bytes)
    try:
        first = warm.run(request)  # starts the standby the next warm run uses
        print(json.dumps({"kind": "prime", "peak_mib": (first.host_peak_data_bytes or 0) / MIB}))
        for i in range(pairs):
            order = [("standby", warm), ("fresh", fresh)]
            for kind, executor in order if i % 2 == 0 else order[::-1]:
                r = executor.run(request)
                print(json.dumps({"kind": kind, "status": str(r.status),
                                  "peak_mib": (r.host_peak_data_bytes or 0) / MIB,
                                  "steps": r.training_steps, "wall": r.wall_s,
                                  "notes": list(r.notes or [])}), flush=True)
    finally:
        warm.close()
        fresh.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(float(sys.argv[3])))
