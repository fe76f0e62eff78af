"""Tests for nbjax.dtypes: JAX's published promotion table, weak types, x64 canonicalization."""
import functools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nbjax import dtypes
from nbjax.config import config

# JAX's binary promotion table, transcribed from docs/type_promotion.rst ("Type promotion
# semantics", generated there by dtypes._lattice_result_type with x64 enabled). Cells name
# the result: "i*"/"f*"/"c*" mean a weakly typed int/float/complex result.
COLS = "b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 c8 c16 i* f* c*".split()
JAX_TABLE = """
b1  b1  u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
u1  u1  u1  u2  u4  u8  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16 u1  f*  c*
u2  u2  u2  u2  u4  u8  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16 u2  f*  c*
u4  u4  u4  u4  u4  u8  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16 u4  f*  c*
u8  u8  u8  u8  u8  u8  f*  f*  f*  f*  bf  f2  f4  f8  c8  c16 u8  f*  c*
i1  i1  i2  i4  i8  f*  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i1  f*  c*
i2  i2  i2  i4  i8  f*  i2  i2  i4  i8  bf  f2  f4  f8  c8  c16 i2  f*  c*
i4  i4  i4  i4  i8  f*  i4  i4  i4  i8  bf  f2  f4  f8  c8  c16 i4  f*  c*
i8  i8  i8  i8  i8  f*  i8  i8  i8  i8  bf  f2  f4  f8  c8  c16 i8  f*  c*
bf  bf  bf  bf  bf  bf  bf  bf  bf  bf  bf  f4  f4  f8  c8  c16 bf  bf  c8
f2  f2  f2  f2  f2  f2  f2  f2  f2  f2  f4  f2  f4  f8  c8  c16 f2  f2  c8
f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f4  f8  c8  c16 f4  f4  c8
f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  f8  c16 c16 f8  f8  c16
c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c8  c16 c8  c16 c8  c8  c8
c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16
i*  i*  u1  u2  u4  u8  i1  i2  i4  i8  bf  f2  f4  f8  c8  c16 i*  f*  c*
f*  f*  f*  f*  f*  f*  f*  f*  f*  f*  bf  f2  f4  f8  c8  c16 f*  f*  c*
c*  c*  c*  c*  c*  c*  c*  c*  c*  c*  c8  c8  c8  c16 c8  c16 c*  c*  c*
"""
TABLE = {(r[0], c): v for r in (l.split() for l in JAX_TABLE.strip().splitlines())
         for c, v in zip(COLS, r[1:])}

STRONG = {'b1': np.bool_, 'u1': np.uint8, 'u2': np.uint16, 'u4': np.uint32, 'u8': np.uint64,
          'i1': np.int8, 'i2': np.int16, 'i4': np.int32, 'i8': np.int64, 'bf': dtypes.bfloat16,
          'f2': np.float16, 'f4': np.float32, 'f8': np.float64, 'c8': np.complex64,
          'c16': np.complex128}
WEAK_TYPES = {'i*': int, 'f*': float, 'c*': complex}
WEAK_VALUES = {'i*': 1, 'f*': 1.0, 'c*': 1j}
WEAK_KIND = {'i*': 'i', 'f*': 'f', 'c*': 'c'}


@pytest.fixture
def x64_off():
  old = config.enable_x64
  config.update("enable_x64", False)
  try:
    yield
  finally:
    config.update("enable_x64", old)


def expected(cell):
  """(dtype, weak) that a table cell names under the current x64 mode."""
  if cell in WEAK_KIND:
    return dtypes._defaults[WEAK_KIND[cell]], True
  return dtypes.canonicalize_dtype(STRONG[cell]), False


def test_table_is_square_and_symmetric():
  assert len(TABLE) == len(COLS) ** 2
  for (r, c), v in TABLE.items():
    assert TABLE[c, r] == v, (r, c)


@pytest.mark.parametrize("row", COLS)
def test_result_type_matches_published_table(row):
  for col in COLS:
    want = expected(TABLE[row, col])
    for a in (WEAK_TYPES.get(row, STRONG.get(row)), WEAK_VALUES.get(row)):
      for b in (WEAK_TYPES.get(col, STRONG.get(col)), WEAK_VALUES.get(col)):
        if a is None or b is None:
          continue
        got = dtypes.result_type(a, b, return_weak_type_flag=True)
        assert got == want, (row, col, a, b, got, want)


def test_result_type_table_x64_off(x64_off):
  canon = lambda n: n if n in WEAK_KIND else {'u8': 'u4', 'i8': 'i4', 'f8': 'f4', 'c16': 'c8'}.get(n, n)
  for row in COLS:
    for col in COLS:
      a, b = WEAK_TYPES.get(row, STRONG.get(row)), WEAK_TYPES.get(col, STRONG.get(col))
      want = expected(TABLE[canon(row), canon(col)])
      assert dtypes.result_type(a, b, return_weak_type_flag=True) == want, (row, col)
      assert dtypes.result_type(a, b).itemsize <= 8


@pytest.mark.parametrize("row", [c for c in COLS if c not in WEAK_KIND])
def test_promote_types_matches_table(row):
  for col in STRONG:
    cell = TABLE[row, col]
    want = dtypes.python_scalar_dtypes[WEAK_TYPES[cell]] if cell in WEAK_KIND else np.dtype(STRONG[cell])
    assert dtypes.promote_types(STRONG[row], STRONG[col]) == want, (row, col)


class Weak:
  """Stands in for an nbjax Array: ``.dtype`` plus ``.weak_type``."""
  def __init__(self, dtype, weak_type=True):
    self.dtype, self.weak_type = np.dtype(dtype), weak_type


