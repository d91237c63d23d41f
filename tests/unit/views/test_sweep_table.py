"""The sweep table's raw face (CSV/JSON) and its display face come from one frame."""

from __future__ import annotations

import pandas as pd

from vramtune.records import Status, TrialResult
from vramtune.tune.recommend import choose
from vramtune.views.sweep_table import RAW_COLUMNS, comparison_frame, sweep_table

MiB = 2**20


def trial(n: int, peak_mib: int | None, rate: float | None,
          status: Status = Status.OK) -> TrialResult:
    return TrialResult(status=status, profile="quick", profile_hash="h", num_envs=n,
                       batch_size=n, num_minibatches=4, backend="cpu", budget_bytes=10**9,
                       host_peak_rss_bytes=None if peak_mib is None else peak_mib * MiB,
                       steps_per_s=rate)


RESULTS = [trial(256, 760, 27_000.0), trial(128, 700, 21_000.0), trial(2048, None, None, Status.OOM)]


def test_raw_columns_sorted_by_num_envs_with_na_where_not_measured():
    rec = choose(RESULTS, 10**9, 0.1)
    frame = comparison_frame(RESULTS, rec, 10**9)
    assert tuple(frame.columns) == RAW_COLUMNS
    assert frame["num_envs"].tolist() == [128, 256, 2048]
    assert frame["recommended"].tolist() == [False, True, False]
    assert frame.loc[2, "steps_per_s"] is pd.NA and frame.loc[2, "budget_share"] is pd.NA
    assert frame.loc[1, "relative_speed"] == 1.0
    assert frame.loc[0, "steps_per_s_per_env"] == 21_000.0 / 128


def test_without_a_budget_the_share_is_not_measured():
    frame = comparison_frame(RESULTS, choose(RESULTS, None, 0.1), None)
    assert frame["budget_share"].isna().all()


def test_the_pick_is_strong_and_marked():
    table = sweep_table(RESULTS, choose(RESULTS, 10**9, 0.1), 10**9)
    assert table.strong == (False, True, False)
    assert [row[0] for row in table.rows()] == ["128", "* 256", "2048"]
    assert table.column("budget_share").title == "% budget (host)"
