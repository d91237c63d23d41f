"""Rich renderings of core tables."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from vramtune.views.sweep_table import ComparisonRow, column_titles, row_cells

_STATUS_STYLE = {"ok": "green", "oom": "red", "timeout": "yellow", "crash": "red",
                 "invalid": "magenta", "error": "red"}


def comparison_table(rows: Sequence[ComparisonRow], *, gpu: bool, title: str | None = None) -> Table:
    """The sweep table; GPU-only memory columns (on CPU) and % budget (no budget) are left
    out when no row has them."""
    table = Table(title=title, show_lines=False, header_style="bold")
    # Cells carry measured text (error types, reasons): never let it parse as markup.
    all_cells = [[escape(c) for c in row_cells(row)] for row in rows]
    keep = [i for i in range(len(column_titles(gpu)))
            if not (i in (3, 4, 6) and all(cells[i] == "n/a" for cells in all_cells))]
    titles = column_titles(gpu)
    for i in keep:
        table.add_column(titles[i], justify="left" if i in (1, 2, 11) else "right",
                         no_wrap=i != 11)
    for row, cells in zip(rows, all_cells, strict=True):
        cells[2] = f"[{_STATUS_STYLE.get(row.status, 'white')}]{cells[2]}[/]"
        table.add_row(*(cells[i] for i in keep), style="bold" if row.recommended else None)
    return table
