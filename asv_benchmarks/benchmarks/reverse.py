"""Reverse mode: ``grad`` of a scalar chain, ``value_and_grad`` of MLPs, per-example gradients
and an SGD step, per backend: ``numpy`` is the backward pass written out by hand (the
baseline of the ratios), ``nbjax`` and ``jax`` run their ``grad`` eagerly or under their
``jit``, ``torch`` (when installed) its autograd (``torch.func`` for per-example gradients).

``mode``: ``eager`` (the same differentiated function called again: nbjax replays a staged
program), ``percall`` (the function is a method of a mutable object, which no replay may
serve: nbjax's tape), ``jit``. Backends without a mode skip it.
"""
import numpy as np

from . import _backends

MODES = ["eager", "percall", "jit"]


def _torch():
  try:
    import torch
  except ImportError:
    raise NotImplementedError("torch not installed") from None
  torch.set_num_threads(2)
  return torch


def _fw(backend):
  """(numpy-like module, transformation module, put) for nbjax and jax."""
  m, put = _backends.get(backend)
  if backend == "nbjax":
    import nbjax as tr
  else:
    import jax as tr
  return m, tr, put


class _Holder:
  """A mutable object whose method is the loss: nbjax's purity guard refuses to replay it."""

  def __init__(self, f):
    self.f = f

  def loss(self, *args):
    return self.f(*args)


def _differentiated(tr, f, mode, **kw):
  if mode == "eager":
    return tr.value_and_grad(f, **kw)
  if mode == "percall":
    return tr.value_and_grad(_Holder(f).loss, **kw)
  return tr.jit(tr.value_and_grad(f, **kw))


class GradChain:
  """``grad`` of the 5-op scalar chain ``sin(cos(x) * x + 1) * 2 - x`` at a float64 0-d x."""
  params = (_backends.BACKENDS + ["torch"], MODES)
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    if backend == "numpy":
      x = np.float64(0.7)

      def run():
        c, s = np.cos(x), np.sin(x)
        u = c * x + 1
        return np.cos(u) * 2 * (c - s * x) - 1
    elif backend == "torch":
      if mode != "eager":
        raise NotImplementedError("torch: eager autograd only")
      torch = _torch()
      x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)

      def run():
        y = torch.sin(torch.cos(x) * x + 1) * 2 - x
        (g,) = torch.autograd.grad(y, x)
        return g
    else:
      if backend == "jax" and mode == "percall":
        raise NotImplementedError("jax has no replay: eager is its per-call path")
      m, tr, put = _fw(backend)
      x = put(np.float64(0.7))
      f = lambda x: m.sin(m.cos(x) * x + 1) * 2 - x
      g = {"eager": tr.grad(f), "percall": tr.grad(_Holder(f).loss), "jit": tr.jit(tr.grad(f))}[mode]
      run = lambda: g(x)
    self.run = run
    for _ in range(3):
      _backends.block(run())

  def time_grad(self, backend, mode):
    return self.run()


def _mlp_params(sizes, rng):
  return [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
           np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]


def _numpy_mse_mlp(params, x, y):
  """value and grads of mean((tanh-MLP(x) - y)**2), written out by hand."""
  acts, h = [x], x
  for i, (w, b) in enumerate(params):
    z = h @ w + b
    h = np.tanh(z) if i < len(params) - 1 else z
    acts.append(h)
  d = h - y
  loss = np.mean(d * d)
  g = 2 * d / d.size
  grads = []
  for i in range(len(params) - 1, -1, -1):
    w, _ = params[i]
    if i < len(params) - 1:
      g = g * (1 - acts[i + 1] ** 2)
    grads.append((acts[i].T @ g, g.sum(0)))
    g = g @ w.T
  return loss, grads[::-1]


def _numpy_xent_mlp(params, x, labels):
  """value and grads of the softmax cross-entropy of a relu-MLP, written out by hand."""
  acts, h = [x], x
  for i, (w, b) in enumerate(params):
    z = h @ w + b
    h = np.maximum(z, 0) if i < len(params) - 1 else z
    acts.append(h)
  z = h - h.max(1, keepdims=True)
  e = np.exp(z)
  p = e / e.sum(1, keepdims=True)
  n = x.shape[0]
  loss = -np.mean(np.log(p[np.arange(n), labels]))
  g = p
  g[np.arange(n), labels] -= 1
  g /= n
  grads = []
  for i in range(len(params) - 1, -1, -1):
    w, _ = params[i]
    if i < len(params) - 1:
      g = g * (acts[i + 1] > 0)
    grads.append((acts[i].T @ g, g.sum(0)))
    g = g @ w.T
  return loss, grads[::-1]


