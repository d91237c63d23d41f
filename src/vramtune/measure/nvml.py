"""NVML, optional: absent driver or library gives None and a notice, never a failure.

Uses ``nvidia-ml-py`` (module ``pynvml``), imported when a session starts so tests can put
a fake in ``sys.modules``. What the record may claim from it:

* Devices are the ones CUDA will use: ``CUDA_VISIBLE_DEVICES`` resolved to full NVML UUIDs
  (``measure.devices``: integers follow ``CUDA_DEVICE_ORDER``, UUID prefixes, MIG), not
  NVML index 0.
* Per-process memory of 0 is unknown, never "fits": drivers that report namespaced PIDs in
  containers return them with 0 bytes (Project-HAMi/HAMi-core#112,
  NVIDIA/open-gpu-kernel-modules PR #614); nvidia-ml-py turns "not available" into None.
* Process lists come from ``_v3``, then ``_v2``, then the unsuffixed call; only a missing
  symbol moves on (nvidia-ml-py >= 12 makes the unsuffixed call ``_v3`` again and raises
  ``NVMLLibraryMismatchError``); any other NVML error is "cannot tell", not "no process".
* Device used minus a pre-trial baseline stands in for a missing per-process figure only
  when NVML lists no other compute process on the device: otherwise it would count theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from vramtune.errors import UserError
from vramtune.measure.devices import GpuDevice, MigDevice, Resolution, resolve

_PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3",
                  "nvmlDeviceGetComputeRunningProcesses_v2",
                  "nvmlDeviceGetComputeRunningProcesses")


def _load_pynvml() -> Any:
    try:  # pragma: no cover - depends on the machine
        import pynvml
    except ImportError:  # pragma: no cover
        return None
    return pynvml


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML index of the physical card
    name: str
    driver: str
    total_bytes: int  # NVML's total of the device used: a MIG slice's, not the card's
    uuid: str | None = None  # full NVML UUID: GPU-... or MIG-...
    mig: bool = False


class Nvml:
    """A session with the GPUs CUDA will use; every method returns None when NVML cannot
    answer. ``visible`` and ``device_order`` default to the environment's."""

    def __init__(self, visible: str | None = None, device_order: str | None = None) -> None:
        self.notice: str | None = None
        self.notes: tuple[str, ...] = ()
        self.info: GpuInfo | None = None
        self.devices: tuple[GpuInfo, ...] = ()  # in CUDA ordinal order
        self.gpus: tuple[GpuDevice, ...] = ()  # every physical card NVML lists, NVML order
        self.resolution: Resolution | None = None
        self._handles: dict[str, Any] = {}
        self._nv = _load_pynvml()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
        device_order = device_order or os.environ.get("CUDA_DEVICE_ORDER")
        nv = self._nv
        if nv is None:
            self.notice = "NVML unavailable: the nvidia-ml-py package is not installed"
            return
        try:
            nv.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.notice = f"NVML unavailable ({_reason(exc)}): no GPU memory figures"
            return
        try:
            if nv.nvmlDeviceGetCount() < 1:
                self.notice = "NVML found no GPU: no GPU memory figures"
                return
            driver = _text(nv.nvmlSystemGetDriverVersion())
            self.gpus = tuple(self._card(i) for i in range(nv.nvmlDeviceGetCount()))
            self.resolution = resolve(visible, self.gpus, device_order)
            self.notes = self.resolution.notes
            devices = []
            for seen in self.resolution.devices:
                handle = nv.nvmlDeviceGetHandleByUUID(seen.uuid)
                total = seen.memory_total
                if total is None:
                    total = int(nv.nvmlDeviceGetMemoryInfo(handle).total)
                name = _text(nv.nvmlDeviceGetName(handle))
                self._handles[seen.uuid] = handle
                devices.append(GpuInfo(seen.gpu.index, name, driver, int(total), seen.uuid,
                                       seen.is_mig))
        except Exception as exc:
            self.notice = f"NVML error ({_reason(exc)}): no GPU memory figures"
            self._handles = {}
            return
        if not devices:
            self.notice = ("CUDA sees no GPU here (" + ("; ".join(self.notes) or
                                                        f"CUDA_VISIBLE_DEVICES={visible!r}")
                           + "): no GPU memory figures")
            return
        self.devices = tuple(devices)
        self.info = devices[0]

    def _card(self, index: int) -> GpuDevice:
        nv = self._nv
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        try:
            bus = _text(nv.nvmlDeviceGetPciInfo(handle).busId)
        except Exception:
            bus = ""
        try:
            mig_enabled = nv.nvmlDeviceGetMigMode(handle)[0] == nv.NVML_DEVICE_MIG_ENABLE
        except Exception:  # NotSupported: not a MIG-capable card
            mig_enabled = False
        migs: list[MigDevice] = []
        if mig_enabled:
            for slot in range(nv.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except Exception:  # NotFound: an empty slot
                    continue
                migs.append(MigDevice(_text(nv.nvmlDeviceGetUUID(mh)),
                                      int(nv.nvmlDeviceGetGpuInstanceId(mh)),
                                      int(nv.nvmlDeviceGetComputeInstanceId(mh)), slot,
                                      int(nv.nvmlDeviceGetMemoryInfo(mh).total)))
        return GpuDevice(index, _text(nv.nvmlDeviceGetUUID(handle)), bus,
                         _text(nv.nvmlDeviceGetName(handle)),
                         int(nv.nvmlDeviceGetMemoryInfo(handle).total), mig_enabled,
                         tuple(migs))

    @property
    def available(self) -> bool:
        return bool(self._handles)

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(d.uuid for d in self.devices if d.uuid)

    def pick(self, count: int) -> tuple[GpuInfo, ...]:
        """The first ``count`` devices CUDA would use: what a trial is pinned to."""
        if count < 1:
            raise UserError(f"--devices must be a positive integer, got {count}")
        if count > len(self.devices):
            raise UserError(f"--devices {count}: only {len(self.devices)} GPU(s) visible here ("
                            + ", ".join(self.uuids) + ")")
        return self.devices[:count]

    def _handle(self, uuid: str | None) -> Any:
        if not self._handles:
            return None
        if uuid is None:
            return next(iter(self._handles.values()))
        return self._handles.get(uuid)

    def device_used_bytes(self, uuid: str | None = None) -> int | None:
        handle = self._handle(uuid)
        if handle is None:
            return None
        try:
            return int(self._nv.nvmlDeviceGetMemoryInfo(handle).used)
        except Exception:
            return None

    def process_used_bytes(self, uuid: str | None = None) -> dict[int, int | None] | None:
        """pid -> used bytes for the compute processes on a device; None where the driver
        does not say, and where it says 0 (see the module docstring). None: cannot tell."""
        handle = self._handle(uuid)
        if handle is None:
            return None
        nv = self._nv
        skip: tuple[type[BaseException], ...] = tuple(
            t for t in (getattr(nv, "NVMLError_FunctionNotFound", None),
                        getattr(nv, "NVMLLibraryMismatchError", None)) if isinstance(t, type))
        for name in _PROCESS_CALLS:
            fn = getattr(nv, name, None)
            if fn is None:
                continue
            try:
                procs = fn(handle)
            except skip:
                continue  # this driver lacks the symbol: the next version down
            except Exception:
                return None  # NoPermission, GpuIsLost, ...: cannot tell
            return {int(p.pid): (int(p.usedGpuMemory) if p.usedGpuMemory else None)
                    for p in procs}
        return None


@dataclass(frozen=True)
class GpuPeaks:
    """What NVML saw of one trial, per watched device (CUDA ordinal order)."""

    uuids: tuple[str, ...]
    process_peak_bytes: list[int | None]
    device_used_peak_bytes: list[int | None]
    notes: list[str] = field(default_factory=list)

    @property
    def process_peak_max_bytes(self) -> int | None:
        """The largest device's process peak (budgets are per device)."""
        known = [v for v in self.process_peak_bytes if v is not None]
        return max(known) if known and len(known) == len(self.process_peak_bytes) else None

    @property
    def device_used_peak_max_bytes(self) -> int | None:
        known = [v for v in self.device_used_peak_bytes if v is not None]
        return max(known) if known else None


class GpuMonitor:
    """One trial's devices: a baseline before launch, samples while it runs, peaks after.

    The process figure is the sum of the known per-PID figures of the trial's process tree.
    Where NVML gives none (PID not listed: host PIDs in a container; listed with 0 or n/a),
    device used minus the baseline stands in, but only if no other compute process was on
    the device before or during the trial.
    """

    def __init__(self, nvml: Nvml, uuids: tuple[str, ...] | None = None) -> None:
        self.nvml = nvml
        self.uuids = tuple(uuids) if uuids else nvml.uuids[:1]
        self.baseline_used = [nvml.device_used_bytes(u) for u in self.uuids]
        before = [nvml.process_used_bytes(u) for u in self.uuids]
        self.baseline_pids: list[set[int] | None] = [set(p) if p is not None else None
                                                     for p in before]
        self.known_peak: list[int | None] = [None] * len(self.uuids)
        self.used_peak: list[int | None] = [None] * len(self.uuids)
        self.ours_listed = [False] * len(self.uuids)
        self.crowded = [False] * len(self.uuids)  # another compute process was seen
        self.unreadable = [False] * len(self.uuids)

    def sample(self, tree: set[int]) -> int | None:
        """One sample; returns the trial's process figure summed over devices, if known."""
        total: int | None = None
        for i, uuid in enumerate(self.uuids):
            used = self.nvml.device_used_bytes(uuid)
            if used is not None:
                self.used_peak[i] = max(used, self.used_peak[i] or 0)
            procs = self.nvml.process_used_bytes(uuid)
            if procs is None:
                self.unreadable[i] = True
                continue
            ours = {pid: v for pid, v in procs.items() if pid in tree}
            strangers = [pid for pid in procs if pid not in tree]
            if ours:
                self.ours_listed[i] = True
            baseline = self.baseline_pids[i]
            if baseline:  # someone was on the device before we started
                self.crowded[i] = True
            # Not ours by PID: another process, or ours under a host PID (older drivers in
            # containers). More strangers than our tree has processes cannot all be ours.
            if (ours and strangers) or len(strangers) > len(tree):
                self.crowded[i] = True
            known = [v for v in ours.values() if v is not None]
            if known:
                self.known_peak[i] = max(sum(known), self.known_peak[i] or 0)
                total = (total or 0) + sum(known)
        return total

    def peaks(self) -> GpuPeaks:
        process: list[int | None] = []
        notes: list[str] = []
        for i, uuid in enumerate(self.uuids):
            if self.known_peak[i] is not None:
                process.append(self.known_peak[i])
                continue
            used, base = self.used_peak[i], self.baseline_used[i]
            why = ("listed with 0 or n/a for the trial's PID (a namespaced PID in a "
                   "container?)" if self.ours_listed[i] else
                   "no entry for the trial's PID (host PIDs in a container?)")
            if self.unreadable[i] or self.baseline_pids[i] is None:
                process.append(None)
                notes.append(f"{uuid}: NVML could not list compute processes: no "
                             f"per-process figure")
            elif self.crowded[i]:
                process.append(None)
                notes.append(f"{uuid}: NVML per-process figure unavailable ({why}) and other "
                             f"compute processes share the device: device used minus the "
                             f"baseline would count theirs, so no process figure")
            elif used is not None and base is not None and used > base:
                process.append(used - base)
                notes.append(f"{uuid}: NVML per-process figure unavailable ({why}): process "
                             f"peak = device used minus the pre-trial baseline (no other "
                             f"compute process on the device)")
            else:
                process.append(None)
                notes.append(f"{uuid}: NVML per-process figure unavailable ({why})")
        return GpuPeaks(self.uuids, process, list(self.used_peak), notes)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__
