"""nbjax.numpy against NumPy: values, dtypes (JAX promotion), shapes, axes, edge cases."""
import functools
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import nbjax
import nbjax.numpy as jnp
from nbjax import dtypes

rng = np.random.default_rng(0)

TOL = {np.dtype(np.float16): (1e-2, 1e-2), np.dtype(np.float32): (2e-5, 2e-6),
       np.dtype(np.float64): (1e-12, 1e-13), np.dtype(np.complex64): (2e-5, 2e-6),
       np.dtype(np.complex128): (1e-12, 1e-13)}


def rand(shape, dtype, domain="real"):
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return rng.random(shape) < 0.5
  if dtype.kind in "iu":
    lo = 1 if domain == "positive" else (0 if dtype.kind == "u" else -9)
    return rng.integers(lo, 10, shape).astype(dtype)
  x = rng.standard_normal(shape)
  if domain == "positive":
    x = np.abs(x) + 0.1
  elif domain == "unit":
    x = np.tanh(x) * 0.95
  elif domain == "ge1":
    x = np.abs(x) + 1.05
  if dtype.kind == "c":
    x = x + 1j * rng.standard_normal(shape)
  return np.asarray(x, dtype)


def check(actual, expected, rtol=None, atol=None, dtype=True):
  a = np.asarray(actual)
  e = np.asarray(expected)
  assert a.shape == e.shape, (a.shape, e.shape)
  if dtype:
    assert a.dtype == e.dtype, (a.dtype, e.dtype)
  if a.dtype.kind in "fc" or e.dtype.kind in "fc":
    r, t = TOL.get(np.result_type(a.dtype, e.dtype) if e.dtype.kind in "fc" else a.dtype,
                   (1e-6, 1e-6))
    np.testing.assert_allclose(a, e, rtol=rtol or r, atol=atol or t, equal_nan=True)
  else:
    np.testing.assert_array_equal(a, e)


@pytest.fixture
def x32():
  nbjax.config.update("enable_x64", False)
  yield
  nbjax.config.update("enable_x64", True)

# ----------------------------------------------------------------- elementwise

UNARY = [  # name, numpy, domain, dtypes
    ("negative", np.negative, "real", ["float32", "int32"]),
    ("absolute", np.absolute, "real", ["float32", "int32", "uint8", "bool", "complex64"]),
    ("sign", np.sign, "real", ["float32", "int32"]),
    ("floor", np.floor, "real", ["float32", "float64"]),
    ("ceil", np.ceil, "real", ["float32"]),
    ("trunc", np.trunc, "real", ["float32"]),
    ("rint", np.rint, "real", ["float32", "float64"]),
    ("exp", np.exp, "real", ["float32", "float64", "complex64"]),
    ("exp2", np.exp2, "real", ["float32"]),
    ("expm1", np.expm1, "real", ["float32"]),
    ("log", np.log, "positive", ["float32", "float64"]),
    ("log2", np.log2, "positive", ["float32"]),
    ("log10", np.log10, "positive", ["float64"]),
    ("log1p", np.log1p, "positive", ["float32"]),
    ("sqrt", np.sqrt, "positive", ["float32", "int32"]),
    ("cbrt", np.cbrt, "real", ["float32", "float64"]),
    ("square", np.square, "real", ["float32", "int32"]),
    ("reciprocal", np.reciprocal, "positive", ["float32"]),
    ("sin", np.sin, "real", ["float32", "float64", "int32"]),
    ("cos", np.cos, "real", ["float32"]),
    ("tan", np.tan, "unit", ["float32"]),
    ("arcsin", np.arcsin, "unit", ["float32"]),
    ("arccos", np.arccos, "unit", ["float64"]),
    ("arctan", np.arctan, "real", ["float32"]),
    ("sinh", np.sinh, "real", ["float32"]),
    ("cosh", np.cosh, "real", ["float32"]),
    ("tanh", np.tanh, "real", ["float32", "float64"]),
    ("arcsinh", np.arcsinh, "real", ["float32"]),
    ("arccosh", np.arccosh, "ge1", ["float32"]),
    ("arctanh", np.arctanh, "unit", ["float32"]),
    ("deg2rad", np.deg2rad, "real", ["float32"]),
    ("rad2deg", np.rad2deg, "real", ["float64"]),
    ("isnan", np.isnan, "real", ["float32", "int32"]),
    ("isinf", np.isinf, "real", ["float32", "int32"]),
    ("isfinite", np.isfinite, "real", ["float32", "int32", "complex64"]),
    ("signbit", np.signbit, "real", ["float32", "int32"]),
    ("logical_not", np.logical_not, "real", ["float32", "bool"]),
    ("invert", np.invert, "real", ["int32", "uint8", "bool"]),
    ("sinc", np.sinc, "real", ["float64"]),
    ("real", np.real, "real", ["complex64", "float32"]),
    ("imag", np.imag, "real", ["complex64", "float32"]),
    ("conj", np.conj, "real", ["complex64", "float32"]),
    ("angle", np.angle, "real", ["complex64", "float64"]),
    ("fabs", np.fabs, "real", ["float32"]),
]
SHAPES = [(), (0,), (3, 4)]


def _expected_unary_dtype(name, npres, d):
  """JAX differs from NumPy where NumPy picks float16 or keeps ints (x64: float64 for 64-bit
  ints, float32 for narrower ints and bool, as JAX 0.10's ``to_inexact_dtype``)."""
  if name in ("sqrt", "sin", "reciprocal") and np.dtype(d).kind in "iub":
    return np.dtype(np.float64 if np.dtype(d).itemsize == 8 else np.float32)
  return npres.dtype


@pytest.mark.parametrize("name,npf,domain,dts", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, npf, domain, dts):
  for d in dts:
    for s in SHAPES:
      x = rand(s, d, domain)
      want = npf(x)
      got = getattr(jnp, name)(jnp.asarray(x))
      assert got.dtype == _expected_unary_dtype(name, np.asarray(want), d), (name, d)
      check(got, np.asarray(want).astype(got.dtype), dtype=False)


def test_unary_special_values():
  x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.5, 2.5], np.float32)
  jx = jnp.asarray(x)
  for name in ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit", "floor", "ceil",
               "rint", "trunc", "sign", "abs", "square"]:
    check(getattr(jnp, name)(jx), getattr(np, name)(x))
  check(jnp.round(jx), np.round(x))
  check(jnp.nan_to_num(jx), np.nan_to_num(x))
  check(jnp.nan_to_num(jx, nan=1.0, posinf=2.0, neginf=-2.0),
        np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0))


BINARY = [  # name, numpy, dtypes, domain of the second argument
    ("add", np.add, ["float32", "int32", "bool", "complex64"], "real"),
    ("subtract", np.subtract, ["float32", "int32", "uint8"], "real"),
    ("multiply", np.multiply, ["float32", "int32", "bool"], "real"),
    ("divide", np.divide, ["float32", "int32"], "positive"),
    ("true_divide", np.true_divide, ["float64"], "positive"),
    ("floor_divide", np.floor_divide, ["float32", "int32", "uint8"], "positive"),
    ("remainder", np.remainder, ["float32", "int32", "float64"], "positive"),
    ("mod", np.mod, ["int32"], "positive"),
    ("fmod", np.fmod, ["float32", "int32"], "positive"),
    ("power", np.power, ["float32", "int32"], "positive"),
    ("float_power", np.float_power, ["float64"], "positive"),
    ("arctan2", np.arctan2, ["float32", "float64"], "real"),
    ("hypot", np.hypot, ["float32"], "real"),
    ("maximum", np.maximum, ["float32", "int32", "bool"], "real"),
    ("minimum", np.minimum, ["float32", "uint8"], "real"),
    ("fmax", np.fmax, ["float32"], "real"),
    ("fmin", np.fmin, ["float64"], "real"),
    ("equal", np.equal, ["float32", "int32", "bool", "complex64"], "real"),
    ("not_equal", np.not_equal, ["float32", "int32"], "real"),
    ("less", np.less, ["float32", "int32", "uint8", "bool"], "real"),
    ("less_equal", np.less_equal, ["float32"], "real"),
    ("greater", np.greater, ["float32", "int32"], "real"),
    ("greater_equal", np.greater_equal, ["int32"], "real"),
    ("logical_and", np.logical_and, ["bool", "float32"], "real"),
    ("logical_or", np.logical_or, ["bool", "int32"], "real"),
    ("logical_xor", np.logical_xor, ["bool"], "real"),
    ("bitwise_and", np.bitwise_and, ["int32", "bool", "uint8"], "real"),
    ("bitwise_or", np.bitwise_or, ["int32", "bool"], "real"),
    ("bitwise_xor", np.bitwise_xor, ["int32"], "real"),
    ("left_shift", np.left_shift, ["int32"], "shift"),
    ("right_shift", np.right_shift, ["int32", "uint8"], "shift"),
    ("copysign", np.copysign, ["float32"], "real"),
    ("heaviside", np.heaviside, ["float32"], "real"),
    ("logaddexp", np.logaddexp, ["float32", "float64"], "real"),
    ("logaddexp2", np.logaddexp2, ["float64"], "real"),
    ("nextafter", np.nextafter, ["float32", "float64"], "real"),
]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((4, 1, 3), (2, 1)),
                 ((0,), (1,)), ((), (2, 3))]


def _second(shape, d, domain):
  if domain == "shift":
    return rng.integers(0, 5, shape).astype(d)
  return rand(shape, d, domain)


@pytest.mark.parametrize("name,npf,dts,domain", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, npf, dts, domain):
  for d in dts:
    for s1, s2 in BINARY_SHAPES:
      x = rand(s1, d, "positive" if name in ("power",) else "real")
      y = _second(s2, d, domain)
      if name == "power" and np.dtype(d).kind == "i":
        y = rng.integers(0, 4, s2).astype(d)
      with np.errstate(all="ignore"):
        want = np.asarray(npf(x, y))
      got = getattr(jnp, name)(jnp.asarray(x), jnp.asarray(y))
      if name in ("divide",) and np.dtype(d).kind == "i":  # JAX 0.10: by width
        assert got.dtype == (np.float64 if np.dtype(d).itemsize == 8 else np.float32)
      else:
        assert got.dtype == want.dtype, (name, d, got.dtype, want.dtype)
      check(got, want.astype(got.dtype), dtype=False)


