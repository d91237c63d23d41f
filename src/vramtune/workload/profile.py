"""Workload profiles: what to train, with which PPO kwargs, and how batches scale.

A profile is YAML (built-ins live in ``vramtune/profiles``). It is validated on load so a
typo fails before a 30-second compile, and hashed so results from a different workload are
never mixed up with this one's on ``--resume``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from vramtune import paths
from vramtune.errors import UserError, quoted
from vramtune.schema import (
    MAX_BATCH_SIZE,
    MAX_NUM_ENVS,
    MAX_NUM_MINIBATCHES,
    Fields,
    plain_data,
)
from vramtune.workload.rules import (
    BRAX_DEFAULTS,
    BatchShape,
    ScalingPolicy,
    iter_valid_sizes,
    scale_batch,
)
from vramtune.workload.sources import MANAGED_PPO_KEYS, check_profile_source


@dataclass(frozen=True)
class Measure:
    """How long a trial measures: enough intervals for a stable median, no more."""

    warmup_intervals: int = 1  # the epoch after the first still pays one-off costs
    min_intervals: int = 3  # speed intervals (see min_interval_s) before a trial may stop
    max_intervals: int = 40  # speed intervals at most: then the trial stops, steady or not
    min_window_s: float = 1.0
    # training steps between two progress_fn calls; a trial runs at least 2 (an epoch of one
    # step peaks below a user's run on CPU: ``wire.MIN_EPOCH_STEPS``)
    steps_per_epoch: int = 1
    # Steady throughput: per-interval rates until the 95% interval of their median lies
    # within ±speed_tolerance of it (distribution-free, from order statistics: at least 6
    # intervals), or max_window_s of measuring, or max_intervals. An interval groups whole
    # epochs until it holds min_interval_s of training: on a GPU a training step of brax
    # takes milliseconds, and one step's rate is mostly dispatch and timer noise; on a CPU
    # an epoch of `quick` (two steps) takes 0.2-4 s, so there an interval is one to a few
    # epochs.
    speed_tolerance: float = 0.02
    min_interval_s: float = 0.5
    # 8 s: on a GPU that is 16+ intervals, plenty for the median's interval; on a 2-core CPU
    # `quick` gets 3-10 one-epoch intervals (3 at 2048 envs), and a rate still unsettled
    # there is said so (speed_steady False) and settled by the sweep's interleaved
    # re-measurement, which compares the two sizes that matter instead of lengthening every
    # trial (at 20 s a 256-env `quick` trial measured for 22.9 s on a loaded 2-core CPU, its
    # CI +-60%).
    max_window_s: float = 8.0
    # On a GPU an epoch of one training step pays a host sync and a dispatch per step (a
    # 1536-env trial of `quick` on an H100 read 0.58x the steps/s of its 42-steps-per-epoch
    # confirming run): there an epoch is at least this many training steps.
    gpu_steps_per_epoch: int = 16
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
    # MJX-Warp: env steps the contact probe takes after training (None: one episode, at most
    # measure/contacts.CONTACT_STEPS_MAX); a CPU steps Warp at tens to hundreds of env steps/s
    contact_steps: int | None = None


# Keys added after profiles were first hashed: left out of the hash at their defaults
SPEED_MEASURE_KEYS = ("speed_tolerance", "min_interval_s", "max_window_s", "gpu_steps_per_epoch",
                      "contact_steps")


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
    # a pickled env's factory (workload/pickled.py); not hashed: env carries its digest
    factory: bytes | None = field(default=None, repr=False, compare=False)

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

    def sweepable_sizes(self, lo: int, hi: int, device_count: int = 1) -> Iterator[int]:
        """The sweepable sizes in [lo, hi], ascending, computed from the rules (the divisors
        of the product under hold-env-steps): never every integer up to ``hi``."""
        for n in iter_valid_sizes(self.scaling, self.base_shape, lo, hi, device_count):
            if self.sweepable(n, device_count):
                yield n

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scaling"] = str(self.scaling)
        data.pop("source")
        data.pop("factory")
        if not self.domain_randomization:
            data.pop("domain_randomization")  # keeps the hashes of profiles that predate it
        for key in SPEED_MEASURE_KEYS:  # likewise, at their defaults
            if data["measure"][key] == getattr(Measure(), key):
                data["measure"].pop(key)
        return data

    @property
    def hash(self) -> str:
        """Content hash: same workload, same hash, whatever the file is called."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


_TOP_KEYS = {f for f in Profile.__dataclass_fields__ if f not in ("source", "factory")}
_MEASURE_KEYS = set(Measure.__dataclass_fields__)
_NETWORK_KEYS = {"policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation",
                 "policy_obs_key", "value_obs_key"}
# A profile name is used in file and folder names: file-name-safe characters only.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
NAME_RULE = ("1 to 100 letters, digits, '.', '_', '+' or '-', starting with a letter or "
             "digit (it names files and folders)")
