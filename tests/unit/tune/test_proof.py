"""Proving the pick, as decisions over records: repeats, confirmations, caps.

Pure: the records are built here; the sweep's real runs are in tests/integration.
"""

from __future__ import annotations

import dataclasses

import pytest
from benchmarks.replay import Curve, outcome

from tests.sweeps import sweep_config, with_settings
from vramtune.measure.wire import confirm_epoch_steps
from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune import search as S
from vramtune.tune.alone import decide
from vramtune.tune.boundary import boundary_edge, over_failed_proof, short_of_room
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchMethod, Step, StepKind, candidates
from vramtune.tune.proof import STEP_DOWN, confirming_step, edge_step
from vramtune.tune.recommend import Objective, choose
from vramtune.tune.request import SweepConfig
from vramtune.tune.sweep import next_steps, search_outcome, trial_request
from vramtune.units import format_bytes
from vramtune.workload.profile import load_profile

GB = 10**9
CAP = int(1.2 * GB * 0.9)


def r(n: int, status: Status = Status.OK, sps: float | None = 1000.0, *, data_gb: float = 0.9,
      purpose: Purpose = Purpose.SEARCH, cap: int | None = CAP, lo: float | None = None,
      hi: float | None = None, steps: int = 6) -> TrialResult:
    ok = status is Status.OK
    return TrialResult(status=status, profile="quick", profile_hash="h", num_envs=n,
                       batch_size=n, num_minibatches=4, backend="cpu",
                       steps_per_s=sps if ok else None,
                       steps_per_s_min=(lo if lo is not None else sps) if ok else None,
                       steps_per_s_max=(hi if hi is not None else sps) if ok else None,
                       host_peak_rss_bytes=int(data_gb * 0.9 * GB),
                       host_peak_data_bytes=int(data_gb * GB), budget_bytes=int(1.2 * GB),
                       cap_bytes=cap, purpose=purpose, training_steps=steps)


def _config(confirm: bool) -> SweepConfig:
    return sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 256, 1024, 0, confirm=confirm,
                       objective=Objective.MAX_ENVS)


def test_a_repeat_that_errors_ends_the_proof_and_the_size_stays_unproven():
    # review finding: with --no-confirm a repeat ending in error was planned again forever
    results = [r(256), r(512), r(1024, Status.OOM),
               r(512, Status.ERROR, purpose=Purpose.REPEAT)]
    config = _config(confirm=False)
    step = edge_step(config, results, decide(config, results))
    assert step is not None and step.num_envs == 256  # 512 unproven: the next smaller is proven
    results.append(r(256, purpose=Purpose.REPEAT))
    assert edge_step(config, results, decide(config, results)) is None
    assert next_steps(config, results, config.space()) == []
    assert choose(results, int(1.2 * GB), 0.1, Objective.MAX_ENVS).chosen.num_envs == 256


def test_a_passing_confirmation_does_not_change_the_pick_it_proved():
    # review finding: a faster confirm row re-ranked the sizes and started another long run
    results = [r(256, sps=1000, lo=900, hi=1100), r(512, sps=1150, lo=1050, hi=1250),
               r(1024, sps=1200, lo=1120, hi=1300), r(2048, Status.OOM)]
    first = choose(results, int(1.2 * GB), 0.1).chosen
    results.append(r(first.num_envs, sps=1400, lo=1050, hi=1500, purpose=Purpose.CONFIRM))
    again = choose(results, int(1.2 * GB), 0.1)
    assert again.chosen is first and again.confirmation is results[-1]
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 256, 4096, 0)
    assert edge_step(config, results, decide(config, results)) is None


def test_a_smaller_budget_does_not_trust_rss_from_a_larger_cap():
    # review finding: emit for 900 MB recommended a size whose data segment was 1.0 GB
    run = r(512, data_gb=1.0)  # ran under 1.08 GB; RSS 0.9 GB, data segment 1.0 GB
    assert choose([run], int(0.9 * GB), 0.1).chosen is None
    assert choose([run], int(1.2 * GB), 0.1).chosen is run  # under its own cap it is proven
    legacy = dataclasses.replace(run, cap_bytes=None, host_peak_data_bytes=None)
    assert choose([legacy], int(1.2 * GB), 0.1).chosen is legacy  # old records: the peak


