"""`vramtune check FILE`: is this config valid for Brax PPO, and if not, what is closest?"""

from __future__ import annotations

from typing import Annotated

import typer

from vramtune import api
from vramtune.cli.common import console, json_flag, print_json
from vramtune.views.check import check_dict, check_lines


def check(
    file: Annotated[str, typer.Argument(help="A YAML config: flat ppo.train kwargs or nested "
                                             "(ppo:, experiment:, algorithm:, ...).")],
    device_count: Annotated[int, typer.Option("--device-count", help="Devices the envs are "
                                                                     "split across.")] = 1,
    json_out: Annotated[bool, json_flag("the diagnosis")] = False,
) -> None:
    """Check a config against Brax PPO's batch rules. Exit 0 valid, 1 invalid, 2 unreadable."""
    diagnosis = api.check(file, devices=device_count)
    if json_out:
        print_json(check_dict(diagnosis))
    else:
        for line in check_lines(diagnosis):
            console.print(line, markup=False, soft_wrap=True)
    raise typer.Exit(0 if diagnosis.valid else 1)
