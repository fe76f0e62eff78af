"""``nbjax._src.lax.lax``: JAX's private ``jax._src.lax.lax`` module path, the public
``nbjax.lax`` namespace."""
from nbjax.lax import *  # noqa: F401,F403
from nbjax.lax.elementwise import _const, _convert_element_type  # noqa: F401,E402  (JAX's)


def asarray(x):
  """Lightweight conversion of an ArrayLike to an Array (JAX's private ``lax.asarray``):
  Arrays and tracers pass through; other values become constants, binding no primitive,
  weakly typed when ``x`` is."""
  from nbjax import core, dtypes
  from nbjax.array import Array
  if isinstance(x, (Array, core.Tracer)):
    return x
  return _convert_element_type(x, None, weak_type=dtypes.is_weakly_typed(x))


def _delta(dtype, shape, axes):
  """Kronecker delta of ``shape``: one where the indices along ``axes`` all agree, zero
  elsewhere, constant along the other axes (JAX's private helper)."""
  import functools
  from nbjax import lax
  axes = tuple(int(a) for a in axes)
  sub = tuple(shape[a] for a in axes)
  ids = [lax.broadcasted_iota("int32", sub, i) for i in range(len(sub))]
  same = functools.reduce(lax.bitwise_and, [lax.eq(ids[0], i) for i in ids[1:]],
                          lax.full(sub, True))
  return lax.broadcast_in_dim(lax.convert_element_type(same, dtype), shape, axes)
