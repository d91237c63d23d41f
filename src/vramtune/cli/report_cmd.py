"""`vramtune report` (one saved sweep: table, exports, plot) and `vramtune compare` (two)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import api, paths
from vramtune.api import Run
from vramtune.cli.common import Wide, console, err_console
from vramtune.cli.tables import compare_rich, rich_table, sweep_rich
from vramtune.errors import UserError
from vramtune.records import Objective
from vramtune.units import both_units, parse_percent
from vramtune.views import runs as cmp
from vramtune.views.configs import cards_markdown, cards_table
from vramtune.views.plot import plot_format, plot_run
from vramtune.views.sweep_table import SHARED_FOOTNOTE, sweep_table, unsettled_note


class TableFormat(StrEnum):
    """How a table is written: drawn for a terminal, or as Markdown / CSV / JSON."""

    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"


JSON_HELP = "Print JSON: the same as --format json."


def _format(format: TableFormat, json_out: bool) -> TableFormat:
    """--json is --format json, the flag every command that prints a result has."""
    if json_out and format not in (TableFormat.TABLE, TableFormat.JSON):
        raise UserError(f"--json and --format {format}: give one of them")
    return TableFormat.JSON if json_out else format


def _load(path: str) -> Run:
    run = api.open_run(path)
    for warning in run.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    return run


def report(
    run_dir: Annotated[str, typer.Argument(help="A sweep's run directory (or its results.jsonl).",
                                           show_default=False)],
    format: Annotated[TableFormat, typer.Option("--format", "-f", help="Output format.")] = TableFormat.TABLE,
    plot: Annotated[Path | None, typer.Option(help="Also write a plot here: .png (also "
                                                   "without a suffix), .pdf or .svg (needs "
                                                   "vramtune\\[plot]).")] = None,
    headroom: Annotated[str | None, typer.Option(help="Override the sweep's headroom, e.g. 15%.")]
    = None,
    objective: Annotated[Objective | None, typer.Option(help="Override the sweep's objective.")]
    = None,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    wide: Wide = False,
) -> None:
    """The comparison table of any saved sweep, re-choosing with its budget and headroom."""
    format = _format(format, json_out)
    headroom_fraction = None if headroom is None else parse_percent(headroom, what="--headroom")
    if plot is not None:  # before the work, so a bad path never costs the table
        paths.check_writable_file(plot, "--plot")
        plot_format(plot)
    run = _load(run_dir)
    h = run.header
    choice = api.choose_in_run(run, headroom=headroom_fraction, objective=objective)
    rec, headroom_fraction, objective = (choice.recommendation, choice.headroom_fraction,
                                         choice.objective)
    table = sweep_table(run.results, rec, h.budget_bytes)
    if format is TableFormat.CSV:
        sys.stdout.write(table.to_csv())
    elif format is TableFormat.JSON:
        sys.stdout.write(table.to_json())
    elif format is TableFormat.MARKDOWN:
        sys.stdout.write(cmp.report_markdown(run, rec, table, h.budget_bytes, headroom_fraction))
    else:
        if (stack := cmp.stack_line(run)) is not None:
            console.print(f"stack: {escape(stack)}")
        console.print(f"run: {escape(cmp.run_description(run))}")
        budget = both_units(h.budget_bytes) if h.budget_bytes else "none"
        title = (f"{h.profile_name}: budget {budget}, headroom {headroom_fraction:.0%}, "
                 f"objective {objective}")
        if len(table):
            console.print(sweep_rich(table, title=title, wide=wide), crop=False)
        else:
            console.print("no trials in this run yet")
        if run.results and not cmp.run_is_gpu(run):
            console.print("[dim]CPU backend: memory figures are host RAM (peak RSS), not "
                          "VRAM.[/dim]")
        if any(r.shared_run for r in run.results):
            console.print(f"[dim]{escape(SHARED_FOOTNOTE)}[/dim]")
        if (loose := unsettled_note(run.results)) is not None:
            console.print(f"[dim]{escape(loose)}[/dim]")
        colour = "green" if rec.chosen else "red"
        console.print(f"[bold {colour}]{escape(cmp.recommendation_line(rec, h.budget_bytes))}[/]")
    if plot is not None:  # after the table: a write error (disk full) leaves it printed
        written = plot_run(run, rec, plot, budget_bytes=h.budget_bytes,
                           headroom_fraction=headroom_fraction)
        err_console.print(f"plot written to {written}", markup=False)


def compare(
    run_a: Annotated[str, typer.Argument(help="First run directory (A), or a mixed-cluster "
                                              "sweep's parent directory alone.",
                                         show_default=False)],
    run_b: Annotated[str | None, typer.Argument(help="Second run directory (B).",
                                                show_default=False)] = None,
    format: Annotated[TableFormat, typer.Option("--format", "-f", help="Output format.")] = TableFormat.TABLE,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    wide: Wide = False,
) -> None:
    """Two saved sweeps side by side (two GPUs, two versions): peaks, steps/s, B/A ratios.
    A parent directory of several cards' runs: the per-card quick-reference table."""
    format = _format(format, json_out)
    if run_b is None:
        _compare_cards(run_a, format, wide)
        return
    a, b = _load(run_a), _load(run_b)
    table = cmp.compare_table(a, b)
    if format is TableFormat.CSV:
        sys.stdout.write(table.to_csv())
        for warning in cmp.compare_warnings(a, b):
            err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    elif format is TableFormat.JSON:
        sys.stdout.write(cmp.compare_json(a, b, table))
    elif format is TableFormat.MARKDOWN:
        sys.stdout.write(cmp.compare_markdown(a, b, table))
    else:
        # Off a terminal, one line each: rich wraps at its width, anywhere (inside a version
        # number), and a log must be grep-able for a whole line
        lines = not console.is_terminal
        for line in cmp.run_header_lines(a, b):
            console.print(escape(line), soft_wrap=lines)
        for warning in cmp.compare_warnings(a, b):
            console.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=lines)
        console.print(compare_rich(table, wide=wide), crop=False)


def _compare_cards(parent: str, format: TableFormat, wide: bool) -> None:
    """What each card of a mixed-cluster sweep gets at its sweep's own cap, side by side."""
    runs = api.expand_runs(parent)
    for directory in runs:
        _load(str(directory))  # warnings, once
    if len(runs) < 2:
        raise UserError(f"compare needs two run directories, or a parent directory of several "
                        f"runs; {parent} holds one run (see `vramtune report {runs[0]}`)")
    cards = [(card, source, [c.emission for c in configs])
             for card, source, configs in api.emit_cards(runs)]
    table = cards_table(cards)
    if format is TableFormat.CSV:
        sys.stdout.write(table.to_csv())
    elif format is TableFormat.JSON:
        sys.stdout.write(table.to_json())
    elif format is TableFormat.MARKDOWN:
        sys.stdout.write(cards_markdown(cards))
    else:
        console.print(rich_table(table, title=f"{cards[0][1].profile.name} per card, at each "
                                              f"sweep's cap", wide=wide), crop=False)
        for card, _source, emissions in cards:
            for e in emissions:
                if e.error:
                    console.print(f"[red]{escape(card)}:[/] {escape(e.error)}")
