"""Options and output helpers shared by the commands."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from vramtune.units import SIZE_HELP, parse_size

console = Console(highlight=False)
if not console.is_terminal:  # logs and CI: wide enough that the comparison table never folds
    console = Console(highlight=False, width=200)
err_console = Console(stderr=True, highlight=False)

BUDGET_HELP = (f"Memory budget. GPU: emulate a card this size (JAX's memory fraction is "
               f"capped). CPU: host memory, enforced with RLIMIT_DATA. {SIZE_HELP}.")


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


def budget(text: str | None) -> int | None:
    return None if text is None else parse_size(text, what="--gpu-mem")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()
