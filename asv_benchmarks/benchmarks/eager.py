"""Eager execution: per-op dispatch on tiny arrays and throughput on 1e7-element arrays."""
import numpy as np

from . import _backends


class Dispatch:
  """Per-op cost of add and sin on 0-d and 100-element float32 arrays."""
  params = (_backends.BACKENDS, ["add", "sin"], [0, 100])
  param_names = ["backend", "op", "size"]

  def setup(self, backend, op, size):
    m, put = _backends.get(backend)
    shape = () if size == 0 else (size,)
    self.x = put(np.full(shape, 0.5, np.float32))
    self.f = m.add if op == "add" else m.sin
    self.args = (self.x, self.x) if op == "add" else (self.x,)
    _backends.block(self.f(*self.args))

  def time_op(self, backend, op, size):
    return _backends.block(self.f(*self.args))


class LayerDispatch:
  """Per-op cost of a small MLP layer's ops on float32: a bias add ``(8, 16) + (16,)`` (rank
  promotion and broadcasting) and a matmul ``(8, 16) @ (16, 16)``."""
  params = (_backends.BACKENDS, ["bias_add", "matmul"])
  param_names = ["backend", "op"]

  def setup(self, backend, op):
    m, put = _backends.get(backend)
    rng = np.random.default_rng(0)
    x = put(rng.standard_normal((8, 16)).astype(np.float32))
    other = put(rng.standard_normal((16,) if op == "bias_add" else (16, 16)).astype(np.float32))
    self.f, self.args = (m.add if op == "bias_add" else m.matmul), (x, other)
    _backends.block(self.f(*self.args))

  def time_op(self, backend, op):
    return _backends.block(self.f(*self.args))


class Large:
  """``x*y+z`` and ``sum(sin(x))`` on 1e7 float32."""
  params = (_backends.BACKENDS, ["xy_plus_z", "sum_sin"])
  param_names = ["backend", "expr"]
  number = 1
  repeat = (3, 10, 20.0)

  def setup(self, backend, expr):
    m, put = _backends.get(backend)
    rng = np.random.default_rng(0)
    self.x, self.y, self.z = (put(rng.standard_normal(10**7, dtype=np.float32)) for _ in range(3))
    self.m = m
    self.time_expr(backend, expr)

  def time_expr(self, backend, expr):
    m, x = self.m, self.x
    r = x * self.y + self.z if expr == "xy_plus_z" else m.sum(m.sin(x))
    _backends.block(r)


class LargeFusedReference:
  """The floor for ``Large`` ``xy_plus_z``: one hand-written numba loop into a pooled output
  (what eager fusion, ``nbjax.fusion``, generates for the chain)."""
  number = 1
  repeat = (3, 10, 20.0)

  def setup(self):
    import numba
    from nbjax import array
    rng = np.random.default_rng(0)
    self.x, self.y, self.z = (rng.standard_normal(10**7, dtype=np.float32) for _ in range(3))
    self.empty = array.empty

    @numba.njit(nogil=True)
    def k(x, y, z, o):
      for i in range(o.size):
        o[i] = x[i] * y[i] + z[i]
    self.k = k
    self.time_xy_plus_z()

  def time_xy_plus_z(self):
    o = self.empty(self.x.shape, np.float32)
    self.k(self.x, self.y, self.z, o)
    return o


class Matmul:
  """1024x1024 float32 matmul."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]
  number = 1

  def setup(self, backend):
    m, put = _backends.get(backend)
    rng = np.random.default_rng(0)
    self.a, self.b = (put(rng.standard_normal((1024, 1024), dtype=np.float32)) for _ in range(2))
    self.m = m
    self.time_matmul(backend)

  def time_matmul(self, backend):
    return _backends.block(self.m.matmul(self.a, self.b))
