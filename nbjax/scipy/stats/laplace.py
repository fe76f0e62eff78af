"""The Laplace distribution (``jax.scipy.stats.laplace``)."""

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def logpdf(x, loc=0, scale=1):
  """Log density ``-log(2 scale) - |x - loc| / scale``."""
  x, loc, scale = args("laplace.logpdf", x, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  return lax.neg(lax.add(lax.log(lax.mul(c(x, 2), scale)), lax.abs(y)))


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF."""
  x, loc, scale = args("laplace.cdf", x, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  half = c(x, 0.5)
  return jnp.where(y < 0, half * lax.exp(y), c(x, 1) - half * lax.exp(-y))
