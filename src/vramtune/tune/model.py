"""A memory model fitted to the trials measured so far, with an honest uncertainty.

The model (how Brax PPO holds memory: what does not grow, and two terms that do)::

    peak = a + b * num_envs + c * rollout,   rollout = batch_size * num_minibatches * unroll_length

``a`` is what does not grow (runtime, compiled code, parameters, optimizer state), ``b`` the
per-env state, ``c`` the rollout and SGD buffers. Under a scaling policy the rollout is often
collinear with num_envs (hold-num-minibatches: rollout = 4 x 10 x num_envs for ``quick``) or
constant (hold-env-steps), and the three coefficients cannot be told apart: the model then
collapses to ``peak = A + B * num_envs``. A size whose rollout is off the measured line (the
growing policies round num_minibatches up, up to 2x the unrolls per step) is predicted with
the share of B the rollout might carry, anywhere between none and all of it (b, c >= 0): the
upper bound takes the worst, the mean the middle.

Uncertainty. Peaks jitter 2-4 % run to run (measured on ``quick``, CPU), so two points say little about the
slope: their noise is what an extrapolation multiplies. The per-point noise sd is pooled from a
prior (``FLOOR_SD`` = 1.5 % of the mean peak, worth ``PRIOR_DOF`` = 4 degrees of freedom) and
the fit's residuals (n - p degrees of freedom); the one-sided margin for a new trial at x is
``t_{dof}(conf) * sqrt(s^2 h(x) + s_new^2)`` (h the leverage), never below ``max|residual| *
sqrt(1 + h)``. With two points and no residual that is 3.2 % of the peak times sqrt(1 + h), and
it grows with the distance extrapolated. Calibration (1500 random affine truths each, jitter
uniform): +-2 % -> the 95 % upper bound covers a fresh trial 96-100 % of the time; +-4 % (twice
the measured spread) 86-89 %.

A prior on the growth (``SlopePrior``): XLA's compile-time ``memory_analysis()`` of the training
epoch at two sizes, compiled and never run (``measure.footprint``), says how many bytes each env
adds along the profile's batch shapes. It enters as one more observation of the slope (mixed
estimation: a row ``[0, w]`` with target ``w * slope``, ``w = sd_point / sd_slope``), so one
measured size is enough to aim, a second far-off size outweighs a wrong prior, and the
leave-one-out check flags a prior that the trials contradict.

Out-of-memory trials have no peak: they are not fitted; ``misses`` uses them to check the
model (an OOM where the upper bound said it fits). Pure: numpy, scipy's Student t and the
standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

# scipy.special's Student t (stdtr, stdtrit) is what scipy.stats.t calls, identical to the last
# bit; scipy.stats itself costs every CLI command ~0.6 s of imports before it does anything
from scipy.special import stdtr, stdtrit

FLOOR_SD = 0.015  # relative sd of one peak: the prior run-to-run jitter (2-4 % spreads measured)
PRIOR_DOF = 4  # how many degrees of freedom that prior is worth against the residuals
CONFIDENCE = 0.95  # one-sided: the upper bound a new trial's peak stays under
CHECK_CONFIDENCE = 0.99  # a 'miss' is an outcome outside the two-sided interval at this level
MIN_POINTS_FOR_ROLLOUT_TERM = 4  # a, b, c and at least one residual

Shape = tuple[int | None, int | None, int | None]  # (batch_size, num_minibatches, unroll_length)
ShapeOf = Callable[[int], Shape | None]


def t_cdf(t: float, dof: float) -> float:
    """P(T <= t) for Student's t with ``dof`` degrees of freedom (inf: the normal)."""
    return float(stdtr(dof, t))


