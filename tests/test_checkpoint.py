"""``checkpoint``/``remat``: values and gradients equal to the plain function's under every
policy and composition, and what reverse mode keeps: with ``nothing_saveable`` the linear
part recomputes the primal work, with ``everything_saveable`` it reads saved residuals."""
import functools

import numpy as np
import pytest

import nbjax as jax
import nbjax.numpy as jnp
from nbjax.ad_checkpoint import checkpoint_policies as cp
from nbjax.interpreters import ad

rng = np.random.default_rng(0)
POLICIES = [None, cp.nothing_saveable, cp.everything_saveable, cp.dots_saveable,
            cp.dots_with_no_batch_dims_saveable]


def f(w, x):
  h = jnp.tanh(x @ w)
  return jnp.sum(jnp.sin(h) * h)


W = jnp.asarray(rng.standard_normal((4, 3)))
X = jnp.asarray(rng.standard_normal((5, 4)))


def close(a, b, rtol=1e-12):
  for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-13)


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: getattr(p, "__name__", "default"))
def test_gradients_equal_plain(policy):
  g = jax.checkpoint(f, policy=policy)
  close(g(W, X), f(W, X))
  want = jax.grad(f, argnums=(0, 1))(W, X)
  close(jax.grad(g, argnums=(0, 1))(W, X), want)          # tape (first call)
  close(jax.grad(g, argnums=(0, 1))(W, X), want)
  close(jax.jit(jax.grad(g, argnums=(0, 1)))(W, X), want, rtol=1e-10)
  close(jax.grad(jax.jit(g), argnums=(0, 1))(W, X), want, rtol=1e-10)
  per = jax.vmap(jax.grad(g), in_axes=(None, 0))(W, X[:, None, :])
  for i in range(5):
    close(per[i], jax.grad(f)(W, X[i:i + 1]))
  close(jax.hessian(lambda x: g(W, x))(X[:1]), jax.hessian(lambda x: f(W, x))(X[:1]), 1e-10)


def _linear_eqns(fun, *args):
  _, lin = ad.linearize_flat(lambda *a: [fun(*a)], list(args))
  (eqn,) = lin.jaxpr.eqns
  return [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns]


def test_what_the_linear_part_recomputes():
  nothing = _linear_eqns(jax.checkpoint(f), W, X)
  assert "tanh" in nothing and "dot_general" in nothing   # recomputed from the inputs
  everything = _linear_eqns(jax.checkpoint(f, policy=cp.everything_saveable), W, X)
  assert "tanh" not in everything and "sin" not in everything
  dots = _linear_eqns(jax.checkpoint(f, policy=cp.dots_saveable), W, X)
  assert "tanh" in dots and dots.count("dot_general") == 2  # the primal dot is saved


def test_static_argnums_prevent_cse_and_jaxpr():
  def g(x, n):
    for _ in range(n):
      x = jnp.sin(x)
    return x
  h = jax.checkpoint(g, static_argnums=(1,))
  close(jax.grad(lambda x: h(x, 3))(0.4), jax.grad(lambda x: g(x, 3))(0.4))
  text = str(jax.make_jaxpr(jax.checkpoint(jnp.sin, prevent_cse=False))(1.0))
  assert "remat2[" in text and "prevent_cse=False" in text
  assert jax.remat is jax.checkpoint


def test_second_order():
  g = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)) * jnp.cos(x))
  plain = lambda x: jnp.sin(jnp.sin(x)) * jnp.cos(x)
  close(jax.grad(jax.grad(g))(0.3), jax.grad(jax.grad(plain))(0.3))


