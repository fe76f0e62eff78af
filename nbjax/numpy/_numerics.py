"""Numerical routines of ``nbjax.numpy``: vector calculus, polynomials, interpolation,
integer and floating-point number theory, convolutions, special functions and windows.

Pipeline position: NumPy-signature functions built only from other ``nbjax.numpy``
functions and ``lax`` primitives (slices, pads, gathers, dots, cumulative sums, selects),
so they run eagerly and under every transformation. Loops here run over static sizes only:
polynomial degrees (Horner, Clenshaw), a fixed number of Euclid steps for the dtype's bit
width (no ``while_loop``), the three factors of an exact power-of-two scaling.
"""
from __future__ import annotations

import functools

import numpy as np

from kernels import special as _special_kernels
from nbjax.eager_cache import staged
from nbjax import core, dtypes, lax
from nbjax.array import Array
from nbjax.core import _ctx, eval_trace as _EVAL
from nbjax.custom_derivatives import custom_jvp
from nbjax.numpy import _util
from nbjax.numpy._creation import arange, asarray, eye, full, ones, zeros, zeros_like
from nbjax.numpy._dot import dot, matmul
from nbjax.numpy._indexing import take, trace
from nbjax.numpy._manip import (atleast_1d, clip, concatenate, flip, moveaxis, searchsorted,
                                stack, where)
from nbjax.numpy._reductions import argmax, cumsum, sum as _sum
from nbjax.numpy._ufuncs import (abs as _abs, conj, copysign, cos, exp, floor, floor_divide, isfinite,
                                 isinf, log2, nextafter, remainder, sqrt, trunc)
from nbjax.numpy._util import (canonicalize_axis, check_arraylike, convert, ensure_arraylike,
                               promote_dtypes, promote_dtypes_inexact)

__all__ = ["bartlett", "blackman", "convolve", "correlate", "cross", "frexp", "from_dlpack",
           "fromfunction", "gcd", "gradient", "hamming", "hanning", "i0", "interp", "kaiser",
           "lcm", "ldexp", "modf", "piecewise", "poly", "polyadd", "polyder", "polyint",
           "polymul", "polysub", "polyval", "spacing", "trapezoid", "unwrap", "vander"]

_F32 = np.dtype(np.float32)


def _const(a):
  """A static NumPy array as a (non-weak) constant."""
  return Array._new(np.asarray(a))


def _sl(x, start, stop, axis):
  return lax.slice_in_dim(x, start, stop, axis=axis)


def _diff(x, axis):
  n = x.shape[axis]
  return _sl(x, 1, n, axis) - _sl(x, 0, max(n - 1, 0), axis)


def _along(v, axis, nd):
  """A 1-d ``v`` shaped to broadcast along ``axis`` of an ``nd``-d array."""
  return lax.reshape(v, tuple(v.shape[0] if i == axis else 1 for i in range(nd)))

# ----------------------------------------------------------------- vectors and calculus


@staged
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
  """Cross product of 2- or 3-vectors along the given axes (broadcasting the rest).

  Args:
    a: first array of vectors.
    b: second array of vectors.
    axisa: axis of ``a`` holding the vectors.
    axisb: axis of ``b`` holding the vectors.
    axisc: axis of the result holding the vectors.
    axis: if given, overrides ``axisa``, ``axisb`` and ``axisc``.

  Returns:
    The cross products (scalars for 2-vectors).

  Examples:
    >>> jnp.cross(jnp.array([1, 0, 0]), jnp.array([0, 1, 0]))
    Array([0, 0, 1], dtype=int64)
  """
  a, b = ensure_arraylike("cross", a, b)
  if axis is not None:
    axisa = axisb = axisc = axis
  a, b = promote_dtypes(moveaxis(a, axisa, -1), moveaxis(b, axisb, -1))
  if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
    raise ValueError("Dimension must be either 2 or 3 for cross product")
  a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
  if a.shape[-1] == 2 and b.shape[-1] == 2:
    return a0 * b1 - a1 * b0
  a2 = a[..., 2] if a.shape[-1] == 3 else None
  b2 = b[..., 2] if b.shape[-1] == 3 else None
  c0 = (a1 * b2 if b2 is not None else 0) - (a2 * b1 if a2 is not None else 0)
  c1 = (a2 * b0 if a2 is not None else 0) - (a0 * b2 if b2 is not None else 0)
  c2 = a0 * b1 - a1 * b0
  c = _util.broadcast_arrays(*promote_dtypes(c0, c1, c2))
  return moveaxis(stack(c), 0, axisc)


@staged
def vander(x, N=None, increasing=False):
  """Vandermonde matrix: columns are powers of the 1-d ``x`` (decreasing by default).

  Args:
    x: 1-d input array.
    N: number of columns (default ``len(x)``).
    increasing: if True, powers increase from left to right.

  Returns:
    A 2-d array of shape ``(len(x), N)``.

  Examples:
    >>> jnp.vander(jnp.array([1, 2, 3]), 3)
    Array([[1, 1, 1],
           [4, 2, 1],
           [9, 3, 1]], dtype=int64)
  """
  x = ensure_arraylike("vander", x)
  if x.ndim != 1:
    raise ValueError("x must be a one-dimensional array")
  N = x.shape[0] if N is None else _util.index(N, "N")
  if N < 0:
    raise ValueError("N must be nonnegative")
  if x.dtype == np.bool_:  # (JAX builds the powers with iota, which refuses bool)
    raise TypeError("iota does not accept dtype bool. Accepted dtypes are subtypes of integer, "
                    "floating, complexfloating.")
  n = x.shape[0]
  cols = [full((n, min(N, 1)), 1, x.dtype)]
  if N > 1:
    cols.append(lax.cumprod(lax.broadcast_in_dim(x, (n, N - 1), (0,)), axis=1))
  out = concatenate(cols, 1)
  return out if increasing else flip(out, 1)


