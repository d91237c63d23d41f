"""Hostile input, second round, through the real CLI: each is one line and exit 2 (or, for a
damaged line in a results file, a warning and the rest of the run), nothing written, no wait
past its stated deadline. No trial runs here."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, run_cli
from vramtune import paths
from vramtune.errors import UserError

RUN = GOLDEN / "runs" / "cpu-quick-1.2GB.jsonl"


def one_line_refusal(out, *, code: int = 2) -> str:
    assert out.returncode == code, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramtune: error: "), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    return lines[0]


def a_run(folder: Path) -> Path:
    run = folder / "run"
    run.mkdir()
    shutil.copy(RUN, run / "results.jsonl")
    return run


def test_a_sweep_with_no_valid_size_makes_no_run_folder(tmp_path: Path) -> None:
    out = run_cli("sweep", "--start", "64", "--max-envs", "64", "--devices", "3", cwd=tmp_path,
                  timeout=120)
    line = one_line_refusal(out)
    assert "no num_envs between 64 and 64 satisfies Brax's batch rules" in line
    assert "next:" not in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_start_above_the_maximum_makes_no_run_folder(tmp_path: Path) -> None:
    out = run_cli("sweep", "--start", "512", "--max-envs", "64", cwd=tmp_path, timeout=120)
    assert "--start 512 is above --max-envs 64" in one_line_refusal(out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["sweep", "--profile", "a" * 300],
    ["trial", "--profile", "b" * 5000],
    ["sweep", "--parallel", "9" * 5000],
])
def test_names_and_numbers_past_the_limits(tmp_path: Path, args: list[str]) -> None:
    line = one_line_refusal(run_cli(*args, cwd=tmp_path, timeout=120))
    assert len(line) < 400  # the 5,000 characters are named, not echoed
    assert list(tmp_path.iterdir()) == []


def test_verify_of_a_config_naming_a_profile_too_long_for_the_file_system(tmp_path: Path) -> None:
    config = tmp_path / "tuned.yaml"
    config.write_text(f"# vramtune emit-config (brax): profile {'p' * 300} (0123456789abcdef), "
                      f"env brax:fast\nnum_envs: 64\nbatch_size: 64\nnum_minibatches: 4\n"
                      f"unroll_length: 10\n")
    out = run_cli("verify", str(config), "--gpu-mem", "1.2GB", cwd=tmp_path, timeout=120)
    assert "unknown profile" in one_line_refusal(out)


def test_a_number_past_pythons_digit_limit_in_a_header(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    lines = (run / "results.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    text = json.dumps(head).replace('"search": {', '"search": {"parallel": ' + "9" * 5000 + ", ")
    (run / "results.jsonl").write_text("\n".join([text, *lines[1:]]) + "\n")
    before = sorted(p.name for p in run.iterdir())
    for args in (["sweep", "--resume", str(run)], ["report", str(run)]):
        assert "not usable JSON" in one_line_refusal(run_cli(*args, cwd=tmp_path, timeout=120))
    assert sorted(p.name for p in run.iterdir()) == before


def test_a_rate_past_any_machine_is_a_skipped_line_and_the_plot_still_draws(tmp_path) -> None:
    run = a_run(tmp_path)
    lines = (run / "results.jsonl").read_text().splitlines()
    trial = json.loads(lines[1])
    trial.update(steps_per_s=1.7e308, num_envs=trial["num_envs"] + 1)
    (run / "results.jsonl").write_text("\n".join([*lines, json.dumps(trial)]) + "\n")
    out = run_cli("report", str(run), "--plot", str(tmp_path / "p.png"), cwd=tmp_path,
                  timeout=180)
    assert out.returncode == 0, out.stderr
    assert "steps_per_s" in out.stderr and "line skipped" in out.stderr
    assert (tmp_path / "p.png").stat().st_size > 0


def test_a_width_too_small_to_use_falls_back(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    out = run_cli("report", str(run), env={"COLUMNS": "0", "TERM": "xterm"}, cwd=tmp_path,
                  timeout=120)
    assert out.returncode == 0, out.stderr
    assert "num_envs" in out.stdout and "recommended" in out.stdout.lower()


def test_completion_with_a_shell_name_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for shell in ("zsh", "fish"):
        out = run_cli("--install-completion", shell, env={"HOME": str(home)}, cwd=tmp_path,
                      timeout=120)
        assert "takes no shell name" in one_line_refusal(out)
    assert list(home.iterdir()) == []


def test_a_profile_file_naming_a_pickled_env_is_refused_at_once(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("name: p\nenv: pickled:make_env@0123456789abcdef\n")
    started = time.monotonic()
    out = run_cli("trial", "--profile", str(profile), cwd=tmp_path, timeout=120)
    assert "pickled from a notebook" in one_line_refusal(out)
    assert time.monotonic() - started < 30  # no child was started
    assert not (tmp_path / "vramtune-runs").exists()


@pytest.mark.ray
def test_a_ray_address_nobody_answers_is_one_line_within_its_deadline(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from vramtune.measure.ray_executor import CONNECT_TIMEOUT_S

    started = time.monotonic()
    out = run_cli("sweep", "--executor", "ray", "--ray-address", "127.0.0.1:1", cwd=tmp_path,
                  timeout=120)
    line = one_line_refusal(out)
    assert "cannot connect to the Ray cluster at 127.0.0.1:1" in line
    assert time.monotonic() - started < CONNECT_TIMEOUT_S + 30  # interpreter start included
    assert not (tmp_path / "vramtune-runs").exists()


@pytest.mark.parametrize("make", ["fifo", "dir", "long"])
def test_files_that_are_not_files_are_refused_without_blocking(tmp_path: Path, make: str) -> None:
    path = tmp_path / ("x" * 300 if make == "long" else "env_factory.pkl")
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dir":
        path.mkdir()
    started = time.monotonic()
    with pytest.raises(UserError, match="cannot read env factory"):
        paths.read_bytes(path, what="env factory", max_bytes=1000)
    assert time.monotonic() - started < 5


def test_resume_of_a_notebook_run_whose_factory_is_a_fifo(tmp_path: Path) -> None:
    run = a_run(tmp_path)
    lines = (run / "results.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["profile"]["env"] = "pickled:make_env@0123456789abcdef"
    (run / "results.jsonl").write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    os.mkfifo(run / "env_factory.pkl")
    started = time.monotonic()
    out = run_cli("sweep", "--resume", str(run), cwd=tmp_path, timeout=120)
    line = one_line_refusal(out)
    assert "env_factory.pkl cannot be read" in line and "not a regular file" in line
    assert time.monotonic() - started < 60
