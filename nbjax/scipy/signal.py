"""``nbjax.scipy.signal``: JAX's ``jax.scipy.signal`` (SciPy's names and signatures).

Pipeline position: a library layer over ``nbjax.numpy`` and ``nbjax.lax``. Direct
convolutions and correlations are one ``lax.conv_general_dilated`` each (batch and feature
sizes 1, the smaller operand as the kernel, the output window chosen by the padding);
``fftconvolve`` multiplies ``jnp.fft`` spectra. The spectral estimators (``stft``, ``csd``,
``welch``) gather every overlapping segment with one static index array and transform them
with ``jnp.fft``; ``istft`` overlap-adds its frames with one scatter-add. So every function
runs eagerly, under ``jit``, ``vmap`` and differentiation; segment lengths, overlaps, FFT
sizes and breakpoints must be static, as in JAX.
"""
from __future__ import annotations

import operator
import warnings

import numpy as np

from nbjax import core, lax
from nbjax import numpy as jnp
from nbjax.numpy import _util
from nbjax.numpy import fft as jnp_fft

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend",
           "fftconvolve", "istft", "stft", "welch"]

_MODES = ("full", "same", "valid")


def _index_tuple(axes):
  return tuple(map(operator.index, axes)) if np.iterable(axes) else (operator.index(axes),)


def _static_int(v, context):
  return core.concrete_or_error(int, v, context)


def _to_complex(x):
  """``x`` in the complex dtype of its precision, weak type kept."""
  x = _util.as_array(x)
  return _util.convert(x, _util.to_complex_dtype(x.dtype), x.weak_type)


# ------------------------------------------------------------------ convolution


