"""numba kernels for elementwise primitives.

Pipeline position: the bottom of eager execution. ``nbjax.lax.elementwise`` wraps these
kernels as the ``"numba"`` backend of each elementwise primitive. Every kernel works on
flat (1-D) C-contiguous buffers and writes into a caller-allocated ``out`` (so the caller
owns allocation and dtype). Binary/ternary kernels broadcast operands of size 1 (scalars); a kernel handed operands of
any other size returns without touching memory (never reads or writes out of bounds).

Kernels are generated from one template per arity and one scalar expression per
primitive (the tables below), compiled lazily per dtype signature and cached on disk
(``cache=True``): a second process loads them instead of compiling. Each kernel has a
serial variant (``kernel(name)``) and a two-core ``prange`` variant (``kernel(name, True)``);
``entry(dispatcher, *args)`` resolves the compiled entry point for one argument signature
so callers skip numba's generic dispatch on every call. ``fused(src)`` compiles a loop that
an eager program generates from the scalar expressions of a chain of ``EXACT`` kernels.

numba has no float16 arithmetic: callers hand float16 data in as float32. Integer
kernels see the operand types the caller chose (the shift kernels get unsigned/signed
views, so no kernel ever shifts by a negative or too-large amount: that is undefined in
LLVM). Float max/min order -0 below +0 and complex kernels (``*_complex``) follow XLA's
complex expansions, special values included (the section "XLA's complex arithmetic"), so
eager results equal jit's. Imports numba and numpy only.
"""
import hashlib
import math
import re

import numpy as np
from numba import carray, cfunc, njit, prange, typeof, types
from numba.extending import intrinsic
from numba.np.numpy_support import from_dtype

from kernels import threads

_TEMPLATES = {
    1: """
def {fn}(x, out):
  if x.size != out.size:
    return
  {pre}
  for i in {rng}(out.size):
    a = x[i]
    out[i] = {expr}
""",
    2: """
def {fn}(x, y, out):
  n = out.size
  if (x.size != n and x.size != 1) or (y.size != n and y.size != 1):
    return
  {pre}
  if x.size == n and y.size == n:
    for i in {rng}(n):
      a = x[i]
      b = y[i]
      out[i] = {expr}
  elif x.size == n:
    b = y[0]
    for i in {rng}(n):
      a = x[i]
      out[i] = {expr}
  elif y.size == n:
    a = x[0]
    for i in {rng}(n):
      b = y[i]
      out[i] = {expr}
  else:
    a = x[0]
    b = y[0]
    for i in {rng}(n):
      out[i] = {expr}
""",
    # a binary kernel with one operand broadcast in blocks (``kernel(name + "@bc")``): ``y``
    # (or ``x`` when ``swap``) holds one value per block of ``inner`` outputs (``inner`` > 0:
    # a (rows, 1) column against (rows, cols)) or one per position in a block (``inner`` < 0:
    # a (cols,) row), read in place instead of materialised at the output's shape
    "bc": """
def {fn}(x, y, out, inner, swap):
  n = out.size
  f = x if swap else y
  w = y if swap else x
  m = inner if inner > 0 else -inner
  if m == 0 or n % m or w.size != n or f.size != (n // m if inner > 0 else m):
    return
  {pre}
  if inner > 0 and swap:
    for o in {rng}(n // m):
      a = f[o]
      wo = w[o * m:o * m + m]
      oo = out[o * m:o * m + m]
      for j in range(m):
        b = wo[j]
        oo[j] = {expr}
  elif inner > 0:
    for o in {rng}(n // m):
      b = f[o]
      wo = w[o * m:o * m + m]
      oo = out[o * m:o * m + m]
      for j in range(m):
        a = wo[j]
        oo[j] = {expr}
  elif swap:
    for o in {rng}(n // m):
      wo = w[o * m:o * m + m]
      oo = out[o * m:o * m + m]
      for j in range(m):
        a = f[j]
        b = wo[j]
        oo[j] = {expr}
  else:
    for o in {rng}(n // m):
      wo = w[o * m:o * m + m]
      oo = out[o * m:o * m + m]
      for j in range(m):
        a = wo[j]
        b = f[j]
        oo[j] = {expr}
""",
    3: """
def {fn}_general(x, y, z, out, n):
  {pre}
  sx = 1 if x.size == n else 0
  sy = 1 if y.size == n else 0
  sz = 1 if z.size == n else 0
  for i in {rng}(n):
    a = x[i * sx]
    b = y[i * sy]
    c = z[i * sz]
    out[i] = {expr}


def {fn}(x, y, z, out):
  n = out.size
  if (x.size != n and x.size != 1) or (y.size != n and y.size != 1) or (z.size != n and z.size != 1):
    return
  {pre}
  if x.size == n and y.size == n and z.size == n:
    for i in {rng}(n):
      a = x[i]
      b = y[i]
      c = z[i]
      out[i] = {expr}
  elif y.size == n and x.size == 1 and z.size == 1:
    a = x[0]
    c = z[0]
    for i in {rng}(n):
      b = y[i]
      out[i] = {expr}
  else:  # (outlined: a third loop in this function kept LLVM from vectorising the others,
    {fn}_general(x, y, z, out, n)  # clamp by scalar bounds, 10^5 float32: 100 -> 30 us)
""",
}

# Templates with extra scalar parameters, keyed by kernel name.
_SPECIAL = {
    # float -> integer conversion as XLA: NaN -> 0, out-of-range values saturate.
    # ``lo``/``hi`` (float64) are the integer type's min and max+1; ``ilo``/``ihi`` its
    # min and max (typed as the output). Each branch stores separately (no unification).
    "convert_f2i": """
def {fn}(x, lo, hi, ilo, ihi, out):
  if x.size != out.size:
    return
  for i in {rng}(out.size):
    a = x[i].real
    if a != a:
      out[i] = 0
    elif a <= lo:
      out[i] = ilo
    elif a >= hi:
      out[i] = ihi
    else:
      out[i] = a
""",
    # x ** y for a static integer y, by squaring in JAX's multiplication order;
    # negative y takes the reciprocal (``one`` is 1 of the output type).
    "integer_pow": """
def {fn}(x, y, one, out):
  if x.size != out.size:
    return
  m = -y if y < 0 else y
  if y == 2:  # (squares and cubes in loops of their own, vectorised: _ipow's products)
    for i in {rng}(out.size):
      v = x[i]
      out[i] = v * v
    return
  if y == 3:
    for i in {rng}(out.size):
      v = x[i]
      out[i] = v * (v * v)
    return
  for i in {rng}(out.size):
    if m == 0:
      out[i] = one
    elif y < 0:
      out[i] = one / _ipow(x[i], m)
    else:
      out[i] = _ipow(x[i], m)
""",
    # complex z ** y with XLA's complex products and quotient (JAX's multiplication order)
    "integer_pow_complex": """
def {fn}(x, y, one, out):
  if x.size != out.size:
    return
  m = -y if y < 0 else y
  for i in {rng}(out.size):
    if m == 0:
      out[i] = one
    else:
      a = x[i]
      r, s = _cipow(a.real, a.imag, m)
      if y < 0:
        r, s = _cdiv(one.real, one.imag, r, s)
      out[i] = complex(r, s)
""",
    # complex -> real part: through the array's .real view (``x[i].real`` does not vectorize)
    "real": """
def {fn}(x, out):
  if x.size != out.size:
    return
  r = x.real
  for i in {rng}(out.size):
    out[i] = r[i]
""",
    "imag": """
def {fn}(x, out):
  if x.size != out.size:
    return
  r = x.imag
  for i in {rng}(out.size):
    out[i] = r[i]
""",
    "convert_bool_real": """
def {fn}(x, out):
  if x.size != out.size:
    return
  r = x.real
  for i in {rng}(out.size):
    out[i] = r[i] != 0
""",
    # nextafter on float16 by bits: x32/y32 are the float32 values, xb/yb the uint16 bits.
    "nextafter_f16": """
def {fn}(x32, y32, xb, yb, out):
  n = out.size
  if (x32.size != n and x32.size != 1) or (y32.size != n and y32.size != 1) or \
      xb.size != x32.size or yb.size != y32.size:
    return
  sx = 1 if x32.size == n else 0
  sy = 1 if y32.size == n else 0
  for i in {rng}(n):
    out[i] = _nextafter_bits(x32[i * sx], y32[i * sy], xb[i * sx], yb[i * sy])
""",
}

