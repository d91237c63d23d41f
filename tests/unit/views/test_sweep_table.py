"""The sweep table's raw face (CSV/JSON) and its display face come from one frame."""

from __future__ import annotations

from dataclasses import dataclass

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


def test_a_gpu_pool_is_shown_against_the_pool_limit_not_the_whole_cap():
    """Measured on an H100 under --gpu-mem 2GB: the line is 1.8e9 B, 874 MiB of it lives
    outside the pool, so the pool's limit in force is 844 MiB; the table said "/ 1.68 GiB"."""
    mib = 2**20
    r = TrialResult(profile="quick", profile_hash="h", num_envs=1536, batch_size=1536,
                    num_minibatches=4, status=Status.OK, backend="gpu", steps_per_s=6.0e6,
                    cap_bytes=1_800_000_000,
                    jax_peak_pool_bytes=782 * mib, jax_bytes_limit=844 * mib,
                    nvml_process_peak_bytes=1413 * mib, budget_bytes=2 * 10**9)
    assert r.cap_figure_bytes == 782 * mib and r.cap_figure_limit_bytes == 844 * mib
    frame = comparison_frame([r], choose([r], 2 * 10**9, 0.10), 2 * 10**9)
    assert frame["cap_bytes"].tolist() == [844 * mib]
    cpu = TrialResult(profile="quick", profile_hash="h", num_envs=256, batch_size=256,
                      num_minibatches=4, status=Status.OK, backend="cpu", steps_per_s=7000.0,
                      cap_bytes=1_080_000_000, host_peak_data_bytes=973 * mib)
    assert cpu.cap_figure_limit_bytes == 1_080_000_000


def test_the_cap_figure_is_called_capped_only_where_a_trial_ran_under_a_cap():
    """Uncapped, the data segment (CPU) or pool (GPU) peak is still measured, but nothing held
    it: a 'capped' header over it said a cap was in force that was not."""
    def header(results):
        table = sweep_table(results, choose(results, None, 0.10), None)
        return table.column("capped").title

    mib = 2**20
    uncapped = [TrialResult(profile="quick", profile_hash="h", num_envs=256, batch_size=256,
                            num_minibatches=4, status=Status.OK, backend="cpu",
                            steps_per_s=7000.0, host_peak_rss_bytes=900 * mib,
                            host_peak_data_bytes=973 * mib)]
    assert header(uncapped) == "data seg. (host)"
    capped = [TrialResult(**{**uncapped[0].__dict__, "cap_bytes": 1_080_000_000})]
    assert header(capped) == "capped (data seg.)"
    gpu = [TrialResult(**{**uncapped[0].__dict__, "backend": "gpu", "jax_peak_pool_bytes": 782 * mib})]
    assert header(gpu) == "pool (VRAM)"


@dataclass(frozen=True)
class WithInterval(TrialResult):
    """A record carrying the steps/s 95% interval (fields a later record version adds)."""

    steps_per_s_ci_low: float | None = None
    steps_per_s_ci_high: float | None = None


def test_the_steps_interval_is_a_column_only_where_a_trial_measured_one():
    plain = sweep_table(RESULTS, choose(RESULTS, 10**9, 0.1), 10**9)
    assert "steps_ci" not in [c.key for c in plain.columns]  # files of older runs unchanged
    assert plain.data is not None and plain.data["steps_per_s_ci_low"].isna().all()
    rows = [WithInterval(**{**r.__dict__, "steps_per_s_ci_low": 26_000.0,
                            "steps_per_s_ci_high": 28_000.0}) if r.num_envs == 256 else r
            for r in RESULTS]
    table = sweep_table(rows, choose(rows, 10**9, 0.1), 10**9)
    column = table.column("steps_ci")
    assert column.title == "steps/s ±%" and column.optional and column.priority > 0
    shown = dict(zip(table.cells["num_envs"], table.cells["steps_ci"], strict=True))
    assert shown == {"128": "n/a", "* 256": "±3.7%", "2048": "n/a"}  # 1,000 of 27,000
    assert table.data is not None and table.data["steps_per_s_ci_high"].tolist()[1] == 28_000.0
    assert "steps/s ±%" in table.to_markdown()


