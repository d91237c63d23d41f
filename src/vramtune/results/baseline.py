"""Bench baselines on disk: machine-keyed snapshots of repeated trials per size.

The baseline is keyed by machine (CPU model or GPU name, device count, backend): figures
from another machine are not comparable, so the CLI refuses them unless forced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vramtune import paths
from vramtune.errors import UserError
from vramtune.records import HOST_RAM, VRAM, Status, TrialResult, utc_now
from vramtune.results.files import write_atomic
from vramtune.results.typed import field_names, typed
from vramtune.schema import MAX_BYTES, MAX_NUM_ENVS, Fields, is_int

BASELINE_KIND = "vramtune-bench-baseline"
BASELINE_SCHEMA = 3
# Older schemas still read, and what their files lack (the gate's note says so).
OLDER_SCHEMAS = {1: ("no XLA figures, CPU shares or instruction counts",
                     "only peak memory and raw steps/s are gated"),
                 2: ("no instruction counts", "the counted tier has nothing to compare")}
MAX_BASELINE_BYTES = 64 << 20


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
    # CPU seconds the trial used per wall second of its measuring window (measure.cpu_share)
    cpu_s_per_s: float | None = None
    # user-space instructions per env step over the window (measure.counters); CPU only
    instructions_per_env_step: float | None = None

    @classmethod
    def of(cls, r: TrialResult, cpu_s_per_s: float | None = None) -> Sample:
        error = (r.error_message or "").strip().splitlines()[:1]
        return cls(str(r.status), r.peak_bytes, r.steps_per_s, r.compile_s,
                   error[0][:200] if error else None, cpu_s_per_s,
                   r.instructions_per_env_step)

    @property
    def normalised(self) -> float | None:
        """Steps per CPU second: the trial's speed with its share of the machine divided out."""
        if self.steps_per_s is None or not self.cpu_s_per_s:
            return None
        return self.steps_per_s / self.cpu_s_per_s

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


XLA_FIGURES = ("argument_bytes", "output_bytes", "alias_bytes", "temp_bytes",
               "generated_code_bytes", "flops", "bytes_accessed")


