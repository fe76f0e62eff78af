"""Reductions and scans of ``nbjax.numpy``: sum, mean, var, max, argmax, cumsum, ...

Pipeline position: ``jnp.sum(x, axis, dtype=, keepdims=, initial=, where=)`` -> argument
normalisation here (axes, JAX's integer promotion of sums and products, ``where`` masks as
``lax.select`` against the reduction's identity) -> ``lax.reduce_sum`` and friends
(``lax.cumsum`` for scans, ``lax.argmax`` for arg-reductions).
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from nbjax import dtypes, lax
from nbjax.eager_cache import staged
from nbjax.array import Array
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.numpy import _ufunc_docs, _util
from nbjax.numpy._util import as_array, canonicalize_axes, canonicalize_axis, ensure_arraylike

_BOOL = np.dtype(np.bool_)
_F32 = np.dtype(np.float32)
_HALF = frozenset({np.dtype(np.float16), dtypes.dtype("bfloat16")})


def _promote_integer_dtype(d):
  """JAX's ``promote_integers``: bool and narrow ints accumulate in the default int width."""
  k = d.kind
  if k not in "biu":
    return d
  if k == "b":
    return dtypes.default_int_dtype()
  wide = dtypes.default_uint_dtype() if k == "u" else dtypes.default_int_dtype()
  return wide if d.itemsize < wide.itemsize else d


def _identity(kind, d):
  """Identity of a reduction for dtype ``d``: the fill of masked-out (``where``) entries."""
  if kind == "sum":
    return 0
  if kind == "prod":
    return 1
  if kind in ("max", "min"):
    if d == _BOOL:
      return kind == "min"
    if dtypes.is_int(d):
      info = np.iinfo(d)
      return info.min if kind == "max" else info.max
    return -np.inf if kind == "max" else np.inf
  return kind == "all"


_LAX = {"sum": "reduce_sum", "prod": "reduce_prod", "max": "reduce_max", "min": "reduce_min",
        "all": "reduce_and", "any": "reduce_or"}
_BOOL_LAX = {"sum": "reduce_or", "max": "reduce_or", "min": "reduce_and", "prod": "reduce_and"}
_COMBINE = {"sum": ("add", "bitwise_or"), "prod": ("mul", "bitwise_and"),  # (numeric, bool)
            "max": ("max", "bitwise_or"), "min": ("min", "bitwise_and")}


def _check_where(name, where):
  """JAX's ``check_where``: ``where`` is None or a boolean array (an int mask is an error)."""
  if where is None:
    return None
  where = ensure_arraylike(name, where)
  if where.dtype != _BOOL:
    raise ValueError(f"jnp.{name}: where must be None or a boolean array; got "
                     f"where.dtype={where.dtype!r}.")
  return where


def _where_shape(where, a):
  """JAX's error for a ``where`` mask that does not broadcast against ``a`` (its reductions
  apply ``jnp.where(where, a, init)``, which names the three shapes)."""
  if where.shape != a.shape:
    _util.broadcast_shapes(where.shape, a.shape, ())


def _masked(a, where, fill):
  _where_shape(where, a)
  where = _util.broadcast_to(_util.convert(where, _BOOL), a.shape)
  return lax.select(where, a, lax.full_like(a, fill))


_ALL_AXES = [tuple(range(n)) for n in range(65)]
_LAX_P = {k: getattr(lax, v + "_p") for k, v in _LAX.items()}


def _one_axis(a, axis, kinds="f", one_tuple=False):
  """The hot paths' test: ``a`` a non-empty, strongly typed Array of a dtype of ``kinds``
  (nothing to promote), reduced over all its axes (``axis`` None: ``_ALL``) or one int axis
  (or, with ``one_tuple``, a tuple of one, as logsumexp's): the axis (>= 0), ``_ALL`` or None
  (the general path)."""
  if type(a) is not Array:
    return None
  v = a._value
  if v.dtype.kind not in kinds or not v.size or a._weak:
    return None
  nd = v.ndim
  if axis is None:
    return _ALL if nd else None
  if one_tuple and type(axis) is tuple and len(axis) == 1:
    axis, = axis
  if type(axis) is int and -nd <= axis < nd:
    return axis + nd if axis < 0 else axis
  return None


_ALL = -1
_NO_EFFECT = {"max": -np.inf, "min": np.inf}  # initial values that change no float reduction


def _upcast_f16(d):
  """JAX's computation dtype for half-precision sums, products, means and variances."""
  return _F32 if d in _HALF else d


