"""The jax/brax check on the real release files (tests/data/README.md says where each is from),
and the stand-ins against the real jax functions they replace."""

from __future__ import annotations

import ast
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from vramtune import compat
from vramtune.compat import CLIP, Gap, StackVerdict, find_gaps, stack_verdict
from vramtune.errors import UserError

DATA = Path(__file__).resolve().parent.parent / "data"
JAX_RELEASES = ("0.9.2", "0.10.2", "0.11.2", "0.12.1")
REMOVED_IN_0_10 = ("device_put_replicated", "device_put_sharded")


def jax_release(version: str, root: Path) -> Path:
    """The release's own ``__init__.py`` and ``_src/numpy/lax_numpy.py``, where its wheel
    puts them."""
    jax_dir = root / "jax"
    (jax_dir / "_src" / "numpy").mkdir(parents=True)
    shutil.copy(DATA / "jax" / version / "__init__.py", jax_dir / "__init__.py")
    (jax_dir / "_src" / "numpy" / "lax_numpy.py").write_bytes(
        gzip.decompress((DATA / "jax" / version / "lax_numpy.py.gz").read_bytes()))
    return jax_dir


def installed_brax() -> Path:
    found = compat._package_dir("brax", None)
    assert found is not None
    return found


def brax_release_calls_device_put_replicated() -> bool:
    return b"jax.device_put_replicated(" in (installed_brax() / "training/agents/ppo/train.py"
                                            ).read_bytes()


@pytest.mark.parametrize("version", JAX_RELEASES)
def test_what_each_jax_release_still_has(version: str) -> None:
    init = ast.parse((DATA / "jax" / version / "__init__.py").read_bytes())
    lacks = compat.jax_lacks(init, (*REMOVED_IN_0_10, "device_put", "jit"))
    # 0.9.2 keeps them behind a live deprecation (a warning); 0.10 on maps them to None,
    # which is what makes `jax.device_put_replicated` raise
    assert lacks == (() if version == "0.9.2" else REMOVED_IN_0_10)
    keywords = compat.clip_keywords(gzip.decompress(
        (DATA / "jax" / version / "lax_numpy.py.gz").read_bytes()))
    assert keywords is not None and {"min", "max"} <= keywords
    assert ("a_min" in keywords) == (version == "0.9.2")


@pytest.mark.parametrize("version", JAX_RELEASES[1:])
def test_released_brax_on_a_jax_without_them_runs_patched(version: str, tmp_path: Path) -> None:
    if not brax_release_calls_device_put_replicated():
        pytest.skip("the installed brax is not the 0.14.2 release")
    gaps = {g.api: g for g in find_gaps(jax_release(version, tmp_path), installed_brax())}
    assert set(gaps) == {"device_put_replicated", CLIP}
    assert "brax/training/agents/ppo/train.py" in gaps["device_put_replicated"].brax_files
    assert "brax/training/pmap.py" in gaps["device_put_replicated"].brax_files
    assert gaps[CLIP].brax_files == ("brax/fluid.py",)
    verdict = StackVerdict(version, "0.14.2", tuple(gaps.values()))
    assert verdict.trains and verdict.problem is None
    assert verdict.line == (f"jax {version} + brax 0.14.2: trains, patched as brax main does "
                            f"(jax.device_put_replicated, jnp.clip's a_min/a_max keywords)")


def test_released_brax_on_jax_0_9_2_needs_nothing(tmp_path: Path) -> None:
    assert find_gaps(jax_release("0.9.2", tmp_path), installed_brax()) == ()


@pytest.mark.parametrize("version", JAX_RELEASES)
def test_brax_main_calls_nothing_jax_removed(version: str, tmp_path: Path) -> None:
    # brax main still calls itself 0.14.2: the code decides, not the version
    brax_main = DATA / "brax-main" / "brax"
    assert len(list(compat.brax_modules(brax_main))) == 6  # every file read, none skipped
    assert find_gaps(jax_release(version, tmp_path), brax_main) == ()


