"""``nbjax.numpy.linalg``: norms, solves, inverses, determinants and decompositions.

Pipeline position: NumPy's linalg signatures over the decomposition primitives of
``nbjax.lax.linalg`` (``lu``, ``triangular_solve``, ``cholesky``, ``qr``, ``eigh``,
``eig``, ``svd``); ``solve``/``inv``/``det``/``slogdet`` are built from the pivoted LU. Leading
axes are batch axes throughout.
"""
from __future__ import annotations

import functools
import math
import operator
from typing import NamedTuple

import numpy as np

from nbjax import core, dtypes, lax
from nbjax.array import Array
from nbjax.core import _ctx, eval_trace as _EVAL
from nbjax.registry import quiet_run
from nbjax.custom_derivatives import custom_jvp
from nbjax.lax.elementwise import binary_power
from nbjax.numpy import (_creation, _dot, _indexing, _manip, _numerics, _reductions, _ufuncs,
                         _util, _vectorize)
from nbjax.numpy._util import canonicalize_axis, ensure_arraylike
from nbjax.eager_cache import staged


class EigResult(NamedTuple):
  eigenvalues: object
  eigenvectors: object


class EighResult(NamedTuple):
  eigenvalues: object
  eigenvectors: object


class SVDResult(NamedTuple):
  U: object
  S: object
  Vh: object


class SlogdetResult(NamedTuple):
  sign: object
  logabsdet: object


class QRResult(NamedTuple):
  Q: object
  R: object


_SQUARE_MSG = {"inv": "Argument to inv must have shape [..., n, n], got {}.",  # (JAX's)
               "slogdet": "Argument to slogdet() must have shape [..., n, n], got {}"}


def _square(name, a):
  a = ensure_arraylike(name, a)
  a, = _util.promote_dtypes_inexact(a)
  if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
    raise ValueError(_SQUARE_MSG[name].format(a.shape) if name in _SQUARE_MSG else
                     f"{name}: argument must be a square matrix or stack of square matrices, "
                     f"got shape {a.shape}")
  return a


def _lu(a):
  return lax.linalg.lu(a)


def _parity(pivots):
  """``True`` where the row swaps of ``pivots`` form an odd permutation."""
  n = pivots.shape[-1]
  iota = _util.broadcast_to(lax.iota(pivots.dtype, n), pivots.shape)
  swaps = _reductions.sum(lax.ne(pivots, iota), axis=-1)
  return lax.ne(lax.rem(swaps, _util.lit(2, swaps.dtype, True)), _util.lit(0, swaps.dtype, True))


def _diag(a):
  return _indexing.diagonal(a, 0, -2, -1)


@staged
def det(a):
  """Determinant: the cofactor expansion for 2x2 and 3x3 matrices (exact, and so are its
  derivatives at singular matrices), else the pivoted LU factorization, differentiated by
  ``_cofactor_solve`` (finite at singular matrices too)."""
  a = ensure_arraylike("jnp.linalg.det", a)
  a, = _util.promote_dtypes_inexact(a)
  if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
    raise ValueError(f"Argument to _det() must have shape [..., n, n], got {a.shape}")
  e = lambda i, j: a[..., i, j]
  if a.shape[-1] == 2:
    return e(0, 0) * e(1, 1) - e(0, 1) * e(1, 0)
  if a.shape[-1] == 3:
    return (e(0, 0) * e(1, 1) * e(2, 2) + e(0, 1) * e(1, 2) * e(2, 0)
            + e(0, 2) * e(1, 0) * e(2, 1) - e(0, 2) * e(1, 1) * e(2, 0)
            - e(0, 0) * e(1, 2) * e(2, 1) - e(0, 1) * e(1, 0) * e(2, 2))
  return _det_lu(a)


def _det_lu_fn(a):
  lu, pivots, _ = _lu(a)
  d = _reductions.prod(_diag(lu), axis=-1)
  return _manip.where(_parity(pivots), lax.neg(d), d)


