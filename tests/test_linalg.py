"""dot_general and lax.linalg: dimension numbers (batch dims, preferred_element_type, integer
and bool products), bilinear transposes, batching rules at every batch-dim placement, the
identities each decomposition must satisfy (L L^H = A, P A = L U, Q R = A, A V = V diag(w),
U S V^H = A), LAPACK conventions, failure behaviour, jvps, and error messages."""
import numpy as np
import pytest

import nbjax  # noqa: F401
import nbjax.numpy as jnp
from nbjax import api, lax, registry, testing
from nbjax.array import Array
from nbjax.interpreters import ad
from nbjax.lax import linalg as LA

BACKENDS = ("numba", "numpy")
MM = (((1,), (0,)), ((), ()))


def A(x):
  return Array(np.asarray(x))


def impl(name, backend):
  return registry.get(name).impls[backend]


def _einsum_ref(x, y, dn):
  (lc, rc), (lb, rb) = dn
  letters = iter("abcdefghijklmnopqrstuvwxyz")
  xs = [next(letters) for _ in range(x.ndim)]
  ys = [next(letters) for _ in range(y.ndim)]
  for i, j in zip(lc, rc):
    ys[j] = xs[i]
  for i, j in zip(lb, rb):
    ys[j] = xs[i]
  out = [xs[i] for i in lb] + [c for i, c in enumerate(xs) if i not in lc and i not in lb] + \
      [c for i, c in enumerate(ys) if i not in rc and i not in rb]
  return np.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)


DNS = [
    ((3, 4), (4, 5), MM),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((4, 2, 3), (3, 5, 2), (((2,), (0,)), ((1,), (2,)))),
    ((3, 4, 2), (2, 4, 6), (((1, 2), (1, 0)), ((), ()))),
    ((2, 3, 4, 5), (5, 2, 4, 6), (((3,), (0,)), ((0, 2), (1, 2)))),
    ((3,), (5,), (((), ()), ((), ()))),
    ((2, 0), (0, 3), MM),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ls,rs,dn", DNS)
def test_dot_general_dimension_numbers(backend, ls, rs, dn):
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal(ls), rng.standard_normal(rs)
  got = impl("dot_general", backend)(x, y, dimension_numbers=dn, precision=None,
                                     preferred_element_type=None)
  np.testing.assert_allclose(got, _einsum_ref(x, y, dn), rtol=1e-12, atol=1e-12)
  out = lax.dot_general(A(x), A(y), dn)
  assert out.shape == _einsum_ref(x, y, dn).shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_integer_bool_mixed_and_preferred_element_type(backend):
  f = impl("dot_general", backend)
  p = dict(dimension_numbers=MM, precision=None)
  a = np.full((2, 300), 100, np.int8)
  b = np.full((300, 2), 3, np.int8)
  wrapped = f(a, b, preferred_element_type=None, **p)  # accumulates with int8 wraparound
  assert wrapped.dtype == np.int8
  np.testing.assert_array_equal(wrapped, np.full((2, 2), np.int64(90000).astype(np.int8)))
  wide = f(a, b, preferred_element_type=np.dtype(np.int32), **p)
  assert wide.dtype == np.int32
  np.testing.assert_array_equal(wide, np.full((2, 2), 90000))
  u = np.array([[2**63, 1]], np.uint64)
  np.testing.assert_array_equal(f(u, np.array([[2], [3]], np.uint64), preferred_element_type=None,
                                  **p), [[3]])
  bo = np.array([[True, False], [False, False]])
  got = f(bo, bo, preferred_element_type=None, **p)
  assert got.dtype == np.bool_
  np.testing.assert_array_equal(got, [[True, False], [False, False]])
  mixed = f(np.ones((2, 3), np.int32), np.ones((3, 2), np.float32), preferred_element_type=None,
            **p)
  assert mixed.dtype == np.float32
  np.testing.assert_array_equal(mixed, np.full((2, 2), 3.0))
  x32 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
  up = f(x32, x32.T.copy(), preferred_element_type=np.dtype(np.float64), **p)
  assert up.dtype == np.float64
  np.testing.assert_allclose(up, x32.astype(np.float64) @ x32.T.astype(np.float64), rtol=1e-12)
  h = np.ones((2, 3), np.float16)
  assert f(h, h.T.copy(), preferred_element_type=None, **p).dtype == np.float16


def test_dot_general_errors_are_jax_worded():
  x, y = A(np.ones((3, 4))), A(np.ones((5, 6)))
  with pytest.raises(TypeError, match=r"dot_general requires contracting dimensions to have "
                                      r"the same shape, got \(4,\) and \(5,\)"):
    lax.dot_general(x, y, MM)
  with pytest.raises(TypeError, match="dot_general requires lhs dimension numbers to be "
                                      "nonnegative"):
    lax.dot_general(x, y, (((2,), (0,)), ((), ())))
  with pytest.raises(TypeError, match="dot_general requires lhs batch dimensions and rhs batch "
                                      r"dimensions to have the same shape, got \(3,\) and \(2,\)"):
    lax.dot_general(x, A(np.ones((4, 2))), (((1,), (0,)), ((0,), (1,))))
  with pytest.raises(TypeError, match="dot_general requires equal numbers of lhs_batch"):
    lax.dot_general(x, A(np.ones((4, 3))), (((1,), (0,)), ((0,), ())))
  with pytest.raises(TypeError, match="preferred_element_type.*must not be narrower"):
    lax.dot_general(A(np.ones((2, 2), np.int32)), A(np.ones((2, 2), np.int32)), MM,
                    preferred_element_type=np.int8)
  with pytest.raises(ValueError, match="dimension_numbers must be specified"):
    lax.dot(A(np.ones((2, 3, 4))), A(np.ones((4, 2))))


@pytest.mark.parametrize("ls,rs,dn", DNS[:5])
def test_dot_general_transposes_inner_product_identity(ls, rs, dn):
  rng = np.random.default_rng(2)
  x, y = rng.standard_normal(ls), rng.standard_normal(rs)
  out = _einsum_ref(x, y, dn)
  ct = rng.standard_normal(out.shape)
  params = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
  xt, none = LA.dot_general_p.transpose(A(ct), ad.UndefinedPrimal(A(x).aval), A(y), **params)
  assert none is None and xt.shape == x.shape
  np.testing.assert_allclose(np.vdot(ct, out), np.vdot(np.asarray(xt), x), rtol=1e-10)
  none, yt = LA.dot_general_p.transpose(A(ct), A(x), ad.UndefinedPrimal(A(y).aval), **params)
  assert none is None and yt.shape == y.shape
  np.testing.assert_allclose(np.vdot(ct, out), np.vdot(np.asarray(yt), y), rtol=1e-10)
  testing.check_jvp(lambda a, b: lax.dot_general(a, b, dn), (A(x), A(y)))


def test_dot_general_transpose_converts_preferred_type_back():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  y = np.ones((3, 2), np.float32)
  params = dict(dimension_numbers=MM, precision=None, preferred_element_type=np.dtype(np.float64))
  ct = A(np.ones((2, 2)))
  xt, _ = LA.dot_general_p.transpose(ct, ad.UndefinedPrimal(A(x).aval), A(y), **params)
  assert xt.dtype == np.float32 and xt.shape == (2, 3)


def _stack(x, bd, n=3):
  return A(np.stack([np.asarray(x) * (i + 1) for i in range(n)], axis=bd))


@pytest.mark.parametrize("ls,rs,dn", DNS[:5])
def test_dot_general_vmap_every_bdim_placement(ls, rs, dn):
  rng = np.random.default_rng(3)
  x, y = rng.standard_normal(ls), rng.standard_normal(rs)
  f = lambda a, b: lax.dot_general(a, b, dn)
  for bx, by in testing.bdim_placements([len(ls), len(rs)], limit=40):
    if bx is None and by is None:
      continue
    args = (A(x) if bx is None else _stack(x, bx), A(y) if by is None else _stack(y, by))
    testing.check_vmap(f, args, in_axes=(bx, by))


def test_dot_general_vmap_is_one_bind():
  calls = []
  orig = LA.dot_general_p.eager

  def spy(*a, **k):
    calls.append(k["dimension_numbers"])
    return orig(*a, **k)
  LA.dot_general_p.eager = spy
  try:
    x, y = _stack(np.ones((3, 4)), 1, n=5), A(np.ones((4, 2)))
    out = api.vmap(lambda a, b: lax.dot(a, b), in_axes=(1, None))(x, y)
  finally:
    LA.dot_general_p.eager = orig
  assert out.shape == (5, 3, 2) and len(calls) == 1


# ----------------------------------------------------------------- decompositions


def _spd(rng, shape, dtype=np.float64):
  a = rng.standard_normal(shape)
  if np.dtype(dtype).kind == "c":
    a = a + 1j * rng.standard_normal(shape)
  n = shape[-1]
  return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _H(x):
  return np.conj(np.swapaxes(x, -1, -2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cholesky_identity_nan_on_failure_and_lower_triangle_only(backend, dtype):
  rng = np.random.default_rng(4)
  a = _spd(rng, (3, 5, 5), dtype)
  garbage = a.copy()
  garbage[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] = 1e6  # upper ignored
  tol = 1e-4 if np.dtype(dtype).itemsize <= 8 and np.dtype(dtype) != np.float64 else 1e-10
  for inp in (a, garbage):
    L = impl("cholesky", backend)(inp)
    np.testing.assert_allclose(L @ _H(L), a, rtol=tol, atol=tol * 10)
    np.testing.assert_array_equal(np.triu(L, 1), 0)
  bad = np.stack([a[0], -a[1], a[2]])
  L = impl("cholesky", backend)(bad)
  assert np.isnan(L[1]).all() and not np.isnan(L[[0, 2]]).any()


def test_cholesky_wrapper_symmetrizes_and_jvp():
  rng = np.random.default_rng(5)
  a = _spd(rng, (4, 4))
  L = lax.linalg.cholesky(A(a + np.triu(np.ones((4, 4)), 1) * 0.0))
  np.testing.assert_allclose(np.asarray(L), np.linalg.cholesky(a), rtol=1e-12)
  sym = lambda t: (t + t.T) / 2
  testing.check_jvp(lambda x: lax.linalg.cholesky(x), (A(a),),
                    tangents=(A(sym(rng.standard_normal((4, 4)))),))
  # the primitive reads the lower triangle only; its jvp differentiates exactly that
  testing.check_jvp(lambda x: LA.cholesky_p.bind(x), (A(_spd(rng, (2, 3, 3))),))


TS_FLAGS = [dict(left_side=l, lower=lo, transpose_a=t, conjugate_a=c, unit_diagonal=u)
            for l in (True, False) for lo in (True, False) for t in (False, True)
            for c, u in ((False, False), (True, True))]


def _op(a, p):
  m = np.tril(a) if p["lower"] else np.triu(a)
  if p["unit_diagonal"]:
    m = m - np.diag(np.diag(m)) + np.eye(a.shape[-1])
  if p["transpose_a"]:
    m = m.T
  if p["conjugate_a"]:
    m = np.conj(m)
  return m


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("p", TS_FLAGS, ids=lambda p: "".join(str(int(v)) for v in p.values()))
def test_triangular_solve_every_flag_combination(backend, p):
  rng = np.random.default_rng(6)
  a = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4)) + 4 * np.eye(4)
  b = rng.standard_normal((4, 3) if p["left_side"] else (3, 4)) + 0j
  x = impl("triangular_solve", backend)(a, b, **p)
  m = _op(a, p)
  np.testing.assert_allclose(m @ x if p["left_side"] else x @ m, b, atol=1e-12)


def test_triangular_solve_vector_rhs_transpose_and_jvp():
  rng = np.random.default_rng(7)
  a = A(np.tril(rng.standard_normal((4, 4))) + 4 * np.eye(4))
  b = rng.standard_normal(4)
  x = lax.linalg.triangular_solve(a, A(b), left_side=True, lower=True)
  assert x.shape == (4,)
  np.testing.assert_allclose(np.tril(np.asarray(a)) @ np.asarray(x), b, atol=1e-12)
  for p in TS_FLAGS[::3]:
    bm = rng.standard_normal((4, 2) if p["left_side"] else (2, 4))
    y = np.asarray(LA.triangular_solve_p.bind(a, A(bm), **p))
    ct = rng.standard_normal(y.shape)
    none, bt = LA.triangular_solve_p.transpose(A(ct), a, ad.UndefinedPrimal(A(bm).aval), **p)
    assert none is None
    np.testing.assert_allclose(np.vdot(ct, y), np.vdot(np.asarray(bt), bm), rtol=1e-10)
    testing.check_jvp(lambda aa, bb: LA.triangular_solve_p.bind(aa, bb, **p), (a, A(bm)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 5)])
