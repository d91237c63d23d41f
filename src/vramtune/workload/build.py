"""Child side: build the environment and the network factory a trial trains.

Runs in the trial child only (it imports JAX, brax and maybe Playground). Playground's
``brax_ppo_config(name)`` fills every PPO kwarg and network setting the profile leaves out,
and its ``wrap_for_brax_training`` wraps the env, exactly as Playground's own training script.

Where Playground's config is merged: the parent must know batch_size, num_minibatches and
unroll_length before launch (Brax's batch rule decides which sizes may run), and it cannot
read Playground's config without importing JAX. So a playground profile states those three
itself (``init-profile`` writes them resolved from ``brax_ppo_config``); the child fills in
only what the parent need not know.
"""

from __future__ import annotations

import functools
import importlib
import math
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vramtune.workload.sources import MANAGED_PPO_KEYS, Source, parse_source

if TYPE_CHECKING:
    from vramtune.workload.profile import Profile


# --------------------------------------------------------------------------- child side


def _playground_suite(name: str) -> str:
    """Which Playground suite holds this env (dm_control_suite, locomotion, manipulation)."""
    import mujoco_playground

    for suite in ("dm_control_suite", "locomotion", "manipulation"):
        if name in getattr(mujoco_playground, suite).ALL_ENVS:
            return suite
    raise ValueError(f"unknown Playground env {name!r}; available: "
                     f"{', '.join(mujoco_playground.registry.ALL_ENVS)}")


def _playground_ppo_config(name: str) -> dict[str, Any]:
    """Playground's canonical Brax PPO kwargs for this env, as a plain dict."""
    suite = _playground_suite(name)
    params = importlib.import_module(f"mujoco_playground.config.{suite}_params")
    return params.brax_ppo_config(name).to_dict()


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested env_kwargs -> the dotted keys Playground's config_overrides expects."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def scaled_naconmax(default: int, canonical_envs: int, num_envs: int) -> int:
    """Warp's contact buffer is sized for ALL worlds together: Playground sizes it for its
    canonical num_envs. Beyond that, keep the per-env capacity (or contacts overflow)."""
    if default <= 0 or canonical_envs <= 0 or num_envs <= canonical_envs:
        return default
    return math.ceil(default * num_envs / canonical_envs)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return getattr(value, "__name__", None) or type(value).__name__


def _network_kwargs(profile: Profile) -> dict[str, Any]:
    """Network settings: the source's own (Playground's network_factory) under the profile's."""
    kwargs: dict[str, Any] = {}
    source = parse_source(profile.env)
    if source.kind == "playground":
        kwargs.update(_playground_ppo_config(source.name).get("network_factory") or {})
    kwargs.update(profile.network)
    return kwargs


def build_environment(profile: Profile, num_envs: int | None = None,
                      report: Callable[[dict[str, Any]], None] | None = None,
                      capacities: Mapping[str, int] | None = None,
                      ) -> tuple[Any, dict[str, Any]]:
    """(environment, extra ppo.train kwargs). ``extra`` never overrides the profile's ppo:
    it holds the wrapper and the source's defaults for keys the profile leaves out.
    ``report`` receives what was resolved (impl, defaults filled in, network), for the record.
    ``capacities``: MJX-Warp's naconmax / njmax as the sweep sized them (Playground only;
    the profile's env_kwargs win).
    """
    source = parse_source(profile.env)
    info: dict[str, Any] = {"source": source.kind}
    extra: dict[str, Any] = {}
    if source.kind == "brax":
        from brax import envs

        kwargs = dict(profile.env_kwargs)
        if profile.backend:
            kwargs["backend"] = profile.backend
        if source.name not in envs._envs:  # brax has no public listing
            raise ValueError(f"unknown brax env {source.name!r}; available: "
                             f"{', '.join(sorted(envs._envs))}")
        env = envs.get_environment(source.name, **kwargs)
        info["backend"] = profile.backend or "brax default"
    elif source.kind == "playground":
        env, extra = _build_playground(profile, source, num_envs, info, capacities or {})
    else:
        env = _build_factory(profile, source)
        if _is_playground_env(env):
            from mujoco_playground import wrapper

            extra["wrap_env_fn"] = wrapper.wrap_for_brax_training
            info["wrapper"] = "mujoco_playground.wrapper.wrap_for_brax_training"
    info["network"] = _jsonable(_network_kwargs(profile))
    if report:
        report(info)
    return env, extra


