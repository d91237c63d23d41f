"""Trials as Ray tasks across a cluster, one GPU each (one CPU on CPU-only clusters).

Each task runs vramtune's own ``run_trial`` on its worker: the trial is still a child
process of its own, capped, sampled, timed out and classified exactly as a local one, under
a cap planned on that node (its card, its CUDA overhead). Results come back as each trial
ends. Ray is imported here only, and only when a Ray executor is made.

Measured on ray 2.60 (notes in benchmarks/README.md and the tests):

* A trial is a streaming generator task (progress events, then the result) with Ray's own
  retries off: when Ray retries a streaming generator it splices the new attempt's items
  onto the old attempt's by index, so a retry that yields fewer items than the first attempt
  had loses its result (the stream just ends). The driver resubmits a trial once itself
  after a system failure (worker or node died, Ray's memory monitor), and records why.
* A task killed by ``ray.cancel(force=True)`` or by a dying node takes its trial child with
  it: the child sets PR_SET_PDEATHSIG and watches its stdin (measure/child.py). Ray's own
  cleanup does not reach it (the child runs in a session of its own).
* A task whose accelerator type has no alive node left waits forever as "infeasible": a
  watchdog cancels such trials and records them as crashes.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vramtune import machine
from vramtune.errors import UserError, quoted
from vramtune.machine import default_cache_dir
from vramtune.measure.cap import Cap
from vramtune.measure.executor import SHARED_NOTE
from vramtune.measure.nvml import GpuInfo, Nvml
from vramtune.measure.overhead import DeviceFacts, device_cap
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest, invalid_result, run_trial
from vramtune.measure.wire import Launched, Sample
from vramtune.records import Status, TrialResult, utc_now

RAY_LOG = "ray.log"  # Ray's own messages about a run (a worker died, a node was lost)
ACCELERATOR_PREFIX = "accelerator_type:"
SAMPLE_EVERY_S = 1.0  # samples cross the network at most this often (the sampler takes 10/s)
WATCH_EVERY_S = 5.0
PROBE_TIMEOUT_S = 300.0  # a busy cluster, or a GPU node measuring its CUDA overhead first
CANCEL_WAIT_S = 15.0
OWN_OBJECT_STORE_BYTES = 80 * 2**20  # results are small: Ray's default takes 30% of RAM


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray on this machine and on every node: "
                        "pip install 'vramtune[ray]'") from None
    return ray


# --- the connection, shared by every executor of this process -------------------------------

class _Connection:
    """One Ray connection per process, shared by the executors of a mixed-cluster sweep;
    shut down with the last of them, and only if vramtune opened it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.opened = False  # we called ray.init (else a notebook or a test did)
        self.own_dir: str | None = None  # temp dir of a cluster we started ourselves
        self.logs: set[Path] = set()
        self.saved_printer: Any = None

    def acquire(self, address: str | None) -> Any:
        ray = _ray()
        with self.lock:
            if self.users == 0 and not ray.is_initialized():
                self._init(ray, address)
            self.users += 1
        return ray

    def release(self) -> None:
        ray = _ray()
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return
            if self.opened and ray.is_initialized():
                ray.shutdown()
            self.opened = False
            self._restore_printer()
            if self.own_dir is not None:
                shutil.rmtree(self.own_dir, ignore_errors=True)
                self.own_dir = None

    def _init(self, ray: Any, address: str | None) -> None:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self._reroute_printer()
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address is None:
            # A cluster of our own on this machine. Its socket paths must stay under 107
            # bytes (Ray checks), hence a short temp dir; no dashboard, a small object store.
            # Token auth (on by default since ray 2.5x) would write ~/.ray/auth_token for a
            # cluster that lives as long as this sweep: off, unless the user set it.
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            self.own_dir = tempfile.mkdtemp(prefix="vtray", dir="/tmp")
            kwargs.update(include_dashboard=False, object_store_memory=OWN_OBJECT_STORE_BYTES,
                          _temp_dir=self.own_dir)
        else:
            kwargs["address"] = address
            try:
                reachable(address)
            except BaseException:
                self._restore_printer()
                raise
        try:
            ray.init(**kwargs)
        except Exception as exc:  # ConnectionError, AuthenticationError, ValueError, ...
            self._restore_printer()
            if self.own_dir is not None:
                shutil.rmtree(self.own_dir, ignore_errors=True)
                self.own_dir = None
            where = "start a local Ray cluster" if address is None else \
                f"connect to the Ray cluster at {address}"
            hint = ("; a cluster with token auth needs RAY_AUTH_MODE=token and its token here"
                    if "auth" in str(exc).lower() else "")
            raise UserError(f"cannot {where}: {_first_line(exc)}{hint}") from None
        self.opened = True

    def _reroute_printer(self) -> None:
        """Ray prints its raylet's messages (a worker died, a node is dead, log dumps) to the
        driver's stdout whatever ``log_to_driver`` says, from a thread that looks up
        ``ray._private.worker.print_to_stdstream`` at each call (private API, checked by a
        test): they go to each run's ray.log instead, where they explain its crashes."""
        try:
            import ray._private.worker as worker
        except ImportError:
            return
        if not hasattr(worker, "print_to_stdstream") or self.saved_printer is not None:
            return
        self.saved_printer = worker.print_to_stdstream

        def to_logs(data: Any, *args: Any, **kwargs: Any) -> None:
            lines = data.get("lines", []) if isinstance(data, dict) else [str(data)]
            pid = data.get("pid") if isinstance(data, dict) else None
            text = "".join(f"{utc_now()} ({pid}) {line}\n" for line in lines)
            for path in list(self.logs):
                try:
                    with open(path, "a", encoding="utf-8") as handle:
                        handle.write(text)
                except OSError:
                    pass

        worker.print_to_stdstream = to_logs

    def _restore_printer(self) -> None:
        if self.saved_printer is None:
            return
        try:
            import ray._private.worker as worker

            worker.print_to_stdstream = self.saved_printer
        except ImportError:
            pass
        self.saved_printer = None


