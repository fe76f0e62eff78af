"""``nbjax.test_util``: public gradient checks (JAX's ``jax.test_util``).

Pipeline position: user-facing utilities on top of ``api``, for checking derivatives (custom
rules especially) in user code and tutorials. ``check_grads(f, args, order)`` compares
forward mode (``jvp``) with central differences along a random direction and reverse mode
(``vjp``) with forward mode through the inner-product identity ``<t, vjp(ct)> == <jvp(t),
ct>``, recursively up to ``order``. Tolerances default to JAX's per-dtype gradient
tolerances and are scaled by the array size, as in JAX. Failures raise ``AssertionError``.
"""
from __future__ import annotations

import functools

import numpy as np

from nbjax import api, dtypes
from nbjax.config import config
from nbjax._tree_util import tree_map, tree_reduce

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

_default_tolerance = {np.dtype(np.bool_): 0, np.dtype(np.int8): 0, np.dtype(np.int16): 0,
                      np.dtype(np.int32): 0, np.dtype(np.int64): 0, np.dtype(np.uint8): 0,
                      np.dtype(np.uint16): 0, np.dtype(np.uint32): 0, np.dtype(np.uint64): 0,
                      np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
                      np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6,
                      np.dtype(np.complex128): 1e-15, dtypes.float0: 0}

default_gradient_tolerance = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
                              np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3,
                              np.dtype(np.complex128): 1e-5}
if dtypes.bfloat16 is not None:
  _default_tolerance[np.dtype(dtypes.bfloat16)] = 1e-2
  default_gradient_tolerance[np.dtype(dtypes.bfloat16)] = 1e-1
# the narrow ml_dtypes types, as JAX 0.10.2's table: integers exact, float8_* 1e-1 (both
# tables), float8_e8m0fnu and float4_e2m1fn 1e0
for _d in dtypes._small_int_dtypes:
  _default_tolerance[_d] = 0
for _d in dtypes._small_float_dtypes:
  if _d.name.startswith("float8") or _d.name == "float4_e2m1fn":
    _default_tolerance[_d] = default_gradient_tolerance[_d] = (
        1e0 if _d.name in ("float8_e8m0fnu", "float4_e2m1fn") else 1e-1)


def default_tolerance():
  return _default_tolerance


def _dtype(x):
  if hasattr(x, "dtype"):
    return np.dtype(x.dtype)
  if type(x) in (bool, int, float, complex):
    return dtypes.dtype(x, canonicalize=True)
  return np.asarray(x).dtype


def _is_python_scalar(x):
  return not isinstance(x, np.generic) and isinstance(x, (bool, int, float, complex))


def tolerance(dtype, tol=None):
  """The tolerance for ``dtype``: ``tol`` if a number, else looked up in ``tol`` (a dict
  by dtype) falling back to the default table."""
  tol = {} if tol is None else tol
  if not isinstance(tol, dict):
    return tol
  tol = {np.dtype(k): v for k, v in tol.items()}
  d = dtypes.canonicalize_dtype(np.dtype(dtype))
  return tol.get(d, _default_tolerance.get(d, 0))


def _merge_tolerance(tol, default):
  if tol is None:
    return default
  if not isinstance(tol, dict):
    return tol
  out = dict(default)
  out.update((np.dtype(k), v) for k, v in tol.items())
  return out


def _assert_close_leaf(a, b, atol=None, rtol=None, err_msg=""):
  a, b = np.asarray(a), np.asarray(b)
  assert a.shape == b.shape, f"{err_msg}: shapes {a.shape} and {b.shape} differ"
  if a.dtype == dtypes.float0 or b.dtype == dtypes.float0:
    assert a.dtype == b.dtype, f"{err_msg}: dtypes {a.dtype} and {b.dtype} differ"
    return
  atol = max(tolerance(a.dtype, atol), tolerance(b.dtype, atol))
  rtol = max(tolerance(a.dtype, rtol), tolerance(b.dtype, rtol))
  kw = {}
  if atol * a.size:
    kw["atol"] = atol * a.size
  if rtol * b.size:
    kw["rtol"] = rtol * b.size
  with np.errstate(invalid="ignore"):
    np.testing.assert_allclose(a, b, **kw, err_msg=err_msg)


def check_close(xs, ys, atol=None, rtol=None, err_msg=""):
  """``xs`` and ``ys`` (pytrees) leafwise close within the (size-scaled) tolerances."""
  tree_map(functools.partial(_assert_close_leaf, atol=atol, rtol=rtol, err_msg=err_msg), xs, ys)


def _check_dtypes_match(xs, ys):
  def check(x, y):
    dx, dy = _dtype(x), _dtype(y)
    if not config._flags["enable_x64"]:
      dx, dy = dtypes.canonicalize_dtype(dx), dtypes.canonicalize_dtype(dy)
    assert dx == dy, f"dtype mismatch: {dx} vs {dy}"
  tree_map(check, xs, ys)


def inner_prod(xs, ys):
  """``sum(real(conj(x) . y))`` over the leaves."""
  def contract(x, y):
    return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
  return tree_reduce(np.add, tree_map(contract, xs, ys))


def _keep_type(f):
  """``f`` on NumPy values, cast back to the first argument's dtype (and to a Python scalar
  when every argument is one)."""
  def g(*args):
    out = np.array(f(*map(np.asarray, args)), dtype=_dtype(args[0]))
    return out.item() if all(map(_is_python_scalar, args)) else out
  return g


_add = functools.partial(tree_map, _keep_type(np.add))
_sub = functools.partial(tree_map, _keep_type(np.subtract))
_conj = functools.partial(tree_map, _keep_type(np.conj))


