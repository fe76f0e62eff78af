"""Order statistics, NaN-aware moments, covariance and histograms of ``nbjax.numpy``.

Pipeline position: ``jnp.quantile``/``median``/``percentile`` (and their ``nan*`` forms),
``nanvar``/``nanstd``, ``nanargmax``/``nanargmin``, ``cov``/``corrcoef``,
``histogram``/``histogram_bin_edges``/``bincount``/``digitize`` -> argument checks here ->
existing ``jnp`` functions (``sort``, ``take_along_axis``, ``searchsorted``, ``.at[].add``,
``average``, ``dot``) and ``lax`` primitives, so each works eagerly and under every
transformation. Data-dependent sizes (``bincount`` without ``length``, integer ``bins``)
need concrete values, as in JAX.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from kernels.indexing import histogram_counts as _histogram_counts
from nbjax.eager_cache import staged
from nbjax import core, dtypes, lax, sharding as _sharding
from nbjax.array import Array
from nbjax.core import _ctx, eval_trace as _EVAL
from nbjax.numpy import _reductions as _red
from nbjax.numpy import _ufuncs as _uf
from nbjax.numpy import _util
from nbjax.numpy._creation import asarray, full, linspace, ones_like, zeros
from nbjax.numpy._dot import dot
from nbjax.numpy._indexing import diag, take_along_axis
from nbjax.numpy._manip import atleast_2d, clip, concatenate, ravel, searchsorted, sort
from nbjax.numpy._manip import where as _where
from nbjax.numpy._util import canonicalize_axes, canonicalize_axis, ensure_arraylike

__all__ = ["bincount", "corrcoef", "cov", "digitize", "histogram", "histogram_bin_edges",
           "median", "nanargmax", "nanargmin", "nanmedian", "nanpercentile", "nanquantile",
           "nanstd", "nanvar", "percentile", "quantile"]

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")
_BOOL = np.dtype(np.bool_)

# ----------------------------------------------------------------- quantiles


def _static_axis(axis):
  """JAX jits these functions with a static ``axis``: an unhashable one (a list, an array)
  fails as jit's hashing does, before anything else."""
  try:
    hash(axis)
  except TypeError as e:
    raise ValueError("Non-hashable static arguments are not supported. An error occurred "
                     f"while trying to hash an object of type {type(axis)}, {axis}. The error "
                     f"was:\nTypeError: {e}\n") from None



