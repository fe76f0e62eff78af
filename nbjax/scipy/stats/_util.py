"""Shared helpers of ``nbjax.scipy.stats`` (argument promotion, constants)."""
import numpy as np

from nbjax import lax
from nbjax.numpy._util import promote_args_inexact


def args(name, *xs):
  """The arguments promoted to one inexact dtype and broadcast rank (JAX's rule)."""
  return promote_args_inexact(name, *xs)


def c(x, v):
  """``v`` as a constant of ``x``'s dtype (JAX's ``_const``: a weak Python scalar when ``x``
  is a weakly typed scalar, so results stay weak)."""
  return lax._const(x, v)


def log1mexp(v):
  """``log(1 - exp(v))`` for ``v <= 0``, accurate at both ends (Maechler's split at -log 2)."""
  from nbjax import numpy as jnp
  return jnp.where(v > -0.6931471805599453, jnp.log(-jnp.expm1(v)), jnp.log1p(-jnp.exp(v)))
