"""``dot_general`` and ``lax.linalg``: every rule of each primitive in one place.

Pipeline position: ``lax.dot_general(x, y, dims)`` / ``lax.linalg.cholesky(a)`` -> ``*_p.bind``;
with no transformation active the registry's eager entry runs the selected backend: a numba
kernel from ``kernels.linalg`` or NumPy (OpenBLAS / LAPACK). ``dot_general`` is reduced on
the NumPy side to one batched matmul ``(B, M, K) @ (B, K, N)``; the decompositions take any
number of leading batch dimensions, flattened to one for the kernels. ``eig`` has the numba
kernel (LAPACK geev) alone: eager and jit (an FFI call to it) agree bit for bit.

Under transformations: ``dot_general`` is bilinear (jvp + both transposes) and its batching
rule moves the vmapped axis into the batch (or free) dimensions, one bind; decompositions
batch by moving batch axes to the front (they take leading batch dims natively). jvp rules
follow JAX's definitions; ``cholesky``/``eigh`` differentiate the function they compute
(only the ``lower`` triangle is read), which for symmetric tangents is JAX's rule.
"""
from __future__ import annotations

import enum
from typing import Any, NamedTuple
import math
import operator
import re

import numpy as np

from kernels import linalg as K
from nbjax import core, dtypes, registry
from nbjax.config import config
from nbjax.array import Array
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad, batching, jet
from nbjax.lax.reductions import work_eager


from nbjax.lax.elementwise import _bool, _complex, _float, _sint, _uint  # _float: bf16 too
from nbjax.lax.elementwise import accepts
_dot_dtypes = _bool | _sint | _uint | _float | _complex
_linalg_dtypes = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}


def _sorted(ds):
  return sorted(ds, key=lambda d: (d.kind, d.itemsize))


def _lax():
  from nbjax import lax
  return lax


def _aval(x):
  return core.get_aval(x)


# ================================================================= dot_general


def _check_dims(name, side, ndim, contract, batch):
  for d in tuple(contract) + tuple(batch):
    if not isinstance(d, (int, np.integer)) or not 0 <= d < ndim:
      raise TypeError(f"{name} requires {side} dimension numbers to be nonnegative and less "
                      f"than the number of axes of the {side} value, got {side}_batch of {batch} "
                      f"and {side}_contracting of {contract} for {side} of rank {ndim}")


def _dot_shape(lhs, rhs, dimension_numbers):
  name = "dot_general"
  try:
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = map(tuple, (lc, rc, lb, rb))
  except (TypeError, ValueError):
    raise TypeError(f"{name}: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                    f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
  _check_dims(name, "lhs", lhs.ndim, lc, lb)
  _check_dims(name, "rhs", rhs.ndim, rc, rb)
  if len(lb) != len(rb):
    raise TypeError(f"{name} requires equal numbers of lhs_batch and rhs_batch dimensions, "
                    f"got lhs_batch {lb} and rhs_batch {rb}.")
  for side, c, b in (("lhs", lc, lb), ("rhs", rc, rb)):
    if len(set(b)) != len(b):
      raise TypeError(f"{name} requires {side} batch dimensions to be distinct, got "
                      f"{side}_batch {b}.")
    if len(set(c)) != len(c):
      raise TypeError(f"{name} requires {side} contracting dimensions to be distinct, got "
                      f"{side}_contracting {c}.")
    if set(c) & set(b):
      raise TypeError(f"{name} requires {side} batch dimensions to be disjoint from contracting "
                      f"dimensions, got {side}_batch {b} and {side}_contracting {c}.")
  lbs, rbs = tuple(lhs.shape[i] for i in lb), tuple(rhs.shape[i] for i in rb)
  if lbs != rbs:
    raise TypeError(f"{name} requires lhs batch dimensions and rhs batch dimensions to have "
                    f"the same shape, got {lbs} and {rbs}.")
  lcs, rcs = tuple(lhs.shape[i] for i in lc), tuple(rhs.shape[i] for i in rc)
  if len(lc) != len(rc) or lcs != rcs:
    raise TypeError(f"{name} requires contracting dimensions to have the same shape, got "
                    f"{lcs} and {rcs}.")
  lf = [d for i, d in enumerate(lhs.shape) if i not in lc and i not in lb]
  rf = [d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb]
  return lbs + tuple(lf) + tuple(rf)


def _type_props(d):
  # XLA's "higher precision type" order (JAX's _dot_general_dtype_rule)
  c = _real_dtype(d)
  fl = accepts(_float, c)  # bfloat16 and float8_* too (kind "V")
  bits = 1 if c == np.bool_ else dtypes.itemsize_bits(c)  # (int4: 4)
  return (d.kind == "c", dtypes.finfo(c).maxexp if fl else -1,
          dtypes.finfo(c).nmant if fl else -1, bits, c.kind != "u")


def _dot_dtype(ld, rd, preferred):
  lp, rp = _type_props(ld), _type_props(rd)
  if lp > rp:
    res = ld
  elif rp > lp:
    res = rd
  else:
    if ld != rd:
      raise TypeError(f"dot_general argument type error: {ld}, {rd}")
    res = ld
  if preferred is None or np.dtype(preferred) == res:
    return res
  pref = np.dtype(preferred)
  # JAX's _bit_width: a complex dtype counts its component's bits (complex64: 32)
  bits = lambda d: 1 if d == np.bool_ else d.itemsize * 4 if d.kind == "c" else \
      dtypes.itemsize_bits(d)
  if not accepts(_float, res) and bits(pref) < bits(res):
    raise TypeError("`preferred_element_type` must not be narrower than the "
                    f"original type, got preferred_element_type of {pref} for result type of "
                    f"{res}.")
  return pref


def _dot_abstract_eval(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
                       out_sharding=None):
  for a in (lhs, rhs):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"dot_general got a non-array operand {a!r}")
    if not accepts(_dot_dtypes, a.dtype):
      raise TypeError(f"dot_general does not accept dtype {a.dtype.name}")
  if preferred_element_type is not None and not accepts(_dot_dtypes,
                                                        np.dtype(preferred_element_type)):
    raise TypeError(f"dot_general: invalid preferred_element_type {preferred_element_type!r}")
  shape = _dot_shape(lhs, rhs, dimension_numbers)
  d = _dot_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
  return ShapedArray(shape, d, lhs.weak_type and rhs.weak_type)


_PLANS = {}


def _plan(ls, rs, dimension_numbers):
  """(lhs perm or None, rhs perm or None, B, M, K, N, out_shape), cached per signature."""
  key = (ls, rs, dimension_numbers)
  p = _PLANS.get(key)
  if p is None:
    (lc, rc), (lb, rb) = dimension_numbers
    lf = tuple(i for i in range(len(ls)) if i not in lc and i not in lb)
    rf = tuple(i for i in range(len(rs)) if i not in rc and i not in rb)
    size = lambda s, ax: math.prod(s[i] for i in ax)
    lp, rp = tuple(lb) + lf + tuple(lc), tuple(rb) + tuple(rc) + rf
    ident = lambda q: None if q == tuple(range(len(q))) else q
    p = (ident(lp), ident(rp), size(ls, lb), size(ls, lf), size(ls, lc), size(rs, rf),
         tuple(ls[i] for i in lb) + tuple(ls[i] for i in lf) + tuple(rs[i] for i in rf))
    if len(_PLANS) > 4096:
      _PLANS.clear()
    _PLANS[key] = p
  return p


def _as_bmm(lhs, rhs, dimension_numbers):
  """Operands as contiguous (B, M, K) and (B, K, N), and the dot_general output shape."""
  lp, rp, B, M, Kc, N, out_shape = _plan(lhs.shape, rhs.shape, dimension_numbers)
  a = lhs if lp is None else np.ascontiguousarray(lhs.transpose(lp))
  b = rhs if rp is None else np.ascontiguousarray(rhs.transpose(rp))
  return a.reshape(B, M, Kc), b.reshape(B, Kc, N), out_shape


_DTYPES = {}


def _dot_out_dtypes(ld, rd, preferred):
  key = (ld, rd, preferred)
  r = _DTYPES.get(key)
  if r is None:
    out = _dot_dtype(ld, rd, preferred)
    r = _DTYPES[key] = (out, _compute_dtype(out, ld, rd))
  return r


def _compute_dtype(out, ld, rd):
  """dtype the product is computed in: floats in the widest of inputs and output (float16 ->
  float32, BLAS has none); integers in 64 bits (wraps to the same bits as narrow
  accumulation); bool as counts."""
  if out.kind in "fc" or ld.kind in "fc" or rd.kind in "fc":
    c = np.result_type(out, ld if ld.kind in "fc" else out, rd if rd.kind in "fc" else out)
    return np.dtype({"e": "f", "g": "d", "G": "D"}.get(c.char, c.char))
  return np.dtype(np.uint64 if out.kind == "u" and out.itemsize == 8 else np.int64)


_BLAS = frozenset(map(np.dtype, (np.float32, np.float64, np.complex64, np.complex128)))


def _plain_dot(lhs, rhs, dimension_numbers, preferred_element_type):
  """True for ``x @ W`` (x's last axis against W's first, W at most 2-D, no batch axes, one
  BLAS dtype): np.dot computes it in one BLAS call with no reshapes."""
  (lc, rc), (lb, _) = dimension_numbers
  d = lhs.dtype
  return (not lb and rc == (0,) and rhs.ndim <= 2 and lc == (lhs.ndim - 1,) and
          rhs.dtype == d and d in _BLAS and (preferred_element_type is None or preferred_element_type == d))


_DIRECT = {}
_REAL = frozenset(map(np.dtype, (np.float32, np.float64)))
# OpenBLAS's gemm with a transposed right operand (``ct @ W.T``) stalls on its threads for
# small operands (a K=10 product 17x slower than NN on a busy 2-core machine, the SGD
# step's 32x128 @ 128x128.T 2 ms in context): up to this many elements, W.T is copied
_NT_COPY = 1 << 16


def _direct(ls, rs, dtypes_, dimension_numbers, preferred_element_type):
  """A kernel ``f(lhs, rhs)`` for these operand shapes that needs no copies, or None:
  - one contracted axis between operands of rank <= 2, no batch axes, one BLAS dtype:
    ``np.dot`` of the operands or their transposed views (BLAS reads a transposed operand in
    place: the backward pass's ``ct @ W.T`` and ``x.T @ ct`` cost what ``x @ W`` does; a
    small transposed right operand is copied, ``_NT_COPY``);
  - no contracted axis, one real float dtype: every output element is one product, so
    the elementwise product of the operands' broadcastable views (per-example outer
    products under ``vmap``, 128 tiny BLAS calls before); ``outer_mul``'s one loop nest
    when the views are 2-D.
  Cached per signature."""
  key = (ls, rs, dtypes_, dimension_numbers, preferred_element_type)
  k = _DIRECT.get(key, _DIRECT)
  if k is not _DIRECT:
    return k
  (lc, rc), (lb, rb) = dimension_numbers
  d = dtypes_[0]
  k = None
  if dtypes_[1] == d and (preferred_element_type is None or preferred_element_type == d):
    if d in _BLAS and not lb and len(lc) == 1 and 1 <= len(ls) <= 2 and 1 <= len(rs) <= 2:
      tl, tr = len(ls) == 2 and lc == (0,), len(rs) == 2 and rc == (1,)
      if tr and not tl and rs[0] * rs[1] <= _NT_COPY:
        k = lambda a, b: np.dot(a, np.ascontiguousarray(b.T))
      else:
        k = (np.dot if not (tl or tr) else (lambda a, b: np.dot(a.T, b.T)) if tl and tr else
             (lambda a, b: np.dot(a.T, b)) if tl else (lambda a, b: np.dot(a, b.T)))
    elif d in _REAL and not lc:
      lf = tuple(i for i in range(len(ls)) if i not in lb)
      rf = tuple(i for i in range(len(rs)) if i not in rb)
      lp, rp = tuple(lb) + lf, tuple(rb) + rf
      lsh = tuple(ls[i] for i in lp) + (1,) * len(rf)
      rsh = tuple(rs[i] for i in rb) + (1,) * len(lf) + tuple(rs[i] for i in rf)
      lp = None if lp == tuple(range(len(ls))) else lp
      rp = None if rp == tuple(range(len(rs))) else rp

      if len(lsh) == 2 and lp is None and rp is None:  # (the per-example outer products)
        out_shape = tuple(max(m, n) for m, n in zip(lsh, rsh))

        def k(a, b):
          out = np.empty(out_shape, d)
          K.outer_mul(a.reshape(lsh), b.reshape(rsh), out)
          return out
      else:
        def k(a, b):
          return np.multiply((a if lp is None else a.transpose(lp)).reshape(lsh),
                             (b if rp is None else b.transpose(rp)).reshape(rsh), order="C")
    if k is not None and k is not np.dot:
      k.fresh = True  # (a new buffer, never a view of an operand: see registry.eager_program)
  if len(_DIRECT) > 4096:
    _DIRECT.clear()
  _DIRECT[key] = k
  return k