def _quantile(name, a, q, axis, out, overwrite_input, method, keepdims, squash_nans,
              weights=None):
  """Sort along the reduced axis, then gather the two neighbours of ``q * (n - 1)`` (``n``:
  the axis length, or the number of non-NaN values when ``squash_nans``); ``inverted_cdf``
  takes the first value whose cumulative weight reaches ``q`` times the lane's total."""
  a, q = ensure_arraylike(name, a, q)
  if weights is not None:
    weights = ensure_arraylike(name, weights)
  if overwrite_input or out is not None:
    raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or out != None")
  if method not in _METHODS:
    raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' "
                     "or 'inverted_cdf'")
  if weights is not None:
    if dtypes.is_complex(weights.dtype):
      raise ValueError("Weights cannot be complex types.")
    if method != "inverted_cdf":
      raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                "'inverted_cdf' supports weights.")
    a, weights = _util.promote_dtypes_inexact(a, weights)
    if weights.shape != a.shape:
      if axis is None:
        raise ValueError("Weights shape must match 'a' shape when axis is None.")
      w_axes = _axis_tuple(axis, a.ndim, "repeated axis: {}")
      want = tuple(a.shape[d] for d in w_axes)
      if weights.shape != want:
        raise ValueError(f"Weights shape {weights.shape} must match reduction axes {want}")
      order = sorted(range(len(w_axes)), key=lambda i: w_axes[i])
      weights = lax.broadcast_in_dim(lax.transpose(weights, tuple(order)), a.shape,
                                     tuple(w_axes[i] for i in order))
  else:
    a, = _util.promote_dtypes_inexact(a)
  if dtypes.is_complex(a.dtype):
    raise ValueError("quantile does not support complex input, as the operation is poorly "
                     "defined.")
  keep_shape = None  # the keepdims shape when the reduced axes are merged into one
  if axis is None:
    if keepdims and a.ndim:
      keep_shape = (1,) * a.ndim
    a, axis = ravel(a), 0
    if weights is not None:
      weights = ravel(weights)
  elif isinstance(axis, tuple):
    axes = _axis_tuple(axis, a.ndim, "repeated axis")
    kept = [d for d in range(a.ndim) if d not in axes]
    if a.ndim:
      keep_shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
    merged_shape = tuple(a.shape[d] for d in kept) + (math.prod(a.shape[d] for d in axes),)

    def merge(x):
      return lax.reshape(lax.transpose(x, tuple(kept) + axes), merged_shape)
    a = merge(a)
    if weights is not None:
      weights = merge(weights)
    axis = a.ndim - 1
  else:
    axis = canonicalize_axis(_util.index(axis, "axis"), a.ndim)
  if q.ndim > 1:
    raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
  if q.dtype == _BOOL:
    raise TypeError(f"{'sub' if squash_nans else 'mul'} does not accept dtype bool at "
                    "position 0. Accepted dtypes at position 0 are subtypes of integer, "
                    "floating, complexfloating.")
  if not dtypes.is_float(q.dtype):  # JAX floors q * (n - 1) for every method
    raise TypeError(f"floor does not accept dtype {q.dtype.name}. Accepted dtypes are "
                    "subtypes of floating.")
  if a.shape[axis] == 0:  # JAX's gather of the neighbours fails on an empty lane
    if squash_nans and a.ndim == 1:
      raise IndexError("index is out of bounds for axis 0 with size 0")
    raise TypeError(f"Slice size at index {axis} in gather op is out of range, must be within "
                    "[0, 0 + 1), got 1.")
  nan = _uf.isnan(a)
  if squash_nans:  # NaNs sort last; count the rest
    a = _where(nan, np.nan, a)
    n = _red.sum(_uf.logical_not(nan), axis, dtype=q.dtype, keepdims=True)
    n = lax.expand_dims(n, tuple(range(q.ndim)))
  else:  # any NaN makes the whole lane NaN
    a = _where(_red.any(nan, axis, keepdims=True), np.nan, a)
    n = _util.lit(a.shape[axis], q.dtype, True)
  if weights is not None:
    a, weights = lax.sort_key_val(a, weights, axis)
  else:
    a = sort(a, axis)
  qax = axis + q.ndim  # the reduced axis once q's axes lead
  idt = dtypes.default_int_dtype()

  def value(i):
    i = _util.convert(i, idt)
    v = take_along_axis(lax.expand_dims(a, tuple(range(q.ndim))), i, qax, mode="clip")
    return v if keepdims else lax.squeeze(v, (qax,))

  if method == "inverted_cdf":
    res = _inverted_cdf(a, q, axis, weights, n, squash_nans, value, keepdims)
  else:
    last = _uf.subtract(n, 1)
    pos = _uf.multiply(lax.reshape(q, q.shape + (1,) * a.ndim), last)
    low, high = _uf.floor(pos), _uf.ceil(pos)
    high_w = _uf.subtract(pos, low)
    lo = value(_uf.maximum(0, _uf.minimum(low, last)))
    hi = value(_uf.maximum(0, _uf.minimum(high, last)))
    if not keepdims:
      high_w = lax.squeeze(high_w, (qax,))
    if method == "linear":
      lo_w = _uf.subtract(1, high_w)
      res = _uf.add(_uf.multiply(_util.convert(lo, q.dtype), lo_w),
                    _uf.multiply(_util.convert(hi, q.dtype), high_w))
    elif method == "lower":
      res = lo
    elif method == "higher":
      res = hi
    elif method == "nearest":
      res = _where(_uf.less_equal(high_w, 0.5), lo, hi)
    else:
      res = _uf.multiply(_uf.add(lo, hi), 0.5)
  if keepdims and keep_shape is not None:
    res = lax.reshape(res, q.shape + keep_shape)
  return _util.convert(res, a.dtype)


def _axis_tuple(axis, ndim, repeated):
  """``axis`` (an int or a sequence) as a tuple of non-negative axes, as given; repeats raise
  ``ValueError(repeated)`` (formatted with the tuple)."""
  if not isinstance(axis, (tuple, list)):
    return (canonicalize_axis(_util.index(axis, "axis"), ndim),)
  axes = tuple(canonicalize_axis(_util.index(d, "axis"), ndim) for d in axis)
  if len(set(axes)) != len(axes):
    raise ValueError(repeated.format(axes))
  return axes