def test_a_size_known_only_by_its_confirming_run_is_still_ranked():
    # emit-config keeps one record per size (results.frame.one_per_size), which may be the
    # confirming run: the size must stay recommendable (found by the fidelity tests)
    confirm = r(64, purpose=Purpose.CONFIRM)
    rec = choose([confirm], 3 * GB, 0.1)
    assert rec.chosen is confirm and rec.confirmation is confirm


def _steps(config: SweepConfig, results: list[TrialResult]):
    return next_steps(config, results, config.space())


def test_a_failed_confirmation_searches_the_sizes_below_it_instead_of_the_next_measured_one():
    # fidelity bench, 1.2 GB: the predictive search jumped 128 -> 512; 576 and 512 failed
    # their confirmations, and 128 was confirmed while the user's 512 survived. Now the
    # failed size becomes the search's upper end and the sizes between are measured.
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 128, 1024, None,
                         objective=Objective.MAX_ENVS)
    results = [r(128, data_gb=0.95), r(512, data_gb=1.0), r(576, data_gb=1.03),
               r(640, Status.OOM)]
    [step] = _steps(config, results)
    assert (step.phase, step.num_envs) == ("confirming", 576)
    results.append(r(576, Status.OOM, purpose=Purpose.CONFIRM))
    [step] = _steps(config, results)  # nothing unmeasured between 512 and 576
    assert (step.phase, step.num_envs) == ("confirming", 512)
    results.append(r(512, Status.OOM, purpose=Purpose.CONFIRM))
    steps = _steps(config, results)
    assert steps and all(s.phase not in ("confirming", "done") for s in steps)
    assert all(128 < s.num_envs < 512 for s in steps)
    assert [s.num_envs for s in steps] != [128]


def test_a_failed_confirmation_gives_bisection_a_fresh_refine_budget_below_it():
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 256, 1024, 3,
                         objective=Objective.MAX_ENVS, search=SearchMethod.BISECT)
    results = [r(256), r(512), r(1024, Status.OOM), r(768, Status.OOM), r(640),
               r(704, Status.OOM)]
    [step] = _steps(config, results)  # the refine budget (3) is spent: prove 640
    assert (step.phase, step.num_envs) == ("confirming", 640)
    results.append(r(640, Status.OOM, purpose=Purpose.CONFIRM))
    [step] = _steps(config, results)
    assert step.phase == "refining" and 512 < step.num_envs < 640
    results.append(r(step.num_envs))
    [step] = _steps(config, results)
    assert step.phase != "confirming" or step.num_envs >= 576


@pytest.mark.parametrize("method", [SearchMethod.BISECT, SearchMethod.PREDICTIVE])
def test_a_start_that_fits_its_trial_and_fails_its_confirmation_is_said_as_it_happened(method):
    # review finding: fidelity-stepdown 1.15 GB said "does not fit even at 256 envs" and
    # "no trial finished ok" when 256 fitted its search trial and failed its long run
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 256, 1024, 3,
                         objective=Objective.MAX_ENVS, search=method)
    results = [r(256, data_gb=1.0), r(512, Status.OOM), r(384, Status.OOM),
               r(320, Status.OOM), r(288, Status.OOM),
               r(256, Status.OOM, purpose=Purpose.CONFIRM)]
    assert _steps(config, results) == []  # nothing left to measure at or above --start
    reason = search_outcome(results, config.space()).reason
    assert "256 envs fitted its search trial but its longer confirming run ended in oom" \
        in reason and "--start 128" in reason and "does not fit even" not in reason
    rec = choose(results, int(1.2 * GB), 0.1, Objective.MAX_ENVS)
    assert rec.chosen is None
    assert "fitted its search trial" in rec.notice and "no trial finished ok" not in rec.notice


