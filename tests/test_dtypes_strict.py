"""jax_numpy_dtype_promotion='strict': JAX's strict lattice, its errors, the option and its
context manager; expected values from JAX 0.10.2 (x64 on)."""
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import dtypes
from nbjax.config import config

COLS = "b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 c8 c16 i* f* c*".split()
# JAX's result_type under strict promotion, row x column; "-": TypePromotionError
STRICT_TABLE = """
b1  b1  -   -   -   -   -   -   -   -   -   -   -   -   -   -   -   -   -
u1  -   u1  -   -   -   -   -   -   -   -   -   -   -   -   -   u1  -   -
u2  -   -   u2  -   -   -   -   -   -   -   -   -   -   -   -   u2  -   -
u4  -   -   -   u4  -   -   -   -   -   -   -   -   -   -   -   u4  -   -
u8  -   -   -   -   u8  -   -   -   -   -   -   -   -   -   -   u8  -   -
i1  -   -   -   -   -   i1  -   -   -   -   -   -   -   -   -   i1  -   -
i2  -   -   -   -   -   -   i2  -   -   -   -   -   -   -   -   i2  -   -
i4  -   -   -   -   -   -   -   i4  -   -   -   -   -   -   -   i4  -   -
i8  -   -   -   -   -   -   -   -   i8  -   -   -   -   -   -   i8  -   -
bf  -   -   -   -   -   -   -   -   -   bf  -   -   -   -   -   bf  bf  -
f2  -   -   -   -   -   -   -   -   -   -   f2  -   -   -   -   f2  f2  -
f4  -   -   -   -   -   -   -   -   -   -   -   f4  -   -   -   f4  f4  -
f8  -   -   -   -   -   -   -   -   -   -   -   -   f8  -   -   f8  f8  -
c8  -   -   -   -   -   -   -   -   -   -   -   -   -   c8  -   c8  c8  c8
c16 -   -   -   -   -   -   -   -   -   -   -   -   -   -   c16 c16 c16 c16
i*  -   u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
f*  -   -   -   -   -   -   -   -   -   bf  f2  f4  f8  c8  c16 f*  f*  c*
c*  -   -   -   -   -   -   -   -   -   -   -   -   -   c8  c16 c*  c*  c*
"""
TABLE = {(r[0], c): v for r in (l.split() for l in STRICT_TABLE.strip().splitlines())
         for c, v in zip(COLS, r[1:])}
STRONG = {'b1': np.bool_, 'u1': np.uint8, 'u2': np.uint16, 'u4': np.uint32, 'u8': np.uint64,
          'i1': np.int8, 'i2': np.int16, 'i4': np.int32, 'i8': np.int64, 'bf': dtypes.bfloat16,
          'f2': np.float16, 'f4': np.float32, 'f8': np.float64, 'c8': np.complex64,
          'c16': np.complex128}
WEAK = {'i*': 1, 'f*': 1.0, 'c*': 1j}
STRICT_MSG = ("have no available implicit dtype promotion path when jax_numpy_dtype_promotion="
              "strict. Try explicitly casting inputs to the desired output type, or set "
              "jax_numpy_dtype_promotion=standard.")


def raises_strict(*names):
  """pytest.raises for the strict error naming ``names`` (JAX orders them as a set does)."""
  alts = "|".join(re.escape(repr(n)) for n in names)
  return pytest.raises(dtypes.TypePromotionError, match=(
      rf"^Input dtypes \((({alts})(, )?){{{len(names)}}}\) {re.escape(STRICT_MSG)}$"))


@pytest.fixture
def strict():
  with nbjax.numpy_dtype_promotion("strict"):
    yield


def _value(cell):
  return WEAK[cell] if cell in WEAK else np.ones(2, STRONG[cell])


def _cell(d, weak):
  return {'i': 'i*', 'f': 'f*', 'c': 'c*'}[d.kind] if weak else \
      next(k for k, v in STRONG.items() if np.dtype(v) == d)


