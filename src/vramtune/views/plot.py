"""A sweep as a picture: memory and steps/s against num_envs (log2), budget, OOMs, the pick.

matplotlib is an optional extra (``vramtune[plot]``) and is imported only here. The figure is a
``matplotlib.figure.Figure`` made directly, not through pyplot: no backend is chosen or needed
(a headless CI runner writes the PNG; a notebook's inline backend, whatever it is, stays as the
user set it), and no window opens.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vramtune.errors import UserError, quoted
from vramtune.records import FAILED_BY_MEMORY, Status, TrialResult, any_gpu, memory_kind
from vramtune.results.store import Run
from vramtune.tune.ledger import SizeLedger, ledgers
from vramtune.tune.recommend import RANKED, Recommendation, disturbed_runs, weighed_speeds
from vramtune.units import both_units, format_bytes

MISSING_MATPLOTLIB = ("plotting needs matplotlib, which is not installed: "
                      "pip install 'vramtune[plot]'")

# The formats matplotlib writes with its own backends (Agg, PDF, SVG), with no other library
PLOT_FORMATS = ("png", "pdf", "svg")


def plot_format(path: str | Path) -> str:
    """The format a plot file's name asks for: its suffix, PNG when it has none; a UserError
    for any other suffix, so 'p.pdf' is never PNG data under a PDF name."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    if suffix not in PLOT_FORMATS:
        raise UserError(f"--plot {quoted(str(path))}: a plot is written as "
                        f"{', '.join('.' + f for f in PLOT_FORMATS)}; '.{suffix[:20]}' is "
                        "none of them")
    return suffix


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError(MISSING_MATPLOTLIB) from None
    return Figure


