"""``nbjax.scipy.linalg``'s Schur-based matrix functions, decompositions built on the rarer
``lax.linalg`` primitives, and SciPy's special matrices (re-exported by
``nbjax.scipy.linalg``).

A library layer over ``nbjax.lax`` / ``nbjax.numpy``: every function traces under ``jit``,
``vmap`` and (where JAX's does) differentiation. The loops of the triangular recurrences
(``sqrtm``'s Schur square root, ``funm``'s Parlett recurrence) are ``lax.fori_loop``s, each
accumulating in the order JAX's does, so they round alike.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.lax import linalg as lax_linalg
from nbjax.numpy import _util
from nbjax.numpy import linalg as jnp_linalg
from nbjax.numpy._vectorize import vectorize

__all__ = ["schur", "rsf2csf", "sqrtm", "funm", "hessenberg", "polar", "solve_sylvester",
           "eigh_tridiagonal", "companion", "convolution_matrix", "dft", "fiedler",
           "fiedler_companion", "hadamard", "helmert", "invhilbert", "invpascal", "leslie",
           "pascal", "qr_multiply"]


def _promote_complex(*args):
  args = _util.promote_dtypes_inexact(*(jnp.asarray(a) for a in args))
  return [a.astype(_util.to_complex_dtype(a.dtype)) for a in args]


# ----------------------------------------------------------------- schur, rsf2csf


def schur(a, output: str = "real"):
  """Schur decomposition ``a = Z T Z^H`` (CPU only in JAX): ``(T, Z)``, ``T`` upper
  triangular (``output='complex'``) or quasi-upper-triangular with 2x2 blocks for complex
  eigenvalue pairs (``'real'``, the default, for real ``a``)."""
  if output not in ("real", "complex"):
    raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got {output=}.")
  a = jnp.asarray(a)
  if output == "complex":
    a = a.astype(_util.to_complex_dtype(a.dtype))
  return lax_linalg.schur(a)


def _rsf2csf_2d(T, Z):
  T, Z = _promote_complex(T, Z)
  N = T.shape[0]
  if N == 1:
    return T, Z
  eps = jnp.finfo(T.dtype).eps
  cols = jnp.arange(N)

  def rotate(m, T, Z):
    # the Givens rotation that zeroes T[m, m-1], from the 2x2 block's first eigenvalue
    mu = jnp_linalg.eigvals(lax.dynamic_slice(T, (m - 1, m - 1), (2, 2))) - T[m, m]
    r = jnp_linalg.norm(jnp.stack([mu[0], T[m, m - 1]])).astype(T.dtype)
    c, s = mu[0] / r, T[m, m - 1] / r
    G = jnp.stack([jnp.stack([c.conj(), s]), jnp.stack([-s, c])])
    rows = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=0)
    right = cols >= m - 1
    rows = jnp.where(right, G @ jnp.where(right, rows, 0), rows)
    T = lax.dynamic_update_slice_in_dim(T, rows, m - 1, axis=0)
    tcols = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=1)
    above = cols[:, None] < m + 1
    tcols = jnp.where(above, jnp.where(above, tcols, 0) @ G.conj().T, tcols)
    T = lax.dynamic_update_slice_in_dim(T, tcols, m - 1, axis=1)
    zcols = lax.dynamic_slice_in_dim(Z, m - 1, 2, axis=1)
    Z = lax.dynamic_update_slice_in_dim(Z, zcols @ G.conj().T, m - 1, axis=1)
    return T, Z

  def step(i, TZ):
    T, Z = TZ
    m = N - i
    T, Z = lax.cond(jnp.abs(T[m, m - 1]) > eps * (jnp.abs(T[m - 1, m - 1]) + jnp.abs(T[m, m])),
                    rotate, lambda m, T, Z: (T, Z), m, T, Z)
    return T.at[m, m - 1].set(0.0), Z
  return lax.fori_loop(1, N, step, (T, Z))


def rsf2csf(T, Z, check_finite: bool = True):
  """Real Schur form ``(T, Z)`` (from ``schur(a)``) to complex Schur form: ``T`` becomes
  upper triangular. Leading batch dimensions of ``T`` and ``Z`` broadcast."""
  T, Z = jnp.asarray(T), jnp.asarray(Z)
  if T.ndim < 2 or T.shape[-1] != T.shape[-2]:
    raise ValueError("Input 'T' must be square.")
  if Z.ndim < 2 or Z.shape[-1] != Z.shape[-2]:
    raise ValueError("Input 'Z' must be square.")
  if T.shape[-1] != Z.shape[-1]:
    raise ValueError(f"Input array shapes must match: Z: {Z.shape} vs. T: {T.shape}")
  return vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(T, Z)


# ----------------------------------------------------------------- sqrtm, funm


def _sqrtm_triu(T):
  """Square root of the upper triangular ``T`` (Bjorck & Hammarling 1983), column by column;
  a zero numerator gives 0 (so singular ``T`` with zero eigenvalues has a root)."""
  d = jnp.sqrt(jnp.diag(T))
  n = d.size
  U = jnp.diag(d)

  def row(l, jU):
    j, U = jU
    i = j - 1 - l
    s = lax.fori_loop(i + 1, j, lambda k, v: v + U[i, k] * U[k, j], 0.0)
    return j, U.at[i, j].set(jnp.where(T[i, j] == s, 0.0, (T[i, j] - s) / (d[i] + d[j])))

  return lax.fori_loop(0, n, lambda j, U: lax.fori_loop(0, j, row, (j, U))[1], U)


def sqrtm(A, blocksize: int = 1):
  """Principal matrix square root by the complex Schur method (CPU only in JAX, through
  ``schur``); always complex. ``blocksize > 1`` is not implemented, as in JAX."""
  if blocksize > 1:
    raise NotImplementedError("Blocked version is not implemented yet.")
  T, Z = schur(A, output="complex")
  R = _sqrtm_triu(T)
  hi = lax.Precision.HIGHEST
  return jnp.matmul(jnp.matmul(Z, R, precision=hi), jnp.conj(Z.T), precision=hi)


def _parlett(F, T):
  """Parlett's recurrence (Golub & Van Loan, Algorithm 11.1.1) for ``f(T)`` of the upper
  triangular ``T`` from its diagonal ``F``; also the smallest eigenvalue gap met."""
  N = T.shape[0]
  idx = jnp.arange(N)

  def inner(i, pFm):
    p, F, minden = pFm
    j = i + p
    s = T[i - 1, j - 1] * (F[j - 1, j - 1] - F[i - 1, i - 1])
    live = (idx >= i) & (idx < j - 1)
    s = s + (jnp.where(live, T[i - 1], 0) @ jnp.where(live, F[:, j - 1], 0)
             - jnp.where(live, F[i - 1], 0) @ jnp.where(live, T[:, j - 1], 0))
    den = T[j - 1, j - 1] - T[i - 1, i - 1]
    s = jnp.where(den != 0, s / den, s)
    return p, F.at[i - 1, j - 1].set(s), jnp.minimum(minden, jnp.abs(den))

  def outer(p, Fm):
    _, F, minden = lax.fori_loop(1, N - p + 1, inner, (p, *Fm))
    return F, minden
  return lax.fori_loop(1, N, outer, (F, jnp.abs(T[0, 0])))


def funm(A, func, disp: bool = True):
  """Matrix function ``func(A)`` through the complex Schur form and Parlett's recurrence.

  ``func`` maps an array of eigenvalues elementwise. Returns a complex array, and with
  ``disp=False`` also an error estimate (as JAX's: from the smallest eigenvalue gap)."""
  A = jnp.asarray(A)
  if A.ndim != 2 or A.shape[0] != A.shape[1]:
    raise ValueError("expected square array_like input")
  T, Z = schur(A)
  T, Z = rsf2csf(T, Z)
  F = jnp.diag(func(jnp.diag(T))).astype(T.dtype.char)
  F, minden = _parlett(F, T)
  F = Z @ F @ Z.conj().T
  if disp:
    return F
  tol = jnp.finfo(np.float32 if F.dtype.char.lower() == "f" else np.float64).eps
  minden = jnp.where(minden == 0.0, tol, minden)
  err = jnp.where(jnp.any(jnp.isinf(F)), np.inf,
                  jnp.minimum(1, jnp.maximum(tol, (tol / minden)
                                             * jnp_linalg.norm(jnp.triu(T, 1), 1))))
  return F, err


# ----------------------------------------------------------------- hessenberg, polar


def hessenberg(a, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
  """Hessenberg form ``a = Q H Q^H`` (``H`` zero below the first subdiagonal): ``H``, or
  ``(H, Q)`` with ``calc_q``. Leading batch dimensions are allowed."""
  a = jnp.asarray(a)
  n = a.shape[-1]
  if n == 0:
    return (jnp.zeros_like(a), jnp.zeros_like(a)) if calc_q else jnp.zeros_like(a)
  packed, taus = lax_linalg.hessenberg(a)
  h = jnp.triu(packed, -1)
  if not calc_q:
    return h
  q = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
  bs = packed.shape[:-2]
  dt = packed.dtype
  q = jnp.concatenate([
      jnp.concatenate([jnp.ones(bs + (1, 1), dt), jnp.zeros(bs + (1, n - 1), dt)], axis=-1),
      jnp.concatenate([jnp.zeros(bs + (n - 1, 1), dt), q], axis=-1)], axis=-2)
  return h, q


def _polar_2d(a, side, method, eps, max_iterations):
  m, n = a.shape
  if method == "qdwh":
    if m >= n and side == "right":
      u, p, _, _ = lax_linalg.qdwh(a, is_hermitian=False, eps=eps)
    elif m < n and side == "left":
      u, p, _, _ = lax_linalg.qdwh(a.T.conj(), is_hermitian=False, eps=eps)
      u, p = u.T.conj(), p.T.conj()
    else:
      raise NotImplementedError("method='qdwh' only supports mxn matrices where m < n where "
                                "side='right' and m >= n side='left', got "
                                f"{a.shape} with {side=}")
  elif method == "svd":
    uu, s, vh = lax_linalg.svd(a, full_matrices=False)
    s = s.astype(uu.dtype)
    u = uu @ vh
    p = ((vh.T.conj() * s[None, :]) @ vh if side == "right"
         else (uu * s[None, :]) @ uu.T.conj())
  else:
    raise ValueError(f"Unknown polar decomposition method {method}.")
  return u, p


def polar(a, side: str = "right", *, method: str = "qdwh", eps=None, max_iterations=None):
  """Polar decomposition ``a = U P`` (``side='right'``, ``P`` n x n) or ``a = P U``
  (``'left'``, ``P`` m x m): ``U`` with orthonormal columns (rows), ``P`` Hermitian positive
  semidefinite. ``method``: 'qdwh' (QR-based dynamically weighted Halley iteration; needs
  m >= n for 'right' and m < n for 'left', as JAX's) or 'svd'."""
  a = jnp.asarray(a)
  if a.ndim < 2:
    raise ValueError("The input `a` must be at least a 2-D array.")
  if side not in ["right", "left"]:
    raise ValueError("The argument `side` must be either 'right' or 'left'.")
  a, = _util.promote_dtypes_inexact(a)
  sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
  return vectorize(functools.partial(_polar_2d, side=side, method=method, eps=eps,
                                     max_iterations=max_iterations), signature=sig)(a)


# ----------------------------------------------------------------- solve_sylvester


def _sylvester_triangular(R, S, F):
  """``R Y + Y S^T = F`` for upper triangular ``R`` (m x m) and lower triangular ``S^T``,
  element by element from the bottom-right corner (Bartels-Stewart back substitution)."""
  m, n = F.shape
  rows, cols = jnp.arange(m), jnp.arange(n)

  def step(Y, idx):
    i, j = idx // n, idx % n
    Ym = Y.reshape((m, n))
    row = jnp.sum(jnp.where(rows > i, R[i, :] * Ym[:, j], 0.0))
    col = jnp.sum(jnp.where(cols > j, Ym[i, :] * S[:, j], 0.0))
    return Y.at[i * n + j].set((F[i, j] - (row + col)) / (R[i, i] + S[j, j])), None
  Y, _ = lax.scan(step, jnp.zeros((m * n,), F.dtype), jnp.arange(m * n - 1, -1, -1))
  return Y.reshape((m, n))


def _sylvester_2d(A, B, C, *, method, tol):
  m, n = C.shape[-2:]
  if method == "schur":
    R, U = schur(A, output="complex")
    S, V = schur(B.conj().T, output="complex")
    F = U.conj().T @ C.astype(R.dtype) @ V
    X = U @ _sylvester_triangular(R, S.conj().T, F) @ V.conj().T
  elif method == "eigen":
    RA, UA = jnp_linalg.eig(A)
    RB, UB = jnp_linalg.eig(B)
    F = jnp_linalg.solve(UA, C.astype(RA.dtype) @ UB)
    Y = F / (RA[:, None] + RB[None, :])
    X = UA[:m, :m] @ Y[:m, :n] @ jnp_linalg.inv(UB)[:n, :n]
  else:
    raise ValueError(f"Unrecognized method {method}. The two valid methods are either "
                     "\"schur\" or \"eigen\".")
  if not jnp.issubdtype(C.dtype, np.complexfloating):
    X = X.real
  near = jnp.any(jnp.abs(jnp_linalg.eigvals(A)[:, None] + jnp_linalg.eigvals(B)[None, :])
                 < tol)
  return lax.cond(near, lambda: jnp.zeros_like(X) * np.nan, lambda: X)


def solve_sylvester(A, B, C, *, method: str = "schur", tol: float = 1e-8):
  """Solve ``A X + X B = C`` (``A`` m x m, ``B`` n x n, ``C`` m x n; leading batch dimensions
  broadcast): 'schur' (Bartels-Stewart, the default) or 'eigen' (eigendecompositions). NaNs
  where an eigenvalue of ``A`` plus one of ``B`` is within ``tol`` of zero."""
  A, B, C = _util.promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
  m, n = C.shape[-2:]
  if A.shape[-2:] != (m, m) or B.shape[-2:] != (n, n):
    raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {A.shape}\nB: "
                     f"{B.shape}\nC: {C.shape}")
  return vectorize(functools.partial(_sylvester_2d, method=method, tol=tol),
                   signature="(m,m),(n,n),(m,n)->(m,n)")(A, B, C)


# ----------------------------------------------------------------- eigh_tridiagonal


def _sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, x):
  """The number of eigenvalues below each ``x`` (Sturm sequence, LAPACK's pivmin guard)."""
  n = alpha.shape[0]
  q = alpha[0] - x
  count = jnp.where(q < 0, 1, 0).astype(np.int32)
  q = jnp.where(alpha[0] == x, alpha0_perturbation, q)

  def body(i, qc):
    q, count = qc
    q = alpha[i] - beta_sq[i - 1] / q - x
    neg = q <= pivmin
    return jnp.where(neg, jnp.minimum(q, -pivmin), q), jnp.where(neg, count + 1, count)
  return lax.fori_loop(1, n, body, (q, count))[1]


