"""Indexing primitives: dynamic_slice, dynamic_update_slice, gather and the scatters.

Pipeline position: ``nbjax.numpy`` indexing (``x[idx]``, ``x.at[idx].set``) and ``lax``
users bind these primitives; eagerly the numba kernels of ``kernels.indexing`` run them
(a *plan* of int64 strides, cached per shapes and dimension numbers, describes the
index->window mapping), with a vectorized NumPy version as reference and fallback.
Every rule of each primitive is here: abstract eval with JAX's errors, jvp, transpose
(gather <-> scatter-add, dynamic_slice <-> dynamic_update_slice), and batching rules that
fold the vmapped axis into the dimension numbers (``operand_batching_dims``), so a
vmapped gather/scatter/dynamic_slice is one kernel call.

Out-of-bounds semantics are JAX's: dynamic_slice/dynamic_update_slice clamp starts;
``gather`` clamps (``CLIP``/``PROMISE_IN_BOUNDS``; the default ``mode=None`` is
``PROMISE_IN_BOUNDS`` as in JAX) or fills whole windows (``FILL_OR_DROP``, fill NaN / min
int / max uint / True by default); scatters drop out-of-bounds windows (``FILL_OR_DROP``,
the default) or clamp (``CLIP``).
"""
from __future__ import annotations

import enum
import functools
import math
import operator
from typing import NamedTuple

import numpy as np

from kernels import indexing as K
from kernels.elementwise import entry as _entry
from nbjax import core, dtypes, registry
# (large outputs reuse buffers)
from nbjax.array import POOL_MIN, Array, copy as pooled_copy, empty as pooled_empty
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad, batching, jet
from nbjax.lax.elementwise import _any, _complex, _int, _num, accepts, check_same_dtypes
from nbjax.lax.shape import (ALL_DTYPES, PAR_MIN, _UINT, bits, broadcast_in_dim, c_strides,
                             concatenate, random_array, reshape, zeros)

not_mapped = batching.not_mapped
_I64_MAX = np.iinfo(np.int64).max


class GatherDimensionNumbers(NamedTuple):
  """How the dimensions of ``operand``, ``start_indices`` and the output of a gather relate
  (XLA's gather; the index vector is always the last dimension of ``start_indices``)."""
  offset_dims: tuple
  collapsed_slice_dims: tuple
  start_index_map: tuple
  operand_batching_dims: tuple = ()
  start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
  """How the dimensions of ``operand``, ``scatter_indices`` and ``updates`` relate."""
  update_window_dims: tuple
  inserted_window_dims: tuple
  scatter_dims_to_operand_dims: tuple
  operand_batching_dims: tuple = ()
  scatter_indices_batching_dims: tuple = ()


class GatherScatterMode(enum.Enum):
  """Out-of-bounds handling: ``CLIP`` clamps starts so the window fits; ``FILL_OR_DROP``
  fills out-of-bounds gather windows / drops out-of-bounds scatter windows;
  ``PROMISE_IN_BOUNDS`` promises in-bounds indices (gathers clamp, scatters drop)."""
  CLIP = enum.auto()
  FILL_OR_DROP = enum.auto()
  PROMISE_IN_BOUNDS = enum.auto()
  ONE_HOT = enum.auto()

  @staticmethod
  def from_any(s):
    if isinstance(s, GatherScatterMode):
      return s
    if s == "clip":
      return GatherScatterMode.CLIP
    if s is None or s == "fill" or s == "drop":
      return GatherScatterMode.FILL_OR_DROP
    if s == "promise_in_bounds":
      return GatherScatterMode.PROMISE_IN_BOUNDS
    if s == "one_hot":
      return GatherScatterMode.ONE_HOT
    raise ValueError(f'Unknown gather mode "{s}"')


def _tup(xs):
  return tuple(int(x) for x in xs)


def _gdn(dn):
  return GatherDimensionNumbers(*(_tup(f) for f in dn))


def _sdn(dn):
  return ScatterDimensionNumbers(*(_tup(f) for f in dn))


def _int_starts(starts):
  """Start indices as int64 (unsigned values beyond int64 saturate: they clamp the same)."""
  return np.array([min(int(s), _I64_MAX) for s in starts], np.int64)


def _half(dtype):
  return dtype == np.float16


# ============================================================================ dynamic_slice


def _check_index_dtypes(name, starts):
  if any(s.dtype != starts[0].dtype or s.dtype not in _int for s in starts):
    raise TypeError(f"index arguments to {name} must be integers of the same type, got: "
                    f"{', '.join(s.dtype.name for s in starts)}")
  if any(s.ndim != 0 for s in starts):
    raise TypeError(f"start_indices arguments to {name} must be scalars, got indices "
                    f"{', '.join(s.str_short() for s in starts)}")


def _dynamic_slice_abstract_eval(operand, *start_indices, slice_sizes):
  if len(start_indices) != operand.ndim:
    raise TypeError("dynamic_slice start_indices must have length equal to the number of "
                    f"dimensions of the operand, got indices {len(start_indices)} for operand "
                    f"shape {operand.shape}.")
  if len(slice_sizes) != operand.ndim:
    raise TypeError("dynamic_slice slice_sizes must have the same length as start_indices, got "
                    f"start_indices length {len(start_indices)} and slice_sizes {slice_sizes}.")
  if not all(map(operator.ge, operand.shape, slice_sizes)):
    raise TypeError("slice slice_sizes must be less than or equal to operand shape, got "
                    f"slice_sizes {slice_sizes} for operand shape {operand.shape}.")
  if not all(s >= 0 for s in slice_sizes):
    raise TypeError("slice slice_sizes must be greater than or equal to zero, got "
                    f"slice_sizes of {slice_sizes}.")
  _check_index_dtypes("dynamic_slice", start_indices)
  return ShapedArray(tuple(slice_sizes), operand.dtype, operand.weak_type)


def _dynamic_slice_numba(x, *starts, slice_sizes):
  out = np.empty(slice_sizes, x.dtype)
  i64 = np.int64
  K.dynamic_slice(bits(x.reshape(-1)), np.array(x.shape, i64), np.array(c_strides(x.shape), i64),
                  _int_starts(starts), np.array(slice_sizes, i64), bits(out.reshape(-1)))
  return out


def _clamped(starts, shape, sizes):
  return [max(0, min(int(s), d - n)) for s, d, n in zip(starts, shape, sizes)]


def _dynamic_slice_numpy(x, *starts, slice_sizes):
  c = _clamped(starts, x.shape, slice_sizes)
  return x[tuple(slice(s, s + n) for s, n in zip(c, slice_sizes))].copy()


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
  x, *starts = primals
  out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
  g = tangents[0]
  if type(g) is ad.Zero:
    return out, ad.Zero.from_primal_value(out)
  return out, dynamic_slice_p.bind(g, *starts, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, operand, *starts, slice_sizes):
  assert ad.is_undefined_primal(operand)
  if type(ct) is ad.Zero:
    return [ad.Zero(operand.aval)] + [None] * len(starts)
  z = zeros(operand.aval.shape, core.get_aval(ct).dtype)
  return [dynamic_update_slice_p.bind(z, ct, *starts)] + [None] * len(starts)


def _starts_as_indices(starts, sdims, size):
  """Scalar start indices (some batched along ``size``) as one (size, n) index array."""
  cols = [broadcast_in_dim(s, (size, 1), ()) if d is not_mapped else reshape(s, (size, 1))
          for s, d in zip(starts, sdims)]
  return concatenate(cols, 1) if len(cols) > 1 else cols[0]


def _dynamic_slice_batch(vals, dims, *, slice_sizes):
  x, *starts = vals
  xd, *sdims = dims
  if all(d is not_mapped for d in sdims):
    size = core.get_aval(x).shape[xd]
    zero = np.zeros((), core.get_aval(starts[0]).dtype if starts else np.int32)
    starts = list(starts)
    starts.insert(xd, zero)
    sizes = list(slice_sizes)
    sizes.insert(xd, size)
    return dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(sizes)), xd
  size = next(core.get_aval(s).shape[d] for s, d in zip(starts, sdims) if d is not not_mapped)
  nd = len(slice_sizes)
  dn = GatherDimensionNumbers(offset_dims=tuple(range(nd)), collapsed_slice_dims=(),
                              start_index_map=tuple(range(nd)))
  return _gather_batch([x, _starts_as_indices(starts, sdims, size)], [xd, 0],
                       dimension_numbers=dn, slice_sizes=tuple(slice_sizes),
                       unique_indices=False, indices_are_sorted=False,
                       mode=GatherScatterMode.CLIP, fill_value=None)


dynamic_slice_p = Primitive("dynamic_slice")


def _dynamic_slice_indices(operand, start_indices, allow_negative_indices=True):
  """Start indices with negative values wrapped (``i + dim``), as JAX's ``dynamic_slice``."""
  shape = np.shape(operand)
  if len(start_indices) != len(shape):
    raise ValueError("Length of slice indices must match number of operand dimensions "
                     f"({len(start_indices)} vs {shape})")
  if not isinstance(start_indices, (list, tuple)):
    if np.ndim(start_indices) != 1:
      raise ValueError(f"Slice indices must be a 1D sequence, got {np.shape(start_indices)}")
    start_indices = list(start_indices)
  if isinstance(allow_negative_indices, bool):
    allow_negative_indices = [allow_negative_indices] * len(start_indices)
  arrays = [i for i in start_indices if not isinstance(i, int)]
  py_dtype = (core.get_aval(arrays[0]).dtype if arrays  # Python ints are weak: take theirs
              else dtypes.canonicalize_dtype(np.int64))
  if dtypes.is_int(py_dtype) and max(shape, default=0) > np.iinfo(py_dtype).max:  # int8 into 300
    py_dtype = dtypes.canonicalize_dtype(np.int64)
    start_indices = [i if isinstance(i, int) else _widen(i, py_dtype) for i in start_indices]
  out = []
  for i, d, neg in zip(start_indices, shape, allow_negative_indices):
    if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
      if i < 0 and not neg:
        raise ValueError(f"Index {i} is out of bounds for dimension {d} if "
                         "allow_negative_indices=False")
      dt = np.asarray(i).dtype if isinstance(i, np.integer) else py_dtype
      out.append(np.asarray(i + d if i < 0 else i, dt))
      continue
    dt = core.get_aval(i).dtype
    if dt.kind == "u" or not neg:
      out.append(i)
      continue
    from nbjax import lax
    out.append(lax.select_n(lax.lt(i, np.zeros((), dt)), i, lax.add(i, np.asarray(d, dt))))
  return out