def _reduce(kind, name, a, axis, dtype, keepdims, initial, where, promote_integers=False):
  if dtype is None and where is None and (initial is None or type(initial) is float and (
      initial == _NO_EFFECT.get(kind))):  # (a max's -inf initial: softmax's)
    # the common float (and boolean any/all) reductions, without the normalisation below
    ax = _one_axis(a, axis, "b" if kind in ("any", "all") else "f", one_tuple=True)
    if ax is not None and (kind in ("max", "min") or a._value.dtype not in _HALF):
      p, nd = _LAX_P[kind], a._value.ndim
      axes = _ALL_AXES[nd] if ax == _ALL else (ax,)
      if _ctx.trace is _EVAL:  # (eager: the registry's entry directly, as the ufuncs call it)
        out = p.eager(a, axes=axes)
        if not keepdims and initial is None:
          _util.remember(kind, a, axis, p, {"axes": axes})
        if keepdims:  # (the result's own fresh buffer, viewed with the kept axes)
          sh = a._value.shape
          out = Array._new(out._value.reshape((1,) * nd if ax == _ALL else
                                              sh[:ax] + (1,) + sh[ax + 1:]), out._weak)
        return out
      if not keepdims:
        return p.bind(a, axes=axes)
  a = ensure_arraylike(name, a)
  where = _check_where(name, where)
  if dtype is not None:
    to = _util.canonicalize_user_dtype(dtype, name)
  elif promote_integers:
    to = _promote_integer_dtype(a.dtype)
  elif kind in ("sum", "prod") and a.dtype == _BOOL:
    to = _util.to_numeric_dtype(a.dtype)  # JAX's numeric cast (bool -> int32)
  else:
    to = a.dtype
  # JAX's reductions give strongly typed results; half-precision sums and products compute
  # in float32 (when no dtype is asked for) and round once
  comp = _upcast_f16(to) if dtype is None and kind in ("sum", "prod") else to
  if comp != a.dtype or a.weak_type:
    a = _util.convert(a, comp, False)
  axes = canonicalize_axes(axis, a.ndim)
  has_identity = kind not in ("max", "min")
  if not has_identity and initial is None:
    if where is not None:
      raise ValueError(f"reduction operation {name} does not have an identity, so to use a "
                       "where mask one has to specify 'initial'")
    if builtins.any(a.shape[i] == 0 for i in axes):
      raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
  if initial is not None and np.shape(initial) != ():
    raise ValueError(f"initial value must be a scalar. Got array of shape {np.shape(initial)}")
  if where is not None:
    a = _masked(a, where, _identity(kind, a.dtype))
  if not has_identity and a.dtype.kind == "c":  # (JAX's complex max/min: lexicographic)
    out = _complex_extreme(kind, a, axes) if axes else a
    if initial is not None:
      from nbjax.numpy._ufuncs import maximum, minimum
      nan = lax.ne(out, out)
      out = lax.select(nan, out, (maximum if kind == "max" else minimum)(
          out, _util.convert(initial, out.dtype)))
  else:
    op = _BOOL_LAX.get(kind) if a.dtype == _BOOL else None
    out = getattr(lax, op or _LAX[kind])(a, axes) if axes else a
    if initial is not None:
      combine = _COMBINE[kind][out.dtype == _BOOL]
      out = getattr(lax, combine)(out, _util.convert(initial, out.dtype))
  if keepdims and axes:
    out = lax.expand_dims(out, tuple(sorted(axes)))
  return out if comp == to else _util.convert(out, to, False)


