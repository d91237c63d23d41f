"""`vramtune explain`: where a saved sweep's memory goes, by role, per env and fixed, and the
largest num_envs predicted for cards you do not have."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import api
from vramtune.cli.common import Wide, console, err_console
from vramtune.cli.tables import rich_table
from vramtune.views.ledger import (
    cards_predicted_table,
    explanation_json,
    fits_table,
    ledger_table,
)


def explain(
    run_dir: Annotated[str, typer.Argument(help="A sweep's run directory (or its results.jsonl).",
                                           show_default=False)],
    num_envs: Annotated[int | None, typer.Option(
        "--num-envs", help="The size to break down (default: the sweep's pick); one not "
                           "measured is predicted from the sizes that were, and says so.",
        show_default=False)] = None,
    headroom: Annotated[str | None, typer.Option(help="Headroom for the cards' lines, e.g. "
                                                      "15% (default: the sweep's).")] = None,
    num_timesteps: Annotated[int | None, typer.Option(
        "--num-timesteps", help="The run you will launch: its peak at this length is "
                                "predicted (brax's epochs stack their loss metrics), with a "
                                "warning when it crosses the line.", show_default=False)] = None,
    num_evals: Annotated[int | None, typer.Option(
        "--num-evals", help="That run's num_evals (default: brax's 1, the whole run one "
                            "epoch).", show_default=False)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON: every size's roles, "
                                                          "the fits, the cards.")] = False,
    wide: Wide = False,
) -> None:
    """Where the memory goes: the parts of one size's peak by role (parameters, optimizer,
    env state, evaluation, XLA's temporaries, the rollout), what the parts do not explain,
    each role per env and fixed, and the num_envs predicted to fit common cards."""
    run = api.open_run(run_dir)
    for warning in run.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    expl = api.explain(run, num_envs=num_envs, headroom=headroom, num_timesteps=num_timesteps,
                       num_evals=num_evals)
    if json_out:
        typer.echo(json.dumps(explanation_json(expl), indent=2))
        return
    kind = "predicted from the sizes measured" if expl.predicted else "measured"
    console.print(f"run: {escape(expl.run_dir)} ({escape(expl.profile)}); figures are "
                  f"{expl.memory_words}")
    console.print(rich_table(ledger_table(expl), title=f"{expl.num_envs} envs ({kind})",
                             wide=wide), crop=False)
    if expl.phases:
        console.print(f"phases: {escape(expl.phases)}")
    if expl.error:
        console.print(f"[yellow]not counted in full:[/] {escape(expl.error)}")
    if expl.growth is not None:
        console.print(f"run length: {escape(expl.growth.words())}")
    elif num_timesteps is not None:
        console.print("run length: priced at measured sizes only (this one was predicted)")
    for warning in expl.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    sizes = ", ".join(f"{s.num_envs:,}" for s in expl.sizes)
    console.print(rich_table(fits_table(expl.fits), title=f"per env and fixed, over {sizes} "
                                                          f"envs", wide=wide), crop=False)
    cards = ("cards you do not have" if expl.backend == "gpu"
             else "host memory budgets not swept")
    console.print(rich_table(cards_predicted_table(expl.cards),
                             title=f"{cards}: predicted, headroom {expl.headroom_fraction:.0%}",
                             wide=wide), crop=False)
    notes = ["unexplained: what the parts do not count (runtime, libraries, compiler, "
             "fragmentation), never spread over them; the epoch's and the evaluation's "
             "temporaries are never live together, so the larger is the one counted",
             "predicted sizes were never run, and a straight line far past the sizes measured "
             "is a guess: a recommendation is only made from measured trials (sweep on the "
             "card itself)"]
    if expl.backend == "cpu":
        notes.append("CPU: the peak is the process's data segment (host RAM); a GPU's ledger "
                     "differs")
    else:
        notes.append("GPU: per device; the peak is the pool, and a card must hold the process "
                     "(NVML: the pool and what lives outside it)")
    for note in notes:
        console.print(f"[dim]{escape(note)}[/dim]")
