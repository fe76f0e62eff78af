"""``nbjax.numpy.fft``: NumPy's FFT functions (JAX's semantics) over the ``fft`` primitive.

Pipeline position: ``jnp.fft.fft(a, n, axis, norm)`` checks its arguments, casts (integers
promote to the default float, single precision stays single), crops or zero-pads the input to
``n``/``s`` (one ``lax.pad``), moves the transformed axes to the end (XLA and ``fft_p``
transform the innermost axes), applies ``lax.fft`` (``nbjax/lax/fft.py``: at most three axes
at a time, more in groups as JAX does), scales for ``norm`` and moves the axes back. The
common eager call (an Array, the last axis, no ``n``, default ``norm``) goes straight to the
primitive's eager entry. ``fftfreq``/``rfftfreq``/``fftshift``/``ifftshift`` are array
creation and rolls. Covers the Array API standard's ``fft`` extension.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from nbjax import core, dtypes, lax
from nbjax.array import Array
from nbjax.lax.fft import FftType, fft_p
from nbjax.numpy import _creation, _manip, _ufuncs, _util
from nbjax.numpy._util import canonicalize_axis, ensure_arraylike

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fft2", "ifft2", "rfft2", "irfft2", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_C = {np.dtype(np.complex64), np.dtype(np.complex128)}
_F = {np.dtype(np.float32), np.dtype(np.float64)}
_EVAL = core.eval_trace


def _norm_factor(norm, s, inverse):
  """The scale ``norm`` puts on the unnormalised (forward) or 1/N-scaled (inverse)
  transform over lengths ``s``; None for none."""
  if norm is None or norm == "backward":
    return None
  n = float(math.prod(s))
  if norm == "ortho":
    return math.sqrt(n) if inverse else 1 / math.sqrt(n)
  return n if inverse else 1 / n  # forward


def _check_norm(full, norm):
  if norm not in _NORMS:
    raise ValueError(f'{full}: invalid norm value {norm!r}; should be "backward", "ortho" or '
                     '"forward".')


def _cast(full, arr, typ):
  """``arr`` in the dtype the transform takes (JAX's: RFFT real, the others complex)."""
  d = arr.dtype
  if typ == FftType.RFFT:
    if d.kind == "c":
      raise ValueError(f"{full}: only real valued inputs supported for rfft, got {d}")
    want = d if d in _F else (np.dtype(np.float32) if dtypes.is_inexact(d) else
                              _util.to_inexact_dtype(d))
  else:
    want = d if d in _C else _util.to_complex_dtype(d)
  return arr if want == d else lax.convert_element_type(arr, want)


def _fft_nd(arr, typ, s):
  """``lax.fft`` over the last ``len(s)`` axes: up to 3 at once; more in groups (2 + 2 for 4
  axes, else the last 3 first), as JAX does."""
  if len(s) <= 3:
    return lax.fft(arr, typ, tuple(s))
  n = 2 if len(s) == 4 else 3
  nd = arr.ndim
  src = tuple(range(nd - len(s), nd - n))
  dst = tuple(range(nd - len(s) + n, nd))
  if typ in (FftType.RFFT, FftType.FFT):
    arr = _manip.moveaxis(lax.fft(arr, typ, tuple(s[-n:])), src, dst)
    return _manip.moveaxis(_fft_nd(arr, FftType.FFT, s[:-n]), dst, src)
  arr = _manip.moveaxis(_fft_nd(_manip.moveaxis(arr, src, dst), FftType.IFFT, s[:-n]), dst, src)
  return lax.fft(arr, typ, tuple(s[-n:]))


def _fft_core(name, typ, a, s, axes, norm):
  full = f"jax.numpy.fft.{name}"
  if (type(a) is Array and s is None and axes == (-1,) and norm is None and
      core._ctx.trace is _EVAL and a.ndim and typ != FftType.IRFFT):  # the common eager call
    if not a._weak and a.dtype in (_F if typ == FftType.RFFT else _C):
      return fft_p.eager(a, fft_type=typ, fft_lengths=a.shape[-1:])
    return lax.fft(a, typ, a.shape[-1:])
  arr = ensure_arraylike(full, a)
  _check_norm(full, norm)
  if s is not None:
    s = tuple(map(operator.index, s))
    if any(n <= 0 for n in s):
      raise ValueError(f"{full}: Shape should be positive, got s={s}.")
    if axes is not None and len(s) != len(axes):
      raise ValueError(f"{full}: Shape and axes have different lengths: s={s}, axes={axes}.")
  nd = arr.ndim
  if axes is None:
    if s is not None and len(s) > nd:
      raise ValueError(f"{full}: s={s} has more entries than the input has axes "
                       f"(shape {arr.shape})")
    axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
  else:
    given = axes
    axes = tuple(canonicalize_axis(ax, nd) for ax in given)
    if len(set(axes)) != len(axes):
      raise ValueError(f"{full} does not support repeated axes. Got axes {given}.")
  k = len(axes)
  last = tuple(range(nd - k, nd))
  arr = _cast(full, arr, typ)
  if axes != last:  # XLA transforms the innermost axes
    arr = _manip.moveaxis(arr, axes, last)
  shape = arr.shape
  if s is not None:
    want = shape[:nd - k] + s
    if typ == FftType.IRFFT:
      want = want[:-1] + (want[-1] // 2 + 1,)
    if want != shape:  # crop and zero-pad in one pad (negative high edges crop)
      arr = lax.pad(arr, np.zeros((), arr.dtype), [(0, w - n, 0) for w, n in zip(want, shape)])
  else:
    s = shape[nd - k:]
    if typ == FftType.IRFFT and k:
      s = s[:-1] + (2 * (s[-1] - 1),)
      if s[-1] <= 0:
        raise ValueError(f"{full}: invalid number of data points ({s[-1]}) for the output: "
                         f"pass n (or s) for an input of {shape[-1]} entries along the last "
                         "transformed axis")
  out = _fft_nd(arr, typ, s)
  scale = _norm_factor(norm, s, name.startswith("i"))
  if scale is not None:
    out = out * scale  # a weak scalar: the dtype stays
  if axes != last:
    out = _manip.moveaxis(out, last, axes)
  return out


def _fft_core_1d(name, typ, a, n, axis, norm):
  if isinstance(axis, (list, tuple)):
    raise ValueError(f"jax.numpy.fft.{name} does not support multiple axes. Please use "
                     f"jax.numpy.fft.{name}n. Got axis = {axis!r}.")
  return _fft_core(name, typ, a, None if n is None else (n,), (axis,), norm)


def _fft_core_2d(name, typ, a, s, axes, norm):
  if axes is None or len(axes) != 2:
    raise ValueError(f"jax.numpy.fft.{name} only supports 2 axes. Got axes = {axes!r}.")
  return _fft_core(name, typ, a, s, axes, norm)


_ARGS_1D = """
  Args:
    a: input array.
    n: the length of the transformed axis of the {what} (the input is cropped or
      zero-padded to it); default: {default}.
    axis: the axis to transform (default ``-1``).
    norm: ``"backward"`` (default, also ``None``), ``"ortho"`` or ``"forward"``.
"""
_ARGS_ND = """
  Args:
    a: input array.
    s: the lengths of the transformed axes of the {what} (the input is cropped or
      zero-padded to them); default: {default}.
    axes: the axes to transform; default: {axes}.
    norm: ``"backward"`` (default, also ``None``), ``"ortho"`` or ``"forward"``.
"""


def _doc(f, summary, args, returns, **fmt):
  f.__doc__ = (f"{summary}\n\n  JAX implementation of :func:`numpy.fft.{f.__name__}`.\n"
               f"{args.format(**fmt)}\n  Returns:\n    {returns}\n")
  return f


def fft(a, n=None, axis=-1, norm=None):
  return _fft_core_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
  return _fft_core_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
  return _fft_core_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
  return _fft_core_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
  a = ensure_arraylike("jax.numpy.fft.hfft", a)
  if isinstance(axis, (list, tuple)):
    return _fft_core_1d("hfft", FftType.IRFFT, a, n, axis, norm)
  nn = 2 * (a.shape[canonicalize_axis(axis, a.ndim)] - 1) if n is None else operator.index(n)
  out = _fft_core_1d("hfft", FftType.IRFFT, _ufuncs.conj(a), n, axis, norm)
  return out * nn


def ihfft(a, n=None, axis=-1, norm=None):
  a = ensure_arraylike("jax.numpy.fft.ihfft", a)
  if isinstance(axis, (list, tuple)):
    return _fft_core_1d("ihfft", FftType.RFFT, a, n, axis, norm)
  nn = a.shape[canonicalize_axis(axis, a.ndim)] if n is None else operator.index(n)
  out = _fft_core_1d("ihfft", FftType.RFFT, a, n, axis, norm)
  return lax.conj(out) * (1 / nn)


def fftn(a, s=None, axes=None, norm=None):
  return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
  return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
  return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
  return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
  return _fft_core_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
  return _fft_core_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
  return _fft_core_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
  return _fft_core_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


_C1 = "the output"
_doc(fft, "Compute a one-dimensional discrete Fourier transform along an axis.", _ARGS_1D,
     "the complex transform of ``a`` (complex64 for single-precision input).", what=_C1,
     default="the input's length")
_doc(ifft, "Compute a one-dimensional inverse discrete Fourier transform.", _ARGS_1D,
     "the complex inverse transform of ``a``.", what=_C1, default="the input's length")
_doc(rfft, "Compute a one-dimensional discrete Fourier transform of a real-valued array.",
     _ARGS_1D, "the non-negative frequency terms: ``n // 2 + 1`` along ``axis``.",
     what="input", default="the input's length")
_doc(irfft, "Compute a real-valued one-dimensional inverse discrete Fourier transform.",
     _ARGS_1D, "the real inverse of :func:`rfft`, ``n`` long along ``axis``.", what=_C1,
     default="``2 * (m - 1)`` for ``m`` input entries")
_doc(hfft, "Compute the FFT of a signal with Hermitian symmetry (a real spectrum).", _ARGS_1D,
     "a real array, ``n`` long along ``axis``.", what=_C1,
     default="``2 * (m - 1)`` for ``m`` input entries")
_doc(ihfft, "Compute the inverse FFT of a signal with Hermitian symmetry.", _ARGS_1D,
     "the complex non-negative frequency terms: ``n // 2 + 1`` along ``axis``.",
     what="input", default="the input's length")
for _f, _s, _r, _w, _d, _a in [
    (fftn, "Compute a multidimensional discrete Fourier transform along given axes.",
     "the complex transform of ``a``.", _C1, "the input's lengths", "all axes (the last "
     "``len(s)`` with ``s``)"),
    (ifftn, "Compute a multidimensional inverse discrete Fourier transform.",
     "the complex inverse transform of ``a``.", _C1, "the input's lengths", "all axes (the "
     "last ``len(s)`` with ``s``)"),
    (rfftn, "Compute a multidimensional discrete Fourier transform of a real-valued array.",
     "complex: ``s[-1] // 2 + 1`` along the last transformed axis.", "input",
     "the input's lengths", "all axes (the last ``len(s)`` with ``s``)"),
    (irfftn, "Compute a real-valued multidimensional inverse discrete Fourier transform.",
     "real, of lengths ``s`` along ``axes``.", _C1,
     "the input's, ``2 * (m - 1)`` along the last axis", "all axes (the last ``len(s)`` "
     "with ``s``)"),
    (fft2, "Compute a two-dimensional discrete Fourier transform along given axes.",
     "the complex transform of ``a``.", _C1, "the input's lengths", "``(-2, -1)``"),
    (ifft2, "Compute a two-dimensional inverse discrete Fourier transform.",
     "the complex inverse transform of ``a``.", _C1, "the input's lengths", "``(-2, -1)``"),
    (rfft2, "Compute a two-dimensional discrete Fourier transform of a real-valued array.",
     "complex: ``s[-1] // 2 + 1`` along ``axes[-1]``.", "input", "the input's lengths",
     "``(-2, -1)``"),
    (irfft2, "Compute a real-valued two-dimensional inverse discrete Fourier transform.",
     "real, of lengths ``s`` along ``axes``.", _C1,
     "the input's, ``2 * (m - 1)`` along the last axis", "``(-2, -1)``")]:
  _doc(_f, _s, _ARGS_ND, _r, what=_w, default=_d, axes=_a)


# ----------------------------------------------------------------- frequencies and shifts


def _freq_args(name, n, d, dtype):
  if isinstance(n, (list, tuple)):
    raise ValueError(f"The n argument of jax.numpy.fft.{name} only takes an int. Got n = "
                     f"{list(n)}.")
  if isinstance(d, (list, tuple)):
    raise ValueError(f"The d argument of jax.numpy.fft.{name} only takes a single value. "
                     f"Got d = {list(d)}.")
  n = core.concrete_or_error(operator.index, n, f"The n argument of jax.numpy.fft.{name}")
  out = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
  if not dtypes.is_inexact(out):
    raise ValueError(f"jax.numpy.fft.{name}: dtype must be a floating or complex dtype, got "
                     f"{out}")
  return n, out


def _freqs(k, n, d, dtype, device):
  out = _ufuncs.true_divide(_creation.asarray(k, dtype), _creation.asarray(d * n, dtype))
  return out if device is None else _creation._on_device(out, device)


def fftfreq(n, d=1.0, *, dtype=None, device=None):
  """Return the sample frequencies of a discrete Fourier transform.

  JAX implementation of :func:`numpy.fft.fftfreq`: ``[0, 1, ..., n//2 - 1 (or (n-1)//2),
  -(n//2), ..., -1] / (d * n)``, the frequencies of :func:`fft`'s outputs.

  Args:
    n: the transform's length (a concrete int).
    d: the sample spacing (default 1.0).
    dtype: the result's (inexact) dtype; default: the default float dtype.
    device: optional :class:`Device` or :class:`Sharding` to place the result on.

  Returns:
    An array of ``n`` frequencies.
  """
  n, dt = _freq_args("fftfreq", n, d, dtype)
  k = (np.arange(n) + n // 2) % max(n, 1) - n // 2
  return _freqs(k, n, d, dt, device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
  """Return the sample frequencies of a real discrete Fourier transform.

  JAX implementation of :func:`numpy.fft.rfftfreq`: ``[0, 1, ..., n // 2] / (d * n)``, the
  frequencies of :func:`rfft`'s outputs.

  Args:
    n: the transform's length (a concrete int).
    d: the sample spacing (default 1.0).
    dtype: the result's (inexact) dtype; default: the default float dtype.
    device: optional :class:`Device` or :class:`Sharding` to place the result on.

  Returns:
    An array of ``n // 2 + 1`` frequencies.
  """
  n, dt = _freq_args("rfftfreq", n, d, dtype)
  return _freqs(np.arange(n // 2 + 1), n, d, dt, device)


def _shift(name, x, axes, sign):
  x = ensure_arraylike(f"jax.numpy.fft.{name}", x)
  if axes is None:
    axes = tuple(range(x.ndim))
  elif isinstance(axes, (int, np.integer)):
    axes = (axes,)
  axes = tuple(canonicalize_axis(ax, x.ndim) for ax in axes)
  if not axes:
    return x
  return _manip.roll(x, [sign * (x.shape[ax] // 2) for ax in axes], axes)


def fftshift(x, axes=None):
  """Shift the zero-frequency component to the center of the spectrum.

  JAX implementation of :func:`numpy.fft.fftshift`.

  Args:
    x: input array.
    axes: the axes to shift (an int or a sequence); default: all.

  Returns:
    ``x`` rolled by ``x.shape[ax] // 2`` along each of ``axes``.
  """
  return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
  """The inverse of :func:`fftshift`.

  JAX implementation of :func:`numpy.fft.ifftshift`.

  Args:
    x: input array.
    axes: the axes to shift (an int or a sequence); default: all.

  Returns:
    ``x`` rolled by ``-(x.shape[ax] // 2)`` along each of ``axes``.
  """
  return _shift("ifftshift", x, axes, -1)
