"""``nbjax.scipy.ndimage``: JAX's ``jax.scipy.ndimage`` (``map_coordinates``).

Pipeline position: a library layer over ``nbjax.numpy``: interpolation is gathers at the
integer neighbours of each coordinate (after the boundary mode maps them into range),
weighted and summed, so it runs eagerly, under ``jit``, ``vmap`` and differentiation (with
respect to the input and the coordinates).
"""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from nbjax import dtypes, lax
from nbjax import numpy as jnp

__all__ = ["map_coordinates"]


def _mirror(i, n):
  """Indices reflected about the end pixels' centres (period ``2 (n - 1)``)."""
  p = n - 1
  return jnp.abs((i + p) % (2 * p) - p)


def _reflect(i, n):
  """Indices reflected about the end pixels' outer edges (period ``2 n``)."""
  return jnp.floor_divide(_mirror(2 * i + 1, 2 * n + 1) - 1, 2)


_MODES = {
    "constant": lambda i, n: i,
    "nearest": lambda i, n: jnp.clip(i, 0, n - 1),
    "wrap": lambda i, n: i % n,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round(x):
  """Half away from zero; integers unchanged."""
  return x if dtypes.issubdtype(x.dtype, np.integer) else lax.round(x)


def _nodes(coord, order):
  """The integer neighbours of ``coord`` and their weights for interpolation ``order``."""
  if order == 0:
    return [(_round(coord).astype(np.int32), coord.dtype.type(1))]
  lo = jnp.floor(coord)
  frac = coord - lo
  i = lo.astype(np.int32)
  return [(i, 1 - frac), (i + 1, frac)]


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
  """Interpolate an array at arbitrary (fractional) coordinates.

  JAX implementation of :func:`scipy.ndimage.map_coordinates`.

  Args:
    input: the N-dimensional array to sample.
    coordinates: a length-N sequence of arrays (broadcast together), the positions along
      each axis at which to sample.
    order: the spline order: ``0`` (nearest neighbour) or ``1`` (linear).
    mode: how positions outside the array are treated: ``"constant"`` (default: they read
      ``cval``), ``"nearest"``, ``"mirror"``, ``"wrap"`` or ``"reflect"``. As in JAX,
      ``"constant"`` and ``"wrap"`` behave as SciPy's ``"grid-constant"`` and
      ``"grid-wrap"``.
    cval: the value outside the array for ``mode="constant"`` (default 0.0); static.

  Returns:
    The sampled values, of the coordinates' broadcast shape and ``input``'s dtype
    (rounded half away from zero for integer inputs).
  """
  for arg in (order, mode, cval):  # static arguments, as under JAX's jit
    try:
      hash(arg)
    except TypeError:
      t = type(arg)
      name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
      raise ValueError("Non-hashable static arguments are not supported. An error occurred "
                       f"while trying to hash an object of type {t}, {arg}. The error was:\n"
                       f"TypeError: unhashable type: '{name}'\n") from None
  src = jnp.asarray(input)
  coords = [jnp.asarray(c) for c in coordinates]
  cval = jnp.asarray(cval, src.dtype)
  if len(coordinates) != src.ndim:
    raise ValueError("coordinates must be a sequence of length input.ndim, but "
                     f"{len(coordinates)} != {src.ndim}")
  fix = _MODES.get(mode)
  if fix is None:
    raise NotImplementedError("jax.scipy.ndimage.map_coordinates does not yet support mode "
                              f"{mode}. Currently supported modes are {set(_MODES)}.")
  if order not in (0, 1):
    raise NotImplementedError("jax.scipy.ndimage.map_coordinates currently requires order<=1")
  per_axis = []
  for c, n in zip(coords, src.shape):
    per_axis.append([(fix(i, n), (0 <= i) & (i < n) if mode == "constant" else None, w)
                     for i, w in _nodes(c, order)])
  terms = []
  for corner in itertools.product(*per_axis):
    val = src[tuple(c[0] for c in corner)]
    if mode == "constant":
      val = jnp.where(functools.reduce(operator.and_, [c[1] for c in corner]), val, cval)
    terms.append(functools.reduce(operator.mul, [c[2] for c in corner]) * val)
  out = functools.reduce(operator.add, terms)
  if dtypes.issubdtype(src.dtype, np.integer):
    out = _round(out)
  return out.astype(src.dtype)
