"""lax on the narrow ml_dtypes types (int4/uint4, float8_*): JAX accepts them wherever their
class is (``dtypes.issubdtype``) and XLA's CPU code computes them widened (int8/uint8 with
wraparound, float16 then rounded to nearest even). Expected values are JAX 0.10.2's."""
import ml_dtypes
import numpy as np
import pytest

import nbjax
from nbjax import lax, registry
import nbjax.numpy as jnp

XI = [-8, -5, -1, 0, 1, 3, 6, 7]
YI = [3, -1, 2, -8, 0, 5, -3, 1]
XU = [0, 1, 3, 7, 8, 9, 14, 15]
YU = [3, 1, 2, 8, 0, 5, 15, 4]

BINARY = {
  "int4": {'add': [-5, -6, 1, -8, 1, -8, 3, -8], 'sub': [5, -4, -3, -8, 1, -2, -7, 6],
           'mul': [-8, 5, -2, 0, 0, -1, -2, 7], 'div': [-2, 5, 0, 0, -1, 0, -2, 7],
           'rem': [-2, 0, -1, 0, 1, 3, 0, 0], 'max': [3, -1, 2, 0, 1, 5, 6, 7],
           'min': [-8, -5, -1, -8, 0, 3, -3, 1], 'shift_left': [0, 0, -4, 0, 1, 0, 0, -2],
           'shift_right_arithmetic': [-1, -1, -1, 0, 1, 0, 0, 3],
           'shift_right_logical': [1, 0, 3, 0, 1, 0, 0, 3],
           'bitwise_and': [0, -5, 2, 0, 0, 1, 4, 1], 'bitwise_or': [-5, -1, -1, -8, 1, 7, -1, 7],
           'bitwise_xor': [-5, 4, -3, -8, 1, 6, -5, 6], 'lt': [1, 1, 1, 0, 0, 1, 0, 0],
           'eq': [0, 0, 0, 0, 0, 0, 0, 0]},
  "uint4": {'add': [3, 2, 5, 15, 8, 14, 13, 3], 'sub': [13, 0, 1, 15, 8, 4, 15, 11],
            'mul': [0, 1, 6, 8, 0, 13, 2, 12], 'div': [0, 1, 1, 0, 15, 1, 0, 3],
            'rem': [0, 0, 1, 7, 8, 4, 14, 3], 'max': [3, 1, 3, 8, 8, 9, 15, 15],
            'min': [0, 1, 2, 7, 0, 5, 14, 4], 'shift_left': [0, 2, 12, 0, 8, 0, 0, 0],
            'shift_right_arithmetic': [0, 0, 0, 0, 8, 15, 15, 15],
            'shift_right_logical': [0, 0, 0, 0, 8, 0, 0, 0],
            'bitwise_and': [0, 1, 2, 0, 0, 1, 14, 4], 'bitwise_or': [3, 1, 3, 15, 8, 13, 15, 15],
            'bitwise_xor': [3, 0, 1, 15, 8, 12, 1, 11], 'lt': [1, 0, 0, 1, 0, 0, 1, 0],
            'eq': [0, 1, 0, 0, 0, 0, 0, 0]},
}
UNARY = {
  "int4": {'neg': [-8, 5, 1, 0, -1, -3, -6, -7], 'sign': [-1, -1, -1, 0, 1, 1, 1, 1],
           'bitwise_not': [7, 4, 0, -1, -2, -4, -7, -8],
           'population_count': [5, 7, -8, 0, 1, 2, 2, 3]},  # (XLA counts the int8's bits)
  "uint4": {'neg': [0, 15, 13, 9, 8, 7, 2, 1], 'sign': [0, 1, 1, 1, 1, 1, 1, 1],
            'bitwise_not': [15, 14, 12, 8, 7, 6, 1, 0],
            'population_count': [0, 1, 2, 3, 1, 2, 3, 4]},
}