def test_checkpoint_name_and_name_policies():
  from nbjax.ad_checkpoint import Offloadable, Recompute, Saveable, checkpoint_name

  def g(x):
    y = checkpoint_name(jnp.sin(x), "y")
    return jnp.sum(jnp.sin(y) * x)

  x = jnp.asarray(rng.standard_normal(3))
  assert checkpoint_name(x, "a") is x and "name[name=y]" in str(jax.make_jaxpr(g)(x))
  close(jax.grad(lambda x: checkpoint_name(jnp.sin(x), "n"))(0.5), np.cos(0.5))
  close(jax.vmap(lambda v: checkpoint_name(v, "n") * 2)(x), 2 * np.asarray(x))
  want = jax.grad(g)(x)
  offload = cp.save_and_offload_only_these_names(
      names_which_can_be_saved=[], names_which_can_be_offloaded=["y"], offload_src="device",
      offload_dst="pinned_host")
  for policy in (cp.save_only_these_names("y"), cp.save_any_names_but_these("z"), offload,
                 cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("y"))):
    close(jax.grad(jax.checkpoint(g, policy=policy))(x), want)
    close(jax.jit(jax.grad(jax.checkpoint(g, policy=policy)))(x), want)
  # the named value is saved: the linear part no longer recomputes the sin that made it
  saved = _linear_eqns(jax.checkpoint(g, policy=cp.save_only_these_names("y")), x)
  assert saved.count("sin") == 1
  assert _linear_eqns(jax.checkpoint(g, policy=cp.save_only_these_names("q")), x).count("sin") == 2
  assert offload(ad_name_p(), jnp.ones(()), name="y") == Offloadable("device", "pinned_host")
  assert offload(ad_name_p(), jnp.ones(()), name="q") is Recompute
  assert cp.save_and_offload_only_these_names(
      names_which_can_be_saved=["y"], names_which_can_be_offloaded=[], offload_src="device",
      offload_dst="pinned_host")(ad_name_p(), name="y") is Saveable
  with pytest.raises(ValueError, match="should not intersect"):
    cp.save_and_offload_only_these_names(names_which_can_be_saved=["a"],
                                         names_which_can_be_offloaded=["a"], offload_src="device",
                                         offload_dst="pinned_host")


def ad_name_p():
  from nbjax.interpreters.remat import name_p
  return name_p


def test_saved_residuals_names_what_reverse_mode_keeps(capsys):
  from nbjax.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals

  def f(x, y):
    x1, x2 = x
    z = checkpoint_name(jnp.sin(3.), "z")
    return z * ((x1 * x2) * y) * np.array([3.])

  res = saved_residuals(f, (2., 3.), y=4.)
  assert [(a.shape, s.split(" from ")[0] if s.startswith(("named", "output")) else s)
          for a, s in res] == [
      ((1,), "from a constant"), ((), "from the argument x[0]"),
      ((), "from the argument x[1]"), ((), "from the argument y"), ((), "named 'z'"),
      ((), "output of mul")]
  line = f.__code__.co_firstlineno + 3  # where the product is computed, and its column
  assert res[5][1] == f"output of mul from {__file__}:{line}:17 ({f.__qualname__})"  # (JAX's)
  # through jit: the call's inputs and constants are forwarded, its intermediates named by
  # the function (JAX 0.10.2's list, api_test test_saved_residuals_utility_jit)
  res = saved_residuals(jax.jit(f), (2., 3.), y=4.)
  assert [s for _, s in res[:4]] == ["from a constant", "from the argument x[0]",
                                     "from the argument x[1]", "from the argument y"]
  assert all(s.startswith("output of jitted function 'f' from ") for _, s in res[4:])
  assert [a.shape for a, _ in res] == [(1,), (), (), (), (), ()]
  # checkpoint saves only its input; plain reverse mode saves sin's and cos's outputs
  assert [s for _, s in saved_residuals(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))), 2.)] == [
      "from the argument x"]
  print_saved_residuals(lambda x: jnp.sin(x) * jnp.cos(x), 1.)
  lines = capsys.readouterr().out.splitlines()
  assert [ln.split(" from ")[0] for ln in lines] == [
      "f64[] output of sin", "f64[] output of cos", "f64[] output of cos", "f64[] output of sin"]
  # source positions are recorded only while saved_residuals traces
  assert all(e.source_info is None for e in jax.make_jaxpr(f)((2., 3.), 4.).jaxpr.eqns)


