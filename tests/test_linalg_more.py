"""The rarer linear algebra: ``lax.linalg.schur``/``hessenberg`` (and the other primitives
of ``nbjax/lax/_linalg_more.py``) and the ``scipy.linalg`` functions over them.

Against SciPy (the same LAPACK routines: the decompositions agree bit for bit), by
reconstruction identities (``Z T Z^H = A``, ``Q H Q^H = A``, ``sqrtm(A)^2 = A``), eager vs
jit vs vmap, and JAX's errors."""
import numpy as np
import pytest
import scipy.linalg as sl

import nbjax
import nbjax.numpy as jnp
from nbjax.lax import linalg as lax_linalg
from nbjax.scipy import linalg as L

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def _rand(rng, shape, dtype):
  x = rng.standard_normal(shape)
  if np.issubdtype(dtype, np.complexfloating):
    x = x + 1j * rng.standard_normal(shape)
  return x.astype(dtype)


def _tol(dtype):
  return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-11


def _close(got, want, dtype, scale=1.0):
  np.testing.assert_allclose(np.asarray(got), want, rtol=_tol(dtype) * scale,
                             atol=_tol(dtype) * scale)


def _H(x):
  return np.conj(np.swapaxes(x, -1, -2))


# ----------------------------------------------------------------- lax.linalg.schur


@pytest.mark.parametrize("dtype", DTYPES)
def test_schur_matches_scipy_and_reconstructs(dtype):
  rng = np.random.default_rng(0)
  a = _rand(rng, (3, 6, 6), dtype)
  t, z = lax_linalg.schur(a)
  assert t.dtype == dtype and z.dtype == dtype and t.shape == a.shape
  out = "complex" if np.dtype(dtype).kind == "c" else "real"
  for b in range(3):
    ts, zs = sl.schur(a[b], output=out)
    np.testing.assert_array_equal(np.asarray(t[b]), ts)  # the same LAPACK ?gees
    np.testing.assert_array_equal(np.asarray(z[b]), zs)
  _close(np.asarray(z) @ np.asarray(t) @ _H(np.asarray(z)), a, dtype, 10)
  _close(_H(np.asarray(z)) @ np.asarray(z), np.broadcast_to(np.eye(6), a.shape), dtype, 10)
  # quasi-triangular: nothing below the first subdiagonal
  assert not np.any(np.tril(np.asarray(t), -2))
  if out == "complex":
    assert not np.any(np.tril(np.asarray(t), -1))


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_schur_jit_vmap_and_no_vectors(dtype):
  rng = np.random.default_rng(1)
  a = _rand(rng, (4, 5, 5), dtype)
  t, z = lax_linalg.schur(a)
  tj, zj = nbjax.jit(lax_linalg.schur)(a)
  np.testing.assert_array_equal(np.asarray(tj), np.asarray(t))
  np.testing.assert_array_equal(np.asarray(zj), np.asarray(z))
  tv, zv = nbjax.vmap(lax_linalg.schur)(a)
  np.testing.assert_array_equal(np.asarray(tv), np.asarray(t))
  tl = [lax_linalg.schur(a[i])[0] for i in range(4)]
  np.testing.assert_array_equal(np.asarray(tv), np.stack([np.asarray(x) for x in tl]))
  only = lax_linalg.schur(a, compute_schur_vectors=False)
  assert isinstance(only, tuple) and len(only) == 1
  onlyj = nbjax.jit(lambda x: lax_linalg.schur(x, compute_schur_vectors=False))(a)
  assert len(onlyj) == 1
  np.testing.assert_array_equal(np.asarray(onlyj[0]), np.asarray(only[0]))
  # eigenvalues from T
  w = np.linalg.eigvals(a[0])
  if np.dtype(dtype).kind == "c":
    np.testing.assert_allclose(np.sort_complex(np.diag(np.asarray(t[0]))), np.sort_complex(w),
                               rtol=1e-4, atol=1e-4)


def test_schur_errors_as_jax():
  with pytest.raises(ValueError, match="The input to schur must be a square matrix"):
    lax_linalg.schur(np.ones((2, 3)))
  with pytest.raises(TypeError, match="schur does not accept dtype int32 at position 0"):
    lax_linalg.schur(np.ones((2, 2), np.int32))
  with pytest.raises(TypeError, match="Input 0 to schur must have rank at least 2"):
    lax_linalg.schur(np.ones(3))
  with pytest.raises(NotImplementedError, match="sort feature of LAPACK's gees"):
    lax_linalg.schur(np.eye(3), sort_eig_vals=True)
  with pytest.raises(NotImplementedError, match="sort feature of LAPACK's gees"):
    nbjax.jit(lambda x: lax_linalg.schur(x, sort_eig_vals=True))(np.eye(3))
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'schur' not"):
    nbjax.grad(lambda x: lax_linalg.schur(x)[0].sum())(np.eye(3))