def _arr(v, d):
  return jnp.asarray(np.array(v).astype(getattr(ml_dtypes, d)))


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("op", sorted(BINARY["int4"]))
def test_int4_binary(dtype, op):
  x, y = (XI, YI) if dtype == "int4" else (XU, YU)
  out = getattr(lax, op)(_arr(x, dtype), _arr(y, dtype))
  assert out.dtype == (np.dtype(bool) if op in ("lt", "eq") else getattr(ml_dtypes, dtype))
  np.testing.assert_array_equal(np.asarray(out).astype(int), BINARY[dtype][op])


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("op", sorted(UNARY["int4"]))
def test_int4_unary(dtype, op):
  out = getattr(lax, op)(_arr(XI if dtype == "int4" else XU, dtype))
  assert out.dtype == getattr(ml_dtypes, dtype)
  np.testing.assert_array_equal(np.asarray(out).astype(int), UNARY[dtype][op])


def test_int4_iota_wraps_and_abs_refused():
  np.testing.assert_array_equal(np.asarray(lax.iota("int4", 20)).astype(int),
                                [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3])
  with pytest.raises(TypeError, match="abs does not accept dtype int4. Support for narrow-width "
                     "integers is platform-dependent"):
    lax.abs(lax.iota("int4", 3))


def test_convert_to_int4_saturates_floats_wraps_ints():
  f = jnp.array([100.7, -3.5, 7.6, np.nan, -100., 0.5, -0.5, 2.5], np.float32)
  np.testing.assert_array_equal(np.asarray(f.astype(jnp.int4)).astype(int),
                                [7, -3, 7, 0, -8, 0, 0, 2])
  np.testing.assert_array_equal(np.asarray(f.astype(jnp.uint4)).astype(int),
                                [15, 0, 7, 0, 0, 0, 0, 2])
  i = jnp.array([100, -3, 7, -100, 15, 16], np.int32).astype(jnp.int4)
  np.testing.assert_array_equal(np.asarray(i).astype(int), [4, -3, 7, -4, -1, 0])
  np.testing.assert_array_equal(np.asarray(i.astype(np.int8)), [4, -3, 7, -4, -1, 0])


FROM64 = {
  "float8_e4m3fn": [0.1015625, 0.001953125, 288.0, np.nan, -0.3125, 1.0, 0.00390625, np.nan],
  "float8_e5m2": [0.09375, 0.0009765625, 320.0, 512.0, -0.3125, 1.0, 0.00341796875, np.inf],
  "float8_e4m3b11fnuz": [0.1015625, 0.0009765625, np.nan, np.nan, -0.3125, 1.0, 0.00341796875,
                         np.nan],
}


@pytest.mark.parametrize("dtype", sorted(FROM64))
def test_convert_float64_to_float8_rounds_once(dtype):
  g = jnp.array([0.1, 1e-3, 300., 500., -0.30078125, 1.0625, 3.3e-3, np.inf], np.float64)
  out = lax.convert_element_type(g, getattr(ml_dtypes, dtype))
  assert out.dtype == getattr(ml_dtypes, dtype)
  np.testing.assert_array_equal(np.asarray(out).astype(np.float64), FROM64[dtype])


