"""The recommender: only measured ok trials under the headroom line, with a reason per row."""

import pytest

from vramtune.records import Status, TrialResult
from vramtune.results.settings import SweepSettings
from vramtune.tune.recommend import Objective, choose

GB = 10**9


def r(n: int, sps: float | None, peak_gb: float | None, status: Status = Status.OK,
      error_type: str | None = None) -> TrialResult:
    return TrialResult(status=status, profile="p", profile_hash="h", num_envs=n, backend="cpu",
                       steps_per_s=sps, error_type=error_type,
                       host_peak_rss_bytes=None if peak_gb is None else int(peak_gb * GB))


ROWS = [r(128, 50_000, 1.0), r(256, 95_000, 1.5), r(512, 100_000, 2.5), r(1024, 120_000, 3.8),
        r(2048, None, 4.1, Status.OOM), r(1536, None, 3.9, Status.CRASH, "SIGSEGV")]


def test_throughput_picks_the_fastest_under_headroom():
    rec = choose(ROWS, 4 * GB, 0.1)
    assert rec.chosen.num_envs == 512 and rec.limit_bytes == int(3.6 * GB)
    assert rec.reasons[1024] == "over headroom (95% of budget)"
    assert rec.reasons[2048] == "out of memory"
    assert rec.reasons[1536] == "crashed (SIGSEGV)"
    assert rec.reasons[128].startswith("slower: 512 is 100.0% faster than 128")
    assert rec.reasons[512] == "recommended (throughput: fastest median)"
    assert rec.remeasure == ()


def test_knee_is_the_smallest_within_five_percent():
    rec = choose(ROWS, 4 * GB, 0.1, Objective.KNEE)
    assert rec.chosen.num_envs == 256
    assert rec.reasons[512] == "larger than the knee"


def test_max_envs_is_the_largest_that_fits():
    assert choose(ROWS, 4 * GB, 0.1, Objective.MAX_ENVS).chosen.num_envs == 512
    assert choose(ROWS, None, 0.1, Objective.MAX_ENVS).chosen.num_envs == 1024


def test_unmeasured_peak_never_fits_a_budget():
    rec = choose([r(128, 50_000, None)], 4 * GB, 0.1)
    assert rec.chosen is None and rec.reasons[128] == "peak memory not measured"


def test_nothing_fits_says_what_to_try():
    rec = choose([r(128, None, 1.0, Status.OOM)], GB, 0.1)
    assert rec.chosen is None and "does not fit even at num_envs=128" in rec.notice
    assert choose([], GB, 0.1).notice == "no trials were measured"
    # nothing finished ok: no word of runs over the line
    assert choose([r(128, None, 1.0, Status.CRASH)], GB, 0.1).notice == \
        "no trial finished ok; see the why column"


def test_overlapping_ranges_are_called_noise_not_slower():
    best = TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=512,
                       backend="cpu", steps_per_s=100_000, steps_per_s_min=90_000,
                       steps_per_s_max=105_000, host_peak_rss_bytes=GB)
    close = TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=256,
                        backend="cpu", steps_per_s=97_000, steps_per_s_min=80_000,
                        steps_per_s_max=95_000, host_peak_rss_bytes=GB)
    far = TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=128,
                      backend="cpu", steps_per_s=50_000, steps_per_s_min=45_000,
                      steps_per_s_max=55_000, host_peak_rss_bytes=GB)
    rec = choose([best, close, far], None, 0.1, remeasure_left=True)
    # 256's range overlaps the fastest's: that decides nothing. Measure the two again; until
    # then the faster median stands.
    assert rec.chosen is best and rec.remeasure == (512, 256)
    assert rec.reasons[512].startswith("recommended for now (throughput: fastest median; "
                                       "unresolved: 256 vs 512")
    assert rec.reasons[256].startswith("unresolved: 256 vs 512")
    # ranges without a count of intervals prove nothing, however far apart
    assert rec.reasons[128].startswith("unresolved: 128 vs 512")
    # With no re-measurement left, the faster median is picked, and the reason says so.
    done = choose([best, close, far], None, 0.1, remeasure_left=False)
    assert done.chosen is best and done.remeasure == ()
    assert "no re-measurement left: the faster median is picked (" in done.reasons[512]


