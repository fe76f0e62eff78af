"""The rarer ``lax.linalg`` primitives: ``schur``, ``hessenberg``, ``tridiagonal``,
``householder_product``, ``tridiagonal_solve``; every rule of each in one place (re-exported
by ``nbjax.lax.linalg``).

Pipeline position: ``lax.linalg.schur(a)`` -> ``schur_p.bind``; eagerly the registry runs the
numba kernel from ``kernels.linalg_more`` (LAPACK through SciPy's cython_lapack), under
``vmap`` the batch axis moves to the front and the same batched kernel runs once, and under
``jit`` the primitive lowers to an XLA typed-FFI custom call whose handler is a numba
``cfunc`` wrapping that kernel: eager, vmap and jit agree bit for bit, and with JAX's CPU
results (the same LAPACK routines, called the same way).
"""
from __future__ import annotations

import enum
import math

import numpy as np

from nbjax import dtypes, registry
from nbjax.array import Array
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad
from nbjax.lax.reductions import work_eager
from nbjax.lax.linalg import (_T, _aval, _common_batch, _flat, _lax, _linalg_dtypes, _mm, _rand,
                              _real_dtype, _register, _square_bad)


class _Kernels:
  """``kernels.linalg_more``, imported on first use: it loads SciPy's LAPACK (about 0.1 s, and
  SciPy is an optional dependency), which ``import nbjax`` should not pay for."""

  def __getattr__(self, name):
    from kernels import linalg_more
    return getattr(linalg_more, name)


K = _Kernels()


_NAMES = "floating, complexfloating"


def _check(name, avals, ranks=None):
  """JAX's linalg_primitive checks: dtype (float/complex), rank, equal batch dims, one dtype.
  Returns the batch shape."""
  ranks = ranks or (2,) * len(avals)
  for i, a in enumerate(avals):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {a!r}")
    if a.dtype not in _linalg_dtypes:
      if a.dtype.kind == "f" or a.dtype == dtypes.bfloat16:  # (JAX's CPU lowering: no LAPACK)
        raise NotImplementedError(f"Unsupported dtype {a.dtype.name}.")
      raise TypeError(f"{name} does not accept dtype {a.dtype.name} at position {i}. Accepted "
                      f"dtypes at position {i} are subtypes of {_NAMES}.")
  for i, (a, r) in enumerate(zip(avals, ranks)):
    if a.ndim < r:
      raise TypeError(f"Input {i} to {name} must have rank at least {r}, but got "
                      f"shape={a.shape}")
  return _common_batch(name, avals, ranks)


def _nondiff(prim):
  """As JAX: no jvp rule, so differentiating is "Differentiation rule for '...' not
  implemented" (the registry's default error for a primitive without one)."""
  return prim


# ================================================================= schur

schur_p = Primitive("schur")
schur_p.multiple_results = True


def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
  _check("schur", [x])
  if x.shape[-2] != x.shape[-1]:
    raise ValueError(f"The input to schur must be a square matrix. Got shape {x.shape[-2:]}.")
  return [ShapedArray(x.shape, x.dtype)] * (2 if compute_schur_vectors else 1)


def _schur_sort_error():
  return NotImplementedError("The sort feature of LAPACK's gees routine is not implemented.")


def _schur_numba(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
  if sort_eig_vals:
    raise _schur_sort_error()
  vecs = bool(compute_schur_vectors)
  f = _flat(x)
  t = np.empty(f.shape, x.dtype)
  vs = np.empty(f.shape if vecs else (f.shape[0], 0, 0), x.dtype)
  if f.shape[0] and f.shape[-1]:
    K.schur(f, t, vs, vecs)
  return [t.reshape(x.shape)] + ([vs.reshape(x.shape)] if vecs else [])


def _schur_reference(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
  """SciPy's schur (the same LAPACK ?gees), per matrix; tests only."""
  from scipy import linalg as sl
  f = _flat(x)
  t, vs = np.empty(f.shape, x.dtype), np.empty(f.shape, x.dtype)
  out = "complex" if x.dtype.kind == "c" else "real"
  for b in range(f.shape[0] if f.shape[-1] else 0):
    t[b], vs[b] = sl.schur(f[b], output=out)
  return [t.reshape(x.shape)] + ([vs.reshape(x.shape)] if compute_schur_vectors else [])


def _schur_samples(rng, d):
  d = np.dtype(d)
  p = dict(compute_schur_vectors=True, sort_eig_vals=False, select_callable=None)
  return [([_rand(rng, (4, 4), d)], p), ([_rand(rng, (2, 3, 3), d)], p),
          ([_rand(rng, (3, 3), d)], dict(p, compute_schur_vectors=False)),
          ([_rand(rng, (1, 1), d)], p), ([np.zeros((0, 0), d)], p)]


def _schur_bad(rng):
  return _square_bad(dict(compute_schur_vectors=True, sort_eig_vals=False,
                          select_callable=None))


_register(schur_p, numba=_schur_numba, numpy=None, abstract_eval=_schur_abstract_eval,
          samples=_schur_samples, bad=_schur_bad, reference=_schur_reference,
          differentiable=False,
          note="LAPACK ?gees (unsorted) through SciPy's cython_lapack, eagerly and under jit "
               "(an FFI call to the same kernel); reference: scipy.linalg.schur")


def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
  r"""Schur decomposition ``x = Q U Q^H`` of square matrices ``[..., m, m]``.

  ``U`` is upper triangular (quasi-triangular with 2x2 blocks for complex-conjugate
  eigenvalue pairs of real input) and ``Q`` unitary. Returns ``(U, Q)``, or ``(U,)`` when
  ``compute_schur_vectors`` is false. ``sort_eig_vals`` (LAPACK's sorting) is not
  implemented, as in JAX; ``select_callable`` is unused.
  """
  return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                            sort_eig_vals=bool(sort_eig_vals),
                            select_callable=select_callable))


# ================================================================= hessenberg

hessenberg_p = Primitive("hessenberg")
hessenberg_p.multiple_results = True


