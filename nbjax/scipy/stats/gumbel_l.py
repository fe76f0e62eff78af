"""The left-skewed Gumbel distribution (``jax.scipy.stats.gumbel_l``). As JAX's: NaN where
``scale <= 0``; ``ppf`` NaN outside the open interval ``(0, 1)``."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args


def _z(name, x, loc, scale):
  x, loc, scale = args(name, x, loc, scale)
  return lax.div(lax.sub(x, loc), scale), scale, scale > 0


def logpdf(x, loc=0, scale=1):
  """Log density ``z - exp(z) - log scale``."""
  z, scale, ok = _z("gumbel_l.logpdf", x, loc, scale)
  return jnp.where(ok, z - lax.exp(z) - lax.log(scale), np.nan)


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
  """Log of the survival function, ``-exp(z)``."""
  z, _, ok = _z("gumbel_l.logsf", x, loc, scale)
  return jnp.where(ok, -lax.exp(z), np.nan)


def sf(x, loc=0, scale=1):
  """The survival function ``exp(-exp(z))``."""
  return lax.exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
  """Log of the CDF, ``log(-expm1(-exp(z)))`` (JAX's formula)."""
  z, _, ok = _z("gumbel_l.logcdf", x, loc, scale)
  return jnp.where(ok, lax.log(lax.neg(lax.expm1(lax.neg(lax.exp(z))))), np.nan)


def cdf(x, loc=0, scale=1):
  """The CDF ``1 - exp(-exp(z))``."""
  return lax.exp(logcdf(x, loc, scale))


def ppf(p, loc=0, scale=1):
  """The quantile function ``loc + scale log(-log(1 - p))`` (NaN unless ``0 < p < 1``)."""
  p, loc, scale = args("gumbel_l.ppf", p, loc, scale)
  v = lax.add(loc, lax.mul(scale, lax.log(lax.neg(lax.log1p(lax.neg(p))))))
  return jnp.where((p > 0) & (p < 1), v, np.nan)
