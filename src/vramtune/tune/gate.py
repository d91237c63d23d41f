"""CI regression gate: repeated trials compared with a stored baseline, metric by metric.

A change counts only when it passes its threshold AND the repeats are distinguishable (asv's
rule): a ratio alone would fail CI on every noisy runner, distinguishability alone on every
1% drift. Memory is nearly deterministic and takes the tight threshold; steps/s swings with
whatever else the machine runs and takes the loose one. Direction matters: more memory is
worse, more steps/s is better.

The baseline is keyed by machine (CPU model or GPU name, device count, backend): figures
from another machine are not comparable, so the CLI refuses them unless forced.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vramtune.results.baseline import Sample, SizeRecord, Snapshot

RANK_TEST_MIN_REPEATS = 4  # below this a one-sided Mann-Whitney U cannot reach p < 0.05
RANK_TEST_ALPHA = 0.05
DEFAULT_MAX_MEM_INCREASE = 0.05
DEFAULT_MAX_SPEED_DROP = 0.10


# --- comparison -----------------------------------------------------------------------------

class Metric(StrEnum):
    MEMORY = "memory"  # higher is worse
    SPEED = "steps/s"  # higher is better


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
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:  # scipy comes with jax; without it the range test stands alone
        return Distinguishable(apart, "ranges")
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


def compare_size(base: SizeRecord | None, cand: SizeRecord,
                 thresholds: Thresholds) -> list[MetricRow]:
    """Rows for one num_envs: a status row when trials failed, then memory and steps/s."""
    rows: list[MetricRow] = []
    n = cand.num_envs
    mem_label = f"peak {cand.memory_label}"
    if base is None:
        for metric, label, values in ((Metric.MEMORY, mem_label, cand.peaks_bytes()),
                                      (Metric.SPEED, "steps/s", cand.rates_per_s())):
            rows.append(MetricRow(n, str(metric), label, (), tuple(values), None,
                                  _median(values), None, None, None, None, Verdict.NEW,
                                  _status_counts(cand.samples) if cand.failures else ""))
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
        rows.append(MetricRow(n, "status", "trials", (), (), None, None, None, None, None, None,
                              verdict, errors[0] if errors else "", _status_counts(base.samples),
                              _status_counts(cand.samples)))
    for metric, label, b, c, worse_up, thr in (
            (Metric.MEMORY, mem_label, base.peaks_bytes(), cand.peaks_bytes(), True,
             thresholds.max_mem_increase),
            (Metric.SPEED, "steps/s", base.rates_per_s(), cand.rates_per_s(), False,
             thresholds.max_speed_drop)):
        verdict, change, test = judge(b, c, higher_is_worse=worse_up, threshold=thr)
        detail = ""
        if metric is Metric.MEMORY and base.memory_label != cand.memory_label:
            verdict, change, test = Verdict.UNMEASURED, None, None
            detail = f"baseline is {base.memory_label}, candidate {cand.memory_label}"
        rows.append(MetricRow(n, str(metric), label, tuple(b), tuple(c), _median(b), _median(c),
                              change, thr, test.method if test else None,
                              test.p_value if test else None, verdict, detail))
    return rows


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
    return notes


def compare_snapshots(baseline: Snapshot | None, candidate: Snapshot, thresholds: Thresholds,
            *, extra_notes: Sequence[str] = ()) -> BenchReport:
    rows: list[MetricRow] = []
    for size in candidate.sizes:
        rows.extend(compare_size(baseline.size(size.num_envs) if baseline else None, size,
                                 thresholds))
    notes = differences(baseline, candidate) if baseline else []
    return BenchReport(baseline, candidate, thresholds, tuple(rows), (*notes, *extra_notes))