def _hessenberg_abstract_eval(a):
  batch = _check("hessenberg", [a])
  if a.shape[-2] != a.shape[-1]:
    raise ValueError("Argument to Hessenberg reduction must have shape [..., n, n], got shape "
                     f"{a.shape}")
  return [ShapedArray(a.shape, a.dtype),
          ShapedArray(batch + (max(a.shape[-1] - 1, 0),), a.dtype)]


def _hessenberg_numba(a):
  f = _flat(a)
  n = f.shape[-1]
  out = np.empty(f.shape, a.dtype)
  taus = np.empty((f.shape[0], max(n - 1, 0)), a.dtype)
  if f.shape[0]:
    K.hessenberg(f, out, taus)
  return [out.reshape(a.shape), taus.reshape(a.shape[:-2] + (max(n - 1, 0),))]


def _hessenberg_reference(a):
  """SciPy's ?gehrd wrapper, per matrix; tests only."""
  from scipy.linalg import lapack
  f = _flat(a)
  n = f.shape[-1]
  out, taus = np.empty(f.shape, a.dtype), np.empty((f.shape[0], max(n - 1, 0)), a.dtype)
  for b in range(f.shape[0] if n else 0):
    gehrd, = lapack.get_lapack_funcs(("gehrd",), (f[b],))
    h, tau, _ = gehrd(f[b])
    out[b], taus[b] = h, tau[:n - 1]
  return [out.reshape(a.shape), taus.reshape(a.shape[:-2] + (max(n - 1, 0),))]


def _hessenberg_samples(rng, d):
  d = np.dtype(d)
  return [([_rand(rng, (4, 4), d)], {}), ([_rand(rng, (2, 5, 5), d)], {}),
          ([_rand(rng, (1, 1), d)], {})]


def _hessenberg_bad(rng):
  return _square_bad({})


_register(hessenberg_p, numba=_hessenberg_numba, numpy=None,
          abstract_eval=_hessenberg_abstract_eval, samples=_hessenberg_samples,
          bad=_hessenberg_bad, reference=_hessenberg_reference, differentiable=False,
          error_names=("Hessenberg",),
          note="LAPACK ?gehrd (ilo=1, ihi=n) through SciPy's cython_lapack, eagerly and under "
               "jit (an FFI call to the same kernel); reference: SciPy's gehrd")


def hessenberg(a):
  """Reduction of square matrices to upper Hessenberg form (LAPACK ?gehrd).

  Returns ``(a, taus)``: the upper triangle and first subdiagonal of ``a`` hold the
  Hessenberg matrix, the entries below hold the Householder reflectors, and ``taus``
  (``[..., n - 1]``) their scalar factors.
  """
  return tuple(hessenberg_p.bind(a))



# ================================================================= geqrf

geqrf_p = Primitive("geqrf")
geqrf_p.multiple_results = True


def _geqrf_abstract_eval(a):
  batch = _check("geqrf", [a])
  return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min(a.shape[-2:]),), a.dtype)]


def _geqrf_numba(a):
  f = _flat(a)
  k = min(f.shape[-2:])
  out = np.empty(f.shape, a.dtype)
  taus = np.empty((f.shape[0], k), a.dtype)
  if f.shape[0]:
    K.geqrf(f, out, taus)
  return [out.reshape(a.shape), taus.reshape(a.shape[:-2] + (k,))]


def _geqrf_reference(a):
  """SciPy's ?geqrf wrapper, per matrix; tests only."""
  from scipy.linalg import lapack
  f = _flat(a)
  k = min(f.shape[-2:])
  out, taus = np.empty(f.shape, a.dtype), np.empty((f.shape[0], k), a.dtype)
  for b in range(f.shape[0] if f.size else 0):
    geqrf, = lapack.get_lapack_funcs(("geqrf",), (f[b],))
    qr, tau, _, _ = geqrf(f[b])
    out[b], taus[b] = qr, tau[:k]
  return [out.reshape(a.shape), taus.reshape(a.shape[:-2] + (k,))]


def _geqrf_samples(rng, d):
  d = np.dtype(d)
  return [([_rand(rng, (4, 3), d)], {}), ([_rand(rng, (2, 3, 5), d)], {}),
          ([_rand(rng, (1, 1), d)], {})]


def _geqrf_bad(rng):
  return [([Array(np.ones((2, 2), np.int32))], {}, TypeError),
          ([Array(np.ones((3,)))], {}, TypeError)]


_register(geqrf_p, numba=_geqrf_numba, numpy=None, abstract_eval=_geqrf_abstract_eval,
          samples=_geqrf_samples, bad=_geqrf_bad, reference=_geqrf_reference,
          differentiable=False,
          note="LAPACK ?geqrf through SciPy's cython_lapack, eagerly and under jit; reference: "
               "SciPy's geqrf")


def geqrf(a):
  """Householder QR in LAPACK's packed form (?geqrf): ``(a, taus)``, R on and above the
  diagonal of ``a``, the reflectors below it, ``taus`` (``[..., min(m, n)]``) their factors
  (``householder_product(a, taus)`` is Q)."""
  return tuple(geqrf_p.bind(a))


# ================================================================= householder_product

householder_product_p = Primitive("householder_product")


def _hp_abstract_eval(a, taus):
  _check("householder_product", [a, taus], (2, 1))
  m, n = a.shape[-2:]
  if m < n:
    raise ValueError("The first argument to householder_product must have at least as many "
                     f"rows as columns, got shape {a.shape[-2:]}")
  if taus.shape[-1] > min(m, n):
    raise ValueError("The second argument to householder_product must not have more rows "
                     "than the minimum of the first argument's rows and columns.")
  return ShapedArray(a.shape, a.dtype)


def _hp_numba(a, taus):
  f = _flat(a)
  t = np.ascontiguousarray(taus).reshape(f.shape[0], taus.shape[-1])
  out = np.empty(f.shape, a.dtype)
  if f.shape[0]:
    K.householder_product(f, t, out)
  return out.reshape(a.shape)


def _hp_reference(a, taus):
  """SciPy's ?orgqr/?ungqr wrapper, per matrix; tests only."""
  from scipy.linalg import lapack
  f = _flat(a)
  t = np.ascontiguousarray(taus).reshape(f.shape[0], taus.shape[-1])
  out = np.empty(f.shape, a.dtype)
  for b in range(f.shape[0]):
    if f.shape[1] and f.shape[2]:
      orgqr, = lapack.get_lapack_funcs(("ungqr" if a.dtype.kind == "c" else "orgqr",), (f[b],))
      out[b] = orgqr(f[b], t[b])[0]
    else:
      out[b] = f[b]
  return out.reshape(a.shape)


