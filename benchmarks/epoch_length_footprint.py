#!/usr/bin/env python
"""XLA's own count of brax's training epoch at 1, 2 and 10 training steps per epoch (a search
trial ran 1 before `4da491d`, a confirming run 2, a user's run of 100 steps 10): does the
epoch's length (the scan's trip count) change the buffers it holds? Since `4da491d` the probe
compiles at least 2 steps an epoch, so the 1-step line needs that commit's parent. Compiles
as the footprint probe does (``measure.footprint``: brax's own ``ppo.train`` up to its first
epoch, compiled, not run).

    .venv/bin/python benchmarks/epoch_length_footprint.py 1024   # num_envs
"""

from __future__ import annotations

import dataclasses
import sys

import jax
from brax.training.agents.ppo import train as ppo

from vramtune.measure import footprint
from vramtune.workload.profile import load_profile

MIB = 2**20


def main(num_envs: int) -> None:
    footprint._intercept(jax)  # the probe's own hook: compile the epoch, read it, stop
    profile = load_profile("quick")
    for steps in (1, 2, 10):
        measure = dataclasses.replace(profile.measure, steps_per_epoch=steps)
        f = footprint._one_size(ppo, dataclasses.replace(profile, measure=measure),
                                num_envs, num_envs, 4)
        print(f"{num_envs} envs, {steps} steps/epoch: arguments {f.argument_bytes / MIB:.1f}, "
              f"outputs {f.output_bytes / MIB:.1f}, aliased {f.alias_bytes / MIB:.1f}, "
              f"temporaries {f.temp_bytes / MIB:.1f} MiB; compile {f.compile_s:.1f} s",
              flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