def _inverted_cdf(a, q, axis, weights, n, squash_nans, value, keepdims):
  """The first sorted value (along ``axis``) whose cumulative weight is not below
  ``q * total``; NaN where a weight is negative or NaN, and where the data has NaNs
  (``quantile``) or none but NaNs (``nanquantile``). Negative or NaN weights and NaN data
  count as weight 0."""
  w = weights if weights is not None else lax.full_like(a, 1.0)
  if q.dtype != w.dtype:
    raise TypeError(f"lax.mul requires arguments to have the same dtypes, got {q.dtype.name}, "
                    f"{w.dtype.name}. (Tip: jnp.multiply is a similar function that does "
                    "automatic type promotion on inputs).")
  bad = _uf.logical_or(_uf.less(w, 0), _uf.isnan(w))
  nan_data = _uf.isnan(a)
  cum = lax.cumsum(_where(_uf.logical_or(bad, nan_data), _util.lit(0, w.dtype), w), axis)
  total = lax.index_in_dim(cum, -1, axis, keepdims=True)
  lead = tuple(range(q.ndim))
  target = _uf.multiply(lax.reshape(q, q.shape + (1,) * total.ndim),
                        lax.expand_dims(total, lead))
  below = _uf.less(lax.expand_dims(cum, lead), target)
  idx = _red.sum(_util.convert(below, dtypes.default_int_dtype()), axis + q.ndim,
                 keepdims=True)
  idx = _uf.maximum(0, _uf.minimum(idx, _util.convert(_uf.subtract(n, 1),
                                                         dtypes.default_int_dtype())))
  res = value(idx)
  force = _red.any(bad, axis, keepdims=keepdims)
  if squash_nans:
    force = _uf.logical_or(force, _uf.equal(lax.squeeze(n, lead) if keepdims else
                                            lax.squeeze(n, lead + (axis + q.ndim,)), 0))
  else:
    force = _uf.logical_or(force, _red.any(nan_data, axis, keepdims=keepdims))
  return _where(lax.expand_dims(force, lead), np.nan, res)


@staged
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
  """Quantile ``q`` (scalar or 1-d, in [0, 1]) of ``a`` along ``axis``; q's axis leads.
  ``weights`` (keyword-only, ``method='inverted_cdf'`` only) have ``a``'s shape or the
  reduced axes' shape.

  Args:
    a: input array (or array-like).
    q: quantile(s) to compute: a scalar or 1-d array.
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    method: interpolation method, as in NumPy (default ``"linear"``).
    keepdims: if True, the reduced axes are kept in the result with size 1.
    weights: optional weights (``method='inverted_cdf'`` only), of the shape of ``a``
      or of the reduced axes.

  Returns:
    An array of the reduced shape, with a leading axis for 1-d ``q``.

  Examples:
    >>> jnp.quantile(jnp.array([1.0, 2.0, 3.0, 4.0]), 0.5)
    Array(2.5, dtype=float64)
    >>> jnp.quantile(jnp.array([1.0, 2.0, 3.0, 4.0]), 0.5, method='lower')
    Array(2., dtype=float64)
  """
  _static_axis(axis)
  return _quantile("quantile", a, q, axis, out, overwrite_input, method, keepdims, False,
                   weights)


@staged
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
  """``quantile`` ignoring NaNs (NaN where a lane is all NaN).

  Args:
    a: input array (or array-like).
    q: quantile(s) to compute: a scalar or 1-d array.
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    method: interpolation method, as in NumPy (default ``"linear"``).
    keepdims: if True, the reduced axes are kept in the result with size 1.
    weights: optional weights (``method='inverted_cdf'`` only), of the shape of ``a``
      or of the reduced axes.

  Returns:
    An array of the reduced shape, with a leading axis for 1-d ``q``.

  Examples:
    >>> jnp.nanquantile(jnp.array([1.0, jnp.nan, 3.0]), 0.5)
    Array(2., dtype=float64)
  """
  _static_axis(axis)
  return _quantile("nanquantile", a, q, axis, out, overwrite_input, method, keepdims, True,
                   weights)


