"""The binomial distribution (``jax.scipy.stats.binom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, n, p, loc=0):
  """Log probability of ``k`` successes in ``n`` trials (-inf outside [0, n])."""
  k, n, p, loc = args("binom.logpmf", k, n, p, loc)
  x = lax.sub(k, loc)
  one = c(x, 1)
  comb = special.gammaln(n + one) - special.gammaln(x + one) - special.gammaln(n - x + one)
  lp = comb + special.xlogy(x, p) + special.xlog1py(n - x, -p)
  return jnp.where((x < 0) | (x > n), c(x, -np.inf), lp)


def pmf(k, n, p, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, n, p, loc))