def test_lu_identity_pivots_and_permutation(backend, shape):
  rng = np.random.default_rng(8)
  a = rng.standard_normal(shape)
  lu, piv, perm = impl("lu", backend)(a)
  m, n = shape[-2:]
  k = min(m, n)
  L = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
  U = np.triu(lu[..., :k, :])
  assert piv.dtype == perm.dtype == np.int32
  np.testing.assert_allclose(L @ U, np.take_along_axis(a, perm[..., None], -2), atol=1e-12)
  assert (np.abs(L) <= 1 + 1e-12).all()  # partial pivoting
  want = np.tile(np.arange(m), shape[:-2] + (1,))  # permutation = swaps applied in order
  for j in range(k):
    for idx in np.ndindex(shape[:-2]):
      w = want[idx]
      w[[j, piv[idx + (j,)]]] = w[[piv[idx + (j,)], j]]
  np.testing.assert_array_equal(perm, want)


def test_lu_singular_and_jvp():
  sing = np.array([[0.0, 1, 2], [0, 3, 4], [0, 5, 7]])
  for backend in BACKENDS:
    lu, piv, perm = impl("lu", backend)(sing)
    assert np.isfinite(lu).all() and piv[0] == 0
    L = np.tril(lu, -1) + np.eye(3)
    np.testing.assert_allclose(L @ np.triu(lu), sing[perm], atol=1e-12)
  rng = np.random.default_rng(9)
  for shape in [(4, 4), (5, 3), (3, 5), (2, 3, 3)]:
    testing.check_jvp(lambda x: lax.linalg.lu(x)[0], (A(rng.standard_normal(shape)),))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 4)])
