"""Windowed reductions: ``reduce_window`` (generic, traced reducer) and its fast primitives
``reduce_window_sum/max/min``, plus the max-pool gradient pair ``select_and_gather_add`` /
``select_and_scatter_add``, each with every rule.

Pipeline position: ``lax.reduce_window(x, -inf, lax.max, ...)`` recognises the add/max/min
monoids (a concrete identity init value) and binds ``reduce_window_max_p``; any other
reducer is traced to a jaxpr and binds ``reduce_window_p``. With no transformation active
the fast primitives run ``kernels.windowed`` on the operand padded (and base-dilated) with
the init value; the generic one evaluates its reducer jaxpr under ``vmap`` once per window
element on whole strided views (batched kernels, no loop over windows). Under ``jit`` they
lower to ``stablehlo.reduce_window`` (``select_and_scatter_add``: ``select_and_scatter``).

Derivatives are JAX's: reduce_window_sum is linear (transpose: pad the cotangent, then a
reduce_window_sum); max/min's jvp is ``select_and_gather_add`` (the tangent at each window's
selected element), whose transpose is ``select_and_scatter_add`` (the max-pool gradient).
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from kernels import windowed as K
from nbjax import core, dtypes, registry
from nbjax.core import Primitive, ShapedArray, get_aval
from nbjax.interpreters import ad, batching, jet
from nbjax.jaxpr import eval_jaxpr
from nbjax.lax.convolution import padtype_to_pads
from nbjax.lax.elementwise import _float, _int, _num, ge_p, le_p
from nbjax.lax.other import _flat_operands, _fold_batched_inits, _reducer_jvp
from nbjax._tree_util import tree_flatten, tree_unflatten

__all__ = ["reduce_window", "reduce_window_p", "reduce_window_sum_p", "reduce_window_max_p",
           "reduce_window_min_p", "select_and_scatter_add_p", "select_and_gather_add_p"]

_WPARAMS = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")


def _lax():
  from nbjax import lax
  return lax


# ----------------------------------------------------------------- shapes


def _dilate(shape, dil):
  return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dil))


def _stride_dim(d, w, s):
  return max(0, (d - w) // s + 1)


def _out_shape(shape, window_dimensions, window_strides, padding, base_dilation,
               window_dilation):
  padded = [d + lo + hi for d, (lo, hi) in zip(_dilate(shape, base_dilation), padding)]
  win = _dilate(window_dimensions, window_dilation)
  return tuple(_stride_dim(d, w, s) for d, w, s in zip(padded, win, window_strides))


def _check_shapelike(name, arg, xs, non_zero=False):
  if not isinstance(xs, tuple) or not all(isinstance(x, (int, np.integer)) for x in xs):
    raise TypeError(f"{name} {arg} must be a tuple of ints, got {xs!r}")
  if any(x < 0 or (non_zero and x == 0) for x in xs):
    kind = "positive" if non_zero else "nonnegative"
    raise TypeError(f"{name} {arg} must have every element be {kind}, got {xs}.")


def _window_shape(name, aval, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
  """JAX's ``_common_reduce_window_shape_rule`` (its checks and messages)."""
  _check_shapelike(name, "window_dimensions", window_dimensions, True)
  _check_shapelike(name, "window_strides", window_strides, True)
  _check_shapelike(name, "base_dilation", base_dilation, True)
  _check_shapelike(name, "window_dilation", window_dilation, True)
  nw = len(window_dimensions)
  if aval.ndim != nw:
    raise TypeError(f"{name} got the wrong number of window_dimensions for operand: got "
                    f"operand shape {aval.shape} with window_dimensions {window_dimensions}.")
  for arg, v in (("window_strides", window_strides), ("base_dilation", base_dilation),
                 ("window_dilation", window_dilation)):
    if len(v) != nw:
      raise TypeError(f"{name} got inconsistent {arg} and window_dimensions: got {arg} {v} "
                      f"and window_dimensions {window_dimensions}.")
  if (not isinstance(padding, tuple) or len(padding) != nw or
      not all(isinstance(p, tuple) and len(p) == 2 for p in padding)):
    raise ValueError(f"{name}: padding must be a tuple of {nw} (low, high) pairs, got "
                     f"{padding!r}")
  return _out_shape(aval.shape, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation)


def _canon(operand_shape, window_dimensions, window_strides, padding, base_dilation,
           window_dilation):
  """User arguments -> the primitives' tuple params (strings resolved to pads)."""
  window_dimensions = tuple(map(operator.index, window_dimensions))
  nd = len(window_dimensions)
  window_strides = (1,) * nd if window_strides is None else tuple(map(operator.index, window_strides))
  base_dilation = (1,) * nd if base_dilation is None else tuple(map(operator.index, base_dilation))
  window_dilation = ((1,) * nd if window_dilation is None
                     else tuple(map(operator.index, window_dilation)))
  if isinstance(padding, str):
    padding = padtype_to_pads(operand_shape, _dilate(window_dimensions, window_dilation),
                              window_strides, padding)
  padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
  return dict(window_dimensions=window_dimensions, window_strides=window_strides,
              padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)


# ----------------------------------------------------------------- eager plan


