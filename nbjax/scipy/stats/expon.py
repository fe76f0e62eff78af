"""The exponential distribution (``jax.scipy.stats.expon``). As JAX's, the support test is
``x < loc`` (whatever the sign of ``scale``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args


def _neg_y(name, x, loc, scale):
  x, loc, scale = args(name, x, loc, scale)
  return x < loc, lax.div(lax.sub(loc, x), scale), scale


def logpdf(x, loc=0, scale=1):
  """Log density ``-y - log(scale)`` (-inf below ``loc``)."""
  below, ny, scale = _neg_y("expon.logpdf", x, loc, scale)
  return jnp.where(below, -np.inf, lax.sub(ny, lax.log(scale)))


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF ``1 - exp(-y)`` (0 below ``loc``)."""
  below, ny, _ = _neg_y("expon.cdf", x, loc, scale)
  return jnp.where(below, jnp.zeros_like(ny), lax.neg(lax.expm1(ny)))


def logsf(x, loc=0, scale=1):
  """Log of the survival function, ``-y`` (0 below ``loc``)."""
  below, ny, _ = _neg_y("expon.logsf", x, loc, scale)
  return jnp.where(below, jnp.zeros_like(ny), ny)


def sf(x, loc=0, scale=1):
  """The survival function ``exp(-y)``."""
  return lax.exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
  """Log of the CDF, ``log1p(-sf)`` (JAX's formula)."""
  return lax.log1p(lax.neg(sf(x, loc, scale)))


def ppf(q, loc=0, scale=1):
  """The quantile function ``loc - scale log(1 - q)`` (NaN outside [0, 1])."""
  q, loc, scale = args("expon.ppf", q, loc, scale)
  v = lax.sub(loc, lax.mul(scale, lax.log1p(lax.neg(q))))
  return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, v)
