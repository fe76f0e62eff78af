"""The right-skewed Gumbel distribution (``jax.scipy.stats.gumbel_r``). As JAX's: NaN where
``scale <= 0``; ``ppf`` NaN outside the open interval ``(0, 1)``."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c, log1mexp


def _z(name, x, loc, scale):
  x, loc, scale = args(name, x, loc, scale)
  return lax.div(lax.sub(x, loc), scale), scale, scale > 0


def logpdf(x, loc=0, scale=1):
  """Log density ``-(z + exp(-z)) - log scale``."""
  z, scale, ok = _z("gumbel_r.logpdf", x, loc, scale)
  return jnp.where(ok, -(z + lax.exp(-z)) - lax.log(scale), np.nan)


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
  """Log of the CDF, ``-exp(-z)``."""
  z, _, ok = _z("gumbel_r.logcdf", x, loc, scale)
  return jnp.where(ok, -lax.exp(-z), np.nan)


def cdf(x, loc=0, scale=1):
  """The CDF ``exp(-exp(-z))``."""
  return lax.exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1):
  """The survival function ``1 - exp(-exp(-z))`` (JAX's formula)."""
  x, loc, scale = args("gumbel_r.sf", x, loc, scale)
  neg_z = lax.div(lax.sub(loc, x), scale)
  v = lax.sub(c(x, 1), lax.exp(lax.neg(lax.exp(neg_z))))
  return jnp.where(scale > 0, v, np.nan)


def logsf(x, loc=0, scale=1):
  """Log of the survival function."""
  return log1mexp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
  """The quantile function ``loc - scale log(-log p)`` (NaN unless ``0 < p < 1``)."""
  p, loc, scale = args("gumbel_r.ppf", p, loc, scale)
  v = lax.sub(loc, lax.mul(scale, lax.log(lax.neg(lax.log(p)))))
  return jnp.where((p > 0) & (p < 1), v, np.nan)