def _build_playground(profile: Profile, source: Source, num_envs: int | None,
                      info: dict[str, Any], capacities: Mapping[str, int],
                      ) -> tuple[Any, dict[str, Any]]:
    import jax
    from mujoco_playground import registry, wrapper

    base = _playground_ppo_config(source.name)
    config = registry.get_default_config(source.name)
    config.lock()  # an env_kwargs key Playground does not have is an error, not a new key
    overrides = _flatten(profile.env_kwargs)
    impl = profile.impl or ("jax" if jax.default_backend() == "cpu" else None)
    if impl:  # unset on GPU: Playground's own default (Warp)
        overrides["impl"] = impl
    config.update_from_flattened_dict(overrides)
    effective_impl = str(config.get("impl", "jax"))
    info["impl"] = effective_impl + ("" if profile.impl else " (auto)")
    sized = {k: int(v) for k, v in capacities.items() if k not in overrides and k in config}
    if effective_impl == "warp" and sized:
        config.update_from_flattened_dict(sized)
        overrides.update(sized)
        info["capacities"] = {k: f"{v} (sized from measured demand)" for k, v in sized.items()}
    naconmax = config.get("naconmax")
    if (effective_impl == "warp" and isinstance(naconmax, int) and num_envs
            and "naconmax" not in overrides):
        scaled = scaled_naconmax(naconmax, int(base.get("num_envs", 0)), num_envs)
        if scaled != naconmax:
            config.naconmax = scaled
            info["naconmax"] = f"{naconmax} -> {scaled} (per-env contacts of "\
                               f"{base.get('num_envs')} envs kept)"
    try:
        env = registry.load(source.name, config=config)
    except subprocess.CalledProcessError as exc:
        from mujoco_playground._src import mjx_env

        exc.add_note(f"Playground fetches its robot assets on first use: git clone "
                     f"https://github.com/deepmind/mujoco_menagerie.git into "
                     f"{mjx_env.MENAGERIE_PATH} (commit {mjx_env.MENAGERIE_COMMIT_SHA}); "
                     f"it needs git and network access, or that clone put there by hand")
        raise
    defaults = {k: v for k, v in base.items() if k not in profile.ppo and k not in MANAGED_PPO_KEYS}
    extra: dict[str, Any] = dict(defaults)
    extra["wrap_env_fn"] = wrapper.wrap_for_brax_training
    info["playground_defaults"] = _jsonable(defaults)
    if profile.env_kwargs:
        info["config_overrides"] = _jsonable(_flatten(profile.env_kwargs))
    if profile.domain_randomization:
        randomizer = registry.get_domain_randomizer(source.name)
        if randomizer is None:
            raise ValueError(f"Playground has no domain randomizer for {source.name!r}; "
                             f"set domain_randomization: false")
        extra["randomization_fn"] = randomizer  # ppo.train binds one rng per env
        info["domain_randomization"] = True
    return env, extra


def _is_playground_env(env: Any) -> bool:
    module = sys.modules.get("mujoco_playground")
    return module is not None and isinstance(env, module.MjxEnv)


def _unpickled(profile: Profile, source: Source) -> Any:
    """A factory sent by value from the parent (workload/pickled.py)."""
    import hashlib
    import pickle

    data = profile.factory
    if data is None:
        raise ValueError(f"env {profile.env} is a pickled factory, but its bytes did not reach "
                         f"the trial")
    if hashlib.sha256(data).hexdigest()[:16] != source.name.rpartition("@")[2]:
        raise ValueError(f"the pickled factory's bytes do not match env {profile.env}")
    return pickle.loads(data)  # noqa: S301 - bytes the parent pickled from the user's callable


def _build_factory(profile: Profile, source: Source) -> Any:
    if source.kind == "pickled":
        factory = _unpickled(profile, source)
    else:
        module = importlib.import_module(source.module)
        factory = getattr(module, source.attr, None)
    if factory is None:
        raise AttributeError(f"module {source.module!r} has no attribute {source.attr!r} "
                             f"(env {profile.env!r})")
    if not callable(factory):
        raise TypeError(f"{profile.env} is a {type(factory).__name__}, not a callable factory")
    env = factory(**profile.env_kwargs)
    if env is None:
        raise TypeError(f"{profile.env} returned None instead of an environment")
    return env


def network_factory(profile: Profile) -> Any:
    from brax.training.agents.ppo import networks as ppo_networks

    kwargs = _network_kwargs(profile)
    if isinstance(kwargs.get("activation"), str):
        import jax

        name = kwargs["activation"]
        activation = getattr(jax.nn, name, None)
        if not callable(activation):
            raise ValueError(f"network.activation {name!r} is not a function in jax.nn")
        kwargs["activation"] = activation
    for key in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        if key in kwargs:
            kwargs[key] = tuple(int(v) for v in kwargs[key])
    return functools.partial(ppo_networks.make_ppo_networks, **kwargs)
