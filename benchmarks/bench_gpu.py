"""GPU validation (issues 2 and 12): `vramtune doctor`, then `ant` (brax MJX) at three sizes with
and without a cap, the four memory views side by side (live, pool, NVML process, outside the
pool) with the cap each trial proved, a real GPU OOM under a --gpu-mem below the need, a
trial whose intended limit is deliberately wrong (must end 'cap not applied'), and, where there
are two GPUs, the same size on both.

Needs an NVIDIA GPU, NVML and `pip install -e '.[cuda]'`. Prints Markdown for
benchmarks/README.md.

    .venv/bin/python benchmarks/bench_gpu.py [--profile ant] [--sizes 256,1024,4096]
"""

from __future__ import annotations

import argparse
import dataclasses

from _common import banner

from vramtune.cli.doctor_cmd import doctor_text
from vramtune.measure.cap import plan_cap
from vramtune.measure.doctor import diagnose
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_device
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import TrialResult
from vramtune.units import format_bytes, parse_size
from vramtune.workload.profile import load_profile


def _row(n: int, budget: int | None, devices: int, r: TrialResult) -> str:
    def b(v: int | None) -> str:
        return format_bytes(v)

    per_device = ""
    if devices > 1:
        per_device = " / ".join(b(v) for v in r.nvml_process_peak_bytes_per_device or [])
    return (f"| {n} | {devices} | {b(budget) if budget else 'none'} | {r.cap} | {r.status} | "
            f"{r.cap_check or 'n/a'} | {b(r.jax_peak_bytes_in_use)} | {b(r.jax_peak_pool_bytes)} | "
            f"{b(r.nvml_process_peak_bytes)}{' (' + per_device + ')' if per_device else ''} | "
            f"{b(r.outside_pool_bytes)} | {b(r.nvml_device_used_peak_bytes)} | "
            f"{'n/a' if r.compile_s is None else f'{r.compile_s:.1f}'} | "
            f"{'n/a' if r.steps_per_s is None else f'{r.steps_per_s:,.0f}'} | "
            f"{'n/a' if r.steps_per_s_per_device is None else f'{r.steps_per_s_per_device:,.0f}'} |")


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
    print("\n## vramtune doctor\n\n```")
    print(doctor_text(diagnose(nvml)))
    print("```\n")
    facts = measure_device(nvml)
    print(f"gpu: {nvml.info.name} ({nvml.info.uuid}), driver {nvml.info.driver}, "
          f"{format_bytes(nvml.info.total_bytes)} NVML, {format_bytes(facts.runtime_total_bytes)} "
          f"CUDA runtime; {len(nvml.devices)} visible")
    print(f"per-process CUDA overhead (trivial JAX process, NVML): "
          f"{format_bytes(facts.overhead_bytes)}\n")
    profile = load_profile(args.profile)
    print("| num_envs | devices | budget | cap | status | cap check | JAX live peak | JAX pool peak "
          "| NVML process | outside pool | NVML device used | compile s | steps/s | per device |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    sizes = [int(n) for n in args.sizes.split(",")]
    runs = [(n, None, 1) for n in sizes] + [(n, parse_size(args.cap), 1) for n in sizes]
    runs.append((sizes[-1], parse_size(args.oom_budget), 1))
    if len(nvml.devices) >= 2:
        runs += [(sizes[-1], None, 2), (sizes[-1], parse_size(args.cap), 2)]
    for n, budget, devices in runs:
        r = run_trial(TrialRequest(profile, n, budget_bytes=budget, device_count=devices),
                      nvml=nvml, overhead_bytes=facts.overhead_bytes,
                      runtime_total_bytes=facts.runtime_total_bytes)
        print(_row(n, budget, devices, r), flush=True)
        if r.error_message:
            print(f"    {r.status}: {r.error_message.strip().splitlines()[-1][:200]}")
    # The check itself: the parent intends half the limit the child really gets.
    budget = parse_size(args.cap)
    cap = plan_cap(budget, nvml, facts.overhead_bytes,
                   runtime_total_bytes=facts.runtime_total_bytes)
    wrong = dataclasses.replace(cap, pool_limit_bytes=cap.pool_limit_bytes // 2)
    r = run_trial(TrialRequest(profile, sizes[0], budget_bytes=budget), nvml=nvml, cap=wrong)
    print(f"\ndeliberately wrong intended limit: {r.status}, {r.error_message} "
          f"(wall {r.wall_s:.1f} s)")


if __name__ == "__main__":
    main()
