"""``nbjax.scipy.stats``: SciPy's distributions as JAX defines them (``jax.scipy.stats``):
one module per distribution with ``logpdf``/``pdf``/``cdf``/``logcdf``/``sf``/``logsf``/
``ppf`` (``logpmf``/``pmf`` for discrete ones) where JAX has them, JAX's signatures and
``loc``/``scale`` defaults.

Pipeline position: compositions of ``nbjax.numpy`` and ``nbjax.scipy.special``.
"""
from nbjax.scipy.stats import (bernoulli, beta, cauchy, chi2, expon, gamma,  # noqa: F401
                               laplace, logistic, multivariate_normal, norm, poisson, t, uniform)
