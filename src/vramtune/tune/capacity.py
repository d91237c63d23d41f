"""MJX-Warp's buffer capacities for the emitted config, from the demand a trial measured.

Warp allocates ``naconmax`` contacts (all worlds together, so it scales with num_envs) and
``njmax`` constraint rows per world up front; too small and contacts or rows are dropped
(the step flags an overflow), too large and the buffers hold memory num_envs could use. A
Warp trial's probe records the most contacts (all worlds) and rows (the fullest world) any
of its steps asked for (``measure/contacts.py``). The emitted capacity is the chosen size's demand
times ``CAPACITY_MARGIN``, rounded up, and never more than its trial ran with (the file asks
for no memory the trial did not hold): the probe steps random actions for one episode or
``contact_steps``, and a trained policy can hold more contacts at once than random actions
do (a ball resting in the cup, more feet on the ground), so the capacity keeps half again
what was seen. Not more: capacity beyond demand is memory num_envs could use, and a config
whose capacities are halved must overflow where the demand recurs (an over-generous margin
would hide a capacity set too low). The sweep sizes each trial's capacities from the demand per
env its earlier trials measured, x the margin, so a size is measured with buffers at or
above those its emitted config will have (the first trial, with nothing measured yet, runs
with the workload's own). A capacity the user set in
``env_kwargs`` is kept as it is (its overflow is a trial's ``overflow`` status); one whose
probe saw no demand keeps what the trial ran with (a zero would switch contacts off).

On a GPU each Warp step's temporaries come from Warp's own CUDA pool, outside XLA's pool and
its fraction (docs/measuring.md). The sweep leaves room for it under the budget
(``warp_pool_room``): the high-water mark of the nearest size measured at or below, scaled
up with num_envs (never down: the pool has parts no env count shrinks), times the margin, so that XLA's pool
plus Warp's stays within the budget and a size too large for both runs out of memory in its
trial rather than past the budget. The NVML process figure, which counts both, still judges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vramtune.records import Status, TrialResult
from vramtune.schema import MAX_BYTES
from vramtune.workload.emitted import MAX_CAPACITY

CAPACITY_MARGIN = 1.5
# capacity: (the record's demand field, what it counts, over which worlds)
_DEMAND = {"naconmax": ("warp_contacts_max", "contacts", "for all worlds"),
           "njmax": ("warp_constraint_rows_per_world_max", "constraint rows", "in the fullest world")}


@dataclass(frozen=True)
class Capacity:
    """One Warp capacity for the emitted config, and where its value came from."""

    key: str  # naconmax | njmax
    value: int
    demand: int | None  # the most the probe's steps asked for; None: not measured
    ran_with: int | None  # the capacity the trial ran with
    user_set: bool

    @property
    def words(self) -> str:
        _, noun, where = _DEMAND[self.key]
        what = f"{noun} {where}"
        if self.user_set:
            return f"{self.key} {self.value:,}: yours, kept ({self.demand:,} {what} seen)" \
                if self.demand is not None else f"{self.key} {self.value:,}: yours, kept"
        if self.demand is None or self.demand <= 0:
            return (f"{self.key} {self.value:,}: the trial's, kept (no {noun} seen by the "
                    f"probe, so there is no demand to size it from)")
        margin = math.ceil(self.demand * CAPACITY_MARGIN)
        if self.value == margin:
            return (f"{self.key} {self.value:,}: {self.demand:,} {what} seen x "
                    f"{CAPACITY_MARGIN:g} margin; the trial ran with {self.ran_with:,}")
        return (f"{self.key} {self.value:,}: what the trial ran with, above the {self.demand:,} "
                f"{what} seen (x {CAPACITY_MARGIN:g} would be {margin:,}, more than measured)")


def _plausible(value: int | None) -> bool:
    """A count a Warp trial can have recorded (a damaged results file may say anything)."""
    return value is not None and 0 <= value <= MAX_CAPACITY


def warp_capacities(chosen: TrialResult, env_kwargs: dict[str, object]) -> tuple[Capacity, ...]:
    """naconmax and njmax for the chosen size; () when its trial did not step Warp, or
    overflowed. Each is the demand its trial saw x the margin, never more than the trial ran
    with: the file asks for no memory the trial did not hold."""
    ran = {"naconmax": chosen.warp_naconmax, "njmax": chosen.warp_njmax}
    if not all(_plausible(v) for v in ran.values()) or chosen.warp_overflow:
        return ()
    capacities = []
    for key, (field, _, _) in _DEMAND.items():
        demand = getattr(chosen, field)
        demand = demand if _plausible(demand) else None
        ran_with = int(ran[key])  # type: ignore[arg-type]  # checked above
        user = env_kwargs.get(key)
        if isinstance(user, int) and not isinstance(user, bool):
            capacities.append(Capacity(key, user, demand, ran_with, user_set=True))
        elif not demand:  # nothing seen (or a damaged record)
            capacities.append(Capacity(key, ran_with, demand, ran_with, user_set=False))
        else:
            value = min(ran_with, math.ceil(demand * CAPACITY_MARGIN))
            capacities.append(Capacity(key, value, demand, ran_with, user_set=False))
    return tuple(capacities)


def sweep_capacities(results: Sequence[TrialResult], num_envs: int,
                     env_kwargs: dict[str, object]) -> tuple[tuple[str, int], ...]:
    """The capacities a trial of ``num_envs`` runs with, from the demand earlier trials
    measured: contacts per env (all worlds scale with num_envs) and rows in the fullest world,
    each the most any trial saw, times the margin. () before any Warp trial; a capacity the
    user set, or one no trial saw demand for, is left to the workload (Playground's default
    scaled with num_envs, ``workload/build.py``). A trial that overflowed is left out: with
    contacts or rows dropped its bodies sink and ask for more (74 rows where 9 were enough,
    benchmarks/README.md), so its counts are not the workload's demand."""
    seen = [r for r in results if _plausible(r.warp_contacts_max) and r.num_envs > 0
            and r.status is not Status.OVERFLOW and not r.warp_overflow]
    if not seen:
        return ()
    per_env = max(r.warp_contacts_max / r.num_envs for r in seen)  # type: ignore[operator]
    rows = max((r.warp_constraint_rows_per_world_max or 0 for r in seen
                if _plausible(r.warp_constraint_rows_per_world_max)), default=0)
    sized = []
    if "naconmax" not in env_kwargs and per_env > 0:
        sized.append(("naconmax", min(MAX_CAPACITY, math.ceil(per_env * num_envs * CAPACITY_MARGIN))))
    if "njmax" not in env_kwargs and rows > 0:
        sized.append(("njmax", min(MAX_CAPACITY, math.ceil(rows * CAPACITY_MARGIN))))
    return tuple(sized)


def warp_pool_room(results: Sequence[TrialResult], num_envs: int) -> int | None:
    """The bytes a GPU trial of ``num_envs`` leaves outside XLA's pool for Warp's own pool,
    from the nearest size measured: the largest measured at or below num_envs, its high-water
    mark scaled by num_envs over that size (the step's temporaries scale with naconmax and
    nworld, both with num_envs), else the smallest measured above it, not scaled down (the
    pool keeps parts no size shrinks); times the margin. A size further away is not scaled
    from: the pool's fixed part would be multiplied with its per-env part. None before any
    GPU Warp trial measured its pool (the first runs without room; its NVML figure, which
    counts the pool, judges it)."""
    seen = [r for r in results if r.num_envs > 0 and isinstance(r.warp_mempool_high_bytes, int)
            and 0 < r.warp_mempool_high_bytes <= MAX_BYTES]
    if not seen or num_envs <= 0:
        return None
    below = [r.num_envs for r in seen if r.num_envs <= num_envs]
    size = max(below) if below else min(r.num_envs for r in seen)
    high = max(r.warp_mempool_high_bytes for r in seen if r.num_envs == size)  # type: ignore[type-var]
    return math.ceil(high * max(1.0, num_envs / size) * CAPACITY_MARGIN)
