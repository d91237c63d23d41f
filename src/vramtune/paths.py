"""Where vramtune writes: output paths checked before the work, names kept inside their folder.

A path that cannot be written is refused before any trial runs (a bench that measured for
ten minutes must not end on "No such file or directory"), and a file named after something
read from a file (a profile name in a results header) is resolved under the folder it
belongs in, or refused: ``../../x`` never escapes it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from vramtune.errors import UserError

MAX_NAME_BYTES = 255  # one path component (ext4, xfs, btrfs, tmpfs)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def check_writable_file(path: str | Path, what: str) -> Path:
    """``path`` as a file vramtune may create or replace, or one UserError saying why not:
    empty, a directory, a name too long, a parent that is a file, a folder it cannot write
    in (probed by creating and removing a temporary file in the nearest existing folder)."""
    text = str(path)
    if not text.strip():
        raise UserError(f"{what} is empty: give a file name")
    if "\0" in text:
        raise UserError(f"{what} {text!r}: a path cannot hold a NUL character")
    file = Path(text).expanduser()
    too_long = [p for p in file.parts if len(p.encode()) > MAX_NAME_BYTES]
    if too_long:
        raise UserError(f"{what} {file}: a name of {len(too_long[0].encode())} bytes; the limit "
                        f"is {MAX_NAME_BYTES}")
    try:
        if file.is_dir():
            raise UserError(f"{what} {file} is a directory; give a file name")
        if _holds_measurements(file):
            raise UserError(f"refusing to write {what} {file}: it holds a sweep's measurements "
                            f"(a results file); give another file name")
        folder = file.parent
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise UserError(f"{what} {file}: {folder} is a file, not a folder")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".vramtune-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"cannot write {what} {file}: {_reason(exc)}") from None
    return file


RESULTS_HEAD = b'{"kind": "header"'  # how every results file begins (results.store)
RESULTS_NAME = "results.jsonl"  # results.store.RESULTS_FILE (paths imports nothing of ours)


def _holds_measurements(file: Path) -> bool:
    """Is ``file`` a sweep's results file? By its name, or its first bytes whatever its name:
    a config or a plot written over it would lose what was measured."""
    if file.name == RESULTS_NAME and file.exists():
        return True
    try:
        with file.open("rb") as handle:
            return handle.read(len(RESULTS_HEAD)) == RESULTS_HEAD
    except OSError:
        return False


def check_writable_dir(path: str | Path, what: str) -> Path:
    """``path`` as a folder vramtune may create and write files in, or one UserError."""
    text = str(path)
    if not text.strip():
        raise UserError(f"{what} is empty: give a folder")
    folder = Path(text).expanduser()
    if any(len(p.encode()) > MAX_NAME_BYTES for p in folder.parts):
        raise UserError(f"{what} {folder}: a name longer than {MAX_NAME_BYTES} bytes")
    try:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"{what} {folder} is a file, not a folder")
        existing = folder
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise UserError(f"{what} {folder}: {existing} is a file, not a folder")
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".vramtune-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"cannot write {what} {folder}: {_reason(exc)}") from None
    return folder


def within(folder: str | Path, name: str) -> Path:
    """``folder / name`` when it stays inside ``folder`` once resolved; UserError otherwise
    (an absolute name, ``..``, a symlink out)."""
    base = Path(folder).resolve()
    target = (base / name).resolve()
    if target != base and base not in target.parents:
        raise UserError(f"refusing to write {name!r}: it resolves to {target}, outside {base}")
    if target == base:
        raise UserError(f"refusing to write {name!r}: it names the folder {base} itself")
    return Path(folder) / name


def write_text(path: Path, text: str, what: str) -> None:
    """Write a file; a write error (disk full, permissions) is one UserError."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {what} {path}: {_reason(exc)}") from None
    except ValueError as exc:  # a NUL byte
        raise UserError(f"cannot write {what} {path}: {exc}") from None


def is_dir(path: Path) -> bool:
    """Path.is_dir that answers False, not OSError, for a name too long."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False



def is_file(path: Path) -> bool:
    """Path.is_file that answers False, not OSError, for a name too long."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_bytes(path: str | Path, *, what: str, max_bytes: int) -> bytes:
    """A regular file's bytes, at most ``max_bytes``; one UserError for anything else: a
    directory, a FIFO or a device (reading one would block or never end), a missing file, a
    name too long, too big. Checked on the open descriptor, so a file swapped after the
    check is still a regular file when read."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without a writer
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UserError(f"cannot read {what} {path}: {reason}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise UserError(f"cannot read {what} {path}: {kind}")
        if info.st_size > max_bytes:
            raise UserError(f"{what} {path} is {info.st_size} bytes; the limit is {max_bytes} "
                            f"bytes")
        chunks, left = [], max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserError(f"{what} {path} is over {max_bytes} bytes; the limit is {max_bytes}")
    return data
