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
