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
