"""Reverse mode through the public API: ``linearize``, ``vjp``, ``grad``, ``value_and_grad``,
``jacrev``/``jacobian``, ``hessian``, ``linear_transpose``, ``stop_gradient``: values (seed
003 Part 4's printed results and its compositionality stress test), pytrees, argnums, aux,
dtypes and weak types, JAX's errors, compositions with jit/vmap/jvp, and the eager replay of
repeated calls against the per-call path."""
import functools
import re

import numpy as np
import pytest

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.config import config
from nbjax.interpreters import ad

sin, cos, jit, jvp, grad, vjp, linearize = jnp.sin, jnp.cos, jax.jit, jax.jvp, jax.grad, jax.vjp, jax.linearize
rng = np.random.default_rng(0)


def close(*vals, rtol=1e-12, atol=1e-12):
  for a, b in zip(vals[:-1], vals[1:]):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------------ seed 003, Part 4


def test_seed_linearize():
  y, sin_lin = linearize(sin, 3.)
  close(y, 0.1411200080598672)
  close(sin_lin(1.), -0.9899924966004454)


def _seed_f():
  @jit
  def f(x):
    y = sin(x) * 2.
    z = -y + x
    return z
  return f


def test_seed_linearize_of_jit():
  y, f_lin = linearize(_seed_f(), 3.)
  close(y, 2.7177599838802657)
  close(f_lin(1.), 2.979984993200891)

  @jit
  def g(x, y):
    return cos(x) + y

  @jit
  def f(x):
    return g(x, sin(x) * 2.)

  y, f_lin = linearize(f, 3.)
  close(y, -0.7077524804807109)
  close(f_lin(1.), -2.121105001260758)


def test_seed_vjp_and_grad():
  y, f_vjp = vjp(sin, 3.)
  assert isinstance(f_vjp(1.), tuple)
  close(f_vjp(1.)[0], -0.9899924966004454)

  def f(x):
    return -(sin(x) * 2.) + x
  close(grad(f)(3.), 2.979984993200891)

  @jit
  def g(x):
    return cos(x) * 2.

  @jit
  def h(x):
    return g(x * 2.)
  close(grad(h)(3.), 1.1176619927957034)


def test_seed_compositionality_stress():
  def f(x):
    @jit
    def bar(y):
      def baz(w):
        q = jit(lambda x: y)(x)
        q = q + jit(lambda: y)()
        q = q + jit(lambda y: w + y)(y)
        q = jit(lambda w: jit(sin)(x) * y)(1.0) + q
        return q
      p, t = jvp(baz, (x + 1.0,), (y,))
      return t + (x * p)
    return bar(x)

  close(f(3.), jit(f)(3.), jvp(f, (3.,), (5.,))[0], jvp(jit(f), (3.,), (5.,))[0])
  close(grad(f)(3.), grad(jit(f))(3.), jit(grad(jit(f)))(3.), jvp(f, (3.,), (1.,))[1],
        jvp(jit(f), (3.,), (1.,))[1], rtol=1e-10)
  close(grad(grad(f))(3.), grad(grad(jit(f)))(3.), grad(jit(grad(f)))(3.),
        jit(grad(grad(f)))(3.), jvp(grad(f), (3.,), (1.,))[1],
        jvp(jit(grad(f)), (3.,), (1.,))[1], rtol=1e-10)


# ------------------------------------------------------------------ values


def test_grad_chain_matches_closed_form():
  f = lambda x: jnp.sin(jnp.cos(x) * x + 1) * 2 - x
  x = 0.7
  u = np.cos(x) * x + 1
  want = np.cos(u) * 2 * (-np.sin(x) * x + np.cos(x)) - 1
  close(grad(f)(x), want)
  v, g = jax.value_and_grad(f)(x)
  close(v, np.sin(u) * 2 - x)
  close(g, want)


