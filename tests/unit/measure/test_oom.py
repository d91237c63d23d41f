"""The out-of-memory classifier on recorded GPU error text, and through ``trial.classify``
as a trial that died with that text in its output would be classified."""

import re

import pytest

from tests.unit.measure.gpu_error_strings import RECORDED_CAP_FAILURES, RECORDED_ERRORS
from vramtune.measure.oom import cap_not_applied, classify_text, split_noise
from vramtune.measure.trial import classify
from vramtune.measure.wire import ChildReport
from vramtune.records import Status


@pytest.mark.parametrize("text,oom,strength,source", RECORDED_ERRORS,
                         ids=[s[:48] for *_, s in RECORDED_ERRORS])
def test_recorded_strings(text, oom, strength, source):
    v = classify_text(text)
    assert (v.oom, v.strength) == (oom, strength), (source, v)


@pytest.mark.parametrize("text,oom,strength,source", RECORDED_ERRORS,
                         ids=[s[:48] for *_, s in RECORDED_ERRORS])
def test_recorded_strings_as_a_dead_trials_tail(text, oom, strength, source):
    status, kind, message = classify(None, -6, False, text)
    if strength == "strong":
        assert status is Status.OOM and kind == "process abort", source
    else:
        assert status is Status.CRASH and kind == "SIGABRT", source
        if strength == "weak":
            assert "not proof" in message


@pytest.mark.parametrize("text,reason,source", RECORDED_CAP_FAILURES,
                         ids=[s[:48] for *_, s in RECORDED_CAP_FAILURES])
def test_cap_failures(text, reason, source):
    assert [r for r, _ in cap_not_applied(text)] == [reason]


@pytest.mark.parametrize("text,reason,source", RECORDED_CAP_FAILURES,
                         ids=[s[:48] for *_, s in RECORDED_CAP_FAILURES])
def test_a_plugin_that_never_started_is_an_error_not_an_oom(text, reason, source):
    child = ChildReport(status="error", error_type="builtins.RuntimeError", error_message=text)
    status, _, message = classify(child, 3, False, "")
    assert status is Status.ERROR and message.startswith("cap not applied: ")
    assert classify(None, 1, False, text)[0] is Status.ERROR


def test_cublas_init_is_oom_with_its_reason():
    v = classify_text(RECORDED_ERRORS[0][0])
    assert v.reason == "cublas_init" and "CUBLAS_STATUS_NOT_INITIALIZED" in v.line


def test_bfc_warning_is_noise_even_next_to_a_crash():
    text = ("W0000 bfc_allocator.cc:513] Allocator (GPU_0_bfc) ran out of memory trying to "
            "allocate 2.00GiB with freed_by_count=0. The caller indicates that this is not a "
            "failure, but this may mean that there could be performance gains if more memory "
            "were available.\nFatal Python error: Segmentation fault")
    v = classify_text(text)
    assert not v.oom and v.noise == ("bfc_not_a_failure",)
    assert classify(None, -11, False, text)[0] is Status.CRASH


def test_bfc_warning_does_not_hide_a_real_oom():
    text = ("Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB with "
            "freed_by_count=0. The caller indicates that this is not a failure, but this may mean "
            "...\njax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
            "allocate 2147483648 bytes.")
    v = classify_text(text)
    assert v.oom and v.strength == "strong" and v.reason == "xla_bfc"


def test_cublas_failure_raised_in_the_child_is_oom():
    child = ChildReport(status="error", error_type="jax.errors.JaxRuntimeError",
                        error_message="INTERNAL: Failed to initialize BLAS support")
    assert classify(child, 3, False, "")[0] is Status.OOM


def test_driver_retry_line_is_only_weak():
    text = ("I0000 cuda_executor.cc:1] failed to allocate 4.00G (4294967296 bytes) from device: "
            "CUDA_ERROR_OUT_OF_MEMORY: out of memory\nSegmentation fault (core dumped)")
    assert classify_text(text).strength == "weak"


def test_plain_cuda_oom_is_strong():
    v = classify_text("RuntimeError: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
    assert v.strength == "strong" and v.reason == "cuda_oom"


def test_host_oom():
    assert classify_text("MemoryError").reason == "host"
    assert classify_text("terminate called after throwing an instance of 'std::bad_alloc'").oom


def test_warp_allocation():
    v = classify_text("Warp CUDA error 2: out of memory (in function wp_alloc_device)")
    assert v.oom and v.reason == "warp_alloc"


def test_not_oom():
    for text in ("ValueError: shapes do not match", "AssertionError", "", "Killed by SIGSEGV"):
        assert not classify_text(text).oom


def test_split_noise_keeps_the_rest():
    kept, dropped = split_noise("a\n\ncpu_aot_loader something\nb")
    assert kept == ["a", "b"] and [r for r, _ in dropped] == ["blank", "cache_loader"]


def bfc_limits(text: str) -> dict[int, int]:
    """device ordinal -> pool limit in bytes, from XLA's INFO line (when logging shows it)."""
    pattern = re.compile(r"XLA backend (?:will use up to|allocating) (\d+) bytes on device (\d+) "
                         r"for (BFCAllocator|CudaAsyncAllocator)")
    return {int(dev): int(n) for n, dev, _ in pattern.findall(text)}


def test_bfc_limits_from_the_info_line():
    text = ("I0000 gpu_helpers.cc:136] XLA backend will use up to 7516192768 bytes on device 0 for "
            "BFCAllocator.\nI0000 gpu_helpers.cc:136] XLA backend allocating 7516192768 bytes on "
            "device 1 for BFCAllocator.")
    assert bfc_limits(text) == {0: 7516192768, 1: 7516192768}
