"""emit-config above the sweep's cap: the model's size shown as predicted, nothing written."""

from __future__ import annotations

from pathlib import Path

from vramtune.records import Status, TrialResult
from vramtune.results.store import load_run
from vramtune.tune.budgets import (
    Measurements,
    choose_for_budget,
    merge_runs,
    predict_size,
    speaking_for,
)
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


def test_which_failures_of_other_sweeps_speak_for_a_budget():
    from dataclasses import replace

    from vramtune.records import Purpose
    from vramtune.tune.boundary import proof_room_bytes
    small, large = int(1.02e9), int(1.1e9)
    line = int(0.9 * large)  # 990 MB
    searched = [_at(rec(n, 800 + n // 4), large) for n in (16, 32, 64, 128, 256)]
    room = proof_room_bytes(searched, line, 32)
    assert room > 0  # CPU peaks jitter: a proof here would be held below the line
    search_oom = _at(rec(64, status=Status.OOM), small)  # at its own 918 MB line
    near = replace(_at(rec(32, status=Status.OOM), small, purpose=Purpose.CONFIRM),
                   cap_bytes=line - room // 2)
    far = replace(near, cap_bytes=line - 2 * room)
    above = replace(search_oom, cap_bytes=line)  # e.g. a sweep at another headroom
    same = replace(_at(rec(128, status=Status.OOM), large), cap_bytes=int(0.5e9))  # step-down
    uncapped = replace(rec(256, status=Status.CRASH), budget_bytes=None, cap_bytes=None)
    every = [*searched, search_oom, near, far, above, same, uncapped]
    kept = speaking_for(every, large, line)
    assert kept == (*searched, near, above, same, uncapped)
    # no limit: only an uncapped failure says anything about it
    assert speaking_for(every, None, None) == (*searched, uncapped)


def test_a_gpu_failure_speaks_only_at_or_above_the_line():
    from dataclasses import replace

    from vramtune.records import Purpose
    gb = 10**9
    ok = replace(rec(1024, 900), backend="gpu", gpu_name="H100", budget_bytes=12 * gb,
                 cap_bytes=12 * gb, jax_peak_pool_bytes=5 * gb)
    proof = replace(ok, num_envs=2048, status=Status.OOM, purpose=Purpose.CONFIRM,
                    budget_bytes=8 * gb, cap_bytes=8 * gb - 1, jax_peak_pool_bytes=None)
    assert speaking_for([ok, proof], 12 * gb, 8 * gb) == (ok,)
    assert speaking_for([ok, proof], 12 * gb, 7 * gb) == (ok, proof)


def test_a_headroom_override_keeps_a_failure_at_the_new_line():
    """1.08GB at 15% is a 918 MB line: a 1.02GB sweep's confirmation that ran out of memory
    under 918 MB speaks for it, as it does for 1.02GB at 10%."""
    root = Path(__file__).parents[3] / "benchmarks/results/speed-pick/runs"
    source = merge_runs([load_run(d) for d in sorted(root.iterdir())])
    a = choose_for_budget(source, int(1.08e9), headroom_fraction=0.15)
    b = choose_for_budget(source, int(1.02e9), headroom_fraction=0.10)
    assert a.chosen is not None and b.chosen is not None
    assert a.chosen.num_envs == b.chosen.num_envs == 16


def test_nothing_fits_names_the_failure_not_a_larger_ok_size():
    """Every size below the ok ones failed a proof: the refusal says that, not that the
    smallest size that ran was one of the ok ones."""
    from vramtune.records import Purpose
    budget = int(1.1e9)
    runs = [_at(rec(32, 800), budget), _at(rec(32, status=Status.OOM), budget,
                                          purpose=Purpose.CONFIRM),
            _at(rec(256, 1100), budget)]
    e = choose_for_budget(measurements(runs), budget, headroom_fraction=0.1)
    assert e.chosen is None and e.error is not None
    assert "num_envs=256" not in e.error and "32 envs" in e.error, e.error
    assert "every trial ran out of memory" not in e.error


def test_the_largest_budget_is_read_from_every_run_not_one_per_size():
    """A 2GB and a 1GB sweep of the same sizes, the 1GB run with the higher peak: one per
    size keeps the 1GB records, and 1.5GB read as 'above the sweep's budget'."""
    one, two = int(1e9), int(2e9)
    runs = [_at(rec(n, 700 + n // 8), two) for n in (128, 256)]
    runs += [_at(rec(n, 710 + n // 8), one) for n in (128, 256)]
    e = choose_for_budget(measurements(runs), int(1.5e9), headroom_fraction=0.1)
    assert not any("measured under a" in n for n in e.notices), e.notices


def test_reasons_name_only_a_failed_proofs_cap_and_never_zero_room():
    """speed-pick at 1.02GB: 256's old RSS-only trial fitted while its newer trial's data
    segment went over the line; its reason read 'short of room (fit its trial 0 B under the
    line ...)', then the search's line as 'the cap a proof run ran out of memory under'."""
    from vramtune.records import Purpose
    from vramtune.units import format_bytes
    root = Path(__file__).parents[3] / "benchmarks/results/speed-pick/runs"
    source = merge_runs([load_run(d) for d in sorted(root.iterdir())])
    e = choose_for_budget(source, int(1.02e9))
    caps = {format_bytes(r.cap_bytes) for r in e.sizes if r.purpose is not Purpose.SEARCH
            and r.status is Status.OOM and r.cap_bytes is not None}
    for reason in e.recommendation.reasons.values():
        assert " 0 B under" not in reason, reason
        if "the cap a proof run ran out of memory under" in reason:
            assert any(f"above {cap}," in reason for cap in caps), (reason, caps)
    assert e.recommendation.reasons[256].startswith("fit once, but a run at 32 envs failed")
