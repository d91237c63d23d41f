"""Backend compiles of quick's training at 64 envs, with and without the ledger's count.

    python compile_count.py off|on    (JAX_PLATFORMS=cpu; PYTHONPATH=src for a venv whose
                                       vramtune is not this checkout)
"""

from __future__ import annotations

import sys

import jax

from vramtune.compat import patch_brax
from vramtune.measure.ledger import LedgerWatch
from vramtune.workload.build import build_environment, network_factory
from vramtune.workload.profile import load_profile


def main(mode: str) -> None:
    patch_brax()
    from brax.training.agents.ppo import train as ppo

    durations: list[float] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, seconds, **_: durations.append(seconds)
        if event == "/jax/core/compile/backend_compile_duration" else None)
    profile, n = load_profile("quick"), 64
    env, extra = build_environment(profile, n)
    kwargs = {**profile.ppo, **extra, "batch_size": 64, "num_minibatches": 4}
    watch = None
    if mode == "on":
        watch = LedgerWatch(num_envs=n, batch_size=64, num_minibatches=4, unroll_length=10,
                            action_size=env.action_size, on_gpu=False, devices=1,
                            bootstrap_on_timeout=False)
        watch.install(jax)
    ppo.train(env, num_timesteps=64 * 4 * 10 * 20 * 3, num_evals=4, num_envs=n,
              episode_length=profile.episode_length, network_factory=network_factory(profile),
              **kwargs)
    print(jax.__version__, mode, "backend compiles:", len(durations),
          f"compile s: {sum(durations):.1f}", watch.fields() if watch else "")


if __name__ == "__main__":
    main(sys.argv[1])
