"""The notebook API for real: the README's Python block runs as written (its factory defined in
``__main__``, as a notebook cell's is), a factory defined in this test module and a lambda are
sent to real trial processes by value, and a factory that raises ends as one line, with
nothing written outside the run directory."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import vramtune
from vramtune.errors import UserError
from vramtune.records import Status

README = Path(__file__).resolve().parents[2] / "README.md"
SMALL = {"episode_length": 100, "num_envs": 64,
         "ppo": {"batch_size": 64, "num_minibatches": 4, "unroll_length": 10,
                 "num_updates_per_batch": 1, "run_evals": False},
         "network": {"policy_hidden_layer_sizes": [32], "value_hidden_layer_sizes": [32]},
         "measure": {"warmup_intervals": 0, "min_intervals": 1, "min_window_s": 0,
                     "min_training_steps": 1, "steady_intervals": 1}}


def readme_python_block() -> str:
    section = README.read_text().split("## Python API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def make_broken_env():
    """A notebook factory whose own code fails, as one with a wrong asset path does."""
    raise FileNotFoundError("robot.xml not found in /nowhere")


@pytest.mark.slow
def test_the_readme_python_block_runs(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}  # a notebook's cells run in __main__
    with caplog.at_level(logging.INFO, logger="vramtune"):
        exec(compile(readme_python_block(), str(README), "exec"), namespace)  # noqa: S102
    outcome = namespace["outcome"]
    chosen = outcome.recommendation.chosen
    assert chosen is not None and chosen.status is Status.OK and chosen.num_envs == 64
    frame = outcome.frame
    assert list(frame.num_envs) == [r.num_envs for r in outcome.results]
    assert (frame.status == "ok").all() and frame.steps_per_s.notna().all()
    from matplotlib.figure import Figure

    assert isinstance(namespace["figure"], Figure)
    assert namespace["kwargs"] == outcome.ppo_kwargs
    assert (outcome.ppo_kwargs["num_envs"], outcome.ppo_kwargs["batch_size"]) == (64, 64)
    assert "num_envs: 64" in outcome.yaml
    logged = caplog.text
    assert "trial 1: num_envs=64" in logged and "recommended: num_envs=64" in logged
    assert "NVML unavailable" in logged  # what the CLI prints is not lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert (outcome.run_dir / "env_factory.pkl").is_file()


def test_a_factory_that_raises_ends_the_sweep_in_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outcome = vramtune.sweep({**SMALL, "env": make_broken_env}, out="run", confirm=False,
                             cache=False, max_envs=64)
    (trial,) = outcome.results
    assert trial.status is Status.ERROR
    assert "FileNotFoundError: robot.xml not found in /nowhere" in trial.error_message
    assert outcome.recommendation.chosen is None
    with pytest.raises(UserError) as caught:
        _ = outcome.ppo_kwargs
    assert str(caught.value).startswith("no recommendation: ") and "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.slow
def test_a_lambda_trains_in_a_real_trial(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from brax import envs

    result = vramtune.trial({**SMALL, "name": "lam",
                             "env": lambda: envs.get_environment("fast", backend="generalized")},
                            64, cache=False)
    assert result.status is Status.OK, result.error_message
    assert result.steps_per_s and result.profile == "lam"
    assert list(tmp_path.iterdir()) == []
