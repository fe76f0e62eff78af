"""``nbjax.scipy.special``: SciPy's special functions as JAX defines them (``jax.scipy.special``).

Pipeline position: compositions of ``nbjax.numpy`` and ``nbjax.lax`` (the special-function
primitives: ``lgamma``, ``digamma``, ``igamma``, ``betainc``, ``bessel_i0e`` ...), so each
runs eagerly on kernels, under every transformation and under ``jit``. Derivatives are
JAX's, custom rules included where the plain ones are undefined at a special point
(``xlogy``/``xlog1py`` at ``x = 0``, ``x log x`` at 0, ``log_ndtr``'s far tail).
``logsumexp`` lives here; ``nbjax.nn`` re-exports it.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from nbjax import core, dtypes, lax
from nbjax import numpy as jnp
from nbjax.custom_derivatives import custom_jvp
from nbjax.numpy._util import promote_args_inexact, promote_dtypes_inexact, to_complex_dtype
from nbjax.eager_cache import staged

__all__ = ["logsumexp", "softmax", "log_softmax", "erf", "erfc", "erfinv", "expit", "logit",
           "gammaln", "loggamma", "gammasgn", "gamma", "digamma", "polygamma", "betaln", "beta",
           "betainc", "gammainc", "gammaincc", "xlogy", "xlog1py", "entr", "kl_div",
           "rel_entr", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e", "zeta",
           "multigammaln", "factorial", "sinc", "poch", "comb", "boxcox", "boxcox1p", "bernoulli",
           "erfcx", "exp1", "bessel_jn", "dawsn", "expi", "expn", "fresnel", "hyp1f1", "hyp2f1",
           "owens_t", "sici", "spence", "sph_harm_y", "wofz"]


def _c(x, v):
  return lax._const(x, v)  # (JAX's: weak for a weakly typed scalar x)


def _strong(x, v):
  """``v`` as a strongly typed constant of ``x``'s dtype (where JAX's code uses NumPy scalars,
  its result is strongly typed)."""
  return np.array(v, x.dtype)


# functions JAX leaves to a lax operation's dtype check (a TypeError naming that operation)
_LAX_CHECKED = {"erf": "erf", "erfc": "erfc", "erfinv": "erf_inv", "gammaln": "lgamma",
                "digamma": "digamma", "betaln": "lgamma", "gammainc": "igamma",
                "gammaincc": "igammac", "i0e": "bessel_i0e", "i0": "bessel_i0e",
                "i1e": "bessel_i1e", "i1": "bessel_i1e", "zeta": "zeta"}


def _real(name, *args):
  out = promote_args_inexact(name, *args)
  d = out[0].dtype
  if dtypes.is_complex(d):
    op = _LAX_CHECKED.get(name)
    if op is None:
      raise ValueError(f"{name} does not support complex-valued inputs.")
    at = " at position 0" if len(args) > 1 else ""
    raise TypeError(f"{op} does not accept dtype {d.name}{at}. Accepted dtypes{at} are "
                    "subtypes of floating.")
  return out


# ----------------------------------------------------------------- logsumexp, softmax


def _reduction_dims(ndim, axis):
  if axis is None:
    return tuple(range(ndim))
  axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
  out = []
  for a in axes:
    a = operator.index(a)
    if not -ndim <= a < ndim:
      raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}")
    out.append(a % ndim)
  return tuple(sorted(set(out)))


@staged
def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
  r"""Log-sum-exp reduction: :math:`\log \sum_i b_i e^{a_i}` over ``axis``, computed stably.

  Args:
    a: the input array.
    axis: the axis or axes to reduce (all when ``None``).
    b: scaling factors of the exponentials (broadcast against ``a``); where negative, the
      sum may be negative: its log is NaN unless ``return_sign``.
    keepdims: keep the reduced axes with size 1.
    return_sign: return ``(log|sum|, sign(sum))``.
    where: elements to include in the reduction.

  Returns:
    The array ``log|sum|`` (NaN where the sum is negative), or ``(result, sign)`` with
    ``return_sign``. The maximum is subtracted under ``stop_gradient``, so the gradient is
    the (weighted) softmax and stays finite for large inputs.
  """
  if where is not None:
    a = jnp.where(where, a, 0)
  if b is not None:
    a, b = promote_args_inexact("logsumexp", a, b)
    a = jnp.where(b != 0, a, -np.inf)
  else:
    a, = promote_args_inexact("logsumexp", a)
  dims = _reduction_dims(jnp.ndim(a), axis)
  amax = jnp.max(a.real, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
  amax = lax.stop_gradient(lax.select(jnp.isfinite(amax), amax, lax.full_like(amax, 0)))
  amax_k = amax if keepdims else lax.expand_dims(amax, dims)
  e = lax.exp(lax.sub(a, amax_k.astype(a.dtype)))
  if b is not None:
    e = lax.mul(e, b)
  s = jnp.sum(e, axis=dims, keepdims=keepdims, where=where)
  sign = lax.sign(s)
  if return_sign or not dtypes.is_complex(a.dtype):
    s = jnp.abs(s)
  out = lax.add(lax.log(s), amax.astype(s.dtype))
  if return_sign:
    return out, sign
  if b is not None and not dtypes.is_complex(out.dtype):
    out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
  return out


def softmax(x, /, *, axis=None):
  r"""Softmax :math:`e^{x_i} / \sum_j e^{x_j}` over ``axis`` (all axes when ``None``)."""
  x, = promote_args_inexact("softmax", x)
  dims = _reduction_dims(jnp.ndim(x), axis)
  e = jnp.exp(x - lax.stop_gradient(jnp.max(x, axis=dims, keepdims=True)))
  return e / jnp.sum(e, axis=dims, keepdims=True)


def log_softmax(x, /, *, axis=None):
  r"""Log-softmax :math:`x_i - \log \sum_j e^{x_j}` over ``axis`` (all axes when ``None``)."""
  x, = promote_args_inexact("log_softmax", x)
  dims = _reduction_dims(jnp.ndim(x), axis)
  shifted = x - lax.stop_gradient(jnp.max(x, axis=dims, keepdims=True))
  return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=dims, keepdims=True))


# ----------------------------------------------------------------- error and gamma functions


def erf(x):
  r"""The error function :math:`\frac{2}{\sqrt\pi}\int_0^x e^{-t^2} dt`."""
  x, = _real("erf", x)
  return lax.erf(x)


def erfc(x):
  r"""The complementary error function :math:`1 - \mathrm{erf}(x)`."""
  x, = _real("erfc", x)
  return lax.erfc(x)


# per precision: where the asymptotic series takes over (erfc would underflow), the argument
# below which e^(x^2) overflows (the result is +inf), Dekker's splitting constant 2^s + 1
_ERFCX = {np.dtype(np.float64): (26.0, -27.0, 2.0 ** 27 + 1)}
_ERFCX_SINGLE = (9.0, -10.0, 2.0 ** 12 + 1)  # single precision and below


@custom_jvp
def erfcx(x):
  r"""The scaled complementary error function :math:`e^{x^2}\,\mathrm{erfc}(x)`.

  ``erfc`` times :math:`e^{x^2}`, the square split exactly (Dekker) so that the exponential
  loses no digits, up to where ``erfc`` would underflow; beyond, the asymptotic series
  :math:`\frac{1}{x\sqrt\pi}\sum_k (-1)^k \frac{(2k-1)!!}{(2x^2)^k}` (six terms)."""
  x, = promote_args_inexact("erfcx", x)
  if dtypes.is_complex(x.dtype):  # JAX's: w(iz) (the Faddeeva function)
    return wofz(lax.complex(lax.neg(lax.imag(x)), lax.real(x)))
  s = functools.partial(_strong, x)  # (a strongly typed result, as JAX's)
  big, low, split = _ERFCX.get(x.dtype, _ERFCX_SINGLE)
  xs = jnp.where(x < big, jnp.maximum(x, s(low)), s(0))  # (finite where each branch is used)
  c = xs * s(split)  # x = hi + lo exactly
  hi = c - (c - xs)
  lo = xs - hi
  p = xs * xs
  e = ((hi * hi - p) + s(2) * hi * lo) + lo * lo  # x * x == p + e exactly
  near = lax.exp(p) * (s(1) + e) * lax.erfc(xs)
  xa = jnp.where(x < big, s(big), x)
  r = s(1) / (xa * xa)
  series = s(1) + r * (s(-0.5) + r * (s(0.75) + r * (s(-1.875) + r * (s(6.5625) + r * s(
      -29.53125)))))
  return jnp.where(x < big, near, series / (xa * s(math.sqrt(math.pi))))


erfcx.defjvps(lambda t, ans, x: (2 * x * ans - _strong(ans, 2 / math.sqrt(math.pi))) * t)


# exp1's series below 2: sum_k (-1)^(k+1) x^k / (k k!), Horner coefficients from the top
_E1_SERIES = [(-1) ** (k + 1) / (k * math.factorial(k)) for k in range(30, 0, -1)]
_EULER_GAMMA = 0.5772156649015329


@custom_jvp
def exp1(x):
  r"""The exponential integral :math:`E_1(x) = \int_1^\infty e^{-xt}/t\,dt` for real
  ``x >= 0`` (NaN below 0, +inf at 0): its power series up to 2 (1 in single precision),
  beyond its continued fraction (64 or 40 terms, evaluated from the tail)."""
  x, = _real("exp1", x)
  s = functools.partial(_strong, x)
  f64 = x.dtype == np.float64  # (single precision: the fraction from 1, where the series'
  small = x <= (2 if f64 else 1)  # cancellation would cost more than its rounding)
  xs = jnp.where(small, x, s(1))  # (finite where each branch is used)
  acc = s(_E1_SERIES[0])
  for c in _E1_SERIES[1:]:
    acc = acc * xs + s(c)
  series = acc * xs - s(_EULER_GAMMA) - lax.log(xs)
  xl = jnp.where(small, s(3), x)
  t = s(0)
  for k in range(64 if f64 else 40, 0, -1):
    t = s(k * k) / (xl + s(2 * k + 1) - t)
  cf = lax.exp(-xl) / (xl + s(1) - t)
  out = jnp.where(small, series, cf)
  return jnp.where(x < 0, s(np.nan), jnp.where(x == 0, s(np.inf), out))


exp1.defjvps(lambda t, ans, x: -lax.exp(-x) / x * t)


def erfinv(x):
  r"""The inverse error function."""
  x, = _real("erfinv", x)
  return lax.erf_inv(x)


@custom_jvp
def expit(x):
  r"""The logistic sigmoid :math:`1 / (1 + e^{-x})`."""
  x, = promote_args_inexact("expit", x)
  return lax.logistic(x)


@expit.defjvp
def _expit_jvp(primals, tangents):
  x, = primals
  t, = tangents
  y = expit(x)
  return y, t * y * (1 - y)


@custom_jvp
def logit(x):
  r"""The logit :math:`\log(x / (1 - x))`."""
  x, = promote_args_inexact("logit", x)
  return lax.log(lax.div(x, lax.sub(_c(x, 1), x)))


@logit.defjvp
def _logit_jvp(primals, tangents):
  x, = primals
  t, = tangents
  return logit(x), t / (x * (1 - x))


def gammaln(x):
  r"""Log of the absolute gamma function :math:`\log|\Gamma(x)|`."""
  x, = _real("gammaln", x)
  return lax.lgamma(x)


# Lanczos approximation (g = 7, 9 coefficients; GSL's lanczos_7_c, as JAX 0.10's complex
# gamma): log Gamma(z) = log(2 pi)/2 + (z - 1/2) log(t) - t + log(A(z)), t = z + g - 1/2
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _complex_lanczos_loggamma(z):
  """Principal-branch log Gamma of complex ``z`` by Lanczos, reflecting ``Re z < 1/2``
  (``Gamma(z) = pi / (sin(pi z) Gamma(1 - z))``); the unselected branch sees safe values."""
  refl = jnp.real(z) < 0.5
  zl = jnp.where(refl, 1.0 - z, z) - 1.0
  ag = jnp.full_like(zl, _LANCZOS[0])
  for k, c in enumerate(_LANCZOS[1:], start=1):
    ag = ag + c / (zl + k)
  t = zl + (_LANCZOS_G + 0.5)
  lg = 0.5 * math.log(2.0 * math.pi) + (zl + 0.5) * jnp.log(t) - t + jnp.log(ag)
  z_safe = jnp.where(refl, z, jnp.full_like(z, 0.5))  # (Python floats: weak, strict-safe)
  return jnp.where(refl, math.log(math.pi) - jnp.log(jnp.sin(math.pi * z_safe)) - lg, lg)


def _complex_poles(z):
  """``(safe z, mask)``: the poles (non-positive integers) and NaNs, replaced by 1."""
  re = jnp.real(z)
  bad = ((jnp.imag(z) == 0) & (re == jnp.floor(re)) & (re <= 0)) | jnp.isnan(z)
  return jnp.where(bad, jnp.ones_like(z), z), bad


def _complex_loggamma(z):
  """SciPy's complex ``loggamma`` (one branch cut, on the negative real axis): shift
  ``Re z < 1/2`` right by ``n`` and subtract ``sum_k log(z + k)``; NaN+NaNj at poles."""
  z_safe, bad = _complex_poles(z)
  n = jnp.maximum(0, jnp.ceil(0.5 - jnp.real(z_safe)))
  n_max = int(np.max(np.asarray(n), initial=0)) if not isinstance(n, core.Tracer) else None
  if n_max is not None:  # eagerly: as many terms as the farthest shift
    sum_log = jnp.zeros_like(z_safe)
    for k in range(n_max):
      mask = k < n
      sum_log = sum_log + jnp.where(mask, jnp.log(jnp.where(mask, z_safe + k, 1.0)), 0.0)
  else:
    def cond(st):
      return jnp.any(st[0] < n)

    def body(st):
      k, acc = st
      mask = k < n
      return k + 1, acc + jnp.where(mask, jnp.log(jnp.where(mask, z_safe + k, 1.0)), 0.0)
    _, sum_log = lax.while_loop(cond, body, (jnp.zeros((), n.dtype), jnp.zeros_like(z_safe)))
  res = _complex_lanczos_loggamma(z_safe + n) - sum_log
  return jnp.where(bad, jnp.full_like(z, complex(np.nan, np.nan)), res)


def loggamma(x):
  r"""The log of the gamma function: for real ``x > 0`` (NaN elsewhere, as SciPy's real
  ``loggamma``); for complex ``x`` the principal branch (cut on the negative real axis,
  NaN+NaNj at the poles), as JAX's and SciPy's."""
  x, = promote_args_inexact("loggamma", x)
  if dtypes.is_complex(x.dtype):
    return _complex_loggamma(x)
  return jnp.where(x > 0, lax.lgamma(x), _c(x, np.nan))


def gammasgn(x):
  r"""The sign of the gamma function (NaN at the poles and for NaN; -1 at -0.0)."""
  x, = _real("gammasgn", x)
  fl = lax.floor(x)
  neg = x < 0
  nan = (neg & (x == fl)) | jnp.isnan(x)
  minus = (neg & (jnp.remainder(fl, 2) != 0)) | ((x == 0) & jnp.signbit(x))
  return jnp.where(nan, _c(x, np.nan), jnp.where(minus, _c(x, -1.0), _c(x, 1.0)))


def gamma(x):
  r"""The gamma function :math:`\Gamma(x)`; complex arguments by ``exp`` of the Lanczos
  log-gamma with reflection (NaN+NaNj at the poles), as JAX's."""
  x, = promote_args_inexact("gamma", x)
  if dtypes.is_complex(x.dtype):
    z_safe, bad = _complex_poles(x)
    return jnp.where(bad, jnp.full_like(x, complex(np.nan, np.nan)),
                     jnp.exp(_complex_lanczos_loggamma(z_safe)))
  return gammasgn(x) * lax.exp(lax.lgamma(x))