@staged
def trapezoid(y, x=None, dx=1.0, axis=-1):
  """Integral of ``y`` along ``axis`` by the trapezoidal rule (sample points ``x`` or
  uniform spacing ``dx``).

  Args:
    y: sample values.
    x: optional sample points (default: spacing ``dx``).
    dx: spacing of the sample points when ``x`` is None.
    axis: the axis to integrate along.

  Returns:
    An array of the shape of ``y`` without ``axis``.

  Examples:
    >>> jnp.trapezoid(jnp.array([1.0, 2.0, 3.0]))
    Array(4., dtype=float64)
    >>> jnp.trapezoid(jnp.array([1.0, 2.0, 3.0]), dx=0.5)
    Array(2., dtype=float64)
  """
  # jitted as JAX's (static axis): XLA fuses the product into the sum, so narrow floats
  # (bfloat16, float16) round as JAX's, eagerly too
  return _trapezoid_jit()(y, x, dx, axis=axis)


@functools.cache
def _trapezoid_jit():
  from nbjax.interpreters.pjit import jit
  return jit(_trapezoid, static_argnames=("axis",))


def _trapezoid(y, x, dx, axis):
  if x is None:
    y = ensure_arraylike("trapezoid", y)
    y, = promote_dtypes_inexact(y)
    d = dx
    if _util.ndim(dx) > 0:  # JAX: an array dx aligns with y's leading axes, axis last
      d = asarray(dx)
      d = lax.expand_dims(d, tuple(range(y.ndim - d.ndim)))
      d = moveaxis(d, axis, -1)
  else:
    y, x = ensure_arraylike("trapezoid", y, x)
    y, x = promote_dtypes_inexact(y, x)
    d = _diff(x, 0) if x.ndim == 1 else moveaxis(_diff(x, canonicalize_axis(axis, x.ndim)),
                                                 axis, -1)
  y = moveaxis(y, axis, -1)
  n = y.shape[-1]
  return 0.5 * _sum(d * (_sl(y, 1, n, y.ndim - 1) + _sl(y, 0, max(n - 1, 0), y.ndim - 1)), -1)


def gradient(f, *varargs, axis=None, edge_order=None):
  """Second-order central differences in the interior, one-sided first- or second-order
  (``edge_order``) differences at the edges; spacing a scalar or 1-d coordinates per axis.

  Args:
    f: input array.
    varargs: optional spacing: one scalar for all axes, or a scalar or 1-d coordinates per
      axis.
    axis: axis or axes to differentiate along (``None``: all).
    edge_order: order (1 or 2) of the one-sided differences at the edges.

  Returns:
    An array (or a list of arrays, one per axis) of the shape of ``f``.

  Examples:
    >>> jnp.gradient(jnp.array([1.0, 4.0, 9.0, 16.0]))
    Array([3., 4., 6., 7.], dtype=float64)
  """
  return _gradient_jit()(f, *varargs, axis=axis, edge_order=edge_order)


@functools.cache
def _gradient_jit():
  # jitted as JAX's (static axis and edge_order): eager values are the compiled ones, JAX's
  # bits (XLA's fused multiply-adds), and one dispatch instead of dozens of eager operations
  from nbjax.interpreters.pjit import jit
  return jit(_gradient, static_argnames=("axis", "edge_order"))


def _gradient(f, *varargs, axis=None, edge_order=None):
  f = ensure_arraylike("gradient", f)
  check_arraylike("gradient", *varargs)
  f, *spacing = promote_dtypes_inexact(f, *varargs)
  order = 1 if edge_order is None else edge_order
  if order not in (1, 2):
    raise ValueError("'edge_order' greater than 2 not supported")
  axes = _util.canonicalize_axes(axis, f.ndim)
  if not axes:
    return []
  if min(f.shape[ax] for ax in axes) < order + 1:
    raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                     f"{order + 1} elements are required.")
  if not spacing:
    spacing = [1.0] * len(axes)
  elif len(spacing) == 1:
    spacing = spacing * len(axes)
  elif len(spacing) != len(axes):
    raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
  out = []
  for ax, h in zip(axes, spacing):
    n = f.shape[ax]
    s = lambda i, j, ax=ax: _sl(f, i, j, ax)  # noqa: E731
    if _util.ndim(h) == 0:
      mid = (s(2, n) - s(0, n - 2)) * 0.5 / h
      if order == 1:
        lo, hi = (s(1, 2) - s(0, 1)) / h, (s(n - 1, n) - s(n - 2, n - 1)) / h
      else:
        lo = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / h
        hi = (0.5 * s(n - 3, n - 2) - 2.0 * s(n - 2, n - 1) + 1.5 * s(n - 1, n)) / h
    else:
      if h.ndim != 1:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
      if h.shape[0] != n:
        raise ValueError("Spacing arrays must have the same length as the dimension along "
                         "which the gradient is calculated.")
      dx = _along(_diff(h, 0), ax, f.ndim)
      d = lambda i, j: _sl(dx, i, j, ax)  # noqa: E731
      d1, d2 = d(0, n - 2), d(1, n - 1)
      mid = (-d2 / (d1 * (d1 + d2)) * s(0, n - 2) + (d2 - d1) / (d1 * d2) * s(1, n - 1)
             + d1 / (d2 * (d1 + d2)) * s(2, n))
      if order == 1:
        lo = (s(1, 2) - s(0, 1)) / d(0, 1)
        hi = (s(n - 1, n) - s(n - 2, n - 1)) / d(n - 2, n - 1)
      else:
        d1, d2 = d(0, 1), d(1, 2)
        lo = (-(2.0 * d1 + d2) / (d1 * (d1 + d2)) * s(0, 1) + (d1 + d2) / (d1 * d2) * s(1, 2)
              - d1 / (d2 * (d1 + d2)) * s(2, 3))
        d1, d2 = d(n - 3, n - 2), d(n - 2, n - 1)
        hi = (d2 / (d1 * (d1 + d2)) * s(n - 3, n - 2) - (d2 + d1) / (d1 * d2) * s(n - 2, n - 1)
              + (2.0 * d2 + d1) / (d2 * (d1 + d2)) * s(n - 1, n))
    out.append(concatenate(promote_dtypes(lo, mid, hi), ax))
  return out[0] if len(axes) == 1 else out


