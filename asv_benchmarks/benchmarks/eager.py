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


def _softmax_np(m, x, a, i=None):
  e = m.exp(x - x.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


_SMALL = {  # op: (nbjax/jax/numpy call, torch call) on x: float32[10], a: float32[8, 8],
    # i: int32[10]
    "index_int": (lambda m, x, a, i: x[3], lambda t, x, a, i: x[3]),
    "slice": (lambda m, x, a, i: x[2:5], lambda t, x, a, i: x[2:5]),
    "new_axis": (lambda m, x, a, i: x[None], lambda t, x, a, i: x[None]),
    "reshape": (lambda m, x, a, i: a.reshape(64), lambda t, x, a, i: a.reshape(64)),
    "transpose": (lambda m, x, a, i: a.T, lambda t, x, a, i: a.T),
    "zeros": (lambda m, x, a, i: m.zeros(10), lambda t, x, a, i: t.zeros(10)),
    "arange": (lambda m, x, a, i: m.arange(10), lambda t, x, a, i: t.arange(10)),
    "where_scalar": (lambda m, x, a, i: m.where(x > 0.5, x, 0.0),
                     lambda t, x, a, i: t.where(x > 0.5, x, 0.0)),
    "matvec": (lambda m, x, a, i: a @ x[:8], lambda t, x, a, i: a @ x[:8]),
    "concatenate": (lambda m, x, a, i: m.concatenate([x, x]), lambda t, x, a, i: t.cat([x, x])),
    "max_keepdims": (lambda m, x, a, i: m.max(a, axis=1, keepdims=True),
                     lambda t, x, a, i: t.amax(a, dim=1, keepdim=True)),
    "softmax": (_softmax_np, lambda t, x, a, i: t.softmax(x, -1)),
    "at_add": (lambda m, x, a, i: _at_add(m, x), lambda t, x, a, i: _at_add(t, x)),
    "relu": (lambda m, x, a, i: m.maximum(x, 0.0), lambda t, x, a, i: t.relu(x)),
    "floordiv_int": (lambda m, x, a, i: i // 3, lambda t, x, a, i: i // 3),
    "mod_int": (lambda m, x, a, i: i % 3, lambda t, x, a, i: i % 3),
    "bool_mask": (lambda m, x, a, i: x[x > 0.5], lambda t, x, a, i: x[x > 0.5]),
    "hypot": (lambda m, x, a, i: m.hypot(x, x), lambda t, x, a, i: t.hypot(x, x)),
    "einsum_rows": (lambda m, x, a, i: m.einsum("ij,ij->i", a, a),
                    lambda t, x, a, i: t.einsum("ij,ij->i", a, a)),
    "eye": (lambda m, x, a, i: m.eye(8), lambda t, x, a, i: t.eye(8)),
    "vector_dot": (lambda m, x, a, i: m.dot(x, x), lambda t, x, a, i: t.dot(x, x)),
    "sign": (lambda m, x, a, i: m.sign(x), lambda t, x, a, i: t.sign(x)),
    "diagonal": (lambda m, x, a, i: m.diagonal(a), lambda t, x, a, i: t.diagonal(a)),
    "transpose_fn": (lambda m, x, a, i: m.transpose(a), lambda t, x, a, i: t.transpose(a, 0, 1)),
}


def _at_add(m, x):
  """``x.at[3].add(x[3])``; NumPy and PyTorch: a copy updated in place."""
  if hasattr(x, "at"):
    return x.at[3].add(x[3])
  out = x.copy() if m is np else x.clone()
  out[3] += x[3]
  return out


class SmallCalls:
  """Per-call cost of the small calls eager code makes most (issue 14's small sizes):
  indexing, reshapes, creation, where, a matrix-vector product, a join, a keepdims reduction,
  a softmax, a point update (``.at[3].add``), a relu, integer floor division and modulo by a
  Python int, a boolean mask, hypot, row-wise dot products (einsum) and an identity matrix, on
  float32[10], int32[10] and float32[8, 8]. ``softmax`` is JAX's composition for
  nbjax/jax/numpy (``nn.softmax`` for nbjax and jax) and PyTorch's fused op."""
  params = (_backends.BACKENDS + ["torch"], list(_SMALL))
  param_names = ["backend", "op"]

  def setup(self, backend, op):
    rng = np.random.default_rng(0)
    x, a = rng.random(10, np.float32), rng.random((8, 8), np.float32)
    i = rng.integers(0, 100, 10).astype(np.int32)
    if backend == "torch":
      try:
        import torch
      except ImportError:
        raise NotImplementedError("torch not installed") from None
      f, m, x, a, i = _SMALL[op][1], torch, torch.tensor(x), torch.tensor(a), torch.tensor(i)
    else:
      m, put = _backends.get(backend)
      f, x, a, i = _SMALL[op][0], put(x), put(a), put(i)
      if op == "softmax" and backend != "numpy":
        nn = __import__(f"{backend}.nn", fromlist=["softmax"])
        f = lambda m, x, a, i: nn.softmax(x)
    self.run = lambda: f(m, x, a, i)
    _backends.block(self.run())

  def time_call(self, backend, op):
    return _backends.block(self.run())


def _lse_np(m, x):
  mx = x.max(axis=1, keepdims=True)
  return m.log(m.exp(x - mx).sum(axis=1)) + mx[:, 0]


_COMPOSITES = {  # op: (numpy call, nbjax/jax call given the backend's nn, torch call)
    "logsumexp": (_lse_np, lambda m, nn, x: nn.logsumexp(x, axis=1),
                  lambda t, x: t.logsumexp(x, 1)),
    "softmax": (lambda m, x: _softmax_np(m, x, None), lambda m, nn, x: nn.softmax(x, axis=1),
                lambda t, x: t.softmax(x, 1)),
    "norm": (lambda m, x: m.linalg.norm(x, axis=1), lambda m, nn, x: m.linalg.norm(x, axis=1),
             lambda t, x: t.linalg.norm(x, dim=1)),
    "var": (lambda m, x: m.var(x, axis=1), lambda m, nn, x: m.var(x, axis=1),
            lambda t, x: t.var(x, 1, correction=0)),
    "argsort": (lambda m, x: m.argsort(x, axis=1, kind="stable"),
                lambda m, nn, x: m.argsort(x, axis=1), lambda t, x: t.sort(x, dim=1, stable=True)[1]),
    "take_along_axis": (lambda m, x: m.take_along_axis(x, x.argmax(1)[:, None], 1),
                        lambda m, nn, x: m.take_along_axis(x, m.argmax(x, 1)[:, None], 1),
                        lambda t, x: t.take_along_dim(x, t.argmax(x, 1)[:, None], 1)),
    "sum_rows10": (lambda m, x: x.reshape(-1, 10).sum(1), lambda m, nn, x: x.reshape(-1, 10).sum(1),
                   lambda t, x: x.reshape(-1, 10).sum(1)),
    "gelu": (lambda m, x: 0.5 * x * (1 + m.tanh(0.7978846 * (x + 0.044715 * x ** 3))),
             lambda m, nn, x: nn.gelu(x), lambda t, x: t.nn.functional.gelu(x, approximate="tanh")),
    "clip": (lambda m, x: m.clip(x, -1.0, 1.0), lambda m, nn, x: m.clip(x, -1.0, 1.0),
             lambda t, x: t.clamp(x, -1.0, 1.0)),
    "outer_bcast": (lambda m, x: x[:, :1] * x[:1, :], lambda m, nn, x: x[:, :1] * x[:1, :],
                    lambda t, x: x[:, :1] * x[:1, :]),
    "minus_col_mean": (lambda m, x: x - x.mean(1, keepdims=True),
                       lambda m, nn, x: x - x.mean(1, keepdims=True),
                       lambda t, x: x - x.mean(1, keepdim=True)),
    "cumsum_rows10": (lambda m, x: m.cumsum(x.reshape(-1, 10), 1),
                      lambda m, nn, x: m.cumsum(x.reshape(-1, 10), 1),
                      lambda t, x: t.cumsum(x.reshape(-1, 10), 1)),
}


class Composites:
  """jnp/nn functions users compose every model from, on a float32 (1000, 100) batch (rows
  of 100; ``*_rows10``: the same data as rows of 10): one call each, side by side."""
  params = (_backends.BACKENDS + ["torch"], list(_COMPOSITES))
  param_names = ["backend", "op"]

  def setup(self, backend, op):
    x = np.random.default_rng(0).standard_normal((1000, 100)).astype(np.float32)
    f_np, f_jx, f_t = _COMPOSITES[op]
    if backend == "torch":
      try:
        import torch
      except ImportError:
        raise NotImplementedError("torch not installed") from None
      x = torch.from_numpy(x)
      self.run = lambda: f_t(torch, x)
    elif backend == "numpy":
      self.run = lambda: f_np(np, x)
    else:
      m, put = _backends.get(backend)
      x, nn = put(x), __import__(f"{backend}.nn", fromlist=["softmax"])
      self.run = lambda: f_jx(m, nn, x)
    _backends.block(self.run())

  def time_call(self, backend, op):
    return _backends.block(self.run())
