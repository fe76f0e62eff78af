"""Krylov solvers of ``jax.scipy.sparse.linalg``: ``cg``, ``bicgstab`` and ``gmres``.

``A`` (and the preconditioner ``M``) is a square matrix, a function ``x -> A x`` or any object
with ``@``; ``b`` and the solution are arrays or pytrees of arrays of any shapes. Each solver is
a ``lax.while_loop`` wrapped in ``lax.custom_linear_solve``, so derivatives (and transposes)
come from another solve (implicit differentiation), not from differentiating the iterations.
As JAX's, ``cg`` and ``bicgstab`` return ``(x, None)`` and ``gmres`` ``(x, info)`` with ``info``
``-1`` when the solution is NaN and ``0`` otherwise. Convergence means
``norm(residual) <= max(tol * norm(b), atol)``.
"""
import functools
import operator

import numpy as np

import nbjax.numpy as jnp
from nbjax import dtypes as _dtypes
from nbjax import lax
from nbjax.api import device_put
from nbjax.array import Array
from nbjax.scipy import linalg as _sla
from nbjax.tree_util import Partial, tree_leaves, tree_map, tree_reduce, tree_structure

__all__ = ["cg", "gmres", "bicgstab"]

_HIGHEST = lax.Precision.HIGHEST


def _dot(a, b):
  return jnp.dot(a, b, precision=_HIGHEST)


def _vdot(a, b):
  return jnp.vdot(a, b, precision=_HIGHEST)


def _vdot_real_part(x, y):
  """Re(vdot(x, y)) when x and y are parallel enough: the real-imaginary cross terms are
  left out. A real result."""
  out = _vdot(x.real, y.real)
  if jnp.iscomplexobj(x) or jnp.iscomplexobj(y):
    out += _vdot(x.imag, y.imag)
  return out


def _vdot_real_tree(x, y):
  return sum(tree_leaves(tree_map(_vdot_real_part, x, y)))


def _vdot_tree(x, y):
  return sum(tree_leaves(tree_map(_vdot, x, y)))


def _norm(x):
  xs = tree_leaves(x)
  return jnp.sqrt(sum(_vdot_real_part(a, a) for a in xs))


def _mul(scalar, tree):
  return tree_map(lambda leaf: scalar * leaf, tree)


def _add(x, y):
  return tree_map(operator.add, x, y)


def _sub(x, y):
  return tree_map(operator.sub, x, y)


def _lattice_type(tree):
  return _dtypes.result_type(*tree_leaves(tree), return_weak_type_flag=True)


@Partial
def _identity(x):
  return x


def _normalize_matvec(f):
  """A function computing ``f @ x`` (``f`` itself when it is callable)."""
  if callable(f):
    return f
  if isinstance(f, (np.ndarray, Array)):
    if f.ndim != 2 or f.shape[0] != f.shape[1]:
      raise ValueError(f"linear operator must be a square matrix, but has shape: {f.shape}")
    return functools.partial(_dot, f)
  if hasattr(f, "__matmul__"):
    if hasattr(f, "shape") and (len(f.shape) != 2 or f.shape[0] != f.shape[1]):
      raise ValueError(f"linear operator must be a square matrix, but has shape: {f.shape}")
    return functools.partial(operator.matmul, f)
  raise TypeError(f"linear operator must be either a function or ndarray: {f}")


# ---- conjugate gradients and BiCGSTAB ----------------------------------------------------

def _cg_solve(A, b, x0=None, *, maxiter, tol=1e-5, atol=0.0, M=_identity):
  bs = _vdot_real_tree(b, b)
  atol2 = jnp.maximum(jnp.square(tol) * bs, jnp.square(atol))
  r0 = _sub(b, A(x0))
  p0 = z0 = M(r0)
  dtype = _dtypes.result_type(*tree_leaves(p0))
  gamma0 = _vdot_real_tree(r0, z0).astype(dtype)

  def cond(state):
    _, r, gamma, _, k = state
    # without a preconditioner gamma is already |r|^2
    rs = gamma.real if M is _identity else _vdot_real_tree(r, r)
    return (rs > atol2) & (k < maxiter)

  def body(state):
    x, r, gamma, p, k = state
    Ap = A(p)
    alpha = gamma / _vdot_real_tree(p, Ap).astype(dtype)
    x = _add(x, _mul(alpha, p))
    r = _sub(r, _mul(alpha, Ap))
    z = M(r)
    gamma_new = _vdot_real_tree(r, z).astype(dtype)
    p = _add(z, _mul(gamma_new / gamma, p))
    return x, r, gamma_new, p, k + 1

  return lax.while_loop(cond, body, (x0, r0, gamma0, p0, 0))[0]


