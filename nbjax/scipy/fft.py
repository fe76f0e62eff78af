"""``nbjax.scipy.fft``: JAX's ``jax.scipy.fft`` (type-II ``dct``, ``dctn``, ``idct``,
``idctn``).

Pipeline position: a library layer over ``nbjax.numpy.fft``. A length-``N`` DCT-II is one
complex FFT of the input reordered (even-indexed samples, then the odd-indexed ones
reversed) and rotated by ``exp(-i pi k / 2N)`` (Makhoul, 1980); the inverse rotates the
other way, inverse-transforms and undoes the reordering. The ``n``-dimensional transforms
apply the one-dimensional ones axis by axis. All of it runs eagerly, under ``jit``, ``vmap``
and differentiation.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from nbjax import dtypes, lax
from nbjax import numpy as jnp
from nbjax.numpy import _util
from nbjax.numpy import fft as jnp_fft

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(name, type, norm):
  if type != 2:
    raise NotImplementedError("Only DCT type 2 is implemented.")
  if norm is not None and norm not in ["backward", "ortho"]:
    raise ValueError(f"jax.scipy.fft.{name}: {norm=!r} is not implemented")


def _phase(sign, size, dtype, axis, ndim):
  """``exp(sign i pi k / size)`` for ``k`` along ``axis``, a constant in the complex ``dtype``
  (no promotion of the operand: strict-promotion-safe)."""
  return _along(jnp.asarray(np.exp(sign * 1j * np.pi * np.arange(size) / size), dtype), axis,
                ndim)


def _along(v, axis, ndim):
  """A 1-D array shaped to broadcast along ``axis`` of a rank-``ndim`` array."""
  return v.reshape([-1 if a == axis else 1 for a in range(ndim)])


def _fit(x, n, axis):
  """``x`` zero-padded or cropped to length ``n`` along ``axis`` (``None``: unchanged)."""
  if n is None:
    return x
  cfg = [(0, n - x.shape[axis] if a == axis else 0, 0) for a in range(x.ndim)]
  return lax.pad(x, jnp.array(0, x.dtype), cfg)


def _zigzag(n):
  """Makhoul's order: the even indices ascending, then the odd ones descending."""
  return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])


def _ortho(out, axis):
  n = out.shape[axis]
  f = jnp.asarray(np.where(np.arange(n) == 0, 4 * n, 2 * n), out.dtype)
  return out / jnp.sqrt(_along(f, axis, out.ndim))


