"""Child side: MJX-Warp's contact and constraint demand, and its kernel builds.

MJX's Warp implementation sizes its contact and constraint buffers up front: ``naconmax``
contacts for all worlds together, ``njmax`` constraint rows per world (``mjx.make_data``).
Warp's ``Data`` counts what each step asked for even past those capacities, and ORs a bit
per overflow into a sticky per-world mask (mujoco_warp ``_src/forward.py``,
``_next_time``: ``nefc > njmax`` sets ``NEFC``, ``nacon > naconmax`` sets ``NARROWPHASE``,
``ncollision > naconmax`` ``BROADPHASE``; ``_src/types.py``: ``OverflowType``, ``nacon``
"(1,) across all worlds", ``nefc`` "(nworld,)", ``overflow`` "(nworld,)"). Under
``jax.vmap`` MJX keeps ``nacon`` and the contact arrays unbatched (``DATA_NON_VMAP`` in
``mujoco/mjx/warp/types.py``): one count for the batch, each contact tagged with its world
(``contact__worldid``).

The probe steps the environment itself at the trial's num_envs (reset, then uniform random
actions in Playground's [-1, 1] action box) and keeps, over every step, the largest total
and per-world contact counts and constraint rows, and the OR of the overflow masks: random
actions reach contacts a barely trained policy also reaches, and the margin the sweep adds
covers what a trained policy adds (the spread is recorded). Measuring it inside the training
run would change the user's program; this is the environment alone, as the user's run steps
it, at the same capacities.

Solver-iteration limits (``ITERATIONS``, ``LS_ITERATIONS``) are not capacities: a step that
hits them is still a step (Playground's dm_control configs set one solver iteration, and
every step prints that warning); they are recorded apart and never make an overflow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# Steps the probe takes when the profile does not say (measure.contact_steps): an episode,
# at most this many (a GPU steps thousands of worlds this far in seconds).
CONTACT_STEPS_MAX = 1000
# Overflow bits that are not a buffer's capacity: the step ran, with fewer iterations.
SOLVER_LIMITS = frozenset({"ITERATIONS", "LS_ITERATIONS"})
# What a user raises for each capacity overflow (mujoco_warp's own messages name the same).
RAISE = {"NEFC": "njmax", "NJMAX_NNZ": "njmax_nnz", "BROADPHASE": "naconmax",
         "NARROWPHASE": "naconmax", "CCD": "naccdmax", "NVMAX": "nvmax"}


def overflow_words(overflow: list[str], *, naconmax: int | None, njmax: int | None,
                   contacts: int | None, contacts_per_world: int | None,
                   rows_per_world: int | None) -> str:
    """One line naming each overflowed buffer, the demand seen and what to raise."""
    parts = []
    phases = [n.lower() for n in overflow if n in ("BROADPHASE", "NARROWPHASE")]
    for name in overflow:
        if name == "NEFC":
            parts.append(f"constraint rows: {rows_per_world} per world asked for, njmax {njmax}")
        elif name.lower() == (phases[0] if phases else None):  # one line for both phases
            parts.append(f"contacts ({', '.join(phases)}): {contacts} for all worlds "
                         f"({contacts_per_world} in one world) asked for, naconmax {naconmax}")
        elif name.lower() not in phases:
            parts.append(f"{name.lower()} overflow")
    raise_keys = sorted({RAISE[n] for n in overflow if n in RAISE})
    hint = f"; raise {' and '.join(raise_keys)}" if raise_keys else ""
    return "MJX-Warp buffer overflow: " + "; ".join(parts) + hint


@dataclass
class KernelBuilds:
    """Warp modules this process built (cold) or loaded from the kernel cache (warm)."""

    compiled: int = 0
    cached: int = 0
    build_s: float = 0.0

    def fields(self) -> dict[str, Any]:
        """The record's kernel fields; all None where no module load was seen."""
        if not self.compiled and not self.cached:
            return {"warp_kernel_cache": None, "warp_kernels_compiled": None,
                    "warp_kernels_cached": None, "warp_kernel_build_s": None}
        cache = "cold" if not self.cached else "warm" if not self.compiled else "partly warm"
        return {"warp_kernel_cache": cache, "warp_kernels_compiled": self.compiled,
                "warp_kernels_cached": self.cached, "warp_kernel_build_s": self.build_s}


def watch_kernel_builds() -> KernelBuilds | None:
    """Count and time Warp's module builds from here on (None: no Warp, or a Warp whose
    ``Module._compile`` moved). ``_compile`` returns whether it built the module or found
    it in the kernel cache (warp ``_src/context.py``, ``Module.load``: "(compiled)" /
    "(cached)"); the time around it is the kernel build, apart from XLA's compile. The
    cache folder is Warp's own (``WARP_CACHE_PATH`` or the user cache), so the user's
    training after the sweep finds the same kernels."""
    try:
        from warp._src.context import Module
    except ImportError:
        return None
    original = getattr(Module, "_compile", None)
    if original is None or getattr(original, "_vramtune", False):
        return None
    builds = KernelBuilds()

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        compiled = original(self, *args, **kwargs)
        if compiled:
            builds.compiled += 1
        else:
            builds.cached += 1
        builds.build_s += time.perf_counter() - start
        return compiled

    timed._vramtune = True  # type: ignore[attr-defined]
    Module._compile = timed
    return builds