class AvalHolder:
  def __init__(self, dtype, weak_type):
    self.dtype = np.dtype(dtype)
    self.aval = type("Aval", (), {"weak_type": weak_type})()


def test_weak_type_cases():
  f32, i32, i8 = (np.zeros(3, t) for t in (np.float32, np.int32, np.int8))
  rt = functools.partial(dtypes.result_type, return_weak_type_flag=True)
  assert rt(f32, 2.0) == (np.float32, False)          # f32 array * 2.0 stays float32
  assert rt(f32, 2) == (np.float32, False)
  assert rt(i32, 2.0) == (np.float64, True)           # i32 + f* -> f*: default float, weak
  assert rt(i8, 2) == (np.int8, False)
  assert rt(i8, np.int32(2)) == (np.int32, False)
  assert rt(2, 2) == (np.int64, True)
  assert rt(2, 2.0) == (np.float64, True)
  assert rt(2.0, 1j) == (np.complex128, True)
  assert rt(True, True) == (np.bool_, False)           # bool is never weak
  assert rt(True, 2) == (np.int64, True)
  assert rt(True) == (np.bool_, False)
  assert rt(3) == (np.int64, True)
  assert rt(np.uint64, np.int64) == (np.float64, True)  # u8 x i8 -> f*
  assert rt(dtypes.bfloat16, np.float16) == (np.float32, False)
  assert rt(Weak(np.int32), np.int16) == (np.int16, False)
  assert rt(Weak(np.float32), np.float16) == (np.float16, False)
  assert rt(Weak(np.float32), 2) == (np.float64, True)  # all weak: default width
  assert rt(Weak(np.int32, False), np.int16) == (np.int32, False)
  assert rt(AvalHolder(np.int32, True), np.uint8) == (np.uint8, False)
  assert rt(Weak(np.int32)) == (np.int64, True)
  assert rt(None) == (np.float64, False)
  assert rt(np.float32, np.float32, np.float32) == (np.float32, False)
  assert dtypes.result_type(f32, i32, 2.0) == np.float32
  with pytest.raises(ValueError):
    dtypes.result_type()
  with pytest.raises(dtypes.TypePromotionError):
    dtypes.result_type(dtypes.float8_e4m3fn, np.float32)


def test_weak_types_x64_off(x64_off):
  rt = functools.partial(dtypes.result_type, return_weak_type_flag=True)
  assert rt(np.zeros(3, np.int32), 2.0) == (np.float32, True)
  assert rt(np.zeros(3, np.float32), 2.0) == (np.float32, False)
  assert rt(2) == (np.int32, True)
  assert rt(np.float64) == (np.float32, False)
  assert rt(np.uint32, np.int32) == (np.int32, False)   # x32 lattice: u4 x i4 -> i4
  assert rt(np.int64, np.float64) == (np.float32, False)


def test_promote_types():
  assert dtypes.promote_types('int32', 'float32') == np.float32
  assert dtypes.promote_types(np.uint16, np.int32) == np.int32
  assert dtypes.promote_types('uint8', int) == np.uint8
  assert dtypes.promote_types('float16', float) == np.float16
  assert dtypes.promote_types(int, float) == np.float64
  assert dtypes.promote_types(dtypes.bfloat16, np.float16) == np.float32
  assert dtypes.promote_types(np.uint64, np.int8) == np.float64


def test_canonicalize_and_defaults(x64_off):
  assert dtypes.canonicalize_dtype(np.int64) == np.int32
  assert dtypes.canonicalize_dtype('uint64') == np.uint32
  assert dtypes.canonicalize_dtype(np.dtype('float64')) == np.float32
  assert dtypes.canonicalize_dtype(np.complex128) == np.complex64
  assert dtypes.canonicalize_dtype(float) == np.float32
  assert dtypes.canonicalize_dtype(np.int16) == np.int16
  assert dtypes.canonicalize_dtype(dtypes.bfloat16) == dtypes.bfloat16
  assert (dtypes.default_int_dtype(), dtypes.default_float_dtype(), dtypes.default_complex_dtype()
          ) == (np.int32, np.float32, np.complex64)
  assert dtypes.dtype(1) == np.int32 and dtypes.dtype(1.0) == np.float32
  assert dtypes.dtype(np.zeros(2)) == np.float64
  assert dtypes.dtype(np.zeros(2), canonicalize=True) == np.float32


def test_x64_default_and_restore():
  assert config.enable_x64
  assert dtypes.canonicalize_dtype(np.int64) == np.int64
  assert (dtypes.default_int_dtype(), dtypes.default_float_dtype(), dtypes.default_complex_dtype()
          ) == (np.int64, np.float64, np.complex128)
  with config.override("enable_x64", False):
    assert dtypes.canonicalize_dtype(np.int64) == np.int32
  assert dtypes.canonicalize_dtype(np.int64) == np.int64


def test_dtype_of_values():
  assert dtypes.dtype(1) == np.int64
  assert dtypes.dtype(1.0) == np.float64
  assert dtypes.dtype(1j) == np.complex128
  assert dtypes.dtype(True) == np.bool_
  assert dtypes.dtype(float) == np.float64
  assert dtypes.dtype(bool) == np.bool_
  assert dtypes.dtype('float32') == np.float32
  assert dtypes.dtype(np.float32) == np.float32
  assert dtypes.dtype(np.float32(1)) == np.float32
  assert dtypes.dtype(np.zeros(2, np.uint8)) == np.uint8
  assert dtypes.dtype(dtypes.bfloat16) == dtypes.bfloat16
  assert dtypes.dtype(dtypes.float0) == dtypes.float0
  with pytest.raises(TypeError):
    dtypes.dtype(np.array(['a']))
  with pytest.raises(ValueError):
    dtypes.dtype(None)
  assert dtypes.scalar_type_of(np.zeros(2, np.int8)) is int
  assert dtypes.scalar_type_of(np.float32(1)) is float
  assert dtypes.scalar_type_of(dtypes.bfloat16(1)) is float
  assert dtypes.scalar_type_of(True) is bool
  assert dtypes.scalar_type_of(1j) is complex


