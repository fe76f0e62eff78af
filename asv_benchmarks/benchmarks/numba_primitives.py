"""User primitives from numba kernels (``examples/numba_kernels.py``, made with
``nbjax.extend.numba_primitive``) against the same computation written with array ops.

Columns: ``numpy`` is the NumPy/SciPy way (``np.logaddexp``, ``scipy.special.logsumexp``,
``scipy.signal.lfilter`` for the recurrence); ``nbjax`` runs the numba primitive
(``impl=kernel``) or the same function written with ``nbjax.numpy``/``lax.scan``
(``impl=jnp``), eagerly or under ``jit``; ``jax`` always runs ``jax.numpy`` (``jax.nn``,
``jax.lax.scan``), eagerly or under ``jax.jit``. float32 throughout.
"""
import os
import sys

import numpy as np

from . import _backends

_EX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "examples")


def _ex():
  if _EX not in sys.path:
    sys.path.insert(0, _EX)
  import numba_kernels
  return numba_kernels


def _framework(backend):
  if backend == "nbjax":
    import nbjax as tr
    import nbjax.numpy as m
  else:
    _backends.get("jax")
    import jax as tr
    import jax.numpy as m
  return tr, m


class _Case:
  params = (_backends.BACKENDS, ["eager", "jit"], ["kernel", "jnp"])
  param_names = ["backend", "mode", "impl"]

  def setup(self, backend, mode, impl):
    if backend != "nbjax" and impl == "kernel":
      raise NotImplementedError("the numba kernel is nbjax's")
    if backend == "numpy" and mode == "jit":
      raise NotImplementedError("numpy has no jit")
    args = self.inputs()
    if backend == "numpy":
      f = self.numpy
    else:
      tr, m = _framework(backend)
      f = self.kernel(_ex()) if impl == "kernel" else self.ops(tr, m)
      if mode == "jit":
        f = tr.jit(f)
      put = tr.device_put
      args = [put(a) for a in args]
    self.run = lambda: f(*args)
    for _ in range(3):
      _backends.block(self.run())

  def time_call(self, backend, mode, impl):
    return _backends.block(self.run())


class Softplus(_Case):
  """``softplus(x)`` on 100,000 float32: one fused kernel vs ``logaddexp(x, 0)``."""

  def inputs(self):
    return [np.linspace(-20, 20, 100_000).astype(np.float32)]

  def numpy(self, x):
    return np.logaddexp(x, np.float32(0))

  def kernel(self, ex):
    return ex.softplus

  def ops(self, tr, m):
    return lambda x: m.logaddexp(x, 0.0)


class SoftplusMLPGrad(_Case):
  """``value_and_grad`` of a 2-hidden-layer softplus MLP (64-128-128-1, batch 128), MSE."""
  params = (["nbjax", "jax"], ["eager", "jit"], ["kernel", "jnp"])

  def inputs(self):
    r = np.random.default_rng(0)
    sizes = [64, 128, 128, 1]
    self._params = [((r.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
                     np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]
    return [r.standard_normal((128, 64)).astype(np.float32),
            r.standard_normal((128, 1)).astype(np.float32)]

  def setup(self, backend, mode, impl):
    if backend != "nbjax" and impl == "kernel":
      raise NotImplementedError("the numba kernel is nbjax's")
    tr, m = _framework(backend)
    x, y = [tr.device_put(a) for a in self.inputs()]
    params = tr.device_put(self._params)
    loss = _ex().mlp_loss if impl == "kernel" else self.ops(tr, m)
    g = tr.value_and_grad(loss)
    g = tr.jit(g) if mode == "jit" else g
    self.run = lambda: g(params, x, y)
    for _ in range(40):  # past the eager cache's staging and fusion: the steady state
      _backends.block(self.run())

  def ops(self, tr, m):
    def loss(params, x, y):
      h = x
      for w, b in params[:-1]:
        h = m.logaddexp(h @ w + b, 0.0)
      w, b = params[-1]
      return m.mean((h @ w + b - y) ** 2)
    return loss

  def time_call(self, backend, mode, impl):
    v, _ = self.run()
    return _backends.block(v)


class IIRFilter(_Case):
  """``y[t] = 0.9 * y[t-1] + x[t]`` along the last axis of (rows, steps) float32: one numba
  kernel vs a ``lax.scan`` over the steps (``scipy.signal.lfilter`` for NumPy)."""
  params = (_backends.BACKENDS, ["eager", "jit"], ["kernel", "jnp"], ["1x100000", "8x10000", "64x2000"])
  param_names = ["backend", "mode", "impl", "shape"]

  def setup(self, backend, mode, impl, shape):
    self.shape = tuple(int(v) for v in shape.split("x"))
    super().setup(backend, mode, impl)

  def time_call(self, backend, mode, impl, shape):
    return _backends.block(self.run())

  def inputs(self):
    return [np.random.default_rng(0).standard_normal(self.shape).astype(np.float32),
            np.float32(0.9)]

  def numpy(self, x, a):
    import scipy.signal
    return scipy.signal.lfilter([1.0], [1.0, -float(a)], x, axis=-1)

  def kernel(self, ex):
    return ex.iir_filter

  def ops(self, tr, m):
    def f(x, a):
      def step(acc, xt):
        acc = a * acc + xt
        return acc, acc
      _, ys = tr.lax.scan(step, m.zeros(x.shape[:-1], x.dtype), m.moveaxis(x, -1, 0))
      return m.moveaxis(ys, 0, -1)
    return f


class IIRFilterGrad(IIRFilter):
  """``grad`` of ``sum(iir_filter(x, a) ** 2)`` with respect to ``a`` (the user VJP: the
  recurrence run backwards) vs reverse mode through ``lax.scan``."""
  params = (["nbjax", "jax"], ["eager", "jit"], ["kernel", "jnp"], ["1x100000", "8x10000", "64x2000"])

  def setup(self, backend, mode, impl, shape):
    if backend != "nbjax" and impl == "kernel":
      raise NotImplementedError("the numba kernel is nbjax's")
    self.shape = tuple(int(v) for v in shape.split("x"))
    tr, m = _framework(backend)
    f = _ex().iir_filter if impl == "kernel" else self.ops(tr, m)
    g = tr.grad(lambda x, a: m.sum(f(x, a) ** 2), argnums=1)
    g = tr.jit(g) if mode == "jit" else g
    x, a = [tr.device_put(v) for v in self.inputs()]
    self.run = lambda: g(x, a)
    for _ in range(40):
      _backends.block(self.run())


class LogSumExp(_Case):
  """``logsumexp`` over the last axis of (256, 1000) float32: a ``(n)->()`` kernel vs
  max-shifted array ops (``jax.nn.logsumexp``)."""

  def inputs(self):
    return [np.random.default_rng(0).standard_normal((256, 1000)).astype(np.float32)]

  def numpy(self, x):
    import scipy.special
    return scipy.special.logsumexp(x, axis=-1)

  def kernel(self, ex):
    return ex.logsumexp

  def ops(self, tr, m):
    if tr.__name__ == "jax":
      return lambda x: tr.nn.logsumexp(x, axis=-1)

    def lse(x):
      mx = tr.lax.stop_gradient(x.max(-1, keepdims=True))
      return m.log(m.sum(m.exp(x - mx), -1)) + mx[..., 0]
    return lse
