"""``scipy.optimize.minimize`` with JAX's methods: BFGS (Wright and Nocedal, algorithm 6.1)
and JAX's experimental L-BFGS (algorithm 7.5, generalised to complex variables as Sorber et
al., 2012). Gradients come from ``value_and_grad``; each method is one ``lax.while_loop``
around the strong-Wolfe line search, so ``minimize`` runs under ``jit`` and ``vmap``.
"""
from typing import NamedTuple

import numpy as np

import nbjax.numpy as jnp
from nbjax import api as _api
from nbjax import dtypes as _dtypes
from nbjax import lax
from nbjax.scipy.optimize._line_search import line_search


class OptimizeResults(NamedTuple):
  """What ``minimize`` returns.

  x: the solution found; success: whether it converged; status: the solver's code (0
  converged, 1 iteration limit; BFGS: 2 + the line search's status when it failed, -1
  undefined; L-BFGS: 2/3 function/gradient evaluation limits, 4 too little progress, 5 line
  search failed); fun, jac: the value and gradient at x; hess_inv: BFGS's inverse Hessian
  estimate (None for L-BFGS); nfev, njev: evaluations of the function and its gradient; nit:
  iterations.
  """
  x: object
  success: object
  status: object
  fun: object
  jac: object
  hess_inv: object
  nfev: object
  njev: object
  nit: object


def _dot(a, b):
  return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


class _BFGSState(NamedTuple):
  converged: object
  failed: object
  k: object
  nfev: object
  ngev: object
  nhev: object
  x_k: object
  f_k: object
  g_k: object
  H_k: object
  old_old_fval: object
  status: object
  line_search_status: object


def _minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
  if maxiter is None:
    maxiter = np.size(x0) * 200
  d = x0.shape[0]
  f_0, g_0 = _api.value_and_grad(fun)(x0)
  init = _BFGSState(converged=jnp.linalg.norm(g_0, ord=norm) < gtol, failed=False, k=0,
                    nfev=1, ngev=1, nhev=0, x_k=x0, f_k=f_0, g_k=g_0,
                    H_k=jnp.eye(d, dtype=x0.dtype),
                    old_old_fval=f_0 + jnp.linalg.norm(g_0) / 2, status=0,
                    line_search_status=0)

  def cond(s):
    return jnp.logical_not(s.converged) & jnp.logical_not(s.failed) & (s.k < maxiter)

  def body(s):
    p_k = -_dot(s.H_k, s.g_k)
    ls = line_search(fun, s.x_k, p_k, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                     gfk=s.g_k, maxiter=line_search_maxiter)
    s = s._replace(nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, failed=ls.failed,
                   line_search_status=ls.status)
    s_k = ls.a_k * p_k
    y_k = ls.g_k - s.g_k
    rho_k = jnp.reciprocal(_dot(y_k, s_k))
    # H+ = (I - rho s y^T) H (I - rho y s^T) + rho s s^T, skipped when y.s vanishes
    w = jnp.eye(d, dtype=rho_k.dtype) - rho_k * (s_k[:, None] * y_k[None, :])
    H = (jnp.einsum("ij,jk,lk", w, s.H_k, w, precision=lax.Precision.HIGHEST)
         + rho_k * s_k[:, None] * s_k[None, :])
    H = jnp.where(jnp.isfinite(rho_k), H, s.H_k)
    return s._replace(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, k=s.k + 1,
                      x_k=s.x_k + s_k, f_k=ls.f_k, g_k=ls.g_k, H_k=H, old_old_fval=s.f_k)

  s = lax.while_loop(cond, body, init)
  status = jnp.where(s.converged, 0,
                     jnp.where(s.k == maxiter, 1,
                               jnp.where(s.failed, 2 + s.line_search_status, -1)))
  return s._replace(status=status)


class _LBFGSState(NamedTuple):
  converged: object
  failed: object
  k: object
  nfev: object
  ngev: object
  x_k: object
  f_k: object
  g_k: object
  s_history: object
  y_history: object
  rho_history: object
  gamma: object
  status: object
  ls_status: object


