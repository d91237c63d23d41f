"""Which NVML devices a CUDA process will use, from CUDA_VISIBLE_DEVICES + CUDA_DEVICE_ORDER.

Pure and standalone (stdlib only). The caller passes what NVML knows (physical GPUs in NVML
order, their MIG children) and, when it has them, the UUIDs the child's CUDA runtime reported
(``cuDeviceGetUuid_v2`` per CUDA ordinal). The runtime's answer is authoritative; parsing the
variable is a prediction, and the result says which one it is and how sure it is.

Rules, each with where it comes from:

* Unset: every GPU is visible; empty string: none (CUDA Programming Guide, 5.2.1.1
  CUDA_VISIBLE_DEVICES: "If the variable is not set, all GPU devices are visible. If the
  variable is set to an empty string, no GPU devices are visible.").
* Integer entries index CUDA's enumeration, which follows CUDA_DEVICE_ORDER: FASTEST_FIRST
  (default) or PCI_BUS_ID. NVML indexes in PCI order, so integers only map to NVML indices with
  certainty under PCI_BUS_ID (or one GPU, or all GPUs of one model -- then still a guess).
* UUID entries may be abbreviated: "specify enough digits from the beginning of the GPU UUID to
  uniquely identify that GPU" (same guide). NVML's nvmlDeviceGetHandleByUUID needs the full one.
* Legacy MIG form ``MIG-GPU-<gpu uuid>/<GI>/<CI>`` and the current ``MIG-<uuid>``.
* "If an invalid index is encountered, only devices with indices that appear before the invalid
  index in the list are visible" (same guide): parsing stops at the first invalid entry.
* Duplicates make the whole list invalid, mixing integers and UUIDs stops at the switch, at most
  one MIG device is visible to a process, and a MIG-enabled GPU in the list stands for its first
  MIG device while the plain GPUs are dropped: nvitop's reading (nvitop/api/device.py,
  ``_parse_cuda_visible_devices``: "return []  # duplicate identifiers found",
  "at most one MIG device is visible", "use the first MIG device and ignore all non-MIG GPUs").
  These are nvitop's model of CUDA, not NVIDIA documentation; each is flagged in ``notes``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"

_HEX_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_LEGACY_MIG = re.compile(r"^MIG-GPU-(?P<gpu>[0-9a-fA-F-]+)/(?P<gi>\d+)/(?P<ci>\d+)$")


@dataclass(frozen=True)
class MigDevice:
    uuid: str  # "MIG-xxxxxxxx-...", as nvmlDeviceGetUUID returns it on the MIG handle
    gpu_instance_id: int
    compute_instance_id: int
    mig_index: int = 0  # nvmlDeviceGetMigDeviceHandleByIndex position on the parent
    memory_total: int | None = None  # the slice's total (NVML on the MIG handle)


@dataclass(frozen=True)
class GpuDevice:
    index: int  # NVML index (PCI order)
    uuid: str  # "GPU-xxxxxxxx-..."
    pci_bus_id: str = ""  # "00000000:3B:00.0"
    name: str = ""
    memory_total: int | None = None  # NVML total: the whole card, MIG or not
    mig_enabled: bool = False
    migs: tuple[MigDevice, ...] = ()


@dataclass(frozen=True)
class Visible:
    """One device the CUDA process will see, in CUDA ordinal order."""

    uuid: str  # full NVML UUID: "GPU-..." or "MIG-..."
    gpu: GpuDevice  # the physical card (the parent of a MIG device)
    mig: MigDevice | None = None

    @property
    def is_mig(self) -> bool:
        return self.mig is not None

    @property
    def memory_total(self) -> int | None:
        return self.mig.memory_total if self.mig is not None else self.gpu.memory_total


@dataclass(frozen=True)
class Resolution:
    devices: tuple[Visible, ...]
    source: Literal["runtime", "parsed"]
    certain: bool  # False: a prediction that the child's runtime UUIDs should confirm
    notes: tuple[str, ...] = field(default=())

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(d.uuid for d in self.devices)


class DeviceResolutionError(ValueError):
    """What the runtime reported cannot be matched to NVML (a different view of the machine)."""


def normalize_order(device_order: str | None) -> str:
    """CUDA_DEVICE_ORDER as CUDA reads it: PCI_BUS_ID, anything else FASTEST_FIRST."""
    return PCI_BUS_ID if (device_order or "").strip() == PCI_BUS_ID else FASTEST_FIRST


def cuda_enumeration(gpus: Sequence[GpuDevice], device_order: str | None) -> list[GpuDevice]:
    """Physical GPUs in the order CUDA numbers them (our best knowledge without the runtime)."""
    by_pci = sorted(gpus, key=lambda g: (g.pci_bus_id.lower() or f"~{g.index:08d}", g.index))
    # FASTEST_FIRST orders by CUDA's own speed heuristic, which NVML cannot reproduce; for
    # cards of one model it is commonly PCI order, for mixed cards it is unknown.
    return by_pci


def order_is_known(gpus: Sequence[GpuDevice], device_order: str | None) -> bool:
    return normalize_order(device_order) == PCI_BUS_ID or len(gpus) <= 1


def _strip_integer(entry: str) -> str:
    """CUDA reads the leading digits of an integer entry (nvitop's strip_identifier)."""
    m = re.match(r"^[+-]?\d+", entry)
    return m.group(0) if m else entry


def _match_prefix(prefix: str, candidates: Sequence[str]) -> list[str]:
    p = prefix.lower()
    return [c for c in candidates if c.lower().startswith(p)]


def runtime_uuid_to_nvml(raw: str, gpus: Sequence[GpuDevice]) -> Visible:
    """Map one UUID from the CUDA runtime (cuDeviceGetUuid_v2 bytes formatted 8-4-4-4-12,
    with or without a GPU-/MIG- prefix) to the NVML device it names."""
    text = raw.strip()
    for prefix in ("GPU-", "MIG-"):
        if text.upper().startswith(prefix):
            text = text[len(prefix):]
            break
    text = text.lower()
    if re.fullmatch(r"[0-9a-f]{32}", text):
        text = f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
    if not _HEX_UUID.match(text):
        raise DeviceResolutionError(f"not a UUID: {raw!r}")
    for gpu in gpus:
        if gpu.uuid.lower() == f"gpu-{text}":
            return Visible(gpu.uuid, gpu)
        for mig in gpu.migs:
            if mig.uuid.lower() == f"mig-{text}":
                return Visible(mig.uuid, gpu, mig)
    raise DeviceResolutionError(
        f"the CUDA runtime reports device {raw!r}, which NVML does not list "
        "(NVML and CUDA see different machines: a container or a driver mismatch?)")


def resolve(value: str | None, gpus: Sequence[GpuDevice], device_order: str | None = None,
            runtime_uuids: Sequence[str] | None = None, *,
            single_mig: bool = True) -> Resolution:
    """The devices a CUDA process started with CUDA_VISIBLE_DEVICES=value will use.

    ``value`` None means unset. ``runtime_uuids``, when given, win: they are what the child's
    CUDA runtime enumerated, in ordinal order; the parsed prediction is compared with them
    and any difference is noted.
    """
    parsed = parse_visible_devices(value, gpus, device_order, single_mig=single_mig)
    if runtime_uuids is None:
        return parsed
    devices = tuple(runtime_uuid_to_nvml(u, gpus) for u in runtime_uuids)
    notes = list(parsed.notes)
    if parsed.uuids != tuple(d.uuid for d in devices):
        notes.append("CUDA_VISIBLE_DEVICES parsed to " + (", ".join(parsed.uuids) or "nothing")
                     + "; the CUDA runtime reported " + (", ".join(d.uuid for d in devices)
                                                          or "nothing") + ": using the runtime's")
    return Resolution(devices, "runtime", True, tuple(notes))


def parse_visible_devices(value: str | None, gpus: Sequence[GpuDevice],
                          device_order: str | None = None, *,
                          single_mig: bool = True) -> Resolution:
    """Predict the visible devices from the variable alone (no CUDA call)."""
    notes: list[str] = []
    order = normalize_order(device_order)
    enumeration = cuda_enumeration(gpus, device_order)
    certain = True

    if value is None:
        chosen: list[Visible] = [Visible(g.uuid, g) for g in enumeration]
        if len(gpus) > 1 and not order_is_known(gpus, device_order):
            certain = False
            notes.append("CUDA_DEVICE_ORDER is FASTEST_FIRST: CUDA's ordinal order of "
                         f"{len(gpus)} GPUs is predicted as PCI order, unconfirmed")
        return _apply_mig(chosen, notes, certain, single_mig)
    if value.strip() == "":
        notes.append("CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU")
        return Resolution((), "parsed", True, tuple(notes))

    chosen = []
    seen: set[str] = set()
    integers: bool | None = None
    entries = [e.strip() for e in value.split(",")]
    for position, entry in enumerate(entries):
        key = _strip_integer(entry) if re.match(r"^[+-]?\d", entry) else entry
        found, is_int, why = _parse_entry(key, gpus, enumeration)
        if key in seen or (found is not None and found.uuid in {v.uuid for v in chosen}):
            notes.append(f"duplicate entry {entry!r}: the whole list is invalid, CUDA sees no GPU "
                         "(nvitop's reading)")
            return Resolution((), "parsed", True, tuple(notes))
        seen.add(key)
        if found is not None and integers is not None and is_int != integers:
            found, why = None, "integers and UUIDs mixed"
        if found is None:
            notes.append(f"entry {entry!r} is invalid ({why}): CUDA stops there; ignored: "
                         + ",".join(entries[position:]))
            break
        if integers is None:
            integers = is_int
        if key != entry:
            notes.append(f"entry {entry!r} read as {key!r}")
        chosen.append(found)

    if integers and len(gpus) > 1 and order != PCI_BUS_ID:
        certain = False
        models = {g.name for g in gpus}
        notes.append("integer CUDA_VISIBLE_DEVICES under CUDA_DEVICE_ORDER=FASTEST_FIRST: "
                     + ("GPUs of one model, predicted as PCI order, unconfirmed"
                        if len(models) == 1 else
                        "mixed GPU models, CUDA's order is unknown without the runtime")
                     + "; set CUDA_DEVICE_ORDER=PCI_BUS_ID or pass the runtime's UUIDs")
    return _apply_mig(chosen, notes, certain, single_mig)


def _parse_entry(entry: str, gpus: Sequence[GpuDevice],
                 enumeration: Sequence[GpuDevice]) -> tuple[Visible | None, bool, str]:
    if re.fullmatch(r"[+-]?\d+", entry):
        n = int(entry)
        if n < 0 or n >= len(enumeration):
            return None, True, f"ordinal {n} out of range 0..{len(enumeration) - 1}"
        g = enumeration[n]
        return Visible(g.uuid, g), True, ""
    legacy = _LEGACY_MIG.match(entry)
    if legacy:
        parents = [g for g in gpus if g.uuid.lower().startswith("gpu-" + legacy["gpu"].lower())]
        if len(parents) != 1:
            return None, False, ("no GPU with that UUID prefix" if not parents
                                 else "ambiguous GPU UUID prefix")
        gi, ci = int(legacy["gi"]), int(legacy["ci"])
        for mig in parents[0].migs:
            if (mig.gpu_instance_id, mig.compute_instance_id) == (gi, ci):
                return Visible(mig.uuid, parents[0], mig), False, ""
        return None, False, f"no MIG device GI {gi} / CI {ci} on {parents[0].uuid}"
    upper = entry[:4].upper()
    if upper == "GPU-":
        hits = _match_prefix(entry, [g.uuid for g in gpus])
        if len(hits) != 1:
            return None, False, "no GPU with that UUID prefix" if not hits else \
                "ambiguous UUID prefix"
        g = next(g for g in gpus if g.uuid == hits[0])
        return Visible(g.uuid, g), False, ""
    if upper == "MIG-":
        pairs = [(g, m) for g in gpus for m in g.migs]
        hits = _match_prefix(entry, [m.uuid for _, m in pairs])
        if len(hits) != 1:
            return None, False, "no MIG device with that UUID prefix" if not hits else \
                "ambiguous MIG UUID prefix"
        g, m = next((g, m) for g, m in pairs if m.uuid == hits[0])
        return Visible(m.uuid, g, m), False, ""
    return None, False, "neither an ordinal nor a GPU-/MIG- UUID"


def _apply_mig(chosen: list[Visible], notes: list[str], certain: bool,
               single_mig: bool) -> Resolution:
    migs = [v for v in chosen if v.is_mig]
    if migs:
        if single_mig and len(chosen) > 1:
            notes.append("at most one MIG device is visible to a CUDA process: only "
                         f"{migs[0].uuid} (nvitop's reading)")
        return Resolution(tuple(migs[:1]) if single_mig else tuple(migs), "parsed", certain,
                          tuple(notes))
    out: list[Visible] = []
    for v in chosen:
        if v.gpu.mig_enabled:
            if not v.gpu.migs:
                notes.append(f"{v.gpu.uuid} has MIG enabled and no MIG device: not usable")
                continue
            first = min(v.gpu.migs, key=lambda m: m.mig_index)
            notes.append(f"{v.gpu.uuid} has MIG enabled: CUDA uses its MIG device {first.uuid}, "
                         "not the whole card, and no other GPU (nvitop's reading)")
            return Resolution((Visible(first.uuid, v.gpu, first),), "parsed", certain,
                              tuple(notes))
        out.append(v)
    return Resolution(tuple(out), "parsed", certain, tuple(notes))