def _geqrf(rng, shape, d):
  from scipy.linalg import lapack
  a = _rand(rng, shape, d)
  f = _flat(a)
  k = min(shape[-2:])
  qr, taus = np.empty(f.shape, d), np.empty((f.shape[0], k), d)
  for b in range(f.shape[0]):
    geqrf, = lapack.get_lapack_funcs(("geqrf",), (f[b],))
    qr[b], taus[b] = geqrf(f[b])[:2]
  return qr.reshape(shape), taus.reshape(shape[:-2] + (k,))


def _hp_samples(rng, d):
  d = np.dtype(d)
  a, t = _geqrf(rng, (5, 3), d)
  b, tb = _geqrf(rng, (2, 4, 4), d)
  return [([a, t], {}), ([b, tb], {}), ([a, t[:2]], {})]


def _hp_bad(rng):
  return [([Array(np.ones((2, 3))), Array(np.ones(2))], {}, ValueError),
          ([Array(np.ones((3, 2))), Array(np.ones(3))], {}, ValueError),
          ([Array(np.ones((3, 2), np.int32)), Array(np.ones(2, np.int32))], {}, TypeError)]


_register(householder_product_p, numba=_hp_numba, numpy=None, abstract_eval=_hp_abstract_eval,
          samples=_hp_samples, bad=_hp_bad, reference=_hp_reference, differentiable=False,
          note="LAPACK ?orgqr/?ungqr through SciPy's cython_lapack, eagerly and under jit; "
               "reference: SciPy's orgqr/ungqr")


def householder_product(a, taus):
  """The first ``n`` columns of the product of the elementary Householder reflectors stored
  below the diagonal of ``a`` (``[..., m, n]``, ``m >= n``), with scalar factors ``taus``
  (``[..., k]``, ``k <= n``): an orthogonal (unitary) matrix of ``a``'s shape."""
  return householder_product_p.bind(a, taus)


# ================================================================= ormqr

ormqr_p = Primitive("ormqr")


def _ormqr_abstract_eval(a, taus, c, *, left, transpose):
  _check("ormqr", [a, taus, c], (2, 1, 2))
  m = a.shape[-2]
  if left and c.shape[-2] != m:
    raise ValueError("ormqr with left=True expects c to have the same number of rows as the "
                     f"Householder matrix a. Got a shape {a.shape[-2:]} and c shape "
                     f"{c.shape[-2:]}.")
  if not left and c.shape[-1] != m:
    raise ValueError("ormqr with left=False expects c to have the same number of columns as "
                     f"the Householder matrix a has rows. Got a shape {a.shape[-2:]} and c "
                     f"shape {c.shape[-2:]}.")
  return ShapedArray(c.shape, c.dtype)


def _ormqr_codes(dtype, left, transpose):
  tr = ("C" if np.dtype(dtype).kind == "c" else "T") if transpose else "N"
  return ord("L" if left else "R"), ord(tr)


def _ormqr_numba(a, taus, c, *, left, transpose):
  f = _flat(a)
  B = f.shape[0]
  t = np.ascontiguousarray(taus).reshape(B, taus.shape[-1])
  cf = _flat(c)
  out = np.empty(cf.shape, c.dtype)
  if B:
    K.ormqr(f, t, cf, out, *_ormqr_codes(a.dtype, left, transpose))
  return out.reshape(c.shape)


def _ormqr_reference(a, taus, c, *, left, transpose):
  """Q (SciPy's orgqr on the reflectors, padded to m x m) times c, per matrix; tests only."""
  f = _flat(a)
  B, m, n = f.shape
  k = taus.shape[-1]
  t = np.ascontiguousarray(taus).reshape(B, k)
  cf = _flat(c)
  out = np.empty(cf.shape, c.dtype)
  for b in range(B):
    q = np.eye(m, dtype=a.dtype)
    for j in range(k):  # Q = H_1 ... H_k, H_j = I - tau v v^H
      v = np.zeros(m, a.dtype)
      v[j] = 1
      v[j + 1:] = f[b, j + 1:, j]
      q = q - t[b, j] * (q @ v)[:, None] * np.conj(v)[None, :]
    op = np.conj(q.T) if transpose else q
    out[b] = op @ cf[b] if left else cf[b] @ op
  return out.reshape(c.shape)


def _ormqr_samples(rng, d):
  d = np.dtype(d)
  a, t = _geqrf(rng, (4, 3), d)
  b, tb = _geqrf(rng, (2, 3, 3), d)
  p = dict(left=True, transpose=False)
  return [([a, t, _rand(rng, (4, 2), d)], p),
          ([a, t, _rand(rng, (4, 2), d)], dict(p, transpose=True)),
          ([a, t, _rand(rng, (2, 4), d)], dict(left=False, transpose=False)),
          ([a, t, _rand(rng, (5, 4), d)], dict(left=False, transpose=True)),
          ([b, tb, _rand(rng, (2, 3, 2), d)], p)]


def _ormqr_bad(rng):
  p = dict(left=True, transpose=False)
  return [([Array(np.ones((3, 2))), Array(np.ones(2)), Array(np.ones((4, 2)))], p, ValueError),
          ([Array(np.ones((3, 2))), Array(np.ones(2)), Array(np.ones((2, 2)))],
           dict(left=False, transpose=False), ValueError),
          ([Array(np.ones((3, 2), np.int32)), Array(np.ones(2, np.int32)),
            Array(np.ones((3, 2), np.int32))], p, TypeError)]


_register(ormqr_p, numba=_ormqr_numba, numpy=None, abstract_eval=_ormqr_abstract_eval,
          samples=_ormqr_samples, bad=_ormqr_bad, reference=_ormqr_reference,
          differentiable=False,
          note="LAPACK ?ormqr/?unmqr through SciPy's cython_lapack, eagerly and under jit; "
               "reference: Q formed from the reflectors")