def test_grad_pytree_argnums_and_aux():
  params = {"w": jnp.asarray(rng.standard_normal((3, 2))), "b": jnp.asarray(rng.standard_normal(2))}
  x = jnp.asarray(rng.standard_normal((5, 3)))

  def loss(p, x, scale=1.0):
    y = jnp.tanh(x @ p["w"] + p["b"])
    return scale * jnp.sum(y ** 2), {"y": y}

  (v, aux), g = jax.value_and_grad(loss, has_aux=True)(params, x, scale=2.0)
  w, b = np.asarray(params["w"]), np.asarray(params["b"])
  y = np.tanh(np.asarray(x) @ w + b)
  d = 2.0 * 2 * y * (1 - y ** 2)
  close(v, 2.0 * np.sum(y ** 2))
  close(aux["y"], y)
  close(g["w"], np.asarray(x).T @ d, rtol=1e-10)
  close(g["b"], d.sum(0), rtol=1e-10)
  gp, gx = grad(lambda p, x: loss(p, x)[0], argnums=(0, 1))(params, x)
  close(gx, (d / 2) @ w.T, rtol=1e-10)
  gx2 = grad(lambda p, x: loss(p, x)[0], argnums=-1)(params, x)
  close(gx2, gx)


def test_grad_of_python_scalar_is_weak_and_dtypes_follow_inputs():
  g = grad(lambda x: x * x)(3.0)
  assert g.weak_type and float(g) == 6.0
  x32 = jnp.float32(3.0)
  g32 = grad(lambda x: jnp.sin(x) * 2.0)(x32)
  assert g32.dtype == np.float32 and not g32.weak_type
  gi = grad(lambda x, n: x * n, allow_int=True, argnums=(0, 1))(2.0, 3)
  assert gi[1].dtype == jax.dtypes.float0 and float(gi[0]) == 3.0


def test_grad_complex_holomorphic_and_real_output():
  z = 1.0 + 2.0j
  close(grad(lambda z: z * z, holomorphic=True)(z), 2 * z)
  # real-valued function of a complex input: JAX's convention, conj of the Wirtinger gradient x2
  close(grad(lambda z: jnp.real(z * jnp.conj(z)))(z), 2 * np.conj(z))


def test_vjp_multiple_outputs_and_cotangent_checks():
  (a, b), f_vjp = vjp(lambda x, y: (jnp.sin(x), jnp.cos(y)), 0.5, 1.0)
  xb, yb = f_vjp((-0.7, 0.3))
  close(xb, -0.7 * np.cos(0.5))
  close(yb, -0.3 * np.sin(1.0))
  with pytest.raises(ValueError, match="unexpected tree structure"):
    f_vjp((1.0,))
  with pytest.raises(ValueError, match=r"(?s)^unexpected tree structure\..*out was a tuple of "
                     "length 2 in the original output, but a tuple of length 1 here"):
    f_vjp((1.0,))
  _, f_vjp = vjp(jnp.sin, jnp.ones(3))
  with pytest.raises(ValueError, match=re.escape(
      "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got float64[4], but "
      "expected float64[3] because the corresponding output of the differentiated function had "
      "JAX type float64[3]")):
    f_vjp(jnp.ones(4))
  with pytest.raises(ValueError, match=r"got float32\[3\], but expected float64\[3\]"):
    f_vjp(jnp.ones(3, jnp.float32))


def test_vjp_and_linearize_functions_as_jax():
  def f(x):
    return x, x
  _, f_vjp = vjp(f, 1.0)
  with pytest.raises(TypeError, match="applied to f was called with 2 arguments"):
    f_vjp(1.0, 1.0)
  y, f_jvp = linearize(lambda x: 2 * x, 3.0)  # a pytree (a Partial): it passes through jit
  close(jit(lambda t, f: f(t))(y, f_jvp), 12.0)
  g = lambda x: vjp(lambda x: (x ** 3, [x ** 2]), x, has_aux=True)[2][0]
  close(jit(g)(4.0), 16.0)  # aux traced by an enclosing jit is no leak
  close(jit(lambda x: jax.jacrev(lambda x: (x ** 3, x ** 2), has_aux=True)(x)[1])(4.0), 16.0)
  with pytest.raises(TypeError, match="is not a valid JAX type"):
    grad(lambda x: x)(np.array([1, 2, 3], dtype=object))
  import types
  spec = types.SimpleNamespace(shape=(3,), dtype=np.dtype(np.float32))  # any shape + dtype
  z, = jax.linear_transpose(lambda x: 2 * x, spec)(jnp.arange(3, dtype=np.float32))
  assert z.dtype == np.float32
  close(z, [0., 2., 4.])


