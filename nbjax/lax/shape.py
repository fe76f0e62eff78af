"""Shape (data-movement) primitives: every rule of each one in one place.

Pipeline position: ``lax.reshape(x, ...)`` -> ``reshape_p.bind``; with no transformation
active the registry's eager entry validates with the abstract-eval rule below and runs the
selected backend: a strided-copy numba kernel (``kernels.shape``) or NumPy (whose reshape,
transpose and broadcasting are views plus one copy). Under transformations the jvp
(linear: the primitive on the tangents), transpose and batching rules below apply.

Primitives: broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate, pad, slice,
iota; wrappers with JAX's signatures: expand_dims, broadcast, broadcasted_iota, collapse,
slice_in_dim, index_in_dim (dynamic variants live in ``nbjax.lax.indexing``).
"""
from __future__ import annotations

import builtins
import math
import functools
import operator

import numpy as np

from kernels import shape as K
from nbjax import core, dtypes, registry
from nbjax.array import Array
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad, batching, jet
from nbjax.lax.elementwise import _any, _convert_element_type, _num, accepts, check_same_dtypes

# Elements at which the prange kernels would be used. Measured on the shared 2-core machine:
# a 1e6-element prange copy took ~20 ms against ~0.1 ms serial (thread wake-up/contention),
# so the parallel variants are disabled by default; lower this on an idle multi-core host.
PAR_MIN = 1 << 62
ALL_DTYPES = sorted(_any, key=str)
NUMPY_ALWAYS = ("numpy", "numpy", 1 << 62)
NUMBA_ALWAYS = ("numba", "numba", 1 << 62)
not_mapped = batching.not_mapped
_pyslice = builtins.slice  # ``slice`` below is lax.slice, as in JAX

# ----------------------------------------------------------------- helpers (shared with indexing)


def canonicalize_axis(axis, ndim):
  """``axis`` in ``[0, ndim)``, negative counted from the end. Out of range: JAX's message as
  NumPy's ``AxisError``, a ValueError (what JAX raises) and an IndexError (what the array API
  standard asks for)."""
  axis = operator.index(axis)
  if not -ndim <= axis < ndim:
    raise np.exceptions.AxisError(axis, ndim)
  return axis + ndim if axis < 0 else axis


def canonicalize_shape(shape, context=""):
  """A shape as a tuple of Python ints (JAX's TypeError for anything else)."""
  try:
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__") and
                                                 np.ndim(shape) == 0):
      return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)
  except TypeError:
    pass
  if isinstance(shape, core.Tracer) and not shape.shape or (
      not isinstance(shape, (tuple, list, core.Tracer)) and np.ndim(shape) == 0):
    shape = (shape,)  # a scalar: JAX's (d,)
  msg = f"Shapes must be 1D sequences of concrete values of integer type, got {shape}."
  if context:
    msg += f" {context}."
  if isinstance(shape, (tuple, list)) and any(isinstance(d, core.Tracer) for d in shape):
    msg += ("\nIf using `jit`, try using `static_argnums` or applying `jit` to "
            "smaller subfunctions.")
    msg += "".join(d._origin_msg() for d in shape if isinstance(d, core.Tracer))
  raise TypeError(msg)


def _check_shapelike(name, arg, obj, non_negative=True):
  if not isinstance(obj, (tuple, list, np.ndarray)):
    raise TypeError(f"{name} {arg} must be of type tuple/list/ndarray, got {type(obj)}.")
  if any(not isinstance(d, (int, np.integer)) for d in obj):
    raise TypeError(f"{name} {arg} must have every element be an integer type, got "
                    f"{tuple(type(d) for d in obj)}.")
  if non_negative and any(d < 0 for d in obj):
    raise TypeError(f"{name} {arg} must have every element be nonnegative, got {obj}.")


def c_strides(shape):
  """Element strides of a C-ordered array of ``shape``."""
  st, acc = [0] * len(shape), 1
  for k in range(len(shape) - 1, -1, -1):
    st[k] = acc
    acc *= shape[k]
  return st


def _merge(shape, sst, dst):
  """Drop size-1 dims and merge dims that are contiguous in both source and destination."""
  sh, ss, ds = [], [], []
  for n, a, b in zip(shape, sst, dst):
    if n == 1:
      continue
    if sh and ss[-1] == a * n and ds[-1] == b * n:
      sh[-1] *= n
      ss[-1], ds[-1] = a, b
    else:
      sh.append(n)
      ss.append(a)
      ds.append(b)
  i64 = np.int64
  return np.array(sh, i64), np.array(ss, i64), np.array(ds, i64)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a):
  """``a`` viewed as unsigned integers of its itemsize (complex128 stays): data movement is
  dtype-agnostic, so float16/bool go through the kernels too and few signatures compile."""
  u = _UINT.get(a.dtype.itemsize)
  return a.view(u) if u is not None else a


def strided_copy(src, soff, sst, shape, out=None, doff=0, dst_st=None):
  """Copy the window ``src[soff + i.sst]`` (i over ``shape``) into ``out`` (fresh C array by
  default) at ``doff + i.dst_st``, with the ``kernels.shape`` copy kernel. Returns ``out``."""
  if out is None:
    out = np.empty(shape, src.dtype)
  if dst_st is None:
    dst_st = c_strides(shape)
  n = math.prod(shape)
  if n:
    sh, ss, ds = _merge(shape, sst, dst_st)
    (K.copy_strided_par if n >= PAR_MIN else K.copy_strided)(
        bits(np.ravel(src)), soff, ss, bits(out.reshape(-1)), doff, ds, sh)
  return out


def _c(x):
  return np.asarray(x, order="C")  # unlike ascontiguousarray, keeps 0-d arrays 0-d


