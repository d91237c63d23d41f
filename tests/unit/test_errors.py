from hypothesis import given
from hypothesis import strategies as st

from vramtune.errors import QUOTE_MAX_CHARS, quoted


def test_quoted_keeps_short_text_as_repr():
    assert quoted("8XB") == "'8XB'"
    assert quoted(3) == "3" and quoted(-0.5) == "-0.5"  # a number as typer parsed it


def test_quoted_survives_an_int_past_the_digit_limit():
    assert "thousands of digits" in quoted(10**5000)


def test_quoted_cuts_long_text_and_says_how_long():
    shown = quoted("a" * 1000)
    assert shown.startswith("'aaa") and shown.endswith("(1,000 characters)") and "..." in shown


@given(st.text(max_size=3000))
def test_quoted_is_one_bounded_line(text):
    shown = quoted(text)
    assert "\n" not in shown
    assert len(shown) <= QUOTE_MAX_CHARS + 30
