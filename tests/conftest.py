"""Test-session switches.

``NBJAX_REPLAY_CHECK=1``: every top-level ``nbjax.vmap`` and ``nbjax.value_and_grad`` (so
``grad`` too) call runs three times with the eager cache's guard (``guards``,
``fixed_structure``) bypassed, so the second call replays the staged program
(``nbjax/eager_cache.py``) and the third its fused build (``FUSE_AFTER`` is 1), and both must
equal the first, per-call result (vmap's trace, grad's tape) exactly (dtype, shape, values);
every replay of a library composite (``eager_cache.staged``: jnp's, nn's, random's samplers)
is compared with its per-call run the same way.
``tests/test_eager_cache.py`` runs the vmap and jvp suites this way, ``tests/test_grad.py``
the reverse-mode ones. Tests marked ``needs_guard`` check the guard itself (that impure
functions are refused, that pins are re-checked) and are skipped in that mode, which bypasses
it.

Traceback filtering is off, as in JAX's own test suite (``JaxTestCase``): a filtered
exception carries a note, which ``pytest.raises(match=...)`` would read as part of the message.
Tests of the filtering itself set the mode they check.
"""
import os

import numpy as np
import pytest

from nbjax.config import config as _config

_config.update("traceback_filtering", "off")


def pytest_xdist_auto_num_workers(config):
  """``-n auto`` (pyproject's addopts): one worker per core, at most 4 (each worker holds its
  own numba kernels and XLA executables, about 3 GB at its peak). ``-n 0`` runs in-process."""
  return max(1, min(os.cpu_count() or 1, 4))


def pytest_configure(config):
  config.addinivalue_line("markers", "needs_guard: checks eager_cache's guard, which "
                          "NBJAX_REPLAY_CHECK bypasses (skipped in that mode)")


def pytest_collection_modifyitems(config, items):
  if os.environ.get("NBJAX_REPLAY_CHECK"):
    skip = pytest.mark.skip(reason="NBJAX_REPLAY_CHECK bypasses the guard this test checks")
    for item in items:
      if "needs_guard" in item.keywords:
        item.add_marker(skip)

if os.environ.get("NBJAX_REPLAY_CHECK"):
  import nbjax
  from nbjax import api, core, dtypes, eager_cache
  import nbjax.random
  from nbjax.tree_util import tree_leaves

  eager_cache.guards = lambda fun: []
  eager_cache.fixed_structure = lambda treedef: True
  eager_cache.FUSE_AFTER = 1

  from nbjax.experimental import checkify as _checkify
  _is_error = lambda x: isinstance(x, _checkify.Error)

  def _checked(transform, what):
    def checked_transform(*a, **k):
      vf = transform(*a, **k)

      def run(*args, **kwargs):
        first = vf(*args, **kwargs)
        if core._ctx.trace is not core.eval_trace:
          return first
        second = vf(*args, **kwargs)
        third = vf(*args, **kwargs)
        for later in (second, third):
          _same(first, later, what)
        return third
      run._trace_cache = getattr(vf, "_trace_cache", None)
      return run
    return checked_transform

  def _same(first, later, what):
    for x, y in zip(tree_leaves(first, is_leaf=_is_error), tree_leaves(later, is_leaf=_is_error)):
      if _is_error(x):  # (checkify's codes number each trace's checks, as JAX's: the
        assert str(x) == str(y), "replay differs from the per-call error"  # messages)
        continue
      if isinstance(getattr(x, "dtype", None), dtypes.ExtendedDType):  # key arrays
        x, y = nbjax.random.key_data(x), nbjax.random.key_data(y)
      x, y = np.asarray(x), np.asarray(y)
      assert (x.dtype, x.shape) == (y.dtype, y.shape), "replay changed dtype or shape"
      if x.dtype.kind == "V" and x.dtype.itemsize == 2:  # bfloat16: compare bit patterns
        x, y = x.view(np.uint16), y.view(np.uint16)
      np.testing.assert_array_equal(x, y, err_msg=f"replay differs from the per-call {what}")

  def _staged_check(fun, args, kwargs, out):
    # a ``staged`` composite's replay against its per-call run (jnp's composites)
    _same(fun(*args, **kwargs), out, f"composite {getattr(fun, '__name__', fun)}")

  eager_cache.staged_check = _staged_check
  api.vmap = nbjax.vmap = _checked(api.vmap, "trace")
  api.value_and_grad = nbjax.value_and_grad = _checked(api.value_and_grad, "tape")