# Scalar expressions over operands a, b, c (numba nopython code); ``one`` is 1 of the
# output type (keeps float32 arithmetic in float32). ``_h`` helpers below.
UNARY = {
    "neg": "-a",
    "sign": "_sign(a)",
    "sign_complex": "_c(_csign(a.real, a.imag))",
    "floor": "np.floor(a)",
    "ceil": "np.ceil(a)",
    "round_away": "_round_away(a)",
    "round_even": "np.rint(a)",
    "is_finite": "np.isfinite(a)",
    "exp": "np.exp(a)",
    "exp2": "np.exp(a * 0.6931471805599453)",  # (XLA's exp2: exp(x * log(2)))
    "exp_complex": "_c(_s_exp(a.real, a.imag, _cexp(a.real, a.imag), 0))",
    "exp2_complex": "_c(_cexp2(a.real, a.imag))",
    "expm1_complex": "_c(_s_exp(a.real, a.imag, _cexpm1(a.real, a.imag), -1))",
    "sin_complex": "_c(_csin(a.real, a.imag))",
    "cos_complex": "_c(_ccos(a.real, a.imag))",
    "tan_complex": "_c(_ctan(a.real, a.imag))",
    "tanh_complex": "_c(_s_tanh(a.real, a.imag, _ctanh(a.real, a.imag)))",
    "log_complex": "_c(_s_log(a.real, a.imag, _clog(a.real, a.imag)))",
    "log1p_complex": "_c(_s_log(a.real, a.imag, _clog1p(a.real, a.imag)))",
    "logistic_complex": "_c(_clogistic(a.real, a.imag))",
    "sqrt_complex": "_c(_s_sqrt(a.real, a.imag, _csqrt(a.real, a.imag)))",
    "rsqrt_complex": "_c(_crsqrt(a.real, a.imag))",
    "abs_complex": "_cabs(a.real, a.imag)",
    "square_complex": "_c(_csquare(a.real, a.imag))",
    "sinh_complex": "_c(_s_sinh(a.real, a.imag, _csinh(a.real, a.imag, type(a.real)(-1))))",
    "cosh_complex": "_c(_s_cosh(a.real, a.imag, _csinh(a.real, a.imag, type(a.real)(1))))",
    "atan_complex": "_c(_catan(a.real, a.imag))",
    "atanh_complex": "_c(_s_atanh(a.real, a.imag, _catanh(a.real, a.imag)))",
    "asin_complex": "_c(_casin(a.real, a.imag))",
    "acos_complex": "_c(_s_acos(a.real, a.imag, _cacos(a.real, a.imag)))",
    "asinh_complex": "_c(_s_asinh(a.real, a.imag, _casinh(a.real, a.imag)))",
    "acosh_complex": "_c(_s_acosh(a.real, a.imag, _cacosh(a.real, a.imag)))",
    "log": "np.log(a)",
    "log1p": "np.log1p(a)",
    "expm1": "np.expm1(a)",
    "tanh": "np.tanh(a)",
    "logistic": "one / (one + np.exp(-a))",
    "sin": "np.sin(a)",
    "cos": "np.cos(a)",
    "tan": "np.tan(a)",
    "asin": "np.arcsin(a)",
    "acos": "np.arccos(a)",
    "atan": "np.arctan(a)",
    "sinh": "np.sinh(a)",
    "cosh": "np.cosh(a)",
    "asinh": "np.arcsinh(a)",
    "acosh": "np.arccosh(a)",
    "atanh": "np.arctanh(a)",
    "sqrt": "np.sqrt(a)",
    "rsqrt": "one / np.sqrt(a)",
    "cbrt": "np.cbrt(a)",
    "abs": "np.abs(a)",
    "square": "a * a",
    "not": "~a",
    "not_bool": "not a",
    "population_count": "_popcount(a)",
    "clz": "_clz(a, nbits)",
    "erf": "math.erf(np.float64(a))",
    "erf_f32": "_xla_erf_f32(np.float32(a))",
    "erfc": "math.erfc(np.float64(a))",
    "erf_inv": "_xla_erf_inv_f64(np.float64(a))",
    "erf_inv_f32": "_erf_inv_xla_f32(np.float32(a))",
    "exp_f32": "_xla_exp_f32(np.float32(a))",
    "exp2_f32": "_xla_exp_f32(np.float32(a) * np.float32(0.6931471805599453))",
    "expm1_f32": "_xla_expm1_f32(np.float32(a))",
    "tanh_f32": "_xla_tanh_f32(np.float32(a))",
    "logistic_f32": "_xla_logistic_f32(np.float32(a))",
    "log_f32": "_xla_log_f32(np.float32(a))",
    "log1p_f32": "_xla_log1p_f32(np.float32(a))",
    "lgamma": "_xla_lgamma_f64(np.float64(a))",
    "lgamma_f32": "_xla_lgamma_f32(np.float32(a))",
    "digamma": "_digamma(np.float64(a))",
    "digamma_f32": "_xla_digamma_f32(np.float32(a))",
    "conj": "np.conj(a)",
    "convert": "a",
    "convert_bool": "a != 0",
    "copy": "a",
}

BINARY = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / b",
    "div_recip": "a * (one / b)",  # a real a / broadcast(b), as XLA computes it (fused loops)
    "div_int": "_div_int(a, b)",
    "div_uint": "_div_uint(a, b)",
    "rem": "np.fmod(a, b)",
    "rem_int": "_rem_int(a, b)",
    "rem_uint": "_rem_uint(a, b)",
    "max": "_max(a, b)",
    "min": "_min(a, b)",
    "max_float": "_fmax(a, b)",
    "min_float": "_fmin(a, b)",
    "max_complex": "_max_complex(a, b)",
    "min_complex": "_min_complex(a, b)",
    "mul_complex": "_c(_cmul(a.real, a.imag, b.real, b.imag))",
    "div_complex": "_c(_cdiv(a.real, a.imag, b.real, b.imag))",
    "pow_complex": "_c(_cpow(a.real, a.imag, b.real, b.imag))",
    "pow": "a ** b",
    "atan2": "np.arctan2(a, b)",
    "atan2_complex": "_c(_catan2(a.real, a.imag, b.real, b.imag))",
    "nextafter": "np.nextafter(a, b)",
    "eq": "a == b",
    "ne": "a != b",
    "lt": "a < b",
    "le": "a <= b",
    "gt": "a > b",
    "ge": "a >= b",
    "and": "a & b",
    "or": "a | b",
    "xor": "a ^ b",
    "shift_left": "_shl(a, b, nbits)",
    "shift_right_arithmetic": "_sra(a, b, nbits)",
    "shift_right_logical": "_srl(a, b, nbits)",
    "complex": "complex(a, b)",
    "polygamma": "_polygamma(np.float64(a), np.float64(b))",
}

TERNARY = {
    "clamp": "_min(_max(b, a), c)",
    "clamp_float": "_clamp_float(a, b, c)",
}


# ------------------------------------------------------------- scalar helpers (inlined)


@njit(inline="always", cache=True)
def _sign(a):
  # -1/0/1; zeros (keeping -0.0) and NaN map to themselves, as XLA
  if a > 0:
    return 1
  if a < 0:
    return -1
  return a


@njit(inline="always", cache=True)
def _round_away(a):
  t = np.trunc(a)
  return t + np.copysign(1.0, a) if np.abs(a - t) >= 0.5 else t


@njit(inline="always", cache=True)
def _max(a, b):
  # NaN-propagating, as lax.max
  return a if (a >= b or a != a) else b


@njit(inline="always", cache=True)
def _min(a, b):
  return a if (a <= b or a != a) else b


@njit(inline="always", cache=True)
def _fmax(a, b):
  # IEEE maximum, as XLA's on floats: NaN propagates, -0 < +0 (a tie of zeros is a + b)
  return (a + b) if (a == 0 and b == 0) else (a if (a > b or a != a) else b)


@njit(inline="always", cache=True)
def _fmin(a, b):
  return -(-a - b) if (a == 0 and b == 0) else (a if (a < b or a != a) else b)


@njit(inline="always", cache=True)
def _clamp_float(lo, x, hi):
  # _fmin(_fmax(x, lo), hi) written as selects (no short-circuit branches), which LLVM
  # vectorises: 10^5 float32 against scalar bounds 120 -> 30 us (NumPy's clip 28)
  m = x if x > lo else lo
  m = x if x != x else m
  m = (x + lo) if (x == 0) & (lo == 0) else m
  r = m if m < hi else hi
  r = m if m != m else r
  return -(-m - hi) if (m == 0) & (hi == 0) else r


@njit(inline="always", cache=True)
def _max_complex(a, b):
  # JAX's rule: lexicographic on (real, imaginary) by ordered comparisons, so NaN parts
  # compare false and pick b
  return a if (a.imag > b.imag if a.real == b.real else a.real > b.real) else b


@njit(inline="always", cache=True)
def _min_complex(a, b):
  return a if (a.imag < b.imag if a.real == b.real else a.real < b.real) else b


@njit(inline="always", cache=True)
def _div_int(a, b):
  # C (truncating) division, as XLA: x/0 -> -1, INT_MIN/-1 -> INT_MIN (wraps); no trap
  if b == 0:
    return a - a - 1
  if b == -1:
    return -a
  q = a // b
  if q < 0 and q * b != a:
    q += 1
  return q


@njit(inline="always", cache=True)
def _div_uint(a, b):
  # x/0 -> all ones, as XLA
  return a // b if b != 0 else ~(a - a)


@njit(inline="always", cache=True)
def _rem_int(a, b):
  # C remainder (sign of the dividend), as XLA: x%0 -> x, INT_MIN%-1 -> 0
  if b == 0:
    return a
  if b == -1:
    return a - a
  r = a % b
  if r != 0 and (r < 0) != (a < 0):
    r -= b
  return r


@njit(inline="always", cache=True)
def _rem_uint(a, b):
  return a % b if b != 0 else a


