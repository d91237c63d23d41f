"""child.steady: the rule that ends a trial only once the figure the cap counts has settled."""

from __future__ import annotations

import pytest

from vramtune.measure.child import steady

MiB = 2**20


@pytest.mark.parametrize("history,intervals,tolerance,expected", [
    ([900, 950, 1000], 2, 0.005, False),            # still climbing: not steady
    ([900, 1000, 1000, 1000], 2, 0.005, True),      # flat over the last 2 calls
    ([1000, 1000, 1004], 2, 0.005, True),           # +0.4% creep is within 0.5%
    ([1000, 1000, 1006], 2, 0.005, False),          # +0.6% is not
    ([1000, 1000, 1001], 2, 0.0, False),            # zero tolerance: 1 unit of creep stops it
    ([1000, 1000], 2, 0.005, False),                # too few calls to say
    ([1000, None, 1000], 2, 0.005, True),           # an unread middle call does not matter
    ([None, 1000, 1000], 2, 0.005, False),          # the start of the window was not read
    ([1000, 1000, None], 2, 0.005, False),          # nor its end
    ([1000], 0, 0.0, True),                         # intervals 0: any read figure is steady
])
def test_steady_compares_the_last_figure_with_the_one_intervals_back(history, intervals,
                                                                     tolerance, expected):
    assert steady([h * MiB if h else h for h in history], intervals, tolerance) is expected


def test_the_fidelity_shape_stops_after_the_second_epochs_buffer():
    # measured shape: the data segment takes one more ~286 MB buffer
    # in epoch 2, then creeps by 1-2 MiB; the rule must wait for the step, then stop
    history = [760, 1046, 1047, 1048]
    calls = [steady([h * MiB for h in history[:i + 1]], 2, 0.005) for i in range(4)]
    assert calls == [False, False, False, True]


def test_median_interval_is_distribution_free():
    from vramtune.measure.rates import median_interval

    assert median_interval([1.0] * 5) == (None, None)  # 5 cannot bound a median at 95%
    assert median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)  # k = 1 at n = 6
    rates = [float(x) for x in range(1, 21)]  # n = 20: X(6), X(15)
    assert median_interval(rates) == (6.0, 15.0)


def test_intervals_group_epochs_until_the_interval_is_long_enough():
    from vramtune.measure.child import _Intervals

    speed = _Intervals(0.5)
    for _ in range(10):
        speed.add(1000, 0.2)  # 3 epochs make an interval of 0.6 s
    assert len(speed.rates) == 3
    assert all(abs(r - 5000) < 1e-6 for r in speed.rates)
    assert not speed.steady(0.02)  # 3 intervals: no interval of the median yet
    for _ in range(30):
        speed.add(1000, 0.2)
    assert speed.steady(0.02)


def test_a_lone_partial_interval_still_counts_at_the_end():
    from vramtune.measure.child import _Intervals

    speed = _Intervals(10.0)
    speed.add(500, 1.0)
    speed.close()
    assert speed.rates == [500.0]
