#!/usr/bin/env python
"""The ledger's prediction for a size never run, against that size run: Playground's
CartpoleBalance (MJX, JAX impl on a CPU) measured at two sizes, twice each, interleaved; the
peak of a size between them and of one past them predicted from those four trials
(`vramtune explain --num-envs N`: a line through the two sizes, the stated spread the
largest difference between two runs of one size), then each run once and compared.

    .venv/bin/python benchmarks/bench_ledger_predict.py [--fit 16,64] [--check 32,128] [--out DIR]

Every trial is cold (no compile cache: a warm compile peaks lower) and uncapped, one at a
time. Small PPO settings (batch 32 x 4 minibatches x unroll 10 at 32 envs, growing with
num_envs), evaluation on (16 eval envs, episodes of 100 steps).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def profile():
    from vramtune.workload.profile import profile_from_dict

    return profile_from_dict({
        "name": "cartpole-ledger", "env": "playground:CartpoleBalance", "num_envs": 32,
        "episode_length": 100, "scaling": "hold-num-minibatches",
        "ppo": {"batch_size": 32, "num_minibatches": 4, "unroll_length": 10,
                "num_updates_per_batch": 1, "num_eval_envs": 16},
        "measure": {"warmup_intervals": 1, "min_intervals": 2, "min_window_s": 1.0,
                    "max_window_s": 3.0}}, source="bench_ledger_predict")


def main(argv: list[str]) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--fit", default="16,64")
    args.add_argument("--check", default="32,128")
    args.add_argument("--out", default=None)
    opts = args.parse_args(argv)
    fit = [int(s) for s in opts.fit.split(",")]
    check = [int(s) for s in opts.check.split(",")]
    folder = Path(opts.out or tempfile.mkdtemp(prefix="bench-ledger-"))
    folder.mkdir(parents=True, exist_ok=True)
    from vramtune import api
    from vramtune.measure.trial import TrialRequest, run_trial
    from vramtune.results.store import RunHeader, append_result, create_run

    prof = profile()
    run = folder / "fit"
    create_run(run, RunHeader(prof.name, prof.hash, prof.to_dict(), None, 0.1, {},
                              {})).release()
    rows = []
    for n in fit + fit:  # interleaved: 16, 64, 16, 64
        r = run_trial(TrialRequest(prof, n))
        append_result(run, r)
        rows.append({"num_envs": n, "role": "fit", "status": str(r.status),
                     "peak_bytes": r.line_figure_bytes, "ledger_error": r.ledger_error})
        print(f"fit {n}: {r.status} {(r.line_figure_bytes or 0) / 1e6:,.1f} MB", flush=True)
    for n in check:
        expl = api.explain(run, num_envs=n)
        card = next(f for f in expl.fits if f.field == "card_peak_bytes")
        r = run_trial(TrialRequest(prof, n))
        measured = r.line_figure_bytes
        predicted, spread = expl.shown_peak_bytes, card.residual_bytes
        inside = (None if measured is None or predicted is None or spread is None
                  else abs(measured - predicted) <= spread)
        rows.append({"num_envs": n, "role": "check", "status": str(r.status),
                     "peak_bytes": measured, "predicted_bytes": predicted,
                     "spread_bytes": spread, "within_spread": inside})
        print(f"check {n}: predicted {predicted / 1e6:,.1f} +- {(spread or 0) / 1e6:,.1f} MB, "
              f"measured {r.status} {(measured or 0) / 1e6:,.1f} MB, within: {inside}",
              flush=True)
    (folder / "predict.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