def _complex_extreme(kind, a, axes):
  """Lexicographic (real part, then imaginary part) max/min of complex ``a`` over ``axes``;
  NaN anywhere in a reduced group gives ``nan+nanj``."""
  red = lax.reduce_max if kind == "max" else lax.reduce_min
  re, im = lax.real(a), lax.imag(a)
  r = red(re, axes)
  keep = tuple(i for i in range(a.ndim) if i not in axes)
  on_r = lax.eq(re, lax.broadcast_in_dim(r, a.shape, keep))
  fill = lax.full_like(im, -np.inf if kind == "max" else np.inf)
  out = lax.complex(r, red(lax.select(on_r, im, fill), axes))
  nan = lax.reduce_or(lax.bitwise_or(lax.ne(re, re), lax.ne(im, im)), axes)
  return lax.select(nan, lax.full_like(out, complex(np.nan, np.nan)), out)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,  # noqa: A001
        promote_integers=True):
  """Sum of array elements over ``axis`` (JAX implementation of :func:`numpy.sum`).

  Booleans and integers narrower than the default int accumulate in the default int
  (``promote_integers=True``, as JAX).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.
    promote_integers: if True (default), booleans and integers narrower than the default
      integer accumulate in the default (unsigned) integer dtype.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.sum(jnp.array([[1, 2], [3, 4]]))
    Array(10, dtype=int64)
    >>> jnp.sum(jnp.array([[1, 2], [3, 4]]), axis=1, keepdims=True)
    Array([[3],
           [7]], dtype=int64)
  """
  if dtype is None and out is None and not keepdims and initial is None and where is None:
    r = _util.memo_run("sum", a, axis)
    if r is not None:
      return r
  _no_out("sum", out)
  return _reduce("sum", "sum", a, axis, dtype, keepdims, initial, where, promote_integers)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
  """Product of array elements over ``axis``.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.
    promote_integers: if True (default), booleans and integers narrower than the default
      integer accumulate in the default (unsigned) integer dtype.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.prod(jnp.array([[1, 2], [3, 4]]), axis=1)
    Array([ 2, 12], dtype=int64)
  """
  if dtype is None and out is None and not keepdims and initial is None and where is None:
    r = _util.memo_run("prod", a, axis)
    if r is not None:
      return r
  _no_out("prod", out)
  return _reduce("prod", "prod", a, axis, dtype, keepdims, initial, where, promote_integers)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """Maximum over ``axis`` (NaN propagates).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.max(jnp.array([[1, 5], [7, 2]]), axis=0)
    Array([7, 5], dtype=int64)
    >>> jnp.max(jnp.array([1.0, jnp.nan]))
    Array(nan, dtype=float64)
  """
  if out is None and not keepdims and initial is None and where is None:
    r = _util.memo_run("max", a, axis)
    if r is not None:
      return r
  _no_out("max", out)
  return _reduce("max", "max", a, axis, None, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):  # noqa: A001
  """Minimum over ``axis`` (NaN propagates).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.min(jnp.array([[1, 5], [7, 2]]), axis=0)
    Array([1, 2], dtype=int64)
  """
  if out is None and not keepdims and initial is None and where is None:
    r = _util.memo_run("min", a, axis)
    if r is not None:
      return r
  _no_out("min", out)
  return _reduce("min", "min", a, axis, None, keepdims, initial, where)


amax = _ufunc_docs.alias(max, "amax")
amin = _ufunc_docs.alias(min, "amin")