# jax.nn's activations (jax 0.9): checked here, before a trial starts, not after its compile.
ACTIVATIONS = ("celu", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
               "hard_tanh", "identity", "leaky_relu", "log_sigmoid", "mish", "relu", "relu6",
               "selu", "sigmoid", "silu", "soft_sign", "softplus", "sparse_plus",
               "sparse_sigmoid", "squareplus", "swish", "tanh")
MAX_LAYER_WIDTH = 1 << 16
MAX_TIMEOUT_S = 1_000_000  # seconds (eleven days): a trial limit past that is a typo
_NUMBERS = ("entropy_cost", "reward_scaling", "clipping_epsilon", "vf_loss_coefficient",
            "desired_kl", "normalize_observations_std_eps", "learning_rate_schedule_min_lr",
            "learning_rate_schedule_max_lr")
_FLAGS = ("normalize_observations", "normalize_advantage", "bootstrap_on_timeout",
          "use_distributional_critic", "deterministic_eval", "log_training_metrics", "run_evals",
          "wrap_env", "vision", "augment_pixels", "use_pmap_on_reset", "restore_value_fn")
_TEXTS = ("normalize_observations_mode", "learning_rate_schedule", "save_checkpoint_path",
          "restore_checkpoint_path")

# Every ppo.train kwarg whose type _check_ppo knows: what `verify` takes from a user's own
# config block (a key outside it may be anything else the user's code reads).
TYPED_PPO_KEYS = frozenset({
    "batch_size", "num_minibatches", "unroll_length", "num_updates_per_batch",
    "num_resets_per_eval", "num_eval_envs", "seed", "max_devices_per_host",
    "normalize_until_count", "training_metrics_steps", "learning_rate", "discounting",
    "gae_lambda", "max_grad_norm", "clipping_epsilon_value", *_NUMBERS, *_FLAGS, *_TEXTS})


def safe_name(text: str) -> str:
    """A profile name as a path component: characters outside NAME_PATTERN become '-'
    (for names from files written before names were checked)."""
    slug = re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip(".-")[:100]
    return slug or "profile"


def _check_ppo(ppo: Fields) -> None:
    """The ppo.train kwargs whose type is known; any other key reaches ppo.train as is."""
    managed = sorted(set(ppo.data) & MANAGED_PPO_KEYS)
    if managed:
        raise UserError(f"{ppo.where}: ppo.{managed[0]} is set by vramtune per trial; "
                        f"use the top-level key (num_envs, episode_length, ...) instead")
    given = ppo.data
    ints = {"batch_size": (1, MAX_BATCH_SIZE), "num_minibatches": (1, MAX_NUM_MINIBATCHES),
            "unroll_length": (1, 10_000), "num_updates_per_batch": (1, 10_000),
            "num_resets_per_eval": (0, 1_000_000), "num_eval_envs": (1, MAX_NUM_ENVS),
            "seed": (None, None)}
    for key, (lo, hi) in ints.items():
        if key in given:
            ppo.int(key, lo=lo, hi=hi)
    for key in ("max_devices_per_host", "normalize_until_count", "training_metrics_steps"):
        if key in given:  # brax's default is None: null is allowed
            ppo.int(key, lo=1, none=True)
    if "learning_rate" in given:
        ppo.number("learning_rate", above=0)
    for key in ("discounting", "gae_lambda"):
        if key in given:
            ppo.number(key, lo=0, hi=1)
    for key in _NUMBERS:
        if key in given:
            ppo.number(key)
    for key in ("max_grad_norm", "clipping_epsilon_value"):
        if key in given:
            ppo.number(key, none=True)
    for key in _FLAGS:
        if key in given:
            ppo.flag(key)
    for key in _TEXTS:
        if key in given:
            ppo.text(key, none=key != "normalize_observations_mode", max_len=1000)
    for key, value in given.items():
        plain_data(value, ppo.where, f"ppo.{key}")


def _measure(data: Any, where: str) -> Measure:
    m = Fields(data, where, "measure.")
    m.only(_MEASURE_KEYS)
    d = Measure()
    measure = Measure(
        warmup_intervals=m.int("warmup_intervals", d.warmup_intervals, lo=0, hi=1000),
        min_intervals=m.int("min_intervals", d.min_intervals, lo=1, hi=10_000),
        max_intervals=m.int("max_intervals", d.max_intervals, lo=1, hi=10_000),
        min_window_s=m.number("min_window_s", d.min_window_s, lo=0, hi=86_400),
        steps_per_epoch=m.int("steps_per_epoch", d.steps_per_epoch, lo=1, hi=100_000),
        min_training_steps=m.int("min_training_steps", d.min_training_steps, lo=0,
                                 hi=1_000_000),
        min_evals=m.int("min_evals", d.min_evals, lo=0, hi=10_000),
        steady_intervals=m.int("steady_intervals", d.steady_intervals, lo=0, hi=10_000),
        steady_tolerance=m.number("steady_tolerance", d.steady_tolerance, lo=0, hi=1),
        speed_tolerance=m.number("speed_tolerance", d.speed_tolerance, lo=0, hi=1),
        min_interval_s=m.number("min_interval_s", d.min_interval_s, lo=0, hi=86_400),
        max_window_s=m.number("max_window_s", d.max_window_s, lo=0, hi=86_400),
        gpu_steps_per_epoch=m.int("gpu_steps_per_epoch", d.gpu_steps_per_epoch, lo=1,
                                  hi=100_000),
        contact_steps=m.int("contact_steps", None, lo=1, hi=1_000_000, none=True))
    if measure.max_intervals < measure.min_intervals:
        raise UserError(f"{where}: measure needs 1 <= min_intervals <= max_intervals, got "
                        f"min_intervals {measure.min_intervals} and max_intervals "
                        f"{measure.max_intervals}")
    return measure


