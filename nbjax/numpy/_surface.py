"""The rest of ``jax.numpy``'s public names: index tricks (``r_``, ``c_``, ``s_``,
``index_exp``, ``mgrid``, ``ogrid``), bit packing, ``bitwise_count``, polynomial fitting
and roots, ``histogram2d``/``histogramdd``, the ``matvec``/``vecmat`` gufuncs,
``mask_indices``, I/O (``load``, ``save``, ``savez``, ``from*``) and NumPy's printing
options (which govern ``Array.__repr__``/``__str__``, since arrays print through NumPy).

Pipeline position: compositions of existing ``nbjax.numpy`` functions (no primitives of
their own), with JAX's signatures, dtypes and error messages.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from nbjax import core, dtypes, lax
from nbjax.config import config
from nbjax.numpy import _creation, _dot, _dtype_api, _manip, _reductions, _setops, _statistics, _ufuncs
from nbjax.numpy import _util
from nbjax.numpy._util import as_array, ensure_arraylike

__all__ = ["ComplexWarning", "array_repr", "array_str", "bitwise_count", "c_", "frombuffer",
           "fromfile", "fromiter", "fromstring", "get_printoptions", "histogram2d",
           "histogramdd", "index_exp", "iterable", "load", "mask_indices", "matvec", "mgrid",
           "ogrid", "packbits", "polydiv", "polyfit", "printoptions", "r_", "roots", "s_",
           "save", "savez", "set_printoptions", "unpackbits", "vecmat"]

# ----------------------------------------------------------------- ml_dtypes scalar types
# JAX's narrow types: valid dtype names and scalar types (``jnp.int4(3)`` is a 0-d Array);
# arithmetic on them raises a TypeError naming the dtype (no kernels for them).
_ML_NAMES = ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
             "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
             "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int1", "int2", "int4", "uint1",
             "uint2", "uint4")
try:
  import ml_dtypes as _ml
except ImportError:  # pragma: no cover
  _ml = None
for _n in _ML_NAMES:
  if _ml is not None and hasattr(_ml, _n):
    globals()[_n] = _dtype_api._scalar_type(_n, getattr(_ml, _n))
    __all__.append(_n)

# ----------------------------------------------------------------- NumPy's own (as JAX)
ComplexWarning = np.exceptions.ComplexWarning
array_repr, array_str, iterable, save, savez = (np.array_repr, np.array_str, np.iterable,
                                               np.save, np.savez)
s_, index_exp = np.s_, np.index_exp


def get_printoptions():
  """Alias of :func:`numpy.get_printoptions`: arrays print through NumPy, so its print
  options govern ``repr``/``str`` of nbjax arrays."""
  return np.get_printoptions()


def printoptions(*args, **kwargs):
  """Alias of :func:`numpy.printoptions` (a context manager): arrays print through NumPy,
  so its print options govern ``repr``/``str`` of nbjax arrays."""
  return np.printoptions(*args, **kwargs)


def set_printoptions(*args, **kwargs):
  """Alias of :func:`numpy.set_printoptions`: arrays print through NumPy, so its print
  options govern ``repr``/``str`` of nbjax arrays."""
  return np.set_printoptions(*args, **kwargs)

# ----------------------------------------------------------------- I/O


def load(file, *args, **kwargs):
  """Load arrays from ``.npy`` files (JAX wrapper of :func:`numpy.load`): arrays come back
  as nbjax Arrays (``bfloat16``, stored by NumPy as ``V2``, restored); ``.npz`` archives and
  object arrays come back as NumPy gives them. Not traceable.

  Args:
    file: file name or open file.
    args: further positional arguments to :func:`numpy.load`.
    kwargs: further keyword arguments to :func:`numpy.load`.

  Returns:
    An array (or what :func:`numpy.load` returns for archives and object arrays).

  Examples:
    >>> import io; buf = io.BytesIO(); np.save(buf, np.arange(3)); _ = buf.seek(0)
    >>> jnp.load(buf)
    Array([0, 1, 2], dtype=int64)
  """
  out = np.load(file, *args, **kwargs)
  if isinstance(out, np.ndarray):
    if out.dtype == "V2":
      out = out.view(dtypes.bfloat16)
    try:
      out = _creation.asarray(out)
    except (TypeError, ValueError):  # e.g. object arrays: returned as NumPy arrays
      pass
  return out


def frombuffer(buffer, dtype=float, count=-1, offset=0):
  """A 1-D array interpreting ``buffer`` (bytes or any object with the buffer interface)
  as ``dtype`` (JAX implementation of :func:`numpy.frombuffer`).

  Args:
    buffer: the data.
    dtype: dtype to parse the buffer as (default float64, then canonicalized).
    count: number of items to read; -1 (default) reads all.
    offset: number of bytes to skip at the start.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.frombuffer(b'\\x01\\x02\\x03', dtype=jnp.uint8)
    Array([1, 2, 3], dtype=uint8)
  """
  return _creation.asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count,
                                         offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
  """A 1-D array parsed from the text ``string`` of numbers separated by ``sep`` (JAX
  implementation of :func:`numpy.fromstring`).

  Args:
    string: text holding the numbers.
    dtype: dtype of the result.
    count: number of items to read (``-1``: all of them).
    sep: separator between the values in the string.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.fromstring('1 2 3', dtype=int, sep=' ')
    Array([1, 2, 3], dtype=int64)
  """
  return _creation.asarray(np.fromstring(string=string, dtype=dtype, count=count, sep=sep))


def _impure(name, what):
  def f(*args, **kwargs):
    raise NotImplementedError(
        f"jnp.{name}() is not implemented because it may be non-pure and thus unsafe for use "
        f"with JIT and other JAX transformations. Consider using jnp.asarray(np.{name}(...)) "
        f"instead, although care should be taken if np.{name} is used within a jax "
        f"transformations because of its potential side-effect of consuming the {what} "
        "object; for more information see "
        "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html#pure-functions")
  f.__name__ = f.__qualname__ = name
  f.__doc__ = (f"Unimplemented JAX wrapper for jnp.{name}: it may be non-pure (it consumes "
               f"its {what} object); use ``jnp.asarray(np.{name}(...))``.")
  return f


fromfile = _impure("fromfile", "file")
fromiter = _impure("fromiter", "iterable")

# ----------------------------------------------------------------- index tricks


def _grid_1d(s, op_name):
  """``start:stop:step`` as ``arange``, or ``linspace`` (endpoint included) for a complex
  step whose magnitude is the number of points."""
  start = core.concrete_or_error(None, s.start, f"slice start of jnp.{op_name}") or 0
  stop = core.concrete_or_error(None, s.stop, f"slice stop of jnp.{op_name}")
  step = core.concrete_or_error(None, s.step, f"slice step of jnp.{op_name}") or 1
  if np.iscomplex(step):
    return _creation.linspace(start, stop, int(abs(step)))
  return _creation.arange(start, stop, step)


class _Grid:
  def __init__(self, name, sparse):
    self._name, self._sparse = name, sparse

  def __getitem__(self, key):
    if isinstance(key, slice):
      return _grid_1d(key, self._name)
    out = [_grid_1d(k, self._name) for k in key]
    if out:
      with config.override("numpy_dtype_promotion", "standard"):  # as JAX: even when strict
        out = _util.promote_dtypes(*out)
    grids = _creation.meshgrid(*out, indexing="ij", sparse=self._sparse)
    if self._sparse:
      return list(grids)
    return _manip.stack(grids, 0) if grids else _creation.arange(0)

  def __repr__(self):
    return f"jnp.{self._name}"


mgrid = _Grid("mgrid", False)
mgrid.__doc__ = """Dense multi-dimensional grids from slices (JAX implementation of
:obj:`numpy.mgrid`): ``jnp.mgrid[0:4, 0:3]`` has shape ``(2, 4, 3)``; a complex step
``5j`` means 5 points, endpoints included."""
ogrid = _Grid("ogrid", True)
ogrid.__doc__ = """Open (sparse, broadcastable) multi-dimensional grids from slices (JAX
implementation of :obj:`numpy.ogrid`): ``jnp.ogrid[0:4, 0:3]`` is arrays of shapes
``(4, 1)`` and ``(1, 3)``."""


class _AxisConcat:
  """Concatenation of slices, scalars and arrays along an axis, with NumPy's string
  directives (``"r"``, ``"c"``, ``"axis,ndmin,trans1d"``) as the first item."""

  def __init__(self, name, axis, ndmin, trans1d):
    self._name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

  def __getitem__(self, key):
    items = key if isinstance(key, tuple) else (key,)
    params = [self.axis, self.ndmin, self.trans1d, -1]
    if items and isinstance(items[0], str):
      directive, items = items[0], items[1:]
      if directive in ("r", "c"):
        params[-1] = 0 if directive == "r" else 1
      else:
        vec = directive.split(",")
        vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
        try:
          params = [int(v) for v in vec]
        except ValueError as err:
          raise ValueError(f"could not understand directive {directive!r}") from err
    axis, ndmin, trans1d, matrix = params
    out = []
    for item in items:
      if isinstance(item, slice):
        new, item_ndim = _grid_1d(item, self._name), 0
      elif isinstance(item, str):
        raise ValueError("string directive must be placed at the beginning")
      else:
        new = _creation.array(item, copy=False)
        item_ndim = new.ndim
      new = _creation.array(new, copy=False, ndmin=ndmin)
      if trans1d != -1 and ndmin - item_ndim > 0:
        shifts = ndmin - builtins.abs(ndmin + trans1d + 1) % ndmin
        perm = tuple(range(ndmin))
        new = _manip.transpose(new, perm[shifts:] + perm[:shifts])
      out.append(new)
    res = _manip.concatenate(tuple(out), axis=axis)
    return _manip.expand_dims(res, matrix) if matrix != -1 and res.ndim == 1 else res

  def __len__(self):
    return 0

  def __repr__(self):
    return f"jnp.{self._name}"


r_ = _AxisConcat("r_", 0, 1, -1)
r_.__doc__ = """Concatenate slices, scalars and arrays along the first axis (JAX
implementation of :obj:`numpy.r_`): slices become ``arange`` (``linspace`` for a complex
step), and a leading string directive ``"axis,ndmin,trans1d"``, ``"r"`` or ``"c"`` sets the
axis, the minimum rank and where 1-D items' axis goes."""
c_ = _AxisConcat("c_", -1, 2, 0)
c_.__doc__ = """Concatenate slices, scalars and arrays along the last axis, as columns (JAX
implementation of :obj:`numpy.c_`); takes ``r_``'s string directives."""

