"""`vramtune doctor [--json]`: is this machine's GPU (or CPU) path right, before a sweep?"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from vramtune import api
from vramtune.api import DoctorReport
from vramtune.cli.common import json_flag, print_json
from vramtune.units import NA, format_bytes


def doctor_text(r: DoctorReport) -> str:
    """Plain text, no colour or boxes: pasted into a bug report as it is."""
    lines = [f"stack: {r.stack}",
             "versions: " + ", ".join(f"{k} {v}" for k, v in r.versions.items()),
             f"JAX_PLATFORMS: {r.jax_platforms if r.jax_platforms is not None else '(unset)'}",
             "CUDA plugin: " + (", ".join(f"{k} {v}" for k, v in r.cuda_plugins.items())
                                or "not installed"),
             f"jax backend with your environment: {r.backend or 'did not start'}"
             + (f", {len(r.backend_devices)} device(s): {', '.join(r.backend_devices)}"
                if r.backend_devices else "")]
    lines += [f"  plugin error: {line}" for line in r.plugin_errors]
    visible = r.cuda_visible_devices
    lines += [f"NVML: {r.nvml}",
              f"CUDA_VISIBLE_DEVICES: {visible if visible is not None else '(unset)'}"]
    lines += [f"  {note}" for note in r.device_notes]
    for d in r.devices:
        mig = ", MIG slice" if d.mig else ""
        lines.append(f"GPU {d.uuid}: {d.name}, NVML index {d.nvml_index}{mig}, total "
                     f"{format_bytes(d.nvml_total_bytes)} (NVML), "
                     f"{format_bytes(d.runtime_total_bytes)} (CUDA runtime)")
    lines += [f"fraction variable this jaxlib reads: {r.fraction_var}",
              "per-process CUDA overhead: "
              + (format_bytes(r.overhead_bytes) if r.overhead_bytes else NA),
              f"NVML per-process figures: {r.per_process_nvml}"]
    p = r.cap_probe
    if p is not None:
        what = "bytes_limit" if p.backend == "gpu" else "RLIMIT_DATA"
        lines += [f"capped probe ({p.backend}): {p.cap or 'no cap'}; {what} in force "
                  f"{format_bytes(p.in_force_bytes)}, intended {format_bytes(p.intended_bytes)}; "
                  f"allocating twice that: {p.allocation or NA}; "
                  f"{'OK' if p.ok else 'FAILED'}"
                  + (f" ({p.wall_s:.1f} s)" if p.wall_s is not None else "")]
        if p.mismatch:
            lines.append(f"  cap not applied: {p.mismatch}")
    lines += [f"note: {n}" for n in r.notes]
    lines += [f"PROBLEM: {n}" for n in r.problems]
    if r.problems:
        verdict = f"{len(r.problems)} problem(s): fix them before trusting a sweep"
    elif r.stack_patches:
        verdict = "ready, with brax patched as brax main does (first line); nothing else found"
    else:
        verdict = "no problems found"
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines)


def doctor(
    json_out: Annotated[bool, json_flag("the report")] = False,
    probe: Annotated[bool, typer.Option(help="Run the capped probe (a few seconds).")] = True,
) -> None:
    """Check jax, the CUDA plugin, devices, NVML and the memory cap with real probes."""
    report = api.doctor(probe=probe)
    if json_out:
        data = dataclasses.asdict(report)
        data["cap_probe_ok"] = report.cap_probe.ok if report.cap_probe else None
        print_json(data)
    else:
        typer.echo(doctor_text(report))  # plain: no markup to escape, paste-able
    raise typer.Exit(0 if not report.problems else 1)