_gradient.__name__ = _gradient.__qualname__ = "gradient"  # (the jit equation's name, as JAX's)


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
  """Unwrap phases: replace jumps larger than ``discont`` by their ``period`` complement.

  Args:
    p: input phases.
    discont: largest jump left alone (default ``period / 2``).
    axis: the axis to unwrap along.
    period: the period of the phases (default ``2 * pi``).

  Returns:
    An array of the shape of ``p``.

  Examples:
    >>> jnp.unwrap(jnp.array([0.0, 3.0, 6.5, 0.2]))
    Array([0.        , 3.        , 0.21681469, 0.2       ], dtype=float64)
  """
  p = ensure_arraylike("unwrap", p)
  p, period = promote_dtypes(p, period)  # JAX: as p and period promote (ints: default float)
  if dtypes.is_complex(p.dtype):
    raise ValueError("jnp.unwrap does not support complex inputs.")
  axis = canonicalize_axis(axis, p.ndim)
  n = p.shape[axis]
  if n == 0:
    return p
  discont = period / 2 if discont is None else discont
  half = floor_divide(period, 2) if dtypes.is_int(p.dtype) else period / 2
  dd = _diff(p, axis)
  ddmod = remainder(dd + half, period) - half
  ddmod = where((ddmod == -half) & (dd > 0), half, ddmod)
  fix = where(_abs(dd) < discont, 0, ddmod - dd)
  return concatenate([_sl(p, 0, 1, axis), _sl(p, 1, n, axis) + cumsum(fix, axis)], axis)


@staged
def interp(x, xp, fp, left=None, right=None, period=None):
  """Piecewise-linear interpolant of the points ``(xp, fp)`` evaluated at ``x``
  (``left``/``right`` values or ``'extrapolate'``; optional ``period``).

  Args:
    x: points at which to evaluate.
    xp: increasing 1-d sample coordinates.
    fp: 1-d sample values.
    left: value for ``x < xp[0]`` (default ``fp[0]``; ``'extrapolate'`` extends the first
      segment).
    right: value for ``x > xp[-1]`` (default ``fp[-1]``; ``'extrapolate'`` extends the last
      segment).
    period: optional period of the coordinates.

  Returns:
    An array of the shape of ``x``.

  Examples:
    >>> jnp.interp(jnp.array([0.5, 5.0]), jnp.array([0.0, 1.0]), jnp.array([0.0, 10.0]))
    Array([ 5., 10.], dtype=float64)
  """
  x, xp, fp = ensure_arraylike("interp", x, xp, fp)
  if xp.shape != fp.shape or xp.ndim != 1:
    raise ValueError("xp and fp must be one-dimensional arrays of equal size")
  if dtypes.is_complex(dtypes.result_type(x, xp)):
    raise ValueError("jnp.interp: complex x values not supported.")
  x, xp = promote_dtypes_inexact(x, xp)
  fp, = promote_dtypes_inexact(fp)
  ext = []
  for name, v in (("left", left), ("right", right)):
    if isinstance(v, str) and v != "extrapolate":
      raise ValueError(f"the only valid string value of `{name}` is 'extrapolate', but got: {v!r}")
    ext.append(isinstance(v, str))
  if period is not None:
    if _util.ndim(period) != 0:
      raise ValueError(f"period must be a scalar; got {period}")
    period = _abs(period)
    x, xp = remainder(x, period), remainder(xp, period)
    xp, fp = lax.sort_key_val(xp, fp)
    xp = concatenate([xp[-1:] - period, xp, xp[:1] + period])
    fp = concatenate([fp[-1:], fp, fp[:1]])
  n = xp.shape[0]
  i = clip(searchsorted(xp, x, side="right"), 1, n - 1)
  x0, x1 = take(xp, i - 1, mode="clip"), take(xp, i, mode="clip")
  f0, f1 = take(fp, i - 1, mode="clip"), take(fp, i, mode="clip")
  dx = x1 - x0
  tiny = _abs(dx) <= np.spacing(np.finfo(xp.dtype).eps)  # no NaN gradients at repeated xp
  f = where(tiny, f0, f0 + ((x - x0) / where(tiny, 1, dx)) * (f1 - f0))
  if period is None:
    if not ext[0]:
      f = where(x < xp[0], fp[0] if left is None else left, f)
    if not ext[1]:
      f = where(x > xp[-1], fp[-1] if right is None else right, f)
  return f

# ----------------------------------------------------------------- polynomials


