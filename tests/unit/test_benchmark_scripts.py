"""The benchmark scripts' helpers that read the package's records run against the package as it
is (they import each other as scripts do, from benchmarks/): a moved field fails here, not the
day someone reruns a benchmark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import bench_ray, replay_gpu
from vramtune.records import Status, TrialResult
from vramtune.results.store import load_run
from vramtune.tune.request import SweepRequest, resolve

header = load_run('../tests/golden/runs/cpu-quick-1.3GB-load.jsonl').header
space = replay_gpu.space_of(header, None)
assert (space.start, space.max_envs) == (128, 2048), space
config = resolve(SweepRequest('quick', int(1.3e9)))
measured = TrialResult(status=Status.OK, profile='quick', profile_hash='x', num_envs=128,
                       batch_size=128, num_minibatches=4, unroll_length=10, backend='cpu',
                       steps_per_s=1.0, host_peak_data_bytes=5 * 10**8,
                       host_peak_rss_bytes=5 * 10**8)
assert bench_ray.stand_in(config, [measured], 256).num_envs == 256
"""


def test_the_replay_helpers_read_todays_records():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT / "benchmarks",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
