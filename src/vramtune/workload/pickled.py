"""An env factory defined in a notebook or a script, sent to the trial's process by value.

``vramtune.sweep({"name": ..., "env": make_env, ...})``: the callable is pickled once, in the
parent, with cloudpickle (by value, so the trial's process needs neither the notebook nor the
module it lives in), and travels in each trial's spec. The profile's ``env`` becomes
``pickled:<name>@<digest>``: the digest of the bytes is part of the profile's hash, so a
changed factory is a different workload, and a resumed run finds its factory in the run
directory (``env_factory.pkl``). A factory that cannot be pickled is one UserError here, before
anything is written.
"""

from __future__ import annotations

import hashlib
import re
import site
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from vramtune import paths
from vramtune.errors import UserError
from vramtune.workload.profile import Profile, profile_from_dict, safe_name
from vramtune.workload.sources import PICKLED, parse_source

FACTORY_FILE = "env_factory.pkl"
MAX_FACTORY_BYTES = 64 << 20  # travels in every trial's spec


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def factory_name(factory: Callable[..., Any]) -> str:
    """An identifier for the factory: its name (a lambda: 'lambda'), for the env string."""
    raw = getattr(factory, "__name__", None) or type(factory).__name__
    name = re.sub(r"[^A-Za-z0-9_]+", "_", str(raw)).strip("_")[:60]
    return name if name and not name[0].isdigit() else f"factory_{name}"


def _installed(module: ModuleType) -> bool:
    """A module that comes from the standard library or an installed package: the trial's
    process imports it by name, as the parent did (pickling it by value would copy a library)."""
    file = getattr(module, "__file__", None)
    if not file:
        return True  # built in
    roots = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    path = Path(file).resolve()
    return any(root and path.is_relative_to(Path(root).resolve()) for root in roots)


def pickle_factory(factory: Callable[..., Any]) -> bytes:
    """The factory's bytes, by value where it was defined by the user (a notebook, a script,
    a module of theirs); UserError when it cannot be sent."""
    name = factory_name(factory)
    try:
        import cloudpickle
    except ImportError:
        raise UserError(f"sending the env factory {name} to the trial's process needs "
                        f"cloudpickle: pip install cloudpickle") from None
    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    by_value = (module is not None and module.__name__ != "__main__" and not _installed(module)
                and module.__name__ not in cloudpickle.list_registry_pickle_by_value())
    try:
        if by_value:
            cloudpickle.register_pickle_by_value(module)
        data: bytes = cloudpickle.dumps(factory)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # what an object inside the closure raises is anyone's guess
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise UserError(f"the env factory {name} cannot be sent to the trial's process "
                        f"(cloudpickle: {type(exc).__name__}: {reason}); create objects such "
                        f"as locks, files or devices inside the factory, not around it") from None
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)
    if len(data) > MAX_FACTORY_BYTES:
        raise UserError(f"the env factory {name} pickles to {len(data) >> 20} MiB (at most "
                        f"{MAX_FACTORY_BYTES >> 20} MiB): load large data inside the factory")
    return data


def profile_from_user(data: Mapping[str, Any] | Callable[..., Any]) -> Profile:
    """A profile from a dict a notebook wrote, whose ``env`` may be a callable (the factory;
    ``name`` then defaults to its name); every other key as in a profile file. A bare
    callable is ``{"env": callable}``: the factory with the default settings."""
    if callable(data) and not isinstance(data, Mapping):
        data = {"env": data}
    if not isinstance(data, Mapping):
        raise UserError(f"a profile is a name, a file, a Profile or a dict, got "
                        f"{type(data).__name__}")
    items = dict(data)
    env = items.get("env")
    factory: bytes | None = None
    if callable(env):
        factory = pickle_factory(env)
        name = factory_name(env)
        items["env"] = f"{PICKLED}:{name}@{digest(factory)}"
        items.setdefault("name", safe_name(name))
    elif env is not None and not isinstance(env, str):
        raise UserError(f"profile <dict>: env must be brax:<name>, playground:<Name>, "
                        f"package.module:factory or a callable, got {type(env).__name__}")
    profile = profile_from_dict(items, source="<dict>")
    return replace(profile, factory=factory) if factory is not None else profile


def is_pickled(profile: Profile) -> bool:
    return parse_source(profile.env).kind == PICKLED


def require_factory(profile: Profile) -> Profile:
    """The profile, if a trial can build its env: one whose env was pickled from a notebook
    must carry the factory's bytes (a profile file naming one cannot)."""
    if is_pickled(profile) and profile.factory is None:
        raise UserError(f"env {profile.env} is a factory pickled from a notebook, and this "
                        f"profile does not carry it: pass the profile dict with the callable")
    return profile


def save_factory(run_dir: Path, profile: Profile) -> None:
    """Keep the factory beside the run's results, for --resume (the header keeps its digest)."""
    if profile.factory is None:
        return
    path = run_dir / FACTORY_FILE
    try:
        path.write_bytes(profile.factory)
    except OSError as exc:
        raise UserError(f"cannot write the env factory to {path}: {exc.strerror or exc}") from None


def with_saved_factory(profile: Profile, run_dir: Path, given: Profile | None = None) -> Profile:
    """A resumed run's profile with its factory: the one passed in again, else the run's file."""
    if not is_pickled(profile) or profile.factory is not None:
        return profile
    want = parse_source(profile.env).name.rpartition("@")[2]
    if given is not None and given.factory is not None and digest(given.factory) == want:
        return replace(profile, factory=given.factory)
    path = run_dir / FACTORY_FILE
    try:
        data = paths.read_bytes(path, what="env factory", max_bytes=MAX_FACTORY_BYTES)
    except UserError as exc:
        raise UserError(f"{run_dir} was swept with an env factory from a notebook, and its "
                        f"{FACTORY_FILE} cannot be read ({exc}): pass the profile dict with "
                        f"the same factory again") from None
    if digest(data) != want:
        raise UserError(f"{path} is not the env factory {run_dir} was measured with (digest "
                        f"{digest(data)}, the run's {want}); start a new sweep instead")
    return replace(profile, factory=data)
