"""The boundary, in one place: which runs fit under the line, which are past it and why,
which sizes are ruled out although their own run fitted, and the words for each; the
search's view of a record (``as_trial``) is built here too.

The sweep loop, the step-down, the recommender and the search's planner all ask these
questions; each predicate is defined once, here, on the records (``TrialResult``).
``search`` holds the same rule on its own, record-free view (``search.past_boundary``),
fed by ``as_trial``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from vramtune.records import BOUNDARY_FAILURES, Purpose, Status, TrialResult
from vramtune.tune import search
from vramtune.units import format_bytes

PROOF_RUNS = frozenset({Purpose.REPEAT, Purpose.CONFIRM})


def past_boundary(result: TrialResult, limit_bytes: int | None) -> bool:
    """Ran out of memory, crashed or timed out, or peaked over the headroom line."""
    if result.status in BOUNDARY_FAILURES:
        return True
    return (result.status is Status.OK and limit_bytes is not None
            and under_line(result, limit_bytes) is False)


def under_line(result: TrialResult, limit_bytes: int) -> bool | None:
    """Did this trial stay under ``limit_bytes``? True if it ran under a cap no larger (ok then
    proves it), else compare the figure the cap counts (data segment / pool; RSS on CPU
    runs below what RLIMIT_DATA counts, so comparing RSS with a smaller line proved nothing),
    else the peak, for records that predate both. None: not measured."""
    if result.cap_bytes is not None and result.cap_bytes <= limit_bytes:
        peak = result.peak_bytes  # on GPU an NVML figure can still exceed it: outside the pool
        return peak is None or peak <= limit_bytes or not result.is_gpu
    figure = result.line_figure_bytes
    return None if figure is None else figure <= limit_bytes


def fits(result: TrialResult, limit_bytes: int | None) -> bool:
    """An ok trial with throughput whose memory is proven under the line (``under_line``).
    A run that shared the device proved its memory, not its speed: no candidate until the
    size has run alone."""
    if result.status is not Status.OK or result.steps_per_s is None or result.shared_run:
        return False
    return limit_bytes is None or under_line(result, limit_bytes) is True


def over_failed_proof(results: Iterable[TrialResult], limit_bytes: int | None) -> dict[int, int]:
    """Sizes whose own run (search trial or run alone) peaked above the cap of a proof run
    that ran out of memory held below the line (``proof.proof_cap_bytes``: a CPU's proofs
    keep room for another run's jitter), with that cap. A proof of them would be a longer run
    of a size whose short run already went past such a cap: it is not spent, and the size
    does not fit. The largest such cap counts (rooms differ by size); a size with a proof run
    of its own is judged by it."""
    rows = list(results)
    caps = [r.cap_bytes for r in rows if r.purpose in PROOF_RUNS and r.status is Status.OOM
            and r.cap_bytes is not None and limit_bytes is not None
            and r.cap_bytes < limit_bytes and not r.is_gpu]
    if not caps:
        return {}
    cap = max(caps)
    proven = {r.num_envs for r in rows if r.purpose in PROOF_RUNS}
    over: dict[int, int] = {}
    for r in rows:
        figure = r.cap_figure_bytes
        if (r.purpose not in PROOF_RUNS and r.status is Status.OK and not r.is_gpu
                and figure is not None and figure > cap and r.num_envs not in proven):
            over[r.num_envs] = cap
    return over


def short_of_room(results: Iterable[TrialResult], limit_bytes: int | None) -> dict[int, int]:
    """Sizes that fitted their search trial on a CPU with less room under the line than the
    search keeps for another run's jitter (``search.short_of_room``: what a proof keeps),
    with that line. Not ranked: a size that peaked above its proof's cap passes a second
    draw there about half the time, and the user's run is a third. A size with a proof run of
    its own is judged by it, and one below a proven size fits as it does (memory grows with
    num_envs; a very jittery workload's small sizes can peak within its wide room of the
    line). A GPU's figures do not jitter so."""
    rows = list(results)
    if limit_bytes is None or any(r.is_gpu for r in rows):
        return {}
    judged = {r.num_envs for r in rows if r.purpose in PROOF_RUNS}
    top = max((r.num_envs for r in rows if r.purpose in PROOF_RUNS and r.status is Status.OK
               and under_line(r, limit_bytes) is True), default=0)
    trials, space = _jitter_space(rows, limit_bytes)
    return {n: int(line) for n, line in search.short_of_room(trials, space).items()
            if n not in judged and n > top}


def ruled_out(results: Iterable[TrialResult], limit_bytes: int | None) -> dict[int, int]:
    """Sizes past the boundary although their own run fitted under the line, with the cap
    that rules them out: a failed proof's (``over_failed_proof``) or the search's line
    (``short_of_room``)."""
    rows = list(results)
    return {**short_of_room(rows, limit_bytes), **over_failed_proof(rows, limit_bytes)}


def boundary_edge(results: Iterable[TrialResult], limit_bytes: int | None,
                  over: Mapping[int, int] | None = None) -> int | None:
    """The smallest size past the boundary: one with a run past it (``past_boundary``), or one
    whose search trial already peaked above the cap a proof run failed under
    (``over_failed_proof``) or left less room under the line than the search keeps
    (``short_of_room``): ``ruled_out``, or ``over`` when the caller has it. None: nothing
    failed."""
    rows = list(results)
    if over is None:
        over = ruled_out(rows, limit_bytes)
    return min([*(r.num_envs for r in rows if past_boundary(r, limit_bytes)), *over], default=None)


def proof_room_bytes(results: Iterable[TrialResult], limit_bytes: int, num_envs: int) -> int:
    """How far below ``limit_bytes`` a proof run of ``num_envs`` would be held, from the
    records' search trials (``search.proof_room_bytes``, as the sweep holds its proofs); 0
    on a GPU's figures, which do not jitter, or where nothing says how much."""
    return proof_rooms_bytes(results, limit_bytes, (num_envs,))[num_envs]


def proof_rooms_bytes(results: Iterable[TrialResult], limit_bytes: int,
                      sizes: Iterable[int]) -> dict[int, int]:
    """``proof_room_bytes`` of each size, from one fit of the records' jitter model."""
    rows, sizes = list(results), tuple(sizes)
    if any(r.is_gpu for r in rows):
        return dict.fromkeys(sizes, 0)
    rooms = search.proof_rooms_bytes(*_jitter_space(rows, limit_bytes), sizes)
    return {n: 0 if room is None or not room > 0 else min(int(room), limit_bytes // 2)
            for n, room in rooms.items()}


def _jitter_space(rows: Sequence[TrialResult],
                  limit_bytes: int) -> tuple[list[search.Trial], search.Space]:
    """The search's view of the records' ok search trials, and a space at ``limit_bytes``
    that resolves their jitter: what ``short_of_room`` and ``proof_room_bytes`` read."""
    trials = []
    shapes: dict[int, tuple[int, int, int]] = {}  # the model may need them (a rollout term)
    for r in rows:
        figure = r.cap_figure_bytes
        if r.purpose is Purpose.SEARCH and r.status is Status.OK and figure is not None:
            shape = (r.batch_size, r.num_minibatches, r.unroll_length)
            if None not in shape:
                shapes[r.num_envs] = shape  # type: ignore[assignment]
            trials.append(search.Trial(r.num_envs, r.status, float(figure),
                                       shape if None not in shape else None))  # type: ignore[arg-type]
    space = search.Space((), float(limit_bytes), resolve_sd=search.RESOLVE_SD,
                         shape_of=shapes.get)
    return trials, space


def model_figure_bytes(result: TrialResult) -> int | None:
    """The peak the least-squares memory model fits (``tune.model``: budgets' predictions,
    replay curves): the figure that runs out of the cap. CPU: the data segment RLIMIT_DATA
    counts; GPU: the allocator's live peak (the pool grows in whole regions, so it is not
    smooth in num_envs). The search on a GPU fits the pool itself, as a pool (``uses_pool``,
    ``tune.pool``)."""
    if result.is_gpu:
        figure = result.jax_peak_bytes_in_use
    else:
        figure = result.host_peak_data_bytes
    return figure if figure is not None else result.peak_bytes


def uses_pool(results: Sequence[TrialResult]) -> bool:
    """The search fits the allocator's pool, the figure that decides an OOM on a GPU: a GPU
    run whose every ok trial reported its pool (the BFC allocator's statistics)."""
    gpu = [r for r in results if r.is_gpu]
    return bool(gpu) and all(r.jax_peak_pool_bytes is not None
                             for r in gpu if r.status is Status.OK)


def as_trial(result: TrialResult, limit_bytes: int | None, pool: bool = False, *,
             ruled_out: bool = False, past_why: str | None = None) -> search.Trial:
    """The search's view of a record; ``pool`` (``uses_pool``): the figure is the allocator's
    pool, with the live peak beside it; ``ruled_out``: the size is past the boundary by a
    failed proof's cap or short of room (``ruled_out``), a failure to the
    search."""
    shape = (result.batch_size, result.num_minibatches, result.unroll_length)
    # the recommender's rule (an ok trial under a cap no larger than the line proved it)
    over = result.status is Status.OK and (past_boundary(result, limit_bytes) or ruled_out)
    figure = model_figure_bytes(result)
    live = None
    if pool and result.jax_peak_pool_bytes is not None:
        figure, live = result.jax_peak_pool_bytes, result.jax_peak_bytes_in_use
    if result.status is not Status.OK:
        figure = None
    proof = result.purpose is not Purpose.SEARCH
    room = 0.0  # a proof run held below the line (search.proof_room_bytes)
    if proof and limit_bytes is not None and result.cap_bytes is not None:
        room = float(max(0, limit_bytes - result.cap_bytes))
    return search.Trial(result.num_envs, result.status,
                        float(figure) if figure is not None else None,
                        shape if None not in shape else None, over,  # type: ignore[arg-type]
                        proof=proof, live_bytes=float(live) if live is not None else None,
                        room_bytes=room, past_why=past_why)


def past_labels(results: Sequence[TrialResult], over: Mapping[int, int],
                limit_bytes: int | None) -> dict[int, str]:
    """Why each size past the boundary whose every run fitted is past it, in a few words: its
    run peaked above the cap a larger size's proof ran out of memory under, or its trial left
    less room than the search keeps (``over``: ``ruled_out``), or it finished over
    the line. Sizes with a failed run are not listed: they fail."""
    failed = {r.num_envs for r in results if r.status is not Status.OK}
    after_proof = over_failed_proof(results, limit_bytes)
    labels: dict[int, str] = {}
    for r in results:
        n = r.num_envs
        if n in failed or n in labels:
            continue
        if n in after_proof:
            labels[n] = "past a failed proof"
        elif n in over:
            labels[n] = "short of room"
        elif past_boundary(r, limit_bytes):
            labels[n] = "over the line"
    return labels


def failure_words(r: TrialResult, limit_bytes: int | None = None,
                  over: Mapping[int, int] | None = None) -> str:
    """What a run past the boundary ran into, in words ('out of memory'); for a run that
    ended ok, why it is past anyway (``over``: ``ruled_out``, else over the line)."""
    if r.status is Status.OK:
        cap = (over or {}).get(r.num_envs)
        if cap is not None:
            return (f"its peak is over {format_bytes(cap)}, the cap a proof run failed under "
                    f"or the line the search keeps below the limit for one run's jitter")
        return "its peak is over budget minus headroom"
    if r.status is Status.CRASH and r.error_type:
        return f"crashed ({r.error_type})"
    return {Status.OOM: "out of memory", Status.TIMEOUT: "timed out", Status.CRASH: "crashed",
            Status.INVALID: "invalid batch settings", Status.ERROR: "error",
            Status.OVERFLOW: "MJX-Warp buffer overflow"}.get(r.status,
                                                                                str(r.status))
