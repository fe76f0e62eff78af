"""Behaviour found by running the code of JAX 0.10.2's documentation under JAX and nbjax and
comparing the outputs (expected values from JAX 0.10.2)."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax


def test_array_of_traced_scalars_has_no_copy():
  # Common_Gotchas_in_JAX: make_jaxpr(permissive_sum)(list(range(10)))
  jaxpr = nbjax.make_jaxpr(lambda x: jnp.sum(jnp.array(x)))(list(range(3))).jaxpr
  assert [e.primitive.name for e in jaxpr.eqns] == (
      ["convert_element_type", "broadcast_in_dim"] * 3 + ["concatenate", "reduce_sum"])
  jaxpr = nbjax.make_jaxpr(lambda x: jnp.array([x, [1., 2.]]))(jnp.ones(2)).jaxpr
  assert [e.primitive.name for e in jaxpr.eqns] == ["broadcast_in_dim"] * 2 + ["concatenate"]


@pytest.mark.parametrize("jit", [False, True])
def test_grad_through_real_imag_of_python_complex_is_strong(jit):
  # autodiff_cookbook: grad(f)(3. + 4j) with f = real(z)**2 + imag(z)**2
  f = lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2
  g = nbjax.grad(f)
  g = nbjax.jit(g) if jit else g
  r = g(3. + 4j)
  assert r.dtype == np.complex128 and not r.weak_type
  assert complex(r) == 6 - 8j
  r = nbjax.grad(jnp.real)(3. + 4j)
  assert repr(r) == "Array(1.+0.j, dtype=complex128)"
  r = nbjax.grad(jnp.imag)(3. + 4j)
  assert not r.weak_type and complex(r) == -1j


def test_reshape_by_traced_scalar_error():
  # tracing.md: x.reshape(jnp.array(x.shape).prod()) under jit
  @nbjax.jit
  def f(x):
    return x.reshape(jnp.array(x.shape).prod())
  with pytest.raises(TypeError, match=r"Shapes must be 1D sequences of concrete values of "
                     r"integer type, got \[JitTracer\(int64\[\]\)\]\.\nIf using `jit`"):
    f(jnp.ones((2, 3)))
  with pytest.raises(TypeError, match=r"got \[JitTracer\(int64\[\]\)\]\."):
    nbjax.jit(lambda x: jnp.reshape(x, jnp.sum(jnp.array(x.shape))))(jnp.ones((2, 3)))
  with pytest.raises(TypeError, match=r"got \(JitTracer\(int64\[\]\), 1\)\."):
    nbjax.jit(lambda x: x.reshape(jnp.sum(jnp.array(x.shape)), 1))(jnp.ones((2, 3)))
  assert jnp.ones(6).reshape(jnp.array(6)).shape == (6,)


def test_grad_of_vector_pure_callback_is_the_jvp_error():
  # external-callbacks.md: jax.grad(f)(x) with f a pure_callback of a vector
  def f(x):
    return nbjax.pure_callback(np.sin, nbjax.ShapeDtypeStruct(x.shape, x.dtype), x)
  for g in (f, lambda x: jnp.sum(f(x))):
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP. Please use "
                       "`jax.custom_jvp` to use callbacks while taking gradients."):
      nbjax.grad(g)(jnp.ones(3))
  # a callback on a constant stays differentiable around it
  g = nbjax.grad(lambda x: jnp.sum(x * nbjax.pure_callback(
      np.sin, nbjax.ShapeDtypeStruct((3,), np.float64), jnp.ones(3))))(jnp.ones(3))
  np.testing.assert_allclose(g, np.sin(np.ones(3)))


def test_vmap_does_not_rebuild_custom_nodes():
  # custom_pytrees.md: a node whose constructor calls jnp.asarray on its children
  class MyTree:
    def __init__(self, a):
      self.a = jnp.asarray(a)
  nbjax.tree_util.register_pytree_node(MyTree, lambda t: ((t.a,), None),
                                       lambda _, args: MyTree(*args))
  out = nbjax.vmap(lambda x: x)(MyTree(jnp.arange(5.0)))
  assert type(out) is MyTree
  np.testing.assert_array_equal(out.a, np.arange(5.0))
  out = nbjax.vmap(lambda t, y: t.a * y, in_axes=(0, None))(MyTree(jnp.arange(3.0)), 2.0)
  np.testing.assert_array_equal(out, [0., 2., 4.])
  with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix"):
    nbjax.vmap(lambda t: t, in_axes=([0],))((jnp.arange(3.0),))


def test_saved_residuals_keep_the_source_of_checkpointed_code():
  # gradient-checkpointing.md: jax.checkpoint(g) inside f2; chain_compose's nested f
  from nbjax.ad_checkpoint import saved_residuals

  def g(W, x):
    y = jnp.dot(W, x)
    return jnp.sin(y)
  line = g.__code__.co_firstlineno

  def f2(W1, W2, W3, x):
    x = nbjax.checkpoint(g)(W1, x)
    x = nbjax.checkpoint(g)(W2, x)
    x = nbjax.checkpoint(g)(W3, x)
    return x
  res = saved_residuals(f2, jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
  sins = [d for _, d in res if d.startswith("output of sin")]
  assert sins == [f"output of sin from {__file__}:{line + 2}:11 (test_saved_residuals_keep_the_"
                  "source_of_checkpointed_code.<locals>.g)"] * 2

  def chain_compose(funs):
    def f(x):
      for fun in funs:
        x = fun(x)
      return x
    return f
  res = saved_residuals(chain_compose([jnp.sin] * 2), 3.0)
  assert res[-1][1].startswith("output of cos from")
  assert res[-1][1].endswith("(test_saved_residuals_keep_the_source_of_checkpointed_code."
                             "<locals>.chain_compose.<locals>.f)")


def test_private_util_paths():
  # Writing_custom_interpreters_in_Jax / jax-primitives.md import these private paths
  from nbjax._src.util import safe_map, safe_zip, unzip2, split_list
  from nbjax._src.lax import lax as lax_mod
  from nbjax._src import api  # (JAX's jax._src.api holds these too; its api_test uses them)
  assert (api.named_call, api.device_put, api.device_get, api.clear_caches) == (
      nbjax.named_call, nbjax.device_put, nbjax.device_get, nbjax.clear_caches)
  assert safe_map(lambda a, b: a + b, (1, 2), [3, 4]) == [4, 6]
  assert safe_zip((1,), (2,)) == [(1, 2)]
  assert unzip2([(1, 2), (3, 4)]) == ((1, 3), (2, 4))
  assert split_list([1, 2, 3, 4], [1, 2]) == [[1], [2, 3], [4]]
  with pytest.raises(ValueError, match=r"^safe_map\(\) argument 2 is shorter than argument 1$"):
    safe_map(lambda a, b: a, [1, 2], [1])
  with pytest.raises(ValueError, match=r"^safe_map\(\) argument 2 is longer than argument 1$"):
    safe_map(lambda a, b: a, [1], [1, 2])
  with pytest.raises(ValueError, match=r"^safe_zip\(\) argument 1 has length 1 but argument 0 "
                     r"has length 2\. All lengths: \(2, 1\)$"):
    safe_zip([1, 2], [1])
  assert float(lax_mod.add(lax_mod.mul(2., 2.), 10.)) == 14.


def test_private_lax_helpers_as_jax():
  """jax._src.lax.lax's helpers JAX's own tests call: asarray (no primitive bound, weak type
  kept), _convert_element_type with weak_type, _const (the example's dtype), _delta."""
  import numpy as np
  from nbjax._src.lax import lax as li
  for x, dtype, weak in [(1.0, np.float64, True), (np.float32(1), np.float32, False),
                         (np.array(1.0), np.float64, False)]:
    a = li.asarray(x)
    assert isinstance(a, nbjax.Array) and (a.dtype, a.weak_type) == (dtype, weak)
    assert not nbjax.make_jaxpr(li.asarray)(x).eqns
    assert not nbjax.make_jaxpr(lambda: li.asarray(x))().eqns
  assert li.asarray(a) is a
  v = li._convert_element_type(0, np.dtype("int8"), weak_type=True)
  assert (v.dtype, v.weak_type) == (np.int8, True)
  assert li._const(v, 3).dtype == np.int8
  want = np.broadcast_to(np.eye(3, dtype=np.float32)[:, None, :], (3, 2, 3))
  np.testing.assert_array_equal(li._delta(np.float32, (3, 2, 3), (0, 2)), want)
  np.testing.assert_array_equal(nbjax.jit(lambda: li._delta(np.int32, (3, 2, 3), (0, 2)))(),
                                want.astype(np.int32))


def test_primitive_rules_as_jax_calls_them():
  # jax-primitives.md: the staged tracer's type, tuples for JVP rules, register_lowering -> None
  from nbjax.extend import core
  from nbjax.interpreters import ad, mlir
  names = []
  nbjax.jit(lambda x: names.append(type(x).__name__) or x)(1.0)
  assert names == ["DynamicJaxprTracer"]

  p = core.Primitive("docs_multiply_add")
  p.def_impl(lambda x, y, z: np.add(np.multiply(x, y), z))
  p.def_abstract_eval(lambda x, y, z: core.ShapedArray(x.shape, x.dtype))
  seen = []

  def jvp(primals, tangents):
    seen.append((type(primals), type(tangents)))
    x, y, z = primals
    tx, ty, tz = (ad.instantiate_zeros(t) for t in tangents)
    return p.bind(x, y, z), tx * y + x * ty + tz
  ad.primitive_jvps[p] = jvp
  assert mlir.register_lowering(
      p, mlir.lower_fun(lambda x, y, z: lax.add(lax.mul(x, y), z), multiple_results=False)) is None
  out, t = nbjax.jvp(lambda x: p.bind(x, x, 10.), (2.,), (1.,))
  assert (float(out), float(t)) == (14., 4.)
  assert seen == [(tuple, tuple)]
  assert float(nbjax.jit(lambda x: p.bind(x, x, 10.))(2.)) == 14.


def test_jax_docstring_examples():
  # the Examples sections of JAX 0.10.2's docstrings, run under nbjax (x64)
  a = jnp.array([1, 2, 3, 10, 11, 15, 19, 25])
  counts, edges = jnp.histogram(a, range=(0, 25), bins=5)
  np.testing.assert_array_equal(counts, [3., 0., 2., 2., 1.])
  assert np.asarray(edges).tolist() == [0., 5., 10., 15., 20., 25.]
  assert np.asarray(jnp.linspace(0, 25, 6)).tolist() == [0., 5., 10., 15., 20., 25.]
  assert np.asarray(jnp.linspace(0, 1, 11)).tolist() == [
      0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7000000000000001,
      0.8, 0.9, 1.0]
  # weak types of the isinf family (JAX: strong constants for inf, ne(x, x) for isnan)
  assert repr(jnp.isinf(jnp.inf)) == "Array(True, dtype=bool)"
  assert repr(jnp.isnan(6)) == "Array(False, dtype=bool, weak_type=True)"
  assert repr(jnp.isneginf(jnp.inf)) == "Array(False, dtype=bool)"
  assert [jnp.isposinf(np.inf).weak_type, jnp.isinf(6.0).weak_type, jnp.isnan(6.0).weak_type,
          jnp.isinf(6).weak_type, jnp.isfinite(np.inf).weak_type, jnp.isfinite(6).weak_type] == [
      False, False, True, False, True, False]
  np.testing.assert_array_equal(jnp.isnan(jnp.array([1, 2])), [False, False])
  from nbjax._src.tree_util import flatten_one_level
  assert flatten_one_level({'a': [1, 2], 'b': {'c': 3}}) == (([1, 2], {'c': 3}), ('a', 'b'))


def test_float32_uniform_bounds_are_one_multiply_add():
  # nn.initializers.glorot_normal's docstring example (truncated_normal -> uniform(a, b)):
  # XLA computes floats * (b - a) + a as one fused multiply-add; eager gives the same bits
  k = nbjax.random.key(42)
  out = nbjax.nn.initializers.glorot_normal()(k, (2, 3), jnp.float32)
  np.testing.assert_array_equal(out, np.array(
      [[-0.019425004720687866, 0.31951215863227844, 0.2026711106300354],
       [0.10534006357192993, -0.0851031169295311, 0.14876757562160492]], np.float32))
  for f in (lambda k: nbjax.random.uniform(k, (1000,), jnp.float32, -0.95, 0.95),
            lambda k: nbjax.random.truncated_normal(k, -2, 2, (1000,), jnp.float32)):
    np.testing.assert_array_equal(f(k), nbjax.jit(f)(k))
  assert repr(nbjax.random.uniform(k, (), jnp.float32, -1., 1.)) == (
      "Array(-0.02258086, dtype=float32)")
