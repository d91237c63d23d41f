"""The Python API: what the CLI calls, and what a notebook or a script imports.

Every argument takes what a person would type (``gpu_mem="8GB"``, ``headroom="10%"``) or the
plain number (bytes, a fraction); bad values raise ``vramtune.errors.UserError`` with one
line that says what was expected. Nothing here prints: callers get records back and choose
how to show them (the CLI renders them with rich, a notebook with pandas); a sweep's progress
and warnings go to the "vramtune" logger as well as to ``on_event``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import pandas as pd

from vramtune import machine, paths, yamlio
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
    check_int,
    check_num_envs,
    check_text,
    check_timeout,
    required_path,
)
from vramtune.machine import compile_cache_dir, mem_fraction_var
from vramtune.measure.doctor import DoctorReport
from vramtune.measure.doctor import diagnose as diagnose_machine
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import device_cap
from vramtune.measure.process import EventCallback
from vramtune.measure.trial import TrialRequest, run_trial
from vramtune.measure.wire import Event
from vramtune.notebook import caller_gpu_warning, log, logged_events, result_line
from vramtune.records import Objective, Purpose, TrialResult
from vramtune.results.frame import runs_frame
from vramtune.results.store import Run, RunHeader, find_runs, load_run, trial_from_dict
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.alone import remeasure_left
from vramtune.tune.budgets import (
    Emission,
    Measurements,
    choose_for_budget,
    merge_runs,
    run_objective,
    run_speed_margin,
)
from vramtune.tune.options import SweepOptions, as_margin
from vramtune.tune.options import sweep_flags as sweep_flags  # the CLI builds its flags from it
from vramtune.tune.planner import Step
from vramtune.tune.prepare import PreparedSweep, prepare, prepare_by_type
from vramtune.tune.recommend import Recommendation, choose
from vramtune.tune.request import DEFAULT_SPEED_MARGIN_FRACTION, SweepRequest, as_profile
from vramtune.tune.sweep import run_sweep, run_sweeps
from vramtune.units import headroom_limit_bytes, parse_percent
from vramtune.views.configs import HYDRA_TOP_KEYS, ConfigFormat, render
from vramtune.views.runs import chosen_summary
from vramtune.workload.configfile import (
    BatchConfig,
    Diagnosis,
    diagnose,
    load_config,
    normalise_key,
    settings_block,
)
from vramtune.workload.emitted import emitted_profile
from vramtune.workload.pickled import require_factory
from vramtune.workload.profile import (
    NAME_PATTERN,
    NAME_RULE,
    TYPED_PPO_KEYS,
    Profile,
    load_profile,
    profile_from_dict,
)
from vramtune.workload.sources import BRAX_BACKENDS, MANAGED_PPO_KEYS, parse_source
from vramtune.workload.starter import render_profile_yaml, starter_profile

# A profile as a person passes it: a built-in name, a YAML file, a Profile, a dict (whose env
# may be a callable), or a bare env factory (``vramtune.sweep(make_env)``: its default settings)
ProfileArg = (str | Path | Profile | Mapping[str, Any] | Callable[[], Any] | SweepRequest
              | None)


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
    rec = choose(state.results, config.budget_bytes, config.headroom_fraction,
                 prepared.objective, margin=config.speed_margin,
                 remeasure_left=remeasure_left(config, state.results))
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
    """The lines the CLI prints under its table, as log records."""
    rec, config = result.recommendation, prepared.config
    if result.stopped_because:
        log.info("search: %s", result.stopped_because)
    if rec.chosen is None:
        log.warning("no recommendation: %s", rec.notice or "no trial fit")
    else:
        log.info("recommended: %s", chosen_summary(rec, config.budget_bytes))
        for line in (rec.speed_line, rec.confirm_speed_line):
            if line:
                log.info("throughput: %s", line)
        if rec.chosen.memory_steady is False:
            log.warning("its trial ended with memory still growing (measure.max_intervals "
                        "reached)")
        if rec.confirmed_line:
            log.info("%s", rec.confirmed_line)
        elif config.settings.confirm:
            log.warning("not confirmed: no long run of this size passed")
    log.info("results: %s", result.run_dir)


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


MAX_NUM_TIMESTEPS = 10**15
_HYDRA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

# ppo.train kwargs a profile keeps at its top level; emitted files write them under ppo:
TOP_LEVEL_PPO_KEYS = ("episode_length", "action_repeat")


def verification_profile(config_path: str | Path, profile: str | Path | Profile | None
                         ) -> tuple[Profile, str]:
    """The workload to verify a config file with, and where each part came from.

    The batch settings (num_envs, batch_size, num_minibatches, unroll_length) come from the
    file, found wherever ``check`` finds them. The workload (env, network, other PPO kwargs)
    comes from ``profile``, or for a file vramtune emitted, from the profile named in its
    first line (a built-in one with the same hash). Over it go the file's own training
    settings, because the file is the training config: an emitted file's ppo: and network:
    blocks; in a user's own file, the ppo.train kwargs vramtune knows (run_evals,
    learning_rate, ...) found beside its num_envs.
    """
    path = required_path(config_path, "the config file").expanduser()
    batch = load_config(path)  # validates the file; a UserError names what is wrong
    origin = "--profile"
    overlay: dict[str, Any] = {}
    network: dict[str, Any] = {}
    if profile is None:
        profile = emitted_profile(path)
        origin = f"profile {profile.name} named in the file"
        overlay, network = _emitted_blocks(path, batch)
    else:  # a user's file: its keys may be spelt NUM_ENVS or numEnvs, as `check` reads them
        overlay = {normalise_key(k): v for k, v in settings_block(path, batch).items()}
    base = profile if isinstance(profile, Profile) else load_profile(profile)
    # Only what ppo.train takes: the kwargs vramtune types, the profile's own, and the two a
    # profile keeps at its top level. Anything else beside num_envs (env_name, a damaged
    # `ppo: 5`) is not a training kwarg and would reach ppo.train as one.
    known = TYPED_PPO_KEYS | set(base.ppo) | set(TOP_LEVEL_PPO_KEYS)
    overlay = {k: v for k, v in overlay.items() if k in known}
    data = base.to_dict()
    ppo = {**data["ppo"], **{k: v for k, v in overlay.items()
                             if k not in MANAGED_PPO_KEYS and k not in TOP_LEVEL_PPO_KEYS}}
    ppo.update(batch_size=batch.batch_size.value, num_minibatches=batch.num_minibatches.value,
               unroll_length=batch.unroll_length.value)
    data.update(num_envs=batch.num_envs.value, ppo=ppo)
    for key in TOP_LEVEL_PPO_KEYS:  # emitted files carry these inside ppo:
        if key in overlay:
            data[key] = overlay[key]
    if network:
        data["network"] = {**data.get("network", {}), **network}
    data["name"] = f"{base.name}-verify"
    taken = sorted(k for k in overlay if k not in ("batch_size", "num_minibatches",
                                                   "unroll_length"))
    if taken:
        origin += f"; from the file: {', '.join(taken)}"
    return profile_from_dict(data, source=str(path)), origin


def _emitted_blocks(path: Path, batch: BatchConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """An emitted file's PPO settings (the block holding its num_envs: ppo:, playground's
    ppo_params:, or hydra's prefix) and its network: mapping; a network: that is not a
    mapping is a damaged file, said in one line."""
    ppo = {k: v for k, v in settings_block(path, batch).items()
           if k not in ("network_factory", "num_envs")}
    data = yamlio.loads(yamlio.read_text(path, what="config"), str(path))
    network = data.get("network") if isinstance(data, dict) else None
    if network is not None and not isinstance(network, dict):
        raise UserError(f"{path}: network: must be a mapping of settings, got "
                        f"{type(network).__name__} {str(network)[:40]!r}")
    return ppo, dict(network or {})


def check(config_path: str | Path, *, devices: int = 1) -> Diagnosis:
    """A config file against Brax PPO's batch rules: every rule it breaks and the nearest
    valid settings (``vramtune check``)."""
    path = required_path(config_path, "the config file")
    device_count = as_devices(devices) or 1  # every argument checked before the file is read
    return diagnose(load_config(path), device_count)


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
    source = parse_source(env)
    out = required_path(output, "-o")
    if backend is not None and source.kind != "brax":
        raise UserError("--backend applies to brax: sources only")
    if backend is not None and backend not in BRAX_BACKENDS:
        raise UserError(f"--backend {quoted(backend)} is not one of {', '.join(BRAX_BACKENDS)}")
    if name is not None and not NAME_PATTERN.fullmatch(name):
        raise UserError(f"--name {quoted(name)}: a profile name is {NAME_RULE}")
    if paths.is_dir(out):
        raise UserError(f"{out} is a directory")
    if paths.exists(out) and not force:
        raise UserError(f"{out} exists; pass --force to overwrite it")
    if not paths.is_dir(out.parent):
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    paths.check_writable_file(out, "-o")
    if on_reading is not None:
        on_reading()
    data, origin = starter_profile(env, backend, import_path=str(out.resolve().parent))
    if name:
        data["name"] = name
    profile_from_dict(data, source=str(out))  # never write a file that would not load
    packages = ("playground", "brax") if source.kind == "playground" else ("brax",)
    used = {k: v for k, v in machine.versions().items() if k in packages}
    paths.write_text(out, render_profile_yaml(data, origin, used), "profile")
    return load_profile(out), origin


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
    prof, origin = verification_profile(config_path, profile)
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


def load_runs(paths: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """Saved sweeps as one pandas DataFrame, one row per trial, units in column names;
    unmeasured figures are <NA>, never 0."""
    items = _run_paths(paths)
    if not items:
        raise UserError("load_runs needs at least one run directory")
    return runs_frame([load_run(p) for p in items])


@dataclass(frozen=True)
class EmittedConfig:
    """One budget's tuned config: the YAML text, or why there is none."""

    budget_bytes: int | None
    emission: Emission
    text: str | None  # None when nothing measured fits (emission.error says why)