@njit(inline="always", cache=True)
def _popcount(a):
  # ``a`` is unsigned (callers pass unsigned views); SWAR count over 64 bits
  v = np.uint64(a)
  v = v - ((v >> np.uint64(1)) & np.uint64(0x5555555555555555))
  v = (v & np.uint64(0x3333333333333333)) + ((v >> np.uint64(2)) & np.uint64(0x3333333333333333))
  v = (v + (v >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
  return (v * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(inline="always", cache=True)
def _clz(a, nbits):
  # ``a`` unsigned: the bit width minus the bit length (set bits after smearing the top one
  # down), in ``a``'s type
  v = np.uint64(a)
  v |= v >> np.uint64(1)
  v |= v >> np.uint64(2)
  v |= v >> np.uint64(4)
  v |= v >> np.uint64(8)
  v |= v >> np.uint64(16)
  v |= v >> np.uint64(32)
  return a - a + (nbits - _popcount(v))


@njit(inline="always", cache=True)
def _shl(a, b, nbits):
  # a, b unsigned: an amount >= the bit width gives 0, as XLA. The shift itself always
  # gets an in-range amount (masked), and the select stays vectorizable.
  r = a << (b & (nbits - 1))
  return r if b < nbits else a - a


@njit(inline="always", cache=True)
def _sra(a, b, nbits):
  # a, b signed: negative or too-large amounts (huge as unsigned) fill with the sign bit
  r = a >> (b & (nbits - 1))
  return r if (b >= 0 and b < nbits) else a >> (nbits - 1)


@njit(inline="always", cache=True)
def _srl(a, b, nbits):
  # a, b unsigned
  r = a >> (b & (nbits - 1))
  return r if b < nbits else a - a


@njit(inline="always", cache=True)
def _ipow(x, m):
  acc = x
  first = True
  while m > 0:
    if m & 1:
      if first:
        acc = x
        first = False
      else:
        acc = acc * x
    m >>= 1
    if m > 0:
      x = x * x
  return acc


@njit(inline="always", cache=True)
def _nextafter_bits(a, b, ab, bb):
  if a != a or b != b:
    return np.uint16(0x7E00)
  if a == b:
    return bb
  if a == 0:
    return np.uint16((bb & np.uint16(0x8000)) | np.uint16(1))
  if (a < b) == (a > 0):
    return np.uint16(ab + np.uint16(1))
  return np.uint16(ab - np.uint16(1))


# XLA's float32 exp, expm1, log, log1p, tanh, logistic and erf_inv, operation for operation as
# XLA's CPU code computes them (jaxlib 0.10: its exp/log/log1p/tanh intrinsics, its expm1 and
# logistic expansions, chlo's erf_inv; constants read from XLA's dumped LLVM IR, multiply-adds
# contracted where its machine code contracts them), so eager float32 results, and the
# samplers built on them (random.normal, exponential, gamma...), are JAX's bits. Each op
# rounds to float32; numba does not contract a * b + c into an FMA without fastmath.
def _f32bits(h):
  return np.frombuffer(np.uint32(h).tobytes(), np.float32)[0]


_F32 = np.float32
_LOG_C = [_f32bits(h) for h in (0x3D9021BB, 0xBDEBD1B8, 0xBDFE5D4F, 0x3E11E9BF, 0x3E4CCEAC,
                                0xBE7FFFFC, 0x3DEF251A, 0xBE2AAE50, 0x3EAAAAAA, 0xB95E8083,
                                0x3F318000, 0x3F3504F3, 0x00800000)]
(_LA0, _LA1, _LB0, _LB1, _LC0, _LC1, _LA2, _LB2, _LC2, _LQ1, _LQ2, _SQRT_HALF_F32,
 _FLT_MIN) = _LOG_C
_L1P_DEN = [_f32bits(h) for h in (0x417101AD, 0x42A6185B, 0x435DC32D, 0x439A8CA3, 0x43586D8A,
                                  0x42707982)]
_L1P_NUM = [_F32(4.527e-05)] + [_f32bits(h) for h in (0x3EFF40C5, 0x40D284FA, 0x41EF4B9C,
                                                      0x4273CC76, 0x426473AD, 0x41A05101)]
_L1P_SMALL = _f32bits(0x3ED413CD)
(_D0, _D1, _D2, _D3, _D4, _D5) = _L1P_DEN
(_N0, _N1, _N2, _N3, _N4, _N5, _N6) = _L1P_NUM
_EI_LO = [_F32(c) for c in (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                            0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                            1.50140941)]
_EI_HI = [_F32(c) for c in (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                            0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)]
_EI_LO_T, _EI_HI_T = tuple(_EI_LO), tuple(_EI_HI)


@intrinsic
def _fma32(typingctx, a, b, c):
  """``a * b + c`` rounded once (LLVM's fma): where XLA's machine code contracts them."""
  def codegen(context, builder, sig, args):
    return builder.fma(*args)
  return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def _fma64(typingctx, a, b, c):
  """``_fma32`` for float64."""
  def codegen(context, builder, sig, args):
    return builder.fma(*args)
  return types.float64(types.float64, types.float64, types.float64), codegen


@intrinsic
def _bits32(typingctx, a):
  """The bits of a float32 as a uint32."""
  def codegen(context, builder, sig, args):
    return builder.bitcast(args[0], context.get_value_type(types.uint32))
  return types.uint32(types.float32), codegen


@intrinsic
def _f32_of_bits(typingctx, a):
  """The float32 whose bits are a uint32."""
  def codegen(context, builder, sig, args):
    return builder.bitcast(args[0], context.get_value_type(types.float32))
  return types.float32(types.uint32), codegen


@intrinsic
def _f64_of_bits(typingctx, a):
  """The float64 whose bits are a uint64."""
  def codegen(context, builder, sig, args):
    return builder.bitcast(args[0], context.get_value_type(types.float64))
  return types.float64(types.uint64), codegen


@njit(inline="always", cache=True)
def _ftz32(x):
  """``x``, a subnormal flushed to a zero of its sign: XLA's CPU code runs with FTZ/DAZ."""
  return x if abs(x) >= _FLT_MIN else x * _F32(0.0)


# These compute every branch and select at the end, so the kernels' loops vectorise (8 lanes):
# 0.8 ms (log) and 2.9 ms (log1p) per 1e6 float32, against NumPy's SIMD loops' 3.2 and 13.5.
# They flush subnormals (``_ftz32``) where XLA's code reads or produces them.
@njit(inline="always", cache=True)
def _xla_log_f32(y):
  b = _bits32(y if y > _FLT_MIN else _FLT_MIN)
  e = np.int32(b >> np.uint32(23)) - np.int32(126)  # frexp by bits: y = m * 2**e
  m = _f32_of_bits((b & np.uint32(0x007FFFFF)) | np.uint32(0x3F000000))
  lt = m < _SQRT_HALF_F32
  t = m if lt else _F32(0.0)
  ef = _F32(e) - (_F32(1.0) if lt else _F32(0.0))
  z = (m + _F32(-1.0)) + t
  z2 = z * z
  z3 = z2 * z
  a = _fma32(_fma32(z, _LA0, _LA1), z, _LA2)
  c1 = _fma32(_fma32(z, _LB0, _LB1), z, _LB2)
  c2 = _fma32(_fma32(z, _LC0, _LC1), z, _LC2)
  r = _fma32(_fma32(_fma32(a, z3, c1), z3, c2), z3, ef * _LQ1)
  r = _fma32(ef, _LQ2, _fma32(-z2, _F32(0.5), z) + r)
  r = r if y >= _F32(0.0) else _F32(np.nan)  # negative or NaN
  r = _F32(-np.inf) if abs(y) < _FLT_MIN else r
  return y if y == _F32(np.inf) else r


_EXP_C = [_f32bits(h) for h in (0x3FB8AA3B, 0x3F318000, 0xB95E8083, 0x39506967, 0x3AB743CE,
                                0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA)]
(_LOG2E_F32, _EC1, _EC2, _EP0, _EP1, _EP2, _EP3, _EP4) = _EXP_C


@njit(inline="always", cache=True)
def _xla_exp_parts_f32(x):
  # exp(x) = y * s, s = 2**n (XLA's logistic adds 1 to the product in one fma)
  x = min(max(x, _F32(-87.8)), _F32(88.8)) if x == x else x
  n = np.floor(_fma32(x, _LOG2E_F32, _F32(0.5)))  # x = n log(2) + r
  n = min(max(n, _F32(-127.0)), _F32(127.0))
  r = _fma32(-n, _EC2, _fma32(-n, _EC1, x))
  y = _fma32(_fma32(_fma32(_fma32(_fma32(r, _EP0, _EP1), r, _EP2), r, _EP3), r, _EP4), r,
             _F32(0.5))
  y = _fma32(y, r * r, r) + _F32(1.0)
  return y, _f32_of_bits(np.uint32((np.int32(n) + np.int32(127)) << np.int32(23)))


@njit(inline="always", cache=True)
def _xla_exp_f32(x):
  y, s = _xla_exp_parts_f32(x)
  return _ftz32(y * s)


@njit(inline="always", cache=True)
def _xla_logistic_f32(x):
  y, s = _xla_exp_parts_f32(-x)
  return _ftz32(_F32(1.0) / _fma32(y, s, _F32(1.0)))


_TANH_P = [_f32bits(h) for h in (0xA59F25C0, 0x2A61337E, 0xAEBD37FF, 0x335C0041, 0x3779434A,
                                 0x3A270DED, 0x3BA059DC)]
_TANH_Q = [_f32bits(h) for h in (0x35A0D3D8, 0x38F895D6, 0x3B14AA05, 0x3BA059DD)]
(_TP0, _TP1, _TP2, _TP3, _TP4, _TP5, _TP6), (_TQ0, _TQ1, _TQ2, _TQ3) = _TANH_P, _TANH_Q
_TANH_CLAMP = _f32bits(0x40FFF644)


@njit(inline="always", cache=True)
def _xla_tanh_f32(x):
  c = min(max(x, -_TANH_CLAMP), _TANH_CLAMP) if x == x else x
  c2 = c * c
  p = _fma32(c2, _fma32(c2, _fma32(c2, _fma32(c2, _fma32(c2, _fma32(c2, _TP0, _TP1), _TP2),
                                                  _TP3), _TP4), _TP5), _TP6)
  q = _fma32(c2, _fma32(c2, _fma32(c2, _TQ0, _TQ1), _TQ2), _TQ3)
  r = (c * p) / q
  r = x if abs(x) < _F32(4e-4) else r
  return _F32(np.copysign(_F32(1.0), x)) if abs(x) >= _F32(20.0) else r


@njit(inline="always", cache=True)
def _xla_expm1_f32(x):
  # exp(x) - 1 above |x| = 1/2, else tanh(x/2) (exp(x) + 1)
  e = _xla_exp_f32(x)
  h = _ftz32(x * _F32(0.5))
  r = e + _F32(-1.0) if abs(x) > _F32(0.5) else _xla_tanh_f32(h) * (e + _F32(1.0))
  return x if h == _F32(0.0) else r


@njit(inline="always", cache=True)
def _xla_log1p_f32(x):
  s = _ftz32(x)
  x0 = s * _F32(0.0)
  den = _fma32(_fma32(_fma32(_fma32(_fma32(_fma32(x0 + _F32(1.0), s, _D0), s, _D1), s, _D2),
                                    s, _D3), s, _D4), s, _D5)
  num = _fma32(_fma32(_fma32(_fma32(_fma32(_fma32(x0 + _N0, s, _N1), s, _N2), s, _N3), s, _N4),
                      s, _N5), s, _N6)
  s2 = s * s
  small = s + _fma32(s2, _F32(-0.5), (s * s2) * (num / den))
  big = _xla_log_f32(x + _F32(1.0))
  return small if abs(x) < _L1P_SMALL else big


_LG_C = [_F32(c) for c in (676.520386, -1259.13916, 771.323425, -176.615036, 12.5073433,
                           -0.138571098, 9.98436917e-06, 1.50563267e-07)]
(_LG0, _LG1, _LG2, _LG3, _LG4, _LG5, _LG6, _LG7) = _LG_C
_LG_T = tuple(_LG_C)


@njit(inline="always", cache=True)
def _xla_lgamma_f32(x):
  # XLA's float32 lgamma as its CPU compiler emits it (read from the optimised HLO): Lanczos
  # (g = 7, 8 terms) on z = x - 1, log(t) as log1p(z/7.5) + log(7.5), one fused multiply-add;
  # Euler's reflection below 1/2 with sin(pi * reduced frac |x|)
  a = abs(x)
  reflect = x < _F32(0.5)
  fr = a - np.floor(a)
  lsin = _xla_log_f32(np.sin((_F32(1.0) - fr if _F32(0.5) < fr else fr) * _F32(3.14159274)))
  z = -x if reflect else x + _F32(-1.0)
  lt = _xla_log1p_f32(z * _F32(0.13333334)) + _F32(2.01490307)
  base = _fma32((z + _F32(0.5)) - (z + _F32(7.5)) / lt, lt, _F32(0.918938518))
  acc = _LG0 / (z + _F32(1.0)) + _F32(1.0)
  acc = acc + _LG1 / (z + _F32(2.0))
  acc = acc + _LG2 / (z + _F32(3.0))
  acc = acc + _LG3 / (z + _F32(4.0))
  acc = acc + _LG4 / (z + _F32(5.0))
  acc = acc + _LG5 / (z + _F32(6.0))
  acc = acc + _LG6 / (z + _F32(7.0))
  acc = acc + _LG7 / (z + _F32(8.0))
  log_y = base + _xla_log_f32(acc)
  r = ((_F32(1.14472985) - lsin) - log_y if np.isfinite(lsin) else -lsin) if reflect else log_y
  return _F32(np.inf) if a == _F32(np.inf) else r


@njit(inline="always", cache=True)
def _xla_digamma_f32(x):
  # XLA's float32 digamma: float64's expansion (below) in float32, subnormals flushed
  x = _ftz32(x)
  z = -x if x < _F32(0.5) else x + _F32(-1.0)
  lt = _xla_log1p_f32(z * _F32(0.13333334)) + _F32(2.01490307)
  t = z + _F32(1.0)
  num = _F32(0.0) - _LG0 / (t * t)
  den = _LG0 / t + _F32(1.0)
  for k in range(1, 8):
    t = z + _F32(k + 1.0)
    num = num - _LG_T[k] / (t * t)
    den = den + _LG_T[k] / t
  r = lt + num / den - _F32(7.0) / (z + _F32(7.5))
  if x < _F32(0.5):
    p = (x + abs(np.floor(x + _F32(0.5)))) * _F32(3.14159274)
    r = r - (np.cos(p) * _F32(3.14159274)) / np.sin(p)
  return _F32(np.nan) if x <= _F32(0.0) and x == np.floor(x) else r


# XLA's float64 log1p, lgamma and digamma as its CPU compiler emits them (read from the
# optimised HLO; bit-for-bit equal to jit on 2e5 inputs, special values included): Cephes'
# rational log1p below sqrt(2) - 1 (fused multiply-adds), else log(1 + x); the float32
# functions' Lanczos expansion (g = 7, 9 terms) and Euler's reflection, in float64
_L1P_NUM64 = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1,
              6.5787325942061044846969e0, 2.9911919328553073277375e1,
              6.0949667980987787057556e1, 5.7112963590585538103336e1,
              2.0039553499201281259648e1)
_L1P_DEN64 = (1.5062909083469192043167e1, 8.3047565967967209469434e1,
              2.2176239823732856465394e2, 3.0909872225312059774938e2,
              2.1642788614495947685003e2, 6.0118660497603843919306e1)
(_N064, _N164, _N264, _N364, _N464, _N564, _N664) = _L1P_NUM64
(_D064, _D164, _D264, _D364, _D464, _D564) = _L1P_DEN64
_LG64 = (676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
         12.507343278686905, -0.13857109526572012, 9.9843695780195716e-06,
         1.5056327351493116e-07)
_LG_BASE64, _LOG_PI, _HALF_LOG_2PI = 0.99999999999980993, 1.1447298858494002, 0.91893853320467267


@njit(inline="always", cache=True)
def _xla_log1p_f64(x):
  x0 = x * 0.0
  den = _fma64(_fma64(_fma64(_fma64(_fma64(_fma64(x0 + 1.0, x, _D064), x, _D164), x, _D264),
                              x, _D364), x, _D464), x, _D564)
  num = _fma64(_fma64(_fma64(_fma64(_fma64(_fma64(x0 + _N064, x, _N164), x, _N264), x, _N364),
                              x, _N464), x, _N564), x, _N664)
  x2 = x * x
  small = x + _fma64(x2, -0.5, (x * x2) * (num / den))
  return small if abs(x) < 0.41421356237309504880 else math.log(x + 1.0)


@njit(inline="always", cache=True)
def _lanczos_z(x):
  """Lanczos' argument for x: 1 - x reflected below 1/2, minus 1."""
  return -x if x < 0.5 else x + -1.0


@njit(inline="always", cache=True)
def _lanczos_lt(z):
  """log(z + g + 1/2) - 1 for Lanczos' argument z (g = 7), as XLA computes it."""
  return _xla_log1p_f64(z * 0.13333333333333333) + 2.0149030205422647


@njit(inline="always", cache=True)
def _xla_lgamma_f64(x):
  a = abs(x)
  z = _lanczos_z(x)
  lt = _lanczos_lt(z)
  base = _fma64((z + 0.5) - (z + 7.5) / lt, lt, _HALF_LOG_2PI)
  acc = _LG64[0] / (z + 1.0) + _LG_BASE64
  for k in range(1, 8):
    acc = acc + _LG64[k] / (z + (k + 1.0))
  r = base + math.log(acc)
  if x < 0.5:  # (XLA computes the reflection everywhere and selects)
    fr = a - np.floor(a)
    lsin = math.log(math.sin((1.0 - fr if 0.5 < fr else fr) * math.pi))
    r = (_LOG_PI - lsin) - r if np.isfinite(lsin) else -lsin
  return np.inf if a == np.inf else r


@njit(inline="always", cache=True)
def _digamma(x):
  # XLA's float64 digamma: the Lanczos sum's logarithmic derivative; NaN at non-positive
  # integers; for x < 1/2, psi(1 - x) - pi cot(pi x) with x shifted by |floor(x + 1/2)|
  return _digamma_z(x, _lanczos_z(x))


@njit(inline="always", cache=True)
def _digamma_z(x, z):
  # _digamma given Lanczos' argument z (XLA folds digamma(a + 1)'s (a + 1) - 1 to a)
  lt = _lanczos_lt(z)
  t = z + 1.0
  num = 0.0 - _LG64[0] / (t * t)
  den = _LG64[0] / t + _LG_BASE64
  for k in range(1, 8):
    t = z + (k + 1.0)
    num = num - _LG64[k] / (t * t)
    den = den + _LG64[k] / t
  r = lt + num / den - 7.0 / (z + 7.5)
  if x < 0.5:
    p = (x + abs(np.floor(x + 0.5))) * math.pi
    r = r - (math.cos(p) * math.pi) / math.sin(p)
  return np.nan if x <= 0.0 and x == np.floor(x) else r


@njit(inline="always", cache=True)
def _xla_exp_f64(x):
  # XLA's float64 exp as its CPU compiler emits it (Cephes' rational approximation, as Eigen's
  # pexp; equal to jit's on 2.5e5 inputs over [-745, 710], special values included): x
  # clamped, x = n log(2) + g (log(2) in two parts), e^g = 1 + 2 P(g^2) g / (Q(g^2) - P(g^2) g)
  # in fused multiply-adds, times 2**n (n reaches 1024: two factors); 0 below the clamp.
  xc = min(max(x, -708.3964185322641), 709.782712893384) if x == x else x
  n = np.floor(_fma64(xc, 1.4426950408889634073599, 0.5))
  g = _fma64(-n, 1.42860682030941723212e-6, _fma64(-n, 0.693145751953125, xc))
  g2 = g * g
  p = _fma64(_fma64(1.26177193074810590878e-4, g2, 3.02994407707441961300e-2), g2,
             9.99999999999999999910e-1) * g
  q = _fma64(_fma64(_fma64(3.00198505138664455042e-6, g2, 2.52448340349684104192e-3), g2,
                    2.27265548208155028766e-1), g2, 2.00000000000000000009e0)
  e = _fma64(p / (q - p), 2.0, 1.0)
  m = np.int64(n) if x == x else np.int64(0)
  h = m >> np.int64(1)  # 2**n as 2**h * 2**(n - h), both normal for n in [-1022, 1024]
  r = (e * _f64_of_bits(np.uint64(h + np.int64(1023)) << np.uint64(52))) * _f64_of_bits(
      np.uint64(m - h + np.int64(1023)) << np.uint64(52))
  r = 0.0 if x < -708.3964185322641 else r
  return np.inf if x > 709.782712893384 else r


_ERF_P = [_F32(c) for c in (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861,
                            0.18520832239976145, 1.128379143519084)]
_ERF_Q = [_F32(c) for c in (-1.1791602954361697e-7, 0.000023547966471313185,
                            0.0010179625278914885, 0.014070470171167667, 0.11098505178285362,
                            0.49746925110067538, 1.0)]
_ERP0, _ERP1, _ERP2, _ERP3, _ERP4 = _ERF_P
_ERQ0, _ERQ1, _ERQ2, _ERQ3, _ERQ4, _ERQ5, _ERQ6 = _ERF_Q


@njit(inline="always", cache=True)
def _xla_erf_f32(x):
  # XLA's float32 erf (its CPU code): Eigen's rational interpolant, x * P(x^2) / Q(x^2) with
  # each step a fused multiply-add, +-1 from |x| >= 3.8325069 (erf's last float below 1)
  x = _ftz32(x)
  x2 = x * x
  p = _fma32(x2, _ERP0, _ERP1)
  p = _fma32(x2, p, _ERP2)
  p = _fma32(x2, p, _ERP3)
  p = x * _fma32(x2, p, _ERP4)
  q = _fma32(x2, _ERQ0, _ERQ1)
  q = _fma32(x2, q, _ERQ2)
  q = _fma32(x2, q, _ERQ3)
  q = _fma32(x2, q, _ERQ4)
  q = _fma32(x2, q, _ERQ5)
  q = _fma32(x2, q, _ERQ6)
  return np.copysign(_F32(1.0), x) if _F32(3.832506856900711) <= abs(x) else p / q


@njit(inline="always", cache=True)
def _erf_inv_xla_f32(x):
  x = _ftz32(x)
  w = -_xla_log1p_f32(x * -x)
  lo = w < _F32(5.0)
  c = _EI_LO_T if lo else _EI_HI_T
  w = w - _F32(2.5) if lo else _F32(math.sqrt(np.float64(w))) - _F32(3.0)
  p = c[0]
  for k in range(1, 9):
    p = _fma32(p, w, c[k])
  if abs(x) == _F32(1.0):
    return x * _F32(np.inf)
  return _ftz32(p * x)


# XLA's float64 erf_inv (chlo's: Giles' double-precision polynomials in w = -log1p(-x^2),
# t = w - 3.125 below 6.25, sqrt(w) - 3.25 below 16, sqrt(w) - 5 above; Horner steps fused
# multiply-adds; subnormals flushed), as its CPU compiler emits it: bit-for-bit equal to jit
_EI64_LO = np.array((-3.64441206401782e-21, -1.6850591381820166e-19, 1.28584807152564e-18,
                     1.1157877678025181e-17, -1.3331716628546209e-16, 2.0972767875968562e-17,
                     6.6376381343583238e-15, -4.0545662729752069e-14, -8.1519341976054722e-14,
                     2.6335093153082323e-12, -1.2975133253453532e-11, -5.4154120542946279e-11,
                     1.0512122733215323e-09, -4.1126339803469837e-09, -2.9070369957882005e-08,
                     4.2347877827932404e-07, -1.3654692000834679e-06, -1.3882523362786469e-05,
                     0.00018673420803405714, -0.000740702534166267, -0.0060336708714301491,
                     0.24015818242558962, 1.6536545626831027))
_EI64_MID = np.array((2.2137376921775787e-09, 9.0756561938885391e-08, -2.7517406297064545e-07,
                      1.8239629214389228e-08, 1.5027403968909828e-06, -4.013867526981546e-06,
                      2.9234449089955446e-06, 1.2475304481671779e-05, -4.7318229009055734e-05,
                      6.8284851459573175e-05, 2.4031110387097894e-05, -0.00035503752036284748,
                      0.0009532893797373805, -0.0016882755560235047, 0.0024914420961078508,
                      -0.0037512085075692412, 0.0053709145535900636, 1.0052589676941592,
                      3.0838856104922208))
_EI64_HI = np.array((-2.7109920616438573e-11, -2.5556418169965252e-10, 1.5076572693500548e-09,
                     -3.789465440126737e-09, 7.61570120807834e-09, -1.496002662714924e-08,
                     2.9147953450901081e-08, -6.7711997758452339e-08, 2.2900482228026655e-07,
                     -9.9298272942317e-07, 4.5260625972231537e-06, -1.9681778105531671e-05,
                     7.5995277030017761e-05, -0.00021503011930044477, -0.00013871931833623122,
                     1.0103004648645344, 4.8499064014085844))


@njit(inline="always", cache=True)
def _ftz64(x):
  """``_ftz32`` for float64."""
  return x if abs(x) >= 2.2250738585072014e-308 else x * 0.0


@njit(inline="always", cache=True)
def _xla_erf_inv_f64(x):
  x = _ftz64(x)
  w = -_xla_log1p_f64(x * -x)
  if w < 6.25:
    c, t = _EI64_LO, w + -3.125
  elif w < 16.0:
    c, t = _EI64_MID, math.sqrt(w) - 3.25
  else:
    c, t = _EI64_HI, math.sqrt(w) - 5.0
  p = c[0]
  for k in range(1, c.size):
    p = _fma64(p, t, c[k])
  return _ftz64(x * (np.inf if abs(x) == 1.0 else p))


@njit(inline="always", cache=True)
def _zeta(s, q):
  # Hurwitz zeta(s, q) for s > 1 by Euler-Maclaurin summation (N = 12 terms, 10 corrections)
  if q <= 0.0 and q == np.floor(q):
    return np.inf
  n = 12
  t = 0.0
  for k in range(n):
    t += (q + k) ** -s
  a = q + n
  t += a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
  # sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) a^(-s-2j+1)
  fac = s * a ** (-s - 1.0)
  b2 = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6,
        -3617.0 / 510, 43867.0 / 798, -174611.0 / 330)
  f2 = 2.0
  for j in range(10):
    t += b2[j] / f2 * fac
    fac *= (s + 2 * j + 1) * (s + 2 * j + 2) / (a * a)
    f2 *= (2 * j + 3) * (2 * j + 4)
  return t


@njit(inline="always", cache=True)
def _polygamma(m, x):
  # polygamma(m, x) = (-1)^(m+1) m! zeta(m+1, x); m = 0 is digamma; m must be a finite
  # non-negative integer (else NaN), as JAX; at the poles (x a non-positive integer or -inf) XLA's
  # zeta(m + 1, x) is inf for even m + 1 and NaN for odd; at x = +inf NaN
  if m != m or x != x or m < 0 or m != np.floor(m) or m == np.inf:
    return np.nan
  if m == 0:
    return _digamma(x)
  sgn = 1.0 if np.fmod(m, 2.0) == 1.0 else -1.0
  if x == np.inf:
    return np.nan
  if x <= 0.0 and x == np.floor(x):
    return np.nan if np.fmod(m + 1.0, 2.0) == 1.0 else sgn * np.inf
  f = math.exp(_xla_lgamma_f64(m + 1.0))  # m!: NaN once it overflows, as XLA's
  return np.nan if f == np.inf else sgn * f * _zeta(m + 1.0, x)


# ------------------------------------------------------------- XLA's complex arithmetic
# Complex kernels reproduce XLA's CPU expansions (the results ``jit`` gives, NaN, inf and
# signed zeros included) rather than C99 Annex G's: components are computed in the
# component type (``type(a)(c)`` keeps float32 constants float32), and products that XLA's
# LLVM contracts into fused multiply-adds are fused here too (``_fma``), so overflowing
# intermediate products give XLA's infinities rather than NaN.


@intrinsic
def _fma(typingctx, a, b, c):
  """``a * b + c`` rounded once (``llvm.fma``)."""
  if isinstance(a, types.Float) and a == b == c:
    return a(a, b, c), lambda context, builder, sig, args: builder.fma(*args)


@njit(inline="always", cache=True)
def _cabs(a, b):
  # max * sqrt(1 + (min/max)^2); the smaller part where that is NaN (0, inf or NaN parts)
  x, y = abs(a), abs(b)
  hi, lo = _fmax(x, y), _fmin(x, y)
  q = lo / hi
  r = hi * np.sqrt(type(a)(1) + q * q)
  return lo if r != r else r


@njit(inline="always", cache=True)
def _c(t):
  return complex(t[0], t[1])


@njit(inline="always", cache=True)
def _cmul(a, b, c, d):
  # (a + bi)(c + di), the second product of each part fused
  return _fma(a, c, -(b * d)), _fma(b, c, a * d)


@njit(inline="always", cache=True)
def _cdiv(ar, ai, br, bi):
  # Smith's algorithm (products fused as XLA's); where both parts come out NaN, the limits for
  # a zero denominator, an infinite numerator or an infinite denominator
  zero, one, inf = type(ar)(0), type(ar)(1), type(ar)(np.inf)
  if abs(br) < abs(bi):
    t = br / bi
    den = _fma(t, br, bi)
    cr = _fma(t, ar, ai) / den
    ci = _fma(t, ai, -ar) / den
  else:
    t = bi / br
    den = _fma(t, bi, br)
    cr = _fma(t, ai, ar) / den
    ci = _fma(-t, ar, ai) / den
  if cr == cr or ci == ci:
    return cr, ci
  if br == 0 and bi == 0 and (ar == ar or ai == ai):
    s = np.copysign(inf, br)
    return s * ar, s * ai
  ainf = abs(ar) == inf or abs(ai) == inf
  binf = abs(br) == inf or abs(bi) == inf
  if ainf and abs(br) < inf and abs(bi) < inf:
    x = np.copysign(one if abs(ar) == inf else zero, ar)
    y = np.copysign(one if abs(ai) == inf else zero, ai)
    return inf * (x * br + y * bi), inf * (y * br - x * bi)
  if binf and abs(ar) < inf and abs(ai) < inf:
    x = np.copysign(one if abs(br) == inf else zero, br)
    y = np.copysign(one if abs(bi) == inf else zero, bi)
    return zero * (ar * x + ai * y), zero * (ai * x - ar * y)
  return cr, ci


@njit(inline="always", cache=True)
def _cexp(a, b):
  # e^a (cos b + i sin b); e^(a/2) twice where e^a overflows; a real argument stays real
  e = np.exp(a)
  c, s = np.cos(b), np.sin(b)
  if e == np.inf:
    h = np.exp(a * type(a)(0.5))
    re, im = h * c * h, h * s * h
  else:
    re, im = e * c, e * s
  return re, (type(a)(0) if b == 0 else im)


# The Array API's (C99 Annex G's) special values of complex functions where XLA's expansions
# give others, put over the expansion's result ``t`` of ``a + bi``: the primitive's own result
# only (the jit lowering's ``_C99`` in nbjax.lax.elementwise does the same), never inside
# other expansions. Signs the standard leaves unspecified follow the operand's.
@njit(inline="always", cache=True)
def _s_exp(a, b, t, m):
  # exp (m = 0) and expm1 (m = -1) at an infinite real part and a non-finite imaginary one
  if abs(a) == np.inf and not np.isfinite(b):
    return (type(a)(m), type(a)(0)) if a < 0 else (a, type(a)(np.nan))
  return t


@njit(inline="always", cache=True)
def _s_sinh(a, b, t):
  if not np.isfinite(b) and (a == 0 or abs(a) == np.inf):
    return a, type(a)(np.nan)
  return t


@njit(inline="always", cache=True)
def _s_cosh(a, b, t):
  if not np.isfinite(b) and a == 0:
    return type(a)(np.nan), type(a)(0)
  if not np.isfinite(b) and abs(a) == np.inf:
    return type(a)(np.inf), type(a)(np.nan)
  return t


@njit(inline="always", cache=True)
def _s_tanh(a, b, t):
  if abs(a) == np.inf:
    return np.copysign(type(a)(1), a), np.copysign(type(a)(0), b)
  if a == 0 and not np.isfinite(b):
    return a, type(a)(np.nan)
  return t


@njit(inline="always", cache=True)
def _s_log(a, b, t):
  # log and log1p: an infinite part makes the real part +inf
  if abs(a) == np.inf or abs(b) == np.inf:
    return type(a)(np.inf), t[1]
  return t


@njit(inline="always", cache=True)
def _s_sqrt(a, b, t):
  if abs(a) == np.inf and b != b:
    return (a, b) if a > 0 else (b, -a)
  return t


@njit(inline="always", cache=True)
def _s_atanh(a, b, t):
  nan = type(a)(np.nan)
  if b != b:
    return (a, nan) if a == 0 else (np.copysign(type(a)(0), a), nan) if abs(a) == np.inf \
        else (nan, nan)
  if a != a and np.isfinite(b):
    return nan, nan
  return t


@njit(inline="always", cache=True)
def _s_asinh(a, b, t):
  return (a, b if b == 0 else a) if a != a and np.isfinite(b) else t


@njit(inline="always", cache=True)
def _s_acos(a, b, t):
  if np.isfinite(a) and b != b:
    return (type(a)(np.pi / 2) if a == 0 else b), b
  return t


@njit(inline="always", cache=True)
def _s_acosh(a, b, t):
  if np.isfinite(a) and b != b:
    return b, (type(a)(np.pi / 2) if a == 0 else b)
  return t


@njit(inline="always", cache=True)
def _cexp2(a, b):
  # JAX's rule: exp(log(2) * z), the product complex
  r, i = _cmul(type(a)(0.6931471805599453), type(a)(0), a, b)
  return _cexp(r, i)


@njit(inline="always", cache=True)
def _cexpm1(a, b):
  # expm1(a) cos b + cosm1(b) + i e^a sin b
  one = type(a)(1)
  em1 = np.expm1(a)
  if abs(b) < type(a)(0.7853981633974483):  # cos(b) - 1 without cancellation, +0 at 0
    h = np.sin(b * type(a)(0.5))
    cm1 = type(a)(-2) * h * h + type(a)(0)
  else:
    cm1 = np.cos(b) - one
  re = em1 * (cm1 + one) + cm1
  return re, (type(a)(0) if b == 0 else (em1 + one) * np.sin(b))


@njit(inline="always", cache=True)
def _csinh_cosh(b):
  # sinh and cosh from expm1 (JAX's complex sin/cos lowering)
  two = type(b)(2)
  p, m = np.expm1(b), np.expm1(-b)
  return (p - m) / two, (p + m + two) / two


@njit(inline="always", cache=True)
def _csin(a, b):
  sh, ch = _csinh_cosh(b)
  return (type(a)(0) if a == 0 else np.sin(a) * ch), np.cos(a) * sh


@njit(inline="always", cache=True)
def _ccos(a, b):
  sh, ch = _csinh_cosh(b)
  return np.cos(a) * ch, (type(a)(0) if a == 0 else -np.sin(a) * sh)


@njit(inline="always", cache=True)
def _csign(a, b):
  r = _cabs(a, b)
  return (a, b) if r == 0 else (a / r, b / r)


@njit(inline="always", cache=True)
def _cpow(a, b, c, d):
  # |z|^c e^(-d arg z) (cos q + i sin q), q = c arg z + d log|z|, with XLA's cases for
  # 0^w, z^0, 1^w and inf^c
  zero, one, inf = type(a)(0), type(a)(1), type(a)(np.inf)
  if a == inf and b == 0 and d == 0 and c < 0:
    return zero, zero
  if a == inf and b == 0 and d == 0 and c > 0:
    return inf, zero
  if (a == 1 and b == 0) or (c == 0 and d == 0):
    return one, zero
  r = _cabs(a, b)
  if r == 0 and d == 0 and c >= 0:
    return (one if c == 0 else zero), zero
  t = np.arctan2(b, a)
  k = r ** c * np.exp(-d * t)
  q = _fma(c, t, d * np.log(r))
  return k * np.cos(q), k * np.sin(q)


@njit(inline="always", cache=True)
def _clog(a, b):
  return np.log(_cabs(a, b)), np.arctan2(b, a)


@njit(inline="always", cache=True)
def _clog1p(a, b):
  # log|z + 1| = log1p(max - 1) + log1p((min/max)^2) / 2 over |a + 1|, |b| (a itself for
  # max - 1 where a + 1 >= |b|) + i atan2(b, a + 1)
  one = type(a)(1)
  a1 = a + one
  x, y = abs(a1), abs(b)
  hi, lo = _fmax(x, y), _fmin(x, y)
  q = lo / hi
  re = np.log1p(a if a1 >= y else hi - one) + type(a)(0.5) * np.log1p(one if lo == hi else q * q)
  return re, np.arctan2(b, a1)


@njit(inline="always", cache=True)
def _chyp(hi, lo, q2):
  # hi sqrt(1 + q2) (q2 = (lo/hi)^2), exact where lo == hi and first-order where it rounds to hi
  w = np.sqrt(type(hi)(1) + q2)
  if hi == lo:
    return type(hi)(1.4142135623730951) * hi
  if w == 1 and q2 > 0:
    return hi + hi * q2 / type(hi)(2)
  return hi * w


@njit(inline="always", cache=True)
def _csqrt_abs(a, b, p):
  # |z|^p for p = 1/2 or -1/2 as sqrt(max)^(2p) (1 + (min/max)^2)^(p/2); min^(2p) where NaN
  x, y = abs(a), abs(b)
  hi, lo = _fmax(x, y), _fmin(x, y)
  q = lo / hi
  w = type(a)(1) + q * q
  if p > 0:
    r = np.sqrt(hi) * w ** type(a)(0.25)
    return lo if r != r else r
  r = (type(a)(1) / np.sqrt(hi)) * (type(a)(1) / np.sqrt(np.sqrt(w)))
  return type(a)(1) / np.sqrt(lo) if r != r else r


@njit(inline="always", cache=True)
def _csqrt(a, b):
  # u = sqrt((|a| + |z|) / 2), v = |b| / 2u: sqrt(z) = (u, +-v) for a >= 0, (v, +-u) for a < 0,
  # the sign from b < 0 (a -0 part counts as positive); scaled where u under- or overflows
  one, two, zero = type(a)(1), type(a)(2), type(a)(0)
  r2 = type(a)(1.4142135623730951)
  ax, ay = abs(a), abs(b)
  hi, lo = _fmax(ax, ay), _fmin(ax, ay)
  q = lo / hi
  ug = np.sqrt(_chyp(hi, lo, q * q) / two + ax / two)
  t = one if ax == ay else (ax / ay if ax < ay else ay / ax)
  t0 = abs(t)
  h1, l1 = _fmax(one, t0), _fmin(one, t0)
  q1 = l1 / h1
  h = _chyp(h1, l1, q1 * q1)
  s1h, sax, say, srh = np.sqrt(one + h), np.sqrt(ax), np.sqrt(ay), np.sqrt(t + h)
  scaled = ug == 0 or ug == np.inf
  if ax == ay:
    u = sax * type(a)(1.5537739740300374) / r2
    v = say / type(a)(2.19736822693562)
  elif scaled:
    if ax > ay:
      u = sax * (s1h / r2)
      v = say * (say / sax) / (s1h * r2)
    else:
      u = say * (srh / r2)
      v = say / (srh * r2)
  else:
    u = ug
    v = ay / (ug * two)
  if a >= zero:
    return u, (-v if b < zero else v)
  if a < zero:
    return v, (-u if b < zero else u)
  return v, (-v if b < zero else v)


@njit(inline="always", cache=True)
def _crsqrt(a, b):
  zero, inf = type(a)(0), type(a)(np.inf)
  r = _csqrt_abs(a, b, -1)
  t = np.arctan2(b, a) * type(a)(-0.5)
  if a == 0 and b == 0:
    return inf, type(a)(np.nan)
  if (abs(b) == inf and a != a) or abs(a) == inf:
    return np.copysign(zero, a), -np.copysign(zero, b)
  return r * np.cos(t), r * np.sin(t)


@njit(inline="always", cache=True)
def _ctanh(a, b):
  # (e^2a - e^-2a + 4i cos b sin b) / (e^2a + e^-2a - 2 + 4 cos^2 b), from expm1, with
  # XLA's limits for infinite a and non-finite b
  one, four = type(a)(1), type(a)(4)
  p, m = np.expm1(a + a), np.expm1(-(a + a))
  c, s = np.cos(b), np.sin(b)
  num_i = four * (c * s)
  e = p + m
  den = e + c * c * four
  re = np.copysign(one, a) if e == np.inf else (p - m) / den
  im = num_i / den
  ainf = abs(a) == np.inf
  if num_i != num_i and not ainf:
    re = type(a)(np.nan)
  if b == 0 or (ainf and num_i != num_i):
    im = type(a)(0)
  return re, im


@njit(inline="always", cache=True)
def _ctan(a, b):
  # tan(z) = -i tanh(i z)
  re, im = _ctanh(-b, a)
  return im, -re


@njit(inline="always", cache=True)
def _clogistic(a, b):
  # JAX's rule: 1 / (1 + exp(-z)) in complex arithmetic
  er, ei = _s_exp(-a, -b, _cexp(-a, -b), 0)  # the exp primitive's, as its jit lowering's
  one, zero = type(a)(1), type(a)(0)
  return _cdiv(one, zero, one + er, zero + ei)


@njit(inline="always", cache=True)
def _csinh(a, b, sign):
  # CHLO's sinh (sign -1) and cosh (sign 1) in complex arithmetic: (exp(z) +- exp(-z)) / 2
  # for |z| < 1, else exp(z + log(1/2)) +- exp(log(1/2) - z)
  zero = type(a)(0)
  if _cabs(a, b) < 1:
    pr, pi = _cexp(a, b)
    mr, mi = _cexp(-a, -b)
    return _cdiv(pr + sign * mr, pi + sign * mi, type(a)(2), zero)
  h = type(a)(-0.6931471805599453)
  pr, pi = _cexp(a + h, b + zero)
  mr, mi = _cexp(h - a, zero - b)
  return pr + sign * mr, pi + sign * mi


@njit(inline="always", cache=True)
def _catanh(a, b):
  # CHLO's atanh: log1p(4|a| / ((1 - |a|)^2 + b^2)) / 4 + i atan2(2b, (1 - |a|)(1 + |a|) - b^2) / 2,
  # with limits outside the range where those do not overflow
  zero, one = type(a)(0), type(a)(1)
  big = type(a)(9007199254740994.0 if np.finfo(type(a)).max > 1e308 else 16777218.0)
  ax, ay = abs(a), abs(b)
  safe = ax < big * big and ay < big * big
  n = one - ax
  b2 = b * b
  if safe:
    t = ax / (n * n + b2)
  elif ay * big < ax:
    t = one / ax
  elif ax == np.inf or ay == np.inf:
    t = zero
  else:
    t = (one / (ax / b + b / ax)) / b
  re = (one if a >= zero else -one) * np.log1p(type(a)(4) * t) * type(a)(0.25)
  if safe:
    im = np.arctan2(b + b, n * (one + ax) - b2)
  else:
    im = (one if b >= zero else -one) * type(a)(np.pi)
  return re, im * type(a)(0.5)


@njit(inline="always", cache=True)
def _catan(a, b):
  # atan(z) = -i atanh(iz)
  re, im = _catanh(-b, a)
  return im, -re


@njit(inline="always", cache=True)
def _catan2(yr, yi, xr, xi):
  # -i log((x + iy) / sqrt(x^2 + y^2)) in complex arithmetic
  zero = type(yr)(0)
  nr, ni = xr - yi, xi + yr
  x2r, x2i = _cmul(xr, xi, xr, xi)
  y2r, y2i = _cmul(yr, yi, yr, yi)
  sr, si = _csqrt(x2r + y2r, x2i + y2i)
  qr, qi = _cdiv(nr, ni, sr, si)
  lr, li = _clog(qr, qi)
  return li, zero - lr


@njit(inline="always", cache=True)
def _casin_kernel(x, y):
  # CHLO's complex asin/acos kernel on x = |re z|, y = |im z| (Hull et al.'s algorithm, with
  # scaling near the overflow threshold): the real part's atan2 operand and the imaginary part
  zero, one, two, half = type(x)(0), type(x)(1), type(x)(2), type(x)(0.5)
  fi = np.finfo(type(x))
  safe_max = np.sqrt(fi.max) / type(x)(8)
  xp1, xm1 = x + one, x - one
  hi, lo = _fmax(abs(xp1), y), _fmin(abs(xp1), y)
  q = lo / hi
  r = _chyp(hi, lo, q * q)
  hi, lo = _fmax(abs(xm1), y), _fmin(abs(xm1), y)
  q = lo / hi
  s = _chyp(hi, lo, q * q)
  a = half * (r + s)
  half_apx = half * (a + x)
  yy = y * y
  rpxp1, smxm1, spxm1 = r + xp1, s - xm1, s + xm1
  if _fmax(x, y) >= safe_max:
    re = y
  elif x <= one:
    re = np.sqrt(half_apx * (yy / rpxp1 + smxm1))
  else:
    re = y * np.sqrt(half_apx / rpxp1 + half_apx / spxm1)
  safe_opt = safe_max * type(x)(1e-6) if x < safe_max * type(x)(1e12) else safe_max * type(x)(100)
  ybig = y >= safe_opt
  mx = y if ybig else x
  xoy = x / y if (ybig and y != np.inf) else zero
  tiny = y < np.sqrt(fi.tiny) * type(x)(4) and x < one
  ap1 = a + one
  hyy = half * yy
  d = hyy / rpxp1
  if x >= one:
    t = d + half * spxm1
  elif a <= type(x)(1.5):
    t = d + hyy / smxm1
  else:
    t = a - one
  am1 = -(xp1 * xm1) / ap1 if tiny else t
  sq = np.sqrt(am1 * ap1)
  if mx >= (safe_opt if ybig else safe_max):
    im = np.log(two) + np.log(mx) + half * np.log1p(xoy * xoy)
  elif tiny:
    im = y / sq
  else:
    im = np.log1p(am1 + sq)
  return re, im


@njit(inline="always", cache=True)
def _casin(a, b):
  re, im = _casin_kernel(abs(a), abs(b))
  return np.arctan2(a, re), (-im if b < 0 else im)


@njit(inline="always", cache=True)
def _cacos(a, b):
  re, im = _casin_kernel(abs(a), abs(b))
  return np.arctan2(re, a), (im if b < 0 else -im)


@njit(inline="always", cache=True)
def _casinh(a, b):
  # asinh(z) = -i asin(iz)
  re, im = _casin(-b, a)
  return im, -re


@njit(inline="always", cache=True)
def _cacosh(a, b):
  # acosh(z) = +-i acos(z), the sign making the real part non-negative
  re, im = _cacos(a, b)
  return (im, -re) if b < 0 else (-im, re)


@njit(inline="always", cache=True)
def _csquare(a, b):
  # (a - b)(a + b) + 2abi, with a real part 0 where |a| == |b| (finite)
  re = type(a)(0) if (abs(a) < np.inf and abs(a) == abs(b)) else (a - b) * (a + b)
  return re, type(a)(2) * (a * b)


@njit(inline="always", cache=True)
def _cipow(a, b, m):
  # z^m (m >= 1) by squaring in JAX's order (acc * z), except z^3 = (z * z) * z
  if m == 3:
    r, i = _cmul(a, b, a, b)
    return _cmul(r, i, a, b)
  ar, ai = a, b
  first = True
  while m > 0:
    if m & 1:
      if first:
        ar, ai = a, b
        first = False
      else:
        ar, ai = _cmul(ar, ai, a, b)
    m >>= 1
    if m > 0:
      a, b = _cmul(a, b, a, b)
  return ar, ai


# ------------------------------------------------------------- generation

_NS = dict(np=np, math=math, prange=prange, __name__=__name__,
           **{k: v for k, v in globals().items() if k.startswith("_") and callable(v)})
_SOURCES = {}
for _arity, _table in ((1, UNARY), (2, BINARY), (3, TERNARY)):
  for _name, _expr in _table.items():
    _pre = ("one = np.ones(1, out.dtype)[0]" if "one" in _expr else
            "nbits = x.itemsize * 8" if "nbits" in _expr else "pass")
    _SOURCES[_name] = (_TEMPLATES[_arity], dict(expr=_expr, pre=_pre))
for _name, _src in _SPECIAL.items():
  _SOURCES[_name] = (_src, {})


def _select_n_source(n):
  # out-of-range `which` clamps to the first/last case, as JAX's lowering; every case is
  # read and the choice is a select, not a branch: it vectorises, and a random mask costs no
  # mispredictions ((1000, 100) float32, half true: 500 -> 30 us)
  chain = ["      v = c0[i]"] + [f"      v = c{k}[i] if k >= {k} else v" for k in range(1, n)]
  chain += ["      out[i] = v"]
  sizes = " or ".join(f"c{k}.size != n" for k in range(n))
  lines = ["\ndef {fn}(w, " + "".join(f"c{k}, " for k in range(n)) + "out):",
           "  n = out.size", f"  if (w.size != n and w.size != 1) or {sizes}:", "    return",
           "  if w.size == n:", "    for i in {rng}(n):", "      k = w[i]",
           *chain, "  else:", "    k = w[0]", "    for i in {rng}(n):", *chain]
  return "\n".join(lines) + "\n"




_FILES = {}


def define(arity, table, helpers, file):
  """Add kernels from another module: ``table`` maps kernel names to scalar expressions of
  ``arity`` operands (``a``, ``b``, ``c``) that call ``helpers`` (numba functions by name).
  The kernels compile as ``file``'s (its changes invalidate their disk cache).
  ``kernels.special`` defines its kernels so."""
  _NS.update(helpers)
  _FILES.update(dict.fromkeys(table, file))
  {1: UNARY, 2: BINARY, 3: TERNARY}[arity].update(table)
  for name, expr in table.items():
    _SOURCES[name] = (_TEMPLATES[arity], dict(expr=expr, pre="pass"))

_compiled = {}


def kernel(name, parallel=False):
  """The numba dispatcher of kernel ``name`` (``select_n<k>`` for k cases), built lazily."""
  key = (name, parallel)
  k = _compiled.get(key)
  if k is not None:
    return k
  if name.startswith("select_n"):
    src = _select_n_source(int(name[len("select_n"):]))
  elif name.endswith("@bc"):  # (a binary kernel's block-broadcast form: _TEMPLATES["bc"])
    src, kw = _SOURCES[name[:-3]]
    src = _TEMPLATES["bc"].format(fn="{fn}", rng="{rng}", **kw)
  else:
    src, kw = _SOURCES[name]
    src = src.format(fn="{fn}", rng="{rng}", **kw) if kw else src
  fn = "k_" + name.replace("@", "_") + ("_par" if parallel else "")
  src = src.format(fn=fn, rng="prange" if parallel else "range")
  ns = dict(_NS)
  exec(compile(src, _FILES.get(name.split("@")[0], __file__), "exec"), ns)  # file-backed:
  # numba's disk cache
  f = ns[fn]
  f.__qualname__ = fn
  jit = njit(cache=True, parallel=parallel, nogil=True, error_model="numpy")
  if fn + "_general" in ns:  # (a loop outlined into a function of its own, compiled first)
    ns[fn + "_general"].__qualname__ = fn + "_general"
    ns[fn + "_general"] = jit(ns[fn + "_general"])
  k = _compiled[key] = jit(f)
  return k


def names():
  """Every kernel name (``select_n<k>`` is generated on demand for any k)."""
  return list(_SOURCES)


# Kernels whose every result is exact: correctly rounded IEEE arithmetic, comparisons,
# selections, conversions between float widths. Any implementation (these loops, NumPy's
# ufuncs, one fused loop) gives the same bits, so an eager program may fuse a chain of them
# (``fused``) without changing a result. ``PROBED`` kernels call libm (or are built on it):
# NumPy's loops give their bits on some machines and dtypes and not on others (its own SIMD
# exp, tanh...), so they fuse where ``nbjax.registry._same_bits`` measured equal bits.
EXACT = frozenset({
    "neg", "abs", "floor", "ceil", "round_even", "sqrt", "square", "not_bool", "is_finite",
    "convert", "convert_bool", "copy", "add", "sub", "mul", "div", "div_recip", "max", "min",
    "max_float", "min_float", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "clamp",
    "clamp_float", "select_n2"})
PROBED = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "rsqrt", "sign",
    "round_away", "erf", "erf_f32", "erfc", "erf_inv", "erf_inv_f32", "exp_f32", "exp2_f32", "expm1_f32",
    "tanh_f32", "logistic_f32", "log_f32", "log1p_f32", "lgamma", "lgamma_f32", "digamma", "digamma_f32", "pow",
    "atan2", "rem", "nextafter", "polygamma"})


