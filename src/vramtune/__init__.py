"""vramtune: measure, don't guess, how many parallel envs fit and run fastest.

The Python API (``vramtune.sweep``, ``vramtune.trial``, ``vramtune.recommend``, ...) lives in
``vramtune.api`` and is re-exported here lazily: the trial child imports
``vramtune.measure.*`` before it sets its memory cap, and must not pay for the API's imports.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0.dev0"

_API = ("sweep", "sweep_request", "SweepRequest", "trial", "recommend", "prepare_sweep",
        "run_prepared", "outcome",
        "load_runs", "emit_config", "verify", "check", "doctor", "init_profile")


def __getattr__(name: str) -> Any:
    if name in _API:
        from vramtune import api

        return getattr(api, name)
    raise AttributeError(f"module 'vramtune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
