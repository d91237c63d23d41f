"""Brax PPO's batch rules (brax 0.14.x, ``brax/training/agents/ppo/train.py``).

``ppo.train`` asserts ``batch_size * num_minibatches % num_envs == 0`` and
``num_envs % device_count == 0`` only after it has started; people find out after the
compile. Everything here is pure arithmetic so the planner, ``check`` and ``emit-config``
share one source of truth.

Searches are computed, never scanned up to a number from a file: under hold-env-steps the
valid sizes are the divisors of batch_size x num_minibatches (listed from the two factors'
prime factorisations), under the growing policies every multiple of the device count.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

# brax.training.agents.ppo.train's own defaults (brax 0.14.x): what ppo.train runs with when
# a config or profile leaves these out.
BRAX_DEFAULTS = {"batch_size": 32, "num_minibatches": 16, "unroll_length": 10}


class ScalingPolicy(StrEnum):
    """How batch settings follow num_envs once it outgrows the base config."""

    HOLD_MINIBATCH = "hold-minibatch"  # batch_size fixed, num_minibatches grows
    HOLD_NUM_MINIBATCHES = "hold-num-minibatches"  # num_minibatches fixed, batch_size grows
    HOLD_ENV_STEPS = "hold-env-steps"  # batch_size * num_minibatches fixed: num_envs must divide it


@dataclass(frozen=True)
class BatchShape:
    num_envs: int
    batch_size: int
    num_minibatches: int

    @property
    def samples_per_update(self) -> int:
        """Trajectories of length unroll_length per training step (Brax's batch_size * nmb)."""
        return self.batch_size * self.num_minibatches

    @property
    def unrolls_per_step(self) -> int:
        """How many times one training step runs the env unroll."""
        return self.samples_per_update // self.num_envs


@dataclass(frozen=True)
class Violation:
    rule: str
    explanation: str


def violations(num_envs: int, batch_size: int, num_minibatches: int,
               device_count: int = 1) -> list[Violation]:
    """Every Brax PPO rule this combination breaks, in plain words."""
    found: list[Violation] = []
    for name, value in (("num_envs", num_envs), ("batch_size", batch_size),
                        ("num_minibatches", num_minibatches), ("device_count", device_count)):
        if value < 1:
            found.append(Violation(f"{name} >= 1", f"{name} is {value}; it must be a positive integer"))
    if found:
        return found
    product = batch_size * num_minibatches
    if product % num_envs:
        extra = (f" num_envs can never exceed batch_size x num_minibatches ({product})."
                 if num_envs > product else "")
        found.append(Violation(
            "batch_size * num_minibatches % num_envs == 0",
            f"each training step unrolls all {num_envs} envs a whole number of times to fill "
            f"batch_size x num_minibatches = {batch_size} x {num_minibatches} = {product} "
            f"trajectories, and {product} is not a multiple of {num_envs}.{extra}"))
    if num_envs % device_count:
        found.append(Violation(
            "num_envs % device_count == 0",
            f"the envs are split evenly across {device_count} devices, and {num_envs} is not a "
            f"multiple of {device_count}"))
    return found


def _smallest_multiple_at_least(step: int, floor: int) -> int:
    return max(1, math.ceil(floor / step)) * step


def scale_batch(policy: ScalingPolicy, base: BatchShape, num_envs: int,
                device_count: int = 1) -> BatchShape | None:
    """The batch settings the policy gives at this num_envs, or None if it allows none.

    ``base`` is the profile's tuned trio. The two growing policies keep the unrolls per
    training step (batch_size x num_minibatches / num_envs) of the base, as people do when
    they scale a config, rounding up to the nearest value Brax accepts; at the base's own
    num_envs the base is returned unchanged.
    """
    if num_envs < 1 or num_envs % device_count:
        return None
    bs, nmb = base.batch_size, base.num_minibatches
    if policy is ScalingPolicy.HOLD_ENV_STEPS:
        return BatchShape(num_envs, bs, nmb) if (bs * nmb) % num_envs == 0 else None
    if policy is ScalingPolicy.HOLD_MINIBATCH:
        target = math.ceil(nmb * num_envs / base.num_envs)
        nmb = _smallest_multiple_at_least(num_envs // math.gcd(bs, num_envs), target)
    else:
        target = math.ceil(bs * num_envs / base.num_envs)
        bs = _smallest_multiple_at_least(num_envs // math.gcd(nmb, num_envs), target)
    return BatchShape(num_envs, bs, nmb)


@functools.lru_cache(maxsize=256)
def _factorise(n: int) -> tuple[tuple[int, int], ...]:
    """(prime, exponent) pairs of n >= 1, by trial division (n up to 2**40: a fraction of a
    second; callers bound what they pass)."""
    factors: list[tuple[int, int]] = []
    for p in (2, 3):
        if n % p == 0:
            e = 0
            while n % p == 0:
                n //= p
                e += 1
            factors.append((p, e))
    p = 5
    while p * p <= n:
        for q in (p, p + 2):
            if n % q == 0:
                e = 0
                while n % q == 0:
                    n //= q
                    e += 1
                factors.append((q, e))
        p += 6
    if n > 1:
        factors.append((n, 1))
    return tuple(factors)


@functools.lru_cache(maxsize=64)
def divisors_of_product(a: int, b: int) -> tuple[int, ...]:
    """Every divisor of a x b (a, b >= 1), ascending, from the factorisations of a and b
    (never by trying each number up to the product)."""
    exponents: dict[int, int] = {}
    for n in (a, b):
        for p, e in _factorise(n):
            exponents[p] = exponents.get(p, 0) + e
    divisors = [1]
    for p, e in exponents.items():
        divisors = [d * p ** k for d in divisors for k in range(e + 1)]
    return tuple(sorted(divisors))


def iter_valid_sizes(policy: ScalingPolicy, base: BatchShape, lo: int, hi: int,
                     device_count: int = 1) -> Iterator[int]:
    """Every num_envs in [lo, hi] the policy can serve, ascending, produced lazily:
    hold-env-steps lists the divisors of the product that the device count divides, the
    growing policies every multiple of the device count."""
    lo = max(1, lo)
    if device_count < 1 or hi < lo:
        return
    if policy is ScalingPolicy.HOLD_ENV_STEPS:
        if base.batch_size < 1 or base.num_minibatches < 1:
            return
        divisors = divisors_of_product(base.batch_size, base.num_minibatches)
        for n in divisors[bisect.bisect_left(divisors, lo):bisect.bisect_right(divisors, hi)]:
            if n % device_count == 0:
                yield n
        return
    yield from range(-(-lo // device_count) * device_count, hi + 1, device_count)


def nearest_valid(policy: ScalingPolicy, base: BatchShape, num_envs: int, device_count: int = 1,
                  *, limit: int = 1 << 22) -> tuple[int | None, int | None]:
    """The closest valid num_envs below and above (None where there is none); above is at
    most ``limit``. Computed, whatever the size: no number is tried one by one."""
    if device_count < 1:
        return None, None
    if policy is ScalingPolicy.HOLD_ENV_STEPS:
        if base.batch_size < 1 or base.num_minibatches < 1:
            return None, None
        sizes = [n for n in divisors_of_product(base.batch_size, base.num_minibatches)
                 if n % device_count == 0]
        i = bisect.bisect_left(sizes, num_envs)
        below = sizes[i - 1] if i > 0 else None
        j = bisect.bisect_right(sizes, num_envs)
        above = sizes[j] if j < len(sizes) and sizes[j] <= limit else None
        return below, above
    below_n = (num_envs - 1) // device_count * device_count
    above_n = (max(num_envs, 0) // device_count + 1) * device_count
    return (below_n if below_n >= 1 else None), (above_n if above_n <= limit else None)


def nearest_fixes(num_envs: int, batch_size: int, num_minibatches: int,
                  device_count: int = 1, count: int = 3) -> list[BatchShape]:
    """A few closest valid configurations, each changing as little as possible."""
    candidates: list[tuple[float, BatchShape]] = []

    def consider(n: int, bs: int, nmb: int) -> None:
        if n >= 1 and bs >= 1 and nmb >= 1 and not violations(n, bs, nmb, device_count):
            distance = (abs(math.log2(n / num_envs)) + abs(math.log2(bs / batch_size))
                        + abs(math.log2(nmb / num_minibatches)))
            candidates.append((distance, BatchShape(n, bs, nmb)))

    given = BatchShape(num_envs, batch_size, num_minibatches)
    # Under a fixed product no valid num_envs exceeds it: scanning further only costs time.
    below, above = nearest_valid(ScalingPolicy.HOLD_ENV_STEPS, given, num_envs, device_count,
                                 limit=max(batch_size * num_minibatches, 1))
    for n in (below, above):
        if n is not None:
            consider(n, batch_size, num_minibatches)
    # Keep num_envs, grow the smallest amount: num_minibatches, or batch_size.
    for policy in (ScalingPolicy.HOLD_MINIBATCH, ScalingPolicy.HOLD_NUM_MINIBATCHES):
        product = batch_size * num_minibatches
        reference = BatchShape(max(num_envs, 1), batch_size, num_minibatches)
        shape = scale_batch(policy, reference, num_envs, device_count) if product else None
        if shape:
            consider(shape.num_envs, shape.batch_size, shape.num_minibatches)
    seen: set[BatchShape] = set()
    ordered = []
    for _, shape in sorted(candidates, key=lambda c: (c[0], c[1].num_envs)):
        if shape not in seen:
            seen.add(shape)
            ordered.append(shape)
    return ordered[:count]


def lr_scaling_hint(base: BatchShape, chosen: BatchShape, unroll_length: int,
                    learning_rate: float | None) -> str | None:
    """Square-root LR scaling advice when the samples per update changed; None if unchanged."""
    before = base.samples_per_update * unroll_length
    after = chosen.samples_per_update * unroll_length
    if before == after and base.batch_size == chosen.batch_size:
        return None
    ratio = math.sqrt(chosen.batch_size / base.batch_size)
    text = (f"env steps per update changed {before} -> {after}; minibatch size "
            f"{base.batch_size} -> {chosen.batch_size}.")
    if learning_rate is not None and ratio != 1:
        text += (f" Square-root scaling suggests learning_rate {learning_rate:g} x "
                 f"sqrt({chosen.batch_size}/{base.batch_size}) = {learning_rate * ratio:.3g}.")
    return text


def valid_batch_settings(policy: ScalingPolicy, base: BatchShape, num_envs: int,
                         device_count: int = 1, *, count: int = 6) -> list[BatchShape]:
    """The valid (batch_size, num_minibatches) for num_envs that keep what the policy holds.

    The policy's own choice (``scale_batch``) comes first, then the alternatives that change
    the optimisation least: the growing policies allow every multiple of a step, so only
    the ``count`` closest are listed; hold-env-steps keeps batch_size x num_minibatches and
    lists the ways to split that product. Empty when none is valid: ask ``nearest_valid``
    for the closest num_envs on both sides.
    """
    chosen = scale_batch(policy, base, num_envs, device_count)
    if chosen is None or count < 1:
        return []
    bs, nmb = base.batch_size, base.num_minibatches
    # Only the multiples near the policy's own choice: the closest ``count`` lie within
    # ``count`` steps of it (listing every multiple up to a huge batch would not end).
    if policy is ScalingPolicy.HOLD_MINIBATCH:
        step = num_envs // math.gcd(bs, num_envs)
        k = chosen.num_minibatches // step
        shapes = [BatchShape(num_envs, bs, step * j) for j in range(max(1, k - count),
                                                                     k + count + 1)]
    elif policy is ScalingPolicy.HOLD_NUM_MINIBATCHES:
        step = num_envs // math.gcd(nmb, num_envs)
        k = chosen.batch_size // step
        shapes = [BatchShape(num_envs, step * j, nmb) for j in range(max(1, k - count),
                                                                     k + count + 1)]
    else:
        product = bs * nmb
        shapes = [BatchShape(num_envs, d, product // d) for d in divisors_of_product(bs, nmb)]

    def distance(s: BatchShape) -> tuple[float, int]:
        return (abs(math.log2(s.batch_size / chosen.batch_size))
                + abs(math.log2(s.num_minibatches / chosen.num_minibatches)), s.samples_per_update)

    return sorted(shapes, key=distance)[:count]


def _odd_bits(value: int, original: int) -> float:
    """How much less round value is than original: people tune in powers of two, so 9216
    envs x 36 minibatches reads better than 8160 x 255 though both are equally valid."""
    def odd(x: int) -> int:
        return x // (x & -x)

    return max(0.0, math.log2(odd(value) / odd(original))) if value != original else 0.0


def suggest_fixes(num_envs: int, batch_size: int, num_minibatches: int, device_count: int = 1,
                  count: int = 3, *, max_scan: int = 20000) -> list[BatchShape]:
    """``nearest_fixes``, topped up when it finds fewer than ``count``.

    With several devices there may be no valid num_envs that divides batch_size x
    num_minibatches (8192 envs on 3 GPUs), so the fixes must move num_envs and grow a batch
    setting together: scan the multiples of device_count from num_envs/2 to 2 x num_envs
    and keep the combinations that change the least (and stay round).
    """
    fixes = nearest_fixes(num_envs, batch_size, num_minibatches, device_count, count)
    if len(fixes) >= count or min(num_envs, batch_size, num_minibatches, device_count) < 1:
        return fixes
    given = BatchShape(num_envs, batch_size, num_minibatches)
    scored: list[tuple[float, BatchShape]] = []
    lo = max(device_count, (num_envs // 2) // device_count * device_count)
    for n in range(lo, min(2 * num_envs, lo + max_scan * device_count) + 1, device_count):
        for policy in ScalingPolicy:
            shape = scale_batch(policy, given, n, device_count)
            if shape is None or shape in fixes:
                continue
            distance = sum(abs(math.log2(after / before)) + 0.1 * _odd_bits(after, before)
                           for after, before in ((n, num_envs), (shape.batch_size, batch_size),
                                                 (shape.num_minibatches, num_minibatches)))
            scored.append((distance, shape))
    for _, shape in sorted(scored, key=lambda c: (c[0], c[1].num_envs)):
        if len(fixes) >= count:
            break
        if shape not in fixes:
            fixes.append(shape)
    return fixes
