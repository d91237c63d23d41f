"""The jax/brax pair check, on fake packages laid out on disk as pip would install them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vramtune.compat import require_trainable_stack, stack_problem
from vramtune.errors import UserError

BRAX_CALL = ("  training_state = jax.device_put_replicated(\n"
             "      training_state, jax.local_devices()[:local_devices_to_use])\n")
BRAX_FIXED = ("  # jax.device_put_replicated is gone in jax 0.10: put with a sharding instead\n"
              "  training_state = jax.device_put(training_state, sharding)\n")
JAX_OLD_INIT = ('_deprecations = {"device_put_replicated": ("deprecated", None)}\n')


def fake_site(root: Path, *, jax: str = "0.10.2", brax: str = "0.14.2",
              ppo_train: str = BRAX_CALL, jax_init: str | None = "") -> Path:
    """A site-packages folder holding jax and brax: dist-info metadata and the source files
    the check reads. ``jax_init=None``: no jax source, only its metadata."""
    site = root / "site"
    for name, version in (("jax", jax), ("brax", brax)):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if jax_init is not None:
        (site / "jax").mkdir()
        (site / "jax" / "__init__.py").write_text(jax_init)
    ppo = site / "brax" / "training" / "agents" / "ppo"
    ppo.mkdir(parents=True)
    for folder in (site / "brax", site / "brax" / "training", ppo.parent, ppo):
        (folder / "__init__.py").write_text("")
    (ppo / "train.py").write_text("import jax\n\ndef train():\n" + ppo_train)
    return site


def test_brax_calling_a_function_new_jax_removed_cannot_train(tmp_path: Path) -> None:
    site = fake_site(tmp_path)
    problem = stack_problem([str(site)])
    assert problem is not None
    assert (problem.jax_version, problem.brax_version) == ("0.10.2", "0.14.2")
    assert problem.brax_files == ("brax/training/agents/ppo/train.py",)
    message = problem.message
    assert "\n" not in message
    assert "brax 0.14.2 calls jax.device_put_replicated" in message
    assert "jax 0.10.2" in message and "git main" in message
    assert "pip install 'jax<0.10' 'jaxlib<0.10'" in message
    with pytest.raises(UserError, match="device_put_replicated"):
        require_trainable_stack([str(site)])


def test_brax_from_git_main_calls_itself_0_14_2_and_trains(tmp_path: Path) -> None:
    # The fix is in the code, not the version number: a comment naming it is not a call.
    assert stack_problem([str(fake_site(tmp_path, ppo_train=BRAX_FIXED))]) is None


def test_jax_that_still_has_it_trains_with_released_brax(tmp_path: Path) -> None:
    assert stack_problem([str(fake_site(tmp_path, jax="0.9.2", jax_init=JAX_OLD_INIT))]) is None


def test_without_jax_source_its_version_decides(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    assert stack_problem([str(fake_site(old, jax="0.9.2", jax_init=None))]) is None
    problem = stack_problem([str(fake_site(new, jax="0.11.0.dev20260101", jax_init=None))])
    assert problem is not None and problem.jax_version == "0.11.0.dev20260101"


def test_a_helper_module_calling_it_counts_too(tmp_path: Path) -> None:
    site = fake_site(tmp_path, ppo_train="  return 0\n")
    (site / "brax" / "training" / "pmap.py").write_text(
        "def bcast(value, devices):\n  return jax.device_put_replicated(value, devices)\n")
    problem = stack_problem([str(site)])
    assert problem is not None and problem.brax_files == ("brax/training/pmap.py",)


def test_missing_jax_or_brax_is_not_this_checks_business(tmp_path: Path) -> None:
    assert stack_problem([str(tmp_path)]) is None


def test_the_installed_stack_trains() -> None:
    # The suite's own venv holds the tested pair: the check must let it through.
    assert stack_problem() is None


@pytest.mark.parametrize("command", [
    ["trial", "--profile", "quick", "--num-envs", "64"],
    ["sweep", "--profile", "quick", "--json"],
    ["bench", "--profile", "quick", "--sizes", "64", "--baseline", "base.json"],
    ["verify", "no-such-config.yaml"],
])
def test_commands_that_train_stop_before_any_trial(tmp_path: Path, command: list[str]) -> None:
    site = fake_site(tmp_path)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    out = run_cli(*command, env={"PYTHONPATH": path}, cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramtune: error: brax 0.14.2 calls jax."
                                                   "device_put_replicated"), out.stderr
    assert out.stdout == ""
    assert not (tmp_path / "vramtune-runs").exists()  # nothing ran, nothing was written


def test_help_still_works_on_a_stack_that_cannot_train(tmp_path: Path) -> None:
    path = os.pathsep.join([str(fake_site(tmp_path)), os.environ.get("PYTHONPATH", "")])
    out = run_cli("sweep", "--help", env={"PYTHONPATH": path}, timeout=120)
    assert out.returncode == 0 and "--gpu-mem" in out.stdout


def test_doctor_names_the_pair_as_a_problem(tmp_path: Path) -> None:
    from vramtune.cli.doctor_cmd import doctor_text
    from vramtune.measure.doctor import diagnose

    report = diagnose(run_cap_probe=False, import_path=[str(fake_site(tmp_path))])
    assert any(p.startswith("brax 0.14.2 calls jax.device_put_replicated") for p in report.problems)
    assert "PROBLEM: brax 0.14.2 calls jax.device_put_replicated" in doctor_text(report)
