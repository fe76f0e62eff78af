"""The logistic distribution (``jax.scipy.stats.logistic``)."""
from nbjax import lax
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, loc=0, scale=1):
  """Log density ``-|y| - 2 log1p(exp(-|y|)) - log(scale)`` (symmetric: -inf at +-inf)."""
  x, loc, scale = args("logistic.logpdf", x, loc, scale)
  y = lax.neg(lax.abs(lax.div(lax.sub(x, loc), scale)))
  return y - c(x, 2) * lax.log1p(lax.exp(y)) - lax.log(scale)


def pdf(x, loc=0, scale=1):
  """The density."""
  return lax.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
  """The CDF ``expit((x - loc) / scale)``."""
  x, loc, scale = args("logistic.cdf", x, loc, scale)
  return special.expit(lax.div(lax.sub(x, loc), scale))


def sf(x, loc=0, scale=1):
  """The survival function."""
  x, loc, scale = args("logistic.sf", x, loc, scale)
  return special.expit(lax.neg(lax.div(lax.sub(x, loc), scale)))


def ppf(x, loc=0, scale=1):
  """The quantile function ``loc + scale logit(q)``."""
  x, loc, scale = args("logistic.ppf", x, loc, scale)
  return lax.add(lax.mul(special.logit(x), scale), loc)


def isf(x, loc=0, scale=1):
  """The inverse survival function."""
  x, loc, scale = args("logistic.isf", x, loc, scale)
  return lax.add(lax.mul(lax.neg(special.logit(x)), scale), loc)