V = [0.4375, 1.125, 1.75, 3.5, 6.0, -2.5, 0.0175781, 12.0]
W = [2.0, 3.5, 0.5625, 1.375, -0.15625, 1.25, 0.0507812, -1.0]
FLOAT8 = {  # pow and atan2 as XLA computes them (in float16, not float32)
  "float8_e4m3fn": {
    'add': [2.5, 4.5, 2.25, 5.0, 6.0, -1.25, 0.0703125, 11.0],
    'mul': [0.875, 4.0, 1.0, 5.0, -0.9375, -3.0, 0.0, -12.0],
    'div': [0.21875, 0.3125, 3.0, 2.5, -40.0, -2.0, 0.34375, -12.0],
    'pow': [0.1875, 1.5, 1.375, 5.5, 0.75, np.nan, 0.8125, 0.0859375],
    'atan2': [0.21875, 0.3125, 1.25, 1.25, 1.625, -1.125, 0.34375, 1.625],
    'sin': [0.4375, 0.875, 1.0, -0.34375, -0.28125, -0.625, 0.017578125, -0.5625],
    'exp': [1.5, 3.0, 6.0, 32.0, 416.0, 0.0859375, 1.0, np.nan],
    'sqrt': [0.6875, 1.0, 1.375, 1.875, 2.5, np.nan, 0.125, 3.5],
    'tanh': [0.40625, 0.8125, 0.9375, 1.0, 1.0, -1.0, 0.017578125, 1.0]},
  "float8_e5m2": {
    'add': [2.5, 4.0, 2.0, 5.0, 6.0, -1.25, 0.0625, 12.0],
    'mul': [0.875, 3.5, 0.875, 5.0, -1.0, -3.0, 0.000732421875, -12.0],
    'div': [0.21875, 0.3125, 3.5, 2.5, -40.0, -2.0, 0.3125, -12.0],
    'pow': [0.1875, 1.0, 1.25, 7.0, 0.75, np.nan, 0.875, 0.078125],
    'atan2': [0.21875, 0.25, 1.25, 1.25, 1.5, -1.0, 0.3125, 1.75],
    'sin': [0.4375, 0.875, 1.0, -0.375, -0.25, -0.625, 0.015625, -0.5],
    'exp': [1.5, 2.5, 6.0, 32.0, 384.0, 0.078125, 1.0, np.inf],
    'sqrt': [0.625, 1.0, 1.25, 1.75, 2.5, np.nan, 0.125, 3.5],
    'tanh': [0.4375, 0.75, 1.0, 1.0, 1.0, -1.0, 0.015625, 1.0]},
}


@pytest.mark.parametrize("dtype", sorted(FLOAT8))
@pytest.mark.parametrize("op", sorted(FLOAT8["float8_e5m2"]))
def test_float8_elementwise(dtype, op):
  d = getattr(ml_dtypes, dtype)
  a, b = jnp.asarray(np.array(V).astype(d)), jnp.asarray(np.array(W).astype(d))
  out = getattr(lax, op)(a, b) if op in ("add", "mul", "div", "pow", "atan2") else getattr(lax, op)(a)
  assert out.dtype == d
  np.testing.assert_array_equal(np.asarray(out).astype(np.float64), FLOAT8[dtype][op])


XLA_STEPS = {  # XLA rounds between the steps of these: the registry's narrow "xla" mode
  'exp2': [1.375, 2.0, 3.5, 12.0, 56.0, 0.171875, 1.0, np.nan],
  'logistic': [0.625, 0.8125, 0.875, 1.0, 1.0, 0.078125, 0.5, 1.0],
  'lgamma': [0.6875, -0.05859375, -0.0859375, 1.25, 5.0, -0.0546875, 4.0, 18.0],
  'nextafter': [0.46875, 1.25, 1.625, 3.25, 5.5, -2.25, 0.01953125, 11.0],
}


@pytest.mark.parametrize("op", sorted(XLA_STEPS))
def test_float8_ops_xla_computes_in_steps(op):
  d = ml_dtypes.float8_e4m3fn
  a, b = jnp.asarray(np.array(V).astype(d)), jnp.asarray(np.array(W).astype(d))
  out = lax.nextafter(a, b) if op == "nextafter" else getattr(lax, op)(a)
  assert out.dtype == d
  np.testing.assert_array_equal(np.asarray(out).astype(np.float64), XLA_STEPS[op])


