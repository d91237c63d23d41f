"""emit-config's choices and exporters, against golden files.

Records are built by hand so the output is byte-for-byte stable. Regenerate the goldens
after an intended change with ``VRAMTUNE_UPDATE_GOLDEN=1 pytest tests/unit/views/test_configs.py``
and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import GOLDEN
from tests.conftest import assert_golden as shared_assert_golden
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult
from vramtune.results.settings import SweepSettings
from vramtune.results.store import Run, RunHeader
from vramtune.tune.budgets import CPU_NOTICE, choose_for_budget, merge_runs
from vramtune.tune.recommend import Objective
from vramtune.units import budget_label
from vramtune.views.configs import ConfigFormat, hydra_overrides, markdown_table, output_name, render
from vramtune.workload.configfile import diagnose, parse_config

GOLDEN_DIR = GOLDEN / "emit"
VAR = "XLA_CLIENT_MEM_FRACTION"
VERSIONS = {"python": "3.11.7", "jax": "0.9.2", "jaxlib": "0.9.2", "brax": "0.14.2"}
GB = 10**9
MiB = 2**20

PROFILE = {
    "name": "quick", "env": "brax:fast", "description": "test", "backend": "generalized",
    "episode_length": 100, "num_envs": 128, "max_envs": 2048, "scaling": "hold-num-minibatches",
    "ppo": {"batch_size": 128, "num_minibatches": 4, "unroll_length": 10,
            "num_updates_per_batch": 1, "learning_rate": 3.0e-4, "entropy_cost": 1.0e-2,
            "discounting": 0.97, "normalize_observations": True},
    "network": {"policy_hidden_layer_sizes": [256, 256], "value_hidden_layer_sizes": [256, 256]},
}


def assert_golden(name: str, text: str) -> None:
    shared_assert_golden(f"emit/{name}", text)


LATER = "2026-11-22T09:00:00+00:00"  # another sweep's start: merged sweeps are distinct


def header(*, budget: int | None, gpu: bool, profile: dict | None = None,
           device: str | None = None, created: str = "2026-11-21T20:02:26+00:00") -> RunHeader:
    return RunHeader(
        profile_name="quick", profile_hash="16fa582f053d812d", profile=profile or PROFILE,
        budget_bytes=budget, headroom_fraction=0.1,
        machine={"cpu": "AMD EPYC", "hostname": "test"}, versions=VERSIONS,
        gpu_name=device or ("NVIDIA H100 80GB HBM3" if gpu else None),
        gpu_total_bytes=80 * 2**30 if gpu else None, created=created)


def trial(n: int, peak: int | None, rate: float | None, *, gpu: bool, budget: int | None,
          status: Status = Status.OK) -> TrialResult:
    bs = n  # hold-num-minibatches: batch_size grows with num_envs, 4 unrolls per step
    return TrialResult(
        status=status, profile="quick", profile_hash="16fa582f053d812d", num_envs=n,
        batch_size=bs, num_minibatches=4, unroll_length=10,
        backend="gpu" if gpu else "cpu", device_kind="H100" if gpu else "cpu", device_count=1,
        budget_bytes=budget, compile_s=12.5, steps_per_s=rate, measured_intervals=5 if rate else None,
        host_peak_rss_bytes=None if gpu else peak,
        nvml_process_peak_bytes=peak if gpu else None,
        gpu_total_bytes=80 * 2**30 if gpu else None, versions=VERSIONS,
        timestamp="2026-11-21T20:03:00+00:00")


def cpu_run(budget: int = 3 * GB) -> Run:
    results = (trial(128, 900 * MiB, 25910.0, gpu=False, budget=budget),
               trial(256, 906 * MiB, 19524.0, gpu=False, budget=budget),
               trial(512, 1300 * MiB, 31000.0, gpu=False, budget=budget))
    return Run(Path("vramtune-runs/20261121-quick"), header(budget=budget, gpu=False), results)


def gpu_run() -> Run:
    budget = 12 * GB
    results = (trial(1024, 2 * 2**30, 410_000.0, gpu=True, budget=budget),
               trial(2048, 3 * 2**30, 690_000.0, gpu=True, budget=budget),
               trial(4096, 5 * 2**30, 820_000.0, gpu=True, budget=budget),
               trial(8192, 9 * 2**30, 840_000.0, gpu=True, budget=budget),
               trial(16384, None, None, gpu=True, budget=budget, status=Status.OOM))
    return Run(Path("vramtune-runs/20261121-quick-h100"), header(budget=budget, gpu=True), results)


@pytest.mark.parametrize("fmt_", list(ConfigFormat))
def test_cpu_formats_match_golden(fmt_):
    source = merge_runs([cpu_run()])
    emission = choose_for_budget(source, 2 * GB, Objective.THROUGHPUT)
    text = render(source, emission, fmt_, mem_fraction_var=VAR)
    assert_golden(f"cpu-{fmt_}.yaml", text)


def test_gpu_brax_with_timesteps_matches_golden():
    source = merge_runs([gpu_run()])
    emission = choose_for_budget(source, 8 * GB, Objective.THROUGHPUT)
    assert_golden("gpu-8GB-brax.yaml", render(source, emission, ConfigFormat.BRAX, mem_fraction_var=VAR,
                                              num_timesteps=50_000_000))


def test_gpu_table_matches_golden():
    source = merge_runs([gpu_run()])
    budgets = [1 * GB, 8 * GB, 12 * GB, 24 * GB]
    emissions = [choose_for_budget(source, b, Objective.THROUGHPUT) for b in budgets]
    files = [output_name("quick", e.budget_bytes, ConfigFormat.BRAX) if e.chosen else None
             for e in emissions]
    assert_golden("gpu-table.md", markdown_table(source, emissions, files))


@pytest.mark.parametrize("fmt_", list(ConfigFormat))
@pytest.mark.parametrize("gpu", [False, True])
def test_every_emitted_file_passes_check_with_the_measured_settings(fmt_, gpu):
    source = merge_runs([gpu_run() if gpu else cpu_run()])
    emission = choose_for_budget(source, 8 * GB, Objective.THROUGHPUT)
    data = yaml.safe_load(render(source, emission, fmt_, mem_fraction_var=VAR))
    d = diagnose(parse_config(data))
    assert d.valid and d.config.defaults_used == ()
    chosen = emission.chosen
    assert (d.config.num_envs.value, d.config.batch_size.value, d.config.num_minibatches.value) \
        == (chosen.num_envs, chosen.batch_size, chosen.num_minibatches)


def test_gpu_fraction_under_the_variable_jaxlib_reads():
    source = merge_runs([gpu_run()])
    data = yaml.safe_load(render(source, choose_for_budget(source, 8 * GB), mem_fraction_var=VAR))
    assert data["xla_env"] == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", VAR: "0.90"}
    other = yaml.safe_load(render(source, choose_for_budget(source, 8 * GB),
                                  mem_fraction_var="XLA_PYTHON_CLIENT_MEM_FRACTION"))
    assert set(other["xla_env"]) == {"XLA_PYTHON_CLIENT_PREALLOCATE",
                                     "XLA_PYTHON_CLIENT_MEM_FRACTION"}


def test_cpu_run_sets_no_fraction_and_says_host_memory():
    source = merge_runs([cpu_run()])
    emission = choose_for_budget(source, 2 * GB)
    text = render(source, emission, mem_fraction_var=VAR)
    assert yaml.safe_load(text)["xla_env"] == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert CPU_NOTICE in emission.notices and "host RAM" in text and "VRAM" not in \
        text.replace("not VRAM", "")


def test_choice_is_measured_and_fits():
    source = merge_runs([gpu_run()])
    e = choose_for_budget(source, 8 * GB)  # limit 7.2 GB: 8192 (9 GiB) is over, 4096 (5 GiB) fits
    assert e.chosen is not None and e.chosen.num_envs == 4096 and e.error is None
    assert e.recommendation.limit_bytes == int(8 * GB * 0.9)


def test_budget_below_every_measured_peak_is_an_error_not_a_guess():
    source = merge_runs([gpu_run()])
    e = choose_for_budget(source, 1 * GB)
    assert e.chosen is None and e.error and "num_envs=1024" in e.error
    with pytest.raises(UserError):
        render(source, e, mem_fraction_var=VAR)


def test_budget_beyond_the_sweeps_cap_is_a_notice():
    source = merge_runs([gpu_run()])
    e = choose_for_budget(source, 24 * GB)
    assert e.chosen is not None and e.chosen.num_envs == 8192
    assert any("measured under a 12GB budget, below this 24GB one" in n for n in e.notices)
    assert not any("cap" in n for n in choose_for_budget(source, 12 * GB).notices)


def test_budget_beyond_the_card_is_a_notice():
    source = merge_runs([Run(Path("r"), header(budget=None, gpu=True),
                             tuple(trial(n, 2**30, 1e5 * n, gpu=True, budget=None)
                                   for n in (128, 256)))])
    e = choose_for_budget(source, 200 * GB)
    assert any("larger than the 80.00 GiB card" in n for n in e.notices)
    assert any("largest size measured" in n for n in e.notices)


def test_no_budget_uses_the_sweeps_cap():
    source = merge_runs([gpu_run()])
    assert choose_for_budget(source, None).budget_bytes == 12 * GB


def test_optimisation_change_and_lr_hint():
    source = merge_runs([cpu_run()])
    e = choose_for_budget(source, 2 * GB)  # 512 envs: batch_size 128 -> 512
    assert e.chosen.num_envs == 512
    assert e.optimisation_change and "minibatch size 128 -> 512" in e.optimisation_change
    assert "sqrt(512/128)" in e.optimisation_change
    base = choose_for_budget(source, 2 * GB, Objective.KNEE)  # knee: within 5% of best -> still 512 here
    assert base.chosen.num_envs == 512
    small = choose_for_budget(source, int(1.1 * GB))  # only 128 and 256 fit; 128 is faster and is the base
    assert small.chosen.num_envs == 128 and small.optimisation_change is None


def test_hydra_override_line():
    source = merge_runs([gpu_run()])
    e = choose_for_budget(source, 8 * GB)
    assert hydra_overrides(e) == "ppo.num_envs=4096 ppo.batch_size=4096 ppo.num_minibatches=4"
    assert hydra_overrides(e, "algo.ppo").startswith("algo.ppo.num_envs=4096")
    text = render(source, e, ConfigFormat.HYDRA, mem_fraction_var=VAR, hydra_prefix="algo.ppo")
    assert text.startswith("# @package _global_\n")
    data = yaml.safe_load(text)
    assert data["algo"]["ppo"]["num_envs"] == 4096
    assert data["hydra"]["job"]["env_set"][VAR] == "0.90"


def test_playground_shape_matches_brax_ppo_config_keys():
    source = merge_runs([gpu_run()])
    data = yaml.safe_load(render(source, choose_for_budget(source, 8 * GB), ConfigFormat.PLAYGROUND,
                                 mem_fraction_var=VAR, num_timesteps=1000))
    params = data["ppo_params"]
    for key in ("num_envs", "batch_size", "num_minibatches", "unroll_length", "num_timesteps",
                "episode_length", "action_repeat", "learning_rate", "discounting"):
        assert key in params
    assert params["network_factory"]["policy_hidden_layer_sizes"] == [256, 256]


def test_merge_refuses_other_workloads_and_devices():
    other = Run(Path("b"), header(budget=None, gpu=True, profile={**PROFILE, "num_envs": 64},
                                  created=LATER),
                gpu_run().results)
    other = Run(other.directory, RunHeader(**{**other.header.__dict__, "profile_hash": "x"}),
                other.results)
    with pytest.raises(UserError, match="one workload at a time"):
        merge_runs([gpu_run(), other])
    elsewhere = Run(Path("c"), header(budget=None, gpu=True, device="NVIDIA A10G",
                                      created=LATER), ())
    with pytest.raises(UserError, match="one device"):
        merge_runs([gpu_run(), elsewhere])


def test_merge_prefers_ok_trials_and_widens_coverage():
    capped = gpu_run()
    bigger = Run(Path("big"), header(budget=24 * GB, gpu=True, created=LATER),
                 (trial(16384, 17 * 2**30, 950_000.0, gpu=True, budget=24 * GB),))
    source = merge_runs([capped, bigger])
    assert [r.status for r in source.results if r.num_envs == 16384] == [Status.OK]
    # 950k against 8192's 840k: faster beyond the margin (at 850k it would be within 2%
    # and the smaller size picked)
    e = choose_for_budget(source, 24 * GB)
    assert e.chosen.num_envs == 16384 and not any("cap" in n for n in e.notices)


def test_merge_counts_a_failed_repeat_against_its_size():
    # 8192 fitted once and ran out of memory once under the same 12GB cap: not proven to fit
    again = Run(Path("again"), header(budget=12 * GB, gpu=True, created=LATER),
                (trial(8192, None, None, gpu=True, budget=12 * GB, status=Status.OOM),))
    assert choose_for_budget(merge_runs([gpu_run()]), 12 * GB).chosen.num_envs == 8192
    source = merge_runs([gpu_run(), again])
    assert [r.status for r in source.results if r.num_envs == 8192] == [Status.OOM]
    assert choose_for_budget(source, 12 * GB).chosen.num_envs == 4096


@pytest.mark.parametrize("nbytes,label", [(8 * GB, "8GB"), (int(7.5 * 2**30), "7.5GiB"),
                                          (500 * 10**6, "500MB"), (None, "uncapped"),
                                          (123, "123B"), (int(1.1e9), "1.1GB"),
                                          (int(1.15e9), "1.15GB")])  # not 1100MB: floats
def test_budget_labels(nbytes, label):
    assert budget_label(nbytes) == label


def test_cards_table_has_one_row_per_card_and_budget_and_matches_golden():
    from vramtune.views.configs import cards_markdown, cards_table

    cpu, gpu = merge_runs([cpu_run()]), merge_runs([gpu_run()])
    cards = [("H100", gpu, [choose_for_budget(gpu, b, Objective.THROUGHPUT)
                            for b in (1 * GB, 8 * GB)]),
             ("cpu", cpu, [choose_for_budget(cpu, None, Objective.THROUGHPUT)])]
    table = cards_table(cards)
    rows = table.records()
    assert [(r["card"], r["budget_bytes"], r["num_envs"]) for r in rows] == \
        [("H100", 1 * GB, None), ("H100", 8 * GB, 4096), ("cpu", 3 * GB, 512)]
    assert rows[0]["peak_bytes"] is None  # does not fit: n/a, never 0
    assert [r["memory"] for r in rows] == ["VRAM", "VRAM", "host RAM"]
    files = [[None, "quick-H100-8GB.yaml"], ["quick-cpu-3GB.yaml"]]
    assert_golden("cards-table.md", cards_markdown(cards, files))


def _proved_run(directory: Path, objective: str, created: str | None = None) -> Path:
    """A CPU sweep's records as the sweep writes them: search trials, then the pick's long
    confirming run, whose steps/s (a longer window) and peak are both higher than its
    search trial's."""
    from vramtune.records import Purpose
    from vramtune.results.store import append_result, create_run

    cap = int(1.2 * GB * 0.9)
    h = header(budget=int(1.2 * GB), gpu=False, **({"created": created} if created else {}))
    searched = SweepSettings.from_dict({"objective": objective})
    create_run(directory, RunHeader(**{**h.__dict__, "search": searched}))
    rows = [trial(256, 900 * MiB, 20000.0, gpu=False, budget=h.budget_bytes),
            trial(512, 950 * MiB, 19000.0, gpu=False, budget=h.budget_bytes),
            trial(1024, 1000 * MiB, 15000.0, gpu=False, budget=h.budget_bytes),
            trial(1152, None, None, gpu=False, budget=h.budget_bytes, status=Status.OOM)]
    confirmed = 1024 if objective == "max-envs" else 256
    for r in rows:
        append_result(directory, TrialResult(**{**r.__dict__, "cap_bytes": cap}))
    proof = next(r for r in rows if r.num_envs == confirmed)
    append_result(directory, TrialResult(**{
        **proof.__dict__, "cap_bytes": cap, "purpose": Purpose.CONFIRM, "training_steps": 100,
        "host_peak_rss_bytes": proof.host_peak_rss_bytes + 40 * MiB, "steps_per_s": 9000.0}))
    return directory


