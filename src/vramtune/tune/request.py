"""A sweep as asked for (``SweepRequest``), reconciled with a resumed run, resolved to a config.

Every sweep option is checked once, here, when the request is made: the CLI, the Python API
and a resumed run all go through the same checks. ``reconcile`` (a resumed run's header wins,
a flag that contradicts it is an error) and ``resolve`` (defaults, cross-option checks) are
pure: they touch no file and start nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Unpack

from vramtune.errors import UserError, quoted
from vramtune.inputs import (
    MAX_REFINE,
    MAX_TRAINING_STEPS,
    as_cap,
    as_choice,
    as_devices,
    as_fraction,
    as_objective,
    as_parallel,
    check_int,
    check_num_envs,
    check_text,
    check_timeout,
)
from vramtune.machine import compile_cache_dir
from vramtune.records import Objective
from vramtune.results.settings import CacheMode, ExecutorKind, SearchMethod, SweepSettings
from vramtune.results.store import RunHeader, run_directory
from vramtune.tune.options import SweepOptions, request_fields
from vramtune.tune.planner import SearchSpace, keeps_base_unrolls
from vramtune.units import budget_label, headroom_limit_bytes
from vramtune.workload.pickled import (
    profile_from_user,
    require_factory,
    with_saved_factory,
)
from vramtune.workload.profile import Profile, load_profile, profile_from_dict

DEFAULT_REFINE = 3
DEFAULT_HEADROOM_FRACTION = 0.10
DEFAULT_SPEED_MARGIN_FRACTION = 0.02
DEFAULT_SPEED_REMEASURE = 3  # when two sizes' speeds stay unresolved, A B / B A pairs at most


@dataclass(frozen=True)
class SweepRequest:
    """What a user asks of a sweep, parsed (bytes, fractions, enums) and checked on creation.
    None = the default: the profile's, or on resume the run's own."""

    profile: str | Path | Profile | None = None
    budget_bytes: int | None = None
    headroom_fraction: float | None = None
    start: int | None = None
    max_envs: int | None = None
    refine: int | None = None
    objective: Objective | None = None
    out: Path | None = None
    resume: Path | None = None
    timeout_s: float | None = None
    cache: bool | None = None  # None: on, but not on CPU under a cap (measure.trial); True: on
    standby: bool = True
    confirm: bool | None = None  # None: on, or on resume what the run had
    confirm_steps: int | None = None
    devices: int | None = None  # None: 1, or a resumed run's
    search: SearchMethod | None = None  # default predictive; on resume the run's own
    parallel: int | str | None = None  # trials at once (local executor), 'auto'; None: 1,
    #                                   or on resume the run's own
    executor: str | None = None  # "local" or "ray"; None: local, or on resume the run's own
    ray_address: str | None = None  # None: a Ray cluster of the sweep's own on this machine
    gpu_type: str | None = None  # Ray accelerator type (A100, H100, ...) the trials run on
    gpu_types: tuple[str, ...] | None = None  # a mixed cluster: one sweep per type
    # two sizes' steps/s closer than this fraction count as the same speed; None: 2%, or on
    # resume the run's own
    speed_margin_fraction: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.profile, str) and not self.profile.strip():
            raise UserError("--profile is empty: name a built-in profile or a YAML file, or "
                            "leave the option out")
        as_cap(self.budget_bytes)
        as_fraction(self.headroom_fraction)
        check_num_envs(self.start, "--start")
        check_num_envs(self.max_envs, "--max-envs")
        check_int(self.refine, "--refine", 0, MAX_REFINE)
        check_timeout(self.timeout_s)
        check_int(self.confirm_steps, "--confirm-steps", 1, MAX_TRAINING_STEPS)
        as_devices(self.devices)
        for name, value in (("cache", self.cache), ("confirm", self.confirm),
                            ("standby", self.standby)):  # parse() reads words; here, typed
            if not isinstance(value, bool) and (value is not None or name == "standby"):
                raise UserError(f"--{name} is True or False, got {quoted(value)}")
        check_text(self.ray_address, "--ray-address")
        check_text(self.gpu_type, "--gpu-types")
        object.__setattr__(self, "parallel", as_parallel(self.parallel))  # 'AUTO' -> 'auto'
        # a request made directly with words ('bisect', 'knee') holds the enums parse() makes:
        # the rules compare them by identity
        object.__setattr__(self, "search", as_choice(self.search, SearchMethod, "search"))
        object.__setattr__(self, "objective", as_objective(self.objective))
        if self.executor is not None and self.executor not in tuple(ExecutorKind):
            raise UserError(f"unknown executor {self.executor!r}: expected one of "
                            f"{', '.join(ExecutorKind)}")
        margin = self.speed_margin_fraction
        if margin is not None and (isinstance(margin, bool) or not isinstance(margin, int | float)
                or not math.isfinite(margin) or not 0 <= margin < 1):
            raise UserError(f"--speed-margin must be at least 0% and below 100%, got {quoted(margin)}")

    @classmethod
    def parse(cls, profile: str | Path | Profile | Mapping[str, Any] | Callable[[], Any] | None = None,
              **options: Unpack[SweepOptions]) -> SweepRequest:
        """The request from what a person types (``gpu_mem="8GB"``, ``headroom="10%"``,
        ``speed_margin="2%"``) or the plain numbers (bytes, fractions): the options are
        ``SweepOptions``. A profile may be a dict, whose ``env`` may be a callable defined in
        the calling notebook or script."""
        if isinstance(profile, Mapping) or _is_factory(profile):
            profile = profile_from_user(profile)
        fields = request_fields(dict(options))
        # Flags the user gave that contradict each other are refused, not one silently
        # dropped (here, not in __post_init__: a resume fills confirm_steps from its header)
        if fields.get("confirm") is False and fields.get("confirm_steps") is not None:
            raise UserError("--confirm-steps sets the confirming run's length and --no-confirm "
                            "runs none: drop one of them")
        if fields.get("resume") is not None and fields.get("out") is not None:
            raise UserError(f"--resume continues {fields['resume']} in its own folder and --out "
                            f"names a new one: drop --out (or --resume, for a new sweep)")
        return cls(profile=profile, **fields)

    def check_mixed(self) -> None:
        """A sweep per accelerator type runs on Ray, each type's trials as many at once as
        the cluster has: refuse what contradicts that."""
        if self.executor not in (None, "ray"):
            raise UserError("--gpu-types needs --executor ray")
        if self.parallel not in (None, 1):
            raise UserError("--parallel is for the local executor: on Ray as many trials run "
                            "at once as the cluster has GPUs (or CPUs)")


def as_profile(profile: str | Path | Profile | Mapping[str, Any] | Callable[[], Any] | None) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, Mapping) or _is_factory(profile):
        return profile_from_user(profile)
    if profile is None:
        return load_profile("quick")
    if not isinstance(profile, str | Path):
        raise UserError(f"a profile is a built-in name, a YAML file, a Profile, a dict or an "
                        f"env factory, got {quoted(profile)}")
    return load_profile(profile)


def _is_factory(profile: Any) -> bool:
    """A bare env factory (``vramtune.sweep(make_env)``: a function, a class, a partial),
    not a name, path or profile, and none of Python's own builtins (``print``, ``int``)."""
    return (callable(profile) and not isinstance(profile, str | Path | Profile | Mapping)
            and getattr(profile, "__module__", None) != "builtins")


