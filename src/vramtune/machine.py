"""Who measured what: versions, CPU, GPU. Read without importing JAX in the parent."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
from functools import cache
from importlib import metadata, util
from pathlib import Path
from typing import Any

_PACKAGES = {"jax": "jax", "jaxlib": "jaxlib", "brax": "brax", "mujoco": "mujoco",
             "mujoco_mjx": "mujoco-mjx", "playground": "playground", "vramtune": "vramtune"}


_SOURCE_VERSION = re.compile(
    r"""^__version__(?:[ \t]*:[ \t]*str)?[ \t]*=[ \t]*['"]([^'"\n]{1,64})['"]""", re.MULTILINE)
_SOURCE_READ_BYTES = 64 * 1024  # a version line sits near the top; never read a file whole
# import names where they differ from the version's key (those keys are no import names)
_MODULES = {"mujoco_mjx": "mujoco.mjx", "playground": "mujoco_playground"}


@cache
def versions() -> dict[str, str]:
    """Installed versions, read from package metadata; a package imported from a source tree
    on PYTHONPATH (brax from git, say) has none, so its ``__version__`` line is read from the
    file instead (not imported: the parent never imports JAX), marked "(source)"."""
    found = {"python": platform.python_version()}
    for key, dist in _PACKAGES.items():
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            source = _source_version(_MODULES.get(key, key))
            if source is not None:
                found[key] = f"{source} (source)"
    return found


def _source_version(module: str) -> str | None:
    """``__version__`` as a top-level package's ``__init__.py`` states it (its first 64 KiB),
    or None. A dotted name is not looked up: finding it would import its parent."""
    if "." in module:
        return None
    try:
        spec = util.find_spec(module)  # a top-level name: located, not imported
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith("__init__.py"):
        return None
    path = Path(spec.origin)
    try:
        if not path.is_file():
            return None
        with path.open("rb") as f:
            head = f.read(_SOURCE_READ_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    match = _SOURCE_VERSION.search(head)
    return match.group(1) if match else None


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# x86 flags that name instruction-set extensions LLVM may compile for; the rest of the line
# (mitigations, hypervisor and kernel features) changes with a kernel update, not the code
_X86_ISA = re.compile(r"^(sse\w*|ssse3|avx\w*|amx\w*|fma\w*|f16c|bmi\d|popcnt|movbe|abm|"
                      r"lzcnt|adx|aes|vaes|pclmulqdq|vpclmulqdq|sha_ni|gfni|xop|tbm|"
                      r"cx16|mmx\w*|3dnow\w*|rdrand|rdseed|clflushopt|clwb|xsave\w*)$")


def cpu_features() -> str | None:
    """A short digest of the CPU's instruction-set extensions (x86: the ISA flags of
    /proc/cpuinfo's ``flags`` line; ARM: its ``Features`` line): XLA compiles for the host's
    features, so instruction counts compare only where this is the same. None where the
    kernel does not say."""
    import hashlib

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("flags", "features"):
                flags = value.split()
                if key == "flags":
                    flags = [f for f in flags if _X86_ISA.match(f)]
                digest = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:12]
                return f"{platform.machine()}-{digest}"
    except OSError:
        pass
    return None


def machine_summary() -> dict[str, str | int | None]:
    import os

    # cpu_count None where the OS does not say: unknown, not zero cores
    return {"hostname": socket.gethostname(), "cpu": cpu_model(),
            "cpu_count": os.cpu_count(), "platform": platform.platform()}


_OPTIONS_SCRIPT = ("import json; from jaxlib import xla_client\n"
                   "try:\n    print(json.dumps(xla_client.generate_pjrt_gpu_plugin_options()))\n"
                   "except Exception as exc:\n"
                   "    print(json.dumps({'error': f'{type(exc).__name__}: {exc}'}))")
FRACTION_VARS = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def gpu_plugin_options(env: dict[str, str]) -> dict[str, Any]:
    """What the CUDA plugin would be created with under ``env``: jaxlib's own
    ``xla_client.generate_pjrt_gpu_plugin_options()`` (called by jax_plugins/cuda
    ``initialize()``), run in a subprocess so the parent never imports jaxlib. Its ValueErrors
    (both fraction variables, an unknown allocator, a fraction that is not a number) come
    back as ``{"error": ...}``: the plugin would raise them and JAX would go on without CUDA.
    Needs no GPU and no CUDA plugin: the function is in every jaxlib."""
    proc = subprocess.run([sys.executable, "-c", _OPTIONS_SCRIPT], capture_output=True,
                          text=True, env=env, timeout=120)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"jaxlib's xla_client could not be asked: {tail}"}
    return json.loads(lines[-1])


@cache
def mem_fraction_var() -> str:
    """The memory-fraction variable the installed jaxlib reads, asked of jaxlib itself:
    XLA_CLIENT_MEM_FRACTION since openxla/xla PR #16457 (Aug 2024), the older
    XLA_PYTHON_CLIENT_MEM_FRACTION before. Exactly one is ever set (0.9.2 rejects both).
    Remembered per jaxlib version in the cache directory."""
    version = versions().get("jaxlib", "unknown")
    path = default_cache_dir() / "jaxlib-fraction-var.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if known.get(version) in FRACTION_VARS:
        return str(known[version])
    env = {k: v for k, v in os.environ.items() if k not in FRACTION_VARS}
    options = gpu_plugin_options({**env, "XLA_CLIENT_MEM_FRACTION": "0.123"})
    var = ("XLA_CLIENT_MEM_FRACTION" if options.get("memory_fraction") == 0.123
           else "XLA_PYTHON_CLIENT_MEM_FRACTION")
    if "error" not in options:
        known[version] = var
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(known, indent=1))
        except OSError:
            pass
    return var


def has_cuda_jax() -> bool:
    """A CUDA plugin for jax is installed (the parent never imports it)."""
    return any(_safe_find(name) for name in ("jax_cuda12_plugin", "jax_cuda13_plugin",
                                             "jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13"))


def _safe_find(name: str) -> bool:
    try:
        return util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def compile_cache_dir(cache: bool | None) -> str | None:
    """JAX's persistent compile cache folder, unless ``cache`` is False. None (the default)
    still compiles cold on CPU under a cap (``measure.trial``), where a hit lowers the peak."""
    return str(default_cache_dir() / "jax") if cache is not False else None


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vramtune"
