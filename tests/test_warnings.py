"""No RuntimeWarning from NumPy's floating-point error reporting (divide by zero, invalid
value, overflow, bad casts) escapes nbjax, also where the warning filters were reset the way
pytest's ``-W error`` / ``filterwarnings = error`` reset them: JAX never warns there. Checked
for every eager backend of every registered primitive at special values (0, -1, +-inf, NaN,
huge; integer extremes), for eager programs (vmap replays), jit and conversions; NumPy code
of the caller keeps its own error state and still warns.
"""
import threading
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import registry, testing
from nbjax.config import config

_FLOATS = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 1e30, -0.0, 2.0, -1e30, 0.5])


def _special(a):
  """``a`` with its values replaced by special ones (same shape and dtype)."""
  a = np.asarray(a)
  d = a.dtype
  if d.kind in "fc":
    with np.errstate(all="ignore"):  # (1e30 overflows float16: that is the point)
      v = np.resize(_FLOATS, a.shape).astype(d)
      if d.kind == "c":
        v = v + 1j * np.resize(_FLOATS[::-1], a.shape).astype(d)
    return v
  if d.kind in "iu":
    info = np.iinfo(d)
    return np.resize(np.array([0, info.max, info.min, 1, -1 % (info.max + 1)], object),
                     a.shape).astype(d)
  return a


def _strict():
  """Warning filters as pytest's ``filterwarnings = error`` leaves them."""
  cm = warnings.catch_warnings()
  cm.__enter__()
  warnings.simplefilter("error")
  return cm


_PRIMS = [p for p in registry.primitives(builtin_only=True)
          if {"numba", "numpy"} & set(p.impls) and p.meta.get("dtypes")]


@pytest.mark.parametrize("prim", _PRIMS, ids=str)
def test_no_backend_warns_at_special_values(prim):
  ran = 0
  for backend in ("numpy", "numba"):
    if backend not in prim.impls:
      continue
    config.set_eager_backend(prim.name, backend)
    try:
      for d in prim.meta["dtypes"]:
        for args, params in testing.primitive_cases(prim, d):
          args = [_special(a) for a in args]
          cm = _strict()
          try:
            prim.bind(*args, **params)
            ran += 1
          except Warning as w:
            pytest.fail(f"{prim} ({backend}, {np.dtype(d).name}) warned: {w!r}")
          except Exception:  # noqa: BLE001 (bad values may be rejected: only warnings count)
            pass
          finally:
            cm.__exit__(None, None, None)
    finally:
      config.set_eager_backend(prim.name, None)
  assert ran, f"{prim}: no case ran"


def _special_fn(x):
  y = jnp.log(x) / x + jnp.sqrt(x - 1.0) * jnp.exp(x * 1e3)
  return y + jnp.arccos(x) + (x * 1e308).astype(jnp.int32) + jnp.power(x, -1.0)


def test_transformations_and_conversions_do_not_warn():
  x = jnp.array([0.0, -1.0, np.inf, np.nan, 1e300])
  cm = _strict()
  try:
    _special_fn(x)
    vf = nbjax.vmap(_special_fn)
    for _ in range(3):  # the repeats replay a compiled eager program
      vf(x[:, None])
    nbjax.jit(_special_fn)(x)
    nbjax.jvp(_special_fn, (x,), (x,))
    for d in (np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16):
      x.astype(d)
      jnp.array([1e30, -1e30, np.nan], np.float32).astype(d)
    jnp.array(1.0) / 0
    jnp.array(0) // 0
    jnp.array(0) % 0
    jnp.full(3, 6e4, np.float16) * 2
  finally:
    cm.__exit__(None, None, None)


def test_callers_numpy_error_state_is_untouched():
  before = np.geterr()
  cm = _strict()
  try:
    jnp.log(jnp.zeros(3))
    with pytest.raises(RuntimeWarning, match="divide by zero"):
      np.log(np.zeros(3))
    with np.errstate(divide="raise"):
      jnp.log(jnp.zeros(3))  # JAX never raises either
      with pytest.raises(FloatingPointError):
        np.log(np.zeros(3))
  finally:
    cm.__exit__(None, None, None)
  assert np.geterr() == before


def test_nested_and_concurrent_eager_calls_stay_quiet():
  cm = _strict()
  try:  # an eager call inside the quiet context (as a user primitive in an eager program)
    out = registry.quiet_run(lambda: jnp.log(jnp.zeros(3)) + jnp.sum(jnp.zeros(2) / 0))
    np.testing.assert_array_equal(out, [np.nan] * 3)
    errors = []

    def work():
      try:
        for _ in range(300):
          jnp.log(jnp.zeros(3)) / jnp.zeros(3)
          jnp.sum(jnp.zeros(4) / 0.0)
      except BaseException as e:  # noqa: BLE001
        errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    assert not errors, errors[:3]
  finally:
    cm.__exit__(None, None, None)


def test_a_backends_own_runtime_error_is_not_retried():
  calls = []

  def boom():
    calls.append(1)
    raise RuntimeError("boom")
  with pytest.raises(RuntimeError, match="boom") as info:
    registry.quiet_run(boom)
  with pytest.raises(RuntimeError, match="boom"):
    registry.quiet_retry(info.value, boom)
  assert calls == [1]
