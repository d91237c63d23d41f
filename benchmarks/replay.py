"""Replay the planner against recorded trials: how many rounds k workers need.

Pure: the planner asks for sizes, a recorded memory curve answers with the outcome a trial
under the cap would have had. The curve is the peaks real trials measured (the figure the
memory model fits: the data segment on CPU, the allocator's live peak on GPU), linear
between recorded sizes and along the last segment beyond them. A replay is as good as that
curve: exact at recorded sizes, an interpolation elsewhere; ``benchmarks/bench_search.py``
says so where it uses it. ``Recorded`` replays a recorded GPU sweep's own trials instead
(their live peaks and pools), with the pool between them read pessimistically.

Not part of the package: the benchmark scripts import it as ``replay`` (their folder is on
``sys.path``), the tests as ``benchmarks.replay``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from vramtune.records import Purpose, Status, TrialResult
from vramtune.tune.boundary import model_figure_bytes, ruled_out
from vramtune.tune.planner import SearchSpace, Step, StepKind, candidates, plan_round


@dataclass(frozen=True)
class Curve:
    """Peak bytes per num_envs, from recorded trials (the largest peak where a size repeats).

    ``steps``: the figure grows in whole regions (a GPU's pool), so between two recorded
    sizes it is the larger one's (the next level up, never a level the allocator does not
    hold). ``fails_from``: the smallest size recorded out of memory, where (and above which)
    a replayed trial fails whatever the curve says: a pool's next level has no figure."""

    sizes: tuple[int, ...]
    peaks_bytes: tuple[float, ...]
    steps: bool = False
    fails_from: int | None = None

    @classmethod
    def from_records(cls, records: Iterable[TrialResult], *, steps: bool = False) -> Curve:
        peaks: dict[int, float] = {}
        fails: list[int] = []
        for r in records:
            figure = model_figure_bytes(r) if r.status is Status.OK else None
            if figure is not None:
                peaks[r.num_envs] = max(peaks.get(r.num_envs, 0.0), float(figure))
            elif r.status is Status.OOM:
                fails.append(r.num_envs)
        if len(peaks) < 2:
            raise ValueError("a curve needs peaks at two sizes at least")
        sizes = tuple(sorted(peaks))
        return cls(sizes, tuple(peaks[n] for n in sizes), steps,
                   min(fails, default=None) if steps else None)

    def __call__(self, num_envs: float) -> float:
        xs, ys = self.sizes, self.peaks_bytes
        if self.fails_from is not None and num_envs >= self.fails_from:
            return math.inf
        i = bisect.bisect_left(xs, num_envs)
        if i < len(xs) and xs[i] == num_envs:
            return ys[i]
        if self.steps and i < len(xs):
            return ys[i]
        i = min(max(i, 1), len(xs) - 1)  # the segment around it, or the end one beyond
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (num_envs - x0) * (y1 - y0) / (x1 - x0)

    def truth(self, limit_bytes: float, sizes: Iterable[int]) -> int | None:
        """The largest of ``sizes`` whose peak fits, every smaller one fitting too."""
        best = None
        for n in sorted(sizes):
            if self(n) > limit_bytes:
                break
            best = n
        return best


def outcome(curve: Callable[[float], float], num_envs: int, limit_bytes: float,
            shape: tuple[int, int, int] | None = None, backend: str = "cpu") -> TrialResult:
    """The record a trial under ``limit_bytes`` would leave: ok with its peak, or out of
    memory. ``backend="gpu"``: the peak is the allocator's pool, under a pool limit."""
    peak = curve(num_envs)
    bs, nmb, unroll = shape if shape is not None else (None, None, None)
    base = dict(profile="replay", profile_hash="replay", num_envs=num_envs, batch_size=bs,
                num_minibatches=nmb, unroll_length=unroll, backend=backend)
    gpu = backend != "cpu"
    if gpu:
        base.update(jax_bytes_limit=int(limit_bytes))
    if peak > limit_bytes:
        return TrialResult(status=Status.OOM, **base)
    figures = (dict(jax_peak_pool_bytes=int(peak)) if gpu else
               dict(host_peak_data_bytes=int(peak), host_peak_rss_bytes=int(peak)))
    return TrialResult(status=Status.OK, steps_per_s=1.0, **base, **figures)


