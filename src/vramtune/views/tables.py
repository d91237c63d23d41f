"""One table layer: every table vramtune shows is a ``Table``, written as GitHub-flavoured
Markdown, CSV or JSON here and drawn in the terminal by cli/tables.py from the same columns.

A table has two faces. ``cells`` holds what people read ('757.80 MiB', 'n/a', '128 x 4'),
one column per ``Column.key``; ``data`` holds what programs read: raw numbers in units named
by the column (bytes, seconds, ratios), <NA> where not measured. Markdown and the terminal
show the cells; CSV and JSON write the data (the cells when a table has no raw face).
Markdown is rendered here rather than by ``DataFrame.to_markdown``: that needs ``tabulate``,
and a GFM table is a few lines once every cell is escaped in one place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import pandas as pd

from vramtune.results.frame import to_python
from vramtune.units import NA


@dataclass(frozen=True)
class Column:
    """One shown column: its key in ``Table.cells``, its title, and how it is laid out."""

    key: str
    title: str
    align: Literal["left", "right"] = "left"  # numbers right, text left
    wrap: bool = False  # long text (reasons, errors) may wrap in a terminal; the rest never does
    optional: bool = False  # a terminal may leave it out when every cell is n/a (VRAM on CPU)
    code: bool = False  # Markdown shows it as `code` (file names)
    # 0: essential, a terminal always shows it whole. 1, 2, ...: shown when the terminal has
    # room, lowest first, the columns of one priority together (A and B of a comparison);
    # ``--wide`` and the files (Markdown, CSV, JSON) always have it.
    priority: int = 0
    # A cell too long for a terminal's column shows its ``short_form`` and a numbered
    # footnote under the table holds the whole text (reasons, verdicts).
    footnote: bool = False


@dataclass(frozen=True, eq=False)
class Table:
    columns: tuple[Column, ...]
    cells: pd.DataFrame  # display strings, one column per Column.key
    data: pd.DataFrame | None = None  # raw values for CSV/JSON, row for row with the cells
    strong: tuple[bool, ...] = ()  # rows to emphasise (the recommended trial); () for none

    def __post_init__(self) -> None:
        missing = [c.key for c in self.columns if c.key not in self.cells.columns]
        if missing:
            raise ValueError(f"no cells for column(s) {missing}")
        if self.strong and len(self.strong) != len(self.cells):
            raise ValueError("strong needs one flag per row")
        if self.data is not None and len(self.data) != len(self.cells):
            raise ValueError("data and cells must have the same rows")

    @classmethod
    def from_rows(cls, columns: Sequence[Column], rows: Iterable[Sequence[str]], *,
                  data: pd.DataFrame | None = None, strong: Iterable[bool] = ()) -> Table:
        """A table from display rows, each in the order of ``columns``."""
        keys = [c.key for c in columns]
        cells = pd.DataFrame([list(r) for r in rows], columns=keys, dtype=object)
        if data is not None:
            data = data.reset_index(drop=True)
        return cls(tuple(columns), cells, data, tuple(strong))

    def __len__(self) -> int:
        return len(self.cells)

    def column(self, key: str) -> Column:
        for c in self.columns:
            if c.key == key:
                return c
        raise KeyError(key)

    def rows(self) -> list[list[str]]:
        """The display cells, one list per row, in column order."""
        return [[str(v) for v in row] for row in
                self.cells[[c.key for c in self.columns]].itertuples(index=False)]

    def is_strong(self, i: int) -> bool:
        return bool(self.strong and self.strong[i])

    def without_empty_optional(self) -> Table:
        """Leave out optional columns in which no row has a figure (for narrow terminals)."""
        keep = tuple(c for c in self.columns
                     if not (c.optional and all(v in (NA, "") for v in self.cells[c.key])))
        return replace(self, columns=keep)

    def to_markdown(self) -> str:
        """A GitHub-flavoured Markdown table; ``|`` and newlines in any cell are escaped, and
        a strong row shows its first cell in bold."""
        lines = ["| " + " | ".join(markdown_cell(c.title) for c in self.columns) + " |",
                 "| " + " | ".join("---:" if c.align == "right" else "---" for c in self.columns)
                 + " |"]
        for i, row in enumerate(self.rows()):
            cells = [_markdown(value, column) for value, column in zip(row, self.columns, strict=True)]
            if self.is_strong(i) and cells:
                # "**\* 256**": a bare "*** 256**" is no emphasis in GFM and shows the asterisks.
                cells[0] = "**" + cells[0].replace("*", "\\*") + "**"
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def _raw(self) -> pd.DataFrame:
        return self.data if self.data is not None else self.cells

    def to_csv(self) -> str:
        """Raw values (bytes, seconds), empty where not measured: for pandas and spreadsheets."""
        return self._raw().to_csv(index=False, lineterminator="\n")

    def records(self) -> list[dict[str, Any]]:
        """Raw values, one dict per row, plain Python objects, None where not measured."""
        raw = self._raw()
        columns = {name: to_python(raw[name]) for name in raw.columns}
        return [{name: values[i] for name, values in columns.items()} for i in range(len(raw))]

    def to_json(self) -> str:
        return json.dumps(self.records(), indent=2) + "\n"

    def values(self, key: str) -> list[Any]:
        """One raw column as plain Python objects, None where not measured."""
        return to_python(self._raw()[key])


_SHORT_AT = (" (", ": ", ", ", "; ")


def short_form(text: str) -> str:
    """The head of a reason or verdict, up to its first qualifier: 'slower (93% below best)'
    -> 'slower', 'confirming run, 420 training steps: passed' -> 'confirming run'. The whole
    text goes to a footnote, so nothing is lost."""
    cuts = [i for i in (text.find(sep) for sep in _SHORT_AT) if i > 0]
    return text[:min(cuts)] if cuts else text


def markdown_cell(text: str) -> str:
    """One cell's text made safe inside a GFM table row: ``|`` would end the cell and a
    newline the row."""
    return " ".join(str(text).replace("|", "\\|").splitlines())


def _markdown(value: str, column: Column) -> str:
    text = markdown_cell(value)
    return f"`{text}`" if column.code and value != NA else text
