"""The predictive planner on recorded and simulated sequences: pure, so every branch is cheap."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import pytest

from vramtune.records import Status
from vramtune.tune import model as mm
from vramtune.tune import search as S

MiB = 2 ** 20
GB = 10 ** 9
EVERY = lambda n: True  # noqa: E731


@dataclass
class Truth:
    """A noiseless memory curve (MiB) and the cap a sweep runs under."""

    memory: Callable[[int], float]
    is_valid: Callable[[int], bool]
    start: int
    max_envs: int
    cap_mib: float

    def true_boundary(self, limit_mib: float, sizes) -> int | None:
        fits = [n for n in sizes if self.is_valid(n) and self.memory(n) <= limit_mib]
        return max(fits) if fits else None


def quick_memory(n: float) -> float:
    """quick's measured peaks (781, 820, 957, 1003 MiB at 256, 512, 1024, 1152
    envs), linear between, the end slopes beyond: convex, so an affine model is wrong here."""
    xs, ys = [256, 512, 1024, 1152], [781, 820, 957, 1003]
    if n <= xs[0]:
        return ys[0] + (n - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
    for (x0, y0), (x1, y1) in pairwise(zip(xs, ys, strict=True)):
        if n <= x1:
            return y0 + (n - x0) * (y1 - y0) / (x1 - x0)
    return ys[-1] + (n - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])


def quick_truth(cap_gb: float) -> Truth:
    return Truth(quick_memory, EVERY, 256, 4096, cap_gb * GB / MiB)


def affine_truth(rng: random.Random) -> Truth:
    a, b = rng.uniform(300, 3000), rng.uniform(0.05, 2.0)
    mult = rng.choice([32, 64])
    start = rng.choice([64, 128, 256])
    edge = math.exp(rng.uniform(math.log(2 * start), math.log(16384 / 2)))
    return Truth(lambda n: a + b * n, lambda n: n % mult == 0, start, 16384, a + b * edge)


def grid(lo=256, hi=4096, valid=EVERY, bits=4):
    return tuple(S.round_grid(valid, lo, hi, bits))


def space(limit_mib, lo=256, hi=4096, **kw):
    return S.Space(grid(lo, hi, kw.pop("valid", EVERY)), limit_mib * MiB, lo, **kw)


def ok(n, mib, shape=None):
    return S.Trial(n, Status.OK, mib * MiB, shape)


def oom(n):
    return S.Trial(n, Status.OOM)


def drive(memory_mib, sp: S.Space, k=1, noise=0.0, seed=0, max_rounds=200):
    """Run the planner against a memory function; trials OOM above the cap (default: limit)."""
    rng = random.Random(seed)
    cap = (sp.cap_bytes or sp.limit_bytes) / MiB
    trials: list[S.Trial] = []
    rounds = []
    for _ in range(max_rounds):
        prop = S.propose(trials, sp, k)
        if prop.done:
            return trials, rounds, prop
        measured = {t.num_envs for t in trials}
        assert 1 <= len(prop.sizes) <= k
        assert len(set(prop.sizes)) == len(prop.sizes)
        assert not set(prop.sizes) & measured, "re-proposed a measured size"
        assert set(prop.sizes) <= set(sp.candidates)
        rounds.append(prop.sizes)
        for n in prop.sizes:
            peak = memory_mib(n) * (1 + rng.uniform(-noise, noise))
            trials.append(oom(n) if peak > cap else ok(n, peak))
    raise AssertionError("did not terminate")


# ----------------------------------------------------------------------------- grid

def resolved(prop: S.Proposal, truth: int | None) -> bool:
    """The search's answer on a noiseless truth: the grid boundary itself, or a bracket that
    holds it and is no wider than one refinement step (finer, noise would decide)."""
    if prop.fits == truth:
        return True
    step = (S.refinement_step(prop.model, S.RESOLVE_SD, prop.model.interval(prop.fits))
            if prop.model is not None and prop.fits is not None else None)
    return ("within one run's jitter" in prop.reason and step is not None
            and truth is not None and prop.fits <= truth < prop.fails
            and prop.fails - prop.fits <= step[1])


def test_round_grid_four_significant_bits():
    g = grid(1024, 2048)
    assert g == (1024, 1152, 1280, 1408, 1536, 1664, 1792, 1920, 2048)
    assert grid(200, 300) == (200, 208, 224, 240, 256, 288, 300)  # start and max included
    assert all(n % 64 == 0 for n in grid(256, 8192, lambda n: n % 64 == 0))


def test_bootstrap_ladders():
    sp = space(1144)
    assert S.propose([], sp, 1).sizes == (256,)
    assert S.bootstrap_sizes(sp, 1) == [256, 1024]  # start, then x4: a longer lever for the slope
    assert S.propose([], sp, 2).sizes == (256, 1024)
    assert S.propose([], sp, 4).sizes == (256, 512, 1024, 2048)  # k > 2: doubling, all at once
    # the ladder ends at the maximum after 5 sizes: 3 more at the widest gaps (log scale)
    assert S.propose([], sp, 8).sizes == (256, 512, 704, 1024, 1408, 2048, 2816, 4096)
    assert S.propose([ok(256, 781)], sp, 1).sizes == (1024,)


# ----------------------------------------------------------------------------- exact truths

def test_exact_affine_truth_brackets_on_the_grid_in_few_trials():
    f = lambda n: 700 + 0.25 * n  # noqa: E731
    sp = space(f(1500))  # edge between 1408 and 1536
    trials, rounds, prop = drive(f, sp)
    assert prop.fits == 1408 and prop.fails == 1536
    assert "boundary found" in prop.reason
    # 256, 1024, the cautious jump (P(fits) >= 0.8), the median edge, the failure above it
    assert len(trials) <= 5
    assert [t.num_envs for t in trials[:2]] == [256, 1024]


def test_exact_random_affine_truths_end_on_the_grid_boundary_or_within_one_step_of_it():
    rng = random.Random(7)
    for _ in range(150):
        t = affine_truth(rng)
        g = tuple(S.round_grid(t.is_valid, t.start, t.max_envs, 4))
        sp = S.Space(g, t.cap_mib * MiB, t.start, resolve_sd=S.RESOLVE_SD)
        for k in (1, 2, 4, 8):
            trials, rounds, prop = drive(t.memory, sp, k)
            truth = t.true_boundary(t.cap_mib, g)
            assert resolved(prop, truth), (k, truth, prop.reason)
            assert len(rounds) <= len(g)


def test_quick_truth_at_1_2_gb_without_noise():
    t = quick_truth(1.2)
    sp = S.Space(grid(256, 4096), t.cap_mib * MiB, 256)
    trials, rounds, prop = drive(t.memory, sp, 1)
    assert (prop.fits, prop.fails) == (1536, 1664)
    assert len(trials) <= 5  # today: 8 (256, 512, 1024, 2048, 1536, 1792, 1664, ...)
    cautious = S.Space(grid(256, 4096), t.cap_mib * MiB, 256, aim_open=0.95)
    trials, rounds, prop = drive(t.memory, cautious, 1)
    assert [x.num_envs for x in trials] == [256, 1024, 1536, 1664]  # the upper-bound jump


def test_predicted_figures_are_only_for_proposed_sizes():
    sp = space(1144)
    prop = S.propose([ok(256, 781), ok(1024, 957)], sp, 1)
    assert prop.phase == "predict" and set(prop.predicted) == set(prop.sizes)
    mean, upper = prop.predicted[prop.sizes[0]]
    assert mean <= upper


# ----------------------------------------------------------------------------- fallback

def test_oom_where_the_model_was_sure_falls_back_to_bisection():
    sp = space(1144)
    trials = [ok(256, 781), ok(1024, 957), oom(1408)]  # the model says 1408 fits easily
    prop = S.propose(trials, sp, 1)
    assert prop.phase == "bisect" and prop.missed
    assert "model missed" in prop.reason
    assert prop.sizes == (1152,) or prop.sizes == (1280,)


def test_peak_outside_the_interval_falls_back():
    sp = space(1144, hi=8192)
    # the third size peaks 30 % above the line through the first two: the model is wrong
    trials = [ok(256, 781), ok(1024, 957), ok(1536, 1074 * 1.3), oom(4096)]
    prop = S.propose(trials, sp, 1)
    assert prop.missed and prop.missed[0].num_envs in (256, 1024, 1536)
    assert prop.phase in ("bisect", "double")


def test_convex_truth_still_ends_on_the_right_bracket():
    """quick's measured curve is convex (0.15 -> 0.36 MiB/env): the affine model overshoots,
    misses, and the planner falls back, but it still brackets the boundary."""
    for cap in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0):
        t = quick_truth(cap)
        g = grid(256, 4096)
        sp = S.Space(g, t.cap_mib * MiB, 256)
        for k in (1, 2, 4, 8):
            trials, rounds, prop = drive(t.memory, sp, k)
            assert prop.fits == t.true_boundary(t.cap_mib, g), (cap, k)


def test_model_off_is_plain_kary_bisection():
    sp = space(1144, use_model=False)
    trials = [ok(256, 781), ok(1024, 957), oom(2048)]
    assert S.propose(trials, sp, 1).sizes == (1536,)  # the bisect rule: roundest mid-half
    assert S.propose(trials, sp, 3).sizes == (1280, 1536, 1792)
    assert S.propose([ok(256, 781), ok(1024, 957)], sp, 1).sizes == (2048,)  # doubling


# ----------------------------------------------------------------------------- stopping rules

def test_start_fails():
    prop = S.propose([oom(256)], space(700), 1)
    assert prop.done and "does not fit even at 256" in prop.reason


def test_error_stops():
    prop = S.propose([ok(256, 781), S.Trial(1024, Status.ERROR)], space(1144), 1)
    assert prop.done and "not a memory limit" in prop.reason


def test_nothing_fails_up_to_the_maximum():
    trials, rounds, prop = drive(lambda n: 500 + 0.01 * n, space(2000, hi=2048))
    assert prop.done and "no failure up to the largest candidate 2048" in prop.reason
    assert prop.fits == 2048


def test_refine_budget_counts_trials_after_the_bootstrap():
    f = lambda n: 700 + 0.25 * n  # noqa: E731
    sp = space(f(1500), refine=1)
    trials, rounds, prop = drive(f, sp)
    assert len(trials) == 3 and "refine budget spent" in prop.reason
    assert prop.fits is not None


def test_ok_over_the_limit_is_a_failure_and_is_fitted():
    sp = space(1000)
    trials = [ok(256, 781), ok(1024, 957), ok(1536, 1074)]  # 1536 ran, but above the limit
    prop = S.propose(trials, sp, 1)
    assert prop.fails == 1536 and prop.fits == 1024
    assert prop.model is not None and 1536 in prop.model.sizes


def test_timeout_is_a_boundary_failure():
    prop = S.propose([ok(256, 781), S.Trial(1024, Status.TIMEOUT)], space(1144), 1)
    assert prop.fails == 1024 and all(256 < n < 1024 for n in prop.sizes)


def test_order_of_results_does_not_matter():
    sp = space(1144)
    trials = [ok(256, 781), ok(1024, 957), oom(1792), ok(1280, 1049)]
    want = S.propose(trials, sp, 2)
    for seed in range(5):
        shuffled = trials[:]
        random.Random(seed).shuffle(shuffled)
        assert S.propose(shuffled, sp, 2).sizes == want.sizes


# ----------------------------------------------------------------------------- termination

@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("with_prior", [False, True])
def test_terminates_and_never_reproposes_under_arbitrary_outcomes(k, with_prior):
    """Adversarial: every trial's status and peak at random, not even monotone; with a slope
    prior of any size too."""
    rng = random.Random(k + 100 * with_prior)
    for _ in range(60):
        g = grid(rng.choice([64, 128, 256]), rng.choice([2048, 4096, 16384]))
        sp = S.Space(g, rng.uniform(500, 3000) * MiB, g[0],
                     prior=prior(rng.uniform(0.001, 5.0)) if with_prior else None)
        trials: list[S.Trial] = []
        for _ in range(len(g) + 1):
            prop = S.propose(trials, sp, k)
            if prop.done:
                break
            assert 1 <= len(prop.sizes) <= k
            assert not set(prop.sizes) & {t.num_envs for t in trials}
            for n in prop.sizes:
                trials.append(rng.choice([ok(n, rng.uniform(200, 4000)), oom(n),
                                          S.Trial(n, Status.CRASH)]))
        else:
            raise AssertionError("did not terminate within len(candidates) rounds")


@pytest.mark.parametrize("k", [2, 4, 8])
def test_batch_has_k_distinct_open_sizes_while_enough_remain(k):
    f = lambda n: 700 + 0.25 * n  # noqa: E731
    sp = space(f(3000), hi=16384)
    trials, rounds, prop = drive(f, sp, k)
    for r in rounds[:-1]:
        assert len(r) == k
    assert prop.fits == sp.candidates[max(i for i, n in enumerate(sp.candidates) if f(n) <= f(3000))]


def test_noisy_sweeps_terminate_and_bracket_within_a_grid_step_mostly():
    rng = random.Random(3)
    close = total = 0
    for _ in range(80):
        t = affine_truth(rng)
        g = tuple(S.round_grid(t.is_valid, t.start, t.max_envs, 4))
        sp = S.Space(g, t.cap_mib * MiB, t.start)
        trials, rounds, prop = drive(t.memory, sp, rng.choice([1, 2, 4]), noise=0.02,
                                     seed=rng.randrange(1000))
        truth = t.true_boundary(t.cap_mib, g)
        i, j = g.index(prop.fits), g.index(truth)
        close += abs(i - j) <= 1
        total += 1
    assert close / total >= 0.85


def test_a_size_that_failed_only_its_proof_run_is_bisected_below_not_predicted():
    # the model is fitted to search trials, which 1024 passed: after its confirmation
    # failed, the edge of the longer run lies somewhere below, and bisection looks for it
    sp = space(1144)
    trials = [ok(256, 781), ok(1024, 957), oom(1152), S.Trial(1024, Status.OOM, proof=True)]
    prop = S.propose(trials, sp, 1)
    assert prop.phase == "bisect" and (prop.fits, prop.fails) == (256, 1024)
    assert prop.sizes == (512,) and "failed a longer run" in prop.reason
    assert S.propose(trials, sp, 2).sizes == (512, 768)  # k-ary between, too
    # a size that failed its search trial too is the search's own failure: model as before
    both = [ok(256, 781), ok(512, 820), oom(1024), S.Trial(1024, Status.OOM, proof=True)]
    assert "failed a longer run" not in S.propose(both, sp, 1).reason


# ----------------------------------------------------------------------------- slope prior

def prior(mib_per_env, rel_sd=0.15):
    from vramtune.tune.model import SlopePrior

    return SlopePrior(mib_per_env * MiB, rel_sd)


def test_a_prior_bootstraps_from_one_size_and_aims_at_once():
    f = lambda n: 700 + 0.25 * n  # noqa: E731
    sp = space(f(1500), prior=prior(0.25))  # edge between 1408 and 1536
    assert S.bootstrap_sizes(sp, 1) == [256] and S.bootstrap_sizes(sp, 2) == [256, 1024]
    prop = S.propose([ok(256, f(256))], sp, 1)
    assert prop.phase == "predict" and prop.sizes[0] > 1024 and prop.predicted
    trials, rounds, prop = drive(f, sp)
    assert (prop.fits, prop.fails) == (1408, 1536)
    assert len(trials) <= 4  # 256, the jump, at most one correction, the proof


def test_a_wrong_prior_still_brackets_exact_truths():
    rng = random.Random(11)
    for _ in range(120):
        t = affine_truth(rng)
        g = tuple(S.round_grid(t.is_valid, t.start, t.max_envs, 4))
        b = (t.memory(2) - t.memory(1)) * rng.choice([0.3, 0.7, 1.0, 1.5, 3.0])
        sp = S.Space(g, t.cap_mib * MiB, t.start, prior=prior(b), resolve_sd=S.RESOLVE_SD)
        for k in (1, 2):
            trials, rounds, prop = drive(t.memory, sp, k)
            assert resolved(prop, t.true_boundary(t.cap_mib, g)), (k, prop.reason)


def test_an_oom_the_model_did_not_expect_shifts_the_line_up_and_aims_below():
    sp = space(1144, prior=prior(0.25))
    # the prior line through 256 puts the edge near 1700; 1408 ran out of memory
    prop = S.propose([ok(256, 781), oom(1408)], sp, 1)
    assert prop.phase == "predict" and "the line raised so that 1408 envs" in prop.reason
    assert 1024 <= prop.sizes[0] < 1408  # just below it, not bisecting from 256


def test_fits_one_above_the_other_gallop_up_the_grid_not_double():
    # the model keeps placing the edge one candidate above the top fit, and it keeps fitting
    sp = space(1144, prior=prior(0.25))
    trials = [ok(256, 781), ok(1024, 975), ok(1152, 1000), ok(1280, 1030)]
    prop = S.propose(trials, sp, 1)
    assert prop.phase == "double" and "galloping" in prop.reason
    assert prop.sizes == (1408,)  # the next candidate, not 2560


def test_a_timeout_is_no_evidence_of_memory_the_line_is_not_raised():
    sp = space(1144, prior=prior(0.25))
    prop = S.propose([ok(256, 781), S.Trial(1408, Status.TIMEOUT)], sp, 1)
    assert "raised" not in prop.reason and prop.phase == "bisect"


def test_many_fits_crawling_up_the_top_octave_double_instead():
    sp = space(1144, prior=prior(0.25))
    # five fits in [1408, 2816], nothing failed: the gallop's short steps are not enough
    trials = [ok(256, 781), ok(1408, 900), ok(1536, 905), ok(1792, 910), ok(2048, 915),
              ok(2560, 920)]
    prop = S.propose(trials, sp, 1)
    assert prop.phase == "double" and "doubling" in prop.reason and prop.sizes == (4096,)


# ------------------------------------------------------------------ the refinement step (noise)

def test_a_bracket_narrower_than_one_runs_jitter_is_not_refined():
    # quick under 1.2 GB: ~0.23 MiB per env near 1000 MiB, whose 1.5 % jitter prior is 15 MiB
    # sd: one run cannot tell sizes ~100 envs apart (1.5 sd), so 320 fits / 384 fails is the
    # answer, where the grid would have bought 352 (a coin toss near the line)
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    sp = space(f(350), lo=64, hi=2048, resolve_sd=S.RESOLVE_SD)
    trials = [ok(64, f(64)), ok(320, f(320)), oom(384)]
    prop = S.propose(trials, sp, 1)
    assert prop.done and (prop.fits, prop.fails) == (320, 384), prop.reason
    step_bytes, step_envs, slope = S.refinement_step(prop.model, S.RESOLVE_SD,
                                                     prop.model.interval(320))
    assert 75 < step_envs < 120 and slope == pytest.approx(0.23 * MiB, rel=0.01)
    assert "refinement step" in prop.reason and f"{step_bytes / MiB:.0f} MiB" in prop.reason
    # a bracket wider than the step is refined as before
    wide = S.propose([ok(64, f(64)), ok(320, f(320)), oom(512)],
                     space(f(350), 64, 2048, resolve_sd=S.RESOLVE_SD), 1)
    assert not wide.done and 320 < wide.sizes[0] < 512


def test_one_worker_takes_the_largest_size_within_one_refinement_step_of_a_fit():
    # 896 fits and the model's edge lies a notch above it: a trial at 960 would be a coin
    # toss against 896's own jitter. The search takes the largest candidate within one
    # refinement step instead (out of memory there, the bracket is closed; a fit moves lo
    # as far as one trial can). A workload of ~2 GB: its step spans two candidates.
    f = lambda n: 1800 + 0.23 * n  # noqa: E731
    prior = mm.SlopePrior(0.23 * MiB)
    trials = [ok(128, f(128)), ok(896, f(896))]
    stepped = worded = jittered = 0
    for limit in range(int(f(960)), int(f(1600)), 4):
        sp = space(limit, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
        prop = S.propose(trials, sp, 1)
        if prop.done or prop.fits != 896:
            continue
        step = S.refinement_step(prop.model, S.RESOLVE_SD, prop.model.interval(896))[1]
        n = prop.sizes[0]
        above = [c for c in sp.candidates if c > n]
        assert n - 896 >= step or (above and above[0] > 896 + step), (limit, n, step)
        stepped += n - 896 < step
        if "one refinement step up" in prop.reason:
            assert (f"{n} envs, the largest size within a step of 896 (896 fits, nothing "
                    f"failed yet)") in prop.reason
            worded += 1
        if n - 896 < step:  # within a step: its failure ends the search at the resolution
            done = S.propose(trials + [oom(n)], sp, 1)
            between = [c for c in sp.candidates if 896 < c < n]
            words = "within one run's jitter" if between else "no candidate between"
            assert done.done and words in done.reason, done.reason
            jittered += bool(between)
    assert stepped and worded and jittered


def test_the_step_widens_with_the_jitter_the_sweep_measured():
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    calm = S.refinement_step(mm.fit([(256, f(256) * MiB), (512, f(512) * MiB),
                                       (768, f(768) * MiB)]))
    noisy = S.refinement_step(mm.fit([(256, (f(256) + 40) * MiB), (512, (f(512) - 40) * MiB),
                                        (768, (f(768) + 40) * MiB)]))
    assert noisy[0] > calm[0] and noisy[1] > calm[1]


def test_no_step_on_a_pool_of_allocator_regions():
    # a GPU pool fits its level or needs the next one, the same every run: bisect to the grid
    sp = S.Space(grid(128, 2048), 844 * MiB, 128, region_bytes=256 * MiB,
                 resolve_sd=S.RESOLVE_SD)
    prop = S.propose([ok(128, 258), ok(1024, 526), ok(1536, 782), oom(2048)], sp, 1)
    assert not prop.done and "jitter" not in prop.reason
    # nor without a step asked for (the planner asks none for a GPU's figures)
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    plain = S.propose([ok(64, f(64)), ok(320, f(320)), oom(416)], space(f(380), 64, 2048), 1)
    assert not plain.done and 320 < plain.sizes[0] < 416


def test_a_step_down_starts_one_refinement_step_below_the_failed_proof():
    # 1.45 GB, predictive: 128 fitted, 1792 fitted its search trial and failed its confirming
    # run. Bisection took 1024, then 1536, then 1664; the long run's edge is within one run's
    # jitter of 1792, so the first size is the largest one step below it.
    f = lambda n: 900 + 0.2 * n  # noqa: E731
    sp = space(f(1800), 128, 4096, resolve_sd=S.RESOLVE_SD)
    trials = [ok(128, f(128)), oom(2048), ok(1792, f(1792)), oom(1920),
              S.Trial(1792, Status.OOM, proof=True)]
    open_ = [n for n in sp.candidates if 128 < n < 1792]
    model = mm.fit([(128, f(128) * MiB), (1792, f(1792) * MiB)])
    _, step_envs, _ = S.refinement_step(model, at=model.interval(1792))
    n = S.step_down_pick(trials, sp, open_, 128, 1792)
    assert n == max(c for c in open_ if c <= 1792 - step_envs) and n > 1024
    # from a fit within one step of the failure, no size a run could tell apart: prove it
    assert S.step_down_pick(trials, sp, [c for c in open_ if c > n], n, 1792) is None
    # a trial far under the cap that failed its long run: the long run grows (a leak, a late
    # phase), not a jitter: bisection
    roomy = space(f(1792) + 200, 128, 4096, resolve_sd=S.RESOLVE_SD)
    assert S.step_down_pick(trials, roomy, open_, 128, 1792) == S.bisect_pick(open_, 128, 1792)
    # peaks that do not jitter (a GPU's figures): bisection, as before
    plain = space(f(1800), 128, 4096)
    assert S.step_down_pick(trials, plain, open_, 128, 1792) == S.bisect_pick(open_, 128, 1792)


def test_a_proof_is_held_one_refinement_step_below_the_limit_where_peaks_jitter():
    # One draw that passes just under the line says little of a second: a proof keeps room
    # for it, one refinement step (calibrated on users' runs, bench_edge.py).
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    sp = space(1116, 128, 4096, resolve_sd=S.RESOLVE_SD)
    trials = [ok(128, f(128)), ok(832, f(832)), oom(960)]
    room = S.proof_room_bytes(trials, sp, 832)
    model = mm.fit([(128, f(128) * MiB), (832, f(832) * MiB)])
    step, _, _ = S.refinement_step(model, S.RESOLVE_SD, model.interval(832))
    assert room == pytest.approx(step)
    # about 1.5 % of the size's peak per sd: 15-18 MiB a sd here
    sd = S.RESOLVE_SD
    assert sd * 0.015 * f(832) * MiB <= room <= sd * 0.02 * f(832) * MiB
    # failed proofs do not move it: it is the search trials' jitter
    assert S.proof_room_bytes([*trials, S.Trial(832, Status.OOM, proof=True)], sp, 832) == room
    # one size measured: the prior jitter of its own peak
    assert S.proof_room_bytes([ok(832, f(832))], sp, 832) == pytest.approx(
        S.RESOLVE_SD * mm.FLOOR_SD * f(832) * MiB)
    assert S.proof_room_bytes([oom(832)], sp, 832) is None  # nothing says how much
    # a GPU's pool, or figures that do not jitter: the proof runs at the limit
    pool_space = S.Space(grid(128, 2048), 844 * MiB, 128, region_bytes=256 * MiB,
                         resolve_sd=S.RESOLVE_SD)
    assert S.proof_room_bytes(trials, pool_space, 832) is None
    assert S.proof_room_bytes(trials, space(1116, 128, 4096), 832) is None


def test_a_size_that_fits_with_less_room_than_its_proof_keeps_is_short_of_room():
    # 1.3 GB (line 1,170 MB): 832 fitted 21 MB under it, 640 about 65 MB. The search keeps
    # the room a proof keeps (1.5 sd of one run's peak, ~1.5 x 1.5 %, 22-25 MiB):
    # 832 is short of room, 640 is not.
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    limit = f(832) + 20
    sp = space(limit, 128, 4096, resolve_sd=S.RESOLVE_SD)
    trials = [ok(128, f(128)), ok(640, f(640)), ok(832, f(832)), oom(960)]
    short = S.short_of_room(trials, sp)
    assert set(short) == {832}
    # its line: the limit less the room its proof would keep
    room = S.proof_room_bytes(trials, sp, 832)
    assert short[832] == pytest.approx(limit * MiB - room, rel=0.01)
    # the search brackets the edge against it: 640 fits, 832 fails
    marked = [S.Trial(t.num_envs, t.status, t.peak_bytes, over_limit=t.num_envs in short)
              for t in trials]
    p = S.propose(marked, sp)
    assert p.fits == 640 and p.fails == 832, p
    # a GPU's pool and figures that do not jitter: no room asked for
    assert S.short_of_room(trials, space(limit, 128, 4096)) == {}
    assert S.aim_room_bytes(trials, space(limit, 128, 4096)) == 0.0


def test_a_jittery_start_near_the_line_is_left_to_its_proof():
    # Shaped on a noisy machine's record at 1.1 GB: 128, 288 and 224 envs peaked at 1,030,
    # 1,057.3 and 967.3 MB under a 1,060 MB line. Their jitter puts 1.5 sd at ~48 MB; 288 is
    # short of room, and so would 128 be (30 MB under), leaving nothing to prove. The
    # smallest fit is never short.
    mb = 1e6 / MiB
    sp = space(1060 * mb, 128, 4096, resolve_sd=S.RESOLVE_SD)
    trials = [ok(128, 1030 * mb), ok(288, 1057.3 * mb), ok(224, 967.3 * mb)]
    assert 30e6 < S.proof_room_bytes(trials, sp, 128)  # 128 left less than a proof keeps
    short = S.short_of_room(trials, sp)
    assert set(short) == {288} and 1060e6 - short[288] > 40e6


def test_the_search_aims_at_the_line_a_proof_keeps_not_at_the_limit():
    # One size and the slope prior: the first jump aims under the proof's line, ~1.5 x 1.5 %
    # of the limit below it, so that the largest fit is one whose proof passes.
    f = lambda n: 900 + 0.23 * n  # noqa: E731
    prior = mm.SlopePrior(0.23 * MiB)
    limit = f(1024)
    jitter = space(limit, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
    plain = space(limit, 128, 4096, prior=prior)
    trials = [ok(128, f(128))]
    room = S.aim_room_bytes(trials, jitter)
    assert S.RESOLVE_SD * 0.015 * limit * MiB <= room <= S.RESOLVE_SD * 0.03 * limit * MiB
    aimed, at_limit = S.propose(trials, jitter), S.propose(trials, plain)
    assert aimed.sizes and at_limit.sizes and aimed.sizes[0] < at_limit.sizes[0]
    # a size aimed at has a predicted peak under the line less the room, at the aim's odds
    mean, _ = aimed.predicted[aimed.sizes[0]]
    assert mean < limit * MiB


def test_a_step_down_counts_a_failed_proof_s_room_as_part_of_its_trial_s_margin():
    # The proof ran `room` below the limit: a search trial within one step of the proof's
    # cap is a jitter below it (one step down), not a long run that grows (bisection).
    f = lambda n: 900 + 0.2 * n  # noqa: E731
    model = mm.fit([(128, f(128) * MiB), (1792, f(1792) * MiB)])
    step_bytes, step_envs, _ = S.refinement_step(model, S.RESOLVE_SD, model.interval(1792))
    limit = f(1792) + 1.5 * step_bytes / MiB  # the trial sat 1.5 steps under the limit
    sp = space(limit, 128, 4096, resolve_sd=S.RESOLVE_SD)
    open_ = [n for n in sp.candidates if 128 < n < 1792]
    at_limit = [ok(128, f(128)), ok(1792, f(1792)), oom(1920),
                S.Trial(1792, Status.OOM, proof=True)]
    assert S.step_down_pick(at_limit, sp, open_, 128, 1792) == S.bisect_pick(open_, 128, 1792)
    held = [*at_limit[:3], S.Trial(1792, Status.OOM, proof=True, room_bytes=step_bytes)]
    n = S.step_down_pick(held, sp, open_, 128, 1792)
    assert n == max(c for c in open_ if c <= 1792 - step_envs)


def test_a_step_down_sizes_its_step_with_the_slope_prior_over_a_narrow_span():
    # bench_search at 1.1 GB: 128, 416 and 480 peaked at 1,034, 1,053 and 1,072 MB (a slope
    # of ~0.1 MB/env through jitter, where the probe says 0.237 MiB/env). 480 and 416 failed
    # their proofs; the flat fit made the step 313 envs (at 2 sd) and the step-down proved 128.
    mb = 1e6 / MiB
    trials = [ok(128, 1034.2 * mb), ok(416, 1053.1 * mb), ok(480, 1071.8 * mb), oom(576),
              S.Trial(480, Status.OOM, proof=True, room_bytes=29.8e6),
              S.Trial(416, Status.OOM, proof=True, room_bytes=29.6e6)]
    prior = mm.SlopePrior(0.237 * MiB)
    sp = space(1100 * mb, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
    open_ = [n for n in sp.candidates if 128 < n < 416 and n not in (128, 416)]
    n = S.step_down_pick(trials, sp, open_, 128, 416)
    assert n is not None and 192 <= n <= 288
    flat = space(1100 * mb, 128, 4096, resolve_sd=S.RESOLVE_SD)
    # the flat fit: a step far longer (~236 envs), to the largest candidate below it
    low = S.step_down_pick(trials, flat, open_, 128, 416)
    assert low is not None and low < 192 <= n


def short(n, mib):
    return S.Trial(n, Status.OK, mib * MiB, over_limit=True, past_why="short of room")


def test_bisection_after_a_miss_stops_within_one_run_s_jitter_too():
    # Recorded at 1.1 GB (cap = budget): 128, 256 and 512 envs peaked at 978, 932 and
    # 1,044 MiB, within one run's jitter of each other. 256's low draw read as a miss, and
    # bisection went on to 384, 320 and 288 on the 32-env grid, each a coin flip of noise.
    # The step, 55 MiB, is 234 envs along the probe's slope: 384 is still worth a trial,
    # 320 and 288 are not.
    prior = mm.SlopePrior(0.237 * MiB)
    sp = space(1.1 * GB / MiB, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
    trials = [ok(128, 978.0), ok(256, 932.0), short(512, 1044.0)]
    assert S.propose(trials, sp).sizes == (384,)
    prop = S.propose([*trials, short(384, 1024.0)], sp)
    assert prop.done and (prop.fits, prop.fails) == (256, 384)
    assert "within one run's jitter" in prop.reason


def test_bisection_after_a_miss_goes_on_while_the_bracket_is_wider_than_a_step():
    # An untrusted (vague) model with a step the bracket exceeds: bisection goes on.
    prior = mm.SlopePrior(0.237 * MiB)
    sp = space(1.1 * GB / MiB, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
    trials = [ok(128, 900.0), ok(256, 870.0), ok(384, 960.0), oom(1024)]
    judge = S._jitter_model(trials, sp)
    step = S.refinement_step(judge, S.RESOLVE_SD, judge.interval(384))
    assert step is not None and 1024 - 384 > step[1]
    prop = S.propose(trials, sp)
    assert not prop.done and all(384 < n < 1024 for n in prop.sizes)
    # and without a resolution (a GPU's figures), bisection refines to the grid, as before
    grid_only = space(1.1 * GB / MiB, 128, 4096, prior=prior)
    assert not S.propose([ok(128, 978.0), ok(256, 932.0), short(512, 1044.0)], grid_only).done


def test_a_flat_fit_after_a_miss_does_not_stop_the_search_short_of_room():
    # No prior, three peaks within 12 MiB over 128-512 envs: a slope of ~0.03 MiB/env whose
    # lower bound is below 0 would make a step of ~900 envs and stop at 512 / 1024, where
    # 768 has ~60 MiB of room. A fit that cannot tell growth from jitter sizes no step.
    sp = space(1.1 * GB / MiB, 128, 4096, resolve_sd=S.RESOLVE_SD)
    prop = S.propose([ok(128, 978.0), ok(256, 985.0), ok(512, 990.0), oom(1024)], sp)
    assert not prop.done and all(512 < n < 1024 for n in prop.sizes)


def test_after_a_miss_the_step_in_envs_follows_the_prior_where_it_is_steeper():
    # A shallow but positive fit (0.1 MiB/env) would make the step 2.4x as many envs as
    # the probe's slope does: the step is taken along the steeper of the two.
    prior = mm.SlopePrior(0.237 * MiB)
    sp = space(1.1 * GB / MiB, 128, 4096, resolve_sd=S.RESOLVE_SD, prior=prior)
    trials = [ok(128, 978.0), ok(256, 932.0), short(512, 1044.0)]
    judge = S._jitter_model(trials, sp)
    step = S._jitter_stop_step(judge, sp, 256, fallback=True)
    assert step is not None and step[2] >= prior.bytes_per_env
    assert step[1] == pytest.approx(step[0] / step[2])
