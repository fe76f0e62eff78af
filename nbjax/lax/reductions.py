"""Reductions, argmin/argmax, cumulative reductions and sort: every rule of each primitive.

Pipeline position: ``lax.reduce_sum(x, axes)`` -> ``reduce_sum_p.bind(x, axes=...)``; with no
transformation active the registry's eager entry runs the selected backend: a numba kernel
from ``kernels.reductions`` (operands viewed as ``(outer, n, inner)`` blocks, reduced/scanned
/sorted over the middle axis) or NumPy. Under transformations the jvp / transpose / batching
rules below apply. Batching folds the vmapped axis into the primitive's own axis params,
so a batch is one kernel call.

Semantics are JAX's: ``axes`` are non-negative and unique; empty reductions give the
identity; argmin/argmax return the first NaN, else the first extremum; sort is stable,
lexicographic over the first ``num_keys`` operands, with NaNs last and -0.0 == 0.0.
Values are XLA's on CPU, special values included: float/complex sums, products and scans
are computed in the operand's type in XLA's association order (``kernels.reductions``;
float16 with NumPy, which rounds each operation to float16 as XLA does), a reduction over
size-1 axes is a copy, max/min order -0 below +0, and complex products are XLA's.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from kernels import reductions as K
from kernels.elementwise import entry as _entry
from kernels.threads import MAX_CHUNKS, TEAM_USES, team_run
from nbjax import core, dtypes, registry
from nbjax.array import Array, empty as pooled_empty
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad, batching, jet
from nbjax.lax.elementwise import _bool, _complex, _float, _int, _num, _sint, _uint  # noqa: F401
from nbjax.lax.elementwise import accepts

# Elements from which the prange kernels run. Measured on the shared 2-core machines: a
# prange region costs ~16 ms whenever the other core is busy (libgomp's default wait policy;
# ~0 with OMP_WAIT_POLICY=passive, but then no speed-up either), while the serial kernels
# already beat NumPy 2x (1e7 float32 sum: 1.0 ms vs 2.0 ms). So serial everywhere by default;
# the parallel kernels stay (tested) for machines with idle cores: lower this to use them.
PAR_MIN = 1 << 62

_real = _int | _float

# Rows of this many elements in all run on the caller and the native team worker
# (kernels.threads.team_run): blocks of rows, or a single long row (a full reduction of a
# large array) in chunks of _ROW_CHUNK or more (at most MAX_CHUNKS). Sums keep the bits of
# the one-call cascade: a chunk is a whole subtree of its 256-element blocks, and the chunks'
# sums are combined as the cascade combines subtrees; max/min are exact in any order.
ROW_TEAM_MIN = 1 << 18
_ROW_CHUNK = 1 << 14
_ROW_OPS = ("sum", "max", "min")
TEAM_USES["sum/max/min over contiguous rows"] = f"from {ROW_TEAM_MIN} elements"
TEAM_USES["sum/max/min over a middle or leading axis"] = f"from {ROW_TEAM_MIN} elements"


def _rows(kern, op, x, out, z):
  """``kern(x, out, z)`` on ``(O, N)`` rows; from ROW_TEAM_MIN elements blocks of rows, or
  chunks of a single long row, on the native team (one thread with ``NBJAX_TEAM=0``)."""
  O, N = x.shape
  if O * N < ROW_TEAM_MIN or op not in _ROW_OPS:
    kern(x, out, z)
    return
  if O > 1:
    team_run(K.row_chunks(op, x.dtype, True), (x.reshape(-1), np.reshape(z, 1), np.full(1, N),
                                                out), min(O, O * N // _ROW_CHUNK, MAX_CHUNKS))
    return
  ch = _ROW_CHUNK
  while N > ch * MAX_CHUNKS:
    ch *= 2
  n = -(-N // ch)
  parts = np.empty(n, out.dtype)
  team_run(K.row_chunks(op, x.dtype), (x.reshape(-1), np.reshape(z, 1), np.full(1, ch), parts),
           n)
  if op != "sum" or out.dtype.kind not in "fc":  # exact in any order: the kernel over parts
    kern(parts.reshape(1, n), out, z)
    return
  out[0] = K.cascade_parts(parts)


def _rows_call(kern, op, shape, O, N, kd, out_shape, z):
  """``x -> kern`` over ``x`` of ``shape`` viewed as ``(O, N)`` rows into a new ``out_shape``
  array of ``kd`` (``_rows``), the team's and the views' decisions taken once."""
  if O * N >= ROW_TEAM_MIN and op in _ROW_OPS:
    def k(x):
      out = np.empty(O, kd)
      _rows(kern, op, x.reshape(O, N), out, z)
      return out.reshape(out_shape)
  elif tuple(shape) == (O, N) and out_shape == (O,):  # (rows as they are: no views)
    def k(x):
      out = np.empty(O, kd)
      kern(x, out, z)
      return out
  else:
    def k(x):
      out = np.empty(O, kd)
      kern(x.reshape(O, N), out, z)
      return out.reshape(out_shape)
  return k


def _cols(kern, op, x, out, z, tree=False):
  """``kern(x, out, z)`` on an ``(O, N, I)`` block (``kern``: a column kernel, XLA's order when
  ``tree``); from ROW_TEAM_MIN elements ranges of columns (or of outer blocks, when there are
  enough) on the native team: each output element is one chunk's, so the bits are one call's."""
  O, N, I = x.shape
  n = O * N * I
  nch = min(MAX_CHUNKS, n // _ROW_CHUNK)
  by = O >= nch
  if not by:  # (column ranges a tile wide at least: short row segments stall the prefetchers)
    nch = min(nch, I * x.itemsize // K.COL_TILE)
  if n < ROW_TEAM_MIN or op not in _ROW_OPS or nch < 2:
    kern(x, out, z)
    return
  o = out.reshape(-1)
  team_run(K.col_chunks(op, x.dtype, tree), (x.reshape(-1), np.reshape(z, 1), np.array(
      [O, N, I, by], np.int64), o, o[:O if by else I]), nch)


# From this many input elements XLA's CPU code hands float32/float64 sums to YNNPACK, whose
# vector kernels associate by the machine's vector width: XLA's order is not reproduced
# there, and eager row sums keep their fast vectorised (cascaded) loop, still in the
# operand's type (column sums keep XLA's windows of 32, vectorised across the columns).
# Below it eager sums are XLA's, bit for bit (kernels.reductions).
_YNN_MIN = 4096

# sums and products associate as XLA (float16: in float16), NumPy's pairwise: compare loosely
_TOL = {np.dtype(np.float16): (2e-2, 5e-2), np.dtype(np.float32): (2e-5, 2e-5),
        np.dtype(np.complex64): (2e-5, 2e-5)}


def _sorted(ds):
  return sorted(ds, key=lambda d: (d.kind, d.itemsize))


# ----------------------------------------------------------------- shared checks


def _check_dtype(name, aval, ok, accepted):
  if not isinstance(aval, ShapedArray):
    raise TypeError(f"{name} got a non-array operand {aval!r}")
  if not accepts(ok, aval.dtype):
    raise TypeError(f"{name} does not accept dtype {aval.dtype.name}. Accepted dtypes are "
                    f"subtypes of {accepted}.")


def _check_axes(name, aval, axes):
  if not isinstance(axes, tuple) or not all(isinstance(a, (int, np.integer)) for a in axes):
    raise TypeError(f"{name}: axes must be a tuple of ints, got {axes!r}")
  if len(axes) != len(set(axes)):
    raise ValueError(f"{name}: duplicate value in 'axes' of reduction: {axes}")
  if not all(0 <= a < aval.ndim for a in axes):
    raise ValueError(f"{name}: reduction axes {axes} contains out-of-bounds indices for "
                     f"{aval.str_short(short_dtypes=False)}.")


def _drop(shape, axes):
  ax = set(axes)
  return tuple(d for i, d in enumerate(shape) if i not in ax)


def _block(shape, a, b):
  """``shape`` as (outer, n, inner) around the axis run [a, b)."""
  nd = len(shape)
  if nd == 1:
    return 1, shape[0], 1
  if nd == 2 and b == a + 1:
    return (1, shape[0], shape[1]) if a == 0 else (shape[0], shape[1], 1)
  return math.prod(shape[:a]), math.prod(shape[a:b]), math.prod(shape[b:])


def _runs(axes):
  """Sorted axes grouped into maximal contiguous runs [a, b), last run first."""
  runs = []
  for a in sorted(axes):
    if runs and runs[-1][1] == a:
      runs[-1][1] = a + 1
    else:
      runs.append([a, a + 1])
  return [tuple(r) for r in reversed(runs)]


def _to_numba(x):
  """numba has no float16: compute in float32 (exact widening)."""
  return x.astype(np.float32) if x.dtype == np.float16 else x


def _xla_plan(shape, axes):
  """(the (outer, n, inner) block, the result shape, the axes to move last or None) of a
  reduction of ``shape`` over ``axes``: the reduced axes in row-major order as the middle
  axis (moved to the end, a copy, when they are not one contiguous run)."""
  axes = sorted(axes)
  a, b = axes[0], axes[-1] + 1
  out_shape = _drop(shape, axes)
  if b - a == len(axes):
    return _block(shape, a, b), out_shape, None
  n = math.prod(shape[i] for i in axes)
  return (math.prod(out_shape), n, 1), out_shape, axes


def _xla_block(x, plan):
  blk, _, move = plan
  if move is not None:
    x = np.moveaxis(x, move, range(x.ndim - len(move), x.ndim))
  return x.reshape(blk)


def _fold_np(a, f, z):
  """``a`` (..., n, I) folded over axis -2 in index order from ``z`` (NumPy ops)."""
  acc = np.full(a.shape[:-2] + a.shape[-1:], z, a.dtype)
  for j in range(a.shape[-2]):
    acc = f(acc, a[..., j, :])
  return acc


def _tree_np(x3, f, z):
  """(O, n, I) -> (O, I) in XLA's order (``kernels.reductions``: windows of 32) with NumPy
  ops: the NumPy backend's, and float16's (numba has no float16; NumPy rounds each
  operation to float16, as XLA)."""
  W = K.TREE_W
  O, n, I = x3.shape
  while n > W:
    nw = -(-n // W)
    st = W - (nw * W - n) // 2
    nf = (n - st) // W
    parts = [_fold_np(x3[:, :st], f, z)[:, None]]
    if nf:
      parts.append(_fold_np(x3[:, st:st + nf * W].reshape(O, nf, W, I), f, z))
    if st + nf * W < n:
      parts.append(_fold_np(x3[:, st + nf * W:], f, z)[:, None])
    x3, n = np.concatenate(parts, axis=1), nw
  return _fold_np(x3, f, z)


def _scan_block_np(a, f, z, reverse):
  """Scan of ``a`` (..., m, I) over axis -2: each output a fold in index order."""
  out = np.empty_like(a)
  m = a.shape[-2]
  if reverse:
    for k in range(m):
      out[..., k, :] = _fold_np(a[..., k:, :], f, z)
    return out
  acc = np.full(a.shape[:-2] + a.shape[-1:], z, a.dtype)
  for j in range(m):
    acc = out[..., j, :] = f(acc, a[..., j, :])
  return out


def _scan_np(x3, f, z, reverse):
  """(O, n, I) scanned over axis 1 in XLA's order (``kernels.reductions``: blocks of 16)
  with NumPy ops."""
  B = K.SCAN_B
  O, n, I = x3.shape
  nf = n // B
  out = np.empty_like(x3)
  if nf:
    out[:, :nf * B] = _scan_block_np(x3[:, :nf * B].reshape(O, nf, B, I), f, z,
                                     reverse).reshape(O, nf * B, I)
  if nf * B < n:
    out[:, nf * B:] = _scan_block_np(x3[:, nf * B:], f, z, reverse)
  nb = -(-n // B)
  if nb > 1:
    last = np.minimum(np.arange(nb) * B + B, n) - 1
    pre = _scan_np(out[:, np.arange(nb) * B if reverse else last], f, z, reverse)
    e = np.empty_like(pre)
    e[:, -1 if reverse else 0] = z
    if reverse:
      e[:, :-1] = pre[:, 1:]
    else:
      e[:, 1:] = pre[:, :-1]
    out = f(out, np.repeat(e, B, axis=1)[:, :n])
  return out


_CMUL = {}


def _np_cmul(d):
  """XLA's complex product (fused multiply-adds, which NumPy lacks: the numba kernel of
  ``elementwise``'s multiply)."""
  f = _CMUL.get(d)
  if f is None:
    from nbjax.lax.elementwise import numba_run
    mul = numba_run("mul_complex", [d, d], d)  # (takes contiguous operands)
    f = _CMUL[d] = lambda a, b: mul(np.ascontiguousarray(a), np.ascontiguousarray(b))
  return f


