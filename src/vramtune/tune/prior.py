"""The memory model's prior on growth: XLA's compile-time footprint of the training epoch at
two sizes (``measure.footprint``), probed beside the sweep's first trial (issue 13).

With it the predictive search aims after one measured size instead of two: the first trial
gives the intercept (everything XLA's count does not see), the footprint the bytes each env
adds. The probe's figures are saved in the run (``footprint.json``) so a resumed sweep plans
with the same prior, and are shown as what they are: a compile-time count, not a peak.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from vramtune.errors import UserError
from vramtune.measure.footprint import Footprint, FootprintProbe, read_footprint
from vramtune.results.files import write_atomic
from vramtune.tune.model import SlopePrior
from vramtune.tune.planner import SearchMethod, SearchSpace, candidates
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile, profile_folder

FOOTPRINT_FILE = "footprint.json"
PRIOR_REL_SD = 0.15  # quick on CPU: trials' slope / footprint slope 0.97-0.99 (benchmarks/README)
REACH = 16  # the probe's second size: the largest candidate up to 16 x the start
WAIT_FLOOR_S = 15.0  # after the first round, wait this long for the probe, or the round's wall


def probe_sizes(profile: Profile, space: SearchSpace, device_count: int
                ) -> list[tuple[int, int, int]] | None:
    """(num_envs, batch_size, num_minibatches) for the start and the largest candidate up to
    REACH x the start: the lever the first extrapolation needs. None: nothing to probe."""
    if space.method is not SearchMethod.PREDICTIVE or space.limit_bytes is None:
        return None
    grid = candidates(space)
    start = next((n for n in grid if n >= space.start), None)
    if start is None:
        return None
    far = max((n for n in grid if n <= REACH * start), default=start)
    if far <= start:
        return None
    out = []
    for n in (start, far):
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
    """Where the sweep's prior comes from: the run's saved footprint, or a probe started now
    beside the first round. ``get`` never blocks before a trial has finished."""

    run_dir: Path
    sizes: list[tuple[int, int, int]] | None
    probe: FootprintProbe | None = None
    footprint: Footprint | None = None
    warning: str | None = None
    _waited_from: float | None = None

    @classmethod
    def start(cls, profile: Profile, space: SearchSpace, device_count: int, run_dir: Path,
              launch, timeout_s: float) -> PriorSource:
        """``launch(profile_dict, sizes, device_count, import_path, timeout_s)`` starts a
        probe (the executor's), or is None where trials run elsewhere (Ray)."""
        sizes = probe_sizes(profile, space, device_count)
        source = cls(run_dir, sizes)
        if sizes is None:
            return source
        try:
            saved = read_footprint(run_dir / FOOTPRINT_FILE)
        except UserError as exc:
            saved, source.warning = None, f"{exc}: probing again"
        if saved is not None and [s.num_envs for s in saved.sizes] == [n for n, _, _ in sizes]:
            source.footprint = saved
        elif saved is not None and saved.error is not None:
            source.footprint = saved  # it failed once: a resume does not try again
        elif launch is not None:
            source.probe = launch(profile.to_dict(), sizes, device_count,
                                  profile_folder(profile), timeout_s)
        return source

    def get(self, trials_done: bool, round_wall_s: float = 0.0) -> tuple[SlopePrior | None,
                                                                          str | None]:
        """(the prior, a line to show when it has just arrived). Before any trial finished:
        what is there, no waiting. After: wait for the probe at most max(WAIT_FLOOR_S, the
        last round's wall) in all, then go on without it."""
        note = None
        if self.probe is not None and trials_done:
            if self._waited_from is None:
                self._waited_from = time.perf_counter()
            budget = max(WAIT_FLOOR_S, round_wall_s)
            found = self.probe.result(budget - (time.perf_counter() - self._waited_from))
            if found is None:
                self.probe.close()
                found = Footprint(None, 1, error=f"the compile-only probe took longer than "
                                                 f"{budget:.0f} s after the first trial")
            self.footprint, self.probe = found, None
            try:
                write_atomic(self.run_dir / FOOTPRINT_FILE, _json(found))
            except OSError:
                pass  # a resume probes again; the sweep itself needs no file
            note = describe(found)
        return slope_prior(self.footprint), note

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
            self.probe = None


def _json(footprint: Footprint) -> str:
    import json

    return json.dumps(footprint.to_dict(), indent=1) + "\n"
