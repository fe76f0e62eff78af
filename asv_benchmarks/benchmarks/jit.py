"""jit: per-call overhead, first-call trace+lower+compile time, steady-state throughput.

Each case runs per backend: ``nbjax.jit`` and ``jax.jit`` (skipped when jax is not
importable) side by side; ``numpy`` is the plain NumPy expression where one exists (the
baseline ``compare`` takes ratios against) and skipped for compile-time cases.

- ``JitCallOverhead``: a jitted 6-op scalar float32 function, called with the backend's own
  arrays (nbjax.Array / jax device arrays) or with NumPy 0-d arrays. An nbjax.Array caches
  its XLA device buffer on the first call, as a jax array already is one, so "own" measures
  calls with no host->device transfer in both; "numpy" pays one transfer per call.
- ``JitFirstCall``: a fresh function each time (no trace cache), traced, lowered and compiled:
  the 6-op function and an MLP step (3 dense tanh layers + mean-squared loss, float32). For
  nbjax the in-process executable cache is cleared and the disk cache disabled, as jax's
  persistent cache is off by default.
- ``JitSteadyState``: ``x * y + z`` and ``sum(sin(x))`` on 1e7 float32, compiled once.
"""
import os

import numpy as np

from . import _backends


def _jit(backend):
  if backend == "nbjax":
    import nbjax
    return nbjax.jit, lambda x: nbjax.Array(np.asarray(x))
  if backend == "jax":
    try:
      import jax
    except ImportError:
      raise NotImplementedError("jax not installed") from None
    jax.config.update("jax_enable_x64", True)
    return jax.jit, jax.device_put
  raise NotImplementedError(f"{backend}: no jit")


def _lax(backend):
  if backend == "nbjax":
    from nbjax import lax
  else:
    from jax import lax
  return lax


def _f6(lax):
  def f6(x, y):
    a = lax.sin(x)
    b = lax.mul(a, y)
    c = lax.add(b, x)
    d = lax.cos(c)
    e = lax.sub(d, y)
    return lax.mul(e, e)
  return f6


def _f6_numpy(x, y):
  e = np.cos(np.sin(x) * y + x) - y
  return e * e


def _pytree8(f6):
  """The 6-op function over a pytree argument of 8 arrays (a dict of 4 pairs): the sum of
  ``f6`` over the pairs."""
  def f(tree):
    out = None
    for k in sorted(tree):
      v = f6(*tree[k])
      out = v if out is None else out + v
    return out
  return f


class JitCallOverhead:
  """Per-call cost of a jitted 6-op scalar float32 function (2 inputs, 1 output), and of the
  same over a pytree of 8 inputs (``pytree``: ``{k: (x, y)}`` for 4 keys, 24 ops, own arrays)."""
  params = (_backends.BACKENDS, ["own", "numpy", "pytree"])
  param_names = ["backend", "inputs"]

  def setup(self, backend, inputs):
    x, y = np.array(1.5, np.float32), np.array(0.5, np.float32)
    tree = {k: (np.array(1.5 + i, np.float32), np.array(0.5 * i, np.float32))
            for i, k in enumerate("abcd")}
    if backend == "numpy":
      if inputs == "pytree":
        self.f, self.args = _pytree8(_f6_numpy), (tree,)
      else:
        self.f, self.args = _f6_numpy, (x, y)
      return
    jit, put = _jit(backend)
    f6 = _f6(_lax(backend))
    if inputs == "pytree":
      self.f = jit(_pytree8(f6))
      self.args = ({k: (put(a), put(b)) for k, (a, b) in tree.items()},)
    else:
      self.f = jit(f6)
      self.args = (put(x), put(y)) if inputs == "own" else (x, y)
    _backends.block(self.f(*self.args))

  def time_call(self, backend, inputs):
    return _backends.block(self.f(*self.args))


def _mlp_step(m):
  def step(params, x, y):
    h = x
    for w, b in params[:-1]:
      h = m.tanh(m.dot(h, w) + b)
    w, b = params[-1]
    out = m.dot(h, w) + b
    d = out - y
    return m.mean(d * d)
  return step


class JitFirstCall:
  """Trace + lower + compile + first run of a fresh function."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]
  number = 1
  repeat = 7

  def setup(self, backend):
    self.jit, self.put = _jit(backend)
    self.backend = backend
    if backend == "nbjax":
      os.environ["NBJAX_DISABLE_COMPILE_CACHE"] = "1"
      from nbjax import xla
      self.clear = xla.clear_compile_cache
      import nbjax.numpy as m
      for name in ("tanh", "dot", "mean"):
        if not hasattr(m, name):
          raise NotImplementedError(f"nbjax.numpy.{name} not available")
    else:
      import jax.numpy as m
      self.clear = lambda: None
    self.m = m
    self.lax = _lax(backend)
    rng = np.random.default_rng(0)
    sizes = [(64, 128), (128, 128), (128, 10)]
    self.params = [(self.put(rng.standard_normal(s).astype(np.float32) * 0.1),
                    self.put(np.zeros(s[1], np.float32))) for s in sizes]
    self.x = self.put(rng.standard_normal((32, 64)).astype(np.float32))
    self.y = self.put(rng.standard_normal((32, 10)).astype(np.float32))
    self.s = self.put(np.array(1.5, np.float32))

  def teardown(self, backend):
    if backend == "nbjax":
      os.environ.pop("NBJAX_DISABLE_COMPILE_CACHE", None)

  def time_6op(self, backend):
    self.clear()
    _backends.block(self.jit(_f6(self.lax))(self.s, self.s))

  def time_mlp_step(self, backend):
    self.clear()
    _backends.block(self.jit(_mlp_step(self.m))(self.params, self.x, self.y))


class JitSteadyState:
  """Throughput of compiled elementwise / reduction work on 1e7 float32."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]

  def setup(self, backend):
    rng = np.random.default_rng(0)
    n = 10_000_000
    x, y, z = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    if backend == "numpy":
      self.fma = lambda: x * y + z
      self.sumsin = lambda: np.sum(np.sin(x))
      return
    jit, put = _jit(backend)
    lax = _lax(backend)
    fma = jit(lambda a, b, c: lax.add(lax.mul(a, b), c))
    sumsin = jit(lambda a: lax.reduce_sum(lax.sin(a), (0,)) if backend == "nbjax"
                 else lax.reduce_sum_p.bind(lax.sin(a), axes=(0,)))
    xa, ya, za = put(x), put(y), put(z)
    self.fma = lambda: fma(xa, ya, za)
    self.sumsin = lambda: sumsin(xa)
    _backends.block(self.fma())
    _backends.block(self.sumsin())

  def time_x_mul_y_add_z(self, backend):
    return _backends.block(self.fma())

  def time_sum_sin(self, backend):
    return _backends.block(self.sumsin())
