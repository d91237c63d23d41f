"""The first line of a config file vramtune emits, written and read back here only.

``emit-config`` writes it; ``verify`` reads it to find the workload the file was tuned for
(the profile by name, held to the hash it had). One module keeps the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from vramtune import yamlio
from vramtune.errors import UserError
from vramtune.workload.profile import Profile, load_profile

_HEADER = re.compile(r"^# vramtune emit-config \(([a-z]+)\): profile (\S+) \(([0-9a-f]{16})\)")
HEAD_LINES = 3  # the header is among the first lines (hydra's '# @package' comes before it)


def header_line(format_name: str, profile_name: str, profile_hash: str, env: str) -> str:
    """The header, without its '# ': what format, which profile (and its hash), which env."""
    return f"vramtune emit-config ({format_name}): profile {profile_name} ({profile_hash}), env {env}"


def read_header(lines: Sequence[str]) -> tuple[str, str] | None:
    """(profile name, profile hash) from a file's first lines, or None if vramtune did not
    emit it."""
    match = next((m for m in map(_HEADER.match, lines[:HEAD_LINES]) if m), None)
    return None if match is None else (match.group(2), match.group(3))


def emitted_profile(path: Path) -> Profile:
    """The built-in profile an emitted file names, held to the hash it was emitted with."""
    found = read_header(yamlio.read_text(path, what="config").splitlines())
    if found is None:
        raise UserError(f"{path}: not a file vramtune emitted; name the workload it trains "
                        f"with --profile (a built-in name or a profile YAML)")
    name, digest = found
    profile = load_profile(name)
    if profile.hash != digest:
        raise UserError(f"{path} was emitted for profile {name} ({digest}), and the "
                        f"built-in {name} is now {profile.hash}; pass --profile FILE")
    return profile