def emit_config(run_dirs: str | Path | Sequence[str | Path], *,
                gpu_mem: str | int | Sequence[str | int] | None = None,
                objective: str | Objective | None = None, headroom: Percent = None,
                format: str | ConfigFormat = ConfigFormat.BRAX, num_timesteps: int | None = None,
                hydra_prefix: str = "ppo") -> tuple[Measurements, list[EmittedConfig]]:
    """Tuned configs from measured trials only, one per budget (None: the sweep's own cap),
    chosen with ``objective`` (None: the sweeps' own, else throughput).
    Pure: nothing is written; the CLI decides where the texts go."""
    items = _run_paths(run_dirs)
    if not items:
        raise UserError("emit_config needs at least one run directory")
    return _emit([load_run(d) for d in items], gpu_mem=gpu_mem, objective=objective,
                 headroom=headroom, format=format, num_timesteps=num_timesteps,
                 hydra_prefix=hydra_prefix)


def expand_runs(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """Run directories, with a parent directory (a mixed-cluster sweep's) standing for the
    runs under it."""
    return [run for item in _run_paths(paths) for run in find_runs(item)]


def _run_paths(paths: object) -> list[str | os.PathLike]:
    """A run directory or any iterable of them (a list, a glob's generator, a Series), as
    given to the API; anything else (a number, None, a mapping, bytes) is one line, not a
    TypeError from deep inside."""
    if isinstance(paths, str | os.PathLike):
        return [paths]
    items = (list(paths) if isinstance(paths, Iterable)
             and not isinstance(paths, bytes | Mapping) else None)
    if items is None or any(not isinstance(p, str | os.PathLike) for p in items):
        bad = paths if items is None else next(p for p in items
                                               if not isinstance(p, str | os.PathLike))
        raise UserError(f"expected a run directory (str or Path) or a list of them, got "
                        f"{type(bad).__name__} {str(bad)[:40]!r}")
    return items


def runs_by_card(paths: str | Path | Sequence[str | Path]) -> dict[str, list[Run]]:
    """The runs under ``paths``, grouped by the card they measured (Ray's accelerator type,
    else the GPU or CPU model), in the order first seen."""
    cards: dict[str, list[Run]] = {}
    for directory in expand_runs(paths):
        run = load_run(directory)
        cards.setdefault(run.header.card, []).append(run)
    return cards


def emit_cards(paths: str | Path | Sequence[str | Path], *,
               gpu_mem: str | int | Sequence[str | int] | None = None,
               objective: str | Objective | None = None, headroom: Percent = None,
               format: str | ConfigFormat = ConfigFormat.BRAX, num_timesteps: int | None = None,
               hydra_prefix: str = "ppo"
               ) -> list[tuple[str, Measurements, list[EmittedConfig]]]:
    """Tuned configs per card from a mixed-cluster sweep's parent directory (or several run
    directories): each card's runs merged on their own, never across cards."""
    return [(card, *_emit(runs, gpu_mem=gpu_mem, objective=objective, headroom=headroom,
                          format=format, num_timesteps=num_timesteps,
                          hydra_prefix=hydra_prefix))
            for card, runs in runs_by_card(paths).items()]


def _emit(runs: Sequence[Run], *, gpu_mem: str | int | Sequence[str | int] | None,
          objective: str | Objective | None, headroom: Percent, format: str | ConfigFormat,
          num_timesteps: int | None, hydra_prefix: str
          ) -> tuple[Measurements, list[EmittedConfig]]:
    budgets = [None] if gpu_mem is None else as_budgets(gpu_mem)
    check_int(num_timesteps, "--num-timesteps", 1, MAX_NUM_TIMESTEPS)
    check_text(hydra_prefix, "--hydra-prefix", max_len=200)
    if hydra_prefix and not _HYDRA_KEY.fullmatch(hydra_prefix):
        raise UserError(f"--hydra-prefix {quoted(hydra_prefix)} is not a dotted config key such as "
                        f"ppo or agent.ppo (letters, digits and _, parts joined by dots)")
    top = hydra_prefix.split(".")[0] if hydra_prefix else ""
    if top in HYDRA_TOP_KEYS:
        # the file's own top-level keys: a second one of the same name would replace the
        # first on load, and the tuned settings would be lost
        raise UserError(f"--hydra-prefix {quoted(hydra_prefix)} starts with {top!r}, a top-level "
                        f"key the Hydra file already has ({', '.join(HYDRA_TOP_KEYS)}): "
                        f"choose another, such as ppo or agent.ppo")
    try:
        fmt_ = ConfigFormat(format)
    except ValueError:
        raise UserError(f"unknown format {quoted(format)}: expected one of "
                        f"{', '.join(f.value for f in ConfigFormat)}") from None
    source = merge_runs(runs)
    # None: the sweep's own objective, so the file holds the size the sweep confirmed
    goal = as_objective(objective) or source.objective or Objective.THROUGHPUT
    var = mem_fraction_var()
    out: list[EmittedConfig] = []
    for budget in budgets:
        emission = choose_for_budget(source, budget, goal, as_fraction(headroom))
        text = None if emission.error else render(source, emission, fmt_, mem_fraction_var=var,
                                                  num_timesteps=num_timesteps,
                                                  hydra_prefix=hydra_prefix)
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


# --- bench: the CI regression gate ----------------------------------------------------------
# Kept in one block at the end of the module (its imports inside it): `vramtune bench` calls
# only this, and a notebook can run the same gate.

BENCH_MAX_SIZES = 64
BENCH_MAX_REPEAT = 1000


def parse_num_envs_list(text: str | Sequence[int]) -> list[int]:
    """'64,256' (or [64, 256]) -> [64, 256], duplicates dropped; one-line UserError for
    anything else."""
    if not isinstance(text, str | list | tuple):
        raise UserError(f"invalid --sizes {quoted(text)}: expected e.g. '64,256' or [64, 256]")
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
    sizes: list[int] = []
    for part in parts:
        if part == "":
            continue
        if isinstance(part, bool):
            raise UserError(f"invalid --sizes {quoted(text)}: {quoted(part)} is not a whole number")
        if isinstance(part, str) and part.isascii() and part.isdigit() \
                and len(part.lstrip("0")) > len(str(MAX_NUM_ENVS)):
            raise UserError(f"invalid --sizes {quoted(text)}: num_envs must be positive and at "
                            f"most {MAX_NUM_ENVS}, got {quoted(part)}")  # before int(): digit limit
        try:
            value = int(part)
        except (TypeError, ValueError):
            raise UserError(f"invalid --sizes {quoted(text)}: {quoted(part)} is not a whole number; "
                            f"expected e.g. 64,256") from None
        if not 1 <= value <= MAX_NUM_ENVS:
            raise UserError(f"invalid --sizes {quoted(text)}: num_envs must be positive and at most "
                            f"{MAX_NUM_ENVS}, got {quoted(value)}")
        if value not in sizes:
            sizes.append(value)
    if not sizes:
        raise UserError(f"invalid --sizes {quoted(text)}: expected num_envs such as 64,256")
    if len(sizes) > BENCH_MAX_SIZES:
        raise UserError(f"invalid --sizes: {len(sizes)} sizes; at most {BENCH_MAX_SIZES}")
    return sizes


@dataclass(frozen=True)
class BenchPlan:
    """A validated bench: every input checked, the baseline read, nothing run yet."""

    baseline_path: Path
    profile: Profile
    sizes: tuple[int, ...]
    repeat: int
    save: bool
    force: bool
    thresholds: Any  # tune.gate.Thresholds
    budget_bytes: int | None
    timeout_s: float | None
    old: Any  # results.baseline.Snapshot | None
    xla: bool  # compile each size for XLA's figures (the deterministic tier)
    normalise: bool  # read each CPU trial's CPU share (steps per CPU second)


@dataclass(frozen=True)
class BenchOutcome:
    plan: BenchPlan
    results: tuple[TrialResult, ...]
    candidate: Any  # results.baseline.Snapshot
    report: Any  # tune.gate.BenchReport
    saved: Any = None  # results.baseline.Snapshot to write with --save (None: trials failed)
    save_note: str | None = None
    notes: tuple[str, ...] = ()  # what the run could not do (no XLA figures, no reference)


def bench_local_key(nvml: Nvml) -> Any:
    """This machine's key before any trial ran (device count unknown until JAX is up)."""
    from vramtune import machine
    from vramtune.measure.cap import plan_cap
    from vramtune.results.baseline import MachineKey

    if plan_cap(None, nvml, None).backend == "gpu" and nvml.info is not None:
        return MachineKey("gpu", nvml.info.name, None)
    return MachineKey("cpu", machine.cpu_model(), None)


def _refuse_other_machine(path: Path, base: Any, here: Any, saving: bool) -> None:
    action = "overwrite it" if saving else "compare anyway"
    raise UserError(f"baseline {path} was measured on {base.machine.describe()}, this machine is "
                    f"{here.describe()}: figures from another machine are not comparable "
                    f"(use a baseline from this machine, or --force to {action})")


def prepare_bench(baseline: str | Path, profile: str | Path | Profile = "quick", *,
                  sizes: str | Sequence[int] = "64,256", repeat: int = 3, save: bool = False,
                  force: bool = False, max_mem_increase: Percent = "5%",
                  max_speed_drop: Percent = "10%", max_xla_increase: Percent = "1%",
                  max_instructions_increase: Percent = "6%",
                  gpu_mem: Size = None, timeout_s: float | None = None, xla: bool = True,
                  normalise: bool = True, nvml: Nvml | None = None) -> BenchPlan:
    """Check every input and read the baseline: a bad flag, a missing or damaged baseline, or
    one from another machine or profile is one UserError before any trial."""
    from vramtune import paths
    from vramtune.measure.trial import invalid_result
    from vramtune.results.baseline import load_baseline
    from vramtune.tune.gate import Thresholds

    thresholds = Thresholds(parse_percent(max_mem_increase, what="--max-mem-increase"),
                            parse_percent(max_speed_drop, what="--max-speed-drop"),
                            parse_percent(max_xla_increase, what="--max-xla-increase"),
                            parse_percent(max_instructions_increase,
                                          what="--max-instructions-increase"))
    num_envs = parse_num_envs_list(sizes)
    if isinstance(repeat, bool) or not isinstance(repeat, int) \
            or not 1 <= repeat <= BENCH_MAX_REPEAT:
        raise UserError(f"--repeat must be from 1 to {BENCH_MAX_REPEAT}, got {quoted(repeat)}")
    check_timeout(timeout_s)
    budget = as_cap(gpu_mem)
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    for n in num_envs:
        invalid = invalid_result(TrialRequest(prof, n))
        if invalid is not None:
            raise UserError(f"--sizes: {invalid.error_message}")
    path = Path(baseline)
    old = None
    if paths.exists(path) or not save:
        old = load_baseline(path)
    if save:  # before the trials: minutes of measurement must not end on a bad path
        paths.check_writable_file(path, "--baseline")
    here = bench_local_key(nvml if nvml is not None else Nvml())
    if old is not None and not old.machine.matches(here) and not force:
        _refuse_other_machine(path, old, here, save)
    if old is not None and old.profile_hash != prof.hash and not force:
        action = "overwrite it" if save else "compare anyway"
        raise UserError(f"baseline {path} measured profile {old.profile_name} "
                        f"({old.profile_hash}), not {prof.name} ({prof.hash}): a different "
                        f"workload is not a regression test (use its profile, or --force to "
                        f"{action})")
    return BenchPlan(path, prof, tuple(num_envs), repeat, save, force, thresholds, budget,
                     timeout_s, old, xla, normalise)


def _xla_figures(plan: BenchPlan, nvml: Nvml) -> tuple[dict[int, Any], dict[int, str]]:
    """XLA's figures of every size's training epoch, compiled (never run) in a process of its
    own, uncapped: they are the compiler's count, whatever budget the trials run under."""
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.footprint import MAX_SIZES, FootprintProbe
    from vramtune.results.baseline import XlaFigures
    from vramtune.workload.profile import profile_folder

    figures: dict[int, Any] = {}
    errors: dict[int, str] = {}
    cap = plan_cap(None, nvml, None)
    triples = []
    for n in plan.sizes:
        shape = plan.profile.shape_for(n, 1)
        assert shape is not None  # prepare_bench checked every size
        triples.append((n, shape.batch_size, shape.num_minibatches))
    for start in range(0, len(triples), MAX_SIZES):
        chunk = triples[start:start + MAX_SIZES]
        probe = FootprintProbe(cap, plan.profile.to_dict(), chunk, every_size=True,
                               import_path=profile_folder(plan.profile),
                               timeout_s=120.0 + 120.0 * len(chunk),
                               profile_hash=plan.profile.hash).start()
        try:
            found = probe.result(wait_s=130.0 + 120.0 * len(chunk))
        finally:
            probe.close()
        got = {s.num_envs: s for s in (found.sizes if found else ())}
        for n, _, _ in chunk:
            s = got.get(n)
            if s is None:
                errors[n] = (found.error if found and found.error else "the probe gave none")
                continue
            figures[n] = XlaFigures(s.argument_bytes, s.output_bytes, s.alias_bytes,
                                    s.temp_bytes, s.generated_code_bytes, s.flops,
                                    s.bytes_accessed)
    return figures, errors


def bench(baseline: str | Path, profile: str | Path | Profile = "quick", *,
          sizes: str | Sequence[int] = "64,256", repeat: int = 3, save: bool = False,
          force: bool = False, max_mem_increase: Percent = "5%", max_speed_drop: Percent = "10%",
          max_xla_increase: Percent = "1%", max_instructions_increase: Percent = "6%",
          gpu_mem: Size = None, timeout_s: float | None = None, xla: bool = True,
          normalise: bool = True,
          on_trial_start: Callable[[int, int, int, int], None] | None = None,
          on_trial: Callable[[int, int, int, TrialResult], None] | None = None,
          on_step: Callable[[str], None] | None = None) -> BenchOutcome:
    """Run the gate: XLA's figures per size, then ``repeat`` interleaved trials per size (on
    CPU with each trial's CPU share read over its measuring window), compared with the
    baseline (or, with ``save``, written as it). Callbacks: ``on_trial_start(i, total, repeat_no, num_envs)``,
    ``on_trial(i, total, repeat_no, result)``, ``on_step(message)``."""
    plan = prepare_bench(baseline, profile, sizes=sizes, repeat=repeat, save=save, force=force,
                         max_mem_increase=max_mem_increase, max_speed_drop=max_speed_drop,
                         max_xla_increase=max_xla_increase,
                         max_instructions_increase=max_instructions_increase, gpu_mem=gpu_mem,
                         timeout_s=timeout_s, xla=xla, normalise=normalise)
    return run_bench(plan, on_trial_start=on_trial_start, on_trial=on_trial, on_step=on_step)


def run_bench(plan: BenchPlan, *,
              on_trial_start: Callable[[int, int, int, int], None] | None = None,
              on_trial: Callable[[int, int, int, TrialResult], None] | None = None,
              on_step: Callable[[str], None] | None = None) -> BenchOutcome:
    """Measure a prepared bench and compare (or merge for saving); writes nothing."""
    from vramtune import machine
    from vramtune.measure.cap import plan_cap
    from vramtune.measure.cpu_share import REFERENCE, CpuShare
    from vramtune.measure.wire import TrialPhase
    from vramtune.records import Status
    from vramtune.results.baseline import key_from_results, merge_for_save, snapshot_from_results
    from vramtune.tune.gate import compare_snapshots

    nvml = Nvml()
    here = bench_local_key(nvml)
    notes: list[str] = []
    figures: dict[int, Any] = {}
    xla_errors: dict[int, str] = {}
    if plan.xla:
        if on_step:
            on_step(f"compiling the training epoch at num_envs "
                    f"{', '.join(map(str, plan.sizes))} for XLA's figures")
        figures, xla_errors = _xla_figures(plan, nvml)
        if xla_errors:
            notes.append(f"no XLA figures for num_envs {', '.join(map(str, xla_errors))}: "
                         f"{next(iter(xla_errors.values()))}")
    # The one cap planning (the sweep's, a lone trial's): planned once for every trial here.
    cap, _facts = device_cap(plan.budget_bytes, nvml)
    # Interleaved: 64, 256, 64, 256 ... so a burst of load elsewhere hits every size alike.
    # Compiled cold (no persistent cache): a warm cache lowers CPU peak RSS by ~20%, and CI
    # runners start cold, so a cached baseline would read as a regression there.
    schedule = [(r + 1, n) for r in range(plan.repeat) for n in plan.sizes]
    results: list[TrialResult] = []
    references: list[float | None] = []
    gpu = plan_cap(None, nvml, None).backend == "gpu"
    normalise = plan.normalise and not gpu  # steps per CPU second: the CPU backend's
    share = CpuShare()

    def on_event(event: Event) -> None:
        if normalise and isinstance(event, TrialPhase) and event.phase == "measuring":
            share.start()  # read through the trial's measuring window

    for i, (rep, n) in enumerate(schedule, start=1):
        if on_trial_start:
            on_trial_start(i, len(schedule), rep, n)
        request = TrialRequest(plan.profile, n, budget_bytes=plan.budget_bytes,
                               timeout_s=plan.timeout_s, compile_cache_dir=None)
        try:
            result = run_trial(request, on_event, cap=cap, nvml=nvml)
        finally:
            reference = share.stop()
        results.append(result)
        references.append(reference)
        if on_trial:
            on_trial(i, len(schedule), rep, result)
    key = key_from_results(results, machine.cpu_model()) or here
    old = plan.old
    if old is not None and not old.machine.matches(key) and not plan.force:
        _refuse_other_machine(plan.baseline_path, old, key, plan.save)
    candidate = snapshot_from_results(results, key, profile_dict=plan.profile.to_dict(),
                                      references=references if normalise else None,
                                      xla=_versioned(figures, results),
                                      xla_errors=xla_errors, cap_bytes=plan.budget_bytes,
                                      reference=REFERENCE if normalise else None,
                                      cpu_features=None if gpu else machine.cpu_features())
    if plan.save:
        comparable = old if (old is not None and old.machine.matches(key)
                             and old.profile_hash == candidate.profile_hash) else None
        report = compare_snapshots(comparable, candidate, plan.thresholds, extra_notes=notes)
        ok = all(r.status is Status.OK for r in results)
        saved, note = merge_for_save(old, candidate) if ok else (None, None)
        return BenchOutcome(plan, tuple(results), candidate, report, saved, note, tuple(notes))
    assert old is not None
    report = compare_snapshots(old, candidate, plan.thresholds, extra_notes=notes)
    return BenchOutcome(plan, tuple(results), candidate, report, None, None, tuple(notes))


def _versioned(figures: dict[int, Any], results: Sequence[TrialResult]) -> dict[int, Any]:
    """The figures with the versions that produced them (the trials' own: same interpreter)."""
    from dataclasses import replace

    versions = next((dict(r.versions) for r in results if r.versions), {})
    return {n: replace(f, versions=versions) for n, f in figures.items()}
