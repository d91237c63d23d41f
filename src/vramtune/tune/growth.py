"""Growth over a run: what the user's configured run holds that its trials did not, priced
before the run starts, and an evaluation that holds more than the training.

On the device, brax's PPO holds what num_envs and the batch settings fix, with one exception:
the epoch's stacked outputs. ``training_epoch`` scans ``num_training_steps_per_epoch``
training steps and stacks each step's loss metrics before their mean, and XLA holds the stack
over the whole epoch. A trial's epochs are a few steps (``measure/wire.py``); a run's are
``ceil(num_timesteps / (max(num_evals - 1, 1) x env steps per training step x
max(num_resets_per_eval, 1)))`` (brax/training/agents/ppo/train.py), and brax's default
``num_evals=1`` makes the whole run one epoch. The trial reads the bytes per step from the
epoch's jaxpr (``measure/ledger.py``); a run's peak is predicted as each measured run's peak
plus those bytes times the steps the run's epoch has past that run's (the highest such
figure; labelled predicted).

Nothing else grows with a run: each evaluation runs the same num_eval_envs for the same
episode_length (the trials ran it, so it is in the measured peak), brax's metric logger keeps
bounded deques on the host, and PPO has no replay buffer. A trial ends only once its peak
holds steady over its last intervals; one that did not says so (``memory_steady``).

The evaluation is flagged when it holds more than what num_envs pays for in training: its
state and temporaries (num_eval_envs envs over an episode) against the env state, the
epoch's temporaries and its outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from vramtune.errors import UserError
from vramtune.inputs import MAX_NUM_TIMESTEPS, check_int
from vramtune.records import Status, TrialResult
from vramtune.schema import MAX_BYTES
from vramtune.units import format_bytes
from vramtune.workload.profile import Profile

BRAX_NUM_EVALS = 1  # ppo.train's default: the whole run is one epoch
BRAX_NUM_EVAL_ENVS = 128  # ppo.train's default
MAX_NUM_EVALS = 1_000_000
# An evaluation is flagged at this share of the size's peak (and more than the training):
# below it, lowering num_eval_envs frees too little to buy a size step.
EVAL_SHARE_WARN = 0.05


@dataclass(frozen=True)
class RunLength:
    """The run the user will launch: its length, and whether num_evals was said or assumed
    (brax's default; Playground's configs set their own)."""

    num_timesteps: int
    num_evals: int = BRAX_NUM_EVALS
    evals_assumed: bool = True

    def words(self) -> str:
        evals = (f"num_evals={self.num_evals:,} (assumed: brax's default; pass --num-evals if "
                 f"your run sets it)" if self.evals_assumed else f"num_evals={self.num_evals:,}")
        return f"num_timesteps={self.num_timesteps:,}, {evals}"


@dataclass(frozen=True)
class Growth:
    """A configured run's epochs against its trials': the bytes their extra steps stack, and
    the peak predicted at that length (never measured)."""

    num_envs: int
    run: RunLength
    run_epoch_steps: int  # training steps in each of the run's epochs
    trial_epoch_steps: int | None  # the measured run's (None: not read)
    stacked_bytes_per_step: int | None  # what one step stacks (None: not read)
    growth_bytes: int | None  # what the run's epochs stack past the measured run's
    measured_peak_bytes: int | None  # the run it is added to: the highest prediction's
    predicted_peak_bytes: int | None
    line_bytes: int | None  # the line the peak must stay under (None: uncapped)
    fewest_evals: int | None = None  # the smallest num_evals that keeps it under the line

    @property
    def crosses(self) -> bool:
        return (self.predicted_peak_bytes is not None and self.line_bytes is not None
                and self.predicted_peak_bytes > self.line_bytes)

    def words(self) -> str:
        """One line: the run's epoch, what it stacks, the predicted peak against the line."""
        steps = "training step" if self.run_epoch_steps == 1 else "training steps"
        run = f"{self.run.words()}: epochs of {self.run_epoch_steps:,} {steps}"
        if self.growth_bytes is None or self.predicted_peak_bytes is None:
            return (f"{run}; what they stack per step was not read (a run from before vramtune "
                    f"read it, or the read failed: see the ledger's error)")
        line = (" (no line to hold it to: the sweep had no budget)" if self.line_bytes is None
                else f" {'over' if self.crosses else 'under'} the line of "
                     f"{format_bytes(self.line_bytes)}")
        return (f"{run} stack {format_bytes(self.stacked_bytes_per_step)} per step (brax's "
                f"loss metrics, held over the epoch): the measured "
                f"{format_bytes(self.measured_peak_bytes)} (its "
                f"{self.trial_epoch_steps:,}-step epochs) +{format_bytes(self.growth_bytes)}, a "
                f"peak of {format_bytes(self.predicted_peak_bytes)} (predicted){line}")

    def warning(self) -> str | None:
        if not self.crosses:
            return None
        assert self.line_bytes is not None and self.measured_peak_bytes is not None
        if self.measured_peak_bytes > self.line_bytes:
            fix = ("a measured run of this size already peaked over it, whatever num_evals: "
                   "pick fewer envs")
        elif self.fewest_evals is not None:
            fix = f"set num_evals to at least {self.fewest_evals:,} (shorter epochs)"
        else:
            fix = (f"no num_evals up to {MAX_NUM_EVALS:,} keeps its epochs short enough: "
                   f"train fewer timesteps per run")
        return (f"{self.num_envs} envs: the run as configured will not fit: its epochs of "
                f"{self.run_epoch_steps:,} training steps hold "
                f"+{format_bytes(self.growth_bytes)} of brax's loss metrics, a peak of "
                f"{format_bytes(self.predicted_peak_bytes)} (predicted) over the line of "
                f"{format_bytes(self.line_bytes)}; {fix}")


