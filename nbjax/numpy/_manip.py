"""Shape manipulation, joining, splitting, sorting and selection in ``nbjax.numpy``.

Pipeline position: NumPy-signature functions (reshape with -1, moveaxis, stack, split,
tile, repeat, roll, pad, where, clip, sort, ...) reduce to static shape arithmetic here
and a few strict ``lax`` primitives (``reshape``, ``transpose``, ``broadcast_in_dim``,
``concatenate``, ``slice``, ``rev``, ``pad``, ``select``, ``sort``, ``gather``).
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from kernels.indexing import search_sorted as _search_sorted
from nbjax import core, dtypes, lax, sharding as _sharding
from nbjax.array import Array
from nbjax.registry import quiet_run
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.numpy import _util
from nbjax.numpy._indexing import nonzero, take
from nbjax.numpy._reductions import cumsum
from nbjax.numpy import _ufuncs
from nbjax.numpy._ufuncs import maximum, minimum, remainder
from nbjax.numpy._util import (as_array, canonicalize_axes, canonicalize_axis, canonicalize_shape,
                               ensure_arraylike)
from nbjax.eager_cache import staged

_BOOL = np.dtype(np.bool_)

# ----------------------------------------------------------------- reshaping


def _infer_shape(size, shape, ashape=None):
  """``shape`` with one -1 resolved for ``size`` elements (JAX's errors; ``ashape``: the
  source shape, for messages)."""
  orig = shape
  try:
    iter(shape)
  except TypeError:
    shape = [shape]  # (a 0-d value: JAX's list, as its error shows)
  shape = canonicalize_shape(shape)
  src = f"array of shape {ashape} (size {size})" if ashape is not None else f"array of size {size}"
  if shape.count(-1) > 1:
    raise TypeError(f"can only specify one unknown axis size with a `-1` value, got {orig}")
  if -1 in shape:
    known = math.prod(d for d in shape if d != -1)
    if known == 0 or size % known:
      raise TypeError(f"cannot reshape {src} into shape {orig} because the product of "
                      f"specified axis sizes ({known}) does not evenly divide {size}")
    shape = tuple(size // known if d == -1 else d for d in shape)
  if math.prod(shape) != size:
    raise TypeError(f"cannot reshape {src} into shape {orig} (size {math.prod(shape)})")
  return shape


def reshape(a, shape=None, order="C", *, newshape=None, copy=None, out_sharding=None):
  """``a`` with a new shape (one entry may be -1); ``order`` 'C' or 'F'.

  Args:
    a: input array (or array-like).
    shape: int or tuple of ints: the new shape (one entry may be -1).
    order: ``'C'`` (row-major, default) or ``'F'`` (column-major) element order.
    newshape: removed in JAX 0.10 (``shape``): passing it raises JAX's TypeError.
    copy: accepted for NumPy compatibility (arrays are immutable).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array with the elements of ``a`` in the new shape.

  Examples:
    >>> jnp.reshape(jnp.arange(6), (2, -1))
    Array([[0, 1, 2],
           [3, 4, 5]], dtype=int64)
  """
  if newshape is not None:
    raise TypeError("reshape() got an unexpected keyword argument 'newshape'")
  if out_sharding is not None:
    return _sharding.apply_out_sharding(reshape(a, shape, order),
                                        out_sharding, "reshape")
  del copy
  if type(a) is Array and _ctx.trace is _EVAL and order == "C" and newshape is None and (
      type(shape) is int or type(shape) is tuple and all(type(d) is int for d in shape)):
    try:  # eager, static shape: a view of the immutable buffer (as lax.reshape's NumPy run)
      out = Array._new(a._value.reshape(shape), a._weak)
      if not core.placement[0]:
        return out
      out = core.follow(out, a)
      if out is not None:  # (None: a is sharded, reshape_p places the result)
        return out
    except ValueError:  # (JAX's errors below)
      pass
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["reshape"](a, shape, order, newshape=newshape)
  a = ensure_arraylike("reshape", a)
  if shape is None:
    raise TypeError("reshape() missing 1 required positional argument: 'shape'")
  if order == "A":
    raise NotImplementedError("np.reshape order=A is not implemented.")
  shape = _infer_shape(a.size, shape, a.shape)
  if order == "F":
    nd = a.ndim
    a = lax.transpose(a, tuple(range(nd - 1, -1, -1))) if nd > 1 else a
    out = lax.reshape(a, shape[::-1])
    return lax.transpose(out, tuple(range(len(shape) - 1, -1, -1))) if len(shape) > 1 else out
  if order not in ("C", None):
    raise ValueError(f"Unexpected value for 'order' argument: {order}.")
  return a if a.shape == shape else lax.reshape(a, shape)


def ravel(a, order="C", *, out_sharding=None):
  """``a`` flattened to 1-d.

  Args:
    a: input array (or array-like).
    order: ``'C'`` (row-major, default) or ``'F'`` (column-major) element order.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.ravel(jnp.array([[1, 2], [3, 4]]))
    Array([1, 2, 3, 4], dtype=int64)
  """
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["ravel"](a, order)
  a = ensure_arraylike("ravel", a)
  if order == "K":
    raise NotImplementedError("Ravel not implemented for order='K'.")
  return reshape(a, (a.size,), order=order, out_sharding=out_sharding)


def transpose(a, axes=None):
  """``a`` with axes permuted (reversed by default).

  Args:
    a: input array (or array-like).
    axes: optional permutation of ``range(a.ndim)`` (default: reverse the axes).

  Returns:
    An array with permuted axes.

  Examples:
    >>> jnp.transpose(jnp.array([[1, 2], [3, 4]]))
    Array([[1, 3],
           [2, 4]], dtype=int64)
  """
  if axes is None and type(a) is Array and _ctx.trace is _EVAL:
    return a.T  # (eagerly NumPy's reversed axes, copied in C order)
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["transpose"](a, axes)
  a = ensure_arraylike("transpose", a)
  nd = a.ndim
  perm = tuple(range(nd - 1, -1, -1)) if axes is None else tuple(
      canonicalize_axis(i, nd) for i in axes)
  if sorted(perm) != list(range(nd)):
    raise TypeError("transpose permutation isn't a permutation of operand dimensions, got "
                    f"permutation {perm} for operand shape {a.shape}.")
  return a if perm == tuple(range(nd)) else lax.transpose(a, perm)


def permute_dims(a, /, axes):
  """Array-API spelling of ``transpose(a, axes)``.

  Args:
    a: input array (or array-like).
    axes: permutation of ``range(a.ndim)``.

  Returns:
    An array with permuted axes.

  Examples:
    >>> jnp.permute_dims(jnp.ones((2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
  """
  return transpose(a, axes)


def matrix_transpose(x, /):
  """Swap the last two axes.

  Args:
    x: input array, at least 2-d.

  Returns:
    An array with its last two axes swapped.

  Examples:
    >>> jnp.matrix_transpose(jnp.ones((2, 3, 4))).shape
    (2, 4, 3)
  """
  x = ensure_arraylike("matrix_transpose", x)
  if x.ndim < 2:
    raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got ndim={x.ndim}")
  perm = list(range(x.ndim))
  perm[-2], perm[-1] = perm[-1], perm[-2]
  return lax.transpose(x, tuple(perm))


@_util.keys_lifted
def swapaxes(a, axis1, axis2):
  """``a`` with two axes interchanged.

  Args:
    a: input array (or array-like).
    axis1: first axis of the 2-d planes.
    axis2: second axis of the 2-d planes.

  Returns:
    An array with ``axis1`` and ``axis2`` swapped.

  Examples:
    >>> jnp.swapaxes(jnp.ones((2, 3, 4)), 0, 2).shape
    (4, 3, 2)
  """
  a = ensure_arraylike("swapaxes", a)
  perm = list(range(a.ndim))
  i, j = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
  perm[i], perm[j] = perm[j], perm[i]
  return transpose(a, perm)


@_util.keys_lifted
def moveaxis(a, source, destination):
  """``a`` with axes ``source`` moved to ``destination`` (others keep their order).

  Args:
    a: input array (or array-like).
    source: int or sequence of ints: original positions of the axes.
    destination: int or sequence of ints: their new positions.

  Returns:
    An array with the axes moved.

  Examples:
    >>> jnp.moveaxis(jnp.ones((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
  """
  a = ensure_arraylike("moveaxis", a)
  as_list = lambda v: v if isinstance(v, (tuple, list)) else [v]
  src = canonicalize_axes(as_list(source), a.ndim, "source")
  dst = canonicalize_axes(as_list(destination), a.ndim, "destination")
  if len(src) != len(dst):
    raise ValueError("Inconsistent number of elements: "
                     f"{len(src)} vs {len(dst)}")
  perm = [i for i in range(a.ndim) if i not in src]
  for d, s in sorted(zip(dst, src)):
    perm.insert(d, s)
  return transpose(a, perm)


@_util.keys_lifted
def rollaxis(a, axis, start=0):
  """Roll ``axis`` backwards until it lies before ``start`` (prefer ``moveaxis``).

  Args:
    a: input array (or array-like).
    axis: the axis to move.
    start: the position it is moved in front of.

  Returns:
    An array with the axis moved.

  Examples:
    >>> jnp.rollaxis(jnp.ones((2, 3, 4)), 2).shape
    (4, 2, 3)
  """
  a = ensure_arraylike("rollaxis", a)
  axis = canonicalize_axis(axis, a.ndim)
  if not -a.ndim <= start <= a.ndim:  # NumPy's: start in [-ndim, ndim], negative from the end
    raise ValueError(f"start={start} must satisfy {-a.ndim}<=start<={a.ndim}")
  start = start + a.ndim if start < 0 else start
  if start > axis:
    start -= 1
  return moveaxis(a, axis, start)


def squeeze(a, axis=None):
  """``a`` without size-1 axes (all of them, or those in ``axis``).

  Args:
    a: input array (or array-like).
    axis: int or tuple of ints: size-1 axes to remove (``None``: all of them).

  Returns:
    An array without the squeezed axes.

  Examples:
    >>> jnp.squeeze(jnp.ones((1, 3, 1))).shape
    (3,)
  """
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["squeeze"](a, axis)
  a = ensure_arraylike("squeeze", a)
  if axis is None:
    axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
  else:
    axes = canonicalize_axes(axis, a.ndim)
    for i in axes:
      if a.shape[i] != 1:
        raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={a.shape} and dimensions={axes}")
  return lax.squeeze(a, axes) if axes else a


def expand_dims(a, axis):
  """``a`` with size-1 axes inserted at ``axis`` (positions in the result).

  Args:
    a: input array (or array-like).
    axis: int or tuple of ints: positions of the new axes in the result.

  Returns:
    An array with ``a.ndim + len(axis)`` dimensions.

  Examples:
    >>> jnp.expand_dims(jnp.array([1, 2]), 0)
    Array([[1, 2]], dtype=int64)
  """
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["expand_dims"](a, axis)
  a = ensure_arraylike("expand_dims", a)
  try:  # JAX's _ensure_index_tuple: an index, else an iterable of them (a range too)
    axes = (operator.index(axis),)
  except TypeError:
    axes = tuple(map(operator.index, axis))
  if len(set(axes)) != len(axes):  # (JAX's lax.expand_dims: the axes as given, then canonical)
    raise ValueError(f"repeated axis in lax.expand_dims: {axes}")
  nd = a.ndim + len(axes)
  canon = [canonicalize_axis(x, nd) for x in axes]
  if len(set(canon)) != len(canon):
    raise ValueError(f"repeated axis in lax.expand_dims: {canon}")
  return lax.expand_dims(a, tuple(sorted(canon)))


@_util.keys_lifted
def atleast_1d(*arys):
  """Each argument with at least one axis.

  Args:
    arys: one or more arrays (or array-likes).

  Returns:
    An array (a list of arrays for several arguments).

  Examples:
    >>> jnp.atleast_1d(3.0)
    Array([3.], dtype=float64, weak_type=True)
  """
  out = [a if (a := ensure_arraylike("atleast_1d", x)).ndim >= 1 else lax.reshape(a, (1,))
         for x in arys]
  return out[0] if len(out) == 1 else out


@_util.keys_lifted
def atleast_2d(*arys):
  """Each argument with at least two axes (1-d ``(n,)`` becomes ``(1, n)``).

  Args:
    arys: one or more arrays (or array-likes).

  Returns:
    An array (a list of arrays for several arguments).

  Examples:
    >>> jnp.atleast_2d(jnp.array([1, 2]))
    Array([[1, 2]], dtype=int64)
  """
  out = []
  for x in arys:
    a = ensure_arraylike("atleast_2d", x)
    out.append(a if a.ndim >= 2 else lax.reshape(a, (1,) * (2 - a.ndim) + a.shape))
  return out[0] if len(out) == 1 else out


@_util.keys_lifted
def atleast_3d(*arys):
  """Each argument with at least three axes: ``(n,)`` -> ``(1, n, 1)``,
  ``(m, n)`` -> ``(m, n, 1)``.

  Args:
    arys: one or more arrays (or array-likes).

  Returns:
    An array (a list of arrays for several arguments).

  Examples:
    >>> jnp.atleast_3d(jnp.array([1, 2])).shape
    (1, 2, 1)
  """
  out = []
  for x in arys:
    a = ensure_arraylike("atleast_3d", x)
    if a.ndim == 0:
      a = lax.reshape(a, (1, 1, 1))
    elif a.ndim == 1:
      a = lax.reshape(a, (1, a.shape[0], 1))
    elif a.ndim == 2:
      a = lax.reshape(a, a.shape + (1,))
    out.append(a)
  return out[0] if len(out) == 1 else out


broadcast_to = _util.broadcast_to
broadcast_arrays = _util.broadcast_arrays


def broadcast_shapes(*shapes):
  """The NumPy broadcast of static shapes.

  Args:
    shapes: shapes (tuples of ints) to broadcast together.

  Returns:
    The broadcast shape, a tuple of ints.

  Examples:
    >>> jnp.broadcast_shapes((2, 1), (3,))
    (2, 3)
  """
  return _util.broadcast_shapes(*(canonicalize_shape(s) for s in shapes))

# ----------------------------------------------------------------- joining and splitting


def concatenate(arrays, axis=0, dtype=None):
  """Join arrays along an existing ``axis`` (``None``: flatten first).

  Args:
    arrays: sequence of arrays.
    axis: axis to join along (``None``: flatten the inputs first).
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    The joined array.

  Examples:
    >>> jnp.concatenate([jnp.array([[1, 2]]), jnp.array([[3, 4]])], axis=0)
    Array([[1, 2],
           [3, 4]], dtype=int64)
  """
  if isinstance(arrays, (Array, Tracer, np.ndarray)):
    arrays = list(arrays)
  if not len(arrays):
    raise ValueError("Need at least one array to concatenate.")
  if dtype is None and type(axis) is int and _ctx.trace is _EVAL and type(arrays) in (list, tuple):
    a0 = arrays[0]  # eager, Arrays of one dtype, weak type and rank: NumPy's concatenate
    if type(a0) is Array and a0._value.ndim and all(
        type(a) is Array and a._value.dtype is a0._value.dtype and a._weak == a0._weak
        and a._value.ndim == a0._value.ndim for a in arrays):
      try:
        return Array._new(np.concatenate([a._value for a in arrays], axis), a0._weak)
      except (ValueError, np.exceptions.AxisError):  # (JAX's errors below)
        pass
  if type(arrays[0]) in _util.key_types:  # key arrays (nbjax.prng)
    return _util.key_impls["concatenate"](arrays, axis)
  _util.check_arraylike("concatenate", *arrays)
  arrays = [as_array(a) for a in arrays]
  if axis is None:
    arrays = [ravel(a) for a in arrays]
    axis = 0
  if arrays[0].ndim == 0:
    raise ValueError("Zero-dimensional arrays cannot be concatenated.")
  if len({a.ndim for a in arrays}) > 1:
    raise TypeError("Cannot concatenate arrays with different numbers of dimensions: got "
                    + ", ".join(str(a.shape) for a in arrays) + ".")
  axis = canonicalize_axis(axis, arrays[0].ndim)
  if dtype is not None:
    d = _util.canonicalize_user_dtype(dtype, "asarray")  # (JAX's: asarray(a, dtype))
    arrays = [_util.convert(a, d) for a in arrays]
  else:
    arrays = _util.promote_dtypes(*arrays)
  return arrays[0] if len(arrays) == 1 else lax.concatenate(arrays, axis)


def concat(arrays, /, *, axis=0):
  """Join ``arrays`` along ``axis`` (the Array API's name; no ``dtype``, as JAX's).

  Args:
    arrays: sequence of arrays.
    axis: axis to join along.

  Returns:
    The joined array.

  Examples:
    >>> jnp.concat([jnp.array([1, 2]), jnp.array([3])])
    Array([1, 2, 3], dtype=int64)
  """
  return concatenate(arrays, axis)


def stack(arrays, axis=0, out=None, dtype=None):
  """Join arrays of one shape along a new ``axis``.

  Args:
    arrays: sequence of arrays.
    axis: position of the new axis in the result.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    An array with one more dimension than the inputs.

  Examples:
    >>> jnp.stack([jnp.array([1, 2]), jnp.array([3, 4])], axis=1)
    Array([[1, 3],
           [2, 4]], dtype=int64)
  """
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
  if dtype is None and type(axis) is int and _ctx.trace is _EVAL and type(arrays) in (
      list, tuple) and arrays and type(arrays[0]) is Array:
    v0, w0 = arrays[0]._value, arrays[0]._weak  # eager, Arrays of one dtype, weak type and
    if all(type(a) is Array and a._value.dtype is v0.dtype and a._weak == w0  # shape:
           and a._value.shape == v0.shape for a in arrays):  # NumPy's stack
      try:
        return Array._new(np.stack([a._value for a in arrays], axis), w0)
      except np.exceptions.AxisError:  # (JAX's error below)
        pass
  if isinstance(arrays, (Array, Tracer, np.ndarray)):
    arrays = list(arrays)
  if not len(arrays):
    raise ValueError("Need at least one array to stack.")
  if type(arrays[0]) in _util.key_types:  # key arrays (nbjax.prng)
    return _util.key_impls["stack"](arrays, axis)
  _util.check_arraylike("stack", *arrays)
  arrays = [as_array(a) for a in arrays]
  shape0 = arrays[0].shape
  if any(a.shape != shape0 for a in arrays[1:]):
    what = ("Cannot stack arrays with different numbers of dimensions: got"
            if len({a.ndim for a in arrays}) > 1 else "All input arrays must have the same shape. Got")
    raise ValueError(f"{what} {', '.join(str(a.shape) for a in arrays)}.")
  axis = canonicalize_axis(axis, len(shape0) + 1)
  shape = (*shape0[:axis], 1, *shape0[axis:])
  if core.get_current_trace() is core.eval_trace and all(type(a) is Array for a in arrays):
    arrays = [Array._new(a._value.reshape(shape), a._weak) for a in arrays]  # free views
  else:
    dims = tuple(i for i in range(len(shape)) if i != axis)
    arrays = [lax.broadcast_in_dim(a, shape, dims) for a in arrays]
  return concatenate(arrays, axis, dtype=dtype)


def hstack(tup, dtype=None):
  """Stack horizontally (axis 1; axis 0 for 1-d arrays).

  Args:
    tup: sequence of arrays to stack.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    The stacked array.

  Examples:
    >>> jnp.hstack([jnp.array([1, 2]), jnp.array([3])])
    Array([1, 2, 3], dtype=int64)
  """
  arrs = [atleast_1d(a) for a in tup]
  return concatenate(arrs, 0 if arrs and arrs[0].ndim == 1 else 1, dtype=dtype)


def vstack(tup, dtype=None):
  """Stack vertically (axis 0 of the arrays as at least 2-d).

  Args:
    tup: sequence of arrays to stack.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    The stacked array.

  Examples:
    >>> jnp.vstack([jnp.array([1, 2]), jnp.array([3, 4])])
    Array([[1, 2],
           [3, 4]], dtype=int64)
  """
  return concatenate([atleast_2d(a) for a in tup], 0, dtype=dtype)



def dstack(tup, dtype=None):
  """Stack along the third axis (arrays as at least 3-d).

  Args:
    tup: sequence of arrays to stack.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    An array of at least three dimensions.

  Examples:
    >>> jnp.dstack([jnp.array([1, 2]), jnp.array([3, 4])])
    Array([[[1, 3],
            [2, 4]]], dtype=int64)
  """
  return concatenate([atleast_3d(a) for a in tup], 2, dtype=dtype)


def column_stack(tup):
  """Stack 1-d arrays as columns of a 2-d array.

  Args:
    tup: sequence of arrays to stack.

  Returns:
    A 2-d array.

  Examples:
    >>> jnp.column_stack([jnp.array([1, 2]), jnp.array([3, 4])])
    Array([[1, 3],
           [2, 4]], dtype=int64)
  """
  arrs = []
  for a in tup:
    a = ensure_arraylike("column_stack", a)
    arrs.append(lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a)
  return concatenate(arrs, 1)


def _split(name, ary, indices_or_sections, axis, even):
  """Pieces of sizes ``diff([0, *indices, n])`` (indices are not wrapped or clipped: as JAX,
  a negative size is a ValueError) or ``indices_or_sections`` near-equal sections."""
  ary = ensure_arraylike(name, ary)
  axis = canonicalize_axis(axis, ary.ndim)
  n = ary.shape[axis]
  for i in (indices_or_sections if isinstance(indices_or_sections, (tuple, list))
            else (indices_or_sections,)):  # traced sizes: JAX's concretization error
    core.concrete_or_error(None, i, f"in jax.numpy.{name} argument 1")
  if isinstance(indices_or_sections, (tuple, list)) or _util.ndim(indices_or_sections) == 1:
    cuts = [_util.index(i, "indices_or_sections") for i in np.asarray(indices_or_sections)]
    sizes = np.diff([0, *cuts, n]).tolist()
  else:
    v = core.concrete_or_error(None, indices_or_sections)  # (an array or a concrete tracer,
    k = int(np.asarray(v)) if isinstance(indices_or_sections, (Array, np.ndarray, Tracer)) \
        else _util.index(v, "indices_or_sections")  # float too: JAX's int() of its value)
    if k == 0:
      raise ValueError("number sections must be larger than 0.")
    q, r = divmod(n, k)
    if even and r:
      raise ValueError(f"array split does not result in an equal division: rest is {r}")
    sizes = [q + 1] * r + [q] * (k - r)
  if any(s < 0 for s in sizes):
    raise ValueError(f"Sizes passed to split must be nonnegative, got {sizes}")
  if sum(sizes) != n:
    raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                     f"operand shape {list(ary.shape)}")
  bounds = np.cumsum([0, *sizes]).tolist()
  return [lax.slice_in_dim(ary, lo, hi, axis=axis) for lo, hi in zip(bounds[:-1], bounds[1:])]


@_util.keys_lifted
def split(ary, indices_or_sections, axis=0):
  """Split into equal sections (an int) or at indices (a sequence) along ``axis``.

  Args:
    ary: input array.
    indices_or_sections: number of equal sections, or a sequence of split indices.
    axis: axis to split along.

  Returns:
    A list of arrays.

  Examples:
    >>> jnp.split(jnp.arange(6), 3)
    [Array([0, 1], dtype=int64), Array([2, 3], dtype=int64), Array([4, 5], dtype=int64)]
    >>> jnp.split(jnp.arange(5), [2])
    [Array([0, 1], dtype=int64), Array([2, 3, 4], dtype=int64)]
  """
  return _split("split", ary, indices_or_sections, axis, True)


@_util.keys_lifted
def array_split(ary, indices_or_sections, axis=0):
  """Like ``split`` but sections may differ in size by one."""
  return _split("array_split", ary, indices_or_sections, axis, False)


@_util.keys_lifted
def hsplit(ary, indices_or_sections):
  """``split`` along axis 1 (axis 0 for 1-d arrays)."""
  a = ensure_arraylike("hsplit", ary)
  return split(a, indices_or_sections, axis=0 if a.ndim == 1 else 1)


@_util.keys_lifted
def vsplit(ary, indices_or_sections):
  """``split`` along axis 0."""
  return split(ary, indices_or_sections, axis=0)


@_util.keys_lifted
def dsplit(ary, indices_or_sections):
  """``split`` along axis 2."""
  return split(ary, indices_or_sections, axis=2)


@_util.keys_lifted
@staged
def tile(A, reps):
  """``A`` repeated ``reps`` times along each axis.

  Args:
    A: input array.
    reps: int or tuple of ints: repetitions along each axis.

  Returns:
    The tiled array.

  Examples:
    >>> jnp.tile(jnp.array([1, 2]), 2)
    Array([1, 2, 1, 2], dtype=int64)
    >>> jnp.tile(jnp.array([1, 2]), (2, 1))
    Array([[1, 2],
           [1, 2]], dtype=int64)
  """
  A = ensure_arraylike("tile", A)
  reps = (reps,) if isinstance(reps, (int, np.integer)) or _util.ndim(reps) == 0 else tuple(reps)
  reps = tuple(_util.index(r, "reps") for r in reps)
  nd = builtins.max(len(reps), A.ndim)
  reps = (1,) * (nd - len(reps)) + reps
  A = lax.reshape(A, (1,) * (nd - A.ndim) + A.shape) if A.ndim < nd else A
  inter = tuple(d for r, n in zip(reps, A.shape) for d in (r, n))
  out = lax.broadcast_in_dim(A, inter, tuple(range(1, 2 * nd, 2)))
  return lax.reshape(out, tuple(r * n for r, n in zip(reps, A.shape)))


@_util.keys_lifted
@staged
def repeat(a, repeats, axis=None, *, total_repeat_length=None, out_sharding=None):
  """Repeat each element ``repeats`` times along ``axis`` (flattened when ``None``).

  ``repeats`` may be a scalar or per-element array; a traced array needs
  ``total_repeat_length`` (the static output length), as in JAX.

  Args:
    a: input array (or array-like).
    repeats: number of repetitions: a scalar, or one per element along ``axis``.
    axis: axis to repeat along (``None``: the flattened array).
    total_repeat_length: optional static total length of the result, needed with traced
      ``repeats`` under ``jit``.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    The repeated array.

  Examples:
    >>> jnp.repeat(jnp.array([1, 2]), 2)
    Array([1, 1, 2, 2], dtype=int64)
    >>> jnp.repeat(jnp.array([1, 2]), jnp.array([1, 3]))
    Array([1, 2, 2, 2], dtype=int64)
  """
  if out_sharding is not None:
    return _sharding.apply_out_sharding(
        repeat(a, repeats, axis, total_repeat_length=total_repeat_length), out_sharding, "repeat")
  a = ensure_arraylike("repeat", a)
  if axis is None:
    a, axis = ravel(a), 0
  if a.ndim == 0:  # as JAX: ``axis`` is not checked; one repeat count fills a 1-d array
    if np.size(repeats) != 1:
      raise ValueError("`repeat` with a scalar parameter `a` is only implemented for scalar "
                       "values of the parameter `repeats`.")
    if total_repeat_length is None:
      if not _util.is_concrete(repeats):
        raise core.ConcretizationTypeError(repeats, "jnp.repeat with a non-constant `repeats` "
                                           "requires `total_repeat_length`.")
      total_repeat_length = int(np.sum(_util.concrete(repeats)))
    return lax.broadcast_in_dim(a, (total_repeat_length,), ())
  axis = canonicalize_axis(axis, a.ndim)
  n = a.shape[axis]
  if _util.ndim(repeats) == 0 and _util.is_concrete(repeats):
    r = _util.index(repeats, "repeats")  # (r < 0: broadcast_in_dim's error, as JAX)
    shape = a.shape[:axis + 1] + (r,) + a.shape[axis + 1:]
    dims = tuple(i for i in range(a.ndim + 1) if i != axis + 1)
    out = lax.broadcast_in_dim(a, shape, dims)
    out = lax.reshape(out, a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
    if total_repeat_length is not None:
      out = _fit_length(out, total_repeat_length, axis)
    return out
  if _util.is_concrete(repeats):
    reps = np.broadcast_to(np.asarray(_util.concrete(repeats)), (n,))
    if (reps < 0).any():
      raise ValueError("repeats may not contain negative values.")
    idx = np.repeat(np.arange(n), reps)
    if total_repeat_length is not None:  # cut, or pad with the final element (as JAX)
      L = total_repeat_length
      idx = idx[:L] if idx.size >= L else np.concatenate(
          [idx, np.full(L - idx.size, idx[-1] if idx.size else 0)])
    return take(a, Array._new(idx.astype(dtypes.default_int_dtype())), axis=axis, mode="clip")
  if total_repeat_length is None:
    raise core.ConcretizationTypeError(
        repeats, "jnp.repeat with a non-constant `repeats` requires `total_repeat_length`.")
  reps = _util.broadcast_to(as_array(repeats), (n,))
  ends = cumsum(reps)
  pos = lax.iota(ends.dtype, total_repeat_length)
  idx = searchsorted(ends, pos, side="right")
  return take(a, idx, axis=axis, mode="clip")


def _fit_length(x, length, axis):
  n = x.shape[axis]
  if length <= n:
    return lax.slice_in_dim(x, 0, length, axis=axis)
  return concatenate([x, repeat(lax.slice_in_dim(x, n - 1, n, axis=axis), length - n, axis)], axis)

# ----------------------------------------------------------------- reordering


@_util.keys_lifted
def flip(m, axis=None):
  """Reverse the order of elements along ``axis`` (all axes by default).

  Args:
    m: input array (or array-like).
    axis: axis or axes to reverse (``None``: all).

  Returns:
    An array of the shape of ``m``.

  Examples:
    >>> jnp.flip(jnp.array([[1, 2], [3, 4]]))
    Array([[4, 3],
           [2, 1]], dtype=int64)
  """
  m = ensure_arraylike("flip", m)
  axes = canonicalize_axes(axis, m.ndim)
  return lax.rev(m, axes) if axes else m


@_util.keys_lifted
def fliplr(m):
  """Reverse along axis 1.

  Args:
    m: input array (or array-like).

  Returns:
    An array of the shape of ``m``.

  Examples:
    >>> jnp.fliplr(jnp.array([[1, 2], [3, 4]]))
    Array([[2, 1],
           [4, 3]], dtype=int64)
  """
  m = ensure_arraylike("fliplr", m)
  if m.ndim < 2:
    raise ValueError("fliplr requires an array of at least 2 dimensions.")
  return flip(m, 1)


@_util.keys_lifted
def flipud(m):
  """Reverse along axis 0.

  Args:
    m: input array (or array-like).

  Returns:
    An array of the shape of ``m``.

  Examples:
    >>> jnp.flipud(jnp.array([[1, 2], [3, 4]]))
    Array([[3, 4],
           [1, 2]], dtype=int64)
  """
  m = ensure_arraylike("flipud", m)
  if m.ndim < 1:
    raise ValueError("flipud requires an array of at least 1 dimension.")
  return flip(m, 0)


@_util.keys_lifted
def rot90(m, k=1, axes=(0, 1)):
  """Rotate by 90 degrees ``k`` times in the plane of ``axes``.

  Args:
    m: input array (or array-like).
    k: number of 90-degree counterclockwise rotations.
    axes: the two axes defining the plane of rotation.

  Returns:
    The rotated array.

  Examples:
    >>> jnp.rot90(jnp.array([[1, 2], [3, 4]]))
    Array([[2, 4],
           [1, 3]], dtype=int64)
  """
  m = ensure_arraylike("rot90", m)
  if m.ndim < 2:
    raise ValueError("rot90 requires its first argument to have ndim at least two, "
                     f"but got first argument of shape {m.shape}, which has ndim {m.ndim}")
  ax1, ax2 = axes
  ax1, ax2 = canonicalize_axis(ax1, m.ndim), canonicalize_axis(ax2, m.ndim)
  if ax1 == ax2:
    raise ValueError("Axes must be different")
  k = _util.index(k, "k") % 4
  if k == 0:
    return m
  if k == 2:
    return flip(flip(m, ax1), ax2)
  perm = list(range(m.ndim))
  perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
  return transpose(flip(m, ax2), perm) if k == 1 else flip(transpose(m, perm), ax2)


@_util.keys_lifted
@staged
def roll(a, shift, axis=None):
  """Roll elements along ``axis`` (flattened when ``None``); ``shift`` may be traced.

  Args:
    a: input array (or array-like).
    shift: int (or tuple of ints, one per axis): number of places to shift.
    axis: axis or axes to roll along (``None``: the flattened array).

  Returns:
    An array of the shape of ``a``.

  Examples:
    >>> jnp.roll(jnp.array([1, 2, 3, 4]), 1)
    Array([4, 1, 2, 3], dtype=int64)
  """
  a = ensure_arraylike("roll", a)
  shift, = _util.jax_array_protocol((shift,))
  if axis is None:
    return reshape(roll(ravel(a), shift, 0), a.shape)
  axes = (axis,) if _util.ndim(axis) == 0 else tuple(axis)
  shifts = (shift,) if _util.ndim(shift) == 0 else tuple(shift)
  if len(shifts) == 1 and len(axes) > 1:
    shifts = shifts * len(axes)
  if len(axes) == 1 and len(shifts) > 1:
    axes = axes * len(shifts)
  if len(shifts) != len(axes):
    raise ValueError("'shift' and 'axis' must have the same length")
  for s, ax in zip(shifts, axes):
    ax = canonicalize_axis(ax, a.ndim)
    n = a.shape[ax]
    if n == 0:
      continue
    if _util.is_concrete(s):
      k = _util.index(s, "shift") % n
      if k:
        a = lax.concatenate([lax.slice_in_dim(a, n - k, n, axis=ax),
                             lax.slice_in_dim(a, 0, n - k, axis=ax)], ax)
    else:
      s = _util.convert(s, dtypes.default_int_dtype())
      start = lax.sub(_util.lit(n, s.dtype, True), remainder(s, n))
      a = lax.dynamic_slice_in_dim(lax.concatenate([a, a], ax), start, n, axis=ax)
  return a


def _pad_pairs(vals, nd, name):
  """``vals`` (a scalar, ``(v,)``, ``(before, after)``, ``((before, after),)`` or one pair
  per axis; concrete) as ``nd`` (before, after) pairs, with JAX's errors."""
  if isinstance(vals, Tracer) or any(isinstance(v, Tracer) for v in _leaves(vals)):
    vals = _util.concrete(vals, f"{name} argument of jnp.pad")
  try:
    arr = np.asarray(_to_numpy_leaves(vals))
  except ValueError as e:
    if "inhomogeneous" in str(e):
      raise TypeError(f"`{name}` entries must be the same shape: {vals}") from e
    raise

  def scalar(v):
    if np.shape(v):
      raise TypeError(f"`{name}` entries must be the same shape: {arr}")
    return v
  if arr.shape == (nd, 2):
    return tuple((scalar(v[0]), scalar(v[1])) for v in arr)
  if arr.shape == (1, 2):
    pair = scalar(arr[0, 0]), scalar(arr[0, 1])
  elif arr.shape == (2,):
    pair = scalar(arr[0]), scalar(arr[1])
  elif arr.shape == (1,):
    pair = (scalar(arr[0]),) * 2
  elif arr.shape == ():
    pair = (scalar(arr.flat[0]),) * 2
  else:
    raise ValueError(f"jnp.pad: {name} with nd={nd} has unsupported shape {arr.shape}. "
                     f"Valid shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")
  return (pair,) * nd


def _leaves(x):
  if isinstance(x, (list, tuple)):
    for y in x:
      yield from _leaves(y)
  else:
    yield x


def _to_numpy_leaves(x):
  """Nested lists/tuples with nbjax arrays replaced by NumPy values."""
  if isinstance(x, (list, tuple)):
    return type(x)(_to_numpy_leaves(y) for y in x)
  if isinstance(x, (Array, Tracer)):
    return np.asarray(_util.concrete(x))
  return x


def _is_dim(v):
  try:
    operator.index(v)
    return True
  except Exception:
    return False


def _pad_index(mode, n, before, after):
  """Static source indices of a padded axis of length ``n`` for index-based modes."""
  i = np.arange(-before, n + after)
  if mode == "edge":
    return np.clip(i, 0, n - 1)
  if mode == "wrap":
    return i % n
  if mode == "reflect":
    if n == 1:
      return np.zeros_like(i)
    p = 2 * (n - 1)
    j = i % p
    return np.where(j >= n, p - j, j)
  p = 2 * n  # symmetric
  j = i % p
  return np.where(j >= n, p - 1 - j, j)


_PAD_KWARGS = {"empty": (), "edge": (), "wrap": (), "constant": ("constant_values",),
               "linear_ramp": ("end_values",), "maximum": ("stat_length",),
               "mean": ("stat_length",), "median": ("stat_length",),
               "minimum": ("stat_length",), "reflect": ("reflect_type",),
               "symmetric": ("reflect_type",)}


def pad(array, pad_width, mode="constant", **kwargs):
  """Pad an array (JAX implementation of :func:`numpy.pad`): modes 'constant'
  (``constant_values``, a scalar or per-axis pairs), 'edge', 'wrap', 'reflect' and
  'symmetric' (``reflect_type`` 'even' or 'odd'), 'linear_ramp' (``end_values``), 'maximum',
  'minimum', 'mean', 'median' (``stat_length``), 'empty' (zeros), or a callable applied along
  each axis as NumPy's ``func(vector, pad_width, iaxis, kwargs)``.

  Args:
    array: input array.
    pad_width: amount of padding: an int, a ``(before, after)`` pair, or one pair per axis.
    mode: padding mode, as listed above (default ``'constant'``).
    kwargs: mode-specific options such as ``constant_values``, ``end_values``,
      ``reflect_type`` or ``stat_length``.

  Returns:
    The padded array.

  Examples:
    >>> jnp.pad(jnp.array([1, 2, 3]), (1, 2))
    Array([0, 1, 2, 3, 0, 0], dtype=int64)
    >>> jnp.pad(jnp.array([1, 2, 3]), 2, mode='reflect')
    Array([3, 2, 1, 2, 3, 2, 1], dtype=int64)
  """
  array = ensure_arraylike("pad", array)
  nd = array.ndim
  pw = _pad_pairs(pad_width, nd, "pad_width")
  if pw and not all(_is_dim(b) and _is_dim(e) for b, e in pw):
    raise TypeError("`pad_width` must be of integral type.")
  if callable(mode):
    from nbjax.numpy._vectorize import apply_along_axis
    pw = tuple((int(b), int(e)) for b, e in pw)
    padded = lax.pad(array, _util.convert(0, array.dtype, dtypes.is_weakly_typed(array)),
                     [(b, e, 0) for b, e in pw])
    for ax in range(nd):
      padded = apply_along_axis(mode, ax, padded, pw[ax], ax, kwargs)
    return padded
  allowed = _PAD_KWARGS.get(mode) if isinstance(mode, str) else None
  if allowed is None:
    raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
  bad = set(kwargs) - set(allowed)
  if bad:
    raise ValueError(f"unsupported keyword arguments for mode '{mode}': {bad}")
  for k in ("stat_length", "end_values"):  # (static arguments of JAX's jitted _pad)
    try:
      hash(kwargs.get(k))
    except TypeError as e:
      v = kwargs[k]
      raise ValueError("Non-hashable static arguments are not supported. An error occurred "
                       f"while trying to hash an object of type {type(v)}, {v}. The error "
                       f"was:\nTypeError: {e}\n") from e
  if nd == 0:
    return array
  pw = [(int(b), int(e)) for b, e in pw]
  if builtins.any(b < 0 or e < 0 for b, e in pw):
    raise ValueError("index can't contain negative values")
  weak = dtypes.is_weakly_typed(array)
  if mode == "constant":
    return _pad_constant(array, pw, kwargs.get("constant_values", 0), weak)
  if mode == "empty":
    return lax.pad(array, _util.convert(0, array.dtype, weak), [(b, e, 0) for b, e in pw])
  if mode == "linear_ramp":
    return _pad_linear_ramp(array, pw, _pad_pairs(kwargs.get("end_values", 0), nd,
                                                  "end_values"), weak)
  if mode in ("maximum", "minimum", "mean", "median"):
    sl = kwargs.get("stat_length")
    return _pad_stats(array, pw, None if sl is None else _pad_pairs(sl, nd, "stat_length"),
                      mode, weak)
  reflect_type = kwargs.get("reflect_type", "even")
  if mode in ("reflect", "symmetric") and reflect_type not in ("even", "odd"):
    raise AssertionError()  # (JAX asserts)
  for ax, (b, e) in enumerate(pw):
    if array.shape[ax] == 0:
      if b > 0 or e > 0:
        raise ValueError(f"Cannot apply '{mode}' padding to empty axis")
      continue
    if b == e == 0:
      continue
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
      array = _pad_reflect_odd(array, ax, b, e, mode)
      continue
    idx = _pad_index(mode, array.shape[ax], b, e)
    array = take(array, Array._new(idx.astype(dtypes.default_int_dtype())), axis=ax,
                 mode="clip")  # (in bounds)
  return array


def _pad_constant(array, pw, cv, weak):
  nd = array.ndim
  if type(cv) not in (int, float, bool):  # (a complex one: JAX converts an array, real part)
    from nbjax.numpy._creation import asarray
    cv = asarray(cv)
  cv = _util.convert(cv, array.dtype, weak)
  if cv.ndim == 1 and cv.shape[-1] == 1:
    cv = lax.reshape(cv, ())
  if cv.ndim == 0:
    return lax.pad(array, cv, [(b, e, 0) for b, e in pw])
  if cv.ndim == 1 and cv.shape[-1] != 2:
    raise ValueError(f"jnp.pad: constant_values has unsupported shape {cv.shape}. If the "
                     "shape is 1D or 2D, the last dimension must be of size 1 or 2.")
  cv = broadcast_to(cv, (nd, 2))
  for ax, (b, e) in enumerate(pw):
    for k, w in ((0, (b, 0, 0)), (1, (0, e, 0))):
      if w[k]:
        cfg = [(0, 0, 0)] * nd
        cfg[ax] = w
        array = lax.pad(array, lax.reshape(lax.slice(cv, (ax, k), (ax + 1, k + 1)), ()), cfg)
  return array


def _pad_reflect_odd(array, ax, before, after, mode):
  """Odd reflection along ``ax``: each reflected block is ``2 * edge - block``, the edge
  moving out with every block (NumPy's and JAX's rule)."""
  n = array.shape[ax]
  offset = 1 if (mode == "reflect" and n > 1) else 0
  for is_before, padding in ((True, before), (False, after)):
    m = array.shape[ax]
    edge = lax.slice_in_dim(array, 0, 1, axis=ax) if is_before else (
        lax.slice_in_dim(array, m - 1, m, axis=ax))
    while padding > 0:
      cur = builtins.min(padding, n - offset)
      padding -= cur
      m = array.shape[ax]
      if is_before:
        x = lax.slice_in_dim(array, offset, offset + cur, axis=ax)
      else:
        stop = m if (mode == "symmetric" or n == 1) else m - 1
        x = lax.slice_in_dim(array, m - cur - offset, stop, axis=ax)
      x = flip(x, ax)
      x = _ufuncs.subtract(_ufuncs.multiply(2, edge), x)
      if n > 1:
        k = x.shape[ax]
        edge = lax.slice_in_dim(x, 0, 1, axis=ax) if is_before else (
            lax.slice_in_dim(x, k - 1, k, axis=ax))
      array = lax.concatenate([x, array] if is_before else [array, x], ax)
  return array


def _pad_linear_ramp(array, pw, end_values, weak):
  from nbjax.numpy._creation import linspace
  for ax, (b, e) in enumerate(pw):
    m = array.shape[ax]
    first = lax.squeeze(lax.slice_in_dim(array, 0, 1, axis=ax), (ax,))
    last = lax.squeeze(lax.slice_in_dim(array, m - 1, m, axis=ax), (ax,))
    before = linspace(end_values[ax][0], first, b, endpoint=False, dtype=array.dtype, axis=ax)
    after = linspace(end_values[ax][1], last, e, endpoint=False, dtype=array.dtype, axis=ax)
    before = _util.convert(before, array.dtype, weak)
    after = flip(_util.convert(after, array.dtype, weak), ax)
    array = lax.concatenate([before, array, after], ax)
  return array


def _pad_stats(array, pw, stat_length, mode, weak):
  from nbjax.numpy import _reductions, _statistics
  stat = {"maximum": _reductions.max, "minimum": _reductions.min, "mean": _reductions.mean,
          "median": _statistics.median}[mode]
  for ax, (b, e) in enumerate(pw):
    if stat_length is None:
      s_before = s_after = stat(array, axis=ax, keepdims=True)
    else:
      n = array.shape[ax]
      lb, la = stat_length[ax]
      if lb == 0 or la == 0:
        raise ValueError("stat_length of 0 yields no value for padding")
      lb, la = builtins.min(lb, n), builtins.min(la, n)
      lb, la = operator.index(lb), operator.index(la)
      s_before = stat(lax.slice_in_dim(array, 0, lb if lb >= 0 else lb + n, axis=ax),
                      axis=ax, keepdims=True)
      s_after = stat(lax.slice_in_dim(array, n - la if la > 0 else -la, n, axis=ax),
                     axis=ax, keepdims=True)
    if dtypes.is_int(array.dtype) and array.dtype != _BOOL:
      s_before, s_after = _ufuncs.round(s_before), _ufuncs.round(s_after)
    s_before = _util.convert(s_before, array.dtype, weak)
    s_after = _util.convert(s_after, array.dtype, weak)
    array = lax.concatenate([repeat(s_before, b, axis=ax), array, repeat(s_after, e, axis=ax)],
                            ax)
  return array

# ----------------------------------------------------------------- selection


_WHERE_KERNEL = 4096  # elements from which eager where runs select_n's kernel, not np.where


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
  """``x`` where ``condition`` else ``y`` (broadcast); one argument: ``nonzero(condition)``.

  Args:
    condition: boolean array (or array-like).
    x: values where ``condition`` is true.
    y: values where ``condition`` is false.
    size: with one argument: static number of indices to return (as in ``nonzero``).
    fill_value: with one argument and ``size``: index used for padding.

  Returns:
    An array of the broadcast shape (with one argument: a tuple of index arrays).

  Examples:
    >>> x = jnp.array([1, -2, 3])
    >>> jnp.where(x > 0, x, 0)
    Array([1, 0, 3], dtype=int64)
  """
  if x is None and y is None:
    return nonzero(condition, size=size, fill_value=fill_value)
  if size is not None or fill_value is not None:
    raise ValueError("size and fill_value arguments cannot be used in three-term where function.")
  if x is None or y is None:
    _util.check_arraylike("where", condition, x, y)
    raise ValueError("Either both or neither of the x and y arguments should be provided to "
                     f"jax.numpy.where, got {x} and {y}.")
  if type(condition) is Array and type(x) is Array and _ctx.trace is _EVAL:
    c, v = condition._value, x._value  # eager where(c, x, y), c boolean of x's shape, y of
    if c.dtype == np.bool_ and c.shape == v.shape and v.dtype.kind in "fc":  # x's dtype or a
      if type(y) is Array and y._value.dtype is v.dtype and y._value.shape == v.shape:  # scalar
        if v.size >= _WHERE_KERNEL:  # (select_n's branch-free kernel: 30000 float32 with a
          return lax.select_n_p.eager(condition, y, x)  # random mask 14 us, np.where 139)
        return Array._new(np.where(c, v, y._value), x._weak and y._weak)
      if (type(y) is float or type(y) is int and -2**53 <= y <= 2**53) and v.size < _WHERE_KERNEL:
        return Array._new(np.where(c, v, quiet_run(v.dtype.type, y)), x._weak)
  if type(x) in _util.key_types or type(y) in _util.key_types:  # key arrays (nbjax.prng)
    return _util.key_impls["where"](condition, x, y)
  _util.check_arraylike("where", condition, x, y)
  condition, x, y = _util.jax_array_protocol((condition, x, y))
  c = as_array(condition)
  c = c if c.dtype == _BOOL else lax.ne(c, _util.lit(0, c.dtype, True))
  x, y = _util.promote_dtypes(x, y)
  c, x, y = _util.broadcast_arrays(c, x, y)
  return lax.select(c, x, y)


def select(condlist, choicelist, default=0):
  """Elements of the first ``choicelist`` entry whose condition holds, else ``default``.

  Args:
    condlist: sequence of boolean arrays.
    choicelist: sequence of arrays (as many as ``condlist``) to pick from.
    default: value where no condition holds.

  Returns:
    An array of the broadcast shape.

  Examples:
    >>> x = jnp.arange(5)
    >>> jnp.select([x < 2, x > 3], [x, x * 10], default=-1)
    Array([ 0,  1, -1, -1, 40], dtype=int64)
  """
  if len(condlist) != len(choicelist):
    raise ValueError("condlist must have length equal to choicelist ({} vs {})".format(
        len(condlist), len(choicelist)))
  if not condlist:
    raise ValueError("condlist must be non-empty")
  out = default
  for c, v in zip(reversed(condlist), reversed(choicelist)):
    out = where(c, v, out)
  return out


def clip(arr=None, /, min=None, max=None):  # noqa: A002
  """Limit values to ``[min, max]`` (either bound may be None).

  Args:
    arr: input array.
    min: lower bound (None: no lower bound).
    max: upper bound (None: no upper bound).

  Returns:
    An array of the shape of ``arr``.

  Examples:
    >>> jnp.clip(jnp.array([-2, 0, 5]), 0, 3)
    Array([0, 0, 3], dtype=int64)
  """
  if type(arr) is Array and _ctx.trace is _EVAL and type(min) in _BOUNDS and \
      type(max) in _BOUNDS and arr._value.dtype.kind == "f":
    # eagerly, Python bounds of a float array: one pass of clamp's kernel, which computes
    # JAX's min(max, max(min, arr)) (IEEE max/min, weak bounds) in one loop
    d = arr._value.dtype
    lo, hi = _ufuncs._weak_literal(min, d), _ufuncs._weak_literal(max, d)
    if lo is not None and hi is not None:
      return lax.clamp(lo, arr, hi)
  return _clip(arr, min, max)


_BOUNDS = (int, float)


@staged
def _clip(arr, min, max):  # noqa: A002
  if arr is None:
    raise ValueError("No input was provided to the clip function.")
  _util.check_int_arg("min", min)
  _util.check_int_arg("max", max)
  arr = ensure_arraylike("clip", arr)
  if builtins.any(_is_complex_obj(t) for t in (arr, min, max)):
    raise ValueError(
        "Clip received a complex value either through the input or the min/max keywords. "
        "Complex values have no ordering and cannot be clipped. Please convert to a real "
        "value or array by taking the real or imaginary components via jax.numpy.real/imag "
        "respectively.")
  if min is not None:
    arr = maximum(min, arr)
  if max is not None:
    arr = minimum(max, arr)
  return arr


def _is_complex_obj(t):
  if t is None:
    return False
  d = getattr(t, "dtype", None)
  if isinstance(d, np.dtype):
    return d.kind == "c"
  return np.iscomplexobj(t)


def _sort_axis(a, axis):
  if axis is None:
    return ravel(a), 0
  return a, canonicalize_axis(axis, a.ndim)


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
  """Sorted copy of ``a`` along ``axis`` (flattened when ``None``); NaNs sort last.

  Args:
    a: input array (or array-like).
    axis: axis to sort along (``None``: the flattened array).
    kind: unsupported (a TypeError, as in JAX): use ``stable`` instead.
    order: unsupported (structured arrays); must be None.
    stable: whether to sort stably (equal elements keep their order; default True).
    descending: if True, sort in descending order.

  Returns:
    A sorted array.

  Examples:
    >>> jnp.sort(jnp.array([3, 1, 2]))
    Array([1, 2, 3], dtype=int64)
    >>> jnp.sort(jnp.array([3, 1, 2]), descending=True)
    Array([3, 2, 1], dtype=int64)
  """
  if kind is not None:
    raise TypeError("'kind' argument to sort is not supported. Use stable=True or stable=False "
                    "to specify sort stability.")
  if order is not None:
    raise TypeError("'order' argument to sort is not supported.")
  if type(a) is Array and type(axis) is int and not descending:  # the hot path: x.sort()
    r = _util.memo_run("sort", a, (axis, stable))
    if r is not None:
      return r
    nd = a._value.ndim
    if -nd <= axis < nd and a._value.shape[axis] > 1:
      params = {"dimension": axis % nd, "is_stable": bool(stable), "num_keys": 1}
      if _ctx.trace is not _EVAL:
        return lax.sort_p.bind(a, **params)[0]
      out = lax.sort_p.eager(a, **params)[0]
      _util.remember("sort", a, (axis, stable), lax.sort_p, params)
      return out
  a = ensure_arraylike("sort", a)
  a, axis = _sort_axis(a, axis)
  if a.ndim == 0 or a.shape[axis] <= 1:
    return a
  if descending:
    return lax.rev(lax.sort(a, dimension=axis, is_stable=stable), (axis,))
  return lax.sort(a, dimension=axis, is_stable=stable)


@staged
def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
  """Indices that sort ``a`` along ``axis`` (stable by default; descending keeps ties in
  order), of ``dtype`` (default: the default int).

  Args:
    a: input array (or array-like).
    axis: axis to sort along (``None``: the flattened array).
    kind: unsupported (a TypeError, as in JAX): use ``stable`` instead.
    order: unsupported (structured arrays); must be None.
    stable: whether to sort stably (equal elements keep their order; default True).
    descending: if True, sort in descending order.
    dtype: integer dtype of the indices (default: the default integer dtype).

  Returns:
    An integer array of the shape of ``a``.

  Examples:
    >>> jnp.argsort(jnp.array([3, 1, 2]))
    Array([1, 2, 0], dtype=int64)
    >>> jnp.argsort(jnp.array([3, 1, 2]), descending=True)
    Array([0, 2, 1], dtype=int64)
  """
  if kind is not None:
    raise TypeError("'kind' argument to argsort is not supported. Use stable=True or stable=False "
                    "to specify sort stability.")
  if order is not None:
    raise TypeError("'order' argument to argsort is not supported.")
  a = ensure_arraylike("argsort", a)
  a, axis = _sort_axis(a, axis)
  d = (dtypes.default_int_dtype() if dtype is None else
       _util.canonicalize_user_dtype(dtype, "argsort"))
  if a.ndim == 0:
    return _util.lit(0, d)
  n = a.shape[axis]
  if descending:
    a = lax.rev(a, (axis,))
  iota = lax.broadcasted_iota(d, a.shape, axis)
  _, idx = lax.sort((a, iota), dimension=axis, is_stable=stable, num_keys=1)
  if descending:
    idx = lax.rev(lax.sub(_util.lit(n - 1, d, True), idx), (axis,))
  return idx


def _np_searchsorted(a, v, side, d):
  """Eager ``searchsorted`` of a sorted real ``a`` with no NaN by NumPy's binary search, or
  from 256 queries ``kernels.indexing.search_sorted`` (32 searches in lockstep: 10^6 float32
  queries into 51 edges 51 -> 11 ms): their order is ``lax.sort``'s (NaN above all, -0.0 ==
  0.0), and on a sorted ``a`` every binary search finds the same index (10^4 float32 queries
  into 10^4: 1590 -> ~150 us); None for complex and bfloat16 operands, or an ``a`` out of
  order (JAX's search then decides)."""
  if a.dtype.kind not in "iuf" or v.dtype != a.dtype or a.dtype.kind == "f" and \
      np.isnan(a).any() or (a[1:] < a[:-1]).any():
    return None
  if v.size < 256 or a.dtype == np.float16:
    return np.asarray(np.searchsorted(a, v, side), d)
  out = np.empty(v.shape, d)
  _search_sorted(np.ascontiguousarray(a), np.ascontiguousarray(v).reshape(-1), out.reshape(-1),
                 side == "right")
  return out


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
  """Insertion indices of ``v`` into the sorted 1-d ``a`` keeping it sorted (binary
  search: ``ceil(log2(n + 1))`` vectorized halving steps, in ``lax.sort``'s order, NaN
  last; ``method`` is validated for JAX compatibility). int32 indices, as JAX's.

  Args:
    a: sorted 1-d array.
    v: values to insert.
    side: ``'left'`` or ``'right'``: which index to return for values equal to an element.
    sorter: optional indices that sort ``a``.
    method: ``'scan'`` (default), ``'scan_unrolled'``, ``'sort'`` or ``'compare_all'``,
      accepted for JAX compatibility.

  Returns:
    An integer array of the shape of ``v``.

  Examples:
    >>> jnp.searchsorted(jnp.array([1, 3, 5]), jnp.array([0, 3, 6]))
    Array([0, 1, 3], dtype=int32)
    >>> jnp.searchsorted(jnp.array([1, 3, 5]), 3, side='right')
    Array(2, dtype=int32)
  """
  a, v = ensure_arraylike("searchsorted", a, v)
  if a.ndim != 1:
    raise ValueError("a should be 1-dimensional")
  if side not in ("left", "right"):
    raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
  if method not in ("compare_all", "scan", "scan_unrolled", "sort"):
    raise ValueError(f"invalid argument method={method!r}, expected one of ['compare_all', "
                     "'scan', 'scan_unrolled', 'sort']")
  if sorter is not None:
    a = take(a, sorter, mode="clip")
  a, v = _util.promote_dtypes(a, v)
  n = a.shape[0]
  d = np.dtype(np.int32) if n < 2 ** 31 else dtypes.canonicalize_explicit_dtype(
      np.dtype(np.int64), "searchsorted")
  d.type(n)  # (JAX's early check: n past int32, int64 truncated with x64 off, overflows)
  if n == 0:
    return lax.full_like(v, 0, d)
  if type(a) is Array and type(v) is Array and _ctx.trace is _EVAL:
    out = _np_searchsorted(a._value, v._value, side, d)
    if out is not None:
      return Array._new(out)
  return _binary_search(a, v, side, d)


@staged
def _binary_search(a, v, side, d):
  """``searchsorted``'s ``ceil(log2(n + 1))`` vectorized halving steps (JAX's ``"scan"``)."""
  n = a.shape[0]
  if dtypes.is_inexact(a.dtype):  # NaN sorts last; complex: lexicographic (lax.sort's order)
    def flt(x, y):
      return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(lax.ne(y, y), lax.eq(x, x)))
    if not dtypes.is_complex(a.dtype):  # (bfloat16's NumPy kind is 'V')
      lt = flt
    else:
      def lt(x, y):
        xr, yr = lax.real(x), lax.real(y)
        same = lax.bitwise_or(lax.eq(xr, yr), lax.bitwise_and(lax.ne(xr, xr), lax.ne(yr, yr)))
        return lax.bitwise_or(flt(xr, yr),
                              lax.bitwise_and(same, flt(lax.imag(x), lax.imag(y))))
  else:
    lt = lax.lt
  go_right = (lambda x, y: lax.bitwise_not(lt(y, x))) if side == "right" else lt
  lo = lax.full_like(v, 0, d)
  hi = lax.full_like(v, n, d)
  one, two = _util.lit(1, d, True), _util.lit(2, d, True)
  for _ in range(int(n).bit_length()):
    active = lax.lt(lo, hi)
    mid = lax.div(lax.add(lo, hi), two)
    right = go_right(take(a, mid, mode="clip"), v)
    lo = lax.select(lax.bitwise_and(active, right), lax.add(mid, one), lo)
    hi = lax.select(lax.bitwise_and(active, lax.bitwise_not(right)), mid, hi)
  return lo
