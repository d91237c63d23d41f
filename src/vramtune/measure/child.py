"""Trial child: ``python -m vramtune.measure.child SPEC.json``. One real, short, jitted ppo.train.

Everything that could hold memory lives and dies here, so each trial's peak is independent
of the last (JAX's pool never shrinks, and an OOM leaves it grown). The memory cap is set
before JAX is imported. Results go to one JSON file, written atomically; progress goes to
stdout as ``@@vramtune {json}`` lines the parent parses.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import signal
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from vramtune.measure.wire import ChildReport, encode_event


def emit(**event: Any) -> None:
    sys.stdout.write(encode_event(**event) + "\n")
    sys.stdout.flush()


def die_with_parent(*, watch_stdin: bool = True) -> None:
    """Make sure a SIGKILLed parent leaves no trial running."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(137)
    if watch_stdin:
        watch_parent_stdin()


def watch_parent_stdin() -> None:
    """Belt and braces: PDEATHSIG follows the parent *thread*; stdin EOF follows the process."""
    if os.environ.get("VRAMTUNE_WATCH_STDIN") != "1":
        return

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except OSError:
            pass
        os._exit(137)

    threading.Thread(target=watch, daemon=True, name="vramtune-parent-watch").start()


def block_warp() -> None:
    """brax imports mujoco.mjx, which imports NVIDIA Warp if installed (~1.2 s of a ~2.4 s
    import) though no brax backend uses it; mjx catches the ImportError."""
    if os.environ.get("VRAMTUNE_IMPORT_WARP") != "1":
        sys.modules.setdefault("warp", None)  # type: ignore[arg-type]


def preimport() -> None:
    """What every trial imports, without touching a device (backends stay uninitialised)."""
    import jax  # noqa: F401
    from brax.training.agents.ppo import train  # noqa: F401

    from vramtune.workload import build  # noqa: F401


class _Enough(Exception):
    """Raised from progress_fn once steady-state throughput is measured."""


_IMPORTLIB = os.path.dirname(importlib.__file__) + os.sep