def t_quantile(p: float, dof: float) -> float:
    """The p-quantile of Student's t with ``dof`` degrees of freedom (p in (0, 1))."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    return float(stdtrit(dof, p))


# ---------------------------------------------------------------------------------------------

def rollout_of(shape: Shape | int | float | None) -> float | None:
    """batch_size * num_minibatches * unroll_length, or None where any part is unknown."""
    if shape is None:
        return None
    if isinstance(shape, int | float):
        return float(shape)
    bs, nmb, unroll = shape
    if bs is None or nmb is None or unroll is None:
        return None
    return float(bs * nmb * unroll)


@dataclass(frozen=True)
class Point:
    """One trial that finished with a peak: its size, batch shape and the figure the cap counts."""

    num_envs: int
    peak_bytes: float
    batch_size: int | None = None
    num_minibatches: int | None = None
    unroll_length: int | None = None

    @property
    def rollout(self) -> float | None:
        return rollout_of((self.batch_size, self.num_minibatches, self.unroll_length))


def as_point(item: Point | Sequence) -> Point:
    """A Point, or (num_envs, peak_bytes), or (num_envs, batch_size, num_minibatches,
    unroll_length, peak_bytes)."""
    if isinstance(item, Point):
        return item
    if len(item) == 2:
        return Point(int(item[0]), float(item[1]))
    if len(item) == 5:
        n, bs, nmb, unroll, peak = item
        return Point(int(n), float(peak), bs, nmb, unroll)
    raise ValueError(f"a point is (num_envs, peak) or (num_envs, bs, nmb, unroll, peak), got {item!r}")


@dataclass(frozen=True)
class SlopePrior:
    """Bytes per env the figure the cap counts grows by, from outside the trials (a compile-only
    probe): a prior with a relative sd, never a measurement of the peak itself."""

    bytes_per_env: float
    rel_sd: float = 0.15

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bytes_per_env) and self.bytes_per_env > 0):
            raise ValueError(f"a slope prior needs a positive finite slope, got {self.bytes_per_env}")
        if not (math.isfinite(self.rel_sd) and self.rel_sd > 0):
            raise ValueError(f"a slope prior needs a positive finite sd, got {self.rel_sd}")


@dataclass(frozen=True)
class Prediction:
    """A new trial's peak at one size: one-sided bounds at the confidence asked for."""

    lower_bytes: float
    mean_bytes: float
    upper_bytes: float
    sd_bytes: float  # scale around the mean (Student t with dof), for probabilities
    dof: float = math.inf

    def prob_at_most(self, limit_bytes: float) -> float:
        """P(a new trial's peak <= limit_bytes), consistent with the bounds."""
        if self.sd_bytes <= 0:
            return 1.0 if self.mean_bytes <= limit_bytes else 0.0
        return t_cdf((limit_bytes - self.mean_bytes) / self.sd_bytes, self.dof)


