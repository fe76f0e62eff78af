"""nbjax.numpy's docstrings: the rule JAX's ``NumpyDocTests.test_lax_numpy_docstrings`` checks
(aliases say "Alias of"; every other public function has Args/Returns/Examples sections), and
the Examples themselves, run as doctests against nbjax (their recorded outputs are nbjax's,
with x64 on, its default)."""
import doctest

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

ALIASES = {"abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "amax", "amin",
           "around", "bitwise_invert", "bitwise_left_shift", "bitwise_not",
           "bitwise_right_shift", "conj", "degrees", "divide", "get_printoptions", "mod", "pow",
           "printoptions", "radians", "round_", "set_printoptions"}
NO_ARGS = {"vsplit", "hsplit", "dsplit", "array_split"}
NO_EXAMPLES = {"frompyfunc", "isdtype", "promote_types"}


def _public_functions():
  for name in dir(jnp):
    if name.startswith("_") or name in ("fromfile", "fromiter"):
      continue
    obj = getattr(jnp, name)
    if isinstance(obj, type) or not callable(obj) or getattr(np, name, None) is obj:
      continue
    yield name, obj


def test_docstring_sections():
  bad = []
  for name, obj in _public_functions():
    doc = obj.__doc__ or ""
    if name in ALIASES:
      ok = "Alias of" in doc
    elif name in NO_ARGS:
      ok = True
    else:
      ok = "Args:" in doc and "Returns:" in doc and (name in NO_EXAMPLES or "Examples:" in doc)
    if not ok:
      bad.append(name)
  assert not bad, bad


def test_docstring_examples():
  if not nbjax.config.x64_enabled:
    pytest.skip("the recorded outputs are x64's")
  finder = doctest.DocTestFinder(recurse=False)
  runner = doctest.DocTestRunner()
  failed = []
  with np.printoptions(legacy=False):
    for name, obj in _public_functions():
      if "Examples:" not in (obj.__doc__ or ""):
        continue
      for test in finder.find(obj, name, globs={"jnp": jnp, "np": np, "nbjax": nbjax}):
        if runner.run(test, out=lambda s: None).failed:
          failed.append(name)
  assert not failed, failed