def test_weak_and_scalar_predicates():
  assert dtypes.is_weakly_typed(1) and dtypes.is_weakly_typed(1.0) and dtypes.is_weakly_typed(1j)
  assert not dtypes.is_weakly_typed(True)
  assert not dtypes.is_weakly_typed(np.float64(1.0))
  assert not dtypes.is_weakly_typed(np.zeros(2))
  assert dtypes.is_weakly_typed(Weak(np.float32))
  assert not dtypes.is_weakly_typed(Weak(np.float32, False))
  assert dtypes.is_weakly_typed(AvalHolder(np.float32, True))
  assert dtypes.is_python_scalar(True) and dtypes.is_python_scalar(2)
  assert not dtypes.is_python_scalar(np.float64(1.0))
  assert dtypes.python_scalar_dtypes[float] == np.float64


def test_to_inexact_floating_complex_numeric_dtypes(x64_off):
  # JAX's private helpers: fixed maps, not canonicalized (int64 -> float64 with x64 off too).
  cases = {"bool": ("float32", "float32", "complex64", "int32"),
           "int8": ("float32", "float32", "complex64", "int8"),
           "uint32": ("float32", "float32", "complex64", "uint32"),
           "int64": ("float64", "float64", "complex128", "int64"),
           "uint64": ("float64", "float64", "complex128", "uint64"),
           "float16": ("float16", "float16", "complex64", "float16"),
           "bfloat16": ("bfloat16", "bfloat16", "complex64", "bfloat16"),
           "complex64": ("complex64", "float32", "complex64", "complex64"),
           "complex128": ("complex128", "float64", "complex128", "complex128")}
  for d, (inexact, floating, cplx, numeric) in cases.items():
    got = (dtypes.to_inexact_dtype(d), dtypes.to_floating_dtype(d),
           dtypes.to_complex_dtype(d), dtypes.to_numeric_dtype(d))
    assert got == tuple(np.dtype(dtypes.bfloat16 if n == "bfloat16" else n)
                        for n in (inexact, floating, cplx, numeric)), d
  assert dtypes.to_inexact_dtype(dtypes.int4) == np.float32


def test_issubdtype_and_helpers():
  sub = dtypes.issubdtype
  assert sub(dtypes.bfloat16, np.floating) and sub(dtypes.bfloat16, np.inexact)
  assert sub(np.dtype(dtypes.bfloat16), np.number)
  assert not sub(dtypes.bfloat16, np.integer)
  assert sub(dtypes.bfloat16, dtypes.bfloat16) and not sub(np.float16, dtypes.bfloat16)
  assert sub(np.float32, np.floating) and sub('float32', np.inexact)
  assert sub(np.complex64, np.complexfloating) and not sub(np.complex64, np.floating)
  assert sub(np.int8, np.signedinteger) and not sub(np.uint8, np.signedinteger)
  assert sub(np.uint8, np.unsignedinteger) and sub(np.uint8, np.integer)
  assert sub(np.bool_, np.bool_) and not sub(np.bool_, np.integer)
  assert sub(np.int32, np.number) and not sub(np.bool_, np.number)
  assert sub(float, np.floating) and sub(np.float64, np.float64)
  # np.generic is no dtype: below none of them, custom floats and int4 included (JAX's
  # dtypes_test.testIsSubdtypeCustomFloats/IntN); int4 is signed, uint4 unsigned
  for t in (np.float32, dtypes.bfloat16, 'float8_e5m2', 'int4', 'uint4'):
    assert not sub(np.generic, t)
  assert sub('int4', np.signedinteger) and not sub('uint4', np.signedinteger)
  assert sub('uint4', np.unsignedinteger) and sub('uint4', np.integer)
  assert dtypes.is_float(np.dtype(np.float32)) and dtypes.is_float(dtypes.bfloat16)
  assert dtypes.is_float('float16') and not dtypes.is_float(np.int32)
  assert dtypes.is_int(np.dtype(np.uint8)) and dtypes.is_int(np.int64) and not dtypes.is_int(np.bool_)
  assert dtypes.is_complex(np.complex64) and not dtypes.is_complex(np.float64)
  assert dtypes.is_inexact(np.complex64) and dtypes.is_inexact(np.float16) and not dtypes.is_inexact(np.int8)
  assert dtypes.finfo(dtypes.bfloat16).bits == 16 and dtypes.finfo(np.float32).eps == np.finfo(np.float32).eps
  assert dtypes.iinfo(np.int8).max == 127
  assert dtypes.float0 == np.dtype([('float0', np.void, 0)])


# ---- lattice properties ---------------------------------------------------------------------

class Val:
  """A value of a given lattice node, to feed intermediate results back in."""
  def __init__(self, dtype, weak):
    self.dtype, self.weak_type = dtype, weak

node_st = st.sampled_from(COLS).map(lambda c: WEAK_TYPES.get(c, STRONG.get(c)))


def _rt(*args):
  d, w = dtypes.result_type(*args, return_weak_type_flag=True)
  return Val(d, w)


def _key(v):
  return (v.dtype, v.weak_type)


@settings(max_examples=300, deadline=None)
@given(node_st, node_st)
def test_commutative(a, b):
  assert dtypes.result_type(a, b, return_weak_type_flag=True) == \
         dtypes.result_type(b, a, return_weak_type_flag=True)


