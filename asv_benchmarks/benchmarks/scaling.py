"""Eager speed at every size: one representative of each family of work, from 1 to 10^8
float32 elements in decades (capped per family by memory and run time), NumPy, nbjax, JAX
(eager) and PyTorch (its default threads) side by side.

``Scaling`` times the elementwise, reduction, scan, indexing, copy and sort families on
``size`` elements (2-D cases use a near-square ``(r, c)`` shape of that size, ``*_rows10``
rows of 10, as a batch's logits); ``ScalingMatmul``
an ``n x n`` matmul. ``python -m asv_benchmarks.compare --filter scaling`` prints each case's
ratio to the fastest peer; ``python -m asv_benchmarks.plot_scaling`` draws time per element
against size.
"""
import numpy as np

from . import _backends

SIZES = [10**k for k in range(9)]
FAMILIES = ["add", "mul_add", "tanh", "sum", "sum_axis0", "sum_axis1", "sum_rows10", "max",
            "argmax", "argmax_rows10", "cumsum", "gather", "scatter_add", "transpose", "sort"]
# the largest size each family runs at (memory: four systems' inputs and outputs side by
# side; time: NumPy's np.add.at and every sort take seconds at 10^8)
CAP = {"scatter_add": 10**7, "sort": 10**7, "gather": 10**7, "cumsum": 10**8}
BACKENDS = _backends.BACKENDS + ["torch"]


def _shape2(n):
  r = 1 << (max(n.bit_length() - 1, 0) // 2)  # a power of two near sqrt(n)
  r = max(1, min(r, n))
  while n % r:
    r //= 2
  return r, n // r


def _torch():
  try:
    import torch
  except ImportError:
    raise NotImplementedError("torch not installed") from None
  return torch


def _ops(backend):
  """family -> f(*inputs) for one backend."""
  if backend == "torch":
    t = _torch()
    return {
        "add": lambda x, y: x + y, "mul_add": lambda x, y: x * y + x, "tanh": t.tanh,
        "sum": t.sum, "sum_axis0": lambda x: t.sum(x, 0), "sum_axis1": lambda x: t.sum(x, 1),
        "sum_rows10": lambda x: t.sum(x, 1), "argmax_rows10": lambda x: t.argmax(x, 1),
        "max": t.max, "argmax": t.argmax, "cumsum": lambda x: t.cumsum(x, 0),
        "gather": lambda x, i: x[i], "scatter_add": lambda x, i, v: x.index_add(0, i, v),
        "transpose": lambda x: x.T.contiguous(), "sort": lambda x: t.sort(x)[0]}
  m, _ = _backends.get(backend)
  if backend == "numpy":
    def scatter_add(x, i, v):
      out = x.copy()
      np.add.at(out, i, v)
      return out
    transpose = lambda x: np.ascontiguousarray(x.T)
  else:
    scatter_add = lambda x, i, v: x.at[i].add(v)
    transpose = lambda x: x.T
  return {
      "add": lambda x, y: x + y, "mul_add": lambda x, y: x * y + x, "tanh": m.tanh,
      "sum": m.sum, "sum_axis0": lambda x: m.sum(x, axis=0),
      "sum_axis1": lambda x: m.sum(x, axis=1), "sum_rows10": lambda x: m.sum(x, axis=1),
      "argmax_rows10": lambda x: m.argmax(x, axis=1), "max": m.max, "argmax": m.argmax,
      "cumsum": m.cumsum, "gather": lambda x, i: x[i], "scatter_add": scatter_add,
      "transpose": transpose, "sort": m.sort}


def _put(backend):
  if backend == "torch":
    t = _torch()
    return lambda a: t.from_numpy(np.ascontiguousarray(a))
  return _backends.get(backend)[1]


def _inputs(family, n, rng):
  x = rng.standard_normal(n, dtype=np.float32)
  if family in ("add", "mul_add"):
    return x, rng.standard_normal(n, dtype=np.float32)
  if family in ("sum_axis0", "sum_axis1", "transpose"):
    return (x.reshape(_shape2(n)),)
  if family.endswith("_rows10"):  # (a batch's logits: rows of 10 classes)
    return (x.reshape(-1, 10) if n >= 10 else x.reshape(1, n),)
  if family == "gather":
    return x, rng.integers(0, n, n)
  if family == "scatter_add":
    return x, rng.integers(0, n, n), rng.standard_normal(n, dtype=np.float32)
  return (x,)


class Scaling:
  """One family's operation on ``size`` float32 elements."""
  params = (BACKENDS, FAMILIES, SIZES)
  param_names = ["backend", "family", "size"]
  timeout = 300

  def setup(self, backend, family, size):
    if size > CAP.get(family, 10**8):
      raise NotImplementedError("above this family's size cap")
    put = _put(backend)
    self.args = [put(a) for a in _inputs(family, size, np.random.default_rng(0))]
    self.f = _ops(backend)[family]
    _backends.block(self.f(*self.args))

  def time_op(self, backend, family, size):
    return _backends.block(self.f(*self.args))


class ScalingMatmul:
  """``a @ b``, both ``n x n`` float32."""
  params = (BACKENDS, [8, 16, 32, 64, 128, 256, 512, 1024, 2048])
  param_names = ["backend", "n"]
  timeout = 300

  def setup(self, backend, n):
    put = _put(backend)
    rng = np.random.default_rng(0)
    self.a, self.b = (put(rng.standard_normal((n, n), dtype=np.float32)) for _ in range(2))
    _backends.block(self.time_matmul(backend, n))

  def time_matmul(self, backend, n):
    return _backends.block(self.a @ self.b)
