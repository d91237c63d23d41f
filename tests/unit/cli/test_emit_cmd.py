"""emit-config writes where it is told, and without -o only inside the run it read."""

import os
import shutil

import pytest

from vramtune.cli import app


def _good_run(corpus, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(corpus / "runs/control-good", run)
    return run


def test_several_budgets_go_to_the_runs_configs_folder(corpus, tmp_path, capsys):
    run = _good_run(corpus, tmp_path)
    assert app.main(["emit-config", str(run), "--gpu-mem", "1GB,2GB"]) in (0, 1)
    assert sorted(p.suffix for p in (run / "configs").iterdir()) == [".md", ".yaml", ".yaml"]


def test_a_linked_configs_folder_is_refused_before_anything_is_written(corpus, tmp_path, capsys):
    """Found re-running the external fuzz corpus: a run directory holding `configs ->
    elsewhere` (copied or shared) made emit-config write its YAML files there."""
    run = _good_run(corpus, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "configs").symlink_to(elsewhere)
    assert app.main(["emit-config", str(run), "--gpu-mem", "1GB,2GB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vramtune: error: refusing to write 'configs'")
    assert list(elsewhere.iterdir()) == []
    out = tmp_path / "chosen"  # -o is the way to write elsewhere
    assert app.main(["emit-config", str(run), "--gpu-mem", "1GB,2GB", "-o", str(out)]) in (0, 1)
    assert len(list(out.iterdir())) == 3


def _set_header(run, **fields):
    import json

    lines = (run / "results.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    for key, value in fields.items():
        target = head
        *parents, last = key.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[last] = value
    (run / "results.jsonl").write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")


def test_a_mixed_cluster_parent_whose_configs_link_leads_out_is_refused(corpus, tmp_path, capsys):
    """Found by a review: with runs of two cards under one parent, emit-config wrote through
    a `configs` link to a folder outside the parent (one run refused the same link)."""
    parent = tmp_path / "parent"
    for card in ("A", "B"):
        shutil.copytree(corpus / "runs/control-good", parent / f"card{card}")
        _set_header(parent / f"card{card}", **{"machine.cpu": f"CPU {card}"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (parent / "configs").symlink_to(elsewhere)
    assert app.main(["emit-config", str(parent), "--gpu-mem", "1GB"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vramtune: error: refusing to write 'configs'"), err
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["results.jsonl", "config.yaml"])
def test_a_file_holding_measurements_is_never_written_over(corpus, tmp_path, capsys, name):
    """-o (or report --plot) naming the run's own results file, or any file that is one
    whatever its name, is refused: the measurements would be replaced by a config."""
    run = _good_run(corpus, tmp_path)
    target = run / name
    if name != "results.jsonl":
        shutil.copy(run / "results.jsonl", target)
    before = target.read_bytes()
    assert app.main(["emit-config", str(run), "--gpu-mem", "1GB", "-o", str(target)]) == 2
    assert app.main(["report", str(run), "--plot", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all("it holds a sweep's measurements" in line for line in err), err
    assert target.read_bytes() == before


@pytest.mark.parametrize("prefix", ["hydra", "network", "network.ppo"])
def test_a_hydra_prefix_that_is_a_top_level_key_of_the_file_is_refused(corpus, tmp_path, capsys,
                                                                          prefix):
    """A second top-level `hydra:` or `network:` replaced the first on load: the tuned
    settings were lost from a file that emit-config said it wrote."""
    run = _good_run(corpus, tmp_path)
    out = tmp_path / "h.yaml"
    assert app.main(["emit-config", str(run), "--gpu-mem", "1GB", "--format", "hydra",
                     "--hydra-prefix", prefix, "-o", str(out)]) == 2
    assert "a top-level key the Hydra file already has" in capsys.readouterr().err
    assert not out.exists()


def test_a_name_too_long_is_one_line_for_every_command_that_reads_or_writes(corpus, tmp_path,
                                                                            capsys):
    run = _good_run(corpus, tmp_path)
    long = tmp_path / ("n" * 300)
    for argv in (["emit-config", str(run), "--gpu-mem", "1GB", "-o", str(long)],
                 ["check", f"{long}.yaml"],
                 ["sweep", "--resume", str(long / "results.jsonl")]):
        assert app.main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("vramtune: error: ") for line in err), err


def test_a_dollar_in_a_header_name_is_text_in_the_plot(corpus, tmp_path, capsys):
    """matplotlib read '$...$' in the device name as mathtext and raised past the table."""
    pytest.importorskip("matplotlib")
    run = _good_run(corpus, tmp_path)
    _set_header(run, gpu_name=r"GPU $\undefinedcmd{x}$")
    assert app.main(["report", str(run), "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_control_character_in_a_config_key_is_spelled_out(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text('"\\e[31mRED":\n  num_envs: 64\n  batch_size: 64\n  num_minibatches: 4\n')
    app.main(["check", str(config)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mRED.num_envs" in out


def test_a_user_error_is_one_line_whatever_it_quotes(capsys):
    from vramtune.errors import UserError

    @app.app.command("raise-for-test", hidden=True)
    def _raise() -> None:
        raise UserError("evil\nvramtune: all good \x1b[31m")

    try:
        assert app.main(["raise-for-test"]) == 2
    finally:
        app.app.registered_commands.pop()
    err = capsys.readouterr().err
    assert err == "vramtune: error: evil\\nvramtune: all good \\x1b[31m\n"


@pytest.mark.parametrize(("gpu_mem", "says"), [
    ("1,3GB", "a comma separates budgets, so '1' alone would mean 1 B; for one budget "
              "write it with a decimal point (1.3GB)"),
    ("1,300MB", "write it without the thousands separator (1300MB)"),
    ("63MiB", "--gpu-mem '63MiB': below 64 MiB"),
    ("1GB,3", "--gpu-mem '3': below 64 MiB"),
    ("", "invalid --gpu-mem '': expected e.g. 8GB or 8GB,12GB"),
])
def test_a_budget_no_trial_could_run_under_is_refused_not_read(corpus, tmp_path, capsys,
                                                               gpu_mem, says):
    """A bare number is bytes: '1,3GB' read as budgets of 1 byte and 3 GB before."""
    run = _good_run(corpus, tmp_path)
    assert app.main(["emit-config", str(run), "--gpu-mem", gpu_mem]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (run / "configs").exists()


def test_runs_of_two_cards_given_one_by_one_write_into_the_first_run(corpus, tmp_path, capsys):
    """Without -o the files stay inside what was given: the first run's configs folder, as
    for one card (they went to the folder beside the runs before)."""
    runs = [tmp_path / f"card{card}" for card in ("A", "B")]
    for card, run in zip("AB", runs, strict=True):
        shutil.copytree(corpus / "runs/control-good", run)
        _set_header(run, **{"machine.cpu": f"CPU {card}"})
    assert app.main(["emit-config", *map(str, runs), "--gpu-mem", "1GB"]) in (0, 1)
    written = sorted(p.name for p in (runs[0] / "configs").iterdir())
    assert written == ["quick-CPU-A-1GB.yaml", "quick-CPU-B-1GB.yaml", "quick-cards.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cardA", "cardB"]


def test_runs_of_two_cards_given_as_results_files_write_into_the_first_run(corpus, tmp_path,
                                                                           capsys):
    runs = [tmp_path / f"card{card}" for card in ("A", "B")]
    for card, run in zip("AB", runs, strict=True):
        shutil.copytree(corpus / "runs/control-good", run)
        _set_header(run, **{"machine.cpu": f"CPU {card}"})
    files = [str(run / "results.jsonl") for run in runs]
    assert app.main(["emit-config", *files, "--gpu-mem", "1GB"]) in (0, 1)
    assert (runs[0] / "configs" / "quick-cards.md").is_file()


def test_the_emitted_file_and_table_quote_the_rate_the_report_recommends(tmp_path, capsys):
    """A pick that ran twice: report, the file's header and the table give one figure (the
    median over its runs' intervals), and its proof run reads as a proof, not the pick."""
    import json

    from tests.conftest import GOLDEN

    lines = (GOLDEN / "runs" / "cpu-quick-1.2GB.jsonl").read_text().splitlines()
    trial = next(json.loads(x) for x in lines[1:] if json.loads(x).get("num_envs") == 256
                 and json.loads(x).get("purpose") == "search")
    again = {**trial, "purpose": "alone",
             "steps_per_s": trial["steps_per_s"] * 0.95,
             "steps_per_s_min": trial["steps_per_s_min"] * 0.95,
             "steps_per_s_max": trial["steps_per_s_max"] * 0.95}
    run = tmp_path / "run"
    run.mkdir()
    # re-measured before its proof, as a sweep does
    (run / "results.jsonl").write_text("\n".join([*lines[:-1], json.dumps(again), lines[-1]])
                                       + "\n")
    assert app.main(["report", str(run), "--format", "markdown"]) == 0
    said = capsys.readouterr().out
    rate = said.split("num_minibatches=4: ")[-1].split(" steps/s")[0]
    assert "steps/s (median over its runs), peak" in said, said  # recorded without intervals
    assert app.main(["emit-config", str(run), "--gpu-mem", "1.2GB,2GB"]) in (0, 1)
    capsys.readouterr()
    text = (run / "configs" / "quick-1.2GB.yaml").read_text()
    assert f"{rate} steps/s (median over its runs, compile excluded)" in text
    assert f"| {rate} |" in (run / "configs" / "quick-table.md").read_text()
    # the pick's runs are the lines above the per-size list (its proof: "confirmed:"), not a
    # per-size line quoting one of them as if it were another size's
    assert "#   num_envs=256:" not in text and "# confirmed: " in text


@pytest.mark.parametrize(("name", "magic"), [("p.pdf", b"%PDF"), ("p.SVG", b"<?xml"),
                                             ("p", b"\x89PNG")])
def test_a_plot_is_written_in_the_format_its_name_asks_for(corpus, tmp_path, capsys, name, magic):
    """'--plot p.pdf' wrote PNG data under a PDF name."""
    pytest.importorskip("matplotlib")
    run = _good_run(corpus, tmp_path)
    assert app.main(["report", str(run), "--plot", str(tmp_path / name)]) == 0
    assert (tmp_path / name).read_bytes().startswith(magic)


def test_a_plot_suffix_no_backend_writes_is_refused_before_the_table(corpus, tmp_path, capsys):
    run = _good_run(corpus, tmp_path)
    assert app.main(["report", str(run), "--plot", str(tmp_path / "p.jpg")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the work
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "'.jpg' is none of them" in err[0], err
    assert not (tmp_path / "p.jpg").exists()


def test_without_a_run_the_newest_is_used_a_mixed_clusters_parent_among_them(corpus, tmp_path,
                                                                           monkeypatch, capsys):
    runs = tmp_path / "vramtune-runs"
    shutil.copytree(corpus / "runs/control-good", runs / "20261101T000000-quick")
    for card in ("A", "B"):  # a mixed cluster's sweep: one run per card under its parent
        shutil.copytree(corpus / "runs/control-good", runs / "20261102T000000" / f"card{card}")
        _set_header(runs / "20261102T000000" / f"card{card}", **{"machine.cpu": f"CPU {card}"})
    (runs / "stray-file").write_text("not a run")
    (runs / "empty").mkdir()
    os.utime(runs / "20261101T000000-quick" / "results.jsonl", (1e9, 1e9))
    monkeypatch.chdir(tmp_path)
    assert app.main(["emit-config", "--gpu-mem", "1GB"]) in (0, 1)
    assert "using the newest run: vramtune-runs/20261102T000000" in capsys.readouterr().err
    now = 2e9  # the single run written last: it is the newest
    os.utime(runs / "20261101T000000-quick" / "results.jsonl", (now, now))
    assert app.main(["emit-config", "--gpu-mem", "1GB"]) in (0, 1)
    assert "using the newest run: vramtune-runs/20261101T000000-quick" in capsys.readouterr().err