def test_linearize_tangent_checks_as_jax():
  _, f_jvp = linearize(lambda x, y: x * y, 2.0, 3.0)
  with pytest.raises(TypeError, match=re.escape("expected PyTreeDef((*, *)), got PyTreeDef((*,))")):
    f_jvp(1.0)
  _, f_jvp = linearize(lambda x: x * 2, 1)  # an integer primal takes a float0 tangent
  with pytest.raises(ValueError, match=re.escape(
      "Got tangent aval float64[] for primal aval ~int64[] but expected ~float0[].")):
    f_jvp(jnp.ones(()))
  assert f_jvp(np.zeros((), jax.dtypes.float0)).dtype == jax.dtypes.float0
  _, f_jvp = linearize(jnp.sin, jnp.ones(3))
  with pytest.raises(ValueError, match="inconsistent with the original primal values:\nGot "
                     r"tangent aval float32\[3\] for primal aval float64\[3\]"):
    f_jvp(jnp.ones(3, jnp.float32))


def test_vjp_function_is_a_pytree_through_jit():
  x = jnp.arange(3.0)
  _, f_vjp = vjp(lambda x: jnp.sin(x) * x, x)
  ct = jnp.ones(3)
  close(jit(lambda f, c: f(c))(f_vjp, ct)[0], f_vjp(ct)[0])


def test_vjp_input_saved_residuals():
  # api_test InputSavedVJPTest (JAX 0.10's VJP object): the primal inputs the backward pass
  # reads are in args_res (NotNeeded() for the others), replaceable before a call; the
  # other residuals are opaque_residuals
  x, w = jnp.ones((3, 4)), jnp.ones((4, 4))
  y, f_vjp = vjp(lambda x, w: 2. * ((1. * x) @ w), x, w)
  assert isinstance(f_vjp.args_res[0], jax.api.NotNeeded) and f_vjp.args_res[1] is w
  one, xs, two = f_vjp.opaque_residuals  # (JAX's too: the scalars are residuals)
  assert (float(one), float(two), xs.shape) == (1., 2., (3, 4))
  f_vjp.args_res[1] = None
  f_vjp.args_res[1] = w
  x_ct, w_ct = f_vjp(jnp.ones_like(y))
  close(x_ct, 2. * np.ones((3, 4)) @ np.ones((4, 4)).T)
  close(w_ct, 2. * np.ones((3, 4)).T @ np.ones((3, 4)))
  with pytest.raises(ValueError, match="unexpected JAX type"):
    f_vjp(jnp.ones((2, 4)))
  x3 = jnp.arange(3.)
  _, f_vjp = vjp(lambda a, b: a * b, x3, x3)  # an input passed twice: read at both places
  assert f_vjp.args_res[0] is x3 and f_vjp.args_res[1] is x3
  _, f_vjp = vjp(lambda a, b: a * b, x3, 2.)  # a Python scalar's residual is opaque
  assert f_vjp.args_res[0] is x3 and isinstance(f_vjp.args_res[1], jax.api.NotNeeded)
  assert [float(r) for r in f_vjp.opaque_residuals] == [2.]
  _, f_vjp = vjp(jnp.sin, 3.)  # a scalar residual is one too
  assert isinstance(f_vjp.args_res[0], jax.api.NotNeeded) and f_vjp.opaque_residuals
  close(f_vjp(1.)[0], np.cos(3.))
  _, f_vjp = vjp(lambda d: d["hi"] * d["bye"], {"hi": 2., "bye": 3.})
  close(f_vjp.args_res[0], (3., 2.))  # containers as tuples, in flattening order
  f_vjp.args_res = [{"hi": 4., "bye": 5.}]
  ct, = f_vjp(1.)
  close(ct["hi"], 5.) and close(ct["bye"], 4.)

  @jit
  def g():
    y, f_vjp = vjp(lambda a, b: a * b, 2., 3.)
    f_vjp.args_res = [None, None]
    return y, f_vjp
  _, f_vjp = g()
  f_vjp.args_res = [2., 3.]
  close(jit(lambda f: f(1.))(f_vjp), (3., 2.))