def digamma(x):
  r"""The digamma function :math:`\psi(x) = \frac{d}{dx}\log\Gamma(x)`."""
  x, = _real("digamma", x)
  return lax.digamma(x)


def polygamma(n, x):
  r"""The polygamma function :math:`\psi^{(n)}(x)` for integer ``n >= 0``."""
  if not dtypes.issubdtype(dtypes.dtype(n), np.integer):
    raise ValueError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                     f"{dtypes.dtype(n)}.")
  n, x = _real("polygamma", n, x)
  return lax.polygamma(n, x)


def betaln(a, b):
  r"""Log of the absolute beta function :math:`\log|B(a, b)|`."""
  a, b = _real("betaln", a, b)
  return _betaln(a, b)


def _stirling_corr(x):  # lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2), for x >= 10
  r = 1 / (x * x)
  out = _c(x, 1 / 1188)
  for d in (-1680, 1260, -360, 12):
    out = _c(x, 1 / d) + r * out
  return out / x


def _betaln(a, b):
  """``log|B(a, b)|``; with ``b = max(a, b) >= 10``, ``lgamma(b) - lgamma(a + b)`` by Stirling's
  series (no cancellation between two huge log-gammas: float32-accurate for ``b >> a``)."""
  a, b = lax.min(a, b), lax.max(a, b)
  big = (b >= 10) & (a > 0)
  bs = jnp.where(big, b, _c(b, 10))
  diff = (a - (bs - _c(a, 0.5)) * lax.log1p(a / bs) - a * lax.log(a + bs)
          + _stirling_corr(bs) - _stirling_corr(a + bs))
  abig = a >= 10
  asafe = jnp.where(abig, a, _c(a, 10))
  lga = jnp.where(abig, (asafe - _c(a, 0.5)) * lax.log(asafe) - asafe
                  + _c(a, 0.5 * math.log(2 * math.pi)) + _stirling_corr(asafe), lax.lgamma(a))
  return jnp.where(big, lga + diff, lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b))


def beta(a, b):
  r"""The beta function :math:`B(a, b) = \Gamma(a)\Gamma(b)/\Gamma(a + b)`."""
  a, b = _real("beta", a, b)
  sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
  return sign * lax.exp(betaln(a, b))


def betainc(a, b, x):
  r"""The regularized incomplete beta function :math:`I_x(a, b)` (differentiable in ``x``)."""
  a, b, x = _real("betainc", a, b, x)
  shape = jnp.broadcast_shapes(jnp.shape(a), jnp.shape(b), jnp.shape(x))
  return lax.betainc(*(jnp.broadcast_to(v, shape) for v in (a, b, x)))


def gammainc(a, x):
  r"""The regularized lower incomplete gamma function :math:`P(a, x)`."""
  a, x = _real("gammainc", a, x)
  return lax.igamma(a, x)


def gammaincc(a, x):
  r"""The regularized upper incomplete gamma function :math:`Q(a, x) = 1 - P(a, x)`."""
  a, x = _real("gammaincc", a, x)
  return lax.igammac(a, x)


def multigammaln(a, d):
  r"""The log of the multivariate gamma function of dimension ``d`` (a static int)."""
  d = core.concrete_or_error(int, d, "d argument of multigammaln")
  a, dd = promote_args_inexact("multigammaln", a, d)
  const = 0.25 * dd * (dd - 1) * _c(a, math.log(math.pi))
  b = jnp.arange(d, dtype=dd.dtype) / _c(a, 2)
  b = jnp.reshape(b, (1,) * jnp.ndim(a) + (d,))  # (explicit ranks: no implicit promotion)
  return jnp.sum(gammaln(jnp.expand_dims(a, -1) - b), axis=-1) + const


def factorial(n, exact=False):
  r"""The factorial :math:`\Gamma(n + 1)` (0 for ``n < 0``); ``exact=True`` is not supported."""
  if exact:
    raise NotImplementedError("factorial with exact=True")
  n, = promote_args_inexact("factorial", n)
  return jnp.where(n < 0, _c(n, 0), lax.exp(lax.lgamma(n + 1)))


@custom_jvp
def poch(z, m):
  r"""The Pochhammer symbol :math:`\Gamma(z + m) / \Gamma(z)` (1 where ``m == 0``), with
  JAX's derivatives: :math:`(\psi(z + m) - \psi(z))\,(z)_m` in ``z`` and
  :math:`\psi(z + m)\,(z)_m` in ``m`` (also at ``m == 0``)."""
  z, m = _real("jnp.poch", z, m)
  return jnp.where(m == 0, _c(z, 1), gamma(z + m) / gamma(z))


poch.defjvps(lambda t, ans, z, m: (digamma(z + m) - digamma(z)) * poch(z, m) * t,
             lambda t, ans, z, m: digamma(z + m) * poch(z, m) * t)


def comb(N, k, *, repetition=False):
  r"""The binomial coefficient :math:`\binom{N}{k}` through ``gammaln`` (0 outside
  ``0 <= k <= N``); ``repetition``: combinations with repetition."""
  N, k = promote_args_inexact("comb", N, k)
  if repetition:
    return jnp.where((k == 0) & (N >= 0), _c(N, 1), comb(N + k - 1, k))
  ok = (k <= N) & (N >= 0) & (k >= 0)
  n_, k_ = jnp.where(ok, N, 0), jnp.where(ok, k, 0)
  r = lax.exp(gammaln(n_ + 1) - gammaln(k_ + 1) - gammaln(n_ + 1 - k_))
  return jnp.where(ok, r, _c(N, 0))


def _boxcox(name, log):
  def f(x, lmbda):
    x, lmbda = promote_args_inexact(name, x, lmbda)
    zero = lmbda == 0
    lx = log(x)
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, lx, jnp.expm1(safe * lx) / safe)
  f.__name__ = f.__qualname__ = name
  return f


boxcox = _boxcox("boxcox", jnp.log)
boxcox.__doc__ = r"""The Box-Cox transform :math:`(x^\lambda - 1) / \lambda` (``log x`` at
:math:`\lambda = 0`)."""
boxcox1p = _boxcox("boxcox1p", jnp.log1p)
boxcox1p.__doc__ = r"""The Box-Cox transform of ``1 + x``."""


