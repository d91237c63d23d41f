"""The ledger's count in the child, on real jitted functions named as brax names them."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from vramtune.measure.ledger import LedgerWatch, transition_bytes_per_env


class TrainingState(NamedTuple):  # brax ppo/train.py's fields
    optimizer_state: jax.Array
    params: jax.Array
    normalizer_params: jax.Array
    env_steps: jax.Array


class State(NamedTuple):  # a batched env state: obs, reward, done, info
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    info: dict


def _watch(epoch_steps: int | None = 3) -> LedgerWatch:
    peaks = iter([100, 150])  # the peak so far, read before and after the epoch's compile
    return LedgerWatch(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5,
                       action_size=3, on_gpu=False, devices=1, bootstrap_on_timeout=False,
                       epoch_steps=epoch_steps, peak_so_far=lambda: next(peaks))


def test_the_roles_are_counted_from_the_first_call_s_arguments_without_a_second_compile():
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, _d, **_kw: compiles.append(event)
        if event == "/jax/core/compile/backend_compile_duration" else None)
    watch = _watch()
    saved = jax.jit, jax.pmap
    try:
        watch.install(jax)

        def training_epoch(ts, state, key):
            def step(steps, _):  # brax's scan over training steps, stacking its metrics
                return steps + 1, (jnp.ones((2, 4)) * steps, jnp.float32(1))
            steps, (metrics, other) = jax.lax.scan(step, ts.env_steps, (), length=3)
            return (ts._replace(env_steps=steps), state,
                    jnp.sum(state.obs) + jnp.mean(metrics) + jnp.mean(other))

        epoch = jax.pmap(training_epoch)
        ts = TrainingState(jnp.zeros((1, 20)), jnp.zeros((1, 10)), jnp.zeros((1, 2)),
                           jnp.zeros((1,), jnp.int32))
        info = {"truncation": jnp.zeros((1, 8)), "episode_done": jnp.zeros((1, 8)),
                "episode_metrics": {"sum_reward": jnp.zeros((1, 8)), "length": jnp.zeros((1, 8))},
                "first_obs": jnp.zeros((1, 8, 4))}
        state = State(jnp.zeros((1, 8, 4)), jnp.zeros((1, 8)), jnp.zeros((1, 8)), info)
        compiles.clear()
        epoch(ts, state, jnp.zeros((1, 2), jnp.uint32))
        first = len(compiles)
        epoch(ts, state, jnp.zeros((1, 2), jnp.uint32))
        assert len(compiles) == first  # counted once, and the call ran what was compiled
    finally:
        jax.jit, jax.pmap = saved
    f = watch.fields()
    assert watch.error is None
    assert (f["ledger_params_bytes"], f["ledger_optimizer_bytes"],
            f["ledger_normalizer_bytes"]) == (40, 80, 8)
    assert f["ledger_keys_bytes"] == 4 + 8  # env_steps and the key
    assert f["ledger_env_state_bytes"] == 4 * (8 * 4 + 8 + 8 + 8 + 8 + 16 + 32)
    # obs 16 x 2, action 12, reward 4, discount 4, log_prob 4, raw action 12, loc and scale 24,
    # truncation 4, episode_done 4, episode_metrics 8: 108 B; x 8 x 2 x 5 transitions
    assert transition_bytes_per_env(state, 3, jax, num_envs=8, bootstrap_on_timeout=False) == 108
    assert f["ledger_rollout_bytes"] == 108 * 8 * 2 * 5
    assert f["ledger_epoch_temp_bytes"] >= 0 and f["ledger_epoch_outputs_bytes"] >= 0
    assert (f["ledger_peak_before_epoch_compile_bytes"],
            f["ledger_peak_after_epoch_compile_bytes"]) == (100, 150)
    # the scan's length, and what it stacks per step: 2 x 4 float32 and one float32
    assert (f["ledger_epoch_steps"], f["ledger_stacked_bytes_per_step"]) == (3, 36)


def test_a_scan_of_another_length_than_the_epoch_s_is_not_taken_for_it():
    watch = _watch(epoch_steps=5)
    saved = jax.jit, jax.pmap
    try:
        watch.install(jax)

        def training_epoch(ts, state, key):
            steps, _ = jax.lax.scan(lambda c, _: (c + 1, c), ts, (), length=3)
            return steps, state, key

        state = State(jnp.zeros((8, 4)), jnp.zeros(8), jnp.zeros(8), {})
        jax.jit(training_epoch)(jnp.int32(0), state, jnp.zeros(2, jnp.uint32))
    finally:
        jax.jit, jax.pmap = saved
    assert "ledger_stacked_bytes_per_step" not in watch.fields()
    assert watch.error is not None and "3 long, not the 5" in watch.error


def test_the_evaluation_s_phase_is_read_around_its_first_call():
    peaks = iter([10, 20])
    watch = LedgerWatch(num_envs=8, batch_size=8, num_minibatches=2, unroll_length=5,
                        action_size=3, on_gpu=False, devices=1, bootstrap_on_timeout=False,
                        peak_so_far=lambda: next(peaks))
    saved = jax.jit, jax.pmap
    try:
        watch.install(jax)

        def generate_eval_unroll(state, params, key):
            return state * jnp.sum(params)

        out = jax.jit(generate_eval_unroll)(jnp.ones(8), jnp.ones(3), jnp.zeros(2, jnp.uint32))
        assert float(out[0]) == 3.0
    finally:
        jax.jit, jax.pmap = saved
    f = watch.fields()
    assert (f["ledger_peak_before_eval_bytes"], f["ledger_peak_after_eval_bytes"]) == (10, 20)
    assert f["ledger_eval_state_bytes"] == 8 * 4 + 3 * 4


def test_a_call_it_cannot_count_leaves_the_training_alone_and_says_why():
    watch = _watch()
    saved = jax.jit, jax.pmap
    try:
        watch.install(jax)

        def training_epoch(x):  # not brax's arguments: nothing to count
            return x + 1

        assert float(jax.jit(training_epoch)(jnp.float32(1))) == 2.0
    finally:
        jax.jit, jax.pmap = saved
    assert watch.error is not None and watch.error.startswith("training_epoch: ")


def test_jit_s_every_form_still_works_with_the_watch_installed():
    import functools

    saved = jax.jit, jax.pmap
    try:
        _watch().install(jax)
        assert float(jax.jit(static_argnums=0)(lambda n, x: x * n)(3, 2.0)) == 6.0
        assert int(jax.jit(functools.partial(lambda a, b: a + b, 1))(2)) == 3  # no __name__
        assert float(jax.jit(lambda x: x + 1, donate_argnums=())(1.0)) == 2.0
    finally:
        jax.jit, jax.pmap = saved
