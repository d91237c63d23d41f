"""Classify a failed trial's text as out-of-memory or not, GPU and host. Pure, stdlib only.

Noise lines are removed first: XLA's BFC allocator warns "ran out of memory ... The caller
indicates that this is not a failure" when an optional allocation (e.g. autotuning scratch)
fails and the program carries on (openxla/xla xla/tsl/framework/bfc_allocator.cc,
``BFCAllocator::AllocateRaw``), and the rematerialisation pass warns "Can't reduce memory use
below ..." and compiles on. A crash with such a line in its tail is not an OOM.

cuBLAS failing to initialise under memory starvation is an OOM (jax-ml/jax#7118: "failed to
create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"; XLA's own explanation:
"Failure to initialize cublas may be due to OOM"). XLA surfaces the same failure as
``INTERNAL: Failed to initialize BLAS support`` (GemmThunk::Initialize). These strings can also
mean a binary built without support for the GPU, so the verdict carries its reason and the
caller can show it.

Separate from OOM: lines that say the GPU cap was never applied (the CUDA plugin failed to start
and JAX went on on CPU). See ``cap_not_applied``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# (reason, pattern). Order matters only for the reported reason: the first hit names it.
OOM_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(rx, re.IGNORECASE)) for reason, rx in (
        # XLA's BFC allocator / buffer assignment, as JAX raises it
        ("xla_bfc", r"RESOURCE_EXHAUSTED:\s*Out of memory"),
        ("xla_bfc", r"Out of memory while trying to allocate \d+ bytes"),
        ("xla_resource_exhausted", r"\bRESOURCE_EXHAUSTED\b"),
        ("xla_bfc_legacy", r"Resource exhausted: Failed to allocate request for"),
        # cuBLAS / cuDNN could not get their workspace or handle
        ("cublas_init", r"failed to create cublas handle"),
        ("cublas_init", r"Failure to initialize cublas may be due to OOM"),
        ("cublas_init", r"CUBLAS_STATUS_NOT_INITIALIZED"),
        ("cublas_init", r"cuBlas has not been initialized"),
        ("cublas_init", r"Failed to initialize BLAS support"),
        ("cublas_init", r"GetBlasGemmAlgorithms"),
        ("cublas_alloc", r"CUBLAS_STATUS_ALLOC_FAILED|cuBlas allocation failure"),
        ("cudnn_alloc", r"CUDNN_STATUS_ALLOC_FAILED"),
        # the CUDA driver itself
        ("cuda_oom", r"CUDA_ERROR_OUT_OF_MEMORY"),
        ("cuda_oom", r"cudaErrorMemoryAllocation"),
        # NVIDIA Warp (MJX's Warp backend) allocates outside XLA
        ("warp_alloc", r"Failed to allocate \d+ bytes"),
        ("warp_alloc", r"Warp CUDA error 2: out of memory"),
        # host memory (CPU trials under RLIMIT_DATA, or the host side of a GPU trial)
        ("host", r"\bMemoryError\b|std::bad_alloc|Cannot allocate memory"),
        # OpenBLAS and the dynamic loader under RLIMIT_DATA, before Python can raise MemoryError
        ("host", r"Memory allocation still failed|failed to map segment from shared object"),
        # generic wording, last so that a specific reason wins
        ("generic", r"\bout of memory\b|\bOutOfMemory\b"),
    ))

NOISE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(rx, re.IGNORECASE)) for reason, rx in (
        ("bfc_not_a_failure",
         r"ran out of memory trying to allocate .*The caller indicates that this is not a failure"),
        ("remat_warning", r"Can't reduce memory use below .* by rematerialization"),
        ("bfc_gc", r"Garbage collection: deallocate free memory regions"),
        ("cache_loader", r"cpu_aot_loader"),
        ("blocked_warp", r"^Failed to import (mujoco_)?warp: import of warp halted"),
        ("blank", r"^\s*$"),
    ))

# A driver-level allocation failure that the BFC allocator recovers from by asking for 90% of
# the size (bfc_allocator.cc Extend: kBackpedalFactor = 0.9). Alone in a crash's tail it is a
# hint, not proof; next to a strong signal it adds nothing.
WEAK_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("driver_alloc_retry",
     re.compile(r"failed to allocate \S+ \(\d+ bytes\) from device: CUDA_ERROR_OUT_OF_MEMORY",
                re.IGNORECASE)),
    # autotuners try algorithms that need scratch space and skip those that do not fit
    # (jax-ml/jax#788: logged as E ... cudnn_conv_algorithm_picker.cc ... Resource exhausted)
    ("autotune_scratch", re.compile(r"algorithm_picker\.cc:\d+\].*Resource exhausted",
                                    re.IGNORECASE)),
)

CAP_NOT_APPLIED_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(rx)) for reason, rx in (
        ("both_fraction_variables",
         r"XLA_CLIENT_MEM_FRACTION is specified together with XLA_PYTHON_CLIENT_MEM_FRACTION"),
        ("plugin_initialize_failed",
         r"Jax plugin configuration error: Exception when calling \S+\.initialize\(\)"),
        ("cuda_versions", r"Unable to use CUDA because of the following issues with CUDA components"),
        ("cuda_backend_failed", r"CUDA backend failed to initialize"),
        ("no_cuda_jaxlib", (r"An NVIDIA GPU may be present on this machine, but a CUDA-enabled "
                           r"jaxlib is not installed\. Falling back to")),
        ("backend_unavailable", r"Unable to initialize backend '(cuda|gpu|rocm)'"),
        ("bad_allocator_variable", r"XLA_PYTHON_CLIENT_ALLOCATOR env var must be"),
    ))

# Lines that say why a process died (so not a silent allocation that failed under RLIMIT_DATA
# and was written through unchecked): absl's FATAL log lines start "F" + MMDD, a CHECK prints
# "Check failed", C++ and C name what they abort on, CPython names its own fatal errors.
DIAGNOSED_DEATH_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(rx)) for reason, rx in (
        ("check_failed", r"Check failed"),
        ("absl_fatal", r"^F\d{4} "),
        ("uncaught_exception", r"terminate called after throwing"),
        ("assertion", r"Assertion .* failed"),
        # faulthandler (PYTHONFAULTHANDLER in the user's environment) reports the signal
        # itself the same way: that names no cause, so it does not count
        ("python_fatal", r"Fatal Python error: (?!Segmentation fault|Aborted)"),
    ))

@dataclass(frozen=True)
class Verdict:
    oom: bool
    strength: Literal["strong", "weak", "none"]
    reason: str | None  # first matching reason, e.g. "xla_bfc", "cublas_init"
    line: str | None  # the line that decided it
    noise: tuple[str, ...] = ()  # noise reasons seen (e.g. "bfc_not_a_failure")


def split_noise(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(kept lines, [(noise reason, line)])."""
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for line in text.splitlines():
        for reason, rx in NOISE_PATTERNS:
            if rx.search(line):
                dropped.append((reason, line))
                break
        else:
            kept.append(line)
    return kept, dropped


