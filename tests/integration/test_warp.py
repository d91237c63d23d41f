"""MJX-Warp for real: Playground's BallInCup on Warp in real trial subprocesses on the CPU.

Warp steps 15-100x slower on a CPU than MJX's JAX path (tens of env steps/s), so the profile is
Playground's own with tiny settings: 4 envs, a 10-step episode, one unroll of 5 per training
step, resets once per evaluation. The session's first Warp trial builds Warp's kernels (its
kernel cache is under the session's private XDG_CACHE_HOME); the next ones load them.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import shared_compile_cache
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.records import Status, TrialResult
from vramtune.workload.profile import builtin_profiles, profile_from_dict

pytestmark = pytest.mark.slow

TINY = {"episode_length": 10, "num_envs": 4, "start_envs": 4, "max_envs": 16,
        "scaling": "hold-num-minibatches"}
TINY_PPO = {"batch_size": 4, "num_minibatches": 1, "unroll_length": 5, "num_eval_envs": 4,
            "num_resets_per_eval": 1, "num_updates_per_batch": 1}
TINY_MEASURE = {"min_window_s": 1.0, "max_window_s": 3.0, "min_training_steps": 2,
                "contact_steps": 20}


def tiny_cup(**env_kwargs: Any) -> dict[str, Any]:
    """playground-ballincup-warp with tiny settings (and these Playground config keys)."""
    data = yaml.safe_load(builtin_profiles()["playground-ballincup-warp"].read_text())
    data.update(TINY, name="cup-tiny")
    data["ppo"] = {**data["ppo"], **TINY_PPO}
    data["network"] = {"policy_hidden_layer_sizes": [32, 32], "value_hidden_layer_sizes": [32, 32]}
    data["measure"] = TINY_MEASURE
    if env_kwargs:
        data["env_kwargs"] = env_kwargs
    return data


def _trial(data: dict[str, Any], num_envs: int = 4,
           capacities: tuple[tuple[str, int], ...] = ()) -> TrialResult:
    return run_trial(TrialRequest(profile_from_dict(data), num_envs,
                                  compile_cache_dir=shared_compile_cache(),
                                  warp_capacities=capacities))


@pytest.mark.slowest  # builds Warp's kernels on a fresh cache (~45 s) before it trains
def test_a_warp_trial_records_contact_demand_capacities_and_kernel_builds():
    r = _trial(tiny_cup())
    assert r.status is Status.OK, r.error_message
    assert (r.warp_naconmax, r.warp_njmax) == (10_000, 25)  # Playground's BallInCup config
    assert r.warp_probe_steps == 20
    # the string's tendon limit is a constraint row in every world from the first step
    assert r.warp_constraint_rows_per_world_max >= 1
    assert r.warp_constraint_rows_max >= 4  # all four worlds together
    assert 0 <= r.warp_contacts_per_world_max <= r.warp_contacts_max <= r.warp_naconmax
    assert r.warp_overflow == []
    # BallInCup's config sets one solver iteration: a limit, recorded apart, not an overflow
    assert r.warp_solver_limits == ["ITERATIONS"]
    assert r.warp_kernel_cache in ("cold", "warm", "partly warm")
    assert r.warp_kernels_compiled + r.warp_kernels_cached > 0
    assert r.steps_per_s and r.host_peak_data_bytes


def test_a_small_njmax_is_an_overflow_that_names_the_buffer_and_stops_the_search():
    # the capacities a sweep sized reach the env, except where the profile sets its own
    r = _trial(tiny_cup(naconmax=5000), capacities=(("naconmax", 7), ("njmax", 0)))
    assert (r.warp_naconmax, r.warp_njmax) == (5000, 0)
    assert r.status is Status.OVERFLOW, (r.status, r.error_message)
    assert "NEFC" in r.warp_overflow
    assert r.error_message.startswith("MJX-Warp buffer overflow: constraint rows: ")
    assert r.error_message.endswith("njmax 0; raise njmax")
