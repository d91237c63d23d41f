"""`vramtune emit-config`: tuned YAML (and the per-budget table) from a sweep's measurements."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from vramtune import api, paths
from vramtune.api import CPU_NOTICE, Emission, Measurements, Run
from vramtune.cli.common import console, err_console, print_json
from vramtune.errors import UserError
from vramtune.records import Objective
from vramtune.units import SIZE_HELP, budget_label
from vramtune.views.configs import (
    ConfigFormat,
    cards_markdown,
    hydra_overrides,
    markdown_table,
    output_name,
    table_name,
)


def _write(path: Path, text: str) -> None:
    paths.write_text(path, text, "config")


def _say(text: str) -> None:
    err_console.print(text, markup=False, soft_wrap=True)


def _quiet(text: str) -> None:
    """--json: what would be said on stderr is in the JSON instead."""


def _record(config: api.EmittedConfig, file: Path | None, overrides: str | None,
            card: str | None = None) -> dict[str, Any]:
    """One budget's config as --json prints it: the pick, the text, where it went, why not."""
    e, chosen = config.emission, config.emission.chosen
    return {"card": card, "budget_bytes": e.budget_bytes, "headroom_fraction": e.headroom_fraction,
            "num_envs": chosen.num_envs if chosen else None,
            "batch_size": chosen.batch_size if chosen else None,
            "num_minibatches": chosen.num_minibatches if chosen else None,
            "file": str(file) if file is not None and config.text is not None else None,
            "text": config.text, "hydra_overrides": overrides, "error": e.error,
            "notices": list(e.notices), "optimisation_change": e.optimisation_change,
            "predicted": dataclasses.asdict(e.predicted) if e.predicted else None,
            # the run's length priced (--num-timesteps): its peak is predicted, never measured
            "growth": ({**dataclasses.asdict(e.growth), "crosses": e.growth.crosses}
                       if e.growth else None)}


def _targets(source: Measurements, emissions: list[Emission], fmt_: ConfigFormat, output: Path | None
             ) -> tuple[list[Path | None], Path | None]:
    """Where each budget's file goes, and the table (several budgets only).

    One budget: -o FILE (or a directory), else stdout. Several: -o DIR holds
    <profile>-<budget>.yaml and <profile>-table.md; -o NAME.yaml writes NAME-<budget>.yaml
    and NAME.md beside it; without -o they go to <first RUN_DIR>/configs/.
    """
    names = [output_name(source.profile.name, e.budget_bytes, fmt_) for e in emissions]
    if len(emissions) == 1:
        if output is None:
            return [None], None
        if paths.is_dir(output):
            return [paths.within(output, names[0])], None
        return [paths.check_writable_file(output, "-o")], None
    if output is not None and output.suffix in (".yaml", ".yml"):
        paths.check_writable_file(output, "-o")
        files = [output.with_name(f"{output.stem}-{budget_label(e.budget_bytes)}{output.suffix}")
                 for e in emissions]
        return list(files), output.with_suffix(".md")
    # The run's configs/ (no -o) must stay in the run: a run directory copied or shared can
    # hold a configs link pointing anywhere, and -o is the way to write elsewhere.
    folder = output if output is not None else paths.within(source.directories[0], "configs")
    if paths.exists(folder) and not paths.is_dir(folder):
        raise UserError(f"-o {folder}: several budgets write several files, so -o must be a "
                        f"directory or a NAME.yaml pattern")
    paths.check_writable_dir(folder, "-o" if output is not None else "the configs folder")
    return ([paths.within(folder, n) for n in names],
            paths.within(folder, table_name(source.profile.name, "table")))