@dataclass(frozen=True)
class EvalShare:
    """What the evaluation holds against what training's num_envs pays for, at one size."""

    num_envs: int
    num_eval_envs: int
    eval_bytes: int  # the eval envs' state, the params copy, the evaluation's temporaries
    training_bytes: int  # env state, the epoch's temporaries and outputs
    peak_bytes: int | None  # the size's measured peak (the figure the line holds)

    @property
    def dominates(self) -> bool:
        """More than the training holds, and a share of the peak worth freeing
        (``EVAL_SHARE_WARN``): a few MiB of evaluation in a CPU's ~1 GB runtime is not."""
        return (self.eval_bytes > self.training_bytes and self.peak_bytes is not None
                and self.eval_bytes >= EVAL_SHARE_WARN * self.peak_bytes)

    def warning(self) -> str | None:
        if not self.dominates:
            return None
        assert self.peak_bytes is not None
        return (f"the evaluation holds {format_bytes(self.eval_bytes)} "
                f"({self.eval_bytes / self.peak_bytes:.0%} of the peak; num_eval_envs="
                f"{self.num_eval_envs:,} envs over an episode), more than {self.num_envs:,} "
                f"envs of training ({format_bytes(self.training_bytes)}): lower num_eval_envs "
                f"to leave that room to training")


def check_run_length(num_timesteps: int | None, num_evals: int | None) -> RunLength | None:
    """The run to price, or None; num_evals alone is refused."""
    check_int(num_timesteps, "--num-timesteps", 1, MAX_NUM_TIMESTEPS)
    check_int(num_evals, "--num-evals", 1, MAX_NUM_EVALS)
    if num_timesteps is None:
        if num_evals is not None:
            raise UserError("--num-evals prices a run's length: give --num-timesteps too")
        return None
    if num_evals is None:
        return RunLength(num_timesteps)
    return RunLength(num_timesteps, num_evals, evals_assumed=False)


def plausible_bytes(value: object) -> int | None:
    """A byte count a trial can have recorded (a damaged results file may say anything)."""
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and 0 <= value <= MAX_BYTES else None


def _steps(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) \
        and 1 <= value <= MAX_BYTES else None


def env_steps_per_training_step(result: TrialResult, profile: Profile) -> int:
    """brax's env_step_per_training_step for the batch settings the trial ran."""
    return ((result.batch_size or profile.batch_size)
            * (result.num_minibatches or profile.num_minibatches)
            * (result.unroll_length or profile.unroll_length) * profile.action_repeat)