def eigh_tridiagonal(d, e, *, eigvals_only: bool = False, select: str = "a",
                     select_range=None, tol=None, key=None):
  """Eigenvalues (ascending; and eigenvectors, in columns) of the Hermitian tridiagonal matrix
  with diagonal ``d`` (real part used) and off-diagonal ``e``: eigenvalues by parallel
  bisection on Sturm counts, as JAX's; ``select='i'`` picks indices ``select_range[0]`` to
  ``select_range[1]``; ``select='v'`` is not implemented, as in JAX. Eigenvectors come from
  the dense tridiagonal matrix's eigh (``key`` unused: JAX seeds its inverse iteration with
  it), so they agree with JAX's up to sign (phase)."""
  alpha, beta = jnp.asarray(d), jnp.asarray(e)
  if alpha.dtype != beta.dtype:
    raise TypeError("diagonal and off-diagonal values must have same dtype, got "
                    f"{alpha.dtype} and {beta.dtype}")
  supported = (np.float32, np.float64, np.complex64, np.complex128)
  if alpha.dtype not in supported or beta.dtype not in supported:
    raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                    f"jax.scipy.linalg.eigh_tridiagonal, got {alpha.dtype} and {beta.dtype}")
  n = alpha.shape[0]
  if n <= 1:
    return jnp.real(alpha) if eigvals_only else (jnp.real(alpha), jnp.eye(n, dtype=alpha.dtype))
  cplx = jnp.issubdtype(alpha.dtype, np.complexfloating)
  if cplx:
    alpha = jnp.real(alpha)
    beta_sq = jnp.real(beta * jnp.conj(beta))
    beta_abs = jnp.sqrt(beta_sq)
  else:
    beta_abs, beta_sq = jnp.abs(beta), jnp.square(beta)
  # Gershgorin bounds of the spectrum
  row = jnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]], axis=0)
  est_max, est_min = jnp.max(alpha + row), jnp.min(alpha - row)
  t_norm = jnp.maximum(jnp.abs(est_min), jnp.abs(est_max))
  fi = np.finfo(alpha.dtype)
  one = np.ones([], alpha.dtype)
  safemin = np.maximum(one / fi.max, (one + fi.eps) * fi.tiny)
  pivmin = safemin * jnp.maximum(1, jnp.max(beta_sq))
  alpha0_perturbation = jnp.square(fi.eps * beta_abs[0])
  abs_tol = fi.eps * t_norm
  if tol is not None:
    abs_tol = jnp.maximum(tol, abs_tol)
  max_it = fi.nmant + 1
  if select == "a":
    targets = jnp.arange(n, dtype=np.int32)
  elif select == "i":
    if select_range is None:
      raise ValueError("for select='i', select_range must be specified.")
    if select_range[0] > select_range[1]:
      raise ValueError("Got empty index range in select_range.")
    targets = jnp.arange(select_range[0], select_range[1] + 1, dtype=np.int32)
  elif select == "v":
    raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
  else:
    raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
  fudge = 2.1
  slack = jnp.array(n, alpha.dtype) * fudge * fi.eps * t_norm
  shape = np.shape(targets)
  lower = jnp.broadcast_to(est_min - slack - 2 * fudge * pivmin, shape)
  upper = jnp.broadcast_to(est_max + slack + fudge * pivmin, shape)
  mid = 0.5 * (upper + lower)
  pivmin = jnp.broadcast_to(pivmin, shape)
  alpha0_perturbation = jnp.broadcast_to(alpha0_perturbation, shape)

  def cond(s):
    i, lo, _, hi = s
    return jnp.logical_and(i < max_it, abs_tol < jnp.max(hi - lo))

  def body(s):
    i, lo, mid, hi = s
    counts = _sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, mid)
    lo = jnp.where(counts <= targets, mid, lo)
    hi = jnp.where(counts > targets, mid, hi)
    return i + 1, lo, 0.5 * (lo + hi), hi
  _, _, w, _ = lax.while_loop(cond, body, (0, lower, mid, upper))
  if eigvals_only:
    return w
  # the dense Hermitian matrix: T[i, i+1] = e[i], T[i+1, i] = conj(e[i])
  dt = jnp.asarray(d).dtype
  T = (jnp.diag(alpha.astype(dt)) + jnp.diag(beta, 1)
       + jnp.diag(jnp.conj(beta) if cplx else beta, -1))
  lo, hi = (0, n - 1) if select == "a" else select_range
  v, _ = lax_linalg.eigh(T, lower=True, symmetrize_input=False,
                         subset_by_index=(int(lo), int(hi) + 1))
  return w, v