def emit_config(
    run_dirs: Annotated[list[Path] | None, typer.Argument(
        metavar="RUN_DIR", help="Sweep run directories (same workload and device; merged), or "
                                "a mixed-cluster sweep's parent directory (one config and one "
                                "table row per card). Default: the newest under "
                                "./vramtune-runs/.")] = None,
    gpu_mem: Annotated[str | None, typer.Option(
        "--gpu-mem", help=f"Budget(s), comma-separated: one config per budget. Default: the "
                          f"sweep's own cap. {SIZE_HELP}.")] = None,
    objective: Annotated[Objective | None, typer.Option(
        help="throughput: fastest that fits; knee: smallest within 5% of the fastest; "
             "max-envs: most envs that fit. Default: the sweep's own (so the file holds the "
             "size it confirmed), else throughput.", show_default=False)] = None,
    headroom: Annotated[str | None, typer.Option(
        help="Keep this share of the budget free (e.g. 10%). Default: the sweep's.")] = None,
    format_: Annotated[ConfigFormat, typer.Option("--format", help="brax: ppo.train kwargs; "
                                                            "playground: a ppo_params mapping; "
                                                            "hydra: a config plus an override "
                                                            "line.")] = ConfigFormat.BRAX,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="One budget: the file (default: stdout). Several: a directory, "
                               "or NAME.yaml for NAME-<budget>.yaml + NAME.md.")] = None,
    num_timesteps: Annotated[int | None, typer.Option(
        "--num-timesteps", help="Training length to write into the config (not measured); "
                                "the run's peak at that length is predicted, and a run that "
                                "would cross the line is a notice.")] = None,
    num_evals: Annotated[int | None, typer.Option(
        "--num-evals", help="The run's num_evals, written into the config (default: not "
                            "written; priced as brax's 1, the whole run one epoch).",
        show_default=False)] = None,
    hydra_prefix: Annotated[str, typer.Option(
        help="Hydra: the config key the PPO settings live under.")] = "ppo",
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object (each budget's pick, YAML text, file written, "
                       "notices) instead of the YAML and the table; files are written as "
                       "without it.")] = False,
) -> None:
    """Write tuned configs from measured trials only; exit 1 if a budget cannot be served."""
    say = _quiet if json_out else _say
    warnings: list[str] = []
    if not run_dirs:
        run_dirs = [api.newest_run()]
        say(f"using the newest run: {run_dirs[0]}")
    given = list(run_dirs)
    run_dirs = api.expand_runs(run_dirs)  # a mixed-cluster sweep's parent: the runs under it
    runs = [api.open_run(directory) for directory in run_dirs]  # each read once
    for run in runs:
        for warning in run.warnings:
            warnings.append(warning)
            say(f"warning: {warning}")
    if len(api.runs_by_card(runs)) > 1:
        _emit_cards(given, run_dirs, runs, gpu_mem=gpu_mem, objective=objective,
                    headroom=headroom, format_=format_, output=output,
                    num_timesteps=num_timesteps, num_evals=num_evals,
                    hydra_prefix=hydra_prefix, say=say,
                    json_warnings=warnings if json_out else None)
    source, configs = api.emit_config(runs, gpu_mem=gpu_mem, objective=objective,
                                      headroom=headroom, format=format_,
                                      num_timesteps=num_timesteps, hydra_prefix=hydra_prefix,
                                      num_evals=num_evals)
    emissions = [c.emission for c in configs]
    files, table = _targets(source, emissions, format_, output)
    failed = False
    said: set[str] = set()
    records: list[dict[str, Any]] = []
    for config, file in zip(configs, files, strict=True):
        emission, text = config.emission, config.text
        tag = f"{budget_label(emission.budget_bytes)}: " if len(emissions) > 1 else ""
        if emission.error or text is None:
            failed = True
            say(f"error: budget {budget_label(emission.budget_bytes)}: {emission.error}")
            records.append(_record(config, None, None))
            continue
        for notice in emission.notices:
            if notice == CPU_NOTICE:  # the same for every budget: say it once
                if notice not in said:
                    said.add(notice)
                    say(f"notice: {notice}")
                continue
            say(f"{tag}notice: {notice}")
        if emission.optimisation_change:
            say(f"{tag}note: {emission.optimisation_change}")
        if emission.predicted is not None:
            say(f"{tag}{emission.predicted}")
        overrides = (hydra_overrides(emission, hydra_prefix) if format_ is ConfigFormat.HYDRA
                     else None)
        records.append(_record(config, file, overrides))
        if file is None:
            if not json_out:
                typer.echo(text, nl=False)
            continue
        _write(file, text)
        say(f"wrote {file}")
        if overrides is not None and not json_out:
            typer.echo(f"{tag}{overrides}")
    if table is not None:
        written = [str(f.name) if f is not None and e.chosen is not None else None
                   for e, f in zip(emissions, files, strict=True)]
        text = markdown_table(source, emissions, written)
        if any(e.chosen is not None for e in emissions):
            _write(table, text)
            say(f"wrote {table}")
        else:
            table = None
        if not json_out:
            console.print(text, markup=False, soft_wrap=True, end="")
    if json_out:
        print_json({"profile": source.profile.name, "runs": [str(d) for d in run_dirs],
                    "configs": records, "table": str(table) if table else None,
                    "warnings": warnings})
    raise typer.Exit(1 if failed else 0)


