"""Property tests: `check` on any config is a diagnosis or one UserError, fast whatever the
numbers; the computed searches of the rules agree with trying every number."""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.hostile import result_or_user_error, values
from vramtune import yamlio
from vramtune.workload.configfile import Diagnosis, diagnose, parse_config
from vramtune.workload.rules import (
    BatchShape,
    ScalingPolicy,
    iter_valid_sizes,
    nearest_valid,
    scale_batch,
    valid_batch_settings,
)

HUGE = st.one_of(st.integers(-5, 5000), st.sampled_from([10**9 + 7, 10**12, 10**12 + 1, 2**40,
                                                         2**40 + 1, 2**61, 3 * 2**30]))
SETTING = st.one_of(HUGE, values, st.floats(allow_nan=True), st.text(max_size=6),
                    st.sampled_from(["${a.b}", "${num_envs}", "64", "1_024", "1e400"]))


@st.composite
def configs(draw: st.DrawFn) -> object:
    flat = {"num_envs": draw(SETTING), "batch_size": draw(SETTING),
            "num_minibatches": draw(SETTING)}
    if draw(st.booleans()):
        flat["unroll_length"] = draw(SETTING)
    shape = draw(st.sampled_from(["flat", "nested", "eval", "list"]))
    if shape == "nested":
        return {"experiment": {"ppo": flat}, "other": draw(values)}
    if shape == "eval":
        return {"train": flat, "eval": {"num_envs": draw(SETTING), "batch_size": draw(SETTING)}}
    if shape == "list":
        return [flat, draw(values)]
    return flat


@settings(max_examples=150, deadline=3000, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.sampled_from([1, 2, 3, 8, 1000003]))
def test_check_is_a_diagnosis_or_one_user_error_within_bounds(data, device_count):
    def run() -> Diagnosis:
        return diagnose(parse_config(data, "c.yaml"), device_count)

    result = result_or_user_error(run)
    if isinstance(result, Diagnosis):
        for fix in result.fixes:  # whatever is suggested is valid
            assert fix.num_envs % device_count == 0
            assert (fix.batch_size * fix.num_minibatches) % fix.num_envs == 0


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["num_envs: 3000\n", "batch_size: 1000000000000\n",
                                 "num_minibatches: 32\n", "a: &a [1, 2]\n", "b: *a\n",
                                 "x: " + "[" * 70 + "]" * 70 + "\n", "---\n", "s: {num_envs: 7}\n",
                                 "num_envs: ${s.num_envs}\n", "eval: {batch_size: 3}\n"]),
                max_size=8).map("".join))
def test_check_on_any_yaml_text(text):
    def run() -> Diagnosis:
        return diagnose(parse_config(yamlio.loads(text, "c.yaml", documents=True), "c.yaml"))

    result_or_user_error(run)


def _brute_nearest(policy, base, n, d, limit):
    ok = [m for m in range(1, max(n, limit) + 2) if scale_batch(policy, base, m, d)]
    below = max((m for m in ok if m < n), default=None)
    above = min((m for m in ok if n < m <= limit), default=None)
    return below, above


SMALL = st.integers(1, 96)


@settings(max_examples=300, deadline=2000)
@given(st.sampled_from(list(ScalingPolicy)), SMALL, SMALL, SMALL, st.integers(-3, 400),
       st.integers(1, 6), st.integers(1, 600))
def test_computed_searches_agree_with_trying_every_number(policy, n0, bs, nmb, n, d, limit):
    base = BatchShape(n0, bs, nmb)
    assert nearest_valid(policy, base, n, d, limit=limit) == _brute_nearest(policy, base, n, d,
                                                                            limit)
    lo, hi = sorted((abs(n), limit))
    assert list(iter_valid_sizes(policy, base, lo, hi, d)) == [
        m for m in range(max(lo, 1), hi + 1) if scale_batch(policy, base, m, d)]


@settings(max_examples=200, deadline=2000)
@given(st.sampled_from(list(ScalingPolicy)), SMALL, SMALL, SMALL, st.integers(1, 300),
       st.integers(1, 8))
def test_batch_settings_window_lists_what_the_full_scan_would(policy, n0, bs, nmb, n, count):
    """The nearest ``count`` settings come from a window around the policy's choice; the old
    full list (every multiple up to the choice) gives the same ones."""
    base = BatchShape(n0, bs, nmb)
    got = valid_batch_settings(policy, base, n, count=count)
    chosen = scale_batch(policy, base, n)
    if chosen is None:
        assert got == []
        return
    if policy is ScalingPolicy.HOLD_MINIBATCH:
        step = n // math.gcd(bs, n)
        full = [BatchShape(n, bs, step * k) for k in range(1, chosen.num_minibatches // step
                                                           + count + 1)]
    elif policy is ScalingPolicy.HOLD_NUM_MINIBATCHES:
        step = n // math.gcd(nmb, n)
        full = [BatchShape(n, step * k, nmb) for k in range(1, chosen.batch_size // step
                                                            + count + 1)]
    else:
        product = bs * nmb
        full = [BatchShape(n, x, product // x) for x in range(1, product + 1) if product % x == 0]

    def distance(s):
        return (abs(math.log2(s.batch_size / chosen.batch_size))
                + abs(math.log2(s.num_minibatches / chosen.num_minibatches)),
                s.samples_per_update)

    assert got == sorted(full, key=distance)[:count]