def bernoulli(n):
  r"""The Bernoulli numbers :math:`B_0 .. B_n` (``B_1 = -1/2``) for a static ``n >= 0``,
  computed exactly (Akiyama-Tanigawa, in rationals) and rounded once."""
  n = core.concrete_or_error(operator.index, n, "Argument n of bernoulli")
  if n < 0:
    raise ValueError("n must be a non-negative integer.")
  return jnp.array([float(v) for v in _bernoulli_exact(n)], dtype=dtypes.default_float_dtype())


def _bernoulli_exact(n):
  from fractions import Fraction
  out, row = [], []
  for m in range(n + 1):
    row.append(Fraction(1, m + 1))
    for j in range(m, 0, -1):
      row[j - 1] = j * (row[j - 1] - row[j])
    out.append(row[0])
  if n >= 1:
    out[1] = -out[1]  # (the algorithm gives B_1 = +1/2)
  return out


def sinc(x):
  r"""The normalized sinc :math:`\sin(\pi x) / (\pi x)` (``jnp.sinc``)."""
  return jnp.sinc(x)


# ----------------------------------------------------------------- x log y and entropies


@custom_jvp
def xlogy(x, y):
  r""":math:`x \log y`, 0 where ``x == 0`` (NaN ``y`` propagates); its derivative in ``x`` at
  ``x = 0`` is JAX's ``log(y)``."""
  x, y = promote_args_inexact("xlogy", x, y)
  return jnp.where((x != 0) | jnp.isnan(y), lax.mul(x, lax.log(y)), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
  x, y = primals
  tx, ty = tangents
  r = xlogy(x, y)
  return r, (tx * lax.log(y) + ty * x / y).astype(r.dtype)


@custom_jvp
def xlog1py(x, y):
  r""":math:`x \log(1 + y)`, 0 where ``x == 0`` (NaN ``y`` propagates)."""
  x, y = promote_args_inexact("xlog1py", x, y)
  return jnp.where((x != 0) | jnp.isnan(y), lax.mul(x, lax.log1p(y)), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
  x, y = primals
  tx, ty = tangents
  r = xlog1py(x, y)
  return r, (tx * lax.log1p(y) + ty * x / (1 + y)).astype(r.dtype)


@custom_jvp
def _xlogx(x):
  return xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
  x, = primals
  t, = tangents
  return _xlogx(x), t * (lax.log(x) + 1)


def entr(x):
  r"""The elementwise entropy :math:`-x \log x` (0 at 0, -inf for ``x < 0``)."""
  x, = _real("entr", x)
  return lax.select(x < 0, lax.full_like(x, -np.inf), lax.neg(_xlogx(x)))


def rel_entr(p, q):
  r"""The relative entropy :math:`p \log(p / q)` (0 at ``p == 0 <= q``, inf elsewhere off
  the positive quadrant)."""
  p, q = _real("rel_entr", p, q)
  zero = _c(p, 0.0)
  both = (p > zero) & (q > zero)
  one_zero = (p == zero) & (q >= zero)
  sp, sq = jnp.where(both, p, 1), jnp.where(both, q, 1)
  v = _xlogx(sp) - xlogy(sp, sq)
  return jnp.where(both, v, jnp.where(one_zero, zero, _c(p, np.inf)))


def kl_div(p, q):
  r"""The Kullback-Leibler divergence term :math:`p \log(p / q) - p + q`."""
  p, q = _real("kl_div", p, q)
  return rel_entr(p, q) - p + q


# ----------------------------------------------------------------- the normal distribution

_SQRT1_2 = 1 / math.sqrt(2)


def ndtr(x):
  r"""The standard normal CDF :math:`\frac{1}{2}(1 + \mathrm{erf}(x / \sqrt 2))`."""
  x = jnp.asarray(x)
  if x.dtype not in (np.float32, np.float64):  # checked before promotion, as JAX
    raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
  h = _strong(x, _SQRT1_2)  # (JAX's NumPy scalars: a strongly typed result)
  w = x * h
  z = lax.abs(w)
  y = jnp.where(z < h, 1 + lax.erf(w), jnp.where(w > 0, 2 - lax.erfc(z), lax.erfc(z)))
  return _strong(x, 0.5) * y


def ndtri(p):
  r"""The inverse of ``ndtr``: the standard normal quantile of ``p`` (float32/float64).

  An ``erf_inv`` starting point on the lower half (``min(p, 1 - p)``: exact there), then four
  Newton steps on ``log ndtr`` (accurate far into the tail)."""
  dt = dtypes.dtype(p)
  if dt not in (np.float32, np.float64):
    raise TypeError(f"x.dtype={dt} is not supported, see docstring for supported types.")
  p = jnp.asarray(p)
  upper = p > 0.5
  q = jnp.where(upper, 1 - p, p)
  x = _strong(p, math.sqrt(2)) * lax.erf_inv(2 * q - 1)  # (strong, as JAX's result)
  ok = q > 0
  lq = jnp.log(jnp.where(ok, q, 1))
  # where 2q - 1 rounds to -1: the tail's leading term -sqrt(-2 log q), refined below
  xs = jnp.where(jnp.isfinite(x), x, -jnp.sqrt(-2 * lq))
  xs = jnp.where(ok, xs, _c(p, -1.0))
  tiny = _c(p, np.finfo(dt).tiny)
  for _ in range(4):  # (in logs: ndtr and the pdf are subnormal in float32's far tail)
    c = 0.5 * lax.erfc(-xs * _c(p, _SQRT1_2))
    far = c >= tiny  # (the tail series sees a safe point elsewhere: no inf under debug_infs)
    lc = jnp.where(far, jnp.log(jnp.maximum(c, tiny)),
                   _log_ndtr(jnp.where(far, _c(p, -10.0), xs), 3))
    ratio = jnp.exp(lc + 0.5 * xs * xs + _c(p, 0.5 * math.log(2 * math.pi)))  # ndtr / pdf
    xs = xs - (lc - lq) * ratio
  x = jnp.where(ok, xs, x)
  x = jnp.where(upper, -x, x)
  x = jnp.where((p < 0) | (p > 1) | jnp.isnan(p), _c(p, np.nan), x)
  x = jnp.where((q == 0) & ~upper, _c(p, -np.inf), x)  # (each select makes an inf only where
  return jnp.where((q == 0) & upper, _c(p, np.inf), x)  # it is the result: debug_infs)


def _log_ndtr_lower(x, series_order):
  # log ndtr(x) for x -> -inf: -x^2/2 - log(-x) - log(2 pi)/2 + log(asymptotic series)
  x2 = x * x
  s, term, even, sign = 1.0, 1.0, 1.0, -1.0
  for n in range(1, series_order + 1):
    even = even * (2 * n - 1)
    term = sign * even
    s = s + term / x2 ** n
    sign = -sign
  return -0.5 * x2 - jnp.log(-x) - _c(x, 0.5 * math.log(2 * math.pi)) + jnp.log(s)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _log_ndtr(x, series_order):
  lower = {np.dtype(np.float64): -20.0, np.dtype(np.float32): -10.0}.get(x.dtype, -10.0)
  upper = {np.dtype(np.float64): 8.0, np.dtype(np.float32): 5.0}.get(x.dtype, 5.0)
  mid = jnp.log(ndtr(jnp.clip(x, lower, upper)))
  hi = jnp.log1p(-ndtr(-jnp.maximum(x, upper)))
  lo = _log_ndtr_lower(jnp.minimum(x, lower), series_order)
  return jnp.where(x > upper, hi, jnp.where(x > lower, mid, lo))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
  x, = primals
  t, = tangents
  y = _log_ndtr(x, series_order)
  return y, t * jnp.exp(-0.5 * x * x - y - _c(x, 0.5 * math.log(2 * math.pi)))


def log_ndtr(x, series_order=3):
  r"""The log of the standard normal CDF, accurate in both tails (an asymptotic series of
  ``series_order`` terms below -20 (float64) or -10 (float32))."""
  if not isinstance(series_order, int):
    raise TypeError("series_order must be a Python integer.")
  if series_order < 0:
    raise ValueError("series_order must be non-negative.")
  if series_order > 30:
    raise ValueError("series_order must be <= 30.")
  x = jnp.asarray(x)
  if x.dtype not in (np.float32, np.float64):
    raise TypeError(f"x.dtype={x.dtype} is not supported.")
  return _log_ndtr(x, series_order)


# ----------------------------------------------------------------- Bessel, zeta


def i0e(x):
  r"""The exponentially scaled modified Bessel function of order 0, :math:`e^{-|x|} I_0(x)`."""
  x, = _real("i0e", x)
  return lax.bessel_i0e(x)


def i0(x):
  r"""The modified Bessel function of order 0, :math:`I_0(x)`."""
  x, = _real("i0", x)
  return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1e(x):
  r"""The exponentially scaled modified Bessel function of order 1, :math:`e^{-|x|} I_1(x)`."""
  x, = _real("i1e", x)
  return lax.bessel_i1e(x)


def i1(x):
  r"""The modified Bessel function of order 1, :math:`I_1(x)`."""
  x, = _real("i1", x)
  return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


def zeta(x, q=None):
  r"""The Hurwitz zeta function :math:`\zeta(x, q) = \sum_{k \ge 0} (q + k)^{-x}`."""
  if q is None:
    raise NotImplementedError("Riemann zeta function not implemented; pass q != None to compute "
                              "the Hurwitz Zeta function.")
  x, q = _real("zeta", x, q)
  return _zeta(x, q)


@custom_jvp
def _zeta(x, q):
  return lax.zeta(x, q)


def _zeta_dx(s, a):
  """``d/ds zeta(s, a)`` by Euler-Maclaurin: ``N`` direct terms, then the integral, the
  half term and ``M`` Bernoulli corrections at ``a + N``, each differentiated in ``s``."""
  n, m = (8, 6) if s.dtype == np.float32 else (16, 12)
  out = sum(-lax.log(a + k) * (a + k) ** -s for k in range(n))
  an = a + n
  lan, s1 = lax.log(an), s - 1
  out = out - an ** -s1 * (lan / s1 + 1 / (s1 * s1)) - _c(s, 0.5) * lan * an ** -s
  b = _bernoulli_exact(2 * m)
  poly, dpoly = jnp.ones_like(s), jnp.zeros_like(s)  # rising factorial s (s+1) ... and d/ds
  for j in range(1, m + 1):
    for i in ((0,) if j == 1 else (2 * j - 3, 2 * j - 2)):
      poly, dpoly = poly * (s + i), dpoly * (s + i) + poly
    p = an ** (1 - 2 * j - s)
    out = out + _c(s, b[2 * j] / math.factorial(2 * j)) * p * (dpoly - lan * poly)
  return out


@_zeta.defjvp
def _zeta_jvp(primals, tangents):
  x, q = primals
  tx, tq = tangents
  y = _zeta(x, q)
  return y, tx * _zeta_dx(x, q) - tq * x * _zeta(x + 1, q)


# ----------------------------------------------------------------- Dawson, Faddeeva, Fresnel
# (rational approximations: Cody, Paciorek & Thacher 1970, Weideman 1994 and Cephes, with the
# dtype and region choices of JAX 0.10.2, so the values agree with JAX's to a few ulps)


def _poly(x, coefs):
  """The polynomial with ``coefs`` (highest degree first) at ``x`` by Horner's rule, the
  coefficients rounded to ``x``'s dtype (strongly typed)."""
  out = _strong(x, coefs[0])
  for c in coefs[1:]:
    out = out * x + _strong(x, c)
  return out


def _half_to_single(impl, x):
  """``impl`` at ``x``, float16/bfloat16 evaluated in float32 and rounded back."""
  if x.dtype in (np.float32, np.float64):
    return impl(x)
  out = impl(x.astype(np.float32))
  return tuple(o.astype(x.dtype) for o in out) if isinstance(out, tuple) else out.astype(x.dtype)


# dawsn: x P(x^2)/Q(x^2) on [0, 3.25); (1 + t P(t)/Q(t)) / 2x with t = 1/x^2 on [3.25, 6.25)
# and beyond
_DAWSN = (
    ((1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
      9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
      -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
      9.99999999999999994612e-1),
     (2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
      1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
      3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
      5.74918629489320327824e-1, 1.00000000000000000539e0)),
    ((5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
      -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
      3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
      -2.40274520828250956942e-9, 3.59233385440928410398e-11),
     (1.0, -6.31839869873368190192e-1, 2.36706788228248691528e-1, -5.31806367003223277662e-2,
      8.48041718586295374409e-3, -9.47996768486665330168e-4, 7.81025592944552338085e-5,
      -4.55875153252442634831e-6, 1.89100358111421846170e-7, -4.91324691331920606875e-9,
      7.18466403235734541950e-11)),
    ((-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
      1.64837047825189632310e-2, -4.86827613020462700845e-4),
     (1.0, -2.69820057197544900361e0, 1.73270799045947845857e0, -3.93708582281939493482e-1,
      3.44278924041233391079e-2, -9.73655226040941223894e-4)))


def _dawsn_impl(x):
  s = functools.partial(_strong, x)
  ax = lax.abs(x)
  (an, ad), (bn, bd), (cn, cd) = _DAWSN
  r1 = ax < s(3.25)
  r2 = ~r1 & (ax < s(6.25))
  a1 = jnp.where(r1, ax, s(1))  # (each region at a benign point where it is not used)
  q = a1 * a1
  v1 = a1 * _poly(q, an) / _poly(q, ad)

  def tail(mask, num, den):
    a = jnp.where(mask, ax, s(1))
    t = s(1) / (a * a)
    return s(0.5) / a * (s(1) + t * _poly(t, num) / _poly(t, den))

  out = jnp.where(r1, v1, jnp.where(r2, tail(r2, bn, bd), tail(~r1 & ~r2, cn, cd)))
  return lax.sign(x) * out


@custom_jvp
def _dawsn(x):
  return _half_to_single(_dawsn_impl, x)


_dawsn.defjvps(lambda t, ans, x: t * (_strong(x, 1) - _strong(x, 2) * x * ans))


def dawsn(x):
  r"""Dawson's integral :math:`F(x) = e^{-x^2}\int_0^x e^{t^2}\,dt` for real ``x``.

  Cody, Paciorek & Thacher's rational approximations on :math:`[0, 3.25)`,
  :math:`[3.25, 6.25)` and beyond (odd in ``x``); the derivative is :math:`1 - 2xF(x)`.

  Args:
    x: real-valued array.

  Returns:
    Dawson's integral of ``x`` (NaN for NaN, 0 at infinity).
  """
  x, = _real("dawsn", x)
  return _dawsn(x)


# wofz: Weideman's N = 32 rational expansion in Z = (L + iz)/(L - iz), L = 2^(-1/4) sqrt(N),
# for Im z >= 0, w(z) = 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz)); the lower half plane by
# w(z) = 2 exp(-z^2) - w(-z)
_WOFZ_L = 4.7568284600108841
_WOFZ = (
    -1.3034426067909105e-12, 3.7411838373738471e-12, 8.030427700497756e-12,
    -2.1543593557490879e-11, -5.5442449963237932e-11, 1.165824698850374e-10,
    4.1537441121999766e-10, -5.2310202114920615e-10, -3.2080151339721323e-09,
    8.1248864216535907e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
    -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07,
    4.4015317312832251e-06, 6.8210319443575151e-06, -2.1409619201999998e-05,
    -0.00013075449254579421, -0.00024532980270038237, 0.00039259136070109705,
    0.0045195411053493093, 0.019006155784845501, 0.057304403529837282, 0.14060716226893755,
    0.29544451071508743, 0.54601397206393376, 0.9019254893648001, 1.3455441692345449,
    1.8256696296324815, 2.2635372999002676, 2.5722534081245696)


@custom_jvp
def _wofz(z):
  re, im = lax.real(z), lax.imag(z)
  upper = im >= _strong(re, 0)
  zu = jnp.where(upper, z, -z)
  iz = lax.complex(-lax.imag(zu), lax.real(zu))  # (i z, exactly)
  big_l = _strong(z, _WOFZ_L)
  den = big_l - iz
  w = _strong(z, 2) * _poly((big_l + iz) / den, _WOFZ) / (den * den) + _strong(
      z, 1 / math.sqrt(math.pi)) / den
  return jnp.where(upper, w, _strong(z, 2) * lax.exp(-(z * z)) - w)


_wofz.defjvps(
    lambda t, ans, z: t * (-(_strong(z, 2) * z * ans) + _strong(z, 2j / math.sqrt(math.pi))))


def wofz(z):
  r"""The Faddeeva function :math:`w(z) = e^{-z^2}\,\mathrm{erfc}(-iz)`.

  Weideman's 32-term rational expansion in the upper half plane (accurate to about 1e-13
  relative), the lower half plane by :math:`w(z) = 2e^{-z^2} - w(-z)`; real input is taken
  as complex. The derivative is :math:`-2zw(z) + 2i/\sqrt\pi`.

  Args:
    z: real or complex array.

  Returns:
    The complex array :math:`w(z)` (complex64 for single precision, else complex128).
  """
  z, = promote_args_inexact("wofz", z)
  if not dtypes.is_complex(z.dtype):
    z = lax.convert_element_type(z, to_complex_dtype(z.dtype))
  return _wofz(z)


# fresnel: Cephes' fresnl (float64) and fresnlf (float32) approximations: a series in x^4 for
# x^2 < 2.5625, else the auxiliary functions f, g in 1/(pi x^2); 1/2 for |x| > 36974
_FRESNEL64 = dict(
    sn=(-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7,
        2.54890880573376359104e9, -4.42979518059697779103e10, 3.18016297876567817986e11),
    sd=(1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
        4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11),
    cn=(-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
        1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1),
    cd=(3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
        1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
        1.00000000000000000118e0),
    fn=(4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
        3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
        1.02304514164907233465e-10, 1.72010743268161828879e-13, 1.34283276233062758925e-16,
        3.76329711269987889006e-20),
    fd=(1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
        1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
        3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
        1.25443237090011264384e-20),
    gn=(5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
        6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
        4.45344415861750144738e-10, 1.08268041139020870318e-12, 1.37555460633261799868e-15,
        8.36354435630677421531e-19, 1.86958710162783235106e-22),
    gd=(1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
        8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
        4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
        8.39158816283118707363e-19, 1.86958710162783236342e-22))
_FRESNEL32 = dict(
    sn=(1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6,
        -3.120693124703272e-4, 7.244727626597022e-3, -9.228055941124598e-2,
        5.235987735681432e-1),
    cn=(1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5,
        -1.604381798862293e-3, 2.818489036795073e-2, -2.467398198317899e-1,
        9.999999760004487e-1),
    fn=(-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9,
        7.343848463587323e7, -8.732356681548485e5, 8.560515466275470e3,
        -1.032877601091159e2, 2.999401847870011e0),
    gn=(-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8,
        6.492611570598858e6, -7.787789623358162e4, 8.602931494734327e2,
        -1.493439396592284e1, 9.999841934744914e-1))


def _sincos_half_pi_sq(x):
  """``(sin(pi x^2 / 2), cos(pi x^2 / 2))`` with the argument reduced exactly: for
  ``s = x mod 2``, ``x^2 / 2 = s (x - s/2) (mod 2)``."""
  x = lax.abs(x)
  s = jnp.fmod(x, 2.0)
  r = jnp.fmod(s * (x - s / 2), 2.0)
  sin = lambda v: lax.sin(math.pi * v)  # noqa: E731
  sinpi = jnp.where(r < 0.5, sin(r), jnp.where(r > 1.5, sin(r - 2.0), -sin(r - 1.0)))
  cospi = jnp.where(r == 0.5, 0.0, jnp.where(r < 1.0, -sin(r - 0.5), sin(r - 1.5)))
  return sinpi, cospi


def _fresnel_impl(xa):
  single = xa.dtype == np.float32
  k = _FRESNEL32 if single else _FRESNEL64
  x = lax.abs(xa)
  x2 = x * x
  t = x2 * x2
  if single:
    s_small = x * x2 * _poly(t, k["sn"])
    c_small = x * _poly(t, k["cn"])
  else:
    s_small = x * x2 * _poly(t, k["sn"]) / _poly(t, k["sd"])
    c_small = x * _poly(t, k["cn"]) / _poly(t, k["cd"])
  sinpi, cospi = _sincos_half_pi_sq(x)
  if single:
    s_large = c_large = 0.5
  else:
    c_large = 0.5 + 1 / (math.pi * x) * sinpi
    s_large = 0.5 - 1 / (math.pi * x) * cospi
  pt = math.pi * x2
  u = 1.0 / (pt * pt)
  t = 1.0 / pt
  if single:
    f = 1.0 - u * _poly(u, k["fn"])
    g = t * _poly(u, k["gn"])
  else:
    f = 1.0 - u * _poly(u, k["fn"]) / _poly(u, k["fd"])
    g = t * _poly(u, k["gn"]) / _poly(u, k["gd"])
  px = math.pi * x
  c_mid = 0.5 + (f * sinpi - g * cospi) / px
  s_mid = 0.5 - (f * cospi + g * sinpi) / px
  inf, small, large = jnp.isinf(xa), x2 < 2.5625, x > 36974.0

  def pick(v_small, v_large, v_mid):
    v = jnp.where(inf, 0.5, jnp.where(small, v_small, jnp.where(large, v_large, v_mid)))
    return jnp.where(xa < 0.0, -v, v)
  return pick(s_small, s_large, s_mid), pick(c_small, c_large, c_mid)


@custom_jvp
def fresnel(x):
  r"""The Fresnel integrals :math:`S(x) = \int_0^x \sin(\pi t^2/2)\,dt` and
  :math:`C(x) = \int_0^x \cos(\pi t^2/2)\,dt` for real ``x``.

  Cephes' approximations (``fresnl`` in double precision, ``fresnlf`` in single; float16 and
  bfloat16 evaluated in float32), accurate on about :math:`[-10, 10]`; the derivatives are
  :math:`\sin(\pi x^2/2)` and :math:`\cos(\pi x^2/2)` with the argument reduced exactly.

  Args:
    x: real-valued array.

  Returns:
    The pair ``(S(x), C(x))``.
  """
  x, = promote_args_inexact("fresnel", x)
  if dtypes.is_complex(x.dtype):
    raise NotImplementedError("Support for complex-valued inputs is not implemented yet.")
  if x.dtype not in (np.float16, np.float32, np.float64, dtypes.bfloat16):
    raise NotImplementedError(f"Support for {x.dtype} dtype is not implemented yet.")
  return _half_to_single(_fresnel_impl, x)


@fresnel.defjvp
def _fresnel_jvp(primals, tangents):
  x, = primals
  t, = tangents
  sinpi, cospi = _sincos_half_pi_sq(x)
  return fresnel(x), (sinpi * t, cospi * t)


# ----------------------------------------------------------------- exponential and trigonometric
# integrals (Cephes' ei.c, expn.c, sici.c and spence.c, as JAX 0.10.2 evaluates them)

# expi for x > 0: on (0, 2], x A(x)/B(x) + gamma + log x; on (2^k, 2^(k+1)] (k = 1..5) and
# beyond 64, e^x/x (1 + w A(w)/B(w)) with w = 1/x
_EXPI = (
    ((-5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
      5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6),
     (1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
      1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6)),
    ((1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
      2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
      -1.545042679673485262580e-3, 7.059980605299617478514e-5),
     (1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
      2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
      3.953167195549672482304e-5)),
    ((-1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
      -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
      4.371064420753005429514e-5, 2.141783679522602903795e-6),
     (1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
      2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
      -4.729848351866523044863e-6, 2.665195537390710170105e-6)),
    ((-2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
      2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
      1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
      6.176407863710360207074e-10),
     (1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1, -1.566542966630792353556e-2,
      2.761106850817352773874e-3, -2.089148012284048449115e-4, 1.708528938807675304186e-5,
      -4.459311796356686423199e-7, 1.394634930353847498145e-8, 6.150865933977338354138e-10)),
    ((-2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
      -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
      2.644179518984235952241e-6, -4.239473659313765177195e-8),
     (1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1, 9.695000254621984627876e-2,
      -1.601745692712991078208e-2, 1.496414899205908021882e-3, -8.462452563778485013756e-5,
      2.728938403476726394024e-6, -4.239462431819542051337e-8)),
    ((1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
      -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5),
     (1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
      1.560544881127388842819e-3, -2.523137093603234562648e-5)),
    ((-7.657847078286127362028e-1, 6.886192415566705051750e-1, -2.132598113545206124553e-1,
      3.346107552384193813594e-2, -3.076541477344756050249e-3, 1.747119316454907477380e-4,
      -6.103711682274170530369e-6, 1.218032765428652199087e-7, -1.086076102793290233007e-9),
     (1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
      3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
      -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9)))


def _expi_impl(x):
  s = functools.partial(_strong, x)
  w = s(1) / x
  out = None
  # (2^k, 2^(k+1)] for k = 5 .. 1 over the rule beyond 64 (which also takes 0 and NaN)
  for k, (a, b) in zip(range(6, 0, -1), _EXPI[:0:-1]):
    v = lax.exp(x) * w * (w * (_poly(w, a) / _poly(w, b)) + s(1))
    out = v if out is None else jnp.where((x > s(2.0 ** k)) & (x <= s(2.0 ** (k + 1))), v, out)
  (a, b), small = _EXPI[0], (x > s(0)) & (x <= s(2))
  out = jnp.where(small, x * (_poly(x, a) / _poly(x, b)) + _EULER_GAMMA + lax.log(x), out)
  neg = x < s(0)  # -E_1(-x) (by expn's methods, as JAX's)
  return jnp.where(neg, -_expn(jnp.ones_like(x), jnp.where(neg, -x, s(1))), out)


@custom_jvp
def _expi(x):
  return _expi_impl(x)


_expi.defjvps(lambda t, ans, x: lax.exp(x) / x * t)


def expi(x):
  r"""The exponential integral :math:`\mathrm{Ei}(x) = \int_{-\infty}^x e^t/t\,dt` for real
  ``x``: Cephes' rational approximations on :math:`(0, 2]`, on :math:`(2^k, 2^{k+1}]` for
  :math:`k = 1..5` and beyond 64, and :math:`-E_1(-x)` (``expn``'s methods) for negative
  ``x``; NaN at 0, as JAX's.

  Args:
    x: real-valued array.

  Returns:
    :math:`\mathrm{Ei}(x)`, with the derivative :math:`e^x/x`.
  """
  x, = _real("expi", x)
  return _expi(x)


# sici: Si and Ci for |x| <= 4 as x P(x^2)/Q(x^2) and gamma + log x + x^2 P(x^2)/Q(x^2); on
# (4, 8] and (8, 1e9] the auxiliary functions f, g (in 1/x^2); beyond, their leading terms
_SICI_SMALL = (
    ((-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
      9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0),
     (2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
      9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1)),
    ((2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
      -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0),
     (4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
      3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0)))
_SICI_AUX = (  # (f numerator, f denominator, g numerator, g denominator) below and above 8
    ((4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0,
      1.67006611831323023771e-1, 6.81020132472518137426e-3, 1.08936580650328664411e-4,
      5.48900223421373614008e-7),
     (1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
      1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4,
      5.48900252756255700982e-7),
     (8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1,
      7.48527737628469092119e-2, 5.38868681462177273157e-3, 1.61999794598934024525e-4,
      1.97963874140963632189e-6, 7.82579040744090311069e-9),
     (1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
      6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6,
      7.82579218933534490868e-9)),
    ((4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1,
      1.16064229408124407915e-2, 3.49556442447859055605e-4, 4.86215430826454749482e-6,
      3.20092790091004902806e-8, 9.41779576128512936592e-11, 9.70507110881952024631e-14),
     (1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1, 1.22253594771971293032e-2,
      3.58696481881851580297e-4, 4.92435064317881464393e-6, 3.21956939101046018377e-8,
      9.43720590350276732376e-11, 9.70507110881952025725e-14),
     (6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2,
      1.71718239052347903558e-3, 3.48941165502279436777e-5, 3.47131167084116673800e-7,
      1.70404452782044526189e-9, 3.85945925430276600453e-12, 3.14040098946363334640e-15),
     (1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1, 4.67913194259625806320e-2,
      1.90284426674399523638e-3, 3.68475504442561108162e-5, 3.57043223443740838771e-7,
      1.72693748966316146736e-9, 3.87830166023954706752e-12, 3.14040098946363335242e-15)))


def _sici_impl(x):
  ax = lax.abs(x)
  (sn, sd), (cn, cd) = _SICI_SMALL
  t = ax * ax
  si_s = jnp.where(ax == 0, 0.0, ax * _poly(t, sn) / _poly(t, sd))
  ci_s = jnp.where(ax == 0, -np.inf, _EULER_GAMMA + lax.log(ax) + t * _poly(t, cn) / _poly(t, cd))
  sin, cos = lax.sin(ax), lax.cos(ax)
  z = 1.0 / (ax * ax)
  aux = [(_poly(z, fn) / (ax * _poly(z, fd)), z * _poly(z, gn) / _poly(z, gd))
         for fn, fd, gn, gd in _SICI_AUX]
  below8 = ax < 8.0
  f = jnp.where(below8, aux[0][0], aux[1][0])
  g = jnp.where(below8, aux[0][1], aux[1][1])
  si_a = math.pi / 2 - f * cos - g * sin
  ci_a = f * sin - g * cos
  inf = jnp.isposinf(ax)
  si_f = jnp.where(inf, math.pi / 2, math.pi / 2 - cos / ax)
  ci_f = jnp.where(inf, 0.0, sin / ax)
  series, asym = ax <= 4, (ax > 4) & (ax <= 1e9)
  si = jnp.where(series, si_s, jnp.where(asym, si_a, si_f))
  ci = jnp.where(series, ci_s, jnp.where(asym, ci_a, ci_f))
  return lax.sign(x) * si, jnp.where(jnp.isneginf(x), np.nan, ci)


@custom_jvp
def _sici(x):
  return _sici_impl(x)


@_sici.defjvp
def _sici_jvp(primals, tangents):
  x, = primals
  t, = tangents
  return _sici(x), (jnp.sinc(x / np.pi) * t, lax.cos(x) / x * t)


def sici(x):
  r"""The sine and cosine integrals :math:`\mathrm{Si}(x) = \int_0^x \sin t/t\,dt` and
  :math:`\mathrm{Ci}(x) = \gamma + \log x + \int_0^x (\cos t - 1)/t\,dt` for real ``x``.

  Cephes' rational approximations up to :math:`|x| = 4`, its auxiliary functions ``f``, ``g``
  up to :math:`10^9`, their leading terms beyond. ``Si`` is odd; ``Ci`` is evaluated at
  :math:`|x|` (NaN at :math:`-\infty`).

  Args:
    x: real-valued array.

  Returns:
    The pair ``(Si(x), Ci(x))``; the derivatives are :math:`\sin x/x` and :math:`\cos x/x`.
  """
  x, = promote_args_inexact("sici", x)
  if dtypes.is_complex(x.dtype):
    raise ValueError(f"Argument `x` to sici must be real-valued. Got dtype {x.dtype}.")
  return _sici(x)


def _while_active(active, body, init):
  """A per-element ``while``: ``body`` maps the state (a tuple of arrays of one shape) to the
  next; each element stops updating once ``active`` is False for it (what a vmapped scalar
  loop computes, without a batch axis)."""
  def step(st):
    on = active(st)
    return tuple(jnp.where(on, new, old) for new, old in zip(body(st), st))
  return lax.while_loop(lambda st: jnp.any(active(st)), step, init)


def _expn_series(n, x):
  """``E_n(x)`` for ``0 < x <= 1`` (Cephes' power series): ``(-x)^(n-1) psi / (n-1)!`` less
  ``sum_{k != n-1} (-x)^k / ((k - n + 1) k!)``, ``psi = -gamma - log x + sum_{i<n} 1/i``."""
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps)
  psi = -_EULER_GAMMA - lax.log(x)
  _, psi = _while_active(lambda st: st[0] < n, lambda st: (st[0] + s(1), st[1] + s(1) / st[0]),
                         (jnp.ones_like(x), psi))
  z = -x
  one_n = n == s(1)
  init = (jnp.zeros_like(x), jnp.ones_like(x), s(1) - n,
          jnp.where(one_n, s(0), s(1) / (s(1) - jnp.where(one_n, s(2), n))),
          jnp.full_like(x, np.inf))

  def body(st):
    xk, yk, pk, ans, _ = st
    xk = xk + s(1)
    yk = yk * (z / xk)
    pk = pk + s(1)
    ans = ans + jnp.where(pk != s(0), yk / pk, s(0))
    return xk, yk, pk, ans, jnp.where(ans != s(0), lax.abs(yk / ans), s(1))
  ans = _while_active(lambda st: (x > s(0)) & (st[4] > eps), body, init)[3]
  # (n = 1 spelled out: XLA's constant folding of lgamma(1) is not exactly 0)
  lead = jnp.where(one_n, psi, z ** (n - s(1)) * psi / lax.exp(lax.lgamma(n)))
  return lead - ans


def _expn_fraction(n, x):
  """``E_n(x)`` for ``x > 1``: Cephes' continued fraction, its convergents rescaled by
  ``2^57`` when they grow past it."""
  s = functools.partial(_strong, x)
  big, eps = s(1.44115188075855872e17), s(np.finfo(x.dtype).eps)
  init = (jnp.ones_like(x), jnp.ones_like(x), x, jnp.ones_like(x), x + n, s(1) / (x + n),
          jnp.full_like(x, np.inf), jnp.zeros_like(x))

  def body(st):
    k, pkm2, qkm2, pkm1, qkm1, ans, _, r = st
    k = k + s(1)
    odd = jnp.remainder(k, s(2)) == s(1)
    yk = jnp.where(odd, s(1), x)
    xk = jnp.where(odd, n + (k - s(1)) / s(2), k / s(2))
    pk = pkm1 * yk + pkm2 * xk
    qk = qkm1 * yk + qkm2 * xk
    nz = qk != s(0)
    r = jnp.where(nz, pk / qk, r)
    t = jnp.where(nz, lax.abs((ans - r) / r), s(1))
    ans = jnp.where(nz, r, ans)
    scale = jnp.where(lax.abs(pk) > big, big, s(1))
    return k, pkm1 / scale, qkm1 / scale, pk / scale, qk / scale, ans, t, r
  return _while_active(lambda st: (x > s(0)) & (st[6] > eps), body, init)[5] * lax.exp(-x)


def _expn_large_n(n, x):
  """``E_n(x)`` for ``n >= 5000``: three terms of its expansion in ``1/(x + n)``."""
  s = functools.partial(_strong, x)
  xk = x + n
  yk = s(1) / (xk * xk)
  ans = yk * n * (s(6) * x * x - s(8) * n * x + n * n)
  ans = yk * (ans + n * (n - s(2) * x))
  ans = yk * (ans + n)
  return (ans + s(1)) * lax.exp(-x) / xk


@functools.partial(custom_jvp, nondiff_argnums=(0,))
def _expn(n, x):
  s = functools.partial(_strong, x)
  n, x = jnp.broadcast_arrays(n, x)
  frac = x > s(1)
  large = (n >= s(5000)) & ~frac
  series = ~frac & ~large
  # (each method on benign arguments where it is unused: its loop stops at once)
  v = jnp.where(series, _expn_series(jnp.where(series, n, s(1)), jnp.where(series, x, s(0.5))),
                _expn_large_n(n, x))
  v = jnp.where((n == s(0)) & ~frac & ~large, lax.exp(-x) / x, v)
  v = jnp.where((x == s(0)) & ~large, jnp.where(n < s(2), s(np.inf), s(1) / (n - s(1))), v)
  v = jnp.where((n < s(0)) | (x < s(0)), s(np.nan), v)
  v = jnp.where(frac, _expn_fraction(jnp.where(frac, n, s(1)), jnp.where(frac, x, s(2))), v)
  return jnp.where(jnp.isposinf(x) & (n >= s(0)), s(0), v)


@_expn.defjvp
def _expn_jvp(n, primals, tangents):
  x, = primals
  t, = tangents
  return _expn(n, x), -t * _expn(n - _strong(n, 1), x)


def expn(n, x):
  r"""The generalized exponential integral :math:`E_n(x) = \int_1^\infty e^{-xt}/t^n\,dt`.

  Cephes' methods: the power series for :math:`x \le 1`, the continued fraction beyond,
  an expansion in :math:`1/(x + n)` for :math:`n \ge 5000`; :math:`e^{-x}/x` for ``n = 0``.
  Differentiable in ``x`` (:math:`-E_{n-1}(x)`), not in ``n``.

  Args:
    n: real-valued array, the order (integral values; NaN below 0).
    x: real-valued array (NaN below 0).

  Returns:
    :math:`E_n(x)` for ``n`` and ``x`` broadcast together.
  """
  n, x = promote_args_inexact("expn", n, x)
  if dtypes.is_complex(x.dtype):
    raise ValueError("expn does not support complex-valued inputs.")
  return _expn(n, x)


# spence: Cephes' rational approximation -w A(w)/B(w) of the dilogarithm about 1, with the
# reflections x -> 1/x (x > 1.5) and x -> 1 - x (x < 0.5)
_SPENCE = (
    (4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
     8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
     3.29771340985225106936e0, 1.00000000000000000126e0),
    (6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
     1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
     3.54771340985225096217e0, 9.99999999999999998740e-1))


def _spence_impl(x):
  # (each branch at a benign point where it is unused, so its derivative stays finite)
  special = (x <= 0.0) | (x == 1.0)
  xs = jnp.where(special, _strong(x, 0.5), x)
  inv = xs > 2.0
  xs = jnp.where(inv, 1.0 / jnp.where(inv, xs, _strong(x, 4)), xs)
  hi, lo = xs > 1.5, xs < 0.5
  xh = jnp.where(hi, xs, _strong(x, 2))
  xl = jnp.where(lo, xs, _strong(x, 0.25))
  w = jnp.where(hi, 1.0 / xh - 1.0, jnp.where(lo, -xs, xs - 1.0))
  a, b = _SPENCE
  y = -w * _poly(w, a) / _poly(w, b)
  y = jnp.where(lo, np.pi ** 2 / 6.0 - lax.log(xl) * lax.log(1.0 - xl) - y, y)
  y = jnp.where(inv | hi, -0.5 * lax.log(xs) ** 2 - y, y)
  return jnp.where(x < 0.0, np.nan, jnp.where(x == 1.0, 0.0, jnp.where(
      x == 0.0, np.pi ** 2 / 6, y)))


def spence(x):
  r"""Spence's function (the dilogarithm) :math:`\int_1^x \log t/(1 - t)\,dt` for real
  ``x >= 0`` (NaN below 0; SciPy's convention: ``spence(1 - z)`` is
  :math:`-\int_0^z \log(1 - t)/t\,dt`).

  Cephes' rational approximation about 1 with the reflections :math:`x \to 1/x` and
  :math:`x \to 1 - x`.

  Args:
    x: float32 or float64 array.

  Returns:
    Spence's function of ``x``, of ``x``'s dtype.
  """
  x = jnp.asarray(x)
  if x.dtype not in (np.float32, np.float64):
    raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported types.")
  return _spence_impl(x)


# ----------------------------------------------------------------- Owen's T

# Patefield & Tandy's method T5: a 13-point Gauss rule for T(h, a) = a sum_i w_i
# exp(-h^2 (1 + a^2 t_i)/2) / (1 + a^2 t_i) (|a| <= 1; 1/(2 pi) and the substitution
# u^2 = a^2 t folded into the weights). Float64 NumPy constants, as JAX's: under x64 the sum
# is float64 for any input precision.
_OWENS_T_NODES = np.array([
    0.0035082039676451715, 0.031279042338030754, 0.085266826283219451, 0.16245071730812277,
    0.25851196049125435, 0.36807553840697534, 0.48501092905604697, 0.60277514152618577,
    0.71477884217753227, 0.81475510988760099, 0.89711029755948966, 0.95723808085944262,
    0.99178832974629704])
_OWENS_T_WEIGHTS = np.array([
    0.018831438115323503, 0.018567086243977649, 0.018042093461223386, 0.017263829606398753,
    0.016243219975989857, 0.014994592034116705, 0.013535474469662088, 0.011886351605820165,
    0.010070377242777432, 0.0081130545742299587, 0.0060419009528470239, 0.0038862217010742058,
    0.0016793031084546090])


@custom_jvp
def _owens_t(h, a):
  h, aa = lax.abs(h), lax.abs(a)
  r2 = _strong(h, math.sqrt(2))
  hn = h / r2
  inner = aa <= 1.0
  ma = jnp.where(inner, aa, 1.0 / aa)  # T(h, a) from T(a h, 1/a) when |a| > 1
  mh = jnp.where(inner, h, aa * h)
  r = jnp.expand_dims(ma * ma, -1) * _OWENS_T_NODES
  f = lax.exp(-0.5 * jnp.expand_dims(mh * mh, -1) * (1.0 + r)) / (1.0 + r)
  t = ma * jnp.matmul(f, _OWENS_T_WEIGHTS)
  t = jnp.where(mh == 0.0, jnp.arctan(ma) / (2 * np.pi), t)
  t = jnp.where(ma == 1.0, 0.125 * lax.erfc(-mh / r2) * lax.erfc(mh / r2), t)
  qh, qah = lax.erfc(hn), lax.erfc(aa * hn)
  refl = jnp.where(aa * h <= 0.67, 0.25 - 0.25 * lax.erf(hn) * lax.erf(aa * hn) - t,
                   0.25 * (qh + qah - qh * qah) - t)
  t = lax.sign(a) * jnp.where(aa > 1.0, refl, t)
  return jnp.where(jnp.isnan(a) | jnp.isnan(h), jnp.full_like(t, np.nan), t)


@_owens_t.defjvp
def _owens_t_jvp(primals, tangents):
  h, a = primals
  dh, da = tangents
  out = _owens_t(h, a)
  d_h = (-lax.exp(-0.5 * (h * h)) * lax.erf(a * h / _strong(h, math.sqrt(2)))
         / (2.0 * _strong(h, math.sqrt(2 * math.pi))))
  a1 = a * a + 1.0
  d_a = lax.exp(-0.5 * a1 * (h * h)) / (2.0 * np.pi * a1)
  return out, (d_h * dh + d_a * da).astype(out.dtype)


def owens_t(h, a):
  r"""Owen's T function :math:`T(h, a) = \frac{1}{2\pi}\int_0^a
  \frac{e^{-h^2(1 + x^2)/2}}{1 + x^2}\,dx`.

  A 13-point Gauss rule (Patefield & Tandy's method T5) for :math:`|a| \le 1`, the reflection
  :math:`T(h, a) = \frac14 - \ldots - T(ah, 1/a)` beyond, exact values at :math:`h = 0` and
  :math:`|a| = 1`. As JAX's under x64, the rule's float64 constants make the result float64.

  Args:
    h, a: real-valued arrays (broadcast together).

  Returns:
    :math:`T(h, a)` (odd in ``a``, even in ``h``).
  """
  h, a = promote_args_inexact("owens_t", h, a)
  return _owens_t(h, a)


# ----------------------------------------------------------------- hypergeometric functions
# (Pearson, Olver & Porter 2014, "Numerical methods for the computation of the confluent and
# Gauss hypergeometric functions", with JAX 0.10.2's method choices. Every loop is per element
# and capped at 250 terms; ``on`` masks the elements a method is used for, the others never
# iterate.)


def _stacked(f, *xs):
  """``[f(x) for x in xs]`` (arrays of one shape and dtype) as one evaluation of ``f``: a
  smaller program where ``f`` expands to many operations (``gamma``, ``digamma``)."""
  out = f(jnp.stack(xs))
  return [out[i] for i in range(len(xs))]


def _sum_terms(on, first, ratio, extra=None):
  """``sum_k term_k * extra(k)`` (``extra`` 1 when None) for ``term_1 = first`` and
  ``term_{k+1} = term_k * ratio(k)``; a series starting at 1 when ``extra`` is None, else at
  0. It stops where ``|term| / |sum| <= eps`` or at ``k = 250``."""
  s = functools.partial(_strong, first)
  eps = s(np.finfo(first.dtype).eps)
  init = (jnp.full_like(first, 1 if extra is None else 0), jnp.ones_like(first), first)

  def active(st):
    acc, k, term = st
    return on & (k < s(250)) & (lax.abs(term) / lax.abs(acc) > eps)

  def body(st):
    acc, k, term = st
    acc = acc + (term if extra is None else term * extra(k))
    return acc, k + s(1), term * ratio(k)
  return _while_active(active, body, init)[0]


def _hyp1f1_impl(a, b, x):
  s = functools.partial(_strong, x)
  near = lax.abs(x) < s(100)
  series = _sum_terms(near, a / b * x, lambda k: (a + k) / (b + k) * x / (k + s(1)))
  asym = _sum_terms(~near, (b - a) * (s(1) - a) / x,
                    lambda k: (b - a + k) * (s(1) - a + k) / (k + s(1)) / x)
  g_b, g_a = _stacked(gamma, b, a)
  asym = g_b / g_a * lax.exp(x) * x ** (a - b) * asym
  out = jnp.where(near, series, asym)
  a0 = a == s(0)
  return jnp.where(a0, s(1), jnp.where(a == b, lax.exp(x), jnp.where(b == s(0), s(np.inf), out)))


def _hyp1f1_args(a, b, x):
  a, b, x = promote_args_inexact("hyp1f1", a, b, x)
  if dtypes.is_complex(x.dtype):
    raise ValueError("hyp1f1 does not support complex-valued inputs.")
  return jnp.broadcast_arrays(a, b, x)


def _hyp1f1_dparam(which, a, b, x):
  """``d/da`` (``which`` 0) or ``d/db`` (1) of 1F1 by differentiating its series termwise:
  ``sum_k t_k (psi(a + k) - psi(a))``, resp. ``sum_k t_k (psi(b) - psi(b + k))``."""
  a, b, x = _hyp1f1_args(a, b, x)
  s = functools.partial(_strong, x)
  extra = ((lambda k: digamma(a + k) - digamma(a)) if which == 0 else
           (lambda k: digamma(b) - digamma(b + k)))
  return _sum_terms(jnp.ones(x.shape, bool), a / b * x,
                    lambda k: (a + k) / (b + k) * x / (k + s(1)), extra)


@custom_jvp
def hyp1f1(a, b, x):
  r"""The confluent hypergeometric function :math:`{}_1F_1(a; b; x) =
  \sum_k \frac{(a)_k}{(b)_k} \frac{x^k}{k!}` for real arguments.

  Its power series for :math:`|x| < 100`, else the asymptotic expansion
  :math:`\frac{\Gamma(b)}{\Gamma(a)} e^x x^{a-b} \sum_k \frac{(b-a)_k (1-a)_k}{k!\,x^k}` (NaN
  for :math:`x \le -100` unless ``a - b`` is integral), each summed to machine precision or
  250 terms. Exact cases: 1 for ``a = 0`` (also ``a = b = 0``, unlike SciPy), :math:`e^x` for
  ``a = b``, ``inf`` for ``b = 0``. Large results lose accuracy, in single precision first.
  Differentiable in all three arguments (the parameter derivatives by termwise series).

  Args:
    a, b, x: real-valued arrays (broadcast together).

  Returns:
    :math:`{}_1F_1(a; b; x)`.
  """
  return _hyp1f1_impl(*_hyp1f1_args(a, b, x))


hyp1f1.defjvps(lambda t, ans, a, b, x: _hyp1f1_dparam(0, a, b, x) * t,
               lambda t, ans, a, b, x: _hyp1f1_dparam(1, a, b, x) * t,
               lambda t, ans, a, b, x: a / b * hyp1f1(a + 1, b + 1, x) * t)


def _hyp2f1_series(on, a, b, c, x):
  """The Gauss series, summed until ``|term| <= eps |sum|`` (or 250 terms)."""
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps)
  init = (jnp.zeros_like(x), jnp.ones_like(x), jnp.ones_like(x))

  def body(st):
    acc, k, term = st
    return (acc + term, k + s(1),
            term * ((a + k - s(1)) * (b + k - s(1)) / (c + k - s(1)) / k * x))
  active = lambda st: on & (st[1] < s(250)) & (lax.abs(st[2]) > eps * lax.abs(st[0]))  # noqa: E731
  return _while_active(active, body, init)[0]


