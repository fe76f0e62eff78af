"""The demo's convolutional network: a small CNN trained on scikit-learn's bundled 8x8
handwritten digits, written once against JAX's public API so the same code runs on nbjax
(eagerly and under ``jit``) and, when installed, on JAX (``jax.jit``); PyTorch runs the same
architecture eagerly for comparison.

Used by ``python -m nbjax`` and ``examples/cnn_digits.py``. Sits on top of the package: it
imports only the public modules of the framework it is given.

Architecture: conv 3x3 (1 -> 16) + relu + 2x2 max-pool, conv 3x3 (16 -> 32) + relu + 2x2
max-pool, dense 128 -> 10, log-softmax cross-entropy; Adam written with ``tree_map``.
"""
import time

import numpy as np

LR, B1, B2, EPS = 3e-3, 0.9, 0.999, 1e-8


def digits():
  """scikit-learn's bundled 8x8 digits as NHWC float32 images, split 1500/297; None when
  scikit-learn is missing."""
  try:
    from sklearn.datasets import load_digits
  except ImportError:
    return None
  d = load_digits()
  order = np.random.default_rng(0).permutation(len(d.target))
  X = (d.data[order] / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
  y = d.target[order]
  return X[:1500], y[:1500], X[1500:], y[1500:]


def model(jax):
  """``(init, loss, predict, step)`` for a JAX-compatible framework module ``jax``."""
  jnp, lax, nn = jax.numpy, jax.lax, jax.nn

  def init(seed=0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    he = nn.initializers.he_normal()
    return {"c1": he(k1, (3, 3, 1, 16), jnp.float32), "b1": jnp.zeros(16, jnp.float32),
            "c2": he(k2, (3, 3, 16, 32), jnp.float32), "b2": jnp.zeros(32, jnp.float32),
            "w": nn.initializers.glorot_normal()(k3, (128, 10), jnp.float32),
            "b": jnp.zeros(10, jnp.float32)}

  def conv(x, w, b):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC")) + b

  def pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

  def logits(p, x):
    h = pool(nn.relu(conv(x, p["c1"], p["b1"])))
    h = pool(nn.relu(conv(h, p["c2"], p["b2"])))
    return h.reshape(h.shape[0], -1) @ p["w"] + p["b"]

  def loss(p, x, y):
    return -jnp.mean(jnp.sum(nn.log_softmax(logits(p, x)) * y, axis=1))

  def predict(p, x):
    return jnp.argmax(logits(p, x), axis=1)

  vg = jax.value_and_grad(loss)
  tmap = jax.tree_util.tree_map

  def step(state, x, y):
    p, m, v, t = state
    val, g = vg(p, x, y)
    t = t + 1
    m = tmap(lambda m, g: B1 * m + (1 - B1) * g, m, g)
    v = tmap(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    p = tmap(lambda p, m, v: p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS), p, m, v)
    return (p, m, v, t), val

  def start(seed=0):
    p = init(seed)
    zeros = tmap(jnp.zeros_like, p)
    return (p, zeros, zeros, jnp.asarray(0.0, jnp.float32))

  return start, step, predict


def train(jax, mode="eager", epochs=12, batch=100, progress=None, data=None):
  """Train with framework ``jax`` (``mode``: "eager" or "jit"). Returns ``(seconds per step
  after the first epoch, test accuracy, final loss)``."""
  Xtr, ytr, Xte, yte = data or digits()
  jnp = jax.numpy
  Ytr = np.eye(10, dtype=np.float32)[ytr]
  start, step, predict = model(jax)
  if mode == "jit":
    step, predict = jax.jit(step), jax.jit(predict)
  state = start()
  nb = len(Xtr) // batch
  batches = [(jnp.asarray(Xtr[i * batch:(i + 1) * batch]), jnp.asarray(Ytr[i * batch:(i + 1) * batch]))
             for i in range(nb)]
  t0, steps = None, 0
  for epoch in range(epochs):
    if epoch == 1:  # the steady state: the first epoch traces, compiles and warms up
      t0, steps = time.perf_counter(), 0
    for x, y in batches:
      state, val = step(state, x, y)
      steps += 1
    val = float(val)
    acc = float(np.mean(np.asarray(predict(state[0], jnp.asarray(Xte))) == yte))
    if progress is not None:
      progress.step(f"loss {val:.4f}  test accuracy {acc:.1%}")
  return (time.perf_counter() - t0) / steps, acc, val


def train_torch(epochs=12, batch=100, data=None):
  """The same network and optimiser in PyTorch (eager; NCHW), or None without torch."""
  try:
    import torch
  except ImportError:
    return None
  torch.manual_seed(0)
  Xtr, ytr, Xte, yte = data or digits()
  tX = torch.tensor(Xtr).permute(0, 3, 1, 2).contiguous()
  tXte = torch.tensor(Xte).permute(0, 3, 1, 2).contiguous()
  ty = torch.tensor(ytr)
  net = torch.nn.Sequential(
      torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
      torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
      torch.nn.Flatten(), torch.nn.Linear(128, 10))
  opt = torch.optim.Adam(net.parameters(), lr=LR, betas=(B1, B2), eps=EPS)
  nb = len(Xtr) // batch
  t0, steps = None, 0
  for epoch in range(epochs):
    if epoch == 1:
      t0, steps = time.perf_counter(), 0
    for i in range(nb):
      opt.zero_grad()
      loss = torch.nn.functional.cross_entropy(net(tX[i * batch:(i + 1) * batch]),
                                               ty[i * batch:(i + 1) * batch])
      loss.backward()
      opt.step()
      steps += 1
  with torch.no_grad():
    acc = float((net(tXte).argmax(1).numpy() == yte).mean())
  return (time.perf_counter() - t0) / steps, acc, loss.item()