@dataclass(frozen=True)
class Model:
    """Least-squares peak model; a prediction, never a measurement."""

    kind: str  # "rollout": a + b n + c R; "affine": A + B n (rollout constant, collinear or unknown)
    coef: tuple[float, ...]  # bytes: (a, b per env, c per rollout unit) or (A, B per env)
    xtx_inv: tuple[tuple[float, ...], ...]
    sigma_bytes: float  # pooled per-point sd
    sigma_fraction: float  # the same relative to the mean peak (the new-trial term)
    dof: float  # of the pooled estimate: PRIOR_DOF + n - p
    residual_dof: int
    max_abs_residual_bytes: float
    n_points: int
    mean_peak_bytes: float
    # rollout = alpha + beta * n over the measured points, and (affine only) the largest share
    # of the per-env growth the rollout term could carry, in bytes per rollout unit.
    rollout_line: tuple[float, float] | None = None
    rollout_slack_bytes: float = 0.0
    sizes: tuple[int, ...] = field(default=())
    prior: SlopePrior | None = None  # the slope prior this fit used (affine only)

    def _row(self, num_envs: float, rollout: float | None) -> tuple[np.ndarray, float]:
        """Design row and the rollout's deviation off the measured line (affine only)."""
        if self.kind == "rollout":
            if rollout is None:
                raise ValueError("this model needs the batch shape (rollout) of the size to predict")
            return np.array([1.0, float(num_envs), float(rollout)]), 0.0
        dev = 0.0
        if self.rollout_line is not None and rollout is not None:
            alpha, beta = self.rollout_line
            dev = float(rollout) - (alpha + beta * float(num_envs))
            if abs(dev) <= 1e-9 * max(abs(rollout), 1.0):
                dev = 0.0
        return np.array([1.0, float(num_envs)]), dev

    def interval(self, num_envs: float, shape: Shape | int | float | None = None,
                 confidence: float = CONFIDENCE) -> Prediction:
        """(lower, mean, upper) of a new trial's peak at num_envs; ``confidence`` each side."""
        x, dev = self._row(num_envs, rollout_of(shape))
        base = float(x @ np.array(self.coef))
        lev = float(x @ np.array(self.xtx_inv) @ x)
        slack = self.rollout_slack_bytes * dev  # what the rollout share could add (or remove)
        mean = base + slack / 2.0
        q = t_quantile(confidence, self.dof)
        sd_new = max(self.sigma_bytes, self.sigma_fraction * max(abs(mean), 1.0))
        sd = math.sqrt(self.sigma_bytes ** 2 * lev + sd_new ** 2)
        margin = max(q * sd, self.max_abs_residual_bytes * math.sqrt(1.0 + lev))
        upper = base + max(0.0, slack) + margin
        lower = base + min(0.0, slack) - margin
        # For probabilities: the slack as a uniform spread around the mean (variance w^2 / 12).
        sd_total = math.sqrt((margin / q) ** 2 + slack ** 2 / 12.0) if q > 0 else margin
        return Prediction(lower, mean, upper, sd_total, self.dof)

    def growth(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """(bytes per env, its lower bound at ``confidence``) along the measured batch shapes.
        A lower bound <= 0: the points cannot tell growth from jitter, nothing to aim with."""
        if self.kind == "rollout":
            beta = self.rollout_line[1] if self.rollout_line else 0.0
            d = np.array([0.0, 1.0, beta])
        else:
            d = np.array([0.0, 1.0])
        slope = float(d @ np.array(self.coef))
        se = self.sigma_bytes * math.sqrt(max(float(d @ np.array(self.xtx_inv) @ d), 0.0))
        return slope, slope - t_quantile(confidence, self.dof) * se

    def largest_fitting(self, candidates: Iterable[int], limit_bytes: float,
                        shape_of: ShapeOf | None = None,
                        confidence: float = CONFIDENCE) -> int | None:
        """The largest candidate whose upper bound stays under limit_bytes: a prediction, to
        be shown as 'predicted, not measured', never recommended without a trial."""
        best = None
        for n in candidates:
            shape = shape_of(n) if shape_of else None
            if shape_of is not None and shape is None:
                continue  # not a valid size
            if self.interval(n, shape, confidence).upper_bytes <= limit_bytes:
                best = n if best is None else max(best, n)
        return best


# ---------------------------------------------------------------------------------------------

def _solve(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Least squares on a column-scaled design: (coef, (X'X)^-1, residuals), None if singular."""
    scale = np.maximum(np.abs(X).max(axis=0), 1e-300)
    Xs = X / scale
    if np.linalg.matrix_rank(Xs, tol=1e-9 * math.sqrt(X.shape[0])) < X.shape[1]:
        return None
    try:
        xtx_inv_s = np.linalg.inv(Xs.T @ Xs)
    except np.linalg.LinAlgError:  # rank passed, inverse not (a prior row of ~1e-5 weight)
        return None
    coef = (xtx_inv_s @ Xs.T @ y) / scale
    return coef, xtx_inv_s / np.outer(scale, scale), y - X @ coef


def _pooled(resid: np.ndarray, n: int, p: int, mean_peak: float, floor_sd: float,
            prior_dof: float) -> tuple[float, float, int]:
    rdof = n - p
    floor = floor_sd * mean_peak
    s2_resid = float(resid @ resid) / rdof if rdof > 0 else 0.0
    dof = prior_dof + max(rdof, 0)
    s2 = (prior_dof * floor ** 2 + max(rdof, 0) * s2_resid) / dof
    return math.sqrt(s2), dof, rdof


def _frozen(matrix: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in matrix)


def fit(points: Iterable[Point | Sequence], *, floor_sd: float = FLOOR_SD,
        prior_dof: float = PRIOR_DOF, prior: SlopePrior | None = None) -> Model | None:
    """Least-squares model of the peaks; None with fewer than two distinct sizes (one, with a
    slope ``prior``). A GPU's pool, rounded to allocator regions, is ``tune.pool``'s.

    Repeats at one size are all fitted (they tell the jitter). The rollout term is fitted only
    when it is known for every point, not collinear with num_envs on them, there are at least
    four points, and its coefficients come out non-negative; otherwise affine, with the prior.
    """
    pts = [as_point(p) for p in points]
    pts = [p for p in pts if p.peak_bytes is not None and math.isfinite(p.peak_bytes)]
    sizes = sorted({p.num_envs for p in pts})
    if len(sizes) < (1 if prior is not None else 2):
        return None
    n = len(pts)
    y = np.array([p.peak_bytes for p in pts], dtype=float)
    nv = np.array([p.num_envs for p in pts], dtype=float)
    mean_peak = float(np.mean(y))
    rollouts = [p.rollout for p in pts]
    known = all(r is not None for r in rollouts)
    R = np.array([r if r is not None else 0.0 for r in rollouts], dtype=float)

    if known and n >= MIN_POINTS_FOR_ROLLOUT_TERM:
        solved = _solve(np.column_stack([np.ones(n), nv, R]), y)
        if solved is not None and solved[0][1] >= 0 and solved[0][2] >= 0:
            coef, xtx_inv, resid = solved
            sigma, dof, rdof = _pooled(resid, n, 3, mean_peak, floor_sd, prior_dof)
            rl = _solve(np.column_stack([np.ones(n), nv]), R)
            line = (float(rl[0][0]), float(rl[0][1])) if rl is not None else None
            return Model("rollout", tuple(float(c) for c in coef), _frozen(xtx_inv), sigma,
                         sigma / mean_peak, dof, rdof, float(np.max(np.abs(resid))), n,
                         mean_peak, line, sizes=tuple(sizes))

    X = np.column_stack([np.ones(n), nv])
    if prior is None:
        solved = _solve(X, y)
        p_eff = 2
    else:  # the prior as one more row: the slope observed with sd rel_sd * slope
        w = floor_sd * mean_peak / (prior.rel_sd * prior.bytes_per_env)
        solved = _solve(np.vstack([X, [0.0, w]]), np.append(y, w * prior.bytes_per_env))
        if solved is not None:
            solved = (solved[0], solved[1], solved[2][:n])
        p_eff = 1
    if solved is None:
        return None
    coef, xtx_inv, resid = solved
    sigma, dof, rdof = _pooled(resid, n, p_eff, mean_peak, floor_sd, prior_dof)
    line, slack = None, 0.0
    if known and len(sizes) >= 2:
        rl = _solve(X, R)
        if rl is not None:
            alpha, beta = (float(v) for v in rl[0])
            line = (alpha, beta)
            A, B = (float(v) for v in coef)
            # peak = A + B n + c (R - alpha - beta n) with b = B - c beta >= 0, a = A - c alpha >= 0
            if beta > 1e-12:
                slack = max(0.0, B) / beta
            elif alpha > 1e-12:
                slack = max(0.0, A) / alpha
    return Model("affine", tuple(float(c) for c in coef), _frozen(xtx_inv), sigma,
                 sigma / mean_peak, dof, rdof, float(np.max(np.abs(resid))), n, mean_peak, line,
                 slack, sizes=tuple(sizes), prior=prior)


# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Miss:
    """Where the model missed by more than its stated uncertainty."""

    num_envs: int
    what: str  # "ok-above" / "ok-below": a peak outside the leave-one-size-out interval;
    #            "oom-at-fit": an OOM where even the upper bound was under the cap;
    #            "fail-below-mean": (search) a failure the current model still expects to fit
    observed_bytes: float | None
    lower_bytes: float
    upper_bytes: float

    def __str__(self) -> str:
        mib = 2 ** 20
        if self.what == "fail-below-mean":
            return (f"{self.num_envs} envs failed where the model still expects it to fit "
                    f"(upper bound {self.upper_bytes / mib:.0f} MiB)")
        if self.what == "oom-at-fit":
            return (f"{self.num_envs} envs ran out of memory where the model's upper bound was "
                    f"{self.upper_bytes / mib:.0f} MiB, under the cap")
        observed = self.observed_bytes or 0.0
        return (f"{self.num_envs} envs peaked at {observed / mib:.0f} MiB, outside the "
                f"predicted {self.lower_bytes / mib:.0f}-{self.upper_bytes / mib:.0f} MiB")


def misses(points: Iterable[Point | Sequence], oom_sizes: Iterable[int] = (),
           cap_bytes: float | None = None, shape_of: ShapeOf | None = None,
           confidence: float = CHECK_CONFIDENCE, **fit_kwargs) -> list[Miss]:
    """Where the model missed by more than its stated uncertainty (order-independent):

    * each measured size's peaks against the model fitted on the other sizes (leave one size
      out; skipped when fewer than two other sizes remain);
    * each out-of-memory size against the model fitted on every point: a miss when even the
      upper bound stayed under the cap (the model said 'fits' with confidence).
    """
    pts = [as_point(p) for p in points]
    found: list[Miss] = []
    for s in sorted({p.num_envs for p in pts}):
        others = [p for p in pts if p.num_envs != s]
        model = fit(others, **fit_kwargs)
        if model is None:
            continue
        for p in (p for p in pts if p.num_envs == s):
            try:
                pred = model.interval(s, p.rollout, confidence)
            except ValueError:
                continue
            if p.peak_bytes > pred.upper_bytes:
                found.append(Miss(s, "ok-above", p.peak_bytes, pred.lower_bytes, pred.upper_bytes))
                break
            if p.peak_bytes < pred.lower_bytes:
                found.append(Miss(s, "ok-below", p.peak_bytes, pred.lower_bytes, pred.upper_bytes))
                break
    if cap_bytes is not None:
        model = fit(pts, **fit_kwargs)
        if model is not None:
            for s in sorted(set(oom_sizes)):
                shape = shape_of(s) if shape_of else None
                try:
                    pred = model.interval(s, shape, confidence)
                except ValueError:
                    continue
                if pred.upper_bytes < cap_bytes:
                    found.append(Miss(s, "oom-at-fit", None, pred.lower_bytes, pred.upper_bytes))
    return found
