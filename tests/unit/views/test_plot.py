"""A plot's format comes from its file name, checked without importing matplotlib."""

import pytest

from vramtune.errors import UserError
from vramtune.views.plot import plot_format


@pytest.mark.parametrize(("path", "fmt"), [("a.png", "png"), ("a.PDF", "pdf"), ("d/a.svg", "svg"),
                                           ("plot", "png"), ("a.b/plot", "png")])
def test_the_suffix_names_the_format(path, fmt):
    assert plot_format(path) == fmt


@pytest.mark.parametrize("path", ["a.jpg", "a.eps", "a.png.txt", "a." + "x" * 300])
def test_any_other_suffix_is_one_user_error(path):
    with pytest.raises(UserError, match="is none of them") as info:
        plot_format(path)
    assert "\n" not in str(info.value) and len(str(info.value)) < 200