def test_floor_divide_and_remainder_signs():
  x = np.array([-7, -6, -1, 0, 1, 6, 7], np.int32)
  for y in (3, -3):
    check(jnp.floor_divide(jnp.asarray(x), y), x // np.int32(y))
    check(jnp.remainder(jnp.asarray(x), y), x % np.int32(y))
    check(jnp.fmod(jnp.asarray(x), y), np.fmod(x, np.int32(y)))
  xf = x.astype(np.float32) + 0.5
  check(jnp.floor_divide(jnp.asarray(xf), -2.0), xf // np.float32(-2.0))
  check(jnp.remainder(jnp.asarray(xf), -2.0), xf % np.float32(-2.0))
  q, r = jnp.divmod(jnp.asarray(x), 4)
  check(q, x // 4)
  check(r, x % 4)
  # integer division by zero: JAX gives 0 remainders instead of trapping
  assert int(jnp.remainder(jnp.int32(5), jnp.int32(0))) == 0


def test_power_integer_exponents():
  x = jnp.asarray(np.array([-2.0, 0.0, 0.5, 3.0], np.float32))
  for p in (0, 1, 2, 3, -1, -2):
    with np.errstate(divide="ignore"):  # (the reference's own warning: 0 ** -1)
      want = np.array([-2.0, 0.0, 0.5, 3.0], np.float32) ** np.float32(p)
    check(x ** p, want)
  check(jnp.power(jnp.arange(6), 3), np.arange(6) ** 3)
  check(jnp.power(2, jnp.arange(10)), 2 ** np.arange(10))
  assert (jnp.array([1, 2], jnp.uint8) ** 2).dtype == np.uint8


def test_complex_comparisons_and_extrema():
  x = np.array([1 + 2j, 1 + 1j, 0 + 5j, 2 - 1j], np.complex64)
  y = np.array([1 + 1j, 1 + 2j, 0 + 5j, 1 + 9j], np.complex64)
  jx, jy = jnp.asarray(x), jnp.asarray(y)
  check(jnp.less(jx, jy), np.less(x, y))
  check(jnp.greater_equal(jx, jy), np.greater_equal(x, y))
  check(jnp.maximum(jx, jy), np.maximum(x, y))
  check(jnp.minimum(jx, jy), np.minimum(x, y))


def test_round_decimals():
  x = np.array([1.2345, -2.5, 0.5, 1.5, 123.456], np.float64)
  for d in (0, 1, 2, -1):
    check(jnp.round(jnp.asarray(x), d), np.round(x, d))
  check(jnp.around(jnp.arange(5), 1), np.arange(5))
  with pytest.raises(NotImplementedError):
    jnp.round(jnp.arange(5), -1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64])
def test_round_decimals_past_the_dtype_precision(dtype):
  """As JAX: ``decimals`` above log10(finfo.max) returns ``x`` (no OverflowError from
  10.0**decimals); hugely negative ``decimals`` scale by 0 (NaN, as JAX's 0/0)."""
  x = np.array([1.23456, -7.5, 3e4], dtype)
  top = int(np.floor(np.log10(np.finfo(dtype).max)))  # 4, 38, 308
  for d in (400, 10**6, top + 1):
    check(jnp.round(jnp.asarray(x), d), x)
  check(jnp.round(jnp.asarray(x), -400), np.full(3, np.nan, dtype))
  check(jnp.round(jnp.asarray(x), 2), np.round(x.astype(np.complex128 if x.dtype.kind == "c"
                                                           else np.float64), 2).astype(dtype))
  check(nbjax.jit(lambda x: jnp.round(x, 400))(jnp.asarray(x)), x)


def test_split_rejects_negative_sizes_as_jax():
  x = jnp.arange(6)
  for f in (jnp.split, jnp.array_split):
    with pytest.raises(ValueError, match=re.escape("Sizes passed to split must be nonnegative, "
                                                   "got [-1, 4, 3]")):
      f(x, [-1, 3])
    with pytest.raises(ValueError, match=re.escape("got [2, 8, -4]")):
      f(x, [2, 10])
    with pytest.raises(ValueError, match=re.escape("got [3, -1, 4]")):
      f(x, np.array([3, 2]))
    with pytest.raises(ValueError, match="Sum of sizes 0 must be equal to dimension 0"):
      f(x, -2)
  y = jnp.ones((2, 6, 4))
  with pytest.raises(ValueError, match=re.escape("got [3, -1, 4]")):
    jnp.hsplit(y, [3, 2])
  with pytest.raises(ValueError, match=re.escape("got [2, -2, 4]")):
    jnp.dsplit(y, [2, 0])
  with pytest.raises(ValueError, match=re.escape("got [-1, 3]")):
    jnp.vsplit(y, [-1])
  with pytest.raises(ValueError, match="does not result in an equal division: rest is 2"):
    jnp.split(x, 4)
  assert [a.shape for a in jnp.array_split(x, 4)] == [(2,), (2,), (1,), (1,)]
  assert [a.shape for a in jnp.split(x, [2, 2, 6])] == [(2,), (0,), (4,), (0,)]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3),
       st.lists(st.integers(1, 3), min_size=0, max_size=3),
       st.sampled_from(["add", "multiply", "maximum", "less", "arctan2", "subtract"]),
       st.sampled_from(["float32", "int32", "float64"]))
def test_binary_broadcasting_hypothesis(s1, s2, name, d):
  # make the shapes broadcast-compatible by dropping conflicting sizes to 1
  n = min(len(s1), len(s2))
  for i in range(1, n + 1):
    if s1[-i] != s2[-i] and 1 not in (s1[-i], s2[-i]):
      s2[-i] = 1
  x, y = rand(tuple(s1), d), rand(tuple(s2), d)
  want = getattr(np, name)(x, y)
  got = getattr(jnp, name)(jnp.asarray(x), jnp.asarray(y))
  if name == "arctan2" and d == "int32":
    assert got.dtype == np.float32  # JAX 0.10's to_inexact_dtype
  check(got, np.asarray(want).astype(got.dtype), dtype=False)


def test_incompatible_shapes_raise():
  with pytest.raises(TypeError, match="add got incompatible shapes"):  # (JAX 0.10.2's)
    jnp.add(jnp.ones(3), jnp.ones(4))
  with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
    jnp.add([1, 2], jnp.ones(2))

# ----------------------------------------------------------------- promotion


def test_weak_type_promotion():
  x = jnp.ones(3, jnp.float32)
  assert (x * 2.0).dtype == np.float32
  assert (2 * x).dtype == np.float32
  assert (x + 1).dtype == np.float32
  assert (jnp.ones(3, jnp.int32) + 2).dtype == np.int32
  assert (jnp.ones(3, jnp.int32) + 2.0).dtype == np.float64
  assert (jnp.ones(3, jnp.int32) + jnp.ones(3, jnp.float32)).dtype == np.float32
  assert (jnp.ones(3, jnp.int8) + jnp.ones(3, jnp.uint8)).dtype == np.int16
  assert (jnp.ones(3, jnp.bool_) + 1).dtype == np.int64
  assert (jnp.ones(3, jnp.float16) * 2.0).dtype == np.float16
  assert (jnp.ones(3, jnp.complex64) * 2.0).dtype == np.complex64
  assert (jnp.ones(3, jnp.float32) * 1j).dtype == np.complex64
  w = jnp.asarray(2.0)
  assert w.weak_type and w.dtype == np.float64
  assert not (w * jnp.ones(2, jnp.float32)).weak_type
  assert (w * jnp.ones(2, jnp.float32)).dtype == np.float32
  assert jnp.add(2.0, 3.0).weak_type
  assert not jnp.array([1.0, 2.0]).weak_type
  assert jnp.sin(2).dtype == np.float64 and jnp.sin(2).weak_type
  assert jnp.result_type(jnp.int32, jnp.float32) == np.float32
  assert jnp.promote_types(jnp.int8, jnp.uint8) == np.int16
  assert jnp.promote_types(int, float) == np.float64


def test_x32_promotion(x32):
  assert (jnp.ones(3, jnp.int32) + 2.0).dtype == np.float32
  assert jnp.arange(3).dtype == np.int32
  assert jnp.zeros(3).dtype == np.float32
  assert jnp.array([1.0]).dtype == np.float32
  assert jnp.asarray(np.ones(2, np.float64)).dtype == np.float32
  assert jnp.sum(jnp.ones(3, jnp.int8)).dtype == np.int32
  assert jnp.mean(jnp.arange(4)).dtype == np.float32


def test_python_int_overflow():
  # JAX 0.10: a Python int in int64's range is an int64 literal cast (wrapping) to the
  # other operand's dtype; beyond int64 it overflows
  check(jnp.ones(2, jnp.int8) + 1000, np.full(2, -23, np.int8))
  check(jnp.zeros(2, jnp.uint8) - 1, np.full(2, 255, np.uint8))
  check(jnp.arange(3, dtype=jnp.int8).at[1].set(300), np.array([0, 44, 2], np.int8))
  with pytest.raises(OverflowError):
    jnp.ones(2, jnp.int8) + 2 ** 63
  with pytest.raises(OverflowError):
    jnp.asarray(2 ** 70)


def test_scalar_types():
  a = jnp.float32(3)
  assert isinstance(a, jnp.ndarray) and a.shape == () and a.dtype == np.float32
  assert not a.weak_type
  assert jnp.int8([1, 2]).dtype == np.int8
  assert np.dtype(jnp.float32) == np.float32
  assert jnp.zeros(2, jnp.float32).dtype == jnp.float32
  assert jnp.float32 == np.float32 and hash(jnp.float32) == hash(np.float32)
  assert isinstance(np.float32(1), jnp.float32)
  assert jnp.issubdtype(jnp.float32, jnp.floating)
  assert not jnp.issubdtype(jnp.int32, jnp.floating)
  assert jnp.dtype("float32") == np.float32
  assert jnp.finfo(jnp.float32).eps == np.finfo(np.float32).eps
  assert jnp.iinfo(jnp.int8).max == 127
  assert jnp.finfo(jnp.ones(2, jnp.float32)).bits == 32
  assert jnp.can_cast(jnp.int8, jnp.int32) and not jnp.can_cast(jnp.float32, jnp.int32)
  assert jnp.isdtype(jnp.float32, "real floating") and jnp.isdtype(np.int8, "integral")
  assert jnp.pi == np.pi and jnp.newaxis is None and np.isnan(jnp.nan) and jnp.inf == np.inf


def test_shape_functions():
  x = jnp.ones((2, 3))
  assert jnp.shape(x) == (2, 3) and jnp.ndim(x) == 2 and jnp.size(x) == 6 and jnp.size(x, 1) == 3
  assert jnp.shape([1, 2]) == (2,) and jnp.ndim(3.0) == 0
  assert jnp.isscalar(3.0) and jnp.isscalar(jnp.float32(1)) and not jnp.isscalar(x)
  assert jnp.iscomplexobj(jnp.ones(2, jnp.complex64)) and jnp.isrealobj(x)

# ----------------------------------------------------------------- reductions


RED = ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any", "argmax", "argmin"]


@pytest.mark.parametrize("name", RED)
def test_reductions(name):
  for d in ("float32", "int32", "bool", "float64"):
    if name in ("var", "std", "mean") and d == "bool":
      continue
    x = rand((3, 4, 5), d)
    jx = jnp.asarray(x)
    axes = [None, 0, 1, -1] + ([(0, 2), ()] if not name.startswith("arg") else [])
    for axis in axes:
      for keepdims in (False, True):
        want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        got = getattr(jnp, name)(jx, axis=axis, keepdims=keepdims)
        if name in ("sum", "prod") and d == "bool":
          assert got.dtype == np.int64
        check(got, np.asarray(want).astype(got.dtype), dtype=name not in ("sum", "prod"))
  # method form
  x = rand((2, 3), np.float32)
  check(getattr(jnp.asarray(x), name)(axis=1), getattr(x, name)(axis=1))


def test_reductions_options():
  x = rand((3, 4), np.float32)
  jx = jnp.asarray(x)
  m = x > 0
  check(jnp.sum(jx, where=m), np.sum(x, where=m))
  check(jnp.sum(jx, axis=1, where=m, keepdims=True), np.sum(x, axis=1, where=m, keepdims=True))
  check(jnp.max(jx, where=m, initial=-10.0), np.max(x, where=m, initial=-10.0))
  check(jnp.min(jx, axis=0, initial=0.0), np.min(x, axis=0, initial=0.0))
  check(jnp.sum(jx, initial=5.0), np.sum(x, initial=5.0))
  check(jnp.mean(jx, axis=0, where=m), np.mean(x, axis=0, where=m))
  check(jnp.var(jx, axis=1, ddof=1), np.var(x, axis=1, ddof=1))
  check(jnp.std(jx, ddof=1, keepdims=True), np.std(x, ddof=1, keepdims=True))
  check(jnp.var(jx, where=m), np.var(x, where=m))
  check(jnp.sum(jx, dtype=jnp.float64), np.sum(x, dtype=np.float64))
  check(jnp.mean(jnp.arange(10, dtype=jnp.int32)), np.float32(4.5))  # JAX 0.10: int32 -> f32
  assert jnp.sum(jnp.ones(3, jnp.int8)).dtype == np.int64
  assert jnp.sum(jnp.ones(3, jnp.uint8)).dtype == np.uint64
  assert jnp.sum(jnp.ones(3, jnp.int8), promote_integers=False).dtype == np.int8
  check(jnp.all(jx > -5, where=m), np.all(x > -5, where=m))
  check(jnp.any(jx > 10, axis=0), np.any(x > 10, axis=0))
  with pytest.raises(ValueError, match="identity"):
    jnp.max(jnp.zeros((0,)))
  with pytest.raises(ValueError, match="initial"):
    jnp.max(jx, where=m)
  with pytest.raises(ValueError, match="empty"):
    jnp.argmax(jnp.zeros((0,)))
  check(jnp.sum(jnp.zeros((0, 3))), np.sum(np.zeros((0, 3))))
  check(jnp.prod(jnp.zeros((2, 0)), axis=1), np.prod(np.zeros((2, 0)), axis=1))
  zc = rand((3, 2), np.complex64)
  check(jnp.var(jnp.asarray(zc)), np.var(zc))
  with pytest.raises(ValueError):
    jnp.sum(jx, axis=2)
  check(jnp.argmax(jx, axis=1, keepdims=True), np.argmax(x, axis=1, keepdims=True))


