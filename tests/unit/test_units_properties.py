"""Property tests: sizes and percentages as people (and fuzzers) type them."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.hostile import result_or_user_error
from vramtune.errors import UserError
from vramtune.schema import MAX_BYTES
from vramtune.units import budget_label, parse_percent, parse_size, parse_sizes

SIZE_TEXT = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"\s*[0-9]{0,30}(\.[0-9]{0,8})?([eE][+-]?[0-9]{1,4})?\s*"
                  r"(B|K|KB|M|MB|G|GB|T|TB|KiB|MiB|GiB|TiB|Ki|Mi|Gi|Ti|XB|gb|gib)?\s*",
                  fullmatch=True),
)


@settings(max_examples=200, deadline=1000)
@given(SIZE_TEXT)
def test_parse_size_gives_bytes_in_range_or_one_user_error(text):
    result = result_or_user_error(lambda: parse_size(text, what="--gpu-mem"))
    if not isinstance(result, UserError):
        assert isinstance(result, int) and 1 <= result <= MAX_BYTES
    else:
        assert "--gpu-mem" in str(result)


@settings(max_examples=60, deadline=1000)
@given(st.lists(SIZE_TEXT, max_size=5).map(",".join))
def test_parse_sizes_never_raises_anything_else(text):
    result = result_or_user_error(lambda: parse_sizes(text, what="--gpu-mem"))
    if not isinstance(result, UserError):
        assert result and all(1 <= b <= MAX_BYTES for b in result)


@settings(max_examples=150, deadline=1000)
@given(st.one_of(st.text(max_size=20), st.from_regex(r"-?[0-9]{0,5}(\.[0-9]{0,5})?%?",
                                                       fullmatch=True)))
def test_parse_percent_is_a_fraction_below_one_or_one_user_error(text):
    result = result_or_user_error(lambda: parse_percent(text, what="--headroom"))
    if not isinstance(result, UserError):
        assert 0 <= result < 1


@settings(max_examples=300, deadline=1000)
@given(st.integers(min_value=1, max_value=MAX_BYTES))
def test_budget_label_is_always_read_back(nbytes):
    """The label is what a 'next:' line suggests: vramtune must accept what it suggests."""
    label = budget_label(nbytes)
    assert "e+" not in label and parse_size(label) == nbytes or \
        abs(parse_size(label) - nbytes) <= nbytes * 1e-12


@settings(max_examples=300, deadline=1000)
@given(st.integers(min_value=1, max_value=10**6))
def test_a_round_budget_label_reads_back_exactly(k):
    """Budgets as people type them (k x 10 MB, 2.01GB, 4.1GB): exactly, not a byte short."""
    nbytes = k * 10**7
    assert parse_size(budget_label(nbytes)) == nbytes
