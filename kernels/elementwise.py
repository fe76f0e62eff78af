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
so callers skip numba's generic dispatch on every call.

numba has no float16 arithmetic: callers hand float16 data in as float32. Integer
kernels see the operand types the caller chose (the shift kernels get unsigned/signed
views, so no kernel ever shifts by a negative or too-large amount: that is undefined in
LLVM). Imports numba and numpy only.
"""
import math

import numpy as np
from numba import njit, prange, typeof, types
from numba.np.numpy_support import from_dtype

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
    3: """
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
  else:
    sx = 1 if x.size == n else 0
    sy = 1 if y.size == n else 0
    sz = 1 if z.size == n else 0
    for i in {rng}(n):
      a = x[i * sx]
      b = y[i * sy]
      c = z[i * sz]
      out[i] = {expr}
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
  for i in {rng}(out.size):
    if m == 0:
      out[i] = one
    elif y < 0:
      out[i] = one / _ipow(x[i], m)
    else:
      out[i] = _ipow(x[i], m)
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
    "sign_complex": "_sign_complex(a)",
    "floor": "np.floor(a)",
    "ceil": "np.ceil(a)",
    "round_away": "_round_away(a)",
    "round_even": "np.rint(a)",
    "is_finite": "np.isfinite(a)",
    "exp": "np.exp(a)",
    "exp2": "np.exp2(a)",
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
    "erf": "math.erf(np.float64(a))",
    "erfc": "math.erfc(np.float64(a))",
    "erf_inv": "_erf_inv(np.float64(a), 2)",
    "erf_inv_f32": "_erf_inv(np.float64(a), 1)",
    "lgamma": "math.lgamma(np.float64(a))",
    "digamma": "_digamma(np.float64(a))",
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
    "div_int": "_div_int(a, b)",
    "div_uint": "_div_uint(a, b)",
    "rem": "np.fmod(a, b)",
    "rem_int": "_rem_int(a, b)",
    "rem_uint": "_rem_uint(a, b)",
    "max": "_max(a, b)",
    "min": "_min(a, b)",
    "max_complex": "_max_complex(a, b)",
    "min_complex": "_min_complex(a, b)",
    "pow": "a ** b",
    "atan2": "np.arctan2(a, b)",
    "atan2_complex": "-1j * np.log((b + 1j * a) / np.sqrt(b * b + a * a))",
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
def _sign_complex(a):
  return a if a == 0 else a / np.abs(a)


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
def _max_complex(a, b):
  # lexicographic (real, then imaginary part), NaN-propagating
  if a != a:
    return a
  if b != b:
    return b
  return a if (a.real > b.real or (a.real == b.real and a.imag >= b.imag)) else b


@njit(inline="always", cache=True)
def _min_complex(a, b):
  if a != a:
    return a
  if b != b:
    return b
  return a if (a.real < b.real or (a.real == b.real and a.imag <= b.imag)) else b


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


_SQRT_PI = math.sqrt(math.pi)


@njit(inline="always", cache=True)
def _erf_inv(y, steps):
  # Giles' single-precision approximation, then Newton steps on erf (|y| <= 1/2) or on
  # log(erfc) with the exact 1 - |y| (tails): one step reaches float32 precision, two
  # float64 (four in the far tail, beyond Giles' fitted range).
  if y != y or y < -1.0 or y > 1.0:
    return np.nan
  if y == 1.0:
    return np.inf
  if y == -1.0:
    return -np.inf
  if y == 0.0:
    return y
  w = -math.log((1.0 - y) * (1.0 + y))
  if w > 16.0:
    steps += 2
  if w < 5.0:
    w = w - 2.5
    p = 2.81022636e-08
    p = 3.43273939e-07 + p * w
    p = -3.5233877e-06 + p * w
    p = -4.39150654e-06 + p * w
    p = 0.00021858087 + p * w
    p = -0.00125372503 + p * w
    p = -0.00417768164 + p * w
    p = 0.246640727 + p * w
    p = 1.50140941 + p * w
  else:
    w = math.sqrt(w) - 3.0
    p = -0.000200214257
    p = 0.000100950558 + p * w
    p = 0.00134934322 + p * w
    p = -0.00367342844 + p * w
    p = 0.00573950773 + p * w
    p = -0.0076224613 + p * w
    p = 0.00943887047 + p * w
    p = 1.00167406 + p * w
    p = 2.83297682 + p * w
  x = p * y
  ay = abs(y)
  s = 1.0 if y > 0 else -1.0
  ax = abs(x)
  t = 1.0 - ay  # exact for ay > 1/2
  for _ in range(steps):
    d = 2.0 / _SQRT_PI * math.exp(-ax * ax)
    if d == 0.0:
      break
    if ay <= 0.5:
      ax = ax - (math.erf(ax) - ay) / d
    else:  # Newton on log(erfc(x)) = log(1 - |y|): nearly linear in the tail
      e = math.erfc(ax)
      ax = ax + (math.log(e) - math.log(t)) * e / d
  return s * ax