def expression(name):
  """The scalar expression of kernel ``name`` over operands ``a``, ``b``, ``c``."""
  if name == "select_n2":  # a boolean ``which`` picks c over b
    return "(c if a else b)"
  return UNARY.get(name) or BINARY.get(name) or TERNARY[name]


def step(name, ops, cast):
  """One statement's right-hand side in a fused loop's source: kernel ``name`` applied to
  the operand names ``ops`` and rounded to its output type ``cast`` (``"np.float32"``...,
  which also spells the expression's ``one``)."""
  x = re.sub(r"\bone\b", f"{cast}(1)", expression(name))
  x = re.sub(r"\b[abc]\b", lambda m: ops["abc".index(m.group())], x)
  return f"{cast}({x})"


def fused(src):
  """The numba dispatcher of generated source ``src`` (one function named ``{fn}``), named by
  the source's hash: compiled once per process, and served from numba's disk cache to later
  processes (the source is compiled as this file's)."""
  fn = "k_fused_" + hashlib.sha1(src.encode()).hexdigest()[:20]
  k = _compiled.get(fn)
  if k is None:
    ns = dict(_NS)
    exec(compile(src.format(fn=fn), __file__, "exec"), ns)
    f = ns[fn]
    f.__qualname__ = fn
    k = _compiled[fn] = njit(cache=True, nogil=True, error_model="numpy")(f)
  return k


