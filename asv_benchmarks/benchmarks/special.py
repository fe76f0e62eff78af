"""Special functions eagerly on 100,000 float64 elements: nbjax.scipy.special (numba kernels)
against scipy.special (the "numpy" column) and jax.scipy.special."""
import numpy as np

from . import _backends

_CASES = {"gammainc": 2, "betainc": 3, "i0e": 1, "zeta": 2, "logsumexp": 1}


def _special(backend):
  if backend == "numpy":
    from scipy import special
    return special
  _backends.get(backend)  # (skips jax when it is not installed)
  if backend == "nbjax":
    from nbjax.scipy import special
    return special
  from jax.scipy import special
  return special


class Special:
  """One call of each function (logsumexp: over the rows of 100 x 1,000)."""
  params = (_backends.BACKENDS, list(_CASES))
  param_names = ["backend", "fn"]

  def setup(self, backend, fn):
    _, put = _backends.get(backend)
    rng = np.random.default_rng(0)
    a, x, u = rng.uniform(0.5, 10, 10**5), rng.uniform(0.1, 12, 10**5), rng.uniform(0.01, 0.99, 10**5)
    args = {"gammainc": (a, x), "betainc": (a, x, u), "i0e": (x,), "zeta": (a + 1.5, x),
            "logsumexp": (x.reshape(100, 1000),)}[fn]
    self.args = tuple(put(v) for v in args)
    f = getattr(_special(backend), fn)
    self.f = (lambda v: f(v, axis=1)) if fn == "logsumexp" else f
    _backends.block(self.f(*self.args))

  def time_call(self, backend, fn):
    return _backends.block(self.f(*self.args))