_det_lu = custom_jvp(_det_lu_fn)


@_det_lu.defjvp
def _det_lu_jvp(primals, tangents):
  d, z = _cofactor_solve(primals[0], tangents[0])
  return d, _reductions.sum(_diag(z), axis=-1)


def _cofactor_solve(a, b):
  """``(det(a), adj(a) @ b)``, finite for singular ``a``: with ``a = P L U``,
  ``adj(a) @ b = det(a) U^-1 L^-1 P^T b``; U's last pivot is replaced by the inverse of the
  product of the others, which makes the last row exact for rank n-1; where even that solve
  blows up (rank < n-1) the adjugate is zero."""
  n = a.shape[-1]
  if n == 1:
    return a[..., 0, 0], b
  lu, pivots, perm = _lu(a)
  sign = _manip.where(_parity(pivots), _util.lit(-1, a.dtype, True), _util.lit(1, a.dtype, True))
  partial_det = _reductions.cumprod(_diag(lu), axis=-1) * sign[..., None]
  lu = lu.at[..., -1, -1].set(1 / partial_det[..., -2])
  ones = _creation.ones(b.shape[:-1], b.dtype)
  bad = lax.linalg.triangular_solve(lu, ones[..., None], left_side=True, lower=False)[..., 0]
  bad = _reductions.any(_ufuncs.logical_not(_ufuncs.isfinite(bad)), axis=-1)[..., None, None]
  x = _manip.where(bad, _creation.zeros_like(b), b)
  x = _indexing.take_along_axis(x, lax.expand_dims(perm, (perm.ndim,)), axis=-2)
  x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
  x = _manip.concatenate((x[..., :-1, :] * partial_det[..., -1, None, None], x[..., -1:, :]),
                         axis=-2)
  x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=False)
  return partial_det[..., -1], _manip.where(bad, _creation.zeros_like(x), x)


@staged
def slogdet(a, *, method=None):
  """Sign (a unit complex number for complex input) and log of the absolute determinant."""
  a = _square("slogdet", a)
  if method not in (None, "lu", "qr"):
    raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' (`None`), "
                     "and 'qr'.")
  lu, pivots, _ = _lu(a)
  diag = _diag(lu)
  absdiag = lax.abs(diag)
  logdet = _reductions.sum(lax.log(absdiag), axis=-1)
  if dtypes.is_complex(a.dtype):
    unit = _manip.where(lax.eq(absdiag, _util.lit(0, absdiag.dtype, True)),
                     lax.full_like(diag, 0),
                     lax.div(diag, lax.convert_element_type(absdiag, diag.dtype)))
    sign = _reductions.prod(unit, axis=-1)
  else:
    sign = _reductions.prod(lax.sign(diag), axis=-1)
  sign = _manip.where(_parity(pivots), lax.neg(sign), sign)
  zero = _reductions.any(lax.eq(absdiag, _util.lit(0, absdiag.dtype, True)), axis=-1)
  logdet = _manip.where(zero, lax.full_like(logdet, -np.inf), logdet)
  return SlogdetResult(sign, logdet)


