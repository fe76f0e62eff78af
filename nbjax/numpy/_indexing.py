"""NumPy indexing for nbjax arrays: ``x[idx]``, ``x.at[idx].set/add/...``, take, nonzero, ...

Pipeline position: ``Array.__getitem__`` / ``Tracer.__getitem__`` and the ``.at[]``
methods land here. An index is first normalised (``_parse``): lists become arrays,
concrete boolean masks become integer arrays (``nonzero``; traced masks raise
``NonConcreteBooleanIndexError``), ``None`` and scalar booleans become size-1 operand
axes, ``...`` expands. Static integers and slices then lower to ``lax.slice``/``lax.rev``/
``lax.squeeze``; anything with integer arrays lowers to one ``lax.gather`` (or
``lax.scatter*`` for ``.at[]``) built by ``_index_to_gather``, following NumPy's placement
rules for advanced indices. Negative signed indices count from the end (unsigned ones
never do); out-of-bounds integer indices then clamp when gathering and are dropped when
scattering, as in JAX, static Python integers included (JAX's ``jax_check_static_indices``
flag, ``nbjax.config.update("check_static_indices", True)``, makes those raise IndexError).
Indices convert to the gather's int64 saturating, so uint64 2**64-1 stays past the end.
Eager hot paths skip the primitives where the result is provably the same: basic indexing
and basic-index ``.at[].set/add`` are NumPy's copy and assignment, one integer Array index
is one kernel call (``take_points``/``scatter_points``) or a cached gather/scatter.
"""
from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from kernels.indexing import count_from_end

from nbjax import core, dtypes, lax
from nbjax.config import config
from nbjax.array import Array, copy as copy_buffer
from nbjax.registry import quiet_run
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.lax import indexing as lax_indexing
from nbjax.lax.other import apply_counted
from nbjax.numpy import _util
from nbjax.numpy._reductions import sum as _sum
from nbjax.numpy._ufuncs import divide, negative, power, remainder
from nbjax.numpy._util import as_array, canonicalize_axis, ensure_arraylike
from nbjax.eager_cache import staged

_BOOL = np.dtype(np.bool_)
_I64 = np.dtype(np.int64)


NonConcreteBooleanIndexError = core.NonConcreteBooleanIndexError


def _bool_index_error(x):
  a = core.get_aval(x)
  return NonConcreteBooleanIndexError(("~" if a.weak_type else "") + a.str_short(short_dtypes=False))

# ----------------------------------------------------------------- parsing


class _Parsed(NamedTuple):
  """An index with None/bool scalars made into operand axes and ``...`` expanded."""
  entries: list          # per operand axis: slice | int | array (Array/Tracer/ndarray of ints)
  new_axes: tuple        # axes to insert into the operand first (from None / scalar bools)
  contiguous: bool       # advanced indices adjacent in the original index (NumPy placement)
  static_ints: tuple     # (operand axis, value) of each Python / NumPy integer scalar index


class Slice:
  """JAX's ``jax._src.indexing.Slice`` (made by ``nbjax.ds``): ``size`` elements from
  ``start`` every ``stride``, where ``start`` may be traced. As an index it is a window of
  static size: a dynamic slice (``start`` clamped so the window fits, negative ``start``
  counted from the end) for stride 1, clamped point indices otherwise, as JAX's."""
  __slots__ = ("start", "size", "stride")

  def __init__(self, start, size, stride=1):
    if stride < 0:
      raise ValueError("`stride` must be >= 0.")
    self.start, self.size, self.stride = start, size, stride

  def __repr__(self):
    return f"Slice(start={self.start!r}, size={self.size!r}, stride={self.stride!r})"

  def __eq__(self, other):
    return (type(other) is Slice and (self.start, self.size, self.stride) ==
            (other.start, other.size, other.stride))

  __hash__ = None

  @property
  def is_dynamic_start(self):
    return not _is_int_scalar(self.start)

  @property
  def is_dynamic_size(self):
    return not _is_int_scalar(self.size)

  def tree_flatten(self):
    dyn_start, dyn_size = self.is_dynamic_start, self.is_dynamic_size
    return ((self.start if dyn_start else None, self.size if dyn_size else None),
            (None if dyn_start else self.start, None if dyn_size else self.size, self.stride))

  @classmethod
  def tree_unflatten(cls, aux, children):
    start, size = (a if a is not None else b for a, b in zip(children, aux[:2]))
    return cls(start, size, aux[2])

  @classmethod
  def from_slice(cls, slc, size):
    start, stop, step = slc.indices(size)
    if step < 1:
      raise ValueError(f"slice must have a step >= 1 (found: {step})")
    return cls(start, len(range(start, stop, step)), step)


from nbjax._tree_util import register_pytree_node_class as _register  # noqa: E402
_register(Slice)


def dslice(start, size=None, stride=None):
  """``Slice(start, size, stride)``, mirroring ``slice``: ``dslice(None)`` is ``:``,
  ``dslice(j)`` is ``:j``, ``dslice(i, j)`` is ``i:i+j`` (``i`` may be traced) and
  ``dslice(i, j, s)`` is ``i:i+j:s`` (JAX's ``jax.ds``)."""
  if start is None:
    return slice(None)
  if stride is None:
    stride = 1
  if not isinstance(stride, int):
    raise ValueError("Non-static stride in `dslice`")
  if size is None:
    start, size = 0, start
  return Slice(start, size, stride)


ds = dslice


def _is_int_scalar(x):
  return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _to_index_tuple(idx):
  if isinstance(idx, tuple):
    return idx
  if isinstance(idx, Sequence) and not isinstance(idx, (str, bytes)):
    # JAX's eliminate_deprecated_list_indexing: a sequence holding slices, arrays, sequences,
    # Ellipsis or None was meant as a tuple; any other was meant as an array
    what = "tuple" if any(
        isinstance(i, (Sequence, slice)) or i is Ellipsis or i is None or
        (isinstance(i, np.ndarray) or hasattr(i, "aval")) and np.ndim(i) != 0
        for i in idx) else "array"
    raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; "
                    f"use `arr[{what}(seq)]` instead of `arr[seq]`. "
                    "See https://github.com/jax-ml/jax/issues/4564 for more information.")
  return (idx,)


def _classify(i, pos):
  """One raw index entry as (kind, value): kind in none/ellipsis/slice/int/bool/mask/array."""
  if i is None:
    return "none", None
  if i is Ellipsis:
    return "ellipsis", None
  if isinstance(i, slice):
    for v in (i.start, i.stop, i.step):
      if isinstance(v, Tracer) and not _util.is_concrete(v):
        raise IndexError(f"Slice entries must be static integers. Got {i} at position {pos}")
      if v is not None and not _is_int_scalar(v):
        try:
          operator.index(core.concrete_or_error(None, v, "slice bounds must be static"))
        except TypeError:
          raise TypeError(f"slice indices must be integers or None, got {v!r}") from None
    return "slice", slice(*(None if v is None else operator.index(v)
                            for v in (i.start, i.stop, i.step)))
  if type(i) is Slice:
    if not _is_int_scalar(i.size):
      try:
        i = Slice(i.start, operator.index(core.concrete_or_error(
            None, i.size, "the size of a Slice (jax.ds) must be static")), i.stride)
      except TypeError:
        raise IndexError("Slice entries must be static integers.") from None
    return "dslice", i
  if isinstance(i, (bool, np.bool_)):
    return "bool", bool(i)
  if _is_int_scalar(i):
    return "int", operator.index(i)
  if isinstance(i, str):
    raise TypeError(f"JAX does not support string indexing; got idx={i!r}")
  if isinstance(i, (list, tuple)):
    from nbjax._tree_util import tree_leaves
    if any(isinstance(v, Tracer) for v in tree_leaves(i)):  # traced entries: stacked, as JAX
      i = _creation().asarray(i)
    else:
      i = np.asarray(i) if len(i) else np.zeros((0,), np.int64)
    if isinstance(i, np.ndarray) and i.dtype == object:
      raise TypeError(f"Indexer must have integer or boolean type, got {i!r}")
  if hasattr(i, "__jax_array__") and not isinstance(i, (np.ndarray, Tracer, Array)):
    raise ValueError(core.JAX_ARRAY_ABSTRACTIFY)  # (JAX's: an index is abstractified)
  if not _util.is_arraylike(i):
    if isinstance(i, (float, complex, np.generic)):
      raise TypeError("Indexer must have integer or boolean type, got indexer with type "
                      f"{np.dtype(type(i))}")
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                     f"integer or boolean arrays are valid indices. Got {i}")
  a = i if isinstance(i, (np.ndarray, Tracer, Array)) else as_array(i)
  d = a.dtype
  if d == _BOOL:
    if a.ndim == 0:
      if not _util.is_concrete(a):
        raise _bool_index_error(a)
      return "bool", bool(_util.concrete(a))
    return "mask", a
  if not dtypes.is_int(d):
    raise TypeError(f"Indexer must have integer or boolean type, got indexer with type {d}")
  if a.ndim == 0 and _util.is_concrete(a):
    return "int", operator.index(_util.concrete(a).item())
  return "array", a


