"""Measured text (error messages, paths) must print as text, never parse as rich markup."""

import io

from rich.console import Console

from vramtune.cli.tables import sweep_rich
from vramtune.cli.trial_cmd import render_trial
from vramtune.records import Status, TrialResult
from vramtune.tune.recommend import choose
from vramtune.views.sweep_table import sweep_table

NASTY = "ValueError: bad [/tmp/x] and [bold]not bold[/bold] in float32[2,256]"


def _text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(renderable)
    return out.getvalue()


def test_trial_panel_prints_error_text_verbatim():
    r = TrialResult(status=Status.ERROR, profile="p", profile_hash="h", num_envs=64,
                    error_type="builtins.ValueError", error_message=NASTY)
    assert "[/tmp/x]" in _text(render_trial(r)) and "[bold]not bold[/bold]" in _text(render_trial(r))


def test_comparison_table_prints_reasons_verbatim():
    r = TrialResult(status=Status.CRASH, profile="p", profile_hash="h", num_envs=64,
                    error_type="[/weird]")
    table = sweep_table([r], choose([r], None, 0.1), None)
    assert "crashed ([/weird])" in _text(sweep_rich(table))


def test_the_terminal_reads_the_same_columns_as_the_markdown_by_name():
    rows = [TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=n,
                        batch_size=n, num_minibatches=4, backend="cpu",
                        host_peak_rss_bytes=700 * 2**20, steps_per_s=1000.0 * n)
            for n in (64, 128)]
    table = sweep_table(rows, choose(rows, None, 0.1), None)
    shown = _text(sweep_rich(table)).splitlines()
    header = next(line for line in shown if "num_envs" in line)
    # CPU, no budget: the VRAM columns and % budget are all n/a and left out; host RAM stays
    assert "host peak (RAM)" in header and "VRAM" not in header and "% budget" not in header
    assert "alloc peak (VRAM)" in table.to_markdown()  # the file keeps every column
    assert any("* 128" in line for line in shown)
