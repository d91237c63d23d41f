"""The choice per budget for emitted configs: merge measured runs, pick a measured trial.

Only measured trials are ever chosen (``recommend.choose``), and a budget the measurements
do not cover says so: people copy these configs into training runs that take days, so a
number that was never run must not look like one that was.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from vramtune.errors import UserError
from vramtune.records import (
    FAILED_BY_MEMORY,
    Objective,
    Purpose,
    Status,
    TrialResult,
    any_gpu,
    memory_kind,
)
from vramtune.results.frame import one_per_size
from vramtune.results.store import Run
from vramtune.tune import model as mm
from vramtune.tune.boundary import PROOF_RUNS, fits, model_figure_bytes, proof_rooms_bytes, uses_pool
from vramtune.tune.growth import Growth, RunLength
from vramtune.tune.ledger import before_the_run
from vramtune.tune.planner import SearchSpace, candidates, keeps_base_unrolls
from vramtune.tune.recommend import Recommendation, choose
from vramtune.tune.speed import DEFAULT_MARGIN
from vramtune.units import both_units, budget_label, format_bytes, headroom_limit_bytes
from vramtune.workload.profile import Profile, load_profile, profile_from_dict
from vramtune.workload.rules import BatchShape, lr_scaling_hint, violations

CPU_NOTICE = ("measured on CPU: every figure is host RAM, not VRAM, and no GPU memory fraction "
              "applies; re-run the sweep on the target GPU before training there")


@dataclass(frozen=True)
class Measurements:
    """One or more run directories of the same workload on the same device, merged: one
    record per num_envs (``results.frame.one_per_size``)."""

    directories: tuple[Path, ...]
    profile: Profile
    profile_hash: str
    device: str
    created: str  # the first run's creation time: the date the files name
    headroom_fraction: float
    results: tuple[TrialResult, ...]
    sweep_budget_bytes: tuple[int | None, ...]  # each run's cap (None: uncapped)
    every_result: tuple[TrialResult, ...] = ()  # all records, repeats and confirmations too
    objective: Objective | None = None  # the sweeps' own objective, when they agree
    speed_margin: float = DEFAULT_MARGIN  # the sweeps' own, when they agree

    @property
    def on_gpu(self) -> bool:
        return any_gpu(self.results)

    @property
    def memory_label(self) -> str:
        return memory_kind(self.on_gpu)

    @property
    def label(self) -> str:
        return ", ".join(str(d) for d in self.directories)


@dataclass(frozen=True)
class PredictedSize:
    """What the memory model fitted to a sweep's peaks expects under a larger budget: a
    prediction, not a measurement, and the command that would measure it."""

    num_envs: int
    mean_bytes: float
    upper_bytes: float
    limit_bytes: int
    command: str
    figure: str = "peak"  # what the model fitted: "pool" on a GPU (the allocator's), else "peak"
    held_to_bytes: int | None = None  # GPU: the allocator's limit the pool may grow to

    def __str__(self) -> str:
        under = f"under the {format_bytes(self.limit_bytes)} line"
        if self.held_to_bytes is not None and self.held_to_bytes < self.limit_bytes:
            under = (f"under the {format_bytes(self.held_to_bytes)} the allocator may hold: "
                     f"the {format_bytes(self.limit_bytes)} line less the CUDA context")
        return (f"predicted, not measured: num_envs={self.num_envs} should fit (model "
                f"{self.figure} {format_bytes(int(self.mean_bytes))}, upper bound "
                f"{format_bytes(int(self.upper_bytes))}, {under}); nothing is written for it "
                f"until a sweep runs it: {self.command}")


@dataclass(frozen=True)
class Emission:
    """What one budget gets: the chosen trial, or why there is none, and what to know."""

    budget_bytes: int | None
    headroom_fraction: float
    recommendation: Recommendation
    notices: tuple[str, ...]  # coverage gaps and caveats: printed, and written as comments
    error: str | None  # set when nothing measured fits (no file is written); says why
    optimisation_change: str | None  # what changed vs the profile's base, with the LR hint
    # a budget above the sweep's cap: the size the memory model expects to fit, never
    # written into a file, only shown as "predicted, not measured" with the command to run
    predicted: PredictedSize | None = None
    # one record per num_envs as this budget sees them (``speaking_for``): another sweep's
    # failures under less memory than this budget's line are not among them
    sizes: tuple[TrialResult, ...] = ()
    growth: Growth | None = None  # the configured run's length priced, when one was given

    @property
    def chosen(self) -> TrialResult | None:
        return self.recommendation.chosen


def _distinct(runs: Sequence[Run]) -> list[Run]:
    """The runs, one folder named twice kept once; two folders holding one sweep (a copy,
    perhaps resumed apart: the same header, written when the sweep began) refused, or each
    of its trials would count twice: twice the runs behind a peak, twice the intervals
    behind a rate, an interval twice as narrow as measured."""
    seen: dict[Path, Run] = {}
    began: dict[tuple[object, ...], Run] = {}
    for run in runs:
        where = Path(os.path.realpath(run.directory))
        if where in seen:
            continue
        seen[where] = run
        h = run.header
        # what a copy shares and two sweeps begun in the same second (a script starting one
        # per budget or per card) do not: their settings, their first trial's time
        first = run.results[0].timestamp if run.results else None
        key = (h.created, str(h.machine.get("hostname", "")), h.profile_hash, h.budget_bytes,
               h.headroom_fraction, h.device, str(h.search.gpu_type), first)
        if h.created and key in began:
            raise UserError(f"{began[key].directory} and {run.directory} hold the same sweep "
                            f"(begun {h.created} on the same machine; a copy?): its trials "
                            f"would count twice, give one of them")
        began[key] = run
    return list(seen.values())


def merge_runs(runs: Sequence[Run]) -> Measurements:
    """One set of measurements from several runs; refuses to mix workloads or devices."""
    if not runs:
        raise UserError("no run to emit a config from")
    runs = _distinct(runs)
    first = runs[0]
    for run in runs[1:]:
        if run.header.profile_hash != first.header.profile_hash:
            raise UserError(f"{run.directory} measured profile {run.header.profile_name} "
                            f"({run.header.profile_hash}), {first.directory} measured "
                            f"{first.header.profile_name} ({first.header.profile_hash}): emit "
                            f"from one workload at a time")
        if run.header.device != first.header.device:
            raise UserError(f"{run.directory} ran on {run.header.device}, {first.directory} on "
                            f"{first.header.device}: speed differs between devices, emit from "
                            f"one device's runs at a time")
    profile = profile_from_dict(dict(first.header.profile), source=f"{first.directory} header")
    return Measurements(
        directories=tuple(r.directory for r in runs), profile=profile,
        profile_hash=first.header.profile_hash, device=first.header.device,
        created=first.header.created, headroom_fraction=first.header.headroom_fraction,
        results=one_per_size(res for run in runs for res in run.results),
        sweep_budget_bytes=tuple(r.header.budget_bytes for r in runs),
        every_result=tuple(res for run in runs for res in run.results),
        objective=_common_objective(runs), speed_margin=_common_margin(runs))


def run_objective(run: Run) -> Objective | None:
    """The objective the sweep chose with, when its header says (older runs do not)."""
    return run.header.search.objective


def run_speed_margin(run: Run) -> float:
    """The speed margin the sweep chose with (its header's; 2% where it does not say), so a
    re-choice picks what the sweep picked."""
    margin = run.header.search.speed_margin
    return DEFAULT_MARGIN if margin is None else margin


def _common_margin(runs: Sequence[Run]) -> float:
    named = {run_speed_margin(run) for run in runs}
    return named.pop() if len(named) == 1 else DEFAULT_MARGIN


def _common_objective(runs: Sequence[Run]) -> Objective | None:
    """The runs' objective when they all name the same one: emit-config then re-chooses as
    the sweep did, and writes the size the sweep confirmed."""
    named = {run_objective(run) for run in runs}
    return named.pop() if len(named) == 1 else None


def speaking_for(results: Sequence[TrialResult], budget_bytes: int | None,
                 limit_bytes: int | None) -> tuple[TrialResult, ...]:
    """The records that speak for one budget, in order: every ok run, every failure of a
    sweep at this budget (as the sweep counted them) or uncapped, and a failure of another
    sweep only where it ran with as much memory as this budget's line gives: a search trial
    at the line or above, a proof run (held below its own line) closer to this line than a
    proof here would be held. A size that ran out of memory in a 1.02GB sweep may fit 1.1GB,
    which the 1.1GB sweep's runs tell; read as a boundary there, that failure ruled out every
    size above it."""
    rows = list(results)

    def elsewhere(r: TrialResult) -> bool:  # another sweep's failure, with a cap
        return not (r.status is Status.OK or r.budget_bytes is None
                    or r.budget_bytes == budget_bytes)

    rooms = ({} if limit_bytes is None else proof_rooms_bytes(
        rows, limit_bytes, {r.num_envs for r in rows if elsewhere(r) and r.purpose in PROOF_RUNS}))

    def speaks(r: TrialResult) -> bool:
        if not elsewhere(r):
            return True
        if limit_bytes is None:  # no limit here: a capped failure says nothing of it
            return False
        held = r.cap_bytes if r.cap_bytes is not None else r.budget_bytes
        room = rooms.get(r.num_envs, 0) if r.purpose in PROOF_RUNS else 0
        return held >= limit_bytes - room

    return tuple(r for r in rows if speaks(r))


def _largest_cap(source: Measurements) -> tuple[bool, int | None]:
    """(any trial ran uncapped, the largest cap any trial ran under)."""
    # every run, not one per size: a size kept from a smaller sweep hides a larger one
    caps = [r.budget_bytes for r in source.every_result or source.results] or list(
        source.sweep_budget_bytes)
    return any(c is None for c in caps), max((c for c in caps if c is not None), default=None)


def before_the_long_run(source: Measurements, emission: Emission,
                        run_length: RunLength | None) -> Emission:
    """``emission`` with what to know before the long run: the configured run's peak at its
    length (``growth``; ``run_length`` None: not priced) and a
    notice when that crosses the line or the evaluation holds more than the training."""
    chosen = emission.chosen
    if chosen is None:
        return emission
    growth, evaluation = before_the_run(source.every_result or source.results, chosen.num_envs,
                                        source.profile, run_length,
                                        emission.recommendation.limit_bytes)
    said = (growth.warning() if growth else None, evaluation.warning() if evaluation else None)
    return replace(emission, growth=growth,
                   notices=emission.notices + tuple(w for w in said if w))


def choose_for_budget(source: Measurements, budget_bytes: int | None,
                      objective: Objective = Objective.THROUGHPUT,
                      headroom_fraction: float | None = None) -> Emission:
    """Choose for one budget (None: the sweep's own cap) and say what the data cannot show."""
    headroom = source.headroom_fraction if headroom_fraction is None else headroom_fraction
    if budget_bytes is None:
        uncapped, cap = _largest_cap(source)
        budget_bytes = None if uncapped else cap
    # Every record, not one per size: the ranking must use the search trials (as the sweep
    # did), and a size is proven only by all of its runs. Of merged sweeps, a failure with
    # less memory than this budget's line says nothing about it.
    every = speaking_for(source.every_result or source.results, budget_bytes,
                         headroom_limit_bytes(budget_bytes, headroom))
    sizes = one_per_size(every, every_failure=True)
    rec = choose(every, budget_bytes, headroom, objective, margin=source.speed_margin)
    notices: list[str] = []
    label = budget_label(budget_bytes)
    mem = source.memory_label
    if not source.on_gpu:
        notices.append(CPU_NOTICE)
    uncapped, cap = _largest_cap(source)
    predicted = None
    if budget_bytes is not None and not uncapped and cap is not None and budget_bytes > cap:
        predicted = predict_size(source, budget_bytes, headroom)
        notices.append(f"the sweep measured under a {budget_label(cap)} budget, below this "
                       f"{label} one: sizes that need more than {budget_label(cap)} were never "
                       f"tried, so a larger num_envs may fit; run `vramtune sweep --gpu-mem "
                       f"{label}` to measure them")
    total = next((r.gpu_total_bytes for r in source.results if r.gpu_total_bytes), None)
    if budget_bytes is not None and total is not None and budget_bytes > total:
        notices.append(f"the {label} budget is larger than the {format_bytes(total)} card the "
                       f"sweep ran on: nothing above {format_bytes(total)} was measured")
    chosen = rec.chosen
    error = None
    change = None
    if chosen is None:
        error = _nothing_fits(sizes, every, rec, mem)
    else:
        bad = violations(chosen.num_envs, chosen.batch_size or 0, chosen.num_minibatches or 0,
                         chosen.device_count or 1)
        if bad:  # the runner never launches these; a hand-edited results file could hold one
            raise UserError(f"the measured trial at num_envs={chosen.num_envs} breaks "
                            f"{bad[0].rule}: the results file is damaged or edited")
        larger = [r for r in source.results if r.num_envs > chosen.num_envs]  # tried at all
        if not larger:
            notices.append(f"num_envs={chosen.num_envs} is the largest size measured and it "
                           f"fits: larger sizes were never tried; a sweep with a higher "
                           f"--max-envs may find a faster one")
        if chosen.memory_steady is False:
            notices.append(f"num_envs={chosen.num_envs}'s trial ended with its memory still "
                           f"growing (measure.max_intervals reached): only a long confirming "
                           f"run shows where it settles")
        change = optimisation_change(source.profile, chosen)
        rec = replace(rec, confirmation=confirmation_for(source, chosen.num_envs,
                                                          rec.limit_bytes))
    return Emission(budget_bytes, headroom, rec, tuple(notices), error, change, predicted, sizes)


PREDICT_SPAN = 8  # look up to 8x the largest size measured (and the profile's maximum)


def predict_size(source: Measurements, budget_bytes: int,
                 headroom_fraction: float) -> PredictedSize | None:
    """The largest round size the memory model, fitted to the measured peaks, puts under the
    budget's line with its upper bound; None when the model cannot say or says nothing more
    than what was measured."""
    every = source.every_result or source.results
    # On a GPU the pool, not the live peak, runs out of the allocator's limit, and it sits
    # at about twice the live peak (quick: 770 MiB of pool over 378 live at 1920 envs): a
    # line through the live peaks would put 13,312 envs under a 3 GB card where 1920 fill 2 GB.
    pool = uses_pool(every)

    def figure(r: TrialResult) -> int | None:
        return r.jax_peak_pool_bytes if pool else model_figure_bytes(r)

    results = [r for r in every if r.status is Status.OK and figure(r) is not None]
    points = [mm.Point(r.num_envs, float(figure(r) or 0), r.batch_size,
                       r.num_minibatches, r.unroll_length) for r in results]
    model = mm.fit(points)
    if model is None or model.growth()[1] <= 0:
        return None
    limit = headroom_limit_bytes(budget_bytes, headroom_fraction)
    assert limit is not None
    model_limit = limit
    gpu = [r for r in results if r.is_gpu and r.jax_bytes_limit and r.cap_bytes]
    if gpu:  # the allocator's limit sits below the cap by the CUDA context: keep that gap
        model_limit = limit - max(r.cap_bytes - r.jax_bytes_limit for r in gpu)  # type: ignore[operator]
    profile = source.profile
    largest = max(r.num_envs for r in results)
    top = max(profile.max_envs, PREDICT_SPAN * largest)
    grid = candidates(SearchSpace(start=min(r.num_envs for r in results), max_envs=top,
                                  refine=None, limit_bytes=limit,
                                  is_valid=lambda n: profile.sweepable(n),
                                  candidate=keeps_base_unrolls(profile, 1)))

    def shape_of(n: int) -> tuple[int, int, int] | None:
        shape = profile.shape_for(n)
        return None if shape is None else (shape.batch_size, shape.num_minibatches,
                                           profile.unroll_length)

    try:
        n = model.largest_fitting(grid, model_limit, shape_of)
    except ValueError:
        return None
    fitted = [r.num_envs for r in source.results if fits(r, limit)]
    if n is None or (fitted and n <= max(fitted)):
        return None
    pred = model.interval(n, shape_of(n))
    return PredictedSize(n, pred.mean_bytes, pred.upper_bytes, limit,
                         sweep_command(profile, budget_bytes, headroom_fraction, n),
                         "pool" if pool else "peak", int(model_limit) if gpu else None)


def sweep_command(profile: Profile, budget_bytes: int, headroom_fraction: float,
                  num_envs: int) -> str:
    """The sweep that would measure a budget: the built-in profile by name, else a file."""
    try:
        builtin = load_profile(profile.name).hash == profile.hash
    except UserError:
        builtin = False
    name = profile.name if builtin else "PROFILE.yaml"
    command = (f"vramtune sweep --profile {name} --gpu-mem {budget_label(budget_bytes)} "
               f"--headroom {headroom_fraction:.0%}")
    if num_envs >= profile.max_envs:
        command += f" --max-envs {2 * num_envs}"
    return command


def confirmation_for(source: Measurements, num_envs: int,
                     limit_bytes: int | None) -> TrialResult | None:
    """A long confirming run of this size that passed under a cap no larger than the
    budget's line: it proves this budget too. None if no such run exists."""
    for r in source.every_result:
        if (r.num_envs == num_envs and r.purpose is Purpose.CONFIRM and r.status is Status.OK
                and (limit_bytes is None or (r.cap_bytes is not None
                                             and r.cap_bytes <= limit_bytes))):
            return r
    return None


def _nothing_fits(sizes: Sequence[TrialResult], every: Sequence[TrialResult],
                  rec: Recommendation, mem: str) -> str:
    """Why no size fits: the smallest size's peak where it ran ok over the line, else the
    recommender's own words (a failed proof, a failure below every ok size)."""
    limit = both_units(rec.limit_bytes) if rec.limit_bytes is not None else "the budget"
    first = sizes[0] if sizes else None
    if first is not None and first.status is Status.OK and first.peak_bytes is not None and (
            rec.limit_bytes is None or (first.line_figure_bytes or 0) > rec.limit_bytes):
        # the figure the line is held against (under_line: the data segment / pool where
        # measured), the highest of the size's runs: one run over the line rules a size out
        runs = [r for r in every if r.num_envs == first.num_envs and r.status is Status.OK
                and r.peak_bytes is not None]
        top = max(runs, key=lambda r: r.line_figure_bytes or 0)
        what = f"{mem} {top.cap_figure_words}" if top.cap_figure_bytes is not None else mem
        of = f" (the highest of its {len(runs)} runs)" if len(runs) > 1 else ""
        return (f"no measured trial fits under the headroom line, {limit}; the smallest that "
                f"ran, num_envs={first.num_envs}, peaked at "
                f"{format_bytes(top.line_figure_bytes)} {what}{of}: measure smaller sizes "
                f"(vramtune sweep --start N) or use a larger budget")
    why = rec.notice or "no trial finished ok"
    if sizes and all(r.status in FAILED_BY_MEMORY for r in sizes):
        why = f"every trial ran out of memory or failed ({why})"
    return f"nothing to emit under the headroom line, {limit}: {why}"


def optimisation_change(profile: Profile, chosen: TrialResult) -> str | None:
    """What the chosen batch settings change relative to the profile's base, plus the LR hint."""
    base = profile.base_shape
    shape = BatchShape(chosen.num_envs, chosen.batch_size or base.batch_size,
                       chosen.num_minibatches or base.num_minibatches)
    lr = profile.ppo.get("learning_rate")
    hint = lr_scaling_hint(base, shape, profile.unroll_length,
                           float(lr) if isinstance(lr, int | float) else None)
    if hint is None:
        return None
    head = (f"the optimisation differs from the profile's base (batch_size {base.batch_size} x "
            f"num_minibatches {base.num_minibatches} at num_envs={base.num_envs}, scaling "
            f"{profile.scaling}): ")
    return head + hint
