"""Versions as recorded beside every measurement."""

from __future__ import annotations

import sys

from vramtune import machine


def test_installed_versions_come_from_metadata():
    found = machine.versions()
    assert found["python"].count(".") == 2
    assert found["vramtune"] and "(source)" not in found["vramtune"]  # installed editable


def test_a_package_from_a_source_tree_has_its_stated_version(tmp_path, monkeypatch):
    # brax run from a git checkout on PYTHONPATH has no dist-info: its __init__ states it.
    pkg = tmp_path / "vt_source_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import numpy\n__version__ = '0.14.2'\n")
    (tmp_path / "vt_plain_module.py").write_text("__version__ = '1'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert machine._source_version("vt_source_pkg") == "0.14.2"
    assert "vt_source_pkg" not in sys.modules  # read, not imported
    assert machine._source_version("vt_plain_module") is None  # not a package's __init__
    assert machine._source_version("vt_absent") is None


def test_versions_mark_a_source_tree(tmp_path, monkeypatch):
    pkg = tmp_path / "vt_src2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('__version__ = "2.0"\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(machine, "_PACKAGES", {"vt_src2": "vt-src2-not-installed"})
    machine.versions.cache_clear()
    try:
        assert machine.versions()["vt_src2"] == "2.0 (source)"
    finally:
        machine.versions.cache_clear()


def test_a_hostile_init_gives_no_version(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = {
        "vt_multiline": "__version__ = '\nimport os\n'\n",  # no line break inside a version
        "vt_late": "x = 1\n" * 20_000 + "__version__ = '9'\n",  # past the 64 KiB read
        "vt_binary": "\x00\xff\x00 not python",
    }
    for name, text in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(text, errors="surrogateescape")
        assert machine._source_version(name) is None, name
    (tmp_path / "vt_typed").mkdir()
    (tmp_path / "vt_typed" / "__init__.py").write_text('__version__: str = "3.1"\n')
    assert machine._source_version("vt_typed") == "3.1"
    assert machine._source_version("mujoco.mjx") is None  # dotted: never imported to look