def _hyp2f1_polynomial(on, a, b, c, x):
  """The terminating series (``a`` or ``b`` a non-positive integer): ``|n| + 1`` terms, ``n``
  the one of ``a``, ``b`` that is (the smaller, unless ``c`` is a non-positive integer
  between them)."""
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps * 50)
  swap = (b < a) & (lax.abs(b - jnp.round(b)) < eps) & ~(
      (jnp.remainder(c, s(1)) == s(0)) & (c <= s(0)) & (c > b))
  a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
  n = jnp.where(on, lax.abs(a), s(0))

  def body(st):
    i, acc, term = st
    term = term * (-(n - i + s(1)) / (c + i - s(1)) * (b + i - s(1)) / i * x)
    return i + s(1), acc + term, term
  init = (jnp.ones_like(x), jnp.ones_like(x), jnp.ones_like(x))
  return _while_active(lambda st: st[0] < n + s(1), body, init)[1]


def _hyp2f1_near_one(on, a, b, c, x):
  """Near ``x = 1`` with ``c - a - b`` (nearly) an integer ``m``: the logarithmic
  (digamma) expansion in ``1 - x`` (Abramowitz & Stegun 15.3.10-12)."""
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps)
  d = c - a - b
  w = s(1) - x
  m = jnp.round(d)
  up = m >= s(0)
  e = jnp.where(up, d, -d)
  d1 = jnp.where(up, d, s(0))
  d2 = jnp.where(up, s(0), d)
  am = jnp.where(on, jnp.where(up, m, -m), s(0))
  lw = lax.log(w)
  g_e1, g_e2, g_c, g_e, g_ad1, g_bd1, g_ad2, g_bd2, g_a, g_b = _stacked(
      gamma, e + 1.0, e + 2.0, c, e, a + d1, b + d1, a + d2, b + d2, a, b)
  p_e, p_a, p_b = _stacked(digamma, 1.0 + e, a + d1, b + d1)
  y = digamma(1.0) + p_e - p_a - p_b - lw
  y = y / g_e1
  p = (a + d1) * (b + d1) * w / g_e2

  def body(st):
    t, p, q, y = st
    p_t, p_te, p_ta, p_tb = _stacked(digamma, 1.0 + t, 1.0 + t + e, a + t + d1, b + t + d1)
    r = p_t + p_te - p_ta - p_tb - lw
    q = p * r
    p = p * (w * (a + t + d1) / (t + 1.0))
    p = p * ((b + t + d1) / (t + 1.0 + e))
    return t + s(1), p, q, y + q
  active = lambda st: on & (st[0] < s(250)) & (lax.abs(st[2]) >= eps * lax.abs(st[3]))  # noqa: E731
  _, _, _, y = _while_active(active, body, (jnp.ones_like(x), p, y, y))

  def finite_part(st):  # the m-term finite sum
    i, t, p, y1 = st
    r = 1.0 - e + t
    p = p * (w * (a + t + d2) * (b + t + d2) / r)
    t = t + 1.0
    return i + s(1), t, p / t, y1 + p / t
  y1 = _while_active(lambda st: st[0] < am, finite_part,
                     (jnp.ones_like(x), jnp.zeros_like(x), jnp.ones_like(x),
                      jnp.ones_like(x)))[3]
  y1 = y1 * (g_e * g_c / (g_ad1 * g_bd1))
  ym = y * (g_c / (g_ad2 * g_bd2))
  ym = jnp.where(jnp.remainder(am, s(2)) == s(1), -ym, ym)
  q = w ** m
  summed = jnp.where(m > s(0), ym * q + y1, ym + y1 * q)
  return jnp.where(m == s(0), y * g_c / (g_a * g_b), summed)


