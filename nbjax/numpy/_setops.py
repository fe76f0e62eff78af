"""Differences, insertion/deletion, set operations and index utilities of ``nbjax.numpy``.

Pipeline position: NumPy-signature functions (diff, insert, delete, isin, unique_*,
intersect1d, ravel_multi_index, fill_diagonal, put, choose, block, lexsort, partition, ...)
built only from other ``nbjax.numpy`` functions and ``lax`` primitives (sort, gather,
scatter), so they work eagerly and under every transformation. Results whose size depends
on data (set operations, ``unique_*`` without ``size=``, ``trim_zeros``) need concrete
input and raise JAX's ``ConcretizationTypeError`` for tracers; with ``size=`` they are
padded to a static length as in JAX.
"""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import numpy as np

from nbjax.eager_cache import staged
from nbjax import dtypes, lax
from nbjax.array import Array
from nbjax.core import Tracer
from nbjax.numpy import _util
from nbjax.numpy._creation import arange, diag_indices, full, tril_indices, triu_indices, zeros
from nbjax.numpy._indexing import nonzero, take, take_along_axis
from nbjax.numpy._manip import (argsort, broadcast_arrays, clip, concatenate, moveaxis, ravel,
                                reshape, searchsorted, sort, stack, tile, where)
from nbjax.numpy._reductions import any as _any, cumsum, sum as _sum
from nbjax.numpy._ufuncs import (add, divmod as _divmod, isnan, multiply, not_equal, remainder,
                                 subtract)
from nbjax.numpy._util import canonicalize_axes, canonicalize_axis, ensure_arraylike

__all__ = ["unique", "append", "argpartition", "block", "choose", "delete", "diag_indices_from", "diff",
           "ediff1d", "fill_diagonal", "insert", "intersect1d", "isin", "lexsort", "partition",
           "place", "put", "ravel_multi_index", "resize", "setdiff1d", "setxor1d",
           "sort_complex", "tril_indices_from", "trim_zeros", "triu_indices_from", "union1d",
           "unique_all", "unique_counts", "unique_inverse", "unique_values", "unravel_index",
           "unstack"]

_BOOL = np.dtype(np.bool_)
_UNIQUE_HINT = ("To make jnp.unique() compatible with JIT and other transforms, you can specify "
                "a concrete value for the size argument, which will determine the output size.")


def _int():
  return dtypes.default_int_dtype()


def _cut(x, lo, hi, axis=0):
  """``x[lo:hi]`` along ``axis`` (static, clamped bounds)."""
  n = x.shape[axis]
  lo, hi = min(max(lo, 0), n), min(max(hi, 0), n)
  return lax.slice_in_dim(x, lo, max(lo, hi), axis=axis)