def test_a_tie_that_is_not_the_fastest_range_is_not_taken():
    best = r(512, 100_000, 1.0)
    best = TrialResult(**{**best.__dict__, "steps_per_s_min": 98_000, "steps_per_s_max": 102_000})
    slow = TrialResult(**{**r(256, 80_000, 1.0).__dict__, "steps_per_s_min": 70_000,
                          "steps_per_s_max": 90_000})
    assert choose([best, slow], None, 0.1).chosen is best


def test_a_failure_on_repeat_moves_the_boundary_below_that_size():
    from vramtune.records import Purpose

    rows = [r(256, 90_000, 1.0), r(512, 100_000, 1.1), r(1024, 110_000, 1.2),
            r(1024, None, None, Status.OOM), r(2048, None, None, Status.OOM)]
    rows[3] = TrialResult(**{**rows[3].__dict__, "purpose": Purpose.CONFIRM})
    rec = choose(rows, 2 * GB, 0.1)
    assert rec.chosen is not None and rec.chosen.num_envs == 512
    assert rec.reasons[1024] == "fit once, but another run of it failed or went over the line"


def test_a_larger_size_that_fit_once_is_past_a_smaller_failure():
    rows = [r(256, 90_000, 1.0), r(512, None, None, Status.OOM), r(768, 120_000, 1.2)]
    rec = choose(rows, 2 * GB, 0.1)
    assert rec.chosen is not None and rec.chosen.num_envs == 256
    assert rec.reasons[768] == "fit once, but a run at 512 envs failed"


def test_a_shared_run_proves_memory_not_speed():
    """A trial that ran beside others is no candidate until its size has run alone, and a
    shared failure still moves the boundary."""
    shared = [TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=n,
                          backend="cpu", steps_per_s=sps, host_peak_rss_bytes=GB,
                          shared_run=True)
              for n, sps in ((256, 90_000), (512, 200_000))]
    rec = choose([r(128, 50_000, 1.0), *shared], 4 * GB, 0.1)
    assert rec.chosen.num_envs == 128  # 512's shared 200k steps/s are not a measurement
    assert "shared run" in rec.reasons[512]
    alone = TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=512,
                        backend="cpu", steps_per_s=99_000, host_peak_rss_bytes=GB)
    rec = choose([r(128, 50_000, 1.0), *shared, alone], 4 * GB, 0.1)
    assert rec.chosen is alone and rec.reasons[512] == "recommended (throughput: fastest median)"
    oom = TrialResult(status=Status.OOM, profile="p", profile_hash="h", num_envs=256,
                      backend="cpu", shared_run=True)
    assert choose([r(128, 50_000, 1.0), oom, alone], 4 * GB, 0.1).chosen.num_envs == 128


def test_report_and_emit_re_choose_with_the_sweeps_own_speed_margin():
    from pathlib import Path

    from vramtune.api import choose_in_run
    from vramtune.results.store import Run, RunHeader
    from vramtune.tune.budgets import choose_for_budget, merge_runs
    from vramtune.workload.profile import load_profile

    prof = load_profile("quick")
    from dataclasses import replace

    rows = tuple(replace(x, batch_size=x.num_envs, num_minibatches=4)  # 3% apart, no spread
                 for x in (r(256, 97_000, 1.0), r(512, 100_000, 1.5)))

    def run(search):
        header = RunHeader(profile_name=prof.name, profile_hash=prof.hash,
                           profile=prof.to_dict(), budget_bytes=4 * GB, headroom_fraction=0.1,
                           machine={}, versions={},
                           search=SweepSettings.from_dict(search))
        return Run(Path("run"), header, rows)

    wide = run({"objective": "throughput", "speed_margin": 0.05})
    assert choose_in_run(wide).recommendation.chosen.num_envs == 256
    assert choose_for_budget(merge_runs([wide]), None).chosen.num_envs == 256
    older = run({"objective": "throughput"})  # no margin recorded: the default 2%
    assert choose_in_run(older).recommendation.chosen.num_envs == 512
    assert choose_for_budget(merge_runs([older]), None).chosen.num_envs == 512


