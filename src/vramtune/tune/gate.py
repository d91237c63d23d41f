"""CI regression gate: repeated trials compared with a stored baseline, metric by metric,
in four tiers.

- deterministic: XLA's compile-time figures of the training epoch (buffer bytes, flops, bytes
  accessed) are identical run to run for one profile under one set of versions, so any move
  past a tight threshold (1%) is the code's or the versions', never the runner's. A move that
  came with a version change is still a regression (a JAX upgrade that grows temp memory is
  what a user gates for), and the verdict names the versions that moved with it.
- measured: peak memory by repeats, a change past its threshold AND distinguishable repeats
  (asv's rule: a ratio alone would fail CI on every noisy runner, distinguishability alone on
  every 1% drift).
- counted: instructions retired per env step, counted by the CPU over the trial's measuring
  window (``measure.counters``), by the same rule. It follows the code, not the runner: a
  neighbour or a slower day changes how long an instruction takes, not how many a step
  retires, so a training step that does more work reads more whatever the day's speed. Load
  moves it through spinning: XLA's pool threads spin less when they share the cores, so a
  loaded run counted fewer (``quick`` on the 2-core VM: idle runs within 0.9% of an idle
  baseline, every run beside a busy loop -4.7% at 64 envs and -1.9% at 256). It is compared only
  between CPUs with the same instruction set (XLA compiles for it). It does not see a
  slowdown that retires the same instructions (cache misses): the normalised tier does,
  coarsely.
- normalised: steps per CPU second (steps/s over the CPU seconds per second the trial's
  process used while it measured, ``measure.cpu_share``), by the same rule: a busy runner's
  neighbours divide out, the day's speed does not. A baseline without CPU shares falls back
  to raw steps/s.
Direction matters: more memory, flops or bytes are worse, more steps/s is better.

The baseline is keyed by machine (CPU model or GPU name, device count, backend): figures
from another machine are not comparable, so the CLI refuses them unless forced.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vramtune.records import Status
from vramtune.results.baseline import OLDER_SCHEMAS, Sample, SizeRecord, Snapshot, XlaFigures

RANK_TEST_MIN_REPEATS = 4  # below this a one-sided Mann-Whitney U cannot reach p < 0.05
RANK_TEST_ALPHA = 0.05
DEFAULT_MAX_MEM_INCREASE = 0.05
DEFAULT_MAX_SPEED_DROP = 0.10
DEFAULT_MAX_XLA_INCREASE = 0.01
# Instructions per env step: idle runs within 0.8% of an idle baseline; load lowers the count
# (less spinning) by up to 4.7%, so an idle run against a baseline saved under load reads up
# to +4.9%. 6% is above both; an env 10-20% slower per CPU second read +27% to +49%.
DEFAULT_MAX_INSTRUCTIONS_INCREASE = 0.06


class Tier(StrEnum):
    DETERMINISTIC = "deterministic"  # XLA's compile-time figures
    MEASURED = "measured"  # peak memory by repeats
    COUNTED = "counted"  # instructions per env step, the CPU's counter
    NORMALISED = "normalised"  # steps per CPU second of the trial
    RAW = "raw"  # steps/s as measured (a baseline without CPU shares, or a GPU)
    STATUS = "status"  # trials that failed (oom under the cap, crash, ...)


XLA_LABELS = {"total_bytes": "total bytes", "argument_bytes": "argument bytes",
              "output_bytes": "output bytes", "alias_bytes": "alias bytes",
              "temp_bytes": "temp bytes", "generated_code_bytes": "code bytes",
              "flops": "flops", "bytes_accessed": "bytes accessed"}
XLA_LOWER_IS_WORSE = frozenset({"alias_bytes"})  # aliased outputs reuse the inputs' memory


# --- comparison -----------------------------------------------------------------------------

class Metric(StrEnum):
    MEMORY = "memory"  # higher is worse
    SPEED = "steps/s"  # higher is better
    XLA = "xla"  # compile-time figures: higher is worse (alias bytes: lower)
    WORK = "instructions"  # instructions per env step: higher is worse


class Verdict(StrEnum):
    WORSE = "worse"  # past the threshold and distinguishable, the bad way
    BETTER = "better"  # past the threshold and distinguishable, the good way
    SAME = "same"  # within the threshold
    NOISY = "noisy"  # past the threshold but the repeats overlap: within noise
    FAILED = "failed"  # the candidate failed (oom, crash, ...) where the baseline was ok
    FIXED = "fixed"  # the baseline failed, the candidate is ok
    BOTH_FAILED = "both failed"
    NEW = "new"  # no baseline for this num_envs
    UNMEASURED = "n/a"  # a side has no figure


REGRESSIONS = frozenset({Verdict.WORSE, Verdict.FAILED})


@dataclass(frozen=True)
class Thresholds:
    max_mem_increase: float = DEFAULT_MAX_MEM_INCREASE  # fraction: 0.05 = +5% peak memory
    max_speed_drop: float = DEFAULT_MAX_SPEED_DROP  # fraction: 0.10 = -10% steps/s
    max_xla_increase: float = DEFAULT_MAX_XLA_INCREASE  # fraction of any XLA figure
    max_instructions_increase: float = DEFAULT_MAX_INSTRUCTIONS_INCREASE  # per env step


@dataclass(frozen=True)
class Distinguishable:
    """Whether two sets of repeats differ in the given direction, and by which test."""

    result: bool
    method: str  # "ranges" or "mann-whitney"
    p_value: float | None = None


def distinguishable(baseline: Sequence[float], candidate: Sequence[float],
                    higher: bool) -> Distinguishable:
    """Does the candidate sit above (higher=True) or below the baseline beyond overlap?

    Non-overlapping ranges always count. With >= 4 repeats on each side a one-sided
    Mann-Whitney U test (p < 0.05) may also count, tolerating a little overlap; below that
    it cannot reach p < 0.05 and the range test is the honest one."""
    if not baseline or not candidate:
        return Distinguishable(False, "ranges")
    if higher:
        apart = min(candidate) > max(baseline)
    else:
        apart = max(candidate) < min(baseline)
    if apart or min(len(baseline), len(candidate)) < RANK_TEST_MIN_REPEATS:
        return Distinguishable(apart, "ranges")
    from scipy.stats import mannwhitneyu  # a core dependency; imported when a test needs it

    p = float(mannwhitneyu(candidate, baseline, alternative="greater" if higher else "less").pvalue)
    return Distinguishable(p < RANK_TEST_ALPHA, "mann-whitney", p)


@dataclass(frozen=True)
class MetricRow:
    """One line of the bench table: one metric of one num_envs, baseline against candidate."""

    num_envs: int
    metric: str  # Metric value, or "status"
    label: str  # what is shown: "peak host RAM", "peak VRAM", "steps/s", "status"
    baseline_values: tuple[float, ...]
    candidate_values: tuple[float, ...]
    baseline_median: float | None
    candidate_median: float | None
    change: float | None  # candidate / baseline - 1
    threshold: float | None  # the fraction this metric is allowed to move the bad way
    test: str | None  # distinguishability test used
    p_value: float | None
    verdict: Verdict
    detail: str = ""  # the first error of a failed trial, etc.
    baseline_statuses: str = ""  # "ok 2/2" on the status row
    candidate_statuses: str = ""
    tier: str = ""  # Tier value: which tier judged this row

    @property
    def headline(self) -> str:
        """What a one-line verdict says of this row: "XLA temp bytes +6.2% at 256 envs"."""
        at = f"at {self.num_envs} envs"
        if self.metric == "status":
            return (f"trials {self.verdict} {at} ({self.candidate_statuses}"
                    + (f": {self.detail}" if self.detail else "") + ")")
        if self.change is not None:
            change = f"{self.change:+.1%}"
        elif self.baseline_median == 0 and self.candidate_median:
            change = f"from 0 to {self.candidate_median:.4g}"
        else:
            change = "n/a"
        text = f"{self.label} {change} {at}"
        if self.p_value is not None:
            text += f", p={self.p_value:.2g}"
        return f"{text} ({self.tier} tier)" if self.tier else text

    @property
    def regression(self) -> bool:
        return self.verdict in REGRESSIONS


def judge(baseline: Sequence[float], candidate: Sequence[float], *, higher_is_worse: bool,
          threshold: float) -> tuple[Verdict, float | None, Distinguishable | None]:
    """Verdict for one metric: ratio past threshold AND distinguishable, direction-aware."""
    if not baseline or not candidate:
        return Verdict.UNMEASURED, None, None
    base, cand = statistics.median(baseline), statistics.median(candidate)
    if base <= 0:
        return Verdict.UNMEASURED, None, None
    change = cand / base - 1
    if abs(change) <= threshold + 1e-12:  # exactly at the threshold is within it
        return Verdict.SAME, change, None
    went_up = change > 0
    test = distinguishable(baseline, candidate, higher=went_up)
    if not test.result:
        return Verdict.NOISY, change, test
    worse = went_up if higher_is_worse else not went_up
    return (Verdict.WORSE if worse else Verdict.BETTER), change, test


def _status_counts(samples: Sequence[Sample]) -> str:
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.status] = counts.get(s.status, 0) + 1
    return ", ".join(f"{k} {v}/{len(samples)}" for k, v in sorted(counts.items()))


def _xla_moves(base: XlaFigures, cand: XlaFigures) -> list[tuple[str, float, float, float]]:
    """(figure, baseline, candidate, change) of every figure that moved at all."""
    moves = []
    b_fig, c_fig = base.figures(), cand.figures()
    for key in XLA_LABELS:
        b, c = b_fig.get(key), c_fig.get(key)
        if b is None or c is None or b == c:
            continue
        change = c / b - 1 if b > 0 else float("inf")
        moves.append((key, float(b), float(c), change))
    return moves


def _move_words(b: float, c: float, change: float) -> str:
    return f"{change:+.1%}" if math.isfinite(change) else f"from 0 to {c:.4g}"


def _version_changes(base: dict[str, str], cand: dict[str, str]) -> list[str]:
    return [f"{k} {base.get(k, 'n/a')} -> {cand.get(k, 'n/a')}"
            for k in sorted(set(base) | set(cand))
            if base.get(k) != cand.get(k) and k != "vramtune"]


def compare_xla(n: int, base: XlaFigures | None, cand: XlaFigures | None, threshold: float, *,
                base_why: str | None = None, cand_why: str | None = None) -> MetricRow:
    """The deterministic tier's row for one size. No repeats and no test: the figures are the
    same on every run of one profile under one set of versions, so a move past the threshold
    is the code's or the versions'. The row shows the figure that moved most the bad way (or
    the total, when none did); the detail lists every figure that moved."""
    def row(label: str, b: float | None, c: float | None, change: float | None,
            verdict: Verdict, detail: str) -> MetricRow:
        return MetricRow(n, str(Metric.XLA), label, () if b is None else (b,),
                         () if c is None else (c,), b, c, change, threshold, None, None,
                         verdict, detail, tier=str(Tier.DETERMINISTIC))

    if cand is None:
        return row("XLA total bytes", None if base is None else base.total_bytes, None, None,
                   Verdict.UNMEASURED, f"not compiled: {cand_why}" if cand_why else
                   "not compiled")
    if base is None:
        return row("XLA total bytes", None, cand.total_bytes, None, Verdict.UNMEASURED,
                   f"the baseline has none ({base_why or 'an older baseline'}): refresh it "
                   f"with --save")
    moves = _xla_moves(base, cand)
    bad = [(k, b, c, ch) for k, b, c, ch in moves
           if (ch < -threshold if k in XLA_LOWER_IS_WORSE else ch > threshold)]
    good = [(k, b, c, ch) for k, b, c, ch in moves
            if (ch > threshold if k in XLA_LOWER_IS_WORSE else ch < -threshold)]
    listed = ", ".join(f"{XLA_LABELS[k]} {_move_words(b, c, ch)}" for k, b, c, ch in moves[:8])
    versions = _version_changes(base.versions, cand.versions)
    detail = listed
    if moves and versions:
        detail += f"; moved with the versions ({', '.join(versions)})"
    if bad or good:
        key, b, c, change = max(bad or good, key=lambda m: abs(m[3]))
        # a move from 0 has no relative change: None (the detail says 'from 0')
        return row(f"XLA {XLA_LABELS[key]}", b, c, change if math.isfinite(change) else None,
                   Verdict.WORSE if bad else Verdict.BETTER, detail)
    total_change = cand.total_bytes / base.total_bytes - 1 if base.total_bytes else None
    return row("XLA total bytes", base.total_bytes, cand.total_bytes, total_change,
               Verdict.SAME, detail)


def compare_counts(n: int, base: SizeRecord, cand: SizeRecord, threshold: float,
                   other_isa: str | None) -> MetricRow | None:
    """The counted tier's row: instructions per env step, repeats against repeats by the
    measured tier's rule. None when neither side counted (a GPU, a refused counter)."""
    b, c = base.instruction_counts(), cand.instruction_counts()
    if not b and not c:
        return None
    label = "instructions per env step"
    verdict, change, test, detail = Verdict.UNMEASURED, None, None, ""
    if not b:
        detail = "the baseline has none (an older file, or its counter was refused)"
    elif not c:
        detail = "not counted in every repeat here (the CPU's counter refused or multiplexed)"
    elif other_isa:
        detail = other_isa
    else:
        verdict, change, test = judge(b, c, higher_is_worse=True, threshold=threshold)
        if verdict is Verdict.BETTER:
            detail = "fewer instructions: load lowers the count too (threads spin less)"
    return MetricRow(n, str(Metric.WORK), label, tuple(b), tuple(c), _median(b), _median(c),
                     change, threshold, test.method if test else None,
                     test.p_value if test else None, verdict, detail, tier=str(Tier.COUNTED))


