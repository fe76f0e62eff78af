"""``nbjax.experimental.rnn``: JAX's ``jax.experimental.rnn``: LSTM weights in cuDNN's packed
layout (``get_num_params_in_lstm``, ``init_lstm_weight``, ``unpack_lstm_weights``,
``swap_lstm_gates``) and the reference LSTM ``lstm_ref`` (``lax.scan`` per pseudo-layer).

The packed layout, for ``num_layers`` layers of ``num_directions`` pseudo-layers (forward
``i`` then reverse ``i``): all ``W_ih``, ``W_hh`` matrices, pseudo-layer by pseudo-layer,
then all ``b_ih``, ``b_hh`` biases; each is the concatenation of the input, forget, cell and
output gates' on the leading axis. ``lstm`` itself is cuDNN's fused kernel, which needs a GPU.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.nn import sigmoid, tanh

__all__ = ["get_num_params_in_lstm", "init_lstm_weight", "lstm", "lstm_ref",
           "swap_lstm_gates", "unpack_lstm_weights"]


def _get_params_shapes_in_lstm(input_size, hidden_size, num_layers, bidirectional):
  """Shapes of the packed weights in order: W_ih, W_hh per pseudo-layer, then b_ih, b_hh."""
  nd = 2 if bidirectional else 1
  first = lambda i: i == 0 or (i == 1 and bidirectional)
  ws = [s for i in range(num_layers * nd)
        for s in ((4 * hidden_size, input_size if first(i) else nd * hidden_size),
                  (4 * hidden_size, hidden_size))]
  return ws + [(4 * hidden_size,)] * (2 * num_layers * nd)


def get_num_params_in_lstm(input_size: int, hidden_size: int, num_layers: int,
                           bidirectional: bool) -> int:
  """Get param count in LSTM."""
  return sum(math.prod(s) for s in _get_params_shapes_in_lstm(
      input_size, hidden_size, num_layers, bidirectional))


def init_lstm_weight(rng, input_size: int, hidden_size: int, num_layers: int,
                     bidirectional: bool):
  """Random initialize LSTM weights from U(-k, k), k=sqrt(1/hidden_size)."""
  n = get_num_params_in_lstm(input_size, hidden_size, num_layers, bidirectional)
  k = np.sqrt(1.0 / hidden_size)
  return nbjax.random.uniform(rng, shape=(n,), dtype=jnp.float32, minval=-k, maxval=k)


def _split_packed(weights, shapes):
  out, off = [], 0
  for s in shapes:
    n = math.prod(s)
    out.append(weights[off:off + n].reshape(s))
    off += n
  return out


def swap_lstm_gates(weights, input_size, hidden_size, num_layers, bidirectional):
  """Swaps the weights for the input and output gates for an LSTM model."""
  weights = jnp.asarray(weights)
  shapes = _get_params_shapes_in_lstm(input_size, hidden_size, num_layers, bidirectional)
  off = 0
  for s in shapes[:4 * num_layers * (2 if bidirectional else 1)]:
    n = math.prod(s)
    g = jnp.split(weights[off:off + n].reshape(s), 4, axis=0)
    weights = weights.at[off:off + n].set(jnp.concatenate([g[0], g[1], g[3], g[2]]).ravel())
    off += n
  return weights


def unpack_lstm_weights(weights, input_size: int, hidden_size: int, num_layers: int,
                        bidirectional: bool):
  """Unpack cudnn LSTM weights into individual weights.

  Returns ``W_ih, W_hh, b_ih, b_hh``: dicts from pseudo-layer index (forward ``i`` at
  ``2 * i``, reverse at ``2 * i + 1`` when bidirectional) to the four gates' weights
  concatenated, e.g. ``W_ih[l]`` of shape ``(4 * hidden_size, input size of l)``.
  """
  shapes = _get_params_shapes_in_lstm(input_size, hidden_size, num_layers, bidirectional)
  parts = _split_packed(weights, shapes)
  npl = num_layers * (2 if bidirectional else 1)
  ws, bs = parts[:2 * npl], parts[2 * npl:]
  return ({l: ws[2 * l] for l in range(npl)}, {l: ws[2 * l + 1] for l in range(npl)},
          {l: bs[2 * l] for l in range(npl)}, {l: bs[2 * l + 1] for l in range(npl)})


def lstm(x, h_0, c_0, weights, seq_lengths, input_size: int, hidden_size: int,
         num_layers: int, dropout: float, bidirectional: bool, precision=None):
  """LSTM via cuDNN: ``(y, h_n, c_n)`` for batch-first ``x``.

  nbjax runs on CPU, where JAX's ``lstm`` (a cuDNN kernel) cannot run either: use
  ``lstm_ref`` with the weights ``unpack_lstm_weights`` gives.
  """
  raise NotImplementedError("jax.experimental.rnn.lstm is cuDNN's LSTM kernel, which needs a "
                            "GPU; on CPU use lstm_ref with unpack_lstm_weights.")


def _lstm_cell(carry, x, *, W_ih, W_hh, b_ih, b_hh):
  h, c = carry
  gi, gf, gg, go = jnp.split(x @ W_ih.T + b_ih[None] + h @ W_hh.T + b_hh[None], 4, axis=-1)
  c = sigmoid(gf) * c + sigmoid(gi) * tanh(gg)
  h = sigmoid(go) * tanh(c)
  return (h, c), h


def _scan_layer(seq_lengths, h0, c0, xs, W_ih, W_hh, b_ih, b_hh):
  """One pseudo-layer over time-major ``xs``: the carry at each sequence's last step and
  the outputs, zero past each sequence's length."""
  cell = partial(_lstm_cell, W_ih=W_ih, W_hh=W_hh, b_ih=b_ih, b_hh=b_hh)

  def step(carry, x):
    carry, y = cell(carry, x)
    return carry, (carry, y)

  _, ((hs, cs), ys) = lax.scan(step, (h0, c0), xs)
  last = seq_lengths - 1, jnp.arange(hs.shape[1])
  mask = seq_lengths[None] > jnp.arange(ys.shape[0], dtype=jnp.int32)[:, None]
  return hs[last], cs[last], jnp.where(mask[..., None], ys, 0)


