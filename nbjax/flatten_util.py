"""``flatten_util.ravel_pytree``: a pytree of arrays as one 1-D array, and the way back.

As JAX's: the leaves are raveled and concatenated in flattening order. When they all share a
dtype, the flat array keeps it (weak type included) and the returned ``unravel`` accepts any
dtype; otherwise the leaves are converted to their promoted dtype and ``unravel`` requires an
array of exactly that dtype, converting each piece back to its leaf's dtype. A tree without
leaves ravels to an empty float32 array. ``unravel`` is hashable and compares equal for equal
structures, so it can be a static argument of ``jit``.
"""
import numpy as np

from nbjax import dtypes as _dtypes
from nbjax import lax as _lax
from nbjax.tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


class _HashablePartial:
  """``fn`` with leading positional ``args`` bound; equal (and hashing equally) when the
  function's code and the bound arguments are equal."""
  __slots__ = ("fn", "args", "__weakref__")  # (jit caches functions by weak reference)

  def __init__(self, fn, *args):
    self.fn = fn
    self.args = args

  def __eq__(self, other):
    return (type(other) is _HashablePartial and self.fn.__code__ == other.fn.__code__
            and self.args == other.args)

  def __hash__(self):
    return hash((self.fn.__code__, self.args))

  def __call__(self, *args, **kwargs):
    return self.fn(*self.args, *args, **kwargs)


def ravel_pytree(pytree):
  """``(flat, unravel)``: ``flat`` the 1-D concatenation of ``pytree``'s raveled leaves
  (their promoted dtype), ``unravel(flat)`` a pytree of ``pytree``'s structure again."""
  leaves, treedef = tree_flatten(pytree)
  flat, unravel_list = _ravel_list(leaves)
  return flat, _HashablePartial(_unravel_pytree, treedef, unravel_list)


def _unravel_pytree(treedef, unravel_list, flat):
  return tree_unflatten(treedef, unravel_list(flat))


def _no_leaves(_):
  return []


def _ravel_list(leaves):
  if not leaves:
    return _lax.full([0], 0, "float32"), _no_leaves
  from_dtypes = tuple(_dtypes.dtype(x) for x in leaves)
  to_dtype = _dtypes.result_type(*from_dtypes)
  sizes = tuple(int(np.size(x)) for x in leaves)
  shapes = tuple(tuple(np.shape(x)) for x in leaves)
  if all(d == to_dtype for d in from_dtypes):
    # one dtype: nothing converted, and unravel takes whatever dtype it is given
    flat = _lax.concatenate([_lax.reshape(x, (s,)) for x, s in zip(leaves, sizes)], 0)
    return flat, _HashablePartial(_unravel_list_single_dtype, sizes, shapes)
  flat = _lax.concatenate(
      [_lax.reshape(_lax.convert_element_type(x, to_dtype), (s,)) for x, s in zip(leaves, sizes)],
      0)
  return flat, _HashablePartial(_unravel_list, sizes, shapes, from_dtypes, to_dtype)


def _unravel_list_single_dtype(sizes, shapes, arr):
  pieces = _lax.split(arr, sizes)
  return [p.reshape(s) for p, s in zip(pieces, shapes)]


def _unravel_list(sizes, shapes, from_dtypes, to_dtype, arr):
  arr_dtype = _dtypes.dtype(arr)
  if arr_dtype != to_dtype:
    raise TypeError(f"unravel function given array of dtype {arr_dtype}, "
                    f"but expected dtype {to_dtype}")
  pieces = _lax.split(arr, sizes)
  # complex -> real drops the imaginary part without a warning, as JAX's unravel does
  return [_lax._convert_element_type(p.reshape(s), d, False)
          for p, s, d in zip(pieces, shapes, from_dtypes)]
