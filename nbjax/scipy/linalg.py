"""``nbjax.scipy.linalg``: JAX's ``jax.scipy.linalg`` (SciPy's names and signatures).

A library layer: thin wrappers over the ``nbjax.lax.linalg`` primitives (cholesky, lu, qr,
eigh, svd, triangular_solve) and ``nbjax.numpy.linalg``; ``expm`` is Pade
scaling-and-squaring written with ``lax.switch``/``lax.scan`` so it traces under ``jit``,
``vmap`` and differentiation. SciPy's ``overwrite_*``/``check_finite`` arguments are
accepted and unused, as in JAX.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.lax import linalg as lax_linalg
from nbjax.numpy import _util
from nbjax.numpy import linalg as jnp_linalg
from nbjax.numpy._vectorize import vectorize

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "det", "eigh",
           "expm", "expm_frechet", "hankel", "hilbert", "inv", "lu", "lu_factor", "lu_solve",
           "qr", "solve", "solve_triangular", "svd", "toeplitz"]


def _inexact(*args):
  return _util.promote_dtypes_inexact(*(jnp.asarray(a) for a in args))


def _solve_signature(name, a, b, n_mats=1):
  """JAX's gufunc signature for a solve against ``b``: a vector, a (deprecated) batch of
  vectors, or a (batch of) matrix."""
  mats = ",".join(["(n,n)"] + ["(n)"] * (n_mats - 1))
  if b.ndim == 1:
    return f"{mats},(n)->(n)"
  if a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1]:
    warnings.warn(f"jax.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are deprecated, "
                  "and in the future will be treated as a batched 2D solve. Use "
                  f"{name}(..., b[..., None]).squeeze(-1) to avoid this warning.",
                  category=FutureWarning, stacklevel=3)
    return f"{mats},(n)->(n)"
  return f"{mats},(n,k)->(n,k)"


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
  """Cholesky factor of a Hermitian positive-definite ``a``: lower ``L`` (``a = L L^H``) if
  ``lower`` else upper ``U`` (``a = U^H U``). Only the triangle named is read."""
  a, = _inexact(a)
  c = lax_linalg.cholesky(a if lower else jnp.conj(a.mT), symmetrize_input=False)
  return c if lower else jnp.conj(c.mT)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
  """``(c, lower)`` for ``cho_solve``: ``c`` is ``cholesky(a, lower)``."""
  return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
  """Solve ``a x = b`` from ``cho_factor(a)``'s ``(c, lower)``."""
  c, lower = c_and_lower
  c, b = _inexact(c, b)
  sig = _solve_signature("cho_solve", c, b)
  ts = lax_linalg.triangular_solve
  b = vectorize(functools.partial(ts, left_side=True, lower=lower, transpose_a=not lower,
                                  conjugate_a=not lower), signature=sig)(c, b)
  return vectorize(functools.partial(ts, left_side=True, lower=lower, transpose_a=lower,
                                     conjugate_a=lower), signature=sig)(c, b)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
  """Solve ``op(a) x = b`` for triangular ``a``; ``trans`` 0/'N': ``a``, 1/'T': ``a^T``,
  2/'C': ``a^H``."""
  if trans == 0 or trans == "N":
    transpose_a, conjugate_a = False, False
  elif trans == 1 or trans == "T":
    transpose_a, conjugate_a = True, False
  elif trans == 2 or trans == "C":
    transpose_a, conjugate_a = True, True
  else:
    raise ValueError(f"Invalid 'trans' value {trans}")
  a, b = _inexact(a, b)
  return vectorize(functools.partial(lax_linalg.triangular_solve, left_side=True, lower=lower,
                                     transpose_a=transpose_a, conjugate_a=conjugate_a,
                                     unit_diagonal=unit_diagonal),
                   signature=_solve_signature("solve_triangular", a, b))(a, b)


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
  """``(lu, piv)``: ``L`` (unit diagonal, below) and ``U`` packed in ``lu``; row ``i`` was
  swapped with row ``piv[i]`` (0-based, as SciPy's)."""
  a, = _inexact(a)
  lu_, pivots, _ = lax_linalg.lu(a)
  return lu_, pivots


def _pivots_to_permutation(pivots, m):
  """The row permutation that applying the swaps ``i <-> pivots[..., i]`` in order gives."""
  iota = lax.broadcasted_iota(pivots.dtype, pivots.shape[:-1] + (m,), pivots.ndim - 1)

  def swap(i, perm):
    j = lax.dynamic_index_in_dim(pivots, i, -1, keepdims=True)
    pi = lax.dynamic_index_in_dim(perm, i, -1, keepdims=True)
    pj = jnp.take_along_axis(perm, j, axis=-1)
    return jnp.where(iota == i, pj, jnp.where(iota == j, pi, perm))
  return lax.fori_loop(0, pivots.shape[-1], swap, iota)


