"""Gaussian kernel density estimation (``jax.scipy.stats.gaussian_kde``)."""
import dataclasses
from typing import Any

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax import random
from nbjax.api import vmap
from nbjax.interpreters.pjit import jit
from nbjax.numpy._util import check_arraylike, promote_dtypes_inexact
from nbjax.scipy import linalg, special
from nbjax.tree_util import register_pytree_node_class

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _is_complex(x):
  return jnp.issubdtype(lax.dtype(x), np.complexfloating)


@register_pytree_node_class
@dataclasses.dataclass(frozen=True, init=False, slots=True)
class gaussian_kde:
  """A Gaussian kernel density estimate (JAX's :class:`scipy.stats.gaussian_kde`), a pytree.

  Args:
    dataset: real array-like data: shape ``(n,)`` for one dimension, ``(d, n)`` for ``d``.
    bw_method: the bandwidth factor: ``"scott"`` (default), ``"silverman"``, a scalar, or a
      callable taking the (partly built) estimator and returning the factor.
    weights: optional array-like of ``n`` weights (normalised to sum to 1).

  Attributes:
    neff: the effective number of samples, ``1 / sum(weights**2)``.
    dataset: the data, shape ``(d, n)``. ``d`` and ``n`` are properties.
    weights: the normalised weights, shape ``(n,)``.
    covariance: the kernel covariance, the data covariance times the factor squared.
    inv_cov: its inverse.
  """
  neff: Any
  dataset: Any
  weights: Any
  covariance: Any
  inv_cov: Any

  def __init__(self, dataset, bw_method=None, weights=None):
    check_arraylike("gaussian_kde", dataset)
    dataset = jnp.atleast_2d(dataset)
    if _is_complex(dataset):
      raise NotImplementedError("gaussian_kde does not support complex data")
    if not dataset.size > 1:
      raise ValueError("`dataset` input should have multiple elements.")
    d, n = dataset.shape
    if weights is None:
      dataset, = promote_dtypes_inexact(dataset)
      weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
    else:
      check_arraylike("gaussian_kde", weights)
      dataset, weights = promote_dtypes_inexact(dataset, weights)
      weights = jnp.atleast_1d(weights)
      weights = weights / jnp.sum(weights)
      if weights.ndim != 1:
        raise ValueError("`weights` input should be one-dimensional.")
      if len(weights) != n:
        raise ValueError("`weights` input should be of length n")
    self._set("dataset", dataset)
    self._set("weights", weights)
    neff = self._set("neff", 1 / jnp.sum(weights ** 2))
    if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
      factor = jnp.power(neff, -1. / (d + 4))
    elif isinstance(bw_method, str) and bw_method == "silverman":
      factor = jnp.power(neff * (d + 2) / 4.0, -1. / (d + 4))
    elif jnp.isscalar(bw_method) and not isinstance(bw_method, str):
      factor = bw_method
    elif callable(bw_method):
      factor = bw_method(self)
    else:
      raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")
    cov = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
    self._set("covariance", cov * factor ** 2)
    self._set("inv_cov", jnp.linalg.inv(cov) / factor ** 2)

  def _set(self, name, value):
    object.__setattr__(self, name, value)  # (the dataclass is frozen)
    return value

  def tree_flatten(self):
    return tuple(getattr(self, f) for f in _FIELDS), None

  @classmethod
  def tree_unflatten(cls, aux_data, children):
    kde = cls.__new__(cls)
    for f, v in zip(_FIELDS, children):
      kde._set(f, v)
    return kde

  @property
  def d(self):
    return self.dataset.shape[0]

  @property
  def n(self):
    return self.dataset.shape[1]

  def evaluate(self, points):
    """The estimated density at ``points`` (shape ``(d, m)``, or ``(m,)`` when ``d == 1``)."""
    check_arraylike("evaluate", points)
    return _kernel_sum(False, self.dataset.T, self.weights, self._points(points).T,
                       self.inv_cov)

  def __call__(self, points):
    return self.evaluate(points)

  def pdf(self, x):
    """The estimated density at ``x`` (``evaluate``)."""
    return self.evaluate(x)

  def logpdf(self, x):
    """The log of the estimated density at ``x`` (a log-sum-exp over the kernels)."""
    check_arraylike("logpdf", x)
    return _kernel_sum(True, self.dataset.T, self.weights, self._points(x).T, self.inv_cov)

  def integrate_gaussian(self, mean, cov):
    """The integral of the density times a Gaussian of the given ``mean`` and ``cov``."""
    mean = jnp.atleast_1d(jnp.squeeze(mean))
    cov = jnp.atleast_2d(cov)
    if mean.shape != (self.d,):
      raise ValueError(f"mean does not have dimension {self.d}")
    if cov.shape != (self.d, self.d):
      raise ValueError(f"covariance does not have dimension {self.d}")
    chol = linalg.cho_factor(self.covariance + cov)
    scale = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
    return _gauss_overlap(chol, scale, self.dataset, self.weights, mean)

  def integrate_box_1d(self, low, high):
    """The integral of a one-dimensional density over ``[low, high]`` (scalars)."""
    if self.d != 1:
      raise ValueError("integrate_box_1d() only handles 1D pdfs")
    if np.ndim(low) != 0 or np.ndim(high) != 0:
      raise ValueError("the limits of integration in integrate_box_1d must be scalars")
    return _box_1d(self, low, high)

  def integrate_kde(self, other):
    """The integral of the product of this density and ``other``'s."""
    if other.d != self.d:
      raise ValueError("KDEs are not the same dimensionality")
    chol = linalg.cho_factor(self.covariance + other.covariance)
    scale = 1.0 / (jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0])))
    small, large = (self, other) if self.n < other.n else (other, self)
    per_point = vmap(lambda m: _gauss_overlap(chol, scale, large.dataset, large.weights, m),
                     in_axes=1)(small.dataset)
    return jnp.sum(per_point * small.weights)

  def resample(self, key, shape=()):
    """Draw from the estimated density.

    Args:
      key: a PRNG key.
      shape: the batch shape (a tuple of non-negative ints, default ``()``).

    Returns:
      The samples: data points drawn by weight plus kernel noise, shape ``(d,) + shape``.
    """
    return _resample(self, key, shape)

  def integrate_box(self, low_bounds, high_bounds, maxpts=None):
    """Not supported (as in JAX): only ``integrate_box_1d``."""
    raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

  def set_bandwidth(self, bw_method=None):
    """Not supported (as in JAX): the estimator is immutable."""
    raise NotImplementedError("dynamically changing the bandwidth method is not supported")

  def _points(self, points):
    if _is_complex(points):
      raise NotImplementedError("gaussian_kde does not support complex coordinates")
    points = jnp.atleast_2d(points)
    d, m = points.shape
    if d != self.d:
      if d == 1 and m == self.d:
        return jnp.reshape(points, (self.d, 1))
      raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
    return points