@pytest.mark.parametrize("objective,confirmed", [("max-envs", 1024), ("throughput", 256)])
def test_emit_defaults_to_the_sweeps_objective_and_writes_the_confirmed_size(
        tmp_path, objective, confirmed):
    from vramtune import api

    run = _proved_run(tmp_path / "run", objective)
    source, configs = api.emit_config(run)
    assert source.objective == Objective(objective)
    emission = configs[0].emission
    # the size the sweep confirmed, ranked on its search trial: the confirming run's lower
    # steps/s (9000, a longer window) does not un-pick it, its higher peak does not hide it
    assert emission.chosen.num_envs == confirmed
    assert emission.chosen.steps_per_s != 9000.0
    assert emission.recommendation.confirmed_line is not None
    assert "confirmed: 100 training steps" in configs[0].text
    # an explicit objective still wins over the sweep's
    _, again = api.emit_config(run, objective="knee" if objective == "max-envs" else "max-envs")
    assert again[0].emission.chosen.num_envs == (256 if objective == "max-envs" else 1024)


def test_runs_that_name_different_objectives_fall_back_to_throughput(tmp_path):
    from vramtune.results.store import load_run

    a = load_run(_proved_run(tmp_path / "a", "max-envs"))
    b = load_run(_proved_run(tmp_path / "b", "knee", LATER))
    assert merge_runs([a, b]).objective is None
    assert merge_runs([a]).objective is Objective.MAX_ENVS