def _lu_solve(lu_, perm, b, trans):
  ts = lax_linalg.triangular_solve
  if trans == 0:
    x = b[perm, :]
    x = ts(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    return ts(lu_, x, left_side=True, lower=False)
  if trans in (1, 2):
    conj = trans == 2
    x = ts(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
    x = ts(lu_, x, left_side=True, lower=True, unit_diagonal=True, transpose_a=True,
           conjugate_a=conj)
    return x[jnp.argsort(perm), :]
  raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")


def lu_solve(lu_and_piv, b, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True):
  """Solve ``a x = b`` (``trans`` 1: ``a^T x = b``, 2: ``a^H x = b``) from
  ``lu_factor(a)``'s ``(lu, piv)``."""
  lu_, pivots = lu_and_piv
  lu_, b = _inexact(lu_, b)
  pivots = jnp.asarray(pivots)
  perm = _pivots_to_permutation(pivots, lu_.shape[-2])
  sig = _solve_signature("lu_solve", lu_, b, n_mats=2)
  vec = sig.endswith("->(n)")

  def one(lu1, perm1, b1):
    if vec:
      return _lu_solve(lu1, perm1, b1[:, None], trans)[:, 0]
    return _lu_solve(lu1, perm1, b1, trans)
  return vectorize(one, signature=sig)(lu_, perm, b)


def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
  """LU decomposition with partial pivoting: ``(p, l, u)`` with ``a = p @ l @ u``, or
  ``(p @ l, u)`` if ``permute_l``."""
  a, = _inexact(a)
  lu_, _, perm = lax_linalg.lu(a)
  m, n = a.shape[-2:]
  p = jnp.real((perm[..., None, :] == jnp.arange(m, dtype=perm.dtype)[:, None]).astype(a.dtype))
  k = min(m, n)
  l = jnp.tril(lu_, -1)[..., :, :k] + jnp.eye(m, k, dtype=a.dtype)
  u = jnp.triu(lu_)[..., :k, :]
  if permute_l:
    return jnp.matmul(p, l, precision=lax.Precision.HIGHEST), u
  return p, l, u


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
  """QR decomposition: ``mode`` "full" ``(q, r)``, "economic" (reduced) ``(q, r)``, or "r"
  ``(r,)``; with ``pivoting`` the column permutation is appended."""
  if mode in ("full", "r"):
    full_matrices = True
  elif mode == "economic":
    full_matrices = False
  else:
    raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
  a, = _inexact(a)
  q, r, *p = lax_linalg.qr(a, pivoting=pivoting, full_matrices=full_matrices)
  if mode == "r":
    return (r, p[0]) if pivoting else (r,)
  return (q, r, p[0]) if pivoting else (q, r)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
  """Singular value decomposition: ``(u, s, vh)`` with ``a = u @ diag(s) @ vh``, or ``s``."""
  a, = _inexact(a)
  return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,  # noqa: A002
         check_finite: bool = True):
  """Eigendecomposition of Hermitian ``a`` (reading the ``lower`` triangle): ``(w, v)``, or
  ``w`` if ``eigvals_only``; ``w`` ascending. Only ``b=None``, ``type=1`` is supported."""
  if b is not None:
    raise NotImplementedError("Only the b=None case of eigh is implemented")
  if type != 1:
    raise NotImplementedError("Only the type=1 case of eigh is implemented.")
  if eigvals is not None:
    raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
  a, = _inexact(a)
  v, w = lax_linalg.eigh(a, lower=lower)
  return w if eigvals_only else (w, v)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
  """Inverse of the square matrix (or batch) ``a``."""
  return jnp_linalg.inv(a)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
  """Determinant of the square matrix (or batch) ``a``."""
  return jnp_linalg.det(a)


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
  """Solve ``a x = b``. ``assume_a`` ("gen", "sym", "her", "pos") names ``a``'s structure;
  "pos" solves through a Cholesky factorization of the ``lower`` (or upper) triangle."""
  valid = ["gen", "sym", "her", "pos"]
  if assume_a not in valid:
    raise ValueError(f"Expected assume_a to be one of {valid}; got {assume_a!r}")
  if assume_a != "pos":
    return jnp_linalg.solve(a, b)
  a, b = _inexact(a, b)
  if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
    raise ValueError(f"The arguments to solve must have shapes a=[..., m, m] and "
                     f"b=[..., m, k] or b=[..., m]; got a={a.shape} and b={b.shape}")
  vec = b.ndim == a.ndim - 1
  if vec:
    b = b[..., None]
  batch = _util.broadcast_shapes(a.shape[:-2], b.shape[:-2])
  a = jnp.broadcast_to(a, batch + a.shape[-2:])
  b = jnp.broadcast_to(b, batch + b.shape[-2:])
  c = cholesky(lax.stop_gradient(a), lower=lower)
  ts = lax_linalg.triangular_solve

  def chol_solve(r):  # (L L^H)^-1 r, linear in r
    y = ts(c, r, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    return ts(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
  # the value is the Cholesky solve's (reading one triangle); the derivative that of a linear
  # solve with the whole a, d x = a^-1 (d b - d a x), as JAX's custom_linear_solve gives
  x0 = lax.stop_gradient(chol_solve(b))
  r = chol_solve(b - jnp.matmul(a, x0, precision=lax.Precision.HIGHEST))
  x = x0 + (r - lax.stop_gradient(r))
  return x[..., 0] if vec else x


# -- expm --------------------------------------------------------------------------------------

def _dot(a, b):
  return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


def _pade(b):
  """``(U, V)`` of the order-``len(b) - 1`` Pade approximant (orders 3, 5, 7, 9)."""
  def pade(A):
    ident = jnp.eye(*A.shape, dtype=A.dtype)
    A2 = _dot(A, A)
    powers = [ident, A2]
    while len(powers) < len(b) // 2:
      powers.append(_dot(powers[-1], A2))
    u = sum(b[2 * i + 1] * p for i, p in enumerate(powers))
    v = sum(b[2 * i] * p for i, p in enumerate(powers))
    return _dot(A, u), v
  return pade


_pade3 = _pade((120., 60., 12., 1.))
_pade5 = _pade((30240., 15120., 3360., 420., 30., 1.))
_pade7 = _pade((17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.))
_pade9 = _pade((17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160.,
                110880., 3960., 90., 1.))


def _pade13(A):
  b = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
       129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
       40840800., 960960., 16380., 182., 1.)
  ident = jnp.eye(*A.shape, dtype=A.dtype)
  A2 = _dot(A, A)
  A4 = _dot(A2, A2)
  A6 = _dot(A4, A2)
  U = _dot(A, _dot(A6, b[13] * A6 + b[11] * A4 + b[9] * A2)
           + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * ident)
  V = (_dot(A6, b[12] * A6 + b[10] * A4 + b[8] * A2)
       + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * ident)
  return U, V


# (max norm, degree thresholds, approximants) per precision (Higham 2005)
_EXPM = {8: (5.371920351148152, [1.495585217958292e-002, 2.539398330063230e-001,
                                 9.504178996162932e-001, 2.097847961257068e+000],
             [_pade3, _pade5, _pade7, _pade9, _pade13]),
         4: (3.925724783138660, [4.258730016922831e-001, 1.880152677804762e+000],
             [_pade3, _pade5, _pade7])}


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
  """Matrix exponential of the square matrix (or batch) ``A`` by Pade approximation with
  scaling and squaring (Higham 2005). Gives NaNs where more than ``max_squarings`` squarings
  would be needed; ``upper_triangular`` solves the Pade system as triangular."""
  A, = _util.promote_dtypes_inexact(A)
  if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
    raise ValueError(f"Expected A to be a (batched) square matrix, got A.shape={A.shape}.")
  if A.ndim > 2:
    return vectorize(functools.partial(expm, upper_triangular=upper_triangular,
                                       max_squarings=max_squarings),
                     signature="(n,n)->(n,n)")(A)
  width = np.dtype(A.dtype).itemsize // (2 if jnp.iscomplexobj(A) else 1)
  if width not in _EXPM:
    raise TypeError(f"A.dtype={A.dtype} is not supported.")
  maxnorm, conds, padés = _EXPM[width]
  norm1 = jnp_linalg.norm(A, 1)
  n_squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm1 / maxnorm)))
  A = A / 2 ** n_squarings.astype(A.dtype)
  U, V = lax.switch(jnp.digitize(norm1, jnp.array(conds, dtype=norm1.dtype)), padés, A)
  P, Q = U + V, -U + V

  def nan(args):
    return jnp.full_like(args[0], np.nan)

  def compute(args):
    _, P, Q = args
    R = solve_triangular(Q, P) if upper_triangular else jnp_linalg.solve(Q, P)

    def square(c, i):
      return lax.cond(i < n_squarings, lambda x: _dot(x, x), lambda x: x, c), None
    return lax.scan(square, R, jnp.arange(max_squarings, dtype=n_squarings.dtype))[0]
  return lax.cond(n_squarings > max_squarings, nan, compute, (A, P, Q))