def _minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10, ftol=2.220446049250313e-09,
                    gtol=1e-05, maxfun=None, maxgrad=None, maxls=20):
  d = len(x0)
  dtype = _dtypes.dtype(x0)
  if maxiter is None and maxfun is None and maxgrad is None:
    maxiter = d * 200
  maxiter = np.inf if maxiter is None else maxiter
  maxfun = np.inf if maxfun is None else maxfun
  maxgrad = np.inf if maxgrad is None else maxgrad

  f_0, g_0 = _api.value_and_grad(fun)(x0)
  init = _LBFGSState(converged=jnp.array(False, dtype=bool),
                     failed=jnp.array(False, dtype=bool), k=0, nfev=1, ngev=1, x_k=x0,
                     f_k=f_0, g_k=g_0, s_history=jnp.zeros((maxcor, d), dtype=dtype),
                     y_history=jnp.zeros((maxcor, d), dtype=dtype),
                     rho_history=jnp.zeros((maxcor,), dtype=dtype), gamma=1., status=0,
                     ls_status=0)

  def body(s):
    p_k = _two_loop_recursion(s)
    ls = line_search(f=fun, xk=s.x_k, pk=p_k, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
    s_k = jnp.asarray(ls.a_k).astype(p_k.dtype) * p_k
    x_kp1 = s.x_k + s_k
    y_k = ls.g_k - s.g_k
    ys = jnp.real(_dot(y_k, s_k))
    rho_k = jnp.reciprocal(ys).astype(y_k.dtype)
    gamma = ys / jnp.real(_dot(jnp.conj(y_k), y_k))

    status = jnp.array(0)
    status = jnp.where(s.f_k - ls.f_k < ftol, 4, status)
    status = jnp.where(s.ngev >= maxgrad, 3, status)
    status = jnp.where(s.nfev >= maxfun, 2, status)
    status = jnp.where(s.k >= maxiter, 1, status)
    status = jnp.where(ls.failed, 5, status)
    converged = jnp.linalg.norm(ls.g_k, ord=norm) < gtol
    return s._replace(
        converged=converged, failed=(status > 0) & (~converged), k=s.k + 1,
        nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, x_k=x_kp1.astype(s.x_k.dtype),
        f_k=ls.f_k.astype(s.f_k.dtype), g_k=ls.g_k.astype(s.g_k.dtype),
        s_history=jnp.roll(s.s_history, -1, axis=0).at[-1, :].set(s_k),
        y_history=jnp.roll(s.y_history, -1, axis=0).at[-1, :].set(y_k),
        rho_history=jnp.roll(s.rho_history, -1, axis=0).at[-1].set(rho_k),
        gamma=gamma.astype(s.g_k.dtype), status=jnp.where(converged, 0, status),
        ls_status=ls.status)

  return lax.while_loop(lambda s: (~s.converged) & (~s.failed), body, init)


def _two_loop_recursion(s):
  """The L-BFGS direction -H g from the stored (s, y, rho) pairs, newest last."""
  dtype = s.rho_history.dtype
  m = len(s.rho_history)
  used = jnp.where(s.k < m, s.k, m)

  def backward(j, carry):
    q, alphas = carry
    i = m - 1 - j
    a_i = s.rho_history[i] * _dot(jnp.conj(s.s_history[i]), q).real.astype(dtype)
    return q - a_i * jnp.conj(s.y_history[i]), alphas.at[i].set(a_i)

  q, alphas = lax.fori_loop(0, used, backward,
                            (-jnp.conj(s.g_k), jnp.zeros_like(s.rho_history)))
  q = s.gamma * q

  def forward(j, q):
    i = m - used + j
    b_i = s.rho_history[i] * _dot(s.y_history[i], q).real.astype(dtype)
    return q + (alphas[i] - b_i) * s.s_history[i]

  return lax.fori_loop(0, used, forward, q)


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
  """Minimise ``fun(x, *args)`` over a 1-D real array ``x`` from ``x0``.

  ``method`` is ``"BFGS"`` or ``"l-bfgs-experimental-do-not-rely-on-this"`` (any case).
  ``tol`` is accepted and ignored, as in JAX: tolerances are ``options`` of each method
  (BFGS: ``maxiter``, ``norm``, ``gtol``, ``line_search_maxiter``; L-BFGS: ``maxiter``,
  ``norm``, ``maxcor``, ``ftol``, ``gtol``, ``maxfun``, ``maxgrad``, ``maxls``). Gradients
  come from automatic differentiation. Returns ``OptimizeResults``.
  """
  if options is None:
    options = {}
  if not isinstance(args, tuple):
    raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")

  def fun_with_args(x):
    return fun(x, *args)

  if method.lower() == "bfgs":
    r = _minimize_bfgs(fun_with_args, x0, **options)
    return OptimizeResults(x=r.x_k, success=r.converged & jnp.logical_not(r.failed),
                           status=r.status, fun=r.f_k, jac=r.g_k, hess_inv=r.H_k, nfev=r.nfev,
                           njev=r.ngev, nit=r.k)
  if method.lower() == "l-bfgs-experimental-do-not-rely-on-this":
    r = _minimize_lbfgs(fun_with_args, x0, **options)
    return OptimizeResults(x=r.x_k, success=r.converged & jnp.logical_not(r.failed),
                           status=r.status, fun=r.f_k, jac=r.g_k, hess_inv=None, nfev=r.nfev,
                           njev=r.ngev, nit=r.k)
  raise ValueError(f"Method {method} not recognized")