@pytest.mark.parametrize("full", [True, False])
def test_qr_identity_and_shapes(backend, shape, full):
  rng = np.random.default_rng(10)
  a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
  q, r = impl("qr", backend)(a, pivoting=False, full_matrices=full, use_magma=None)
  m, n = shape[-2:]
  k = m if full else min(m, n)
  assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
  np.testing.assert_allclose(q @ r, a, atol=1e-12)
  np.testing.assert_allclose(_H(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
                             atol=1e-12)
  np.testing.assert_array_equal(np.tril(r, -1), 0)
  # LAPACK's convention, shared by both backends
  qn, rn = np.linalg.qr(a, mode="complete" if full else "reduced")
  np.testing.assert_allclose(r, rn, atol=1e-12)


def test_qr_jvp():
  rng = np.random.default_rng(11)
  testing.check_jvp(lambda x: lax.linalg.qr(x), (A(rng.standard_normal((4, 4))),))
  testing.check_jvp(lambda x: lax.linalg.qr(x, full_matrices=False),
                    (A(rng.standard_normal((2, 5, 3))),))
  testing.check_jvp(lambda x: lax.linalg.qr(x), (A(rng.standard_normal((3, 5))),))
  testing.check_jvp(lambda x: lax.linalg.qr(x), (A(rng.standard_normal((4, 2))),))


def test_qr_pivoting_and_tall_complete_jvp_as_jax():
  """JAX's linalg_test testScipyQrModes/testQrMultiply (pivoting=True) and testQr (the jvp
  of complete QR of a tall matrix): values from jax 0.10.2."""
  a = np.array([[2.0, 1.0, 0.5], [0.3, -1.0, 0.2], [0.1, 0.4, 3.0], [1.0, 0.0, -1.0],
                [0.5, 0.5, 0.5]])
  t = np.array([[0.1, 0.0, -0.2], [0.0, 0.3, 0.0], [0.5, 0.0, 0.1], [0.2, 0.1, 0.0],
                [0.0, -0.3, 0.4]])
  (q, r), (dq, dr) = api.jvp(lambda a: lax.linalg.qr(a, full_matrices=True), (a,), (t,))
  np.testing.assert_allclose(dq, [[0.02949594, 0.03072617, 0.2081167, -0.1029563, 0.07103552], [0.01090946, -0.03296932, 0.04799065, -0.10449591, -0.2006928], [-0.21253237, -0.05754122, -0.0017809, -0.03638718, -0.14067798], [-0.05010269, -0.06958282, 0.04362807, -0.06486214, 0.0060135], [0.01818243, -0.15770578, -0.16652703, 0.00990908, 0.03561669]], atol=1e-8)
  np.testing.assert_allclose(dr, [[-0.19455197, -0.07462876, -0.47932917], [0.0, -0.39792982, -0.08747797], [0.0, 0.0, -0.1250035], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-8)
  f = lambda a: lax.linalg.qr(a[:3].T, pivoting=True, full_matrices=False)
  for g in (f, nbjax.jit(f)):
    (q, r, p), (dq, dr, _) = api.jvp(g, (a,), (t,))
    assert p.dtype == np.int32
    np.testing.assert_array_equal(p, [2, 0, 1])
    np.testing.assert_allclose(q @ r, a[:3].T[:, [2, 0, 1]], atol=1e-12)
  np.testing.assert_allclose(dq, [[-0.16385413, 0.01060818, -0.00990317],
                                  [0.00504167, 0.00712114, 0.00403243],
                                  [0.00478958, 0.14673199, 0.07388831]], atol=1e-8)
  np.testing.assert_allclose(dr, [[-0.11558018, -0.12543664, -0.09286748],
                                  [0.0, -0.00595839, -0.09938219], [0.0, 0.0, 0.27769491]],
                             atol=1e-8)
  import scipy.linalg as sl
  b = np.random.default_rng(3).standard_normal((2, 4, 6)) + 0j
  q, r, p = api.vmap(lambda b: lax.linalg.qr(b, pivoting=True))(b)
  for i in range(2):
    want_q, want_r, want_p = sl.qr(b[i], pivoting=True)
    np.testing.assert_array_equal(p[i], want_p)
    np.testing.assert_allclose(r[i], want_r, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eigh_identity_triangle_and_subset(backend):
  rng = np.random.default_rng(12)
  a = rng.standard_normal((2, 5, 5)) + 1j * rng.standard_normal((2, 5, 5))
  f = impl("eigh", backend)
  for lower in (True, False):
    herm = (np.tril(a) + _H(np.tril(a, -1))) if lower else (np.triu(a) + _H(np.triu(a, 1)))
    herm = herm - 1j * np.imag(np.diagonal(herm, axis1=-2, axis2=-1))[..., None] * np.eye(5)
    v, w = f(a, lower=lower, sort_eigenvalues=True, subset_by_index=None)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_allclose(herm @ v, v * w[..., None, :], atol=1e-10)
    assert (np.diff(w, axis=-1) >= 0).all()
    vs, ws = f(a, lower=lower, sort_eigenvalues=True, subset_by_index=(1, 3))
    np.testing.assert_allclose(ws, w[..., 1:3])
    np.testing.assert_allclose(vs, v[..., :, 1:3])


def test_eigh_wrapper_and_jvp():
  rng = np.random.default_rng(13)
  s = rng.standard_normal((4, 4))
  v, w = lax.linalg.eigh(A(s))
  np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh((s + s.T) / 2), rtol=1e-12)
  sym = (s + s.T) / 2
  testing.check_jvp(lambda x: lax.linalg.eigh(x), (A(sym),),
                    tangents=(A(rng.standard_normal((4, 4))),))
  upper = lambda x: LA.eigh_p.bind(x, lower=False, sort_eigenvalues=True, subset_by_index=None)
  testing.check_jvp(upper, (A(rng.standard_normal((2, 3, 3))),))
  v, w = LA.eigh_p.bind(A(np.full((2, 2), np.nan)), lower=True, sort_eigenvalues=True,
                        subset_by_index=None)
  assert np.isnan(np.asarray(w)).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd_identity_and_compute_uv(backend, shape):
  rng = np.random.default_rng(14)
  a = rng.standard_normal(shape)
  f = impl("svd", backend)
  for full in (True, False):
    s, u, vt = f(a, full_matrices=full, compute_uv=True, subset_by_index=None, algorithm=None)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a, atol=1e-12)
  s2, = f(a, full_matrices=True, compute_uv=False, subset_by_index=None, algorithm=None)
  np.testing.assert_allclose(s2, s, rtol=1e-12)
  u, s3, vh = lax.linalg.svd(A(a))
  assert u.shape[-1] == shape[-2] and vh.shape[-2] == shape[-1]


def test_svd_jvp():
  rng = np.random.default_rng(15)
  for shape in [(4, 4), (5, 3), (3, 5)]:
    x = A(rng.standard_normal(shape))
    testing.check_jvp(lambda a: lax.linalg.svd(a, full_matrices=False), (x,))
    testing.check_jvp(lambda a: lax.linalg.svd(a, compute_uv=False), (x,))


@pytest.mark.parametrize("name,args,kw,exc,msg", [
    ("cholesky", [(2, 3)], {}, ValueError, "cholesky must be a square matrix"),
    ("cholesky", [(3,)], {}, TypeError, "Input 0 to cholesky must have rank at least 2"),
    ("qr", [(2, 2, np.int32)], dict(pivoting=False, full_matrices=True, use_magma=None),
     TypeError, "qr does not accept dtype int32"),
    ("triangular_solve", [(3, 3), (4, 2)], dict(left_side=True, lower=True, transpose_a=False,
                                               conjugate_a=False, unit_diagonal=False),
     ValueError, r"Incompatible shapes for arguments to triangular_solve: \(3, 3\) and \(4, 2\)"),
    ("triangular_solve", [(2, 3, 3), (3, 3, 2)], dict(left_side=True, lower=True,
                                                    transpose_a=False, conjugate_a=False,
                                                    unit_diagonal=False),
     TypeError, "triangular_solve must have the same batch dimensions"),
    ("eigh", [(2, 3)], dict(lower=True, sort_eigenvalues=True, subset_by_index=None), ValueError,
     r"eigh.*\[..., n, n\]"),
])
def test_linalg_error_messages(name, args, kw, exc, msg):
  ops = [A(np.ones(s[:-1] if isinstance(s[-1], type) else s, s[-1] if isinstance(s[-1], type)
                   else np.float64)) for s in args]
  with pytest.raises(exc, match=msg):
    registry.get(name).bind(*ops, **kw)


@pytest.mark.parametrize("bd", [0, 1, 2])
def test_decompositions_vmap_every_bdim(bd):
  rng = np.random.default_rng(16)
  spd = _spd(rng, (3, 3))
  g = rng.standard_normal((3, 3))
  testing.check_vmap(lambda x: lax.linalg.cholesky(x), (_stack(spd, bd),), in_axes=bd)
  testing.check_vmap(lambda x: lax.linalg.lu(x), (_stack(g, bd),), in_axes=bd)
  testing.check_vmap(lambda x: lax.linalg.qr(x), (_stack(g, bd),), in_axes=bd)
  testing.check_vmap(lambda x: lax.linalg.eigh(x)[1], (_stack(spd, bd),), in_axes=bd)
  testing.check_vmap(lambda x: lax.linalg.svd(x, compute_uv=False), (_stack(g, bd),), in_axes=bd)
  tri = np.tril(g) + 3 * np.eye(3)
  b = rng.standard_normal((3, 2))
  f = lambda a, bb: lax.linalg.triangular_solve(a, bb, left_side=True, lower=True)
  for bds in [(bd, None), (None, bd), (bd, bd)]:
    args = [_stack(v, d) if d is not None else A(v) for v, d in zip((tri, b), bds)]
    testing.check_vmap(f, args, in_axes=bds)


# ------------------------------------------------------------- special cases as JAX, eager and jit

LINALG_PRIMS = ("cholesky", "lu", "triangular_solve", "eigh", "qr", "svd")


@pytest.fixture(params=BACKENDS + ("jit",))
def engine(request):
  """Runs a function on one eager backend (every linalg primitive pinned to it) or under jit."""
  pinned = [] if request.param == "jit" else list(LINALG_PRIMS)
  for p in pinned:
    nbjax.config.set_eager_backend(p, request.param)

  def run(f, *args):
    out = nbjax.jit(f)(*args) if request.param == "jit" else f(*args)
    return nbjax.tree_util.tree_map(np.asarray, out)
  yield run
  for p in pinned:
    nbjax.config.set_eager_backend(p, None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cholesky_failure_is_an_all_nan_matrix(engine, dtype):
  # JAX: potrf's info > 0 (not positive definite, or NaN) turns that matrix's lower triangle
  # into NaN
  rng = np.random.default_rng(20)
  good = _spd(rng, (2, 3, 3), dtype)
  not_pd = np.array([[1, 2, 0], [2, 1, 0], [0, 0, 1]], dtype)
  with_nan = good[0].copy()
  with_nan[2, 1] = with_nan[1, 2] = np.nan
  a = np.stack([good[0], not_pd, good[1], with_nan])
  ok = np.array([True, False, True, False])
  for f in (nbjax.numpy.linalg.cholesky,
            lambda x: lax.linalg.cholesky(x, symmetrize_input=False)):
    L = engine(f, a)
    assert L.dtype == dtype and L.shape == a.shape
    # (JAX 0.10.2: the NaNs fill the lower triangle; above it stays 0, as for any L)
    assert np.isnan(L[1][np.tril_indices(3)]).all() and np.isnan(L[3]).any()
    assert (L[~ok][:, np.triu_indices(3, 1)[0], np.triu_indices(3, 1)[1]] == 0).all()
    tol = 1e-4 if np.finfo(dtype).bits <= 32 else 1e-10
    np.testing.assert_allclose(L[ok], np.linalg.cholesky(a[ok]), rtol=tol, atol=tol)


@pytest.mark.parametrize("n", [5, 40, 200])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_cholesky_eager_and_jit_agree_bit_for_bit(n, dtype):
  # one kernel (a loop below 32 x 32, LAPACK potrf from there) eagerly and as jit's FFI call:
  # JAX's linalg_test compares the two at 1e-6 (XLA's own cholesky expansion differed by 4e-6)
  rng = np.random.default_rng(21)
  a = _spd(rng, (2, n, n), dtype)
  a[1, n // 2, n // 2] = -1  # a failure in the batch stays a failure under both
  f = lambda x: lax.linalg.cholesky(x, symmetrize_input=False)
  eager, jitted = np.asarray(f(a)), np.asarray(nbjax.jit(f)(a))
  np.testing.assert_array_equal(eager, jitted)
  assert np.isnan(eager[1]).any() and not np.isnan(eager[0]).any()
  tol = 1e-4 * n
  np.testing.assert_allclose(eager[0] @ _H(eager[0]), a[0], rtol=tol, atol=tol)


def test_geqrf_is_reachable_from_lax_linalg_as_jax():
  # JAX's lax.linalg module holds geqrf (its tests call it from there with ormqr)
  a = np.random.default_rng(22).standard_normal((2, 5, 3))
  h, taus = LA.geqrf(a)
  assert h.shape == (2, 5, 3) and taus.shape == (2, 3)
  q = np.asarray(LA.householder_product(h, taus))
  np.testing.assert_allclose(q @ np.triu(np.asarray(h)[:, :3]), a, atol=1e-12)


SINGULAR = [  # (a, b, inv(a), solve(a, b)): LAPACK getrf + BLAS trsm (JAX's CPU solve) give these
    (np.array([[1., 2.], [2., 4.]]), np.array([1., 1.]),
     np.array([[-np.inf, np.inf], [np.inf, -np.inf]]), np.array([-np.inf, np.inf])),
    (np.zeros((2, 2)), np.array([0., 1.]),
     np.array([[np.nan, np.nan], [np.nan, np.inf]]), np.array([np.nan, np.inf])),
    (np.array([[0., 1.], [0., 1.]]), np.array([1., 1.]),
     np.array([[np.inf, -np.inf], [0., 1.]]), np.array([np.nan, 1.])),
]


@pytest.mark.parametrize("case", range(len(SINGULAR)))
def test_singular_inverse_and_solve_give_infinities(engine, case):
  a, b, inv, sol = SINGULAR[case]
  np.testing.assert_array_equal(engine(nbjax.numpy.linalg.inv, a), inv)
  np.testing.assert_array_equal(engine(nbjax.numpy.linalg.solve, a, b), sol)
  np.testing.assert_array_equal(engine(nbjax.numpy.linalg.inv, a.astype(np.float32)),
                                inv.astype(np.float32))


@pytest.mark.parametrize("p", TS_FLAGS, ids=lambda p: "".join(str(int(v)) for v in p.values()))
def test_triangular_solve_zero_pivot_as_blas_trsm(engine, p):
  # a zero on the diagonal: every engine gives BLAS trsm's infinities and NaNs
  blas = pytest.importorskip("scipy.linalg.blas")
  a = np.array([[2., 5., 6.], [1., 0., 7.], [3., 1., 4.]])
  for b in (np.array([[1., 0.], [0., 1.], [2., 0.]]), np.array([[0., 0.], [1., 0.], [0., 0.]])):
    b = b if p["left_side"] else b.T.copy()
    want = blas.dtrsm(1.0, a, b, side=0 if p["left_side"] else 1, lower=int(p["lower"]),
                      trans_a=int(p["transpose_a"]), diag=int(p["unit_diagonal"]))
    got = engine(lambda x, y: LA.triangular_solve_p.bind(x, y, **p), a, b)
    np.testing.assert_array_equal(got, want)


LINALG_FUNS = ["inv", "det", "slogdet", "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh",
               "norm", "solve", "matrix_power"]


@pytest.mark.parametrize("x64", [True, False])
@pytest.mark.parametrize("name", LINALG_FUNS)
def test_linalg_integer_and_bool_inputs_promote_as_jax(engine, name, x64):
  # JAX 0.10 promotes bool and ints of up to 32 bits to float32 (64-bit ints to the default
  # float); the matrix power stays in the input dtype
  f = getattr(nbjax.numpy.linalg, name)
  call = {"matrix_power": lambda a: f(a, 2), "solve": lambda a: f(a, a[..., 0])}.get(name, f)
  with nbjax.config.override("enable_x64", x64):
    for a in (np.array([[2, 1], [1, 3]], np.int32), np.eye(2, dtype=bool)):
      out = nbjax.tree_util.tree_leaves(engine(call, a))
      want = a.dtype if name == "matrix_power" else np.dtype(np.float32)
      assert [o.dtype for o in out] == [want] * len(out), (name, a.dtype)
      ref = {"matrix_power": lambda m: np.linalg.matrix_power(m, 2)}.get(name)
      if name in ("inv", "det", "svdvals", "eigvalsh", "norm", "matrix_power"):
        ref = ref or getattr(np.linalg, name)
        np.testing.assert_allclose(out[0], ref(a.astype(np.float64)).astype(out[0].dtype),
                                   rtol=1e-6)


def test_eigh_reads_one_triangle_or_symmetrizes(engine):
  # jnp.linalg.eigh(UPLO, symmetrize_input) and lax.linalg.eigh(lower, symmetrize_input):
  # symmetrize_input=True (the default) uses (a + a^H) / 2; False reads only one triangle
  rng = np.random.default_rng(21)
  a = rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))
  herm = lambda t, k: t + np.conj(np.swapaxes(k(t, -1 if k is np.tril else 1), -1, -2))
  real_diag = lambda m: m - 1j * np.imag(np.diagonal(m, axis1=-2, axis2=-1))[..., None] * np.eye(4)
  lower = real_diag(herm(np.tril(a), np.tril))
  upper = real_diag(herm(np.triu(a), np.triu))
  sym = (a + _H(a)) / 2
  E = nbjax.numpy.linalg
  cases = [(lambda x: E.eigh(x), sym), (lambda x: E.eigh(x, UPLO="U"), sym),
           (lambda x: E.eigh(x, symmetrize_input=False), lower),
           (lambda x: E.eigh(x, UPLO="U", symmetrize_input=False), upper),
           (lambda x: E.eigvalsh(x, UPLO="U", symmetrize_input=False), upper),
           (lambda x: lax.linalg.eigh(x, symmetrize_input=False)[::-1], lower),
           (lambda x: lax.linalg.eigh(x, lower=False, symmetrize_input=False)[::-1], upper),
           (lambda x: lax.linalg.eigh(x)[::-1], sym)]
  for f, h in cases:
    out = engine(f, a)
    w = out if isinstance(out, np.ndarray) else out[0]
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), atol=1e-10)
    if not isinstance(out, np.ndarray):
      v = out[1]
      np.testing.assert_allclose(h @ v, v * w[..., None, :], atol=1e-10)
  # the ignored triangle may hold anything, NaN included
  junk = np.where(np.triu(np.ones((4, 4), bool), 1), np.nan, a)
  np.testing.assert_allclose(engine(lambda x: E.eigvalsh(x, symmetrize_input=False), junk),
                             np.linalg.eigvalsh(lower), atol=1e-10)


