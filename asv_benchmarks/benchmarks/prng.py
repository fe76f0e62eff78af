"""``nbjax.random`` sampling throughput: 1e8 Bernoulli draws (1e7 under ``compare --quick``)
and 1e8 raw 32-bit words, against NumPy's default generator making the same number of draws
(``rng.random(n) < p``, ``rng.integers(0, 2**32, n, uint32)``) and JAX's eager sampler; the
distribution samplers at small and medium sizes (``Samplers``)."""
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


class Samplers:
  """Distribution samplers eagerly at 10 and 10,000 draws (float32): gamma, beta, poisson,
  binomial, randint and t, against NumPy's default generator and JAX (whose samplers run as
  jitted programs; nbjax replays a staged program per repeated signature)."""
  params = (_backends.BACKENDS, ["gamma", "beta", "poisson", "binomial", "randint", "t"],
            [10, 10_000])
  param_names = ["backend", "sampler", "n"]

  def setup(self, backend, sampler, n):
    _backends.get(backend)
    if backend == "numpy":
      rng = np.random.default_rng(0)
      self.f = {"gamma": lambda: rng.standard_gamma(2.5, n, np.float32),
                "beta": lambda: rng.beta(2.0, 3.0, n),
                "poisson": lambda: rng.poisson(3.0, n),
                "binomial": lambda: rng.binomial(20, 0.3, n),
                "randint": lambda: rng.integers(0, 10, n),
                "t": lambda: rng.standard_t(3.0, n)}[sampler]
    else:
      if backend == "nbjax":
        import nbjax.random as R
      else:
        import jax.random as R
      k, f32 = R.key(0), np.float32
      self.f = {"gamma": lambda: R.gamma(k, 2.5, (n,), f32),
                "beta": lambda: R.beta(k, 2.0, 3.0, (n,), f32),
                "poisson": lambda: R.poisson(k, 3.0, (n,)),
                "binomial": lambda: R.binomial(k, 20, 0.3, (n,), f32),
                "randint": lambda: R.randint(k, (n,), 0, 10),
                "t": lambda: R.t(k, 3.0, (n,), f32)}[sampler]
    for _ in range(3):  # (a signature's third call replays)
      _backends.block(self.f())

  def time_sample(self, backend, sampler, n):
    return _backends.block(self.f())