def _parse(shape, idx):
  """Normalise ``idx`` for an operand of ``shape`` (see ``_Parsed``)."""
  items = _to_index_tuple(idx)
  raw = [_classify(i, n) for n, i in enumerate(items)]
  if sum(k == "ellipsis" for k, _ in raw) > 1:
    raise IndexError("an index can only have a single ellipsis ('...')")
  adv = [n for n, (k, _) in enumerate(raw) if k in ("int", "bool", "mask", "array")]
  contiguous = not adv or adv == list(range(adv[0], adv[-1] + 1))
  used = sum(v.ndim if k == "mask" else k in ("slice", "dslice", "int", "array")
             for k, v in raw)
  if used > len(shape):
    raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {used} "
                     "were indexed")
  entries, new_axes, ax, static = [], [], 0, []  # ax: operand axis with new axes inserted
  for (k, v), item in zip(raw, items):
    if k == "ellipsis":
      for _ in range(len(shape) - used):
        entries.append(slice(None))
        ax += 1
    elif k == "none":
      new_axes.append(ax)
      entries.append(slice(None))
      ax += 1
    elif k == "bool":
      new_axes.append(ax)
      entries.append(np.arange(int(v)))
      ax += 1
    elif k == "mask":
      if not _util.is_concrete(v):
        raise _bool_index_error(v)
      m = _util.concrete(v)
      sub = _dims_of(shape, new_axes, ax, m.ndim)
      if len(m.shape) != len(sub) or not all(a in (0, b) for a, b in zip(m.shape, sub)):
        raise IndexError(f"boolean index did not match shape of indexed array in index "
                         f"{ax}: got {m.shape}, expected {list(sub)}")
      entries.extend(np.nonzero(m))
      ax += m.ndim
    else:
      if k == "int" and _is_int_scalar(item):
        static.append((ax - len(new_axes), v))
      entries.append(v)
      ax += 1
  return _Parsed(entries, tuple(new_axes), contiguous, tuple(static))


def _dims_of(shape, new_axes, ax, n):
  """Sizes of axes ``ax..ax+n`` of ``shape`` with ``new_axes`` (size 1) inserted."""
  full = list(shape)
  for a in new_axes:
    full.insert(a, 1)
  return tuple(full[ax:ax + n])

# ----------------------------------------------------------------- gather construction


class _Indexer(NamedTuple):
  indices: object        # gather/scatter indices, shape batch_shape + (ndim,)
  dnums: object          # lax.GatherDimensionNumbers
  slice_sizes: tuple
  out_shape: tuple       # shape of the indexed result (= the updates' shape for scatter)
  unique_indices: bool
  indices_are_sorted: bool


def _normalize(a, n):
  """Negative signed integer indices counted from the end (``a + n`` where ``a < 0``),
  widened to the default int first where ``n`` does not fit their dtype (int8 on 300)."""
  if a.dtype.kind != "i":
    return a
  wide = n > np.iinfo(a.dtype).max
  if type(a) is Array:
    a = a._value
  if isinstance(a, np.ndarray):
    a = a.astype(dtypes.default_int_dtype()) if wide else a
    return np.where(a < 0, a + n, a)
  if wide:
    a = _util.convert(a, dtypes.default_int_dtype())
  return lax.select(lax.lt(a, _util.lit(0, a.dtype, True)),
                    lax.add(a, _util.lit(n, a.dtype, True)), a)


def _int_array(i):
  a = np.asarray(i)
  if a.dtype == object:
    raise OverflowError(f"Python int {i} too large to convert to int64")
  return a


def _saturate(a, dtype):
  """Integer indices ``a`` as ``dtype``, values beyond its range saturating to its bounds
  (out of bounds either way) instead of wrapping: ``uint64`` 2**64-1 must stay past the end."""
  if np.can_cast(a.dtype, dtype):  # (int64, or a narrower integer: exact)
    return a.astype(dtype, copy=False) if isinstance(a, np.ndarray) else _util.convert(a, dtype)
  src, dst = np.iinfo(a.dtype), np.iinfo(dtype)
  if isinstance(a, np.ndarray):
    if src.max > dst.max or src.min < dst.min:
      a = np.clip(a, max(src.min, dst.min), min(src.max, dst.max))
    return a.astype(dtype)
  if src.max > dst.max:
    a = lax.min(a, _util.lit(dst.max, a.dtype))
  if src.min < dst.min:
    a = lax.max(a, _util.lit(dst.min, a.dtype))
  return _util.convert(a, dtype)


def _index_to_gather(shape, parsed, normalize=True):
  """The gather (or scatter) that indexes an operand of ``shape`` with ``parsed`` entries
  (negative signed integer indices counted from the end when ``normalize``).

  Output axes, in order: one per slice, and the broadcast shape ``B`` of the integer arrays
  at the first integer-indexed position (or first of all when those positions are not
  adjacent, NumPy's rule). Unit-stride slices are gather windows; strided slices become
  ``arange`` index arrays with their own batch axis."""
  entries = parsed.entries + [slice(None)] * (len(shape) - len(parsed.entries))
  adv = [d for d, e in enumerate(entries) if not isinstance(e, (slice, Slice))]
  arrays = {d: (_int_array(entries[d]) if _is_int_scalar(entries[d]) else entries[d]) for d in adv}
  B = _util.broadcast_shapes(*(arrays[d].shape for d in adv))
  # output slots in order: ("adv",) once for the integer-array group; per slice of axis d with
  # n elements ("win", d, n, start) for unit stride, ("str", d, n, arange) otherwise
  slots, placed = [], False
  if adv and not parsed.contiguous:
    slots.append(("adv",))
    placed = True
  for d, e in enumerate(entries):
    if isinstance(e, slice):
      start, stop, step = e.indices(shape[d])
      n = len(range(start, stop, step))
      slots.append(("win", d, n, start) if step == 1 else
                   ("str", d, n, np.arange(start, stop, step)))
    elif type(e) is Slice:  # jax.ds: a window at a (maybe traced) start, from the end if < 0
      start = e.start
      if _is_int_scalar(start):
        start = start + shape[d] if start < 0 else start
      else:
        start = _normalize(as_array(start), shape[d])
      if e.stride == 1:
        slots.append(("win", d, e.size, start))
      else:
        idt = dtypes.default_int_dtype()
        steps = np.arange(e.size, dtype=idt) * e.stride
        pts = (lax.add(lax.broadcast(_util.convert(start, idt), (e.size,)), Array(steps))
               if isinstance(start, Tracer) else steps + np.asarray(start, idt))
        slots.append(("str", d, e.size, pts))
    elif not placed:
      slots.append(("adv",))
      placed = True
  batch_shape, out_shape, offset_dims, pos = [], [], [], 0
  adv_batch_dims, str_batch_dim = (), {}
  for s in slots:
    if s[0] == "adv":
      adv_batch_dims = tuple(range(len(batch_shape), len(batch_shape) + len(B)))
      batch_shape += B
      out_shape += B
      pos += len(B)
    elif s[0] == "str":
      str_batch_dim[s[1]] = len(batch_shape)
      batch_shape.append(s[2])
      out_shape.append(s[2])
      pos += 1
    else:
      offset_dims.append(pos)
      out_shape.append(s[2])
      pos += 1
  batch_shape = tuple(batch_shape)
  wins = {s[1]: s for s in slots if s[0] == "win"}
  strs = {s[1]: s for s in slots if s[0] == "str"}
  comps, index_map, concrete = [], [], True  # one index column per operand axis that needs one
  for d in range(len(shape)):
    if d in wins:
      st = wins[d][3]
      if _is_int_scalar(st) and st == 0 and wins[d][2] == shape[d] and (
          index_map or d < len(shape) - 1):
        continue  # a full window needs no start index (but keep at least one column)
      concrete &= not isinstance(st, Tracer)
      comps.append((st if isinstance(st, Tracer) else np.asarray(st), ()))
    elif d in strs:
      concrete &= not isinstance(strs[d][3], Tracer)
      comps.append((strs[d][3], (str_batch_dim[d],)))
    else:
      a = _normalize(arrays[d], shape[d]) if normalize else arrays[d]
      concrete &= not isinstance(a, Tracer)
      comps.append((a, adv_batch_dims[len(B) - a.ndim:]))
    index_map.append(d)
  idx_dtype = dtypes.default_int_dtype()
  if concrete:
    cols = [np.broadcast_to(_expand_to(_saturate(np.asarray(a), idx_dtype), dims,
                                       len(batch_shape)), batch_shape) for a, dims in comps]
    indices = Array(np.stack(cols, -1) if cols else np.zeros(batch_shape + (0,), idx_dtype))
  else:
    cols = [lax.broadcast_in_dim(_saturate(a, idx_dtype), batch_shape + (1,), dims)
            for a, dims in comps]
    indices = lax.concatenate(cols, len(batch_shape))
  collapsed = tuple(d for d in range(len(shape)) if d not in wins)
  dnums = lax.GatherDimensionNumbers(offset_dims=tuple(offset_dims),
                                     collapsed_slice_dims=collapsed,
                                     start_index_map=tuple(index_map))
  slice_sizes = tuple(wins[d][2] if d in wins else 1 for d in range(len(shape)))
  ascending = all(s[0] != "str" or (np.size(s[3]) < 2 or s[3][1] > s[3][0]
                                     if isinstance(s[3], np.ndarray) else False)
                  for s in slots)
  # as JAX's: unique and sorted unless an integer array of rank > 0 (advanced indexing) is there
  basic = all(not np.ndim(arrays[d]) for d in adv)
  return _Indexer(indices, dnums, slice_sizes, tuple(out_shape), basic, basic and ascending)