def all(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
  """Whether all elements over ``axis`` are true.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    A boolean array of the reduced shape.

  Examples:
    >>> jnp.all(jnp.array([[True, False], [True, True]]), axis=1)
    Array([False,  True], dtype=bool)
  """
  if out is None and not keepdims and where is None:
    r = _util.memo_run("all", a, axis)
    if r is not None:
      return r
  _no_out("all", out)
  a = ensure_arraylike("all", a)
  where = _check_where("all", where)
  return _reduce("all", "all", _to_bool(a), axis, None, keepdims, None, where)


def any(a, axis=None, out=None, keepdims=False, *, where=None):  # noqa: A001
  """Whether any element over ``axis`` is true.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    A boolean array of the reduced shape.

  Examples:
    >>> jnp.any(jnp.array([[True, False], [False, False]]), axis=1)
    Array([ True, False], dtype=bool)
  """
  if out is None and not keepdims and where is None:
    r = _util.memo_run("any", a, axis)
    if r is not None:
      return r
  _no_out("any", out)
  a = ensure_arraylike("any", a)
  where = _check_where("any", where)
  return _reduce("any", "any", _to_bool(a), axis, None, keepdims, None, where)


def _to_bool(a):
  return a if a.dtype == _BOOL else lax.ne(a, _util.lit(0, a.dtype, True))


def _no_out(name, out):
  if out is not None:
    raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported.")


def _count(a, axis, keepdims, where, dtype):
  """Number of (unmasked) elements reduced over ``axis``, as ``dtype``."""
  axes = canonicalize_axes(axis, a.ndim)
  if where is None:
    n = math.prod(a.shape[i] for i in axes)
    return _util.lit(n, dtype, True)
  w = _util.broadcast_to(_util.convert(where, _BOOL), a.shape)
  return sum(w, axis, dtype=dtype, keepdims=keepdims)


def _mean_dtypes(a_dtype, dtype, name="mean"):
  if dtype is not None:
    return _util.canonicalize_user_dtype(dtype, name)
  return _util.to_inexact_dtype(a_dtype)


@staged
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
  """Arithmetic mean over ``axis`` (integers average in the default float).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.mean(jnp.array([[1, 2], [3, 4]]), axis=0)
    Array([2., 3.], dtype=float64)
  """
  _no_out("mean", out)
  if axis is None and dtype is None and not keepdims and where is None:
    # the common whole-array float mean: the general path's equations, without its checks
    v = a._value if type(a) is Array else a.aval if isinstance(a, Tracer) else None
    if v is not None and v.dtype.kind in "fc" and v.dtype not in _HALF and v.ndim and v.size \
        and not a.weak_type:
      return lax.div(lax.reduce_sum(a, _ALL_AXES[v.ndim]), _util.lit(v.size, v.dtype, True))
  a = ensure_arraylike("mean", a)
  where = _check_where("mean", where)
  d = _mean_dtypes(a.dtype, dtype)
  comp = _upcast_f16(d) if dtype is None else d  # (JAX: an integer dtype= computes in integers)
  n = _count(a, axis, keepdims, where, comp)  # (first: JAX's error for a bad where mask)
  s = sum(a, axis, dtype=comp, keepdims=keepdims, where=where)
  return _util.convert(lax.div(s, n), d, s.weak_type)


@staged
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
  """Variance over ``axis`` with ``ddof`` (or ``correction``) degrees of freedom removed;
  ``mean`` (keepdims-shaped) replaces the computed mean, as JAX's ``mean=``.

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
    correction: Array API name of ``ddof``; give one of the two.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.var(jnp.array([1.0, 2.0, 3.0, 4.0]))
    Array(1.25, dtype=float64)
  """
  _no_out("var", out)
  a = ensure_arraylike("var", a)
  where = _check_where("var", where)
  if correction is None:
    correction = ddof
  elif ddof != 0:
    raise ValueError("ddof and correction can't be provided simultaneously.")
  d = _mean_dtypes(a.dtype, dtype, "var")
  if dtype is not None and dtypes.is_complex(a.dtype) and not dtypes.is_complex(d):
    raise ValueError("jax.numpy.var does not yet support real dtype parameters when "
                     "computing the variance of an array of complex values. The semantics "
                     "of numpy.var seem unclear in this case. Please comment on "
                     "https://github.com/jax-ml/jax/issues/2283 if this behavior is "
                     "important to you.")
  exact = dtype is not None and not dtypes.is_inexact(d)  # JAX: computed in integers
  comp = d if exact else _upcast_f16(_util.to_inexact_dtype(d))
  if dtypes.is_complex(a.dtype):
    comp = _util.to_complex_dtype(comp)
  a = _util.convert(a, comp, a.weak_type)
  if mean is None:
    a_mean = _mean(a, axis, dtype=comp if exact else None, keepdims=True, where=where)
  else:
    a_mean = _util.convert(ensure_arraylike("var", mean), comp, False)
  centered = lax.sub(a, a_mean)
  if dtypes.is_complex(comp):
    centered = lax.real(lax.mul(centered, lax.conj(centered)))
  else:
    centered = lax.integer_pow(centered, 2)
  s = sum(centered, axis, keepdims=keepdims, where=where)
  n = lax.sub(_count(a, axis, keepdims, where, s.dtype), _util.lit(correction, s.dtype, True))
  out = lax.div(s, n)
  if exact:  # JAX's where(n > 0, out, nan): the weak default float
    out, nan = _util.promote_dtypes(out, np.nan)
    bad = _util.broadcast_to(lax.le(n, _util.lit(0, n.dtype, True)), out.shape)
    return lax.select(bad, _util.broadcast_to(nan, out.shape), out)
  if where is None and isinstance(correction, (int, float)):  # JAX: NaN without a positive
    if math.prod(a.shape[i] for i in canonicalize_axes(axis, a.ndim)) <= correction:  # count
      out = lax.full_like(out, np.nan)
  else:
    bad = _util.broadcast_to(lax.le(n, _util.lit(0, n.dtype, True)), out.shape)
    out = lax.select(bad, lax.full_like(out, np.nan), out)
  if dtype is not None or comp != _util.to_inexact_dtype(d):
    out = _util.convert(out, d)  # JAX: the result in dtype=, complex included
  return out


_mean = mean


@staged
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
  """Standard deviation over ``axis``: ``sqrt(var(...))``.

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
    correction: Array API name of ``ddof``; give one of the two.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.std(jnp.array([1.0, 2.0, 3.0, 4.0]))
    Array(1.11803399, dtype=float64)
    >>> jnp.std(jnp.array([1.0, 2.0, 3.0, 4.0]), ddof=1)
    Array(1.29099445, dtype=float64)
  """
  where = _check_where("std", where)
  if dtype is not None:
    dtype = _util.canonicalize_user_dtype(dtype, "std")
    if not dtypes.is_inexact(dtype):
      raise ValueError(f"dtype argument to jnp.std must be inexact; got {dtype}")
  _no_out("std", out)
  return lax.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction,
                      mean=mean))


