"""The Poisson distribution (``jax.scipy.stats.poisson``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.numpy import _util
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
  """The entropy (``loc`` only broadcasts), JAX's piecewise rule: ``-sum p log p`` over
  ``k < 35`` (``k < mu + 20``) below ``mu = 10``, over ``k < 250`` (``k < mu + 10 sqrt(mu) +
  20``) below 100, else ``log(2 pi e mu) / 2 - 1 / (12 mu)``; 0 at ``mu = 0``."""
  mu, loc = _util.ensure_arraylike("poisson.entropy", mu, loc)
  mu, loc = _util.promote_dtypes_inexact(mu, loc)
  shape = jnp.broadcast_shapes(mu.shape, loc.shape)
  m = jnp.ravel(mu)

  def summed(max_k, bound):
    k = jnp.arange(max_k, dtype=m.dtype)[:, None]
    p = jnp.where(k < jnp.ceil(bound).astype(k.dtype)[None, :], pmf(k, m, 0), 0.0)
    return jnp.sum(special.entr(p), axis=0)

  small = summed(35, m + 20)
  medium = summed(250, m + 10 * jnp.sqrt(m) + 20)
  large = 0.5 * jnp.log(2 * np.pi * np.e * m) - 1.0 / (12 * m)
  out = jnp.where(m == 0, jnp.zeros_like(m),
                  jnp.where(m < 10, small, jnp.where(m < 100, medium, large)))
  return jnp.broadcast_to(jnp.reshape(out, mu.shape), shape)