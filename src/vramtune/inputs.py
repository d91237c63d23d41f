"""What a person types, checked once: each option's check lives here and nowhere else.

Every function takes what a person would type (``"8GB"``, ``"10%"``) or the plain number
(bytes, a fraction) and returns the checked value, or raises ``UserError`` with one line that
says what was expected. None stays None: the caller's default applies.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from vramtune.errors import CONTROL, UserError, quoted
from vramtune.measure.cap import MIN_CPU_CAP_BYTES as MIN_CAP_BYTES
from vramtune.records import MAX_PARALLEL, PARALLEL_AUTO, Objective
from vramtune.schema import MAX_NUM_ENVS
from vramtune.units import SIZE_HELP, parse_percent, parse_size, parse_sizes
from vramtune.workload.profile import MAX_TIMEOUT_S

E = TypeVar("E", bound=StrEnum)
Size = str | int | None
Percent = str | float | None

MAX_REFINE = 1000
BUDGET_HELP = (f"Memory budget. GPU: emulate a card this size (JAX's memory fraction is "
               f"capped). CPU: host memory, enforced with RLIMIT_DATA. {SIZE_HELP}.")
CACHE_HELP = ("JAX's persistent compilation cache. Default: on, except on CPU under a budget, "
              "where a cache hit skips compilation and the host memory a first training run "
              "pays (--cache uses it anyway).")
DEVICES_HELP = ("Devices each trial trains on (brax pmaps over all of them; num_envs must divide "
                "evenly). GPU: the first N GPUs CUDA would use, pinned by UUID, budget per GPU. "
                "CPU: N XLA host devices in one process under one budget.")
MAX_TRAINING_STEPS = 1_000_000
MAX_NUM_TIMESTEPS = 10**15
_HYDRA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def as_bytes(value: Size, what: str = "--gpu-mem") -> int | None:
    """Bytes from '8GB' / 8_000_000_000 / None."""
    if value is None:
        return None
    if isinstance(value, str) and not value.strip():
        raise UserError(f"{what} is empty: give a size such as 8GB, or leave the option out")
    return parse_size(value, what=what)


def as_cap(value: Size, what: str = "--gpu-mem") -> int | None:
    """A budget a trial will run under: a size, and at least MIN_CAP_BYTES (below it Python
    cannot even start under RLIMIT_DATA, and no CUDA context fits on a card)."""
    budget = as_bytes(value, what)
    if budget is not None and budget < MIN_CAP_BYTES:
        raise UserError(f"{what} {quoted(value)}: below {MIN_CAP_BYTES >> 20} MiB, less than a Python "
                        f"process needs to start and import JAX")
    return budget


def as_budgets(value: str | int | float | Sequence[str | int | float | None],
               what: str = "--gpu-mem") -> list[int | None]:
    """Budgets to read measurements against ('8GB,12GB' or a list), each at least
    MIN_CAP_BYTES as a trial's cap must be, in the order given, duplicates dropped; at
    least one. None in a list is the run's own budget, kept in its place.

    A bare number is bytes, so '1,3GB' would read as 1 byte and 3 GB: a decimal comma (or a
    thousands separator, '1,300MB') is named in the error rather than read as two budgets."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        for whole, rest in zip(parts, parts[1:], strict=False):
            digits = _LEADING_DIGITS.match(rest)
            if _ASCII_DIGITS.fullmatch(whole) and int(whole) < MIN_CAP_BYTES and digits:
                short = len(whole) + len(rest) <= 24  # else the hint is not echoed
                hint = (("without the thousands separator" + (f" ({whole}{rest})" if short else ""))
                        if len(digits[0]) == 3
                        else "with a decimal point" + (f" ({whole}.{rest})" if short else ""))
                raise UserError(f"{what} {quoted(value)}: a comma separates budgets, so "
                                f"{quoted(whole)} alone would mean {whole} B; for one budget "
                                f"write it {hint}")
        parse_sizes(value, what=what)  # its own message for a list with no size in it
        values: list[str | int | float | None] = [p for p in parts if p]
    elif isinstance(value, int | float):
        values = [value]
    elif isinstance(value, list | tuple):
        values = list(value)
    else:
        raise UserError(f"{what}: expected a size such as 8GB, or a list of them, got "
                        f"{quoted(value)}")
    budgets = list(dict.fromkeys(as_cap(v, what) for v in values))
    if not budgets:
        raise UserError(f"{what}: no budget given: expected e.g. 8GB or 8GB,12GB")
    return budgets


_ASCII_DIGITS = re.compile(r"[0-9]{1,9}")
_LEADING_DIGITS = re.compile(r"[0-9]+")