def _safe_sub(xs, ys):
  """``x - y`` with ``inf - inf == 0``."""
  def f(x, y):
    d = _dtype(x)
    x, y = np.asarray(x), np.asarray(y)
    with np.errstate(invalid="ignore"):
      return np.where(np.equal(x, y), np.array(0, d), np.subtract(x, y, dtype=d))
  return tree_map(f, xs, ys)


def _scalar_mul(xs, a):
  def f(x):
    d = _dtype(x)
    out = np.multiply(np.asarray(x), np.array(a, dtype=d), dtype=d)
    return out.item() if _is_python_scalar(x) else out
  return tree_map(f, xs)


def rand_like(rng, x):
  """A standard-normal value shaped and typed like ``x`` (complex: both parts)."""
  shape, d = np.shape(x), _dtype(x)
  out = np.asarray(rng.randn(*shape), d)
  if dtypes.is_complex(d):
    out = out + d.type(1j) * np.asarray(rng.randn(*shape), d)
  return out.item() if _is_python_scalar(x) else out


def numerical_jvp(f, primals, tangents, eps=EPS):
  """Central differences ``(f(x + eps t) - f(x - eps t)) / (2 eps)``."""
  delta = _scalar_mul(tangents, eps)
  f_pos = f(*_add(primals, delta))
  f_neg = f(*_sub(primals, delta))
  return _scalar_mul(_safe_sub(f_pos, f_neg), 0.5 / eps)


def _msg(err_msg, what):
  return f"{err_msg} {what}" if err_msg else what


def check_jvp(f, f_jvp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
  """Check ``f_jvp`` (usually ``partial(nbjax.jvp, f)``) at ``args`` against central
  differences of ``f`` along one random direction. Raises ``AssertionError``."""
  atol = _merge_tolerance(atol, default_gradient_tolerance)
  rtol = _merge_tolerance(rtol, default_gradient_tolerance)
  rng = np.random.RandomState(0)
  tangent = tree_map(functools.partial(rand_like, rng), args)
  v_out, t_out = f_jvp(args, tangent)
  _check_dtypes_match(v_out, t_out)
  v_expected = f(*args)
  _check_dtypes_match(v_out, v_expected)
  t_expected = numerical_jvp(f, args, tangent, eps=eps)
  check_close(v_out, v_expected, atol=atol, rtol=rtol, err_msg=_msg(err_msg, "primal"))
  check_close(t_out, t_expected, atol=atol, rtol=rtol, err_msg=_msg(err_msg, "tangent"))


def check_vjp(f, f_vjp, args, atol=None, rtol=None, eps=EPS, err_msg=""):
  """Check ``f_vjp`` (usually ``partial(nbjax.vjp, f)``) at ``args``: the cotangent it
  returns for a random output cotangent must project onto a random direction as the
  central-difference jvp does. Raises ``AssertionError``."""
  atol = _merge_tolerance(atol, default_gradient_tolerance)
  rtol = _merge_tolerance(rtol, default_gradient_tolerance)
  rand = functools.partial(rand_like, np.random.RandomState(0))
  v_out, vjpfun = f_vjp(*args)
  v_expected = f(*args)
  check_close(v_out, v_expected, atol=atol, rtol=rtol, err_msg=_msg(err_msg, "primal"))
  tangent = tree_map(rand, args)
  tangent_out = numerical_jvp(f, args, tangent, eps=eps)
  cotangent = tree_map(rand, v_out)
  cotangent_out = _conj(vjpfun(_conj(cotangent)))
  ip = inner_prod(tangent, cotangent_out)
  ip_expected = inner_prod(tangent_out, cotangent)
  check_close(ip, ip_expected, atol=atol, rtol=rtol,
              err_msg=_msg(err_msg, "cotangent projection"))


def _jvp_from_lin(f, primals, tangents):
  out, f_lin = api.linearize(f, *primals)
  return out, f_lin(*tangents)


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
  """Check ``f``'s derivatives at ``args`` up to ``order`` against finite differences.

  ``modes``: ``"fwd"`` (jvp vs central differences), ``"rev"`` (vjp vs the same, through
  the inner-product identity), ``"lin"`` (linearize). For ``order > 1`` the derivative
  functions themselves are checked recursively (forward-over-forward, reverse-over-reverse).
  Directions are random but fixed (seed 0). Raises ``AssertionError`` on a mismatch.

  >>> check_grads(nbjax.numpy.sin, (0.5,), order=2)
  """
  args = tuple(args)
  eps = eps or EPS
  _check_jvp = functools.partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
  _check_vjp = functools.partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

  def _check(f, args, order, err_msg=""):
    if "fwd" in modes:
      msg = f"JVP of {err_msg}" if err_msg else "JVP"
      _check_jvp(f, functools.partial(api.jvp, f), args, err_msg=msg)
      if order > 1:
        _check(functools.partial(api.jvp, f), (args, args), order - 1, msg)
    if "rev" in modes:
      msg = f"VJP of {err_msg}" if err_msg else "VJP"
      _check_vjp(f, functools.partial(api.vjp, f), args, err_msg=msg)
      if order > 1:
        def f_vjp(*args):
          out, vjp_fun = api.vjp(f, *args)
          return vjp_fun(out)
        _check(f_vjp, args, order - 1, msg)
    if "lin" in modes:
      msg = f"LIN of {err_msg}" if err_msg else "LIN"
      _check_jvp(f, functools.partial(_jvp_from_lin, f), args, err_msg=msg)
      if order > 1:
        _check(functools.partial(_jvp_from_lin, f), (args, args), order - 1, msg)

  _check(f, args, order)