def classify_text(text: str) -> Verdict:
    """Is this failure text an out-of-memory? Noise lines never count."""
    kept, dropped = split_noise(text)
    noise = tuple(dict.fromkeys(r for r, _ in dropped))
    weak: Verdict | None = None
    for line in kept:
        weak_reason = next((r for r, rx in WEAK_PATTERNS if rx.search(line)), None)
        if weak_reason is not None:  # a recoverable driver failure: never strong on its own
            weak = weak or Verdict(True, "weak", weak_reason, line.strip(), noise)
            continue
        for reason, rx in OOM_PATTERNS:
            if rx.search(line):
                return Verdict(True, "strong", reason, line.strip(), noise)
    return weak or Verdict(False, "none", None, None, noise)


def cap_not_applied(text: str) -> list[tuple[str, str]]:
    """[(reason, line)] for lines saying the CUDA backend, and so the cap, never came up."""
    return _hits(text, CAP_NOT_APPLIED_PATTERNS)


def _hits(text: str, patterns: tuple[tuple[str, re.Pattern[str]], ...]) -> list[tuple[str, str]]:
    """[(reason, line)]: each line once, under the first pattern it matches."""
    hits = []
    for line in text.splitlines():
        for reason, rx in patterns:
            if rx.search(line):
                hits.append((reason, line.strip()))
                break
    return hits


def diagnosed_death(text: str) -> list[tuple[str, str]]:
    """[(reason, line)] for lines saying why the process died (``DIAGNOSED_DEATH_PATTERNS``)."""
    return _hits(text, DIAGNOSED_DEATH_PATTERNS)