@dataclass(frozen=True)
class Replay:
    k: int
    rounds: tuple[tuple[int, ...], ...]  # the sizes of each round, in order
    results: tuple[TrialResult, ...]
    final: Step  # the DONE step: why the search stopped
    limit_bytes: int | None = None  # the space's: a size short of room under it fails

    @property
    def trials(self) -> int:
        return len(self.results)

    @property
    def found(self) -> int | None:
        """The largest size that fit below the smallest that failed (out of memory, or short
        of room under the limit, ``boundary.ruled_out``): the boundary found."""
        out = ruled_out(self.results, self.limit_bytes)
        fails = [r.num_envs for r in self.results if r.status is not Status.OK or r.num_envs in out]
        edge = min(fails, default=None)
        fits = [r.num_envs for r in self.results
                if r.status is Status.OK and (edge is None or r.num_envs < edge)]
        return max(fits, default=None)


Shape = tuple[int, int, int] | None


class Recorded:
    """A recorded sweep's search trials as the answers of a replay: a size it measured gives
    its own record; another size out of memory at or above the smallest recorded OOM, else
    the pool of the next recorded size up (a pool between two recorded sizes stands at the
    larger one's level or below: the pessimistic reading) and the live peak interpolated.
    Above the largest recorded fit with no OOM recorded it answers that fit's pool: an
    optimistic reading, so a replay there says little."""

    def __init__(self, records: Iterable[TrialResult]):
        search = [r for r in records if r.purpose is Purpose.SEARCH]
        if not any(r.status is Status.OK for r in search):
            raise ValueError("a recorded sweep needs a search trial that fitted")
        self.by_size = {r.num_envs: r for r in search}
        self.ok = sorted(n for n, r in self.by_size.items() if r.status is Status.OK)
        self.fails_from = min((n for n, r in self.by_size.items() if r.status is Status.OOM),
                              default=None)
        self.template = search[0]

    def __call__(self, num_envs: int, shape: Shape = None) -> TrialResult:
        if num_envs in self.by_size:
            return self.by_size[num_envs]
        bs, nmb, unroll = shape if shape is not None else (None, None, None)
        base = replace(self.template, num_envs=num_envs, batch_size=bs, num_minibatches=nmb,
                       unroll_length=unroll, steps_per_s=None, wall_s=None,
                       nvml_process_peak_bytes=None, notes=("replayed, not measured",))
        if self.fails_from is not None and num_envs >= self.fails_from:
            return replace(base, status=Status.OOM, jax_peak_pool_bytes=None,
                           jax_peak_bytes_in_use=None)
        i = bisect.bisect_left(self.ok, num_envs)
        up = self.by_size[self.ok[min(i, len(self.ok) - 1)]]
        down = self.by_size[self.ok[max(i - 1, 0)]]
        live = None
        if up.jax_peak_bytes_in_use is not None and down.jax_peak_bytes_in_use is not None:
            span = up.num_envs - down.num_envs
            w = (num_envs - down.num_envs) / span if span else 0.0
            live = int(down.jax_peak_bytes_in_use
                       + w * (up.jax_peak_bytes_in_use - down.jax_peak_bytes_in_use))
        return replace(base, status=Status.OK, jax_peak_pool_bytes=up.jax_peak_pool_bytes,
                       jax_peak_bytes_in_use=live, steps_per_s=1.0)


def replay(curve: Callable[[float], float], space: SearchSpace, k: int = 1,
           max_rounds: int = 200, backend: str = "cpu") -> Replay:
    """Run the planner's search to its end against ``curve`` under ``space.limit_bytes``."""
    assert space.limit_bytes is not None, "a replay needs a cap"
    limit = space.limit_bytes
    return replay_answers(lambda n, shape: outcome(curve, n, limit, shape, backend), space, k,
                          max_rounds)


def replay_answers(answer: Callable[[int, Shape], TrialResult], space: SearchSpace, k: int = 1,
                   max_rounds: int = 200) -> Replay:
    """Run the planner's search to its end, each size answered by ``answer(n, shape)``."""
    results: list[TrialResult] = []
    rounds: list[tuple[int, ...]] = []
    for _ in range(max_rounds):
        steps = plan_round(results, space, k)
        if steps[0].phase is StepKind.DONE:
            return Replay(k, tuple(rounds), tuple(results), steps[0], space.limit_bytes)
        sizes = tuple(s.num_envs for s in steps if s.num_envs is not None)
        rounds.append(sizes)
        for n in sizes:
            shape = space.shape_of(n) if space.shape_of else None
            results.append(answer(n, shape))
    raise RuntimeError(f"the search did not finish in {max_rounds} rounds")


def grid_truth(curve: Curve, space: SearchSpace) -> int | None:
    """The boundary on the predictive search's round grid under the space's limit."""
    assert space.limit_bytes is not None
    return curve.truth(space.limit_bytes, candidates(space))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")