def _fw_loss(m, kind):
  """The MLP loss for nbjax and jax: tanh + squared error, or relu + softmax cross-entropy
  (``y`` one-hot)."""
  def loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
      h = h @ w + b
      if i < len(params) - 1:
        h = m.tanh(h) if kind == "mse" else m.maximum(h, 0)
    if kind == "mse":
      return m.mean((h - y) ** 2)
    z = h - h.max(axis=1, keepdims=True)
    logp = z - m.log(m.sum(m.exp(z), axis=1, keepdims=True))
    return -m.mean(m.sum(logp * y, axis=1))
  return loss


def _torch_loss(torch, kind):
  def loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
      h = h @ w + b
      if i < len(params) - 1:
        h = torch.tanh(h) if kind == "mse" else torch.relu(h)
    if kind == "mse":
      return torch.mean((h - y) ** 2)
    return torch.nn.functional.cross_entropy(h, y)
  return loss


class MLPValueAndGrad:
  """``value_and_grad`` of an MLP loss over float32 parameters: ``small`` is 16-16-16-1
  (tanh, mean squared error, batch 8), ``large`` 784-512-512-10 (relu, softmax
  cross-entropy, batch 128)."""
  params = (_backends.BACKENDS + ["torch"], MODES, ["small", "large"])
  param_names = ["backend", "mode", "size"]

  def setup(self, backend, mode, size):
    rng = np.random.default_rng(0)
    if size == "small":
      sizes, n, kind = [16, 16, 16, 1], 8, "mse"
    else:
      sizes, n, kind = [784, 512, 512, 10], 128, "xent"
    params = _mlp_params(sizes, rng)
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    if kind == "mse":
      y = rng.standard_normal((n, 1)).astype(np.float32)
    else:
      labels = rng.integers(0, 10, n)
      y = np.eye(10, dtype=np.float32)[labels]
    if backend == "numpy":
      run = (lambda: _numpy_mse_mlp(params, x, y)) if kind == "mse" else \
          (lambda: _numpy_xent_mlp(params, x, labels))
    elif backend == "torch":
      if mode != "eager":
        raise NotImplementedError("torch: eager autograd only")
      torch = _torch()
      tp = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
            for w, b in params]
      flat = [t for wb in tp for t in wb]
      tx = torch.tensor(x)
      ty = torch.tensor(y) if kind == "mse" else torch.tensor(labels)
      loss = _torch_loss(torch, kind)

      def run():
        v = loss(tp, tx, ty)
        return v, torch.autograd.grad(v, flat)
    else:
      if backend == "jax" and mode == "percall":
        raise NotImplementedError("jax has no replay: eager is its per-call path")
      m, tr, put = _fw(backend)
      p = [(put(w), put(b)) for w, b in params]
      px, py = put(x), put(y)
      f = _fw_loss(m, kind)
      vg = _differentiated(tr, f, mode)
      run = lambda: vg(p, px, py)
    self.run = run
    for _ in range(3):
      _backends.block(run()[0])

  def time_value_and_grad(self, backend, mode, size):
    return self.run()


class PerExampleGrads:
  """Per-example gradients of a 100-feature logistic-regression loss over 128 examples:
  ``vmap(grad(loss), in_axes=(None, 0, 0))`` (torch: ``torch.func.vmap(grad)``); NumPy's is
  the closed form."""
  params = (_backends.BACKENDS + ["torch"], ["eager", "jit"])
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    rng = np.random.default_rng(0)
    w = rng.standard_normal(100) * 0.1
    X = rng.standard_normal((128, 100))
    Y = (rng.random(128) > 0.5).astype(np.float64)
    if backend == "numpy":
      def run():
        p = 1 / (1 + np.exp(-(X @ w)))
        return (p - Y)[:, None] * X
    elif backend == "torch":
      if mode != "eager":
        raise NotImplementedError("torch: eager only")
      torch = _torch()
      from torch.func import grad as tgrad, vmap as tvmap
      tw, tX, tY = torch.tensor(w), torch.tensor(X), torch.tensor(Y)
      loss = lambda w, x, y: torch.nn.functional.binary_cross_entropy_with_logits(x @ w, y)
      g = tvmap(tgrad(loss), in_dims=(None, 0, 0))
      run = lambda: g(tw, tX, tY)
    else:
      m, tr, put = _fw(backend)
      tw, tX, tY = put(w), put(X), put(Y)

      def loss(w, x, y):
        z = m.dot(x, w)
        return m.logaddexp(0.0, z) - y * z
      g = tr.vmap(tr.grad(loss), in_axes=(None, 0, 0))
      if mode == "jit":
        g = tr.jit(g)
      run = lambda: g(tw, tX, tY)
    self.run = run
    for _ in range(3):
      _backends.block(run())

  def time_per_example(self, backend, mode):
    return self.run()


