"""nbjax.scipy.optimize.minimize against JAX 0.10.2: every expected number below is what
JAX 0.10.2 (x64 on) returns for the same call."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy.optimize import OptimizeResults, minimize
from nbjax.scipy.optimize._line_search import line_search

BFGS = "BFGS"
LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def rosen(x):
  return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def himmelblau(x):
  return (x[0] ** 2 + x[1] - 11) ** 2 + (x[0] + x[1] ** 2 - 7) ** 2


def quad(x, A, b):
  return 0.5 * x @ A @ x - b @ x


A = jnp.array([[3., 1., 0.], [1., 4., 1.], [0., 1., 2.]])
B = jnp.array([1., -2., 3.])


def _check(r, expected, rtol=1e-9):
  assert isinstance(r, OptimizeResults)
  np.testing.assert_allclose(np.asarray(r.x), expected["x"], rtol=rtol, atol=1e-12)
  np.testing.assert_allclose(np.asarray(r.fun), expected["fun"], rtol=rtol, atol=1e-12)
  for f in ("status", "nfev", "nit", "success"):
    np.testing.assert_array_equal(np.asarray(getattr(r, f)), expected[f], err_msg=f)
  np.testing.assert_array_equal(np.asarray(r.njev), expected["nfev"])


CASES = {
    (BFGS, "rosen"): ((rosen, jnp.array([-1.2, 1.0, 0.5, 2.0]), (), None),
                      {"x": [-0.7756590917964853, 0.6130931500555755, 0.3820625587661512,
                             0.14597177671365186], "fun": 3.7014286104301726, "status": 0,
                       "nfev": 37, "nit": 31, "success": True}),
    (BFGS, "quad"): ((quad, jnp.zeros(3), (A, B), None),
                     {"x": [0.7368420001192015, -1.2105262546630242, 2.1052630609424408],
                      "fun": -4.736842105263138, "status": 0, "nfev": 11, "nit": 10,
                      "success": True}),
    (BFGS, "himmelblau_maxiter"): ((himmelblau, jnp.array([0.5, -1.5]), (), {"maxiter": 3}),
                                   {"x": [3.5909449966506704, -1.8539505514402326],
                                    "fun": 0.0024640624917690707, "status": 1, "nfev": 13,
                                    "nit": 3, "success": False}),
    (BFGS, "kink"): ((lambda x: jnp.sum(jnp.abs(x)) + jnp.sum(x ** 2), jnp.array([1.0, -2.0]),
                      (), None),
                     {"x": [-0.015660359348911405, 0.013687888271500435],
                      "fun": 0.02978085276068196, "status": 3, "nfev": 11, "nit": 7,
                      "success": False}),
    (BFGS, "norm2"): ((rosen, jnp.array([-1.2, 1.0]), (),
                       {"norm": 2, "gtol": 1e-8, "line_search_maxiter": 5}),
                      {"x": [-0.2778069614751315, 0.043338775200157394],
                       "fun": 1.7472911993555371, "status": 3, "nfev": 17, "nit": 8,
                       "success": False}),
    (LBFGS, "rosen"): ((rosen, jnp.array([-1.2, 1.0, 0.5, 2.0]), (), None),
                       {"x": [-0.8433038622634764, 0.716753735283262, 0.5170845207932414,
                              0.26488499913716756], "fun": 3.716074375318788, "status": 5,
                        "nfev": 37, "nit": 22, "success": False}),
    (LBFGS, "quad"): ((quad, jnp.zeros(3), (A, B), None),
                      {"x": [0.7368420928084224, -1.2105258504173637, 2.1052628264495743],
                       "fun": -4.736842105262775, "status": 0, "nfev": 8, "nit": 7,
                       "success": True}),
    (LBFGS, "himmelblau"): ((himmelblau, jnp.array([0.5, -1.5]), (), None),
                            {"x": [3.7145150928304993, -1.597409548267591],
                             "fun": 1.9789257819772403, "status": 5, "nfev": 6, "nit": 1,
                             "success": False}),
}


@pytest.mark.parametrize("key", sorted(CASES), ids=lambda k: f"{k[0][:5]}-{k[1]}")
def test_minimize_matches_jax(key):
  (fun, x0, args, options), expected = CASES[key]
  r = minimize(fun, x0, args, method=key[0].lower() if key[1] == "quad" else key[0],
               options=options)
  _check(r, expected)
  assert r.x.dtype == np.float64 and r.status.dtype == np.int64 and r.status.weak_type
  assert r.success.dtype == np.bool_
  if key[0] == BFGS:
    assert r.hess_inv.shape == (x0.shape[0],) * 2
  else:
    assert r.hess_inv is None


def test_bfgs_hess_inv_and_tol_ignored():
  r = minimize(himmelblau, jnp.array([0.5, -1.5]), method=BFGS, tol=1e-3)  # tol unused, as JAX
  _check(r, {"x": [3.584428384685341, -1.8481263921173332], "fun": 4.112297450873243e-13,
             "status": 0, "nfev": 16, "nit": 6, "success": True}, rtol=1e-7)
  np.testing.assert_allclose(np.asarray(r.hess_inv),
                             [[0.00959023709597836, -0.0023468330951925487],
                              [-0.0023468330951925483, 0.03462101382681545]], rtol=1e-7)


def test_minimize_under_jit():
  x0 = jnp.array([2.0, 2.5, -0.5])
  r = nbjax.jit(lambda x: minimize(rosen, x, method=BFGS))(x0)
  _check(r, {"x": [1.1656607741472196, 1.3559456001231909, 1.8207605004861245],
             "fun": 0.18671933813555996, "status": 3, "nfev": 25, "nit": 21, "success": False})
  r = nbjax.jit(lambda x: minimize(rosen, x, method=LBFGS))(x0)
  _check(r, {"x": [1.000000013678278, 1.0000000227572514, 1.0000000457945284],
             "fun": 2.828189743323633e-15, "status": 0, "nfev": 53, "nit": 32, "success": True},
         rtol=1e-7)


def test_minimize_under_vmap():
  x0 = jnp.array([[0.5, -1.5], [-3., 3.], [4., 4.]])
  r = nbjax.vmap(lambda x: minimize(himmelblau, x, method=BFGS))(x0)
  _check(r, {"x": [[3.584428384685341, -1.8481263921173332],
                   [-2.805118090526249, 3.1313125283793415],
                   [3.000000020926253, 2.000000007728354]],
             "fun": [4.112297450873243e-13, 4.493770412703227e-15, 2.0452475271030273e-14],
             "status": [0, 0, 0], "nfev": [16, 11, 19], "nit": [6, 5, 13],
             "success": [True, True, True]}, rtol=1e-7)


def test_float32():
  r = minimize(rosen, jnp.array([-1.2, 1.0], jnp.float32), method=BFGS)
  assert r.x.dtype == np.float32 and r.hess_inv.dtype == np.float32
  # JAX: x [-0.27781, 0.043342], 17 evaluations, line search failed (status 3)
  np.testing.assert_allclose(np.asarray(r.x), [-0.2778100073337555, 0.04334153234958649],
                             rtol=1e-4)
  assert int(r.status) == 3 and int(r.nit) == 8


def test_errors():
  with pytest.raises(TypeError, match=r"args argument to jax.scipy.optimize.minimize must be a "
                     r"tuple, got \[1\]"):
    minimize(rosen, jnp.zeros(2), args=[1], method=BFGS)
  with pytest.raises(ValueError, match="Method nelder-mead not recognized"):
    minimize(rosen, jnp.zeros(2), method="nelder-mead")
  with pytest.raises(TypeError):
    minimize(rosen, jnp.zeros(2))  # method is required


def test_line_search_strong_wolfe():
  f = lambda x: jnp.sum((x - 3.0) ** 2) + jnp.sum(jnp.sin(x))
  xk = jnp.array([0.0, 1.0])
  g = nbjax.grad(f)(xk)
  pk = -g
  r = line_search(f, xk, pk)
  assert not bool(r.failed) and int(r.status) == 0
  a = float(r.a_k)
  phi0, dphi0 = float(f(xk)), float(jnp.dot(g, pk))
  assert float(f(xk + a * pk)) <= phi0 + 1e-4 * a * dphi0
  assert abs(float(jnp.dot(nbjax.grad(f)(xk + a * pk), pk))) <= 0.9 * abs(dphi0)
  np.testing.assert_allclose(np.asarray(r.g_k), np.asarray(nbjax.grad(f)(xk + a * pk)))