@dataclass(frozen=True)
class XlaFigures:
    """XLA's compile-time figures of one size's training epoch: ``memory_analysis()`` and
    ``cost_analysis()`` of brax's ``training_epoch`` as compiled for this backend. The same
    for every run of one profile under one set of versions; ``versions`` are those."""

    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    generated_code_bytes: int | None  # 0 on CPU (jaxlib 0.9.2 does not count it there)
    flops: float | None
    bytes_accessed: float | None
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        """Arguments + outputs not donated into them + temporaries: what the epoch holds."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes

    def figures(self) -> dict[str, float | None]:
        return {"total_bytes": self.total_bytes,
                **{k: getattr(self, k) for k in XLA_FIGURES}}

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in XLA_FIGURES}, "versions": dict(self.versions)}


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
    xla: XlaFigures | None = None  # None: not compiled (older baseline, or the probe failed)
    xla_error: str | None = None  # why there are no XLA figures, when the probe said

    def peaks_bytes(self) -> list[float]:
        return [s.peak_bytes for s in self.samples if s.ok and s.peak_bytes is not None]

    def rates_per_s(self) -> list[float]:
        return [s.steps_per_s for s in self.samples if s.ok and s.steps_per_s is not None]

    def _of_every_ok_trial(self, values: Iterable[float | None]) -> list[float]:
        """``values`` (one per ok trial with a rate); [] unless every one of them has one:
        a figure from some repeats only would compare a subset with the other side."""
        got = list(values)
        return [v for v in got if v is not None] if all(v is not None for v in got) else []

    def _timed(self) -> list[Sample]:
        return [s for s in self.samples if s.ok and s.steps_per_s is not None]

    def normalised_rates(self) -> list[float]:
        """Steps per CPU second of every ok trial; [] unless every ok trial has one."""
        return self._of_every_ok_trial(s.normalised for s in self._timed())

    def instruction_counts(self) -> list[float]:
        """Instructions per env step of every ok trial; [] unless every ok trial has one."""
        return self._of_every_ok_trial(s.instructions_per_env_step for s in self._timed())

    def cpu_shares(self) -> list[float]:
        return [s.cpu_s_per_s for s in self.samples
                if s.ok and s.cpu_s_per_s is not None]

    @property
    def failures(self) -> list[Sample]:
        return [s for s in self.samples if not s.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"num_envs": self.num_envs, "memory_label": self.memory_label,
                "batch_size": self.batch_size, "num_minibatches": self.num_minibatches,
                "versions": dict(self.versions), "measured": self.measured,
                "xla": None if self.xla is None else self.xla.to_dict(),
                "xla_error": self.xla_error,
                "samples": [s.__dict__ for s in self.samples]}


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
    cap_bytes: int | None = None  # the --gpu-mem budget the trials ran under; None: uncapped
    reference: str | None = None  # what normalised steps/s (measure.cpu_share.REFERENCE)
    # the CPU's instruction set (machine.cpu_features): instruction counts compare only
    # between machines where XLA compiled for the same one
    cpu_features: str | None = None
    older_format: int | None = None  # the schema version of an older file this was read from

    def size(self, num_envs: int) -> SizeRecord | None:
        return next((s for s in self.sizes if s.num_envs == num_envs), None)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": BASELINE_KIND, "schema_version": BASELINE_SCHEMA,
                "machine": self.machine.to_dict(), "profile_name": self.profile_name,
                "profile_hash": self.profile_hash, "versions": dict(self.versions),
                "compile_cache": self.compile_cache, "created": self.created,
                "updated": self.updated, "cap_bytes": self.cap_bytes,
                "reference": self.reference, "cpu_features": self.cpu_features,
                "sizes": [s.to_dict() for s in self.sizes],
                "profile": self.profile}


def snapshot_from_results(results: Sequence[TrialResult], machine: MachineKey, *,
                          profile_dict: dict[str, Any], compile_cache: bool = False,
                          references: Sequence[float | None] | None = None,
                          xla: Mapping[int, XlaFigures] | None = None,
                          xla_errors: Mapping[int, str] | None = None,
                          cap_bytes: int | None = None,
                          reference: str | None = None,
                          cpu_features: str | None = None) -> Snapshot:
    """Group trial records by num_envs (in the order the sizes were first run).
    ``references``: each trial's CPU share (CPU s per s), in the order of ``results``."""
    if not results:
        raise ValueError("no trials to make a snapshot of")
    if references is not None and len(references) != len(results):
        raise ValueError("one CPU share per trial")
    refs = list(references) if references is not None else [None] * len(results)
    order: list[int] = []
    by_size: dict[int, list[tuple[TrialResult, float | None]]] = {}
    for r, ref in zip(results, refs, strict=True):
        if r.num_envs not in by_size:
            order.append(r.num_envs)
        by_size.setdefault(r.num_envs, []).append((r, ref))
    sizes = []
    for n in sorted(order):
        group = by_size[n]
        first = group[0][0]
        sizes.append(SizeRecord(n, first.memory_label,
                                tuple(Sample.of(r, ref) for r, ref in group),
                                first.batch_size, first.num_minibatches, dict(first.versions),
                                group[-1][0].timestamp, (xla or {}).get(n),
                                (xla_errors or {}).get(n)))
    now = utc_now()
    return Snapshot(machine, results[0].profile, results[0].profile_hash, tuple(sizes),
                    dict(results[0].versions), profile_dict, compile_cache, now, now,
                    cap_bytes, reference, cpu_features)


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
    if old.cap_bytes != new.cap_bytes:
        return new, "replaced a baseline measured under another --gpu-mem budget"
    if old.cpu_features != new.cpu_features:
        return new, ("replaced a baseline from a CPU with another instruction set: its "
                     "instruction counts were of other compiled code")
    if old.older_format is not None:
        return new, (f"replaced a baseline in an older format (schema {old.older_format}): "
                     f"it had {OLDER_SCHEMAS[old.older_format][0]}")
    measured = {s.num_envs for s in new.sizes}
    kept = [s for s in old.sizes if s.num_envs not in measured]
    sizes = tuple(sorted([*kept, *new.sizes], key=lambda s: s.num_envs))
    note = (f"kept num_envs {', '.join(str(s.num_envs) for s in kept)} from the old baseline"
            if kept else None)
    return replace(new, sizes=sizes, created=old.created or new.created), note


# Reading: ``Fields`` checks what annotations cannot say (ranges, choices, lengths, unknown
# keys) and fills the defaults older files leave out; ``typed`` then builds the whole
# Snapshot, checking every field of every record in it against its dataclass.

def _sample(data: Any, where: str, prefix: str) -> dict[str, Any]:
    f = Fields(data, where, prefix, what=prefix.rstrip("."))
    f.only(field_names(Sample))
    f.choice("status", [s.value for s in Status])
    f.int("peak_bytes", None, lo=0, hi=MAX_BYTES, none=True)
    f.number("steps_per_s", None, lo=0, none=True)
    f.number("compile_s", None, lo=0, none=True)
    f.text("error", None, none=True, max_len=1000)
    f.number("cpu_s_per_s", None, lo=0, none=True)
    f.number("instructions_per_env_step", None, above=0, hi=1e12, none=True)
    return {"peak_bytes": None, "steps_per_s": None, **data}


