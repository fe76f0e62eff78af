"""Structured control flow (``lax.fori_loop``, ``cond``, ``scan``, ``grad`` through ``scan``)
per backend: ``numpy`` and ``torch`` are the same loops written in Python (the baseline of
the ratios); ``nbjax`` and ``jax`` call their ``lax`` functions eagerly or under ``jit``.

Modes: ``reused`` (eager, the same body function on every call), ``lambda`` (eager, a new
lambda on every call: JAX retraces and recompiles), ``eager`` (the functions are defined
once), ``jit``. Backends without a mode skip it.
"""
import numpy as np

from . import _backends
from .reverse import _fw, _torch


def _python_only(backend, mode, modes):
  if backend in ("numpy", "torch") and mode not in modes:
    raise NotImplementedError(f"{backend}: a Python loop ({', '.join(modes)} only)")


class ForiLoop:
  """``fori_loop(0, 1000, body, x)`` with the 3-op body ``sin(v) * 0.5 + v`` on 100 float32."""
  params = (_backends.BACKENDS + ["torch"], ["reused", "lambda", "jit"])
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    x0 = np.linspace(-1, 1, 100).astype(np.float32)
    _python_only(backend, mode, ["reused"])
    if backend == "numpy":
      def run():
        v = x0
        for _ in range(1000):
          v = np.sin(v) * np.float32(0.5) + v
        return v
    elif backend == "torch":
      torch = _torch()
      xt = torch.tensor(x0)

      def run():
        v = xt
        for _ in range(1000):
          v = torch.sin(v) * 0.5 + v
        return v
    else:
      m, tr, put = _fw(backend)
      lax = tr.lax
      x = put(x0)

      def body(i, v):
        return m.sin(v) * 0.5 + v
      if mode == "reused":
        run = lambda: lax.fori_loop(0, 1000, body, x)
      elif mode == "lambda":
        run = lambda: lax.fori_loop(0, 1000, lambda i, v: m.sin(v) * 0.5 + v, x)
      else:
        f = tr.jit(lambda x: lax.fori_loop(0, 1000, body, x))
        run = lambda: f(x)
    self.run = run
    for _ in range(3):
      _backends.block(run())

  def time_fori_loop(self, backend, mode):
    return _backends.block(self.run())


class Cond:
  """``cond(p, lambda x: x * 2 + 1, lambda x: x - 1, x)`` on 100 float32, the predicate a
  0-d boolean array."""
  params = (_backends.BACKENDS + ["torch"], ["eager", "jit"])
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    x0 = np.linspace(-1, 2, 100).astype(np.float32)
    p0 = np.bool_(True)
    _python_only(backend, mode, ["eager"])
    if backend == "numpy":
      run = lambda: x0 * np.float32(2) + np.float32(1) if p0 else x0 - np.float32(1)
    elif backend == "torch":
      torch = _torch()
      xt, pt = torch.tensor(x0), torch.tensor(True)
      run = lambda: xt * 2 + 1 if pt else xt - 1
    else:
      m, tr, put = _fw(backend)
      lax = tr.lax
      x, p = put(x0), put(p0)
      t, f = (lambda x: x * 2 + 1), (lambda x: x - 1)
      g = lambda p, x: lax.cond(p, t, f, x)
      run = (lambda: g(p, x)) if mode == "eager" else (lambda f=tr.jit(g): f(p, x))
    self.run = run
    for _ in range(3):
      _backends.block(run())

  def time_cond(self, backend, mode):
    return _backends.block(self.run())