def test_nan_reductions():
  x = rand((3, 4), np.float64)
  x[0, 1] = x[2, 2] = np.nan
  x[1] = np.nan
  jx = jnp.asarray(x)
  with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
    for name in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean"):
      for axis in (None, 0, 1):
        check(getattr(jnp, name)(jx, axis=axis), getattr(np, name)(x, axis=axis))
  check(jnp.nancumsum(jx, axis=1), np.nancumsum(x, axis=1))
  check(jnp.nancumprod(jx), np.nancumprod(x))


def test_cumulative():
  for d in ("float32", "int32", "bool", "int8"):
    x = rand((3, 4), d)
    jx = jnp.asarray(x)
    for axis in (None, 0, 1, -1):
      # JAX: no integer promotion (bool accumulates in the default int)
      want = np.int64 if x.dtype == bool else x.dtype
      check(jnp.cumsum(jx, axis), np.cumsum(x, axis).astype(want))
      check(jnp.cumprod(jx, axis), np.cumprod(x, axis).astype(want))
  check(jnp.cumsum(jnp.ones(4, jnp.int32), dtype=jnp.float32), np.cumsum(np.ones(4, np.int32), dtype=np.float32))
  check(jnp.cumsum(jnp.zeros((0, 2)), 0), np.cumsum(np.zeros((0, 2)), 0))
  check(jnp.asarray(rand((3,), np.float32)).cumsum().shape, (3,), dtype=False)


def test_misc_reductions():
  x = rand((4, 5), np.float32)
  jx = jnp.asarray(x)
  check(jnp.count_nonzero(jx > 0, axis=1), np.count_nonzero(x > 0, axis=1))
  check(jnp.ptp(jx, axis=0), np.ptp(x, axis=0))
  w = rand((5,), np.float32, "positive")
  check(jnp.average(jx, axis=1, weights=jnp.asarray(w)), np.average(x, axis=1, weights=w))
  check(jnp.average(jx), np.average(x))
  a, s = jnp.average(jx, axis=0, returned=True)
  ea, es = np.average(x, axis=0, returned=True)
  check(a, ea)
  check(s, es)

# ----------------------------------------------------------------- creation


def test_creation():
  check(jnp.zeros((2, 3)), np.zeros((2, 3)))
  check(jnp.ones(4, jnp.int32), np.ones(4, np.int32))
  check(jnp.full((2,), 7), np.full((2,), 7))
  assert jnp.full((2,), 7.0).weak_type and not jnp.full((2,), 7.0, jnp.float32).weak_type
  check(jnp.full((2, 3), jnp.array([1, 2, 3])), np.full((2, 3), [1, 2, 3]))
  check(jnp.empty((0, 2)), np.empty((0, 2)))
  x = jnp.ones((2, 3), jnp.float32)
  check(jnp.zeros_like(x), np.zeros((2, 3), np.float32))
  check(jnp.ones_like(x, dtype=jnp.int32), np.ones((2, 3), np.int32))
  check(jnp.full_like(x, 3, shape=(4,)), np.full((4,), 3, np.float32))
  check(jnp.empty_like(x), np.zeros((2, 3), np.float32))
  for args in [(5,), (2, 7), (1, 10, 3), (0, 1, 0.25), (5, 1, -1), (2.5,), (-3,)]:
    check(jnp.arange(*args), np.arange(*args))
  check(jnp.arange(5, dtype=jnp.float32), np.arange(5, dtype=np.float32))
  for args, kw in [((0, 1), {}), ((0, 1, 5), dict(endpoint=False)), ((2, 3, 1), {}),
                   ((0, 1, 0), {}), ((-1, 1, 6), dict(dtype=jnp.int32)),
                   ((np.array([0, 1]), np.array([1, 3]), 4), dict(axis=1)),
                   ((np.array([0, 1]), 5, 3), {})]:
    check(jnp.linspace(*args, **kw), np.linspace(*args, **kw))
  out, step = jnp.linspace(0, 1, 5, retstep=True)
  check(step, np.linspace(0, 1, 5, retstep=True)[1])
  check(jnp.logspace(0, 2, 5), np.logspace(0, 2, 5))
  check(jnp.logspace(0, 3, 4, base=2.0), np.logspace(0, 3, 4, base=2.0))
  check(jnp.geomspace(1, 1000, 4), np.geomspace(1, 1000, 4))
  for args in [(3,), (3, 4), (3, 4, 1), (4, 3, -2), (0,)]:
    check(jnp.eye(*args), np.eye(*args))
  check(jnp.identity(3, jnp.int32), np.identity(3, np.int32))
  check(jnp.tri(3, 4, 1), np.tri(3, 4, 1, dtype=np.float32))  # (JAX: float32 by default)
  m = rand((2, 3, 4), np.float32)
  for k in (-1, 0, 2):
    check(jnp.triu(jnp.asarray(m), k), np.triu(m, k))
    check(jnp.tril(jnp.asarray(m), k), np.tril(m, k))
  a, b = np.arange(3), np.arange(4.0)
  for ind in ("xy", "ij"):
    for got, want in zip(jnp.meshgrid(jnp.asarray(a), jnp.asarray(b), indexing=ind),
                         np.meshgrid(a, b, indexing=ind)):
      check(got, want)
    for got, want in zip(jnp.meshgrid(jnp.asarray(a), jnp.asarray(b), sparse=True, indexing=ind),
                         np.meshgrid(a, b, sparse=True, indexing=ind)):
      check(got, want)
  check(jnp.indices((2, 3)), np.indices((2, 3)))
  for got, want in zip(jnp.tril_indices(4, 1), np.tril_indices(4, 1)):
    check(got, want)
  for got, want in zip(jnp.ix_(jnp.arange(2), jnp.arange(3)), np.ix_(np.arange(2), np.arange(3))):
    check(got, want)


def test_array_and_asarray():
  check(jnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]]))
  check(jnp.array([1, 2.5]), np.array([1, 2.5]))
  check(jnp.array([True, False]), np.array([True, False]))
  check(jnp.array([1 + 2j]), np.array([1 + 2j]))
  check(jnp.array([]), np.array([]))
  check(jnp.array(3, dtype=jnp.float32), np.array(3, np.float32))
  check(jnp.array([1, 2], ndmin=3), np.array([1, 2], ndmin=3))
  check(jnp.array([jnp.ones(2), jnp.zeros(2)]), np.array([np.ones(2), np.zeros(2)]))
  check(jnp.array([np.float32(1), 2.0]), np.array([1, 2], np.float32))
  assert jnp.array(1.5).weak_type and not jnp.array(1.5, jnp.float64).weak_type
  src = np.arange(4.0)
  a = jnp.asarray(src)
  src[0] = 100
  assert float(a[0]) == 0.0  # copied: later NumPy mutation never shows through
  x = jnp.ones(3)
  assert jnp.asarray(x) is x
  check(jnp.asarray(x, jnp.int32), np.ones(3, np.int32))
  check(jnp.copy(x), np.ones(3))
  check(jnp.asarray(np.ones((3, 4))[:, ::2]), np.ones((3, 2)))
  with pytest.raises(TypeError):
    jnp.array("abc")
  with pytest.raises(ValueError):
    jnp.array(None)


def test_arange_needs_concrete():
  from nbjax import api
  with pytest.raises(nbjax.core.ConcretizationTypeError):
    api.make_jaxpr(lambda n: jnp.arange(n))(3)
  # JAX's wording names the argument as the user meant it: arange(n) is the stop
  # (lax_numpy_test testArangeConcretizationError)
  for f, name in [(jnp.arange, "stop"), (lambda n: jnp.arange(n, 3), "start"),
                  (lambda n: jnp.arange(0, n), "stop"), (lambda n: jnp.arange(0, 5, n), "step")]:
    with pytest.raises(nbjax.core.ConcretizationTypeError,
                       match=f"It arose in the jnp.arange argument '{name}'\n"):
      nbjax.jit(f)(3)

# ----------------------------------------------------------------- manipulation


def test_reshape_transpose():
  x = rand((2, 3, 4), np.float32)
  jx = jnp.asarray(x)
  for shape in [(6, 4), (-1,), (4, -1), (2, 3, 2, 2), 24]:
    check(jnp.reshape(jx, shape), np.reshape(x, shape))
  check(jnp.reshape(jx, (4, 6), order="F"), np.reshape(x, (4, 6), order="F"))
  check(jx.reshape(4, 6), x.reshape(4, 6))
  check(jx.reshape((4, 6)), x.reshape((4, 6)))
  check(jnp.ravel(jx), np.ravel(x))
  check(jx.flatten(), x.flatten())
  with pytest.raises(TypeError):
    jnp.reshape(jx, (5, 5))
  check(jnp.transpose(jx), np.transpose(x))
  check(jnp.transpose(jx, (1, 0, 2)), np.transpose(x, (1, 0, 2)))
  check(jx.transpose(2, 0, 1), x.transpose(2, 0, 1))
  check(jx.T, x.T)
  check(jx.mT, np.swapaxes(x, -1, -2))
  check(jnp.swapaxes(jx, 0, 2), np.swapaxes(x, 0, 2))
  check(jnp.moveaxis(jx, 0, -1), np.moveaxis(x, 0, -1))
  check(jnp.moveaxis(jx, [0, 1], [2, 0]), np.moveaxis(x, [0, 1], [2, 0]))
  check(jnp.rollaxis(jx, 2), np.rollaxis(x, 2))
  y = rand((1, 3, 1), np.float32)
  check(jnp.squeeze(jnp.asarray(y)), np.squeeze(y))
  check(jnp.squeeze(jnp.asarray(y), axis=2), np.squeeze(y, axis=2))
  with pytest.raises(ValueError):
    jnp.squeeze(jnp.asarray(y), axis=1)
  check(jnp.expand_dims(jx, 1), np.expand_dims(x, 1))
  check(jnp.expand_dims(jx, (0, -1)), np.expand_dims(x, (0, -1)))
  for f in ("atleast_1d", "atleast_2d", "atleast_3d"):
    for s in [(), (3,), (2, 3), (2, 3, 4)]:
      v = rand(s, np.float32)
      check(getattr(jnp, f)(jnp.asarray(v)), getattr(np, f)(v))
  check(jnp.broadcast_to(jnp.arange(3), (2, 3)), np.broadcast_to(np.arange(3), (2, 3)))
  with pytest.raises(ValueError):
    jnp.broadcast_to(jnp.arange(3), (4,))
  for g, w in zip(jnp.broadcast_arrays(jnp.ones((2, 1)), jnp.arange(3)),
                  np.broadcast_arrays(np.ones((2, 1)), np.arange(3))):
    check(g, w)
  assert jnp.broadcast_shapes((2, 1), (3,)) == (2, 3)


def test_join_split():
  a, b = rand((2, 3), np.float32), rand((2, 3), np.float32)
  ja, jb = jnp.asarray(a), jnp.asarray(b)
  check(jnp.concatenate([ja, jb], 1), np.concatenate([a, b], 1))
  check(jnp.concatenate([ja, jb], axis=None), np.concatenate([a, b], axis=None))
  mixed = jnp.concatenate([ja, jnp.ones((1, 3), jnp.int32)])  # JAX: f32 + i32 -> f32
  check(mixed, np.concatenate([a, np.ones((1, 3), np.float32)]))
  with pytest.raises(ValueError):
    jnp.concatenate([jnp.float32(1), jnp.float32(2)])
  for axis in (0, 1, 2, -1):
    check(jnp.stack([ja, jb], axis), np.stack([a, b], axis))
  with pytest.raises(ValueError):
    jnp.stack([ja, jnp.ones(3)])
  for f in ("hstack", "vstack", "dstack", "column_stack"):
    check(getattr(jnp, f)([ja, jb]), getattr(np, f)([a, b]))
    check(getattr(jnp, f)([jnp.arange(3), jnp.arange(3)]), getattr(np, f)([np.arange(3)] * 2))
  x = rand((6, 4), np.float32)
  jx = jnp.asarray(x)
  for spec in (2, 3, [1, 4], [2, 2], np.array([3, 6])):
    for g, w in zip(jnp.split(jx, spec), np.split(x, spec)):
      check(g, w)
  for g, w in zip(jnp.array_split(jx, 4, axis=0), np.array_split(x, 4, axis=0)):
    check(g, w)
  for g, w in zip(jnp.hsplit(jx, 2), np.hsplit(x, 2)):
    check(g, w)
  with pytest.raises(ValueError):
    jnp.split(jx, 4)


