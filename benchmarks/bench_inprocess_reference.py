"""Does a reference computation timed inside the training's own process, between its
epochs, divide out the machine? Each run is one process: brax PPO on `quick` (or the slowed env
of bench_gate.py) at 64 envs for a fixed number of epochs; after every epoch a fixed jitted
computation (a 4 x 256 MLP's value and gradient on a 256-row batch, like quick's networks) runs
for ~50 ms and is timed. Figures per run: training steps/s (brax's own, evaluation excluded),
reference calls/s, and their ratio (medians over epochs). Runs alternate quick / slowed; every
other pair beside a busy loop on one core.

    .venv/bin/python benchmarks/bench_inprocess_reference.py --pairs 4 --out /tmp/inproc

Figures in README.md ("In-process reference").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REF_SECONDS = 0.05


def child(env_kind: str, num_envs: int, epochs: int) -> dict[str, Any]:
    import functools

    import jax
    import jax.numpy as jnp
    from brax import envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo

    sys.path.insert(0, str(HERE / "gate_envs"))
    if env_kind == "slow":
        from slow_fast import make
        env = make()
    else:
        env = envs.get_environment("fast", backend="generalized")

    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    ws = [jax.random.normal(k, (256, 256)) * 0.05 for k in keys[:4]]
    x = jax.random.normal(keys[4], (256, 256))

    @jax.jit
    def reference(ws: list[Any], x: Any) -> Any:
        def loss(ws: list[Any]) -> Any:
            h = x
            for w in ws:
                h = jnp.tanh(h @ w)
            return jnp.mean(h ** 2)
        return jax.value_and_grad(loss)(ws)

    jax.block_until_ready(reference(ws, x))
    t, calls = time.perf_counter(), 0
    while time.perf_counter() - t < 0.2:
        jax.block_until_ready(reference(ws, x))
        calls += 1
    per_epoch = max(1, int(calls * REF_SECONDS / 0.2))
    sps: list[float] = []
    refs: list[float] = []

    def progress(step: int, metrics: Any) -> None:
        if step <= 0:
            return
        if "training/sps" in metrics:
            sps.append(float(metrics["training/sps"]))
        t0 = time.perf_counter()
        for _ in range(per_epoch):
            out = reference(ws, x)
        jax.block_until_ready(out)
        refs.append(per_epoch / (time.perf_counter() - t0))

    per_step = num_envs * 4 * 10
    network = functools.partial(ppo_networks.make_ppo_networks,
                                policy_hidden_layer_sizes=(256,) * 4,
                                value_hidden_layer_sizes=(256,) * 4)
    ppo.train(env, num_timesteps=epochs * per_step, num_evals=epochs + 1, num_envs=num_envs,
              batch_size=num_envs, num_minibatches=4, unroll_length=10, episode_length=100,
              num_updates_per_batch=1, learning_rate=3e-4, entropy_cost=1e-2,
              discounting=0.97, normalize_observations=True, network_factory=network,
              progress_fn=progress, run_evals=False)
    sps, refs = sps[2:], refs[2:]  # the first epochs compile
    ratios = [s / r for s, r in zip(sps, refs, strict=False)]
    return {"env": env_kind, "sps": statistics.median(sps), "ref": statistics.median(refs),
            "ratio": statistics.median(ratios), "epochs": len(sps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/inprocess-reference"))
    parser.add_argument("--child", choices=["quick", "slow"])
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.num_envs, args.epochs)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(args.pairs):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if i % 2 else None
        try:
            for kind in ("quick", "slow"):
                proc = subprocess.run([sys.executable, __file__, "--child", kind, "--num-envs",
                                       str(args.num_envs), "--epochs", str(args.epochs)],
                                      capture_output=True, text=True,
                                      env=dict(os.environ, JAX_PLATFORMS="cpu"))
                row = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 \
                    else {"env": kind, "error": proc.stderr[-300:]}
                row.update(pair=i, busy=busy is not None, load=os.getloadavg()[0])
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
