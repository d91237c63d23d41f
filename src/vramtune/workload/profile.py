"""Workload profiles: what to train, with which PPO kwargs, and how batches scale.

A profile is YAML (built-ins live in ``vramtune/profiles``). It is validated on load so a
typo fails before a 30-second compile, and hashed so results from a different workload are
never mixed up with this one's on ``--resume``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from vramtune.errors import UserError
from vramtune.workload.rules import BRAX_DEFAULTS, BatchShape, ScalingPolicy, scale_batch
from vramtune.workload.sources import MANAGED_PPO_KEYS, check_profile_source


@dataclass(frozen=True)
class Measure:
    """How long a trial measures: enough intervals for a stable median, no more."""

    warmup_intervals: int = 1  # the epoch after the first still pays one-off costs
    min_intervals: int = 3
    max_intervals: int = 40
    min_window_s: float = 1.0
    steps_per_epoch: int = 1  # training steps between two progress_fn calls
    # Memory must be steady too, not only throughput: at least this many training steps and
    # evaluations, and the figure the cap counts grown by at most steady_tolerance over the
    # last steady_intervals progress calls. Measured with a plain brax script (quick, 256 and
    # 1024 envs, 100-500 training steps): the peak arrives in epoch 2, and the rule
    # P_k <= 1.005 x P_(k-2) stops by epoch 4 within 0.13-0.23% of a long run's final peak;
    # a zero tolerance never stopped on 1-2 MiB of creep.
    min_training_steps: int = 5
    min_evals: int = 1
    steady_intervals: int = 2
    steady_tolerance: float = 0.005


@dataclass(frozen=True)
class Profile:
    name: str
    env: str  # brax:<name> | playground:<Name> | package.module:factory
    description: str = ""
    backend: str | None = None  # brax physics backend (generalized, mjx, positional, spring)
    impl: str | None = None  # Playground physics implementation (jax, warp)
    domain_randomization: bool = False  # Playground: train with its domain randomizer
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    episode_length: int = 1000
    action_repeat: int = 1
    num_envs: int = 128  # the num_envs the ppo batch settings were tuned for
    start_envs: int | None = None  # the sweep's default start size (default: num_envs)
    max_envs: int = 4096  # the sweep's default maximum
    scaling: ScalingPolicy = ScalingPolicy.HOLD_MINIBATCH
    ppo: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    measure: Measure = field(default_factory=Measure)
    timeout_s: float = 900.0
    source: str = ""  # where it was loaded from (not hashed)

    @property
    def batch_size(self) -> int:
        return int(self.ppo.get("batch_size", BRAX_DEFAULTS["batch_size"]))

    @property
    def num_minibatches(self) -> int:
        return int(self.ppo.get("num_minibatches", BRAX_DEFAULTS["num_minibatches"]))

    @property
    def unroll_length(self) -> int:
        return int(self.ppo.get("unroll_length", BRAX_DEFAULTS["unroll_length"]))

    @property
    def base_shape(self) -> BatchShape:
        return BatchShape(self.num_envs, self.batch_size, self.num_minibatches)

    @property
    def first_size(self) -> int:
        return self.start_envs or self.num_envs

    def shape_for(self, num_envs: int, device_count: int = 1) -> BatchShape | None:
        return scale_batch(self.scaling, self.base_shape, num_envs, device_count)

    def sweepable(self, num_envs: int, device_count: int = 1) -> bool:
        """A size the sweep may pick: valid, and (for the growing policies) not one whose
        rounding to Brax's rule more than doubles the unrolls per training step, where the
        memory measured would be the inflated batch's, not num_envs'."""
        shape = self.shape_for(num_envs, device_count)
        if shape is None:
            return False
        if self.scaling is ScalingPolicy.HOLD_ENV_STEPS:
            return True
        return shape.unrolls_per_step <= 2 * max(self.base_shape.unrolls_per_step, 1)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scaling"] = str(self.scaling)
        data.pop("source")
        if not self.domain_randomization:
            data.pop("domain_randomization")  # keeps the hashes of profiles that predate it
        return data

    @property
    def hash(self) -> str:
        """Content hash: same workload, same hash, whatever the file is called."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


