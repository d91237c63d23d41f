"""Can the installed jax and brax train, and what must stand in for brax where it lags jax?

brax 0.14.2 (its latest release) calls ``jax.device_put_replicated`` in PPO's training loop
and ``jnp.clip(..., a_min=...)`` in its fluid model; jax 0.10 removed both (the name stays in
jax's ``_deprecations`` table mapped to ``None``, which is what makes access raise; clip lost
its ``a_min``/``a_max`` keywords). brax main inlines the replacements (google/brax 303d89d,
5c994de) and still calls itself 0.14.2, so version numbers cannot tell.

Two halves, one module:

* ``stack_verdict()`` reads the files on disk, never imports them (the parent process stays
  free of jax: trials own the GPU): jax's ``__init__`` and ``clip`` parsed for what they bind,
  brax's code parsed for what it calls. Each gap is patched or, where no sound stand-in is
  known, refused before any trial with the fix.
* ``patch_brax()`` runs where jax is imported (each trial's process, and the user's training:
  ``import vramtune.compat; vramtune.compat.patch_brax()``) and puts in what brax main does
  instead, for the gaps the disk verdict finds and the live jax lacks; nothing else.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from vramtune import paths
from vramtune.errors import UserError

# What vramtune's suite passes on (constraints/tested.txt, whose pins a test checks this
# against): named in a refusal so that the fix has a set known to work.
TESTED = "jax 0.9.2 + brax 0.14.2 + mujoco-mjx 3.17.0"
FIX = ("install brax from its git main branch (pip install 'brax @ "
       "git+https://github.com/google/brax'), or pip install 'jax<0.10' 'jaxlib<0.10' (with "
       "the CUDA plugin of the same version, e.g. 'jax[cuda12]<0.10')")

# jax functions brax's released code calls that jax has removed, and the stand-ins this module
# knows (brax main's own code). A removed function brax calls that is not here cannot be
# patched: the stack is refused. (brax 0.14.2 calls device_put_replicated only; brax main
# replaced it with the code below.)
PATCHABLE = ("device_put_replicated",)
CLIP = "numpy.clip"  # the gap's name when jnp.clip has lost its a_min / a_max keywords
_CLIP_OLD_KEYWORDS = ("a_min", "a_max")
_MAX_FILE_BYTES = 2_000_000  # brax's largest module is ~60 kB: a bound on what one file costs


@dataclass(frozen=True)
class Gap:
    """One jax API that brax's code uses and the installed jax no longer has."""

    api: str  # "device_put_replicated", or CLIP
    brax_files: tuple[str, ...]  # where brax uses it, package-relative

    @property
    def patchable(self) -> bool:
        return self.api in PATCHABLE or self.api == CLIP

    @property
    def words(self) -> str:
        return "jnp.clip's a_min/a_max keywords" if self.api == CLIP else f"jax.{self.api}"


@dataclass(frozen=True)
class StackVerdict:
    """The installed jax/brax pair: trains as it is, trains patched, or cannot train."""

    jax_version: str | None
    brax_version: str | None
    gaps: tuple[Gap, ...] = ()

    @property
    def pair(self) -> str:
        return (f"jax {self.jax_version or 'not installed'} + "
                f"brax {self.brax_version or 'not installed'}")

    @property
    def unpatchable(self) -> tuple[Gap, ...]:
        return tuple(g for g in self.gaps if not g.patchable)

    @property
    def patches(self) -> tuple[str, ...]:
        """The stand-ins a trial will run with (what ``patch_brax()`` puts in by default)."""
        return tuple(g.api for g in self.gaps if g.patchable)

    @property
    def trains(self) -> bool:
        return not self.unpatchable

    @property
    def problem(self) -> str | None:
        """One line with the fix where the pair cannot train, else None."""
        if self.trains:
            return None
        gap = self.unpatchable[0]
        return (f"{self.pair} cannot train: brax calls {gap.words} "
                f"({', '.join(gap.brax_files)}), which jax {self.jax_version} removed and "
                f"vramtune knows no sound stand-in for. Fix: {FIX}; tested: {TESTED}")

    @property
    def line(self) -> str:
        """The verdict in one line, as doctor, a sweep's header and report lead with it."""
        if not self.trains:
            return f"{self.pair}: cannot train ({self.unpatchable[0].words} removed by jax)"
        if self.gaps:
            what = ", ".join(g.words for g in self.gaps)
            return f"{self.pair}: trains, patched as brax main does ({what})"
        return f"{self.pair}: trains"


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


