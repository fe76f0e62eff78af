"""The von Mises distribution (``jax.scipy.stats.vonmises``: concentration ``kappa``)."""
import math

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args, c


def logpdf(x, kappa):
  """Log density ``kappa (cos x - 1) - log(2 pi i0e(kappa))`` (NaN for ``kappa <= 0``)."""
  x, kappa = args("vonmises.logpdf", x, kappa)
  lp = kappa * (lax.cos(x) - c(x, 1)) - lax.log(c(x, 2 * math.pi) * lax.bessel_i0e(kappa))
  return jnp.where(kappa > 0, lp, c(x, np.nan))


def pdf(x, kappa):
  """The density."""
  return lax.exp(logpdf(x, kappa))