# ------------------------------------------------------------- eig (general eigendecomposition)

EIG_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
_CPLX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
         np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}


def _eig_input(rng, shape, dtype):
  a = rng.standard_normal(shape)
  if np.dtype(dtype).kind == "c":
    a = a + 1j * rng.standard_normal(shape)
  return a.astype(dtype)


def _match_eigenvalues(got, want, tol):
  """Every eigenvalue of ``want`` matches a distinct one of ``got`` (order is LAPACK's)."""
  left = list(got)
  for w in want:
    k = int(np.argmin([abs(g - w) for g in left]))
    assert abs(left[k] - w) <= tol * (1 + abs(w)), (got, want)
    left.pop(k)


@pytest.mark.parametrize("dtype", EIG_DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (1, 1), (0, 0), (3, 0, 0)])
def test_eig_invariants_dtypes_and_jit_equals_eager(dtype, shape):
  rng = np.random.default_rng(30)
  a = _eig_input(rng, shape, dtype)
  cd = np.dtype(_CPLX[np.dtype(dtype)])
  tol = 2e-4 if cd == np.complex64 else 1e-10
  f = lambda x: lax.linalg.eig(x)
  w, vl, vr = (np.asarray(o) for o in f(A(a)))
  jw, jvl, jvr = (np.asarray(o) for o in nbjax.jit(f)(A(a)))
  for o, j, s in ((w, jw, shape[:-1]), (vl, jvl, shape), (vr, jvr, shape)):
    assert o.dtype == j.dtype == cd and o.shape == j.shape == s
    np.testing.assert_array_equal(o, j)  # one kernel: bit-for-bit
  a64 = a.astype(np.complex128)
  scale = 1 + np.abs(a64).max(initial=0)
  np.testing.assert_allclose(a64 @ vr, vr * w[..., None, :], atol=tol * scale)
  vlh = np.conj(np.swapaxes(vl, -1, -2))
  np.testing.assert_allclose(vlh @ a64, w[..., :, None] * vlh, atol=tol * scale)
  for v in (vl, vr):
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, atol=tol)
    if not v.size:
      continue
    # LAPACK's normalisation: the largest component of each eigenvector is real
    big = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    np.testing.assert_allclose(big.imag, 0, atol=tol)
  b = int(np.prod(shape[:-2]))
  for m, ww in zip(a64.reshape((b,) + shape[-2:]), w.reshape((b, shape[-1]))):
    _match_eigenvalues(ww, np.linalg.eigvals(m), tol)
  # the options: eigenvalues alone, left or right eigenvectors alone
  for left, right in ((False, False), (True, False), (False, True)):
    g = lambda x, l=left, r=right: lax.linalg.eig(x, compute_left_eigenvectors=l,
                                                  compute_right_eigenvectors=r)
    out, jout = g(A(a)), nbjax.jit(g)(A(a))
    want = [w] + [vl] * left + [vr] * right
    assert len(out) == len(jout) == len(want)
    for o, j, ref in zip(out, jout, want):
      np.testing.assert_array_equal(np.asarray(o), np.asarray(j))
      np.testing.assert_allclose(np.asarray(o), ref, atol=tol * scale)