def _expand_to(a, dims, nd):
  """``a`` (NumPy) with its axes placed at ``dims`` of an ``nd``-d array (others size 1)."""
  shape = [1] * nd
  for d, n in zip(dims, a.shape):
    shape[d] = n
  return a.reshape(shape)

# ----------------------------------------------------------------- x[idx]


_TAKE = {}  # rewriting_take's x[i] fast path: signature -> gather params
_SCATTER = {}  # scatter_update's x.at[i].op(y) fast path: signature -> (primitive, params)
_SCATTER_P = {lax.scatter: lax.scatter_p, lax.scatter_add: lax.scatter_add_p,
              lax.scatter_sub: lax.scatter_sub_p, lax.scatter_mul: lax.scatter_mul_p,
              lax.scatter_min: lax.scatter_min_p, lax.scatter_max: lax.scatter_max_p}
_MODES = frozenset({"clip", "fill", "drop", "promise_in_bounds"})


def _gather_mode(mode):
  """JAX's: no mode is ``PROMISE_IN_BOUNDS`` (the gather clamps; its transpose drops the
  cotangents of out-of-bounds indices)."""
  return (lax.GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else
          lax.GatherScatterMode.from_any(mode))


def _partial(shape, entries):
  """Whether ``entries`` take part of an axis (an integer, or a slice that is not the whole
  axis forwards or backwards): JAX's ``has_partial_slices``."""
  for e, n in zip(entries, shape):
    if not isinstance(e, slice):
      if isinstance(e, (int, np.integer)):
        return True
      continue
    a, b, st = e.indices(n)
    if abs(st) != 1 or abs(b - a) != n:
      return True
  return False


def _static_slice(x, entries):
  """``x[entries]`` for static in-bounds ints and slices: lax.slice, rev, squeeze."""
  nd = x.ndim
  entries = entries + [slice(None)] * (nd - len(entries))
  start, limit, strides, rev, squeeze = [], [], [], [], []
  for d, (e, n) in enumerate(zip(entries, x.shape)):
    if isinstance(e, slice):
      a, b, s = e.indices(n)
      m = len(range(a, b, s))
      if s < 0:
        rev.append(d)
        a, s = a + (m - 1) * s, -s
      start.append(a if m else 0)
      limit.append(a + (m - 1) * s + 1 if m else 0)
      strides.append(s)
    else:
      i = e + n if e < 0 else e
      start.append(i)
      limit.append(i + 1)
      strides.append(1)
      squeeze.append(d)
  if start != [0] * nd or limit != list(x.shape) or any(s != 1 for s in strides):
    x = lax.slice(x, start, limit, None if all(s == 1 for s in strides) else strides)
  if rev:
    x = lax.rev(x, tuple(rev))
  if squeeze:
    x = lax.squeeze(x, tuple(squeeze))
  return x


def _is_static_slicing(shape, entries, normalize=True):
  for d, e in enumerate(entries):
    if isinstance(e, slice):
      continue
    if not isinstance(e, int):  # (arrays, and Slice windows: a gather)
      return False
    n = shape[d]
    if not (-n if normalize else 0) <= e < n:
      if n == 0:
        raise IndexError(f"index is out of bounds for axis {d} with size 0")
      return False
  return True


def _dynamic_slice_take(x, entries, normalize):
  """``x[entries]`` as JAX's dynamic-slice path: unit-step slices and integers (traced
  scalars, or static ones out of bounds) become one ``lax.dynamic_slice`` (starts clamped)
  then ``rev``/``squeeze``; None when the index needs a gather."""
  entries = entries + [slice(None)] * (x.ndim - len(entries))
  starts, sizes, rev, squeeze = [], [], [], []
  for d, (e, n) in enumerate(zip(entries, x.shape)):
    if isinstance(e, slice):
      a, b, st = e.indices(n)
      if st not in (1, -1):
        return None
      m = len(range(a, b, st))
      if st < 0:
        rev.append(d)
        a = a + (m - 1) * st
      starts.append(a if m else 0)
      sizes.append(m)
    elif _is_int_scalar(e) or (isinstance(e, Tracer) and e.ndim == 0 and e.dtype.kind in "iu"):
      if n == 0:
        raise IndexError(f"index is out of bounds for axis {d} with size 0")
      if isinstance(e, Tracer):
        if e.weak_type:  # (JAX converts a weakly typed index first)
          e = _util.convert(e, e.dtype, False)
        if not normalize and e.dtype.kind == "i":
          e = lax.max(e, _util.lit(0, e.dtype, True))  # (no counting from the end: clamp)
      else:
        e = max(e + n if normalize and e < 0 else e, 0)
      starts.append(e)
      sizes.append(1)
      squeeze.append(d)
    else:
      return None
  traced = [i for i in starts if isinstance(i, Tracer)]
  if len({i.dtype for i in traced}) > 1:
    idt = dtypes.default_int_dtype()
    starts = [_saturate(i, idt) if isinstance(i, Tracer) else i for i in starts]
  out = lax.dynamic_slice(x, starts, sizes)
  if rev:
    out = lax.rev(out, tuple(rev))
  return lax.squeeze(out, tuple(squeeze)) if squeeze else out


def _check_static_indices(shape, static_ints, normalize):
  """``jax_check_static_indices``: IndexError for an out-of-bounds Python/NumPy integer."""
  for d, i in static_ints:
    if not 0 <= (i + shape[d] if normalize and i < 0 else i) < shape[d]:
      raise IndexError(f"index {i} out of bounds for axis {d} with size {shape[d]} "
                       f"(normalize_indices={normalize})")


def _index_column(v, n, idt, normalize):
  """The gather/scatter index operand for one integer index array ``v`` into an axis of
  size ``n`` (the fast paths): ``v`` as ``idt`` with negative indices counted from the end
  when ``normalize`` (as ``_normalize``), shape ``v.shape + (1,)``."""
  if v.dtype.kind == "i" and normalize and idt == _I64:
    i = count_from_end(v.reshape(-1), n)
  else:
    i = _saturate(_normalize(v, n) if normalize else v, idt)
  return Array._new(i.reshape(v.shape + (1,)))


def _basic(idx):
  """Whether ``idx`` is basic indexing with static parts only: slices of ints, None,
  Ellipsis and Python ints, alone or in a tuple."""
  for e in (idx if type(idx) is tuple else (idx,)):
    t = type(e)
    if t is slice:
      if not ((e.start is None or type(e.start) is int) and (e.stop is None or type(e.stop) is int)
              and (e.step is None or type(e.step) is int and e.step)):
        return False
    elif not (t is int or e is None or e is Ellipsis):
      return False
  return True


def _guard_index(idx, normalize):
  """JAX's transfer guard on an eager index (``core.host_to_device``): what JAX's eager
  indexing moves to the device first, by entry: a NumPy array index itself; a Python bool's
  gather positions; a signed integer Array index's normalising constant (a scalar index: of
  its dtype; an array: a weak Python int); a boolean Array mask's indices (found on the
  host). (Python ints and slices: the start indices of the eager ``slice``, which
  ``DebugNansTrace`` checks.)"""
  for e in (idx if type(idx) is tuple else (idx,)):
    if isinstance(e, np.ndarray):
      core.host_to_device(e)
    elif type(e) is bool:  # (a scalar boolean index: JAX's gather of 1 or 0 positions)
      core.host_to_device(np.zeros(int(e), dtypes.default_int_dtype()))
    elif type(e) is Array:
      d = e._value.dtype
      if d == _BOOL and e.ndim:
        core.host_to_device(np.flatnonzero(e._value).astype(dtypes.default_int_dtype()))
      elif d.kind == "i" and normalize:
        core.host_to_device(np.zeros((), d) if e.ndim == 0 else 0)


class IndexingStrategy(enum.Enum):
  """How ``rewriting_take`` may compute ``x[idx]`` (JAX's): ``AUTO`` picks; ``STATIC_SLICE``
  and ``DYNAMIC_SLICE`` accept only the indices a slice can express."""
  AUTO = "auto"
  GATHER = "gather"
  SCATTER = "scatter"
  STATIC_SLICE = "static_slice"
  DYNAMIC_SLICE = "dynamic_slice"


