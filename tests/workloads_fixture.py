"""Environment factories a profile names as ``tests.workloads_fixture:<name>``.

Real environments (brax), and factories that fail the ways a user's can: a test imports
nothing from here; the trial child does, by the name in the profile.
"""

from __future__ import annotations

from typing import Any


def make_fast_env(backend: str = "generalized", obs_noise: float = 0.0) -> Any:
    """A user's factory: brax's trivial `fast` env, configured through env_kwargs."""
    from brax import envs

    if obs_noise:
        raise ValueError("this fixture has no noise; env_kwargs did reach the factory")
    return envs.get_environment("fast", backend=backend)


def make_broken_env(**_kwargs: Any) -> Any:
    """A factory whose own code raises, as a user's may on a bad asset path."""
    raise RuntimeError("asset robot.xml not found in /nowhere")


NOT_CALLABLE = 42


_LEAKED: list[bytes] = []


def make_leaking_env(leak_bytes_per_env_step: int = 0, backend: str = "generalized") -> Any:
    """brax's `fast` env whose step leaks host memory through a JAX callback, as a user's env
    that logs every step into a Python list does. Memory grows with env steps taken, so with
    training length and with num_envs: a short trial does not reach the cap, a run ten times
    longer does. Real memory in the trial child under its real RLIMIT_DATA; nothing faked."""
    import jax
    import numpy as np
    from brax import envs

    base = envs.get_environment("fast", backend=backend)

    def leak(x: Any) -> Any:
        batch = int(np.prod(x.shape[:-1])) if x.ndim > 1 else 1
        _LEAKED.append(bytes(leak_bytes_per_env_step * batch))
        return np.asarray(x)

    class Leaking(type(base)):  # type: ignore[misc]
        def step(self, state: Any, action: Any) -> Any:
            state = super().step(state, action)
            obs = jax.pure_callback(leak, jax.ShapeDtypeStruct(state.obs.shape, state.obs.dtype),
                                    state.obs, vmap_method="broadcast_all")
            return state.replace(obs=obs)

    leaking = Leaking.__new__(Leaking)
    leaking.__dict__.update(base.__dict__)
    return leaking


def make_env_with_grandchild(pid_file: str = "") -> Any:
    """brax's `fast` env, after starting a long `sleep` in the trial's process group (as a
    factory that launches a simulator or an asset server does) and writing its PID to
    ``pid_file``: stopping the trial must stop it too."""
    import subprocess

    sleeper = subprocess.Popen(["sleep", "600"])
    if pid_file:
        with open(pid_file, "w") as handle:
            handle.write(str(sleeper.pid))
    return make_fast_env()


def make_env_failing_in_jit() -> Any:
    """brax's `fast` env whose step calls a method an int does not have: the error happens
    while JAX traces the training step, and JAX re-raises it with its own note appended."""
    base = envs_fast()

    class Failing(type(base)):  # type: ignore[misc]
        def step(self, state: Any, action: Any) -> Any:
            (5).reset()  # the user's bug
            return super().step(state, action)

    failing = Failing.__new__(Failing)
    failing.__dict__.update(base.__dict__)
    return failing


def envs_fast() -> Any:
    from brax import envs

    return envs.get_environment("fast", backend="generalized")