@staged
def solve(a, b):
  """Solve ``a @ x = b``; ``b`` is a vector when 1-d, else a (batch of) matrices (NumPy 2)."""
  a, b = ensure_arraylike("jnp.linalg.solve", a, b)
  a, b = _util.promote_dtypes_inexact(a, b)
  if a.ndim < 2:  # (JAX's errors, its vectorize's for the core dimensions)
    raise ValueError(f"left hand array must be at least two dimensional; got a.shape={a.shape}")
  if b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1] != b.shape[-2]:
    raise ValueError(f"Invalid shapes for solve: {a.shape}, {b.shape}. Prior to JAX v0.5.0, this "
                     "would have been treated as a batched 1-dimensional solve. To recover this "
                     "behavior, use solve(a, b[..., None]).squeeze(-1).")
  sig = "(m,m),(m)->(m)" if b.ndim == 1 else "(m,m),(m,n)->(m,n)"
  _vectorize._core_sizes((a, b), _vectorize._parse_signature(sig)[0],
                         f"on vectorized function with excluded=frozenset() and signature={sig!r}")
  vec = b.ndim == 1
  if vec:
    b = lax.reshape(b, b.shape + (1,))
  batch = _util.broadcast_shapes(a.shape[:-2], b.shape[:-2])
  a = _util.broadcast_to(a, batch + a.shape[-2:])
  b = _util.broadcast_to(b, batch + b.shape[-2:])
  lu, _, perm = _lu(a)
  bp = _indexing.take_along_axis(b, lax.expand_dims(perm, (perm.ndim,)), axis=-2)
  y = lax.linalg.triangular_solve(lu, bp, left_side=True, lower=True, unit_diagonal=True)
  x = lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
  return lax.squeeze(x, (x.ndim - 1,)) if vec else x


@staged
def inv(a):
  """Matrix inverse (``solve(a, I)``)."""
  a = _square("inv", a)
  eye = _util.broadcast_to(_creation.eye(a.shape[-1], dtype=a.dtype), a.shape)
  return solve(a, eye)


def cholesky(a, *, upper=False, symmetrize_input=True):
  """Cholesky factor ``L`` (lower; ``upper=True`` gives ``L^H``) of a Hermitian PD matrix."""
  a = _square("cholesky", a)
  L = lax.linalg.cholesky(a, symmetrize_input=symmetrize_input)
  if upper:
    L = _manip.matrix_transpose(lax.conj(L) if dtypes.is_complex(L.dtype) else L)
  return L


def qr(a, mode="reduced"):
  """QR decomposition (``mode``: 'reduced' (also 'full', NumPy's old name), 'complete',
  'r', or 'raw': LAPACK's packed form ``(h, tau)``, ``h`` the transposed ?geqrf result)."""
  a = ensure_arraylike("qr", a)
  a, = _util.promote_dtypes_inexact(a)
  if mode == "raw":
    from nbjax.lax._linalg_more import geqrf
    h, taus = geqrf(a)
    return QRResult(_manip.matrix_transpose(h), taus)
  if mode not in ("reduced", "complete", "r", "full"):
    raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
  q, r = lax.linalg.qr(a, full_matrices=mode == "complete")
  return r if mode == "r" else QRResult(q, r)


def eig(a):
  """Eigenvalues and right eigenvectors of a general square matrix (complex: complex64 for
  32-bit input, complex128 for 64-bit), LAPACK's order; ``eigenvectors[..., :, i]`` belongs
  to ``eigenvalues[..., i]`` and has unit 2-norm."""
  a = ensure_arraylike("jnp.linalg.eig", a)
  a, = _util.promote_dtypes_inexact(a)
  w, v = lax.linalg.eig(a, compute_left_eigenvectors=False)
  return EigResult(w, v)


def eigvals(a):
  """Eigenvalues of a general square matrix (complex: complex64 for 32-bit input,
  complex128 for 64-bit), LAPACK's order."""
  a = ensure_arraylike("jnp.linalg.eigvals", a)
  a, = _util.promote_dtypes_inexact(a)
  return lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


def eigh(a, UPLO=None, symmetrize_input=True):
  """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix."""
  a = _square("eigh", a)
  if UPLO not in (None, "L", "U"):
    raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
  v, w = lax.linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
  return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
  """Eigenvalues (ascending) of a Hermitian matrix."""
  return eigh(a, UPLO, symmetrize_input).eigenvalues


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
  """Singular value decomposition ``a = U @ diag(S) @ Vh`` (``S`` descending). With
  ``hermitian``, of the Hermitian part ``(a + a^H) / 2`` (as JAX's, which factors it by
  ``eigh``)."""
  a = ensure_arraylike("svd", a)
  a, = _util.promote_dtypes_inexact(a)
  if hermitian:
    a = (a + _ufuncs.conj(_manip.matrix_transpose(a))) / 2
  if not compute_uv:
    return lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=False)
  u, s, vh = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
  return SVDResult(u, s, vh)