class Scan:
  """``scan`` of ``c -> tanh(c * 0.5 + x)`` over 1000 steps of 100 float32 (the carries
  stacked as ``ys``)."""
  params = (_backends.BACKENDS + ["torch"], ["eager", "jit"])
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    rng = np.random.default_rng(0)
    xs0 = rng.standard_normal((1000, 100)).astype(np.float32)
    c0 = np.zeros(100, np.float32)
    _python_only(backend, mode, ["eager"])
    if backend == "numpy":
      def run():
        c, ys = c0, []
        for x in xs0:
          c = np.tanh(c * np.float32(0.5) + x)
          ys.append(c)
        return c, np.stack(ys)
    elif backend == "torch":
      torch = _torch()
      xt, ct = torch.tensor(xs0), torch.tensor(c0)

      def run():
        c, ys = ct, []
        for x in xt:
          c = torch.tanh(c * 0.5 + x)
          ys.append(c)
        return c, torch.stack(ys)
    else:
      m, tr, put = _fw(backend)
      lax = tr.lax
      xs, c = put(xs0), put(c0)

      def step(c, x):
        c = m.tanh(c * 0.5 + x)
        return c, c
      g = lambda c, xs: lax.scan(step, c, xs)
      run = (lambda: g(c, xs)) if mode == "eager" else (lambda f=tr.jit(g): f(c, xs))
    self.run = run
    for _ in range(3):
      _backends.block(run()[1])

  def time_scan(self, backend, mode):
    return _backends.block(self.run()[1])


def _rnn_params(rng, n_in=16, hidden=32):
  return ((rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32),
          (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(np.float32),
          np.zeros(hidden, np.float32))


def _numpy_rnn_grad(w, u, b, xs, h0):
  """value and grads of ``sum(h_T ** 2)`` for ``h_{t+1} = tanh(h_t w + x_t u + b)``, by hand."""
  hs = [h0]
  for x in xs:
    hs.append(np.tanh(hs[-1] @ w + x @ u + b))
  loss = np.sum(hs[-1] ** 2)
  g = 2 * hs[-1]
  gw, gu, gb = np.zeros_like(w), np.zeros_like(u), np.zeros_like(b)
  for t in range(len(xs) - 1, -1, -1):
    dz = g * (1 - hs[t + 1] ** 2)
    gw += hs[t].T @ dz
    gu += xs[t].T @ dz
    gb += dz.sum(0)
    g = dz @ w.T
  return loss, (gw, gu, gb)


class ScanRNNGrad:
  """``value_and_grad`` of a 50-step tanh RNN (hidden 32, input 16, batch 8, float32) written
  with ``scan``: loss ``sum(h_T ** 2)``, gradients for the three parameters."""
  params = (_backends.BACKENDS + ["torch"], ["eager", "jit"])
  param_names = ["backend", "mode"]

  def setup(self, backend, mode):
    rng = np.random.default_rng(0)
    w, u, b = _rnn_params(rng)
    xs0 = rng.standard_normal((50, 8, 16)).astype(np.float32)
    h00 = np.zeros((8, 32), np.float32)
    _python_only(backend, mode, ["eager"])
    if backend == "numpy":
      run = lambda: _numpy_rnn_grad(w, u, b, xs0, h00)
    elif backend == "torch":
      torch = _torch()
      tp = [torch.tensor(a, requires_grad=True) for a in (w, u, b)]
      xt, ht = torch.tensor(xs0), torch.tensor(h00)

      def run():
        h = ht
        for x in xt:
          h = torch.tanh(h @ tp[0] + x @ tp[1] + tp[2])
        loss = torch.sum(h ** 2)
        return loss, torch.autograd.grad(loss, tp)
    else:
      m, tr, put = _fw(backend)
      lax = tr.lax
      params = tuple(put(a) for a in (w, u, b))
      xs, h0 = put(xs0), put(h00)

      def loss(params, xs, h0):
        w, u, b = params
        h, _ = lax.scan(lambda h, x: (m.tanh(h @ w + x @ u + b), None), h0, xs)
        return m.sum(h ** 2)
      g = tr.value_and_grad(loss)
      run = (lambda: g(params, xs, h0)) if mode == "eager" else (
          lambda f=tr.jit(g): f(params, xs, h0))
    self.run = run
    for _ in range(3):
      _backends.block(run()[0])

  def time_value_and_grad(self, backend, mode):
    return _backends.block(self.run()[0])
