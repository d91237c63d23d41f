"""The compile-time footprint record: its slope, and its file read like any hostile input."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.unit.hostile import mutated, result_or_user_error
from vramtune.errors import UserError
from vramtune.measure.footprint import Footprint, SizeFootprint, read_footprint

MiB = 2 ** 20


def size(n: int, temp_mib: float, arg_mib: float = 4.6) -> SizeFootprint:
    arg = int(arg_mib * MiB)
    return SizeFootprint(n, n, 4, arg, arg + 1000, arg, int(temp_mib * MiB), 2.5)


QUICK = Footprint("cpu", 1, (size(128, 30.3), size(2048, 485.3, 4.9)), 11.2, None,
                  "ea724535226c1e04", ((128, 128, 4), (2048, 2048, 4), (1024, 1024, 4)))


def test_total_counts_outputs_not_donated_into_the_inputs():
    s = size(128, 30.0)
    assert s.total_bytes == s.argument_bytes + 1000 + int(30 * MiB)


def test_slope_is_the_chord_between_the_smallest_and_the_largest_size():
    slope = QUICK.bytes_per_env()
    assert slope == pytest.approx((485.3 - 30.3 + 0.3) * MiB / 1920, rel=1e-3)


def test_cpu_counts_every_device_gpu_the_largest_one():
    two = [size(64, 20), size(1024, 250)]
    per_device = Footprint("gpu", 2, tuple(two)).bytes_per_env()
    assert Footprint("cpu", 2, tuple(two)).bytes_per_env() == pytest.approx(2 * per_device)


@pytest.mark.parametrize("fp", [
    Footprint("cpu", 1, (size(128, 30),)),  # one size: no slope
    Footprint("cpu", 1, (size(128, 300), size(2048, 30))),  # shrinks: no prior
    Footprint("cpu", 1, QUICK.sizes, error="ValueError: boom"),
    Footprint("cpu", 1, (size(128, 30), size(128, 30))),
])
def test_no_slope_without_two_sizes_that_grow(fp):
    assert fp.bytes_per_env() is None


def test_the_file_round_trips(tmp_path):
    path = tmp_path / "footprint.json"
    path.write_text(json.dumps(QUICK.to_dict()))
    assert read_footprint(path) == QUICK
    assert read_footprint(tmp_path / "missing.json") is None


@pytest.mark.parametrize("text, words", [
    (b"\x00\xff\xfe binary", "not UTF-8"), (b"{", "not valid JSON"),
    (b"[1, 2]", "must be a mapping"), (b'{"format": 1}', "format must be 2"),
    (json.dumps({**QUICK.to_dict(), "sizes": [{"num_envs": -1}]}).encode(), "num_envs"),
    (json.dumps({**QUICK.to_dict(), "extra": 1}).encode(), "unknown key"),
    (json.dumps({**QUICK.to_dict(), "requested": [[0, 1, 1]]}).encode(), "requested"),
    (b" " * (2 << 20), "limit is 1048576 bytes"),
])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, text, words):
    path = tmp_path / "footprint.json"
    path.write_bytes(text)
    with pytest.raises(UserError, match=words) as err:
        read_footprint(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_directory_or_fifo_in_its_place_is_one_line_not_a_hang(tmp_path):
    import os

    (tmp_path / "dir.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    for name, words in (("dir.json", "a directory"), ("fifo.json", "not a regular file")):
        with pytest.raises(UserError, match=words):
            read_footprint(tmp_path / name)


def test_it_answers_only_its_own_question():
    asked = list(QUICK.requested)
    assert QUICK.answers("ea724535226c1e04", asked, "cpu", 1)
    assert not QUICK.answers("ffffffffffffffff", asked, "cpu", 1)
    assert not QUICK.answers("ea724535226c1e04", asked[:2], "cpu", 1)
    assert not QUICK.answers("ea724535226c1e04", asked, "gpu", 1)
    assert not QUICK.answers("ea724535226c1e04", asked, "cpu", 2)


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(QUICK.to_dict()))
def test_any_mutated_file_is_a_footprint_or_one_user_error(data):
    found = result_or_user_error(lambda: Footprint.from_dict(data, "footprint.json"))
    if isinstance(found, Footprint):
        slope = found.bytes_per_env()
        assert slope is None or slope > 0