def run_epoch_steps(num_timesteps: int, num_evals: int, per_training_step: int,
                    resets: int) -> int:
    """brax's num_training_steps_per_epoch for a run of this length (train.py)."""
    return math.ceil(num_timesteps / (max(num_evals - 1, 1) * max(per_training_step, 1)
                                      * max(resets, 1)))


def _resets(profile: Profile) -> int:
    return max(int(profile.ppo.get("num_resets_per_eval") or 0), 1)


def predict_growth(results: Sequence[TrialResult], num_envs: int, profile: Profile,
                   run: RunLength, line_bytes: int | None) -> Growth | None:
    """The run's peak at ``num_timesteps`` and ``num_evals`` for a measured size: over the
    size's ok runs that read their epoch, the highest of peak + per step x the steps the
    run's epoch has past theirs. None when the size has no ok run."""
    runs = [r for r in results if r.num_envs == num_envs and r.status is Status.OK]
    if not runs:
        return None
    per_step_of = env_steps_per_training_step(runs[0], profile)
    num_timesteps = run.num_timesteps
    run_steps = run_epoch_steps(num_timesteps, run.num_evals, per_step_of, _resets(profile))
    best: tuple[int, int, int, int, int] | None = None  # predicted, peak, growth, steps, per
    read: list[tuple[int, int, int]] = []  # (peak, steps, per) of every run that read it
    for r in runs:
        per, steps, peak = (plausible_bytes(r.ledger_stacked_bytes_per_step),
                            _steps(r.ledger_epoch_steps), _held_figure(r))
        # the trial's own stack was inside its own peak: a figure past that is damage
        if per is None or steps is None or peak is None or per * steps > peak:
            continue
        read.append((peak, steps, per))
        grown = per * max(run_steps - steps, 0)
        if best is None or peak + grown > best[0]:
            best = (peak + grown, peak, grown, steps, per)
    if best is None:
        return Growth(num_envs, run, run_steps, None, None, None, None, None, line_bytes)
    predicted, peak, grown, steps, per = best
    fewest = None
    if (line_bytes is not None and predicted > line_bytes
            and all(p <= line_bytes and q > 0 for p, _, q in read)):
        # every run's prediction must stay under: the run whose epochs allow the fewest steps
        fewest = _fewest_evals(num_timesteps, per_step_of, _resets(profile),
                               min((line_bytes - p) // q + s for p, s, q in read))
    return Growth(num_envs, run, run_steps, steps, per, grown, peak, predicted, line_bytes,
                  fewest)


def _held_figure(result: TrialResult) -> int | None:
    """The run's figure the line holds it to: on GPU the process's (NVML, else the pool),
    which ``boundary.under_line`` also holds under the line, when larger than the pool;
    the data segment on CPU."""
    pool = plausible_bytes(result.line_figure_bytes)
    if not result.is_gpu:
        return pool
    process = plausible_bytes(result.peak_bytes)
    return pool if process is None else process if pool is None else max(pool, process)


def _fewest_evals(num_timesteps: int, per_training_step: int, resets: int,
                  most_steps: int) -> int | None:
    """The smallest num_evals whose epochs are at most ``most_steps`` long (None: none is)."""
    if most_steps < 1:
        return None
    evals_after_init = math.ceil(num_timesteps / (most_steps * per_training_step * resets))
    evals = max(evals_after_init + 1, 2)
    return evals if evals <= MAX_NUM_EVALS else None


def eval_share(figures: dict[str, int | None], num_envs: int, profile: Profile
               ) -> EvalShare | None:
    """The evaluation against training at one size (a SizeLedger's figures); None when
    either side was not counted (no evaluation ran)."""
    eval_state, eval_temp = figures.get("ledger_eval_state_bytes"), \
        figures.get("ledger_eval_temp_bytes")
    training = [figures.get(f) for f in ("ledger_env_state_bytes", "ledger_epoch_temp_bytes",
                                         "ledger_epoch_outputs_bytes")]
    if eval_state is None or eval_temp is None or None in training:
        return None
    eval_envs = int(profile.ppo.get("num_eval_envs") or BRAX_NUM_EVAL_ENVS)
    return EvalShare(num_envs, eval_envs, eval_state + eval_temp,
                     sum(training), figures.get("peak_bytes"))  # type: ignore[arg-type]
