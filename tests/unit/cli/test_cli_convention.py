"""One convention across the commands: --json wherever a result is printed, completion on,
help text that says what it was written to say."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer

from tests.conftest import run_cli
from tests.fuzz_corpus import Corpus
from vramtune.cli import app

RESULT_COMMANDS = ("sweep", "trial", "verify", "report", "compare", "emit-config", "check",
                   "doctor", "bench", "profiles", "init-profile")


def _commands() -> dict[str, object]:
    group = typer.main.get_command(app.app)
    return dict(group.commands)  # type: ignore[attr-defined]


def test_every_command_that_prints_a_result_takes_json() -> None:
    commands = _commands()
    assert set(RESULT_COMMANDS) <= set(commands)
    for name in RESULT_COMMANDS:
        flags = {opt for p in commands[name].params for opt in p.opts}  # type: ignore[attr-defined]
        assert "--json" in flags, name


# Rich reads "[plot]" in help text as a style tag and drops it: square brackets in help must
# be written "\[" (or never appear).
_SWALLOWED = re.compile(r"(?<!\\)\[[A-Za-z/#@]")


def test_no_help_text_holds_markup_rich_would_swallow() -> None:
    for name, command in _commands().items():
        texts = [command.help or ""]  # type: ignore[attr-defined]
        texts += [getattr(p, "help", None) or "" for p in command.params]  # type: ignore[attr-defined]
        for text in texts:
            assert not _SWALLOWED.search(text), f"{name}: {text!r}"


def test_report_help_shows_the_plot_extra() -> None:
    out = run_cli("report", "--help", env={"COLUMNS": "200"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "vramtune[plot]" in out.stdout


def test_shell_completion_is_offered() -> None:
    out = run_cli("--help", env={"COLUMNS": "200"}, timeout=60)
    assert "--install-completion" in out.stdout and "--show-completion" in out.stdout


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    corpus = Corpus(root)
    corpus.runs()
    corpus.checks()
    return root


@pytest.fixture
def run(corpus: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    shutil.copytree(corpus / "runs/control-good", directory)
    return directory


def _json(argv: list[str], capsys: pytest.CaptureFixture[str], codes: tuple[int, ...] = (0,)
          ) -> object:
    code = app.main(argv)
    out = capsys.readouterr().out
    assert code in codes, out
    return json.loads(out)


def test_report_json_is_format_json(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flag = _json(["report", str(run), "--json"], capsys)
    assert flag == _json(["report", str(run), "--format", "json"], capsys)
    assert [row["num_envs"] for row in flag] == [64, 128, 256]  # type: ignore[union-attr,index]


def test_report_json_with_another_format_is_one_line_exit_2(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert app.main(["report", str(run), "--json", "--format", "csv"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["vramtune: error: --json and --format csv: give one of them"]


def test_compare_json(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    shutil.copytree(run, other)
    data = _json(["compare", str(run), str(other), "--json"], capsys)
    assert data == _json(["compare", str(run), str(other), "--format", "json"], capsys)


def test_emit_config_json_one_budget(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert app.main(["emit-config", str(run), "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # what stderr would say is in the JSON
    data = json.loads(captured.out)
    [config] = data["configs"]
    assert config["num_envs"] in (64, 128) and config["error"] is None
    assert config["file"] is None  # one budget, no -o: the YAML is in "text", not a file
    assert f"num_envs: {config['num_envs']}" in config["text"]
    assert data["profile"] == "quick" and data["table"] is None


def test_emit_config_json_several_budgets_writes_files(
        run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "configs"
    data = _json(["emit-config", str(run), "--gpu-mem", "100MB,2GB", "-o", str(out), "--json"],
                 capsys, codes=(1,))
    assert isinstance(data, dict)
    small, large = data["configs"]
    assert small["error"] and small["file"] is None and small["num_envs"] is None
    assert large["error"] is None and Path(large["file"]).is_file()
    assert data["table"] and Path(data["table"]).is_file()


def test_check_profiles_json(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(["check", str(corpus / "check/control-valid.yaml"), "--json"], capsys)
    assert data["valid"] is True  # type: ignore[index]
    names = [p["name"] for p in _json(["profiles", "--json"], capsys)]  # type: ignore[union-attr]
    assert "quick" in names


def test_init_profile_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "ant.yaml"
    data = _json(["init-profile", "--env", "brax:ant", "-o", str(target), "--json"], capsys)
    assert isinstance(data, dict)
    assert data["file"] == str(target) and target.is_file() and data["env"] == "brax:ant"
    assert data["try"].startswith("vramtune trial --profile")


def test_doctor_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(["doctor", "--no-probe", "--json"], capsys, codes=(0, 1))
    assert isinstance(data, dict) and "problems" in data and "versions" in data


@pytest.mark.parametrize(("argv", "start", "command"), [
    (["report", "run", "--objective", "fastest"],
     "Invalid value for '--objective': 'fastest' is not one of", "vramtune report"),
    (["bogus"], "No such command 'bogus'", "vramtune"),
    (["report"], "Missing argument", "vramtune report"),
    (["emit-config", "run", "--bogus"], "No such option: --bogus", "vramtune emit-config"),
])
def test_a_usage_error_is_one_line(capsys, argv, start, command) -> None:
    """click's usage block (usage, a hint, a blank line, the error) becomes one line, like
    every other refusal, naming the command's --help; no "Value error, " from pydantic."""
    assert app.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"vramtune: error: {start}"), err
    assert err.rstrip().endswith(f"; see '{command} --help'") and "Value error" not in err


@pytest.mark.parametrize("bad", [["--gpu-mem", "0"], ["--gpu-mem", "1GB", "--steps", "0"],
                                 ["--gpu-mem", "1GB", "--devices", "0"],
                                 ["--gpu-mem", "1GB", "--timeout", "nan"]])
def test_verify_refuses_its_flags_before_printing_anything(capsys, tmp_path, bad) -> None:
    config = tmp_path / "train.yaml"
    config.write_text("num_envs: 64\nbatch_size: 64\nnum_minibatches: 4\n")
    assert app.main(["verify", str(config), "--profile", "quick", *bad]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("vramtune: error: "), err


def test_a_bare_command_prints_the_help_and_no_empty_error(capsys) -> None:
    assert app.main([]) == 2
    out, err = capsys.readouterr()
    assert "Usage: vramtune" in out and err == "", err
