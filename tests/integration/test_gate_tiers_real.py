"""The gate's deterministic and normalised tiers on real compiles and real timings."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml

from vramtune.measure.cap import plan_cap
from vramtune.measure.cpu_share import CpuShare
from vramtune.measure.footprint import FootprintProbe
from vramtune.workload.profile import builtin_profiles, load_profile


def _figures(profile_path: str) -> dict:
    prof = load_profile(profile_path)
    probe = FootprintProbe(plan_cap(None, None, None), prof.to_dict(), [(64, 64, 4)],
                           every_size=True, profile_hash=prof.hash).start()
    try:
        found = probe.result(wait_s=300)
    finally:
        probe.close()
    assert found is not None and found.error is None, found
    [size] = found.sizes
    figures = {k: v for k, v in size.__dict__.items() if k != "compile_s"}
    assert figures["temp_bytes"] > 0 and figures["flops"] and figures["bytes_accessed"]
    return figures


@pytest.mark.slow
def test_xla_figures_repeat_exactly_and_move_with_one_layer_width(tmp_path):
    data = yaml.safe_load(builtin_profiles()["quick"].read_text())
    data["name"] = "quick-one-wider"
    data["network"]["policy_hidden_layer_sizes"] = [256, 256, 256, 272]
    wider = tmp_path / "wider.yaml"
    wider.write_text(yaml.safe_dump(data))
    first, second = _figures("quick"), _figures("quick")
    assert first == second  # two processes, the same profile: identical to the byte and flop
    other = _figures(str(wider))
    assert other["argument_bytes"] > first["argument_bytes"]
    assert other["flops"] > first["flops"]


def test_cpu_share_of_a_real_process_follows_its_load():
    """A child busy on one core reads ~1 CPU second per second; one that sleeps reads ~0."""
    for code, lo, hi in (("while True: pass", 0.05, 1.3), ("import time; time.sleep(60)", 0, 0.1)):
        proc = subprocess.Popen([sys.executable, "-c", code])
        try:
            share = CpuShare()
            share.start()
            time.sleep(1.5)
            value = share.stop()
        finally:
            proc.kill()
            proc.wait()
        if hi <= 0.1:
            assert value is None or value < hi
        else:
            assert value is not None and lo < value < hi, value
    assert CpuShare().stop() is None  # never started
