"""brax's `fast` env doing extra work every step: the detection run's slower training.

A few 256x256 mat-vecs per env step (3 are about 0.2 M multiply-adds, ~10% of what quick's
networks spend per env step) folded into the observation with a zero weight, so nothing is
kept beside the env state and the peak memory stays quick's."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from brax import envs
from brax.envs.base import Wrapper

WIDTH = 256


class SlowStep(Wrapper):
    def __init__(self, env: Any, matvecs: int) -> None:
        super().__init__(env)
        self.matvecs = matvecs

    def step(self, state: Any, action: Any) -> Any:
        state = self.env.step(state, action)
        w = jnp.eye(WIDTH, dtype=jnp.float32) * 0.5 + 0.01
        h = jnp.resize(state.obs, (WIDTH,))
        for _ in range(self.matvecs):
            h = jnp.tanh(w @ h)
        return state.replace(obs=state.obs + 0.0 * jnp.sum(h))


def make(matvecs: int = 3) -> Any:
    return SlowStep(envs.get_environment("fast", backend="generalized"), int(matvecs))
