"""write_atomic: a reader sees the old file or the new one, and no temporary is left."""

from __future__ import annotations

import pytest

from vramtune.results.files import write_atomic


def test_write_atomic_replaces_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("old")
    write_atomic(path, '{"new": 1}\n')
    assert path.read_text() == '{"new": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, None)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]
