"""``nbjax.random`` sampling throughput: 1e8 Bernoulli draws (1e7 under ``compare --quick``)
and 1e8 raw 32-bit words, against NumPy's default generator making the same number of draws
(``rng.random(n) < p``, ``rng.integers(0, 2**32, n, uint32)``) and JAX's eager sampler."""
import os

import numpy as np

from . import _backends


def _n():
  return 10**7 if os.environ.get("NBJAX_BENCH_QUICK") else 10**8


class Sample:
  """``bernoulli(key, 1e-10, (n,))`` (float64 draws) and ``bits(key, (n,), uint32)``."""
  params = (_backends.BACKENDS, ["bernoulli", "bits"])
  param_names = ["backend", "sampler"]
  number = 1
  repeat = (3, 5, 60.0)

  def setup(self, backend, sampler):
    _backends.get(backend)
    self.n = _n()
    if backend == "numpy":
      rng = np.random.default_rng(0)
      self.f = ((lambda: rng.random(self.n) < 1e-10) if sampler == "bernoulli" else
                (lambda: rng.integers(0, 2**32, size=self.n, dtype=np.uint32)))
    else:
      if backend == "nbjax":
        import nbjax.random as R
      else:
        import jax.random as R
      k = R.PRNGKey(0)
      self.f = ((lambda: R.bernoulli(k, 1e-10, (self.n,))) if sampler == "bernoulli" else
                (lambda: R.bits(k, (self.n,), np.uint32)))
    _backends.block(self.f())

  def time_sample(self, backend, sampler):
    return _backends.block(self.f())
