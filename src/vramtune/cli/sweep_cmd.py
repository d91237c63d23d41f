"""`vramtune sweep`: the main job, with a live view and a table; its options are declared in
``tune.options`` (``SweepOptions``) and read here as they are."""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from vramtune import api, fmt
from vramtune.api import (
    Event,
    PreparedSweep,
    Recommendation,
    Sample,
    SweepNote,
    TrialPhase,
    TrialStarted,
)
from vramtune.cli.common import (
    Terminated,
    Wide,
    console,
    err_console,
    print_json,
    signals_as_exceptions,
    with_options,
)
from vramtune.cli.tables import rich_table, sweep_rich
from vramtune.errors import UserError
from vramtune.records import Purpose, Status, TrialResult, any_gpu
from vramtune.units import both_units, budget_label, format_bytes
from vramtune.views.configs import cards_table
from vramtune.views.runs import OutcomeLine, outcome_lines
from vramtune.views.sweep_json import summary
from vramtune.views.sweep_table import SHARED_FOOTNOTE, sweep_table, unsettled_note


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
        self.running: dict[int, int] = {}  # trial index -> num_envs, while it runs
        # events arrive on each running trial's reader and sampler threads, results on the
        # sweep's: one at a time, or a render iterates ``running`` while another thread edits it
        self._lock = threading.RLock()

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
        if len(self.running) > 1:  # several at once: their events interleave, name them all
            sizes = ", ".join(str(n) for n in self.running.values())
            return Text(f"trials {', '.join(str(i) for i in self.running)} at once: num_envs "
                        f"{sizes}  {time.monotonic() - self.started:5.1f} s")
        return Text(f"trial {self.index} (at most {self.planned}): num_envs={self.num_envs}  "
                    f"{self.phase}  {time.monotonic() - self.started:5.1f} s  {memory}")

    def event(self, event: Event) -> None:
        if self.quiet:
            return
        with self._lock:
            self._event(event)

    def _event(self, event: Event) -> None:
        if isinstance(event, TrialStarted):
            self.index, self.num_envs = event.index, event.num_envs
            self.running[event.index] = event.num_envs
            self.planned = max(self.planned, self.index)
            self.phase, self.started, self.rss, self.gpu = "starting", time.monotonic(), None, None
            if not self.tty:
                print(f"trial {self.index} (at most {self.planned}): num_envs={self.num_envs} "
                      f"({event.reason})", flush=True)
        elif isinstance(event, SweepNote):
            if self.live:
                self.live.console.print(f"  {event.text}", markup=False, highlight=False)
            else:
                print(f"  {event.text}", flush=True)
        elif isinstance(event, TrialPhase):
            self.phase = event.phase
        elif isinstance(event, Sample):
            self.rss, self.gpu = event.host_rss_bytes, event.gpu_process_bytes
        if self.live:
            self.live.update(self._render())

    def trial_done(self, result: TrialResult) -> None:
        if self.quiet:
            return
        with self._lock:
            self._trial_done(result)

    def _trial_done(self, result: TrialResult) -> None:
        index = next((i for i, n in self.running.items() if n == result.num_envs), None)
        if index is not None:
            del self.running[index]
        line = result_line(result)
        if self.live:
            self.live.console.print(line, markup=False)
        else:
            print(line, flush=True)


def result_line(result: TrialResult) -> str:
    """One finished trial in a line: status, speed, peak, how close to the cap."""
    capped = ""
    if result.cap_bytes is not None:
        what, held = (("pool", "pool limit") if result.is_gpu
                      else ("data segment", "cap"))
        capped = (f"; {what} {format_bytes(result.cap_figure_bytes)} of the "
                  f"{format_bytes(result.cap_figure_limit_bytes)} {held}")
    purpose = "" if result.purpose is Purpose.SEARCH else f" [{result.purpose}]"
    if result.shared_run:
        purpose += " [shared run: steps/s not comparable]"
    return (f"  num_envs={result.num_envs}{purpose}: {result.status}, "
            f"{fmt.rate(result.steps_per_s)} steps/s, peak {format_bytes(result.peak_bytes)} "
            f"{result.memory_label}{capped}, {fmt.seconds(result.wall_s)}")