def _is_int(i):
  return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _check_strategy(shape, idx, strategy, mode, normalize):
  """JAX's errors for a ``strategy`` that cannot express ``idx`` or ``mode`` (the value is
  ``x[idx]`` whichever strategy computes it)."""
  if not isinstance(strategy, IndexingStrategy):
    raise TypeError(f"Expected strategy to be IndexingStrategy; got {strategy}")
  if strategy not in (IndexingStrategy.STATIC_SLICE, IndexingStrategy.DYNAMIC_SLICE):
    return
  name, static = strategy.value, strategy is IndexingStrategy.STATIC_SLICE
  parsed = _parse(shape, idx)
  gmode = _gather_mode(mode)
  if (mode is not None or static) and gmode not in (lax.GatherScatterMode.PROMISE_IN_BOUNDS,
                                                    lax.GatherScatterMode.CLIP):
    raise ValueError(f"{name} requires mode='promise_in_bounds' or mode='clip'")
  if static and gmode == lax.GatherScatterMode.PROMISE_IN_BOUNDS:
    _check_static_indices(shape, parsed.static_ints, normalize)
  for n, i in enumerate(_to_index_tuple(idx)):
    if i is None or i is Ellipsis or _is_int(i):
      continue
    if isinstance(i, (slice, Slice)):
      if static and isinstance(i, Slice):
        raise TypeError(f"{name}: indices must be static scalars or slices. Got index of type "
                        f"{type(i)} at position {n}")
      step = i.stride if isinstance(i, Slice) else i.step
      if not static and step not in (None, 1) and not (isinstance(i, slice) and step == -1):
        raise TypeError(f"{name}: only unit steps supported in slice. Got {i} at position {n}")
      continue
    if static or isinstance(i, (bool, np.bool_)) or (
        not isinstance(i, Sequence) and dtypes.dtype(i) == np.bool_):
      raise TypeError(f"{name}: indices must be {'static ' if static else ''}scalars or slices."
                      f" Got index of type {type(i)} at position {n}")
    if isinstance(i, Sequence) or np.shape(i) != ():
      raise TypeError(f"{name}: only scalar indices allowed. Got index of type {type(i)} at "
                      f"position {n}")


_AUTO = IndexingStrategy.AUTO


def rewriting_take(x, idx, *, indices_are_sorted=False, unique_indices=False, mode=None,
                   fill_value=None, normalize_indices=True, strategy=_AUTO,
                   _guard=True, _sharded=False):
  """``x[idx]`` with NumPy semantics (JAX's: out-of-bounds integer indices clamp by
  default; ``mode='fill'`` returns ``fill_value`` for them instead). Negative signed
  indices count from the end when ``normalize_indices``; unsigned ones never do.
  ``strategy`` (an ``IndexingStrategy``) names how JAX would compute it; the value is the
  same, and a strategy that cannot express ``idx`` raises JAX's error."""
  if strategy is not _AUTO:
    _check_strategy(np.shape(x), idx, strategy, mode, normalize_indices)
  x = as_array(x)
  if type(idx) is int and not _sharded and x.ndim and -x.shape[0] <= idx < x.shape[0] and (
      normalize_indices or idx >= 0) and (mode is None or mode in _MODES):  # x[i] fast path
    i = idx + x.shape[0] if idx < 0 else idx
    if type(x) is Array and _ctx.trace is _EVAL:  # eager: the copy slice + squeeze make
      return Array._new(x._value[i, ...].copy(), x._weak)
    return lax.squeeze(lax.slice(x, (i,) + (0,) * (x.ndim - 1), (i + 1,) + x.shape[1:]), (0,))
  if core.h2d_guard is not None and _guard:  # (take's is JAX's jitted: no index transfers)
    _guard_index(idx, normalize_indices)
  if type(idx) is Array and type(x) is Array and mode is None and fill_value is None:
    if _ctx.trace is _EVAL:  # eager x[i]: one kernel call
      m = idx._value
      if m.dtype == np.bool_ and m.ndim and m.shape == x._value.shape[:m.ndim]:
        return Array._new(x._value[m], x._weak)  # a boolean mask of leading axes: JAX's
        # gather at its concrete nonzero indices, in row-major order, as NumPy's (a copy)
      out = lax_indexing.take_points(x, idx, normalize_indices)
      if out is not None:
        return out
    v, idt = idx._value, dtypes.default_int_dtype()  # x[i], one integer Array i: the
    key = (x._value.shape, v.shape, v.dtype, idt, normalize_indices, unique_indices,
           indices_are_sorted)  # gather worked out once per signature
    params = _TAKE.get(key)
    if params is None and v.dtype.kind in "iu" and v.size and x._value.ndim and x._value.size:
      ix = _index_to_gather(x.shape, _parse(x.shape, idx), normalize_indices)
      params = dict(dimension_numbers=ix.dnums, slice_sizes=ix.slice_sizes,
                    unique_indices=unique_indices or ix.unique_indices,
                    indices_are_sorted=indices_are_sorted or ix.indices_are_sorted,
                    mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS, fill_value=None)
      if len(_TAKE) > 1024:
        _TAKE.clear()
      _TAKE[key] = params
    if params is not None:
      return lax.gather_p.bind(x, _index_column(v, x._value.shape[0], idt, normalize_indices),
                               **params)
  if type(x) is Array and _ctx.trace is _EVAL and mode is None and normalize_indices and \
      _basic(idx):
    try:  # eager basic indexing (slices, None, ..., in-bounds ints): NumPy's is JAX's
      return Array._new(np.array(x._value[idx], order="C"), x._weak)
    except IndexError:  # (an int out of bounds, which JAX clamps; too many indices)
      pass
  parsed = _parse(x.shape, idx)
  gmode = _gather_mode(mode)
  if parsed.static_ints and (mode is None or gmode == lax.GatherScatterMode.PROMISE_IN_BOUNDS) \
      and config.read("check_static_indices"):
    _check_static_indices(x.shape, parsed.static_ints, normalize_indices)
  if parsed.new_axes:
    x = lax.expand_dims(x, parsed.new_axes)
  if _sharded and _partial(x.shape, parsed.entries):
    pass  # JAX's: a sharded array's partial slices are a gather (slices would not propagate)
  elif _is_static_slicing(x.shape, parsed.entries, normalize_indices):
    return _static_slice(x, parsed.entries)
  elif mode is None or gmode != lax.GatherScatterMode.FILL_OR_DROP:
    out = _dynamic_slice_take(x, parsed.entries, normalize_indices)
    if out is not None:
      return out
  ix = _index_to_gather(x.shape, parsed, normalize_indices)
  if math.prod(ix.out_shape) == 0:
    return lax.full_like(x, 0, shape=ix.out_shape)
  for d, n in enumerate(x.shape):
    if n == 0 and ix.slice_sizes[d] == 1:
      raise IndexError(f"index is out of bounds for axis {d} with size 0")
  if fill_value is not None:
    core.concrete_or_error(None, fill_value, "fill_value argument to indexed get()")
    if np.ndim(fill_value) != 0:
      raise ValueError("fill_value argument to indexed get() must be a scalar")
    fill_value = np.asarray(fill_value).item()
  return lax.gather(x, ix.indices, ix.dnums, ix.slice_sizes,
                    unique_indices=unique_indices or ix.unique_indices,
                    indices_are_sorted=indices_are_sorted or ix.indices_are_sorted,
                    mode=gmode, fill_value=fill_value)


def getitem(self, idx):
  """``x[idx]`` (``Array.__getitem__`` / ``Tracer.__getitem__``)."""
  if core.placement[0]:  # (the eager fast paths: computation follows committed data)
    if core.sharded_eager is not None and core.has_sharded((self,)):
      # a sharded array: JAX's eager indexing primitive by primitive (no NumPy fast path),
      # each placed as XLA's propagation says (core.sharded_eager)
      from nbjax import api
      from nbjax.jaxpr import eval_jaxpr
      closed = api.make_jaxpr(lambda x: rewriting_take(x, idx, _sharded=True))(self)
      return eval_jaxpr(closed.jaxpr, closed.consts, self)[0]
    return core.follow(rewriting_take(self, idx), self, *(idx if type(idx) is tuple else (idx,)))
  return rewriting_take(self, idx)

# ----------------------------------------------------------------- x.at[idx].op(y)


def _creation():
  from nbjax.numpy import _creation
  return _creation


_INT_RANGE = {}


def _int_range(d):
  """``(min, max)`` of the integer dtype ``d``, as Python ints."""
  r = _INT_RANGE.get(d)
  if r is None:
    r = _INT_RANGE[d] = (int(np.iinfo(d).min), int(np.iinfo(d).max))
  return r


def _warn_unsafe_scatter_cast(y, dtype):
  """JAX's check of ``x.at[i].set(y)``: a FutureWarning when ``y`` (weak Python scalars as
  weak values) does not cast safely to ``x``'s dtype, and the promotion error where the two
  have no promotion path (under ``jax_numpy_dtype_promotion='strict'``, any two dtypes)."""
  if isinstance(y, np.ndarray) and y.dtype == object:
    return
  try:
    yd = dtypes.dtype(y, canonicalize=True)
    if yd == dtype:
      return
    safe = dtypes.result_type(y, dtype) == dtype
  except TypeError:  # (no dtype, or a key array: the cast below decides)
    return
  if not safe:
    import warnings
    warnings.warn(f"scatter inputs have incompatible types: cannot safely cast value from "
                  f"dtype={yd} to dtype={dtype} with jax_numpy_dtype_promotion="
                  f"{config.read('numpy_dtype_promotion')}. In future JAX releases this will "
                  "result in an error.", FutureWarning, stacklevel=4)


