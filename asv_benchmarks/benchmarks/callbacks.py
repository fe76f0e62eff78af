"""Python callbacks from compiled code (``pure_callback``, ``experimental.io_callback``): the
cost of XLA calling back into Python, nbjax vs JAX, both under ``jit``. ``numpy`` is the
same work in plain Python (the callee called directly).
"""
import numpy as np

from . import _backends


def _callee(x):
  return np.sin(x)


class PureCallbackJit:
  """``jit(lambda x: pure_callback(np.sin, ..., x) * 2)`` on 100 float32: one host call."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]

  def setup(self, backend):
    x0 = np.linspace(-1, 1, 100).astype(np.float32)
    if backend == "numpy":
      self.run = lambda: _callee(x0) * np.float32(2)
      return
    tr, m, put = _fw(backend)
    f = tr.jit(lambda x: tr.pure_callback(_callee, tr.ShapeDtypeStruct(x.shape, x.dtype), x,
                                          vmap_method="sequential") * 2)
    x = put(x0)
    self.run = lambda: f(x)
    for _ in range(3):
      _backends.block(self.run())

  def time_call(self, backend):
    return _backends.block(self.run())


class IOCallbackLoop:
  """A jitted ``fori_loop`` of 100 steps, each calling ``io_callback`` on a float32 scalar
  (ordered: the effects run in program order)."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]

  def setup(self, backend):
    seen = []
    log = lambda v: seen.append(float(v)) or np.zeros((), np.float32)
    if backend == "numpy":
      def run():
        c = np.float32(0)
        for i in range(100):
          log(c)
          c = c + np.float32(1)
        return c
      self.run = run
      return
    tr, m, put = _fw(backend)
    if backend == "nbjax":
      from nbjax.experimental import io_callback
    else:
      from jax.experimental import io_callback
    spec = tr.ShapeDtypeStruct((), np.float32)

    def body(i, c):
      io_callback(log, spec, c, ordered=True)
      return c + 1
    f = tr.jit(lambda c: tr.lax.fori_loop(0, 100, body, c))
    c0 = put(np.float32(0))
    self.run = lambda: f(c0)
    for _ in range(3):
      _backends.block(self.run())
    seen.clear()

  def time_call(self, backend):
    return _backends.block(self.run())


def _fw(backend):
  m, put = _backends.get(backend)
  if backend == "nbjax":
    import nbjax as tr
  else:
    import jax as tr
  return tr, m, put