def test_eig_real_input_complex_pairs_and_jnp_wrappers():
  # a rotation: eigenvalues +-i, eigenvectors a conjugate pair (real geev's packed pair)
  r = np.array([[0.0, -1.0], [1.0, 0.0]])
  E = nbjax.numpy.linalg
  for run in (lambda f, x: f(x), lambda f, x: nbjax.jit(f)(x)):
    res = run(E.eig, r)
    assert type(res) is E.EigResult and res._fields == ("eigenvalues", "eigenvectors")
    w, v = np.asarray(res.eigenvalues), np.asarray(res.eigenvectors)
    np.testing.assert_allclose(w, [1j, -1j], atol=1e-15)
    np.testing.assert_allclose(v[:, 1], np.conj(v[:, 0]), atol=1e-15)
    np.testing.assert_allclose(r @ v, v * w, atol=1e-15)
    np.testing.assert_array_equal(np.asarray(run(E.eigvals, r)), w)
  with nbjax.config.override("enable_x64", False):
    assert E.eigvals(np.eye(2, dtype=np.int32)).dtype == np.complex64
    assert E.eig(np.eye(2, dtype=bool)).eigenvectors.dtype == np.complex64
  with nbjax.config.override("enable_x64", True):
    assert E.eigvals(np.eye(2, dtype=np.int32)).dtype == np.complex64  # JAX 0.10: int32 -> c64
    assert E.eigvals(np.eye(2, dtype=np.float32)).dtype == np.complex64


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", EIG_DTYPES)
def test_eig_nonfinite_input_gives_nans(jit, dtype):
  # as JAX: a matrix the decomposition fails on gives NaNs; the others in the batch are exact
  a = _eig_input(np.random.default_rng(31), (3, 3, 3), dtype)
  a[0, 1, 2] = np.nan
  a[2, 0, 0] = np.inf
  f = nbjax.jit(lax.linalg.eig) if jit else lax.linalg.eig
  w, vl, vr = (np.asarray(o) for o in f(A(a)))
  for o in (w, vl, vr):
    assert np.isnan(o[0].real).all() and np.isnan(o[0].imag).all() and np.isnan(o[2].real).all()
  good = [np.asarray(o) for o in lax.linalg.eig(A(a[1]))]
  for o, g in zip((w, vl, vr), good):
    np.testing.assert_array_equal(o[1], g)