def _hyp2f1_dispatch(on, a, b, c, x):
  """The series, its terminating form, or near 1 the digamma expansion."""
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps * 50)
  d = c - a - b
  neg_int = lambda v: (v <= s(0)) & (lax.abs(v - jnp.round(v)) < eps)  # noqa: E731
  poly = neg_int(a) | neg_int(b)
  near = (x > s(0.9)) & ~poly & (lax.abs(d - jnp.round(d)) < eps)
  series = ~poly & ~near
  return jnp.where(poly, _hyp2f1_polynomial(on & poly, a, b, c, x),
                   jnp.where(near, _hyp2f1_near_one(on & near, a, b, c, x),
                             _hyp2f1_series(on & series, a, b, c, x)))


def _hyp2f1_args(a, b, c, x):
  a, b, c, x = promote_args_inexact("hyp2f1", a, b, c, x)
  if dtypes.is_complex(x.dtype):  # (JAX's: its remainder's dtype check)
    raise TypeError(f"rem does not accept dtype {x.dtype.name} at position 0. Accepted dtypes "
                    "at position 0 are subtypes of integer, floating.")
  return jnp.broadcast_arrays(a, b, c, x)


def _hyp2f1_impl(a, b, c, x):
  s = functools.partial(_strong, x)
  eps = s(np.finfo(x.dtype).eps * 50)
  d = c - a - b
  w = s(1) - x
  ca, cb = c - a, c - b
  # the cases in order, the first that holds
  one = (x == s(0)) | (((a == s(0)) | (b == s(0))) & (c != s(0)))
  pole = (c == s(0)) | ((c < s(0)) & (jnp.remainder(c, s(1)) == s(0)))
  euler = (d <= s(-1)) & ~((lax.abs(d - jnp.round(d)) >= eps) & (w < s(0)))  # (1-x)^d F(c-a, c-b)
  div1 = (d <= s(0)) & (x == s(1))
  pow_a = (x < s(1)) & (b == c)
  pow_b = (x < s(1)) & (a == c)
  above = x > s(1)
  gauss = x == s(1)
  cases = [one, pole, euler, div1, pow_a, pow_b, above, gauss]
  taken, first = jnp.zeros(x.shape, bool), []
  for cs in cases:
    first.append(cs & ~taken)
    taken = taken | cs
  one, pole, euler, div1, pow_a, pow_b, above, gauss = first
  # one evaluation for both uses: F(a, b; c; x), or F(c - a, c - b; c; x) for Euler's
  out = _hyp2f1_dispatch(~taken | euler, jnp.where(euler, ca, a), jnp.where(euler, cb, b), c, x)
  out = jnp.where(euler, w ** d * out, out)
  g_c, g_d, g_ca, g_cb = _stacked(gamma, c, d, ca, cb)
  out = jnp.where(gauss, g_c * g_d / (g_ca * g_cb), out)
  out = jnp.where(pow_b, w ** (-b), out)
  out = jnp.where(pow_a, w ** (-a), out)
  out = jnp.where(pole | div1 | above, s(np.inf), out)
  return jnp.where(one, s(1), out)