class _LabelledLines:
    """Progress of several sweeps at once (one per card): plain lines tagged with the card,
    printed from the sweeps' threads."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def event(self, label: str, event: Event) -> None:
        if not self.quiet and isinstance(event, TrialStarted):
            console.print(f"[{label}] trial {event.index}: num_envs={event.num_envs} "
                          f"({event.reason})", markup=False, highlight=False)
        elif not self.quiet and isinstance(event, SweepNote):
            console.print(f"[{label}] {event.text}", markup=False, highlight=False)

    def trial_done(self, label: str, result: TrialResult) -> None:
        if not self.quiet:
            console.print(f"[{label}]{result_line(result)}", markup=False, highlight=False)


def _program() -> str:
    """How the user ran us ('.venv/bin/vramtune' from the README), so 'next:' can be pasted."""
    invoked = sys.argv[0] if sys.argv else ""
    return _arg(invoked) if os.path.basename(invoked) == "vramtune" else "vramtune"


def _arg(path: object) -> str:
    """A path on a 'next:' line, quoted for the shell (spaces, $) and escaped for rich."""
    return escape(shlex.quote(str(path)))


def _summary(prepared: PreparedSweep, interrupted: bool,
             rec: Recommendation | None = None) -> dict[str, Any]:
    if rec is None:
        rec = api.outcome(prepared, interrupted=interrupted).recommendation
    data = summary(prepared.state, rec, prepared.run_dir)
    data["interrupted"] = interrupted
    return data


def _print_outcome(prepared: PreparedSweep, json_out: bool, interrupted: bool, *,
                   next_line: bool = True, wide: bool = False) -> int:
    state, config, objective = prepared.state, prepared.config, prepared.objective
    run_dir = prepared.run_dir
    done = api.outcome(prepared, interrupted=interrupted)
    rec = done.recommendation
    if json_out:
        print_json(_summary(prepared, interrupted, rec))  # rec: chosen once, above
        return 0 if rec.chosen else 1
    table = sweep_table(state.results, rec, config.budget_bytes)
    gpu = any_gpu(state.results)
    shown_budget = both_units(config.budget_bytes) if config.budget_bytes else "none"
    title = (f"{config.profile.name}: budget {shown_budget}"
             f", headroom {config.headroom_fraction:.0%}, objective {objective}")
    if prepared.label:
        title = f"{prepared.label}: {title}"
    if len(table):
        console.print(sweep_rich(table, title=title, wide=wide), crop=False)
    if not gpu and state.results:
        console.print("[dim]CPU backend: memory figures are host RAM (peak RSS), not VRAM.[/dim]")
    if any(r.shared_run for r in state.results):
        console.print(f"[dim]{escape(SHARED_FOOTNOTE)}[/dim]")
    if (loose := unsettled_note(state.results)) is not None:
        console.print(f"[dim]{escape(loose)}[/dim]")
    for line in outcome_lines(rec, config.budget_bytes, run_dir,
                              stopped_because=done.stopped_because, reused=done.reused,
                              confirm=config.settings.confirm, interrupted=interrupted):
        console.print(_outcome_markup(line))
    if interrupted and next_line:
        console.print(f"next: {_program()} sweep --resume {_arg(run_dir)}")
    elif next_line:
        budget_flag = f" --gpu-mem {budget_label(config.budget_bytes)}" if config.budget_bytes else ""
        console.print(f"next: {_program()} emit-config {_arg(run_dir)}{budget_flag}")
    return 0 if rec.chosen else 1


_TONE_STYLE = {"good": "bold green", "warning": "yellow", "bad": "bold red"}


def _outcome_markup(line: OutcomeLine) -> str:
    """A line under the sweep's table as rich markup: its label coloured by its tone; a good
    line with no label is green whole."""
    text = escape(line.text)
    if line.label is None:
        return f"[green]{text}[/]"
    style = _TONE_STYLE.get(line.tone)
    return f"[{style}]{line.label}:[/] {text}" if style else f"{line.label}: {text}"


@with_options(api.sweep_flags())
def sweep(
    profile: Annotated[str | None, typer.Option(help="Built-in profile name or a profile YAML "
                                                     "file (default: quick).")] = None,
    *,
    json_out: Annotated[bool, typer.Option("--json", help="Print only the final JSON summary.")]
    = False,
    wide: Wide = False,
    **options: Any,
) -> None:
    """Find the num_envs boundary under a memory budget from real trials, recommend."""
    request = api.sweep_request(profile, **options)
    if request.gpu_types is not None or (request.resume is not None
                                         and _is_parent(request.resume)):
        _sweep_types(request, json_out=json_out, wide=wide)
    prepared = api.prepare_sweep(request)
    if prepared.notice and not json_out:
        err_console.print(f"[dim]note: {escape(prepared.notice)}[/dim]")
    if not json_out and "patched" in (prepared.header.stack or ""):
        err_console.print(f"[dim]stack: {escape(prepared.header.stack or '')}[/dim]")
    for warning in prepared.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    state = prepared.state
    progress = _Progress(prepared.planned(), json_out)
    code: int
    try:
        with signals_as_exceptions(), progress:
            api.run_prepared(prepared, progress.event,
                             lambda step, result: progress.trial_done(result))
        code = _print_outcome(prepared, json_out, interrupted=False, wide=wide)
    except (KeyboardInterrupt, Terminated) as stop:
        _print_outcome(prepared, json_out, interrupted=True, wide=wide)
        how, code = ("terminated", 143) if isinstance(stop, Terminated) else ("interrupted", 130)
        err_console.print(f"vramtune: {how}; measured trials are saved")
    except UserError:
        # A write failed after trials ran (disk full): the table first, then the one line.
        _print_outcome(prepared, json_out, interrupted=True, wide=wide)
        raise
    errors = [r for r in state.results if r.status in (Status.ERROR, Status.OVERFLOW)]
    if errors and not json_out:
        last = (errors[0].error_message or "").strip().splitlines()[-1:] or [""]
        err_console.print(f"[red]{errors[0].status} in num_envs={errors[0].num_envs}:[/] "
                          f"{escape(last[0])}")
    raise typer.Exit(code)


def _is_parent(path: Path) -> bool:
    """A mixed-cluster sweep's parent: run directories under it, no results of its own."""
    return api.is_parent_of_runs(path)


