"""Enumerating valid batch settings per scaling policy, and fixes that move num_envs."""

from __future__ import annotations

import pytest

from vramtune.workload.rules import (
    BatchShape,
    ScalingPolicy,
    nearest_valid,
    scale_batch,
    suggest_fixes,
    valid_batch_settings,
    violations,
)

BASE = BatchShape(128, 128, 4)


@pytest.mark.parametrize("policy", list(ScalingPolicy))
@pytest.mark.parametrize("n", [64, 128, 256, 1000, 3000])
def test_every_listed_setting_is_valid_and_the_policys_own_comes_first(policy, n):
    shapes = valid_batch_settings(policy, BASE, n, count=5)
    for s in shapes:
        assert s.num_envs == n and not violations(n, s.batch_size, s.num_minibatches)
    assert len(set(shapes)) == len(shapes)
    if shapes:
        assert shapes[0] == scale_batch(policy, BASE, n)


def test_hold_minibatch_keeps_batch_size():
    shapes = valid_batch_settings(ScalingPolicy.HOLD_MINIBATCH, BatchShape(4096, 2048, 32), 8192)
    assert {s.batch_size for s in shapes} == {2048}
    assert shapes[0].num_minibatches == 64


def test_hold_num_minibatches_keeps_num_minibatches():
    shapes = valid_batch_settings(ScalingPolicy.HOLD_NUM_MINIBATCHES, BASE, 1024, count=3)
    assert {s.num_minibatches for s in shapes} == {4} and shapes[0].batch_size == 1024


def test_hold_env_steps_lists_splits_of_the_same_product_or_nothing():
    shapes = valid_batch_settings(ScalingPolicy.HOLD_ENV_STEPS, BASE, 256, count=10)
    assert {s.samples_per_update for s in shapes} == {512}
    assert BatchShape(256, 64, 8) in shapes
    assert valid_batch_settings(ScalingPolicy.HOLD_ENV_STEPS, BASE, 300) == []
    assert nearest_valid(ScalingPolicy.HOLD_ENV_STEPS, BASE, 300) == (256, 512)


def test_device_count_respected():
    assert valid_batch_settings(ScalingPolicy.HOLD_MINIBATCH, BASE, 100, device_count=8) == []
    for s in valid_batch_settings(ScalingPolicy.HOLD_MINIBATCH, BASE, 96, device_count=8):
        assert not violations(96, s.batch_size, s.num_minibatches, 8)


def test_suggest_fixes_moves_num_envs_when_devices_demand_it():
    fixes = suggest_fixes(8192, 256, 32, device_count=3)
    assert len(fixes) == 3
    for f in fixes:
        assert not violations(f.num_envs, f.batch_size, f.num_minibatches, 3)
    assert BatchShape(9216, 256, 36) in fixes  # round numbers beat 8160 x 255


def test_suggest_fixes_keeps_nearest_fixes_when_enough():
    assert BatchShape(2048, 256, 32) in suggest_fixes(3000, 256, 32)