def random_array(rng, shape, dtype):
  """Test data of any dtype (used by ``meta['samples']`` of shape and indexing primitives)."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    x = rng.random(shape) < 0.5
  elif dtype.kind == "u":
    x = rng.integers(0, 10, shape)
  elif dtype.kind == "i":
    x = rng.integers(-9, 10, shape)
  elif dtype.kind == "c":
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
  else:
    x = rng.standard_normal(shape)
  return np.asarray(x, dtype)


def _same_aval(x, shape):
  return ShapedArray(shape, x.dtype, x.weak_type)


def zeros(shape, dtype):
  """A zero array of ``shape``/``dtype`` (a broadcast scalar; cotangents of linear rules)."""
  return broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


# ----------------------------------------------------------------- broadcast_in_dim


def _broadcast_in_dim_abstract_eval(operand, *, shape, broadcast_dimensions, sharding=None):
  _check_shapelike("broadcast_in_dim", "shape", shape)
  _check_shapelike("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
  nd = operand.ndim
  if nd != len(broadcast_dimensions):
    raise TypeError("broadcast_in_dim broadcast_dimensions must have length equal to operand "
                    f"ndim; got broadcast_dimensions {broadcast_dimensions} for operand ndim {nd}.")
  if len(shape) < nd:
    raise TypeError("broadcast_in_dim target broadcast shape must have equal or higher rank to "
                    f"the operand shape; got operand ndim {nd} and target broadcast ndim "
                    f"{len(shape)}.")
  if not set(broadcast_dimensions) <= set(range(len(shape))):
    raise TypeError("broadcast_in_dim broadcast_dimensions must be a subset of output "
                    f"dimensions, got {broadcast_dimensions} for operand ndim {nd} and shape "
                    f"{shape}.")
  if not all(operand.shape[i] in (1, shape[broadcast_dimensions[i]]) for i in range(nd)):
    raise TypeError("broadcast_in_dim operand dimension sizes must either be 1, or be equal to "
                    "their corresponding dimensions in the target broadcast shape; got operand "
                    f"of shape {operand.shape}, target broadcast shape {shape}, "
                    f"broadcast_dimensions {broadcast_dimensions} ")
  if len(set(broadcast_dimensions)) != nd:
    raise TypeError("broadcast_in_dim broadcast_dimensions must not contain duplicates, got "
                    f"broadcast_dimensions {broadcast_dimensions}")
  return _same_aval(operand, tuple(shape))


def _expand_view(x, shape, broadcast_dimensions):
  """A broadcast that only inserts size-1 dims (expand_dims) is a reshape: a zero-copy view."""
  if x.size == math.prod(shape) and list(broadcast_dimensions) == sorted(broadcast_dimensions):
    return x.reshape(shape)
  return None


def _broadcast_in_dim_numba(x, *, shape, broadcast_dimensions, sharding=None):
  v = _expand_view(x, shape, broadcast_dimensions)
  if v is not None:
    return v
  if list(broadcast_dimensions) == sorted(broadcast_dimensions):  # NumPy's own broadcast: a
    # copy from the operand with size-1 axes inserted (1000 float32s: 3.4 us against 14 us for
    # the strided kernel's arguments and loop; 10^6: within noise)
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
      expanded[d] = x.shape[i]
    if expanded[-1] == 1 and 1 < shape[-1] <= 64 and expanded[:-1] == list(shape[:-1]):
      # each element repeated along a short new last axis (jnp.repeat, tile's inner copies):
      # NumPy's repeat, not copyto's per-row loop (2e6 float32 outputs, r=2: 2.7 -> 1.05 ms)
      return np.repeat(x.reshape(expanded), shape[-1], axis=-1)
    out = np.empty(shape, x.dtype)
    np.copyto(out, x.reshape(expanded))
    return out
  xs = c_strides(x.shape)
  sst = [0] * len(shape)
  for i, d in enumerate(broadcast_dimensions):
    if x.shape[i] != 1:
      sst[d] = xs[i]
  return strided_copy(x, 0, sst, tuple(shape))


def _broadcast_in_dim_specialize(avals, params):
  """An expand_dims-like broadcast (no element repeated, dimensions in order): the reshape
  view itself, with no per-call checks (the registry's hot path, eager programs)."""
  shape, bd = params["shape"], params["broadcast_dimensions"]
  if math.prod(avals[0].shape) != math.prod(shape) or list(bd) != sorted(bd):
    return None
  k = lambda x: x.reshape(shape)
  k.bare = True  # (C order, the operand's dtype; not ``fresh``: a view of the operand)
  return k


_broadcast_in_dim_numba.specialize = _broadcast_in_dim_specialize


def _broadcast_in_dim_numpy(x, *, shape, broadcast_dimensions, sharding=None):
  v = _expand_view(x, shape, broadcast_dimensions)
  if v is not None:
    return v
  expanded = [1] * len(shape)
  for i, d in enumerate(broadcast_dimensions):
    expanded[d] = x.shape[i]
  x = np.transpose(x, np.argsort(broadcast_dimensions)) if x.ndim else x
  return _c(np.broadcast_to(x.reshape(expanded), shape))


_broadcast_in_dim_numpy.specialize = _broadcast_in_dim_specialize


def _broadcast_in_dim_transpose(ct, operand, *, shape, broadcast_dimensions, sharding=None):
  from nbjax.lax.reductions import reduce_sum
  unit = [i for i, s in enumerate(operand.aval.shape)
          if s == 1 and shape[broadcast_dimensions[i]] != 1]
  kept = [i for i in range(operand.aval.ndim) if i not in unit]
  kept_out = [broadcast_dimensions[i] for i in kept]
  axes = tuple(d for d in range(len(shape)) if d not in kept_out)
  r = reduce_sum(ct, axes) if axes else ct
  order = np.argsort(kept_out)
  if list(order) != list(range(len(order))):
    r = transpose(r, tuple(int(i) for i in np.argsort(order)))
  if unit:
    r = reshape(r, operand.aval.shape)
  return [r]


def _broadcast_in_dim_batch(vals, dims, *, shape, broadcast_dimensions, sharding=None):
  (x,), (b,) = vals, dims
  bsz = core.get_aval(x).shape[b]
  bd = list(d + 1 for d in broadcast_dimensions)
  bd.insert(b, 0)
  return broadcast_in_dim(x, (bsz, *shape), tuple(bd)), 0


broadcast_in_dim_p = Primitive("broadcast_in_dim")
# printed as JAX prints it: the shape (and a None sharding) are the binder's type, and empty
# broadcast dimensions are not shown
broadcast_in_dim_p.pp_params = lambda p: {
    k: v for k, v in p.items() if k != "shape" and not (
        k == "sharding" and v is None) and not (k == "broadcast_dimensions" and not v)}


def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
  """General broadcasting: operand dimension i becomes result dimension
  ``broadcast_dimensions[i]`` of an array of ``shape``."""
  shape = canonicalize_shape(shape)
  if np.ndim(operand) == len(shape) and not len(broadcast_dimensions) and _is_array(operand):
    return operand
  s = _out_sharding(out_sharding, "broadcast_in_dim")
  return _placed(broadcast_in_dim_p.bind(
      operand, shape=shape, broadcast_dimensions=tuple(map(int, broadcast_dimensions)),
      sharding=s), s, "broadcast_in_dim")


def _out_sharding(s, name):
  """An ``out_sharding`` argument as the primitive's ``sharding`` param (a NamedSharding)."""
  if s is None:
    return None
  from nbjax.sharding import canonicalize_sharding
  return canonicalize_sharding(s, name)


def _placed(x, s, name):
  """``x`` laid out as ``s`` (an ``out_sharding``; None: as it is)."""
  if s is None:
    return x
  from nbjax.sharding import apply_out_sharding
  return apply_out_sharding(x, s, name)


def _is_array(x):
  return isinstance(x, (Array, core.Tracer))


def broadcast(operand, sizes, *, out_sharding=None):
  """Broadcast by adding leading dimensions of ``sizes``."""
  sizes = canonicalize_shape(sizes)
  if not sizes and out_sharding is None:  # (JAX's: no equation, even for a NumPy operand)
    return operand if _is_array(operand) else _convert_element_type(
        operand, None, dtypes.is_weakly_typed(operand))
  nd = np.ndim(operand)
  return broadcast_in_dim(operand, sizes + np.shape(operand),
                          tuple(range(len(sizes), len(sizes) + nd)), out_sharding=out_sharding)


def broadcast_to_rank(x, rank):
  """Adds leading dimensions of size 1 to give ``x`` rank ``rank`` (none when it has them)."""
  nd = np.ndim(x)
  return x if nd >= rank else broadcast(x, (1,) * (rank - nd))


def broadcast_like(arr, like_arr):
  """Broadcasts ``arr`` (its trailing dimensions aligned) to the shape of ``like_arr``."""
  shape, nd = np.shape(like_arr), np.ndim(arr)
  return broadcast_in_dim(arr, shape, tuple(range(len(shape) - nd, len(shape))))


def stack(operands, axis=0):
  """Joins arrays of one shape along a new axis ``axis``."""
  axis = canonicalize_axis(axis, np.ndim(operands[0]) + 1)
  return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x, axis=0):
  """The slices of ``x`` along ``axis``, that axis removed, as a tuple."""
  axis = canonicalize_axis(axis, np.ndim(x))
  return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(np.shape(x)[axis]))