_BMM_MIN = 16  # batch items from which numba's path takes NumPy's batched matmul


def _dot_numba(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
               out_sharding=None):
  if _plain_dot(lhs, rhs, dimension_numbers, preferred_element_type):
    return np.dot(lhs, rhs)
  k = _direct(lhs.shape, rhs.shape, (lhs.dtype, rhs.dtype), dimension_numbers,
              preferred_element_type)
  if k is not None:
    return k(lhs, rhs)
  out_dtype, cd = _dot_out_dtypes(lhs.dtype, rhs.dtype, preferred_element_type)
  a, b, out_shape = _as_bmm(lhs, rhs, dimension_numbers)
  if a.dtype != cd:
    a = a.astype(cd)
  if b.dtype != cd:
    b = b.astype(cd)
  B, M, Kc = a.shape
  N = b.shape[2]
  if cd.kind in "fc":
    if Kc == 1:  # products alone (XLA's too: -0 stays -0, BLAS adds them to 0)
      out = np.multiply(a, b)
    elif B >= _BMM_MIN:  # many small products: NumPy's batched matmul (its own loops below
      out = np.matmul(a, b)  # BLAS sizes) beats a gemm call per item (1000 (1x10)(10x1)
      # float32: 125 -> 16 us; 64 3x3x3: 7.9 -> 3.4; 8 4x256x4: 3.7 vs 4.1, kept)
    else:
      out = np.empty((B, M, N), cd)
      if out.size and Kc:
        K.matmul_blas(a, b, out)
      elif out.size:
        out[:] = 0
  else:
    out = np.zeros((B, M, N), cd)
    K.matmul_loop(a, b, out)
  if out_dtype == np.bool_:
    out = out != 0
  out = out.reshape(out_shape)
  if out.dtype.kind == "c" and out_dtype.kind != "c":
    out = out.real  # (complex operands, a real preferred_element_type: the real part)
  return out if out.dtype == out_dtype else out.astype(out_dtype)


def _dot_specialize(avals, params):
  l, r = avals
  if _plain_dot(l, r, params["dimension_numbers"], params["preferred_element_type"]):
    return np.dot
  return _direct(l.shape, r.shape, (l.dtype, r.dtype), params["dimension_numbers"],
                 params["preferred_element_type"])


_dot_numba.specialize = _dot_specialize


def _dot_numpy(lhs, rhs, *, dimension_numbers, precision, preferred_element_type,
               out_sharding=None):
  if _plain_dot(lhs, rhs, dimension_numbers, preferred_element_type):
    return np.dot(lhs, rhs)
  k = _direct(lhs.shape, rhs.shape, (lhs.dtype, rhs.dtype), dimension_numbers,
              preferred_element_type)
  if k is not None:
    return k(lhs, rhs)
  out_dtype, cd = _dot_out_dtypes(lhs.dtype, rhs.dtype, preferred_element_type)
  a, b, out_shape = _as_bmm(lhs, rhs, dimension_numbers)
  if out_dtype == np.bool_:
    return np.matmul(a, b).reshape(out_shape)
  a, b = a if a.dtype == cd else a.astype(cd), b if b.dtype == cd else b.astype(cd)
  out = np.multiply(a, b) if a.shape[2] == 1 and cd.kind in "fc" else np.matmul(a, b)
  out = out.reshape(out_shape)
  if out.dtype.kind == "c" and out_dtype.kind != "c":
    out = out.real  # (complex operands, a real preferred_element_type: the real part)
  return out if out.dtype == out_dtype else out.astype(out_dtype)


_dot_numpy.specialize = _dot_specialize


def _ranges_like(*xs):
  start = 0
  for x in xs:
    yield tuple(range(start, start + len(x)))
    start += len(x)


def _dot_transpose_lhs(ct, x, y, *, dimension_numbers, precision, preferred_element_type,
                       swap_ans=False, out_sharding=None):
  (xc, yc), (xb, yb) = dimension_numbers
  x_aval = x.aval if ad.is_undefined_primal(x) else _aval(x)
  y_ndim = (y.aval if ad.is_undefined_primal(y) else _aval(y)).ndim
  x_kept = [i for i in range(x_aval.ndim) if i not in xc and i not in xb]
  y_kept = [i for i in range(y_ndim) if i not in yc and i not in yb]
  if swap_ans:
    ans_batch, ans_y, _ = _ranges_like(xb, y_kept, x_kept)
  else:
    ans_batch, _, ans_y = _ranges_like(xb, x_kept, y_kept)
  dims = ((ans_y, tuple(y_kept)), (ans_batch, tuple(yb)))
  x_contract_sorted_by_y = [xc[i] for i in np.argsort(yc)]
  out_axes = tuple(int(i) for i in np.argsort(list(xb) + x_kept + x_contract_sorted_by_y))
  ident = tuple(range(len(out_axes)))
  if out_axes != ident and tuple(np.argsort(list(xb) + x_contract_sorted_by_y + x_kept)) == ident:
    # (ct . y) transposed is y . ct: the operands swapped land in x's layout, no transpose
    # (the weight gradient of x @ W is x.T @ ct, one BLAS call on a transposed view)
    if isinstance(precision, tuple) and len(precision) == 2:
      precision = precision[::-1]
    return _cast_like(dot_general(y, ct, ((dims[0][1], dims[0][0]), (dims[1][1], dims[1][0])),
                                  precision=precision,
                                  preferred_element_type=preferred_element_type,
                                  out_sharding=_typed(x_aval, ident)), x_aval)
  r = dot_general(ct, y, dims, precision=precision, preferred_element_type=preferred_element_type,
                  out_sharding=_typed(x_aval, out_axes))
  return _cast_like(_lax().transpose(r, out_axes) if out_axes != ident else r, x_aval)


def _typed(x_aval, out_axes):
  """A cotangent's sharding as its primal's (Explicit mesh axes), in the layout ``out_axes``
  transposes to x's; None where x's type carries none."""
  sh = getattr(x_aval, "_sh", None)
  if sh is None:
    return None
  spec = list(sh.spec) + [None] * (x_aval.ndim - len(sh.spec))
  r = [None] * len(spec)
  for i, a in enumerate(out_axes):
    r[a] = spec[i]
  return sh.with_spec(type(sh.spec)(*r))


def _cast_like(x_bar, x_aval):
  if _aval(x_bar).dtype != x_aval.dtype:
    x_bar = _lax().convert_element_type(x_bar, x_aval.dtype)
  return x_bar


def _dot_transpose_rhs(ct, x, y, *, dimension_numbers, precision, preferred_element_type,
                       out_sharding=None):
  (xc, yc), (xb, yb) = dimension_numbers
  return _dot_transpose_lhs(ct, y, x, dimension_numbers=((yc, xc), (yb, xb)),
                            precision=precision, preferred_element_type=preferred_element_type,
                            swap_ans=True)


def _dot_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type,
               out_sharding=None):
  """The vmapped axis joins the batch dimensions (both mapped) or the free dimensions of
  its side (one mapped): one dot_general over the whole batch."""
  lhs, rhs = vals
  lbd, rbd = dims
  (lc, rc), (lb, rb) = dimension_numbers
  bump = lambda ds, b: tuple(d + (d >= b) for d in ds)
  if lbd is not None and rbd is not None:
    lb2, rb2 = (lbd,) + bump(lb, lbd), (rbd,) + bump(rb, rbd)
    lc2, rc2 = bump(lc, lbd), bump(rc, rbd)
    out_bd = 0
  elif lbd is not None:
    l_nd = _aval(lhs).ndim - 1
    tensor = [d for d in range(l_nd) if d not in lb and d not in lc]
    out_bd = len(lb) + sum(d < lbd for d in tensor)
    lb2, lc2, rb2, rc2 = bump(lb, lbd), bump(lc, lbd), tuple(rb), tuple(rc)
  else:
    r_nd = _aval(rhs).ndim - 1
    tensor = [d for d in range(r_nd) if d not in rb and d not in rc]
    out_bd = _aval(lhs).ndim - len(lc) + sum(d < rbd for d in tensor)
    lb2, lc2, rb2, rc2 = tuple(lb), tuple(lc), bump(rb, rbd), bump(rc, rbd)
  kw = {}
  if out_sharding is not None:  # (the mapped dim: its operand's spec there)
    d, v = (lbd, lhs) if lbd is not None else (rbd, rhs)
    vs = getattr(_aval(v), "_sh", None)
    spec = list(out_sharding.spec) + [None] * (_aval(v).ndim - 1 - len(out_sharding.spec))
    spec.insert(out_bd, None if vs is None or d >= len(vs.spec) else vs.spec[d])
    kw["out_sharding"] = out_sharding.with_spec(type(out_sharding.spec)(*spec))
  out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc2, rc2), (lb2, rb2)),
                           precision=precision, preferred_element_type=preferred_element_type,
                           **kw)
  return out, out_bd


def _dot_samples(rng, dtype):
  d = np.dtype(dtype)
  r = lambda *s: _rand(rng, s, d)
  mm = (((1,), (0,)), ((), ()))
  return [
      ([r(3, 4), r(4, 5)], dict(dimension_numbers=mm)),
      ([r(4), r(4)], dict(dimension_numbers=(((0,), (0,)), ((), ())))),
      ([r(3, 4), r(4)], dict(dimension_numbers=(((1,), (0,)), ((), ())))),
      ([r(2, 3, 4), r(2, 4, 5)], dict(dimension_numbers=(((2,), (1,)), ((0,), (0,))))),
      ([r(4, 2, 3), r(3, 5, 2)], dict(dimension_numbers=(((2,), (0,)), ((1,), (2,))))),
      ([r(3, 4, 2), r(2, 4, 6)], dict(dimension_numbers=(((1, 2), (1, 0)), ((), ())))),
      ([r(3), r(5)], dict(dimension_numbers=(((), ()), ((), ())))),
      ([r(), r(3)], dict(dimension_numbers=(((), ()), ((), ())))),
      ([r(0, 4), r(4, 3)], dict(dimension_numbers=mm)),
      ([r(3, 0), r(0, 2)], dict(dimension_numbers=mm)),
      ([r(3, 4), r(4, 5)], dict(dimension_numbers=mm, preferred_element_type=_WIDER.get(d))),
  ]


_WIDER = {np.dtype(a): np.dtype(b) for a, b in [
    ("int8", "int32"), ("int16", "int64"), ("int32", "int64"), ("int64", "int64"),
    ("uint8", "uint32"), ("uint16", "uint64"), ("uint32", "uint64"), ("uint64", "uint64"),
    ("float16", "float32"), ("float32", "float64"), ("float64", "float64"),
    ("complex64", "complex128"), ("complex128", "complex128"), ("bool", "int32")]}


def _rand(rng, shape, d):
  if d == np.bool_:
    return rng.random(shape) < 0.5
  if d.kind in "iu":
    return rng.integers(0 if d.kind == "u" else -3, 4, shape).astype(d)
  if d.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
  return rng.standard_normal(shape).astype(d)


def _dot_bad(rng):
  x, y = Array(np.ones((3, 4), np.float32)), Array(np.ones((5, 6), np.float32))
  return [
      ([x, y], dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                    preferred_element_type=None), TypeError),
      ([x, y], dict(dimension_numbers=(((2,), (0,)), ((), ())), precision=None,
                    preferred_element_type=None), TypeError),
      ([x, Array(np.ones((4, 2), np.float32))],
       dict(dimension_numbers=(((1,), (0,)), ((0,), (1,))), precision=None,
            preferred_element_type=None), TypeError),
      ([Array(np.ones((3, 4), np.int32)), Array(np.ones((4, 2), np.int32))],
       dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
            preferred_element_type=np.dtype(np.int8)), TypeError),
  ]


