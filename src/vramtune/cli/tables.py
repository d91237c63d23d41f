"""Rich renderings of core tables."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from vramtune.report import ComparisonRow, column_titles, row_cells

_STATUS_STYLE = {"ok": "green", "oom": "red", "timeout": "yellow", "crash": "red",
                 "invalid": "magenta", "error": "red"}


def comparison_table(rows: Sequence[ComparisonRow], *, gpu: bool, title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    for i, name in enumerate(column_titles(gpu)):
        table.add_column(name, justify="left" if i in (1, 2, 11) else "right",
                         overflow="fold", no_wrap=i not in (11,))
    for row in rows:
        cells = row_cells(row)
        cells[2] = f"[{_STATUS_STYLE.get(row.status, 'white')}]{cells[2]}[/]"
        table.add_row(*cells, style="bold" if row.recommended else None)
    return table
