"""The wrapped Cauchy distribution (``jax.scipy.stats.wrapcauchy``: shape ``0 < c < 1``,
support ``[0, 2 pi]``)."""
import math

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.scipy.stats._util import args
from nbjax.scipy.stats._util import c as const


def logpdf(x, c):
  """Log density ``log((1 - c^2) / (2 pi (1 + c^2 - 2 c cos x)))`` (-inf off the support,
  NaN for ``c`` outside (0, 1))."""
  x, c = args("wrapcauchy.logpdf", x, c)
  one = const(x, 1)
  lp = (lax.log1p(-c * c) - const(x, math.log(2 * math.pi))
        - lax.log(one + c * c - const(x, 2) * c * lax.cos(x)))
  lp = jnp.where((x >= 0) & (x <= const(x, 2 * math.pi)), lp, const(x, -np.inf))
  return jnp.where((c > 0) & (c < one), lp, const(x, np.nan))


def pdf(x, c):
  """The density."""
  return lax.exp(logpdf(x, c))
