"""What crosses the process boundary between a trial child and its parent, typed once.

The child prints progress as ``@@vramtune {json}`` lines and writes one JSON report at the
end; the parent turns both into the frozen dataclasses below. One field list serves both
sides, so a figure the child measures cannot be dropped on the way into the record, and
callbacks get typed events instead of dicts keyed by magic strings. Standard library only:
the child imports this before JAX and must stay cheap to import.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENT_PREFIX = "@@vramtune "


# Evaluations over a confirming run's ceiling: at its usual ceiling (10 x the 8 steps after
# which a two-step trial's memory is steady: 80) one every 2 steps, so that the run may end
# near its floor (its trial's length, 10-12 steps at the largest sizes): it ends once the
# peak has held over the latter half of its reports, three reports in. At 25 over 80 steps
# (one every 4) a proof at 576-2048 envs could not end before step 16, comparing step 12
# with step 4, before the epoch that compiles again.
CONFIRM_EVALS = 40
CONFIRM_MIN_EVALS = 2  # evaluations after training began, before a confirming run may end
# Training steps in one brax epoch (between two progress calls and evaluations), at least.
# A user's epochs are long (brax's `num_evals` default of 1 makes the whole run one epoch;
# Playground's PPO configs set 5-10), and an epoch of one step peaks lower than theirs on
# CPU: at 2048 envs of `quick`, uncapped and interleaved, runs with one-step epochs peaked
# 1,402 MiB on average (21 runs, sd 20) against 1,426 with epochs of 2 or 10 steps (15 runs,
# a plain `ppo.train` with 10-step epochs among them: +22 MiB over the trial beside it, 3
# pairs); 1024 envs: +25 MiB (4 rounds). Two steps read as ten
# (benchmarks/proof_vs_search_run.py).
MIN_EPOCH_STEPS = 2


def confirm_epoch_steps(training_steps: int) -> int:
    """Training steps per epoch of a confirming run of this length: CONFIRM_EVALS reports
    over it, each epoch at least MIN_EPOCH_STEPS long."""
    return max(MIN_EPOCH_STEPS, -(-int(training_steps) // CONFIRM_EVALS))


@dataclass(frozen=True)
class TrialSpec:
    """What the parent asks of one trial child, written once as JSON in the trial's folder."""

    profile: dict[str, Any]  # Profile.to_dict(): the child rebuilds the profile from it
    num_envs: int
    batch_size: int
    num_minibatches: int
    result_path: str  # where the child writes its ChildReport
    rlimit_data_bytes: int | None = None  # CPU cap, set before JAX is imported
    compile_cache_dir: str | None = None
    training_steps: int | None = None  # train exactly this long (a confirming run)
    # with training_steps: the run may end from this many steps on, once memory holds
    min_training_steps: int | None = None
    import_path: str | None = None  # the profile's folder, for its env modules
    env_factory: str | None = None  # a pickled env's factory, base64 (workload/pickled.py)
    warp_capacities: dict[str, int] | None = None  # naconmax / njmax sized by the sweep

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, path: str | Path) -> TrialSpec:
        """The spec the parent wrote (an unknown field fails here, loudly)."""
        return cls(**json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class ChildReport:
    """Everything only the child can see; None where it was not measured."""

    status: str = "error"  # "ok" or "error"; the parent classifies further (oom, ...)
    backend: str | None = None
    device_kind: str | None = None
    device_count: int | None = None
    # what the cap looked like from inside: the parent compares it with the cap it planned
    device_uuids: list[str] | None = None  # the CUDA runtime's, per device (GPU)
    runtime_total_bytes_per_device: list[int | None] | None = None  # cuMemGetInfo's (GPU)
    jax_bytes_limit_per_device: list[int | None] | None = None  # the allocator's limit (GPU)
    fraction_in_force: str | None = None  # "XLA_CLIENT_MEM_FRACTION=0.0931" as the child had it
    allocator_in_force: str | None = None  # XLA_PYTHON_CLIENT_ALLOCATOR as the child had it
    rlimit_data_bytes: int | None = None  # the soft RLIMIT_DATA in force; None: unlimited
    compile_s: float | None = None
    steps_per_s: float | None = None
    steps_per_s_min: float | None = None
    steps_per_s_max: float | None = None
    steps_per_s_ci_low: float | None = None
    steps_per_s_ci_high: float | None = None
    steps_per_s_intervals: list[float] | None = None
    speed_steady: bool | None = None
    measured_intervals: int | None = None
    measure_window_s: float | None = None
    instructions_per_env_step: float | None = None  # CPU: user-space, all threads (counters)
    jax_peak_bytes_in_use: int | None = None
    jax_peak_pool_bytes: int | None = None
    jax_bytes_limit: int | None = None
    jax_peak_bytes_in_use_per_device: list[int | None] | None = None
    jax_peak_pool_bytes_per_device: list[int | None] | None = None
    host_peak_data_bytes: int | None = None  # CPU: peak VmData, what RLIMIT_DATA counts
    training_steps: int | None = None
    evals: int | None = None
    memory_steady: bool | None = None
    memory_steady_steps: int | None = None
    # what vramtune.compat.patch_brax put in for brax in this process ([]: nothing was needed)
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
    error_type: str | None = None
    error_message: str | None = None
    error_where: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> ChildReport | None:
        """The report, or None when the file is not a report (the child died mid-write)."""
        if not isinstance(data, dict):
            return None
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> str:
        # A numpy scalar (a comparison's bool, a rate) that slipped in must not cost the
        # whole measured result: write it as the Python value it holds.
        return json.dumps(dataclasses.asdict(self), default=_plain)

    def record_fields(self) -> dict[str, Any]:
        """The fields TrialResult takes as they are (status and errors are classified)."""
        skip = {"status", "error_type", "error_message", "error_where", "host_peak_data_bytes"}
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in skip}


