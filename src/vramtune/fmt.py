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


def _at(values: list[int | None] | None, i: int) -> int | None:
    return values[i] if values is not None and i < len(values) else None


def steady_words(steady: bool | None) -> str:
    """A trial that stopped at max_intervals may still have been growing: say so."""
    if steady is None:
        return NA
    return "yes" if steady else "no: still growing when the trial ended (raise max_intervals)"


def _count(value: int | None) -> str:
    return NA if value is None else f"{value:,}"


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
    ]
    if r.cap_check:
        rows.append(("cap in force (checked)", r.cap_check))
    if r.device_uuids:
        rows.append(("device UUIDs (CUDA runtime)", ", ".join(u or NA for u in r.device_uuids)))
    rows += [
        ("compile (to steady state)", seconds(r.compile_s)),
        ("steps/s (median)", rate(r.steps_per_s) + (
            f" total, {rate(r.steps_per_s_per_device)} per device"
            if (r.device_count or 1) > 1 and r.steps_per_s is not None else "")),
        ("steps/s range", f"{rate(r.steps_per_s_min)} .. {rate(r.steps_per_s_max)}"
         f" over {r.measured_intervals} intervals" if r.measured_intervals else NA),
        ("instructions per env step (CPU counter)",
         rate(r.instructions_per_env_step) if r.instructions_per_env_step is not None else NA),
        ("training steps, evaluations",
         f"{r.training_steps if r.training_steps is not None else NA}, "
         f"{r.evals if r.evals is not None else NA}"),
        ("memory steady at the end", steady_words(r.memory_steady)),
    ]
    if r.is_gpu or r.jax_peak_bytes_in_use is not None:
        rows += [
            ("VRAM live peak (JAX: bytes in use at once)", format_bytes(r.jax_peak_bytes_in_use)),
            ("VRAM pool peak (JAX BFC pool: what the fraction caps)",
             format_bytes(r.jax_peak_pool_bytes)),
            ("VRAM pool limit (bytes_limit in force)", format_bytes(r.jax_bytes_limit)),
        ]
    if r.is_gpu or r.nvml_process_peak_bytes is not None or r.nvml_device_used_peak_bytes:
        rows += [
            ("VRAM process peak (NVML: what the card gave the trial)",
             format_bytes(r.nvml_process_peak_bytes)),
            ("VRAM outside the pool (NVML - pool: not capped)", format_bytes(r.outside_pool_bytes)),
            ("VRAM device used peak (NVML, all processes)",
             format_bytes(r.nvml_device_used_peak_bytes)),
        ]
    if (r.device_count or 1) > 1 and r.is_gpu:
        for i in range(r.device_count or 1):
            rows.append((f"  device {i}: live / pool / NVML / outside", " / ".join(
                format_bytes(_at(values, i)) for values in (
                    r.jax_peak_bytes_in_use_per_device, r.jax_peak_pool_bytes_per_device,
                    r.nvml_process_peak_bytes_per_device, r.outside_pool_bytes_per_device))))
    if r.warp_naconmax is not None:
        rows += [
            ("MJX-Warp contacts: most seen / naconmax",
             f"{_count(r.warp_contacts_max)} all envs ({_count(r.warp_contacts_per_world_max)} "
             f"in one) / {_count(r.warp_naconmax)}"),
            ("MJX-Warp constraint rows: most seen / njmax",
             f"{_count(r.warp_constraint_rows_per_world_max)} per env "
             f"({_count(r.warp_constraint_rows_max)} all envs) / {_count(r.warp_njmax)}"),
            ("MJX-Warp probe", f"{_count(r.warp_probe_steps)} steps, {seconds(r.warp_probe_s)}; "
                               f"overflow: {', '.join(r.warp_overflow or []) or 'none'}; "
                               f"solver limits: {', '.join(r.warp_solver_limits or []) or 'none'}"),
        ]
    if r.warp_probe_error:
        rows.append(("MJX-Warp probe failed (demand not measured)", r.warp_probe_error))
    if r.warp_mempool_high_bytes is not None or r.warp_pool_room_bytes is not None:
        peak = NA if r.warp_mempool_high_bytes is None else format_bytes(r.warp_mempool_high_bytes)
        room = "none (nothing measured before)" if r.warp_pool_room_bytes is None \
            else format_bytes(r.warp_pool_room_bytes) + " (predicted)"
        rows.append(("MJX-Warp memory pool peak (Warp's own: outside XLA's pool, not capped)",
                     f"{peak}; room the cap left it: {room}"))
    if r.warp_kernel_cache is not None:
        rows.append(("MJX-Warp kernels", f"{r.warp_kernel_cache}: {r.warp_kernels_compiled} built, "
                                         f"{r.warp_kernels_cached} from the cache, "
                                         f"{seconds(r.warp_kernel_build_s)} building"))
    if r.host_peak_data_bytes is not None:
        rows.append((f"{host} peak data segment (what RLIMIT_DATA counts)",
                     format_bytes(r.host_peak_data_bytes)))
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
    if r.stack_patches:
        rows.append(("brax patched (as brax main does)", ", ".join(r.stack_patches)))
    rows += [("note", n) for n in r.notes]
    return rows