def _tile_to_size(x, size):
  """The 1-d ``x`` repeated cyclically to length ``size``."""
  if x.shape[0] < size:
    x = tile(x, -(-size // x.shape[0]))
  return _cut(x, 0, size)

# ----------------------------------------------------------------- differences


@staged
def diff(a, n=1, axis=-1, prepend=None, append=None):
  """``n``-th discrete difference along ``axis`` (``!=`` for booleans), after joining
  ``prepend``/``append`` (scalars broadcast to one slice).

  Args:
    a: input array (or array-like).
    n: number of times to take the difference.
    axis: axis along which to differentiate.
    prepend: optional values joined before ``a`` along ``axis``.
    append: optional values joined after ``a`` along ``axis``.

  Returns:
    An array ``n`` shorter along ``axis`` (counting the joined values).

  Examples:
    >>> jnp.diff(jnp.array([1, 4, 9, 16]))
    Array([3, 5, 7], dtype=int64)
    >>> jnp.diff(jnp.array([1, 4, 9, 16]), n=2)
    Array([2, 2], dtype=int64)
  """
  arr = ensure_arraylike("diff", a)
  n = _util.index(n, "'n' argument of jnp.diff")
  axis = _util.index(axis, "'axis' argument of jnp.diff")
  if n == 0:
    return arr
  if n < 0:
    raise ValueError(f"order must be non-negative but got {n}")
  if arr.ndim == 0:
    raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
  axis = canonicalize_axis(axis, arr.ndim)
  edge = arr.shape[:axis] + (1,) + arr.shape[axis + 1:]
  parts = [arr]
  for v, at in ((prepend, 0), (append, 1)):
    if v is not None:
      v = ensure_arraylike("diff", v)
      parts.insert(at * len(parts), _util.broadcast_to(v, edge) if v.ndim == 0 else v)
  if len(parts) > 1:
    arr = concatenate(parts, axis)
  op = not_equal if arr.dtype == _BOOL else subtract
  for _ in range(n):
    m = arr.shape[axis]
    arr = op(_cut(arr, 1, m, axis), _cut(arr, 0, m - 1, axis))
  return arr


def ediff1d(ary, to_end=None, to_begin=None):
  """Differences of consecutive elements of ``ravel(ary)``, with ``to_begin``/``to_end``
  (cast to its dtype) joined at the ends.

  Args:
    ary: input array (flattened).
    to_end: optional values appended to the result.
    to_begin: optional values prepended to the result.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.ediff1d(jnp.array([1, 4, 9]), to_begin=0)
    Array([0, 3, 5], dtype=int64)
  """
  arr = ravel(ensure_arraylike("ediff1d", ary))
  m = arr.shape[0]
  out = lax.sub(_cut(arr, 1, m), _cut(arr, 0, m - 1))
  if to_begin is not None:
    out = concatenate([ravel(_util.convert(ensure_arraylike("ediff1d", to_begin), arr.dtype)), out])
  if to_end is not None:
    out = concatenate([out, ravel(_util.convert(ensure_arraylike("ediff1d", to_end), arr.dtype))])
  return out

# ----------------------------------------------------------------- insertion and deletion


def append(arr, values, axis=None):
  """``values`` appended to ``arr`` along ``axis`` (both flattened when ``None``).

  Args:
    arr: input array.
    values: values to append (shape compatible with ``arr`` along the other axes).
    axis: axis to append along (``None``: flatten both first).

  Returns:
    The joined array.

  Examples:
    >>> jnp.append(jnp.array([1, 2]), jnp.array([3, 4]))
    Array([1, 2, 3, 4], dtype=int64)
  """
  if axis is None:
    return concatenate([ravel(arr), ravel(values)], 0)
  return concatenate([arr, values], axis=axis)


def insert(arr, obj, values, axis=None):
  """``values`` inserted before the indices ``obj`` (an int, 1-d integer array or slice;
  may be traced) along ``axis`` (flattened when ``None``).

  Args:
    arr: input array.
    obj: index, slice or array of indices selecting the entries.
    values: values to insert.
    axis: axis to insert along (``None``: the flattened array).

  Returns:
    An array with the values inserted.

  Examples:
    >>> jnp.insert(jnp.array([1, 2, 3]), 1, 9)
    Array([1, 9, 2, 3], dtype=int64)
    >>> jnp.insert(jnp.array([1, 2, 3]), jnp.array([0, 3]), jnp.array([7, 8]))
    Array([7, 1, 2, 3, 8], dtype=int64)
  """
  a, _, vals = ensure_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
  if axis is None:
    a, axis = ravel(a), 0
  axis = canonicalize_axis(_util.index(axis, "axis argument of jnp.insert()"), a.ndim)
  n_input = a.shape[axis]
  idx = (arange(*obj.indices(n_input)) if isinstance(obj, slice) else
         _util.as_array(obj))
  if idx.ndim > 1:
    raise ValueError("jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; "
                     f"got {obj}")
  if not dtypes.is_int(idx.dtype):
    if idx.size == 0 and not isinstance(obj, (Array, Tracer)):
      idx = _util.convert(idx, _int())
    else:
      raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
  vals = _util.convert(vals, a.dtype)
  if vals.ndim < a.ndim:
    vals = lax.reshape(vals, (1,) * (a.ndim - vals.ndim) + vals.shape)
  if idx.size == 1:
    if idx.ndim == 0:
      vals = moveaxis(vals, 0, axis)
    idx = _util.broadcast_to(ravel(idx), (vals.shape[axis],))
  n_insert = _util.broadcast_shapes(idx.shape, (vals.shape[axis],))[0]
  idx = _util.broadcast_to(idx, (n_insert,))
  idx = clip(where(idx < 0, idx + n_input, idx), 0, n_input)
  # each value lands at its (clipped) index plus the number of values inserted before it
  vals_pos = idx.at[argsort(idx)].add(arange(n_insert, dtype=idx.dtype))
  keep = lax.full((n_input + n_insert,), True, _BOOL).at[vals_pos].set(False)
  arr_pos = nonzero(keep, size=n_input)[0]
  out_shape = a.shape[:axis] + (n_input + n_insert,) + a.shape[axis + 1:]
  lead = (slice(None),) * axis
  out = lax.full_like(a, 0, shape=out_shape).at[lead + (vals_pos,)].set(vals)
  return out.at[lead + (arr_pos,)].set(a)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
  """``arr`` without the entries ``obj`` (an int, slice, integer or boolean array) along
  ``axis`` (flattened when ``None``). Array ``obj`` must be concrete unless
  ``assume_unique_indices=True`` (unique integer indices, then it may be traced).

  Args:
    arr: input array.
    obj: index, slice or array of indices selecting the entries.
    axis: axis to delete along (``None``: the flattened array).
    assume_unique_indices: promise that integer ``obj`` holds unique, in-bounds indices,
      allowing traced ``obj``.

  Returns:
    An array without the deleted entries.

  Examples:
    >>> jnp.delete(jnp.array([1, 2, 3, 4]), 1)
    Array([1, 3, 4], dtype=int64)
    >>> jnp.delete(jnp.array([1, 2, 3, 4]), jnp.array([0, 2]))
    Array([2, 4], dtype=int64)
  """
  a = ensure_arraylike("delete", arr)
  if axis is None:
    a, axis = ravel(a), 0
  axis = canonicalize_axis(axis, a.ndim)
  n = a.shape[axis]
  lead = (slice(None),) * axis
  try:
    i = operator.index(obj)
  except (TypeError, ValueError):  # not a scalar integer (or a tracer)
    pass
  else:
    i = canonicalize_axis(i, n)
    return concatenate([_cut(a, 0, i, axis), _cut(a, i + 1, n, axis)], axis)
  if isinstance(obj, slice):
    obj, assume_unique_indices = np.arange(n)[obj], True
  _util.check_arraylike("delete", a, obj)
  if hasattr(obj, "__jax_array__"):
    obj = obj.__jax_array__()
  if assume_unique_indices and dtypes.is_int(_util.as_array(obj).dtype):
    o = ravel(_util.as_array(obj))
    o = sort(clip(where(o < 0, o + n, o), 0, n))
    o = subtract(o, arange(o.shape[0], dtype=o.dtype))  # o[j]: kept entries before deletion j
    kept = arange(n - o.shape[0], dtype=o.dtype)
    shift = _sum(lax.ge(kept[None, :], o[:, None]), 0, dtype=o.dtype)
    return a[lead + (add(kept, shift),)]
  o = _util.concrete(obj, "'obj' array argument of jnp.delete()")
  if dtypes.is_int(o.dtype):
    mask = np.ones(n, bool)
    mask[o] = False
  elif o.dtype == _BOOL:
    if o.shape != (n,):
      raise ValueError("np.delete(arr, obj): for boolean indices, obj must be one-dimensional "
                       "with length matching specified axis.")
    mask = ~o
  else:
    raise ValueError(f"np.delete(arr, obj): got obj.dtype={o.dtype}; must be integer or bool.")
  return a[lead + (mask,)]


def unstack(x, /, *, axis=0):
  """The slices of ``x`` along ``axis``, as a tuple.

  Args:
    x: input array (or array-like).
    axis: the axis to unstack along.

  Returns:
    A tuple of ``x.shape[axis]`` arrays.

  Examples:
    >>> jnp.unstack(jnp.array([[1, 2], [3, 4]]))
    (Array([1, 2], dtype=int64), Array([3, 4], dtype=int64))
  """
  if type(x) not in _util.key_types:  # (key arrays unstack too, as JAX's)
    x = ensure_arraylike("unstack", x)
  axis = canonicalize_axis(axis, x.ndim)
  return tuple(lax.squeeze(lax.slice_in_dim(x, i, i + 1, axis=axis), (axis,))
               for i in range(x.shape[axis]))


def resize(a, new_shape):
  """``ravel(a)`` repeated cyclically to fill ``new_shape`` (zeros when either is empty).

  Args:
    a: input array (or array-like).
    new_shape: int or tuple of ints: the shape of the result.

  Returns:
    An array of ``new_shape``.

  Examples:
    >>> jnp.resize(jnp.array([1, 2, 3]), (2, 4))
    Array([[1, 2, 3, 1],
           [2, 3, 1, 2]], dtype=int64)
  """
  _util.check_arraylike("resize", a)
  new_shape = (new_shape,) if _util.ndim(new_shape) == 0 else tuple(new_shape)
  new_shape = tuple(_util.index(d, "new_shape") for d in new_shape)
  if any(d < 0 for d in new_shape):
    raise ValueError("all elements of `new_shape` must be non-negative")
  arr = ravel(a)
  size = math.prod(new_shape)
  if arr.size == 0 or size == 0:
    return lax.full_like(arr, 0, shape=new_shape)
  return reshape(_tile_to_size(arr, size), new_shape)


def trim_zeros(filt, trim="fb", axis=None):
  """``filt`` without leading ('f') and/or trailing ('b') zeros along ``axis`` (all axes by
  default). ``filt`` must be concrete: the result's shape depends on its values.

  Args:
    filt: input array.
    trim: ``'f'`` to trim the front, ``'b'`` the back, ``'fb'`` both.
    axis: axis or axes to trim along (``None``: all).

  Returns:
    A slice of ``filt``.

  Examples:
    >>> jnp.trim_zeros(jnp.array([0, 0, 1, 2, 0]))
    Array([1, 2], dtype=int64)
    >>> jnp.trim_zeros(jnp.array([0, 0, 1, 2, 0]), trim='f')
    Array([1, 2, 0], dtype=int64)
  """
  filt = ensure_arraylike("trim_zeros", filt)
  v = _util.concrete(filt, "Error arose in the `filt` argument of trim_zeros()")
  axes = canonicalize_axes(axis, filt.ndim)
  t = trim.lower()
  if not axes or ("f" not in t and "b" not in t):
    return filt
  idx = []
  for ax in range(filt.ndim):
    nz = (v != 0).any(axis=tuple(i for i in range(v.ndim) if i != ax))
    if ax not in axes:
      idx.append(slice(None))
    elif not nz.any():
      idx.append(slice(0, 0))
    else:
      idx.append(slice(int(nz.argmax()) if "f" in t else None,
                       v.shape[ax] - int(nz[::-1].argmax()) if "b" in t else None))
  return filt[tuple(idx)]

# ----------------------------------------------------------------- set operations


def _in1d(ar1, ar2, invert=False, method="auto"):
  """For each element of ``ravel(ar1)``: whether it occurs in ``ar2`` (negated by ``invert``)."""
  if method not in ("auto", "compare_all", "binary_search", "sort"):
    raise ValueError(f"method={method!r} is not implemented; options are 'compare_all', "
                     "'binary_search', 'sort', and 'auto'")
  a, b = _util.promote_dtypes(ravel(ar1), ravel(ar2))
  n, m = a.shape[0], b.shape[0]
  if n == 0 or m == 0:
    return lax.full((n,), invert, _BOOL)
  if method in ("auto", "compare_all"):
    eq = lax.eq(lax.broadcast_in_dim(a, (n, m), (0,)), lax.broadcast_in_dim(b, (n, m), (1,)))
    found = lax.reduce_or(eq, (1,))
  else:  # binary search in the sorted test elements
    s = sort(b)
    found = lax.eq(a, take(s, searchsorted(s, a), mode="clip"))
  return lax.bitwise_not(found) if invert else found


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
  """Whether each element of ``element`` occurs in ``test_elements`` (``method``:
  'compare_all'/'auto' or 'binary_search'/'sort').

  Args:
    element: input array.
    test_elements: values to test against (flattened).
    assume_unique: if True, the inputs are assumed to already be unique.
    invert: if True, return whether each element is *not* in ``test_elements``.
    method: ``'auto'``, ``'compare_all'``, ``'binary_search'`` or ``'sort'``: the algorithm
      (same result).

  Returns:
    A boolean array of the shape of ``element``.

  Examples:
    >>> jnp.isin(jnp.array([1, 2, 3]), jnp.array([2, 5]))
    Array([False,  True, False], dtype=bool)
  """
  del assume_unique
  element, test_elements = ensure_arraylike("isin", element, test_elements)
  return reshape(_in1d(element, test_elements, invert, method), element.shape)


def _static_size(name, size, *arrays, context=None):
  """``size`` as an int; without it the arrays must be concrete (JAX's error otherwise)."""
  if size is None:
    for a in arrays:
      _util.concrete(a, context or f"The error arose in {name}().")
    return None
  return _util.index(size, "size")


def _unique1d(x, size=None, fill_value=None, equal_nan=True, index=False, inverse=False,
              counts=False, true_size=False):
  """Sorted unique values of the 1-d ``x`` (``size``: the first ``size`` of them, padded
  with ``fill_value``, default the smallest), then as requested the first index of each,
  the inverse (the position of each element of ``x`` in the values), the counts, and the
  number of unique values."""
  n, d, rest = x.shape[0], _int(), x.shape[1:]
  ret = []
  if n == 0:
    if size and fill_value is None:
      raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                       "fill_value must be specified")
    ret.append(x if not size else full((size,) + rest, fill_value, x.dtype))
    ret += [zeros(0, d)] * (index + inverse + counts) + [_util.lit(0, d)] * true_size
    return ret
  if not math.prod(rest):  # empty rows, all equal: JAX's one row (``size`` rows if filled)
    ret.append(full((1 if size is None or fill_value is None else size,) + rest, 0, x.dtype))
    ret += ([zeros(1, d)] * index + [zeros(n, d)] * inverse + [full((1,), n, d)] * counts
            + [_util.lit(0, d)] * true_size)
    return ret
  if dtypes.is_complex(x.dtype):  # one NaN spelling, so that NaNs sort together
    x = where(isnan(x), _util.lit(complex(np.nan, 0), x.dtype), x)
  if rest:  # unique rows (``axis``): sort lexicographically by the flattened columns
    x2 = reshape(x, (n, -1))
    cols = [lax.squeeze(_cut(x2, j, j + 1, axis=1), (1,)) for j in range(x2.shape[1])]
    *cols, perm = lax.sort((*cols, lax.iota(d, n)), num_keys=len(cols))
    aux = stack(cols, axis=1)
  else:
    aux, perm = lax.sort((x, lax.iota(d, n)), num_keys=1)
  hi, lo = _cut(aux, 1, n), _cut(aux, 0, n - 1)
  new = lax.ne(hi, lo)
  if equal_nan and dtypes.is_inexact(x.dtype):
    new = lax.bitwise_and(new, lax.bitwise_not(lax.bitwise_and(isnan(hi), isnan(lo))))
  if rest:
    new = lax.reduce_or(new, (1,))
  mask = concatenate([lax.full((1,), True, _BOOL), new])
  count = _sum(mask)
  if size is None:
    ind = Array._new(np.flatnonzero(_util.concrete(mask, "The error arose in jnp.unique(). " +
                                                   _UNIQUE_HINT)).astype(d))
  else:
    ind = nonzero(mask, size=size)[0]
  vals = take(aux, ind, axis=0, mode="clip")
  if rest:
    vals = reshape(vals, vals.shape[:1] + rest)
  if size is not None and fill_value is not None:  # fill_value broadcasts against a row
    valid = reshape(lax.lt(lax.iota(d, size), count), (size,) + (1,) * len(rest))
    vals = where(valid, vals, _util.convert(fill_value, vals.dtype))
  ret.append(vals)
  if index:
    ret.append(take(perm, ind, mode="clip"))
  if inverse:
    ret.append(zeros(n, d).at[perm].set(subtract(cumsum(mask), 1), unique_indices=True))
  if counts:
    if size is None:
      starts = concatenate([ind, _util.lit(n, d)[None]])
    else:
      starts = nonzero(mask, size=size + 1)[0]  # padding 0: past the end
      starts = concatenate([_cut(starts, 0, 1), where(_cut(starts, 1, size + 1) == 0, n,
                                                      _cut(starts, 1, size + 1))])
    ret.append(diff(starts))
  if true_size:
    ret.append(count)
  return ret


def _unique_api(name, x, size, fill_value, equal_nan=False, axis=None, **returns):
  x = ensure_arraylike(name, x)
  size = _static_size(name, size, x, context="The error arose for the first argument of "
                      "jnp.unique(). " + _UNIQUE_HINT)
  if axis is not None:  # unique slices along ``axis``
    axis = canonicalize_axis(axis, x.ndim)
    out = _unique1d(moveaxis(x, axis, 0), size, fill_value, equal_nan=equal_nan, **returns)
    out[0] = moveaxis(out[0], 0, axis)
    return out
  out = _unique1d(ravel(x), size, fill_value, equal_nan=equal_nan, **returns)
  if returns.get("inverse"):
    i = 1 + bool(returns.get("index"))
    out[i] = reshape(out[i], x.shape)
  return out


class _UniqueAllResult(NamedTuple):
  """Result of :func:`unique_all`."""
  values: Array
  indices: Array
  inverse_indices: Array
  counts: Array


class _UniqueCountsResult(NamedTuple):
  """Result of :func:`unique_counts`."""
  values: Array
  counts: Array


class _UniqueInverseResult(NamedTuple):
  """Result of :func:`unique_inverse`."""
  values: Array
  inverse_indices: Array


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):  # noqa: A002
  """Sorted unique elements of ``ravel(ar)`` (or unique slices along ``axis``), optionally
  with first indices, inverse indices (of ``ar``'s shape; 1-d with ``axis``) and counts.
  Without a static ``size`` the input must be concrete. The result is always sorted.

  Args:
    ar: input array.
    return_index: if True, also return the index of the first occurrence of each value.
    return_inverse: if True, also return the indices that rebuild ``ar`` from the unique
      values.
    return_counts: if True, also return the number of occurrences of each value.
    axis: axis whose slices are compared (``None``: the flattened array).
    equal_nan: whether NaNs compare equal to each other.
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.
    sorted: accepted for JAX compatibility; the values are always sorted.

  Returns:
    The unique values, followed by the requested index/inverse/count arrays as a tuple.

  Examples:
    >>> jnp.unique(jnp.array([3, 1, 3, 2]))
    Array([1, 2, 3], dtype=int64)
    >>> jnp.unique(jnp.array([3, 1, 3, 2]), return_counts=True)
    (Array([1, 2, 3], dtype=int64), Array([1, 1, 2], dtype=int64))
  """
  del sorted
  out = _unique_api("unique", ar, size, fill_value, equal_nan=equal_nan, axis=axis,
                    index=return_index, inverse=return_inverse, counts=return_counts)
  return out[0] if len(out) == 1 else tuple(out)