def _dot_work(vals, out_aval):
  """What dot_general's policy threshold compares: the output elements of a floating
  product; 0 for an integer or bool product (numba's loop at every size)."""
  return out_aval.size if out_aval.dtype.kind in "fc" else 0


dot_general_p = Primitive("dot_general")
dot_general_p.make_eager = work_eager(_dot_work)
registry.register(
    dot_general_p, family="linalg", impls={"numba": _dot_numba, "numpy": _dot_numpy},
    abstract_eval=_dot_abstract_eval, batch=_dot_batch, policy=("numba", "numpy", 1 << 12),
    meta=dict(dtypes=_sorted(_dot_dtypes), reference=_dot_numpy,
              samples=lambda rng, d: [(a, dict(dict(precision=None, preferred_element_type=None),
                                                **p)) for a, p in _dot_samples(rng, np.dtype(d))],
              differentiable=True, linear=True, bad_inputs=_dot_bad,
              error_names=("preferred_element_type",),  # (JAX's message for a narrow one)
              narrow="xla",  # (XLA's CPU converts mixed float8 operands to the result type)
              tol={np.dtype(np.float16): (1e-2, 1e-2), np.dtype(np.float32): (1e-5, 1e-5),
                   np.dtype(np.complex64): (1e-5, 1e-5)},
              note="both: np.dot (OpenBLAS, both cores) on the operands or their transposed "
                   "views for one contracted axis of rank<=2 operands (a transposed right "
                   "operand of <=64K elements copied), an elementwise product "
                   "when none is contracted; else numba (a BLAS gemm per batch item below "
                   "16 items, NumPy's batched matmul from 16; an integer i-k-j loop at any "
                   "size: 2-10x NumPy's from 16K outputs) below 4096 float outputs, numpy "
                   "(batched matmul) from 4096; numba path: operands put in batched layout "
                   "(transposes) and cast by NumPy copies"))
ad.defbilinear(dot_general_p, _dot_transpose_lhs, _dot_transpose_rhs)


_precision_strings = {}


class Precision(enum.Enum):
  """Precision of float32 matrix products on accelerators (TPU/GPU); on CPU every value
  computes in full float32. Members ``DEFAULT`` (aliases 'default', 'bfloat16',
  'fastest'), ``HIGH`` ('high', 'bfloat16_3x', 'tensorfloat32'), ``HIGHEST`` ('highest',
  'float32')."""
  DEFAULT = 0
  HIGH = 1
  HIGHEST = 2

  @classmethod
  def _missing_(cls, value):
    return _precision_strings.get(value)

  def __repr__(self):
    return f"{type(self).__name__}.{self.name}"

  def __str__(self):
    return self.name


_precision_strings.update(
    highest=Precision.HIGHEST, float32=Precision.HIGHEST, high=Precision.HIGH,
    bfloat16_3x=Precision.HIGH, tensorfloat32=Precision.HIGH, default=Precision.DEFAULT,
    bfloat16=Precision.DEFAULT, fastest=Precision.DEFAULT)
_precision_strings[None] = Precision.DEFAULT


class DotAlgorithmPreset(enum.Enum):
  """JAX's named dot algorithms (``LHS_RHS_ACCUM`` types), accepted as ``precision=``; on
  CPU nbjax computes every one as the default algorithm for the operands' dtypes."""
  DEFAULT = enum.auto()
  ANY_F8_ANY_F8_F32 = enum.auto()
  ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
  ANY_F8_ANY_F8_ANY = enum.auto()
  ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
  F16_F16_F16 = enum.auto()
  F16_F16_F32 = enum.auto()
  BF16_BF16_BF16 = enum.auto()
  BF16_BF16_F32 = enum.auto()
  BF16_BF16_F32_X3 = enum.auto()
  BF16_BF16_F32_X6 = enum.auto()
  BF16_BF16_F32_X9 = enum.auto()
  TF32_TF32_F32 = enum.auto()
  TF32_TF32_F32_X3 = enum.auto()
  F32_F32_F32 = enum.auto()
  F64_F64_F64 = enum.auto()

  __repr__ = Precision.__repr__
  __str__ = Precision.__str__


class DotAlgorithm(NamedTuple):
  """JAX's explicit dot algorithm (operand and accumulation types, component counts),
  accepted as ``precision=``; on CPU nbjax computes the default algorithm for the operands'
  dtypes, with the result in the dtype the operands give (as XLA:CPU does)."""
  lhs_precision_type: Any
  rhs_precision_type: Any
  accumulation_type: Any
  lhs_component_count: int = 1
  rhs_component_count: int = 1
  num_primitive_operations: int = 1
  allow_imprecise_accumulation: bool = False


def canonicalize_precision(precision):
  """``None``, a ``(Precision, Precision)`` pair, or a ``DotAlgorithmPreset`` (JAX's);
  ``None`` takes ``jax_default_matmul_precision`` when it is set."""
  if precision is None:
    precision = config._flags["default_matmul_precision"]
    if precision is None:
      return None
  if isinstance(precision, str):
    if precision in _precision_strings:
      return Precision(precision), Precision(precision)
    if precision in DotAlgorithmPreset.__members__:
      return DotAlgorithmPreset[precision]
  elif isinstance(precision, Precision):
    return precision, precision
  elif isinstance(precision, (DotAlgorithmPreset, DotAlgorithm)):
    return precision
  elif isinstance(precision, (list, tuple)) and len(precision) == 2:
    if all(isinstance(p, Precision) for p in precision):
      return tuple(precision)
    if all(isinstance(p, str) and p in _precision_strings for p in precision):
      return tuple(map(Precision, precision))
  raise ValueError(
      "Precision argument must be one of:\n- None,\n"
      f"- a string in {list(_precision_strings)},\n- a lax.Precision value,\n"
      "- a tuple of two lax.Precision values or strings,\n"
      "- a lax.DotAlgorithmPreset or the name of one of these presets, or\n"
      f"- a lax.DotAlgorithm value;\nbut got {precision}.")


_canon_precision = canonicalize_precision


def _dot_pp_params(params):
  """JAX's printing: no None precision / preferred_element_type, dimension numbers as lists."""
  p = {k: v for k, v in params.items() if v is not None}
  (lc, rc), (lb, rb) = params["dimension_numbers"]
  p["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
  return p


dot_general_p.pp_params = _dot_pp_params


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, *,
                out_sharding=None):
  """General tensor contraction: ``dimension_numbers = ((lhs_contracting, rhs_contracting),
  (lhs_batch, rhs_batch))``. Output: batch dims, lhs free dims, rhs free dims, laid out as
  ``out_sharding`` when given."""
  (lc, rc), (lb, rb) = dimension_numbers
  idx = lambda ds: tuple(map(operator.index, ds))
  dn = ((idx(lc), idx(rc)), (idx(lb), idx(rb)))
  pet = (None if preferred_element_type is None
         else dtypes.canonicalize_explicit_dtype(preferred_element_type, "dot"))
  if out_sharding is None and core.sharding_rule_hook is None:
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                              precision=_canon_precision(precision), preferred_element_type=pet)
  from nbjax.interpreters.sharding_types import dot_out_sharding
  kw, place = dot_out_sharding(out_sharding)  # ({"out_sharding": param} or None, to place)
  out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=_canon_precision(precision),
                           preferred_element_type=pet, **(kw or {}))
  if place is None:
    return out
  from nbjax.sharding import apply_out_sharding
  return apply_out_sharding(out, place, "dot_general")


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
  """Matrix/vector products; with ``dimension_numbers``, same as :func:`dot_general`."""
  if dimension_numbers is None:
    ls, rs = _aval(lhs).shape, _aval(rhs).shape
    if 1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]:
      dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    else:
      raise ValueError("lax.dot: dimension_numbers must be specified when not performing "
                       "simple un-batched matrix-matrix, matrix-vector, or vector-vector "
                       f"products; got lhs_shape={ls} rhs_shape={rs}")
  return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
  """Batched matrix multiply over all leading dimensions (equal ranks >= 2)."""
  nd = _aval(lhs).ndim
  if nd < 2 or nd != _aval(rhs).ndim:
    raise ValueError("batch_matmul requires arguments of equal rank >= 2, got "
                     f"{_aval(lhs).shape} and {_aval(rhs).shape}")
  b = tuple(range(nd - 2))
  return dot_general(lhs, rhs, (((nd - 1,), (nd - 2,)), (b, b)), precision)


# ================================================================= decompositions: helpers


def _linalg_check(name, avals, ranks=None):
  ranks = ranks or (2,) * len(avals)
  for i, (a, r) in enumerate(zip(avals, ranks)):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {a!r}")
    if a.ndim < r:
      raise TypeError(f"Input {i} to {name} must have rank at least {r}, but got shape={a.shape}")
    if a.dtype not in _linalg_dtypes:
      if a.dtype.kind == "f" or a.dtype == dtypes.bfloat16:  # (JAX's CPU lowering: no LAPACK)
        raise NotImplementedError(f"Unsupported dtype {a.dtype.name}.")
      raise TypeError(f"{name} does not accept dtype {a.dtype.name} at position {i}. Accepted "
                      f"dtypes at position {i} are subtypes of floating, complexfloating.")
  return _common_batch(name, avals, ranks)


def _common_batch(name, avals, ranks):
  """The operands' batch shape (all must have it, and one dtype), as JAX's linalg checks."""
  batch = avals[0].shape[:avals[0].ndim - ranks[0]]
  for a, r in zip(avals, ranks):
    if a.shape[:a.ndim - r] != batch:
      raise TypeError(f"All inputs to {name} must have the same batch dimensions, got "
                      f"{[x.shape[:x.ndim - rr] for x, rr in zip(avals, ranks)]}.")
  if len({a.dtype for a in avals}) > 1:
    raise TypeError(f"{name} requires arguments to have the same dtypes, got "
                    f"{', '.join(a.dtype.name for a in avals)}.")
  return batch


def _real_dtype(d):
  return np.dtype({np.dtype(np.complex64): np.float32,
                   np.dtype(np.complex128): np.float64}.get(d, d))


def _flat(x):
  """(batch..., m, n) -> (B, m, n), contiguous."""
  return np.ascontiguousarray(x).reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])


def _linalg_batch(prim):
  """Batch axes to the front (unmapped operands broadcast): these primitives take leading
  batch dimensions natively, so a vmap is one bind."""
  def rule(vals, dims, **params):
    size = next(_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    out = prim.bind(*(batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)), **params)
    return out, ([0] * len(out) if prim.multiple_results else 0)
  return rule


def _spd(rng, shape, d):
  a = _rand(rng, shape, d)
  n = shape[-1]
  return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(d)


_LTOL = {np.dtype(np.float32): (2e-4, 2e-4), np.dtype(np.complex64): (2e-4, 2e-4),
         np.dtype(np.float64): (1e-10, 1e-10), np.dtype(np.complex128): (1e-10, 1e-10)}


_matrix_eager = work_eager(lambda vals, out_aval: vals[0].shape[-1] * vals[0].shape[-2])


def _register(prim, *, numba, numpy, abstract_eval, samples, bad, note, policy=None,
              differentiable=True, reference=None, **meta):
  """Register a decomposition; its policy threshold counts elements PER MATRIX (LAPACK's
  blocked code wins on big matrices, the kernels on small and batched ones). ``numpy=None``:
  the numba kernel is the only eager backend."""
  prim.make_eager = _matrix_eager
  impls = {"numba": numba} if numpy is None else {"numba": numba, "numpy": numpy}
  registry.register(prim, family="linalg", impls=impls,
                    abstract_eval=abstract_eval, batch=_linalg_batch(prim), policy=policy,
                    meta=dict(dtypes=_sorted(_linalg_dtypes), reference=reference or numpy,
                              samples=samples, differentiable=differentiable, linear=False,
                              bad_inputs=bad, note=note, tol=_LTOL, **meta))


# Matrix helpers for the jvp rules (lax ops; shapes static per trace level) ----------------


