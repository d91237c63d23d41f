"""verify's reading of a config file: the workload, the batch settings, Warp's capacities."""

from __future__ import annotations

from vramtune.workload.emitted import verification_profile


def test_a_multi_document_user_file_verifies_as_before(tmp_path):
    # a user's file may hold several YAML documents; it has no emitted capacity block
    path = tmp_path / "train.yaml"
    path.write_text("ppo:\n  num_envs: 64\n  batch_size: 64\n  num_minibatches: 4\n"
                    "  unroll_length: 10\n---\nlogging: {every: 10}\n")
    profile, origin = verification_profile(path, "quick")
    assert profile.num_envs == 64 and profile.env_kwargs == {}
    assert origin.startswith("--profile")


def test_a_user_file_s_capacities_reach_the_workload(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("environment:\n  env_kwargs: {naconmax: 300, njmax: 20}\n"
                    "ppo:\n  num_envs: 64\n  batch_size: 64\n  num_minibatches: 4\n"
                    "  unroll_length: 10\n")
    profile, origin = verification_profile(path, "playground-ballincup-warp")
    assert profile.env_kwargs == {"naconmax": 300, "njmax": 20}
    assert origin.endswith("naconmax, njmax")