# ----------------------------------------------------------------- bits


def _check_bitorder(bitorder):
  if bitorder not in ("little", "big"):
    raise ValueError("'order' must be either 'little' or 'big'")


def packbits(a, axis=None, bitorder="big"):
  """Pack the elements of a boolean-valued array into the bits of a ``uint8`` array (JAX
  implementation of :func:`numpy.packbits`).

  Args:
    a: integer or boolean array (nonzero is a set bit).
    axis: axis to pack along; None (default) packs the flattened array.
    bitorder: ``"big"`` (default) or ``"little"``: the bit order within each byte.

  Returns:
    A ``uint8`` array.

  Examples:
    >>> jnp.packbits(jnp.array([1, 0, 1, 1, 0, 0, 0, 1]))
    Array([177], dtype=uint8)
  """
  arr = ensure_arraylike("packbits", a)
  if not (arr.dtype == np.bool_ or dtypes.is_int(arr.dtype)):
    raise TypeError("Expected an input array of integer or boolean data type")
  _check_bitorder(bitorder)
  arr = _util.convert(lax.ne(arr, lax._const(arr, 0)), np.uint8)
  bits = _creation.arange(8, dtype=np.uint8)
  if bitorder == "big":
    bits = bits[::-1]
  if axis is None:
    arr, axis = _manip.ravel(arr), 0
  arr = _manip.swapaxes(arr, axis, -1)
  rem = arr.shape[-1] % 8
  if rem:
    arr = _manip.pad(arr, [(0, 0)] * (arr.ndim - 1) + [(0, 8 - rem)])
  arr = _manip.reshape(arr, arr.shape[:-1] + (arr.shape[-1] // 8, 8))
  bits = _manip.reshape(bits, (1,) * (arr.ndim - 1) + (8,))  # (no implicit rank promotion)
  packed = _reductions.sum(_ufuncs.left_shift(arr, bits), axis=-1, dtype=np.uint8)
  return _manip.swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
  """Unpack the bits of a ``uint8`` array into a ``uint8`` array of 0s and 1s (JAX
  implementation of :func:`numpy.unpackbits`).

  Args:
    a: ``uint8`` array.
    axis: axis to unpack along; None (default) unpacks the flattened array.
    count: number of bits to keep (positive; zero-padded past the end), or to trim from
      the end (negative).
    bitorder: ``"big"`` (default) or ``"little"``.

  Returns:
    A ``uint8`` array of 0s and 1s.

  Examples:
    >>> jnp.unpackbits(jnp.array([177], dtype=jnp.uint8))
    Array([1, 0, 1, 1, 0, 0, 0, 1], dtype=uint8)
  """
  arr = ensure_arraylike("unpackbits", a)
  if arr.dtype != np.uint8:
    raise TypeError("Expected an input array of unsigned byte data type")
  _check_bitorder(bitorder)
  bits = _ufuncs.left_shift(np.uint8(1), _creation.arange(8, dtype=np.uint8))
  if bitorder == "big":
    bits = bits[::-1]
  if axis is None:
    arr, axis = _manip.ravel(arr), 0
  arr = _manip.swapaxes(arr, axis, -1)
  bits = _manip.reshape(bits, (1,) * arr.ndim + (8,))  # (no implicit rank promotion)
  bit = _ufuncs.bitwise_and(arr[..., None], bits)
  out = _util.convert(_ufuncs.greater(bit, 0), np.uint8)
  out = _manip.reshape(out, out.shape[:-2] + (-1,))
  if count is not None:
    if count > out.shape[-1]:
      out = _manip.pad(out, [(0, 0)] * (out.ndim - 1) + [(0, count - out.shape[-1])])
    else:
      out = out[..., :count]
  return _manip.swapaxes(out, axis, -1)


def bitwise_count(x, /):
  """Number of 1 bits in the absolute value of each element, as ``uint8`` (JAX
  implementation of :func:`numpy.bitwise_count`), via ``lax.population_count``.

  Args:
    x: input array (or array-like).

  Returns:
    A ``uint8`` array of the shape of ``x``.

  Examples:
    >>> jnp.bitwise_count(jnp.array([0, 7, -8]))
    Array([0, 3, 1], dtype=uint8)
  """
  x, = _util.promote_args_numeric("bitwise_count", x)
  if not dtypes.is_int(x.dtype):
    raise TypeError(f"bitwise_count requires integer arguments, got {x.dtype}")
  return _util.convert(lax.population_count(_ufuncs.abs(x)), np.uint8)

# ----------------------------------------------------------------- products, masks


def matvec(x1, x2, /):
  """Batched matrix-vector product (JAX implementation of :func:`numpy.matvec`): the gufunc
  ``(n,m),(m)->(n)`` over broadcast leading dimensions.

  Args:
    x1: matrices, shape ``(..., n, m)``.
    x2: vectors, shape ``(..., m)``.

  Returns:
    An array of shape ``(..., n)``.

  Examples:
    >>> jnp.matvec(jnp.array([[1, 2], [3, 4]]), jnp.array([1, 1]))
    Array([3, 7], dtype=int64)
  """
  from nbjax.numpy._vectorize import vectorize
  x1, x2 = ensure_arraylike("matvec", x1, x2)
  return vectorize(_dot.matmul, signature="(n,m),(m)->(n)")(x1, x2)


def vecmat(x1, x2, /):
  """Batched vector-matrix product, conjugating the vector (JAX implementation of
  :func:`numpy.vecmat`): the gufunc ``(n),(n,m)->(m)`` over broadcast leading dimensions.

  Args:
    x1: vectors, shape ``(..., n)``.
    x2: matrices, shape ``(..., n, m)``.

  Returns:
    An array of shape ``(..., m)``.

  Examples:
    >>> jnp.vecmat(jnp.array([1, 1]), jnp.array([[1, 2], [3, 4]]))
    Array([4, 6], dtype=int64)
  """
  from nbjax.numpy._vectorize import vectorize
  x1, x2 = ensure_arraylike("vecmat", x1, x2)
  return vectorize(_dot.matmul, signature="(n),(n,m)->(m)")(_ufuncs.conjugate(x1), x2)


def mask_indices(n, mask_func, k=0, *, size=None):
  """Indices of the nonzero entries of ``mask_func(ones((n, n)), k)`` (JAX implementation of
  :func:`numpy.mask_indices`), e.g. ``mask_func=jnp.triu``. ``size``: a static number of
  indices (padded or truncated), needed under ``jit``.

  Args:
    n: side of the square mask.
    mask_func: function ``mask_func(array, k)`` such as ``jnp.triu``.
    k: offset passed to ``mask_func``.
    size: optional static number of indices (needed under ``jit``).

  Returns:
    A tuple of two index arrays (rows, columns).

  Examples:
    >>> jnp.mask_indices(2, jnp.triu)
    (Array([0, 0, 1], dtype=int64), Array([0, 1, 1], dtype=int64))
  """
  from nbjax.numpy._indexing import nonzero
  i, j = nonzero(mask_func(_creation.ones((n, n)), k), size=size)
  return i, j

# ----------------------------------------------------------------- histograms


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
  """Multi-dimensional histogram of the ``(N, D)`` ``sample`` (JAX implementation of
  :func:`numpy.histogramdd`).

  Args:
    sample: ``(N, D)`` array of N points in D dimensions.
    bins: number of bins, or bin edges, for every dimension, or a sequence of them (one per
      dimension).
    range: per dimension, None or a ``(min, max)`` pair.
    weights: optional ``(N,)`` weights.
    density: if True, normalize to a probability density.

  Returns:
    ``(hist, edges)``: the D-dimensional histogram and a list of D bin-edge arrays.

  Examples:
    >>> jnp.histogramdd(jnp.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]), bins=2)[0]
    Array([[1, 0],
           [1, 1]], dtype=int64)
  """
  if weights is None:
    sample, = _util.promote_dtypes_inexact(ensure_arraylike("histogramdd", sample))
  else:
    sample, weights = ensure_arraylike("histogramdd", sample, weights)
    if np.shape(weights) != np.shape(sample)[:1]:
      raise ValueError("should have one weight for each sample.")
    sample, weights = _util.promote_dtypes_inexact(sample, weights)
  N, D = np.shape(sample)
  if range is not None and (len(range) != D or builtins.any(
      r is not None and np.shape(r)[0] != 2 for r in range)):
    raise ValueError(f"For sample.shape={(N, D)}, range must be a sequence of {D} pairs or "
                     f"Nones; got {range=}")
  try:
    per_dim = list(bins)
  except TypeError:
    per_dim = D * [bins]
  else:
    if len(per_dim) != D:
      raise ValueError("should be a bin for each dimension.")
  idx, edges = [], []
  for i in builtins.range(D):
    col = sample[:, i]
    e = _statistics.histogram_bin_edges(col, per_dim[i], None if range is None else range[i],
                                        weights)
    b = _manip.searchsorted(e, col, side="right")
    idx.append(_manip.where(_ufuncs.equal(col, e[-1]), b - 1, b))
    edges.append(e)
  nbins = tuple(len(e) + 1 for e in edges)
  flat = _setops.ravel_multi_index(tuple(idx), nbins, mode="clip")
  hist = _manip.reshape(_statistics.bincount(flat, weights, length=math.prod(nbins)), nbins)
  hist = hist[D * (builtins.slice(1, -1),)]
  if density:
    hist = _util.convert(hist, sample.dtype)
    hist = hist / _reductions.sum(hist)
    for norm in _creation.ix_(*(_setops.diff(e) for e in edges)):
      hist = hist / norm
  return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
  """Two-dimensional histogram of the points ``(x, y)`` (JAX implementation of
  :func:`numpy.histogram2d`); ``bins`` is a number or edges for both axes, or a pair of
  them. Returns ``(hist, xedges, yedges)``.

  Args:
    x: x coordinates of the points.
    y: y coordinates of the points.
    bins: number of bins or bin edges (for both axes, or a pair).
    range: optional ``[[xmin, xmax], [ymin, ymax]]``.
    weights: optional weights, one per point.
    density: if True, normalise the result to a probability density.

  Returns:
    A tuple ``(hist, xedges, yedges)``.

  Examples:
    >>> jnp.histogram2d(jnp.array([0.0, 1.0, 1.0]), jnp.array([0.0, 0.0, 1.0]), bins=2)[0]
    Array([[1, 0],
           [1, 1]], dtype=int64)
  """
  x, y = ensure_arraylike("histogram2d", x, y)
  try:
    n = len(bins)
  except TypeError:
    n = 1
  if n != 1 and n != 2:
    e = _creation.asarray(bins)
    bins = [e, e]
  sample = _manip.transpose(_creation.asarray([x, y]))
  hist, edges = histogramdd(sample, bins, range, weights, density)
  return hist, edges[0], edges[1]

# ----------------------------------------------------------------- polynomials


def _lstsq(a, b, rcond):
  """Least squares by SVD (singular values below ``rcond * s_max`` dropped): solution,
  squared residual norms, rank and singular values, as ``jnp.linalg.lstsq``."""
  from nbjax.numpy import linalg
  b1 = b.ndim == 1
  if b1:
    b = b[:, None]
  u, s, vt = linalg.svd(a, full_matrices=False)
  mask = s >= rcond * s[0] if s.size else s > 0
  rank = _reductions.sum(mask)
  s_inv = _manip.where(mask, 1 / _manip.where(mask, s, 1), 0)[:, None]
  x = _dot.matmul(_ufuncs.conjugate(vt).T, s_inv * _dot.matmul(_ufuncs.conjugate(u).T, b))
  r = b - _dot.matmul(a, x)
  resid = _reductions.sum(_ufuncs.real(r * _ufuncs.conjugate(r)), axis=0)
  return (_manip.ravel(x) if b1 else x), resid, rank, s


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
  """Least-squares polynomial fit of degree ``deg`` (JAX implementation of
  :func:`numpy.polyfit`).

  Args:
    x: 1-D sample points.
    y: samples, 1-D or 2-D (one fit per column).
    deg: static degree of the polynomial.
    rcond: relative cutoff for small singular values (default ``len(x) * eps``).
    full: if True, also return residuals, rank, singular values and ``rcond``.
    w: optional 1-D weights applied to the unsquared residuals.
    cov: if True (or ``"unscaled"``), also return the coefficients' covariance matrix.

  Returns:
    Coefficients, highest power first; with ``full`` or ``cov``, the tuples NumPy gives.

  Examples:
    >>> jnp.polyfit(jnp.array([0.0, 1.0, 2.0]), jnp.array([1.0, 3.0, 5.0]), 1)
    Array([2., 1.], dtype=float64)
  """
  if w is None:
    x_arr, y_arr = ensure_arraylike("polyfit", x, y)
  else:
    x_arr, y_arr, w = ensure_arraylike("polyfit", x, y, w)
  deg = core.concrete_or_error(int, deg, "deg must be int")
  order = deg + 1
  if deg < 0:
    raise ValueError("expected deg >= 0")
  if x_arr.ndim != 1:
    raise TypeError("expected 1D vector for x")
  if x_arr.size == 0:
    raise TypeError("expected non-empty vector for x")
  if y_arr.ndim < 1 or y_arr.ndim > 2:
    raise TypeError("expected 1D or 2D array for y")
  if x_arr.shape[0] != y_arr.shape[0]:
    raise TypeError("expected x and y to have same length")
  if rcond is None:
    rcond = len(x_arr) * float(dtypes.finfo(_util.promote_dtypes_inexact(x_arr)[0].dtype).eps)
  rcond = core.concrete_or_error(float, rcond, "rcond must be float")
  from nbjax.numpy._numerics import vander
  lhs, rhs = _util.promote_dtypes_inexact(vander(x_arr, order), y_arr)
  if w is not None:
    w_arr, = _util.promote_dtypes_inexact(w)
    if w_arr.ndim != 1:
      raise TypeError("expected a 1-d array for weights")
    if w_arr.shape[0] != y_arr.shape[0]:
      raise TypeError("expected w and y to have the same length")
    lhs = lhs * w_arr[:, None]
    rhs = rhs * (w_arr[:, None] if rhs.ndim == 2 else w_arr)
  scale = _ufuncs.sqrt(_reductions.sum(lhs * lhs, axis=0))
  lhs = lhs / scale[None, :]
  c, resids, rank, s = _lstsq(lhs, rhs, rcond)
  c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
  if full:
    return c, resids, rank, s, _creation.asarray(rcond)
  if cov:
    from nbjax.numpy import linalg
    vbase = linalg.inv(_dot.dot(lhs.T, lhs)) / _dot.outer(scale, scale)
    if cov == "unscaled":
      fac = _creation.array(1.0)
    else:
      if len(x_arr) <= order:
        raise ValueError("the number of data points must exceed order to scale the "
                         "covariance matrix")
      fac = resids / (len(x_arr) - order)
    if y_arr.ndim == 1:
      return c, vbase * _manip.atleast_1d(fac)[None]
    return c, vbase[:, :, None] * _manip.atleast_1d(fac)[None, None, :]
  return c


def polydiv(u, v, *, trim_leading_zeros=False):
  """Quotient and remainder of the polynomial division ``u / v`` (coefficients highest power
  first; JAX implementation of :func:`numpy.polydiv`). The remainder keeps ``u``'s length
  unless ``trim_leading_zeros`` (then leading near-zeros are trimmed, not traceable).

  Args:
    u: dividend coefficients, highest power first.
    v: divisor coefficients, highest power first.
    trim_leading_zeros: if True, strip leading zeros of the result (needs concrete input).

  Returns:
    A tuple ``(quotient, remainder)`` of coefficient arrays.

  Examples:
    >>> jnp.polydiv(jnp.array([1.0, 0.0, -1.0]), jnp.array([1.0, 1.0]))
    (Array([ 1., -1.], dtype=float64), Array([0., 0., 0.], dtype=float64))
  """
  u, v = ensure_arraylike("polydiv", u, v)
  u, v = _util.promote_dtypes_inexact(u, v)
  m, n = len(u) - 1, len(v) - 1
  scale = 1.0 / v[0]
  q = _creation.zeros(builtins.max(m - n + 1, 1), dtype=u.dtype)
  for k in builtins.range(m - n + 1):
    d = scale * u[k]
    q = q.at[k].set(d)
    u = u.at[k:k + n + 1].add(-d * v)
  if trim_leading_zeros:
    tol = float(np.sqrt(dtypes.finfo(u.dtype).eps))
    mags = np.abs(np.asarray(core.concrete_or_error(
        None, u, "trim_leading_zeros=True requires a concrete remainder")))
    nz = np.flatnonzero(~(mags < tol))  # NaN is kept, as JAX's trim_zeros_tol
    u = u[int(nz[0]):] if nz.size else u[:0]
  return q, u


def _companion_eigvals(p):
  """The roots of ``p`` (no leading zeros): eigenvalues of its companion matrix (``eig``)."""
  from nbjax.numpy import linalg
  cd = np.result_type(p.dtype, np.complex64)
  if p.size < 2:
    return _creation.array([], dtype=cd)
  n = p.size - 1
  sub = _creation.eye(n - 1, n, dtype=p.dtype) if n > 1 else _creation.zeros((0, 1), p.dtype)
  top = -p[1:][None, :] / p[0]
  return linalg.eigvals(_manip.concatenate([top, sub], axis=0))


def roots(p, *, strip_zeros=True):
  """Roots of the polynomial with coefficients ``p`` (highest power first; JAX
  implementation of :func:`numpy.roots`), as complex numbers.

  Args:
    p: 1-D coefficients.
    strip_zeros: if True (default), leading zeros are stripped (needs a concrete ``p``);
      if False (traceable), each leading zero gives a NaN root at the end.

  Returns:
    A 1-d complex array of roots.

  Examples:
    >>> jnp.roots(jnp.array([1.0, -3.0, 2.0]))
    Array([2.+0.j, 1.+0.j], dtype=complex128)
  """
  p = ensure_arraylike("roots", p)
  p, = _util.promote_dtypes_inexact(p)
  p = _manip.atleast_1d(p)
  if p.ndim != 1:
    raise ValueError("Input must be a rank-1 array.")
  cd = np.result_type(p.dtype, np.complex64)
  if p.size < 2:
    return _creation.array([], dtype=cd)
  is_zero = _ufuncs.equal(p, 0)
  lead = _manip.where(_reductions.all(is_zero), len(p), _reductions.argmin(is_zero))
  if strip_zeros:
    lead = core.concrete_or_error(
        int, lead, "The error occurred in the jnp.roots() function. To use this within a "
        "JIT-compiled context, pass strip_zeros=False, but be aware that leading zeros will "
        "result in some returned roots being set to NaN.")
    return _companion_eigvals(p[lead:])
  p = _manip.where(_ufuncs.equal(len(p), lead), _creation.ones_like(p), p)
  r = _companion_eigvals(_manip.roll(p, -lead))
  r = lax.sort_key_val(_ufuncs.equal(r, 0), r)[1]
  return _manip.where(_creation.arange(r.size) < r.size - lead, r, complex(np.nan, np.nan))