def test_float8_e8m0fnu_and_narrow_int_counts():
  d = ml_dtypes.float8_e8m0fnu
  e = jnp.asarray(np.array([0.25, 2., 4., 2.**100, 2.**-100, 1.]).astype(d))
  f = jnp.asarray(np.array([8., 0.5, 4., 2.**100, 2.**-100, 1.]).astype(d))
  np.testing.assert_array_equal(np.asarray(e * f).astype(float), [2., 1., 16., np.nan, np.nan, 1.])
  np.testing.assert_array_equal(np.asarray(e / f).astype(float), [0.03125, 4., 1., 1., 1., 1.])
  np.testing.assert_array_equal(np.asarray(lax.clz(_arr(range(-8, 8), "int4"))).astype(int),
                                [0] * 8 + [4, 3, 2, 2, 1, 1, 1, 1])
  np.testing.assert_array_equal(
      np.asarray(lax.population_count(_arr([-2, -1, 0, 1], "int2"))).astype(int), [1, -2, 0, 1])


def test_jit_matches_eager():
  # under jit XLA computes them; eager gives the same bits (JAX's values above)
  x, y = _arr(XI, "int4"), _arr(YI, "int4")
  for op in ("add", "div", "shift_right_logical", "lt"):
    np.testing.assert_array_equal(np.asarray(nbjax.jit(getattr(lax, op))(x, y)).astype(int),
                                  BINARY["int4"][op])
  d = ml_dtypes.float8_e5m2
  a, b = jnp.asarray(np.array(V).astype(d)), jnp.asarray(np.array(W).astype(d))
  out = nbjax.jit(lambda a, b: (lax.pow(a, b), lax.sin(a), a.astype(jnp.float32)))(a, b)
  assert [o.dtype for o in out] == [d, d, np.float32]
  np.testing.assert_array_equal(np.asarray(out[0]).astype(float), FLOAT8["float8_e5m2"]["pow"])
  np.testing.assert_array_equal(np.asarray(out[1]).astype(float), FLOAT8["float8_e5m2"]["sin"])
  f = jnp.array([100.7, -3.5, np.nan], np.float32)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lambda f: f.astype(jnp.int4))(f)).astype(int),
                                [7, -3, 0])


def test_registry_declares_narrow_modes():
  rows = {r["primitive"]: r["narrow"] for r in registry.rows()}
  assert rows["add"] == rows["sin"] == rows["iota"] == "wide"
  assert rows["shift_right_logical"] == "bits" and rows["shift_right_arithmetic"] == "sbits"
  assert rows["convert_element_type"] == "own"
  assert rows["clz"] == rows["nextafter"] == rows["exp2"] == rows["logistic"] == "xla"


def test_dot_general_mixed_float8():
  l = jnp.asarray(np.array([[1.5, -2, 3.25], [0.1, 7, -0.5], [1, 2, 3], [4, 5, 6]])
                  .astype(ml_dtypes.float8_e4m3fn))
  r = jnp.asarray(np.array([[1.25, 2], [-3, 0.3], [9, 1]]).astype(ml_dtypes.float8_e5m2))
  want32 = [[33.875, 5.625], [-24.873046875, 1.890625], [19.25, 5.625], [38.0, 15.5625]]
  for f in (lax.dot, nbjax.jit(lax.dot, static_argnames="preferred_element_type")):
    out = f(l, r, preferred_element_type=jnp.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), want32)
  out = lax.dot(l, r)  # XLA converts the operands to the result type, float8_e5m2, first
  assert out.dtype == ml_dtypes.float8_e5m2
  np.testing.assert_array_equal(np.asarray(out).astype(float), [[32, 5], [-24, 2], [20, 6], [40, 16]])


def test_sort_and_scatter_float8():
  d = ml_dtypes.float8_e4m3fn
  k = jnp.asarray(np.array([3, -1, 2, 0.5]).astype(d))
  np.testing.assert_array_equal(np.asarray(lax.sort(k)).astype(float), [-1, 0.5, 2, 3])
  np.testing.assert_array_equal(np.asarray(jnp.argsort(k)), [1, 3, 2, 0])
  x = jnp.asarray(np.array([1, 2, 3, 4.5]).astype(d))
  u = jnp.asarray(np.array([0.3, 0.3, 0.3, 0.3, 7, 9]).astype(d))
  i = jnp.array([0, 0, 0, 0, 1, 1])
  for f in (lambda x, u: x.at[i].add(u), nbjax.jit(lambda x, u: x.at[i].add(u))):
    np.testing.assert_array_equal(np.asarray(f(x, u)).astype(float), [2, 18, 3, 4.5])
  np.testing.assert_array_equal(np.asarray(x.at[i].multiply(u)).astype(float),
                                [0.009765625, 128, 3, 4.5])