def test_an_unresolved_larger_size_is_named_when_no_re_measurement_is_left():
    def ranged(n, sps, low, high):
        return TrialResult(status=Status.OK, profile="p", profile_hash="h", num_envs=n,
                           backend="cpu", steps_per_s=sps, steps_per_s_min=low,
                           steps_per_s_max=high, host_peak_rss_bytes=GB)

    # 1024's median is lower, but its range overlaps the fastest's: it may be the faster
    rows = [ranged(512, 100_000, 90_000, 105_000), ranged(1024, 98_000, 80_000, 110_000)]
    assert choose(rows, None, 0.1, remeasure_left=True).remeasure == (512, 1024)
    done = choose(rows, None, 0.1, remeasure_left=False)
    assert done.chosen.num_envs == 512 and done.speed.exhausted
    assert "unresolved: 1024 vs 512" in done.reasons[512]
    # the medians the pick stands on, beside a ratio that may lean the other way
    assert done.reasons[512].endswith("no re-measurement left: the faster median is picked "
                                      "(512: 100,000, 1024: 98,000 steps/s))")


def test_a_size_short_of_room_is_not_ranked_unless_a_proof_of_it_or_above_it_passed():
    # the 1.2 GB line: 128 and 768 left 160 and 60 MB, 832 11 MB (the search keeps ~25 MB)
    import dataclasses

    from vramtune.records import Purpose
    from vramtune.tune.boundary import short_of_room

    line = int(1.2e9)

    def cpu(n, data_mb, purpose=Purpose.SEARCH):
        return TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=n,
                           backend="cpu", batch_size=n, num_minibatches=4, unroll_length=10,
                           steps_per_s=1000.0 + n, host_peak_data_bytes=int(data_mb * 1e6),
                           host_peak_rss_bytes=int(data_mb * 0.9e6), cap_bytes=line,
                           budget_bytes=line, purpose=purpose)

    rows = [cpu(128, 1040), cpu(768, 1140), cpu(832, 1189)]
    assert set(short_of_room(rows, line)) == {832}
    rec = choose(rows, line, 0.0, Objective.MAX_ENVS)
    assert rec.chosen.num_envs == 768 and rec.reasons[832].startswith("short of room (")
    assert choose(rows, line, 0.0, Objective.THROUGHPUT).chosen.num_envs == 768
    # a proof of it that passed judges it; so does one of a larger size
    proven = [*rows, cpu(832, 1160, Purpose.CONFIRM)]
    assert short_of_room(proven, line) == {}
    assert choose(proven, line, 0.0, Objective.MAX_ENVS).chosen.num_envs == 832
    above = [*rows, cpu(896, 1192), cpu(896, 1165, Purpose.CONFIRM)]
    assert short_of_room(above, line) == {}
    # no line, or a GPU's figures (they do not jitter so): nothing is short
    assert short_of_room(rows, None) == {}
    gpu = [dataclasses.replace(x, backend="gpu") for x in rows]
    assert short_of_room(gpu, line) == {}
    # the smallest size that fitted is never short: its proof decides (a start near the line
    # is proven, or fails, rather than leaving the sweep with nothing to prove)
    assert short_of_room([cpu(832, 1189)], line) == {}
    assert choose([cpu(832, 1189)], line, 0.0, Objective.MAX_ENVS).chosen.num_envs == 832


def test_short_of_room_fits_a_rollout_model_and_names_the_trial_it_judged():
    # batches not in proportion to num_envs (a growing policy rounding up): the model has a
    # rollout term and needs each size's shape; choose must not fail on it
    from vramtune.records import Purpose

    line = int(1.2e9)

    def cpu(n, batch, data_mb, purpose=Purpose.SEARCH):
        return TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=n,
                           backend="cpu", batch_size=batch, num_minibatches=4,
                           unroll_length=10, steps_per_s=1000.0 + n, cap_bytes=line,
                           host_peak_data_bytes=int(data_mb * 1e6), budget_bytes=line,
                           host_peak_rss_bytes=int(data_mb * 0.9e6), purpose=purpose)

    rows = [cpu(128, 128, 900), cpu(256, 256, 960), cpu(384, 512, 1050), cpu(512, 512, 1100),
            cpu(640, 640, 1185)]
    rec = choose(rows, line, 0.0, Objective.MAX_ENVS)
    assert rec.chosen is not None and rec.chosen.num_envs < 640
    # judged by its highest search trial, and said so on every row of the size
    rows += [cpu(640, 640, 1120), cpu(640, 640, 1150, Purpose.ALONE)]
    rec = choose(rows, line, 0.0, Objective.MAX_ENVS)
    assert rec.reasons[640].startswith("short of room (fit its trial 14.31 MiB under"), \
        rec.reasons[640]


