"""Options and output helpers shared by the commands."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from vramtune.units import SIZE_HELP

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

BUDGET_HELP = (f"Memory budget. GPU: emulate a card this size (JAX's memory fraction is "
               f"capped). CPU: host memory, enforced with RLIMIT_DATA. {SIZE_HELP}.")


CACHE_HELP = ("JAX's persistent compilation cache. Default: on, except on CPU under a budget, "
              "where a cache hit skips compilation and the host memory a first training run "
              "pays (--cache uses it anyway).")
DEVICES_HELP = ("Devices each trial trains on (brax pmaps over all of them; num_envs must divide "
                "evenly). GPU: the first N GPUs CUDA would use, pinned by UUID, budget per GPU. "
                "CPU: N XLA host devices in one process under one budget.")


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
    from vramtune.measure.wire import TrialPhase

    def show(event: Any) -> None:
        if not json_out and isinstance(event, TrialPhase):
            err_console.print(f"[dim]  {escape(event.phase)}…[/dim]")
    return show


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