def _percent(name, a, q, weights):
  a, q = ensure_arraylike(name, a, q)
  if weights is not None:
    ensure_arraylike(name, weights)
  q, = _util.promote_dtypes_inexact(q)
  # JAX's q / 100 runs compiled, where XLA divides by a constant as a multiplication by its
  # reciprocal (70 / 100 -> 0.7000000000000001); the same product eagerly and under jit.
  # bfloat16 arithmetic runs in float32 there: q / 100 rounds as that product does.
  if q.dtype == dtypes.bfloat16:
    return _uf.divide(q, 100)
  return _uf.multiply(q, 0.01)


@staged
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, out_sharding=None):
  """Percentile ``q`` (in [0, 100]) of ``a`` along ``axis``: ``quantile(a, q / 100)``.

  Args:
    a: input array (or array-like).
    q: percentile(s) in ``[0, 100]``: a scalar or 1-d array.
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    method: interpolation method, as in NumPy (default ``"linear"``).
    keepdims: if True, the reduced axes are kept in the result with size 1.
    weights: optional weights (``method='inverted_cdf'`` only), of the shape of ``a``
      or of the reduced axes.
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of the reduced shape, with a leading axis for 1-d ``q``.

  Examples:
    >>> jnp.percentile(jnp.array([1.0, 2.0, 3.0, 4.0]), 50)
    Array(2.5, dtype=float64)
    >>> jnp.percentile(jnp.array([1.0, 2.0, 3.0, 4.0]), jnp.array([25, 75]))
    Array([1.75, 3.25], dtype=float64)
  """
  _static_axis(axis)
  out = quantile(a, _percent("percentile", a, q, weights), axis, out, overwrite_input,
                 method, keepdims, weights=weights)
  return out if out_sharding is None else _sharding.apply_out_sharding(out, out_sharding,
                                                                       "jnp.percentile")


@staged
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
  """``percentile`` ignoring NaNs.

  Args:
    a: input array (or array-like).
    q: percentile(s) in ``[0, 100]``: a scalar or 1-d array.
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    method: interpolation method, as in NumPy (default ``"linear"``).
    keepdims: if True, the reduced axes are kept in the result with size 1.
    weights: optional weights (``method='inverted_cdf'`` only), of the shape of ``a``
      or of the reduced axes.

  Returns:
    An array of the reduced shape, with a leading axis for 1-d ``q``.

  Examples:
    >>> jnp.nanpercentile(jnp.array([1.0, jnp.nan, 3.0]), 50)
    Array(2., dtype=float64)
  """
  _static_axis(axis)
  return nanquantile(a, _percent("nanpercentile", a, q, weights), axis, out,
                     overwrite_input, method, keepdims, weights=weights)


@staged
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
  """Median of ``a`` along ``axis`` (mean of the two middle values for even counts).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    keepdims: if True, the reduced axes are kept in the result with size 1.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.median(jnp.array([3.0, 1.0, 4.0, 2.0]))
    Array(2.5, dtype=float64)
  """
  _static_axis(axis)
  _util.check_arraylike("median", a)
  return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)


@staged
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
  """``median`` ignoring NaNs.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    overwrite_input: ignored (JAX arrays are immutable).
    keepdims: if True, the reduced axes are kept in the result with size 1.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanmedian(jnp.array([3.0, jnp.nan, 1.0]))
    Array(2., dtype=float64)
  """
  _static_axis(axis)
  _util.check_arraylike("nanmedian", a)
  return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)

# ----------------------------------------------------------------- NaN-aware moments


def _var_dtypes(a_dtype, dtype, name):
  """(computation dtype, result dtype) of ``var``-like reductions, as JAX."""
  if dtype is not None:
    dtype = _util.canonicalize_user_dtype(dtype, name)
    if dtypes.is_complex(a_dtype) and not dtypes.is_complex(dtype):
      raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                       "computing the variance of an array of complex values.")
    comp = dtype
  elif not dtypes.is_inexact(a_dtype):
    comp = dtype = _util.to_inexact_dtype(a_dtype)
  else:
    comp, dtype = a_dtype, np.zeros((), a_dtype).real.dtype
  if comp in (np.float16, dtypes.bfloat16):
    comp = np.dtype(np.float32)
  return comp, np.dtype(dtype)


