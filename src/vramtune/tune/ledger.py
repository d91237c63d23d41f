"""Where the memory goes: each measured size's parts by role, what each role costs per env and
fixed, and the largest num_envs predicted for cards the user does not have.

A trial counts the parts (``measure/ledger.py``): the trainer's state by role, the evaluator's,
and XLA's figures for the epoch and the evaluation. They are held against the peak the trial
measured (the data segment on a CPU, the pool on a GPU, the figures the cap counts): what the
parts do not explain is its own line, never spread over the parts. On a CPU most of a small
workload's peak is the runtime, its libraries and the compiler (quick at 128 envs: parts ~36
MiB of a ~920 MiB data segment, benchmarks/results/ledger-probe-2026-12-07); the parts explain
what num_envs pays for.

Per env and fixed: a least-squares line through each role's bytes at the sizes measured (one
trial per size: the search trial's, which ran cold and alone or first), with its largest
residual. Cards: the peak's own line (measured, not the sum of the parts) solved for the
largest valid num_envs under each card's line, labelled predicted, with the range its
residual allows; a recommendation is only ever made from measured trials.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vramtune.errors import UserError
from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import Run
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.growth import (
    EvalShare,
    Growth,
    RunLength,
    eval_share,
    plausible_bytes,
    predict_growth,
)
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile, profile_from_dict
from vramtune.workload.rules import nearest_valid

# (record field, what the role is), in the order a ledger is shown
ROLES = (
    ("ledger_params_bytes", "params (policy, value)"),
    ("ledger_optimizer_bytes", "optimizer state"),
    ("ledger_normalizer_bytes", "obs normalizer"),
    ("ledger_env_state_bytes", "env state"),
    ("ledger_eval_state_bytes", "eval state, params copy"),
    ("ledger_keys_bytes", "step count, keys"),
    ("ledger_epoch_outputs_bytes", "epoch outputs kept"),
    ("ledger_epoch_temp_bytes", "XLA temp: epoch"),
    ("ledger_eval_temp_bytes", "XLA temp: eval"),
)
ROLLOUT = ("ledger_rollout_bytes", "rollout (in epoch temp)")
CARD_PEAK = "a card must hold"  # GPU: NVML's process figure (pool and outside it)
# never live together: the epoch's transients and the evaluation's temporaries
TRANSIENT = ("ledger_epoch_temp_bytes", "ledger_epoch_outputs_bytes", "ledger_eval_temp_bytes")
UNEXPLAINED = "unexplained"  # runtime, libraries, compiler, fragmentation: never spread
# Card sizes (GB) the predicted table covers: common consumer and data-centre cards
CARD_GB = (8, 12, 16, 24, 40, 48, 80, 141)
GB = 10**9


@dataclass(frozen=True)
class LedgerLine:
    """One line of a size's ledger: a role's bytes (None: not counted)."""

    field: str
    role: str
    bytes: int | None
    part_of: str | None = None  # the role this line is inside of (the rollout: the epoch's temp)


@dataclass(frozen=True)
class SizeLedger:
    """One measured size: its parts, the measured peak and what the parts do not explain."""

    num_envs: int
    lines: tuple[LedgerLine, ...]
    peak_bytes: int | None  # the figure the cap counts: data segment (CPU) / pool (GPU)
    peak_label: str
    parts_bytes: int | None  # the sum of the roles (the rollout is inside one of them)
    unexplained_bytes: int | None  # peak - parts; None when either is unknown
    outside_pool_bytes: int | None  # GPU: NVML's process figure minus the pool
    card_peak_bytes: int | None  # what a card must hold: NVML's process figure (GPU), the peak (CPU)
    card_spread_bytes: int | None = None  # max - min of that figure over the size's ok runs
    # the peak as it stood before and after the epoch's compile: which phase set the peak
    before_compile_bytes: int | None = None
    after_compile_bytes: int | None = None
    error: str | None = None  # why a part was not counted, as the trial child said
    # the peak as it stood before and after the first evaluation (its compile and run)
    before_eval_bytes: int | None = None
    after_eval_bytes: int | None = None
    memory_steady: bool | None = None  # False: the trial ended with its memory still growing

    def figures(self) -> dict[str, int | None]:
        """field -> bytes, with the unexplained part, the peak and what a card must hold."""
        out: dict[str, int | None] = {line.field: line.bytes for line in self.lines}
        out["transient_bytes"] = _transient({k: v for k, v in out.items() if v is not None}) \
            if any(out.get(f) is not None for f in TRANSIENT) else None
        out["unexplained_bytes"] = self.unexplained_bytes
        out["peak_bytes"] = self.peak_bytes
        out["card_peak_bytes"] = self.card_peak_bytes
        out["peak_before_epoch_compile_bytes"] = self.before_compile_bytes
        out["peak_after_epoch_compile_bytes"] = self.after_compile_bytes
        out["peak_before_eval_bytes"] = self.before_eval_bytes
        out["peak_after_eval_bytes"] = self.after_eval_bytes
        return out

    @property
    def uncounted(self) -> tuple[str, ...]:
        """The roles not counted: their bytes, if any, are in the unexplained part."""
        return tuple(line.role for line in self.lines
                     if line.bytes is None and line.part_of is None)

    def phases_words(self) -> str | None:
        """Which phase set the peak, in words; None when the phases were not read."""
        if self.before_compile_bytes is None or self.after_compile_bytes is None \
                or self.peak_bytes is None:
            return None
        evaluation = ""
        if self.before_eval_bytes is not None and self.after_eval_bytes is not None:
            evaluation = (f"{format_bytes(self.before_eval_bytes)} before the first evaluation "
                          f"(imports, env, init), {format_bytes(self.after_eval_bytes)} after "
                          f"its compile and run, ")
            before = "before the epoch's compile"
        else:
            before = "before the epoch's compile (imports, env, init, first evaluation)"
        return (f"the {self.peak_label} peak stood at {evaluation}"
                f"{format_bytes(self.before_compile_bytes)} {before}, "
                f"{format_bytes(self.after_compile_bytes)} after it, "
                f"{format_bytes(self.peak_bytes)} at the end of training")


@dataclass(frozen=True)
class RoleFit:
    """A role's bytes as fixed + per_env x num_envs over the sizes measured."""

    field: str
    role: str
    per_env_bytes: float | None  # None: fewer than two sizes counted it
    fixed_bytes: float | None
    residual_bytes: float | None  # the largest |measured - line| over the sizes
    sizes: int