def _store(out, i, y):
  out[i] = y


def _store_add(out, i, y):
  out[i] += out.dtype.type(y)


_F32_MAX = float(np.finfo(np.float32).max)
_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_SET, _ADD = lax.scatter, lax.scatter_add


def _basic_update(x, idx, y, scatter_fn):
  """Eager ``x.at[idx].set/add(y)`` for basic ``idx`` (``_basic``) and ``y`` an Array of
  ``x``'s dtype or a Python scalar that converts exactly as the scatter's cast: a copy of
  ``x`` updated by NumPy's assignment (or in-place add) of the indexed view, which is the
  scatter's result (a basic index names each element once); None where that may differ
  (an integer out of bounds, which the scatter drops; ``y`` not broadcastable: the general
  path's errors)."""
  v = x._value
  d, ty = v.dtype, type(y)
  if ty is Array:
    y = y._value
    if y.dtype is not d:
      return None
  elif ty is float:  # (a finite float beyond float32's range: NumPy's cast warns, XLA's not)
    if not (d is _F64 or d is _F32 and (-_F32_MAX <= y <= _F32_MAX or y != y or
                                        y in (math.inf, -math.inf))):
      return None
  elif not (ty is int and ((d is _F64 or d is _F32) and -2**53 <= y <= 2**53 or d.kind in "iu" and
                           _int_range(d)[0] <= y <= _int_range(d)[1])):
    return None
  if scatter_fn is not _SET and not (d.kind in "iu" or d.kind in "fc" and d.itemsize > 2):
    return None  # (bool: the add's TypeError; narrow floats: the kernel's rounding)
  out = copy_buffer(v)
  if scatter_fn is _SET:  # (NumPy's assignment broadcasts y as the scatter: leading 1s dropped)
    try:
      out[idx] = y
    except (IndexError, ValueError, TypeError):  # (TypeError: ml_dtypes' 0-d into one element)
      return None
    return Array._new(out, x._weak)
  t = idx if type(idx) is tuple else (idx,)
  try:
    view = out[t if Ellipsis in t else t + (Ellipsis,)]  # (a view even where all are ints)
  except IndexError:
    return None
  if not view.size:
    return x  # (as the scatter of no elements)
  if ty is Array:
    while y.ndim > view.ndim and y.shape[0] == 1:
      y = y[0]
    if y.shape != view.shape and (len(y.shape) > view.ndim or any(
        a != 1 and a != b for a, b in zip(y.shape[::-1], view.shape[::-1]))):
      return None
  np.add(view, y, out=view)
  return Array._new(out, x._weak)


def scatter_update(x, idx, y, scatter_fn, *, indices_are_sorted=False, unique_indices=False,
                   mode=None, normalize_indices=True):
  """``x`` with ``scatter_fn`` (``lax.scatter``, ``lax.scatter_add``, ...) applied at ``idx``;
  ``y`` broadcast to ``x[idx].shape`` and cast to ``x``'s dtype. Out-of-bounds updates
  are dropped by default (``mode='clip'`` clamps them)."""
  if type(idx) is int and type(x) is Array and _ctx.trace is _EVAL and mode is None and (
      type(y) is float or type(y) is int and -2**53 <= y <= 2**53) and (
      scatter_fn is lax.scatter or scatter_fn is lax.scatter_add):
    v = x._value  # eager x.at[i].set/add(python scalar) of a float x, or of an integer x and
    k = v.dtype.kind  # an int in its dtype's range: one copy and one store (wrapping, as XLA)
    if v.ndim and (k == "f" or k in "iu" and type(y) is int and
                   _int_range(v.dtype)[0] <= y <= _int_range(v.dtype)[1]):
      n = v.shape[0]
      i = idx + n if idx < 0 and normalize_indices else idx
      out = copy_buffer(v)
      if 0 <= i < n:  # (out of bounds: the update is dropped, as JAX's default mode)
        quiet_run(_store if scatter_fn is lax.scatter else _store_add, out, i, y)
      return Array._new(out, x._weak)
  if core.h2d_guard is not None:  # (JAX's transfer guard: the eager scatter's host y)
    if not isinstance(y, (Array, Tracer)):
      core.host_to_device(y)
    _guard_index(idx, normalize_indices)
  if type(idx) is not Array and type(x) is Array and mode is None and _ctx.trace is _EVAL \
      and normalize_indices and (scatter_fn is _SET or scatter_fn is _ADD) and \
      not core.placement[0] and _basic(idx):  # eager basic index: NumPy's update
    out = _basic_update(x, idx, y, scatter_fn)
    if out is not None:
      return out
  if not (type(x) is Array and type(y) is Array and y._value.dtype is x._value.dtype
          and x._value.dtype.kind != "b"):  # (the hot path: y already of x's dtype, not bool)
    x = as_array(x)
    if x.dtype == _BOOL and scatter_fn in (lax.scatter_add, lax.scatter_mul):
      op = "add" if scatter_fn is lax.scatter_add else "mul"
      raise TypeError(f"{op} does not accept dtype bool at position 0. Accepted dtypes at "
                      "position 0 are subtypes of integer, floating, complexfloating.")
    if isinstance(y, (list, tuple)):  # traced elements are stacked, as jnp.asarray does
      y = (_creation().asarray(y) if any(isinstance(e, (Array, Tracer)) for e in y)
           else np.asarray(y))
    elif type(y) is int:  # JAX's: an int in range of an integer x's dtype is made of that
      d = x.dtype  # dtype (uint32 2**32 - 1 with x64 off); else asarray, then cast
      y = (Array._new(np.asarray(y, d), False) if d.kind in "iu" and _int_range(d)[0] <= y <=
           _int_range(d)[1] else as_array(y))
    _warn_unsafe_scatter_cast(y, x.dtype)
    y = _util.convert(y, x.dtype, x.weak_type)
  if type(idx) is Array and type(x) is Array and type(y) is Array and mode is None:
    if _ctx.trace is _EVAL and scatter_fn in _SCATTER_P and not core.placement[0]:  # eager:
      # one kernel call
      shape = idx._value.shape + x._value.shape[1:]
      yp = y if y._value.shape == shape else \
          Array._new(np.full(shape, y._value), y._weak) if not y._value.ndim else None
      out = None if yp is None else lax_indexing.scatter_points(
          _SCATTER_P[scatter_fn], x, idx, yp, normalize_indices)
      if out is not None:
        return out
    v, idt = idx._value, dtypes.default_int_dtype()  # x.at[i].op(y), one integer Array i:
    key = (scatter_fn, x._value.shape, v.shape, v.dtype, y._value.shape, idt,  # the scatter
           normalize_indices, unique_indices, indices_are_sorted)  # worked out once
    hit = _SCATTER.get(key, _SCATTER)
    if hit is _SCATTER:
      hit = None
      if v.dtype.kind in "iu" and v.size and x._value.ndim and scatter_fn in _SCATTER_P:
        ix = _index_to_gather(x.shape, _parse(x.shape, idx), normalize_indices)
        if ix.out_shape == y._value.shape or not y._value.ndim:  # (a scalar y: broadcast)
          dn = ix.dnums
          hit = (_SCATTER_P[scatter_fn], None if y._value.ndim else ix.out_shape, dict(
              dimension_numbers=lax.ScatterDimensionNumbers(
                  update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
                  scatter_dims_to_operand_dims=dn.start_index_map),
              indices_are_sorted=bool(indices_are_sorted or ix.indices_are_sorted),
              unique_indices=bool(unique_indices or ix.unique_indices),
              mode=lax.GatherScatterMode.FILL_OR_DROP, update_jaxpr=None, update_consts=()))
      if len(_SCATTER) > 1024:
        _SCATTER.clear()
      _SCATTER[key] = hit
    if hit is not None:
      if hit[1] is not None:
        y = Array._new(np.full(hit[1], y._value), y._weak)
      return hit[0].bind(x, _index_column(v, x._value.shape[0], idt, normalize_indices), y,
                         **hit[2])
  parsed = _parse(x.shape, idx)
  xs = lax.expand_dims(x, parsed.new_axes) if parsed.new_axes else x
  ix = _index_to_gather(xs.shape, parsed, normalize_indices)
  if math.prod(ix.out_shape) == 0:
    return x
  while y.ndim > len(ix.out_shape) and y.shape[0] == 1:
    y = lax.squeeze(y, (0,))
  y = _util.broadcast_to(y, ix.out_shape)
  dn = ix.dnums
  sdnums = lax.ScatterDimensionNumbers(update_window_dims=dn.offset_dims,
                                       inserted_window_dims=dn.collapsed_slice_dims,
                                       scatter_dims_to_operand_dims=dn.start_index_map)
  smode = lax.GatherScatterMode.from_any(mode)
  out = scatter_fn(xs, ix.indices, y, sdnums,
                   indices_are_sorted=indices_are_sorted or ix.indices_are_sorted,
                   unique_indices=unique_indices or ix.unique_indices, mode=smode)
  return lax.squeeze(out, parsed.new_axes) if parsed.new_axes else out


