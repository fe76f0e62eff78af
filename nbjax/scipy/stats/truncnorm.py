"""The truncated normal distribution (``jax.scipy.stats.truncnorm``: standard bounds ``a < b``
in units of ``scale`` about ``loc``). Masses in log space, the tails mirrored to the left
(``log_ndtr`` is accurate there)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats import norm
from nbjax.scipy.stats._util import args, c, log1mexp


def _log_mass(a, b):
  """``log(ndtr(b) - ndtr(a))`` for ``a <= b``."""
  a, b = jnp.broadcast_arrays(a, b)
  right = a > 0
  lo, hi = jnp.where(right, -b, a), jnp.where(right, -a, b)  # mirrored into the left tail
  la, lb = special.log_ndtr(lo), special.log_ndtr(hi)
  # (both log-CDFs -inf, far out in the left tail: no mass, as JAX's log-sum-exp)
  tail = jnp.where(lb == -np.inf, lb, lb + log1mexp(jnp.minimum(la - lb, c(la, 0))))
  central = lax.log1p(-special.ndtr(a) - special.ndtr(-b))  # (mass near 1: no cancellation)
  return jnp.where((b > 0) & ~right, central, tail)


def logpdf(x, a, b, loc=0, scale=1):
  """Log density (-inf outside ``[a, b]``, NaN for ``a >= b``)."""
  x, a, b, loc, scale = args("truncnorm.logpdf", x, a, b, loc, scale)
  lp = norm.logpdf(x, loc, scale) - _log_mass(a, b)
  y = lax.div(lax.sub(x, loc), scale)
  lp = jnp.where((y < a) | (y > b), c(x, -np.inf), lp)
  return jnp.where(a >= b, c(x, np.nan), lp)


def pdf(x, a, b, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
  """Log of the CDF (from the upper mass where the CDF is near 1)."""
  x, a, b, loc, scale = args("truncnorm.logcdf", x, a, b, loc, scale)
  x, a, b = jnp.broadcast_arrays(x, a, b)
  y = lax.div(lax.sub(x, loc), scale)
  mass = _log_mass(a, b)
  lower = _log_mass(a, jnp.clip(y, a, b)) - mass
  upper = _log_mass(jnp.clip(y, a, b), b) - mass
  # (JAX's select: where no case holds, as at a NaN x, the log CDF is 0)
  out = jnp.select([y >= b, y <= a, lower > -0.1, y > a],
                   [c(x, 0), c(x, -np.inf), log1mexp(jnp.minimum(upper, c(x, 0))), lower], c(x, 0))
  return jnp.where(a >= b, c(x, np.nan), out)


def cdf(x, a, b, loc=0, scale=1):
  """The CDF."""
  return lax.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
  """Log of the survival function (the mirrored distribution's ``logcdf``)."""
  x, a, b, loc, scale = args("truncnorm.logsf", x, a, b, loc, scale)
  return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
  """The survival function."""
  return lax.exp(logsf(x, a, b, loc, scale))
