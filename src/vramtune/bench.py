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

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from vramtune import fmt
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult, utc_now

BASELINE_KIND = "vramtune-bench-baseline"
BASELINE_SCHEMA = 1
RANK_TEST_MIN_REPEATS = 4  # below this a one-sided Mann-Whitney U cannot reach p < 0.05
RANK_TEST_ALPHA = 0.05
DEFAULT_MAX_MEM_INCREASE = 0.05
DEFAULT_MAX_SPEED_DROP = 0.10


@dataclass(frozen=True)
class MachineKey:
    """What a baseline's figures are only valid on."""

    backend: str  # jax platform: cpu, gpu
    device: str  # GPU name on GPU, CPU model on CPU
    device_count: int | None  # None: not known yet (before a trial ran)

    def matches(self, other: MachineKey) -> bool:
        counts_agree = (self.device_count is None or other.device_count is None
                        or self.device_count == other.device_count)
        return self.backend == other.backend and self.device == other.device and counts_agree

    def describe(self) -> str:
        count = "?" if self.device_count is None else str(self.device_count)
        return f"{self.backend} '{self.device}' x{count}"

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, "device_count": self.device_count}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineKey:
        return cls(str(data["backend"]), str(data["device"]), data.get("device_count"))


def key_from_results(results: Iterable[TrialResult], cpu_model: str) -> MachineKey | None:
    """The key of the machine the trials ran on (None if no trial got as far as JAX)."""
    for r in results:
        if r.backend:
            device = (r.gpu_name or r.device_kind or "unknown GPU") if r.is_gpu else cpu_model
            return MachineKey(r.backend, device, r.device_count)
    return None


@dataclass(frozen=True)
class Sample:
    """One trial's figures, as a baseline keeps them."""

    status: str
    peak_bytes: int | None  # host peak RSS on CPU, NVML/pool peak on GPU (TrialResult.peak_bytes)
    steps_per_s: float | None
    compile_s: float | None = None
    error: str | None = None  # first line of the error, for failed trials

    @classmethod
    def of(cls, r: TrialResult) -> Sample:
        error = (r.error_message or "").strip().splitlines()[:1]
        return cls(str(r.status), r.peak_bytes, r.steps_per_s, r.compile_s,
                   error[0][:200] if error else None)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


@dataclass(frozen=True)
class SizeRecord:
    """All repeats of one num_envs."""

    num_envs: int
    memory_label: str  # "host RAM" or "VRAM": what peak_bytes is a peak of
    samples: tuple[Sample, ...]
    batch_size: int | None = None
    num_minibatches: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    measured: str | None = None

    def peaks_bytes(self) -> list[float]:
        return [s.peak_bytes for s in self.samples if s.ok and s.peak_bytes is not None]

    def rates_per_s(self) -> list[float]:
        return [s.steps_per_s for s in self.samples if s.ok and s.steps_per_s is not None]

    @property
    def failures(self) -> list[Sample]:
        return [s for s in self.samples if not s.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"num_envs": self.num_envs, "memory_label": self.memory_label,
                "batch_size": self.batch_size, "num_minibatches": self.num_minibatches,
                "versions": dict(self.versions), "measured": self.measured,
                "samples": [s.__dict__ for s in self.samples]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SizeRecord:
        return cls(int(data["num_envs"]), str(data.get("memory_label", "host RAM")),
                   tuple(Sample(**s) for s in data["samples"]), data.get("batch_size"),
                   data.get("num_minibatches"), dict(data.get("versions") or {}),
                   data.get("measured"))


@dataclass(frozen=True)
class Snapshot:
    """A bench measurement: a machine, a profile, repeats per num_envs. A baseline file is one."""

    machine: MachineKey
    profile_name: str
    profile_hash: str
    sizes: tuple[SizeRecord, ...]
    versions: dict[str, str] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    compile_cache: bool = False  # trials compiled cold: a warm cache lowers CPU peak RSS ~20%
    created: str | None = None
    updated: str | None = None

    def size(self, num_envs: int) -> SizeRecord | None:
        return next((s for s in self.sizes if s.num_envs == num_envs), None)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": BASELINE_KIND, "schema_version": BASELINE_SCHEMA,
                "machine": self.machine.to_dict(), "profile_name": self.profile_name,
                "profile_hash": self.profile_hash, "versions": dict(self.versions),
                "compile_cache": self.compile_cache, "created": self.created,
                "updated": self.updated, "sizes": [s.to_dict() for s in self.sizes],
                "profile": self.profile}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(MachineKey.from_dict(data["machine"]), str(data["profile_name"]),
                   str(data["profile_hash"]),
                   tuple(sorted((SizeRecord.from_dict(s) for s in data["sizes"]),
                                key=lambda s: s.num_envs)),
                   dict(data.get("versions") or {}), dict(data.get("profile") or {}),
                   bool(data.get("compile_cache", False)), data.get("created"), data.get("updated"))


