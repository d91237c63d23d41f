"""The per-process CUDA overhead, measured once per GPU/driver/jaxlib, never guessed.

Emulating an 8 GB card on an 80 GB one caps JAX's pool at (8 GB - overhead) / total: the
CUDA context, cuBLAS/cuDNN handles and the like sit outside the pool but on the card.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

from vramtune import machine
from vramtune.machine import default_cache_dir
from vramtune.measure.nvml import Nvml
from vramtune.results.files import write_atomic

_PROBE = ("import jax, jax.numpy as jnp, sys, time; x = (jnp.ones((256, 256)) @ jnp.ones((256, 256)))"
          ".block_until_ready(); print('ready', flush=True); sys.stdin.read()")


def measure_overhead_bytes(nvml: Nvml, timeout_s: float = 120.0) -> int | None:
    """NVML per-process memory of a trivial JAX process (preallocation off), or None."""
    if not nvml.available or nvml.info is None:
        return None
    cache = default_cache_dir() / "overhead.json"
    key = f"{nvml.info.name}|{nvml.info.driver}|{machine.versions().get('jaxlib')}"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if known.get(key) is not None:
        return int(known[key])
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    baseline = nvml.device_used_bytes()
    proc = subprocess.Popen([sys.executable, "-P", "-c", _PROBE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    peak: int | None = None
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        ready, _, _ = select.select([proc.stdout], [], [], timeout_s)  # a hung CUDA start
        line = proc.stdout.readline() if ready else b""
        if b"ready" in line:
            for _ in range(10):
                per_pid = nvml.process_used_bytes() or {}
                value = per_pid.get(proc.pid)
                if value is None and baseline is not None:  # containers: host PIDs in NVML
                    used = nvml.device_used_bytes()
                    value = used - baseline if used is not None and used > baseline else None
                if value is not None:
                    peak = max(peak or 0, value)
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    if peak is not None:  # a failed probe is retried next time, never remembered as "none"
        known[key] = peak
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, json.dumps(known, indent=1))
    return peak