def _replayed_sweep(config: SweepConfig, search_curve, long_curve) -> list[tuple[Step, TrialResult]]:
    """Drive the sweep's plan to its end: search trials answered by ``search_curve``,
    confirming runs by ``long_curve`` (a longer run peaks higher), both under the sweep's cap."""
    done: list[tuple[Step, TrialResult]] = []
    for _ in range(60):
        steps = next_steps(config, [r for _, r in done], config.space())
        if not steps:
            return done
        for step in steps:
            confirming = step.phase is StepKind.CONFIRMING
            curve = long_curve if confirming else search_curve
            result = dataclasses.replace(
                outcome(curve, step.num_envs, config.limit_bytes), profile="quick",
                purpose=Purpose.CONFIRM if confirming else Purpose.SEARCH,
                cap_bytes=config.limit_bytes, budget_bytes=config.budget_bytes, training_steps=6)
            done.append((step, result))
    raise AssertionError("the sweep did not end")


@pytest.mark.parametrize("extra_mib", [25, 40, 80])
def test_the_search_proves_a_size_with_room_and_a_failed_proof_steps_down_on_replayed_records(
        extra_mib):
    # The data segment quick's trials recorded (tests/unit/tune/test_replay.py), and a long
    # run that peaks extra_mib above its search trial; the long run's own edge is 576, 512 or
    # 320 envs under 1.08 GB. 640 fits its search trial 12 MiB under the line, less than the
    # ~21 MiB a proof keeps (short_of_room): the search brackets the edge against it and
    # proves 576, which left the room. Where the long run grows 40 MiB past its trial, that
    # proof fails and the next size down passes; at 80 MiB it fails too and the step-down
    # measures below it.
    mib = 2**20
    search = Curve((256, 512, 1024, 1536), tuple(v * mib for v in (935, 975, 1146, 1290)))
    long = Curve(search.sizes, tuple(v + extra_mib * mib for v in search.peaks_bytes))
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 256, 2048, None,
                         objective=Objective.MAX_ENVS)
    done = _replayed_sweep(config, search, long)
    records = [r for _, r in done]
    proofs = [r for r in records if r.purpose is Purpose.CONFIRM]
    assert proofs[0].num_envs == 576 and 640 in short_of_room(records, config.limit_bytes)
    assert all(n not in {p.num_envs for p in proofs} for n in short_of_room(records, CAP))
    rec = choose(records, config.budget_bytes, config.headroom_fraction, Objective.MAX_ENVS)
    assert rec.chosen is not None and rec.confirmation is not None
    assert rec.confirmation.status is Status.OK
    truth = long.truth(config.limit_bytes, candidates(config.space()))
    grid = candidates(config.space())
    picked = rec.chosen.num_envs
    assert picked <= truth
    if extra_mib < 80:  # one proof (two at 40 MiB, the first failing), within a grid step
        assert len(proofs) == (1 if extra_mib == 25 else 2), done
        assert proofs[-1].status is Status.OK and all(p.status is Status.OOM for p in proofs[:-1])
        assert grid.index(truth) - grid.index(picked) <= 1, done
        return
    first = next(i for i, r in enumerate(records)
                 if r.purpose is Purpose.CONFIRM and r.status is Status.OOM)
    after = done[first + 1:]
    searched = [(s, r) for s, r in after if r.purpose is Purpose.SEARCH]
    assert 0 < len(searched) <= STEP_DOWN, done
    for step, _ in searched:
        assert "step-down below 576, whose proof run failed: size" in step.reason
        assert f"of at most {STEP_DOWN}" in step.reason
    words = search_outcome(records, config.space(), 1, config).reason
    assert words.startswith("step-down below 576") and f"between {picked} (proven)" in words


def test_a_step_down_searches_first_and_proves_only_its_pick():
    # bench_search at 1.45 GB: 1792 fitted its search trial and failed its confirmation;
    # 1024, 1536 and 1664 were each searched and confirmed (six runs, three of them long).
    # Now the step-down starts one refinement step below 1792 and proves only what it picks.
    mib = 2**20
    config = sweep_config(load_profile("quick"), int(1.45 * GB), 0.0, 128, 4096, None,
                         objective=Objective.MAX_ENVS)
    peak = lambda n: (1000 + 0.2 * n) * mib / GB  # noqa: E731  (GB of data segment)
    results = [r(128, data_gb=peak(128), cap=int(1.45 * GB)), r(2048, Status.OOM),
               r(1792, data_gb=peak(1792), cap=int(1.45 * GB)), r(1920, Status.OOM),
               r(1792, Status.OOM, purpose=Purpose.CONFIRM, cap=int(1.45 * GB))]
    [step] = _steps(config, results)
    assert step.phase == "refining" and 1024 < step.num_envs < 1792, step
    assert "the largest size that fits is then proven" in step.reason
    n = step.num_envs
    results.append(r(n, data_gb=peak(n), cap=int(1.45 * GB)))
    [step] = _steps(config, results)  # within a step of 1792: nothing more to search
    assert (step.phase, step.num_envs) == ("confirming", n)
    results.append(r(n, data_gb=peak(n), cap=int(1.45 * GB), purpose=Purpose.CONFIRM))
    assert _steps(config, results) == []
    assert sum(x.purpose is Purpose.CONFIRM for x in results) == 2


