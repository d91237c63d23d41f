"""Issue 3 benchmarks: boundary search cost, orchestration overhead, compile-cache speed-up.

1. `quick` on CPU under a cap that the 4th doubling (2048 envs from 128) exceeds, cold
   compile cache: trials needed to find the boundary vs (doublings + 3).
2. Orchestration overhead: sweep process wall minus the sum of trial walls.
3. The same uncapped sweep twice with a fresh compile cache: cold vs warm wall.

    .venv/bin/python benchmarks/bench_sweep.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _common import banner


def sweep(args: list[str], cache_home: str) -> tuple[dict, float]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "vramtune.cli.app", "sweep", "--json", *args],
                          capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": cache_home})
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), wall


def main() -> None:
    banner("sweep benchmarks (quick profile)")
    with tempfile.TemporaryDirectory() as tmp:
        data, wall = sweep(["--start", "128", "--max-envs", "4096", "--gpu-mem", "1.3GB",
                            "--no-cache", "--out", f"{tmp}/capped"], f"{tmp}/cache0")
        sizes = [(r["num_envs"], r["status"]) for r in data["results"]]
        doublings = sum(1 for n, _ in sizes if n & (n - 1) == 0)
        trial_wall = sum(r["wall_s"] or 0 for r in data["results"])
        print(f"capped sweep (1.3 GB, cold cache): {len(sizes)} trials {sizes}")
        print(f"  doubling trials {doublings}, refinement {len(sizes) - doublings}: "
              f"{len(sizes)} <= {doublings} + 3: {len(sizes) <= doublings + 3}")
        print(f"  stopped because: {data['stopped_because']}")
        print(f"  recommended num_envs: {(data['recommended'] or {}).get('num_envs')}")
        print(f"  orchestration overhead: sweep wall {wall:.1f} s - trials {trial_wall:.1f} s = "
              f"{wall - trial_wall:.1f} s ({(wall - trial_wall) / wall:.1%})")
        cache_home = f"{tmp}/cache1"
        walls = []
        for label in ("cold", "warm"):
            data, wall = sweep(["--start", "128", "--max-envs", "1024",
                                "--out", f"{tmp}/{label}"], cache_home)
            compile_total = sum(r["compile_s"] or 0 for r in data["results"])
            walls.append(wall)
            print(f"uncapped sweep 128..1024, {label} compile cache: wall {wall:.1f} s, "
                  f"sum of compile_s {compile_total:.1f} s, {len(data['results'])} trials")
        print(f"compile cache speed-up: {walls[0] / walls[1]:.2f}x sweep wall (cold/warm)")
        # Warm standby (the next trial's process imports while this one compiles), warm
        # cache both ways, interleaved twice.
        by_mode: dict[str, list[float]] = {"--standby": [], "--no-standby": []}
        overheads: dict[str, list[float]] = {"--standby": [], "--no-standby": []}
        for i in range(2):
            for flag in by_mode:
                data, wall = sweep(["--start", "128", "--max-envs", "1024", flag,
                                    "--out", f"{tmp}/sb{i}{flag}"], cache_home)
                by_mode[flag].append(wall)
                for r in data["results"]:
                    overheads[flag].append((r["wall_s"] - r["compile_s"] - r["measure_window_s"])
                                           / r["wall_s"])
        for flag, values in by_mode.items():
            print(f"sweep 128..1024 {flag}: walls {', '.join(f'{v:.1f}' for v in values)} s; "
                  f"per-trial overhead median {sorted(overheads[flag])[len(overheads[flag]) // 2]:.0%}")
        print(f"standby speed-up: {min(by_mode['--no-standby']) / min(by_mode['--standby']):.2f}x "
              f"(best of 2 each)")


if __name__ == "__main__":
    main()