@staged
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
  """Variance over ``axis`` ignoring NaNs (NaN where fewer than ``ddof + 1`` values).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    ddof: delta degrees of freedom: the divisor is ``N - ddof``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.
    mean: optional precomputed mean (of ``keepdims=True`` shape) to use instead of computing
      it.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanvar(jnp.array([1.0, jnp.nan, 3.0]))
    Array(1., dtype=float64)
  """
  _red._no_out("nanvar", out)
  a = ensure_arraylike("nanvar", a)
  where = _red._check_where("nanvar", where)
  comp, dtype = _var_dtypes(a.dtype, dtype, "nanvar")
  a = _util.convert(a, comp)
  if mean is None:
    mean = _red.nanmean(a, axis, dtype=comp, keepdims=True, where=where)
  else:
    mean = _util.convert(ensure_arraylike("nanvar", mean), comp)
  nan = _uf.isnan(a)
  c = _where(nan, 0, _uf.subtract(a, mean))  # the double where keeps NaN out of gradients
  c = _uf.real(_uf.multiply(c, _uf.conj(c))) if dtypes.is_complex(comp) else _uf.square(c)
  norm = _uf.subtract(_red.sum(_uf.logical_not(nan), axis, keepdims=keepdims, where=where), ddof)
  empty = _uf.less_equal(norm, 0)
  s = _where(empty, np.nan, _red.sum(c, axis, keepdims=keepdims, where=where))
  res = _uf.divide(s, _util.convert(_where(empty, 1, norm), s.dtype))
  return _util.convert(res, dtype)


@staged
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
  """Standard deviation over ``axis`` ignoring NaNs: ``sqrt(nanvar(...))``.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    ddof: delta degrees of freedom: the divisor is ``N - ddof``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.
    mean: optional precomputed mean (of ``keepdims=True`` shape) to use instead of computing
      it.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanstd(jnp.array([1.0, jnp.nan, 3.0]))
    Array(1., dtype=float64)
  """
  a = ensure_arraylike("nanstd", a)
  where = _red._check_where("nanstd", where)
  dtype = _util.canonicalize_user_dtype(dtype, "nanstd")
  _red._no_out("nanstd", out)
  return _uf.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where, mean))


def _nanarg(name, arg_fn, fill, a, axis, out, keepdims):
  _red._no_out(name, out)
  a = ensure_arraylike(name, a)
  axis = None if axis is None else operator.index(axis)
  keepdims = bool(keepdims)
  if not dtypes.is_inexact(a.dtype):
    return arg_fn(a, axis, keepdims=keepdims)
  nan = _uf.isnan(a)
  res = arg_fn(_where(nan, fill, a), axis, keepdims=keepdims)
  return _where(_red.all(nan, axis, keepdims=keepdims), -1, res)


@staged
def nanargmax(a, axis=None, out=None, keepdims=None):
  """Index of the maximum along ``axis`` ignoring NaNs (-1 where a lane is all NaN).

  Args:
    a: input array (or array-like).
    axis: axis along which to search; ``None`` searches the flattened array.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the searched axis is kept with size 1.

  Returns:
    An integer array of indices.

  Examples:
    >>> jnp.nanargmax(jnp.array([1.0, jnp.nan, 3.0]))
    Array(2, dtype=int64)
  """
  return _nanarg("nanargmax", _red.argmax, -np.inf, a, axis, out, keepdims)


@staged
def nanargmin(a, axis=None, out=None, keepdims=None):
  """Index of the minimum along ``axis`` ignoring NaNs (-1 where a lane is all NaN).

  Args:
    a: input array (or array-like).
    axis: axis along which to search; ``None`` searches the flattened array.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the searched axis is kept with size 1.

  Returns:
    An integer array of indices.

  Examples:
    >>> jnp.nanargmin(jnp.array([jnp.nan, 2.0, 3.0]))
    Array(1, dtype=int64)
  """
  return _nanarg("nanargmin", _red.argmin, np.inf, a, axis, out, keepdims)

# ----------------------------------------------------------------- covariance


def _sample_weights(w, n, kind):
  w = ensure_arraylike("cov", w)
  if w.ndim > 1:
    raise RuntimeError(f"cannot handle multidimensional {kind}")
  if w.shape[0] != n:
    raise RuntimeError(f"incompatible numbers of samples and {kind}")
  if kind == "fweights" and not dtypes.is_int(w.dtype):
    raise TypeError("fweights must be integer.")
  return _uf.abs(w)  # NumPy raises for negative weights; JAX takes absolute values


