"""``nbjax.nn``'s activations and other functions (JAX's ``jax.nn``).

A library layer above ``nbjax.numpy``/``nbjax.lax``: every function composes their ops (so it
runs eagerly on their kernels and traces under every transformation), and ``custom_jvp``
(``nbjax/custom_derivatives.py``) gives the derivatives JAX chooses where the plain
composition would differ (``relu'(0) = 0``, ``relu6``, and, with the ``softmax_custom_jvp``
option on, ``softmax``).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from nbjax import dtypes, lax
from nbjax import numpy as jnp
from nbjax.config import config
from nbjax.custom_derivatives import custom_jvp
from nbjax.numpy import _util
from nbjax.scipy.special import logsumexp  # noqa: F401 (jax.nn.logsumexp is the same function)
from nbjax.eager_cache import staged

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu",
           "hard_swish", "hard_tanh", "identity", "leaky_relu", "log1mexp", "log_sigmoid",
           "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu",
           "sigmoid", "silu", "soft_sign", "softmax", "softplus", "sparse_plus",
           "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh"]

tanh = jnp.tanh


def _zero_where_not(pred, g):
  return lax.select(pred, g, lax.full_like(g, 0))


def identity(x):
  """Identity activation function: returns ``x`` as an array."""
  return _util.ensure_arraylike("identity", x)


@custom_jvp
def relu(x):
  r"""Rectified linear unit activation function: :math:`\max(x, 0)`, with
  :math:`\nabla\mathrm{relu}(0) = 0` under differentiation."""
  return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: _zero_where_not(x > 0, g))


@custom_jvp
def relu6(x):
  r"""Rectified linear unit 6: :math:`\min(\max(x, 0), 6)`, with gradient 0 at 0 and 6."""
  return jnp.minimum(jnp.maximum(x, 0), 6.)


relu6.defjvps(lambda g, ans, x: _zero_where_not((x > 0) & (x < 6), g))


@staged
def squareplus(x, b=4):
  r"""Squareplus activation: :math:`(x + \sqrt{x^2 + b}) / 2`."""
  x, b = _util.ensure_arraylike("squareplus", x, b)
  return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@staged
def softplus(x):
  r"""Softplus activation: :math:`\log(1 + e^x)`."""
  return jnp.logaddexp(x, 0)


@staged
def sparse_plus(x):
  r"""Sparse plus: 0 for :math:`x \le -1`, :math:`(x+1)^2/4` on :math:`(-1, 1)`, x above."""
  x = _util.ensure_arraylike("sparse_plus", x)
  return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@staged
def soft_sign(x):
  r"""Soft-sign activation: :math:`x / (|x| + 1)`."""
  x = _util.ensure_arraylike("soft_sign", x)
  return x / (jnp.abs(x) + 1)


def sigmoid(x):
  r"""Sigmoid activation: :math:`1 / (1 + e^{-x})` (``lax.logistic``)."""
  return lax.logistic(x)


@staged
def sparse_sigmoid(x):
  r"""Sparse sigmoid: :math:`\frac12\,\mathrm{clip}(x + 1, 0, 2)`, the derivative of
  ``sparse_plus``."""
  return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


@staged
def silu(x):
  r"""SiLU (aka swish) activation: :math:`x \cdot \mathrm{sigmoid}(x)`."""
  x = _util.ensure_arraylike("silu", x)
  return x * sigmoid(x)


swish = silu


@staged
def mish(x):
  r"""Mish activation: :math:`x \tanh(\mathrm{softplus}(x))`."""
  x = _util.ensure_arraylike("mish", x)
  return x * jnp.tanh(softplus(x))


@staged
def log_sigmoid(x):
  r"""Log-sigmoid activation: :math:`-\log(1 + e^{-x})`."""
  x = _util.ensure_arraylike("log_sigmoid", x)
  return -softplus(-x)


@staged
def elu(x, alpha=1.0):
  r"""Exponential linear unit: x for :math:`x > 0`, :math:`\alpha (e^x - 1)` otherwise."""
  x = _util.ensure_arraylike("elu", x)
  return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0., x)))


@staged
def leaky_relu(x, negative_slope=1e-2):
  r"""Leaky ReLU: x for :math:`x \ge 0`, ``negative_slope * x`` otherwise."""
  x = _util.ensure_arraylike("leaky_relu", x)
  return jnp.where(x >= 0, x, negative_slope * x)


@staged
def hard_tanh(x):
  r"""Hard tanh: x clipped to :math:`[-1, 1]`."""
  x = _util.ensure_arraylike("hard_tanh", x)
  return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@staged
def celu(x, alpha=1.0):
  r"""Continuously-differentiable ELU: :math:`\max(x, 0) + \alpha\,
  \mathrm{expm1}(\min(x, 0) / \alpha)`."""
  return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


@staged
def selu(x):
  r"""Scaled exponential linear unit: :math:`\lambda\,\mathrm{elu}(x, \alpha)` with
  :math:`\lambda \approx 1.0507`, :math:`\alpha \approx 1.6733`."""
  return 1.0507009873554804934193349852946 * elu(x, 1.6732632423543772848170429916717)


@staged
def gelu(x, approximate: bool = True):
  r"""Gaussian error linear unit activation function.

  ``approximate=False``: :math:`\frac{x}{2}\,\mathrm{erfc}(-x/\sqrt2)`; ``approximate=True``
  (the default): :math:`\frac{x}{2}(1 + \tanh(\sqrt{2/\pi}(x + 0.044715 x^3)))`.
  """
  [x] = _util.promote_args_inexact("gelu", x)
  if approximate:
    c = np.sqrt(2 / np.pi).astype(x.dtype)
    # x * x * x: what XLA makes of JAX's x ** 3, and ~4x faster eagerly than integer_pow's kernel
    return x * (0.5 * (1.0 + jnp.tanh(c * (x + 0.044715 * (x * x * x)))))
  return jnp.array(0.5 * x * lax.erfc(-x * np.sqrt(0.5).astype(x.dtype)), dtype=x.dtype)


@staged
def glu(x, axis: int = -1):
  r"""Gated linear unit: ``x1 * sigmoid(x2)``, ``x`` split in two halves along ``axis``."""
  x = _util.ensure_arraylike("glu", x)
  assert x.shape[axis] % 2 == 0, "axis size must be divisible by 2"
  x1, x2 = jnp.split(x, 2, axis)
  return x1 * sigmoid(x2)


@staged
def hard_sigmoid(x):
  r"""Hard sigmoid: :math:`\mathrm{relu6}(x + 3) / 6`."""
  return relu6(x + 3.) / 6.


@staged
def hard_silu(x):
  r"""Hard SiLU (swish): :math:`x \cdot \mathrm{hard\_sigmoid}(x)`."""
  x = _util.ensure_arraylike("hard_silu", x)
  return x * hard_sigmoid(x)


hard_swish = hard_silu


@staged
def log1mexp(x):
  r"""Numerically stable :math:`\log(1 - e^{-x})` for :math:`x \ge 0`."""
  x = _util.ensure_arraylike("log1mexp", x)
  c = jnp.log(2.0)
  return jnp.where(x < c, jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


# -- reductions --------------------------------------------------------------------------------

def _reduction_dims(a, axis):
  if axis is None:
    return tuple(range(a.ndim)), tuple(range(a.ndim))
  axes = _util.canonicalize_axes(axis, a.ndim)
  return axes, axes


@staged
def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
  r"""Log-mean-exp: :math:`\mathrm{logsumexp}(x) - \log n` over ``axis``."""
  x = _util.ensure_arraylike("logmeanexp", x)
  lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
  if where is None:
    count = jnp.asarray(math.prod(x.shape[i] for i in _reduction_dims(x, axis)[1]), lse.dtype)
  else:
    count = jnp.sum(jnp.broadcast_to(where, x.shape), axis=axis, keepdims=keepdims,
                    dtype=lse.dtype)
  return lse - jnp.log(count)


@staged
def log_softmax(x, axis=-1, where=None):
  r"""Log-softmax: :math:`x_i - \log \sum_j e^{x_j}` along ``axis``; masked-out elements
  (``where`` False) give ``-inf``."""
  x = _util.ensure_arraylike("log_softmax", x)
  x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
  x_safe = x if where is None else jnp.where(where, x, -np.inf)
  shifted = x_safe - lax.stop_gradient(x_max)
  result = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
  return result if where is None else jnp.where(where, result, -np.inf)


@staged
def softmax(x, axis=-1, where=None):
  r"""Softmax: :math:`e^{x_i} / \sum_j e^{x_j}` along ``axis`` (an int, a tuple of ints or
  None); masked-out elements (``where`` False) give 0. With the ``softmax_custom_jvp``
  option on, differentiation uses the closed form :math:`y \odot (\dot x - \langle y,
  \dot x\rangle)` (JAX's custom-JVP softmax)."""
  [x] = _util.promote_args_inexact("softmax", x)
  if config.read("softmax_custom_jvp"):
    return _softmax(x, axis, where)
  return _softmax_plain(x, axis, where, -np.inf, lax.stop_gradient)


def _softmax_plain(x, axis, where, initial, sg=lambda v: v):
  x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
  x_safe = x if where is None else jnp.where(where, x, initial)
  unnormalized = jnp.exp(x_safe - sg(x_max))
  result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
  return result if where is None else jnp.where(where, result, 0)


def _softmax_fn(x, axis=-1, where=None, initial=-np.inf):
  return _softmax_plain(x, axis, where, initial)


_softmax = custom_jvp(_softmax_fn, nondiff_argnums=(1,))


@_softmax.defjvp
def _softmax_jvp(axis, primals, tangents):
  (x, where, initial), (x_dot, _, _) = primals, tangents
  y = _softmax(x, axis, where, initial)
  return y, y * (x_dot - (y * x_dot).sum(axis, where=where, keepdims=True))


@staged
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast"):
  r"""Standardizes ``x`` to zero mean and unit variance along ``axis``:
  :math:`(x - \langle x\rangle) / \sqrt{\mathrm{var}(x) + \epsilon}`.

  ``algorithm="fast"`` computes the variance as :math:`\langle x^2\rangle - \langle
  x\rangle^2` (clipped at 0), ``"stable"`` as :math:`\langle(x - \langle x\rangle)^2\rangle`.
  """
  _util.check_arraylike("standardize", x)
  for v in (mean, variance, where):
    if v is not None:
      _util.check_arraylike("standardize", v)
  if mean is None:
    mean = jnp.mean(x, axis, keepdims=True, where=where)
  if variance is None:
    if algorithm == "stable":
      variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
    elif algorithm == "fast":
      variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean)
      variance = jnp.clip(variance, 0)
    else:
      raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
  return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


