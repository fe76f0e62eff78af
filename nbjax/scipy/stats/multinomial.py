"""The multinomial distribution (``jax.scipy.stats.multinomial``: counts ``x`` along the last
axis, integer ``x`` and ``n``)."""
import numpy as np

from nbjax import dtypes
from nbjax import numpy as jnp
from nbjax.numpy._util import promote_args_inexact, promote_args_numeric
from nbjax.scipy import special


def logpmf(x, n, p):
  """Log probability of the counts ``x`` of ``n`` trials with probabilities ``p`` (-inf
  unless ``sum(x) == n``)."""
  p, = promote_args_inexact("multinomial.logpmf", p)
  x, n = promote_args_numeric("multinomial.logpmf", x, n)
  if not dtypes.issubdtype(x.dtype, np.integer):
    raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, "
                     f"n.dtype={n.dtype}")
  x, n = x.astype(p.dtype), n.astype(p.dtype)
  lp = special.gammaln(n + 1) + jnp.sum(special.xlogy(x, p) - special.gammaln(x + 1), axis=-1)
  return jnp.where(jnp.sum(x) == n, lp, np.array(-np.inf, lp.dtype))


def pmf(x, n, p):
  """Probability of the counts ``x``."""
  return jnp.exp(logpmf(x, n, p))