def test_vjp_with_refs_dont_want():
  # api_test test_vjp3_dont_want(_bilinear): an input marked DontWant() gets DidntWant() and
  # its cotangent is not computed
  x = y = jnp.arange(3.)
  z, f_vjp = vjp(lambda x, y: x * y, x, y)
  ones = jnp.ones_like(z)
  f_vjp = f_vjp.with_refs(jax.ad.DontWant(), jax.ad.GradValue())
  g = jit(lambda: f_vjp(ones))
  x_ct, y_ct = g()
  assert x_ct == jax.ad.DidntWant()
  close(y_ct, x)
  assert len(g.trace().jaxpr.eqns) == 1
  _, f_vjp = vjp(jit(lambda x, y: x + y), x, y)
  a, b = f_vjp.with_refs(jax.ad.DontWant(), jax.ad.DontWant())(jnp.ones(3))
  assert isinstance(a, jax.ad.DidntWant) and isinstance(b, jax.ad.DidntWant)
  assert jax.tree_util.tree_leaves(a) == []


def test_vjp_jaxpr_is_the_linear_jaxpr():
  # JAX 0.10.2's VJP.jaxpr (pmap_test, scaled_matmul tests read it): the jaxpr the backward
  # pass transposes, one input per differentiated primal, residuals (cos(x) here) as consts
  _, f_vjp = vjp(lambda x, y: jnp.sin(x) * y, 0.5, 2.0)
  j = f_vjp.jaxpr
  assert len(j.invars) == 2 and [str(e.primitive) for e in j.eqns].count("cos") == 0
  assert [str(e.primitive) for e in j.eqns].count("mul") == 3


def test_jacrev_matches_jacfwd_on_pytrees():
  def f(d):
    return {"s": jnp.sin(d["a"]) * d["b"][0], "t": jnp.outer(d["a"], d["b"])}
  d = {"a": jnp.asarray(rng.standard_normal(3)), "b": jnp.asarray(rng.standard_normal(2))}
  jr, jf = jax.jacrev(f)(d), jax.jacfwd(f)(d)
  for k1 in ("s", "t"):
    for k2 in ("a", "b"):
      assert jr[k1][k2].shape == jf[k1][k2].shape
      close(jr[k1][k2], jf[k1][k2])
  assert jax.jacobian(f)(d)["t"]["a"].shape == (3, 2, 3)


def test_hessian_matches_jacfwd_jacfwd():
  g = lambda x: x[0] ** 3 - 2 * x[0] * x[1] - x[1] ** 6
  x = jnp.asarray([1., 2.])
  close(jax.hessian(g)(x), [[6., -2.], [-2., -480.]])
  close(jax.hessian(g)(x), jax.jacfwd(jax.jacfwd(g))(x))


def test_linear_transpose():
  f_t = jax.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, 1.0, 1.0)
  a, b = f_t(1.0)
  close(a, 0.5)
  close(b, -0.5)
  A = rng.standard_normal((3, 4))
  f = lambda x: jnp.asarray(A) @ x
  x_t = jax.linear_transpose(f, jax.ShapeDtypeStruct((4,), np.float64))
  ct = rng.standard_normal(3)
  close(x_t(jnp.asarray(ct))[0], A.T @ ct)
  with pytest.raises(TypeError, match="linear_transpose only supports"):
    jax.linear_transpose(lambda x: x.astype(jnp.int32), 1.0)
  with pytest.raises(TypeError, match=re.escape("expected (ShapedArray(float64[3]),) but got")):
    x_t(jnp.ones(4))
  # a jitted function's boolean output that the linear function drops is not transposed
  g = jax.jit(lambda x: (x * 2., x > 0))
  close(jax.linear_transpose(lambda x: g(x)[0], 1.)(1.)[0], 2.)
  close(grad(lambda x: g(x)[0])(1.), 2.)
  # real/imag transpose a Python float cotangent (JAX's lax_autodiff_test)
  assert jax.linear_transpose(lambda x: x.real, 1.j)(1.)[0] == 1.
  assert jax.linear_transpose(lambda x: x.imag, 1.j)(1.)[0] == -1.j


def test_jvp_rules_keep_weak_types_as_jax():
  """A rule's constants are weak Python scalars when the primal is a weak scalar (JAX's
  ``_const``), so the tangent of a weak input stays weak; pow casts to a strong jacobian."""
  def tangent(f, x=2.):
    return jax.jvp(f, (x,), (1.,))[1]
  for f in (jnp.sqrt, jnp.exp2, jnp.cbrt, jnp.log1p, jnp.tanh, jnp.square, jnp.reciprocal,
            lambda x: jnp.power(x, 3)):
    assert tangent(f).weak_type, f
  for f in (lambda x: x ** 2.5, lambda x: jnp.float_power(x, 2.)):
    assert not tangent(f).weak_type
  assert not tangent(jnp.sqrt, jnp.float64(2.)).weak_type