def unique_values(x, /, *, size=None, fill_value=None):
  """Sorted unique values of ``x`` (NaNs distinct); static length with ``size``.

  Args:
    x: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of unique values.

  Examples:
    >>> jnp.unique_values(jnp.array([3, 1, 3]))
    Array([1, 3], dtype=int64)
  """
  return _unique_api("unique_values", x, size, fill_value)[0]


def unique_counts(x, /, *, size=None, fill_value=None):
  """Unique values of ``x`` and their number of occurrences (``(values, counts)``).

  Args:
    x: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A named tuple ``(values, counts)``.

  Examples:
    >>> jnp.unique_counts(jnp.array([3, 1, 3])).counts
    Array([1, 2], dtype=int64)
  """
  return _UniqueCountsResult(*_unique_api("unique_counts", x, size, fill_value, counts=True))


def unique_inverse(x, /, *, size=None, fill_value=None):
  """Unique values of ``x`` and, of ``x.shape``, each element's position in them.

  Args:
    x: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A named tuple ``(values, inverse_indices)``.

  Examples:
    >>> jnp.unique_inverse(jnp.array([3, 1, 3])).inverse_indices
    Array([1, 0, 1], dtype=int64)
  """
  return _UniqueInverseResult(*_unique_api("unique_inverse", x, size, fill_value, inverse=True))