_EXPAND = {}  # (ndim, dimensions) -> (result positions of the inserted dims, kept ones), eager


def expand_dims(array, dimensions):
  """Insert size-1 dimensions at ``dimensions`` (positions in the result)."""
  if type(array) is Array and core._ctx.trace is core.eval_trace and type(dimensions) is tuple:
    sh = array.shape  # (eager: the registry's entry directly, dimensions worked out once)
    plan = _EXPAND.get((len(sh), dimensions))
    if plan is not None:
      shape = list(sh)
      for i in plan[0]:
        shape.insert(i, 1)
      return broadcast_in_dim_p.eager(array, shape=tuple(shape), broadcast_dimensions=plan[1],
                                      sharding=None)
  if len(set(dimensions)) != len(dimensions):
    raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
  ndim_out = np.ndim(array) + len(dimensions)
  dims = [canonicalize_axis(i, ndim_out) for i in dimensions]
  if len(set(dims)) != len(dims):
    raise ValueError(f"repeated axis in lax.expand_dims: {dims}")
  shape = list(np.shape(array))
  for i in sorted(dims):
    shape.insert(i, 1)
  kept = tuple(i for i in range(ndim_out) if i not in set(dims))
  if (type(dimensions) is tuple and dimensions and len(_EXPAND) < 1024
      and all(type(d) is int for d in dimensions)):
    _EXPAND[ndim_out - len(dims), dimensions] = (tuple(sorted(dims)), kept)
  return broadcast_in_dim(array, shape, kept)


# ----------------------------------------------------------------- reshape


def _reshape_abstract_eval(operand, *, new_sizes, dimensions=None, sharding=None):
  if not all(d >= 0 for d in new_sizes):
    raise TypeError(f"reshape new_sizes must all be positive, got {new_sizes}.")
  if math.prod(new_sizes) != operand.size:
    raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} (of total "
                    f"size {math.prod(new_sizes)}) for shape {operand.shape} (of total size "
                    f"{operand.size}).")
  if dimensions is not None and sorted(dimensions) != list(range(operand.ndim)):
    raise TypeError("reshape dimensions must be a permutation of operand dimensions, got "
                    f"dimensions {dimensions} for shape {operand.shape}.")
  return _same_aval(operand, tuple(new_sizes))


def _reshape_numba(x, *, new_sizes, dimensions=None, sharding=None):
  if dimensions is not None:
    x = _transpose_numba(x, permutation=dimensions)
  return strided_copy(x, 0, (1,), (x.size,)).reshape(new_sizes)


def _reshape_numpy(x, *, new_sizes, dimensions=None, sharding=None):
  if dimensions is not None:
    x = np.transpose(x, dimensions)
  return np.reshape(x, new_sizes)


def _reshape_transpose(ct, operand, *, new_sizes, dimensions=None, sharding=None):
  if dimensions is None:
    return [reshape(ct, operand.aval.shape)]
  inv = tuple(int(i) for i in np.argsort(dimensions))
  return [transpose(reshape(ct, tuple(operand.aval.shape[d] for d in dimensions)), inv)]


def _reshape_batch(vals, dims, *, new_sizes, dimensions=None, sharding=None):
  (x,), (b,) = vals, dims
  x = batching.moveaxis(x, b, 0)
  if dimensions is not None:
    x = transpose(x, (0, *(d + 1 for d in dimensions)))
  return reshape(x, (core.get_aval(x).shape[0], *new_sizes)), 0


reshape_p = Primitive("reshape")


def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
  """Reshape ``operand`` to ``new_sizes`` (after permuting by ``dimensions`` if given)."""
  if type(operand) is Array and type(new_sizes) is tuple and dimensions is None and \
      out_sharding is None and core._ctx.trace is core.eval_trace and not core.placement[0]:
    v = operand._value  # eager, sizes of ints alone: NumPy's view (C order), or the checks'
    if all(type(d) is int and d >= 0 for d in new_sizes) and math.prod(new_sizes) == v.size:
      return Array._new(v.reshape(new_sizes), operand._weak)  # (errors) below
  new_sizes = canonicalize_shape(new_sizes)
  dims = None if dimensions is None else tuple(operator.index(d) for d in dimensions)
  same_dims = dims is None or dims == tuple(range(np.ndim(operand)))
  if np.shape(operand) and np.shape(operand) == new_sizes and same_dims and _is_array(operand):
    return operand
  s = _out_sharding(out_sharding, "reshape")
  return _placed(reshape_p.bind(operand, new_sizes=new_sizes,
                                dimensions=None if same_dims else dims, sharding=s), s, "reshape")


def collapse(operand, start_dimension, stop_dimension=None):
  """Collapse dimensions ``[start_dimension, stop_dimension)`` into one (row-major)."""
  shape = np.shape(operand)
  lo, hi, _ = _pyslice(start_dimension, stop_dimension).indices(len(shape))
  if hi < lo:
    raise ValueError(f"Invalid dimension range passed to collapse: {shape}"
                     f"[{start_dimension}:{stop_dimension}]")
  return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


# ----------------------------------------------------------------- transpose


def _transpose_abstract_eval(operand, *, permutation):
  if not isinstance(permutation, (tuple, list, np.ndarray)):
    raise TypeError(f"transpose permutation must be a tuple/list/ndarray, got {type(permutation)}.")
  if tuple(sorted(permutation)) != tuple(range(operand.ndim)):
    raise TypeError("transpose permutation isn't a permutation of operand dimensions, got "
                    f"permutation {permutation} for operand shape {operand.shape}.")
  return _same_aval(operand, tuple(operand.shape[i] for i in permutation))


def _transpose_numba(x, *, permutation):
  xs = c_strides(x.shape)
  return strided_copy(x, 0, [xs[i] for i in permutation], tuple(x.shape[i] for i in permutation))


def _transpose_numpy(x, *, permutation):
  return _c(np.transpose(x, permutation))


def _bare(k):
  """``k`` marked as the registry's bare kernel: a function of the arrays alone that runs no
  floating-point arithmetic (nothing to silence) and returns the result's own buffer (C
  order, the operand's dtype; possibly a view of it)."""
  k.bare = True
  return k


_transpose_numpy.specialize = lambda avals, params: _bare(
    functools.partial(lambda perm, x: _c(x.transpose(perm)), params["permutation"]))


def _transpose_batch(vals, dims, *, permutation):
  (x,), (b,) = vals, dims
  perm = [p + (p >= b) for p in permutation]
  perm.insert(b, b)
  return transpose(x, tuple(perm)), b


transpose_p = Primitive("transpose")


def transpose(operand, permutation):
  """Permute the dimensions of ``operand``: result dim i is operand dim ``permutation[i]``."""
  permutation = tuple(map(operator.index, permutation))
  if permutation == tuple(range(np.ndim(operand))) and _is_array(operand):
    return operand
  return transpose_p.bind(operand, permutation=permutation)


# ----------------------------------------------------------------- squeeze


