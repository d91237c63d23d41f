"""What a sweep from Python says while it runs: progress and warnings through ``logging``
(logger "vramtune", the lines the CLI prints), and the warning a notebook needs first: the
calling process already holds GPU memory the trials will compete with.

Nothing here imports jax: whether the caller did is read from ``sys.modules``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from vramtune import fmt
from vramtune.measure.wire import Event, SweepNote, TrialStarted
from vramtune.records import Purpose, TrialResult
from vramtune.units import format_bytes

log = logging.getLogger("vramtune")

_GPU_PLATFORMS = ("cuda", "rocm", "gpu")
_OFF = ("false", "0", "no", "off")


def caller_gpu_warning(modules: Mapping[str, Any] | None = None,
                       environ: Mapping[str, str] | None = None) -> str | None:
    """Why the trials may find the GPU already taken by this very process, with the fix; None
    when they will not: jax not imported, no GPU backend started, or preallocation off.

    jax starts a backend on first use and, by default, takes 75% of the GPU for itself then
    (XLA_PYTHON_CLIENT_PREALLOCATE): a notebook that ran one jax line holds it until its kernel
    restarts, and every trial then measures in what is left."""
    modules = sys.modules if modules is None else modules
    environ = os.environ if environ is None else environ
    if "jax" not in modules:
        return None
    bridge = modules.get("jax._src.xla_bridge")
    backends = getattr(bridge, "_backends", None)
    started = [name for name in (backends or {}) if str(name).lower() in _GPU_PLATFORMS]
    if not started:
        return None
    allocator = environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "").lower()
    if environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() in _OFF or allocator == "platform":
        return None
    fraction = environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") or "0.75"
    return (f"this process has started jax's {started[0]} backend with preallocation on: it "
            f"holds {fraction} of the GPU, and every trial measures in what is left. Fix: set "
            f"os.environ['XLA_PYTHON_CLIENT_PREALLOCATE'] = 'false' before jax is imported "
            f"(restart the kernel first), or run the sweep before any jax code")


def result_line(result: TrialResult) -> str:
    """A finished trial in a line, as the CLI's progress shows it."""
    purpose = "" if result.purpose is Purpose.SEARCH else f" [{result.purpose}]"
    error = ""
    if result.error_message:
        error = f": {(result.error_message.strip().splitlines() or [''])[-1][:200]}"
    return (f"num_envs={result.num_envs}{purpose}: {result.status}{error}, "
            f"{fmt.rate(result.steps_per_s)} steps/s, peak {format_bytes(result.peak_bytes)} "
            f"{result.memory_label}, {fmt.seconds(result.wall_s)}")


def logged_events(on_event: Callable[[Event], None] | None) -> Callable[[Event], None]:
    """The caller's event callback, with each trial's start and the sweep's notes logged."""

    def event(item: Event) -> None:
        if isinstance(item, TrialStarted):
            log.info("trial %d: num_envs=%d (%s)", item.index, item.num_envs, item.reason)
        elif isinstance(item, SweepNote):
            log.info("%s", item.text)
        if on_event is not None:
            on_event(item)

    return event
