"""Where the sweep's slope prior comes from: the sizes probed, a saved footprint, a probe."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.sweeps import sweep_config
from vramtune.measure.footprint import Footprint, SizeFootprint
from vramtune.tune import prior as P
from vramtune.tune.planner import SearchMethod
from vramtune.workload.profile import load_profile

MiB = 2 ** 20
QUICK = load_profile("quick")


def space(budget=int(1.2e9), method=SearchMethod.PREDICTIVE, start=128, max_envs=2048):
    return sweep_config(QUICK, budget, 0.1, start, max_envs, None, search=method).space()


ASKED = [(128, 128, 4), (2048, 2048, 4), (1024, 1024, 4), (512, 512, 4)]


def footprint(sizes=(128, 2048), error=None, profile_hash=QUICK.hash, requested=tuple(ASKED)):
    return Footprint("cpu", 1, tuple(SizeFootprint(n, n, 4, 0, 0, 0, int(n * 0.24 * MiB), 2.0)
                                     for n in sizes), 10.0, error, profile_hash, requested)


class Launched:
    """What an executor's probe hands back: a result when asked (here, a canned one)."""

    def __init__(self, found):
        self.found, self.closed, self.asked = found, False, []

    def result(self, wait_s):
        self.asked.append(wait_s)
        return self.found

    def close(self):
        self.closed = True


def test_probe_sizes_are_the_start_and_the_largest_candidates_up_to_16_8_4x():
    assert P.probe_sizes(QUICK, space(), 1) == ASKED  # the far size, then its fallbacks
    assert [t[0] for t in P.probe_sizes(QUICK, space(max_envs=1000), 1)] == [128, 1000, 512]
    assert P.probe_sizes(QUICK, space(method=SearchMethod.BISECT), 1) is None
    assert P.probe_sizes(QUICK, space(budget=None), 1) is None  # nothing to predict against
    assert P.probe_sizes(QUICK, space(start=2048, max_envs=2048), 1) is None


def test_on_resume_a_saved_footprint_of_the_same_question_is_used(tmp_path):
    (tmp_path / P.FOOTPRINT_FILE).write_text(json.dumps(footprint().to_dict()))
    launches = []
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launches.append(a), 60,
                                 resume=True)
    found, note = source.get(trials_done=False)
    assert launches == [] and "saved in footprint.json" in note and "memory prior" in note
    assert found is not None and found.bytes_per_env == pytest.approx(0.24 * MiB, rel=1e-3)
    assert source.get(trials_done=True)[1] is None  # said once


@pytest.mark.parametrize("saved", [
    footprint(profile_hash="0123456789abcdef"),  # another profile's
    footprint(requested=tuple(ASKED[:2])),  # other sizes asked for
    replace(footprint(), backend="gpu"),
])
def test_a_saved_footprint_of_another_question_is_not_used(tmp_path, saved):
    (tmp_path / P.FOOTPRINT_FILE).write_text(json.dumps(saved.to_dict()))
    launched = Launched(footprint())
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launched, 60,
                                 resume=True)
    assert source.probe is launched


def test_a_new_run_ignores_a_footprint_left_in_its_directory(tmp_path):
    (tmp_path / P.FOOTPRINT_FILE).write_text(json.dumps(footprint().to_dict()))
    launched = Launched(footprint())
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launched, 60)
    assert source.probe is launched


def test_a_damaged_saved_footprint_is_said_and_probed_again(tmp_path):
    (tmp_path / P.FOOTPRINT_FILE).write_bytes(b"\x00garbage")
    launched = Launched(footprint())
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launched, 60,
                                 resume=True)
    assert "probing again" in source.warning and P.FOOTPRINT_FILE in source.warning
    assert source.get(trials_done=False) == (None, None)  # no waiting before a trial ends
    assert launched.asked == []
    found, note = source.get(trials_done=True, round_wall_s=20.0)
    assert found is not None and "memory prior" in note and "not a measured peak" in note
    assert launched.asked == [pytest.approx(20.0, abs=0.5)]
    saved = json.loads((tmp_path / P.FOOTPRINT_FILE).read_text())
    assert [s["num_envs"] for s in saved["sizes"]] == [128, 2048]
    assert saved["profile_hash"] == QUICK.hash and saved["requested"][1] == [2048, 2048, 4]


def test_a_probe_too_slow_is_closed_not_saved_and_the_search_goes_on(tmp_path):
    launched = Launched(None)
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launched, 60)
    found, note = source.get(trials_done=True, round_wall_s=1.0)
    assert found is None and launched.closed and "no memory prior" in note
    assert launched.asked == [pytest.approx(P.WAIT_FLOOR_S, abs=0.5)]
    assert source.get(trials_done=True) == (None, None)  # said once, not again
    assert not (tmp_path / P.FOOTPRINT_FILE).exists()  # a resume may try again


def test_a_failed_probe_is_kept_so_a_resume_does_not_retry(tmp_path):
    (tmp_path / P.FOOTPRINT_FILE).write_text(json.dumps(footprint(error="boom").to_dict()))
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, None, 60, resume=True)
    assert source.probe is None and "no memory prior: boom" in source.get(False)[1]
    assert source.get(trials_done=True) == (None, None)


def test_on_a_gpu_the_probe_starts_after_the_first_round_and_is_waited_for(tmp_path):
    launched = Launched(footprint())
    calls = []
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path,
                                 lambda *a: calls.append(a) or launched, 90, beside=False,
                                 backend="gpu")
    assert calls == [] and source.get(trials_done=False) == (None, None)
    found, note = source.get(trials_done=True, round_wall_s=5.0)
    assert len(calls) == 1 and found is not None and "memory prior" in note
    assert launched.asked == [pytest.approx(90, abs=0.5)]  # its own limit, not the round's


def test_no_waiting_once_the_search_has_nothing_left_to_aim(tmp_path):
    launched = Launched(footprint())
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, lambda *a: launched, 60)
    assert source.get(trials_done=True, needed=False) == (None, None)
    assert launched.closed and launched.asked == [] and not source.waiting


def test_a_linked_footprint_file_is_not_written_through(tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    run = tmp_path / "run"
    run.mkdir()
    (run / P.FOOTPRINT_FILE).symlink_to(outside)
    source = P.PriorSource.start(QUICK, space(), 1, run, lambda *a: Launched(footprint()), 60)
    found, note = source.get(trials_done=True)
    assert found is not None and "not saved" in note and "symbolic link" in note
    assert outside.read_text() == "{}"


def test_without_an_executor_probe_there_is_no_prior(tmp_path):
    source = P.PriorSource.start(QUICK, space(), 1, tmp_path, None, 60)
    assert source.get(trials_done=True) == (None, None)


def test_describe_labels_the_figure_a_prior_not_a_peak():
    words = P.describe(footprint())
    assert "per env" in words and "compiled, not run" in words and "128 and 2048" in words
    assert P.describe(replace(footprint(), error="RuntimeError: x")).startswith("no memory prior")
    assert P.slope_prior(footprint(sizes=(128,))) is None