def _source(path: Path) -> bytes | None:
    """A regular file's bytes, bounded; None for anything else (a FIFO would block)."""
    try:
        return paths.read_bytes(path, what="source", max_bytes=_MAX_FILE_BYTES)
    except UserError:
        return None


def _parse_source(source: bytes, name: str = "<source>") -> ast.Module | None:
    """The module's tree, or None where it does not parse (on this Python, or at all)."""
    try:
        return ast.parse(source, filename=name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _parse(path: Path) -> ast.Module | None:
    source = _source(path)
    return None if source is None else _parse_source(source, str(path))


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``: bindings for type checkers only."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements as the interpreter runs them, through if/try blocks, leaving
    out what only a type checker sees."""
    for node in body:
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse,
                          node.finalbody):
                yield from _top_level(block)
        else:
            yield node


def _targets(node: ast.stmt) -> Iterator[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            if isinstance(target, ast.Name):
                yield target.id


def _deprecations(node: ast.stmt) -> dict[str, bool] | None:
    """``_deprecations = {"name": (message, function), ...}``: name -> whether a function is
    still behind it (jax's deprecation_getattr raises AttributeError for ``None``)."""
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
            isinstance(t, ast.Name) and t.id == "_deprecations" for t in node.targets)):
        return None
    table = {}
    for key, value in zip(node.value.keys, node.value.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            alive = not (isinstance(value, ast.Tuple) and len(value.elts) == 2
                         and isinstance(value.elts[1], ast.Constant)
                         and value.elts[1].value is None)
            table[key.value] = alive
    return table


def _bindings(init: ast.Module) -> tuple[set[str], dict[str, bool]]:
    """jax's ``__init__`` as the interpreter leaves it: the names bound at module level (and
    not deleted after), and ``_deprecations`` (name -> whether a function is behind it)."""
    bound: set[str] = set()
    deprecated: dict[str, bool] = {}
    for node in _top_level(init.body):
        table = _deprecations(node)
        if table is not None:
            deprecated.update(table)
        elif isinstance(node, ast.Delete):
            bound -= {t.id for t in node.targets if isinstance(t, ast.Name)}
        else:
            bound.update(_targets(node))
    return bound, deprecated


def jax_lacks(init: ast.Module, names: Sequence[str]) -> tuple[str, ...]:
    """Which of ``names`` ``import jax; jax.NAME`` would raise AttributeError for: bound at
    module level, or behind a live entry of ``_deprecations``, it is there; a
    ``_deprecations`` entry mapped to ``None``, or no binding at all, is gone."""
    bound, deprecated = _bindings(init)
    return tuple(n for n in names if n not in bound and not deprecated.get(n, False))


_TOP_LEVEL_DEF = re.compile(rb"^def clip\(", re.MULTILINE)
# A line starting at column 0 that is no comment and no signature's closing ") -> ...:"
_NEXT_TOP_LEVEL = re.compile(rb"^[^\s#)]", re.MULTILINE)


def clip_keywords(source: bytes) -> frozenset[str] | None:
    """The parameter names of a module-level ``def clip`` in ``source``, or None where it
    defines none. Only that function is parsed: jax 0.11 on is written in Python 3.12's
    syntax, and the check must read it from any Python this runs on."""
    start = _TOP_LEVEL_DEF.search(source)
    if start is None:
        return None
    after = start.end()
    end = _NEXT_TOP_LEVEL.search(source, after)  # the next statement at column 0
    tree = _parse_source(source[start.start():end.start() if end else len(source)])
    node = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(node, ast.FunctionDef):
        return None
    a = node.args
    return frozenset(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))