def _arg_reduce(name, a, axis, keepdims):
  p, idt = _ARG_P[name], dtypes.default_int_dtype()
  if not keepdims:
    ax = _one_axis(a, axis, "biuf")  # one axis of a 1-D or N-D array: no normalisation
    if ax is not None and (ax != _ALL or a._value.ndim == 1):
      if _ctx.trace is not _EVAL:
        return p.bind(a, axes=(0 if ax == _ALL else ax,), index_dtype=idt)
      params = {"axes": (0 if ax == _ALL else ax,), "index_dtype": idt}
      out = p.eager(a, **params)
      _util.remember(name, a, axis, p, params)
      return out
  a = ensure_arraylike(name, a)
  if axis is None:
    if a.size == 0:
      raise ValueError(f"attempt to get {name} of an empty sequence")
    if a.ndim != 1:
      out = p.bind(lax.reshape(a, (a.size,)), axes=(0,), index_dtype=idt)
      return lax.reshape(out, (1,) * a.ndim) if keepdims else out
    axis = 0
  axis = canonicalize_axis(axis, a.ndim)
  if a.shape[axis] == 0:
    raise ValueError(f"attempt to get {name} of an empty sequence")
  out = p.bind(a, axes=(axis,), index_dtype=idt)
  return lax.expand_dims(out, (axis,)) if keepdims else out


def argmax(a, axis=None, out=None, keepdims=None):
  """Index of the maximum along ``axis`` (first occurrence; NaN counts as maximal).

  Args:
    a: input array (or array-like).
    axis: axis along which to search; ``None`` searches the flattened array.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the searched axis is kept with size 1.

  Returns:
    An integer array of indices.

  Examples:
    >>> jnp.argmax(jnp.array([[1, 5, 2], [7, 0, 7]]), axis=1)
    Array([1, 0], dtype=int64)
  """
  if out is None and not keepdims:
    r = _util.memo_run("argmax", a, axis)
    if r is not None:
      return r
  _no_out("argmax", out)
  return _arg_reduce("argmax", a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=None):
  """Index of the minimum along ``axis`` (first occurrence; NaN counts as minimal).

  Args:
    a: input array (or array-like).
    axis: axis along which to search; ``None`` searches the flattened array.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the searched axis is kept with size 1.

  Returns:
    An integer array of indices.

  Examples:
    >>> jnp.argmin(jnp.array([[1, 5, 2], [7, 0, 7]]), axis=1)
    Array([0, 1], dtype=int64)
  """
  if out is None and not keepdims:
    r = _util.memo_run("argmin", a, axis)
    if r is not None:
      return r
  _no_out("argmin", out)
  return _arg_reduce("argmin", a, axis, keepdims)


_ARG_P = {"argmax": lax.argmax_p, "argmin": lax.argmin_p}
_CUM_P = {"cumsum": lax.cumsum_p, "cumprod": lax.cumprod_p, "cummax": lax.cummax_p,
          "cummin": lax.cummin_p}
