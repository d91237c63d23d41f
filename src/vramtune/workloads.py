"""Environment sources: what a profile's ``env`` names, and how a trial builds it.

Sources: ``brax:<name>`` (with the profile's backend), ``playground:<Name>`` (MuJoCo
Playground: its own ``brax_ppo_config(name)`` fills every PPO kwarg and network setting the
profile leaves out, its ``wrap_for_brax_training`` wraps the env), ``package.module:factory``
(the user's own env; the factory gets the profile's env_kwargs).

Two halves with different rules. The checks at the top are pure Python and run in the parent
at profile load time (the parent never imports JAX). ``build_environment`` / ``network_factory``
run in the trial child only. ``canonical_profile`` also imports JAX and runs in a short
``python -m vramtune.workloads`` subprocess (``starter_profile``) when ``init-profile`` needs
the source's canonical config.

Where Playground's config is merged: the parent must know batch_size, num_minibatches and
unroll_length before launch (Brax's batch rule decides which sizes may run), and it cannot
read Playground's config without importing JAX. So a playground profile states those three
itself (``init-profile`` writes them, with everything else, resolved from
``brax_ppo_config``); the child fills in only what the parent need not know.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vramtune.errors import UserError

if TYPE_CHECKING:
    from vramtune.profile import Profile

BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
PLAYGROUND_IMPLS = ("jax", "warp")
# The batch settings the parent needs before launch (Brax's batch rule, steps per update).
SHAPE_KEYS = ("batch_size", "num_minibatches", "unroll_length")
# ppo.train kwargs vramtune sets per trial; a profile's `ppo:` block may not set them.
MANAGED_PPO_KEYS = frozenset({"num_envs", "num_timesteps", "num_evals", "progress_fn",
                              "environment", "network_factory", "episode_length",
                              "action_repeat", "wrap_env_fn"})
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

    kind: str  # brax | playground | factory
    name: str  # env name, or "package.module:factory"

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
    module, sep, attr = text.partition(":")
    if sep and _IDENT.match(module) and _IDENT.match(attr) and "." not in attr:
        return Source("factory", text)
    raise UserError(f"env {env!r}: {forms}")


def source_kind(env: str) -> str:
    return parse_source(env).kind


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
                      ) -> tuple[Any, dict[str, Any]]:
    """(environment, extra ppo.train kwargs). ``extra`` never overrides the profile's ppo:
    it holds the wrapper and the source's defaults for keys the profile leaves out.
    ``report`` receives what was resolved (impl, defaults filled in, network), for the record.
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
        env, extra = _build_playground(profile, source, num_envs, info)
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
                      info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
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


def _build_factory(profile: Profile, source: Source) -> Any:
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


# --------------------------------------------------------------------------- init-profile

_PROFILE_ORDER = ("name", "description", "env", "backend", "impl", "env_kwargs",
                  "episode_length", "action_repeat", "num_envs", "start_envs", "max_envs",
                  "scaling", "ppo", "network", "timeout_s")


