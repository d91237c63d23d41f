"""Append-only results: one JSONL file per sweep, a header line, then one line per trial.

Every finished trial is written, flushed and fsynced at once, so Ctrl-C, a crash or a power
cut loses at most the trial in flight. A truncated last line (the write that was cut) is
skipped with a warning; a file from another schema version is refused, never guessed at.

Reading checks both line formats here, once: a damaged header is an error naming the file
and the key; a damaged trial line is skipped with a warning naming its line and key, never
used (a num_envs of "abc" would otherwise surface as a traceback three modules later, or be
recommended). Beside those range checks, every field of the record is type-checked against
the dataclass itself (``results.typed``: pydantic's TypeAdapter), so a field added to ``TrialResult``
or ``RunHeader`` is checked the day it is added. A run directory is written by one process
at a time: ``lock_run`` holds an flock on ``.lock`` in it, and a second writer is refused
with the holder's PID.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from vramtune import paths
from vramtune.errors import UserError
from vramtune.records import (
    MAX_RECORDED_INTERVALS,
    Purpose,
    Status,
    TrialResult,
    utc_now,
)
from vramtune.results.settings import SweepSettings
from vramtune.results.typed import typed
from vramtune.schema import MAX_BYTES, MAX_NUM_ENVS, Fields, describe, is_int, is_number, kind

SCHEMA_VERSION = 1
RESULTS_FILE = "results.jsonl"
RUNS_DIR = Path("vramtune-runs")  # where a sweep not told where writes its run
LOCK_FILE = ".lock"
MAX_RESULTS_BYTES = 1 << 30  # 20000 trials take 30 MB
MAX_LINE_CHARS = 1 << 20  # one trial line is about 1.5 KB


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
    search: SweepSettings = field(default_factory=SweepSettings)  # how the sweep searched
    # the jax/brax verdict (vramtune.compat.StackVerdict.line) where the sweep started: trains,
    # or trains with brax patched as brax main does; None: not recorded (older runs, Ray nodes)
    stack: str | None = None
    created: str = field(default_factory=utc_now)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "header", **self.__dict__, "search": self.search.to_dict()}

    @classmethod
    def from_dict(cls, data: Any, where: str = "header") -> RunHeader:
        """A checked header: every field's type and range, the profile as a profile."""
        from vramtune.workload.profile import profile_from_dict

        f = Fields(data, where, what="the header line")
        typed(cls, {**data, "search": {}}, where)
        profile = f.mapping("profile")
        profile_from_dict(profile, source=f"{where}: profile")
        headroom = f.number("headroom_fraction", lo=0)
        if headroom >= 1:
            f.fail("headroom_fraction", "a fraction from 0 to below 1", headroom)
        # the search section is checked by its own reader: a null in it is a value the
        # header does not hold, as older runs wrote
        search = SweepSettings.from_dict(data.get("search"), where)
        return cls(
            profile_name=f.text("profile_name", max_len=200, line=True),
            profile_hash=f.text("profile_hash", max_len=64, line=True),
            profile=dict(profile),
            budget_bytes=f.int("budget_bytes", lo=1, hi=MAX_BYTES, none=True),
            headroom_fraction=headroom,
            machine=f.scalar_map("machine"), versions=f.text_map("versions"),
            gpu_name=f.text("gpu_name", None, none=True, max_len=200, line=True),
            gpu_driver=f.text("gpu_driver", None, none=True, max_len=200,
                              line=True),
            gpu_total_bytes=f.int("gpu_total_bytes", None, lo=1, hi=MAX_BYTES, none=True),
            cap=f.text("cap", None, none=True, max_len=200, line=True),
            search=search,
            stack=f.text("stack", None, none=True, max_len=500, line=True),
            created=f.text("created", "", max_len=100, line=True),
            schema_version=f.int("schema_version"))

    @property
    def device(self) -> str:
        """What the figures were measured on: the GPU, else the CPU model."""
        return self.gpu_name or str(self.machine.get("cpu", "unknown CPU"))

    @property
    def card(self) -> str:
        """The card as a mixed cluster names it (Ray's accelerator type), else the device."""
        return str(self.search.gpu_type or self.device)


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
    (appending onto it would glue two records into one damaged line). A last line that is
    whole but lacks its line break (an editor that adds none) is a record the reader used:
    it gets its line break instead of being cut."""
    try:
        with open(path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            end = size  # the last line break, looked for back from the end a block at a time
            while end > 0:
                start = max(0, end - (1 << 20))
                handle.seek(start)
                found = handle.read(end - start).rfind(b"\n")
                if found >= 0:
                    end = start + found + 1
                    break
                end = start
            last = size - end
            if last <= MAX_LINE_CHARS * 4:  # a line the reader could have read, in UTF-8
                handle.seek(end)
                if _whole_record(handle.read(last)):
                    handle.seek(size)
                    handle.write(b"\n")
                    return
            handle.truncate(end)
    except FileNotFoundError:
        return


def _whole_record(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are both
        return False


def _write_line(path: Path, data: dict[str, Any]) -> None:
    _drop_partial_line(path)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(data, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class RunLock:
    """An exclusive flock on a run directory's lock file, held while a sweep writes it. The
    kernel drops it when the process dies, however it dies: no stale lock to clean up."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()


