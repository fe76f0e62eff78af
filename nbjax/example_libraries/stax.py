"""``example_libraries.stax``: JAX's minimal neural-network layer library.

A layer is a pair ``(init_fun, apply_fun)``: ``init_fun(rng, input_shape)`` returns
``(output_shape, params)`` and ``apply_fun(params, inputs, **kwargs)`` the outputs (``rng=``
is the PRNG key of stochastic layers such as ``Dropout``). Combinators (``serial``,
``parallel``, ``shape_dependent``) build layers from layers.
"""
import functools
import math

import nbjax.numpy as jnp
from nbjax import lax, random
from nbjax.nn import (elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax,
                      softplus, standardize)
from nbjax.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "Dense", "GeneralConv", "Conv", "GeneralConvTranspose", "Conv1DTranspose", "ConvTranspose",
    "BatchNorm", "elementwise", "Tanh", "Relu", "Exp", "LogSoftmax", "Softmax", "Softplus",
    "Sigmoid", "Elu", "LeakyRelu", "Selu", "Gelu", "MaxPool", "SumPool", "AvgPool", "Flatten",
    "Identity", "FanOut", "FanInSum", "FanInConcat", "Dropout", "serial", "parallel",
    "shape_dependent", "glorot", "randn", "logsoftmax"]

glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
  """A fully connected layer: ``inputs @ W + b``."""

  def init_fun(rng, input_shape):
    k1, k2 = random.split(rng)
    W = W_init(k1, (input_shape[-1], out_dim))
    b = b_init(k2, (out_dim,))
    return input_shape[:-1] + (out_dim,), (W, b)

  def apply_fun(params, inputs, **kwargs):
    W, b = params
    return jnp.dot(inputs, W) + b

  return init_fun, apply_fun


def _conv_layer(out_shape, conv, dimension_numbers, out_chan, filter_shape, strides, padding,
                W_init, b_init):
  """A convolution layer: ``out_shape`` (``lax.conv_*_shape_tuple``) gives its output shape,
  ``conv(inputs, W, strides, padding, one)`` its convolution."""
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  one = (1,) * len(filter_shape)
  strides = strides or one
  W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

  def init_fun(rng, input_shape):
    spatial = iter(filter_shape)
    kernel_shape = [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
                    else next(spatial) for c in rhs_spec]
    output_shape = out_shape(input_shape, kernel_shape, strides, padding, dimension_numbers)
    bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
    k1, k2 = random.split(rng)
    return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

  def apply_fun(params, inputs, **kwargs):
    W, b = params
    return conv(inputs, W, strides, padding, one) + b

  return init_fun, apply_fun


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID",
                W_init=None, b_init=normal(1e-6)):
  """A convolution layer with layouts ``dimension_numbers = (lhs_spec, rhs_spec, out_spec)``."""
  conv = lambda x, W, strides, padding, one: lax.conv_general_dilated(
      x, W, strides, padding, one, one, dimension_numbers=dimension_numbers)
  return _conv_layer(lax.conv_general_shape_tuple, conv, dimension_numbers, out_chan,
                     filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding="VALID", W_init=None, b_init=normal(1e-6)):
  """A transposed-convolution layer with layouts ``dimension_numbers``."""
  conv = lambda x, W, strides, padding, one: lax.conv_transpose(
      x, W, strides, padding, dimension_numbers=dimension_numbers)
  return _conv_layer(lax.conv_transpose_shape_tuple, conv, dimension_numbers, out_chan,
                     filter_shape, strides, padding, W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
  """Batch normalisation over ``axis`` (statistics of the batch itself; no running state)."""
  axis = (axis,) if jnp.isscalar(axis) else axis

  def init_fun(rng, input_shape):
    shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
    k1, k2 = random.split(rng)
    beta = beta_init(k1, shape) if center else ()
    gamma = gamma_init(k2, shape) if scale else ()
    return input_shape, (beta, gamma)

  def apply_fun(params, x, **kwargs):
    beta, gamma = params
    expand = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
    z = standardize(x, axis, epsilon=epsilon)
    if center and scale:
      return gamma[expand] * z + beta[expand]
    if center:
      return z + beta[expand]
    if scale:
      return gamma[expand] * z
    return z

  return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
  """A parameterless layer applying ``fun(inputs, **fun_kwargs)``."""
  def init_fun(rng, input_shape):
    return input_shape, ()

  def apply_fun(params, inputs, **kwargs):
    return fun(inputs, **fun_kwargs)

  return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _pooling_layer(reducer, init_val, rescaler=None):
  def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
    """A pooling layer over the spatial axes (``spec`` names the layout, default NHWC)."""
    strides = strides or (1,) * len(window_shape)
    rescale = rescaler(window_shape, strides, padding) if rescaler else None
    if spec is None:
      batch_and_channel = 0, len(window_shape) + 1
    else:
      batch_and_channel = spec.index("N"), spec.index("C")
    for i in sorted(batch_and_channel):
      window_shape = window_shape[:i] + (1,) + window_shape[i:]
      strides = strides[:i] + (1,) + strides[i:]

    def init_fun(rng, input_shape):
      pads = lax.padtype_to_pads(input_shape, window_shape, strides, padding)
      unit = (1,) * len(window_shape)
      return lax.reduce_window_shape_tuple(input_shape, window_shape, strides, pads, unit,
                                           unit), ()

    def apply_fun(params, inputs, **kwargs):
      out = lax.reduce_window(inputs, init_val, reducer, window_shape, strides, padding)
      return rescale(out, inputs, spec) if rescale else out

    return init_fun, apply_fun
  return PoolingLayer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.)


