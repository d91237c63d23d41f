"""Build the environment and PPO kwargs a profile names. Runs in the trial child only.

Sources: ``brax:<name>`` (with the profile's backend), ``playground:<Name>`` (MuJoCo
Playground, its own canonical PPO config as the base), ``package.module:factory`` (the
user's own env; the factory gets the profile's env_kwargs).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from vramtune.errors import UserError
from vramtune.profile import Profile


def source_kind(env: str) -> str:
    if env.startswith("brax:"):
        return "brax"
    if env.startswith("playground:"):
        return "playground"
    module, sep, attr = env.partition(":")
    if sep and module and attr:
        return "factory"
    raise UserError(f"env {env!r}: expected brax:<name>, playground:<Name> or "
                    f"package.module:factory")


def build_environment(profile: Profile) -> tuple[Any, dict[str, Any]]:
    """(environment, extra ppo.train kwargs such as wrap_env_fn) for this profile."""
    kind = source_kind(profile.env)
    name = profile.env.split(":", 1)[1]
    if kind == "brax":
        from brax import envs

        kwargs = dict(profile.env_kwargs)
        if profile.backend:
            kwargs["backend"] = profile.backend
        return envs.get_environment(name, **kwargs), {}
    if kind == "playground":
        from mujoco_playground import registry, wrapper

        config_overrides = dict(profile.env_kwargs)
        if profile.impl:
            config_overrides["impl"] = profile.impl
        env = registry.load(name, config_overrides=config_overrides or None)
        return env, {"wrap_env_fn": wrapper.wrap_for_brax_training}
    module_name, attr = profile.env.split(":", 1)
    module = importlib.import_module(module_name)
    factory = getattr(module, attr)
    return factory(**profile.env_kwargs), {}


def network_factory(profile: Profile) -> Any:
    from brax.training.agents.ppo import networks as ppo_networks

    kwargs = dict(profile.network)
    if "activation" in kwargs:
        import jax

        kwargs["activation"] = getattr(jax.nn, kwargs["activation"])
    for key in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        if key in kwargs:
            kwargs[key] = tuple(int(v) for v in kwargs[key])
    return functools.partial(ppo_networks.make_ppo_networks, **kwargs)
