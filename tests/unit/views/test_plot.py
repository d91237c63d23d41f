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


def test_a_run_with_a_ledger_gets_a_stacked_panel_of_its_roles(tmp_path):
    pytest.importorskip("matplotlib")
    from tests.unit.tune.test_ledger import trial
    from vramtune.results.store import RunHeader, append_result, create_run, load_run
    from vramtune.tune.recommend import choose
    from vramtune.views.plot import sweep_figure
    from vramtune.workload.profile import load_profile

    quick = load_profile("quick")
    create_run(tmp_path / "run", RunHeader("quick", quick.hash, quick.to_dict(), int(2e9), 0.1,
                                           {}, {})).release()
    for n in (64, 256):
        append_result(tmp_path / "run", trial(n, steps_per_s=1e4))
    run = load_run(tmp_path / "run")
    fig = sweep_figure(run, choose(run.results, int(2e9), 0.1), budget_bytes=int(2e9),
                       headroom_fraction=0.1)
    roles = fig.axes[2]
    labels = [c.get_label() for c in roles.containers]
    assert labels[0] == "params, optimizer, normalizer" and labels[-1] == "unexplained"
    # the stack of each size reaches its measured peak: the parts, then what they do not explain
    tops = [bar.get_y() + bar.get_height() for bar in roles.containers[-1]]
    mib = 2**20
    assert [round(t * mib) for t in tops] == [r.host_peak_data_bytes for r in run.results]