def test_brax_installed_under_a_folder_named_tests_is_still_read(tmp_path: Path) -> None:
    if not brax_release_calls_device_put_replicated():
        pytest.skip("the installed brax is not the 0.14.2 release")
    brax = tmp_path / "tests" / "site" / "brax"
    shutil.copytree(installed_brax(), brax, ignore=shutil.ignore_patterns("__pycache__"))
    gaps = find_gaps(jax_release("0.10.2", tmp_path / "j"), brax)
    assert {g.api for g in gaps} == {"device_put_replicated", CLIP}


def test_a_fifo_among_brax_modules_is_skipped_not_waited_on(tmp_path: Path) -> None:
    brax = tmp_path / "brax"
    brax.mkdir()
    os.mkfifo(brax / "stuck.py")
    (brax / "ok.py").write_text("import jax\nX = jax.device_put_replicated\n")
    gaps = find_gaps(jax_release("0.10.2", tmp_path / "j"), brax)
    assert gaps == (Gap("device_put_replicated", ("brax/ok.py",)),)


def test_a_removed_function_with_no_stand_in_is_refused_with_the_fix(tmp_path: Path) -> None:
    brax = tmp_path / "brax"
    (brax / "training").mkdir(parents=True)
    (brax / "training" / "util.py").write_text("import jax\n\ndef f():\n"
                                              "  return jax.array_ref(0)  # removed in 0.9\n")
    gaps = find_gaps(jax_release("0.9.2", tmp_path), brax)
    assert gaps == (Gap("array_ref", ("brax/training/util.py",)),)
    verdict = StackVerdict("0.9.2", "0.14.2", gaps)
    assert not verdict.trains
    problem = verdict.problem
    assert problem is not None and "\n" not in problem
    assert problem.startswith("jax 0.9.2 + brax 0.14.2 cannot train: brax calls jax.array_ref "
                              "(brax/training/util.py)")
    assert "git main" in problem and "'jax<0.10'" in problem and compat.TESTED in problem


def test_the_tested_set_named_in_a_refusal_is_the_constraints_file() -> None:
    pins = dict(line.split("==") for line in (ROOT / "constraints/tested.txt").read_text()
                .splitlines() if "==" in line and not line.startswith("#"))
    assert compat.TESTED == (f"jax {pins['jax']} + brax {pins['brax']} + "
                             f"mujoco-mjx {pins['mujoco-mjx']}")


def test_missing_jax_or_brax_is_not_this_checks_business(tmp_path: Path) -> None:
    verdict = stack_verdict([str(tmp_path)])
    assert verdict.gaps == () and verdict.trains


def test_the_installed_stack_trains_and_the_live_patch_matches_the_verdict() -> None:
    # Read from disk in this process, applied live in another: the two must agree, on the
    # tested set (nothing to patch) and on the newest (.ci/run's smoke tier runs this too).
    verdict = stack_verdict()
    assert verdict.trains, verdict.problem
    script = ("import json, jax, jax.numpy as jnp\n"
              "from vramtune.compat import patch_brax\n"
              "applied = patch_brax()\n"
              "assert patch_brax() == applied  # once per process\n"
              "x = jnp.arange(4.0)\n"
              "if 'numpy.clip' in applied:\n"
              "    assert (jnp.clip(x, a_min=1.0, a_max=2.0) == jnp.clip(x, 1.0, 2.0)).all()\n"
              "if 'device_put_replicated' in applied or hasattr(jax, 'device_put_replicated'):\n"
              "    put = jax.device_put_replicated({'w': x}, jax.local_devices())\n"
              "    assert put['w'].shape == (1, 4)\n"
              "print(json.dumps(applied))\n")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)) == set(verdict.patches)


