"""The memory model: exact on affine data, honest on noisy data, and it says when it missed."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vramtune.tune import model as mm

MiB = 2 ** 20


def predict(m: mm.Model, num_envs: float, shape=None) -> tuple[float, float]:
    """(mean, upper) bytes: the expected peak and the bound a new trial stays under."""
    p = m.interval(num_envs, shape)
    return p.mean_bytes, p.upper_bytes


def affine(a_mib: float, b_mib: float):
    return lambda n: (a_mib + b_mib * n) * MiB


# ----------------------------------------------------------------------------- t quantiles

@pytest.mark.parametrize("p, dof, want", [(0.975, 1, 12.7062), (0.95, 4, 2.1318),
                                          (0.99, 10, 2.7638), (0.95, 30, 1.6973),
                                          (0.95, float("inf"), 1.6449)])
def test_t_quantile_matches_tables(p, dof, want):
    assert mm.t_quantile(p, dof) == pytest.approx(want, abs=2e-4)
    assert mm.t_cdf(mm.t_quantile(p, dof), dof) == pytest.approx(p, abs=1e-9)


# ----------------------------------------------------------------------------- exact fits

def test_two_points_give_the_line_exactly():
    f = affine(700, 0.25)
    m = mm.fit([(256, f(256)), (512, f(512))])
    assert m.kind == "affine"
    assert m.coef[0] == pytest.approx(700 * MiB) and m.coef[1] == pytest.approx(0.25 * MiB)
    mean, upper = predict(m, 1152)
    assert mean == pytest.approx(f(1152))
    assert upper > mean


def test_many_points_exact_and_tuple_forms():
    f = affine(1200, 1.5)
    sizes = [64, 128, 256, 512, 1024]
    m = mm.fit([(n, 128, 4, 10, f(n)) for n in sizes])  # hold-env-steps: rollout constant
    assert m.kind == "affine" and m.max_abs_residual_bytes < 1e-3 * MiB
    assert predict(m, 3000, (128, 4, 10))[0] == pytest.approx(f(3000))
    assert m.residual_dof == 3


def test_rollout_term_recovered_when_not_collinear():
    # hold-minibatch rounding: unrolls per step 1 or 2 on round sizes, so rollout is not a x n
    shapes = {1024: (256, 4, 20), 1152: (256, 9, 20), 1280: (256, 5, 20), 1536: (256, 6, 20),
              1792: (256, 7, 20), 2304: (256, 9, 20)}
    a, b, c = 900.0, 0.3, 0.004

    def peak(n):
        bs, nmb, u = shapes[n]
        return (a + b * n + c * bs * nmb * u) * MiB

    m = mm.fit([mm.Point(n, peak(n), *shapes[n]) for n in shapes])
    assert m.kind == "rollout"
    assert m.coef == pytest.approx((a * MiB, b * MiB, c * MiB), rel=1e-6)
    assert predict(m, 2048, (256, 8, 20))[0] == pytest.approx((a + b * 2048 + c * 256 * 8 * 20) * MiB)
    with pytest.raises(ValueError):
        predict(m, 2048)  # the rollout model needs the batch shape


def test_collinear_rollout_collapses_and_bounds_an_off_line_size():
    # hold-num-minibatches (quick): rollout = 4 x 10 x n on every measured size
    f = affine(700, 0.3)
    m = mm.fit([mm.Point(n, f(n), n, 4, 10) for n in (256, 512, 1024, 1536)])
    assert m.kind == "affine"
    assert m.rollout_line == pytest.approx((0.0, 40.0), abs=1e-6)
    on_line = m.interval(2048, (2048, 4, 10))
    off_line = m.interval(2048, (2048, 8, 10))  # twice the rollout of the measured policy
    assert on_line.mean_bytes == pytest.approx(f(2048))
    # the share of the slope the rollout carries is unknown: anything from none to all of it
    assert off_line.upper_bytes >= f(4096) - 1
    assert off_line.lower_bytes <= on_line.lower_bytes + 1
    assert off_line.upper_bytes - off_line.lower_bytes > on_line.upper_bytes - on_line.lower_bytes


def test_fewer_than_two_sizes_gives_no_model():
    assert mm.fit([]) is None
    assert mm.fit([(256, 800 * MiB)]) is None
    assert mm.fit([(256, 800 * MiB), (256, 810 * MiB)]) is None  # repeats, one size


# ----------------------------------------------------------------------------- uncertainty

def test_documented_floor_with_two_points():
    f = affine(781, 0.152)
    m = mm.fit([(256, f(256)), (512, f(512))])
    mean, upper = predict(m, 384)  # between the points, least leverage
    margin = (upper - mean) / mean
    assert 0.025 < margin < 0.04  # t_4(0.95) x 1.5 % = 3.2 % (x sqrt(1 + h))
    # it widens with the distance extrapolated
    far = predict(m, 1152)
    assert (far[1] - far[0]) > 3 * (upper - mean)


def test_repeats_and_residuals_widen_the_interval():
    f = affine(1000, 0.5)
    clean = mm.fit([(n, f(n)) for n in (256, 512, 1024, 2048)])
    noisy = mm.fit([(n, f(n) * (1 + e)) for n, e in
                    ((256, 0.05), (512, -0.05), (1024, 0.05), (2048, -0.05))])
    assert noisy.sigma_bytes > clean.sigma_bytes
    (noisy_mean, noisy_upper), (clean_mean, clean_upper) = predict(noisy, 3000), predict(clean, 3000)
    assert noisy_upper - noisy_mean > clean_upper - clean_mean


@pytest.mark.parametrize("what", ["true value", "new trial"])
def test_upper_bound_is_honest_on_noisy_affine_data(what):
    """Peaks jitter up to +-4 % (uniform); 2-5 trials at random sizes; predict up to 4x beyond
    the largest. The upper bound covers the truth (and a fresh noisy trial) >= 90 % of the time."""
    rng = random.Random(1234)
    covered = total = 0
    for _ in range(600):
        a, b = rng.uniform(300, 3000), rng.uniform(0.05, 2.0)
        jitter = rng.uniform(0.0, 0.04)
        start = rng.choice([64, 128, 256])
        sizes = sorted(rng.sample([start * 2 ** i for i in range(5)], rng.randint(2, 5)))
        pts = [(n, (a + b * n) * (1 + rng.uniform(-jitter, jitter)) * MiB) for n in sizes]
        m = mm.fit(pts)
        target = int(sizes[-1] * rng.uniform(1.0, 4.0))
        truth = (a + b * target) * MiB
        if what == "new trial":
            truth *= 1 + rng.uniform(-jitter, jitter)
        covered += predict(m, target)[1] >= truth
        total += 1
    assert covered / total >= 0.90, covered / total


def test_lower_bound_is_honest_too():
    rng = random.Random(99)
    covered = 0
    for _ in range(400):
        a, b, j = rng.uniform(300, 3000), rng.uniform(0.05, 2.0), rng.uniform(0, 0.04)
        sizes = [128, 256, 512]
        m = mm.fit([(n, (a + b * n) * (1 + rng.uniform(-j, j)) * MiB) for n in sizes])
        covered += m.interval(2048).lower_bytes <= (a + b * 2048) * MiB
    assert covered / 400 >= 0.90


def test_growth_is_vague_when_two_close_sizes_differ_by_less_than_the_jitter():
    flat = mm.fit([(64, 2929 * MiB), (128, 2933 * MiB)])  # +4 MiB on 2.9 GB
    assert flat.growth()[1] <= 0
    steep = mm.fit([(256, 781 * MiB), (1024, 957 * MiB)])
    assert steep.growth()[1] > 0


# ----------------------------------------------------------------------------- largest_fitting

def test_largest_fitting_uses_the_upper_bound():
    f = affine(700, 0.25)
    m = mm.fit([(n, f(n)) for n in (256, 512, 1024)])
    cands = list(range(256, 4097, 128))
    limit = f(2048)  # the mean crosses the limit exactly at 2048
    best = m.largest_fitting(cands, limit)
    assert best is not None and best < 2048
    assert predict(m, best)[1] <= limit < predict(m, best + 128)[1]
    assert m.largest_fitting(cands, f(100)) is None


def test_largest_fitting_skips_invalid_sizes():
    f = affine(700, 0.25)
    m = mm.fit([(n, f(n)) for n in (256, 512, 1024)])
    shape_of = lambda n: None if n % 256 else (n, 4, 10)  # noqa: E731
    best = m.largest_fitting(range(256, 4097, 128), f(3000), shape_of)
    assert best % 256 == 0


# ----------------------------------------------------------------------------- misses

def test_no_miss_on_exact_data():
    f = affine(900, 0.4)
    pts = [(n, f(n)) for n in (128, 256, 512, 1024)]
    assert mm.misses(pts, oom_sizes=[4096], cap_bytes=f(3000)) == []


def test_an_outlier_peak_is_a_miss():
    f = affine(900, 0.4)
    pts = [(n, f(n)) for n in (128, 256, 512)] + [(1024, f(1024) * 1.25)]
    found = mm.misses(pts)
    assert any(x.num_envs == 1024 and x.what == "ok-above" for x in found)
    assert "outside the predicted" in str(found[0])


def test_oom_where_the_model_was_sure_it_fits_is_a_miss():
    f = affine(900, 0.4)
    pts = [(n, f(n)) for n in (256, 512, 1024)]
    cap = f(2048)
    assert mm.misses(pts, oom_sizes=[2560], cap_bytes=cap) == []  # predicted over the cap
    found = mm.misses(pts, oom_sizes=[1100], cap_bytes=cap)  # predicted well under it
    assert [x.what for x in found] == ["oom-at-fit"]
    assert "ran out of memory" in str(found[0])


# ----------------------------------------------------------------------------- slope prior

def test_one_size_and_a_prior_give_the_line_through_it():
    f = affine(700, 0.25)
    prior = mm.SlopePrior(0.25 * MiB, 0.15)
    assert mm.fit([(256, f(256))]) is None  # one size alone says nothing of the slope
    m = mm.fit([(256, f(256))], prior=prior)
    assert m.kind == "affine" and m.prior == prior and m.sizes == (256,)
    assert m.coef[0] == pytest.approx(700 * MiB) and m.coef[1] == pytest.approx(0.25 * MiB)
    near, far = m.interval(512), m.interval(4096)
    assert near.mean_bytes == pytest.approx(f(512)) and far.mean_bytes == pytest.approx(f(4096))
    # the slope's sd (15 %) grows with the distance extrapolated
    assert far.upper_bytes - far.mean_bytes > 2 * (near.upper_bytes - near.mean_bytes)
    assert m.growth()[1] > 0  # the prior says it grows: something to aim with


def test_two_far_sizes_outweigh_a_wrong_prior():
    f = affine(900, 0.235)
    wrong = mm.SlopePrior(0.47 * MiB, 0.15)  # twice the truth
    m = mm.fit([(128, f(128)), (2048, f(2048))], prior=wrong)
    assert m.coef[1] / MiB == pytest.approx(0.235, rel=0.05)
    assert predict(m, 1024)[0] == pytest.approx(f(1024), rel=0.01)


def test_a_trial_off_the_prior_line_is_a_miss():
    f = affine(900, 0.235)
    prior = mm.SlopePrior(0.235 * MiB, 0.15)
    fine = [(128, f(128)), (1024, f(1024))]
    assert mm.misses(fine, prior=prior) == []
    off = [(128, f(128)), (1024, f(1024) + 150 * MiB)]  # 150 MiB above: the prior was wrong
    found = mm.misses(off, prior=prior)
    assert found and found[0].what in ("ok-above", "ok-below")


@pytest.mark.parametrize("slope, sd", [(0.0, 0.15), (-1.0, 0.15), (float("nan"), 0.15),
                                       (float("inf"), 0.15), (1.0, 0.0), (1.0, -0.1)])
def test_a_slope_prior_must_be_positive_and_finite(slope, sd):
    with pytest.raises(ValueError):
        mm.SlopePrior(slope, sd)


@settings(max_examples=150, deadline=2000)
@given(st.lists(st.tuples(st.integers(1, 1 << 20), st.floats(1e6, 1e12)), min_size=1,
                max_size=6),
       st.floats(1.0, 1e9), st.floats(0.01, 2.0))
def test_any_points_with_any_prior_fit_finitely_or_not_at_all(points, slope, sd):
    model = mm.fit(points, prior=mm.SlopePrior(slope, sd))
    if model is None:  # a prior of negligible weight on one size: nothing to aim with
        assert len({n for n, _ in points}) == 1
        return
    for n in (1, 1000, 1 << 22):
        p = model.interval(n)
        assert all(map(math.isfinite, (p.lower_bytes, p.mean_bytes, p.upper_bytes)))
        assert p.lower_bytes <= p.mean_bytes <= p.upper_bytes
        assert 0.0 <= p.prob_at_most(5e9) <= 1.0
