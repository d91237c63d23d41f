"""Environment sources: what a profile's ``env`` names, checked in pure Python.

Sources: ``brax:<name>`` (with the profile's backend), ``playground:<Name>`` (MuJoCo
Playground), ``package.module:factory`` (the user's own env), ``pickled:<name>@<digest>`` (a
callable from a notebook, sent by value: workload/pickled.py). These checks run in the parent
at profile load time: the parent never imports JAX.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramtune.errors import UserError

if TYPE_CHECKING:
    pass


BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
PLAYGROUND_IMPLS = ("jax", "warp")
# The batch settings the parent needs before launch (Brax's batch rule, steps per update).
SHAPE_KEYS = ("batch_size", "num_minibatches", "unroll_length")
# ppo.train kwargs vramtune sets per trial; a profile's `ppo:` block may not set them.
MANAGED_PPO_KEYS = frozenset({"num_envs", "num_timesteps", "num_evals", "progress_fn",
                              "environment", "network_factory", "episode_length",
                              "action_repeat", "wrap_env_fn"})
PICKLED = "pickled"
_PICKLED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*@[0-9a-f]{16}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

# Brax's make_ppo_networks defaults, written out so a starter profile shows what it trains.
BRAX_NETWORK = {"policy_hidden_layer_sizes": [32, 32, 32, 32],
                "value_hidden_layer_sizes": [256, 256, 256, 256, 256], "activation": "swish"}

# The PPO settings Brax publishes per env (brax training colab). Other brax envs, and user
# factories, start from Ant's as a template.
_BRAX_COMMON = {"normalize_observations": True, "learning_rate": 3.0e-4}
BRAX_PPO: dict[str, dict[str, Any]] = {
    "ant": {"num_envs": 4096, "batch_size": 2048, "num_minibatches": 32, "unroll_length": 5,
            "num_updates_per_batch": 4, "discounting": 0.97, "entropy_cost": 1.0e-2,
            "reward_scaling": 10},
    "humanoid": {"num_envs": 2048, "batch_size": 1024, "num_minibatches": 32,
                 "unroll_length": 10, "num_updates_per_batch": 8, "discounting": 0.97,
                 "entropy_cost": 1.0e-3, "reward_scaling": 0.1},
    "humanoidstandup": {"num_envs": 2048, "batch_size": 1024, "num_minibatches": 32,
                        "unroll_length": 15, "num_updates_per_batch": 8, "discounting": 0.97,
                        "learning_rate": 6.0e-4, "entropy_cost": 1.0e-2, "reward_scaling": 0.1},
    "halfcheetah": {"num_envs": 2048, "batch_size": 512, "num_minibatches": 32,
                    "unroll_length": 20, "num_updates_per_batch": 8, "discounting": 0.95,
                    "entropy_cost": 1.0e-3, "reward_scaling": 1},
    "inverted_pendulum": {"num_envs": 2048, "batch_size": 1024, "num_minibatches": 32,
                          "unroll_length": 5, "num_updates_per_batch": 4, "discounting": 0.97,
                          "entropy_cost": 1.0e-2, "reward_scaling": 10},
    "inverted_double_pendulum": {"num_envs": 2048, "batch_size": 1024, "num_minibatches": 32,
                                 "unroll_length": 5, "num_updates_per_batch": 4,
                                 "discounting": 0.97, "entropy_cost": 1.0e-2,
                                 "reward_scaling": 10},
    "reacher": {"num_envs": 2048, "batch_size": 256, "num_minibatches": 32, "unroll_length": 50,
                "num_updates_per_batch": 8, "discounting": 0.95, "entropy_cost": 1.0e-3,
                "reward_scaling": 5, "action_repeat": 4},
    "pusher": {"num_envs": 2048, "batch_size": 512, "num_minibatches": 16, "unroll_length": 30,
               "num_updates_per_batch": 8, "discounting": 0.95, "entropy_cost": 1.0e-2,
               "reward_scaling": 5},
}
TEMPLATE_ENV = "ant"


@dataclass(frozen=True)
class Source:
    """A parsed ``env`` string."""

    kind: str  # brax | playground | factory | pickled
    name: str  # env name, "package.module:factory", or "<name>@<digest>" (pickled)

    @property
    def module(self) -> str:
        return self.name.partition(":")[0]

    @property
    def attr(self) -> str:
        return self.name.partition(":")[2]


def parse_source(env: str) -> Source:
    """Syntax only (no imports): one UserError naming the three accepted forms."""
    text = str(env).strip()
    forms = "expected brax:<name>, playground:<Name> or package.module:factory"
    for kind in ("brax", "playground"):
        if text.startswith(kind + ":"):
            name = text[len(kind) + 1:]
            if not name or not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
                raise UserError(f"env {env!r}: {kind}: needs an environment name; {forms}")
            return Source(kind, name)
    if text.startswith(PICKLED + ":") and _PICKLED.fullmatch(text[len(PICKLED) + 1:]):
        return Source(PICKLED, text[len(PICKLED) + 1:])
    module, sep, attr = text.partition(":")
    if sep and _IDENT.match(module) and _IDENT.match(attr) and "." not in attr:
        return Source("factory", text)
    raise UserError(f"env {env!r}: {forms}")


def check_profile_source(env: str, backend: str | None, impl: str | None,
                         ppo: Mapping[str, Any], domain_randomization: bool, where: str) -> None:
    """Load-time checks of the source against the other keys (pure; the parent runs it)."""
    source = parse_source(env)
    if backend is not None:
        if source.kind == "playground":
            raise UserError(f"{where}: backend applies to brax: sources; a Playground env "
                            f"picks its physics with impl ({', '.join(PLAYGROUND_IMPLS)})")
        if source.kind == "brax" and backend not in BRAX_BACKENDS:
            raise UserError(f"{where}: backend {backend!r} is not one of "
                            f"{', '.join(BRAX_BACKENDS)}")
    if impl is not None:
        if source.kind != "playground":
            raise UserError(f"{where}: impl applies to playground: sources; a brax env picks "
                            f"its physics with backend ({', '.join(BRAX_BACKENDS)})")
        if impl not in PLAYGROUND_IMPLS:
            raise UserError(f"{where}: impl {impl!r} is not one of {', '.join(PLAYGROUND_IMPLS)}")
    if domain_randomization and source.kind != "playground":
        raise UserError(f"{where}: domain_randomization uses Playground's randomizer; it "
                        f"applies to playground: sources only")
    if source.kind == "playground":
        missing = [key for key in SHAPE_KEYS if key not in ppo]
        if missing:
            raise UserError(
                f"{where}: a playground profile must set ppo.{missing[0]} itself (the batch "
                f"rule is applied before launch, without importing Playground); write one with "
                f"`vramtune init-profile --env {env} -o FILE`")