_CONNECTION = _Connection()


CONNECT_TIMEOUT_S = 10.0  # a head that answers does so in milliseconds, even across a WAN


def reachable(address: str) -> None:
    """UserError, within CONNECT_TIMEOUT_S, where nothing answers at HOST:PORT (or
    ray://HOST:PORT): ray.init would retry for minutes, and die slowly on SIGTERM. "auto"
    and other forms are Ray's to resolve (it fails fast where no cluster is running)."""
    text = address.strip()
    text = text.removeprefix("ray://")
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdecimal() or len(port_text) > 5 or not host:
        return
    port = int(port_text)
    if not 0 < port < 65536:
        raise UserError(f"--ray-address {quoted(address)}: the port must be from 1 to 65535")
    host = host.strip("[]")  # an IPv6 literal
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:  # ValueError: a host name IDNA cannot encode
        why = ("no answer" if isinstance(exc, TimeoutError) else
               f"{host!r} is not a valid host name" if isinstance(exc, ValueError) else
               exc.strerror or str(exc))
        raise UserError(f"cannot connect to the Ray cluster at {address}: {why} (waited at "
                        f"most {CONNECT_TIMEOUT_S:g} s); is its head running (ray start --head), "
                        f"and is this its GCS address (HOST:6379 by default)?") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


@contextlib.contextmanager
def cluster(address: str | None) -> Iterator[Any]:
    """Ray, connected (or a cluster of our own started) for the block; executors made inside
    keep the connection open after it."""
    ray = _CONNECTION.acquire(address)
    try:
        yield ray
    finally:
        _CONNECTION.release()


@dataclass(frozen=True)
class ClusterNode:
    node_id: str
    alive: bool
    resources: dict[str, float]

    @property
    def types(self) -> list[str]:
        return [k[len(ACCELERATOR_PREFIX):] for k in self.resources
                if k.startswith(ACCELERATOR_PREFIX)]


def cluster_nodes(ray: Any) -> list[ClusterNode]:
    return [ClusterNode(n.get("NodeID", ""), bool(n.get("Alive")), dict(n.get("Resources") or {}))
            for n in ray.nodes()]