@settings(max_examples=500, deadline=None)
@given(node_st, node_st, node_st)
def test_associative(a, b, c):
  left = _key(_rt(_rt(a, b), c))
  right = _key(_rt(a, _rt(b, c)))
  assert left == right == _key(_rt(a, b, c))


@settings(max_examples=200, deadline=None)
@given(node_st, node_st)
def test_join_is_upper_bound(a, b):
  ab = _rt(a, b)
  assert _key(_rt(ab, a)) == _key(ab) == _key(_rt(b, ab))


def test_promotion_errors_match_jax():
  import re
  import nbjax.numpy as jnp
  with pytest.raises(dtypes.TypePromotionError, match=re.escape(
      "Input dtypes ('float8_e4m3fn', 'float32') have no available implicit dtype promotion "
      "path. To avoid unintended promotion, 8-bit floats do not support implicit promotion.")):
    jnp.promote_types("float8_e4m3fn", "float32")
  with pytest.raises(dtypes.TypePromotionError, match=re.escape(
      "Input dtypes ('int4', 'int8') have no available implicit dtype promotion path. To avoid "
      "unintended promotion, 1-bit, 2-bit and 4-bit integers do not support implicit")):
    jnp.promote_types("int4", "int8")
  with pytest.raises(dtypes.TypePromotionError, match="4-bit floats do not support"):
    jnp.promote_types("float4_e2m1fn", "float32")
  # an invalid dtype: a plain ValueError naming it by repr
  with pytest.raises(ValueError, match=re.escape("dtype=dtype('O') is not a valid dtype for JAX "
                                                 "type promotion.")) as e:
    jnp.promote_types(object, "float32")
  assert type(e.value) is ValueError
  with pytest.raises(TypeError, match=re.escape("Value '['a']' with dtype <U1 is not a valid JAX "
                                                "array type.")):
    jnp.result_type(np.array(["a"]))
  # JAX's lattice quirk: a narrow float joined with a plain int stays the narrow float
  assert jnp.promote_types("float4_e2m1fn", "int8") == np.dtype(dtypes.float4_e2m1fn)


def test_full_like_keeps_an_x64_arrays_dtype_with_x64_off():
  """lax.full_like (and jnp.zeros_like...) of an nbjax float64 array stays float64 with x64
  off; explicit dtypes and NumPy inputs are canonicalized (JAX 0.10.2); so grad of grad of a
  function that enables x64 inside works (x64_context_test.test_custom_jvp)."""
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import lax
  with nbjax.enable_x64(True):
    x = jnp.ones(3, jnp.float64)
  with nbjax.enable_x64(False), pytest.warns(UserWarning, match="float64 requested in dtype "):
    assert [str(a.dtype) for a in (  # (JAX's lax.full_like names dtypes.dtype)
        lax.full_like(x, 1), lax.full_like(x, 1, shape=()), lax.full_like(x, 1, dtype=np.float64),
        lax.full_like(np.ones(3), 1), lax.full_like(1.0, 2), lax.full_like(np.int64(1), 2),
        jnp.zeros_like(x), jnp.ones_like(x), jnp.full_like(x, 2))] == [
        "float64", "float64", "float32", "float32", "float32", "int32", "float64", "float64",
        "float64"]

  @nbjax.custom_jvp
  def f(x):
    return x ** 2.

  @f.defjvp
  def f_jvp(xs, ts):
    return f(xs[0]), ts[0] * jnp.sin(xs[0])

  def g(x):
    with nbjax.enable_x64():
      return f(jnp.array(x, jnp.float64))
  with nbjax.enable_x64(False):
    assert g(5.).dtype == np.float64
    assert [nbjax.grad(g)(5.).dtype, nbjax.grad(nbjax.grad(g))(5.).dtype,
            nbjax.grad(nbjax.grad(nbjax.grad(g)))(5.).dtype] == [np.float32] * 3


def test_explicit_x64_dtype_with_x64_off_warns_or_raises(x64_off):
  """An explicitly requested 64-bit dtype with x64 off is truncated with JAX's warning,
  naming the function; jax_explicit_x64_dtypes='error' raises JAX's ValueError, 'allow'
  keeps the dtype, unwarned; Python types (dtype=float) ask for the default (api_test
  test_dtype_warning)."""
  import warnings
  import nbjax.numpy as jnp
  cases = [(lambda: jnp.array([1, 2], dtype="float64"), "array", "float32"),
           (lambda: jnp.ones(3, dtype=np.float64), "ones", "float32"),
           (lambda: jnp.zeros(3, dtype=jnp.int64), "zeros", "int32"),
           (lambda: jnp.ones_like(3, dtype=np.int64), "ones_like", "int32"),
           (lambda: jnp.full((2,), 1, dtype="int64"), "full", "int32"),
           (lambda: jnp.asarray(1, dtype="float64"), "asarray", "float32"),
           (lambda: jnp.arange(3, dtype="float64"), "arange", "float32"),
           (lambda: jnp.empty(2, dtype="complex128"), "empty", "complex64"),
           (lambda: jnp.ones(3, "float32").astype("float64"), "astype", "float32")]
  for make, name, want in cases:
    with pytest.warns(UserWarning) as rec:
      assert str(make().dtype) == want
    assert [str(w.message) for w in rec] == [
        f"Explicitly requested dtype {np.dtype(want.replace('32', '64').replace('complex64', 'complex128'))} "
        f"requested in {name} is not available, and will be truncated to dtype {want}. To "
        "enable more dtypes, set the jax_enable_x64 configuration option or the JAX_ENABLE_X64 "
        "shell environment variable. See https://github.com/jax-ml/jax#current-gotchas for more."]
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert jnp.array([1, 2], dtype=float).dtype == np.float32
    assert jnp.ones(2, dtype=np.float32).dtype == np.float32
  for mode in ("error", "allow"):
    config.update("jax_explicit_x64_dtypes", mode)
    try:
      if mode == "error":
        with pytest.raises(ValueError, match=r"^Explicitly requested dtype int64 requested in "
                           r"zeros is not available\. To enable more dtypes, set the "
                           r"jax_enable_x64 or allow_explicit_x64_dtypes configuration "
                           r"options\.See https://github\.com/jax-ml/jax#current-gotchas "
                           r"for more\.$"):
          jnp.zeros(3, "int64")
      else:
        with warnings.catch_warnings():
          warnings.simplefilter("error")
          assert jnp.array([1, 2], dtype="int64").dtype == np.int64
          assert jnp.ones(3, "float32").astype("float64").dtype == np.float64
    finally:
      config.update("jax_explicit_x64_dtypes", "warn")


