"""The plot: its format from the file name (checked without matplotlib), its speed panel."""

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


def test_the_speed_panel_draws_one_rate_per_size_and_marks_a_set_aside_run(tmp_path):
    """The recorded dip: 448's first run (14,878 steps/s) is a grey cross, not a point of the
    line, which goes through 448's kept rate (27,222)."""
    import shutil

    pytest.importorskip("matplotlib")
    from tests.conftest import GOLDEN
    from vramtune.results.store import RESULTS_FILE, load_run
    from vramtune.tune.recommend import choose
    from vramtune.views.plot import sweep_figure

    (tmp_path / "run").mkdir()
    shutil.copy(GOLDEN / "runs" / "cpu-quick-1.3GB-dip-rerun.jsonl", tmp_path / "run" / RESULTS_FILE)
    run = load_run(tmp_path / "run")
    h = run.header
    rec = choose(run.results, h.budget_bytes, h.headroom_fraction)
    fig = sweep_figure(run, rec, budget_bytes=h.budget_bytes, headroom_fraction=h.headroom_fraction)
    speed = fig.axes[1]
    lines = {line.get_label(): line for line in speed.get_lines()}
    per_size = dict(zip(*lines["steps/s per size (its runs alone, pooled)"].get_data(), strict=True))
    assert round(per_size[448]) == 27_222
    crosses = lines["set aside: a disturbed run"].get_data()
    assert list(crosses[0]) == [448] and round(crosses[1][0]) == 14_878
