"""emit-config writes where it is told, and without -o only inside the run it read."""

import shutil

import pytest

from tests.fuzz_corpus import Corpus
from vramtune.cli import app


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    Corpus(root).runs()
    return root


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
