#!/usr/bin/env python
"""A plain brax PPO training, written the way a user would, as ground truth for vramtune.

No vramtune imports, except with --patch-brax: the two lines the README gives users whose
brax calls what their jax removed (`import vramtune.compat; vramtune.compat.patch_brax()`).
It trains vramtune's `quick` profile (brax `fast` env, generalized backend, 4x256 policy and
value networks, the profile's ppo kwargs) with brax's own `ppo.train`, evaluation ON (brax's
default), Warp importable (brax -> mujoco.mjx -> warp, as in any user's process), optionally
under an RLIMIT_DATA cap set before jax is imported.

    python user_train.py --num-envs 1024 --training-steps 100 --budget-bytes 1.2e9

The script runs itself twice: the outer process (the wrapper) starts the training in a
child process (`--child`), samples the child's /proc/PID/status from outside, and classifies
how it ended from its output and exit status (a jax OOM under RLIMIT_DATA on CPU may be a
Python exception, a C++ `std::bad_alloc` abort, or a SIGSEGV). The wrapper prints ONE JSON
line on stdout and exits 0 on ok, 2 on oom, 1 on error; a one-line message goes to stderr.

What one "training step" is (brax 0.14.2, brax/training/agents/ppo/train.py, train()):
  env_step_per_training_step = batch_size * unroll_length * num_minibatches * action_repeat
  num_evals_after_init        = max(num_evals - 1, 1)          # = epochs (progress_fn calls)
  num_training_steps_per_epoch = ceil(num_timesteps / (num_evals_after_init
                                      * env_step_per_training_step * max(num_resets_per_eval, 1)))
  One epoch = jax.lax.scan of training_step, length num_training_steps_per_epoch; after each
  epoch: policy_params_fn, then (run_evals) one evaluation, then progress_fn(env_steps, metrics).
  With num_evals > 1 and run_evals there is also an initial evaluation and progress_fn(0, ...).
  Training steps done = num_evals_after_init * num_training_steps_per_epoch (>= requested).
So this script asks for num_timesteps = training_steps * env_step_per_training_step and
num_evals = epochs + 1, giving exactly `training_steps` steps when epochs divides it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

# --------------------------------------------------------------------------- arguments


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-envs", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: the quick profile's scaling (hold-num-minibatches): "
                        "128 x num_envs/128, rounded up to a multiple Brax accepts")
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--unroll-length", type=int, default=10)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--training-steps", type=int, default=None,
                   help="training steps (default 100); num_timesteps = this x "
                        "batch_size x num_minibatches x unroll_length x action_repeat")
    g.add_argument("--num-timesteps", type=int, default=None)
    p.add_argument("--num-evals", type=int, default=None,
                   help="brax's num_evals; default: 1 + 10 epochs (or 1 + training steps "
                        "if fewer than 10)")
    p.add_argument("--eval", dest="run_evals", action="store_true", default=True)
    p.add_argument("--no-eval", dest="run_evals", action="store_false")
    p.add_argument("--num-eval-envs", type=int, default=128)  # brax default
    p.add_argument("--budget-bytes", type=float, default=None,
                   help="RLIMIT_DATA for the training process (bytes; 1.2e9 ok)")
    # The rest of the quick profile (vramtune/profiles/quick.yaml).
    p.add_argument("--platform", choices=["cpu", "gpu"], default="cpu",
                   help="gpu: JAX's default backend, the pool capped by the XLA_*_MEM_FRACTION "
                        "variable set in the environment, as a user's GPU run")
    p.add_argument("--env", default="fast")
    p.add_argument("--backend", default="generalized")
    p.add_argument("--episode-length", type=int, default=100)
    p.add_argument("--action-repeat", type=int, default=1)
    p.add_argument("--num-updates-per-batch", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=3.0e-4)
    p.add_argument("--entropy-cost", type=float, default=1.0e-2)
    p.add_argument("--discounting", type=float, default=0.97)
    p.add_argument("--normalize-observations", action=argparse.BooleanOptionalAction,
                   default=True)
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256, 256, 256],
                   help="policy and value hidden layer sizes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-interval", type=float, default=0.1)
    p.add_argument("--series-out", default=None,
                   help="also write the wrapper's 0.1 s VmData/VmRSS samples (JSON) here")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--patch-brax", action="store_true",
                   help="before training, vramtune.compat.patch_brax(), as the README tells "
                        "users of brax 0.14.2 on jax >= 0.10")
    p.add_argument("--force-stand-ins", action="store_true",
                   help="benchmarks only: put vramtune's stand-ins in place even where jax "
                        "still has the originals (jax 0.9.2), to measure the patch alone")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.batch_size is None:
        args.batch_size = scaled_batch_size(args.num_envs, args.num_minibatches)
    if args.num_timesteps is None and args.training_steps is None:
        args.training_steps = 100
    return args


def scaled_batch_size(num_envs: int, num_minibatches: int, base_envs: int = 128,
                      base_batch: int = 128) -> int:
    """quick.yaml's `scaling: hold-num-minibatches`: batch_size grows with num_envs to the
    smallest value >= base_batch x num_envs / base_envs with batch_size x num_minibatches a
    multiple of num_envs (Brax asserts it)."""
    step = num_envs // math.gcd(num_minibatches, num_envs)
    target = math.ceil(base_batch * num_envs / base_envs)
    return max(1, math.ceil(target / step)) * step


def plan(args: argparse.Namespace) -> dict:
    per_step = args.batch_size * args.num_minibatches * args.unroll_length * args.action_repeat
    if args.num_timesteps is not None:
        num_timesteps = args.num_timesteps
        wanted = math.ceil(num_timesteps / per_step)
    else:
        wanted = args.training_steps
        num_timesteps = wanted * per_step
    num_evals = args.num_evals if args.num_evals is not None else 1 + min(10, wanted)
    epochs = max(num_evals - 1, 1)
    steps_per_epoch = math.ceil(num_timesteps / (epochs * per_step))
    return dict(env_steps_per_training_step=per_step, num_timesteps=num_timesteps,
                num_evals=num_evals, epochs=epochs, training_steps_per_epoch=steps_per_epoch,
                training_steps=epochs * steps_per_epoch)


# --------------------------------------------------------------------------- /proc sampling

_FIELDS = ("VmData", "VmRSS", "VmPeak", "VmHWM")


def read_status(pid: int | str = "self") -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in _FIELDS:
                    out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        pass
    return out


class Sampler(threading.Thread):
    """Samples VmData/VmRSS of a process every `interval` s; keeps peaks and, optionally, the
    whole series."""

    def __init__(self, pid: int | str, interval: float, keep_series: bool = False):
        super().__init__(daemon=True, name="vm-sampler")
        self.pid, self.interval, self.keep = pid, interval, keep_series
        self.t0 = time.perf_counter()
        self.peak_data = self.peak_rss = 0
        self.seg_peak_data = 0  # peak since the last reset_segment()
        self.series: list[tuple[float, int, int]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def sample(self) -> dict[str, int]:
        s = read_status(self.pid)
        if s:
            with self.lock:
                self.peak_data = max(self.peak_data, s.get("VmData", 0))
                self.peak_rss = max(self.peak_rss, s.get("VmRSS", 0))
                self.seg_peak_data = max(self.seg_peak_data, s.get("VmData", 0))
            if self.keep:
                self.series.append((round(time.perf_counter() - self.t0, 2),
                                    s.get("VmData", 0), s.get("VmRSS", 0)))
        return s

    def reset_segment(self) -> int:
        with self.lock:
            peak, self.seg_peak_data = self.seg_peak_data, 0
        return peak

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            if not self.sample() and self.pid != "self":
                return  # the process is gone


# --------------------------------------------------------------------------- child


def emit(kind: str, **data) -> None:
    sys.stdout.write(f"@@{kind} " + json.dumps(data) + "\n")
    sys.stdout.flush()


def child(args: argparse.Namespace) -> int:
    # The cap and the environment go in before jax is imported, as a user's script would.
    if args.budget_bytes:
        limit = int(args.budget_bytes)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.platform == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    t0 = time.perf_counter()
    sampler = Sampler("self", args.sample_interval)
    sampler.t0 = t0
    threading.stack_size(256 * 1024)  # a thread's stack counts in VmData: keep ours small
    sampler.start()
    threading.stack_size(0)
    p = plan(args)
    emit("plan", **p)

    def mark(event: str, step: int | None = None) -> dict:
        s = sampler.sample()
        rec = dict(t=round(time.perf_counter() - t0, 3), event=event,
                   vmdata=s.get("VmData"), vmrss=s.get("VmRSS"),
                   seg_peak_vmdata=sampler.reset_segment())
        if step is not None:
            rec["env_steps"] = step
            rec["training_steps"] = step // p["env_steps_per_training_step"]
        emit("mark", **rec)
        return rec

    import functools

    import jax
    from brax import envs
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo

    patches: tuple[str, ...] = ()
    if args.patch_brax:
        import vramtune.compat

        patches = vramtune.compat.patch_brax()
    if args.force_stand_ins:
        import jax.numpy as jnp

        from vramtune import compat

        jax.device_put_replicated = compat._device_put_replicated
        jnp.clip = compat._clip_with_old_keywords(jnp.clip)
        patches = ("device_put_replicated", "numpy.clip (forced)")
    emit("versions", jax=jax.__version__, backend=jax.default_backend(),
         warp_imported="warp" in sys.modules and sys.modules["warp"] is not None,
         patched=list(patches))
    mark("imported")
    env = envs.get_environment(args.env, backend=args.backend)
    network_factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=tuple(args.hidden),
        value_hidden_layer_sizes=tuple(args.hidden))
    last_step = [0]

    def progress(step: int, metrics) -> None:
        last_step[0] = int(step)
        rec = mark("progress", int(step))
        sps = metrics.get("training/sps")
        if sps is not None:
            rec["training_sps"] = float(sps)
            emit("sps", t=rec["t"], training_sps=float(sps),
                 training_walltime=float(metrics.get("training/walltime", 0.0)))

    def params_fn(step: int, _make_policy, _params) -> None:
        # brax calls this right after each training epoch, before that epoch's evaluation.
        if step > 0:
            mark("epoch_end", int(step))

    mark("training")
    ppo.train(env, num_timesteps=p["num_timesteps"], num_evals=p["num_evals"],
              num_envs=args.num_envs, episode_length=args.episode_length,
              action_repeat=args.action_repeat, batch_size=args.batch_size,
              num_minibatches=args.num_minibatches, unroll_length=args.unroll_length,
              num_updates_per_batch=args.num_updates_per_batch,
              learning_rate=args.learning_rate, entropy_cost=args.entropy_cost,
              discounting=args.discounting,
              normalize_observations=args.normalize_observations,
              num_eval_envs=args.num_eval_envs, run_evals=args.run_evals, seed=args.seed,
              network_factory=network_factory, progress_fn=progress,
              policy_params_fn=params_fn)
    mark("done")
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # On a GPU the figures a user can read are JAX's own: the pool's peak and its limit.
    stats = (jax.devices()[0].memory_stats() or {}) if args.platform == "gpu" else {}
    emit("final", status="ok", gpu_peak_bytes_in_use=stats.get("peak_bytes_in_use"),
         gpu_peak_pool_bytes=stats.get("peak_pool_bytes"), gpu_bytes_limit=stats.get("bytes_limit"),
         peak_vmdata=sampler.peak_data, peak_rss_getrusage=ru,
         training_steps=last_step[0] // p["env_steps_per_training_step"],
         wall_s=round(time.perf_counter() - t0, 2))
    sys.stdout.flush()
    os._exit(0)  # XLA's teardown adds nothing


# --------------------------------------------------------------------------- wrapper

_OOM = re.compile(r"RESOURCE_EXHAUSTED|Out of memory|out of memory|std::bad_alloc|"
                  r"MemoryError|Cannot allocate memory|Failed to allocate \d+ bytes")
_ALLOC = re.compile(r"(?:Out of memory allocating|allocat\w*) (\d+) bytes")


def classify(code: int, text: str, timed_out: bool) -> tuple[str, str]:
    """(status, one-line message) from the child's exit code and output."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("@@")]
    if timed_out:
        return "error", "timeout"
    if code == 0:
        return "ok", "finished"
    oom_lines = [ln for ln in lines if _OOM.search(ln)]
    if oom_lines:
        return "oom", oom_lines[-1].strip()[:300]
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ \
            else f"signal {-code}"
        # Under RLIMIT_DATA a failed malloc inside XLA can surface as SIGSEGV/SIGABRT
        # without any message: count it as OOM only when a cap was set.
        return "oom?" if name in ("SIGSEGV", "SIGABRT", "SIGBUS") else "error", \
            f"killed by {name}" + (f"; last: {lines[-1].strip()[:200]}" if lines else "")
    errs = [ln for ln in lines if re.match(r"^\w[\w.]*(Error|Exception)\b", ln)]
    return "error", (errs[-1] if errs else (lines[-1] if lines else f"exit {code}"))[:300]


