"""The trial's output reader, on a real pipe; what a warm standby may run."""

import os
import time

import pytest

from vramtune.measure.cap import plan_cap
from vramtune.measure.oom import classify_text, diagnosed_death
from vramtune.measure.process import TAIL_LINE_CHARS, Reader, standby_fits, standby_key
from vramtune.measure.wire import encode_event


def _read(data: bytes, on_event=None) -> list[str]:
    r, w = os.pipe()
    with os.fdopen(r, "rb") as rd:
        reader = Reader(rd, on_event)
        reader.start()
        with os.fdopen(w, "wb") as wr:
            wr.write(data)
        reader.join(timeout=10)
        assert not reader.is_alive()
        return list(reader.tail)


def test_a_huge_line_keeps_its_head_and_end_and_scans_fast():
    # "Assertion " x 200k on one line made the tail scan quadratic (a minute and more)
    line = "Check failed: x " + "Assertion " * 200_000 + "Out of memory allocating 5 bytes"
    tail = _read(line.encode() + b"\nlast\n")
    assert tail[-1] == "last" and len(tail[0]) < 2 * TAIL_LINE_CHARS + 100
    assert tail[0].startswith("Check failed") and tail[0].endswith("allocating 5 bytes")
    started = time.perf_counter()
    assert diagnosed_death("\n".join(tail)) and classify_text("\n".join(tail)).oom
    assert time.perf_counter() - started < 5


def test_a_callback_that_raises_is_dropped_and_the_output_still_read():
    # the reader is what keeps the tail that tells an out-of-memory from a crash, and what
    # drains the pipe: a caller's failing callback must not end it
    seen = []

    def fails(event):
        seen.append(event)
        raise KeyError("a notebook's bug")

    events = "".join(encode_event(phase=p) + "\n" for p in ("importing", "building"))
    with pytest.warns(RuntimeWarning, match="KeyError"):
        tail = _read((events + "Out of memory allocating 5 bytes\n").encode(), fails)
    assert len(seen) == 1  # dropped after its first error
    assert tail == ["Out of memory allocating 5 bytes"]


def test_a_callback_that_raises_under_warnings_as_errors_still_leaves_the_reader_alive():
    import warnings

    def fails(event):
        raise ValueError("x")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tail = _read((encode_event(phase="importing") + "\nlast\n").encode(), fails)
    assert tail == ["last"]


def test_short_lines_are_kept_whole():
    assert _read(b"one\n" + b"x" * (2 * TAIL_LINE_CHARS) + b"\n") == ["one",
                                                                      "x" * (2 * TAIL_LINE_CHARS)]


def _fits(started, cap) -> bool:
    return standby_fits(standby_key(started), started.rlimit_data_bytes, cap)


def test_a_standby_runs_a_trial_under_its_own_cap_or_a_lower_one_never_a_higher():
    started = plan_cap(2 * 10**9, None, None)
    assert _fits(started, plan_cap(2 * 10**9, None, None))
    assert _fits(started, plan_cap(1_500_000_000, None, None))  # a proof held below the line
    assert not _fits(started, plan_cap(3 * 10**9, None, None))  # past the hard limit it set
    assert not _fits(started, plan_cap(None, None, None))  # no limit: cannot be raised to none
    uncapped = plan_cap(None, None, None)
    assert _fits(uncapped, plan_cap(None, None, None))
    assert _fits(uncapped, plan_cap(2 * 10**9, None, None))  # lowered from none on the spec
    assert not _fits(started, plan_cap(2 * 10**9, None, None, devices=2))  # another environment
