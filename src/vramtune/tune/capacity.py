"""MJX-Warp's buffer capacities for the emitted config, from the demand a trial measured.

Warp allocates ``naconmax`` contacts (all worlds together, so it scales with num_envs) and
``njmax`` constraint rows per world up front; too small and contacts or rows are dropped
(the step flags an overflow), too large and the buffers hold memory num_envs could use. A
Warp trial's probe records the most contacts (all worlds) and rows (the fullest world) any
of its steps asked for (``measure/contacts.py``). The emitted capacity is that demand times
``CAPACITY_MARGIN``, rounded up: the probe steps random actions for one episode or
``contact_steps``, and a trained policy can hold more contacts at once than random actions
do (a ball resting in the cup, more feet on the ground), so the capacity keeps half again
what was seen. Not more: capacity beyond demand is memory num_envs could use, and a config
whose capacities are halved must overflow where the demand recurs (an over-generous margin
would hide a capacity set too low). The sweep sizes each trial's capacities the same way from
the demand per env its earlier trials measured, so a size is measured with the buffers the
emitted config will have. A capacity the user set in
``env_kwargs`` is kept as it is (its overflow is a trial's ``overflow`` status); one whose
probe saw no demand keeps what the trial ran with (a zero would switch contacts off).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vramtune.records import TrialResult

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
        line = (f"{self.key} {self.value:,}: {self.demand:,} {what} seen x {CAPACITY_MARGIN:g} "
                f"margin; the trial ran with {self.ran_with:,}")
        if self.ran_with is not None and self.value > self.ran_with:
            line += " (more than measured: the memory figures do not include the difference)"
        return line


def warp_capacities(chosen: TrialResult, env_kwargs: dict[str, object]) -> tuple[Capacity, ...]:
    """naconmax and njmax for the chosen size; () when its trial did not step Warp."""
    ran = {"naconmax": chosen.warp_naconmax, "njmax": chosen.warp_njmax}
    if ran["naconmax"] is None or ran["njmax"] is None:
        return ()
    capacities = []
    for key, (field, _, _) in _DEMAND.items():
        demand = getattr(chosen, field)
        user = env_kwargs.get(key)
        if isinstance(user, int) and not isinstance(user, bool):
            capacities.append(Capacity(key, user, demand, ran[key], user_set=True))
        elif demand is None or demand <= 0:  # nothing seen (or a damaged record)
            capacities.append(Capacity(key, int(ran[key]), demand, ran[key], user_set=False))
        else:
            capacities.append(Capacity(key, math.ceil(demand * CAPACITY_MARGIN), demand,
                                       ran[key], user_set=False))
    return tuple(capacities)


def sweep_capacities(results: Sequence[TrialResult], num_envs: int,
                     env_kwargs: dict[str, object]) -> tuple[tuple[str, int], ...]:
    """The capacities a trial of ``num_envs`` runs with, from the demand earlier trials
    measured: contacts per env (all worlds scale with num_envs) and rows in the fullest world,
    each the most any trial saw, times the margin. () before any Warp trial; a capacity the
    user set, or one no trial saw demand for, is left to the workload (Playground's default
    scaled with num_envs, ``workload/build.py``)."""
    seen = [r for r in results if r.warp_contacts_max is not None and r.num_envs > 0]
    if not seen:
        return ()
    per_env = max(r.warp_contacts_max / r.num_envs for r in seen)
    rows = max(r.warp_constraint_rows_per_world_max or 0 for r in seen)
    sized = []
    if "naconmax" not in env_kwargs and per_env > 0:
        sized.append(("naconmax", math.ceil(per_env * num_envs * CAPACITY_MARGIN)))
    if "njmax" not in env_kwargs and rows > 0:
        sized.append(("njmax", math.ceil(rows * CAPACITY_MARGIN)))
    return tuple(sized)