def _widen(i, dtype):
  """A start index as ``dtype`` (uint64 beyond its range saturates: it clamps the same)."""
  from nbjax import lax
  if np.dtype(core.get_aval(i).dtype) == np.uint64:
    i = lax.min(i, np.asarray(_I64_MAX, np.uint64))
  return lax.convert_element_type(i, dtype)


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
  """Slice of ``slice_sizes`` at (traced) ``start_indices``; starts are clamped so the slice
  fits, negative starts count from the end when ``allow_negative_indices``."""
  starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
  return dynamic_slice_p.bind(operand, *starts, slice_sizes=_tup(slice_sizes))


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *, allow_negative_indices=True):
  """``dynamic_slice`` along one ``axis``."""
  shape = np.shape(operand)
  axis = int(axis)
  starts = [_zero_like_index(start_index)] * len(shape)
  starts[axis] = start_index
  sizes = list(shape)
  sizes[axis] = int(slice_size)
  return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *, allow_negative_indices=True):
  """``dynamic_slice_in_dim`` of size 1, the axis kept or squeezed."""
  from nbjax.lax.shape import squeeze
  r = dynamic_slice_in_dim(operand, index, 1, axis, allow_negative_indices=allow_negative_indices)
  return r if keepdims else squeeze(r, (axis,))


def _zero_like_index(i):
  return 0 if isinstance(i, int) else np.zeros((), core.get_aval(i).dtype)


# ============================================================================ dynamic_update_slice


def _dynamic_update_slice_abstract_eval(operand, update, *start_indices):
  if operand.ndim != update.ndim:
    raise TypeError("dynamic_update_slice update must have the same rank as operand, got "
                    f"update shape {update.shape} for operand shape {operand.shape}.")
  if operand.ndim != len(start_indices):
    raise TypeError("dynamic_update_slice start_indices must have length equal to the rank of "
                    f"operand, got indices {len(start_indices)} for operand shape {operand.shape}.")
  if not all(map(operator.ge, operand.shape, update.shape)):
    raise TypeError("dynamic_update_slice update shape must be smaller than operand shape, got "
                    f"update shape {update.shape} for operand shape {operand.shape}.")
  if operand.dtype != update.dtype:
    raise TypeError("lax.dynamic_update_slice requires arguments to have the same dtypes, got "
                    f"{operand.dtype.name}, {update.dtype.name}.")
  _check_index_dtypes("dynamic_update_slice", start_indices)
  return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


def _dynamic_update_slice_numba(x, upd, *starts):
  out = pooled_copy(x)
  i64 = np.int64
  K.dynamic_update_slice(bits(out.reshape(-1)), np.array(x.shape, i64),
                         np.array(c_strides(x.shape), i64), bits(upd.reshape(-1)),
                         np.array(upd.shape, i64), _int_starts(starts))
  return out


def _dynamic_update_slice_numpy(x, upd, *starts):
  out = x.copy()
  c = _clamped(starts, x.shape, upd.shape)
  out[tuple(slice(s, s + n) for s, n in zip(c, upd.shape))] = upd
  return out


def _dynamic_update_slice_jvp(primals, tangents):
  x, upd, *starts = primals
  out = dynamic_update_slice_p.bind(x, upd, *starts)
  gx, gu = tangents[:2]
  if type(gx) is ad.Zero and type(gu) is ad.Zero:
    return out, ad.Zero.from_primal_value(out)
  return out, dynamic_update_slice_p.bind(ad.instantiate_zeros(gx), ad.instantiate_zeros(gu),
                                          *starts)


def _dynamic_update_slice_transpose(ct, operand, update, *starts):
  n = len(starts)
  if type(ct) is ad.Zero:
    return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None,
            ad.Zero(update.aval) if ad.is_undefined_primal(update) else None] + [None] * n
  ushape = update.aval.shape if ad.is_undefined_primal(update) else core.get_aval(update).shape
  ct_dtype = core.get_aval(ct).dtype
  op_t = (dynamic_update_slice_p.bind(ct, zeros(ushape, ct_dtype), *starts)
          if ad.is_undefined_primal(operand) else None)
  up_t = (dynamic_slice_p.bind(ct, *starts, slice_sizes=tuple(ushape))
          if ad.is_undefined_primal(update) else None)
  return [op_t, up_t] + [None] * n


def _dynamic_update_slice_batch(vals, dims):
  x, upd, *starts = vals
  xd, ud, *sdims = dims
  size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
  x = batching.bdim_at_front(x, xd, size)
  upd = batching.bdim_at_front(upd, ud, size)
  if all(d is not_mapped for d in sdims):
    zero = np.zeros((), core.get_aval(starts[0]).dtype if starts else np.int32)
    return dynamic_update_slice_p.bind(x, upd, zero, *starts), 0
  nd = len(starts)
  dn = ScatterDimensionNumbers(update_window_dims=tuple(range(nd)), inserted_window_dims=(),
                               scatter_dims_to_operand_dims=tuple(range(nd)))
  return _scatter_batch(scatter_p, [x, _starts_as_indices(starts, sdims, size), upd], [0, 0, 0],
                        dimension_numbers=dn, indices_are_sorted=True, unique_indices=True,
                        mode=GatherScatterMode.CLIP, update_jaxpr=None, update_consts=())


dynamic_update_slice_p = Primitive("dynamic_update_slice")


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
  """``operand`` with ``update`` written at (traced) ``start_indices`` (clamped to fit)."""
  starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
  return dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *, allow_negative_indices=True):
  """``dynamic_update_slice`` along one ``axis``."""
  axis = int(axis)
  starts = [_zero_like_index(start_index)] * np.ndim(operand)
  starts[axis] = start_index
  return dynamic_update_slice(operand, update, starts,
                              allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand, update, index, axis):
  """Write ``update`` (without, or with a size-1, ``axis``) at ``index`` along ``axis``."""
  from nbjax.lax.shape import expand_dims
  axis = int(axis)
  if np.ndim(update) != np.ndim(operand):
    update = expand_dims(update, (axis,))
  return dynamic_update_slice_in_dim(operand, update, index, axis)


# ============================================================================ gather


def _is_sorted(dims, op, name):
  if list(dims) != sorted(dims):
    raise TypeError(f"{name} in {op} op must be sorted; got {dims}")


def _no_dups(dims, op, name):
  if len(set(dims)) != len(dims):
    raise TypeError(f"{name} in {op} op must not repeat; got: {dims}.")


def _in_range(dims, rank, op, name):
  for d in dims:
    if not 0 <= d < rank:
      raise TypeError(f"Invalid {name} set in {op} op; valid range is [0, {rank}); got: {d}.")


def _disjoint(a, b, op, na, nb):
  if not set(a).isdisjoint(b):
    raise TypeError(f"{na} and {nb} in {op} op must be disjoint; got: {a} and {b}.")


def _gather_shape(operand_shape, indices_shape, dn, slice_sizes):
  """The output shape of a gather (unvalidated)."""
  rank = len(dn.offset_dims) + len(indices_shape) - 1
  window = iter(s for i, s in enumerate(slice_sizes)
                if i not in dn.collapsed_slice_dims and i not in dn.operand_batching_dims)
  batch = iter(indices_shape[:-1])
  return tuple(next(window) if i in dn.offset_dims else next(batch) for i in range(rank))


