"""A sweep request is checked once, on creation; reconciling it with a resumed run is pure."""

from __future__ import annotations

import math

import pytest

from vramtune.errors import UserError
from vramtune.records import Objective
from vramtune.results.settings import SweepSettings
from vramtune.results.store import RunHeader
from vramtune.tune.planner import SearchMethod
from vramtune.tune.request import SweepRequest, reconcile, resolve
from vramtune.workload.profile import load_profile


@pytest.mark.parametrize("bad", [-0.01, 1.0, 1.5, math.nan, math.inf, "-1%", "150%", "nan",
                                 "1e400", ""])
def test_a_speed_margin_outside_0_to_100_percent_is_one_line(bad):
    with pytest.raises(UserError) as err:
        SweepRequest.parse("quick", speed_margin=bad)
    assert "\n" not in str(err.value) and "speed-margin" in str(err.value)


def test_the_speed_margin_reaches_the_config_as_a_fraction():
    assert resolve(SweepRequest()).speed_margin == 0.02
    assert resolve(SweepRequest.parse("quick", speed_margin="5%")).speed_margin == 0.05
    assert resolve(SweepRequest(speed_margin_fraction=0.0)).speed_margin == 0.0


@pytest.mark.parametrize("value, parsed", [("auto", "auto"), (" AUTO ", "auto"), ("3", 3), (2, 2),
                                           (None, None)])
def test_parallel_is_auto_or_a_positive_integer(value, parsed):
    assert SweepRequest.parse("quick", parallel=value).parallel == parsed
    assert resolve(SweepRequest.parse("quick", parallel=value)).settings.parallel == (parsed or 1)


def test_a_resumed_run_runs_as_many_at_once_as_it_asked():
    planned = reconcile(SweepRequest(resume="run"), _header(parallel=9, parallel_asked="auto"))
    assert planned.parallel == "auto"  # planned again from the card as it is now
    assert reconcile(SweepRequest(resume="run"), _header(parallel=2)).parallel == 2
    assert reconcile(SweepRequest(resume="run"), _header()).parallel == 1  # older runs: 1
    assert reconcile(SweepRequest(resume="run", parallel=1), _header(parallel=2)).parallel == 1
    with pytest.raises(UserError, match="search.parallel must be"):  # the header is refused
        reconcile(SweepRequest(resume="run"), _header(parallel="lots"))


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "many", "", "1e3", True, 0, 10**9])
def test_a_bad_parallel_is_one_line(value):
    with pytest.raises(UserError) as err:
        SweepRequest.parse("quick", parallel=value)
    assert "\n" not in str(err.value) and "--parallel" in str(err.value)


def test_auto_parallel_is_for_the_local_executor():
    with pytest.raises(UserError, match="local executor"):
        resolve(SweepRequest.parse("quick", parallel="auto", executor="ray"))


@pytest.mark.parametrize("options", [dict(parallel=0), dict(refine=-1), dict(timeout_s=math.nan),
                                     dict(executor="slurm"), dict(confirm_steps=0),
                                     dict(devices=0), dict(profile=" "), dict(start=0)])
def test_every_option_is_checked_when_the_request_is_made(options):
    with pytest.raises(UserError):
        SweepRequest(**options)


@pytest.mark.parametrize("options,words", [
    (dict(confirm=False, confirm_steps=100), "--no-confirm runs none"),
    (dict(resume="runs/a", out="runs/b"), "drop --out"),
])
def test_flags_that_contradict_each_other_are_refused(options, words):
    with pytest.raises(UserError, match=words):
        SweepRequest.parse(**options)
    SweepRequest.parse(confirm=True, confirm_steps=100)  # each of them alone is fine
    SweepRequest.parse(resume="runs/a")


def test_a_run_swept_with_confirm_steps_resumes_without_a_proof():
    # the header's confirm_steps fills the request: not a flag the user gave beside --no-confirm
    request = SweepRequest.parse(resume="runs/a", confirm=False)
    resumed = reconcile(request, _header(confirm_steps=200, confirm=True))
    assert resumed.confirm is False


def _header(**search) -> RunHeader:
    prof = load_profile("quick")
    return RunHeader(profile_name=prof.name, profile_hash=prof.hash, profile=prof.to_dict(),
                     budget_bytes=10**9, headroom_fraction=0.2, machine={}, versions={},
                     gpu_name=None, gpu_driver=None, gpu_total_bytes=None, cap=None,
                     search=SweepSettings.from_dict({"start": 64, "max_envs": 512, "objective": "knee",
                                                      **search}))


def test_a_resumed_run_fills_what_the_request_leaves_open():
    request = reconcile(SweepRequest(resume="run"), _header(search="predictive"))
    assert (request.budget_bytes, request.headroom_fraction) == (10**9, 0.2)
    assert (request.start, request.max_envs, request.objective) == (64, 512, Objective.KNEE)
    assert request.search is SearchMethod.PREDICTIVE and request.cache is True
    # a run that did not record its search method searched by bisection
    assert reconcile(SweepRequest(resume="run"), _header()).search is SearchMethod.BISECT


@pytest.mark.parametrize("options", [dict(budget_bytes=2 * 10**9), dict(headroom_fraction=0.1),
                                     dict(devices=2), dict(cache=False), dict(profile="ant")])
def test_a_flag_that_contradicts_the_resumed_run_is_refused(options):
    with pytest.raises(UserError):
        reconcile(SweepRequest(resume="run", **options), _header())


def test_a_resumed_run_keeps_its_speed_margin_unless_told_otherwise():
    config = resolve(SweepRequest.parse("quick", speed_margin="5%"))
    assert config.settings.to_dict()["speed_margin"] == 0.05  # recorded in the run's header
    header = _header(speed_margin=config.settings.speed_margin)
    assert resolve(SweepRequest(resume="run"), header).speed_margin == 0.05
    given = SweepRequest.parse(resume="run", speed_margin="1%")
    assert resolve(given, header).speed_margin == 0.01
    # a run that did not record it chose with the default
    assert resolve(SweepRequest(resume="run"), _header()).speed_margin == 0.02


def test_a_request_made_with_words_holds_the_enums():
    """SweepRequest(search='bisect') runs bisection with its refine default, as parse() does."""
    config = resolve(SweepRequest("quick", search="bisect", objective="knee"))
    assert config.settings.search is SearchMethod.BISECT and config.settings.refine == 3
    assert config.objective is Objective.KNEE
    with pytest.raises(UserError, match="search"):
        SweepRequest("quick", search="sideways")  # type: ignore[arg-type]
