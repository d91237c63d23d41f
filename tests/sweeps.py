"""A resolved sweep made as the product makes one: a request, resolved (defaults, checks)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vramtune.tune.request import SweepConfig, SweepRequest, resolve
from vramtune.workload.profile import Profile


def sweep_config(profile: Profile, budget_bytes: int | None, headroom_fraction: float,
                 start: int, max_envs: int, refine: int | None, **options: Any) -> SweepConfig:
    """``options``: SweepRequest's own (objective, confirm, search, ...)."""
    return resolve(SweepRequest(profile=profile, budget_bytes=budget_bytes,
                                headroom_fraction=headroom_fraction, start=start,
                                max_envs=max_envs, refine=refine, **options))


def with_settings(config: SweepConfig, **settings: Any) -> SweepConfig:
    """``config`` with some of its search settings replaced (``SweepSettings``' fields)."""
    return replace(config, settings=replace(config.settings, **settings))
