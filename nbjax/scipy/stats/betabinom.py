"""The beta-binomial distribution (``jax.scipy.stats.betabinom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, n, a, b, loc=0):
  """Log probability of ``k`` (-inf outside [0, n])."""
  k, n, a, b, loc = args("betabinom.logpmf", k, n, a, b, loc)
  x = lax.sub(k, loc)
  one = c(x, 1)
  comb = special.gammaln(n + one) - special.gammaln(x + one) - special.gammaln(n - x + one)
  lp = comb + special.betaln(x + a, n - x + b) - special.betaln(a, b)
  return jnp.where((x < 0) | (x > n), c(x, -np.inf), lp)


def pmf(k, n, a, b, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, n, a, b, loc))
