"""The negative binomial distribution (``jax.scipy.stats.nbinom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, n, p, loc=0):
  """Log probability of ``k`` failures before the ``n``-th success (-inf below 0)."""
  k, n, p, loc = args("nbinom.logpmf", k, n, p, loc)
  x = lax.sub(k, loc)
  comb = special.gammaln(n + x) - special.gammaln(x + c(x, 1)) - special.gammaln(n)
  lp = comb + special.xlogy(n, p) + special.xlog1py(x, -p)
  return jnp.where(x < 0, c(x, -np.inf), lp)


def pmf(k, n, p, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, n, p, loc))