def test_tile_repeat_flip_roll():
  x = rand((2, 3), np.float32)
  jx = jnp.asarray(x)
  for reps in (2, (2, 1), (1, 2, 2), (0, 1)):
    check(jnp.tile(jx, reps), np.tile(x, reps))
  check(jnp.tile(jnp.float32(2), 3), np.tile(np.float32(2), 3))
  for r, axis in ((2, None), (3, 0), (2, 1), ([1, 0, 2], 1), (0, 0)):
    check(jnp.repeat(jx, r, axis=axis), np.repeat(x, r, axis=axis))
  check(jnp.repeat(jx, 2, axis=0, total_repeat_length=3), np.repeat(x, 2, axis=0)[:3])
  check(jnp.repeat(jx, jnp.array([1, 2]), axis=0, total_repeat_length=5), x[[0, 1, 1, 1, 1]])
  traced = nbjax.jit(lambda r: jnp.repeat(jx, r, axis=1, total_repeat_length=5))(jnp.array([2, 0, 1]))
  check(traced, x[:, [0, 0, 2, 2, 2]])
  check(jx.repeat(2), x.repeat(2))
  # a 0-d operand: ``axis`` is not checked and one count fills a 1-d array (JAX 0.10.2)
  out = jnp.repeat(2.0, 3, axis=5)
  assert out.tolist() == [2.0] * 3 and out.weak_type
  check(jnp.repeat(np.int8(2), np.array([3]), axis=0), np.full(3, 2, np.int8))
  check(jnp.repeat(np.int8(2), 3, axis=0, total_repeat_length=5), np.full(5, 2, np.int8))
  check(nbjax.jit(lambda r: jnp.repeat(np.int8(2), r, axis=0, total_repeat_length=4))(3),
        np.full(4, 2, np.int8))
  with pytest.raises(ValueError, match="`repeat` with a scalar parameter `a` is only implemented "
                                       "for scalar values of the parameter `repeats`."):
    jnp.repeat(np.int8(2), np.array([3, 1]), axis=0)
  for axis in (None, 0, 1, (0, 1)):
    check(jnp.flip(jx, axis), np.flip(x, axis))
  check(jnp.fliplr(jx), np.fliplr(x))
  check(jnp.flipud(jx), np.flipud(x))
  for k in range(-1, 5):
    check(jnp.rot90(jx, k), np.rot90(x, k))
  for shift, axis in ((1, None), (-2, 1), (5, 0), ((1, 2), (0, 1)), (0, 1)):
    check(jnp.roll(jx, shift, axis), np.roll(x, shift, axis))


def test_pad():
  x = rand((3, 4), np.float32)
  jx = jnp.asarray(x)
  for pw in (1, (1, 2), ((0, 1), (2, 3)), ((5, 6), (7, 1))):
    for mode in ("constant", "edge", "wrap", "reflect", "symmetric"):
      check(jnp.pad(jx, pw, mode=mode), np.pad(x, pw, mode=mode))
  check(jnp.pad(jx, 1, constant_values=9), np.pad(x, 1, constant_values=9))
  check(jnp.pad(jx, ((1, 1), (2, 0)), constant_values=((1, 2), (3, 4))),
        np.pad(x, ((1, 1), (2, 0)), constant_values=((1, 2), (3, 4))))
  check(jnp.pad(jnp.arange(1), 3, mode="reflect"), np.pad(np.arange(1), 3, mode="reflect"))
  with pytest.raises(NotImplementedError, match="Unimplemented padding mode 'foo' for np.pad."):
    jnp.pad(jx, 1, mode="foo")


def test_where_clip_select():
  x = rand((3, 4), np.float32)
  jx = jnp.asarray(x)
  check(jnp.where(jx > 0, jx, 0), np.where(x > 0, x, 0))
  check(jnp.where(jx > 0, 1, jnp.arange(4)), np.where(x > 0, 1, np.arange(4)))
  check(jnp.where(jnp.arange(3), 1.0, 2.0), np.where(np.arange(3), 1.0, 2.0))
  for got, want in zip(jnp.where(jx > 0), np.where(x > 0)):
    check(got, want)
  check(jnp.clip(jx, -0.5, 0.5), np.clip(x, -0.5, 0.5))
  check(jnp.clip(jx, max=0.1), np.clip(x, None, 0.1))
  check(jx.clip(0), x.clip(0))
  assert jnp.clip(jnp.arange(5), 1, 3).dtype == np.int64
  check(jnp.select([jx < -1, jx > 1], [jx, -jx], 5.0), np.select([x < -1, x > 1], [x, -x], 5.0))


def test_searchsorted_index_dtype_past_int32_as_jax():
  """searchsorted's index dtype is int64 past int32 (JAX's testSearchsortedDtype, by
  eval_shape); with x64 off under 'warn' it warns, truncates and overflows as JAX's."""
  a32 = nbjax.ShapeDtypeStruct((2**31 - 1,), np.float32)
  a64 = nbjax.ShapeDtypeStruct((2**31,), np.float32)
  v = nbjax.ShapeDtypeStruct((), np.float32)
  assert nbjax.eval_shape(jnp.searchsorted, a32, v).dtype == np.int32
  old = nbjax.config.enable_x64
  try:
    nbjax.config.update("enable_x64", True)
    assert nbjax.eval_shape(jnp.searchsorted, a64, v).dtype == np.int64
    nbjax.config.update("enable_x64", False)
    with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in "
                      "searchsorted"):
      with pytest.raises(OverflowError, match="Python integer 2147483648 out of bounds"):
        nbjax.eval_shape(jnp.searchsorted, a64, v)
  finally:
    nbjax.config.update("enable_x64", old)


def test_sort_argsort_searchsorted():
  x = rand((4, 5), np.float32)
  x[0, 0] = np.nan
  jx = jnp.asarray(x)
  for axis in (None, 0, 1, -1):
    check(jnp.sort(jx, axis=axis), np.sort(x, axis=axis))
    check(jnp.argsort(jx, axis=axis), np.argsort(x, axis=axis, kind="stable"))
  ties = np.array([3, 1, 2, 1, 3, 2, 1], np.int32)
  check(jnp.argsort(jnp.asarray(ties)), np.argsort(ties, kind="stable"))
  check(jnp.argsort(jnp.asarray(ties), descending=True), np.argsort(-ties, kind="stable"))
  check(jnp.sort(jnp.asarray(ties), descending=True), np.sort(ties)[::-1])
  check(jx.sort(axis=0), np.sort(x, axis=0))
  a = np.sort(rand((11,), np.float32))
  v = np.concatenate([rand((6,), np.float32), a[[0, 3, 10]]])
  for side in ("left", "right"):
    check(jnp.searchsorted(jnp.asarray(a), jnp.asarray(v), side=side), np.searchsorted(a, v, side=side).astype(np.int32))
  ai = np.array([1, 2, 2, 2, 5, 7])
  for side in ("left", "right"):
    check(jnp.searchsorted(jnp.asarray(ai), jnp.arange(9), side=side), np.searchsorted(ai, np.arange(9), side=side).astype(np.int32))
  check(jnp.searchsorted(jnp.asarray(ai), 2), np.int32(np.searchsorted(ai, 2)))
  perm = rng.permutation(6)
  check(jnp.searchsorted(jnp.asarray(ai[perm]), 3, sorter=jnp.asarray(np.argsort(ai[perm]))),
        np.int32(np.searchsorted(ai[perm], 3, sorter=np.argsort(ai[perm]))))


def test_take_and_friends():
  x = rand((3, 5), np.float32)
  jx = jnp.asarray(x)
  idx = np.array([[0, 4], [-1, 2]])
  check(jnp.take(jx, jnp.asarray(idx), axis=1), np.take(x, idx, axis=1))
  check(jnp.take(jx, jnp.asarray(idx)), np.take(x, idx))
  check(jnp.take(jx, jnp.array([7, 0]), axis=1, mode="clip"), np.take(x, [7, 0], axis=1, mode="clip"))
  check(jnp.take(jx, jnp.array([7, 0]), axis=1, mode="wrap"), np.take(x, [7, 0], axis=1, mode="wrap"))
  out = jnp.take(jx, jnp.array([7, 0]), axis=1)  # default 'fill': NaN for out-of-bounds
  assert np.isnan(np.asarray(out)[:, 0]).all()
  check(jnp.take(jnp.arange(3), jnp.array([5]), fill_value=-1), np.array([-1]))
  with pytest.raises(IndexError):
    jnp.take(jnp.zeros((0,)), jnp.array([0]))
  order = np.argsort(x, axis=1)
  check(jnp.take_along_axis(jx, jnp.asarray(order), 1), np.take_along_axis(x, order, 1))
  i0 = np.argsort(x, axis=0)[:1]
  check(jnp.take_along_axis(jx, jnp.asarray(i0), 0), np.take_along_axis(x, i0, 0))
  check(jnp.take_along_axis(jx, jnp.array([[1], [0], [2]]), 1),
        np.take_along_axis(x, np.array([[1], [0], [2]]), 1))
  out = jnp.put_along_axis(jx, jnp.array([[1], [0], [2]]), 9.0, 1, inplace=False)
  want = x.copy()
  np.put_along_axis(want, np.array([[1], [0], [2]]), 9.0, 1)
  check(out, want)


def test_nonzero_family():
  x = rand((3, 4), np.int32) * (rng.random((3, 4)) < 0.5)
  jx = jnp.asarray(x)
  for g, w in zip(jnp.nonzero(jx), np.nonzero(x)):
    check(g, w)
  for g, w in zip(jx.nonzero(), x.nonzero()):
    check(g, w)
  n = np.count_nonzero(x)
  for g, w in zip(jnp.nonzero(jx, size=n + 2, fill_value=-1), np.nonzero(x)):
    check(g, np.concatenate([w, [-1, -1]]))
  for g, w in zip(jnp.nonzero(jx, size=1), np.nonzero(x)):
    check(g, w[:1])
  # size-1 axes before the last (flat index strides of 1): each index comes from its own axis
  y = np.zeros((3, 1, 2, 1), np.int32)
  y[2, 0, 1, 0] = y[0, 0, 0, 0] = -4
  for f in (lambda v: jnp.nonzero(v, size=4, fill_value=(9, 8, 7, 6)),
            nbjax.jit(lambda v: jnp.nonzero(v, size=4, fill_value=(9, 8, 7, 6)))):
    for g, w, fv in zip(f(y), np.nonzero(y), (9, 8, 7, 6)):
      check(g, np.concatenate([w, [fv, fv]]))
  # JAX: an empty input (or size 0) gives zeros, fill_value unused
  for g in jnp.nonzero(np.zeros((3, 0)), size=2, fill_value=7):
    check(g, np.array([0, 0]))
  check(jnp.argwhere(np.zeros((3, 0)), size=2, fill_value=7), np.zeros((2, 2), np.int64))
  check(jnp.flatnonzero(np.zeros(0), size=0, fill_value=7), np.zeros(0, np.int64))
  # the padding is JAX's where(mask, fill_value, index): a float fill gives weak float indices
  g, = jnp.nonzero(np.array([0, 1, 1]), size=5, fill_value=2.5)
  check(g, np.array([1.0, 2.0, 2.5, 2.5, 2.5]))
  assert g.weak_type
  with pytest.raises(ValueError, match=r"fill_value must be a scalar or a tuple of length 2; "
                     r"got \[1, 2\]"):
    jnp.nonzero(jx, size=5, fill_value=[1, 2])
  with pytest.raises(ValueError, match="fill_value must be a scalar or a tuple of length 2"):
    jnp.nonzero(jx, size=5, fill_value=np.array([1, 2]))
  with pytest.raises(ValueError, match="argument 0 has length 1"):
    jnp.nonzero(jx, size=5, fill_value=(1,))
  check(jnp.flatnonzero(jx), np.flatnonzero(x))
  check(jnp.argwhere(jx), np.argwhere(x))
  check(jnp.argwhere(jnp.int32(3)), np.argwhere(np.int32(3)))
  check(jnp.extract(jx > 0, jx), np.extract(x > 0, x))
  check(jnp.compress(np.array([True, False, True]), jx, axis=0), np.compress([True, False, True], x, axis=0))
  check(jnp.unique(jnp.array([3, 1, 2, 3, 1])), np.unique([3, 1, 2, 3, 1]))
  check(jnp.unique(jnp.array([np.nan, 1.0, np.nan])), np.unique([np.nan, 1.0, np.nan]))
  with pytest.raises(ValueError):
    jnp.nonzero(jnp.int32(1))


