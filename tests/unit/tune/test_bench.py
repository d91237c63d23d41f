"""tune.bench.prepare_bench: every input checked, and the baseline read, before any trial."""

from __future__ import annotations

import json

import pytest

from vramtune.errors import UserError
from vramtune.results.baseline import BASELINE_KIND
from vramtune.tune import bench


@pytest.mark.parametrize("sizes, expected", [("64,256", [64, 256]), ("256, 64,256", [256, 64]),
                                             ([64, 128], [64, 128])])
def test_sizes_parse(sizes, expected):
    assert bench.parse_num_envs_list(sizes) == expected


def test_a_size_past_pythons_digit_limit_is_too_large_not_malformed():
    with pytest.raises(UserError, match="at most 16777216") as info:
        bench.parse_num_envs_list("64," + "9" * 5000)
    assert len(str(info.value)) < 300 and "(5,003 characters)" in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"sizes": "64,x"}, "not a whole number"),
    ({"sizes": [True]}, "not a whole number"),
    ({"repeat": 0}, "--repeat"),
    ({"max_xla_increase": "lots"}, "--max-xla-increase"),
    ({"max_speed_drop": "100%"}, "--max-speed-drop"),
    ({"gpu_mem": "1MB"}, "--gpu-mem"),
    ({"timeout_s": -1.0}, "timeout"),
])
def test_bad_inputs_are_one_line_errors_before_the_baseline_is_read(tmp_path, kwargs, message):
    with pytest.raises(UserError, match=message) as info:
        bench.prepare_bench(tmp_path / "missing.json", "quick", **kwargs)
    assert "\n" not in str(info.value)


def test_missing_and_foreign_baselines(tmp_path):
    with pytest.raises(UserError, match="no baseline at"):
        bench.prepare_bench(tmp_path / "missing.json", "quick")
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"kind": BASELINE_KIND, "schema_version": 4}))
    with pytest.raises(UserError, match="schema version 4"):
        bench.prepare_bench(path, "quick")


def test_save_to_a_new_file_needs_no_baseline(tmp_path):
    plan = bench.prepare_bench(tmp_path / "new.json", "quick", sizes="64", repeat=1, save=True,
                             gpu_mem="2GB")
    assert plan.old is None and plan.sizes == (64,) and plan.budget_bytes == 2 * 10**9
    assert plan.thresholds.max_xla_increase == pytest.approx(0.01)
