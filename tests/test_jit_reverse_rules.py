"""jit's reverse-mode rules, checked directly (grad itself is a later issue): the transpose
rule by the inner-product identity, partial evaluation by recomposition, and
``ad.backward_pass`` / ``pe.partial_eval_jaxpr`` on which they stand."""
import numpy as np
import pytest

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import registry
from nbjax.interpreters import ad
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import eval_jaxpr

jit_p = registry.get("jit")
rng = np.random.default_rng(0)
C = jnp.asarray(rng.standard_normal(4))


def _jit_eqn(f, *args):
  closed = jax.make_jaxpr(jax.jit(f))(*args)
  (eqn,) = [e for e in closed.eqns if e.primitive is jit_p]
  return eqn.params


def _vdot(a, b):
  return float(np.vdot(np.asarray(a), np.asarray(b)))


@pytest.mark.parametrize("f", [
    lambda x: 2.0 * x,
    lambda x: jnp.sin(C) * x + x[::-1],
    lambda x: jnp.cumsum(x * C).sum() * jnp.ones(4),
    lambda x: jnp.dot(jnp.outer(C, C), x),
])
def test_jit_transpose_inner_product_identity(f):
  x, ct = jnp.asarray(rng.standard_normal(4)), jnp.asarray(rng.standard_normal(4))
  params = _jit_eqn(f, x)
  (xt,) = jit_p.transpose([ct], ad.UndefinedPrimal(jax.core.get_aval(x)), **params)
  assert np.isclose(_vdot(ct, f(x)), _vdot(xt, x), rtol=1e-12)


def test_jit_transpose_with_residual_argument():
  f = lambda y, x: jnp.sin(y) * x  # linear in x; y is a residual
  y, x, ct = (jnp.asarray(rng.standard_normal(3)) for _ in range(3))
  params = _jit_eqn(f, y, x)
  cts = jit_p.transpose([ct], y, ad.UndefinedPrimal(jax.core.get_aval(x)), **params)
  assert cts[0] is None
  np.testing.assert_allclose(np.asarray(cts[1]), np.sin(np.asarray(y)) * np.asarray(ct))


def test_backward_pass_zero_cotangent_for_unused_input():
  closed = jax.make_jaxpr(lambda a, b: 3.0 * a)(1.0, 2.0)
  avals = closed.in_avals
  cts = ad.backward_pass(closed.jaxpr, closed.consts,
                         [ad.UndefinedPrimal(avals[0]), ad.UndefinedPrimal(avals[1])], [1.0])
  assert float(cts[0]) == 3.0 and type(cts[1]) is ad.Zero


@pytest.mark.parametrize("unknowns", [(False, True), (True, False), (True, True), (False, False)])
def test_partial_eval_recomposes(unknowns):
  def f(x, y):
    a = jnp.sin(x) * 2.0
    return a * y + x, jnp.cos(a).sum()

  x, y = jnp.asarray(rng.standard_normal(3)), jnp.asarray(rng.standard_normal(3))
  closed = jax.make_jaxpr(f)(x, y)
  known, unknown, out_unknowns, num_res = pe.partial_eval_jaxpr(closed, list(unknowns))
  args = [x, y]
  kouts = eval_jaxpr(known.jaxpr, known.consts, *[a for a, u in zip(args, unknowns) if not u])
  n_known = len(kouts) - num_res
  res = kouts[n_known:]
  uouts = eval_jaxpr(unknown.jaxpr, [], *res, *[a for a, u in zip(args, unknowns) if u])
  k, u = iter(kouts[:n_known]), iter(uouts)
  got = [next(u) if unk else next(k) for unk in out_unknowns]
  for g, w in zip(got, f(x, y)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)
  if not any(unknowns):
    assert not any(out_unknowns) and not unknown.eqns
  # the known part never touches an unknown input
  assert len(known.jaxpr.invars) == unknowns.count(False)


def test_jit_partial_eval_rule_splits_the_call():
  f = lambda x, y: jnp.exp(x) * y
  x, y = jnp.asarray(rng.standard_normal(2)), jnp.asarray(rng.standard_normal(2))
  params = _jit_eqn(f, x, y)
  kp, up, out_unknowns, num_res = jit_p.partial_eval([False, True], **params)
  assert out_unknowns == [True] and num_res >= 1
  res = jit_p.bind(x, **kp)
  out = jit_p.bind(*res, y, **up)
  np.testing.assert_allclose(np.asarray(out[0]), np.exp(np.asarray(x)) * np.asarray(y), rtol=1e-12)


def test_dce_of_a_call_is_memoized():
  # as JAX's (dce_jaxpr is cached): pruning a jit call's unused outputs gives the same jaxpr
  # object each time, so a repeated grad of a jit lowers nothing new (api_test
  # test_grad_of_jit_compilation_caching2's second half)
  from nbjax.interpreters import pjit
  eqn = jax.make_jaxpr(jax.jit(lambda x: (jnp.sin(x), jnp.cos(x))))(1.0).eqns[0]
  a, b = pe.dce_call_rule([True, False], eqn)[1], pe.dce_call_rule([True, False], eqn)[1]
  assert a.params["jaxpr"] is b.params["jaxpr"] and len(a.params["jaxpr"].eqns) == 1
  assert pe.dce_call_rule([True, True], eqn)[1] is eqn

  f = jax.jit(lambda x: jnp.sin(x) * 2.0)
  jax.grad(f)(3.0)
  n = pjit._stats["lowerings"]
  np.testing.assert_allclose(jax.grad(f)(4.0), 2 * np.cos(4.0), rtol=1e-6)
  jax.grad(f)(5.0)
  assert pjit._stats["lowerings"] == n
