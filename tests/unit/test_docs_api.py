"""docs/api.md names every public name of ``vramtune``: a function added to the API without a
line there fails here."""

from __future__ import annotations

from pathlib import Path

import vramtune

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def public_names() -> list[str]:
    """What ``import vramtune`` offers of its own (not ``Any`` or ``annotations``)."""
    names = getattr(vramtune, "__all__", None) or dir(vramtune)
    return sorted(n for n in names if not n.startswith("_")
                  and getattr(getattr(vramtune, n), "__module__", "").startswith("vramtune"))


def test_docs_api_names_every_public_name():
    text = API_DOC.read_text()
    missing = [n for n in public_names() if f"`{n}(" not in text and f"`{n}`" not in text]
    assert not missing, f"docs/api.md does not document {', '.join(missing)}: add a line for each"


def test_the_public_names_are_found():
    assert {"sweep", "trial", "verify", "emit_config", "check", "doctor"} <= set(public_names())
