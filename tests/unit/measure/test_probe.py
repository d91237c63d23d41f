"""The probe's error text: an exception with no message still says where it came from."""

from __future__ import annotations

from vramtune.measure.probe import _message


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - the caught exception is the point
        return caught


def test_an_exception_without_a_message_names_where_it_was_raised():
    """jax raises a bare AssertionError when JAX_PLATFORMS names a backend it lacks."""
    text = _message(_raised(AssertionError()))
    assert text.startswith("(no message) at test_probe.py:") and text.endswith(" in _raised")
    assert _message(AssertionError()) == "(no message)"  # never raised: no frame to name
    assert _message(_raised(RuntimeError("  Unable to initialize backend 'cuda'\n"))) == \
        "Unable to initialize backend 'cuda'"
