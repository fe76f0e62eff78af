"""The Cauchy distribution (``jax.scipy.stats.cauchy``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def logpdf(x, loc=0, scale=1):
  """Log density ``-log(pi scale) - log1p(y^2)``."""
  x, loc, scale = args("cauchy.logpdf", x, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  return lax.neg(lax.add(lax.log(lax.mul(c(x, np.pi), scale)), lax.log1p(lax.mul(y, y))))


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF ``1/2 + atan(y) / pi``."""
  x, loc, scale = args("cauchy.cdf", x, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  return lax.add(c(x, 0.5), lax.mul(lax.div(c(x, 1), c(x, np.pi)), lax.atan(y)))


def logcdf(x, loc=0, scale=1):
  """Log of the CDF."""
  return lax.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
  """The survival function."""
  x, loc, scale = args("cauchy.sf", x, loc, scale)
  return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
  """Log of the survival function."""
  x, loc, scale = args("cauchy.logsf", x, loc, scale)
  return logcdf(-x, -loc, scale)


def _tan(q, sign):
  """``sign * tan(pi (q - 1/2))``: JAX's ``tan(sign * (pi q - pi/2))`` outside ``(0, 1)`` (finite
  at 0 and 1, periodic beyond, NaN at NaN); inside, the same up to rounding but accurate at
  both ends: ``-cot(pi q)`` below 1/4, ``cot(pi (1 - q))`` above 3/4 (exact differences)."""
  pi, half, one = c(q, np.pi), c(q, 0.5), c(q, 1)
  edge = lax.tan(lax.mul(c(q, sign), lax.sub(lax.mul(pi, q), c(q, np.pi / 2))))
  lo, hi = q < 0.25, q > 0.75
  t = lax.tan(pi * jnp.where(lo, q, jnp.where(hi, one - q, q - half)))
  inner = jnp.where(lo, -one / t, jnp.where(hi, one / t, t))
  return jnp.where((q > 0) & (q < 1), c(q, sign) * inner, edge)


def ppf(q, loc=0, scale=1):
  """The quantile function ``loc + scale tan(pi (q - 1/2))``."""
  q, loc, scale = args("cauchy.ppf", q, loc, scale)
  return lax.add(lax.mul(_tan(q, 1), scale), loc)


def isf(q, loc=0, scale=1):
  """The inverse survival function ``loc + scale tan(pi (1/2 - q))``."""
  q, loc, scale = args("cauchy.isf", q, loc, scale)
  return lax.add(lax.mul(_tan(q, -1), scale), loc)
