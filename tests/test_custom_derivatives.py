"""custom_jvp / custom_vjp / closure_convert (``nbjax.custom_derivatives``), and the numerically
safe derivatives ``nbjax.numpy`` defines with them: values, error types and messages, and
composition with jit, vmap, nested differentiation, staging (make_jaxpr, DCE, lowering)
and eager replay, after JAX's tests/custom_api_test.py."""
import functools
import re
import textwrap

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import (closure_convert, core, custom_derivatives, custom_jvp, custom_vjp, grad,
                   jacfwd, jacrev, jit, jvp, linearize, make_jaxpr, vjp, vmap)
from nbjax.interpreters import partial_eval as pe

close = functools.partial(np.testing.assert_allclose, rtol=1e-12, atol=1e-12)


def _sin_jvp_custom():
  @custom_jvp
  def f(x):
    return jnp.sin(x)

  def f_jvp(primals, tangents):
    x, = primals
    g, = tangents
    return f(x), 2 * jnp.cos(x) * g
  f.defjvp(f_jvp)
  return f


def _sin_vjp_custom(fwd_calls_f=True):
  @custom_vjp
  def f(x):
    return jnp.sin(x)

  def f_fwd(x):
    return (f(x) if fwd_calls_f else jnp.sin(x)), jnp.cos(x)

  def f_rev(cos_x, g):
    return (2 * cos_x * g,)
  f.defvjp(f_fwd, f_rev)
  return f

# ============================================================================ custom_jvp