def svdvals(x, /):
  """Singular values (descending)."""
  return svd(x, compute_uv=False)


@staged
def matrix_power(a, n):
  """``a`` raised to the integer power ``n`` by repeated squaring (``inv`` for ``n < 0``)."""
  a = ensure_arraylike("matrix_power", a)
  if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
    raise ValueError(f"matrix_power: argument must be a square matrix, got shape {a.shape}")
  try:
    n = operator.index(n)
  except TypeError as err:
    raise TypeError(f"exponent must be an integer, got {n}") from err
  if n == 0:
    return _util.broadcast_to(_creation.eye(a.shape[-1], dtype=a.dtype), a.shape)
  if n < 0:
    a, n = inv(a), -n
  return binary_power(a, n, _dot.matmul)


def _abs2(x):
  return lax.real(lax.mul(x, lax.conj(x))) if dtypes.is_complex(x.dtype) else lax.integer_pow(x, 2)


def _vector_norm(x, ord, axis, keepdims):
  ax = axis if isinstance(axis, tuple) else (axis,)
  if ord is None or ord == 2:
    return lax.sqrt(_reductions.sum(_abs2(x), axis=ax, keepdims=keepdims))
  if ord == np.inf:  # (0 for an empty vector, as JAX's)
    return _reductions.max(lax.abs(x), axis=ax, keepdims=keepdims, initial=0)
  if ord == -np.inf:
    return _reductions.min(lax.abs(x), axis=ax, keepdims=keepdims)
  if ord == 0:
    nz = lax.ne(x, _util.lit(0, x.dtype, True))
    return _reductions.sum(nz, axis=ax, keepdims=keepdims, dtype=np.finfo(x.dtype).dtype)
  if ord == 1:
    return _reductions.sum(lax.abs(x), axis=ax, keepdims=keepdims)
  if isinstance(ord, str):
    raise ValueError(f"Invalid order '{ord}' for vector norm.")
  a = lax.abs(x)
  p = _util.lit(ord, a.dtype, True)
  return _ufuncs.power(_reductions.sum(_ufuncs.power(a, p), axis=ax, keepdims=keepdims),
                   lax.div(_util.lit(1, a.dtype, True), p))


def _matrix_norm(x, ord, axis, keepdims):
  r, c = axis
  if ord in (None, "fro", "f"):
    return lax.sqrt(_reductions.sum(_abs2(x), axis=axis, keepdims=keepdims))
  if ord in (1, -1, np.inf, -np.inf):
    sum_ax, red_ax = (r, c) if ord in (1, -1) else (c, r)
    s = _reductions.sum(lax.abs(x), axis=sum_ax, keepdims=keepdims)
    red_ax = red_ax if keepdims or red_ax < sum_ax else red_ax - 1
    if ord in (1, np.inf):  # (0 for an empty matrix, as JAX's)
      return _reductions.max(s, axis=red_ax, keepdims=keepdims, initial=0)
    return _reductions.min(s, axis=red_ax, keepdims=keepdims)
  if ord in (2, -2, "nuc"):
    y = _manip.moveaxis(x, (r, c), (-2, -1))
    s = svd(y, compute_uv=False)
    out = (_reductions.max(s, -1, initial=0) if ord == 2 else
           _reductions.min(s, -1) if ord == -2 else _reductions.sum(s, -1))
    if keepdims:
      out = lax.expand_dims(out, tuple(sorted((r, c))))
    return out
  raise ValueError(f"Invalid order '{ord}' for matrix norm.")


_BLAS_REAL = frozenset(map(np.dtype, (np.float32, np.float64)))


def _sqrt_dot(v):
  return np.sqrt(np.dot(v, v))


