"""Checked reading of the files vramtune reads (profiles, run headers, trial lines, baselines).

One place per format builds its record through a ``Fields`` reader, so every problem is one
``UserError`` that names the file, the key and what was expected, raised where the file is
read: a wrong type found later would be a traceback, or worse, a wrong answer. Standard
library only: the trial child validates its profile with it before JAX is imported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from vramtune.errors import CONTROL, UserError, printable  # noqa: F401 - re-exported

MISSING: Any = object()

# Bounds on what any file may hold: a value past them is a typo or a hostile file, and every
# loop or allocation downstream may rely on them.
MAX_NUM_ENVS = 1 << 24  # 16.7M parallel envs: far above what any accelerator holds
MAX_BATCH_SIZE = 1 << 24
MAX_NUM_MINIBATCHES = 1 << 16
MAX_BYTES = 1 << 60  # 1 EiB: larger than any machine's memory
MAX_TEXT = 10_000  # characters of any free-text field (names are shorter still)


def describe(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr, cut short, on one line."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def kind(value: Any) -> str:
    """The YAML/JSON name of a value's type, for 'expected a mapping, got a list'."""
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def plain_data(value: Any, where: str, key: str, depth: int = 0) -> None:
    """Only what JSON can carry (strings, finite numbers, booleans, null, lists, mappings
    with string keys): env_kwargs travel to the trial child as JSON and into the hash."""
    if depth > 32:
        raise UserError(f"{where}: {key} is nested more than 32 levels deep")
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UserError(f"{where}: {key} must be a finite number, got {value!r}")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            plain_data(item, where, f"{key}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise UserError(f"{where}: {key} has the key {describe(k)}; keys must be "
                                f"strings")
            plain_data(item, where, f"{key}.{k}", depth + 1)
        return
    raise UserError(f"{where}: {key} must be plain data (text, numbers, lists, mappings), "
                    f"got {type(value).__name__}")


