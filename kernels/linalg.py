"""numba kernels for dot_general (batched matmul) and the linear-algebra decompositions.

Pipeline position: the bottom of eager execution. ``nbjax.lax.linalg`` reduces every
``dot_general`` to a batched matmul ``(B, M, K) @ (B, K, N)`` on the NumPy side (transpose +
reshape) and calls ``matmul_blas`` (float/complex: numba's ``np.dot``, which calls BLAS gemm)
or ``matmul_loop`` (integers: an i-k-j loop accumulating in the output dtype, wrapping as
XLA does). The decompositions take operands with one leading batch axis ``(B, m, n)``:
small cholesky, triangular solve, LU and Householder QR are written out here (LAPACK's
conventions: potrf's lower factor with NaNs on failure, getf2's partial pivoting, geqrf's
reflector signs); larger cholesky, eigh, svd and eig call numba's LAPACK bindings (potrf /
syevd / gesdd / geev) per matrix.
Callers allocate outputs. Imports numba and numpy only.
"""
import numpy as np
import numba.np.linalg as _nla  # numba's LAPACK bindings (for syevd with either triangle)
from numba import njit, prange, types
from numba.extending import overload

_J = dict(cache=True, nogil=True, error_model="numpy")

# ----------------------------------------------------------------- matmul


@njit(**_J)
def outer_mul(a, b, out):
  """``out = a * b`` for 2-D ``a``, ``b`` whose every axis is 1 or ``out``'s (a dot_general
  with no contracted axis: per-example outer products and row scalings under ``vmap``).
  One loop nest, the inner one unit-stride: NumPy's broadcasting loop costs an inner-loop
  call per row (2x slower at 128 x 100). Each element is one product: NumPy's bits."""
  R, C = out.shape
  ar, ac, br, bc = a.shape[0] > 1, a.shape[1] > 1, b.shape[0] > 1, b.shape[1] > 1
  for i in range(R):
    ai, bi, oi = a[i if ar else 0], b[i if br else 0], out[i]
    if not ac:
      s = ai[0]
      for j in range(C):
        oi[j] = s * bi[j]
    elif not bc:
      s = bi[0]
      for j in range(C):
        oi[j] = ai[j] * s
    else:
      for j in range(C):
        oi[j] = ai[j] * bi[j]


@njit(**_J)
def matmul_blas(a, b, out):
  for i in range(a.shape[0]):
    np.dot(a[i], b[i], out[i])


@njit(parallel=True, **_J)
def matmul_blas_par(a, b, out):
  for i in prange(a.shape[0]):
    np.dot(a[i], b[i], out[i])


@njit(**_J)
def matmul_loop(a, b, out):
  # out must be zeroed; accumulates in out's dtype
  B, M, K = a.shape
  for t in range(B * M):
    bb = t // M
    i = t - bb * M
    o = out[bb, i]
    ar = a[bb, i]
    for k in range(K):
      aik = ar[k]
      br = b[bb, k]
      for j in range(o.size):
        o[j] += aik * br[j]


@njit(parallel=True, **_J)
def matmul_loop_par(a, b, out):
  B, M, K = a.shape
  for t in prange(B * M):
    bb = t // M
    i = t - bb * M
    o = out[bb, i]
    ar = a[bb, i]
    for k in range(K):
      aik = ar[k]
      br = b[bb, k]
      for j in range(o.size):
        o[j] += aik * br[j]


# ----------------------------------------------------------------- cholesky


def _potrf(a, n):
  """LAPACK ?potrf on the upper triangle of the Fortran-ordered ``a`` (n x n); returns info."""


@overload(_potrf, jit_options=dict(cache=True))
def _potrf_ov(a, n):
  _nla.ensure_lapack()
  potrf = _nla._LAPACK().numba_xxpotrf(a.dtype)
  kind = ord(_nla.get_blas_kind(a.dtype, "cholesky"))
  return lambda a, n: potrf(kind, ord("U"), n, a.ctypes, n)


