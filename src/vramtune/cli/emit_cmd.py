"""`vramtune emit-config`: tuned YAML (and the per-budget table) from a sweep's measurements."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from vramtune import api, paths
from vramtune.cli.common import console, err_console
from vramtune.errors import UserError
from vramtune.results.store import RESULTS_FILE, load_run
from vramtune.tune.budgets import CPU_NOTICE, Emission, Measurements
from vramtune.tune.recommend import Objective
from vramtune.units import SIZE_HELP, budget_label
from vramtune.views.configs import (
    ConfigFormat,
    cards_markdown,
    hydra_overrides,
    markdown_table,
    output_name,
)
from vramtune.workload.profile import safe_name

RUNS_DIR = Path("vramtune-runs")


def newest_run(base: Path = RUNS_DIR) -> Path:
    """The run directory under ./vramtune-runs/ whose results were written last."""
    runs = [d for d in base.iterdir() if (d / RESULTS_FILE).is_file()] if base.is_dir() else []
    if not runs:
        raise UserError(f"no RUN_DIR given and no run under ./{base}/: run `vramtune sweep` first "
                        f"or name a run directory")
    return max(runs, key=lambda d: ((d / RESULTS_FILE).stat().st_mtime, d.name))


def _write(path: Path, text: str) -> None:
    paths.write_text(path, text, "config")


def _say(text: str) -> None:
    err_console.print(text, markup=False, soft_wrap=True)


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
            paths.within(folder, f"{safe_name(source.profile.name)}-table.md"))


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
        "--num-timesteps", help="Training length to write into the config (not measured).")] = None,
    hydra_prefix: Annotated[str, typer.Option(
        help="Hydra: the config key the PPO settings live under.")] = "ppo",
) -> None:
    """Write tuned configs from measured trials only; exit 1 if a budget cannot be served."""
    if not run_dirs:
        run_dirs = [newest_run()]
        _say(f"using the newest run: {run_dirs[0]}")
    given = list(run_dirs)
    run_dirs = api.expand_runs(run_dirs)  # a mixed-cluster sweep's parent: the runs under it
    for directory in run_dirs:
        for warning in load_run(directory).warnings:
            _say(f"warning: {warning}")
    if len(api.runs_by_card(run_dirs)) > 1:
        _emit_cards(given, run_dirs, gpu_mem=gpu_mem, objective=objective, headroom=headroom,
                    format_=format_, output=output, num_timesteps=num_timesteps,
                    hydra_prefix=hydra_prefix)
    source, configs = api.emit_config(run_dirs, gpu_mem=gpu_mem, objective=objective,
                                      headroom=headroom, format=format_,
                                      num_timesteps=num_timesteps, hydra_prefix=hydra_prefix)
    emissions = [c.emission for c in configs]
    files, table = _targets(source, emissions, format_, output)
    failed = False
    said: set[str] = set()
    for config, file in zip(configs, files, strict=True):
        emission, text = config.emission, config.text
        tag = f"{budget_label(emission.budget_bytes)}: " if len(emissions) > 1 else ""
        if emission.error or text is None:
            failed = True
            _say(f"error: budget {budget_label(emission.budget_bytes)}: {emission.error}")
            continue
        for notice in emission.notices:
            if notice == CPU_NOTICE:  # the same for every budget: say it once
                if notice not in said:
                    said.add(notice)
                    _say(f"notice: {notice}")
                continue
            _say(f"{tag}notice: {notice}")
        if emission.optimisation_change:
            _say(f"{tag}note: {emission.optimisation_change}")
        if emission.predicted is not None:
            _say(f"{tag}{emission.predicted}")
        if file is None:
            typer.echo(text, nl=False)
            continue
        _write(file, text)
        _say(f"wrote {file}")
        if format_ is ConfigFormat.HYDRA:
            typer.echo(f"{tag}{hydra_overrides(emission, hydra_prefix)}")
    if table is not None:
        written = [str(f.name) if f is not None and e.chosen is not None else None
                   for e, f in zip(emissions, files, strict=True)]
        text = markdown_table(source, emissions, written)
        if any(e.chosen is not None for e in emissions):
            _write(table, text)
            _say(f"wrote {table}")
        console.print(text, markup=False, soft_wrap=True, end="")
    raise typer.Exit(1 if failed else 0)


def _emit_cards(given: list[Path], run_dirs: list[Path], *, gpu_mem: str | None,
                objective: Objective | None, headroom: str | None, format_: ConfigFormat,
                output: Path | None, num_timesteps: int | None, hydra_prefix: str) -> None:
    """Runs of several cards (a mixed cluster's parent directory): one config per card and
    budget, and the per-card quick-reference table, in -o DIR or <parent>/configs/."""
    cards = api.emit_cards(run_dirs, gpu_mem=gpu_mem, objective=objective, headroom=headroom,
                           format=format_, num_timesteps=num_timesteps,
                           hydra_prefix=hydra_prefix)
    if output is not None and output.exists() and not output.is_dir():
        raise UserError(f"-o {output}: several cards write several files, so -o must be a "
                        f"directory")
    base = given[0] if len(given) == 1 and given[0] not in run_dirs else run_dirs[0].parent
    folder = output if output is not None else base / "configs"
    failed = False
    files: list[list[str | None]] = []
    for card, source, configs in cards:
        names: list[str | None] = []
        for config in configs:
            emission, text = config.emission, config.text
            tag = f"{card} {budget_label(emission.budget_bytes)}"
            if emission.error or text is None:
                failed = True
                _say(f"error: {tag}: {emission.error}")
                names.append(None)
                continue
            for notice in emission.notices:
                if notice != CPU_NOTICE:
                    _say(f"{tag}: notice: {notice}")
            if emission.optimisation_change:
                _say(f"{tag}: note: {emission.optimisation_change}")
            if emission.predicted is not None:
                _say(f"{tag}: {emission.predicted}")
            name = output_name(f"{source.profile.name}-{_slug(card)}", emission.budget_bytes,
                               format_)
            _write(folder / name, text)
            _say(f"wrote {folder / name}")
            if format_ is ConfigFormat.HYDRA:
                typer.echo(f"{tag}: {hydra_overrides(emission, hydra_prefix)}")
            names.append(name)
        files.append(names)
    if any(CPU_NOTICE in c.emission.notices for _, _, configs in cards for c in configs):
        _say(f"notice: {CPU_NOTICE}")
    emissions = [(card, source, [c.emission for c in configs]) for card, source, configs in cards]
    text = cards_markdown(emissions, files)
    if any(name for names in files for name in names):
        table = folder / f"{cards[0][1].profile.name}-cards.md"
        _write(table, text)
        _say(f"wrote {table}")
    console.print(text, markup=False, soft_wrap=True, end="")
    raise typer.Exit(1 if failed else 0)


def _slug(card: str) -> str:
    """A card's name as a file name part: 'NVIDIA A100-SXM4-80GB' -> 'NVIDIA-A100-SXM4-80GB'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", card).strip("-") or "card"
