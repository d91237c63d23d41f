"""Tuned configs as files: brax, playground and hydra YAML, and the Markdown quick-reference
table. Everything is a pure function of the run's records (dates from the records, never the
clock), so the output is reproducible and testable against golden files. YAML is built as
data and dumped, never concatenated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import pandas as pd

from vramtune import fmt, yamlio
from vramtune.errors import UserError
from vramtune.measure.cap import DEFAULT_GPU_FRACTION
from vramtune.records import Objective, Status, TrialResult
from vramtune.schema import printable
from vramtune.tune.budgets import CPU_NOTICE, Emission, Measurements
from vramtune.tune.capacity import warp_capacities
from vramtune.tune.ledger import fit_roles, ledgers
from vramtune.tune.recommend import Recommendation, weighed_speeds
from vramtune.units import both_units, budget_label, format_bytes
from vramtune.views.sweep_table import row_reason
from vramtune.views.tables import Column, Table
from vramtune.workload.emitted import header_line
from vramtune.workload.profile import Profile, safe_name
from vramtune.workload.sources import parse_source

PREALLOCATE_VAR = "XLA_PYTHON_CLIENT_PREALLOCATE"

HYDRA_TOP_KEYS = ("network", "hydra", "env_config")  # beside the prefix's, in a Hydra file


class ConfigFormat(StrEnum):
    BRAX = "brax"
    PLAYGROUND = "playground"
    HYDRA = "hydra"


# --- what goes into the files -------------------------------------------------------------

def ppo_kwargs(profile: Profile, chosen: TrialResult, num_timesteps: int | None = None,
               num_evals: int | None = None) -> dict[str, Any]:
    """The ppo.train keyword arguments, tuned values first, as measured."""
    kwargs: dict[str, Any] = {"num_envs": chosen.num_envs,
                              "batch_size": chosen.batch_size or profile.batch_size,
                              "num_minibatches": chosen.num_minibatches or profile.num_minibatches,
                              "unroll_length": chosen.unroll_length or profile.unroll_length}
    if num_timesteps is not None:
        kwargs["num_timesteps"] = num_timesteps
    if num_evals is not None:  # the run's epochs were priced with it
        kwargs["num_evals"] = num_evals
    for key, value in profile.ppo.items():
        kwargs.setdefault(key, value)
    kwargs["episode_length"] = profile.episode_length
    kwargs["action_repeat"] = profile.action_repeat
    return kwargs


def network_kwargs(profile: Profile) -> dict[str, Any]:
    """``make_ppo_networks`` kwargs (sizes as lists: YAML has no tuples)."""
    return {k: list(v) if isinstance(v, list | tuple) else v for k, v in profile.network.items()}


def xla_env(source: Measurements, emission: Emission, mem_fraction_var: str
            ) -> tuple[dict[str, str], list[str]]:
    """(environment variables to train with, comments explaining them)."""
    env = {PREALLOCATE_VAR: "false"}
    notes = [f"{PREALLOCATE_VAR}=false: the pool grows on demand, as it did when measured"]
    if not source.on_gpu:
        notes.append("no memory fraction: the run was measured on CPU (host memory), where "
                     "JAX's fraction does not apply")
        return env, notes
    # The most of the card JAX's pool may take, the rest left to the CUDA context and
    # libraries: the same share an uncapped trial ran with, so the config trains as measured.
    if emission.budget_bytes is None:
        fraction = DEFAULT_GPU_FRACTION
        notes.append(f"{mem_fraction_var}={fraction:.2f} (the variable this jaxlib reads): no "
                     f"budget, so JAX's pool may use the card but leave room for the CUDA context")
    else:
        fraction = min(DEFAULT_GPU_FRACTION, math.floor((1 - emission.headroom_fraction) * 100) / 100)
        notes.append(f"{mem_fraction_var}={fraction:.2f} (the variable this jaxlib reads) is for "
                     f"a card with {budget_label(emission.budget_bytes)}: the pool may grow to "
                     f"the headroom line; on a larger shared card use "
                     f"{format_bytes(emission.recommendation.limit_bytes)} / its total")
    env[mem_fraction_var] = f"{fraction:.2f}"
    return env, notes


def ledger_comment(results: Sequence[TrialResult]) -> list[str]:
    """Where the memory goes, per env and fixed (``tune/ledger.py``), in one line: [] without
    a ledger at two sizes (older runs)."""
    rows = ledgers(results)
    fits = {f.field: f for f in fit_roles(rows)}
    peak = fits.get("peak_bytes")
    if peak is None or peak.per_env_bytes is None or peak.fixed_bytes is None:
        return []

    def per_env(field: str) -> str:
        value = fits[field].per_env_bytes
        return fmt.NA if value is None else format_bytes(int(round(value)))

    held = [fits[f].fixed_bytes for f in ("ledger_params_bytes", "ledger_optimizer_bytes")]
    fixed = fmt.NA if None in held else format_bytes(int(sum(held)))  # type: ignore[arg-type]
    return [f"memory per env and fixed (fitted over {peak.sizes} sizes): {rows[0].peak_label} "
            f"{format_bytes(int(peak.fixed_bytes))} fixed + "
            f"{per_env('peak_bytes')} per env; XLA temporaries "
            f"{per_env('ledger_epoch_temp_bytes')} per env (rollout "
            f"{per_env('ledger_rollout_bytes')}), env state {per_env('ledger_env_state_bytes')} "
            f"per env, params and optimizer {fixed} fixed "
            f"(vramtune explain RUN)"]


def header_comments(source: Measurements, emission: Emission, fmt_: ConfigFormat) -> list[str]:
    chosen, rec = emission.chosen, emission.recommendation
    assert chosen is not None
    mem = chosen.memory_label
    # the size's highest peak, not its fastest run's (a run alone may have compiled warm)
    high = rec.highest if rec.highest is not None else chosen
    among = f", {rec.peak_among}" if rec.peak_among else ""
    budget = budget_label(emission.budget_bytes)
    limit = both_units(emission.recommendation.limit_bytes)
    lines = [header_line(str(fmt_), source.profile.name, source.profile_hash, source.profile.env),
             f"budget {budget} ({mem}), headroom {emission.headroom_fraction:.0%}: measured peaks "
             f"must stay under {limit}" if emission.budget_bytes is not None else
             f"budget: none (uncapped run), headroom {emission.headroom_fraction:.0%}",
             f"chosen ({emission.recommendation.objective}) among {_measured_words(source)}: "
             f"num_envs={chosen.num_envs}, batch_size={chosen.batch_size}, "
             f"num_minibatches={chosen.num_minibatches}",
             f"measured: peak {format_bytes(rec.peak_bytes)} {mem} ({_peak_source(high)}"
             f"{among}), "
             f"{fmt.rate(rec.steady_steps_per_s)} steps/s ({_median_of(rec)}, compile "
             f"excluded), "
             f"compile {fmt.seconds(chosen.compile_s)}"]
    lines += ledger_comment(source.every_result or source.results)
    if emission.growth is not None:
        lines.append(f"run length: {emission.growth.words()}")
    for extra in (emission.recommendation.speed_line,
                  emission.recommendation.confirm_speed_line):
        if extra:
            lines.append(f"throughput: {extra}")
    confirmed = emission.recommendation.confirmed_line
    budget_flag = (f" --gpu-mem {budget_label(emission.budget_bytes)}"
                   if emission.budget_bytes is not None else "")
    lines.append(confirmed if confirmed else
                 f"not confirmed by a long run: `vramtune verify THIS_FILE{budget_flag}` trains "
                 f"it 100 training steps under the same cap before you commit days to it")
    # One line per other size: its rate as the pick weighs it (its runs alone pooled, a
    # disturbed run set aside), not that of the record standing for its peak; the chosen
    # size is the lines above, whichever of its records stands for it.
    speeds = weighed_speeds(rec, source.every_result or source.results)
    for r in emission.sizes or source.results:
        if r.num_envs != chosen.num_envs:
            rate = speeds.get(r.num_envs, r.steps_per_s) if r.status is Status.OK else r.steps_per_s
            lines.append(f"  num_envs={r.num_envs}: {r.status}, peak {format_bytes(r.peak_bytes)}, "
                         f"{fmt.rate(rate)} steps/s: {_size_reason(r, emission.recommendation)}")
    versions = ", ".join(f"{k} {v}" for k, v in chosen.versions.items()
                         if k in ("jax", "jaxlib", "brax", "mujoco", "playground"))
    lines += [f"measured on {source.device} ({chosen.backend or fmt.NA}, "
              f"{_devices(chosen.device_count)}) on {_date(chosen.timestamp)}"
              + (f" with {versions}" if versions else ""),
              f"from run {source.label} (created {source.created})"]
    if chosen.stack_patches:
        lines.append(f"measured with brax patched as brax main does "
                     f"({', '.join(chosen.stack_patches)}): train it the same way, with "
                     f"`import vramtune.compat; vramtune.compat.patch_brax()` before ppo.train")
    lines += [f"NOTICE: {n}" for n in emission.notices]
    if emission.optimisation_change:
        lines.append(f"NOTE: {emission.optimisation_change}")
    return lines


def _size_reason(r: TrialResult, rec: Recommendation) -> str:
    """Why a size was not chosen: the recommender's word for the size where the record
    standing for it fitted (not what that one run was: a confirming run, a set-aside
    one), its own failure where it failed."""
    reason = rec.reasons.get(r.num_envs) if r.status is Status.OK else None
    return reason or row_reason(r, rec)


def _devices(count: int | None) -> str:
    return f"{count} device{'s' if count != 1 else ''}" if count else f"{fmt.NA} devices"


def _median_of(rec: Recommendation) -> str:
    """What the pick's rate is the median of: its run's intervals, or its runs' pooled."""
    n, pooled = rec.steady_intervals, rec.steady_pooled
    if n is None:
        return "median over its runs" if pooled else "median of n/a intervals"
    return f"median of {n} intervals{', over its runs' if pooled else ''}"