def _norm_eager(general):
  """Eagerly, the 2-norm of a whole float32/float64 Array (``ord`` None, or 2 of a vector;
  ``axis`` None) is NumPy's: the square root of BLAS's dot, one pass where the composite
  squares and then sums (10^6 float32: 131 -> ~50 us); anything else the staged composite."""
  @functools.wraps(general)
  def norm(x, ord=None, axis=None, keepdims=False):
    if type(x) is Array and axis is None and (ord is None or x.ndim == 1 and ord == 2) and \
        _ctx.trace is _EVAL and not core.placement[0] and x.dtype in _BLAS_REAL:
      v = x._value.reshape(-1)
      r = quiet_run(_sqrt_dot, v)  # (overflow to inf without NumPy's warning, as JAX)
      return Array._new(np.full((1,) * x.ndim if keepdims else (), r, v.dtype))  # (strong: a sum)
    return general(x, ord, axis, keepdims)
  return norm


@_norm_eager
@staged
def norm(x, ord=None, axis=None, keepdims=False):
  """Vector or matrix norm (NumPy's ``ord`` conventions)."""
  x = ensure_arraylike("norm", x)
  x, = _util.promote_dtypes_inexact(x)
  nd = x.ndim
  if axis is None:
    if ord is None:
      return _vector_norm(x, None, tuple(range(nd)), keepdims)
    axis = tuple(range(nd))
    if nd not in (1, 2):
      raise ValueError("Improper number of dimensions to norm.")
  axis = axis if isinstance(axis, (tuple, list)) else (axis,)
  axis = tuple(canonicalize_axis(a, nd) for a in axis)
  if len(axis) == 1:
    return _vector_norm(x, ord, axis[0], keepdims)
  if len(axis) == 2:
    return _matrix_norm(x, ord, axis, keepdims)
  raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis to compute a "
                   "vector-norm, or two axes to compute a matrix-norm.")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
  """Array-API vector norm over ``axis`` (all axes by default)."""
  x = ensure_arraylike("vector_norm", x)
  x, = _util.promote_dtypes_inexact(x)
  axis = tuple(range(x.ndim)) if axis is None else axis
  return _vector_norm(x, ord, axis if isinstance(axis, tuple) else axis, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
  """Array-API matrix norm over the last two axes."""
  x = ensure_arraylike("matrix_norm", x)
  x, = _util.promote_dtypes_inexact(x)
  return _matrix_norm(x, ord, (x.ndim - 2, x.ndim - 1), keepdims)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
  """Array-API ``linalg.matmul``: ``jnp.matmul``."""
  return _dot.matmul(x1, x2, precision=precision, preferred_element_type=preferred_element_type)


def outer(x1, x2, /):
  """Array-API ``linalg.outer``: ``jnp.outer`` of two 1-d arrays."""
  x1, x2 = ensure_arraylike("jnp.linalg.outer", x1, x2)
  if x1.ndim != 1 or x2.ndim != 1:
    raise ValueError("Input arrays must be one-dimensional, but they are "
                     f"x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
  return _dot.outer(x1, x2)


def trace(x, /, *, offset=0, dtype=None):
  """Array-API ``linalg.trace``: trace of the last two axes."""
  return _indexing.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


def matrix_transpose(x, /):
  """Transpose of the last two axes."""
  x = ensure_arraylike("jnp.linalg.matrix_transpose", x)
  if x.ndim < 2:
    raise ValueError(f"matrix_transpose requires at least 2 dimensions; got ndim={x.ndim}")
  return _manip.matrix_transpose(x)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
  """Array-API ``linalg.tensordot``: ``jnp.tensordot``."""
  return _dot.tensordot(x1, x2, axes, precision=precision,
                        preferred_element_type=preferred_element_type)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
  """Array-API ``linalg.vecdot``: ``jnp.vecdot`` (conjugating ``x1``)."""
  return _dot.vecdot(x1, x2, axis=axis, precision=precision,
                     preferred_element_type=preferred_element_type)


def cross(x1, x2, /, *, axis=-1):
  """Cross product of 3-vectors along ``axis`` (the other axes broadcast)."""
  x1, x2 = ensure_arraylike("cross", x1, x2)
  if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis] != 3 or x2.shape[axis] != 3:
    raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                     f"have x1.shape[axis]={x1.shape[axis]} and x2.shape[axis]={x2.shape[axis]}")
  return _numerics.cross(x1, x2, axisa=axis, axisb=axis, axisc=axis)