def reconcile(request: SweepRequest, header: RunHeader) -> SweepRequest:
    """The request a resume runs: the run's own profile, budget, headroom and search settings
    where the request leaves them open; a flag that contradicts the run is an error rather than
    a silently different sweep."""
    r, where, ran = request, request.resume, header.search
    if r.profile is not None and as_profile(r.profile).hash != header.profile_hash:
        raise UserError(f"--profile {r.profile} differs from the profile {where} was "
                        f"measured with ({header.profile_name}); start a new sweep instead")
    if r.budget_bytes is not None and r.budget_bytes != header.budget_bytes:
        raise UserError(f"--gpu-mem differs from the budget {where} was measured with "
                        f"({budget_label(header.budget_bytes)}); start a new sweep instead")
    if r.headroom_fraction is not None \
            and abs(r.headroom_fraction - header.headroom_fraction) > 1e-9:
        # Its trials ran under budget x (1 - its headroom): another headroom is another
        # cap, and trials measured under the old one prove nothing about the new.
        raise UserError(f"--headroom differs from the {header.headroom_fraction:.0%} "
                        f"{where} was measured with; start a new sweep instead "
                        f"(`vramtune report --headroom` re-chooses without new trials)")
    # The compile cache moves CPU peaks by 130-190 MiB: one run keeps one mode.
    if r.cache is not None and r.cache != ran.cache.asked:
        raise UserError(f"--{'no-' if r.cache is False else ''}cache differs from the "
                        f"compile-cache mode {where} was measured with ({ran.cache}); start "
                        f"a new sweep instead")
    if r.devices is not None and r.devices != ran.devices:
        raise UserError(f"--devices {r.devices} differs from the {ran.devices} device(s) {where} "
                        f"was measured on; start a new sweep instead")
    if r.gpu_type is not None and ran.gpu_type not in (None, r.gpu_type):
        raise UserError(f"--gpu-types {r.gpu_type} differs from the accelerator type {where} "
                        f"was measured on ({ran.gpu_type}); start a new sweep instead")
    executor, address, gpu_type = r.executor, r.ray_address, r.gpu_type
    if executor is None:  # the executor the run was measured with, unless told otherwise
        executor = str(ran.executor)
        if ran.executor is ExecutorKind.RAY:
            address = address if address is not None else ran.ray_address
            gpu_type = gpu_type if gpu_type is not None else ran.gpu_type
    parallel = r.parallel
    if parallel is None and executor != "ray":  # what the run asked for: auto plans again
        parallel = ran.parallel if ran.parallel_asked is None else ran.parallel_asked
    # The margin decides the pick, not what a trial measures: a resume may set another, and
    # one left open is the run's own (its re-measured pairs were asked for under it).
    margin = ran.speed_margin if r.speed_margin_fraction is None else r.speed_margin_fraction
    given = r.profile if isinstance(r.profile, Profile) else None
    saved = with_saved_factory(profile_from_dict(header.profile, source=str(where)),
                               run_directory(where), given)
    return replace(
        r, profile=saved,
        budget_bytes=header.budget_bytes,
        headroom_fraction=(header.headroom_fraction if r.headroom_fraction is None
                           else r.headroom_fraction),
        start=r.start or ran.start, max_envs=r.max_envs or ran.max_envs,
        refine=ran.refine if r.refine is None else r.refine,
        objective=r.objective or ran.objective,
        confirm=ran.confirm if r.confirm is None else r.confirm,
        confirm_steps=ran.confirm_steps if r.confirm_steps is None else r.confirm_steps,
        cache=ran.cache.asked, devices=ran.devices, search=r.search or ran.search,
        executor=executor, ray_address=address, gpu_type=gpu_type, speed_margin_fraction=margin,
        parallel=parallel)