def _T(x):
  nd = _aval(x).ndim
  return _lax().transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
  x = _T(x)
  return _lax().conj(x) if _aval(x).dtype.kind == "c" else x


def _mm(a, b):
  """The derivative rules' products: at HIGHEST precision, as JAX's rules ask for."""
  return batch_matmul(a, b, Precision.HIGHEST)


def _full(shape, v, dtype):
  return Array(np.full(shape, v, dtype))


def _bcast_const(m, shape):
  """A constant (n, m) matrix broadcast over the leading (batch) dims of ``shape``."""
  return Array(np.ascontiguousarray(np.broadcast_to(m, shape)))


def _mask(x, k, lower):
  aval = _aval(x)
  m, n = aval.shape[-2:]
  tri = np.tril(np.ones((m, n), bool), k) if lower else np.triu(np.ones((m, n), bool), k)
  return _bcast_const(tri, aval.shape)


def _tril(x, k=0):
  aval = _aval(x)
  return _lax().select_n(_mask(x, k, True), _full(aval.shape, 0, aval.dtype), x)


def _triu(x, k=0):
  aval = _aval(x)
  return _lax().select_n(_mask(x, k, False), _full(aval.shape, 0, aval.dtype), x)


def _eye_like(x):
  aval = _aval(x)
  m, n = aval.shape[-2:]
  return _bcast_const(np.eye(m, n, dtype=aval.dtype), aval.shape)


def _diag(x):
  """Diagonal of square matrices (…, n, n) -> (…, n)."""
  aval = _aval(x)
  eye = _bcast_const(np.eye(aval.shape[-1], dtype=bool), aval.shape)
  lax = _lax()
  return lax.reduce_sum(lax.select_n(eye, _full(aval.shape, 0, aval.dtype), x), (aval.ndim - 1,))


def _bcast_vec(v, n, axis):
  """(…, k) -> (…, n, k) (axis=-2: rows repeat v) or (…, k, n) (axis=-1: columns repeat v)."""
  aval = _aval(v)
  nd = aval.ndim
  if axis == -2:
    shape, dims = aval.shape[:-1] + (n, aval.shape[-1]), tuple(range(nd - 1)) + (nd,)
  else:
    shape, dims = aval.shape + (n,), tuple(range(nd))
  return _lax().broadcast_in_dim(v, shape, dims)


def _sym_from_triangle(t, lower):
  """The Hermitian matrix a primitive reading only one triangle sees: tril(t) + tril(t,-1)^H."""
  if lower:
    return _lax().add(_tril(t), _H(_tril(t, -1)))
  return _lax().add(_triu(t), _H(_triu(t, 1)))


def _slice_last2(x, rows, cols):
  aval = _aval(x)
  nd = aval.ndim
  start = [0] * nd
  limit = list(aval.shape)
  start[-2], limit[-2] = rows
  start[-1], limit[-1] = cols
  return _lax().slice(x, start, limit)


def _pad_last2(x, rows, cols):
  """Zero-pad (lo, hi) on the last two axes."""
  aval = _aval(x)
  cfg = [(0, 0, 0)] * (aval.ndim - 2) + [(rows[0], rows[1], 0), (cols[0], cols[1], 0)]
  return _lax().pad(x, np.array(0, aval.dtype)[()], cfg)


# ================================================================= cholesky

cholesky_p = Primitive("cholesky")


def _cholesky_abstract_eval(x):
  _linalg_check("cholesky", [x])
  if x.shape[-1] != x.shape[-2]:
    raise ValueError(f"The input to cholesky must be a square matrix. Got shape {x.shape[-2:]}.")
  return ShapedArray(x.shape, x.dtype)


def _cholesky_numba(x):
  out = np.empty(_flat(x).shape, x.dtype)
  if x.size:
    K.cholesky(_flat(x), out)
  return out.reshape(x.shape)


def _cholesky_numpy(x):
  if x.size == 0:
    return x.copy()
  try:
    out = np.linalg.cholesky(x)
  except np.linalg.LinAlgError:
    flat = _flat(x)
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
      try:
        out[i] = np.linalg.cholesky(m)
      except np.linalg.LinAlgError:
        out[i] = np.nan
    out = out.reshape(x.shape)
  # a NaN read anywhere reaches a diagonal step (potrf's failure); NumPy does not report it
  bad = np.isnan(out).any(axis=(-2, -1))
  if bad.any():
    out[bad] = complex(np.nan, np.nan) if out.dtype.kind == "c" else np.nan
  return out


def _cholesky_jvp(primals, tangents):
  # L_dot = L phi(L^-1 S_dot L^-H), phi = lower triangle with halved diagonal (Murray 2016)
  lax = _lax()
  x, = primals
  sigma_dot = _sym_from_triangle(ad.instantiate_zeros(tangents[0]), True)
  L = cholesky_p.bind(x)
  tmp = triangular_solve(L, sigma_dot, left_side=False, transpose_a=True, conjugate_a=True,
                         lower=True)
  inner = triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True)
  aval = _aval(x)
  n = aval.shape[-1]
  half = _bcast_const((np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)).astype(aval.dtype),
                      aval.shape)
  return L, _mm(L, lax.mul(inner, half))


def _cholesky_samples(rng, d):
  d = np.dtype(d)
  bad = np.array([[1.0, 2.0], [2.0, 1.0]], d)
  return [([_spd(rng, (4, 4), d)], {}), ([_spd(rng, (2, 3, 3), d)], {}),
          ([_spd(rng, (1, 1), d)], {}), ([np.zeros((0, 0), d)], {}),
          ([np.zeros((2, 0, 0), d)], {}), ([np.stack([_spd(rng, (2, 2), d), bad])], {})]


def _cholesky_bad(rng):
  return [([Array(np.ones((2, 3)))], {}, ValueError), ([Array(np.ones(3))], {}, TypeError),
          ([Array(np.ones((2, 2), np.int32))], {}, TypeError)]


_register(cholesky_p, numba=_cholesky_numba, numpy=_cholesky_numpy,
          abstract_eval=_cholesky_abstract_eval, samples=_cholesky_samples, bad=_cholesky_bad,
          policy=("numba", "numba", 1 << 62), reference=_cholesky_numpy,
          note="numba (LAPACK potrf from 32x32, as jit's FFI call); NaNs on failure as JAX")
cholesky_p.jvp = _cholesky_jvp


def symmetrize(x):
  """``(x + x^H) / 2``."""
  lax = _lax()
  return lax.div(lax.add(x, _H(x)), Array(np.array(2, _aval(x).dtype)))


def cholesky(x, *, symmetrize_input=True):
  """Lower Cholesky factor ``L`` of Hermitian positive-definite ``x`` (``x = L L^H``); NaNs
  where the factorization fails. Batched over leading dimensions."""
  if symmetrize_input:
    x = symmetrize(x)
  return _tril(cholesky_p.bind(x))  # (JAX's: a failure's NaNs fill the lower triangle only)


# ================================================================= triangular_solve

triangular_solve_p = Primitive("triangular_solve")
_TS_PARAMS = ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal")


def _ts_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  _linalg_check("triangular_solve", [a, b])
  if a.shape[-1] != a.shape[-2]:
    raise ValueError("The first input to triangular_solve must be a square matrix. Got shape "
                     f"{a.shape[-2:]}.")
  if a.shape[-1] != b.shape[-2 if left_side else -1]:
    raise ValueError(f"Incompatible shapes for arguments to triangular_solve: {a.shape} and "
                     f"{b.shape}.")
  return ShapedArray(b.shape, b.dtype, b.weak_type)


def _ts_normalize(a, b, left_side, lower, transpose_a, conjugate_a):
  """Reduce every variant to ``M @ X = B`` with M read in its ``lower`` (bool) triangle."""
  A = _flat(a)
  Bm = _flat(b)
  if conjugate_a and A.dtype.kind == "c":
    A = np.conj(A)
  t = transpose_a
  if not left_side:  # X op(A) = B  <=>  op(A)^T X^T = B^T
    t = not t
    Bm = np.swapaxes(Bm, -1, -2)
  if t:
    A = np.swapaxes(A, -1, -2)
    lower = not lower
  return np.ascontiguousarray(A), np.ascontiguousarray(Bm), lower


def _ts_numba(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  if b.size == 0:
    return np.zeros(b.shape, b.dtype)
  A, Bm, low = _ts_normalize(a, b, left_side, lower, transpose_a, conjugate_a)
  out = np.empty_like(Bm)
  K.trsm_left(A, Bm, out, low, unit_diagonal)
  if not left_side:
    out = np.swapaxes(out, -1, -2)
  return np.ascontiguousarray(out).reshape(b.shape)


def _ts_numpy(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  if b.size == 0:
    return np.zeros(b.shape, b.dtype)
  A, Bm, low = _ts_normalize(a, b, left_side, lower, transpose_a, conjugate_a)
  m = A.shape[-1]
  out = np.array(Bm)
  for i in (range(m) if low else range(m - 1, -1, -1)):  # substitution, one row at a time
    ks = slice(0, i) if low else slice(i + 1, m)
    out[:, i] -= np.einsum("bk,bkj->bj", A[:, i, ks], out[:, ks])
    if not unit_diagonal:
      out[:, i] *= (1 / A[:, i, i])[:, None]
  if not left_side:
    out = np.swapaxes(out, -1, -2)
  return np.ascontiguousarray(out).reshape(b.shape).astype(b.dtype, copy=False)


def _ts_jvp_a(g_a, ans, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  lax = _lax()
  k = 1 if unit_diagonal else 0
  g_a = _tril(g_a, -k) if lower else _triu(g_a, k)
  g_a = lax.neg(g_a)
  g_a = _T(g_a) if transpose_a else g_a
  g_a = lax.conj(g_a) if conjugate_a and _aval(g_a).dtype.kind == "c" else g_a
  params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
  inv = lambda rhs: triangular_solve_p.bind(a, rhs, **params)
  m, n = _aval(b).shape[-2:]
  if left_side:
    return inv(_mm(g_a, ans)) if m > n else _mm(inv(g_a), ans)
  return inv(_mm(ans, g_a)) if m < n else _mm(ans, inv(g_a))


def _ts_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  if ad.is_undefined_primal(a):
    raise NotImplementedError("triangular_solve: transposition with respect to the matrix `a` "
                              "is not defined (triangular_solve is not linear in `a`)")
  if type(ct) is ad.Zero:
    return [None, ad.Zero(b.aval)]
  return [None, triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                        transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                        unit_diagonal=unit_diagonal)]


def _ts_samples(rng, d):
  d = np.dtype(d)
  out = []
  tri = lambda *s: (_rand(rng, s, d) + 4 * np.eye(s[-1])).astype(d)
  for left_side in (True, False):
    for lower in (True, False):
      for transpose_a in (False, True):
        for conjugate_a, unit in ((False, False), (True, True)):
          b = _rand(rng, (3, 2) if left_side else (2, 3), d)
          out.append(([tri(3, 3), b], dict(left_side=left_side, lower=lower,
                                           transpose_a=transpose_a, conjugate_a=conjugate_a,
                                           unit_diagonal=unit)))
  p = dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False)
  out.append(([tri(2, 4, 4), _rand(rng, (2, 4, 5), d)], p))
  out.append(([tri(3, 3), np.zeros((3, 0), d)], p))
  return out


def _ts_bad(rng):
  p = dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=False)
  a = Array(np.eye(3))
  return [([a, Array(np.ones((4, 2)))], p, ValueError),
          ([Array(np.ones((3, 2))), Array(np.ones((3, 2)))], p, ValueError),
          ([a, Array(np.ones((3, 2), np.float32))], p, TypeError),
          ([a, Array(np.ones(3))], p, TypeError)]


_register(triangular_solve_p, numba=_ts_numba, numpy=_ts_numpy, abstract_eval=_ts_abstract_eval,
          samples=_ts_samples, bad=_ts_bad, policy=("numba", "numba", 1 << 62),
          note="numba trsm; conjugate_a (complex): A conjugated by NumPy; left_side=False "
               "or transpose_a: operands (and for left_side=False the result) transposed by "
               "NumPy copies; numpy backend: substitution row by row (BLAS trsm's special "
               "values)")
