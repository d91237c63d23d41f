"""Where a trial's memory goes: the parts of brax's training by role, read in the trial child.

brax's ``ppo.train`` hands its whole state to two jitted calls: ``training_epoch(training_state,
env_state, key)`` (brax/training/agents/ppo/train.py: a scan of training steps, pmapped) and
the evaluator's ``generate_eval_unroll(eval_state, params, key)`` (brax/training/acting.py).
Their arguments at the first call are the real pytrees the trainer holds at a step boundary:
``TrainingState`` (params, optimizer state, normalizer, env_steps: train.py ``TrainingState``),
the env state of num_envs envs, the evaluator's state of its eval envs. Each is counted here
by its arrays' bytes. XLA's own figures for the two executables
(``Compiled.memory_analysis()``: arguments, outputs, aliased, temporaries) come from
compiling each call ahead of time with the arguments it was about to get, just before brax's
call, which then runs that executable without a second compile (jax's lowering and compile
caches; checked on jax 0.9.2 and 0.10.2: one backend compile in all, by either path). Nothing
else changes: brax's code, arguments and donation are its own.

The rollout is not an argument: brax builds it inside the epoch's scan (train.py
``training_step``: ``batch_size * num_minibatches // num_envs`` unrolls of ``unroll_length``
steps of every env) and it lives in the epoch's temporaries. Its size is counted from the
env state's own arrays and the policy's outputs, field by field as ``acting.actor_step`` fills
a ``Transition``: observation and next observation, action, reward, discount, the policy's
extras (log-prob, raw action, distribution parameters: ppo/networks.py) and the state extras
PPO asks for (truncation, episode_metrics, episode_done, time_out when bootstrapping on
timeouts). It is part of the temporaries, never added to them.

The epoch's length: brax's epoch scans ``num_training_steps_per_epoch`` training steps and
stacks each step's loss metrics (``num_updates_per_batch x num_minibatches`` of each) before
their mean, and XLA holds the stacked arrays over the whole epoch. A trial's epochs are a few
steps; a user's run with brax's default ``num_evals=1`` is one epoch of the whole run. The
stacked outputs per step are read from the epoch's jaxpr (its outermost scan: the outputs it
stacks, divided by its length), so a run's length can be priced before it starts
(``tune/growth.py``): at 2,002 steps against 2, XLA's temporaries grew by 2,000 x the
jaxpr's 12,288 B to the byte (quick at 64 envs, 32 minibatches x 8 updates; jax 0.9.2).

Figures are per process on a CPU (all its devices: one data segment) and per device on a GPU
(the pool is per device): the epoch is pmapped over every device, the evaluation jitted on
one, so its figures count once either way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from vramtune.measure.intercept import wrap_named

EPOCH_FUNCTION = "training_epoch"
EVAL_FUNCTION = "generate_eval_unroll"
STATE_EXTRAS = ("truncation", "episode_metrics", "episode_done")  # train.py training_step
_MAX_JAXPR_DEPTH = 64  # nested calls walked for the epoch's scan (brax's is 2-3 deep)


def tree_bytes(tree: Any, jax: Any) -> int:
    """The bytes of every array leaf (all devices together)."""
    return int(sum(getattr(leaf, "nbytes", 0) or 0 for leaf in jax.tree_util.tree_leaves(tree)))


def transition_bytes_per_env(env_state: Any, action_size: int, jax: Any, *,
                             num_envs: int, bootstrap_on_timeout: bool,
                             computes_value: bool = False) -> int:
    """One ``Transition`` of one env, as PPO's unroll fills it (see the module docstring).
    ``env_state`` is the batched state of all ``num_envs`` envs (over every device)."""
    count = max(num_envs, 1)

    def per_env(tree: Any) -> int:
        return math.ceil(tree_bytes(tree, jax) / count)

    info = getattr(env_state, "info", {}) or {}
    obs = per_env(env_state.obs)
    reward = per_env(env_state.reward)
    done = per_env(env_state.done)  # discount = 1 - done: the same dtype
    f32 = 4  # the policy's outputs: float32 parameters
    # log_prob (1), raw_action (A), distribution_params (2A: loc and scale)
    # and the value estimate (1) where the policy computes it (train.py make_inference_fn:
    # bootstrap_on_timeout or clipping_epsilon_value); a distributional critic's quantiles
    # are not counted (a lower bound there)
    policy_extras = f32 * (1 + action_size + 2 * action_size + (1 if computes_value else 0))
    wanted = (*STATE_EXTRAS, "time_out") if bootstrap_on_timeout else STATE_EXTRAS
    state_extras = sum(per_env(info[k]) for k in wanted if k in info)
    return obs * 2 + f32 * action_size + reward + done + policy_extras + state_extras


def _sub_jaxprs(params: dict[str, Any]) -> list[Any]:
    """The jaxprs an equation's parameters hold (a call's body, a loop's), open or closed."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                found.append(inner)  # a ClosedJaxpr
            elif hasattr(item, "eqns"):
                found.append(item)
    return found