def mempool_high_bytes() -> int | None:
    """Warp's CUDA memory pool high-water mark on the trial's first device (GPU only).

    On a GPU MJX runs Warp's step as captured CUDA graphs (``mjx/_src/io.py``: GraphMode.WARP
    by default); the step's temporaries (collision context ~3 x naconmax, solver arrays
    nworld x njmax, Newton's nworld x nv^2) come from Warp's cudaMallocAsync pool, not XLA's,
    and the fraction does not cap them (mujoco_warp#926: a 5 GiB Warp pool beside a 2.7 GiB
    JAX peak). ``wp.get_mempool_used_mem_high`` (warp ``_src/context.py``, public since 1.x)
    reads that pool's high-water mark; the NVML process figure minus XLA's pool counts it
    too, with graph memory and the CUDA context. None where it cannot be read."""
    try:
        import warp as wp

        device = wp.get_device("cuda:0")
        if not device.is_cuda or not device.is_mempool_supported:
            return None
        return int(wp.get_mempool_used_mem_high(device))
    except Exception:  # noqa: BLE001 - unmeasured is None, never a failed trial
        return None


def warp_impl(env: Any) -> bool:
    """Whether this environment steps MJX's Warp implementation (Playground's ``MjxEnv``
    keeps the MJX model it put with ``impl``)."""
    model = getattr(env, "mjx_model", None)
    impl = getattr(model, "impl", None)
    return str(getattr(impl, "value", impl)).lower() == "warp"


def _overflow_names(mask: int) -> list[str]:
    from mujoco.mjx.third_party.mujoco_warp._src.types import OverflowType

    return [flag.name for flag in OverflowType
            if flag.name != "ALL" and flag.value and mask & flag.value == flag.value
            and bin(flag.value).count("1") == 1]


def probe_contacts(env: Any, num_envs: int, steps: int, seed: int = 0) -> dict[str, Any]:
    """Step ``num_envs`` worlds ``steps`` times; the record's ``warp_*`` demand fields."""
    import jax
    import jax.numpy as jnp

    reset = jax.jit(jax.vmap(env.reset))
    state = reset(jax.random.split(jax.random.PRNGKey(seed), num_envs))
    data = state.data._impl
    naconmax, njmax = int(data.naconmax), int(data.njmax)
    batched_step = jax.vmap(env.step)

    def demand(data: Any) -> tuple[jax.Array, ...]:
        nacon = data.nacon.reshape(-1)[0]
        live = jnp.arange(data.contact__worldid.shape[0]) < jnp.minimum(nacon, naconmax)
        per_world = jnp.zeros(num_envs, jnp.int32).at[data.contact__worldid].add(
            live.astype(jnp.int32), mode="drop")
        return (nacon, per_world.max(), data.nefc.max(), data.nefc.sum())

    def body(carry: Any, key: jax.Array) -> tuple[Any, None]:
        state, most, mask = carry
        actions = jax.random.uniform(key, (num_envs, env.action_size), minval=-1.0, maxval=1.0)
        state = batched_step(state, actions)
        data = state.data._impl
        most = tuple(jnp.maximum(m, d) for m, d in zip(most, demand(data), strict=True))
        mask = mask | jnp.bitwise_or.reduce(data.overflow.reshape(-1))
        return (state, most, mask), None

    @jax.jit
    def roll(state: Any, key: jax.Array) -> Any:
        start = (demand(state.data._impl), jnp.bitwise_or.reduce(state.data._impl.overflow.reshape(-1)))
        (_, most, mask), _ = jax.lax.scan(body, (state, *start), jax.random.split(key, steps))
        return most, mask

    started = time.perf_counter()
    most, mask = jax.device_get(roll(state, jax.random.PRNGKey(seed + 1)))
    names = _overflow_names(int(mask))
    contacts, per_world, rows_per_world, rows = (int(v) for v in most)
    return {
        "warp_naconmax": naconmax, "warp_njmax": njmax, "warp_probe_steps": steps,
        "warp_probe_s": time.perf_counter() - started,
        "warp_contacts_max": contacts, "warp_contacts_per_world_max": per_world,
        "warp_constraint_rows_max": rows, "warp_constraint_rows_per_world_max": rows_per_world,
        "warp_overflow": [n for n in names if n not in SOLVER_LIMITS],
        "warp_solver_limits": [n for n in names if n in SOLVER_LIMITS],
    }