@njit(inline="always", **_J)
def _cholesky_loop(A, L):
  """The Cholesky-Banachiewicz loop into zeroed ``L``; False on failure (a pivot not > 0)."""
  n = A.shape[0]
  for j in range(n):
    Lj = L[j]
    d = A[j, j]
    for k in range(j):
      d -= Lj[k] * np.conj(Lj[k])
    dr = d.real
    if not dr > 0:
      return False
    ljj = np.sqrt(dr)
    Lj[j] = ljj
    for i in range(j + 1, n):
      Li = L[i]
      s = A[i, j]
      for k in range(j):
        s -= Li[k] * np.conj(Lj[k])
      Li[j] = s / ljj
  return True


@njit(**_J)
def cholesky(a, out):
  """Lower Cholesky factor of each ``a[b]`` (reads its lower triangle); NaNs on failure.
  Below 32 x 32 a plain loop (a LAPACK call costs more than the work); from there LAPACK's
  potrf, as JAX's CPU: a row-major matrix read column-major is its transpose, so potrf's
  upper factor of that is the lower factor here. Eager and jit (its FFI handler) both run
  this kernel, so they agree bit for bit."""
  B, n, _ = a.shape
  for bb in range(B):
    L = out[bb]
    if n < 32:
      L[:] = 0
      ok = _cholesky_loop(a[bb], L)
    else:
      L[:] = a[bb]
      ok = _potrf(L, n) == 0
      for i in range(n):
        L[i, i + 1:] = 0
    if not ok:
      L[:] = _nan(L[0, 0])


def _nan(x):
  """NaN of ``x``'s type (complex: both parts, as JAX's failure fill)."""


@overload(_nan, inline="always")
def _nan_ol(x):
  if isinstance(x, types.Complex):
    return lambda x: type(x)(complex(np.nan, np.nan))
  return lambda x: type(x)(np.nan)


# ----------------------------------------------------------------- triangular solve


def _recip(d):
  """``1 / d``; complex: NumPy's quotient (numba's raises ZeroDivisionError on 0j)."""


@overload(_recip, inline="always")
def _recip_ol(d):
  if not isinstance(d, types.Complex):
    return lambda d: 1 / d

  def crecip(d):  # NumPy's complex division of (1, 0) by d, step by step
    dr, di = d.real, d.imag
    one = type(dr)(1)
    zero = one - one
    if abs(dr) >= abs(di):
      if dr == 0 and di == 0:
        return type(d)(complex(one / abs(dr), zero / abs(dr)))
      rat = di / dr
      scl = one / (dr + di * rat)
      return type(d)(complex((one + zero * rat) * scl, (zero - one * rat) * scl))
    rat = dr / di
    scl = one / (di + dr * rat)
    return type(d)(complex((one * rat + zero) * scl, (zero * rat - one) * scl))
  return crecip


@njit(**_J)
def trsm_left(a, b, out, lower, unit_diagonal):
  """Solve ``a[k] @ x = b[k]`` reading only the ``lower`` (else upper) triangle of a[k].

  As optimized BLAS trsm (what LAPACK-based solves give): every product is accumulated (no
  skipping of zeros) and rows are scaled by the reciprocal of the diagonal, so a zero pivot
  gives infinities, and NaN where they meet zeros."""
  B, m, _ = a.shape
  for bb in range(B):
    A = a[bb]
    X = out[bb]
    X[:] = b[bb]
    for ii in range(m):
      i = ii if lower else m - 1 - ii
      xi = X[i]
      lo = 0 if lower else i + 1
      hi = i if lower else m
      for k in range(lo, hi):
        aik = A[i, k]
        xk = X[k]
        for j in range(xi.size):
          xi[j] -= aik * xk[j]
      if not unit_diagonal:
        r = _recip(A[i, i])
        for j in range(xi.size):
          xi[j] = xi[j] * r


# ----------------------------------------------------------------- LU (partial pivoting)


@njit(inline="always", **_J)
def _cabs1(v):
  # LAPACK's i?amax measure: |re| + |im| (|x| for reals)
  return abs(v.real) + abs(v.imag)


