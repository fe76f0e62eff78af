"""The multivariate normal distribution (``jax.scipy.stats.multivariate_normal``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.numpy._util import promote_dtypes_inexact


def logpdf(x, mean, cov, allow_singular=None):
  """Log density of the multivariate normal (``log(2 pi)`` weakly typed, as JAX's); ``cov`` a scalar, a vector (broadcast against
  ``x``'s trailing axis) or a matrix (batched), through its Cholesky factor."""
  if allow_singular is not None:
    raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
  x, mean, cov = promote_dtypes_inexact(jnp.asarray(x), jnp.asarray(mean), jnp.asarray(cov))
  if not mean.shape:
    return (-1 / 2 * jnp.square(x - mean) / cov - 1 / 2 * (jnp.log(2 * np.pi) + jnp.log(cov)))
  n = mean.shape[-1]
  if not np.shape(cov):
    y = x - mean
    return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) / cov
            - n / 2 * (jnp.log(2 * np.pi) + jnp.log(cov)))
  if cov.ndim < 2 or cov.shape[-2:] != (n, n):
    raise ValueError("multivariate_normal.logpdf got incompatible shapes")
  L = jnp.linalg.cholesky(cov)
  y = jnp.vectorize(lambda l, v: lax.linalg.triangular_solve(l, v, lower=True, transpose_a=True),
                    signature="(n,n),(n)->(n)")(L, x - mean)
  return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) - n / 2 * jnp.log(2 * np.pi)
          - jnp.log(jnp.diagonal(L, axis1=-1, axis2=-2)).sum(-1))


def pdf(x, mean, cov):
  """Density of the multivariate normal."""
  return lax.exp(logpdf(x, mean, cov))