def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                          indices_are_sorted, mode, fill_value):
  dn = dimension_numbers
  op = "gather"
  if not isinstance(dn, GatherDimensionNumbers):
    raise TypeError(f"gather dimension_numbers must be a GatherDimensionNumbers, got {dn!r}")
  if indices.dtype not in _int:
    raise ValueError(f"gather: indices must have an integer type, got {indices.dtype.name}")
  if indices.ndim < 1:
    raise TypeError("gather indices must have rank >= 1 (the last dimension is the index "
                    f"vector), got indices shape {indices.shape}")
  ivd = indices.ndim - 1
  _is_sorted(dn.offset_dims, op, "offset_dims")
  _no_dups(dn.offset_dims, op, "offset_dims")
  out_rank = len(dn.offset_dims) + indices.ndim - 1
  for i, d in enumerate(dn.offset_dims):
    if not 0 <= d < out_rank:
      raise TypeError(f"Offset dimension {i} in gather op is out of bounds; got {d}, but should "
                      f"have been in [0, {out_rank})")
  if len(dn.start_index_map) != indices.shape[ivd]:
    raise TypeError(f"Gather op has {len(dn.start_index_map)} elements in start_index_map and "
                    f"the bound of dimension index_vector_dim={ivd} of indices is "
                    f"{indices.shape[ivd]}. These two numbers must be equal.")
  for i, d in enumerate(dn.start_index_map):
    if not 0 <= d < operand.ndim:
      raise TypeError(f"Invalid start_index_map; domain is [0, {operand.ndim}), "
                      f"got: {i}->{d}.")
  _no_dups(dn.start_index_map, op, "start_index_map")
  _is_sorted(dn.collapsed_slice_dims, op, "collapsed_slice_dims")
  _in_range(dn.collapsed_slice_dims, operand.ndim, op, "collapsed_slice_dims")
  _no_dups(dn.collapsed_slice_dims, op, "collapsed_slice_dims")
  _no_dups(dn.operand_batching_dims, op, "operand_batching_dims")
  _is_sorted(dn.operand_batching_dims, op, "operand_batching_dims")
  _in_range(dn.operand_batching_dims, operand.ndim, op, "operand_batching_dims")
  _disjoint(dn.collapsed_slice_dims, dn.operand_batching_dims, op, "collapsed_slice_dims",
            "operand_batching_dims")
  _disjoint(dn.start_index_map, dn.operand_batching_dims, op, "start_index_map",
            "operand_batching_dims")
  _no_dups(dn.start_indices_batching_dims, op, "start_indices_batching_dims")
  _in_range(dn.start_indices_batching_dims, indices.ndim, op, "start_indices_batching_dims")
  if ivd in dn.start_indices_batching_dims:
    raise TypeError("Gather op cannot have the index vector dimension as a batching dimension; "
                    f"got {dn.start_indices_batching_dims}.")
  if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims):
    raise TypeError("Gather op requires equal numbers of operand_batching_dims and "
                    f"start_indices_batching_dims, got {dn.operand_batching_dims} and "
                    f"{dn.start_indices_batching_dims}.")
  ob = tuple(operand.shape[i] for i in dn.operand_batching_dims)
  ib = tuple(indices.shape[i] for i in dn.start_indices_batching_dims)
  if ob != ib:
    raise TypeError("Gather op requires operand batching dimensions and indices batching "
                    f"dimensions to have the same shape, got {ob} and {ib}.")
  if operand.ndim != len(slice_sizes):
    raise TypeError("Gather op must have one slice size for every input dimension; got: "
                    f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={operand.ndim}")
  if len(slice_sizes) != (len(dn.offset_dims) + len(dn.collapsed_slice_dims)
                          + len(dn.operand_batching_dims)):
    raise TypeError("All components of the offset index in a gather op must either be a offset "
                    f"dimension or explicitly collapsed/batching; got len(slice_sizes)="
                    f"{len(slice_sizes)}, output_slice_sizes={dn.offset_dims}, "
                    f"collapsed_slice_dims={dn.collapsed_slice_dims}, operand_batching_dims="
                    f"{dn.operand_batching_dims}.")
  for i, (s, d) in enumerate(zip(slice_sizes, operand.shape)):
    if not 0 <= s <= d and math.prod(indices.shape):  # (no indices: JAX checks nothing)
      raise TypeError(f"Slice size at index {i} in gather op is out of range, must be within "
                      f"[0, {d} + 1), got {s}.")
  for i, d in enumerate(dn.collapsed_slice_dims):
    if slice_sizes[d] != 1:
      raise TypeError("Gather op can only collapse slice dims with bound 1, but bound is "
                      f"{slice_sizes[d]} for index {d} at position {i}.")
  for i, d in enumerate(dn.operand_batching_dims):
    if slice_sizes[d] > 1:
      raise TypeError("Gather op can only have operand batching dims with bound 0/1, but bound is "
                      f"{slice_sizes[d]} for index {d} at position {i}.")
  return ShapedArray(_gather_shape(operand.shape, indices.shape, dn, slice_sizes), operand.dtype,
                     operand.weak_type)


@functools.lru_cache(maxsize=512)
def gather_plan(operand_shape, indices_shape, dn, slice_sizes):
  """int64 arrays the gather kernel walks: (bshape, b_out_st, b_op_st, sim_st, sim_hi,
  win_shape, win_op_st, win_out_st)."""
  out_shape = _gather_shape(operand_shape, indices_shape, dn, slice_sizes)
  ost, outst = c_strides(operand_shape), c_strides(out_shape)
  bpos = [i for i in range(len(out_shape)) if i not in dn.offset_dims]
  b_op = [0] * len(bpos)
  for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
    b_op[idim] = ost[od]
  wdims = [d for d in range(len(operand_shape))
           if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
  a = lambda xs: np.array(xs, np.int64)
  return (a(indices_shape[:-1]), a([outst[p] for p in bpos]), a(b_op),
          a([ost[d] for d in dn.start_index_map]),
          a([operand_shape[d] - slice_sizes[d] for d in dn.start_index_map]),
          a([slice_sizes[d] for d in wdims]), a([ost[d] for d in wdims]),
          a([outst[p] for p in dn.offset_dims]))


def _fill_scalar(dtype, fill_value):
  if fill_value is None:
    if dtype.kind in "fc" or dtypes.is_inexact(dtype):  # (bfloat16 and float8: kind 'V')
      fill_value = np.nan
    elif dtype.kind == "i":
      fill_value = np.iinfo(dtype).min
    elif dtype.kind == "u":
      fill_value = np.iinfo(dtype).max
    else:
      fill_value = True
  with np.errstate(over="ignore", invalid="ignore"):  # (1e40 as float32 is inf, quietly)
    return np.asarray(fill_value).astype(dtype)


def _index_matrix(idx):
  """Indices as (batch, index vector), a view of the C buffer."""
  return idx.reshape(math.prod(idx.shape[:-1]), idx.shape[-1])


def _signed(idx):
  """Indices the kernels can read as int64: uint64 values past int64's range saturate (still
  out of bounds, so they clamp to the end or are filled/dropped) instead of wrapping negative."""
  return np.minimum(idx, _I64_MAX).astype(np.int64) if idx.dtype == np.uint64 else idx


def _fills(mode):
  return mode == GatherScatterMode.FILL_OR_DROP


@functools.lru_cache(maxsize=512)
def _point_take(operand_shape, indices_shape, dn, slice_sizes):
  """(out_shape, operand axis, its stride) when the gather takes single elements along one
  operand axis (``x[i]`` of a 1-D ``x``): ``take_clamped``'s case; else (out_shape, None)."""
  out_shape = _gather_shape(operand_shape, indices_shape, dn, slice_sizes)
  if (not dn.offset_dims and not dn.operand_batching_dims and len(dn.start_index_map) == 1
      and sorted(dn.collapsed_slice_dims) == list(range(len(operand_shape)))):
    d = dn.start_index_map[0]
    return out_shape, d, c_strides(operand_shape)[d]
  return out_shape, None, None


@functools.lru_cache(maxsize=512)
def _along(operand_shape, indices_shape, dn, slice_sizes):
  """The operand axis ``d`` when the gather takes one element along ``d`` with every other
  axis of the operand batched against the same axis of the indices (``take_along_axis``'s
  layout: indices of the operand's shape but for axis ``d``, one index column), else None."""
  if dn.offset_dims or len(dn.start_index_map) != 1 or any(s != 1 for s in slice_sizes):
    return None
  d = dn.start_index_map[0]
  rest = tuple(i for i in range(len(operand_shape)) if i != d)
  if (tuple(dn.collapsed_slice_dims) != (d,) or tuple(dn.operand_batching_dims) != rest
      or tuple(dn.start_indices_batching_dims) != rest or indices_shape[-1:] != (1,)
      or len(indices_shape) != len(operand_shape) + 1):
    return None
  return d if all(indices_shape[i] == operand_shape[i] for i in rest) else None


def _gather_numba(x, idx, *, dimension_numbers, slice_sizes, unique_indices, indices_are_sorted,
                  mode, fill_value):
  idx = _signed(idx)
  dn = dimension_numbers
  out_shape, d, st = _point_take(x.shape, idx.shape, dn, slice_sizes)
  out = pooled_empty(out_shape, x.dtype)
  if d is not None and x.size and out.size:
    if _fills(mode):
      K.take_filled(bits(x.reshape(-1)), idx.reshape(-1), bits(out.reshape(-1)),
                    x.shape[d] - 1, st, 0, bits(_fill_scalar(x.dtype, fill_value).reshape(1)))
    else:
      K.take_clamped(bits(x.reshape(-1)), idx.reshape(-1), bits(out.reshape(-1)),
                     x.shape[d] - 1, st, 0)
    return out
  if (not dn.offset_dims and not dn.operand_batching_dims and x.size and out.size
      and sorted(dn.collapsed_slice_dims) == list(range(x.ndim))):  # x[i, j]: single elements
    st = c_strides(x.shape)
    smap = list(dn.start_index_map)
    fv = _fill_scalar(x.dtype, fill_value).reshape(1)
    K.gather_points(bits(x.reshape(-1)), _index_matrix(idx), bits(out.reshape(-1)),
                    np.array([st[d] for d in smap], np.int64),
                    np.array([x.shape[d] - 1 for d in smap], np.int64),
                    1 if _fills(mode) else 0, bits(fv))
    return out
  if out.size == 0:
    return out
  d = _along(x.shape, idx.shape, dn, tuple(slice_sizes))
  if d is not None:  # take_along_axis: one element along axis d, every other axis batching
    B, N, k = math.prod(x.shape[:d]), x.shape[d], idx.shape[d]
    fv = bits(_fill_scalar(x.dtype, fill_value).reshape(1))
    if d == x.ndim - 1:
      K.take_along_rows(bits(x).reshape(B, N), idx.reshape(B, k), bits(out).reshape(B, k),
                        _fills(mode), fv)
    else:
      K.take_along(bits(x).reshape(B, N, -1), idx.reshape(B, k, -1),
                   bits(out).reshape(B, k, -1), _fills(mode), fv)
    return out
  plan = gather_plan(x.shape, idx.shape, dimension_numbers, tuple(slice_sizes))
  fv = bits(_fill_scalar(x.dtype, fill_value).reshape(1))
  kernel = K.gather_par if out.size >= PAR_MIN and plan[0].prod() > 1 else K.gather
  kernel(bits(x.reshape(-1)), _index_matrix(idx), bits(out.reshape(-1)), plan[0],
         plan[1], plan[2], plan[3], plan[4], 1 if _fills(mode) else 0, fv, *plan[5:])
  return out


_POINT_INDEX = frozenset(map(np.dtype, (np.int32, np.int64, np.uint8, np.uint16, np.uint32)))


def _point_len(prim, vx, vi):
  """The point hot paths' common test: the length of the first axis of a non-empty ``vx``
  when ``vi`` is a point index array for it and ``prim`` runs its numba kernel (not a
  backend pinned by ``config.set_eager_backend``), else 0."""
  n = vx.shape[0] if vx.ndim and vx.size else 0
  return n if (n and vi.dtype in _POINT_INDEX and n < 1 << 31 and prim.backend == "numba") \
      else 0


def take_points(x, i, normalize, fill=False, fill_value=None):
  """Eager ``x[i]`` for an Array ``x`` and an int32/int64 (or narrow unsigned) Array ``i``,
  jnp's hot path: ``gather_p``'s kernel (elements of a 1-D ``x``, rows of ``x`` viewed as 2-D
  otherwise) with negative indices counted from the end in the same loop when ``normalize``
  (one kernel call, no normalised copy of ``i``), equal to ``gather_p`` of jnp's normalised
  indices; None where it does not apply. ``fill`` (a 1-D ``x`` only): out-of-range indices
  give ``fill_value`` (jnp.take's default mode)."""
  vx, vi = x._value, i._value
  if fill:
    n = _point_len(gather_p, vx, vi) if vx.ndim == 1 else 0
    if not n:
      return None
    out = pooled_empty(vi.shape, vx.dtype)
    args = (bits(vx), vi.reshape(-1), bits(out).reshape(-1), n - 1, 1, n if normalize else 0,
            bits(_fill_scalar(vx.dtype, fill_value).reshape(1)))
    k = _TAKE.get((args[0].dtype, vi.dtype, "fill"))
    if k is None:  # (the kernel's compiled entry point: no numba dispatch per call)
      k = _TAKE[args[0].dtype, vi.dtype, "fill"] = _entry(K.take_filled, *args)
    k(*args)
    return Array._new(out, x._weak)
  if vx.ndim == 1 and vi.ndim == 1:  # elements of a vector: the plan made once per dtypes
    e = _TAKE1.get((vx.dtype, vi.dtype))
    n = vx.shape[0]
    if e is not None and 0 < n < 1 << 31 and vi.size * vx.itemsize < POOL_MIN and \
        gather_p.backend == "numba":
      u, k = e
      out = np.empty(vi.shape, u)
      k(vx.view(u), vi, out, n - 1, 1, n if normalize else 0)
      return Array._new(out.view(vx.dtype), x._weak)
  n = _point_len(gather_p, vx, vi)
  if not n:
    return None
  out = pooled_empty(vi.shape + vx.shape[1:], vx.dtype)
  vi = vi if vi.ndim == 1 else vi.reshape(-1)
  if vx.ndim == 1:
    bx, bo = bits(vx), bits(out if out.ndim == 1 else out.reshape(-1))
    k = _TAKE.get((bx.dtype, vi.dtype))
    if k is None:  # (the kernel's compiled entry point: no numba dispatch per call)
      k = _TAKE[bx.dtype, vi.dtype] = _entry(K.take_clamped, bx, vi, bo, 0, 0, 0)
      if vx.dtype.itemsize in _UINT:
        _TAKE1[vx.dtype, vi.dtype] = (bx.dtype, k)
    k(bx, vi, bo, n - 1, 1, n if normalize else 0)
  else:
    m = vx.size // n
    bx, bo = bits(vx).reshape(n, m), bits(out).reshape(vi.size, m)
    k = _TAKE.get((bx.dtype, vi.dtype, 2))
    if k is None:
      k = _TAKE[bx.dtype, vi.dtype, 2] = _entry(K.take_rows_clamped, bx, vi, bo, 0)
    k(bx, vi, bo, n if normalize else 0)
  return Array._new(out, x._weak)


_TAKE = {}  # (bits dtype, index dtype[, 2 | "fill"]) -> the entry of take_clamped
# (take_rows_clamped's, take_filled's)
_TAKE1 = {}  # (dtype, index dtype) -> (its bits dtype, take_clamped's entry): 1-D x[i]


def _operand_index_arrays(operand_shape, batch_shape, idx, batch_pos, window_pos, full_rank,
                          starts_map, op_batch, idx_batch, window_dims, window_sizes):
  """NumPy reference: for every element of the full (batch + window) index space, the operand
  index along each operand dim (before clamping), plus the per-batch start vectors."""
  def along(pos, n):
    shape = [1] * full_rank
    shape[pos] = n
    return np.arange(n).reshape(shape)
  starts = []
  for d in range(len(operand_shape)):
    if d in starts_map:
      s = np.expand_dims(idx[..., starts_map.index(d)].astype(np.int64), tuple(window_pos))
    elif d in op_batch:
      k = idx_batch[op_batch.index(d)]
      s = along(batch_pos[k], batch_shape[k])
    else:
      s = np.zeros([1] * full_rank, np.int64)
    starts.append(s)
  offs = [along(window_pos[window_dims.index(d)], window_sizes[window_dims.index(d)])
          if d in window_dims else 0 for d in range(len(operand_shape))]
  return starts, offs


def _gather_numpy(x, idx, *, dimension_numbers, slice_sizes, unique_indices, indices_are_sorted,
                  mode, fill_value):
  idx = _signed(idx)
  dn = dimension_numbers
  out_shape = _gather_shape(x.shape, idx.shape, dn, slice_sizes)
  if not math.prod(out_shape):
    return np.empty(out_shape, x.dtype)
  bpos = [i for i in range(len(out_shape)) if i not in dn.offset_dims]
  wdims = [d for d in range(x.ndim)
           if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
  starts, offs = _operand_index_arrays(
      x.shape, idx.shape[:-1], idx, bpos, list(dn.offset_dims), len(out_shape),
      list(dn.start_index_map), list(dn.operand_batching_dims),
      list(dn.start_indices_batching_dims), wdims, [slice_sizes[d] for d in wdims])
  ok = np.ones([1] * len(out_shape), bool)
  full = []
  for d, (s, o) in enumerate(zip(starts, offs)):
    hi = x.shape[d] - slice_sizes[d]
    if d in dn.start_index_map:
      ok = ok & (s >= 0) & (s <= hi)
    full.append(np.clip(s, 0, hi) + o)
  out = x[tuple(np.broadcast_arrays(*full))] if full else np.broadcast_to(x, out_shape).copy()
  if _fills(mode):
    out = np.where(np.broadcast_to(ok, out_shape), out, _fill_scalar(x.dtype, fill_value))
  return np.asarray(out.reshape(out_shape), x.dtype)


def _gather_jvp(primals, tangents, *, dimension_numbers, slice_sizes, unique_indices,
                indices_are_sorted, mode, fill_value):
  x, idx = primals
  params = dict(dimension_numbers=dimension_numbers, slice_sizes=slice_sizes,
                unique_indices=unique_indices, indices_are_sorted=indices_are_sorted, mode=mode)
  out = gather_p.bind(x, idx, fill_value=fill_value, **params)
  g = tangents[0]
  if type(g) is ad.Zero:
    return out, ad.Zero.from_primal_value(out)
  return out, gather_p.bind(g, idx, fill_value=0, **params)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                      indices_are_sorted, mode, fill_value):
  assert ad.is_undefined_primal(operand)
  if type(ct) is ad.Zero:
    return [ad.Zero(operand.aval), None]
  dn = dimension_numbers
  z = zeros(operand.aval.shape, core.get_aval(ct).dtype)
  sdn = ScatterDimensionNumbers(
      update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
      scatter_dims_to_operand_dims=dn.start_index_map,
      operand_batching_dims=dn.operand_batching_dims,
      scatter_indices_batching_dims=dn.start_indices_batching_dims)
  return [scatter_add(z, indices, ct, sdn, indices_are_sorted=indices_are_sorted,
                      unique_indices=unique_indices, mode=mode), None]


def _gather_batch(vals, dims, *, dimension_numbers, slice_sizes, unique_indices,
                  indices_are_sorted, mode, fill_value):
  x, idx = vals
  xd, id_ = dims
  dn = dimension_numbers
  inc = lambda ds: tuple(d + 1 for d in ds)
  params = dict(unique_indices=unique_indices, indices_are_sorted=indices_are_sorted, mode=mode,
                fill_value=fill_value)
  if id_ is not_mapped:  # the batch axis becomes a leading window (offset) dimension
    x = batching.moveaxis(x, xd, 0)
    size = core.get_aval(x).shape[0]
    dn2 = GatherDimensionNumbers(
        offset_dims=(0, *inc(dn.offset_dims)), collapsed_slice_dims=inc(dn.collapsed_slice_dims),
        start_index_map=inc(dn.start_index_map),
        operand_batching_dims=inc(dn.operand_batching_dims),
        start_indices_batching_dims=dn.start_indices_batching_dims)
    return gather_p.bind(x, idx, dimension_numbers=dn2, slice_sizes=(size, *slice_sizes),
                         **params), 0
  idx = batching.moveaxis(idx, id_, 0)
  if xd is not_mapped:  # a leading batch dimension of the indices
    dn2 = dn._replace(offset_dims=inc(dn.offset_dims),
                      start_indices_batching_dims=inc(dn.start_indices_batching_dims))
    return gather_p.bind(x, idx, dimension_numbers=dn2, slice_sizes=tuple(slice_sizes),
                         **params), 0
  x = batching.moveaxis(x, xd, 0)  # both: paired operand/indices batching dimensions
  dn2 = GatherDimensionNumbers(
      offset_dims=inc(dn.offset_dims), collapsed_slice_dims=inc(dn.collapsed_slice_dims),
      start_index_map=inc(dn.start_index_map),
      operand_batching_dims=(0, *inc(dn.operand_batching_dims)),
      start_indices_batching_dims=(0, *inc(dn.start_indices_batching_dims)))
  b = min(core.get_aval(x).shape[0], 1)  # an empty batch takes empty slices (as JAX)
  return gather_p.bind(x, idx, dimension_numbers=dn2, slice_sizes=(b, *slice_sizes), **params), 0


gather_p = Primitive("gather")


_DEFAULT_FILL = {}  # dtype -> gather's default fill value (NaN, the minimum, True...)


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
  """XLA's gather: slices of ``slice_sizes`` of ``operand`` at the index vectors in the last
  dimension of ``start_indices``, arranged by ``dimension_numbers``."""
  parsed = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
  if parsed == GatherScatterMode.FILL_OR_DROP:
    if fill_value is None:  # (one object per dtype: a fresh NaN would never equal the
      d = core.get_aval(operand).dtype  # registry's cached params, re-checking every call)
      fill_value = _DEFAULT_FILL.get(d)
      if fill_value is None:
        fill_value = _DEFAULT_FILL[d] = _fill_scalar(d, None).item()
  else:
    fill_value = None
  return gather_p.bind(operand, start_indices, dimension_numbers=_gdn(dimension_numbers),
                       slice_sizes=_tup(slice_sizes), unique_indices=bool(unique_indices),
                       indices_are_sorted=bool(indices_are_sorted), mode=parsed,
                       fill_value=fill_value)


# ============================================================================ scatter


def _scatter_abstract_eval(name):
  def rule(operand, indices, updates, *, dimension_numbers, indices_are_sorted, unique_indices,
           mode, update_jaxpr=None, update_consts=()):
    dn = dimension_numbers
    op = name
    if not isinstance(dn, ScatterDimensionNumbers):
      raise TypeError(f"{name} dimension_numbers must be a ScatterDimensionNumbers, got {dn!r}")
    if indices.dtype not in _int:
      raise ValueError(f"{name}: indices must have an integer type, got {indices.dtype.name}")
    check_same_dtypes("scatter", operand, updates)  # (JAX's message names the family)
    if not accepts(_SCATTER_DTYPES[name], operand.dtype):
      raise TypeError(f"{name} does not accept dtype {operand.dtype.name}.")
    if indices.ndim < 1:
      raise TypeError(f"{name} indices must have rank >= 1 (the last dimension is the index "
                      f"vector), got indices shape {indices.shape}")
    ivd = indices.ndim - 1
    uwd, iwd = dn.update_window_dims, dn.inserted_window_dims
    _is_sorted(uwd, op, "update_window_dims")
    _no_dups(uwd, op, "update_window_dims")
    expected = len(uwd) + indices.ndim - 1
    if updates.ndim != expected:
      raise TypeError(f"{name}: Updates tensor must be of rank {expected}; got {updates.ndim}.")
    _in_range(uwd, updates.ndim, op, "update_window_dims")
    _is_sorted(iwd, op, "inserted_window_dims")
    _no_dups(iwd, op, "inserted_window_dims")
    _in_range(iwd, operand.ndim, op, "inserted_window_dims")
    _is_sorted(dn.operand_batching_dims, op, "operand_batching_dims")
    _no_dups(dn.operand_batching_dims, op, "operand_batching_dims")
    _in_range(dn.operand_batching_dims, operand.ndim, op, "operand_batching_dims")
    _disjoint(iwd, dn.operand_batching_dims, op, "inserted_window_dims", "operand_batching_dims")
    _disjoint(dn.scatter_dims_to_operand_dims, dn.operand_batching_dims, op,
              "scatter_dims_to_operand_dims", "operand_batching_dims")
    _no_dups(dn.scatter_indices_batching_dims, op, "scatter_indices_batching_dims")
    _in_range(dn.scatter_indices_batching_dims, indices.ndim, op, "scatter_indices_batching_dims")
    if ivd in dn.scatter_indices_batching_dims:
      raise TypeError(f"Scatter op cannot have the index vector dimension as a batching "
                      f"dimension; got {dn.scatter_indices_batching_dims}.")
    if len(dn.operand_batching_dims) != len(dn.scatter_indices_batching_dims):
      raise TypeError(f"Scatter op requires equal numbers of operand_batching_dims and "
                      f"scatter_indices_batching_dims, got {dn.operand_batching_dims} and "
                      f"{dn.scatter_indices_batching_dims}.")
    ob = tuple(operand.shape[i] for i in dn.operand_batching_dims)
    ib = tuple(indices.shape[i] for i in dn.scatter_indices_batching_dims)
    if ob != ib:
      raise TypeError(f"Scatter op requires operand batching dimensions and indices batching "
                      f"dimensions to have the same shape, got {ob} and {ib}.")
    if len(uwd) + len(iwd) + len(dn.operand_batching_dims) != operand.ndim:
      raise TypeError(f"Scatter op has window of size "
                      f"{len(uwd) + len(iwd) + len(dn.operand_batching_dims)}; doesn't match "
                      f"operand of rank {operand.ndim}.")
    if len(dn.scatter_dims_to_operand_dims) != indices.shape[ivd]:
      raise TypeError(f"Scatter op has {len(dn.scatter_dims_to_operand_dims)} elements in "
                      f"scatter_dims_to_operand_dims and the bound of dimension "
                      f"index_vector_dim={ivd} of indices is {indices.shape[ivd]}. These two "
                      "numbers must be equal")
    for i, d in enumerate(dn.scatter_dims_to_operand_dims):
      if not 0 <= d < operand.ndim:
        raise TypeError(f"Invalid scatter_dims_to_operand_dims mapping; domain is "
                        f"[0, {operand.ndim}), got: {i}->{d}.")
    _no_dups(dn.scatter_dims_to_operand_dims, op, "scatter_dims_to_operand_dims")
    wdims = [d for d in range(operand.ndim) if d not in iwd and d not in dn.operand_batching_dims]
    for u, d in zip(uwd, wdims):
      if updates.shape[u] > operand.shape[d]:
        raise TypeError(f"{name}: Bounds of the window dimensions of updates must not exceed the "
                        f"bounds of the corresponding dimensions of operand. For dimension {u}, "
                        f"updates bound is {updates.shape[u]}, operand bound is "
                        f"{operand.shape[d]}.")
    sdims = [i for i in range(updates.ndim) if i not in uwd]
    for k, u in enumerate(sdims):
      if updates.shape[u] != indices.shape[k]:
        raise TypeError(f"{name}: Bounds of the scatter dimensions of updates must be the same as "
                        f"the bounds of the corresponding dimensions of scatter indices. For "
                        f"scatter dimension {k}, updates bound is {updates.shape[u]}, "
                        f"indices bound is {indices.shape[k]}.")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
  return rule


@functools.lru_cache(maxsize=512)
def scatter_plan(operand_shape, indices_shape, updates_shape, dn):
  """int64 arrays the scatter kernels walk: (bshape, b_upd_st, b_op_st, sim_st, sim_hi,
  win_shape, win_op_st, win_upd_st)."""
  ost, ust = c_strides(operand_shape), c_strides(updates_shape)
  spos = [i for i in range(len(updates_shape)) if i not in dn.update_window_dims]
  b_op = [0] * len(spos)
  for od, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
    b_op[idim] = ost[od]
  wdims = [d for d in range(len(operand_shape))
           if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
  wsize = dict(zip(wdims, (updates_shape[u] for u in dn.update_window_dims)))
  a = lambda xs: np.array(xs, np.int64)
  return (a(indices_shape[:-1]), a([ust[p] for p in spos]), a(b_op),
          a([ost[d] for d in dn.scatter_dims_to_operand_dims]),
          a([operand_shape[d] - wsize.get(d, 1) for d in dn.scatter_dims_to_operand_dims]),
          a([wsize[d] for d in wdims]), a([ost[d] for d in wdims]),
          a([ust[u] for u in dn.update_window_dims]))


@functools.lru_cache(maxsize=512)
def _point_scatter(operand_shape, indices_shape, dn):
  """(operand axis, its stride) when the scatter combines single elements along one operand
  axis (``x.at[i].add(v)`` of a 1-D ``x``): ``SCATTER_POINTS``' case; else (None, None)."""
  if (not dn.update_window_dims and not dn.operand_batching_dims
      and len(dn.scatter_dims_to_operand_dims) == 1 and indices_shape[-1:] == (1,)
      and sorted(dn.inserted_window_dims) == list(range(len(operand_shape)))):
    d = dn.scatter_dims_to_operand_dims[0]
    return d, c_strides(operand_shape)[d]
  return None, None


def _scatter_numba(combiner):
  def impl(x, idx, upd, *, dimension_numbers, indices_are_sorted, unique_indices, mode,
           update_jaxpr=None, update_consts=()):
    dt = x.dtype
    idx = _signed(idx)
    comb = combiner
    if combiner == "set":
      xo, uo = pooled_copy(bits(x.reshape(-1))), bits(upd.reshape(-1))
    elif dt == np.bool_:  # or / and on a uint8 view
      comb = {"add": "max", "mul": "min"}.get(combiner, combiner)
      xo, uo = x.reshape(-1).view(np.uint8).copy(), upd.reshape(-1).view(np.uint8)
    elif _half(dt):  # numba has no float16: NumPy's ufuncs round each combination, as XLA
      return _scatter_numpy(combiner)(x, idx, upd, dimension_numbers=dimension_numbers,
                                      indices_are_sorted=indices_are_sorted,
                                      unique_indices=unique_indices, mode=mode)
    else:
      xo, uo = pooled_copy(x.reshape(-1)), upd.reshape(-1)
    if x.size and upd.size:
      d, st = _point_scatter(x.shape, idx.shape, dimension_numbers)
      if d is not None:
        K.SCATTER_POINTS[comb](xo, idx.reshape(-1), uo, x.shape[d] - 1, st,
                               0 if mode == GatherScatterMode.CLIP else 1, 0)
        return xo.view(dt).reshape(x.shape)
      plan = scatter_plan(x.shape, idx.shape, upd.shape, dimension_numbers)
      K.SCATTER[comb](xo, _index_matrix(idx), uo, plan[0], plan[1], plan[2], plan[3],
                      plan[4], 0 if mode == GatherScatterMode.CLIP else 1, *plan[5:])
    return xo.view(dt).reshape(x.shape)
  return impl


def scatter_points(prim, x, i, y, normalize):
  """Eager ``x.at[i].<op>(y)`` (``prim``: ``scatter_p``, ``scatter_add_p``...) for an Array
  ``x`` of a dtype ``prim`` accepts and its numba kernel runs, an int32/int64 (or narrow
  unsigned) Array ``i`` and ``y`` of ``x``'s dtype and shape ``i.shape + x.shape[1:]``: jnp's
  hot path, the primitive's kernel (elements of a 1-D ``x``, rows of ``x`` viewed as 2-D
  otherwise; out-of-bounds updates dropped, in index order) with negative indices counted
  from the end in its loop when ``normalize``; None where it does not apply."""
  vx, vi, vy = x._value, i._value, y._value
  if vx.ndim == 1 and vi.ndim == 1:  # elements of a vector: the plan made once per dtypes
    e = _SCATTER_PLAN.get((prim, vx.dtype, vi.dtype))
    n = vx.shape[0]
    if e is not None and vy.dtype is vx.dtype and vy.shape == vi.shape and 0 < n < 1 << 31 \
        and vx.nbytes < POOL_MIN and prim.backend == "numba":
      u, k = e
      if u is None:
        xo = vx.copy()
        k(xo, vi, vy, n - 1, 1, 1, n if normalize else 0)
        return Array._new(xo, x._weak)
      xo = vx.view(u).copy()
      k(xo, vi, vy.view(u), n - 1, 1, 1, n if normalize else 0)
      return Array._new(xo.view(vx.dtype), x._weak)
  n, dt = _point_len(prim, vx, vi), vx.dtype
  if not n or vy.dtype is not dt or vy.shape != vi.shape + vx.shape[1:] or \
      dt not in _POINT_SCATTER[prim.name]:
    return None
  combiner = _COMBINER[prim.name]
  idx = vi if vi.ndim == 1 else vi.reshape(-1)
  w = n if normalize else 0
  if combiner == "set":
    xo, vy = pooled_copy(bits(vx)), bits(vy)
  else:
    xo = pooled_copy(vx)
  if vx.ndim == 1:
    vy = vy if vy.ndim == 1 else vy.reshape(-1)
    k = _SCATTER1.get((combiner, xo.dtype, idx.dtype))
    if k is None:  # (the kernel's compiled entry point: no numba dispatch per call)
      k = _SCATTER1[combiner, xo.dtype, idx.dtype] = _entry(K.SCATTER_POINTS[combiner], xo, idx,
                                                            vy, 0, 0, 0, 0)
    if vi.ndim == 1 and vx.nbytes < POOL_MIN:
      _SCATTER_PLAN[prim, dt, vi.dtype] = (xo.dtype if combiner == "set" else None, k)
    k(xo, idx, vy, n - 1, 1, 1, w)
  else:
    m = vx.size // n
    K.SCATTER_ROWS[combiner](xo.reshape(n, m), idx, vy.reshape(idx.size, m), 1, w)
  return Array._new(xo if combiner != "set" else xo.view(dt), x._weak)


_SCATTER1 = {}  # (combiner, bits or value dtype, index dtype) -> SCATTER_POINTS' entry
_SCATTER_PLAN = {}  # (primitive, dtype, index dtype) -> (bits dtype for set, entry): 1-D x


_NP_COMBINE = {"set": None, "add": np.add, "sub": np.subtract, "mul": np.multiply,
               "min": np.minimum, "max": np.maximum}
_NP_COMBINE_BOOL = {"add": np.logical_or, "mul": np.logical_and, "min": np.logical_and,
                    "max": np.logical_or}


def _scatter_numpy(combiner):
  def impl(x, idx, upd, *, dimension_numbers, indices_are_sorted, unique_indices, mode,
           update_jaxpr=None, update_consts=()):
    dn = dimension_numbers
    idx = _signed(idx)
    out = x.copy()
    if not (x.size and upd.size):
      return out
    spos = [i for i in range(upd.ndim) if i not in dn.update_window_dims]
    wdims = [d for d in range(x.ndim)
             if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    wsizes = [upd.shape[u] for u in dn.update_window_dims]
    starts, offs = _operand_index_arrays(
        x.shape, idx.shape[:-1], idx, spos, list(dn.update_window_dims), upd.ndim,
        list(dn.scatter_dims_to_operand_dims), list(dn.operand_batching_dims),
        list(dn.scatter_indices_batching_dims), wdims, wsizes)
    ok = np.ones([1] * upd.ndim, bool)
    full = []
    for d, (s, o) in enumerate(zip(starts, offs)):
      hi = x.shape[d] - (wsizes[wdims.index(d)] if d in wdims else 1)
      if d in dn.scatter_dims_to_operand_dims:
        ok = ok & (s >= 0) & (s <= hi)
      full.append(np.clip(s, 0, hi) + o)
    full = list(np.broadcast_arrays(*full, upd))
    u = full.pop()
    if mode != GatherScatterMode.CLIP:
      keep = np.broadcast_to(ok, upd.shape)
      full, u = [f[keep] for f in full], u[keep]
    else:
      full, u = [f.reshape(-1) for f in full], u.reshape(-1)
    f = _NP_COMBINE[combiner]
    if f is None:
      out[tuple(full)] = u
    elif combiner == "mul" and x.dtype.kind == "c":
      _cmul_at(out, np.ravel_multi_index(full, x.shape), u)
    else:
      (_NP_COMBINE_BOOL[combiner] if x.dtype == np.bool_ else f).at(out, tuple(full), u)
      if combiner in ("min", "max") and x.dtype.kind == "f":
        _ieee_zeros_at(out, x, np.ravel_multi_index(full, x.shape), u, combiner)
    return out
  return impl


def _cmul_at(out, pos, u):
  """``out.flat[pos] *= u`` in order, by XLA's complex product (``elementwise``'s numba
  kernel): in rounds, the k-th update of every position in round k."""
  from nbjax.lax.elementwise import numba_run
  mul = numba_run("mul_complex", [out.dtype] * 2, out.dtype)  # (NumPy has no fused multiply-add)
  order = np.argsort(pos, kind="stable")
  sp = pos[order]
  first = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
  rank = np.empty(pos.size, np.int64)
  rank[order] = np.arange(pos.size) - np.repeat(first, np.diff(np.r_[first, pos.size]))
  flat = out.reshape(-1)
  for r in range(int(rank.max()) + 1 if pos.size else 0):
    sel = rank == r
    p = pos[sel]
    flat[p] = mul(np.ascontiguousarray(flat[p]), np.ascontiguousarray(u[sel]))


def _ieee_zeros_at(out, x, pos, u, combiner):
  """After NumPy's ``maximum.at``/``minimum.at``: a zero result is +0 (max) / -0 (min) when
  any zero combined there is (IEEE's -0 < +0, XLA's; NumPy keeps either zero of a tie)."""
  flat = out.reshape(-1)
  if (flat != 0).all():
    return
  want = combiner == "min"
  has = (x.reshape(-1) == 0) & (np.signbit(x.reshape(-1)) == want)
  np.logical_or.at(has, pos, (u == 0) & (np.signbit(u) == want))
  flat[(flat == 0) & has] = -0.0 if want else 0.0


def _inverse_gather(dn, operand_shape, updates_shape):
  """The gather dimension numbers and slice sizes that read back what a scatter wrote."""
  gdn = GatherDimensionNumbers(
      offset_dims=dn.update_window_dims, collapsed_slice_dims=dn.inserted_window_dims,
      start_index_map=dn.scatter_dims_to_operand_dims,
      operand_batching_dims=dn.operand_batching_dims,
      start_indices_batching_dims=dn.scatter_indices_batching_dims)
  it = iter(updates_shape[u] for u in dn.update_window_dims)
  sizes = tuple(1 if (d in dn.inserted_window_dims or d in dn.operand_batching_dims) else next(it)
                for d in range(len(operand_shape)))
  return gdn, sizes


def _scatter_add_transpose(sign):
  def rule(ct, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
           unique_indices, mode, update_jaxpr=None, update_consts=()):
    if type(ct) is ad.Zero:
      return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
              ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]
    op_t = ct if ad.is_undefined_primal(operand) else None
    up_t = None
    if ad.is_undefined_primal(updates):
      gdn, sizes = _inverse_gather(dimension_numbers, core.get_aval(ct).shape,
                                   updates.aval.shape)
      up_t = gather(ct, indices, gdn, sizes, indices_are_sorted=indices_are_sorted,
                    unique_indices=unique_indices, mode=mode, fill_value=0)
      if sign < 0:
        from nbjax import lax
        up_t = lax.neg(up_t)
    return [op_t, None, up_t]
  return rule


def _scatter_add_jvp(prim):
  """Linear in (operand, updates): the same scatter of the tangents."""
  def rule(primals, tangents, **params):
    x, idx, upd = primals
    gx, _, gu = tangents
    out = prim.bind(x, idx, upd, **params)
    if type(gx) is ad.Zero and type(gu) is ad.Zero:
      return out, ad.Zero.from_primal_value(out)
    return out, prim.bind(ad.instantiate_zeros(gx), idx, ad.instantiate_zeros(gu), **params)
  return rule


def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                       unique_indices, mode, update_jaxpr=None, update_consts=()):
  if not unique_indices:
    raise NotImplementedError("scatter transpose is only implemented where unique_indices=True")
  if type(ct) is ad.Zero:
    return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
            ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]
  ushape = updates.aval.shape if ad.is_undefined_primal(updates) else core.get_aval(updates).shape
  ct_aval = core.get_aval(ct)
  kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=True, mode=mode)
  op_t = up_t = None
  if ad.is_undefined_primal(operand):
    op_t = scatter(ct, indices, zeros(ushape, ct_aval.dtype),
                   dimension_numbers, **kw)
  if ad.is_undefined_primal(updates):
    gdn, sizes = _inverse_gather(dimension_numbers, ct_aval.shape, ushape)
    up_t = gather(ct, indices, gdn, sizes, mode=mode, fill_value=0,
                  indices_are_sorted=indices_are_sorted, unique_indices=True)
  return [op_t, None, up_t]


