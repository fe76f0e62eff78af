"""Elementwise primitives (``nbjax/lax/elementwise.py``, ``kernels/elementwise.py``).

XLA's edge semantics on every backend (integer division/remainder by zero and overflow,
shifts past the bit width, NaN propagation, rounding modes, saturating float -> int
conversion), float16, the two-core kernels, weak types, errors naming the primitive, the
custom jvp/transpose/batching rules, and every backend against the reference for every
declared dtype.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import nbjax
from nbjax import core, dtypes, lax, registry, testing
from nbjax.array import Array
from nbjax.interpreters import ad
from nbjax.lax import elementwise as E

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # edge values on purpose
ELEMENTWISE = [p for p in registry.primitives(builtin_only=True) if p.family == "elementwise"]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
rng = np.random.default_rng(0)


def results(p, *args, **params):
  """{backend: result} for every eager backend of ``p`` plus the eager ``bind``."""
  args = [np.asarray(a) for a in args]
  out = {b: impl(*args, **params) for b, impl in p.impls.items()}
  out["bind"] = p.bind(*[Array(a) for a in args], **params)
  return out


def check(p, args, want, params=None, rtol=0.0):
  """Every backend returns exactly ``want`` (dtype, shape, values; NaN == NaN)."""
  want = np.asarray(want)
  for b, got in results(p, *args, **(params or {})).items():
    got_np = np.asarray(got)
    assert type(got) is (Array if b == "bind" else np.ndarray), (p, b, type(got))
    assert got_np.dtype == want.dtype and got_np.shape == want.shape, (p, b, got_np.dtype, got_np.shape)
    if rtol:
      np.testing.assert_allclose(got_np, want, rtol=rtol, equal_nan=True, err_msg=f"{p} {b}")
    else:
      np.testing.assert_array_equal(got_np, want, err_msg=f"{p} {b}")


# ---------------------------------------------------------------- every backend, every dtype


def _cases():
  for p in ELEMENTWISE:
    for d in p.meta["dtypes"]:
      yield pytest.param(p, np.dtype(d), id=f"{p.name}-{np.dtype(d).name}")


@pytest.mark.parametrize("prim,dtype", list(_cases()))
def test_backends_match_reference(prim, dtype):
  ref = prim.meta["reference"]
  tol = testing.default_tolerance(dtype) if dtypes.kind(dtype) in "fc" else 0
  for args, params in testing.primitive_cases(prim, dtype):
    out_aval = prim.abstract_eval(*[core.get_aval(a) for a in args], **params)
    want = np.asarray(ref(*[np.array(a) for a in args], **params))
    for b, got in results(prim, *args, **params).items():
      g = np.asarray(got)
      assert g.dtype == out_aval.dtype and g.shape == out_aval.shape, (b, g.dtype, g.shape, out_aval)
      if b == "bind":
        assert got.weak_type == out_aval.weak_type
      if dtypes.kind(g.dtype) in "fc":
        if g.dtype == dtypes._bf16:  # NumPy's isclose has no bfloat16 loops
          g, want = g.astype(np.float32), want.astype(np.float32)
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{b}")
      else:
        np.testing.assert_array_equal(g, want, err_msg=f"{b}")


# the two-core kernels: every kernel variant that differs in control flow, forced on
_PAR = ["add", "div", "rem", "max", "shift_left", "shift_right_arithmetic", "shift_right_logical",
        "population_count", "sign", "round", "integer_pow", "convert_element_type", "select_n",
        "clamp", "nextafter", "erf_inv", "sin", "complex"]


@pytest.mark.parametrize("name", _PAR)
def test_parallel_kernels_match_reference(name, monkeypatch):
  monkeypatch.setattr(E, "PAR_MIN", 0)
  monkeypatch.setattr(E, "PAR_MIN_LIBM", 0)
  p = registry.get(name)
  d = next(np.dtype(t) for t in (np.float32, np.int32, np.float64) if np.dtype(t) in p.meta["dtypes"])
  for args, params in testing.primitive_cases(p, d):
    want = np.asarray(p.meta["reference"](*args, **params))
    got = p.impls["numba"](*[np.asarray(a) for a in args], **params)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


# ---------------------------------------------------------------- integer division


@pytest.mark.parametrize("dt", INTS)
def test_integer_div_rem_truncate_and_divide_by_zero_as_xla(dt):
  info = np.iinfo(dt)
  if info.min < 0:
    x = [7, -7, 7, -7, 5, 0, info.min, info.min, info.max, -1]
    y = [2, 2, -2, -2, 0, 0, -1, 0, -1, 3]
  else:
    x = [7, 5, 0, info.max, info.max, 1]
    y = [2, 0, 0, 0, 3, info.max]
  trunc = lambda a, b: (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
  wrap = lambda v: (v - info.min) % (1 << (8 * np.dtype(dt).itemsize)) + info.min
  q = [wrap(trunc(a, b)) if b else wrap(-1) for a, b in zip(x, y)]  # x/0 = -1 (all ones)
  r = [a - trunc(a, b) * b if b else a for a, b in zip(x, y)]      # sign of dividend; x%0 = x
  x, y = np.array(x, dt), np.array(y, dt)
  check(E.div_p, [x, y], np.array(q, dt))   # INT_MIN / -1 wraps to INT_MIN
  check(E.rem_p, [x, y], np.array(r, dt))


def test_float_div_rem():
  x = np.array([1.0, -1.0, 0.0, 5.5, -5.5, np.inf, 1.0], np.float32)
  y = np.array([0.0, 0.0, 0.0, 2.0, 2.0, 2.0, np.inf], np.float32)
  check(E.div_p, [x, y], np.array([np.inf, -np.inf, np.nan, 2.75, -2.75, np.inf, 0.0], np.float32))
  check(E.rem_p, [x, y], np.array([np.nan, np.nan, np.nan, 1.5, -1.5, np.nan, 1.0], np.float32))


# ---------------------------------------------------------------- shifts and bits


def _shift_ref(kind, a, b, bits):
  ub = b % (1 << bits)                       # the amount is read as unsigned
  if kind == "left":
    return 0 if ub >= bits else a << ub
  ua = a % (1 << bits)
  if kind == "logical":
    return 0 if ub >= bits else ua >> ub
  sa = ua - (1 << bits) if ua >> (bits - 1) else ua  # arithmetic: on the signed bit pattern
  return sa >> min(ub, bits - 1)


@pytest.mark.parametrize("dt", INTS)
def test_shifts_past_bit_width_as_xla(dt):
  d = np.dtype(dt)
  bits, info = 8 * d.itemsize, np.iinfo(d)
  xs = [1, 5, info.max, info.min, info.max // 3] + ([-1, -5, -128] if info.min < 0 else [])
  amounts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits, info.max] + ([-1, -bits] if info.min < 0 else [])
  pairs = [(a, b) for a in xs for b in amounts]
  x = np.array([a for a, _ in pairs], d)
  y = np.array([b for _, b in pairs], d)
  for name, kind in (("shift_left", "left"), ("shift_right_logical", "logical"),
                     ("shift_right_arithmetic", "arith")):
    want = np.array([_shift_ref(kind, a, b, bits) % (1 << bits) for a, b in pairs], np.uint64)
    check(registry.get(name), [x, y], want.astype(d) if d.kind == "u" else
          want.astype(np.dtype(f"u{d.itemsize}")).view(d))


@pytest.mark.parametrize("dt", INTS)
def test_population_count_counts_twos_complement_bits(dt):
  d = np.dtype(dt)
  info = np.iinfo(d)
  x = np.array([0, 1, 7, info.max, info.min] + ([-1, -2] if info.min < 0 else []), d)
  want = [bin(int(v) % (1 << 8 * d.itemsize)).count("1") for v in x]
  check(E.population_count_p, [x], np.array(want, d))


def test_bitwise_on_bool_and_ints():
  a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
  check(E.and_p, [a, b], a & b)
  check(E.or_p, [a, b], a | b)
  check(E.xor_p, [a, b], a ^ b)
  check(E.not_p, [a], ~a)
  x = np.array([0, -1, 5, 127], np.int8)
  check(E.not_p, [x], ~x)


# ---------------------------------------------------------------- floats


def test_max_min_propagate_nan():
  x = np.array([np.nan, 1.0, np.nan, 2.0, -np.inf], np.float32)
  y = np.array([1.0, np.nan, np.nan, 3.0, np.inf], np.float32)
  check(E.max_p, [x, y], np.array([np.nan, np.nan, np.nan, 3.0, np.inf], np.float32))
  check(E.min_p, [x, y], np.array([np.nan, np.nan, np.nan, 2.0, -np.inf], np.float32))
  c1 = np.array([1 + 1j, 1 + 2j, 2 + 0j, np.nan + 0j], np.complex64)
  c2 = np.array([1 + 2j, 1 + 1j, 1 + 5j, 1 + 0j], np.complex64)
  # complex: JAX's lexicographic rule with ordered comparisons, so a NaN part picks y
  check(E.max_p, [c1, c2], np.array([1 + 2j, 1 + 2j, 2 + 0j, 1 + 0j], np.complex64))
  check(E.min_p, [c1, c2], np.array([1 + 1j, 1 + 1j, 1 + 5j, 1 + 0j], np.complex64))
  check(E.max_p, [c2, c1], np.array([1 + 2j, 1 + 2j, 2 + 0j, np.nan + 0j], np.complex64))


@pytest.mark.parametrize("dt", FLOATS)
def test_round_modes(dt):
  below_half = np.nextafter(dt(0.5), dt(0))
  x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, below_half, -0.0, 0.3, np.nan, np.inf, -np.inf,
                1e4 + 0.5], dt)
  away = np.array([1, 2, 3, -1, -2, -3, 0, -0.0, 0, np.nan, np.inf, -np.inf, 1e4 + 1], dt)
  even = np.array([0, 2, 2, -0.0, -2, -2, 0, -0.0, 0, np.nan, np.inf, -np.inf, 1e4], dt)
  check(E.round_p, [x], away, dict(rounding_method=lax.RoundingMethod.AWAY_FROM_ZERO))
  check(E.round_p, [x], even, dict(rounding_method=lax.RoundingMethod.TO_NEAREST_EVEN))
  assert np.signbit(np.asarray(lax.round(Array(np.array([-0.3], dt)))))[0]
  np.testing.assert_array_equal(lax.round(Array(x), 1), even)


def test_sign_keeps_signed_zero_and_nan():
  x = np.array([-0.0, 0.0, np.nan, -3.0, 2.0, -np.inf], np.float32)
  for b, got in results(E.sign_p, x).items():
    got = np.asarray(got)
    np.testing.assert_array_equal(got, [-0.0, 0.0, np.nan, -1, 1, -1])
    assert np.signbit(got[0]) and not np.signbit(got[1]), b
  check(E.sign_p, [np.array([3, 0, 200], np.uint8)], np.array([1, 0, 1], np.uint8))
  check(E.sign_p, [np.array([-128, 0, 5], np.int8)], np.array([-1, 0, 1], np.int8))
  check(E.sign_p, [np.array([3 + 4j, 0j], np.complex64)], np.array([0.6 + 0.8j, 0j], np.complex64),
        rtol=1e-6)


def test_abs_neg_wrap_and_complex_abs_is_real():
  check(E.abs_p, [np.array([-128, -3, 5], np.int8)], np.array([-128, 3, 5], np.int8))
  check(E.neg_p, [np.array([-128, 3], np.int8)], np.array([-128, -3], np.int8))
  check(E.abs_p, [np.array([3 + 4j], np.complex64)], np.array([5.0], np.float32))


def test_special_functions_edges():
  from scipy import special
  y = np.concatenate([np.linspace(-0.999, 0.999, 101), 1 - np.logspace(-16, -1, 50),
                      [1.0, -1.0, 0.0, 1.5, np.nan]])
  # XLA's (JAX's) own expansions, bit for bit (test_random), whose error reaches a few tens of
  # ulps in float32's tails and 6.4e-11 relative in float64's (Giles' polynomials near +-1)
  for dt, rtol in ((np.float32, 1e-5), (np.float64, 1e-10)):
    got = np.asarray(lax.erf_inv(Array(y.astype(dt))))
    want = special.erfinv(y.astype(dt).astype(np.float64)).astype(dt)
    np.testing.assert_allclose(got, want, rtol=rtol, equal_nan=True)
  x = np.array([-2.5, -0.5, 0.25, 1.0, 7.5, 30.0, 0.0, -3.0, np.inf, np.nan])
  np.testing.assert_allclose(lax.digamma(Array(x)),
                             [1.1031566406452431, 0.03648997397857652, special.digamma(0.25),
                              -0.5772156649015329, special.digamma(7.5), special.digamma(30.0),
                              np.nan, np.nan, np.inf, np.nan], rtol=1e-12)
  np.testing.assert_allclose(lax.lgamma(Array(x[:6])), special.gammaln(x[:6]), rtol=1e-12)
  np.testing.assert_allclose(lax.polygamma(Array(np.array([1.0, 2.0, 3.0])), Array(np.array([0.5, 2.0, 4.0]))),
                             special.polygamma([1, 2, 3], [0.5, 2.0, 4.0]), rtol=1e-10)
  assert np.isnan(np.asarray(lax.polygamma(Array(np.array(1.5)), Array(np.array(2.0)))))


def test_nextafter_float16_by_bits():
  f16 = np.float16
  tiny = np.array(1, np.uint16).view(f16)
  x = np.array([0.0, 0.0, -0.0, 1.0, 1.0, -1.0, np.inf, np.nan, 2.0, 65504.0], f16)
  y = np.array([1.0, -1.0, -0.0, 2.0, 0.0, -2.0, 0.0, 1.0, 2.0, np.inf], f16)
  want = np.nextafter(x, y)
  assert want[0] == tiny
  for b, got in results(E.nextafter_p, x, y).items():
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16)[~np.isnan(want)],
                                  want.view(np.uint16)[~np.isnan(want)], err_msg=b)
    assert np.isnan(np.asarray(got)[7])


def test_atan2_complex_and_real():
  y = np.array([1 + 2j, 0.5 - 1j], np.complex128)
  x = np.array([3 - 1j, 2 + 0.5j], np.complex128)
  # XLA's complex atan2 (checked against jaxlib): -i log((x + i y) / sqrt(x^2 + y^2))
  check(E.atan2_p, [y, x], np.array([0.19025319 + 0.84182396j, 0.16087528 - 0.57564627j]), rtol=1e-7)
  check(E.atan2_p, [np.array([1.0, -1.0], np.float32), np.array([-1.0, -1.0], np.float32)],
        np.arctan2(np.array([1.0, -1.0], np.float32), np.array([-1.0, -1.0], np.float32)), rtol=1e-6)


@pytest.mark.parametrize("name", ["exp", "log", "sin", "tanh", "logistic", "sqrt", "rsqrt", "cbrt",
                                  "erf", "lgamma", "floor", "is_finite", "square", "asinh"])
def test_float16_is_computed_in_float32_and_rounded(name):
  p = registry.get(name)
  x = np.asarray(rng.uniform(0.1, 3.0, 64), np.float16)
  want = np.asarray(p.meta["reference"](x.astype(np.float32))).astype(np.asarray(p.impls["numba"](x)).dtype)
  for b, got in results(p, x).items():
    np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(np.float32), rtol=2e-3, err_msg=b)


# ---------------------------------------------------------------- integer_pow, pow


@pytest.mark.parametrize("y", [-3, -2, -1, 0, 1, 2, 3, 5, 8])
def test_integer_pow_matches_repeated_multiplication(y):
  x = np.array([0.5, -1.5, 2.0, 3.0, -0.0], np.float64)
  with np.errstate(divide="ignore"):
    want = np.power(x, float(y))
  check(E.integer_pow_p, [x], want, dict(y=y), rtol=1e-15)
  if y >= 0:
    xi = np.array([3, -3, 100, -128], np.int8)
    check(E.integer_pow_p, [xi], np.array([int(v) ** y for v in xi]).astype(np.int64).astype(np.int8),
          dict(y=y))
  assert np.asarray(lax.integer_pow(Array(np.float32(np.nan)), 0)) == 1   # x**0 is 1 (JAX)


@pytest.mark.parametrize("y", [2, 3, 4, -2])
def test_integer_pow_kernel_multiplies_in_xla_order(y):
  """The numba kernel (from 16384 elements; squares and cubes in loops of their own) gives
  jit's bits: XLA's square-and-multiply order (``x * (x * x)`` for a cube)."""
  x = np.random.default_rng(y + 10).standard_normal(20000).astype(np.float32) * 30
  np.testing.assert_array_equal(lax.integer_pow(Array(x), y),
                                nbjax.jit(lambda v: lax.integer_pow(v, y))(x))


def test_integer_pow_negative_exponent_for_ints_is_an_error():
  with pytest.raises(TypeError, match="Integers cannot be raised to negative powers"):
    lax.integer_pow(Array(np.arange(3)), -1)


def test_pow_with_integer_exponent():
  x = np.array([2.0, 0.5, -3.0], np.float32)
  y = np.array([3, -2, 2], np.int32)
  check(E.pow_p, [x, y], np.array([8.0, 4.0, 9.0], np.float32))
  with pytest.raises(TypeError, match="pow"):
    lax.pow(Array(np.arange(3)), Array(np.arange(3)))
  with pytest.raises(TypeError, match="two inexact dtypes must match"):
    lax.pow(Array(x), Array(x.astype(np.float64)))


# ---------------------------------------------------------------- convert_element_type

_EDGES = [np.nan, np.inf, -np.inf, 1e10, -1e10, -1.5, 2.7, -0.7, 0.7, 255.5, 256.0, -129.0, 3e9,
          9.3e18, -9.3e18, 1.9e19, 0.0, -0.0]


def _f2i_ref(v, dt):
  info = np.iinfo(dt)
  if math.isnan(v):
    return 0
  if v >= info.max + 1:
    return info.max
  if v <= info.min - 1:
    return info.min
  return int(v)  # truncation


@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS)
def test_float_to_int_saturates_and_maps_nan_to_zero(src, dst):
  x = np.array(_EDGES, np.float64).astype(src)
  want = np.array([_f2i_ref(float(v), dst) for v in x.astype(np.float64)], dtype=object).astype(dst)
  check(E.convert_element_type_p, [x], want, dict(new_dtype=np.dtype(dst), weak_type=False))
  assert np.asarray(lax.convert_element_type(Array(x), dst)).tolist() == want.tolist()


def test_convert_other_pairs():
  cv = lambda x, d: dict(new_dtype=np.dtype(d), weak_type=False)
  c = np.array([1.5 + 2j, -3.7 + 0j, 0 + 2j, 0j], np.complex64)
  check(E.convert_element_type_p, [c], np.array([1.5, -3.7, 0, 0], np.float32), cv(c, np.float32))
  check(E.convert_element_type_p, [c], np.array([1, -3, 0, 0], np.int32), cv(c, np.int32))
  # complex -> bool looks at the real part, as XLA
  check(E.convert_element_type_p, [c], np.array([True, True, False, False]), cv(c, np.bool_))
  f = np.array([0.0, -0.0, np.nan, 0.1, -2.0], np.float32)
  check(E.convert_element_type_p, [f], np.array([False, False, True, True, True]), cv(f, np.bool_))
  i = np.array([300, -200, 127], np.int32)
  check(E.convert_element_type_p, [i], np.array([44, 56, 127], np.int8), cv(i, np.int8))
  check(E.convert_element_type_p, [np.array([True, False])], np.array([1.0, 0.0], np.float16),
        cv(None, np.float16))
  u = np.array([2 ** 64 - 1, 0], np.uint64)
  check(E.convert_element_type_p, [u], np.array([-1, 0], np.int64), cv(u, np.int64))
  # float64 -> float16 rounds once (XLA's CPU goes through float32 and rounds twice)
  h = np.array([1 + 2 ** -11 + 2 ** -30, 70000.0, 1e-8])
  check(E.convert_element_type_p, [h], h.astype(np.float16), cv(h, np.float16))
  check(E.convert_element_type_p, [np.array([1 + 2j], np.complex64)],
        np.array([1 + 2j], np.complex128), cv(None, np.complex128))


def test_convert_wrapper_noop_weak_and_constants():
  x = Array(np.arange(3, dtype=np.float32))
  assert lax.convert_element_type(x, np.float32) is x
  y = lax._convert_element_type(x, np.float32, weak_type=True)
  assert y.weak_type and y.dtype == np.float32 and y is not x
  assert lax._convert_element_type(y, None, weak_type=True) is y
  big = lax.convert_element_type(2 ** 70, np.float32)          # Python int too big for int64
  assert big.dtype == np.float32 and float(big) == 2.0 ** 70
  assert lax.convert_element_type(np.float64(np.nan), np.int32).tolist() == 0
  assert lax.convert_element_type(3.7, np.int8).tolist() == 3
  with pytest.raises(TypeError):
    lax.convert_element_type(x, object)


def test_convert_python_int_wraps_as_numpy_whatever_the_x64_mode():
  """A Python int converts as JAX's np.asarray(v).astype(dtype): it wraps to a narrow dtype,
  with x64 off too (uint32 2**32 - 1 is no int32 overflow: jnp.min's where= fill)."""
  from nbjax.config import config
  old = config.enable_x64
  try:
    for x64 in (True, False):
      config.update("enable_x64", x64)
      assert int(lax.convert_element_type(2**32 - 1, np.uint32)) == 2**32 - 1
      assert int(lax.convert_element_type(-1, np.uint32)) == 2**32 - 1
      assert int(lax.convert_element_type(2**31, np.int32)) == -2**31
      assert int(lax.convert_element_type(2**63, np.uint32)) == 0
      assert lax.full((2,), 2**32 - 1, np.uint32).tolist() == [2**32 - 1] * 2
  finally:
    config.update("enable_x64", old)


# ---------------------------------------------------------------- select_n, clamp


def test_select_n_semantics():
  c = [np.arange(6.0).reshape(2, 3) + 10 * k for k in range(4)]
  w_bool = np.array([[True, False, True], [False, False, True]])
  check(E.select_n_p, [w_bool, c[0], c[1]], np.where(w_bool, c[1], c[0]))
  w = np.array([[0, 1, 2], [3, -5, 9]], np.int32)   # out-of-range picks the first/last case
  check(E.select_n_p, [w, *c], np.choose(np.clip(w, 0, 3), c))
  check(E.select_n_p, [np.array(2, np.int32), *c[:3]], c[2])
  check(E.select_n_p, [np.array(True), c[0], c[1]], c[1])
  check(E.select_n_p, [np.array(0, np.uint8), c[0]], c[0])
  np.testing.assert_array_equal(lax.select(Array(w_bool), Array(c[1]), Array(c[0])),
                                np.where(w_bool, c[1], c[0]))
  with pytest.raises(TypeError, match="select with boolean `which` cannot have > 2 cases"):
    lax.select_n(Array(w_bool), *map(Array, c[:3]))
  with pytest.raises(TypeError, match="select cases must have the same shapes"):
    lax.select_n(Array(np.int32(0)), Array(c[0]), Array(c[0][0]))
  with pytest.raises(TypeError, match="select `which` must be scalar or have the same shape"):
    lax.select_n(Array(np.zeros(3, np.int32)), Array(c[0]), Array(c[1]))
  with pytest.raises(TypeError, match="select `which` must be boolean or integer type, got float32"):
    lax.select_n(Array(np.float32(0)), Array(c[0]), Array(c[1]))
  with pytest.raises(TypeError, match=r"lax.select requires arguments to have the same dtypes, got float64, float32. \(Tip: jnp.where"):
    lax.select_n(Array(np.int32(0)), Array(c[0]), Array(c[1].astype(np.float32)))
  with pytest.raises(ValueError, match="at least one case"):
    lax.select_n(Array(np.int32(0)))


def test_clamp_semantics():
  x = np.array([np.nan, -5.0, 0.5, 7.0], np.float32)
  check(E.clamp_p, [np.array(0.0, np.float32), x, np.array(1.0, np.float32)],
        np.array([np.nan, 0.0, 0.5, 1.0], np.float32))
  lo = np.array([np.nan, 2.0, 4.0, 0.0], np.float32)
  hi = np.array([1.0, np.nan, 2.0, 8.0], np.float32)   # NaN bounds propagate; lo > hi gives hi
  check(E.clamp_p, [lo, np.array([0.5, 5.0, 3.0, 7.0], np.float32), hi],
        np.array([np.nan, np.nan, 2.0, 7.0], np.float32))
  check(E.clamp_p, [np.array(-1, np.int8), np.array([-128, 0, 127], np.int8), np.array(1, np.int8)],
        np.array([-1, 0, 1], np.int8))
  r = lax.clamp(0.0, Array(x), 1.0)                   # Python bounds take x's dtype
  assert r.dtype == np.float32 and not r.weak_type
  with pytest.raises(TypeError, match="clamp requires max.shape == operand.shape"):
    lax.clamp(Array(np.float32(0)), Array(x), Array(np.zeros(2, np.float32)))
  with pytest.raises(TypeError, match="clamp does not accept dtype complex64"):
    lax.clamp(*[Array(np.zeros(2, np.complex64))] * 3)


# ---------------------------------------------------------------- weak types, scalars, errors


def test_weak_type_propagation():
  w = Array(np.float32(2), weak_type=True)
  s = Array(np.ones(3, np.float32))
  assert lax.add(w, w).weak_type and not lax.add(w, s).weak_type and not lax.add(s, w).weak_type
  assert lax.sin(w).weak_type and not lax.sin(s).weak_type
  assert lax.lt(w, w).weak_type and lax.lt(w, w).dtype == np.bool_  # (a weak bool, as JAX)
  assert not lax.lt(w, s).weak_type
  assert lax.abs(Array(np.complex64(1j), weak_type=True)).weak_type
  b = Array(np.array(True))
  assert lax.select_n(b, w, w).weak_type
  assert not lax.select_n(b, w, Array(np.float32(1))).weak_type
  assert lax.clamp(w, w, w).weak_type
  assert lax.integer_pow(w, 3).weak_type and lax.round(w).weak_type
  assert lax._convert_element_type(s, np.float64, weak_type=True).weak_type
  assert not lax.convert_element_type(w, np.float64).weak_type


def test_python_scalars_take_the_array_dtype_weakly():
  x = Array(np.arange(3, dtype=np.float32))
  for f in (lax.add, lax.sub, lax.mul, lax.div, lax.max, lax.pow, lax.atan2):
    r, r2 = f(x, 2.0), f(2.0, x)
    assert r.dtype == r2.dtype == np.float32 and not r.weak_type
  i8 = Array(np.array([1, 2], np.int8))
  assert lax.add(i8, 3).dtype == np.int8 and lax.shift_left(i8, 1).tolist() == [2, 4]
  assert lax.lt(i8, 2).tolist() == [True, False]
  with pytest.raises(TypeError, match="cannot be converted"):
    lax.add(i8, 1000)
  r = lax.add(2.0, 3.0)
  assert r.dtype == np.float64 and r.weak_type


def test_repeated_python_scalars_keep_their_values_types_and_zero_signs():
  # jnp's operators make a Python scalar's weak literal once per (type, value, dtype)
  import nbjax.numpy as jnp
  x = jnp.asarray(np.array([1.5, -2.0, 3.0], np.float32))
  for _ in range(3):
    assert np.signbit(np.asarray(x * 0.0)).tolist() == [False, True, False]
    assert np.signbit(np.asarray(x * -0.0)).tolist() == [True, False, True]
    assert np.isnan(np.asarray(x * float("nan"))).all()
    r = 0.9 * x
    assert r.dtype == np.float32 and not r.weak_type
    np.testing.assert_array_equal(r, np.float32(0.9) * np.asarray(x))
  b = jnp.asarray(np.array([True, False]))
  i = jnp.asarray(np.array([1, 2], np.int8))
  for _ in range(2):
    assert (b & True).dtype == np.bool_ and (b & True).tolist() == [True, False]
    assert (i + 1).dtype == np.int8 and (i + 1).tolist() == [2, 3]
    assert (i + True).tolist() == [2, 3]
    assert (i * 2.0).dtype == dtypes.default_float_dtype() and (i * 2.0).tolist() == [2., 4.]
    assert (i + 1000).tolist() == [-23, -22]  # (JAX's wrap)
  y = jnp.asarray(np.array([complex(1, -0.0)], np.complex64))  # (2-0j == 2+0j)
  y + complex(2.0, -0.0)
  assert not np.signbit(np.asarray(y + complex(2.0, 0.0)).imag).any()
  assert np.signbit(np.asarray(y + complex(2.0, -0.0)).imag).all()
  # a literal that reaches the user (a vjp residual) is theirs to delete or donate
  x = jnp.ones(3, np.float32)
  _, f_vjp = nbjax.vjp(lambda a: jnp.sum(a * 0.75), x)
  for leaf in nbjax.tree_util.tree_leaves(f_vjp):
    leaf.delete()
  assert (jnp.ones(3, np.float32) * 0.75).tolist() == [0.75] * 3


def test_power_fast_path_is_the_general_path():
  # jnp.power (and **) binds pow directly for inexact operands of one dtype or a Python
  # float (Adam's ``B1 ** t``): values, dtypes and weak types are the general path's
  import nbjax.numpy as jnp
  from nbjax.numpy import _ufuncs
  rng = np.random.default_rng(0)
  for d in (np.float32, np.float64, np.complex64):
    a = jnp.asarray((rng.random(5) + 0.5).astype(d))
    b = jnp.asarray((rng.random(5) * 3 - 1).astype(d))
    t = jnp.asarray(np.asarray(3.0, d))
    for x, y in ((a, b), (a, 2.5), (0.9, t), (2.0, a), (a, -0.5), (t, t), (a, 1.5 + 0.5j),
                 (jnp.asarray(np.array([2.0, 3.0], np.float32)), jnp.asarray(np.array([1, 2], np.int32)))):
      if isinstance(y, complex) and d != np.complex64:
        continue
      want = _ufuncs._power_general(x, y)
      for got in (jnp.power(x, y), x ** y):
        assert got.dtype == want.dtype and got.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert (jnp.asarray(np.float32(2.0)) ** 0.5).dtype == np.float32
  np.testing.assert_allclose(nbjax.grad(lambda t: 0.9 ** t)(jnp.asarray(np.float32(2.0))),
                             0.81 * np.log(0.9), rtol=1e-6)


def test_errors_name_the_primitive():
  f32, i32 = Array(np.ones(3, np.float32)), Array(np.ones(3, np.int32))
  with pytest.raises(TypeError, match="sin does not accept dtype int32. Accepted dtypes are subtypes "
                                      "of floating, complexfloating"):
    lax.sin(i32)
  with pytest.raises(TypeError, match="lax.add requires arguments to have the same dtypes, got "
                                      "float32, int32"):
    lax.add(f32, i32)
  with pytest.raises(TypeError, match="add got incompatible shapes for broadcasting"):
    lax.add(f32, Array(np.ones(4, np.float32)))
  with pytest.raises(TypeError, match="mul: arrays must have the same number of dimensions"):
    lax.mul(f32, Array(np.ones((1, 3), np.float32)))
  with pytest.raises(TypeError, match="shift_left does not accept dtype float32 at position 0"):
    lax.shift_left(f32, f32)
  with pytest.raises(TypeError, match="abs does not accept dtype uint8"):
    lax.abs(Array(np.ones(3, np.uint8)))
  with pytest.raises(TypeError, match="float0"):
    E.neg_p.bind(np.zeros(3, dtypes.float0))
  with pytest.raises(TypeError, match="argument to exp as a JAX value"):
    E.exp_p.bind(object())
  with pytest.raises(TypeError, match="is_finite does not accept dtype int32"):
    lax.is_finite(i32)


def test_eager_fast_paths_agree_with_general_path():
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  xs = x[:, ::2]                                      # non-contiguous NumPy operand
  np.testing.assert_array_equal(lax.add(xs, xs), xs + xs)
  np.testing.assert_allclose(E.exp_p.impls["numba"](xs), np.exp(xs), rtol=1e-6)
  row = Array(np.arange(4, dtype=np.float32).reshape(1, 4))
  np.testing.assert_array_equal(lax.mul(Array(x), row), x * row._value)   # size-1 dims broadcast
  np.testing.assert_array_equal(lax.sub(Array(x), Array(np.float32(1))), x - 1)
  np.testing.assert_array_equal(lax.sub(Array(np.float32(1)), Array(x)), 1 - x)
  e = Array(np.zeros((0, 4), np.float32))
  assert lax.add(e, e).shape == (0, 4) and lax.sin(e).shape == (0, 4)
  z = lax.add(Array(np.float32(1)), Array(np.float32(2)))
  assert z.shape == () and type(z._value) is np.ndarray and float(z) == 3
  assert lax.sin(np.float32(0)).dtype == np.float32                    # NumPy scalar operand
  for backend in ("numba", "numpy"):
    nbjax.config.set_eager_backend("add", backend)
    try:
      np.testing.assert_array_equal(lax.add(Array(x), Array(x)), x + x)
      np.testing.assert_array_equal(lax.add(Array(x), 1.0), x + 1)
    finally:
      nbjax.config.set_eager_backend("add", None)


def test_full_and_friends():
  a = lax.full((2, 3), 1.5)
  assert a.shape == (2, 3) and a.dtype == np.float64 and a.weak_type
  b = lax.full((2,), 7, np.int8)
  assert b.dtype == np.int8 and not b.weak_type and b.tolist() == [7, 7]
  assert lax.full((), np.nan, np.int32).tolist() == 0             # conversion semantics
  x = Array(np.ones(3, np.float32), weak_type=True)
  z = lax.zeros_like_array(x)
  assert z.dtype == np.float32 and z.weak_type and z.tolist() == [0, 0, 0]
  f = lax.full_like(x, 2, np.int16, shape=(2,))
  assert f.dtype == np.int16 and not f.weak_type and f.tolist() == [2, 2]
  with pytest.raises(TypeError, match="full must be called with scalar fill_value"):
    lax.full((2,), np.ones(2))


# ---------------------------------------------------------------- jvp rules

_F = lambda *shape: rng.uniform(0.5, 2.0, shape)


@pytest.mark.parametrize("f,args", [
    (lax.tanh, (_F(4),)), (lax.logistic, (_F(4),)), (lax.acosh, (_F(4) + 1,)),
    (lax.atanh, (_F(4) / 3,)), (lax.asin, (_F(4) / 3,)), (lax.acos, (_F(4) / 3,)),
    (lax.atan, (_F(4),)), (lax.asinh, (_F(4),)), (lax.sinh, (_F(4),)), (lax.cosh, (_F(4),)),
    (lax.tan, (_F(4) / 2,)), (lax.exp2, (_F(4),)), (lax.expm1, (_F(4),)), (lax.log1p, (_F(4),)),
    (lax.sqrt, (_F(4),)), (lax.rsqrt, (_F(4),)), (lax.cbrt, (_F(4),)), (lax.square, (_F(4),)),
    (lax.erf, (_F(4),)), (lax.erfc, (_F(4),)), (lax.erf_inv, (_F(4) / 3,)), (lax.lgamma, (_F(4),)),
    (lax.digamma, (_F(4),)), (lambda x: lax.integer_pow(x, 3), (_F(4),)),
    (lambda x: lax.integer_pow(x, -2), (_F(4),)), (lax.atan2, (_F(4), _F(4))),
    (lax.pow, (_F(4), _F(4))), (lax.pow, (_F(4), np.float64(1.7)))]
    + [(lax.div, (_F(2, 3), _F(1, 3))), (lax.rem, (np.array([2.3, 4.1, 7.7, 9.2]), np.array([1.0, 1.5, 2.0, 2.5]))), (lax.max, (_F(4), _F(4))),
       (lax.min, (_F(4), np.float64(1.2)))],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else "")
def test_jvp_matches_finite_differences(f, args):
  testing.check_jvp(f, args)


def test_jvp_special_cases():
  x = np.array([1.0, 2.0, 3.0])
  # max/min split ties 0.5/0.5, as JAX
  _, t = nbjax.jvp(lax.max, (x, x), (np.ones(3), np.zeros(3)))
  np.testing.assert_allclose(t, [0.5, 0.5, 0.5])
  # abs of complex, integer exponents of pow, clamp, select_n, convert_element_type
  z = np.array([3 + 4j, -1 + 1j])
  _, t = nbjax.jvp(lax.abs, (z,), (np.array([1 + 0j, 1j]),))
  np.testing.assert_allclose(t, np.real(np.conj(z) * [1, 1j]) / np.abs(z))
  _, t = nbjax.jvp(lambda a: lax.pow(a, np.array([0, 1, 3], np.int32)), (x,), (np.ones(3),))
  np.testing.assert_allclose(t, [0.0, 1.0, 27.0])
  testing.check_jvp(lambda a: lax.clamp(1.5, a, 2.5), (x,))
  testing.check_jvp(lambda lo, a, hi: lax.clamp(lo, a, hi), (np.array(1.5), x, np.array([2.5, 0.5, 3.5])))
  w = np.array([0, 2, 1], np.int32)
  testing.check_jvp(lambda a, b, c: lax.select_n(w, a, b, c), (x, 2 * x, 3 * x))
  testing.check_jvp(lambda a: lax.convert_element_type(a, np.float64), (x.astype(np.float32),))
  _, t = nbjax.jvp(lambda a: lax.convert_element_type(a, np.int32), (x,), (np.ones(3),))
  assert np.asarray(t).dtype == dtypes.float0
  _, t = nbjax.jvp(lambda a: lax.real(lax.mul(lax.complex(a, a), lax.conj(lax.complex(a, a)))),
                   (x,), (np.ones(3),))
  np.testing.assert_allclose(t, 4 * x)


# ---------------------------------------------------------------- transpose rules


def _transpose(p, args, linear, params=None, ct=None):
  """Check <ct, f(x)> == <f^T(ct), x> (pairing Re(sum(a * b)), JAX's) for the linear args."""
  params = params or {}
  out = p.bind(*[Array(a) for a in args], **params)
  ct = np.asarray(testing.rand_like(rng, out)) if ct is None else ct
  und = [ad.UndefinedPrimal(core.get_aval(a)) if i in linear else Array(a) for i, a in enumerate(args)]
  cts = p.transpose(Array(ct), *und, **params)
  # f restricted to the linear args (others fixed) is linear: f(x) with the non-linear args
  lhs = np.real(np.sum(ct * np.asarray(out)))
  rhs = sum(np.real(np.sum(np.asarray(c) * args[i])) for i, c in enumerate(cts) if i in linear)
  f32 = any(np.asarray(a).dtype in (np.float32, np.complex64) for a in args)
  np.testing.assert_allclose(lhs, rhs, rtol=1e-6 if f32 else 1e-10)
  return cts


def test_transpose_rules_inner_product_identity():
  x, y = rng.standard_normal((2, 3)), rng.standard_normal((1, 3))
  z = x + 1j * rng.standard_normal((2, 3))
  _transpose(E.neg_p, [x], {0})
  _transpose(E.add_p, [x, y], {0, 1})
  _transpose(E.sub_p, [x, y], {0, 1})
  _transpose(E.add_any_p, [x, x], {0, 1})
  _transpose(E.copy_p, [x], {0})
  _transpose(E.mul_p, [x, y], {0})
  _transpose(E.mul_p, [x, np.float64(2.0)], {0})
  _transpose(E.div_p, [x, y + 3], {0})
  _transpose(E.real_p, [z], {0})
  _transpose(E.imag_p, [z], {0})
  _transpose(E.conj_p, [z], {0}, dict(input_dtype=z.dtype))
  _transpose(E.conj_p, [x], {0}, dict(input_dtype=x.dtype))
  _transpose(E.complex_p, [x, y], {0, 1})
  _transpose(E.convert_element_type_p, [x.astype(np.float32)], {0},
             dict(new_dtype=np.dtype(np.float64), weak_type=False))
  w = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
  _transpose(E.select_n_p, [w, x, 2 * x, 3 * x], {1, 2, 3})
  _transpose(E.select_n_p, [np.array(True), x, x], {1, 2})
  with pytest.raises(ValueError, match="div"):
    E.div_p.transpose(Array(x), Array(x), ad.UndefinedPrimal(core.get_aval(x)))
  c = E.convert_element_type_p.transpose(
      Array(x), ad.UndefinedPrimal(core.ShapedArray((2, 3), np.int32)),
      new_dtype=np.dtype(np.float64), weak_type=False)
  assert type(c[0]) is ad.Zero and c[0].aval.dtype == dtypes.float0


# ---------------------------------------------------------------- batching rules

_BX = rng.standard_normal((3, 2, 4))


@pytest.mark.parametrize("in_axes", testing.bdim_placements([2, 2, 2], limit=27))
def test_select_n_batching_every_placement(in_axes):
  w = (rng.random((3, 2, 4)) < 0.5)
  args = [np.moveaxis(a, 0, ax) if ax is not None else a[0] for a, ax in
          zip((w, _BX, 2 * _BX), in_axes)]
  if all(ax is None for ax in in_axes):
    pytest.skip("nothing batched")
  testing.check_vmap(lax.select, args, in_axes=tuple(in_axes))


@pytest.mark.parametrize("in_axes", [(None, 0, None), (0, 0, 0), (0, 1, 2), (None, 1, 0), (0, None, None)])
def test_select_n_batching_scalar_which_and_int_which(in_axes):
  wi = rng.integers(0, 3, (3,)).astype(np.int32)
  args = [wi if in_axes[0] is not None else wi[0]] + [
      np.moveaxis(k * _BX, 0, ax) if ax is not None else k * _BX[0] for k, ax in ((1, in_axes[1]), (2, in_axes[2]))]
  testing.check_vmap(lambda w, a, b: lax.select_n(w, a, b, lax.sub(a, b)), args, in_axes=in_axes)


@pytest.mark.parametrize("in_axes", [(None, 0, None), (0, 0, 0), (0, 1, None), (None, 2, 0),
                                     (0, None, 0), (1, 0, 2)])
def test_clamp_batching(in_axes):
  lo, hi = -0.5 * np.abs(_BX), 0.5 * np.abs(_BX)
  args = [np.moveaxis(a, 0, ax) if ax is not None else a[0] for a, ax in zip((lo, _BX, hi), in_axes)]
  testing.check_vmap(lax.clamp, args, in_axes=in_axes)
  scal = [lo[:, 0, 0] if in_axes[0] is not None else np.float64(-0.1), np.moveaxis(_BX, 0, 1),
          hi[:, 0, 0] if in_axes[2] is not None else np.float64(0.1)]
  testing.check_vmap(lax.clamp, scal, in_axes=(in_axes[0] and 0, 1, in_axes[2] and 0))


def test_batching_with_params_and_broadcasting():
  testing.check_vmap(lambda a: lax.convert_element_type(a, np.int16), (_BX * 10,), in_axes=1)
  testing.check_vmap(lambda a: lax.integer_pow(a, 3), (_BX,), in_axes=2)
  testing.check_vmap(lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), (_BX * 3,), in_axes=0)
  testing.check_vmap(lax.atan2, (np.moveaxis(_BX, 0, 1), _BX[:, :1, :]), in_axes=(1, 0))
  testing.check_vmap(lax.add, (_BX, np.float64(2.0)), in_axes=(1, None))


