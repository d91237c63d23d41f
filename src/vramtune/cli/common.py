"""Options and output helpers shared by the commands."""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from vramtune.cli.tables import WIDE_HELP
from vramtune.inputs import BUDGET_HELP, CACHE_HELP, DEVICES_HELP

MIN_WIDTH = 40  # below this no table or line is readable: COLUMNS=0 printed nothing at all
console = Console(highlight=False)  # a terminal's width; COLUMNS, when set, wins
if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
    # A pipe, a file, CI: no width to fit, so wide (not rich's 80, nor the width of a
    # terminal stderr happens to be on). Tables fit any width without cutting a number.
    console = Console(highlight=False, width=200)
elif console.width < MIN_WIDTH:  # COLUMNS=0, a 10-column pane: the usual 80
    console = Console(highlight=False, width=80)
# Off a terminal (a pipe, a log, CI) a message stays one line: rich would break it at its
# width, inside a path or a figure, and a grep would miss it. On a terminal it word-wraps.
err_console = Console(stderr=True, highlight=False)
if err_console.width < MIN_WIDTH:  # COLUMNS=0 printed nothing at all, on a pipe too
    err_console = Console(stderr=True, highlight=False,
                          width=80 if err_console.is_terminal else 200)
err_console.soft_wrap = not err_console.is_terminal

# Flags several commands share, declared once (as asv's common_args): the type, the flag and
# its help; a command gives the default. ``Json`` names what is printed.
GpuMem = Annotated[str | None, typer.Option("--gpu-mem", help=BUDGET_HELP)]
Devices = Annotated[int, typer.Option("--devices", help=DEVICES_HELP)]
Cache = Annotated[bool | None, typer.Option(help=CACHE_HELP)]
Wide = Annotated[bool, typer.Option("--wide", help=WIDE_HELP)]


def json_flag(what: str) -> Any:
    """``--json``, printing ``what`` as JSON instead of the text."""
    return typer.Option("--json", help=f"Print {what} as JSON.")


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised like Ctrl-C: the trial in flight is killed with its whole
    process group and its temporary folder removed, as on any other way out."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``Terminated`` while the block runs."""
    previous = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def stopped_with_one_line(what: str) -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP during one run (trial, verify): the runner has already
    killed the child and removed its folder; say so in one line and exit 130 or 143."""
    try:
        with signals_as_exceptions():
            yield
    except (KeyboardInterrupt, Terminated) as stop:
        terminated = isinstance(stop, Terminated)
        err_console.print(f"vramtune: {'terminated' if terminated else 'interrupted'}; {what}")
        raise typer.Exit(143 if terminated else 130) from None


def phase_printer(json_out: bool) -> Callable[[Any], None]:
    """The live 'phase…' lines a one-run command prints on stderr (none with --json)."""
    from vramtune.api import TrialPhase

    def show(event: Any) -> None:
        if not json_out and isinstance(event, TrialPhase):
            err_console.print(f"[dim]  {escape(event.phase)}…[/dim]")
    return show


def with_options(flags: Mapping[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command whose options are declared in the core (each a ``Flag``: its flag, help,
    type and default) rather than written out: one typer option per flag, placed before the
    command's own keyword-only parameters, read by typer as if written out. The command
    takes them as ``**options``."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [p.replace(annotation=hints[p.name])
               for p in inspect.signature(command).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        at = next((i for i, p in enumerate(own) if p.kind is inspect.Parameter.KEYWORD_ONLY),
                  len(own))
        declared = []
        for name, flag in flags.items():
            if not flag.flag:  # an option of the API's only
                continue
            cli = flag.cli if flag.default is not None else typing.Optional[flag.cli]  # noqa: UP045
            declared.append(inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=flag.default,
                annotation=Annotated[cli, typer.Option(flag.flag, help=flag.help)]))
        params = [*own[:at], *declared, *own[at:]]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command
    return decorate


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