def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices,
                 mode, update_jaxpr=None, update_consts=()):
  """Overlapping updates: the winner is unspecified, so tag each update with an id, scatter the
  ids, read them back, and keep only the winners' values and tangents (scatter-add)."""
  from nbjax import lax
  x, idx, upd = primals
  gx, _, gu = tangents
  dn = dimension_numbers
  kw = dict(dimension_numbers=dn, indices_are_sorted=indices_are_sorted, mode=mode,
            update_jaxpr=None, update_consts=())
  if type(gx) is ad.Zero and type(gu) is ad.Zero:
    out = scatter_p.bind(x, idx, upd, unique_indices=unique_indices, **kw)
    return out, ad.Zero.from_primal_value(out)
  gx, gu = ad.instantiate_zeros(gx), ad.instantiate_zeros(gu)
  if unique_indices:
    return (scatter_p.bind(x, idx, upd, unique_indices=True, **kw),
            scatter_p.bind(gx, idx, gu, unique_indices=True, **kw))
  xa, ua = core.get_aval(x), core.get_aval(upd)
  ids_shape = [1 if i in dn.update_window_dims else n for i, n in enumerate(ua.shape)]
  n_ids = math.prod(ids_shape)
  ids = reshape(_ids(n_ids), ids_shape)
  ids = broadcast_in_dim(ids, ua.shape, tuple(range(ua.ndim)))
  scattered = scatter_p.bind(zeros(xa.shape, np.int32), idx, ids, unique_indices=unique_indices,
                             **kw)
  gdn, sizes = _inverse_gather(dn, xa.shape, ua.shape)
  back = gather(scattered, idx, gdn, sizes, mode=mode, fill_value=0)
  keep_x = lax.eq(scattered, np.zeros((), np.int32))
  keep_u = lax.eq(ids, back)
  zx, zu = zeros(xa.shape, xa.dtype), zeros(ua.shape, ua.dtype)
  sel = lambda m, a, z: lax.select_n(m, z, a)
  skw = dict(kw, unique_indices=unique_indices)
  out = scatter_add_p.bind(sel(keep_x, x, zx), idx, sel(keep_u, upd, zu), **skw)
  t = scatter_add_p.bind(sel(keep_x, gx, zx), idx, sel(keep_u, gu, zu), **skw)
  return out, t