# weak types of grad, jit(grad) and grad(grad) at a Python float, from JAX 0.10.2: the
# gradient is typed as the backward pass made it (strong constants make it strong), not cast
# to the input's weak type
_GRAD_WEAK = [
    (jnp.sin, "WWW"), (jnp.log2, "SSS"), (jnp.log10, "SSS"), (lambda x: x ** 2.5, "SSW"),
    (lambda x: x * x, "WWW"), (jnp.exp2, "WWW"), (jnp.abs, "WWW"), (jax.nn.relu, "WWW"),
    (lambda x: jnp.maximum(x, 0.5), "WWW"), (lambda x: jnp.where(x > 0, x, 0.), "WWW"),
    (lambda x: jnp.sum(jnp.array([x, x])), "WWW"), (lambda x: jnp.mean(x * jnp.ones(3)), "WWW"),
    (jax.nn.gelu, "WWW"), (lambda x: jax.scipy.special.logsumexp(jnp.stack([x, x])), "SSS"),
    (jax.nn.softplus, "WWW"), (lambda x: jnp.hypot(x, 2.), "WWW"),
]


@pytest.mark.parametrize("k", range(len(_GRAD_WEAK)))
def test_grad_weak_types_follow_the_backward_pass_as_jax(k):
  f, want = _GRAD_WEAK[k]
  g = grad(f)
  got = "".join("W" if r.weak_type else "S" for r in (g(0.7), jit(g)(0.7), grad(g)(0.7)))
  assert got == want
  # the tape's compiled backward pass (a structure's second sight) types it as the first
  assert g(0.7).weak_type == (want[0] == "W")
  # a symbolic-zero tangent is instantiated with the primal's weak type, as JAX's zeros
  assert jax.jvp(jax.grad(jnp.abs), (0.7,), (1.,))[1].weak_type


def test_stop_gradient():
  close(grad(lambda x: lax.stop_gradient(x) ** 2 + x)(3.0), 1.0)
  close(grad(lambda x: jax.stop_gradient(x * x) * x)(3.0), 9.0)
  tree = jax.stop_gradient({"a": jnp.ones(2), "b": 1})
  assert tree["b"] == 1
  # every level of nested differentiation stops
  close(grad(grad(lambda x: lax.stop_gradient(x) * x * x))(2.0), 4.0)
  assert "stop_gradient" in str(jax.make_jaxpr(lax.stop_gradient)(1.0))


def test_custom_jvp_nondiff_argument_traced_by_grad():
  # nondiff arguments are stop_gradient-ed; a grad-traced one must come off the tape, not leak
  @functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
  def k(x, y):
    return x * y
  k.defjvp(lambda y, p, t: (k(p[0], y), t[0] * y))
  close(grad(lambda x: k(x, x))(2.0), 2.0)
  close(grad(lambda x: k(x * 2, x + 1.0))(2.0), 6.0)
  close(jit(grad(lambda x: k(x, x)))(2.0), 2.0)


def test_float_and_array_conversion_of_tracers_error_as_jax():
  # bool/int/index of a concrete tracer work (Python control flow); float, complex and
  # __array__ raise even then, as in JAX: they would silently drop the derivative
  close(grad(lambda x: x * int(x) if x > 0 else -x)(2.0), 2.0)
  with pytest.raises(jax.errors.ConcretizationTypeError, match=r"x.astype\(float\)"):
    grad(lambda x: float(x) * x)(2.0)
  with pytest.raises(jax.errors.ConcretizationTypeError):
    jvp(lambda x: complex(x), (2.0,), (1.0,))
  with pytest.raises(jax.errors.TracerArrayConversionError, match="__array__"):
    grad(lambda x: np.asarray(x) * x)(2.0)
  with pytest.raises(jax.errors.TracerArrayConversionError):
    vjp(lambda x: np.sin(x), 2.0)


