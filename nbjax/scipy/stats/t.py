"""Student's t distribution (``jax.scipy.stats.t``)."""

from nbjax import lax
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, df, loc=0, scale=1):
  """Log density."""
  x, df, loc, scale = args("t.logpdf", x, df, loc, scale)
  y = lax.div(lax.sub(x, loc), scale)
  half = c(x, 0.5)  # (1 / B(1/2, df/2): no cancellation of two log-gammas at large df)
  # (log(scale^2) / 2, as JAX's: a negative scale acts as |scale|)
  return (-special.betaln(half, half * df) - half * lax.log(df) - half * lax.log(scale * scale)
          - half * (df + 1) * lax.log1p(y * y / df))


def pdf(x, df, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, df, loc, scale))