def _bicgstab_solve(A, b, x0=None, *, maxiter, tol=1e-5, atol=0.0, M=_identity):
  bs = _vdot_real_tree(b, b)
  atol2 = jnp.maximum(jnp.square(tol) * bs, jnp.square(atol))

  def cond(state):
    r, k = state[1], state[-1]
    # k < 0 flags a breakdown (rho == 0: -10; omega or alpha == 0: -11)
    return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)

  def body(state):
    x, r, rhat, alpha, omega, rho, p, q, k = state
    rho_new = _vdot_tree(rhat, r)
    beta = rho_new / rho * alpha / omega
    p = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
    phat = M(p)
    q = A(phat)
    alpha = rho_new / _vdot_tree(rhat, q)
    s = _sub(r, _mul(alpha, q))
    exit_early = _vdot_real_tree(s, s) < atol2
    shat = M(s)
    t = A(shat)
    omega = _vdot_tree(t, s) / _vdot_tree(t, t)
    x = tree_map(functools.partial(jnp.where, exit_early), _add(x, _mul(alpha, phat)),
                 _add(x, _add(_mul(alpha, phat), _mul(omega, shat))))
    r = tree_map(functools.partial(jnp.where, exit_early), s, _sub(s, _mul(omega, t)))
    k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)
    k = jnp.where(rho_new == 0, -10, k)
    return x, r, rhat, alpha, omega, rho_new, p, q, k

  r0 = _sub(b, A(x0))
  one = lax._convert_element_type(1, *_lattice_type(b))
  init = (x0, r0, r0, one, one, one, r0, r0, 0)
  return lax.while_loop(cond, body, init)[0]


def _shapes(tree):
  return [np.shape(x) for x in tree_leaves(tree)]


