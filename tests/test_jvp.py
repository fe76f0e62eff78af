"""Forward mode: jvp and jacfwd on pytrees, seed 003's printed numbers, symbolic zeros,
float0 tangents, Python control flow, nesting (perturbation confusion), errors."""
import numpy as np
import pytest

import nbjax
from nbjax import core, dtypes, lax
from nbjax.interpreters import ad
from nbjax.testing import check_jvp

jvp = nbjax.jvp


def deriv(f):
  return lambda x: jvp(f, (x,), (1.0,))[1]


def f_seed(x):  # seed 003: y = sin(x) * 2.; z = -y + x
  y = lax.mul(lax.sin(x), 2.0)
  return lax.add(lax.neg(y), x)


# ------------------------------------------------------------------ seed 003's numbers


def test_seed003_jvp_numbers():
  y, ydot = jvp(f_seed, (3.0,), (1.0,))
  assert float(y) == 2.7177599838802657
  assert float(ydot) == 2.979984993200891
  assert float(deriv(deriv(f_seed))(3.0)) == 0.2822400161197344


def test_seed003_sin_derivatives_exact():
  assert float(jvp(lax.sin, (3.0,), (1.0,))[1]) == float(np.cos(3.0)) == -0.9899924966004454
  assert float(deriv(deriv(lax.sin))(3.0)) == -0.1411200080598672
  assert float(deriv(deriv(deriv(lax.sin)))(3.0)) == 0.9899924966004454
  assert float(deriv(deriv(deriv(deriv(lax.sin))))(3.0)) == 0.1411200080598672


def test_seed003_python_control_flow():
  def f(x):
    if lax.lt(0.0, x):  # Python control flow on a concrete primal
      return lax.mul(2.0, x)
    return x

  assert float(deriv(f)(3.0)) == 2.0
  assert float(deriv(f)(-3.0)) == 1.0


def test_seed003_pytree_outputs():
  def f(x):
    y = lax.mul(lax.sin(x), 2.0)
    z = lax.add(lax.neg(y), x)
    return {"hi": z, "there": [x, y]}

  y, ydot = jvp(f, (3.0,), (1.0,))
  assert float(y["hi"]) == 2.7177599838802657
  assert float(y["there"][0]) == 3.0 and float(y["there"][1]) == 0.2822400161197344
  assert float(ydot["hi"]) == 2.979984993200891
  assert float(ydot["there"][0]) == 1.0 and float(ydot["there"][1]) == -1.9799849932008908


def test_seed003_jacfwd_of_sin():
  jac = nbjax.jacfwd(lax.sin)(np.arange(3.0))
  np.testing.assert_allclose(jac, np.diag(np.cos(np.arange(3.0))))
  assert jac.shape == (3, 3)


# ------------------------------------------------------------------ jvp semantics


def test_pytree_inputs_and_outputs():
  def f(d, t):
    return [lax.mul(d["a"], t[0]), (lax.sin(t[1]),)]

  p = ({"a": 2.0}, (3.0, 0.5))
  t = ({"a": 1.0}, (0.0, 1.0))
  out, tout = jvp(f, p, t)
  assert float(out[0]) == 6.0 and float(tout[0]) == 3.0
  np.testing.assert_allclose(tout[1][0], np.cos(0.5))


def test_has_aux():
  def f(x):
    return lax.sin(x), {"x": x, "c": lax.cos(x)}

  y, ydot, aux = jvp(f, (1.0,), (1.0,), has_aux=True)
  np.testing.assert_allclose(ydot, np.cos(1.0))
  assert not isinstance(aux["x"], core.Tracer) and float(aux["x"]) == 1.0
  np.testing.assert_allclose(aux["c"], np.cos(1.0))


def test_constant_outputs_get_instantiated_zero_tangents():
  out, tout = jvp(lambda x: (np.ones(3), 2.0, x), (np.float32(1),), (np.float32(1),))
  np.testing.assert_array_equal(tout[0], np.zeros(3))
  assert np.asarray(tout[0]).dtype == np.float64 and float(tout[1]) == 0.0
  assert np.asarray(tout[2]).dtype == np.float32


def test_integer_primals_take_float0_tangents():
  f0 = np.zeros((), dtypes.float0)

  def f(x, n):
    return lax.mul(x, x), n

  (y, n), (ydot, ndot) = jvp(f, (3.0, 4), (1.0, f0))
  assert float(ydot) == 6.0 and int(n) == 4
  assert np.asarray(ndot).dtype == dtypes.float0


def test_boolean_outputs_get_float0_tangents():
  y, ydot = jvp(lambda x: lax.lt(x, 1.0), (np.arange(3.0),), (np.ones(3),))
  assert np.asarray(ydot).dtype == dtypes.float0 and np.shape(ydot) == (3,)