def refuse_link(path: Path) -> None:
    """A run's own file that is a symbolic link would make a write land on its target,
    outside the run (a run directory copied or shared can carry one): refused."""
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link (to {os.readlink(path)}): vramtune writes "
                        f"only files inside the run directory; put the file itself there")


def lock_run(directory: Path) -> RunLock:
    """Lock ``directory`` for writing, or refuse with the PID that holds it. The lock file
    and the results file must be the run's own files, not links: opening a linked ``.lock``
    would truncate its target, appending to a linked results file would grow another."""
    path = directory / LOCK_FILE
    refuse_link(directory / RESULTS_FILE)
    refuse_link(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise UserError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"cannot lock {directory}: {path} is not a regular file; remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise UserError(f"{directory} is being written by another vramtune (PID {holder}); "
                            f"wait for it to end or stop it, then resume") from None
        raise UserError(f"cannot lock {directory}: {exc.strerror or exc}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # the lock holds without the PID in it
    return RunLock(directory, fd)


def create_run(directory: Path, header: RunHeader) -> RunLock:
    """Create the run directory, lock it and write the header; UserError if it cannot."""
    # Lexically normalised first: mkdir(parents=True) of 'x/..' would make a stray 'x' beside
    # the directory the path names (--out ../../x/.. would make /x).
    directory = Path(os.path.normpath(directory))
    path = directory / RESULTS_FILE
    # Written through its own reader: a header that --resume, report and emit-config would
    # refuse is refused here, before a whole sweep is measured into it
    RunHeader.from_dict(json.loads(json.dumps(header.to_dict())), f"the header for {directory}")

    def refuse_existing() -> None:
        if path.exists() and (not path.is_file() or path.stat().st_size):
            raise UserError(f"{path} already holds results: use --resume {directory} to "
                            f"continue it")

    try:
        refuse_existing()  # before anything is made in someone else's run
        directory.mkdir(parents=True, exist_ok=True)
        if not directory.is_dir():
            raise UserError(f"cannot write results to {directory}: not a directory")
        lock = lock_run(directory)
        try:
            refuse_existing()  # again, under the lock
            _write_line(path, header.to_dict())
        except BaseException:
            lock.release()
            raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UserError(f"cannot write results to {directory}: {reason}") from None
    return lock


def append_result(directory: Path, result: TrialResult) -> None:
    """Append one trial; a write error (disk full) is one UserError, the trial kept in
    memory by the caller."""
    path = directory / RESULTS_FILE
    try:
        _write_line(path, {"kind": "trial", **result.to_dict()})
    except OSError as exc:
        raise UserError(f"cannot append num_envs={result.num_envs} to {path}: "
                        f"{exc.strerror or exc}; the trials so far are in the table, and in "
                        f"the file up to the one before") from None


_NULLABLE_INTS = {
    "batch_size": (1, None), "num_minibatches": (1, None), "unroll_length": (1, None),
    "device_count": (1, None), "budget_bytes": (1, MAX_BYTES), "cap_bytes": (0, MAX_BYTES),
    "training_steps": (0, None), "evals": (0, None), "measured_intervals": (0, None),
    "memory_steady_steps": (0, None),
    "jax_peak_bytes_in_use": (0, MAX_BYTES), "jax_peak_pool_bytes": (0, MAX_BYTES),
    "jax_bytes_limit": (0, MAX_BYTES), "nvml_process_peak_bytes": (0, MAX_BYTES),
    "nvml_device_used_peak_bytes": (0, MAX_BYTES), "host_peak_rss_bytes": (0, MAX_BYTES),
    "host_tree_rss_peak_bytes": (0, MAX_BYTES), "host_peak_data_bytes": (0, MAX_BYTES),
    "gpu_total_bytes": (1, MAX_BYTES), "exit_code": (None, None)}
_NULLABLE_SECONDS_OR_RATES = ("compile_s", "steps_per_s", "steps_per_s_min", "steps_per_s_max",
                              "steps_per_s_ci_low", "steps_per_s_ci_high",
                              "measure_window_s", "wall_s")
# Past any real machine (a trillion env steps a second; 30 years), far inside a float: a
# figure above is damage, and doubling it for a plot's axis must not overflow to inf
MAX_FIGURE = 1e12
_NULLABLE_TEXTS = ("backend", "device_kind", "cap", "nvml_note", "error_type", "error_where",
                   "gpu_name", "gpu_driver", "timestamp")


_ONE_LINE_TEXTS = frozenset({"backend", "device_kind", "cap", "gpu_name", "gpu_driver",
                             "timestamp"})


def _iso_time(text: str) -> datetime | None:
    """The time an ISO 8601 text names (what records.now_iso writes), else None. The frame's
    pandas parser must accept every text this accepts: both read ISO 8601."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def trial_from_dict(data: Any, where: str) -> TrialResult:
    """A checked trial line: every field's type and range; UserError names the key."""
    f = Fields(data, where, what="a trial line")
    f.choice("status", [s.value for s in Status])
    f.text("profile", max_len=200)
    f.text("profile_hash", max_len=64, line=True)
    f.int("num_envs", lo=1, hi=MAX_NUM_ENVS)
    f.choice("purpose", [p.value for p in Purpose], None, none=True)
    for key, (lo, hi) in _NULLABLE_INTS.items():
        f.int(key, None, lo=lo, hi=hi, none=True)
    for key in _NULLABLE_SECONDS_OR_RATES:
        f.number(key, None, lo=0, hi=MAX_FIGURE, none=True)
    f.number("instructions_per_env_step", None, above=0, hi=1e12, none=True)
    for key in _NULLABLE_TEXTS:
        f.text(key, None, none=True, max_len=1000, line=key in _ONE_LINE_TEXTS)
    stamp = data.get("timestamp")
    if stamp is not None and _iso_time(stamp) is None:
        f.fail("timestamp", "an ISO 8601 time such as 2026-11-28T17:27:35+00:00", stamp)
    f.text("error_message", None, none=True, max_len=100_000)
    f.flag("memory_steady", None, none=True)
    f.flag("speed_steady", None, none=True)
    _rates_list(f, data.get("steps_per_s_intervals"))
    f.flag("shared_run", False)  # a boolean, or the frame cannot hold it
    if data.get("versions") is not None:
        f.text_map("versions")
    if data.get("stack_patches") is not None:
        f.text_list("stack_patches", max_len=200)
    if data.get("notes") is not None:
        f.text_list("notes", max_len=10_000)
    return typed(TrialResult, {**data, "purpose": data.get("purpose") or str(Purpose.SEARCH),
                               "notes": data.get("notes") or [],
                               "versions": data.get("versions") or {}}, where)


def _rates_list(f: Fields, value: Any) -> None:
    """Per-interval steps/s: None (older records), or a short list of finite rates >= 0."""
    if value is None:
        return
    if (not isinstance(value, list) or len(value) > MAX_RECORDED_INTERVALS
            or not all(is_number(v) and math.isfinite(v) and 0 <= v <= MAX_FIGURE
                       for v in value)):
        f.fail("steps_per_s_intervals", f"a list of at most {MAX_RECORDED_INTERVALS} finite "
               f"rates from 0 to {MAX_FIGURE:g}", value)


def parse_json(text: str, where: str) -> Any:
    """One JSON value; UserError (not a RecursionError) for any text that is not one.
    NaN and Infinity parse, and the schema refuses them where a finite number is due."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit (4,300 by default)
        raise UserError(f"{where}: not usable JSON ({str(exc).split(':')[0]})") from None


def run_directory(path: str | Path) -> Path:
    """The run directory a --resume argument names (the folder, or its results.jsonl)."""
    path = Path(path)
    return path.parent if path.name == RESULTS_FILE and not paths.is_dir(path) else path


def results_path(directory: str | Path) -> Path:
    """The results file of a run directory (or the file itself); UserError if there is none."""
    path = Path(directory)
    try:
        if path.is_dir():
            path = path / RESULTS_FILE
        usable = path.is_file()
    except (OSError, ValueError):
        usable = False
    if not str(directory).strip():
        raise UserError("the run directory is empty: name a sweep's run directory")
    if not usable:
        below = runs_below(Path(directory), limit=10_000)
        where = (f"; it holds {len(below)} run{'s' if len(below) > 1 else ''} one level down: "
                 f"name one, such as {below[0]}" if below else "")
        raise UserError(f"no results at {directory}: expected a run directory holding "
                        f"{RESULTS_FILE}{where}")
    return path


def runs_below(path: Path, limit: int | None = None) -> list[Path]:
    """Run directories one level under ``path`` (a mixed-cluster sweep's parent, a folder
    of sweeps), sorted; [] where it is no folder or cannot be read. ``limit``: look at no
    more entries than that (an error message scans no huge folder to its end)."""
    try:
        if not path.is_dir():
            return []
        found = []
        for i, d in enumerate(path.iterdir()):
            if limit is not None and i >= limit:
                break
            if (d / RESULTS_FILE).is_file():
                found.append(d)
        return sorted(found)
    except (OSError, ValueError):
        return []


def find_runs(directory: str | Path) -> list[Path]:
    """A run directory, or the run directories one level under a parent (a mixed-cluster
    sweep writes one per accelerator type under one parent), sorted by name."""
    path = Path(directory)
    try:
        if (path / RESULTS_FILE).is_file() or path.name == RESULTS_FILE:
            return [path]
    except (OSError, ValueError):  # unreadable, or a NUL byte in the path
        pass
    runs = runs_below(path)
    if not runs:
        raise UserError(f"no results at {directory}: expected a run directory holding "
                        f"{RESULTS_FILE}, or a directory of such runs")
    return runs


def is_parent_of_runs(path: str | Path) -> bool:
    """A mixed-cluster sweep's parent: run directories under it, no results of its own."""
    try:
        path = Path(path)
        return not (path / RESULTS_FILE).exists() and bool(runs_below(path))
    except (OSError, ValueError):
        return False  # whoever reads it says what is wrong with it


def newest_run(base: Path = RUNS_DIR) -> Path:
    """The run under ``base`` (./vramtune-runs/) whose results were written last: a run
    directory, or a mixed-cluster sweep's parent (one run per card under it), by its newest
    run."""
    written: dict[Path, tuple[float, str]] = {}
    try:
        entries = list(base.iterdir()) if base.is_dir() else []
    except OSError as exc:
        raise UserError(f"./{base}/: cannot read it ({exc.strerror or exc})") from None
    for d in entries:
        try:  # an entry that cannot be read is no run; the others still are
            files = ([d / RESULTS_FILE] if (d / RESULTS_FILE).is_file() else
                     [s / RESULTS_FILE for s in runs_below(d)])
            if files:
                written[d] = (max(f.stat().st_mtime for f in files), d.name)
        except OSError:
            continue
    if not written:
        raise UserError(f"no run directory given and no run under ./{base}/: run `vramtune "
                        f"sweep` first or name a run directory")
    return max(written, key=written.__getitem__)


def load_run(directory: str | Path) -> Run:
    """Read a run directory (or its results.jsonl); UserError if it cannot be used."""
    path = results_path(directory)
    try:
        lines = paths.read_bytes(path, what="results", max_bytes=MAX_RESULTS_BYTES
                                 ).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (offset {exc.start}); not a vramtune "
                        f"results file") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    warnings: list[str] = []
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise UserError(f"{path}: empty; not a vramtune results file")
    number, first = numbered[0]
    where = f"{path}:{number}"
    if len(first) > MAX_LINE_CHARS:
        raise UserError(f"{where}: a header line of {len(first)} characters; not a vramtune "
                        f"results file")
    head = parse_json(first, where)
    if not isinstance(head, dict) or head.get("kind") != "header":
        raise UserError(f"{path}: no header line; not a vramtune results file")
    version = head.get("schema_version")
    if not is_int(version) or version != SCHEMA_VERSION:
        raise UserError(f"{where}: results schema version {version!r}, this vramtune reads "
                        f"version {SCHEMA_VERSION} (the integer); re-run the sweep or use a "
                        f"matching vramtune")
    header = RunHeader.from_dict(head, f"{where} (header)")
    results = []
    last = numbered[-1][0]
    for number, line in numbered[1:]:
        where = f"{path}:{number}"
        if len(line) > MAX_LINE_CHARS:
            warnings.append(f"{where}: a line of {len(line)} characters; skipped")
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == last:
                warnings.append(f"{where}: truncated last line skipped (a write was cut off)")
                continue
            raise UserError(f"{where}: not valid JSON; the file is damaged") from None
        except RecursionError:
            warnings.append(f"{where}: JSON nested too deeply; skipped")
            continue
        except ValueError:  # an integer past Python's digit limit: a damaged line, skipped
            warnings.append(f"{where}: a number too long to read; skipped")
            continue
        if not isinstance(data, dict) or data.get("kind") != "trial":
            what = (f"kind {describe(data.get('kind'))}" if isinstance(data, dict)
                    else kind(data))
            warnings.append(f"{where}: not a trial line ({what}); skipped")
            continue
        try:
            results.append(trial_from_dict(data, where))
        except UserError as exc:
            warnings.append(f"{exc}; line skipped")
    return Run(path.parent, header, tuple(results), tuple(warnings))
