"""bfloat16 as a first-class float dtype: JAX's promotion entries, the registry's declared
float32 round trip (eager), jit vs eager, transformations, and clear errors for the narrow
ml_dtypes types. The per-primitive sample checks live in the generated tests, where bf16 is
one more float dtype of every primitive that accepts it (tests/test_generated_*.py)."""
import ml_dtypes
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, registry

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)

# jnp.promote_types(bfloat16, t) in JAX (x64 on)
JAX_PROMOTE_BF16 = {
    "bool": "bfloat16", "uint8": "bfloat16", "uint16": "bfloat16", "uint32": "bfloat16",
    "uint64": "bfloat16", "int8": "bfloat16", "int16": "bfloat16", "int32": "bfloat16",
    "int64": "bfloat16", "bfloat16": "bfloat16", "float16": "float32", "float32": "float32",
    "float64": "float64", "complex64": "complex64", "complex128": "complex128"}


@pytest.mark.parametrize("other,want", sorted(JAX_PROMOTE_BF16.items()))
def test_promote_types_as_jax(other, want):
  o = BF16 if other == "bfloat16" else np.dtype(other)
  assert jnp.promote_types(jnp.bfloat16, o) == np.dtype(BF16 if want == "bfloat16" else want)
  assert jnp.promote_types(o, jnp.bfloat16) == jnp.promote_types(jnp.bfloat16, o)


@pytest.mark.parametrize("v,dtype", [(1, BF16), (1.5, BF16), (True, BF16), (1j, np.complex64),
                                     (np.int8(1), BF16), (np.float32(1), F32)])
def test_operand_with_scalar_as_jax(v, dtype):
  r = jnp.ones(2, jnp.bfloat16) + v
  assert r.dtype == dtype and not r.weak_type


def test_dtype_api():
  assert jnp.issubdtype(jnp.bfloat16, jnp.floating) and jnp.issubdtype(jnp.bfloat16, jnp.inexact)
  assert not jnp.issubdtype(jnp.bfloat16, jnp.integer)
  fi = jnp.finfo(jnp.bfloat16)
  assert fi.bits == 16 and float(fi.eps) == 2.0 ** -7 and fi.nmant == 7
  a = jnp.array([1.1, 2.2], dtype=jnp.bfloat16)
  assert a.dtype == BF16 and "bfloat16" in repr(a)
  assert jnp.arange(3.0).astype(jnp.bfloat16).dtype == BF16


def test_round_to_nearest_even():
  # float32 results between two bf16 values: ties go to the even one, as ml_dtypes' cast
  x = np.array([1.0, 1.0, 1.0, 3.0], BF16)
  y = np.array([2.0 ** -8, 3 * 2.0 ** -8, 2.0 ** -8 + 2.0 ** -20, 2.0 ** -7], np.float32)
  got = np.asarray(lax.add(jnp.asarray(x), jnp.asarray(y.astype(BF16))))
  want = (x.astype(F32) + y.astype(BF16).astype(F32)).astype(BF16)
  np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
  np.testing.assert_array_equal(
      np.asarray(lax.convert_element_type(jnp.asarray(y), BF16)).view(np.uint16),
      y.astype(BF16).view(np.uint16))


def _float_prims():
  return [p for p in registry.primitives(builtin_only=True) if BF16 in p.meta.get("dtypes", ())]


def test_every_bf16_primitive_declares_how_it_runs():
  """No silent fallback: each primitive taking bf16 says how its eager kernels see it, and
  the registry table shows it."""
  rows = {r["primitive"]: r for r in registry.rows()}
  native, xla = set(), set()
  for p in _float_prims():
    mode = registry.bf16_mode(p)
    assert mode in ("f32", "native", "xla"), (p, mode)
    assert rows[p.name]["bf16"] == mode
    (native if mode == "native" else xla if mode == "xla" else set()).add(p.name)
  assert native == {"nextafter", "bitcast_convert_type"}
  assert xla == {"exp2", "logistic", "log1p"}  # (XLA rounds between the steps of these)
  assert len(_float_prims()) > 80
  assert "bf16" in registry.table().splitlines()[0]