def _xla(data: Any, where: str, prefix: str) -> dict[str, Any] | None:
    if data is None:
        return None
    f = Fields(data, where, prefix, what=prefix.rstrip("."))
    f.only(field_names(XlaFigures))
    for key in ("argument_bytes", "output_bytes", "alias_bytes", "temp_bytes"):
        f.int(key, lo=0, hi=MAX_BYTES)
    f.int("generated_code_bytes", None, lo=0, hi=MAX_BYTES, none=True)
    f.number("flops", None, lo=0, none=True)
    f.number("bytes_accessed", None, lo=0, none=True)
    return {**data, "versions": _versions(f)}


def _versions(f: Fields) -> dict[str, str]:
    """A mapping of version texts; null or absent is none known."""
    return f.text_map("versions") if f.data.get("versions") is not None else {}


def _items(f: Fields, key: str, limit: int) -> list[Any]:
    value = f.raw(key)
    if not isinstance(value, list) or len(value) > limit:
        f.fail(key, f"a list of at most {limit} mappings", value)
    return value


def _size(data: Any, where: str, prefix: str) -> dict[str, Any]:
    f = Fields(data, where, prefix, what=prefix.rstrip("."))
    samples = [_sample(s, where, f"{prefix}samples[{i}].")
               for i, s in enumerate(_items(f, "samples", 10_000))]
    f.int("num_envs", lo=1, hi=MAX_NUM_ENVS)
    f.int("batch_size", None, lo=1, none=True)
    f.int("num_minibatches", None, lo=1, none=True)
    f.text("measured", None, none=True, max_len=100)
    f.text("xla_error", None, none=True, max_len=1000)
    return {**data, "samples": samples, "versions": _versions(f),
            "memory_label": f.choice("memory_label", (HOST_RAM, VRAM), HOST_RAM),
            "xla": _xla(data.get("xla"), where, f"{prefix}xla.")}


def snapshot_from_data(data: Any, where: str) -> Snapshot:
    """A checked baseline: every key's type and range, or one UserError naming it."""
    if not isinstance(data, dict) or data.get("kind") != BASELINE_KIND:
        raise UserError(f"{where} is not a vramtune bench baseline (no \"kind\": "
                        f"\"{BASELINE_KIND}\")")
    version = data.get("schema_version")
    if not is_int(version) or (version != BASELINE_SCHEMA and version not in OLDER_SCHEMAS):
        readable = ", ".join(str(v) for v in (*OLDER_SCHEMAS, BASELINE_SCHEMA))
        raise UserError(f"{where}: baseline schema version {version!r}, this vramtune reads "
                        f"versions {readable} (integers); re-create it with --save")
    f = Fields(data, where)
    m = f.sub("machine")
    m.text("backend", max_len=50)
    m.text("device", max_len=200)
    m.int("device_count", None, lo=1, hi=1 << 16, none=True)
    sizes = [_size(s, where, f"sizes[{i}].") for i, s in enumerate(_items(f, "sizes", 1000))]
    f.text("profile_name", max_len=200)
    f.text("profile_hash", max_len=64)
    f.flag("compile_cache", False)
    f.text("created", None, none=True, max_len=100)
    f.text("updated", None, none=True, max_len=100)
    f.int("cap_bytes", None, lo=1, hi=MAX_BYTES, none=True)
    f.text("reference", None, none=True, max_len=200)
    f.text("cpu_features", None, none=True, max_len=100)
    snapshot = typed(Snapshot, {
        **data, "machine": {"device_count": None, **m.data}, "sizes": sizes,
        "versions": _versions(f), "profile": f.mapping("profile", {}, none_is_empty=True),
        "older_format": None if version == BASELINE_SCHEMA else version}, where)
    seen: set[int] = set()
    for size in snapshot.sizes:
        if size.num_envs in seen:
            raise UserError(f"{where}: num_envs {size.num_envs} appears twice in sizes")
        seen.add(size.num_envs)
    return replace(snapshot, sizes=tuple(sorted(snapshot.sizes, key=lambda s: s.num_envs)))


def load_baseline(path: str | Path) -> Snapshot:
    """Read a baseline file; UserError (one line) for anything that is not one."""
    from vramtune.results.store import parse_json

    path = Path(path)
    try:
        usable = path.is_file()
    except (OSError, ValueError):
        usable = False
    if not usable:
        raise UserError(f"no baseline at {path}: create it with --save (on the machine CI "
                        f"compares on)")
    try:
        text = paths.read_bytes(path, what="baseline", max_bytes=MAX_BASELINE_BYTES
                                ).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"baseline {path} is not UTF-8 text (offset {exc.start})") from None
    return snapshot_from_data(parse_json(text, f"baseline {path}"), str(path))


def save_baseline(path: str | Path, snapshot: Snapshot) -> None:
    """Write atomically: a CI job killed mid-write must not leave half a baseline. A write
    error (disk full) is one UserError."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(snapshot.to_dict(), indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"cannot save the baseline to {path}: {exc.strerror or exc}") from None