def _hyp2f1_dparam(which, a, b, c, x):
  """``d/da``, ``d/db`` (``which`` 0, 1: ``sum_k t_k (psi(p + k) - psi(p))``) or ``d/dc``
  (2: ``sum_k t_k (psi(c) - psi(c + k))``) of 2F1 by differentiating the series termwise."""
  a, b, c, x = _hyp2f1_args(a, b, c, x)
  s = functools.partial(_strong, x)
  p = (a, b)[which] if which < 2 else c
  extra = ((lambda k: digamma(p + k) - digamma(p)) if which < 2 else
           (lambda k: digamma(c) - digamma(c + k)))
  return _sum_terms(jnp.ones(x.shape, bool), a * b / c * x,
                    lambda k: (a + k) * (b + k) / (c + k) / (k + s(1)) * x, extra)


@custom_jvp
def hyp2f1(a, b, c, x):
  r"""The Gauss hypergeometric function :math:`{}_2F_1(a, b; c; x) =
  \sum_k \frac{(a)_k (b)_k}{(c)_k} \frac{x^k}{k!}` for real arguments and :math:`x \le 1`.

  The power series (terminating when ``a`` or ``b`` is a non-positive integer); near
  :math:`x = 1` with ``c - a - b`` integral the logarithmic expansion in :math:`1 - x`
  (Abramowitz & Stegun 15.3.10-12); for ``c - a - b <= -1`` Euler's transformation
  :math:`(1 - x)^{c-a-b} {}_2F_1(c - a, c - b; c; x)`; closed forms at ``x = 0``, ``x = 1``
  (Gauss's theorem), ``a = c`` or ``b = c``. ``inf`` for ``x > 1`` and where ``c`` is a
  non-positive integer. Large results lose accuracy, in single precision first.
  Differentiable in all four arguments (the parameter derivatives by termwise series).

  Args:
    a, b, c, x: real-valued arrays (broadcast together).

  Returns:
    :math:`{}_2F_1(a, b; c; x)`.
  """
  return _hyp2f1_impl(*_hyp2f1_args(a, b, c, x))