@njit(**_J)
def lu(a, out, pivots, perm):
  """getf2: ``out[b]`` holds L (unit, strictly lower) and U; pivots/perm as JAX's lu."""
  B, m, n = a.shape
  k = min(m, n)
  for bb in range(B):
    A = out[bb]
    A[:] = a[bb]
    P = perm[bb]
    for i in range(m):
      P[i] = i
    for j in range(k):
      p = j
      best = _cabs1(A[j, j])
      for i in range(j + 1, m):
        v = _cabs1(A[i, j])
        if v > best:
          best = v
          p = i
      pivots[bb, j] = p
      if A[p, j] != 0:
        if p != j:
          for c in range(n):
            t = A[p, c]
            A[p, c] = A[j, c]
            A[j, c] = t
          t2 = P[p]
          P[p] = P[j]
          P[j] = t2
        d = A[j, j]
        for i in range(j + 1, m):
          A[i, j] = A[i, j] / d
      Aj = A[j]
      for i in range(j + 1, m):
        lij = A[i, j]
        if lij != 0:
          Ai = A[i]
          for c in range(j + 1, n):
            Ai[c] -= lij * Aj[c]


# ----------------------------------------------------------------- Householder QR


@njit(**_J)
def qr(a, q, r):
  """geqrf + orgqr conventions: ``a[b] = q[b] @ r[b]``; q is (m, m) or (m, k) as allocated,
  r is (m, n) or (k, n) as allocated (k = min(m, n))."""
  B, m, n = a.shape
  k = min(m, n)
  qc = q.shape[2]
  rr = r.shape[1]
  for bb in range(B):
    R = a[bb].copy()
    V = np.zeros((m, k), a.dtype)
    tau = np.zeros(k, a.dtype)
    for j in range(k):
      alpha = R[j, j]
      xnorm2 = 0.0
      for i in range(j + 1, m):
        xnorm2 += abs(R[i, j]) ** 2
      V[j, j] = 1
      if xnorm2 == 0 and alpha.imag == 0:
        continue  # H = I (tau = 0)
      norm = np.sqrt(abs(alpha) ** 2 + xnorm2)
      beta = -norm if alpha.real >= 0 else norm
      tau[j] = (beta - alpha) / beta
      scale = 1 / (alpha - beta)
      for i in range(j + 1, m):
        V[i, j] = R[i, j] * scale
        R[i, j] = 0
      R[j, j] = beta
      # R[j:, j+1:] -= conj(tau) v (v^H R[j:, j+1:])
      tc = np.conj(tau[j])
      for c in range(j + 1, n):
        w = R[j, c]
        for i in range(j + 1, m):
          w += np.conj(V[i, j]) * R[i, c]
        w *= tc
        R[j, c] -= w
        for i in range(j + 1, m):
          R[i, c] -= V[i, j] * w
    Q = q[bb]
    Q[:] = 0
    for i in range(min(m, qc)):
      Q[i, i] = 1
    for j in range(k - 1, -1, -1):
      t = tau[j]
      if t == 0:
        continue
      # Q[j:, j:] = (I - tau v v^H) Q[j:, j:]
      for c in range(j, qc):
        w = Q[j, c]
        for i in range(j + 1, m):
          w += np.conj(V[i, j]) * Q[i, c]
        w *= t
        Q[j, c] -= w
        for i in range(j + 1, m):
          Q[i, c] -= V[i, j] * w
    Rout = r[bb]
    Rout[:] = 0
    for i in range(min(rr, m)):
      for c in range(i, n):
        Rout[i, c] = R[i, c]


