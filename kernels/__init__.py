"""numba kernels for nbjax's eager backends. Imports numba and numpy only, never nbjax."""


class Lazy(dict):
  """A table of kernels, each generated on its first lookup (``build(key)``, with the kernels
  it calls), so that importing a kernel module generates and wraps none of them."""

  def __init__(self, keys, build):
    super().__init__()
    self._keys, self._build = frozenset(keys), build

  def __missing__(self, key):
    if key not in self._keys:
      raise KeyError(key)
    k = self[key] = self._build(key)
    return k


def _load_cython_blas():
  """Load SciPy's ``cython_blas`` extension alone, before numba looks for it.

  The first time a process compiles or loads any numba kernel, numba checks for BLAS by
  importing ``scipy.linalg.cython_blas``, which runs all of ``scipy.linalg``'s package
  initialisation: 0.25-0.35 s of a fresh process's first eager call on these machines. The
  extension module needs none of that package, so it is loaded by itself under its own name:
  numba's check (and a later ``import scipy.linalg``) then finds it in ``sys.modules``.
  Without SciPy, or with an unexpected layout, nothing is done and numba behaves as before.
  """
  import importlib.machinery
  import importlib.util
  import os
  import sys
  name = "scipy.linalg.cython_blas"
  if name in sys.modules or "scipy.linalg" in sys.modules:
    return
  try:
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
      return
    folder = os.path.join(list(spec.submodule_search_locations)[0], "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
      path = os.path.join(folder, "cython_blas" + suffix)
      if os.path.exists(path):
        ext = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(ext)
        ext.loader.exec_module(module)
        sys.modules[name] = module
        return
  except Exception:  # noqa: BLE001  (an optimisation only: numba imports SciPy itself)
    sys.modules.pop(name, None)


_load_cython_blas()
