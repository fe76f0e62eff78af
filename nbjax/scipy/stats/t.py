"""Student's t distribution (``jax.scipy.stats.t``)."""
import numpy as np

from nbjax import lax
from nbjax.scipy.stats._util import args, c


def logpdf(x, df, loc=0, scale=1):
  """Log density, JAX's formula: ``-(lgamma(df/2) + log(pi scale^2 df) / 2 -
  lgamma((df+1)/2)) - (df+1)/2 log1p(y^2 / df)`` (a negative scale acts as ``|scale|``)."""
  x, df, loc, scale = args("t.logpdf", x, df, loc, scale)
  two = c(x, 2)
  y = lax.div(lax.sub(x, loc), scale)
  half_df = lax.div(df, two)
  half_df1 = lax.add(half_df, c(x, 0.5))
  norm = lax.div(lax.log(lax.mul(lax.mul(lax.mul(scale, scale), c(x, np.pi)), df)), two)
  norm = lax.sub(lax.add(lax.lgamma(half_df), norm), lax.lgamma(half_df1))
  return lax.neg(lax.add(norm, lax.mul(half_df1, lax.log1p(lax.div(lax.mul(y, y), df)))))


def pdf(x, df, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, df, loc, scale))