def test_saved_residuals_skip_tangent_work_no_output_reads():
  """linearize drops dead tangent work and the residuals only it read, as JAX's: softmax
  without its custom_jvp keeps exp's output and two [1]-shaped values (nn_test
  testSoftmaxGradFlag; JAX 0.10.2 lists exactly these), none of max's tangent that
  stop_gradient discards."""
  from nbjax import nn
  from nbjax.ad_checkpoint import saved_residuals
  x = jnp.array([5.5, 1.3, -4.2, 0.9], dtype=jnp.float32)
  with jax.softmax_custom_jvp(False):
    res = saved_residuals(nn.softmax, x)
    _, f_lin = jax.linearize(nn.softmax, x)
  assert [(a.shape, s.split(" from ")[0]) for a, s in res] == [
      ((4,), "output of exp"), ((1,), "output of broadcast_in_dim"),
      ((1,), "output of integer_pow")]
  with jax.softmax_custom_jvp(True):
    assert sum(a.size for a, _ in saved_residuals(nn.softmax, x)) == 4
  t = jnp.array([1., 0., 0., 0.], dtype=jnp.float32)
  np.testing.assert_allclose(np.asarray(f_lin(t)), np.asarray(jax.jvp(nn.softmax, (x,), (t,))[1]),
                             rtol=1e-6)


def test_matmul_contracts_vectors_and_batches_as_jax():
  """No reshapes around vectors; size-1 batch axes squeezed, equal ones batch dimensions."""
  def prims(a, b):
    return [e.primitive.name for e in jax.make_jaxpr(jnp.matmul)(jnp.ones(a), jnp.ones(b)).eqns]
  assert prims((2, 3), (3,)) == ["dot_general"]
  assert prims((3,), (3, 4)) == ["dot_general"]
  assert prims((5, 2, 3), (5, 3, 4)) == ["dot_general"]
  assert prims((5, 1, 2, 3), (4, 3, 4)) == ["squeeze", "dot_general", "transpose"]
  with pytest.raises(ValueError, match=r"Incompatible shapes for matmul arguments: "
                                       r"\(2, 2, 3\) and \(3, 3, 4\)"):
    jnp.matmul(jnp.ones((2, 2, 3)), jnp.ones((3, 3, 4)))
  rng_ = np.random.default_rng(1)
  for a, b in [((5, 1, 2, 3), (4, 3, 4)), ((3,), (2, 3, 4)), ((2, 1, 3, 4), (1, 5, 4, 2)),
               ((3,), (3,))]:
    x, y = rng_.standard_normal(a), rng_.standard_normal(b)
    close(jnp.matmul(x, y), np.matmul(x, y))
    close(jax.jit(jnp.matmul)(x, y), np.matmul(x, y))


def test_remat_of_jit_reverse_mode_as_jax():
  """JAX's api_test.test_jit_forwarding_correctness (remat=True): a jit call inside a
  checkpoint, with primal and tangent inputs mixed, splits instead of staging whole."""
  import nbjax
  import nbjax.numpy as jnp
  f = nbjax.remat(nbjax.jit(lambda xs: [jnp.sin(xs[0]), xs[1], jnp.exp(xs[2])]))
  (g,) = nbjax.vjp(f, [1., 2., 3.])[1]([1., 1., 1.])
  np.testing.assert_allclose([float(v) for v in g], [np.cos(1.), 1., np.exp(3.)])
  for policy in (None, nbjax.checkpoint_policies.everything_saveable,
                 nbjax.checkpoint_policies.nothing_saveable):
    h = nbjax.remat(nbjax.jit(jnp.sin), policy=policy)
    assert float(nbjax.grad(h)(1.0)) == pytest.approx(np.cos(1.0))
  nbjax.test_util.check_grads(f, ([0., 1., 2.],), order=1, modes=["rev"], atol=1e-3, rtol=1e-3)