_TOP_KEYS = {f for f in Profile.__dataclass_fields__ if f != "source"}
_MEASURE_KEYS = set(Measure.__dataclass_fields__)
_NETWORK_KEYS = {"policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation",
                 "policy_obs_key", "value_obs_key"}


def _check_keys(data: dict[str, Any], valid: set[str], where: str) -> None:
    unknown = sorted(set(data) - valid)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(valid))}")


def profile_from_dict(data: Any, *, source: str = "<dict>") -> Profile:
    """Validate a parsed YAML mapping; every problem is one UserError naming the key."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: a profile must be a YAML mapping, got {type(data).__name__}")
    _check_keys(data, _TOP_KEYS, f"profile {source}")
    for required in ("name", "env"):
        if not data.get(required):
            raise UserError(f"profile {source}: missing required key {required!r}")
    kwargs = dict(data)
    for key in ("ppo", "network", "env_kwargs", "measure"):
        value = kwargs.get(key) or {}
        if not isinstance(value, dict):
            raise UserError(f"profile {source}: {key!r} must be a mapping")
        kwargs[key] = dict(value)
    _check_keys(kwargs["network"], _NETWORK_KEYS, f"profile {source}: network")
    _check_keys(kwargs["measure"], _MEASURE_KEYS, f"profile {source}: measure")
    managed = sorted(set(kwargs["ppo"]) & MANAGED_PPO_KEYS)
    if managed:
        raise UserError(f"profile {source}: ppo.{managed[0]} is set by vramtune per trial; "
                        f"use the top-level key (num_envs, episode_length, ...) instead")
    try:
        kwargs["scaling"] = ScalingPolicy(kwargs.get("scaling", ScalingPolicy.HOLD_MINIBATCH))
    except ValueError:
        raise UserError(f"profile {source}: scaling {kwargs['scaling']!r} is not one of "
                        f"{', '.join(p.value for p in ScalingPolicy)}") from None
    try:
        kwargs["measure"] = Measure(**kwargs["measure"])
        profile = Profile(**kwargs, source=source)
    except TypeError as exc:
        raise UserError(f"profile {source}: {exc}") from None
    if not isinstance(profile.domain_randomization, bool):
        raise UserError(f"profile {source}: domain_randomization must be true or false")
    check_profile_source(profile.env, profile.backend, profile.impl, profile.ppo,
                         profile.domain_randomization, f"profile {source}")
    if profile.start_envs is not None and (not isinstance(profile.start_envs, int)
                                           or profile.start_envs < 1):
        raise UserError(f"profile {source}: start_envs must be a positive integer")
    for key in ("episode_length", "num_envs", "max_envs", "batch_size", "num_minibatches",
                "unroll_length"):
        value = getattr(profile, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(f"profile {source}: {key} must be a positive integer, got {value!r}")
    if profile.measure.min_intervals < 1 or profile.measure.max_intervals < profile.measure.min_intervals:
        raise UserError(f"profile {source}: measure needs 1 <= min_intervals <= max_intervals")
    return profile


def builtin_profiles() -> dict[str, Path]:
    """Name -> path of every profile shipped with vramtune."""
    folder = resources.files("vramtune") / "profiles"
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".yaml")}


def load_profile(name_or_path: str | Path) -> Profile:
    """A built-in name ('quick') or a YAML file path."""
    text = str(name_or_path)
    builtins = builtin_profiles()
    if text in builtins:
        path = builtins[text]
    else:
        path = Path(text).expanduser()
        if not path.is_file():
            raise UserError(f"unknown profile {text!r}: not a file, and the built-in profiles are "
                            f"{', '.join(sorted(builtins))}")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read profile {path}: {first}") from None
    if isinstance(data, dict) and not data.get("name"):
        data = {**data, "name": path.stem}  # a file without name: is named after itself
    return profile_from_dict(data, source=str(path))