ad.defjvp2(triangular_solve_p, _ts_jvp_a,
           lambda g_b, ans, a, b, **kw: triangular_solve_p.bind(a, g_b, **kw))
triangular_solve_p.transpose = _ts_transpose


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
  """Solve ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``;
  ``op`` transposes and/or conjugates ``a``. A ``b`` of one rank less is a vector."""
  conjugate_a = bool(conjugate_a) and _aval(a).dtype.kind == "c"
  singleton = _aval(b).ndim == _aval(a).ndim - 1
  lax = _lax()
  if singleton:
    bs = _aval(b).shape
    b = lax.reshape(b, bs + (1,) if left_side else bs[:-1] + (1, bs[-1]))
  out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                transpose_a=bool(transpose_a), conjugate_a=conjugate_a,
                                unit_diagonal=bool(unit_diagonal))
  if singleton:
    out = lax.reshape(out, bs)
  return out


# ================================================================= lu

lu_p = Primitive("lu")
lu_p.multiple_results = True


def _lu_abstract_eval(x):
  batch = _linalg_check("lu", [x])
  m, n = x.shape[-2:]
  i32 = np.dtype(np.int32)
  return [ShapedArray(x.shape, x.dtype), ShapedArray(batch + (min(m, n),), i32),
          ShapedArray(batch + (m,), i32)]


def _lu_numba(x):
  m, n = x.shape[-2:]
  batch = x.shape[:-2]
  f = _flat(x)
  lu = np.empty_like(f)
  piv = np.empty((f.shape[0], min(m, n)), np.int32)
  perm = np.empty((f.shape[0], m), np.int32)
  if f.shape[0]:
    K.lu(f, lu, piv, perm)
  return [lu.reshape(x.shape), piv.reshape(batch + (min(m, n),)), perm.reshape(batch + (m,))]


def _lu_numpy(x):
  """getf2 as a column loop over NumPy ops, vectorised over the batch (NumPy has no LU)."""
  m, n = x.shape[-2:]
  batch = x.shape[:-2]
  A = _flat(x).copy()
  B = A.shape[0]
  k = min(m, n)
  piv = np.zeros((B, k), np.int32)
  perm = np.tile(np.arange(m, dtype=np.int32), (B, 1))
  rows = np.arange(B)
  for j in range(k):
    col = A[:, j:, j]
    p = j + np.argmax(np.abs(col.real) + np.abs(col.imag), axis=1)
    piv[:, j] = p
    nz = A[rows, p, j] != 0
    sw = nz & (p != j)
    if sw.any():
      r = rows[sw]
      A[r, j], A[r, p[sw]] = A[r, p[sw]].copy(), A[r, j].copy()
      perm[r, j], perm[r, p[sw]] = perm[r, p[sw]].copy(), perm[r, j].copy()
    d = np.where(nz, A[:, j, j], 1)
    A[:, j + 1:, j] = np.where(nz[:, None], A[:, j + 1:, j] / d[:, None], A[:, j + 1:, j])
    A[:, j + 1:, j + 1:] -= A[:, j + 1:, j, None] * A[:, j, None, j + 1:]
  return [A.reshape(x.shape), piv.reshape(batch + (k,)), perm.reshape(batch + (m,))]


def _lu_jvp(primals, tangents):
  # De Hoog, Anderssen & Lukas: L' = L tril(L^-1 P A' U^-1, -1), U' = triu(L^-1 P A' U^-1) U
  lax = _lax()
  a, = primals
  a_dot = ad.instantiate_zeros(tangents[0])
  lu, pivots, perm = lu_p.bind(a)
  aval = _aval(a)
  m, n = aval.shape[-2:]
  k = min(m, n)
  dt = aval.dtype
  eye = lambda s: _bcast_const(np.eye(s, dtype=dt), aval.shape[:-2] + (s, s))
  l = lax.add(_pad_last2(_tril(_slice_last2(lu, (0, m), (0, k)), -1), (0, 0), (0, m - k)), eye(m))
  u = _pad_last2(_triu(_slice_last2(lu, (0, k), (0, n))), (0, n - k), (0, 0))
  if n > k:
    u = lax.add(u, _pad_last2(eye(n - k), (k, 0), (k, 0)))
  # P a_dot with P[i, j] = (perm[i] == j), a one-hot built from the (integer) permutation
  iota = _bcast_const(np.arange(m, dtype=np.int32), aval.shape[:-2] + (m, m))
  P = lax.convert_element_type(lax.eq(_bcast_vec(perm, m, -1), iota), dt)
  la = triangular_solve_p.bind(l, _mm(P, a_dot), left_side=True, lower=True, transpose_a=False,
                               conjugate_a=False, unit_diagonal=True)
  lau = triangular_solve_p.bind(u, la, left_side=False, lower=False, transpose_a=False,
                                conjugate_a=False, unit_diagonal=False)
  lu_dot = lax.add(_mm(l, _tril(lau, -1)), _mm(_triu(lau), u))
  return [lu, pivots, perm], [lu_dot, ad.Zero.from_primal_value(pivots),
                              ad.Zero.from_primal_value(perm)]


def _lu_samples(rng, d):
  d = np.dtype(d)
  r = lambda *s: _rand(rng, s, d)
  return [([r(4, 4)], {}), ([r(5, 3)], {}), ([r(3, 5)], {}), ([r(2, 3, 3)], {}),
          ([np.zeros((0, 0), d)], {}), ([r(1, 1)], {})]  # singular inputs: tests/test_linalg.py


def _lu_bad(rng):
  return [([Array(np.ones(3))], {}, TypeError), ([Array(np.ones((2, 2), np.int32))], {}, TypeError)]


_register(lu_p, numba=_lu_numba, numpy=_lu_numpy, abstract_eval=_lu_abstract_eval,
          samples=_lu_samples, bad=_lu_bad, policy=("numba", "numba", 1 << 62),
          note="numpy backend: getf2 column loop in Python (NumPy has no LU)")
lu_p.jvp = _lu_jvp


def lu(x):
  """LU with partial pivoting: ``(lu, pivots, permutation)`` with ``x[permutation] = L @ U``."""
  return tuple(lu_p.bind(x))


# ================================================================= qr

qr_p = Primitive("qr")
qr_p.multiple_results = True


def _qr_abstract_eval(x, *, pivoting, full_matrices, use_magma):
  batch = _linalg_check("qr", [x])
  m, n = x.shape[-2:]
  k = m if full_matrices else min(m, n)
  return [ShapedArray(batch + (m, k), x.dtype), ShapedArray(batch + (k, n), x.dtype)] + (
      [ShapedArray(batch + (n,), np.dtype(np.int32))] if pivoting else [])


def _qr_numba(x, *, pivoting, full_matrices, use_magma):
  m, n = x.shape[-2:]
  k = m if full_matrices else min(m, n)
  f = _flat(x)
  q = np.empty((f.shape[0], m, k), x.dtype)
  r = np.empty((f.shape[0], k, n), x.dtype)
  p = np.empty((f.shape[0], n), np.int32)
  if f.shape[0]:
    if pivoting:
      K.qr_pivoted(f, q, r, p)
    else:
      K.qr(f, q, r)
  out = [q.reshape(x.shape[:-2] + (m, k)), r.reshape(x.shape[:-2] + (k, n))]
  return out + [p.reshape(x.shape[:-2] + (n,))] if pivoting else out


def _qr_numpy(x, *, pivoting, full_matrices, use_magma):
  m, n = x.shape[-2:]
  if x.size == 0 or pivoting:
    return _qr_numba(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
  q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
  return [q, r]


def _thin_qr_jvp(q, r, dx):
  lax = _lax()
  dx_rinv = triangular_solve_p.bind(r, dx, left_side=False, lower=False, transpose_a=False,
                                    conjugate_a=False, unit_diagonal=False)
  qt_dx_rinv = _mm(_H(q), dx_rinv)
  low = _tril(qt_dx_rinv, -1)
  do = lax.sub(low, _H(low))  # skew-Hermitian
  if _aval(do).dtype.kind == "c":
    im = lax.sub(qt_dx_rinv, lax.convert_element_type(lax.real(qt_dx_rinv), _aval(do).dtype))
    do = lax.add(do, lax.mul(_eye_like(do), im))
  dq = lax.add(_mm(q, lax.sub(do, qt_dx_rinv)), dx_rinv)
  dr = _mm(lax.sub(qt_dx_rinv, do), r)
  return dq, dr


def _qr_jvp(primals, tangents, *, pivoting, full_matrices, use_magma):
  lax = _lax()
  x, = primals
  dx = ad.instantiate_zeros(tangents[0])
  if pivoting:  # X P = Q R: the rule of the unpivoted QR of X P, with P held fixed
    q, r, p = qr_p.bind(x, pivoting=True, full_matrices=full_matrices, use_magma=use_magma)
    from nbjax.numpy import take_along_axis
    xp = take_along_axis(x, lax.expand_dims(p, (p.ndim - 1,)), axis=-1)
    dxp = take_along_axis(dx, lax.expand_dims(p, (p.ndim - 1,)), axis=-1)
    (q, r), (dq, dr) = _qr_jvp((xp,), (dxp,), pivoting=False, full_matrices=full_matrices,
                               use_magma=use_magma)
    return [q, r, p], [dq, dr, ad.Zero.from_primal_value(p)]
  q, r = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
  m, n = _aval(x).shape[-2:]
  if m < n:  # wide: X = [X1 X2], R = [R1 R2]; square rule on X1, dR2 = dQ^H X2 + Q^H dX2
    dq, dr1 = _thin_qr_jvp(q, _slice_last2(r, (0, m), (0, m)), _slice_last2(dx, (0, m), (0, m)))
    x2, dx2 = _slice_last2(x, (0, m), (m, n)), _slice_last2(dx, (0, m), (m, n))
    dr2 = lax.add(_mm(_H(dq), x2), _mm(_H(q), dx2))
    return [q, r], [dq, lax.add(_pad_last2(dr1, (0, 0), (0, n - m)),
                                _pad_last2(dr2, (0, 0), (m, 0)))]
  if full_matrices and m > n:
    # tall, complete: the thin rule on the first n columns; the complement Q2 follows from
    # Q1 = [Q11; Q21] through Householder's construction: Q2 = [Q11 - I; Q21] Z-ish, with
    # Z^H = (Q11 - I)^-H Q21^H, dQ2 = dQ1 Z^H - (Q1 + Q2 Z) (dQ21 - Z dQ11)^H
    from nbjax.numpy import linalg as jla
    q1, q2 = _slice_last2(q, (0, m), (0, n)), _slice_last2(q, (0, m), (n, m))
    dq1, dr1 = _thin_qr_jvp(q1, _slice_last2(r, (0, n), (0, n)), dx)
    q11, q21 = _slice_last2(q1, (0, n), (0, n)), _slice_last2(q1, (n, m), (0, n))
    dq11, dq21 = _slice_last2(dq1, (0, n), (0, n)), _slice_last2(dq1, (n, m), (0, n))
    zh = jla.solve(_H(lax.sub(q11, _eye_like(q11))), _H(q21))
    z = _H(zh)
    dq2 = lax.sub(_mm(dq1, zh), _mm(lax.add(q1, _mm(q2, z)), _H(lax.sub(dq21, _mm(z, dq11)))))
    return [q, r], [lax.concatenate([dq1, dq2], _aval(dq1).ndim - 1),
                    _pad_last2(dr1, (0, m - n), (0, 0))]
  dq, dr = _thin_qr_jvp(q, r, dx)
  return [q, r], [dq, dr]


def _qr_samples(rng, d):
  d = np.dtype(d)
  r = lambda *s: _rand(rng, s, d)
  p = lambda full: dict(pivoting=False, full_matrices=full, use_magma=None)
  return [([r(4, 4)], p(True)), ([r(5, 3)], p(False)), ([r(3, 5)], p(True)),
          ([r(3, 5)], p(False)), ([r(2, 4, 3)], p(False)), ([r(1, 1)], p(True))]


def _qr_bad(rng):
  p = dict(pivoting=False, full_matrices=True, use_magma=None)
  return [([Array(np.ones(3))], p, TypeError), ([Array(np.ones((2, 2), np.int32))], p, TypeError)]


_register(qr_p, numba=_qr_numba, numpy=_qr_numpy, abstract_eval=_qr_abstract_eval,
          samples=_qr_samples, bad=_qr_bad, policy=("numba", "numpy", 1 << 10),
          note="numpy (LAPACK geqrf/orgqr) from 32x32 matrices")
qr_p.jvp = _qr_jvp


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
  """QR decomposition ``x = q @ r``: ``q`` unitary ``(…, m, m)`` (``(…, m, min(m, n))`` if not
  ``full_matrices``), ``r`` upper triangular. With ``pivoting`` (LAPACK ?geqp3's column
  choice), ``(q, r, p)``: ``x[..., p] = q @ r``, ``p`` int32 column indices."""
  return tuple(qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices),
                         use_magma=use_magma))