def test_schur_edge_cases():
  t, z = lax_linalg.schur(np.zeros((0, 0)))
  assert t.shape == (0, 0) and z.shape == (0, 0)
  t, z = nbjax.jit(lax_linalg.schur)(np.zeros((2, 0, 0), np.float32))
  assert t.shape == (2, 0, 0) and t.dtype == np.float32
  # LAPACK's failure on non-finite input: NaNs (as JAX's info check)
  with np.errstate(invalid="ignore"):
    bad = np.eye(3) * np.inf
  t, z = lax_linalg.schur(bad)
  assert np.isnan(np.asarray(t)).all() and np.isnan(np.asarray(z)).all()
  t, z = lax_linalg.schur(np.array([[2.0]]))
  np.testing.assert_array_equal(np.asarray(t), [[2.0]])
  np.testing.assert_array_equal(np.asarray(z), [[1.0]])


# ----------------------------------------------------------------- lax.linalg.hessenberg


@pytest.mark.parametrize("dtype", DTYPES)
def test_hessenberg_packed_matches_lapack(dtype):
  rng = np.random.default_rng(2)
  a = _rand(rng, (2, 5, 5), dtype)
  h, taus = lax_linalg.hessenberg(a)
  assert h.dtype == dtype and taus.dtype == dtype and taus.shape == (2, 4)
  from scipy.linalg import lapack
  gehrd, = lapack.get_lapack_funcs(("gehrd",), (a[0],))
  for b in range(2):
    hs, ts, info = gehrd(a[b])
    np.testing.assert_array_equal(np.asarray(h[b]), hs)
    np.testing.assert_array_equal(np.asarray(taus[b]), ts[:4])
  hj, tj = nbjax.jit(lax_linalg.hessenberg)(a)
  np.testing.assert_array_equal(np.asarray(hj), np.asarray(h))
  hv, tv = nbjax.vmap(lax_linalg.hessenberg)(a)
  np.testing.assert_array_equal(np.asarray(tv), np.asarray(taus))


def test_hessenberg_errors_as_jax():
  with pytest.raises(ValueError, match=r"Argument to Hessenberg reduction must have shape"):
    lax_linalg.hessenberg(np.ones((2, 3)))
  with pytest.raises(TypeError, match="hessenberg does not accept dtype int32"):
    lax_linalg.hessenberg(np.ones((2, 2), np.int32))
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'hessenberg' not"):
    nbjax.grad(lambda x: lax_linalg.hessenberg(x)[0].sum())(np.eye(3))
  h, t = lax_linalg.hessenberg(np.ones((1, 1)))
  assert h.shape == (1, 1) and t.shape == (0,)


# ----------------------------------------------------------------- scipy.linalg.schur & co


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_scipy_schur(dtype, output):
  rng = np.random.default_rng(3)
  a = _rand(rng, (5, 5), dtype)
  t, z = L.schur(a, output=output)
  ts, zs = sl.schur(a, output=output)
  assert t.dtype == ts.dtype and z.dtype == zs.dtype
  np.testing.assert_array_equal(np.asarray(t), ts)
  np.testing.assert_array_equal(np.asarray(z), zs)