@dataclass(frozen=True)
class SweepConfig:
    """A resolved sweep: what it measures (the profile under a budget and headroom), how it
    searches (``settings``, what the run header records) and what bounds this session (the
    trial limit, standby, the re-measure allowance), every default applied."""

    profile: Profile
    budget_bytes: int | None
    headroom_fraction: float
    settings: SweepSettings
    timeout_s: float | None = None
    standby: bool = True
    speed_remeasure: int = DEFAULT_SPEED_REMEASURE  # interleaved re-measure pairs at most, per sweep

    @property
    def limit_bytes(self) -> int | None:
        return headroom_limit_bytes(self.budget_bytes, self.headroom_fraction)

    @property
    def compile_cache_dir(self) -> str | None:
        return compile_cache_dir(self.settings.cache.asked)

    @property
    def cache_under_cpu_cap(self) -> bool:
        """--cache given: the compile cache on a CPU under a cap too."""
        return self.settings.cache is CacheMode.ON

    @property
    def objective(self) -> Objective:
        return self.settings.objective or Objective.THROUGHPUT

    @property
    def speed_margin(self) -> float:
        margin = self.settings.speed_margin
        return DEFAULT_SPEED_MARGIN_FRACTION if margin is None else margin

    def space(self) -> SearchSpace:
        prof, s = self.profile, self.settings
        devices = s.devices
        refine = s.refine
        if refine is None and s.search is SearchMethod.BISECT:
            refine = DEFAULT_REFINE
        start = prof.first_size if s.start is None else s.start
        max_envs = prof.max_envs if s.max_envs is None else s.max_envs

        def shape_of(n: int) -> tuple[int, int, int] | None:
            shape = prof.shape_for(n, devices)
            return None if shape is None else (shape.batch_size, shape.num_minibatches,
                                               prof.unroll_length)

        return SearchSpace(start=start, max_envs=max_envs, refine=refine,
                           limit_bytes=self.limit_bytes,
                           is_valid=lambda n: prof.sweepable(n, devices), method=s.search,
                           shape_of=shape_of, candidate=keeps_base_unrolls(prof, devices),
                           sizes_between=lambda lo, hi: prof.sweepable_sizes(lo, hi, devices))


