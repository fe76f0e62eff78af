"""The binomial distribution (``jax.scipy.stats.binom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, n, p, loc=0):
  """Log probability of ``k`` successes in ``n`` trials (-inf outside [0, n + 1))."""
  k, n, p, loc = args("binom.logpmf", k, n, p, loc)
  x = lax.sub(k, loc)
  one = c(x, 1)
  comb = special.gammaln(n + one) - special.gammaln(x + one) - special.gammaln(n - x + one)
  lin = special.xlogy(x, p) + special.xlog1py(n - x, -p)
  # JAX's: 0 where the linear term is (n == k == 0, p at 0 or 1); -inf outside
  # [loc, loc + n + 1) (NaN k too); no integrality test
  lp = jnp.where(((x == 0) & (n == 0)) | (lin == 0), c(x, 0), comb + lin)
  return jnp.where((k >= loc) & (k < loc + n + one), lp, c(x, -np.inf))


def pmf(k, n, p, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, n, p, loc))
