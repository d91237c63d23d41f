"""`vramtune verify CONFIG.yaml --gpu-mem 8GB`: train a config long, under the capped budget."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import api
from vramtune.cli.common import (
    Cache,
    Devices,
    GpuMem,
    console,
    json_flag,
    phase_printer,
    print_json,
    stopped_with_one_line,
)
from vramtune.cli.trial_cmd import render_trial
from vramtune.records import Status
from vramtune.units import format_bytes


def verify(
    config: Annotated[Path, typer.Argument(help="A config vramtune emitted, or your own YAML "
                                                "(any layout `check` reads).")],
    gpu_mem: GpuMem = None,
    profile: Annotated[str | None, typer.Option(
        help="The workload the config trains (built-in name or profile YAML); default: the "
             "profile named in a file vramtune emitted. The file's own ppo.train settings "
             "(run_evals, learning_rate, ...) beside its num_envs win over the profile's.")] = None,
    steps: Annotated[int, typer.Option(help="Training steps to run (evaluation as the config "
                                            "has it).")] = 100,
    headroom: Annotated[str, typer.Option(help="Cap the run at the budget minus this, as the "
                                               "sweep does.")] = "10%",
    timeout: Annotated[float | None, typer.Option(help="Time limit in seconds (default: 10x "
                                                      "the profile's trial limit).")] = None,
    cache: Cache = None,
    json_out: Annotated[bool, json_flag("the record")] = False,
    devices: Devices = 1,
) -> None:
    """Train CONFIG's settings much longer than a trial, under the same cap; exit 0 if it fit."""
    def settings(origin: str) -> None:  # which are the file's, the profile's: before minutes
        if not json_out:
            console.print(f"settings: batch from {escape(str(config))}; workload from "
                          f"{escape(origin)}")

    with stopped_with_one_line("the run was stopped"):
        result = api.verify(config, gpu_mem=gpu_mem, profile=profile, headroom=headroom,
                            steps=steps, timeout_s=timeout, cache=cache, devices=devices,
                            on_event=phase_printer(json_out), on_origin=settings)
    if json_out:
        print_json(result.to_dict())
    else:
        console.print(render_trial(result))
        if result.status is Status.OK:
            peak = result.line_figure_bytes
            what = f" {result.cap_figure_words}" if result.cap_figure_words else ""
            console.print(f"[bold green]verified:[/] {escape(str(config))} trained "
                          f"{result.training_steps} training steps under {escape(result.cap or '')}"
                          f", peak {format_bytes(peak)} {result.memory_label}{what}")
        else:
            last = (result.error_message or "").strip().splitlines()[-1:] or [""]
            console.print(f"[bold red]not verified:[/] {result.status}: {escape(last[0])}")
    raise typer.Exit(0 if result.status is Status.OK else 1)