def test_broadcasting_fast_paths_equal_the_checked_path():
  """``x + b`` (a bias add: rank promotion) and size-1 broadcasting take cached fast paths
  after a shape pair's first call: the same values, dtypes and weak types as NumPy and as the
  first call, the same errors on every call, and rank promotion still policed by config."""
  import nbjax.numpy as jnp
  from nbjax.config import config
  rng = np.random.default_rng(0)
  for sx, sy in [((8, 16), (16,)), ((8, 16), (1, 16)), ((8, 1), (1, 16)), ((16,), (8, 16)),
                 ((3, 1, 4), (5, 1))]:
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (sx, sy))
    for op, ref in ((jnp.add, np.add), (jnp.multiply, np.multiply),
                    (lambda a, b: a - b, np.subtract), (jnp.maximum, np.maximum)):
      for _ in range(3):
        got = op(jnp.asarray(x), jnp.asarray(y))
        assert type(got) is Array and got.dtype == np.float32 and not got.weak_type
        np.testing.assert_array_equal(np.asarray(got), ref(x, y))
    if len(sx) == len(sy):
      for _ in range(3):
        np.testing.assert_array_equal(np.asarray(lax.add(jnp.asarray(x), jnp.asarray(y))),
                                      x + y)
  x = jnp.ones((8, 16), np.float32)
  for _ in range(3):
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
      x + jnp.ones((3,), np.float32)
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: "
                                        r"\(8, 16\), \(3, 16\)"):
      lax.add(x, jnp.ones((3, 16), np.float32))
  b = jnp.ones((16,), np.float32)
  x + b
  with config.override("numpy_rank_promotion", "raise"):
    with pytest.raises(ValueError, match="automatic rank promotion for add"):
      x + b
    assert (x + b.reshape(1, 16)).shape == (8, 16)  # equal ranks: no promotion


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_division_by_a_broadcast_divisor_is_xlas(dtype):
  """XLA computes a real ``a / broadcast(b)`` as ``a * broadcast(1 / b)`` (the reciprocal
  rounded in the dtype): so does eager div (per call, in fused chains and in replayed
  programs), and only for a broadcast divisor (equal shapes and complex divide exactly)."""
  import nbjax.numpy as jnp
  dt = dtypes.dtype(dtype)
  rng = np.random.default_rng(0)
  x = rng.standard_normal((300, 7)).astype(dt)
  for y in (rng.uniform(1, 9, (1, 7)), rng.uniform(1, 9, (300, 1)), rng.uniform(1, 9, (300, 7)),
            np.float64(3.0)):
    y = np.asarray(y).astype(dt)
    got, want = np.asarray(lax.div(x, y)), np.asarray(nbjax.jit(lax.div)(x, y))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
  bits = lambda v: np.asarray(v).view(np.uint8)
  xa = jnp.asarray(x)
  for f in (lambda a: a / 3.0, lambda a: (a * 2.0 + 1.0) / 3.0, lambda a: jnp.mean(a, 1),
            lambda a: a / jnp.max(a, 1, keepdims=True)):
    np.testing.assert_array_equal(bits(f(xa)), bits(nbjax.jit(f)(xa)))
    g = nbjax.vmap(f)  # replayed: a staged program, fused where it may
    for _ in range(3):
      np.testing.assert_array_equal(bits(g(xa[None])), bits(nbjax.jit(g)(xa[None])))
  y = x + dt.type(9)  # an unbroadcast divisor divides exactly (the two differ: the test can fail)
  assert (np.asarray(lax.div(x, y)) != x * (1 / y)).any() or dtype in ("float16", "bfloat16")
  c = (x[:, :1] + 1j).astype(np.complex64)
  np.testing.assert_array_equal(np.asarray(lax.div(c, np.complex64(1.3 - 0.4j))),
                                np.asarray(nbjax.jit(lax.div)(c, np.complex64(1.3 - 0.4j))))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_log2_and_log10_are_jaxs_programs(dtype):
  """jnp.log2/log10 as JAX defines them (log times a strong constant: strongly typed), with
  XLA's bits eagerly: XLA turns log2's division by the constant log(2) into a product with
  its reciprocal (rounded in the dtype; bfloat16 computes in float32, where it stays a
  division)."""
  import nbjax.numpy as jnp
  x = np.random.default_rng(0).uniform(0, 50, 3000).astype(dtypes.dtype(dtype))
  for f in (jnp.log2, jnp.log10):
    got, want = np.asarray(f(x)), np.asarray(nbjax.jit(f)(x))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert not f(3.0).weak_type


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "tanh", "logistic", "erf_inv"])
def test_float32_transcendentals_are_xlas_bits(name):
  """Eager float32 exp, expm1, log, log1p, tanh, logistic and erf_inv (and float16/bfloat16
  but expm1 and logistic) run numba ports of XLA's float32 expansions: every result is jit's
  (XLA's) bits, subnormals flushed as XLA flushes them, on random bit patterns, each
  function's interesting ranges and special values."""
  f = getattr(lax, name)
  rng = np.random.default_rng(7)
  x = np.concatenate([
      rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
      rng.uniform(-100, 100, 50_000), rng.uniform(-1, 1, 50_000),
      rng.standard_normal(20_000) * 1e-3, rng.uniform(-90, -85, 5_000), rng.uniform(87, 90, 5_000),
      [0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38,
       3.4028235e38, 88.72283, 88.72284, -87.33655, 0.70710677, 0.70710683]]).astype(np.float32)
  with np.errstate(all="ignore"):
    got = np.asarray(f(x))
    want = np.asarray(nbjax.jit(f)(x))
  bad = (got.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(got) & np.isnan(want))
  assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
  for d in () if name in ("expm1", "logistic") else (np.float16, ml_dtypes.bfloat16):
    # (XLA computes those two in float16/bfloat16 steps: no float32 result rounded once)
    xd = x[200_000:].astype(d)
    with np.errstate(all="ignore"):
      g, w = np.asarray(f(xd)).astype(np.float32), np.asarray(nbjax.jit(f)(xd)).astype(np.float32)
    assert ((g == w) | (np.isnan(g) & np.isnan(w))).all(), d


