"""nbjax.experimental.ode.odeint against JAX 0.10.2: every expected number below is what
JAX 0.10.2 (x64 on) returns for the same call."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.experimental.ode import odeint


def decay(y, t, k):
  return -k * y * t


TS = jnp.array([0., 0.5, 1.0])


def test_values():
  ys = odeint(decay, jnp.array([1., 2.]), TS, 0.7)
  assert ys.dtype == np.float64 and ys.shape == (3, 2)
  np.testing.assert_allclose(ys, [[1., 2.], [0.91621887, 1.83243773],
                                  [0.70468808, 1.40937615]], rtol=1e-8)
  # the exact solution y0 * exp(-k t^2 / 2)
  np.testing.assert_allclose(ys[:, 0], np.exp(-0.35 * np.asarray(TS) ** 2), rtol=1e-7)


def test_adjoint_grads():
  # reverse mode runs the custom_vjp adjoint (the augmented system integrated backwards)
  f = lambda y0, ts, k: odeint(decay, y0, ts, k)[-1].sum()
  g_y0, g_ts, g_k = nbjax.grad(f, argnums=(0, 1, 2))(jnp.array([1., 2.]), TS, 0.7)
  np.testing.assert_allclose(g_y0, [0.70468809, 0.70468809], rtol=1e-7)
  np.testing.assert_allclose(g_ts, [6.72502957e-09, 0., -1.47984496], rtol=1e-6, atol=1e-12)
  np.testing.assert_allclose(g_k, -1.05703211, rtol=1e-7)


def test_pytree_state_float32():
  ys = odeint(lambda y, t: {'a': -y['a'], 'b': y['b'] + y['a']},
              {'a': jnp.float32(1.), 'b': jnp.zeros(2, jnp.float32)},
              jnp.array([0., 1.], jnp.float32))
  assert ys['a'].dtype == ys['b'].dtype == np.float32
  np.testing.assert_allclose(ys['a'], [1., 0.3678794], rtol=1e-6)
  np.testing.assert_allclose(ys['b'], [[0., 0.], [1.175201, 1.175201]], rtol=1e-6)


def test_closure_grad_under_jit_and_vmap():
  @nbjax.jit
  def experiment(x):
    return odeint(lambda y, t: -x * y, 1., jnp.array([0., 1., 2.]))[-1]
  h, g = nbjax.vmap(nbjax.value_and_grad(experiment))(jnp.array([0.5, 1.0]))
  np.testing.assert_allclose(h, np.exp(-2 * np.array([0.5, 1.0])), rtol=1e-6)
  np.testing.assert_allclose(g, -2 * np.exp(-2 * np.array([0.5, 1.0])), rtol=1e-5)


def test_hmax():
  rhs = lambda y, t: jnp.piecewise(
      t, [t <= 2., (t >= 5.) & (t <= 7.)],
      [lambda s: jnp.array(1.), lambda s: jnp.array(-1.), lambda s: jnp.array(0.)])
  ys = odeint(rhs, jnp.array(0.), jnp.array([0., 5., 10.]), hmax=1.)
  assert abs(ys[1] - 2.) < 1e-4 and abs(ys[2]) < 1e-4


def test_errors():
  with pytest.raises(TypeError, match=r"t must be an array of floats, but got \[0 1\]\."):
    odeint(decay, 1., jnp.array([0, 1]), 0.5)
  with pytest.raises(TypeError, match="The contents of odeint \\*args must be arrays or "
                     "scalars, but got a\\."):
    odeint(decay, 1., TS, 'a')
  with pytest.raises(TypeError, match="can't apply forward-mode autodiff \\(jvp\\) to a "
                     "custom_vjp function."):
    nbjax.jvp(lambda k: odeint(decay, 1., TS, k), (0.5,), (1.,))