def resolve(request: SweepRequest, saved: RunHeader | None = None) -> SweepConfig:
    """The sweep a request runs: on resume (``saved``, the run's header) reconciled with the
    run first; then the defaults (the profile's start and maximum, 10% headroom, the
    predictive search, throughput, confirmation on) and the checks that need two options."""
    r = request if saved is None else reconcile(request, saved)
    prof = require_factory(as_profile(r.profile))
    method = SearchMethod.PREDICTIVE if r.search is None else r.search
    refine = r.refine
    if refine is None and method is SearchMethod.BISECT:
        refine = DEFAULT_REFINE
    start = prof.first_size if r.start is None else r.start
    max_envs = prof.max_envs if r.max_envs is None else r.max_envs
    check_num_envs(start, "--start")
    check_num_envs(max_envs, "--max-envs")
    if start > max_envs:
        raise UserError(f"--start {start} is above --max-envs {max_envs}")
    kind = ExecutorKind(r.executor or "local")
    if kind is not ExecutorKind.RAY and (r.ray_address is not None or r.gpu_type is not None):
        raise UserError("--ray-address and --gpu-types need --executor ray")
    parallel = 1 if r.parallel is None else r.parallel
    if kind is ExecutorKind.RAY and parallel != 1:
        raise UserError("--parallel is for the local executor: on Ray as many trials run at "
                        "once as the cluster has GPUs (or CPUs)")
    settings = SweepSettings(
        start=start, max_envs=max_envs, refine=refine,
        objective=Objective.THROUGHPUT if r.objective is None else r.objective,
        confirm=True if r.confirm is None else r.confirm, confirm_steps=r.confirm_steps,
        devices=1 if r.devices is None else r.devices, search=method, parallel=parallel,
        executor=kind, cache=CacheMode.of(r.cache),
        speed_margin=(DEFAULT_SPEED_MARGIN_FRACTION if r.speed_margin_fraction is None
                      else r.speed_margin_fraction),
        ray_address=r.ray_address, gpu_type=r.gpu_type)
    return SweepConfig(prof, r.budget_bytes,
                       (DEFAULT_HEADROOM_FRACTION if r.headroom_fraction is None
                        else r.headroom_fraction),
                       settings, timeout_s=r.timeout_s, standby=r.standby)