@pytest.mark.parametrize("name", ["quick", "ant", "humanoid", "playground-cartpole",
                                  "playground-go1", "playground-ballincup-warp"])
@pytest.mark.parametrize("fmt_", list(ConfigFormat))
def test_emitted_files_hold_training_settings_only(name, fmt_):
    # issue 10 item 5: every ppo kwarg is the profile's training setting (kept as it is) or
    # a measured batch setting; nothing from measure: (how long a trial ran, its evaluation
    # count) or set only to measure (run_evals: false) reaches the user's config
    from vramtune.workload.profile import Measure, load_profile

    profile = load_profile(name)
    shape = profile.base_shape
    chosen = TrialResult(status=Status.OK, profile=name, profile_hash=profile.hash,
                         num_envs=shape.num_envs, batch_size=shape.batch_size,
                         num_minibatches=shape.num_minibatches,
                         unroll_length=profile.unroll_length, backend="cpu",
                         budget_bytes=8 * GB, steps_per_s=1000.0, measured_intervals=3,
                         host_peak_rss_bytes=900 * MiB)
    run = Run(Path("run"), RunHeader(**{**header(budget=8 * GB, gpu=False).__dict__,
                                        "profile_name": name, "profile_hash": profile.hash,
                                        "profile": profile.to_dict()}), (chosen,))
    source = merge_runs([run])
    text = render(source, choose_for_budget(source, 8 * GB), fmt_, mem_fraction_var=VAR)
    data = yaml.safe_load(text)
    block = (data.get("ppo_params") or data.get("ppo") or {})
    block = {k: v for k, v in block.items() if k != "network_factory"}
    measured = {"num_envs", "batch_size", "num_minibatches", "unroll_length"}
    assert set(block) == set(profile.ppo) | measured | {"episode_length", "action_repeat"}
    assert not set(block) & set(Measure.__dataclass_fields__)
    assert all(block[k] == v for k, v in profile.ppo.items() if k not in measured)
    if "run_evals" not in profile.ppo:
        assert "run_evals" not in block  # brax's default (evaluation on) stays the default


