"""Can the installed jax and brax train at all? Answered from the files on disk, never by
importing them: the parent process must stay free of jax (the trials own the GPU).

brax 0.14.2 (its latest release) calls ``jax.device_put_replicated`` in PPO's training loop,
and jax 0.10 removed it, so every trial would die after minutes of compiling with an
AttributeError. brax's main branch has the fix and still calls itself 0.14.2, so the version
numbers alone cannot tell: this reads brax's training code for the call and jax's
``__init__`` for the name (jax's version stands in only when its source is not readable).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path

from vramtune.errors import UserError

REMOVED_NAME = "device_put_replicated"
REMOVED_IN = (0, 10)  # the jax release without it
_CALL = re.compile(rf"\b{REMOVED_NAME}\s*\(")
# Where brax's PPO reaches for it: the trainer itself and the helpers it imports.
_BRAX_FILES = ("training/agents/ppo/train.py", "training/*.py")


@dataclass(frozen=True)
class StackProblem:
    """A jax/brax pair that cannot train, and the fix."""

    jax_version: str
    brax_version: str
    brax_files: tuple[str, ...]  # brax's files that call the removed function, package-relative

    @property
    def message(self) -> str:
        where = ", ".join(self.brax_files)
        return (f"brax {self.brax_version} calls jax.{REMOVED_NAME} ({where}), which jax "
                f"{self.jax_version} no longer has (removed in jax "
                f"{'.'.join(map(str, REMOVED_IN))}): PPO cannot train with this pair. Fix: "
                f"install brax from its git main branch, or "
                f"`pip install 'jax<0.10' 'jaxlib<0.10'` (with the CUDA plugin of the same "
                f"version, e.g. 'jax[cuda12]<0.10')")


def _version(name: str, path: Sequence[str] | None) -> str | None:
    """The version of the first ``name`` distribution on ``path`` (default sys.path)."""
    for dist in metadata.distributions(name=name, **({"path": list(path)} if path else {})):
        return dist.version
    return None


def _package_dir(name: str, path: Sequence[str] | None) -> Path | None:
    """Where ``import name`` would load the package from, found without importing it."""
    try:  # top-level packages: finding the spec runs none of their code
        spec = PathFinder.find_spec(name, list(path)) if path else importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _release(version: str) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); '0.10.0.dev20260101' -> (0, 10, 0)."""
    parts = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        parts.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(parts)


def _code(text: str) -> str:
    """The text without comments (a fixed brax may still mention the name in one)."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _jax_lacks_it(path: Sequence[str] | None, version: str) -> bool:
    """jax's ``__init__`` defines (or deprecates) the name while jax still has it."""
    package = _package_dir("jax", path)
    text = _read(package / "__init__.py") if package is not None else None
    if text is not None:
        return REMOVED_NAME not in text
    return _release(version)[:2] >= REMOVED_IN


def _brax_callers(path: Sequence[str] | None) -> tuple[str, ...]:
    package = _package_dir("brax", path)
    if package is None:
        return ()
    found: dict[str, None] = {}
    for pattern in _BRAX_FILES:
        for file in sorted(package.glob(pattern)):
            text = _read(file)
            if text is not None and _CALL.search(_code(text)):
                found[file.relative_to(package.parent).as_posix()] = None
    return tuple(found)


def stack_problem(path: Sequence[str] | None = None) -> StackProblem | None:
    """Why the installed jax/brax cannot train, or None (also when either is missing: the
    trial reports that itself). ``path``: the import path to look on (default sys.path)."""
    jax_version = _version("jax", path)
    brax_version = _version("brax", path)
    if jax_version is None or brax_version is None or not _jax_lacks_it(path, jax_version):
        return None
    callers = _brax_callers(path)
    return StackProblem(jax_version, brax_version, callers) if callers else None


def require_trainable_stack(path: Sequence[str] | None = None) -> None:
    """Raise UserError (one line, exit 2) before any trial when the stack cannot train."""
    problem = stack_problem(path)
    if problem is not None:
        raise UserError(problem.message)
