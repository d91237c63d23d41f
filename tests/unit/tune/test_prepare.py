"""Runs written by earlier versions (tests/golden/runs: headers that recorded fewer search
settings, or none of the newer ones) still resume and report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vramtune.results.settings import CacheMode, SearchMethod, SweepSettings
from vramtune.results.store import RESULTS_FILE, load_run
from vramtune.tune.prepare import prepare
from vramtune.tune.request import SweepRequest

GOLDEN = Path(__file__).parents[2] / "golden" / "runs"
OLD_RUNS = sorted(p.name for p in GOLDEN.glob("*.jsonl"))


def _copy(tmp_path: Path, name: str) -> tuple[Path, dict]:
    directory = tmp_path / name.removesuffix(".jsonl")
    directory.mkdir()
    shutil.copy(GOLDEN / name, directory / RESULTS_FILE)
    return directory, json.loads((GOLDEN / name).read_text().splitlines()[0])


@pytest.mark.parametrize("name", OLD_RUNS)
def test_an_old_run_resumes_with_the_settings_it_recorded(tmp_path, name):
    directory, head = _copy(tmp_path, name)
    before = (directory / RESULTS_FILE).read_bytes()
    recorded = head.get("search") or {}
    prepared = prepare(SweepRequest(resume=directory))
    try:
        s = prepared.config.settings
        assert (s.start, s.max_envs) == (recorded["start"], recorded["max_envs"])
        assert str(prepared.config.objective) == recorded["objective"]
        # what older runs did not record: bisection, the cache everywhere, one device
        assert s.search is SearchMethod(recorded.get("search", "bisect"))
        assert s.cache is CacheMode(recorded.get("cache", "on"))
        assert s.devices == recorded.get("devices", 1)
        assert prepared.header.search == s  # typed, as the new run's header would store it
    finally:
        prepared.executor.close()
        prepared.release()
    assert (directory / RESULTS_FILE).read_bytes() == before  # a resume rewrites no header
    assert load_run(directory).header.search == SweepSettings.from_dict(recorded)


@pytest.mark.parametrize("name", OLD_RUNS)
def test_an_old_run_reports(tmp_path, name):
    directory, _ = _copy(tmp_path, name)
    done = run_cli("report", str(directory), env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and str(load_run(directory).results[0].num_envs) in done.stdout
