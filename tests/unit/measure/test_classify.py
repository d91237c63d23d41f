import pytest

from vramtune.measure.trial import classify
from vramtune.measure.wire import ChildReport
from vramtune.records import Status


def test_ok():
    assert classify(ChildReport(status="ok"), 0, False, "")[0] is Status.OK


def test_resource_exhausted_is_oom():
    child = {"status": "error", "error_type": "jax.errors.JaxRuntimeError",
             "error_message": "RESOURCE_EXHAUSTED: Out of memory allocating 123 bytes."}
    status, kind, message = classify(ChildReport.from_dict(child), 3, False, "")
    assert status is Status.OOM and kind == "jax.errors.JaxRuntimeError"
    assert message.startswith("RESOURCE_EXHAUSTED")


def test_cpu_wording_of_oom():
    child = {"status": "error", "error_message": "INTERNAL: Buffer Definition Event: Error "
             "dispatching computation: Out of memory allocating 513156296 bytes."}
    assert classify(ChildReport.from_dict(child), 3, False, "")[0] is Status.OOM


def test_other_exception_is_error():
    child = {"status": "error", "error_type": "builtins.KeyError", "error_message": "'x'"}
    assert classify(ChildReport.from_dict(child), 3, False, "")[0] is Status.ERROR


def test_timeout_wins():
    assert classify(None, -9, True, "")[0] is Status.TIMEOUT


def test_signal_without_result_is_crash():
    status, kind, message = classify(None, -11, False, "some output")
    assert status is Status.CRASH and kind == "SIGSEGV" and "some output" in message


def test_abort_from_bad_alloc_is_oom():
    tail = "terminate called after throwing an instance of 'std::bad_alloc'"
    assert classify(None, -6, False, tail)[0] is Status.OOM


def test_nonzero_exit_without_result_is_crash():
    assert classify(None, 1, False, "")[0] is Status.CRASH


def test_blocked_warp_import_is_dropped_from_abort_tails():
    tail = ("Failed to import warp: import of warp halted; None in sys.modules\n"
            "Failed to import mujoco_warp: import of warp halted; None in sys.modules\n"
            "terminate called after throwing an instance of 'std::bad_alloc'\n")
    status, _, message = classify(None, -6, False, tail)
    assert status is Status.OOM and "warp" not in message and "std::bad_alloc" in message


def test_cache_loader_noise_is_dropped_from_abort_tails():
    tail = ("E1121 19:56:52.541395 3916 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result.\n"
            "terminate called after throwing an instance of 'std::bad_alloc'\n")
    status, _, message = classify(None, -6, False, tail)
    assert status is Status.OOM and "cpu_aot_loader" not in message


CAP = 1_170_000_000


def test_silent_segfault_at_the_cap_is_oom_with_its_evidence():
    # as a CI run saw: 1024 envs killed by SIGSEGV, data segment sampled at 99.4% of the cap
    status, kind, message = classify(None, -11, False, "", rlimit_data_bytes=CAP,
                                     peak_data_bytes=1_162_543_104)
    assert status is Status.OOM and kind == "SIGSEGV at the cap"
    assert "99.4% of RLIMIT_DATA" in message and "counted as out of memory" in message


def test_segfault_far_below_the_cap_stays_a_crash():
    status, kind, _ = classify(None, -11, False, "", rlimit_data_bytes=CAP,
                               peak_data_bytes=int(CAP * 0.5))
    assert status is Status.CRASH and kind == "SIGSEGV"


def test_segfault_without_a_cap_or_a_peak_stays_a_crash():
    assert classify(None, -11, False, "", rlimit_data_bytes=None,
                    peak_data_bytes=CAP)[0] is Status.CRASH
    assert classify(None, -11, False, "", rlimit_data_bytes=CAP,
                    peak_data_bytes=None)[0] is Status.CRASH


def test_sigkill_at_the_cap_is_not_an_allocation_failure():
    # a kill from outside (the OOM killer, a user) is not the cap refusing an allocation
    assert classify(None, -9, False, "", rlimit_data_bytes=CAP,
                    peak_data_bytes=CAP)[0] is Status.CRASH


def test_segfault_message_shows_the_last_sample_beside_the_peak():
    _, _, message = classify(None, -11, False, "", rlimit_data_bytes=CAP,
                             peak_data_bytes=1_162_543_104, last_data_bytes=int(CAP * 0.83))
    assert "99.4% of RLIMIT_DATA" in message and "last sample 83.0%" in message
    assert "no diagnostic" in message


def test_the_threshold_is_ninety_percent_of_the_cap():
    at = classify(None, -11, False, "", rlimit_data_bytes=CAP, peak_data_bytes=int(CAP * 0.9))
    below = classify(None, -11, False, "", rlimit_data_bytes=CAP,
                     peak_data_bytes=int(CAP * 0.9) - 1)
    assert at[0] is Status.OOM and below[0] is Status.CRASH


@pytest.mark.parametrize("tail", [
    "F1125 08:00:00.123456 1234 pjrt_client.cc:99] Check failed: buffer != nullptr",
    "external/xla/xla/service/foo.cc:12: Check failed: ok",
    "terminate called after throwing an instance of 'std::runtime_error'",
    "python3: foo.c:10: bar: Assertion `x > 0' failed.",
    "Fatal Python error: Cannot recover from stack overflow.",
])
def test_a_death_with_a_diagnostic_at_the_cap_stays_a_crash(tail):
    # the tail says why it died: not a silent allocation past the cap
    status, kind, message = classify(None, -6, False, tail, rlimit_data_bytes=CAP,
                                     peak_data_bytes=int(CAP * 0.99))
    assert status is Status.CRASH and kind == "SIGABRT" and tail.split()[0] in message


def test_sigbus_at_the_cap_stays_a_crash():
    # a failed allocation does not end in SIGBUS (a bad mapping, truncated file, ... does)
    assert classify(None, -7, False, "", rlimit_data_bytes=CAP,
                    peak_data_bytes=int(CAP * 0.99))[0] is Status.CRASH


def test_faulthandler_naming_only_the_signal_is_still_silent():
    # PYTHONFAULTHANDLER=1 prints the signal and a stack: no cause, so the cap's rule applies
    tail = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):"
    assert classify(None, -11, False, tail, rlimit_data_bytes=CAP,
                    peak_data_bytes=int(CAP * 0.99))[0] is Status.OOM


def test_a_warp_capacity_overflow_is_its_own_status_naming_buffer_and_demand():
    child = ChildReport(status="ok", warp_overflow=["NEFC"], warp_solver_limits=["ITERATIONS"],
                        warp_njmax=12, warp_naconmax=4000, warp_constraint_rows_per_world_max=31,
                        warp_contacts_max=40, warp_contacts_per_world_max=9)
    status, kind, message = classify(child, 0, False, "")
    assert status is Status.OVERFLOW and kind == "capacity overflow"
    assert message == ("MJX-Warp buffer overflow: constraint rows: 31 per world asked for, "
                       "njmax 12; raise njmax")


def test_solver_iteration_limits_alone_are_not_an_overflow():
    child = ChildReport(status="ok", warp_overflow=[], warp_solver_limits=["ITERATIONS"])
    assert classify(child, 0, False, "")[0] is Status.OK
