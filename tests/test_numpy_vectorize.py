"""jnp.vectorize (NumPy gufunc semantics on vmap), apply_along_axis, apply_over_axes."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp

RNG = np.random.default_rng(0)


def test_elementwise_broadcasting_without_materializing():
  f = jnp.vectorize(lambda a, b: a * 2 + b)
  a, b = RNG.standard_normal((3, 1)), RNG.standard_normal(4)
  np.testing.assert_allclose(f(a, b), a * 2 + b)
  # size-1 and missing loop dims are unmapped: one mul and one add on the small operands
  jaxpr = nbjax.make_jaxpr(f)(a, b).jaxpr
  assert [e.primitive.name for e in jaxpr.eqns].count("mul") == 1
  assert f(np.float64(2.0), 1.0).shape == ()
  assert jnp.vectorize(jnp.sum, signature="(n)->()")(np.ones((1, 2, 3))).shape == (1, 2)


def test_signature_core_dims():
  mv = jnp.vectorize(jnp.dot, signature="(n,m),(m)->(n)")
  A, x = RNG.standard_normal((5, 3, 4)), RNG.standard_normal(4)
  np.testing.assert_allclose(mv(A, x), A @ x, rtol=1e-12)
  two = jnp.vectorize(lambda v: (v.sum(), v * 2), signature="(n)->(),(n)")
  s, d = two(np.ones((2, 3)))
  assert s.shape == (2,) and d.shape == (2, 3)
  with pytest.raises(ValueError, match="core dimension 'm'"):
    mv(np.ones((3, 5)), np.ones(4))
  with pytest.raises(ValueError, match="not have enough dimensions"):
    mv(np.ones(3), np.ones(3))
  with pytest.raises(ValueError, match="does not match core dimensions"):
    jnp.vectorize(lambda v: v, signature="(n)->()")(np.ones((2, 3)))
  with pytest.raises(TypeError, match="wrong number of positional"):
    mv(np.ones((3, 4)))
  with pytest.raises(ValueError, match="signature"):
    jnp.vectorize(jnp.sum, signature="(n->()")(np.ones(3))


def test_excluded_and_keywords():
  g = jnp.vectorize(lambda x, p, scale=1.0: scale * x ** p, excluded={1, "scale"})
  np.testing.assert_allclose(g(np.arange(3.0), 2, scale=3.0), 3 * np.arange(3.0) ** 2)
  h = jnp.vectorize(lambda x, *, y: x + y)
  np.testing.assert_allclose(h(np.ones((2, 1)), y=np.arange(3.0)), 1 + np.arange(3.0)[None] + np.zeros((2, 1)))
  with pytest.raises(TypeError):
    jnp.vectorize(lambda x: x, excluded={1.5})


def test_composes_with_transformations():
  f = jnp.vectorize(lambda a, b: jnp.sin(a) * b)
  a, b = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
  np.testing.assert_allclose(nbjax.jit(f)(a, b), np.sin(a) * b, rtol=1e-14)
  y, t = nbjax.jvp(lambda a: f(a, b), (a,), (np.ones_like(a),))
  np.testing.assert_allclose(t, np.cos(a) * b, rtol=1e-14)
  np.testing.assert_allclose(nbjax.vmap(f, in_axes=(0, None))(a, b), np.sin(a) * b, rtol=1e-14)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_apply_along_axis_matches_numpy(axis):
  x = RNG.standard_normal((2, 3, 4))
  for f in (lambda v: v.sum(), lambda v: v[::-1] * 2.0, lambda v: jnp.outer(v, v)):
    want = np.apply_along_axis(lambda v: np.asarray(f(v)), axis, x)
    np.testing.assert_allclose(jnp.apply_along_axis(f, axis, x), want, rtol=1e-14)


def test_apply_over_axes_matches_numpy():
  x = RNG.standard_normal((2, 3, 4))
  np.testing.assert_allclose(jnp.apply_over_axes(jnp.sum, x, [0, 2]),
                             np.apply_over_axes(np.sum, x, [0, 2]), rtol=1e-14)
  np.testing.assert_allclose(jnp.apply_over_axes(jnp.sum, x, 1), np.apply_over_axes(np.sum, x, 1))


def test_none_args_rank_promotion_and_output_tuple_as_jax():
  """JAX's lax_numpy_vectorize_test test_none_arg*, test_rank_promotion_error and
  test_wrong_output_type: None passes through unvectorized when its core dims are ();
  rank promotion of loop dims follows jax_numpy_rank_promotion."""
  f = jnp.vectorize(lambda x, y: x if y is None else x + y)
  np.testing.assert_array_equal(f(jnp.arange(3), None), [0, 1, 2])
  np.testing.assert_array_equal(f(jnp.arange(3), jnp.arange(3)), [0, 2, 4])
  g = jnp.vectorize(lambda x, y: x if y is None else x + y, signature="(k),(k)->(k)")
  with pytest.raises(ValueError, match=r"^Cannot pass None at locations \{1\} with "
                                       r"signature='\(k\),\(k\)->\(k\)'$"):
    g(jnp.arange(3), None)
  add = jnp.vectorize(jnp.add, signature="(),()->()")
  with nbjax.numpy_rank_promotion("raise"):
    with pytest.raises(ValueError, match=r"operands with shapes \[\(4, 4\), \(4,\)\] require rank "
                                         r"promotion for jnp.vectorize function with signature"):
      add(jnp.zeros((4, 4)), jnp.zeros(4))
    assert add(jnp.zeros((4, 4)), jnp.zeros(())).shape == (4, 4)
  with nbjax.numpy_rank_promotion("warn"):
    with pytest.warns(UserWarning, match="require rank promotion"):
      add(jnp.zeros((4, 4)), jnp.zeros(4))
  h = jnp.vectorize(jnp.dot, signature="(n,m),(m,k)->(n,k),()")
  with pytest.raises(TypeError, match="^output must be a tuple when multiple outputs are expected"):
    h(jnp.zeros((2, 2)), jnp.zeros((2, 2)))
