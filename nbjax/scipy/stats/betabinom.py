"""The beta-binomial distribution (``jax.scipy.stats.betabinom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, n, a, b, loc=0):
  """Log probability of ``k``, as JAX's: ``k`` is floored (no integrality test), -inf for
  ``floor(k) < 0``, ``floor(k) - loc > n`` or ``floor(k) - loc + a <= 0``, NaN unless
  ``n >= 0`` and ``a, b > 0``."""
  k, n, a, b, loc = args("betabinom.logpmf", k, n, a, b, loc)
  y = lax.sub(lax.floor(k), loc)
  one = c(y, 1)
  comb = -(lax.log1p(n) + special.betaln(n - y + one, y + one))
  lp = comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
  lp = jnp.where((y == 0) & (n == 0), 0., lp)
  lp = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, lp)
  return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, lp)


def pmf(k, n, a, b, loc=0):
  """Probability of ``k``."""
  return lax.exp(logpmf(k, n, a, b, loc))