# ================================================================= eigh

eigh_p = Primitive("eigh")
eigh_p.multiple_results = True


def _eigh_abstract_eval(x, *, lower, sort_eigenvalues, subset_by_index):
  batch = _linalg_check("eigh", [x])
  n = x.shape[-1]
  if x.shape[-2] != n:
    raise ValueError("eigh: Argument to symmetric eigendecomposition must have shape [..., n, n], "
                     f"got shape {x.shape}")
  d = n if subset_by_index is None else subset_by_index[1] - subset_by_index[0]
  if subset_by_index is not None and not 0 <= subset_by_index[0] <= subset_by_index[1] <= n:
    raise ValueError(f"eigh: invalid subset_by_index {subset_by_index} for n={n}")
  return [ShapedArray(batch + (n, d), x.dtype), ShapedArray(batch + (d,), _real_dtype(x.dtype))]


def _eigh_subset(v, w, subset_by_index):
  if subset_by_index is None:
    return v, w
  lo, hi = subset_by_index
  return np.ascontiguousarray(v[..., lo:hi]), np.ascontiguousarray(w[..., lo:hi])


def _eigh_numba(x, *, lower, sort_eigenvalues, subset_by_index):
  n = x.shape[-1]
  f = _flat(x)
  v = np.empty(f.shape, x.dtype)
  w = np.empty(f.shape[:-1], _real_dtype(x.dtype))
  if f.shape[0] and n:
    K.eigh(f, v, w, bool(lower))
  v, w = _eigh_subset(v.reshape(x.shape), w.reshape(x.shape[:-1]), subset_by_index)
  return [v, w]


def _eigh_numpy(x, *, lower, sort_eigenvalues, subset_by_index):
  if x.size == 0:
    return _eigh_numba(x, lower=lower, sort_eigenvalues=sort_eigenvalues,
                       subset_by_index=subset_by_index)
  w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
  return list(_eigh_subset(v, w, subset_by_index))


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues, subset_by_index):
  # nondegenerate perturbation theory (JAX's rule), on the Hermitian matrix actually read
  lax = _lax()
  a, = primals
  n = _aval(a).shape[-1]
  if not (subset_by_index is None or tuple(subset_by_index) == (0, n)):
    raise NotImplementedError("Derivatives not defined for partial eigen decomposition.")
  a_dot = _sym_from_triangle(ad.instantiate_zeros(tangents[0]), lower)
  v, w_real = eigh_p.bind(a, lower=lower, sort_eigenvalues=sort_eigenvalues,
                          subset_by_index=subset_by_index)
  dt = _aval(a).dtype
  w = lax.convert_element_type(w_real, dt) if dt.kind == "c" else w_real
  eye = _eye_like(a)
  one = Array(np.ones(_aval(a).shape, dt))
  fmat = lax.sub(lax.div(one, lax.add(eye, lax.sub(_bcast_vec(w, n, -2), _bcast_vec(w, n, -1)))),
                 eye)
  vdag_adot_v = _mm(_mm(_H(v), a_dot), v)
  dv = _mm(v, lax.mul(fmat, vdag_adot_v))
  dw = _diag(lax.real(vdag_adot_v) if dt.kind == "c" else vdag_adot_v)
  return [v, w_real], [dv, dw]


def _eigh_samples(rng, d):
  d = np.dtype(d)
  p = dict(lower=True, sort_eigenvalues=True, subset_by_index=None)
  sym = lambda *s: (lambda a: (a + np.conj(np.swapaxes(a, -1, -2))).astype(d))(_rand(rng, s, d))
  return [([sym(4, 4)], p), ([sym(2, 3, 3)], dict(p, lower=False)), ([sym(1, 1)], p),
          ([np.zeros((0, 0), d)], p)]


def _eigh_bad(rng):
  p = dict(lower=True, sort_eigenvalues=True, subset_by_index=None)
  return [([Array(np.ones((2, 3)))], p, ValueError), ([Array(np.ones((2, 2), np.int8))], p,
                                                      TypeError)]


_register(eigh_p, numba=_eigh_numba, numpy=_eigh_numpy, abstract_eval=_eigh_abstract_eval,
          samples=_eigh_samples, bad=_eigh_bad, policy=("numba", "numba", 1 << 62),
          note="LAPACK syevd/heevd through numba's binding (SciPy's LAPACK, which jit's FFI "
               "call runs too: the same bits; NumPy's OpenBLAS rounds otherwise); "
               "subset_by_index: the kept eigenpairs copied out by NumPy")
eigh_p.jvp = _eigh_jvp


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None,
         implementation=None):
  """Eigendecomposition of Hermitian ``x``: ``(v, w)``, ``w`` ascending, ``v[..., :, i]`` the
  eigenvector of ``w[..., i]``. ``implementation`` (an ``EighImplementation``) is accepted;
  the CPU runs LAPACK for every one."""
  if symmetrize_input:
    x = symmetrize(x)
  v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                     subset_by_index=None if subset_by_index is None else tuple(subset_by_index))
  return v, w


# ================================================================= eig

eig_p = Primitive("eig")
eig_p.multiple_results = True

def _complex_dtype(d):
  return np.dtype({np.dtype(np.float32): np.complex64,
                   np.dtype(np.float64): np.complex128}.get(np.dtype(d), d))


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors, use_magma):
  _linalg_check("eig", [x])
  if x.shape[-2] != x.shape[-1]:
    raise ValueError(f"The input to eig must be a square matrix. Got shape {x.shape[-2:]}.")
  d = _complex_dtype(x.dtype)
  count = bool(compute_left_eigenvectors) + bool(compute_right_eigenvectors)
  return [ShapedArray(x.shape[:-1], d)] + [ShapedArray(x.shape, d)] * count


def _eig_numba(x, *, compute_left_eigenvectors, compute_right_eigenvectors, use_magma):
  left, right = bool(compute_left_eigenvectors), bool(compute_right_eigenvectors)
  f = _flat(x)
  B, n = f.shape[:2]
  d = _complex_dtype(x.dtype)
  w = np.empty((B, n), d)
  vl = np.empty(f.shape if left else (B, 0, 0), d)
  vr = np.empty(f.shape if right else (B, 0, 0), d)
  if B and n:
    K.eig(f, w, vl, vr, left, right)
  return ([w.reshape(x.shape[:-1])] + ([vl.reshape(x.shape)] if left else [])
          + ([vr.reshape(x.shape)] if right else []))


def _eig_reference(x, *, compute_left_eigenvectors, compute_right_eigenvectors, use_magma):
  """SciPy's geev wrapper (the same LAPACK routine as the kernel: equal eigenvector phases
  and eigenvalue order), per matrix; tests only."""
  from scipy import linalg as sl
  d = _complex_dtype(x.dtype)
  f = _flat(x)
  n = f.shape[-1]
  outs = [np.empty(f.shape[:-1], d), np.empty(f.shape, d), np.empty(f.shape, d)]
  for b in range(f.shape[0] if n else 0):
    for o, r in zip(outs, sl.eig(f[b], left=True, right=True)):
      o[b] = r
  outs = [outs[0].reshape(x.shape[:-1]), outs[1].reshape(x.shape), outs[2].reshape(x.shape)]
  return [outs[0]] + outs[1:2] * bool(compute_left_eigenvectors) + outs[2:] * bool(
      compute_right_eigenvectors)


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             use_magma):
  # eigenvalues only (JAX's rule): dw_i = (vr^-1 da vr)_ii
  if compute_left_eigenvectors or compute_right_eigenvectors:
    raise NotImplementedError(
        "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the "
        "input that JAX cannot check (see the enable_eigvec_derivs argument to "
        "jax.lax.linalg.eig). Pass enable_eigvec_derivs=True to jax.lax.linalg.eig to opt in. "
        "See https://github.com/jax-ml/jax/issues/2748 for discussion.")
  from nbjax.numpy import linalg as jla
  lax = _lax()
  a, = primals
  w, vr = eig_p.bind(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True,
                     use_magma=use_magma)
  da = lax.convert_element_type(ad.instantiate_zeros(tangents[0]), _aval(vr).dtype)
  dw = lax.reduce_sum(lax.mul(jla.solve(vr, da), _T(vr)), (_aval(vr).ndim - 1,))
  return [w], [dw]


def _eig_matrix(rng, shape, d):
  """Random matrices with well-separated eigenvalues (real ones for real ``d``): ``P diag P^-1``
  with a well-conditioned ``P``."""
  n = shape[-1]
  p = _rand(rng, shape, d) + 2 * np.eye(n, dtype=d) if n else np.zeros(shape, d)
  lam = np.arange(1, n + 1) * (-1.0) ** np.arange(n)
  return (p * lam[..., None, :]) @ np.linalg.inv(p) if n else p


