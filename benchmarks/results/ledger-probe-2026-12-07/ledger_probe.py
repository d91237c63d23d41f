"""Feasibility probe for issue 55 item 1 (a per-trial memory ledger), without changing brax.

Usage: nice -n 10 /work/main/.venv/bin/python /tmp/ledger/ledger_probe.py NUM_ENVS

Trains brax PPO on `quick` (brax `fast`, generalized) for 3 epochs of 2 training steps with
evaluation on, and:
  * wraps jax.pmap / jax.jit (as vramtune.measure.footprint._intercept does) so that the
    functions brax names `training_epoch` and `generate_eval_unroll` still run, but before each
    call with a new argument signature we `.lower(*args).compile()` and read
    `memory_analysis()`; jax's backend-compile events are counted per function to see whether
    that costs a second XLA compile;
  * at each training_epoch call (a step boundary: its arguments ARE the trainer's
    TrainingState and env State) sums jax.live_arrays() by role, by array identity;
  * in progress_fn does the same with the identities last seen (and says how many matched);
  * computes the rollout buffer per env from the spaces (formula) and checks it against
    jax.eval_shape of brax's own acting.generate_unroll with PPO's extra_fields.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

NUM_ENVS = int(sys.argv[1]) if len(sys.argv) > 1 else 64
NUM_MINIBATCHES = 4
BATCH_SIZE = NUM_ENVS  # quick's hold-num-minibatches: 4 unrolls of num_envs per training step
UNROLL = 10
EPISODE = 100
HIDDEN = (256, 256, 256, 256)
STEPS_PER_EPOCH = 2
EPOCHS = 3


def vm(field: str) -> int | None:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def mib(b: float | None) -> str:
    return "n/a" if b is None else f"{b / 2**20:9.3f} MiB"


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from vramtune.compat import patch_brax  # noqa: E402

patch_brax()
from brax import envs  # noqa: E402
from brax.training import acting  # noqa: E402
from brax.training.acme import running_statistics, specs  # noqa: E402
from brax.training.agents.ppo import networks as ppo_networks  # noqa: E402
from brax.training.agents.ppo import train as ppo  # noqa: E402

# --- compile events per function (jax/_src/dispatch.py: BACKEND_COMPILE_EVENT) -----------
compiles: list[tuple[str, float]] = []


def _on_event(event: str, duration: float, **kw) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        compiles.append((str(kw.get("fun_name")), duration))


jax.monitoring.register_event_duration_secs_listener(_on_event)

# --- roles by identity ----------------------------------------------------------------------
import gc  # noqa: E402
import types as _types  # noqa: E402

held: dict[str, list] = {}  # role -> the arrays themselves (strong refs: no id reuse)


def roles_now() -> dict[int, str]:
    return {id(x): r for r, xs in held.items() for x in xs}


def leaves(tree):
    return [x for x in jax.tree_util.tree_leaves(tree) if isinstance(x, jax.Array)]


def set_roles(tree, role: str) -> None:
    held[role] = leaves(tree)  # replaces what that role held before


def holder(a, skip) -> str:
    """Who keeps an array alive: the first frame / named object up the referrer graph."""
    seen, frontier = {id(skip), id(held)}, [(a, "")]
    for _ in range(4):
        nxt = []
        for obj, path in frontier:
            for r in gc.get_referrers(obj):
                if id(r) in seen or r is frontier or r is nxt:
                    continue
                seen.add(id(r))
                if isinstance(r, _types.FrameType):
                    return f"frame {r.f_code.co_name}:{r.f_lineno} {path}"
                name = type(r).__name__
                if name not in ("list", "dict", "tuple", "cell"):
                    return f"{type(r).__module__}.{name} {path}"
                nxt.append((r, name + "<" + path))
        frontier = nxt[:40]
    return "?"


def nbytes(a: jax.Array) -> int:
    # per-device shards summed (one CPU device here); a deleted array has none
    return sum(s.data.nbytes for s in a.addressable_shards)


def ledger(where: str) -> dict:
    by_role: dict[str, int] = {}
    other_shapes: dict[str, int] = {}
    n = 0
    roles = roles_now()
    live = jax.live_arrays()
    example: dict[str, object] = {}
    for a in live:
        if a.is_deleted():
            continue
        n += 1
        role = roles.get(id(a), "other")
        b = nbytes(a)
        by_role[role] = by_role.get(role, 0) + b
        if role == "other":
            k = f"{a.dtype}{list(a.shape)}"
            other_shapes[k] = other_shapes.get(k, 0) + b
            example.setdefault(k, a)
    total = sum(by_role.values())
    top_other = sorted(other_shapes.items(), key=lambda kv: -kv[1])[:6]
    print(f"\n[ledger @ {where}] {n} live arrays, {mib(total)} in all;"
          f" VmData {mib(vm('VmData'))}, VmHWM(RSS peak) {mib(vm('VmHWM'))}")
    for r in sorted(by_role, key=lambda r: -by_role[r]):
        print(f"   {r:<28}{mib(by_role[r])}  ({by_role[r]} B)")
    print(f"   largest 'other': {top_other}")
    for k, _ in top_other[:3]:
        print(f"      {k} held by: {holder(example[k], live)}")
    del live, example
    return by_role


analyses: dict[str, list[dict]] = {}
snapshots: list[tuple[str, dict]] = []


def _sig(args) -> tuple:
    return tuple((x.shape, str(x.dtype), str(x.sharding), getattr(x, "weak_type", None))
                 for x in leaves(args))


def analyse(name: str, staged, args) -> None:
    n_before = len(compiles)
    t = time.perf_counter()
    compiled = staged.lower(*args).compile()
    dt = time.perf_counter() - t
    m = compiled.memory_analysis()
    fields = {k: getattr(m, k) for k in dir(m) if not k.startswith("_")
              and isinstance(getattr(m, k), int)}
    fields["lower_compile_s"] = round(dt, 2)
    fields["backend_compiles_during_lower_compile"] = [c[0] for c in compiles[n_before:]]
    analyses.setdefault(name, []).append(fields)
    print(f"\n[memory_analysis {name} #{len(analyses[name])}] " + json.dumps(fields))


def intercept() -> None:
    for api in ("pmap", "jit"):
        original = getattr(jax, api)

        def wrapped(fun=None, *a, _original=original, **kw):
            staged = _original(fun, *a, **kw)
            name = getattr(fun, "__name__", None)
            if name not in ("training_epoch", "generate_eval_unroll"):
                return staged
            seen: set = set()
            calls = {"n": 0}

            def call(*args, **kwargs):
                calls["n"] += 1
                sig = _sig(args)
                if sig not in seen and len(seen) < 3:
                    seen.add(sig)
                    analyse(name, staged, args)
                if name == "training_epoch":
                    training_state, env_state, _ = args
                    # the step boundary: these arguments are the trainer's state
                    set_roles(training_state.params, "params")
                    set_roles(training_state.optimizer_state, "optimizer_state")
                    set_roles(training_state.normalizer_params, "normalizer")
                    set_roles(training_state.env_steps, "env_steps")
                    set_roles(env_state, "env_state(num_envs)")
                    snapshots.append((f"before training_epoch call {calls['n']}",
                                      ledger(f"before training_epoch call {calls['n']}")))
                else:
                    set_roles(args[0], "eval_state(num_eval_envs)")
                    set_roles(args[1], "params copy for eval (_unpmap)")
                n_before, t_call = len(compiles), time.perf_counter()
                out = staged(*args, **kwargs)
                jax.block_until_ready(out)
                print(f"[call {name} #{calls['n']}] {time.perf_counter() - t_call:.2f} s; backend "
                      f"compiles during the real call: {[c[0] for c in compiles[n_before:]]}")
                if name == "generate_eval_unroll":
                    set_roles(out, "eval_state(num_eval_envs)")  # Evaluator keeps it
                else:
                    set_roles(out[0].params, "params")
                    set_roles(out[0].optimizer_state, "optimizer_state")
                    set_roles(out[0].normalizer_params, "normalizer")
                    set_roles(out[1], "env_state(num_envs)")
                return out
            return call

        setattr(jax, api, wrapped)


intercept()


def progress(step, metrics):
    snapshots.append((f"progress_fn step {step}", ledger(f"progress_fn step {step}")))


def policy_params(step, make_policy, params):
    set_roles(params, "params copy for eval (_unpmap)")


# --- rollout buffer from the spaces --------------------------------------------------------
raw = envs.get_environment("fast", backend="generalized")
obs_size, act_size = raw.observation_size, raw.action_size
f32 = 4
# Transition (brax/training/types.py:46) as PPO fills it (acting.py:41-51, train.py:573):
per_env_step = {
    "observation": obs_size * f32,
    "action": act_size * f32,
    "reward": f32,
    "discount": f32,
    "next_observation": obs_size * f32,
    "policy_extras.log_prob": f32,
    "policy_extras.raw_action": act_size * f32,
    "policy_extras.distribution_params": 2 * act_size * f32,  # tanh-normal loc+scale
    "state_extras.truncation": f32,
    "state_extras.episode_metrics.sum_reward": f32,
    "state_extras.episode_metrics.length": f32,
    # + one f32 per env metric in state.metrics (none for `fast`)
    "state_extras.episode_done": f32,
}
formula = sum(per_env_step.values())
unrolls = BATCH_SIZE * NUM_MINIBATCHES // NUM_ENVS
per_env_formula = unrolls * UNROLL * formula

wrapped_env = envs.training.wrap(raw, episode_length=EPISODE, action_repeat=1)
net = ppo_networks.make_ppo_networks((obs_size,) if False else obs_size, act_size,
                                     preprocess_observations_fn=running_statistics.normalize,
                                     policy_hidden_layer_sizes=HIDDEN,
                                     value_hidden_layer_sizes=HIDDEN)
make_policy = ppo_networks.make_inference_fn(net)
key = jax.random.PRNGKey(0)
params_s = jax.eval_shape(lambda: (
    running_statistics.init_state(specs.Array((obs_size,), jnp.dtype("float32"))),
    net.policy_network.init(key), net.value_network.init(key)))


def one_unroll(state, params, k):
    return acting.generate_unroll(wrapped_env, state, make_policy(params), k, UNROLL,
                                  extra_fields=("truncation", "episode_metrics",
                                                "episode_done"))[1]


state_s = jax.eval_shape(wrapped_env.reset, jax.random.split(key, NUM_ENVS))
data_s = jax.eval_shape(one_unroll, state_s, params_s, key)
traced = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(data_s))
per_env_traced = unrolls * traced / NUM_ENVS
print(f"obs_size={obs_size} action_size={act_size}; per env per unroll step: {formula} B "
      f"{per_env_step}")
print("eval_shape of generate_unroll:",
      {jax.tree_util.keystr(p): (x.shape, str(x.dtype))
       for p, x in jax.tree_util.tree_leaves_with_path(data_s)})
print(f"rollout buffer per env per training step: formula {unrolls} x {UNROLL} x {formula} = "
      f"{per_env_formula} B; eval_shape {per_env_traced:.0f} B; whole buffer "
      f"{unrolls * traced} B = B*M*T*{formula} = {BATCH_SIZE * NUM_MINIBATCHES * UNROLL * formula}")
n_params = sum(x.size for x in jax.tree_util.tree_leaves(params_s[1:]))
print(f"params from spaces: {n_params} f32 = {n_params * 4} B; adam mu+nu = {2 * n_params * 4} B")
state_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(state_s))
print(f"env state from eval_shape(reset): {state_bytes / NUM_ENVS:.0f} B per env")

# --- the training ---------------------------------------------------------------------------
per_step = BATCH_SIZE * NUM_MINIBATCHES * UNROLL
t0 = time.perf_counter()
ppo.train(raw, num_timesteps=EPOCHS * STEPS_PER_EPOCH * per_step, num_evals=EPOCHS + 1,
          num_envs=NUM_ENVS, episode_length=EPISODE, action_repeat=1,
          batch_size=BATCH_SIZE, num_minibatches=NUM_MINIBATCHES, unroll_length=UNROLL,
          num_updates_per_batch=1, learning_rate=3e-4, entropy_cost=1e-2, discounting=0.97,
          normalize_observations=True,
          network_factory=lambda o, a, preprocess_observations_fn: ppo_networks.make_ppo_networks(
              o, a, preprocess_observations_fn=preprocess_observations_fn,
              policy_hidden_layer_sizes=HIDDEN, value_hidden_layer_sizes=HIDDEN),
          progress_fn=progress, policy_params_fn=policy_params)
print(f"\ntrain wall {time.perf_counter() - t0:.1f} s")
print("backend compiles > 0.3 s, in order (fun_name, s):",
      [(n, round(d, 2)) for n, d in compiles if d > 0.3])
print(f"backend compiles in all: {len(compiles)}")
print(f"VmData end {mib(vm('VmData'))}, VmHWM {mib(vm('VmHWM'))}, VmPeak {mib(vm('VmPeak'))}")
