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