PROOF_FIELDS = ("backend", "device_kind", "device_count", "device_uuids",
                "runtime_total_bytes_per_device", "jax_bytes_limit_per_device",
                "fraction_in_force", "allocator_in_force", "rlimit_data_bytes")


# --- progress events ------------------------------------------------------------------------

@dataclass(frozen=True)
class TrialStarted:
    """The sweep is launching a trial (sent by the sweep loop, not the child)."""

    index: int
    num_envs: int
    phase_name: str
    reason: str


@dataclass(frozen=True)
class Launched:
    """The trial's process exists (its pid is what the sampler and kill target)."""

    pid: int
    num_envs: int


@dataclass(frozen=True)
class TrialPhase:
    """The child moved on: importing, building, compiling, warming up, measuring, ready."""

    phase: str
    compile_s: float | None = None
    first_epoch_s: float | None = None


@dataclass(frozen=True)
class WorkloadInfo:
    """What the child found out about the workload while building it (e.g. contact sizes)."""

    info: dict[str, Any]


@dataclass(frozen=True)
class Sample:
    """One outside sample of the running trial, from the parent's sampler."""

    host_rss_bytes: int | None
    gpu_process_bytes: int | None


@dataclass(frozen=True)
class CapProof:
    """The child's view of its cap (PROOF_FIELDS), sent as soon as JAX is up, so that even a
    trial that dies or times out later says which cap it ran under."""

    fields: dict[str, Any]


@dataclass(frozen=True)
class SweepNote:
    """A line the sweep itself has to say between trials (the memory prior arrived)."""

    text: str


Event = TrialStarted | Launched | TrialPhase | WorkloadInfo | Sample | CapProof | SweepNote


def encode_event(**fields: Any) -> str:
    """One progress line as the child prints it."""
    return EVENT_PREFIX + json.dumps(fields)


def decode_event(line: str) -> tuple[dict[str, Any], Event] | None:
    """(raw fields, typed event) from a child's output line, or None if it is not one."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        data = json.loads(line[len(EVENT_PREFIX):])
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    if "workload" in data and isinstance(data["workload"], dict):
        return data, WorkloadInfo(data["workload"])
    if "proof" in data and isinstance(data["proof"], dict):
        return data, CapProof(data["proof"])
    if isinstance(data.get("phase"), str):
        return data, TrialPhase(data["phase"], _number(data.get("compile_s")),
                           _number(data.get("first_epoch_s")))
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
