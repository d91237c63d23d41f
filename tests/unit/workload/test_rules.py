import pytest

from vramtune.workload.rules import (
    BatchShape,
    ScalingPolicy,
    iter_valid_sizes,
    lr_scaling_hint,
    nearest_fixes,
    nearest_valid,
    scale_batch,
    violations,
)


def test_valid_config_has_no_violations():
    assert violations(8192, 256, 32) == []
    assert violations(4096, 2048, 32, device_count=8) == []


def test_batch_rule_explained_in_plain_words():
    (v,) = violations(3000, 256, 32)
    assert v.rule == "batch_size * num_minibatches % num_envs == 0"
    assert "8192" in v.explanation and "3000" in v.explanation


def test_num_envs_above_product_says_it_can_never_exceed():
    (v,) = violations(16384, 256, 32)
    assert "can never exceed" in v.explanation


def test_device_count_rule():
    rules = [v.rule for v in violations(100, 100, 1, device_count=8)]
    assert rules == ["num_envs % device_count == 0"]


def test_non_positive_values():
    assert violations(0, 256, 32)[0].rule == "num_envs >= 1"


BASE = BatchShape(128, 128, 4)


def test_scaling_keeps_the_base_at_its_own_size():
    for policy in ScalingPolicy:
        assert scale_batch(policy, BASE, 128) == BASE


def test_hold_num_minibatches_grows_batch_size_proportionally():
    assert scale_batch(ScalingPolicy.HOLD_NUM_MINIBATCHES, BASE, 1024) == BatchShape(1024, 1024, 4)
    assert scale_batch(ScalingPolicy.HOLD_NUM_MINIBATCHES, BASE, 64) == BatchShape(64, 64, 4)


def test_hold_minibatch_grows_num_minibatches():
    base = BatchShape(4096, 2048, 32)
    assert scale_batch(ScalingPolicy.HOLD_MINIBATCH, base, 8192) == BatchShape(8192, 2048, 64)
    assert scale_batch(ScalingPolicy.HOLD_MINIBATCH, base, 64) == BatchShape(64, 2048, 1)


def test_hold_env_steps_only_allows_divisors():
    assert scale_batch(ScalingPolicy.HOLD_ENV_STEPS, BASE, 256) == BatchShape(256, 128, 4)
    assert scale_batch(ScalingPolicy.HOLD_ENV_STEPS, BASE, 1024) is None
    assert scale_batch(ScalingPolicy.HOLD_ENV_STEPS, BASE, 100) is None


@pytest.mark.parametrize("policy", list(ScalingPolicy))
@pytest.mark.parametrize("n", [1, 3, 100, 127, 1000, 3000, 8192])
def test_every_scaled_shape_satisfies_the_rule(policy, n):
    shape = scale_batch(policy, BASE, n, device_count=1)
    if shape is not None:
        assert violations(shape.num_envs, shape.batch_size, shape.num_minibatches) == []


def test_device_count_respected_by_scaling():
    assert scale_batch(ScalingPolicy.HOLD_MINIBATCH, BASE, 100, device_count=8) is None
    shape = scale_batch(ScalingPolicy.HOLD_MINIBATCH, BASE, 96, device_count=8)
    assert shape is not None and not violations(96, shape.batch_size, shape.num_minibatches, 8)


def test_nearest_valid_on_both_sides():
    assert nearest_valid(ScalingPolicy.HOLD_ENV_STEPS, BASE, 100) == (64, 128)
    below, above = nearest_valid(ScalingPolicy.HOLD_ENV_STEPS, BASE, 1024, limit=4096)
    assert below == 512 and above is None


def test_valid_sizes():
    assert list(iter_valid_sizes(ScalingPolicy.HOLD_ENV_STEPS, BASE, 100, 300)) == [128, 256]


def test_nearest_fixes_are_all_valid_and_close():
    fixes = nearest_fixes(3000, 256, 32)
    assert 2 <= len(fixes) <= 3
    for fix in fixes:
        assert violations(fix.num_envs, fix.batch_size, fix.num_minibatches) == []
    assert BatchShape(2048, 256, 32) in fixes


def test_lr_hint_only_when_optimisation_changes():
    base = BatchShape(128, 128, 4)
    assert lr_scaling_hint(base, base, 10, 3e-4) is None
    hint = lr_scaling_hint(base, BatchShape(512, 512, 4), 10, 3e-4)
    assert hint is not None and "sqrt(512/128)" in hint and "0.0006" in hint


def test_nearest_valid_is_fast_for_huge_num_envs():
    below, above = nearest_valid(ScalingPolicy.HOLD_ENV_STEPS, BatchShape(64, 64, 4), 10**9,
                                 limit=1024)
    assert below == 256 and above is None