@staged
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
  """Covariance matrix of the variables in the rows (``rowvar``) or columns of ``m`` (and ``y``).

  Args:
    m: 1-d or 2-d array of variables and observations.
    y: optional second input (another set of variables or values).
    rowvar: if True (default) each row is a variable and columns are observations; otherwise
      the transpose.
    bias: if True, normalise by ``N`` instead of ``N - 1``.
    ddof: optional delta degrees of freedom overriding ``bias``.
    fweights: optional integer frequency weights, one per observation.
    aweights: optional observation weights.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    The covariance matrix (a scalar for one variable).

  Examples:
    >>> jnp.cov(jnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    Array([[ 1., -1.],
           [-1.,  1.]], dtype=float64)
  """
  if y is not None:  # no rank promotion: atleast_2d below (m and y may differ in rows)
    m, y = _util.promote_dtypes_inexact(*_util.ensure_arraylike("cov", m, y))
    if y.ndim > 2:
      raise ValueError("y has more than 2 dimensions")
  else:
    m, = _util.promote_dtypes_inexact(_util.ensure_arraylike("cov", m))
  if m.ndim > 2:
    raise ValueError("m has more than 2 dimensions")
  if dtype is not None and not dtypes.issubdtype(dtype, np.inexact):
    raise ValueError(f"cov: dtype must be a subclass of float or complex; got {dtype=}")
  X = atleast_2d(m)
  if not rowvar and m.ndim != 1:
    X = X.T
  if X.shape[0] == 0:
    return zeros((0, 0))
  if y is not None:
    y = atleast_2d(y)
    if not rowvar and y.shape[0] != 1:
      y = y.T
    X = concatenate((X, y), axis=0)
  nv, ns = X.shape
  if ns == 0:
    return full(() if nv == 1 else (nv, nv), np.nan, dtype=X.dtype)
  if ddof is None:
    ddof = 1 if not bias else 0
  w = None
  if fweights is not None:
    w = _sample_weights(fweights, ns, "fweights")
  if aweights is not None:
    aweights = _sample_weights(aweights, ns, "aweights")
    w = aweights if w is None else _uf.multiply(w, aweights)
  if dtype is not None:
    X = X.astype(dtype)
    w = None if w is None else w.astype(dtype)
  avg, w_sum = _red.average(X, axis=1, weights=w, returned=True)
  w_sum = w_sum[0]
  if w is None:
    f = ns - ddof
  elif ddof == 0:
    f = w_sum
  elif aweights is None:
    f = _uf.subtract(w_sum, ddof)
  else:
    f = _uf.subtract(w_sum, _uf.divide(_uf.multiply(ddof, _red.sum(_uf.multiply(w, aweights))),
                                       w_sum))
  X = _uf.subtract(X, avg[:, None])
  X_T = X.T if w is None else _uf.multiply(X, w[None, :]).T
  return _uf.true_divide(dot(X, _uf.conj(X_T)), f).squeeze()


@staged
def corrcoef(x, y=None, rowvar=True, dtype=None):
  """Pearson correlation coefficients: ``cov`` normalised by the standard deviations.

  Args:
    x: 1-d or 2-d array of variables and observations.
    y: optional second input (another set of variables or values).
    rowvar: if True (default) each row is a variable and columns are observations; otherwise
      the transpose.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    A 2-d array of correlation coefficients (a scalar for one variable).

  Examples:
    >>> jnp.corrcoef(jnp.array([1.0, 2.0, 3.0]), jnp.array([1.0, 5.0, 7.0]))
    Array([[1.        , 0.98198051],
           [0.98198051, 1.        ]], dtype=float64)
  """
  _util.check_arraylike("corrcoef", x)
  if dtype is not None and not dtypes.issubdtype(dtype, np.inexact):
    raise ValueError(f"corrcoef: dtype must be a subclass of float or complex; got {dtype=}")
  c = cov(x, y, rowvar, dtype=dtype)
  if c.ndim == 0:  # one variable: NaN for nan/inf/0 variances, else 1
    return _uf.divide(c, c)
  sd = _util.convert(_uf.sqrt(_uf.real(diag(c))), c.dtype)
  c = _uf.divide(_uf.divide(c, sd[:, None]), sd[None, :])
  re = clip(_uf.real(c), -1, 1)
  if dtypes.is_complex(c.dtype):
    return lax.complex(re, clip(_uf.imag(c), -1, 1))
  return re

# ----------------------------------------------------------------- histograms