def compare_size(base: SizeRecord | None, cand: SizeRecord, thresholds: Thresholds, *,
                 normalise: bool = True, cap_bytes: int | None = None,
                 other_isa: str | None = None) -> list[MetricRow]:
    """Rows for one num_envs: a status row when trials failed, then the XLA figures, the
    instruction counts, peak memory and steps/s (normalised when both sides have CPU shares
    and ``normalise``). ``other_isa``: why instruction counts are not comparable, if not.
    """
    rows: list[MetricRow] = []
    n = cand.num_envs
    mem_label = f"peak {cand.memory_label}"
    if base is None:
        cand_norm = cand.normalised_rates()
        for metric, label, values, tier in (
                *([(Metric.XLA, "XLA total bytes", [cand.xla.total_bytes], Tier.DETERMINISTIC)]
                  if cand.xla else []),
                (Metric.MEMORY, mem_label, cand.peaks_bytes(), Tier.MEASURED),
                (Metric.SPEED, "steps/s", cand.rates_per_s(), Tier.RAW)):
            rows.append(MetricRow(n, str(metric), label, (), tuple(values), None,
                                  _median(values), None, None, None, None, Verdict.NEW,
                                  _status_counts(cand.samples) if cand.failures else "",
                                  tier=str(tier)))
        for metric, label, values, tier in (
                (Metric.WORK, "instructions per env step", cand.instruction_counts(),
                 Tier.COUNTED),
                (Metric.SPEED, "steps/s (normalised)", cand_norm, Tier.NORMALISED)):
            if values:
                rows.append(MetricRow(n, str(metric), label, (), tuple(values), None,
                                      _median(values), None, None, None, None, Verdict.NEW,
                                      tier=str(tier)))
        return rows
    base_failed, cand_failed = bool(base.failures), bool(cand.failures)
    if base_failed or cand_failed:
        if cand_failed and not base_failed:
            verdict = Verdict.FAILED
        elif base_failed and not cand_failed:
            verdict = Verdict.FIXED
        else:
            verdict = Verdict.BOTH_FAILED
        errors = sorted({s.error for s in cand.failures if s.error})
        detail = errors[0] if errors else ""
        if verdict is Verdict.FAILED and cap_bytes is not None and any(
                s.status == Status.OOM for s in cand.failures):
            detail = (f"out of memory under the {cap_bytes / 2**30:.2f} GiB budget, where the "
                      f"baseline fitted" + (f" ({detail})" if detail else ""))
        rows.append(MetricRow(n, "status", "trials", (), (), None, None, None, None, None, None,
                              verdict, detail, _status_counts(base.samples),
                              _status_counts(cand.samples), tier=str(Tier.STATUS)))
    if base.xla is not None or cand.xla is not None:  # neither: an older baseline, noted once
        rows.append(compare_xla(n, base.xla, cand.xla, thresholds.max_xla_increase,
                                base_why=base.xla_error, cand_why=cand.xla_error))
    counted = compare_counts(n, base, cand, thresholds.max_instructions_increase, other_isa)
    if counted is not None:
        rows.append(counted)
    b_norm, c_norm = base.normalised_rates(), cand.normalised_rates()
    normalised = normalise and bool(b_norm and c_norm)
    if normalised:
        speed = ("steps/s (normalised)", b_norm, c_norm, Tier.NORMALISED)
    else:
        speed = ("steps/s", base.rates_per_s(), cand.rates_per_s(), Tier.RAW)
    for metric, label, b, c, worse_up, thr, tier in (
            (Metric.MEMORY, mem_label, base.peaks_bytes(), cand.peaks_bytes(), True,
             thresholds.max_mem_increase, Tier.MEASURED),
            (Metric.SPEED, speed[0], speed[1], speed[2], False, thresholds.max_speed_drop,
             speed[3])):
        verdict, change, test = judge(b, c, higher_is_worse=worse_up, threshold=thr)
        detail = ""
        if metric is Metric.MEMORY and base.memory_label != cand.memory_label:
            verdict, change, test = Verdict.UNMEASURED, None, None
            detail = f"baseline is {base.memory_label}, candidate {cand.memory_label}"
        if metric is Metric.SPEED:
            detail = _speed_detail(base, cand, normalised)
        rows.append(MetricRow(n, str(metric), label, tuple(b), tuple(c), _median(b), _median(c),
                              change, thr, test.method if test else None,
                              test.p_value if test else None, verdict, detail, tier=str(tier)))
    return rows