@staged
def polyval(p, x, *, unroll=16):
  """Value at ``x`` of the polynomial with coefficients ``p`` (highest degree first), by
  Horner's rule; ``unroll`` is accepted for JAX compatibility.

  Args:
    p: polynomial coefficients, highest power first.
    x: points at which to evaluate.
    unroll: accepted for JAX compatibility (loop unrolling of the evaluation).

  Returns:
    An array of the broadcast shape of ``x``.

  Examples:
    >>> jnp.polyval(jnp.array([1, 0, -1]), jnp.array([0, 2, 3]))
    Array([-1,  3,  8], dtype=int64)
  """
  del unroll
  p, x = ensure_arraylike("polyval", p, x)
  p, x = promote_dtypes(p, x)
  shape = _util.broadcast_shapes(p.shape[1:], x.shape)
  y = full(shape, 0, x.dtype)
  for i in range(p.shape[0]):
    y = y * x + p[i]
  return y


def polyadd(a1, a2):
  """Sum of two polynomials (coefficient arrays aligned at the constant term).

  Args:
    a1: first input array (or array-like).
    a2: second input array (or array-like).

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.polyadd(jnp.array([1, 2]), jnp.array([1, 0, 0]))
    Array([1, 1, 2], dtype=int64)
  """
  a1, a2 = promote_dtypes(*ensure_arraylike("polyadd", a1, a2))
  if a2.shape[0] <= a1.shape[0]:
    return a1.at[-a2.shape[0]:].add(a2)
  return a2.at[-a1.shape[0]:].add(a1)


def polysub(a1, a2):
  """Difference of two polynomials.

  Args:
    a1: first input array (or array-like).
    a2: second input array (or array-like).

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.polysub(jnp.array([1, 2]), jnp.array([1, 0, 0]))
    Array([-1,  1,  2], dtype=int64)
  """
  a1, a2 = promote_dtypes(*ensure_arraylike("polysub", a1, a2))
  return polyadd(a1, -a2)


def _trim_front(a):
  v = np.asarray(_util.concrete(a, "jnp.polymul with trim_leading_zeros=True"))
  nz = np.flatnonzero(v)
  return a[int(nz[0]) if nz.size else v.shape[0]:]


def polymul(a1, a2, *, trim_leading_zeros=False):
  """Product of two polynomials (the full convolution of their coefficients).

  Args:
    a1: first input array (or array-like).
    a2: second input array (or array-like).
    trim_leading_zeros: if True, strip leading zeros of the result (needs concrete input).

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.polymul(jnp.array([1, 1]), jnp.array([1, -1]))
    Array([ 1.,  0., -1.], dtype=float64)
  """
  a1, a2 = promote_dtypes_inexact(*ensure_arraylike("polymul", a1, a2))
  if trim_leading_zeros and (a1.shape[0] > 1 or a2.shape[0] > 1):
    a1, a2 = _trim_front(a1), _trim_front(a2)
  if a1.shape[0] == 0:
    a1 = zeros((1,), a2.dtype)
  if a2.shape[0] == 0:
    a2 = zeros((1,), a1.dtype)
  return convolve(a1, a2, mode="full")


def polyder(p, m=1):
  """Coefficients of the ``m``-th derivative of a polynomial.

  Args:
    p: polynomial coefficients, highest power first.
    m: order of the derivative.

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.polyder(jnp.array([1, 2, 3]))
    Array([2., 2.], dtype=float64)
  """
  p = ensure_arraylike("polyder", p)
  m = _util.index(m, "'m' argument of jnp.polyder")
  p, = promote_dtypes_inexact(p)
  if m < 0:
    raise ValueError("Order of derivative must be positive")
  if m == 0:
    return p
  n = p.shape[0]
  coeff = np.prod(np.arange(m, n, dtype=float)[None] - np.arange(m)[:, None], 0)[::-1]
  return p[:-m] * _const(coeff.astype(p.dtype))


def polyint(p, m=1, k=None):
  """Coefficients of the ``m``-th antiderivative with integration constants ``k``.

  Args:
    p: polynomial coefficients, highest power first.
    m: order of the antiderivative.
    k: integration constants (a scalar or ``m`` values; default 0).

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.polyint(jnp.array([3.0, 2.0, 1.0]))
    Array([1., 1., 1., 0.], dtype=float64)
  """
  m = _util.index(m, "'m' argument of jnp.polyint")
  k = 0 if k is None else k
  p, k = promote_dtypes_inexact(*ensure_arraylike("polyint", p, k))
  if m < 0:
    raise ValueError("Order of integral must be positive (see polyder)")
  k = atleast_1d(k)
  if k.shape[0] == 1:
    k = _util.broadcast_to(k, (m,))
  if k.shape != (m,):
    raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
  if m == 0:
    return p
  grid = np.arange(p.shape[0] + m, dtype=float)[None] - np.arange(m)[:, None]
  coeff = np.prod(np.maximum(1, grid), 0)[::-1]
  return concatenate([p, k]) / _const(coeff.astype(p.dtype))