class Fields:
    """Typed access to one mapping of a file: each getter checks type and range, or raises
    one UserError '<where>: <prefix><key> must be <expected>, got <value>'."""

    def __init__(self, data: Any, where: str, prefix: str = "", *, what: str = "") -> None:
        if not isinstance(data, dict):
            label = what or (prefix.rstrip(".") if prefix else "the file")
            raise UserError(f"{where}: {label} must be a mapping, got {kind(data)}")
        for key in data:
            if not isinstance(key, str):
                raise UserError(f"{where}: {prefix}{describe(key)}: keys must be strings, got "
                                f"{kind(key)}")
        self.data = data
        self.where = where
        self.prefix = prefix

    def fail(self, key: str, expected: str, value: Any = MISSING) -> NoReturn:
        got = "" if value is MISSING else f", got {describe(value)}"
        raise UserError(f"{self.where}: {self.prefix}{key} must be {expected}{got}")

    def only(self, valid: Iterable[str]) -> None:
        """Refuse a key the format does not have (a typo would otherwise be ignored)."""
        valid = set(valid)
        unknown = sorted(k for k in self.data if k not in valid)
        if unknown:
            section = f"{self.prefix.rstrip('.')}: " if self.prefix else ""
            raise UserError(f"{self.where}: {section}unknown key {unknown[0]!r}; valid keys: "
                            f"{', '.join(sorted(valid))}")

    def raw(self, key: str, default: Any = MISSING) -> Any:
        if key in self.data:
            return self.data[key]
        if default is MISSING:
            raise UserError(f"{self.where}: missing required key {self.prefix}{key!r}")
        return default

    def int(self, key: str, default: Any = MISSING, *, lo: int | None = None,
            hi: int | None = None, none: bool = False) -> Any:
        value = self.raw(key, default)
        if value is None and none:
            return None
        if not is_int(value):
            self.fail(key, _range_words("an integer", lo, hi), value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.fail(key, _range_words("an integer", lo, hi), value)
        return value

    def number(self, key: str, default: Any = MISSING, *, lo: float | None = None,
               hi: float | None = None, above: float | None = None, none: bool = False) -> Any:
        """A finite number (an integer is a number too); ``above`` is an open lower bound."""
        value = self.raw(key, default)
        if value is None and none:
            return None
        words = _range_words("a finite number", lo, hi, above)
        if not is_number(value) or not math.isfinite(value):
            self.fail(key, words, value)
        if ((lo is not None and value < lo) or (hi is not None and value > hi)
                or (above is not None and value <= above)):
            self.fail(key, words, value)
        return float(value) if isinstance(value, float) else value

    def text(self, key: str, default: Any = MISSING, *, none: bool = False,
             max_len: int = MAX_TEXT, pattern: re.Pattern[str] | None = None,
             expected: str = "", line: bool = False) -> Any:
        """A text; ``line``: one line without control characters (a name, a device)."""
        value = self.raw(key, default)
        if value is None and none:
            return None
        words = expected or f"text of at most {max_len} characters"
        if not isinstance(value, str) or len(value) > max_len:
            self.fail(key, words, value)
        if line and CONTROL.search(value):
            self.fail(key, "one line of text without control characters", value)
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(key, words, value)
        return value

    def flag(self, key: str, default: Any = MISSING, *, none: bool = False) -> Any:
        value = self.raw(key, default)
        if value is None and none:
            return None
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def choice(self, key: str, choices: Iterable[str], default: Any = MISSING, *,
               none: bool = False) -> Any:
        options = list(choices)
        value = self.raw(key, default)
        if value is None and none:
            return None
        if not isinstance(value, str) or value not in options:
            self.fail(key, "one of " + ", ".join(options), value)
        return value

    def mapping(self, key: str, default: Any = MISSING, *, none_is_empty: bool = False) -> Any:
        value = self.raw(key, default)
        if value is None and none_is_empty:
            return {}
        if not isinstance(value, dict):
            self.fail(key, "a mapping", value)
        Fields(value, self.where, f"{self.prefix}{key}.")  # string keys
        return value

    def sub(self, key: str, default: Any = MISSING, *, none_is_empty: bool = False) -> Fields:
        return Fields(self.mapping(key, default, none_is_empty=none_is_empty), self.where,
                      f"{self.prefix}{key}.")

    def text_map(self, key: str, default: Any = MISSING, *, max_len: int = 200) -> dict[str, str]:
        """A mapping of short texts (versions, machine facts)."""
        mapping = self.mapping(key, default)
        sub = Fields(mapping, self.where, f"{self.prefix}{key}.")
        return {k: sub.text(k, max_len=max_len, line=True) for k in mapping}

    def scalar_map(self, key: str, default: Any = MISSING) -> dict[str, Any]:
        """A mapping of scalars (text, numbers, booleans, null): a machine summary."""
        mapping = self.mapping(key, default)
        for k, v in mapping.items():
            if not (v is None or isinstance(v, str | bool | int)
                    or (isinstance(v, float) and math.isfinite(v))):
                self.fail(f"{key}.{k}", "text, a number or null", v)
            if isinstance(v, str) and (len(v) > MAX_TEXT or CONTROL.search(v)):
                self.fail(f"{key}.{k}", f"one line of at most {MAX_TEXT} characters without "
                          f"control characters", v)
        return dict(mapping)

    def text_list(self, key: str, default: Any = MISSING, *, max_len: int = MAX_TEXT) -> list[str]:
        value = self.raw(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= max_len
                                                  for v in value):
            self.fail(key, "a list of texts", value)
        return list(value)

    def int_list(self, key: str, default: Any = MISSING, *, lo: int, hi: int,
                 max_items: int = 64) -> list[int]:
        value = self.raw(key, default)
        words = f"a list of at most {max_items} integers from {lo} to {hi}"
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list) or len(value) > max_items:
            self.fail(key, words, value)
        for item in value:
            if not is_int(item) or not lo <= item <= hi:
                self.fail(key, words + f" (found {describe(item)})")
        return value


def _num(value: float) -> str:
    return str(value) if is_int(value) else f"{value:g}"


def _range_words(base: str, lo: float | None, hi: float | None,
                 above: float | None = None) -> str:
    if above is not None and hi is not None:
        return f"{base} above {_num(above)} and at most {_num(hi)}"
    if above is not None:
        return f"{base} above {_num(above)}"
    if lo is not None and hi is not None:
        return f"{base} from {_num(lo)} to {_num(hi)}"
    if lo is not None:
        return f"{base} of at least {_num(lo)}"
    if hi is not None:
        return f"{base} of at most {_num(hi)}"
    return base
