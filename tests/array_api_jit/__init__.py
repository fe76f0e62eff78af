"""``nbjax.numpy`` with every function run through ``nbjax.jit``: the Array API conformance
suite's namespace for the compiled path (``ARRAY_API_TESTS_MODULE=array_api_jit`` with
``tests/`` on ``PYTHONPATH``; see ``.ci/array_api``). Test-only.

Array arguments (``nbjax`` Arrays and NumPy arrays, also inside lists, tuples and dicts) are
the jitted function's dynamic arguments; every other leaf (Python scalars, dtypes, strings,
``None``, shapes, slices) is static, so creation functions (``zeros(shape)``, ``arange(n)``)
keep working. One ``nbjax.jit`` per (function, argument structure, static values): floats
are keyed by their bits (``-0.0`` and ``0.0`` differ, as ``-nan`` and ``nan`` do), so a cached
program never sees another constant. Kept as they are: classes (dtypes, scalar types), constants, and the dtype queries
(``finfo``, ``iinfo``, ``isdtype``, ``result_type``, ``can_cast``,
``__array_namespace_info__``), whose results are Python objects. ``linalg`` and ``fft`` are
wrapped the same way.
"""
import functools
import inspect
import struct
import types

import numpy as np

import nbjax
import nbjax.numpy as _jnp
from nbjax.array import Array
from nbjax.tree_util import tree_flatten, tree_unflatten

_KEEP = {"finfo", "iinfo", "isdtype", "result_type", "can_cast", "__array_namespace_info__"}


def _dynamic(v):
  return isinstance(v, (Array, np.ndarray))


def _key(v):
  if isinstance(v, (float, complex)):  # by bits: -0.0 != 0.0, and -nan != nan
    return type(v), struct.pack("<2d", v.real, v.imag)
  if isinstance(v, (np.floating, np.complexfloating)):
    return type(v), v.tobytes()
  if isinstance(v, slice):
    return slice, _key(v.start), _key(v.stop), _key(v.step)
  return type(v), v  # unhashable static leaves raise TypeError here, naming the value


def _wrap(name, f):
  cache = {}

  @functools.wraps(f)
  def wrapped(*args, **kwargs):
    leaves, tree = tree_flatten((args, kwargs))
    dyn = [i for i, v in enumerate(leaves) if _dynamic(v)]
    key = (tree, tuple(_key(v) if not _dynamic(v) else None for v in leaves))
    fn = cache.get(key)
    if fn is None:
      const = list(leaves)

      def run(*xs):
        full = list(const)
        for i, x in zip(dyn, xs):
          full[i] = x
        a, kw = tree_unflatten(tree, full)
        return f(*a, **kw)
      fn = cache[key] = nbjax.jit(run)
    return fn(*[leaves[i] for i in dyn])
  return wrapped


def _namespace(mod, name):
  ns = types.ModuleType(name, mod.__doc__)
  for k in dir(mod):
    if k.startswith("_") and k != "__array_namespace_info__" and k != "__array_api_version__":
      continue
    v = getattr(mod, k)
    if isinstance(v, types.ModuleType):
      continue
    if callable(v) and k not in _KEEP and not inspect.isclass(v):
      v = _wrap(f"{name}.{k}", v)
    setattr(ns, k, v)
  return ns


_self = _namespace(_jnp, __name__)
globals().update({k: v for k, v in vars(_self).items() if not k.startswith("__") or k in _KEEP
                  or k == "__array_api_version__"})
linalg = _namespace(_jnp.linalg, __name__ + ".linalg")
if hasattr(_jnp, "fft"):
  fft = _namespace(_jnp.fft, __name__ + ".fft")
