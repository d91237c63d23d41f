"""Records built from file data with every field type-checked against the dataclass itself.

The readers of results lines, run headers and bench baselines check ranges and choices by
hand (``schema.Fields``); the types come from here, derived from the annotations by
pydantic's TypeAdapter, so a field added to a record (or to a record nested in it) is
checked the day it is added. Only the parent reads through this: the trial child keeps its
standard-library reader (pydantic's import cost).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from vramtune.errors import UserError
from vramtune.schema import describe

Record = TypeVar("Record")


@functools.cache
def _adapter(cls: type[Record]) -> TypeAdapter[Record]:
    return TypeAdapter(cls)


def field_names(cls: type) -> tuple[str, ...]:
    """The keys a record's mapping may hold: its dataclass fields."""
    return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def typed(cls: type[Record], data: dict[str, Any], where: str) -> Record:
    """``cls`` built from ``data`` (its own keys only) with every field's type checked
    against the dataclass's annotations, strictly (no "5" for 5, no 1.0 for an integer),
    records nested in it too, and every number in it finite; else one UserError naming the
    field ('sizes[0].samples[1].peak_bytes'). Nothing here lists the fields."""
    names = set(field_names(cls))
    own = {k: v for k, v in data.items() if k in names}
    try:  # JSON mode: an enum's value and a list for a tuple are what the files hold
        record = _adapter(cls).validate_json(json.dumps(own), strict=True)
    except ValidationError as exc:
        raise UserError(_first_error(cls, exc, where)) from None
    except (ValueError, RecursionError) as exc:  # what json.dumps itself cannot write
        raise UserError(f"{where}: not a {cls.__name__} record ({exc})") from None
    bad = _non_finite(record, "")
    if bad is not None:
        raise UserError(f"{where}: {bad.removeprefix('.')} must be a finite number, got NaN or Infinity")
    return record


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first non-finite float in ``value`` (a record, list, mapping or
    number), or None when every number is finite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        children: Any = ((f".{f.name}", getattr(value, f.name))
                         for f in dataclasses.fields(value))
    elif isinstance(value, list | tuple):
        children = ((f"[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, dict):
        children = ((f".{k}", item) for k, item in value.items())
    else:
        return None
    for step, child in children:
        found = _non_finite(child, path + step)
        if found is not None:
            return found
    return None


def _first_error(cls: type, exc: ValidationError, where: str) -> str:
    """pydantic's first complaint as this package words one: '<where>: <key> must be ...'."""
    error = exc.errors(include_url=False)[0]
    if error.get("type") == "json_invalid":  # a lone surrogate ('\ud800') Python read as text
        return (f"{where}: holds text that is not valid Unicode (a lone surrogate such as "
                f"\\ud800): {str(error.get('msg', '')).removeprefix('Invalid JSON: ')}")
    loc = list(error.get("loc") or ())
    key = str(loc[0]) if loc else "?"
    for part in loc[1:]:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    if error.get("type") == "missing":
        return f"{where}: missing required key {key!r}"
    expected = str(error.get("msg", "")).removeprefix("Input should be ").rstrip(".")
    if loc and _admits_none(_annotation_at(cls, loc)):
        expected += " or null"
    return f"{where}: {key} must be {expected}, got {describe(error.get('input'))}"


def _annotation_at(cls: type, loc: list[Any]) -> Any:
    """The annotation of the field ``loc`` names inside ``cls`` (through nested records,
    lists and mappings), or None where the path leaves what the annotations say."""
    current: Any = cls
    for part in loc:
        current = _without_none(current)
        origin = typing.get_origin(current)
        if isinstance(current, type) and dataclasses.is_dataclass(current):
            current = typing.get_type_hints(current).get(str(part))
        elif origin in (tuple, list) and isinstance(part, int):
            current = (typing.get_args(current) or (None,))[0]
        elif origin is dict and isinstance(part, str):
            current = (typing.get_args(current) or (None, None))[1]
        else:
            return None
    return current


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None``; any other annotation as it is."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _admits_none(annotation: Any) -> bool:
    return (typing.get_origin(annotation) in (types.UnionType, typing.Union)
            and type(None) in typing.get_args(annotation))
