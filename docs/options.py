"""Each command's option table in docs/, rendered from the live CLI: what ``--help`` says.

    python docs/options.py           # rewrite every table between its markers
    python docs/options.py --check   # exit 1, naming each table that differs from --help

A table sits between ``<!-- options:COMMAND -->`` and ``<!-- /options:COMMAND -->`` in a
Markdown file under docs/. Its text comes from the options' declarations in
``src/vramtune/cli/``: change the help there, then run this; never edit a table by hand
(tests/unit/cli/test_docs_options.py fails when one differs).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import typer  # noqa: TID251 (a tool beside the docs, not the core: it reads the CLI)

from vramtune.cli.app import app

DOCS = Path(__file__).resolve().parent
BEGIN = re.compile(r"<!-- options:([a-z-]+)(?: [^>]*)? -->\n")
REGENERATE = "python docs/options.py"
# typer's help record appends these to the help text; the table gives them a column.
_TRAILERS = re.compile(r"\s*\[(default: (?P<default>[^\]]*)|required)\]")


def _command(name: str) -> tuple[object, object]:
    """The click command behind ``vramtune NAME`` and a context to render its help in."""
    group = typer.main.get_command(app)
    command = group.commands.get(name)  # type: ignore[attr-defined]
    if command is None:
        raise KeyError(f"vramtune has no command {name!r}")
    parent = group.context_class(group, info_name="vramtune")  # type: ignore[attr-defined]
    return command, command.context_class(command, info_name=name, parent=parent)  # type: ignore[attr-defined]


def command_names() -> list[str]:
    """Every command of the CLI, as ``vramtune --help`` lists them."""
    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _escape(text: str) -> str:
    """Markdown for a table cell: a pipe never ends the cell; outside code spans, ``<`` is
    not a tag and ``*`` not emphasis."""
    parts = text.replace("|", r"\|").split("`")
    for i in range(0, len(parts), 2):  # even parts lie outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace("*", r"\*")
    return "`".join(parts)


def rows(name: str) -> list[tuple[str, str, str]]:
    """(option, default, help) per argument and option of ``vramtune NAME``, in --help's
    order, without --help itself."""
    command, ctx = _command(name)
    out = []
    for param in command.get_params(ctx):  # type: ignore[attr-defined]
        record = param.get_help_record(ctx)
        if record is None or param.name == "help" or getattr(param, "hidden", False):
            continue
        decl, help_text = record
        # a type's metavar (<str>, <int>, <path>) says little; a list of choices says much
        decl = " ".join(w for w in decl.split() if not (w.startswith("<") and "|" not in w))
        help_text = help_text.replace("\\[", "[")  # rich's escape, not part of the text
        default = ""
        for match in _TRAILERS.finditer(help_text):
            default = match["default"] if match["default"] is not None else "required"
        help_text = _TRAILERS.sub("", help_text).strip()
        out.append((decl, default, help_text))
    return out


def render(name: str) -> str:
    """The Markdown table of ``vramtune NAME``'s options, as it stands between the markers."""
    lines = ["| option | default | what it sets |", "| --- | --- | --- |"]
    for decl, default, help_text in rows(name):
        shown = f"`{default}`" if default and default != "required" else default
        code, shown = decl.replace("|", r"\|"), shown.replace("|", r"\|")
        lines.append(f"| `{code}` | {shown} | {_escape(help_text)} |")
    return "\n".join(lines) + "\n"


def blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """(command, start, end) of each table's text between its two markers."""
    for begin in BEGIN.finditer(text):
        name = begin[1]
        end = text.find(f"<!-- /options:{name} -->", begin.end())
        if end < 0:
            raise ValueError(f"<!-- options:{name} --> has no closing <!-- /options:{name} -->")
        yield name, begin.end(), end


def regenerate(text: str) -> str:
    """``text`` with every table between markers rendered afresh."""
    out, last = [], 0
    for name, start, end in blocks(text):
        out += [text[last:start], render(name)]
        last = end
    return "".join(out) + text[last:]


def documents() -> list[Path]:
    """The Markdown files under docs/ that hold at least one table."""
    return sorted(p for p in DOCS.glob("*.md") if BEGIN.search(p.read_text()))


def stale() -> list[tuple[Path, str]]:
    """(file, command) of each table that differs from what --help says now."""
    found = []
    for path in documents():
        text = path.read_text()
        for name, start, end in blocks(text):
            if text[start:end] != render(name):
                found.append((path, name))
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = stale()
        for path, name in found:
            print(f"{path.name}: the options of `vramtune {name}` differ from its --help; "
                  f"run `{REGENERATE}`")
        return 1 if found else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for path in documents():
        text = path.read_text()
        new = regenerate(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
