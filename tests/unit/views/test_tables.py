"""The one table layer: Markdown escaping, CSV/JSON of the raw face, columns by key."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from vramtune.views.tables import Column, Table, markdown_cell, short_form

COLUMNS = (Column("n", "num_envs", "right"), Column("why", "why | reason", wrap=True),
           Column("vram", "VRAM peak", "right", optional=True),
           Column("file", "file", code=True))


def table(strong: tuple[bool, ...] = ()) -> Table:
    data = pd.DataFrame({"num_envs": pd.array([64, 128], dtype="Int64"),
                         "peak_bytes": pd.array([None, 2**20], dtype="Int64"),
                         "reason": pd.array(["a|b", None], dtype="string")})
    return Table.from_rows(COLUMNS, [["* 64", "crashed (a|b)\nsecond line", "n/a", "x|y.yaml"],
                                     ["128", "ok", "n/a", "n/a"]], data=data, strong=strong)


def test_markdown_aligns_escapes_and_emphasises():
    text = table(strong=(True, False)).to_markdown()
    lines = text.splitlines()
    assert lines[0] == "| num_envs | why \\| reason | VRAM peak | file |"
    assert lines[1] == "| ---: | --- | ---: | --- |"
    # '|' escaped, the newline folded, the strong row bold with its '*' escaped, code in `...`
    assert lines[2] == "| **\\* 64** | crashed (a\\|b) second line | n/a | `x\\|y.yaml` |"
    assert lines[3] == "| 128 | ok | n/a | n/a |"
    assert len(lines) == 4 and text.endswith("\n")


def test_every_row_keeps_its_column_count_whatever_the_text():
    nasty = ["|", "a\r\nb|c", "\n", "`|`"]
    text = Table.from_rows(COLUMNS, [nasty]).to_markdown()
    row = text.splitlines()[2]
    assert row.replace("\\|", "").count("|") == len(COLUMNS) + 1


def test_markdown_cell():
    assert markdown_cell("a|b\nc") == "a\\|b c"
    assert markdown_cell("") == ""


def test_csv_and_json_write_the_raw_face_with_na_empty_or_null():
    rows = list(csv.DictReader(io.StringIO(table().to_csv())))
    assert rows == [{"num_envs": "64", "peak_bytes": "", "reason": "a|b"},
                    {"num_envs": "128", "peak_bytes": "1048576", "reason": ""}]
    data = json.loads(table().to_json())
    assert data == [{"num_envs": 64, "peak_bytes": None, "reason": "a|b"},
                    {"num_envs": 128, "peak_bytes": 1048576, "reason": None}]


def test_without_a_raw_face_the_cells_are_exported():
    plain = Table.from_rows(COLUMNS[:2], [["64", "ok"]])
    assert plain.to_csv() == "n,why\n64,ok\n"
    assert plain.records() == [{"n": "64", "why": "ok"}]


def test_optional_columns_without_a_figure_can_be_left_out():
    compact = table().without_empty_optional()
    assert [c.key for c in compact.columns] == ["n", "why", "file"]
    assert compact.rows()[0] == ["* 64", "crashed (a|b)\nsecond line", "x|y.yaml"]
    shown = Table.from_rows(COLUMNS, [["1", "", "3 MiB", "f"]]).without_empty_optional()
    assert "vram" in [c.key for c in shown.columns]


def test_columns_are_found_by_key():
    assert table().column("vram").title == "VRAM peak"
    with pytest.raises(KeyError):
        table().column("nope")


def test_a_table_refuses_misaligned_faces():
    with pytest.raises(ValueError, match="no cells"):
        Table(COLUMNS, pd.DataFrame({"n": ["1"]}))
    with pytest.raises(ValueError, match="strong"):
        table(strong=(True,))
    with pytest.raises(ValueError, match="same rows"):
        Table.from_rows(COLUMNS, [["1", "", "", ""]], data=pd.DataFrame({"x": [1, 2]}))


def test_an_empty_table_has_a_header_only():
    empty = Table.from_rows(COLUMNS, [])
    assert len(empty) == 0 and len(empty.to_markdown().splitlines()) == 2
    assert empty.to_json() == "[]\n"


@pytest.mark.parametrize(("text", "short"), [
    ("slower (93% below best)", "slower"),
    ("27% below best, within noise (ranges overlap)", "27% below best"),
    ("recommended (throughput: ties with the fastest, smallest for headroom)", "recommended"),
    ("confirming run, 420 training steps: passed", "confirming run"),
    ("fits; shared run: its steps/s are not comparable until it runs alone", "fits"),
    ("failed: RESOURCE_EXHAUSTED: Out of memory", "failed"),
    ("out of memory", "out of memory"),  # nothing to shorten: shown whole
    ("(leading) paren", "(leading) paren"),
])
def test_a_reason_is_shortened_to_its_head(text: str, short: str):
    assert short_form(text) == short
