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


def ppf(q, loc=0, scale=1):
  """The quantile function ``loc + scale tan(pi q - pi/2)``, JAX's formula (its rounding
  near 0 and 1 included; finite at 0 and 1, periodic outside [0, 1])."""
  q, loc, scale = args("cauchy.ppf", q, loc, scale)
  t = lax.tan(lax.sub(lax.mul(c(q, np.pi), q), c(q, np.pi / 2)))
  return lax.add(lax.mul(t, scale), loc)


def isf(q, loc=0, scale=1):
  """The inverse survival function ``loc + scale tan(pi/2 - pi q)`` (JAX's formula)."""
  q, loc, scale = args("cauchy.isf", q, loc, scale)
  t = lax.tan(lax.sub(c(q, np.pi / 2), lax.mul(c(q, np.pi), q)))
  return lax.add(lax.mul(t, scale), loc)