def _eig_samples(rng, d):
  d = np.dtype(d)
  p = dict(compute_left_eigenvectors=True, compute_right_eigenvectors=True, use_magma=None)
  vals = dict(p, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
  right = dict(p, compute_left_eigenvectors=False)
  return [([_eig_matrix(rng, (3, 3), d).astype(d)], vals),
          ([_eig_matrix(rng, (2, 4, 4), d).astype(d)], vals),
          ([_rand(rng, (4, 4), d)], p), ([_rand(rng, (2, 3, 3), d)], right),
          ([_rand(rng, (1, 1), d)], dict(p, compute_right_eigenvectors=False)),
          ([np.zeros((0, 0), d)], p), ([np.zeros((2, 0, 0), d)], vals)]


def _square_bad(p):
  """Bad inputs of a square-matrix primitive with params ``p``: not square, integer, 1-D."""
  return [([Array(np.ones((2, 3)))], p, ValueError),
          ([Array(np.ones((2, 2), np.int32))], p, TypeError),
          ([Array(np.ones((3,)))], p, TypeError)]


def _eig_bad(rng):
  return _square_bad(dict(compute_left_eigenvectors=True, compute_right_eigenvectors=True,
                          use_magma=None))


_register(eig_p, numba=_eig_numba, numpy=None, abstract_eval=_eig_abstract_eval,
          samples=_eig_samples, bad=_eig_bad, reference=_eig_reference,
          jvp_order=1,  # the eigenvalues' jvp reads the eigenvectors (JAX's rule)
          jvp_undefined=lambda params: bool(params["compute_left_eigenvectors"]
                                            or params["compute_right_eigenvectors"]),
          note="LAPACK geev through numba's binding (sgeev/dgeev for real input, eigenvector "
               "pairs unpacked to complex; cgeev/zgeev), eagerly and under jit (an FFI call to "
               "the same kernel); reference: scipy.linalg.eig")
eig_p.jvp = _eig_jvp


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
  """Eigendecomposition of a general matrix.

  Args:
    x: A batch of square matrices with shape ``[..., n, n]``.
    compute_left_eigenvectors: If true, the left eigenvectors will be computed.
    compute_right_eigenvectors: If true, the right eigenvectors will be computed.
    enable_eigvec_derivs: If true, the eigenvectors are differentiable (first-order
      perturbation theory, valid for distinct eigenvalues, through LAPACK's normalization:
      unit 2-norm, largest component real); else differentiating them raises.
    implementation: An ``EigImplementation``, accepted; the CPU runs LAPACK geev.
    use_magma: Accepted for JAX compatibility; unused (CPU only).

  Returns:
    A list ``[w, vl, vr]`` (complex): the eigenvalues ``w``, the left eigenvectors ``vl``
    (``vl[..., :, i]^H x = w[..., i] vl[..., :, i]^H``) and the right eigenvectors ``vr``
    (``x vr[..., :, i] = w[..., i] vr[..., :, i]``), ``vl``/``vr`` only where requested; each
    eigenvector has unit 2-norm with its largest component real (LAPACK geev). A matrix the
    decomposition fails on (non-finite entries, no convergence) gives NaNs.
  """
  left, right = bool(compute_left_eigenvectors), bool(compute_right_eigenvectors)
  if enable_eigvec_derivs and (left or right):
    return _eig_vec_diff(x, left, right, use_magma)
  return eig_p.bind(x, compute_left_eigenvectors=left, compute_right_eigenvectors=right,
                    use_magma=use_magma)


def _eig_vec_diff_fn(x, left, right, use_magma):
  return eig_p.bind(x, compute_left_eigenvectors=left, compute_right_eigenvectors=right,
                    use_magma=use_magma)


def _eig_vec_tangent(w, v, da):
  """(dw, dv) for ``a v = v diag(w)`` perturbed by ``da``, distinct eigenvalues: with
  ``P = v^-1 da v``, ``dw = diag(P)`` and ``dv = v (F * P) + v diag(c)``, ``F_ij =
  1 / (w_j - w_i)`` off the diagonal; ``c`` keeps LAPACK's gauge (each column of unit norm,
  its largest-magnitude component real)."""
  from nbjax.numpy import linalg as jla
  lax = _lax()
  n = w.shape[-1]
  eye = np.eye(n, dtype=w.dtype)
  gap = w[..., None, :] - w[..., :, None] + eye
  F = lax.div(np.ones((), w.dtype), gap) - eye
  P = jla.solve(v, da) @ v
  dw = lax.reduce_sum(P * eye, (P.ndim - 1,))
  U = v @ (F * P)
  k = lax.argmax(lax.abs(v), v.ndim - 2, np.int32)
  mask = lax.convert_element_type(
      lax.eq(lax.broadcasted_iota(np.int32, v.shape, v.ndim - 2), lax.expand_dims(k, (v.ndim - 2,))),
      v.dtype)
  re = lax.reduce_sum(lax.real(lax.conj(v) * U), (v.ndim - 2,))
  im = lax.reduce_sum(lax.imag(mask * U), (v.ndim - 2,)) / lax.reduce_sum(lax.real(mask * v),
                                                                         (v.ndim - 2,))
  c = lax.complex(-re, -im)
  return dw, U + v * lax.expand_dims(c, (v.ndim - 2,))


def _eig_vec_diff_jvp(left, right, use_magma, primals, tangents):
  lax = _lax()
  a, = primals
  da, = tangents
  outs = _eig_vec_diff(a, left, True, use_magma)
  w, vr = outs[0], outs[-1]
  da = lax.convert_element_type(da, vr.dtype)
  dw, dvr = _eig_vec_tangent(w, vr, da)
  primal, tangent = [w], [dw]
  if left:
    _, dvl = _eig_vec_tangent(lax.conj(w), outs[1], lax.conj(_T(da)))
    primal.append(outs[1])
    tangent.append(dvl)
  if right:
    primal.append(vr)
    tangent.append(dvr)
  return primal, tangent


def _make_eig_vec_diff():
  from nbjax.custom_derivatives import custom_jvp
  f = custom_jvp(_eig_vec_diff_fn, nondiff_argnums=(1, 2, 3))
  f.defjvp(_eig_vec_diff_jvp)
  return f


def _eig_vec_diff(x, left, right, use_magma):
  global _eig_vec_diff
  _eig_vec_diff = _make_eig_vec_diff()  # (built on first use: custom_derivatives imports lax)
  return _eig_vec_diff(x, left, right, use_magma)


# ================================================================= svd

svd_p = Primitive("svd")
svd_p.multiple_results = True


def _svd_abstract_eval(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
  batch = _linalg_check("svd", [x])
  m, n = x.shape[-2:]
  rank = min(m, n)
  if subset_by_index is not None:
    if full_matrices and tuple(subset_by_index) != (0, rank):
      raise ValueError("svd: full_matrices and subset_by_index cannot both be set")
    rank = min(rank, subset_by_index[1] - subset_by_index[0])
  s = ShapedArray(batch + (rank,), _real_dtype(x.dtype))
  if not compute_uv:
    return [s]
  return [s, ShapedArray(batch + (m, m if full_matrices else rank), x.dtype),
          ShapedArray(batch + (n if full_matrices else rank, n), x.dtype)]


def _svd_subset(outs, subset_by_index, compute_uv):
  if subset_by_index is None:
    return outs
  lo, hi = subset_by_index
  s = outs[0][..., lo:hi]
  if not compute_uv:
    return [np.ascontiguousarray(s)]
  return [np.ascontiguousarray(s), np.ascontiguousarray(outs[1][..., :, lo:hi]),
          np.ascontiguousarray(outs[2][..., lo:hi, :])]


def _svd_numba(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
  m, n = x.shape[-2:]
  k = min(m, n)
  f = _flat(x)
  B = f.shape[0]
  s = np.empty((B, k), _real_dtype(x.dtype))
  u = np.empty((B, m, m if full_matrices else k), x.dtype)
  vt = np.empty((B, n if full_matrices else k, n), x.dtype)
  if B and k:
    K.svd(f, s, u, vt, bool(full_matrices))
  elif B:  # empty matrices: identity bases, as LAPACK
    u[:] = np.eye(*u.shape[1:])
    vt[:] = np.eye(*vt.shape[1:])
  batch = x.shape[:-2]
  outs = [s.reshape(batch + s.shape[1:]), u.reshape(batch + u.shape[1:]),
          vt.reshape(batch + vt.shape[1:])]
  return _svd_subset(outs if compute_uv else outs[:1], subset_by_index, compute_uv)


def _svd_numpy(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
  if x.size == 0 or _real_dtype(x.dtype) == np.float32:
    # (empty; or single precision: NumPy's sgesdd/cgesdd round otherwise and pick other
    # singular vectors' signs than the LAPACK jit calls, which numba's binding is)
    return _svd_numba(x, full_matrices=full_matrices, compute_uv=compute_uv,
                      subset_by_index=subset_by_index, algorithm=algorithm)
  if not compute_uv:
    return _svd_subset([np.linalg.svd(x, compute_uv=False)], subset_by_index, False)
  u, s, vt = np.linalg.svd(x, full_matrices=full_matrices)
  return _svd_subset([s, u, vt], subset_by_index, True)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm):
  lax = _lax()
  A, = primals
  dA = ad.instantiate_zeros(tangents[0])
  m, n = _aval(A).shape[-2:]
  if compute_uv and full_matrices and m != n:
    raise NotImplementedError("Singular value decomposition JVP not implemented for full "
                              "matrices")
  s, U, Vt = svd_p.bind(A, full_matrices=False, compute_uv=True, subset_by_index=subset_by_index,
                        algorithm=algorithm)
  dt = _aval(A).dtype
  cplx = dt.kind == "c"
  to_dt = (lambda v: lax.convert_element_type(v, dt)) if cplx else (lambda v: v)
  Ut, V = _H(U), _H(Vt)
  dS = _mm(_mm(Ut, dA), V)
  ds = _diag(lax.real(dS) if cplx else dS)
  if not compute_uv:
    return [s], [ds]
  k = _aval(s).shape[-1]
  s_row = _bcast_vec(s, k, -2)   # [i, j] = s_j
  s_col = _bcast_vec(s, k, -1)   # [i, j] = s_i
  s_diffs = lax.mul(lax.add(s_row, s_col), lax.sub(s_row, s_col))
  eye_r = _eye_like(s_diffs)
  F = lax.sub(lax.div(Array(np.ones(_aval(s_diffs).shape, _aval(s_diffs).dtype)),
                      lax.add(s_diffs, eye_r)), eye_r)
  dSS = lax.mul(to_dt(s_row), dS)
  SdS = lax.mul(to_dt(s_col), dS)
  s_zeros = lax.convert_element_type(lax.eq(s, Array(np.zeros(_aval(s).shape, _aval(s).dtype))),
                                     _aval(s).dtype)
  s_inv = lax.sub(lax.div(Array(np.ones(_aval(s).shape, _aval(s).dtype)), lax.add(s, s_zeros)),
                  s_zeros)
  s_inv_mat = lax.mul(_bcast_vec(s_inv, k, -2), eye_r)
  half = Array(np.array(0.5, dt))
  dUdV_diag = lax.mul(lax.mul(half, lax.sub(dS, _H(dS))), to_dt(s_inv_mat))
  Fc = to_dt(F)
  dU = _mm(U, lax.add(lax.mul(Fc, lax.add(dSS, _H(dSS))), dUdV_diag))
  dV = _mm(V, lax.mul(Fc, lax.add(SdS, _H(SdS))))
  if m > n:
    dAV = _mm(dA, V)
    dU = lax.add(dU, lax.div(lax.sub(dAV, _mm(U, _mm(Ut, dAV))), to_dt(_bcast_vec(s, m, -2))))
  if n > m:
    dAHU = _mm(_H(dA), U)
    dV = lax.add(dV, lax.div(lax.sub(dAHU, _mm(V, _mm(Vt, dAHU))), to_dt(_bcast_vec(s, n, -2))))
  return [s, U, Vt], [ds, dU, _H(dV)]


def _svd_samples(rng, d):
  d = np.dtype(d)
  r = lambda *s: _rand(rng, s, d)
  p = lambda full, uv=True: dict(full_matrices=full, compute_uv=uv, subset_by_index=None,
                                 algorithm=None)
  return [([r(4, 4)], p(True)), ([r(5, 3)], p(False)), ([r(3, 5)], p(False)),
          ([r(2, 4, 3)], p(False)), ([r(4, 3)], p(False, False)), ([r(1, 1)], p(True))]


def _svd_bad(rng):
  p = dict(full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None)
  return [([Array(np.ones(3))], p, TypeError), ([Array(np.ones((2, 2), np.int32))], p, TypeError)]


_register(svd_p, numba=_svd_numba, numpy=_svd_numpy, abstract_eval=_svd_abstract_eval,
          samples=_svd_samples, bad=_svd_bad, policy=("numba", "numba", 1 << 62),
          note="LAPACK gesdd through numba's binding (SciPy's LAPACK, which jit's FFI call "
               "runs too: the same bits; NumPy's OpenBLAS rounds otherwise); subset_by_index: "
               "the kept singular triplets copied out by NumPy; empty matrices: identity bases "
               "filled by NumPy")
svd_p.jvp = _svd_jvp


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
  """Singular value decomposition: ``(u, s, vh)`` (or ``s`` if not ``compute_uv``)."""
  out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                   subset_by_index=None if subset_by_index is None else tuple(subset_by_index),
                   algorithm=algorithm)
  if compute_uv:
    s, u, vt = out
    return u, s, vt
  return out[0]


__all__ = ["cholesky", "eig", "eigh", "lu", "qr", "svd", "triangular_solve", "symmetrize",
           "cholesky_p", "eig_p", "eigh_p", "lu_p", "qr_p", "svd_p", "triangular_solve_p"]

# ----------------------------------------------------------------- jet (Taylor) rules
jet.defbilinear(dot_general_p)


# ====================================================================== lowering (StableHLO)
# Rules run under jit only; ``mlir``/``hlo``/``ir`` are lazy proxies, so importing this
# file never imports jaxlib.
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import chlo, hlo, i64_array, ir, mlir  # noqa: E402,F401
import threading  # noqa: E402
from nbjax import xla  # noqa: E402


def _reg(name, rule):
  lowering.register(name, rule)


def _kind(dtype):
  return dtypes.kind(dtype)


def _real(dtype):
  d = np.dtype(dtype)
  return np.dtype(np.float32 if d == np.complex64 else np.float64 if d == np.complex128 else d)


# ----------------------------------------------------------------- dot_general

def _dot_general(ctx, lhs, rhs, *, dimension_numbers, precision=None,
                 preferred_element_type=None, **params):
  (lc, rc), (lb, rb) = dimension_numbers
  la, ra = ctx.avals_in
  out = ctx.avals_out[0]
  od = np.dtype(out.dtype)
  # operands in one compute type: the output's (bool products are counted in int32)
  cd = np.dtype(np.int32) if od == np.bool_ else od
  lhs = mlir.convert_hlo(ctx, lhs, la, la.update(dtype=cd))
  rhs = mlir.convert_hlo(ctx, rhs, ra, ra.update(dtype=cd))
  dn = hlo.DotDimensionNumbers.get(
      lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
      lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
  # a Precision pair becomes XLA's precision_config (an algorithm preset is not lowered:
  # the CPU computes every one as the default algorithm, as eagerly)
  pc = (ir.ArrayAttr.get([hlo.PrecisionAttr.get(p.name) for p in precision])
        if isinstance(precision, tuple) and not isinstance(precision, DotAlgorithm) else None)
  res = hlo.dot_general(mlir.aval_to_ir_type(out.update(dtype=cd)), lhs, rhs, dn,
                        precision_config=pc)
  if od == np.bool_:
    res = mlir.convert_hlo(ctx, res, out.update(dtype=cd), out)
  return [res]


_reg("dot_general", _dot_general)


# ----------------------------------------------------------------- cholesky, triangular_solve

def _cholesky(ctx, x, **params):
  # the eager kernel as an FFI call (LAPACK's potrf, as JAX's CPU): eager and jit agree
  return _ffi_call("cholesky", ctx.avals_in[0].dtype, [x], ctx.avals_out)


def _triangular_solve(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
  # The eager kernel as an FFI call (as JAX calls LAPACK's trsm): XLA's own expansion inverts
  # diagonal blocks, which turns a zero pivot into NaN everywhere rather than trsm's infinities.
  # Every variant is reduced to M @ X = B on M's lower or upper triangle, as ``_ts_normalize``.
  aa, ba = ctx.avals_in
  if math.prod(ba.shape) == 0:
    return [mlir.full_like_aval(ctx, 0, ctx.avals_out[0])]
  nd = len(ba.shape)
  perm = i64_array([*range(nd - 2), nd - 1, nd - 2])
  swap = lambda x, av: (hlo.transpose(x, perm),
                        av.update(shape=(*av.shape[:-2], av.shape[-1], av.shape[-2])))
  if conjugate_a and _kind(aa.dtype) == "c":
    a = hlo.complex(hlo.real(a), hlo.negate(hlo.imag(a)))
  t = transpose_a
  if not left_side:
    t = not t
    b, ba = swap(b, ba)
  if t:
    a, aa = swap(a, aa)
    lower = not lower
  x, = _ffi_call("trsm", aa.dtype, [a, b], [ba], lower=bool(lower), unit=bool(unit_diagonal))
  return [swap(x, ba)[0] if not left_side else x]


_reg("cholesky", _cholesky)
_reg("triangular_solve", _triangular_solve)


# ----------------------------------------------------------------- FFI handlers (numba)

_HEAD = """
import numpy as np
from numba import cfunc, types
from kernels import linalg as K
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
    "lu": """
  k = min(m, n)
  out = ret_flat(cf, 0, DT, B * m * n).reshape((B, m, n))
  piv = ret_flat(cf, 1, np.int32, B * k).reshape((B, k))
  perm = ret_flat(cf, 2, np.int32, B * m).reshape((B, m))
  if B > 0:
    K.lu(a, out, piv, perm)
  return 0
""",
    "qr": """
  kq = ret_dim(cf, 0, r - 1)
  kr = ret_dim(cf, 1, r - 2)
  q = ret_flat(cf, 0, DT, B * m * kq).reshape((B, m, kq))
  rr = ret_flat(cf, 1, DT, B * kr * n).reshape((B, kr, n))
  if B > 0:
    K.qr(a, q, rr)
  return 0
""",
    "qr_pivoted": """
  kq = ret_dim(cf, 0, r - 1)
  kr = ret_dim(cf, 1, r - 2)
  q = ret_flat(cf, 0, DT, B * m * kq).reshape((B, m, kq))
  rr = ret_flat(cf, 1, DT, B * kr * n).reshape((B, kr, n))
  p = ret_flat(cf, 2, np.int32, B * n).reshape((B, n))
  if B > 0:
    K.qr_pivoted(a, q, rr, p)
  return 0
""",
    "eigh": """
  fl = arg_flat(cf, 1, np.int32, 4)
  v = ret_flat(cf, 0, DT, B * n * n).reshape((B, n, n))
  w = ret_flat(cf, 1, RT, B * n).reshape((B, n))
  if B > 0 and n > 0:
    K.eigh(a, v, w, fl[0] != 0)
  return 0
""",
    "eig": """
  fl = arg_flat(cf, 1, np.int32, 4)
  left, right = fl[2] != 0, fl[3] != 0
  w = ret_flat(cf, 0, CT, B * n).reshape((B, n))
  vl = ret_flat(cf, 1, CT, B * n * n).reshape((B, n, n)) if left else np.empty((B, 0, 0), CT)
  vr = (ret_flat(cf, 2 if left else 1, CT, B * n * n).reshape((B, n, n)) if right
        else np.empty((B, 0, 0), CT))
  if B > 0 and n > 0:
    K.eig(a, w, vl, vr, left, right)
  return 0
""",
    "cholesky": """
  out = ret_flat(cf, 0, DT, B * m * n).reshape((B, m, n))
  if B > 0 and n > 0:
    K.cholesky(a, out)
  return 0
""",
    "trsm": """
  fl = arg_flat(cf, 2, np.int32, 4)
  k = arg_dim(cf, 1, r - 1)
  b = arg_flat(cf, 1, DT, B * m * k).reshape((B, m, k))
  out = ret_flat(cf, 0, DT, B * m * k).reshape((B, m, k))
  if B > 0:
    K.trsm_left(a, b, out, fl[0] != 0, fl[1] != 0)
  return 0
""",
    "svd": """
  k = min(m, n)
  mu = ret_dim(cf, 1, r - 1)
  nv = ret_dim(cf, 2, r - 2)
  s = ret_flat(cf, 0, RT, B * k).reshape((B, k))
  u = ret_flat(cf, 1, DT, B * m * mu).reshape((B, m, mu))
  vt = ret_flat(cf, 2, DT, B * nv * n).reshape((B, nv, n))
  if B > 0 and k > 0:
    K.svd(a, s, u, vt, mu == m and nv == n)
  elif B > 0:
    for b in range(B):
      for i in range(m):
        for j in range(mu):
          u[b, i, j] = 1 if i == j else 0
      for i in range(nv):
        for j in range(n):
          vt[b, i, j] = 1 if i == j else 0
  return 0
""",
}

_handlers = {}
_lock = threading.Lock()


# the kernels whose flags (lower, unit_diagonal, left, right eigenvectors) come as a last
# int32[4] operand: one handler per dtype serves every combination (each handler compiles
# with its kernel linked in, seconds for eig)
_FLAGGED = frozenset({"eigh", "eig", "trsm"})


def _target(name, dtype, head=_HEAD, body=None):
  """Register (once) and return the FFI target name for ``name``'s kernel at ``dtype``: a
  numba cfunc of ``head`` (imports) and ``body`` (default: ``_BATCH`` + ``_BODIES[name]``)."""
  d = np.dtype(dtype)
  key = (name, d)
  with _lock:
    if key in _handlers:
      return _handlers[key]
    fn = f"nbjax_{name}_{d.name}"
    src = (head + f"DT = np.{d.name}\nRT = np.{_real(d).name}\n"
           + f"CT = np.{_complex_dtype(d).name}\n"
           + f"@cfunc(types.int64(types.voidptr), nopython=True, cache=True)\ndef {fn}(cf):"
           + (_BATCH + _BODIES[name] if body is None else body))
    ns = {"__name__": __name__}
    exec(compile(src, __file__, "exec"), ns)
    xla.register_ffi_target(fn, ns[fn])
    _handlers[key] = fn
    return fn


def ensure_ffi_targets(module_text):
  """Register the handlers of the linalg kernels a module's custom calls name
  (``nbjax_<kernel>_<dtype>``), for a module this process did not lower itself (a
  deserialized ``nbjax.export``)."""
  from nbjax.lax import _linalg_more as M
  for name, d in re.findall(r"custom_call @nbjax_(\w+?)_(float32|float64|complex64|complex128)\b",
                            module_text):
    if name in _BODIES:
      _target(name, d)
    elif name in M._BODIES or name.startswith("tridiagonal_solve"):
      M._target(name, d)


def _ffi_call(name, dtype, operands, result_avals, lower=True, unit=False, left=False,
              right=False, target=None):
  target = target or _target(name, dtype)
  if name in _FLAGGED:
    operands = [*operands, mlir.ir_constant(np.array([lower, unit, left, right], np.int32))]
  op = hlo.CustomCallOp.build_generic(
      results=mlir.aval_to_ir_types(result_avals), operands=list(operands),
      attributes=dict(call_target_name=ir.StringAttr.get(target),
                      has_side_effect=ir.BoolAttr.get(False), api_version=mlir.i32_attr(4),
                      backend_config=ir.DictAttr.get({}),
                      called_computations=ir.ArrayAttr.get([])))
  return list(op.results)


def _slice_last(x, aval, axis_from_end, lo, hi):
  nd = len(aval.shape)
  start, stop = [0] * nd, list(aval.shape)
  start[nd - axis_from_end], stop[nd - axis_from_end] = lo, hi
  return hlo.slice(x, i64_array(start), i64_array(stop), i64_array([1] * nd))


def _lu(ctx, x):
  return _ffi_call("lu", ctx.avals_in[0].dtype, [x], ctx.avals_out)


def _qr(ctx, x, *, pivoting=False, full_matrices=True, use_magma=None):
  return _ffi_call("qr_pivoted" if pivoting else "qr", ctx.avals_in[0].dtype, [x],
                   ctx.avals_out)


def _eigh(ctx, x, *, lower=True, sort_eigenvalues=True, subset_by_index=None):
  aval = ctx.avals_in[0]
  n = aval.shape[-1]
  w_aval = aval.update(shape=aval.shape[:-1], dtype=_real(aval.dtype))
  v, w = _ffi_call("eigh", aval.dtype, [x], [aval, w_aval], lower=bool(lower))
  if subset_by_index is not None and tuple(subset_by_index) != (0, n):
    lo, hi = subset_by_index
    v, w = _slice_last(v, aval, 1, lo, hi), _slice_last(w, w_aval, 1, lo, hi)
  return [v, w]


def _eig(ctx, x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
         use_magma=None):
  return _ffi_call("eig", ctx.avals_in[0].dtype, [x], ctx.avals_out,
                   left=bool(compute_left_eigenvectors), right=bool(compute_right_eigenvectors))


def _svd(ctx, x, *, full_matrices=False, compute_uv=True, subset_by_index=None, algorithm=None):
  aval = ctx.avals_in[0]
  m, n = aval.shape[-2:]
  k = min(m, n)
  batch = tuple(aval.shape[:-2])
  s_aval = aval.update(shape=batch + (k,), dtype=_real(aval.dtype))
  u_aval = aval.update(shape=batch + (m, m if full_matrices else k))
  vt_aval = aval.update(shape=batch + (n if full_matrices else k, n))
  s, u, vt = _ffi_call("svd", aval.dtype, [x], [s_aval, u_aval, vt_aval])
  if subset_by_index is not None and tuple(subset_by_index) != (0, k):
    lo, hi = subset_by_index
    s = _slice_last(s, s_aval, 1, lo, hi)
    u = _slice_last(u, u_aval, 1, lo, hi)
    vt = _slice_last(vt, vt_aval, 2, lo, hi)
  return [s, u, vt] if compute_uv else [s]


_reg("lu", _lu)
_reg("qr", _qr)
_reg("eigh", _eigh)
_reg("eig", _eig)
_reg("svd", _svd)


# ====================================================================== the rarer primitives
# schur, hessenberg, tridiagonal, ... with all their rules: nbjax/lax/_linalg_more.py
from nbjax.lax import _linalg_more  # noqa: E402
from nbjax.lax._linalg_more import *  # noqa: E402,F401,F403
__all__ += _linalg_more.__all__
# JAX's lax.linalg module also holds geqrf (not in its public __all__): reachable as JAX's
from nbjax.lax._linalg_more import geqrf, geqrf_p  # noqa: E402,F401