def test_a_search_failure_below_the_failed_proof_turns_the_step_down_to_bisection():
    # review finding: 1792 fitted its search trial and failed its confirmation; stepping one
    # jitter lower each time after 1664 failed its own search trial walked 1664, 1536, 1408
    # (all oom) and proved 128. A search failure says the edge is not a jitter below the
    # proof: bisect between the largest fit and it.
    mib = 2**20
    cap = int(1.45 * GB)
    config = sweep_config(load_profile("quick"), cap, 0.0, 128, 4096, None,
                         objective=Objective.MAX_ENVS)
    peak = lambda n: (1000 + 0.2 * n) * mib / GB  # noqa: E731
    results = [r(128, data_gb=peak(128), cap=cap), r(2048, Status.OOM),
               r(1792, data_gb=peak(1792), cap=cap), r(1920, Status.OOM),
               r(1792, Status.OOM, purpose=Purpose.CONFIRM)]
    [step] = _steps(config, results)
    results.append(r(step.num_envs, Status.OOM))  # it fails its search trial
    [step] = _steps(config, results)
    assert step.phase == "refining"
    hi = results[-1].num_envs
    assert 128 + (hi - 128) / 4 <= step.num_envs <= 128 + 3 * (hi - 128) / 4, step


def test_after_two_failed_proofs_each_size_is_proven_as_soon_as_it_is_searched():
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 128, 1024, None,
                         objective=Objective.MAX_ENVS)
    results = [r(128, data_gb=0.95), r(512, data_gb=1.0), r(576, data_gb=1.03),
               r(640, Status.OOM), r(576, Status.OOM, purpose=Purpose.CONFIRM),
               r(512, Status.OOM, purpose=Purpose.CONFIRM)]
    [step] = _steps(config, results)
    assert step.phase == "refining" and 128 < step.num_envs < 512
    n = step.num_envs
    results.append(r(n, data_gb=0.97))
    [step] = _steps(config, results)
    assert (step.phase, step.num_envs) == ("confirming", n)
    assert "step-down below 576, whose proof run failed: size 1 of at most" in step.reason


@pytest.mark.parametrize("confirm_steps, trial_steps, floor", [
    (None, 6, 6),  # as long as the trial it proves, no longer
    (None, 30, 30),
    (None, None, 10),  # an old record without its length
    (None, 400, 50),  # never above the ceiling (max(50, 10 x settled))
    (80, 6, None),  # --confirm-steps: exactly as long as asked
])
def test_a_confirming_run_gets_a_floor_unless_its_length_was_asked(confirm_steps, trial_steps,
                                                                     floor):
    config = with_settings(_config(True), confirm_steps=confirm_steps)
    results = [dataclasses.replace(r(256, steps=trial_steps or 0), training_steps=trial_steps,
                                   memory_steady_steps=5)]
    request = trial_request(config, results, Step(StepKind.CONFIRMING, 256, "confirming"))
    assert request.purpose is Purpose.CONFIRM
    assert request.min_training_steps == floor
    assert request.training_steps == (confirm_steps or 50)
    words = confirming_step(config, results, 256).reason
    # a floor at the ceiling is a fixed length, and said as one
    assert ("ending once memory has held" in words) == (floor is not None and floor < 50)


def test_a_two_step_trials_proof_reports_every_two_steps_up_to_its_ceiling():
    # a two-step trial's memory is steady at step 8 at the earliest: its proof's ceiling is
    # 80 steps, reported every 2 (wire.confirm_epoch_steps), so it may end at the trial's 10
    config = _config(True)
    results = [dataclasses.replace(r(2048, steps=10), training_steps=10, memory_steady_steps=8)]
    request = trial_request(config, results, Step(StepKind.CONFIRMING, 2048, "confirming"))
    assert (request.training_steps, request.min_training_steps) == (80, 10)
    assert confirm_epoch_steps(request.training_steps) == 2
    assert "10-80 training steps" in confirming_step(config, results, 2048).reason


