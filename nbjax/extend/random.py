"""``nbjax.extend.random``: JAX's ``jax.extend.random``: PRNG implementations as values
(``threefry_prng_impl``, ``rbg_prng_impl``, ``unsafe_rbg_prng_impl``; ``define_prng_impl`` for
new ones, usable as ``random.key(seed, impl=...)``), seeding with an implementation
(``seed_with_impl``, ``random_seed``: key arrays of a seed array's shape), and the threefry2x32
hash (``threefry2x32_p``, ``threefry_2x32``).

Pipeline position: a library over ``nbjax.prng`` and ``nbjax.lax.prng``.
"""
from __future__ import annotations

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax import prng as _prng
from nbjax.lax.prng import threefry2x32_p, random_seed_p

__all__ = ["define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl",
           "threefry2x32_p", "threefry_2x32", "threefry_prng_impl", "unsafe_rbg_prng_impl"]

threefry_prng_impl = _prng.prngs["threefry2x32"]
rbg_prng_impl = _prng.prngs["rbg"]
unsafe_rbg_prng_impl = _prng.prngs["unsafe_rbg"]


def define_prng_impl(*, key_shape, seed, split, random_bits, fold_in, name="<unnamed>",
                     tag="?"):
  """A PRNG implementation from functions on one key's raw ``uint32[*key_shape]`` data: its
  ``PRNGSpec``, as JAX's."""
  return _prng.PRNGSpec(_prng.PRNGImpl(tuple(key_shape), seed, split, random_bits, fold_in,
                                       name, tag))


def random_seed(seeds, impl):
  """Key arrays (of ``seeds``' shape) seeded by the integers ``seeds`` with ``impl``."""
  s = jnp.asarray(np.int64(seeds) if isinstance(seeds, int) else seeds)
  return _prng.as_keys(impl, random_seed_p.bind(s, impl=impl))


def seed_with_impl(impl, seed):
  """A key array seeded by ``seed`` with the implementation ``impl``."""
  return random_seed(seed, impl)


def threefry_2x32(keypair, count):
  """The threefry2x32 hash of the ``uint32`` array ``count`` under ``keypair``: the counts
  (padded to an even number) split in halves as the two counter words, as JAX's."""
  k0, k1 = keypair
  count = jnp.asarray(count)
  k0, k1 = jnp.asarray(k0), jnp.asarray(k1)
  if any(x.dtype != np.uint32 for x in (k0, k1, count)):
    raise TypeError(f"threefry_2x32 requires uint32 arguments, got "
                    f"{[str(jnp.asarray(x).dtype) for x in (k0, k1, count)]}")
  odd = count.size % 2
  if not count.size:
    return count
  x = jnp.ravel(count)
  if odd:
    x = jnp.concatenate([x, jnp.zeros((1,), np.uint32)])
  h = x.shape[0] // 2
  y0, y1 = threefry2x32_p.bind(k0, k1, x[:h], x[h:])
  out = jnp.concatenate([y0, y1])
  return lax.reshape(out[:-1] if odd else out, count.shape)
