"""custom_batching.custom_vmap / sequential_vmap (the rule runs under vmap, with the batch
axes moved to the front, nested vmaps, jit of vmap; the function runs eagerly and under
grad), custom_gradient (first and second order, jit, vmap, tuple outputs), tree_broadcast,
live_arrays."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp


def _counted():
  calls = []

  @nbjax.custom_batching.custom_vmap
  def f(x, y):
    return x + y

  @f.def_vmap
  def rule(axis_size, in_batched, x, y):
    calls.append((axis_size, in_batched))
    return x * 100 + y, in_batched[0] or in_batched[1]
  return f, calls


@pytest.mark.needs_guard  # counts the rule's calls: a replay must not trace it again
def test_custom_vmap_uses_the_rule_under_vmap():
  f, calls = _counted()
  assert float(f(1., 2.)) == 3. and calls == []
  np.testing.assert_array_equal(np.asarray(nbjax.vmap(f, in_axes=(0, None))(jnp.arange(3.), 1.)),
                                [1., 101., 201.])
  assert calls == [(3, [True, False])]
  np.testing.assert_array_equal(np.asarray(nbjax.vmap(f, in_axes=(None, 0))(1., jnp.arange(3.))),
                                [100., 101., 102.])
  x = np.arange(6.).reshape(2, 3)
  got = nbjax.vmap(f, in_axes=(1, None))(x, 1.)  # the rule sees the batch axis in front
  np.testing.assert_array_equal(np.asarray(got), x.T * 100 + 1)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(nbjax.vmap(f))(jnp.arange(3.),
                                                                   jnp.arange(3.))),
                                [0., 101., 202.])
  np.testing.assert_array_equal(np.asarray(nbjax.vmap(nbjax.vmap(f))(np.ones((2, 3)),
                                                                    np.ones((2, 3)))),
                                np.full((2, 3), 101.))
  with pytest.raises(ValueError, match="Linearization failed to produce known values"):
    nbjax.grad(f)(1., 2.)  # no reverse mode (JAX's): wrap it in custom_vjp for that


def test_custom_vmap_under_jvp_and_jit():
  """custom_vmap_call is staged (jit) and its JVP is a custom_vmap_call whose rule is the
  JVP of the user's rule: vmap of jvp, vmap of jit and jacfwd use the rule (values from JAX)."""
  f, calls = _counted()
  p, t = nbjax.jvp(f, (1., 2.), (1., 1.))
  assert (float(p), float(t)) == (3., 2.) and p.weak_type and calls == []
  ps, ts = nbjax.vmap(lambda x, t: nbjax.jvp(f, (x, 2.), (t, 0.)))(jnp.arange(3.), jnp.ones(3))
  np.testing.assert_array_equal(np.asarray(ps), [2., 102., 202.])
  np.testing.assert_array_equal(np.asarray(ts), [100., 100., 100.])
  np.testing.assert_array_equal(
      np.asarray(nbjax.vmap(nbjax.jit(lambda x: f(x, 1.)))(jnp.arange(3.))), [1., 101., 201.])
  np.testing.assert_array_equal(np.asarray(nbjax.jacfwd(lambda x: f(x, 1.))(jnp.arange(3.))),
                                np.eye(3) * 100)
  assert "custom_vmap_call" in str(nbjax.make_jaxpr(f)(1., 2.))
  calls.clear()  # unbatched arguments: the rule is not called
  out = nbjax.vmap(lambda a, x: f(x, x) + a, in_axes=(0, None))(jnp.arange(3.), 1.)
  np.testing.assert_array_equal(np.asarray(out), [2., 3., 4.])
  assert calls == []


