"""``nbjax.scipy.interpolate``: JAX's ``jax.scipy.interpolate`` (``RegularGridInterpolator``).

Pipeline position: a library layer over ``nbjax.numpy``: each query point's cell is found
with ``jnp.searchsorted`` along every grid axis, then the cell's corner values are gathered
and weighted (``"linear"``) or the nearest corner taken (``"nearest"``). The interpolator is
a pytree (grid, values and fill value its leaves), so it can be passed through ``jit`` and
``vmap``, and it is differentiable in its values and the query points.
"""
from __future__ import annotations

import itertools

import numpy as np

from nbjax import numpy as jnp
from nbjax.numpy import _util
from nbjax.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


def _points_array(xi, ndim):
  """Query points as one ``(..., ndim)`` array: a tuple of per-axis coordinate arrays
  (broadcast together) is stacked on a new last axis (as the default float); a 1-D array
  is read as points of ``ndim`` coordinates."""
  if isinstance(xi, tuple) and len(xi) == 1:
    xi = xi[0]
  if isinstance(xi, tuple):
    parts = _util.broadcast_arrays(*xi)
    if any(p.shape != parts[0].shape for p in parts[1:]):
      raise ValueError("coordinate arrays do not have the same shape")
    return jnp.stack([p.astype(float) for p in parts], axis=-1)
  _util.check_arraylike("_ndim_coords_from_arrays", xi)
  xi = jnp.asarray(xi)
  return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


class RegularGridInterpolator:
  """Interpolation on a rectilinear grid in any number of dimensions.

  JAX implementation of :class:`scipy.interpolate.RegularGridInterpolator`.

  Args:
    points: a sequence of N strictly increasing 1-D arrays, the grid's coordinates along
      each of its axes (a decreasing axis silently gives wrong results, as in JAX).
    values: the values at the grid points: an array whose first N axes match ``points``
      (further axes are carried along).
    method: ``"linear"`` (default) or ``"nearest"``.
    bounds_error: must be False (raising on out-of-range points is not supported).
    fill_value: the value at points outside the grid (default NaN); ``None`` extrapolates.

  Returns:
    An interpolator: call it with points ``xi`` (an ``(..., N)`` array or a tuple of N
    coordinate arrays) and optionally ``method`` to get the values at them.
  """

  def __init__(self, points, values, method="linear", bounds_error=False, fill_value=np.nan):
    if method not in _METHODS:
      raise ValueError(f"method {method!r} is not defined")
    self.method = method
    self.bounds_error = bounds_error
    if bounds_error:
      raise NotImplementedError("`bounds_error` takes no effect under JIT")
    _util.check_arraylike("RegularGridInterpolator", values)
    if len(points) > values.ndim:
      raise ValueError(f"there are {len(points)} point arrays, but values has {values.ndim} "
                       "dimensions")
    values, = _util.promote_dtypes_inexact(values)
    if fill_value is not None:
      _util.check_arraylike("RegularGridInterpolator", fill_value)
      fill_value = jnp.asarray(fill_value)
      if not np.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
        raise ValueError("fill_value must be either 'None' or of a type compatible with "
                         "values")
    self.fill_value = fill_value
    _util.check_arraylike("RegularGridInterpolator", *points)
    self.grid = tuple(jnp.asarray(p) for p in points)
    self.values = values

  def __call__(self, xi, method=None):
    method = self.method if method is None else method
    if method not in _METHODS:
      raise ValueError(f"method {method!r} is not defined")
    ndim = len(self.grid)
    xi = _points_array(xi, ndim)
    if xi.shape[-1] != ndim:
      raise ValueError(f"the requested sample points xi have dimension {xi.shape[1]}, but "
                       f"this RegularGridInterpolator has dimension {ndim}")
    lead = xi.shape[:-1]
    cols = xi.reshape(-1, ndim).T
    # per axis: the cell (its lower grid index, clamped to a valid cell), the position in
    # it as a fraction of its width, and whether the point lies outside the grid
    lower, frac = [], []
    outside = jnp.zeros((cols.shape[1],), dtype=bool)
    for c, g in zip(cols, self.grid):
      i = jnp.clip(jnp.searchsorted(g, c) - 1, 0, g.size - 2)
      lower.append(i)
      frac.append((c - g[i]) / (g[i + 1] - g[i]))
      outside = outside | (c < g[0]) | (c > g[-1])
    if method == "linear":
      trailing = (slice(None),) + (None,) * (self.values.ndim - ndim)
      out = jnp.asarray(0.0)
      for upper in itertools.product((False, True), repeat=ndim):
        weight = jnp.asarray(1.0)
        for u, t in zip(upper, frac):
          weight = weight * (t if u else 1 - t)
        corner = tuple(i + 1 if u else i for u, i in zip(upper, lower))
        out = out + self.values[corner] * weight[trailing]
    else:
      out = self.values[tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(lower, frac))]
    if self.fill_value is not None:
      out = jnp.where(outside.reshape(out.shape[:1] + (1,) * (out.ndim - 1)),
                      self.fill_value, out)
    return out.reshape(lead + self.values.shape[ndim:])


def _unflatten(aux, children):
  # the leaves were checked when the interpolator was built (and may now be tracers, or the
  # placeholders transformations unflatten with), so they are not checked again
  r = object.__new__(RegularGridInterpolator)
  r.method, r.bounds_error = aux
  r.grid, r.values, r.fill_value = children
  return r


register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    _unflatten,
)