def as_fraction(value: Percent, what: str = "--headroom") -> float | None:
    """A fraction in [0, 1) from '10%' / '10' (percent) or a float; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise UserError(f"{what} is empty: give a percentage such as 10%, or leave it out")
        return parse_percent(value, what=what)
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not 0 <= float(value) < 1):
        raise UserError(f"{what} as a number must be a fraction in [0, 1), got {quoted(value)}")
    return float(value)


def check_timeout(timeout_s: float | None) -> float | None:
    """A time limit: positive, finite (nan and inf never time out), at most MAX_TIMEOUT_S."""
    if timeout_s is None:
        return None
    if (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
            or not 0 < timeout_s <= MAX_TIMEOUT_S):
        raise UserError(f"--timeout must be a number of seconds above 0 and at most "
                        f"{MAX_TIMEOUT_S}, got {quoted(timeout_s)}")
    return timeout_s


def as_path(value: str | Path | None, what: str) -> Path | None:
    """A path option; an empty one is an error (Path('') would silently mean '.')."""
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike):
        raise UserError(f"{what} must be a path (a str or Path), got {quoted(value)}")
    if not str(value).strip():
        raise UserError(f"{what} is empty: give a directory, or leave the option out")
    if "\0" in str(value):
        raise UserError(f"{what} {quoted(str(value))}: a path cannot hold a NUL character")
    return Path(value)


def required_path(value: str | Path | None, what: str) -> Path:
    """A path argument that has no default: as ``as_path``, and None refused too."""
    path = as_path(value, what)
    if path is None:
        raise UserError(f"{what} is required: give a path")
    return path


def as_choice(value: str | E | None, choices: type[E], what: str) -> E | None:
    """One of an enum's values ('knee' -> Objective.KNEE); None stays None."""
    return None if value is None else required_choice(value, choices, what)


def required_choice(value: str | E, choices: type[E], what: str) -> E:
    """One of an enum's values, where there is no default to fall back on (None is refused)."""
    if isinstance(value, choices):
        return value
    try:
        return choices(value)
    except ValueError:
        raise UserError(f"unknown {what} {quoted(value)}: expected one of "
                        f"{', '.join(c.value for c in choices)}") from None


def as_objective(value: str | Objective | None) -> Objective | None:
    return as_choice(value, Objective, "objective")


def as_devices(value: int | None) -> int | None:
    """--devices: a positive integer, or None for the default (1, or a resumed run's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"--devices must be a positive integer, got {quoted(value)}")
    return value


def as_parallel(value: int | str | None) -> int | str | None:
    """--parallel: 'auto' (as many capped trials as the device holds, planned by the
    executor) or an integer from 1 to MAX_PARALLEL; None stays None (1, or a resumed run's)."""
    if value is None:
        return None
    wrong = UserError(f"--parallel must be auto or an integer from 1 to {MAX_PARALLEL}, "
                      f"got {quoted(value)}")
    if isinstance(value, str):
        text = value.strip().lower()
        if text == PARALLEL_AUTO:
            return PARALLEL_AUTO
        if not text.isdecimal() or len(text) > len(str(MAX_PARALLEL)):  # bounded before int()
            raise wrong
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL:
        raise wrong
    return value


_TRUE, _FALSE = ("1", "true", "t", "yes", "y", "on"), ("0", "false", "f", "no", "n", "off")


def as_flag(value: bool | str | None, flag: str) -> bool | None:
    """An on/off option: a bool, or the words click's BOOL reads ('off', 'no', 'false', '0',
    'on', ...); None stays None. Anything else is refused: a truthy 'off' is not on."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise UserError(f"{flag} is on or off (True/False, or 'on'/'off'), got {quoted(value)}")


def check_text(value: str | None, flag: str, max_len: int = 1000) -> str | None:
    """A one-line text option of at most ``max_len`` characters; None stays None."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_len or CONTROL.search(value):
        raise UserError(f"{flag} must be one line of text of at most {max_len} characters, "
                        f"got {quoted(value)}")
    return value


def check_int(value: int | None, flag: str, lo: int, hi: int) -> int | None:
    """An integer option in [lo, hi]; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise UserError(f"{flag} must be an integer from {lo} to {hi}, got {quoted(value)}")
    return value


def check_num_envs(value: int | None, flag: str = "--num-envs") -> int | None:
    return check_int(value, flag, 1, MAX_NUM_ENVS)


def check_hydra_prefix(value: str, taken: Sequence[str]) -> str:
    """--hydra-prefix: a dotted config key (ppo, agent.ppo) whose first part is none of
    ``taken``, the Hydra file's own top-level keys: a second key of the same name would
    replace the first on load, and the tuned settings would be lost."""
    check_text(value, "--hydra-prefix", max_len=200)
    if value and not _HYDRA_KEY.fullmatch(value):
        raise UserError(f"--hydra-prefix {quoted(value)} is not a dotted config key such as "
                        f"ppo or agent.ppo (letters, digits and _, parts joined by dots)")
    top = value.split(".")[0] if value else ""
    if top in taken:
        raise UserError(f"--hydra-prefix {quoted(value)} starts with {top!r}, a top-level "
                        f"key the Hydra file already has ({', '.join(taken)}): "
                        f"choose another, such as ppo or agent.ppo")
    return value


def as_run_paths(value: object, also: type = str) -> list[Any]:
    """A run directory or any iterable of them (a list, a glob's generator, a Series), and
    items of type ``also`` beside them (runs already read); anything else (a number, None, a
    mapping, bytes) is one line, not a TypeError from deep inside."""
    kinds = (str, os.PathLike, also)
    if isinstance(value, kinds):
        return [value]
    items = (list(value) if isinstance(value, Iterable)
             and not isinstance(value, bytes | Mapping) else None)
    if items is None or any(not isinstance(p, kinds) for p in items):
        bad = value if items is None else next(p for p in items if not isinstance(p, kinds))
        raise UserError(f"expected a run directory (str or Path) or a list of them, got "
                        f"{type(bad).__name__} {str(bad)[:40]!r}")
    return items