def unique_all(x, /, *, size=None, fill_value=None):
  """Unique values of ``x`` with first indices, inverse indices and counts.

  Args:
    x: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A named tuple ``(values, indices, inverse_indices, counts)``.

  Examples:
    >>> jnp.unique_all(jnp.array([3, 1, 3])).counts
    Array([1, 2], dtype=int64)
  """
  return _UniqueAllResult(*_unique_api("unique_all", x, size, fill_value, index=True,
                                       inverse=True, counts=True))


def _pick(name, vals, keep, size, fill_value, *extras):
  """The entries of the 1-d ``vals`` where ``keep``, in order, and the matching entries of
  each ``(array, pad)`` in ``extras``. Without ``size`` their number must be concrete; with
  it the first ``size`` come back, padded with ``fill_value`` (default: the first picked
  value, else 0) and each extra's ``pad``."""
  d, n = _int(), vals.shape[0]
  arrays = [vals] + [e for e, _ in extras]
  order = argsort(lax.bitwise_not(keep)) if n else zeros(0, d)  # stable: picked first, in order
  count = _sum(keep)
  if size is None:
    k = int(_util.concrete(count, f"The error arose in {name}()."))
    return [take(x, _cut(order, 0, k), mode="clip") for x in arrays]
  pos = lax.iota(d, size)
  if n:
    sel = take(order, pos, mode="clip")
    outs = [take(x, sel, mode="clip") for x in arrays]
  else:
    outs = [zeros(size, x.dtype) for x in arrays]
  valid = lax.lt(pos, count)
  if fill_value is None:
    fill_value = where(count > 0, outs[0][0], 0) if size and n else 0
  outs[0] = where(valid, outs[0], _util.convert(fill_value, vals.dtype))
  return [outs[0]] + [where(valid, o, p) for o, (_, p) in zip(outs[1:], extras)]


