"""The Python API given what a notebook might pass: wrong types, words where the CLI parses
words, huge and odd numbers, odd paths. Every public function answers with a result or ONE
UserError, never another exception, and writes nothing when it refuses. No trial runs here:
the functions that train are driven through the requests they build first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vramtune
from vramtune import api
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult
from vramtune.tune.request import resolve

WORDS = st.sampled_from(["off", "no", "yes", "on", "2", "1e400", "-1", "", "  ", "nan", "inf",
                         "9" * 5000, "../../x", "a" * 300, "evil[/]name[bold red]", "auto",
                         "x\ny", "\x00", "64", "1.5GB", "10%"])
ODD = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                st.sampled_from([0, 1, 2, 64, 10**9, 2**63]), st.floats(allow_nan=True,
                                                                       allow_infinity=True),
                WORDS, st.lists(st.integers(0, 9), max_size=3),
                st.dictionaries(st.sampled_from(["a", "env"]), st.integers(), max_size=2),
                st.just(object()), st.just(Path("/nonexistent/x")))

SWEEP_OPTIONS = ("gpu_mem", "headroom", "start", "max_envs", "refine", "objective", "timeout_s",
                 "cache", "standby", "confirm", "confirm_steps", "devices", "search", "parallel",
                 "executor", "ray_address", "gpu_type", "gpu_types", "speed_margin")
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def one_user_error(call) -> object:
    """The call's result, or None after one UserError of one line."""
    try:
        return call()
    except UserError as exc:
        assert "\n" not in str(exc), str(exc)
        return None


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def nothing_written(folder: Path) -> bool:
    return not any(folder.iterdir())


@FUZZ
@given(st.dictionaries(st.sampled_from(SWEEP_OPTIONS), ODD, min_size=1, max_size=4))
def test_sweep_options_are_checked_as_the_cli_checks_them(options) -> None:
    request = one_user_error(lambda: vramtune.sweep_request("quick", **options))
    if request is not None:
        one_user_error(lambda: resolve(request))  # what prepare_sweep does next, unwritten


@FUZZ
@given(ODD, ODD, ODD, ODD)
def test_trial_arguments(num_envs, gpu_mem, timeout_s, cache) -> None:
    one_user_error(lambda: api.trial_request("quick", num_envs, gpu_mem=gpu_mem,
                                             timeout_s=timeout_s, cache=cache))


@FUZZ
@given(ODD, st.lists(ODD, max_size=3), ODD, ODD, ODD)
def test_recommend_of_anything(results, items, gpu_mem, headroom, objective) -> None:
    for given_results in (results, items):
        one_user_error(lambda r=given_results: vramtune.recommend(
            r, gpu_mem=gpu_mem, headroom=headroom, objective=objective))


def test_recommend_takes_records_read_as_dicts() -> None:
    record = TrialResult(Status.OK, "quick", "abc", 64, batch_size=64, num_minibatches=4,
                         backend="cpu", host_peak_rss_bytes=900 * 2**20, steps_per_s=1e4,
                         budget_bytes=2 * 10**9)
    from_dicts = vramtune.recommend([record.to_dict()], gpu_mem="2GB")
    assert from_dicts.chosen is not None and from_dicts.chosen.num_envs == 64


@FUZZ
@given(ODD, ODD)
def test_check_arguments(scratch: Path, config, devices) -> None:
    one_user_error(lambda: vramtune.check(config, devices=devices))
    assert nothing_written(scratch)


@FUZZ
@given(ODD, ODD, ODD, ODD, ODD)
def test_emit_config_arguments(scratch: Path, run, gpu_mem, num_timesteps, hydra_prefix,
                               fmt) -> None:
    one_user_error(lambda: vramtune.emit_config(run, gpu_mem=gpu_mem, num_timesteps=num_timesteps,
                                                hydra_prefix=hydra_prefix, format=fmt))
    one_user_error(lambda: vramtune.load_runs(run))
    assert nothing_written(scratch)


@FUZZ
@given(ODD, ODD, ODD, ODD)
def test_init_profile_arguments(scratch: Path, output, name, backend, force) -> None:
    # env is one no source accepts, so nothing is imported; every other check runs first
    for env in ("nope:x", 123, None):
        one_user_error(lambda e=env: vramtune.init_profile(e, output, name=name, backend=backend,
                                                           force=force))
    assert nothing_written(scratch)


@FUZZ
@given(ODD, ODD, ODD, ODD)
def test_verify_arguments_refused_before_any_trial(scratch: Path, config, steps, cache,
                                                   devices) -> None:
    # gpu_mem is missing or bad in every call: nothing here may reach a trial
    for gpu_mem in (None, "1KB", "abc"):
        one_user_error(lambda g=gpu_mem: vramtune.verify(config, gpu_mem=g, steps=steps,
                                                         cache=cache, devices=devices))
    assert nothing_written(scratch)


def test_the_reported_cases_are_one_line(scratch: Path) -> None:
    for call, match in [
        (lambda: vramtune.sweep_request("quick", cache="sometimes"), "--cache is on or off"),
        (lambda: vramtune.check(42), "must be a path"),
        (lambda: vramtune.check("x.yaml", devices="2"), "--devices"),
        (lambda: vramtune.init_profile("brax:fast", "p.yaml", name=123), "--name"),
        (lambda: vramtune.recommend("results.jsonl"), "a list of trial records"),
        (lambda: vramtune.recommend([{"status": "ok"}]), "results\\[0\\]"),
        (lambda: vramtune.sweep_request("quick", parallel="9" * 5000), "--parallel"),
        (lambda: vramtune.sweep("a" * 300), "unknown profile"),
    ]:
        with pytest.raises(UserError, match=match):
            call()
    assert nothing_written(scratch)


def test_words_the_cli_would_parse_are_parsed() -> None:
    request = vramtune.sweep_request("quick", cache="off", confirm="no", standby="yes")
    assert (request.cache, request.confirm, request.standby) == (False, False, True)
    with pytest.raises(UserError, match="--confirm-steps sets"):
        vramtune.sweep_request("quick", confirm="off", confirm_steps=10)


def test_a_header_its_reader_refuses_is_never_written(scratch: Path) -> None:
    from vramtune.results.settings import SweepSettings
    from vramtune.results.store import RunHeader, create_run
    from vramtune.workload.profile import load_profile

    bad = RunHeader("quick", "abc", load_profile("quick").to_dict(), None, 0.1, {}, {},
                    search=SweepSettings(confirm="no"))  # type: ignore[arg-type]
    with pytest.raises(UserError, match="confirm"):
        create_run(scratch / "run", bad)
    assert not (scratch / "run").exists()
    assert os.listdir(scratch) == []