def histogram_bin_edges(a, bins=10, range=None, weights=None):
  """Bin edges of ``histogram``: ``bins`` as given (1-d), or ``bins + 1`` equal-width edges
  over ``range`` (default: the data's min and max).

  Args:
    a: input array (flattened).
    bins: number of bins (an int) or the bin edges (a 1-d array).
    range: optional ``(min, max)`` range of the bins (default: the data range).
    weights: accepted for NumPy compatibility (unused).

  Returns:
    A 1-d array of bin edges.

  Examples:
    >>> jnp.histogram_bin_edges(jnp.array([1.0, 4.0]), bins=3)
    Array([1., 2., 3., 4.], dtype=float64)
  """
  del weights  # used only by string bins, which are not supported
  if isinstance(bins, str):
    raise NotImplementedError("string values for `bins` not implemented.")
  _util.check_arraylike("histogram_bin_edges", a, bins)
  a = _util.as_array(a)
  dtype = _util.to_inexact_dtype(a.dtype)
  if _util.ndim(bins) == 1:
    return _util.convert(bins, dtype)
  n = core.concrete_or_error(operator.index, bins, "bins argument of histogram_bin_edges")
  if range is None:
    lo, hi = _red.min(a), _red.max(a)
  else:  # (an array first, as JAX's: its bounds may be traced)
    range = asarray(range, dtype=dtype)
    if range.shape != (2,):
      raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    lo, hi = range[0], range[1]
  lo, hi = _util.convert(lo, dtype), _util.convert(hi, dtype)
  same = _uf.equal(lo, hi)
  lo, hi = _where(same, _uf.subtract(lo, 0.5), lo), _where(same, _uf.add(hi, 0.5), hi)
  return linspace(lo, hi, n + 1, dtype=dtype)


_HIST_FLOATS = frozenset(map(np.dtype, (np.float32, np.float64)))


def _histogram_eager(general):
  """Eagerly, the counts of a float32/float64 Array (weights of its dtype and shape, or
  none) are one pass of ``kernels.indexing.histogram_counts`` over the composite's edges
  when they are sorted and NaN-free: the composite's bins, sums in element order (10^6
  float32 in 50 bins ~33 -> ~3 ms)."""
  @functools.wraps(general)
  def f(a, bins=10, range=None, weights=None, density=None):
    if type(a) is Array and _ctx.trace is _EVAL and not core.placement[0] and \
        a.dtype in _HIST_FLOATS and (
        weights is None or type(weights) is Array and weights.dtype == a.dtype
        and weights.shape == a.shape):
      edges = histogram_bin_edges(a, bins, range, weights)
      e = edges._value if type(edges) is Array else None
      if e is not None and e.dtype == a.dtype and e.ndim == 1 and not np.isnan(e).any() \
          and not (e[1:] < e[:-1]).any():  # (sorted, NaN-free edges: else the composite)
        counts = np.zeros(max(edges.shape[0] - 1, 0), a.dtype)
        w = np.empty(0, a.dtype) if weights is None else weights._value.reshape(-1)
        _histogram_counts(np.ascontiguousarray(a._value).reshape(-1), np.ascontiguousarray(w),
                          np.ascontiguousarray(edges._value), counts)
        return _density(Array._new(counts), edges) if density else Array._new(counts), edges
    return general(a, bins, range, weights, density)
  return f


def _density(counts, edges):
  return _uf.divide(_uf.divide(counts, _uf.subtract(edges[1:], edges[:-1])), _red.sum(counts))


@_histogram_eager
@staged
def histogram(a, bins=10, range=None, weights=None, density=None):
  """(counts, bin_edges) of ``a`` over ``bins``; the last bin includes its right edge.
  Counts are (weighted) sums in ``a``'s inexact dtype; ``density`` normalises them.

  Args:
    a: input array (flattened).
    bins: number of bins (an int) or the bin edges (a 1-d array).
    range: optional ``(min, max)`` range of the bins (default: the data range).
    weights: optional weights, of the shape of ``a``.
    density: if True, normalise the result to a probability density.

  Returns:
    A tuple ``(counts, bin_edges)``.

  Examples:
    >>> jnp.histogram(jnp.array([1.0, 2.0, 2.5, 4.0]), bins=3)
    (Array([1., 2., 1.], dtype=float64), Array([1., 2., 3., 4.], dtype=float64))
  """
  if weights is None:
    a, _ = ensure_arraylike("histogram", a, bins)
    a, = _util.promote_dtypes_inexact(a)
    weights = ones_like(a)
  else:
    _util.check_arraylike("histogram", a, bins, weights)
    a, weights = _util.as_array(a), _util.as_array(weights)
    if a.shape != weights.shape:
      raise ValueError("weights should have the same shape as a.")
    a, weights = _util.promote_dtypes_inexact(a, weights)
  edges = histogram_bin_edges(a, bins, range, weights)
  nb = edges.shape[0]
  idx = searchsorted(edges, a, side="right")
  idx = _where(_uf.equal(a, edges[-1]), nb - 1, idx)
  counts = zeros(nb, weights.dtype).at[idx].add(weights)[1:]
  return _density(counts, edges) if density else counts, edges