class _IndexUpdateHelper:
  """``x.at``: ``x.at[idx]`` is an ``_IndexUpdateRef`` with the functional update methods."""
  __slots__ = ("array",)

  def __init__(self, array):
    self.array = array

  def __getitem__(self, index):
    return _IndexUpdateRef(self.array, index)

  def __repr__(self):
    return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
  """``x.at[idx]``: ``get``, ``set``, ``add``, ``subtract``, ``multiply``/``mul``,
  ``divide``, ``power``, ``min``, ``max``, ``apply``; each returns a new array."""
  __slots__ = ("array", "index")

  def __init__(self, array, index):
    self.array, self.index = array, index

  def __repr__(self):
    return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

  def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
          out_sharding=None, wrap_negative_indices=True):
    """``x[idx]``. ``mode``: None/'clip' clamps out-of-bound indices, 'fill'/'drop' give
    ``fill_value`` (default NaN, or the dtype's minimum/maximum) for them,
    'promise_in_bounds' trusts they are in bounds; ``wrap_negative_indices=False`` makes
    negative indices out of bounds."""
    return rewriting_take(self.array, self.index, indices_are_sorted=indices_are_sorted,
                          unique_indices=unique_indices, mode=mode, fill_value=fill_value,
                          normalize_indices=wrap_negative_indices)

  def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
            wrap_negative_indices=True):
    """``func`` (a unary elementwise function) applied at ``idx``, once per occurrence of
    an index (as ``ufunc.at``: repeated indices apply it repeatedly)."""
    x = as_array(self.array)
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=mode, normalize_indices=wrap_negative_indices)
    count = scatter_update(lax.full_like(x, 0, _INT32), self.index, 1, lax.scatter_add, **kw)
    return apply_counted(x, count, lambda v: _util.convert(func(v), x.dtype, x.weak_type),
                         unique_indices)


_INT32 = np.dtype(np.int32)


def _update_method(name, scatter, doc, via_ones=None):
  prim = _SCATTER_P.get(scatter) if via_ones is None else None

  def method(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
             out_sharding=None, wrap_negative_indices=True):
    if prim is not None and type(values) is Array and type(self.index) is Array and (
        mode is None and type(self.array) is Array and _ctx.trace is _EVAL and
        core.h2d_guard is None and not core.placement[0]):
      # eager x.at[i].op(y), y of x's dtype and of x[i]'s shape: scatter_update's one kernel
      # call, without its argument handling
      out = lax_indexing.scatter_points(prim, self.array, self.index, values,
                                        wrap_negative_indices)
      if out is not None:
        return out
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=mode, normalize_indices=wrap_negative_indices)
    if via_ones is None:
      return scatter_update(self.array, self.index, values, scatter, **kw)
    x = as_array(self.array)  # x / (ones with values multiplied in at idx), x ** (...)
    return via_ones(x, scatter_update(lax.full_like(x, 1), self.index, values, scatter, **kw))
  method.__name__, method.__qualname__ = name, f"_IndexUpdateRef.{name}"
  method.__doc__ = (f"``{doc}``; ``mode`` None/'drop'/'fill' drops out-of-bound updates, "
                    "'clip' clamps them; ``wrap_negative_indices=False`` makes negative "
                    "indices out of bounds.")
  return method


for _n, _s, _d, _v in [
    ("set", lax.scatter, "x[idx] = values", None),
    ("add", lax.scatter_add, "x[idx] += values", None),
    ("multiply", lax.scatter_mul, "x[idx] *= values", None),
    ("min", lax.scatter_min, "x[idx] = minimum(x[idx], values)", None),
    ("max", lax.scatter_max, "x[idx] = maximum(x[idx], values)", None),
    ("divide", lax.scatter_mul, "x[idx] /= values", lambda x, y: divide(x, y)),
    ("power", lax.scatter_mul, "x[idx] **= values", lambda x, y: power(x, y))]:
  setattr(_IndexUpdateRef, _n, _update_method(_n, _s, _d, _v))
_IndexUpdateRef.mul = _IndexUpdateRef.multiply


def _subtract(self, values, **kw):
  """``x[idx] -= values``, accumulating over repeated indices."""
  return self.add(negative(values), **kw)


_IndexUpdateRef.subtract = _subtract
del _n, _s, _d, _v

# ----------------------------------------------------------------- take & co


def _take_eager(general):
  """Eagerly, ``take`` of a vector Array by an integer Array in the default fill mode is one
  pass of ``take_filled`` (negative indices from the end and out-of-range fills in the loop,
  no normalised copy of the indices; 10^6 float32 18.7 -> ~1.3 ms, NumPy's take 1.2-1.6),
  at every size (the staged composite's replay is the same gather); else the composite."""
  @functools.wraps(general)
  def f(a, indices, axis=None, out=None, mode=None, unique_indices=False,
        indices_are_sorted=False, fill_value=None):
    if type(a) is Array and type(indices) is Array and out is None and (
        mode is None or mode == "fill") and a.ndim == 1 and axis in (None, 0, -1) and \
        _ctx.trace is _EVAL and not core.placement[0]:
      r = lax_indexing.take_points(a, indices, True, True, fill_value)
      if r is not None:
        return r
    return general(a, indices, axis, out, mode, unique_indices, indices_are_sorted, fill_value)
  return f


@_take_eager
@staged
def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
  """Elements of ``a`` at ``indices`` along ``axis`` (flattened when ``None``).

  ``mode``: None/'fill' gives ``fill_value`` (NaN, or the dtype's extreme) for
  out-of-bounds indices (negative ones count from the end), 'clip' clamps into
  ``[0, n - 1]`` (negative ones go to 0, as NumPy), 'wrap' wraps, as JAX.

  Args:
    a: input array (or array-like).
    indices: integer index array.
    axis: axis to index along (``None``: the flattened array).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    mode: ``None``/``'fill'``, ``'clip'``, ``'wrap'`` or ``'promise_in_bounds'``, as described
      above.
    unique_indices: promise that the indices are unique (an optimisation hint).
    indices_are_sorted: promise that the indices are sorted (an optimisation hint).
    fill_value: value for out-of-bounds indices in ``'fill'`` mode.

  Returns:
    An array with the taken elements.

  Examples:
    >>> jnp.take(jnp.array([10, 20, 30]), jnp.array([2, 0]))
    Array([30, 10], dtype=int64)
    >>> jnp.take(jnp.array([10, 20, 30]), 5, mode='clip')
    Array(30, dtype=int64)
  """
  if type(a) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["take"](a, indices, axis, mode=mode, unique_indices=unique_indices,
                                   indices_are_sorted=indices_are_sorted)
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
  a, indices = ensure_arraylike("take", a, indices)
  if axis is None:
    a = lax.reshape(a, (a.size,))
    axis = 0
  axis = canonicalize_axis(axis, a.ndim)
  if not dtypes.is_int(indices.dtype):
    raise ValueError("indices must have an integer type")
  n = a.shape[axis]
  if n == 0 and indices.size:
    raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
  if mode == "raise":
    raise NotImplementedError("The 'raise' mode to jnp.take is not supported.")
  if mode == "wrap":
    indices, mode = remainder(indices, n), "promise_in_bounds"
  elif mode is None:
    mode = "fill"
  elif mode not in ("fill", "clip"):
    raise ValueError(f"Invalid mode '{mode}' for np.take")
  return rewriting_take(a, (slice(None),) * axis + (indices,), mode=mode, fill_value=fill_value,
                        unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                        normalize_indices=mode == "fill", _guard=False)


def _along_axis_index(arr_shape, indices, axis):
  """The index tuple ``(iota_0, ..., indices, ..., iota_n)`` of ``take_along_axis``."""
  nd = len(arr_shape)
  if indices.ndim != nd:
    raise ValueError("indices and arr must have the same number of dimensions; "
                     f"{indices.ndim} vs. {nd}")
  idx = []
  for d in range(nd):
    if d == axis:
      idx.append(indices)
    else:
      n = arr_shape[d]
      shape = [1] * nd
      shape[d] = n
      idx.append(np.arange(n).reshape(shape) if n != 1 else np.zeros([1] * nd, np.int64))
  return tuple(idx)


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
  """``arr`` indexed by ``indices`` along ``axis`` (other axes broadcast), as
  :func:`numpy.take_along_axis`; out-of-bounds indices follow ``mode`` (default 'fill').
  Negative indices count from the end when ``wrap_negative_indices`` (default: unless
  ``mode='promise_in_bounds'``, as JAX).

  Args:
    arr: input array.
    indices: integer indices, broadcast against ``arr`` except along ``axis``.
    axis: the axis to index along (``None``: the flattened array).
    mode: ``'fill'`` (default), ``'clip'`` or ``'promise_in_bounds'``.
    fill_value: value for out-of-bounds indices in ``'fill'`` mode.
    wrap_negative_indices: whether negative indices count from the end.

  Returns:
    An array of the broadcast shape of ``indices``.

  Examples:
    >>> x = jnp.array([[3, 1, 2], [6, 5, 4]])
    >>> jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
    Array([[1, 2, 3],
           [4, 5, 6]], dtype=int64)
  """
  if _ctx.trace is _EVAL:  # (eagerly the primitives, as JAX's jit would run them: replayed)
    return _take_along_axis_eager(arr, indices, axis, mode, fill_value, wrap_negative_indices)
  return _take_along_axis_jit()(arr, indices, axis=axis, mode=mode, fill_value=fill_value,
                                wrap_negative_indices=wrap_negative_indices)