def _squeeze_abstract_eval(operand, *, dimensions):
  shape = operand.shape
  if len(set(dimensions)) != len(dimensions):
    raise ValueError(f"dimensions are not unique: {dimensions}")
  if not all(0 <= d < len(shape) for d in dimensions):
    raise ValueError(f"dimensions outside range [0, ndim): {dimensions}")
  if any(shape[d] != 1 for d in dimensions):
    raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                     f"one, got shape={shape} and dimensions={dimensions}")
  return _same_aval(operand, tuple(s for i, s in enumerate(shape) if i not in set(dimensions)))


def _squeeze_impl(reshape_impl):
  def impl(x, *, dimensions):
    return reshape_impl(x, new_sizes=tuple(s for i, s in enumerate(x.shape) if i not in dimensions))
  return impl


def _squeeze_batch(vals, dims, *, dimensions):
  (x,), (b,) = vals, dims
  return (squeeze(x, tuple(d + (d >= b) for d in dimensions)),
          b - sum(d < b for d in dimensions))


squeeze_p = Primitive("squeeze")


def squeeze(array, dimensions):
  """Remove the size-1 ``dimensions`` of ``array``."""
  nd = np.ndim(array)
  dimensions = tuple(sorted(canonicalize_axis(i, nd) for i in dimensions))
  if not dimensions and _is_array(array):
    return array
  return squeeze_p.bind(array, dimensions=dimensions)


# ----------------------------------------------------------------- rev


def _rev_abstract_eval(operand, *, dimensions):
  _check_shapelike("rev", "dimensions", dimensions)
  if len(set(dimensions)) != len(dimensions):
    raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
  if dimensions and not max(dimensions) < operand.ndim:
    raise TypeError("rev dimensions must all be less than operand ndim, got dimensions "
                    f"{dimensions} for operand ndim {operand.ndim}.")
  return operand


def _rev_numba(x, *, dimensions):
  st = c_strides(x.shape)
  off = 0
  for d in dimensions:
    off += (x.shape[d] - 1) * st[d] if x.shape[d] else 0
    st[d] = -st[d]
  return strided_copy(x, off, st, x.shape)


def _rev_numpy(x, *, dimensions):
  return _c(np.flip(x, dimensions)) if dimensions else x.copy()


_rev_numpy.specialize = lambda avals, params: _bare(
    functools.partial(_rev_numpy, dimensions=params["dimensions"]))


rev_p = Primitive("rev")


def rev(operand, dimensions):
  """Reverse ``operand`` along ``dimensions``."""
  return rev_p.bind(operand, dimensions=tuple(dimensions))


# ----------------------------------------------------------------- bitcast_convert_type

_BITCAST_DTYPES = [d for d in ALL_DTYPES if dtypes.kind(d) in "iuf"]  # bfloat16 too
# and the narrow ml_dtypes types: float8_* (a byte each), int4/uint4, int2/uint2 (several to
# a byte, first in the low bits: XLA's little-endian order)
_BITCAST_OK = frozenset(_BITCAST_DTYPES) | frozenset(
    d for d in dtypes._small_float_dtypes + dtypes._small_int_dtypes
    if d.name.startswith(("float8", "int", "uint")))


def _bitcast_abstract_eval(operand, *, new_dtype):
  old, new = operand.dtype, np.dtype(new_dtype)
  shape, ob, nb = operand.shape, dtypes.itemsize_bits(old), dtypes.itemsize_bits(new)
  if ob > nb:
    shape = (*shape, ob // nb)
  elif ob < nb:  # (JAX's checks and words: the shape first, then the dtypes)
    n = shape[-1] if shape else 1
    if n * ob != nb:
      raise ValueError(f"Attempting to convert array of shape {operand.shape} from {old} of "
                       f"size {ob} bits to {new} of size {nb}, bits but {n} * {ob} != {nb}")
    shape = shape[:-1]
  if old != new:
    if any(d == np.bool_ or d.kind == "c" for d in (old, new)):
      raise TypeError("lax.bitcast_convert_type does not support bool or complex values "
                      "unless the operand and destination types match. Got operand "
                      f"dtype={old}, new_dtype={new!r}. Consider using the arr.view() method "
                      "instead.")
    for d in (old, new):
      if d not in _BITCAST_OK:
        raise TypeError(f"bitcast_convert_type does not support dtype {d.name} (operand "
                        f"{operand.str_short()}, new_dtype {new.name})")
  return ShapedArray(shape, new)


def _bitcast_out_shape(x, new):
  return _bitcast_abstract_eval(ShapedArray(x.shape, x.dtype), new_dtype=new).shape


def _bitcast_narrow(x, new_dtype):
  """bitcast_convert_type with a sub-byte dtype on either side: the elements' bits packed into
  (or unpacked from) bytes, the first element in the low bits; ``None`` for whole bytes."""
  ob, nb = dtypes.itemsize_bits(x.dtype), dtypes.itemsize_bits(new_dtype)
  if ob >= 8 and nb >= 8:
    return None
  shape = _bitcast_out_shape(x, new_dtype)
  if ob < 8:  # -> whole bytes (or another narrow type of the same width)
    k = 8 // ob
    v = x.view(np.uint8) & ((1 << ob) - 1)  # (ml_dtypes keeps the bits at the byte's low end)
    if nb == ob:
      return v.view(new_dtype).reshape(shape)
    v = v.reshape(-1, k)
    packed = np.zeros(v.shape[0], np.uint8)
    for i in range(k):
      packed |= v[:, i] << (ob * i)
    return packed.view(new_dtype).reshape(shape)
  k = 8 // nb  # whole bytes -> narrow elements
  b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
  out = np.empty((b.size, k), np.uint8)
  for i in range(k):
    out[:, i] = (b >> (nb * i)) & ((1 << nb) - 1)
  return out.view(new_dtype).reshape(shape)


def _bitcast_numba(x, *, new_dtype):
  r = _bitcast_narrow(x, new_dtype)
  if r is not None:
    return r
  out = np.empty(_bitcast_out_shape(x, new_dtype), new_dtype)
  K.copy_bytes(x.reshape(-1).view(np.uint8), out.reshape(-1).view(np.uint8))
  return out


def _bitcast_numpy(x, *, new_dtype):
  r = _bitcast_narrow(x, new_dtype)
  if r is not None:
    return r
  return x.reshape(-1).view(new_dtype).reshape(_bitcast_out_shape(x, new_dtype))


def _bitcast_batch(vals, dims, *, new_dtype):
  (x,), (b,) = vals, dims
  if dtypes.itemsize_bits(core.get_aval(x).dtype) != dtypes.itemsize_bits(np.dtype(new_dtype)):
    x, b = batching.moveaxis(x, b, 0), 0  # the trailing axis is the one that changes
  return bitcast_convert_type(x, new_dtype), b


bitcast_convert_type_p = Primitive("bitcast_convert_type")


def bitcast_convert_type(operand, new_dtype):
  """Reinterpret the bits of ``operand`` as ``new_dtype``: a narrower type adds a trailing
  axis, a wider one consumes the trailing axis (of the width ratio)."""
  new_dtype = dtypes.canonicalize_explicit_dtype(new_dtype, "bitcast_convert_type")
  return bitcast_convert_type_p.bind(operand, new_dtype=new_dtype)


# ----------------------------------------------------------------- concatenate


def _concatenate_abstract_eval(*operands, dimension):
  if not operands:
    raise ValueError("concatenate requires a non-empty sequences of arrays")
  shapes = ", ".join(str(o.shape) for o in operands)
  if len({o.ndim for o in operands}) != 1:
    raise TypeError("Cannot concatenate arrays with different numbers of dimensions: got "
                    f"{shapes}.")
  if not 0 <= dimension < operands[0].ndim:
    raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for shapes "
                    f"{shapes}.")
  rest = {o.shape[:dimension] + o.shape[dimension + 1:] for o in operands}
  if len(rest) != 1:
    raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions other than "
                    f"the one being concatenated: concatenating along dimension {dimension} for "
                    f"shapes {shapes}.")
  check_same_dtypes("concatenate", *operands)
  s = operands[0].shape
  size = sum(o.shape[dimension] for o in operands)
  return ShapedArray(s[:dimension] + (size,) + s[dimension + 1:], operands[0].dtype,
                     all(o.weak_type for o in operands))