def bincount(x, weights=None, minlength=0, *, length=None, out_sharding=None):
  """Count (or sum ``weights`` of) each non-negative int in 1-d ``x``; negative values count
  in bin 0 and values ``>= length`` are dropped. ``length`` must be static under tracing.

  Args:
    x: 1-d array of non-negative integers.
    weights: optional weights, of the shape of ``x``.
    minlength: minimum number of bins.
    length: static number of bins (needed under ``jit``).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    A 1-d array of counts (or weight sums).

  Examples:
    >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
    Array([1, 2, 0, 1], dtype=int64)
    >>> jnp.bincount(jnp.array([0, 1, 1, 3]), length=3)
    Array([1, 2, 0], dtype=int64)
  """
  if out_sharding is not None:
    return _sharding.apply_out_sharding(
        bincount(x, weights, minlength, length=length), out_sharding, "jnp.bincount")
  x = ensure_arraylike("bincount", x)
  if x.dtype == _BOOL:
    x = _util.convert(x, np.int32)
  if not dtypes.is_int(x.dtype):
    raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
  if x.ndim != 1:
    raise ValueError("only 1-dimensional input supported.")
  minlength = core.concrete_or_error(
      operator.index, minlength, "The error occurred because of argument 'minlength' of "
      "jnp.bincount.")
  if length is None:
    xv = _util.concrete(x, "The error occurred because of argument 'x' of jnp.bincount. To "
                           "avoid this error, pass a static `length` argument.")
    length = max(minlength, xv.size and int(max(0, xv.max())) + 1)
  else:
    length = core.concrete_or_error(
        operator.index, length, "The error occurred because of argument 'length' of "
        "jnp.bincount.")
  if weights is None:
    if type(x) is Array and _ctx.trace is _EVAL and length >= 0:  # eagerly: NumPy's count
      v = np.clip(x._value, 0, length)  # (negatives in bin 0, values past ``length``
      return Array._new(np.asarray(  # dropped, as JAX's; NumPy sizes by the maximum)
          np.bincount(v, minlength=length + 1)[:length], dtypes.default_int_dtype()))
    weights = _util.lit(1, dtypes.default_int_dtype())
  else:
    weights = ensure_arraylike("bincount", weights)
    if weights.shape != x.shape:
      raise ValueError(f"shape of weights must match shape of x. Got x.shape={x.shape} and "
                       f"weights.shape={weights.shape}")
  return zeros(length, weights.dtype).at[clip(x, 0)].add(weights, mode="drop")


def digitize(x, bins, right=False, *, method=None):
  """Index of the bin of each ``x`` among monotonic 1-d ``bins`` (NumPy's convention).

  Args:
    x: values to bin.
    bins: monotonic 1-d array of bin edges.
    right: whether the bins include their right edge instead of their left.
    method: optional ``searchsorted`` method.

  Returns:
    An integer array of the shape of ``x``.

  Examples:
    >>> jnp.digitize(jnp.array([0.5, 1.5, 3.5]), jnp.array([1.0, 2.0, 3.0]))
    Array([0, 1, 3], dtype=int32)
  """
  x, bins = ensure_arraylike("digitize", x, bins)
  right = core.concrete_or_error(bool, right, "right argument of jnp.digitize()")
  if bins.ndim != 1:
    raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
  n = bins.shape[0]
  if n == 0:
    return zeros(x.shape, np.int32)
  side = "left" if right else "right"
  kw = {} if method is None else {"method": method}
  return _where(_uf.greater_equal(bins[-1], bins[0]), searchsorted(bins, x, side=side, **kw),
                _uf.subtract(n, searchsorted(bins[::-1], x, side=side, **kw)))