def poly(seq_of_zeros):
  """Coefficients of the monic polynomial with the given roots (or, for a square matrix,
  its characteristic polynomial; complex as in JAX, where it comes from ``eigvals``).

  Args:
    seq_of_zeros: 1-d array of roots, or a square matrix.

  Returns:
    A 1-d array of polynomial coefficients, highest power first.

  Examples:
    >>> jnp.poly(jnp.array([1.0, 2.0]))
    Array([ 1., -3.,  2.], dtype=float64)
  """
  z = ensure_arraylike("poly", seq_of_zeros)
  z, = promote_dtypes_inexact(z)
  z = atleast_1d(z)
  sh = z.shape
  if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
    n = sh[0]  # Faddeev-LeVerrier: M_k = A M_{k-1} + c_{k-1} I, c_k = -tr(A M_k) / k
    coeffs, am, ident = [_util.lit(1, z.dtype)], zeros(sh, z.dtype), eye(n, dtype=z.dtype)
    for k in range(1, n + 1):
      am = matmul(z, am + coeffs[-1] * ident)
      coeffs.append(-trace(am) / k)
    return convert(stack(coeffs), _util.to_complex_dtype(z.dtype))
  if z.ndim != 1:
    raise ValueError("input must be 1d or non-empty square 2d array.")
  a = ones((1,) if sh[0] else (), z.dtype)
  for i in range(sh[0]):
    a = concatenate([a, zeros((1,), z.dtype)]) - concatenate([zeros((1,), z.dtype), a * z[i]])
  return a

# ----------------------------------------------------------------- convolutions


def _conv(name, a, v, mode, precision, preferred_element_type):
  a, v = ensure_arraylike(name, a, v)
  if a.ndim != 1 or v.ndim != 1:
    raise ValueError(f"{name}() only support 1-dimensional inputs.")
  a, v = (promote_dtypes_inexact(a, v) if preferred_element_type is None
          else promote_dtypes(a, v))
  if a.shape[0] == 0 or v.shape[0] == 0:
    raise ValueError(f"{name}: inputs cannot be empty, got shapes {a.shape} and {v.shape}.")
  reverse = False
  if name == "correlate":
    v = conj(v)
    if a.shape[0] < v.shape[0]:
      a, v, reverse = v, a, True
  else:
    if a.shape[0] < v.shape[0]:
      a, v = v, a
    v = flip(v)
  m = v.shape[0]
  pads = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}
  if mode not in pads:
    raise ValueError("mode must be one of ['full', 'same', 'valid']")
  a = lax.pad(a, _util.lit(0, a.dtype), [(*pads[mode], 0)])
  n = a.shape[0] - m + 1
  idx = np.arange(n)[:, None] + np.arange(m)
  windows = take(a, _const(idx.astype(dtypes.default_int_dtype())), mode="clip")  # (in bounds)
  out = dot(windows, v, precision=precision, preferred_element_type=preferred_element_type)
  return flip(out) if reverse else out


_CONV_NP = frozenset(map(np.dtype, (np.float32, np.float64, np.complex64, np.complex128)))


def _conv_eager(np_fn):
  """Eagerly, ``convolve``/``correlate`` of two 1-d Arrays of one NumPy float or complex
  dtype (no ``preferred_element_type``) are NumPy's (the same sums of products, in its loop:
  10^6 float32 by 5 taps 18.8 -> ~0.6 ms, where the composite builds the (n, 5) windows);
  anything else the staged composite."""
  def wrap(general):
    @functools.wraps(general)
    def f(a, v, mode=_DEFAULT_MODE[np_fn], *, precision=None, preferred_element_type=None):
      if type(a) is Array and type(v) is Array and preferred_element_type is None and \
          _ctx.trace is _EVAL and not core.placement[0] and a.ndim == v.ndim == 1 and \
          a.size and v.size and \
          a.dtype == v.dtype and a.dtype in _CONV_NP and mode in ("full", "same", "valid") \
          and np.isfinite(a._value).all() and np.isfinite(v._value).all():
        # (an inf or NaN: the composite, as XLA, also multiplies the padding's zeros by it,
        # where NumPy skips those products, and complex infinities multiply as XLA's)
        return Array._new(np_fn(a._value, v._value, mode), a._weak and v._weak)
      return general(a, v, mode, precision=precision,
                     preferred_element_type=preferred_element_type)
    return f
  return wrap


_DEFAULT_MODE = {np.convolve: "full", np.correlate: "valid"}


@_conv_eager(np.convolve)
@staged
def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
  """Discrete linear convolution of two 1-d arrays (mode 'full', 'same' or 'valid').

  Args:
    a: first 1-d array.
    v: second 1-d array.
    mode: ``'full'`` (default), ``'same'`` or ``'valid'``: the length of the output.
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.convolve(jnp.array([1, 2, 3]), jnp.array([0, 1, 0.5]))
    Array([0. , 1. , 2.5, 4. , 1.5], dtype=float64)
  """
  return _conv("convolve", a, v, mode, precision, preferred_element_type)


@_conv_eager(np.correlate)
@staged
def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
  """Cross-correlation ``c[k] = sum_n a[n + k] * conj(v[n])`` of two 1-d arrays.

  Args:
    a: first 1-d array.
    v: second 1-d array.
    mode: ``'valid'`` (default), ``'same'`` or ``'full'``: the length of the output.
    precision: optional ``lax.Precision`` (or pair) of the underlying dot computation.
    preferred_element_type: optional dtype to accumulate and return the result in.

  Returns:
    A 1-d array.

  Examples:
    >>> jnp.correlate(jnp.array([1, 2, 3]), jnp.array([0, 1, 0.5]), mode='full')
    Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float64)
  """
  return _conv("correlate", a, v, mode, precision, preferred_element_type)

# ----------------------------------------------------------------- integers


def _int_args(name, x1, x2):
  x1, x2 = _util.promote_args(name, x1, x2)
  if not dtypes.is_int(x1.dtype):  # bool too, as JAX
    raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
  return _util.broadcast_arrays(_abs(x1), _abs(x2))