def _split_ppo(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(top-level profile keys, ppo block) from a ppo.train kwargs mapping."""
    top = {k: settings[k] for k in ("num_envs", "episode_length", "action_repeat") if k in settings}
    ppo = {k: v for k, v in settings.items() if k not in MANAGED_PPO_KEYS and k != "network_factory"}
    return top, ppo


def _defaults_of(factory: Callable[..., Any]) -> dict[str, Any]:
    """A factory's keyword defaults that YAML can hold: the starter env_kwargs."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return {}
    found = {}
    for p in params:
        if p.default is inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is None or isinstance(p.default, bool | int | float | str):
            found[p.name] = p.default
    return found


def _ordered_ppo(ppo: Mapping[str, Any]) -> dict[str, Any]:
    """Batch settings first (they decide what may run), the rest alphabetical."""
    first = {k: ppo[k] for k in SHAPE_KEYS if k in ppo}
    return {**first, **{k: ppo[k] for k in sorted(ppo) if k not in first}}


def canonical_profile(env: str, backend: str | None = None) -> tuple[dict[str, Any], str]:
    """(profile data, where its values came from) for a source's canonical config.
    Imports the source (and so JAX): run it in a subprocess, see ``starter_profile``."""
    source = parse_source(env)
    name = source.name
    data: dict[str, Any] = {"env": env}
    if source.kind == "playground":
        settings = _playground_ppo_config(name)
        from mujoco_playground import registry

        origin = (f"mujoco_playground.config.{_playground_suite(name)}_params"
                  f".brax_ppo_config({name!r})")
        default_impl = registry.get_default_config(name).get("impl", "jax")
        top, ppo = _split_ppo(settings)
        data["name"] = re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()
        data["description"] = (f"Playground {name}, Playground's own PPO config; impl jax on "
                               f"CPU, {default_impl} (Playground's default) on GPU")
        data.update({"episode_length": 1000, "action_repeat": 1, **top})
        data["ppo"] = ppo
        data["network"] = {**BRAX_NETWORK, **(settings.get("network_factory") or {})}
    elif source.kind == "brax":
        from brax import envs

        if name not in envs._envs:
            raise ValueError(f"unknown brax env {name!r}; available: {', '.join(sorted(envs._envs))}")
        published = name in BRAX_PPO
        settings = {**_BRAX_COMMON, **BRAX_PPO.get(name, BRAX_PPO[TEMPLATE_ENV])}
        origin = (f"Brax's published PPO settings for {name}" if published else
                  f"Brax's published PPO settings for {TEMPLATE_ENV} (none published for {name})")
        top, ppo = _split_ppo(settings)
        data["name"] = name.replace("_", "-")
        data["description"] = f"brax {name}, {backend or 'generalized'} backend"
        data["backend"] = backend or "generalized"
        data.update({"episode_length": 1000, "action_repeat": 1, **top})
        data["ppo"] = ppo
        data["network"] = dict(BRAX_NETWORK)
    else:
        module = importlib.import_module(source.module)
        factory = getattr(module, source.attr, None)
        if not callable(factory):
            raise ValueError(f"module {source.module!r} has no callable {source.attr!r}")
        origin = (f"a template: env_kwargs from {source.attr}()'s defaults, PPO settings from "
                  f"Brax's {TEMPLATE_ENV}; tune them for your env")
        top, ppo = _split_ppo({**_BRAX_COMMON, **BRAX_PPO[TEMPLATE_ENV]})
        data["name"] = source.attr.replace("_", "-")
        data["description"] = f"user environment {env}"
        data["env_kwargs"] = _defaults_of(factory)
        data.update({"episode_length": 1000, "action_repeat": 1, **top})
        data["ppo"] = ppo
        data["network"] = dict(BRAX_NETWORK)
    data["ppo"]["run_evals"] = False  # evals are not training: they would skew steps/s
    data["ppo"] = _ordered_ppo(data["ppo"])
    data["scaling"] = "hold-minibatch"
    data["start_envs"] = min(64, int(data.get("num_envs", 64)))
    data["max_envs"] = max(16384, int(data.get("num_envs", 0)))
    return {k: _jsonable(data[k]) for k in _PROFILE_ORDER if k in data}, origin


def render_profile_yaml(data: Mapping[str, Any], origin: str, versions: Mapping[str, str]) -> str:
    """The starter profile as commented YAML (block mappings, lists inline)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def flow_list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.Node:
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)

    Dumper.add_representer(list, flow_list)
    used = ", ".join(f"{k} {v}" for k, v in versions.items())
    header = [
        f"# Starter profile for {data['env']}, written by `vramtune init-profile`.",
        f"# Values from {origin}" + (f" ({used})." if used else "."),
        "# num_envs: the size these batch settings are tuned for; the sweep scales",
        "# batch_size / num_minibatches from it under `scaling` (hold-minibatch,",
        "# hold-num-minibatches, hold-env-steps). Every ppo: key is a brax ppo.train kwarg;",
        "# network: hidden layer sizes, activation (a jax.nn name), obs keys.",
        "# run_evals: false keeps evaluation rollouts out of the measured steps/s.",
    ]
    body = yaml.dump(dict(data), Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     width=1000)
    return "\n".join(header) + "\n" + body


_RESULT_PREFIX = "@@vramtune-canonical "


def starter_profile(env: str, backend: str | None = None,
                    timeout_s: float = 300) -> tuple[dict[str, Any], str]:
    """``canonical_profile`` in a short CPU-only subprocess, so the caller never imports JAX."""
    parse_source(env)
    command = [sys.executable, "-m", "vramtune.workloads", "canonical", env]
    if backend:
        command += ["--backend", backend]
    run_env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                              env=run_env)
    except subprocess.TimeoutExpired:
        raise UserError(f"reading the canonical config of {env} took over {timeout_s:g} s") from None
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_PREFIX):
            answer = json.loads(line[len(_RESULT_PREFIX):])
            if "error" in answer:
                raise UserError(f"cannot read the canonical config of {env}: {answer['error']}")
            return answer["profile"], answer["origin"]
    tail = [line for line in proc.stderr.splitlines() if line.strip()]
    raise UserError(f"cannot read the canonical config of {env}: "
                    f"{tail[-1] if tail else f'exit code {proc.returncode}'}")


def _main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "canonical":
        print("usage: python -m vramtune.workloads canonical SOURCE [--backend B]", file=sys.stderr)
        return 2
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else None
    try:
        data, origin = canonical_profile(argv[1], backend)
        answer: dict[str, Any] = {"profile": data, "origin": origin}
    except Exception as exc:  # noqa: BLE001 - reported to the parent as one line
        text = str(exc).strip().splitlines()
        message = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        answer = {"error": message[:2000]}
    sys.stdout.write(_RESULT_PREFIX + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