def _cumulative(name, lax_name, a, axis, dtype, fill_nan=None, reverse=False,
                promote_integers=False):
  if dtype is None and fill_nan is None and not promote_integers:
    ax = _one_axis(a, axis, "iufc")  # a scan along one axis: nothing to promote
    if ax is not None and (ax != _ALL or a._value.ndim == 1):
      p = _CUM_P[lax_name]
      if _ctx.trace is not _EVAL:
        return p.bind(a, axis=0 if ax == _ALL else ax, reverse=bool(reverse))
      params = {"axis": 0 if ax == _ALL else ax, "reverse": bool(reverse)}
      out = p.eager(a, **params)
      if name == lax_name and not reverse:
        _util.remember(name, a, axis, p, params)
      return out
  a = ensure_arraylike(name, a)
  if axis is None:
    a = a if a.ndim == 1 else lax.reshape(a, (a.size,))
    axis = 0
  axis = canonicalize_axis(axis, a.ndim)
  if fill_nan is not None and dtypes.is_inexact(a.dtype):
    a = lax.select(lax.ne(a, a), lax.full_like(a, fill_nan), a)
  if dtype is not None:
    to = _util.canonicalize_user_dtype(dtype, name)
  elif promote_integers or a.dtype == _BOOL:
    to = _promote_integer_dtype(a.dtype)
  else:
    to = a.dtype
  a = _util.convert(a, to, False)
  if a.shape[axis] == 0:
    return a
  if a.dtype == _BOOL and lax_name in ("cumsum", "cumprod"):  # explicit dtype=bool
    a = _util.convert(getattr(lax, lax_name)(_util.convert(a, dtypes.default_int_dtype()), axis,
                                             reverse), _BOOL)
    return a
  return getattr(lax, lax_name)(a, axis, reverse)