def test_explicit_x64_mode_enum_compares_with_the_option():
  """JAX's ``config.ExplicitX64Mode``: the option's value equals its members (JAX's own
  api_test/dtypes_test compare ``config.explicit_x64_dtypes.value == ExplicitX64Mode.X``)."""
  from nbjax.config import ExplicitX64Mode
  assert [m.name for m in ExplicitX64Mode] == ["WARN", "ERROR", "ALLOW"]
  assert config.read("jax_explicit_x64_dtypes") == ExplicitX64Mode.WARN
  config.update("jax_explicit_x64_dtypes", ExplicitX64Mode.ALLOW)
  try:
    assert config.read("jax_explicit_x64_dtypes") == ExplicitX64Mode.ALLOW != ExplicitX64Mode.WARN
  finally:
    config.update("jax_explicit_x64_dtypes", "warn")


def test_canonicalize_dtype_of_an_extended_dtype():
  """``allow_extended_dtype`` (JAX's keyword): a key dtype comes back as it is, else JAX's
  ValueError; ordinary dtypes canonicalize either way."""
  import nbjax
  kd = nbjax.random.key(0).dtype
  assert dtypes.canonicalize_dtype(kd, allow_extended_dtype=True) is kd
  with pytest.raises(ValueError, match=r"^Internal: canonicalize_dtype called on extended "
                     r"dtype key<fry> with allow_extended_dtype=False$"):
    dtypes.canonicalize_dtype(kd)
  assert dtypes.canonicalize_dtype("int16", allow_extended_dtype=True) == np.int16


def _allow_cases():
  import nbjax.numpy as jnp
  from nbjax import lax
  F, I = np.float64, np.int64
  return {
      "zeros": lambda: jnp.zeros(3, F), "ones": lambda: jnp.ones(2, "int64"),
      "empty": lambda: jnp.empty(2, F), "full": lambda: jnp.full(2, 1 / 3, F),
      "full_array": lambda: jnp.full(2, jnp.float32(0.5), F),
      "arange_f": lambda: jnp.arange(0, 2, 0.5, dtype=F),
      "arange_i": lambda: jnp.arange(1, 7, 2, dtype=I),
      "linspace": lambda: jnp.linspace(0, 1, 4, dtype=F),
      "logspace": lambda: jnp.logspace(0, 2, 3, dtype=F),
      "eye": lambda: jnp.eye(2, 3, k=1, dtype=I), "identity": lambda: jnp.identity(2, dtype=F),
      "tri": lambda: jnp.tri(2, dtype=I), "indices": lambda: jnp.indices((2,), dtype=I),
      "zeros_like": lambda: jnp.zeros_like(jnp.ones(2), F),
      "ones_like": lambda: jnp.ones_like(jnp.ones(2), I),
      "full_like": lambda: jnp.full_like(jnp.ones(2), 1 / 3, F),
      "empty_like": lambda: jnp.empty_like(jnp.ones(2), F),
      "astype": lambda: jnp.full(2, 1 / 3, np.float32).astype(F),
      "jnp.astype": lambda: jnp.astype(jnp.ones(2, np.int32) * 3, I),
      "array": lambda: jnp.array([1 / 3], F), "array_int": lambda: jnp.asarray(2 ** 40, I),
      "asarray_ndarray": lambda: jnp.asarray(np.array([1 / 3]), F),
      "array_ndarray": lambda: jnp.array(np.array([1 / 3]), F),
      "array_no_dtype": lambda: jnp.array(np.array([1 / 3])), "float64": lambda: jnp.float64(1 / 3),
      "lax.full": lambda: lax.full((2,), 1 / 3, F), "lax.iota": lambda: lax.iota(I, 3),
      "lax.convert_element_type": lambda: lax.convert_element_type(2 ** 40 + 1, I),
      "lax.full_like": lambda: lax.full_like(jnp.ones(2), 2, F),
      "sum": lambda: jnp.sum(jnp.ones(2), dtype=F),
  }


