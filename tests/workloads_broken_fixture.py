"""A user's env module that fails while it is imported (a missing dependency)."""

from __future__ import annotations

import vramtune_no_such_dependency  # noqa: F401  - the failure under test


def make_env() -> None:
    """Never reached: the import above fails first."""
