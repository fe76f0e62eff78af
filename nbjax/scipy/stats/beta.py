"""The beta distribution (``jax.scipy.stats.beta``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, a, b, loc=0, scale=1):
  """Log density (-inf outside [loc, loc + scale], NaN unless ``a, b, scale > 0``)."""
  x, a, b, loc, scale = args("beta.logpdf", x, a, b, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  lin = special.xlogy(a - 1, y) + special.xlog1py(b - 1, -y)
  lp = lin - special.betaln(a, b) - lax.log(scale)
  lp = jnp.where((x < loc) | (x > loc + scale), -np.inf, lp)
  return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, lp)


def pdf(x, a, b, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
  """The CDF ``I_y(a, b)``, ``y = (x - loc) / scale`` clipped to [0, 1]."""
  x, a, b, loc, scale = args("beta.cdf", x, a, b, loc, scale)
  return special.betainc(a, b, jnp.clip(lax.div(lax.sub(x, loc), scale), 0, 1))


def logcdf(x, a, b, loc=0, scale=1):
  """Log of the CDF."""
  return lax.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
  """The survival function ``I_{1-y}(b, a)``."""
  x, a, b, loc, scale = args("beta.sf", x, a, b, loc, scale)
  return special.betainc(b, a, c(x, 1) - jnp.clip(lax.div(lax.sub(x, loc), scale), 0, 1))


def logsf(x, a, b, loc=0, scale=1):
  """Log of the survival function."""
  return lax.log(sf(x, a, b, loc, scale))
