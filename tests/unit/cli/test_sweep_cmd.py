"""The sweep command's progress lines."""

import shlex

from rich.console import Console

from vramtune.cli.sweep_cmd import _arg, tag


def test_a_lowercase_card_label_is_printed_not_read_as_a_style():
    console = Console(record=True, width=100)
    for label in ("a100", "l4", "H100", "[red]x[/red]"):
        console.print(f"[dim]note: {tag(label)} hello[/dim]")
    text = console.export_text()
    assert "[a100] hello" in text and "[l4] hello" in text and "[H100] hello" in text
    assert "[[red]x[/red]] hello" in text



def test_a_next_line_path_can_be_pasted_into_a_shell():
    console = Console(record=True, width=200)
    for path in ("/tmp/runs/a", "/tmp/my runs/a", "/tmp/$HOME/[red]x"):
        console.print(f"next: vramtune emit-config {_arg(path)}")
    lines = console.export_text().splitlines()
    assert [shlex.split(line)[-1] for line in lines] == ["/tmp/runs/a", "/tmp/my runs/a",
                                                         "/tmp/$HOME/[red]x"]
