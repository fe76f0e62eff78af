"""The normal distribution (``jax.scipy.stats.norm``)."""
import math

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, loc=0, scale=1):
  """Log of the normal density, ``-(log(2 pi scale^2) + ((x - loc) / scale)^2) / 2`` (through
  ``scale^2``, as JAX's: a negative ``scale`` acts as ``|scale|``)."""
  x, loc, scale = args("norm.logpdf", x, loc, scale)
  s2 = lax.mul(scale, scale)
  d = lax.sub(x, loc)
  return lax.div(lax.add(lax.log(lax.mul(c(x, 2 * math.pi), s2)), lax.div(lax.mul(d, d), s2)),
                 c(x, -2))


def pdf(x, loc=0, scale=1):
  """The normal density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The normal CDF."""
  x, loc, scale = args("norm.cdf", x, loc, scale)
  return special.ndtr(lax.div(lax.sub(x, loc), scale))


def logcdf(x, loc=0, scale=1):
  """Log of the normal CDF (accurate in the lower tail)."""
  x, loc, scale = args("norm.logcdf", x, loc, scale)
  return special.log_ndtr(lax.div(lax.sub(x, loc), scale))


def sf(x, loc=0, scale=1):
  """The normal survival function ``1 - cdf``."""
  x, loc, scale = args("norm.sf", x, loc, scale)
  return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
  """Log of the survival function."""
  x, loc, scale = args("norm.logsf", x, loc, scale)
  return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
  """The normal quantile function."""
  # JAX's: ndtri checks q's dtype (float32/float64), the result is the default float type
  return jnp.asarray(special.ndtri(q) * scale + loc, float)


def isf(q, loc=0, scale=1):
  """The inverse survival function ``ppf(1 - q)`` (JAX's: so it rounds as JAX's for tiny
  ``q``; ``1 - q`` in ``q``'s own dtype)."""
  q = jnp.asarray(q)
  if q.dtype == np.bool_:
    raise TypeError("sub does not accept dtype bool at position 0. Accepted dtypes at "
                    "position 0 are subtypes of integer, floating, complexfloating.")
  return ppf(lax.sub(c(q, 1), q), loc, scale)