@staged
def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
  r"""One-hot encodes the integer indices ``x`` along a new axis ``axis`` of size
  ``num_classes``; indices outside :math:`[0, \text{num\_classes})` encode as zeros.
  ``axis`` may name a ``vmap``/``pmap`` axis, whose size must be ``num_classes``."""
  num_classes = _util.concrete(num_classes,
                               "The error arose in jax.nn.one_hot argument `num_classes`.")
  num_classes = operator.index(num_classes)
  x = jnp.asarray(x)
  if not dtypes.is_int(x.dtype):
    import warnings
    warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                  DeprecationWarning, stacklevel=2)
  dtype = dtypes.default_float_dtype() if dtype is None else dtype
  if not isinstance(axis, (int, np.integer)):
    size = lax.axis_size(axis)
    if num_classes != size:
      raise ValueError(f"Expected num_classes to match the size of axis {axis}, "
                       f"but {num_classes} != {size}") from None
    return jnp.asarray(x == lax.axis_index(axis), dtype=dtype)
  pos = _util.canonicalize_axes(axis, x.ndim + 1)[0]
  rhs_shape = [1] * x.ndim
  rhs_shape.insert(pos, num_classes)
  rhs = lax.broadcasted_iota(x.dtype, rhs_shape, pos)
  return (lax.expand_dims(x, (pos,)) == rhs).astype(dtype)


