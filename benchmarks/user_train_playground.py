#!/usr/bin/env python
"""A plain Playground PPO training from an emitted config, written the way a user would.

No vramtune imports. It reads the YAML ``vramtune emit-config`` wrote (brax format: the
``environment`` block with ``env_kwargs``, then ``ppo`` and ``network``), loads the
Playground env with those config overrides (``registry.load(name, config_overrides=...)``),
and trains it with brax's ``ppo.train`` and Playground's ``wrapper.wrap_for_brax_training``,
as Playground's ``learning/train_jax_ppo.py`` does, for ``--training-steps`` training steps.

MJX-Warp says an overflow the way a user meets it: a line printed by the kernel each step
("nefc overflow - please increase njmax beyond N", "narrowphase overflow - please increase
... naconmax beyond N"; mujoco_warp ``_src/forward.py``). Run it as a subprocess and read its
output (those lines come from C, past Python's sys.stdout):

    python user_train_playground.py tuned.yaml --training-steps 100 2>&1 | grep overflow
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

import yaml


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="the YAML emit-config wrote (brax format)")
    parser.add_argument("--training-steps", type=int, default=100)
    args = parser.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    environment, ppo_kwargs = cfg["environment"], dict(cfg["ppo"])
    name = environment["env"].split(":", 1)[1]

    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo
    from mujoco_playground import registry, wrapper

    overrides = dict(environment.get("env_kwargs") or {})
    if environment.get("impl"):
        overrides["impl"] = environment["impl"]
    env = registry.load(name, config_overrides=overrides)
    network = dict(cfg.get("network") or {})
    for key in ("policy_hidden_layer_sizes", "value_hidden_layer_sizes"):
        if key in network:
            network[key] = tuple(network[key])
    per_step = (ppo_kwargs["batch_size"] * ppo_kwargs["num_minibatches"]
                * ppo_kwargs["unroll_length"] * ppo_kwargs.get("action_repeat", 1))
    start = time.perf_counter()
    ppo.train(env, num_timesteps=args.training_steps * per_step, num_evals=2,
              wrap_env_fn=wrapper.wrap_for_brax_training,
              network_factory=functools.partial(ppo_networks.make_ppo_networks, **network),
              **ppo_kwargs)
    print(f"trained {args.training_steps} training steps of {name} at num_envs="
          f"{ppo_kwargs['num_envs']} with {overrides} in {time.perf_counter() - start:.0f} s",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
