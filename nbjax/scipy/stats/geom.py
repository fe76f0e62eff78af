"""The geometric distribution on 1, 2, ... (``jax.scipy.stats.geom``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, p, loc=0):
  """Log probability ``(k - 1) log(1 - p) + log p`` (-inf for ``k - loc <= 0``)."""
  k, p, loc = args("geom.logpmf", k, p, loc)
  x = lax.sub(k, loc)
  lp = special.xlog1py(x - c(x, 1), -p) + lax.log(p)
  return jnp.where(x <= 0, c(x, -np.inf), lp)


def pmf(k, p, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, p, loc))