# ----------------------------------------------------------------- special matrices


def leslie(f, s):
  """Leslie matrix: fecundity ``f`` (n) in the first row, survival ``s`` (n - 1) on the
  subdiagonal; batched over leading dimensions."""
  _util.check_arraylike("leslie", f, s)
  f, s = jnp.atleast_1d(f), jnp.atleast_1d(s)
  if f.shape[-1] < 2:
    raise ValueError(f"The length of f along the last axis must be at least 2; got shape "
                     f"{f.shape}.")
  if s.shape[-1] != f.shape[-1] - 1:
    raise ValueError("Incorrect lengths for f and s. The length of s along the last axis must "
                     f"be one less than the length of f; got f shape {f.shape} and s shape "
                     f"{s.shape}.")

  def one(f, s):
    f, s = _util.promote_dtypes(f, s)
    return jnp.diag(s, k=-1).at[0].set(f)
  return vectorize(one, signature="(n),(m)->(n,n)")(f, s)


def companion(a):
  """Companion matrix of the polynomial with coefficients ``a`` (highest first): first row
  ``-a[1:] / a[0]``, ones on the subdiagonal; batched over leading dimensions."""
  a, = _util.promote_args_inexact("companion", a)
  a = jnp.atleast_1d(a)
  if a.shape[-1] < 2:
    raise ValueError(f"The length of `a` along the last axis must be at least 2; got shape "
                     f"{a.shape}.")

  def one(a):
    row = -a[1:] / a[0]
    m = a.shape[0] - 1
    return jnp.eye(m, m, k=-1, dtype=row.dtype).at[0].set(row)
  return vectorize(one, signature="(n)->(m,m)")(a)