def ormqr(a, taus, c, *, left=True, transpose=False):
  """``Q @ c`` (``left``) or ``c @ Q`` without forming ``Q``, the product of the Householder
  reflectors in ``a``/``taus`` (as ``geqrf`` returns them); ``transpose`` uses ``Q^T``
  (``Q^H`` for complex)."""
  return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


# ================================================================= tridiagonal

tridiagonal_p = Primitive("tridiagonal")
tridiagonal_p.multiple_results = True


def _tridiagonal_abstract_eval(a, *, lower):
  batch = _check("tridiagonal", [a])
  n = a.shape[-1]
  if a.shape[-2] != n or n == 0:
    raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                     f"{a.shape[-2:]}.")
  r = _real_dtype(a.dtype)
  return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (n,), r),
          ShapedArray(batch + (n - 1,), r), ShapedArray(batch + (n - 1,), a.dtype)]


def _tridiagonal_numba(a, *, lower):
  f = _flat(a)
  B, n = f.shape[:2]
  r = _real_dtype(a.dtype)
  out, d = np.empty(f.shape, a.dtype), np.empty((B, n), r)
  e, taus = np.empty((B, n - 1), r), np.empty((B, n - 1), a.dtype)
  if B:
    K.tridiagonal(f, out, d, e, taus, bool(lower))
  bs = a.shape[:-2]
  return [out.reshape(a.shape), d.reshape(bs + (n,)), e.reshape(bs + (n - 1,)),
          taus.reshape(bs + (n - 1,))]


def _tridiagonal_reference(a, *, lower):
  """SciPy's ?sytrd/?hetrd wrappers, per matrix; tests only."""
  from scipy.linalg import lapack
  f = _flat(a)
  B, n = f.shape[:2]
  outs = [np.empty(f.shape, a.dtype), np.empty((B, n), _real_dtype(a.dtype)),
          np.empty((B, n - 1), _real_dtype(a.dtype)), np.empty((B, n - 1), a.dtype)]
  for b in range(B):
    trd, = lapack.get_lapack_funcs(("hetrd" if a.dtype.kind == "c" else "sytrd",), (f[b],))
    for o, r in zip(outs, trd(f[b], lower=int(bool(lower)))):
      o[b] = r
  bs = a.shape[:-2]
  return [outs[0].reshape(a.shape), outs[1].reshape(bs + (n,)),
          outs[2].reshape(bs + (n - 1,)), outs[3].reshape(bs + (n - 1,))]


def _tridiagonal_samples(rng, d):
  d = np.dtype(d)
  sym = lambda *s: (lambda a: (a + np.conj(np.swapaxes(a, -1, -2))).astype(d))(_rand(rng, s, d))
  return [([sym(4, 4)], dict(lower=True)), ([sym(2, 5, 5)], dict(lower=False)),
          ([sym(1, 1)], dict(lower=True))]


def _tridiagonal_bad(rng):
  return [([Array(np.ones((2, 3)))], dict(lower=True), ValueError),
          ([Array(np.ones((0, 0)))], dict(lower=True), ValueError),
          ([Array(np.ones((2, 2), np.int32))], dict(lower=True), TypeError)]


_register(tridiagonal_p, numba=_tridiagonal_numba, numpy=None,
          abstract_eval=_tridiagonal_abstract_eval, samples=_tridiagonal_samples,
          bad=_tridiagonal_bad, reference=_tridiagonal_reference, differentiable=False,
          note="LAPACK ?sytrd/?hetrd through SciPy's cython_lapack, eagerly and under jit; "
               "reference: SciPy's sytrd/hetrd")


def tridiagonal(a, *, lower=True):
  """Reduction of Hermitian matrices to tridiagonal form (LAPACK ?sytrd/?hetrd), reading only
  the ``lower`` (else upper) triangle. Returns ``(a, d, e, taus)``: the packed result (the
  tridiagonal matrix and the reflectors), its real diagonal ``d``, off-diagonal ``e`` and the
  reflectors' factors ``taus``."""
  return tuple(tridiagonal_p.bind(a, lower=bool(lower)))


# ================================================================= tridiagonal_solve

tridiagonal_solve_p = Primitive("tridiagonal_solve")


def _tsolve_abstract_eval(dl, d, du, b, *, perturb_singular):
  _check("tridiagonal_solve", [dl, d, du, b], (1, 1, 1, 2))
  if dl.shape != d.shape or dl.shape != du.shape:
    raise TypeError("tridiagonal_solve requires that all diagonal arguments have the same "
                    "shape.")
  if dl.shape != b.shape[:-1]:
    raise TypeError("tridiagonal_solve requires that the leading ndim-1 dimensions of b "
                    "equal the dimensions of the diagonal arguments.")
  return ShapedArray(b.shape, b.dtype)


def _tsolve_numba(dl, d, du, b, *, perturb_singular):
  m = d.shape[-1]
  flat = lambda v: np.ascontiguousarray(v).reshape(-1, m)
  bf = _flat(b)
  out = np.empty(bf.shape, b.dtype)
  if bf.shape[0]:
    solve = K.tridiagonal_solve_perturbed if perturb_singular else K.tridiagonal_solve
    solve(flat(dl), flat(d), flat(du), bf, out)
  return out.reshape(b.shape)


def _tsolve_reference(dl, d, du, b, *, perturb_singular):
  """SciPy's ?gtsv wrapper, per system; tests only."""
  from scipy.linalg import lapack
  m = d.shape[-1]
  flat = lambda v: np.ascontiguousarray(v).reshape(-1, m)
  dl, d, du, bf = flat(dl), flat(d), flat(du), _flat(b)
  out = np.empty(bf.shape, b.dtype)
  for i in range(bf.shape[0]):
    if m == 0 or bf.shape[2] == 0:
      out[i] = bf[i]
      continue
    if m == 1:  # SciPy's wrapper rejects empty off-diagonals
      out[i] = bf[i] / d[i, 0] if d[i, 0] != 0 else np.nan
      continue
    gtsv, = lapack.get_lapack_funcs(("gtsv",), (bf[i],))
    _, _, _, x, info = gtsv(dl[i, 1:], d[i], du[i, :-1], bf[i])
    out[i] = x if info == 0 else np.nan
  return out.reshape(b.shape)