def _shape_axes(x, s, axes):
  """``s`` as a list (an int allowed) and the transform axes (JAX's defaults)."""
  if s is not None:
    try:
      s = list(s)
    except TypeError:
      s = [operator.index(s)]
    if len(s) > x.ndim:
      raise ValueError(f"s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
  if axes is None:
    axes = tuple(range(x.ndim - (x.ndim if s is None else len(s)), x.ndim))
  elif isinstance(axes, Sequence):
    axes = tuple(_util.canonicalize_axis(a, x.ndim) for a in axes)
    if len(set(axes)) != len(axes):
      raise ValueError(f"repeated axis: {axes}")
  else:
    axes = (_util.canonicalize_axis(axes, x.ndim),)
  return s, axes


def dct(x, type=2, n=None, axis=-1, norm=None):
  """Discrete cosine transform (type II) along one axis.

  JAX implementation of :func:`scipy.fft.dct`:
  ``y[k] = 2 * sum_j x[j] * cos(pi * k * (2 j + 1) / (2 N))``.

  Args:
    x: the input array.
    type: the DCT type; only ``2`` is implemented.
    n: the transform length: ``x`` is zero-padded or cropped to it along ``axis``
      (default: ``x.shape[axis]``).
    axis: the axis to transform (default: the last).
    norm: ``None`` or ``"backward"`` (default: unscaled) or ``"ortho"`` (orthonormal).

  Returns:
    The transform, real (complex inputs: real and imaginary parts transformed separately).

  See Also:
    :func:`idct`, :func:`dctn`, :func:`idctn`.
  """
  x = _util.ensure_arraylike("dct", x)
  _check("dct", type, norm)
  if dtypes.issubdtype(x.dtype, np.complexfloating):
    return lax.complex(dct(x.real, type, n, axis, norm), dct(x.imag, type, n, axis, norm))
  axis = _util.canonicalize_axis(axis, x.ndim)
  x = _fit(x, n, axis)
  size = x.shape[axis]
  spec = jnp_fft.fft(jnp.take(x, _zigzag(size), axis=axis), axis=axis)
  out = 2 * (spec * _phase(-0.5, size, spec.dtype, axis, x.ndim)).real
  return _ortho(out, axis) if norm == "ortho" else out


def idct(x, type=2, n=None, axis=-1, norm=None):
  """Inverse discrete cosine transform (of type II) along one axis.

  JAX implementation of :func:`scipy.fft.idct`: ``idct(dct(x, norm=m), norm=m)`` is ``x``.

  Args:
    x: the input array.
    type: the DCT type; only ``2`` is implemented.
    n: the transform length: ``x`` is zero-padded or cropped to it along ``axis``
      (default: ``x.shape[axis]``).
    axis: the axis to transform (default: the last).
    norm: ``None`` or ``"backward"`` (default: scaled by ``1 / (2 N)``) or ``"ortho"``.

  Returns:
    The inverse transform, in an inexact real dtype (complex inputs: parts separately).

  See Also:
    :func:`dct`, :func:`dctn`, :func:`idctn`.
  """
  x = _util.ensure_arraylike("idct", x)
  _check("idct", type, norm)
  if dtypes.issubdtype(x.dtype, np.complexfloating):
    return lax.complex(idct(x.real, type, n, axis, norm), idct(x.imag, type, n, axis, norm))
  axis = _util.canonicalize_axis(axis, x.ndim)
  x = _fit(x, n, axis)
  size = x.shape[axis]
  x, = _util.promote_dtypes_inexact(x)
  # per-frequency weights: half the zero frequency (backward); ortho also undoes its scale
  first = np.arange(size) == 0
  w = np.sqrt(np.where(first, size, 2 * size)) if norm == "ortho" else np.where(first, 0.5, 1.0)
  z = x * _along(jnp.asarray(w, x.dtype), axis, x.ndim)
  z = lax.convert_element_type(z, _util.to_complex_dtype(z.dtype))
  z = z * _phase(0.5, size, z.dtype, axis, x.ndim)
  u = jnp_fft.ifft(z, axis=axis).real
  return jnp.take(u, np.argsort(_zigzag(size)), axis=axis)


def dctn(x, type=2, s=None, axes=None, norm=None):
  """Multidimensional discrete cosine transform (type II).

  JAX implementation of :func:`scipy.fft.dctn`: :func:`dct` along each of ``axes``.

  Args:
    x: the input array.
    type: the DCT type; only ``2`` is implemented.
    s: the transform lengths (an int or a sequence), one per axis of ``axes``: ``x`` is
      zero-padded or cropped to them (default: ``x``'s sizes).
    axes: the axes to transform (default: the last ``len(s)`` axes, or all of them).
    norm: ``None`` or ``"backward"`` (default) or ``"ortho"``.

  Returns:
    The transform.

  See Also:
    :func:`dct`, :func:`idctn`.
  """
  return _nd("dctn", dct, x, type, s, axes, norm)


def _nd(name, one, x, type, s, axes, norm):
  """``one`` (dct or idct) along each of ``axes``, ``x`` fitted to the lengths ``s`` first."""
  x = _util.ensure_arraylike(name, x)
  _check(name, type, norm)
  if dtypes.issubdtype(x.dtype, np.complexfloating):
    return lax.complex(_nd(name, one, x.real, type, s, axes, norm),
                       _nd(name, one, x.imag, type, s, axes, norm))
  s, axes = _shape_axes(x, s, axes)
  if len(axes) == 1:
    return one(x, n=None if s is None else s[0], axis=axes[0], norm=norm)
  for a, m in zip(axes, s if s is not None else [None] * len(axes)):
    x = _fit(x, m, a)
  for a in axes:
    x = one(x, axis=a, norm=norm)
  return x


def idctn(x, type=2, s=None, axes=None, norm=None):
  """Multidimensional inverse discrete cosine transform (of type II).

  JAX implementation of :func:`scipy.fft.idctn`: :func:`idct` along each of ``axes``.

  Args:
    x: the input array.
    type: the DCT type; only ``2`` is implemented.
    s: the transform lengths (an int or a sequence), one per axis of ``axes``: ``x`` is
      zero-padded or cropped to them (default: ``x``'s sizes).
    axes: the axes to transform (default: the last ``len(s)`` axes, or all of them).
    norm: ``None`` or ``"backward"`` (default) or ``"ortho"``.

  Returns:
    The inverse transform.

  See Also:
    :func:`idct`, :func:`dctn`.
  """
  return _nd("idctn", idct, x, type, s, axes, norm)
