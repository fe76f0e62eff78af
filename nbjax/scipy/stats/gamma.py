"""The gamma distribution (``jax.scipy.stats.gamma``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, a, loc=0, scale=1):
  """Log density (-inf below ``loc``)."""
  x, a, loc, scale = args("gamma.logpdf", x, a, loc, scale)
  ok = x >= loc  # (JAX's: NaN x is outside, -inf)
  y = jnp.where(ok, lax.div(lax.sub(x, loc), scale), c(x, 1))
  lin = special.xlogy(a - c(x, 1), y) - y
  return jnp.where(ok, lin - special.gammaln(a) - lax.log(scale), c(x, -np.inf))


def pdf(x, a, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
  """The CDF ``P(a, (x - loc) / scale)``."""
  x, a, loc, scale = args("gamma.cdf", x, a, loc, scale)
  # (JAX's clamp: its gradient below the support is 0, where maximum's would be 0 * inf)
  return special.gammainc(a, lax.clamp(c(x, 0), lax.div(lax.sub(x, loc), scale), c(x, np.inf)))


def logcdf(x, a, loc=0, scale=1):
  """Log of the CDF."""
  return lax.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
  """The survival function ``Q(a, (x - loc) / scale)`` (1 below the support)."""
  x, a, loc, scale = args("gamma.sf", x, a, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  return jnp.where(y < 0, 1, special.gammaincc(a, y))


def logsf(x, a, loc=0, scale=1):
  """Log of the survival function."""
  return lax.log(sf(x, a, loc, scale))