def test_custom_vmap_forwarding_and_output_structure():
  @nbjax.custom_vjp
  @nbjax.custom_batching.custom_vmap
  def f(x):
    return jnp.sin(x)
  f.def_vmap(lambda n, b, xs: (jnp.cos(xs), True))  # forwarded to the custom_vmap (JAX's)
  f.defvjp(lambda x: (f(x), jnp.cos(x)), lambda c, g: (c * g * 3,))
  np.testing.assert_allclose(np.asarray(nbjax.vmap(f)(jnp.arange(3.))), np.cos(np.arange(3.)))
  assert float(nbjax.grad(f)(0.)) == 3.
  with pytest.raises(AttributeError):
    f.not_a_def

  @nbjax.custom_batching.custom_vmap
  def g(x):
    return jnp.sin(x)

  @g.def_vmap
  def rule_abc(axis_size, in_batched, xs):
    return [jnp.sin(xs)], in_batched
  with pytest.raises(ValueError, match=r"structure of output returned by custom vmap rule "
                     r"\(rule_abc\) does not match that of original custom-vmapped function"):
    nbjax.vmap(g)(jnp.arange(3.))


def test_custom_vmap_rule_errors():
  @nbjax.custom_batching.custom_vmap
  def g(x):
    return x
  with pytest.raises(AttributeError, match="No batching rule defined"):
    g(1.)

  @g.def_vmap
  def bad(axis_size, in_batched, x):
    return (x, x), [True]
  with pytest.raises(ValueError, match="do not match"):
    nbjax.vmap(g)(jnp.ones(3))

  @g.def_vmap
  def wrong_size(axis_size, in_batched, x):
    return x[:2], True
  with pytest.raises(ValueError, match="leading axis is not of size 3"):
    nbjax.vmap(g)(jnp.ones(3))


def test_sequential_vmap():
  @nbjax.custom_batching.sequential_vmap
  def s(x, y):
    return {"a": x.sum() + y}
  out = nbjax.vmap(s)(np.arange(6.).reshape(3, 2), np.arange(3.))
  np.testing.assert_array_equal(np.asarray(out["a"]), [1., 6., 11.])
  out = nbjax.vmap(s, in_axes=(0, None))(np.ones((3, 2)), 1.)
  np.testing.assert_array_equal(np.asarray(out["a"]), [3., 3., 3.])


def test_custom_gradient():
  @nbjax.custom_gradient
  def f(x, y):
    return x * y, lambda g: (g * 10., g * 20.)
  assert float(f(2., 3.)) == 6.
  assert [float(v) for v in nbjax.grad(f, argnums=(0, 1))(2., 3.)] == [10., 20.]
  assert float(nbjax.jit(nbjax.grad(f))(2., 3.)) == 10.

  @nbjax.custom_gradient
  def h(x):
    return jnp.sin(x), lambda g: g * jnp.cos(x) * 2
  assert float(nbjax.grad(h)(1.)) == pytest.approx(2 * np.cos(1.))
  assert float(nbjax.grad(nbjax.grad(h))(1.)) == pytest.approx(-2 * np.sin(1.))
  np.testing.assert_allclose(np.asarray(nbjax.vmap(nbjax.grad(h))(jnp.array([0., 1.]))),
                             2 * np.cos([0., 1.]))

  @nbjax.custom_gradient
  def k(x):
    return (x, 2 * x), lambda g: g[0] + g[1]  # a single cotangent, not a tuple
  assert float(nbjax.grad(lambda x: sum(k(x)))(1.)) == 2.


def test_tree_broadcast_and_live_arrays():
  tb = nbjax.tree_util.tree_broadcast
  assert tb([1, {"a": 2}], [[3, 4], {"a": (5, 6)}]) == [[1, 1], {"a": (2, 2)}]
  assert nbjax.tree.broadcast(1, {"x": [1, 2]}) == {"x": [1, 1]}
  with pytest.raises(ValueError):
    tb(None, [1, 2])
  with pytest.raises(ValueError):
    tb([1, 2], [1, 2, 3])
  a = jnp.ones(7919)
  live = [x for x in nbjax.live_arrays() if x.shape == (7919,)]
  assert len(live) == 1 and live[0] is a
  with pytest.raises(RuntimeError, match="Unknown backend"):
    nbjax.live_arrays("gpu")