def _flip_sequence(sequences, seq_lengths):
  """Reverse each sequence's first ``seq_lengths`` steps, keeping the padding at the end."""
  return nbjax.vmap(partial(jnp.roll, axis=0), in_axes=(1, 0), out_axes=1)(
      sequences, sequences.shape[0] - seq_lengths)[::-1]


@partial(nbjax.jit, static_argnums=(8, 9, 10, 11, 12))
def lstm_ref(x, h_0, c_0, W_ih, W_hh, b_ih, b_hh, seq_lengths, input_size: int,
             hidden_size: int, num_layers: int, dropout: float, bidirectional: bool):
  """Reference implementation of LSTM (PyTorch's and cuDNN's equations), batch-first:
  ``(y, h_n, c_n)``, ``y`` zero past each sequence's length.

  See https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html#lstm
  """
  if seq_lengths.dtype != jnp.dtype("int32"):
    raise NotImplementedError("`seq_lengths` can only be int32.")
  if dropout != 0.0:
    raise NotImplementedError(
        'Dropout not supported in LSTM reference because we cannot determine CUDNN dropout mask.')
  ys = x.transpose(1, 0, 2)
  hn, cn = [], []
  for l in range(num_layers * (2 if bidirectional else 1)):
    args = seq_lengths, h_0[l], c_0[l]
    ws = W_ih[l], W_hh[l], b_ih[l], b_hh[l]
    if not bidirectional:
      h, c, ys = _scan_layer(*args, ys, *ws)
    elif l % 2 == 0:
      h, c, fwd = _scan_layer(*args, ys, *ws)
    else:
      h, c, bwd = _scan_layer(*args, _flip_sequence(ys, seq_lengths), *ws)
      ys = jnp.concatenate([fwd, _flip_sequence(bwd, seq_lengths)], axis=-1)
    hn.append(h)
    cn.append(c)
  return ys.transpose(1, 0, 2), jnp.stack(hn), jnp.stack(cn)