def test_the_pick_quotes_the_highest_peak_of_its_size_not_its_fastest_run():
    # the fastest run of 512 is a run alone on a warm compile cache, ~200 MB lower than the
    # cold search trial and the confirming run: the summary says what a cold run will use
    from vramtune.records import Purpose
    from vramtune.views.runs import chosen_summary

    def cpu(n, rss_mb, sps, purpose=Purpose.SEARCH):
        return TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=n,
                           backend="cpu", batch_size=n, num_minibatches=4, unroll_length=10,
                           steps_per_s=sps, host_peak_rss_bytes=int(rss_mb * 2**20),
                           purpose=purpose)

    rows = [cpu(128, 700, 40_000), cpu(512, 878, 50_000), cpu(512, 685, 60_000, Purpose.ALONE),
            cpu(512, 902, 55_000, Purpose.CONFIRM)]
    rec = choose(rows, 2 * GB, 0.1, Objective.THROUGHPUT)
    assert rec.chosen.purpose is Purpose.ALONE and rec.chosen.num_envs == 512
    assert rec.peak_bytes == int(902 * 2**20) and rec.runs_of_chosen == 3
    text = chosen_summary(rec, 2 * GB)
    assert "peak 902.00 MiB host RAM (the highest of its 3 runs; 47% of budget)" in text, text
    # one run of the size: nothing to say beyond its share
    single = choose([cpu(128, 700, 40_000)], 2 * GB, 0.1)
    assert chosen_summary(single, 2 * GB).endswith("peak 700.00 MiB host RAM (37% of budget)")


def _recorded(tmp_path, name):
    import shutil
    from pathlib import Path

    from vramtune.results.store import RESULTS_FILE, load_run

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(Path(__file__).parents[2] / "golden" / "runs" / name, run_dir / RESULTS_FILE)
    return load_run(run_dir)


def test_a_lead_smaller_than_the_picks_own_move_between_runs_is_re_measured(tmp_path):
    """Recorded (the README's first command, 1.3 GB, with a CI run starting beside it after
    its first trial): 128 ran first at 15.6k steps/s, 576 and 704 after the load came at
    13.1k and 13.5k, so 128 led by 15-19%; 128's confirming run then read 12.7k, 0.81 of its
    trial. Its own move between runs is larger than its lead: not a lead, re-measure."""
    run = _recorded(tmp_path, "cpu-quick-1.3GB-load.jsonl")
    budget, headroom = run.header.budget_bytes, run.header.headroom_fraction
    asked = choose(run.results, budget, headroom, remeasure_left=True)
    assert asked.chosen.num_envs == 128 and asked.speed.remeasure == (128, 704)
    settled = choose(run.results, budget, headroom, remeasure_left=False)
    assert settled.speed.exhausted
    assert settled.reasons[704].startswith("unresolved"), settled.reasons[704]
    assert "128 envs' trial and proof run differ 1.23x" in settled.reasons[704]
    # Without the confirming run (a sweep before its proof) the trials alone decide, as before
    before = [x for x in run.results if x.purpose.value != "confirm"]
    assert choose(before, budget, headroom, remeasure_left=True).speed.remeasure == ()


def test_a_recorded_dip_is_measured_again_not_ranked(tmp_path):
    """The README's first command alone: 704's one trial read 13,943 steps/s between 576's
    25,040 and 832's 23,743 (short of room, so not a candidate, but measured). Its one run is
    not a 78.9% lead for 576: the pair is measured again, or the faster median stands."""
    run = _recorded(tmp_path, "cpu-quick-1.3GB-dip.jsonl")
    budget, headroom = run.header.budget_bytes, run.header.headroom_fraction
    asked = choose(run.results, budget, headroom, remeasure_left=True)
    assert asked.speed.remeasure == (576, 704) and asked.speed.dips == {704: (576, 832)}
    settled = choose(run.results, budget, headroom, remeasure_left=False)
    assert settled.chosen.num_envs == 576 and settled.speed.exhausted
    assert settled.reasons[704].startswith("unresolved"), settled.reasons[704]
    assert "576 and 832 on either side read over 1.1x its rate" in settled.reasons[704]
    assert "78.9%" not in settled.reasons[704]
    # 576 beat 128 by 12.7% with confidence: no dip there, the lead stands
    assert "576 is 12.7% faster than 128" in settled.reasons[128], settled.reasons[128]