def cumsum(a, axis=None, dtype=None, out=None):
  """Cumulative sum along ``axis`` (flattened when ``axis`` is None).

  Args:
    a: input array (or array-like).
    axis: axis along which to operate; ``None`` operates on the flattened array.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    An array of the shape of ``a`` (1-d when ``axis`` is None).

  Examples:
    >>> jnp.cumsum(jnp.array([[1, 2], [3, 4]]), axis=0)
    Array([[1, 2],
           [4, 6]], dtype=int64)
  """
  if dtype is None and out is None:
    r = _util.memo_run("cumsum", a, axis)
    if r is not None:
      return r
  _no_out("cumsum", out)
  return _cumulative("cumsum", "cumsum", a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
  """Cumulative product along ``axis`` (flattened when ``axis`` is None).

  Args:
    a: input array (or array-like).
    axis: axis along which to operate; ``None`` operates on the flattened array.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    An array of the shape of ``a`` (1-d when ``axis`` is None).

  Examples:
    >>> jnp.cumprod(jnp.array([1, 2, 3, 4]))
    Array([ 1,  2,  6, 24], dtype=int64)
  """
  if dtype is None and out is None:
    r = _util.memo_run("cumprod", a, axis)
    if r is not None:
      return r
  _no_out("cumprod", out)
  return _cumulative("cumprod", "cumprod", a, axis, dtype)


def _cumulative_api(name, fn, x, axis, dtype, include_initial):
  x = _util.ensure_arraylike(name, x)
  if x.ndim == 0:
    raise ValueError(f"The input must be non-scalar to take a cumulative "
                     f"{name.split('_')[1]}, however a scalar value or scalar array was given.")
  if axis is None:
    if x.ndim > 1:
      raise ValueError(f"The input array has rank {x.ndim}, however axis was not set to an "
                       "explicit value. The axis argument is only optional for one-dimensional "
                       "arrays.")
    axis = 0
  axis = _util.canonicalize_axis(axis, x.ndim)
  out = fn(x, axis, _util.canonicalize_user_dtype(dtype))  # (JAX's check: unnamed)
  if include_initial:
    from nbjax.numpy import _creation, _manip
    shape = list(out.shape)
    shape[axis] = 1
    init = _creation.full(shape, 0 if fn is _cumsum_promoted else 1, dtype=out.dtype)
    out = _manip.concatenate([init, out], axis=axis)
  return out


def _cumsum_promoted(a, axis, dtype):
  return _cumulative("cumulative_sum", "cumsum", a, axis, dtype, promote_integers=True)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
  """Cumulative sum along ``axis`` (optional for 1-d input); ``include_initial`` prepends 0.
  Unlike ``cumsum``, narrow integers accumulate in the default int (as JAX).

  Args:
    x: input array (or array-like).
    axis: axis along which to accumulate (optional for 1-d input).
    dtype: optional dtype of the result (by default inferred from the inputs).
    include_initial: if True, prepend the identity 0 along ``axis``.

  Returns:
    An array of the shape of ``x`` (one longer along ``axis`` with ``include_initial``).

  Examples:
    >>> jnp.cumulative_sum(jnp.array([1, 2, 3]), include_initial=True)
    Array([0, 1, 3, 6], dtype=int64)
  """
  return _cumulative_api("cumulative_sum", _cumsum_promoted, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
  """Cumulative product along ``axis`` (optional for 1-d input); ``include_initial``
  prepends 1.

  Args:
    x: input array (or array-like).
    axis: axis along which to accumulate (optional for 1-d input).
    dtype: optional dtype of the result (by default inferred from the inputs).
    include_initial: if True, prepend the identity 1 along ``axis``.

  Returns:
    An array of the shape of ``x`` (one longer along ``axis`` with ``include_initial``).

  Examples:
    >>> jnp.cumulative_prod(jnp.array([1, 2, 3]), include_initial=True)
    Array([1, 1, 2, 6], dtype=int64)
  """
  return _cumulative_api("cumulative_prod", cumprod, x, axis, dtype, include_initial)


def nancumsum(a, axis=None, dtype=None, out=None):
  """``cumsum`` treating NaN as 0.

  Args:
    a: input array (or array-like).
    axis: axis along which to operate; ``None`` operates on the flattened array.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    An array of the shape of ``a`` (1-d when ``axis`` is None).

  Examples:
    >>> jnp.nancumsum(jnp.array([1.0, jnp.nan, 3.0]))
    Array([1., 1., 4.], dtype=float64)
  """
  _no_out("nancumsum", out)
  return _cumulative("nancumsum", "cumsum", a, axis, dtype, fill_nan=0)


def nancumprod(a, axis=None, dtype=None, out=None):
  """``cumprod`` treating NaN as 1.

  Args:
    a: input array (or array-like).
    axis: axis along which to operate; ``None`` operates on the flattened array.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    An array of the shape of ``a`` (1-d when ``axis`` is None).

  Examples:
    >>> jnp.nancumprod(jnp.array([2.0, jnp.nan, 3.0]))
    Array([2., 2., 6.], dtype=float64)
  """
  _no_out("nancumprod", out)
  return _cumulative("nancumprod", "cumprod", a, axis, dtype, fill_nan=1)


def _nan_fill(name, a, fill):
  a = ensure_arraylike(name, a)
  if not dtypes.is_inexact(a.dtype):
    return a, None
  nan = lax.ne(a, a)
  return lax.select(nan, lax.full_like(a, fill), a), nan


@staged
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
  """``sum`` treating NaN as 0.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nansum(jnp.array([1.0, jnp.nan, 3.0]))
    Array(4., dtype=float64)
  """
  dtype = _util.canonicalize_user_dtype(dtype, "nanprod")  # (JAX's name)
  _no_out("sum", out)  # (JAX's names the reduction it passes out= to)
  where = _check_where("nansum", where)
  a, _ = _nan_fill("nansum", a, 0)
  return sum(a, axis, dtype, None, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
  """``prod`` treating NaN as 1.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanprod(jnp.array([2.0, jnp.nan, 3.0]))
    Array(6., dtype=float64)
  """
  dtype = _util.canonicalize_user_dtype(dtype, "nanprod")
  _no_out("prod", out)
  where = _check_where("nanprod", where)
  a, _ = _nan_fill("nanprod", a, 1)
  return prod(a, axis, dtype, None, keepdims, initial, where)


@staged
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
  """``mean`` ignoring NaNs (NaN where every element is NaN).

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanmean(jnp.array([1.0, jnp.nan, 3.0]))
    Array(2., dtype=float64)
  """
  _no_out("nanmean", out)
  a = ensure_arraylike("nanmean", a)
  where = _check_where("nanmean", where)
  if not dtypes.is_inexact(a.dtype):
    return mean(a, axis, dtype, None, keepdims, where=where)
  dtype = _util.canonicalize_user_dtype(dtype, "mean")
  filled, nan = _nan_fill("nanmean", a, 0)
  keep = lax.bitwise_not(nan)
  if where is not None:
    _where_shape(where, a)
    keep = lax.bitwise_and(keep, _util.broadcast_to(_util.convert(where, _BOOL), a.shape))
  s = sum(filled, axis, dtype=dtype, keepdims=keepdims, where=keep)
  n = sum(keep, axis, dtype=s.dtype, keepdims=keepdims)
  return lax.div(s, n)


def _nan_extreme(kind, name, a, axis, keepdims, initial, where):
  a = ensure_arraylike(name, a)
  if not dtypes.is_inexact(a.dtype):
    return _reduce(kind, name, a, axis, None, keepdims, initial, where)
  where = _check_where(name, where)
  filled, nan = _nan_fill(name, a, -np.inf if kind == "max" else np.inf)
  out = _reduce(kind, name, filled, axis, None, keepdims, initial, where)
  if initial is not None:  # JAX: an initial value gives the result of an all-NaN group
    return out
  all_nan = all(nan, axis=axis, keepdims=keepdims)
  return lax.select(all_nan, lax.full_like(out, np.nan), out)


@staged
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
  """``max`` ignoring NaNs.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanmax(jnp.array([1.0, jnp.nan, 3.0]))
    Array(3., dtype=float64)
  """
  _no_out("max", out)
  return _nan_extreme("max", "nanmax", a, axis, keepdims, initial, where)


@staged
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
  """``min`` ignoring NaNs.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.
    initial: optional starting value of the reduction.
    where: optional boolean mask (broadcast to ``a``) of the elements to include.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.nanmin(jnp.array([1.0, jnp.nan, 3.0]))
    Array(1., dtype=float64)
  """
  _no_out("min", out)
  return _nan_extreme("min", "nanmin", a, axis, keepdims, initial, where)


def count_nonzero(a, axis=None, keepdims=False):
  """Number of non-zero elements over ``axis``.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    keepdims: if True, the reduced axes are kept in the result with size 1.

  Returns:
    An integer array of the reduced shape.

  Examples:
    >>> jnp.count_nonzero(jnp.array([[0, 1, 2], [3, 0, 0]]), axis=1)
    Array([2, 1], dtype=int64)
  """
  if type(a) is Array and _ctx.trace is _EVAL and not keepdims and (
      axis is None or type(axis) is int) and a._value.dtype.kind in "biufc":
    v = a._value  # eagerly: NumPy's count (NaN counts, as != 0; complex by either part)
    if axis is None or -v.ndim <= axis < v.ndim:
      return Array._new(np.asarray(np.count_nonzero(v, axis), dtypes.default_int_dtype()))
  return _count_nonzero(a, axis, keepdims)


@staged
def _count_nonzero(a, axis, keepdims):
  a = ensure_arraylike("count_nonzero", a)
  return sum(_to_bool(a), axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


@staged
def ptp(a, axis=None, out=None, keepdims=False):
  """Range (max - min) over ``axis``.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    out: unsupported (JAX arrays are immutable); must be ``None``.
    keepdims: if True, the reduced axes are kept in the result with size 1.

  Returns:
    An array of the reduced shape.

  Examples:
    >>> jnp.ptp(jnp.array([[1, 5], [7, 2]]), axis=1)
    Array([4, 5], dtype=int64)
  """
  _no_out("ptp", out)
  return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


@staged
def average(a, axis=None, weights=None, returned=False, keepdims=False):
  """Weighted average over ``axis``.

  Args:
    a: input array (or array-like).
    axis: axis or tuple of axes to reduce over; ``None`` (default) reduces over all axes.
    weights: optional weights, of the shape of ``a`` or 1-d along ``axis``.
    returned: if True, also return the sum of the weights.
    keepdims: if True, the reduced axes are kept in the result with size 1.

  Returns:
    The average (and, with ``returned``, the sum of weights).

  Examples:
    >>> jnp.average(jnp.array([1.0, 2.0, 3.0]), weights=jnp.array([3.0, 1.0, 0.0]))
    Array(1.25, dtype=float64)
  """
  a = ensure_arraylike("average", a)
  if weights is None:
    avg = mean(a, axis, keepdims=keepdims)
    wsum = _count(a, axis, keepdims, None, avg.dtype)
  else:
    w = as_array(weights)
    a, w = _util.promote_dtypes_inexact(a, w)
    if w.shape != a.shape:
      if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
      axes = tuple(canonicalize_axis(ax, a.ndim)
                   for ax in (axis if isinstance(axis, (tuple, list)) else (axis,)))
      if w.shape != tuple(a.shape[ax] for ax in axes):
        raise ValueError("Shape of weights must be consistent with shape of a along specified "
                         "axis.")
      # weights over several axes (in ``axis``'s order), as JAX: put each weight axis on its
      # array axis and broadcast
      w = lax.broadcast_in_dim(lax.transpose(w, tuple(np.argsort(axes))), a.shape,
                               tuple(sorted(axes)))
    wsum = sum(w, axis, keepdims=keepdims)
    avg = lax.div(sum(lax.mul(a, w), axis, keepdims=keepdims), wsum)
  if returned:
    if wsum.shape != avg.shape:
      wsum = _util.broadcast_to(wsum, avg.shape)
    return avg, _util.convert(wsum, avg.dtype)
  return avg