def _peak_source(r: TrialResult) -> str:
    if not r.is_gpu:
        return "exact peak RSS" if r.host_peak_rss_bytes is not None else "sampled RSS"
    if r.nvml_process_peak_bytes is not None:
        return "NVML, per process"
    return "JAX allocator pool" if r.jax_peak_pool_bytes is not None else "JAX allocator live"


def _date(timestamp: str | None) -> str:
    return timestamp[:10] if timestamp else fmt.NA


def _comment(lines: Sequence[str]) -> str:
    """Comment lines; a line break inside a text (a name, an error) starts a new comment
    line, so no text read from a file can end the comment and become YAML, and any other
    control character is spelled out (YAML refuses them)."""
    return "".join(f"# {printable(part)}".rstrip() + "\n" for line in lines
                   for part in str(line).splitlines() or [""])


def _dump(data: dict[str, Any]) -> str:
    return yamlio.dump(data)



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


def render(source: Measurements, emission: Emission, fmt_: ConfigFormat = ConfigFormat.BRAX, *,
           mem_fraction_var: str, num_timesteps: int | None = None,
           hydra_prefix: str = "ppo", num_evals: int | None = None) -> str:
    """One YAML file, comments first (with the measured figures and where they came from)."""
    chosen = emission.chosen
    if chosen is None:
        raise UserError(emission.error or "nothing to emit")
    profile = source.profile
    kwargs = ppo_kwargs(profile, chosen, num_timesteps, num_evals)
    network = network_kwargs(profile)
    env, env_notes = xla_env(source, emission, mem_fraction_var)
    comments = header_comments(source, emission, fmt_)
    timesteps = [] if num_timesteps is not None else [
        "num_timesteps is not set: vramtune measured speed and memory, not training length"]
    capacities = warp_capacities(chosen, profile.env_kwargs)
    comments += [f"MJX-Warp {c.words}" for c in capacities]
    sized = {c.key: c.value for c in capacities}
    if sized and parse_source(profile.env).kind != "playground":
        # A user's factory may not take these keywords: say them, write nothing it would get
        comments.append("MJX-Warp: pass " + ", ".join(f"{k}={v}" for k, v in sized.items())
                        + " to your env factory where it builds its Warp data (not written "
                        "into env_kwargs: vramtune cannot know the factory takes them)")
        sized = {}
    if fmt_ is ConfigFormat.PLAYGROUND:
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
        if sized:
            usage.append("  env = registry.load(env_name, config_overrides=yaml.safe_load("
                         "open(THIS_FILE))['env_config_overrides'])")
        body = _dump({"ppo_params": params}) + (
            _dump({"env_config_overrides": sized}) if sized else "")
        body += _comment(env_notes) + _dump({"xla_env": env})
        return _comment(comments + timesteps + usage) + body
    if fmt_ is ConfigFormat.HYDRA:  # top-level keys: HYDRA_TOP_KEYS and the prefix's first
        override = hydra_overrides(emission, hydra_prefix)
        usage = [f"override: {override}",
                 "hydra.job.env_set sets the XLA variables for the job before JAX starts"]
        if sized:
            usage.append("env_config: MJX-Warp's buffer sizes, for registry.load(env_name, "
                         "config_overrides=cfg.env_config)")
        body = _dump(_nest(hydra_prefix, kwargs)) + (_dump({"network": network}) if network else "")
        body += _dump({"env_config": sized}) if sized else ""
        body += _comment(env_notes) + _dump({"hydra": {"job": {"env_set": env}}})
        return "# @package _global_\n" + _comment(comments + timesteps + usage) + body
    environment = {k: v for k, v in (("env", profile.env), ("backend", profile.backend),
                                     ("impl", profile.impl)) if v}
    if profile.env_kwargs or sized:
        environment["env_kwargs"] = {**profile.env_kwargs, **sized}
    usage = ["usage (Brax): set xla_env before JAX starts, then",
             "  ppo.train(environment, num_timesteps=N, **cfg['ppo'], network_factory="
             "functools.partial(ppo_networks.make_ppo_networks, **cfg['network']))"]
    body = _dump({"environment": environment}) + _dump({"ppo": kwargs})
    if network:
        body += _dump({"network": network})
    body += _comment(env_notes) + _dump({"xla_env": env})
    return _comment(comments + timesteps + usage) + body


