"""A reference speed sampled while each of the bench gate's trials measures: a fixed jitted
computation whose speed depends only on the machine and what else runs on it, never on the
code under test.

A trial's steps/s divided by the reference speed sampled during its measuring window follows
the training code and not the runner: a runner 40% slower today, or a neighbour busy on one of
its cores, slows both alike. Readings taken between trials did not follow the load: on this
shared 2-core machine it changes within seconds, so a reading one second before a trial says
little about the trial's own window. Instead a short call (a few ms on an idle core) runs every
``INTERVAL_S`` beside the trial, a few % of one core: its mean speed over the window is the
share of the machine the trial had. The computation is PPO-shaped (a scan of MLP
forward/backward/update steps in float32, the work a brax epoch spends its time in) so it meets
the same caches, vector units and thread pool. It always runs on the CPU (on a GPU machine it
then follows the host's load, which brax's step launches wait on, and holds no device memory).

``python -P -m vramtune.measure.reference`` is the child: it compiles once and prints a ready
line; then "time" answers one JSON line ``{"calls_per_s": ...}`` over ``MIN_WINDOW_S`` of calls
back to back, and "sample" calls once per ``INTERVAL_S`` until "stop" arrives, then answers the
same line (calls over the time spent in them). The parent side (``ReferenceClock``) imports no
JAX.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from typing import Any

from vramtune.measure.process import _kill_group

WIDTH = 256  # quick's layer width
LAYERS = 4
BATCH = 64
SCAN_STEPS = 2
INTERVAL_S = 0.2  # one call per interval while a trial measures: ~3% of one core
MIN_WINDOW_S = 1.0
MIN_CALLS = 5
READY_TIMEOUT_S = 180.0
# Names the computation and how it is timed: a baseline normalised by another one is not comparable
REFERENCE = (f"jit scan of {SCAN_STEPS} MLP grad steps, {LAYERS}x{WIDTH} float32, batch {BATCH}, "
             f"on the CPU; one call per {INTERVAL_S:g} s during the trial's measuring window")


# --- the child side -------------------------------------------------------------------------

def _computation() -> Any:
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, LAYERS + 1)
    params = [jax.random.normal(k, (WIDTH, WIDTH), jnp.float32) / WIDTH ** 0.5
              for k in keys[:LAYERS]]
    x = jax.random.normal(keys[-1], (BATCH, WIDTH), jnp.float32)

    def loss(ws: list[Any], inputs: Any) -> Any:
        h = inputs
        for w in ws:
            h = jnp.tanh(h @ w)
        return jnp.mean(h ** 2)

    def step(ws: list[Any], _: Any) -> tuple[list[Any], Any]:
        value, grads = jax.value_and_grad(loss)(ws, x)
        return [w - 1e-3 * g for w, g in zip(ws, grads, strict=True)], value

    @jax.jit
    def run(ws: list[Any]) -> tuple[list[Any], Any]:
        return jax.lax.scan(step, ws, None, length=SCAN_STEPS)

    def call() -> None:
        jax.block_until_ready(run(params))

    call()  # compile and warm up
    return call


def _reading(call: Any) -> float:
    calls, started = 0, time.perf_counter()
    while True:
        call()
        calls += 1
        elapsed = time.perf_counter() - started
        if elapsed >= MIN_WINDOW_S and calls >= MIN_CALLS:
            return calls / elapsed


def _sampled(call: Any) -> dict[str, float | int | None]:
    """One call per INTERVAL_S until a line arrives on stdin: calls over the time in them."""
    spent, calls = 0.0, 0
    while not select.select([sys.stdin], [], [], INTERVAL_S)[0]:
        t = time.perf_counter()
        call()
        spent += time.perf_counter() - t
        calls += 1
    sys.stdin.readline()  # "stop"
    return {"calls_per_s": calls / spent if calls else None, "calls": calls}


def main(argv: list[str]) -> int:
    from vramtune.measure.child import die_with_parent

    die_with_parent(watch_stdin=False)
    call = _computation()
    print(json.dumps({"ready": True}), flush=True)
    while True:
        line = sys.stdin.readline()
        if line.strip() == "time":
            print(json.dumps({"calls_per_s": _reading(call)}), flush=True)
        elif line.strip() == "sample":
            print(json.dumps(_sampled(call)), flush=True)
        else:
            return 0


# --- the parent side ------------------------------------------------------------------------

def _command() -> list[str]:
    return [sys.executable, "-P", "-m", "vramtune.measure.reference"]


class ReferenceClock:
    """The reference child, started once (it compiles once) and held for a whole bench.

    ``start()`` (from any thread: a trial's event reader calls it when the trial starts
    measuring) begins sampling, ``stop()`` ends it and returns the speed, None when nothing was
    sampled. A child that fails makes every later reading None (the normalised tier is then
    n/a, noted), never the gate's failure."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {k: v for k, v in env.items() if k != "VRAMTUNE_WATCH_STDIN"}
        self.env["JAX_PLATFORMS"] = "cpu"
        for name in ("CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
            self.env.pop(name, None)
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._sampling = False
        self.error: str | None = None

    def open(self) -> None:
        """Start the child and wait for its compile (before the first trial)."""
        try:
            self._proc = subprocess.Popen(_command(), stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True, env=self.env, start_new_session=True)
            line = _readline(self._proc, READY_TIMEOUT_S)
            if not line.strip() or not json.loads(line).get("ready"):
                raise ValueError(f"no ready line: {line.strip()[:200]!r}")
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.error = f"the reference computation failed: {exc}"[:300]
        self.close()

    def _send(self, command: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def start(self) -> None:
        with self._lock:
            if self._proc is None or self._sampling:
                return
            try:
                self._send("sample")
                self._sampling = True
            except (OSError, ValueError) as exc:
                self._fail(exc)

    def stop(self) -> float | None:
        with self._lock:
            if self._proc is None or not self._sampling:
                return None
            self._sampling = False
            try:
                self._send("stop")
                return _parse(_readline(self._proc, 60.0))
            except (OSError, ValueError) as exc:
                self._fail(exc)
                return None

    def reading(self) -> float | None:
        """calls/s with the calls back to back over MIN_WINDOW_S (a test's figure)."""
        with self._lock:
            if self._proc is None:
                return None
            try:
                self._send("time")
                return _parse(_readline(self._proc, 60.0))
            except (OSError, ValueError) as exc:
                self._fail(exc)
                return None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            _kill_group(proc)  # type: ignore[arg-type]

    def __enter__(self) -> ReferenceClock:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _readline(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], timeout_s)[0]:
        raise ValueError(f"no answer in {timeout_s:g} s")
    return proc.stdout.readline()


def _parse(line: str) -> float | None:
    try:
        value = json.loads(line)["calls_per_s"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(f"no reading from the reference child: {line.strip()[:200]!r}") from None
    if value is None:
        return None
    if not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"reference reading {value!r} is not a positive speed")
    return float(value)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv))
