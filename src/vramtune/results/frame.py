"""Runs as pandas DataFrames: one row per trial, typed columns with units in their names.

The analysis layer. The report, compare and emit tables start from these frames, and so can a
notebook::

    frame = runs_frame(load_run(d) for d in ["runs/a100", "runs/h100"])
    frame[frame.status == "ok"].groupby("device").steps_per_s.max()

Columns are nullable (``Int64``, ``Float64``, ``string``): a figure that was not measured
is ``<NA>``, never 0, exactly as it is None in the record. Every scalar field of
``TrialResult`` is a column under its own name (``host_peak_rss_bytes``, ``compile_s``, ...),
plus the figures derived from them (``peak_bytes``, the one the recommender holds against the
budget; ``process_peak_bytes``; ``memory_kind``, 'VRAM' or 'host RAM') and where the trial
came from (``run_dir``, ``device``). The ``versions`` and ``notes`` of a record, and its
per-device lists, stay on it.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

import pandas as pd

from vramtune.records import Purpose, Status, TrialResult
from vramtune.results.store import Run

# Read first: what was run, what happened, how much memory, how fast.
_LEADING = ("num_envs", "batch_size", "num_minibatches", "unroll_length", "status", "purpose",
            "peak_bytes", "memory_kind", "steps_per_s", "steps_per_s_min", "steps_per_s_max",
            "compile_s", "wall_s", "host_peak_rss_bytes", "host_tree_rss_peak_bytes",
            "jax_peak_bytes_in_use", "jax_peak_pool_bytes", "jax_bytes_limit",
            "nvml_process_peak_bytes", "nvml_device_used_peak_bytes", "process_peak_bytes",
            "budget_bytes", "cap", "backend")
_DERIVED = {"peak_bytes": "Int64", "process_peak_bytes": "Int64", "cap_figure_bytes": "Int64",
            "cap_figure_limit_bytes": "Int64", "memory_kind": "string"}
_RUN = {"run_dir": "string", "device": "string"}
_KEPT_ON_THE_RECORD = ("versions", "notes")  # a mapping and a list: not one cell's value
_DTYPES = {bool: "boolean", int: "Int64", float: "Float64", str: "string"}


def _dtype(kind: type) -> str:
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        return "string"  # status, purpose: their values, as the results file has them
    return _DTYPES[kind]  # a new field of another type must be mapped here


def _record_columns() -> dict[str, str]:
    hints = typing.get_type_hints(TrialResult)
    columns: dict[str, str] = {}
    for f in dataclasses.fields(TrialResult):
        if f.name in _KEPT_ON_THE_RECORD:
            continue
        base = [t for t in typing.get_args(hints[f.name]) if t is not type(None)] or [hints[f.name]]
        if typing.get_origin(base[0]) is list:
            continue  # per-device lists (device_uuids, ..._per_device): not one cell's value
        columns[f.name] = _dtype(base[0])
    return columns


def _ordered(columns: dict[str, str]) -> dict[str, str]:
    order = [*_LEADING, *(c for c in columns if c not in _LEADING)]
    return {c: columns[c] for c in order}


COLUMNS: dict[str, str] = _ordered({**_record_columns(), **_DERIVED, **_RUN})
"""Every column of a trials frame, in order, with its pandas dtype (``timestamp`` is then
parsed to a UTC datetime)."""


def trials_frame(results: Iterable[TrialResult], *, run: Run | None = None) -> pd.DataFrame:
    """One row per trial, in the order given; ``run`` fills run_dir and device."""
    return _frame((run, r) for r in results)


def runs_frame(runs: Run | Iterable[Run], *, per_size: bool = False) -> pd.DataFrame:
    """Every trial of one or several runs, one row each, in file order (runs in the order
    given). ``per_size=True`` keeps one row per num_envs across all of them, sorted, by the
    rule of ``one_per_size``."""
    runs = [runs] if isinstance(runs, Run) else list(runs)
    pairs = [(run, r) for run in runs for r in run.results]
    if per_size:
        kept = {id(r) for r in one_per_size(r for _, r in pairs)}
        pairs = sorted(((run, r) for run, r in pairs if id(r) in kept), key=lambda p: p[1].num_envs)
    return _frame(pairs)


def _frame(pairs: Iterable[tuple[Run | None, TrialResult]]) -> pd.DataFrame:
    rows = []
    for run, r in pairs:
        row: dict[str, Any] = {c: getattr(r, c) for c in COLUMNS if c not in _RUN and c != "memory_kind"}
        row["status"] = str(r.status)
        row["purpose"] = str(r.purpose)
        row["memory_kind"] = r.memory_label
        row["run_dir"] = str(run.directory) if run is not None else None
        row["device"] = run.header.device if run is not None else r.gpu_name
        rows.append(row)
    data = {c: _column([row[c] for row in rows], dtype) for c, dtype in COLUMNS.items()}
    frame = pd.DataFrame(data)
    # errors="coerce": a time the reader let through and pandas cannot place is NaT (n/a)
    frame["timestamp"] = pd.to_datetime(frame["timestamp"].astype(object), utc=True,
                                        format="ISO8601", errors="coerce"
                                        ).astype("datetime64[us, UTC]")
    return frame


def one_per_size(results: Iterable[TrialResult], *,
                 every_failure: bool = False) -> tuple[TrialResult, ...]:
    """One record per num_envs, sorted by num_envs: the rule compare and merged runs' tables
    share.

    A resumed sweep, its repeats at the edge and its confirming run, or several runs merged,
    hold one size more than once. Among the records of one size:

    1. A failure (any status but ok) that ran with at least as much memory as an ok record
       (the same or a larger cap: ``cap_bytes``, else ``budget_bytes``; uncapped is the
       largest) stands for the size, the last such one: the size is not proven to fit, so
       nothing may recommend it (``recommend.choose``: a size fits only if every run of it
       fit). A failure under a smaller cap than every ok record's says nothing about those
       larger budgets (an 8GB and a 24GB sweep merged) and is passed over.
    2. Otherwise the ok record with the highest peak stands for it (the later one on a tie):
       repeats differ by a few percent, and a budget must hold the larger.
    3. A size with no ok record: its last failure.

    ``every_failure``: rule 1 for any failure, for records already sorted for one budget
    (``tune.budgets.speaking_for``: each failure left speaks for it, whatever its cap).

    ``bench`` does not use this: it keeps every repeat, for its statistics.
    """
    by_size: dict[int, list[TrialResult]] = {}
    for r in results:
        by_size.setdefault(r.num_envs, []).append(r)
    return tuple(_pick(by_size[n], every_failure) for n in sorted(by_size))


def _memory_had(r: TrialResult) -> float:
    """What the cap held the trial to (budget x (1 - headroom) since trials run under the
    headroom line), else its budget; uncapped is unlimited. A proof run (repeat or
    confirmation) that failed speaks for its run's budget: on a CPU it is held below the line
    on purpose (room for another run's jitter), and its failure says the size does not fit
    that line, whatever the search trials beside it did under the line itself."""
    held = r.cap_bytes if r.cap_bytes is not None else r.budget_bytes
    if (r.purpose in (Purpose.REPEAT, Purpose.CONFIRM) and r.status is not Status.OK
            and held is not None and r.budget_bytes is not None):
        held = max(held, r.budget_bytes)
    return float("inf") if held is None else held


def _pick(records: list[TrialResult], every_failure: bool = False) -> TrialResult:
    ok = [r for r in records if r.status is Status.OK]
    if not ok:
        return records[-1]
    least = -math.inf if every_failure else min(_memory_had(r) for r in ok)
    counted = [r for r in records if r.status is not Status.OK and _memory_had(r) >= least]
    if counted:
        return counted[-1]
    highest = max(r.peak_bytes if r.peak_bytes is not None else -1 for r in ok)
    return [r for r in ok if (r.peak_bytes if r.peak_bytes is not None else -1) == highest][-1]


def to_python(values: pd.Series | pd.api.extensions.ExtensionArray) -> list[Any]:
    """A column's values as plain Python objects, <NA> as None: what the formatters in
    views/ (and json) take."""
    series = pd.Series(values)
    return series.astype(object).where(series.notna(), None).tolist()


def _column(values: list[Any], dtype: str) -> Any:
    """A typed column; a value its type cannot hold (a hand-edited or damaged record) is
    <NA>, never a crash and never a made-up figure."""
    try:
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        kept = []
        for value in values:
            try:
                pd.array([value], dtype=dtype)
                kept.append(value)
            except (TypeError, ValueError, OverflowError):
                kept.append(None)
        return pd.array(kept, dtype=dtype)
