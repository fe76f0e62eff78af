"""``nbjax.nn.initializers``: JAX's parameter initializers (``jax.nn.initializers``).

A library layer over ``nbjax.random`` (whose threefry bits match JAX's, so an initializer
gives JAX's values for the same key, shape and dtype) and ``nbjax.numpy``. Each builder
returns ``init(key, shape, dtype=<builder's dtype>) -> Array``.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from nbjax import dtypes, random
from nbjax import numpy as jnp
from nbjax.lax.elementwise import _canonicalize_shape

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
           "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
           "variance_scaling", "xavier_normal", "xavier_uniform", "zeros"]


class Initializer(Protocol):
  """The initializers' type: ``init(key, shape, dtype=None) -> Array``."""

  def __call__(self, key, shape, dtype=None, out_sharding=None) -> Any:
    ...


def _dtype(dtype):
  return dtypes.default_float_dtype() if dtype is None else dtype


def _no_sharding(name, out_sharding):
  if out_sharding is not None:
    raise NotImplementedError(f"nn.initializers.{name}: out_sharding is not supported by "
                              "nbjax (one CPU device); pass None")


def zeros(key, shape, dtype=None, out_sharding=None):
  """An initializer returning an array of zeros (the ``key`` is ignored)."""
  _no_sharding("zeros", out_sharding)
  return jnp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None, out_sharding=None):
  """An initializer returning an array of ones (the ``key`` is ignored)."""
  _no_sharding("ones", out_sharding)
  return jnp.ones(shape, _dtype(dtype))


def constant(value, dtype=None) -> Initializer:
  """Builds an initializer returning arrays full of ``value``."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("constant", out_sharding)
    return jnp.full(shape, value, dtype=_dtype(dtype))
  return init


def uniform(scale=1e-2, dtype=None) -> Initializer:
  """Builds an initializer of uniform values in ``[0, scale)``."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("uniform", out_sharding)
    dtype = _dtype(dtype)
    return random.uniform(key, shape, dtype) * jnp.array(scale, dtype)
  return init


def normal(stddev=1e-2, dtype=None) -> Initializer:
  """Builds an initializer of normal values with mean 0 and standard deviation ``stddev``."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("normal", out_sharding)
    dtype = _dtype(dtype)
    return random.normal(key, shape, dtype) * jnp.array(stddev, dtype)
  return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0) -> Initializer:
  """Builds an initializer of normal values truncated to ``(lower, upper)`` then scaled by
  ``stddev`` (no variance correction)."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("truncated_normal", out_sharding)
    dtype = _dtype(dtype)
    return random.truncated_normal(key, lower, upper, shape, dtype) * jnp.array(stddev, dtype)
  return init


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
  """``(fan_in, fan_out)`` of a dense or convolution kernel: the in/out sizes times the
  receptive field (the axes that are none of in/out/batch)."""
  if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
    raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional"
                     " weights tensor with default in_axis. Must be at least 2D or specify"
                     " in_axis explicitly.")

  def size(axes):
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)
  in_size, out_size = size(in_axis), size(out_axis)
  receptive = math.prod(shape) / in_size / out_size / size(batch_axis)
  return in_size * receptive, out_size * receptive


def _complex_uniform(key, shape, dtype):
  key_r, key_theta = random.split(key)
  real = np.array(0, dtype).real.dtype
  dtype = np.result_type(real, np.complex64)
  r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
  theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
  return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper, shape, dtype):
  key_r, key_theta = random.split(key)
  real = np.array(0, dtype).real.dtype
  dtype = np.result_type(real, np.complex64)
  t = ((1 - jnp.exp(jnp.array(-(upper ** 2), dtype)))
       * random.uniform(key_r, shape, real).astype(dtype))
  r = jnp.sqrt(-jnp.log(1 - t))
  theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
  return r * jnp.exp(1j * theta)


