"""Transcendental functions for numba kernels that LLVM can vectorize.

numba's ``np.exp``/``np.log``/``np.log1p`` call scalar libm (no SVML in PyPI's llvmlite, see
``shared/notes/kernel-speed-facts.md``), so a loop that calls them runs one element at a time
and loses to NumPy's SIMD loops 3-6x. These are branch-free polynomial versions (range
reduction, Horner polynomial, exponent arithmetic through bit casts) that LLVM turns into
vector code when they sit in a loop. ``exp`` of a float32 is computed in float32 (twice the
lanes; within 1.5 ulp in the tests), everything else in float64 (within 3 ulp of float64,
so float32 results are correctly rounded or nearly); IEEE special values (NaN, +-inf, 0,
subnormals) as NumPy's. ``nbjax.extend.simd`` re-exports them for
user kernels (``nbjax.extend.numba_primitive``). Imports numba and NumPy only.
"""
import numpy as np
from llvmlite import ir as llir
from numba import njit, types
from numba.extending import intrinsic, overload

__all__ = ["exp", "log", "log1p", "softplus", "sigmoid"]


@intrinsic
def _as_bits(typingctx, x):
  """float64 -> its int64 bit pattern; float32 -> int32."""
  ity = {types.float64: types.int64, types.float32: types.int32}.get(x)
  if ity is None:
    return None
  return ity(x), lambda ctx, b, sig, args: b.bitcast(args[0], llir.IntType(ity.bitwidth))


def _from_bits_as(fty, lty):
  @intrinsic
  def from_bits(typingctx, i):
    """The low bits of an integer as a float of ``fty``'s width."""
    if not isinstance(i, types.Integer):
      return None

    def codegen(ctx, b, sig, args):
      v, w = args[0], fty.bitwidth
      v = b.trunc(v, llir.IntType(w)) if v.type.width > w else (
          b.zext(v, llir.IntType(w)) if v.type.width < w else v)
      return b.bitcast(v, lty)
    return fty(i), codegen
  return from_bits


_from_bits = _from_bits_as(types.float64, llir.DoubleType())


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00


@njit(inline="always")
def _exp_poly(r):
  # Taylor series of e^r to degree 13: |error| < 4e-18 for |r| <= ln(2)/2
  p = 1.6059043836821613e-10
  p = p * r + 2.08767569878681e-09
  p = p * r + 2.505210838544172e-08
  p = p * r + 2.755731922398589e-07
  p = p * r + 2.7557319223985893e-06
  p = p * r + 2.48015873015873e-05
  p = p * r + 0.0001984126984126984
  p = p * r + 0.001388888888888889
  p = p * r + 0.008333333333333333
  p = p * r + 0.041666666666666664
  p = p * r + 0.16666666666666666
  p = p * r + 0.5
  p = p * r + 1.0
  return p * r + 1.0


# Integer <-> float conversions go through the "magic number" 1.5 * 2**52 and 2**52 (AVX2
# has no vector int64 <-> float64 conversion and no 64-bit arithmetic shift; with them
# LLVM would scalarize the loop).
_MAGIC = 6755399441055744.0   # 1.5 * 2**52: x + _MAGIC rounds x to an integer in the low bits
_TWO52 = 4503599627370496.0   # 2**52
_TWO52_BITS = 0x4330000000000000


@njit(inline="always")
def _pow2(kf):
  """2**kf for an integral float kf in [-1022, 1023] (the exponent field built by shifts)."""
  return _from_bits(_as_bits(kf + (_MAGIC + 1023.0)) << 52)


@njit(inline="always")
def _exp64(x):
  """e**x (float64 arithmetic; cast the result to float32 for float32 kernels)."""
  x = np.float64(x)
  t = x if x < 710.0 else 710.0       # NaN -> 710 here, restored below
  t = t if t > -746.0 else -746.0
  k = (t * _INV_LN2 + _MAGIC) - _MAGIC  # round to nearest, |k| <= 1076
  r = (t - k * _LN2_HI) - k * _LN2_LO
  k1 = np.floor(k * 0.5)              # 2**k as two normal factors
  y = _exp_poly(r) * _pow2(k1) * _pow2(k - k1)
  return y if x == x else x


