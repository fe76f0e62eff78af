"""Transformations: jvp and vmap overhead on small inputs, and vmap of a linear model.

Each case runs the same computation per backend: ``nbjax`` and ``jax`` (eager, skipped when
jax is not importable) through their ``jvp``/``vmap``; ``numpy`` is the hand-written
equivalent (the derivative written out, or the batched expression), the baseline the
ratios in ``compare`` are taken against.
"""
import numpy as np

from . import _backends


def _api(backend):
  """(numpy-like module, transformation module, array constructor) for a backend."""
  m, put = _backends.get(backend)
  if backend == "nbjax":
    import nbjax
    for name in ("sin", "cos", "tanh", "dot", "stack"):
      if not hasattr(m, name):
        raise NotImplementedError(f"nbjax.numpy.{name} not available")
    return m, nbjax, put
  if backend == "jax":
    import jax
    return m, jax, put
  return m, None, put


class JvpOverhead:
  """``jvp`` of ``sin(x) * cos(x) + x`` on 0-d and 100-element float64 inputs."""
  params = (_backends.BACKENDS, [0, 100])
  param_names = ["backend", "size"]

  def setup(self, backend, size):
    m, tr, put = _api(backend)
    shape = () if size == 0 else (size,)
    x = put(np.full(shape, 0.5))
    t = put(np.ones(shape))
    if tr is None:
      def run():  # the derivative written out by hand
        s, c = np.sin(x), np.cos(x)
        return s * c + x, (c * c - s * s + 1.0) * t
    else:
      f = lambda x: m.sin(x) * m.cos(x) + x
      run = lambda: tr.jvp(f, (x,), (t,))
    self.run = run
    for _ in range(3):  # steady state: nbjax replays a staged program from the second repeat on
      _backends.block(run()[1])

  def time_jvp(self, backend, size):
    return self.run()


class VmapOverhead:
  """``vmap`` of ``sin(x) * y + x`` over a batch of 8 rows of 16 float64 (per-call cost)."""
  params = (_backends.BACKENDS,)
  param_names = ["backend"]

  def setup(self, backend):
    m, tr, put = _api(backend)
    rng = np.random.default_rng(0)
    X, Y = put(rng.standard_normal((8, 16))), put(rng.standard_normal((8, 16)))
    if tr is None:
      run = lambda: np.sin(X) * Y + X
    else:
      g = tr.vmap(lambda x, y: m.sin(x) * y + x)
      run = lambda: g(X, Y)
    self.run = run
    for _ in range(3):  # steady state: nbjax replays a staged program from the second repeat on
      _backends.block(run())

  def time_vmap(self, backend):
    return self.run()


class VmapLinearModel:
  """Forward pass ``tanh(x @ w + b)`` of a 100-feature linear model over a batch of 128
  (float64), ``n_out`` outputs: ``vmap`` of the per-example function (steady state: the same
  vmapped function called again), ``vmap_fresh`` (a new ``vmap`` every call, so every call
  traces), or a Python loop over the examples. NumPy's ``vmap``/``vmap_fresh`` is the
  hand-written batched ``tanh(X @ W + b)``."""
  params = (_backends.BACKENDS, ["vmap", "vmap_fresh", "loop"], [1, 16])
  param_names = ["backend", "impl", "n_out"]

  def setup(self, backend, impl, n_out):
    m, tr, put = _api(backend)
    rng = np.random.default_rng(0)
    X = put(rng.standard_normal((128, 100)))
    W = put(rng.standard_normal((100,) if n_out == 1 else (100, n_out)) * 0.1)
    b = put(np.full(() if n_out == 1 else (n_out,), 0.1))
    f = lambda x, w, b: m.tanh(m.dot(x, w) + b)
    if impl.startswith("vmap"):
      if tr is None:
        run = lambda: np.tanh(X @ W + b)
      elif impl == "vmap_fresh":
        run = lambda: tr.vmap(f, in_axes=(0, None, None))(X, W, b)
      else:
        g = self.vmapped = tr.vmap(f, in_axes=(0, None, None))  # (compare: guard cost)
        run = lambda: g(X, W, b)
    else:
      rows = [X[i] for i in range(128)]
      run = lambda: m.stack([f(x, W, b) for x in rows])
    self.run = run
    for _ in range(3):  # steady state: nbjax replays a staged program from the second repeat on
      _backends.block(run())

  def time_forward(self, backend, impl, n_out):
    return self.run()