def test_a_dip_its_rerun_does_not_repeat_is_set_aside(tmp_path):
    """Two busy loops beside the third trial only: 448 read 14,878 steps/s between 128's
    26,794 and 512's 26,931, then 27,222 re-measured beside 128. The disturbed run is set
    aside (shown, with why) and 448 is weighed on its run alone."""
    from vramtune.records import Purpose
    from vramtune.views.sweep_table import row_reason

    run = _recorded(tmp_path, "cpu-quick-1.3GB-dip-rerun.jsonl")
    budget, headroom = run.header.budget_bytes, run.header.headroom_fraction
    rec = choose(run.results, budget, headroom, remeasure_left=True)
    [(aside, words)] = rec.set_aside
    assert aside.num_envs == 448 and aside.purpose is Purpose.SEARCH
    assert words == ("set aside: read 14,878 steps/s, a dip (128 and 512 on either side read over "
                     "1.1x that), and 27,222 when run again: a disturbed run")
    assert rec.speed.rates[448].runs == 1 and round(rec.speed.rates[448].median) == 27_222
    assert rec.speed.dips == {}  # its one run left is no dip: ranked as it reads
    assert row_reason(aside, rec) == words
    others = [r for r in run.results if r.num_envs == 448 and r is not aside]
    assert all(row_reason(r, rec) != words for r in others)
    # without the re-measure, the dip was a question, not a verdict (and nothing set aside)
    first = [r for r in run.results if r.purpose is Purpose.SEARCH]
    before = choose(first, budget, headroom, remeasure_left=True)
    # (512 left the room a proof keeps, so it is ranked: the pair is the fastest two)
    assert before.set_aside == () and before.speed.remeasure == (512, 448)


def _timed(n, sps, purpose=None, shared=False):
    from dataclasses import replace

    from vramtune.records import Purpose

    rates = [sps * (1 + d) for d in (-0.01, -0.005, 0.0, 0.005, 0.01)]
    return replace(r(n, sps, 1.0), purpose=purpose or Purpose.SEARCH, shared_run=shared,
                   steps_per_s_intervals=rates, steps_per_s_min=min(rates),
                   steps_per_s_max=max(rates), measured_intervals=len(rates))


def test_a_set_aside_run_moves_no_drift_and_a_rerun_that_dips_sets_nothing_aside():
    from vramtune.records import Purpose

    base = [_timed(128, 25_000), _timed(448, 14_000), _timed(512, 25_500)]
    # re-measured at 27,000 and proven at 27,000: against the pooled 14k + 27k intervals
    # (median ~20k) the proof would read 1.3x, a move that never happened
    runs = base + [_timed(128, 25_100, Purpose.ALONE), _timed(448, 27_000, Purpose.ALONE),
                   _timed(448, 27_000, Purpose.CONFIRM)]
    rec = choose(runs, 4 * GB, 0.1, remeasure_left=True)
    assert [x.num_envs for x, _ in rec.set_aside] == [448]
    assert rec.chosen.num_envs == 448 and rec.confirm_speed_line.endswith("ratio 1.00")
    assert not any("widened" in why for why in rec.reasons.values()), rec.reasons
    # the re-run dips too (16k between two 25k): nothing is set aside, the two runs stand
    dipped = base + [_timed(128, 25_100, Purpose.ALONE), _timed(448, 16_000, Purpose.ALONE)]
    rec = choose(dipped, 4 * GB, 0.1, remeasure_left=True)
    assert rec.set_aside == () and rec.speed.dips == {} and rec.speed.rates[448].runs == 2


def test_a_run_that_shared_the_device_is_no_neighbour_for_a_dip():
    # 704 at 21k: 0.84 of 576 below it, within the edge ratio; a run alone at 832 above it
    # reading 24k makes it a dip, a shared run there (its speed not its own) does not
    alone = choose([_timed(576, 25_000), _timed(704, 21_000), _timed(832, 24_000)],
                   4 * GB, 0.1, remeasure_left=True)
    assert alone.speed.dips == {704: (576, 832)}
    shared = choose([_timed(576, 25_000), _timed(704, 21_000), _timed(832, 24_000, shared=True)],
                    4 * GB, 0.1, remeasure_left=True)
    assert shared.speed.dips == {}