@pytest.mark.parametrize("x,exc,msg", [
    (np.ones((2, 3)), ValueError, r"The input to eig must be a square matrix. Got shape \(2, 3\)"),
    (np.ones((4, 2, 3)), ValueError, r"eig must be a square matrix"),
    (np.ones((3,)), TypeError, "Input 0 to eig must have rank at least 2"),
    (np.ones((2, 2), np.int32), TypeError, "eig does not accept dtype int32"),
    (np.ones((2, 2), np.float16), NotImplementedError, "Unsupported dtype float16"),  # (JAX: CPU)
])
def test_eig_errors_as_jax(x, exc, msg):
  for f in (lax.linalg.eig, nbjax.jit(lax.linalg.eig)):
    with pytest.raises(exc, match=msg):
      f(A(x))
  if x.dtype.kind == "f" and x.dtype.itemsize > 2:
    for f in (nbjax.numpy.linalg.eig, nbjax.numpy.linalg.eigvals):
      with pytest.raises(exc, match=msg):
        f(x)


def _separated(rng, n, dtype=np.float64):
  """A matrix with well-separated real eigenvalues 1, -2, 3, ... (``P diag P^-1``; complex
  ``dtype``: a complex ``P``)."""
  p = rng.standard_normal((n, n)) + 2 * np.eye(n)
  if np.dtype(dtype).kind == "c":
    p = p + 1j * rng.standard_normal((n, n))
  lam = np.arange(1, n + 1) * (-1.0) ** np.arange(n)
  return ((p * lam) @ np.linalg.inv(p)).astype(dtype)


@pytest.mark.parametrize("jit", [False, True])
def test_eigvals_jvp_and_grad_vs_differences(jit):
  rng = np.random.default_rng(32)
  a = np.stack([_separated(rng, 4), _separated(rng, 4)])
  c = _separated(rng, 3, np.complex128)
  E = nbjax.numpy.linalg
  J = nbjax.jit if jit else (lambda f: f)
  testing.check_jvp(J(E.eigvals), (a,))
  testing.check_jvp(J(E.eigvals), (_separated(rng, 4, np.complex128),))
  # grad of order-free real scalars of the eigenvalues
  F = lambda x: nbjax.numpy.sum(lax.real(E.eigvals(x)) ** 3 + lax.imag(E.eigvals(x)))
  g = np.asarray(J(nbjax.grad(F))(a))
  Fn = lambda x: float(np.sum(np.linalg.eigvals(x).real ** 3 + np.linalg.eigvals(x).imag))
  t = rng.standard_normal(a.shape)
  eps = 1e-6
  num = (Fn(a + eps * t) - Fn(a - eps * t)) / (2 * eps)
  np.testing.assert_allclose(np.sum(g * t), num, rtol=1e-6)
  # complex input: grad is the g with dF(t) = Re(sum(g * t)) (JAX's convention)
  gc = np.asarray(J(nbjax.grad(F))(c))
  tc = rng.standard_normal(c.shape) + 1j * rng.standard_normal(c.shape)
  num = (Fn(c + eps * tc) - Fn(c - eps * tc)) / (2 * eps)
  np.testing.assert_allclose(np.sum(gc * tc).real, num, rtol=1e-6)
  # JAX: no eigenvector derivatives, and none of second order
  msg = "Pass enable_eigvec_derivs=True to jax.lax.linalg.eig to opt in"
  with pytest.raises(NotImplementedError, match=msg):
    J(nbjax.grad(lambda x: nbjax.numpy.sum(lax.real(E.eig(x).eigenvectors))))(a)
  with pytest.raises(NotImplementedError, match=msg):
    nbjax.jvp(lambda x: lax.linalg.eig(x, compute_left_eigenvectors=False), (a,), (t,))
  with pytest.raises(NotImplementedError, match=msg):
    J(nbjax.grad(lambda x: nbjax.numpy.sum(nbjax.grad(F)(x))))(a)


