"""Memory sizes as people type them.

Decimal (SI) suffixes: ``B K KB M MB G GB T TB`` (8GB = 8e9 bytes, as GPU vendors print).
Binary suffixes: ``KiB MiB GiB TiB`` (8GiB = 8 * 2**30, as nvidia-smi prints). A bare number
is bytes. Case-insensitive for the letters, the ``i`` marks binary.
"""

from __future__ import annotations

import math
import re

from vramtune.errors import UserError, quoted
from vramtune.schema import MAX_BYTES as MAX_SIZE_BYTES  # 1 EiB: more than any machine holds

_DECIMAL = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6,
            "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12}
_BINARY = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
           "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
_SIZE_RE = re.compile(
    r"^\s*(?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")


SIZE_HELP = ("sizes: 8GB / 8G = 8e9 bytes (decimal), 7.5GiB / 8000MiB = binary (2**30, 2**20), "
             "a bare number is bytes")

NA = "n/a"  # an unmeasured figure is shown as n/a, never as 0


def parse_size(text: str | int | float, *, what: str = "size") -> int:
    """Bytes from '8GB', '7.5GiB', '8000MiB', '8000000000'; UserError on anything else."""
    if isinstance(text, bool):
        raise UserError(f"invalid {what} {quoted(text)}: expected e.g. 8GB, 7.5GiB or 8000MiB")
    if isinstance(text, int | float):
        try:
            value = float(text)
        except OverflowError:  # an int past a float's range
            value = math.inf
        unit_bytes = 1
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise UserError(
                f"invalid {what} {quoted(text)}: expected e.g. 8GB, 7.5GiB or 8000MiB ({SIZE_HELP})")
        unit = match["unit"].lower()
        unit_bytes = _DECIMAL.get(unit) or _BINARY.get(unit) or 0
        if not unit_bytes:
            raise UserError(f"invalid {what} {quoted(text)}: unknown unit "
                            f"{quoted(match['unit'])} ({SIZE_HELP})")
        value = float(match["num"])
    nbytes = value * unit_bytes
    if nbytes > MAX_SIZE_BYTES:  # inf too: a number too long for a float
        raise UserError(f"invalid {what} {quoted(text)}: more than any machine's memory (at most "
                        f"1 EiB = {MAX_SIZE_BYTES} bytes)")
    if not math.isfinite(nbytes) or nbytes < 1:
        raise UserError(f"invalid {what} {quoted(text)}: must be a positive amount of memory")
    # 2.01 x 1e9 is 2009999999.9999998 in floats: a whole number of bytes a float's rounding
    # away from the product is that number (budget_label writes 2.01GB and reads it back)
    whole = round(nbytes)
    return whole if abs(nbytes - whole) <= 1e-9 * nbytes else int(nbytes)


def parse_sizes(text: str, *, what: str = "size") -> list[int]:
    """A comma-separated list of sizes ('8GB,12GB,24GB'), in the order given."""
    parts = [p for p in (s.strip() for s in str(text).split(",")) if p]
    if not parts:
        raise UserError(f"invalid {what} {quoted(text)}: expected e.g. 8GB or 8GB,12GB")
    return [parse_size(p, what=what) for p in parts]


def parse_percent(text: str | float, *, what: str) -> float:
    """A fraction in [0, 1) from a percentage: '10%' and '10' are 10%, '0.5' is 0.5%.

    Always percent, never 'a fraction when below 1': '--max-mem-increase 0.9' must not mean
    90% and silently switch a CI gate off."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1] if raw.endswith("%") else raw)
    except ValueError:
        raise UserError(f"invalid {what} {quoted(text)}: expected a percentage such as 10%") from None
    fraction = value / 100
    if not math.isfinite(fraction) or fraction < 0 or fraction >= 1:
        raise UserError(f"invalid {what} {quoted(text)}: must be at least 0% and below 100%")
    return fraction


def format_bytes(nbytes: int | float | None, *, binary: bool = True) -> str:
    """'1.42 GiB' for humans; 'n/a' when the figure was not measured (never '0')."""
    if nbytes is None:
        return "n/a"
    base, units = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB"]) if binary else (
        1000.0, ["B", "KB", "MB", "GB", "TB"])
    value = float(nbytes)
    for unit in units:
        if abs(value) < base or unit == units[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= base
    raise AssertionError("unreachable")


def budget_label(budget_bytes: int | None) -> str:
    """'8GB' / '7.5GiB' as people type them (parse_size reads it back); safe in a file name."""
    if budget_bytes is None:
        return "uncapped"
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("TiB", 2**40),
                       ("GiB", 2**30), ("MiB", 2**20)):
        # in integers: 1.1e9 / 1e9 is 1.1000000000000001 in floats, which read as 1100MB
        if budget_bytes >= size and budget_bytes * 100 % size == 0:
            value = budget_bytes * 100 // size / 100
            return f"{value:.2f}".rstrip("0").rstrip(".") + unit  # never 1e+06: parse_size reads it
    return f"{budget_bytes}B"


def both_units(nbytes: int | None) -> str:
    """'2.70 GB (2.51 GiB)': budgets are typed in both systems, peaks print in binary."""
    if nbytes is None:
        return NA
    return f"{format_bytes(nbytes, binary=False)} ({format_bytes(nbytes)})"


def headroom_limit_bytes(budget_bytes: int | None, headroom_fraction: float) -> int | None:
    """The line a measured peak must stay under: budget x (1 - headroom); None without a
    budget (then only real failures count)."""
    return int(budget_bytes * (1 - headroom_fraction)) if budget_bytes else None
