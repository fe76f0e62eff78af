"""Shared helpers of ``nbjax.scipy.stats`` (argument promotion, the standardised variable)."""
import numpy as np

from nbjax import numpy as jnp
from nbjax.numpy._util import promote_args_inexact


def args(name, *xs):
  """The arguments promoted to one inexact dtype and broadcast rank (JAX's rule)."""
  return promote_args_inexact(name, *xs)


def c(x, v):
  return np.array(v, x.dtype)


def nan_like(x):
  return jnp.array(np.nan, x.dtype)