def test_the_step_down_names_the_edge_that_fits_beside_a_smaller_proven_pick():
    # README's first command, 2026-11-27: 832 failed its confirmation, throughput picked and
    # proved 128, and the search line said "boundary between 128 (proven) and 832"
    config = with_settings(_config(True), objective=Objective.THROUGHPUT, start=128)
    results = [r(128, sps=2000.0), r(768, sps=1000.0), r(832, sps=1000.0), r(896, Status.OOM),
               r(832, Status.OOM, purpose=Purpose.CONFIRM), r(128, purpose=Purpose.CONFIRM)]
    words = search_outcome(results, config.space(), 1, config).reason
    assert words.endswith("boundary between 768 (fits its search trial; 128 proven) and 832 "
                          "(fails)"), words


def test_a_confirming_run_is_capped_one_refinement_step_below_the_line():
    # A confirmation that passes just under the line is one draw of a coin the user's run
    # flips again: on a CPU the proof runs under the line less one refinement step.
    config = sweep_config(load_profile("quick"), int(1.2 * GB), 0.1, 128, 1024, None,
                         objective=Objective.MAX_ENVS)
    gb = lambda n: 0.8 + 0.00025 * n  # noqa: E731
    results = [r(128, data_gb=gb(128)), r(512, data_gb=gb(512)), r(576, Status.OOM)]
    [step] = _steps(config, results)
    assert (step.phase, step.num_envs) == ("confirming", 512)
    request = trial_request(config, results, step)
    room = CAP - request.cap_bytes
    # RESOLVE_SD sd of one run's peak at 512 (the 1.5 % prior jitter at least): 14-20 MB a sd
    sd = S.RESOLVE_SD
    assert 0.99 * sd * 0.015 * gb(512) * GB <= room <= sd * 0.025 * gb(512) * GB
    assert "below the" in step.reason and "room for another run's jitter" in step.reason
    # a search trial still runs at the line
    assert trial_request(config, results, Step(StepKind.REFINING, 384, "s")).cap_bytes == CAP
    # passing under the tighter cap proves the size; the line it left room under is said
    passed = [*results, r(512, data_gb=gb(512), purpose=Purpose.CONFIRM, cap=request.cap_bytes)]
    rec = choose(passed, int(1.2 * GB), 0.1, Objective.MAX_ENVS)
    assert rec.chosen.num_envs == 512 and rec.confirmation is passed[-1]
    assert "(a cap " in rec.confirmed_line and "below the" in rec.confirmed_line
    assert _steps(config, passed) == []
    # running out of memory under it fails the proof: the step-down searches below 512
    failed = [*results, r(512, Status.OOM, purpose=Purpose.CONFIRM, cap=request.cap_bytes)]
    steps = _steps(config, failed)
    assert steps and all(128 < s.num_envs < 512 and s.phase != "confirming" for s in steps)
    # without a budget there is no line to keep room under
    free = sweep_config(load_profile("quick"), None, 0.1, 128, 1024, None)
    assert trial_request(free, results, step).cap_bytes is None


