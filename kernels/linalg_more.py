"""numba kernels for the rarer LAPACK decompositions: Schur (?gees), Hessenberg (?gehrd),
Householder QR in LAPACK's packed form (?geqrf),
symmetric tridiagonal reduction (?sytrd/?hetrd), Householder products (?orgqr/?ungqr),
their application (?ormqr/?unmqr) and tridiagonal solves (?gtsv).

Pipeline position: the bottom of eager execution and of jit (the FFI handlers of
``nbjax.lax.linalg`` call these same kernels). Every kernel takes operands with one leading
batch axis ``(B, ...)``, C-contiguous, and loops over the batch in compiled code.

LAPACK is SciPy's (``scipy.linalg.cython_lapack``, the library numba's own ``np.linalg``
uses): each routine's address is registered with LLVM under a symbol of ours and called as a
``types.ExternalFunction`` taking pointers, so the compiled kernels refer to it by name and
numba's disk cache stays valid across processes. Callers allocate outputs. Imports numba,
llvmlite, numpy and scipy's cython_lapack only.
"""
import numpy as np
import llvmlite.binding as _llvm
from numba import njit, types
from numba.extending import get_cython_function_address, overload
from numba.np.numpy_support import as_dtype

_J = dict(cache=True, nogil=True, error_model="numpy")
_CHARS = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
          np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


def _ext(name, nargs):
  """LAPACK's ``name`` (Fortran calling convention: every argument a pointer)."""
  sym = "nbjax_lapack_" + name
  _llvm.add_symbol(sym, get_cython_function_address("scipy.linalg.cython_lapack", name))
  return types.ExternalFunction(sym, types.void(*([types.voidptr] * nargs)))


def _family(real, cplx, nargs):
  """{dtype: ExternalFunction} for a routine named ``?real`` (s, d) / ``?cplx`` (c, z)."""
  return {d: _ext(c + (real if c in "sd" else cplx), nargs) for d, c in _CHARS.items()}


_GEES = _family("gees", "gees", 15)
_GEHRD = _family("gehrd", "gehrd", 9)
_SYTRD = _family("sytrd", "hetrd", 10)
_ORGQR = _family("orgqr", "ungqr", 9)
_ORMQR = _family("ormqr", "unmqr", 13)
_GTSV = _family("gtsv", "gtsv", 8)
_GEQRF = _family("geqrf", "geqrf", 8)


def _keep(*arrs):
  """Keeps arrays alive past the external call that reads their ``.ctypes`` pointer."""


@overload(_keep, jit_options=dict(cache=True))
def _keep_ov(*arrs):
  return lambda *arrs: None


@njit(inline="always", **_J)
def _i32(v):
  r = np.empty(1, np.int32)
  r[0] = v
  return r


@njit(inline="always", **_J)
def _ch(c):
  r = np.empty(1, np.uint8)
  r[0] = c
  return r


@njit(inline="always", **_J)
def _lwork(work):
  return max(1, int(work[0].real))


@njit(inline="always", **_J)
def _fill_nan(x):
  x[...] = np.nan


# ----------------------------------------------------------------- Schur (?gees)


def _gees(f, w, wi, vs, jobvs):
  """?gees on the Fortran-ordered square ``f`` (overwritten by the Schur form T), no
  eigenvalue sorting; real input writes the eigenvalues' real/imaginary parts to ``w``/``wi``
  (complex: ``w``). ``vs``: Fortran (n, n) Schur vectors when ``jobvs`` is 'V'. Returns info."""