def _tsolve_samples(rng, d):
  d = np.dtype(d)
  diag = lambda *s: (_rand(rng, s, d) + 4).astype(d)
  p = dict(perturb_singular=False)
  return [([_rand(rng, (5,), d), diag(5), _rand(rng, (5,), d), _rand(rng, (5, 2), d)], p),
          ([_rand(rng, (2, 4), d), diag(2, 4), _rand(rng, (2, 4), d), _rand(rng, (2, 4, 3), d)],
           p),
          ([_rand(rng, (1,), d), diag(1), _rand(rng, (1,), d), _rand(rng, (1, 1), d)], p)]


def _tsolve_bad(rng):
  p = dict(perturb_singular=False)
  v = Array(np.ones(3))
  return [([v, Array(np.ones(4)), v, Array(np.ones((3, 1)))], p, TypeError),
          ([v, v, v, Array(np.ones((4, 1)))], p, TypeError),
          ([v, v, v, Array(np.ones((3, 1), np.float32))], p, TypeError)]


def _tridiagonal_product(dl, d, du, b):
  """``A @ b`` for the tridiagonal ``A`` (lax ops)."""
  lax = _lax()
  nd = _aval(b).ndim
  m = _aval(b).shape[-2]
  y = lax.mul(lax.expand_dims(d, (nd - 1,)), b)
  if m > 1:
    sl = lambda x, lo, hi, ax: lax.slice_in_dim(x, lo, hi, axis=ax)
    lo = lax.mul(lax.expand_dims(sl(dl, 1, m, nd - 2), (nd - 1,)), sl(b, 0, m - 1, nd - 2))
    up = lax.mul(lax.expand_dims(sl(du, 0, m - 1, nd - 2), (nd - 1,)), sl(b, 1, m, nd - 2))
    zero = np.array(0, _aval(b).dtype)[()]
    cfg = lambda a, z: [(0, 0, 0)] * (nd - 2) + [(a, z, 0), (0, 0, 0)]
    y = lax.add(y, lax.add(lax.pad(lo, zero, cfg(1, 0)), lax.pad(up, zero, cfg(0, 1))))
  return y


def _tsolve_jvp(primals, tangents, *, perturb_singular):
  lax = _lax()
  dl, d, du, b = primals
  *diags_dot, b_dot = tangents
  ans = tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
  if all(type(t) is ad.Zero for t in diags_dot):
    rhs = ad.instantiate_zeros(b_dot)
  else:
    mv = _tridiagonal_product(*map(ad.instantiate_zeros, diags_dot), ans)
    rhs = lax.neg(mv) if type(b_dot) is ad.Zero else lax.sub(b_dot, mv)
  return ans, tridiagonal_solve_p.bind(dl, d, du, rhs, perturb_singular=perturb_singular)


def _tsolve_transpose(ct, dl, d, du, b, *, perturb_singular):
  if any(ad.is_undefined_primal(x) for x in (dl, d, du)):
    raise NotImplementedError("tridiagonal_solve: transposition with respect to the diagonals "
                              "is not defined (tridiagonal_solve is not linear in them)")
  if type(ct) is ad.Zero:
    return [None, None, None, ad.Zero(b.aval)]
  lax = _lax()
  nd = _aval(du).ndim
  m = _aval(du).shape[-1]
  zero = np.array(0, _aval(du).dtype)[()]
  pad = lambda x, lo, hi: lax.pad(x, zero, [(0, 0, 0)] * (nd - 1) + [(lo, hi, 0)])
  # A^T's sub-diagonal is A's super-diagonal shifted down one, and vice versa
  dl_t = pad(lax.slice_in_dim(du, 0, m - 1, axis=nd - 1), 1, 0)
  du_t = pad(lax.slice_in_dim(dl, 1, m, axis=nd - 1), 0, 1)
  return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct,
                                                     perturb_singular=perturb_singular)]


_register(tridiagonal_solve_p, numba=_tsolve_numba, numpy=None, abstract_eval=_tsolve_abstract_eval,
          samples=_tsolve_samples, bad=_tsolve_bad, reference=_tsolve_reference,
          note="LAPACK ?gtsv (partial pivoting) through SciPy's cython_lapack, eagerly and "
               "under jit (perturb_singular: numba's ?gttrf-style LU with tiny pivots "
               "perturbed); jvp and transpose (in b) as JAX's; reference: SciPy's gtsv")
# its work per system: b's elements (the registry's default would read dl as a matrix)
tridiagonal_solve_p.make_eager = work_eager(lambda vals, out_aval: math.prod(vals[3].shape[-2:]))
registry.select(tridiagonal_solve_p)
tridiagonal_solve_p.jvp = _tsolve_jvp
tridiagonal_solve_p.transpose = _tsolve_transpose


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
  r"""Solve the tridiagonal system ``A X = B`` (LAPACK ?gtsv, partial pivoting).

  ``dl``, ``d``, ``du`` (``[..., m]``): ``dl[i] = A[i, i-1]`` (``dl[0]`` unused),
  ``d[i] = A[i, i]``, ``du[i] = A[i, i+1]`` (``du[m-1]`` unused); ``b`` is ``[..., m, k]``.
  A singular system gives NaNs; with ``perturb_singular=True`` the LU factorization's tiny
  pivots are moved out to ``eps * max |U|`` (inverse iteration's safeguard), so it gives a
  finite, large solution.
  """
  return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


# ================================================================= qdwh (a function, as JAX's)