def test_the_pick_s_peak_is_the_highest_of_its_runs_in_the_header_and_the_table():
    # 256's fastest run is a run alone that compiled warm (600 MiB); its cold search trial
    # peaked at 906 MiB: the file's header and the table both quote 906
    import dataclasses

    from vramtune.records import Purpose

    run = cpu_run()
    alone = dataclasses.replace(trial(256, 600 * MiB, 60000.0, gpu=False, budget=3 * GB),
                                purpose=Purpose.ALONE)
    source = merge_runs([dataclasses.replace(run, results=(*run.results, alone))])
    emission = choose_for_budget(source, 2 * GB, Objective.THROUGHPUT)
    assert emission.chosen.num_envs == 256 and emission.chosen.purpose is Purpose.ALONE
    text = render(source, emission, ConfigFormat.BRAX, mem_fraction_var=VAR)
    assert "measured: peak 906.00 MiB host RAM (exact peak RSS, the highest of its 2 runs)" in text
    table = markdown_table(source, [emission], [None])
    assert "906.00 MiB" in table and "600.00 MiB" not in table


def test_the_header_counts_sizes_and_their_runs():
    """Repeats of a size are runs of it, not more sizes: '3 measured sizes (4 runs)'."""
    run = cpu_run()
    again = Run(run.directory, run.header,
                (*run.results, trial(128, 905 * MiB, 26100.0, gpu=False, budget=3 * GB)))
    source = merge_runs([again])
    text = render(source, choose_for_budget(source, 2 * GB, Objective.THROUGHPUT),
                  ConfigFormat.BRAX, mem_fraction_var=VAR)
    assert "among 3 measured sizes (4 runs): num_envs=" in text, text


