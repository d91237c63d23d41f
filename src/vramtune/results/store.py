"""Append-only results: one JSONL file per sweep, a header line, then one line per trial.

Every finished trial is written, flushed and fsynced at once, so Ctrl-C, a crash or a power
cut loses at most the trial in flight. A truncated last line (the write that was cut) is
skipped with a warning; a file from another schema version is refused, never guessed at.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vramtune.errors import UserError
from vramtune.records import TrialResult, utc_now

SCHEMA_VERSION = 1
RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class RunHeader:
    profile_name: str
    profile_hash: str
    profile: dict[str, Any]
    budget_bytes: int | None
    headroom_fraction: float
    machine: dict[str, Any]
    versions: dict[str, str]
    gpu_name: str | None = None
    gpu_driver: str | None = None
    gpu_total_bytes: int | None = None
    cap: str | None = None
    search: dict[str, Any] = field(default_factory=dict)  # start, max_envs, refine, objective
    created: str = field(default_factory=utc_now)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "header", **self.__dict__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunHeader:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def device(self) -> str:
        """What the figures were measured on: the GPU, else the CPU model."""
        return self.gpu_name or str(self.machine.get("cpu", "unknown CPU"))


@dataclass(frozen=True)
class Run:
    directory: Path
    header: RunHeader
    results: tuple[TrialResult, ...]
    warnings: tuple[str, ...] = ()


def measurement_key(profile_hash: str, budget_bytes: int | None, versions: dict[str, str],
                    device: str) -> tuple[Any, ...]:
    """What makes two trials of one size measure the same thing."""
    return (profile_hash, budget_bytes, tuple(sorted(versions.items())), device)


def trial_key(header: RunHeader, result: TrialResult) -> tuple[Any, ...]:
    """Two trials with the same key measured the same thing: --resume runs it once."""
    return (result.num_envs, *measurement_key(result.profile_hash, result.budget_bytes,
                                              result.versions, result.gpu_name or header.device))


def _drop_partial_line(path: Path) -> None:
    """Cut a line a crash left half-written, so the next record starts on a line of its own
    (appending onto it would glue two records into one damaged line)."""
    try:
        with open(path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            block = min(size, 1 << 20)
            handle.seek(size - block)
            tail = handle.read(block)
            cut = tail.rfind(b"\n")
            handle.truncate(size - block + cut + 1 if cut >= 0 else 0)
    except FileNotFoundError:
        return


def _write_line(path: Path, data: dict[str, Any]) -> None:
    _drop_partial_line(path)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(data, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def create_run(directory: Path, header: RunHeader) -> Path:
    path = directory / RESULTS_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size:
            raise UserError(f"{path} already holds results: use --resume {directory} to continue it")
        _write_line(path, header.to_dict())
    except OSError as exc:
        raise UserError(f"cannot write results to {directory}: {exc.strerror or exc}") from None
    return path


def append_result(directory: Path, result: TrialResult) -> None:
    _write_line(directory / RESULTS_FILE, {"kind": "trial", **result.to_dict()})


def load_run(directory: str | Path) -> Run:
    """Read a run directory (or its results.jsonl); UserError if it cannot be used."""
    path = Path(directory)
    if path.is_dir():
        path = path / RESULTS_FILE
    if not path.is_file():
        raise UserError(f"no results at {directory}: expected a run directory holding {RESULTS_FILE}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                warnings.append(f"{path}:{number}: truncated last line skipped (a write was cut off)")
                continue
            raise UserError(f"{path}:{number}: not valid JSON; the file is damaged") from None
    if not records or records[0].get("kind") != "header":
        raise UserError(f"{path}: no header line; not a vramtune results file")
    version = records[0].get("schema_version")
    if version != SCHEMA_VERSION:
        raise UserError(f"{path}: results schema version {version}, this vramtune reads version "
                        f"{SCHEMA_VERSION}; re-run the sweep or use a matching vramtune")
    header = RunHeader.from_dict(records[0])
    results = []
    for data in records[1:]:
        if data.get("kind") != "trial":
            continue
        try:
            results.append(TrialResult.from_dict(data))
        except (KeyError, TypeError, ValueError) as exc:
            warnings.append(f"{path}: a trial line could not be read ({exc}); skipped")
    return Run(path.parent, header, tuple(results), tuple(warnings))
