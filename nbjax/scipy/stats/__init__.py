"""``nbjax.scipy.stats``: SciPy's distributions as JAX defines them (``jax.scipy.stats``):
one module per distribution with ``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/
``ppf`` (``logpmf``/``pmf`` for discrete ones) where JAX has them, JAX's signatures and
``loc``/``scale`` defaults; the sample statistics ``mode``, ``rankdata``, ``sem`` and the
``gaussian_kde`` class.

Pipeline position: compositions of ``nbjax.numpy`` and ``nbjax.scipy.special``.
"""
from nbjax.scipy.stats import (bernoulli, beta, betabinom, binom, cauchy, chi2,  # noqa: F401
                               dirichlet, expon, gamma, gennorm, geom, gumbel_l, gumbel_r,
                               laplace, logistic, multinomial, multivariate_normal, nbinom, norm,
                               pareto, poisson, t, truncnorm, uniform, vonmises, wrapcauchy)
from nbjax.scipy.stats._core import mode, rankdata, sem  # noqa: F401
from nbjax.scipy.stats._kde import gaussian_kde  # noqa: F401