STAND_INS = """
import jax, jax.numpy as jnp, numpy as np
from vramtune import compat
if not hasattr(jax, "device_put_replicated"):
    print("gone")
    raise SystemExit(0)
devices = jax.local_devices()
assert len(devices) == 2
tree = {"w": jnp.arange(6.0).reshape(2, 3), "n": np.int32(7), "s": (jnp.ones(2), 1.5)}
ours = compat._device_put_replicated(tree, devices)
theirs = jax.device_put_replicated(tree, devices)
for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    assert (np.asarray(a) == np.asarray(b)).all()
    assert a.sharding.device_set == b.sharding.device_set
    assert [s.device for s in a.addressable_shards] == [s.device for s in b.addressable_shards]
    assert all((np.asarray(s.data) == np.asarray(t.data)).all()
               for s, t in zip(a.addressable_shards, b.addressable_shards))
# what brax's pmapped training step is then handed: one replica per device
step = jax.pmap(lambda t: jax.tree.map(lambda v: v * 2, t))
assert all((np.asarray(a) == np.asarray(b)).all() for a, b in
           zip(jax.tree.leaves(step(ours)), jax.tree.leaves(step(theirs))))
x = jnp.linspace(-2.0, 2.0, 9)
clip = compat._clip_with_old_keywords(jnp.clip)
for kwargs in ({"a_min": -1.0}, {"a_max": 0.5}, {"a_min": -1.0, "a_max": 1.0}):
    assert (clip(x, **kwargs) == jnp.clip(x, **kwargs)).all()
assert (clip(x, min=0.0) == jnp.clip(x, min=0.0)).all()
print("same")
"""


def test_stand_ins_do_what_the_functions_they_replace_did() -> None:
    """On a jax that still has them (the tested set), the stand-ins against the real thing:
    same values, shapes, dtypes and placement on two real CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", STAND_INS], capture_output=True,
                         text=True, timeout=180, env=env)
    if out.stdout.strip() == "gone":
        pytest.skip("this jax has removed the functions the stand-ins are compared against")
    assert out.returncode == 0 and out.stdout.strip() == "same", out.stderr[-3000:]


def unpatchable_brax(tmp_path: Path) -> Path:
    """A brax on the import path that calls a function the installed jax maps to None in
    its ``_deprecations`` and vramtune has no stand-in for."""
    init = ast.parse((compat._package_dir("jax", None) / "__init__.py").read_bytes())
    names = [n for n in compat._removed_names(init) if n not in compat.PATCHABLE]
    if not names:
        pytest.skip("the installed jax has removed nothing vramtune cannot stand in for")
    site = tmp_path / "site"
    shutil.copytree(installed_brax(), site / "brax",
                    ignore=shutil.ignore_patterns("__pycache__", "*_test.py", "tests"))
    (site / "brax" / "training" / "gone.py").write_text(f"import jax\nX = jax.{names[0]}\n")
    return site


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["trial", "--profile", "quick", "--num-envs", "64"],
    ["sweep", "--profile", "quick", "--json"],
    ["bench", "--profile", "quick", "--sizes", "64", "--baseline", "base.json"],
    ["verify", "no-such-config.yaml"],
])
def test_commands_that_train_stop_before_any_trial(tmp_path: Path, command: list[str]) -> None:
    site = unpatchable_brax(tmp_path)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    out = run_cli(*command, env={"PYTHONPATH": path}, cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vramtune: error: jax ") \
        and "cannot train: brax calls jax." in lines[0], out.stderr
    assert out.stdout == ""
    assert not (tmp_path / "vramtune-runs").exists()  # nothing ran, nothing was written


def test_help_still_works_on_a_stack_that_cannot_train(tmp_path: Path) -> None:
    path = os.pathsep.join([str(unpatchable_brax(tmp_path)), os.environ.get("PYTHONPATH", "")])
    out = run_cli("sweep", "--help", env={"PYTHONPATH": path}, timeout=120)
    assert out.returncode == 0 and "--gpu-mem" in out.stdout


def test_doctor_leads_with_the_pair_and_names_a_problem(tmp_path: Path) -> None:
    from vramtune.cli.doctor_cmd import doctor_text
    from vramtune.measure.doctor import diagnose

    report = diagnose(run_cap_probe=False,
                      import_path=[str(unpatchable_brax(tmp_path)), *sys.path])
    text = doctor_text(report)
    assert text.splitlines()[0].startswith("stack: jax ") and "cannot train" in text.splitlines()[0]
    assert any("cannot train: brax calls jax." in p for p in report.problems)
    assert "no problems found" not in text


def test_require_trainable_stack_raises_one_line(tmp_path: Path) -> None:
    site = unpatchable_brax(tmp_path)
    with pytest.raises(UserError, match="cannot train: brax calls jax"):
        compat.require_trainable_stack([str(site), *sys.path])
