"""vramtune: measure, don't guess, how many parallel envs fit and run fastest.

The Python API (``vramtune.sweep``, ``vramtune.trial``, ``vramtune.recommend``, ...) lives in
``vramtune.api`` and is re-exported here lazily: the trial child imports
``vramtune.measure.*`` before it sets its memory cap, and must not pay for the API's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see of the lazy names below: their signatures
    from vramtune.api import (
        SweepRequest,
        check,
        doctor,
        emit_config,
        explain,
        init_profile,
        load_runs,
        outcome,
        prepare_sweep,
        recommend,
        run_prepared,
        sweep,
        sweep_request,
        trial,
        verify,
    )

__version__ = "0.2.0.dev0"

__all__ = ["sweep", "sweep_request", "SweepRequest", "trial", "recommend", "prepare_sweep",
           "run_prepared", "outcome",
           "load_runs", "emit_config", "explain", "verify", "check", "doctor", "init_profile"]
_API = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name in _API:
        from vramtune import api

        return getattr(api, name)
    raise AttributeError(f"module 'vramtune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
