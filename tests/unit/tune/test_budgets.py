"""emit-config above the sweep's cap: the model's size shown as predicted, nothing written."""

from __future__ import annotations

from pathlib import Path

from vramtune.records import Status, TrialResult
from vramtune.results.store import load_run
from vramtune.tune.budgets import Measurements, choose_for_budget, merge_runs, predict_size
from vramtune.workload.profile import load_profile

MiB = 2**20
QUICK = load_profile("quick")
CAP = int(1.2e9)


def rec(n, mib=None, status=Status.OK) -> TrialResult:
    shape = QUICK.shape_for(n)
    ok = status is Status.OK
    return TrialResult(status=status, profile="quick", profile_hash=QUICK.hash, num_envs=n,
                       batch_size=shape.batch_size, num_minibatches=shape.num_minibatches,
                       unroll_length=10, backend="cpu", budget_bytes=CAP, cap_bytes=CAP,
                       host_peak_rss_bytes=int(mib * MiB * 0.95) if ok else None,
                       host_peak_data_bytes=int(mib * MiB) if ok else None,
                       steps_per_s=10.0 * n if ok else None, measured_intervals=3)


def measurements(results) -> Measurements:
    return Measurements((Path("run"),), QUICK, QUICK.hash, "cpu", "2026-11-22", 0.0,
                        tuple(results), (CAP,), tuple(results))


# quick-like: 0.25 MiB/env over 800 MiB; 1024 fits 1.2 GB, 1280 does not
SWEEP = [rec(256, 864), rec(512, 928), rec(1024, 1056), rec(1280, status=Status.OOM)]


def test_a_budget_above_the_cap_shows_the_predicted_size_and_the_command():
    emission = choose_for_budget(measurements(SWEEP), int(2e9), headroom_fraction=0.0)
    assert emission.chosen.num_envs == 1024  # the measured pick, as before
    p = emission.predicted
    assert p is not None and p.num_envs > 1024
    # the upper bound is under the line, and the size is the largest on the round grid
    assert p.upper_bytes <= 2e9 and p.mean_bytes < p.upper_bytes
    assert (800 + 0.25 * p.num_envs) * MiB <= 2e9
    text = str(p)
    assert text.startswith("predicted, not measured: num_envs=")
    assert "vramtune sweep --profile quick --gpu-mem 2GB --headroom 0%" in text
    assert "--max-envs" in text  # above quick's 2048: the sweep must be allowed to reach it
    assert not any("predicted" in n for n in emission.notices)  # notices go into files


def test_no_prediction_at_or_below_the_cap_or_without_a_model():
    assert choose_for_budget(measurements(SWEEP), CAP, headroom_fraction=0.0).predicted is None
    one_size = [rec(256, 864), rec(512, status=Status.OOM)]
    assert choose_for_budget(measurements(one_size), int(2e9), 0.0).predicted is None


def test_a_pick_whose_memory_was_still_growing_says_so():
    from dataclasses import replace
    growing = [rec(256, 864), replace(rec(512, 928), memory_steady=False),
               rec(1024, status=Status.OOM)]
    e = choose_for_budget(measurements(growing), CAP, headroom_fraction=0.0)
    assert e.chosen.num_envs == 512
    assert any("still growing" in n for n in e.notices)
    steady = choose_for_budget(measurements(SWEEP), CAP, headroom_fraction=0.0)
    assert not any("still growing" in n for n in steady.notices)