def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
  """Polar decomposition ``x = u h`` of a full-rank ``M x N`` (``M >= N``) matrix by the
  QR-based dynamically weighted Halley iteration (Nakatsukasa, Bai & Gygi 2010): QR-based
  steps while the weights are large, Cholesky-based ones after, then Halley's method until
  ``|u_k - u_k-1| < (5 eps)^(1/3)``, and a Newton-Schulz refinement. Returns ``(u, h,
  num_iters, is_converged)``. ``is_hermitian`` is unused (as JAX's). ``dynamic_shape``
  ``(m, n)`` (may be traced): ``x`` is padded from that true shape; it is masked to it and
  each step keeps the padding out (the identity in the Cholesky steps' corner)."""
  from nbjax import numpy as jnp
  from nbjax.numpy import linalg as jla
  lax = _lax()
  del is_hermitian  # unused, as JAX's
  max_iterations = 10 if max_iterations is None else int(max_iterations)
  x = jnp.asarray(x)
  M, N = x.shape
  if M < N:
    raise ValueError("The input matrix of shape M x N must have M >= N.")
  if dynamic_shape is not None:
    m, n = dynamic_shape
    x = _mask(x, (m, n))
  else:
    m, n = M, N
  if eps is None:
    eps = float(jnp.finfo(x.dtype).eps)
  one_norm, inf_norm = jla.norm(x, ord=1), jla.norm(x, ord=np.inf)
  alpha_inv = jnp.where(one_norm == 0, 1, lax.rsqrt(one_norm) * lax.rsqrt(inf_norm))
  u = x * alpha_inv.astype(x.dtype)
  tol_l = 10.0 * eps / 2.0
  tol_norm = float(np.cbrt(tol_l))  # (a weak Python float: strict-promotion-safe)
  eye = jnp.eye(N, dtype=x.dtype)

  def qr_step(u, params):
    a_minus_e_by_sqrt_c, sqrt_c, e = params
    if dynamic_shape is None:
      q, _ = _qr(jnp.concatenate([sqrt_c * u, eye], axis=0), full_matrices=False)
      return e * u + a_minus_e_by_sqrt_c * (q[:M] @ q[M:].T.conj())
    y = lax.dynamic_update_slice_in_dim(jnp.pad(sqrt_c * u, ((0, N), (0, 0))), eye, m, 0)
    q, _ = _qr(y, full_matrices=False)
    q2 = _mask(lax.dynamic_slice_in_dim(q, m, N, axis=0), (n, n)).T.conj()
    return e * u + a_minus_e_by_sqrt_c * (_mask(q[:M], (m, n)) @ q2)

  def chol_step(u, params):
    a_minus_e, c, e = params
    y = c * (u.T.conj() @ u) + eye
    # the padded corner is the identity (zeros would make it singular)
    y = _cholesky(y if dynamic_shape is None else _mask(y, (n, n), eye))
    z = _triangular_solve(y, u.T, left_side=True, lower=True, conjugate_a=True).conj()
    z = _triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                          conjugate_a=True).T.conj()
    return e * u + a_minus_e * z

  # the weights (a, b, c) of each step follow from the lower bound l of the singular values
  l, qr_coefs, chol_coefs, k = eps, [], [], 0
  while l + tol_l < 1 and k < max_iterations:
    k += 1
    l2 = l * l
    dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
    sqd = (1.0 + dd) ** (1 / 2)
    a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** (1 / 2)
    b = (a - 1) ** 2 / 4
    c = a + b - 1
    l = l * (a + b * l2) / (1 + c * l2)
    if c > 100:
      qr_coefs.append(((a - b / c) / c ** 0.5, c ** 0.5, b / c))
    else:
      chol_coefs.append((a - b / c, c, b / c))

  def run(u, coefs, step, test):
    if not coefs:
      return u, True
    table = jnp.array(coefs).astype(x.dtype)

    def body(i, state):
      u_prev, _ = state
      u_new = step(u_prev, tuple(table[i, j] for j in range(3)))
      return u_new, (jla.norm(u_new - u_prev) > tol_norm) if test else True
    return lax.fori_loop(0, len(coefs), body, (u, True))

  u, _ = run(u, qr_coefs, qr_step, False)
  u, not_conv = run(u, chol_coefs, chol_step, True)
  halley = tuple(jnp.array(v, x.dtype) for v in (3 - 1 / 3, 3, 1 / 3))

  def cond(state):
    i, _, nc = state
    return jnp.logical_and(nc, i < max_iterations)

  def body(state):
    i, u_prev, _ = state
    u_new = chol_step(u_prev, halley)
    return i + 1, u_new, jla.norm(u_new - u_prev) > tol_norm
  num_iters, u, not_conv = lax.while_loop(
      cond, body, (len(qr_coefs) + len(chol_coefs), u,  # (a weak int, as JAX's)
                   jnp.asarray(not_conv)))
  u = 1.5 * u - 0.5 * u @ (u.T.conj() @ u)
  h = u.T.conj() @ x
  h = (h + h.T.conj()) / 2
  return u, h, num_iters, jnp.logical_not(not_conv)


def _mask(x, dims, alternative=0):
  """``x`` with the elements outside ``dims`` (the true shape) set to ``alternative``."""
  from nbjax import numpy as jnp
  lax = _lax()
  mask = None
  for i, d in enumerate(dims):
    mi = lax.broadcasted_iota(np.int32, x.shape, i) < d
    mask = mi if mask is None else mask & mi
  return jnp.where(mask, x, alternative)


def _cholesky(x):
  from nbjax.lax import linalg as L
  return L.cholesky(x, symmetrize_input=False)


def _triangular_solve(a, b, **kw):
  from nbjax.lax import linalg as L
  return L.triangular_solve(a, b, **kw)


def _qr(x, **kw):
  from nbjax.lax import linalg as L
  return L.qr(x, **kw)


# ================================================================= compositions of lax ops
# (on the CPU JAX lowers these three through a traced function too)


