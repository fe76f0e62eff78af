"""``nbjax.scipy.integrate``: JAX's ``jax.scipy.integrate`` (``trapezoid``).

Pipeline position: a library layer: ``trapezoid`` is ``nbjax.numpy.trapezoid`` under SciPy's
name, so it runs eagerly, under ``jit``, ``vmap`` and differentiation.
"""
from __future__ import annotations

from nbjax.numpy import _numerics

__all__ = ["trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
  r"""Integrate samples along an axis by the composite trapezoidal rule.

  JAX implementation of :func:`scipy.integrate.trapezoid`: the sum over consecutive sample
  pairs of their mean times the spacing between them.

  Args:
    y: the sampled values.
    x: the sample positions along ``axis`` (optional); without them the samples are ``dx``
      apart.
    dx: the spacing of the samples when ``x`` is ``None`` (default 1.0).
    axis: the axis to integrate along (default: the last); static.

  Returns:
    The integral, of ``y``'s shape without ``axis``.

  See Also:
    :func:`nbjax.numpy.trapezoid`: the same rule under NumPy's name.
  """
  return _numerics.trapezoid(y, x, dx, axis)
