"""Runs as DataFrames, and the one rule that picks one record per num_envs."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.frame import (
    COLUMNS,
    one_per_size,
    runs_frame,
    to_python,
    trials_frame,
)
from vramtune.results.store import Run, RunHeader

MiB = 2**20
GB = 10**9


def trial(n: int, peak: int | None = 500 * MiB, rate: float | None = 1000.0, *,
          status: Status = Status.OK, budget: int | None = GB, gpu: bool = False,
          timestamp: str | None = "2026-11-21T20:03:00+00:00") -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="h", num_envs=n,
                       batch_size=n, num_minibatches=4, unroll_length=10,
                       backend="gpu" if gpu else "cpu", budget_bytes=budget, steps_per_s=rate,
                       host_peak_rss_bytes=None if gpu else peak,
                       jax_peak_pool_bytes=peak if gpu else None, gpu_name="H100" if gpu else None,
                       timestamp=timestamp)


def run(directory: str, *results: TrialResult, gpu: str | None = None) -> Run:
    header = RunHeader(profile_name="quick", profile_hash="h", profile={"name": "quick"},
                       budget_bytes=GB, headroom_fraction=0.1, machine={"cpu": "AMD EPYC"},
                       versions={}, gpu_name=gpu)
    return Run(Path(directory), header, tuple(results))


def test_every_scalar_field_of_the_record_is_a_typed_column():
    lists = {f.name for f in dataclasses.fields(TrialResult) if "list[" in str(f.type)}
    scalar = {f.name for f in dataclasses.fields(TrialResult)} - {"versions", "notes"} - lists
    assert scalar <= set(COLUMNS) and not lists & set(COLUMNS)
    frame = trials_frame([trial(64)])
    assert list(frame.columns) == list(COLUMNS)
    assert frame["num_envs"].dtype == "Int64" and frame["host_peak_rss_bytes"].dtype == "Int64"
    assert frame["steps_per_s"].dtype == "Float64" and frame["status"].dtype == "string"
    assert str(frame["timestamp"].dtype) == "datetime64[us, UTC]"
    assert list(frame.columns[:5]) == ["num_envs", "batch_size", "num_minibatches",
                                       "unroll_length", "status"]


def test_unmeasured_is_na_never_zero():
    frame = trials_frame([trial(64, peak=None, rate=None, status=Status.OOM, timestamp=None)])
    row = frame.iloc[0]
    for column in ("host_peak_rss_bytes", "peak_bytes", "steps_per_s", "compile_s",
                   "jax_peak_bytes_in_use", "nvml_process_peak_bytes"):
        assert row[column] is pd.NA, column
    assert row["timestamp"] is pd.NaT and row["status"] == "oom"


def test_derived_columns_match_the_record():
    cpu, gpu = trial(64), trial(128, peak=900 * MiB, gpu=True)
    frame = trials_frame([cpu, gpu])
    assert to_python(frame["peak_bytes"]) == [cpu.peak_bytes, gpu.peak_bytes]
    assert to_python(frame["process_peak_bytes"]) == [None, 900 * MiB]
    assert to_python(frame["memory_kind"]) == ["host RAM", "VRAM"]
    assert to_python(frame["device"]) == [None, "H100"]


def test_runs_frame_names_the_run_of_every_row():
    a = run("runs/cpu", trial(64), trial(128))
    b = run("runs/h100", trial(64, gpu=True), gpu="NVIDIA H100 80GB HBM3")
    frame = runs_frame([a, b])
    assert to_python(frame["run_dir"]) == ["runs/cpu", "runs/cpu", "runs/h100"]
    assert to_python(frame["device"]) == ["AMD EPYC", "AMD EPYC", "NVIDIA H100 80GB HBM3"]
    assert runs_frame(a).equals(runs_frame([a]))
    empty = runs_frame(run("runs/none"))
    assert empty.empty and list(empty.columns) == list(COLUMNS)


def test_runs_frame_per_size_applies_the_shared_rule_across_runs():
    a = run("a", trial(256, 700 * MiB), trial(64))
    b = run("b", trial(256, None, None, status=Status.OOM))
    frame = runs_frame([a, b], per_size=True)
    assert to_python(frame["num_envs"]) == [64, 256]
    assert to_python(frame["status"]) == ["ok", "oom"] and to_python(frame["run_dir"]) == ["a", "b"]


# --- one_per_size: the rule emit-config and compare share -----------------------------------

def test_a_failure_with_as_much_memory_stands_for_the_size():
    ok, oom = trial(256), trial(256, None, None, status=Status.OOM)
    assert one_per_size([ok, oom]) == (oom,)
    assert one_per_size([oom, ok]) == (oom,)  # order does not rescue it: it is not proven


def test_a_failure_under_a_smaller_cap_says_nothing_about_a_larger_one():
    small = trial(16384, None, None, status=Status.OOM, budget=12 * GB)
    large = trial(16384, 17 * 2**30, budget=24 * GB)
    assert one_per_size([small, large]) == (large,)


def test_an_uncapped_failure_counts_against_every_capped_ok():
    capped = trial(512, budget=8 * GB)
    uncapped = trial(512, None, None, status=Status.CRASH, budget=None)
    assert one_per_size([capped, uncapped]) == (uncapped,)
    assert one_per_size([trial(512, budget=None), trial(512, status=Status.OOM, budget=8 * GB)]
                        )[0].status is Status.OK


def test_every_failure_stands_for_its_size_when_asked():
    """A failure under a smaller cap than an ok record's passes over by default (budgets
    mixed); among records already sorted for one budget every failure speaks."""
    at_line = replace(trial(32, None, None, status=Status.OOM), cap_bytes=int(0.9 * GB))
    larger_cap = replace(trial(32, 800 * MiB, budget=int(1.1 * GB)), cap_bytes=int(0.99 * GB))
    assert one_per_size([at_line, larger_cap]) == (larger_cap,)
    assert one_per_size([at_line, larger_cap], every_failure=True) == (at_line,)


def test_among_ok_repeats_the_highest_peak_stands_later_on_a_tie():
    low, high, tie = trial(128, 700 * MiB), trial(128, 750 * MiB), trial(128, 750 * MiB)
    assert one_per_size([low, high]) == (high,)
    assert one_per_size([high, tie])[0] is tie


def test_a_size_with_no_ok_record_keeps_its_last_failure():
    first = trial(64, None, None, status=Status.TIMEOUT)
    last = trial(64, None, None, status=Status.OOM)
    assert one_per_size([first, last]) == (last,)


def test_one_per_size_is_sorted_by_num_envs():
    assert [r.num_envs for r in one_per_size([trial(512), trial(64), trial(128), trial(64)])
            ] == [64, 128, 512]
    assert one_per_size([]) == ()


@pytest.mark.parametrize("values, expected", [
    (pd.array([1, None], dtype="Int64"), [1, None]),
    (pd.array([0.5, None], dtype="Float64"), [0.5, None]),
    (pd.array(["ok", None], dtype="string"), ["ok", None]),
])
def test_to_python_gives_plain_objects_and_none(values, expected):
    result = to_python(values)
    assert result == expected and type(result[0]) is type(expected[0])


def test_the_cap_a_trial_ran_under_is_the_memory_it_had():
    # since trials run under budget x (1 - headroom), cap_bytes says what the trial had
    ok = replace(trial(1024, budget=2 * GB), cap_bytes=int(1.8 * GB))
    oom_same_budget_smaller_cap = replace(trial(1024, None, None, status=Status.OOM, budget=2 * GB),
                                          cap_bytes=int(1.5 * GB))
    assert one_per_size([ok, oom_same_budget_smaller_cap]) == (ok,)
    assert one_per_size([oom_same_budget_smaller_cap, replace(ok, cap_bytes=int(1.5 * GB))]
                        )[0].status is Status.OOM


def test_purpose_and_new_record_fields_are_columns():
    frame = trials_frame([trial(64)])
    assert frame.loc[0, "purpose"] == "search" and frame["purpose"].dtype == "string"
    assert frame["memory_steady"].dtype == "boolean" and frame.loc[0, "memory_steady"] is pd.NA


def test_a_proof_held_below_the_line_that_failed_stands_for_its_size():
    # A CPU proof runs under the line less room for another run's jitter: a smaller cap than
    # its own search trial's, on purpose. Its failure says the size does not fit that line,
    # so emit-config and compare must not recommend the size from its search trial.
    line = int(0.9 * GB)
    searched = replace(trial(832, 880 * MiB), cap_bytes=line)
    proof = replace(trial(832, None, None, status=Status.OOM), cap_bytes=line - 30_000_000,
                    purpose=Purpose.CONFIRM)
    assert one_per_size([searched, proof]) == (proof,)
    # a proof from a smaller budget still says nothing about a larger one's trials
    large = replace(trial(832, 880 * MiB, budget=2 * GB), cap_bytes=int(1.8 * GB))
    assert one_per_size([proof, large]) == (large,)