def test_diag_trace():
  x = rand((4, 5), np.float32)
  jx = jnp.asarray(x)
  for k in (-5, -2, 0, 1, 4, 6):
    check(jnp.diagonal(jx, k), np.diagonal(x, k))
    check(jnp.diag(jx, k), np.diag(x, k))
    check(jnp.trace(jx, k), np.trace(x, k))
  y = rand((2, 3, 4), np.float32)
  check(jnp.diagonal(jnp.asarray(y), 1, 2, 0), np.diagonal(y, 1, 2, 0))
  check(jnp.trace(jnp.asarray(y), axis1=1, axis2=2), np.trace(y, axis1=1, axis2=2))
  v = rand((3,), np.float32)
  for k in (-2, 0, 1):
    check(jnp.diag(jnp.asarray(v), k), np.diag(v, k))
  check(jnp.diagflat(jnp.asarray(y[0])), np.diagflat(y[0]))
  check(jx.diagonal(), x.diagonal())
  check(jx.trace(), x.trace())

# ----------------------------------------------------------------- products


def test_dot_family():
  shapes = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
            ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 4)),
            ((3, 1, 2, 3), (4, 3, 2)), ((0, 3), (3, 2))]
  for s1, s2 in shapes:
    a, b = rand(s1, np.float32), rand(s2, np.float32)
    check(jnp.matmul(jnp.asarray(a), jnp.asarray(b)), np.matmul(a, b))
    check(jnp.asarray(a) @ jnp.asarray(b), a @ b)
  for s1, s2 in [((), (3,)), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 3), (4, 3, 5))]:
    a, b = rand(s1, np.float64), rand(s2, np.float64)
    check(jnp.dot(jnp.asarray(a), jnp.asarray(b)), np.dot(a, b))
  a, b = rand((2, 3), np.int32), rand((3, 2), np.int32)
  check(jnp.matmul(jnp.asarray(a), jnp.asarray(b)), a @ b)
  check(jnp.matmul(jnp.asarray(a), jnp.asarray(b.astype(np.float32))), a @ b.astype(np.float32), dtype=False)
  assert jnp.matmul(jnp.asarray(a), jnp.asarray(b.astype(np.float32))).dtype == np.float32
  ab, bb = rand((2, 3), bool), rand((3, 2), bool)
  check(jnp.matmul(jnp.asarray(ab), jnp.asarray(bb)), ab @ bb)
  z1, z2 = rand((3,), np.complex64), rand((3,), np.complex64)
  check(jnp.vdot(jnp.asarray(z1), jnp.asarray(z2)), np.vdot(z1, z2))
  a, b = rand((2, 3), np.float32), rand((4, 3), np.float32)
  check(jnp.inner(jnp.asarray(a), jnp.asarray(b)), np.inner(a, b))
  check(jnp.outer(jnp.asarray(a), jnp.asarray(b)), np.outer(a, b))
  a, b = rand((2, 3, 4), np.float32), rand((3, 4, 5), np.float32)
  check(jnp.tensordot(jnp.asarray(a), jnp.asarray(b)), np.tensordot(a, b))
  check(jnp.tensordot(jnp.asarray(a), jnp.asarray(b), axes=([1], [0])), np.tensordot(a, b, axes=([1], [0])))
  check(jnp.tensordot(jnp.asarray(a), jnp.asarray(b), axes=0), np.tensordot(a, b, axes=0))
  check(jnp.kron(jnp.asarray(a[0]), jnp.asarray(b[0])), np.kron(a[0], b[0]))
  check(jnp.asarray(a[0]).dot(jnp.asarray(b[0])), a[0].dot(b[0]))
  with pytest.raises(ValueError):
    jnp.matmul(jnp.float32(1), jnp.ones(2))


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]), ("i,i->", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]), ("...i,...i", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("iij->j", [(3, 3, 2)]),
    ("i...->...", [(2, 3, 4)]), ("abc,cd,ad->b", [(2, 3, 4), (4, 5), (2, 5)]),
    ("ij,ij->i", [(2, 3), (2, 3)]), ("ij,kj->ikj", [(2, 3), (4, 3)]), ("i->i", [(0,)]),
    ("ab,b->a", [(1, 3), (3,)]), ("i,i,i->i", [(3,), (3,), (3,)]),
]


EINSUM += [("ij,jk,kl->il", [(20, 2), (2, 30), (30, 3)]), ("i,ij,jk,k->", [(4,), (4, 5), (5, 6), (6,)]),
           ("ijk,jl,lk->i", [(3, 4, 5), (4, 6), (6, 5)]), ("ii,ij,j->", [(4, 4), (4, 5), (5,)])]


@pytest.mark.parametrize("spec,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum(spec, shapes):
  ops = [rand(s, np.float64) for s in shapes]
  for optimize in ("auto", False, "optimal", np.einsum_path(spec, *ops)[0]):
    check(jnp.einsum(spec, *map(jnp.asarray, ops), optimize=optimize), np.einsum(spec, *ops))
  check(nbjax.jit(lambda *o: jnp.einsum(spec, *o))(*ops), np.einsum(spec, *ops))


def test_einsum_contracts_in_the_planned_order():
  # (20x2 @ 2x30) @ 30x3 costs 1320 multiply-adds, 20x2 @ (2x30 @ 30x3) 300: the planner's
  ops = [rand(s, np.float64) for s in [(20, 2), (2, 30), (30, 3)]]
  assert jnp.einsum_path("ij,jk,kl->il", *ops)[0] == np.einsum_path("ij,jk,kl->il", *ops)[0]
  jaxpr = str(nbjax.make_jaxpr(lambda *o: jnp.einsum("ij,jk,kl->il", *o))(*ops))
  assert "f64[2,3]" in jaxpr and "f64[20,30]" not in jaxpr
  jaxpr = str(nbjax.make_jaxpr(lambda *o: jnp.einsum("ij,jk,kl->il", *o, optimize=False))(*ops))
  assert "f64[20,30]" in jaxpr


def test_einsum_misc():
  a, b = rand((2, 3), np.float32), rand((3, 4), np.int32)
  got = jnp.einsum("ij,jk->ik", jnp.asarray(a), jnp.asarray(b))
  assert got.dtype == np.float32
  check(got, np.einsum("ij,jk->ik", a, b.astype(np.float32)), dtype=False)
  check(jnp.einsum(jnp.asarray(a), [0, 1], jnp.asarray(b), [1, 2], [0, 2]),
        np.einsum(a, [0, 1], b.astype(np.float32), [1, 2], [0, 2]), dtype=False)
  with pytest.raises(ValueError):
    jnp.einsum("ij->k", jnp.asarray(a))
  with pytest.raises(ValueError):
    jnp.einsum("ij,jk", jnp.asarray(a), jnp.asarray(a))

# ----------------------------------------------------------------- linalg


def _spd(n, batch=()):
  a = rng.standard_normal(batch + (n, n))
  return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_linalg():
  la = jnp.linalg
  for batch in ((), (2,)):
    a = rng.standard_normal(batch + (4, 4))
    b = rng.standard_normal(batch + (4, 2))
    ja = jnp.asarray(a)
    check(la.solve(ja, jnp.asarray(b)), np.linalg.solve(a, b), rtol=1e-9, atol=1e-9)
    check(la.inv(ja), np.linalg.inv(a), rtol=1e-9, atol=1e-9)
    check(la.det(ja), np.linalg.det(a), rtol=1e-9)
    s, ld = la.slogdet(ja)
    es, eld = np.linalg.slogdet(a)
    check(s, es)
    check(ld, eld, rtol=1e-9)
    spd = _spd(4, batch)
    check(la.cholesky(jnp.asarray(spd)), np.linalg.cholesky(spd), rtol=1e-9, atol=1e-9)
    check(la.cholesky(jnp.asarray(spd), upper=True), np.swapaxes(np.linalg.cholesky(spd), -1, -2),
          rtol=1e-9, atol=1e-9)
    w, v = la.eigh(jnp.asarray(spd))
    ew, _ = np.linalg.eigh(spd)
    check(w, ew, rtol=1e-9)
    recon = np.asarray(v) @ (np.asarray(w)[..., None] * np.swapaxes(np.asarray(v), -1, -2))
    np.testing.assert_allclose(recon, spd, rtol=1e-9, atol=1e-9)
    check(la.eigvalsh(jnp.asarray(spd)), ew, rtol=1e-9)
    m = rng.standard_normal(batch + (4, 3))
    q, r = la.qr(jnp.asarray(m))
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), m, atol=1e-9)
    assert q.shape == batch + (4, 3)
    assert la.qr(jnp.asarray(m), mode="complete").Q.shape == batch + (4, 4)
    u, sv, vh = la.svd(jnp.asarray(m), full_matrices=False)
    check(sv, np.linalg.svd(m, compute_uv=False), rtol=1e-9)
    np.testing.assert_allclose((np.asarray(u) * np.asarray(sv)[..., None, :]) @ np.asarray(vh), m, atol=1e-9)
    check(la.svd(jnp.asarray(m), compute_uv=False), np.linalg.svd(m, compute_uv=False), rtol=1e-9)
  a = rng.standard_normal((3, 3))
  v = rng.standard_normal(3)
  check(la.solve(jnp.asarray(a), jnp.asarray(v)), np.linalg.solve(a, v), rtol=1e-9, atol=1e-9)
  check(la.det(jnp.zeros((3, 3))), np.float64(0.0))
  s, ld = la.slogdet(jnp.zeros((2, 2)))
  assert float(s) == 0 and float(ld) == -np.inf
  check(la.det(jnp.asarray(a, jnp.float32)), np.linalg.det(a.astype(np.float32)), rtol=1e-4)
  check(la.matrix_power(jnp.asarray(a), 3), np.linalg.matrix_power(a, 3), rtol=1e-9)
  check(la.matrix_power(jnp.asarray(a), -2), np.linalg.matrix_power(a, -2), rtol=1e-8)
  with pytest.raises(ValueError):
    la.inv(jnp.ones((2, 3)))


def test_det_derivatives_are_the_adjugate_at_singular_matrices():
  la = jnp.linalg
  g = nbjax.grad(la.det)
  # 2x2 and 3x3: the cofactor expansion (JAX's), its gradient the cofactor matrix everywhere
  check(g(jnp.asarray([[1., 2.], [2., 4.]])), np.array([[4., -2.], [-2., 1.]]))
  check(g(jnp.zeros((3, 3))), np.zeros((3, 3)))
  a = rng.standard_normal((4, 4))
  check(la.det(jnp.asarray(a)), np.linalg.det(a), rtol=1e-12)
  check(g(jnp.asarray(a)), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-9)
  # n > 3 at rank n-1: the adjugate (finite, rank one), not det * inv (NaN)
  s = a.copy()
  s[3] = s[0] + s[1]
  adj = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(s, i, 0), j, 1))
                   for i in range(4)] for j in range(4)])
  check(g(jnp.asarray(s)), adj.T, rtol=1e-7, atol=1e-9)
  s[2] = s[0]  # rank n-2: every cofactor vanishes
  check(g(jnp.asarray(s)), np.zeros((4, 4)), atol=1e-9)
  _, t = nbjax.jvp(la.det, (jnp.asarray(a),), (jnp.asarray(a.T),))
  check(t, np.linalg.det(a) * np.trace(np.linalg.inv(a) @ a.T), rtol=1e-9)
  with pytest.raises(ValueError, match=re.escape("Argument to _det() must have shape [..., n, n], "
                                                 "got (2, 3)")):
    la.det(jnp.ones((2, 3)))


def test_norm():
  x = rng.standard_normal((3, 4))
  jx = jnp.asarray(x)
  la = jnp.linalg
  check(la.norm(jx), np.linalg.norm(x))
  for ord_ in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
    check(la.norm(jx, ord_), np.linalg.norm(x, ord_), rtol=1e-9)
  for ord_ in (None, 0, 1, 2, 3, 0.5, np.inf, -np.inf):
    check(la.norm(jx, ord_, axis=1), np.linalg.norm(x, ord_, axis=1), rtol=1e-9)
    check(la.norm(jx[0], ord_), np.linalg.norm(x[0], ord_), rtol=1e-9)
  check(la.norm(jx, axis=0, keepdims=True), np.linalg.norm(x, axis=0, keepdims=True))
  check(la.norm(jx, 1, axis=(1, 0), keepdims=True), np.linalg.norm(x, 1, axis=(1, 0), keepdims=True))
  z = rand((3,), np.complex128)
  check(la.norm(jnp.asarray(z)), np.linalg.norm(z))
  check(la.vector_norm(jx, ord=1), np.linalg.vector_norm(x, ord=1))
  check(la.matrix_norm(jx), np.linalg.matrix_norm(x))

