"""Property tests: any results file is a Run (damaged trial lines skipped WITH a warning
naming the line) or one UserError; any baseline is a Snapshot or one UserError."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.hostile import mutated, result_or_user_error, values
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import BASELINE_KIND, snapshot_from_data
from vramtune.results.frame import runs_frame
from vramtune.results.settings import SweepSettings
from vramtune.results.store import RESULTS_FILE, RunHeader, load_run
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.budgets import merge_runs
from vramtune.tune.recommend import Objective, choose
from vramtune.views.runs import compare_table, recommendation_line, run_description
from vramtune.views.sweep_table import sweep_table
from vramtune.workload.profile import load_profile

QUICK = load_profile("quick")
HEADER = RunHeader(
    profile_name="quick", profile_hash=QUICK.hash, profile=QUICK.to_dict(), budget_bytes=None,
    headroom_fraction=0.1, machine={"cpu": "AMD EPYC", "cpu_count": 2},
    versions={"jax": "0.9.2"}, search=SweepSettings.from_dict({"start": 64, "max_envs": 256, "refine": 0,
                                                     "objective": "throughput"})).to_dict()
TRIAL = {"kind": "trial", **TrialResult(
    status=Status.OK, profile="quick", profile_hash=QUICK.hash, num_envs=128, batch_size=128,
    num_minibatches=4, unroll_length=10, backend="cpu", device_count=1, compile_s=12.5,
    steps_per_s=15000.0, steps_per_s_min=14000.0, steps_per_s_max=16000.0,
    measured_intervals=3, host_peak_rss_bytes=500_000_000, wall_s=20.0,
    versions={"jax": "0.9.2"}, timestamp="2026-11-22T07:00:00+00:00", notes=("n",)).to_dict()}
# No deadline: the first example pays one-off costs (the readers' pydantic adapters, the
# views' lazy imports) that took 3.8 s on a loaded 2-core machine, then ~0.1 s each.
FLAKY = settings(max_examples=80, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow,
                                        HealthCheck.function_scoped_fixture])


def _write(tmp_path, lines) -> None:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    (tmp_path / RESULTS_FILE).write_text(text)


@FLAKY
@given(st.lists(mutated(TRIAL), min_size=1, max_size=3))
def test_damaged_trial_lines_are_skipped_with_a_warning_naming_the_line(tmp_path, trials):
    _write(tmp_path, [HEADER, TRIAL, *trials])
    run = result_or_user_error(lambda: load_run(tmp_path))
    assert not isinstance(run, UserError), run  # trial lines never make the file unreadable
    assert len(run.results) + len(run.warnings) == 1 + len(trials)
    for warning in run.warnings:
        assert f"{RESULTS_FILE}:" in warning and "skipped" in warning
    for r in run.results:  # what is used is well-typed
        assert isinstance(r.status, Status) and 1 <= r.num_envs <= MAX_NUM_ENVS
        assert r.steps_per_s is None or r.steps_per_s >= 0
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in r.versions.items())
    _every_view(run)


def _every_view(run) -> None:
    """What report, compare, emit-config and sweep --resume do with a run, in process: a
    loaded run never fails later (the old crashes were three modules past the loader)."""
    rec = choose(run.results, run.header.budget_bytes or 2 * 10**9, 0.1, Objective.KNEE)
    sweep_table(run.results, rec, run.header.budget_bytes).to_markdown()
    recommendation_line(rec, run.header.budget_bytes)
    run_description(run)
    compare_table(run, run).to_csv()
    runs_frame([run])
    result_or_user_error(lambda: merge_runs([run]))


@FLAKY
@given(mutated(HEADER))
def test_any_header_is_a_run_or_one_user_error(tmp_path, header):
    _write(tmp_path, [header, TRIAL])
    run = result_or_user_error(lambda: load_run(tmp_path))
    if not isinstance(run, UserError):
        h = run.header
        assert isinstance(h.profile_name, str) and isinstance(h.machine, dict)
        assert 0 <= h.headroom_fraction < 1
        assert h.budget_bytes is None or h.budget_bytes >= 1
        assert isinstance(h.device, str)
        _every_view(run)


@settings(max_examples=100, deadline=3000,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(values.map(json.dumps), st.text(max_size=40),
                          st.sampled_from(["[" * 5000 + "]" * 5000, "{\"kind\": \"trial\"}",
                                           "NaN", "\x00\x00"])), max_size=4))
def test_any_lines_after_a_header(tmp_path, lines):
    _write(tmp_path, [HEADER, *lines])
    result_or_user_error(lambda: load_run(tmp_path))


@settings(max_examples=80, deadline=3000,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_any_bytes_as_a_results_file(tmp_path, content):
    (tmp_path / RESULTS_FILE).write_bytes(content)
    result_or_user_error(lambda: load_run(tmp_path))


SAMPLE = {"status": "ok", "peak_bytes": 450_000_000, "steps_per_s": 15000.0, "compile_s": 12.0,
          "error": None}
BASELINE = {"kind": BASELINE_KIND, "schema_version": 1,
            "machine": {"backend": "cpu", "device": "AMD EPYC", "device_count": 1},
            "profile_name": "quick", "profile_hash": QUICK.hash, "versions": {"jax": "0.9.2"},
            "compile_cache": False, "created": "2026-11-22", "updated": "2026-11-22",
            "profile": QUICK.to_dict(),
            "sizes": [{"num_envs": n, "memory_label": "host RAM", "batch_size": n,
                       "num_minibatches": 4, "versions": {"jax": "0.9.2"},
                       "measured": "2026-11-22", "samples": [SAMPLE, SAMPLE]}
                      for n in (64, 256)]}


@settings(max_examples=250, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(BASELINE))
def test_any_baseline_is_a_snapshot_or_one_user_error(data):
    snap = result_or_user_error(lambda: snapshot_from_data(data, "b.json"))
    if not isinstance(snap, UserError):
        for size in snap.sizes:  # everything the gate computes with is a number
            assert all(isinstance(v, int | float) and v >= 0 for v in size.peaks_bytes())
            assert all(isinstance(v, int | float) and v >= 0 for v in size.rates_per_s())
            assert all(isinstance(s.status, str) for s in size.samples)