def _gcd(a, b):
  # Euclid's worst case (consecutive Fibonacci numbers) takes < 1.45 steps per bit.
  for _ in range(np.iinfo(a.dtype).bits * 3 // 2 + 2):
    nz = b != 0
    a, b = where(nz, b, a), where(nz, lax.rem(a, where(nz, b, 1)), 0)
  return a


def gcd(x1, x2, /):
  """Elementwise greatest common divisor of ``|x1|`` and ``|x2|``.

  Args:
    x1: first input array (or array-like).
    x2: second input array (or array-like).

  Returns:
    An integer array of the broadcast shape.

  Examples:
    >>> jnp.gcd(jnp.array([12, 18]), 8)
    Array([4, 2], dtype=int64)
  """
  return _gcd(*_int_args("gcd", x1, x2))


def lcm(x1, x2, /):
  """Elementwise least common multiple of ``|x1|`` and ``|x2|``.

  Args:
    x1: first input array (or array-like).
    x2: second input array (or array-like).

  Returns:
    An integer array of the broadcast shape.

  Examples:
    >>> jnp.lcm(jnp.array([4, 6]), 10)
    Array([20, 30], dtype=int64)
  """
  x1, x2 = _int_args("lcm", x1, x2)
  d = _gcd(x1, x2)
  zero = d == 0
  return where(zero, 0, x1 * floor_divide(x2, where(zero, 1, d)))

# ----------------------------------------------------------------- floating point


def _compute_dtype(x):
  """Half-precision inputs compute in float32 (exact for these routines)."""
  return convert(x, _F32) if x.dtype.itemsize < 4 else x


def _scale2(x, k):
  """``x * 2**k`` for integer-valued float ``k``, rounded once: three exact power-of-two
  factors keep every intermediate normal when the result is."""
  fi = np.finfo(x.dtype)
  lim = min(fi.maxexp - 1, -fi.minexp) - 2
  k = clip(k, -3 * lim, 3 * lim)
  a = floor(k / 3)
  b = floor((k - a) / 2)
  for e in (a, b, k - a - b):
    x = x * lax.pow(_util.lit(2, x.dtype, True), e)
  return x


def frexp(x, /):
  """Mantissa in ``[0.5, 1)`` (signed) and int32 exponent with ``x = m * 2**e``; zeros,
  infinities and NaN give ``(x, 0)``.

  Args:
    x: input array (or array-like).

  Returns:
    A tuple ``(mantissa, exponent)`` of arrays.

  Examples:
    >>> jnp.frexp(jnp.array([8.0, 0.75]))
    (Array([0.5 , 0.75], dtype=float64), Array([4, 0], dtype=int32))
  """
  x = ensure_arraylike("frexp", x)
  x, = promote_dtypes_inexact(x)
  if dtypes.is_complex(x.dtype):
    raise TypeError("frexp does not support complex-valued inputs")
  w = _compute_dtype(x)
  ok = isfinite(w) & (w != 0)
  ws = where(ok, w, 1)
  fi = np.finfo(w.dtype)
  sub = _abs(ws) < fi.tiny  # subnormals scaled up first (log flushes them, as XLA's)
  ws = where(sub, ws * _util.lit(2.0 ** (fi.nmant + 1), w.dtype, True), ws)
  e = floor(log2(_abs(ws))) + 1  # off by at most one: corrected below
  m = _scale2(ws, -e)
  big = _abs(m) >= 1
  m, e = where(big, m * 0.5, m), where(big, e + 1, e)
  small = _abs(m) < 0.5
  m, e = where(small, m * 2, m), where(small, e - 1, e)
  e = where(sub, e - (fi.nmant + 1), e)
  return convert(where(ok, m, w), x.dtype), convert(where(ok, e, 0), np.int32)


def ldexp(x1, x2, /):
  """``x1 * 2**x2`` for integer ``x2``, exact up to one final rounding.

  Args:
    x1: mantissas.
    x2: integer exponents.

  Returns:
    An array in an inexact dtype.

  Examples:
    >>> jnp.ldexp(jnp.array([1.0, 0.5]), jnp.array([3, 2]))
    Array([8., 2.], dtype=float64)
  """
  x1, x2 = ensure_arraylike("ldexp", x1, x2)
  d1, d2 = dtypes.dtype(x1), dtypes.dtype(x2)
  if dtypes.is_complex(d1) or dtypes.is_inexact(d2):
    raise ValueError(f"ldexp not supported for input types {(d1, d2)}")
  x1, = promote_dtypes_inexact(x1)
  w = _compute_dtype(x1)
  m, e = frexp(w)
  big = 4 * np.finfo(w.dtype).maxexp  # beyond this, under- or overflow for every mantissa
  k = clip(convert(x2, w.dtype), -big, big) + convert(e, w.dtype)
  return convert(_scale2(m, k), x1.dtype)  # zeros, infinities, NaN: m is x1 itself


def modf(x, /, out=None):
  """Fractional and integral parts of ``x``, both with the sign of ``x``.

  Args:
    x: input array (or array-like).
    out: unsupported (JAX arrays are immutable); must be ``None``.

  Returns:
    A tuple ``(fractional, integral)`` of arrays.

  Examples:
    >>> jnp.modf(jnp.array([1.5, -2.25]))
    (Array([ 0.5 , -0.25], dtype=float64), Array([ 1., -2.], dtype=float64))
  """
  x = ensure_arraylike("modf", x)
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
  x, = promote_dtypes_inexact(x)
  whole = trunc(x)
  return x - whole, whole


def spacing(x, /):
  """Distance from ``x`` to the adjacent float away from zero (signed as ``x``), as JAX's
  formula: float16 steps towards +inf (NumPy's float16 rule); other floats step away from
  zero (-0.0 included) and a step flushed to zero (denormals under jit) is the smallest
  subnormal, signed as ``x``.

  Args:
    x: input array (or array-like).

  Returns:
    An array of the shape and (inexact) dtype of ``x``.

  Examples:
    >>> jnp.spacing(jnp.array([1.0, -1.0], dtype=jnp.float32))
    Array([ 1.1920929e-07, -1.1920929e-07], dtype=float32)
  """
  x = ensure_arraylike("spacing", x)
  x, = promote_dtypes_inexact(x)
  if dtypes.is_complex(x.dtype):
    raise ValueError("jnp.spacing is not defined for complex inputs.")
  x = convert(x, x.dtype)  # a strong result, as JAX's
  inf = lax.full_like(x, np.inf)
  if x.dtype == np.float16:
    return lax.sub(nextafter(x, inf), x)
  out = lax.sub(nextafter(x, copysign(inf, x)), x)
  tiny = lax.full_like(x, dtypes.finfo(x.dtype).smallest_subnormal)
  return where(out == 0, copysign(tiny, x), out)

# ----------------------------------------------------------------- special functions, windows

# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on
# (8, inf) in 32/x - 2 (as numpy.i0): the bessel_i0e kernel's tables, as Python floats (weak)
_I0A, _I0B = tuple(_special_kernels._I0A.tolist()), tuple(_special_kernels._I0B.tolist())


def _chbevl(t, coeffs):
  """Clenshaw's recurrence for a Chebyshev series (Cephes ``chbevl`` convention)."""
  b0, b1, b2 = coeffs[0], 0.0, 0.0
  for c in coeffs[1:]:
    b2, b1 = b1, b0
    b0 = t * b1 - b2 + c
  return 0.5 * (b0 - b2)


def i0(x):
  """Modified Bessel function of the first kind, order zero (Cephes Chebyshev expansions;
  its derivative is exactly 0 at 0, as JAX's custom JVP makes it).

  Args:
    x: input array (or array-like).

  Returns:
    An array in an inexact dtype.

  Examples:
    >>> jnp.i0(jnp.array([0.0, 1.0]))
    Array([1.        , 1.26606588], dtype=float64)
  """
  x = ensure_arraylike("i0", x)
  x, = promote_dtypes_inexact(x)
  if not dtypes.is_float(x.dtype):
    raise ValueError(f"Unsupported input type to jax.numpy.i0: {x.dtype}")
  return _i0(x)


@custom_jvp
def _i0(x):
  w = _abs(_compute_dtype(x))
  small = w <= 8
  ws, wl = where(small, w, 0), where(small, 16, w)
  out = where(small, exp(ws) * _chbevl(ws / 2 - 2, _I0A),
              exp(wl) * _chbevl(32 / wl - 2, _I0B) / sqrt(wl))
  return convert(out, x.dtype, dtypes.is_weakly_typed(x))


@_i0.defjvp
def _i0_jvp(primals, tangents):
  from nbjax import api
  out, t = api.jvp(_i0.fun, primals, tangents)
  return out, where(primals[0] == 0, 0.0, t)


def _window(name, M, f):
  M = int(_util.concrete(M, f"M argument of jnp.{name}"))
  d = dtypes.default_float_dtype()
  if M <= 1:
    return ones(M, d)
  return f(lax.iota(d, M), M)


def hamming(M):
  """Hamming window of ``M`` points.

  Args:
    M: number of points (0 gives an empty array).

  Returns:
    A 1-d array of ``M`` window values in the default float dtype.

  Examples:
    >>> jnp.hamming(3)
    Array([0.08, 1.  , 0.08], dtype=float64)
  """
  return _window("hamming", M, lambda n, M: 0.54 - 0.46 * cos(2 * np.pi * n / (M - 1)))


def hanning(M):
  """Hann window of ``M`` points.

  Args:
    M: number of points (0 gives an empty array).

  Returns:
    A 1-d array of ``M`` window values in the default float dtype.

  Examples:
    >>> jnp.hanning(3)
    Array([0., 1., 0.], dtype=float64)
  """
  return _window("hanning", M, lambda n, M: 0.5 * (1 - cos(2 * np.pi * n / (M - 1))))


def blackman(M):
  """Blackman window of ``M`` points.

  Args:
    M: number of points (0 gives an empty array).

  Returns:
    A 1-d array of ``M`` window values in the default float dtype.

  Examples:
    >>> jnp.round(jnp.blackman(5), 3)
    Array([-0.  ,  0.34,  1.  ,  0.34, -0.  ], dtype=float64)
  """
  return _window("blackman", M, lambda n, M: 0.42 - 0.5 * cos(2 * np.pi * n / (M - 1))
                 + 0.08 * cos(4 * np.pi * n / (M - 1)))


def bartlett(M):
  """Bartlett (triangular) window of ``M`` points.

  Args:
    M: number of points (0 gives an empty array).

  Returns:
    A 1-d array of ``M`` window values in the default float dtype.

  Examples:
    >>> jnp.bartlett(5)
    Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float64)
  """
  return _window("bartlett", M, lambda n, M: 1 - _abs(2 * n + 1 - M) / (M - 1))


def kaiser(M, beta):
  """Kaiser window of ``M`` points with shape parameter ``beta``.

  Args:
    M: number of points.
    beta: shape parameter of the window.

  Returns:
    A 1-d array of ``M`` window values in the default float dtype.

  Examples:
    >>> jnp.kaiser(3, 5.0)
    Array([0.03671089, 1.        , 0.03671089], dtype=float64)
  """
  def f(n, M):
    alpha = 0.5 * (M - 1)
    return i0(beta * sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta)
  return _window("kaiser", M, f)

# ----------------------------------------------------------------- construction


def piecewise(x, condlist, funclist, *args, **kw):
  """Piecewise function: where ``condlist[i]`` holds (the last true one wins) the value of
  ``funclist[i]`` (a callable of ``x, *args, **kw`` or a constant), else the optional extra
  default entry (or 0). Every function is evaluated on all of ``x``.

  Args:
    x: input array.
    condlist: sequence of boolean arrays of the shape of ``x``.
    funclist: functions (or constants), one per condition, plus an optional default.
    args: extra positional arguments to the functions.
    kw: extra keyword arguments passed to the functions.

  Returns:
    An array of the shape and dtype of ``x``.

  Examples:
    >>> x = jnp.array([-2.0, 0.5, 3.0])
    >>> jnp.piecewise(x, [x < 0, x > 1], [lambda x: -x, 1.0, lambda x: x / 2])
    Array([2.  , 0.25, 1.  ], dtype=float64)
  """
  x = ensure_arraylike("piecewise", x)
  nc, nf = len(condlist), len(funclist)
  if nf == nc + 1:
    funclist = funclist[-1:] + funclist[:-1]
  elif nf == nc:
    funclist = [0] + list(funclist)
  else:
    raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; "
                     f"got {nf}")
  consts = {i: c for i, c in enumerate(funclist) if not callable(c)}
  funcs = frozenset((i, f) for i, f in enumerate(funclist) if callable(f))
  return _piecewise_jit()(x, asarray(condlist, dtype=bool), consts, funcs, *args, **kw)


