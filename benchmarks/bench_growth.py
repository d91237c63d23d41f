#!/usr/bin/env python
"""Growth over a run: the peak `vramtune explain --num-timesteps` predicts for a run whose one
epoch is N training steps, against a plain brax `ppo.train` of that run (`user_train.py`, run
the way a user runs it, one at a time, uncapped), and XLA's own count of the epoch.

The workload makes the epoch's stacked loss metrics large beside everything else: `quick`'s
fast env at 64 envs, 16 updates x 64 minibatches of one sample (unroll 1), 8 hidden units,
episode_length 10: 12 loss metrics x 16 x 64 x 4 B = 48 KiB a training step.

    .venv/bin/python benchmarks/bench_growth.py [--steps 2,8000,12000] [--out DIR]

Prints one line per run length: the trial's prediction (its measured peak at its 2-step
epochs + the jaxpr's bytes per step x the extra steps) and the user run's peak VmData.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ENVS, BATCH, MINIBATCHES, UNROLL, UPDATES, HIDDEN, EPISODE = 64, 1, 64, 1, 16, 8, 10
PER_TRAINING_STEP = BATCH * MINIBATCHES * UNROLL  # env steps


def profile_file(folder: Path) -> Path:
    from vramtune.workload.profile import builtin_profiles

    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    data.update(name="quick-growth", episode_length=EPISODE, num_envs=ENVS,
                network={"policy_hidden_layer_sizes": [HIDDEN],
                         "value_hidden_layer_sizes": [HIDDEN]})
    data["ppo"].update(batch_size=BATCH, num_minibatches=MINIBATCHES, unroll_length=UNROLL,
                       num_updates_per_batch=UPDATES)
    path = folder / "quick-growth.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def user_run(steps: int) -> dict:
    cmd = [sys.executable, str(HERE / "user_train.py"), "--num-envs", str(ENVS),
           "--batch-size", str(BATCH), "--num-minibatches", str(MINIBATCHES),
           "--unroll-length", str(UNROLL), "--num-updates-per-batch", str(UPDATES),
           "--hidden", str(HIDDEN), "--episode-length", str(EPISODE),
           "--num-timesteps", str(steps * PER_TRAINING_STEP), "--num-evals", "2"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("{")))


def main(argv: list[str]) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--steps", default="2,8000,12000")
    args.add_argument("--out", default=None)
    opts = args.parse_args(argv)
    lengths = [int(s) for s in opts.steps.split(",")]
    folder = Path(opts.out or tempfile.mkdtemp(prefix="bench-growth-"))
    folder.mkdir(parents=True, exist_ok=True)
    from vramtune import api
    from vramtune.measure.trial import TrialRequest, run_trial
    from vramtune.results.store import RunHeader, append_result, create_run
    from vramtune.workload.profile import load_profile

    profile = load_profile(str(profile_file(folder)))
    trial = run_trial(TrialRequest(profile, ENVS))
    run = folder / "run"
    create_run(run, RunHeader(profile.name, profile.hash, profile.to_dict(), None, 0.1, {},
                              {})).release()
    append_result(run, trial)
    print(f"trial: {trial.status}, peak {trial.host_peak_data_bytes / 1e6:,.1f} MB, epochs of "
          f"{trial.ledger_epoch_steps} steps, {trial.ledger_stacked_bytes_per_step:,} B "
          f"stacked a step", flush=True)
    rows = []
    for steps in lengths:
        growth = api.explain(run, num_timesteps=steps * PER_TRAINING_STEP, num_evals=2).growth
        user = user_run(steps)
        rows.append({"steps": steps, "predicted_bytes": growth.predicted_peak_bytes,
                     "growth_bytes": growth.growth_bytes, "user_status": user["status"],
                     "user_peak_vmdata_bytes": user.get("peak_vmdata"),
                     "user_wall_s": user.get("wall_s")})
        measured = user.get("peak_vmdata")
        print(f"{steps:>6} steps: predicted {growth.predicted_peak_bytes / 1e6:,.1f} MB "
              f"(+{growth.growth_bytes / 1e6:,.1f}), user run {user['status']} "
              f"{measured / 1e6 if measured else float('nan'):,.1f} MB "
              f"(predicted / measured {growth.predicted_peak_bytes / measured:.3f})"
              if measured else f"{steps}: user run {user['status']}", flush=True)
    (folder / "growth.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
