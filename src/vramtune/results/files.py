"""Whole-file writes that a kill cannot leave half done. Standard library only: the trial
child imports this before JAX, under its memory cap."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never a part:
    a temporary file beside it (same file system), flushed to disk, then renamed over it.
    The temporary name carries the pid, so two writers never share one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
