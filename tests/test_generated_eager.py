"""Registry-generated eager checks: for every built-in primitive, every declared dtype and
every sample case (``prim.meta``): each eager backend against the NumPy reference, ``bind``
against abstract eval (shape, dtype, weak_type), and bad input raising a clear error that
names the primitive. New primitives are covered the moment they are registered.
"""
import numpy as np
import pytest

import nbjax  # noqa: F401  (registers every primitive)
from nbjax import core, registry, testing
from nbjax.array import Array

PRIMS = registry.primitives(builtin_only=True)
BF16 = registry.BF16
_DEFAULT_TOL = {"f": {2: (2e-2, 2e-2), 4: (2e-5, 1e-6), 8: (1e-12, 1e-13)},
                "c": {8: (2e-5, 1e-6), 16: (1e-12, 1e-13)}}
# bfloat16 against the float32 reference rounded to bfloat16: one bf16 ulp (2**-7 relative),
# and float32 kernels that differ from the reference by rounding may round the other way
_BF16_TOL = (1.6e-2, 1e-2)


def _tol(prim, dtype):
  d = np.dtype(dtype)
  t = prim.meta.get("tol", {}).get(d) or prim.meta.get("tol", {}).get(d.name)
  if t:
    return t
  if d == BF16:
    return _BF16_TOL
  return _DEFAULT_TOL.get(d.kind, {}).get(d.itemsize, (0, 0))


def _run(prim, f, args, params):
  """``f(*args, **params)``; a raw backend on a bfloat16 signature runs as the registry's
  declared float32 round trip (``registry.roundtrip``), the reference on float32 values."""
  if registry.needs_roundtrip(prim, [np.asarray(a).dtype for a in args], params):
    avals = [core.get_aval(a) for a in args]
    return registry.roundtrip(prim, lambda _, p: lambda *xs: f(*xs, **p), avals, params)(*args)
  return f(*args, **params)


def _assert_close(prim, dtype, got, want, what):
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape, f"{prim}: {what} shape {got.shape} != reference {want.shape}"
  rtol, atol = _tol(prim, dtype)
  if BF16 in (got.dtype, want.dtype):  # NumPy's isclose has no bfloat16 loops
    got, want = got.astype(np.float32), want.astype(np.float32)
  if got.dtype.kind in "fc" or want.dtype.kind in "fc":
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=f"{prim} {what} vs reference ({dtype})")
  else:
    np.testing.assert_array_equal(got, want, err_msg=f"{prim} {what} vs reference ({dtype})")


def _cases():
  for p in PRIMS:
    if p.meta.get("reference") is None:
      continue
    for d in p.meta.get("dtypes", ()):
      yield pytest.param(p, np.dtype(d), id=f"{p.name}-{np.dtype(d).name}")


def _outs(prim, r):
  return list(r) if prim.multiple_results else [r]


@pytest.mark.parametrize("prim,dtype", list(_cases()))
def test_eager_backends_match_reference(prim, dtype):
  cases = testing.primitive_cases(prim, dtype)
  assert cases, f"{prim} declares dtype {dtype} but has no sample cases"
  ref = prim.meta["reference"]
  for args, params in cases:
    want = _outs(prim, _run(prim, ref, [np.array(a) for a in args], params))
    avals = [core.get_aval(a) for a in args]
    out_avals = _outs(prim, prim.abstract_eval(*avals, **params))
    for backend, impl in prim.impls.items():
      got = _outs(prim, _run(prim, impl, [np.asarray(a, order="C") for a in args], params))
      for g, w, a in zip(got, want, out_avals):
        _assert_close(prim, dtype, np.asarray(g, a.dtype), w, f"backend {backend!r}")
    # bind with no transformation: the registry's eager entry
    got = _outs(prim, prim.bind(*[Array(a) for a in args], **params))
    for g, w, a in zip(got, want, out_avals):
      assert type(g) is Array, f"{prim}: eager result is {type(g).__name__}, not Array"
      assert g.shape == a.shape and g.dtype == a.dtype, (
          f"{prim}: result {g.dtype}{list(g.shape)} != abstract eval {a.str_short()}")
      assert g.weak_type == a.weak_type, f"{prim}: weak_type {g.weak_type} != {a.weak_type}"
      _assert_close(prim, dtype, g, w, "eager bind")


@pytest.mark.parametrize("prim", [p for p in PRIMS if p.meta.get("bad_inputs")], ids=str)
def test_bad_inputs_raise_naming_primitive(prim):
  for args, params, exc in prim.meta["bad_inputs"](np.random.default_rng(0)):
    with pytest.raises(exc) as info:
      prim.bind(*args, **params)
    names = (prim.name, *prim.meta.get("error_names", ()))  # (or the words JAX's message uses)
    assert any(n in str(info.value) for n in names), (
        f"{prim}: error does not name the primitive: {info.value}")


@pytest.mark.parametrize("prim", PRIMS, ids=str)
def test_non_array_operand_is_type_error(prim):
  cases = [c for d in prim.meta.get("dtypes", ())[:1] for c in testing.primitive_cases(prim, d)]
  if not cases or not cases[0][0]:
    pytest.skip(f"{prim}: no sample case with array operands")
  args, params = cases[0]
  with pytest.raises(TypeError) as info:
    prim.bind(object(), *args[1:], **params)
  assert prim.name in str(info.value)


@pytest.mark.parametrize("prim", PRIMS, ids=str)
def test_every_primitive_has_a_numba_kernel_or_says_why(prim):
  small, large, _ = registry.policy(prim)
  if "numba" not in prim.impls or "numba" not in (small, large):
    assert prim.meta.get("note"), (
        f"{prim} runs eagerly on {registry.backend_label(prim)} without a numba kernel in "
        "its policy: the registry table must say why (meta['note'])")


def test_registry_table_lists_every_primitive():
  text = registry.table()
  for p in PRIMS:
    assert f"\n{p.name} " in "\n" + text, f"{p} missing from the registry table"
  assert {r["primitive"] for r in registry.rows()} >= {p.name for p in PRIMS}


def test_backend_override_switches_and_restores():
  x = Array(np.linspace(0, 1, 7, dtype=np.float32))
  sin_p = registry.get("sin")
  want = np.sin(np.asarray(x))
  for b in ("numba", "numpy"):
    nbjax.config.set_eager_backend("sin", b)
    try:
      assert registry.policy(sin_p)[0] == b and sin_p.backend == b
      np.testing.assert_allclose(np.asarray(sin_p.bind(x)), want, rtol=1e-6)
    finally:
      nbjax.config.set_eager_backend("sin", None)
  assert registry.policy(sin_p) == sin_p.policy
  with pytest.raises(ValueError, match="backend"):
    nbjax.config.set_eager_backend("sin", "cuda")