def wrapper(argv: list[str], args: argparse.Namespace) -> int:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    if args.platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    outer = Sampler(proc.pid, args.sample_interval, keep_series=bool(args.series_out))
    outer.t0 = t0
    outer.start()
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(proc.stdout), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        proc.wait()
    reader.join(5)
    outer.stop.set()
    wall = time.perf_counter() - t0
    text = "".join(chunks)
    events: dict[str, list] = {}
    for line in text.splitlines():
        if line.startswith("@@"):
            kind, _, data = line[2:].partition(" ")
            try:
                events.setdefault(kind, []).append(json.loads(data))
            except ValueError:
                pass
    status, message = classify(proc.returncode, text, timed_out)
    if status == "oom?":
        status = "oom" if args.budget_bytes else "error"
    final = (events.get("final") or [{}])[-1]
    p = (events.get("plan") or [{}])[-1]
    marks = events.get("mark", [])
    progress = [m for m in marks if m["event"] == "progress"]
    steps_done = progress[-1]["training_steps"] if progress else 0
    children_maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result = dict(
        status=status, message=message, exit_code=proc.returncode,
        num_envs=args.num_envs, batch_size=args.batch_size,
        num_minibatches=args.num_minibatches, unroll_length=args.unroll_length,
        run_evals=args.run_evals, budget_bytes=int(args.budget_bytes or 0) or None,
        num_timesteps=p.get("num_timesteps"), num_evals=p.get("num_evals"),
        training_steps_per_epoch=p.get("training_steps_per_epoch"),
        training_steps_planned=p.get("training_steps"), training_steps=steps_done,
        wall_s=round(wall, 2),
        peak_rss=final.get("peak_rss_getrusage") or children_maxrss,
        peak_vmdata=max(final.get("peak_vmdata", 0), outer.peak_data),
        peak_vmdata_inside=final.get("peak_vmdata"), peak_vmdata_outside=outer.peak_data,
        versions=(events.get("versions") or [{}])[-1],
        gpu_peak_bytes_in_use=final.get("gpu_peak_bytes_in_use"),
        gpu_peak_pool_bytes=final.get("gpu_peak_pool_bytes"),
        gpu_bytes_limit=final.get("gpu_bytes_limit"),
        sps=[s["training_sps"] for s in events.get("sps", [])],
        # (elapsed s, training step, VmData, VmRSS) at each progress_fn call
        series=[(m["t"], m["training_steps"], m["vmdata"], m["vmrss"]) for m in progress],
        marks=marks,
    )
    if args.series_out:
        with open(args.series_out, "w") as f:
            json.dump(dict(result=result, samples=outer.series), f)
    print(json.dumps(result), flush=True)
    if status != "ok":
        print(f"user_train: {status}: {message}", file=sys.stderr)
    return {"ok": 0, "oom": 2}.get(status, 1)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    return wrapper(argv, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
