"""explain: a saved sweep's memory by role, per env and fixed, and the cards predicted."""

import json

import pytest

from tests.unit.tune.test_ledger import trial
from vramtune.cli import app
from vramtune.results.store import RunHeader, append_result, create_run
from vramtune.workload.profile import load_profile


@pytest.fixture
def run(tmp_path):
    quick = load_profile("quick")
    header = RunHeader("quick", quick.hash, quick.to_dict(), int(2e9), 0.1, {}, {})
    create_run(tmp_path / "run", header).release()
    for n in (64, 128, 256):
        append_result(tmp_path / "run", trial(n))
    return tmp_path / "run"


def test_the_table_names_host_memory_the_unexplained_part_and_the_predicted_cards(run, capsys):
    assert app.main(["explain", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as read, whatever the console's width
    assert "figures are host memory (RAM), not VRAM" in out
    assert "256 envs (measured)" in out  # no pick asked for: the largest size with a ledger
    assert "unexplained" in out and "peak (data segment)" in out and "100.0%" in out
    assert "host memory budgets not swept: predicted, headroom 10%" in out
    assert "a recommendation is only made from measured trials" in out


def test_json_carries_every_size_the_fits_and_the_cards(run, capsys):
    assert app.main(["explain", str(run), "--num-envs", "192", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_envs"] == 192 and data["predicted"] is True
    assert data["ledger"]["ledger_env_state_bytes"] == 164 * 192
    assert [s["num_envs"] for s in data["sizes"]] == [64, 128, 256]
    for size in data["sizes"]:
        assert size["parts_bytes"] + size["unexplained_bytes"] == size["peak_bytes"]
        assert size["uncounted"] == [] and size["ledger_error"] is None
    fits = {f["field"]: f for f in data["fits"]}
    assert fits["ledger_rollout_bytes"]["per_env_bytes"] == pytest.approx(2_400)
    assert [c["card_bytes"] for c in data["cards_predicted"]] == [g * 10**9 for g in
                                                                  (8, 12, 16, 24, 40, 48, 80, 141)]


@pytest.mark.parametrize("args", [["--num-envs", "0"], ["--num-envs", "-3"],
                                  ["--headroom", "150%"]])
def test_bad_input_is_one_line(run, capsys, args):
    assert app.main(["explain", str(run), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vramtune: error:"), err


def test_a_run_without_a_ledger_is_one_line(tmp_path, capsys):
    quick = load_profile("quick")
    create_run(tmp_path / "old", RunHeader("quick", quick.hash, quick.to_dict(), None, 0.1, {},
                                           {})).release()
    assert app.main(["explain", str(tmp_path / "old")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no trial in this run counted" in err[0], err
    assert app.main(["explain", str(tmp_path / "missing")]) == 2


@pytest.fixture
def long_run(tmp_path):
    """A sweep at 1.3 GB whose measured size's epochs stack 12 KiB per training step."""
    from tests.unit.tune.test_growth import run_of

    quick = load_profile("quick")
    header = RunHeader("quick", quick.hash, quick.to_dict(), int(1.3e9), 0.1, {}, {})
    create_run(tmp_path / "long", header).release()
    append_result(tmp_path / "long", run_of(64, steps_per_s=1_000.0))
    return tmp_path / "long"


def test_a_run_that_would_cross_the_line_is_warned_before_it_starts(long_run, capsys):
    assert app.main(["explain", str(long_run), "--num-timesteps", str(10**9)]) == 0
    captured = capsys.readouterr()
    out, err = " ".join(captured.out.split()), " ".join(captured.err.split())
    assert "epochs of 195,313 training steps" in out and "(predicted) over the line" in out
    assert "warning: 64 envs: the run as configured will not fit" in err
    assert app.main(["explain", str(long_run), "--num-timesteps", str(10**9), "--num-evals",
                     "1000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["growth"]["run_epoch_steps"] == 196 and data["growth"]["crosses"] is False
    assert data["warnings"] == [] and data["evaluation"]["dominates"] is False


@pytest.mark.parametrize("args", [["--num-evals", "3"], ["--num-timesteps", "0"],
                                  ["--num-timesteps", "100", "--num-evals", "0"]])
def test_bad_run_lengths_are_one_line(long_run, capsys, args):
    assert app.main(["explain", str(long_run), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vramtune: error:"), err


def test_emit_config_prices_the_run_it_writes(long_run, capsys):
    assert app.main(["emit-config", str(long_run), "--objective", "max-envs", "--gpu-mem",
                     "1.3GB", "--num-timesteps", str(10**9)]) == 0
    captured = capsys.readouterr()
    assert "the run as configured will not fit" in captured.err + captured.out
    assert "# NOTICE: 64 envs: the run as configured will not fit" in captured.out
    assert "# run length: num_timesteps=1,000,000,000, num_evals=1" in captured.out
    assert app.main(["emit-config", str(long_run), "--objective", "max-envs", "--gpu-mem",
                     "1.3GB", "--num-timesteps", str(10**9), "--num-evals", "1000"]) == 0
    text = capsys.readouterr().out
    assert "will not fit" not in text and "num_evals: 1000" in text