def _concatenate_numba(*xs, dimension):
  shape = list(xs[0].shape)
  shape[dimension] = sum(x.shape[dimension] for x in xs)
  out = np.empty(shape, xs[0].dtype)
  ost = c_strides(shape)
  off = 0
  for x in xs:
    strided_copy(x, 0, c_strides(x.shape), x.shape, out, off * ost[dimension], ost)
    off += x.shape[dimension]
  return out


def _concatenate_numpy(*xs, dimension):
  return np.concatenate(xs, axis=dimension)


def _concatenate_transpose(ct, *operands, dimension):
  limits = np.cumsum([o.aval.shape[dimension] for o in operands])
  starts = np.concatenate([[0], limits[:-1]])
  return [slice_in_dim(ct, int(s), int(l), axis=dimension) if ad.is_undefined_primal(o) else None
          for o, s, l in zip(operands, starts, limits)]


def _concatenate_batch(vals, dims, *, dimension):
  size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped)
  vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
  return concatenate(vals, dimension + 1), 0


concatenate_p = Primitive("concatenate")


def concatenate(operands, dimension):
  """Concatenate ``operands`` (same dtype, shapes equal off ``dimension``) along ``dimension``."""
  operands = list(operands)
  if len(operands) == 1 and _is_array(operands[0]):
    return operands[0]
  return concatenate_p.bind(*operands, dimension=operator.index(dimension))


# ----------------------------------------------------------------- pad


def _pad_abstract_eval(operand, padding_value, *, padding_config):
  if padding_value.ndim != 0:
    raise ValueError(f"pad: padding_value must be a scalar; got shape {padding_value.shape}")
  if operand.dtype != padding_value.dtype:
    raise TypeError("pad operand and padding_value must be same dtype: got "
                    f"{operand.dtype.name} and {padding_value.dtype.name}.")
  if len(padding_config) != operand.ndim:
    raise ValueError("pad: length of padding_config must equal the number of axes of operand, "
                     f"got padding_config {padding_config} for operand shape {operand.shape}")
  if not all(i >= 0 for _, _, i in padding_config):
    raise ValueError("pad: interior padding in padding_config must be nonnegative, got "
                     f"padding_config {padding_config}")
  out = tuple(lo + hi + _dilate(d, i + 1) for (lo, hi, i), d in zip(padding_config, operand.shape))
  if not all(d >= 0 for d in out):
    raise ValueError(f"pad: Dimension size after padding is not at least 0, got result shape "
                     f"{out}, for padding_config {padding_config} and operand shape "
                     f"{operand.shape}")
  return _same_aval(operand, out)


def _dilate(d, k):
  return 0 if d == 0 else 1 + k * (d - 1)


