"""Registry-generated jit checks: every built-in primitive, every declared dtype, every sample
case (``prim.meta``), compiled by XLA (``mlir.single_primitive_impl``: one primitive lowered
to StableHLO, the first case) and through the full ``nbjax.jit`` path (every case) against the
eager result (numba/NumPy). The two implementations are written independently, so each
checks the other. New primitives are covered the moment they register.
"""
import numpy as np
import pytest

import nbjax
from nbjax import core, registry, testing
from nbjax.array import Array

mlir = pytest.importorskip("nbjax.interpreters.mlir", reason="jaxlib (XLA backend) not installed")

PRIMS = [p for p in registry.primitives(builtin_only=True) if p.family != "call"]
_TOL = {"f": {2: (2e-2, 2e-2), 4: (5e-5, 1e-6), 8: (1e-12, 1e-13)},
        "c": {8: (5e-5, 1e-6), 16: (1e-12, 1e-13)}}
_IMPLS = {}


# bfloat16: XLA's CPU code rounds some ops (reductions, dots) in bf16 between steps, the
# eager round trip once at the end (registry.roundtrip): a few bf16 ulps (2**-7 relative)
_BF16_TOL = (3e-2, 2e-2)


def _tol(prim, dtype):
  d = np.dtype(dtype)
  base = _BF16_TOL if d == registry.BF16 else _TOL.get(d.kind, {}).get(d.itemsize, (0, 0))
  t = prim.meta.get("tol", {}).get(d) or prim.meta.get("tol", {}).get(d.name)
  return (max(base[0], t[0]), max(base[1], t[1])) if t else base


def _outs(prim, r):
  return list(r) if prim.multiple_results else [r]


def _close(prim, dtype, got, want, what):
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, f"{prim}: {what} shape {got.shape} != eager {want.shape}"
  assert got.dtype == want.dtype, f"{prim}: {what} dtype {got.dtype} != eager {want.dtype}"
  rtol, atol = _tol(prim, dtype)
  if got.dtype == registry.BF16:  # NumPy's isclose has no bfloat16 loops
    got, want = got.astype(np.float32), want.astype(np.float32)
  if got.dtype.kind in "fc":
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"{prim} {what} vs eager ({dtype})")
  else:
    np.testing.assert_array_equal(got, want, err_msg=f"{prim} {what} vs eager ({dtype})")


def _impl(prim):
  if prim not in _IMPLS:
    _IMPLS[prim] = mlir.single_primitive_impl(prim)
  return _IMPLS[prim]


def _eager(prim, args, params):
  """The eager (numba/NumPy) result; where the eager path itself fails (its own tests report
  that), the NumPy reference stands in, so the lowering is still checked."""
  try:
    return _outs(prim, prim.bind(*[Array(a) for a in args], **params))
  except Exception:
    ref = prim.meta.get("reference")
    if ref is None:
      raise
    out_avals = _outs(prim, prim.abstract_eval(*[core.get_aval(a) for a in args], **params))
    return [np.asarray(r, a.dtype) for r, a in zip(_outs(prim, ref(*args, **params)), out_avals)]


def _lowering_or_skip(prim):
  try:
    mlir.get_lowering(prim)
  except NotImplementedError as e:
    pytest.skip(f"{prim.name}: no lowering: {e}")


def _cases():
  for p in PRIMS:
    for d in p.meta.get("dtypes", ()):
      yield pytest.param(p, np.dtype(d), id=f"{p.name}-{np.dtype(d).name}")


@pytest.mark.parametrize("prim,dtype", list(_cases()))
def test_xla_matches_eager(prim, dtype):
  """The first case through ``single_primitive_impl`` (the ``"xla"`` eager backend: its
  wrapper is the same for every dtype, so for the first declared dtype only), then every
  case through ``nbjax.jit`` (staging, lowering, executable cache), all cases in one jitted
  function: one XLA compile per primitive and dtype, not one per case (compiles were a third
  of the test run). The jitted outputs must reproduce the eager results' dtype, shape and
  weak type, and a second call must not retrace."""
  cases = testing.primitive_cases(prim, dtype)
  if not cases:
    pytest.skip(f"{prim.name}: declares dtype {dtype} but has no sample cases (meta)")
  _lowering_or_skip(prim)
  cases = [([np.array(a, order="C") for a in args], params) for args, params in cases]
  wants = [_eager(prim, args, params) for args, params in cases]
  if dtype == np.dtype(prim.meta["dtypes"][0]):
    args, params = cases[0]
    got = _outs(prim, _impl(prim)(*args, **params))
    assert len(got) == len(wants[0])
    for g, w in zip(got, wants[0]):
      _close(prim, dtype, g, w, f"XLA {params}")

  arrays = [Array(a) for args, _ in cases for a in args]
  f = testing.fast_jit(testing.cases_fun(prim, cases))
  for what in ("jit", "jit (cached)"):
    k = 0
    for (args, params), want, r in zip(cases, wants, f(*arrays)):
      avals = _outs(prim, prim.abstract_eval(*[a.aval for a in arrays[k:k + len(args)]],
                                             **params))
      k += len(args)
      got = _outs(prim, r)
      assert len(got) == len(want)
      for g, w, a in zip(got, want, avals):
        assert type(g) is Array
        assert g.weak_type == a.weak_type, f"{prim}: jit weak_type {g.weak_type} != {a.weak_type}"
        _close(prim, dtype, g, w, f"{what} {params}")
  assert f.trace_count == 1, f"{prim}: a later call retraced"


def test_every_primitive_has_a_lowering():
  missing = []
  for p in PRIMS:
    try:
      mlir.get_lowering(p)
    except NotImplementedError:
      if not p.meta.get("lowering_note"):
        missing.append(p.name)
  assert not missing, f"primitives without a StableHLO lowering: {missing}"


def test_missing_lowering_error_names_primitive():
  p = core.Primitive("no_lowering_here")
  p.def_abstract_eval(lambda x: x)
  p.def_impl(lambda x: x)
  with pytest.raises(NotImplementedError,
                     match="MLIR translation rule for primitive 'no_lowering_here' not found for "
                           "platform cpu"):
    nbjax.jit(p.bind)(1.0)