def test_errors_match_jax():
  with pytest.raises(TypeError, match="must be tuples or lists"):
    jvp(lax.sin, 1.0, 1.0)
  with pytest.raises(TypeError, match="same tree structure"):
    jvp(lambda x, y: x, (1.0, 2.0), (1.0,))
  with pytest.raises(TypeError, match=r"dtypes must be equal.*float32"):
    jvp(lax.sin, (np.float64(1.0),), (np.float32(1.0),))
  with pytest.raises(TypeError, match="float0"):
    jvp(lambda n: n, (3,), (1,))
  with pytest.raises(ValueError, match="different primal and tangent shapes"):
    jvp(lax.sin, (np.ones(3),), (np.ones(4),))
  with pytest.raises(TypeError, match="Expected a callable"):
    jvp(3, (1.0,), (1.0,))


def test_missing_jvp_rule_is_the_seeds_error():
  p = core.Primitive("multiply_add_nojvp")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: x)
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'multiply_add_nojvp' not implemented"):
    jvp(lambda x: p.bind(x, x, 1.0), (2.0,), (1.0,))


def test_seed_spelled_jvp_rule():
  # seed 000/002: ad.primitive_jvps[p] = rule(arg_values, arg_tangents) -> (primal, tangent)
  p = core.Primitive("multiply_add")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: core.ShapedArray(x.shape, x.dtype))

  def mad(x, y, z):
    return p.bind(x, y, z)

  def rule(arg_values, arg_tangents):
    x, y, z = arg_values
    xt, yt, zt = arg_tangents
    primal_out = mad(x, y, z)

    def make_zero(t, like):
      return lax.mul(like, 0.0) if type(t) is ad.Zero else t
    xt, yt, zt = make_zero(xt, x), make_zero(yt, y), make_zero(zt, z)
    return primal_out, mad(xt, y, mad(x, yt, zt))

  ad.primitive_jvps[p] = rule
  assert p in ad.primitive_jvps and ad.primitive_jvps[p] is rule
  y, ydot = jvp(lambda a, b: mad(a, a, b), (2.0, 10.0), (1.0, 1.0))
  assert (float(y), float(ydot)) == (14.0, 5.0)


def test_symbolic_zeros_skip_work():
  # only x is perturbed: nothing is computed for the tangent of the constant branch
  def f(x, c):
    return lax.add(lax.mul(x, 2.0), lax.sin(c))
  j = nbjax.make_jaxpr(lambda x, c: jvp(lambda x: f(x, c), (x,), (1.0,)))(1.0, 2.0)
  assert [e.primitive.name for e in j.eqns].count("cos") == 0


# ------------------------------------------------------------------ nesting


def test_perturbation_confusion():
  def f(x):
    def g(y):
      return lax.mul(x, y)
    return jvp(g, (x,), (1.0,))[1]  # d/dy (x*y) = x

  y, ydot = jvp(f, (2.0,), (1.0,))
  assert float(y) == 2.0 and float(ydot) == 1.0

  # the nested derivative of x * (d/dy (x+y)) at y=1 is 1 (not 2)
  def h(x):
    return lax.mul(x, jvp(lambda y: lax.add(x, y), (1.0,), (1.0,))[1])
  assert float(deriv(h)(3.0)) == 1.0


def test_third_order_nested_jvp_of_sin_exact():
  d3 = deriv(deriv(deriv(lax.sin)))
  assert float(d3(0.25)) == float(-np.cos(0.25))


def test_jvp_of_function_closing_over_outer_tracer():
  def outer(x):
    return jvp(lambda y: lax.mul(lax.sin(x), y), (2.0,), (1.0,))[1]  # sin(x)
  np.testing.assert_allclose(deriv(outer)(0.3), np.cos(0.3))


def test_check_jvp_composites_order2():
  rng = np.random.default_rng(1)
  x = rng.standard_normal((3,))
  check_jvp(lambda x, y: lax.mul(lax.exp(lax.sin(x)), lax.cos(y)), (x, x + 1), order=2)
  check_jvp(lambda x: lax.log(lax.add(lax.mul(x, x), 1.0)), (x,), order=3)


# ------------------------------------------------------------------ jacfwd


def test_jacfwd_vector_to_vector():
  x = np.array([0.1, 0.2, 0.3])
  f = lambda x: lax.mul(lax.sin(x), lax.exp(x))
  jac = nbjax.jacfwd(f)(x)
  np.testing.assert_allclose(jac, np.diag(np.cos(x) * np.exp(x) + np.sin(x) * np.exp(x)))


def test_jacfwd_pytrees_and_argnums():
  def f(x, y):
    return {"a": lax.mul(x, y), "b": lax.sin(x)}

  x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
  jx = nbjax.jacfwd(f)(x, y)
  np.testing.assert_allclose(jx["a"], np.diag(y))
  np.testing.assert_allclose(jx["b"], np.diag(np.cos(x)))
  jxy = nbjax.jacfwd(f, argnums=(0, 1))(x, y)
  assert isinstance(jxy["a"], tuple) and len(jxy["a"]) == 2
  np.testing.assert_allclose(jxy["a"][1], np.diag(x))
  assert jxy["b"][1].shape == (2, 2)
  np.testing.assert_allclose(jxy["b"][1], 0.0)


