"""Regression cases from a differential run of ``nbjax.numpy`` against ``jax.numpy`` 0.10.2
(x64): the expected dtypes, weak types, values and errors are JAX's, hard-coded."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp


def _check(x, dtype, weak, value=None):
  assert x.dtype == np.dtype(dtype)
  assert nbjax.typeof(x).weak_type is weak
  if value is not None:
    np.testing.assert_allclose(np.asarray(x), value, rtol=1e-6)


I32 = np.array([1, -2, 0], np.int32)


@pytest.mark.parametrize("jit", [False, True])
def test_weak_type_of_mixed_weak_strong_results(jit):
  wrap = nbjax.jit if jit else (lambda f: f)
  a = jnp.asarray(I32)
  _check(wrap(lambda a: jnp.hypot(a, 2.5))(a), "float64", False)
  _check(wrap(lambda a: jnp.heaviside(a, 2.5))(a), "float64", False, [1., 0., 2.5])
  _check(wrap(lambda a: jnp.logaddexp2(a, 2.5))(a), "float64", False)
  _check(wrap(lambda a: jnp.power(2.5, a))(a), "float64", False, [2.5, 0.16, 1.])


def test_weak_type_both_weak_stays_weak():
  _check(jnp.hypot(2, 3.0), "float64", True, np.hypot(2, 3))
  _check(jnp.heaviside(2, 2.5), "float64", True, 1.)
  _check(jnp.logaddexp2(2, 2.5), "float64", True, np.logaddexp2(2, 2.5))
  _check(jnp.power(2.5, 3), "float64", True, 15.625)


def test_unary_weak_types():
  _check(jnp.spacing(2.5), "float64", False, np.spacing(2.5))
  _check(jnp.nan_to_num(2.5), "float64", False, 2.5)
  _check(jnp.nan_to_num(2), "int64", True, 2)
  _check(jnp.i0(2), "float64", True, np.i0(2.))
  _check(jnp.i0(2.5), "float64", True, np.i0(2.5))
  _check(jnp.i0(jnp.float32(2.5)), "float32", False)


@pytest.mark.parametrize("jit", [False, True])
def test_weak_types_of_rint_signbit_iscomplex_sign_dot(jit):
  wrap = nbjax.jit if jit else (lambda f: f)
  w, wi = jnp.asarray(2.0) * 1.0, jnp.asarray(2) * 1  # weak float64 / int64
  _check(wrap(jnp.rint)(3), "float64", False, 3.)  # (an int's: convert_element_type, strong)
  _check(wrap(jnp.rint)(wi), "float64", False, 2.)
  _check(wrap(jnp.signbit)(3), "bool", False, False)  # (lt against a strong 0)
  _check(wrap(jnp.signbit)(wi), "bool", False, False)
  _check(wrap(jnp.iscomplex)(True), "bool", False, False)  # weak iff imag(x) is
  _check(wrap(jnp.iscomplex)(w), "bool", True, False)
  _check(wrap(jnp.iscomplex)(1j), "bool", True, True)
  _check(wrap(jnp.isreal)(True), "bool", False, True)
  _check(wrap(jnp.isreal)(3), "bool", True, True)
  _check(wrap(jnp.isreal)(1j), "bool", True, False)
  _check(wrap(jnp.sign)(1 + 2j), "complex128", True, (1 + 2j) / abs(1 + 2j))
  _check(wrap(jnp.sign)(jnp.complex64(1j)), "complex64", False, 1j)
  _check(wrap(jnp.dot)(2, 3), "int64", True, 6)  # scalar products of weak operands: weak
  _check(wrap(jnp.dot)(2, 3.0), "float64", True, 6.)
  _check(wrap(lambda a, b: jnp.tensordot(a, b, 0))(w, w), "float64", True, 4.)
  _check(wrap(jnp.dot)(w, jnp.ones(2)), "float64", False, [2., 2.])
  _check(wrap(lambda a, b: jnp.dot(a, b, preferred_element_type=float))(w, w), "float64",
         False, 4.)


@pytest.mark.parametrize("jit", [False, True])
def test_complex_sign_is_laxs_away_from_zero(jit):
  # JAX 0.10.2's jnp.sign of a complex is lax.sign (x / |x| with real divisions): the zero
  # imaginary part keeps its sign, an infinite part gives nan and a signed zero
  f = nbjax.jit(jnp.sign) if jit else jnp.sign
  inf = np.inf
  z = np.array([-1.5 - 0j, complex(-1.5, -0.0), complex(-inf, -1.5), complex(2, inf), 3 + 4j,
                complex(np.nan, 0)], np.complex64)
  got = np.asarray(f(z))
  want = [(-1, 0.0), (-1, -0.0), (np.nan, -0.0), (0.0, np.nan), (0.6, 0.8), (np.nan, np.nan)]
  np.testing.assert_allclose(got.real, [w[0] for w in want], rtol=1e-6)
  np.testing.assert_allclose(got.imag, [w[1] for w in want], rtol=1e-6)
  assert np.signbit(got.imag[[0, 1, 2, 4]]).tolist() == [False, True, True, False]
  assert np.asarray(f(np.complex64(0j))) == 0  # (zeros: +0, as for the reals)


def test_angle_of_0d_reals_is_default_float():
  _check(jnp.angle(2.5), "float64", False, 0.)
  _check(jnp.angle(jnp.asarray(np.float32(-2.5))), "float64", False, np.pi)
  _check(jnp.angle(jnp.ones(2, "float32")), "float32", False, [0., 0.])
  _check(jnp.angle(2 + 1j), "float64", True, np.angle(2 + 1j))
  _check(jnp.angle(2), "float64", False, 0.)


def test_complex_input_errors():
  msg = "jnp.hypot is not well defined for complex-valued inputs"
  with pytest.raises(ValueError, match=msg):
    jnp.hypot(1j, 2)
  with pytest.raises(ValueError, match=msg):
    jnp.hypot(jnp.ones(2, "complex64"), jnp.ones(2, "complex64"))
  for f in (jnp.isposinf, jnp.isneginf):
    with pytest.raises(ValueError, match="isposinf/isneginf are not well defined for complex"):
      f(jnp.ones(2, "complex64"))


def test_reshape_errors():
  x = jnp.ones((2, 3))
  with pytest.raises(TypeError, match=r"can only specify one unknown axis size with a `-1` "
                                      r"value, got \(-1, -1\)"):
    jnp.reshape(x, (-1, -1))
  with pytest.raises(TypeError, match=r"cannot reshape array of shape \(2, 3\) \(size 6\) "
                                      r"into shape \(4, 2\) \(size 8\)"):
    jnp.reshape(x, (4, 2))
  with pytest.raises(TypeError, match=r"into shape 7 \(size 7\)"):
    jnp.reshape(x, 7)
  with pytest.raises(TypeError, match=r"into shape \(4, -1\) because the product of specified "
                                      r"axis sizes \(4\) does not evenly divide 6"):
    jnp.reshape(x, (4, -1))
  with pytest.raises(NotImplementedError, match="np.reshape order=A is not implemented."):
    jnp.reshape(x, 6, order="A")
  with pytest.raises(NotImplementedError, match="Ravel not implemented for order='K'."):
    jnp.ravel(x, order="K")
  assert jnp.reshape(x, (3, 2), order="F").shape == (3, 2)


def test_concatenate_stack_errors():
  with pytest.raises(TypeError, match=r"Cannot concatenate arrays with different numbers of "
                                      r"dimensions: got \(2, 3\), \(3,\)\."):
    jnp.concatenate([jnp.ones((2, 3)), jnp.ones(3)])
  with pytest.raises(TypeError, match=r"got \(3,\), \(\)\."):
    jnp.concatenate([jnp.ones(3), 2.0])
  with pytest.raises(ValueError, match="Zero-dimensional arrays cannot be concatenated."):
    jnp.concatenate([2.0, jnp.ones(3)])
  with pytest.raises(ValueError, match=r"Cannot stack arrays with different numbers of "
                                       r"dimensions: got \(2, 3\), \(3,\)\."):
    jnp.stack([jnp.ones((2, 3)), jnp.ones(3)])
  with pytest.raises(ValueError, match=r"All input arrays must have the same shape\. "
                                       r"Got \(2, 3\), \(3, 2\)\."):
    jnp.stack([jnp.ones((2, 3)), jnp.ones((3, 2))])


def test_rot90_needs_2d():
  with pytest.raises(ValueError, match=r"rot90 requires its first argument to have ndim at "
                                       r"least two, but got first argument of shape \(3,\), "
                                       r"which has ndim 1"):
    jnp.rot90(jnp.ones(3))


def test_clip_has_no_legacy_keywords():
  with pytest.raises(TypeError, match="unexpected keyword argument 'a_min'"):
    jnp.clip(jnp.ones(3), a_min=0)
  np.testing.assert_array_equal(jnp.clip(jnp.arange(4), 1, 2), [1, 1, 2, 2])


def test_compress_size_uses_condition_length():
  with pytest.raises(ValueError, match=r"got size=2 for a.shape\[axis\]=1"):
    jnp.compress(jnp.array([True]), jnp.ones((2, 3)), axis=0, size=2)
  out = jnp.compress(jnp.array([True, False]), jnp.arange(6.).reshape(3, 2), axis=0, size=1)
  np.testing.assert_array_equal(out, [[0., 1.]])


def test_array_and_copy_input_errors():
  with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
    jnp.array([1, None])
  with pytest.raises(OverflowError, match="Python int too large to convert to C long"):
    jnp.array([1, 2 ** 63])
  with pytest.raises(TypeError, match=r"copy requires ndarray or scalar arguments, got "
                                      r"<class 'list'> at position 0\."):
    jnp.copy([1, 2])
  _check(jnp.copy(2.5), "float64", True, 2.5)


@pytest.mark.parametrize("jit", [False, True])
def test_var_std_without_degrees_of_freedom_is_nan(jit):
  wrap = nbjax.jit if jit else (lambda f: f)
  x = np.array([[1, -2, 3], [0, 5, -4]], np.int32)
  f = x.astype(np.float32)
  _check(wrap(lambda x: jnp.std(x, axis=0, ddof=2))(x), "float32", False, [np.nan] * 3)
  _check(wrap(lambda f: jnp.var(f, ddof=6))(f), "float32", False, np.nan)
  _check(wrap(lambda f: jnp.var(f, ddof=5))(f), "float32", False, 53.5)
  _check(wrap(lambda f, m: jnp.var(f, axis=1, where=m, ddof=1))(f, x > 0), "float32", False,
         [2., np.nan])
  _check(wrap(lambda f: jnp.nanvar(f, ddof=6))(f), "float32", False, np.nan)


def test_std_dtype_must_be_inexact():
  with pytest.raises(ValueError, match="dtype argument to jnp.std must be inexact; got int32"):
    jnp.std(jnp.ones(3), dtype="int32")
  _check(jnp.std(jnp.ones(3, "int32"), dtype="float32"), "float32", False, 0.)


def test_size_with_axis_tuple_and_isscalar_of_0d_numpy():
  x = jnp.ones((2, 3, 4))
  assert jnp.size(x, (0, 2)) == 8 and jnp.size(x, -1) == 4 and jnp.size(x) == 24
  assert jnp.size([[1, 2]], (0, 1)) == 2
  assert jnp.isscalar(np.array(1.)) is True
  assert jnp.isscalar(np.ones(2)) is False and jnp.isscalar([1]) is False