@njit(inline="always", cache=True)
def _digamma(x):
  # XLA: NaN at non-positive integers. Reflection for x < 1/2, recurrence up to 10,
  # then the asymptotic series.
  if x != x:
    return x
  if x <= 0.0 and x == math.floor(x):
    return np.nan
  if x == np.inf:
    return x
  r = 0.0
  if x < 0.5:
    # psi(x) = psi(1 - x) - pi / tan(pi x), with pi x reduced to (-pi/2, pi/2]
    f = x - math.floor(x + 0.5)
    r = -math.pi / math.tan(math.pi * f)
    x = 1.0 - x
  while x < 10.0:
    r -= 1.0 / x
    x += 1.0
  z = 1.0 / (x * x)
  s = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (
      691.0 / 32760 - z / 12.0))))))
  return r + math.log(x) - 0.5 / x - s


@njit(inline="always", cache=True)
def _zeta(s, q):
  # Hurwitz zeta(s, q) for s > 1 by Euler-Maclaurin summation (N = 12 terms, 10 corrections)
  if q <= 0.0 and q == math.floor(q):
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
  # polygamma(m, x) = (-1)^(m+1) m! zeta(m+1, x); m = 0 is digamma; m must be a
  # non-negative integer (else NaN), as JAX
  if m != m or x != x or m < 0 or m != math.floor(m):
    return np.nan
  if m == 0:
    return _digamma(x)
  if x <= 0.0 and x == math.floor(x):
    return np.nan
  sgn = 1.0 if int(m) % 2 == 1 else -1.0
  return sgn * math.exp(math.lgamma(m + 1.0)) * _zeta(m + 1.0, x)


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
  # out-of-range `which` clamps to the first/last case, as JAX's lowering
  chain = ["      out[i] = c0[i]"] if n == 1 else []
  for k in range(n - 1):
    chain += [f"      {'if' if k == 0 else 'elif'} k < {k + 1}:", f"        out[i] = c{k}[i]"]
  if n > 1:
    chain += ["      else:", f"        out[i] = c{n - 1}[i]"]
  sizes = " or ".join(f"c{k}.size != n" for k in range(n))
  lines = ["\ndef {fn}(w, " + "".join(f"c{k}, " for k in range(n)) + "out):",
           "  n = out.size", f"  if (w.size != n and w.size != 1) or {sizes}:", "    return",
           "  if w.size == n:", "    for i in {rng}(n):", "      k = w[i]",
           *chain, "  else:", "    k = w[0]", "    for i in {rng}(n):", *chain]
  return "\n".join(lines) + "\n"


_compiled = {}


def kernel(name, parallel=False):
  """The numba dispatcher of kernel ``name`` (``select_n<k>`` for k cases), built lazily."""
  key = (name, parallel)
  k = _compiled.get(key)
  if k is not None:
    return k
  if name.startswith("select_n"):
    src = _select_n_source(int(name[len("select_n"):]))
  else:
    src, kw = _SOURCES[name]
    src = src.format(fn="{fn}", rng="{rng}", **kw) if kw else src
  fn = "k_" + name + ("_par" if parallel else "")
  src = src.format(fn=fn, rng="prange" if parallel else "range")
  ns = dict(_NS)
  exec(compile(src, __file__, "exec"), ns)  # file-backed so numba's disk cache works
  f = ns[fn]
  f.__qualname__ = fn
  k = _compiled[key] = njit(cache=True, parallel=parallel, nogil=True, error_model="numpy")(f)
  return k


def names():
  """Every kernel name (``select_n<k>`` is generated on demand for any k)."""
  return list(_SOURCES)


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
  if cres is None:
    dispatcher.compile(sig)
    cres = dispatcher.overloads[sig]
  return cres.entry_point
