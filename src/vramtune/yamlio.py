"""YAML as vramtune reads and writes it: one bounded loader, one dumper.

Reading: every YAML file (profiles, configs for ``check`` and ``verify``) goes through
``load_file``, which bounds the work before anything is built: the file's size, its nesting
depth, its number of documents, and its size once aliases are expanded (a "billion laughs"
file of 7 levels is 40 million nodes to whoever walks it, from a few hundred bytes on disk),
and refuses a node that contains itself. Every refusal is one UserError naming the file.

Writing: block mappings, one setting a line (easy to diff); lists of scalars inline
(``[256, 256]``). Files are built as data and dumped, never concatenated, so no value can
inject a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vramtune import paths
from vramtune.errors import UserError

MAX_FILE_BYTES = 16 << 20  # far above any config; a bigger "config" is not one
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_NODES = 200_000  # values once every alias is expanded where it is used (configs: hundreds)
MAX_DOCUMENTS = 100

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: C speed, no Python tags


def read_text(path: str | Path, *, what: str, max_bytes: int = MAX_FILE_BYTES) -> str:
    """A regular file's text (UTF-8, a BOM dropped); one UserError for anything else: a
    directory, a FIFO (reading it would block), a missing file, too big, not UTF-8."""
    data = paths.read_bytes(path, what=what, max_bytes=max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                        f"offset {exc.start})") from None
    return text.removeprefix("\ufeff")


def _problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [""])[0]
    return f"not valid YAML{where}: {problem}"


def check_bounds(text: str, source: str) -> None:
    """Walk the event stream (a flat loop, no recursion) and refuse, before any node is
    built, a document too deep, too many documents, an expansion too large, or an alias
    to a node that is still open (a node that would contain itself)."""
    depth = documents = nodes = 0
    stack: list[tuple[str | None, int]] = []  # open collections: (anchor, nodes before it)
    expanded: dict[str, int] = {}  # anchor -> nodes of its (closed) node
    open_anchors: set[str] = set()
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > MAX_DOCUMENTS:
                    raise UserError(f"{source}: more than {MAX_DOCUMENTS} YAML documents")
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
                if event.anchor:
                    expanded[event.anchor] = 1
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise UserError(f"{source}: nested more than {MAX_DEPTH} levels deep (line "
                                    f"{line})")
                stack.append((event.anchor, nodes))
                nodes += 1
                if event.anchor:
                    open_anchors.add(event.anchor)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                anchor, before = stack.pop()
                if anchor:
                    expanded[anchor] = nodes - before
                    open_anchors.discard(anchor)
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor in open_anchors:
                    raise UserError(f"{source}: alias *{event.anchor} refers to a node that "
                                    f"contains it (a node may not contain itself)")
                nodes += expanded.get(event.anchor, 1)
            if nodes > MAX_NODES:
                raise UserError(f"{source}: more than {MAX_NODES} values once its aliases are "
                                f"expanded (a YAML alias bomb?)")
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: {_problem(exc)}") from None


def loads(text: str, source: str, *, documents: bool = False) -> Any:
    """The data in ``text`` (a list of documents with ``documents=True``), within bounds."""
    check_bounds(text, source)
    try:
        if documents:
            return list(yaml.load_all(text, Loader=_Loader))
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: {_problem(exc)}") from None
    except RecursionError:  # cannot happen within MAX_DEPTH; a one-line error all the same
        raise UserError(f"{source}: nested too deeply") from None


def load_file(path: str | Path, *, what: str, documents: bool = False) -> Any:
    """Read and parse one YAML file, every bound applied; ``what`` names it in errors."""
    text = read_text(path, what=what)
    return loads(text, f"{what} {path}", documents=documents)


class _Dumper(yaml.SafeDumper):
    """SafeDumper: plain data only, no Python tags."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(v, dict | list) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump(data: dict[str, Any], *, width: int = 100) -> str:
    """``data`` as block YAML in insertion order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     width=width, allow_unicode=True)