def _np_logaddexp(a, b):
  """XLA's logaddexp (JAX's lowering), in the operands' type."""
  with np.errstate(all="ignore"):  # (inf - inf: the NaN is the point)
    d = a - b
    return np.where(d != d, a + b, np.maximum(a, b) + np.log1p(np.exp(-np.abs(d))))


def _np_op(op, d):
  """The NumPy combiner of ``op`` ('sum', 'prod', 'logaddexp') for dtype ``d``."""
  if op == "sum":
    return np.add
  if op == "prod":
    return _np_cmul(d) if d.kind == "c" else np.multiply
  return _np_logaddexp


def _ieee_zeros(r, x, axis, op, accumulate=False):
  """``r``, a NumPy max/min over ``axis`` of ``x`` (reduction, or scan when
  ``accumulate``), with IEEE's -0 < +0 (XLA's; NumPy returns either zero of a tie)."""
  if r.dtype.kind != "f" or not (r == 0).any():
    return r
  keep = (x == 0) & (np.signbit(x) == (op == "min"))  # the zero a tie must give
  has = np.logical_or.accumulate(keep, axis) if accumulate else np.logical_or.reduce(keep, axis)
  zero = np.where(has, np.array(-0.0 if op == "min" else 0.0, r.dtype),
                  np.array(0.0 if op == "min" else -0.0, r.dtype))
  return np.where(r == 0, zero, r)


def work_eager(size):
  """A ``make_eager`` whose backend choice looks at ``size(vals, out_aval)`` (the work: input
  elements for a reduction, scan or sort, elements per matrix for a decomposition; the
  registry's default looks at the output, which for a reduction is tiny)."""
  make = lambda prim, f_small, f_large, thr: registry.make_generic_eager(
      prim, f_small, f_large, thr, size=size)
  make.size = size
  return make


make_work_eager = work_eager(
    lambda vals, out_aval: vals[0].size if len(vals) == 1 else max(v.size for v in vals))


# ----------------------------------------------------------------- reductions

_IDENT = {
    "sum": lambda d: 0,
    "prod": lambda d: 1,
    "max": lambda d: -np.inf if dtypes.is_inexact(d) else False if d.kind == "b" else dtypes.iinfo(d).min,
    "min": lambda d: np.inf if dtypes.is_inexact(d) else True if d.kind == "b" else dtypes.iinfo(d).max,
    "and": lambda d: True if d.kind == "b" else np.array(-1).astype(d),
    "or": lambda d: False if d.kind == "b" else 0,
    "xor": lambda d: False if d.kind == "b" else 0,
}


def identity(op, dtype):
  """The identity element of reduction ``op`` ('sum', 'max', ...) for ``dtype``."""
  d = np.dtype(dtype)
  return np.array(_IDENT[op](d)).astype(d)[()]


def _reduce_numba(op):
  xla_order = op in ("sum", "prod")  # float/complex: XLA's association (kernels.reductions)
  consts = {}  # dtype -> (identity, kernel dtype, XLA-order kernels or None)
  plans = {}  # (shape, axes) -> _xla_plan

  specs = {}  # (shape, dtype, axes) -> the ``specialize`` kernel, or None

  def impl(x, *, axes):
    key = (x.shape, x.dtype, axes)
    k = specs.get(key, False)
    if k is False:
      if len(specs) > 1024:
        specs.clear()
      k = specs[key] = specialize((x,), {"axes": axes})
    if k is not None:
      return k(x)
    c = consts.get(x.dtype)
    if c is None:
      kd = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
      ks = None
      if xla_order and x.dtype.kind in "fc":
        kop = op + "_complex" if x.dtype.kind == "c" and op == "prod" else op
        ks = (K.TREE_ROWS[kop], K.TREE_COLS[kop])
      c = consts[x.dtype] = (identity(op, kd), kd, ks)
    z, kd, ks = c
    if not axes:
      return x.copy()
    if ks is not None:
      key = (x.shape, axes)
      p = plans.get(key)
      if p is None:
        if len(plans) > 1024:
          plans.clear()
        p = plans[key] = _xla_plan(x.shape, axes)
      x3, out_shape = _xla_block(x, p), p[1]
      O, N, I = x3.shape
      if N == 1:  # XLA: a reduction over size-1 axes is a copy
        return x3.reshape(out_shape).copy()
      if x.dtype == np.float16:
        return _tree_np(x3, _np_op(op, x.dtype), z).astype(np.float16).reshape(out_shape)
      out = np.empty(O * I, kd)
      if I == 1:  # (rows in XLA's YNNPACK range: the vectorised cascade)
        fast = op == "sum" and kd.kind == "f" and x.size >= _YNN_MIN
        _rows(K.ROWS[op] if fast else ks[0], op if fast else "", x3.reshape(O, N), out, z)
      else:
        _cols(ks[1], op, x3, out.reshape(O, I), z, True)
      return out.reshape(out_shape)
    cur = x if kd == x.dtype else x.astype(kd)
    big = x.size >= PAR_MIN
    shape = x.shape
    if len(axes) == 1:  # fast path: one axis
      a = axes[0]
      O, N, I = _block(shape, a, a + 1)
      out = np.empty(O * I, kd)
      if I == 1:
        _rows(K.ROWS_PAR[op] if big else K.ROWS[op], op, cur.reshape(O, N), out, z)
      elif big:
        K.COLS_PAR[op](cur.reshape(O, N, I), out.reshape(O, I), z)
      else:
        _cols(K.COLS[op], op, cur.reshape(O, N, I), out.reshape(O, I), z)
      out = out.reshape(shape[:a] + shape[a + 1:])
      return out if kd == x.dtype else out.astype(x.dtype)
    runs = _runs(axes)
    shape = list(shape)
    for a, b in runs:  # order-free operations (integers, max/min, bitwise): run by run
      O, N, I = _block(shape, a, b)
      out = np.empty(O * I, kd)
      if I == 1:
        (K.ROWS_PAR[op] if big else K.ROWS[op])(cur.reshape(O, N), out, z)
      else:
        (K.COLS_PAR[op] if big else K.COLS[op])(cur.reshape(O, N, I), out.reshape(O, I), z)
      shape[a:b] = []
      cur = out
    cur = cur.reshape(shape)
    return cur if kd == x.dtype else cur.astype(x.dtype)

  def specialize(avals, params):
    """``impl`` for one run of adjacent reduced axes of these avals with the blocking worked
    out once: the same kernel call, without the per-call Python (eager programs)."""
    (x,), axes = avals, params["axes"]
    if not axes or x.dtype == np.float16:
      return None
    if xla_order and x.dtype.kind in "fc":  # XLA's association: impl's kernels, planned once
      (O, N, I), out_shape, move = _xla_plan(x.shape, axes)
      if move is not None or N == 1:
        return None
      kd, kop = x.dtype, op + "_complex" if x.dtype.kind == "c" and op == "prod" else op
      z = identity(op, kd)
      if I == 1:
        fast = op == "sum" and kd.kind == "f" and x.size >= _YNN_MIN
        kr = K.ROWS[op] if fast else K.TREE_ROWS[kop]
        rop = op if fast else ""
        # (the kernels' compiled entry points: no numba dispatch, 0.4 of 0.8 us a call)
        kr = _entry(kr, np.empty((O, N), kd), np.empty(O, kd), z)
        k = _rows_call(kr, rop, x.shape, O, N, kd, out_shape, z)
      else:
        kc = _entry(K.TREE_COLS[kop], np.empty((O, N, I), kd), np.empty((O, I), kd), z)
        team = O * N * I >= ROW_TEAM_MIN

        def k(x):
          out = np.empty((O, I), kd)
          if team:
            _cols(kc, op, x.reshape(O, N, I), out, z, True)
          else:
            kc(x.reshape(O, N, I), out, z)
          return out.reshape(out_shape)
      k.fresh = k.bare = True  # (registry: a new C buffer of x's dtype, numba code only)
      return k
    runs = _runs(axes)
    if len(runs) != 1 or x.size >= PAR_MIN:
      return None
    kd = x.dtype
    z = identity(op, kd)
    (a, b), = runs
    O, N, I = _block(x.shape, a, b)
    oshape = x.shape[:a] + x.shape[b:]
    kern = K.ROWS[op] if I == 1 else K.COLS[op]
    kern = _entry(kern, np.empty((O, N) if I == 1 else (O, N, I), kd),
                  np.empty(O if I == 1 else (O, I), kd), z)
    if I == 1:
      k = _rows_call(kern, op, x.shape, O, N, kd, oshape, z)
    else:
      team = O * N * I >= ROW_TEAM_MIN

      def k(x):
        out = np.empty((O, I), kd)
        if team:
          _cols(kern, op, x.reshape(O, N, I), out, z)
        else:
          kern(x.reshape(O, N, I), out, z)
        return out.reshape(oshape)
    k.fresh = k.bare = True  # a new C buffer of x's dtype, numba only (registry.eager_program)
    return k
  impl.specialize = specialize
  return impl