def test_float64_erf_inv_and_xla_log1p_are_xlas_bits():
  """Eager float64 erf_inv is a port of XLA's (Giles' double-precision polynomials in
  -log1p(-x^2) with XLA's own log1p, fused multiply-adds, subnormals flushed): every result is
  jit's bits. Its log1p (also lgamma's and digamma's) is XLA's float64 log1p bit for bit;
  eager lax.log1p stays NumPy's correctly rounded loop (5x faster than the port)."""
  from kernels import elementwise as KE
  rng = np.random.default_rng(3)
  x = np.concatenate([rng.uniform(-1, 1, 100_000), 1 - np.logspace(-16, -1, 2000),
                      np.logspace(-16, -1, 2000) - 1, rng.uniform(-1e-8, 1e-8, 1000),
                      [1, -1, 0, -0.0, 1.5, -2, np.inf, -np.inf, np.nan, 5e-324, -1e-310,
                       2.2250738585072014e-308, 2.3e-308, 1 - 2**-53, 2**-53 - 1]])
  with np.errstate(all="ignore"):
    got, want = np.asarray(lax.erf_inv(x)), np.asarray(nbjax.jit(lax.erf_inv)(x))
  bad = (got.view(np.uint64) != want.view(np.uint64)) & ~(np.isnan(got) & np.isnan(want))
  assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
  # JAX 0.10's bits
  assert got[-6:].tolist() == [0.0, -0.0, 0.0, 0.0, 5.863584748755167, -5.863584748755167]
  y = np.concatenate([rng.uniform(-0.5, 0.5, 3000), rng.uniform(-1, 20, 1000),
                      [0, -0.0, -1, np.inf, np.nan, 0.41421356237309503, 1e-300]])
  got = np.array([KE._xla_log1p_f64(v) for v in y])
  with np.errstate(all="ignore"):
    want = np.asarray(nbjax.jit(lax.log1p)(y))
  assert ((got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))).all()