def block_diag(*arrs):
  """The block-diagonal matrix of the (at most 2-d) arguments."""
  if len(arrs) == 0:
    arrs = (jnp.zeros((1, 0)),)
  arrs = tuple(_util.promote_dtypes(*arrs))
  bad = [i for i, a in enumerate(arrs) if np.ndim(a) > 2]
  if bad:
    raise ValueError("Arguments to jax.scipy.linalg.block_diag must have at most 2 "
                     f"dimensions, got {arrs[bad[0]]} at argument {bad[0]}.")
  arrs = [jnp.atleast_2d(a) for a in arrs]
  total = sum(a.shape[1] for a in arrs)
  out, col = [], 0
  for a in arrs:
    out.append(lax.pad(a, np.zeros((), a.dtype)[()], ((0, 0, 0), (col, total - a.shape[1] - col, 0))))
    col += a.shape[1]
  return jnp.concatenate(out, axis=0)


def expm_frechet(A, E, *, method=None, compute_expm: bool = True):
  """Frechet derivative of ``expm`` at ``A`` in the direction ``E`` (``jvp`` of ``expm``):
  ``(expm(A), L(A, E))``, or ``L(A, E)`` alone if not ``compute_expm``."""
  A, E = jnp.asarray(A), jnp.asarray(E)
  if A.ndim < 2 or A.shape[-2] != A.shape[-1]:
    raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={A.shape}")
  if E.ndim < 2 or E.shape[-2] != E.shape[-1]:
    raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={E.shape}")
  if A.shape != E.shape:
    raise ValueError(f"expected A and E to be the same shape, got A.shape={A.shape} "
                     f"E.shape={E.shape}")
  from nbjax.api import jvp
  expm_a, frechet = jvp(functools.partial(expm, upper_triangular=False, max_squarings=16),
                        (A,), (E,))
  return (expm_a, frechet) if compute_expm else frechet


