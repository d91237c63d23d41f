"""`vramtune profiles` in a terminal narrower than its lines: nothing wraps into a column."""

from __future__ import annotations

import sys

from vramtune.cli import app


def test_a_narrow_terminal_puts_each_description_under_its_profile(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert app.main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 100 for line in lines), lines
    at = lines.index(next(line for line in lines if line.startswith("ant ")))
    assert lines[at].split() == ["ant", "brax:ant", "backend", "mjx"]
    assert lines[at + 1].startswith("    brax Ant on the MJX backend")


def test_piped_it_is_one_line_a_profile(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert app.main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (ant,) = [line for line in lines if line.startswith("ant ")]
    assert ant.endswith("brax Ant on the MJX backend with Brax's published Ant PPO settings")