def test_jacobians_of_integer_inputs_and_outputs_are_integer_zeros():
  j = jax.jacrev(lambda x: x * 2.0, allow_int=True)(jnp.arange(3))
  assert j.dtype == jnp.int64 and j.shape == (3, 3) and not np.asarray(j).any()
  j = jax.jacfwd(lambda x: jnp.round(x).astype(int))(jnp.ones(3))
  assert j.dtype == jnp.int64 and j.shape == (3, 3) and not np.asarray(j).any()
  msg = "must have value greater than or equal to -len\\(args\\) and less than len\\(args\\)"
  for jac in (jax.jacfwd, jax.jacrev):
    close(jac(lambda a, b: a * b, argnums=-1)(jnp.ones(2), 2 * jnp.ones(2)), np.eye(2))
    for n in (2, -3):
      with pytest.raises(ValueError, match=msg):
        jac(lambda a, b: a * b, argnums=n)(jnp.ones(2), jnp.ones(2))


# ------------------------------------------------------------------ compositions


def _mlp(p, x):
  h = jnp.tanh(x @ p["w1"] + p["b1"])
  return jnp.sum((h @ p["w2"]) ** 2)


def _params():
  r = np.random.default_rng(3)
  return {"w1": jnp.asarray(r.standard_normal((4, 5))), "b1": jnp.asarray(r.standard_normal(5)),
          "w2": jnp.asarray(r.standard_normal((5, 1)))}


def test_per_example_gradients_vmap_of_grad_vs_loop():
  p, xs = _params(), jnp.asarray(rng.standard_normal((6, 4)))
  per = jax.vmap(grad(_mlp), in_axes=(None, 0))(p, xs)
  for i in range(6):
    gi = grad(_mlp)(p, xs[i])
    for k in p:
      close(per[k][i], gi[k], rtol=1e-10)


def test_grad_of_jit_and_jit_of_grad():
  p, x = _params(), jnp.asarray(rng.standard_normal((3, 4)))
  g0 = grad(_mlp)(p, x)
  for g in (jit(grad(_mlp))(p, x), grad(jit(_mlp))(p, x)):
    for k in p:
      close(g[k], g0[k], rtol=1e-10)


def test_python_control_flow_on_primal_values():
  f = lambda x: x ** 2 if x > 0 else 0.
  close(grad(f)(3.), 6.)
  close(grad(f)(-3.), 0.)


# ------------------------------------------------------------------ errors


def test_errors_as_jax():
  with pytest.raises(TypeError, match=r"Gradient only defined for scalar-output functions\. "
                     r"Output had shape: \(3,\)\."):
    grad(lambda x: x)(np.zeros(3))
  with pytest.raises(TypeError, match="Gradient only defined for scalar-output functions"):
    grad(lambda x: (x, x))(1.0)
  with pytest.raises(TypeError, match=r"grad requires real- or complex-valued inputs \(input "
                     r"dtype that is a sub-dtype of np.inexact\), but got int"):
    grad(lambda x: x * 1.0)(1)
  with pytest.raises(TypeError, match="grad requires real-valued outputs"):
    grad(lambda x: x * 1j)(1.0)
  with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
    grad(lambda x: x, holomorphic=True)(1.0)
  with pytest.raises(TypeError, match=r"differentiating with respect to argnums=2 requires at "
                     "least 3 positional arguments"):
    grad(lambda x, y: x, argnums=2)(1.0, 2.0)
  with pytest.raises(TypeError, match="expected function with aux output to return a two-element "
                     "tuple, but got type"):
    grad(lambda x: x, has_aux=True)(1.0)
  with pytest.raises(TypeError, match="aux output to return a two-element tuple"):
    vjp(lambda x: (x, x, x), 1.0, has_aux=True)
  with pytest.raises(TypeError, match=r"^Gradient only defined for scalar-output functions. "
                     r"Output had shape: \(1,\).$"):
    grad(lambda x: x)(np.ones(1))
  with pytest.raises(ValueError, match="must have value greater than or equal to -len"):
    grad(lambda x, y: x, argnums=-3)(1.0, 2.0)
  close(grad(lambda x, y: x * y, argnums=-1)(2.0, 3.0), 2.0)


def test_missing_transpose_rule_is_named():
  p = jax.core.Primitive("my_linear")
  p.def_impl(lambda x: 2 * np.asarray(x))
  p.def_abstract_eval(lambda a: a)
  ad.primitive_jvps[p] = lambda ps, ts: (p.bind(*ps), p.bind(*ts))
  with pytest.raises(NotImplementedError, match="Transpose rule .* for 'my_linear' not implemented"):
    grad(lambda x: p.bind(x))(1.0)


