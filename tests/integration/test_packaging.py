"""Installing vramtune beside a newer jax leaves that jax alone (pip's own resolver, in
--dry-run: nothing is installed), and `python -m vramtune` is the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

NEWER_JAX = "0.10.2"  # newer than constraints/tested.txt's; brax 0.14.2 cannot train on it


@pytest.mark.slow
@pytest.mark.registry
def test_install_beside_a_newer_jax_keeps_it(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
             "--quiet", "--report", str(report), str(ROOT), f"jax=={NEWER_JAX}",
             f"jaxlib=={NEWER_JAX}"],
            capture_output=True, text=True, timeout=240, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.skip("the package registry did not answer pip's resolver within 240 s")
    text = out.stdout + out.stderr
    if out.returncode != 0:
        # A version conflict is the failure this test exists for; anything else (no network,
        # no such release on this index) says nothing about vramtune's requirements.
        assert "ResolutionImpossible" not in text and "conflicting dependencies" not in text, text
        errors = [line for line in text.splitlines() if line.startswith("ERROR")]
        pytest.skip(f"the registry could not serve the dry run: {(errors or [text])[-1][:200]}")
    installed = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                 for item in json.loads(report.read_text())["install"]}
    assert installed["jax"] == NEWER_JAX and installed["jaxlib"] == NEWER_JAX
    assert "vramtune" in installed and "brax" in installed


def test_python_dash_m_vramtune_is_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "vramtune", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Usage: vramtune" in out.stdout and "sweep" in out.stdout
    version = subprocess.run([sys.executable, "-m", "vramtune", "--version"],
                             capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("vramtune ")


def test_package_is_typed() -> None:
    assert (ROOT / "src" / "vramtune" / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()
