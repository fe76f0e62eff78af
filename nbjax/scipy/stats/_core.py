"""Sample statistics of ``jax.scipy.stats``: ``mode``, ``rankdata`` and ``sem``."""
import math
from typing import NamedTuple

import numpy as np

from nbjax import numpy as jnp
from nbjax.api import vmap
from nbjax.lax.shape import canonicalize_axis
from nbjax.numpy._util import check_arraylike, is_concrete, promote_args_inexact


class ModeResult(NamedTuple):
  mode: object
  count: object


def _nan_policy(name, nan_policy):
  if nan_policy not in ("propagate", "omit", "raise"):
    raise ValueError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                     "{'propagate', 'omit', 'raise'}")
  if nan_policy == "omit":
    raise NotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not implemented")
  if nan_policy == "raise":
    raise NotImplementedError(
        f"In order to best JIT compile `{name}`, we cannot know whether `x` contains nans. "
        f"Please check if nans exist in `x` outside of the `{name}` function.")


def _mode_1d(v):
  if v.size == 0:
    return jnp.array(np.nan, float), jnp.array(0, float)
  vals, counts = jnp.unique(v, return_counts=True, size=v.size)
  return vals[jnp.argmax(counts)], jnp.max(counts)


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
  """The most common value along an axis (JAX's :func:`scipy.stats.mode`).

  Args:
    a: array-like input.
    axis: the axis to reduce (default 0); ``None`` reduces the flattened array.
    nan_policy: only ``"propagate"`` is supported (``"omit"`` and ``"raise"`` raise
      ``NotImplementedError``).
    keepdims: whether the reduced axis is kept with length 1.

  Returns:
    ``ModeResult(mode, count)``: the modal values (the smallest one on ties) and how often
    each occurs. An empty slice gives a NaN mode with count 0 (floating point).
  """
  check_arraylike("mode", a)
  x = jnp.atleast_1d(a)
  _nan_policy("mode", nan_policy)
  if axis is None:
    shape = (1,) * x.ndim if keepdims else ()
    x = x.ravel()[:, None]
  else:
    axis = canonicalize_axis(axis, x.ndim)
    shape = tuple(1 if i == axis else n for i, n in enumerate(x.shape) if keepdims or i != axis)
    x = jnp.moveaxis(x, axis, 0)
    x = x.reshape(x.shape[0], math.prod(x.shape[1:]))
  if x.shape[1] == 0:  # no slices: the per-slice result types, empty
    v, n = _mode_1d(jnp.zeros(x.shape[0], x.dtype))
    vals, counts = jnp.zeros(0, v.dtype), jnp.zeros(0, n.dtype)
  else:
    vals, counts = vmap(_mode_1d, in_axes=1)(x)
  return ModeResult(vals.reshape(shape), counts.reshape(shape))


_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def _ranks_1d(v, method):
  n = v.shape[0]
  order = jnp.argsort(v, stable=True)
  ordinal = jnp.zeros(n, order.dtype).at[order].set(jnp.arange(n, dtype=order.dtype))
  if method == "ordinal":
    r = ordinal + 1
  else:
    s = v[order]
    first = jnp.concatenate([jnp.ones(min(n, 1), bool), s[1:] != s[:-1]])  # a new value starts
    dense = jnp.cumsum(first)[ordinal]  # 1-based index of each element's distinct value
    if method == "dense":
      r = dense
    else:
      # starts[j]: sorted position where distinct value j + 1 begins; starts[#distinct] = n
      starts = jnp.nonzero(first, size=n + 1, fill_value=n)[0].astype(float)
      lo, hi = starts[dense - 1] + 1, starts[dense]  # the tie group's 1-based first, last rank
      r = {"min": lo, "max": hi, "average": (lo + hi) / 2}[method]
  return jnp.where(jnp.any(jnp.isnan(v)), np.nan, r.astype(float))


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
  """Ranks of the data, from 1 (JAX's :func:`scipy.stats.rankdata`).

  Args:
    a: array-like input.
    method: how ties are ranked: ``"average"`` (default), ``"min"``, ``"max"``, ``"dense"``
      or ``"ordinal"``, as in SciPy.
    axis: the axis to rank along; ``None`` (default) ranks the flattened array.
    nan_policy: only ``"propagate"`` is supported: a slice holding a NaN ranks as all NaN.

  Returns:
    The ranks, in the default floating-point type.
  """
  check_arraylike("rankdata", a)
  _nan_policy("rankdata", nan_policy)
  if method not in _RANK_METHODS:
    raise ValueError(f"unknown method '{method}'")
  a = jnp.asarray(a)
  if axis is None:
    return _ranks_1d(a.ravel(), method)
  axis = canonicalize_axis(axis, a.ndim)
  if a.size == 0:
    return jnp.zeros(a.shape, float)
  x = jnp.moveaxis(a, axis, -1)
  r = vmap(lambda v: _ranks_1d(v, method))(x.reshape(-1, x.shape[-1]))
  return jnp.moveaxis(r.reshape(x.shape), -1, axis)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
  """The standard error of the mean, ``std(a, ddof) / sqrt(n)`` (JAX's
  :func:`scipy.stats.sem`).

  Args:
    a: array-like input.
    axis: the axis to reduce (default 0); ``None`` reduces the flattened array.
    ddof: the delta degrees of freedom of the standard deviation (default 1).
    nan_policy: ``"propagate"`` (default: NaNs propagate) or ``"omit"`` (NaNs are left out
      of both the deviation and the count).
    keepdims: whether the reduced axis is kept with length 1.

  Returns:
    The standard error, in ``a``'s inexact dtype.
  """
  b, = promote_args_inexact("sem", a)
  if nan_policy == "propagate":
    n = b.size if axis is None else b.shape[axis]
    if is_concrete(ddof):
      sd = b.std(axis, ddof=ddof, keepdims=keepdims)
    else:  # a traced ddof (under jit): the deviation spelled out
      r = b - jnp.mean(b, axis, keepdims=True)
      r = jnp.real(r * jnp.conj(r)) if jnp.iscomplexobj(r) else r * r
      sd = jnp.sqrt(jnp.sum(r, axis, keepdims=keepdims) / (n - ddof).astype(r.dtype))
    return sd / jnp.sqrt(n).astype(b.dtype)
  if nan_policy == "omit":
    n = (~jnp.isnan(b)).sum(axis, keepdims=keepdims)
    return jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(n).astype(b.dtype)
  raise ValueError(f"{nan_policy} is not supported")