def _along_last(*vs):
  """``vs`` as arrays of at least 1 dimension with broadcast leading (batch) dimensions."""
  vs = [jnp.atleast_1d(jnp.asarray(v)) for v in vs]
  batch = _util.broadcast_shapes(*(v.shape[:-1] for v in vs))
  return [jnp.broadcast_to(v, batch + v.shape[-1:]) for v in vs]


def toeplitz(c, r=None):
  """Toeplitz matrix with first column ``c`` and first row ``r`` (``r[0]`` ignored; default
  ``conj(c)``); batched over leading dimensions."""
  if r is None:
    _util.check_arraylike("toeplitz", c)
    r = jnp.conjugate(jnp.asarray(c))
  else:
    _util.check_arraylike("toeplitz", c, r)
  c, r = _util.promote_dtypes(*_along_last(c, r))
  m, n = c.shape[-1], r.shape[-1]
  v = jnp.concatenate([jnp.flip(r[..., 1:], -1), c], axis=-1)
  return v[..., (n - 1) + np.arange(m)[:, None] - np.arange(n)[None, :]]


def hankel(c, r=None):
  """Hankel matrix with first column ``c`` and last row ``r`` (``r[0]`` ignored; default
  zeros); batched over leading dimensions."""
  if r is None:
    _util.check_arraylike("hankel", c)
    c = jnp.asarray(c)
    r = jnp.zeros_like(c)
  else:
    _util.check_arraylike("hankel", c, r)
    c, r = jnp.asarray(c), jnp.asarray(r)
  if c.ndim == 0:
    raise ValueError("hankel: c must be at least 1-dimensional, got a scalar.")
  if r.ndim == 0:
    raise ValueError("hankel: r must be at least 1-dimensional, got a scalar.")
  c, r = _util.promote_dtypes(*_along_last(c, r))
  m, n = c.shape[-1], r.shape[-1]
  v = jnp.concatenate([c, r[..., 1:]], axis=-1)
  return v[..., np.arange(m)[:, None] + np.arange(n)[None, :]]


def circulant(c):
  """Circulant matrix with first column ``c``; batched over leading dimensions."""
  _util.check_arraylike("circulant", c)
  c = jnp.atleast_1d(jnp.asarray(c))
  n = c.shape[-1]
  return c[..., (np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def hilbert(n: int):
  """The ``n x n`` Hilbert matrix, ``1 / (i + j + 1)``."""
  a = lax.broadcasted_iota(jnp.float_, (n, 1), 0)
  return 1 / (a + a.T + 1)


# schur, rsf2csf, sqrtm, funm, hessenberg, polar, ... and the special matrices
from nbjax.scipy import _linalg_more  # noqa: E402
from nbjax.scipy._linalg_more import *  # noqa: E402,F401,F403
__all__ += _linalg_more.__all__