def _series(results: Sequence[TrialResult], gpu: bool) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(label, style, points) for each memory figure the run has; labels name the memory."""
    figures = [("jax_peak_bytes_in_use", "allocator live peak (VRAM)", "-o"),
               ("process_peak_bytes", "process peak (VRAM: NVML / pool)", "-s"),
               ("host_peak_rss_bytes", "host peak RSS (host RAM" + (", not VRAM)" if gpu else ")"),
                ":^" if gpu else "-^")]
    out = []
    for attr, label, style in figures:
        points = []
        for r in results:
            if r.status is not Status.OK:
                continue
            value = getattr(r, attr)
            if value is not None:
                points.append((r.num_envs, value))
        if points:
            out.append((label, style, sorted(points)))
    return out


def _unit(max_bytes: float) -> tuple[str, float]:
    return ("GiB", 2**30) if max_bytes >= 2 * 2**30 else ("MiB", 2**20)


def plot_run(run: Run, rec: Recommendation, path: str | Path, *, budget_bytes: int | None,
             headroom_fraction: float) -> Path:
    """Write the sweep's plot to ``path`` in the format its suffix names (PNG without one);
    UserError if matplotlib is missing."""
    fmt = plot_format(path)
    fig = sweep_figure(run, rec, budget_bytes=budget_bytes, headroom_fraction=headroom_fraction)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=fmt)
    except OSError as exc:
        raise UserError(f"cannot write the plot to {path}: {exc.strerror or exc}") from None
    return path


def sweep_figure(run: Run, rec: Recommendation, *, budget_bytes: int | None,
                 headroom_fraction: float) -> Any:
    """The sweep as a ``matplotlib.figure.Figure``; UserError if matplotlib is missing."""
    figure = _figure_class()
    results = sorted(run.results, key=lambda r: r.num_envs)
    gpu = any_gpu(results)
    kind = memory_kind(gpu)
    series = _series(results, gpu)
    peaks = [v for _, _, pts in series for _, v in pts]
    peaks += [r.peak_bytes for r in results if r.peak_bytes is not None]
    if budget_bytes:
        peaks.append(budget_bytes)
    unit, scale = _unit(max(peaks, default=2**30))

    by_role = ledgers(results)
    ax_roles = None
    fig = figure(figsize=(9, 10 if by_role else 7.5), dpi=110)
    if by_role:  # a third panel: where each measured size's memory goes, stacked
        ax_mem, ax_speed, ax_roles = fig.subplots(3, 1, sharex=True,
                                                  gridspec_kw={"height_ratios": [3, 2, 2]})
        _stacked_roles(ax_roles, by_role, scale, unit, gpu)
    else:
        ax_mem, ax_speed = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    h = run.header
    budget_text = f"budget {both_units(budget_bytes)} {kind}" if budget_bytes else "no budget"
    fig.suptitle(f"{h.profile_name} on {h.device}\n{budget_text}, headroom {headroom_fraction:.0%}, "
                 f"objective {rec.objective}", fontsize=11,
                 parse_math=False)  # names from the file: a '$' is text, not mathtext

    for label, style, pts in series:
        ax_mem.plot([n for n, _ in pts], [v / scale for _, v in pts], style, label=label,
                    markersize=5)
    if budget_bytes:
        ax_mem.axhline(budget_bytes / scale, color="tab:red", linestyle="--", linewidth=1.2,
                       label=f"budget ({format_bytes(budget_bytes)})")
        if rec.limit_bytes is not None and headroom_fraction > 0:
            ax_mem.axhline(rec.limit_bytes / scale, color="tab:orange", linestyle=":",
                           linewidth=1.2, label=f"headroom limit ({headroom_fraction:.0%} "
                                                f"below budget)")

    failed = [r for r in results if r.status is not Status.OK]
    oom_labelled = other_labelled = False
    for r in failed:
        is_oom = r.status in FAILED_BY_MEMORY
        colour = "tab:red" if is_oom else "tab:gray"
        for ax in (ax_mem, ax_speed):
            ax.axvline(r.num_envs, color=colour, linestyle=":", linewidth=1, alpha=0.7)
        y = r.peak_bytes if r.peak_bytes is not None else budget_bytes
        if y is not None:
            label = None
            if is_oom and not oom_labelled:
                label, oom_labelled = "out of memory (its peak, else on the budget line)", True
            elif not is_oom and not other_labelled:
                label, other_labelled = "failed (timeout / crash / error)", True
            ax_mem.plot([r.num_envs], [y / scale], "X", color=colour, markersize=11, label=label)
        ax_speed.annotate(str(r.status).upper(), (r.num_envs, 0.5), xycoords=("data", "axes fraction"),
                          rotation=90, ha="right", va="center", color=colour, fontsize=9)

    # One rate per size, as the pick weighs it (its runs alone pooled, a disturbed run set
    # aside): a line through every run would zig-zag between a size's runs, and quote the
    # disturbed one as the size's. Each run is a faint dot; a set-aside run a grey cross.
    aside = {id(r) for r in (*(r for r, _ in rec.set_aside), *disturbed_runs(results))}
    ok = [r for r in results if r.status is Status.OK and r.steps_per_s is not None]
    kept = [r for r in ok if id(r) not in aside]
    speeds = weighed_speeds(rec, results)
    if kept:
        ax_speed.plot([r.num_envs for r in kept], [r.steps_per_s for r in kept], "o",
                      color="tab:green", alpha=0.35, markersize=4,
                      label="each run (its median, compile excluded)")
    if speeds:
        ns = sorted(speeds)
        ax_speed.plot(ns, [speeds[n] for n in ns], "-o", color="tab:green", markersize=5,
                      label="steps/s per size (its runs alone, pooled)")
        band = [_spread([r for r in kept if r.num_envs == n and r.purpose in RANKED
                         and not r.shared_run]) for n in ns]
        if all(b is not None for b in band):
            ax_speed.fill_between(ns, [b[0] for b in band if b], [b[1] for b in band if b],
                                  color="tab:green", alpha=0.15, label="min-max over intervals")
    set_aside = [r for r in ok if id(r) in aside]
    if set_aside:
        ax_speed.plot([r.num_envs for r in set_aside], [r.steps_per_s for r in set_aside], "x",
                      color="tab:gray", markersize=8, label="set aside: a disturbed run")

    c = rec.chosen
    if c is not None:
        for ax in (ax_mem, ax_speed):
            ax.axvline(c.num_envs, color="tab:blue", linewidth=6, alpha=0.12)
        if rec.peak_bytes is not None:  # its size's highest peak, as the summary quotes
            ax_mem.plot([c.num_envs], [rec.peak_bytes / scale], "*", color="tab:blue",
                        markersize=16, label=f"recommended: {c.num_envs} envs")
        rate = rec.steady_steps_per_s  # pooled over its runs, as the summary quotes
        if rate is not None:
            ax_speed.plot([c.num_envs], [rate], "*", color="tab:blue", markersize=16)
            ax_speed.annotate(f"recommended\n{c.num_envs} envs", (c.num_envs, rate),
                              textcoords="offset points", xytext=(0, -30), ha="center",
                              fontsize=9, color="tab:blue")
    elif rec.notice:
        ax_speed.text(0.5, 0.95, textwrap.fill(f"no recommendation: {rec.notice}", 90),
                      transform=ax_speed.transAxes, ha="center", va="top", fontsize=8,
                      color="tab:red", parse_math=False,
                      bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "none"})

    sizes = sorted({r.num_envs for r in results})
    ax_speed.set_xscale("log", base=2)
    if sizes:
        ax_speed.set_xticks(sizes)
        ax_speed.set_xticklabels([str(n) for n in sizes])
        ax_speed.set_xlim(sizes[0] / 1.4, sizes[-1] * 1.4)
    ax_speed.minorticks_off()
    ax_mem.minorticks_off()
    (ax_roles or ax_speed).set_xlabel("num_envs (log2 scale)")
    ax_mem.set_ylabel(f"peak memory ({unit})" if gpu else f"peak host RAM ({unit})")
    ax_speed.set_ylabel("steps/s")
    ax_mem.set_ylim(0, ax_mem.get_ylim()[1] * 1.08)
    ax_speed.set_ylim(0, max(ax_speed.get_ylim()[1], 1.0) * 1.12)  # room above the star
    ax_speed.yaxis.set_major_formatter(_thousands())
    for ax in (ax_mem, ax_speed):
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
    if not gpu:
        ax_mem.set_title("CPU backend: host RAM (peak RSS of the trial process), not VRAM",
                         fontsize=9, color="dimgray")
    fig.tight_layout()
    return fig


# The ledger's roles, grouped for a panel a person can read: (label, record fields)
_STACK = (("params, optimizer, normalizer", ("ledger_params_bytes", "ledger_optimizer_bytes",
                                             "ledger_normalizer_bytes")),
          ("env state", ("ledger_env_state_bytes",)),
          ("eval state, keys", ("ledger_eval_state_bytes", "ledger_keys_bytes")),
          # the epoch's and the evaluation's are never live together: the larger
          ("XLA temporaries (epoch or eval)", ("transient_bytes",)),
          ("unexplained", ("unexplained_bytes",)))


def _stacked_roles(ax: Any, sizes: Sequence[SizeLedger], scale: float, unit: str,
                   gpu: bool) -> None:
    """Each measured size's parts stacked up to its peak (the part no role explains on top,
    hatched): the panel of ``vramtune explain`` across sizes."""
    bottoms = [0.0] * len(sizes)
    xs = [s.num_envs for s in sizes]
    widths = [n * 0.35 for n in xs]  # a log2 axis: a bar as wide at every size
    for i, (label, fields) in enumerate(_STACK):
        heights = []
        for row in sizes:
            figures = row.figures()
            values = [figures.get(f) for f in fields]
            heights.append(sum(v for v in values if v is not None and v > 0) / scale)
        ax.bar(xs, heights, widths, bottom=bottoms, label=label, color=f"C{i}",
               hatch="//" if label == "unexplained" else None, alpha=0.8)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel(f"by role ({unit})")
    ax.set_title("where the memory goes (vramtune explain): " + (
        "pool, per device" if gpu else "data segment, host RAM"), fontsize=9, color="dimgray")
    ax.grid(True, alpha=0.3)
    ax.set_ylim(0, max(bottoms, default=1.0) * 1.45)  # room for the legend above the bars
    ax.legend(loc="upper center", ncol=3, fontsize=7, framealpha=0.85)


def _spread(runs: Sequence[TrialResult]) -> tuple[float, float] | None:
    """The slowest and fastest interval over a size's runs; None where one is unknown."""
    lows = [r.steps_per_s_min for r in runs]
    highs = [r.steps_per_s_max for r in runs]
    if not runs or any(v is None for v in lows + highs):
        return None
    return min(v for v in lows if v is not None), max(v for v in highs if v is not None)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: f"{v:,.0f}")
