"""Micro-check (no training): what else CompiledMemoryStats carries (jaxlib 0.9.2, CPU)."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp


def f(w, x):
    def loss(w):
        h = jnp.tanh(x @ w)
        return (h @ w).sum()
    return jax.grad(loss)(w)

c = jax.jit(f).lower(jnp.ones((256, 256)), jnp.ones((1024, 256))).compile()
m = c.memory_analysis()
print(type(m), [k for k in dir(m) if not k.startswith("_")])
for k in dir(m):
    if not k.startswith("_"):
        v = getattr(m, k)
        print(k, type(v).__name__, (len(v) if isinstance(v, (bytes, str)) else v))