class TestCustomJVP:

  def test_basic(self):
    f = _sin_jvp_custom()
    x = 3.
    close(f(x), np.sin(x))
    y, t = jvp(f, (x,), (1.,))
    close(y, np.sin(x))
    close(t, 2 * np.cos(x))
    close(grad(f)(x), 2 * np.cos(x))

  def test_invariance(self):
    @custom_jvp
    def f(x):
      return jnp.cos(2 * x) / 2.
    f.defjvp(lambda primals, tangents: (f(*primals), 3 * tangents[0]))

    def f2(x):
      return jvp(f, (x,), (x,))[0]

    def f3(x):
      return jvp(f2, (x,), (x,))[0]
    want = jvp(f, (1.,), (1.,))
    for g in (f2, f3):
      for a, b in zip(jvp(g, (1.,), (1.,)), want):
        close(a, b)

  def test_python_control_flow(self):
    @custom_jvp
    def f(x):
      return jnp.sin(x) if x > 0 else jnp.cos(x)

    def f_jvp(primals, tangents):
      x, = primals
      g, = tangents
      return f(x), (2 if x > 0 else 3) * g
    f.defjvp(f_jvp)
    close(f(1.), np.sin(1.))
    close(f(-1.), np.cos(-1.))
    close(jvp(f, (1.,), (1.,))[1], 2.)
    close(jvp(f, (-1.,), (1.,))[1], 3.)
    close(grad(f)(1.), 2.)
    close(grad(f)(-1.), 3.)

  def test_vmap(self):
    f = _sin_jvp_custom()
    x = jnp.arange(3.)
    xx = jnp.arange(6.).reshape(2, 3)
    close(vmap(f)(x), np.sin(np.arange(3.)))
    close(vmap(vmap(f))(xx), np.sin(np.arange(6.).reshape(2, 3)))
    y, t = jvp(vmap(f), (x,), (jnp.ones(3),))
    close(y, np.sin(np.arange(3.)))
    close(t, 2 * np.cos(np.arange(3.)))
    y, t = vmap(lambda x: jvp(f, (x,), (1.,)))(x)
    close(t, 2 * np.cos(np.arange(3.)))
    close(vmap(grad(f))(x), 2 * np.cos(np.arange(3.)))
    close(grad(lambda x: vmap(f)(x).sum())(x), 2 * np.cos(np.arange(3.)))
    close(vmap(vmap(grad(f)))(xx), 2 * np.cos(np.arange(6.).reshape(2, 3)))

  def test_vmap_out_axes_and_unbatched_args(self):
    @custom_jvp
    def f(x, y):
      return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
      (x, y), (tx, ty) = primals, tangents
      return f(x, y), 5 * tx * y + 7 * x * ty
    xs, y = jnp.arange(3.), 2.
    close(vmap(f, (0, None))(xs, y), np.arange(3.) * 2)
    close(vmap(grad(f, 1), (0, None))(xs, y), 7 * np.arange(3.))
    close(grad(lambda y: vmap(f, (0, None))(xs, y).sum())(y), 7 * np.arange(3.).sum())
    _, t = jvp(lambda xs: vmap(f, (0, None), 1)(xs[:, None] * jnp.ones((3, 2)), y),
               (xs,), (jnp.ones(3),))
    close(t, 5 * 2 * np.ones((2, 3)))

  def test_jit(self):
    f = _sin_jvp_custom()
    x = 3.
    close(jit(f)(x), np.sin(x))
    close(jvp(jit(f), (x,), (1.,))[1], 2 * np.cos(x))
    close(jit(lambda x: jvp(f, (x,), (1.,))[1])(x), 2 * np.cos(x))
    close(grad(jit(f))(x), 2 * np.cos(x))
    close(jit(grad(f))(x), 2 * np.cos(x))
    close(jit(vmap(grad(f)))(jnp.arange(3.)), 2 * np.cos(np.arange(3.)))
    close(vmap(jit(grad(f)))(jnp.arange(3.)), 2 * np.cos(np.arange(3.)))
    close(grad(jit(grad(f)))(x), -2 * np.sin(x))

  def test_higher_order(self):
    f = _sin_jvp_custom()
    x = 3.
    close(grad(grad(f))(x), -2 * np.sin(x))
    close(grad(grad(grad(f)))(x), -2 * np.cos(x))
    close(jvp(lambda x: jvp(f, (x,), (1.,))[1], (x,), (1.,))[1], -2 * np.sin(x))
    close(jvp(grad(f), (x,), (1.,))[1], -2 * np.sin(x))
    close(grad(lambda x: jvp(f, (x,), (1.,))[1])(x), -2 * np.sin(x))
    close(jvp(lambda x: vjp(f, x)[1](1.)[0], (x,), (1.,))[1], -2 * np.sin(x))
    v = jnp.array([0.5, 1.5])
    close(nbjax.hessian(lambda v: f(v).sum())(v), np.diag(-2 * np.sin([0.5, 1.5])))
    close(jacfwd(f)(v), np.diag(2 * np.cos([0.5, 1.5])))
    close(jacrev(f)(v), np.diag(2 * np.cos([0.5, 1.5])))
    y, f_lin = linearize(f, x)
    close(f_lin(2.), 4 * np.cos(x))

  def test_pytrees(self):
    @custom_jvp
    def f(x):
      return {"b": jnp.sin(x["a"])}

    @f.defjvp
    def f_jvp(primals, tangents):
      x, = primals
      g, = tangents
      return f(x), {"b": 2 * jnp.cos(x["a"]) * g["a"]}
    x = {"a": 3.}
    close(f(x)["b"], np.sin(3.))
    close(jvp(f, (x,), ({"a": 1.},))[1]["b"], 2 * np.cos(3.))
    close(grad(lambda x: f(x)["b"])(x)["a"], 2 * np.cos(3.))
    close(jit(grad(lambda x: f(x)["b"]))(x)["a"], 2 * np.cos(3.))

  def test_kwargs(self):
    @custom_jvp
    def my_fun(x, y, c=1.):
      return c * (x + y)

    @my_fun.defjvp
    def my_jvp(primals, tangents):
      x, y, c = primals
      t_x, t_y, t_c = tangents
      return my_fun(x, y, c), t_c
    f = lambda x, y: jnp.square(my_fun(x, y, c=2.)).sum()
    close(f(10., 5.), 900.)
    close(grad(f)(10., 5.), 0.)
    close(jvp(lambda c: my_fun(1., 2., c=c), (3.,), (4.,))[1], 4.)

  def test_resolve_kwargs_error_message(self):
    @custom_jvp
    def f(x, y, *, z=None):
      return jnp.sin(x), x + jnp.cos(y)

    @f.defjvp
    def f_jvp(primals, tangents):
      raise AssertionError("should not be executed")

    with pytest.raises(TypeError, match=r"The input arguments to the custom_jvp-decorated "
                       r"function f(.*)\nmissing a required argument: 'y'"):
      f(0.5)
    with pytest.raises(TypeError, match=r"The input arguments to the custom_jvp-decorated "
                       r"function f(.*)\nThe following keyword arguments could not be "
                       "resolved to positions: z"):
      f(0.5, 0.1, z=1.0)

  def test_nondiff_argnums(self):
    @functools.partial(custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
      return f(x)

    def app_jvp(f, primals, tangents):
      (x,), (t,) = primals, tangents
      return app(f, x), 3 * t
    app.defjvp(app_jvp)
    close(app(lambda x: 2 * x, 1.), 2.)
    assert jvp(lambda x: app(lambda y: 2 * y, x), (1.,), (1.,)) == (2., 3.)
    close(grad(lambda x: app(jnp.sin, x))(1.), 3.)
    close(jit(grad(lambda x: app(jnp.sin, x)))(1.), 3.)
    close(vmap(grad(lambda x: app(jnp.sin, x)))(jnp.ones(2)), [3., 3.])

  def test_nondiff_argnames(self):
    @functools.partial(custom_jvp, nondiff_argnames=("f",))
    def app(f, x):
      return f(x)

    def app_jvp(f, primals, tangents):
      (x,), (t,) = primals, tangents
      return app(f, x), 3 * t
    app.defjvp(app_jvp)
    assert app.nondiff_argnums == (0,)
    close(jvp(lambda x: app(lambda y: 2 * y, x), (1.,), (1.,))[1], 3.)

  def test_nondiff_arg_vmap_tracer(self):
    @functools.partial(custom_jvp, nondiff_argnums=(0,))
    def f(x, y):
      return x * y

    def f_jvp(x, primals, tangents):
      (y,), (t_y,) = primals, tangents
      return f(x, y), 5 * t_y
    f.defjvp(f_jvp)
    g = vmap(f)
    y, t = jvp(lambda y: g(jnp.array([2.]), y), (jnp.array([3.]),), (jnp.array([1.]),))
    close(y, [6.])
    close(t, [5.])

  def test_closed_over_tracers_error_message(self):
    def f(x):
      @custom_jvp
      def g(y):
        return x + y

      def g_jvp(primals, tangents):
        return g(x), 2 * primals[0]
      g.defjvp(g_jvp)
      return g(1.)

    with pytest.raises(core.UnexpectedTracerError):
      jvp(f, (3.,), (1.,))
    with pytest.raises(core.UnexpectedTracerError):
      grad(f)(3.)

  def test_missing_jvp_rule_error_message(self):
    @custom_jvp
    def foo(x):
      return x ** 2
    for call in (lambda: foo(2.), lambda: jvp(foo, (2.,), (1.,)), lambda: grad(foo)(2.)):
      with pytest.raises(AttributeError,
                         match=r"No JVP defined for custom_jvp function foo using defjvp."):
        call()

  def test_jvp_rule_inconsistent_pytree_structures_error_message(self):
    @custom_jvp
    def f(x):
      return (x ** 2,)

    @f.defjvp
    def foo_jvp(primals, tangents):
      x, = primals
      t, = tangents
      return f(x), [2 * x * t, x]
    msg = re.escape("Custom JVP rule foo_jvp for function f must produce primal and tangent "
                    "outputs with equal container (pytree) structures, but got PyTreeDef((*,)) "
                    "and PyTreeDef([*, *]) respectively.")
    with pytest.raises(TypeError, match=msg):
      jvp(f, (2.,), (1.,))

  def test_primal_tangent_aval_disagreement_error_message(self):
    @custom_jvp
    def f(x):
      return x ** 2

    @f.defjvp
    def foo_jvp(primals, tangents):
      x, = primals
      t, = tangents
      return f(x), jnp.reshape(t, (1,))
    msg = re.escape("Custom JVP rule must produce primal and tangent outputs with corresponding "
                    "shapes and dtypes. Expected float64[] (tangent type of float64[]) but got "
                    "float64[1].")
    with pytest.raises(TypeError, match=msg):
      jvp(f, (jnp.float64(2.),), (jnp.float64(1.),))
    with pytest.raises(TypeError, match="corresponding shapes and dtypes"):
      grad(f)(2.)
    with pytest.raises(TypeError, match="corresponding shapes and dtypes"):
      grad(jit(f))(2.)

  def test_multi_output_tangent_disagreement_lists_each(self):
    @custom_jvp
    def f(x):
      return x, x

    f.defjvp(lambda p, t: (f(*p), (t[0], jnp.asarray(t[0], np.float32))))
    with pytest.raises(TypeError, match=r"primal float64\[\] with tangent float32\[\], "
                       r"expecting tangent float64\[\]"):
      jvp(f, (2.,), (1.,))

  def test_jvp_rule_doesnt_return_pair_error_message(self):
    @custom_jvp
    def f(x):
      return x ** 2

    @f.defjvp
    def foo_jvp(primals, tangents):
      x, = primals
      t, = tangents
      return t
    with pytest.raises(TypeError, match=re.escape(
        "Custom JVP rule foo_jvp for function f must produce a pair (list or tuple of length "
        "two) representing primal and tangent outputs, but got 1.0.")):
      jvp(f, (2.,), (1.,))

  def test_jvp_rule_primal_out_type_doesnt_match_primal_error_message(self):
    @custom_jvp
    def f(x):
      return x

    @f.defjvp
    def f_jvp(primals, tangents):
      (x,), (t,) = primals, tangents
      return (x, x), (t, t)
    with pytest.raises(TypeError, match=re.escape(
        "Custom JVP rule f_jvp for function f must produce a pair (list or tuple of length "
        "two) where the first element represents the primal output (equal in value to the "
        "output of the custom_jvp-decorated function f, and in particular of the same "
        "container/pytree structure), but instead the JVP rule output's first element had "
        "container/pytree structure:\n    (float64[], float64[])\nwhile the "
        "custom_jvp-decorated function f had output container/pytree structure:\n    "
        "float64[].")):
      jvp(jit(f), (jnp.float64(2.),), (jnp.float64(1.),))  # staged: f ran before the rule

    @custom_jvp
    def g(x):
      return x

    g.defjvp(lambda p, t: (p[0].astype(np.float32), t[0]))
    with pytest.raises(TypeError, match="with leaves of the same shape/dtype"):
      grad(jit(g))(2.)

  def test_defjvps(self):
    @custom_jvp
    def f(x, y):
      return jnp.sin(x) * y
    f.defjvps(lambda x_dot, primal_out, x, y: jnp.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: jnp.sin(x) * y_dot)
    x, y = 1., 2.
    _, t = jvp(f, (x, y), (1., 0.))
    close(t, np.cos(x) * y)
    g = grad(f, (0, 1))(x, y)
    close(g[0], np.cos(x) * y)
    close(g[1], np.sin(x))

  def test_defjvps_first_rule_is_none(self):
    @custom_jvp
    def f(x, y):
      return x ** 2 * y
    f.defjvps(None, lambda x_dot, primal_out, x, y: 2 * x * y * x_dot)
    assert grad(f, (0, 1))(3., 4.) == (0., 24.)

  def test_defjvps_with_nondiff_argnums_error(self):
    f = custom_jvp(lambda n, x: x, nondiff_argnums=(0,))
    with pytest.raises(TypeError, match="Can't use ``defjvps`` with ``nondiff_argnums``."):
      f.defjvps(None)

  def test_float0(self):
    @custom_jvp
    def f(x, y):
      return x, y

    def f_jvp(primals, _):
      x, y = primals
      return (x, y), (2., jnp.zeros(np.shape(y), nbjax.dtypes.float0))
    f.defjvp(f_jvp)
    primals = (2., 3)
    tangents = (np.ones(()), np.zeros((), nbjax.dtypes.float0))
    (y0, y1), (t0, t1) = jvp(f, primals, tangents)
    assert y0 == 2. and y1 == 3
    assert t0 == 2. and np.asarray(t1).dtype == nbjax.dtypes.float0

  def test_int_output_tangent_must_be_float0(self):
    @custom_jvp
    def f(x):
      return jnp.floor(x).astype(np.int32)

    f.defjvp(lambda p, t: (f(*p), jnp.zeros((), np.int32)))
    with pytest.raises(TypeError, match=re.escape(
        "Expected float0[] (tangent type of int32[]) but got int32[].")):
      jvp(f, (2.5,), (1.,))

  def test_symbolic_zeros(self):
    seen = []

    @custom_jvp
    def f(x, y):
      return x * y

    def f_jvp(primals, tangents):
      (x, y), (tx, ty) = primals, tangents
      seen.append((type(tx) is custom_derivatives.SymbolicZero,
                   type(ty) is custom_derivatives.SymbolicZero))
      out = f(x, y)
      if type(tx) is custom_derivatives.SymbolicZero:
        assert tx.shape == np.shape(x) and tx.dtype == np.float64
        return out, 7 * x * ty
      if type(ty) is custom_derivatives.SymbolicZero:
        return out, custom_derivatives.SymbolicZero(tx.aval)  # a symbolic zero out
      return out, tx * y + x * ty
    f.defjvp(f_jvp, symbolic_zeros=True)
    close(grad(f, 1)(2., 3.), 14.)
    assert seen[-1] == (True, False)
    assert grad(f, 0)(2., 3.) == 0.
    assert seen[-1] == (False, True)
    close(jit(grad(f, 1))(2., 3.), 14.)
    assert seen[-1] == (True, False)
    close(vmap(grad(f, 1))(jnp.array([1., 2.]), jnp.array([3., 4.])), [7., 14.])
    close(jvp(f, (2., 3.), (1., 1.))[1], 5.)
    assert seen[-1] == (False, False)
    close(jit(vmap(grad(f, 1), (None, 0)))(2., jnp.array([3., 4.])), [14., 14.])

  def test_make_jaxpr_pretty_print(self):
    @custom_jvp
    def f(x):
      return x + 1

    @f.defjvp
    def f_jvp(primals, tangents):
      return f(*primals), tangents[0]
    x = np.array([4.2], np.float32)
    expected = textwrap.dedent("""
        { lambda ; a:f32[1]. let
            b:f32[1] = custom_jvp_call[
              name=f
              call_jaxpr={ lambda ; c:f32[1]. let d:f32[1] = add c 1.0:f32[] in (d,) }
              jvp=f_jvp
              symbolic_zeros=False
            ] a
          in (b,) }
        """).strip()
    assert make_jaxpr(f)(x).pretty_print(use_color=False) == expected

  def test_closed_over_values_become_inputs(self):
    c = jnp.arange(3.)

    @custom_jvp
    def f(x):
      return x * c

    f.defjvp(lambda p, t: (f(*p), t[0] * 10.))
    jaxpr = make_jaxpr(f)(jnp.ones(3))
    eqn, = jaxpr.eqns
    assert eqn.primitive.name == "custom_jvp_call" and eqn.params["num_consts"] == 1
    assert "num_consts=1" in str(jaxpr)
    nbjax.core.check_jaxpr(jaxpr)
    close(jit(f)(jnp.ones(3)), np.arange(3.))
    close(grad(lambda x: jit(f)(x).sum())(jnp.ones(3)), 10 * np.ones(3))

  def test_dce(self):
    @custom_jvp
    def f(x):
      return jnp.sin(x), jnp.cos(x)

    f.defjvp(lambda p, t: (f(*p), (t[0], t[0])))
    jaxpr = make_jaxpr(lambda x: f(x)[0] * 0 + 1.)(1.)
    new, used = pe.dce_jaxpr(jaxpr.jaxpr, [True])
    assert [e.primitive.name for e in new.eqns] == ["custom_jvp_call", "mul", "add"]
    dead = make_jaxpr(lambda x: (f(x), 1.)[1])(1.)
    new, used = pe.dce_jaxpr(dead.jaxpr, [True])
    assert new.eqns == [] and used == [False]

  def test_dce_prunes_unused_outputs_from_the_function_and_rule(self):
    """JAX's dce rule (custom_api_test test_dce): an unused output leaves the equation, its
    call_jaxpr and its rule; jvp of the pruned jaxpr still uses the rule."""
    @custom_jvp
    def f(x, y):
      return jnp.sin(x), x + jnp.cos(y)

    @f.defjvp
    def f_jvp(primals, tangents):
      (x, y), (dx, dy) = primals, tangents
      return f(x, y), (2.0 * jnp.cos(x) * dx, 1.5 * dx - 0.5 * jnp.sin(y) * dy)
    jaxpr = make_jaxpr(f)(0.1, -1.3).jaxpr
    for used, keep, gone, want in (([True, False], "sin", "cos", ((2 * np.cos(0.1),), (0.,))),
                                   ([False, True], "cos", "sin", ((1.5,), (-0.5 * np.sin(-1.3),)))):
      new, ins = pe.dce_jaxpr(jaxpr, used)
      names = [e.primitive.name for e in new.eqns[0].params["call_jaxpr"].eqns]
      assert ins == [True, True] and keep in names and gone not in names
      g = lambda x, y: nbjax.core.eval_jaxpr(new, [], x, y)[0]
      close(jvp(g, (0.1, -1.3), (1., 0.))[1], want[0][0])
      close(jvp(g, (0.1, -1.3), (0., 1.))[1], want[1][0])
    assert pe.dce_jaxpr(jaxpr, [False, False])[0].eqns == []

  def test_lowering_inlines_call_jaxpr(self):
    f = _sin_jvp_custom()
    text = jit(f).lower(1.).as_text()
    assert "stablehlo.sine" in text and "custom" not in text
    close(jit(f)(jnp.arange(3.)), np.sin(np.arange(3.)))

  def test_linear_transpose_through_custom_jvp(self):
    @custom_jvp
    def f(x):
      return 3. * x

    f.defjvp(lambda p, t: (f(*p), 3. * t[0]))
    ct, = nbjax.linear_transpose(f, 1.)(2.)
    close(ct, 6.)
    ct, = nbjax.linear_transpose(jit(f), 1.)(2.)
    close(ct, 6.)

  def test_method_decorator(self):
    class A:
      def __init__(self, k):
        self.k = k

      @functools.partial(custom_jvp, nondiff_argnums=(0,))
      def f(self, x):
        return self.k * x
    A.f.defjvp(lambda self, p, t: (self.f(*p), 100. * t[0]))
    a = A(2.)
    close(a.f(3.), 6.)
    close(grad(a.f)(3.), 100.)

  def test_eager_replay_and_rule_redefinition(self):
    @custom_jvp
    def f(x):
      return jnp.sin(x)
    f.defjvp(lambda p, t: (f(*p), 2. * t[0]))

    def h(x):
      return f(x) * 3.
    vh = vmap(grad(h))
    xs = jnp.arange(3.)
    for _ in range(4):  # per-call, then staged and replayed
      close(vh(xs), 6. * np.ones(3))
    jh = jvp
    for _ in range(4):
      close(jh(h, (xs,), (jnp.ones(3),))[1], 6. * np.ones(3))
    f.defjvp(lambda p, t: (f(*p), 5. * t[0]))
    for _ in range(3):
      close(vh(xs), 15. * np.ones(3))
    vf = vmap(h)
    for _ in range(4):
      close(vf(xs), 3 * np.sin(np.arange(3.)))

  def test_inline_calls_pass(self):
    f = _sin_jvp_custom()
    jaxpr = make_jaxpr(lambda x: f(f(x)) + f(x))(1.)
    flat = pe.inline_calls(jaxpr.jaxpr)
    assert [e.primitive.name for e in flat.eqns] == ["sin", "sin", "sin", "add"]
    nbjax.core.check_jaxpr(flat)
    out = nbjax.core.eval_jaxpr(flat, [], 1.)
    close(out[0], np.sin(np.sin(1.)) + np.sin(1.))

  def test_rule_sees_the_values_as_passed(self):
    """The rule gets Python and NumPy values as they were passed (JAX's), and ``jvp``
    returns what it computed from them: Python floats stay floats (custom_api_test
    test_symbolic_zero_custom_jvp)."""
    seen = []

    @custom_jvp
    def f(a, x):
      return a + x

    @f.defjvp
    def f_jvp(p, t):
      seen.append([type(v) for v in (*p, *t)])
      return f(*p), t[1] * 2
    out = jvp(f, (1., 4.), (0., 7.))
    assert out == (5., 14.) and [type(o) for o in out] == [float, float]
    assert seen.pop() == [float] * 4
    assert jvp(lambda x: f(1., x), (4.,), (7.,)) == (5., 14.)
    assert seen.pop()[:3] == [float, float, nbjax.Array]  # (a constant's zero tangent)
    jvp(f, (np.array(1.), np.float64(4.)), (np.array(0.), np.float64(7.)))
    assert seen.pop()[:2] == [np.ndarray, np.float64]


# ============================================================================ custom_vjp


class TestCustomVJP:

  def test_basic(self):
    f = _sin_vjp_custom()
    x = 3.
    close(f(x), np.sin(x))
    close(grad(f)(x), 2 * np.cos(x))
    v, g = nbjax.value_and_grad(f)(x)
    close(v, np.sin(x))
    close(g, 2 * np.cos(x))
    y, f_vjp = vjp(f, x)
    close(f_vjp(2.)[0], 4 * np.cos(x))

  def test_python_control_flow_bwd(self):
    @custom_vjp
    def f(x):
      return jnp.sin(x)

    def f_fwd(x):
      return f(x), x

    def f_rev(x, g):
      return (2 * g,) if x > 0 else (3 * g,)
    f.defvjp(f_fwd, f_rev)
    close(grad(f)(1.), 2.)
    close(grad(f)(-1.), 3.)

  def test_vmap(self):
    f = _sin_vjp_custom()
    x = jnp.arange(3.)
    close(vmap(f)(x), np.sin(np.arange(3.)))
    close(vmap(grad(f))(x), 2 * np.cos(np.arange(3.)))
    close(grad(lambda x: vmap(f)(x).sum())(x), 2 * np.cos(np.arange(3.)))
    xx = jnp.arange(6.).reshape(2, 3)
    close(vmap(vmap(grad(f)))(xx), 2 * np.cos(np.arange(6.).reshape(2, 3)))
    close(grad(lambda x: vmap(vmap(f))(x).sum())(xx), 2 * np.cos(np.arange(6.).reshape(2, 3)))

  def test_vmap_unbatched_input_cotangent_is_summed(self):
    @custom_vjp
    def f(x, w):
      return x * w

    f.defvjp(lambda x, w: (f(x, w), (x, w)), lambda res, g: (g * res[1], 10. * g * res[0]))
    xs, w = jnp.arange(1., 4.), 2.
    g = grad(lambda w: vmap(f, (0, None))(xs, w).sum())(w)
    close(g, 10. * np.arange(1., 4.).sum())
    gx, gw = grad(lambda xs, w: vmap(f, (0, None))(xs, w).sum(), (0, 1))(xs, w)
    close(gx, 2. * np.ones(3))
    close(gw, 60.)
    close(vmap(grad(f, 1), (0, None))(xs, w), 10. * np.arange(1., 4.))

  def test_jit(self):
    f = _sin_vjp_custom()
    x = 3.
    close(jit(f)(x), np.sin(x))
    close(grad(jit(f))(x), 2 * np.cos(x))
    close(jit(grad(f))(x), 2 * np.cos(x))
    close(jit(grad(jit(f)))(x), 2 * np.cos(x))
    close(jit(vmap(grad(f)))(jnp.arange(3.)), 2 * np.cos(np.arange(3.)))
    close(vmap(jit(grad(f)))(jnp.arange(3.)), 2 * np.cos(np.arange(3.)))
    close(grad(lambda x: jit(vmap(f))(x).sum())(jnp.arange(3.)), 2 * np.cos(np.arange(3.)))

  def test_higher_order(self):
    f = _sin_vjp_custom()
    x = 3.
    close(grad(grad(f))(x), -2 * np.sin(x))
    close(jit(grad(grad(f)))(x), -2 * np.sin(x))
    close(grad(grad(jit(f)))(x), -2 * np.sin(x))
    close(jacrev(jacrev(lambda v: f(v).sum()))(jnp.array([1., 2.])), np.diag(-2 * np.sin([1., 2.])))

  def test_jvp_of_vjp(self):
    f = _sin_vjp_custom(fwd_calls_f=False)  # forward-over-reverse: fwd and bwd are traced
    x = 3.
    _, t = jvp(lambda x: vjp(f, x)[1](1.)[0], (x,), (1.,))
    close(t, -2 * np.sin(x))
    close(jvp(grad(f), (x,), (1.,))[1], -2 * np.sin(x))
    close(nbjax.hessian(lambda v: f(v).sum())(jnp.array([1., 2.])), np.diag(-2 * np.sin([1., 2.])))
    # a fwd that calls the custom_vjp function itself cannot be forward-differentiated (JAX)
    g = _sin_vjp_custom(fwd_calls_f=True)
    with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a "
                       "custom_vjp function."):
      jvp(grad(g), (x,), (1.,))

  def test_pytrees_and_residuals(self):
    @custom_vjp
    def f(x):
      return {"b": jnp.sin(x["a"])}

    def f_fwd(x):
      return f(x), {"r": (jnp.cos(x["a"]), None, [x["a"]])}

    def f_bwd(res, g):
      cos_x, none, (a,) = res["r"]
      assert none is None
      return ({"a": 2 * cos_x * g["b"] + 0 * a},)
    f.defvjp(f_fwd, f_bwd)
    x = {"a": 3.}
    close(f(x)["b"], np.sin(3.))
    close(grad(lambda x: f(x)["b"])(x)["a"], 2 * np.cos(3.))
    close(jit(grad(lambda x: f(x)["b"]))(x)["a"], 2 * np.cos(3.))
    close(vmap(grad(lambda x: f(x)["b"]))({"a": jnp.arange(2.)})["a"], 2 * np.cos(np.arange(2.)))

  def test_jvp_error(self):
    f = _sin_vjp_custom()
    msg = r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp function."
    with pytest.raises(TypeError, match=msg):
      jvp(f, (3.,), (1.,))
    with pytest.raises(TypeError, match=msg):
      jvp(vmap(f), (jnp.arange(3.),), (jnp.ones(3),))
    with pytest.raises(TypeError, match=msg):
      jvp(jit(f), (3.,), (1.,))
    with pytest.raises(TypeError, match=msg):
      jacfwd(f)(jnp.arange(3.))
    y, f_lin = linearize(f, 3.)  # the linear map is only transposable
    with pytest.raises(TypeError, match=msg):
      f_lin(1.)

  def test_kwargs(self):
    @custom_vjp
    def my_fun(x, y, c=1.):
      return c * (x + y)
    my_fun.defvjp(lambda x, y, c=1.: (my_fun(c, y, c), None), lambda _, g: (g, g, g))
    f = lambda x, y: jnp.square(my_fun(x, y, c=2.)).sum()
    close(f(10., 5.), 900.)
    close(grad(f)(10., 5.), 28.)  # bwd passes the cotangent through; fwd's output is 14

  def test_nondiff_argnums(self):
    @functools.partial(custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
      return f(x)

    def app_fwd(f, x):
      return app(f, x), jnp.cos(x)

    def app_rev(f, cos_x, g):
      return (cos_x * g,)
    app.defvjp(app_fwd, app_rev)
    close(app(lambda x: 2 * x, 1.), 2.)
    close(grad(lambda x: app(lambda y: 2 * y, x))(1.), np.cos(1.))
    close(jit(grad(lambda x: app(jnp.sin, x)))(1.), np.cos(1.))
    close(vmap(grad(lambda x: app(jnp.sin, x)))(jnp.ones(2)), np.cos([1., 1.]))

  def test_nondiff_arg_tracer_error(self):
    @functools.partial(custom_vjp, nondiff_argnums=(0,))
    def f(x, y):
      return x * y
    f.defvjp(lambda x, y: (f(x, y), None), lambda x, _, g: (g,))
    with pytest.raises(core.UnexpectedTracerError, match="Found a JAX Tracer object passed "
                       "as an argument to a custom_vjp function in a position indicated by "
                       "nondiff_argnums as non-differentiable."):
      grad(lambda x: f(x, 2.))(3.)
    with pytest.raises(core.UnexpectedTracerError):
      jit(lambda x: f(x, 2.))(3.)

  def test_missing_vjp_rule_error(self):
    @custom_vjp
    def foo(x):
      return x ** 2
    with pytest.raises(AttributeError,
                       match=r"No VJP defined for custom_vjp function foo using defvjp."):
      foo(2.)
    with pytest.raises(AttributeError, match="No VJP defined"):
      grad(foo)(2.)

  def test_vjp_rule_inconsistent_pytree_structures_error(self):
    @custom_vjp
    def f(x):
      return x

    f.defvjp(lambda x: (f(x), x), lambda _, g: (2 * g, 3 * g))
    with pytest.raises(TypeError, match=re.escape(
        "Custom VJP bwd rule must produce an output with the same container (pytree) "
        "structure as the args tuple of the primal function, and in particular must produce "
        "a tuple of length equal to the number of arguments to the primal function, but got "
        "bwd output structure PyTreeDef((*, *)) for primal input structure PyTreeDef((*,)).")):
      grad(f)(2.)

  def test_vjp_bwd_returns_non_tuple_error(self):
    @custom_vjp
    def f(x):
      return x

    f.defvjp(lambda x: (f(x), x), lambda _, g: 2 * g)
    with pytest.raises(TypeError, match="Custom VJP bwd rule must produce an output with the "
                       "same container"):
      grad(f)(2.)

  def test_bwd_rule_can_produce_list(self):
    @custom_vjp
    def f(x, y):
      return x * y

    f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: [g * r[1], g * r[0]])
    assert grad(f, (0, 1))(2., 3.) == (3., 2.)

  def test_fwd_rule_primal_out_type_doesnt_match_primal_error_message(self):
    @custom_vjp
    def f(x, y):
      return x * y

    f.defvjp(lambda x, y: ((x * y, x), None), lambda _, g: (g, g))
    with pytest.raises(TypeError, match=re.escape(
        "Custom VJP fwd rule <lambda> for function f must produce a pair (list or tuple of "
        "length two) where the first element represents the primal output (equal to the "
        "output of the custom_vjp-decorated function f) and the second element represents "
        "residuals (i.e. values stored from the forward pass for use on the backward pass), "
        "but instead the fwd rule output's first element had container/pytree structure:\n"
        "    (float64[], float64[])\nwhile the custom_vjp-decorated function f had output "
        "container/pytree structure:\n    float64[].")):
      grad(jit(f))(jnp.float64(2.), jnp.float64(3.))

  def test_fwd_rule_not_pair_error(self):
    @custom_vjp
    def f(x):
      return x

    f.defvjp(lambda x: x, lambda _, g: (g,))
    with pytest.raises(TypeError, match="Custom VJP fwd rule <lambda> for function f must "
                       "produce a pair"):
      grad(f)(2.)

  def test_bwd_rule_shape_mismatch(self):
    @custom_vjp
    def foo(x, y):
      return x

    def foo_fwd(x, y):
      return x, None

    def foo_bwd(_, g):
      return jnp.zeros(3), jnp.zeros(3)
    foo.defvjp(foo_fwd, foo_bwd)
    with pytest.raises(ValueError, match=re.escape(
        "Custom VJP bwd rule must produce an output with the same type as the "
        "args tuple of the primal function, but at output[1] the bwd rule produced an output "
        "of type float64[3] corresponding to an input of type float64[4], so the shapes do not "
        "match")):
      grad(lambda x, y: foo(x, y * y).sum(), 1)(jnp.ones(3), jnp.ones(4))
    # jax_disable_bwd_checks: the rule's cotangent is taken as it is (JAX's: a float64[3])
    with nbjax.config.override("jax_disable_bwd_checks", True):
      for g in (grad(lambda x, y: foo(x, y).sum(), 1),
                jit(grad(lambda x, y: foo(x, y).sum(), 1))):
        assert g(jnp.ones(3), jnp.ones(4)).shape == (3,)

  def test_fwd_residual_that_is_not_an_array(self):
    @custom_vjp
    def foo(x):
      return x * 2
    foo.defvjp(lambda x: (x * 2, "str"), lambda r, g: (g,))
    with pytest.raises(TypeError, match=re.escape(
        "Argument 'str' of type <class 'str'> is not a valid JAX type")):
      grad(foo)(1.0)

  def test_bwd_nones(self):
    @custom_vjp
    def f(x, y):
      return x * jnp.sin(y)

    f.defvjp(lambda x, y: (f(x, y), jnp.cos(y)), lambda cos_y, g: (cos_y, None))
    close(grad(f)(3., 4.), np.cos(4.))
    assert grad(f, 1)(3., 4.) == 0.
    close(vmap(grad(f))(jnp.arange(2.), jnp.ones(2)), np.cos([1., 1.]))

  def test_bwd_nones_in_subtrees(self):
    @custom_vjp
    def f(xs, y):
      return jnp.sin(xs["a"]) * jnp.cos(xs["b"]) * jnp.sin(y)

    def f_fwd(xs, y):
      return f(xs, y), None

    def f_bwd(_, g):
      return {"a": 1., "b": None}, 3.
    f.defvjp(f_fwd, f_bwd)
    gx, gy = grad(f, (0, 1))({"a": 1., "b": 2.}, 4.)
    assert gx == {"a": 1., "b": 0.} and gy == 3.

  def test_bwd_output_of_a_pytree_type_that_takes_no_none(self):
    """The cotangent tree is matched to the inputs without unflattening it with Nones (JAX's
    custom_api_test test_pytrees_not_required_to_contain_nones)."""
    class A(list):
      pass

    def unflatten(_, children):
      assert children[0] is not None
      return A(children)
    nbjax.tree_util.register_pytree_node(A, lambda x: (x, None), unflatten)

    @custom_vjp
    def f(x):
      return x[0]
    f.defvjp(lambda x: (x[0], None), lambda _, g: (A([g * 2]),))
    out = grad(f)(A([1.]))
    assert type(out) is A and float(out[0]) == 2.

  def test_nestable_vjp(self):
    def f(x):
      return x ** 2

    @custom_vjp
    def g(x):
      return f(x)

    def g_fwd(x):
      y, f_vjp = vjp(f, x)
      return y, f_vjp

    def g_bwd(f_vjp, y_bar):
      return f_vjp(y_bar)
    g.defvjp(g_fwd, g_bwd)
    _, g_vjp = vjp(g, 1.0)
    y, = g_vjp(1.0)
    close(y, 2.0)

    @jit
    def z(x):
      _, g_vjp = vjp(g, x)
      return g_vjp
    y, = z(1.0)(3.0)
    close(y, 6.0)

  def test_float0(self):
    @custom_vjp
    def f(x, _):
      return x

    f.defvjp(lambda x, y: (x, None), lambda _, g: (2 * g, None))
    gx, gy = grad(f, (0, 1), allow_int=True)(2., 4)
    assert gx == 2. and np.asarray(gy).dtype == nbjax.dtypes.float0

  def test_symbolic_zeros(self):
    seen = {}

    @custom_vjp
    def f(x, y):
      return x * y, y

    def f_fwd(x, y):
      seen["fwd"] = (type(x) is custom_derivatives.CustomVJPPrimal, x.perturbed, y.perturbed)
      x, y = custom_derivatives.custom_vjp_primal_tree_values((x, y))
      return f(x, y), (x, y)

    def f_bwd(res, cts):
      x, y = res
      ct0, ct1 = cts
      seen["bwd"] = type(ct1) is custom_derivatives.SymbolicZero
      return ct0 * y, ct0 * x
    f.defvjp(f_fwd, f_bwd, symbolic_zeros=True)
    close(grad(lambda x, y: f(x, y)[0])(2., 3.), 3.)
    assert seen == {"fwd": (True, True, False), "bwd": True}
    close(jit(grad(lambda x, y: f(x, y)[0], 1))(2., 3.), 2.)
    assert seen["fwd"] == (True, False, True)
    close(vmap(grad(lambda x, y: f(x, y)[0]))(jnp.arange(2.), jnp.ones(2)), [1., 1.])

  def test_symbolic_zero_bwd_shape_error(self):
    @custom_vjp
    def f(x):
      return x

    f.defvjp(lambda x: (f(x), None), lambda _, g: (custom_derivatives.SymbolicZero(
        core.ShapedArray((3,), np.float64)),), symbolic_zeros=False)
    with pytest.raises(ValueError, match="Custom VJP bwd rule produced a SymbolicZero with a "
                       "shape/dtype that does not match"):
      grad(f)(2.)

  def test_make_jaxpr_pretty_print(self):
    @custom_vjp
    def f(x):
      return x + 1

    def f_fwd(x):
      return f(x), ()

    def f_bwd(_, g):
      return g
    f.defvjp(f_fwd, f_bwd)
    x = np.array([4.2], np.float32)
    expected = textwrap.dedent("""
        { lambda ; a:f32[1]. let
            b:f32[1] = custom_vjp_call[
              name=f
              bwd=f_bwd
              call_jaxpr={ lambda ; c:f32[1]. let d:f32[1] = add c 1.0:f32[] in (d,) }
              fwd=f_fwd
              symbolic_zeros=False
            ] a
          in (b,) }
        """).strip()
    assert make_jaxpr(f)(x).pretty_print(use_color=False) == expected
    jaxpr = make_jaxpr(lambda x: jvp(f, (x,), (x,)))(x)
    jaxpr, _ = pe.dce_jaxpr(jaxpr.jaxpr, [False, True])
    expected = textwrap.dedent("""
        { lambda ; a:f32[1]. let
            b:f32[1] = custom_lin[
              bwd=f_bwd
              in_zeros=[False]
              num_res=0
              symbolic_zeros=False
            ] a
          in (b,) }
        """).strip()
    assert jaxpr.pretty_print(use_color=False) == expected

  def test_dce(self):
    f = _sin_vjp_custom()
    dead = make_jaxpr(lambda x: (f(x), 1.)[1])(1.)
    new, used = pe.dce_jaxpr(dead.jaxpr, [True])
    assert new.eqns == [] and used == [False]

  def test_dce_prunes_unused_outputs_from_fwd_and_bwd(self):
    """custom_api_test test_dce: the pruned fwd drops the unused primal output; the bwd gets
    a zero cotangent for it."""
    @custom_vjp
    def f(x, y):
      return jnp.sin(x), x + jnp.cos(y)

    def f_bwd(res, cts):
      (cos_x, sin_y), (ct_a, ct_b) = res, cts
      return 2.0 * cos_x * ct_a + 1.5 * ct_b, -0.5 * sin_y * ct_b
    f.defvjp(lambda x, y: (f(x, y), (jnp.cos(x), jnp.sin(y))), f_bwd)
    jaxpr = make_jaxpr(f)(0.1, -1.3).jaxpr
    for used, keep, gone, want in (([True, False], "sin", "cos", (2 * np.cos(0.1), 0.)),
                                   ([False, True], "cos", "sin", (1.5, -0.5 * np.sin(-1.3)))):
      new, _ = pe.dce_jaxpr(jaxpr, used)
      names = [e.primitive.name for e in new.eqns[0].params["call_jaxpr"].eqns]
      assert keep in names and gone not in names
      g = lambda x, y: nbjax.core.eval_jaxpr(new, [], x, y)[0]
      close(grad(g, (0, 1))(0.1, -1.3), want)

  def test_closed_over_value_differentiated_under_jit_raises(self):
    def outer(c):
      @custom_vjp
      def f(x):
        return x * c
      f.defvjp(lambda x: (f(x), None), lambda _, g: (g,))
      return jit(f)(1.)
    with pytest.raises(custom_derivatives.ad.CustomVJPException,
                       match="Detected differentiation of a custom_vjp function with respect "
                       "to a closed-over value"):
      grad(outer)(2.)

  def test_eager_replay(self):
    f = _sin_vjp_custom()

    def h(x):
      return f(x) * 3.
    vh = vmap(grad(h))
    xs = jnp.arange(3.)
    for _ in range(4):
      close(vh(xs), 6. * np.cos(np.arange(3.)))
    vf = vmap(h)
    for _ in range(4):
      close(vf(xs), 3. * np.sin(np.arange(3.)))

