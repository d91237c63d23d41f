"""`vramtune profiles` and `vramtune init-profile`: the workloads shipped, and a starter file."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import api
from vramtune.api import BRAX_BACKENDS
from vramtune.cli.common import console, err_console, json_flag, print_json
from vramtune.views.profiles import physics


def profiles(
    json_out: Annotated[bool, json_flag("the profiles")] = False,
) -> None:
    """List the built-in profiles: name, environment source, physics, description."""
    loaded = api.profiles()
    if json_out:
        print_json([{"name": p.name, "env": p.env, "backend": p.backend, "impl": p.impl,
                     "num_envs": p.num_envs, "description": p.description, "path": p.source}
                    for p in loaded])
        return
    rows = [("name", "env", "physics", "description")]
    rows += [(p.name, p.env, physics(p), p.description) for p in loaded]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    # Plain lines, one per profile: easy to grep and pipe. In a terminal too narrow for
    # them, each description goes on its own indented line(s) below its profile's.
    head = ["  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True))
            for row in rows]
    columns = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    widest = max(len(h) + 2 + len(row[3]) for h, row in zip(head, rows, strict=True))
    if columns is None or widest <= columns:
        for h, row in zip(head, rows, strict=True):
            typer.echo(h + "  " + row[3])
        return
    for h, row in zip(head, rows, strict=True):
        typer.echo(h.rstrip())
        for line in textwrap.wrap(row[3], max(20, columns - 4)):
            typer.echo("    " + line)


def init_profile(
    env: Annotated[str, typer.Option("--env", help="brax:<name>, playground:<Name> or "
                                                   "package.module:factory.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Profile YAML to write.")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    name: Annotated[str | None, typer.Option(help="Profile name (default: from the env).")]
    = None,
    backend: Annotated[str | None, typer.Option(
        help=f"brax physics backend ({', '.join(BRAX_BACKENDS)}; default generalized).")] = None,
    json_out: Annotated[bool, json_flag("the profile written")] = False,
) -> None:
    """Write a starter profile filled from the source's canonical config (Playground:
    brax_ppo_config; brax: Brax's published PPO settings; factory: a template)."""
    def reading() -> None:  # keep piped stderr to the one line an error needs
        if err_console.is_terminal and not json_out:
            err_console.print(f"[dim]reading the canonical config of {escape(env)}…[/dim]")

    profile, origin = api.init_profile(env, output, force=force, name=name, backend=backend,
                                       on_reading=reading)
    try_it = f"vramtune trial --profile {output} --num-envs {profile.first_size}"
    if json_out:
        print_json({"file": str(output), "name": profile.name, "env": profile.env,
                    "backend": profile.backend, "impl": profile.impl,
                    "num_envs": profile.num_envs, "batch_size": profile.batch_size,
                    "num_minibatches": profile.num_minibatches,
                    "unroll_length": profile.unroll_length, "origin": origin, "try": try_it})
        return
    console.print(f"wrote {output}: profile {profile.name!r} ({profile.env}, num_envs "
                  f"{profile.num_envs}, batch {profile.batch_size} x {profile.num_minibatches}, "
                  f"unroll {profile.unroll_length})", markup=False)
    console.print(f"try it: {try_it}", markup=False)
