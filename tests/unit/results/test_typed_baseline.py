"""The baseline reader checks every field of every record in a baseline (the snapshot, its
machine, each size, each sample, each size's XLA figures) against the dataclasses
themselves: a wrong type anywhere is one line naming the field, never a traceback later,
and a field added to any of those records is checked without a hand-written list."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.results.test_typed_reader import JSON, SLOW_EXAMPLES
from tests.unit.tune.test_gate_tiers import OLD_FILE, tiered, trial, xla
from vramtune.errors import UserError
from vramtune.results.baseline import (
    MachineKey,
    Sample,
    SizeRecord,
    Snapshot,
    XlaFigures,
    load_baseline,
    save_baseline,
)
from vramtune.results.typed import typed
from vramtune.tune.gate import Thresholds, compare_snapshots

VALID = tiered([trial(64, 900, 70_000), trial(256, 950, 60_000), trial(64, 905, 69_000)],
               {64: xla(), 256: xla()}, [100.0, 99.0, 98.0], cap_bytes=3 * 2**30)

# Where each record kind sits in a baseline file (the first of its kind). Snapshot's
# older_format is not a key of the file: the reader derives it from schema_version.
RECORDS: dict[type, tuple[Any, ...]] = {
    Snapshot: (), MachineKey: ("machine",), SizeRecord: ("sizes", 0),
    Sample: ("sizes", 0, "samples", 0), XlaFigures: ("sizes", 0, "xla")}
NOT_IN_FILE = {(Snapshot, "older_format")}
FIELDS = [(cls, f.name) for cls in RECORDS for f in dataclasses.fields(cls)
          if (cls, f.name) not in NOT_IN_FILE]


def valid_data() -> dict[str, Any]:
    return json.loads(json.dumps(VALID.to_dict()))


def with_value(cls: type, key: str, value: Any) -> dict[str, Any]:
    data = valid_data()
    record = data
    for step in RECORDS[cls]:
        record = record[step]
    record[key] = value
    return data


def path_of(cls: type, key: str) -> str:
    path = ""
    for step in RECORDS[cls]:
        path += f"[{step}]" if isinstance(step, int) else f".{step}"
    return f"{path}.{key}".removeprefix(".")


def write(tmp_path, data: dict[str, Any]):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    return path


def test_the_valid_baseline_loads_as_itself(tmp_path):
    path = tmp_path / "b.json"
    save_baseline(path, VALID)
    assert load_baseline(path) == VALID


@pytest.mark.parametrize(("cls", "key", "value", "words"), [
    (Snapshot, "cap_bytes", "3GB", "cap_bytes must be an integer"),
    (Snapshot, "profile", {"learning_rate": float("nan")}, "profile.learning_rate must be a "
                                                           "finite number, got NaN"),
    (MachineKey, "device_count", "1", "machine.device_count must be an integer"),
    (SizeRecord, "batch_size", 64.5, "sizes[0].batch_size must be an integer"),
    (SizeRecord, "versions", {"jax": 9}, "sizes[0].versions.jax must be text"),
    (Sample, "peak_bytes", "big", "sizes[0].samples[0].peak_bytes must be an integer"),
    (Sample, "steps_per_s", float("nan"), "sizes[0].samples[0].steps_per_s must be a finite "
                                          "number"),
    (Sample, "cpu_s_per_s", float("-inf"), "sizes[0].samples[0].cpu_s_per_s must be a finite "
                                           "number"),
    (XlaFigures, "temp_bytes", "60 MiB", "sizes[0].xla.temp_bytes must be an integer"),
    (XlaFigures, "flops", float("nan"), "sizes[0].xla.flops must be a finite number"),
    (XlaFigures, "versions", ["0.9.2"], "sizes[0].xla.versions must be a mapping"),
])
def test_a_wrong_typed_field_in_each_record_kind_is_one_line_naming_it(tmp_path, cls, key,
                                                                        value, words):
    with pytest.raises(UserError) as caught:
        load_baseline(write(tmp_path, with_value(cls, key, value)))
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'b.json'}: {words}") and "\n" not in message


@pytest.mark.parametrize(("cls", "key"), FIELDS, ids=[f"{c.__name__}.{k}" for c, k in FIELDS])
def test_every_field_of_every_record_is_type_checked(tmp_path, cls, key):
    """A value of no field's type (a list of lists) in each field, found by walking the
    dataclasses: a field added to a record is in this list, and must be refused too."""
    data = with_value(cls, key, [["x"]])
    with pytest.raises(UserError) as caught:
        load_baseline(write(tmp_path, data))
    message = str(caught.value)
    assert path_of(cls, key) in message and "\n" not in message
    with pytest.raises(UserError) as caught:  # by the types alone, without the range checks
        typed(Snapshot, data, "b.json")
    assert str(caught.value).startswith(f"b.json: {path_of(cls, key)}")


@pytest.mark.parametrize(("cls", "key", "value", "words"), [
    (Sample, "peak_bytes", "big", "sizes[0].samples[0].peak_bytes must be a valid integer or "
                                  "null, got 'big'"),
    (XlaFigures, "bytes_accessed", "many", "sizes[0].xla.bytes_accessed must be a valid number "
                                           "or null, got 'many'"),
    (XlaFigures, "alias_bytes", None, "sizes[0].xla.alias_bytes must be a valid integer, got "
                                      "None"),
    (MachineKey, "backend", 3, "machine.backend must be a valid string, got 3"),
    (Sample, "steps_per_s", float("inf"), "sizes[0].samples[0].steps_per_s must be a finite "
                                          "number, got NaN or Infinity"),
])
def test_the_dataclasses_alone_check_nested_records(cls, key, value, words):
    """What the hand-written range checks would catch first is caught by the types too: the
    safety net a new field relies on, down to a sample inside a size inside the snapshot."""
    with pytest.raises(UserError, match=f"^{re.escape(f'b.json: {words}')}$"):
        typed(Snapshot, with_value(cls, key, value), "b.json")


def test_an_older_baseline_still_loads_with_its_note():
    old = load_baseline(OLD_FILE)
    assert old.older_format == 1 and all(s.xla is None for s in old.sizes)
    assert all(s.cpu_s_per_s is None for size in old.sizes for s in size.samples)


def test_older_format_is_read_from_schema_version_never_from_the_file(tmp_path):
    data = {**valid_data(), "older_format": 1}
    assert load_baseline(write(tmp_path, data)).older_format is None


SETTINGS = settings(SLOW_EXAMPLES, max_examples=200)


@SETTINGS
@given(st.sampled_from(FIELDS), JSON)
def test_any_json_value_in_any_field_loads_or_is_one_user_error(tmp_path, field, value):
    cls, key = field
    try:
        snapshot = load_baseline(write(tmp_path, with_value(cls, key, value)))
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    json.dumps(snapshot.to_dict(), allow_nan=False)  # every number finite
    compare_snapshots(VALID, snapshot, Thresholds())  # and the gate can use what loaded
    compare_snapshots(snapshot, VALID, Thresholds())


def _annotated_types(hint: Any):
    yield hint
    for arg in typing.get_args(hint):
        yield from _annotated_types(arg)


def _records_in(cls: type, seen: set[type]) -> set[type]:
    seen.add(cls)
    for hint in typing.get_type_hints(cls).values():
        for t in _annotated_types(hint):
            if isinstance(t, type) and dataclasses.is_dataclass(t) and t not in seen:
                _records_in(t, seen)
    return seen


def test_every_record_a_baseline_holds_is_walked_by_these_tests():
    """A record type added inside Snapshot fails here until it is placed in RECORDS, so the
    field-by-field tests above reach its fields too."""
    assert _records_in(Snapshot, set()) == set(RECORDS)