def test_linearize_hoists_checkpoint_known_half_and_exposes_linear_jaxpr():
  """linearize evaluates a checkpoint's known half in place (JAX's remat_partial_eval), so a
  saved named value is the output of its ``name`` equation; ``f_jvp.func.args[0]`` is the
  linear jaxpr, as JAX's ``partial(_lift_linearized, jaxpr, ...)`` (api_test
  test_name_pytree, test_remat_checkpoint_dots_with_no_batch_dims)."""
  from nbjax.ad_checkpoint import checkpoint_name, saved_residuals
  policy = jax.checkpoint_policies.save_only_these_names("foo")

  @functools.partial(jax.checkpoint, policy=policy)
  def f(x):
    x = checkpoint_name({"a": jnp.dot(x, x)}, "foo")["a"]
    x = jnp.sin(x)
    return jnp.dot(x, x)

  res = saved_residuals(f, jnp.ones((3, 3)))
  assert [(a.str_short(), s.split(" from ")[0]) for a, s in res] == [
      ("f64[3,3]", "from the argument x"), ("f64[3,3]", "named 'foo'")]
  _, f_jvp = jax.linearize(f, jnp.ones((3, 3)))
  text = str(f_jvp.func.args[0])
  assert (text.count(" sin "), text.count(" cos "), text.count("dot_general")) == (1, 1, 4)


def _counts(f, *args, vjp=False):
  if vjp:
    y, f_vjp = jax.vjp(f, *args)
    t = str(jax.make_jaxpr(f_vjp)(y))
  else:
    t = str(jax.make_jaxpr(jax.linearize(f, *args)[1])(*args))
  return t.count(" sin "), t.count(" cos "), t.count(" dot_general")


def test_policy_applies_inside_cond_scan_and_jit():
  """A checkpoint's policy reaches into cond branches, scan bodies and jit calls (JAX's
  partial_eval_jaxpr_custom rules): counts of recomputed ops in the linear/backward jaxpr
  as JAX 0.10.2's (api_test test_remat_of_cond, test_remat_checkpoint_dots_inside_cond,
  test_remat_checkpoint_dots_outside_scan, test_remat_of_scan_policy,
  test_remat_of_cond_funky_custom_jvp)."""
  from functools import partial
  lax = jax.lax
  f = lambda x: lax.cond(x > 0., lambda c: (jnp.sin(c), jnp.sin(c)), lambda c: (c, 2 * c), x)
  assert _counts(jax.checkpoint(f), 4.) == (0, 2, 0)
  f = lambda x: lax.cond(x > 0., lambda c: jnp.sin(jnp.sin(c)), lambda c: c, x)
  assert _counts(jax.checkpoint(f), 4.) == (1, 2, 0)
  np.testing.assert_allclose(jax.grad(jax.checkpoint(f))(4.), jax.grad(f)(4.), rtol=1e-15)

  def g(W, x):
    for _ in range(3):
      x = jnp.sin(jnp.dot(x, W))
    return x
  W = jnp.asarray(rng.normal(size=(4, 4)))
  h = jax.checkpoint(lambda W: lax.cond(W.sum() > -9, partial(g, W), lambda x: x, jnp.ones(4)),
                     policy=cp.checkpoint_dots)
  assert _counts(h, W, vjp=True) == (2, 3, 5)
  s = lambda W: lax.scan(lambda x, _: (g(W, x), None), jnp.ones(4), None, length=2)[0]
  assert _counts(jax.checkpoint(s, policy=cp.checkpoint_dots), W, vjp=True) == (3, 3, 6)
  np.testing.assert_allclose(jax.jacrev(jax.checkpoint(s, policy=cp.checkpoint_dots))(W),
                             jax.jacrev(s)(W), rtol=1e-12)
  save_cos = lambda p, *_, **__: str(p) == "cos"
  h = jax.checkpoint(lambda x: lax.scan(lambda c, _: (jnp.sin(c), jnp.sin(c)), x, None, length=3),
                     policy=save_cos)
  assert _counts(h, 4.) == (0, 0, 0)

  @jax.custom_jvp
  def sin(x):
    return jnp.sin(x)

  @sin.defjvp
  def sin_jvp(primals, tangents):
    (x,), (xdot,) = primals, tangents
    y, c = jax.jit(lambda: (jnp.sin(x), jnp.cos(x)))()
    return y, c * xdot
  for pol, want in [(save_cos, (0, 0, 0)), (lambda p, *_, **__: str(p) == "sin", (0, 1, 0)),
                    (cp.nothing_saveable, (0, 1, 0))]:
    k = jax.checkpoint(lambda x: lax.cond(x > 0, sin, lambda x: x, x), policy=pol)
    assert _counts(k, 4.) == want
    assert float(jax.grad(k)(4.)) == float(np.cos(4.))