def test_custom_vjp_bwd_cotangent_keeps_its_dtype():
  # JAX passes an inexact input's cotangent of another dtype through (lax_test
  # test_gather_with_asymmetric_dtype)
  @nbjax.custom_vjp
  def f(x):
    return x
  f.defvjp(lambda x: (f(x), ()), lambda res, g: (g.astype(jnp.bfloat16),))

  def g(x):
    return f(x.at[jnp.argsort(x)].get())
  for d in (jnp.float32, jnp.float8_e4m3fn):
    _, vjp = nbjax.vjp(g, jnp.arange(8, dtype=d))
    ct, = vjp(jnp.ones((8,), dtype=d))
    assert ct.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(ct, np.float32), np.ones(8))


def test_bitcast_int4_packs_low_bits_first():
  x = _arr([[-8, 7], [1, -1], [3, 0]], "int4")
  y = jnp.array([0x12345678, -1], np.int32)
  for f in (lax.bitcast_convert_type, nbjax.jit(lax.bitcast_convert_type, static_argnums=1)):
    out = f(x, np.int8)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(out), [120, -15, 3])
    out = f(y, ml_dtypes.int4)
    assert out.shape == (2, 8)
    np.testing.assert_array_equal(np.asarray(out).astype(int),
                                  [[-8, 7, 6, 5, 4, 3, 2, 1], [-1] * 8])
  np.testing.assert_array_equal(
      np.asarray(lax.bitcast_convert_type(x, ml_dtypes.uint4)).astype(int), [[8, 7], [1, 15], [3, 0]])
  f8 = jnp.asarray(np.array([1.5, -2]).astype(ml_dtypes.float8_e4m3fn))
  np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(f8, np.uint8)), [60, 192])


def test_test_util_tolerances_cover_narrow_types():
  from nbjax import test_util
  assert test_util.tolerance(np.dtype(ml_dtypes.uint4)) == 0
  assert test_util.tolerance(np.dtype(ml_dtypes.float8_e4m3fn)) == 1e-1
  assert test_util.default_gradient_tolerance[np.dtype(ml_dtypes.float8_e8m0fnu)] == 1e0


def test_reductions_on_narrow_types():
  f8 = jnp.asarray((np.arange(40) * 0.37 + 0.1).astype(ml_dtypes.float8_e4m3fn))
  i4 = _arr([3, 5, -7, 7, 2, -8, 1], "int4")
  assert float(np.asarray(lax.reduce_sum(f8, (0,))).astype(float)) == 288.0  # (rounded as it goes)
  assert float(np.asarray(nbjax.jit(lambda x: lax.reduce_sum(x, (0,)))(f8)).astype(float)) == 288.0
  np.testing.assert_array_equal(np.asarray(lax.cumsum(f8)[::8]).astype(float),
                                [0.1015625, 14.0, 48.0, 112.0, 192.0])
  assert float(np.asarray(lax.reduce_prod(f8[:6], (0,))).astype(float)) == 0.15625
  np.testing.assert_array_equal(np.asarray(lax.cumsum(i4)).astype(int), [3, -8, 1, -8, -6, 2, 3])
  assert int(np.asarray(lax.reduce_max(i4, (0,))).astype(int)) == 7
  np.testing.assert_array_equal(np.asarray(lax.cummax(i4)).astype(int), [3, 5, 5, 7, 7, 7, 7])
  assert int(lax.argmax(f8, 0, np.int32)) == 39
  m = jnp.mean(f8)
  assert m.dtype == ml_dtypes.float8_e4m3fn and float(np.asarray(m).astype(float)) == 7.0