# ----------------------------------------------------------------- comparisons of arrays


def test_isclose_allclose_array_equal():
  a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-10, 1.0])
  b = np.array([1.0 + 1e-9, np.nan, np.inf, np.inf, 0.0, 1.1])
  for en in (False, True):
    check(jnp.isclose(jnp.asarray(a), jnp.asarray(b), equal_nan=en), np.isclose(a, b, equal_nan=en))
  check(jnp.isclose(jnp.arange(3), jnp.array([0, 1, 3])), np.array([True, True, False]))
  assert bool(jnp.allclose(jnp.ones(3), jnp.ones(3) + 1e-9))
  assert not bool(jnp.allclose(jnp.ones(3), jnp.array([1.0, 2.0, 1.0])))
  assert bool(jnp.array_equal(jnp.arange(3), jnp.arange(3)))
  assert not bool(jnp.array_equal(jnp.arange(3), jnp.arange(4)))
  assert bool(jnp.array_equal(jnp.array([np.nan]), jnp.array([np.nan]), equal_nan=True))
  assert bool(jnp.array_equiv(jnp.ones((2, 3)), jnp.ones(3)))
  assert not bool(jnp.array_equiv(jnp.ones((2, 3)), jnp.ones(2)))

# ----------------------------------------------------------------- under transformations


def test_under_jit_vmap_jvp():
  f = lambda x: jnp.sum(jnp.where(x > 0, x ** 2, -x) * 2.0, axis=-1)
  x = rand((3, 4), np.float32)
  want = np.sum(np.where(x > 0, x ** 2, -x) * 2.0, axis=-1)
  check(nbjax.jit(f)(jnp.asarray(x)), want)
  check(nbjax.vmap(f)(jnp.asarray(x)), want)
  _, t = nbjax.jvp(f, (jnp.asarray(x),), (jnp.ones_like(jnp.asarray(x)),))
  check(t, np.sum(np.where(x > 0, 2 * x, -1.0) * 2.0, axis=-1))
  g = lambda x: jnp.einsum("ij,kj->ik", x, x)[0, 1:] + jnp.linalg.norm(x)
  check(nbjax.jit(g)(jnp.asarray(x)), np.einsum("ij,kj->ik", x, x)[0, 1:] + np.linalg.norm(x))


def test_aliases_and_extras():
  x = rand((2, 3), np.float32)
  jx = jnp.asarray(x)
  check(jnp.permute_dims(jx, (1, 0)), x.T)
  check(jnp.matrix_transpose(jx), x.T)
  check(jnp.concat([jx, jx]), np.concatenate([x, x]))
  check(jnp.cumulative_sum(jx, axis=1), np.cumsum(x, axis=1))
  check(jnp.positive(jx), x)
  check(jnp.bitwise_not(jnp.arange(3)), np.bitwise_not(np.arange(3)))
  check(jnp.astype(jx, jnp.int32), x.astype(np.int32))
  check(jnp.vecdot(jx, jx), np.sum(x * x, axis=-1))
  z = np.array([1 + 0j, 2 + 1j])
  check(jnp.isreal(jnp.asarray(z)), np.isreal(z))
  check(jnp.iscomplex(jnp.asarray(z)), np.iscomplex(z))
  y = rand((4, 2, 6), np.float32)
  for g, w in zip(jnp.vsplit(jnp.asarray(y), 2), np.vsplit(y, 2)):
    check(g, w)
  for g, w in zip(jnp.dsplit(jnp.asarray(y), 3), np.dsplit(y, 3)):
    check(g, w)
  for g, w in zip(jnp.diag_indices(3), np.diag_indices(3)):
    check(g, w)
  for g, w in zip(jnp.triu_indices(3, 1), np.triu_indices(3, 1)):
    check(g, w)
  check(jnp.linalg.trace(jnp.asarray(y[:, :, :2])), np.trace(y[:, :, :2], axis1=-2, axis2=-1))
  check(jnp.linalg.svdvals(jnp.asarray(y[0])), np.linalg.svd(y[0], compute_uv=False))


def test_alias_names():
  # JAX's aliases are functions of their own name (jnp.acos.__name__ == "acos"), documented
  # as "Alias of :func:`jax.numpy.arccos`".
  for name, of in [("acos", "arccos"), ("asinh", "arcsinh"), ("atan2", "arctan2"), ("pow", "power"),
                   ("amax", "max"), ("around", "round"), ("bitwise_invert", "invert"),
                   ("conj", "conjugate"), ("degrees", "rad2deg")]:
    f = getattr(jnp, name)
    assert (f.__name__, f.__qualname__) == (name, name)
    assert f.__doc__.startswith(f"Alias of :func:`nbjax.numpy.{of}`"), (name, f.__doc__)
    assert f is not getattr(jnp, of)


def test_linalg_lstsq_cond_tensor_multi_dot():
  la = jnp.linalg
  a = rng.standard_normal((6, 4))
  for b in (rng.standard_normal(6), rng.standard_normal((6, 3))):
    got, want = la.lstsq(a, b), np.linalg.lstsq(a, b, rcond=None)
    for g, w in zip(got, want):
      np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-12)
    assert got[2].dtype == np.int64 and got[0].shape == want[0].shape  # (a plain tuple, as JAX)
  jit_x = nbjax.jit(lambda a, b: la.lstsq(a, b)[0])(a, b)
  np.testing.assert_allclose(np.asarray(jit_x), np.linalg.lstsq(a, b, rcond=None)[0], rtol=1e-9)
  rank_def = np.outer(np.arange(1.0, 5.0), np.ones(3))             # rank 1, 4x3
  assert int(la.lstsq(rank_def, np.ones(4))[2]) == 1
  assert la.lstsq(rank_def, np.ones(4), numpy_resid=True)[1].shape == (0,)
  with pytest.raises(TypeError, match="Array must be two-dimensional"):
    la.lstsq(np.ones((2, 2, 2)), np.ones(2))
  m = rng.standard_normal((3, 5, 5))
  for p in (None, 2, -2, 1, -1, np.inf, -np.inf, "fro"):
    np.testing.assert_allclose(np.asarray(la.cond(m, p)), np.linalg.cond(m, p), rtol=1e-8)
  assert np.isinf(float(la.cond(np.array([[1.0, 2.0], [0.0, 0.0]]), 1)))
  with pytest.raises(ValueError, match="must be square"):
    la.cond(np.ones((2, 3)), 1)
  t = rng.standard_normal((4, 6, 8, 3))
  np.testing.assert_allclose(np.asarray(la.tensorinv(t, 2)), np.linalg.tensorinv(t, 2), rtol=1e-8)
  with pytest.raises(ValueError, match="ind must be a positive integer"):
    la.tensorinv(t, 0)
  a3, b2 = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 3))
  np.testing.assert_allclose(np.asarray(la.tensorsolve(a3, b2)), np.linalg.tensorsolve(a3, b2),
                             rtol=1e-8)
  a3 = rng.standard_normal((6, 2, 3))
  np.testing.assert_allclose(np.asarray(la.tensorsolve(a3, b2, axes=(0,))),
                             np.linalg.tensorsolve(a3, b2, axes=(0,)), rtol=1e-8)
  for shapes in ([(10,), (10, 100), (100, 5), (5,)], [(10, 30), (30, 5), (5, 60)],
                 [(3,), (3,)], [(4, 3), (3,)]):
    arrs = [rng.standard_normal(s) for s in shapes]
    np.testing.assert_allclose(np.asarray(la.multi_dot(arrs)), np.linalg.multi_dot(arrs),
                               rtol=1e-9)
  # (10x100 @ 100x5) first: no 10x5... the planner keeps the 100-wide product out
  jaxpr = str(nbjax.make_jaxpr(la.multi_dot)([np.ones((10, 100)), np.ones((100, 5)),
                                              np.ones((5, 50))]))
  assert "f64[100,50]" not in jaxpr and "f64[10,5]" in jaxpr
  with pytest.raises(ValueError, match="at least two arrays"):
    la.multi_dot([np.ones(3)])


def test_array_overflow_messages_as_jax():
  with pytest.raises(OverflowError, match="^Python integer -1 out of bounds for uint32$"):
    jnp.asarray(-1, dtype=jnp.uint32)
  with pytest.raises(OverflowError, match="^Python integer 1099511627776 out of bounds for int32$"):
    jnp.array([1, 2**40], jnp.int32)
  with pytest.raises(OverflowError, match="^Python int 9223372036854775808 too large to convert "
                     "to int64$"):
    jnp.asarray(2**63)
  assert int(jnp.array(2**63, dtype=jnp.uint64)) == 2**63


def test_jax010_inexact_and_reduction_dtypes():
  """JAX 0.10 (x64): integers of up to 32 bits and bool go to float32, 64-bit ints to
  float64; reductions give strong types; cumsum/cumprod keep narrow ints (bool -> int64),
  cumulative_sum promotes them; sum/prod of bool without promotion give int32."""
  i32, i8, b = jnp.ones(3, jnp.int32), jnp.ones(3, jnp.int8), jnp.ones(3, bool)
  for f in (jnp.sin, jnp.sqrt, lambda x: x / x, jnp.mean, jnp.var, jnp.median, jnp.nanmean):
    assert f(i32).dtype == np.float32 and f(i8).dtype == np.float32 and f(b).dtype == np.float32
    assert f(jnp.ones(3, jnp.int64)).dtype == np.float64
  assert jnp.sin(1).dtype == np.float64 and jnp.float_power(jnp.ones(2, jnp.float32), 2).dtype == np.float32
  assert jnp.angle(i32).dtype == np.float64
  assert jnp.fft.fft(i32).dtype == np.complex64 and jnp.fft.rfft(jnp.arange(4)).dtype == np.complex128
  assert jnp.sum(b, promote_integers=False).dtype == np.int32
  assert jnp.sum(i8).dtype == np.int64 and jnp.sum(i8, promote_integers=False).dtype == np.int8
  assert not dtypes.is_weakly_typed(jnp.sum(3.0)) and not dtypes.is_weakly_typed(jnp.cumsum(3))
  check(jnp.cumsum(jnp.arange(16, 20, dtype=jnp.int8) * 8), np.array([-128, 8, -104, 48], np.int8))
  assert jnp.cumprod(i32).dtype == np.int32 and jnp.cumsum(b).dtype == np.int64
  assert jnp.cumulative_sum(i8).dtype == np.int64
  assert jnp.cumulative_sum(jnp.ones(2, jnp.uint8), include_initial=True).dtype == np.uint64
  assert jnp.cumulative_prod(i32, include_initial=True).dtype == np.int32


def test_jax010_integer_division_and_unary_errors():
  a = jnp.array([-7, -3, 0, 3, 7], jnp.int32)
  check(jnp.floor_divide(a, 0), np.array([-2, -2, -1, -2, -2], np.int32))  # XLA's x / 0 = -1
  check(jnp.floor_divide(jnp.array([5], jnp.uint8), jnp.array([0], jnp.uint8)),
        np.array([255], np.uint8))
  q, r = jnp.divmod(jnp.array([3.0, -7.5]), jnp.array([-0.0, 2.0]))
  check(q, np.array([-np.inf, -4.0]))
  check(r, np.array([np.nan, 0.5]))
  with pytest.raises(TypeError, match="neg does not accept dtype bool"):
    jnp.negative(jnp.array([True]))
  with pytest.raises(TypeError, match="sign does not accept dtype bool"):
    jnp.sign(jnp.array([True]))
  with pytest.raises(ValueError, match="not inexact"):
    jnp.round(jnp.array([True]))