def _network(data: Any, where: str) -> dict[str, Any]:
    n = Fields(data, where, "network.")
    n.only(_NETWORK_KEYS)
    for key in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        if key in data:
            n.int_list(key, lo=1, hi=MAX_LAYER_WIDTH)
    if "activation" in data:
        n.choice("activation", ACTIVATIONS)
    for key in ("policy_obs_key", "value_obs_key"):
        n.text(key, None, none=True, max_len=200)
    return dict(data)


def profile_from_dict(data: Any, *, source: str = "<dict>") -> Profile:
    """Validate a parsed YAML mapping; every problem is one UserError naming the key."""
    where = f"profile {source}"
    f = Fields(data, where, what="a profile")
    f.only(_TOP_KEYS)
    for required in ("name", "env"):
        if required not in data or data[required] in (None, ""):
            raise UserError(f"{where}: missing required key {required!r}")
    name = f.text("name", pattern=NAME_PATTERN, expected=NAME_RULE)
    env = f.text("env", max_len=300)
    ppo = f.sub("ppo", {}, none_is_empty=True)
    _check_ppo(ppo)
    env_kwargs = f.mapping("env_kwargs", {}, none_is_empty=True)
    plain_data(env_kwargs, where, "env_kwargs")
    network = _network(f.mapping("network", {}, none_is_empty=True), where)
    measure = _measure(f.mapping("measure", {}, none_is_empty=True), where)
    scaling = f.choice("scaling", [p.value for p in ScalingPolicy],
                       str(ScalingPolicy.HOLD_MINIBATCH))
    defaults = Profile(name="-", env="-")
    profile = Profile(
        name=name, env=env, description=f.text("description", "", none=True) or "",
        backend=f.text("backend", None, none=True, max_len=100),
        impl=f.text("impl", None, none=True, max_len=100),
        domain_randomization=f.flag("domain_randomization", False),
        env_kwargs=dict(env_kwargs),
        episode_length=f.int("episode_length", defaults.episode_length, lo=1, hi=10_000_000),
        action_repeat=f.int("action_repeat", defaults.action_repeat, lo=1, hi=1000),
        num_envs=f.int("num_envs", defaults.num_envs, lo=1, hi=MAX_NUM_ENVS),
        start_envs=f.int("start_envs", None, lo=1, hi=MAX_NUM_ENVS, none=True),
        max_envs=f.int("max_envs", defaults.max_envs, lo=1, hi=MAX_NUM_ENVS),
        scaling=ScalingPolicy(scaling), ppo=dict(ppo.data), network=network, measure=measure,
        timeout_s=f.number("timeout_s", defaults.timeout_s, above=0, hi=MAX_TIMEOUT_S),
        source=source)
    if profile.start_envs is not None and profile.start_envs > profile.max_envs:
        raise UserError(f"{where}: start_envs {profile.start_envs} is above max_envs "
                        f"{profile.max_envs}")
    check_profile_source(profile.env, profile.backend, profile.impl, profile.ppo,
                         profile.domain_randomization, where)
    return profile


def builtin_profiles() -> dict[str, Path]:
    """Name -> path of every profile shipped with vramtune."""
    folder = resources.files("vramtune") / "profiles"
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".yaml")}


def load_profile(name_or_path: str | Path) -> Profile:
    """A built-in name ('quick') or a YAML file path."""
    from vramtune import yamlio  # not at import time: the trial child never reads YAML

    text = str(name_or_path)
    builtins = builtin_profiles()
    if text in builtins:
        path = builtins[text]
    else:
        path = Path(text).expanduser()
        # paths.is_file: a name too long for the file system is "not a file", not an OSError
        if not text.strip() or not paths.is_file(path):
            raise UserError(f"unknown profile {quoted(text)}: not a file, and the built-in "
                            f"profiles are {', '.join(sorted(builtins))}")
    data = yamlio.load_file(path, what="profile")
    if data is None:
        raise UserError(f"profile {path} is empty: a profile is a YAML mapping with at least "
                        f"name and env")
    if isinstance(data, dict) and "name" not in data:
        data = {**data, "name": safe_name(path.stem)}  # a file without name: named after itself
    return profile_from_dict(data, source=str(path))


def profile_folder(profile: Profile) -> str | None:
    """The folder of the profile's file, where a ``package.module:factory`` env is imported
    from (besides PYTHONPATH); None for a profile that is not a file of its own."""
    if not profile.source or profile.source.startswith("<"):
        return None
    path = Path(profile.source)
    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return None
    return str(path.resolve().parent)