def _ids(n):
  """1..n as int32 (update ids; 0 marks 'not written')."""
  from nbjax.lax.shape import iota
  from nbjax import lax
  return lax.add(iota(np.int32, n), np.ones((), np.int32))


def _scatter_mul_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices,
                     mode, update_jaxpr=None, update_consts=()):
  from nbjax import lax
  x, idx, upd = primals
  gx, _, gu = tangents
  kw = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, mode=mode, update_jaxpr=None, update_consts=())
  out = scatter_mul_p.bind(x, idx, upd, **kw)
  t = ad.Zero.from_primal_value(out)
  if type(gx) is not ad.Zero:
    t = scatter_mul_p.bind(gx, idx, upd, **kw)
  if type(gu) is not ad.Zero:
    if not unique_indices:
      raise NotImplementedError(
          "scatter_mul gradients are only implemented if `unique_indices=True`")
    zx = zeros(core.get_aval(x).shape, core.get_aval(x).dtype)
    t = ad.add_tangents(t, lax.mul(x, scatter_add_p.bind(zx, idx, gu, **kw)))
  return out, t


def _scatter_mul_transpose(ct, operand, indices, updates, *, dimension_numbers,
                           indices_are_sorted, unique_indices, mode, update_jaxpr=None,
                           update_consts=()):
  if ad.is_undefined_primal(updates):
    raise NotImplementedError("scatter_mul transpose is only implemented for the operand")
  if type(ct) is ad.Zero:
    return [ad.Zero(operand.aval), None, None]
  return [scatter_mul_p.bind(ct, indices, updates, dimension_numbers=dimension_numbers,
                             indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                             mode=mode, update_jaxpr=None, update_consts=()), None, None]


