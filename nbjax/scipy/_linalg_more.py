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

import numpy as np

from nbjax import lax
from nbjax import numpy as jnp
from nbjax.lax import linalg as lax_linalg
from nbjax.numpy import _util
from nbjax.numpy import linalg as jnp_linalg
from nbjax.numpy._vectorize import vectorize

__all__ = ["schur", "rsf2csf", "sqrtm", "funm"]


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