def snapshot_from_results(results: Sequence[TrialResult], machine: MachineKey, *,
                          profile_dict: dict[str, Any], compile_cache: bool = False) -> Snapshot:
    """Group trial records by num_envs (in the order the sizes were first run)."""
    if not results:
        raise ValueError("no trials to make a snapshot of")
    order: list[int] = []
    by_size: dict[int, list[TrialResult]] = {}
    for r in results:
        if r.num_envs not in by_size:
            order.append(r.num_envs)
        by_size.setdefault(r.num_envs, []).append(r)
    sizes = []
    for n in sorted(order):
        group = by_size[n]
        first = group[0]
        sizes.append(SizeRecord(n, first.memory_label, tuple(Sample.of(r) for r in group),
                                first.batch_size, first.num_minibatches, dict(first.versions),
                                group[-1].timestamp))
    now = utc_now()
    return Snapshot(machine, results[0].profile, results[0].profile_hash, tuple(sizes),
                    dict(results[0].versions), profile_dict, compile_cache, now, now)


def merge_for_save(old: Snapshot | None, new: Snapshot) -> tuple[Snapshot, str | None]:
    """The baseline to write, and a note on what happened to the old one.

    Same machine and profile: the sizes measured now replace theirs, the others are kept.
    Otherwise the old figures measured something else and are replaced wholesale."""
    if old is None:
        return new, None
    if not old.machine.matches(new.machine):
        return new, f"replaced a baseline from another machine ({old.machine.describe()})"
    if old.profile_hash != new.profile_hash:
        return new, (f"replaced a baseline of another profile ({old.profile_name} "
                     f"{old.profile_hash}): its sizes measured a different workload")
    measured = {s.num_envs for s in new.sizes}
    kept = [s for s in old.sizes if s.num_envs not in measured]
    sizes = tuple(sorted([*kept, *new.sizes], key=lambda s: s.num_envs))
    note = (f"kept num_envs {', '.join(str(s.num_envs) for s in kept)} from the old baseline"
            if kept else None)
    return replace(new, sizes=sizes, created=old.created or new.created), note