def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1,
                     batch_axis=(), dtype=None) -> Initializer:
  r"""Builds an initializer whose scale adapts to the weights' shape.

  Samples have mean 0 and standard deviation :math:`\sqrt{\mathrm{scale} / n}`, with ``n``
  the fan in (``mode="fan_in"``), fan out (``"fan_out"``), their mean (``"fan_avg"``) or
  geometric mean (``"fan_geo_avg"``); ``distribution`` is ``"truncated_normal"`` (at two
  standard deviations, variance corrected), ``"normal"`` or ``"uniform"`` (a disk for complex
  dtypes). ``in_axis``/``out_axis``/``batch_axis`` locate the kernel's axes; the others are
  the receptive field.
  """
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("variance_scaling", out_sharding)
    shape = _canonicalize_shape(shape)
    dtype = _dtype(dtype)
    fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
    if mode == "fan_in":
      denominator = fan_in
    elif mode == "fan_out":
      denominator = fan_out
    elif mode == "fan_avg":
      denominator = (fan_in + fan_out) / 2
    elif mode == "fan_geo_avg":
      denominator = (fan_in * fan_out) ** 0.5
    else:
      raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
    variance = jnp.array(scale / denominator, dtype=dtype)
    floating = dtypes.issubdtype(dtype, np.floating)
    if distribution == "truncated_normal":
      if floating:
        stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
        return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
      stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
      return _complex_truncated_normal(key, 2, shape, dtype) * stddev
    if distribution == "normal":
      return random.normal(key, shape, dtype) * jnp.sqrt(variance)
    if distribution == "uniform":
      if floating:
        return random.uniform(key, shape, dtype, -1) * jnp.sqrt(3 * variance)
      return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
    raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
  return init


def _specialize(name, scale, mode, distribution, doc):
  def builder(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None) -> Initializer:
    return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)
  builder.__name__ = builder.__qualname__ = name
  builder.__doc__ = (f"Builds a {doc} initializer: ``variance_scaling({scale}, \"{mode}\", "
                     f"\"{distribution}\")`` over the given axes.")
  return builder


glorot_uniform = xavier_uniform = _specialize("glorot_uniform", 1.0, "fan_avg", "uniform",
                                              "Glorot (Xavier) uniform")
glorot_normal = xavier_normal = _specialize("glorot_normal", 1.0, "fan_avg", "truncated_normal",
                                            "Glorot (Xavier) normal")
lecun_uniform = _specialize("lecun_uniform", 1.0, "fan_in", "uniform", "LeCun uniform")
lecun_normal = _specialize("lecun_normal", 1.0, "fan_in", "truncated_normal", "LeCun normal")
he_uniform = kaiming_uniform = _specialize("he_uniform", 2.0, "fan_in", "uniform",
                                           "He (Kaiming) uniform")
he_normal = kaiming_normal = _specialize("he_normal", 2.0, "fan_in", "truncated_normal",
                                         "He (Kaiming) normal")


def _orthogonal(key, n, m, dtype):
  """An ``(n, m)`` matrix with orthonormal rows or columns, as ``jax.random.orthogonal``."""
  z = random.normal(key, (max(n, m), min(n, m)), dtype)
  q, r = jnp.linalg.qr(z)
  x = q * jnp.expand_dims(jnp.sign(jnp.linalg.diagonal(r)), -2)
  return x.mT if n < m else x


def orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
  """Builds an initializer of (scaled) uniformly distributed orthogonal matrices; a
  non-square shape gets orthonormal rows or columns, whichever are fewer. Dimensions other
  than ``column_axis`` are flattened into the rows."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("orthogonal", out_sharding)
    dtype = _dtype(dtype)
    if len(shape) < 2:
      raise ValueError("orthogonal initializer requires at least a 2D shape")
    if any(d == 0 for d in shape):
      return jnp.zeros(shape, dtype=dtype)
    n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
    q = _orthogonal(key, n_rows, n_cols, dtype)
    q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
    return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
  return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None) -> Initializer:
  """Builds a delta-orthogonal initializer for 3D, 4D or 5D convolution kernels: zero but
  for an orthogonal matrix at the spatial centre."""
  def init(key, shape, dtype=dtype, out_sharding=None):
    _no_sharding("delta_orthogonal", out_sharding)
    dtype = _dtype(dtype)
    if len(shape) not in (3, 4, 5):
      raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
    if shape[-1] < shape[-2]:
      raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
    ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
    centre = tuple((k - 1) // 2 for k in shape[:-2])
    return jnp.zeros(shape, dtype=dtype).at[centre].set(ortho)
  return init
