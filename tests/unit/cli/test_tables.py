"""Measured text (error messages, paths) must print as text, never parse as rich markup."""

import io

from rich.console import Console

from vramtune.cli.tables import comparison_table
from vramtune.cli.trial_cmd import render_trial
from vramtune.records import Status, TrialResult
from vramtune.tune.recommend import choose
from vramtune.views.sweep_table import comparison_rows

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
    rows = comparison_rows([r], choose([r], None, 0.1), None)
    assert "crashed ([/weird])" in _text(comparison_table(rows, gpu=False))
