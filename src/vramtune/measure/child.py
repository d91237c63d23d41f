"""Trial child: ``python -m vramtune.measure.child SPEC.json``. One real, short, jitted ppo.train.

Everything that could hold memory lives and dies here, so each trial's peak is independent
of the last (JAX's pool never shrinks, and an OOM leaves it grown). A memory cap is in force
before JAX is imported (in a warm standby, the standby's own); the spec's, where lower, before
the backend starts. Results go to one JSON file, written atomically; progress goes to
stdout as ``@@vramtune {json}`` lines the parent parses.
"""

from __future__ import annotations

import importlib
import os
import signal
import statistics
import sys
import threading
import time
import traceback
from typing import Any

from vramtune.measure.contacts import (
    CONTACT_STEPS_MAX,
    KernelBuilds,
    mempool_high_bytes,
    probe_contacts,
    warp_impl,
    watch_kernel_builds,
)
from vramtune.measure.counters import ThreadInstructions, per_step
from vramtune.measure.ledger import LedgerWatch
from vramtune.measure.probe import rlimit_data_in_force, runtime_devices, set_rlimit_data
from vramtune.measure.rates import median_interval
from vramtune.measure.wire import (
    CONFIRM_MIN_EVALS,
    MIN_EPOCH_STEPS,
    ChildReport,
    TrialSpec,
    confirm_epoch_steps,
    encode_event,
)
from vramtune.records import MAX_RECORDED_INTERVALS
from vramtune.results.files import write_atomic
from vramtune.workload.sources import parse_source


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
    except (OSError, AttributeError, ImportError, MemoryError):
        pass  # under a tiny cap ctypes cannot load; stdin EOF still ends us
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

    start_small(threading.Thread(target=watch, daemon=True, name="vramtune-parent-watch"))


OWN_THREAD_STACK_BYTES = 256 * 1024


def start_small(thread: threading.Thread) -> threading.Thread:
    """Start one of vramtune's own threads with a 256 KiB stack. A thread's stack is a private
    writable mapping, so RLIMIT_DATA counts it: at the default 8 MiB each, the watcher and the
    sampler put ~16 MiB in the trial's data segment that the user's training never has (part
    of the 35-80 MiB by which trials ran above a plain brax script). The size applies to
    threads started while it is set, so it is put back at once: brax's and XLA's own threads
    keep theirs."""
    previous = threading.stack_size(OWN_THREAD_STACK_BYTES)
    try:
        thread.start()
    finally:
        threading.stack_size(previous)
    return thread


def preimport() -> None:
    """What every trial imports, without touching a device (backends stay uninitialised)."""
    import jax  # noqa: F401
    from brax.training.agents.ppo import train  # noqa: F401

    from vramtune.workload import build  # noqa: F401


class _Enough(Exception):
    """Raised from progress_fn once throughput and memory are both steady."""


class _DataSegment(threading.Thread):
    """Peak VmData of this process, which is what RLIMIT_DATA counts (RSS runs well below it:
    0.1.0 saw OOMs at RSS 941-1037 MiB under a 1144 MiB cap)."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="vramtune-vmdata")
        self.peak_bytes: int | None = None

    def read(self) -> int | None:
        try:
            with open("/proc/self/status", "rb") as status:
                for line in status:
                    if line.startswith(b"VmData:"):
                        value = int(line.split()[1]) * 1024
                        self.peak_bytes = max(value, self.peak_bytes or 0)
                        return value
        except (OSError, ValueError, IndexError):
            return None
        return None

    def run(self) -> None:
        while True:
            try:
                self.read()
            except MemoryError:  # near the cap: the next read may succeed, keep sampling
                pass
            time.sleep(0.02)


def _pool_peak_bytes() -> int | None:
    """GPU: the allocator pool's peak, the figure the memory fraction caps."""
    try:
        import jax

        stats = [d.memory_stats() or {} for d in jax.local_devices()]
    except Exception:
        return None
    values = [s.get("peak_pool_bytes") or s.get("peak_bytes_in_use") for s in stats]
    values = [v for v in values if v is not None]
    return int(max(values)) if values else None