def _jax_clip_lacks_old_keywords(jax_dir: Path) -> bool:
    """jnp.clip is defined in jax/_src/numpy/lax_numpy.py (0.4 to 0.12 at least); where it
    cannot be found the answer is no (patching nothing that was not shown missing)."""
    for file in [jax_dir / "_src" / "numpy" / "lax_numpy.py",
                 *sorted((jax_dir / "_src" / "numpy").glob("*.py"))]:
        source = _source(file)
        keywords = clip_keywords(source) if source is not None else None
        if keywords is not None:
            return not set(_CLIP_OLD_KEYWORDS) <= keywords
    return False


def brax_uses(module: ast.Module, removed: Sequence[str], clip_gone: bool) -> set[str]:
    """The gaps one brax module falls into: ``jax.NAME`` for a removed NAME (call or
    reference), and ``*.clip(..., a_min=/a_max=)`` where jnp.clip lost those keywords."""
    found: set[str] = set()
    for node in ast.walk(module):
        if (isinstance(node, ast.Attribute) and node.attr in removed
                and isinstance(node.value, ast.Name) and node.value.id == "jax"):
            found.add(node.attr)
        elif (clip_gone and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "clip"
              and any(k.arg in _CLIP_OLD_KEYWORDS for k in node.keywords)):
            found.add(CLIP)
    return found


_NOT_TRAINING = ("tests", "experimental", "v1")  # brax folders a PPO training never imports


def brax_modules(brax_dir: Path) -> Iterator[Path]:
    """brax's modules a training can import: tests, experiments and the old v1 left out
    (judged inside brax: the folder brax is installed in may be called anything)."""
    for file in sorted(brax_dir.rglob("*.py")):
        inside = file.relative_to(brax_dir).parts
        if not file.name.endswith("_test.py") and not set(inside[:-1]) & set(_NOT_TRAINING):
            yield file


def _removed_names(init: ast.Module) -> tuple[str, ...]:
    """Every name jax keeps in ``_deprecations`` mapped to None: removed, with a message."""
    return tuple(name for name, alive in _bindings(init)[1].items() if not alive)


def find_gaps(jax_dir: Path, brax_dir: Path) -> tuple[Gap, ...]:
    """What brax at ``brax_dir`` uses that jax at ``jax_dir`` no longer has."""
    init = _parse(jax_dir / "__init__.py")
    if init is None:
        return ()
    # a None entry in _deprecations is gone unless the name is also bound plainly
    removed = jax_lacks(init, tuple(dict.fromkeys((*_removed_names(init), *PATCHABLE))))
    clip_gone = _jax_clip_lacks_old_keywords(jax_dir)
    if not removed and not clip_gone:
        return ()
    # Only files that name a removed API are parsed: a cheap filter over ~300 modules
    words = [*removed, *(_CLIP_OLD_KEYWORDS if clip_gone else ())]
    pattern = re.compile("|".join(re.escape(w) for w in words).encode())
    where: dict[str, list[str]] = {}
    for file in brax_modules(brax_dir):
        source = _source(file)
        module = (_parse_source(source, str(file))
                  if source is not None and pattern.search(source) else None)
        if module is None:
            continue
        for api in brax_uses(module, removed, clip_gone):
            where.setdefault(api, []).append(file.relative_to(brax_dir.parent).as_posix())
    # jax's functions first, then keywords: one order whatever the file order
    return tuple(Gap(api, tuple(where[api])) for api in sorted(where, key=lambda a: (a == CLIP, a)))


