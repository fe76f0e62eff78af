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
  return c(x, 0.5) + lax.atan(y) / c(x, np.pi)


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
  """The quantile function ``loc + scale tan(pi (q - 1/2))`` (NaN outside [0, 1])."""
  q, loc, scale = args("cauchy.ppf", q, loc, scale)
  return jnp.where((q < 0) | (q > 1), c(q, np.nan), lax.add(loc, lax.mul(scale, _tan(q))))


def _tan(q):
  # tan(pi (q - 1/2)) as -cot(pi q) below 1/2 and cot(pi (1 - q)) above: exact for tiny q
  lo = jnp.where(q == 0, c(q, -np.inf), -1 / lax.tan(c(q, np.pi) * q))
  hi = jnp.where(q == 1, c(q, np.inf), 1 / lax.tan(c(q, np.pi) * (c(q, 1) - q)))
  return jnp.where(q <= 0.5, lo, hi)


def isf(q, loc=0, scale=1):
  """The inverse survival function."""
  q, loc, scale = args("cauchy.isf", q, loc, scale)
  return jnp.where((q < 0) | (q > 1), c(q, np.nan), lax.sub(loc, lax.mul(scale, _tan(q))))
