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

import math
import threading

import numpy as np

from kernels import linalg_more as K
from nbjax import core
from nbjax.array import Array
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad
from nbjax.lax.linalg import (_LTOL, _H, _T, _aval, _flat, _lax, _linalg_batch, _linalg_dtypes,
                              _mm, _rand, _real_dtype, _register, _sorted)

_NAMES = "floating, complexfloating"


def _check(name, avals, ranks=None):
  """JAX's linalg_primitive checks: dtype (float/complex), rank, equal batch dims, one dtype.
  Returns the batch shape."""
  ranks = ranks or (2,) * len(avals)
  for i, a in enumerate(avals):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {a!r}")
    if a.dtype not in _linalg_dtypes:
      raise TypeError(f"{name} does not accept dtype {a.dtype.name} at position {i}. Accepted "
                      f"dtypes at position {i} are subtypes of {_NAMES}.")
  for i, (a, r) in enumerate(zip(avals, ranks)):
    if a.ndim < r:
      raise TypeError(f"Input {i} to {name} must have rank at least {r}, but got "
                      f"shape={a.shape}")
  batch = avals[0].shape[:avals[0].ndim - ranks[0]]
  for a, r in zip(avals, ranks):
    if a.shape[:a.ndim - r] != batch:
      raise TypeError(f"All inputs to {name} must have the same batch dimensions, got "
                      f"{[x.shape[:x.ndim - rr] for x, rr in zip(avals, ranks)]}.")
  if len({a.dtype for a in avals}) > 1:
    raise TypeError(f"{name} requires arguments to have the same dtypes, got "
                    f"{', '.join(a.dtype.name for a in avals)}.")
  return batch


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
  p = dict(compute_schur_vectors=True, sort_eig_vals=False, select_callable=None)
  return [([Array(np.ones((2, 3)))], p, ValueError),
          ([Array(np.ones((2, 2), np.int32))], p, TypeError),
          ([Array(np.ones((3,)))], p, TypeError)]


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
  return [([Array(np.ones((2, 3)))], {}, ValueError),
          ([Array(np.ones((2, 2), np.int32))], {}, TypeError),
          ([Array(np.ones((3,)))], {}, TypeError)]


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


__all__ = ["schur", "schur_p", "hessenberg", "hessenberg_p"]


# ====================================================================== lowering (FFI)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import hlo, ir, mlir  # noqa: E402
from nbjax import xla  # noqa: E402

_HEAD = """
import numpy as np
from numba import cfunc, types
from kernels import linalg_more as K
from kernels.ffi import (ffi_metadata_query, arg_rank, arg_dim, ret_dim, arg_flat, ret_flat)
"""

_BATCH = """
  if ffi_metadata_query(cf):
    return 0
  r = arg_rank(cf, 0)
  m = arg_dim(cf, 0, r - 2)
  n = arg_dim(cf, 0, r - 1)
  B = 1
  for i in range(r - 2):
    B *= arg_dim(cf, 0, i)
  a = arg_flat(cf, 0, DT, B * m * n).reshape((B, m, n))
"""

_BODIES = {
    "schur": """
  fl = arg_flat(cf, 1, np.int32, 1)
  vecs = fl[0] != 0
  t = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  vs = ret_flat(cf, 1, DT, B * n * n).reshape((B, n, n)) if vecs else np.empty((B, 0, 0), DT)
  if B > 0 and n > 0:
    K.schur(a, t, vs, vecs)
  return 0
""",
    "hessenberg": """
  k = n - 1 if n > 0 else 0
  out = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  taus = ret_flat(cf, 1, DT, B * k).reshape((B, k))
  if B > 0:
    K.hessenberg(a, out, taus)
  return 0
""",
}

_handlers = {}
_lock = threading.Lock()


def _target(name, dtype):
  """Register (once) and return the FFI target name for ``name``'s kernel at ``dtype``."""
  d = np.dtype(dtype)
  key = (name, d)
  with _lock:
    if key in _handlers:
      return _handlers[key]
    fn = f"nbjax_{name}_{d.name}"
    src = (_HEAD + f"DT = np.{d.name}\nRT = np.{_real_dtype(d).name}\n"
           + f"@cfunc(types.int64(types.voidptr), nopython=True, cache=True)\ndef {fn}(cf):"
           + _BATCH + _BODIES[name])
    ns = {"__name__": __name__}
    exec(compile(src, __file__, "exec"), ns)
    xla.register_ffi_target(fn, ns[fn])
    _handlers[key] = fn
    return fn


def _ffi_call(name, dtype, operands, result_avals):
  op = hlo.CustomCallOp.build_generic(
      results=mlir.aval_to_ir_types(result_avals), operands=list(operands),
      attributes=dict(call_target_name=ir.StringAttr.get(_target(name, dtype)),
                      has_side_effect=ir.BoolAttr.get(False), api_version=mlir.i32_attr(4),
                      backend_config=ir.DictAttr.get({}),
                      called_computations=ir.ArrayAttr.get([])))
  return list(op.results)


def _zeros_out(ctx):
  return [mlir.full_like_aval(ctx, 0, a) for a in ctx.avals_out]


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


lowering.register("schur", _schur_lowering)
lowering.register("hessenberg", _hessenberg_lowering)
