"""The option tables in docs/ say what ``--help`` says: each is rendered from the live CLI by
docs/options.py, so a changed option, default or help text fails here until it is rerun."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _options():
    spec = importlib.util.spec_from_file_location("docs_options", ROOT / "docs" / "options.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


options = _options()


def test_every_docs_table_matches_the_help_of_its_command():
    stale = [f"{path.relative_to(ROOT)}: `vramtune {name}`" for path, name in options.stale()]
    assert not stale, (f"option tables differ from --help ({'; '.join(stale)}); "
                       f"regenerate them with `{options.REGENERATE}`")


def test_every_command_has_one_table_in_docs():
    tables = [name for path in options.documents()
              for name, _, _ in options.blocks(path.read_text())]
    assert sorted(tables) == options.command_names(), \
        "each command's options belong in exactly one docs page, between <!-- options:NAME --> markers"


def test_a_table_follows_the_live_help_text(monkeypatch):
    """The comparison is against what the app declares now, not a frozen copy."""
    text = "<!-- options:check -->\n<!-- /options:check -->\n"
    table = options.regenerate(text)
    assert "| `--device-count` | `1` | Devices the envs are split across. |" in table
    assert "| `file` | required |" in table
    assert options.regenerate(table) == table
    real = options.rows
    monkeypatch.setattr(options, "rows", lambda name: [(d, f, h + " Changed.")
                                                       for d, f, h in real(name)])
    assert options.regenerate(table) != table


def test_a_cell_keeps_pipes_tags_and_stars_as_text():
    assert options._escape("a|b <date> 2**30 `x|<y>`") == r"a\|b &lt;date> 2\*\*30 `x\|<y>`"


def test_an_unclosed_marker_is_named():
    with pytest.raises(ValueError, match="options:sweep"):
        list(options.blocks("<!-- options:sweep -->\n| table |\n"))
