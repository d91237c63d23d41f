"""The memory model's prior on growth: XLA's compile-time footprint of the training epoch at
two sizes (``measure.footprint``), probed beside the sweep's first trial.

With it the predictive search aims after one measured size instead of two: the first trial
gives the intercept (everything XLA's count does not see), the footprint the bytes each env
adds. The probe's figures are saved in the run (``footprint.json``) so a resumed sweep plans
with the same prior, and are shown as what they are: a compile-time count, not a peak.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vramtune.errors import UserError
from vramtune.measure.footprint import Footprint, FootprintProbe, Triple, read_footprint
from vramtune.results.files import write_atomic
from vramtune.results.settings import SearchMethod
from vramtune.results.store import refuse_link
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchSpace, candidates
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile, profile_folder

FOOTPRINT_FILE = "footprint.json"
PRIOR_REL_SD = 0.15  # quick on CPU: trials' slope / footprint slope 0.97-0.99 (benchmarks/README)
REACH = (16, 8, 4)  # the probe's far size: the largest candidate up to 16 x the start, or, if
#                     that does not fit the cap in the probe, up to 8 x, then 4 x
WAIT_FLOOR_S = 15.0  # after the first round, wait this long for the probe, or the round's wall
UNSAVED = ("no footprint in ", "the compile-only probe took longer", "closed before")

Launch = Callable[..., FootprintProbe]


def probe_sizes(profile: Profile, space: SearchSpace, device_count: int) -> list[Triple] | None:
    """The start, then the far sizes largest first ((num_envs, batch_size, num_minibatches)):
    the lever the first extrapolation needs. None: nothing to probe (no budget, bisection,
    or no candidate above the start)."""
    if space.method is not SearchMethod.PREDICTIVE or space.limit_bytes is None:
        return None
    grid = candidates(space)
    start = next((n for n in grid if n >= space.start), None)
    if start is None:
        return None
    sizes = [start]
    for reach in REACH:
        far = max((n for n in grid if n <= reach * start), default=start)
        if far > sizes[-1] or (len(sizes) > 1 and start < far < sizes[-1]):
            sizes.append(far)
    if len(sizes) < 2:
        return None
    out = []
    for n in sizes:
        shape = profile.shape_for(n, device_count)
        if shape is None:
            return None
        out.append((n, shape.batch_size, shape.num_minibatches))
    return out


def slope_prior(footprint: Footprint | None) -> SlopePrior | None:
    slope = footprint.bytes_per_env() if footprint is not None else None
    return SlopePrior(slope, PRIOR_REL_SD) if slope is not None else None


def describe(footprint: Footprint) -> str:
    """One line for the user: what the prior is and where it came from."""
    if footprint.error is not None:
        return f"no memory prior: {footprint.error} (the search bootstraps from two trials)"
    slope = footprint.bytes_per_env()
    sizes = " and ".join(str(s.num_envs) for s in footprint.sizes)
    took = f", {footprint.wall_s:.1f} s" if footprint.wall_s is not None else ""
    if slope is None:
        return (f"no memory prior: XLA's compile-time count did not grow from {sizes} envs "
                f"(the search bootstraps from two trials)")
    return (f"memory prior: {format_bytes(int(slope))} per env, XLA's compile-time count of "
            f"the training epoch at {sizes} envs (compiled, not run{took}); a prior for the "
            f"model, not a measured peak")


@dataclass
class PriorSource:
    """Where the sweep's prior comes from: on resume the run's saved footprint of the same
    question, else a probe, started beside the first round (``beside``) or after it (a GPU:
    the probe would share the card with the trial). ``get`` never blocks before a trial of
    this session has finished, nor once the search has nothing left to aim."""

    run_dir: Path
    sizes: list[Triple] | None
    footprint: Footprint | None = None
    probe: FootprintProbe | None = None
    launch: Callable[[], FootprintProbe] | None = None  # deferred (after the first round)
    timeout_s: float = 300.0
    warning: str | None = None
    pending_note: str | None = None  # said at the first get: a saved footprint reused
    _waited_from: float | None = None

    @classmethod
    def start(cls, profile: Profile, space: SearchSpace, device_count: int, run_dir: Path,
              launch: Launch | None, timeout_s: float, *, resume: bool = False,
              beside: bool = True, backend: str = "cpu") -> PriorSource:
        """``launch(profile_dict, sizes, device_count, import_path, timeout_s, profile_hash)``
        starts a probe (the executor's), or is None where trials run elsewhere (Ray)."""
        sizes = probe_sizes(profile, space, device_count)
        source = cls(run_dir, sizes, timeout_s=timeout_s)
        if sizes is None:
            return source
        if resume:
            try:
                saved = read_footprint(run_dir / FOOTPRINT_FILE)
            except UserError as exc:
                saved, source.warning = None, f"{exc}: probing again"
            if saved is not None and saved.answers(profile.hash, sizes, backend, device_count):
                source.footprint = saved
                source.pending_note = f"{describe(saved)} (saved in {FOOTPRINT_FILE})"
                return source
        if launch is None:
            return source

        def go() -> FootprintProbe:
            return launch(profile.to_dict(), sizes, device_count, profile_folder(profile),
                          timeout_s, profile.hash)
        if beside:
            source.probe = go()
        else:
            source.launch = go
        return source

    def get(self, trials_done: bool, round_wall_s: float = 0.0, needed: bool = True
            ) -> tuple[SlopePrior | None, str | None]:
        """(the prior, a line to show when it has just arrived). Before a trial of this
        session finished: what is there, no waiting. After: a probe beside the first round is
        waited for at most max(WAIT_FLOOR_S, that round's wall), a deferred one is started
        and waited for up to its own limit; then the search goes on without it. ``needed``
        False (the search is over): nothing is waited for, a probe still running is closed."""
        note, self.pending_note = self.pending_note, None
        if not needed and (self.probe is not None or self.launch is not None):
            self.close()
            self.launch = None
        if trials_done and self.launch is not None:
            self.probe, self.launch = self.launch(), None
            self._waited_from = time.perf_counter()
            budget = self.timeout_s
        else:
            budget = max(WAIT_FLOOR_S, round_wall_s)
        if self.probe is not None and trials_done:
            if self._waited_from is None:
                self._waited_from = time.perf_counter()
            found = self.probe.result(budget - (time.perf_counter() - self._waited_from))
            if found is None:
                self.probe.close()
                found = Footprint(None, None, error=f"the compile-only probe took longer than "
                                                    f"{budget:.0f} s after the first trial")
            self.footprint, self.probe = found, None
            note = describe(found)
            if not (found.error or "").startswith(UNSAVED):  # a resume may try a slow one again
                try:
                    refuse_link(self.run_dir / FOOTPRINT_FILE)
                    write_atomic(self.run_dir / FOOTPRINT_FILE,
                                 json.dumps(found.to_dict(), indent=1) + "\n")
                except (OSError, UserError) as exc:
                    note += f" (not saved: {exc}; a resume probes again)"
        return slope_prior(self.footprint), note

    @property
    def waiting(self) -> bool:
        """A probe runs or is still to start: the search may be worth waiting for."""
        return self.probe is not None or self.launch is not None

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
            self.probe = None
