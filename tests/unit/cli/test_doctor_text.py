"""The doctor's paste-able text for a GPU machine's report (the probes are tested for real
on CPU in tests/integration/test_devices.py and on a GPU in test_gpu.py)."""

from vramtune.cli.doctor_cmd import doctor_text
from vramtune.measure.doctor import CapProbe, DoctorDevice, DoctorReport

UUID = "MIG-d184f67c-c95f-5ef2-a935-195bd0094fbd"


def report(**over) -> DoctorReport:
    fields = dict(
        stack="jax 0.9.2 + brax 0.14.2: trains", stack_patches=(),
        versions={"jax": "0.9.2", "jaxlib": "0.9.2"}, jax_platforms=None,
        cuda_plugins={"jax-cuda12-plugin": "0.9.2"}, backend="gpu",
        backend_devices=("NVIDIA A100-SXM4-80GB MIG 1g.10gb",), plugin_errors=(),
        nvml="driver 560.35.03", cuda_visible_devices=None,
        device_notes=("GPU-3eb7 has MIG enabled: CUDA uses its MIG device",),
        devices=(DoctorDevice(UUID, "MIG 1g.10gb", 0, True, 10 * 2**30, 9 * 2**30),),
        fraction_var="XLA_CLIENT_MEM_FRACTION", overhead_bytes=420 * 2**20,
        per_process_nvml="works",
        cap_probe=CapProbe("gpu", "XLA_CLIENT_MEM_FRACTION=0.2", 2 * 10**9, 2 * 10**9,
                           "oom: RESOURCE_EXHAUSTED: Out of memory", None, 4.2))
    fields.update(over)
    return DoctorReport(**fields)


def test_gpu_report_has_everything_a_bug_report_needs():
    text = doctor_text(report())
    for expected in ("CUDA plugin: jax-cuda12-plugin 0.9.2",
                     "jax backend with your environment: gpu, 1 device(s)",
                     f"GPU {UUID}: MIG 1g.10gb, NVML index 0, MIG slice, total 10.00 GiB (NVML), "
                     "9.00 GiB (CUDA runtime)",
                     "fraction variable this jaxlib reads: XLA_CLIENT_MEM_FRACTION",
                     "per-process CUDA overhead: 420.00 MiB", "NVML per-process figures: works",
                     "capped probe (gpu): XLA_CLIENT_MEM_FRACTION=0.2; bytes_limit in force",
                     "OK (4.2 s)", "verdict: no problems found"):
        assert expected in text, expected


def test_a_failed_cap_is_a_problem_line():
    probe = CapProbe("gpu", "XLA_CLIENT_MEM_FRACTION=0.2", 2 * 10**9, 4 * 10**9, "ok",
                     "bytes_limit 3.73 GiB on device 0, 1.86 GiB intended", 4.0)
    text = doctor_text(report(cap_probe=probe, problems=("the capped probe did not hold",)))
    assert "FAILED" in text and "  cap not applied: bytes_limit 3.73 GiB" in text
    assert "PROBLEM: the capped probe did not hold" in text and "1 problem(s)" in text


def test_the_stack_leads_and_a_patched_stack_says_so():
    line = ("jax 0.10.2 + brax 0.14.2: trains, patched as brax main does "
            "(jax.device_put_replicated)")
    text = doctor_text(report(stack=line, stack_patches=("device_put_replicated",)))
    assert text.splitlines()[0] == f"stack: {line}"
    assert "no problems found" not in text
    assert text.splitlines()[-1].startswith("verdict: ready, with brax patched")