def _scatter_extremal_jvp(prim):
  """min/max: the tangent at each output is the mean of the tangents of the contenders (the
  operand value and every update landing there) that attain the result."""
  def rule(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices, mode,
           update_jaxpr=None, update_consts=()):
    from nbjax import lax
    x, idx, upd = primals
    gx, _, gu = tangents
    dn = dimension_numbers
    kw = dict(dimension_numbers=dn, indices_are_sorted=indices_are_sorted,
              unique_indices=unique_indices, mode=mode, update_jaxpr=None, update_consts=())
    out = prim.bind(x, idx, upd, **kw)
    if type(gx) is ad.Zero and type(gu) is ad.Zero:
      return out, ad.Zero.from_primal_value(out)
    gx, gu = ad.instantiate_zeros(gx), ad.instantiate_zeros(gu)
    xa, ua = core.get_aval(x), core.get_aval(upd)
    gdn, sizes = _inverse_gather(dn, xa.shape, ua.shape)
    won_u = lax.eq(upd, gather(out, idx, gdn, sizes, mode=mode))
    won_x = lax.eq(x, out)
    dt = xa.dtype
    one = lambda s: broadcast_in_dim(np.ones((), dt), s, ())
    zero = lambda s: broadcast_in_dim(np.zeros((), dt), s, ())
    sel = lambda m, a, z: lax.select_n(m, z, a)
    hits = sel(won_u, one(ua.shape), zero(ua.shape))
    count = lax.add(sel(won_x, one(xa.shape), zero(xa.shape)),
                    scatter_add_p.bind(zero(xa.shape), idx, hits, **kw))
    total = lax.add(sel(won_x, gx, zero(xa.shape)),
                    scatter_add_p.bind(zero(xa.shape), idx, sel(won_u, gu, zero(ua.shape)), **kw))
    return out, lax.div(total, count)
  return rule


