"""``nbjax.test_util.check_grads`` (JAX's ``jax.test_util.check_grads``): it passes on correct
derivatives, of every order and mode asked for, and fails with an ``AssertionError`` naming
the check when a derivative is wrong (a deliberately wrong custom_jvp or custom_vjp rule)."""
import functools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import custom_jvp, custom_vjp
from nbjax.test_util import check_grads, check_jvp, check_vjp


def _custom_sin_jvp(factor):
  @custom_jvp
  def f(x):
    return jnp.sin(x)
  f.defjvp(lambda p, t: (f(*p), factor * jnp.cos(p[0]) * t[0]))
  return f


def _custom_sin_vjp(factor):
  @custom_vjp
  def f(x):
    return jnp.sin(x)
  f.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda c, g: (factor * c * g,))
  return f


@pytest.mark.parametrize("f,args", [
    (jnp.sin, (0.5,)),
    (jnp.tanh, (np.array([0.1, -0.7, 1.3]),)),
    (lambda x, y: jnp.sum(x * jnp.exp(y)), (np.array([1., 2.]), np.array([0.3, -0.2]))),
    (lambda d: {"p": d["a"] @ d["b"], "q": jnp.sin(d["a"]).sum()},
     ({"a": np.arange(6.).reshape(2, 3) / 6, "b": np.ones((3, 2))},)),
    (lambda x: jnp.linalg.norm(x), (np.array([3., 4.]),)),
], ids=["sin", "tanh", "two_args", "pytree", "norm"])
@pytest.mark.parametrize("order", [1, 2])
def test_passes_on_correct_functions(f, args, order):
  check_grads(f, args, order)


def test_modes_and_orders():
  check_grads(jnp.sin, (0.5,), 3, modes=("fwd",))
  check_grads(jnp.sin, (0.5,), 3, modes=("rev",))
  check_grads(jnp.sin, (0.5,), 2, modes=("lin",))
  check_grads(lambda x: x ** 3, (np.float32(1.3),), 2)  # float32 tolerances


def test_numpy_custom_rules_pass():
  check_grads(jnp.sinc, (np.array([0.3, 1.7]),), 3)
  check_grads(jnp.logaddexp, (np.array([0.3, -2.]), np.array([1.0, -2.5])), 2)
  check_grads(jnp.logaddexp2, (0.5, 1.5), 2)
  check_grads(jnp.i0, (np.array([0.4, 2.5]),), 2)


def test_correct_custom_jvp_passes():
  check_grads(_custom_sin_jvp(1.), (0.7,), 2)
  check_grads(nbjax.jit(_custom_sin_jvp(1.)), (0.7,), 2)
  check_grads(nbjax.vmap(_custom_sin_jvp(1.)), (np.array([0.1, 0.7]),), 2)


def test_correct_custom_vjp_passes():
  f = _custom_sin_vjp(1.)
  check_grads(f, (0.7,), 2, modes=["rev"])
  check_grads(nbjax.jit(f), (0.7,), 2, modes=["rev"])
  with pytest.raises(TypeError, match=r"can't apply forward-mode autodiff \(jvp\)"):
    check_grads(f, (0.7,), 1, modes=["fwd"])


@pytest.mark.parametrize("mode,what", [("fwd", "JVP tangent"), ("rev", "VJP cotangent projection")])
def test_wrong_custom_jvp_fails(mode, what):
  wrong = _custom_sin_jvp(1.01)  # 1% off: well outside the float64 tolerance
  with pytest.raises(AssertionError, match=what):
    check_grads(wrong, (0.7,), 1, modes=[mode])


def test_wrong_custom_jvp_second_order_fails():
  """A rule whose first derivative is right but whose own derivative is wrong passes at
  order 1 and fails at order 2, in both modes."""
  @custom_jvp
  def g(x):
    return jnp.sin(x)

  @custom_jvp
  def bad_cos(x):
    return jnp.cos(x)
  bad_cos.defjvp(lambda p, t: (bad_cos(*p), 3. * t[0]))  # should be -sin
  g.defjvp(lambda p, t: (g(*p), bad_cos(p[0]) * t[0]))
  check_grads(g, (0.7,), 1)  # first order is right
  with pytest.raises(AssertionError, match="JVP of JVP"):
    check_grads(g, (0.7,), 2, modes=["fwd"])
  with pytest.raises(AssertionError, match="VJP of VJP"):
    check_grads(g, (0.7,), 2, modes=["rev"])


def test_wrong_custom_vjp_fails():
  with pytest.raises(AssertionError, match="cotangent projection"):
    check_grads(_custom_sin_vjp(2.), (0.7,), 1, modes=["rev"])
  with pytest.raises(AssertionError):
    check_grads(nbjax.jit(_custom_sin_vjp(0.5)), (np.array([0.1, 0.7]),), 1, modes=["rev"])


def test_tolerances():
  wrong = _custom_sin_jvp(1.001)
  with pytest.raises(AssertionError):
    check_grads(wrong, (0.7,), 1, modes=["fwd"])
  check_grads(wrong, (0.7,), 1, modes=["fwd"], atol=1e-2, rtol=1e-2)
  check_grads(wrong, (0.7,), 1, modes=["fwd"], atol={np.float64: 1e-2}, rtol={np.float64: 1e-2})


def test_check_jvp_and_check_vjp_directly():
  f = lambda x, y: jnp.sin(x) * y
  args = (np.array([0.2, 0.4]), np.array([1.5, -1.0]))
  check_jvp(f, functools.partial(nbjax.jvp, f), args)
  check_vjp(f, functools.partial(nbjax.vjp, f), args)
  bad = lambda p, t: nbjax.jvp(f, p, (t[0], 2 * t[1]))
  with pytest.raises(AssertionError, match="tangent"):
    check_jvp(f, bad, args)


def test_primal_mismatch_is_reported():
  def lying_vjp(x):
    y, pullback = nbjax.vjp(jnp.sin, x)
    return y + 1., pullback
  with pytest.raises(AssertionError, match="primal"):
    check_vjp(jnp.sin, lying_vjp, (0.5,))


def test_not_importing_internal_harness():
  import sys
  import subprocess
  code = ("import sys, nbjax, nbjax.test_util; "
          "assert 'nbjax.testing' not in sys.modules, 'test_util imported nbjax.testing'")
  subprocess.run([sys.executable, "-c", code], check=True)
