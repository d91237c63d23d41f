"""Tuned configs from measurements: choose per budget, then small exporters (brax, playground,
hydra YAML; the Markdown quick-reference table).

Only measured trials are ever written (``recommend.choose``), and a budget the measurements
do not cover says so: people copy these files into training runs that take days, so a number
that was never run must not look like one that was. Everything here is a pure function of the
run's records: the dates come from the records, never from the clock, so the output is
reproducible and testable against golden files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from vramtune import fmt
from vramtune.errors import UserError
from vramtune.profile import Profile, profile_from_dict
from vramtune.recommend import Objective, Recommendation, choose
from vramtune.records import FAILED_BY_MEMORY, Status, TrialResult
from vramtune.rules import BatchShape, lr_scaling_hint, violations
from vramtune.store import Run
from vramtune.units import budget_label, format_bytes

PREALLOCATE_VAR = "XLA_PYTHON_CLIENT_PREALLOCATE"
CPU_NOTICE = ("measured on CPU: every figure is host RAM, not VRAM, and no GPU memory fraction "
              "applies; re-run the sweep on the target GPU before training there")
MAX_FRACTION = 0.95  # leave the CUDA context and libraries room outside JAX's pool


class Format(StrEnum):
    BRAX = "brax"
    PLAYGROUND = "playground"
    HYDRA = "hydra"


@dataclass(frozen=True)
class Source:
    """One or more run directories of the same workload on the same device, merged."""

    directories: tuple[Path, ...]
    profile: Profile
    profile_hash: str
    device: str
    created: str  # the first run's creation time: the date the files name
    headroom_fraction: float
    results: tuple[TrialResult, ...]
    sweep_budget_bytes: tuple[int | None, ...]  # each run's cap (None: uncapped)

    @property
    def on_gpu(self) -> bool:
        return any(r.is_gpu for r in self.results)

    @property
    def memory_label(self) -> str:
        return "VRAM" if self.on_gpu else "host RAM"

    @property
    def label(self) -> str:
        return ", ".join(str(d) for d in self.directories)


@dataclass(frozen=True)
class Emission:
    """What one budget gets: the chosen trial, or why there is none, and what to know."""

    budget_bytes: int | None
    headroom_fraction: float
    recommendation: Recommendation
    notices: tuple[str, ...]  # coverage gaps and caveats: printed, and written as comments
    error: str | None  # set when nothing measured fits (no file is written); says why
    optimisation_change: str | None  # what changed vs the profile's base, with the LR hint

    @property
    def chosen(self) -> TrialResult | None:
        return self.recommendation.chosen


def merge_runs(runs: Sequence[Run]) -> Source:
    """One Source from several runs; refuses to mix workloads or devices."""
    if not runs:
        raise UserError("no run to emit a config from")
    first = runs[0]
    for run in runs[1:]:
        if run.header.profile_hash != first.header.profile_hash:
            raise UserError(f"{run.directory} measured profile {run.header.profile_name} "
                            f"({run.header.profile_hash}), {first.directory} measured "
                            f"{first.header.profile_name} ({first.header.profile_hash}): emit "
                            f"from one workload at a time")
        if run.header.device != first.header.device:
            raise UserError(f"{run.directory} ran on {run.header.device}, {first.directory} on "
                            f"{first.header.device}: speed differs between devices, emit from "
                            f"one device's runs at a time")
    profile = profile_from_dict(dict(first.header.profile), source=f"{first.directory} header")
    return Source(
        directories=tuple(r.directory for r in runs), profile=profile,
        profile_hash=first.header.profile_hash, device=first.header.device,
        created=first.header.created, headroom_fraction=first.header.headroom_fraction,
        results=_dedupe([res for run in runs for res in run.results]),
        sweep_budget_bytes=tuple(r.header.budget_bytes for r in runs))


def _dedupe(results: list[TrialResult]) -> tuple[TrialResult, ...]:
    """One trial per num_envs: an ok one if any, and of those the higher peak (cautious)."""
    best: dict[int, TrialResult] = {}
    for r in results:
        old = best.get(r.num_envs)
        if old is None or _preference(r) > _preference(old):
            best[r.num_envs] = r
    return tuple(best[n] for n in sorted(best))


def _preference(r: TrialResult) -> tuple[bool, int]:
    return (r.status is Status.OK and r.steps_per_s is not None, r.peak_bytes or 0)


def _largest_cap(source: Source) -> tuple[bool, int | None]:
    """(any trial ran uncapped, the largest cap any trial ran under)."""
    caps = [r.budget_bytes for r in source.results] or list(source.sweep_budget_bytes)
    return any(c is None for c in caps), max((c for c in caps if c is not None), default=None)


def plan(source: Source, budget_bytes: int | None, objective: Objective = Objective.THROUGHPUT,
         headroom_fraction: float | None = None) -> Emission:
    """Choose for one budget (None: the sweep's own cap) and say what the data cannot show."""
    headroom = source.headroom_fraction if headroom_fraction is None else headroom_fraction
    if budget_bytes is None:
        uncapped, cap = _largest_cap(source)
        budget_bytes = None if uncapped else cap
    rec = choose(source.results, budget_bytes, headroom, objective)
    notices: list[str] = []
    label = budget_label(budget_bytes)
    mem = source.memory_label
    if not source.on_gpu:
        notices.append(CPU_NOTICE)
    uncapped, cap = _largest_cap(source)
    if budget_bytes is not None and not uncapped and cap is not None and budget_bytes > cap:
        notices.append(f"the sweep ran with a {budget_label(cap)} cap, below this {label} "
                       f"budget: sizes that need more than {budget_label(cap)} were never "
                       f"tried, so a larger num_envs may fit; run `vramtune sweep --gpu-mem "
                       f"{label}` to measure them")
    total = next((r.gpu_total_bytes for r in source.results if r.gpu_total_bytes), None)
    if budget_bytes is not None and total is not None and budget_bytes > total:
        notices.append(f"the {label} budget is larger than the {format_bytes(total)} card the "
                       f"sweep ran on: nothing above {format_bytes(total)} was measured")
    chosen = rec.chosen
    error = None
    change = None
    if chosen is None:
        error = _nothing_fits(source, rec, mem)
    else:
        bad = violations(chosen.num_envs, chosen.batch_size or 0, chosen.num_minibatches or 0,
                         chosen.device_count or 1)
        if bad:  # the runner never launches these; a hand-edited results file could hold one
            raise UserError(f"the measured trial at num_envs={chosen.num_envs} breaks "
                            f"{bad[0].rule}: the results file is damaged or edited")
        larger = [r for r in source.results if r.num_envs > chosen.num_envs]
        if not larger:
            notices.append(f"num_envs={chosen.num_envs} is the largest size measured and it "
                           f"fits: larger sizes were never tried; a sweep with a higher "
                           f"--max-envs may find a faster one")
        change = optimisation_change(source.profile, chosen)
    return Emission(budget_bytes, headroom, rec, tuple(notices), error, change)


def _nothing_fits(source: Source, rec: Recommendation, mem: str) -> str:
    measured = [r for r in source.results if r.status is Status.OK and r.peak_bytes is not None]
    limit = _both_units(rec.limit_bytes) if rec.limit_bytes is not None else "the budget"
    if measured:
        smallest = min(measured, key=lambda r: r.num_envs)
        return (f"no measured trial fits under the headroom line, {limit}; the smallest that "
                f"ran, num_envs={smallest.num_envs}, peaked at "
                f"{format_bytes(smallest.peak_bytes)} {mem}: measure smaller sizes "
                f"(vramtune sweep --start N) or use a larger budget")
    failed = [r for r in source.results if r.status in FAILED_BY_MEMORY]
    why = rec.notice or "no trial finished ok"
    if failed:
        why = f"every trial ran out of memory or failed ({why})"
    return f"nothing to emit: {why}"


def optimisation_change(profile: Profile, chosen: TrialResult) -> str | None:
    """What the chosen batch settings change relative to the profile's base, plus the LR hint."""
    base = profile.base_shape
    shape = BatchShape(chosen.num_envs, chosen.batch_size or base.batch_size,
                       chosen.num_minibatches or base.num_minibatches)
    lr = profile.ppo.get("learning_rate")
    hint = lr_scaling_hint(base, shape, profile.unroll_length,
                           float(lr) if isinstance(lr, int | float) else None)
    if hint is None:
        return None
    head = (f"the optimisation differs from the profile's base (batch_size {base.batch_size} x "
            f"num_minibatches {base.num_minibatches} at num_envs={base.num_envs}, scaling "
            f"{profile.scaling}): ")
    return head + hint


# --- what goes into the files -------------------------------------------------------------

def ppo_kwargs(profile: Profile, chosen: TrialResult, num_timesteps: int | None = None
               ) -> dict[str, Any]:
    """The ppo.train keyword arguments, tuned values first, as measured."""
    kwargs: dict[str, Any] = {"num_envs": chosen.num_envs,
                              "batch_size": chosen.batch_size or profile.batch_size,
                              "num_minibatches": chosen.num_minibatches or profile.num_minibatches,
                              "unroll_length": chosen.unroll_length or profile.unroll_length}
    if num_timesteps is not None:
        kwargs["num_timesteps"] = num_timesteps
    for key, value in profile.ppo.items():
        kwargs.setdefault(key, value)
    kwargs["episode_length"] = profile.episode_length
    kwargs["action_repeat"] = profile.action_repeat
    return kwargs


def network_kwargs(profile: Profile) -> dict[str, Any]:
    """``make_ppo_networks`` kwargs (sizes as lists: YAML has no tuples)."""
    return {k: list(v) if isinstance(v, list | tuple) else v for k, v in profile.network.items()}


def xla_env(source: Source, emission: Emission, mem_fraction_var: str
            ) -> tuple[dict[str, str], list[str]]:
    """(environment variables to train with, comments explaining them)."""
    env = {PREALLOCATE_VAR: "false"}
    notes = [f"{PREALLOCATE_VAR}=false: the pool grows on demand, as it did when measured"]
    if not source.on_gpu:
        notes.append("no memory fraction: the run was measured on CPU (host memory), where "
                     "JAX's fraction does not apply")
        return env, notes
    if emission.budget_bytes is None:
        fraction = MAX_FRACTION
        notes.append(f"{mem_fraction_var}={fraction:.2f} (the variable this jaxlib reads): no "
                     f"budget, so JAX's pool may use the card but leave room for the CUDA context")
    else:
        fraction = min(MAX_FRACTION, math.floor((1 - emission.headroom_fraction) * 100) / 100)
        notes.append(f"{mem_fraction_var}={fraction:.2f} (the variable this jaxlib reads) is for "
                     f"a card with {budget_label(emission.budget_bytes)}: the pool may grow to "
                     f"the headroom line; on a larger shared card use "
                     f"{format_bytes(emission.recommendation.limit_bytes)} / its total")
    env[mem_fraction_var] = f"{fraction:.2f}"
    return env, notes


def header_comments(source: Source, emission: Emission, fmt_: Format) -> list[str]:
    chosen = emission.chosen
    assert chosen is not None
    mem = chosen.memory_label
    budget = budget_label(emission.budget_bytes)
    limit = _both_units(emission.recommendation.limit_bytes)
    lines = [f"vramtune emit-config ({fmt_}): profile {source.profile.name} "
             f"({source.profile_hash}), env {source.profile.env}",
             f"budget {budget} ({mem}), headroom {emission.headroom_fraction:.0%}: measured peaks "
             f"must stay under {limit}" if emission.budget_bytes is not None else
             f"budget: none (uncapped run), headroom {emission.headroom_fraction:.0%}",
             f"chosen ({emission.recommendation.objective}) among {len(source.results)} measured "
             f"trials: num_envs={chosen.num_envs}, batch_size={chosen.batch_size}, "
             f"num_minibatches={chosen.num_minibatches}",
             f"measured: peak {format_bytes(chosen.peak_bytes)} {mem} ({_peak_source(chosen)}), "
             f"{fmt.rate(chosen.steps_per_s)} steps/s (median of {chosen.measured_intervals} "
             f"intervals, compile excluded), compile {fmt.seconds(chosen.compile_s)}"]
    for r in source.results:
        if r is not chosen:
            lines.append(f"  num_envs={r.num_envs}: {r.status}, peak {format_bytes(r.peak_bytes)}, "
                         f"{fmt.rate(r.steps_per_s)} steps/s: "
                         f"{emission.recommendation.reasons.get(r.num_envs, '')}")
    versions = ", ".join(f"{k} {v}" for k, v in chosen.versions.items()
                         if k in ("jax", "jaxlib", "brax", "mujoco", "playground"))
    lines += [f"measured on {source.device} ({chosen.backend or fmt.NA}, "
              f"{_devices(chosen.device_count)}) on {_date(chosen.timestamp)}"
              + (f" with {versions}" if versions else ""),
              f"from run {source.label} (created {source.created})"]
    lines += [f"NOTICE: {n}" for n in emission.notices]
    if emission.optimisation_change:
        lines.append(f"NOTE: {emission.optimisation_change}")
    return lines


def _devices(count: int | None) -> str:
    return f"{count} device{'s' if count != 1 else ''}" if count else f"{fmt.NA} devices"


def _peak_source(r: TrialResult) -> str:
    if not r.is_gpu:
        return "exact peak RSS" if r.host_peak_rss_bytes is not None else "sampled RSS"
    if r.nvml_process_peak_bytes is not None:
        return "NVML, per process"
    return "JAX allocator pool" if r.jax_peak_pool_bytes is not None else "JAX allocator live"


def _date(timestamp: str | None) -> str:
    return timestamp[:10] if timestamp else fmt.NA


def _comment(lines: Sequence[str]) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


class _Dumper(yaml.SafeDumper):
    """Block mappings (one setting a line, easy to diff), lists of numbers inline."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(v, dict | list) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _dump(data: dict[str, Any]) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def _both_units(nbytes: int | None) -> str:
    """'2.70 GB (2.51 GiB)': budgets are typed in both systems, peaks print in binary."""
    if nbytes is None:
        return fmt.NA
    return f"{format_bytes(nbytes, binary=False)} ({format_bytes(nbytes)})"


def _nest(prefix: str, value: dict[str, Any]) -> dict[str, Any]:
    for part in reversed([p for p in prefix.split(".") if p]):
        value = {part: value}
    return value


def hydra_overrides(emission: Emission, prefix: str = "ppo") -> str:
    """The one-line override string for the tuned settings."""
    chosen = emission.chosen
    assert chosen is not None
    dot = f"{prefix}." if prefix else ""
    return " ".join(f"{dot}{name}={getattr(chosen, name)}"
                    for name in ("num_envs", "batch_size", "num_minibatches"))


def render(source: Source, emission: Emission, fmt_: Format = Format.BRAX, *,
           mem_fraction_var: str, num_timesteps: int | None = None,
           hydra_prefix: str = "ppo") -> str:
    """One YAML file, comments first (with the measured figures and where they came from)."""
    chosen = emission.chosen
    if chosen is None:
        raise UserError(emission.error or "nothing to emit")
    profile = source.profile
    kwargs = ppo_kwargs(profile, chosen, num_timesteps)
    network = network_kwargs(profile)
    env, env_notes = xla_env(source, emission, mem_fraction_var)
    comments = header_comments(source, emission, fmt_)
    timesteps = [] if num_timesteps is not None else [
        "num_timesteps is not set: vramtune measured speed and memory, not training length"]
    if fmt_ is Format.PLAYGROUND:
        params = dict(kwargs)
        if network:
            params["network_factory"] = network
        usage = ["usage (MuJoCo Playground):",
                 "  ppo_params = <suite>_params.brax_ppo_config(env_name)  # e.g. "
                 "locomotion_params",
                 "  ppo_params.update(yaml.safe_load(open(THIS_FILE))['ppo_params'])",
                 "  # update() merges network_factory, keeping its obs keys; set xla_env "
                 "before JAX starts"]
        if num_timesteps is None:
            timesteps = ["num_timesteps is not set: keep brax_ppo_config's"]
        body = _dump({"ppo_params": params}) + _comment(env_notes) + _dump({"xla_env": env})
        return _comment(comments + timesteps + usage) + body
    if fmt_ is Format.HYDRA:
        override = hydra_overrides(emission, hydra_prefix)
        usage = [f"override: {override}",
                 "hydra.job.env_set sets the XLA variables for the job before JAX starts"]
        body = _dump(_nest(hydra_prefix, kwargs)) + (_dump({"network": network}) if network else "")
        body += _comment(env_notes) + _dump({"hydra": {"job": {"env_set": env}}})
        return "# @package _global_\n" + _comment(comments + timesteps + usage) + body
    environment = {k: v for k, v in (("env", profile.env), ("backend", profile.backend),
                                     ("impl", profile.impl)) if v}
    if profile.env_kwargs:
        environment["env_kwargs"] = dict(profile.env_kwargs)
    usage = ["usage (Brax): set xla_env before JAX starts, then",
             "  ppo.train(environment, num_timesteps=N, **cfg['ppo'], network_factory="
             "functools.partial(ppo_networks.make_ppo_networks, **cfg['network']))"]
    body = _dump({"environment": environment}) + _dump({"ppo": kwargs})
    if network:
        body += _dump({"network": network})
    body += _comment(env_notes) + _dump({"xla_env": env})
    return _comment(comments + timesteps + usage) + body


def output_name(profile_name: str, budget_bytes: int | None, fmt_: Format) -> str:
    suffix = "" if fmt_ is Format.BRAX else f"-{fmt_}"
    return f"{profile_name}-{budget_label(budget_bytes)}{suffix}.yaml"


def markdown_table(source: Source, emissions: Sequence[Emission],
                   files: Sequence[str | None] | None = None) -> str:
    """The quick-reference table people write by hand, from measurements only."""
    mem = source.memory_label
    files = list(files) if files is not None else [None] * len(emissions)
    show_files = any(files)
    head = ["budget", "num_envs", "batch_size", "num_minibatches", f"measured peak ({mem})",
            "steps/s"] + (["file"] if show_files else [])
    lines = [f"### {source.profile.name} on {source.device}", "",
             "| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for emission, file in zip(emissions, files, strict=True):
        r = emission.chosen
        if r is None:
            cells = [budget_label(emission.budget_bytes), "does not fit", fmt.NA, fmt.NA, fmt.NA,
                     fmt.NA]
        else:
            cells = [budget_label(emission.budget_bytes), str(r.num_envs), str(r.batch_size),
                     str(r.num_minibatches), format_bytes(r.peak_bytes), fmt.rate(r.steps_per_s)]
        if show_files:
            cells.append(f"`{file}`" if file else fmt.NA)
        lines.append("| " + " | ".join(cells) + " |")
    objective = emissions[0].recommendation.objective if emissions else Objective.THROUGHPUT
    headroom = emissions[0].headroom_fraction if emissions else source.headroom_fraction
    lines += ["", f"Objective {objective}, headroom {headroom:.0%}; measured by vramtune on "
                  f"{_date(source.created)} (run {source.label})."]
    if any(CPU_NOTICE in e.notices for e in emissions):
        lines.append(f"Note: {CPU_NOTICE}.")
    for e in emissions:
        for text in ([e.error] if e.error else []) + [n for n in e.notices if n != CPU_NOTICE]:
            lines.append(f"- {budget_label(e.budget_bytes)}: {text}")
    return "\n".join(lines) + "\n"