def _unique_or_all(x, assume_unique, size):
  """``(values, first indices, valid mask)`` of the 1-d ``x``: its sorted unique values
  (padded to ``x.size`` when ``size`` is given), or all of ``x`` sorted if ``assume_unique``."""
  n, d = x.shape[0], _int()
  if assume_unique:
    vals, idx = lax.sort((x, lax.iota(d, n)), num_keys=1) if n else (x, zeros(0, d))
    return vals, idx, lax.full((n,), True, _BOOL)
  vals, idx, k = _unique1d(x, None if size is None else n, index=True, true_size=True)
  return vals, idx, lax.lt(lax.iota(d, vals.shape[0]), k)


def union1d(ar1, ar2, *, size=None, fill_value=None):
  """Sorted unique values found in either array (``size``: static length, padded with
  ``fill_value``, default the smallest).

  Args:
    ar1: first input array (or array-like).
    ar2: second input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of unique values.

  Examples:
    >>> jnp.union1d(jnp.array([3, 1]), jnp.array([2, 1]))
    Array([1, 2, 3], dtype=int64)
  """
  ar1, ar2 = ensure_arraylike("union1d", ar1, ar2)
  size = _static_size("union1d", size, ar1, ar2)
  return _unique1d(concatenate([ar1, ar2], axis=None), size, fill_value)[0]


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
  """Unique values of ``ar1`` not in ``ar2`` (sorted unless ``assume_unique``; ``size``:
  static length, padded with ``fill_value``, default 0).

  Args:
    ar1: first input array (or array-like).
    ar2: second input array (or array-like).
    assume_unique: if True, the inputs are assumed to already be unique.
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of unique values.

  Examples:
    >>> jnp.setdiff1d(jnp.array([1, 2, 3, 4]), jnp.array([2, 4]))
    Array([1, 3], dtype=int64)
  """
  ar1, ar2 = ensure_arraylike("setdiff1d", ar1, ar2)
  a, b = ravel(ar1), ravel(ar2)
  size = _static_size("setdiff1d", size, a, b)
  fill = 0 if fill_value is None else fill_value
  if a.shape[0] == 0 or size == 0:
    return full((size or 0,), fill, a.dtype)
  if assume_unique:
    vals, valid = a, lax.full(a.shape, True, _BOOL)
  else:
    vals, _, valid = _unique_or_all(a, False, size)
  keep = lax.bitwise_and(valid, _in1d(vals, b, invert=True))
  return _pick("setdiff1d", vals, keep, size, fill)[0]


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
  """Sorted unique values found in both arrays; with ``return_indices`` also the first
  index of each in ``ravel(ar1)`` and ``ravel(ar2)`` (``size``: static length, values
  padded with ``fill_value``, default the smallest, indices with out-of-bound sizes).

  Args:
    ar1: first input array (or array-like).
    ar2: second input array (or array-like).
    assume_unique: if True, the inputs are assumed to already be unique.
    return_indices: if True, also return the indices of the common values in each input.
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of unique values. With ``return_indices``, a tuple ``(values, indices1,
    indices2)``.

  Examples:
    >>> jnp.intersect1d(jnp.array([1, 2, 3, 4]), jnp.array([5, 4, 2]))
    Array([2, 4], dtype=int64)
  """
  ar1, ar2 = ensure_arraylike("intersect1d", ar1, ar2)
  a, b = _util.promote_dtypes(ravel(ar1), ravel(ar2))
  size = _static_size("intersect1d", size, a, b)
  if size and fill_value is None and a.shape[0] + b.shape[0] == 1:  # JAX pads with the lone value
    fill_value = concatenate([a, b])[0]
  vals, ia, valid = _unique_or_all(a, assume_unique, size)
  keep = lax.bitwise_and(valid, _in1d(vals, b))
  if not return_indices:
    return _pick("intersect1d", vals, keep, size, fill_value)[0]
  m = b.shape[0]
  if m:  # first occurrence in b: leftmost match in a stable sort of b
    sb, pb = lax.sort((b, lax.iota(_int(), m)), num_keys=1)
    ib = take(pb, searchsorted(sb, vals), mode="clip")
  else:
    ib = zeros(vals.shape[0], _int())
  return tuple(_pick("intersect1d", vals, keep, size, fill_value, (ia, a.shape[0]), (ib, m)))


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
  """Sorted values found in exactly one of the arrays (``size``: static length, padded
  with ``fill_value``, default the smallest).

  Args:
    ar1: first input array (or array-like).
    ar2: second input array (or array-like).
    assume_unique: if True, the inputs are assumed to already be unique.
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of unique values.

  Examples:
    >>> jnp.setxor1d(jnp.array([1, 2, 3]), jnp.array([2, 3, 4]))
    Array([1, 4], dtype=int64)
  """
  ar1, ar2 = ensure_arraylike("setxor1d", ar1, ar2)
  a, b = _util.promote_dtypes(ravel(ar1), ravel(ar2))
  size = _static_size("setxor1d", size, a, b)
  if assume_unique:  # as JAX: the sorted values unequal to both neighbours (repeats vanish)
    vals = sort(concatenate([a, b]))
    n = vals.shape[0]
    ne = not_equal(_cut(vals, 1, n), _cut(vals, 0, n - 1))
    t = lax.full((min(n, 1),), True, _BOOL)
    keep = lax.bitwise_and(concatenate([t, ne]), concatenate([ne, t]))
    return _pick("setxor1d", vals, keep, size, fill_value)[0]
  ua, _, va = _unique_or_all(a, assume_unique, size)
  ub, _, vb = _unique_or_all(b, assume_unique, size)
  vals = concatenate([ua, ub])
  keep = concatenate([lax.bitwise_and(va, _in1d(ua, b, invert=True)),
                      lax.bitwise_and(vb, _in1d(ub, a, invert=True))])
  if vals.shape[0]:
    vals, keep = lax.sort((vals, keep), num_keys=1)
  return _pick("setxor1d", vals, keep, size, fill_value)[0]

