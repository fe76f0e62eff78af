"""nbjax.scipy.linalg against scipy.linalg: factorizations (cholesky, lu, lu_factor, qr, svd,
eigh) and solves (solve_triangular for every trans/lower/unit_diagonal, cho_solve, lu_solve
for trans 0/1/2, solve with assume_a), expm at norms that pick each Pade degree and with
squarings, block_diag; derivatives by finite differences; jit and vmap."""
import warnings

import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy import linalg as L
from nbjax.test_util import check_grads

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _rand(shape, dtype):
  x = RNG.normal(size=shape)
  if np.issubdtype(dtype, np.complexfloating):
    x = x + 1j * RNG.normal(size=shape)
  return x.astype(dtype)


def _spd(n, dtype):
  a = _rand((n, n), dtype)
  return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def _tol(dtype):
  return 1e-4 if dtype in (np.float32, np.complex64) else 1e-10


def _close(got, want, dtype, scale=1):
  assert np.asarray(got).dtype == dtype
  np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(dtype) * scale,
                             atol=_tol(dtype) * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_cho_solve(dtype, lower):
  a, b = _spd(4, dtype), _rand((4, 3), dtype)
  _close(L.cholesky(a, lower=lower), sl.cholesky(a, lower=lower), dtype)
  c = L.cho_factor(a, lower=lower)
  assert c[1] is lower
  _close(L.cho_solve(c, b), sl.cho_solve(sl.cho_factor(a, lower=lower), b), dtype, 10)
  _close(L.cho_solve(c, b[:, 0]), np.linalg.solve(a, b[:, 0]), dtype, 10)
  batch = np.stack([a, 2 * a])  # a (2, 4, 4) batch against one (4, 3) right-hand side
  _close(L.cho_solve(L.cho_factor(batch, lower=lower), b), np.linalg.solve(batch, b), dtype, 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_triangular(dtype, trans, lower):
  a = _rand((4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
  b = _rand((4, 2), dtype)
  for unit in [False, True]:
    want = sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit)
    _close(L.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit), want, dtype,
           10)
  _close(L.solve_triangular(a, b[:, 1], trans=trans, lower=lower),
         sl.solve_triangular(a, b[:, 1], trans=trans, lower=lower), dtype, 10)


def test_solve_triangular_errors_and_batched_vector_warning():
  with pytest.raises(ValueError, match="Invalid 'trans' value"):
    L.solve_triangular(np.eye(2), np.ones(2), trans=3)
  a = np.stack([np.eye(3) * 2, np.eye(3) * 4])
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    got = L.solve_triangular(a, np.ones((2, 3)))
  assert any(issubclass(x.category, FutureWarning) for x in w)
  np.testing.assert_allclose(np.asarray(got), [[0.5] * 3, [0.25] * 3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_lu_factor_lu_solve(dtype):
  a, b = _rand((5, 5), dtype), _rand((5, 2), dtype)
  lu, piv = L.lu_factor(a)
  slu, spiv = sl.lu_factor(a)
  _close(lu, slu, dtype, 10)
  np.testing.assert_array_equal(np.asarray(piv), spiv)
  for trans in [0, 1, 2]:
    _close(L.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((slu, spiv), b, trans=trans),
           dtype, 100)
    _close(L.lu_solve((lu, piv), b[:, 0], trans=trans),
           sl.lu_solve((slu, spiv), b[:, 0], trans=trans), dtype, 100)
  with pytest.raises(ValueError, match="'trans' value must be 0, 1, or 2"):
    L.lu_solve((lu, piv), b, trans=3)
  for shape in [(4, 4), (3, 5), (5, 3)]:
    x = _rand(shape, dtype)
    p, l, u = L.lu(x)
    sp_, sl_, su = sl.lu(x)
    _close(p, sp_, np.zeros((), dtype).real.dtype)  # the permutation is real, as JAX's
    _close(l, sl_, dtype, 10)
    _close(u, su, dtype, 10)
    pl, u2 = L.lu(x, permute_l=True)
    _close(pl, sp_ @ sl_, dtype, 10)


def test_lu_solve_batched_and_transformed():
  a = _rand((3, 4, 4), np.float64)
  b = _rand((3, 4, 2), np.float64)
  fac = L.lu_factor(a)
  np.testing.assert_allclose(np.asarray(L.lu_solve(fac, b)), np.linalg.solve(a, b), rtol=1e-10)
  np.testing.assert_allclose(np.asarray(nbjax.vmap(L.lu_solve)(fac, b)),
                             np.linalg.solve(a, b), rtol=1e-10)
  np.testing.assert_allclose(np.asarray(nbjax.jit(L.lu_solve, static_argnames="trans")(
      fac, b, trans=1)), np.linalg.solve(np.swapaxes(a, -1, -2), b), rtol=1e-10)
  check_grads(lambda x, y: L.lu_solve(L.lu_factor(x), y), (a[0], b[0]), order=1, eps=1e-5,
              atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_qr_svd(dtype, shape):
  x = _rand(shape, dtype)
  for mode in ["full", "economic"]:
    q, r = L.qr(x, mode=mode)
    sq, sr = sl.qr(x, mode=mode)
    assert q.shape == sq.shape and r.shape == sr.shape
    _close(np.asarray(q) @ np.asarray(r), x, dtype, 10)
    assert r.dtype == dtype  # unique up to signs (phases)
    _close(np.abs(np.asarray(r)), np.abs(sr), np.zeros((), dtype).real.dtype, 10)
  r, = L.qr(x, mode="r")
  assert r.shape == sl.qr(x, mode="r")[0].shape
  with pytest.raises(ValueError, match="Unsupported QR decomposition mode"):
    L.qr(x, mode="raw")
  _close(L.svd(x, compute_uv=False), sl.svd(x, compute_uv=False),
         np.zeros((), dtype).real.dtype, 10)
  u, s, vh = L.svd(x, full_matrices=False)
  _close(np.asarray(u) * np.asarray(s) @ np.asarray(vh), x, dtype, 10)
  assert L.svd(x)[0].shape == (shape[0], shape[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_inv_det_solve(dtype):
  a = _spd(4, dtype)
  _close(L.eigh(a, eigvals_only=True), sl.eigh(a, eigvals_only=True),
         np.zeros((), dtype).real.dtype, 10)
  for lower in [True, False]:
    w, v = L.eigh(a, lower=lower)
    _close(np.asarray(v) * np.asarray(w) @ np.asarray(v).conj().T, a, dtype, 100)
  with pytest.raises(NotImplementedError, match="b=None"):
    L.eigh(a, a)
  g = _rand((4, 4), dtype)
  b = _rand((4, 2), dtype)
  _close(L.inv(g), sl.inv(g), dtype, 100)
  _close(L.det(g), sl.det(g), dtype, 100)
  for assume_a in ["gen", "sym", "her", "pos"]:
    m = a if assume_a != "gen" else g
    _close(L.solve(m, b, assume_a=assume_a), np.linalg.solve(m, b), dtype, 100)
  _close(L.solve(np.tril(a), b, assume_a="pos", lower=True), np.linalg.solve(a, b), dtype, 100)
  _close(L.solve(a, b[:, 0], assume_a="pos"), np.linalg.solve(a, b[:, 0]), dtype, 100)
  with pytest.raises(ValueError, match="Expected assume_a to be one of"):
    L.solve(a, b, assume_a="tri")


def test_solve_pos_gradient_is_the_linear_solve_gradient():
  a, b = _spd(4, np.float64), _rand((4, 2), np.float64)
  f = lambda m: jnp.sum(jnp.sin(L.solve(m, b, assume_a="pos")))  # noqa: E731
  g = lambda m: jnp.sum(jnp.sin(jnp.linalg.solve(m, b)))  # noqa: E731
  np.testing.assert_allclose(np.asarray(nbjax.grad(f)(a)), np.asarray(nbjax.grad(g)(a)),
                             rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [1e-3, 0.1, 0.5, 1.5, 4., 30., 200.])
def test_expm(dtype, scale):
  # the scales select every Pade degree, and from 4 on squarings
  if scale > 100 and dtype in (np.float32, np.complex64):
    pytest.skip("exp(A) overflows single precision")
  a = _rand((4, 4), dtype) * (scale / 4)
  want = sl.expm(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64))
  got = L.expm(a)
  assert got.dtype == dtype
  np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(dtype) * 10,
                             atol=_tol(dtype) * 10 * np.abs(want).max())


def test_expm_special_cases_and_transforms():
  a = _rand((3, 4, 4), np.float64) / 2
  np.testing.assert_allclose(np.asarray(L.expm(a)), np.stack([sl.expm(x) for x in a]),
                             rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nbjax.vmap(L.expm)(a)), np.stack([sl.expm(x) for x in a]),
                             rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nbjax.jit(L.expm)(a[0] * 40)), sl.expm(a[0] * 40),
                             rtol=1e-10)
  u = np.triu(a[0])
  np.testing.assert_allclose(np.asarray(L.expm(u, upper_triangular=True)), sl.expm(u),
                             rtol=1e-12)
  assert np.isnan(np.asarray(L.expm(a[0] * 1e8, max_squarings=4))).all()
  np.testing.assert_allclose(np.asarray(L.expm(np.zeros((3, 3)))), np.eye(3))
  assert L.expm(np.eye(2, dtype=np.int32)).dtype == np.float32  # JAX 0.10: int32 -> f32
  with pytest.raises(ValueError, match="Expected A to be a"):
    L.expm(np.ones((2, 3)))
  check_grads(L.expm, (a[0] * 0.3,), order=1, eps=1e-5, atol=1e-7, rtol=1e-7)
  check_grads(L.expm, (a[0] * 6,), order=1, modes=("rev",), eps=1e-5, atol=1e-5, rtol=1e-6)


def test_block_diag():
  args = (np.ones((2, 2)), np.array([1, 2, 3]), np.float32(5.), np.ones((2, 0)))
  got = L.block_diag(*args)
  assert got.dtype == np.float64
  np.testing.assert_array_equal(np.asarray(got), sl.block_diag(*args))
  np.testing.assert_array_equal(np.asarray(L.block_diag(np.ones((2, 2), int), np.array([[1, 2, 3]]))),
                                sl.block_diag(np.ones((2, 2), int), [[1, 2, 3]]))
  assert L.block_diag().shape == (1, 0)
  with pytest.raises(ValueError, match="at most 2 dimensions"):
    L.block_diag(np.ones((1, 1, 1)))


def test_factorization_gradients():
  a, b = _spd(4, np.float64), _rand((4, 2), np.float64)
  g = _rand((4, 4), np.float64) + 4 * np.eye(4)
  check_grads(lambda x: L.solve_triangular(x, b, lower=True, trans=1), (np.tril(g),), order=1,
              eps=1e-5, atol=1e-6, rtol=1e-6)
  check_grads(lambda x: L.cho_solve((L.cholesky(x, lower=True), True), b), (a,), order=1,
              modes=("fwd",), eps=1e-5, atol=1e-6, rtol=1e-6)
  check_grads(lambda x: L.det(x), (g,), order=1, eps=1e-5, atol=1e-6, rtol=1e-6)


def test_special_matrices_and_expm_frechet():
  c, r = RNG.normal(size=(2, 4)), RNG.normal(size=3)
  np.testing.assert_array_equal(np.asarray(L.toeplitz(c[0], r)), sl.toeplitz(c[0], r))
  np.testing.assert_array_equal(np.asarray(L.toeplitz(c[0] + 1j)), sl.toeplitz(c[0] + 1j))
  np.testing.assert_array_equal(np.asarray(L.toeplitz(c)), np.stack([sl.toeplitz(x) for x in c]))
  np.testing.assert_array_equal(np.asarray(L.hankel(c[0], r)), sl.hankel(c[0], r))
  np.testing.assert_array_equal(np.asarray(L.hankel(c[1])), sl.hankel(c[1]))
  np.testing.assert_array_equal(np.asarray(L.circulant(c)), np.stack([sl.circulant(x) for x in c]))
  np.testing.assert_allclose(np.asarray(L.hilbert(5)), sl.hilbert(5), rtol=1e-15)
  assert L.toeplitz(np.arange(3), np.ones(2, np.float32)).dtype == np.float32
  with pytest.raises(ValueError, match="c must be at least 1-dimensional"):
    L.hankel(1.)
  a, e = RNG.normal(size=(2, 3, 3)), RNG.normal(size=(2, 3, 3))
  for x, d in zip(a, e):
    ea, fr = L.expm_frechet(x, d)
    sea, sfr = sl.expm_frechet(x, d)
    np.testing.assert_allclose(np.asarray(ea), sea, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(fr), sfr, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(np.asarray(L.expm_frechet(a, e, compute_expm=False)),
                             np.stack([sl.expm_frechet(x, d)[1] for x, d in zip(a, e)]),
                             rtol=1e-10, atol=1e-12)
  with pytest.raises(ValueError, match="expected A and E to be the same shape"):
    L.expm_frechet(a, e[0])


def test_cholesky_failure_nans_one_triangle_as_jax():
  a = -np.array([[4.0, 1.0, 2.0], [1.0, 5.0, 3.0], [2.0, 3.0, 6.0]])
  low = np.asarray(jnp.linalg.cholesky(a))
  assert np.isnan(np.tril(low)[np.tril_indices(3)]).all() and (np.triu(low, 1) == 0).all()
  up = np.asarray(L.cholesky(a))  # upper: NaNs on and above the diagonal, zeros below
  assert np.isnan(up[np.triu_indices(3)]).all() and (np.tril(up, -1) == 0).all()
  np.testing.assert_array_equal(np.asarray(nbjax.jit(jnp.linalg.cholesky)(a)), low)
