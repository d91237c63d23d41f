"""Find Brax PPO batch settings in the YAML files people actually have, and diagnose them.

Configs come flat (``ppo.train`` kwargs at the top), nested (under ``ppo:``, ``experiment:``,
``algorithm:``, Playground's ``ppo_params:``, a Hydra group...), or with upper-case / camelCase
/ dashed keys (``NUM_ENVS``, ``numEnvs``, ``num-envs``). Rather than guess a schema we search
every mapping, then take batch_size and num_minibatches from the place closest to where
num_envs was found, so an ``eval: {batch_size: ...}`` elsewhere is not mistaken for PPO's.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramtune import yamlio
from vramtune.errors import UserError
from vramtune.schema import describe, printable
from vramtune.workload.rules import (
    BRAX_DEFAULTS,
    BatchShape,
    ScalingPolicy,
    Violation,
    nearest_valid,
    suggest_fixes,
    valid_batch_settings,
    violations,
)

# Accepted spellings, after normalising case, camelCase and dashes to snake_case.
ALIASES: dict[str, tuple[str, ...]] = {
    "num_envs": ("num_envs", "n_envs", "num_environments", "num_parallel_envs"),
    "batch_size": ("batch_size",),
    "num_minibatches": ("num_minibatches", "num_mini_batches", "n_minibatches", "minibatches"),
    "unroll_length": ("unroll_length",),
}

# Settings beyond this are not a config anyone trains (and the nearest valid sizes are found
# by factorising them: bounded values keep that a fraction of a second).
MAX_SETTING = 1 << 40
MAX_DEVICES = 1 << 20
MAX_NOTES = 20  # other occurrences listed; a file with thousands gets a count
_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")
_EVAL = re.compile(r"(^|_)(eval|evaluation|evaluator|test|testing)(_|$)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Found:
    """One setting: its value and where it came from (a dotted path, or a default)."""

    value: int
    path: str | None  # None: not in the file, Brax's default applies

    @property
    def where(self) -> str:
        # shown, so a control character in a key is spelled out, not printed
        return printable(self.path) if self.path is not None else "not set: ppo.train default"


@dataclass(frozen=True)
class BatchConfig:
    source: str
    num_envs: Found
    batch_size: Found
    num_minibatches: Found
    unroll_length: Found
    notes: tuple[str, ...] = ()  # other occurrences that were not used, and why

    @property
    def shape(self) -> BatchShape:
        return BatchShape(self.num_envs.value, self.batch_size.value, self.num_minibatches.value)

    @property
    def defaults_used(self) -> tuple[str, ...]:
        return tuple(name for name in ("batch_size", "num_minibatches")
                     if getattr(self, name).path is None)


@dataclass(frozen=True)
class PolicyOptions:
    """Under one scaling policy: valid settings at this num_envs, else the nearest num_envs."""

    policy: ScalingPolicy
    shapes: tuple[BatchShape, ...]
    below: int | None  # nearest valid num_envs, only when shapes is empty
    above: int | None


@dataclass(frozen=True)
class Diagnosis:
    config: BatchConfig
    device_count: int
    violations: tuple[Violation, ...]
    fixes: tuple[BatchShape, ...]
    options: tuple[PolicyOptions, ...] = ()  # what each scaling policy allows (invalid only)

    @property
    def valid(self) -> bool:
        return not self.violations

    @property
    def env_steps_per_update(self) -> int | None:
        """batch_size x num_minibatches x unroll_length; None where a factor is not positive
        (a negative count of steps is no figure)."""
        c = self.config
        factors = (c.batch_size.value, c.num_minibatches.value, c.unroll_length.value)
        return math.prod(factors) if min(factors) >= 1 else None


def normalise_key(key: Any) -> str:
    """'NUM_ENVS', 'numEnvs', 'num-envs' -> 'num_envs'."""
    return _CAMEL.sub("_", str(key)).replace("-", "_").lower()


def _walk(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every mapping in the document, breadth first (shallow settings win ties)."""
    queue: deque[tuple[tuple[str, ...], Any]] = deque([(path, node)])
    while queue:
        where, item = queue.popleft()
        if isinstance(item, dict):
            yield where, item
            for key, value in item.items():
                if isinstance(value, dict | list):
                    queue.append(((*where, str(key)), value))
        elif isinstance(item, list):
            for index, value in enumerate(item):
                if isinstance(value, dict | list):
                    queue.append(((*where, f"[{index}]"), value))


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path).replace(".[", "[")