@pytest.mark.parametrize("peak_768_mb", [1152.0, 1110.0])
def test_sizes_that_fit_within_a_jitter_of_the_line_are_not_proven(peak_768_mb):
    # 1.3 GB: 832 fitted its search trial 11 MB under the 1,170 MB line, 768 18 MB (or 60 MB)
    # under it. A proof keeps ~25 MB (1.5 sd of one run's peak) of room for the user's run,
    # and a size that peaked above its proof's cap passes a second draw there about half the
    # time. So no proof is spent on it: the search aims below it (at 1,152 MB, 768 too), or
    # proves 768, which left the room.
    line = int(1.3 * GB * 0.9)
    config = sweep_config(load_profile("quick"), int(1.3 * GB), 0.1, 128, 2048, None,
                         objective=Objective.MAX_ENVS)
    mb = {128: 1009.9, 768: peak_768_mb, 832: 1159.2}  # data segment, MB
    results = [r(n, data_gb=v / 1000, cap=line) for n, v in mb.items()]
    results.append(r(896, Status.OOM, cap=line))
    short = set(short_of_room(results, line))
    rec = choose(results, int(1.3 * GB), 0.1, Objective.MAX_ENVS)
    assert "the search keeps for another run's jitter" in rec.reasons[832]
    [step] = _steps(config, results)
    if peak_768_mb > 1140:
        assert short == {768, 832} and rec.chosen.num_envs == 128
        assert step.phase == "predicting" and 512 < step.num_envs < 768, step
        assert search_outcome(results, config.space()).num_envs == step.num_envs
        return
    assert short == {832} and rec.chosen.num_envs == 768
    assert (step.phase, step.num_envs) == ("confirming", 768)
    cap = trial_request(config, results, step).cap_bytes
    assert line - 35e6 < cap < line - 18e6  # 1.5 sd of one run's peak below the line
    results.append(r(768, Status.OOM, purpose=Purpose.CONFIRM, cap=cap))
    # a failed proof whose trial left the room: the step-down measures below it
    [step] = _steps(config, results)
    assert step.phase == "refining" and 128 < step.num_envs < 768, step
    for _ in range(3):  # each fits 70 MB under the line: refine toward 768, then prove
        n = step.num_envs
        results.append(r(n, data_gb=1.10, cap=line))
        [step] = _steps(config, results)
        if step.phase != "refining":
            break
        assert n < step.num_envs < 768, step
    assert (step.phase, step.num_envs) == ("confirming", n)


def test_only_a_failed_proof_held_below_the_line_rules_out_sizes_over_its_cap():
    line = int(1.3 * GB * 0.9)
    # 768 left more room than the search keeps (short_of_room: ~25 MB), 832 did not
    base = [r(128, data_gb=1.00, cap=line), r(768, data_gb=1.110, cap=line),
            r(832, data_gb=1.159, cap=line)]
    held = r(832, Status.OOM, purpose=Purpose.CONFIRM, cap=line - 65_000_000)
    # 768's trial peaked above it; 832 is judged by its own proof
    assert over_failed_proof([*base, held], line) == {768: line - 65_000_000}
    assert boundary_edge([*base, held], line) == 768
    # a proof at the line (a GPU's, or recorded before proofs kept room): nothing more
    at_line = dataclasses.replace(held, cap_bytes=line)
    assert over_failed_proof([*base, at_line], line) == {}
    assert boundary_edge([*base, at_line], line) == 832
    # a passing proof rules nothing out; nor does a GPU record's figure
    passed = dataclasses.replace(held, status=Status.OK, steps_per_s=1000.0)
    assert over_failed_proof([*base, passed], line) == {}
    gpu = [dataclasses.replace(x, backend="gpu") for x in base]
    assert over_failed_proof([*gpu, held], line) == {}


@pytest.mark.parametrize("search", [SearchMethod.PREDICTIVE, SearchMethod.BISECT])
def test_a_start_ruled_out_by_a_failed_proof_ends_the_sweep_with_a_smaller_start_to_try(search):
    # --start 768: 768 fitted its trial at 1,145.8 MB, 1024 fitted at 1,159.2 and ran out
    # of memory in its proof held ~30 MB below the 1,170 MB line. 768 is over that cap: no
    # size is left to search above it, nor to recommend, and the notice says why.
    line = int(1.3 * GB * 0.9)
    config = sweep_config(load_profile("quick"), int(1.3 * GB), 0.1, 768, 2048, None,
                         objective=Objective.MAX_ENVS, search=search)
    results = [r(768, data_gb=1.1458, cap=line), r(1024, data_gb=1.1592, cap=line),
               r(1152, Status.OOM, cap=line),
               r(1024, Status.OOM, purpose=Purpose.CONFIRM, cap=line - 30_000_000)]
    assert _steps(config, results) == []
    rec = choose(results, int(1.3 * GB), 0.1, Objective.MAX_ENVS)
    assert rec.chosen is None and "--start 384" in rec.notice, rec.notice
    assert "peaked above" in rec.notice
    words = search_outcome(results, config.space(), 1, config).reason
    assert "768" in words and "--start" in words, words