_CHUNK_SRC = """
def {fn}(lo, hi, argv):
  p = carray(voidptr(argv), 2 * MAX_ARGS, np.int64)
{loads}
  kern({names})
"""
_chunked = {}


def chunked(kern, dtypes, nscalars=0):
  """The address of a chunk function for ``kernels.threads.team_run`` that runs dispatcher
  ``kern`` (flat operands, then the output) on elements ``[lo, hi)`` of arrays of ``dtypes``
  (the output's last); an operand of size 1 is passed whole (a broadcast scalar), and the
  ``nscalars`` before the output as the element of their size-1 array."""
  key = (kern, tuple(dtypes), nscalars)
  f = _chunked.get(key)
  if f is None:
    if len(dtypes) > threads.MAX_ARGS:
      raise ValueError(f"chunked: {len(dtypes)} arrays, at most {threads.MAX_ARGS}")
    loads, names = [], []
    for k, d in enumerate(dtypes):
      d = np.dtype(d)
      loads.append(f"  w{k} = p[MAX_ARGS + {k}] != 1\n  a{k} = carray(voidptr(p[{k}] + lo * "
                   f"{d.itemsize} * w{k}), (hi - lo) if w{k} else 1, np.{d.name})")
      names.append(f"a{k}[0]" if len(dtypes) - 1 - nscalars <= k < len(dtypes) - 1 else f"a{k}")
    src = _CHUNK_SRC.format(loads="\n".join(loads), names=", ".join(names), fn="{fn}")
    fn = "c_" + hashlib.sha1((kern.py_func.__name__ + src).encode()).hexdigest()[:20]
    ns = dict(_NS, kern=kern, carray=carray, voidptr=threads.voidptr, MAX_ARGS=threads.MAX_ARGS)
    exec(compile(src.format(fn=fn), kern.py_func.__code__.co_filename, "exec"), ns)
    f = ns[fn]
    f.__qualname__ = fn
    f = cfunc(types.void(types.int64, types.int64, types.int64), nogil=True, cache=True,
              error_model="numpy")(f)
    _chunked[key] = f  # (the CFunc object itself: it owns the code at the address)
  return f.address


def _numba_type(a):
  if isinstance(a, np.ndarray):
    return types.Array(from_dtype(a.dtype), a.ndim, "C")
  return typeof(a)


def entry(dispatcher, *args):
  """The compiled entry point of ``dispatcher`` for arguments like ``args`` (compiled or
  loaded from the disk cache on first use). Arrays are typed C-contiguous and writable:
  callers must pass C-contiguous arrays of the same dtypes and ranks."""
  sig = tuple(_numba_type(a) for a in args)
  cres = dispatcher.overloads.get(sig)
  if cres is None:  # (compile's own entry point: an overload loaded from the disk cache can be
    return dispatcher.compile(sig)  # filed under another signature key)
  return cres.entry_point
