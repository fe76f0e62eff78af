"""The Bernoulli distribution (``jax.scipy.stats.bernoulli``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, p, loc=0):
  """Log probability of ``k`` (-inf outside [0, 1])."""
  k, p, loc = args("bernoulli.logpmf", k, p, loc)
  x = lax.sub(k, loc)
  lp = special.xlogy(x, p) + special.xlog1py(c(x, 1) - x, -p)
  return jnp.where((x < 0) | (x > 1), c(x, -np.inf), lp)  # (JAX's: no integrality test)


def pmf(k, p, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, p, loc))


def cdf(k, p):
  """The CDF: 0 below 0, ``1 - p`` on [0, 1), 1 from 1 (NaN for ``p`` outside [0, 1])."""
  k, p = args("bernoulli.cdf", k, p)
  bad = jnp.isnan(k) | jnp.isnan(p) | (p < 0) | (p > 1)
  out = jnp.where(k < 0, c(k, 0), jnp.where(k < 1, c(k, 1) - p, c(k, 1)))
  return jnp.where(bad, c(k, np.nan), out)


def ppf(q, p):
  """The quantile function: 0 where ``q <= 1 - p``, else 1 (NaN outside the domain)."""
  q, p = args("bernoulli.ppf", q, p)
  bad = jnp.isnan(q) | jnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
  return jnp.where(bad, c(q, np.nan), jnp.where(q <= c(q, 1) - p, c(q, 0), c(q, 1)))