def _lookup(root: Any, dotted: str) -> Any:
    node = root
    for part in dotted.split("."):
        if not isinstance(node, dict):
            raise KeyError(dotted)
        node = next(v for k, v in node.items() if str(k) == part)
    return node


def _as_int(raw: Any, name: str, where: str, root: Any, depth: int = 0) -> int:
    """An integer setting; resolves ${a.b} (Hydra/OmegaConf absolute references)."""
    if isinstance(raw, str):
        match = _INTERPOLATION.match(raw.strip())
        if match and depth < 8:
            try:
                target = _lookup(root, match[1])
            except (KeyError, StopIteration):
                raise UserError(f"{name} at {where} is {raw!r}, and {match[1]} is not in the "
                                f"file; give a number") from None
            return _as_int(target, name, f"{where} -> {match[1]}", root, depth + 1)
    value: float | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        if abs(raw) > MAX_SETTING:
            raise UserError(f"{name} at {where} is {describe(raw)}: beyond any trainable "
                            f"setting (at most {MAX_SETTING})")
        return raw
    if isinstance(raw, float):
        value = raw
    elif isinstance(raw, str):
        try:
            value = float(raw.strip().replace("_", ""))
        except ValueError:
            value = None
    if value is None or not math.isfinite(value) or not value.is_integer():
        raise UserError(f"{name} at {where} is {describe(raw)}, not an integer")
    if abs(value) > MAX_SETTING:
        raise UserError(f"{name} at {where} is {describe(raw)}: beyond any trainable setting "
                        f"(at most {MAX_SETTING})")
    return int(value)


def _candidates(root: Any, name: str) -> list[tuple[tuple[str, ...], Any]]:
    spellings = ALIASES[name]
    found = []
    for path, mapping in _walk(root):
        for key, value in mapping.items():
            if normalise_key(key) in spellings and not isinstance(value, dict | list):
                found.append(((*path, str(key)), value))
    return found


