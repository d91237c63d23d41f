"""The parent's readers check every field of the record against the dataclass itself: a field
nobody listed by hand is still type-checked, and a bad value skips its line with a warning
naming the field (never a silent <NA>)."""

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.results.test_store_properties import HEADER, TRIAL, _every_view, _write
from vramtune.errors import UserError
from vramtune.records import TrialResult
from vramtune.results.store import RESULTS_FILE, RunHeader, load_run, trial_from_dict, typed

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
TRIAL_FIELDS = [f.name for f in dataclasses.fields(TrialResult)]
HEADER_FIELDS = [f.name for f in dataclasses.fields(RunHeader)]


def test_a_word_where_a_rate_belongs_skips_the_line_and_names_the_field(tmp_path):
    _write(tmp_path, [HEADER, TRIAL, {**TRIAL, "num_envs": 256, "steps_per_s_per_device": "fast"}])
    run = load_run(tmp_path)
    assert [r.num_envs for r in run.results] == [128]
    (warning,) = run.warnings
    assert f"{RESULTS_FILE}:3: steps_per_s_per_device must be a valid number or null, got " \
           f"'fast'; line skipped" in warning


@pytest.mark.parametrize(("key", "value", "words"), [
    ("cap_check", 7, "cap_check must be a valid string or null, got 7"),
    ("rlimit_data_bytes", "1GB", "rlimit_data_bytes must be a valid integer or null"),
    ("device_uuids", ["GPU-1", 3], "device_uuids[1] must be a valid string"),
    ("jax_peak_pool_bytes_per_device", [1.5], "jax_peak_pool_bytes_per_device[0] must be a "
                                              "valid integer"),
    ("steps_per_s_per_device", float("nan"), "steps_per_s_per_device must be a finite number"),
    ("outside_pool_bytes_per_device", [float("inf")], "outside_pool_bytes_per_device[0] must "
                                                      "be a valid integer or null, got inf"),
])
def test_fields_no_hand_written_check_lists_are_checked(key, value, words):
    with pytest.raises(UserError, match="^x.jsonl:2: ") as caught:
        trial_from_dict({**TRIAL, key: value}, "x.jsonl:2")
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_valid_line_reads_back_as_the_record():
    record = trial_from_dict(TRIAL, "x")
    assert record == TrialResult.from_dict(TRIAL)


def test_a_header_field_of_the_wrong_type_is_one_error(tmp_path):
    _write(tmp_path, [{**HEADER, "gpu_driver": 535}, TRIAL])
    with pytest.raises(UserError, match=r"results.jsonl:1 \(header\): gpu_driver must be a valid "
                                        r"string or null, got 535$"):
        load_run(tmp_path)


def test_only_the_records_own_keys_are_read():
    assert typed(TrialResult, {**TRIAL, "future_field": object()}, "x").num_envs == 128


# Shared by the baseline reader's property tests: examples write files, some slowly.
SLOW_EXAMPLES = settings(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SETTINGS = settings(SLOW_EXAMPLES, max_examples=150)


@SETTINGS
@given(st.sampled_from(TRIAL_FIELDS), JSON)
def test_any_json_value_in_any_trial_field_loads_or_warns(tmp_path, key, value):
    _write(tmp_path, [HEADER, {**TRIAL, key: value}])
    run = load_run(tmp_path)  # never raises: a bad trial line is skipped with a warning
    assert len(run.results) + len(run.warnings) == 1
    if run.warnings:
        assert "skipped" in run.warnings[0] and "\n" not in run.warnings[0]
    else:
        json.dumps(run.results[0].to_dict(), allow_nan=False)  # every number finite
        _every_view(run)


@SETTINGS
@given(st.sampled_from(HEADER_FIELDS), JSON)
def test_any_json_value_in_any_header_field_loads_or_is_one_error(tmp_path, key, value):
    _write(tmp_path, [{**HEADER, key: value}, TRIAL])
    try:
        load_run(tmp_path)
    except UserError as exc:
        assert "\n" not in str(exc)