def _conv_direct(in1, in2, mode, precision):
  """N-d convolution of ``in1`` and ``in2`` (equal ranks) by ``conv_general_dilated``: the
  operand no larger in every dimension is the flipped kernel; the padding picks the
  ``mode`` window of the full result."""
  if mode not in _MODES:
    raise ValueError("mode must be one of ['full', 'same', 'valid']")
  if in1.ndim != in2.ndim:
    raise ValueError("in1 and in2 must have the same number of dimensions")
  if in1.size == 0 or in2.size == 0:
    raise ValueError("zero-size arrays not supported in convolutions, got shapes "
                     f"{in1.shape} and {in2.shape}.")
  in1, in2 = _util.promote_dtypes_inexact(in1, in2)
  s1, s2 = in1.shape, in2.shape
  if all(a <= b for a, b in zip(s1, s2)):
    big, small = in2, in1
  elif all(a >= b for a, b in zip(s1, s2)):
    big, small = in1, in2
  else:
    raise ValueError("One input must be smaller than the other in every dimension.")
  pads = []
  for a, b, n, k in zip(s1, s2, big.shape, small.shape):
    full = a + b - 1
    start, size = {"full": (0, full), "same": ((b - 1) // 2, a),
                   "valid": (k - 1, n - k + 1)}[mode]
    pads.append((k - 1 - start, k - 1 - (full - start - size)))
  out = lax.conv_general_dilated(big[None, None], jnp.flip(small)[None, None],
                                 (1,) * big.ndim, pads, precision=precision)
  return out[0, 0]


def fftconvolve(in1, in2, mode="full", axes=None):
  """Convolve two N-dimensional arrays by multiplying their Fourier transforms.

  JAX implementation of :func:`scipy.signal.fftconvolve`.

  Args:
    in1: the first operand.
    in2: the second operand, of the same rank as ``in1``.
    mode: the output window: ``"full"`` (default) the whole convolution, ``"same"`` its
      centre with ``in1``'s shape, ``"valid"`` only the positions where the operands
      overlap completely.
    axes: the axes to convolve over (default: all). Along the other axes the operands must
      have equal sizes, and the result is computed for each position independently.

  Returns:
    The convolution, in the operands' common inexact dtype.

  See Also:
    :func:`nbjax.scipy.signal.convolve`: the direct (non-FFT) convolution.
  """
  _util.check_arraylike("fftconvolve", in1, in2)
  in1, in2 = _util.promote_dtypes_inexact(in1, in2)
  if in1.ndim != in2.ndim:
    raise ValueError("in1 and in2 should have the same dimensionality")
  if mode not in ("same", "full", "valid"):
    raise ValueError("mode must be one of ['same', 'full', 'valid']")
  if axes is None:
    conv_axes = list(range(in1.ndim))
  else:
    axes = tuple(_util.canonicalize_axis(a, in1.ndim) for a in _index_tuple(axes))
    if any(in1.shape[i] != in2.shape[i] for i in range(in1.ndim) if i not in axes):
      raise ValueError(f"mapped axes must have same shape; got {in1.shape=} {in2.shape=} "
                       f"{axes=}")
    conv_axes = sorted(set(axes))
  n1 = [in1.shape[i] for i in conv_axes]
  n2 = [in2.shape[i] for i in conv_axes]
  if mode == "valid":
    if all(a <= b for a, b in zip(n1, n2)):
      in1, in2, n1, n2 = in2, in1, n2, n1
    elif not all(a >= b for a, b in zip(n1, n2)):
      raise ValueError("For 'valid' mode, One input must be at least as large as the other "
                       "in every dimension.")
  full = [a + b - 1 for a, b in zip(n1, n2)]
  if all(a == 1 or b == 1 for a, b in zip(n1, n2)):
    conv = in1 * in2
  else:
    cplx = jnp.iscomplexobj(in1)
    fwd, inv = (jnp_fft.fftn, jnp_fft.ifftn) if cplx else (jnp_fft.rfftn, jnp_fft.irfftn)
    conv = inv(fwd(in1, full, conv_axes) * fwd(in2, full, conv_axes), full, conv_axes)
  sizes = {"full": full, "same": n1, "valid": [a - b + 1 for a, b in zip(n1, n2)]}[mode]
  start, limit = [0] * conv.ndim, list(conv.shape)
  for ax, f, s in zip(conv_axes, full, sizes):
    start[ax] = (f - s) // 2
    limit[ax] = start[ax] + s
  return lax.slice(conv, start, limit)


def convolve(in1, in2, mode="full", method="auto", precision=None):
  """Convolve two N-dimensional arrays.

  JAX implementation of :func:`scipy.signal.convolve`.

  Args:
    in1: the first operand.
    in2: the second operand, of the same rank as ``in1``.
    mode: the output window: ``"full"`` (default) the whole convolution, ``"same"`` its
      centre with ``in1``'s shape, ``"valid"`` only the positions where the operands
      overlap completely.
    method: ``"auto"`` (default) or ``"direct"``: one :func:`nbjax.lax.conv_general_dilated`;
      ``"fft"``: :func:`fftconvolve`.
    precision: the convolution's :class:`nbjax.lax.Precision`.

  Returns:
    The convolution, in the operands' common inexact dtype.

  See Also:
    :func:`nbjax.numpy.convolve` (1-D), :func:`convolve2d`, :func:`correlate`.
  """
  if method == "fft":
    return fftconvolve(in1, in2, mode=mode)
  if method in ("direct", "auto"):
    return _conv_direct(in1, in2, mode, precision)
  raise ValueError(f"Got {method=}; expected 'auto', 'fft', or 'direct'.")


def _check_2d(name, in1, in2, boundary, fillvalue):
  if boundary != "fill" or fillvalue != 0:
    raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
  if np.ndim(in1) != 2 or np.ndim(in2) != 2:
    raise ValueError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
  """Convolve two 2-dimensional arrays.

  JAX implementation of :func:`scipy.signal.convolve2d`.

  Args:
    in1: the first operand, a matrix.
    in2: the second operand, a matrix.
    mode: ``"full"`` (default), ``"same"`` or ``"valid"``, as in :func:`convolve`.
    boundary: must be ``"fill"`` (SciPy's other boundaries are not implemented).
    fillvalue: must be ``0``.
    precision: the convolution's :class:`nbjax.lax.Precision`.

  Returns:
    The 2-D convolution, in the operands' common inexact dtype.
  """
  _check_2d("convolve2d", in1, in2, boundary, fillvalue)
  return _conv_direct(in1, in2, mode, precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
  """Cross-correlate two N-dimensional arrays.

  JAX implementation of :func:`scipy.signal.correlate`: the convolution of ``in1`` with
  ``in2`` conjugated and reversed along every axis.

  Args:
    in1: the first operand.
    in2: the second operand, of the same rank as ``in1``.
    mode: ``"full"`` (default), ``"same"`` or ``"valid"``, as in :func:`convolve`.
    method: ``"auto"`` (default), ``"direct"`` or ``"fft"``, as in :func:`convolve`.
    precision: the convolution's :class:`nbjax.lax.Precision`.

  Returns:
    The cross-correlation, in the operands' common inexact dtype.
  """
  return convolve(in1, jnp.flip(in2.conj()), mode, method=method, precision=precision)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
  """Cross-correlate two 2-dimensional arrays.

  JAX implementation of :func:`scipy.signal.correlate2d`.

  Args:
    in1: the first operand, a matrix.
    in2: the second operand, a matrix.
    mode: ``"full"`` (default), ``"same"`` or ``"valid"``, as in :func:`convolve`.
    boundary: must be ``"fill"``.
    fillvalue: must be ``0``.
    precision: the convolution's :class:`nbjax.lax.Precision`.

  Returns:
    The 2-D cross-correlation, in the operands' common inexact dtype.
  """
  _check_2d("correlate2d", in1, in2, boundary, fillvalue)
  smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
  equal = tuple(in1.shape) == tuple(in2.shape)
  # correlating is convolving one operand with the other reversed; which one is reversed
  # (and so which way the "same" window rounds, and where complex values are conjugated)
  # follows JAX's choice for each mode
  if mode == "valid" and smaller and not equal:
    return _conv_direct(jnp.flip(in2), in1.conj(), mode, precision)
  if mode == "full" and smaller:
    return _conv_direct(jnp.flip(in2), in1.conj(), mode, precision).conj()
  return jnp.flip(_conv_direct(jnp.flip(in1), in2.conj(), mode, precision))


# ------------------------------------------------------------------ detrending


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
  """Remove a constant or (piecewise) linear trend along an axis.

  JAX implementation of :func:`scipy.signal.detrend`.

  Args:
    data: the input array.
    axis: the axis to detrend along (default: the last).
    type: ``"linear"`` (default): subtract the least-squares line of each piece;
      ``"constant"``: subtract the mean.
    bp: static breakpoints (an int or a sequence) splitting the axis into pieces, each
      fitted separately (``"linear"`` only).
    overwrite_data: not supported; must be ``None``.

  Returns:
    ``data`` less its trend, in an inexact dtype.
  """
  if overwrite_data is not None:
    raise NotImplementedError("overwrite_data argument not implemented.")
  if type not in ["constant", "linear"]:
    raise ValueError("Trend type must be 'linear' or 'constant'.")
  data, = _util.promote_dtypes_inexact(jnp.asarray(data))
  n = data.shape[axis]
  if type == "constant":
    return data - data.mean(axis, keepdims=True)
  edges = np.unique(np.r_[0, bp, n])
  if edges[0] < 0 or edges[-1] > n:
    raise ValueError("Breakpoints must be non-negative and less than length of data along "
                     "given axis.")
  moved = jnp.moveaxis(data, axis, 0)
  flat = moved.reshape(n, -1)
  pieces = []
  for lo, hi in zip(edges[:-1], edges[1:]):
    y = flat[int(lo):int(hi)]
    yc = y - y.mean(0, keepdims=True)
    m = int(hi - lo)
    if m > 1:  # the slope's share: centred abscissae, so the fit needs no solve
      t = (np.arange(m) - (m - 1) / 2)[:, None]
      tc = jnp.asarray(t, yc.real.dtype)
      yc = yc - tc * (jnp.sum(tc * yc, 0, keepdims=True) / float(np.sum(t * t)))
    pieces.append(yc)
  if not pieces:
    return data
  return jnp.moveaxis(jnp.concatenate(pieces, 0).reshape(moved.shape), 0, axis)


# ------------------------------------------------------------------ spectral analysis


def _hann(n):
  """The periodic Hann window of length ``n`` (float64 NumPy)."""
  if n == 1:
    return np.ones(1)
  return np.sin(np.linspace(0, np.pi, n, endpoint=False)) ** 2


def _named_window(window, n):
  if isinstance(window, str) and window == "hann":
    return _hann(n)
  try:
    from scipy.signal import get_window
  except ImportError as err:
    raise ImportError(f"scipy must be available to use {window=}") from err
  return get_window(window, n)


def _window(window, nperseg, length, dtype):
  """The window array and segment length: a named window (string or tuple) of length
  ``nperseg`` (default: the whole signal), or ``window`` itself."""
  if isinstance(window, (str, tuple)):
    n = length if nperseg is None else int(nperseg)
    if n > length:
      warnings.warn(f"nperseg={n} is greater than input_length={length}, using "
                    f"nperseg={length}")
      n = length
    return jnp.array(_named_window(window, n), dtype=dtype), n
  win = jnp.asarray(window, dtype=dtype)
  n = win.size if nperseg is None else int(nperseg)
  if win.ndim != 1:
    raise ValueError("window must be 1-D")
  if length < win.size:
    raise ValueError("window is longer than input signal")
  if n != win.size:
    raise ValueError("value specified for nperseg is different from length of window")
  return win, n


def _median_bias(n):
  """The median of ``n`` periodograms over their mean (SciPy's correction)."""
  k = np.arange(2.0, n, 2)
  return 1 + np.sum(1.0 / (k + 1) - 1.0 / k)


def _pad_last(x, n, mode, **kw):
  return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode, **kw)


def _odd_ext(x, n):
  """``x`` extended by ``n`` points at each end of its last axis, point-reflected about
  the end values."""
  if n < 1:
    return x
  if n > x.shape[-1] - 1:
    raise ValueError(f"The extension length n ({n}) is too big. It must not exceed "
                     f"x.shape[axis]-1, which is {x.shape[-1] - 1}.")
  head = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], -1)
  tail = 2 * x[..., -1:] - jnp.flip(x[..., -n - 1:-1], -1)
  return jnp.concatenate([head, x, tail], -1)