def output_name(profile_name: str, budget_bytes: int | None, fmt_: ConfigFormat) -> str:
    """A file name only (no folder part, whatever the profile is called)."""
    suffix = "" if fmt_ is ConfigFormat.BRAX else f"-{fmt_}"
    return f"{safe_name(profile_name)}-{budget_label(budget_bytes)}{suffix}.yaml"


def table_name(profile_name: str, what: str) -> str:
    """The Markdown table's file name beside the configs ('table', 'cards'): a name only."""
    return f"{safe_name(profile_name)}-{what}.md"


def budgets_table(source: Measurements, emissions: Sequence[Emission],
                  files: Sequence[str | None] | None = None) -> Table:
    """One row per budget: what it gets (measured figures only), and its file if written."""
    files = list(files) if files is not None else [None] * len(emissions)
    columns = [Column("budget", "budget", "right"), Column("num_envs", "num_envs", "right"),
               Column("batch_size", "batch_size", "right"),
               Column("num_minibatches", "num_minibatches", "right"),
               Column("peak", f"measured peak ({source.memory_label})", "right"),
               Column("steps_per_s", "steps/s", "right")]
    if any(files):
        columns.append(Column("file", "file", code=True))
    rows = []
    for emission, file in zip(emissions, files, strict=True):
        r = emission.chosen
        if r is None:
            cells = [budget_label(emission.budget_bytes), "does not fit", fmt.NA, fmt.NA, fmt.NA,
                     fmt.NA]
        else:
            cells = [budget_label(emission.budget_bytes), str(r.num_envs), str(r.batch_size),
                     str(r.num_minibatches), format_bytes(emission.recommendation.peak_bytes),
                     fmt.rate(emission.recommendation.steady_steps_per_s)]
        rows.append(cells + [file or fmt.NA] if any(files) else cells)
    return Table.from_rows(columns, rows)