@dataclass(frozen=True)
class CardPrediction:
    """The largest valid num_envs predicted to fit a card of ``card_bytes`` (never measured)."""

    card_bytes: int
    line_bytes: int  # the card less the headroom
    num_envs: int | None  # None: not even the smallest size, or no line to solve
    low_num_envs: int | None  # with the peak line's largest residual added
    high_num_envs: int | None  # and taken off
    # how far past the largest size measured the prediction reaches (num_envs / that size)
    times_measured: float | None = None
    capped: bool = False  # num_envs stopped at MAX_NUM_ENVS, the most vramtune accepts


def _transient(known: dict[str, int]) -> int:
    """The larger of the epoch's transients and the evaluation's temporaries."""
    epoch = sum(known.get(f, 0) for f in ("ledger_epoch_temp_bytes", "ledger_epoch_outputs_bytes"))
    return max(epoch, known.get("ledger_eval_temp_bytes", 0))


def has_ledger(result: TrialResult) -> bool:
    return result.ledger_epoch_temp_bytes is not None or result.ledger_params_bytes is not None


def _ledger_errors(results: Sequence[TrialResult]) -> list[str]:
    return [f"{r.num_envs} envs: {r.ledger_error}" for r in results if r.ledger_error]


def size_ledger(result: TrialResult) -> SizeLedger:
    """The ledger of one trial."""
    lines = [LedgerLine(f, role, plausible_bytes(getattr(result, f))) for f, role in ROLES]
    lines.append(LedgerLine(ROLLOUT[0], ROLLOUT[1], plausible_bytes(result.ledger_rollout_bytes),
                            part_of="ledger_epoch_temp_bytes"))
    # A role not counted (no evaluation ran: run_evals off; a call the child could not read)
    # is left out of the parts and so stays inside the unexplained part, which says so
    # (``SizeLedger.uncounted``); no part at all counted: nothing is explained. The epoch's
    # transients (its temporaries and outputs) and the evaluation's temporaries are never
    # live at once (brax evaluates between epochs): the larger of the two counts.
    known = {line.field: line.bytes for line in lines
             if line.part_of is None and line.bytes is not None}
    parts = (sum(b for f, b in known.items() if f not in TRANSIENT) + _transient(known)
             if known else None)
    peak = plausible_bytes(result.line_figure_bytes)
    unexplained = peak - parts if peak is not None and parts is not None else None
    outside = plausible_bytes(result.outside_pool_bytes) if result.is_gpu else None
    card = plausible_bytes(result.peak_bytes) if result.is_gpu else peak
    return SizeLedger(result.num_envs, tuple(lines), peak,
                      result.cap_figure_words or "peak", parts, unexplained, outside, card,
                      before_compile_bytes=plausible_bytes(result.ledger_peak_before_epoch_compile_bytes),
                      after_compile_bytes=plausible_bytes(result.ledger_peak_after_epoch_compile_bytes),
                      error=result.ledger_error,
                      before_eval_bytes=plausible_bytes(result.ledger_peak_before_eval_bytes),
                      after_eval_bytes=plausible_bytes(result.ledger_peak_after_eval_bytes),
                      memory_steady=result.memory_steady
                      if isinstance(result.memory_steady, bool) else None)


