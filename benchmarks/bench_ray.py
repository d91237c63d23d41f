"""Issue 14: the same sweep with the local executor and on Ray (a cluster of this machine's
CPUs, started by the sweep), wall and rounds; then the rounds and wall 8 workers would need,
replayed from the trial times the local sweep recorded.

The sweep: `quick` under a 1.3 GB host-memory cap, 128..2048 envs (2048 runs out of memory),
the default predictive search with one refinement trial, then the repeat of the pick. Both
run with the persistent compile cache off: a warm cache skips compilation and its memory, so
an executor that ran second would look faster and leaner for a reason that is not the
executor. On this machine the Ray cluster is its 2 CPUs: two trials at once share them, are
flagged shared, and the size the objective compares runs again alone.

    .venv/bin/python benchmarks/bench_ray.py [--workers 8]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from _common import banner

from vramtune import api
from vramtune.measure.wire import TrialStarted
from vramtune.records import Purpose, TrialResult
from vramtune.tune.boundary import past_boundary
from vramtune.tune.request import SweepConfig
from vramtune.tune.sweep import next_steps, trial_request

SWEEP = {"gpu_mem": "1.3GB", "start": 128, "max_envs": 2048, "refine": 1, "cache": False,
         "confirm": False}


@dataclass
class Measured:
    executor: str
    parallel: int = 1
    setup_s: float = 0.0  # options checked, cap planned; on Ray: cluster started and probed
    wall_s: float = 0.0  # setup plus every round
    rounds: int = 0
    results: list[TrialResult] = field(default_factory=list)
    round_walls: list[float] = field(default_factory=list)


def measure(executor: str, out: str) -> tuple[Measured, SweepConfig]:
    m = Measured(executor)
    round_started = [0.0]
    last = ["result"]

    def on_event(event: object) -> None:
        if isinstance(event, TrialStarted) and last[0] == "result":
            if m.rounds:
                m.round_walls.append(time.perf_counter() - round_started[0])
            m.rounds += 1
            round_started[0] = time.perf_counter()
            last[0] = "started"

    def on_trial(step: object, result: TrialResult) -> None:
        last[0] = "result"

    started = time.perf_counter()
    prepared = api.prepare_sweep("quick", out=out, executor=executor, **SWEEP)
    m.parallel = prepared.executor.parallel
    m.setup_s = time.perf_counter() - started
    outcome = api.run_prepared(prepared, on_event, on_trial)
    m.wall_s = time.perf_counter() - started
    m.round_walls.append(time.perf_counter() - round_started[0])
    m.results = list(outcome.results)
    return m, prepared.config


def stand_in(config: SweepConfig, measured: Sequence[TrialResult], n: int) -> TrialResult:
    """What a trial of ``n`` envs gives, from the measured ones: itself if measured (alone,
    as a worker of its own would run it), else the nearest measured size (log2 distance) on
    the same side of the measured boundary, its wall time and outcome carried over."""
    limit = config.limit_bytes
    alone = [r for r in measured if not r.shared_run] or list(measured)
    exact = [r for r in alone if r.num_envs == n]
    if exact:
        return exact[0]
    failing = [r.num_envs for r in alone if past_boundary(r, limit)]
    edge = min(failing, default=None)
    side = [r for r in alone if (edge is not None and n >= edge) == past_boundary(r, limit)]
    pool = side or alone
    near = min(pool, key=lambda r: abs(math.log2(r.num_envs) - math.log2(n)))
    shape = config.profile.shape_for(n, config.settings.devices)
    return replace(near, num_envs=n, batch_size=shape.batch_size if shape else near.batch_size,
                   num_minibatches=shape.num_minibatches if shape else near.num_minibatches,
                   notes=("estimated",))


def replay(config: SweepConfig, records: Sequence[TrialResult], workers: int
           ) -> tuple[int, float, list[int], int]:
    """(rounds, the sum of each round's longest trial, trials per round, trials estimated)
    had the sweep run ``workers`` trials at once, each on a device of its own (as long as it
    took alone here). The planner is pure: the same outcomes give the same rounds; a size
    the planner asks for that was never measured stands in by its nearest measured size."""
    results: list[TrialResult] = []
    rounds, wall, sizes, estimated = 0, 0.0, [], 0
    while steps := next_steps(config, results, config.space(), workers):
        batch = []
        for step in steps:
            assert step.num_envs is not None
            record = stand_in(config, records, step.num_envs)
            estimated += record.notes == ("estimated",)
            purpose = trial_request(config, results, step).purpose
            batch.append(replace(record, purpose=purpose, shared_run=False))
        rounds += 1
        sizes.append(len(batch))
        wall += max(r.wall_s or 0.0 for r in batch)
        results.extend(batch)
        if rounds > 50:
            raise SystemExit("the replay does not converge")
    return rounds, wall, sizes, estimated


def show(m: Measured) -> None:
    trials = ", ".join(f"{r.num_envs}{'' if r.purpose is Purpose.SEARCH else ' ' + r.purpose} "
                       f"{r.status} {r.wall_s or 0:.1f}s" for r in m.results)
    busy = sum(r.wall_s or 0 for r in m.results)
    print(f"{m.executor} ({m.parallel} at once): wall {m.wall_s:.1f} s (setup {m.setup_s:.1f} s), "
          f"{m.rounds} rounds, {len(m.results)} trials, sum of trial walls {busy:.1f} s")
    print(f"  rounds' walls: {', '.join(f'{w:.1f}' for w in m.round_walls)} s")
    print(f"  trials: {trials}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    banner("Ray executor vs local (issue 14)")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    print(f"load average at start: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        local, config = measure("local", f"{tmp}/local")
        show(local)
        print(f"load average: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
        on_ray, _ = measure("ray", f"{tmp}/ray")
        show(on_ray)
    print(f"load average at end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    same = sorted((r.num_envs, str(r.purpose), str(r.status)) for r in local.results) == \
        sorted((r.num_envs, str(r.purpose), str(r.status)) for r in on_ray.results)
    print(f"same sizes and statuses: {same}")
    print(f"Ray / local wall: {on_ray.wall_s / local.wall_s:.2f}x; rounds {local.rounds} -> "
          f"{on_ray.rounds}")
    for workers in sorted({1, on_ray.parallel, args.workers}):
        rounds, makespan, sizes, estimated = replay(config, local.results, workers)
        print(f"replayed from the local trial times, {workers} worker(s): {rounds} rounds "
              f"{sizes} ({estimated} trial(s) stood in by the nearest measured size), trial "
              f"time {makespan:.1f} s; plus Ray's setup here ({on_ray.setup_s:.1f} s): "
              f"{makespan + on_ray.setup_s:.1f} s vs local {local.wall_s:.1f} s")


if __name__ == "__main__":
    main()
