"""The truncated normal distribution (``jax.scipy.stats.truncnorm``: standard bounds ``a < b``
in units of ``scale`` about ``loc``). JAX's formulas: masses in log space, the tails mirrored
to the left (``log_ndtr`` is accurate there), so values and gradients (0 outside the support)
are JAX's."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy import special
from nbjax.scipy.stats import norm
from nbjax.scipy.stats._util import args, c


def _log_diff(x, y):
  """``log(exp(x) - exp(y))`` by a signed log-sum-exp (JAX's: -inf where both are -inf)."""
  return special.logsumexp(jnp.array([x, y]),
                           b=jnp.array([jnp.ones_like(x), -jnp.ones_like(y)]), axis=0)


def _log_mass(a, b):
  """``log(ndtr(b) - ndtr(a))`` for ``a <= b``, JAX's split: a tail (mirrored into the left
  one) as a difference of log-CDFs, the central case as ``log1p(-ndtr(a) - ndtr(-b))``."""
  a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
  right = a > 0
  central = ~((b <= 0) | right)
  lo, hi = jnp.where(right, -b, a), jnp.where(right, -a, b)
  tail = _log_diff(special.log_ndtr(hi), special.log_ndtr(lo))
  return jnp.where(central, jnp.log1p(-special.ndtr(a) - special.ndtr(-b)), tail)


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
  """Log of the CDF (from the upper mass where the CDF is near 1), JAX's select: 0 from ``b``
  on, -inf up to ``a``, NaN for ``a >= b``, and 0 where no case holds (a NaN ``x``)."""
  x, a, b, loc, scale = args("truncnorm.logcdf", x, a, b, loc, scale)
  x, a, b = jnp.broadcast_arrays(x, a, b)
  y = lax.div(lax.sub(x, loc), scale)
  mass = _log_mass(a, b)
  lower = _log_mass(a, y) - mass
  upper = _log_mass(y, b) - mass
  out = jnp.select([y >= b, y <= a, lower > -0.1, y > a],
                   [0, -np.inf, jnp.log1p(-jnp.exp(upper)), lower])
  return jnp.where(a >= b, np.nan, out)


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
