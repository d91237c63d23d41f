"""Before a sweep's first trial: a resume checked before the run is locked, and released when
it fails; runs written by earlier versions (tests/golden/runs: headers that recorded fewer
search settings, or none of the newer ones) still resume and report."""

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
from vramtune.workload.profile import load_profile

QUICK = load_profile("quick")
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


def _run_without_lock(tmp_path):
    from vramtune import machine
    from vramtune.results.store import LOCK_FILE, RunHeader, create_run

    directory = tmp_path / "run"
    lock = create_run(directory, RunHeader(QUICK.name, QUICK.hash, QUICK.to_dict(), 10**9, 0.1,
                                           machine.machine_summary(), machine.versions()))
    lock.release()
    (directory / LOCK_FILE).unlink()  # as a copied or hand-made run directory has it
    return directory, directory / LOCK_FILE


def test_a_refused_resume_leaves_the_run_directory_as_it_found_it(tmp_path):
    """Found by the CLI fuzz pass: `sweep --resume RUN --profile other` was refused, but only
    after it had made RUN/.lock. Every option is checked before the lock file is made."""
    import pytest

    from vramtune.errors import UserError
    from vramtune.tune.prepare import prepare
    from vramtune.tune.request import SweepRequest

    directory, lock_file = _run_without_lock(tmp_path)
    for bad in (dict(profile="ant"), dict(budget_bytes=2 * 10**9),
                dict(start=4096, max_envs=128), dict(confirm_steps=0),
                dict(cache=False)):  # it ran with the cache on
        with pytest.raises(UserError):
            prepare(SweepRequest(resume=directory, **bad))
        assert not lock_file.exists(), bad


def test_a_run_keeps_its_compile_cache_mode_on_resume(tmp_path):
    """The cache moves CPU peaks by 130-190 MiB: a resumed run keeps the mode its trials ran
    with (runs from before the mode was recorded used the cache everywhere)."""
    from vramtune.tune.prepare import prepare
    from vramtune.tune.request import SweepRequest
    directory, _ = _run_without_lock(tmp_path)
    prepared = prepare(SweepRequest(resume=directory))
    try:
        assert prepared.config.cache_under_cpu_cap is True  # legacy: "on"
        assert prepared.header.search.cache == "on"
    finally:
        prepared.executor.close()
        prepared.release()
    fresh = prepare(SweepRequest(profile="quick", budget_bytes=10**9, out=tmp_path / "new"))
    try:
        assert fresh.header.search.cache == "auto" and not fresh.config.cache_under_cpu_cap
        assert fresh.config.compile_cache_dir is not None  # used where it moves no peak
    finally:
        fresh.executor.close()
        fresh.release()


def test_a_resume_that_fails_after_locking_leaves_the_run_unlocked(tmp_path):
    """A notebook keeps the failed call's frames (and so its lock) alive: a resume that fails
    after taking the lock must release it, or the next try in that kernel is refused."""
    import pytest

    from vramtune.errors import UserError
    from vramtune.results.store import lock_run
    from vramtune.tune.prepare import prepare
    from vramtune.tune.request import SweepRequest

    class BrokenNvml:  # the device facts fail to read, after the lock is taken
        notice = None

        @property
        def available(self):
            raise UserError("NVML broke")

    directory, _ = _run_without_lock(tmp_path)
    with pytest.raises(UserError, match="NVML broke") as caught:
        prepare(SweepRequest(resume=directory), nvml=BrokenNvml())
    # ``caught`` holds the traceback, as a notebook's last error does
    lock_run(directory).release()  # not held by the failed call
    assert caught.value is not None
