"""Instructions from the CPU's own counter, on this machine's real counter: the work of every
thread started after the counter is counted, live or ended, whatever thread does it."""

from __future__ import annotations

import threading

import pytest

from vramtune.measure.counters import ThreadInstructions, per_step


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_per_step_is_the_median_of_each_reads_work_per_step():
    counts = [1_000, 3_000, 5_000, 6_000, 9_000]
    steps = [0, 10, 20, 30, 40]
    # per read: 200, 200, 100, 300
    assert per_step(counts, [float(s) for s in steps]) == 200


def test_per_step_skips_what_it_cannot_read_and_says_none_when_nothing_is_left():
    assert per_step([None, 2_000, 4_000], [0.0, 10.0, 20.0]) == 200
    assert per_step([5_000, 1_000], [0.0, 10.0]) is None  # a count that went down
    assert per_step([100, 100, 100], [0.0, 10.0, 20.0]) is None  # nothing counted: not 0
    assert per_step([1_000], [0.0]) is None
    assert per_step([], []) is None


@pytest.fixture
def counter():
    counter = ThreadInstructions()
    if not counter.available:
        counter.close()
        pytest.skip("the kernel refuses the CPU's instruction counter here "
                    "(perf_event_paranoid, no PMU, or a seccomp filter)")
    yield counter
    counter.close()


def test_a_thread_started_after_the_counter_is_counted_live_and_after_it_ended(counter):
    start, done, stop = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        start.wait()
        _spin(2_000_000)
        done.set()
        stop.wait()

    worker = threading.Thread(target=work)
    worker.start()
    before = counter.read()
    start.set()
    done.wait()
    live = counter.read()  # the thread is still alive: its count is in the read
    stop.set()
    worker.join()
    ended = counter.read()
    alone = counter.read()
    _spin(2_000_000)
    here = counter.read()
    assert None not in (before, live, ended, alone, here)
    in_thread, same_work = live - before, here - alone
    assert same_work > 2_000_000 * 5  # a Python loop step is tens of instructions
    assert 0.8 < in_thread / same_work < 1.25, (in_thread, same_work)
    assert ended >= live  # an ended thread's count stays in


def test_counts_only_grow_and_a_closed_counter_reads_none(counter):
    a = counter.read()
    _spin(100_000)
    b = counter.read()
    assert a is not None and b is not None and b > a
    counter.close()
    assert counter.read() is None and not counter.available
