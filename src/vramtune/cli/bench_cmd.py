"""`vramtune bench`: the CI regression gate (exit 0 pass, 1 regression, 2 usage error)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from vramtune import api, fmt
from vramtune.cli.common import console, err_console, print_json, signals_as_exceptions
from vramtune.cli.tables import WIDE_HELP, bench_rich
from vramtune.errors import UserError
from vramtune.records import Status, TrialResult
from vramtune.results.baseline import save_baseline
from vramtune.tune.gate import DEFAULT_MAX_SPEED_DROP, BenchReport
from vramtune.units import format_bytes
from vramtune.views.gate_table import bench_markdown


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
    max_xla_increase: Annotated[str, typer.Option(
        help="Increase of any of XLA's compile-time figures of the training epoch (buffer "
             "bytes, flops, bytes accessed) that counts as a regression: they are identical "
             "run to run, so keep it tight.")] = "1%",
    max_instructions_increase: Annotated[str, typer.Option(
        help="Increase of the instructions a training step retires, counted by the CPU "
             "(user space, every thread of the trial), that counts as a regression: it "
             "follows the code, not the runner (idle runs within 0.8%; load lowers it by "
             "up to 5%: save the baseline idle). CPU only, where the kernel allows the "
             "counter.")] = "6%",
    max_mem_increase: Annotated[str, typer.Option(
        help="Measured peak memory increase that counts as a regression (host peaks jitter "
             "2-4% between identical runs).")] = "5%",
    max_speed_drop: Annotated[str, typer.Option(
        help="steps/s drop that counts as a regression, per CPU second of the trial's "
             "process on CPU (raw on a GPU, or against an older baseline).")]
    = f"{DEFAULT_MAX_SPEED_DROP:.0%}",
    gpu_mem: Annotated[str | None, typer.Option(
        "--gpu-mem", help="Run the trials under this budget (GPU memory; the data segment on "
                          "CPU): a size that fitted in the baseline and runs out of memory "
                          "now is a regression.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Kill a trial after this many seconds "
                                                      "(default: the profile's).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
) -> None:
    """Run repeated trials and compare them with a stored baseline, in five tiers: XLA's
    compile-time figures, instructions per env step (the CPU's counter), measured peak
    memory, steps per CPU second, and status (a size that fitted and now runs out of
    memory under --gpu-mem).

    Exit 0: no regression. 1: a regression (or a trial failed where the baseline's was ok).
    2: usage error (bad flag, missing or damaged baseline, baseline from another machine).
    """
    plan = api.prepare_bench(baseline, profile, sizes=sizes, repeat=repeat, save=save,
                             force=force, max_mem_increase=max_mem_increase,
                             max_speed_drop=max_speed_drop, max_xla_increase=max_xla_increase,
                             max_instructions_increase=max_instructions_increase,
                             gpu_mem=gpu_mem, timeout_s=timeout)

    def on_start(i: int, total: int, rep: int, n: int) -> None:
        if not json_out and err_console.is_terminal:  # a CI log gets one line per trial
            err_console.print(f"[dim][{i}/{total}] num_envs={n} repeat {rep}/{repeat}…[/dim]")

    def on_trial(i: int, total: int, rep: int, result: TrialResult) -> None:
        if not json_out:
            err_console.print(_progress_line(i, total, rep, repeat, result), markup=False)

    def on_step(message: str) -> None:
        if not json_out:
            err_console.print(message, markup=False)

    with signals_as_exceptions():  # a killed CI job leaves no trial and no temp folder
        outcome = api.run_bench(plan, on_trial_start=on_start, on_trial=on_trial,
                                on_step=on_step)
    report = outcome.report

    if save:
        failed = [r for r in outcome.results if r.status is not Status.OK]
        if failed or outcome.saved is None:
            why = (f"num_envs={failed[0].num_envs} {failed[0].status} ({len(failed)} of "
                   f"{len(outcome.results)} failed)" if failed else "no trial to save")
            if json_out:  # the measurement is still the caller's, in the format asked for
                print_json({**report.to_dict(), "saved": None,
                            "save_error": f"not saving a baseline with failed trials: {why}"})
            err_console.print(f"vramtune: error: not saving a baseline with failed trials: {why}",
                              markup=False)
            raise typer.Exit(1)
        error: UserError | None = None
        try:
            save_baseline(baseline, outcome.saved)
        except UserError as exc:  # disk full: the measurement is still shown, then exit 2
            error = exc
        if json_out:
            print_json({**report.to_dict(), "saved": None if error else str(baseline),
                        "save_note": outcome.save_note,
                        "save_error": str(error) if error else None})
        else:
            _print_report(report, bench_markdown(report, title="vramtune bench --save"), wide,
                          title="vramtune bench --save")
            if outcome.save_note:
                err_console.print(f"note: {outcome.save_note}", markup=False)
            if error is None:
                err_console.print(f"saved baseline {baseline}: num_envs "
                                  f"{', '.join(str(s.num_envs) for s in outcome.saved.sizes)}, "
                                  f"{repeat} repeat(s) each now", markup=False)
        if error is not None:
            raise error
        raise typer.Exit(0)

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
