"""Reading batch settings from the YAML shapes people have, and diagnosing them."""

from __future__ import annotations

import textwrap

import pytest

from vramtune.errors import UserError
from vramtune.workload.configfile import diagnose, load_config, normalise_key
from vramtune.workload.rules import BRAX_DEFAULTS, violations


def write(tmp_path, text: str, name: str = "config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_flat_ppo_train_kwargs(tmp_path):
    c = load_config(write(tmp_path, """
        num_envs: 8192
        batch_size: 256
        num_minibatches: 32
        unroll_length: 20
        learning_rate: 3.0e-4
    """))
    assert (c.num_envs.value, c.batch_size.value, c.num_minibatches.value) == (8192, 256, 32)
    assert c.unroll_length.value == 20 and c.num_envs.path == "num_envs"
    assert c.defaults_used == () and c.notes == ()


@pytest.mark.parametrize("section", ["ppo", "experiment", "algorithm", "ppo_params", "rl_config"])
def test_nested_under_any_section(tmp_path, section):
    c = load_config(write(tmp_path, f"""
        seed: 1
        {section}:
          num_envs: 4096
          batch_size: 2048
          num_minibatches: 32
    """))
    assert c.shape.num_envs == 4096 and c.num_envs.path == f"{section}.num_envs"


def test_deeply_nested_upper_case_keys(tmp_path):
    c = load_config(write(tmp_path, """
        experiment:
          algorithm:
            ppo:
              NUM_ENVS: 3000
              BATCH_SIZE: 256
              NUM_MINIBATCHES: 32
    """))
    assert (c.num_envs.value, c.batch_size.value, c.num_minibatches.value) == (3000, 256, 32)
    assert c.num_minibatches.path == "experiment.algorithm.ppo.NUM_MINIBATCHES"


@pytest.mark.parametrize("key,expected", [("NUM_ENVS", "num_envs"), ("numEnvs", "num_envs"),
                                          ("num-envs", "num_envs"), ("numMinibatches",
                                                                     "num_minibatches")])
def test_key_spellings(key, expected):
    assert normalise_key(key) == expected


def test_camel_and_dashed_keys_in_a_file(tmp_path):
    c = load_config(write(tmp_path, """
        train:
          numEnvs: 1024
          batch-size: 512
          numMinibatches: 8
    """))
    assert c.shape.samples_per_update == 4096 and c.shape.num_envs == 1024


def test_eval_section_is_not_mistaken_for_training(tmp_path):
    c = load_config(write(tmp_path, """
        eval:
          num_envs: 128
          batch_size: 16
          num_minibatches: 1
        training:
          num_envs: 2048
          batch_size: 1024
          num_minibatches: 32
    """))
    assert c.num_envs.path == "training.num_envs" and c.batch_size.value == 1024
    assert any("eval.num_envs" in note and "evaluation" in note for note in c.notes)


def test_batch_settings_taken_from_closest_section(tmp_path):
    c = load_config(write(tmp_path, """
        env:
          num_envs: 4096
        algorithm:
          batch_size: 2048
          num_minibatches: 32
        data:
          loader:
            batch_size: 7
    """))
    assert c.batch_size.value == 2048 and c.batch_size.path == "algorithm.batch_size"
    assert any("data.loader.batch_size" in note for note in c.notes)


def test_missing_batch_settings_use_brax_defaults(tmp_path):
    c = load_config(write(tmp_path, "ppo:\n  num_envs: 512\n"))
    assert c.batch_size.value == BRAX_DEFAULTS["batch_size"] == 32
    assert c.num_minibatches.value == BRAX_DEFAULTS["num_minibatches"] == 16
    assert c.batch_size.path is None and "default" in c.batch_size.where
    assert c.defaults_used == ("batch_size", "num_minibatches")
    assert diagnose(c).valid  # 32 x 16 = 512


def test_hydra_interpolation_and_numeric_strings(tmp_path):
    c = load_config(write(tmp_path, """
        env:
          num_envs: "4_096"
        algorithm:
          batch_size: ${env.num_envs}
          num_minibatches: 4.0
    """))
    assert (c.num_envs.value, c.batch_size.value, c.num_minibatches.value) == (4096, 4096, 4)


def test_list_of_documents_and_lists(tmp_path):
    c = load_config(write(tmp_path, """
        defaults: [base]
        ---
        stages:
          - name: warmup
            ppo: {num_envs: 256, batch_size: 256, num_minibatches: 4}
    """))
    assert c.num_envs.value == 256 and c.num_envs.path == "[1].stages[0].ppo.num_envs"


@pytest.mark.parametrize("text,message", [
    ("ppo: [1, 2\n", "not valid YAML at line"),
    ("ppo:\n  learning_rate: 1\n", "no num_envs found; looked for keys num_envs"),
    ("", "empty"),
    ("just a string\n", "no num_envs found"),
    ("num_envs: lots\n", "num_envs at num_envs is 'lots', not an integer"),
    ("num_envs: true\n", "not an integer"),
    ("num_envs: 100.5\n", "not an integer"),
    ("num_envs: ${nope.x}\n", "nope.x is not in the file"),
])
def test_unreadable_configs_are_one_line_user_errors(tmp_path, text, message):
    with pytest.raises(UserError) as info:
        load_config(write(tmp_path, text))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(UserError, match="not a file"):
        load_config(tmp_path)


def test_invalid_config_gets_rule_and_valid_fixes(tmp_path):
    d = diagnose(load_config(write(tmp_path, "num_envs: 3000\nbatch_size: 256\n"
                                             "num_minibatches: 32\n")))
    assert not d.valid
    assert [v.rule for v in d.violations] == ["batch_size * num_minibatches % num_envs == 0"]
    assert 2 <= len(d.fixes) <= 3
    for fix in d.fixes:
        assert violations(fix.num_envs, fix.batch_size, fix.num_minibatches) == []


def test_device_count_without_a_dividing_num_envs_still_gets_fixes(tmp_path):
    path = write(tmp_path, "num_envs: 8192\nbatch_size: 256\nnum_minibatches: 32\n")
    d = diagnose(load_config(path), device_count=3)
    assert [v.rule for v in d.violations] == ["num_envs % device_count == 0"]
    assert len(d.fixes) == 3
    for fix in d.fixes:
        assert not violations(fix.num_envs, fix.batch_size, fix.num_minibatches, 3)
    assert diagnose(load_config(path), device_count=8).valid


def test_bad_device_count(tmp_path):
    with pytest.raises(UserError, match="--device-count"):
        diagnose(load_config(write(tmp_path, "num_envs: 8\n")), device_count=0)


def test_zero_num_envs_is_invalid_not_a_crash(tmp_path):
    d = diagnose(load_config(write(tmp_path, "num_envs: 0\n")))
    assert not d.valid and d.violations[0].rule == "num_envs >= 1" and d.fixes == ()


@pytest.mark.parametrize("unroll", [0, -5])
def test_an_unroll_length_below_one_is_invalid_with_no_figure(tmp_path, unroll):
    text = f"num_envs: 64\nbatch_size: 32\nnum_minibatches: 8\nunroll_length: {unroll}\n"
    d = diagnose(load_config(write(tmp_path, text)))
    assert not d.valid and [v.rule for v in d.violations] == ["unroll_length >= 1"]
    assert d.env_steps_per_update is None and d.fixes == ()
    ok = diagnose(load_config(write(tmp_path, text.replace(f": {unroll}", ": 5"))))
    assert ok.valid and ok.env_steps_per_update == 32 * 8 * 5


def test_invalid_config_lists_what_each_scaling_policy_allows(tmp_path):
    d = diagnose(load_config(write(tmp_path, "num_envs: 3000\nbatch_size: 256\n"
                                             "num_minibatches: 32\n")))
    by_policy = {str(o.policy): o for o in d.options}
    assert by_policy["hold-minibatch"].shapes[0].batch_size == 256
    assert by_policy["hold-minibatch"].shapes[0].num_minibatches == 375
    assert by_policy["hold-num-minibatches"].shapes[0].num_minibatches == 32
    env_steps = by_policy["hold-env-steps"]
    assert env_steps.shapes == () and (env_steps.below, env_steps.above) == (2048, 4096)
    assert diagnose(load_config(write(tmp_path, "num_envs: 512\n", "ok.yaml"))).options == ()
