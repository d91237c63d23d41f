"""`vramtune sweep`: the main job. Doubling, then refinement, with a live view and a table."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from vramtune import fmt
from vramtune.cli.common import BUDGET_HELP, budget, console, err_console, print_json
from vramtune.cli.tables import comparison_table
from vramtune.errors import UserError
from vramtune.machine import default_cache_dir
from vramtune.measure.cap import plan_cap
from vramtune.measure.executor import LocalExecutor
from vramtune.measure.nvml import Nvml
from vramtune.measure.overhead import measure_overhead_bytes
from vramtune.measure.wire import Event, Phase, Sample, TrialStarted
from vramtune.records import Status, TrialResult
from vramtune.results.store import create_run, load_run
from vramtune.tune.planner import doubling_sizes
from vramtune.tune.recommend import Objective, choose
from vramtune.tune.sweep import SweepConfig, SweepState, make_header, reusable, run_sweep, summary
from vramtune.units import budget_label, format_bytes, parse_percent
from vramtune.views.runs import chosen_summary
from vramtune.views.sweep_table import comparison_rows
from vramtune.workload.profile import load_profile, profile_from_dict


class Terminated(BaseException):
    """SIGTERM, raised like Ctrl-C so the trial in flight is killed and results kept."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


class _Progress:
    """Live progress on a terminal; plain lines otherwise; silent with --json."""

    def __init__(self, planned: int, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = console.is_terminal and not quiet
        self.planned = planned
        self.index = 0
        self.num_envs = 0
        self.phase = "starting"
        self.started = time.monotonic()
        self.rss: int | None = None
        self.gpu: int | None = None
        self.live: Live | None = None

    def __enter__(self) -> _Progress:
        if self.tty:
            self.live = Live(self._render(), console=console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live:
            self.live.__exit__(*exc)

    def _render(self) -> Text:
        memory = f"host RSS {format_bytes(self.rss)}"
        if self.gpu is not None:
            memory += f", GPU {format_bytes(self.gpu)}"
        return Text(f"trial {self.index} of ~{self.planned}: num_envs={self.num_envs}  "
                    f"{self.phase}  {time.monotonic() - self.started:5.1f} s  {memory}")

    def event(self, event: Event) -> None:
        if self.quiet:
            return
        if isinstance(event, TrialStarted):
            self.index, self.num_envs = event.index, event.num_envs
            self.planned = max(self.planned, self.index)
            self.phase, self.started, self.rss, self.gpu = "starting", time.monotonic(), None, None
            if not self.tty:
                print(f"trial {self.index} of ~{self.planned}: num_envs={self.num_envs} "
                      f"({event.reason})", flush=True)
        elif isinstance(event, Phase):
            self.phase = event.phase
        elif isinstance(event, Sample):
            self.rss, self.gpu = event.host_rss_bytes, event.gpu_process_bytes
        if self.live:
            self.live.update(self._render())

    def trial_done(self, result: TrialResult) -> None:
        if self.quiet:
            return
        line = escape(f"  num_envs={result.num_envs}: {result.status}, "
                f"{fmt.rate(result.steps_per_s)} steps/s, peak {format_bytes(result.peak_bytes)} "
                f"{result.memory_label}, {fmt.seconds(result.wall_s)}")
        if self.live:
            self.live.console.print(line)
        else:
            print(line, flush=True)


def _program() -> str:
    """How the user ran us ('.venv/bin/vramtune' from the README), so 'next:' can be pasted."""
    invoked = sys.argv[0] if sys.argv else ""
    return escape(invoked) if os.path.basename(invoked) == "vramtune" else "vramtune"


def _print_outcome(state: SweepState, config: SweepConfig, objective: Objective, run_dir: Path,
                   json_out: bool, interrupted: bool) -> int:
    rec = choose(state.results, config.budget_bytes, config.headroom_fraction, objective)
    if json_out:
        data = summary(state, rec, run_dir)
        data["interrupted"] = interrupted
        print_json(data)
        return 0 if rec.chosen else 1
    rows = comparison_rows(state.results, rec, config.budget_bytes)
    gpu = any(r.is_gpu for r in state.results)
    shown_budget = format_bytes(config.budget_bytes) if config.budget_bytes else "none"
    title = (f"{config.profile.name}: budget {shown_budget}"
             f", headroom {config.headroom_fraction:.0%}, objective {objective}")
    if rows:
        console.print(comparison_table(rows, gpu=gpu, title=title))
    if not gpu and state.results:
        console.print("[dim]CPU backend: memory figures are host RAM (peak RSS), not VRAM.[/dim]")
    if state.final_step and not interrupted:
        console.print(f"search: {escape(state.final_step.reason)}")
    if state.reused:
        console.print(f"resumed: {state.reused} trial(s) reused from the earlier run, not re-run")
    if rec.chosen:
        summary_text = chosen_summary(rec.chosen, config.budget_bytes)
        console.print(f"[bold green]recommended:[/] {escape(summary_text)}")
    elif rec.notice:
        console.print(f"[bold red]no recommendation:[/] {escape(rec.notice)}")
    console.print(f"results: {escape(str(run_dir))}")
    if interrupted:
        console.print(f"next: {_program()} sweep --resume {escape(str(run_dir))}")
    else:
        budget_flag = f" --gpu-mem {budget_label(config.budget_bytes)}" if config.budget_bytes else ""
        console.print(f"next: {_program()} emit-config {escape(str(run_dir))}{budget_flag}")
    return 0 if rec.chosen else 1


def sweep(
    profile: Annotated[str | None, typer.Option(help="Built-in profile name or a profile YAML "
                                                     "file (default: quick).")] = None,
    gpu_mem: Annotated[str | None, typer.Option("--gpu-mem", help=BUDGET_HELP)] = None,
    start: Annotated[int | None, typer.Option(help="First num_envs (default: the profile's).")] = None,
    max_envs: Annotated[int | None, typer.Option("--max-envs",
                                                 help="Largest num_envs to try (default: the "
                                                      "profile's).")] = None,
    refine: Annotated[int | None, typer.Option(help="Bisection trials after the first failure "
                                                    "(default 3).")] = None,
    headroom: Annotated[str | None, typer.Option(help="Keep peaks this far under the budget "
                                                      "(default 10%).")] = None,
    objective: Annotated[Objective | None, typer.Option(
        help="throughput: fastest (default); knee: smallest within 5% of the fastest; "
             "max-envs: most envs.")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default: "
                                                  "./vramtune-runs/<timestamp>-<profile>).")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the sweep in this run directory; "
                                                     "measured trials are not run again.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Per-trial time limit in seconds.")] = None,
    cache: Annotated[bool, typer.Option(help="Use JAX's persistent compilation cache.")] = True,
    standby: Annotated[bool, typer.Option(help="Start (and import) the next trial's process "
                                               "while the current one compiles.")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the final JSON summary.")]
    = False,
) -> None:
    """Measure doubling num_envs under a memory budget, refine the boundary, recommend."""
    budget_bytes = budget(gpu_mem)
    headroom_fraction = parse_percent(headroom or "10%", what="--headroom")
    if refine is not None and refine < 0:
        raise UserError(f"--refine must be 0 or more, got {refine}")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout must be positive, got {timeout:g}")
    previous = None
    if resume is not None:
        previous = load_run(resume)
        header = previous.header
        if profile is not None and load_profile(profile).hash != header.profile_hash:
            raise UserError(f"--profile {profile} differs from the profile {resume} was measured "
                            f"with ({header.profile_name}); start a new sweep instead")
        if gpu_mem is not None and budget_bytes != header.budget_bytes:
            raise UserError(f"--gpu-mem differs from the budget {resume} was measured with "
                            f"({format_bytes(header.budget_bytes)}); start a new sweep instead")
        prof = profile_from_dict(header.profile, source=str(resume))
        budget_bytes = header.budget_bytes
        if headroom is None:
            headroom_fraction = header.headroom_fraction
        searched = header.search
        start = start or searched.get("start")
        max_envs = max_envs or searched.get("max_envs")
        refine = searched.get("refine") if refine is None else refine
        if objective is None and searched.get("objective"):
            objective = Objective(searched["objective"])
    else:
        prof = load_profile(profile or "quick")
    refine = 3 if refine is None else refine
    objective = Objective.THROUGHPUT if objective is None else objective
    start = prof.first_size if start is None else start
    max_envs = prof.max_envs if max_envs is None else max_envs
    if start < 1 or max_envs < 1:
        raise UserError("--start and --max-envs must be positive integers")
    if start > max_envs:
        raise UserError(f"--start {start} is above --max-envs {max_envs}")
    nvml = Nvml()
    if nvml.notice and not json_out:
        err_console.print(f"[dim]note: {nvml.notice}[/dim]")
    overhead = measure_overhead_bytes(nvml) if budget_bytes and nvml.available else None
    cap = plan_cap(budget_bytes, nvml, overhead)
    config = SweepConfig(prof, budget_bytes, headroom_fraction, start, max_envs, refine,
                         timeout_s=timeout,
                         compile_cache_dir=str(default_cache_dir() / "jax") if cache else None)
    header = make_header(config, nvml, cap.description,
                         {"start": start, "max_envs": max_envs, "refine": refine,
                          "objective": str(objective)})
    state = SweepState()
    if previous is not None:
        run_dir = previous.directory
        for warning in previous.warnings:
            err_console.print(f"[yellow]warning:[/] {escape(warning)}")
        state.results = reusable(previous, header, config)
        state.reused = len(state.results)
        skipped = len(previous.results) - state.reused
        if skipped:
            err_console.print(f"[yellow]warning:[/] {skipped} trial(s) in {escape(str(run_dir))} "
                              f"were measured with other versions, profile or device and are "
                              f"not reused")
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = out or Path("vramtune-runs") / f"{stamp}-{prof.name}"
        create_run(run_dir, header)
    planned = len(doubling_sizes(config.space())) + (refine if budget_bytes or nvml.available else 0)
    progress = _Progress(planned, json_out)
    previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    code: int
    try:
        with progress:
            run_sweep(config, LocalExecutor(nvml, overhead, standby=standby), run_dir, state,
                      progress.event,
                      lambda step, result: progress.trial_done(result))
        code = _print_outcome(state, config, objective, run_dir, json_out, interrupted=False)
    except (KeyboardInterrupt, Terminated) as stop:
        _print_outcome(state, config, objective, run_dir, json_out, interrupted=True)
        how, code = ("terminated", 143) if isinstance(stop, Terminated) else ("interrupted", 130)
        err_console.print(f"vramtune: {how}; measured trials are saved")
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    if state.results and any(r.status is Status.ERROR for r in state.results) and not json_out:
        errors = [r for r in state.results if r.status is Status.ERROR]
        last = (errors[0].error_message or "").strip().splitlines()[-1:] or [""]
        err_console.print(f"[red]error in num_envs={errors[0].num_envs}:[/] {escape(last[0])}")
    raise typer.Exit(code)
