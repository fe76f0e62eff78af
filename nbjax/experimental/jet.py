r"""Taylor-mode higher-order automatic differentiation (``jax.experimental.jet``).

``jet`` propagates a truncated Taylor polynomial through a function: given the primal
:math:`h_0` and the coefficients :math:`(h_1, \dots, h_K)` of a curve through it, it returns
those of :math:`f` along that curve, without nesting first-order derivatives. Each
primitive's propagation rule is its ``jet`` rule (``nbjax/lax/*.py``, helpers in
``nbjax.interpreters.jet``); a primitive without one raises ``KeyError`` naming it.
"""
from __future__ import annotations

from functools import partial

from nbjax import lax
from nbjax.interpreters.jet import (JetTrace, JetTracer, ZeroSeries, ZeroTerm,  # noqa: F401
                                    jet_fun, jet_rules, zero_series, zero_term)
from nbjax.lax.elementwise import _logistic_taylor  # noqa: F401  (JAX's name, tested there)
from nbjax.tree_util import (register_pytree_node, tree_flatten, tree_structure,
                             tree_unflatten, treedef_is_leaf)

__all__ = ["jet", "jet2", "fact", "zero_series", "zero_term", "jet_rules"]

register_pytree_node(ZeroTerm, lambda z: ((), None), lambda _, xs: zero_term)
register_pytree_node(ZeroSeries, lambda z: ((), None), lambda _, xs: zero_series)


def fact(n):
  """``n!`` as an array (``exp(lgamma(n + 1))``)."""
  return lax.exp(lax.lgamma(n + 1.))


def jet(fun, primals, series, factorial_scaled=True, **_):
  r"""Taylor-mode higher-order automatic differentiation.

  Args:
    fun: Function to be differentiated. Its arguments should be arrays or scalars; it may
      return an array, scalar, or standard Python container of them.
    primals: The primal values at which the Taylor approximation of ``fun`` is evaluated,
      a tuple or list with one entry per positional parameter of ``fun``.
    series: Higher-order Taylor coefficients, a tuple or list (one per primal) of tuples or
      lists, all of the same length, which is the degree of the truncated polynomial.
    factorial_scaled: If True (default), the n-th term of the input and output series is
      the n-th derivative along the curve (the Taylor coefficient times n!); if False, the
      plain Taylor coefficients.

  Returns:
    A ``(primals_out, series_out)`` pair: ``primals_out`` is ``fun(*primals)`` and
    ``series_out`` the output's coefficients, each with ``fun``'s output structure.

  For example, :math:`\sin(z^3)` at :math:`z = 0.5` by Faa di Bruno's formula:

  >>> import nbjax.numpy as jnp
  >>> h0, h1, h2 = 0.5**3., 3.*0.5**2., 6.*0.5
  >>> f0, (f1, f2) = jet(jnp.sin, (h0,), ((h1, h2),))
  >>> print(f0, jnp.sin(h0))
  0.12467473338522769 0.12467473338522769
  >>> print(f1, jnp.cos(h0) * h1)
  0.7441482504219967 0.7441482504219967
  >>> print(f2, -jnp.sin(h0) * h1 ** 2 + jnp.cos(h0) * h2)
  2.9064634641587963 2.9064634641587963
  """
  try:
    order, = set(map(len, series))
  except ValueError:
    raise ValueError("jet terms have inconsistent lengths for different arguments") from None
  for i, (x, terms) in enumerate(zip(primals, series)):
    if not treedef_is_leaf(tree_structure(x)):
      raise ValueError(f"primal value at position {i} is not an array")
    for j, t in enumerate(terms):
      if not treedef_is_leaf(tree_structure(t)):
        raise ValueError(f"term {j} for argument {i} is not an array")
  out_tree = []

  def flat_fun(*args):
    leaves, tree = tree_flatten(fun(*args))
    out_tree.append(tree)
    return leaves

  if factorial_scaled:
    series = [[t / fact(k + 1) for k, t in enumerate(terms)] for terms in series]
  primals_out, series_out = jet_fun(flat_fun, primals, series, order)
  if factorial_scaled:
    series_out = [[t * fact(k + 1) for k, t in enumerate(terms)] for terms in series_out]
  tree, = out_tree
  return tree_unflatten(tree, primals_out), tree_unflatten(tree, series_out)


jet2 = partial(jet, factorial_scaled=False)