def fiedler(a):
  """Fiedler matrix ``|a[i] - a[j]|``; batched over leading dimensions."""
  _util.check_arraylike("fiedler", a)
  a = jnp.atleast_1d(a)
  return jnp.abs(a[..., None] - a[..., None, :])


def fiedler_companion(a):
  """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients ``a``
  (highest first); batched over leading dimensions."""
  a, = _util.promote_args_inexact("fiedler_companion", a)
  a = jnp.atleast_1d(a)
  if a.shape[-1] == 0:
    raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero length, "
                     f"but got an array of shape {a.shape}.")

  def one(a):
    n = a.shape[0] - 1
    if n == 0:
      return jnp.zeros((0, 0), a.dtype)
    a = a / a[0]
    if n == 1:
      return -a[1:].reshape(1, 1)
    i, j = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    even, odd = i % 2 == 0, i % 2 == 1
    sup, sub = -a[jnp.minimum(i + 2, n)], -a[jnp.minimum(i + 1, n)]
    o = jnp.array(1, a.dtype)
    conds = [(i == 0) & (j == 0), (i == 1) & (j == 0), (j == i + 1) & even,
             (j == i + 2) & even, (j == i - 1) & even & (i >= 2), (j == i - 2) & odd & (i >= 3)]
    return jnp.select(conds, [-a[1], o, sup, o, sub, o], default=jnp.array(0, a.dtype))
  return vectorize(one, signature="(n)->(m,m)")(a)