@pytest.mark.parametrize("row", COLS)
def test_strict_result_type_table(strict, row):
  for col in COLS:
    want = TABLE[row, col]
    if want == "-":
      with pytest.raises(dtypes.TypePromotionError, match=re.escape(STRICT_MSG)):
        dtypes.result_type(_value(row), _value(col))
    else:
      assert _cell(*dtypes.result_type(_value(row), _value(col),
                                       return_weak_type_flag=True)) == want, (row, col)


def test_strict_messages_and_promote_types(strict):
  with pytest.raises(dtypes.TypePromotionError, match=re.escape(
      f"Input dtypes ('int32', 'float32') {STRICT_MSG}")):
    jnp.promote_types("int32", "float32")
  with pytest.raises(dtypes.TypePromotionError, match=re.escape(
      f"Input dtypes (\"<class 'float'>\", 'int32') {STRICT_MSG}")):
    jnp.promote_types(float, "int32")
  with pytest.raises(dtypes.TypePromotionError, match="when jax_numpy_dtype_promotion=strict"):
    jnp.promote_types("float8_e4m3fn", "float32")  # the strict message, not the 8-bit one
  assert jnp.promote_types(int, "float32") == np.float32
  assert jnp.promote_types(int, float) == np.float64
  assert jnp.promote_types("bool", bool) == np.bool_
  assert jnp.result_type(1, 1.0) == np.float64
  assert dtypes.result_type(jnp.asarray(2), 2.5, return_weak_type_flag=True) == (np.float64, True)


@pytest.mark.parametrize("jit", [False, True])
def test_strict_binary_ops(strict, jit):
  i32, f32 = jnp.ones(3, "int32"), jnp.ones(3, "float32")
  wrap = nbjax.jit if jit else (lambda f: f)
  for f in [lambda a, b: a + b, jnp.multiply, lambda a, b: jnp.where(True, a, b),
            lambda a, b: jnp.concatenate([a, b])]:
    with raises_strict("int32", "float32"):
      wrap(f)(i32, f32)
  with raises_strict(str(float), "int32"):
    wrap(lambda a: a * 2.5)(i32)
  with raises_strict("bool", str(int)):
    wrap(lambda a: a + 1)(jnp.ones(2, bool))
  # weak Python scalars still combine with their own kind and narrower kinds
  assert wrap(lambda a: a + 1)(i32).dtype == np.int32
  assert wrap(lambda a: a * 2)(f32).dtype == np.float32
  assert wrap(lambda a: a + 1.5 + 1j)(jnp.ones(2, "complex64")).dtype == np.complex64
  assert wrap(lambda a: a + a)(f32).dtype == np.float32


def test_mode_switch_retraces():
  f = nbjax.jit(lambda a, b: a + b)
  i32, i16 = jnp.ones(2, "int32"), jnp.ones(2, "int16")
  assert f(i32, i16).dtype == np.int32
  with nbjax.numpy_dtype_promotion("strict"):
    assert config.jax_numpy_dtype_promotion == "strict"
    with raises_strict("int32", "int16"):
      f(i32, i16)
    with pytest.raises(dtypes.TypePromotionError):
      i32 + i16
  assert f(i32, i16).dtype == np.int32 and (i32 + i16).dtype == np.int32
  assert config.jax_numpy_dtype_promotion == "standard"


def test_option_values():
  assert config.read("numpy_dtype_promotion") == "standard"
  config.update("jax_numpy_dtype_promotion", "strict")
  try:
    assert jnp.result_type(np.int8(1), 1) == np.int8
    with pytest.raises(dtypes.TypePromotionError):
      jnp.result_type(np.int8(1), np.int16(1))
  finally:
    config.update("jax_numpy_dtype_promotion", "standard")
  assert jnp.result_type(np.int8(1), np.int16(1)) == np.int16
  with pytest.raises(ValueError, match="'foo' is not a valid NumpyDtypePromotion"):
    config.update("jax_numpy_dtype_promotion", "foo")
  with pytest.raises(ValueError, match="'foo' is not a valid NumpyDtypePromotion"):
    with nbjax.numpy_dtype_promotion("foo"):
      pass
  assert config.read("numpy_dtype_promotion") == "standard"