def _emit_cards(given: list[Path], run_dirs: list[Path], runs: list[Run], *,
                gpu_mem: str | None, objective: Objective | None, headroom: str | None,
                format_: ConfigFormat, output: Path | None, num_timesteps: int | None,
                hydra_prefix: str, num_evals: int | None = None, say: Callable[[str], None] = _say,
                json_warnings: list[str] | None = None) -> None:
    """Runs of several cards (a mixed cluster's parent directory): one config per card and
    budget, and the per-card quick-reference table, in -o DIR or <first directory
    given>/configs/ (the parent's, or the first run's).
    ``json_warnings`` not None: print the JSON object (with these warnings), not the table."""
    cards = api.emit_cards(runs, gpu_mem=gpu_mem, objective=objective, headroom=headroom,
                           format=format_, num_timesteps=num_timesteps,
                           hydra_prefix=hydra_prefix, num_evals=num_evals)
    if output is not None and paths.exists(output) and not paths.is_dir(output):
        raise UserError(f"-o {output}: several cards write several files, so -o must be a "
                        f"directory")
    # the first directory given (a parent, or a run; a results file's run), as for one card
    base = given[0] if paths.is_dir(given[0]) else given[0].parent
    # every file inside its folder, checked before any is written (a link named configs
    # that leads out of the runs is refused, as for one run)
    folder = output if output is not None else paths.within(base, "configs")
    paths.check_writable_dir(folder, "-o" if output is not None else "the configs folder")
    failed = False
    files: list[list[str | None]] = []
    records: list[dict[str, Any]] = []
    for card, source, configs in cards:
        names: list[str | None] = []
        for config in configs:
            emission, text = config.emission, config.text
            tag = f"{card} {budget_label(emission.budget_bytes)}"
            if emission.error or text is None:
                failed = True
                say(f"error: {tag}: {emission.error}")
                names.append(None)
                records.append(_record(config, None, None, card))
                continue
            for notice in emission.notices:
                if notice != CPU_NOTICE:
                    say(f"{tag}: notice: {notice}")
            if emission.optimisation_change:
                say(f"{tag}: note: {emission.optimisation_change}")
            if emission.predicted is not None:
                say(f"{tag}: {emission.predicted}")
            name = output_name(f"{source.profile.name}-{_slug(card)}", emission.budget_bytes,
                               format_)
            _write(paths.within(folder, name), text)
            say(f"wrote {folder / name}")
            overrides = (hydra_overrides(emission, hydra_prefix)
                         if format_ is ConfigFormat.HYDRA else None)
            records.append(_record(config, folder / name, overrides, card))
            if overrides is not None and json_warnings is None:
                typer.echo(f"{tag}: {overrides}")
            names.append(name)
        files.append(names)
    if any(CPU_NOTICE in c.emission.notices for _, _, configs in cards for c in configs):
        say(f"notice: {CPU_NOTICE}")
    emissions = [(card, source, [c.emission for c in configs]) for card, source, configs in cards]
    text = cards_markdown(emissions, files)
    table = None
    if any(name for names in files for name in names):
        table = paths.within(folder, table_name(cards[0][1].profile.name, "cards"))
        _write(table, text)
        say(f"wrote {table}")
    if json_warnings is not None:
        print_json({"profile": cards[0][1].profile.name, "runs": [str(d) for d in run_dirs],
                    "configs": records, "table": str(table) if table else None,
                    "warnings": json_warnings})
    else:
        console.print(text, markup=False, soft_wrap=True, end="")
    raise typer.Exit(1 if failed else 0)


def _slug(card: str) -> str:
    """A card's name as a file name part: 'NVIDIA A100-SXM4-80GB' -> 'NVIDIA-A100-SXM4-80GB'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", card).strip("-") or "card"