def test_jacfwd_shapes_matrix_input_scalar_output():
  need = getattr(lax, "reduce_sum", None)
  if need is None:
    pytest.skip("lax.reduce_sum not written yet")
  x = np.arange(6.0).reshape(2, 3)
  g = nbjax.jacfwd(lambda x: lax.reduce_sum(lax.mul(x, x), (0, 1)))(x)
  assert g.shape == (2, 3)
  np.testing.assert_allclose(g, 2 * x)
  h = nbjax.jacfwd(nbjax.jacfwd(lambda x: lax.reduce_sum(lax.mul(x, x), (0, 1))))(x)
  assert h.shape == (2, 3, 2, 3)
  np.testing.assert_allclose(h.reshape(6, 6), 2 * np.eye(6))


def test_jacfwd_has_aux_and_dtype_errors():
  jac, aux = nbjax.jacfwd(lambda x: (lax.sin(x), lax.cos(x)), has_aux=True)(np.ones(2))
  np.testing.assert_allclose(jac, np.diag(np.cos(np.ones(2))))
  np.testing.assert_allclose(aux, np.cos(np.ones(2)))
  with pytest.raises(TypeError, match="jacfwd requires real-valued inputs"):
    nbjax.jacfwd(lambda x: x)(np.arange(3))
  with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
    nbjax.jacfwd(lambda x: x, holomorphic=True)(np.ones(2))


def test_jacfwd_keeps_input_dtype():
  x = np.ones(3, np.float32)
  jac = nbjax.jacfwd(lax.sin)(x)
  assert np.asarray(jac).dtype == np.float32


# ------------------------------------------------------------------ seed 003 with operators


def _jnp():
  import nbjax.numpy as m
  if not hasattr(m, "sin") or not hasattr(core.Tracer, "__mul__"):
    pytest.skip("nbjax.numpy / Tracer operators not available yet")
  return m


def test_seed003_as_written_with_operators():
  m = _jnp()

  def f(x):
    y = m.sin(x) * 2.
    z = -y + x
    return z

  y, ydot = jvp(f, (3.0,), (1.0,))
  assert (float(y), float(ydot)) == (2.7177599838802657, 2.979984993200891)
  assert float(deriv(deriv(f))(3.0)) == 0.2822400161197344

  def g(x):
    if x > 0.:  # Python control flow
      return 2. * x
    else:
      return x
  assert (float(deriv(g)(3.0)), float(deriv(g)(-3.0))) == (2.0, 1.0)
  np.testing.assert_allclose(nbjax.jacfwd(m.sin)(m.arange(3.0)), np.diag(np.cos(np.arange(3.0))))
  out = nbjax.vmap(lambda s: 1 + s, (0,))(np.arange(3.0))
  np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])


def test_jvp_at_a_python_complex_stays_weak():
  # rules' constants at a weakly typed complex scalar are Python complexes (was lax.complex)
  import nbjax.numpy as jnp
  for f, df in ((jnp.sqrt, lambda z: 0.5 / np.sqrt(z)), (jnp.tan, lambda z: 1 / np.cos(z) ** 2),
                (lambda z: z ** 3, lambda z: 3 * z ** 2)):
    y, t = nbjax.jvp(f, (1 + 1j,), (1 + 0j,))
    assert y.dtype == t.dtype == np.complex128 and y.weak_type and t.weak_type
    np.testing.assert_allclose(complex(t), df(1 + 1j), rtol=1e-14)


def test_jvp_of_asarray_gives_arrays():
  """jnp.asarray of a jvp tracer of a concrete value converts it (JAX's
  _convert_element_type binds for concrete tracers), so jvp's outputs are Arrays, weakly
  typed (api_test test_jvp_asarray_returns_array)."""
  p, t = nbjax.jvp(nbjax.numpy.asarray, (1.,), (2.,))
  assert type(p) is type(t) is type(nbjax.numpy.ones(()))
  assert (float(p), float(t), p.weak_type, t.weak_type, str(p.dtype)) == (1., 2., True, True,
                                                                          "float64")


def test_python_scalar_tangent_passed_through_add_is_an_array():
  """JAX's jvp of ``x + 1.`` gives the tangent as a weak Array, not the Python float given
  (only the identity function hands its inputs back)."""
  import nbjax
  p, t = nbjax.jvp(lambda x: x + 1., (4.,), (1.,))
  assert type(t) is nbjax.Array and t.weak_type and float(t) == 1.0
  _, t = nbjax.jvp(lambda x: x - 1., (np.float32(4.),), (np.float32(1.),))
  assert type(t) is nbjax.Array and t.dtype == np.float32 and not t.weak_type
  assert nbjax.jvp(lambda x: x, (4.,), (1.,)) == (4.0, 1.0)