@pytest.mark.parametrize("bd", [0, 1, 2])
def test_eig_vmap_every_bdim(bd):
  g = np.random.default_rng(33).standard_normal((3, 3))
  testing.check_vmap(lambda x: lax.linalg.eig(x), (_stack(g, bd),), in_axes=bd)
  testing.check_vmap(nbjax.numpy.linalg.eigvals, (_stack(g, bd),), in_axes=bd)


def test_linalg_api_as_jax_linalg_test():
  """JAX's linalg_test testMatmul/testMatrixRank(Tol)/testPinvRcond/testPinvGradIssue2792/
  testEmpty*Norm/testNumpyQrModes/testQrInvalidDtypeCPU (values from jax 0.10.2)."""
  L = jnp.linalg
  x = np.ones((3, 3))
  np.testing.assert_allclose(L.matmul(np.ones((2, 3)), np.ones(3), precision="highest",
                                      preferred_element_type=np.float32), [3.0, 3.0])
  assert int(L.matrix_rank(x, hermitian=True)) == 1
  with pytest.raises(ValueError, match="^matrix_rank: only one of tol or rtol may be specified.$"):
    L.matrix_rank(x, rtol=1e-2, tol=1e-2)
  with pytest.raises(ValueError, match="^pinv: only one of rtol and rcond may be specified.$"):
    L.pinv(x, rcond=1e-2, rtol=1e-2)
  np.testing.assert_array_equal(L.pinv(x, rcond=1e-2), L.pinv(x, rtol=1e-2))
  # pinv's derivative is Golub-Pereyra's (through rank-deficient matrices too)
  f = lambda p: L.pinv(jnp.array([[0.0, 0.0], [-p, 1.0]]) / (1 + p ** 2))
  np.testing.assert_allclose(nbjax.jacobian(f)(2.0), [[0.0, -1.0], [0.0, 0.0]], atol=1e-12)
  a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  np.testing.assert_allclose(nbjax.jacobian(L.pinv)(a).sum(axis=(2, 3)),
                             [[-0.25, 0.0, 0.25], [0.25, 0.0, -0.25]], atol=1e-12)
  h = nbjax.jacobian(lambda a: L.pinv(a, hermitian=True))(np.array([[2.0, 1.0], [1.0, 3.0]]))
  np.testing.assert_allclose(h.sum(axis=(2, 3)), [[-0.16, -0.08], [-0.08, -0.04]], atol=1e-12)
  for shape in [(0, 2), (2, 0), (0, 0)]:
    for ord in [1, 2, np.inf, "fro", "nuc"]:
      assert float(L.matrix_norm(jnp.zeros(shape), ord=ord)) == 0.0
  for ord in [1, 2, np.inf]:
    assert float(L.vector_norm(jnp.zeros(0), ord=ord)) == 0.0
  b = np.arange(12.0).reshape(4, 3) + np.eye(4, 3)
  q, r = L.qr(b, mode="full")
  assert q.shape == (4, 3) and r.shape == (3, 3)
  np.testing.assert_allclose(q @ r, b, atol=1e-12)
  for f in (L.qr, L.cholesky, L.inv, nbjax.scipy.linalg.schur):
    with pytest.raises(NotImplementedError, match="Unsupported dtype float16"):
      f(np.eye(3, dtype=np.float16))
  with pytest.raises(TypeError, match="qr does not accept dtype int32 at position 0. Accepted "
                     "dtypes at position 0 are subtypes of floating, complexfloating."):
    nbjax.lax.linalg.qr(np.eye(3, dtype=np.int32))


def test_eig_eigenvector_derivatives_as_jax():
  """JAX's linalg_test testEigGrad{Real,Complex}Inputs: lax.linalg.eig(...,
  enable_eigvec_derivs=True) differentiates the eigenvectors (values from jax 0.10.2);
  without it, JAX's NotImplementedError."""
  from nbjax.test_util import check_grads
  a = np.array([[2.0, 1.0, 0.5], [0.3, -1.0, 0.2], [0.1, 0.4, 3.0]])

  def f(a):
    w, vl, vr = lax.linalg.eig(a, enable_eigvec_derivs=True)
    return w.real.sum() + (vr * vr).real.sum() + (vl * vl).imag.sum() + (vr[0] ** 2).real.sum()
  np.testing.assert_allclose(api.grad(f)(a), [[1.24555928, 0.21019, 0.57943547],
                                              [-0.05370046, 1.04753973, 0.11390524],
                                              [-0.40639302, -0.0755529, 0.70690099]], atol=1e-7)
  t = np.array([[0.1, 0.0, -0.2], [0.0, 0.3, 0.0], [0.5, 0.0, 0.1]])
  eig_r = lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
  _, tan = api.jvp(eig_r, (a,), (t,))
  np.testing.assert_allclose(tan[1], [[0.02755686, 0.06122055, -0.21620036],
                                      [0.00552645, 0.02373576, -0.01064543],
                                      [-0.03267617, 0.45609575, 0.11773854]], atol=1e-7)
  with pytest.raises(NotImplementedError, match="Pass enable_eigvec_derivs=True to "
                     "jax.lax.linalg.eig to opt in"):
    api.jvp(lambda a: lax.linalg.eig(a)[2], (a,), (t,))
  check_grads(lambda a: tuple(v * v for v in lax.linalg.eig(
      a, enable_eigvec_derivs=True)), (a + 0.5j * t,), order=2, rtol=1e-3, atol=1e-3)


def test_linalg_jvp_products_at_highest_precision():
  """JAX's linalg_test testCholeskyGradPrecision/testTriangularSolveGradPrecision: the
  derivative rules' dot_generals ask for Precision.HIGHEST."""
  import functools
  a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32)
  b = np.ones((1, 3), np.float32)
  for f, args in ((nbjax.numpy.linalg.cholesky, (a,)), (lax.linalg.triangular_solve,
                                                        (np.tril(a), b))):
    eqns = nbjax.make_jaxpr(functools.partial(api.jvp, f))(args, args).jaxpr.eqns
    precisions = [e.params["precision"] for e in eqns if e.primitive.name == "dot_general"]
    assert precisions and all(p == (lax.Precision.HIGHEST,) * 2 for p in precisions)


def test_hermitian_svd_pinv_use_the_hermitian_part_as_jax():
  """JAX's linalg_test testPinv(hermitian=True) checks gradients against finite differences
  of non-Hermitian perturbations: svd/pinv(hermitian=True) factor (a + a^H) / 2, as JAX's
  (values from jax 0.10.2)."""
  L = jnp.linalg
  a = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, 1.0], [0.2, 0.0, 1.0]])
  np.testing.assert_allclose(L.svd(a, hermitian=True, compute_uv=False),
                             [3.4972024, 1.62728275, 0.87551486], atol=1e-7)
  np.testing.assert_allclose(L.pinv(a, hermitian=True),
                             [[0.55193176, -0.14049172, 0.01505268],
                              [-0.14049172, 0.39939789, -0.18564977],
                              [0.01505268, -0.18564977, 1.09131962]], atol=1e-7)
  assert int(L.matrix_rank(np.array([[1.0, 2.0], [0.0, 0.0]]), hermitian=True)) == 2
  t = np.array([[0.1, 0.0, -0.2], [0.0, 0.3, 0.0], [0.5, 0.0, 0.1]])
  _, dp = api.jvp(lambda a: L.pinv(a, hermitian=True), (a,), (t,))
  np.testing.assert_allclose(dp, [[-0.03889932, 0.04055438, -0.10068229],
                                  [0.04055438, -0.06110066, 0.06613363],
                                  [-0.10068229, 0.06613363, -0.13438845]], atol=1e-7)


