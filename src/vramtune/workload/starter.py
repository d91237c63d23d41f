"""``init-profile``: a starter profile filled from the source's canonical config.

``canonical_profile`` imports JAX, so the parent runs it in a short
``python -m vramtune.workload.starter`` subprocess (``starter_profile``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vramtune import machine, paths, yamlio
from vramtune.errors import UserError, quoted
from vramtune.workload.build import _jsonable, _playground_ppo_config, _playground_suite
from vramtune.workload.profile import NAME_PATTERN, NAME_RULE, Profile, load_profile, profile_from_dict
from vramtune.workload.sources import (
    _BRAX_COMMON,
    BRAX_BACKENDS,
    BRAX_NETWORK,
    BRAX_PPO,
    MANAGED_PPO_KEYS,
    SHAPE_KEYS,
    TEMPLATE_ENV,
    parse_source,
)

if TYPE_CHECKING:
    pass


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
    data["ppo"] = _ordered_ppo(data["ppo"])
    data["scaling"] = "hold-minibatch"
    data["start_envs"] = min(64, int(data.get("num_envs", 64)))
    data["max_envs"] = max(16384, int(data.get("num_envs", 0)))
    return {k: _jsonable(data[k]) for k in _PROFILE_ORDER if k in data}, origin


def render_profile_yaml(data: Mapping[str, Any], origin: str, versions: Mapping[str, str]) -> str:
    """The starter profile as commented YAML (block mappings, lists inline)."""

    used = ", ".join(f"{k} {v}" for k, v in versions.items())
    header = [
        f"# Starter profile for {data['env']}, written by `vramtune init-profile`.",
        f"# Values from {origin}" + (f" ({used})." if used else "."),
        "# num_envs: the size these batch settings are tuned for; the sweep scales",
        "# batch_size / num_minibatches from it under `scaling` (hold-minibatch,",
        "# hold-num-minibatches, hold-env-steps). Every ppo: key is a brax ppo.train kwarg;",
        "# network: hidden layer sizes, activation (a jax.nn name), obs keys.",
        "# Evaluation runs as in your training (brax: run_evals, num_eval_envs): its memory counts.",
    ]
    body = yamlio.dump(dict(data), width=1000)
    return "\n".join(header) + "\n" + body


_RESULT_PREFIX = "@@vramtune-canonical "


def starter_profile(env: str, backend: str | None = None, timeout_s: float = 300,
                    import_path: str | None = None) -> tuple[dict[str, Any], str]:
    """``canonical_profile`` in a short CPU-only subprocess, so the caller never imports JAX.
    A factory is imported from ``import_path`` (the profile's folder) and PYTHONPATH, never
    from the current directory (``python -P``), as the trial child will import it."""
    parse_source(env)
    command = [sys.executable, "-P", "-m", "vramtune.workload.starter", "canonical", env]
    if backend:
        command += ["--backend", backend]
    if import_path:
        command += ["--path", import_path]
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


def write_starter_profile(env: str, out: Path, *, force: bool, name: str | None,
                          backend: str | None, on_reading: Callable[[], None] | None = None
                          ) -> tuple[Profile, str]:
    """Write the starter profile for ``env`` to ``out`` and return it as loaded back, with
    where its settings came from. The choices and the file are checked before the source is
    imported; ``on_reading`` hears when that slow part begins."""
    source = parse_source(env)
    if backend is not None and source.kind != "brax":
        raise UserError("--backend applies to brax: sources only")
    if backend is not None and backend not in BRAX_BACKENDS:
        raise UserError(f"--backend {quoted(backend)} is not one of {', '.join(BRAX_BACKENDS)}")
    if name is not None and not NAME_PATTERN.fullmatch(name):
        raise UserError(f"--name {quoted(name)}: a profile name is {NAME_RULE}")
    if paths.is_dir(out):
        raise UserError(f"{out} is a directory")
    if paths.exists(out) and not force:
        raise UserError(f"{out} exists; pass --force to overwrite it")
    if not paths.is_dir(out.parent):
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    paths.check_writable_file(out, "-o")
    if on_reading is not None:
        on_reading()
    data, origin = starter_profile(env, backend, import_path=str(out.resolve().parent))
    if name:
        data["name"] = name
    profile_from_dict(data, source=str(out))  # never write a file that would not load
    packages = ("playground", "brax") if source.kind == "playground" else ("brax",)
    used = {k: v for k, v in machine.versions().items() if k in packages}
    paths.write_text(out, render_profile_yaml(data, origin, used), "profile")
    return load_profile(out), origin


def _main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "canonical":
        print("usage: python -m vramtune.workload.starter canonical SOURCE [--backend B]", file=sys.stderr)
        return 2
    backend = argv[argv.index("--backend") + 1] if "--backend" in argv else None
    if "--path" in argv:
        sys.path.append(argv[argv.index("--path") + 1])
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
