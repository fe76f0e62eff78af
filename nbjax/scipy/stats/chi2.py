"""The chi-squared distribution (``jax.scipy.stats.chi2``)."""
import math

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, df, loc=0, scale=1):
  """Log density (-inf below ``loc``; as JAX's, ``(df/2 - 1) log y`` is a plain product: NaN at
  ``y = 0`` for ``df = 2``)."""
  x, df, loc, scale = args("chi2.logpdf", x, df, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  k = df / c(x, 2)
  lp = (k - c(x, 1)) * lax.log(y) - y / c(x, 2) - special.gammaln(k) \
      - k * c(x, math.log(2)) - lax.log(scale)
  return jnp.where(x < loc, -np.inf, lp)


def pdf(x, df, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
  """The CDF ``P(df / 2, y / 2)``."""
  x, df, loc, scale = args("chi2.cdf", x, df, loc, scale)
  return special.gammainc(df / c(x, 2), _half_y(x, loc, scale))


def logcdf(x, df, loc=0, scale=1):
  """Log of the CDF."""
  return lax.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
  """The survival function ``Q(df / 2, y / 2)``."""
  x, df, loc, scale = args("chi2.sf", x, df, loc, scale)
  return special.gammaincc(df / c(x, 2), _half_y(x, loc, scale))


def _half_y(x, loc, scale):
  """``(x - loc) / (2 scale)`` clamped to ``[0, inf]`` (JAX's clamp: gradient 0 below the
  support)."""
  return lax.clamp(c(x, 0), lax.div(lax.sub(x, loc), lax.mul(scale, c(scale, 2))), c(x, np.inf))


def logsf(x, df, loc=0, scale=1):
  """Log of the survival function."""
  return lax.log(sf(x, df, loc, scale))