def test_leaked_tracer_from_grad():
  box = []

  def f(x):
    box.append(x)
    return x * 2.

  grad(f)(1.0)
  with pytest.raises(jax.errors.UnexpectedTracerError if hasattr(jax, "errors")
                     else jax.core.UnexpectedTracerError):
    jnp.sin(box[0])


# ------------------------------------------------------------------ eager replay


class _Model:
  def __init__(self):
    self.k = 2.0

  def loss(self, x):
    return jnp.sum(jnp.sin(jnp.cos(x) * x + 1) * self.k - x)


def test_replay_equals_per_call_and_tracks_state():
  x = jnp.asarray(rng.standard_normal(5))
  f = lambda x: jnp.sum(jnp.sin(jnp.cos(x) * x + 1) * 2 - x)
  vg = jax.value_and_grad(f)
  outs = [vg(x) for _ in range(4)]
  assert any(type(e).__name__ == "_Entry" for e in vg._trace_cache.entries.values())
  config.update("eager_cache", False)
  try:
    ref = jax.value_and_grad(f)(x)
  finally:
    config.update("eager_cache", True)
  for v, g in outs:
    close(v, ref[0])
    close(g, ref[1])
  if __import__("os").environ.get("NBJAX_REPLAY_CHECK"):
    return  # that mode bypasses the purity guard on purpose
  m = _Model()
  gm = grad(m.loss)
  a = [gm(x) for _ in range(3)]
  m.k = 10.0
  b = gm(x)
  close(a[-1] * 0 + grad(lambda x: jnp.sum(jnp.sin(jnp.cos(x) * x + 1) * 10.0 - x))(x), b)


@pytest.mark.parametrize("f", [
    lambda x: jnp.sum(jnp.tanh(x @ x.T) * x[:, :1]),
    lambda x: jnp.linalg.norm(jnp.cumsum(x, axis=1)) + jnp.max(x),
    lambda x: jnp.sum(jnp.sort(x, axis=0)[::-1] * jnp.arange(3.0)[None, :]),
    lambda x: jnp.sum(jnp.where(x > 0, x ** 3, jnp.exp(x))) / x.size,
    lambda x: jnp.sum(jit(lambda y: jnp.sin(y) * y)(x) ** 2),
    lambda x: jnp.sum(jax.vmap(lambda r: jnp.dot(r, r))(x)),
    lambda x: jvp(lambda y: jnp.sum(jnp.sin(y) * y), (x,), (x,))[1],
])
def test_tape_equals_linearize(f):
  """The top-level tape and linearize + transpose (the path under any other trace) agree."""
  x = jnp.asarray(rng.standard_normal((4, 3)))
  g_tape = grad(f)(x)  # first call at top level: the tape
  g_lin = jit(grad(f))(x)  # under jit: linearize, compiled by XLA
  g_lin2 = jax.vmap(grad(f))(x[None])[0]  # under vmap: linearize, eager
  close(g_tape, g_lin, rtol=1e-10, atol=1e-12)
  close(g_tape, g_lin2, rtol=1e-12, atol=1e-13)


def test_jit_accepts_float0_arguments():
  z = np.zeros(3, jax.dtypes.float0)
  for x in (jnp.ones(3), np.ones(3)):
    a, b = jit(lambda a, b: (a * 2, b))(x, z)
    close(a, 2.0)
    assert b.dtype == jax.dtypes.float0 and b.shape == (3,)
  gx, gn = jit(grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True))(2.0, 3)
  close(gx, 3.0)
  assert gn.dtype == jax.dtypes.float0


def test_float0_gradients_are_numpy_arrays_as_jax():
  """JAX's api_test (test_grad_of_int, test_jvp_of_int_identity, ...): float0 tangents and
  cotangents returned to the user are NumPy arrays, so == against NumPy float0 works."""
  import numpy as np
  import nbjax
  from nbjax import dtypes
  z = np.zeros((), dtypes.float0)
  g = nbjax.grad(lambda x: x + 0., allow_int=True)(1)
  assert type(g) is np.ndarray and g.dtype == dtypes.float0 and g == z
  _, f = nbjax.vjp(lambda x, y: x + y, 2, 1)
  tx, ty = f(z)
  assert type(tx) is np.ndarray and tx == z and ty == z
  _, t = nbjax.jvp(lambda x: x * 2, (3,), (z,))
  assert type(t) is np.ndarray and t == z
  gx, gi = nbjax.grad(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(2., 3)
  assert float(gx) == 3.0 and gi == z