hyp2f1.defjvps(lambda t, ans, a, b, c, x: _hyp2f1_dparam(0, a, b, c, x) * t,
               lambda t, ans, a, b, c, x: _hyp2f1_dparam(1, a, b, c, x) * t,
               lambda t, ans, a, b, c, x: _hyp2f1_dparam(2, a, b, c, x) * t,
               lambda t, ans, a, b, c, x: a * b / c * hyp2f1(a + 1, b + 1, c + 1, x) * t)


# ----------------------------------------------------------------- Bessel J_n, spherical harmonics


def bessel_jn(z, *, v, n_iter=50):
  r"""The Bessel functions of the first kind :math:`J_0(z), \ldots, J_v(z)` for real ``z``.

  Miller's backward recurrence :math:`f_{k} = \frac{2(k+1)}{z} f_{k+1} - f_{k+2}` from
  :math:`k = ` ``n_iter`` (Zhang & Jin, *Computation of Special Functions*), normalized by
  :math:`J_0 + 2\sum_k J_{2k} = 1`. Where the recurrence would overflow (small ``|z|``,
  single precision) the iterates are rescaled by powers of two, which changes no rounding;
  below :math:`|z| = 10^{-5}` (single precision :math:`10^{-3}`) the series
  :math:`\frac{(z/2)^k}{k!}(1 - \frac{(z/2)^2}{k+1})`, exact to rounding there (JAX's
  recurrence gives NaN for these and wherever it overflows). ``n_iter`` bounds the accuracy
  for large ``|z|``: take it above about ``|z| + 20``.

  Args:
    z: real-valued array.
    v: the largest order (a static int).
    n_iter: the order the recurrence starts from (a static int).

  Returns:
    An array of shape ``(v + 1,) + z.shape`` (at most ``n_iter + 1`` rows), of ``z``'s dtype.
  """
  z = jnp.asarray(z)
  z, = promote_dtypes_inexact(z)
  if dtypes.is_complex(z.dtype):
    raise ValueError("complex input not supported.")
  v = core.concrete_or_error(operator.index, v, "Argument v of bessel_jn.")
  n_iter = core.concrete_or_error(int, n_iter, "Argument n_iter of bessel_jn.")
  s = functools.partial(_strong, z)
  rows = len(range(n_iter + 1)[:v + 1])
  # below `tiny` the two-term series (z/2)^k/k! (1 - (z/2)^2/(k+1)) is exact to rounding
  tiny = s(1e-5 if z.dtype == np.float64 else 1e-3)
  small = lax.abs(z) < tiny
  zs = jnp.where(small, s(1), z)
  half = dtypes.finfo(z.dtype).maxexp // 2  # (rescale past 2^half: a step grows < 2^half)
  order = lax.broadcasted_iota(np.int32, (rows,) + z.shape, 0)

  def step(i, st):
    f0, f1, bs, buf = st
    k = n_iter - i
    kf = k.astype(z.dtype)
    f = s(2.0) * (kf + s(1.0)) * f1 / zs - f0
    bs = jnp.where(jnp.remainder(kf, s(2)) == s(0), bs + s(2.0) * f, bs)
    buf = jnp.where(order == k, f[None], buf)  # (explicit ranks: no implicit promotion)
    scale = jnp.where(lax.abs(f) > s(2.0 ** half), s(2.0 ** -half), s(1))
    return f1 * scale, f * scale, bs * scale, buf * scale[None]

  init = (jnp.zeros_like(z), jnp.full_like(z, 1e-16), jnp.zeros_like(z),
          jnp.zeros((rows,) + z.shape, z.dtype))
  _, f_0, bs, buf = lax.fori_loop(0, n_iter + 1, step, init)
  out = buf / (bs - f_0)[None]
  zt = jnp.where(small, z, s(0)) * s(0.5)
  q, t, series = zt * zt, jnp.ones_like(z), []
  for k in range(rows):
    t = t if k == 0 else t * zt / s(k)
    series.append(t * (s(1) - q / s(k + 1)))
  return jnp.where(small[None], jnp.stack(series) if rows else out, out)


