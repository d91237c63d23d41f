"""The compile-only probe on the real CPU backend: brax's own training epoch, compiled at two
sizes and never run, and how it fails when the workload does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vramtune.measure.cap import cpu_cap
from vramtune.measure.footprint import FootprintProbe
from vramtune.workload.profile import load_profile, profile_from_dict

# each test compiles or starts brax's training epoch: not in the fast tier (-m 'not slow')
pytestmark = pytest.mark.slow
QUICK = load_profile("quick")


def _sizes(profile, *sizes):
    return [(n, profile.shape_for(n, 1).batch_size, profile.shape_for(n, 1).num_minibatches)
            for n in sizes]


def test_quick_compiled_at_two_sizes_gives_a_growing_count():
    probe = FootprintProbe(cpu_cap(None), QUICK.to_dict(), _sizes(QUICK, 64, 512),
                           timeout_s=240).start()
    found = probe.result(240)
    assert found is not None and found.error is None, found
    assert found.backend == "cpu" and [s.num_envs for s in found.sizes] == [64, 512]
    small, large = found.sizes
    assert 0 < small.temp_bytes < large.temp_bytes  # rollout and minibatches grow with envs
    assert all(s.compile_s > 0 for s in found.sizes)
    # quick's slope measured on CPU: ~0.23-0.24 MiB per env (benchmarks/README, "Search")
    assert 0.1 * 2 ** 20 < found.bytes_per_env() < 0.5 * 2 ** 20
    probe.close()  # after it finished: nothing left to kill, no error


def test_a_workload_that_fails_to_build_is_an_error_not_a_traceback():
    broken = profile_from_dict({**QUICK.to_dict(), "name": "broken",
                                "env": "tests.workloads_broken_fixture:make_env"}, source="test")
    probe = FootprintProbe(cpu_cap(None), broken.to_dict(), _sizes(broken, 64, 512),
                           timeout_s=120).start()
    found = probe.result(120)
    assert found is not None and found.sizes == ()
    assert "vramtune_no_such_dependency" in found.error and "Traceback" not in found.error
    assert found.bytes_per_env() is None


def test_a_probe_past_its_time_limit_is_killed_and_says_so():
    probe = FootprintProbe(cpu_cap(None), replace(QUICK).to_dict(), _sizes(QUICK, 64, 512),
                           timeout_s=1).start()
    found = probe.result(60)
    assert found is not None and found.error == "no footprint in 1 s"