EPOCHS_PER_INTERVAL = 64  # the epoch budget allows intervals this many epochs long


class _Intervals:
    """Per-interval steps/s: whole epochs grouped until an interval holds ``min_s`` seconds of
    training, so that one interval's rate is not one dispatch's noise."""

    def __init__(self, min_s: float) -> None:
        self.min_s = min_s
        self.rates: list[float] = []
        self._steps = 0.0
        self._seconds = 0.0

    def add(self, env_steps: float, seconds: float) -> None:
        self._steps += env_steps
        self._seconds += max(seconds, 0.0)
        if self._seconds >= self.min_s and self._seconds > 0:
            self.rates.append(float(self._steps / self._seconds))
            self._steps = self._seconds = 0.0

    def close(self) -> None:
        """Count a last partial interval when no full one was measured."""
        if not self.rates and self._seconds > 0:
            self.rates.append(self._steps / self._seconds)
        self._steps = self._seconds = 0.0

    def steady(self, tolerance: float) -> bool:
        """The median's 95% interval lies within ±tolerance of it."""
        low, high = median_interval(self.rates)
        if low is None or high is None:
            return False
        mid = statistics.median(self.rates)
        return mid - low <= tolerance * mid and high - mid <= tolerance * mid


def steady(history: list[int | None], intervals: int, tolerance: float = 0.0) -> bool:
    """The capped figure's peak grew by at most ``tolerance`` over the last ``intervals``
    progress calls."""
    if len(history) <= intervals or history[-1] is None or history[-1 - intervals] is None:
        return False
    return history[-1] <= history[-1 - intervals] * (1 + tolerance)


_IMPORTLIB = os.path.dirname(importlib.__file__) + os.sep
_JAX_NOTE = "JAX has removed its internal frames"


def _reported(exc: BaseException) -> BaseException:
    """The exception to report: the user's own, not a JAX wrapper around it. JAX re-raises
    an error from inside a transformation as itself (plus a note), or as one of its own
    errors caused by it; the innermost non-JAX cause says what went wrong."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 20:
        chain.append(chain[-1].__cause__)
    for candidate in chain:
        module = type(candidate).__module__ or ""
        if not module.startswith(("jax", "jaxlib")):
            return candidate
    return exc


def _message(exc: BaseException) -> str:
    """``Type: message`` and the exception's notes, without JAX's note about filtered
    frames (it would be the last line, where a summary looks for the reason)."""
    notes = getattr(exc, "__notes__", None)
    if not isinstance(notes, list):
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    try:
        exc.__notes__ = [n for n in notes if _JAX_NOTE not in str(n)]
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()
    finally:
        exc.__notes__ = notes


def _location(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    # importlib's own frames say nothing about which import failed: point at the caller's.
    frames = [f for f in frames if not f.filename.startswith(("<frozen importlib", _IMPORTLIB))
              ] or frames
    if not frames:
        return None
    last = frames[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


def _allow_imports_from(folder: str | None) -> None:
    """Let a ``package.module:factory`` env be imported from the profile's folder. Appended,
    after JAX and brax are imported: a file there never shadows an installed package. The
    child runs with ``python -P``, so the current directory is not on the path at all."""
    if folder and folder not in sys.path:
        sys.path.append(folder)


def _memory_stats(result: dict[str, Any]) -> None:
    """The allocator's peaks per device, and the largest (budgets are per device)."""
    try:
        import jax

        stats = [d.memory_stats() for d in jax.local_devices()]
    except Exception:
        return
    if not any(stats):
        return  # CPU: the allocator reports nothing; the parent measures RSS instead
    for ours, theirs in (("jax_peak_bytes_in_use", "peak_bytes_in_use"),
                         ("jax_peak_pool_bytes", "peak_pool_bytes"),
                         ("jax_bytes_limit", "bytes_limit")):
        values = [(s or {}).get(theirs) for s in stats]
        values = [int(v) if v is not None else None for v in values]
        known = [v for v in values if v is not None]
        if known:
            result[ours] = max(known)
        if ours != "jax_bytes_limit":
            result[f"{ours}_per_device"] = values


