"""`vramtune trial`: one measured trial, for debugging a workload or a size."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from vramtune.cli.common import BUDGET_HELP, budget, console, err_console, print_json
from vramtune.errors import UserError
from vramtune.fmt import trial_fields
from vramtune.machine import default_cache_dir
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_overhead_bytes
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import Status, TrialResult
from vramtune.workload.profile import load_profile


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
    gpu_mem: Annotated[str | None, typer.Option("--gpu-mem", help=BUDGET_HELP)] = None,
    timeout: Annotated[float | None, typer.Option(help="Kill the trial after this many seconds "
                                                      "(default: the profile's).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the record as JSON.")] = False,
    cache: Annotated[bool, typer.Option(help="Use JAX's persistent compilation cache.")] = True,
) -> None:
    """Run ONE real PPO trial in a subprocess and print its measured record."""
    budget_bytes = budget(gpu_mem)
    prof = load_profile(profile)
    n = prof.num_envs if num_envs is None else num_envs
    if n < 1:
        raise UserError(f"--num-envs must be a positive integer, got {num_envs}")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout must be positive, got {timeout:g}")
    nvml = Nvml()
    if nvml.notice and not json_out:
        err_console.print(f"[dim]note: {nvml.notice}[/dim]")
    request = TrialRequest(prof, n, budget_bytes=budget_bytes, timeout_s=timeout,
                           compile_cache_dir=str(default_cache_dir() / "jax") if cache else None)

    def show(event: dict) -> None:
        if not json_out and "phase" in event:
            err_console.print(f"[dim]  {event['phase']}…[/dim]")

    overhead = measure_overhead_bytes(nvml) if budget_bytes and nvml.available else None
    result = run_trial(request, show, nvml=nvml, overhead_bytes=overhead)
    if json_out:
        print_json(result.to_dict())
    else:
        console.print(render_trial(result))
    raise typer.Exit(0 if result.status is Status.OK else 1)
