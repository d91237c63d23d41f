"""`vramtune trial`: one measured trial, for debugging a workload or a size."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from vramtune import api
from vramtune.cli.common import (
    Cache,
    Devices,
    GpuMem,
    console,
    err_console,
    json_flag,
    phase_printer,
    print_json,
    stopped_with_one_line,
)
from vramtune.fmt import trial_fields
from vramtune.records import Status, TrialResult


def render_trial(result: TrialResult) -> Panel:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in trial_fields(result):
        table.add_row(label, escape(value))  # error messages and paths are text, not markup
    colour = "green" if result.status is Status.OK else "red"
    return Panel(table, title=f"trial: {result.status}", border_style=colour, expand=False)


def trial(
    profile: Annotated[str, typer.Option(help="Built-in profile name or a profile YAML file.")]
    = "quick",
    num_envs: Annotated[int | None, typer.Option("--num-envs", "-n",
                                                 help="Parallel environments (default: the "
                                                      "profile's num_envs).")] = None,
    gpu_mem: GpuMem = None,
    timeout: Annotated[float | None, typer.Option(help="Kill the trial after this many seconds "
                                                      "(default: the profile's).")] = None,
    json_out: Annotated[bool, json_flag("the record")] = False,
    cache: Cache = None,
    devices: Devices = 1,
) -> None:
    """Run ONE real PPO trial in a subprocess and print its measured record."""
    request = api.trial_request(profile, num_envs, gpu_mem=gpu_mem, timeout_s=timeout,
                                cache=cache, devices=devices)
    nvml = api.Nvml()
    if nvml.notice and not json_out:
        err_console.print(f"[dim]note: {escape(nvml.notice)}[/dim]")
    with stopped_with_one_line("the trial was stopped"):
        result = api.run_request(request, on_event=phase_printer(json_out), nvml=nvml)
    if json_out:
        print_json(result.to_dict())
    else:
        console.print(render_trial(result))
    raise typer.Exit(0 if result.status is Status.OK else 1)