def test_lax_dtype_errors_and_float_integer_pow_as_jax():
  f32, i32 = np.ones(2, np.float32), np.ones(2, np.int32)
  with pytest.raises(TypeError, match=r"lax.add requires arguments to have the same dtypes, "
                     r"got float32, int32. \(Tip: jnp.add is a similar function"):
    lax.add(f32, i32)
  with pytest.raises(TypeError, match=r"left_shift is a similar"):
    lax.shift_left(i32, np.ones(2, np.int64))
  with pytest.raises(TypeError, match=r"got int32, float32, float32\.$"):  # no tip: no jnp.clamp
    lax.clamp(np.int32(1), f32, np.float32(3))
  with pytest.raises(TypeError, match=r"\(Tip: jnp.concatenate is a similar"):
    lax.concatenate([f32, i32], 0)
  with pytest.raises(ValueError, match="concatenate requires a non-empty sequences of arrays"):
    lax.concatenate([], 0)
  with pytest.raises(TypeError, match=r"^lax.scatter requires arguments to have the same"):
    lax.scatter_add(f32, np.zeros((1, 1), np.int32), i32[:1], lax.ScatterDimensionNumbers(
        (), (0,), (0,)))
  assert float(lax.integer_pow(2.0, 3.0)) == 8.0  # an integral float exponent, as JAX


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64])
def test_block_broadcast_kernels_read_the_bias_in_place(dtype):
  """A binary op whose second (or first) operand broadcasts in blocks (a column, a row, the
  trailing axes of a 3-d operand) runs the kernel's ``bc`` form (from 16384 elements, below
  the team's threshold): the same values as NumPy's broadcast and as jit, either order."""
  from kernels import elementwise as KE
  rng = np.random.default_rng(3)
  mk = lambda s: (rng.standard_normal(s) * 10 + (1j * rng.standard_normal(s)
                                                  if np.dtype(dtype).kind == "c" else 0)
                  ).astype(dtype) + (1 if np.dtype(dtype).kind == "i" else 0)
  cases = [((400, 50), (400, 1)), ((400, 50), (50,)), ((400, 50), (1, 50)),
           ((20, 30, 40), (20, 1, 1)), ((20, 30, 40), (20, 30, 1)), ((20, 30, 40), (30, 40)),
           ((20, 30, 40), (1, 1, 40))]
  import nbjax.numpy as jnp
  ops = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.equal]
  if np.dtype(dtype).kind != "i":
    ops.append(jnp.divide)
  for big, small in cases:
    x, b = mk(big), mk(small)
    bb = np.broadcast_to(b, big)
    for op in ops:
      if op is jnp.maximum and np.dtype(dtype).kind == "c":
        continue
      for args, full in (((x, b), (x, bb)), ((b, x), (bb, x))):
        got = np.asarray(op(*map(Array, args)))
        if op is not jnp.divide:  # (a broadcast divisor: XLA's product with the reciprocal)
          np.testing.assert_array_equal(got, np.asarray(op(*map(Array, full))),
                                        err_msg=f"{op.__name__} {big} {small}")
        if np.dtype(dtype).kind != "c":  # (XLA contracts complex products of a broadcast)
          np.testing.assert_array_equal(got, np.asarray(nbjax.jit(op)(*args)),
                                        err_msg=f"{op.__name__} {big} {small} jit")
  assert any(k[0].endswith("@bc") for k in KE._compiled)  # (the path ran)