def _ratio(b: Sequence[float], c: Sequence[float]) -> float | None:
    mb, mc = _median(b), _median(c)
    return None if not mb or mc is None else mc / mb - 1


def _speed_detail(base: SizeRecord, cand: SizeRecord, normalised: bool) -> str:
    """What the normalised figure divided out: the raw and the CPU share changes."""
    raw = _ratio(base.rates_per_s(), cand.rates_per_s())
    if not normalised:
        return ""
    ref = _ratio(base.cpu_shares(), cand.cpu_shares())
    parts = [f"raw {raw:+.0%}" if raw is not None else "",
             f"CPU share {ref:+.0%}" if ref is not None else ""]
    return ", ".join(p for p in parts if p)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class BenchReport:
    baseline: Snapshot | None
    candidate: Snapshot
    thresholds: Thresholds
    rows: tuple[MetricRow, ...]
    notes: tuple[str, ...] = ()  # what differs between the two sides (machine forced, versions, ...)

    @property
    def regressions(self) -> list[MetricRow]:
        return [r for r in self.rows if r.regression]

    @property
    def passed(self) -> bool:
        return not self.regressions

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "regressions": len(self.regressions),
                "thresholds": self.thresholds.__dict__,
                "machine": self.candidate.machine.to_dict(),
                "profile": {"name": self.candidate.profile_name,
                            "hash": self.candidate.profile_hash},
                "baseline": None if self.baseline is None else {
                    "machine": self.baseline.machine.to_dict(),
                    "profile": {"name": self.baseline.profile_name,
                                "hash": self.baseline.profile_hash},
                    "versions": self.baseline.versions, "updated": self.baseline.updated},
                "versions": self.candidate.versions, "notes": list(self.notes),
                "rows": [{**r.__dict__, "verdict": str(r.verdict),
                          "baseline_values": list(r.baseline_values),
                          "candidate_values": list(r.candidate_values)} for r in self.rows]}