def test_one_sweep_in_two_folders_is_refused_and_one_folder_named_twice_counted_once(tmp_path):
    import shutil

    from vramtune.results.store import load_run

    a = _proved_run(tmp_path / "a", "max-envs")
    shutil.copytree(a, tmp_path / "copy")
    with pytest.raises(UserError, match="hold the same sweep .*would count twice"):
        merge_runs([load_run(a), load_run(tmp_path / "copy")])
    once = merge_runs([load_run(a)])
    twice = merge_runs([load_run(a), load_run(tmp_path / "a" / ".." / "a")])
    assert twice.every_result == once.every_result and twice.directories == once.directories


def test_two_sweeps_begun_in_the_same_second_with_other_budgets_are_merged():
    # a script starting one sweep per budget: same host, profile and second, not a copy
    bigger = Run(Path("big"), header(budget=24 * GB, gpu=True),
                 (trial(16384, 17 * 2**30, 950_000.0, gpu=True, budget=24 * GB),))
    merged = merge_runs([gpu_run(), bigger])
    assert merged.directories == (gpu_run().directory, Path("big"))


CUP = {"name": "cup", "env": "playground:BallInCup", "impl": "warp", "description": "test",
       "episode_length": 1000, "num_envs": 2048, "max_envs": 16384, "scaling": "hold-minibatch",
       "ppo": {"batch_size": 1024, "num_minibatches": 32, "unroll_length": 30}}


