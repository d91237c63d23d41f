"""Issue 2 benchmarks: sampler overhead and per-trial overhead, as ratios within one run.

Sampler: steps/s with the parent sampling at its default interval vs sampling off, same
size, interleaved repeats (A B A B ...) so machine noise hits both alike.
Trial overhead: wall - (compile + measuring window), as a share of wall, for `quick`.

    .venv/bin/python benchmarks/bench_trial.py [--repeats 5] [--size 256]
"""

from __future__ import annotations

import argparse
import time

from _common import banner, median

from vramtune.machine import default_cache_dir
from vramtune.measure.trial import DEFAULT_SAMPLE_INTERVAL_S, TrialRequest, run_trial
from vramtune.measure.wire import Event, TrialPhase
from vramtune.records import Status
from vramtune.workload.profile import load_profile


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--cold", action="store_true", help="no persistent compile cache")
    args = parser.parse_args()
    banner("trial benchmarks (quick profile)")
    profile = load_profile("quick")
    cache = None if args.cold else str(default_cache_dir() / "jax")
    print(f"size {args.size}, compile cache {'off (cold)' if args.cold else 'on'}")
    rates: dict[str, list[float]] = {"sampling": [], "no sampling": []}
    overheads: list[float] = []
    imports: list[float] = []
    for i in range(args.repeats):
        for label, interval in (("sampling", DEFAULT_SAMPLE_INTERVAL_S), ("no sampling", None)):
            marks: dict[str, float] = {}
            t0 = time.perf_counter()

            def on_event(event: Event, marks=marks, t0=t0) -> None:
                if isinstance(event, TrialPhase):
                    marks.setdefault(event.phase, time.perf_counter() - t0)

            r = run_trial(TrialRequest(profile, args.size, compile_cache_dir=cache,
                                       sample_interval_s=interval), on_event)
            assert r.status is Status.OK, r.error_message
            rates[label].append(r.steps_per_s)
            overhead = r.wall_s - r.compile_s - r.measure_window_s
            overheads.append(overhead / r.wall_s)
            imports.append(marks.get("building", float("nan")))
            print(f"repeat {i} {label:11s}: {r.steps_per_s:9,.0f} steps/s  wall {r.wall_s:5.1f} s  "
                  f"compile {r.compile_s:4.1f} s  window {r.measure_window_s:4.1f} s  "
                  f"overhead {overhead:4.1f} s ({overhead / r.wall_s:.0%}), "
                  f"start+import {marks.get('building', float('nan')):.1f} s")
    on, off = median(rates["sampling"]), median(rates["no sampling"])
    print(f"sampler: median {on:,.0f} steps/s with sampling every {DEFAULT_SAMPLE_INTERVAL_S} s vs "
          f"{off:,.0f} without: ratio {on / off:.3f} ({(1 - on / off):+.1%} loss)")
    print(f"trial overhead: median {median(overheads):.0%} of wall "
          f"(range {min(overheads):.0%}..{max(overheads):.0%}); of which process start + "
          f"imports median {median(imports):.1f} s")


if __name__ == "__main__":
    main()