_BOUNDARIES = {
    "even": lambda x, n: _pad_last(x, n, "reflect"),
    "odd": _odd_ext,
    "constant": lambda x, n: _pad_last(x, n, "edge"),
    "zeros": lambda x, n: _pad_last(x, n, "constant", constant_values=0.0),
    None: lambda x, n: x,
}


def _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, twosided):
  """The windowed FFT of every segment of the last axis: shape ``(..., segments, freqs)``."""
  starts = np.arange(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
  segs = x[..., starts[:, None] + np.arange(nperseg)]
  segs = detrend_func(segs)
  if jnp.iscomplexobj(win):
    segs = _to_complex(segs)
  segs = win.reshape((1,) * (segs.ndim - 1) + (nperseg,)) * segs
  return jnp_fft.fft(segs, n=nfft) if twosided else jnp_fft.rfft(segs.real, n=nfft)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend_type, return_onesided,
              scaling, axis, mode, boundary=None, padded=False):
  """Windowed FFTs of ``x`` (``mode="stft"``), its periodograms, or with ``y`` the cross
  periodograms (``mode="psd"``): ``(freqs, times, result)``, the segments on the last axis
  of ``result`` and the frequencies on ``axis``."""
  if mode not in ("psd", "stft"):
    raise ValueError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
  if boundary not in _BOUNDARIES:
    raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                     f"{list(_BOUNDARIES)}")
  axis = _util.canonicalize_axis(operator.index(axis), x.ndim)
  if y is None:
    _util.check_arraylike("spectral_helper", x)
    x, = _util.promote_dtypes_inexact(x)
    outer = x.shape[:axis] + x.shape[axis + 1:]
  else:
    if mode != "psd":
      raise ValueError("two-argument mode is available only when mode=='psd'")
    _util.check_arraylike("spectral_helper", x, y)
    x, y = _util.promote_dtypes_inexact(x, y)
    if x.ndim != y.ndim:
      raise ValueError("two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
    try:
      outer = _util.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:],
                                     y.shape[:axis] + y.shape[axis + 1:])
    except ValueError as err:
      raise ValueError("x and y cannot be broadcast together.") from err
  out_dtype = _util.to_complex_dtype(x.dtype)
  freq_dtype = np.finfo(out_dtype).dtype
  if nperseg is not None:
    nperseg = int(nperseg)
    if nperseg < 1:
      raise ValueError("nperseg must be a positive integer")
  win, nperseg = _window(window, nperseg, x.shape[axis], x.dtype)
  noverlap = nperseg // 2 if noverlap is None else int(noverlap)
  nfft = nperseg if nfft is None else int(nfft)

  if x.size == 0 or (y is not None and y.size == 0):
    shape = x.shape
    if y is not None:  # JAX's shape: the axis inserted at the position of the shorter length
      at = min(x.shape[axis], y.shape[axis])
      assert 0 <= at <= len(outer), (at, len(outer))
      shape = outer[:at] + (axis,) + outer[at:]
    return (jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype),
            jnp.zeros(shape, out_dtype))

  x = jnp.moveaxis(x, axis, -1)
  if y is not None:
    if y.ndim > 1:
      y = jnp.moveaxis(y, axis, -1)
    nx, ny = x.shape[-1], y.shape[-1]  # zero-pad the shorter to the longer
    if nx < ny:
      x = jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (ny - nx,), x.dtype)], -1)
    elif ny < nx:
      y = jnp.concatenate([y, jnp.zeros(y.shape[:-1] + (nx - ny,), x.dtype)], -1)
  if nfft < nperseg:
    raise ValueError("nfft must be greater than or equal to nperseg.")
  if noverlap >= nperseg:
    raise ValueError("noverlap must be less than nperseg.")
  step = nperseg - noverlap
  if boundary is not None:
    x = _BOUNDARIES[boundary](x, nperseg // 2)
    if y is not None:
      y = _BOUNDARIES[boundary](y, nperseg // 2)
  if padded:  # zero-pad to a whole number of segments
    extra = (-(x.shape[-1] - nperseg) % step) % nperseg
    x = jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (extra,), x.dtype)], -1)
    if y is not None:
      y = jnp.concatenate([y, jnp.zeros(y.shape[:-1] + (extra,), x.dtype)], -1)

  if isinstance(detrend_type, str):
    detrend_func = lambda d: detrend(d, axis=-1, type=detrend_type)
  elif callable(detrend_type):
    def detrend_func(d):  # JAX's: the user's function sees `axis` moved last
      return jnp.moveaxis(detrend_type(jnp.moveaxis(d, axis, -1)), -1, axis)
  elif not detrend_type:
    detrend_func = lambda d: d
  else:
    raise ValueError(f"Unsupported detrend type: {detrend_type}")

  if scaling == "density":
    scale = 1.0 / (fs * (win * win).sum())
  elif scaling == "spectrum":
    scale = 1.0 / win.sum() ** 2
  else:
    raise ValueError(f"Unknown scaling: {scaling}")
  if mode == "stft":
    scale = jnp.sqrt(scale)
  scale = _to_complex(scale)

  twosided = not return_onesided
  if return_onesided and (jnp.iscomplexobj(x) or (y is not None and jnp.iscomplexobj(y))):
    twosided = True
    warnings.warn("Input data is complex, switching to return_onesided=False")
  freq_fn = jnp_fft.fftfreq if twosided else jnp_fft.rfftfreq
  freqs = freq_fn(nfft, 1 / fs, dtype=freq_dtype)

  result = _segments_fft(x, win, detrend_func, nperseg, noverlap, nfft, twosided)
  if y is not None:
    result = jnp.conjugate(result) * _segments_fft(y, win, detrend_func, nperseg, noverlap,
                                                   nfft, twosided)
  elif mode == "psd":
    result = jnp.conjugate(result) * result
  result = result * scale
  if mode == "psd" and not twosided:  # fold the negative frequencies onto the positive
    double = np.full(result.shape[-1], 2.0)
    double[0] = 1.0
    if nfft % 2 == 0:
      double[-1] = 1.0
    result = result * jnp.asarray(double, result.dtype).reshape((1,) * (result.ndim - 1) + (-1,))

  times = jnp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, step, dtype=freq_dtype) / fs
  if boundary is not None:
    times = times - (nperseg / 2) / fs
  result = result.astype(out_dtype)
  if y is None and mode != "stft":
    result = result.real
  return freqs, times, jnp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
  """Short-time Fourier transform.

  JAX implementation of :func:`scipy.signal.stft`.

  Args:
    x: the signal.
    fs: its sampling frequency (default 1.0).
    window: the taper for each segment: a window name, a ``(name, parameter...)`` tuple
      (names other than ``"hann"`` need SciPy), or a 1-D array (default ``"hann"``).
    nperseg: the segment length (default 256; at most the signal's length).
    noverlap: points shared by consecutive segments (default ``nperseg // 2``).
    nfft: the FFT length, ``>= nperseg`` for zero-padded segments (default ``nperseg``).
    detrend: how each segment is detrended: ``False`` (default, not at all),
      ``"constant"``, ``"linear"`` or a function of the segments.
    return_onesided: for real signals, only the non-negative frequencies (default True).
    boundary: how the signal is extended by ``nperseg // 2`` points at each end:
      ``"zeros"`` (default), ``"even"``, ``"odd"``, ``"constant"`` or ``None`` (not at all).
    padded: zero-pad the end to a whole number of segments (default True).
    axis: the time axis (default: the last).

  Returns:
    ``(f, t, Zxx)``: the frequencies, the segment times and the transform (frequencies on
    ``axis``, segments last).

  See Also:
    :func:`istft`: the inverse transform.
  """
  return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                   "spectrum", axis, "stft", boundary=boundary, padded=padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
  """Cross power spectral density by Welch's method.

  JAX implementation of :func:`scipy.signal.csd`: the average of the cross periodograms
  of overlapping windowed segments of ``x`` and ``y``.

  Args:
    x: the first signal.
    y: the second signal (zero-padded to ``x``'s length along ``axis``, or the reverse), or
      ``None``: then the real power spectral density of ``x``.
    fs: the sampling frequency (default 1.0).
    window: the taper for each segment, as in :func:`stft` (default ``"hann"``).
    nperseg: the segment length (default: the whole signal).
    noverlap: points shared by consecutive segments (default ``nperseg // 2``).
    nfft: the FFT length (default ``nperseg``).
    detrend: ``"constant"`` (default), ``"linear"``, ``False`` or a function of the segments.
    return_onesided: for real signals, only the non-negative frequencies (default True).
    scaling: ``"density"`` (default, per unit frequency) or ``"spectrum"`` (power).
    axis: the time axis (default: the last).
    average: how the periodograms are combined: ``"mean"`` (default) or ``"median"``.

  Returns:
    ``(f, Pxy)``: the frequencies and the cross spectral density.

  See Also:
    :func:`welch`: the power spectral density of one signal.
  """
  freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, scaling, axis, "psd")
  if y is not None:
    pxy = pxy + 0j
  if pxy.ndim >= 2 and pxy.size > 0:
    if pxy.shape[-1] > 1:
      if average == "median":
        bias = jnp.asarray(_median_bias(pxy.shape[-1]), pxy.dtype)
        if jnp.iscomplexobj(pxy):
          pxy = jnp.median(pxy.real, axis=-1) + 1j * jnp.median(pxy.imag, axis=-1)
        else:
          pxy = jnp.median(pxy, axis=-1)
        pxy = pxy / bias
      elif average == "mean":
        pxy = pxy.mean(axis=-1)
      else:
        raise ValueError(f'average must be "median" or "mean", got {average}')
    else:
      pxy = pxy.reshape(pxy.shape[:-1])
  return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
  """Power spectral density by Welch's method.

  JAX implementation of :func:`scipy.signal.welch`: the average of the periodograms of
  overlapping windowed segments of ``x``.

  Args:
    x: the signal.
    fs: the sampling frequency (default 1.0).
    window: the taper for each segment, as in :func:`stft` (default ``"hann"``).
    nperseg: the segment length (default: the whole signal).
    noverlap: points shared by consecutive segments (default ``nperseg // 2``).
    nfft: the FFT length (default ``nperseg``).
    detrend: ``"constant"`` (default), ``"linear"``, ``False`` or a function of the segments.
    return_onesided: for real signals, only the non-negative frequencies (default True).
    scaling: ``"density"`` (default, per unit frequency) or ``"spectrum"`` (power).
    axis: the time axis (default: the last).
    average: ``"mean"`` (default) or ``"median"``.

  Returns:
    ``(f, Pxx)``: the frequencies and the (real) power spectral density.

  See Also:
    :func:`csd`: the cross spectral density of two signals.
  """
  freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                   nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                   scaling=scaling, axis=axis, average=average)
  return freqs, pxx.real