@functools.lru_cache(maxsize=512)
def _plan(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
  """How the kernels walk a padded operand: ``(padded shape, placement, ostep, oshape, offs,
  C, out_shape)``; placement is ``None`` (no padding: the operand itself) or the slices of
  the padded buffer and of the operand that receive / give the operand's elements."""
  out_shape = _out_shape(shape, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation)
  dil = _dilate(shape, base_dilation)
  pshape = tuple(max(0, d + lo + hi) for d, (lo, hi) in zip(dil, padding))
  place = None
  if any(lo or hi for lo, hi in padding) or any(b != 1 for b in base_dilation):
    psl, xsl = [], []
    for n, b, (lo, _), S in zip(shape, base_dilation, padding, pshape):
      j0 = 0  # the first operand index at or past the padded start
      while j0 < n and lo + j0 * b < 0:
        j0 += 1
      j1 = n
      while j1 > j0 and lo + (j1 - 1) * b >= S:
        j1 -= 1
      if j1 <= j0:
        psl, xsl = None, None
        break
      psl.append(slice(lo + j0 * b, lo + (j1 - 1) * b + 1, b))
      xsl.append(slice(j0, j1))
    place = (tuple(psl), tuple(xsl)) if psl is not None else ((), None)
  nd = len(shape)
  pstr = [1] * nd
  for i in range(nd - 2, -1, -1):
    pstr[i] = pstr[i + 1] * pshape[i + 1]
  lanes = nd >= 1 and (window_dimensions[-1], window_strides[-1]) == (1, 1)
  C = out_shape[-1] if lanes else 1
  outer = range(nd - 1) if lanes else range(nd)
  oshape = np.array([out_shape[i] for i in outer], np.int64)
  ostep = np.array([window_strides[i] * pstr[i] for i in outer], np.int64)
  offs = np.zeros(1, np.int64)
  for i in outer:
    offs = (offs[:, None] + np.arange(window_dimensions[i]) * window_dilation[i] * pstr[i]).ravel()
  return pshape, place, ostep, oshape, offs, C, out_shape


def _padded(x, z, pshape, place):
  if place is None:
    return np.ascontiguousarray(x)
  p = np.full(pshape, z, x.dtype)
  if place[1] is not None:
    p[place[0]] = x[place[1]]
  return p


_NUMBA_T = {np.dtype(np.float16): np.dtype(np.float32)}


@functools.lru_cache(maxsize=None)
def _identity(op, d):
  d = np.dtype(d)
  if op == "sum":
    return np.zeros((), d)[()]
  if d == np.bool_:
    return np.bool_(op == "min")
  if d.kind in "iu":
    info = np.iinfo(d)
    return d.type(info.min if op == "max" else info.max)
  return d.type(-np.inf if op == "max" else np.inf)


def _reduce_window_numba(op):
  def impl(x, **wp):
    pshape, place, ostep, oshape, offs, C, out_shape = _plan(x.shape, **wp)
    d = x.dtype
    w = _NUMBA_T.get(d, d)
    out = np.empty(out_shape, w)
    if out.size:
      z = _identity(op, w)
      p = _padded(x.astype(w, copy=False) if w != d else x, z, pshape, place)
      K.REDUCE[op, K.unrolled(offs)](p.reshape(-1), ostep, oshape, offs, C, z, out.reshape(-1))
    return out.astype(d) if w != d else out
  return impl


def _windows(p, out_shape, window_dimensions, window_strides, window_dilation):
  """Each window element's strided view of the padded ``p`` (shape ``out_shape``), in
  row-major window order."""
  st = p.strides
  for k in np.ndindex(*window_dimensions):
    start = sum(i * r * s for i, r, s in zip(k, window_dilation, st))
    yield np.lib.stride_tricks.as_strided(
        p.reshape(-1)[start // p.itemsize:] if p.size else p, out_shape,
        [s * w for s, w in zip(st, window_strides)], writeable=False)


def _reduce_window_reference(op):
  """The test oracle: NumPy's binary op folded over the window's strided views."""
  f = {"sum": np.add, "max": np.fmax, "min": np.fmin}[op]

  def ref(x, **wp):
    pshape, place, *_, out_shape = _plan(x.shape, **wp)
    z = _identity(op, x.dtype)
    # sums of floats accumulate in double precision, rounded once at the end
    wide = x.dtype if op != "sum" or x.dtype.kind not in "fcV" else (
        np.complex128 if x.dtype.kind == "c" else np.float64)
    acc = np.full(out_shape, z, wide)
    if acc.size == 0:
      return acc.astype(x.dtype)
    p = _padded(x, z, pshape, place).astype(wide)
    nan = np.zeros(out_shape, bool)
    for v in _windows(p, out_shape, wp["window_dimensions"], wp["window_strides"],
                      wp["window_dilation"]):
      acc = f(acc, v)
      if op != "sum" and x.dtype.kind == "f":
        nan |= np.isnan(v)
    if nan.any():
      acc[nan] = np.nan
    return acc.astype(x.dtype)
  return ref


# ----------------------------------------------------------------- abstract eval


def _rw_abstract_eval(name, ok, accepted):
  def rule(x, **wp):
    if not isinstance(x, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {x!r}")
    if x.dtype not in ok:
      if name == "reduce_window_sum":
        raise TypeError(f"operand to reduce_window_sum must have a number dtype, got "
                        f"{x.dtype.name}")
      raise TypeError(f"{name} does not accept dtype {x.dtype.name}. Accepted dtypes are "
                      f"subtypes of {accepted}.")
    return ShapedArray(_window_shape(name, x, **wp), x.dtype, x.weak_type)
  return rule


# ----------------------------------------------------------------- transformations


def _conv_vjp_lhs_padding(in_shape, window_dimensions, window_strides, out_shape, padding,
                          lhs_dilation, rhs_dilation):
  lhs = _dilate(in_shape, lhs_dilation)
  rhs = _dilate(window_dimensions, rhs_dilation)
  out = _dilate(out_shape, window_strides)
  before = [r - lo - 1 for r, (lo, _) in zip(rhs, padding)]
  after = [l + r - 1 - o - b for l, r, o, b in zip(lhs, rhs, out, before)]
  return list(zip(before, after))


def _reduce_window_sum_transpose(ct, x, *, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation):
  lax = _lax()
  in_shape = x.aval.shape
  ct_shape = get_aval(ct).shape
  pads = _conv_vjp_lhs_padding(in_shape, window_dimensions, window_strides, ct_shape, padding,
                               base_dilation, window_dilation)
  cfg = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
  dt = get_aval(ct).dtype
  padded = lax.pad(ct, np.zeros((), dt), cfg)
  ones = (1,) * len(in_shape)
  out = reduce_window_sum_p.bind(padded, window_dimensions=window_dimensions,
                                 window_strides=base_dilation,
                                 padding=((0, 0),) * len(in_shape), base_dilation=ones,
                                 window_dilation=window_dilation)
  assert get_aval(out).shape == in_shape, (get_aval(out).shape, in_shape)
  return [out]


def _insert(params, bd):
  wp = dict(params)
  for k in _WPARAMS:
    v = wp[k]
    fill = (0, 0) if k == "padding" else 1
    wp[k] = v[:bd] + (fill,) + v[bd:]
  return wp


def _rw_batch(prim):
  def rule(vals, dims, **params):
    x, = vals
    bd, = dims
    return prim.bind(x, **_insert(params, bd)), bd
  return rule


def _chooser_jvp(select_prim):
  def jvp(g, x, **wp):
    return select_and_gather_add_p.bind(g, x, select_prim=select_prim, **wp)
  return jvp


# ----------------------------------------------------------------- test metadata


def _rand(rng, shape, d):
  d = np.dtype(d)
  if d == np.bool_:
    return rng.random(shape) < 0.5
  if d.kind in "iu":
    lo = 0 if d.kind == "u" else -50
    return rng.integers(lo, 50, shape, endpoint=True).astype(d)
  if d.kind == "c":
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(d)
  # distinct values: no ties, so max/min derivatives are defined everywhere tested
  n = int(np.prod(shape))
  return (rng.permutation(n).reshape(shape) * 0.25 - n / 8 + rng.uniform(0, 0.1, shape)).astype(d)


# (shape, window, strides, padding, base_dilation, window_dilation)
_CASES = [((6,), (2,), (2,), ((0, 0),), (1,), (1,)),
          ((7,), (3,), (1,), ((1, 2),), (1,), (1,)),
          ((4, 5), (2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
          ((2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0),) * 4, (1,) * 4, (1,) * 4),
          ((5, 6), (3, 2), (2, 3), ((1, 1), (2, 0)), (1, 1), (1, 1)),
          ((5, 4), (2, 2), (1, 2), ((0, 0), (1, 1)), (2, 1), (1, 1)),
          ((7, 5), (2, 2), (1, 1), ((0, 0), (1, 0)), (1, 1), (2, 2)),
          ((6, 4), (3, 1), (2, 1), ((-1, 1), (0, 0)), (1, 1), (1, 1)),
          ((3, 4, 5), (2, 1, 3), (1, 1, 2), ((0, 1), (0, 0), (1, 1)), (1, 2, 1), (1, 1, 1)),
          ((0, 4), (1, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
          ((2, 3), (3, 4), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
          ((), (), (), (), (), ())]


def _wparams(c):
  return dict(zip(_WPARAMS, c[1:]))


def _rw_samples(op):
  def samples(rng, dtype):
    d = np.dtype(dtype)
    # sums: positive values (no cancellation: half-precision sums round per step in XLA)
    pos = op == "sum" and d.kind in "fV"
    # max/min: no window dilation (JAX has no VJP there; tests/test_windowed_reductions.py)
    cases = _CASES if op == "sum" else [c for c in _CASES if not any(r != 1 for r in c[5])]
    return [([rng.uniform(0.5, 2, c[0]).astype(d) if pos else _rand(rng, c[0], d)],
             _wparams(c)) for c in cases]
  return samples


def _rw_bad(rng):
  from nbjax.array import Array
  x = Array(np.ones((4, 4), np.float32))
  ok = _wparams(_CASES[2])
  return [([x], {**ok, "window_dimensions": (2,)}, TypeError),
          ([x], {**ok, "window_strides": (1,)}, TypeError),
          ([x], {**ok, "window_dimensions": (0, 2)}, TypeError),
          ([x], {**ok, "window_strides": (1, 0)}, TypeError),
          ([x], {**ok, "padding": ((0, 0),)}, ValueError)]


_TOL = {np.dtype(np.float16): (1e-2, 1e-2), dtypes._bf16: (2e-2, 2e-2),
        np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.complex64): (1e-5, 1e-5)}
_SUM_T = sorted(_num, key=lambda d: (d.kind, d.itemsize))
_CHOOSE_T = sorted(_int | _float | {np.dtype(np.bool_)}, key=lambda d: (d.kind, d.itemsize))


# where the numba backends hand work to NumPy (float16: numba has none)
_RW_NOTE = ("numba; padding or base dilation: the padded operand built by NumPy (np.full and a "
            "strided assignment) first; float16: widened to float32 and rounded back by "
            "NumPy's astype")


def _standard(op, ok, accepted):
  p = Primitive(f"reduce_window_{op}")
  registry.register(
      p, family="windowed_reduction", impls={"numba": _reduce_window_numba(op)},
      abstract_eval=_rw_abstract_eval(p.name, set(ok), accepted), batch=_rw_batch(p),
      meta=dict(dtypes=ok, reference=_reduce_window_reference(op), samples=_rw_samples(op),
                bad_inputs=_rw_bad, linear=op == "sum", tol=_TOL, note=_RW_NOTE))
  return p


reduce_window_sum_p = _standard("sum", _SUM_T, "number")
reduce_window_max_p = _standard("max", _CHOOSE_T, "bool, integer, floating")
reduce_window_min_p = _standard("min", _CHOOSE_T, "bool, integer, floating")
ad.deflinear2(reduce_window_sum_p, _reduce_window_sum_transpose)
ad.defjvp(reduce_window_max_p, _chooser_jvp(ge_p))
ad.defjvp(reduce_window_min_p, _chooser_jvp(le_p))


# ----------------------------------------------------------------- select_and_gather_add


def _sel(select_prim):
  if select_prim is ge_p:
    return "ge", "max"
  if select_prim is le_p:
    return "le", "min"
  raise ValueError(f"select_prim must be lax.ge_p or lax.le_p, got {select_prim!r}")


def _select_and_gather_add_abstract_eval(t, x, *, select_prim, **wp):
  if t.shape != x.shape:
    raise TypeError(f"select_and_gather_add tangents and operand shapes must match, got "
                    f"{t.shape} and {x.shape}.")
  if t.dtype != x.dtype or not dtypes.issubdtype(x.dtype, np.floating):
    raise TypeError(f"select_and_gather_add requires floating tangents and operand of one "
                    f"dtype, got {t.dtype.name} and {x.dtype.name}")
  _sel(select_prim)
  return ShapedArray(_window_shape("select_and_gather_add", x, **wp), x.dtype)


def _select_and_gather_add_numba(t, x, *, select_prim, **wp):
  sel, op = _sel(select_prim)
  pshape, place, ostep, oshape, offs, C, out_shape = _plan(x.shape, **wp)
  d = x.dtype
  w = _NUMBA_T.get(d, d)
  out = np.empty(out_shape, w)
  if out.size:
    z = _identity(op, w)
    p = _padded(x.astype(w, copy=False), z, pshape, place)
    tp = _padded(t.astype(w, copy=False), w.type(0), pshape, place)
    valid = _padded(np.ones(x.shape, np.uint8), 0, pshape, place)
    K.GATHER[sel, K.unrolled(offs)](tp.reshape(-1), p.reshape(-1), valid.reshape(-1), ostep,
                                    oshape, offs, C, z, out.reshape(-1))
  return out.astype(d, copy=False)


def _select_and_gather_add_reference(t, x, *, select_prim, **wp):
  sel, op = _sel(select_prim)
  pshape, place, *_, out_shape = _plan(x.shape, **wp)
  z = _identity(op, x.dtype)
  best = np.full(out_shape, z, x.dtype)
  acc = np.zeros(out_shape, x.dtype)
  if acc.size == 0:
    return acc
  p, tp = _padded(x, z, pshape, place), _padded(t, 0, pshape, place)
  valid = _padded(np.ones(x.shape, bool), False, pshape, place)
  win = (wp["window_dimensions"], wp["window_strides"], wp["window_dilation"])
  for v, tv, ok in zip(_windows(p, out_shape, *win), _windows(tp, out_shape, *win),
                       _windows(valid, out_shape, *win)):
    keep = (best >= v if sel == "ge" else best <= v) | ~ok
    best, acc = np.where(keep, best, v), np.where(keep, acc, tv)
  return acc


def _select_and_gather_add_transpose(ct, t, x, *, select_prim, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation):
  assert ad.is_undefined_primal(t) and not ad.is_undefined_primal(x)
  if any(d != 1 for d in window_dilation):
    raise NotImplementedError(
        f"VJP not implemented for select_and_gather (MaxPool) with window dilation, got "
        f"window_dilation={window_dilation}.")
  if type(ct) is ad.Zero:
    return [ad.Zero(t.aval), None]
  lax = _lax()
  dilated = any(d != 1 for d in base_dilation)
  if dilated:
    op = _sel(select_prim)[1]
    x = lax.pad(x, _identity(op, get_aval(x).dtype),
                tuple((0, 0, d - 1) for d in base_dilation))
  out = select_and_scatter_add_p.bind(ct, x, select_prim=select_prim,
                                      window_dimensions=window_dimensions,
                                      window_strides=window_strides, padding=padding)
  if dilated:
    out = lax.slice(out, (0,) * len(base_dilation), get_aval(out).shape, base_dilation)
  return [out, None]


def _pair_batch(prim, names):
  def rule(vals, dims, **params):
    size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
    vals = [batching.bdim_at_front(v, d, size) for v, d in zip(vals, dims)]
    wp = dict(params)
    for k in names:
      wp[k] = ((0, 0),) + wp[k] if k == "padding" else (1,) + wp[k]
    return prim.bind(*vals, **wp), 0
  return rule


def _gather_samples(rng, dtype):
  out = []
  for c in _CASES:
    if not c[0] or any(r != 1 for r in c[5]):  # window dilation: no VJP (JAX's)
      continue
    x = _rand(rng, c[0], dtype)
    t = rng.standard_normal(c[0]).astype(dtype)
    for sp in (ge_p, le_p):
      out.append(([t, x], dict(select_prim=sp, **_wparams(c))))
  return out


_FT = [np.dtype(np.float32), np.dtype(np.float64)]
_SEL_T = sorted(_float, key=lambda d: (d.kind, d.itemsize))  # (bf16: the float32 round trip)

select_and_gather_add_p = Primitive("select_and_gather_add")
registry.register(
    select_and_gather_add_p, family="windowed_reduction",
    impls={"numba": _select_and_gather_add_numba},
    abstract_eval=_select_and_gather_add_abstract_eval,
    transpose=_select_and_gather_add_transpose,
    meta=dict(dtypes=_SEL_T, reference=_select_and_gather_add_reference,
              samples=_gather_samples, tol=_TOL,
              note=_RW_NOTE + "; the window-validity mask filled by NumPy"))
ad.defjvp(select_and_gather_add_p,
          lambda g, t, x, **p: select_and_gather_add_p.bind(g, x, **p), None)
select_and_gather_add_p.batch = _pair_batch(select_and_gather_add_p, _WPARAMS)


# ----------------------------------------------------------------- select_and_scatter_add

_SPARAMS = ("window_dimensions", "window_strides", "padding")


def _select_and_scatter_add_abstract_eval(s, x, *, select_prim, window_dimensions,
                                          window_strides, padding):
  ones = (1,) * len(window_dimensions)
  want = _window_shape("select_and_scatter_add", x, window_dimensions, window_strides,
                       padding, ones, ones)
  if s.shape != want:
    raise TypeError(f"select_and_scatter_add: source shape {s.shape} must be the windowed "
                    f"shape {want} of operand shape {x.shape}")
  if s.dtype != x.dtype or not dtypes.issubdtype(x.dtype, np.floating):
    raise TypeError(f"select_and_scatter_add requires floating source and operand of one "
                    f"dtype, got {s.dtype.name} and {x.dtype.name}")
  _sel(select_prim)
  return ShapedArray(x.shape, x.dtype)


def _scatter_plan(shape, window_dimensions, window_strides, padding):
  ones = (1,) * len(shape)
  return _plan(shape, window_dimensions, window_strides, padding, ones, ones)


def _unpad(out, shape, padding):
  if not any(lo or hi for lo, hi in padding):
    return out
  full = np.zeros(shape, out.dtype)
  sl_o, sl_f = [], []
  for n, (lo, _), S in zip(shape, padding, out.shape):
    a, b = max(0, lo), min(S, lo + n)
    if b <= a:
      return full
    sl_o.append(slice(a, b))
    sl_f.append(slice(a - lo, b - lo))
  full[tuple(sl_f)] = out[tuple(sl_o)]
  return full


def _select_and_scatter_add_numba(s, x, *, select_prim, window_dimensions, window_strides,
                                  padding):
  sel, op = _sel(select_prim)
  pshape, place, ostep, oshape, offs, C, out_shape = _scatter_plan(
      x.shape, window_dimensions, window_strides, padding)
  d = x.dtype
  w = _NUMBA_T.get(d, d)
  tile = s.size > 0 and all(
      ws == wd and o * wd == n
      for ws, wd, o, n in zip(window_strides, window_dimensions, out_shape, pshape))
  out = (np.empty if tile else np.zeros)(pshape, w)
  if s.size:
    p = _padded(x.astype(w, copy=False), _identity(op, w), pshape, place)
    K.SCATTER[sel, tile, K.unrolled(offs)](np.ascontiguousarray(s, w).reshape(-1),
                                           p.reshape(-1), ostep, oshape, offs, C,
                                           out.reshape(-1))
  return _unpad(out, x.shape, padding).astype(d, copy=False)


def _select_and_scatter_add_reference(s, x, *, select_prim, window_dimensions,
                                      window_strides, padding):
  """Oracle: per window (explicit loops), the first element the select keeps."""
  sel, op = _sel(select_prim)
  pshape, place, *_ = _scatter_plan(x.shape, window_dimensions, window_strides, padding)
  p = _padded(x, _identity(op, x.dtype), pshape, place)
  out = np.zeros(pshape, x.dtype)
  for o in np.ndindex(*s.shape):
    best_at = None
    for k in np.ndindex(*window_dimensions):
      at = tuple(i * st + j for i, st, j in zip(o, window_strides, k))
      if best_at is None:
        best_at = at
        continue
      b, v = p[best_at], p[at]
      if not (b >= v if sel == "ge" else b <= v):
        best_at = at
    out[best_at] += s[o]
  return _unpad(out, x.shape, padding)


def _select_and_scatter_add_transpose(ct, s, x, *, select_prim, window_dimensions,
                                      window_strides, padding):
  assert ad.is_undefined_primal(s) and not ad.is_undefined_primal(x)
  if type(ct) is ad.Zero:
    return [ad.Zero(s.aval), None]
  ones = (1,) * len(window_dimensions)
  return [select_and_gather_add_p.bind(
      ct, x, select_prim=select_prim, window_dimensions=window_dimensions,
      window_strides=window_strides, padding=padding, base_dilation=ones,
      window_dilation=ones), None]


def _scatter_samples(rng, dtype):
  out = []
  for c in _CASES:
    if not c[0] or any(b != 1 for b in c[4] + c[5]) or 0 in _out_shape(c[0], *c[1:]):
      continue
    x = _rand(rng, c[0], dtype)
    ones = (1,) * len(c[0])
    sshape = _out_shape(c[0], c[1], c[2], c[3], ones, ones)
    for sp in (ge_p, le_p):
      out.append(([rng.standard_normal(sshape).astype(dtype), x],
                  dict(select_prim=sp, window_dimensions=c[1], window_strides=c[2],
                       padding=c[3])))
  return out


select_and_scatter_add_p = Primitive("select_and_scatter_add")
registry.register(
    select_and_scatter_add_p, family="windowed_reduction",
    impls={"numba": _select_and_scatter_add_numba},
    abstract_eval=_select_and_scatter_add_abstract_eval,
    transpose=_select_and_scatter_add_transpose,
    meta=dict(dtypes=_SEL_T, reference=_select_and_scatter_add_reference,
              samples=_scatter_samples, tol=_TOL,
              note=_RW_NOTE + "; padding: the result cropped out by a NumPy copy"))
ad.defjvp(select_and_scatter_add_p,
          lambda g, s, x, **p: select_and_scatter_add_p.bind(g, x, **p), None)
select_and_scatter_add_p.batch = _pair_batch(select_and_scatter_add_p, _SPARAMS)


def _select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides,
                            padding):
  """Scatters (adds) each element of ``source`` to the element of ``operand``'s window that
  ``select_prim`` (``lax.ge_p`` or ``lax.le_p``) selects: the max/min-pool gradient."""
  return select_and_scatter_add_p.bind(
      source, operand, select_prim=select_prim, window_dimensions=tuple(window_dimensions),
      window_strides=tuple(window_strides), padding=tuple(padding))


def _select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides,
                           padding, base_dilation, window_dilation):
  """Extracts the element of ``tangents`` at the maximum (``lax.ge_p``) or minimum
  (``lax.le_p``) element of each window of ``operand``: the max/min-pool jvp."""
  return select_and_gather_add_p.bind(
      tangents, operand, select_prim=select_prim, window_dimensions=tuple(window_dimensions),
      window_strides=tuple(window_strides), padding=tuple(padding),
      base_dilation=tuple(base_dilation), window_dilation=tuple(window_dilation))


# ----------------------------------------------------------------- generic reduce_window


def _generic_abstract_eval(*avals, jaxpr, consts, **wp):
  n = len(avals) // 2
  xs, inits = avals[:n], avals[n:]
  if any(o.dtype != i.dtype for o, i in zip(xs, inits)):
    raise TypeError(f"reduce_window got inconsistent dtypes for operands and init_values: got "
                    f"operand dtypes {[o.dtype for o in xs]} and init_value dtypes "
                    f"{[i.dtype for i in inits]}.")
  if any(i.shape != () for i in inits):
    raise TypeError(f"reduce_window expected init_values to be scalars but init_values have "
                    f"shapes {[i.shape for i in inits]}.")
  if any(o.shape != xs[0].shape for o in xs):
    raise TypeError(f"reduce_window operands must have the same shape, got "
                    f"{[o.shape for o in xs]}")
  shape = _window_shape("reduce_window", xs[0], **wp)
  return [ShapedArray(shape, o.dtype) for o in xs]


def _generic_eager(*args, jaxpr, consts, **wp):
  """The reducer jaxpr, vmapped over every output position, applied once per window
  element (row-major) from the init values, on the padded operands' strided views."""
  from nbjax import api
  n = len(args) // 2
  xs = [np.asarray(a) for a in args[:n]]
  inits = [np.asarray(a) for a in args[n:]]
  pshape, place, *_, out_shape = _plan(xs[0].shape, **wp)
  m = int(np.prod(out_shape))
  accs = [np.full((m,), z, x.dtype) for x, z in zip(xs, inits)]
  if m:
    f = api.vmap(lambda *a: eval_jaxpr(jaxpr, consts, *a))
    ps = [_padded(x, z[()], pshape, place) for x, z in zip(xs, inits)]
    win = (wp["window_dimensions"], wp["window_strides"], wp["window_dilation"])
    # positions outside the (base-dilated) operand are skipped, as XLA's reduce-window does
    valid = None if place is None else _windows(_padded(np.ones(xs[0].shape, bool), False,
                                                        pshape, place), out_shape, *win)
    for vs in zip(*[_windows(p, out_shape, *win) for p in ps]):
      new = [np.asarray(a) for a in f(*accs, *[v.reshape(m) for v in vs])]
      if valid is not None:
        ok = next(valid).reshape(m)
        new = [np.where(ok, a, b) for a, b in zip(new, accs)]
      accs = new
  return [np.asarray(a).reshape(out_shape) for a in accs]


def _generic_jvp(primals, tangents, *, jaxpr, consts, **wp):
  return _reducer_jvp(primals, tangents, lambda *a: eval_jaxpr(jaxpr, consts, *a),
                      lambda ops, inits, comp: _bind_generic(ops, inits, comp, wp))


def _generic_batch(vals, dims, *, jaxpr, consts, **wp):
  n = len(vals) // 2
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
  xs = [batching.bdim_at_front(v, d, size) for v, d in zip(vals[:n], dims[:n])]
  wp = _insert(wp, 0)
  if all(d is batching.not_mapped for d in dims[n:]):
    return reduce_window_p.bind(*xs, *vals[n:], jaxpr=jaxpr, consts=consts, **wp), [0] * n
  # batched init values (JAX: NotImplementedError): reduce with a validity flag, as reduce_p
  # (padding is skipped either way)
  return _fold_batched_inits(
      xs, [batching.bdim_at_front(v, d, size) for v, d in zip(vals[n:], dims[n:])],
      lambda *a: eval_jaxpr(jaxpr, consts, *a),
      lambda ops, inits, comp: _bind_generic(ops, inits, comp, wp)), [0] * n


def _generic_samples(rng, dtype):
  from nbjax import lax
  out = []
  for c in _CASES[:9]:
    x, y = _rand(rng, c[0], dtype), _rand(rng, c[0], dtype)
    # a product reducer (no fast primitive), and a 2-operand (max value, its partner) pair
    jp, cp = _trace(lambda a, b: [lax.mul(a, b)], [ShapedArray((), np.dtype(dtype))] * 2)
    out.append(([x, np.ones((), dtype)], dict(jaxpr=jp, consts=cp, **_wparams(c))))
  return out


def _generic_reference(*args, jaxpr, consts, **wp):
  x, z = args
  pshape, place, *_, out_shape = _plan(x.shape, **wp)
  acc = np.full(out_shape, z, x.dtype)
  if acc.size:
    win = (wp["window_dimensions"], wp["window_strides"], wp["window_dilation"])
    p = _padded(x, 1, pshape, place)  # padding: skipped, so the product's identity
    for v in _windows(p, out_shape, *win):
      acc = (acc * v).astype(x.dtype)
  return [acc]


reduce_window_p = Primitive("reduce_window")
reduce_window_p.multiple_results = True
registry.register(
    reduce_window_p, family="windowed_reduction", impls={"python": _generic_eager},
    abstract_eval=_generic_abstract_eval, jvp=_generic_jvp, batch=_generic_batch,
    meta=dict(dtypes=_FT, reference=_generic_reference, samples=_generic_samples, tol=_TOL,
              reverse=False,  # as JAX: the generic reducer has no transpose
              note="python: the traced reducer under vmap once per window element, on whole "
                   "strided views (batched kernels)"))


def _trace(comp, avals):
  from nbjax.interpreters import partial_eval as pe
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(comp, list(avals), fun_name="reduce_window")
  return jaxpr, tuple(consts)


def _bind_generic(xs, inits, computation, wp):
  n = len(xs)
  avals = [ShapedArray((), get_aval(z).dtype) for z in inits]

  def flat(*a):
    out = computation(list(a[:n]), list(a[n:]))
    return list(out)
  jaxpr, consts = _trace(flat, avals + avals)
  if len(jaxpr.outvars) != n:
    raise ValueError(f"reduce_window output must have the same tree structure as the "
                     f"operands: got {len(jaxpr.outvars)} outputs for {n} operands")
  return reduce_window_p.bind(*xs, *inits, jaxpr=jaxpr, consts=consts, **wp)


def _monoid(computation, init):
  lax = _lax()
  if isinstance(init, core.Tracer) or np.shape(init) != ():
    return None
  v = np.asarray(init)
  if computation is lax.add and v == 0:
    return reduce_window_sum_p
  if computation is lax.max and v == _identity("max", v.dtype):
    return reduce_window_max_p
  if computation is lax.min and v == _identity("min", v.dtype):
    return reduce_window_min_p
  return None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
  """Reduction over padded windows (XLA's ReduceWindowWithGeneralPadding).

  Args:
    operand: an array or a pytree of arrays (all of one shape).
    init_value: a scalar or a pytree of scalars of ``operand``'s structure.
    computation: the reducer, ``(acc, x) -> acc`` over pytrees of ``operand``'s structure.
    window_dimensions: the window's size per dimension.
    window_strides: the strides (default 1 per dimension).
    padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or (low, high) pairs.
    base_dilation, window_dilation: dilations of the operand and the window (default 1).

  Returns:
    The reduced windows, a pytree of ``operand``'s structure. An add/max/min reducer with
    its identity as a concrete init value uses the ``reduce_window_{sum,max,min}``
    primitives, as JAX.
  """
  flat_x, flat_z, tree = _flat_operands(operand, init_value)
  if not flat_x:
    raise ValueError("reduce_window must have at least one operand.")
  wp = _canon(get_aval(flat_x[0]).shape, window_dimensions, window_strides, padding,
              base_dilation, window_dilation)
  if len(flat_x) == 1:
    prim = _monoid(computation, flat_z[0])
    if prim is not None:
      return tree_unflatten(tree, [prim.bind(flat_x[0], **wp)])
  lax = _lax()
  flat_z = [lax.convert_element_type(z, get_aval(x).dtype) if get_aval(z).dtype != get_aval(x).dtype
            and not isinstance(z, core.Tracer) and not hasattr(z, "aval") else z
            for x, z in zip(flat_x, flat_z)]

  def comp(left, right):
    out, otree = tree_flatten(computation(tree_unflatten(tree, left), tree_unflatten(tree, right)))
    if otree != tree:
      raise ValueError(f"reduce_window output must have the same tree structure as the "
                       f"operands {tree} vs. {otree}")
    return out
  return tree_unflatten(tree, _bind_generic(flat_x, flat_z, comp, wp))


def _reduce_window_fast(prim, operand, window_dimensions, window_strides, padding,
                        base_dilation=None, window_dilation=None):
  wp = _canon(get_aval(operand).shape, window_dimensions, window_strides, padding,
              base_dilation, window_dilation)
  return prim.bind(operand, **wp)


_reduce_window_sum = functools.partial(_reduce_window_fast, reduce_window_sum_p)
_reduce_window_max = functools.partial(_reduce_window_fast, reduce_window_max_p)
_reduce_window_min = functools.partial(_reduce_window_fast, reduce_window_min_p)


# ----------------------------------------------------------------- jet (Taylor) rules
jet.deflinear(reduce_window_sum_p)


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import hlo, ir, mlir  # noqa: E402


def _scalar(dt):
  return ir.RankedTensorType.get([], mlir.dtype_to_ir_type(dt))


def _rw_op(ctx, operands, inits, dts, out_avals, body, *, window_dimensions, window_strides,
           padding, base_dilation, window_dilation):
  pad = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(len(padding), 2))
  op = hlo.ReduceWindowOp([mlir.aval_to_ir_type(a) for a in out_avals], list(operands),
                          list(inits), list(window_dimensions),
                          window_strides=list(window_strides),
                          base_dilations=list(base_dilation),
                          window_dilations=list(window_dilation), padding=pad)
  ss = [_scalar(d) for d in dts]
  blk = op.regions[0].blocks.append(*ss, *ss)
  with ir.InsertionPoint(blk):
    hlo.return_(body(list(blk.arguments)))
  return list(op.results)


def _lo_fast(op):
  def rule(ctx, x, **wp):
    dt = ctx.avals_in[0].dtype
    comb = {"sum": hlo.add, "max": hlo.or_ if dt == np.bool_ else hlo.maximum,
            "min": hlo.and_ if dt == np.bool_ else hlo.minimum}[op]
    init = mlir.ir_constant(np.asarray(_identity(op, dt), dt))
    return _rw_op(ctx, [x], [init], [dt], ctx.avals_out, lambda a: [comb(*a)], **wp)
  return rule


for _op, _p in (("sum", reduce_window_sum_p), ("max", reduce_window_max_p),
                ("min", reduce_window_min_p)):
  lowering.register(_p, _lo_fast(_op))


def _lo_generic(ctx, *args, jaxpr, consts, **wp):
  n = len(args) // 2
  dts = [a.dtype for a in ctx.avals_in[:n]]
  cvals = [mlir.ir_constant(np.asarray(c)) for c in consts]
  body = lambda a: mlir.jaxpr_subcomp(ctx.module_context, jaxpr, cvals, a)
  return _rw_op(ctx, args[:n], args[n:], dts, ctx.avals_out, body, **wp)


lowering.register(reduce_window_p, _lo_generic)


def _lo_gather(ctx, t, x, *, select_prim, **wp):
  # JAX's variadic form: reduce (operand, tangent) pairs keeping the selected pair
  sel, op = _sel(select_prim)
  dt = ctx.avals_in[1].dtype
  inits = [mlir.ir_constant(np.asarray(_identity(op, dt), dt)),
           mlir.ir_constant(np.array(0, dt))]

  def body(a):
    kx, vx, ky, vy = a
    which = mlir.compare(kx, ky, "GE" if sel == "ge" else "LE", dt)
    return [hlo.select(which, kx, ky), hlo.select(which, vx, vy)]
  out = ctx.avals_out[0]
  return [_rw_op(ctx, [x, t], inits, [dt, dt], [out, out], body, **wp)[1]]


lowering.register(select_and_gather_add_p, _lo_gather)


def _lo_scatter(ctx, s, x, *, select_prim, window_dimensions, window_strides, padding):
  # as JAX on CPU: pad the operand with the select's identity, SelectAndScatter, slice
  sel, op = _sel(select_prim)
  aval = ctx.avals_in[1]
  dt = aval.dtype
  if aval.ndim == 0:  # the one element is the window (XLA's expander aborts on rank 0)
    return [s]
  if any(lo or hi for lo, hi in padding):
    pv = mlir.ir_constant(np.asarray(_identity(op, dt), dt))
    pshape = [d + lo + hi for d, (lo, hi) in zip(aval.shape, padding)]
    x = hlo.pad(x, pv, [lo for lo, _ in padding], [hi for _, hi in padding], [0] * aval.ndim)
  else:
    pshape = list(aval.shape)
  ptype = ir.RankedTensorType.get(pshape, mlir.dtype_to_ir_type(dt))
  zero = mlir.ir_constant(np.array(0, dt))
  res = hlo.SelectAndScatterOp(
      ptype, x, s, zero, window_dimensions=list(window_dimensions),
      window_strides=list(window_strides),
      padding=ir.DenseIntElementsAttr.get(np.zeros((aval.ndim, 2), np.int64)))
  st = _scalar(dt)
  blk = res.select.blocks.append(st, st)
  with ir.InsertionPoint(blk):
    hlo.return_([mlir.compare(blk.arguments[0], blk.arguments[1],
                              "GE" if sel == "ge" else "LE", dt)])
  blk = res.scatter.blocks.append(st, st)
  with ir.InsertionPoint(blk):
    hlo.return_([hlo.add(*blk.arguments)])
  out = res.result
  if any(lo or hi for lo, hi in padding):
    # undo the padding (negative padding: zeros for the cropped elements)
    out = hlo.pad(out, zero, [-lo for lo, _ in padding], [-hi for _, hi in padding],
                  [0] * aval.ndim)
  return [out]


lowering.register(select_and_scatter_add_p, _lo_scatter)
