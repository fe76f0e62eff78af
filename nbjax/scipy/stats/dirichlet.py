"""The Dirichlet distribution (``jax.scipy.stats.dirichlet``)."""
import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.numpy._util import promote_dtypes_inexact
from nbjax.scipy import special


def logpdf(x, alpha):
  """Log density of ``x`` (components along axis 0; ``K`` or ``K - 1`` of them, the last
  then ``1 - sum``) under concentrations ``alpha`` (shape ``(K,)``); -inf off the simplex."""
  x, alpha = promote_dtypes_inexact(jnp.asarray(x), jnp.asarray(alpha))
  if alpha.ndim != 1:
    raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
  if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
    raise ValueError("`x` must have either the same number of entries as `alpha` or one entry "
                     f"fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
  if x.shape[0] != alpha.shape[0]:
    x = jnp.concatenate([x, lax.sub(1, x.sum(0, keepdims=True))], axis=0)
  norm = jnp.sum(special.gammaln(alpha)) - special.gammaln(jnp.sum(alpha))
  if x.ndim > 1:
    alpha = lax.broadcast_in_dim(alpha, alpha.shape + (1,) * (x.ndim - 1), (0,))
  lp = jnp.sum(special.xlogy(alpha - 1, x), axis=0) - norm
  simplex = jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)
  return jnp.where(simplex, lp, np.array(-np.inf, lp.dtype))


def pdf(x, alpha):
  """The density."""
  return lax.exp(logpdf(x, alpha))
