"""Plain-text formatting shared by every view; None always prints as 'n/a', never 0."""

from __future__ import annotations

from vramtune.records import HOST_RAM, TrialResult
from vramtune.units import NA, format_bytes


def seconds(value: float | None) -> str:
    return NA if value is None else f"{value:.1f} s"


def rate(value: float | None) -> str:
    return NA if value is None else f"{value:,.0f}"


def percent(value: float | None) -> str:
    return NA if value is None else f"{value:.0%}"


def trial_fields(r: TrialResult) -> list[tuple[str, str]]:
    """(label, value) pairs for one trial, memory labelled by what it is a peak of."""
    host = HOST_RAM  # host figures are host RAM on any backend
    rows = [
        ("status", str(r.status)),
        ("profile", f"{r.profile} ({r.profile_hash})"),
        ("num_envs", str(r.num_envs)),
        ("batch_size x num_minibatches",
         f"{r.batch_size} x {r.num_minibatches}" if r.batch_size else NA),
        ("unroll_length", str(r.unroll_length) if r.unroll_length else NA),
        ("device", f"{r.device_kind or NA} x{r.device_count or NA} ({r.backend or NA})"),
        ("budget", format_bytes(r.budget_bytes) if r.budget_bytes else "none"),
        ("cap", r.cap or "none"),
        ("compile (to steady state)", seconds(r.compile_s)),
        ("steps/s (median)", rate(r.steps_per_s)),
        ("steps/s range", f"{rate(r.steps_per_s_min)} .. {rate(r.steps_per_s_max)}"
         f" over {r.measured_intervals} intervals" if r.measured_intervals else NA),
    ]
    if r.is_gpu or r.jax_peak_bytes_in_use is not None:
        rows += [
            ("VRAM live peak (JAX allocator)", format_bytes(r.jax_peak_bytes_in_use)),
            ("VRAM pool peak (JAX allocator)", format_bytes(r.jax_peak_pool_bytes)),
            ("VRAM allocator limit", format_bytes(r.jax_bytes_limit)),
        ]
    if r.is_gpu or r.nvml_process_peak_bytes is not None or r.nvml_device_used_peak_bytes:
        rows += [
            ("VRAM process peak (NVML)", format_bytes(r.nvml_process_peak_bytes)),
            ("VRAM device used peak (NVML)", format_bytes(r.nvml_device_used_peak_bytes)),
        ]
    rows += [
        (f"{host} peak RSS (exact)", format_bytes(r.host_peak_rss_bytes)),
        (f"{host} process tree peak (sampled)", format_bytes(r.host_tree_rss_peak_bytes)),
        ("wall", seconds(r.wall_s)),
    ]
    if r.gpu_name:
        rows.append(("GPU", f"{r.gpu_name}, driver {r.gpu_driver}, "
                            f"{format_bytes(r.gpu_total_bytes)}"))
    if r.nvml_note:
        rows.append(("NVML", r.nvml_note))
    if r.error_type or r.error_message:
        rows.append(("error", f"{r.error_type or ''}: {r.error_message or ''}".strip(": ")))
    if r.error_where:
        rows.append(("where", r.error_where))
    rows.append(("versions", ", ".join(f"{k} {v}" for k, v in r.versions.items())))
    rows += [("note", n) for n in r.notes]
    return rows