def load_baseline(path: str | Path) -> Snapshot:
    """Read a baseline file; UserError (one line) for anything that is not one."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no baseline at {path}: create it with --save (on the machine CI "
                        f"compares on)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read baseline {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("kind") != BASELINE_KIND:
        raise UserError(f"{path} is not a vramtune bench baseline (no \"kind\": \"{BASELINE_KIND}\")")
    if data.get("schema_version") != BASELINE_SCHEMA:
        raise UserError(f"{path}: baseline schema version {data.get('schema_version')}, this "
                        f"vramtune reads version {BASELINE_SCHEMA}; re-create it with --save")
    try:
        return Snapshot.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: damaged baseline ({type(exc).__name__}: {exc})") from None


def save_baseline(path: str | Path, snapshot: Snapshot) -> None:
    """Write atomically: a CI job killed mid-write must not leave half a baseline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(snapshot.to_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


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

MARKERS = {Verdict.WORSE: "🔴 worse", Verdict.BETTER: "🟢 better",
           Verdict.SAME: "⚪ within noise", Verdict.NOISY: "⚪ within noise (repeats overlap)",
           Verdict.FAILED: "🔴 failed", Verdict.FIXED: "🟢 fixed",
           Verdict.BOTH_FAILED: "⚪ failed in both", Verdict.NEW: "🆕 no baseline",
           Verdict.UNMEASURED: "⚪ n/a"}


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


def compare(baseline: Snapshot | None, candidate: Snapshot, thresholds: Thresholds,
            *, extra_notes: Sequence[str] = ()) -> BenchReport:
    rows: list[MetricRow] = []
    for size in candidate.sizes:
        rows.extend(compare_size(baseline.size(size.num_envs) if baseline else None, size,
                                 thresholds))
    notes = differences(baseline, candidate) if baseline else []
    return BenchReport(baseline, candidate, thresholds, tuple(rows), (*notes, *extra_notes))


# --- Markdown -------------------------------------------------------------------------------

_BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _bytes_with_range(values: Sequence[float]) -> str:
    if not values:
        return fmt.NA
    median = statistics.median(values)
    unit, scale = next(((u, s) for u, s in _BYTE_UNITS if median >= s), ("B", 1))
    digits = 2 if unit == "GiB" else 1
    text = f"{median / scale:,.{digits}f} {unit}"
    if len(values) > 1:
        text += f" ({min(values) / scale:,.{digits}f}–{max(values) / scale:,.{digits}f})"
    return text


def _rate_with_range(values: Sequence[float]) -> str:
    if not values:
        return fmt.NA
    text = fmt.rate(statistics.median(values))
    if len(values) > 1:
        text += f" ({fmt.rate(min(values))}–{fmt.rate(max(values))})"
    return text


def _change(change: float | None) -> str:
    if change is None:
        return fmt.NA
    return "±0.0%" if abs(change) < 0.0005 else f"{change:+.1%}"


def _cells(row: MetricRow) -> list[str]:
    if row.metric == "status":
        base, cand, change = row.baseline_statuses, row.candidate_statuses, ""
    elif row.metric == Metric.MEMORY:
        base, cand = _bytes_with_range(row.baseline_values), _bytes_with_range(row.candidate_values)
        change = _change(row.change)
    else:
        base, cand = _rate_with_range(row.baseline_values), _rate_with_range(row.candidate_values)
        change = _change(row.change)
    verdict = MARKERS[row.verdict]
    if row.detail:
        verdict += f": {row.detail}"
    return [str(row.num_envs), row.label, base, cand, change, verdict]


def to_markdown(report: BenchReport, *, title: str | None = None) -> str:
    """GitHub-flavoured Markdown: a heading, notes, the table, the verdict, the thresholds."""
    cand = report.candidate
    lines = [f"### {title or 'vramtune bench'}: `{cand.profile_name}` on {cand.machine.describe()}",
             ""]
    for note in report.notes:
        lines.append(f"> {note}  ")
    if report.notes:
        lines.append("")
    lines += ["| num_envs | metric | baseline | candidate | change | verdict |",
              "| ---: | --- | ---: | ---: | ---: | --- |"]
    for row in report.rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(row)) + " |")
    lines.append("")
    regressions = report.regressions
    if regressions:
        what = "; ".join(f"num_envs={r.num_envs} {r.label} "
                         + (_change(r.change) if r.change is not None else str(r.verdict))
                         for r in regressions)
        lines.append(f"**FAIL: {len(regressions)} regression{'s' if len(regressions) > 1 else ''}** "
                     f"({what})")
    elif report.baseline is None:
        lines.append("**no baseline to compare with**")
    else:
        lines.append("**PASS: no regression**")
    t = report.thresholds
    lines += ["", f"Thresholds: peak memory +{t.max_mem_increase:.0%}, steps/s "
                  f"-{t.max_speed_drop:.0%}. A change counts only past its threshold and with "
                  f"distinguishable repeats (non-overlapping ranges; one-sided Mann-Whitney U, "
                  f"p < {RANK_TEST_ALPHA:g}, from {RANK_TEST_MIN_REPEATS} repeats a side). "
                  f"Figures: median (min–max) over repeats."]
    return "\n".join(lines) + "\n"