def tag(label: object) -> str:
    """A card's label in brackets, as rich markup: the brackets escaped with it, or a
    lowercase label ([a100], [l4]) reads as a style tag and vanishes."""
    return escape(f"[{label}]")


def _sweep_types(request: api.SweepRequest, *, json_out: bool, wide: bool = False) -> None:
    """One sweep per accelerator type of a mixed Ray cluster, all at once."""
    parent, sweeps = api.prepare_sweeps(request)
    if not json_out:
        for p in sweeps:
            if p.notice:
                err_console.print(f"[dim]note: {tag(p.label)} {escape(p.notice)}[/dim]")
            for warning in p.warnings:
                err_console.print(f"[yellow]warning:[/] {tag(p.label)} {escape(warning)}")
        types = ", ".join(f"{p.label} ({p.executor.parallel} at once)" for p in sweeps)
        console.print(f"sweeping {escape(types)} under {escape(str(parent))}")
    lines = _LabelledLines(json_out)
    interrupted: BaseException | None = None
    try:
        with signals_as_exceptions():
            api.run_prepared_sweeps(sweeps, lines.event,
                                    lambda label, step, result: lines.trial_done(label, result))
    except (KeyboardInterrupt, Terminated) as stop:
        interrupted = stop
    chosen = all(api.outcome(p, interrupted=interrupted is not None).recommendation.chosen
                 for p in sweeps)
    if json_out:
        print_json({"parent": str(parent), "interrupted": interrupted is not None,
                    "sweeps": {str(p.label): _summary(p, interrupted is not None)
                               for p in sweeps}})
    else:
        for p in sweeps:
            _print_outcome(p, False, interrupted is not None, next_line=False, wide=wide)
        if interrupted is None:
            cards = [(card, source, [c.emission for c in configs])
                     for card, source, configs in api.emit_cards(parent)]
            console.print(rich_table(cards_table(cards), title="per card, at each sweep's cap",
                                     wide=wide), crop=False)
            console.print(f"next: {_program()} emit-config {_arg(parent)}")
        else:
            console.print(f"next: {_program()} sweep --resume {_arg(parent)}")
    if interrupted is not None:
        how, code = ("terminated", 143) if isinstance(interrupted, Terminated) else \
            ("interrupted", 130)
        err_console.print(f"vramtune: {how}; measured trials are saved")
        raise typer.Exit(code)
    raise typer.Exit(0 if chosen else 1)