def convolution_matrix(a, n: int, mode: str = "full"):
  """The Toeplitz matrix ``A`` with ``A @ v == np.convolve(a, v, mode)`` for ``v`` of length
  ``n``; batched over ``a``'s leading dimensions."""
  from nbjax.scipy.linalg import toeplitz
  n = operator.index(n)
  if n <= 0:
    raise ValueError(f"n must be a positive integer; got {n}.")
  _util.check_arraylike("convolution_matrix", a)
  a = jnp.asarray(a)
  if a.ndim == 0:
    raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar.")
  m = a.shape[-1]
  if m < 1:
    raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
  if mode not in ("full", "valid", "same"):
    raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
  widths = [(0, 0)] * (a.ndim - 1) + [(0, n - 1)]
  az, raz = jnp.pad(a, widths), jnp.pad(jnp.flip(a, axis=-1), widths)
  total = m + n - 1
  if mode == "same":
    trim = min(n, m) - 1
    tb, te = trim // 2, trim - trim // 2
  elif mode == "valid":
    tb = te = min(n, m) - 1
  else:
    tb = te = 0
  return toeplitz(lax.slice_in_dim(az, tb, total - te, axis=-1),
                  lax.slice_in_dim(raz, total - n - tb, total - tb, axis=-1))