def test_roundtrip_is_used_and_exact():
  """The round trip runs the float32 kernels on the widened operands and rounds once."""
  rng = np.random.default_rng(0)
  x = rng.standard_normal(1000).astype(BF16)
  for f, ref in ((lax.sin, np.sin), (lax.exp, np.exp), (lax.tanh, np.tanh)):
    got = np.asarray(f(jnp.asarray(x)))
    assert got.dtype == BF16
    want = np.asarray(f(jnp.asarray(x.astype(F32)))).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_allclose(got.astype(F32), ref(x.astype(F32)).astype(BF16).astype(F32),
                               rtol=2 ** -7)


def test_nextafter_native():
  x = np.array([1, 0, -0.0, np.nan, 1, -1], BF16)
  y = np.array([2, -1, 1, 1, 1, -2], BF16)
  want = np.array([1 + 2 ** -7, -9.18355e-41, 9.18355e-41, np.nan, 1, -1 - 2 ** -7], BF16)
  for backend in ("numba", "numpy"):
    nbjax.config.set_eager_backend("nextafter", backend)
    try:
      got = np.asarray(lax.nextafter(jnp.asarray(x), jnp.asarray(y)))
    finally:
      nbjax.config.set_eager_backend("nextafter", None)
    np.testing.assert_array_equal(got.view(np.uint16)[[0, 1, 2, 4, 5]],
                                  want.view(np.uint16)[[0, 1, 2, 4, 5]])
    assert np.isnan(got.astype(F32)[3])


def test_bitcast_native():
  x = jnp.array([1.5, -2.0], jnp.bfloat16)
  u = lax.bitcast_convert_type(x, jnp.uint16)
  np.testing.assert_array_equal(np.asarray(u), np.asarray(x).view(np.uint16))
  assert lax.bitcast_convert_type(u, jnp.bfloat16).dtype == BF16


def test_jit_matches_eager():
  x = jnp.asarray(np.linspace(-2, 2, 11).astype(BF16))
  f = lambda x: jnp.sin(x) * 2 + x.sum() + np.asarray(1.5, BF16)
  got, want = nbjax.jit(f)(x), f(x)
  assert got.dtype == want.dtype == BF16
  np.testing.assert_allclose(np.asarray(got, F32), np.asarray(want, F32), rtol=2e-2, atol=2e-2)
  s = nbjax.jit(lambda a, b: a * b)(np.asarray(1.5, BF16), np.asarray(3.0, BF16))
  assert s.dtype == BF16 and float(s) == 4.5


def test_grad_jvp_vmap():
  x = jnp.array([1.1, 2.2], jnp.bfloat16)
  g = nbjax.grad(lambda x: jnp.sin(x).sum())(x)
  assert g.dtype == BF16
  np.testing.assert_allclose(np.asarray(g, F32), np.cos(np.asarray(x, F32)), rtol=1e-2)
  y, t = nbjax.jvp(jnp.sin, (x,), (jnp.ones(2, jnp.bfloat16),))
  assert y.dtype == t.dtype == BF16
  np.testing.assert_allclose(np.asarray(t, F32), np.cos(np.asarray(x, F32)), rtol=1e-2)
  gj = nbjax.jit(nbjax.grad(lambda x: jnp.sin(x).sum()))(x)
  np.testing.assert_allclose(np.asarray(gj, F32), np.asarray(g, F32), rtol=1e-2)
  v = nbjax.vmap(lambda r: (r * r).sum())(jnp.ones((3, 2), jnp.bfloat16))
  assert v.dtype == BF16 and np.asarray(v, F32).tolist() == [2, 2, 2]


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "int4", "uint4"])
def test_narrow_types_taken_where_jax_takes_them(name):
  # JAX's dtype classes hold them (float8_* is floating, int4 integer): add takes all four,
  # sin only the floats (tests/test_lax_narrow.py has the values)
  d = np.dtype(getattr(ml_dtypes, name))
  x = np.ones(3, d)
  if "float" in name:
    assert lax.sin(x).dtype == d and lax.add(x, x).dtype == d
  else:
    with pytest.raises(TypeError, match=f"sin does not accept dtype {name}. Accepted dtypes "
                       "are subtypes of floating, complexfloating."):
      lax.sin(x)
  assert np.asarray(lax.add(x, x)).astype(int).tolist() == [2, 2, 2]
  assert jnp.zeros(3, d).dtype == d  # creation and printing work, as in JAX