def _reduce_numpy(op):
  ufuncs = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
            "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
  uf = ufuncs[op]
  if op in ("and", "or", "xor"):
    bool_uf = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]

  def impl(x, *, axes):
    if not axes:
      return x.copy()
    if op in ("sum", "prod") and x.dtype.kind in "fc":  # XLA's association
      plan = _xla_plan(x.shape, axes)
      x3, out_shape = _xla_block(x, plan), plan[1]
      if x3.shape[1] == 1:
        return x3.reshape(out_shape).copy()
      return _tree_np(x3, _np_op(op, x.dtype), identity(op, x.dtype)).reshape(out_shape)
    f = bool_uf if x.dtype == np.bool_ and op in ("and", "or", "xor") else uf
    if op in ("max", "min"):
      r = _ieee_zeros(np.asarray(f.reduce(x, axis=axes, initial=identity(op, x.dtype))),
                      x, axes, op)
    else:
      r = f.reduce(x, axis=axes, dtype=x.dtype)
    return np.asarray(r, x.dtype)
  return impl


_F16 = frozenset({np.dtype(np.float16), np.dtype(dtypes.bfloat16)})


def _reduce_abstract_eval(name, ok, accepted, keep_weak=True):
  sums = name == "reduce_sum"

  def rule(x, *, axes):
    if not isinstance(x, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {x!r}")
    if sums and x.dtype in _F16 and not core.config._flags["allow_f16_reductions"] and any(
        x.shape[a] != 1 for a in axes):  # (JAX's: summing 16-bit floats may be forbidden)
      raise ValueError(f"reduce_sum on operand {x.str_short(short_dtypes=True)} is not "
                       "allowed when jax_allow_f16_reductions=False.")
    if x.dtype not in ok:
      if name.startswith("reduce_") and name[7:] in ("and", "or", "xor"):
        raise TypeError(f"{name}: logical reduction requires operand dtype bool or int, "
                        f"got {x.dtype.name}.")
      _check_dtype(name, x, ok, accepted)
    _check_axes(name, x, axes)
    return ShapedArray(_drop(x.shape, axes), x.dtype, x.weak_type and keep_weak)
  return rule


def _reducer_batch(prim):
  """JAX's ``defreducer``: shift the reduced axes past the batch axis; one bind."""
  def rule(vals, dims, *, axes, **params):
    x, = vals
    bd, = dims
    new_axes = tuple(a + (a >= bd) for a in axes)
    out_bd = bd - sum(a < bd for a in axes)
    return prim.bind(x, axes=new_axes, **params), out_bd
  return rule


def _reduce_samples(op):
  def samples(rng, dtype):
    d = np.dtype(dtype)
    cases = [((), ()), ((0,), (0,)), ((7,), (0,)), ((3, 4), (0,)), ((3, 4), (1,)),
             ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), ()), ((2, 0, 3), (1,)),
             ((2, 0, 3), (0, 2)), ((1, 5), (0,)), ((4, 3, 2), (1, 2)), ((300,), (0,))]
    out = []
    for shape, axes in cases:
      if op == "prod" and shape == (300,):
        continue
      out.append(([_rand(rng, shape, d, op)], dict(axes=axes)))
    return out
  return samples


def _rand(rng, shape, d, op=None):
  d = np.dtype(d)
  if d == np.bool_:
    p = 0.8 if op == "and" else 0.2 if op == "or" else 0.5
    return rng.random(shape) < p
  if d.kind in "iu":
    if op == "prod":
      return rng.integers(1 if d.kind == "u" else -2, 3, shape).astype(d)
    hi = min(int(dtypes.iinfo(d).max), 100)
    lo = 0 if d.kind == "u" else -hi
    return rng.integers(lo, hi, shape, endpoint=True).astype(d)
  if d.kind == "c":
    return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(d)
  if op == "prod":
    return rng.uniform(0.5, 1.5, shape).astype(d) * rng.choice([-1, 1], shape).astype(d)
  return rng.uniform(-2, 2, shape).astype(d)


def _bad_reduce(name, bad_dtype):
  def bad(rng):
    x = Array(np.ones((2, 3), np.int32 if bad_dtype == np.float32 else np.float32))
    cases = [([x], dict(axes=(2,)), ValueError), ([x], dict(axes=(0, 0)), ValueError),
             ([x], dict(axes=(-1,)), ValueError)]
    if bad_dtype is not None:
      cases.append(([Array(np.ones((2, 3), bad_dtype))], dict(axes=(0,)), TypeError))
    return cases
  return bad


def _standard_reduction(op, ok, accepted, *, bad_dtype, differentiable=True, keep_weak=True,
                        policy=None, note=None):
  name = "reduce_" + op
  p = Primitive(name)
  p.make_eager = make_work_eager
  numpy_impl = _reduce_numpy(op)
  meta = dict(dtypes=_sorted(ok), reference=numpy_impl, samples=_reduce_samples(op),
              differentiable=differentiable, linear=op == "sum",
              bad_inputs=_bad_reduce(name, bad_dtype), tol=_TOL)
  if note:
    meta["note"] = note
  registry.register(p, family="reduction", impls={"numba": _reduce_numba(op), "numpy": numpy_impl},
                    abstract_eval=_reduce_abstract_eval(name, ok, accepted, keep_weak),
                    batch=_reducer_batch(p), policy=policy, meta=meta)
  return p


NUMBA = ("numba", "numba", 1 << 62)
# all/any: NumPy's stop at the first decisive element
_CHOOSER_POLICY = ("numba", "numpy", 1 << 14)

# where the numba backend hands work to NumPy (float16: numba has none)
_NO_AXES = "no axes: a NumPy copy"
_TREE_NOTE = ("numba; float16: numpy (XLA's windows of 32 as NumPy ops, a Python loop over each "
              "window's positions; NumPy rounds each step as XLA); float/complex over axes that "
              "are not one contiguous run: moved last by a NumPy copy first; " + _NO_AXES +
              " (float/complex: also for size-1 axes only)")
_WIDEN_NOTE = ("numba; float16: widened to float32 and rounded back by NumPy's astype; "
               + _NO_AXES)
reduce_sum_p = _standard_reduction("sum", _num, "number", bad_dtype=np.bool_, policy=NUMBA,
                                   note=_TREE_NOTE)
# allow_f16_reductions changes what reduce_sum's abstract eval accepts: rebuild its eager
# entry (whose per-signature caches hold abstract eval results)
core.config.add_listener(lambda name, _: registry.select(reduce_sum_p)
                         if name == "allow_f16_reductions" else None)
reduce_prod_p = _standard_reduction("prod", _num, "number", bad_dtype=np.bool_, policy=NUMBA,
                                    note=_TREE_NOTE)
# float max/min/argmax/argmin: integer reductions over the bits (kernels.reductions), which
# vectorise: numba at every size
reduce_max_p = _standard_reduction("max", _real | _bool, "bool, integer, floating",
                                   bad_dtype=np.complex64, policy=NUMBA, note=_WIDEN_NOTE)
reduce_min_p = _standard_reduction("min", _real | _bool, "bool, integer, floating",
                                   bad_dtype=np.complex64, policy=NUMBA, note=_WIDEN_NOTE)
_LOGICAL_NOTE = ("numpy from 16384 elements (its all/any stop at the first decisive element); "
                 "numba below; " + _NO_AXES)
reduce_and_p = _standard_reduction("and", _int | _bool, "bool, integer", bad_dtype=np.float32,
                                   differentiable=False, keep_weak=False, policy=_CHOOSER_POLICY,
                                   note=_LOGICAL_NOTE)
reduce_or_p = _standard_reduction("or", _int | _bool, "bool, integer", bad_dtype=np.float32,
                                  differentiable=False, keep_weak=False, policy=_CHOOSER_POLICY,
                                  note=_LOGICAL_NOTE)
reduce_xor_p = _standard_reduction("xor", _int | _bool, "bool, integer", bad_dtype=np.float32,
                                   differentiable=False, keep_weak=False, policy=NUMBA,
                                   note="numba; " + _NO_AXES)


def reduce_sum(operand, axes):
  """Sum of ``operand`` over ``axes`` (no upcasting of narrow types, as ``lax``)."""
  return reduce_sum_p.bind(operand, axes=tuple(axes))


def reduce_prod(operand, axes):
  """Product of ``operand`` over ``axes``."""
  return reduce_prod_p.bind(operand, axes=tuple(axes))


def reduce_max(operand, axes):
  """Maximum of ``operand`` over ``axes`` (NaN-propagating; -inf/iinfo.min when empty;
  complex: lexicographic on (real, imag), as XLA's)."""
  if core.get_aval(operand).dtype.kind == "c":
    return _complex_extreme(operand, tuple(axes), True)
  return reduce_max_p.bind(operand, axes=tuple(axes))


def reduce_min(operand, axes):
  """Minimum of ``operand`` over ``axes`` (NaN-propagating; inf/iinfo.max when empty;
  complex: lexicographic on (real, imag), as XLA's)."""
  if core.get_aval(operand).dtype.kind == "c":
    return _complex_extreme(operand, tuple(axes), False)
  return reduce_min_p.bind(operand, axes=tuple(axes))


def _complex_extreme(operand, axes, is_max):
  """Lexicographic max/min of a complex ``operand``: the extreme real part, then the extreme
  imaginary part among the elements with that real part."""
  from nbjax import lax
  axes = tuple(operator.index(a) % max(core.get_aval(operand).ndim, 1) for a in axes)
  red = reduce_max_p if is_max else reduce_min_p
  shape = core.get_aval(operand).shape
  re, im = lax.real(operand), lax.imag(operand)
  r = red.bind(re, axes=axes)
  keep = tuple(d for d in range(len(shape)) if d not in axes)
  on_r = lax.eq(re, lax.broadcast_in_dim(r, shape, keep))
  fill = lax.full_like(im, -np.inf if is_max else np.inf)
  ans = lax.stop_gradient(lax.complex(r, red.bind(lax.select(on_r, im, fill), axes=axes)))
  # derivative as JAX's reduce_max rule: the mean of the tangents of the elements equal to
  # the result (adding exact zeros to the value)
  b = lax.broadcast_in_dim(ans, shape, keep)
  loc = lax.eq(operand, b)
  diff = lax.select(loc, lax.sub(operand, b), lax.full_like(operand, 0))
  cnt = reduce_sum_p.bind(lax.convert_element_type(loc, operand.dtype), axes=axes)
  return lax.add(ans, lax.div(reduce_sum_p.bind(diff, axes=axes),
                              lax.max(cnt, lax.full_like(cnt, 1))))