def test_bitwise_and_negative_integer_pow_errors_as_jax():
  import nbjax.numpy as jnp
  # JAX's messages (0.10.2): lax's dtype rule names "integer, bool"; integer_pow the real aval
  f = jnp.ones(2, jnp.float32)
  for call, msg in [(lambda: jnp.bitwise_and(f, 1), "and does not accept dtype float32 at position "
                     "0. Accepted dtypes at position 0 are subtypes of integer, bool."),
                    (lambda: f | 1, "or does not accept dtype float32 at position 0. Accepted "
                     "dtypes at position 0 are subtypes of integer, bool."),
                    (lambda: ~f, "not does not accept dtype float32. Accepted dtypes are subtypes "
                     "of integer, bool."),
                    (lambda: jnp.power(jnp.array([2, 3]), -1), "Integers cannot be raised to "
                     "negative powers, got integer_pow(int64[2], -1)"),
                    (lambda: lax.integer_pow(jnp.asarray(2), -2), "Integers cannot be raised to "
                     "negative powers, got integer_pow(~int64[], -2)")]:
    with pytest.raises(TypeError) as e:
      call()
    assert str(e.value) == msg


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_exp2_logistic_log1p_eager_bits_as_jit(dtype):
  """XLA computes exp2 as exp(x * log(2)) in the operand's dtype (np.exp2(3.) is 8, XLA's
  7.999999999999998); bfloat16 exp2/logistic/log1p round between the steps of XLA's
  expansions (the "xla" bf16 mode): eager gives jit's bits for every input."""
  import nbjax.numpy as jnp
  d = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
  x = jnp.asarray(np.linspace(-10, 10, 2001).astype(d))
  p = jnp.asarray(np.linspace(0.01, 10, 2001).astype(d))
  for f, a in ((jnp.exp2, x), (nbjax.nn.sigmoid, x), (jnp.log1p, p)):
    e, j = np.asarray(f(a)), np.asarray(nbjax.jit(f)(a))
    w = np.uint16 if e.dtype.itemsize == 2 else np.uint32
    np.testing.assert_array_equal(e.view(w), j.view(w), err_msg=f"{f.__name__} {dtype}")
  assert float(jnp.exp2(jnp.asarray(2.0, d))) == float(nbjax.jit(jnp.exp2)(jnp.asarray(2.0, d)))