def warp_emission(profile_data: dict, fmt_: ConfigFormat) -> str:
    """The file emit-config writes for a 2048-env Warp pick that saw 1,500 contacts and 7
    rows in its fullest env, under Playground's BallInCup capacities (10,000 and 25)."""
    import dataclasses

    from vramtune.workload.profile import profile_from_dict

    profile = profile_from_dict(profile_data)
    chosen = dataclasses.replace(
        trial(2048, 900 * MiB, 25910.0, gpu=False, budget=8 * GB), profile="cup",
        profile_hash=profile.hash, batch_size=1024, num_minibatches=32, unroll_length=30,
        warp_naconmax=10_000, warp_njmax=25, warp_contacts_max=1500,
        warp_constraint_rows_per_world_max=7)
    run = Run(Path("run"), RunHeader(**{**header(budget=8 * GB, gpu=False).__dict__,
                                        "profile_name": "cup", "profile_hash": profile.hash,
                                        "profile": profile.to_dict()}), (chosen,))
    source = merge_runs([run])
    return render(source, choose_for_budget(source, 8 * GB), fmt_, mem_fraction_var=VAR)


@pytest.mark.parametrize("fmt_", list(ConfigFormat))
def test_a_warp_pick_carries_its_capacities_where_each_format_trains_with_them(fmt_, tmp_path):
    from vramtune.workload.emitted import verification_profile
    from vramtune.workload.profile import profile_from_dict

    profile = profile_from_dict(CUP)
    text = warp_emission(CUP, fmt_)
    data = yaml.safe_load(text)
    block = {ConfigFormat.BRAX: lambda d: d["environment"]["env_kwargs"],
             ConfigFormat.PLAYGROUND: lambda d: d["env_config_overrides"],
             ConfigFormat.HYDRA: lambda d: d["env_config"]}[fmt_](data)
    assert block == {"naconmax": 2250, "njmax": 11}
    assert ("# MJX-Warp naconmax 2,250: 1,500 contacts for all worlds seen x 1.5 margin; the "
            "trial ran with 10,000") in text
    if fmt_ is ConfigFormat.PLAYGROUND:
        assert "open(THIS_FILE))['env_config_overrides'])" in text
    if fmt_ is ConfigFormat.HYDRA:
        assert "config_overrides=cfg.env_config)" in text
    # verify trains the file with the capacities it sets
    path = tmp_path / "tuned.yaml"
    path.write_text(text)
    verified, origin = verification_profile(path, profile)
    assert verified.env_kwargs == {"naconmax": 2250, "njmax": 11}
    assert origin.endswith("naconmax, njmax")


