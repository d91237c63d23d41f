"""How a sweep searches, resolved: the one typed record of a sweep's search settings.

``tune.request.resolve`` makes it from a request (and, on resume, the run's own); the run
header stores it as it is (``to_dict``) and reads it back checked (``from_dict``). A field
that a header does not hold takes the default below, which is what a run written before that
field was recorded ran with (bisection, the compile cache on, confirmation on, one device,
the local executor); a fresh sweep's defaults are set by ``resolve``, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vramtune.records import MAX_PARALLEL, Objective
from vramtune.schema import MAX_NUM_ENVS, Fields


class SearchMethod(StrEnum):
    PREDICTIVE = "predictive"  # a memory model aims the search
    BISECT = "bisect"  # doubling, then bisection: nothing measured is used to aim


class CacheMode(StrEnum):
    """The compile cache: ``auto`` uses it except on a CPU under a cap (where a cache hit
    lowers the peak a cold compile proves), ``on`` everywhere, ``off`` nowhere."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"

    @property
    def asked(self) -> bool | None:
        """The ``--cache`` / ``--no-cache`` flag this mode is (None: neither)."""
        return {CacheMode.AUTO: None, CacheMode.ON: True, CacheMode.OFF: False}[self]

    @classmethod
    def of(cls, flag: bool | None) -> CacheMode:
        return cls.AUTO if flag is None else cls.ON if flag else cls.OFF


class ExecutorKind(StrEnum):
    LOCAL = "local"
    RAY = "ray"


@dataclass(frozen=True)
class SweepSettings:
    """A sweep's search, as the run header records it. None where a header did not record
    the figure (then a resume takes the request's, else the profile's or the default)."""

    start: int | None = None
    max_envs: int | None = None
    refine: int | None = None  # None: the predictive search runs until the edge is bracketed
    objective: Objective | None = None
    confirm: bool = True  # train the chosen size much longer before recommending it
    confirm_steps: int | None = None  # None: sized from the trial's own settling
    devices: int = 1
    search: SearchMethod = SearchMethod.BISECT
    parallel: int | str = 1  # trials at once as run; 'auto' only before the executor plans it
    executor: ExecutorKind = ExecutorKind.LOCAL
    cache: CacheMode = CacheMode.ON
    speed_margin: float | None = None  # steps/s closer than this fraction: the same speed
    ray_address: str | None = None
    gpu_type: str | None = None  # Ray's accelerator type the trials ran on
    parallel_asked: int | str | None = None  # what was asked, where the executor planned another

    def to_dict(self) -> dict[str, Any]:
        """The header's ``search`` section: Ray's address and type only for a Ray sweep, what
        was asked only where it differs from what ran."""
        data: dict[str, Any] = {
            "start": self.start, "max_envs": self.max_envs, "refine": self.refine,
            "objective": None if self.objective is None else str(self.objective),
            "confirm": self.confirm, "confirm_steps": self.confirm_steps,
            "devices": self.devices, "search": str(self.search), "parallel": self.parallel,
            "executor": str(self.executor), "cache": str(self.cache),
            "speed_margin": self.speed_margin}
        if self.executor is ExecutorKind.RAY:
            data.update(ray_address=self.ray_address, gpu_type=self.gpu_type)
        if self.parallel_asked is not None:
            data["parallel_asked"] = self.parallel_asked
        return data

    @classmethod
    def from_dict(cls, data: Any, where: str = "header") -> SweepSettings:
        """A header's ``search`` section, every value checked (a damaged one is the header's
        one-line error, not a flag the user never typed). A key set to null is a key the
        header does not hold; keys this version does not know are ignored."""
        given = Fields({"search": data}, where).mapping("search", {}, none_is_empty=True)
        f = Fields({k: v for k, v in given.items() if v is not None}, where, "search.")

        def parallel(key: str) -> int | str | None:
            value = f.raw(key, None)
            if value is None or value == "auto":
                return value
            return f.int(key, lo=1, hi=MAX_PARALLEL)

        margin = f.number("speed_margin", None, lo=0, none=True)
        if margin is not None and margin >= 1:
            f.fail("speed_margin", "a fraction from 0 to below 1", margin)
        objective = f.choice("objective", [o.value for o in Objective], None, none=True)
        return cls(
            start=f.int("start", None, lo=1, hi=MAX_NUM_ENVS, none=True),
            max_envs=f.int("max_envs", None, lo=1, hi=MAX_NUM_ENVS, none=True),
            refine=f.int("refine", None, lo=0, hi=1000, none=True),
            objective=None if objective is None else Objective(objective),
            confirm=f.flag("confirm", True),
            confirm_steps=f.int("confirm_steps", None, lo=1, hi=10_000_000, none=True),
            devices=f.int("devices", 1, lo=1, hi=1 << 20),
            search=SearchMethod(f.choice("search", [m.value for m in SearchMethod],
                                         SearchMethod.BISECT.value)),
            parallel=parallel("parallel") or 1,
            executor=ExecutorKind(f.choice("executor", [e.value for e in ExecutorKind],
                                           ExecutorKind.LOCAL.value)),
            cache=CacheMode(f.choice("cache", [c.value for c in CacheMode], CacheMode.ON.value)),
            speed_margin=margin,
            ray_address=f.text("ray_address", None, none=True, max_len=1000, line=True),
            gpu_type=f.text("gpu_type", None, none=True, max_len=200, line=True),
            parallel_asked=parallel("parallel_asked"))