@functools.cache
def _piecewise_jit():
  from nbjax.interpreters.pjit import jit
  return jit(_piecewise, static_argnames=["funcs"])


def _piecewise(x, condlist, consts, funcs, *args, **kw):
  """JAX's: each element's branch (the last true condition, or the default 0) is a
  ``lax.switch`` over the functions, vectorized over the elements; jitted with the
  functions static, so calling it again with the same functions does not retrace them."""
  from nbjax.numpy._vectorize import vectorize
  funcdict = dict(funcs)
  funclist = [consts.get(i, funcdict.get(i)) for i in range(len(condlist) + 1)]
  indices = argmax(cumsum(concatenate([zeros_like(condlist[:1]), condlist], 0), 0), 0)
  dtype = x.dtype
  call = lambda f: lambda x: f(x, *args, **kw).astype(dtype)  # noqa: E731
  const = lambda v: lambda x: asarray(v, dtype=dtype)  # noqa: E731
  funclist = [call(f) if callable(f) else const(f) for f in funclist]
  return vectorize(lax.switch, excluded=(1,))(indices, funclist, x)


def fromfunction(function, shape, *, dtype=float, **kwargs):
  """``function`` evaluated at every index of ``shape`` (vmapped over each axis).

  Args:
    function: function of one index array per axis.
    shape: int or sequence of ints: the shape of the result.
    dtype: dtype of the index arrays.
    kwargs: extra keyword arguments to ``function``.

  Returns:
    The result of ``function`` over the index grid.

  Examples:
    >>> jnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int)
    Array([[ 0, 10, 20],
           [ 1, 11, 21]], dtype=int64)
  """
  from nbjax import api
  shape = _util.canonicalize_shape(shape)
  f = functools.partial(function, **kwargs) if kwargs else function
  for i in range(len(shape)):
    f = api.vmap(f, in_axes=tuple(0 if j == i else None for j in range(len(shape)))[::-1])
  return f(*(arange(s, dtype=dtype) for s in shape))