def reduce_and(operand, axes):
  """Bitwise/logical AND of ``operand`` over ``axes``."""
  return reduce_and_p.bind(operand, axes=tuple(axes))


def reduce_or(operand, axes):
  """Bitwise/logical OR of ``operand`` over ``axes``."""
  return reduce_or_p.bind(operand, axes=tuple(axes))


def reduce_xor(operand, axes):
  """Bitwise/logical XOR of ``operand`` over ``axes``."""
  return reduce_xor_p.bind(operand, axes=tuple(axes))


# ----------------------------------------------------------------- reduction jvp / transpose


def _lax():
  from nbjax import lax
  return lax


def _kept(ndim, axes):
  return tuple(i for i in range(ndim) if i not in set(axes))


def _reduce_sum_transpose(ct, x, *, axes):
  shape = x.aval.shape
  return [_lax().broadcast_in_dim(ct, shape, _kept(len(shape), axes))]


ad.deflinear2(reduce_sum_p, _reduce_sum_transpose)


def _const_like(x, v):
  aval = core.get_aval(x)
  return Array(np.full(aval.shape, v, aval.dtype))


def _reduce_chooser_jvp(g, ans, x, *, axes):
  # JAX's rule: average the tangent over the locations that attain the extremum
  lax = _lax()
  shape = core.get_aval(x).shape
  loc = lax.eq(x, lax.broadcast_in_dim(ans, shape, _kept(len(shape), axes)))
  loc = lax.convert_element_type(loc, core.get_aval(g).dtype)
  return lax.div(reduce_sum(lax.mul(g, loc), axes), reduce_sum(loc, axes))


ad.defjvp2(reduce_max_p, _reduce_chooser_jvp)
ad.defjvp2(reduce_min_p, _reduce_chooser_jvp)


def _move_axes_front(x, axes):
  """``x`` with ``axes`` moved to the front and flattened into one: shape (n, *rest)."""
  lax = _lax()
  shape = core.get_aval(x).shape
  rest = _kept(len(shape), axes)
  perm = tuple(axes) + rest
  if perm != tuple(range(len(shape))):
    x = lax.transpose(x, perm)
  n = math.prod(shape[a] for a in axes)
  return lax.reshape(x, (n,) + tuple(shape[i] for i in rest))


def _shift(x, d, axis, fill, reverse=False):
  """``y[i] = x[i - d]`` along ``axis`` (``x[i + d]`` if ``reverse``), ``fill`` past the edge."""
  lax = _lax()
  aval = core.get_aval(x)
  n = aval.shape[axis]
  start = [0] * aval.ndim
  limit = list(aval.shape)
  cfg = [(0, 0, 0)] * aval.ndim
  if reverse:
    start[axis], cfg[axis] = d, (0, d, 0)
  else:
    limit[axis], cfg[axis] = n - d, (d, 0, 0)
  return lax.pad(lax.slice(x, start, limit), np.array(fill, aval.dtype)[()], cfg)


def _reduce_prod_jvp(primals, tangents, *, axes):
  # zero-safe: d prod = sum_i t_i * prod_{j != i} x_j, the exclusive products from two scans
  lax = _lax()
  x, = primals
  t = ad.instantiate_zeros(tangents[0])
  ans = reduce_prod_p.bind(x, axes=axes)
  if not axes:
    return ans, t
  x2, t2 = _move_axes_front(x, axes), _move_axes_front(t, axes)
  n = core.get_aval(x2).shape[0]
  if n == 0:
    return ans, reduce_sum(t2, (0,))
  left = _shift(cumprod(x2, 0), 1, 0, 1)
  right = _shift(cumprod(x2, 0, reverse=True), 1, 0, 1, reverse=True)
  return ans, reduce_sum(lax.mul(t2, lax.mul(left, right)), (0,))


reduce_prod_p.jvp = _reduce_prod_jvp
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
  ad.defjvp_zero(_p)


# ----------------------------------------------------------------- argmin / argmax


