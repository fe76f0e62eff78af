"""Inexact line search for the strong Wolfe conditions (Wright and Nocedal, *Numerical
Optimization*, 1999, algorithms 3.5 and 3.6), with JAX's choices: the first trial step comes
from the previous decrease, trial steps double, the zoom interpolates cubically, then
quadratically, then bisects, and gives up after 30 steps or when the bracket shrinks below
1e-10 (1e-5 below 64 bits). Both loops are ``lax.while_loop``s, so the search runs under
``jit`` and ``vmap``; branches are selections (``where``), as JAX's.
"""
from typing import NamedTuple

import nbjax.numpy as jnp
from nbjax import api as _api
from nbjax import dtypes as _dtypes
from nbjax import lax
from nbjax.numpy._util import promote_dtypes_inexact


def _dot(a, b):
  return jnp.dot(a, b, precision=lax.Precision.HIGHEST)


def _select(pred, state, **new):
  """``state`` with the named fields replaced by ``new``'s where ``pred`` holds."""
  return state._replace(**{k: jnp.where(pred, v, getattr(state, k)) for k, v in new.items()})


def _cubicmin(a, fa, fpa, b, fb, c, fc):
  """Minimiser of the cubic through (a, fa) with slope fpa at a, (b, fb) and (c, fc)."""
  dtype = _dtypes.result_type(a, fa, fpa, b, fb, c, fc)
  db, dc = b - a, c - a
  denom = (db * dc) ** 2 * (db - dc)
  m = jnp.array([[dc ** 2, -db ** 2], [-dc ** 3, db ** 3]], dtype=dtype)
  rhs = jnp.array([fb - fa - fpa * db, fc - fa - fpa * dc], dtype=dtype)
  A, B = _dot(m, rhs) / denom
  return a + (-B + jnp.sqrt(B * B - 3. * A * fpa)) / (3. * A)


def _quadmin(a, fa, fpa, b, fb):
  """Minimiser of the quadratic through (a, fa) with slope fpa at a and (b, fb)."""
  db = b - a
  B = (fb - fa - fpa * db) / (db ** 2)
  return a - fpa / (2. * B)


class _ZoomState(NamedTuple):
  done: object
  failed: object
  j: object
  a_lo: object
  phi_lo: object
  dphi_lo: object
  a_hi: object
  phi_hi: object
  dphi_hi: object
  a_rec: object
  phi_rec: object
  a_star: object
  phi_star: object
  dphi_star: object
  g_star: object
  nfev: object
  ngev: object


def _zoom(phi_and_grad, armijo_fails, curvature_holds, a_lo, phi_lo, dphi_lo, a_hi, phi_hi,
          dphi_hi, g_0, skip):
  """Algorithm 3.6: shrink the bracket [a_lo, a_hi] to a step meeting both Wolfe conditions
  (no iteration at all where ``skip``)."""
  init = _ZoomState(done=False, failed=False, j=0, a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo,
                    a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi, a_rec=(a_lo + a_hi) / 2.,
                    phi_rec=(phi_lo + phi_hi) / 2., a_star=1., phi_star=phi_lo,
                    dphi_star=dphi_lo, g_star=g_0, nfev=0, ngev=0)
  cubic_margin, quad_margin = 0.2, 0.1

  def body(s):
    width = s.a_hi - s.a_lo
    lo = jnp.minimum(s.a_hi, s.a_lo)
    hi = jnp.maximum(s.a_hi, s.a_lo)
    # a bracket this narrow ends the search, failed (the Wolfe conditions do not hold)
    tiny = 1e-5 if _dtypes.finfo(width.dtype).bits < 64 else 1e-10
    s = s._replace(failed=s.failed | (width <= tiny))

    a_cubic = _cubicmin(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec, s.phi_rec)
    use_cubic = (s.j > 0) & (a_cubic > lo + cubic_margin * width) & (
        a_cubic < hi - cubic_margin * width)
    a_quad = _quadmin(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
    use_quad = (~use_cubic) & (a_quad > lo + quad_margin * width) & (
        a_quad < hi - quad_margin * width)
    use_bisect = (~use_cubic) & (~use_quad)
    a_j = jnp.where(use_cubic, a_cubic, s.a_rec)
    a_j = jnp.where(use_quad, a_quad, a_j)
    a_j = jnp.where(use_bisect, (s.a_lo + s.a_hi) / 2., a_j)

    phi_j, dphi_j, g_j = phi_and_grad(a_j)
    phi_j = phi_j.astype(s.phi_lo.dtype)
    dphi_j = dphi_j.astype(s.dphi_lo.dtype)
    g_j = g_j.astype(s.g_star.dtype)
    s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)

    to_hi = armijo_fails(a_j, phi_j) | (phi_j >= s.phi_lo)
    to_star = curvature_holds(dphi_j) & (~to_hi)
    hi_to_lo = (dphi_j * (s.a_hi - s.a_lo) >= 0.) & (~to_hi) & (~to_star)
    to_lo = (~to_hi) & (~to_star)

    s = _select(to_hi, s, a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s.a_hi,
                phi_rec=s.phi_hi)
    s = _select(to_star, s, a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j)
    s = s._replace(done=to_star | s.done)
    s = _select(hi_to_lo, s, a_hi=s.a_lo, phi_hi=s.phi_lo, dphi_hi=s.dphi_lo, a_rec=s.a_hi,
                phi_rec=s.phi_hi)
    s = _select(to_lo & ~hi_to_lo, s, a_rec=s.a_lo, phi_rec=s.phi_lo)
    s = _select(to_lo, s, a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j)
    s = s._replace(j=s.j + 1)
    return s._replace(failed=s.failed | (s.j >= 30))

  return lax.while_loop(lambda s: (~s.done) & (~skip) & (~s.failed), body, init)


