"""The first line of a config file vramtune emits, written and read back here only, and the
workload ``verify`` trains a config file with.

``emit-config`` writes the line; ``verify`` reads it to find the workload the file was tuned
for (the profile by name, held to the hash it had). One module keeps the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vramtune import yamlio
from vramtune.errors import UserError
from vramtune.workload.configfile import BatchConfig, load_config, normalise_key, settings_block
from vramtune.workload.profile import TYPED_PPO_KEYS, Profile, load_profile, profile_from_dict
from vramtune.workload.sources import MANAGED_PPO_KEYS

_HEADER = re.compile(r"^# vramtune emit-config \(([a-z]+)\): profile (\S+) \(([0-9a-f]{16})\)")
HEAD_LINES = 3  # the header is among the first lines (hydra's '# @package' comes before it)

WARP_CAPACITY_KEYS = ("naconmax", "njmax")  # MJX-Warp buffer sizes emit-config writes
MAX_CAPACITY = 10**9  # far above any card's contacts; bounds what a file can ask a trial for

# ppo.train kwargs a profile keeps at its top level; emitted files write them under ppo:
TOP_LEVEL_PPO_KEYS = ("episode_length", "action_repeat")


def header_line(format_name: str, profile_name: str, profile_hash: str, env: str) -> str:
    """The header, without its '# ': what format, which profile (and its hash), which env."""
    return f"vramtune emit-config ({format_name}): profile {profile_name} ({profile_hash}), env {env}"


def read_header(lines: Sequence[str]) -> tuple[str, str] | None:
    """(profile name, profile hash) from a file's first lines, or None if vramtune did not
    emit it."""
    match = next((m for m in map(_HEADER.match, lines[:HEAD_LINES]) if m), None)
    return None if match is None else (match.group(2), match.group(3))


def emitted_profile(path: Path) -> Profile:
    """The built-in profile an emitted file names, held to the hash it was emitted with."""
    found = read_header(yamlio.read_text(path, what="config").splitlines())
    if found is None:
        raise UserError(f"{path}: not a file vramtune emitted; name the workload it trains "
                        f"with --profile (a built-in name or a profile YAML)")
    name, digest = found
    profile = load_profile(name)
    if profile.hash != digest:
        raise UserError(f"{path} was emitted for profile {name} ({digest}), and the "
                        f"built-in {name} is now {profile.hash}; pass --profile FILE")
    return profile


def verification_profile(path: Path, profile: str | Path | Profile | None
                         ) -> tuple[Profile, str]:
    """The workload to verify the config file at ``path`` with, and where each part came from.

    The batch settings (num_envs, batch_size, num_minibatches, unroll_length) come from the
    file, found wherever ``check`` finds them. The workload (env, network, other PPO kwargs)
    comes from ``profile``, or for a file vramtune emitted, from the profile named in its
    first line (a built-in one with the same hash). Over it go the file's own training
    settings, because the file is the training config: an emitted file's ppo: and network:
    blocks; in a user's own file, the ppo.train kwargs vramtune knows (run_evals,
    learning_rate, ...) found beside its num_envs.
    """
    batch = load_config(path)  # validates the file; a UserError names what is wrong
    origin = "--profile"
    overlay: dict[str, Any] = {}
    network: dict[str, Any] = {}
    # MJX-Warp's buffer sizes, where emit-config writes them, whoever names the workload
    capacities = _capacities(path, _one_document(path))
    if profile is None:
        profile = emitted_profile(path)
        origin = f"profile {profile.name} named in the file"
        overlay, network = _emitted_blocks(path, batch)
    else:  # a user's file: its keys may be spelt NUM_ENVS or numEnvs, as `check` reads them
        overlay = {normalise_key(k): v for k, v in settings_block(path, batch).items()}
    base = profile if isinstance(profile, Profile) else load_profile(profile)
    # Only what ppo.train takes: the kwargs vramtune types, the profile's own, and the two a
    # profile keeps at its top level. Anything else beside num_envs (env_name, a damaged
    # `ppo: 5`) is not a training kwarg and would reach ppo.train as one.
    known = TYPED_PPO_KEYS | set(base.ppo) | set(TOP_LEVEL_PPO_KEYS)
    overlay = {k: v for k, v in overlay.items() if k in known}
    data = base.to_dict()
    ppo = {**data["ppo"], **{k: v for k, v in overlay.items()
                             if k not in MANAGED_PPO_KEYS and k not in TOP_LEVEL_PPO_KEYS}}
    ppo.update(batch_size=batch.batch_size.value, num_minibatches=batch.num_minibatches.value,
               unroll_length=batch.unroll_length.value)
    data.update(num_envs=batch.num_envs.value, ppo=ppo)
    for key in TOP_LEVEL_PPO_KEYS:  # emitted files carry these inside ppo:
        if key in overlay:
            data[key] = overlay[key]
    if network:
        data["network"] = {**data.get("network", {}), **network}
    if capacities:
        data["env_kwargs"] = {**data.get("env_kwargs", {}), **capacities}
    data["name"] = f"{base.name}-verify"
    taken = sorted([*(k for k in overlay if k not in ("batch_size", "num_minibatches",
                                                      "unroll_length")), *capacities])
    if taken:
        origin += f"; from the file: {', '.join(taken)}"
    return profile_from_dict(data, source=str(path)), origin


def _emitted_blocks(path: Path, batch: BatchConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """An emitted file's PPO settings (the block holding its num_envs: ppo:, playground's
    ppo_params:, or hydra's prefix) and its network: mapping; a network: that is not a
    mapping is a damaged file, said in one line."""
    ppo = {k: v for k, v in settings_block(path, batch).items()
           if k not in ("network_factory", "num_envs")}
    data = yamlio.loads(yamlio.read_text(path, what="config"), str(path))
    network = data.get("network") if isinstance(data, dict) else None
    if network is not None and not isinstance(network, dict):
        raise UserError(f"{path}: network: must be a mapping of settings, got "
                        f"{type(network).__name__} {str(network)[:40]!r}")
    return ppo, dict(network or {})


def _one_document(path: Path) -> Any:
    """The file as one YAML document; None for a multi-document config (``load_config`` has
    read and checked it already; emit-config writes one document)."""
    try:
        return yamlio.loads(yamlio.read_text(path, what="config"), str(path))
    except UserError:
        return None


def _capacities(path: Path, data: Any) -> dict[str, int]:
    """naconmax / njmax where ``emit-config`` writes them (brax: environment.env_kwargs,
    playground: env_config_overrides, hydra: env_config), each a whole number or a damaged
    file said in one line."""
    if not isinstance(data, dict):
        return {}
    environment = data.get("environment")
    blocks = [environment.get("env_kwargs") if isinstance(environment, dict) else None,
              data.get("env_config_overrides"), data.get("env_config")]
    found: dict[str, int] = {}
    for block in blocks:
        if not isinstance(block, dict):
            continue
        for key in WARP_CAPACITY_KEYS:
            if key in block:
                value = block[key]
                if isinstance(value, bool) or not isinstance(value, int) or \
                        not 0 <= value <= MAX_CAPACITY:
                    raise UserError(f"{path}: {key} must be a whole number from 0 to "
                                    f"{MAX_CAPACITY:,}, got {str(value)[:40]!r}")
                found[key] = value
    return found