def cap_proof(jax: Any) -> dict[str, Any]:
    """What this process really runs under: backend, devices (kind, the CUDA runtime's UUID
    and total), the allocator's limit per device, the fraction variable and allocator in its
    environment, its RLIMIT_DATA. The parent compares it with the cap it planned."""
    devices = runtime_devices(jax)
    fractions = [f"{k}={os.environ[k]}" for k in ("XLA_CLIENT_MEM_FRACTION",
                                                   "XLA_PYTHON_CLIENT_MEM_FRACTION")
                 if os.environ.get(k)]
    on_gpu = any(d["platform"] == "gpu" for d in devices)
    return {
        "backend": jax.default_backend(),
        "device_kind": devices[0]["kind"] if devices else None,
        "device_count": len(devices),
        "device_uuids": [d.get("uuid") for d in devices] if on_gpu else None,
        "runtime_total_bytes_per_device": ([d.get("runtime_total_bytes") for d in devices]
                                           if on_gpu else None),
        "jax_bytes_limit_per_device": [d.get("bytes_limit") for d in devices] if on_gpu else None,
        "fraction_in_force": ", ".join(fractions) or None,
        "allocator_in_force": os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR"),
        "rlimit_data_bytes": rlimit_data_in_force(),
    }


def _action_size(environment: Any) -> int | None:
    """The env's action size (brax and Playground envs both have ``action_size``)."""
    try:
        size = environment.action_size
    except Exception:  # noqa: BLE001 - unknown: the rollout is then not counted
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def run(spec: TrialSpec) -> dict[str, Any]:
    result: dict[str, Any] = {}
    phase = "import"
    data_segment = _DataSegment()
    kernels: KernelBuilds | None = None
    ledger: LedgerWatch | None = None
    on_warp = False
    # Before JAX starts its thread pools: an inherited counter then counts all of them
    counter: ThreadInstructions | None = ThreadInstructions()
    try:
        emit(phase="importing")
        import jax

        from vramtune.compat import patch_brax

        # brax's released code on a jax that removed what it calls: the stand-ins brax main
        # uses, the same ones the user's training takes (README), named in the record
        result["stack_patches"] = list(patch_brax())

        cache_dir = spec.compile_cache_dir
        if cache_dir:
            jax.config.update("jax_compilation_cache_dir", cache_dir)
            # Every program, not only those that took >= 0.5 s to compile: a PPO run compiles
            # ~75 (the evaluator, the init, many small ones; < 1 MB in all for quick), and
            # with only the slow ones cached a warm trial of quick at 128 envs still spent
            # 6.4 s before training (3.5 s with all of them; 15.2 vs 11.6 CPU-s in all).
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        from brax.training.agents.ppo import train as ppo

        from vramtune.workload.build import build_environment, network_factory
        from vramtune.workload.profile import profile_from_dict

        profile = profile_from_dict(spec.profile, source=spec.profile.get("name", "spec"))
        if spec.env_factory is not None:
            import base64
            import dataclasses

            profile = dataclasses.replace(profile, factory=base64.b64decode(spec.env_factory))
        proof = cap_proof(jax)  # starts the backend
        result.update(proof)
        emit(proof=proof)
        on_cpu = result["backend"] == "cpu"
        if on_cpu:
            start_small(data_segment)
        phase = "build_env"
        emit(phase="building")
        _allow_imports_from(spec.import_path)
        # Playground imports Warp anyway: watch its kernel builds from before the env is put
        # (that may build some). A brax env never needs Warp (its import costs ~1.2 s), and
        # a factory's env is watched from its first step, once it is known to use Warp.
        playground = parse_source(profile.env).kind == "playground"
        kernels = watch_kernel_builds() if playground else None
        environment, extra = build_environment(profile, spec.num_envs,
                                               lambda info: emit(workload=info),
                                               capacities=spec.warp_capacities)
        on_warp = warp_impl(environment)
        if on_warp and kernels is None:
            kernels = watch_kernel_builds()
        phase = "train"
        measure = profile.measure
        num_envs, batch_size = spec.num_envs, spec.batch_size
        num_minibatches = spec.num_minibatches
        # The user's training, as the profile has it: evaluation included (brax's default),
        # because its rollouts hold memory the user's run will hold too.
        kwargs = dict(profile.ppo)
        kwargs.update(extra)
        kwargs.update(batch_size=batch_size, num_minibatches=num_minibatches)
        run_evals = bool(kwargs.get("run_evals", True))
        unroll = int(kwargs.get("unroll_length", profile.unroll_length))
        env_steps_per_training_step = (batch_size * num_minibatches * unroll
                                       * profile.action_repeat)
        fixed_steps = spec.training_steps  # a confirming run: exactly this long
        # Never one step an epoch: that run peaks below the user's (MIN_EPOCH_STEPS).
        steps_per_epoch = max(measure.steps_per_epoch, MIN_EPOCH_STEPS)
        if not on_cpu:
            steps_per_epoch = max(steps_per_epoch, measure.gpu_steps_per_epoch)
        if fixed_steps:
            # Evaluate CONFIRM_EVALS times over the longest run, not after every training
            # step: often enough for the run to end at its floor once memory holds.
            steps_per_epoch = confirm_epoch_steps(fixed_steps)
        # brax trains num_resets_per_eval epochs (a reset of every env after each) between two
        # progress calls, each of ceil(steps / resets) training steps, and its training/sps
        # counts all of them over the last epoch's time (Playground's dm_control configs set
        # 10): a progress call covers a whole multiple of the resets, and the training-only
        # rate is brax's divided by them (a 128-env CartpoleBalance read 10x its speed, and
        # its trial never closed a speed interval until training ran out, 54 s).
        resets = max(int(kwargs.get("num_resets_per_eval") or 0), 1)
        steps_per_epoch = resets * -(-steps_per_epoch // resets)
        if fixed_steps:
            epochs = -(-int(fixed_steps) // steps_per_epoch)
        else:
            # Enough epochs for max_intervals intervals of a few epochs each; the trial stops
            # itself (progress raises) long before on any workload that is not tiny.
            epochs = 1 + measure.warmup_intervals + measure.max_intervals * EPOCHS_PER_INTERVAL
        env_steps_per_epoch = env_steps_per_training_step * steps_per_epoch
        marks: list[tuple[float, float | None]] = []  # (time, training-only sps) per epoch
        history: list[int | None] = []
        state = {"evals": 0, "steps": 0}
        speed = _Intervals(measure.min_interval_s)
        if not on_cpu:  # a GPU's work is the device's, not the instructions that launch it
            counter.close()
            counter = None
        counts: list[int | None] = []  # instructions retired by the process, per epoch measured
        counted_steps: list[float] = []  # env steps done at each of those reads
        start = time.perf_counter()

        def cap_figure() -> int | None:
            if on_cpu:
                data_segment.read()
                return data_segment.peak_bytes
            return _pool_peak_bytes()

        def confirmed_early() -> bool:
            """A confirming run with a floor ends once, past the floor and after
            CONFIRM_MIN_EVALS evaluations, the peak has held over the latter half of its
            progress reports (at least ``steady_intervals``): memory that grows late keeps
            it running to its full length. Records where the steady stretch began."""
            floor = spec.min_training_steps
            if floor is None or state["steps"] < floor:
                return False
            if run_evals and state["evals"] - 1 < CONFIRM_MIN_EVALS:  # the first is at step 0
                return False
            held = max(measure.steady_intervals, -(-len(history) // 2))
            if not steady(history, held, measure.steady_tolerance):
                return False
            result["memory_steady_steps"] = (len(history) - held) * steps_per_epoch
            return True

        def progress(step: int, metrics: Any) -> None:
            if run_evals:
                state["evals"] += 1
            if step <= 0:
                return  # the initial evaluation, before any training
            now = time.perf_counter()
            sps = metrics.get("training/sps") if hasattr(metrics, "get") else None
            marks.append((now, float(sps) if sps is not None else None))
            state["steps"] = int(step) // env_steps_per_training_step
            history.append(cap_figure())
            result.update(training_steps=state["steps"], evals=state["evals"])
            if len(marks) == 1:
                emit(phase="warming up", first_epoch_s=now - start)
            if len(marks) == 1 + measure.warmup_intervals:
                # Everything before steady state is one-off cost: brax compiles its epoch at
                # the first call and again at the second (JAX_LOG_COMPILES shows both).
                result["compile_s"] = now - start
                emit(phase="measuring", compile_s=result["compile_s"])
            if counter is not None and len(marks) >= 1 + measure.warmup_intervals:
                counts.append(counter.read())  # from the mark that starts the window
                counted_steps.append(float(step))
            if len(marks) <= 1 + measure.warmup_intervals:
                return
            # brax's rate excludes evaluation; without it, the wall time since the last call
            seconds = (env_steps_per_epoch * resets / sps if sps else now - marks[-2][0])
            speed.add(env_steps_per_epoch, seconds)
            if fixed_steps:
                if state["steps"] >= int(fixed_steps) or confirmed_early():
                    raise _Enough()
                return
            window = now - marks[measure.warmup_intervals][0]
            throughput_ready = (len(speed.rates) >= measure.min_intervals
                                and window >= measure.min_window_s
                                and (speed.steady(measure.speed_tolerance)
                                     or window >= measure.max_window_s))
            memory_ready = (state["steps"] >= measure.min_training_steps
                            and (not run_evals or state["evals"] >= measure.min_evals)
                            and steady(history, measure.steady_intervals, measure.steady_tolerance))
            # Where the last steady stretch began (memory that grows again starts it anew):
            # the confirming run is sized from this, not from the trial's length, which the
            # throughput window sets (hundreds of steps of a small workload on a CPU).
            if not memory_ready:
                result.pop("memory_steady_steps", None)
            elif result.get("memory_steady_steps") is None:
                result["memory_steady_steps"] = state["steps"]
            # Past max_window_s a rate that has not settled is taken as it is (speed_steady
            # False); memory is never given up on before max_intervals.
            if (throughput_ready and memory_ready) or len(speed.rates) >= measure.max_intervals:
                raise _Enough()

        # Where the memory goes: the roles at the first epoch and evaluation, counted from
        # brax's own arguments (measure/ledger.py); it changes nothing brax runs.
        ledger = LedgerWatch(num_envs=num_envs, batch_size=batch_size,
                             num_minibatches=num_minibatches, unroll_length=unroll,
                             action_size=_action_size(environment), on_gpu=not on_cpu,
                             devices=int(result.get("device_count") or 1),
                             bootstrap_on_timeout=bool(kwargs.get("bootstrap_on_timeout")),
                             computes_value=bool(kwargs.get("bootstrap_on_timeout"))
                             or kwargs.get("clipping_epsilon_value") is not None,
                             # brax's scan: ceil(timesteps / (evals x step x resets)) steps
                             epoch_steps=steps_per_epoch // resets,
                             peak_so_far=cap_figure)
        ledger.install(jax)
        emit(phase="compiling")
        try:
            ppo.train(environment, num_timesteps=epochs * env_steps_per_epoch,
                      num_evals=epochs + 1, num_envs=num_envs,
                      episode_length=profile.episode_length, action_repeat=profile.action_repeat,
                      network_factory=network_factory(profile), progress_fn=progress, **kwargs)
        except _Enough:
            pass
        speed.close()  # a confirming run's last, partial interval still counts
        rates = speed.rates
        if len(rates) < measure.min_intervals and not fixed_steps:
            raise RuntimeError(f"training ended after {len(marks)} progress reports; "
                               f"{measure.min_intervals} steady intervals were needed")
        result.update(status="ok", memory_steady=steady(
            history, measure.steady_intervals, measure.steady_tolerance))
        if rates:
            timed = marks[measure.warmup_intervals:]
            low, high = median_interval(rates)
            result.update(steps_per_s=statistics.median(rates),
                          measure_window_s=timed[-1][0] - timed[0][0],
                          steps_per_s_min=min(rates), steps_per_s_max=max(rates),
                          steps_per_s_ci_low=low, steps_per_s_ci_high=high,
                          steps_per_s_intervals=[float(x) for x in rates[-MAX_RECORDED_INTERVALS:]],
                          # bool(): a comparison of numpy floats is a numpy bool, which
                          # json cannot write (the result file would be lost)
                          speed_steady=bool(speed.steady(measure.speed_tolerance)),
                          measured_intervals=len(rates),
                          instructions_per_env_step=per_step(counts, counted_steps))
        if on_warp:
            # After training and its figures, with the cap's figure taken first: the probe
            # holds one state per env, far less than the training's rollout, but it is not
            # the user's program. It reads MJX's Warp data through private fields: if that
            # fails, the training's figures stand and the demand is unmeasured (None).
            if data_segment.is_alive() or data_segment.peak_bytes is not None:
                data_segment.read()
                result["host_peak_data_bytes"] = data_segment.peak_bytes
            emit(phase="probing contacts")
            steps = measure.contact_steps or min(profile.episode_length, CONTACT_STEPS_MAX)
            try:
                result.update(probe_contacts(environment, num_envs, steps))
            except Exception as exc:  # noqa: BLE001 - the measured training must not be lost
                result["warp_probe_error"] = _message(exc)[-500:]
            if not on_cpu:
                result["warp_mempool_high_bytes"] = mempool_high_bytes()
    except BaseException as exc:  # noqa: BLE001 - the record must say what happened
        exc = _reported(exc)
        lines = [line for line in _message(exc).splitlines() if "cpu_aot_loader" not in line]
        result.update(status="error", error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
                      error_message="\n".join(lines[-12:])[-3000:],
                      error_where=f"{phase}: {_location(exc)}")
    if counter is not None:
        counter.close()
    if kernels is not None and on_warp:  # JAX-path Playground: no Warp figures, not zeros
        result.update(kernels.fields())
    if ledger is not None:  # counted before an OOM too: where the memory went until then
        result.update(ledger.fields())
        if ledger.error:
            result["ledger_error"] = ledger.error
    _memory_stats(result)
    if "host_peak_data_bytes" not in result and (data_segment.is_alive()
                                                 or data_segment.peak_bytes is not None):
        data_segment.read()
        result["host_peak_data_bytes"] = data_segment.peak_bytes
    return result


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "--standby":
        # A warm standby: capped and imported while the previous trial runs, it waits for
        # its spec on stdin, so a sweep does not pay ~1 s of imports per trial.
        set_rlimit_data(os.environ.get("VRAMTUNE_RLIMIT_DATA"))
        die_with_parent(watch_stdin=False)
        preimport()
        emit(phase="ready")
        line = sys.stdin.readline().strip()
        if not line:
            os._exit(0)  # the parent closed us: no trial came
        watch_parent_stdin()
        spec = TrialSpec.read(line)
        # The spec's cap may be lower than the one this standby started under (a proof run is
        # held below the line): lower it before the backend starts. Imports hold ~0.35 GiB of
        # data segment; a limit below what is mapped already fails the next allocation, as it
        # would have from the start.
        set_rlimit_data(spec.rlimit_data_bytes)
    else:
        spec = TrialSpec.read(argv[1])
        set_rlimit_data(spec.rlimit_data_bytes)
        die_with_parent()
    report = ChildReport(**run(spec))  # an unknown field fails here, not in the parent
    write_atomic(spec.result_path, report.to_json())
    sys.stdout.flush()
    # Skip interpreter teardown: XLA's destructors can take seconds and add nothing.
    os._exit(0 if report.status == "ok" else 3)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
