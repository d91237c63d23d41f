#!/usr/bin/env python
"""One size, one cap: a search trial against confirming runs, interleaved (rotated each
round), all in the executor's warm standby: the sweep's proof (a fixed length of 50 steps, a
floor at the search trial's length, a progress report and evaluation every 2 steps) and the
same with 25 steps. Prints each run's data-segment peak, steps, evaluations and wall as JSON
lines: does the way a proof runs move its peak? The one-step arm (a search trial, a 25-step
proof: an epoch per training step) is the tool before `4da491d`, as the recorded results ran
it; since then every trial's epoch is at least 2 steps and both arms read as the others.

    .venv/bin/python benchmarks/proof_vs_search_run.py 2048 3 4e9   # num_envs, rounds, cap bytes
    .venv/bin/python benchmarks/proof_vs_search_run.py 2048 3 4e9 50 25 250   # proof lengths
"""

from __future__ import annotations

import json
import sys

from vramtune.measure.cap import plan_cap
from vramtune.measure.executor import LocalExecutor
from vramtune.measure.trial import TrialRequest
from vramtune.records import Purpose
from vramtune.workload.profile import load_profile

MIB = 2**20


def main(num_envs: int, rounds: int, cap_bytes: int, lengths: list[int]) -> None:
    executor = LocalExecutor(plan_cap(cap_bytes, None, None), standby=True)
    search = TrialRequest(load_profile("quick"), num_envs, budget_bytes=cap_bytes)
    try:
        first = executor.run(search)  # starts the standby; its length is the proof's floor
        print(json.dumps({"kind": "prime", "peak_mib": (first.host_peak_data_bytes or 0) / MIB,
                          "steps": first.training_steps}), flush=True)
        def proof(steps: int) -> TrialRequest:
            # before 4da491d the child reported every ceil(steps / 25) steps: 50 -> 2 (as the
            # sweep's), 25 -> 1, 250 -> 10 (a user's epochs are longer still); now
            # wire.confirm_epoch_steps, at least 2
            return TrialRequest(load_profile("quick"), num_envs, budget_bytes=cap_bytes,
                                purpose=Purpose.CONFIRM, training_steps=steps,
                                min_training_steps=first.training_steps)

        kinds = [("search", search)] + [(f"proof-{n}", proof(n)) for n in lengths]
        for i in range(rounds):
            order = kinds[i % len(kinds):] + kinds[:i % len(kinds)]  # rotated each round
            for kind, request in order:
                r = executor.run(request)
                print(json.dumps({"kind": kind, "status": str(r.status),
                                  "peak_mib": (r.host_peak_data_bytes or 0) / MIB,
                                  "steps": r.training_steps, "evals": r.evals,
                                  "wall": r.wall_s}), flush=True)
    finally:
        executor.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(float(sys.argv[3])),
         [int(x) for x in sys.argv[4:]] or [50, 25])