# -- attention ---------------------------------------------------------------------------------

def _large_negative(dtype):
  return jnp.asarray(-0.7 * min(float(jnp.finfo(dtype).max), float(np.finfo(np.float32).max)),
                     dtype=dtype)


def _attention_core(query, key, value, bias, mask, is_causal, scale, q_len, kv_len, window):
  # query (B, T, K, G, H); key/value (B, S, K, H); bias/mask (B|1, K|1, G|1, T|1, S|1)
  logits_dtype = jnp.promote_types(query.dtype, np.float32)
  logits = jnp.einsum("BTKGH,BSKH->BKGTS", query, key, preferred_element_type=logits_dtype)
  logits = logits * jnp.array(scale, dtype=logits.dtype)
  if bias is not None:
    logits = (logits + bias).astype(logits.dtype)
  T, S = logits.shape[-2], logits.shape[-1]
  combined = None

  def both(m):
    return m if combined is None else jnp.logical_and(combined, m)
  if mask is not None:
    combined = both(mask)
  # every mask is 5-D, as JAX's (no implicit rank promotion: it may be set to 'raise')
  if is_causal:
    combined = both(jnp.tril(jnp.ones((1, 1, 1, T, S), dtype=bool)))
  if window is not None:
    qp, kp = jnp.arange(T)[:, None], jnp.arange(S)[None, :]
    combined = both(((qp <= kp + window[0]) & (qp >= kp - window[1]))[None, None, None])
  if q_len is not None:
    combined = both((jnp.arange(T)[None, :, None] < q_len[:, None, None])[:, None, None])
  if kv_len is not None:
    combined = both((jnp.arange(S)[None, None, :] < kv_len[:, None, None])[:, None, None])
  if combined is not None:
    logits = jnp.where(combined, logits, _large_negative(logits.dtype))
  probs = softmax(logits.astype(np.float32), axis=-1).astype(key.dtype)
  encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, value)
  if q_len is not None:
    keep = jnp.arange(T)[None, :] < q_len[:, None]
    encoded = encoded * keep[:, :, None, None, None].astype(encoded.dtype)
  return encoded, logits


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal: bool = False, query_seq_lengths=None,
                          key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
  r"""Scaled dot product attention (JAX's ``jax.nn.dot_product_attention``):
  :math:`\mathrm{softmax}(Q K^T \cdot \mathrm{scale} + \mathrm{bias})\,V`.

  Args:
    query: ``(B, T, N, H)`` (or without the leading ``B``), key, value: ``(B, S, K, H)``
      with ``N`` a multiple of ``K`` (grouped-query attention).
    bias, mask: broadcastable to ``(B, N, T, S)``; ``mask`` is boolean, False masks out.
    scale: the logits' scale, default :math:`1/\sqrt{H}`.
    is_causal: apply a causal mask.
    query_seq_lengths, key_value_seq_lengths: int32 ``(B,)`` valid lengths.
    local_window_size: ``(left, right)`` (or one int for both) window around each query.
    implementation: None or ``'xla'`` (``'cudnn'`` needs a GPU).
    return_residual: also return the logsumexp of the masked logits, ``(B, T, N)``.
  """
  output_shape = jnp.asarray(query).shape

  def _4d(t):
    t = jnp.asarray(t)
    return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t
  q, k, v = _4d(query), _4d(key), _4d(value)
  bias = _4d(bias) if bias is not None else None
  mask = _4d(mask) if mask is not None else None
  if query_seq_lengths is not None:
    query_seq_lengths = jnp.asarray(query_seq_lengths)
  if key_value_seq_lengths is not None:
    key_value_seq_lengths = jnp.asarray(key_value_seq_lengths)
  if isinstance(local_window_size, int):
    local_window_size = (local_window_size, local_window_size)

  def check(t, shape, dtype, name):
    if t is None:
      return
    if t.ndim != len(shape):
      raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
      raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    for i in range(t.ndim):
      if shape[i] != -1 and t.shape[i] != shape[i]:
        raise ValueError(f"{name} shape should be {shape}: but got {t.shape}")
  B, S, K, H = k.shape
  check(v, [B, S, K, H], k.dtype, "value")
  check(q, [B, -1, -1, H], k.dtype, "query")
  check(mask, [-1] * 4, np.dtype(bool), "mask")
  check(bias, [-1] * 4, None, "bias")
  check(query_seq_lengths, [B], np.dtype("int32"), "query_seq_lengths")
  check(key_value_seq_lengths, [B], np.dtype("int32"), "key_value_seq_lengths")
  if q.shape[-2] % K != 0:
    raise ValueError(f"The number of query heads must be a multiple of "
                     f"key/value heads, but got {q.shape[-2]} vs {K}")
  if implementation == "cudnn":
    raise NotImplementedError("dot_product_attention implementation='cudnn' needs a GPU; "
                              "nbjax runs on the CPU (use None or 'xla')")
  if implementation not in (None, "xla"):
    raise ValueError(f"Unsupported implementation option: {implementation}")
  scale = (1.0 / np.sqrt(H)) if scale is None else scale
  T, N = q.shape[1], q.shape[2]
  G = N // K

  def grouped(t):  # (B|1, N|1, T|1, S|1) -> (B|1, K|1, G|1, T|1, S|1)
    if t is None:
      return None
    tb, tn, tt, ts = t.shape
    return t[:, :, None] if tn == 1 else jnp.reshape(t, (tb, K, G, tt, ts))
  enc, logits = _attention_core(jnp.reshape(q, (B, T, K, G, H)), k, v, grouped(bias),
                                grouped(mask), is_causal, scale, query_seq_lengths,
                                key_value_seq_lengths, local_window_size)
  out = jnp.reshape(enc, output_shape)
  if return_residual:
    lse = logsumexp(logits.astype(np.float32), axis=-1).astype(k.dtype)  # (B, K, G, T)
    lse = jnp.reshape(jnp.moveaxis(lse, -1, 1), (B, T, N))
    return out, lax.stop_gradient(jnp.reshape(lse, output_shape[:-1]))
  return out