def markdown_table(source: Measurements, emissions: Sequence[Emission],
                   files: Sequence[str | None] | None = None) -> str:
    """The quick-reference table people write by hand, from measurements only."""
    lines = [f"### {source.profile.name} on {source.device}", "",
             budgets_table(source, emissions, files).to_markdown().rstrip("\n")]
    objective = emissions[0].recommendation.objective if emissions else Objective.THROUGHPUT
    headroom = emissions[0].headroom_fraction if emissions else source.headroom_fraction
    lines += ["", f"Objective {objective}, headroom {headroom:.0%}; measured by vramtune on "
                  f"{_date(source.created)} (run {source.label})."]
    if any(CPU_NOTICE in e.notices for e in emissions):
        lines.append(f"Note: {CPU_NOTICE}.")
    lines += _budget_notes(emissions, "- ")
    return "\n".join(lines) + "\n"


def _budget_notes(emissions: Sequence[Emission], bullet: str) -> list[str]:
    """Each budget's error and notices (the CPU notice is said once, by the caller)."""
    return [f"{bullet}{budget_label(e.budget_bytes)}: {text}" for e in emissions
            for text in ([e.error] if e.error else []) + [n for n in e.notices if n != CPU_NOTICE]]


# --- several cards (a mixed cluster's runs under one parent) ----------------------------------