def _distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Steps through the tree between the mappings holding two keys."""
    a, b = a[:-1], b[:-1]
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return len(a) + len(b) - 2 * common


def _is_eval(path: tuple[str, ...]) -> bool:
    """A key under an eval / test section describes evaluation, not training."""
    return any(_EVAL.search(normalise_key(part)) for part in path[:-1])


def searched_keys() -> str:
    return ", ".join(ALIASES["num_envs"]) + " (any case, camelCase or dashes, at any depth)"


def parse_config(data: Any, source: str = "<config>") -> BatchConfig:
    """The batch settings in a parsed YAML document; UserError when there are none."""
    envs = _candidates(data, "num_envs")
    if not envs:
        raise UserError(f"{source}: no num_envs found; looked for keys {searched_keys()}")
    notes: list[str] = []
    # Several num_envs (train and eval sections): prefer one outside eval/test sections, then
    # the one whose mapping holds the most batch settings, then the shallowest.
    batch_keys: dict[tuple[str, ...], int] = {}
    for name in ("batch_size", "num_minibatches"):
        for path, _ in _candidates(data, name):
            batch_keys[path[:-1]] = batch_keys.get(path[:-1], 0) + 1

    def rank(candidate: tuple[tuple[str, ...], Any]) -> tuple[bool, int, int]:
        path = candidate[0]
        return (_is_eval(path), -batch_keys.get(path[:-1], 0), len(path))

    env_path, env_raw = min(envs, key=rank)
    num_envs = Found(_as_int(env_raw, "num_envs", _dotted(env_path), data), _dotted(env_path))
    for path, raw in envs:
        if path != env_path:
            why = ("an evaluation setting" if _is_eval(path) else
                   "the one used sits with the batch settings" if rank((path, raw))[1] >
                   rank((env_path, env_raw))[1] else "the one used is shallower")
            notes.append(printable(f"also found {_dotted(path)}={raw!r}, not used ({why})"))
    settings: dict[str, Found] = {}
    for name in ("batch_size", "num_minibatches", "unroll_length"):
        found = _candidates(data, name)
        if not found:
            settings[name] = Found(BRAX_DEFAULTS[name], None)
            continue
        path, raw = min(found, key=lambda c: (_distance(c[0], env_path), _is_eval(c[0]),
                                              len(c[0])))
        settings[name] = Found(_as_int(raw, name, _dotted(path), data), _dotted(path))
        for other, value in found:
            if other != path:
                notes.append(printable(f"also found {_dotted(other)}={value!r}, not used "
                                       f"({_dotted(path)} is closer to {num_envs.path})"))
    if len(notes) > MAX_NOTES:
        notes[MAX_NOTES:] = [f"... and {len(notes) - MAX_NOTES} more occurrences, not used"]
    return BatchConfig(source, num_envs, settings["batch_size"], settings["num_minibatches"],
                       settings["unroll_length"], tuple(notes))


def load_config(path: str | Path) -> BatchConfig:
    """Read a YAML (or JSON) config file; every reason it cannot be read is a UserError."""
    file = Path(path).expanduser()
    try:
        found, is_file = file.exists(), file.is_file()
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise UserError(f"{file}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if not found:
        raise UserError(f"{file}: no such file")
    if not is_file:
        raise UserError(f"{file}: not a file")
    text = yamlio.read_text(file, what="config")
    documents = [d for d in yamlio.loads(text, str(file), documents=True) if d is not None]
    if not documents:
        raise UserError(f"{file}: empty; no num_envs found (looked for keys {searched_keys()})")
    return parse_config(documents[0] if len(documents) == 1 else documents, str(file))


def settings_block(path: str | Path, config: BatchConfig) -> dict[str, Any]:
    """The mapping that holds the num_envs ``config`` uses: in a user's own file, the block
    of PPO settings (``verify`` trains with the rest of it too). Empty if not found."""
    file = Path(path).expanduser()
    documents = [d for d in yamlio.loads(yamlio.read_text(file, what="config"), str(file),
                                         documents=True) if d is not None]
    root: Any = documents[0] if len(documents) == 1 else documents
    for where, mapping in _walk(root):
        for key in mapping:
            if _dotted((*where, str(key))) == config.num_envs.path:
                return mapping
    return {}


def diagnose(config: BatchConfig, device_count: int = 1, fixes: int = 3) -> Diagnosis:
    """Every broken rule, and the nearest valid settings when there is one."""
    if not 1 <= device_count <= MAX_DEVICES:
        raise UserError(f"--device-count must be an integer from 1 to {MAX_DEVICES}, got "
                        f"{device_count}")
    shape = config.shape
    broken = violations(shape.num_envs, shape.batch_size, shape.num_minibatches, device_count)
    nearest: list[BatchShape] = []
    if broken and min(shape.num_envs, shape.batch_size, shape.num_minibatches) >= 1:
        nearest = suggest_fixes(shape.num_envs, shape.batch_size, shape.num_minibatches,
                                device_count, count=fixes)
    unroll = config.unroll_length.value
    if unroll < 1:  # not a batch rule, so no nearest batch settings: ppo.train rejects it
        broken.append(Violation("unroll_length >= 1", f"unroll_length is {unroll}; each env "
                                f"steps unroll_length times per trajectory: a positive integer"))
    return Diagnosis(config, device_count, tuple(broken), tuple(nearest),
                     policy_options(shape, device_count) if nearest else ())


def policy_options(shape: BatchShape, device_count: int = 1, count: int = 2
                   ) -> tuple[PolicyOptions, ...]:
    """For each scaling policy, taking this file's settings as the base: the valid settings
    that keep num_envs, or the nearest num_envs on both sides when there are none."""
    found = []
    for policy in ScalingPolicy:
        shapes = valid_batch_settings(policy, shape, shape.num_envs, device_count, count=count)
        below = above = None
        if not shapes:
            below, above = nearest_valid(policy, shape, shape.num_envs, device_count,
                                         limit=2 * max(shape.num_envs, shape.samples_per_update))
        found.append(PolicyOptions(policy, tuple(shapes), below, above))
    return tuple(found)


def describe_fix(config: BatchConfig, fix: BatchShape) -> str:
    """'num_envs 3000 -> 2048' style: only what changes."""
    changes = []
    for name in ("num_envs", "batch_size", "num_minibatches"):
        before, after = getattr(config, name).value, getattr(fix, name)
        if before != after:
            changes.append(f"{name} {before} -> {after}")
    unrolls = fix.unrolls_per_step
    return (", ".join(changes) or "no change") + \
        f" (batch_size x num_minibatches = {fix.samples_per_update}: {unrolls} unroll" \
        f"{'s' if unrolls != 1 else ''} of all envs per training step)"