def ledgers(results: Sequence[TrialResult]) -> list[SizeLedger]:
    """One ledger per size measured, ascending: that size's search trial where it has one
    (cold, the figure the boundary was decided on), else its first ok trial with a ledger;
    with the spread of what a card must hold over all of that size's ok runs."""
    chosen: dict[int, TrialResult] = {}
    figures: dict[int, list[int]] = {}
    for r in results:
        if r.status is not Status.OK or r.num_envs <= 0:
            continue
        card = size_ledger(r).card_peak_bytes
        if card is not None:
            figures.setdefault(r.num_envs, []).append(card)
        if not has_ledger(r):
            continue
        held = chosen.get(r.num_envs)
        if held is None or (held.purpose is not Purpose.SEARCH and r.purpose is Purpose.SEARCH):
            chosen[r.num_envs] = r
    out = []
    for n in sorted(chosen):
        seen = figures.get(n, [])
        spread = max(seen) - min(seen) if len(seen) > 1 else None
        out.append(dataclasses.replace(size_ledger(chosen[n]), card_spread_bytes=spread))
    return out


def fit_roles(rows: Sequence[SizeLedger]) -> list[RoleFit]:
    """Each role's per-env and fixed bytes, then the unexplained part's and the peak's. The
    residual needs a third size (a line through two has none); what a card must hold also
    takes the largest spread between runs of one size, whichever is larger."""
    fields = [*ROLES, ROLLOUT, ("unexplained_bytes", UNEXPLAINED), ("peak_bytes", "measured peak"),
              ("card_peak_bytes", CARD_PEAK)]
    fits = []
    for field, role in fields:
        points = [(row.num_envs, row.figures()[field]) for row in rows]
        known = [(n, b) for n, b in points if b is not None]
        per_env, fixed, residual = _line(known)
        if field == "card_peak_bytes":
            spreads = [r.card_spread_bytes for r in rows if r.card_spread_bytes is not None]
            residual = max([*spreads, *([residual] if residual is not None else [])],
                           default=None)
        fits.append(RoleFit(field, role, per_env, fixed, residual, len(known)))
    return fits


def _line(points: Sequence[tuple[int, int]]) -> tuple[float | None, float | None, float | None]:
    """Least squares through (num_envs, bytes) and its largest residual (None through two
    sizes: any line fits two); (None, None, None) under two distinct sizes."""
    if len({n for n, _ in points}) < 2:
        return None, None, None
    xs = [float(n) for n, _ in points]
    ys = [float(b) for _, b in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) \
        / sum((x - mx) ** 2 for x in xs)
    fixed = my - slope * mx
    if len(points) < 3:
        return slope, fixed, None
    residual = max(abs(y - (fixed + slope * x)) for x, y in zip(xs, ys, strict=True))
    return slope, fixed, residual