# ============================================================================ closure_convert


class TestClosureConvert:

  def test_closure_convert(self):
    def minimize(objective_fn, x0):
      converted_fn, aux_args = closure_convert(objective_fn, x0)
      return _minimize(converted_fn, x0, *aux_args)

    @functools.partial(custom_vjp, nondiff_argnums=(0,))
    def _minimize(objective_fn, x0, *args):
      del objective_fn, args
      return x0

    def fwd(objective_fn, x0, *args):
      y = _minimize(objective_fn, x0, *args)
      return y, (y, args)

    def rev(objective_fn, res, g):
      y, args = res
      x0_bar = 17. * g
      args_bars = vjp(lambda *a: grad(objective_fn)(y, *a), *args)[1](-g)
      return (x0_bar, *args_bars)
    _minimize.defvjp(fwd, rev)

    def obj(c, x):
      return jnp.sum((x - c) ** 2.)

    def solve(c, x):
      def closure(x):
        return obj(c, x)
      return jnp.sum(minimize(closure, x))
    c, x = 2. * jnp.ones(2), jnp.ones(2)
    close(solve(c, x), 2.)
    g_c, g_x = grad(solve, argnums=(0, 1))(c, x)
    close(g_x, [17., 17.])
    close(g_c, [2., 2.])  # -(d2 obj / dx dc) * (-1) = 2 per coordinate
    converted, hoisted = closure_convert(lambda x: obj(c, x), x)
    assert hoisted == []  # c is a concrete array here: nothing to differentiate, kept inside
    close(converted(x), 2.)

  def test_closure_convert_mixed_consts(self):
    def f(x, c):
      def g(y):
        return y * c * jnp.array([2., 3.])
      converted, hoisted = closure_convert(g, x)
      # the tracer c is hoisted; concrete values (the array, c outside grad) stay inside
      assert len(hoisted) == isinstance(c, core.Tracer)
      return converted(x, *hoisted).sum()
    close(grad(f, 1)(jnp.ones(2), 2.), 5.)
    close(f(jnp.ones(2), 2.), 10.)

  def test_closure_convert_pytree_mismatch(self):
    converted, _ = closure_convert(lambda x: x * 2, 1.)
    with pytest.raises(TypeError, match="The inputs to the closure produced by "
                       "closure_convert must have the same Pytree structure"):
      converted((1., 2.))

