"""Rich renderings of views' tables: the same ``Table`` the Markdown/CSV/JSON exports write,
read by column key, so the terminal and the files cannot drift apart.

A table is laid out when it is printed, for the width it is printed at (a terminal's, or
``COLUMNS`` off one). Every column that is shown is as wide as its widest cell, so a number
is never cut or folded; what does not fit is left out instead, optional columns first
(``Column.priority``), and named under the table. Long reasons and verdicts show their
short form with a numbered footnote. Headers may wrap at spaces. ``wide`` shows every
column and every reason whole, however wide that makes the table (the console is printed to
with ``crop=False`` so the lines come out whole, for a pager or a file).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from vramtune.api import BenchReport, Verdict
from vramtune.views.gate_table import bench_heading, bench_terminal_table, bench_thresholds, bench_verdict
from vramtune.views.tables import Column, Table, short_form

_STATUS_STYLE = {"ok": "green", "oom": "red", "timeout": "yellow", "crash": "red",
                 "invalid": "magenta", "error": "red", "overflow": "red"}

CellStyle = Callable[[int, str, str], str | None]  # (row, column key, cell text) -> rich style

WIDE_HELP = "Every column and every reason whole, however wide the table gets."

REASON_ROOM = 30
"""Cells a reason column keeps before optional columns are added: enough for most reasons
whole ('27% below best, within noise' is 28), the rest as short form and footnote."""



def _words(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


@dataclass(frozen=True)
class _Fit:
    """How wide one column may be: ``least`` with every number whole (a reason in its short
    form, the header wrapped at spaces), ``full`` with its header and every cell on one line."""

    column: Column
    least: int
    full: int

    @classmethod
    def of(cls, column: Column, cells: list[str]) -> _Fit:
        header = cell_len(column.title)
        if column.footnote:
            mark = len(f" [{len(cells)}]")  # the widest mark its footnotes can need
            least = max((min(cell_len(c), cell_len(short_form(c)) + mark) for c in cells),
                        default=0)
        elif column.wrap:
            least = max((_words(c) for c in cells), default=0)
        else:
            least = max((cell_len(c) for c in cells), default=0)
        full = max([header, *(cell_len(c) for c in cells)])
        return cls(column, max(least, _words(column.title), 1), max(full, 1))

    @property
    def room(self) -> int:
        """What a text column keeps before optional columns are added: enough for most
        reasons whole."""
        return min(self.full, max(self.least, REASON_ROOM))


def _overhead(columns: int, edge: bool = True) -> int:
    """Cells beside the columns' own: padding 1 a side and a border between columns, and
    the outer borders when the table has edges."""
    return 3 * columns + 1 if edge else 3 * columns - 1


def _plan(fits: list[_Fit], width: int) -> tuple[list[_Fit], list[int], bool]:
    """Which columns a terminal ``width`` shows, in the table's order, how wide, and whether
    the table keeps its outer borders (left off only where that lets the essentials fit).

    The essential ones always, their headers on one line if they fit so, else wrapped at
    spaces; text columns with their room; then optional columns lowest priority first, a
    priority's columns together, each with its header on one line (a column worth showing is
    worth a readable header), while they fit. Slack goes to text columns up to their room,
    to headers that can then be whole, and to text columns up to their whole text."""
    essential = [f for f in fits if f.column.priority == 0]
    least = sum(f.least for f in essential)
    edge = least + _overhead(len(essential)) <= width or \
        least + _overhead(len(essential), False) > width

    def overhead(columns: int) -> int:
        return _overhead(columns, edge)

    start = {id(f): f.least if f.column.wrap else f.full for f in fits}
    whole = (sum(f.room if f.column.wrap else f.full for f in essential)
             + overhead(len(essential)) <= width)
    if not whole:
        start.update({id(f): f.least for f in essential})

    def cost(f: _Fit) -> int:
        return f.room if f.column.wrap else start[id(f)]

    chosen = list(essential)
    used = sum(cost(f) for f in chosen)
    for priority in sorted({f.column.priority for f in fits} - {0}):
        # Columns of one priority go together (steps/s A and B) or not at all.
        group = [f for f in fits if f.column.priority == priority]
        if used + sum(map(cost, group)) + overhead(len(chosen) + len(group)) <= width:
            chosen += group
            used += sum(map(cost, group))
    keep = {id(f) for f in chosen}
    chosen = [f for f in fits if id(f) in keep]
    widths = [start[id(f)] for f in chosen]
    slack = width - overhead(len(chosen)) - sum(widths)
    for stage in ("room", "headers", "text"):
        for i, f in enumerate(chosen):
            if stage == "headers" and not f.column.wrap:
                if 0 < f.full - widths[i] <= slack:  # a header whole, or left as it is
                    slack -= f.full - widths[i]
                    widths[i] = f.full
            elif stage != "headers" and f.column.wrap:
                give = max(0, min(slack, (f.room if stage == "room" else f.full) - widths[i]))
                widths[i] += give
                slack -= give
    return chosen, widths, edge


class FittedTable:
    """A ``Table`` that lays itself out for the width it is printed at (see the module)."""

    def __init__(self, table: Table, *, title: str | None = None, style: CellStyle | None = None,
                 wide: bool = False) -> None:
        self.table = table.without_empty_optional()  # VRAM columns on CPU, % budget without one
        self.title = title
        self.style = style
        self.wide = wide

    def layout(self, width: int) -> tuple[RichTable, list[tuple[int, str]], list[str]]:
        """The rich table for ``width``, its footnotes (number, whole text) and the titles of
        the columns left out."""
        table = self.table
        rows = table.rows()
        fits = [_Fit.of(c, [row[i] for row in rows]) for i, c in enumerate(table.columns)]
        if self.wide:
            chosen, widths, edge = fits, [f.full for f in fits], True
        else:
            chosen, widths, edge = _plan(fits, width)
        needed = sum(widths) + _overhead(len(widths), edge)
        index = {c.key: i for i, c in enumerate(table.columns)}
        notes: dict[str, int] = {}
        out = RichTable(title=escape(self.title) if self.title else None, header_style="bold",
                        show_edge=edge, width=needed)
        for f, w in zip(chosen, widths, strict=True):
            # Every cell fits its width, so nothing wraps but headers (at spaces) and a
            # reason without a short form; numbers never do.
            out.add_column(escape(f.column.title), justify=f.column.align, width=w,
                           no_wrap=False, overflow="fold" if f.column.wrap else "ellipsis")
        for i, row in enumerate(rows):
            cells = []
            for f, w in zip(chosen, widths, strict=True):
                text = row[index[f.column.key]]
                shown = text
                if f.column.footnote and cell_len(text) > w and short_form(text) != text:
                    number = notes.setdefault(text, len(notes) + 1)
                    shown = f"{short_form(text)} [{number}]"
                colour = self.style(i, f.column.key, text) if self.style else None
                cells.append(f"[{colour}]{escape(shown)}[/]" if colour else escape(shown))
            out.add_row(*cells, style="bold" if table.is_strong(i) else None)
        left_out = [c.title for c in table.columns if c.key not in {f.column.key for f in chosen}]
        return out, [(n, text) for text, n in notes.items()], left_out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        out, notes, left_out = self.layout(options.max_width)
        yield out
        if notes:  # a long note wraps under its own text, not under its mark
            grid = RichTable.grid(padding=(0, 1))
            grid.add_column(no_wrap=True)
            grid.add_column()
            for number, text in notes:
                grid.add_row(Text(f"[{number}]"), Text(text))
            yield grid
        if left_out:
            yield Text(f"more columns with --wide: {', '.join(left_out)}", style="dim")


def rich_table(table: Table, *, title: str | None = None, style: CellStyle | None = None,
               wide: bool = False) -> FittedTable:
    """Any table in the terminal. Optional columns no row has a figure in (VRAM columns on
    CPU, % budget without a budget) are left out. Cells carry measured text (error types,
    reasons, paths): it is escaped, never parsed as markup. Print it with ``crop=False``:
    a table whose essential columns are wider than the console is printed whole, not cut."""
    return FittedTable(table, title=title, style=style, wide=wide)


def _status(_row: int, key: str, text: str) -> str | None:
    return _STATUS_STYLE.get(text, "white") if key == "status" else None


def sweep_rich(table: Table, *, title: str | None = None, wide: bool = False) -> FittedTable:
    """The sweep table (views.sweep_table), statuses in colour, the pick in bold."""
    return rich_table(table, title=title, style=_status, wide=wide)


def compare_rich(table: Table, *, wide: bool = False) -> FittedTable:
    """The comparison (views.runs.compare_table): ratios 5% or more off 1 in colour, green
    for the better way (less memory, more steps/s)."""
    assert table.data is not None
    ratios = {"peak_ratio": (table.values("peak_ratio"), True),
              "steps_ratio": (table.values("steps_per_s_ratio"), False)}

    def style(row: int, key: str, _text: str) -> str | None:
        if key not in ratios:
            return None
        values, lower_is_better = ratios[key]
        ratio = values[row]
        if ratio is None or abs(ratio - 1) < 0.05:
            return None
        return "green" if (ratio < 1) == lower_is_better else "red"

    return rich_table(table, style=style, wide=wide)


_VERDICT_STYLE = {Verdict.WORSE: "red", Verdict.FAILED: "red", Verdict.BETTER: "green",
                  Verdict.FIXED: "green", Verdict.NEW: "cyan"}


def bench_rich(report: BenchReport, *, title: str | None = None, wide: bool = False) -> Group:
    """The gate's verdicts for a terminal: what ``bench_markdown`` writes for CI, with the
    repeats' ranges as optional columns, verdicts in words and colour, long ones as
    footnotes."""
    def style(row: int, key: str, _text: str) -> str | None:
        return _VERDICT_STYLE.get(report.rows[row].verdict) if key == "verdict_words" else None

    parts: list[RenderableType] = [Text(bench_heading(report, title=title), style="bold")]
    parts += [Text(f"note: {note}", style="yellow") for note in report.notes]
    parts.append(rich_table(bench_terminal_table(report), style=style, wide=wide))
    passed = report.passed or report.baseline is None
    parts.append(Text(bench_verdict(report), style="bold " + ("green" if passed else "red")))
    parts.append(Text(bench_thresholds(report), style="dim"))
    return Group(*parts)