@njit(**_J)
def qr_pivoted(a, q, r, p):
  """QR with column pivoting (?geqp3's choice: at each step the remaining column of largest
  norm below the factored rows, the first on ties): ``p[b]`` the column order, ``q[b] @
  r[b] = a[b][:, p[b]]`` (the unpivoted Householder QR of the permuted columns)."""
  B, m, n = a.shape
  k = min(m, n)
  ap = np.empty_like(a)
  for bb in range(B):
    R = a[bb].copy()
    perm = np.arange(n)
    for j in range(k):
      best, c = -1.0, j
      for cc in range(j, n):
        s = 0.0
        for i in range(j, m):
          s += abs(R[i, cc]) ** 2
        if s > best:
          best, c = s, cc
      if c != j:
        for i in range(m):
          t = R[i, j]
          R[i, j] = R[i, c]
          R[i, c] = t
        t2 = perm[j]
        perm[j] = perm[c]
        perm[c] = t2
      alpha = R[j, j]
      xnorm2 = 0.0
      for i in range(j + 1, m):
        xnorm2 += abs(R[i, j]) ** 2
      if xnorm2 == 0 and alpha.imag == 0:
        continue
      norm = np.sqrt(abs(alpha) ** 2 + xnorm2)
      beta = -norm if alpha.real >= 0 else norm
      tau = (beta - alpha) / beta
      v = np.empty(m - j, a.dtype)
      v[0] = 1
      scale = 1 / (alpha - beta)
      for i in range(j + 1, m):
        v[i - j] = R[i, j] * scale
      tc = np.conj(tau)
      for cc in range(j, n):
        w = R[j, cc]
        for i in range(j + 1, m):
          w += np.conj(v[i - j]) * R[i, cc]
        w *= tc
        for i in range(j, m):
          R[i, cc] -= v[i - j] * w
    for c in range(n):
      p[bb, c] = perm[c]
      for i in range(m):
        ap[bb, i, c] = a[bb, i, perm[c]]
  qr(ap, q, r)


# ----------------------------------------------------------------- eigh / svd (LAPACK via numba)


def _syevd(a, w, uplo):
  """LAPACK ?syevd/?heevd on the Fortran-ordered square ``a`` (overwritten by eigenvectors)."""


@overload(_syevd, jit_options=dict(cache=True))
def _syevd_ov(a, w, uplo):
  _nla.ensure_lapack()
  evd = _nla._LAPACK().numba_ez_xxxevd(a.dtype)
  kind = ord(_nla.get_blas_kind(a.dtype, "eigh"))

  def impl(a, w, uplo):
    n = a.shape[-1]
    return evd(kind, ord("V"), uplo, n, a.ctypes, n, w.ctypes)
  return impl


@njit(inline="always", **_J)
def _triangle_finite(m, lower):
  n = m.shape[0]
  for i in range(n):
    for j in range(i + 1 if lower else i, n):
      v = m[j, i] if lower else m[i, j]
      if not np.isfinite(v):
        return False
  return True


@njit(**_J)
def eigh(a, v, w, lower):
  """syevd/heevd reading the ``lower`` (else upper) triangle of each ``a[b]``: ascending
  ``w``, eigenvectors in the columns of ``v``; NaNs for non-finite input (in that triangle:
  the other is never read)."""
  uplo = ord("L") if lower else ord("U")
  for bb in range(a.shape[0]):
    if not _triangle_finite(a[bb], lower):
      v[bb] = np.nan
      w[bb] = np.nan
      continue
    f = np.asfortranarray(a[bb])
    ww = w[bb].copy()
    info = _syevd(f, ww, uplo)
    if info != 0:
      v[bb] = np.nan
      w[bb] = np.nan
      continue
    w[bb] = ww
    v[bb] = f


@njit(**_J)
def svd(a, s, u, vt, full_matrices):
  """gesdd per matrix; NaNs for non-finite input."""
  for bb in range(a.shape[0]):
    if not np.isfinite(a[bb]).all():
      s[bb] = np.nan
      u[bb] = np.nan
      vt[bb] = np.nan
      continue
    uu, ss, vv = np.linalg.svd(a[bb], full_matrices)
    s[bb] = ss
    u[bb] = uu
    vt[bb] = vv


# ----------------------------------------------------------------- eig (LAPACK geev via numba)


def _geev(a, w, wi, vl, vr, jobvl, jobvr):
  """LAPACK ?geev on the Fortran-ordered square ``a`` (overwritten): real ``a`` writes the
  real/imaginary parts of the eigenvalues to ``w``/``wi`` and packed eigenvector pairs;
  complex ``a`` writes ``w`` (``wi`` unused). ``vl``/``vr``: Fortran (n, n), or (1, 1) when
  their job is ``N``. Returns LAPACK's info."""