def _pad_numba(x, pv, *, padding_config):
  shape = tuple(lo + hi + _dilate(d, i + 1) for (lo, hi, i), d in zip(padding_config, x.shape))
  out = np.empty(shape, x.dtype)
  K.fill(bits(out.reshape(-1)), bits(pv.reshape(1)))
  xs, os_ = c_strides(x.shape), c_strides(shape)
  soff = doff = 0
  win, sst, dst = [], [], []
  for (lo, hi, it), d, a, b, n in zip(padding_config, x.shape, xs, os_, shape):
    step = it + 1
    i0 = -(lo // step) if lo < 0 else 0  # first operand element that lands in the output
    last = min(d - 1, (n - 1 - lo) // step) if n else -1
    cnt = max(0, last - i0 + 1)
    win.append(cnt)
    sst.append(a)
    dst.append(b * step)
    soff += i0 * a
    doff += (lo + i0 * step) * b
  if all(win):
    strided_copy(x, soff, sst, tuple(win), out, doff, dst)
  return out


def _pad_numpy(x, pv, *, padding_config):
  if not x.ndim:
    return x.copy()
  if any(i for _, _, i in padding_config):
    y = np.full([_dilate(d, i + 1) for (_, _, i), d in zip(padding_config, x.shape)], pv, x.dtype)
    y[tuple(_pyslice(None, None, i + 1) for _, _, i in padding_config)] = x
    x = y
  x = np.pad(x, [(max(lo, 0), max(hi, 0)) for lo, hi, _ in padding_config], constant_values=pv)
  return _c(x[tuple(_pyslice(max(-lo, 0), n - max(-hi, 0))
                                      for (lo, hi, _), n in zip(padding_config, x.shape))])


def _pad_transpose(ct, operand, padding_value, *, padding_config):
  from nbjax import lax
  from nbjax.lax.reductions import reduce_sum
  lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
  unpadded = pad(ct, np.zeros((), core.get_aval(ct).dtype),
                 [(-l, -h, 0) for l, h in zip(lo, hi)])
  t_op = slice(unpadded, (0,) * len(lo), core.get_aval(unpadded).shape, [i + 1 for i in interior])
  t_pv = None
  if ad.is_undefined_primal(padding_value):
    nd = len(lo)
    t_pv = lax.sub(reduce_sum(ct, tuple(range(nd))), reduce_sum(t_op, tuple(range(nd)))) \
        if nd else zeros((), padding_value.aval.dtype)
  return [t_op if ad.is_undefined_primal(operand) else None, t_pv]


def _pad_batch(vals, dims, *, padding_config):
  from nbjax import lax
  (x, pv), (bx, bp) = vals, dims
  if bp is not_mapped:
    cfg = list(padding_config)
    cfg.insert(bx, (0, 0, 0))
    return pad(x, pv, cfg), bx
  size = core.get_aval(pv).shape[bp]
  x = batching.bdim_at_front(x, bx, size)
  cfg = [(0, 0, 0), *padding_config]
  zero = np.zeros((), core.get_aval(x).dtype)
  padded = pad(x, zero, cfg)
  shp = core.get_aval(padded).shape
  mask = pad(broadcast_in_dim(np.zeros((), np.bool_), core.get_aval(x).shape, ()),
             np.ones((), np.bool_), cfg)
  pv = broadcast_in_dim(pv, shp, (0,))
  return lax.select_n(mask, padded, pv), 0


pad_p = Primitive("pad")


def pad(operand, padding_value, padding_config):
  """Pad ``operand`` with ``padding_value``: per dimension ``(low, high, interior)``; negative
  low/high remove elements from the edges."""
  return pad_p.bind(operand, padding_value,
                    padding_config=tuple((int(l), int(h), int(i)) for l, h, i in padding_config))


# ----------------------------------------------------------------- slice


def _slice_abstract_eval(operand, *, start_indices, limit_indices, strides=None):
  shape = operand.shape
  _check_shapelike("slice", "start_indices", start_indices)
  _check_shapelike("slice", "limit_indices", limit_indices)
  if len(start_indices) != operand.ndim:
    raise TypeError("slice start_indices must have length equal to the number of dimensions of "
                    f"the operand, got indices {start_indices} for operand shape {shape}.")
  if len(start_indices) != len(limit_indices):
    raise TypeError("slice limit_indices must have the same length as start_indices, got "
                    f"start_indices {start_indices} and limit_indices {limit_indices}.")
  if any(l > d for l, d in zip(limit_indices, shape)):
    raise TypeError("slice limit_indices must be less than or equal to operand shape, got "
                    f"limit_indices {limit_indices} for operand shape {shape}.")
  if any(l < s for s, l in zip(start_indices, limit_indices)):
    raise TypeError("slice limit_indices must be greater than or equal to start_indices, got "
                    f"start_indices {start_indices} and limit_indices {limit_indices}.")
  if strides is None:
    return _same_aval(operand, tuple(l - s for s, l in zip(start_indices, limit_indices)))
  _check_shapelike("slice", "strides", strides)
  if len(strides) != operand.ndim:
    raise TypeError("slice strides must have length equal to the number of dimensions of the "
                    f"operand, got strides {strides} for operand shape {shape}.")
  if not all(s > 0 for s in strides):
    raise TypeError(f"slice strides must be positive, got {strides}")
  return _same_aval(operand, _slice_shape(start_indices, limit_indices, strides))


def _slice_shape(start_indices, limit_indices, strides):
  strides = strides or (1,) * len(start_indices)
  return tuple(0 if l == s else 1 + (l - s - 1) // st
               for s, l, st in zip(start_indices, limit_indices, strides))


def _slice_numba(x, *, start_indices, limit_indices, strides=None):
  xs = c_strides(x.shape)
  off = sum(s * a for s, a in zip(start_indices, xs))
  st = [a * k for a, k in zip(xs, strides)] if strides else xs
  return strided_copy(x, off, st, _slice_shape(start_indices, limit_indices, strides))


def _slice_numpy(x, *, start_indices, limit_indices, strides=None):
  strides = strides or (1,) * x.ndim
  return _c(x[tuple(map(_pyslice, start_indices, limit_indices, strides))])


def _slice_specialize(avals, params):
  idx = tuple(map(_pyslice, params["start_indices"], params["limit_indices"],
                  params["strides"] or (1,) * len(avals[0].shape)))
  return _bare(lambda x: _c(x[idx]))


_slice_numpy.specialize = _slice_specialize


def _slice_transpose(ct, operand, *, start_indices, limit_indices, strides=None):
  shape = operand.aval.shape
  cs = core.get_aval(ct).shape
  if strides is None or all(s == 1 for s in strides):
    cfg = [(s, d - l, 0) for s, l, d in zip(start_indices, limit_indices, shape)]
  else:
    real = [s + (0 if n == 0 else 1 + (n - 1) * st)
            for s, n, st in zip(start_indices, cs, strides)]
    cfg = [(s, d - r, st - 1) for s, r, d, st in zip(start_indices, real, shape, strides)]
  return [pad(ct, np.zeros((), core.get_aval(ct).dtype), cfg)]


def _slice_batch(vals, dims, *, start_indices, limit_indices, strides=None):
  (x,), (b,) = vals, dims
  n = core.get_aval(x).shape[b]
  s, l = list(start_indices), list(limit_indices)
  s.insert(b, 0)
  l.insert(b, n)
  st = None
  if strides is not None:
    st = list(strides)
    st.insert(b, 1)
  return slice(x, s, l, st), b


slice_p = Primitive("slice")


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001 (JAX's name)
  """Static slice ``operand[start:limit:stride]`` per dimension."""
  return slice_p.bind(operand, start_indices=tuple(map(int, start_indices)),
                      limit_indices=tuple(map(int, limit_indices)),
                      strides=None if strides is None else tuple(map(int, strides)))


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
  """``lax.slice`` along one axis (``None`` and negative indices as Python's)."""
  shape = np.shape(operand)
  starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
  axis = int(axis)
  n = shape[axis]
  s = 0 if start_index is None else operator.index(start_index)
  l = n if limit_index is None else operator.index(limit_index)
  s = s + n if s < 0 else s
  l = l + n if l < 0 else l
  starts[axis], limits[axis], strides[axis] = s, l, int(stride)
  return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
  """Static index along one axis (negative counts from the end), keeping the axis or not."""
  index, axis = operator.index(index), int(axis)
  n = np.shape(operand)[axis]
  wrapped = index + n if index < 0 else index
  if not 0 <= wrapped < n:
    raise IndexError(f"index {index} is out of bounds for axis {axis} with size {n}")
  r = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
  return r if keepdims else squeeze(r, (axis,))


# ----------------------------------------------------------------- iota


def _iota_abstract_eval(*, dtype, shape, dimension, sharding=None):
  _check_shapelike("iota", "shape", shape)
  dtype = np.dtype(dtype)
  if not accepts(_num, dtype):
    raise TypeError(f"iota does not accept dtype {dtype.name}. Accepted dtypes are subtypes of "
                    "integer, floating, complexfloating.")
  if not 0 <= dimension < len(shape):
    raise ValueError(f"iota dimension must be between 0 and len(shape), got dimension={dimension} "
                     f"for shape={tuple(shape)}")
  return ShapedArray(tuple(shape), dtype)


def _iota_numba(*, dtype, shape, dimension, sharding=None):
  half = np.dtype(dtype) == np.float16  # numba has no float16: count in float32
  out = np.empty(shape, np.float32 if half else dtype)
  K.iota(out.reshape(-1), math.prod(shape[dimension + 1:]), shape[dimension])
  return out.astype(np.float16) if half else out


def _iota_numpy(*, dtype, shape, dimension, sharding=None):
  r = np.arange(shape[dimension], dtype=dtype).reshape(
      [n if i == dimension else 1 for i, n in enumerate(shape)])
  return _c(np.broadcast_to(r, shape))


iota_p = Primitive("iota")


def iota(dtype, size):
  """``[0, 1, ..., size-1]`` of ``dtype``."""
  return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension, *, out_sharding=None):
  """An array of ``shape`` whose values count along ``dimension``."""
  from nbjax import dtypes
  shape = canonicalize_shape(shape)
  dimension = canonicalize_axis(dimension, len(shape)) if shape else operator.index(dimension)
  return iota_p.bind(dtype=dtypes.canonicalize_explicit_dtype(
                         np.dtype(dtype), "broadcasted_iota"), shape=shape,
                     dimension=dimension, sharding=out_sharding)


# ----------------------------------------------------------------- meta: samples, bad inputs


def _samples(make):
  def samples(rng, dtype):
    return [(list(args), params) for args, params in make(lambda s: random_array(rng, s, dtype))]
  return samples


def _bad(make):
  def bad(rng):
    return [(list(a), p, e) for a, p, e in make(lambda s, d=np.float32: random_array(rng, s, d))]
  return bad


_BID = dict(
    samples=_samples(lambda r: [
        ([r(())], dict(shape=(2, 3), broadcast_dimensions=(), sharding=None)),
        ([r((3,))], dict(shape=(2, 3), broadcast_dimensions=(1,), sharding=None)),
        ([r((3, 1))], dict(shape=(3, 4), broadcast_dimensions=(0, 1), sharding=None)),
        ([r((2, 3))], dict(shape=(3, 4, 2), broadcast_dimensions=(2, 0), sharding=None)),
        ([r((0, 1))], dict(shape=(2, 0, 3), broadcast_dimensions=(1, 2), sharding=None)),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((3,))], dict(shape=(2, 4), broadcast_dimensions=(1,), sharding=None), TypeError),
        ([r((3,))], dict(shape=(2, 3), broadcast_dimensions=(), sharding=None), TypeError),
        ([r((3,))], dict(shape=(2, 3), broadcast_dimensions=(2,), sharding=None), TypeError),
        ([r((1, 1))], dict(shape=(2, 3), broadcast_dimensions=(1, 1), sharding=None), TypeError),
    ]))
