"""`vramtune bench`: the CI regression gate (exit 0 pass, 1 regression, 2 usage error)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import fmt, machine, paths
from vramtune.cli.common import console, err_console, print_json, signals_as_exceptions
from vramtune.cli.tables import WIDE_HELP, bench_rich
from vramtune.errors import UserError
from vramtune.measure.cap import plan_cap
from vramtune.measure.nvml import Nvml
from vramtune.measure.trial import TrialRequest, invalid_result, run_trial
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import (
    MachineKey,
    Snapshot,
    key_from_results,
    load_baseline,
    merge_for_save,
    save_baseline,
    snapshot_from_results,
)
from vramtune.schema import MAX_NUM_ENVS
from vramtune.tune.gate import BenchReport, Thresholds, compare_snapshots
from vramtune.units import format_bytes, parse_percent
from vramtune.views.gate_table import bench_markdown
from vramtune.workload.profile import MAX_TIMEOUT_S, load_profile

MAX_SIZES = 64
MAX_REPEAT = 1000


def parse_num_envs_list(text: str) -> list[int]:
    """'64,256' -> [64, 256]; one-line UserError for anything else."""
    sizes: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise UserError(f"invalid --sizes {text!r}: {part!r} is not a whole number; "
                            f"expected e.g. 64,256") from None
        if not 1 <= value <= MAX_NUM_ENVS:
            raise UserError(f"invalid --sizes {text!r}: num_envs must be positive and at most "
                            f"{MAX_NUM_ENVS}, got {value}")
        if value not in sizes:
            sizes.append(value)
    if not sizes:
        raise UserError(f"invalid --sizes {text!r}: expected num_envs such as 64,256")
    if len(sizes) > MAX_SIZES:
        raise UserError(f"invalid --sizes: {len(sizes)} sizes; at most {MAX_SIZES}")
    return sizes


def local_key(nvml: Nvml) -> MachineKey:
    """This machine's key before any trial ran (device count unknown until JAX is up)."""
    if plan_cap(None, nvml, None).backend == "gpu" and nvml.info is not None:
        return MachineKey("gpu", nvml.info.name, None)
    return MachineKey("cpu", machine.cpu_model(), None)


def _refuse_other_machine(path: Path, base: Snapshot, here: MachineKey,
                          saving: bool) -> None:
    action = "overwrite it" if saving else "compare anyway"
    raise UserError(f"baseline {path} was measured on {base.machine.describe()}, this machine is "
                    f"{here.describe()}: figures from another machine are not comparable "
                    f"(use a baseline from this machine, or --force to {action})")


def _progress_line(i: int, total: int, repeat: int, repeats: int, r: TrialResult) -> str:
    if r.status is Status.OK:
        what = (f"{format_bytes(r.peak_bytes)} {r.memory_label}, {fmt.rate(r.steps_per_s)} "
                f"steps/s")
    else:
        first = (r.error_message or "").strip().splitlines()[:1]
        what = f"{r.status}" + (f": {first[0][:120]}" if first else "")
    return (f"[{i}/{total}] num_envs={r.num_envs} repeat {repeat}/{repeats}: {what} "
            f"({fmt.seconds(r.wall_s)})")