def test_a_gpu_prediction_fits_the_pool_that_runs_out_not_the_live_peak():
    # quick on an H200 under 2 GB (pools 258 ... 770 MiB over live peaks of 195 ... 378): for
    # a 3 GB card the pool's line says 4096 envs, and an uncapped H100 trial at 4096 read a
    # 1536 MiB pool, inside the prediction. The live peaks' line said 13,312.
    recorded = Path(__file__).parents[3] / "benchmarks/results/gpu-2026-11-27/sweep1_results.jsonl"
    predicted = predict_size(merge_runs([load_run(recorded)]), 3 * 10**9, 0.1)
    assert predicted is not None and predicted.num_envs == 4096
    assert predicted.mean_bytes < 1536 * 2**20 < predicted.upper_bytes
    # held to the allocator's limit (the line less the CUDA context), and it says so
    assert predicted.held_to_bytes is not None and predicted.held_to_bytes < predicted.limit_bytes
    assert "model pool" in str(predicted) and "less the CUDA context" in str(predicted)
    assert predict_size(merge_runs([load_run(recorded)]), 2 * 10**9, 0.1) is None  # swept


def test_nothing_fits_quotes_the_figure_held_against_the_line():
    """The line is held against the data segment (RSS runs below it): the refusal quotes
    that figure, the highest of the smallest size's runs, never an RSS under the line."""
    runs = [rec(256, 864), rec(256, 900), rec(512, 928)]  # RSS 95% of the data segment
    line = int(880 * MiB)  # RSS 855 / 821 MiB at 256: under it; the data segment is not
    e = choose_for_budget(measurements(runs), line, headroom_fraction=0.0)
    assert e.chosen is None and e.error is not None
    assert "num_envs=256, peaked at 900.00 MiB host RAM data segment" in e.error, e.error


def _at(r: TrialResult, budget: int, **kw) -> TrialResult:
    from dataclasses import replace
    return replace(r, budget_bytes=budget, cap_bytes=int(budget * 0.9), **kw)


def test_a_failure_in_a_smaller_budgets_sweep_does_not_rule_out_a_larger_budget():
    """Two folders merged, 1.02GB and 1.1GB: an out-of-memory at 32 in the smaller sweep ruled
    out every size the larger one proved, and 1.1GB got 16 envs where 128 fitted."""
    from vramtune.records import Purpose
    small, large = int(1.02e9), int(1.1e9)
    runs = [_at(rec(16, 820), small), _at(rec(32, status=Status.OOM), small),
            _at(rec(16, 820), large), _at(rec(32, 830), large), _at(rec(64, 850), large),
            _at(rec(128, 880), large), _at(rec(128, 885), large, purpose=Purpose.CONFIRM)]
    source = measurements(runs)
    at_large = choose_for_budget(source, large, headroom_fraction=0.1)
    assert at_large.chosen is not None and at_large.chosen.num_envs == 128
    assert [r.status for r in at_large.sizes if r.num_envs == 32] == [Status.OK]
    # the smaller budget still counts its own failure, and the larger budget's runs above it
    at_small = choose_for_budget(source, small, headroom_fraction=0.1)
    assert at_small.chosen is not None and at_small.chosen.num_envs == 16
    assert [r.status for r in at_small.sizes if r.num_envs == 32] == [Status.OOM]


def test_a_failure_under_a_larger_budget_rules_the_size_out_of_a_smaller_one():
    small, large = int(1.02e9), int(1.1e9)
    runs = [_at(rec(16, 820), small), _at(rec(32, 830), small),
            _at(rec(64, status=Status.OOM), large)]
    at_small = choose_for_budget(measurements(runs), small, headroom_fraction=0.1)
    assert at_small.recommendation.reasons[64] == "out of memory"
    assert at_small.chosen is not None and at_small.chosen.num_envs < 64


def test_the_recorded_merged_folders_pick_what_the_larger_sweep_proved():
    """benchmarks/results/speed-pick/runs: two 1.02GB and two 1.1GB sweeps of one workload."""
    root = Path(__file__).parents[3] / "benchmarks/results/speed-pick/runs"
    source = merge_runs([load_run(d) for d in sorted(root.iterdir())])
    at_large = choose_for_budget(source, int(1.1e9))
    assert at_large.chosen is not None and at_large.chosen.num_envs == 128
    assert at_large.recommendation.confirmation is not None  # the 1.1GB sweep's own proof
    at_small = choose_for_budget(source, int(1.02e9))
    assert at_small.chosen is not None and at_small.chosen.num_envs == 16
