"""Every sweep option, declared once: its Python keyword and type, its command-line flag,
help and default, and how what a person typed becomes the request's field.

``SweepOptions`` is the keyword signature of ``vramtune.sweep``, ``vramtune.sweep_request``
and ``SweepRequest.parse`` (``**options: Unpack[SweepOptions]``: type checkers and editors
see each keyword and its type); the CLI builds ``vramtune sweep``'s flags from the same
declaration (``sweep_flags``), and the docs' option table is rendered from the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict, get_type_hints

from vramtune.errors import UserError, quoted
from vramtune.inputs import (
    BUDGET_HELP,
    CACHE_HELP,
    DEVICES_HELP,
    Percent,
    Size,
    as_cap,
    as_choice,
    as_flag,
    as_fraction,
    as_objective,
    as_parallel,
    as_path,
    check_text,
)
from vramtune.records import Objective
from vramtune.results.settings import ExecutorKind, SearchMethod


@dataclass(frozen=True)
class Flag:
    """How one option is typed on the command line and read into the request.

    ``cli``: the type the command line parses (the API may take more: '8GB' or bytes);
    ``field``: the request's field when it is named otherwise (``gpu_mem`` -> ``budget_bytes``);
    ``read``: what turns the value into that field (None: taken as it is, checked by the
    request itself)."""

    flag: str  # '--gpu-mem', '--confirm/--no-confirm' for an on/off pair; '': the API's only
    help: str
    cli: type
    default: Any = None
    field: str | None = None
    read: Callable[[Any], Any] | None = None


def as_margin(value: Percent, what: str = "--speed-margin") -> float | None:
    """A speed margin: a fraction in [0, 1) ('2%' or 0.02), finite; None stays None (the
    default, or on resume the run's own)."""
    return as_fraction(value, what)


def _types(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """--gpu-types: 'A100,H100' or a list; None: not a mixed-cluster sweep."""
    if value is None:
        return None
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
        items = list(value)
    else:
        raise UserError(f"--gpu-types is a list of accelerator types such as 'A100,H100', got "
                        f"{quoted(value)}")
    types = tuple(dict.fromkeys(t.strip() for t in items if t.strip()))
    for t in types:
        check_text(t, "--gpu-types", max_len=200)
    return types


class SweepOptions(TypedDict, total=False):
    """The options of a sweep (all optional: None is the default, the profile's, or on
    ``--resume`` the run's own)."""

    gpu_mem: Annotated[Size, Flag("--gpu-mem", BUDGET_HELP, str, field="budget_bytes",
                                  read=as_cap)]
    headroom: Annotated[Percent, Flag(
        "--headroom", "Keep peaks this far under the budget (default 10%).", str,
        field="headroom_fraction", read=as_fraction)]
    start: Annotated[int | None, Flag("--start", "First num_envs (default: the profile's).", int)]
    max_envs: Annotated[int | None, Flag(
        "--max-envs", "Largest num_envs to try (default: the profile's).", int)]
    refine: Annotated[int | None, Flag(
        "--refine", "Refinement trials: bisect, after the first failure (default 3); "
                    "predictive, after its first two sizes (default: until the edge is "
                    "bracketed).", int)]
    objective: Annotated[str | Objective | None, Flag(
        "--objective", "throughput: fastest (default); knee: smallest within 5% of the "
                       "fastest; max-envs: most envs.", Objective, read=as_objective)]
    out: Annotated[str | Path | None, Flag(
        "--out", "Run directory (default: a new folder in ./vramtune-runs/ named "
                 "<date>-<time>-<profile>).", str, read=lambda v: as_path(v, "--out"))]
    resume: Annotated[str | Path | None, Flag(
        "--resume", "Continue the sweep in this run directory; measured trials are not run "
                    "again.", str, read=lambda v: as_path(v, "--resume"))]
    timeout_s: Annotated[float | None, Flag("--timeout", "Per-trial time limit in seconds.",
                                            float)]
    cache: Annotated[bool | str | None, Flag("--cache/--no-cache", CACHE_HELP, bool,
                                             read=lambda v: as_flag(v, "--cache"))]
    standby: Annotated[bool | str, Flag(
        "--standby/--no-standby", "Start (and import) the next trial's process while the "
                                  "current one compiles.", bool, default=True,
        read=lambda v: as_flag(v, "--standby"))]
    confirm: Annotated[bool | str | None, Flag(
        "--confirm/--no-confirm", "Train the chosen config much longer (on a CPU, one run's "
                                  "jitter below the line) before recommending it (default; on "
                                  "--resume, what the run had); off: repeat the chosen size "
                                  "once instead.", bool, read=lambda v: as_flag(v, "--confirm"))]
    confirm_steps: Annotated[int | None, Flag(
        "--confirm-steps", "Training steps of the confirming run, exactly, rounded up to whole "
                           "epochs of 2+ steps (default: up to 10x the steps after which the "
                           "trial's memory was steady, at least 50, ending once memory has "
                           "held).", int)]
    devices: Annotated[int | None, Flag(
        "--devices", DEVICES_HELP + " Default 1, or a resumed run's.", int)]
    search: Annotated[str | SearchMethod | None, Flag(
        "--search", "predictive: aim at the boundary with a memory model fitted to the trials "
                    "so far (default); bisect: double, then bisect.", SearchMethod,
        read=lambda v: as_choice(v, SearchMethod, "search"))]
    parallel: Annotated[int | str | None, Flag(
        "--parallel", "Trials at once on this machine, when their caps fit the device "
                      "together; their steps/s are re-measured alone where the objective "
                      "compares them. auto: as many as the card's free memory holds, one per 4 "
                      "CPU cores at most (one at a time on CPU). Default 1, or a resumed "
                      "run's.", str, read=as_parallel)]
    executor: Annotated[str | ExecutorKind | None, Flag(
        "--executor", "local: trials on this machine (default); ray: trials as Ray tasks, one "
                      "GPU (or CPU) each, as many at once as the cluster has.", ExecutorKind,
        read=lambda v: None if v is None else str(v))]
    ray_address: Annotated[str | None, Flag(
        "--ray-address", "Ray cluster to run on: auto, or HOST:PORT of its head (default: "
                         "start one on this machine).", str)]
    gpu_type: Annotated[str | None, Flag(
        "", "The Ray accelerator type every trial runs on (A100, H100, ...): one sweep of a "
            "mixed cluster; the command line sweeps several with --gpu-types.", str)]
    gpu_types: Annotated[str | Sequence[str] | None, Flag(
        "--gpu-types", "Mixed cluster: one sweep per Ray accelerator type at once, e.g. "
                       "A100,H100; each its own run directory under --out.", str, read=_types)]
    speed_margin: Annotated[Percent, Flag(
        "--speed-margin", "Steps/s closer than this count as the same speed (default 2%; on "
                          "--resume the run's own).", str, field="speed_margin_fraction",
        read=as_margin)]


def sweep_flags() -> dict[str, Flag]:
    """Each option's keyword and its ``Flag``, in declaration order."""
    hints = get_type_hints(SweepOptions, include_extras=True)
    return {name: next(m for m in hint.__metadata__ if isinstance(m, Flag))
            for name, hint in hints.items()}


def request_fields(options: dict[str, Any]) -> dict[str, Any]:
    """The request's fields from the options given: each read as its ``Flag`` says; a
    keyword that is not an option is one line naming the valid ones."""
    flags = sweep_flags()
    unknown = sorted(k for k in options if k not in flags)
    if unknown:
        raise UserError(f"unknown sweep option {unknown[0]!r}; the options are "
                        f"{', '.join(flags)}")
    fields: dict[str, Any] = {}
    for name, value in options.items():
        flag = flags[name]
        fields[flag.field or name] = value if flag.read is None else flag.read(value)
    return fields