def test_a_failed_row_says_its_own_failure_beside_an_ok_run_of_its_size():
    """Merged runs: 512 ran out of memory in one and fitted in a later one; the size's reason
    comes from the later run, and the oom row read 'fit once, ...'."""
    from vramtune.views.sweep_table import row_reason
    oom, ok = trial(512, None, None, Status.OOM), trial(512, 800, 30_000.0)
    rows = [trial(128, 700, 21_000.0), oom, ok]
    rec = choose(rows, 10**9, 0.1)
    assert row_reason(oom, rec) == "out of memory"
    assert row_reason(ok, rec).startswith("fit once")
    crashed = TrialResult(status=Status.CRASH, profile="quick", profile_hash="h", num_envs=64,
                          error_type="XlaRuntimeError")
    assert row_reason(crashed, rec) == "crashed (XlaRuntimeError)"


def test_a_confirming_run_over_a_larger_headroom_says_so():
    """report --headroom 99%: every row is over the line, the proof run that passed under the
    sweep's own line too, and it says so instead of nothing."""
    from dataclasses import replace

    from vramtune.records import Purpose
    from vramtune.views.sweep_table import row_reason
    proof = replace(trial(128, 700, 21_000.0), purpose=Purpose.CONFIRM, training_steps=56)
    rows = [trial(128, 690, 21_000.0), proof]
    assert row_reason(proof, choose(rows, 10**9, 0.1)) == "confirming run, 56 training steps: passed"
    tight = choose(rows, 10**9, 0.99)
    assert tight.chosen is None
    assert row_reason(proof, tight) == "confirming run, 56 training steps: over the headroom line"


def test_rates_that_did_not_settle_are_said_once_under_the_table():
    from dataclasses import replace

    from vramtune.records import Purpose
    from vramtune.views.sweep_table import unsettled_note
    settled = replace(trial(128, 700, 21_000.0), speed_steady=True)
    loose = replace(trial(256, 760, 27_000.0), speed_steady=False)
    proof = replace(loose, purpose=Purpose.CONFIRM)  # a proof's rate is not ranked
    assert unsettled_note([settled, trial(512, 800, 1.0)]) is None  # older records: unknown
    note = unsettled_note([settled, loose, proof, trial(1024, None, None, Status.OOM)])
    assert note is not None and note.startswith("steps/s: 1 of 2 trials' rates did not settle")


def test_a_warp_sweep_shows_demand_beside_capacity_and_an_overflow_says_why():
    import dataclasses

    from vramtune.views.sweep_table import WARP_COLUMNS

    warp = {"warp_naconmax": 120, "warp_njmax": 14}
    results = [dataclasses.replace(trial(128, 700, 21_000.0), warp_contacts_max=75,
                                   warp_constraint_rows_per_world_max=9, **warp),
               dataclasses.replace(trial(256, 760, 27_000.0, Status.OVERFLOW),
                                   warp_contacts_max=131, warp_constraint_rows_per_world_max=9,
                                   error_message="MJX-Warp buffer overflow: ...", **warp)]
    rec = choose(results, 10**9, 0.1)
    frame = comparison_frame(results, rec, 10**9)
    assert tuple(frame.columns) == (*RAW_COLUMNS, *WARP_COLUMNS)
    assert frame["contacts_max"].tolist() == [75, 131]
    table = sweep_table(results, rec, 10**9)
    rows = {row[0].lstrip("* "): dict(zip([c.key for c in table.columns], row, strict=True))
            for row in table.rows()}
    assert rows["128"]["contacts"] == "75 / 120" and rows["128"]["rows"] == "9 / 14"
    assert rows["256"]["status"] == "overflow" and rows["256"]["why"] == "MJX-Warp buffer overflow"
    assert rec.chosen is not None and rec.chosen.num_envs == 128  # never the overflowed size
    # a sweep without Warp keeps its columns
    assert "contacts" not in [c.key for c in sweep_table(RESULTS, choose(RESULTS, 10**9, 0.1),
                                                         10**9).columns]