def _normalize_by_window_size(dims, strides, padding):
  def rescale(outputs, inputs, spec):
    if spec is None:
      batch_and_channel = 0, inputs.ndim - 1
    else:
      batch_and_channel = spec.index("N"), spec.index("C")
    spatial = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in batch_and_channel)
    # how many input elements each window covers (fewer at padded edges)
    counts = lax.reduce_window(jnp.ones(spatial, dtype=inputs.dtype), 0., lax.add, dims,
                               strides, padding)
    for i in sorted(batch_and_channel):
      counts = jnp.expand_dims(counts, i)
    return outputs / counts
  return rescale


AvgPool = _pooling_layer(lax.add, 0., _normalize_by_window_size)


def _flatten():
  def init_fun(rng, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()

  def apply_fun(params, inputs, **kwargs):
    return jnp.reshape(inputs, (inputs.shape[0], -1))

  return init_fun, apply_fun


Flatten = _flatten()


def _identity():
  def init_fun(rng, input_shape):
    return input_shape, ()

  def apply_fun(params, inputs, **kwargs):
    return inputs

  return init_fun, apply_fun


Identity = _identity()


def FanOut(num):
  """A layer copying its input into a list of ``num`` outputs."""
  def init_fun(rng, input_shape):
    return [input_shape] * num, ()

  def apply_fun(params, inputs, **kwargs):
    return [inputs] * num

  return init_fun, apply_fun


def _fan_in_sum():
  def init_fun(rng, input_shape):
    return input_shape[0], ()

  def apply_fun(params, inputs, **kwargs):
    return sum(inputs)

  return init_fun, apply_fun


FanInSum = _fan_in_sum()


def FanInConcat(axis=-1):
  """A layer concatenating its list of inputs along ``axis``."""
  def init_fun(rng, input_shape):
    ax = axis % len(input_shape[0])
    size = sum(s[ax] for s in input_shape)
    return input_shape[0][:ax] + (size,) + input_shape[0][ax + 1:], ()

  def apply_fun(params, inputs, **kwargs):
    return jnp.concatenate(inputs, axis)

  return init_fun, apply_fun


def Dropout(rate, mode="train"):
  """Dropout; ``rate`` is the probability of *keeping* an element, as in JAX's stax."""
  def init_fun(rng, input_shape):
    return input_shape, ()

  def apply_fun(params, inputs, **kwargs):
    rng = kwargs.get("rng", None)
    if rng is None:
      raise ValueError(
          "Dropout layer requires apply_fun to be called with a PRNG key argument. That is, "
          "instead of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, "
          "rng)` where `rng` is a PRNG key (e.g. from `jax.random.key`).")
    if mode == "train":
      keep = random.bernoulli(rng, rate, inputs.shape)
      return jnp.where(keep, inputs / rate, 0)
    return inputs

  return init_fun, apply_fun


def serial(*layers):
  """The composition of ``layers``, applied first to last."""
  nlayers = len(layers)
  init_funs, apply_funs = zip(*layers)

  def init_fun(rng, input_shape):
    params = []
    for init in init_funs:
      rng, layer_rng = random.split(rng)
      input_shape, p = init(layer_rng, input_shape)
      params.append(p)
    return input_shape, params

  def apply_fun(params, inputs, **kwargs):
    rng = kwargs.pop("rng", None)
    rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
    for fun, p, r in zip(apply_funs, params, rngs):
      inputs = fun(p, inputs, rng=r, **kwargs)
    return inputs

  return init_fun, apply_fun


def parallel(*layers):
  """``layers`` side by side: the i-th takes the i-th of a sequence of inputs."""
  nlayers = len(layers)
  init_funs, apply_funs = zip(*layers)

  def init_fun(rng, input_shape):
    rngs = random.split(rng, nlayers)
    # an iterator of (output shapes, params), unpacked by the caller as JAX's is
    return zip(*[init(r, s) for init, r, s in zip(init_funs, rngs, input_shape)])

  def apply_fun(params, inputs, **kwargs):
    rng = kwargs.pop("rng", None)
    rngs = random.split(rng, nlayers) if rng is not None else (None,) * nlayers
    return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

  return init_fun, apply_fun


def shape_dependent(make_layer):
  """A layer built by ``make_layer(input_shape)`` once the input shape is known."""
  def init_fun(rng, input_shape):
    return make_layer(input_shape)[0](rng, input_shape)

  def apply_fun(params, inputs, **kwargs):
    return make_layer(inputs.shape)[1](params, inputs, **kwargs)

  return init_fun, apply_fun
