"""report and compare: what they say of the folders they are given."""

import shutil

from vramtune.cli import app


def test_compare_of_a_parent_with_one_run_names_a_folder_report_reads(corpus, tmp_path, capsys):
    parent = tmp_path / "parent"
    shutil.copytree(corpus / "runs/control-good", parent / "cardA")
    assert app.main(["compare", str(parent)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"see `vramtune report {parent / 'cardA'}`" in err[0], err
    assert app.main(["report", str(parent / "cardA")]) == 0
