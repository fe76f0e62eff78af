"""``nbjax.scipy``: SciPy's API on nbjax arrays, as ``jax.scipy``.

Pipeline position: above ``nbjax.numpy`` and ``nbjax.lax``: every function composes their
operations (and the special-function primitives of ``nbjax/lax/special.py``), so each one
runs eagerly, under every transformation and under ``jit``. Submodules load on first
attribute access, as JAX's, so ``import nbjax`` does not pay for them.
"""
import importlib

_SUBMODULES = ("cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize",
               "signal", "sparse", "spatial", "special", "stats")
__all__ = list(_SUBMODULES)


def __getattr__(name):
  if name in _SUBMODULES:
    return importlib.import_module(f"{__name__}.{name}")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
  return sorted(set(globals()) | set(_SUBMODULES))