def invhilbert(n: int):
  """Inverse of the ``n x n`` Hilbert matrix (default float dtype; exact integers while
  they fit)."""
  from nbjax.scipy.special import comb
  a = jnp.arange(n, dtype=jnp.float_)
  i, j = a[:, None], a[None, :]
  s = i + j
  # the entries are integers: rounding makes them exact (and the same eagerly and under jit)
  return jnp.round((-1.0) ** s * (s + 1.0) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1)
                   * comb(s, i) ** 2)


def _binom(n, k):
  """Binomial coefficients through ``lgamma``, rounded to the integers they are (exact
  while representable, and the same eagerly and under jit)."""
  return lax.round(lax.exp(lax.lgamma(n + 1.0) - lax.lgamma(n - k + 1.0) - lax.lgamma(k + 1.0)),
                   lax.RoundingMethod.TO_NEAREST_EVEN)


def _pascal_kind(kind, one):
  kind = "symmetric" if kind is None else kind
  valid = ["symmetric", "lower", "upper"]
  if kind not in valid:
    raise ValueError(f"Expected kind to be {'one' if one else 'on'} of: {valid}; got {kind}")
  return kind


def pascal(n: int, kind=None):
  """The ``n x n`` Pascal matrix: 'symmetric' (default), 'lower' or 'upper' (binomial
  coefficients through ``lgamma``, rounded, in float32 as JAX's)."""
  kind = _pascal_kind(kind, False)
  a = jnp.arange(n, dtype=np.float32)
  low = _binom(a[:, None], a[None, :])
  if kind == "lower":
    return low
  if kind == "upper":
    return low.T
  return jnp.dot(low, low.T)