_RESHAPE = dict(
    samples=_samples(lambda r: [
        ([r(())], dict(new_sizes=(1, 1), dimensions=None, sharding=None)),
        ([r((2, 3))], dict(new_sizes=(3, 2), dimensions=None, sharding=None)),
        ([r((2, 3, 4))], dict(new_sizes=(4, 6), dimensions=(2, 0, 1), sharding=None)),
        ([r((0, 3))], dict(new_sizes=(3, 0), dimensions=None, sharding=None)),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((2, 3))], dict(new_sizes=(4, 2), dimensions=None, sharding=None), TypeError),
        ([r((2, 3))], dict(new_sizes=(6,), dimensions=(0, 0), sharding=None), TypeError),
    ]))
_TRANSPOSE = dict(
    samples=_samples(lambda r: [
        ([r(())], dict(permutation=())),
        ([r((2, 3))], dict(permutation=(1, 0))),
        ([r((2, 3, 4))], dict(permutation=(2, 0, 1))),
        ([r((0, 3, 1))], dict(permutation=(1, 2, 0))),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((2, 3))], dict(permutation=(0, 0)), TypeError),
        ([r((2, 3))], dict(permutation=(0,)), TypeError),
    ]))
_SQUEEZE = dict(
    samples=_samples(lambda r: [
        ([r((1,))], dict(dimensions=(0,))),
        ([r((2, 1, 3, 1))], dict(dimensions=(1, 3))),
        ([r((1, 0))], dict(dimensions=(0,))),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((2, 3))], dict(dimensions=(0,)), ValueError),
        ([r((1, 3))], dict(dimensions=(2,)), ValueError),
    ]),
    # (JAX's messages name no primitive)
    error_names=("squeeze", "dimensions outside range", "dimensions are not unique"))
_REV = dict(
    samples=_samples(lambda r: [
        ([r(())], dict(dimensions=())),
        ([r((5,))], dict(dimensions=(0,))),
        ([r((2, 3, 4))], dict(dimensions=(0, 2))),
        ([r((0, 3))], dict(dimensions=(0, 1))),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((2, 3))], dict(dimensions=(2,)), TypeError),
        ([r((2, 3))], dict(dimensions=(1, 1)), TypeError),
    ]))
_CONCAT = dict(
    samples=_samples(lambda r: [
        ([r((2,))], dict(dimension=0)),
        ([r((2, 3)), r((4, 3))], dict(dimension=0)),
        ([r((2, 3)), r((2, 0)), r((2, 1))], dict(dimension=1)),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((2, 3)), r((3,))], dict(dimension=0), TypeError),
        ([r((2, 3)), r((2, 4))], dict(dimension=0), TypeError),
        ([r((2, 3)), r((2, 3))], dict(dimension=2), TypeError),
        ([r((2, 3)), r((2, 3), np.int32)], dict(dimension=0), TypeError),
    ]))
_PAD = dict(
    samples=_samples(lambda r: [
        ([r(()), r(())], dict(padding_config=())),
        ([r((4,)), r(())], dict(padding_config=((2, 3, 0),))),
        ([r((4,)), r(())], dict(padding_config=((0, 0, 1),))),
        ([r((5,)), r(())], dict(padding_config=((-1, -2, 0),))),
        ([r((3, 4)), r(())], dict(padding_config=((1, -2, 2), (-3, 1, 1)))),
        ([r((0, 2)), r(())], dict(padding_config=((1, 1, 3), (0, 1, 0)))),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((3,)), r(())], dict(padding_config=((0, 0, -1),)), ValueError),
        ([r((3,)), r(())], dict(padding_config=((-2, -2, 0),)), ValueError),
        ([r((3,)), r(())], dict(padding_config=()), ValueError),
        ([r((3,)), r((), np.int32)], dict(padding_config=((1, 1, 0),)), TypeError),
    ]))
_SLICE = dict(
    samples=_samples(lambda r: [
        ([r(())], dict(start_indices=(), limit_indices=(), strides=None)),
        ([r((6,))], dict(start_indices=(1,), limit_indices=(5,), strides=None)),
        ([r((7, 5))], dict(start_indices=(1, 0), limit_indices=(7, 4), strides=(2, 3))),
        ([r((3, 4))], dict(start_indices=(1, 2), limit_indices=(1, 4), strides=(1, 2))),
    ]),
    bad_inputs=_bad(lambda r: [
        ([r((3,))], dict(start_indices=(0,), limit_indices=(4,), strides=None), TypeError),
        ([r((3,))], dict(start_indices=(2,), limit_indices=(1,), strides=None), TypeError),
        ([r((3,))], dict(start_indices=(0, 0), limit_indices=(1, 1), strides=None), TypeError),
        ([r((3,))], dict(start_indices=(0,), limit_indices=(3,), strides=(0,)), TypeError),
    ]))


def _reg(p, ae, numba_impl, numpy_impl, transpose_rule, batch_rule, policy, meta):
  registry.register(p, family="shape", impls={"numba": numba_impl, "numpy": numpy_impl},
                    abstract_eval=ae, batch=batch_rule, policy=policy,
                    meta=dict(reference=numpy_impl, dtypes=ALL_DTYPES, differentiable=True,
                              linear=True, **meta))
  if transpose_rule is not None:
    ad.deflinear2(p, transpose_rule)


_reg(broadcast_in_dim_p, _broadcast_in_dim_abstract_eval, _broadcast_in_dim_numba,
     _broadcast_in_dim_numpy, _broadcast_in_dim_transpose, _broadcast_in_dim_batch, None,
     dict(_BID, note="numba (strided copy kernel) only for permuted broadcast_dimensions; in "
                     "order: numpy copyto (1000 float32: 3.4us vs 14us), np.repeat for a short "
                     "new last axis (2e6 outputs, r=2: 2.7 -> 1.05ms), a reshape view when "
                     "nothing repeats"))
_reg(reshape_p, _reshape_abstract_eval, _reshape_numba, _reshape_numpy, _reshape_transpose,
     _reshape_batch, NUMPY_ALWAYS, dict(_RESHAPE, note="numpy: reshape is a view (no copy): "
                                                      "0.9us vs 3.8us, 2us vs 80us at 1e6"))
_reg(transpose_p, _transpose_abstract_eval, _transpose_numba, _transpose_numpy,
     lambda ct, x, *, permutation: [transpose(ct, tuple(int(i) for i in np.argsort(permutation)))],
     _transpose_batch, NUMPY_ALWAYS,
     dict(_TRANSPOSE, note="numpy: strided copy; median 0.7us vs numba 4.7us at 1 elem, "
                           "equal at 1e6 (measured)"))