class SGDStep:
  """One SGD step of a 64-128-128-10 tanh MLP (float32, batch 32, squared error):
  ``value_and_grad`` and a ``tree_map`` update (torch: backward and in-place update)."""
  params = (_backends.BACKENDS + ["torch"], MODES)
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    rng = np.random.default_rng(0)
    params = _mlp_params([64, 128, 128, 10], rng)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = rng.standard_normal((32, 10)).astype(np.float32)
    lr = np.float32(0.01)
    if backend == "numpy":
      state = [params]

      def run():
        loss, grads = _numpy_mse_mlp(state[0], x, y)
        state[0] = [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(state[0], grads)]
        return loss
    elif backend == "torch":
      if mode != "eager":
        raise NotImplementedError("torch: eager only")
      torch = _torch()
      tp = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
            for w, b in params]
      flat = [t for wb in tp for t in wb]
      tx, ty = torch.tensor(x), torch.tensor(y)
      loss = _torch_loss(torch, "mse")

      def run():
        v = loss(tp, tx, ty)
        gs = torch.autograd.grad(v, flat)
        with torch.no_grad():
          for t, g in zip(flat, gs):
            t -= 0.01 * g
        return v
    else:
      if backend == "jax" and mode == "percall":
        raise NotImplementedError("jax has no replay: eager is its per-call path")
      m, tr, put = _fw(backend)
      vg = _differentiated(tr, _fw_loss(m, "mse"), "percall" if mode == "percall" else "eager")

      def step(p, x, y):
        v, g = vg(p, x, y)
        return v, tr.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)
      if mode == "jit":
        step = tr.jit(step)
      state = [[(put(w), put(b)) for w, b in params]]
      px, py = put(x), put(y)

      def run():
        v, state[0] = step(state[0], px, py)
        return v
    self.run = run
    for _ in range(3):
      _backends.block(run())

  def time_step(self, backend, mode):
    return self.run()


_FIRST = {
  "numpy": "import numpy as np; from asv_benchmarks.benchmarks import reverse as R\n"
           "R._numpy_mse_mlp(P, X, Y)",
  "nbjax": "import nbjax, nbjax.numpy as m\n"
           "v, g = nbjax.value_and_grad(R._fw_loss(m, 'mse'))(P, X, Y); float(v)",
  "jax": "import jax, jax.numpy as m\n"
         "v, g = jax.value_and_grad(R._fw_loss(m, 'mse'))(P, X, Y); float(v)",
  "torch": "import torch\n"
           "tp = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) "
           "for w, b in P]\n"
           "v = R._torch_loss(torch, 'mse')(tp, torch.tensor(X), torch.tensor(Y))\n"
           "g = torch.autograd.grad(v, [t for wb in tp for t in wb]); float(v)",
}


class FirstValueAndGrad:
  """A fresh process: import the framework, then the first eager ``value_and_grad`` of the
  small MLP (16-16-16-1, batch 8). Warm caches (numba's on disk), as a second run of a script
  finds them. The interpreter start and NumPy's import are in every backend's time."""
  params = (_backends.BACKENDS + ["torch"],)
  param_names = ["backend"]
  timeout = 120

  def setup(self, backend):
    import os
    import subprocess
    import sys
    if backend == "jax":
      _fw(backend)  # skip when not installed
    if backend == "torch":
      _torch()
    setup = ("import numpy as np; from asv_benchmarks.benchmarks import reverse as R\n"
             "rng = np.random.default_rng(0); P = R._mlp_params([16, 16, 16, 1], rng)\n"
             "X = rng.standard_normal((8, 16)).astype(np.float32)\n"
             "Y = rng.standard_normal((8, 1)).astype(np.float32)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # warm caches include Python's bytecode, as for an installed package (pip compiles it):
    # a checkout run with PYTHONDONTWRITEBYTECODE would recompile every module each time
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, "-c", setup + _FIRST[backend]]
    self.run = lambda: subprocess.run(cmd, env=env, check=True, capture_output=True)
    self.run()  # warm the caches

  def time_import_and_first_call(self, backend):
    return self.run()