def test_explicit_x64_allow_keeps_requested_64bit_dtypes(x64_off):
  """x64 off, jax_explicit_x64_dtypes='allow': an explicitly requested 64-bit dtype is kept by
  the creation functions, astype/asarray/array and lax.full/iota/convert_element_type (no
  second canonicalization), eagerly and under jit; host data given to array/asarray with a
  copy passes through its canonical dtype first, as JAX 0.10.2's values show."""
  import warnings
  import nbjax
  want = {
      'zeros': ('float64', [0.0, 0.0, 0.0]),
      'ones': ('int64', [1, 1]),
      'empty': ('float64', [0.0, 0.0]),
      'full': ('float64', [0.3333333333333333, 0.3333333333333333]),
      'full_array': ('float64', [0.5, 0.5]),
      'arange_f': ('float64', [0.0, 0.5, 1.0, 1.5]),
      'arange_i': ('int64', [1, 3, 5]),
      'linspace': ('float64', [0.0, 0.3333333333333333, 0.6666666666666666, 1.0]),
      'logspace': ('float64', [1.0, 10.0, 100.0]),
      'eye': ('int64', [[0, 1, 0], [0, 0, 1]]),
      'identity': ('float64', [[1.0, 0.0], [0.0, 1.0]]),
      'tri': ('int64', [[1, 0], [1, 1]]),
      'indices': ('int64', [[0, 1]]),
      'zeros_like': ('float64', [0.0, 0.0]),
      'ones_like': ('int64', [1, 1]),
      'full_like': ('float64', [0.3333333333333333, 0.3333333333333333]),
      'empty_like': ('float64', [0.0, 0.0]),
      'astype': ('float64', [0.3333333432674408, 0.3333333432674408]),
      'jnp.astype': ('int64', [3, 3]),
      'array': ('float64', [0.3333333432674408]),
      'array_int': ('int64', 0),
      'asarray_ndarray': ('float64', [0.3333333333333333]),
      'array_ndarray': ('float64', [0.3333333432674408]),
      'array_no_dtype': ('float32', [0.3333333432674408]),
      'float64': ('float64', 0.3333333432674408),
      'lax.full': ('float64', [0.3333333333333333, 0.3333333333333333]),
      'lax.iota': ('int64', [0, 1, 2]),
      'lax.convert_element_type': ('int64', 1099511627777),
      'lax.full_like': ('float64', [2.0, 2.0]),
      'sum': ('float64', 2.0),
  }
  config.update("jax_explicit_x64_dtypes", "allow")
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("error")
      for name, make in _allow_cases().items():
        for got in (make(), nbjax.jit(make)()):
          assert (str(got.dtype), np.asarray(got).tolist()) == want[name], name
  finally:
    config.update("jax_explicit_x64_dtypes", "warn")


def test_explicit_x64_allow_keeps_64bit_random_bits(x64_off):
  """x64 off, jax_explicit_x64_dtypes='allow': random.bits(key, shape, uint64) is uint64 for
  every PRNG implementation, eagerly and under jit, with JAX 0.10.2's values."""
  import nbjax
  want = {"threefry2x32": 3182764935064573181, "rbg": 2436515601188908477,
          "unsafe_rbg": 2436515601188908477, "threefry4x32": 1104724020968469534,
          "philox2x32": 1259436859689704863, "philox4x32": 836746587793907350}
  config.update("jax_explicit_x64_dtypes", "allow")
  try:
    for impl, first in want.items():
      k = nbjax.random.key(1701, impl=impl)
      for got in (nbjax.random.bits(k, (3,), np.uint64),
                  nbjax.jit(lambda k: nbjax.random.bits(k, (3,), np.uint64))(k)):
        assert got.dtype == np.uint64 and int(np.asarray(got)[0]) == first, impl
  finally:
    config.update("jax_explicit_x64_dtypes", "warn")


