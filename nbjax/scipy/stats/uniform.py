"""The uniform distribution on [loc, loc + scale] (``jax.scipy.stats.uniform``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def logpdf(x, loc=0, scale=1):
  """Log density: ``-log(scale)`` inside, -inf outside."""
  x, loc, scale = args("uniform.logpdf", x, loc, scale)
  lp = lax.neg(lax.log(scale))
  return jnp.where((x < loc) | (x > loc + scale), c(x, -np.inf), jnp.broadcast_to(lp, jnp.shape(x + lp)))


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF."""
  x, loc, scale = args("uniform.cdf", x, loc, scale)
  # JAX's: a selection among strong 0, 1 and the ramp (0 where no case holds: NaN)
  hi = lax.add(loc, scale)
  return jnp.select([lax.lt(x, loc), lax.gt(x, hi), lax.ge(x, loc) & lax.le(x, hi)],
                    [np.array(0, x.dtype), np.array(1, x.dtype), lax.div(lax.sub(x, loc), scale)])


def ppf(q, loc=0, scale=1):
  """The quantile function (NaN outside [0, 1])."""
  q, loc, scale = args("uniform.ppf", q, loc, scale)
  return jnp.where((q < 0) | (q > 1) | jnp.isnan(q), c(q, np.nan), lax.add(loc, lax.mul(q, scale)))