@njit(inline="always")
def _log64(x):
  """Natural logarithm (NaN below 0, -inf at 0)."""
  x = np.float64(x)
  sub = x < 2.2250738585072014e-308   # subnormal (or <= 0): scale into the normal range
  xs = x * 18014398509481984.0 if sub else x
  bits = _as_bits(xs)
  eb = _from_bits(((bits & 0x7FF0000000000000) >> 52) | _TWO52_BITS) - _TWO52  # biased exponent
  m = _from_bits((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000)  # [1, 2)
  big = m > 1.4142135623730951
  m = m * 0.5 if big else m
  ef = eb - (1023.0 + 54.0 if sub else 1023.0) + (1.0 if big else 0.0)
  f = m - 1.0
  s = f / (2.0 + f)
  z = s * s
  # log(m) = 2 atanh(s) = 2 (s + s^3/3 + ... + s^21/21), |s| <= 0.1716
  p = 0.047619047619047616
  p = p * z + 0.05263157894736842
  p = p * z + 0.058823529411764705
  p = p * z + 0.06666666666666667
  p = p * z + 0.07692307692307693
  p = p * z + 0.09090909090909091
  p = p * z + 0.1111111111111111
  p = p * z + 0.14285714285714285
  p = p * z + 0.2
  p = p * z + 0.3333333333333333
  lm = 2.0 * s + 2.0 * s * z * p
  y = ef * _LN2_HI + (lm + ef * _LN2_LO)
  y = y if x > 0.0 else (-np.inf if x == 0.0 else np.nan)
  return y if x < np.inf else x       # +inf -> inf, NaN -> NaN


@njit(inline="always")
def _log1p64(x):
  """log(1 + x), accurate for small x."""
  x = np.float64(x)
  u = 1.0 + x
  d = u - 1.0
  y = _log64(u) * (x / d) if d != 0.0 else x
  return y if x < np.inf else x


@njit(inline="always")
def _softplus64(x):
  """log(1 + e**x) without overflow: max(x, 0) + log1p(e**-|x|)."""
  x = np.float64(x)
  a = x if x >= 0.0 else -x
  return (x if x > 0.0 else 0.0) + _log1p64(_exp64(-a)) if x == x else x


@njit(inline="always")
def _sigmoid64(x):
  """1 / (1 + e**-x), with no overflow for large |x|."""
  x = np.float64(x)
  z = _exp64(-x if x >= 0.0 else x)
  return 1.0 / (1.0 + z) if x >= 0.0 else (z / (1.0 + z) if x == x else x)


# ----------------------------------------------------------------------- float32


_from_bits32 = _from_bits_as(types.float32, llir.FloatType())
_as_bits32 = _as_bits


_f = np.float32
_M32 = _f(12582912.0)  # 1.5 * 2**23
_LN2_HI32, _LN2_LO32, _INV_LN2_32 = _f(0.693359375), _f(-2.12194440e-4), _f(1.44269504)
_EXP_HI32, _EXP_LO32 = _f(89.0), _f(-104.0)
_B127, _C1, _HALF = _f(127.0), _f(1.0), _f(0.5)
_E2, _E3, _E4, _E5, _E6, _E7 = (_f(1 / 2), _f(1 / 6), _f(1 / 24), _f(1 / 120), _f(1 / 720),
                                _f(1 / 5040))


@njit(inline="always")
def _pow2_32(kf):
  """2**kf for an integral float32 kf in [-126, 127]."""
  return _from_bits32(_as_bits32(kf + (_M32 + _B127)) << 23)


@njit(inline="always")
def _exp32(x):
  t = x if x < _EXP_HI32 else _EXP_HI32
  t = t if t > _EXP_LO32 else _EXP_LO32
  k = (t * _INV_LN2_32 + _M32) - _M32
  r = (t - k * _LN2_HI32) - k * _LN2_LO32
  p = _E7 * r + _E6
  p = p * r + _E5
  p = p * r + _E4
  p = p * r + _E3
  p = p * r + _E2
  p = p * r + _C1
  p = p * r + _C1
  k1 = np.floor(k * _HALF)
  y = p * _pow2_32(k1) * _pow2_32(k - k1)
  return y if x == x else x


# ----------------------------------------------------------------------- by argument type

def _by_type(f32, f64, doc):
  """A function for kernels: ``f32`` (if any) on float32, else ``f64`` on float64."""
  def f(x):
    return f32.py_func(x) if f32 is not None and isinstance(x, np.float32) else \
        f64.py_func(np.float64(x))
  f.__doc__ = doc

  @overload(f, inline="always")
  def _ov(x):
    if x == types.float32 and f32 is not None:
      return lambda x: f32(x)
    if x == types.float32:  # float64 arithmetic, rounded once to float32
      return lambda x: np.float32(f64(x))
    if isinstance(x, (types.Float, types.Integer, types.Boolean)):
      return lambda x: f64(x)
    return None
  return f


exp = _by_type(_exp32, _exp64, "e**x.")
log = _by_type(None, _log64, "Natural logarithm (NaN below 0, -inf at 0).")
log1p = _by_type(None, _log1p64, "log(1 + x), accurate for small x.")
softplus = _by_type(None, _softplus64,
                    "log(1 + e**x) without overflow: max(x, 0) + log1p(e**-|x|).")
sigmoid = _by_type(None, _sigmoid64, "1 / (1 + e**-x), with no overflow for large |x|.")
