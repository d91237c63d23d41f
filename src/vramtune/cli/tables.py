"""Rich renderings of views' tables: the same ``Table`` the Markdown/CSV/JSON exports write,
read by column key, so the terminal and the files cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable

from rich.markup import escape
from rich.table import Table as RichTable

from vramtune.results.frame import to_python
from vramtune.views.tables import Table

_STATUS_STYLE = {"ok": "green", "oom": "red", "timeout": "yellow", "crash": "red",
                 "invalid": "magenta", "error": "red"}

CellStyle = Callable[[int, str, str], str | None]  # (row, column key, cell text) -> rich style


def rich_table(table: Table, *, title: str | None = None, style: CellStyle | None = None,
               compact: bool = True) -> RichTable:
    """Any table in the terminal. ``compact`` leaves out optional columns no row has a figure
    in (VRAM columns on CPU, % budget without a budget). Cells carry measured text (error
    types, reasons, paths): it is escaped, never parsed as markup."""
    shown = table.without_empty_optional() if compact else table
    out = RichTable(title=escape(title) if title else None, show_lines=False, header_style="bold")
    for column in shown.columns:
        out.add_column(escape(column.title), justify=column.align, no_wrap=not column.wrap)
    keys = [c.key for c in shown.columns]
    for i, row in enumerate(shown.rows()):
        cells = []
        for key, text in zip(keys, row, strict=True):
            cell = escape(text)
            colour = style(i, key, text) if style else None
            cells.append(f"[{colour}]{cell}[/]" if colour else cell)
        out.add_row(*cells, style="bold" if shown.is_strong(i) else None)
    return out


def _status(_row: int, key: str, text: str) -> str | None:
    return _STATUS_STYLE.get(text, "white") if key == "status" else None


def sweep_rich(table: Table, *, title: str | None = None) -> RichTable:
    """The sweep table (views.sweep_table), statuses in colour, the pick in bold."""
    return rich_table(table, title=title, style=_status)


def compare_rich(table: Table) -> RichTable:
    """The comparison (views.runs.compare_table): ratios 5% or more off 1 in colour, green
    for the better way (less memory, more steps/s)."""
    assert table.data is not None
    ratios = {"peak_ratio": (to_python(table.data["peak_ratio"]), True),
              "steps_ratio": (to_python(table.data["steps_per_s_ratio"]), False)}

    def style(row: int, key: str, _text: str) -> str | None:
        if key not in ratios:
            return None
        values, lower_is_better = ratios[key]
        ratio = values[row]
        if ratio is None or abs(ratio - 1) < 0.05:
            return None
        return "green" if (ratio < 1) == lower_is_better else "red"

    return rich_table(table, style=style)