def _location(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    # importlib's own frames say nothing about which import failed: point at the caller's.
    frames = [f for f in frames if not f.filename.startswith(("<frozen importlib", _IMPORTLIB))
              ] or frames
    if not frames:
        return None
    last = frames[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


def _memory_stats(result: dict[str, Any]) -> None:
    try:
        import jax

        stats = [d.memory_stats() for d in jax.local_devices()]
    except Exception:
        return
    stats = [s for s in stats if s]
    if not stats:
        return  # CPU: the allocator reports nothing; the parent measures RSS instead
    for ours, theirs in (("jax_peak_bytes_in_use", "peak_bytes_in_use"),
                         ("jax_peak_pool_bytes", "peak_pool_bytes"),
                         ("jax_bytes_limit", "bytes_limit")):
        values = [s[theirs] for s in stats if s.get(theirs) is not None]
        if values:
            result[ours] = int(max(values))


def run(spec: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    phase = "import"
    try:
        emit(phase="importing")
        if spec["profile"].get("env", "").startswith("brax:"):
            block_warp()
        import jax

        cache_dir = spec.get("compile_cache_dir")
        if cache_dir:
            jax.config.update("jax_compilation_cache_dir", cache_dir)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
        from brax.training.agents.ppo import train as ppo

        from vramtune.workload.build import build_environment, network_factory
        from vramtune.workload.profile import profile_from_dict

        profile = profile_from_dict(spec["profile"], source=spec["profile"].get("name", "spec"))
        devices = jax.local_devices()
        result.update(backend=jax.default_backend(), device_kind=devices[0].device_kind,
                      device_count=jax.device_count())
        phase = "build_env"
        emit(phase="building")
        environment, extra = build_environment(profile, spec["num_envs"],
                                               lambda info: emit(workload=info))
        phase = "train"
        measure = profile.measure
        num_envs, batch_size = spec["num_envs"], spec["batch_size"]
        num_minibatches = spec["num_minibatches"]
        kwargs = dict(profile.ppo)
        # Evaluation rollouts are not training: they would sit inside the measured intervals.
        # A profile that wants their memory counted says run_evals: true.
        kwargs.setdefault("run_evals", False)
        kwargs.update(extra)
        kwargs.update(batch_size=batch_size, num_minibatches=num_minibatches)
        unroll = int(kwargs.get("unroll_length", 10))
        steps_per_training_step = batch_size * num_minibatches * unroll * profile.action_repeat
        epochs = 1 + measure.warmup_intervals + measure.max_intervals
        marks: list[tuple[float, int]] = []
        start = time.perf_counter()

        def progress(step: int, _metrics: Any) -> None:
            if step <= 0:
                return  # the initial evaluation, before any training
            now = time.perf_counter()
            marks.append((now, int(step)))
            if len(marks) == 1:
                emit(phase="warming up", first_epoch_s=now - start)
            if len(marks) == 1 + measure.warmup_intervals:
                # Everything before steady state is one-off cost: brax compiles its epoch at
                # the first call and again at the second (JAX_LOG_COMPILES shows both).
                result["compile_s"] = now - start
                emit(phase="measuring", compile_s=result["compile_s"])
            if len(marks) <= 1 + measure.warmup_intervals:
                return
            timed = marks[measure.warmup_intervals:]
            intervals = len(timed) - 1
            window = timed[-1][0] - timed[0][0] if intervals > 0 else 0.0
            if intervals >= measure.max_intervals or (
                    intervals >= measure.min_intervals and window >= measure.min_window_s):
                raise _Enough()

        emit(phase="compiling")
        try:
            ppo.train(environment, num_timesteps=epochs * steps_per_training_step
                      * measure.steps_per_epoch, num_evals=epochs + 1, num_envs=num_envs,
                      episode_length=profile.episode_length, action_repeat=profile.action_repeat,
                      network_factory=network_factory(profile), progress_fn=progress, **kwargs)
        except _Enough:
            pass
        timed = marks[measure.warmup_intervals:]
        rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(timed, timed[1:], strict=False)
                 if b[0] > a[0]]
        if len(rates) < measure.min_intervals:
            raise RuntimeError(f"training ended after {len(marks)} progress reports; "
                               f"{measure.min_intervals} steady intervals were needed")
        result.update(status="ok", steps_per_s=statistics.median(rates),
                      measure_window_s=timed[-1][0] - timed[0][0],
                      steps_per_s_min=min(rates), steps_per_s_max=max(rates),
                      measured_intervals=len(rates))
    except BaseException as exc:  # noqa: BLE001 - the record must say what happened
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        lines = [line for line in text.splitlines() if "cpu_aot_loader" not in line]
        result.update(status="error", error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
                      error_message="\n".join(lines[-12:])[-3000:],
                      error_where=f"{phase}: {_location(exc)}")
    _memory_stats(result)
    return result


def _set_limit(limit: int | str | None) -> None:
    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (int(limit), int(limit)))


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "--standby":
        # A warm standby: capped and imported while the previous trial runs, it waits for
        # its spec on stdin, so a sweep does not pay ~1 s of imports per trial.
        _set_limit(os.environ.get("VRAMTUNE_RLIMIT_DATA"))
        die_with_parent(watch_stdin=False)
        if os.environ.get("VRAMTUNE_BLOCK_WARP") == "1":
            block_warp()
        preimport()
        emit(phase="ready")
        line = sys.stdin.readline().strip()
        if not line:
            os._exit(0)  # the parent closed us: no trial came
        watch_parent_stdin()
        spec = json.loads(Path(line).read_text())
    else:
        spec = json.loads(Path(argv[1]).read_text())
        _set_limit(spec.get("rlimit_data_bytes"))
        die_with_parent()
    report = ChildReport(**run(spec))  # an unknown field fails here, not in the parent
    out = Path(spec["result_path"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(report.to_json())
    os.replace(tmp, out)
    sys.stdout.flush()
    # Skip interpreter teardown: XLA's destructors can take seconds and add nothing.
    os._exit(0 if report.status == "ok" else 3)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
