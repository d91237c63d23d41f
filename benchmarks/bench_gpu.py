"""GPU validation (issue 2): `ant` (brax MJX) at three sizes with and without a cap, the three
memory views side by side, and a real GPU OOM under a --gpu-mem below the need.

Needs an NVIDIA GPU, NVML and `pip install -e '.[cuda]'`. Prints a Markdown table for
benchmarks/README.md.

    .venv/bin/python benchmarks/bench_gpu.py [--profile ant] [--sizes 256,1024,4096]
"""

from __future__ import annotations

import argparse

from _common import banner

from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_overhead_bytes
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.units import format_bytes, parse_size
from vramtune.workload.profile import load_profile


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="ant")
    parser.add_argument("--sizes", default="256,1024,4096")
    parser.add_argument("--cap", default="8GB", help="emulated card for the capped runs")
    parser.add_argument("--oom-budget", default="1.5GB", help="a budget below the largest need")
    args = parser.parse_args()
    banner(f"GPU memory views ({args.profile})")
    nvml = Nvml()
    if not nvml.available or nvml.info is None:
        raise SystemExit(f"no GPU: {nvml.notice}")
    print(f"gpu: {nvml.info.name}, driver {nvml.info.driver}, {format_bytes(nvml.info.total_bytes)}")
    overhead = measure_overhead_bytes(nvml)
    print(f"per-process CUDA overhead (trivial JAX process, NVML): {format_bytes(overhead)}")
    profile = load_profile(args.profile)
    print("| num_envs | budget | cap | status | JAX live peak | JAX pool peak | NVML process | "
          "NVML device used | host peak RSS | compile s | steps/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    runs = [(int(n), None) for n in args.sizes.split(",")]
    runs += [(int(n), parse_size(args.cap)) for n in args.sizes.split(",")]
    runs.append((int(args.sizes.split(",")[-1]), parse_size(args.oom_budget)))
    for n, budget in runs:
        r = run_trial(TrialRequest(profile, n, budget_bytes=budget), nvml=nvml,
                      overhead_bytes=overhead)
        print(f"| {n} | {format_bytes(budget) if budget else 'none'} | {r.cap} | {r.status} | "
              f"{format_bytes(r.jax_peak_bytes_in_use)} | {format_bytes(r.jax_peak_pool_bytes)} | "
              f"{format_bytes(r.nvml_process_peak_bytes)} | "
              f"{format_bytes(r.nvml_device_used_peak_bytes)} | {format_bytes(r.host_peak_rss_bytes)} | "
              f"{'n/a' if r.compile_s is None else f'{r.compile_s:.1f}'} | "
              f"{'n/a' if r.steps_per_s is None else f'{r.steps_per_s:,.0f}'} |", flush=True)
        if r.error_message:
            print(f"    {r.status}: {r.error_message.strip().splitlines()[-1][:200]}")


if __name__ == "__main__":
    main()