@overload(_geev, jit_options=dict(cache=True))
def _geev_ov(a, w, wi, vl, vr, jobvl, jobvr):
  _nla.ensure_lapack()
  kind = ord(_nla.get_blas_kind(a.dtype, "eig"))
  live = _nla._dummy_liveness_func  # ``.ctypes`` does not keep its array alive
  if isinstance(a.dtype, types.Complex):
    cgeev = _nla._LAPACK().numba_ez_cgeev(a.dtype)

    def impl(a, w, wi, vl, vr, jobvl, jobvr):
      n = a.shape[-1]
      r = cgeev(kind, jobvl, jobvr, n, a.ctypes, n, w.ctypes, vl.ctypes, vl.shape[0],
                vr.ctypes, vr.shape[0])
      live([a.size, w.size, vl.size, vr.size])
      return r
    return impl
  rgeev = _nla._LAPACK().numba_ez_rgeev(a.dtype)

  def rimpl(a, w, wi, vl, vr, jobvl, jobvr):
    n = a.shape[-1]
    r = rgeev(kind, jobvl, jobvr, n, a.ctypes, n, w.ctypes, wi.ctypes, vl.ctypes, vl.shape[0],
              vr.ctypes, vr.shape[0])
    live([a.size, w.size, wi.size, vl.size, vr.size])
    return r
  return rimpl


@njit(inline="always", **_J)
def _unpack_pairs(wi, v, out):
  """Real geev's packed eigenvectors as complex ones: a pair ``(j, j + 1)`` with
  ``wi[j] != 0`` holds ``v[:, j] +- i v[:, j + 1]``."""
  n = wi.shape[0]
  j = 0
  while j < n:
    if wi[j] == 0 or j + 1 == n:
      for i in range(n):
        out[i, j] = v[i, j]
      j += 1
    else:
      for i in range(n):
        out[i, j] = complex(v[i, j], v[i, j + 1])
        out[i, j + 1] = complex(v[i, j], -v[i, j + 1])
      j += 2


def _geev_store(ww, wi, tl, tr, w, vl, vr, left, right):
  """Copy geev's results into the complex outputs ``w``, ``vl``, ``vr`` (one matrix)."""


@overload(_geev_store, inline="always")
def _geev_store_ov(ww, wi, tl, tr, w, vl, vr, left, right):
  if isinstance(ww.dtype, types.Complex):
    def cstore(ww, wi, tl, tr, w, vl, vr, left, right):
      w[:] = ww
      if left:
        vl[:] = tl
      if right:
        vr[:] = tr
    return cstore

  def rstore(ww, wi, tl, tr, w, vl, vr, left, right):
    for j in range(ww.shape[0]):
      w[j] = complex(ww[j], wi[j])
    if left:
      _unpack_pairs(wi, tl, vl)
    if right:
      _unpack_pairs(wi, tr, vr)
  return rstore


@njit(**_J)
def eig(a, w, vl, vr, left, right):
  """geev per matrix (sgeev/dgeev for real ``a``, eigenvector pairs unpacked to complex;
  cgeev/zgeev for complex): eigenvalues ``w[b]`` in LAPACK's order, left (``vl^H a = w
  vl^H``) and right (``a vr = vr w``) eigenvectors in the columns of ``vl[b]``/``vr[b]``
  (written only where ``left``/``right``), each of unit 2-norm with its largest component
  real. NaNs for non-finite input and where LAPACK fails to converge."""
  B, n, _ = a.shape
  if n == 0:
    return
  nl = n if left else 1
  nr = n if right else 1
  for bb in range(B):
    ok = np.isfinite(a[bb]).all()
    if ok:
      f = np.asfortranarray(a[bb])
      ww = np.empty(n, a.dtype)
      wi = np.empty(n, a.dtype)
      tl = np.empty((nl, nl), a.dtype).T
      tr = np.empty((nr, nr), a.dtype).T
      ok = _geev(f, ww, wi, tl, tr, ord("V") if left else ord("N"),
                 ord("V") if right else ord("N")) == 0
      if ok:
        _geev_store(ww, wi, tl, tr, w[bb], vl[bb], vr[bb], left, right)
    if not ok:
      w[bb] = _nan(w[0, 0])
      if left:
        vl[bb] = _nan(w[0, 0])
      if right:
        vr[bb] = _nan(w[0, 0])