def test_scatter_cast_check():
  """``x.at[i].set(y)``: JAX's FutureWarning for an unsafe cast (Python floats into ints
  too), the strict error for distinct dtypes; weak ints still go into any int array."""
  x = jnp.zeros(3, "int32")
  for y in [1.5, jnp.asarray(1.5), np.float64(1), 1j]:
    with pytest.warns(FutureWarning, match="cannot safely cast value from dtype="):
      assert x.at[0].set(y).dtype == np.int32
  with nbjax.numpy_dtype_promotion("strict"):
    assert x.at[0].set(1).dtype == np.int32
    with raises_strict(str(float), "int32"):
      x.at[0].set(1.5)
    with raises_strict("float32", "int32"):
      jnp.zeros(3, "float32").at[0].set(jnp.int32(1))
    with raises_strict("float32", "float64"):
      jnp.zeros(3, "float32").at[0].add(np.float64(1))


def test_grids_promote_in_standard_mode(strict):
  # as JAX's: mgrid/ogrid join their axes' dtypes under standard promotion even when strict
  assert jnp.mgrid[0:3, 0:2.5:0.5].dtype == np.float64
  assert [g.dtype for g in jnp.ogrid[0:3, 0:1:3j]] == [np.float64, np.float64]
  with raises_strict("int32", "float32"):
    jnp.r_[jnp.zeros(2, "int32"), jnp.zeros(2, "float32")]


def test_lax_mul_out_dtype_ignores_strict(strict):
  # lax.mul's out_dtype widening is no implicit promotion (JAX lax_test testOpOutDtype)
  from nbjax import lax
  out = lax.mul(jnp.ones(2, "float32"), jnp.full(2, 3, "int16"), out_dtype="float32")
  assert out.dtype == np.float32 and out.tolist() == [3., 3.]
  assert lax.mul(np.float64(2), np.int64(3), out_dtype="float64") == 6.


def test_strict_weak_operands_of_one_dtype_promote_as_jax():
  """Under strict promotion two weak operands of one dtype join to their kind's default
  dtype, staying weak (JAX 0.10.2; dtypes_test.testBinaryNonPromotion): the binary fast
  paths step aside while strict is on; a unary op keeps its operand's dtype."""
  import nbjax
  import nbjax.numpy as jnp
  from nbjax.lax import _convert_element_type
  got = []
  for d in ("float16", "int8", "complex64", "float32"):
    x = _convert_element_type(0, np.dtype(d), weak_type=True)
    with nbjax.numpy_dtype_promotion("strict"):
      y = x + x
      got.append((str(y.dtype), y.weak_type, str(jnp.multiply(x, x).dtype),
                  str(nbjax.jit(lambda a: a - a)(x).dtype), str(nbjax.lax.add(x, x).dtype)))
    assert (x + x).dtype == np.dtype(d)  # standard again: no promotion
  assert got == [("float64", True, "float64", "float64", "float16"),
                 ("int64", True, "int64", "int64", "int8"),
                 ("complex128", True, "complex128", "complex128", "complex64"),
                 ("float64", True, "float64", "float64", "float32")]
  with nbjax.numpy_dtype_promotion("strict"):
    assert jnp.sin(_convert_element_type(0, np.dtype("float16"), weak_type=True)).dtype == np.float16


def test_packbits_under_strict(strict):
  # packbits compares with a zero of the operand's dtype, not a Python 0 (JAX lax_numpy_test
  # testPackbits runs under strict promotion)
  assert jnp.packbits(jnp.array([True, False, True, True, False, False, False, True, True])
                      ).tolist() == [177, 128]
  out = jnp.packbits(jnp.array([1, 0, 3], "int16"), bitorder="little")
  assert out.dtype == np.uint8 and out.tolist() == [5]
