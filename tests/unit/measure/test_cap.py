import pytest

from vramtune.errors import UserError
from vramtune.machine import mem_fraction_var
from vramtune.measure.cap import DEFAULT_GPU_FRACTION, gpu_fraction, plan_cap

GB = 10**9


def test_no_budget_takes_095_not_jax_075():
    assert gpu_fraction(None, None, 80 * GB) == DEFAULT_GPU_FRACTION == 0.95


def test_emulating_8gb_on_80gb_subtracts_the_overhead():
    assert gpu_fraction(8 * GB, GB // 2, 80 * GB) == pytest.approx(7.5 / 80)


def test_budget_below_overhead_is_a_user_error():
    with pytest.raises(UserError, match="overhead"):
        gpu_fraction(GB // 4, GB // 2, 80 * GB)


def test_budget_above_card_is_capped():
    assert gpu_fraction(100 * GB, 0, 80 * GB) == 1.0


def test_installed_jaxlib_reads_exactly_one_fraction_variable():
    # jaxlib 0.9.x reads XLA_CLIENT_MEM_FRACTION and rejects both being set.
    assert mem_fraction_var() in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")


def test_cpu_cap_is_rlimit_data_with_preallocation_off():
    cap = plan_cap(2 * GB, None, None)
    assert cap.rlimit_data_bytes == 2 * GB and cap.description == "RLIMIT_DATA=2000000000"
    assert cap.env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert not any("MEM_FRACTION" in k for k in cap.env)


def test_no_budget_on_cpu_means_no_cap():
    cap = plan_cap(None, None, None)
    assert cap.rlimit_data_bytes is None and cap.description is None


def test_trials_join_a_batch_only_while_their_caps_fit_the_device():
    from vramtune.measure.executor import may_join

    GB = 10**9
    assert may_join([], 9 * GB, False, 2, 4 * GB)  # the first always starts
    assert may_join([(2 * GB, False)], 2 * GB, False, 2, 4 * GB)
    assert not may_join([(2 * GB, False)], 3 * GB, False, 2, 4 * GB)  # caps over the device
    assert not may_join([(1 * GB, False), (1 * GB, False)], 1 * GB, False, 2, 4 * GB)  # K full
    assert not may_join([(1 * GB, False)], 1 * GB, True, 4, 8 * GB)  # it must run alone
    assert not may_join([(1 * GB, True)], 1 * GB, False, 4, 8 * GB)  # the running one must


def test_parallel_trials_are_bounded_by_the_host_memory_available():
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.executor import LocalExecutor

    small = LocalExecutor(plan_cap(10**9, None, None), parallel=2, standby=False)
    assert small.parallel == 2 and small.parallel_note is None  # 2 x 1 GB fit this host
    huge = LocalExecutor(plan_cap(10**15, None, None), parallel=4, standby=False)
    assert huge.parallel == 1 and "host's available memory" in huge.parallel_note
    uncapped = LocalExecutor(parallel=3, standby=False)
    assert uncapped.parallel == 1 and "without a budget" in uncapped.parallel_note
    assert LocalExecutor(parallel=1).parallel_note is None
