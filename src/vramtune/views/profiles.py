"""The built-in profiles as `vramtune profiles` lists them."""

from __future__ import annotations

from vramtune.workload.profile import Profile
from vramtune.workload.sources import parse_source


def physics(profile: Profile) -> str:
    """The profile's physics in a few words: brax's backend, playground's impl, or neither."""
    kind = parse_source(profile.env).kind
    if kind == "brax":
        return f"backend {profile.backend or 'default'}"
    if kind == "playground":
        return f"impl {profile.impl or 'auto'}"
    return "user factory"