# ============================================================================ jnp safe derivatives


class TestNumpySafeDerivatives:

  def test_sinc_higher_derivatives_at_zero(self):
    f = jnp.sinc
    want = [0., -np.pi ** 2 / 3, 0., np.pi ** 4 / 5, 0.]
    for w in want:
      f = grad(f)
      close(f(0.), w)
    close(jnp.sinc(jnp.array([0., 0.5, np.inf, -np.inf])), [1., np.sinc(0.5), np.nan, np.nan])  # JAX's
    close(grad(jnp.sinc)(0.5), (np.pi * 0.5 * np.cos(np.pi * 0.5) - np.sin(np.pi * 0.5)) /
          (np.pi * 0.5 ** 2))
    close(vmap(grad(jnp.sinc))(jnp.array([0., 0.5])), [0., grad(jnp.sinc)(0.5)])
    close(jit(grad(grad(jnp.sinc)))(0.), -np.pi ** 2 / 3)

  def test_sinc_grad_of_vmap_of_map(self):
    """grad of vmap of lax.map of sinc: the rule's and the function's outputs are batched
    alike (JAX's custom_api_test test_sinc_constant_function_batching; JAX's value)."""
    data = jnp.arange(15.).reshape(5, 3)
    f = vmap(lambda x: nbjax.lax.map(jnp.sinc, x))
    close(grad(lambda p: f(p * data).sum())(0.1), -83.83772766162136)
    assert float(jvp(jnp.logaddexp, (0.5, 2.), (1., 0.))[1]) == pytest.approx(
        1 / (1 + np.exp(1.5)))  # (Python float primals reach the rule as they are)

  def test_logaddexp_gradients_with_infinities(self):
    g = grad(jnp.logaddexp, (0, 1))
    a, b = g(1., 2.)
    close(a, 1 / (1 + np.e))
    close(b, np.e / (1 + np.e))
    assert g(-np.inf, 0.) == (0., 1.)  # the naive rule gives nan
    assert g(0., -np.inf) == (1., 0.)
    a, b = g(np.inf, 2.)  # JAX's rule: +inf is replaced by 0 in the exponents
    close(a, 1.)
    close(b, np.exp(2.))
    a, b = grad(jnp.logaddexp2, (0, 1))(1., 2.)
    close(a, 1 / 3)
    close(b, 2 / 3)
    assert grad(jnp.logaddexp2, (0, 1))(-np.inf, 0.) == (0., 1.)
    close(jnp.logaddexp(jnp.array([1., -np.inf]), 2.), np.logaddexp([1., -np.inf], 2.))
    close(jnp.logaddexp2(jnp.array([1., -np.inf]), 2.), np.logaddexp2([1., -np.inf], 2.))
    close(jit(grad(jnp.logaddexp))(-np.inf, 0.), 0.)
    close(vmap(grad(jnp.logaddexp))(jnp.array([-np.inf, 0.]), jnp.zeros(2)), [0., 0.5])

  def test_logaddexp_complex(self):
    z = np.array([0.5 + 0.2j, 0j, 1.5 - 1j])
    w = z[::-1]
    close(jnp.logaddexp(z, w), np.log(np.exp(z) + np.exp(w)))
    close(jnp.logaddexp2(z, w), np.log2(2 ** z + 2 ** w))
    _, t = jvp(jnp.logaddexp, (z, w), (np.ones(3, complex), np.zeros(3, complex)))
    close(t, np.exp(z) / (np.exp(z) + np.exp(w)))

  def test_logaddexp_staged_as_custom_jvp(self):
    jaxpr = make_jaxpr(jnp.logaddexp)(1., 2.)
    assert [e.primitive.name for e in jaxpr.eqns] == ["custom_jvp_call"]
    assert "name=logaddexp" in str(jaxpr)

  def test_i0_derivative_at_zero(self):
    assert grad(jnp.i0)(0.) == 0.  # exactly: JAX's custom rule
    close(grad(jnp.i0)(1.5), 0.9816664285779079)  # I1(1.5)

  def test_norm_gradient_at_zero_is_nan_as_in_jax(self):
    # JAX's jnp.linalg.norm has no custom rule: sqrt'(0) * 0 is nan there too
    assert np.isnan(np.asarray(grad(jnp.linalg.norm)(jnp.zeros(3)))).all()
    close(grad(jnp.linalg.norm)(jnp.array([3., 4.])), [0.6, 0.8])


