"""fmt.trial_fields: the trial panel shows the figure the cap counts and whether memory settled."""

from __future__ import annotations

from vramtune.fmt import trial_fields
from vramtune.records import Status, TrialResult

MiB = 2**20


def fields(**kw) -> dict[str, str]:
    r = TrialResult(status=Status.OK, profile="quick", profile_hash="h", num_envs=256,
                    backend="cpu", **kw)
    return dict(trial_fields(r))


def test_cpu_panel_shows_the_data_segment_beside_rss_and_the_steady_flag():
    f = fields(host_peak_data_bytes=980 * MiB, host_peak_rss_bytes=910 * MiB,
               training_steps=70, evals=11, memory_steady=False)
    assert f["host RAM peak data segment (what RLIMIT_DATA counts)"] == "980.00 MiB"
    assert f["host RAM peak RSS (exact)"] == "910.00 MiB"
    assert f["training steps, evaluations"] == "70, 11"
    assert f["memory steady at the end"].startswith("no: still growing")


def test_unmeasured_is_na_never_zero():
    f = fields()
    assert "host RAM peak data segment (what RLIMIT_DATA counts)" not in f
    assert f["training steps, evaluations"] == "n/a, n/a"
    assert f["memory steady at the end"] == "n/a"


def test_a_warp_trial_shows_demand_beside_capacity_and_its_kernel_builds():
    f = fields(warp_naconmax=10_000, warp_njmax=25, warp_contacts_max=8,
               warp_contacts_per_world_max=2, warp_constraint_rows_max=35,
               warp_constraint_rows_per_world_max=9, warp_probe_steps=20, warp_probe_s=6.1,
               warp_overflow=[], warp_solver_limits=["ITERATIONS"], warp_kernel_cache="cold",
               warp_kernels_compiled=35, warp_kernels_cached=0, warp_kernel_build_s=131.4)
    assert f["MJX-Warp contacts: most seen / naconmax"] == "8 all envs (2 in one) / 10,000"
    assert f["MJX-Warp constraint rows: most seen / njmax"] == "9 per env (35 all envs) / 25"
    assert f["MJX-Warp probe"] == ("20 steps, 6.1 s; overflow: none; solver limits: "
                                   "ITERATIONS")
    assert f["MJX-Warp kernels"] == "cold: 35 built, 0 from the cache, 131.4 s building"
    assert "MJX-Warp kernels" not in fields()  # not a Warp trial: no line, not a zero


def test_warp_s_own_pool_is_shown_apart_where_measured():
    label = "MJX-Warp memory pool peak (Warp's own: outside XLA's pool, not capped)"
    f = fields(warp_mempool_high_bytes=512 * MiB)
    assert f[label] == "512.00 MiB; room the cap left it: none (nothing measured before)"
    f = fields(warp_mempool_high_bytes=512 * MiB, warp_pool_room_bytes=768 * MiB)
    assert f[label] == "512.00 MiB; room the cap left it: 768.00 MiB (predicted)"
    assert fields(warp_pool_room_bytes=768 * MiB)[label] == \
        "n/a; room the cap left it: 768.00 MiB (predicted)"  # the trial died before reading it
    assert not any(k.startswith("MJX-Warp memory pool") for k in fields())
