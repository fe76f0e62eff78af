"""The Pareto distribution (``jax.scipy.stats.pareto``). As JAX's, the support test is
``x < loc + scale`` (whatever the signs of ``b`` and ``scale``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def _y(name, x, b, loc, scale):
  x, b, loc, scale = args(name, x, b, loc, scale)
  return x < loc + scale, b, lax.div(lax.sub(x, loc), scale), scale


def logpdf(x, b, loc=0, scale=1):
  """Log density ``-log(scale / b) - (b + 1) log y`` (-inf below ``y = 1``)."""
  below, b, y, scale = _y("pareto.logpdf", x, b, loc, scale)
  lp = lax.neg(lax.add(lax.log(lax.div(scale, b)), lax.mul(b + c(b, 1), lax.log(y))))
  return jnp.where(below, -np.inf, lp)


def pdf(x, b, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
  """The CDF ``1 - y^-b`` (0 below ``y = 1``)."""
  below, b, y, _ = _y("pareto.cdf", x, b, loc, scale)
  return jnp.where(below, c(y, 0), c(y, 1) - lax.pow(y, lax.neg(b)))


def logcdf(x, b, loc=0, scale=1):
  """Log of the CDF, ``log1p(-y^-b)``."""
  below, b, y, _ = _y("pareto.logcdf", x, b, loc, scale)
  return jnp.where(below, -np.inf, lax.log1p(lax.neg(lax.pow(y, lax.neg(b)))))


def logsf(x, b, loc=0, scale=1):
  """Log survival function ``-b log y`` (0 below ``y = 1``)."""
  below, b, y, _ = _y("pareto.logsf", x, b, loc, scale)
  return jnp.where(below, c(y, 0), lax.neg(lax.mul(b, lax.log(y))))


def sf(x, b, loc=0, scale=1):
  """The survival function ``y^-b``."""
  return lax.exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
  """The quantile function ``loc + scale (1 - q)^(-1/b)`` (NaN outside [0, 1])."""
  q, b, loc, scale = args("pareto.ppf", q, b, loc, scale)
  one = c(q, 1)
  v = lax.add(loc, lax.mul(scale, lax.pow(lax.sub(one, q), lax.neg(lax.div(one, b)))))
  return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, v)
