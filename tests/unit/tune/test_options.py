"""Every sweep option declared once (tune.options) reaches the request, the API and the CLI."""

from __future__ import annotations

import typing

import pytest
import typer

from vramtune import api
from vramtune.cli.app import app
from vramtune.errors import UserError
from vramtune.tune.options import SweepOptions, sweep_flags
from vramtune.tune.request import SweepRequest


def test_each_declared_option_is_a_flag_of_vramtune_sweep():
    command = typer.main.get_command(app).commands["sweep"]  # type: ignore[attr-defined]
    flags = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for name, flag in sweep_flags().items():
        if name == "gpu_type":  # the API's one sweep of a mixed cluster; the CLI has --gpu-types
            assert not flag.flag and "--gpu-type" not in flags
            continue
        assert set(flag.flag.split("/")) <= flags


def test_the_api_takes_the_declared_options_as_typed_keywords():
    hints = typing.get_type_hints(SweepOptions)
    assert list(hints) == list(sweep_flags())
    for function in (api.sweep, api.sweep_request, api.prepare_sweep, SweepRequest.parse):
        kwargs = typing.get_type_hints(function)["options"]
        assert typing.get_origin(kwargs) is typing.Unpack and typing.get_args(kwargs) == (SweepOptions,)


def test_an_option_reads_into_its_field():
    r = SweepRequest.parse("quick", gpu_mem="2GB", headroom="15%", speed_margin="5%",
                           gpu_types="A100, H100", search="bisect", timeout_s=30.0)
    assert (r.budget_bytes, r.headroom_fraction, r.speed_margin_fraction) == (2 * 10**9, 0.15, 0.05)
    assert r.gpu_types == ("A100", "H100") and r.search == "bisect" and r.timeout_s == 30.0
    one = SweepRequest.parse("quick", executor="ray", gpu_type="A100")
    assert (one.executor, one.gpu_type) == ("ray", "A100")


def test_an_unknown_option_is_one_line_naming_the_options():
    with pytest.raises(UserError, match="unknown sweep option 'gpu_men'.*gpu_mem") as err:
        SweepRequest.parse("quick", gpu_men="8GB")  # type: ignore[call-arg]
    assert "\n" not in str(err.value)
