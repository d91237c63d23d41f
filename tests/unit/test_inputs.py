"""inputs: what a person types, checked once."""

import pytest

from vramtune.errors import UserError
from vramtune.inputs import as_budgets

MiB = 2**20


def test_budgets_keep_their_order_drop_duplicates_and_keep_the_runs_own():
    assert as_budgets("8GB, 12GB,8GB,") == [8 * 10**9, 12 * 10**9]
    assert as_budgets(["1GB", 2 * 10**9, None, 1.5e9]) == [10**9, 2 * 10**9, None, 1_500_000_000]
    assert as_budgets(3 * 10**9) == [3 * 10**9]
    assert as_budgets(2.5e9) == [2_500_000_000]
    assert as_budgets("1000000000,2000000000") == [10**9, 2 * 10**9]  # bytes, not a comma slip


@pytest.mark.parametrize(("value", "says"), [
    ("1,3GB", "(1.3GB)"),
    ("1,300MB", "without the thousands separator (1300MB)"),
    ("0,5GiB", "(0.5GiB)"),
    ("63MiB", "--gpu-mem '63MiB': below 64 MiB"),
    ([63 * MiB], f"--gpu-mem {63 * MiB}: below 64 MiB"),
    ([], "no budget given"),
    (",", "expected e.g. 8GB or 8GB,12GB"),
    ("\u0663,5GB", "invalid --gpu-mem"),  # a non-ASCII digit: not a size, no decimal hint
])
def test_a_budget_no_trial_could_run_under_is_one_line(value, says):
    with pytest.raises(UserError) as caught:
        as_budgets(value)
    assert says in str(caught.value) and "\n" not in str(caught.value)