def _singular_cutoff(s, shape, rtol):
  """``rtol * max(s)`` per matrix (default rtol: max(M, N) * eps), broadcast over ``s``."""
  if rtol is None:
    rtol = max(shape[-2:]) * np.finfo(s.dtype).eps
  rtol = _creation.asarray(rtol, dtype=s.dtype)
  top = _reductions.max(s, axis=-1, keepdims=True, initial=0.0)
  return rtol[..., None] * top if rtol.ndim else rtol * top


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
  """Number of singular values of each matrix above ``rtol * max(singular values)``
  (default ``rtol``: ``max(M, N) * eps``; ``tol`` is an absolute threshold; ``hermitian``
  is accepted, the SVD is the general one)."""
  if tol is not None and rtol is not None:
    raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
  M = ensure_arraylike("matrix_rank", M)
  M, = _util.promote_dtypes_inexact(M)
  if M.ndim < 2:
    return _creation.asarray(_reductions.any(M != 0), dtype=np.int32)  # (int32, as JAX)
  s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
  cut = _creation.asarray(tol, dtype=s.dtype) if tol is not None else _singular_cutoff(s, M.shape, rtol)
  return _reductions.sum(s > cut, axis=-1, dtype=dtypes.default_int_dtype())


@staged
def pinv(a, rtol=None, hermitian=False, *, rcond=None):
  """Moore-Penrose pseudo-inverse of each matrix, dropping singular values at or below
  ``rtol * max(singular values)`` (default ``rtol``: ``max(M, N) * eps``; ``rcond``: the
  old name of ``rtol``)."""
  if rcond is not None:
    if rtol is not None:
      raise ValueError("pinv: only one of rtol and rcond may be specified.")
    rtol = rcond
  a = ensure_arraylike("pinv", a)
  a, = _util.promote_dtypes_inexact(a)
  return _pinv(a, rtol, hermitian)


def _pinv_fn(a, rtol, hermitian):
  m, n = a.shape[-2:]
  if m == 0 or n == 0:
    return _creation.zeros(a.shape[:-2] + (n, m), a.dtype)
  u, s, vh = svd(_ufuncs.conj(a), full_matrices=False, hermitian=hermitian)
  cut = _singular_cutoff(s, a.shape, rtol)
  s_inv = _manip.where(s > cut, 1 / _manip.where(s > cut, s, 1), 0).astype(a.dtype)
  return _dot.matmul(_manip.matrix_transpose(vh) * s_inv[..., None, :], _manip.matrix_transpose(u))


_pinv = custom_jvp(_pinv_fn, nondiff_argnums=(1, 2))


@_pinv.defjvp
def _pinv_jvp(rtol, hermitian, primals, tangents):
  """Golub and Pereyra's derivative of the pseudo-inverse (defined where the rank is
  locally constant, so through rank-deficient matrices too, unlike the SVD's):
  dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P."""
  a, = primals
  da, = tangents
  p = _pinv(a, rtol, hermitian)
  H = lambda x: _ufuncs.conj(_manip.matrix_transpose(x))
  if hermitian:  # (the factorization reads a symmetrized matrix)
    a, da = (a + H(a)) / 2, (da + H(da)) / 2
  m, n = a.shape[-2:]  # (JAX's association: no n x n product for a wide matrix, nor m x m
  if m >= n:           # for a tall one)
    s = (p @ H(p)) @ H(da)
    t = (H(da) @ H(p)) @ p
    return p, -(p @ da) @ p + s - (s @ a) @ p + t - (p @ a) @ t
  s = p @ (H(p) @ H(da))
  t = H(da) @ (H(p) @ p)
  return p, -p @ (da @ p) + s - s @ (a @ p) + t - p @ (a @ t)