CardEmissions = tuple[str, Measurements, Sequence[Emission]]  # (card, its runs, per budget)


def cards_table(cards: Sequence[CardEmissions],
                files: Sequence[Sequence[str | None]] | None = None) -> Table:
    """The quick-reference table across cards: one row per card and budget, measured
    figures only (each card's own runs; a card's budget defaults to its sweep's cap)."""
    shown_files = any(f for per_card in (files or []) for f in per_card)
    columns = [Column("card", "card"), Column("device", "device", wrap=True),
               Column("budget", "budget", "right"), Column("num_envs", "num_envs", "right"),
               Column("batch_size", "batch_size", "right"),
               Column("num_minibatches", "num_minibatches", "right"),
               Column("peak", "measured peak", "right"), Column("memory", "memory"),
               Column("steps_per_s", "steps/s", "right")]
    if shown_files:
        columns.append(Column("file", "file", code=True))
    rows, raw = [], []
    for i, (card, source, emissions) in enumerate(cards):
        names = list(files[i]) if files is not None else [None] * len(emissions)
        for emission, file in zip(emissions, names, strict=True):
            r = emission.chosen
            # the size's highest peak over its runs, as the file's header quotes it
            peak = emission.recommendation.peak_bytes if r is not None else None
            cells = [card, source.device, budget_label(emission.budget_bytes)]
            if r is None:
                cells += ["does not fit", fmt.NA, fmt.NA, fmt.NA, source.memory_label, fmt.NA]
            else:
                cells += [str(r.num_envs), str(r.batch_size), str(r.num_minibatches),
                          format_bytes(peak), source.memory_label,
                          fmt.rate(emission.recommendation.steady_steps_per_s)]
            rows.append(cells + [file or fmt.NA] if shown_files else cells)
            raw.append({"card": card, "device": source.device,
                        "budget_bytes": emission.budget_bytes,
                        "num_envs": r.num_envs if r else None,
                        "batch_size": r.batch_size if r else None,
                        "num_minibatches": r.num_minibatches if r else None,
                        "peak_bytes": peak, "memory": source.memory_label,
                        "steps_per_s": (emission.recommendation.steady_steps_per_s
                                        if r else None),
                        "confirmed": emission.recommendation.confirmation is not None,
                        "run_dirs": source.label, **({"file": file} if shown_files else {})})
    data = pd.DataFrame(raw).astype({"budget_bytes": "Int64", "num_envs": "Int64",
                                     "batch_size": "Int64", "num_minibatches": "Int64",
                                     "peak_bytes": "Int64", "steps_per_s": "Float64"}) \
        if raw else None
    return Table.from_rows(columns, rows, data=data)


def cards_markdown(cards: Sequence[CardEmissions],
                   files: Sequence[Sequence[str | None]] | None = None) -> str:
    """The per-card quick-reference table, with what each card's figures can and cannot say."""
    profile = cards[0][1].profile.name if cards else "?"
    lines = [f"### {profile} per card", "", cards_table(cards, files).to_markdown().rstrip("\n")]
    first = cards[0][2][0] if cards and cards[0][2] else None
    if first is not None:
        lines += ["", f"Objective {first.recommendation.objective}, headroom "
                      f"{first.headroom_fraction:.0%}; measured by vramtune on "
                      f"{_date(cards[0][1].created)}."]
    for card, source, emissions in cards:
        lines.append(f"- {card}: runs {source.label}")
        if any(CPU_NOTICE in e.notices for e in emissions):
            lines.append(f"  - {CPU_NOTICE}")
        lines += _budget_notes(emissions, "  - ")
    return "\n".join(lines) + "\n"


def _measured_words(source: Measurements) -> str:
    """'4 measured sizes (7 runs)': a size's repeats, re-measures and proof count as runs."""
    sizes = len({r.num_envs for r in source.results})
    runs = len(source.every_result) if source.every_result else len(source.results)
    noun = "size" if sizes == 1 else "sizes"
    return f"{sizes} measured {noun}" + (f" ({runs} runs)" if runs > sizes else "")