def from_dlpack(x, /, *, device=None, copy=None):
  """An array from any object implementing the DLPack protocol (``__dlpack__``).

  Args:
    x: an object with ``__dlpack__`` and ``__dlpack_device__`` (e.g. a NumPy array or a
      framework tensor).
    device: optional device (or single-device sharding) to place the result on; one other
      than the source's needs a copy.
    copy: ``True``: always copy; ``False``: never (the result shares the producer's memory,
      which must be aligned to 64 bytes, as XLA's CPU buffers; writing to it later is
      undefined behaviour, as in JAX); ``None`` (default): copy, as nbjax owns its buffers.

  Returns:
    An array viewing or copying the data.

  Examples:
    >>> jnp.from_dlpack(np.arange(3))
    Array([0, 1, 2], dtype=int64)
  """
  from nbjax import api, xla
  from nbjax.sharding import Sharding
  if isinstance(device, Sharding):
    devs = device.device_set
    if len(devs) > 1:
      raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular device, "
                       f"but a Sharding with {len(devs)} devices was provided.")
    device, = devs
  if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
    raise TypeError("The array passed to from_dlpack must have __dlpack__ and "
                    "__dlpack_device__ methods.")
  src = xla.local_devices()[0]  # (host memory: the first CPU device's)
  move = device is not None and device != src
  if move and copy is False:
    raise ValueError(f"Specified {device=} which requires a copy since the source device is "
                     f"{src!r}, however copy=False. Set copy=True or copy=None to perform the "
                     "requested operation.")
  v = np.from_dlpack(x)
  if copy is False and not move:
    if v.ctypes.data % 64:
      raise ValueError("Specified input which requires a copy since the source data buffer is "
                       "not aligned to 64 bytes.  However copy=False. Set copy=True or "
                       "copy=None to perform the requested operation.")
    if v.flags.c_contiguous and dtypes.canonicalize_dtype(v.dtype) == v.dtype:
      return Array._new(v)  # zero-copy, as JAX's
  out = asarray(v)
  return api.device_put(out, device) if move else out