def test_policy_applies_inside_a_recomputed_cond():
  """A known cond the backward pass needs is split by the policy too (its branches save what
  the policy allows): counts of recomputed ops as JAX 0.10.2's (api_test
  test_remat_of_cond_funky_custom_jvp2)."""
  lax = jax.lax

  def cond_apply(f, x):
    return lax.cond(x.sum() > -jnp.inf, f, lambda x: x, x)

  @jax.custom_jvp
  def sin(x):
    return jnp.sin(x)

  @sin.defjvp
  def sin_jvp(primals, tangents):
    (x,), (xdot,) = primals, tangents
    y, c = lax.cond(x > -jnp.inf, lambda xs: (jnp.sin(xs[0]), jnp.cos(xs[1])), lambda xs: xs,
                    (x, x))
    return y, c * xdot
  for pol, want in [(lambda p, *_, **__: str(p) == "cos", (0, 0)),
                    (lambda p, *_, **__: str(p) == "sin", (0, 1)),
                    (cp.everything_saveable, (0, 0)), (cp.nothing_saveable, (0, 1))]:
    f = jax.checkpoint(lambda x: cond_apply(sin, x), policy=pol)
    assert _counts(f, 4.)[:2] == want
    assert float(jax.grad(f)(4.)) == float(np.cos(4.))


def test_backward_pass_is_a_checkpoint_call_behind_a_barrier():
  """Reverse mode of a checkpoint binds a differentiated checkpoint call (JAX's
  remat_transpose) whose lowering passes its inputs through an optimization barrier under
  prevent_cse, so XLA cannot merge the recomputation with the forward pass (api_test
  test_no_cse_widget_on_primals); prevent_cse=False has none, nor has the forward pass."""
  lax = jax.lax

  @jax.checkpoint
  def g(x):
    return lax.sin(lax.sin(x)), 3.

  def f(x):
    return g(x)[0]
  assert "optimization_barrier" in jax.jit(jax.grad(f)).lower(2.).as_text()
  assert "optimization_barrier" not in jax.jit(f).lower(2.).as_text()
  h = jax.checkpoint(lambda x: lax.sin(lax.sin(x)), prevent_cse=False)
  assert "optimization_barrier" not in jax.jit(jax.grad(h)).lower(2.).as_text()
  eqns = jax.make_jaxpr(jax.grad(f))(2.).eqns
  assert [e.primitive.name for e in eqns][-1] == "remat2"
  assert eqns[-1].params["differentiated"] is True
  want = np.cos(np.sin(2.)) * np.cos(2.)
  np.testing.assert_allclose([jax.grad(f)(2.), jax.jit(jax.grad(f))(2.)], [want, want],
                             rtol=1e-15)