@jit
def _box_1d(kde, low, high):
  sigma = jnp.squeeze(jnp.sqrt(kde.covariance))
  lo = jnp.squeeze((low - kde.dataset) / sigma)
  hi = jnp.squeeze((high - kde.dataset) / sigma)
  return jnp.sum(kde.weights * (special.ndtr(hi) - special.ndtr(lo)))


def _resample_impl(kde, key, shape):
  k_ind, k_eps = random.split(key)
  ind = random.choice(k_ind, kde.n, shape=shape, p=kde.weights)
  eps = random.multivariate_normal(k_eps, jnp.zeros(kde.d, kde.covariance.dtype), kde.covariance,
                                   shape=shape, dtype=kde.dataset.dtype)
  return lax.add(kde.dataset[:, ind], eps.T)  # (JAX's full transpose of the noise)


_resample = jit(_resample_impl, static_argnums=2)


def _gauss_overlap(chol, scale, data, weights, mean):
  """``scale * sum_i w_i exp(-r_i' C^-1 r_i / 2)``, ``r_i = data_i - mean``, ``C`` from ``chol``."""
  r = data - mean[:, None]
  q = jnp.sum(r * linalg.cho_solve(chol, r), axis=0)
  return scale * jnp.sum(jnp.exp(-q / 2) * weights)


def _kernel_sum(log, data, weights, xs, precision):
  """Sum over the data rows of ``weights * N(xs; data_i, precision^-1)`` at each row of ``xs``
  (in log space when ``log``), through the precision's lower Cholesky factor."""
  data, weights, xs, precision = promote_dtypes_inexact(data, weights, xs, precision)
  d = data.shape[1]
  if xs.shape[1] != d:
    raise ValueError("points and xi must have same trailing dim")
  if precision.shape != (d, d):
    raise ValueError("precision matrix must match data dims")
  w = linalg.cholesky(precision, lower=True)
  data, xs = jnp.dot(data, w), jnp.dot(xs, w)
  log_norm = jnp.sum(jnp.log(jnp.diag(w))) - 0.5 * d * jnp.log(2 * np.pi)
  sq = jnp.sum(jnp.square(data[None, :, :] - xs[:, None, :]), axis=-1)  # (points, data)
  arg = log_norm - 0.5 * sq
  if log:
    return special.logsumexp(jnp.log(weights) + arg, axis=1)
  return jnp.sum(weights * jnp.exp(arg), axis=1)