def _overlap_add(frames, step):
  """Sum of the frames ``(..., n, length)`` placed ``step`` apart: ``(..., out)``."""
  *batch, n, length = frames.shape
  idx = (np.arange(n)[:, None] * step + np.arange(length)).reshape(-1)
  out = jnp.zeros((*batch, step * (n - 1) + length), frames.dtype)
  return out.at[..., idx].add(frames.reshape(*batch, n * length))


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
  """Inverse short-time Fourier transform.

  JAX implementation of :func:`scipy.signal.istft`: inverts :func:`stft` by windowed
  overlap-add of the segments' inverse FFTs.

  Args:
    Zxx: the transform, at least 2-D.
    fs: the sampling frequency (default 1.0).
    window: the segments' taper, as in :func:`stft` (default ``"hann"``).
    nperseg: the segment length (default: from the number of frequencies).
    noverlap: points shared by consecutive segments (default ``nperseg // 2``).
    nfft: the FFT length (default: from the number of frequencies).
    input_onesided: ``Zxx`` holds only non-negative frequencies (default True).
    boundary: ``stft`` extended the signal at its ends, so trim ``nperseg // 2`` points
      from each end (default True).
    time_axis: the segments' axis of ``Zxx`` (default -1).
    freq_axis: the frequencies' axis of ``Zxx`` (default -2).

  Returns:
    ``(t, x)``: the sample times and the reconstructed signal.

  See Also:
    :func:`stft`: the forward transform.
  """
  Zxx = _util.ensure_arraylike("istft", Zxx)
  if Zxx.ndim < 2:
    raise ValueError("Input stft must be at least 2d!")
  freq_axis = _util.canonicalize_axis(freq_axis, Zxx.ndim)
  time_axis = _util.canonicalize_axis(time_axis, Zxx.ndim)
  if freq_axis == time_axis:
    raise ValueError("Must specify differing time and frequency axes!")
  Zxx = jnp.asarray(Zxx, dtype=_util.to_complex_dtype(Zxx.dtype))
  n_default = 2 * (Zxx.shape[freq_axis] - 1) if input_onesided else Zxx.shape[freq_axis]
  nperseg_ = _static_int(nperseg or n_default, "nperseg: segment length of STFT")
  if nperseg_ < 1:
    raise ValueError("nperseg must be a positive integer")
  if nfft is None:
    nfft_ = n_default + (1 if input_onesided and nperseg_ == n_default + 1 else 0)
  else:
    nfft_ = _static_int(nfft, "nfft of STFT")
  if nfft_ < nperseg_:
    raise ValueError(f"FFT length ({nfft_}) must be longer than nperseg ({nperseg_}).")
  noverlap_ = _static_int(noverlap or nperseg_ // 2, "noverlap of STFT")
  if noverlap_ >= nperseg_:
    raise ValueError("noverlap must be less than nperseg.")
  step = nperseg_ - noverlap_

  if time_axis != Zxx.ndim - 1 or freq_axis != Zxx.ndim - 2:
    rest = tuple(i for i in range(Zxx.ndim) if i not in (time_axis, freq_axis))
    Zxx = jnp.transpose(Zxx, rest + (freq_axis, time_axis))
  inv = jnp_fft.irfft if input_onesided else jnp_fft.ifft
  # (JAX passes the caller's nfft here, not the one inferred above)
  segs = inv(Zxx, axis=-2, n=nfft)[..., :nperseg_, :]  # (..., nperseg, frames)

  if isinstance(window, (str, tuple)):
    win = jnp.asarray(_named_window(window, nperseg_), dtype=segs.dtype)
  else:
    win = jnp.asarray(window)
    if len(win.shape) != 1:
      raise ValueError("window must be 1-D")
    if win.shape[0] != nperseg_:
      raise ValueError(f"window must have length of {nperseg_}")
  segs = segs * win.sum()  # undo stft's "spectrum" scaling
  col = win.reshape((1,) * (segs.ndim - 2) + (nperseg_, 1))
  if segs.shape[-2] != nperseg_:  # an odd nperseg without nfft: JAX's inverse FFT is short
    raise TypeError(f"mul got incompatible shapes for broadcasting: {segs.shape}, "
                    f"{col.shape}.")
  x = _overlap_add(jnp.swapaxes(segs * col, -2, -1), step)
  norm = _overlap_add(jnp.broadcast_to(win * win, (segs.shape[-1], nperseg_)), step)
  if boundary:
    cut = nperseg_ // 2
    x, norm = x[..., cut:-cut], norm[..., cut:-cut]
  norm = jnp.where(norm > 1e-10, norm, 1.0)
  x = x / norm.reshape((1,) * (x.ndim - norm.ndim) + norm.shape)  # (rank-promotion-safe)
  if x.ndim > 1 and time_axis != Zxx.ndim - 1:
    x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
  t = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
  return t, x