def _append_step_summary(markdown: str) -> None:
    """GitHub Actions shows this file on the run's summary page."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    except OSError as exc:
        err_console.print(f"[yellow]warning:[/] cannot append to $GITHUB_STEP_SUMMARY "
                          f"({escape(str(exc))})")


def bench_command(
    baseline: Annotated[Path, typer.Option("--baseline", help="Baseline JSON file (created with "
                                                               "--save).", show_default=False)],
    profile: Annotated[str, typer.Option(help="Built-in profile name or a profile YAML file.")]
    = "quick",
    sizes: Annotated[str, typer.Option(help="Comma-separated num_envs to measure.")] = "64,256",
    repeat: Annotated[int, typer.Option(help="Trials per size, interleaved across sizes so machine "
                                             "noise is spread over all of them.")] = 3,
    save: Annotated[bool, typer.Option("--save", help="Write (or update) the baseline with these "
                                                      "measurements instead of gating.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Compare with (or overwrite) a baseline "
                                                        "from another machine.")] = False,
    max_mem_increase: Annotated[str, typer.Option(
        help="Peak memory increase that counts as a regression (memory is nearly "
             "deterministic: keep it tight).")] = "5%",
    max_speed_drop: Annotated[str, typer.Option(
        help="steps/s drop that counts as a regression (throughput is noisy: keep it "
             "loose).")] = "10%",
    timeout: Annotated[float | None, typer.Option(help="Kill a trial after this many seconds "
                                                      "(default: the profile's).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
) -> None:
    """Run repeated trials and compare peak memory and steps/s with a stored baseline.

    Exit 0: no regression. 1: a regression (or a trial failed where the baseline's was ok).
    2: usage error (bad flag, missing baseline, baseline from another machine).
    """
    thresholds = Thresholds(parse_percent(max_mem_increase, what="--max-mem-increase"),
                                  parse_percent(max_speed_drop, what="--max-speed-drop"))
    num_envs = parse_num_envs_list(sizes)
    if not 1 <= repeat <= MAX_REPEAT:
        raise UserError(f"--repeat must be from 1 to {MAX_REPEAT}, got {repeat}")
    if timeout is not None and not (0 < timeout <= MAX_TIMEOUT_S):  # refuses nan and inf
        raise UserError(f"--timeout must be a number of seconds above 0 and at most "
                        f"{MAX_TIMEOUT_S}, got {timeout:g}")
    prof = load_profile(profile)
    for n in num_envs:
        invalid = invalid_result(TrialRequest(prof, n))
        if invalid is not None:
            raise UserError(f"--sizes: {invalid.error_message}")
    old: Snapshot | None = None
    if paths.exists(baseline) or not save:
        old = load_baseline(baseline)
    if save:  # before the trials: minutes of measurement must not end on a bad path
        paths.check_writable_file(baseline, "--baseline")
    nvml = Nvml()
    here = local_key(nvml)
    if old is not None and not old.machine.matches(here) and not force:
        _refuse_other_machine(baseline, old, here, save)
    if old is not None and old.profile_hash != prof.hash and not force:
        action = "overwrite it" if save else "compare anyway"
        raise UserError(f"baseline {baseline} measured profile {old.profile_name} "
                        f"({old.profile_hash}), not {prof.name} ({prof.hash}): a different "
                        f"workload is not a regression test (use its profile, or --force to "
                        f"{action})")

    # Interleaved: 64, 256, 64, 256 ... so a burst of load elsewhere hits every size alike.
    # Compiled cold (no persistent cache): a warm cache lowers CPU peak RSS by ~20%, and CI
    # runners start cold, so a cached baseline would read as a regression there.
    plan = [(r + 1, n) for r in range(repeat) for n in num_envs]
    results: list[TrialResult] = []
    with signals_as_exceptions():  # a killed CI job leaves no trial and no temp folder
        for i, (rep, n) in enumerate(plan, start=1):
            if not json_out and err_console.is_terminal:  # a CI log gets one line per trial
                err_console.print(f"[dim][{i}/{len(plan)}] num_envs={n} repeat "
                                  f"{rep}/{repeat}…[/dim]")
            result = run_trial(TrialRequest(prof, n, timeout_s=timeout, compile_cache_dir=None),
                               nvml=nvml)
            results.append(result)
            if not json_out:
                err_console.print(_progress_line(i, len(plan), rep, repeat, result),
                                  markup=False)

    key = key_from_results(results, machine.cpu_model()) or here
    if old is not None and not old.machine.matches(key) and not force:
        _refuse_other_machine(baseline, old, key, save)
    candidate = snapshot_from_results(results, key, profile_dict=prof.to_dict())

    if save:
        failed = [r for r in results if r.status is not Status.OK]
        if failed:
            f = failed[0]
            err_console.print(f"vramtune: error: not saving a baseline with failed trials: "
                              f"num_envs={f.num_envs} {f.status} ({len(failed)} of {len(results)} "
                              f"failed)")
            raise typer.Exit(1)
        comparable = old if (old is not None and old.machine.matches(key)
                             and old.profile_hash == candidate.profile_hash) else None
        report = compare_snapshots(comparable, candidate, thresholds)
        new, note = merge_for_save(old, candidate)
        error: UserError | None = None
        try:
            save_baseline(baseline, new)
        except UserError as exc:  # disk full: the measurement is still shown, then exit 2
            error = exc
        if json_out:
            print_json({**report.to_dict(), "saved": None if error else str(baseline),
                        "save_note": note, "save_error": str(error) if error else None})
        else:
            _print_report(report, bench_markdown(report, title="vramtune bench --save"), wide,
                          title="vramtune bench --save")
            if note:
                err_console.print(f"note: {note}", markup=False)
            if error is None:
                err_console.print(f"saved baseline {baseline}: num_envs "
                                  f"{', '.join(str(s.num_envs) for s in new.sizes)}, {repeat} "
                                  f"repeat(s) each now", markup=False)
        if error is not None:
            raise error
        raise typer.Exit(0)

    assert old is not None
    report = compare_snapshots(old, candidate, thresholds)
    markdown = bench_markdown(report)
    _append_step_summary(markdown)
    if json_out:
        print_json({**report.to_dict(), "baseline_file": str(baseline)})
    else:
        _print_report(report, markdown, wide)
    raise typer.Exit(0 if report.passed else 1)


def _print_report(report: BenchReport, markdown: str, wide: bool, *,
                  title: str | None = None) -> None:
    """A terminal gets the table drawn to its width; a CI log or a file the Markdown."""
    if console.is_terminal:
        console.print(bench_rich(report, title=title, wide=wide), crop=False)
    else:
        sys.stdout.write(markdown)
        sys.stdout.flush()