def predict_cards(card_peak: RoleFit, headroom_fraction: float,
                  valid_below: Callable[[int], int | None], largest_measured: int,
                  cards_gb: Sequence[int] = CARD_GB) -> list[CardPrediction]:
    """For each card: the largest valid num_envs whose predicted peak (``card_peak``: the fit
    of what a card must hold) stays under the card's line, the range the fit's largest
    residual allows (the spread seen, not the slope's own uncertainty), and how far past
    ``largest_measured`` it reaches. Predicted, never measured; never past MAX_NUM_ENVS."""
    peak = card_peak
    out = []
    for gb in cards_gb:
        card = gb * GB
        line = int(card * (1 - headroom_fraction))
        if peak.per_env_bytes is None or peak.fixed_bytes is None or peak.per_env_bytes <= 0:
            out.append(CardPrediction(card, line, None, None, None))
            continue
        residual = peak.residual_bytes

        def solve(room: float) -> int | None:
            n = math.floor((room - peak.fixed_bytes) / peak.per_env_bytes)  # type: ignore[operator]
            return valid_below(min(n, MAX_NUM_ENVS)) if n >= 1 else None

        n = solve(line)
        raw = math.floor((line - peak.fixed_bytes) / peak.per_env_bytes)
        out.append(CardPrediction(card, line, n,
                                  None if residual is None else solve(line - residual),
                                  None if residual is None else solve(line + residual),
                                  times_measured=n / largest_measured if n else None,
                                  capped=raw > MAX_NUM_ENVS))
    return out


@dataclass(frozen=True)
class Explanation:
    """A saved sweep's memory, explained: what ``vramtune.explain`` returns."""

    run_dir: str
    profile: str
    backend: str  # "cpu": host memory; "gpu": per device
    headroom_fraction: float
    num_envs: int | None  # the size shown
    predicted: bool  # the shown size was not measured: its ledger is the fits' prediction
    shown: tuple[tuple[str, str, int | None], ...]  # (field, role, bytes) of the size shown
    shown_peak_bytes: int | None
    phases: str | None  # which phase set the shown size's peak (measured sizes only)
    error: str | None  # the shown size's count failed in part: why
    sizes: tuple[SizeLedger, ...]
    fits: tuple[RoleFit, ...]
    cards: tuple[CardPrediction, ...]
    # the run's length priced (measured sizes; None: no num_timesteps given)
    growth: Growth | None = None
    evaluation: EvalShare | None = None  # the evaluation against training at the size shown
    still_growing: bool = False  # the size shown: its trial ended with memory still growing

    @property
    def warnings(self) -> tuple[str, ...]:
        """What to know before the long run: a run whose epochs will not fit, an evaluation
        holding more than the training, a trial whose own memory had not stopped growing."""
        said = [w.warning() for w in (self.growth, self.evaluation) if w is not None]
        if self.still_growing:
            said.append(f"{self.num_envs} envs: its trial ended with its memory still growing "
                        f"(measure.max_intervals reached): a long run may grow past every "
                        f"figure here; only a long confirming run (the sweep's, or `vramtune "
                        f"verify`) shows where it stops")
        return tuple(w for w in said if w)

    @property
    def memory_words(self) -> str:
        return "host memory (RAM), not VRAM" if self.backend == "cpu" else "GPU memory per device"


def shown_lines(size: SizeLedger) -> tuple[tuple[str, str, int | None], ...]:
    """A measured size's lines for the ledger table: roles, the rollout inside the epoch's
    temporaries, the unexplained part, the peak."""
    lines = [(line.field, line.role, line.bytes) for line in size.lines]
    missing = size.uncounted
    unexplained = UNEXPLAINED + (f" (with {', '.join(missing)}: not counted)" if missing else "")
    lines.append(("unexplained_bytes", unexplained, size.unexplained_bytes))
    lines.append(("peak_bytes", f"peak ({size.peak_label})", size.peak_bytes))
    return tuple(lines)