def _isolve(solve, A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None,
            check_symmetric=False):
  if x0 is None:
    x0 = tree_map(jnp.zeros_like, b)
  b, x0 = device_put((b, x0))
  if maxiter is None:
    maxiter = 10 * sum(bi.size for bi in tree_leaves(b))  # SciPy's default
  if M is None:
    M = _identity
  A = _normalize_matvec(A)
  M = _normalize_matvec(M)
  if tree_structure(x0) != tree_structure(b):
    raise ValueError("x0 and b must have matching tree structure: "
                     f"{tree_structure(x0)} vs {tree_structure(b)}")
  if _shapes(x0) != _shapes(b):
    raise ValueError(f"arrays in x0 and b must have matching shapes: {_shapes(x0)} vs "
                     f"{_shapes(b)}")
  isolve = functools.partial(solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
  symmetric = (all(not jnp.iscomplexobj(x) for x in tree_leaves(b)) if check_symmetric
               else False)
  x = lax.custom_linear_solve(A, b, solve=isolve, transpose_solve=isolve, symmetric=symmetric)
  return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
  """Solve ``A x = b`` by conjugate gradients (``A`` Hermitian positive definite).

  ``x0`` is the starting guess (zeros by default), ``maxiter`` the iteration limit (10 times
  the size of ``b`` by default), ``M`` a preconditioner approximating the inverse of ``A``.
  Returns ``(x, None)``; derivatives solve another system with ``cg``.
  """
  return _isolve(_cg_solve, A=A, b=b, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M,
                 check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
  """Solve ``A x = b`` by the biconjugate gradient stabilised method (any nonsingular ``A``).

  Arguments as ``cg``'s; returns ``(x, None)``.
  """
  return _isolve(_bicgstab_solve, A=A, b=b, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)


# ---- GMRES ------------------------------------------------------------------------------

def _safe_normalize(x, thresh=None):
  """``(x / norm(x), norm(x))``, or zeros and 0 when the norm is at most ``thresh`` (the
  dtype's epsilon by default)."""
  norm = _norm(x)
  dtype, weak_type = _lattice_type(x)
  if thresh is None:
    thresh = _dtypes.finfo(norm.dtype).eps
  thresh = jnp.asarray(thresh).astype(dtype).real
  use_norm = norm > thresh
  norm_cast = lax._convert_element_type(norm, dtype, weak_type)
  normalized = tree_map(lambda y: jnp.where(use_norm, y / norm_cast, 0.0), x)
  return normalized, jnp.where(use_norm, norm, 0.0)


def _project_on_columns(Q, v):
  """Q^H v, summed over the leaves."""
  parts = tree_map(lambda X, y: jnp.einsum("...n,...->n", X.conj(), y, precision=_HIGHEST),
                   Q, v)
  return tree_reduce(operator.add, parts)


def _iterative_classical_gram_schmidt(Q, x, xnorm, max_iterations=2):
  """``(q, r)``: x orthogonalised against Q's orthonormal columns (r the overlaps), repeated
  (at most ``max_iterations`` passes) while the remainder is below ||x|| / sqrt(2)."""
  Q0 = tree_leaves(Q)[0]
  r = jnp.zeros(Q0.shape[-1], dtype=Q0.dtype)

  def body(carry):
    k, q, r, qnorm_scaled = carry
    h = _project_on_columns(Q, q)
    q = _sub(q, tree_map(lambda X: _dot(X, h), Q))
    r = _add(r, h)

    def renorm_cond(c):
      k, not_done, _, _ = c
      return jnp.logical_and(not_done, k < (max_iterations - 1))

    def renorm(c):
      k, _, q, _ = c
      _, qnorm = _safe_normalize(q)
      return k, False, q, qnorm / jnp.sqrt(2.0)

    _, _, q, qnorm_scaled = lax.while_loop(renorm_cond, renorm, (k, True, q, qnorm_scaled))
    return k + 1, q, r, qnorm_scaled

  def cond(carry):
    k, _, r, qnorm_scaled = carry
    _, rnorm = _safe_normalize(r)
    return jnp.logical_and(k < (max_iterations - 1), rnorm < qnorm_scaled)

  carry = body((0, x, r, xnorm / jnp.sqrt(2.0)))
  _, q, r, _ = lax.while_loop(cond, body, carry)
  return q, r


def _kth_arnoldi_iteration(k, A, M, V, H):
  """Arnoldi step k: V[:, k+1] the orthonormalised M(A(V[:, k])), H[k, :] its overlaps;
  a new vector below eps times its norm counts as zero (an invariant subspace: breakdown)."""
  dtype, _ = _lattice_type(V)
  eps = _dtypes.finfo(dtype).eps
  v = M(A(tree_map(lambda X: X[..., k], V)))
  _, v_norm_0 = _safe_normalize(v)
  v, h = _iterative_classical_gram_schmidt(V, v, v_norm_0, max_iterations=2)
  unit_v, v_norm_1 = _safe_normalize(v, thresh=eps * v_norm_0)
  V = tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit_v)
  h = h.at[k + 1].set(v_norm_1.astype(dtype))
  return V, H.at[k, :].set(h), v_norm_1 == 0.


def _rotate_vectors(H, i, cs, sn):
  x1, y1 = H[i], H[i + 1]
  H = H.at[i].set(cs.conj() * x1 - sn.conj() * y1)
  return H.at[i + 1].set(sn * x1 + cs * y1)


def _givens_rotation(a, b):
  b_zero = abs(b) == 0
  a_lt_b = abs(a) < abs(b)
  t = -jnp.where(a_lt_b, a, b) / jnp.where(a_lt_b, b, a)
  r = lax.rsqrt(1 + abs(t) ** 2).astype(t.dtype)
  cs = jnp.where(b_zero, 1, jnp.where(a_lt_b, r * t, r))
  sn = jnp.where(b_zero, 0, jnp.where(a_lt_b, r, r * t))
  return cs, sn


def _apply_givens_rotations(H_row, givens, k):
  """H_row through the k stored rotations, then a new rotation zeroing its element k+1."""
  R_row = lax.fori_loop(0, k, lambda i, row: _rotate_vectors(row, i, *givens[i, :]), H_row)
  factors = _givens_rotation(R_row[k], R_row[k + 1])
  givens = givens.at[k, :].set(factors)
  return _rotate_vectors(R_row, k, *factors), givens


def _krylov_basis(unit_residual, restart):
  return tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)),
                  unit_residual)


