"""The trial record: one frozen dataclass, units in the field names, None for 'not measured'.

A figure that could not be measured is None (printed 'n/a'), never 0: a zero in a memory
column would claim the workload used no memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


def utc_now() -> str:
    """The timestamp every record and file carries: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class Status(StrEnum):
    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    CRASH = "crash"  # killed by a signal, or exited without a result
    INVALID = "invalid"  # rejected by Brax's rules before launch
    ERROR = "error"  # any other exception; the message is kept
    # MJX-Warp's contact or constraint buffers were too small for what the steps asked:
    # contacts or constraint rows were dropped, so the physics was not the user's
    OVERFLOW = "overflow"


FAILED_BY_MEMORY = frozenset({Status.OOM})
# Past the boundary whatever the peak: the size ran out, crashed (under a CPU cap some OOMs
# end by a signal) or ran past its time limit.
BOUNDARY_FAILURES = frozenset({Status.OOM, Status.TIMEOUT, Status.CRASH})
# Not a memory limit: fix the workload (an overflow: raise the capacity it names)
STOPPERS = frozenset({Status.ERROR, Status.INVALID, Status.OVERFLOW})
PARALLEL_AUTO = "auto"  # --parallel auto: K planned from the device by the executor
MAX_PARALLEL = 1024  # trials at once: far above any card's count of capped trials


class Objective(StrEnum):
    """What the pick among the sizes that fit maximises."""

    THROUGHPUT = "throughput"
    KNEE = "knee"  # the smallest size within 5% of the fastest
    MAX_ENVS = "max-envs"

GPU_BACKENDS = frozenset({"gpu", "cuda", "rocm"})
VRAM = "VRAM"
HOST_RAM = "host RAM"


def memory_kind(on_gpu: bool) -> str:
    """What a peak is a peak of, in the one spelling every view uses: never call host
    memory VRAM (on the CPU backend every figure is the process's host RAM)."""
    return VRAM if on_gpu else HOST_RAM


def any_gpu(results: Iterable[TrialResult]) -> bool:
    """Whether a run (or any set of trials) measured a GPU: then its peaks are VRAM."""
    return any(r.is_gpu for r in results)


class Purpose(StrEnum):
    """Why a trial ran: the search, a repeat at the edge, or the long confirming run."""

    SEARCH = "search"
    REPEAT = "repeat"
    CONFIRM = "confirm"
    ALONE = "alone"  # a fitting size run with nothing beside it, for its steps/s


MAX_RECORDED_INTERVALS = 64  # per-interval rates a record keeps (the trial's last ones)