def cluster_types(ray: Any) -> list[str]:
    """The accelerator types the cluster's alive nodes offer (Ray's accelerator_type:T
    resources: detected on GPU nodes, or given with `ray start --resources`)."""
    keys = ray.cluster_resources()
    return sorted(k[len(ACCELERATOR_PREFIX):] for k in keys if k.startswith(ACCELERATOR_PREFIX))


def check_types(ray: Any, wanted: Sequence[str]) -> None:
    """A type the cluster lacks is never scheduled and never fails (Ray waits for it): say so
    before anything runs."""
    have = cluster_types(ray)
    missing = [t for t in wanted if t not in have]
    if missing:
        offered = ", ".join(have) if have else "none"
        raise UserError(f"the Ray cluster has no node with accelerator type "
                        f"{', '.join(missing)}; it offers: {offered}")


# --- the worker side --------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeReport:
    """What the probe found on a node of the kind the trials will run on."""

    node_id: str
    hostname: str
    machine: dict[str, Any]
    versions: dict[str, str]
    gpu: GpuInfo | None
    cap: Cap
    nvml_notice: str | None
    python: str
    ray_version: str


@contextlib.contextmanager
def _trial_environment(settings: dict[str, Any]) -> Iterator[None]:
    """The environment a trial child inherits on the worker, as a local run's would be.

    Ray sets OMP_NUM_THREADS=1 in its workers when unset (ray/_private/utils.py
    set_omp_num_threads_if_unset): a local trial has the user's value or none. CUDA numbers
    devices fastest-first unless told otherwise; Ray's GPU ids and NVML count in PCI order,
    so the trial's GPU and the one NVML samples are the same card only with PCI_BUS_ID.
    """
    keys = ("OMP_NUM_THREADS", "CUDA_DEVICE_ORDER")
    saved = {k: os.environ.get(k) for k in keys}
    omp = settings.get("omp_num_threads")
    if omp is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = str(omp)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _node_cap(limit_bytes: int | None, devices: int, outside_room_bytes: int | None = None
              ) -> tuple[Cap, Nvml, DeviceFacts]:
    """The cap planned here, on the node, for the GPU(s) Ray gave this task: their total and
    their CUDA overhead (measured once per card model and driver, then cached on the node)."""
    nvml = Nvml()
    cap, facts = device_cap(limit_bytes, nvml, devices, outside_room_bytes)
    return cap, nvml, facts


def probe_node(limit_bytes: int | None, devices: int, settings: dict[str, Any]) -> NodeReport:
    """Runs as a Ray task with a trial's resources: what a trial will find on that node."""
    import ray

    with _trial_environment(settings):
        cap, nvml, _ = _node_cap(limit_bytes, devices)
    return NodeReport(node_id=ray.get_runtime_context().get_node_id(),
                      hostname=socket.gethostname(), machine=machine.machine_summary(),
                      versions=dict(machine.versions()), gpu=nvml.info, cap=cap,
                      nvml_notice=nvml.notice, python=sys.executable, ray_version=ray.__version__)