def _scatter_batch(prim, vals, dims, *, dimension_numbers, indices_are_sorted, unique_indices,
                   mode, update_jaxpr=None, update_consts=()):
  x, idx, upd = vals
  xd, id_, ud = dims
  dn = dimension_numbers
  size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
  x = batching.bdim_at_front(x, xd, size)
  upd = batching.bdim_at_front(upd, ud, size)
  inc = lambda ds: tuple(d + 1 for d in ds)
  kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            update_jaxpr=update_jaxpr, update_consts=update_consts)
  if id_ is not_mapped:  # the batch axis is a leading window dimension of operand and updates
    dn2 = ScatterDimensionNumbers(
        update_window_dims=(0, *inc(dn.update_window_dims)),
        inserted_window_dims=inc(dn.inserted_window_dims),
        scatter_dims_to_operand_dims=inc(dn.scatter_dims_to_operand_dims),
        operand_batching_dims=inc(dn.operand_batching_dims),
        scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
    return prim.bind(x, idx, upd, dimension_numbers=dn2, **kw), 0
  idx = batching.moveaxis(idx, id_, 0)
  dn2 = ScatterDimensionNumbers(
      update_window_dims=inc(dn.update_window_dims),
      inserted_window_dims=inc(dn.inserted_window_dims),
      scatter_dims_to_operand_dims=inc(dn.scatter_dims_to_operand_dims),
      operand_batching_dims=(0, *inc(dn.operand_batching_dims)),
      scatter_indices_batching_dims=(0, *inc(dn.scatter_indices_batching_dims)))
  return prim.bind(x, idx, upd, dimension_numbers=dn2, **kw), 0


_SCATTER_DTYPES = {"scatter": set(_any), "scatter-add": set(_any), "scatter-mul": set(_any),
                   "scatter-min": _any - _complex, "scatter-max": _any - _complex,
                   "scatter-sub": set(_num)}
scatter_p = Primitive("scatter")
scatter_add_p = Primitive("scatter-add")
scatter_sub_p = Primitive("scatter-sub")
scatter_mul_p = Primitive("scatter-mul")
scatter_min_p = Primitive("scatter-min")
scatter_max_p = Primitive("scatter-max")


def _scatter_wrapper(prim, what):
  def wrapper(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
              unique_indices=False, mode=None):
    return prim.bind(operand, scatter_indices, updates, dimension_numbers=_sdn(dimension_numbers),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices), mode=GatherScatterMode.from_any(mode),
                     update_jaxpr=None, update_consts=())
  wrapper.__name__ = prim.name.replace("-", "_")
  wrapper.__doc__ = (f"Scatter-{what}: combine ``updates`` into ``operand`` at the index vectors "
                     "in the last dimension of ``scatter_indices`` (dimension numbers as XLA's "
                     "scatter). Out-of-bounds windows are dropped unless ``mode='clip'``."
                     if what else
                     "Scatter: write ``updates`` into ``operand`` at the index vectors in the last "
                     "dimension of ``scatter_indices`` (overlapping writes: one wins, unspecified). "
                     "Out-of-bounds windows are dropped unless ``mode='clip'``.")
  return wrapper


scatter = _scatter_wrapper(scatter_p, "")
scatter_add = _scatter_wrapper(scatter_add_p, "add")
scatter_sub = _scatter_wrapper(scatter_sub_p, "sub")
scatter_mul = _scatter_wrapper(scatter_mul_p, "mul")
scatter_min = _scatter_wrapper(scatter_min_p, "min")
scatter_max = _scatter_wrapper(scatter_max_p, "max")


# ----------------------------------------------------------------- jet (Taylor) rules


def _dynamic_slice_jet(primals, series, **params):
  operand, *idx = primals
  return (dynamic_slice_p.bind(operand, *idx, **params),
          [dynamic_slice_p.bind(ts[0], *idx, **params) for ts in zip(*series)])


def _dynamic_update_slice_jet(primals, series, **params):
  operand, update, *idx = primals
  return (dynamic_update_slice_p.bind(operand, update, *idx, **params),
          [dynamic_update_slice_p.bind(*ts[:2], *idx, **params) for ts in zip(*series)])


def _gather_jet(primals, series, **params):
  operand, indices = primals
  return (gather_p.bind(operand, indices, **params),
          [gather_p.bind(t, indices, **params) for t in series[0]])


def _scatter_add_jet(primals, series, **params):
  operand, indices, updates = primals
  return (scatter_add_p.bind(operand, indices, updates, **params),
          [scatter_add_p.bind(a, indices, b, **params) for a, _, b in zip(*series)])


dynamic_slice_p.jet, dynamic_update_slice_p.jet = _dynamic_slice_jet, _dynamic_update_slice_jet
gather_p.jet, scatter_add_p.jet = _gather_jet, _scatter_add_jet


# ============================================================================ meta and registration

_C, _F = GatherScatterMode.CLIP, GatherScatterMode.FILL_OR_DROP
_P = GatherScatterMode.PROMISE_IN_BOUNDS


def _i(a):
  return np.asarray(a, np.int32)


def _ds_samples(rng, dtype):
  r = lambda s: random_array(rng, s, dtype)
  return [([r((5,)), _i(1)], dict(slice_sizes=(3,))),
          ([r((5,)), _i(4)], dict(slice_sizes=(3,))),           # clamped
          ([r((4, 6)), _i(-2), _i(2)], dict(slice_sizes=(2, 3))),  # clamped low
          ([r(())], dict(slice_sizes=())),
          ([r((3, 0)), _i(1), _i(0)], dict(slice_sizes=(2, 0)))]


def _dus_samples(rng, dtype):
  r = lambda s: random_array(rng, s, dtype)
  return [([r((5,)), r((2,)), _i(1)], {}),
          ([r((5,)), r((3,)), _i(7)], {}),
          ([r((4, 6)), r((2, 3)), _i(-1), _i(2)], {}),
          ([r(()), r(())], {}),
          ([r((3, 2)), r((0, 2)), _i(1), _i(0)], {})]


_G1 = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
_G2 = GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
_GB = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                             operand_batching_dims=(0,), start_indices_batching_dims=(0,))


def _gather_samples(rng, dtype):
  r = lambda s: random_array(rng, s, dtype)
  base = dict(unique_indices=False, indices_are_sorted=False)
  return [
      ([r((5, 3)), _i([[0], [4], [2], [2]])], dict(base, dimension_numbers=_G1, slice_sizes=(1, 3),
                                                   mode=_P, fill_value=None)),
      ([r((5, 3)), _i([[1], [7], [-3]])], dict(base, dimension_numbers=_G1, slice_sizes=(1, 3),
                                               mode=_C, fill_value=None)),
      ([r((5, 3)), _i([[1], [3]])], dict(base, dimension_numbers=_G1, slice_sizes=(1, 2),
                                         mode=_F, fill_value=0)),
      ([r((4, 5)), _i([[[0, 1], [2, 3]], [[1, 1], [3, 0]]])],
       dict(base, dimension_numbers=_G2, slice_sizes=(2, 2), mode=_C, fill_value=None)),
      ([r((3, 4)), _i([[1], [3], [0]])], dict(base, dimension_numbers=_GB, slice_sizes=(1, 1),
                                              mode=_P, fill_value=None)),
      ([r((5, 3)), np.zeros((0, 1), np.int32)], dict(base, dimension_numbers=_G1,
                                                     slice_sizes=(1, 3), mode=_C, fill_value=None)),
  ]


_S1 = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                              scatter_dims_to_operand_dims=(0,))
_S2 = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                              scatter_dims_to_operand_dims=(0, 1))
_SB = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                              scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                              scatter_indices_batching_dims=(0,))


def _scatter_samples(unique):
  def samples(rng, dtype):
    r = lambda s: random_array(rng, s, dtype)
    base = dict(indices_are_sorted=False, update_jaxpr=None, update_consts=())
    out = [
        ([r((5, 3)), _i([[0], [4], [2]]), r((3, 3))],
         dict(base, dimension_numbers=_S1, unique_indices=True, mode=_F)),
        ([r((4, 5)), _i([[0, 1], [3, 4], [2, 2]]), r((3,))],
         dict(base, dimension_numbers=_S2, unique_indices=True, mode=_C)),
        ([r((3, 4)), _i([[1], [3], [0]]), r((3,))],
         dict(base, dimension_numbers=_SB, unique_indices=True, mode=_F)),
        ([r((5, 3)), np.zeros((0, 1), np.int32), r((0, 3))],
         dict(base, dimension_numbers=_S1, unique_indices=True, mode=_F)),
        ([r((5, 3)), _i([[1], [9], [-1]]), r((3, 3))],  # out-of-bounds windows dropped
         dict(base, dimension_numbers=_S1, unique_indices=True, mode=_F)),
    ]
    if not unique:
      out.append(([r((5, 3)), _i([[1], [1], [3], [1]]), r((4, 3))],
                  dict(base, dimension_numbers=_S1, unique_indices=False, mode=_F)))
    return out
  return samples


def _f32(rng, s, d=np.float32):
  return random_array(rng, s, d)


def _index_bad(rng):
  x = _f32(rng, (5, 3))
  return {
      "dynamic_slice": [([x, _i(0), _i(0)], dict(slice_sizes=(6, 1)), TypeError),
                        ([x, _i(0), np.int64(0)], dict(slice_sizes=(1, 1)), TypeError),
                        ([x, _i(0)], dict(slice_sizes=(1,)), TypeError),
                        ([x, np.float32(0), np.float32(0)], dict(slice_sizes=(1, 1)), TypeError)],
      "dynamic_update_slice": [([x, _f32(rng, (6, 1)), _i(0), _i(0)], {}, TypeError),
                               ([x, _f32(rng, (1,)), _i(0), _i(0)], {}, TypeError),
                               ([x, _f32(rng, (1, 1), np.float64), _i(0), _i(0)], {}, TypeError),
                               ([x, _f32(rng, (1, 1)), _i(0)], {}, TypeError)],
      "gather": [([x, _i([[0]])], dict(dimension_numbers=_G1, slice_sizes=(2, 3),
                                         unique_indices=False, indices_are_sorted=False, mode=_C,
                                         fill_value=None), TypeError),
                 ([x, _i([[0, 1]])], dict(dimension_numbers=_G1, slice_sizes=(1, 3),
                                            unique_indices=False, indices_are_sorted=False,
                                            mode=_C, fill_value=None), TypeError),
                 ([x, np.zeros((2, 1), np.float32)],
                  dict(dimension_numbers=_G1, slice_sizes=(1, 3), unique_indices=False,
                       indices_are_sorted=False, mode=_C, fill_value=None), ValueError),
                 ([x, _i([[0]])], dict(dimension_numbers=_G1, slice_sizes=(1, 4),
                                         unique_indices=False, indices_are_sorted=False, mode=_C,
                                         fill_value=None), TypeError)],
  }


def _scatter_bad(name):
  def bad(rng):
    x = _f32(rng, (5, 3))
    base = dict(indices_are_sorted=False, unique_indices=False, mode=_F, update_jaxpr=None,
                update_consts=())
    return [([x, _i([[0]]), _f32(rng, (1, 4))], dict(base, dimension_numbers=_S1), TypeError),
            ([x, _i([[0]]), _f32(rng, (2, 3))], dict(base, dimension_numbers=_S1), TypeError),
            ([x, _i([[0]]), _f32(rng, (1, 3), np.float64)], dict(base, dimension_numbers=_S1),
             TypeError),
            ([x, np.zeros((1, 1), np.float32), _f32(rng, (1, 3))],
             dict(base, dimension_numbers=_S1), ValueError)]
  return bad


