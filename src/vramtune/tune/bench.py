"""The bench runner: the trials `vramtune bench` measures, and what it compares or saves.

``prepare_bench`` checks every input and reads the baseline before any trial; ``run_bench``
measures (XLA's figures per size, then interleaved trials) and compares with ``tune.gate``;
``save_outcome`` writes the merged baseline. The verdicts themselves are ``tune.gate``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from vramtune import machine, paths
from vramtune.errors import UserError, quoted
from vramtune.inputs import Percent, Size, as_cap, check_timeout
from vramtune.measure.cap import backend, plan_cap
from vramtune.measure.cpu_share import REFERENCE, CpuShare
from vramtune.measure.footprint import MAX_SIZES, FootprintProbe
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import device_cap
from vramtune.measure.trial import TrialRequest, invalid_result, run_trial
from vramtune.measure.wire import Event, TrialPhase
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import (
    MachineKey,
    Snapshot,
    XlaFigures,
    key_from_results,
    load_baseline,
    merge_for_save,
    save_baseline,
    snapshot_from_results,
)
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.gate import BenchReport, Thresholds, compare_snapshots
from vramtune.units import parse_percent
from vramtune.workload.profile import Profile, load_profile, profile_folder

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
    thresholds: Thresholds
    budget_bytes: int | None
    timeout_s: float | None
    old: Snapshot | None  # the baseline read (None: --save to a new file)
    xla: bool  # compile each size for XLA's figures (the deterministic tier)
    normalise: bool  # read each CPU trial's CPU share (steps per CPU second)


@dataclass(frozen=True)
class BenchOutcome:
    plan: BenchPlan
    results: tuple[TrialResult, ...]
    candidate: Snapshot
    report: BenchReport
    saved: Snapshot | None = None  # the baseline to write with --save (None: trials failed)
    save_note: str | None = None
    notes: tuple[str, ...] = ()  # what the run could not do (no XLA figures, no reference)
    # why ``saved`` could not be written (disk full): the measurement is still the caller's
    save_error: str | None = None


def bench_local_key(nvml: Nvml) -> MachineKey:
    """This machine's key before any trial ran (device count unknown until JAX is up)."""
    if backend(nvml) == "gpu" and nvml.info is not None:
        return MachineKey("gpu", nvml.info.name, None)
    return MachineKey("cpu", machine.cpu_model(), None)


def _refuse_other_machine(path: Path, base: Snapshot, here: MachineKey, saving: bool) -> None:
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


def _xla_figures(plan: BenchPlan, nvml: Nvml) -> tuple[dict[int, XlaFigures], dict[int, str]]:
    """XLA's figures of every size's training epoch, compiled (never run) in a process of its
    own, uncapped: they are the compiler's count, whatever budget the trials run under."""
    figures: dict[int, XlaFigures] = {}
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


def run_bench(plan: BenchPlan, *,
              on_trial_start: Callable[[int, int, int, int], None] | None = None,
              on_trial: Callable[[int, int, int, TrialResult], None] | None = None,
              on_step: Callable[[str], None] | None = None) -> BenchOutcome:
    """Measure a prepared bench and compare (or merge for saving); writes nothing."""
    nvml = Nvml()
    here = bench_local_key(nvml)
    notes: list[str] = []
    figures: dict[int, XlaFigures] = {}
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
    gpu = backend(nvml) == "gpu"
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


def _versioned(figures: dict[int, XlaFigures],
               results: Sequence[TrialResult]) -> dict[int, XlaFigures]:
    """The figures with the versions that produced them (the trials' own: same interpreter)."""
    versions = next((dict(r.versions) for r in results if r.versions), {})
    return {n: replace(f, versions=versions) for n, f in figures.items()}


def save_outcome(outcome: BenchOutcome) -> BenchOutcome:
    """Write a --save bench's merged baseline (none when a trial failed); a write error is
    kept in ``save_error``, so the minutes of measurement are still shown."""
    if not outcome.plan.save or outcome.saved is None:
        return outcome
    try:
        save_baseline(outcome.plan.baseline_path, outcome.saved)
    except UserError as exc:  # disk full
        return replace(outcome, save_error=str(exc))
    return outcome