def test_custom_vjp_bwd_cotangent_dtype_kept_by_grad():
  """A custom_vjp bwd returning a bfloat16 cotangent for a float32 primal: grad,
  value_and_grad and vjp give it as it is (eagerly, repeated, and under jit), as JAX 0.10.2;
  where it meets a float32 cotangent or a float32 transpose, JAX's dtype errors."""
  @custom_vjp
  def f(x):
    return x * 2.

  f.defvjp(lambda x: (f(x), None), lambda _, g: (jnp.asarray(g * 3., jnp.bfloat16),))
  x, xs = jnp.float32(1.5), jnp.ones(2, jnp.float32)
  got = [grad(f)(x), nbjax.jit(grad(f))(x), grad(nbjax.jit(f))(x),
         nbjax.value_and_grad(f)(x)[1], nbjax.vjp(f, x)[1](jnp.float32(1.))[0],
         grad(lambda x: (f(x), 1.), has_aux=True)(x)[0]]
  for _ in range(3):  # (the tape's repeated-structure paths)
    got += [grad(lambda x: f(x) * 2)(x) / 2, grad(lambda x: (f(x) + f(x)) / 2)(x)]
  assert [(str(g.dtype), float(g)) for g in got] == [("bfloat16", 3.0)] * len(got)
  g = grad(lambda x: f(x).sum())(xs)
  assert (str(g.dtype), g.tolist()) == ("bfloat16", [3.0, 3.0])
  for _ in range(2):
    with pytest.raises(TypeError) as e:
      grad(lambda x: f(x) + x)(x)
    assert str(e.value) == ("lax.add requires arguments to have the same dtypes, got float32, "
                            "bfloat16. (Tip: jnp.add is a similar function that does automatic "
                            "type promotion on inputs).")
    with pytest.raises(TypeError) as e:
      grad(lambda x: f(x * 2))(x)
    assert str(e.value) == ("lax.mul requires arguments to have the same dtypes, got bfloat16, "
                            "float32. (Tip: jnp.multiply is a similar function that does "
                            "automatic type promotion on inputs).")
