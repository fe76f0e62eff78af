"""The Pareto distribution (``jax.scipy.stats.pareto``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, log1mexp, c


def _y(name, x, b, loc, scale):
  x, b, loc, scale = args(name, x, b, loc, scale)
  return x, b, lax.div(lax.sub(x, loc), scale), scale


def logpdf(x, b, loc=0, scale=1):
  """Log density ``log b - (b + 1) log y - log scale`` (-inf below ``y = 1``)."""
  x, b, y, scale = _y("pareto.logpdf", x, b, loc, scale)
  lp = lax.log(b) - (b + c(x, 1)) * lax.log(y) - lax.log(scale)
  return jnp.where(y < 1, c(x, -np.inf), lp)


def pdf(x, b, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, b, loc, scale))


def logsf(x, b, loc=0, scale=1):
  """Log survival function ``-b log y`` (0 below ``y = 1``)."""
  x, b, y, _ = _y("pareto.logsf", x, b, loc, scale)
  return jnp.where(y < 1, c(x, 0), -b * lax.log(y))


def sf(x, b, loc=0, scale=1):
  """The survival function ``y^-b``."""
  return lax.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
  """The CDF ``1 - y^-b``."""
  return -lax.expm1(logsf(x, b, loc, scale))


def logcdf(x, b, loc=0, scale=1):
  """Log of the CDF."""
  return log1mexp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
  """The quantile function ``loc + scale (1 - q)^(-1/b)`` (NaN outside [0, 1])."""
  q, b, loc, scale = args("pareto.ppf", q, b, loc, scale)
  v = loc + scale * lax.exp(-lax.log1p(-q) / b)
  return jnp.where((q < 0) | (q > 1), c(q, np.nan), v)