def test_pinv_jvp_of_wide_and_tall_matrices_as_jax():
  # JAX's association of Golub and Pereyra's formula by shape: no n x n product for a wide
  # (m x n) matrix (linalg_test testPinv with a (2, 400000) operand); values from JAX 0.10.2
  rng = np.random.RandomState(1)
  for shape, want in (
      ((3, 5), [0.009984498532868868, -0.0014857863465252974, -0.1344638705674841,
                0.17542329435506332]),
      ((5, 3), [-0.50261150260791, -0.06678249965755811, 0.36793038484270113,
                -0.15368865741756246])):
    a, t = rng.randn(*shape), rng.randn(*shape)
    _, dp = nbjax.jvp(jnp.linalg.pinv, (a,), (t,))
    np.testing.assert_allclose(np.asarray(dp).ravel()[:4], want, rtol=1e-12)
  a = np.random.RandomState(2).randn(2, 100000).astype(np.complex64)
  p, dp = nbjax.jvp(jnp.linalg.pinv, (a,), (a,))
  assert dp.shape == (100000, 2) and dp.dtype == np.complex64
  np.testing.assert_allclose(np.asarray(dp), -np.asarray(p), atol=1e-7)  # d pinv(ca)/dc = -P


def test_single_precision_svd_eager_equals_jit_and_jax():
  # above 32x32 the eager SVD ran NumPy's sgesdd, whose singular vectors' signs and rounding
  # differ from the LAPACK jit calls (linalg_test testSVD, float32 (3, 53, 53)); JAX 0.10.2's
  # values for this matrix
  a = (np.random.RandomState(0).randn(3, 53, 53) * 3).astype(np.float32)
  e, j = jnp.linalg.svd(a), nbjax.jit(jnp.linalg.svd)(a)
  for x, y in zip(e, j):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  # (JAX's figures from its machine: another CPU's LAPACK/BLAS kernels round differently, by
  # 2e-5 relative in U on an AVX-512 AMD machine, so those compare to tolerances)
  np.testing.assert_allclose(np.asarray(e.U)[0, 0, :3],
                             np.array([0.0075442492961883545, 0.09559916704893112,
                                       -0.07166433334350586], np.float32), rtol=1e-4)
  np.testing.assert_allclose(np.asarray(e.S)[0, :2],
                             np.array([40.97711181640625, 39.454978942871094], np.float32),
                             rtol=1e-6)
  c = (a + 1j * a[::-1]).astype(np.complex64)
  s = lambda c: jnp.linalg.svd(c, compute_uv=False)  # noqa: E731
  np.testing.assert_array_equal(np.asarray(s(c)), np.asarray(nbjax.jit(s)(c)))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.complex128])
def test_eigh_and_svd_eager_equal_jit_above_32x32(dtype):
  # eager ran NumPy's LAPACK (its own OpenBLAS) above 32x32 and jit SciPy's (the FFI call):
  # float32 eigenvalues 5e-6 apart at n=50, beyond eigh_test testEigh's 10 eps (JAX's eager
  # and jit run one LAPACK); both now run the one binding
  rng = np.random.RandomState(3)
  a = rng.randn(50, 50) + (1j * rng.randn(50, 50) if np.dtype(dtype).kind == "c" else 0)
  a = (a + a.conj().T).astype(dtype)
  for f in (jnp.linalg.eigh, jnp.linalg.svd):
    for x, y in zip(f(a), nbjax.jit(f)(a)):
      np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_linalg_argument_errors_and_results_as_jax():
  # JAX 0.10.2's messages and result types
  la = jnp.linalg
  cases = [(lambda: la.inv(jnp.ones((2, 3))), "Argument to inv must have shape [..., n, n], got (2, 3)."),
           (lambda: la.slogdet(jnp.ones(3)), "Argument to slogdet() must have shape [..., n, n], got (3,)"),
           (lambda: la.slogdet(jnp.eye(2), method="foo"),
            "Unknown slogdet method 'foo'. Supported methods are 'lu' (`None`), and 'qr'."),
           (lambda: la.solve(jnp.ones(3), jnp.ones(3)),
            "left hand array must be at least two dimensional; got a.shape=(3,)"),
           (lambda: la.solve(jnp.ones((3, 2, 2)), jnp.ones((3, 2))),
            "Invalid shapes for solve: (3, 2, 2), (3, 2). Prior to JAX v0.5.0, this would have been "
            "treated as a batched 1-dimensional solve. To recover this behavior, use "
            "solve(a, b[..., None]).squeeze(-1)."),
           (lambda: la.solve(jnp.eye(2), jnp.ones(3)), "inconsistent size for core dimension 'm': "
            "3 vs 2 on vectorized function with excluded=frozenset() and signature='(m,m),(m)->(m)'"),
           (lambda: la.solve(jnp.eye(2), 1.0), "input with shape () does not have enough dimensions "
            "for all core dimensions ('m', 'n') on vectorized function with excluded=frozenset() and "
            "signature='(m,m),(m,n)->(m,n)'"),
           (lambda: la.norm(jnp.ones((2, 2, 2)), axis=(0, 1, 2)), "Improper number of axes for norm: "
            "axis=(0, 1, 2). Pass one axis to compute a vector-norm, or two axes to compute a "
            "matrix-norm."),
           (lambda: la.outer(jnp.ones((2, 2)), jnp.ones(2)),
            "Input arrays must be one-dimensional, but they are x1.ndim=2 x2.ndim=1"),
           (lambda: la.cross(jnp.ones(2), jnp.ones(2)), "Both input arrays must be (arrays of) "
            "3-dimensional vectors, but they have x1.shape[axis]=2 and x2.shape[axis]=2"),
           (lambda: la.matrix_transpose(jnp.ones(3)),
            "matrix_transpose requires at least 2 dimensions; got ndim=1")]
  for call, msg in cases:
    with pytest.raises(ValueError) as e:
      call()
    assert str(e.value) == msg
  for call, msg in [(lambda: la.svd(jnp.ones(3)), "Input 0 to svd must have rank at least 2, but got "
                     "shape=(3,)"),
                    (lambda: la.matrix_power(jnp.eye(2), 1.5), "exponent must be an integer, got 1.5")]:
    with pytest.raises(TypeError) as e:
      call()
    assert str(e.value) == msg
  res = la.lstsq(jnp.array([[1., 0], [1, 1], [1, 2]]), jnp.array([1., 2, 4]))
  assert type(res) is tuple and len(res) == 4
  np.testing.assert_allclose(res[0], [0.8333333333333334, 1.5])
  assert la.matrix_rank(jnp.ones(3)).dtype == np.int32 and int(la.matrix_rank(jnp.ones(3))) == 1
  np.testing.assert_allclose(la.slogdet(jnp.eye(2) * 2, method="qr").logabsdet, 1.3862943611198906)