@functools.cache
def _take_along_axis_jit():
  from nbjax.interpreters.pjit import jit  # (JAX's take_along_axis is a jit: a nested call)

  def take_along_axis(arr, indices, axis, mode, fill_value, wrap_negative_indices):
    return _take_along_axis(arr, indices, axis, mode, fill_value, wrap_negative_indices)
  return jit(take_along_axis, static_argnames=("axis", "mode", "fill_value",
                                               "wrap_negative_indices"))


def _take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None,
                     wrap_negative_indices=None):
  # JAX's gather: the indices along ``axis`` alone, the other axes batching dimensions (or
  # whole slices where ``indices`` has size 1, or squeezed where ``arr`` has)
  a, indices = ensure_arraylike("take_along_axis", arr, indices)
  if not dtypes.is_int(indices.dtype):
    raise TypeError(f"take_along_axis indices must be of integer type, got {indices.dtype}")
  if axis is None:
    if indices.ndim != 1:
      raise ValueError("take_along_axis indices must be 1D if axis=None, got shape "
                       f"{indices.shape}")
    a, axis = lax.reshape(a, (a.size,)), 0
  rank, idx_shape = a.ndim, indices.shape
  if indices.ndim != rank:
    raise ValueError("indices and arr must have the same number of dimensions; "
                     f"{indices.ndim} vs. {rank}")
  axis = canonicalize_axis(axis, rank)
  n = a.shape[axis]
  arr_shape = a.shape[:axis] + (1,) + a.shape[axis + 1:]
  out_shape = lax.broadcast_shapes(idx_shape, arr_shape)
  if n == 0:
    return lax.full(out_shape, 0, a.dtype)
  if wrap_negative_indices is None:
    wrap_negative_indices = mode != "promise_in_bounds"
  if wrap_negative_indices:  # (JAX's index dtype: int32 unless the axis needs int64)
    indices = lax.convert_element_type(indices, np.int64 if n > 2**31 - 1 else np.int32)
    if indices.dtype.kind == "i":
      indices = lax.select(indices < 0, lax.add(indices, np.array(n, indices.dtype)), indices)
  if mode == "one_hot":
    from nbjax.numpy._dot import einsum
    hot = lax.eq(lax.expand_dims(indices, (indices.ndim,)),
                 lax.broadcasted_iota(indices.dtype, idx_shape + (n,), indices.ndim))
    if rank == 1:
      return einsum("...b,b->...", hot, a, preferred_element_type=a.dtype)
    labels = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[:axis]
    return einsum(f"{labels}y...z,{labels}z...->{labels}y...", hot, a,
                  precision=lax.Precision.HIGHEST, preferred_element_type=a.dtype)
  slice_sizes, offset, index_map, collapsed, op_batch, idx_batch, squeeze = ([] for _ in range(7))
  i2 = j = 0  # (the position in the squeezed operand, in the indices)
  for i in range(rank):
    if i == axis:
      slice_sizes.append(1)
      index_map.append(i2)
      collapsed.append(i2)
      i2, j = i2 + 1, j + 1
    elif idx_shape[i] == 1:  # the whole axis of ``arr``: no iota
      offset.append(i)
      slice_sizes.append(arr_shape[i])
      i2 += 1
    elif arr_shape[i] == 1:  # broadcast from ``arr``: squeezed
      squeeze.append(i)
      j += 1
    else:
      slice_sizes.append(1)
      op_batch.append(i2)
      idx_batch.append(j)
      i2, j = i2 + 1, j + 1
  gshape = tuple(d for i, d in enumerate(out_shape) if i == axis or idx_shape[i] != 1) + (1,)
  dn = lax_indexing.GatherDimensionNumbers(
      offset_dims=tuple(offset), collapsed_slice_dims=tuple(collapsed),
      start_index_map=tuple(index_map), operand_batching_dims=tuple(op_batch),
      start_indices_batching_dims=tuple(idx_batch))
  return lax.gather(lax.squeeze(a, squeeze), lax.reshape(indices, gshape), dn,
                    tuple(slice_sizes), mode="fill" if mode is None else mode,
                    fill_value=fill_value)


_take_along_axis_eager = staged(_take_along_axis)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
  """A copy of ``arr`` with ``values`` put at ``indices`` along ``axis`` (``inplace=False``).

  Args:
    arr: input array.
    indices: integer indices, broadcast against ``arr`` except along ``axis``.
    values: values to put.
    axis: the axis to index along (``None``: the flattened array).
    inplace: must be False: JAX arrays cannot be modified in place.
    mode: out-of-bounds handling, as in ``ndarray.at``'s ``set`` (default: such updates are
      dropped).

  Returns:
    A copy of ``arr`` with the values put.

  Examples:
    >>> jnp.put_along_axis(jnp.zeros((2, 2)), jnp.array([[1], [0]]), 9.0, axis=1, inplace=False)
    Array([[0., 9.],
           [9., 0.]], dtype=float64)
  """
  if inplace:
    raise ValueError("jax.numpy.put_along_axis cannot modify arrays in-place, because JAX "
                     "arrays are immutable. Pass inplace=False to instead return an updated array.")
  arr, indices = ensure_arraylike("put_along_axis", arr, indices)
  shape = arr.shape
  if axis is None:
    arr, axis = lax.reshape(arr, (arr.size,)), 0
  axis = canonicalize_axis(axis, arr.ndim)
  out = scatter_update(arr, _along_axis_index(arr.shape, indices, axis), values, lax.scatter,
                       mode=mode)
  return lax.reshape(out, shape) if out.shape != shape else out


def nonzero(a, *, size=None, fill_value=None):
  """Indices of the non-zero elements, one array per axis.

  Without ``size`` the result's shape depends on data, so ``a`` must be concrete (eager);
  with ``size`` the first ``size`` indices are returned (padded with ``fill_value``,
  default 0), which also works under transformations.

  Args:
    a: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A tuple of ``a.ndim`` integer arrays.

  Examples:
    >>> jnp.nonzero(jnp.array([0, 3, 0, 5]))
    (Array([1, 3], dtype=int64),)
    >>> jnp.nonzero(jnp.array([0, 3, 0, 5]), size=3)
    (Array([1, 3, 0], dtype=int64),)
  """
  a = ensure_arraylike("nonzero", a)
  if a.ndim == 0:
    raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                     "jnp.atleast_1d(scalar).nonzero() instead.")
  d = dtypes.default_int_dtype()
  if size is None:
    msg = ("The size argument of jnp.nonzero must be statically specified to use "
           "jnp.nonzero within JAX transformations.")
    if isinstance(a, Tracer) and a.to_concrete_value() is None:
      # JAX concretizes the count of nonzeros, so its error names an integer scalar
      core.concrete_or_error(None, _sum(a if a.dtype == _BOOL else a != 0), msg)
    v = core.concrete_or_error(None, a, msg)
    return tuple(Array._new(i.astype(d)) for i in np.nonzero(np.asarray(v)))
  size = _util.index(size, "size")
  if a.size == 0 or size == 0:  # as JAX: zeros, fill_value unused
    return tuple(lax.full((size,), 0, d) for _ in a.shape)
  fills = (None,) * a.ndim
  if fill_value is not None:
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * a.ndim
    if any(np.shape(v) != () for v in fills):
      raise ValueError(f"fill_value must be a scalar or a tuple of length {a.ndim}; "
                       f"got {fill_value}")
    if len(fills) != a.ndim:
      raise ValueError(f"safe_zip() argument 1 has length {a.ndim} but argument 0 has length "
                       f"{len(fills)}. All lengths: ({len(fills)}, {a.ndim})")
  from nbjax.numpy._manip import argsort, where
  mask = lax.reshape(a != 0 if a.dtype != _BOOL else a, (a.size,))
  count = lax.reduce_sum(_util.convert(mask, d), (0,))
  order = argsort(lax.bitwise_not(mask))
  if size <= a.size:
    flat = lax.slice(order, (0,), (size,))
  else:
    flat = lax.pad(order, _util.lit(0, d), [(0, size - a.size, 0)])
  valid = lax.lt(lax.iota(d, size), count)
  out, rem = [], flat
  strides = [math.prod(a.shape[k + 1:]) for k in range(a.ndim)]
  for k, st in enumerate(strides):
    if st == 1:  # the later axes (if any) have size 1
      q, rem = rem, lax.full_like(rem, 0)
    else:
      q, rem = lax.div(rem, _util.lit(st, d, True)), lax.rem(rem, _util.lit(st, d, True))
    # padding: 0, or fill_value as JAX's where(...) (a float fill gives float indices)
    out.append(lax.select(valid, q, lax.full_like(q, 0)) if fills[k] is None else
               where(valid, q, fills[k]))
  return tuple(out)


