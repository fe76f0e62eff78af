"""``lax.fft``: the ``fft`` primitive (complex, inverse, real and inverse-real FFTs) with every
rule.

Pipeline position: ``jnp.fft.fft(x)`` (``nbjax/numpy/fft.py``: padding, axes moved to the
end, normalisation) -> ``lax.fft(x, fft_type, fft_lengths)`` (operand cast to the transform's
dtype) -> ``fft_p.bind``; with no transformation active the registry's eager entry runs
NumPy's pocketfft (``np.fft``) over the trailing ``len(fft_lengths)`` axes (1 to 3, as XLA);
under ``jit`` it lowers to ``stablehlo.fft``. ``fft_p`` is linear: its jvp applies it to the
tangent, its transpose is JAX's (FFT and IFFT are symmetric matrices: each is its own
transpose; RFFT and IRFFT transpose through the other with a mask for the Hermitian half),
and batching keeps the batch axis where it is unless it is among the transformed ones.
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from nbjax import dtypes, registry
from nbjax.core import Primitive, ShapedArray, get_aval
from nbjax.interpreters import ad, batching, jet
from nbjax.lax.elementwise import _convert_element_type

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
  """Which FFT ``lax.fft`` computes (JAX's names and values)."""
  FFT = 0  # forward complex-to-complex
  IFFT = 1  # inverse complex-to-complex
  RFFT = 2  # forward real-to-complex
  IRFFT = 3  # inverse complex-to-real

  def __str__(self):  # jaxprs print ``fft_type=RFFT``
    return self.name


_NAMES = {"fft": FftType.FFT, "ifft": FftType.IFFT, "rfft": FftType.RFFT, "irfft": FftType.IRFFT}
_C = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_R = {c: r for r, c in _C.items()}
_FLOATS, _COMPLEX = tuple(_C), tuple(_R)


def _fft_type(t):
  if isinstance(t, FftType):
    return t
  if isinstance(t, str):
    typ = _NAMES.get(t.lower())
    if typ is None:
      raise ValueError(f"fft: unknown FFT type {t!r}; expected one of "
                       "'fft', 'ifft', 'rfft', 'irfft' or a lax.FftType")
    return typ
  raise TypeError(f"fft: unknown FFT type value {t!r} (a lax.FftType or one of "
                  "'fft', 'ifft', 'rfft', 'irfft')")


# ----------------------------------------------------------------- abstract eval


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
  if not isinstance(x, ShapedArray):
    raise TypeError(f"fft got a non-array operand {x!r}")
  if not isinstance(fft_type, FftType):
    raise TypeError(f"fft: fft_type must be a lax.FftType, got {fft_type!r}")
  if (not isinstance(fft_lengths, tuple) or not 1 <= len(fft_lengths) <= 3 or
      not all(isinstance(n, (int, np.integer)) and n >= 0 for n in fft_lengths)):
    raise ValueError(f"fft: fft_lengths must be a tuple of 1 to 3 nonnegative ints, got "
                     f"{fft_lengths!r}")
  k = len(fft_lengths)
  if k > x.ndim:
    raise ValueError(f"fft: FFT input shape {x.shape} must have at least as many input "
                     f"dimensions as fft_lengths {fft_lengths}.")
  name, minor = fft_type.name, x.shape[x.ndim - k:]
  if fft_type == FftType.RFFT:
    if x.dtype not in _FLOATS:
      raise ValueError(f"fft: RFFT input must be float32 or float64, got {x.dtype}")
    if minor != fft_lengths:
      raise ValueError(f"fft: RFFT input shape {x.shape} minor dimensions must be equal to "
                       f"fft_lengths {fft_lengths}")
    return ShapedArray(x.shape[:x.ndim - k] + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,),
                       _C[x.dtype])
  if x.dtype not in _COMPLEX:
    raise ValueError(f"fft: {name} input must be complex64 or complex128, got {x.dtype}")
  if fft_type == FftType.IRFFT:
    want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    if minor != want:
      raise ValueError(f"fft: IRFFT input shape {x.shape} minor dimensions must be equal to "
                       f"all except the last fft_length, got fft_lengths={fft_lengths} (the "
                       f"last input dimension must be fft_lengths[-1] // 2 + 1 = {want[-1]})")
    return ShapedArray(x.shape[:x.ndim - k] + fft_lengths, _R[x.dtype])
  if minor != fft_lengths:
    raise ValueError(f"fft: {name} input shape {x.shape} minor dimensions must be equal to "
                     f"fft_lengths {fft_lengths}")
  return ShapedArray(x.shape, x.dtype)


# ----------------------------------------------------------------- eager (NumPy's pocketfft)

_NP1 = {FftType.FFT: np.fft.fft, FftType.IFFT: np.fft.ifft, FftType.RFFT: np.fft.rfft,
        FftType.IRFFT: np.fft.irfft}
_NPN = {FftType.FFT: np.fft.fftn, FftType.IFFT: np.fft.ifftn, FftType.RFFT: np.fft.rfftn,
        FftType.IRFFT: np.fft.irfftn}
