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
from nbjax.numpy._util import promote_args_inexact

__all__ = ["logsumexp", "softmax", "log_softmax", "erf", "erfc", "erfinv", "expit", "logit",
           "gammaln", "loggamma", "gammasgn", "gamma", "digamma", "polygamma", "betaln", "beta",
           "betainc", "gammainc", "gammaincc", "xlogy", "xlog1py", "entr", "kl_div",
           "rel_entr", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e", "zeta",
           "multigammaln", "factorial", "sinc", "poch", "comb", "boxcox", "boxcox1p", "bernoulli",
           "erfcx", "exp1"]


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
  x, = _real("erfcx", x)
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


def loggamma(x):
  r"""The log of the gamma function for real ``x > 0`` (NaN elsewhere, as SciPy's real
  ``loggamma``)."""
  x, = _real("loggamma", x)
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
  r"""The gamma function :math:`\Gamma(x)` (real arguments)."""
  x, = _real("gamma", x)
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
    lc = jnp.where(c >= tiny, jnp.log(jnp.maximum(c, tiny)), _log_ndtr(xs, 3))
    ratio = jnp.exp(lc + 0.5 * xs * xs + _c(p, 0.5 * math.log(2 * math.pi)))  # ndtr / pdf
    xs = xs - (lc - lq) * ratio
  x = jnp.where(ok, xs, x)
  x = jnp.where(upper, -x, x)
  return jnp.where(q == 0, jnp.where(upper, _c(p, np.inf), _c(p, -np.inf)),
                   jnp.where((p < 0) | (p > 1) | jnp.isnan(p), _c(p, np.nan), x))


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
