"""nbjax.experimental.rnn: cuDNN's packed LSTM weights and the reference LSTM, against values
from JAX 0.10.2's jax.experimental.rnn (experimental_rnn_test test_lstm_ref)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental import rnn


@pytest.mark.parametrize("B,T,I,H,L,bi,n,loss,y1,g4", [
    (2, 4, 2, 3, 2, True, 432, 1.3450021743774414,
     [-0.11553358286619186, -0.09819377213716507, 0.0, 0.0],
     [0.17105981707572937, 0.08539201319217682, -0.014005137607455254, -0.01185181736946106]),
    (3, 5, 1, 2, 1, False, 40, 0.4816823899745941,
     [0.22682882845401764, -0.005134275183081627, 0.0, 0.0, 0.0],
     [-0.03511130064725876, 0.14453259110450745, 0.16965022683143616, 0.750638484954834]),
])
def test_lstm_ref_values_and_grad(B, T, I, H, L, bi, n, loss, y1, g4):
  nd = 2 if bi else 1
  assert rnn.get_num_params_in_lstm(I, H, L, bi) == n
  w = rnn.init_lstm_weight(nbjax.random.key(4), I, H, L, bi)
  assert w.shape == (n,) and w.dtype == np.float32
  x = nbjax.random.normal(nbjax.random.key(1), (B, T, I), jnp.float32)
  h0 = nbjax.random.normal(nbjax.random.key(2), (nd * L, B, H), jnp.float32)
  c0 = nbjax.random.normal(nbjax.random.key(3), (nd * L, B, H), jnp.float32)
  sl = jnp.array([T, 2, 1][:B], jnp.int32)

  def f(w):
    y, hn, cn = rnn.lstm_ref(x, h0, c0, *rnn.unpack_lstm_weights(w, I, H, L, bi),
                             seq_lengths=sl, input_size=I, hidden_size=H, num_layers=L,
                             dropout=0.0, bidirectional=bi)
    return jnp.sum(y) + jnp.sum(hn * cn), (y, hn, cn)

  (l, (y, hn, cn)), g = nbjax.value_and_grad(f, has_aux=True)(w)
  assert y.shape == (B, T, nd * H) and hn.shape == cn.shape == (nd * L, B, H)
  np.testing.assert_allclose(l, loss, rtol=1e-5)
  np.testing.assert_allclose(y[1, :, 0], y1, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(g[:4], g4, rtol=1e-5, atol=1e-6)


def test_swap_gates_and_errors():
  w = rnn.init_lstm_weight(nbjax.random.key(4), 2, 3, 2, True)
  r = jnp.arange(w.size, dtype=jnp.float32)
  np.testing.assert_allclose(jnp.sum(rnn.swap_lstm_gates(w, 2, 3, 2, True) * r),
                             -1128.50537109375, rtol=1e-5)
  np.testing.assert_array_equal(
      rnn.swap_lstm_gates(rnn.swap_lstm_gates(w, 2, 3, 2, True), 2, 3, 2, True), w)
  W_ih, W_hh, b_ih, b_hh = rnn.unpack_lstm_weights(w, 2, 3, 2, True)
  assert [W_ih[l].shape for l in range(4)] == [(12, 2), (12, 2), (12, 6), (12, 6)]
  assert W_hh[3].shape == (12, 3) and b_ih[0].shape == b_hh[3].shape == (12,)
  args = (jnp.ones((1, 2, 2)), jnp.ones((4, 1, 3)), jnp.ones((4, 1, 3)), W_ih, W_hh, b_ih, b_hh)
  with pytest.raises(NotImplementedError, match="`seq_lengths` can only be int32."):
    rnn.lstm_ref(*args, jnp.array([2]), 2, 3, 2, 0.0, True)
  with pytest.raises(NotImplementedError, match="Dropout not supported in LSTM reference"):
    rnn.lstm_ref(*args, jnp.array([2], jnp.int32), 2, 3, 2, 0.5, True)
  with pytest.raises(NotImplementedError, match="needs a GPU"):
    rnn.lstm(jnp.ones((1, 2, 2)), jnp.ones((4, 1, 3)), jnp.ones((4, 1, 3)), w,
             jnp.array([2], jnp.int32), 2, 3, 2, 0.0, True)
