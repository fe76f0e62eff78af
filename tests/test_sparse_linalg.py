"""nbjax.scipy.sparse.linalg (cg, bicgstab, gmres) against JAX 0.10.2: solutions checked by
their residuals, partial runs (few iterations) against JAX's iterates, hard-coded."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy.sparse.linalg import bicgstab, cg, gmres

_rng = np.random.RandomState(0)
_M0 = _rng.randn(6, 6)
SPD = jnp.array(_M0 @ _M0.T + 6 * np.eye(6))
NS = jnp.array(_M0 + 5 * np.eye(6))
B = jnp.array(_rng.randn(6))


def gmres_incremental(*args, **kwargs):
  return gmres(*args, solve_method="incremental", **kwargs)


SOLVERS = [("cg", cg, SPD), ("bicgstab", bicgstab, NS), ("gmres", gmres, NS),
           ("gmres_inc", gmres_incremental, NS)]


@pytest.mark.parametrize("name,solve,A", SOLVERS)
def test_solves_matrix_function_and_preconditioned(name, solve, A):
  exact = np.linalg.solve(np.asarray(A), np.asarray(B))
  x, info = solve(A, B)
  if name.startswith("gmres"):
    assert info.dtype == np.int64 and info.weak_type and int(info) == 0
  else:
    assert info is None
  assert x.dtype == np.float64 and x.shape == (6,)
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-4, atol=1e-5)
  x, _ = solve(lambda v: A @ v, B, tol=1e-10)
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-8)
  x, _ = solve(A, B, M=jnp.diag(1 / jnp.diag(A)), tol=1e-10)
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-8)
  x, _ = solve(A, B, M=lambda v: v / jnp.diag(A), tol=1e-10)
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-8)
  x, _ = solve(A.astype(jnp.float32), B.astype(jnp.float32))
  assert x.dtype == np.float32
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-3, atol=1e-4)


def test_partial_iterations_match_jax():
  # JAX 0.10.2's iterates after few steps (not the solution, so they pin the algorithm)
  np.testing.assert_allclose(np.asarray(cg(SPD, B, maxiter=2)[0]),
                             [0.062340801827886795, 0.1435246619415074, -0.0693207769752712,
                              -0.020608867748283632, -0.11517813515118677,
                              -0.10958605006706422], rtol=1e-12)
  np.testing.assert_allclose(np.asarray(cg(SPD, B, x0=jnp.ones(6), atol=1e-3, tol=0.0)[0]),
                             [0.06811086490106406, 0.17575373625879484, -0.070672360239603,
                              -0.008069505794889326, -0.10806006071056412,
                              -0.09716474593324684], rtol=1e-12)
  np.testing.assert_allclose(np.asarray(bicgstab(NS, B, maxiter=2)[0]),
                             [0.1732708495210026, 0.326542576271284, -0.08800325820330074,
                              -0.08596043566129558, -0.06891294601388812,
                              -0.3531539882386945], rtol=1e-12)
  expected = [0.1732774271805695, 0.3290649191263791, -0.09144761693039617,
              -0.09145019421171277, -0.06865162562377002, -0.35992467772005843]
  for method in ("batched", "incremental"):
    x, _ = gmres(NS, B, restart=2, maxiter=3, solve_method=method)
    np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-12)


@pytest.mark.parametrize("name,solve,A", SOLVERS)
def test_pytrees(name, solve, A):
  def op(t):
    return {"a": 2 * t["a"] + 0.5 * t["b"][0], "b": (t["b"][0] * 3 + t["a"][:1],)}

  b = {"a": jnp.ones(3), "b": (jnp.arange(1., 2.),)}
  x, _ = solve(op, b, tol=1e-10)
  assert set(x) == {"a", "b"} and x["b"][0].shape == (1,)
  r = op(x)
  np.testing.assert_allclose(np.asarray(r["a"]), np.ones(3), rtol=1e-8)
  np.testing.assert_allclose(np.asarray(r["b"][0]), [1.], rtol=1e-8)


@pytest.mark.parametrize("name,solve,A", SOLVERS)
def test_complex(name, solve, A):
  rng = np.random.RandomState(1)
  C = _M0 + 1j * rng.randn(6, 6) + 6 * np.eye(6)
  if name == "cg":
    C = C @ C.conj().T
  b = rng.randn(6) + 1j * rng.randn(6)
  x, _ = solve(jnp.array(C), jnp.array(b), tol=1e-10)
  assert x.dtype == np.complex128
  np.testing.assert_allclose(np.asarray(x), np.linalg.solve(C, b), rtol=1e-8)


@pytest.mark.parametrize("name,solve,A", SOLVERS)
def test_jit_vmap_grad(name, solve, A):
  exact = np.linalg.solve(np.asarray(A), np.asarray(B))
  x = nbjax.jit(lambda A, b: solve(A, b, tol=1e-10)[0])(A, B)
  np.testing.assert_allclose(np.asarray(x), exact, rtol=1e-8)
  xs = nbjax.vmap(lambda b: solve(A, b, tol=1e-10)[0])(jnp.stack([B, 2 * B]))
  np.testing.assert_allclose(np.asarray(xs), np.stack([exact, 2 * exact]), rtol=1e-8)
  # d/db sum(x^2) = 2 A^-T x;  d/dA = -(A^-T 2x) x^T
  gA, gb = nbjax.grad(lambda A, b: jnp.sum(solve(A, b, tol=1e-12)[0] ** 2), argnums=(0, 1))(A, B)
  An = np.asarray(A)
  lam = np.linalg.solve(An.T, 2 * exact)
  np.testing.assert_allclose(np.asarray(gb), lam, rtol=1e-7)
  np.testing.assert_allclose(np.asarray(gA), -np.outer(lam, exact), rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize("solve", [cg, bicgstab, gmres])
def test_errors(solve):
  with pytest.raises(ValueError, match=r"x0 and b must have matching tree structure: "
                     r"PyTreeDef\(\[\*\]\) vs PyTreeDef\(\*\)"):
    solve(SPD, B, x0=[jnp.ones(6)])
  with pytest.raises(ValueError, match=r"linear operator must be a square matrix, but has "
                     r"shape: \(6, 5\)"):
    solve(jnp.ones((6, 5)), B)
  with pytest.raises(TypeError, match="linear operator must be either a function or ndarray: x"):
    solve("x", B)
  if solve is gmres:
    with pytest.raises(ValueError, match="invalid solve_method foo, must be either "
                       "'incremental' or 'batched'"):
      gmres(SPD, B, solve_method="foo")
  else:
    with pytest.raises(ValueError, match=r"arrays in x0 and b must have matching shapes: "
                       r"\[\(5,\)\] vs \[\(6,\)\]"):
      solve(SPD, B, x0=jnp.ones(5))
    with pytest.raises(TypeError, match="unexpected keyword argument 'solve_method'"):
      solve(SPD, B, solve_method="batched")


def test_gmres_nan_info():
  # a singular system breaks the least-squares solve: NaN and info -1, as JAX's
  x, info = gmres(jnp.array([[1., 2.], [2., 4.]]), jnp.ones(2))
  assert int(info) == -1 and np.isnan(np.asarray(x)).all()
  # an all-NaN operator: the residual is NaN, no iteration runs, x0 (zeros) comes back
  x, info = gmres(jnp.full((2, 2), jnp.nan), jnp.ones(2))
  assert int(info) == 0 and not np.asarray(x).any()
