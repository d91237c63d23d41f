"""`vramtune check`'s diagnosis as lines of text and as a JSON object."""

from __future__ import annotations

from typing import Any

from vramtune.workload.configfile import Diagnosis, PolicyOptions, describe_fix
from vramtune.workload.rules import BRAX_DEFAULTS, BatchShape, ScalingPolicy


def check_dict(d: Diagnosis) -> dict[str, Any]:
    c = d.config
    return {
        "file": c.source, "valid": d.valid, "device_count": d.device_count,
        **{name: {"value": getattr(c, name).value, "from": getattr(c, name).path}
           for name in ("num_envs", "batch_size", "num_minibatches", "unroll_length")},
        "env_steps_per_update": d.env_steps_per_update,
        "violations": [{"rule": v.rule, "explanation": v.explanation} for v in d.violations],
        "fixes": [{"num_envs": f.num_envs, "batch_size": f.batch_size,
                   "num_minibatches": f.num_minibatches, "change": describe_fix(c, f)}
                  for f in d.fixes],
        "by_policy": {str(o.policy): {"settings": [[s.batch_size, s.num_minibatches]
                                                   for s in o.shapes],
                                      "nearest_num_envs": [o.below, o.above]}
                      for o in d.options},
        "notes": list(c.notes),
    }


def check_lines(d: Diagnosis) -> list[str]:
    c = d.config
    lines = [f"{c.source}:"]
    for name in ("num_envs", "batch_size", "num_minibatches", "unroll_length"):
        found = getattr(c, name)
        lines.append(f"  {name:<16}{found.value:<10}({found.where})")
    lines.append(f"  {'device_count':<16}{d.device_count:<10}(--device-count)")
    if c.defaults_used:
        names = " and ".join(c.defaults_used)
        lines.append(f"  note: {names} not in the file: ppo.train's defaults apply "
                     f"(batch_size {BRAX_DEFAULTS['batch_size']}, "
                     f"num_minibatches {BRAX_DEFAULTS['num_minibatches']})")
    lines += [f"  note: {note}" for note in c.notes]
    if d.valid:
        shape = c.shape
        lines.append(f"valid: each training step unrolls all {shape.num_envs} envs "
                     f"{shape.unrolls_per_step} time{'s' if shape.unrolls_per_step != 1 else ''} "
                     f"({d.env_steps_per_update} env steps per update)")
        return lines
    count = len(d.violations)
    lines.append(f"INVALID: {count} rule{'s' if count != 1 else ''} broken")
    for v in d.violations:
        lines += [f"  x {v.rule}", f"    {v.explanation}"]
    if d.fixes:
        lines.append("nearest valid settings:")
        lines += [f"  - num_envs={f.num_envs} batch_size={f.batch_size} "
                  f"num_minibatches={f.num_minibatches}: {describe_fix(c, f)}" for f in d.fixes]
    if d.options:
        lines.append(f"by scaling policy (keeping num_envs={c.num_envs.value}):")
        lines += [f"  - {_option(o, c.shape)}" for o in d.options]
    return lines


_HOLDS = {ScalingPolicy.HOLD_MINIBATCH: "batch_size", ScalingPolicy.HOLD_NUM_MINIBATCHES:
          "num_minibatches", ScalingPolicy.HOLD_ENV_STEPS: "batch_size x num_minibatches"}


def _option(o: PolicyOptions, given: BatchShape) -> str:
    held = _HOLDS[o.policy]
    value = given.samples_per_update if o.policy is ScalingPolicy.HOLD_ENV_STEPS else \
        getattr(given, held)
    head = f"{o.policy} ({held} {value} kept): "
    if o.shapes:
        return head + " or ".join(f"{s.batch_size} x {s.num_minibatches}" for s in o.shapes)
    sides = [f"{n} {side}" for n, side in ((o.below, "below"), (o.above, "above")) if n]
    if not sides:
        return head + "no num_envs is valid on this device count without changing it"
    return head + "nothing valid at this num_envs; nearest num_envs " + " and ".join(sides)
