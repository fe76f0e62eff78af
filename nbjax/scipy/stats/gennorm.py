"""The generalized normal distribution (``jax.scipy.stats.gennorm``: shape ``beta``, no
``loc``/``scale``)."""
from nbjax import lax
from nbjax.scipy import special
from nbjax.scipy.stats._util import args, c


def logpdf(x, beta):
  """Log density ``log(beta / 2) - gammaln(1 / beta) - |x|**beta``."""
  x, beta = args("gennorm.logpdf", x, beta)
  return lax.log(c(x, 0.5) * beta) - special.gammaln(c(x, 1) / beta) - lax.abs(x) ** beta


def pdf(x, beta):
  """The density."""
  return lax.exp(logpdf(x, beta))


def cdf(x, beta):
  """The CDF ``(1 + sign(x) P(1 / beta, |x|**beta)) / 2``."""
  x, beta = args("gennorm.cdf", x, beta)
  return c(x, 0.5) * (c(x, 1) + lax.sign(x) * special.gammainc(c(x, 1) / beta,
                                                               lax.abs(x) ** beta))
