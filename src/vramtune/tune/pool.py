"""The GPU's memory model: the allocator's pool, which grows in whole regions up to its limit.

On a GPU the cap is XLA's memory fraction: the BFC allocator's pool may not grow past its
limit (``jax_bytes_limit``), and a trial runs out of memory when the pool would have to. The
pool, not the live peak, is the figure that decides an OOM, and it moves in whole regions:
quick's pools on an H100 and an H200 read 258, 514 (or 526), 770 (or 782) MiB, 2 + 256 k, at
about twice the live peak. So the model fits the pool's *need*, the bytes the pool must
hold, as a latent figure the readings only bracket::

    need(n) = max(F, c + b * n)        pool(n) = the first level >= need(n)

* ``F``, the fixed cost: the runtime, parameters and compiled code a tiny run already holds.
  The live peak is flat there (195 MiB at 128 envs, 189 at 512 on the H100), and so is the
  pool, whatever the line below F does. The pool holds at least the live bytes and memory
  does not shrink as num_envs grows, so F at a size is the largest live peak measured at that
  size or below (0 below every size measured): a floor the readings give, not a fit.
* ``c + b * n``, what grows with the batch (XLA's per-execution buffers): c >= 0, b >= 0.
  b is the pool's growth per env, not the live peak's: with c >= 0 the recordings put it at
  1.7-2.1x XLA's compile-time count (H100) and 1.3-2.0x (H200), about two copies of the
  buffers XLA counts (a freed buffer leaves a hole the next one does not fit).
* Levels lie a whole number of regions (``region_bytes``) from the largest pool measured; the
  top level is the highest one under the limit. A need above it does not fit: out of memory.

Readings, interval-censored: an ok trial whose pool read P says need in (P - region, P] (it
grew into the region it reads, not the one below); an out-of-memory trial says need > top.
The edges are soft (a normal cdf of sd ``region / 16``: the 12 MiB small regions beside the
H100's pools put its levels off the 256 MiB grid).

Uncertainty: a posterior over (c, b) on a grid, flat in c on [0, top], times the likelihood
of the readings. The slope prior (``SlopePrior``, XLA's compile-time footprint) is a prior on
b: flat from one to three times its slope (at least the buffers XLA counts; room for a third
copy beyond the two measured), with heavy tails (Cauchy in log units, scale ``rel_sd``) so
that a few readings outweigh a prior several times off. Without it b is flat between 0 and
what the smallest size's pool allows (c >= 0). P(a size fits) is the posterior mass whose
need stays under the top level: what the search aims with. An OOM needs no special case: it
is a reading, and it moves the line.

Pure: numpy and scipy's normal cdf.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_ndtr, ndtr

from vramtune.tune.model import CHECK_CONFIDENCE, CONFIDENCE, Miss, Prediction, SlopePrior

SOFT_REGIONS = 1 / 16  # the sd of a region's edge, in regions
C_POINTS = 161  # grid of the intercept c over [0, top]
B_POINTS = 321  # grid of the slope b over [0, b_max]
PRIOR_SPAN = (1.0, 3.0)  # the flat part of the slope prior, in units of XLA's slope
PRIOR_REACH = 4.0  # the slope grid reaches this many times the flat part's top, at most


@dataclass(frozen=True)
class Reading:
    """One search trial on a GPU: its size, its pool peak (None: out of memory), its live peak."""

    num_envs: int
    pool_bytes: float | None
    live_bytes: float | None = None


def top_level(pools: Iterable[float], limit_bytes: float, region_bytes: float) -> float:
    """The highest pool level under the limit: levels lie a whole number of regions from the
    largest pool measured under it; without one, half a region under the limit."""
    if not math.isfinite(limit_bytes):  # no cap: no level to run out of
        return limit_bytes
    under = [p for p in pools if p <= limit_bytes]
    if not under:
        return limit_bytes - region_bytes / 2
    top = max(under)
    return top + region_bytes * math.floor((limit_bytes - top) / region_bytes)


@dataclass(frozen=True)
class PoolPrediction(Prediction):
    """A size's pool: lower, middle (the median need's level, in ``mean_bytes``) and upper
    levels; ``prob_at_most`` from the posterior itself, not a normal approximation (the pool
    is a step function of a skewed need)."""

    prob: Callable[[float], float] | None = field(default=None, compare=False, repr=False)

    def prob_at_most(self, limit_bytes: float) -> float:
        """P(the pool stays at a level <= limit_bytes)."""
        if self.prob is None:
            return super().prob_at_most(limit_bytes)
        return self.prob(limit_bytes)


@dataclass(frozen=True, eq=False)
class PoolModel:
    """The posterior over (c, b) given the readings; predictions, never measurements."""

    region_bytes: float
    top_bytes: float  # the highest level under the limit: a need above it is out of memory
    floors: tuple[tuple[int, float], ...]  # (size, live peak) measured: F, see floor_at
    soft_bytes: float
    c: np.ndarray  # grid, bytes
    b: np.ndarray  # grid, bytes per env
    weight: np.ndarray  # posterior, shape (len(c), len(b)), sums to 1
    sizes: tuple[int, ...]  # sizes with a pool reading
    prior: SlopePrior | None = None

    def floor_at(self, num_envs: float) -> float:
        """F at a size: the largest live peak measured at it or below (0 below them all)."""
        return _floor_at(self.floors, num_envs)

    def need(self, num_envs: float) -> np.ndarray:
        """The need at num_envs over the grid (bytes, shaped as ``weight``)."""
        return _need(self.c, self.b, self.floor_at(num_envs), num_envs)

    def level_at_most(self, x: float) -> float:
        """The highest level <= x (levels: top + k regions)."""
        return self.top_bytes + self.region_bytes * math.floor(
            (x - self.top_bytes) / self.region_bytes + 1e-9)

    def level_of(self, need: np.ndarray) -> np.ndarray:
        """The first level >= need: the pool a need leaves."""
        k = np.ceil((need - self.top_bytes) / self.region_bytes - 1e-9)
        return self.top_bytes + self.region_bytes * k

    def prob_need_at_most(self, num_envs: float, x: float) -> float:
        """P(need(num_envs) <= x), the edge soft."""
        return float(np.sum(self.weight * ndtr((x - self.need(num_envs)) / self.soft_bytes)))

    def prob_fits(self, num_envs: float) -> float:
        """P(num_envs runs without running out of memory): its need stays under the top level."""
        return self.prob_need_at_most(num_envs, self.top_bytes)

    def interval(self, num_envs: float, shape: object = None,
                 confidence: float = CONFIDENCE) -> PoolPrediction:
        """The pool a new trial at num_envs would read: levels at ``confidence`` each side.
        ``shape`` is accepted for the search's sake and not used (the slope is per env along
        the profile's policy)."""
        need = self.need(num_envs).ravel()
        w = self.weight.ravel()
        order = np.argsort(need, kind="stable")
        ranked, cum = need[order], np.cumsum(w[order])

        def quantile(p: float) -> float:
            return float(ranked[min(int(np.searchsorted(cum, p)), len(cum) - 1)])

        def level(p: float) -> float:
            return float(self.level_of(np.array(quantile(p))))

        sd = math.sqrt(max(float(w @ (need - float(w @ need)) ** 2), 0.0))

        def prob(limit_bytes: float) -> float:
            return self.prob_need_at_most(num_envs, self.level_at_most(limit_bytes))

        # the middle is the median's level: a mean would mix in levels past the limit,
        # which are out-of-memory trials, not pools anyone reads
        return PoolPrediction(level(1.0 - confidence), level(0.5), level(confidence), sd,
                              math.inf, prob)

    def growth(self, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """(the pool's growth per env, its lower bound at ``confidence``), bytes per env."""
        wb = self.weight.sum(axis=0)
        mean = float(wb @ self.b)
        cum = np.cumsum(wb)
        i = min(int(np.searchsorted(cum, 1.0 - confidence)), len(self.b) - 1)
        return mean, float(self.b[i])


def _floor_at(floors: Sequence[tuple[int, float]], num_envs: float) -> float:
    return max((live for n, live in floors if n <= num_envs), default=0.0)


def _need(c: np.ndarray, b: np.ndarray, floor: float, num_envs: float) -> np.ndarray:
    return np.maximum(floor, c[:, None] + b[None, :] * float(num_envs))


def _log_between(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log(Phi(hi) - Phi(lo)) for lo < hi, accurate in both tails."""
    flip = lo > 0  # both in the upper tail: Phi(-lo) - Phi(-hi) loses nothing there
    a = np.where(flip, -hi, lo)
    z = np.where(flip, -lo, hi)
    la, lz = log_ndtr(a), log_ndtr(z)
    return lz + np.log1p(-np.exp(np.minimum(la - lz, -1e-12)))


def _log_slope_prior(b: np.ndarray, prior: SlopePrior) -> np.ndarray:
    """log density of the slope: flat over PRIOR_SPAN x the prior's slope, Cauchy tails in
    log units of scale ``rel_sd`` (heavy: a prior several times off is outweighed by a few
    readings, instead of dragging the aim one size per out-of-memory trial)."""
    log_m = np.log(np.maximum(b / prior.bytes_per_env, 1e-12))
    lo, hi = (math.log(x) for x in PRIOR_SPAN)
    outside = np.maximum(lo - log_m, 0.0) + np.maximum(log_m - hi, 0.0)
    return -np.log1p((outside / prior.rel_sd) ** 2)


def fit(readings: Iterable[Reading], *, region_bytes: float, limit_bytes: float,
        prior: SlopePrior | None = None) -> PoolModel | None:
    """The posterior given the readings; None without a pool reading (two sizes' worth
    without a ``prior``: one size cannot tell a slope) or when nothing on the grid can
    explain them."""
    rs = list(readings)
    ok = [r for r in rs if r.pool_bytes is not None]
    sizes = tuple(sorted({r.num_envs for r in ok}))
    if len(sizes) < (1 if prior is not None else 2):
        return None
    top = top_level((r.pool_bytes for r in ok), limit_bytes, region_bytes)  # type: ignore[misc]
    soft = region_bytes * SOFT_REGIONS
    floors = tuple(sorted((r.num_envs, float(r.live_bytes)) for r in ok
                          if r.live_bytes is not None))
    smallest = min(ok, key=lambda r: r.num_envs)
    assert smallest.pool_bytes is not None
    # c >= 0: the smallest size's need, under its pool, bounds the slope
    b_max = (smallest.pool_bytes + 3 * soft) / max(smallest.num_envs, 1)
    if prior is not None:
        b_max = min(b_max, PRIOR_REACH * PRIOR_SPAN[1] * prior.bytes_per_env)
    c = np.linspace(0.0, top, C_POINTS)
    b = np.linspace(0.0, b_max, B_POINTS)
    log_w = np.zeros((C_POINTS, B_POINTS))
    if prior is not None:
        log_w += _log_slope_prior(b, prior)[None, :]
    for r in rs:
        need = _need(c, b, _floor_at(floors, r.num_envs), r.num_envs)
        if r.pool_bytes is None:  # out of memory: the need was above the top level
            log_w += log_ndtr((need - top) / soft)
        else:
            log_w += _log_between((r.pool_bytes - region_bytes - need) / soft,
                                  (r.pool_bytes - need) / soft)
    best = float(np.max(log_w))
    if not math.isfinite(best):
        return None
    w = np.exp(log_w - best)
    w /= w.sum()
    return PoolModel(region_bytes, top, floors, soft, c, b, w, sizes, prior)


def misses(readings: Sequence[Reading], *, region_bytes: float, limit_bytes: float,
           prior: SlopePrior | None = None,
           confidence: float = CHECK_CONFIDENCE) -> list[Miss]:
    """Where the model missed (leave one size out, order-independent): a pool reading outside
    what the other readings predict there at ``confidence`` (two-sided), or an out-of-memory
    size they said fits with that confidence."""
    tail = (1.0 - confidence) / 2
    found: list[Miss] = []
    for s in sorted({r.num_envs for r in readings}):
        model = fit([r for r in readings if r.num_envs != s], region_bytes=region_bytes,
                    limit_bytes=limit_bytes, prior=prior)
        if model is None:
            continue
        pred = model.interval(s, confidence=1.0 - tail)
        for r in (r for r in readings if r.num_envs == s):
            if r.pool_bytes is None:
                if model.prob_fits(s) >= confidence:
                    found.append(Miss(s, "oom-at-fit", None, pred.lower_bytes, pred.upper_bytes))
                    break
                continue
            if model.prob_need_at_most(s, r.pool_bytes) < tail:  # the others: a larger pool
                found.append(Miss(s, "ok-below", r.pool_bytes, pred.lower_bytes, pred.upper_bytes))
                break
            if 1.0 - model.prob_need_at_most(s, r.pool_bytes - region_bytes) < tail:
                found.append(Miss(s, "ok-above", r.pool_bytes, pred.lower_bytes, pred.upper_bytes))
                break
    return found
