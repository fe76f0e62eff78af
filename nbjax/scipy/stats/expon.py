"""The exponential distribution (``jax.scipy.stats.expon``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def _y(name, x, loc, scale):
  x, loc, scale = args(name, x, loc, scale)
  return x, lax.div(lax.sub(x, loc), scale), scale


def logpdf(x, loc=0, scale=1):
  """Log density ``-y - log(scale)`` (-inf below ``loc``)."""
  x, y, scale = _y("expon.logpdf", x, loc, scale)
  return jnp.where(y < 0, c(x, -np.inf), lax.neg(y) - lax.log(scale))


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF ``1 - exp(-y)``."""
  x, y, _ = _y("expon.cdf", x, loc, scale)
  return jnp.where(y < 0, c(x, 0), lax.neg(lax.expm1(lax.neg(y))))


def logcdf(x, loc=0, scale=1):
  """Log of the CDF."""
  x, y, _ = _y("expon.logcdf", x, loc, scale)
  return jnp.where(y < 0, c(x, -np.inf), jnp.log(-jnp.expm1(-y)))


def sf(x, loc=0, scale=1):
  """The survival function ``exp(-y)``."""
  x, y, _ = _y("expon.sf", x, loc, scale)
  return jnp.where(y < 0, c(x, 1), lax.exp(lax.neg(y)))


def logsf(x, loc=0, scale=1):
  """Log of the survival function, ``-y``."""
  x, y, _ = _y("expon.logsf", x, loc, scale)
  return jnp.where(y < 0, c(x, 0), lax.neg(y))


def ppf(q, loc=0, scale=1):
  """The quantile function ``loc - scale log(1 - q)`` (NaN outside [0, 1])."""
  q, loc, scale = args("expon.ppf", q, loc, scale)
  return jnp.where((q < 0) | (q > 1), c(q, np.nan), lax.add(loc, lax.mul(scale, lax.neg(lax.log1p(lax.neg(q))))))