def stack_verdict(path: Sequence[str] | None = None) -> StackVerdict:
    """The installed jax/brax pair, read from disk. ``path``: the import path to look on
    (default sys.path). Either missing: no gaps (a trial then says what is missing)."""
    jax_dir, brax_dir = _package_dir("jax", path), _package_dir("brax", path)
    gaps = find_gaps(jax_dir, brax_dir) if jax_dir is not None and brax_dir is not None else ()
    return StackVerdict(_version("jax", path), _version("brax", path), gaps)


def require_trainable_stack(path: Sequence[str] | None = None) -> StackVerdict:
    """The verdict; UserError (one line, exit 2) before any trial where the pair cannot
    train even patched. Read afresh each time (~0.1 s): a notebook that fixed its stack is
    not refused from a cache (the trials, not this process, import jax)."""
    verdict = stack_verdict(path)
    if verdict.problem is not None:
        raise UserError(verdict.problem)
    return verdict


# --------------------------------------------------------------------------- the stand-ins
# These run where jax is imported: never at this module's import (the parent stays jax-free).


def _device_put_replicated(x: Any, devices: Sequence[Any]) -> Any:
    """jax.device_put_replicated as brax main inlines it (brax/training/pmap.py): each leaf
    stacked once per device along a new leading axis, that axis sharded over ``devices``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    devices = list(devices)
    if not devices:
        raise ValueError("device_put_replicated requires a non-empty list of devices")
    mesh = jax.sharding.Mesh(np.array(devices), ("_device_put_sharded",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("_device_put_sharded"))

    def replicate(leaf: Any) -> Any:
        stack = jnp.stack if isinstance(leaf, jax.Array) else np.stack
        return jax.device_put(stack([leaf] * len(devices)), sharding)

    return jax.tree_util.tree_map(replicate, x)


def _clip_with_old_keywords(clip: Any) -> Any:
    """jnp.clip that also takes a_min / a_max (brax main passes min / max instead)."""
    @functools.wraps(clip)
    def patched(*args: Any, a_min: Any = None, a_max: Any = None, **kwargs: Any) -> Any:
        for old, new, value in (("a_min", "min", a_min), ("a_max", "max", a_max)):
            if value is not None:
                if kwargs.get(new) is not None:
                    raise TypeError(f"clip got both {old} and {new}")
                kwargs[new] = value
        return clip(*args, **kwargs)

    patched.vramtune_patch = True  # type: ignore[attr-defined]
    return patched


def _missing(module: Any, name: str) -> bool:
    """Whether ``module.name`` raises AttributeError (a deprecated name still there warns:
    not to be shown for asking)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            getattr(module, name)
        except AttributeError:
            return True
    return False


def patch_brax(apis: Sequence[str] | None = None) -> tuple[str, ...]:
    """Put in the stand-ins brax main uses for what the installed brax calls and the imported
    jax no longer has; nothing else, once per process. Returns the stand-ins in place.
    ``apis``: which ones (default: the gaps ``stack_verdict()`` reads from disk, so a brax
    that no longer calls them, brax main, gets nothing). Call it before ``ppo.train``, in the
    process that trains::

        import vramtune.compat
        vramtune.compat.patch_brax()
    """
    import inspect

    import jax
    import jax.numpy as jnp

    wanted = stack_verdict().patches if apis is None else tuple(apis)
    applied = []
    if "device_put_replicated" in wanted:
        if _missing(jax, "device_put_replicated"):
            jax.device_put_replicated = _device_put_replicated  # before jax's __getattr__
        if vars(jax).get("device_put_replicated") is _device_put_replicated:
            applied.append("device_put_replicated")
    if CLIP in wanted:
        if not getattr(jnp.clip, "vramtune_patch", False):
            try:
                keywords = set(inspect.signature(jnp.clip).parameters)
            except (TypeError, ValueError):
                keywords = set(_CLIP_OLD_KEYWORDS)  # unreadable: leave it as it is
            if not set(_CLIP_OLD_KEYWORDS) <= keywords:
                jnp.clip = _clip_with_old_keywords(jnp.clip)
        if getattr(jnp.clip, "vramtune_patch", False):
            applied.append(CLIP)
    return tuple(applied)
