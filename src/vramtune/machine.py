"""Who measured what: versions, CPU, GPU. Read without importing JAX in the parent."""

from __future__ import annotations

import os
import platform
import socket
from functools import cache
from importlib import metadata, util
from pathlib import Path

_PACKAGES = {"jax": "jax", "jaxlib": "jaxlib", "brax": "brax", "mujoco": "mujoco",
             "mujoco_mjx": "mujoco-mjx", "playground": "playground", "vramtune": "vramtune"}


@cache
def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for key, dist in _PACKAGES.items():
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_summary() -> dict[str, str | int]:
    import os

    return {"hostname": socket.gethostname(), "cpu": cpu_model(),
            "cpu_count": os.cpu_count() or 0, "platform": platform.platform()}


def mem_fraction_var() -> str:
    """The memory-fraction variable the installed jaxlib reads (setting both is an error
    in some versions, so exactly one is set)."""
    spec = util.find_spec("jaxlib")
    if spec and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            source = Path(folder) / "xla_client.py"
            try:
                if "XLA_CLIENT_MEM_FRACTION" in source.read_text():
                    return "XLA_CLIENT_MEM_FRACTION"
            except OSError:
                continue
    return "XLA_PYTHON_CLIENT_MEM_FRACTION"


def has_cuda_jax() -> bool:
    """A CUDA plugin for jax is installed (the parent never imports it)."""
    return any(_safe_find(name) for name in ("jax_cuda12_plugin", "jax_cuda13_plugin",
                                             "jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13"))


def _safe_find(name: str) -> bool:
    try:
        return util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vramtune"
