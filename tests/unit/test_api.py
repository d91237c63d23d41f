"""verification_profile: which settings `verify` trains with, from which file or profile; and
what the API takes for saved runs."""

from __future__ import annotations

import textwrap

import pytest

from vramtune.errors import UserError
from vramtune.workload.emitted import verification_profile
from vramtune.workload.profile import load_profile

QUICK = load_profile("quick")
HEAD = f"# vramtune emit-config (brax): profile quick ({QUICK.hash}), env brax:fast\n"


def write(tmp_path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_user_file_trains_with_its_own_ppo_settings_not_the_profiles(tmp_path):
    path = write(tmp_path, """
        env_name: Ant          # not a ppo.train kwarg: left out
        experiment:
          ppo:
            NUM_ENVS: 64
            BATCH_SIZE: 64
            NUM_MINIBATCHES: 4
            RUN_EVALS: false
            learningRate: 0.001
            num_updates_per_batch: 2
            wandb_project: mine   # neither: left out
        """)
    prof, origin = verification_profile(path, "quick")
    assert (prof.num_envs, prof.batch_size, prof.num_minibatches) == (64, 64, 4)
    assert prof.ppo["run_evals"] is False and prof.ppo["learning_rate"] == 0.001
    assert prof.ppo["num_updates_per_batch"] == 2
    assert "wandb_project" not in prof.ppo and "env_name" not in prof.ppo
    assert origin == ("--profile; from the file: learning_rate, num_updates_per_batch, "
                      "run_evals")
    # what the file does not set stays the profile's
    assert prof.ppo["entropy_cost"] == QUICK.ppo["entropy_cost"]


def test_a_user_files_bad_value_is_a_user_error(tmp_path):
    path = write(tmp_path, "num_envs: 64\nbatch_size: 64\nnum_minibatches: 4\n"
                           "learning_rate: -1\n")
    with pytest.raises(UserError, match="learning_rate"):
        verification_profile(path, "quick")


def test_an_emitted_file_overlays_its_ppo_block(tmp_path):
    path = write(tmp_path, HEAD + "ppo:\n  num_envs: 64\n  batch_size: 64\n"
                                  "  num_minibatches: 4\n  learning_rate: 0.002\n"
                                  "  episode_length: 50\n")
    prof, origin = verification_profile(path, None)
    assert prof.ppo["learning_rate"] == 0.002 and prof.episode_length == 50
    assert origin.startswith("profile quick named in the file")


@pytest.mark.parametrize("body", [
    "num_envs: 64\nbatch_size: 64\nnum_minibatches: 4\nppo: 5\n",
    "num_envs: 64\nbatch_size: 64\nnum_minibatches: 4\nnetwork: [1, 2]\n",
    "ppo: 5\n",
    "- 1\n- 2\n",
])
def test_a_damaged_emitted_file_is_a_user_error_or_ignored_never_a_crash(tmp_path, body):
    path = write(tmp_path, HEAD + body)
    try:
        prof, _ = verification_profile(path, None)
    except UserError as e:
        assert "\n" not in str(e)
    else:
        assert "ppo" not in prof.ppo and prof.num_envs == 64


def test_an_interrupted_sweep_with_nothing_fitting_claims_no_edge(tmp_path):
    # --parallel auto on an H200 was stopped while 15 smaller trials ran: only 2048's OOM had
    # ended, and "does not fit even at num_envs=2048" would have been false (1920 fits).
    from vramtune import api
    from vramtune.records import Status, TrialResult

    prepared = api.prepare_sweep("quick", start=128, max_envs=2048, gpu_mem="1.3GB",
                                 confirm=False, standby=False, out=tmp_path / "run")
    try:
        def oom(n: int) -> TrialResult:
            return TrialResult(status=Status.OOM, profile="quick", profile_hash="h",
                               num_envs=n, backend="cpu")

        prepared.state.results.append(oom(2048))
        notice = api.outcome(prepared, interrupted=True).recommendation.notice or ""
        assert "stopped before a size that fits" in notice and "even" not in notice
        assert "does not fit even" in (api.outcome(prepared).recommendation.notice or "")
        prepared.state.results.append(oom(128))  # the start itself failed: that is the edge
        notice = api.outcome(prepared, interrupted=True).recommendation.notice or ""
        assert "does not fit even at num_envs=128" in notice
    finally:
        prepared.release()


@pytest.mark.parametrize("paths", [42, [42], None, {"a": 1}, ["run", 3.5], b"run"])
def test_run_directories_of_the_wrong_type_are_one_line(paths):
    from vramtune.api import emit_config, expand_runs, load_runs

    for call in (load_runs, expand_runs, emit_config):
        if call is emit_config and paths is None:
            continue  # the newest run: below
        with pytest.raises(UserError, match="expected a run directory"):
            call(paths)


def test_run_directories_may_come_from_any_iterable(tmp_path):
    from vramtune.inputs import as_run_paths

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    assert sorted(as_run_paths(tmp_path.glob("*"))) == [tmp_path / "a", tmp_path / "b"]
    assert as_run_paths({"x"}) == ["x"] and as_run_paths(("x", tmp_path)) == ["x", tmp_path]


def test_emit_config_without_runs_reads_the_newest_and_each_run_once(tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from tests.fuzz_corpus import Corpus
    from vramtune import api

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="no run directory given and no run under"):
        api.emit_config()
    Corpus(tmp_path / "corpus").runs()
    shutil.copytree(tmp_path / "corpus/runs/control-good", tmp_path / "vramtune-runs/a-quick")
    read: list[Path] = []
    real = api.load_run
    monkeypatch.setattr(api, "load_run", lambda d: read.append(Path(d)) or real(d))
    _, configs = api.emit_config(gpu_mem="2GB")
    assert read == [Path("vramtune-runs/a-quick")] and len(configs) == 1
    runs = [api.open_run("vramtune-runs/a-quick")]
    read.clear()
    api.emit_config(runs)  # runs already read are not read again
    assert len(api.emit_cards(runs)) == len(api.runs_by_card(runs)) == 1 and read == []


def test_check_and_init_profile_are_the_api_the_cli_calls(tmp_path):
    import vramtune

    config = tmp_path / "train.yaml"
    config.write_text("ppo:\n  num_envs: 3000\n  batch_size: 256\n  num_minibatches: 8\n")
    diagnosis = vramtune.check(config)
    assert not diagnosis.valid and diagnosis.fixes
    assert vramtune.check(config, devices=1).violations == diagnosis.violations

    out = tmp_path / "ant.yaml"
    heard = []
    profile, origin = vramtune.init_profile("brax:ant", out, on_reading=lambda: heard.append(1))
    assert profile.env == "brax:ant" and out.is_file() and heard == [1] and origin
    with pytest.raises(UserError, match="exists; pass --force"):
        vramtune.init_profile("brax:ant", out, on_reading=lambda: heard.append(2))
    with pytest.raises(UserError, match="--backend applies to brax"):
        vramtune.init_profile("playground:CartpoleBalance", tmp_path / "c.yaml", backend="mjx")
    assert heard == [1]  # refused before the slow part began