def _gmres_incremental(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
  """One GMRES cycle, the QR factorisation of the Hessenberg matrix built by Givens rotations
  as the basis grows (which gives the residual for free: stops early below ``ptol``)."""
  V = _krylov_basis(unit_residual, restart)
  dtype = _dtypes.result_type(*tree_leaves(b))
  R = jnp.eye(restart, restart + 1, dtype=dtype)
  givens = jnp.zeros((restart, 2), dtype=dtype)
  beta_vec = jnp.zeros((restart + 1), dtype=dtype).at[0].set(residual_norm.astype(dtype))

  def cond(carry):
    k, err = carry[0], carry[1]
    return jnp.logical_and(k < restart, err > ptol)

  def step(carry):
    k, _, V, R, beta_vec, givens = carry
    V, H, _ = _kth_arnoldi_iteration(k, A, M, V, R)
    R_row, givens = _apply_givens_rotations(H[k, :], givens, k)
    R = R.at[k, :].set(R_row)
    beta_vec = _rotate_vectors(beta_vec, k, *givens[k, :])
    return k + 1, abs(beta_vec[k + 1]), V, R, beta_vec, givens

  _, _, V, R, beta_vec, _ = lax.while_loop(cond, step, (0, residual_norm, V, R, beta_vec,
                                                        givens))
  y = _sla.solve_triangular(R[:, :-1].T, beta_vec[:-1])
  x = _add(x0, tree_map(lambda X: _dot(X[..., :-1], y), V))
  unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
  return x, unit_residual, residual_norm


def _lstsq(a, b):
  return _sla.solve(_dot(a.T.conj(), a), _dot(a.T.conj(), b), assume_a="pos")


def _gmres_batched(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
  """One GMRES cycle: the whole Arnoldi basis, then the least-squares problem at once."""
  del ptol
  V = _krylov_basis(unit_residual, restart)
  dtype, weak_type = _lattice_type(b)
  H = lax._convert_element_type(jnp.eye(restart, restart + 1, dtype=dtype), weak_type=weak_type)

  def cond(carry):
    _, _, breakdown, k = carry
    return jnp.logical_and(k < restart, jnp.logical_not(breakdown))

  def step(carry):
    V, H, _, k = carry
    V, H, breakdown = _kth_arnoldi_iteration(k, A, M, V, H)
    return V, H, breakdown, k + 1

  V, H, _, _ = lax.while_loop(cond, step, (V, H, False, 0))
  beta_vec = jnp.zeros_like(H, shape=(restart + 1,)).at[0].set(residual_norm.astype(dtype))
  y = _lstsq(H.T, beta_vec)
  x = _add(x0, tree_map(lambda X: _dot(X[..., :-1], y), V))
  unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
  return x, unit_residual, residual_norm


def _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, gmres_func):
  """GMRES cycles from ``x0`` until the preconditioned residual is at most ``atol`` or
  ``maxiter`` cycles have run."""
  unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

  def cond(value):
    _, k, _, residual_norm = value
    return jnp.logical_and(k < maxiter, residual_norm > atol)

  def body(value):
    x, k, unit_residual, residual_norm = value
    x, unit_residual, residual_norm = gmres_func(A, b, x, unit_residual, residual_norm, ptol,
                                                 restart, M)
    return x, k + 1, unit_residual, residual_norm

  return lax.while_loop(cond, body, (x0, 0, unit_residual, residual_norm))[0]


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
  """Solve ``A x = b`` by restarted GMRES (any nonsingular ``A``).

  ``restart`` is the dimension of the Krylov space built per cycle (at most the size of
  ``b``), ``maxiter`` the number of cycles (10 times the size of ``b`` by default).
  ``solve_method`` is ``"batched"`` (solve each cycle's least-squares problem at its end) or
  ``"incremental"`` (Givens rotations as the basis grows, stopping a cycle early). Returns
  ``(x, info)``: ``info`` is -1 when ``x`` is NaN, else 0.
  """
  if x0 is None:
    x0 = tree_map(jnp.zeros_like, b)
  if M is None:
    M = _identity
  A = _normalize_matvec(A)
  M = _normalize_matvec(M)
  b, x0 = device_put((b, x0))
  size = sum(bi.size for bi in tree_leaves(b))
  if maxiter is None:
    maxiter = 10 * size
  restart = min(restart, size)
  if tree_structure(x0) != tree_structure(b):
    raise ValueError("x0 and b must have matching tree structure: "
                     f"{tree_structure(x0)} vs {tree_structure(b)}")
  b_norm = _norm(b)
  atol = jnp.maximum(tol * b_norm, atol)
  ptol = _norm(M(b)) * jnp.minimum(1.0, atol / b_norm)
  if solve_method == "incremental":
    gmres_func = _gmres_incremental
  elif solve_method == "batched":
    gmres_func = _gmres_batched
  else:
    raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' or "
                     "'batched'")

  def solve(A, b):
    return _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, gmres_func)

  x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
  info = jnp.where(jnp.isnan(_norm(x)), -1, 0)
  return x, info