def test_explicit_x64_warning_and_error_name_the_function(x64_off):
  """x64 off, jax_explicit_x64_dtypes='warn'/'error': the warning (the first one) and the
  ValueError name the function JAX 0.10.2 names (its fun_name, quirks included: empty_like
  says ones_like, nansum nanprod, concatenate asarray, inner tensordot)."""
  import warnings
  import nbjax.numpy as jnp
  import nbjax.scipy.linalg as jsl
  from nbjax import lax
  F, I = np.float64, np.int64
  v, x = jnp.ones(2), jnp.ones((2, 2))
  cases = {
      "eye": lambda: jnp.eye(2, dtype=F), "identity": lambda: jnp.identity(2, dtype=I),
      "empty_like": lambda: jnp.empty_like(v, F), "tri": lambda: jnp.tri(2, dtype=F),
      "indices": lambda: jnp.indices((2,), dtype=I),
      "linspace": lambda: jnp.linspace(0, 1, 3, dtype=F),
      "zeros_like": lambda: jnp.zeros_like(v, F), "full_like": lambda: jnp.full_like(v, 3, F),
      "lax.full": lambda: lax.full((2,), 1, F), "lax.iota": lambda: lax.iota(I, 3),
      "lax.convert_element_type": lambda: lax.convert_element_type(v, F),
      "lax.dot": lambda: lax.dot(x, x, preferred_element_type=F),
      "lax.argmax": lambda: lax.argmax(v, 0, I),
      "sum": lambda: jnp.sum(v, dtype=F),
      "mean": lambda: jnp.mean(v, dtype=F),
      "nanmean": lambda: jnp.nanmean(v, dtype=F),
      "var": lambda: jnp.var(v, dtype=F),
      "std": lambda: jnp.std(v, dtype=F),
      "nanvar": lambda: jnp.nanvar(v, dtype=F),
      "nanstd": lambda: jnp.nanstd(v, dtype=F), "nansum": lambda: jnp.nansum(v, dtype=F),
      "cumsum": lambda: jnp.cumsum(v, dtype=F), "nancumprod": lambda: jnp.nancumprod(v, dtype=F),
      "cumulative_sum": lambda: jnp.cumulative_sum(v, dtype=F),
      "trace": lambda: jnp.trace(x, dtype=F),
      "ravel_multi_index": lambda: jnp.ravel_multi_index((jnp.ones(3, jnp.int32),), (4,), dtype=I),
      "concatenate": lambda: jnp.concatenate([v, v], dtype=F),
      "matmul": lambda: jnp.matmul(x, x, preferred_element_type=F),
      "tensordot": lambda: jnp.tensordot(x, x, 1, preferred_element_type=F),
      "einsum": lambda: jnp.einsum("ij,jk", x, x, preferred_element_type=F),
      "inner": lambda: jnp.inner(x, x, preferred_element_type=F),
      "cov": lambda: jnp.cov(x, dtype=F),
      "add.accumulate": lambda: jnp.add.accumulate(v, dtype=F),
      "minimum.reduce": lambda: jnp.minimum.reduce(v, dtype=F),
      "logaddexp2.reduce": lambda: jnp.logaddexp2.reduce(v, dtype=F),
      "dft": lambda: jsl.dft(2, dtype=np.complex128),
  }
  want = {
      'eye': 'float64 requested in eye',
      'identity': 'int64 requested in identity',
      'empty_like': 'float64 requested in ones_like',
      'tri': 'float64 requested in tri',
      'indices': 'int64 requested in indices',
      'linspace': 'float64 requested in linspace',
      'zeros_like': 'float64 requested in zeros_like',
      'full_like': 'float64 requested in full_like',
      'lax.full': 'float64 requested in full',
      'lax.iota': 'int64 requested in broadcasted_iota',
      'lax.convert_element_type': 'float64 requested in convert_element_type',
      'lax.dot': 'float64 requested in dot',
      'lax.argmax': 'int64 requested in argmax',
      'sum': 'float64 requested in sum',
      'mean': 'float64 requested in mean',
      'nanmean': 'float64 requested in mean',
      'var': 'float64 requested in var',
      'std': 'float64 requested in std',
      'nanvar': 'float64 requested in nanvar',
      'nanstd': 'float64 requested in nanstd',
      'nansum': 'float64 requested in nanprod',
      'cumsum': 'float64 requested in cumsum',
      'nancumprod': 'float64 requested in nancumprod',
      'cumulative_sum': 'float64',
      'trace': 'float64 requested in trace',
      'ravel_multi_index': 'int64 requested in ravel_multi_index',
      'concatenate': 'float64 requested in asarray',
      'matmul': 'float64 requested in matmul',
      'tensordot': 'float64 requested in tensordot',
      'einsum': 'float64 requested in einsum',
      'inner': 'float64 requested in tensordot',
      'cov': 'float64 requested in astype',
      'add.accumulate': 'float64 requested in cumsum',
      'minimum.reduce': 'float64 requested in min',
      'logaddexp2.reduce': 'float64 requested in jnp.logaddexp2.reduce',
      'dft': 'complex128 requested in dft',
  }
  for name, make in cases.items():
    with warnings.catch_warnings(record=True) as rec:
      warnings.simplefilter("always")
      make()
    assert str(rec[0].message).startswith(f"Explicitly requested dtype {want[name]} is not "
                                          "available, and will be truncated to dtype "), name
  config.update("jax_explicit_x64_dtypes", "error")
  try:
    for name, make in cases.items():
      with pytest.raises(ValueError) as e:
        make()
      assert str(e.value) == (f"Explicitly requested dtype {want[name]} is not available. To "
                              "enable more dtypes, set the jax_enable_x64 or "
                              "allow_explicit_x64_dtypes configuration options.See "
                              "https://github.com/jax-ml/jax#current-gotchas for more."), name
  finally:
    config.update("jax_explicit_x64_dtypes", "warn")


def test_grad_and_vjp_of_python_scalars_take_the_callers_x64_mode(x64_off):
  """grad/value_and_grad/vjp of a Python float with x64 off: the argument is a weak float32
  from the start, so an enable_x64(True) inside the function cannot widen it; the gradient
  is float32, as JAX 0.10.2's (x64_context_test test_grad)."""
  import nbjax
  import nbjax.numpy as jnp

  def fun(x):
    with nbjax.enable_x64(True):
      return jnp.sin(x)

  for _ in range(3):  # (the tape's repeated-structure paths)
    g, (v, g2) = nbjax.grad(fun)(0.5), nbjax.value_and_grad(fun)(0.5)
    assert [(str(a.dtype), a.weak_type) for a in (g, v, g2)] == [("float32", True)] * 3
    assert float(g) == float(np.cos(np.float32(0.5)))
  out, pull = nbjax.vjp(fun, 0.5)
  assert (str(out.dtype), str(pull(jnp.float32(1.))[0].dtype)) == ("float32", "float32")


def _edtype(suffix, phys="int32", name="dt"):
  """A user's extended dtype over ``phys`` elements of shape ``suffix`` (dtypes_test's)."""
  import dataclasses
  import types
  from nbjax import dtypes

  class scalar(dtypes.extended):
    pass

  @dataclasses.dataclass(frozen=True)
  class DType(dtypes.ExtendedDType):
    type = scalar
    _rules = types.SimpleNamespace(
        physical_element_aval=lambda _: types.SimpleNamespace(shape=suffix, dtype=phys),
        allow_conversion=True)
  DType.name = name
  return DType()


@pytest.mark.parametrize("prefix,suffix", [((), ()), ((2,), (3, 4)), ((3, 4), (2,))])
def test_extended_dtype_conversion_as_jax(prefix, suffix):
  """convert_element_type to a user's extended dtype wraps an array of its representation
  dtype (the element shape trailing) and back unwraps it, eager and under jit and vmap
  (JAX 0.10.2's dtypes_test ExtendedDTypeTest.test_edtype_conversion, EArrayTest)."""
  import nbjax
  import nbjax.numpy as jnp
  from nbjax import lax, dtypes
  dt = _edtype(suffix)
  data = jnp.arange(math.prod(prefix + suffix), dtype="int32").reshape(prefix + suffix)
  seen = []

  def f(x):
    y = lax.convert_element_type(x, dt)
    seen.append((y.shape, y.dtype, isinstance(y, nbjax.Array)))
    return y

  for fn in (f, nbjax.jit(f)):
    y = fn(data)
    assert seen.pop() == (prefix, dt, True) and (y.shape, y.dtype) == (prefix, dt)
    assert dtypes.issubdtype(y.dtype, dtypes.extended)
    z = nbjax.jit(lambda e: e)(y)  # passes through jit as itself
    assert (z.shape, z.dtype) == (prefix, dt)
    back = lax.convert_element_type(z, "int32")
    assert back.shape == prefix + suffix and back.dtype == np.int32
    np.testing.assert_array_equal(back, data)
  if prefix:
    w = nbjax.vmap(lambda e: lax.convert_element_type(e, "int32"))(y)
    np.testing.assert_array_equal(w, data)