def lu_pivots_to_permutation(pivots, permutation_size):
  """The int32 permutation ``[..., permutation_size]`` that applying the row swaps
  ``i <-> pivots[..., i]`` (as ``lu`` returns them) in order gives."""
  lax = _lax()
  aval = _aval(pivots)
  if aval.ndim < 1:
    raise TypeError(f"Input 0 to lu_pivots_to_permutation must have rank at least 1, but got "
                    f"shape={aval.shape}")
  if aval.dtype != np.int32:
    raise TypeError("lu_pivots_to_permutation does not accept dtype "
                    f"{aval.dtype.name} at position 0. Accepted dtypes at position 0 are "
                    "subtypes of int32.")
  k, m = aval.shape[-1], int(permutation_size)
  if not m >= k:
    raise ValueError(f"Output permutation size {m} has to exceed the trailing dimension of "
                     f"the pivots. Got pivots size {k}")
  nd = aval.ndim
  perm = lax.broadcasted_iota(np.int32, aval.shape[:-1] + (m,), nd - 1)
  if m == 0 or k == 0:
    return perm
  iota = perm

  def swap(i, perm):
    j = lax.dynamic_index_in_dim(pivots, i, nd - 1, keepdims=True)
    pi = lax.dynamic_index_in_dim(perm, i, nd - 1, keepdims=True)
    # perm[..., j] as a masked sum over the last axis (j differs per batch element)
    hit = lax.eq(iota, lax.broadcast_in_dim(j, _aval(iota).shape, tuple(range(nd))))
    pj = lax.reduce_sum(lax.select(hit, perm, lax.full_like(perm, 0)), (nd - 1,))
    pj = lax.expand_dims(pj, (nd - 1,))
    shape = _aval(iota).shape
    at_i = lax.eq(iota, lax.full_like(iota, i))
    out = lax.select(hit, lax.broadcast_in_dim(pi, shape, tuple(range(nd))), perm)
    return lax.select(at_i, lax.broadcast_in_dim(pj, shape, tuple(range(nd))), out)
  return lax.fori_loop(np.int32(0), np.int32(k), swap, perm)


def symmetric_product(a_matrix, c_matrix, *, alpha=1., beta=0., symmetrize_output=False):
  """``alpha * a @ a^T + beta * c`` for real ``a`` (``[..., n, m]``) and symmetric ``c``
  (``[..., n, n]``); with ``symmetrize_output`` the lower triangle is mirrored to the upper."""
  lax = _lax()
  a, c = _aval(a_matrix), _aval(c_matrix)
  for i, x in enumerate((a, c)):
    if x.ndim < 2:
      raise TypeError(f"Input {i} to symmetric_product must have rank at least 2, but got "
                      f"shape={x.shape}")
    if x.dtype.kind != "f":
      raise TypeError(f"symmetric_product does not accept dtype {x.dtype.name} at position "
                      f"{i}. Accepted dtypes at position {i} are subtypes of floating.")
  if a.shape[-2] != c.shape[-1] or c.shape[-2] != c.shape[-1]:
    raise ValueError("symmetric_update expects a rectangular matrix of shape (m, n) and a "
                     f"square matrix of shape (n, n). Got shapes {a.shape[-2:]} and "
                     f"{c.shape[-2:]}.")
  dt = c.dtype
  res = lax.add(lax.mul(lax.full_like(c_matrix, alpha),
                        _mm(a_matrix, _T(a_matrix))),
                lax.mul(lax.full_like(c_matrix, beta), c_matrix))
  if symmetrize_output:
    from nbjax.lax.linalg import _tril
    res = lax.add(_tril(res), _T(_tril(res, -1)))
  return lax.convert_element_type(res, dt)


def cholesky_update(r_matrix, w_vector):
  """The upper Cholesky factor of ``R^T R + w w^T`` from the upper factor ``R`` (``n x n``)
  and ``w`` (``n``), by ``n`` Givens rotations (O(n^2))."""
  lax = _lax()
  r, w = _aval(r_matrix), _aval(w_vector)
  if r.ndim != 2 or w.ndim != 1 or r.shape[0] != r.shape[1] or w.shape[0] != r.shape[1]:
    raise ValueError("Rank-1 update to Cholesky decomposition takes a square matrix and a "
                     f"vector of the same size as input. Got shapes {r.shape} and {w.shape} "
                     "instead")
  from nbjax import numpy as jnp
  R, z = jnp.asarray(r_matrix), jnp.asarray(w_vector)
  one, zero = np.array(1, r.dtype), np.array(0, r.dtype)

  def rotg(x, y):
    def nonzero(x, y):
      ax, ay = abs(x), abs(y)
      den = lax.select(ax > ay, ax, ay)
      x, y = x / den, y / den
      rh = 1 / lax.sqrt(x ** 2 + y ** 2)
      return x * rh, -y * rh
    return lax.cond(y == 0, lambda x, y: (one, zero), nonzero, x, y)

  for k in range(z.shape[0]):
    c, s = rotg(R[k, k], z[k])
    row, z = c * R[k, :] - s * z, c * z + s * R[k, :]
    R = R.at[k, :].set(row)
  return R


class EigImplementation(enum.Enum):
  """Which eigendecomposition ``eig`` runs (the CPU runs LAPACK for every one)."""
  CUSOLVER = "cusolver"
  MAGMA = "magma"
  LAPACK = "lapack"


class SvdAlgorithm(enum.Enum):
  """Which SVD algorithm ``svd`` runs (the CPU runs LAPACK gesdd for every one)."""
  DEFAULT = "default"
  QR = "QR"
  JACOBI = "Jacobi"
  POLAR = "polar"
  DIVIDE_AND_CONQUER = "divide_and_conquer"


class EighImplementation(enum.Enum):
  """Which symmetric eigensolver ``eigh`` runs (the CPU runs LAPACK syevd for every one)."""
  QR = "qr"
  JACOBI = "jacobi"
  QDWH = "qdwh"


__all__ = ["schur", "schur_p", "hessenberg", "hessenberg_p", "householder_product",
           "householder_product_p", "ormqr", "ormqr_p", "tridiagonal", "tridiagonal_p",
           "tridiagonal_solve", "tridiagonal_solve_p", "qdwh",
           "lu_pivots_to_permutation", "symmetric_product", "cholesky_update",
           "EigImplementation", "EighImplementation", "SvdAlgorithm"]


# ====================================================================== lowering (FFI)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import mlir  # noqa: E402
from nbjax.lax import linalg as _L  # noqa: E402  (its handler builder; it imports this module last)

_HEAD = """
import numpy as np
from numba import cfunc, types
from kernels import linalg_more as KM
from kernels.ffi import (ffi_metadata_query, arg_rank, arg_dim, ret_dim, arg_flat, ret_flat)
"""