def test_saved_residuals_are_rounded_to_their_dtype_where_made():
  # api_test RematTest.test_excess_precision_hell: XLA computes a bfloat16 dot in float32 and
  # keeps that precision when the dot feeds a convert in the same fusion; JAX rounds every
  # floating residual the known part reads again (reduce_precision), so the primal output
  # and the backward pass see the same value
  @jax.custom_vjp
  def dot(x):
    return jnp.dot(x, x)
  dot.defvjp(lambda x: (dot(x), None), lambda _, g: (g,))

  @jax.custom_vjp
  def foo(x):
    return jnp.float32(1.) * x.astype("float32")
  foo.defvjp(lambda x: (foo(x), x), lambda x, _: (jnp.float32(1.) * x.astype("float32"),))

  f = jax.jit(jax.remat(lambda x: foo(dot(x)), policy=lambda *_, **__: True))
  x = (jnp.bfloat16(1) + jnp.finfo("bfloat16").eps) * jnp.eye(2, dtype="bfloat16")
  y, vjp = jax.vjp(f, x)
  y_, = vjp(jnp.ones_like(y))
  want = np.diag([1.015625, 1.015625]).astype(np.float32)  # JAX's (the unrounded: 1.015686)
  np.testing.assert_array_equal(np.asarray(y), want)
  np.testing.assert_array_equal(np.asarray(y_), want)
  # JAX's known part: only residuals another equation reads are rounded, after their maker
  g = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)) * x, policy=cp.everything_saveable)
  jaxpr = jax.make_jaxpr(lambda x: jax.vjp(g, x))(1.0).jaxpr
  assert [e.primitive.name for e in jaxpr.eqns] == [
      "sin", "cos", "sin", "reduce_precision", "cos", "mul"]
  assert jaxpr.eqns[3].params == dict(exponent_bits=11, mantissa_bits=52)
  assert jaxpr.eqns[3].invars[0] is jaxpr.eqns[2].outvars[0]
  assert jaxpr.eqns[5].invars[0] is jaxpr.eqns[3].outvars[0]
  # saved_residuals names the rounded residual by what made it (JAX looks through the
  # reduce_precision): cos, sin, cos in equation order
  res = jax.ad_checkpoint.saved_residuals(g, 1.0)
  assert [s.split(" from ")[0] for _, s in res] == [
      "from the argument x", "output of cos", "output of sin", "output of cos"]


@pytest.mark.parametrize("pc, want_cse, want_barriers", [
    ((False, True), (False, True, True), ["%1, %9", "%arg2, %11#1"]),
    ([True, False], (True, False, True), ["%arg1, %9", "%arg0, %11#1"]),
    ((False, False), (False, False, True), ["%9", "%11#1"]),
    (True, True, ["%arg1, %1, %9", "%arg0, %arg2, %11#1"])])
def test_prevent_cse_per_argument(pc, want_cse, want_barriers):
  # api_test RematTest.test_remat_partial_cse_prevention(_all_false, _pytree): a tuple
  # prevent_cse (a prefix of the arguments) bars only the flagged inputs; jvp bars the
  # tangents, partial eval the residuals made inside, the transpose the cotangents; a known
  # input forwarded keeps its flag (JAX's params and barriers)
  @functools.partial(jax.remat, prevent_cse=pc)
  def layer(W, x):
    return x @ W + jnp.array([1.0, 2.0, 3.0])

  def loss(Ws, x):
    for W in Ws:
      x = layer(W, x)
    return jnp.sum(x ** 2)
  Ws, x = [jnp.ones((3, 3)) for _ in range(2)], jnp.ones(3)
  eqns = jax.make_jaxpr(jax.grad(loss, (0, 1)))(Ws, x).eqns
  assert [e.params["prevent_cse"] for e in eqns if e.primitive.name == "remat2"] == [
      want_cse, want_cse]
  txt = jax.jit(jax.grad(loss, (0, 1))).lower(Ws, x).as_text()
  barriers = [ln.split("optimization_barrier ")[1].split(" :")[0]
              for ln in txt.splitlines() if "optimization_barrier" in ln]
  assert barriers == want_barriers
  def plain(Ws, x):
    for W in Ws:
      x = x @ W + jnp.array([1.0, 2.0, 3.0])
    return jnp.sum(x ** 2)
  close(jax.jit(jax.grad(loss, (0, 1)))(Ws, x), jax.grad(plain, (0, 1))(Ws, x))
  with pytest.raises(TypeError, match=r"prevent_cse must be a bool or tuple of bools, got "
                     r"type\(prevent_cse\)=<class 'int'>"):
    jax.checkpoint(lambda x: x, prevent_cse=1)


