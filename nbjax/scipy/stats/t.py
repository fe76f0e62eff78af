"""Student's t distribution (``jax.scipy.stats.t``)."""
import numpy as np

from nbjax import lax
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, df, loc=0, scale=1):
  """Log density."""
  x, df, loc, scale = args("t.logpdf", x, df, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  half = c(x, 0.5)
  return (special.gammaln(half * (df + 1)) - special.gammaln(half * df)
          - half * lax.log(df * c(x, np.pi)) - lax.log(scale)
          - half * (df + 1) * lax.log1p(y * y / df))


def pdf(x, df, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, df, loc, scale))