def differences(baseline: Snapshot, candidate: Snapshot) -> list[str]:
    """What differs besides the code under test: worth a line above the table."""
    notes = []
    if not baseline.machine.matches(candidate.machine):
        notes.append(f"baseline measured on another machine ({baseline.machine.describe()}; this "
                     f"is {candidate.machine.describe()}): compared anyway (--force)")
    if baseline.profile_hash != candidate.profile_hash:
        notes.append(f"profile differs from the baseline's: {baseline.profile_name} "
                     f"{baseline.profile_hash} -> {candidate.profile_name} {candidate.profile_hash}")
    changed = [f"{k} {baseline.versions.get(k, 'n/a')} -> {candidate.versions.get(k, 'n/a')}"
               for k in sorted(set(baseline.versions) | set(candidate.versions))
               if baseline.versions.get(k) != candidate.versions.get(k)]
    if changed:
        notes.append("versions differ: " + ", ".join(changed))
    if baseline.compile_cache != candidate.compile_cache:
        notes.append("one side compiled with a warm cache: CPU peak memory is not comparable")
    if baseline.older_format is not None:
        lacks, so = OLDER_SCHEMAS[baseline.older_format]
        notes.append(f"the baseline is in an older format (schema {baseline.older_format}): "
                     f"it has {lacks}, so {so}; refresh it with --save")
    if baseline.cap_bytes != candidate.cap_bytes:
        notes.append(f"the baseline ran under {_budget(baseline.cap_bytes)}, this run under "
                     f"{_budget(candidate.cap_bytes)}: failures under a cap are not comparable")
    if baseline.cpu_features and candidate.cpu_features \
            and baseline.cpu_features != candidate.cpu_features:
        notes.append("the baseline's CPU has another instruction set: instruction counts are "
                     "not compared (XLA compiled other instructions)")
    if candidate.machine.backend == "cpu" and not any(
            s.instruction_counts() for s in candidate.sizes):
        notes.append("the counted tier is off: the CPU's instruction counter was refused here "
                     "(perf_event_paranoid above 2, no PMU in the VM, or a seccomp filter)")
    if (baseline.reference and candidate.reference
            and baseline.reference != candidate.reference):
        notes.append("the baseline normalised steps/s another way: steps/s compared raw")
    return notes


def _budget(cap_bytes: int | None) -> str:
    return "no budget" if cap_bytes is None else f"a {cap_bytes / 2**30:.2f} GiB budget"


def compare_snapshots(baseline: Snapshot | None, candidate: Snapshot, thresholds: Thresholds,
                      *, extra_notes: Sequence[str] = ()) -> BenchReport:
    rows: list[MetricRow] = []
    normalise = baseline is None or baseline.reference == candidate.reference
    other_isa = None
    if baseline is not None and baseline.cpu_features != candidate.cpu_features:
        other_isa = ("the baseline does not say which instruction set it ran on"
                     if baseline.cpu_features is None else
                     f"the baseline's CPU has another instruction set ({baseline.cpu_features} "
                     f"-> {candidate.cpu_features}): XLA compiled other instructions")
    for size in candidate.sizes:
        rows.extend(compare_size(baseline.size(size.num_envs) if baseline else None, size,
                                 thresholds, normalise=normalise,
                                 cap_bytes=candidate.cap_bytes, other_isa=other_isa))
    notes = differences(baseline, candidate) if baseline else []
    return BenchReport(baseline, candidate, thresholds, tuple(rows), (*notes, *extra_notes))