def flatnonzero(a, *, size=None, fill_value=None):
  """Indices of the non-zero elements of ``ravel(a)``.

  Args:
    a: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d integer array of flat indices.

  Examples:
    >>> jnp.flatnonzero(jnp.array([[0, 3], [5, 0]]))
    Array([1, 2], dtype=int64)
  """
  a = ensure_arraylike("flatnonzero", a)
  return nonzero(lax.reshape(a, (a.size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
  """Indices of non-zero elements as rows of an ``(N, a.ndim)`` array.

  Args:
    a: input array (or array-like).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    An integer array of shape ``(N, a.ndim)``.

  Examples:
    >>> jnp.argwhere(jnp.array([[0, 3], [5, 0]]))
    Array([[0, 1],
           [1, 0]], dtype=int64)
  """
  a = ensure_arraylike("argwhere", a)
  from nbjax.numpy._manip import stack
  out = stack(nonzero(lax.reshape(a, (1,)) if a.ndim == 0 else a, size=size,
                      fill_value=fill_value), -1)
  return lax.slice(out, (0, 0), (out.shape[0], 0)) if a.ndim == 0 else out


def extract(condition, arr, *, size=None, fill_value=0):
  """Elements of ``ravel(arr)`` where ``ravel(condition)`` is true (eager unless ``size``).

  Args:
    condition: boolean array (or array-like).
    arr: input array.
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.

  Returns:
    A 1-d array of the selected elements.

  Examples:
    >>> jnp.extract(jnp.array([True, False, True]), jnp.array([1, 2, 3]))
    Array([1, 3], dtype=int64)
  """
  condition, arr = ensure_arraylike("extract", condition, arr)
  return compress(lax.reshape(condition, (condition.size,)), lax.reshape(arr, (arr.size,)),
                  size=size, fill_value=fill_value)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
  """Slices of ``a`` along ``axis`` where ``condition`` is true (eager unless ``size``).

  Args:
    condition: 1-d boolean array selecting slices.
    a: input array (or array-like).
    axis: axis to select along (``None``: the flattened array).
    size: optional static length of the result, needed to use this function under ``jit``;
      results are truncated or padded with ``fill_value``.
    fill_value: value used to pad the result when ``size`` exceeds the number of entries.
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    An array of the selected slices.

  Examples:
    >>> jnp.compress(jnp.array([True, False, True]), jnp.array([1, 2, 3]))
    Array([1, 3], dtype=int64)
  """
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
  condition, a = ensure_arraylike("compress", condition, a)
  if condition.ndim != 1:
    raise ValueError("condition must be a 1D array")
  if axis is None:
    a, axis = lax.reshape(a, (a.size,)), 0
  axis = canonicalize_axis(axis, a.ndim)
  cond = _util.convert(condition, _BOOL)
  n = a.shape[axis]
  if cond.shape[0] < n and size is not None:  # JAX: only the first len(condition) slices
    a, n = lax.slice_in_dim(a, 0, cond.shape[0], axis=axis), cond.shape[0]
  if cond.shape[0] > n:
    extra = lax.slice(cond, (n,), cond.shape)
    cond = lax.slice(cond, (0,), (n,))
    if size is None and _util.concrete(lax.reduce_or(extra, (0,)), "jnp.compress"):
      raise ValueError("condition contains entries that are out of bounds")
  if size is None:
    (idx,) = nonzero(cond)
  elif not 0 <= size <= n:
    raise ValueError("size must be positive and not greater than the size of the array axis;"
                     f" got size={size} for a.shape[axis]={n}")
  else:
    (idx,) = nonzero(cond, size=size, fill_value=n)
  return take(a, idx, axis=axis, mode="fill", fill_value=fill_value)


# ----------------------------------------------------------------- diagonals


def _np_diagonal(a, offset, axis1=0, axis2=1):
  """Eagerly (an Array, int arguments JAX accepts), NumPy's diagonal view of ``a``, copied:
  data movement, the composite's bits (1000x1000 float32 48 -> ~8 us); else None."""
  if type(a) is Array and _ctx.trace is _EVAL and not core.placement[0] and \
      type(offset) is int and type(axis1) is int and type(axis2) is int:
    v = a._value
    nd = v.ndim
    if nd >= 2 and -nd <= axis1 < nd and -nd <= axis2 < nd and axis1 % nd != axis2 % nd and \
        -v.shape[axis1] < offset < v.shape[axis2]:  # (NumPy's C int offset: in range only)
      return Array._new(np.diagonal(v, offset, axis1, axis2).copy(), a._weak)
  return None


def _diagonal_eager(general):
  @functools.wraps(general)
  def diagonal(a, offset=0, axis1=0, axis2=1):
    r = _np_diagonal(a, offset, axis1, axis2)
    return general(a, offset, axis1, axis2) if r is None else r
  return diagonal


@_diagonal_eager
@staged
def diagonal(a, offset=0, axis1=0, axis2=1):
  """The ``offset`` diagonal of the ``(axis1, axis2)`` planes, as a last axis: one strided
  ``lax.slice`` of the flattened planes (no gather).

  Args:
    a: input array (or array-like).
    offset: offset of the diagonal from the main diagonal.
    axis1: first axis of the 2-d planes.
    axis2: second axis of the 2-d planes.

  Returns:
    An array with the diagonal as its last axis.

  Examples:
    >>> jnp.diagonal(jnp.array([[1, 2], [3, 4]]))
    Array([1, 4], dtype=int64)
    >>> jnp.diagonal(jnp.array([[1, 2], [3, 4]]), offset=1)
    Array([2], dtype=int64)
  """
  a = ensure_arraylike("diagonal", a)
  if a.ndim < 2:
    raise ValueError("diagonal requires an array of at least two dimensions.")
  offset = _util.index(offset, "offset")
  ax1, ax2 = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
  if ax1 == ax2:
    raise ValueError("axis1 and axis2 must not be equal")
  perm = [d for d in range(a.ndim) if d not in (ax1, ax2)] + [ax1, ax2]
  if perm != list(range(a.ndim)):
    a = lax.transpose(a, tuple(perm))
  *batch, n, m = a.shape
  L = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
  flat = lax.reshape(a, (*batch, n * m))
  start = offset if offset >= 0 else -offset * m
  nb = len(batch)
  if L == 0:
    return lax.slice(flat, (0,) * (nb + 1), (*batch, 0))
  return lax.slice(flat, (0,) * nb + (start,), (*batch, start + (L - 1) * (m + 1) + 1),
                   (1,) * nb + (m + 1,))


@staged
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
  """Sum along a diagonal.

  Args:
    a: input array (or array-like).
    offset: offset of the diagonal from the main diagonal.
    axis1: first axis of the 2-d planes.
    axis2: second axis of the 2-d planes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    The sums along the diagonals (an array of the remaining axes).

  Examples:
    >>> jnp.trace(jnp.array([[1, 2], [3, 4]]))
    Array(5, dtype=int64)
  """
  a = ensure_arraylike("trace", a)
  if a.ndim >= 2 and canonicalize_axis(axis1, a.ndim) == canonicalize_axis(axis2, a.ndim):
    raise ValueError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
  dtype = _util.canonicalize_user_dtype(dtype, "trace")
  return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


def _diag_eager(general):
  @functools.wraps(general)
  def diag(v, k=0):
    r = _np_diagonal(v, k) if type(v) is Array and v.ndim == 2 else None
    return general(v, k) if r is None else r
  return diag


@_diag_eager
@staged
def diag(v, k=0):
  """The ``k``-th diagonal of a 2-d ``v``, or a 2-d array with 1-d ``v`` on it.

  Args:
    v: 1-d or 2-d input array.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    A 1-d diagonal (2-d input) or a 2-d array (1-d input).

  Examples:
    >>> jnp.diag(jnp.array([[1, 2], [3, 4]]))
    Array([1, 4], dtype=int64)
    >>> jnp.diag(jnp.array([1, 2]))
    Array([[1, 0],
           [0, 2]], dtype=int64)
  """
  v = ensure_arraylike("diag", v)
  k = _util.index(k, "k")
  if v.ndim == 2:
    return diagonal(v, k)
  if v.ndim != 1:
    raise ValueError("diag input must be 1d or 2d")
  L = v.shape[0]
  n = L + abs(k)
  vp = lax.pad(v, _util.lit(0, v.dtype), [(0, abs(k), 0)])
  vals = lax.broadcast_in_dim(vp, (n, n), (0,) if k >= 0 else (1,))
  from nbjax.numpy._creation import eye
  return lax.select(eye(n, k=k, dtype=np.bool_), vals, lax.full_like(vals, 0))


def diagflat(v, k=0):
  """A 2-d array with the flattened ``v`` on its ``k``-th diagonal.

  Args:
    v: input array (flattened).
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    A 2-d array.

  Examples:
    >>> jnp.diagflat(jnp.array([1, 2]), k=1)
    Array([[0, 1, 0],
           [0, 0, 2],
           [0, 0, 0]], dtype=int64)
  """
  v = ensure_arraylike("diagflat", v)
  out = diag(lax.reshape(v, (v.size,)), k)
  return _util.convert(out, out.dtype, False) if dtypes.is_weakly_typed(out) else out  # (JAX)
