"""Property tests: any profile mapping, any YAML text is a Profile or one UserError, fast."""

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.hostile import mutated, result_or_user_error, values
from vramtune import yamlio
from vramtune.errors import UserError
from vramtune.schema import MAX_NUM_ENVS
from vramtune.workload.profile import (
    NAME_PATTERN,
    Profile,
    builtin_profiles,
    load_profile,
    profile_from_dict,
)

QUICK = yaml.safe_load(builtin_profiles()["quick"].read_text())
SETTINGS = settings(max_examples=250, deadline=2000,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(mutated(QUICK))
def test_any_profile_mapping_is_a_checked_profile_or_one_user_error(data):
    result = result_or_user_error(lambda: profile_from_dict(data, source="p.yaml"))
    if isinstance(result, Profile):
        # What loaded is what every later step relies on: no later TypeError can come.
        assert NAME_PATTERN.fullmatch(result.name)
        assert 1 <= result.num_envs <= MAX_NUM_ENVS and 1 <= result.max_envs <= MAX_NUM_ENVS
        assert isinstance(result.batch_size, int) and isinstance(result.num_minibatches, int)
        assert 0 < result.timeout_s <= 1e6 and result.measure.min_intervals >= 1
        assert len(result.hash) == 16  # hashable: plain data only
        result.shape_for(result.num_envs)


@settings(max_examples=100, deadline=2000)
@given(values)
def test_any_value_at_the_top_is_refused_or_loaded(data):
    result_or_user_error(lambda: profile_from_dict(data))


YAML_PIECES = st.sampled_from([
    "name: x\n", "env: brax:fast\n", "ppo: {batch_size: 64}\n", "a: &a [1, 2]\n", "b: *a\n",
    "c: &c {d: *c}\n", "[" * 80, "]" * 80, "{a: " * 70, "}" * 70, "- - - - - - 1\n",
    "!!python/object/apply:os.system ['x']\n", "---\n", "? [1]\n: 2\n", "timeout_s: .nan\n",
    "measure: {min_intervals: '3'}\n", "\t", "\x00", "'unclosed\n", "name: \"a\\u0000b\"\n",
    "num_envs: 1e12\n", "network: {policy_hidden_layer_sizes: [-5, 3]}\n",
])


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(YAML_PIECES, st.text(max_size=15)), max_size=12).map("".join))
def test_any_yaml_text_parses_within_bounds_or_is_one_user_error(text):
    result_or_user_error(lambda: yamlio.loads(text, "t.yaml"))


def _bomb(levels: int, width: int) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=2000)
@given(st.integers(1, 12), st.integers(1, 12))
def test_alias_expansion_is_bounded(levels, width):
    result = result_or_user_error(lambda: yamlio.loads(_bomb(levels, width), "bomb.yaml"))
    expanded = sum(width ** k for k in range(1, levels + 1)) + levels
    if expanded > yamlio.MAX_NODES:
        assert isinstance(result, UserError) and "aliases" in str(result)


@settings(max_examples=40, deadline=3000, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.lists(YAML_PIECES, max_size=8).map(lambda p: "".join(p).encode()))
def test_any_profile_file_loads_or_is_one_user_error(tmp_path, content):
    path = tmp_path / "p.yaml"
    path.write_bytes(content)
    result = result_or_user_error(lambda: load_profile(path))
    if isinstance(result, UserError):
        assert "p.yaml" in str(result) or "unknown profile" in str(result)
