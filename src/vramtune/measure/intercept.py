"""Wrap what ``jax.pmap`` / ``jax.jit`` return for the functions brax names, in a child process.

brax looks ``jax.pmap`` and ``jax.jit`` up on the module when it trains (ppo/train.py,
acting.py), so replacing them there reaches its calls. Every other function gets jax's own
result, untouched; so does every form of the call: ``jax.jit(f, ...)`` and the decorator
factory ``jax.jit(static_argnums=...)(f)`` alike.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

# (the function's name, what jax returned for it) -> what brax gets instead
Wrap = Callable[[str, Any], Any]


def wrap_named(jax: Any, names: Collection[str], wrap: Wrap) -> None:
    """Replace ``jax.pmap`` and ``jax.jit`` with versions that hand ``wrap`` the staged
    function of each function named in ``names``."""
    for attr in ("pmap", "jit"):
        original = getattr(jax, attr)

        def wrapped(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if not args or not callable(args[0]):  # the decorator factory: fun comes later
                return lambda fun: wrapped(fun, *args, **kwargs)
            fun = args[0]
            staged = _original(*args, **kwargs)
            name = getattr(fun, "__name__", None)
            return wrap(name, staged) if name in names else staged

        setattr(jax, attr, wrapped)