@overload(_gees, jit_options=dict(cache=True))
def _gees_ov(f, w, wi, vs, jobvs):
  fn = _GEES[as_dtype(f.dtype)]
  if isinstance(f.dtype, types.Complex):
    rdt = as_dtype(f.dtype.underlying_float)

    def cimpl(f, w, wi, vs, jobvs):
      n = f.shape[0]
      jv, srt, nn, sdim, ldvs, info = _ch(jobvs), _ch(ord("N")), _i32(n), _i32(0), \
          _i32(vs.shape[0]), _i32(0)
      lw = _i32(-1)
      work = np.empty(1, f.dtype)
      rwork = np.empty(max(1, n), rdt)
      bwork = np.empty(max(1, n), np.int32)
      fn(jv.ctypes, srt.ctypes, bwork.ctypes, nn.ctypes, f.ctypes, nn.ctypes, sdim.ctypes,
         w.ctypes, vs.ctypes, ldvs.ctypes, work.ctypes, lw.ctypes, rwork.ctypes, bwork.ctypes,
         info.ctypes)
      work = np.empty(_lwork(work), f.dtype)
      lw[0] = work.size
      fn(jv.ctypes, srt.ctypes, bwork.ctypes, nn.ctypes, f.ctypes, nn.ctypes, sdim.ctypes,
         w.ctypes, vs.ctypes, ldvs.ctypes, work.ctypes, lw.ctypes, rwork.ctypes, bwork.ctypes,
         info.ctypes)
      _keep(jv, srt, nn, sdim, ldvs, info, lw, work, rwork, bwork, f, w, vs)
      return info[0]
    return cimpl

  def rimpl(f, w, wi, vs, jobvs):
    n = f.shape[0]
    jv, srt, nn, sdim, ldvs, info = _ch(jobvs), _ch(ord("N")), _i32(n), _i32(0), \
        _i32(vs.shape[0]), _i32(0)
    lw = _i32(-1)
    work = np.empty(1, f.dtype)
    bwork = np.empty(max(1, n), np.int32)
    fn(jv.ctypes, srt.ctypes, bwork.ctypes, nn.ctypes, f.ctypes, nn.ctypes, sdim.ctypes,
       w.ctypes, wi.ctypes, vs.ctypes, ldvs.ctypes, work.ctypes, lw.ctypes, bwork.ctypes,
       info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(jv.ctypes, srt.ctypes, bwork.ctypes, nn.ctypes, f.ctypes, nn.ctypes, sdim.ctypes,
       w.ctypes, wi.ctypes, vs.ctypes, ldvs.ctypes, work.ctypes, lw.ctypes, bwork.ctypes,
       info.ctypes)
    _keep(jv, srt, nn, sdim, ldvs, info, lw, work, bwork, f, w, wi, vs)
    return info[0]
  return rimpl


@njit(**_J)
def schur(a, t, vs, compute_vs):
  """Schur form ``t[b]`` (upper triangular; real input: quasi-triangular with 2x2 blocks for
  complex pairs) and, where ``compute_vs``, unitary Schur vectors ``vs[b]`` with
  ``a[b] = vs[b] t[b] vs[b]^H`` (LAPACK ?gees, unsorted). NaNs where LAPACK reports failure
  (as JAX's CPU kernel; a NaN entry it runs through gives what LAPACK gives)."""
  B, n, _ = a.shape
  if n == 0:
    return
  nv = n if compute_vs else 1
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    w = np.empty(n, a.dtype)
    wi = np.empty(n, a.dtype)
    v = np.empty((nv, nv), a.dtype).T
    if _gees(f, w, wi, v, ord("V") if compute_vs else ord("N")) == 0:
      t[bb] = f
      if compute_vs:
        vs[bb] = v
    else:
      _fill_nan(t[bb])
      if compute_vs:
        _fill_nan(vs[bb])


# ----------------------------------------------------------------- Hessenberg (?gehrd)


def _gehrd(f, tau):
  """?gehrd (ilo = 1, ihi = n) on the Fortran-ordered square ``f``; returns info."""


@overload(_gehrd, jit_options=dict(cache=True))
def _gehrd_ov(f, tau):
  fn = _GEHRD[as_dtype(f.dtype)]

  def impl(f, tau):
    n = f.shape[0]
    nn, one, info, lw = _i32(n), _i32(1), _i32(0), _i32(-1)
    work = np.empty(1, f.dtype)
    fn(nn.ctypes, one.ctypes, nn.ctypes, f.ctypes, nn.ctypes, tau.ctypes, work.ctypes,
       lw.ctypes, info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(nn.ctypes, one.ctypes, nn.ctypes, f.ctypes, nn.ctypes, tau.ctypes, work.ctypes,
       lw.ctypes, info.ctypes)
    _keep(nn, one, info, lw, work, f, tau)
    return info[0]
  return impl


@njit(**_J)
def hessenberg(a, out, taus):
  """?gehrd per matrix: ``out[b]`` holds the upper Hessenberg matrix on and above the first
  subdiagonal and the Householder vectors below it; ``taus[b]`` (n - 1) their scalar factors.
  NaNs where LAPACK fails."""
  B, n, _ = a.shape
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    tau = np.empty(max(1, n - 1), a.dtype)
    if n > 0 and _gehrd(f, tau) != 0:
      _fill_nan(out[bb])
      _fill_nan(taus[bb])
      continue
    out[bb] = f
    for i in range(n - 1):
      taus[bb, i] = tau[i]


# ----------------------------------------------------------------- Householder QR (?geqrf)


def _geqrf(f, tau):
  """?geqrf on the Fortran-ordered (m, n) ``f``; returns info."""


@overload(_geqrf, jit_options=dict(cache=True))
def _geqrf_ov(f, tau):
  fn = _GEQRF[as_dtype(f.dtype)]

  def impl(f, tau):
    m, n = f.shape
    mm, nn, lda, info, lw = _i32(m), _i32(n), _i32(max(1, m)), _i32(0), _i32(-1)
    work = np.empty(1, f.dtype)
    fn(mm.ctypes, nn.ctypes, f.ctypes, lda.ctypes, tau.ctypes, work.ctypes, lw.ctypes,
       info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(mm.ctypes, nn.ctypes, f.ctypes, lda.ctypes, tau.ctypes, work.ctypes, lw.ctypes,
       info.ctypes)
    _keep(mm, nn, lda, info, lw, work, f, tau)
    return info[0]
  return impl


@njit(**_J)
def geqrf(a, out, taus):
  """?geqrf per matrix: ``out[b]`` holds R on and above the diagonal and the Householder
  vectors below it, ``taus[b]`` (min(m, n)) their scalar factors. NaNs where LAPACK fails."""
  B, m, n = a.shape
  k = min(m, n)
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    tau = np.empty(max(1, k), a.dtype)
    if m > 0 and n > 0 and _geqrf(f, tau) != 0:
      _fill_nan(out[bb])
      _fill_nan(taus[bb])
      continue
    out[bb] = f
    for i in range(k):
      taus[bb, i] = tau[i]


# ----------------------------------------------------------------- Householder product (?orgqr)


def _orgqr(f, k, tau):
  """?orgqr/?ungqr on the Fortran-ordered (m, n) ``f`` with the first ``k`` reflectors."""


@overload(_orgqr, jit_options=dict(cache=True))
def _orgqr_ov(f, k, tau):
  fn = _ORGQR[as_dtype(f.dtype)]

  def impl(f, k, tau):
    m, n = f.shape
    mm, nn, kk, info, lw = _i32(m), _i32(n), _i32(k), _i32(0), _i32(-1)
    lda = _i32(max(1, m))
    work = np.empty(1, f.dtype)
    fn(mm.ctypes, nn.ctypes, kk.ctypes, f.ctypes, lda.ctypes, tau.ctypes, work.ctypes,
       lw.ctypes, info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(mm.ctypes, nn.ctypes, kk.ctypes, f.ctypes, lda.ctypes, tau.ctypes, work.ctypes,
       lw.ctypes, info.ctypes)
    _keep(mm, nn, kk, info, lw, lda, work, f, tau)
    return info[0]
  return impl


@njit(**_J)
def householder_product(a, taus, out):
  """``out[b]``: the first n columns of the product of the k elementary reflectors stored
  below the diagonal of ``a[b]`` (m, n) with factors ``taus[b]`` (LAPACK ?orgqr/?ungqr)."""
  B, m, n = a.shape
  k = taus.shape[1]
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    tau = np.empty(max(1, k), a.dtype)
    for i in range(k):
      tau[i] = taus[bb, i]
    if m > 0 and n > 0 and _orgqr(f, k, tau) != 0:
      _fill_nan(out[bb])
      continue
    out[bb] = f


# ----------------------------------------------------------------- tridiagonal (?sytrd/?hetrd)


def _sytrd(f, d, e, tau, uplo):
  """?sytrd/?hetrd on the Fortran-ordered square ``f``; returns info."""


@overload(_sytrd, jit_options=dict(cache=True))
def _sytrd_ov(f, d, e, tau, uplo):
  fn = _SYTRD[as_dtype(f.dtype)]

  def impl(f, d, e, tau, uplo):
    n = f.shape[0]
    up, nn, info, lw = _ch(uplo), _i32(n), _i32(0), _i32(-1)
    lda = _i32(max(1, n))
    work = np.empty(1, f.dtype)
    fn(up.ctypes, nn.ctypes, f.ctypes, lda.ctypes, d.ctypes, e.ctypes, tau.ctypes,
       work.ctypes, lw.ctypes, info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(up.ctypes, nn.ctypes, f.ctypes, lda.ctypes, d.ctypes, e.ctypes, tau.ctypes,
       work.ctypes, lw.ctypes, info.ctypes)
    _keep(up, nn, info, lw, lda, work, f, d, e, tau)
    return info[0]
  return impl


@njit(**_J)
def tridiagonal(a, out, d, e, taus, lower):
  """?sytrd/?hetrd reading the ``lower`` (else upper) triangle of each ``a[b]``: ``out[b]``
  holds the tridiagonal matrix and the reflectors (LAPACK's packing), ``d``/``e`` the
  diagonal and off-diagonal (real), ``taus`` the reflectors' factors. NaNs on failure."""
  B, n, _ = a.shape
  uplo = ord("L") if lower else ord("U")
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    dd = np.empty(max(1, n), d.dtype)
    ee = np.empty(max(1, n - 1), d.dtype)
    tt = np.empty(max(1, n - 1), a.dtype)
    if _sytrd(f, dd, ee, tt, uplo) != 0:
      _fill_nan(out[bb])
      _fill_nan(d[bb])
      _fill_nan(e[bb])
      _fill_nan(taus[bb])
      continue
    out[bb] = f
    for i in range(n):
      d[bb, i] = dd[i]
    for i in range(n - 1):
      e[bb, i] = ee[i]
      taus[bb, i] = tt[i]


# ----------------------------------------------------------------- tridiagonal solve (?gtsv)


def _gtsv(dl, d, du, x):
  """?gtsv on the sub/main/super diagonals (overwritten) and the Fortran (m, k) ``x``."""


@overload(_gtsv, jit_options=dict(cache=True))
def _gtsv_ov(dl, d, du, x):
  fn = _GTSV[as_dtype(d.dtype)]

  def impl(dl, d, du, x):
    m, k = x.shape
    mm, kk, ldb, info = _i32(m), _i32(k), _i32(max(1, m)), _i32(0)
    fn(mm.ctypes, kk.ctypes, dl.ctypes, d.ctypes, du.ctypes, x.ctypes, ldb.ctypes, info.ctypes)
    _keep(mm, kk, ldb, info, dl, d, du, x)
    return info[0]
  return impl


@njit(**_J)
def tridiagonal_solve(dl, d, du, b, out):
  """Solve ``A[b] x = b[b]`` for tridiagonal ``A`` (``dl[b, i] = A[i, i-1]``, ``d``,
  ``du[b, i] = A[i, i+1]``; ``dl[b, 0]``/``du[b, m-1]`` unused) by LAPACK ?gtsv (partial
  pivoting); NaNs where it reports a singular system."""
  B, m, k = b.shape
  for bb in range(B):
    x = np.asfortranarray(b[bb])
    sub = np.empty(max(1, m - 1), d.dtype)
    sup = np.empty(max(1, m - 1), d.dtype)
    dg = d[bb].copy()
    for i in range(m - 1):
      sub[i] = dl[bb, i + 1]
      sup[i] = du[bb, i]
    if m > 0 and k > 0 and _gtsv(sub, dg, sup, x) != 0:
      _fill_nan(out[bb])
      continue
    out[bb] = x


@njit(**_J)
def tridiagonal_solve_perturbed(dl, d, du, b, out):
  """As ``tridiagonal_solve``, by an LU factorization with partial pivoting (?gttrf's) whose
  tiny pivots (magnitude below ``eps * max |U|``, or ``eps`` for a zero ``U``) are moved out
  to that magnitude, so a singular system gives a finite (large) solution."""
  B, m, k = b.shape
  eps = np.finfo(np.abs(d[:1, :1]).dtype).eps
  for bb in range(B):
    if m == 0 or k == 0:
      continue
    dg = d[bb].copy()
    sub = np.zeros(max(1, m - 1), d.dtype)  # L's multipliers
    sup = np.zeros(max(1, m - 1), d.dtype)  # U's first superdiagonal
    sup2 = np.zeros(max(1, m - 2), d.dtype)  # U's second (from row interchanges)
    swap = np.zeros(max(1, m - 1), np.bool_)
    for i in range(m - 1):
      sub[i] = dl[bb, i + 1]
      sup[i] = du[bb, i]
    for i in range(m - 1):
      if np.abs(dg[i]) >= np.abs(sub[i]):
        if dg[i] != 0:
          f = sub[i] / dg[i]
          sub[i] = f
          dg[i + 1] -= f * sup[i]
        else:
          sub[i] = 0
      else:  # interchange rows i and i + 1
        swap[i] = True
        f = dg[i] / sub[i]
        dg[i] = sub[i]
        sub[i] = f
        t = sup[i]
        sup[i] = dg[i + 1]
        dg[i + 1] = t - f * dg[i + 1]
        if i < m - 2:
          sup2[i] = sup[i + 1]
          sup[i + 1] = -f * sup[i + 1]
    big = 0.0
    for i in range(m):
      big = max(big, np.abs(dg[i]))
    for i in range(m - 1):
      big = max(big, np.abs(sup[i]))
    for i in range(m - 2):
      big = max(big, np.abs(sup2[i]))
    tol = eps * big if big > 0 else eps
    for i in range(m):
      a = np.abs(dg[i])
      if a < tol:
        dg[i] = tol if a == 0 else dg[i] * (tol / a)
    x = b[bb].copy()
    for i in range(m - 1):  # L^-1 P b
      if swap[i]:
        for j in range(k):
          t = x[i, j]
          x[i, j] = x[i + 1, j]
          x[i + 1, j] = t - sub[i] * x[i, j]
      else:
        for j in range(k):
          x[i + 1, j] -= sub[i] * x[i, j]
    for i in range(m - 1, -1, -1):  # U^-1
      for j in range(k):
        v = x[i, j]
        if i < m - 1:
          v -= sup[i] * x[i + 1, j]
        if i < m - 2:
          v -= sup2[i] * x[i + 2, j]
        x[i, j] = v / dg[i]
    out[bb] = x


# ----------------------------------------------------------------- Q^(H) C (?ormqr/?unmqr)


def _ormqr(f, tau, c, side, trans):
  """?ormqr/?unmqr: ``c`` (Fortran) overwritten by op(Q) c or c op(Q)."""


@overload(_ormqr, jit_options=dict(cache=True))
def _ormqr_ov(f, tau, c, side, trans):
  fn = _ORMQR[as_dtype(f.dtype)]

  def impl(f, tau, c, side, trans):
    m, n = c.shape
    k = tau.shape[0]
    sd, tr, mm, nn, kk = _ch(side), _ch(trans), _i32(m), _i32(n), _i32(k)
    lda, ldc, info, lw = _i32(max(1, f.shape[0])), _i32(max(1, m)), _i32(0), _i32(-1)
    work = np.empty(1, f.dtype)
    fn(sd.ctypes, tr.ctypes, mm.ctypes, nn.ctypes, kk.ctypes, f.ctypes, lda.ctypes,
       tau.ctypes, c.ctypes, ldc.ctypes, work.ctypes, lw.ctypes, info.ctypes)
    work = np.empty(_lwork(work), f.dtype)
    lw[0] = work.size
    fn(sd.ctypes, tr.ctypes, mm.ctypes, nn.ctypes, kk.ctypes, f.ctypes, lda.ctypes,
       tau.ctypes, c.ctypes, ldc.ctypes, work.ctypes, lw.ctypes, info.ctypes)
    _keep(sd, tr, mm, nn, kk, lda, ldc, info, lw, work, f, tau, c)
    return info[0]
  return impl


@njit(**_J)
def ormqr(a, taus, c, out, side, trans):
  """``out[b] = op(Q[b]) c[b]`` (``side`` 'L') or ``c[b] op(Q[b])`` ('R'), ``Q[b]`` the
  product of the reflectors in ``a[b]``/``taus[b]`` and op per ``trans`` ('N', 'T' or 'C',
  LAPACK's codes) (LAPACK ?ormqr/?unmqr)."""
  B, m, n = c.shape
  k = taus.shape[1]
  for bb in range(B):
    f = np.asfortranarray(a[bb])
    x = np.asfortranarray(c[bb])
    tau = np.empty(max(1, k), a.dtype)
    for i in range(k):
      tau[i] = taus[bb, i]
    if m > 0 and n > 0 and k > 0:
      if _ormqr(f, tau[:k], x, side, trans) != 0:
        _fill_nan(out[bb])
        continue
    out[bb] = x