def test_jax010_sort_search_where_errors():
  x = jnp.array([5, 1, 4, 2, 3])
  check(jnp.partition(x, 2), np.array([1, 2, 3, 5, 4]))  # JAX's layout: top_k on both sides
  check(jnp.argpartition(x, 2), np.array([1, 3, 4, 0, 2], np.int32))
  check(jnp.partition(jnp.array([5, 0, 4, 2], jnp.uint8), 1), np.array([0, 2, 5, 4], np.uint8))
  check(jnp.searchsorted(jnp.array([1.0, 2.0, 2.0, 3.0]), jnp.array([np.nan, 2.0])),
        np.array([4, 1], np.int32))  # NaN sorts last
  check(jnp.digitize(jnp.array([0.5, 1.0]), jnp.array([1.0, 2.0]), method="compare_all"),
        np.array([0, 1], np.int32))
  with pytest.raises(ValueError, match="invalid argument method='bogus'"):
    jnp.searchsorted(x, 2, method="bogus")
  with pytest.raises(ValueError, match="invalid argument side='bogus'"):
    jnp.searchsorted(x, 2, side="bogus")
  with pytest.raises(TypeError, match="'kind' argument to sort"):
    jnp.sort(x, kind="quicksort")
  with pytest.raises(TypeError, match="'order' argument to argsort"):
    jnp.argsort(x, order=["a"])
  with pytest.raises(ValueError, match="three-term where"):
    jnp.where(x > 2, 1, 2, size=1)
  with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
    jnp.where(x > 2, 1)


# ----------------------------------------------------------------- JAX 0.10 differential fixes
# (expected values from NumPy, or written out where JAX's rule differs from NumPy's)


@pytest.mark.parametrize("mode", ["linear_ramp", "maximum", "minimum", "mean", "median"])
def test_pad_ramp_and_stat_modes_match_numpy(mode):
  x = np.arange(1, 13, dtype=np.float32).reshape(3, 4) ** 1.5
  for pw in (1, (1, 2), ((2, 3), (0, 4))):
    check(jnp.pad(jnp.asarray(x), pw, mode), np.pad(x, pw, mode), rtol=1e-5)
  if mode == "linear_ramp":
    for ev in (5, (1, -2), ((1, 2), (3, 4))):
      check(jnp.pad(jnp.asarray(x), 2, mode, end_values=ev), np.pad(x, 2, mode, end_values=ev),
            rtol=1e-5)
  else:
    for sl in (2, (1, 3), ((1, 2), (2, 1)), 10):
      check(jnp.pad(jnp.asarray(x), 2, mode, stat_length=sl),
            np.pad(x, 2, mode, stat_length=sl), rtol=1e-5)
    with pytest.raises(ValueError, match="stat_length of 0 yields no value for padding"):
      jnp.pad(jnp.asarray(x), 1, mode, stat_length=0)


def test_pad_stat_modes_round_integers():
  x = np.array([1, 2, 4, 8], np.int32)
  got = jnp.pad(jnp.asarray(x), 2, "mean")
  assert got.dtype == np.int32
  np.testing.assert_array_equal(got, [4, 4, 1, 2, 4, 8, 4, 4])  # mean 3.75 rounds to 4
  np.testing.assert_array_equal(jnp.pad(jnp.asarray(x), 1, "median", stat_length=2),
                                [2, 1, 2, 4, 8, 6])  # medians 1.5 -> 2, 6.0


def test_pad_reflect_type_odd():
  x = np.array([1., 5, 2, 8, 3])
  for mode in ("reflect", "symmetric"):
    for pw in (1, 3, 7, (2, 9)):
      check(jnp.pad(jnp.asarray(x), pw, mode, reflect_type="odd"),
            np.pad(x, pw, mode, reflect_type="odd"))
  x2 = np.arange(12.).reshape(3, 4) ** 2
  check(jnp.pad(jnp.asarray(x2), ((2, 9), (5, 1)), "reflect", reflect_type="odd"),
        np.pad(x2, ((2, 9), (5, 1)), "reflect", reflect_type="odd"))
  with pytest.raises(TypeError, match="lax.concatenate requires arguments to have the same"):
    jnp.pad(jnp.asarray([True, False]), 1, "reflect", reflect_type="odd")


def test_pad_callable_mode_and_kwargs():
  def padder(vec, pad_width, iaxis, kwargs):
    vec = vec.at[:pad_width[0]].set(kwargs.get("padder", 10))
    return vec.at[vec.shape[0] - pad_width[1]:].set(-1)
  x = np.arange(6.).reshape(2, 3)

  def np_padder(vec, pad_width, iaxis, kwargs):
    vec[:pad_width[0]] = kwargs.get("padder", 10)
    vec[vec.shape[0] - pad_width[1]:] = -1
  check(jnp.pad(jnp.asarray(x), 2, padder, padder=4), np.pad(x, 2, np_padder, padder=4))
  with pytest.raises(ValueError, match="unsupported keyword arguments for mode 'edge'"):
    jnp.pad(jnp.asarray(x), 1, "edge", constant_values=2)
  with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
    jnp.pad(jnp.asarray(x), 1, "mean", stat_length=[1, 2])


def test_pad_width_and_constant_values_forms():
  x = np.arange(12.).reshape(3, 4)
  jx = jnp.asarray(x)
  with pytest.raises(ValueError, match=r"pad_width with nd=2 has unsupported shape \(2, 1\)\. "
                     r"Valid shapes are \(2, 2\)"):
    jnp.pad(jx, ((1,), (2,)))
  with pytest.raises(TypeError, match="`pad_width` must be of integral type."):
    jnp.pad(jx, 1.5)
  check(jnp.pad(jx, 2, constant_values=(1, 2)), np.pad(x, 2, constant_values=(1, 2)))
  check(jnp.pad(jx, 2, constant_values=((5,), (6,))), np.pad(x, 2, constant_values=((5,), (6,))))
  with pytest.raises(ValueError, match="constant_values has unsupported shape \\(3,\\)"):
    jnp.pad(jx, 2, constant_values=[1, 2, 3])
  with pytest.raises(ValueError, match="Cannot apply 'edge' padding to empty axis"):
    jnp.pad(jnp.zeros((0, 3)), 1, "edge")
  # a 0-d array is returned as it is, whatever the mode
  assert jnp.pad(jnp.asarray(3.0), 2, "mean").shape == ()
  # complex constant to a bool array: converted as an array (real part), as JAX
  np.testing.assert_array_equal(jnp.pad(jnp.asarray([True]), 1, constant_values=1j),
                                [False, True, False])


def test_pad_complex_stat_modes_lexicographic():
  c = np.array([1 + 2j, 1 - 1j, 3 + 0j, -1 + 5j, 1 + 2j])
  got = jnp.pad(jnp.asarray(c), (1, 2), "maximum", stat_length=2)
  np.testing.assert_array_equal(got, [1 + 2j, *c, 1 + 2j, 1 + 2j])  # max(-1+5j, 1+2j)
  got = jnp.pad(jnp.asarray(c), 1, "minimum")
  np.testing.assert_array_equal(got, [-1 + 5j, *c, -1 + 5j])


def test_linspace_formula_and_retstep():
  # JAX computes start * (1 - t) + stop * t (t = i / div): integer outputs are floored
  np.testing.assert_array_equal(jnp.linspace(5, np.array([1, 2, 3]), 3, endpoint=False,
                                             dtype=np.int32),
                                [[5, 5, 5], [3, 3, 4], [2, 3, 3]])
  for num, endpoint in ((0, True), (1, True)):
    out, step = jnp.linspace(0, 1, num, endpoint=endpoint, retstep=True)
    assert np.isnan(step) and step.dtype == np.float64
  out, step = jnp.linspace(2., 3., 1, endpoint=False, retstep=True)
  assert float(step) == 1.0
  check(jnp.linspace(0., 10., 7, dtype=np.float32), np.linspace(0, 10, 7, dtype=np.float32))
  check(jnp.logspace(0., 3., 4, dtype=np.float32), np.logspace(0, 3, 4, dtype=np.float32))
  check(jnp.geomspace(-1., -100., 3), np.geomspace(-1, -100, 3))
  check(jnp.geomspace(np.array([1., 2]), 10., 4, axis=1),
        np.geomspace(np.array([1., 2]), 10., 4, axis=1))


def test_einsum_dot_weak_scalar_narrowing_errors():
  # JAX's products hand dot_general the operands unpromoted: a weak Python int (int64) with
  # an int8 array is the "wider" operand and the int8 accumulation type is refused
  msg = ("`preferred_element_type` must not be narrower than the original type, got "
         "preferred_element_type of int8 for result type of int64.")
  i8 = jnp.ones((2, 3), np.int8)
  for f in (lambda: jnp.dot(i8, 2), lambda: jnp.einsum("ij,->ij", i8, 2),
            lambda: jnp.tensordot(i8, 2, 0), lambda: jnp.dot(i8, jnp.asarray(2))):
    with pytest.raises(TypeError, match=re.escape(msg)):
      f()
  with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
    jnp.vdot(jnp.ones(3, np.int8), 2)  # (the shape check comes first)
  with pytest.raises(TypeError, match="complex64 for result type of complex128"):
    jnp.dot(jnp.ones(3, np.float32), 2j)
  # weak floats are never "narrower": the result keeps the array's dtype
  assert jnp.dot(jnp.ones(3, np.float32), 2.5).dtype == np.float32
  assert jnp.einsum("i,->i", jnp.ones(3, np.float16), 2.0).dtype == np.float16
  # non-weak mixed dtypes promote as usual
  got = jnp.einsum("ij,jk->ik", i8, jnp.ones((3, 2), np.int16))
  assert got.dtype == np.int16
  np.testing.assert_array_equal(got, np.full((2, 2), 3))


def test_dot_preferred_element_type_bool_and_complex():
  b = jnp.ones((2, 3), bool)
  got = jnp.dot(b, b.T, preferred_element_type=np.float32)
  assert got.dtype == np.float32
  np.testing.assert_array_equal(got, np.full((2, 2), 3.0))  # counts, not logical or
  got = jnp.einsum("ij,kj->ik", b, b)
  assert got.dtype == np.bool_ and bool(got.all())
  c = jnp.asarray([1 + 1j, 2 - 1j], np.complex64)
  got = jnp.dot(c, c, preferred_element_type=np.float32)  # JAX: the real part
  assert got.dtype == np.float32 and float(got) == 3.0
  # an explicit type narrower than the promoted one but not than dot_general's own
  got = jnp.dot(jnp.ones((2, 3), np.int8), jnp.ones((3,), np.uint8), preferred_element_type=np.int8)
  assert got.dtype == np.int8
  np.testing.assert_array_equal(got, [3, 3])


def test_einsum_opt_einsum_errors():
  a = jnp.ones((3, 3))
  cases = [("ij,jk->ik", (a,), "Number of einsum subscripts, 2, must be equal to the number of "
            "operands, 1."),
           ("ij->ik", (a,), "Output character 'k' did not appear in the input"),
           ("ij->ii", (a,), "Output character 'i' appeared more than once in the output."),
           ("ij->j->i", (a,), "Subscripts can only contain one '->'."),
           ("i.j", (a,), "Invalid Ellipses."),
           ("ijk", (a,), "Einstein sum subscript 'ijk' does not contain the correct number of "
            "indices for operand 0."),
           ("ij,jk", (a, jnp.ones((4, 3))), "Size of label 'j' for operand 1 (3) does not match "
            "previous terms (4).")]
  for spec, ops, msg in cases:
    with pytest.raises(ValueError, match=re.escape(msg)):
      jnp.einsum(spec, *ops)
  with pytest.raises(TypeError, match="lists must contain either Ellipsis or hashable"):
    jnp.einsum(3, a)
  # any character is a label (opt_einsum's rule); sublist labels are ranked, not indexed
  check(jnp.einsum("i1", a), np.ones((3, 3)))
  x = rng.standard_normal((2, 3))
  check(jnp.einsum(jnp.asarray(x), [0, 99], [99, 0]), x.T)


def test_tensordot_axes_rules():
  a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
  ja, jb = jnp.asarray(a), jnp.asarray(b)
  check(jnp.tensordot(ja, jb, -1), np.multiply.outer(a, b))  # JAX: a negative n contracts none
  with pytest.raises(TypeError, match=re.escape("tensordot axes argument must be an int, a pair "
                                                "of ints, or a pair of lists/tuples of ints.")):
    jnp.tensordot(ja, jb, np.int64(1))
  with pytest.raises(TypeError, match="tensordot requires both axes lists to be either ints"):
    jnp.tensordot(ja, jb, (np.array([2]), np.array([0])))
  with pytest.raises(ValueError, match=re.escape("axes must match; got shapes (3,) and (4,) "
                                                 "with axis=-1")):
    jnp.vecdot(jnp.ones(3), jnp.ones(4))
  with pytest.raises(IndexError):
    jnp.vecdot(3, 4)
  with pytest.raises(TypeError, match="mul does not accept dtype bool"):
    jnp.kron(jnp.ones(2, bool), jnp.ones(2, bool))
  with pytest.raises(ValueError, match="matmul input operand 0 must have ndim at least 1"):
    jnp.matmul(2.0, jnp.ones(2))