def test_extended_dtype_conversion_errors_as_jax():
  """JAX's ValueErrors (dtypes_test test_edtype_conversion_errors)."""
  import nbjax.numpy as jnp
  from nbjax import lax
  dt, dt2 = _edtype((3,)), _edtype((3,), name="dt2")
  x = jnp.zeros((5, 3), "int32")
  y = lax.convert_element_type(x, dt)
  with pytest.raises(ValueError, match="cannot directly convert between extended dtypes: "
                     "from dt to dt2. Instead, convert to and from their representation "
                     "dtypes, e.g.:\ndt -> int32 -> int32 -> dt2"):
    lax.convert_element_type(y, dt2)
  with pytest.raises(ValueError, match="can only convert to extended dtype from its "
                     "representation dtype, but tried to convert from float32 to dt which "
                     "doesn't match the representation type int32."):
    lax.convert_element_type(x.astype("float32"), dt)
  with pytest.raises(ValueError, match=re.escape(
      "the extended dtype dt has a representation shape (3,) while the given representation "
      "array has shape (5, 2), so the shape suffix does not match: given (2,) but required "
      "(3,).")):
    lax.convert_element_type(x[:, :2], dt)
  with pytest.raises(ValueError, match=re.escape("has a representation shape (3,) (rank 1) "
                     "while the given representation array has shape () (rank 0 < 1).")):
    lax.convert_element_type(x[0, 0], dt)
  with pytest.raises(ValueError, match="can only convert from extended dtype to its "
                     "representation dtype, but tried to convert from dt to float32"):
    lax.convert_element_type(y, "float32")
  assert lax.convert_element_type(y, dt) is y


def test_private_dtype_and_weaktype_and_jax_type(x64_off):
  """JAX's private helpers dtypes_test uses: ``_dtype_and_weaktype`` (Python scalar types are
  weak) and ``_jax_type`` (a weak dtype's lattice type is the Python type of its kind)."""
  assert dtypes._dtype_and_weaktype(1.0) == (np.float32, True)
  assert dtypes._dtype_and_weaktype(int) == (np.int32, True)
  assert dtypes._dtype_and_weaktype(np.float32(1)) == (np.float32, False)
  assert dtypes._dtype_and_weaktype(np.array(1, np.int64)) == (np.int32, False)  # (canonical)
  assert [dtypes._jax_type(np.dtype(d), True) for d in ("float32", "bool", "uint8", "complex64")
          ] == [float, np.bool_, int, complex]
  assert dtypes._jax_type(np.dtype(dtypes.bfloat16), True) is float
  assert dtypes._jax_type(np.dtype("int8"), False) == np.int8


def test_isdtype_kinds_dtype_names_and_errors():
  # JAX's jnp.isdtype (dtypes.isdtype): a string naming a dtype is that dtype; bad kinds raise
  # JAX's errors
  import ml_dtypes
  assert dtypes.isdtype(np.float32, "float32") and dtypes.isdtype(np.float32, ("bool", "float32"))
  assert not dtypes.isdtype(np.int32, "float32")
  assert dtypes.isdtype(ml_dtypes.int4, "signed integer")
  assert dtypes.isdtype(ml_dtypes.uint2, "unsigned integer")
  assert dtypes.isdtype(ml_dtypes.float8_e4m3fn, "real floating")
  assert not dtypes.isdtype(np.bool_, "numeric") and not dtypes.isdtype(np.dtype("U3"), "numeric")
  with pytest.raises(ValueError, match=r"Unrecognized kind='foo' expected one of \['bool', "):
    dtypes.isdtype(np.float32, "foo")
  with pytest.raises(TypeError, match="Expected kind to be a dtype, string, or tuple; got kind=3"):
    dtypes.isdtype(np.float32, 3)


def test_safe_to_cast():
  # JAX's dtypes.safe_to_cast: the input promoted with the (strong) output is the output
  assert dtypes.safe_to_cast(np.int16, np.float32) and not dtypes.safe_to_cast(np.float32, np.int16)
  assert dtypes.safe_to_cast(np.float32, np.complex64)
  assert not dtypes.safe_to_cast(np.complex64, np.float32)
  assert dtypes.safe_to_cast(int, np.int8) and dtypes.safe_to_cast(float, np.float16)
  assert not dtypes.safe_to_cast(np.uint64, np.int64)


def test_jax_type_of_weak_narrow_types():
  # JAX's private dtypes._jax_type: a weak dtype's lattice node is its kind's Python type,
  # the ml_dtypes narrow integers and floats included (NumPy's kind 'V' for them)
  import ml_dtypes
  for d, t in [(ml_dtypes.int4, int), (ml_dtypes.uint2, int), (ml_dtypes.bfloat16, float),
               (ml_dtypes.float8_e5m2, float), (np.uint8, int), (np.complex64, complex)]:
    assert dtypes._jax_type(np.dtype(d), True) is t
  assert dtypes._jax_type(np.dtype(bool), True) == np.dtype(bool)
  assert dtypes._jax_type(np.dtype(ml_dtypes.int4), False) == np.dtype(ml_dtypes.int4)
