"""The Python API: what the CLI calls, and what a notebook or a script imports.

Every argument takes what a person would type (``gpu_mem="8GB"``, ``headroom="10%"``) or the
plain number (bytes, a fraction); bad values raise ``vramtune.errors.UserError`` with one
line that says what was expected. Nothing here prints: callers get records back and choose
how to show them (the CLI renders them with rich, a notebook with pandas); a sweep's progress
and warnings go to the "vramtune" logger as well as to ``on_event``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import pandas as pd

from vramtune.compat import require_trainable_stack
from vramtune.errors import UserError, quoted
from vramtune.inputs import (
    MAX_TRAINING_STEPS,
    Percent,
    Size,
    as_budgets,
    as_cap,
    as_devices,
    as_flag,
    as_fraction,
    as_objective,
    as_run_paths,
    check_hydra_prefix,
    check_int,
    check_num_envs,
    check_text,
    check_timeout,
    required_choice,
    required_path,
)
from vramtune.machine import compile_cache_dir, mem_fraction_var
from vramtune.measure.doctor import DoctorReport
from vramtune.measure.doctor import diagnose as diagnose_machine
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import device_cap
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.measure.wire import Event, Sample, SweepNote, TrialPhase, TrialStarted
from vramtune.notebook import caller_gpu_warning, log, logged_events, result_line
from vramtune.records import Objective, Purpose, TrialResult
from vramtune.results.frame import runs_frame
from vramtune.results.settings import SearchMethod
from vramtune.results.store import (
    Run,
    RunHeader,
    find_runs,
    is_parent_of_runs,
    load_run,
    newest_run,
    trial_from_dict,
)
from vramtune.tune.alone import decide
from vramtune.tune.bench import BenchOutcome, prepare_bench, run_bench, save_outcome
from vramtune.tune.budgets import (
    CPU_NOTICE,
    Emission,
    Measurements,
    before_the_long_run,
    choose_for_budget,
    merge_runs,
    run_objective,
    run_speed_margin,
)
from vramtune.tune.gate import DEFAULT_MAX_SPEED_DROP, BenchReport, Verdict
from vramtune.tune.growth import check_run_length
from vramtune.tune.ledger import Explanation, explain_run
from vramtune.tune.options import SweepOptions, as_margin, sweep_flags
from vramtune.tune.planner import Step
from vramtune.tune.prepare import PreparedSweep, prepare, prepare_by_type
from vramtune.tune.recommend import Recommendation, choose
from vramtune.tune.request import DEFAULT_SPEED_MARGIN_FRACTION, SweepRequest, as_profile
from vramtune.tune.sweep import run_sweep, run_sweeps
from vramtune.units import headroom_limit_bytes
from vramtune.views.configs import HYDRA_TOP_KEYS, ConfigFormat, render
from vramtune.views.runs import outcome_lines
from vramtune.workload.configfile import Diagnosis, diagnose, load_config
from vramtune.workload.emitted import TOP_LEVEL_PPO_KEYS, verification_profile
from vramtune.workload.pickled import require_factory
from vramtune.workload.profile import Profile, builtin_profiles, load_profile
from vramtune.workload.sources import BRAX_BACKENDS, parse_source
from vramtune.workload.starter import write_starter_profile

# The public API, and the core's types and constants the CLI reads (cli/ imports nothing
# else of tune/, measure/, results/ or workload/: ruff's banned-api in cli/ruff.toml).
__all__ = [
    # sweeps
    "ProfileArg", "SweepOutcome", "SweepRequest", "SweepOptions", "PreparedSweep",
    "SearchMethod", "Step", "sweep_flags", "sweep", "sweep_request", "prepare_sweep",
    "prepare_sweeps", "run_prepared", "run_prepared_sweeps", "outcome",
    # one trial, a pick, a config file, the machine, profiles
    "TrialRequest", "TrialResult", "Objective", "Recommendation", "Diagnosis", "DoctorReport",
    "Profile", "Nvml", "BRAX_BACKENDS",
    "trial", "trial_request", "run_request", "recommend", "check", "verify", "doctor",
    "init_profile", "profiles",
    # what a running trial reports
    "Event", "Sample", "SweepNote", "TrialPhase", "TrialStarted",
    # saved runs and the configs emitted from them
    "Run", "RunChoice", "EmittedConfig", "Measurements", "Emission", "ConfigFormat", "CPU_NOTICE",
    "RunsArg", "load_runs", "open_run", "expand_runs", "newest_run", "is_parent_of_runs", "runs_by_card",
    "choose_in_run", "emit_config", "emit_cards", "Explanation", "explain",
    # the CI regression gate
    "BenchOutcome", "BenchReport", "Verdict", "DEFAULT_MAX_SPEED_DROP", "bench",
]

# A profile as a person passes it: a built-in name, a YAML file, a Profile, a dict (whose env
# may be a callable), or a bare env factory (``vramtune.sweep(make_env)``: its default settings)
ProfileArg = (str | Path | Profile | Mapping[str, Any] | Callable[[], Any] | SweepRequest
              | None)
# Saved sweeps as a person passes them: a run directory (or its results.jsonl), a run already
# read, or any iterable of them (a list, a glob's generator)
RunsArg = str | os.PathLike | Run | Iterable[str | os.PathLike | Run]


@dataclass(frozen=True)
class SweepOutcome:
    """A finished (or interrupted) sweep: every trial, the pick, where it is saved; in a
    notebook, ``.frame``, ``.plot()``, ``.ppo_kwargs`` and ``.yaml``."""

    run_dir: Path
    results: tuple[TrialResult, ...]
    recommendation: Recommendation
    stopped_because: str | None  # None when interrupted
    reused: int
    interrupted: bool = False
    header: RunHeader | None = None  # what the run was measured with (profile, budget)

    @property
    def run(self) -> Run:
        """The sweep as a saved run (what report and emit-config read)."""
        header = self.header if self.header is not None else load_run(self.run_dir).header
        return Run(self.run_dir, header, self.results)

    @property
    def frame(self) -> pd.DataFrame:
        """One row per trial, units in the column names; unmeasured figures are <NA>."""
        return runs_frame([self.run])

    def plot(self) -> Any:
        """Memory and steps/s against num_envs, the budget and the pick: a
        ``matplotlib.figure.Figure`` (shown inline by a notebook; ``.savefig(path)``)."""
        from vramtune.views.plot import sweep_figure

        run = self.run
        return sweep_figure(run, self.recommendation, budget_bytes=run.header.budget_bytes,
                            headroom_fraction=run.header.headroom_fraction)

    def _chosen(self) -> TrialResult:
        chosen = self.recommendation.chosen
        if chosen is None:
            raise UserError(f"no recommendation: {self.recommendation.notice or 'no trial fit'}")
        return chosen

    @property
    def ppo_kwargs(self) -> dict[str, Any]:
        """The pick as ``brax.training.agents.ppo.train(**kw)`` keywords: the profile's ppo
        settings, episode_length, action_repeat, and the measured num_envs, batch_size and
        num_minibatches (add environment, num_timesteps and network_factory yourself)."""
        chosen = self._chosen()
        profile = self.run.header.profile
        kwargs = dict(profile.get("ppo") or {})
        for key in TOP_LEVEL_PPO_KEYS:
            if key in profile:
                kwargs[key] = profile[key]
        kwargs.update(num_envs=chosen.num_envs, batch_size=chosen.batch_size,
                      num_minibatches=chosen.num_minibatches)
        return kwargs

    @property
    def yaml(self) -> str:
        """The emitted config (brax format) at the sweep's own budget, as emit-config
        writes it."""
        self._chosen()
        _, (emitted,) = _emit([self.run], gpu_mem=None, objective=self.recommendation.objective,
                              headroom=self.run.header.headroom_fraction,
                              format=ConfigFormat.BRAX, num_timesteps=None, hydra_prefix="ppo")
        if emitted.text is None:
            raise UserError(f"no config: {emitted.emission.error}")
        return emitted.text


def sweep_request(profile: ProfileArg = None, **options: Unpack[SweepOptions]) -> SweepRequest:
    """A checked sweep request from what a person types (the profile: a built-in name, a
    YAML file, a ``Profile``, or a dict whose ``env`` may be a callable); the keywords are
    ``SweepOptions`` (gpu_mem="8GB", headroom="10%", ...: docs/sweep.md lists them). A
    request passes through as it is."""
    if isinstance(profile, SweepRequest):
        if options:
            raise TypeError(f"a SweepRequest takes no options beside it: {', '.join(options)}")
        return profile
    return SweepRequest.parse(profile, **options)


def prepare_sweep(profile: ProfileArg = None, *, nvml: Nvml | None = None,
                  **options: Unpack[SweepOptions]) -> PreparedSweep:
    """Everything before the first trial; ``run_prepared`` then runs it. Split in two so a
    caller (the CLI) can keep what was measured when the run is interrupted.

    ``executor="ray"`` runs the trials as Ray tasks, several at once (``ray_address``:
    "auto" or HOST:PORT of a running cluster; None starts one on this machine)."""
    return prepare(sweep_request(profile, **options), nvml=nvml)


def prepare_sweeps(profile: ProfileArg = None,
                   **options: Unpack[SweepOptions]) -> tuple[Path, list[PreparedSweep]]:
    """One Ray sweep per accelerator type of a mixed cluster (``gpu_types="A100,H100"``),
    each in its own run directory under one parent; ``run_prepared_sweeps`` runs them at
    once."""
    return prepare_by_type(sweep_request(profile, **options))


def run_prepared_sweeps(sweeps: Sequence[PreparedSweep],
                        on_event: Callable[[str, Event], None] | None = None,
                        on_trial: Callable[[str, Step, TrialResult], None] | None = None
                        ) -> list[SweepOutcome]:
    """Run several prepared sweeps at once (callbacks get each sweep's label, its type)."""
    try:
        run_sweeps(sweeps, on_event, on_trial)
    finally:
        for p in sweeps:
            p.release()
    return [outcome(p) for p in sweeps]


def outcome(prepared: PreparedSweep, *, interrupted: bool = False) -> SweepOutcome:
    """The recommendation over what the prepared sweep has measured so far."""
    config, state = prepared.config, prepared.state
    rec = decide(config, state.results).rec
    stopped = state.final_step.reason if state.final_step and not interrupted else None
    if interrupted and rec.chosen is None and state.results:
        # Stopped with nothing fitting: "does not fit even at N" holds only where N is the
        # smallest size the search could try; else smaller sizes may never have run.
        smallest = min(r.num_envs for r in state.results)
        if smallest > config.space().start:
            rec = dataclasses.replace(rec, notice=(
                f"the sweep was stopped before a size that fits was measured (the smallest "
                f"measured, num_envs={smallest}, is above the start, {config.space().start})"))
    return SweepOutcome(prepared.run_dir, tuple(state.results), rec, stopped, state.reused,
                        interrupted, prepared.header)


def run_prepared(prepared: PreparedSweep, on_event: EventCallback | None = None,
                 on_trial: Callable[[Step, TrialResult], None] | None = None) -> SweepOutcome:
    """Run the search to its end; every trial is appended to the run's file as it ends."""
    try:
        run_sweep(prepared.config, prepared.executor, prepared.run_dir, prepared.state,
                  on_event, on_trial)
    finally:
        prepared.release()
    return outcome(prepared)


def sweep(profile: ProfileArg = None, *, on_event: EventCallback | None = None,
          **options: Unpack[SweepOptions]) -> SweepOutcome:
    """The boundary under the budget (``search``: predictive, the default, aims with a memory
    model fitted to the trials so far; bisect doubles then bisects), then the measured pick.
    ``parallel`` trials run at once where their caps fit the device together (``"auto"``:
    as many as the card's free memory holds, one per 4 CPU cores at most). The options
    are ``sweep_request``'s. ``profile`` may be an env factory defined here, bare
    (``vramtune.sweep(make_env)``) or as a dict's ``env`` beside other settings (sent to each
    trial's process with cloudpickle). Progress and warnings go to the
    "vramtune" logger and, as typed events, to ``on_event``.

    >>> outcome = vramtune.sweep("quick", gpu_mem="1.5GB")        # doctest: +SKIP
    >>> outcome.recommendation.chosen.num_envs                      # doctest: +SKIP
    """
    request = sweep_request(profile, **options)
    require_trainable_stack()
    warning = caller_gpu_warning()
    if warning:
        log.warning("%s", warning)
    prepared = prepare_sweep(request)
    if prepared.notice:  # e.g. NVML unavailable: what the CLI prints before its table
        log.warning("%s", prepared.notice)
    for line in prepared.warnings:
        log.warning("%s", line)
    result = run_prepared(prepared, logged_events(on_event),
                          lambda _step, trial: log.info("%s", result_line(trial)))
    _log_outcome(result, prepared)
    return result


def _log_outcome(result: SweepOutcome, prepared: PreparedSweep) -> None:
    """The lines the CLI prints under its table, as log records (a warning's own label is
    the record's level)."""
    for line in outcome_lines(result.recommendation, prepared.config.budget_bytes,
                              result.run_dir, stopped_because=result.stopped_because,
                              reused=result.reused, confirm=prepared.config.settings.confirm,
                              interrupted=result.interrupted):
        text = line.text if line.label in (None, "warning") else f"{line.label}: {line.text}"
        log.log(logging.WARNING if line.tone in ("warning", "bad") else logging.INFO, "%s", text)


def trial_request(profile: str | Path | Profile | Mapping[str, Any] | Callable[[], Any] = "quick",
                  num_envs: int | None = None, *, gpu_mem: Size = None,
                  timeout_s: float | None = None, cache: bool | None = None,
                  devices: int | None = None) -> TrialRequest:
    """A validated trial request: every input checked before anything starts. The profile
    is any of ``sweep``'s (a bare env factory, a dict whose ``env`` is a callable, ...)."""
    budget_bytes = as_cap(gpu_mem)
    check_timeout(timeout_s)
    cache = as_flag(cache, "--cache")
    prof = require_factory(as_profile(profile))
    n = check_num_envs(prof.num_envs if num_envs is None else num_envs)
    assert n is not None
    return TrialRequest(prof, n, budget_bytes=budget_bytes, timeout_s=timeout_s,
                        compile_cache_dir=compile_cache_dir(cache), cache_under_cpu_cap=cache is True,
                        device_count=as_devices(devices) or 1)


def run_request(request: TrialRequest, *, on_event: EventCallback | None = None,
                nvml: Nvml | None = None) -> TrialResult:
    """Run a validated request in its own subprocess, with the measured CUDA overhead and
    the runtime's device total."""
    return _run_alone(request, on_event, nvml)


def _run_alone(request: TrialRequest, on_event: EventCallback | None,
               nvml: Nvml | None) -> TrialResult:
    """One trial outside a sweep, under the cap planned from this machine's device facts."""
    nvml = nvml if nvml is not None else Nvml()
    cap, _ = device_cap(request.enforced_bytes, nvml, request.device_count)
    return run_trial(request, on_event, cap=cap, nvml=nvml)


def trial(profile: str | Path | Profile | Mapping[str, Any] | Callable[[], Any] = "quick",
          num_envs: int | None = None, *, gpu_mem: Size = None, timeout_s: float | None = None,
          cache: bool | None = None, devices: int | None = None,
          on_event: EventCallback | None = None) -> TrialResult:
    """One measured trial in its own subprocess (the profile's num_envs by default)."""
    request = trial_request(profile, num_envs, gpu_mem=gpu_mem, timeout_s=timeout_s,
                            cache=cache, devices=devices)
    require_trainable_stack()
    return run_request(request, on_event=on_event)


def recommend(results: list[TrialResult] | tuple[TrialResult, ...], *, gpu_mem: Size = None,
              headroom: Percent = "10%",
              objective: str | Objective = Objective.THROUGHPUT,
              speed_margin: Percent = None) -> Recommendation:
    """The measured pick among ``results`` for a budget (never a size that was not run);
    ``speed_margin`` as the sweep's (default 2%). A record may also be a dict as a results
    file holds it (checked as the file's reader checks it)."""
    if isinstance(results, str | bytes | Mapping) or not isinstance(results, Iterable):
        raise UserError(f"recommend takes a list of trial records, got {quoted(results)}")
    results = [r if isinstance(r, TrialResult) else trial_from_dict(r, f"results[{i}]")
               for i, r in enumerate(results)]
    fraction = as_fraction(headroom)
    margin = as_margin(speed_margin)
    return choose(results, as_cap(gpu_mem), 0.0 if fraction is None else fraction,
                  as_objective(objective) or Objective.THROUGHPUT,
                  margin=DEFAULT_SPEED_MARGIN_FRACTION if margin is None else margin)


def check(config_path: str | Path, *, devices: int = 1) -> Diagnosis:
    """A config file against Brax PPO's batch rules: every rule it breaks and the nearest
    valid settings (``vramtune check``)."""
    path = required_path(config_path, "the config file")
    device_count = as_devices(devices) or 1  # every argument checked before the file is read
    return diagnose(load_config(path), device_count)


def profiles() -> list[Profile]:
    """The profiles shipped with vramtune, by name (``vramtune profiles``)."""
    return [load_profile(name) for name in sorted(builtin_profiles())]


def doctor(*, probe: bool = True) -> DoctorReport:
    """What this machine gives a sweep: jax, the CUDA plugin, devices, NVML, and (``probe``)
    whether a capped process is really held to its cap (``vramtune doctor``)."""
    return diagnose_machine(run_cap_probe=bool(as_flag(probe, "--probe")))


def init_profile(env: str, output: str | Path, *, force: bool = False, name: str | None = None,
                 backend: str | None = None, on_reading: Callable[[], None] | None = None
                 ) -> tuple[Profile, str]:
    """Write a starter profile for ``env`` (brax:<name>, playground:<Name> or
    package.module:factory) filled from the source's canonical config, and return it as
    loaded back with where its settings came from (``vramtune init-profile``). Every
    argument is checked before anything is read or written; ``on_reading`` hears when the
    slow part (importing the source) begins."""
    check_text(env, "env")
    check_text(name, "--name", max_len=200)
    check_text(backend, "--backend", max_len=100)
    force = bool(as_flag(force, "--force"))
    parse_source(env)  # the env's form is named before the output path's
    return write_starter_profile(env, required_path(output, "-o"), force=force, name=name,
                                 backend=backend, on_reading=on_reading)


def verify(config_path: str | Path, *, gpu_mem: Size, profile: str | Path | Profile | None = None,
           headroom: Percent = "10%", steps: int = 100, timeout_s: float | None = None,
           cache: bool | None = None, devices: int | None = None,
           on_event: EventCallback | None = None, nvml: Nvml | None = None,
           on_origin: Callable[[str], None] | None = None) -> TrialResult:
    """Train a config file's settings ``steps`` training steps, evaluation as configured,
    under the budget x (1 - headroom) cap the sweep uses; the record says if it fit.
    ``on_origin`` hears which settings are the file's and which the profile's, once every
    argument has been checked and before the run."""
    budget_bytes = as_cap(gpu_mem)
    if budget_bytes is None:
        raise UserError("verify needs --gpu-mem: the budget to verify the config against")
    fraction = as_fraction(headroom) or 0.0
    check_int(steps, "--steps", 1, MAX_TRAINING_STEPS)
    check_timeout(timeout_s)
    cache = as_flag(cache, "--cache")
    device_count = as_devices(devices) or 1
    path = required_path(config_path, "the config file").expanduser()
    prof, origin = verification_profile(path, profile)
    require_trainable_stack()
    limit = headroom_limit_bytes(budget_bytes, fraction)
    request = TrialRequest(prof, prof.num_envs, budget_bytes=budget_bytes, cap_bytes=limit,
                           timeout_s=(timeout_s if timeout_s is not None
                                      else prof.timeout_s * max(10, steps / 5)),
                           compile_cache_dir=compile_cache_dir(cache), cache_under_cpu_cap=cache is True,
                           purpose=Purpose.CONFIRM, training_steps=steps,
                           device_count=device_count)
    if request.profile.shape_for(request.num_envs, request.device_count) is None:
        raise UserError(f"{config_path}: num_envs={prof.num_envs}, batch_size={prof.batch_size}, "
                        f"num_minibatches={prof.num_minibatches} break Brax's batch rule on "
                        f"{request.device_count} device(s); `vramtune check {config_path} "
                        f"--device-count {request.device_count}` shows the nearest valid settings")
    if on_origin is not None:
        on_origin(origin)
    return _run_alone(request, on_event, nvml)


def load_runs(paths: RunsArg) -> pd.DataFrame:
    """Saved sweeps as one pandas DataFrame, one row per trial, units in column names;
    unmeasured figures are <NA>, never 0."""
    runs = _runs(paths)
    if not runs:
        raise UserError("load_runs needs at least one run directory")
    return runs_frame(runs)


@dataclass(frozen=True)
class EmittedConfig:
    """One budget's tuned config: the YAML text, or why there is none."""

    budget_bytes: int | None
    emission: Emission
    text: str | None  # None when nothing measured fits (emission.error says why)


def emit_config(run_dirs: RunsArg | None = None, *,
                gpu_mem: str | int | Sequence[str | int] | None = None,
                objective: str | Objective | None = None, headroom: Percent = None,
                format: str | ConfigFormat = ConfigFormat.BRAX, num_timesteps: int | None = None,
                hydra_prefix: str = "ppo", num_evals: int | None = None
                ) -> tuple[Measurements, list[EmittedConfig]]:
    """Tuned configs from measured trials only, one per budget (None: the sweep's own cap),
    chosen with ``objective`` (None: the sweeps' own, else throughput). ``run_dirs`` None:
    the run under ./vramtune-runs/ written last (``newest_run``). With ``num_timesteps`` (and
    ``num_evals``, written into the config when given), the run's peak at that length is
    predicted (``emission.growth``) and a run that would cross the line is a notice.
    Pure: nothing is written; the CLI decides where the texts go."""
    if run_dirs is None:
        run_dirs = newest_run()
        if is_parent_of_runs(run_dirs):  # one sweep per card: one config per card
            raise UserError(f"the newest run, {run_dirs}, is a sweep per accelerator type: "
                            f"emit_cards({str(run_dirs)!r}) gives one config per card")
    runs = _runs(run_dirs)
    if not runs:
        raise UserError("emit_config needs at least one run directory")
    return _emit(runs, gpu_mem=gpu_mem, objective=objective, headroom=headroom, format=format,
                 num_timesteps=num_timesteps, hydra_prefix=hydra_prefix, num_evals=num_evals)


def expand_runs(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """Run directories, with a parent directory (a mixed-cluster sweep's) standing for the
    runs under it."""
    return [run for item in as_run_paths(paths) for run in find_runs(item)]


def _runs(given: object, *, expand: bool = False) -> list[Run]:
    """Each run read once: a ``Run`` passes through, a path is read (with ``expand``, a
    parent directory stands for the runs under it)."""
    return [run for item in as_run_paths(given, Run) for run in (
        [item] if isinstance(item, Run) else map(load_run, find_runs(item) if expand else [item]))]


def runs_by_card(runs: RunsArg) -> dict[str, list[Run]]:
    """The runs (or the runs under a parent directory), grouped by the card they measured
    (Ray's accelerator type, else the GPU or CPU model), in the order first seen."""
    cards: dict[str, list[Run]] = {}
    for run in _runs(runs, expand=True):
        cards.setdefault(run.header.card, []).append(run)
    return cards


def emit_cards(runs: RunsArg, *, gpu_mem: str | int | Sequence[str | int] | None = None,
               objective: str | Objective | None = None, headroom: Percent = None,
               format: str | ConfigFormat = ConfigFormat.BRAX, num_timesteps: int | None = None,
               hydra_prefix: str = "ppo", num_evals: int | None = None
               ) -> list[tuple[str, Measurements, list[EmittedConfig]]]:
    """Tuned configs per card from a mixed-cluster sweep's parent directory (or several run
    directories): each card's runs merged on their own, never across cards."""
    return [(card, *_emit(group, gpu_mem=gpu_mem, objective=objective, headroom=headroom,
                          format=format, num_timesteps=num_timesteps,
                          hydra_prefix=hydra_prefix, num_evals=num_evals))
            for card, group in runs_by_card(runs).items()]


def _emit(runs: Sequence[Run], *, gpu_mem: str | int | Sequence[str | int] | None,
          objective: str | Objective | None, headroom: Percent, format: str | ConfigFormat,
          num_timesteps: int | None, hydra_prefix: str, num_evals: int | None = None
          ) -> tuple[Measurements, list[EmittedConfig]]:
    budgets = [None] if gpu_mem is None else as_budgets(gpu_mem)
    run_length = check_run_length(num_timesteps, num_evals)
    check_hydra_prefix(hydra_prefix, HYDRA_TOP_KEYS)
    fmt_ = required_choice(format, ConfigFormat, "format")
    source = merge_runs(runs)
    # None: the sweep's own objective, so the file holds the size the sweep confirmed
    goal = as_objective(objective) or source.objective or Objective.THROUGHPUT
    var = mem_fraction_var()
    out: list[EmittedConfig] = []
    for budget in budgets:
        emission = before_the_long_run(
            source, choose_for_budget(source, budget, goal, as_fraction(headroom)), run_length)
        text = None if emission.error else render(source, emission, fmt_, mem_fraction_var=var,
                                                  num_timesteps=num_timesteps,
                                                  hydra_prefix=hydra_prefix, num_evals=num_evals)
        out.append(EmittedConfig(emission.budget_bytes, emission, text))
    return source, out


# --- Saved runs as `vramtune report` and `compare` read them -------------------------------

@dataclass(frozen=True)
class RunChoice:
    """A saved sweep re-chosen: the pick, with the headroom and objective it was made with."""

    run: Run
    recommendation: Recommendation
    headroom_fraction: float
    objective: Objective


def open_run(path: str | Path) -> Run:
    """A saved sweep (its directory or its results.jsonl); ``run.warnings`` says what was
    skipped while reading it."""
    return load_run(path)


def choose_in_run(run: Run, *, headroom: Percent = None,
                  objective: str | Objective | None = None) -> RunChoice:
    """Re-choose within a saved sweep at its own budget: headroom and objective default to
    the sweep's own (throughput when its header does not say)."""
    fraction = as_fraction(headroom)
    fraction = run.header.headroom_fraction if fraction is None else fraction
    goal = as_objective(objective) or run_objective(run) or Objective.THROUGHPUT
    return RunChoice(run, choose(run.results, run.header.budget_bytes, fraction, goal,
                                 margin=run_speed_margin(run)), fraction, goal)



def explain(run: str | Path | Run, *, num_envs: int | None = None,
            headroom: Percent = None, num_timesteps: int | None = None,
            num_evals: int | None = None) -> Explanation:
    """Where a saved sweep's memory goes: ``num_envs``' ledger (measured, else predicted; by
    default the sweep's pick), each role per env and fixed, and the largest num_envs predicted
    for common cards at the sweep's headroom (or ``headroom``). With ``num_timesteps`` (and
    ``num_evals``, brax's default 1 when None), the run's peak at that length, predicted,
    against the sweep's line (``Explanation.growth``, ``.warnings``)."""
    run_length = check_run_length(num_timesteps, num_evals)
    num_envs = check_num_envs(num_envs)
    run = run if isinstance(run, Run) else open_run(run)
    choice = choose_in_run(run, headroom=headroom)
    pick = choice.recommendation.chosen
    return explain_run(run, num_envs, choice.headroom_fraction,
                       default_num_envs=pick.num_envs if pick else None,
                       run_length=run_length, line_bytes=choice.recommendation.limit_bytes)


def bench(baseline: str | Path, profile: str | Path | Profile = "quick", *,
          sizes: str | Sequence[int] = "64,256", repeat: int = 3, save: bool = False,
          force: bool = False, max_mem_increase: Percent = "5%", max_speed_drop: Percent = "10%",
          max_xla_increase: Percent = "1%", max_instructions_increase: Percent = "6%",
          gpu_mem: Size = None, timeout_s: float | None = None, xla: bool = True,
          normalise: bool = True,
          on_trial_start: Callable[[int, int, int, int], None] | None = None,
          on_trial: Callable[[int, int, int, TrialResult], None] | None = None,
          on_step: Callable[[str], None] | None = None) -> BenchOutcome:
    """The CI regression gate (``vramtune bench``): every input checked and the baseline read
    before any trial, then XLA's figures per size and ``repeat`` interleaved trials per size
    (on CPU with each trial's CPU share read over its measuring window), compared with the
    baseline. With ``save`` the merged baseline is written when every trial passed
    (``outcome.saved``); a write that fails (disk full) is ``outcome.save_error``, the
    measurement kept. Callbacks: ``on_trial_start(i, total, repeat_no, num_envs)``,
    ``on_trial(i, total, repeat_no, result)``, ``on_step(message)``."""
    plan = prepare_bench(baseline, profile, sizes=sizes, repeat=repeat, save=save, force=force,
                         max_mem_increase=max_mem_increase, max_speed_drop=max_speed_drop,
                         max_xla_increase=max_xla_increase,
                         max_instructions_increase=max_instructions_increase, gpu_mem=gpu_mem,
                         timeout_s=timeout_s, xla=xla, normalise=normalise)
    return save_outcome(run_bench(plan, on_trial_start=on_trial_start, on_trial=on_trial,
                                  on_step=on_step))
