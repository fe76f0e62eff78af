"""2-D convolution, batch 32, 28x28x16 -> 28x28x32, 3x3 'SAME', NHWC/HWIO, float32: the
forward pass (``forward``) and the forward pass with both gradients, input and kernel
(``vjp``: ``vjp(conv, x, w)`` applied to a cotangent; PyTorch: ``autograd.grad``), per
backend: ``numpy`` is an im2col of ``sliding_window_view`` contracted by ``tensordot``
(forward only), ``nbjax`` and ``jax`` run ``lax.conv_general_dilated`` eagerly or under
their ``jit``, ``torch`` (when installed, 2 threads) ``conv2d`` on channels-last tensors.
"""
import numpy as np

from . import _backends

DN = ("NHWC", "HWIO", "NHWC")


def _data():
  rng = np.random.default_rng(0)
  f32 = np.float32
  return (rng.standard_normal((32, 28, 28, 16)).astype(f32),
          rng.standard_normal((3, 3, 16, 32)).astype(f32),
          rng.standard_normal((32, 28, 28, 32)).astype(f32))


class Conv2D:
  params = (_backends.BACKENDS + ["torch"], ["eager", "jit"], ["forward", "vjp"])
  param_names = ["backend", "mode", "pass_"]

  def setup(self, backend, mode, pass_):
    x, w, g = _data()
    if backend == "numpy":
      if mode == "jit" or pass_ == "vjp":
        raise NotImplementedError
      xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
      win = np.lib.stride_tricks.sliding_window_view
      self.run = lambda: np.tensordot(win(xp, (3, 3), axis=(1, 2)), w, ([3, 4, 5], [2, 0, 1]))
      return
    if backend == "torch":
      if mode == "jit":
        raise NotImplementedError
      try:
        import torch
      except ImportError:
        raise NotImplementedError("torch not installed") from None
      torch.set_num_threads(2)
      F, cl = torch.nn.functional, torch.channels_last
      tx = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=cl)
      tw = torch.from_numpy(w).permute(3, 2, 0, 1).contiguous()
      tg = torch.from_numpy(g).permute(0, 3, 1, 2).contiguous(memory_format=cl)
      if pass_ == "forward":
        self.run = lambda: F.conv2d(tx, tw, padding=1)
      else:
        tx.requires_grad_(), tw.requires_grad_()
        self.run = lambda: torch.autograd.grad(F.conv2d(tx, tw, padding=1), (tx, tw), tg)
      return
    _, put = _backends.get(backend)
    if backend == "nbjax":
      import nbjax as tr
      from nbjax import lax
    else:
      import jax as tr
      from jax import lax
    conv = lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=DN)
    if pass_ == "forward":
      f = conv
    else:
      def f(a, b, c):
        y, vjp = tr.vjp(conv, a, b)
        return y, vjp(c)
    f = tr.jit(f) if mode == "jit" else f
    args = [put(v) for v in ((x, w) if pass_ == "forward" else (x, w, g))]
    self.run = lambda: _backends.block(tr.block_until_ready(f(*args)))

  def time_conv(self, backend, mode, pass_):
    return self.run()