def predicted_lines(fits: tuple[RoleFit, ...], num_envs: int
                    ) -> tuple[tuple[tuple[str, str, int | None], ...], int | None]:
    """An unmeasured size's lines from the fits, and its predicted peak (labelled so)."""
    by_field = {f.field: f for f in fits}

    def at(field: str) -> int | None:
        fit = by_field.get(field)
        if fit is None or fit.per_env_bytes is None or fit.fixed_bytes is None:
            return None
        return int(round(fit.fixed_bytes + fit.per_env_bytes * num_envs))  # may be < 0: a poor fit shows

    fields = [*ROLES, ROLLOUT, ("unexplained_bytes", UNEXPLAINED)]
    lines = [(field, f"{role} (predicted)", at(field)) for field, role in fields]
    peak = at("peak_bytes")
    lines.append(("peak_bytes", "peak (predicted)", peak))
    return tuple(lines), peak


def before_the_run(results: Sequence[TrialResult], num_envs: int, profile: Profile,
                   run_length: RunLength | None, line_bytes: int | None
                   ) -> tuple[Growth | None, EvalShare | None]:
    """At a measured size: the run's peak at ``run_length`` (None: not priced) and the
    evaluation against training (its ledger's search trial)."""
    growth = (None if run_length is None else
              predict_growth(results, num_envs, profile, run_length, line_bytes))
    row = next((s for s in ledgers(results) if s.num_envs == num_envs), None)
    return growth, None if row is None else eval_share(row.figures(), num_envs, profile)


def explain_run(run: Run, num_envs: int | None, headroom_fraction: float, *,
                default_num_envs: int | None = None,
                cards_gb: Sequence[int] = CARD_GB,
                run_length: RunLength | None = None,
                line_bytes: int | None = None) -> Explanation:
    """A saved sweep's ledger: ``num_envs`` (measured, else predicted from the fits; None:
    ``default_num_envs``, the sweep's pick, else the largest size with a ledger), every size,
    the fits, the cards; with ``run_length``, the run's peak at
    that length against ``line_bytes`` (measured sizes only: a predicted size's runs are not
    there to add to). A UserError when no trial counted a ledger (a run from before it)."""
    sizes = ledgers(run.results)
    if not sizes:
        errors = _ledger_errors(run.results)
        raise UserError("no trial in this run counted where its memory went: " + (
            f"the count failed ({errors[0][:300]})" if errors else
            "a run made before the ledger, or no trial ended ok; run the sweep again"))
    profile = profile_from_dict(run.header.profile, source=f"{run.directory}: profile")
    devices = run.header.search.devices

    def valid_below(n: int) -> int | None:
        """The largest num_envs up to n that Brax's batch rule allows with this profile."""
        if profile.shape_for(n, devices) is not None:
            return n
        return nearest_valid(profile.scaling, profile.base_shape, n, devices)[0]

    fits = tuple(fit_roles(sizes))
    card_fit = next(f for f in fits if f.field == "card_peak_bytes")
    cards = tuple(predict_cards(card_fit, headroom_fraction, valid_below,
                                sizes[-1].num_envs, cards_gb))
    by_size = {s.num_envs: s for s in sizes}
    n = num_envs if num_envs is not None else (
        default_num_envs if default_num_envs in by_size else sizes[-1].num_envs)
    if num_envs is not None and profile.shape_for(num_envs, devices) is None:
        below, above = nearest_valid(profile.scaling, profile.base_shape, num_envs, devices)
        raise UserError(f"--num-envs {num_envs} breaks Brax's batch rule with this profile "
                        f"(nearest valid: {below or 'none'} below, {above or 'none'} above)")
    backend = "gpu" if any(r.is_gpu for r in run.results) else "cpu"
    phases = error = growth = evaluation = None
    if n in by_size:
        shown, peak, predicted = shown_lines(by_size[n]), by_size[n].peak_bytes, False
        phases, error = by_size[n].phases_words(), by_size[n].error
        growth, evaluation = before_the_run(run.results, n, profile, run_length, line_bytes)
    else:
        if len(sizes) < 2:
            raise UserError(f"{n} envs was not measured, and one measured size "
                            f"({sizes[0].num_envs}) is not enough to predict it")
        shown, peak = predicted_lines(fits, n)
        predicted = True
    growing = n in by_size and by_size[n].memory_steady is False
    return Explanation(str(run.directory), run.header.profile_name, backend, headroom_fraction,
                       n, predicted, shown, peak, phases, error, tuple(sizes), fits, cards,
                       growth, evaluation, growing)
