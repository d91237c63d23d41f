"""Hypothesis strategies for hostile file contents, and the property every reader must keep:
a result or ONE UserError (one line), within a time bound, never another exception."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from vramtune.errors import UserError

# Per-call bound: every loader works on bounded input; a second is generous on a loaded
# 2-core machine, and far below the hangs these tests exist to catch.
TIME_BOUND_S = 2.0

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 3, 2**24, 2**24 + 1, 10**9 + 7, 10**12, 2**61, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1.5, 1e12, 1e300, -0.0, 0.5]),
    st.text(max_size=20),
    st.sampled_from(["abc", "64", "1e400", "", " ", "evil[/]name[bold red]", "../../x",
                     "x\ninjected: 1", "\x00", "${a.b}", "NaN"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["name", "kind", "num_envs"])),
                    inner, max_size=4)), max_leaves=12)


def paths_of(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in nested dicts/lists (the places a mutation can hit)."""
    found = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += paths_of(value, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any, count: int = 3) -> Any:
    """``base`` with up to ``count`` values replaced, keys removed or keys added."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, count))):
        paths = paths_of(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        node = data
        for part in path[:-1]:
            node = node[part]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if action == "delete" and isinstance(node, dict):
            node.pop(path[-1], None)
        elif action == "add" and isinstance(node, dict):
            node[draw(st.text(max_size=8))] = draw(values)
        else:
            node[path[-1]] = draw(values)
    return data


def result_or_user_error(call: Callable[[], Any]) -> Any:
    """Run ``call``: it returns, or raises one single-line UserError, in TIME_BOUND_S."""
    started = time.perf_counter()
    try:
        return call()
    except UserError as exc:
        message = str(exc)
        assert message and "\n" not in message, repr(message)
        assert "Traceback" not in message
        return exc
    finally:
        elapsed = time.perf_counter() - started
        assert elapsed < TIME_BOUND_S, f"took {elapsed:.2f} s"