def invpascal(n: int, kind=None):
  """Inverse of ``pascal(n, kind)`` (default float dtype)."""
  kind = _pascal_kind(kind, True)
  a = jnp.arange(n, dtype=jnp.float_)
  i, j = a[:, None], a[None, :]
  low = ((-1.0) ** (i - j)) * _binom(i, j)
  if kind == "lower":
    return low
  if kind == "upper":
    return low.T
  return jnp.dot(low.T, low)


def helmert(n: int, full: bool = False):
  """The Helmert matrix: ``(n - 1) x n`` (or ``n x n`` with ``full``, the first row
  ``1/sqrt(n)``), orthonormal rows."""
  if n < 1:
    raise ValueError(f"n must be a positive integer; got {n}.")
  i, j = jnp.arange(n - 1)[:, None], jnp.arange(n)[None, :]
  k = (i + 1).astype(jnp.float_)
  den = jnp.sqrt(k * (k + 1))
  H = jnp.where(j <= i, 1.0 / den, jnp.where(j == i + 1, -k / den, jnp.zeros_like(den)))
  if full:
    H = jnp.concatenate([jnp.full((1, n), 1.0 / np.sqrt(n), dtype=H.dtype), H], axis=0)
  return H


def hadamard(n: int, dtype=int):
  """The ``n x n`` Sylvester-construction Hadamard matrix (``n`` a power of 2)."""
  if n < 1 or not math.log2(n).is_integer():
    raise ValueError(f"n must be a positive power of 2; got {n}.")
  H = jnp.ones((1, 1), dtype=dtype)
  for _ in range(int(math.log2(n))):
    H = jnp.concatenate([jnp.concatenate([H, H], axis=1), jnp.concatenate([H, -H], axis=1)],
                        axis=0)
  return H


def dft(n: int, scale=None, *, dtype=None):
  """The ``n x n`` discrete Fourier transform matrix ``exp(-2 pi i j k / n)``, scaled by
  ``1/sqrt(n)`` ('sqrtn') or ``1/n`` ('n')."""
  if scale is not None and scale not in ("sqrtn", "n"):
    raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
  if dtype is None:
    dtype = jnp.complex_
  else:
    dtype = _util.canonicalize_user_dtype(dtype, "dft")
    if not jnp.issubdtype(dtype, np.complexfloating):
      raise ValueError(f"dtype must be a complex floating-point type; got {dtype}.")
  a = jnp.arange(n, dtype=dtype)
  w = jnp.exp(-2j * np.pi * a[:, None] * a[None, :] / n)
  if scale == "sqrtn":
    w = w / jnp.sqrt(n)
  elif scale == "n":
    w = w / n
  return w


# ----------------------------------------------------------------- qr_multiply


def qr_multiply(a, c, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False):
  """``(c @ Q[:, :k] or Q[:, :k] @ c, R)`` for ``a = Q R`` (``k = min(m, n)``); ``conjugate``
  uses ``conj(Q)``; a 1-d ``c`` stays 1-d. ``Q`` is formed (``lax.linalg.qr``) and multiplied
  rather than applied as reflectors, so values agree with JAX's up to rounding."""
  a, c = _util.promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(c))
  if mode not in ("right", "left"):
    raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
  onedim = c.ndim == 1
  if onedim:
    c = c[:, None] if mode == "left" else c[None, :]
  m, n = a.shape[-2:]
  k = min(m, n)
  if mode == "left" and c.shape[-2] != k:
    raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                     f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} rows "
                     f"(expected {k}).")
  if mode == "right" and c.shape[-1] != m:
    raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                     f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} columns "
                     f"(expected {m}).")
  batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
  a = jnp.broadcast_to(a, batch + a.shape[-2:])
  c = jnp.broadcast_to(c, batch + c.shape[-2:])
  if pivoting:
    q, r, p = lax_linalg.qr(a, pivoting=True, full_matrices=False)
  else:
    q, r = lax_linalg.qr(a, full_matrices=False)
  if conjugate:
    q = jnp.conj(q)
  hi = lax.Precision.HIGHEST
  cq = jnp.matmul(q, c, precision=hi) if mode == "left" else jnp.matmul(c, q, precision=hi)
  if onedim:
    cq = cq.ravel()
  r = jnp.triu(r[..., :k, :])
  return (cq, r, p) if pivoting else (cq, r)