def test_verify_reads_the_capacities_an_emitted_file_sets_and_refuses_a_damaged_one(tmp_path):
    from vramtune.workload import emitted

    path = tmp_path / "tuned.yaml"
    path.write_text("environment:\n  env_kwargs: {naconmax: 3000, njmax: 14}\n")
    assert emitted._capacities(path, yaml.safe_load(path.read_text())) == \
        {"naconmax": 3000, "njmax": 14}
    for bad in ("-1", "1.5", "true", "'many'", "10000000000"):
        data = yaml.safe_load(f"env_config_overrides: {{njmax: {bad}}}\n")
        with pytest.raises(UserError, match="njmax must be a whole number from 0 to"):
            emitted._capacities(path, data)


def test_a_factory_s_warp_capacities_are_said_not_written_into_its_keywords():
    cup = {k: v for k, v in CUP.items() if k != "impl"}  # a factory picks its own physics
    text = warp_emission({**cup, "env": "mypkg.envs:make_cup"}, ConfigFormat.BRAX)
    assert "env_kwargs" not in yaml.safe_load(text)["environment"]
    assert "# MJX-Warp: pass naconmax=2250, njmax=11 to your env factory" in text


def test_the_header_carries_the_ledger_s_per_env_and_fixed_totals_where_measured():
    from tests.unit.tune.test_ledger import trial
    from vramtune.views.configs import ledger_comment

    (line,) = ledger_comment([trial(64), trial(128), trial(256)])
    assert line.startswith("memory per env and fixed (fitted over 3 sizes): data segment ")
    assert "+ 234.38 KiB per env" in line and "env state 164 B per env" in line
    assert "rollout 2.34 KiB" in line and "(vramtune explain RUN)" in line
    assert ledger_comment([trial(64)]) == []  # one size: no line to fit