_AXES = {1: (-1,), 2: (-2, -1), 3: (-3, -2, -1)}


def _fft_numpy(x, *, fft_type, fft_lengths):
  """NumPy's pocketfft over the trailing axes (single precision stays single in NumPy 2)."""
  if x.size == 0:  # pocketfft needs points to transform; an empty batch has none
    a = _fft_abstract_eval(ShapedArray(x.shape, x.dtype), fft_type=fft_type,
                           fft_lengths=fft_lengths)
    return np.zeros(a.shape, a.dtype)
  if len(fft_lengths) == 1:
    return _NP1[fft_type](x, fft_lengths[0], -1)
  return _NPN[fft_type](x, fft_lengths, _AXES[len(fft_lengths)])


def _dft(n, inverse):
  k = np.arange(n)
  w = np.exp((2j if inverse else -2j) * np.pi * np.outer(k, k) / n)
  return w / n if inverse else w


def _fft_reference(x, *, fft_type, fft_lengths):
  """The test oracle: dense DFT matrices in complex128, one axis at a time (no FFT)."""
  out_aval = _fft_abstract_eval(ShapedArray(x.shape, x.dtype), fft_type=fft_type,
                                fft_lengths=fft_lengths)
  y, k = x.astype(np.complex128), len(fft_lengths)
  inverse = fft_type in (FftType.IFFT, FftType.IRFFT)
  axes = range(x.ndim - k, x.ndim - 1) if fft_type == FftType.IRFFT else range(x.ndim - k, x.ndim)
  for ax, n in zip(axes, fft_lengths):
    y = np.moveaxis(np.moveaxis(y, ax, -1) @ _dft(n, inverse).T, -1, ax)
  if fft_type == FftType.RFFT:
    y = y[..., :fft_lengths[-1] // 2 + 1]
  elif fft_type == FftType.IRFFT:  # the Hermitian extension of the half spectrum, then real
    n = fft_lengths[-1]
    half = y.copy()
    half[..., 0] = half[..., 0].real
    if n % 2 == 0:
      half[..., -1] = half[..., -1].real
    tail = np.conj(half[..., 1:(n + 1) // 2][..., ::-1])
    y = (np.concatenate([half, tail], -1) @ _dft(n, True).T).real
  return y.astype(out_aval.dtype)


# ----------------------------------------------------------------- transpose, batching


def _lax():
  from nbjax import lax
  return lax


def _weigh(ct, n, scale, divide):
  """``ct`` times ``scale * w`` (``divide``: ``scale / w``) along its last axis, ``w = [1, 2,
  ..., 2, 1 (even n)]``: how often each entry of a Hermitian half spectrum counts in the
  full one."""
  lax = _lax()
  a = get_aval(ct)
  w = np.full(a.shape[-1], 2.0)
  w[0] = 1.0
  if n % 2 == 0:
    w[-1] = 1.0
  w = np.asarray(scale / w if divide else scale * w, a.dtype)
  return lax.mul(ct, lax.broadcast_in_dim(w, a.shape, (a.ndim - 1,)))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
  lax = _lax()
  n, size = fft_lengths[-1], math.prod(fft_lengths)
  if fft_type == FftType.RFFT:  # <ct, rfft x> = <N irfft(conj(ct) / w), x>
    return [fft(_weigh(lax.conj(ct), n, size, True), FftType.IRFFT, fft_lengths)]
  if fft_type == FftType.IRFFT:  # conj(w rfft(ct) / N): JAX's pairing for complex values
    return [lax.conj(_weigh(fft(ct, FftType.RFFT, fft_lengths), n, 1.0 / size, False))]
  return [fft(ct, fft_type, fft_lengths)]  # the DFT matrix is symmetric


def _fft_batch(vals, dims, *, fft_type, fft_lengths):
  x, = vals
  bd, = dims
  if bd >= get_aval(x).ndim - len(fft_lengths):  # a transformed axis: batch axis to the front
    x, bd = batching.moveaxis(x, bd, 0), 0
  return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), bd


# ----------------------------------------------------------------- test metadata


def _rand(rng, shape, d):
  d = np.dtype(d)
  if d.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
  return rng.standard_normal(shape).astype(d)


def _fft_samples(rng, dtype):
  """Every FFT type at ``dtype``'s precision (real operands for RFFT, complex for the
  others), interleaved so that the first cases already cover all four; 1-3 axes, odd and
  even lengths, length 1, leading batch axes and an empty batch."""
  r, c = _R.get(np.dtype(dtype), np.dtype(dtype)), _C.get(np.dtype(dtype), np.dtype(dtype))
  T = FftType
  half = lambda s: s[:-1] + (s[-1] // 2 + 1,)
  cases = []
  for lead, lengths in [((), (8,)), ((3,), (5,)), ((2,), (4, 6)), ((), (3, 2, 5)), ((2, 1), (7,)),
                        ((), (1,)), ((0,), (4,)), ((2,), (3, 3))]:
    for t in (T.FFT, T.RFFT, T.IFFT, T.IRFFT):
      shape = lead + (half(lengths) if t == T.IRFFT else lengths)
      cases.append(([_rand(rng, shape, r if t == T.RFFT else c)],
                    dict(fft_type=t, fft_lengths=lengths)))
  return cases


def _fft_bad(rng):
  from nbjax.array import Array
  c, f = Array(np.ones((2, 8), np.complex64)), Array(np.ones((2, 8), np.float32))
  T = FftType
  return [([f], dict(fft_type=T.FFT, fft_lengths=(8,)), ValueError),
          ([c], dict(fft_type=T.RFFT, fft_lengths=(8,)), ValueError),
          ([f], dict(fft_type=T.IRFFT, fft_lengths=(14,)), ValueError),
          ([c], dict(fft_type=T.FFT, fft_lengths=(4,)), ValueError),
          ([c], dict(fft_type=T.IRFFT, fft_lengths=(8,)), ValueError),
          ([c], dict(fft_type=T.FFT, fft_lengths=(2, 2, 8)), ValueError),
          ([c], dict(fft_type=T.FFT, fft_lengths=()), ValueError),
          ([Array(np.ones((2, 8), np.int32))], dict(fft_type=T.RFFT, fft_lengths=(8,)), ValueError),
          ([c], dict(fft_type=0, fft_lengths=(8,)), TypeError)]


fft_p = Primitive("fft")
registry.register(
    fft_p, family="fft", impls={"numpy": _fft_numpy}, abstract_eval=_fft_abstract_eval,
    batch=_fft_batch,
    meta=dict(dtypes=[np.dtype(t) for t in ("float32", "float64", "complex64", "complex128")],
              reference=_fft_reference, samples=_fft_samples, differentiable=True, linear=True,
              bad_inputs=_fft_bad,
              tol={np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.complex64): (1e-4, 1e-5),
                   np.dtype(np.float64): (1e-11, 1e-12), np.dtype(np.complex128): (1e-11, 1e-12)},
              note="NumPy's pocketfft (np.fft: single precision kept); no numba FFT"))
ad.deflinear2(fft_p, _fft_transpose)


def _operand_dtype(real, d):
  """The dtype ``lax.fft`` casts an operand of dtype ``d`` to (JAX's): RFFT (``real``) takes
  floats, the others complex numbers of ``d``'s precision (64-bit integers: the default ones,
  narrower integers and bool 32-bit ones, as JAX's)."""
  if real:
    if d.kind == "c":
      raise ValueError(f"fft: only real valued inputs supported for rfft, got {d}")
    return d if dtypes.is_inexact(d) else (dtypes.default_float_dtype() if d.itemsize == 8
                                           else np.dtype(np.float32))
  if d.kind == "c":
    return d
  return np.dtype(np.complex64) if d.itemsize <= 4 else \
      dtypes.default_complex_dtype()


def fft(x, fft_type, fft_lengths):
  """Fast Fourier transform over the innermost ``len(fft_lengths)`` axes (1 to 3).

  Args:
    x: the operand: cast to the complex dtype of its precision for ``FFT``, ``IFFT`` and
      ``IRFFT``, to the floating dtype of its precision for ``RFFT`` (complex operands are an
      error there).
    fft_type: a :class:`FftType` or one of ``"fft"``, ``"ifft"``, ``"rfft"``, ``"irfft"``.
    fft_lengths: the lengths of the transformed axes. For ``RFFT`` the output's last axis has
      ``fft_lengths[-1] // 2 + 1`` entries; for ``IRFFT`` the operand's last axis must have
      that many and the output's has ``fft_lengths[-1]``. Empty: ``x`` (cast) is returned.

  Returns:
    The transform: complex for ``FFT``/``IFFT``/``RFFT``, real for ``IRFFT``; unnormalised
    forward transforms and inverse transforms scaled by ``1 / prod(fft_lengths)``.
  """
  typ = fft_type if type(fft_type) is FftType else _fft_type(fft_type)
  if type(fft_lengths) is not tuple:  # (abstract eval checks the entries)
    try:
      fft_lengths = tuple(map(operator.index, fft_lengths))
    except TypeError:
      raise TypeError(f"fft: fft_lengths must be a sequence of ints, got {fft_lengths!r}") from None
  aval = get_aval(x)
  want = _operand_dtype(typ == FftType.RFFT, aval.dtype)
  if want != aval.dtype or aval.weak_type:
    x = _convert_element_type(x, want)
  if not fft_lengths:  # XLA has no 0-D FFT
    return x
  return fft_p.bind(x, fft_type=typ, fft_lengths=fft_lengths)


# ----------------------------------------------------------------- jet (Taylor) rules
jet.deflinear(fft_p)


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import hlo  # noqa: E402


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
  return [hlo.fft(x, hlo.FftTypeAttr.get(fft_type.name), list(fft_lengths))]


lowering.register(fft_p, _fft_lowering)