def outermost_scan(jaxpr: Any, depth: int = 0) -> Any | None:
    """The first ``scan`` equation met walking down from the top (calls and maps entered):
    in brax's epoch, the scan over its training steps, which holds every other scan."""
    if depth > _MAX_JAXPR_DEPTH:
        return None
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            return eqn
        for inner in _sub_jaxprs(eqn.params):
            found = outermost_scan(inner, depth + 1)
            if found is not None:
                return found
    return None


def stacked_bytes_per_step(scan: Any) -> tuple[int, int]:
    """(the scan's length, the bytes it stacks per iteration): its outputs past the carry."""
    length = int(scan.params["length"])
    stacked = scan.outvars[int(scan.params["num_carry"]):]
    total = sum(math.prod(v.aval.shape) * v.aval.dtype.itemsize for v in stacked)
    return length, -(-int(total) // max(length, 1))


class LedgerWatch:
    """Counts the roles at the first call of the epoch and of the evaluation (``install``
    before brax's ``train`` runs: brax looks ``jax.pmap``/``jax.jit`` up when it trains)."""

    def __init__(self, *, num_envs: int, batch_size: int, num_minibatches: int,
                 unroll_length: int, action_size: int | None, on_gpu: bool, devices: int,
                 bootstrap_on_timeout: bool, computes_value: bool = False,
                 epoch_steps: int | None = None,
                 peak_so_far: Callable[[], int | None] | None = None) -> None:
        self.num_envs, self.batch_size, self.num_minibatches = num_envs, batch_size, num_minibatches
        self.unroll_length, self.action_size = unroll_length, action_size
        self.on_gpu, self.devices, self.bootstrap = on_gpu, max(devices, 1), bootstrap_on_timeout
        self.computes_value = computes_value
        self.epoch_steps = epoch_steps  # brax's num_training_steps_per_epoch in this trial
        self.peak_so_far = peak_so_far  # the figure the cap counts, its peak until now
        self.figures: dict[str, int] = {}
        self.error: str | None = None
        self._seen: set[str] = set()

    def _scale(self, global_bytes: int) -> int:
        """All devices' bytes to the ledger's unit: per device on a GPU."""
        return global_bytes // self.devices if self.on_gpu else global_bytes

    def _xla(self, per_device_bytes: int) -> int:
        """An executable's per-device figure to the ledger's unit: the process on a CPU."""
        return per_device_bytes if self.on_gpu else per_device_bytes * self.devices

    def install(self, jax: Any) -> None:
        watch = self

        def wrap(which: str, staged: Any) -> Any:
            @functools.wraps(staged)
            def first_call(*call_args: Any, **call_kwargs: Any) -> Any:
                if which in watch._seen:
                    return staged(*call_args, **call_kwargs)
                watch._seen.add(which)
                watch._count(jax, which, staged, call_args, call_kwargs)
                out = staged(*call_args, **call_kwargs)
                if which == EVAL_FUNCTION:  # brax reads the metrics at once: no wait added
                    watch._after_eval(jax, out)
                return out
            return first_call

        wrap_named(jax, (EPOCH_FUNCTION, EVAL_FUNCTION), wrap)

    def _count(self, jax: Any, which: str, staged: Any, args: tuple, kwargs: dict) -> None:
        """The roles in ``args`` and XLA's figures; a failure leaves the training alone and
        says why (the ledger is then partial or None, never guessed)."""
        try:
            if which == EPOCH_FUNCTION:
                self._count_epoch(jax, args)
                self._count_stacked(jax, staged, args, kwargs)
            else:
                self._phase("ledger_peak_before_eval_bytes")
                # the eval envs' state, and the copy of the policy params it is given:
                # jitted on one device (brax's Evaluator), so neither scaled nor multiplied
                self.figures["ledger_eval_state_bytes"] = (tree_bytes(args[0], jax)
                                                           + tree_bytes(args[1:2], jax))
            if which == EPOCH_FUNCTION:  # the phases: before the epoch's compile, after it
                self._phase("ledger_peak_before_epoch_compile_bytes")
            # Before the call: brax donates these arguments to it.
            analysis = staged.lower(*args, **kwargs).compile().memory_analysis()
            if which == EPOCH_FUNCTION:
                self._phase("ledger_peak_after_epoch_compile_bytes")
            temp = int(analysis.temp_size_in_bytes)
            if which == EPOCH_FUNCTION:
                outputs = int(analysis.output_size_in_bytes) - int(analysis.alias_size_in_bytes)
                self.figures["ledger_epoch_outputs_bytes"] = self._xla(max(outputs, 0))
                self.figures["ledger_epoch_temp_bytes"] = self._xla(temp)
            else:
                self.figures["ledger_eval_temp_bytes"] = temp
        except Exception as exc:  # noqa: BLE001 - a missing figure, never a lost trial
            self._failed(which, exc)

    def _failed(self, which: str, exc: Exception) -> None:
        """Say why a figure is missing; the first failure is the one kept."""
        self.error = self.error or f"{which}: {type(exc).__name__}: {str(exc)[:200]}"

    def _count_stacked(self, jax: Any, staged: Any, args: tuple, kwargs: dict) -> None:
        """The epoch's stacked outputs per training step, from its jaxpr (a trace, no
        compile); only when the outermost scan is the epoch's (its length is the trial's).
        Its own failure leaves the epoch's other figures alone."""
        try:
            scan = outermost_scan(jax.make_jaxpr(staged)(*args, **kwargs).jaxpr)
        except Exception as exc:  # noqa: BLE001 - a missing figure, never a lost trial
            self._failed(EPOCH_FUNCTION, exc)
            return
        if scan is None:
            self.error = self.error or f"{EPOCH_FUNCTION}: no scan over training steps in its jaxpr"
            return
        length, per_step = stacked_bytes_per_step(scan)
        if self.epoch_steps is not None and length != self.epoch_steps:
            self.error = self.error or (f"{EPOCH_FUNCTION}: its outermost scan is {length} "
                                        f"long, not the {self.epoch_steps} training steps of "
                                        f"an epoch")
            return
        self.figures["ledger_epoch_steps"] = length
        self.figures["ledger_stacked_bytes_per_step"] = self._xla(per_step)

    def _after_eval(self, jax: Any, out: Any) -> None:
        try:
            jax.block_until_ready(out)
            self._phase("ledger_peak_after_eval_bytes")
        except Exception as exc:  # noqa: BLE001 - brax's own read of it raises the same
            self._failed(EVAL_FUNCTION, exc)

    def _phase(self, field: str) -> None:
        value = self.peak_so_far() if self.peak_so_far is not None else None
        if value is not None:
            self.figures[field] = int(value)

    def _count_epoch(self, jax: Any, args: tuple) -> None:
        training_state, env_state = args[0], args[1]
        params = getattr(training_state, "params", None)
        optimizer = getattr(training_state, "optimizer_state", None)
        normalizer = getattr(training_state, "normalizer_params", None)
        counted = tree_bytes(training_state, jax)
        parts = {"ledger_params_bytes": tree_bytes(params, jax),
                 "ledger_optimizer_bytes": tree_bytes(optimizer, jax),
                 "ledger_normalizer_bytes": tree_bytes(normalizer, jax)}
        # env_steps and the epoch's keys: a few bytes, counted so that nothing is dropped
        keys = counted - sum(parts.values()) + sum(tree_bytes(a, jax) for a in args[2:])
        self.figures.update({k: self._scale(v) for k, v in parts.items()})
        self.figures["ledger_keys_bytes"] = self._scale(keys)
        self.figures["ledger_env_state_bytes"] = self._scale(tree_bytes(env_state, jax))
        if self.action_size is not None:
            per_step = transition_bytes_per_env(env_state, self.action_size, jax,
                                                num_envs=self.num_envs,
                                                bootstrap_on_timeout=self.bootstrap,
                                                computes_value=self.computes_value)
            # B x M / N unrolls of T steps of every env: B x M x T transitions in all, split
            # over the devices (each scans its N / D envs)
            transitions = self.batch_size * self.num_minibatches * self.unroll_length
            self.figures["ledger_rollout_bytes"] = self._scale(per_step * transitions)

    def fields(self) -> dict[str, Any]:
        """The record's ledger fields (those not counted stay absent: None)."""
        return dict(self.figures)