# ----------------------------------------------------------------- index utilities


@staged
def unravel_index(indices, shape):
  """Flat ``indices`` into ``shape`` as a tuple of coordinate arrays (out-of-bound indices
  clamp, as JAX).

  Args:
    indices: integer array of flat indices.
    shape: shape of the array the indices refer to.

  Returns:
    A tuple of integer arrays, one per dimension.

  Examples:
    >>> jnp.unravel_index(jnp.array([1, 5]), (2, 3))
    (Array([0, 1], dtype=int64), Array([1, 2], dtype=int64))
  """
  idx = ensure_arraylike("unravel_index", indices)
  try:
    shape = list(shape)
  except TypeError:
    shape = [shape]
  if any(np.ndim(s) != 0 for s in shape):
    raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
  # JAX: the shape may be traced (the coordinates are then computed with traced sizes)
  shape = [s if isinstance(s, Tracer) and not _util.is_concrete(s) else
           _util.index(s, "shape") for s in shape]
  out = [None] * len(shape)
  for i in reversed(range(len(shape))):
    idx, out[i] = _divmod(idx, shape[i])
  hi = idx > 0
  lo = lax.full_like(idx, False, _BOOL) if dtypes.issubdtype(idx.dtype, np.unsignedinteger) \
      else idx < -1
  return tuple(where(hi, s - 1, where(lo, 0, c)) for s, c in zip(shape, out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
  """Flat indices of the coordinate arrays ``multi_index`` into ``dims`` (``mode``: 'raise'
  needs concrete indices, 'clip', 'wrap' or 'ignore').

  Args:
    multi_index: tuple of integer arrays, one per dimension.
    dims: shape of the array the indices refer to.
    mode: ``'raise'`` (default), ``'clip'``, ``'wrap'`` or ``'ignore'``.
    order: ``'C'`` (row-major, default) or ``'F'`` (column-major) index order.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    An integer array of flat indices.

  Examples:
    >>> jnp.ravel_multi_index((jnp.array([0, 1]), jnp.array([2, 0])), (2, 3))
    Array([2, 3], dtype=int64)
  """
  if len(multi_index) != len(dims):
    raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
  dims = tuple(_util.index(d, "in `dims` argument of ravel_multi_index().") for d in dims)
  idx = [ensure_arraylike("ravel_multi_index", i) for i in multi_index]
  dtype = (dtypes.result_type(int, *idx) if dtype is None else
           _util.canonicalize_user_dtype(dtype, "ravel_multi_index"))
  if not dtypes.is_int(dtype):
    raise ValueError(f"dtype={dtype!r} is not an integer type.")
  if math.prod(dims) - 1 > np.iinfo(dtype).max:
    raise ValueError(f"jnp.ravel_multi_index: dtype={dtype!r} not large enough to hold "
                     f"flattened index for dims={dims!r}. Use the dtype argument to pass a "
                     "suitable dtype (e.g. dtype=np.min_scalar_type(prod(dims))).")
  for i in idx:
    if mode == "raise":
      _util.concrete(i, "The error occurred because ravel_multi_index was jit-compiled with "
                        "mode='raise'. Use mode='wrap' or mode='clip' instead.")
    if not dtypes.is_int(i.dtype):
      raise TypeError("only int indices permitted")
  if mode == "raise":
    if any(bool(_any((i < 0) | (i >= d))) for i, d in zip(idx, dims)):
      raise ValueError("invalid entry in coordinates array")
  elif mode == "clip":
    idx = [clip(i, 0, d - 1) for i, d in zip(idx, dims)]
  elif mode == "wrap":
    idx = [remainder(i, d) for i, d in zip(idx, dims)]
  elif mode != "ignore":
    raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or 'ignore'.")
  if order == "F":
    strides = np.cumprod((1,) + dims[:-1])
  elif order == "C":
    strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
  else:
    raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
  out = _util.lit(0, dtype)
  for i, s in zip(idx, strides):
    out = add(out, multiply(_util.convert(i, dtype), int(s)))
  return out


def _shape_of(name, arr):
  return arr.shape if hasattr(arr, "shape") else ensure_arraylike(name, arr).shape


def tril_indices_from(arr, k=0):
  """Indices of the lower triangle of the 2-d ``arr``.

  Args:
    arr: 2-d input array.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    A tuple of two index arrays (rows, columns).

  Examples:
    >>> jnp.tril_indices_from(jnp.ones((2, 2)))
    (Array([0, 1, 1], dtype=int64), Array([0, 0, 1], dtype=int64))
  """
  s = _shape_of("tril_indices_from", arr)
  if len(s) != 2:
    raise ValueError("Only 2-D inputs are accepted")
  return tril_indices(s[0], k=k, m=s[1])


def triu_indices_from(arr, k=0):
  """Indices of the upper triangle of the 2-d ``arr``.

  Args:
    arr: 2-d input array.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    A tuple of two index arrays (rows, columns).

  Examples:
    >>> jnp.triu_indices_from(jnp.ones((2, 2)))
    (Array([0, 0, 1], dtype=int64), Array([0, 1, 1], dtype=int64))
  """
  s = _shape_of("triu_indices_from", arr)
  if len(s) != 2:
    raise ValueError("Only 2-D inputs are accepted")
  return triu_indices(s[0], k=k, m=s[1])


def diag_indices_from(arr):
  """Indices of the main diagonal of ``arr`` (all axes of equal length).

  Args:
    arr: input array whose axes all have the same length.

  Returns:
    A tuple of ``arr.ndim`` index arrays.

  Examples:
    >>> jnp.diag_indices_from(jnp.ones((2, 2)))
    (Array([0, 1], dtype=int64), Array([0, 1], dtype=int64))
  """
  arr = ensure_arraylike("diag_indices_from", arr)
  if arr.ndim < 2:
    raise ValueError("input array must be at least 2-d")
  if len(set(arr.shape)) != 1:
    raise ValueError("All dimensions of input must be of equal length")
  return diag_indices(arr.shape[0], ndim=arr.ndim)

# ----------------------------------------------------------------- functional updates


def fill_diagonal(a, val, wrap=False, *, inplace=True):
  """A copy of ``a`` with its main diagonal set to ``val`` (cycled); needs ``inplace=False``.

  Args:
    a: input array (or array-like).
    val: scalar or array of values for the diagonal.
    wrap: for tall matrices, whether the diagonal wraps after ``N`` columns.
    inplace: must be False: JAX arrays cannot be modified in place.

  Returns:
    A copy of ``a`` with the diagonal filled.

  Examples:
    >>> jnp.fill_diagonal(jnp.zeros((2, 2)), 5.0, inplace=False)
    Array([[5., 0.],
           [0., 5.]], dtype=float64)
  """
  if inplace:
    raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
  if wrap:
    raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
  a, val = ensure_arraylike("fill_diagonal", a, val)
  if a.ndim < 2:
    raise ValueError("array must be at least 2-d")
  if a.ndim > 2 and len(set(a.shape)) != 1:
    raise ValueError("All dimensions of input must be of equal length")
  n = min(a.shape)
  return a.at[diag_indices(n, a.ndim)].set(val if val.ndim == 0 else
                                           _tile_to_size(ravel(val), n))


def put(a, ind, v, mode=None, *, inplace=True):
  """A copy of ``a`` with ``v`` (cycled) at the flat indices ``ind``; needs ``inplace=False``.
  ``mode``: None (indices clamp as in ``unravel_index``), 'clip' or 'wrap'.

  Args:
    a: input array (or array-like).
    ind: flat indices into ``a``.
    v: values to put (used cyclically).
    mode: ``None``, ``'clip'`` or ``'wrap'``: handling of out-of-range indices, as described
      above.
    inplace: must be False: JAX arrays cannot be modified in place.

  Returns:
    A copy of ``a`` with the values put.

  Examples:
    >>> jnp.put(jnp.arange(4), jnp.array([0, 2]), 9, inplace=False)
    Array([9, 1, 9, 3], dtype=int64)
  """
  if inplace:
    raise ValueError("jax.numpy.put cannot modify arrays in-place, because JAX arrays are "
                     "immutable. Pass inplace=False to instead return an updated array.")
  arr, ind, v = ensure_arraylike("put", a, ind, v)
  ind, v = ravel(ind), ravel(v)
  if not arr.size or not ind.size or not v.size:
    return arr
  v = _tile_to_size(v, ind.shape[0])
  if mode is None:
    smode = "drop"
  elif mode == "clip":
    ind, smode = clip(ind, 0, arr.size - 1), "promise_in_bounds"
  elif mode == "wrap":
    ind, smode = remainder(ind, arr.size), "promise_in_bounds"
  elif mode == "raise":
    raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
  else:
    raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
  return arr.at[unravel_index(ind, arr.shape)].set(v, mode=smode)


def place(arr, mask, vals, *, inplace=True):
  """A copy of ``arr`` with ``vals`` (cycled) placed where ``mask`` is true; needs
  ``inplace=False``.

  Args:
    arr: input array.
    mask: boolean array of the shape of ``arr``.
    vals: values to place, used cyclically.
    inplace: must be False: JAX arrays cannot be modified in place.

  Returns:
    A copy of ``arr`` with the values placed.

  Examples:
    >>> jnp.place(jnp.arange(4), jnp.arange(4) % 2 == 0, 9, inplace=False)
    Array([9, 1, 9, 3], dtype=int64)
  """
  data, mask, vals = ensure_arraylike("place", arr, mask, vals)
  vals = ravel(vals)
  if inplace:
    raise ValueError("jax.numpy.place cannot modify arrays in-place, because JAX arrays are "
                     "immutable. Pass inplace=False to instead return an updated array.")
  if data.size != mask.size:
    raise ValueError("place: arr and mask must be the same size")
  if not vals.size:
    raise ValueError("Cannot place values from an empty array")
  if not data.size:
    return data
  at = nonzero(ravel(mask), size=mask.size, fill_value=mask.size)[0]
  out = ravel(data).at[at].set(_tile_to_size(vals, mask.size), mode="drop")
  return reshape(out, data.shape)

# ----------------------------------------------------------------- selection and joining


def _seq(x):
  """A sequence argument as a list (arrays split along their first axis)."""
  if isinstance(x, (Array, Tracer, np.ndarray)):
    return list(unstack(x)) if x.ndim else [x]
  return list(x)


def choose(a, choices, out=None, mode="raise"):
  """``choices[a[i]][i]`` for every (broadcast) ``i``; ``mode`` 'raise' (needs concrete
  ``a``), 'wrap' or 'clip'.

  Args:
    a: integer array of choice indices.
    choices: sequence of arrays to choose from (broadcast with ``a``).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    mode: ``'raise'`` (default), ``'wrap'`` or ``'clip'``: handling of out-of-range indices.

  Returns:
    An array of the broadcast shape.

  Examples:
    >>> jnp.choose(jnp.array([0, 1, 0]), [jnp.array([1, 2, 3]), jnp.array([10, 20, 30])])
    Array([ 1, 20,  3], dtype=int64)
  """
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
  choices = _seq(choices)
  a, *choices = ensure_arraylike("choose", a, *choices) if choices else \
      (ensure_arraylike("choose", a),)
  if not dtypes.is_int(a.dtype):
    raise ValueError("`a` array must be integer typed")
  N = len(choices)
  if mode == "raise":
    v = _util.concrete(a, "The error occurred because jnp.choose was jit-compiled with "
                          "mode='raise'. Use mode='wrap' or mode='clip' instead.")
    if ((v < 0) | (v >= N)).any():
      raise ValueError("invalid entry in choice array")
  elif mode == "wrap":
    a = remainder(a, N)
  elif mode == "clip":
    a = clip(a, 0, N - 1)
  else:
    raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
  a, *choices = broadcast_arrays(a, *choices)
  return take_along_axis(stack(choices), a[None], 0)[0]


def _block(xs):
  if isinstance(xs, tuple):
    raise ValueError(f"jax.numpy.block does not allow tuples, got {xs}")  # noqa: TRY004 (JAX's)
  if not isinstance(xs, list):
    return ensure_arraylike("block", xs), 1
  if not xs:
    raise ValueError("jax.numpy.block does not allow empty list arguments")
  parts, depths = zip(*(_block(x) for x in xs))
  if any(d != depths[0] for d in depths):
    raise ValueError("Mismatched list depths in jax.numpy.block")
  rank = max(depths[0], *(p.ndim for p in parts))
  parts = [lax.reshape(p, (1,) * (rank - p.ndim) + p.shape) for p in parts]
  return concatenate(parts, axis=-depths[0]), depths[0] + 1


def block(arrays):
  """An array assembled from nested lists of blocks (innermost lists join the last axis).

  Args:
    arrays: nested lists of arrays (or scalars).

  Returns:
    The assembled array.

  Examples:
    >>> jnp.block([[jnp.eye(2), jnp.zeros((2, 1))], [jnp.ones((1, 3))]])
    Array([[1., 0., 0.],
           [0., 1., 0.],
           [1., 1., 1.]], dtype=float64)
  """
  return _block(arrays)[0]

# ----------------------------------------------------------------- sorting


def lexsort(keys, axis=-1):
  """Indices that sort by several keys along ``axis``; the last key is the primary one.

  Args:
    keys: sequence of arrays (or a 2-d array) of sort keys; the last is the primary key.
    axis: axis to sort along.

  Returns:
    An integer array of indices.

  Examples:
    >>> jnp.lexsort([jnp.array([3, 1, 2]), jnp.array([1, 0, 1])])
    Array([1, 2, 0], dtype=int64)
  """
  keys = _seq(keys)
  if not keys:
    raise TypeError("need sequence of keys with len > 0 in lexsort")
  keys = [ensure_arraylike("lexsort", k) for k in keys]
  if len({k.shape for k in keys}) > 1:
    raise ValueError("all keys need to be the same shape")
  if keys[0].ndim == 0:
    return _util.lit(0, _int())
  axis = canonicalize_axis(axis, keys[0].ndim)
  iota = lax.broadcasted_iota(_int(), keys[0].shape, axis)
  return lax.sort((*keys[::-1], iota), dimension=axis, num_keys=len(keys))[-1]


def _kth(name, a, kth, axis):
  a = ensure_arraylike(name, a)
  if dtypes.is_complex(a.dtype):
    raise NotImplementedError(f"jnp.{name} for complex dtype is not implemented.")
  axis = canonicalize_axis(axis, a.ndim)
  canonicalize_axis(_util.index(kth, "kth"), a.shape[axis])
  return a, axis


def _bottom_k(arr, k):
  """``lax.top_k`` of the order-reversed ``arr`` (JAX's: unsigned ints by ``~``)."""
  if arr.dtype.kind == "u":
    v, i = lax.top_k(lax.bitwise_not(arr), k)
    return lax.bitwise_not(v), i
  v, i = lax.top_k(lax.neg(arr), k)
  return lax.neg(v), i


@staged
def partition(a, kth, axis=-1):
  """``a`` partially sorted along ``axis``: entry ``kth`` in its sorted place, no larger
  entries before it, no smaller after (JAX's layout: the smallest ``kth + 1`` ascending,
  then the rest descending).

  Args:
    a: input array (or array-like).
    kth: index (or indices) of the element(s) to place in sorted position.
    axis: axis to partition along.

  Returns:
    An array of the shape of ``a``.

  Examples:
    >>> jnp.partition(jnp.array([4, 1, 3, 2]), 1)
    Array([1, 2, 4, 3], dtype=int64)
  """
  a, axis = _kth("partition", a, kth, axis)
  kth = canonicalize_axis(_util.index(kth, "kth"), a.shape[axis])
  arr = moveaxis(a, axis, -1)
  bottom = _bottom_k(arr, kth + 1)[0]
  top = lax.top_k(arr, arr.shape[-1] - kth - 1)[0]
  return moveaxis(lax.concatenate([bottom, top], arr.ndim - 1), -1, axis)


@staged
def argpartition(a, kth, axis=-1):
  """Indices that partition ``a`` along ``axis`` around ``kth`` (see ``partition``; the
  indices past ``kth`` in increasing order, as JAX's).

  Args:
    a: input array (or array-like).
    kth: index (or indices) of the element(s) to place in sorted position.
    axis: axis to partition along.

  Returns:
    An integer array of the shape of ``a``.

  Examples:
    >>> jnp.argpartition(jnp.array([4, 1, 3, 2]), 1)
    Array([1, 3, 0, 2], dtype=int32)
  """
  a, axis = _kth("argpartition", a, kth, axis)
  kth = canonicalize_axis(_util.index(kth, "kth"), a.shape[axis])
  arr = moveaxis(a, axis, -1)
  n = arr.shape[-1]
  bottom = _bottom_k(arr, kth + 1)[1]
  iota = lax.broadcasted_iota(bottom.dtype, arr.shape[:-1] + (kth + 1, n), arr.ndim)
  taken = lax.reduce_or(lax.eq(iota, lax.expand_dims(bottom, (arr.ndim,))), (arr.ndim - 1,))
  top = lax.top_k(_util.convert(lax.bitwise_not(taken), np.int8), n - kth - 1)[1]
  return moveaxis(lax.concatenate([bottom, top], arr.ndim - 1), -1, axis)


def sort_complex(a):
  """``a`` sorted along its last axis (by real, then imaginary part), as complex.

  Args:
    a: input array (or array-like).

  Returns:
    A complex array of the shape of ``a``.

  Examples:
    >>> jnp.sort_complex(jnp.array([3, 1 + 2j, 1 - 1j]))
    Array([1.-1.j, 1.+2.j, 3.+0.j], dtype=complex128)
  """
  a = ensure_arraylike("sort_complex", a)
  a = sort(a)
  return _util.convert(a, _util.to_complex_dtype(a.dtype))