def _normalized_legendre_diagonals(n_max, x):
  """The fully normalized associated Legendre functions (with the Condon-Shortley phase, as
  spherical harmonics use them) of degree ``l <= n_max`` at ``x``, by diagonals: ``D[i, m]``
  is :math:`\bar P_{m+i}^m(x)` (zero past ``m + i = n_max``), of shape
  ``(n_max + 1, n_max + 1) + x.shape``."""
  size = n_max + 1
  dt = x.dtype
  one = np.array(1, dt)
  ls = np.arange(size, dtype=dt)
  # the coefficients in x's precision (IEEE operations: the same numbers XLA computes)
  with np.errstate(divide="ignore", invalid="ignore"):
    m_, l_ = np.meshgrid(ls, ls, indexing="ij")
    c0, c1 = l_ * l_, m_ * m_
    d0 = np.sqrt((dt.type(4.0) * c0 - one) / (c0 - c1))
    d1 = np.sqrt(((dt.type(2.0) * l_ + one) * ((l_ - one) * (l_ - one) - c1))
                 / ((dt.type(2.0) * l_ - dt.type(3.0)) * (c0 - c1)))
  f_a = np.cumprod(-np.sqrt(one + dt.type(0.5) / ls[1:]))
  f_b = np.sqrt(dt.type(2.0) * ls[:-1] + dt.type(3.0))
  start = 0.5 / math.sqrt(math.pi)
  root = lax.sqrt(1.0 - x * x)
  pw, diag = root, [jnp.full_like(x, start)]
  for m in range(1, size):  # P_m^m = start * f_a[m-1] * (1 - x^2)^(m/2)
    diag.append((pw * f_a[m - 1]) * start)
    pw = pw * root
  diags = [diag]
  if size > 1:
    diags.append([(x * f_b[m]) * diag[m] for m in range(size - 1)])
  for i in range(2, size):
    prev, prev2 = diags[i - 1], diags[i - 2]
    diags.append([(prev[m] * x) * d0[m, m + i] - prev2[m] * d1[m, m + i]
                  for m in range(size - i)])
  pad = jnp.zeros_like(x)
  return jnp.stack([jnp.stack(d + [pad] * (size - len(d))) for d in diags])


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
  r"""The spherical harmonics :math:`Y_n^m(\theta, \phi) = \bar P_n^{|m|}(\cos\theta)
  e^{im\phi}` (SciPy's ``sph_harm_y`` convention: ``theta`` the polar angle, ``phi`` the
  azimuth; :math:`Y_n^{-m} = (-1)^m \overline{Y_n^m}`), with the normalized associated
  Legendre functions by their three-term recurrence in the degree.

  Args:
    n: 1-d integer array of degrees (``n >= 0``).
    m: integer array of orders (``|m| <= n``; beyond, the value is 0).
    theta: the polar angles in :math:`[0, \pi]` (a scalar, or one per entry of ``n``).
    phi: the azimuths in :math:`[0, 2\pi]`, broadcast against ``n``.
    diff_n: not supported (must be None).
    n_max: the largest degree, static; by default ``max(n)`` (so ``n`` must then be concrete).
      Degrees above it are clipped to it.

  Returns:
    The complex array :math:`Y_n^m(\theta, \phi)`, one entry per degree.
  """
  if diff_n is not None:
    raise NotImplementedError(
        "The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
  if jnp.isscalar(theta):
    theta = jnp.array([theta])
  if n_max is None:
    n_max = np.max(n)
  n_max = core.concrete_or_error(
      int, n_max, "The `n_max` argument of `jnp.scipy.special.sph_harm` must be statically "
      "specified to use `sph_harm` within JAX transformations.")
  x = jnp.cos(theta)
  n, m = jnp.asarray(n), jnp.asarray(m)
  if n.ndim == 0:
    raise TypeError("len() of unsized object")
  for idx in (m, n):
    if not dtypes.issubdtype(idx.dtype, np.integer) and idx.dtype != np.bool_:
      raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                      f"{idx.dtype}")
  am = jnp.abs(m)
  table = _normalized_legendre_diagonals(n_max, x)  # [n - |m|, |m|, point]
  mi = jnp.clip(am, 0, n_max)
  li = jnp.clip(n, 0, n_max)
  ki = jnp.clip(jnp.arange(n.shape[0]), 0, x.shape[0] - 1)
  val = jnp.where(li >= mi, table[jnp.clip(li - mi, 0, n_max), mi, ki], jnp.zeros((), x.dtype))
  angle = am * phi
  cos, sin = jnp.cos(angle), jnp.sin(angle)
  out = lax.complex(val * cos, val * sin)
  sign = jnp.asarray((-1.0) ** am, dtypes.default_float_dtype())  # (strong, as JAX's)
  return jnp.where(m < 0, sign * jnp.conjugate(out), out)
