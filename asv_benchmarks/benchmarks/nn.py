"""Library activations eagerly (``nn.relu``, ``softmax``, ``gelu``...) on a (256, 1024)
float32 batch: nbjax.nn (a composition of eager kernels), JAX's jax.nn, and the NumPy
formula."""
import numpy as np

from . import _backends


def _np_softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _np_log_softmax(x):
  s = x - x.max(-1, keepdims=True)
  return s - np.log(np.exp(s).sum(-1, keepdims=True))


def _np_gelu(x):
  c, h = np.float32(np.sqrt(2 / np.pi)), np.float32(0.5)
  return x * (h * (np.float32(1) + np.tanh(c * (x + np.float32(0.044715) * (x * x * x)))))


def _np_logsumexp(x):
  m = x.max(-1, keepdims=True)
  return np.log(np.exp(x - m).sum(-1)) + m[..., 0]


_NUMPY = {"relu": lambda x: np.maximum(x, np.float32(0)), "softmax": _np_softmax,
          "log_softmax": _np_log_softmax, "gelu": _np_gelu,
          "silu": lambda x: x / (np.float32(1) + np.exp(-x)), "logsumexp": _np_logsumexp}


class Activations:
  """One activation on a (256, 1024) float32 batch (logsumexp over the last axis)."""
  params = (_backends.BACKENDS, sorted(_NUMPY))
  param_names = ["backend", "fn"]

  def setup(self, backend, fn):
    _, put = _backends.get(backend)
    self.x = put(np.random.default_rng(0).standard_normal((256, 1024), dtype=np.float32))
    if backend == "numpy":
      self.f = _NUMPY[fn]
    else:
      nn = __import__("nbjax.nn" if backend == "nbjax" else "jax.nn", fromlist=["nn"])
      f = getattr(nn, fn)
      self.f = (lambda x: f(x, axis=-1)) if fn == "logsumexp" else f
    _backends.block(self.f(self.x))

  def time_fn(self, backend, fn):
    return _backends.block(self.f(self.x))
