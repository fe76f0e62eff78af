"""Shared helpers of ``nbjax.scipy.stats`` (argument promotion, constants)."""
import numpy as np

from nbjax.numpy._util import promote_args_inexact


def args(name, *xs):
  """The arguments promoted to one inexact dtype and broadcast rank (JAX's rule)."""
  return promote_args_inexact(name, *xs)


def c(x, v):
  """``v`` as a 0-d constant of ``x``'s dtype."""
  return np.array(v, x.dtype)


def log1mexp(v):
  """``log(1 - exp(v))`` for ``v <= 0``, accurate at both ends (Maechler's split at -log 2)."""
  from nbjax import numpy as jnp
  return jnp.where(v > -0.6931471805599453, jnp.log(-jnp.expm1(v)), jnp.log1p(-jnp.exp(v)))
