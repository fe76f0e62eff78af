"""Windowed reductions: a 2x2 stride-2 max-pool (NHWC, batch 32, 28x28x32 float32) and its
gradient (a VJP with a cotangent of ones), eager, per backend: NumPy (reshape + max, and
the first-maximum mask for the gradient), nbjax and JAX (``lax.reduce_window`` with
``lax.max``; the gradient is ``select_and_scatter_add``), PyTorch
(``max_pool2d`` on a channels-last tensor, ``torch.set_num_threads(2)``)."""
import numpy as np

from . import _backends
from .reverse import _torch

SHAPE = (32, 28, 28, 32)


class MaxPool:
  """2x2 stride-2 max-pool of NHWC float32 (32, 28, 28, 32): forward and gradient."""
  params = (_backends.BACKENDS + ["torch"], ["forward", "grad"])
  param_names = ["backend", "what"]

  def setup(self, backend, what):
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    ct = np.ones((32, 14, 14, 32), np.float32)
    if backend == "torch":
      torch = _torch()
      tx = torch.tensor(x).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
      tct = torch.tensor(ct).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
      pool = torch.nn.functional.max_pool2d
      if what == "forward":
        self.f = lambda: pool(tx, 2, 2)
      else:
        tx.requires_grad_(True)
        self.f = lambda: torch.autograd.grad(pool(tx, 2, 2), tx, tct)[0]
    elif backend == "numpy":
      def fwd():
        return x.reshape(32, 14, 2, 14, 2, 32).max(axis=(2, 4))

      def grad():  # the first maximum of each window gets the cotangent
        w = x.reshape(32, 14, 2, 14, 2, 32).transpose(0, 1, 3, 5, 2, 4).reshape(32, 14, 14, 32, 4)
        first = np.argmax(w, axis=-1)
        g = (np.arange(4) == first[..., None]) * ct[..., None]
        return g.reshape(32, 14, 14, 32, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(SHAPE)
      self.f = fwd if what == "forward" else grad
    else:
      m, put = _backends.get(backend)
      if backend == "nbjax":
        import nbjax as tr
        from nbjax import lax
      else:
        import jax as tr
        from jax import lax
      jx, jct = put(x), put(ct)
      pool = lambda v: lax.reduce_window(v, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
      if what == "forward":
        self.f = lambda: pool(jx)
      else:
        self.f = lambda: tr.vjp(pool, jx)[1](jct)[0]
    _backends.block(self.f())

  def time_maxpool(self, backend, what):
    return _backends.block(self.f())