class _LineSearchState(NamedTuple):
  done: object
  failed: object
  i: object
  a_i1: object
  phi_i1: object
  dphi_i1: object
  nfev: object
  ngev: object
  a_star: object
  phi_star: object
  dphi_star: object
  g_star: object


class _LineSearchResults(NamedTuple):
  """failed: the strong Wolfe conditions were not met; nit: iterations; nfev/ngev: function
  and gradient evaluations; k: the final iteration counter; a_k: the step; f_k, g_k: value and
  gradient there; status: 0 passed, 1 zoom failed, 3 too many iterations."""
  failed: object
  nit: object
  nfev: object
  ngev: object
  k: object
  a_k: object
  f_k: object
  g_k: object
  status: object


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
  """A step along the descent direction ``pk`` from ``xk`` meeting the strong Wolfe
  conditions with constants ``c1`` and ``c2`` (algorithm 3.5 of Wright and Nocedal).
  ``old_fval``/``gfk`` are ``f`` and its gradient at ``xk`` when known; ``old_old_fval``, the
  previous value, sets the first trial step."""
  xk, pk = promote_dtypes_inexact(xk, pk)

  def phi_and_grad(t):
    t = jnp.array(t, dtype=pk.dtype)
    value, g = _api.value_and_grad(f)(xk + t * pk)
    return value, jnp.real(_dot(g, pk)), g

  fresh = old_fval is None or gfk is None
  if fresh:
    phi_0, dphi_0, gfk = phi_and_grad(0)
  else:
    phi_0 = old_fval
    dphi_0 = jnp.real(_dot(gfk, pk))
  if old_old_fval is not None:
    guess = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
    start = jnp.where(guess > 1, 1.0, guess)
  else:
    start = 1

  def armijo_fails(a, phi):
    return phi > phi_0 + c1 * a * dphi_0

  def curvature_holds(dphi):
    return jnp.abs(dphi) <= -c2 * dphi_0

  init = _LineSearchState(done=jnp.array(False, dtype=bool), failed=jnp.array(False, dtype=bool),
                          i=1, a_i1=0., phi_i1=phi_0, dphi_i1=dphi_0, nfev=1 if fresh else 0,
                          ngev=1 if fresh else 0, a_star=0., phi_star=phi_0, dphi_star=dphi_0,
                          g_star=gfk)

  def body(s):
    a_i = jnp.where(s.i == 1, start, s.a_i1 * 2.)
    phi_i, dphi_i, g_i = phi_and_grad(a_i)
    s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)

    zoom_above = armijo_fails(a_i, phi_i) | ((phi_i >= s.phi_i1) & (s.i > 1))
    accept = curvature_holds(dphi_i) & (~zoom_above)
    zoom_below = (dphi_i >= 0.) & (~zoom_above) & (~accept)

    z1 = _zoom(phi_and_grad, armijo_fails, curvature_holds, s.a_i1, s.phi_i1, s.dphi_i1,
               a_i, phi_i, dphi_i, gfk, ~zoom_above)
    s = s._replace(nfev=s.nfev + z1.nfev, ngev=s.ngev + z1.ngev)
    z2 = _zoom(phi_and_grad, armijo_fails, curvature_holds, a_i, phi_i, dphi_i, s.a_i1,
               s.phi_i1, s.dphi_i1, gfk, ~zoom_below)
    s = s._replace(nfev=s.nfev + z2.nfev, ngev=s.ngev + z2.ngev)

    s = _select(zoom_above, s, a_star=z1.a_star, phi_star=z1.phi_star,
                dphi_star=z1.dphi_star, g_star=z1.g_star)
    s = s._replace(done=zoom_above | s.done, failed=(zoom_above & z1.failed) | s.failed)
    s = _select(accept, s, a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i)
    s = s._replace(done=accept | s.done)
    s = _select(zoom_below, s, a_star=z2.a_star, phi_star=z2.phi_star,
                dphi_star=z2.dphi_star, g_star=z2.g_star)
    s = s._replace(done=zoom_below | s.done, failed=(zoom_below & z2.failed) | s.failed)
    return s._replace(i=s.i + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)

  s = lax.while_loop(lambda s: (~s.done) & (s.i <= maxiter) & (~s.failed), body, init)

  status = jnp.where(s.failed, jnp.array(1), jnp.where(s.i > maxiter, jnp.array(3),
                                                       jnp.array(0)))
  # below 64 bits a vanishing step would stall the optimiser: keep it at least 1e-8
  a_k = jnp.asarray(s.a_star)
  if _dtypes.finfo(a_k.dtype).bits != 64:
    a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
  return _LineSearchResults(failed=s.failed | (~s.done), nit=s.i - 1, nfev=s.nfev,
                            ngev=s.ngev, k=s.i, a_k=a_k, f_k=s.phi_star, g_k=s.g_star,
                            status=status)

