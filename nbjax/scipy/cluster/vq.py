"""``nbjax.scipy.cluster.vq``: JAX's ``jax.scipy.cluster.vq`` (``vq``).

Pipeline position: a library layer over ``nbjax.numpy``: the distances from every
observation to every code are one broadcast difference and ``jnp.linalg.norm``, the codes
an ``argmin``, so it runs eagerly, under ``jit``, ``vmap`` and differentiation.
"""
from __future__ import annotations

from nbjax import numpy as jnp
from nbjax.numpy import _util

__all__ = ["vq"]


def vq(obs, code_book, check_finite=True):
  """Assign each observation the nearest code of a code book.

  JAX implementation of :func:`scipy.cluster.vq.vq` (nearest in Euclidean distance).

  Args:
    obs: the observations, an ``(M, N)`` array of ``M`` vectors, or an ``(M,)`` array of
      scalars.
    code_book: the codes, a ``(K, N)`` array (``(K,)`` for scalar observations).
    check_finite: unused (accepted for SciPy's signature).

  Returns:
    ``(code, dist)``: for each observation the index of its nearest code (int, shape
    ``(M,)``) and the distance to it (shape ``(M,)``).
  """
  del check_finite
  _util.check_arraylike("scipy.cluster.vq.vq", obs, code_book)
  obs, code_book = _util.promote_dtypes_inexact(obs, code_book)
  if obs.ndim != code_book.ndim:
    raise ValueError("Observation and code_book should have the same rank")
  if obs.ndim == 1:
    obs, code_book = obs[:, None], code_book[:, None]
  if obs.ndim != 2:
    raise ValueError("ndim different than 1 or 2 are not supported")
  if obs.shape[1] != code_book.shape[1]:  # (JAX's error: each observation less the codes)
    raise TypeError(f"sub got incompatible shapes for broadcasting: (1, {obs.shape[1]}), "
                    f"{code_book.shape}.")
  dist = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
  code = jnp.argmin(dist, axis=-1)
  return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
