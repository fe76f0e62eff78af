"""The Poisson distribution (``jax.scipy.stats.poisson``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpmf(k, mu, loc=0):
  """Log probability of ``k`` (-inf below ``loc`` or at a non-integral ``k``)."""
  k, mu, loc = args("poisson.logpmf", k, mu, loc)
  x = lax.sub(k, loc)
  lp = special.xlogy(x, mu) - special.gammaln(x + 1) - mu
  return jnp.where((x < 0) | (k != jnp.round(k)), c(x, -np.inf), lp)  # (JAX's: k integral)


def pmf(k, mu, loc=0):
  """Probability of ``k``."""
  return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
  """The CDF ``Q(floor(k) + 1, mu)`` (0 below 0)."""
  k, mu, loc = args("poisson.cdf", k, mu, loc)
  x = lax.sub(k, loc)
  p = special.gammaincc(jnp.floor(c(x, 1) + jnp.maximum(x, 0)), mu)
  return jnp.where(x < 0, c(x, 0), p)


def entropy(mu, loc=0):
  """The entropy (``loc`` only broadcasts): ``-sum p log p`` over ``k < 250`` (all the mass
  for ``mu < 100``), else the asymptotic series in ``1 / mu``."""
  mu, loc = args("poisson.entropy", mu, loc)
  k = lax.broadcast_in_dim(jnp.arange(250, dtype=mu.dtype), (250,) + mu.shape, (0,))
  small = jnp.sum(special.entr(pmf(k, jnp.where(mu < 100, mu, c(mu, 1)))), axis=0)
  r = 1 / jnp.maximum(mu, c(mu, 100))
  large = (c(mu, 0.5) * jnp.log(c(mu, 2 * np.pi * np.e) / r)
           - r * (c(mu, 1 / 12) + r * (c(mu, 1 / 24) + r * c(mu, 19 / 360))))
  out = jnp.where(mu == 0, c(mu, 0), jnp.where(mu < 100, small, large))
  return jnp.broadcast_to(out, jnp.broadcast_shapes(mu.shape, loc.shape))