def _argminmax_abstract_eval(name):
  def rule(x, *, axes, index_dtype):
    if not isinstance(x, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {x!r}")
    if x.dtype.kind == "c":  # (JAX: its comparator, gt/lt, refuses it)
      raise TypeError(f"{'gt' if name == 'argmax' else 'lt'} does not accept dtype "
                      f"{x.dtype.name} at position 0. Accepted dtypes at position 0 are "
                      "subtypes of integer, floating, bool.")
    _check_dtype(name, x, _real | _bool, "bool, integer, floating")
    if not isinstance(axes, tuple) or len(axes) != 1:
      raise TypeError(f"{name}: axes must be a tuple of one axis, got {axes!r}")
    axis, = axes
    if not (0 <= axis < x.ndim):
      raise ValueError(f"{name}: Invalid axis {axis} for operand shape {x.shape}")
    if x.shape[axis] < 1:
      raise ValueError(f"{name}: argmin and argmax require non-empty reduced dimension. "
                       f"operand.shape={x.shape} axis={axis}")
    d = np.dtype(index_dtype)
    if d not in _int:
      raise TypeError(f"{name}: index_dtype must be an integer type, but got {d.name}")
    return ShapedArray(_drop(x.shape, axes), d)
  return rule


_ARG_ROWS_NUMPY = frozenset(map(np.dtype, (np.float32, np.float64)))
_ARG_ROW_MIN = 64


def _numpy_rows(npf, O, N, idt, sf):
  """Rows of ``N >= _ARG_ROW_MIN`` float32/float64 elements along the last axis: NumPy's
  SIMD argmax per row (JAX's index, as for one row), 1.2-3.7x faster than the numba kernels
  on two threads here ((1000, 1000) float32 238 -> 65 us, (1000, 64) 38 -> 13 us)."""
  k = lambda x: npf(x.reshape(O, N), axis=1).astype(idt).reshape(sf)
  k.fresh = k.bare = True
  return k


def _argminmax_numba(op):

  plans = {}  # (shape, dtype, axes, index_dtype) -> (kernel, operand view, output, result)
  npf = getattr(np, op)

  def impl(x, *, axes, index_dtype):
    key = (x.shape, x.dtype, axes, index_dtype)
    p = plans.get(key)
    if p is None:
      if len(plans) > 1024:
        plans.clear()
      axis, = axes
      O, N, I = _block(x.shape, axis, axis + 1)
      if I == 1 and N >= _ARG_ROW_MIN and x.dtype in _ARG_ROWS_NUMPY:
        plans[key] = _numpy_rows(npf, O, N, index_dtype, _drop(x.shape, axes))
        return plans[key](x)
      par = x.size >= PAR_MIN and O > 1
      rows, cols = (K.ARG_ROWS_PAR, K.ARG_COLS_PAR) if par else (K.ARG_ROWS, K.ARG_COLS)
      p = plans[key] = ((rows[op], (O, N), O) if I == 1 else (cols[op], (O, N, I), (O, I))) + (
                            _drop(x.shape, axes), O * I > 0)
    if callable(p):
      return p(x)
    k, si, so, sf, nonempty = p
    out = np.empty(so, index_dtype)
    if nonempty:
      k(_to_numba(x).reshape(si), out)
    return out.reshape(sf)

  def specialize(avals, params):
    """``impl`` for these avals with its plan made once (the registry's hot path)."""
    (x,), (axis,), idt = avals, params["axes"], params["index_dtype"]
    O, N, I = _block(x.shape, axis, axis + 1)
    if I == 1 and N >= _ARG_ROW_MIN and x.dtype in _ARG_ROWS_NUMPY:
      return _numpy_rows(npf, O, N, idt, _drop(x.shape, (axis,)))
    if x.size >= PAR_MIN or not O * I or x.dtype == np.float16:
      return None
    kern, si, so = (K.ARG_ROWS[op], (O, N), O) if I == 1 else (K.ARG_COLS[op], (O, N, I), (O, I))
    kern = _entry(kern, np.empty(si, x.dtype), np.empty(so, idt))
    sf = _drop(x.shape, (axis,))

    def k(x):
      out = np.empty(so, idt)
      kern(x.reshape(si), out)
      return out.reshape(sf)
    k.fresh = k.bare = True  # a new C buffer of the index dtype, numba code only
    return k
  impl.specialize = specialize
  return impl


def _argminmax_numpy(f):
  def impl(x, *, axes, index_dtype):
    return f(x, axis=axes[0]).astype(index_dtype)

  def specialize(avals, params):
    """One row (every other axis of size 1): the flat index, a bare kernel for the hot path."""
    (x,), (axis,), idt = avals, params["axes"], params["index_dtype"]
    if x.size != x.shape[axis] or not x.size:
      return None
    shape = _drop(x.shape, (axis,))
    k = (lambda v: np.array(f(v), idt)) if not shape else (
        lambda v: np.array(f(v), idt).reshape(shape))
    k.fresh = k.bare = True
    return k
  impl.specialize = specialize
  return impl


def _argminmax_samples(rng, dtype):
  d = np.dtype(dtype)
  out = []
  for shape, axis in [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((1,), 0),
                      ((2, 0, 3), 2), ((200,), 0)]:
    x = _rand(rng, shape, d)
    if d.kind == "f" and shape == (3, 4):
      x[1, 2] = np.nan
    for idt in (np.int32, np.int64):
      out.append(([x], dict(axes=(axis,), index_dtype=np.dtype(idt))))
  return out


def _argminmax_bad(name):
  def bad(rng):
    x = Array(np.ones((2, 3), np.float32))
    return [([x], dict(axes=(2,), index_dtype=np.dtype(np.int32)), ValueError),
            ([Array(np.ones((2, 0), np.float32))], dict(axes=(1,), index_dtype=np.dtype(np.int32)),
             ValueError),
            ([x], dict(axes=(0,), index_dtype=np.dtype(np.float32)), TypeError),
            ([Array(np.ones(3, np.complex64))], dict(axes=(0,), index_dtype=np.dtype(np.int32)),
             TypeError)]
  return bad


# One row (the reduction over the whole operand, ``jnp.argmax(x)``) of 2^12 elements and more
# runs NumPy's argmax, whose SIMD loops (AVX-512 here) are ~2x numba's block scan and which
# gives JAX's answer (the first NaN, else the first extremum, -0.0 == 0.0); float16/bfloat16
# stay on numba (NumPy's loops for them are 1.4-3x slower), as do rows of a batch. Float32 /
# float64 at 1e5, same process, others paused: numba 15.5 / 46 us, NumPy 7.8 / 17 (2026-12-01).
_ARG_NUMPY_MIN = 1 << 12
_arg_work = work_eager(lambda vals, out_aval: vals[0].size if out_aval.size == 1 and (
    vals[0].dtype not in _F16) else 0)


def _argminmax(name, f):
  p = Primitive(name)
  p.make_eager = _arg_work
  ref = _argminmax_numpy(f)
  registry.register(
      p, family="reduction", impls={"numba": _argminmax_numba(name), "numpy": ref},
      abstract_eval=_argminmax_abstract_eval(name), batch=_reducer_batch(p),
      policy=("numba", "numpy", _ARG_NUMPY_MIN),
      meta=dict(dtypes=_sorted(_real | _bool), reference=ref, samples=_argminmax_samples,
                differentiable=False, linear=False, bad_inputs=_argminmax_bad(name),
                note=f"numpy from {_ARG_NUMPY_MIN} elements when one row is reduced (SIMD "
                     "argmax, ~2x numba's), except float16/bfloat16, and for float32/float64 "
                     f"rows of {_ARG_ROW_MIN}+ along the last axis; numba kernels otherwise "
                     "(float16 widened to float32 by NumPy's astype first)",
                # JAX's message for a complex operand names the comparator it would use
                error_names=("gt" if name == "argmax" else "lt",)))
  ad.defjvp_zero(p)
  return p


argmax_p = _argminmax("argmax", np.argmax)
argmin_p = _argminmax("argmin", np.argmin)


def argmax(operand, axis, index_dtype):
  """Index of the maximum along ``axis`` (first NaN, else first maximum)."""
  return argmax_p.bind(operand, axes=(operator.index(axis),),
                       index_dtype=dtypes.canonicalize_explicit_dtype(index_dtype, "argmax"))


def argmin(operand, axis, index_dtype):
  """Index of the minimum along ``axis`` (first NaN, else first minimum)."""
  return argmin_p.bind(operand, axes=(operator.index(axis),),
                       index_dtype=dtypes.canonicalize_explicit_dtype(index_dtype, "argmin"))


# ----------------------------------------------------------------- cumulative reductions

_CUM_IDENT = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min"}


_CUM_XLA = {"cumsum": "sum", "cumprod": "prod", "cumlogsumexp": "logaddexp"}


def _cum_numba(name):
  consts = {}  # dtype -> (identity, kernel dtype, XLA-order kernels or None)

  def const(dt):
    c = consts.get(dt)
    if c is None:
      kd = np.dtype(np.float32) if dt == np.float16 else dt
      z = (np.array(-np.inf, kd)[()] if name == "cumlogsumexp"
           else identity(_CUM_IDENT[name], kd))
      ks = None
      if name in _CUM_XLA and dt.kind in "fc":  # XLA's association (kernels.reductions)
        kop = name + "_complex" if dt.kind == "c" and name == "cumprod" else name
        ks = (K.SCAN_ROWS[kop], K.SCAN_COLS[kop])
      c = consts[dt] = (z, kd, ks)
    return c

  def specialize(avals, params):
    """``impl`` for these avals with the blocking worked out once (serial kernels, no
    float16): the registry's hot path and eager programs."""
    (x,), reverse = avals, params["reverse"]
    O, N, I = _block(x.shape, params["axis"], params["axis"] + 1)
    if x.dtype == np.float16 or not x.size or N == 1 or x.size >= PAR_MIN:
      return None
    z, kd, ks = const(x.dtype)
    shape = x.shape
    kern = ks[I != 1] if ks else (K.CUM_COLS if I != 1 else K.CUM_ROWS)[name]
    blk = (O, N) if I == 1 else (O, N, I)
    kern = _entry(kern, np.empty(blk, x.dtype), np.empty(blk, kd), z, reverse)

    def k(x):
      out = pooled_empty(shape, kd)
      kern(x.reshape(blk), out.reshape(blk), z, reverse)
      return out
    k.fresh = k.bare = True  # a new C buffer of x's dtype, numba code only
    return k

  def impl(x, *, axis, reverse):
    z, kd, ks = const(x.dtype)
    O, N, I = _block(x.shape, axis, axis + 1)
    if ks is not None:
      if N == 1 and name == "cumsum":  # XLA folds 0 + x to x (keeps -0)
        return x.copy()
      if x.dtype == np.float16:
        return _scan_np(x.reshape(O, N, I), _np_op(_CUM_XLA[name], x.dtype), z,
                        reverse).astype(np.float16).reshape(x.shape)
      out = pooled_empty(x.shape, kd)
      if out.size:
        if I == 1:
          ks[0](x.reshape(O, N), out.reshape(O, N), z, reverse)
        else:
          ks[1](x.reshape(O, N, I), out.reshape(O, N, I), z, reverse)
      return out
    xk = x if kd == x.dtype else x.astype(kd)
    out = pooled_empty(x.shape, kd)
    big = x.size >= PAR_MIN and O > 1
    if out.size:
      if I == 1:
        (K.CUM_ROWS_PAR if big else K.CUM_ROWS)[name](xk.reshape(O, N), out.reshape(O, N), z,
                                                      reverse)
      else:
        (K.CUM_COLS_PAR if big else K.CUM_COLS)[name](xk.reshape(O, N, I), out.reshape(O, N, I),
                                                      z, reverse)
    return out if kd == x.dtype else out.astype(x.dtype)
  impl.specialize = specialize
  return impl


def _cum_numpy(name):
  acc = {"cumsum": lambda x, a: np.cumsum(x, a, dtype=x.dtype),
         "cumprod": lambda x, a: np.cumprod(x, a, dtype=x.dtype),
         "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate}.get(name)

  def impl(x, *, axis, reverse):
    if x.size == 0:
      return x.copy()
    if name in _CUM_XLA and x.dtype.kind in "fc":  # XLA's association
      if x.shape[axis] == 1 and name == "cumsum":
        return x.copy()
      z = -np.inf if name == "cumlogsumexp" else identity(_CUM_IDENT[name], x.dtype)
      x3 = x.reshape(_block(x.shape, axis, axis + 1))
      return _scan_np(x3, _np_op(_CUM_XLA[name], x.dtype), z, reverse).reshape(x.shape)
    if reverse:
      x = np.flip(x, axis)
    r = acc(x, axis)
    if name in ("cummax", "cummin"):
      r = _ieee_zeros(r, x, axis, name[3:], accumulate=True)
    return np.flip(r, axis) if reverse else r
  return impl


def _cum_abstract_eval(name, ok, accepted):
  def rule(x, *, axis, reverse):
    if not isinstance(x, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {x!r}")
    # a non-number (bool) is refused as JAX words it; the number dtypes this kernel lacks
    # (complex cummax/cummin/cumlogsumexp, integer cumlogsumexp) name what it takes
    _check_dtype(name, x, ok, "number" if x.dtype == np.bool_ else accepted)
    if not isinstance(axis, (int, np.integer)):
      raise TypeError(f"{name}: axis must be an int, got {axis!r}")
    if axis < 0:
      raise ValueError(f"{name}: XLA operations do not allow negative axes, got axis={axis}")
    if axis >= x.ndim:
      raise ValueError(f"{name}: axis {axis} is out of bounds for array of shape {x.shape}")
    return x
  return rule


def _cum_batch(prim):
  def rule(vals, dims, *, axis, reverse):
    x, = vals
    bd, = dims
    return prim.bind(x, axis=axis + (axis >= bd), reverse=reverse), bd
  return rule


def _cum_samples(name):
  def samples(rng, dtype):
    d = np.dtype(dtype)
    out = []
    for shape, axis in [((6,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((0,), 0),
                        ((2, 0, 3), 1), ((1, 1), 0)]:
      for reverse in (False, True):
        x = _rand(rng, shape, d, "prod" if name == "cumprod" else None)
        out.append(([x], dict(axis=axis, reverse=reverse)))
    return out
  return samples


def _cum_bad(name, bad_dtype):
  def bad(rng):
    x = Array(np.ones((2, 3), np.float32))
    return [([x], dict(axis=2, reverse=False), ValueError),
            ([x], dict(axis=-1, reverse=False), ValueError),
            ([Array(np.ones((2, 3), bad_dtype))], dict(axis=0, reverse=False), TypeError)]
  return bad


# where the numba backend hands work to NumPy (float16: numba has none)
_CUM_WIDEN = "numba; float16: widened to float32 and rounded back by NumPy's astype"
_CUM_TREE = ("numba; float16: numpy (XLA's blocks of 16 as NumPy ops, a Python loop over each "
             "block's positions; NumPy rounds each step as XLA)")
_CUM_NOTES = {"cumsum": _CUM_TREE + "; float/complex over a length-1 axis: a NumPy copy",
              "cumprod": _CUM_TREE, "cumlogsumexp": _CUM_TREE}


def _cumulative(name, ok, accepted, bad_dtype):
  p = Primitive(name)
  p.make_eager = make_work_eager
  ref = _cum_numpy(name)
  registry.register(
      p, family="reduction", impls={"numba": _cum_numba(name), "numpy": ref},
      abstract_eval=_cum_abstract_eval(name, ok, accepted), batch=_cum_batch(p), policy=NUMBA,
      meta=dict(dtypes=_sorted(ok), reference=ref, samples=_cum_samples(name),
                note=_CUM_NOTES.get(name, _CUM_WIDEN),
                differentiable=True, linear=name == "cumsum",
                bad_inputs=_cum_bad(name, bad_dtype), tol=_TOL))
  return p


cumsum_p = _cumulative("cumsum", _num, "number", np.bool_)
cumprod_p = _cumulative("cumprod", _num, "number", np.bool_)
cummax_p = _cumulative("cummax", _real, "integer, floating", np.complex64)
cummin_p = _cumulative("cummin", _real, "integer, floating", np.complex64)
cumlogsumexp_p = _cumulative("cumlogsumexp", _float, "floating", np.int32)
# float8, int4: XLA rounds its sums and products to the narrow type as it goes
for _p in (reduce_sum_p, reduce_prod_p, cumsum_p, cumprod_p, cumlogsumexp_p):
  _p.meta["narrow"] = "xla"


def cumsum(operand, axis=0, reverse=False):
  """Cumulative sum along ``axis``."""
  return cumsum_p.bind(operand, axis=int(axis), reverse=bool(reverse))


def cumprod(operand, axis=0, reverse=False):
  """Cumulative product along ``axis``."""
  return cumprod_p.bind(operand, axis=int(axis), reverse=bool(reverse))


def cummax(operand, axis=0, reverse=False):
  """Cumulative maximum along ``axis``."""
  return cummax_p.bind(operand, axis=int(axis), reverse=bool(reverse))


def cummin(operand, axis=0, reverse=False):
  """Cumulative minimum along ``axis``."""
  return cummin_p.bind(operand, axis=int(axis), reverse=bool(reverse))


def cumlogsumexp(operand, axis=0, reverse=False):
  """Cumulative log-sum-exp along ``axis``."""
  return cumlogsumexp_p.bind(operand, axis=int(axis), reverse=bool(reverse))


ad.deflinear2(cumsum_p, lambda ct, x, *, axis, reverse: [cumsum(ct, axis, not reverse)])


def _scan_jvp(prim, combine, ident):
  """jvp of an associative scan: a log-depth (Hillis-Steele) scan over (primal, tangent)
  pairs, built from lax ops so it composes with every transformation. ``combine(a, b)``
  merges the pair ``a`` (earlier in scan order) with ``b``; ``ident(dtype)`` is the primal
  identity (the tangent identity is 0)."""
  def rule(primals, tangents, *, axis, reverse):
    x, = primals
    t = ad.instantiate_zeros(tangents[0])
    ans = prim.bind(x, axis=axis, reverse=reverse)
    n = core.get_aval(x).shape[axis]
    p, d = x, 1
    fill = ident(core.get_aval(x).dtype)
    while d < n:
      sp = _shift(p, d, axis, fill, reverse)
      st = _shift(t, d, axis, 0, reverse)
      p, t = combine((sp, st), (p, t))
      d *= 2
    return ans, t
  return rule


def _prod_pair(a, b):
  lax = _lax()
  (p1, t1), (p2, t2) = a, b
  return lax.mul(p1, p2), lax.add(lax.mul(t1, p2), lax.mul(p1, t2))


def _chooser_pair(cmp):
  def combine(a, b):
    # the extremum's tangent; ties average, as lax.max's jvp
    lax = _lax()
    (m1, t1), (m2, t2) = a, b
    first = getattr(lax, cmp)(m1, m2)
    second = getattr(lax, cmp)(m2, m1)
    half = lax.mul(lax.add(t1, t2), _const_like(t1, 0.5))
    t = lax.select_n(first, lax.select_n(second, half, t2), t1)
    return getattr(lax, "max" if cmp == "gt" else "min")(m1, m2), t
  return combine


def _logaddexp_pair(a, b):
  lax = _lax()
  (a1, t1), (a2, t2) = a, b
  m = lax.max(a1, a2)
  m_safe = lax.select_n(lax.eq(m, _const_like(m, -np.inf)), m, _const_like(m, 0))
  e1, e2 = lax.exp(lax.sub(a1, m_safe)), lax.exp(lax.sub(a2, m_safe))
  s = lax.add(e1, e2)
  c = lax.add(m_safe, lax.log(s))
  s_safe = lax.select_n(lax.eq(s, _const_like(s, 0)), s, _const_like(s, 1))
  return c, lax.div(lax.add(lax.mul(t1, e1), lax.mul(t2, e2)), s_safe)


cumprod_p.jvp = _scan_jvp(cumprod_p, _prod_pair, lambda d: 1)
cummax_p.jvp = _scan_jvp(cummax_p, _chooser_pair("gt"), lambda d: identity("max", d))
cummin_p.jvp = _scan_jvp(cummin_p, _chooser_pair("lt"), lambda d: identity("min", d))
cumlogsumexp_p.jvp = _scan_jvp(cumlogsumexp_p, _logaddexp_pair, lambda d: -np.inf)


# ----------------------------------------------------------------- sort

sort_p = Primitive("sort")
sort_p.multiple_results = True
# one operand: NumPy's sort at every size (see _sort_numpy); several: by total elements
sort_p.make_eager = work_eager(lambda vals, out_aval: max(v.size for v in vals) if len(vals) > 1 else 0)


def _sort_abstract_eval(*avals, dimension, is_stable, num_keys):
  if not avals:
    raise TypeError("sort requires at least one operand")
  for a in avals:
    if not isinstance(a, ShapedArray):
      raise TypeError(f"sort got a non-array operand {a!r}")
  if any(a.shape != avals[0].shape for a in avals[1:]):
    raise TypeError("sort: Arguments to sort must have equal shapes, got: "
                    + " ".join(str(a.shape) for a in avals))
  if not isinstance(num_keys, (int, np.integer)) or not 1 <= num_keys <= len(avals):
    raise ValueError(f"sort: num_keys={num_keys} must be between 1 and "
                     f"len(operand)={len(avals)}")
  nd = avals[0].ndim
  if not isinstance(dimension, (int, np.integer)) or not 0 <= dimension < max(nd, 1):
    raise ValueError(f"sort: dimension {dimension} is out of bounds for operands of shape "
                     f"{avals[0].shape}")
  if nd == 0:
    raise TypeError("sort: operands must have rank at least 1, got shape ()")
  for a in avals[:num_keys]:
    if not accepts(_num | _bool, a.dtype):
      raise TypeError(f"sort does not accept key dtype {a.dtype.name}")
  return [ShapedArray(a.shape, a.dtype, a.weak_type) for a in avals]


def _sort_keys(keys):
  """Key arrays split into real scalars in JAX's order: complex -> (real, imag)."""
  out = []
  for k in keys:
    if k.dtype.kind == "c":
      out += [np.ascontiguousarray(k.real), np.ascontiguousarray(k.imag)]
    else:
      out.append(k)
  return out


def _int_key(k):
  """A real key array as signed integers with the same order as JAX's sort: floats with
  -0.0 -> 0.0 and every NaN -> +NaN (largest), negative floats' magnitude bits flipped;
  unsigned integers with the sign bit flipped; bool as int8."""
  d = k.dtype
  if d == np.bool_:
    return k.view(np.int8)
  si = np.dtype(f"i{d.itemsize}")
  if d.kind == "i":
    return k
  if d.kind == "u":
    return (k ^ np.array(1 << (8 * d.itemsize - 1), d)).view(si)
  k = np.where(np.isnan(k), np.array(np.nan, d), k)
  k = np.where(k == 0, np.array(0, d), k)
  b = k.view(si)
  return b ^ ((b >> (8 * d.itemsize - 1)) & np.array(np.iinfo(si).max, si))


def _rows_last(x, dimension):
  """``x`` with ``dimension`` last, C-contiguous, as (rows, n)."""
  if dimension != x.ndim - 1:
    x = np.ascontiguousarray(np.moveaxis(x, dimension, -1))
  return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _rows_back(r, shape, dimension):
  """Rows-last ``r`` (``_rows_last``'s layout) as an array of ``shape`` again, C order."""
  if dimension == len(shape) - 1:
    return r.reshape(shape)
  r = r.reshape(shape[:dimension] + shape[dimension + 1:] + (shape[dimension],))
  return np.ascontiguousarray(np.moveaxis(r, -1, dimension))


def _take_rows(operands, perm, dimension, take):
  """Each operand permuted along ``dimension`` by rows-last ``perm`` (numba's row gather)."""
  outs = []
  for o in operands:
    x = _rows_last(o, dimension)
    xv = x.view(np.uint16) if x.dtype == np.float16 else x
    out = np.empty_like(xv)
    take(xv, perm, out)
    outs.append(_rows_back(out.view(o.dtype), o.shape, dimension))
  return outs


def _sort_numba(*operands, dimension, is_stable, num_keys):
  shape = operands[0].shape
  if operands[0].size == 0:
    return [o.copy() for o in operands]
  par = operands[0].size >= PAR_MIN and operands[0].size > shape[dimension]
  if (len(operands) == 1 and operands[0].dtype.kind in "iuf" and operands[0].dtype != np.float16
      and shape[dimension] <= 256):  # short rows: merge sort the values directly
    x = _rows_last(operands[0], dimension)
    out = np.empty_like(x)
    (K.SORT_ROWS_PAR if par else K.SORT_ROWS)(x, out)
    return [_rows_back(out, shape, dimension)]
  keys = [_int_key(k) for k in _sort_keys([_rows_last(k, dimension) for k in operands[:num_keys]])]
  n = keys[0].shape[1]
  perm = np.empty(keys[0].shape, np.int64)
  perm[:] = np.arange(n)
  radix = K.RADIX_ROWS_PAR if par else K.RADIX_ROWS
  for k in reversed(keys):  # least significant key first: stable passes give lexicographic order
    radix(k, perm, 8 * k.dtype.itemsize)
  return _take_rows(operands, perm, dimension, K.TAKE_ROWS_PAR if par else K.TAKE_ROWS)


def _float_bits(d):
  """(unsigned view dtype, magnitude mask, +inf's bits, -0.0's bits) of float dtype ``d``."""
  u = np.dtype(f"u{d.itemsize}")
  sign = np.array(-0.0, d).view(u)[()]
  return u, ~sign, np.array(np.inf, d).view(u)[()], sign


_FLOAT_BITS = {d: _float_bits(d) for d in map(np.dtype, (np.float16, np.float32, np.float64))}


def _nan_or_negzero(x):
  u, absmask, inf, negzero = _FLOAT_BITS[x.dtype]
  return K.has_nan_or_negzero(x.reshape(-1).view(u), absmask, inf, negzero)


def _sort_one(x, axis):
  # One real operand (NumPy's complex order, NaNs included, is not JAX's: lexsort below):
  # equal keys are equal values, so NumPy's SIMD quicksort gives the stable result, unless
  # NaNs or -0.0 (keys that compare equal but differ) are present: one kernel pass checks
  # (up to 16 elements the stable sort costs the same: no check).
  if x.dtype.kind in "biu" or x.dtype.kind == "f" and x.size > 16 and not _nan_or_negzero(x):
    return np.sort(x, axis=axis)
  return np.sort(x, axis=axis, kind="stable")


def _sort_numpy(*operands, dimension, is_stable, num_keys):
  if len(operands) == 1 and operands[0].dtype.kind != "c":
    return [_sort_one(operands[0], dimension)]
  if operands[0].size == 0:
    return [o.copy() for o in operands]
  keys = _sort_keys(operands[:num_keys])
  perm = _rows_last(np.lexsort(tuple(reversed(keys)), axis=dimension), dimension)
  return _take_rows(operands, perm, dimension, K.TAKE_ROWS)  # (np.take_along_axis: ~12 us
  # of Python per operand)


def _sort_numpy_specialize(avals, params):
  """One real operand: the NumPy sort of ``_sort_numpy`` without its per-call dispatch (the
  registry's hot path and eager programs call it on the raw array)."""
  if len(avals) != 1 or not (avals[0].dtype.kind in "biu" or avals[0].dtype in _FLOAT_BITS):
    return None
  ax = params["dimension"]
  k = lambda x: [_sort_one(x, ax)]
  k.bare = True  # (a new C buffer of x's dtype; no floating-point arithmetic to silence)
  return k


_sort_numpy.specialize = _sort_numpy_specialize


def _sort_batch(vals, dims, *, dimension, is_stable, num_keys):
  # every operand gets the batch axis where the first batched one has it (JAX's rule)
  bd = next(d for d in dims if d is not None)
  size = core.get_aval(vals[dims.index(bd)]).shape[bd]
  args = [batching.moveaxis(v, d, bd) if d is not None
          else batching.moveaxis(batching.bdim_at_front(v, None, size), 0, bd)
          for v, d in zip(vals, dims)]
  outs = sort_p.bind(*args, dimension=dimension + (bd <= dimension), is_stable=is_stable,
                     num_keys=num_keys)
  return outs, [bd] * len(outs)


def _sort_jvp(primals, tangents, *, dimension, is_stable, num_keys):
  # the tangents follow the keys' permutation: sort them as extra (non-key) operands of the
  # same keys. That sort is linear in them; sort's transpose rule inverts the permutation.
  outs = sort_p.bind(*primals, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
  nz = [i for i, t in enumerate(tangents) if type(t) is not ad.Zero]
  touts = [ad.Zero.from_primal_value(o) for o in outs]
  if nz:
    moved = sort_p.bind(*primals[:num_keys], *(tangents[i] for i in nz), dimension=dimension,
                        is_stable=is_stable, num_keys=num_keys)[num_keys:]
    for i, t in zip(nz, moved):
      touts[i] = t
  return outs, touts


def _sort_transpose(cts, *args, dimension, is_stable, num_keys):
  keys = args[:num_keys]
  if any(ad.is_undefined_primal(k) for k in keys):
    raise NotImplementedError("sort: transposition with respect to the sort keys is not "
                              "defined (sort is not linear in its keys)")
  undefined = [i for i, a in enumerate(args) if ad.is_undefined_primal(a)]
  res = [None] * len(args)
  live = [i for i in undefined if type(cts[i]) is not ad.Zero]
  for i in undefined:
    if type(cts[i]) is ad.Zero:
      res[i] = ad.Zero(args[i].aval)
  if live:
    shape = core.get_aval(keys[0]).shape
    perm = sort_p.bind(*keys, _iota(shape, dimension), dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)[-1]
    back = sort_p.bind(perm, *(cts[i] for i in live), dimension=dimension, is_stable=True,
                       num_keys=1)[1:]
    for i, c in zip(live, back):
      res[i] = c
  return res


def _iota(shape, dimension):
  idx = np.arange(shape[dimension], dtype=np.int64 if shape[dimension] >= 2**31 else np.int32)
  idx = idx.reshape([-1 if i == dimension else 1 for i in range(len(shape))])
  return Array(np.ascontiguousarray(np.broadcast_to(idx, shape)))


def _sort_samples(rng, dtype):
  d = np.dtype(dtype)
  out = []
  x = _rand(rng, (4, 9), d)  # distinct floats (jvp checks); NaN/tie order: tests/test_reductions.py
  if d.kind in "iu":
    x = (x % 3).astype(d)
  y = _rand(rng, (4, 9), np.int32)
  out.append(([x], dict(dimension=1, is_stable=True, num_keys=1)))
  out.append(([x], dict(dimension=0, is_stable=True, num_keys=1)))
  out.append(([x, y], dict(dimension=1, is_stable=True, num_keys=1)))
  out.append(([x, y % 2], dict(dimension=1, is_stable=True, num_keys=2)))
  out.append(([y % 2, x, y], dict(dimension=0, is_stable=True, num_keys=2)))
  out.append(([y % 3, x], dict(dimension=1, is_stable=True, num_keys=1)))  # linear in x
  out.append(([_rand(rng, (5,), d)], dict(dimension=0, is_stable=True, num_keys=1)))
  out.append(([_rand(rng, (0, 3), d)], dict(dimension=0, is_stable=True, num_keys=1)))
  big = _rand(rng, (2, 3, 200), d)
  if d.kind in "fc":  # well-separated keys, so finite differences keep the order
    big = (rng.permuted(np.broadcast_to(np.arange(200.0), (2, 3, 200)), axis=2) / 8).astype(d)
  out.append(([big], dict(dimension=2, is_stable=True, num_keys=1)))
  return out


def _sort_bad(rng):
  x, y = Array(np.ones((2, 3), np.float32)), Array(np.ones((3, 2), np.float32))
  p = dict(dimension=0, is_stable=True)
  return [([x, y], dict(p, num_keys=1), TypeError), ([x], dict(p, num_keys=2), ValueError),
          ([x], dict(dimension=2, is_stable=True, num_keys=1), ValueError)]


registry.register(
    sort_p, family="reduction", impls={"numba": _sort_numba, "numpy": _sort_numpy},
    abstract_eval=_sort_abstract_eval, jvp=_sort_jvp, transpose=_sort_transpose,
    batch=_sort_batch, policy=("numpy", "numba", 1 << 13),
    meta=dict(dtypes=_sorted(_num | _bool), reference=_sort_numpy, samples=_sort_samples,
              differentiable=True, linear=False, bad_inputs=_sort_bad,
              note="one operand: numpy sort at every size (SIMD quicksort, stable sort if NaN/-0.0); "
                   "several operands: numpy lexsort below 8192 elements, numba radix sort above "
                   "(keys made sortable integers by NumPy ops but for signed ints/bool, a sort "
                   "dimension other than the last moved there and back by NumPy copies)"))


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
  """Stable sort along ``dimension``; a sequence of operands sorts lexicographically by the
  first ``num_keys`` and permutes the rest alike. NaNs sort last; -0.0 == 0.0."""
  if isinstance(operand, (list, tuple)):
    if not operand:
      raise TypeError("Sort requires at least one operand")
    if not 1 <= num_keys <= len(operand):
      raise ValueError(f"num_keys={num_keys} must be between 1 and len(operand)={len(operand)}")
    dimension = _canonicalize_axis(dimension, core.get_aval(operand[0]).ndim)
    return tuple(sort_p.bind(*operand, dimension=dimension, is_stable=bool(is_stable),
                             num_keys=int(num_keys)))
  if num_keys != 1:
    raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand.")
  dimension = _canonicalize_axis(dimension, core.get_aval(operand).ndim)
  return sort_p.bind(operand, dimension=dimension, is_stable=bool(is_stable), num_keys=1)[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
  """Sort ``keys`` along ``dimension`` and apply the same permutation to ``values``."""
  dimension = _canonicalize_axis(dimension, core.get_aval(keys).ndim)
  k, v = sort_p.bind(keys, values, dimension=dimension, is_stable=bool(is_stable), num_keys=1)
  return k, v


def _top_k_abstract_eval(operand, *, k, axis):
  if dtypes.is_complex(operand.dtype):
    raise ValueError("top_k is not compatible with complex inputs.")
  if k < 0:
    raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
  if not operand.ndim:
    raise TypeError(f"top_k operand must have >= 1 dimension, got {operand.shape}")
  if not 0 <= axis < operand.ndim:
    raise ValueError(f"axis argument out of range: axis={axis} for operand.shape={operand.shape}")
  shape = list(operand.shape)
  if shape[axis] < k:
    raise ValueError("k argument to top_k must be no larger than size along axis; got "
                     f"k={k} with shape={shape} and axis={axis}")
  if shape[axis] > np.iinfo(np.int32).max + 1:
    raise ValueError("top_k returns int32 indices, which will overflow for array dimensions "
                     f"larger than the maximum int32 ({np.iinfo(np.int32).max}). Got "
                     f"operand.shape={tuple(operand.shape)}")
  shape[axis] = k
  return [ShapedArray(tuple(shape), operand.dtype, operand.weak_type),
          ShapedArray(tuple(shape), np.dtype(np.int32))]


def _top_k_numpy(x, *, k, axis):
  """NumPy's stable argsort on keys in XLA's total order, reversed (``~``): descending, NaN
  first and -NaN last, 0.0 before -0.0, equal values in index order."""
  xm = np.moveaxis(x, axis, -1)
  if dtypes.is_float(x.dtype):
    b = xm.view(np.dtype(f"i{x.dtype.itemsize}"))
    key = np.where(b < 0, b ^ np.iinfo(b.dtype).max, b)  # (-NaN the least, NaN the largest)
  else:
    key = xm
  order = np.argsort(~key, axis=-1, kind="stable")[..., :k]
  vals = np.take_along_axis(xm, order, axis=-1)
  return [np.ascontiguousarray(np.moveaxis(vals, -1, axis)),
          np.ascontiguousarray(np.moveaxis(order.astype(np.int32), -1, axis))]


def _top_k_jvp(primals, tangents, *, k, axis):
  from nbjax.lax import indexing
  lax = _lax()
  (operand,), (tangent,) = primals, tangents
  vals, idx = top_k_p.bind(operand, k=k, axis=axis)
  if type(tangent) is ad.Zero:
    return [vals, idx], [ad.Zero(core.get_aval(vals)), ad.Zero(core.get_aval(idx).to_tangent_aval())]
  rank = len(core.get_aval(idx).shape)
  dnums = indexing.GatherDimensionNumbers(
      offset_dims=(), collapsed_slice_dims=(axis,),
      operand_batching_dims=tuple(i for i in range(rank) if i != axis),
      start_indices_batching_dims=tuple(i for i in range(rank) if i != axis),
      start_index_map=(axis,))
  t = indexing.gather(tangent, lax.reshape(idx, (*core.get_aval(idx).shape, 1)), dnums,
                      (1,) * rank)
  return [vals, idx], [t, ad.Zero(core.get_aval(idx).to_tangent_aval())]


def _top_k_batch(vals, dims, *, k, axis):
  (x,), (b,) = vals, dims
  return top_k_p.bind(x, k=k, axis=axis + 1 if b <= axis else axis), [b, b]


def _top_k_samples(rng, dtype):
  d = np.dtype(dtype)
  x = _rand(rng, (4, 9), d)
  if d.kind in "iub":
    x = x.astype(d)
  return [([x], dict(k=3, axis=1)), ([x], dict(k=2, axis=0)), ([x], dict(k=0, axis=1))]


top_k_p = Primitive("top_k")
top_k_p.multiple_results = True
registry.register(
    top_k_p, family="reduction", impls={"numpy": _top_k_numpy},
    abstract_eval=_top_k_abstract_eval, jvp=_top_k_jvp, batch=_top_k_batch,
    policy=("numpy", "numpy", 1 << 62),
    meta=dict(dtypes=_sorted(_int | _float | _bool), reference=_top_k_numpy,
              samples=_top_k_samples, differentiable=True, linear=False,
              note="numpy: a stable argsort on XLA's total-order keys (-NaN < -inf, -0.0 < 0.0, "
                   "inf < NaN; ties in index order); jit: chlo.top_k, as JAX's"))


def top_k(operand, k, *, axis=-1, is_stable=True):
  """The ``k`` largest entries along ``axis`` (descending in XLA's total order: NaN above
  inf, -NaN below -inf, 0.0 above -0.0; equal values in index order) and their int32
  indices."""
  del is_stable  # (always stable, as XLA's TopK)
  aval = core.get_aval(operand)
  k = operator.index(k)
  if not aval.ndim:
    raise ValueError(f"axis {axis} is out of bounds for array of dimension 0")
  return top_k_p.bind(operand, k=k, axis=_canonicalize_axis(axis, aval.ndim))


def _canonicalize_axis(axis, ndim):
  axis = operator.index(axis)
  if not -max(ndim, 1) <= axis < max(ndim, 1):
    raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
  return axis % max(ndim, 1)


# ----------------------------------------------------------------- jet (Taylor) rules
jet.deflinear(reduce_sum_p)
jet.deflinear(cumsum_p)


def _cumulative_jet(combine):
  # JAX's rule: the jet of the parallel prefix scan (reduce_window is not differentiable
  # to all orders)
  def rule(primals, series, *, axis, reverse):
    lax = _lax()
    return jet.jet2(lambda x: lax.associative_scan(getattr(lax, combine), x, axis=axis,
                                                   reverse=reverse), primals, series)
  return rule


def _reduce_chooser_jet(chooser):
  # each coefficient as the jvp's tangent: averaged over the locations of the extremum
  def rule(primals, series, *, axes, **params):
    (x,), (u,) = primals, series
    ans = chooser(x, axes)
    return ans, [_reduce_chooser_jvp(t, ans, x, axes=axes) for t in u]
  return rule


cumprod_p.jet, cummax_p.jet, cummin_p.jet = map(_cumulative_jet, ("mul", "max", "min"))
reduce_max_p.jet = _reduce_chooser_jet(reduce_max)
reduce_min_p.jet = _reduce_chooser_jet(reduce_min)


__all__ = ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
           "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
           "cumlogsumexp", "sort", "sort_key_val", "top_k",
           "reduce_sum_p", "reduce_prod_p", "reduce_max_p", "reduce_min_p", "reduce_and_p",
           "reduce_or_p", "reduce_xor_p", "argmax_p", "argmin_p", "cumsum_p", "cumprod_p",
           "cummax_p", "cummin_p", "cumlogsumexp_p", "sort_p", "top_k_p"]

# ====================================================================== lowering (StableHLO)
# Rules run under jit only; ``mlir``/``hlo``/``ir`` are lazy proxies, so importing this
# file never imports jaxlib.
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import chlo, hlo, i64_array, ir, mlir  # noqa: E402,F401


def _reg(name, rule):
  lowering.register(name, rule)


def _scalar_type(dtype):
  return ir.RankedTensorType.get([], mlir.dtype_to_ir_type(dtype))


def _kind(dtype):
  return dtypes.kind(dtype)


def _is_bool(dtype):
  return np.dtype(dtype) == np.bool_


# ----------------------------------------------------------------- reduce_*

def _combiner(op, dtype):
  b = _is_bool(dtype)
  return {"sum": hlo.add, "prod": hlo.multiply, "max": hlo.or_ if b else hlo.maximum,
          "min": hlo.and_ if b else hlo.minimum, "and": hlo.and_, "or": hlo.or_,
          "xor": hlo.xor}[op]


def _reduce(op):
  def rule(ctx, x, *, axes, **params):
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    init = mlir.ir_constant(np.asarray(identity(op, aval.dtype), aval.dtype))
    red = hlo.ReduceOp([mlir.aval_to_ir_type(out)], [x], [init], i64_array(axes))
    s = _scalar_type(aval.dtype)
    blk = red.regions[0].blocks.append(s, s)
    comb = _combiner(op, aval.dtype)
    with ir.InsertionPoint(blk):
      hlo.return_([comb(*blk.arguments)])
    return [red.result]
  return rule


for _op in ("sum", "prod", "max", "min", "and", "or", "xor"):
  _reg("reduce_" + _op, _reduce(_op))


# ----------------------------------------------------------------- argmin / argmax

def _isnan(x, dtype):
  return mlir.compare(x, x, "NE", dtype)


def _lo_argminmax(direction, op):
  def rule(ctx, x, *, axes, index_dtype):
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    axis, = axes
    dt, it = np.dtype(aval.dtype), np.dtype(index_dtype)
    idx = hlo.iota(mlir.aval_to_ir_type(aval.update(dtype=it)), axis)
    init_v = mlir.ir_constant(np.asarray(identity(op, dt), dt))
    init_i = mlir.ir_constant(np.zeros((), it))
    red = hlo.ReduceOp([mlir.aval_to_ir_type(out.update(dtype=dt)), mlir.aval_to_ir_type(out)],
                       [x, idx], [init_v, init_i], i64_array([axis]))
    sv, si = _scalar_type(dt), _scalar_type(it)
    blk = red.regions[0].blocks.append(sv, si, sv, si)
    with ir.InsertionPoint(blk):
      va, ia, vb, ib = blk.arguments
      better = mlir.compare(va, vb, direction, dt)
      tie = mlir.compare(va, vb, "EQ", dt)
      if _kind(dt) in "fc":
        na, nb = _isnan(va, dt), _isnan(vb, dt)
        nnb = hlo.not_(nb)
        better = hlo.or_(hlo.and_(na, nnb), hlo.and_(hlo.and_(hlo.not_(na), nnb), better))
        tie = hlo.or_(hlo.and_(na, nb), tie)
      pick = hlo.or_(better, hlo.and_(tie, mlir.compare(ia, ib, "LT", it)))
      hlo.return_([hlo.select(pick, va, vb), hlo.select(pick, ia, ib)])
    return [red.results[1]]
  return rule


_reg("argmax", _lo_argminmax("GT", "max"))
_reg("argmin", _lo_argminmax("LT", "min"))


# ----------------------------------------------------------------- cumulative
# As JAX on CPU: one reduce_window whose window spans the whole axis, padded by n - 1 before
# (after, for ``reverse``) the operand. XLA's CPU pipeline rewrites it into a blocked scan
# (``kernels.reductions`` reproduces that order).

def _logaddexp(dt):
  def f(a, b):
    amax = hlo.maximum(a, b)
    delta = hlo.subtract(a, b)
    nan = mlir.compare(delta, delta, "NE", dt)
    mag = hlo.log_plus_one(hlo.exponential(hlo.negate(hlo.abs(delta))))
    return hlo.select(nan, hlo.add(a, b), hlo.add(amax, mag))
  return f


def _lo_cumulative(name):
  def rule(ctx, x, *, axis, reverse):
    aval = ctx.avals_in[0]
    dt, shape = np.dtype(aval.dtype), tuple(aval.shape)
    n = shape[axis]
    if n == 0:
      return [x]
    fn = {"cumsum": hlo.add, "cumprod": hlo.multiply, "cummax": hlo.maximum,
          "cummin": hlo.minimum, "cumlogsumexp": _logaddexp(dt)}[name]
    init = -np.inf if name == "cumlogsumexp" else identity(_CUM_IDENT[name], dt)
    ones = [1] * len(shape)
    win = list(ones)
    win[axis] = n
    pad = np.zeros((len(shape), 2), np.int64)
    pad[axis, 1 if reverse else 0] = n - 1
    op = hlo.ReduceWindowOp([mlir.aval_to_ir_type(aval)], [x],
                            [mlir.ir_constant(np.asarray(init, dt))], win, window_strides=ones,
                            base_dilations=ones, window_dilations=ones,
                            padding=ir.DenseIntElementsAttr.get(pad))
    s = _scalar_type(dt)
    blk = op.regions[0].blocks.append(s, s)
    with ir.InsertionPoint(blk):
      hlo.return_([fn(*blk.arguments)])
    return [op.result]
  return rule


for _name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
  _reg(_name, _lo_cumulative(_name))


# ----------------------------------------------------------------- sort

def _lt_eq(a, b, dt):
  """(a < b, a == b) with NaNs last and equal to each other (floats); -0.0 == 0.0."""
  lt = mlir.compare(a, b, "LT", dt)
  eq = mlir.compare(a, b, "EQ", dt)
  if _kind(dt) == "f":
    na, nb = _isnan(a, dt), _isnan(b, dt)
    lt = hlo.or_(lt, hlo.and_(hlo.not_(na), nb))
    eq = hlo.or_(eq, hlo.and_(na, nb))
  return lt, eq


def _sort(ctx, *operands, dimension, is_stable, num_keys):
  avals = ctx.avals_in
  op = hlo.SortOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(operands),
                  dimension=int(dimension), is_stable=bool(is_stable))
  types = []
  for a in avals:
    s = _scalar_type(a.dtype)
    types += [s, s]
  blk = op.regions[0].blocks.append(*types)
  with ir.InsertionPoint(blk):
    args = blk.arguments
    pairs = []
    for k in range(num_keys):
      dt = np.dtype(avals[k].dtype)
      a, b = args[2 * k], args[2 * k + 1]
      if _kind(dt) == "c":
        fdt = np.float32 if dt == np.complex64 else np.float64
        pairs += [_lt_eq(hlo.real(a), hlo.real(b), fdt), _lt_eq(hlo.imag(a), hlo.imag(b), fdt)]
      else:
        pairs.append(_lt_eq(a, b, dt))
    res = pairs[-1][0]
    for lt, eq in reversed(pairs[:-1]):
      res = hlo.or_(lt, hlo.and_(eq, res))
    hlo.return_([res])
  return list(op.results)


_reg("sort", _sort)


def _top_k_lower(ctx, operand, *, k, axis):
  # chlo.top_k works on the last dimension (JAX's lowering): the axis is swapped there and back
  nd = len(ctx.avals_in[0].shape)
  perm = None
  if axis != nd - 1:
    perm = list(range(nd))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    operand = hlo.transpose(operand, i64_array(perm))
  res = list(chlo.top_k(operand, ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(k))))
  if perm is not None:
    res = [hlo.transpose(r, i64_array(perm)) for r in res]
  return res


_reg("top_k", _top_k_lower)