_BODIES = {
    "schur": """
  fl = arg_flat(cf, 1, np.int32, 1)
  vecs = fl[0] != 0
  t = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  vs = ret_flat(cf, 1, DT, B * n * n).reshape((B, n, n)) if vecs else np.empty((B, 0, 0), DT)
  if B > 0 and n > 0:
    KM.schur(a, t, vs, vecs)
  return 0
""",
    "hessenberg": """
  k = n - 1 if n > 0 else 0
  out = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  taus = ret_flat(cf, 1, DT, B * k).reshape((B, k))
  if B > 0:
    KM.hessenberg(a, out, taus)
  return 0
""",
    "geqrf": """
  k = min(m, n)
  out = ret_flat(cf, 0, DT, B * m * n).reshape((B, m, n))
  taus = ret_flat(cf, 1, DT, B * k).reshape((B, k))
  if B > 0:
    KM.geqrf(a, out, taus)
  return 0
""",
    "householder_product": """
  k = arg_dim(cf, 1, r - 2)
  taus = arg_flat(cf, 1, DT, B * k).reshape((B, k))
  out = ret_flat(cf, 0, DT, B * m * n).reshape((B, m, n))
  if B > 0:
    KM.householder_product(a, taus, out)
  return 0
""",
    "ormqr": """
  k = arg_dim(cf, 1, r - 2)
  taus = arg_flat(cf, 1, DT, B * k).reshape((B, k))
  cm = arg_dim(cf, 2, r - 2)
  cn = arg_dim(cf, 2, r - 1)
  c = arg_flat(cf, 2, DT, B * cm * cn).reshape((B, cm, cn))
  fl = arg_flat(cf, 3, np.int32, 2)
  out = ret_flat(cf, 0, DT, B * cm * cn).reshape((B, cm, cn))
  if B > 0:
    KM.ormqr(a, taus, c, out, fl[0], fl[1])
  return 0
""",
    "tridiagonal": """
  fl = arg_flat(cf, 1, np.int32, 1)
  out = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  d = ret_flat(cf, 1, RT, B * n).reshape((B, n))
  e = ret_flat(cf, 2, RT, B * (n - 1)).reshape((B, n - 1))
  taus = ret_flat(cf, 3, DT, B * (n - 1)).reshape((B, n - 1))
  if B > 0:
    KM.tridiagonal(a, out, d, e, taus, fl[0] != 0)
  return 0
""",
}

# tridiagonal_solve: the shapes come from b (the last operand)
_BODY_TSOLVE = """
  if ffi_metadata_query(cf):
    return 0
  r = arg_rank(cf, 3)
  m = arg_dim(cf, 3, r - 2)
  k = arg_dim(cf, 3, r - 1)
  B = 1
  for i in range(r - 2):
    B *= arg_dim(cf, 3, i)
  dl = arg_flat(cf, 0, DT, B * m).reshape((B, m))
  d = arg_flat(cf, 1, DT, B * m).reshape((B, m))
  du = arg_flat(cf, 2, DT, B * m).reshape((B, m))
  b = arg_flat(cf, 3, DT, B * m * k).reshape((B, m, k))
  out = ret_flat(cf, 0, DT, B * m * k).reshape((B, m, k))
  if B > 0:
    KM.tridiagonal_solve(dl, d, du, b, out)
  return 0
"""

def _zeros_out(ctx):
  return [mlir.full_like_aval(ctx, 0, a) for a in ctx.avals_out]


def _target(name, dtype):
  """The FFI target of ``name``'s kernel (``kernels.linalg_more``), registered as
  ``nbjax.lax.linalg``'s handlers are."""
  body = (_BODY_TSOLVE if name == "tridiagonal_solve" else
          _BODY_TSOLVE.replace("KM.tridiagonal_solve(", f"KM.{name}(")
          if name == "tridiagonal_solve_perturbed" else _L._BATCH + _BODIES[name])
  return _L._target(name, dtype, _HEAD, body)


def _ffi_call(name, dtype, operands, result_avals):
  return _L._ffi_call(name, dtype, operands, result_avals, target=_target(name, dtype))


def _schur_lowering(ctx, x, *, compute_schur_vectors, sort_eig_vals, select_callable):
  if sort_eig_vals:
    raise _schur_sort_error()
  aval = ctx.avals_in[0]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  flags = mlir.ir_constant(np.array([bool(compute_schur_vectors)], np.int32))
  return _ffi_call("schur", aval.dtype, [x, flags], ctx.avals_out)


def _hessenberg_lowering(ctx, a):
  aval = ctx.avals_in[0]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  return _ffi_call("hessenberg", aval.dtype, [a], ctx.avals_out)


def _geqrf_lowering(ctx, a):
  aval = ctx.avals_in[0]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  return _ffi_call("geqrf", aval.dtype, [a], ctx.avals_out)


lowering.register("geqrf", _geqrf_lowering)
lowering.register("schur", _schur_lowering)
lowering.register("hessenberg", _hessenberg_lowering)


def _hp_lowering(ctx, a, taus):
  aval = ctx.avals_in[0]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  return _ffi_call("householder_product", aval.dtype, [a, taus], ctx.avals_out)


def _ormqr_lowering(ctx, a, taus, c, *, left, transpose):
  aval = ctx.avals_in[0]
  if math.prod(ctx.avals_out[0].shape) == 0:
    return _zeros_out(ctx)
  flags = mlir.ir_constant(np.array(_ormqr_codes(aval.dtype, left, transpose), np.int32))
  return _ffi_call("ormqr", aval.dtype, [a, taus, c, flags], ctx.avals_out)


def _tridiagonal_lowering(ctx, a, *, lower):
  aval = ctx.avals_in[0]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  flags = mlir.ir_constant(np.array([bool(lower)], np.int32))
  return _ffi_call("tridiagonal", aval.dtype, [a, flags], ctx.avals_out)


def _tsolve_lowering(ctx, dl, d, du, b, *, perturb_singular):
  aval = ctx.avals_in[3]
  if math.prod(aval.shape) == 0:
    return _zeros_out(ctx)
  name = "tridiagonal_solve_perturbed" if perturb_singular else "tridiagonal_solve"
  return _ffi_call(name, aval.dtype, [dl, d, du, b], ctx.avals_out)


lowering.register("householder_product", _hp_lowering)
lowering.register("ormqr", _ormqr_lowering)
lowering.register("tridiagonal", _tridiagonal_lowering)
lowering.register("tridiagonal_solve", _tsolve_lowering)