def trial_task(request: TrialRequest, settings: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Runs as a Ray streaming-generator task: ("where", ...), ("event", Event)..., then
    ("result", TrialResult).

    ``run_trial`` runs in a helper thread that forks the child and waits for it (PDEATHSIG
    follows the forking thread); this thread forwards its events. Anything that stops this
    task (a cancel, an exception) kills the trial's process group first.
    """
    import ray

    yield ("where", {"node_id": ray.get_runtime_context().get_node_id(),
                     "host": socket.gethostname(), "worker_pid": os.getpid(),
                     "gpu_ids": [str(g) for g in ray.get_gpu_ids()]})
    events: queue.Queue[Any] = queue.Queue()
    box: dict[str, Any] = {}
    every = float(settings.get("sample_every_s", SAMPLE_EVERY_S))
    last_sample = [0.0]

    def on_event(event: Any) -> None:
        if isinstance(event, Sample):
            now = time.monotonic()
            if now - last_sample[0] < every:
                return
            last_sample[0] = now
        if isinstance(event, Launched):
            box["pid"] = event.pid
        events.put(("event", event))

    with _trial_environment(settings):
        cap, nvml, facts = _node_cap(request.enforced_bytes, request.device_count,
                                     request.outside_room_bytes)
        if request.compile_cache_dir is not None:  # the worker's own cache, not the driver's path
            request = replace(request, compile_cache_dir=str(default_cache_dir() / "jax"))

        def work() -> None:
            try:
                box["result"] = run_trial(request, on_event, cap=cap, nvml=nvml,
                                          overhead_bytes=facts.overhead_bytes,
                                          runtime_total_bytes=facts.runtime_total_bytes)
            except BaseException as exc:  # handed to the task's thread, raised there
                box["error"] = exc
            events.put(None)

        thread = threading.Thread(target=work, name="vramtune-trial", daemon=True)
        thread.start()
        try:
            while True:
                try:
                    item = events.get(timeout=0.2)  # never block for good: stay interruptible
                except queue.Empty:
                    continue
                if item is None:
                    break
                yield item
        except BaseException:
            pid = box.get("pid")
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, 9)
            thread.join(timeout=10)
            raise
        thread.join()
    if "error" in box:
        raise box["error"]
    yield ("result", box["result"])


# --- the driver side --------------------------------------------------------------------------

@dataclass
class _Slot:
    """One requested trial and its attempts."""

    request: TrialRequest
    attempt: int = 0
    where: dict[str, Any] | None = None  # the current attempt's first item: it has started
    history: list[str] = field(default_factory=list)  # how earlier attempts ended
    cancelled_why: str | None = None  # set by the watchdog before it cancels
    shared: bool = False  # CPU nodes: ran beside another trial on the same node


class RayExecutor:
    """Trials as Ray tasks: one GPU each (of ``gpu_type`` when given), or one CPU each on a
    CPU-only cluster; results yielded as each trial ends.

    ``address``: None starts a Ray cluster on this machine for the sweep; "auto" or
    HOST:PORT joins a running one (``ray start``). ``cap`` is the cap a probe task planned on
    a node of the kind the trials run on; every trial plans its own on its node.

    A GPU trial has its GPU(s) to itself, so its steps/s count. On CPU-only nodes trials
    share the cores: one that ran beside another on its node is marked ``shared_run`` (its
    memory verdict holds, its steps/s do not), and a request that must run ``alone`` runs
    with nothing else of this executor in flight. (Two executors of a mixed sweep on one
    CPU node do not see each other's trials: a test setup, not a GPU cluster's.)
    """

    def __init__(self, limit_bytes: int | None, *, address: str | None = None,
                 gpu_type: str | None = None, devices: int = 1, cpus_per_trial: int = 1,
                 max_attempts: int = 2) -> None:
        self.address = address
        self.gpu_type = gpu_type
        self.devices = devices
        self.cpus_per_trial = cpus_per_trial
        self.max_attempts = max_attempts
        self.log_path: Path | None = None
        self.warnings: list[str] = []
        self._stop = threading.Event()
        self._live: dict[Any, _Slot] = {}
        self._closed = False
        self.ray = _CONNECTION.acquire(address)
        try:
            self._setup(limit_bytes)
        except BaseException:
            self._closed = True
            _CONNECTION.release()
            raise

    # setup -----------------------------------------------------------------------------------
    def _setup(self, limit_bytes: int | None) -> None:
        ray = self.ray
        if self.gpu_type is not None:
            check_types(ray, [self.gpu_type])
        nodes = [n for n in cluster_nodes(ray) if n.alive]
        if self.gpu_type is None:  # CPU-only nodes: their types (if any) change nothing
            types = sorted({t for n in nodes if n.resources.get("GPU") for t in n.types})
            if len(types) > 1:
                raise UserError(f"the Ray cluster mixes accelerator types ({', '.join(types)}): "
                                f"one sweep measures one card; pass --gpu-types "
                                f"{','.join(types)} for one sweep per type")
        mine = [n for n in nodes
                if self.gpu_type is None or f"{ACCELERATOR_PREFIX}{self.gpu_type}" in n.resources]
        gpus = sum(int(n.resources.get("GPU", 0)) for n in mine)
        self.on_gpu = gpus > 0
        if self.on_gpu:  # a trial's devices on one node: brax pmaps over local devices
            self.parallel = sum(int(n.resources.get("GPU", 0)) // self.devices for n in mine)
            self.options: dict[str, Any] = {"num_gpus": self.devices, "num_cpus": 1}
            if self.parallel < 1:
                raise UserError(f"--devices {self.devices}: no Ray node has that many GPUs"
                                + (f" of type {self.gpu_type}" if self.gpu_type else ""))
        else:
            cpus = sum(int(n.resources.get("CPU", 0)) for n in mine)
            self.parallel = cpus // self.cpus_per_trial
            self.options = {"num_cpus": self.cpus_per_trial}
            if self.parallel < 1:
                raise UserError(f"the Ray cluster offers no CPU{'s' if cpus != 1 else ''} "
                                f"for a trial ({self.cpus_per_trial} needed)")
        if self.gpu_type is not None:
            self.options["accelerator_type"] = self.gpu_type
        # Ray's retries stay off: the driver resubmits once itself (see the module docstring).
        self.options.update(max_retries=0, retry_exceptions=False)
        self.settings = {"omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                         "sample_every_s": SAMPLE_EVERY_S}
        self._task = ray.remote(trial_task).options(**self.options)
        self.node = self._probe(limit_bytes)
        self.cap = self.node.cap
        mine_versions = machine.versions()
        differ = [f"{k} {mine_versions.get(k)} here, {v} there"
                  for k, v in self.node.versions.items()
                  if k in ("vramtune", "jax", "jaxlib", "brax") and mine_versions.get(k) != v]
        if differ:
            self.warnings.append(f"node {self.node.hostname} runs other versions than this "
                                 f"machine ({'; '.join(differ)}): the run records the node's")

    def _probe(self, limit_bytes: int | None) -> NodeReport:
        ray = self.ray
        what = self.resources_text
        probe = ray.remote(probe_node).options(**{k: v for k, v in self.options.items()
                                                   if k not in ("retry_exceptions",)})
        ref = probe.remote(limit_bytes, self.devices, self.settings)
        try:
            report = ray.get(ref, timeout=PROBE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise UserError(f"no Ray worker with {what} started within {PROBE_TIMEOUT_S:g} s: "
                            f"the cluster is busy, or no node can run a trial") from None
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            if isinstance(cause, UserError):
                raise UserError(f"on the Ray node: {cause}") from None
            raise UserError(f"a Ray worker with {what} could not run vramtune "
                            f"({_first_line(cause)}): every node needs vramtune[ray] and the "
                            f"same jax/brax installed in the Python that ran `ray start`") from None
        missing = [p for p in ("jax", "jaxlib", "brax") if p not in report.versions]
        if missing:
            raise UserError(f"Ray node {report.hostname}: {', '.join(missing)} not installed in "
                            f"{report.python}, which runs the trials there")
        return report

    @property
    def resources_text(self) -> str:
        what = (f"{self.devices} GPU(s)" if getattr(self, "on_gpu", False)
                else f"{self.cpus_per_trial} CPU")
        return what + (f" of type {self.gpu_type}" if self.gpu_type else "")

    @property
    def notice(self) -> str | None:
        """Why GPU figures are missing on the node the trials run on (its NVML's word)."""
        return self.node.nvml_notice

    def attach(self, run_dir: Path) -> None:
        """Ray's own messages about the run go to RAY_LOG in its directory."""
        self.set_log(run_dir / RAY_LOG)

    def set_log(self, path: Path) -> None:
        """Where Ray's messages about this run go (its run directory's ray.log)."""
        self.log_path = path
        _CONNECTION.logs.add(path)

    # running ---------------------------------------------------------------------------------
    def run(self, request: TrialRequest, on_event: EventCallback | None = None) -> TrialResult:
        results = list(self.run_batch([request], on_event))
        return results[0]

    def _submit(self, slot: _Slot) -> Any:
        slot.attempt += 1
        slot.where = None
        slot.shared = False
        gen = self._task.remote(slot.request, self.settings)
        self._live[gen] = slot
        return gen

    def run_batch(self, requests: Sequence[TrialRequest],
                  on_event: EventCallback | None = None) -> Iterator[TrialResult]:
        """Submit every request (Ray queues what the free GPUs cannot take yet) and yield
        each result as it arrives. Interrupted or closed: every trial in flight is cancelled
        (its worker killed, its child with it)."""
        if self._closed:
            raise RuntimeError("this RayExecutor is closed")
        ray = self.ray
        waiting: list[_Slot] = []
        for request in requests:
            invalid = invalid_result(request)
            if invalid is not None:
                yield invalid
            else:
                waiting.append(_Slot(request))
        last_watch = time.monotonic()
        try:
            while self._live or waiting:
                if self._stop.is_set():
                    raise KeyboardInterrupt
                while waiting and self._may_start(waiting[0].request):
                    self._submit(waiting.pop(0))
                ready, _ = ray.wait(list(self._live), num_returns=1, timeout=0.5)
                for gen in ready:
                    result = self._take(gen, on_event)
                    if result is not None:
                        yield result
                if time.monotonic() - last_watch > WATCH_EVERY_S:
                    last_watch = time.monotonic()
                    self._watchdog()
        finally:
            if self._live:  # interrupted, closed, or the consumer stopped early
                self._cancel_live()

    def _may_start(self, request: TrialRequest) -> bool:
        """Each GPU trial has its device(s) to itself. On CPU nodes trials share the cores:
        a trial whose steps/s must count (``alone``) runs with nothing else in flight, and
        nothing starts beside it."""
        if self.on_gpu:
            return True
        if request.alone:
            return not self._live
        return not any(s.request.alone for s in self._live.values())

    def _take(self, gen: Any, on_event: EventCallback | None) -> TrialResult | None:
        """Handle the next item of a ready trial: an event, its result, or its failure."""
        ray = self.ray
        slot = self._live[gen]
        try:
            ref = next(gen)
        except StopIteration:
            del self._live[gen]
            return self._failed(slot, "crash", "Ray task ended", "the Ray task ended without "
                                                                 "a result")
        try:
            kind, payload = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            del self._live[gen]
            if slot.cancelled_why is None:
                if self._stop.is_set():
                    raise KeyboardInterrupt from None
                slot.cancelled_why = "the Ray task was cancelled outside vramtune"
            return self._failed(slot, "crash", "cancelled", slot.cancelled_why)
        except ray.exceptions.RayTaskError as exc:  # our code raised on the worker
            del self._live[gen]
            cause = getattr(exc, "cause", None) or exc
            return self._failed(slot, "error", type(cause).__name__, _exception_text(cause))
        except ray.exceptions.RayError as exc:  # the worker or node died, Ray's memory monitor
            del self._live[gen]
            reason = f"{type(exc).__name__}: {_first_line(exc)}"
            where = slot.where or {}
            slot.history.append(f"attempt {slot.attempt}"
                                + (f" on {where.get('host')} (worker pid {where.get('worker_pid')})"
                                   if where else "") + f" ended: {reason}")
            if slot.attempt < self.max_attempts:
                self._submit(slot)  # retried once; Ray places it on any node that fits
                return None
            return self._failed(slot, "crash", type(exc).__name__, _exception_text(exc))
        if kind == "where":
            slot.where = payload
            if not self.on_gpu:  # two trials on one CPU node share its cores
                for other in self._live.values():
                    if other is not slot and other.where is not None \
                            and other.where.get("node_id") == payload.get("node_id"):
                        other.shared = slot.shared = True
        elif kind == "event":
            if on_event is not None:
                on_event(payload)
        elif kind == "result":
            del self._live[gen]
            return self._annotate(slot, payload)
        return None

    def _annotate(self, slot: _Slot, result: TrialResult) -> TrialResult:
        where = slot.where or {}
        notes = list(result.notes)
        gpus = ",".join(where.get("gpu_ids") or [])
        notes.append(f"ran as a Ray task on {where.get('host', 'an unknown node')} "
                     f"(worker pid {where.get('worker_pid')}"
                     + (f", GPU {gpus}" if gpus else "") + ")")
        if slot.history:
            notes.extend(slot.history)
            notes.append(f"retried once after a Ray system failure: attempt {slot.attempt} "
                         f"measured this record")
        shared = slot.shared and result.status is not Status.INVALID
        if shared:
            notes.append(SHARED_NOTE)
        return replace(result, notes=tuple(notes), shared_run=shared or result.shared_run)

    def _failed(self, slot: _Slot, status: str, error_type: str, message: str) -> TrialResult:
        """A record for a trial that never reported: Ray lost it, or our code raised."""
        request, profile = slot.request, slot.request.profile
        shape = profile.shape_for(request.num_envs)
        where = slot.where or {}
        notes = [*slot.history]
        if where:
            notes.append(f"last attempt on {where.get('host')} (worker pid "
                         f"{where.get('worker_pid')})")
        if self.log_path is not None:
            notes.append(f"Ray's own messages about it: {self.log_path}")
        return TrialResult(
            status=Status(status), profile=profile.name, profile_hash=profile.hash,
            num_envs=request.num_envs, batch_size=shape.batch_size if shape else None,
            num_minibatches=shape.num_minibatches if shape else None,
            unroll_length=profile.unroll_length, backend=self.cap.backend,
            budget_bytes=request.budget_bytes, cap=self.cap.description,
            cap_bytes=request.enforced_bytes, purpose=request.purpose,
            training_steps=request.training_steps, device_count=request.device_count,
            error_type=error_type,
            error_message=message, versions=dict(self.node.versions),
            gpu_name=self.node.gpu.name if self.node.gpu else None,
            gpu_driver=self.node.gpu.driver if self.node.gpu else None,
            gpu_total_bytes=self.node.gpu.total_bytes if self.node.gpu else None,
            timestamp=utc_now(), notes=tuple(notes))

    def _watchdog(self) -> None:
        """Cancel trials that have not started and that no alive node can ever take (the
        last node of their type died): Ray would keep them pending forever."""
        waiting = [(g, s) for g, s in self._live.items() if s.where is None]
        if not waiting or self._placeable():
            return
        for gen, slot in waiting:
            slot.cancelled_why = (f"no alive Ray node offers {self.resources_text} any more "
                                  f"(the last one died or left): the trial could not run")
            with contextlib.suppress(Exception):
                self.ray.cancel(gen, force=True)

    def _placeable(self) -> bool:
        need = {"GPU": 1.0} if self.on_gpu else {"CPU": float(self.cpus_per_trial)}
        if self.gpu_type is not None:
            need[f"{ACCELERATOR_PREFIX}{self.gpu_type}"] = 0.001
        try:
            nodes = cluster_nodes(self.ray)
        except Exception:
            return True  # cannot tell: never cancel on a guess
        return any(n.alive and all(n.resources.get(k, 0) >= v for k, v in need.items())
                   for n in nodes)

    # stopping --------------------------------------------------------------------------------
    def interrupt(self) -> None:
        """From another thread (Ctrl-C in a mixed-cluster sweep): stop this executor's batch;
        its thread cancels the trials in flight and raises KeyboardInterrupt."""
        self._stop.set()

    def _cancel_live(self) -> None:
        ray = self.ray
        gens = list(self._live)
        self._live.clear()
        for gen in gens:
            with contextlib.suppress(Exception):
                ray.cancel(gen, force=True)  # kills the worker; PDEATHSIG takes the child
        done = []
        for gen in gens:
            with contextlib.suppress(Exception):
                done.append(gen.completed())
        if done:
            with contextlib.suppress(Exception):
                ray.wait(done, num_returns=len(done), timeout=CANCEL_WAIT_S)

    def close(self) -> None:
        """Cancel whatever still runs and let go of Ray (shut down if this sweep started it)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._live:
                self._cancel_live()
        finally:
            if self.log_path is not None:
                _CONNECTION.logs.discard(self.log_path)
            _CONNECTION.release()


def _exception_text(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[-2000:]