def test_dce_prunes_inside_checkpoint():
  # JAX's remat_dce (api_test DCETest.test_dce_jaxpr_scan_overpruning): unused outputs and
  # inputs leave the checkpoint call and its jaxpr; a tuple prevent_cse keeps the used flags
  from nbjax.interpreters import partial_eval as pe
  g = jax.checkpoint(lambda x, y, z: (jnp.sin(x) * y, jnp.cos(z)), prevent_cse=(True, False, True))
  jaxpr = jax.make_jaxpr(g)(1., 2., 3.).jaxpr
  new, used = pe.dce_jaxpr(jaxpr, [True, False])
  assert used == [True, True, False]
  e, = new.eqns
  assert [x.primitive.name for x in e.params["jaxpr"].jaxpr.eqns] == ["sin", "mul"]
  assert len(e.invars) == 2 and len(e.outvars) == 1
  assert e.params["prevent_cse"] == (True, False)
  assert pe.dce_jaxpr(jaxpr, [False, False])[0].eqns == []
  np.testing.assert_allclose(jax.jaxpr.eval_jaxpr(new, [], 1., 2.)[0], np.sin(1.) * 2.)


@pytest.mark.needs_guard  # (counts one call's logs: NBJAX_REPLAY_CHECK calls grad thrice)
def test_partial_eval_logs_saved_residuals(caplog):
  # api_test RematTest.test_remat_residual_logging (JAX's log, at DEBUG; WARNING with
  # jax_log_checkpoint_residuals)
  import logging

  def f(x):
    return jnp.cos(jnp.sin(x).sum())
  x = jnp.arange(3.)

  def logged(g, level=logging.DEBUG):
    caplog.clear()
    with caplog.at_level(level, logger="nbjax.interpreters.remat"):
      jax.grad(g)(x)
    return [r.getMessage() for r in caplog.records if r.levelno >= level]
  assert logged(jax.remat(f)) == [
      "remat-decorated function saving inputs with shapes:\n  float64[3]\n"]
  out, = logged(jax.remat(f, policy=lambda *_, **__: True))
  assert out.startswith("remat-decorated function saving these intermediates:\n"
                        "  float64[3] from output of cos from ")
  assert "\n  float64[] from output of sin from " in out
  out, = logged(jax.remat(f, policy=lambda p, *_, **__: str(p) == "cos"))
  assert out.startswith("remat-decorated function saving inputs with shapes:\n  float64[3]\n"
                        "and saving these intermediates:\n  float64[3] from output of cos from ")
  assert " sin " not in out
  assert logged(jax.remat(f), logging.WARNING) == []
  jax.config.update("jax_log_checkpoint_residuals", True)
  try:
    assert len(logged(jax.remat(f), logging.WARNING)) == 1
  finally:
    jax.config.update("jax_log_checkpoint_residuals", False)


@pytest.mark.parametrize("policy", [cp.nothing_saveable, cp.everything_saveable])
def test_grad_of_checkpointed_scan_over_jit_closing_over_an_array(policy):
  """A jitted scan body closing over a NumPy array, the scan under checkpoint (JAX's
  lax_control_flow_test testScanGrad, impl=new_checkpoint, jit_f): splitting the body's jit
  equation forwarded the array constant itself as an operand of the staged equation, which
  broke the next partial evaluation (TypeError: unhashable type: 'ArrayImpl')."""
  from nbjax import lax
  d = np.array([0.3, -0.2], np.float32)

  def f(c, a):
    b = jnp.sum(jnp.sin(a)) + jnp.sum(jnp.sin(c)) + jnp.sum(jnp.sin(d))
    return jnp.sin(c * b), b

  def loss(body, c, xs):
    return lax.scan(body, c, xs)[0].sum()

  c = np.linspace(0.1, 0.4, 4).astype(np.float32)
  xs = np.linspace(-1, 1, 15).astype(np.float32).reshape(5, 3)
  want = jax.grad(functools.partial(loss, f))(c, xs)
  got = jax.grad(jax.checkpoint(functools.partial(loss, jax.jit(f)), policy=policy))(c, xs)
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