def test_a_dip_repeated_by_a_second_run_stands():
    from vramtune.records import Purpose

    timed = _timed

    trials = [timed(576, 25_000), timed(704, 14_000), timed(832, 24_000)]
    once = choose(trials, 4 * GB, 0.1, remeasure_left=True)
    assert once.speed.remeasure == (576, 704) and once.speed.dips == {704: (576, 832)}
    # measured again beside the fastest, the dip is still there: a real one, not re-asked
    again = trials + [timed(576, 25_100, Purpose.ALONE), timed(704, 14_100, Purpose.ALONE)]
    twice = choose(again, 4 * GB, 0.1, remeasure_left=True)
    assert twice.speed.remeasure == () and twice.speed.dips == {}
    assert twice.chosen.num_envs == 576 and "faster than 704" in twice.reasons[704]
    # a gentle slope is no dip: 704 within 10% of both sides is ranked on its one run
    gentle = [timed(576, 25_000), timed(704, 23_000), timed(832, 24_000)]
    assert choose(gentle, 4 * GB, 0.1, remeasure_left=True).speed.dips == {}


def test_a_move_within_a_windows_own_error_or_rerun_since_widens_nothing():
    from vramtune.records import Purpose

    timed = _timed

    trials = [timed(128, 15_600), timed(704, 13_500)]
    steady = choose(trials + [timed(128, 15_000, Purpose.CONFIRM)], 4 * GB, 0.1,
                    remeasure_left=True)  # 0.96 of its trial: a window's own error
    assert steady.chosen.num_envs == 128 and steady.speed.remeasure == ()
    moved = trials + [timed(128, 12_700, Purpose.CONFIRM)]
    assert choose(moved, 4 * GB, 0.1, remeasure_left=True).speed.remeasure == (128, 704)
    # both ran again since, interleaved: their comparison stands on its own intervals
    pairs = moved + [timed(128, 12_600, Purpose.ALONE), timed(704, 13_400, Purpose.ALONE)]
    again = choose(pairs, 4 * GB, 0.1, remeasure_left=True)
    assert again.speed.remeasure == () and again.chosen.num_envs == 704


@pytest.mark.parametrize("objective", [Objective.MAX_ENVS, Objective.KNEE])
def test_every_objective_sets_a_disturbed_run_aside_and_quotes_the_kept_rate(tmp_path, objective):
    """The disturbed run of 448 (14,878 steps/s, 27,222 run again) is set aside whatever the
    objective: a max-envs pick of 448 quotes 27,222, not the dip, nor the dip pooled in."""
    from vramtune.tune.recommend import size_speeds

    run = _recorded(tmp_path, "cpu-quick-1.3GB-dip-rerun.jsonl")
    upto = [x for x in run.results if x.num_envs <= 448]
    rec = choose(upto, run.header.budget_bytes, run.header.headroom_fraction, objective)
    assert [a.num_envs for a, _ in rec.set_aside] == [448]
    if objective is Objective.MAX_ENVS:
        assert rec.chosen.num_envs == 448 and round(rec.steady_steps_per_s) == 27_222
        assert rec.chosen is not rec.set_aside[0][0]
    assert round(size_speeds(run.results)[448]) == 27_222  # compare's rate for the size


def test_views_quote_a_size_at_the_rate_its_pick_weighed_after_a_drift():
    """128 read 15.6k, 704 13.5k; 128's proof then read 12.7k (the machine slowed) and both
    ran again alone: the pick compares them on the runs since (12.6k against 13.4k), and a
    view must quote those, not every run pooled (14.1k for 128, as if it were the faster)."""
    from vramtune.records import Purpose
    from vramtune.tune.recommend import size_speeds, weighed_speeds

    runs = [_timed(128, 15_600), _timed(704, 13_500), _timed(128, 12_700, Purpose.CONFIRM),
            _timed(128, 12_600, Purpose.ALONE), _timed(704, 13_400, Purpose.ALONE)]
    rec = choose(runs, 4 * GB, 0.1)
    weighed = weighed_speeds(rec, runs)
    assert weighed == {n: rec.speed.rates[n].median for n in (128, 704)}
    assert weighed[704] > weighed[128] and rec.chosen.num_envs == 704
    assert size_speeds(runs)[128] > size_speeds(runs)[704]  # pooled, drift unseen