def test_complex_max_min_lexicographic():
  c = np.array([1 + 2j, 1 - 1j, 3 + 0j, -1 + 5j, 3 - 2j])
  jc = jnp.asarray(c)
  assert complex(jnp.max(jc)) == 3 + 0j and complex(jnp.min(jc)) == -1 + 5j
  assert complex(jnp.ptp(jc)) == 4 - 5j
  np.testing.assert_array_equal(jnp.max(jc.reshape(1, 5), axis=0), c)
  assert complex(jnp.max(jc, initial=5 + 0j)) == 5 + 0j
  assert np.isnan(complex(jnp.max(jnp.asarray([1 + 1j, np.nan + 0j]))).real)
  np.testing.assert_array_equal(jnp.fmax(jc, 2 + 0j), [2, 2, 3, 2, 3 - 2j])
  np.testing.assert_array_equal(jnp.fmin(jc, np.nan), c)
  np.testing.assert_array_equal(jnp.searchsorted(jnp.sort(jc), jnp.asarray([1 + 1j, 5j])),
                                np.searchsorted(np.sort(c), [1 + 1j, 5j]))
  # lexicographic: 1+2j > 1, 1-1j < 1
  np.testing.assert_array_equal(jnp.digitize(jc, np.array([0, 1, 2])), [2, 1, 3, 0, 3])
  with pytest.raises(ValueError, match="Clip received a complex value"):
    jnp.clip(jc, 0, 1)
  with pytest.raises(ValueError, match="Clip received a complex value"):
    jnp.clip(jnp.ones(3), None, 1j)
  with pytest.raises(TypeError, match=re.escape("gt does not accept dtype complex128 at position "
                                                "0. Accepted dtypes at position 0 are subtypes "
                                                "of integer, floating, bool.")):
    jnp.argmax(jc)
  with pytest.raises(TypeError, match="floor does not accept dtype complex128. Accepted dtypes "
                     "are subtypes of floating."):
    jnp.floor(jc)
  with pytest.raises(TypeError, match="rem does not accept dtype complex128 at position 0"):
    jnp.mod(jc, 2)
  with pytest.raises(ValueError, match="top_k is not compatible with complex inputs."):
    nbjax.lax.top_k(jc, 2)


def test_creation_dtypes_and_errors():
  assert jnp.tri(3).dtype == np.float32  # JAX's default for tri, whatever the x64 mode
  d = jnp.diagflat(3)
  assert d.dtype == np.int64 and not d.weak_type
  with pytest.raises(TypeError, match="iota does not accept dtype bool"):
    jnp.arange(3, dtype=bool)
  with pytest.raises(TypeError, match="iota does not accept dtype bool"):
    jnp.vander(jnp.asarray([True, False]))
  with pytest.raises(ValueError, match="Passing complex start/stop/step to jnp.arange"):
    jnp.arange(1j)
  with pytest.raises(ValueError, match=re.escape("arguments must be scalars; got stop=[3]")):
    jnp.arange(np.array([3]))
  with pytest.raises(TypeError, match="full requires ndarray or scalar arguments, got <class "
                     "'list'> at position 0."):
    jnp.full((2, 2), [1, 2])
  with pytest.raises(TypeError, match="zeros_like requires ndarray or scalar arguments"):
    jnp.zeros_like([1, 2])
  with pytest.raises(TypeError, match=re.escape("got (3.0,). argument of 'N' jnp.eye().")):
    jnp.eye(3.0)
  with pytest.raises(ValueError, match="negative dimensions are not allowed, got -1 and None"):
    jnp.eye(-1)
  with pytest.raises(ValueError, match="Arguments to jax.numpy.meshgrid must be 1D"):
    jnp.meshgrid(np.ones((2, 2)), np.arange(2))
  with pytest.raises(ValueError, match="jax.numpy.meshgrid only supports copy=True"):
    jnp.meshgrid(np.arange(2), copy=False)
  with pytest.raises(TypeError):
    jnp.indices(3)
  with pytest.raises(ValueError, match="xp and fp must be one-dimensional arrays of equal size"):
    jnp.interp(1.0, np.arange(3.), np.arange(4.))


def test_einsum_dot_one_dot_general_for_mixed_dtypes_and_explicit_paths():
  """JAX's lax_numpy_einsum_test test_einsum_mixed_precision/test_preferred_element_type/
  test_einsum_unsupported_optimization and lax_numpy_test testMixedPrecisionDot: mixed
  operand dtypes go to one dot_general (no converts), einsum's carries
  preferred_element_type; an explicit path of pairs is taken, a 3-operand step refused."""
  prims = lambda f, *a: [e.primitive.name for e in nbjax.make_jaxpr(f)(*a).jaxpr.eqns]
  i8, f32 = np.ones(5, np.int8), np.ones(5, np.float32)
  assert prims(functools.partial(jnp.einsum, "a,a->a"), i8, f32) == ["dot_general"]
  assert prims(jnp.dot, i8, f32) == ["dot_general"]
  got = jnp.einsum("a,a->a", np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.int64))
  assert got.dtype == np.int64
  np.testing.assert_array_equal(got, [0, 1, 4])
  got = jnp.dot(np.ones(3, np.complex64), np.arange(3.0))
  assert got.dtype == np.complex128 and complex(got) == 3.0
  bf = np.ones((2, 2), jnp.bfloat16)
  eqns = nbjax.make_jaxpr(functools.partial(jnp.einsum, "ij,j->i"))(bf, bf[0]).jaxpr.eqns
  assert len(eqns) == 1 and eqns[0].params["preferred_element_type"] == jnp.bfloat16
  x = np.arange(4.0).reshape(2, 2)
  np.testing.assert_allclose(jnp.einsum("ij,jk,kl", x, x, x, optimize=[(1, 2), (0, 1)]),
                             x @ x @ x)
  with pytest.raises(NotImplementedError, match="jax.numpy.einsum does not support "
                     "simultaneous contraction of 3 or more operands"):
    jnp.einsum("ij,ik,il->jkl", np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 5)),
               optimize=[(0, 1, 2)])


def test_einsum_path_takes_opt_einsum_strategy_names():
  """JAX's lax_numpy_einsum_test test_einsum_path_optimization_modes: einsum_path takes
  opt_einsum's strategy names ('auto', 'eager', ...), and einsum takes the path back."""
  ops = [np.arange(4.0).reshape(2, 2), np.ones((2, 3)), np.arange(6.0).reshape(3, 2)]
  for optimize in (True, False, "optimal", "auto", "greedy", "eager", "dp"):
    path, _ = jnp.einsum_path("ij,jk,kl", *ops, optimize=optimize)
    np.testing.assert_allclose(jnp.einsum("ij,jk,kl", *ops, optimize=path),
                               ops[0] @ ops[1] @ ops[2])


def test_out_sharding_arguments():
  # JAX's jnp functions take out_sharding (None: as without it); a NamedSharding places the
  # result, other values raise JAX's TypeError naming the API as JAX's does
  from nbjax.sharding import NamedSharding, PartitionSpec as P
  s = NamedSharding(nbjax.make_mesh((1,), ("x",)), P("x"))
  x, m = jnp.ones(4), jnp.ones((2, 3))
  cases = {"reshape": lambda o: jnp.reshape(x, (2, 2), out_sharding=o),
           "reshape ": lambda o: jnp.ravel(m, out_sharding=o),  # (JAX: reshape's name)
           "reshape  ": lambda o: m.flatten(out_sharding=o),
           "reshape   ": lambda o: m.reshape(6, out_sharding=o),
           "repeat": lambda o: jnp.repeat(x, 2, out_sharding=o),
           "jnp.bincount": lambda o: jnp.bincount(jnp.arange(3), out_sharding=o),
           "jnp.percentile": lambda o: jnp.percentile(x, jnp.array([5.0, 50.0]), out_sharding=o),
           "dot_general": lambda o: jnp.dot(m.T, jnp.ones(2), out_sharding=o),
           "dot_general ": lambda o: jnp.matmul(jnp.ones(2), m, out_sharding=o),
           "dot_general  ": lambda o: jnp.tensordot(jnp.ones(2), m, 1, out_sharding=o),
           "einsum": lambda o: jnp.einsum("i,ij", jnp.ones(2), m, out_sharding=o),
           "jnp.array": lambda o: jnp.asarray([1, 2, 3], out_sharding=o),
           "jnp.array ": lambda o: jnp.array([1, 2, 3], out_sharding=o),
           "full_like": lambda o: jnp.full_like(x, 2, out_sharding=o),
           "jnp.zeros_like": lambda o: jnp.zeros_like(m[0], out_sharding=o),
           "jnp.ones_like": lambda o: jnp.ones_like(m[0], out_sharding=o),
           "jnp.arange": lambda o: jnp.arange(3, out_sharding=o)}
  for name, f in cases.items():
    want = f(None)
    got = f(s)
    check(got, want)
    assert got.sharding == s, name
    with pytest.raises(TypeError, match=f"`out_sharding` argument of {name.strip()} only supports "
                       "instances of `NamedSharding` or `PartitionSpec`. Got 3 of type: <class 'int'>"):
      f(3)
  with pytest.raises(ValueError, match="Only one of `device` or `out_sharding` can be set"):
    jnp.arange(3, device=nbjax.devices()[0], out_sharding=s)


def test_manipulation_errors_as_jax():
  # JAX 0.10.2's types and messages
  x = jnp.ones((2, 3))
  cases = [(lambda: jnp.reshape(x, newshape=6), TypeError,
            "reshape() got an unexpected keyword argument 'newshape'"),
           (lambda: jnp.transpose(x, (0, 0)), TypeError, "transpose permutation isn't a "
            "permutation of operand dimensions, got permutation (0, 0) for operand shape (2, 3)."),
           (lambda: jnp.transpose(x, (-1,)), TypeError, "transpose permutation isn't a "
            "permutation of operand dimensions, got permutation (1,) for operand shape (2, 3)."),
           (lambda: jnp.expand_dims(x, (0, 0)), ValueError,
            "repeated axis in lax.expand_dims: (0, 0)"),
           (lambda: jnp.expand_dims(x, (0, -4)), ValueError,
            "repeated axis in lax.expand_dims: [0, 0]"),
           (lambda: jnp.asarray([1, 2], order="C"), NotImplementedError,
            "Only implemented for order='K'"),
           (lambda: jnp.repeat(jnp.arange(3), -1), TypeError, "broadcast_in_dim shape must have "
            "every element be nonnegative, got (3, -1)."),
           (lambda: jnp.rot90(x, axes=(0, -2)), ValueError, "Axes must be different")]
  for call, exc, msg in cases:
    with pytest.raises(exc) as e:
      call()
    assert str(e.value) == msg
  assert jnp.asarray([1, 2], order="K").shape == (2,)


def test_removed_names_raise_jaxs_deprecation_errors():
  import nbjax.lax as lax
  with pytest.raises(AttributeError, match=r"^jax.numpy.fix was deprecated in JAX v0.9.0, and will "
                     r"be removed in JAX v0.10.0. Use jax.numpy.trunc instead.$"):
    jnp.fix
  with pytest.raises(AttributeError, match=r"^jax.lax.pvary was deprecated in JAX v0.8.2 and "
                     r"removed in JAX v0.10.0; use `jax.lax.pcast\(..., to='varying'\)$"):
    lax.pvary
  assert not hasattr(jnp, "msort") and not hasattr(jnp, "fix")


def test_logical_ops_promote_first_as_jax():
  # JAX promotes the operands before testing them against zero: a Python bool with a weak float
  # gives a weak bool; a bool array with it a strong one (JAX's constant is strong there)
  wf, b = jnp.asarray(2.0), jnp.array([True, False])
  assert jnp.logical_and(True, wf).weak_type and jnp.logical_xor(True, jnp.asarray(3)).weak_type
  assert not jnp.logical_and(b, wf).weak_type and not jnp.logical_and(jnp.asarray(3), b).weak_type
  assert jnp.logical_and(wf, wf).weak_type
  np.testing.assert_array_equal(jnp.logical_and(jnp.array([1, 0, 2]), jnp.array([1.0, 1, 0])),
                                [True, False, False])