def diagonal(x, /, *, offset=0):
  """Array-API ``linalg.diagonal``: diagonal of the last two axes."""
  return _indexing.diagonal(x, offset, axis1=-2, axis2=-1)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
  """Least-squares solution of ``a @ x = b`` by the SVD: ``(x, resid, rank, s)``.

  Args:
    a: array of shape ``(M, N)``.
    b: array of shape ``(M,)`` or ``(M, K)``.
    rcond: singular values below ``rcond * s[0]`` count as zero (default
      ``max(M, N) * eps``; a negative value means ``eps``).
    numpy_resid: residuals as NumPy returns them (empty where ``rank < N`` or ``M <= N``);
      by default the sum of squared residuals always (jit-friendly, as JAX).
  """
  a, b = ensure_arraylike("lstsq", a, b)
  a, b = _util.promote_dtypes_inexact(a, b)
  if a.shape[0] != b.shape[0]:
    raise ValueError("Leading dimensions of input arrays must match")
  vec = b.ndim == 1
  if vec:
    b = b[:, None]
  if a.ndim != 2:
    raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
  if b.ndim != 2:
    raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or two-dimensional")
  m, n = a.shape
  if a.size == 0:
    s = _creation.empty((0,), dtype=a.dtype)
    rank = _creation.asarray(0, dtype=dtypes.default_int_dtype())
    x = _creation.zeros((n,) + b.shape[1:], dtype=a.dtype)
  else:
    eps = float(np.finfo(a.dtype).eps)
    rcond = eps * max(m, n) if rcond is None else _manip.where(rcond < 0, eps, rcond)
    u, s, vt = svd(a, full_matrices=False)
    mask = (s > 0) & (s >= _creation.asarray(rcond, dtype=s.dtype) * s[0])
    rank = _reductions.sum(mask, dtype=dtypes.default_int_dtype())
    s_inv = _manip.where(mask, 1 / _manip.where(mask, s, 1), 0).astype(a.dtype)[:, None]
    x = _dot.matmul(_ufuncs.conj(vt).T, s_inv * _dot.matmul(_ufuncs.conj(u).T, b))
  if numpy_resid and (int(rank) < n or m <= n):
    resid = _creation.asarray([], dtype=s.dtype)
  else:
    resid = norm(b - _dot.matmul(a, x), axis=0) ** 2
  if vec:
    x = x.ravel()
  return x, resid, rank, s  # (a plain tuple, as JAX's)


def cond(x, p=None):
  """Condition number ``norm(x, p) * norm(inv(x), p)`` of each matrix (for ``p`` in
  ``{None, 2, -2}`` the ratio of extreme singular values). A singular matrix gives inf."""
  arr = ensure_arraylike("cond", x)
  if arr.ndim < 2:
    raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got {arr.shape=}")
  if arr.shape[-1] == 0 or arr.shape[-2] == 0:
    raise ValueError(f"jnp.linalg.cond: input array must not be empty; got {arr.shape=}")
  if p is None or p == 2:
    s = svdvals(arr)
    return s[..., 0] / s[..., -1]
  if p == -2:
    s = svdvals(arr)
    r = s[..., -1] / s[..., 0]
  else:
    if arr.shape[-2] != arr.shape[-1]:
      raise ValueError(f"jnp.linalg.cond: for {p=}, array must be square; got {arr.shape=}")
    r = norm(arr, ord=p, axis=(-2, -1)) * norm(inv(arr), ord=p, axis=(-2, -1))
  nan_in = _reductions.any(_ufuncs.isnan(arr), axis=(-2, -1))
  return _manip.where(_ufuncs.isnan(r) & ~nan_in, np.inf, r)