_reg(squeeze_p, _squeeze_abstract_eval, _squeeze_impl(_reshape_numba),
     _squeeze_impl(_reshape_numpy),
     lambda ct, x, *, dimensions: [expand_dims(ct, dimensions)], _squeeze_batch, NUMPY_ALWAYS,
     dict(_SQUEEZE, note="numpy: squeeze is a view (no copy)"))
_reg(rev_p, _rev_abstract_eval, _rev_numba, _rev_numpy,
     lambda ct, x, *, dimensions: [rev(ct, dimensions)],
     lambda vals, dims, *, dimensions: (rev(vals[0], [d + (d >= dims[0]) for d in dimensions]),
                                        dims[0]),
     NUMPY_ALWAYS, dict(_REV, note="numpy: flip + copy; 1.6us vs 4.3us small, 0.28 vs 0.36ms "
                                   "at 1e6 (measured)"))
_reg(concatenate_p, _concatenate_abstract_eval, _concatenate_numba, _concatenate_numpy,
     _concatenate_transpose, _concatenate_batch, NUMPY_ALWAYS,
     dict(_CONCAT, note="numpy: memcpy per operand; 0.9us vs 7.9us small, 0.15 vs 0.19ms "
                        "at 2e6 (measured)"))
_reg(pad_p, _pad_abstract_eval, _pad_numba, _pad_numpy, _pad_transpose, _pad_batch, None, _PAD)
_reg(slice_p, _slice_abstract_eval, _slice_numba, _slice_numpy, _slice_transpose, _slice_batch,
     NUMPY_ALWAYS, dict(_SLICE, note="numpy: a view when contiguous, else one copy; 0.9us vs "
                                     "5.2us small, 0.13 vs 0.16ms at 1e6 (measured)"))


def _bitcast_samples(rng, dtype):
  out = []
  for new in _BITCAST_DTYPES:
    ratio = new.itemsize / dtype.itemsize
    shapes = [(), (3,), (2, 3)] if ratio <= 1 else [(int(ratio),), (2, int(ratio))]
    for s in shapes:
      bits = rng.integers(0, 256, (*s, dtype.itemsize), dtype=np.uint8)
      x = bits.view(dtype).reshape(s)
      if dtypes.kind(dtype) == "f":  # finite values: NaN payloads need not survive XLA
        x = np.where(np.isfinite(x), x, dtype.type(1.5))
      out.append(([x], dict(new_dtype=new)))
  return out


registry.register(
    bitcast_convert_type_p, family="shape",
    impls={"numba": _bitcast_numba, "numpy": _bitcast_numpy},
    abstract_eval=_bitcast_abstract_eval, batch=_bitcast_batch, policy=NUMPY_ALWAYS,
    meta=dict(reference=_bitcast_numpy, dtypes=_BITCAST_DTYPES, differentiable=False,
              samples=_bitcast_samples, error_names=("Attempting to convert array",), bf16="native", narrow="own",  # bits: any dtype
              note="numpy: a reinterpreting view (no copy); sub-byte types: their bits "
                   "packed into or unpacked from bytes by NumPy",
              bad_inputs=lambda rng: [
                  ([np.ones(3, np.bool_)], dict(new_dtype=np.dtype(np.int8)), TypeError),
                  ([np.ones(3, np.complex64)], dict(new_dtype=np.dtype(np.float32)), TypeError),
                  ([np.ones(3, np.float32)], dict(new_dtype=np.dtype(np.complex64)), ValueError),
                  ([np.ones(3, np.float32)], dict(new_dtype=np.dtype(np.float64)), ValueError),
                  ([np.ones((), np.int8)], dict(new_dtype=np.dtype(np.int16)), ValueError)]))
ad.defjvp_zero(bitcast_convert_type_p)

registry.register(
    iota_p, family="shape", impls={"numba": _iota_numba, "numpy": _iota_numpy},
    abstract_eval=_iota_abstract_eval, policy=None,
    meta=dict(reference=_iota_numpy, dtypes=sorted(_num, key=str), differentiable=False,
              note="numba; float16: counted in float32, rounded by NumPy's astype (numba has "
                   "no float16)",
              samples=lambda rng, dtype: [([], dict(dtype=np.dtype(dtype), shape=s, dimension=d,
                                                    sharding=None))
                                          for s, d in (((5,), 0), ((2, 3), 1), ((0, 4), 0))],
              bad_inputs=lambda rng: [([], dict(dtype=np.dtype(np.float32), shape=(3,),
                                                 dimension=1, sharding=None), ValueError),
                                      ([], dict(dtype=np.dtype(np.bool_), shape=(3,), dimension=0,
                                                sharding=None), TypeError)]))
ad.defjvp_zero(iota_p)

# ----------------------------------------------------------------- jet (Taylor) rules
jet.defzero(bitcast_convert_type_p)
for _p in (broadcast_in_dim_p, concatenate_p, pad_p, reshape_p, squeeze_p, rev_p, transpose_p,
           slice_p):
  jet.deflinear(_p)


# ====================================================================== lowering (StableHLO)
# Rules run under jit only; ``mlir``/``hlo``/``ir`` are lazy proxies, so importing this
# file never imports jaxlib.
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import chlo, hlo, i64_array, ir, mlir  # noqa: E402,F401


def _lo_reg(name, rule):
  lowering.register(name, rule)


def _out_type(ctx, i=0):
  return mlir.aval_to_ir_type(ctx.avals_out[i])


def _broadcast_in_dim(ctx, x, *dyn, shape, broadcast_dimensions, sharding=None, **params):
  return [hlo.broadcast_in_dim(_out_type(ctx), x, i64_array(broadcast_dimensions))]


def _reshape(ctx, x, *dyn, new_sizes, dimensions=None, sharding=None, **params):
  if dimensions is not None and tuple(dimensions) != tuple(range(len(ctx.avals_in[0].shape))):
    x = hlo.transpose(x, i64_array(dimensions))
  return [hlo.reshape(_out_type(ctx), x)]


def _reshape_to_out(ctx, x, **params):
  return [hlo.reshape(_out_type(ctx), x)]


def _transpose(ctx, x, *, permutation, **params):
  return [hlo.transpose(x, i64_array(permutation))]


def _rev(ctx, x, *, dimensions, **params):
  return [hlo.reverse(x, i64_array(dimensions))]


def _concatenate(ctx, *xs, dimension, **params):
  return [hlo.concatenate(list(xs), int(dimension))]


def _pad(ctx, x, padding_value, *, padding_config, **params):
  lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
  return [hlo.pad(x, padding_value, i64_array(lo), i64_array(hi), i64_array(interior))]


def _slice(ctx, x, *, start_indices, limit_indices, strides=None, **params):
  strides = strides or (1,) * len(start_indices)
  return [hlo.slice(x, i64_array(start_indices), i64_array(limit_indices), i64_array(strides))]


def _bitcast(ctx, x, *, new_dtype):
  return [hlo.bitcast_convert(_out_type(ctx), x)]


def _iota(ctx, *, dtype, shape, dimension, sharding=None, **params):
  return [hlo.iota(_out_type(ctx), int(dimension))]



for _name, _rule in {
    "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape, "squeeze": _reshape_to_out,
    "transpose": _transpose, "rev": _rev,
    "concatenate": _concatenate, "pad": _pad, "slice": _slice, "iota": _iota,
    "bitcast_convert_type": _bitcast,
}.items():
  _lo_reg(_name, _rule)
