"""Micro-check (no training): does reading addressable_shards add live arrays that alias the
same buffer, and does brax's _strip_weak_type (jnp.astype to the same dtype) copy?"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp

x = jax.device_put(jnp.ones((1, 256, 256)))
n0 = len(jax.live_arrays())
ptr = x.unsafe_buffer_pointer()
s = x.addressable_shards[0].data
live = jax.live_arrays()
same = [a for a in live if not a.is_deleted() and a.unsafe_buffer_pointer() == ptr]
print(f"live before addressable_shards {n0}, after {len(live)}; arrays on x's buffer: {len(same)}"
      f" (x itself: {any(a is x for a in same)}, shard data is x: {s is x})")
sq = s.squeeze(0)
print("squeeze(0) of shard shares buffer:", sq.unsafe_buffer_pointer() == ptr)
y = jnp.astype(jnp.asarray(x), x.dtype)
print("jnp.astype same dtype returns same object:", y is x, "; same buffer:",
      y.unsafe_buffer_pointer() == ptr)
z = jax.device_put(jnp.zeros((3,), jnp.float32))
print("astype of a committed, non-weak f32:", jnp.astype(z, z.dtype) is z)
