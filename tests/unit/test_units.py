import pytest

from vramtune.errors import UserError
from vramtune.units import format_bytes, headroom_limit_bytes, parse_percent, parse_size, parse_sizes


@pytest.mark.parametrize(("text", "expected"), [
    ("8GB", 8 * 10**9), ("8G", 8 * 10**9), ("8gb", 8 * 10**9), ("7.5GiB", int(7.5 * 2**30)),
    ("8000MiB", 8000 * 2**20), ("8000000000", 8 * 10**9), ("512 MB", 512 * 10**6),
    ("1.5TB", 15 * 10**11), (1024, 1024),
    # a float's rounding away from a whole number is that number: budget_label writes these
    ("2.01GB", 2_010_000_000), ("4.1GB", 4_100_000_000), ("1.5B", 1),
])
def test_parse_size_accepts(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["8XB", "-1GB", "0", "", "  ", "GB", "1e400GB", "0.2"])
def test_parse_size_rejects_with_one_line(text):
    with pytest.raises(UserError) as info:
        parse_size(text, what="--gpu-mem")
    assert "\n" not in str(info.value)
    assert "--gpu-mem" in str(info.value)


def test_parse_sizes_keeps_order():
    assert parse_sizes("8GB, 12GB,24GB") == [8 * 10**9, 12 * 10**9, 24 * 10**9]
    with pytest.raises(UserError):
        parse_sizes(",")


@pytest.mark.parametrize(("text", "expected"), [("10%", 0.10), ("10", 0.10), ("0.9", 0.009),
                                                ("1", 0.01), ("0", 0.0), ("0.5%", 0.005)])
def test_parse_percent(text, expected):
    assert parse_percent(text, what="--headroom") == pytest.approx(expected)


@pytest.mark.parametrize("text", ["-5%", "100%", "abc", "150", "%", "nan"])
def test_parse_percent_rejects(text):
    with pytest.raises(UserError):
        parse_percent(text, what="--headroom")


def test_format_bytes_never_prints_zero_for_unknown():
    assert format_bytes(None) == "n/a"
    assert format_bytes(1536 * 2**20) == "1.50 GiB"
    assert format_bytes(999) == "999 B"


def test_headroom_limit_is_budget_minus_headroom_or_none():
    assert headroom_limit_bytes(1_000_000_000, 0.1) == 900_000_000
    assert headroom_limit_bytes(None, 0.1) is None


def test_a_pasted_run_of_digits_is_named_not_echoed_whole():
    text = "9" * 5000 + "GB"
    with pytest.raises(UserError) as err:
        parse_size(text, what="--gpu-mem")
    message = str(err.value)
    assert len(message) < 200 and "\n" not in message
    assert "(5,002 characters)" in message and "more than any machine's memory" in message
    assert message.startswith("invalid --gpu-mem '999") and "GB'" in message


def test_short_input_is_quoted_whole():
    with pytest.raises(UserError, match=r"invalid size '8XB': unknown unit 'XB'"):
        parse_size("8XB")


def test_an_int_past_a_floats_range_is_more_than_any_machine():
    with pytest.raises(UserError, match="more than any machine's memory"):
        parse_size(10**400)