_INT_DTYPES = sorted(_int, key=str)
_NOTE_NP = "numpy: vectorized fancy indexing (reference)"

registry.register(
    dynamic_slice_p, family="indexing",
    impls={"numba": _dynamic_slice_numba, "numpy": _dynamic_slice_numpy},
    abstract_eval=_dynamic_slice_abstract_eval, jvp=_dynamic_slice_jvp,
    transpose=_dynamic_slice_transpose, batch=_dynamic_slice_batch, policy=None,
    meta=dict(reference=_dynamic_slice_numpy, dtypes=ALL_DTYPES, samples=_ds_samples,
              differentiable=True, linear=True,
              bad_inputs=lambda rng: _index_bad(rng)["dynamic_slice"],
              error_names=("slice slice_sizes",)))  # (JAX's shape rule's words)
registry.register(
    dynamic_update_slice_p, family="indexing",
    impls={"numba": _dynamic_update_slice_numba, "numpy": _dynamic_update_slice_numpy},
    abstract_eval=_dynamic_update_slice_abstract_eval, jvp=_dynamic_update_slice_jvp,
    transpose=_dynamic_update_slice_transpose, batch=_dynamic_update_slice_batch, policy=None,
    meta=dict(reference=_dynamic_update_slice_numpy, dtypes=ALL_DTYPES, samples=_dus_samples,
              differentiable=True, linear=True,
              note="numba writes the update into a copy of the operand made by NumPy (memcpy)",
              bad_inputs=lambda rng: _index_bad(rng)["dynamic_update_slice"]))
registry.register(
    gather_p, family="indexing", impls={"numba": _gather_numba, "numpy": _gather_numpy},
    abstract_eval=_gather_abstract_eval, jvp=_gather_jvp, transpose=_gather_transpose,
    batch=_gather_batch, policy=None,
    meta=dict(reference=_gather_numpy, dtypes=ALL_DTYPES, samples=_gather_samples,
              differentiable=True, linear=True, bad_inputs=lambda rng: _index_bad(rng)["gather"],
              note="numba; uint64 indices: saturated to int64 by NumPy first",
              error_names=("Gather op",)))  # (JAX's shape errors say "Gather op")

_COMBINER = {"scatter": "set", "scatter-add": "add", "scatter-sub": "sub", "scatter-mul": "mul",
             "scatter-min": "min", "scatter-max": "max"}
# scatter_points' dtypes: those numba computes natively (no bool/or-and, no half precision)
_POINT_SCATTER = {k: frozenset(d for d in v if d.kind in "iu" or d.kind in "fc" and d.itemsize > 2)
                  for k, v in _SCATTER_DTYPES.items()}
_SCATTER_NOTE = ("numba combines the updates into a copy of the operand made by NumPy "
                 "(memcpy); uint64 indices: saturated to int64 by NumPy first")
_SCATTER_F16_NOTE = ("; float16: numpy (ufunc.at: numba has no float16, NumPy rounds each "
                     "combination as XLA)")
for _p in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p, scatter_max_p):
  _comb = _COMBINER[_p.name]
  _lin = _comb in ("set", "add", "sub")
  registry.register(
      _p, family="indexing", impls={"numba": _scatter_numba(_comb), "numpy": _scatter_numpy(_comb)},
      abstract_eval=_scatter_abstract_eval(_p.name),
      batch=functools.partial(_scatter_batch, _p), policy=None,
      meta=dict(reference=_scatter_numpy(_comb), dtypes=sorted(_SCATTER_DTYPES[_p.name], key=str),
                samples=_scatter_samples(unique=_comb in ("set", "mul")),
                differentiable=True, linear=_lin, bad_inputs=_scatter_bad(_p.name),
                note=_SCATTER_NOTE + ("" if _comb == "set" else _SCATTER_F16_NOTE),
                error_names=("lax.scatter", "Scatter op"),  # (JAX's names: the family)
                # float8, int4: XLA rounds after each combined update
                **({"narrow": "xla"} if _comb in ("add", "sub", "mul") else {})))

scatter_p.jvp, scatter_p.transpose = _scatter_jvp, _scatter_transpose
for _p, _sign in ((scatter_add_p, 1), (scatter_sub_p, -1)):
  _p.jvp, _p.transpose = _scatter_add_jvp(_p), _scatter_add_transpose(_sign)
scatter_mul_p.jvp, scatter_mul_p.transpose = _scatter_mul_jvp, _scatter_mul_transpose
scatter_min_p.jvp = _scatter_extremal_jvp(scatter_min_p)
scatter_max_p.jvp = _scatter_extremal_jvp(scatter_max_p)
del _p, _comb, _lin, _sign

# ====================================================================== lowering (StableHLO)
# Rules run under jit only; ``mlir``/``hlo``/``ir`` are lazy proxies, so importing this
# file never imports jaxlib.
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import chlo, hlo, i64_array, ir, mlir  # noqa: E402,F401


def _reg(name, rule):
  lowering.register(name, rule)


def _mode_name(mode):
  return getattr(mode, "name", str(mode)).upper()


def _dynamic_slice(ctx, x, *starts, slice_sizes):
  if not starts:  # rank 0 (StableHLO's printer cannot round-trip an empty index list)
    return [x]
  return [hlo.dynamic_slice(x, list(starts), i64_array(slice_sizes))]


def _dynamic_update_slice(ctx, x, upd, *starts):
  if not starts:
    return [upd]
  return [hlo.dynamic_update_slice(x, upd, list(starts))]


def _index_bounds(ctx, idx_aval, bounds):
  """A constant of the indices' shape holding ``bounds[k]`` along the index vector (clipped
  to the index dtype's range)."""
  dt = np.dtype(idx_aval.dtype)
  info = np.iinfo(dt)
  vec = np.array([min(max(int(b), info.min), info.max) for b in bounds], dt)
  c = mlir.ir_constant(vec)
  nd = len(idx_aval.shape)
  return hlo.broadcast_in_dim(mlir.aval_to_ir_type(idx_aval), c, i64_array([nd - 1]))


def _gather(ctx, operand, indices, *, dimension_numbers, slice_sizes, unique_indices=False,
            indices_are_sorted=False, mode=None, fill_value=None):
  dn = dimension_numbers
  op_aval, idx_aval = ctx.avals_in
  out_aval = ctx.avals_out[0]
  ivd = len(idx_aval.shape) - 1
  gdn = hlo.GatherDimensionNumbers.get(
      offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
      operand_batching_dims=list(getattr(dn, "operand_batching_dims", ())),
      start_indices_batching_dims=list(getattr(dn, "start_indices_batching_dims", ())),
      start_index_map=list(dn.start_index_map), index_vector_dim=ivd)
  if not math.prod(out_aval.shape):  # as JAX's (no indices: slice sizes may pass the operand)
    return [mlir.full_like_aval(ctx, 0, out_aval)]
  out = hlo.gather(operand, indices, gdn, i64_array(slice_sizes),
                   indices_are_sorted=bool(indices_are_sorted))
  if mode is None or "FILL" not in _mode_name(mode):
    return [out]
  # FILL_OR_DROP: a window whose start index is out of [0, dim - size] is all fill_value
  hi = [op_aval.shape[d] - slice_sizes[d] for d in dn.start_index_map]
  zero = mlir.full_like_aval(ctx, 0, idx_aval.update(weak_type=False))
  ok = hlo.and_(mlir.compare(indices, zero, "GE", idx_aval.dtype),
                mlir.compare(indices, _index_bounds(ctx, idx_aval, hi), "LE", idx_aval.dtype))
  i1 = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
  batch_shape = list(idx_aval.shape[:-1])
  red = hlo.ReduceOp([ir.RankedTensorType.get(batch_shape, ir.IntegerType.get_signless(1))],
                     [ok], [mlir.ir_constant(np.array(True))], i64_array([ivd]))
  blk = red.regions[0].blocks.append(i1, i1)
  with ir.InsertionPoint(blk):
    hlo.return_([hlo.and_(*blk.arguments)])
  bdims = [d for d in range(len(out_aval.shape)) if d not in dn.offset_dims]
  mask = hlo.broadcast_in_dim(
      ir.RankedTensorType.get(list(out_aval.shape), ir.IntegerType.get_signless(1)),
      red.result, i64_array(bdims))
  fill = mlir.full_like_aval(ctx, _fill_scalar(np.dtype(out_aval.dtype), fill_value), out_aval)
  return [hlo.select(mask, out, fill)]


_COMBINE = {"scatter": None, "scatter-add": "add", "scatter-sub": "subtract",
            "scatter-mul": "multiply", "scatter-min": "minimum", "scatter-max": "maximum"}
_COMBINE_BOOL = {"scatter": None, "scatter-add": "or_", "scatter-mul": "and_", "scatter-min": "and_",
                 "scatter-max": "or_", "scatter-sub": "xor"}  # hlo op names (looked up lazily)


def _scatter(name):
  def rule(ctx, operand, indices, updates, *, dimension_numbers, indices_are_sorted=False,
           unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
    dn = dimension_numbers
    op_aval, idx_aval, upd_aval = ctx.avals_in
    ivd = len(idx_aval.shape) - 1
    obd = list(getattr(dn, "operand_batching_dims", ()))
    if mode is not None and "CLIP" in _mode_name(mode):
      wdims = [d for d in range(len(op_aval.shape))
               if d not in dn.inserted_window_dims and d not in obd]
      wsize = dict(zip(wdims, (upd_aval.shape[u] for u in dn.update_window_dims)))
      hi = [op_aval.shape[d] - wsize.get(d, 1) for d in dn.scatter_dims_to_operand_dims]
      zero = mlir.full_like_aval(ctx, 0, idx_aval.update(weak_type=False))
      indices = hlo.clamp(zero, indices, _index_bounds(ctx, idx_aval, hi))
    sdn = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(dn.update_window_dims),
        inserted_window_dims=list(dn.inserted_window_dims), input_batching_dims=obd,
        scatter_indices_batching_dims=list(getattr(dn, "scatter_indices_batching_dims", ())),
        scattered_dims_to_operand_dims=list(dn.scatter_dims_to_operand_dims),
        index_vector_dim=ivd)
    t = mlir.aval_to_ir_type(ctx.avals_out[0])
    op = hlo.ScatterOp([t], [operand], indices, [updates], sdn,
                       indices_are_sorted=bool(indices_are_sorted),
                       unique_indices=bool(unique_indices))
    s = mlir.aval_to_ir_type(op_aval.update(shape=()))
    blk = op.regions[0].blocks.append(s, s)
    comb = (_COMBINE_BOOL if np.dtype(op_aval.dtype) == np.bool_ else _COMBINE)[name]
    with ir.InsertionPoint(blk):
      a, b = blk.arguments
      hlo.return_([b if comb is None else getattr(hlo, comb)(a, b)])
    return [op.result]
  return rule


_reg("dynamic_slice", _dynamic_slice)
_reg("dynamic_update_slice", _dynamic_update_slice)
_reg("gather", _gather)
for _name in _COMBINE:
  _reg(_name, _scatter(_name))
