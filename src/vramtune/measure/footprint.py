"""XLA's compile-time count of the training epoch's buffers at a few sizes: a prior for the
memory model, never a measurement of a peak.

``python -P -m vramtune.measure.footprint SPEC.json`` runs brax's own ``ppo.train`` for each
size until it first calls its training epoch, lowers and compiles that call exactly as brax
would (``jax.pmap(...).lower(*args).compile()``), reads ``Compiled.memory_analysis()`` and
stops: nothing trains. What changes with num_envs in those figures (arguments + outputs -
aliased + temporaries) is what the rollout, the SGD minibatches and the env state add per env,
which is the slope of the peak; the rest of a trial's peak (runtime, libraries, the compiler
itself) the figures do not see, so the intercept comes from a real trial.

Measured on this 2-core CPU with ``quick`` (benchmarks/README.md, "Search"): 70.6 / 135.2 /
251.8 / 492.4 MiB at 128 / 512 / 1024 / 2048 envs, a chord slope of 0.220 MiB per env from 128
to 2048, against 0.230-0.235 MiB per env fitted to 57-71 real trials' data-segment peaks
(ratio 1.04-1.07). On CPU the compile runs with LLVM's optimisation off
(``--xla_backend_optimization_level=0``): the buffer assignment, done on HLO before LLVM, is
the same (same figures at every size above) and each compile takes ~0.8 s less.

The probe runs in a process of its own (beside the sweep's first trial on CPU, after it on a
GPU, whose memory it would share), at a lower CPU priority, under the trials' RLIMIT_DATA on
CPU: it resets the envs at the sizes it compiles, and a size too large for the cap is retried
at the next smaller far size asked for. The parent side (``FootprintProbe``) imports no JAX.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vramtune.errors import UserError
from vramtune.measure.cap import Cap
from vramtune.measure.intercept import wrap_named
from vramtune.measure.oom import classify_text
from vramtune.measure.process import child_env, kill_group, trial_dir
from vramtune.measure.wire import MIN_EPOCH_STEPS
from vramtune.results.files import write_atomic
from vramtune.schema import MAX_BATCH_SIZE, MAX_BYTES, MAX_NUM_ENVS, MAX_NUM_MINIBATCHES, Fields
from vramtune.yamlio import read_text

FORMAT_VERSION = 2
EPOCH_FUNCTION = "training_epoch"  # brax/training/agents/ppo/train.py: the jitted scan of steps
CPU_XLA_FLAG = "--xla_backend_optimization_level=0"
MAX_SIZES = 8
PROBE_NICE = 10  # below the trial it runs beside: its compile takes the idle core, not the trial's
Triple = tuple[int, int, int]  # (num_envs, batch_size, num_minibatches)


@dataclass(frozen=True)
class SizeFootprint:
    """One size's compiled training epoch, as XLA counts its buffers (per device)."""

    num_envs: int
    batch_size: int
    num_minibatches: int
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    compile_s: float
    # XLA's other compile-time figures: None in files written before they were kept
    generated_code_bytes: int | None = None
    flops: float | None = None
    bytes_accessed: float | None = None

    @property
    def total_bytes(self) -> int:
        """What the epoch holds at once by XLA's count: inputs, outputs not donated into
        inputs, and its temporaries."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes


@dataclass(frozen=True)
class Footprint:
    """What the probe reported: every size it compiled, or why it has none. ``profile_hash``
    and ``requested`` (the sizes asked for: the start, then far sizes, largest first) say what
    it was a footprint of, so a resumed sweep uses it only for the same question."""

    backend: str | None
    device_count: int | None  # None: the probe never got as far as JAX
    sizes: tuple[SizeFootprint, ...] = ()
    wall_s: float | None = None
    error: str | None = None
    profile_hash: str | None = None
    requested: tuple[Triple, ...] = ()

    def bytes_per_env(self) -> float | None:
        """The chord slope between the smallest and the largest size compiled, for the whole
        figure the trials' peak counts: per device on GPU (the allocator's peak is the
        largest device's), all devices together on CPU (one process's data segment). None
        without two sizes or a positive growth."""
        if self.error is not None or len(self.sizes) < 2:
            return None
        lo, hi = min(self.sizes, key=lambda s: s.num_envs), max(self.sizes, key=lambda s: s.num_envs)
        if hi.num_envs <= lo.num_envs:
            return None
        slope = (hi.total_bytes - lo.total_bytes) / (hi.num_envs - lo.num_envs)
        if self.backend == "cpu":
            slope *= self.device_count or 1
        return slope if slope > 0 else None

    def answers(self, profile_hash: str, requested: list[Triple], backend: str,
                device_count: int) -> bool:
        """A footprint of exactly this question: profile, sizes asked for, backend, devices."""
        return (self.profile_hash == profile_hash and list(self.requested) == list(requested)
                and self.backend in (backend, None) and self.device_count in (device_count, None))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "profile_hash": self.profile_hash,
                "requested": [list(t) for t in self.requested], "backend": self.backend,
                "device_count": self.device_count, "wall_s": self.wall_s, "error": self.error,
                "sizes": [asdict(s) for s in self.sizes]}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Footprint:
        """Checked: a damaged or hostile file is one UserError naming the key."""
        f = Fields(data, where)
        f.only(("format", "profile_hash", "requested", "backend", "device_count", "wall_s",
                "error", "sizes"))
        if f.int("format") != FORMAT_VERSION:
            f.fail("format", f"{FORMAT_VERSION}", data.get("format"))
        asked = f.raw("requested")
        if not isinstance(asked, list) or len(asked) > MAX_SIZES:
            f.fail("requested", f"a list of at most {MAX_SIZES} sizes", asked)
        requested = []
        for i, item in enumerate(asked):
            if (not isinstance(item, list) or len(item) != 3
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in item)
                    or not (1 <= item[0] <= MAX_NUM_ENVS and 1 <= item[1] <= MAX_BATCH_SIZE
                            and 1 <= item[2] <= MAX_NUM_MINIBATCHES)):
                f.fail(f"requested[{i}]", "[num_envs, batch_size, num_minibatches] in range",
                       item)
            requested.append((item[0], item[1], item[2]))
        raw = f.raw("sizes")
        if not isinstance(raw, list) or len(raw) > MAX_SIZES:
            f.fail("sizes", f"a list of at most {MAX_SIZES} sizes", raw)
        sizes = []
        for i, item in enumerate(raw):
            s = Fields(item, where, f"sizes[{i}].")
            s.only(SizeFootprint.__dataclass_fields__)
            sizes.append(SizeFootprint(
                s.int("num_envs", lo=1, hi=MAX_NUM_ENVS),
                s.int("batch_size", lo=1, hi=MAX_BATCH_SIZE),
                s.int("num_minibatches", lo=1, hi=MAX_NUM_MINIBATCHES),
                *(s.int(k, lo=0, hi=MAX_BYTES) for k in ("argument_bytes", "output_bytes",
                                                         "alias_bytes", "temp_bytes")),
                float(s.number("compile_s", lo=0, hi=1e6)),
                s.int("generated_code_bytes", None, lo=0, hi=MAX_BYTES, none=True),
                s.number("flops", None, lo=0, none=True),
                s.number("bytes_accessed", None, lo=0, none=True)))
        return cls(f.choice("backend", ("cpu", "gpu", "tpu"), none=True),
                   f.int("device_count", lo=1, hi=4096, none=True), tuple(sizes),
                   f.number("wall_s", lo=0, hi=1e7, none=True),
                   f.text("error", none=True),
                   f.text("profile_hash", none=True, max_len=64), tuple(requested))


MAX_FILE_BYTES = 1 << 20


def read_footprint(path: Path) -> Footprint | None:
    """The footprint a run saved, None if it has none; anything else that is not one
    (a directory, a FIFO, a huge or damaged file) is one UserError."""
    if not os.path.lexists(path):
        return None
    text = read_text(path, what="footprint", max_bytes=MAX_FILE_BYTES)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer past the digit limit
        raise UserError(f"{path}: not valid JSON") from None
    return Footprint.from_dict(data, str(path))


# --- the parent side ------------------------------------------------------------------------

def probe_command() -> list[str]:
    return [sys.executable, "-P", "-m", "vramtune.measure.footprint"]


class FootprintProbe:
    """The probe run in the background (its own process group), beside whatever runs now.

    ``result(wait_s)`` waits for it at most that long: a probe still compiling then is
    left to finish, and a later call may still get its figures. ``close`` kills it."""

    def __init__(self, cap: Cap, profile_dict: dict[str, Any], sizes: list[Triple],
                 *, device_count: int = 1, import_path: str | None = None,
                 timeout_s: float = 300.0, profile_hash: str | None = None,
                 every_size: bool = False) -> None:
        """``sizes``: the start, then far sizes largest first: the first far size that fits
        the cap is compiled, the rest are fallbacks. ``every_size``: compile each one (the
        bench gate's deterministic figures), failing on the first that does not compile."""
        self.cap, self.timeout_s = cap, timeout_s
        self.device_count = device_count
        self.requested = tuple(tuple(s) for s in sizes)
        self.profile_hash = profile_hash
        self._spec = {"profile": profile_dict, "sizes": [list(s) for s in sizes],
                      "import_path": import_path, "rlimit_data_bytes": cap.rlimit_data_bytes,
                      "every_size": every_size}
        self._done = threading.Event()
        self._result: Footprint | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="vramtune-footprint")

    def start(self) -> FootprintProbe:
        self._thread.start()
        return self

    def result(self, wait_s: float) -> Footprint | None:
        self._done.wait(max(0.0, wait_s))
        return self._result

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def pause(self) -> None:
        """SIGSTOP it while a trial measures its steps/s: nothing may share the compute then."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        with self._lock:
            if self._proc is not None and self._proc.returncode is None \
                    and self._proc.poll() is None:
                try:
                    os.killpg(self._proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._proc is not None and self._proc.returncode is None:
                kill_group(self._proc)  # never a reaped (maybe reused) process group
        self._thread.join(timeout=10)

    def _failed(self, why: str, wall_s: float | None) -> Footprint:
        return Footprint(self.cap.backend, None, wall_s=wall_s, error=why,
                         profile_hash=self.profile_hash, requested=self.requested)

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self._result = self._launch(started)
        except BaseException as exc:  # noqa: BLE001 - a prior that fails is no prior, not a crash
            self._result = self._failed(f"{type(exc).__name__}: {exc}"[:500],
                                        time.perf_counter() - started)
        finally:
            self._done.set()

    def _launch(self, started: float) -> Footprint:
        env = child_env(self.cap)
        env.pop("VRAMTUNE_WATCH_STDIN", None)
        if self.cap.backend == "cpu":
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {CPU_XLA_FLAG}".strip()
        with trial_dir() as tmp:
            result_path = Path(tmp) / "footprint.json"
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps({**self._spec, "result_path": str(result_path)}))
            with self._lock:
                if self._closed:
                    return self._failed("closed before it started", None)
                self._proc = subprocess.Popen([*probe_command(), str(spec_path)],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True)
            proc = self._proc
            try:
                out, _ = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.communicate()
                return self._failed(f"no footprint in {self.timeout_s:g} s", self.timeout_s)
            wall = time.perf_counter() - started
            if not result_path.exists():
                tail = out.decode(errors="replace").strip().splitlines()[-1:] if out else []
                return self._failed(f"the probe exited ({proc.returncode}) without a result"
                                    + (f": {tail[0][:300]}" if tail else ""), wall)
            found = Footprint.from_dict(json.loads(result_path.read_text()), "footprint probe")
            return Footprint(found.backend, found.device_count, found.sizes, wall, found.error,
                             self.profile_hash, self.requested)


# --- the child side -------------------------------------------------------------------------

class _Compiled(Exception):
    """Raised in place of the first training epoch: its memory is read, nothing trains."""

    def __init__(self, analysis: Any, cost: dict[str, float], compile_s: float) -> None:
        super().__init__("compiled")
        self.analysis, self.cost, self.compile_s = analysis, cost, compile_s


def cost_figures(compiled: Any) -> dict[str, float]:
    """``Compiled.cost_analysis()`` as one flat dict: jaxlib returns a dict (a list of one
    per device in older releases); {} where the backend has no cost model."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - no cost model on this backend: the figures are n/a
        return {}
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return {str(k): float(v) for k, v in (cost or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _intercept(jax: Any) -> None:
    """Make the function brax names ``training_epoch`` compile ahead of time at its first
    call and raise with XLA's memory analysis instead of running. Every other function
    (reset, evaluation) is brax's, untouched."""
    def wrap(_name: str, staged: Any) -> Any:
        def first_call(*call_args: Any, **call_kwargs: Any) -> Any:
            t = time.perf_counter()
            compiled = staged.lower(*call_args, **call_kwargs).compile()
            raise _Compiled(compiled.memory_analysis(), cost_figures(compiled),
                            time.perf_counter() - t)
        return first_call

    wrap_named(jax, (EPOCH_FUNCTION,), wrap)


def _one_size(ppo: Any, profile: Any, num_envs: int, batch_size: int, num_minibatches: int,
              ) -> SizeFootprint:
    from vramtune.workload.build import build_environment, network_factory

    environment, extra = build_environment(profile, num_envs)
    kwargs = dict(profile.ppo)
    kwargs.update(extra)
    unroll = int(kwargs.get("unroll_length", profile.unroll_length))
    kwargs.update(batch_size=batch_size, num_minibatches=num_minibatches, run_evals=False)
    per_step = batch_size * num_minibatches * unroll * profile.action_repeat
    steps = max(profile.measure.steps_per_epoch, MIN_EPOCH_STEPS)  # a trial's epoch's scan length
    try:
        ppo.train(environment, num_timesteps=steps * per_step, num_evals=2, num_envs=num_envs,
                  episode_length=profile.episode_length, action_repeat=profile.action_repeat,
                  network_factory=network_factory(profile), **kwargs)
    except _Compiled as done:
        a = done.analysis
        return SizeFootprint(num_envs, batch_size, num_minibatches,
                             int(a.argument_size_in_bytes), int(a.output_size_in_bytes),
                             int(a.alias_size_in_bytes), int(a.temp_size_in_bytes),
                             done.compile_s, _int_or_none(a, "generated_code_size_in_bytes"),
                             done.cost.get("flops"), done.cost.get("bytes accessed"))
    raise RuntimeError(f"ppo.train never called a function named {EPOCH_FUNCTION!r}: this "
                       f"brax version trains differently, so there is no footprint")


def _int_or_none(analysis: Any, name: str) -> int | None:
    value = getattr(analysis, name, None)
    return int(value) if isinstance(value, int) and value >= 0 else None


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or classify_text(str(exc)).strength == "strong"


def main(argv: list[str]) -> int:
    from vramtune.measure.child import _allow_imports_from, die_with_parent
    from vramtune.measure.probe import set_rlimit_data

    spec = json.loads(Path(argv[1]).read_text())
    set_rlimit_data(spec.get("rlimit_data_bytes"))  # the trials' cap, before JAX is imported
    die_with_parent(watch_stdin=False)
    try:
        os.nice(PROBE_NICE)
    except OSError:
        pass
    report: dict[str, Any] = {"format": FORMAT_VERSION, "profile_hash": None, "requested": [],
                              "backend": None, "device_count": None, "wall_s": None,
                              "error": None, "sizes": []}
    try:
        import jax
        from brax.training.agents.ppo import train as ppo

        from vramtune.compat import patch_brax
        from vramtune.workload.profile import profile_from_dict

        patch_brax()  # the trials' stand-ins: brax's ppo.train runs here too, up to its epoch

        report["backend"] = jax.default_backend()
        report["device_count"] = jax.local_device_count()
        profile = profile_from_dict(spec["profile"], source=spec["profile"].get("name", "spec"))
        _allow_imports_from(spec.get("import_path"))
        _intercept(jax)
        (start, *far) = [tuple(int(v) for v in t) for t in spec["sizes"]]
        report["sizes"].append(asdict(_one_size(ppo, profile, *start)))
        if spec.get("every_size"):  # the bench gate: each size asked for, no fallback
            for size in far:
                report["sizes"].append(asdict(_one_size(ppo, profile, *size)))
            far = []
        for i, size in enumerate(far):
            try:
                report["sizes"].append(asdict(_one_size(ppo, profile, *size)))
                break
            except BaseException as exc:  # noqa: BLE001 - a far size over the cap: a smaller one
                if not _out_of_memory(exc) or i == len(far) - 1:
                    raise
    except BaseException as exc:  # noqa: BLE001 - the parent gets a reason, never a traceback
        lines = str(exc).strip().splitlines()
        report["error"] = f"{type(exc).__name__}: {lines[-1] if lines else ''}"[:1000]
    write_atomic(spec["result_path"], json.dumps(report))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