@dataclass(frozen=True)
class TrialResult:
    status: Status
    profile: str
    profile_hash: str
    num_envs: int
    batch_size: int | None = None
    num_minibatches: int | None = None
    unroll_length: int | None = None
    backend: str | None = None  # jax platform the child ran on: cpu, gpu
    device_kind: str | None = None
    device_count: int | None = None
    device_uuids: list[str] | None = None  # the CUDA runtime's, per device (GPU)
    # budget and how it was enforced
    budget_bytes: int | None = None
    cap: str | None = None  # e.g. "RLIMIT_DATA=1500000000" or "XLA_CLIENT_MEM_FRACTION=0.0931"
    cap_bytes: int | None = None  # what the cap held the trial to: budget x (1 - headroom)
    # the cap as the trial saw it from inside, checked against the plan (else status error)
    cap_check: str | None = None  # e.g. "bytes_limit 7.21 GiB in force, 7.21 GiB intended"
    pool_limit_intended_bytes: int | None = None  # GPU: fraction x the runtime's total
    jax_bytes_limit_per_device: list[int | None] | None = None
    runtime_total_bytes_per_device: list[int | None] | None = None  # cuMemGetInfo's total
    fraction_in_force: str | None = None
    allocator_in_force: str | None = None
    rlimit_data_bytes: int | None = None  # CPU: the soft RLIMIT_DATA in force; None: unlimited
    purpose: Purpose = Purpose.SEARCH
    # other trials ran on the same device at the same time: its memory verdict holds (it had
    # its own cap), its speed figures do not (they shared the compute)
    shared_run: bool = False
    # how long it trained, and whether memory had stopped growing when it stopped
    training_steps: int | None = None
    evals: int | None = None
    memory_steady: bool | None = None
    # training steps at which the last steady stretch of memory began: in a search trial, where
    # the steady rule first held (sizes the confirming run); in a confirming run that ended
    # once memory held, the start of the latter half it held over
    memory_steady_steps: int | None = None
    # speed (compile excluded)
    compile_s: float | None = None
    steps_per_s: float | None = None  # median over the measured intervals, all devices
    steps_per_s_per_device: float | None = None  # steps_per_s / device_count
    steps_per_s_min: float | None = None
    steps_per_s_max: float | None = None
    # steady throughput: the 95% interval of the median (order statistics), the per-interval
    # rates it came from (at most MAX_RECORDED_INTERVALS, the last ones), and whether that interval was within
    # the profile's measure.speed_tolerance when the trial stopped
    steps_per_s_ci_low: float | None = None
    steps_per_s_ci_high: float | None = None
    steps_per_s_intervals: list[float] | None = None
    speed_steady: bool | None = None
    measured_intervals: int | None = None
    measure_window_s: float | None = None  # steady-state time the median was taken over
    # CPU: instructions retired in user space by all the trial's threads per env step over the
    # measuring window (the CPU's counter, measure.counters; evaluation included when the
    # profile evaluates): the work a step costs, whatever else the machine is doing. None
    # where the counter is refused, and on a GPU
    instructions_per_env_step: float | None = None
    # JAX allocator (GPU backends only; CPU's memory_stats() is None). Scalars are the
    # largest device's (budgets are per device), lists per device in CUDA ordinal order.
    jax_peak_bytes_in_use: int | None = None  # live peak: what the arrays needed at once
    jax_peak_pool_bytes: int | None = None  # pool peak: BFC regions, doubling, up to the limit
    jax_bytes_limit: int | None = None
    jax_peak_bytes_in_use_per_device: list[int | None] | None = None
    jax_peak_pool_bytes_per_device: list[int | None] | None = None
    # NVML, sampled by the parent
    nvml_process_peak_bytes: int | None = None  # what the process took from the device
    nvml_device_used_peak_bytes: int | None = None
    nvml_process_peak_bytes_per_device: list[int | None] | None = None
    # NVML process minus pool: CUDA context, libraries, Warp: not capped by the fraction
    outside_pool_bytes: int | None = None
    outside_pool_bytes_per_device: list[int | None] | None = None
    nvml_note: str | None = None
    # host memory
    host_peak_rss_bytes: int | None = None  # exact, from os.wait4's ru_maxrss
    host_tree_rss_peak_bytes: int | None = None  # sampled RSS of the whole process tree
    host_peak_data_bytes: int | None = None  # sampled data segment (VmData): what RLIMIT_DATA counts
    wall_s: float | None = None
    exit_code: int | None = None  # negative: killed by that signal
    error_type: str | None = None
    error_message: str | None = None  # the last lines, enough to see why
    error_where: str | None = None  # phase and innermost frame, for environment errors
    versions: dict[str, str] = field(default_factory=dict)
    # the stand-ins vramtune.compat.patch_brax put in for brax in the trial's process (jax
    # functions brax main no longer calls); [] none were needed; None: not recorded
    stack_patches: list[str] | None = None
    # MJX-Warp (measure/contacts.py): the capacities in force, the contact probe's demand
    # (largest over its steps; contacts all worlds together and per world, constraint rows
    # likewise), the overflows it saw (capacities, apart from solver-iteration limits), and
    # Warp's kernel builds (cold: built now; warm: loaded from Warp's kernel cache). None:
    # not a Warp environment
    warp_naconmax: int | None = None
    warp_njmax: int | None = None
    warp_probe_steps: int | None = None
    warp_probe_s: float | None = None
    warp_contacts_max: int | None = None
    warp_contacts_per_world_max: int | None = None
    warp_constraint_rows_max: int | None = None
    warp_constraint_rows_per_world_max: int | None = None
    warp_overflow: list[str] | None = None
    warp_solver_limits: list[str] | None = None
    warp_kernel_cache: str | None = None
    warp_kernels_compiled: int | None = None
    warp_kernels_cached: int | None = None
    warp_kernel_build_s: float | None = None
    # GPU: the high-water mark of Warp's own CUDA memory pool (cudaMallocAsync: its step
    # temporaries, held by the CUDA graphs it captures), outside XLA's pool and its cap
    warp_mempool_high_bytes: int | None = None
    # GPU: the bytes of the budget the cap left outside XLA's pool for that pool (predicted
    # from earlier trials' high-water marks); None: none left (a CPU, or nothing measured yet)
    warp_pool_room_bytes: int | None = None
    warp_probe_error: str | None = None  # the contact probe failed: why (demand None)
    # Where the memory goes (measure/ledger.py), in bytes: the trainer's state at its first
    # training epoch by role, the evaluator's state and the params copy it is given, XLA's
    # figures for the epoch (outputs not donated, temporaries) and the evaluation
    # (temporaries), and the rollout (a part of the epoch's temporaries, not added to them).
    # Per process on a CPU, per device on a GPU. None: not counted (the error says why)
    ledger_params_bytes: int | None = None
    ledger_optimizer_bytes: int | None = None
    ledger_normalizer_bytes: int | None = None
    ledger_env_state_bytes: int | None = None
    ledger_eval_state_bytes: int | None = None
    ledger_keys_bytes: int | None = None
    ledger_epoch_outputs_bytes: int | None = None
    ledger_epoch_temp_bytes: int | None = None
    ledger_eval_temp_bytes: int | None = None
    ledger_rollout_bytes: int | None = None
    # the peak the cap counts (data segment / pool) so far, before and after the epoch's compile
    ledger_peak_before_epoch_compile_bytes: int | None = None
    ledger_peak_after_epoch_compile_bytes: int | None = None
    ledger_peak_before_eval_bytes: int | None = None  # around the first evaluation
    ledger_peak_after_eval_bytes: int | None = None
    # the epoch's scan: its length (training steps) and the outputs it stacks per step
    ledger_epoch_steps: int | None = None
    ledger_stacked_bytes_per_step: int | None = None
    ledger_error: str | None = None
    gpu_name: str | None = None
    gpu_driver: str | None = None
    gpu_total_bytes: int | None = None
    timestamp: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def is_gpu(self) -> bool:
        return self.backend in GPU_BACKENDS

    @property
    def memory_label(self) -> str:
        """What the peak is a peak of: never call host memory VRAM."""
        return memory_kind(self.is_gpu)

    @property
    def process_peak_bytes(self) -> int | None:
        """What the process took from the device: NVML per process, else the allocator
        pool. GPU only (None on CPU, where the host figures say it)."""
        if not self.is_gpu:
            return None
        if self.nvml_process_peak_bytes is not None:
            return self.nvml_process_peak_bytes
        return self.jax_peak_pool_bytes

    @property
    def peak_bytes(self) -> int | None:
        """The peak to hold against the budget: what the process took from the device
        (NVML per-process, else the allocator pool, else the live peak) on GPU; exact peak
        RSS on CPU. An NVML figure above the budget is over budget, whatever the pool did:
        memory outside the pool is not capped."""
        if self.is_gpu:
            process = self.process_peak_bytes
            return process if process is not None else self.jax_peak_bytes_in_use
        return self.host_peak_rss_bytes if self.host_peak_rss_bytes is not None else \
            self.host_tree_rss_peak_bytes

    @property
    def cap_figure_bytes(self) -> int | None:
        """The figure the cap counts: the data segment under RLIMIT_DATA on CPU, the
        allocator pool under the memory fraction on GPU."""
        if self.is_gpu:
            return self.jax_peak_pool_bytes
        return self.host_peak_data_bytes

    @property
    def line_figure_bytes(self) -> int | None:
        """The peak held against a line: ``cap_figure_bytes`` where measured, else the plain
        peak (``peak_bytes``) of records that predate it."""
        figure = self.cap_figure_bytes
        return figure if figure is not None else self.peak_bytes

    @property
    def cap_figure_words(self) -> str:
        """'pool' / 'data segment': what ``cap_figure_bytes`` is a peak of; '' when not
        measured (then a peak shown is the plain peak, ``peak_bytes``)."""
        if self.cap_figure_bytes is None:
            return ""
        return "pool" if self.is_gpu else "data segment"

    @property
    def cap_figure_limit_bytes(self) -> int | None:
        """What ``cap_figure_bytes`` is held to. On GPU the pool's limit in force (JAX's
        bytes_limit: the cap minus what lives outside the pool), not the cap itself: a pool
        shown against the whole cap looked twice as roomy as it was (seen on an H100: pool
        782 MiB "of the 1.68 GiB cap" while the pool limit was 842 MiB)."""
        if self.is_gpu:
            return self.jax_bytes_limit if self.cap_bytes is not None else None
        return self.cap_bytes

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = str(self.status)
        data["purpose"] = str(self.purpose)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["status"] = Status(kwargs["status"])
        kwargs["purpose"] = Purpose(kwargs.get("purpose") or Purpose.SEARCH)
        kwargs["notes"] = tuple(kwargs.get("notes") or ())
        kwargs["versions"] = dict(kwargs.get("versions") or {})
        return cls(**kwargs)