def test_a_resumed_run_with_proofs_at_the_line_reads_as_before():
    # Records from before proofs kept room: a proof at the line rules nothing else out, and
    # the step-down after it works as it did.
    line = int(1.3 * GB * 0.9)
    config = sweep_config(load_profile("quick"), int(1.3 * GB), 0.1, 128, 2048, None,
                         objective=Objective.MAX_ENVS)
    results = [r(128, data_gb=1.01, cap=line), r(768, data_gb=1.110, cap=line),
               r(832, data_gb=1.1592, cap=line), r(896, Status.OOM, cap=line),
               r(832, Status.OOM, purpose=Purpose.CONFIRM, cap=line)]
    assert boundary_edge(results, line) == 832
    [step] = _steps(config, results)
    assert (step.phase, step.num_envs) == ("confirming", 768)  # nothing open between
    assert trial_request(config, results, step).cap_bytes < line  # this proof keeps room


def test_the_proof_cap_uses_the_sweep_s_slope_prior_and_holds_repeats_too():
    # the sweep plans with the prior its probe found: the proof's room is the step-down's
    # step, from the same model (the config's space has no prior), but never wider than the
    # room the records alone give, the line short_of_room draws: a size the search let
    # through is never proven under a cap its own trial exceeded
    config = sweep_config(load_profile("quick"), int(1.1 * GB), 0.0, 128, 4096, None,
                         objective=Objective.MAX_ENVS, confirm=False)
    line = int(1.1 * GB)
    results = [r(128, data_gb=1.0342, cap=line), r(416, data_gb=1.0531, cap=line),
               r(480, data_gb=1.0718, cap=line), r(576, Status.OOM, cap=line)]
    prior = dataclasses.replace(config.space(), prior=SlopePrior(0.237 * 2**20))
    [step] = next_steps(config, results, prior)
    # 480 fitted 28 MB under the line, more than its proof keeps (~22 MB): repeat it
    assert (step.phase, step.num_envs) == ("repeating", 480) and "below the" in step.reason
    flat = trial_request(config, results, step).cap_bytes
    held = trial_request(config, results, step, prior).cap_bytes
    # the prior's model would keep ~28 MB here, the records' ~22 MB: the narrower holds
    assert flat < line and held == flat and int(1.0718 * GB) <= held
    assert _room(held, line) in step.reason
    # 1.3 GB (a sweep's records): the prior's model keeps less room than the records' own
    config = sweep_config(load_profile("quick"), int(1.3 * GB), 0.1, 128, 4096, None,
                         objective=Objective.MAX_ENVS, confirm=False)
    line = int(1.3 * GB * 0.9)
    results = [r(128, data_gb=1.0055, cap=line), r(704, data_gb=1.1243, cap=line),
               r(768, data_gb=1.1594, cap=line), r(832, Status.OOM, cap=line)]
    prior = dataclasses.replace(config.space(), prior=SlopePrior(0.237 * 2**20))
    [step] = next_steps(config, results, prior)
    assert (step.phase, step.num_envs) == ("repeating", 704), step
    flat = trial_request(config, results, step).cap_bytes
    held = trial_request(config, results, step, prior).cap_bytes
    assert flat < held < line and _room(held, line) in step.reason


def _room(cap: int, line: int) -> str:
    return format_bytes(line - cap)


def test_a_gpu_proof_runs_at_the_line():
    # a GPU's pool grows in whole regions and does not jitter: no room
    config = sweep_config(load_profile("quick"), 2 * GB, 0.0, 256, 4096, None,
                         objective=Objective.MAX_ENVS)
    gpu = [dataclasses.replace(r(n, cap=2 * GB, data_gb=0.0), backend="gpu",
                               host_peak_data_bytes=None, jax_peak_pool_bytes=pool * 2**20,
                               jax_peak_bytes_in_use=pool * 2**20 - 10 * 2**20)
           for n, pool in ((256, 258), (1024, 526), (1536, 782))]
    gpu.append(dataclasses.replace(r(2048, Status.OOM, cap=2 * GB), backend="gpu"))
    step = confirming_step(config, gpu, 1536)
    assert trial_request(config, gpu, step).cap_bytes == 2 * GB
    assert "below the" not in step.reason