def test_scipy_schur_dtypes_and_errors():
  with pytest.raises(ValueError, match="Expected 'output' to be either 'real' or 'complex'"):
    L.schur(np.eye(2), output="foo")
  with pytest.raises(TypeError, match="schur does not accept dtype int32"):
    L.schur(np.eye(2, dtype=np.int32))
  assert L.schur(np.eye(2, dtype=np.int32), output="complex")[0].dtype == np.complex64
  assert L.schur(np.eye(2, dtype=np.int64), output="complex")[0].dtype == np.complex128


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rsf2csf(dtype):
  rng = np.random.default_rng(4)
  a = _rand(rng, (6, 6), dtype)
  ts, zs = sl.schur(a)
  t, z = L.rsf2csf(ts, zs)
  tw, zw = sl.rsf2csf(ts, zs)
  cd = np.complex64 if dtype == np.float32 else np.complex128
  assert t.dtype == cd and z.dtype == cd
  _close(t, tw, dtype, 10)
  _close(z, zw, dtype, 10)
  assert not np.any(np.tril(np.asarray(t), -1))
  _close(np.asarray(z) @ np.asarray(t) @ _H(np.asarray(z)), a, dtype, 10)
  # batched: broadcasting leading dims, as a loop
  tb, zb = L.rsf2csf(np.stack([ts, ts]), zs)
  np.testing.assert_array_equal(np.asarray(tb[1]), np.asarray(t))
  with pytest.raises(ValueError, match="Input 'T' must be square"):
    L.rsf2csf(np.ones((2, 3)), np.ones((2, 2)))
  with pytest.raises(ValueError, match="Input array shapes must match"):
    L.rsf2csf(np.ones((2, 2)), np.ones((3, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sqrtm(dtype):
  rng = np.random.default_rng(5)
  a = _rand(rng, (5, 5), dtype)
  r = L.sqrtm(a)
  cd = np.complex64 if np.dtype(dtype) in (np.float32, np.complex64) else np.complex128
  assert r.dtype == cd
  _close(r, sl.sqrtm(a.astype(cd)), dtype, 50)
  _close(np.asarray(r) @ np.asarray(r), a, dtype, 50)
  rj = nbjax.jit(L.sqrtm)(a)
  _close(rj, np.asarray(r), dtype)


def test_sqrtm_special_cases_as_jax():
  np.testing.assert_array_equal(np.asarray(L.sqrtm(np.zeros((3, 3)))), np.zeros((3, 3)))
  assert np.isnan(np.asarray(L.sqrtm(np.array([[0, 1.0], [0, 0]])))).all()
  with pytest.raises(NotImplementedError, match="Blocked version"):
    L.sqrtm(np.eye(2), blocksize=2)
  spd = np.array([[4.0, 1.0], [1.0, 3.0]])
  np.testing.assert_allclose(np.asarray(L.sqrtm(spd)).real, sl.sqrtm(spd), rtol=1e-12)


@pytest.mark.parametrize("func,ref", [(jnp.exp, sl.expm), (jnp.sin, sl.sinm),
                                      (jnp.cos, sl.cosm)])
def test_funm(func, ref):
  rng = np.random.default_rng(6)
  a = _rand(rng, (5, 5), np.float64)
  f = L.funm(a, func)
  assert f.dtype == np.complex128
  np.testing.assert_allclose(np.asarray(f), ref(a), rtol=1e-10, atol=1e-10)
  f2, err = L.funm(a, func, disp=False)
  np.testing.assert_array_equal(np.asarray(f2), np.asarray(f))
  assert err.dtype == np.float64 and 0 < float(err) < 1e-6
  assert L.funm(a.astype(np.float32), func).dtype == np.complex64
  with pytest.raises(ValueError, match="expected square array_like input"):
    L.funm(np.ones((2, 3)), func)


# ----------------------------------------------------------------- householder_product, ormqr,
# tridiagonal, tridiagonal_solve


def _geqrf(a):
  from scipy.linalg import lapack
  geqrf, = lapack.get_lapack_funcs(("geqrf",), (a,))
  qr, tau = geqrf(a)[:2]
  return qr, tau


@pytest.mark.parametrize("dtype", DTYPES)
def test_householder_product_and_ormqr(dtype):
  rng = np.random.default_rng(7)
  a = _rand(rng, (6, 4), dtype)
  qr, tau = _geqrf(a)
  q = lax_linalg.householder_product(qr, tau)
  qw = np.linalg.qr(a)[0]
  assert q.dtype == dtype and q.shape == (6, 4)
  _close(q, qw, dtype, 10)
  qj = nbjax.jit(lax_linalg.householder_product)(qr, tau)
  np.testing.assert_array_equal(np.asarray(qj), np.asarray(q))
  qfull = np.linalg.qr(a, mode="complete")[0]
  c = _rand(rng, (6, 3), dtype)
  for left, transpose, want in [(True, False, qfull @ c), (True, True, _H(qfull) @ c)]:
    got = lax_linalg.ormqr(qr, tau, c, left=left, transpose=transpose)
    _close(got, want, dtype, 10)
  c2 = _rand(rng, (2, 6), dtype)
  _close(lax_linalg.ormqr(qr, tau, c2, left=False), c2 @ qfull, dtype, 10)
  _close(nbjax.jit(lambda *x: lax_linalg.ormqr(*x, left=False, transpose=True))(qr, tau, c2),
         c2 @ _H(qfull), dtype, 10)
  # vmap over a batch: one batched kernel, as a loop
  qrs = np.stack([qr, qr * 0.5])
  taus = np.stack([tau, tau])
  qv = nbjax.vmap(lax_linalg.householder_product)(qrs, taus)
  np.testing.assert_array_equal(np.asarray(qv[1]),
                                np.asarray(lax_linalg.householder_product(qrs[1], tau)))


def test_householder_product_errors_as_jax():
  with pytest.raises(ValueError, match="must have at least as many rows as columns"):
    lax_linalg.householder_product(np.ones((2, 3)), np.ones(2))
  with pytest.raises(ValueError, match="must not have more rows than the minimum"):
    lax_linalg.householder_product(np.ones((3, 2)), np.ones(3))
  with pytest.raises(ValueError, match="ormqr with left=True expects c to have the same"):
    lax_linalg.ormqr(np.ones((3, 2)), np.ones(2), np.ones((4, 2)))
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'householder_product'"):
    nbjax.grad(lambda x: lax_linalg.householder_product(x, np.ones(2)).sum())(np.ones((3, 2)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_matches_lapack(dtype, lower):
  rng = np.random.default_rng(8)
  s = _rand(rng, (2, 5, 5), dtype)
  s = s + _H(s)
  arr, d, e, taus = lax_linalg.tridiagonal(s, lower=lower)
  rd = np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64
  assert d.dtype == rd and e.dtype == rd and taus.dtype == dtype and e.shape == (2, 4)
  from scipy.linalg import lapack
  trd, = lapack.get_lapack_funcs(("hetrd" if np.dtype(dtype).kind == "c" else "sytrd",), (s[0],))
  for b in range(2):
    want = trd(s[b], lower=int(lower))
    for got, w in zip((arr, d, e, taus), want[:4]):
      np.testing.assert_array_equal(np.asarray(got[b]), w)
  # T = tridiag(e, d, e) has s's eigenvalues
  T = np.diag(np.asarray(d[0])) + np.diag(np.asarray(e[0]), 1) + np.diag(np.asarray(e[0]), -1)
  _close(np.linalg.eigvalsh(T), np.linalg.eigvalsh(s[0]), dtype, 10)
  outs = nbjax.jit(lambda x: lax_linalg.tridiagonal(x, lower=lower))(s)
  for got, w in zip(outs, (arr, d, e, taus)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(w))
  with pytest.raises(ValueError, match="The input to tridiagonal must be a square matrix"):
    lax_linalg.tridiagonal(np.ones((0, 0)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tridiagonal_solve(dtype):
  rng = np.random.default_rng(9)
  dl, d, du = _rand(rng, (3, 6), dtype), _rand(rng, (3, 6), dtype) + 4, _rand(rng, (3, 6), dtype)
  b = _rand(rng, (3, 6, 2), dtype)
  x = lax_linalg.tridiagonal_solve(dl, d, du, b)
  assert x.dtype == dtype and x.shape == b.shape
  for i in range(3):
    A = np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1)
    _close(x[i], np.linalg.solve(A, b[i]), dtype, 10)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lax_linalg.tridiagonal_solve)(dl, d, du, b)),
                                np.asarray(x))
  xv = nbjax.vmap(lax_linalg.tridiagonal_solve, in_axes=(None, None, None, 2), out_axes=2)(
      dl[0], d[0], du[0], b[0][:, None, :].repeat(1, 1))
  _close(xv[:, 0, :], np.asarray(x[0]), dtype)


def test_tridiagonal_solve_grad_and_errors():
  rng = np.random.default_rng(10)
  dl, du = rng.standard_normal((2, 5))
  d = rng.standard_normal(5) + 4
  b = rng.standard_normal((5, 2))
  f = lambda dl, d, du, b: (lax_linalg.tridiagonal_solve(dl, d, du, b) ** 2).sum()
  g = nbjax.grad(f, argnums=(0, 1, 2, 3))(dl, d, du, b)
  gj = nbjax.jit(nbjax.grad(f, argnums=(0, 1, 2, 3)))(dl, d, du, b)
  args = [dl, d, du, b]
  for i in range(4):
    num = np.zeros_like(args[i])
    for idx in np.ndindex(args[i].shape):
      hi, lo = [a.copy() for a in args], [a.copy() for a in args]
      hi[i][idx] += 1e-6
      lo[i][idx] -= 1e-6
      num[idx] = (float(f(*hi)) - float(f(*lo))) / 2e-6
    np.testing.assert_allclose(np.asarray(g[i]), num, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(gj[i]), np.asarray(g[i]), rtol=1e-12)
  with pytest.raises(TypeError, match="all diagonal arguments have the same shape"):
    lax_linalg.tridiagonal_solve(np.ones(3), np.ones(4), np.ones(3), np.ones((3, 1)))
  with pytest.raises(TypeError, match="leading ndim-1 dimensions of b"):
    lax_linalg.tridiagonal_solve(np.ones(3), np.ones(3), np.ones(3), np.ones((4, 1)))
  # a singular system: NaNs (LAPACK's info, as JAX's)
  x = lax_linalg.tridiagonal_solve(np.zeros(3), np.zeros(3), np.zeros(3), np.ones((3, 1)))
  assert np.isnan(np.asarray(x)).all()


# ----------------------------------------------------------------- scipy: hessenberg, polar,
# solve_sylvester, eigh_tridiagonal


@pytest.mark.parametrize("dtype", DTYPES)
def test_scipy_hessenberg(dtype):
  rng = np.random.default_rng(11)
  a = _rand(rng, (5, 5), dtype)
  h, q = L.hessenberg(a, calc_q=True)
  hs, qs = sl.hessenberg(a, calc_q=True)
  _close(h, hs, dtype)
  _close(q, qs, dtype)
  _close(np.asarray(q) @ np.asarray(h) @ _H(np.asarray(q)), a, dtype, 10)
  np.testing.assert_array_equal(np.asarray(L.hessenberg(a)), np.asarray(h))
  hb = L.hessenberg(np.stack([a, a]))
  np.testing.assert_array_equal(np.asarray(hb[1]), np.asarray(h))
  assert L.hessenberg(np.zeros((0, 0))).shape == (0, 0)


@pytest.mark.parametrize("method", ["qdwh", "svd"])
@pytest.mark.parametrize("shape,side", [((5, 3), "right"), ((4, 4), "right"), ((3, 5), "left"),
                                        ((4, 4), "left")])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_polar(method, shape, side, dtype):
  rng = np.random.default_rng(12)
  a = _rand(rng, shape, dtype)
  if method == "qdwh" and side == "left" and shape[0] >= shape[1]:
    with pytest.raises(NotImplementedError, match="method='qdwh' only supports"):
      L.polar(a, side, method=method)  # as JAX's
    return
  u, p = L.polar(a, side, method=method)
  us, ps = sl.polar(a, side)
  assert u.dtype == dtype and p.dtype == dtype
  _close(u, us, dtype, 20)
  _close(p, ps, dtype, 20)


def test_polar_errors_and_qdwh():
  with pytest.raises(ValueError, match="must be at least a 2-D array"):
    L.polar(np.ones(3))
  with pytest.raises(ValueError, match="either 'right' or 'left'"):
    L.polar(np.ones((2, 2)), "up")
  with pytest.raises(NotImplementedError, match="method='qdwh' only supports"):
    L.polar(np.ones((2, 3)), "right")
  with pytest.raises(ValueError, match="Unknown polar decomposition method"):
    L.polar(np.ones((2, 2)), method="foo")
  rng = np.random.default_rng(13)
  x = rng.standard_normal((6, 4))
  u, h, iters, ok = lax_linalg.qdwh(x)
  assert bool(ok) and int(iters) <= 10
  np.testing.assert_allclose(np.asarray(u) @ np.asarray(h), x, atol=1e-12)
  np.testing.assert_allclose(np.asarray(u).T @ np.asarray(u), np.eye(4), atol=1e-12)
  with pytest.raises(ValueError, match="must have M >= N"):
    lax_linalg.qdwh(np.ones((2, 3)))


def test_qdwh_dynamic_shape():
  # a padded input: JAX 0.10.2's values (qdwh_test testQdwhWithDynamicShape); the padding
  # stays zero, num_iters is a weak int as JAX's; jit with a traced m gives the same
  a = np.arange(1., 26.).reshape(5, 5) + np.eye(5) * 30
  a[4], a[:, 3:] = 99, 7
  u, h, iters, ok = lax_linalg.qdwh(a, dynamic_shape=(4, 3))
  np.testing.assert_allclose(np.asarray(u)[:4, :3], [
      [0.9451876885056103, -0.08928369873419112, -0.12375508597399246],
      [-0.009010315420428697, 0.9537346777310821, -0.08352032911740709],
      [0.036791680653532326, -0.003246945803644737, 0.9567144277391783],
      [0.3243230179129047, 0.28706801106441554, 0.24981300421592628]], rtol=1e-13, atol=1e-15)
  np.testing.assert_allclose(np.asarray(h)[:3, :3], [
      [34.84063322494668, 7.511985178817126, 10.183337132687575],
      [7.511985178817126, 39.95080851703298, 12.38963185524884],
      [10.183337132687575, 12.38963185524884, 44.595926577810104]], rtol=1e-13)
  assert not np.asarray(u)[4:].any() and not np.asarray(u)[:, 3:].any()
  assert int(iters) == 6 and bool(ok) and iters.dtype == np.int64 and iters.weak_type
  u2 = nbjax.jit(lambda a, m: lax_linalg.qdwh(a, dynamic_shape=(m, 3))[0])(a, 4)
  np.testing.assert_allclose(u2, u, atol=1e-15)


@pytest.mark.parametrize("method", ["schur", "eigen"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_solve_sylvester(method, dtype):
  rng = np.random.default_rng(14)
  A, B, C = _rand(rng, (4, 4), dtype), _rand(rng, (3, 3), dtype), _rand(rng, (4, 3), dtype)
  X = L.solve_sylvester(A, B, C, method=method)
  assert X.dtype == dtype
  _close(X, sl.solve_sylvester(A, B, C), dtype, 100)
  Xb = L.solve_sylvester(np.stack([A, A]), B, C, method=method)
  _close(Xb[0], np.asarray(X), dtype)


def test_solve_sylvester_nan_and_errors():
  A = np.diag([1.0, 2.0])
  X = L.solve_sylvester(A, -A, np.ones((2, 2)))  # eigenvalues of A + B hit zero
  assert np.isnan(np.asarray(X)).all()
  with pytest.raises(ValueError, match="Incompatible shapes for Sylvester equation"):
    L.solve_sylvester(np.eye(2), np.eye(3), np.ones((2, 2)))
  with pytest.raises(ValueError, match="Unrecognized method"):
    L.solve_sylvester(np.eye(2), np.eye(2), np.ones((2, 2)), method="foo")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_eigh_tridiagonal(dtype):
  rng = np.random.default_rng(15)
  d = _rand(rng, (7,), np.float64).astype(dtype)
  e = _rand(rng, (6,), dtype)
  T = np.diag(d) + np.diag(e, 1) + np.diag(np.conj(e), -1)
  want = np.linalg.eigvalsh(T)
  w = L.eigh_tridiagonal(d, e, eigvals_only=True)
  rd = np.float32 if dtype == np.float32 else np.float64
  assert w.dtype == rd
  _close(w, want, dtype, 10)
  wi = L.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(2, 4))
  _close(wi, want[2:5], dtype, 10)
  w, v = L.eigh_tridiagonal(d, e)
  assert v.dtype == dtype
  _close(T @ np.asarray(v), np.asarray(v) * np.asarray(w), dtype, 20)
  wj = nbjax.jit(lambda d, e: L.eigh_tridiagonal(d, e, eigvals_only=True))(d, e)
  _close(wj, want, dtype, 10)
  if dtype == np.float64:
    np.testing.assert_allclose(np.asarray(w), sl.eigh_tridiagonal(d, e, eigvals_only=True),
                               rtol=1e-12, atol=1e-12)


def test_eigh_tridiagonal_errors_as_jax():
  with pytest.raises(TypeError, match="diagonal and off-diagonal values must have same dtype"):
    L.eigh_tridiagonal(np.ones(3), np.ones(2, np.float32))
  with pytest.raises(TypeError, match="Only float32 and float64 inputs are supported"):
    L.eigh_tridiagonal(np.ones(3, np.int32), np.ones(2, np.int32))
  with pytest.raises(NotImplementedError, match="select='v'"):
    L.eigh_tridiagonal(np.ones(3), np.ones(2), select="v")
  with pytest.raises(ValueError, match="select_range must be specified"):
    L.eigh_tridiagonal(np.ones(3), np.ones(2), select="i")
  np.testing.assert_array_equal(np.asarray(L.eigh_tridiagonal(np.array([2.0]), np.zeros(0),
                                                              eigvals_only=True)), [2.0])


# ----------------------------------------------------------------- special matrices


def test_special_matrices_match_scipy():
  a = np.array([1.0, -2.0, 3.0, 0.5])
  np.testing.assert_allclose(np.asarray(L.companion(a)), sl.companion(a), rtol=1e-15)
  np.testing.assert_allclose(np.asarray(L.fiedler(a)), sl.fiedler(a), rtol=1e-15)
  for c in (a, a[:3], a[:2], np.array([2.0, 1.0, -1.0, 3.0, 4.0, 5.0])):
    np.testing.assert_allclose(np.asarray(L.fiedler_companion(c)), sl.fiedler_companion(c),
                               rtol=1e-15)
  f, s = np.array([0.1, 2.0, 1.0, 0.1]), np.array([0.2, 0.8, 0.7])
  np.testing.assert_allclose(np.asarray(L.leslie(f, s)), sl.leslie(f, s), rtol=1e-15)
  for mode in ("full", "same", "valid"):
    for n in (2, 4, 6):
      np.testing.assert_allclose(np.asarray(L.convolution_matrix(a, n, mode)),
                                 sl.convolution_matrix(a, n, mode), rtol=1e-15)
  for n in (1, 2, 5, 8):
    np.testing.assert_allclose(np.asarray(L.invhilbert(n)), sl.invhilbert(n), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(L.helmert(n)), sl.helmert(n), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(np.asarray(L.helmert(n, full=True)), sl.helmert(n, full=True),
                               rtol=1e-14, atol=1e-15)
    for kind in ("symmetric", "lower", "upper"):
      np.testing.assert_allclose(np.asarray(L.pascal(n, kind)), sl.pascal(n, kind), rtol=1e-5)
      np.testing.assert_allclose(np.asarray(L.invpascal(n, kind)), sl.invpascal(n, kind),
                                 rtol=1e-9, atol=1e-9)
    for scale in (None, "sqrtn", "n"):
      np.testing.assert_allclose(np.asarray(L.dft(n, scale)), sl.dft(n, scale), rtol=1e-12,
                                 atol=1e-12)
  for n in (1, 2, 8):
    np.testing.assert_array_equal(np.asarray(L.hadamard(n)), sl.hadamard(n))


def test_special_matrices_dtypes_and_batching():
  A = np.array
  assert L.companion(A([1, 2, 3])).dtype == np.float64
  assert L.companion(A([1, 2, 3], np.float32)).dtype == np.float32
  assert L.fiedler(A([1, 2, 3])).dtype == np.int64
  assert L.leslie(A([1, 2, 3]), A([1, 2])).dtype == np.int64
  assert L.convolution_matrix(A([1, 2, 3]), 4).dtype == np.int64
  assert L.pascal(4).dtype == np.float32 and L.invpascal(4).dtype == np.float64
  assert L.hadamard(4).dtype == np.int64 and L.hadamard(2, np.float32).dtype == np.float32
  assert L.dft(3).dtype == np.complex128 and L.dft(3, dtype=np.complex64).dtype == np.complex64
  assert L.helmert(3).dtype == np.float64
  batch = np.array([[1.0, 2.0, 3.0], [2.0, -1.0, 0.5]])
  cb = L.companion(batch)
  assert cb.shape == (2, 2, 2)
  np.testing.assert_allclose(np.asarray(cb[1]), sl.companion(batch[1]))
  fb = L.fiedler_companion(batch)
  np.testing.assert_allclose(np.asarray(fb[1]), sl.fiedler_companion(batch[1]))
  convb = L.convolution_matrix(batch, 3, "same")
  np.testing.assert_allclose(np.asarray(convb[0]), sl.convolution_matrix(batch[0], 3, "same"))


def test_special_matrices_errors_as_jax():
  A = np.array
  cases = [
      (lambda: L.dft(3, "x"), ValueError, "scale must be None, 'sqrtn', or 'n'"),
      (lambda: L.dft(3, dtype=np.float32), ValueError, "dtype must be a complex floating"),
      (lambda: L.hadamard(3), ValueError, "n must be a positive power of 2"),
      (lambda: L.helmert(0), ValueError, "n must be a positive integer"),
      (lambda: L.pascal(3, "x"), ValueError, "Expected kind to be on of"),
      (lambda: L.invpascal(3, "x"), ValueError, "Expected kind to be one of"),
      (lambda: L.companion(A([1.0])), ValueError, "The length of `a` along the last axis"),
      (lambda: L.leslie(A([1.0]), A([])), ValueError, "The length of f along the last axis"),
      (lambda: L.leslie(A([1.0, 2]), A([1.0, 2])), ValueError, "Incorrect lengths for f and s"),
      (lambda: L.convolution_matrix(A([1, 2]), 0), ValueError, "n must be a positive integer"),
      (lambda: L.convolution_matrix(A([1, 2]), 2, "x"), ValueError, "mode must be one of"),
      (lambda: L.convolution_matrix(1, 2), ValueError, "must be at least 1-dimensional"),
      (lambda: L.fiedler_companion(A([])), ValueError, "to have nonzero length"),
      (lambda: L.fiedler([1, 2]), TypeError, "fiedler requires ndarray or scalar arguments"),
  ]
  for f, exc, msg in cases:
    with pytest.raises(exc, match=msg):
      f()


# ----------------------------------------------------------------- lax.linalg extras


def test_lu_pivots_to_permutation():
  rng = np.random.default_rng(16)
  x = rng.standard_normal((3, 6, 4))
  _, piv, perm = lax_linalg.lu(x)
  got = lax_linalg.lu_pivots_to_permutation(piv, 6)
  assert got.dtype == np.int32 and got.shape == (3, 6)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(perm))
  np.testing.assert_array_equal(
      np.asarray(nbjax.jit(lambda p: lax_linalg.lu_pivots_to_permutation(p, 6))(piv)),
      np.asarray(perm))
  np.testing.assert_array_equal(
      np.asarray(nbjax.vmap(lambda p: lax_linalg.lu_pivots_to_permutation(p, 6))(piv)),
      np.asarray(perm))
  with pytest.raises(ValueError, match="Output permutation size 3 has to exceed"):
    lax_linalg.lu_pivots_to_permutation(piv, 3)


def test_symmetric_product_and_cholesky_update():
  rng = np.random.default_rng(17)
  a, c = rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
  c = c + c.T
  got = lax_linalg.symmetric_product(a, c, alpha=2.0, beta=0.5)
  np.testing.assert_allclose(np.asarray(got), 2 * a @ a.T + 0.5 * c, rtol=1e-13)
  sym = lax_linalg.symmetric_product(a, np.triu(c), beta=1.0, symmetrize_output=True)
  low = np.tril(a @ a.T + np.triu(c))
  np.testing.assert_allclose(np.asarray(sym), low + np.tril(low, -1).T, rtol=1e-13)
  with pytest.raises(ValueError, match="symmetric_update expects a rectangular matrix"):
    lax_linalg.symmetric_product(np.ones((2, 3)), np.ones((3, 3)))
  A = rng.standard_normal((5, 5))
  A = A @ A.T + 5 * np.eye(5)
  R = np.linalg.cholesky(A).T
  w = rng.standard_normal(5)
  R2 = np.asarray(lax_linalg.cholesky_update(R, w))
  np.testing.assert_allclose(R2, np.linalg.cholesky(A + np.outer(w, w)).T, rtol=1e-10,
                             atol=1e-12)
  with pytest.raises(ValueError, match="Rank-1 update to Cholesky decomposition"):
    lax_linalg.cholesky_update(np.eye(3), np.ones(2))


def test_enums_and_implementation_arguments():
  assert [e.value for e in lax_linalg.EigImplementation] == ["cusolver", "magma", "lapack"]
  assert [e.value for e in lax_linalg.EighImplementation] == ["qr", "jacobi", "qdwh"]
  assert lax_linalg.SvdAlgorithm.DIVIDE_AND_CONQUER.value == "divide_and_conquer"
  a = np.array([[2.0, 1.0], [1.0, 3.0]])
  v, w = lax_linalg.eigh(a, implementation=lax_linalg.EighImplementation.QR)
  np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(a), rtol=1e-14)
  w2 = lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False,
                      implementation=lax_linalg.EigImplementation.LAPACK)[0]
  np.testing.assert_allclose(np.sort(np.asarray(w2).real), np.linalg.eigvalsh(a), rtol=1e-14)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("mode", ["right", "left"])
@pytest.mark.parametrize("conjugate", [False, True])
def test_qr_multiply(shape, mode, conjugate):
  rng = np.random.default_rng(18)
  a = _rand(rng, shape, np.complex128)
  k = min(shape)
  c = _rand(rng, (2, shape[0]) if mode == "right" else (k, 2), np.complex128)
  got, r = L.qr_multiply(a, c, mode=mode, conjugate=conjugate)
  want, rw = sl.qr_multiply(a, c, mode=mode, conjugate=conjugate)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(np.asarray(r), rw, rtol=1e-12, atol=1e-12)
  v = c[0] if mode == "right" else c[:, 0]
  np.testing.assert_allclose(np.asarray(L.qr_multiply(a, v, mode=mode)[0]),
                             sl.qr_multiply(a, v, mode=mode)[0], rtol=1e-12, atol=1e-12)
  with pytest.raises(ValueError, match="mode must be 'right' or 'left'"):
    L.qr_multiply(a, c, mode="up")


def test_polar_float32_under_strict_promotion():
  """JAX's linalg_test testPolarBatch runs under strict dtype promotion: qdwh's convergence
  threshold is a weak scalar, so float32 inputs stay float32."""
  a = np.array([[[2.0, 1.0], [0.5, 3.0]], [[1.0, 0.0], [0.0, 2.0]]], np.float32)
  with nbjax.numpy_dtype_promotion("strict"):
    u, p = L.polar(a)
  assert u.dtype == p.dtype == np.float32
  np.testing.assert_allclose(np.asarray(u) @ np.asarray(p), a, atol=1e-5)


def test_integer_matrices_exact_eagerly_and_under_jit():
  """JAX's linalg_test testPascal/testInvpascal/testInvhilbert compare eager with jit at
  float64 eps: the binomial entries are rounded to the integers they are."""
  for n in (1, 5, 8):
    for kind in ("symmetric", "lower", "upper"):
      got = np.asarray(L.invpascal(n, kind))
      np.testing.assert_array_equal(got, sl.invpascal(n, kind, exact=False))
      np.testing.assert_array_equal(got, nbjax.jit(lambda: L.invpascal(n, kind))())
      got = np.asarray(L.pascal(n, kind))
      np.testing.assert_array_equal(got, sl.pascal(n, kind, exact=False).astype(np.float32))
      np.testing.assert_array_equal(got, nbjax.jit(lambda: L.pascal(n, kind))())
    got = np.asarray(L.invhilbert(n))
    np.testing.assert_array_equal(got, sl.invhilbert(n))
    np.testing.assert_array_equal(got, nbjax.jit(lambda: L.invhilbert(n))())


def test_tridiagonal_solve_perturb_singular_as_jax():
  """JAX's linalg_test test_tridiagonal_solve_* with perturb_singular=True: tiny pivots
  are perturbed, so singular systems give finite, large solutions (values from jax 0.10.2)."""
  dl, du = np.array([0.0, 1.0, 0.5, 2.0]), np.array([1.0, 0.2, 0.3, 0.0])
  d = np.array([4.0, 3.0, 1.0, 5.0])
  b = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, 0.5], [1.0, 1.0]])
  f = lambda d: lax_linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)
  want = [[0.33706897, 0.46206897], [-0.34827586, 0.15172414], [3.5387931, 0.4137931],
          [-1.21551724, 0.03448276]]
  np.testing.assert_allclose(f(d), want, atol=1e-8)
  np.testing.assert_allclose(nbjax.jit(f)(d), want, atol=1e-8)
  np.testing.assert_allclose(nbjax.grad(lambda d: f(d).sum())(d),
                             [-0.16878344, 0.03049941, -2.55555143, 0.1903909], atol=1e-8)
  x = lax_linalg.tridiagonal_solve(np.array([0.0, 1.0]), np.array([1.0, 3.0]),
                                   np.array([3.0, 0.0]), np.array([[1.0], [4.0]]),
                                   perturb_singular=True)
  np.testing.assert_allclose(np.ravel(x), [-1.3510798882111488e16, 4503599627370496.0])
  z = np.zeros(3, np.float32)
  for g in (lax_linalg.tridiagonal_solve, nbjax.jit(lax_linalg.tridiagonal_solve,
                                                    static_argnames="perturb_singular")):
    x = np.asarray(g(z, z, z, np.ones((3, 1), np.float32), perturb_singular=True))
    assert np.isfinite(x).all() and (np.abs(x) > 1e6).all()
    assert not np.isfinite(np.asarray(g(z, z, z, np.ones((3, 1), np.float32)))).all()


def test_numpy_qr_raw_mode_as_lapack():
  """JAX's linalg_test testNumpyQrModes(mode='raw'): ``(h, tau)`` as NumPy's (LAPACK
  ?geqrf, ``h`` transposed), eagerly, under jit and vmap, empty matrices included."""
  a = np.random.default_rng(0).standard_normal((2, 4, 3))
  for f in (jnp.linalg.qr, nbjax.jit(jnp.linalg.qr, static_argnames="mode")):
    h, tau = f(a[0], mode="raw")
    want_h, want_tau = np.linalg.qr(a[0], mode="raw")
    np.testing.assert_allclose(h, want_h, atol=1e-14)
    np.testing.assert_allclose(tau, want_tau, atol=1e-14)
    assert [x.shape for x in f(np.ones((0, 2)), mode="raw")] == [(2, 0), (0,)]
  h, tau = nbjax.vmap(lambda a: jnp.linalg.qr(a, mode="raw"))(a + 0.5j)
  want_h, want_tau = np.linalg.qr(a[1] + 0.5j, mode="raw")
  np.testing.assert_allclose(h[1], want_h, atol=1e-14)
  np.testing.assert_allclose(tau[1], want_tau, atol=1e-14)