def tensorinv(a, ind=2):
  """Inverse of ``a`` for ``tensordot(., ., axes=ind)``: shape ``a.shape[ind:] +
  a.shape[:ind]``."""
  arr = ensure_arraylike("tensorinv", a)
  ind = operator.index(ind)
  if ind <= 0:
    raise ValueError(f"ind must be a positive integer; got {ind=}")
  rows, cols = arr.shape[:ind], arr.shape[ind:]
  if math.prod(rows) != math.prod(cols):
    raise ValueError("tensorinv is only possible when the product of the first `ind` "
                     "dimensions equals that of the remaining dimensions. "
                     f"got {arr.shape=} with {ind=}.")
  return inv(arr.reshape(math.prod(rows), math.prod(cols))).reshape(*cols, *rows)


def tensorsolve(a, b, axes=None):
  """``x`` with ``tensordot(a, x, axes=x.ndim) == b``; ``axes`` of ``a`` move to the end
  first."""
  a, b = ensure_arraylike("tensorsolve", a, b)
  if axes is not None:
    axes = [canonicalize_axis(i, a.ndim) for i in axes]
    a = _manip.transpose(a, [i for i in range(a.ndim) if i not in axes] + axes)
  out_shape = a.shape[b.ndim:]
  if a.shape[:b.ndim] != b.shape:
    raise ValueError("After moving axes to end, leading shape of a must match shape of b. "
                     f"got a.shape={a.shape}, b.shape={b.shape}")
  if b.size != math.prod(out_shape):
    raise ValueError("Input arrays must have prod(a.shape[:b.ndim]) == prod(a.shape[b.ndim:]);"
                     f" got a.shape={a.shape}, b.ndim={b.ndim}.")
  return solve(a.reshape(b.size, math.prod(out_shape)), b.ravel()).reshape(out_shape)


def _chain_order(dims):
  """Split points of the cheapest parenthesisation of a matrix chain (``dims[i], dims[i+1]``
  the shape of matrix ``i``): the textbook dynamic program."""
  n = len(dims) - 1
  cost = [[0] * n for _ in range(n)]
  split = [[0] * n for _ in range(n)]
  for ln in range(1, n):
    for i in range(n - ln):
      j = i + ln
      cost[i][j], split[i][j] = min(
          (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
          for k in range(i, j))
  return split


def multi_dot(arrays, *, precision=None):
  """``arrays[0] @ arrays[1] @ ...`` in the order with the fewest flops; the first and last
  array may be 1-d."""
  arrs = [ensure_arraylike("jnp.linalg.multi_dot", a) for a in arrays]
  if len(arrs) < 2:
    raise ValueError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
  if not (arrs[0].ndim in (1, 2) and arrs[-1].ndim in (1, 2)
          and all(a.ndim == 2 for a in arrs[1:-1])):
    raise ValueError("multi_dot: input arrays must all be two-dimensional, except for the "
                     "first and last array which may be 1 or 2 dimensional. "
                     f"Got array shapes {[a.shape for a in arrs]}")
  if any(a.shape[-1] != b.shape[0] for a, b in zip(arrs[:-1], arrs[1:])):
    raise ValueError("multi_dot: last dimension of each array must match first dimension of "
                     f"following array. Got array shapes {[a.shape for a in arrs]}")
  first, last = arrs[0].ndim == 1, arrs[-1].ndim == 1
  if first:
    arrs[0] = arrs[0][None, :]
  if last:
    arrs[-1] = arrs[-1][:, None]
  split = _chain_order([a.shape[0] for a in arrs] + [arrs[-1].shape[1]])

  def prod(i, j):
    if i == j:
      return arrs[i]
    k = split[i][j]
    return _dot.matmul(prod(i, k), prod(k + 1, j), precision=precision)
  out = prod(0, len(arrs) - 1)
  return out[0, 0] if first and last else out[0] if first else out[:, 0] if last else out
