"""More of ``lax``: the generic ``reduce`` (traced reducer), ``reduce_precision``, ``mulhi``,
``optimization_barrier``, ``rng_uniform``, and functions built on
other primitives (``tile``, ``split``, ``index_take``, ``broadcast_shapes``,
``approx_max_k``/``approx_min_k``, ``ragged_dot``, ``scatter_apply``).

Pipeline position: primitives here carry every rule (eager kernels from ``kernels.other``,
abstract eval, jvp, transpose, batching, StableHLO lowering); ``lax.reduce`` recognises the
add/mul/max/min/and/or/xor monoids (a concrete identity init) and binds the fast
``reduce_*`` primitives, as JAX; other reducers are traced to a jaxpr and bind ``reduce_p``,
evaluated eagerly as a pairwise tree of vmapped reducer calls (XLA assumes the reducer
associative, as here). ``rng_uniform``'s eager backend is XLA's own kernel (jaxlib);
``rng_bit_generator`` is in ``nbjax/lax/prng.py``.
"""
from __future__ import annotations

import enum
import operator

import numpy as np

from kernels import other as K
from nbjax import core, dtypes, registry
from nbjax.core import Primitive, ShapedArray, get_aval
from nbjax.custom_derivatives import custom_jvp
from nbjax.interpreters import ad, batching, jet
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import ClosedJaxpr, eval_jaxpr
from nbjax.lax.elementwise import _float, _int, _sint, _uint
from nbjax._tree_util import tree_flatten, tree_unflatten

__all__ = ["reduce", "reduce_p", "reduce_precision", "reduce_precision_p", "mulhi", "mulhi_p",
           "optimization_barrier", "optimization_barrier_p", "broadcast_shapes", "tile",
           "split", "index_take", "approx_max_k", "approx_min_k", "approx_top_k_p", "ragged_dot",
           "rng_uniform", "scatter_apply"]


def _lax():
  from nbjax import lax
  return lax


def _sorted(ds):
  return sorted(ds, key=lambda d: (d.kind, d.itemsize))

# ====================================================================== reduce (generic)


def _reduce_abstract_eval(*avals, computation, jaxpr, dimensions):
  n = len(avals) // 2
  xs, inits = avals[:n], avals[n:]
  if any(o.dtype != i.dtype for o, i in zip(xs, inits)):
    raise TypeError(f"reduce: operand dtypes should match corresponding initial value "
                    f"dtypes, got operands={xs} and initial_values={inits}")
  if any(i.shape != () for i in inits):
    raise ValueError(f"reduce found non-scalar initial value: {[i.shape for i in inits]}")
  if any(o.shape != xs[0].shape for o in xs):
    raise ValueError(f"reduce operands must have the same shape, got {[o.shape for o in xs]}")
  nd = xs[0].ndim
  if len(set(dimensions)) != len(dimensions) or not all(0 <= d < nd for d in dimensions):
    raise ValueError(f"reduce: dimensions {dimensions} out of range or repeated for operand "
                     f"shape {xs[0].shape}")
  shape = tuple(s for i, s in enumerate(xs[0].shape) if i not in dimensions)
  # JAX's weak-type rule: weak where both the operand and its init value are
  return [ShapedArray(shape, o.dtype, o.weak_type and i.weak_type) for o, i in zip(xs, inits)]


def _reduce_eager(*args, computation, jaxpr, dimensions):
  """Reduced axes last, then halved pairwise by the vmapped reducer; the init folded in
  front of each result."""
  from nbjax import api
  n = len(args) // 2
  xs, inits = [np.asarray(a) for a in args[:n]], [np.asarray(a) for a in args[n:]]
  shape = xs[0].shape
  keep = [i for i in range(len(shape)) if i not in dimensions]
  m = int(np.prod([shape[i] for i in keep], dtype=np.int64))
  r = int(np.prod([shape[i] for i in dimensions], dtype=np.int64))
  vs = [np.transpose(x, keep + list(dimensions)).reshape(m, r) for x in xs]
  f = api.vmap(lambda *a: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a))
  out_shape = tuple(shape[i] for i in keep)
  zs = [np.full((m,), z, x.dtype) for x, z in zip(xs, inits)]
  if m == 0 or r == 0:
    return [z.reshape(out_shape) for z in zs]
  while r > 1:
    h = r // 2
    a = [v[:, 0:2 * h:2].reshape(-1) for v in vs]
    b = [v[:, 1:2 * h:2].reshape(-1) for v in vs]
    c = [np.asarray(o).reshape(m, h) for o in f(*a, *b)]
    vs = [np.concatenate([ci, v[:, -1:]], 1) if r % 2 else ci for ci, v in zip(c, vs)]
    r = h + r % 2
  return [np.asarray(o).reshape(out_shape) for o in f(*zs, *[v[:, 0] for v in vs])]


def _flat_operands(operands, init_values):
  """The leaves of ``operands`` and ``init_values`` and their tree, with JAX's checks that the
  two match (``reduce`` and ``reduce_window``)."""
  flat_x, tree = tree_flatten(operands)
  flat_z, ztree = tree_flatten(init_values)
  if tree != ztree:
    raise ValueError(f"Operands must have the same tree structure as init_values: {tree} vs. "
                     f"{ztree}")
  if len(flat_x) != len(flat_z):
    raise ValueError(f"Must have same total number of operands as init_values:  "
                     f"{len(flat_x)} vs. {len(flat_z)}")
  return flat_x, flat_z, tree


def _trace_reducer(computation, avals, n):
  def flat(*a):
    return list(computation(list(a[:n]), list(a[n:])))
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat, list(avals) * 2, fun_name="reduce")
  if len(jaxpr.outvars) != n:
    raise ValueError(f"reduce: the computation returned {len(jaxpr.outvars)} values for {n} "
                     "operands")
  return ClosedJaxpr(jaxpr, consts)


def _bind_reduce(xs, inits, computation, dimensions, name=None):
  n = len(xs)
  avals = [ShapedArray((), get_aval(z).dtype) for z in inits]
  closed = _trace_reducer(computation, avals, n)
  return reduce_p.bind(*xs, *inits, computation=name or computation, jaxpr=closed,
                       dimensions=dimensions)


def _reduce_jvp(primals, tangents, *, computation, jaxpr, dimensions):
  """JAX's rule: the jvp of a pairwise tree reduction written with the reducer (vmapped over
  the kept positions), slices and pads, so the primal outputs never depend on the tangents
  and reverse mode (linearize + transpose) works. Init values' tangents must be zero."""
  from nbjax import api
  lax = _lax()
  n = len(primals) // 2
  xs, inits = list(primals[:n]), list(primals[n:])
  f = lambda *a: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a)
  if any(type(t) is not ad.Zero for t in tangents[n:]):  # (JAX: NotImplementedError) the
    # init tangents start a tangent fold bound with the primal one: forward mode only
    return _reducer_jvp(primals, tangents, f, lambda ops, zs, comp: _bind_reduce(
        ops, zs, comp, dimensions, "jvp"))
  shape = get_aval(xs[0]).shape
  axes = tuple(dimensions)
  kept = tuple(d for d in range(len(shape)) if d not in axes)
  size = int(np.prod([shape[d] for d in axes], dtype=np.int64))
  new_shape = (size,) + tuple(shape[d] for d in kept)
  perm = axes + kept
  inex = [dtypes.is_inexact(get_aval(x).dtype) for x in xs]
  reducer = f
  for _ in range(len(kept) + 1):
    reducer = api.vmap(reducer)

  def tree(*ops):
    ops = [lax.reshape(lax.transpose(x, perm), new_shape) for x in ops]
    while ops[0].shape[0] > 1:
      m = ops[0].shape[0]
      m1 = (m + 1) // 2
      left = [lax.slice_in_dim(x, 0, m1) for x in ops]
      right = [lax.slice_in_dim(x, m1, m) for x in ops]
      if m - m1 != m1:
        pads = [(0, 0, 0)] * len(new_shape)
        pads[0] = (0, 1, 0)
        right = [lax.pad(r, lax.convert_element_type(z, r.dtype), pads)
                 for r, z in zip(right, inits)]
      ops = list(reducer(*left, *right))
    if ops[0].shape[0] == 0:
      return [lax.full(new_shape[1:], z, get_aval(x).dtype) for z, x in zip(inits, xs)]
    return [lax.squeeze(x, (0,)) for x in ops]

  diff = [i for i in range(n) if inex[i]]

  def tree_diff(*dx):  # the differentiable operands as arguments, the others closed over
    ops = list(xs)
    for i, v in zip(diff, dx):
      ops[i] = v
    return tree(*ops)
  po, to = api.jvp(tree_diff, tuple(xs[i] for i in diff),
                   tuple(ad.instantiate_zeros(tangents[i]) for i in diff))
  return list(po), [to[i] if inex[i] else ad.Zero.from_primal_value(po[i]) for i in range(n)]


def _reducer_jvp(primals, tangents, f, bind):
  """JVP of a reduction by the scalar reducer ``f``: ``bind(operands, inits, comp)`` reduces
  the (primal, tangent) pairs with ``f``'s jvp as reducer. The init values' tangents start the
  tangent fold (JAX accepts only symbolic zeros there). Shared by ``reduce_p`` and the generic
  ``reduce_window_p``."""
  from nbjax import api
  n = len(primals) // 2
  xs, inits = primals[:n], primals[n:]
  inex = [i for i in range(n) if dtypes.is_inexact(get_aval(xs[i]).dtype)]
  txs = [ad.instantiate_zeros(tangents[i]) for i in inex]
  tz = [ad.instantiate_zeros(tangents[n + i]) for i in inex]

  def full(ts, ps):  # tangents of every operand: float0 zeros for the non-float ones
    it = iter(ts)
    return [next(it) if i in inex else np.zeros(np.shape(p), dtypes.float0)
            for i, p in enumerate(ps)]

  def comp(left, right):
    pl, tl, pr, tr = left[:n], left[n:], right[:n], right[n:]
    po, to = api.jvp(f, (*pl, *pr), (*full(tl, pl), *full(tr, pr)))
    return [*po, *(to[i] for i in inex)]
  outs = bind([*xs, *txs], [*inits, *tz], comp)
  it = iter(outs[n:])
  return outs[:n], [next(it) if i in inex else ad.Zero.from_primal_value(outs[i])
                    for i in range(n)]


def _reduce_batch(vals, dims, *, computation, jaxpr, dimensions):
  n = len(vals) // 2
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
  xs = [batching.bdim_at_front(v, d, size) for v, d in zip(vals[:n], dims[:n])]
  dims2 = tuple(d + 1 for d in dimensions)
  if all(d is batching.not_mapped for d in dims[n:]):
    return reduce_p.bind(*xs, *vals[n:], computation=computation, jaxpr=jaxpr,
                         dimensions=dims2), [0] * n
  # batched init values (JAX: NotImplementedError)
  return _fold_batched_inits(
      xs, [batching.bdim_at_front(v, d, size) for v, d in zip(vals[n:], dims[n:])],
      lambda *a: eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *a),
      lambda ops, inits, comp: _bind_reduce(ops, inits, comp, dims2, "batched")), [0] * n


def _fold_batched_inits(xs, zs, f, bind):
  """Reduces ``xs`` (batch dim in front) with per-batch init values ``zs`` (JAX:
  NotImplementedError): ``bind(operands, inits, comp)`` reduces with a validity flag whose init
  is False, then each batch's init is folded in front (the reducer ``f`` is associative, as
  XLA's). Shared by ``reduce_p`` and the generic ``reduce_window_p``."""
  from nbjax import api
  lax = _lax()
  n = len(xs)
  flag = lax.broadcast_in_dim(np.bool_(True), get_aval(xs[0]).shape, ())

  def comp(left, right):
    a, fa, b, fb = left[:n], left[n], right[:n], right[n]
    c = f(*a, *b)
    both = lax.bitwise_and(fa, fb)
    return [lax.select(both, ci, lax.select(fa, ai, bi)) for ai, bi, ci in zip(a, b, c)] + [
        lax.bitwise_or(fa, fb)]
  dummies = [np.zeros((), get_aval(x).dtype) for x in xs]
  *rs, ok = bind([*xs, flag], [*dummies, np.bool_(False)], comp)
  oshape = get_aval(ok).shape
  m = int(np.prod(oshape, dtype=np.int64))
  flat = lambda v: lax.reshape(v, (m,))
  bz = [flat(lax.broadcast_in_dim(z, oshape, (0,))) for z in zs]
  folded = api.vmap(f)(*bz, *map(flat, rs))
  return [lax.reshape(lax.select(flat(ok), c, z), oshape) for c, z in zip(folded, bz)]


def _reduce_samples(rng, dtype):
  from nbjax import lax
  d = np.dtype(dtype)
  av = ShapedArray((), d)
  mul = _trace_reducer(lambda a, b: [lax.mul(a[0], b[0])], [av], 1)
  out = []
  for shape, dims in [((5,), (0,)), ((3, 4), (1,)), ((3, 4), (0,)), ((2, 3, 4), (0, 2)),
                      ((2, 0), (1,)), ((4, 3), ())]:
    x = rng.uniform(0.5, 1.5, shape).astype(d)
    out.append(([x, np.ones((), d)], dict(computation="mul", jaxpr=mul, dimensions=dims)))
  return out


def _reduce_reference(x, z, *, computation, jaxpr, dimensions):
  return [(np.prod(x.astype(np.float64), axis=dimensions) * z).astype(x.dtype)]


reduce_p = Primitive("reduce")
reduce_p.multiple_results = True
registry.register(
    reduce_p, family="reduction", impls={"python": _reduce_eager},
    abstract_eval=_reduce_abstract_eval, jvp=_reduce_jvp, batch=_reduce_batch,
    meta=dict(dtypes=[np.dtype(np.float32), np.dtype(np.float64)], reference=_reduce_reference,
              samples=_reduce_samples, reverse=False,
              tol={np.dtype(np.float32): (1e-5, 1e-6)},
              note="python: the traced reducer vmapped over all kept positions, a pairwise "
                   "tree over the reduced ones (log2(n) batched calls)"))


_MONOIDS = {"add": ("reduce_sum", 0), "mul": ("reduce_prod", 1), "max": ("reduce_max", None),
            "min": ("reduce_min", None), "bitwise_and": ("reduce_and", -1),
            "bitwise_or": ("reduce_or", 0), "bitwise_xor": ("reduce_xor", 0)}


def _monoid(computation, init):
  """The monoid reducer of ``computation`` when ``init`` is its concrete identity (JAX's
  ``_get_monoid_reducer``; the bitwise ones for booleans and integers only)."""
  lax = _lax()
  if isinstance(init, core.Tracer) or np.shape(init) != ():
    return None
  v = np.asarray(init)
  for name, (red, ident) in _MONOIDS.items():
    if computation is getattr(lax, name):
      if name.startswith("bitwise"):
        if v.dtype.kind not in "biu":
          return None
        ident = np.array(ident).astype(v.dtype)
      elif ident is None:
        ident = _ident_minmax(v.dtype, name == "max")
      return getattr(lax, red) if np.equal(v, ident) else None
  return None


def _ident_minmax(d, is_max):
  if d == np.bool_:
    return not is_max
  if d.kind in "iu":
    info = np.iinfo(d)
    return info.min if is_max else info.max
  with np.errstate(invalid="ignore", over="ignore"):
    has_inf = np.isinf(np.array(np.inf).astype(d))  # (not the float8s without infinities)
  if not has_inf:
    info = dtypes.finfo(d)
    return info.min if is_max else info.max
  return -np.inf if is_max else np.inf


def reduce(operands, init_values, computation, dimensions):
  """Reduce ``operands`` over ``dimensions`` with ``computation`` (XLA's Reduce).

  Args:
    operands: an array or a pytree of arrays of one shape.
    init_values: scalars of ``operands``' structure.
    computation: ``(acc, x) -> acc`` over pytrees of ``operands``' structure; it should be
      associative with ``init_values`` as identity (XLA's order of combination is
      unspecified).
    dimensions: the axes reduced.

  Returns:
    The reduced pytree. A single operand with ``lax.add``/``mul``/``max``/``min`` or a
    bitwise and/or/xor reducer and its identity as a concrete init uses the fast
    ``reduce_*`` primitives, as JAX.
  """
  flat_x, flat_z, tree = _flat_operands(operands, init_values)
  dimensions = tuple(map(operator.index, dimensions))
  if len(flat_x) == 1:
    red = _monoid(computation, flat_z[0])
    if red is not None:
      out = red(flat_x[0], dimensions)
      weak = get_aval(out).weak_type
      if weak and not dtypes.is_weakly_typed(flat_z[0]):  # JAX: weak only if both are
        out = _lax()._convert_element_type(out, get_aval(out).dtype, weak_type=False)
      return tree_unflatten(tree, [out])

  def comp(left, right):
    out, otree = tree_flatten(computation(tree_unflatten(tree, left), tree_unflatten(tree, right)))
    if otree != tree:
      raise ValueError(f"reduce: the computation's output structure {otree} does not match "
                       f"the operands' {tree}")
    return out
  flat_z = [np.asarray(z, get_aval(x).dtype) if not isinstance(z, core.Tracer) and
            np.ndim(z) == 0 and not hasattr(z, "aval") else z for x, z in zip(flat_x, flat_z)]
  return tree_unflatten(tree, _bind_reduce(flat_x, flat_z, comp, dimensions))


# ====================================================================== reduce_precision

_FBITS = {np.dtype(np.float16): (16, 5, 10, np.uint16), np.dtype(np.float32): (32, 8, 23, np.uint32),
          np.dtype(np.float64): (64, 11, 52, np.uint64)}
_FBITS_EAGER = dict(_FBITS)  # (the generated tests' dtypes stay _FBITS')
_FBITS_EAGER[np.dtype(dtypes._bf16)] = (16, 8, 7, np.uint16)


def _rp_abstract_eval(x, *, exponent_bits, mantissa_bits):
  if not isinstance(x, ShapedArray):
    raise TypeError(f"reduce_precision got a non-array operand {x!r}")
  if x.dtype not in _FBITS and x.dtype != dtypes._bf16:
    raise TypeError(f"reduce_precision operand must be a floating point type, got {x.dtype}")
  if exponent_bits < 1:
    raise ValueError(f"reduce_precision: exponent_bits must be >= 1, got {exponent_bits}")
  if mantissa_bits < 0:
    raise ValueError(f"reduce_precision: mantissa_bits must be >= 0, got {mantissa_bits}")
  return ShapedArray(x.shape, x.dtype, x.weak_type)


def _rp_numba(x, *, exponent_bits, mantissa_bits):
  nbits, e, m, u = _FBITS_EAGER[x.dtype]
  out = np.empty(x.shape, x.dtype)
  if x.size:
    K.reduce_precision(np.ascontiguousarray(x).reshape(-1).view(u), nbits, e, m,
                       min(exponent_bits, e), min(mantissa_bits, m), out.reshape(-1).view(u))
  return out


def _rp_reference(x, *, exponent_bits, mantissa_bits):
  """Oracle: casts to float16/bfloat16/float32 (round to nearest even), with XLA's flush
  of their denormals to zero (the sample formats are these three)."""
  fmt = {(5, 10): np.float16, (8, 23): np.float32, (8, 7): dtypes._bf16}[
      (exponent_bits, mantissa_bits)]
  with np.errstate(over="ignore", invalid="ignore"):
    y = x.astype(fmt).astype(x.dtype)
    tiny = dtypes.finfo(fmt).tiny
    return np.where(np.abs(y) < tiny, np.copysign(np.zeros((), x.dtype), y), y)


def _rp_samples(rng, dtype):
  d = np.dtype(dtype)
  with np.errstate(over="ignore"):
    x = np.concatenate([rng.standard_normal(20) * 10.0 ** rng.integers(-6, 6, 20),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0009765625, 65504, 70000,
                         6e-5, 3e-8]]).astype(d)
  cases = [([x[:20]], dict(exponent_bits=5, mantissa_bits=10)),
           ([x], dict(exponent_bits=5, mantissa_bits=10)),
           ([x.reshape(5, 6)], dict(exponent_bits=8, mantissa_bits=7)),
           ([x[:0]], dict(exponent_bits=5, mantissa_bits=10))]
  if d.itemsize >= 4:
    cases.append(([x], dict(exponent_bits=8, mantissa_bits=23)))
  return cases


reduce_precision_p = Primitive("reduce_precision")
registry.register(
    reduce_precision_p, family="elementwise", impls={"numba": _rp_numba},
    abstract_eval=_rp_abstract_eval, batch=None,
    meta=dict(dtypes=_sorted(set(_FBITS)), reference=_rp_reference, samples=_rp_samples,
              # JAX's rule: "linear" (the tangent rounded alike); rounding is only nearly so
              tol={np.dtype(np.float16): (3e-3, 1e-3), np.dtype(np.float32): (3e-3, 1e-6),
                   np.dtype(np.float64): (3e-3, 1e-9)}))
ad.deflinear(reduce_precision_p, lambda t, **p: [reduce_precision_p.bind(t, **p)])
batching.defvectorized(reduce_precision_p)


def reduce_precision(operand, exponent_bits, mantissa_bits):
  """Round ``operand`` to a float format with ``exponent_bits`` and ``mantissa_bits`` (the
  result keeps ``operand``'s dtype): round to nearest even, overflow to infinity, values
  below the format's smallest normal to zero (XLA's ReducePrecision)."""
  exponent_bits = operator.index(exponent_bits)
  mantissa_bits = operator.index(mantissa_bits)
  if not hasattr(operand, "aval") and not isinstance(operand, core.Tracer):
    operand = _as_array(operand)
  return reduce_precision_p.bind(operand, exponent_bits=exponent_bits,
                                 mantissa_bits=mantissa_bits)


def _as_array(x):
  import nbjax.numpy as jnp
  return jnp.asarray(x)


# ====================================================================== mulhi


def _mulhi_abstract_eval(x, y):
  if x.dtype != y.dtype or x.dtype not in _int:
    raise TypeError(f"mulhi does not accept dtypes {x.dtype.name}, {y.dtype.name}: it takes "
                    "two integer operands of one dtype.")
  try:
    shape = np.broadcast_shapes(x.shape, y.shape)
  except ValueError:
    raise TypeError(f"mulhi got incompatible shapes for broadcasting: {x.shape}, "
                    f"{y.shape}.") from None
  return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


def _mulhi_numba(x, y):
  d = x.dtype
  out = np.empty(np.broadcast_shapes(x.shape, y.shape), d)
  a = np.ascontiguousarray(np.broadcast_to(x, out.shape)).reshape(-1)
  b = np.ascontiguousarray(np.broadcast_to(y, out.shape)).reshape(-1)
  o = out.reshape(-1)
  if d.itemsize == 8:
    (K.mulhi64u if d.kind == "u" else K.mulhi64)(a, b, o)
  else:
    K.mulhi_narrow(a, b, 8 * d.itemsize, o)
  return out


def _mulhi_reference(x, y):
  bits = 8 * x.dtype.itemsize
  p = [int(a) * int(b) >> bits for a, b in zip(x.ravel(), y.ravel())]
  return np.array([v % (1 << bits) for v in p], np.uint64 if bits == 64 else np.int64).astype(
      x.dtype).reshape(x.shape) if x.dtype.kind == "u" else np.array(p, np.int64).astype(
      x.dtype).reshape(x.shape)


def _mulhi_samples(rng, dtype):
  d = np.dtype(dtype)
  info = np.iinfo(d)
  x = rng.integers(info.min, info.max, (3, 5), dtype=d, endpoint=True)
  y = rng.integers(info.min, info.max, (3, 5), dtype=d, endpoint=True)
  e = np.array([info.min, info.max, 0, 1], d)
  return [([x, y], {}), ([e, e[::-1].copy()], {}), ([x[:0], y[:0]], {})]


mulhi_p = Primitive("mulhi")
registry.register(
    mulhi_p, family="elementwise", impls={"numba": _mulhi_numba},
    abstract_eval=_mulhi_abstract_eval,
    meta=dict(dtypes=_sorted(_int), reference=_mulhi_reference, samples=_mulhi_samples,
              differentiable=False,
              note="numba; operands of different shapes: broadcast by NumPy copies first"))
ad.defjvp_zero(mulhi_p)
batching.defbroadcasting(mulhi_p)


def mulhi(x, y, /):
  """The high half of the double-width product of integers ``x`` and ``y`` (``mulhi``)."""
  x, y = (v if hasattr(v, "aval") or isinstance(v, core.Tracer) else _as_array(v) for v in (x, y))
  sx, sy = get_aval(x).shape, get_aval(y).shape
  if sx != sy and len(sx) == len(sy):  # size-1 axes broadcast (the lowering needs one shape)
    shape = tuple(max(a, b) if 1 in (a, b) else a for a, b in zip(sx, sy))
    lax = _lax()
    x, y = (lax.broadcast_in_dim(v, shape, tuple(range(len(shape)))) if s != shape else v
            for v, s in ((x, sx), (y, sy)))
  return mulhi_p.bind(x, y)


# ====================================================================== optimization_barrier


def _ob_abstract_eval(*avals):
  return list(avals)


optimization_barrier_p = Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True


def _ob_eager(*xs):
  return [np.array(x, copy=True) for x in xs]


def _ob_jvp(primals, tangents):
  # two barriers (primals, tangents): linearize keeps primal and tangent work apart
  nz = [type(t) is not ad.Zero for t in tangents]
  outs = optimization_barrier_p.bind(*primals)
  ts = [t for t, z in zip(tangents, nz) if z]
  it = iter(optimization_barrier_p.bind(*ts) if ts else [])
  return outs, [next(it) if z else ad.Zero.from_primal_value(o) for o, z in zip(outs, nz)]


def _ob_transpose(cts, *args):
  return [ad.instantiate_zeros(c) if ad.is_undefined_primal(a) else None
          for c, a in zip(cts, args)]


registry.register(
    optimization_barrier_p, family="other", impls={"numpy": _ob_eager},
    abstract_eval=_ob_abstract_eval, jvp=_ob_jvp, transpose=_ob_transpose,
    batch=lambda vals, dims: (optimization_barrier_p.bind(*vals), list(dims)),
    meta=dict(dtypes=[np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)],
              reference=lambda *xs: list(xs),
              samples=lambda rng, d: [([rng.standard_normal((2, 3)).astype(d),
                                        rng.standard_normal(4).astype(d)], {})],
              linear=True, note="numpy: an identity (a copy) eagerly; XLA's barrier under jit"))


def optimization_barrier(operand, /):
  """Identity on a pytree of arrays that XLA may not move computations across."""
  flat, tree = tree_flatten(operand)
  return tree_unflatten(tree, optimization_barrier_p.bind(*flat))


# ====================================================================== device_put


class ArrayCopySemantics(enum.Enum):
  """``device_put``'s copy semantics (jaxlib's names)."""
  ALWAYS_COPY = 0
  REUSE_INPUT = 1
  DONATE_INPUT = 2

  def __repr__(self):
    return f"ArrayCopySemantics.{self.name}"


device_put_p = Primitive("device_put")
device_put_p.places_sharded = True
device_put_p.multiple_results = True


def _device_put_jvp(primals, tangents, **params):
  outs = device_put_p.bind(*primals, **params)
  nz = [type(t) is not ad.Zero for t in tangents]
  ts = [t for t, z in zip(tangents, nz) if z]
  sub = {k: tuple(v for v, z in zip(vs, nz) if z) for k, vs in params.items()}
  it = iter(device_put_p.bind(*ts, **sub) if ts else [])
  return outs, [next(it) if z else ad.Zero.from_primal_value(o) for o, z in zip(outs, nz)]


def _device_put_transpose(cts, *args, devices, srcs, copy_semantics):
  """JAX's: the cotangents go back from the devices to the sources, always copied."""
  idx = [i for i, (c, a) in enumerate(zip(cts, args))
         if ad.is_undefined_primal(a) and type(c) is not ad.Zero]
  out = [None if not ad.is_undefined_primal(a) else ad.Zero(a.aval) for a in args]
  if idx:
    back = device_put_p.bind(*[cts[i] for i in idx], devices=tuple(srcs[i] for i in idx),
                             srcs=tuple(devices[i] for i in idx),
                             copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) * len(idx))
    for i, c in zip(idx, back):
      out[i] = c
  return out


def _make_device_put_eager(prim, f_small, f_large, thr):
  """The registry's eager entry (operands checked, results Arrays detached from NumPy
  inputs), then each result committed to its device (a device or ``SingleDeviceSharding``;
  None and a mesh's sharding leave it as it is), as JAX's: the data stays where it is."""
  from nbjax.array import Array
  generic = registry.make_generic_eager(prim, f_small, f_large, thr)

  def eager(*xs, devices, srcs, copy_semantics):
    outs = generic(*xs, devices=devices, srcs=srcs, copy_semantics=copy_semantics)
    return [o._placed(d) if d is not None and not getattr(d, "_spmd", False)
            and type(o) is Array else o for o, d in zip(outs, devices)]
  return eager


device_put_p.make_eager = _make_device_put_eager
_DP_SAMPLE = dict(devices=(None, None), srcs=(None, None),
                  copy_semantics=(ArrayCopySemantics.REUSE_INPUT,) * 2)
registry.register(
    device_put_p, family="other", impls={"numpy": lambda *xs, **_: list(xs)},
    abstract_eval=lambda *avals, **_: list(avals), jvp=_device_put_jvp,
    transpose=_device_put_transpose,
    batch=lambda vals, dims, **params: (device_put_p.bind(*vals, **params), list(dims)),
    meta=dict(dtypes=[np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)],
              reference=lambda *xs, **_: list(xs),
              samples=lambda rng, d: [([rng.standard_normal((2, 3)).astype(d),
                                        rng.standard_normal(4).astype(d)], _DP_SAMPLE)],
              linear=True, note="device_put of traced values (JAX's staged device_put): an "
                                "identity on the one CPU device"))


# ====================================================================== composed functions


def broadcast_shapes(*shapes):
  """The shape NumPy broadcasting gives ``shapes`` (rank promotion included)."""
  from nbjax.lax.shape import canonicalize_shape
  from nbjax.numpy import _util
  shapes = [canonicalize_shape(s) for s in shapes]
  for s in shapes:
    if any(d < 0 for d in s):
      raise TypeError("Only non-negative indices are allowed when broadcasting static shapes, "
                      f"but got shape {s}.")
  return _util.broadcast_shapes(*shapes)


def tile(operand, reps):
  """``operand`` repeated ``reps[i]`` times along each axis ``i`` (``len(reps) == ndim``)."""
  lax = _lax()
  aval = get_aval(operand)
  reps = tuple(map(operator.index, reps))
  if len(reps) != aval.ndim:
    raise ValueError(f"tile: len(reps) must equal operand.ndim, got reps={reps} for operand "
                     f"shape {aval.shape}")
  if any(r < 0 for r in reps):
    raise ValueError(f"tile: reps must be nonnegative, got {reps}")
  # (r0, d0, r1, d1, ...) by one broadcast, then merged pairwise
  shape = tuple(x for r, d in zip(reps, aval.shape) for x in (r, d))
  b = lax.broadcast_in_dim(operand, shape, tuple(range(1, 2 * aval.ndim, 2)))
  return lax.reshape(b, tuple(r * d for r, d in zip(reps, aval.shape)))


def split(operand, sizes, axis=0):
  """``operand`` cut along ``axis`` into pieces of ``sizes`` (which sum to its length)."""
  lax = _lax()
  aval = get_aval(operand)
  sizes = tuple(map(operator.index, sizes))
  axis = operator.index(axis)
  if not -aval.ndim <= axis < aval.ndim:
    raise ValueError(f"axis {axis} is out of bounds for array of dimension {aval.ndim}")
  axis %= aval.ndim
  if any(s < 0 for s in sizes):
    raise ValueError(f"Sizes passed to split must be nonnegative, got {list(sizes)}")
  if sum(sizes) != aval.shape[axis]:
    raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the "
                     f"operand shape {list(aval.shape)}")
  out, start = [], 0
  for s in sizes:
    out.append(lax.slice_in_dim(operand, start, start + s, axis=axis))
    start += s
  return out


def index_take(src, idxs, axes):
  """``src`` gathered at the index tuples ``zip(*idxs)`` over ``axes`` (negative indices
  wrap): one result row per index tuple, the other axes kept."""
  lax = _lax()
  aval = get_aval(src)
  axes = tuple(map(operator.index, axes))
  idxs = [i if hasattr(i, "aval") or isinstance(i, core.Tracer) else _as_array(i) for i in idxs]
  if len(idxs) != len(axes):
    raise ValueError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
  cols = [lax.rem(lax.add(lax.rem(i, np.asarray(aval.shape[a], get_aval(i).dtype)),
                          np.asarray(aval.shape[a], get_aval(i).dtype)),
                  np.asarray(aval.shape[a], get_aval(i).dtype)) for i, a in zip(idxs, axes)]
  ind = lax.concatenate([lax.expand_dims(c, (1,)) for c in cols], 1)
  sizes = tuple(1 if d in axes else s for d, s in enumerate(aval.shape))
  dn = lax.GatherDimensionNumbers(offset_dims=tuple(range(1, aval.ndim - len(axes) + 1)),
                                  collapsed_slice_dims=tuple(sorted(axes)),
                                  start_index_map=axes)
  return lax.gather(src, ind, dn, sizes)


def _atk_abstract_eval(x, *, k, reduction_dimension, recall_target, is_max_k,
                      reduction_input_size_override, aggregate_to_topk):
  if k <= 0:
    raise ValueError(f"k must be positive, got {k}")
  if x.ndim == 0:
    raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {x.shape}")
  dims = list(x.shape)
  if dims[reduction_dimension] < k:
    raise ValueError(f"k must be smaller than the size of reduction_dim "
                     f"{dims[reduction_dimension]}, got {k}")
  if x.dtype not in _float and x.dtype != dtypes._bf16:
    raise ValueError("operand must be a floating type")
  dims[reduction_dimension] = k
  return [ShapedArray(tuple(dims), x.dtype, x.weak_type), ShapedArray(tuple(dims), np.int32)]


def _atk_jvp(primals, tangents, **params):
  lax = _lax()
  x, = primals
  t, = tangents
  vals, idx = approx_top_k_p.bind(x, **params)
  if type(t) is ad.Zero:
    return [vals, idx], [ad.Zero.from_primal_value(vals), ad.Zero.from_primal_value(idx)]
  dim = params["reduction_dimension"] % get_aval(x).ndim
  import nbjax.numpy as jnp
  return [vals, idx], [jnp.take_along_axis(t, idx, axis=dim),
                       ad.Zero.from_primal_value(idx)]


def _atk_batch(vals, dims, *, reduction_dimension, **params):
  x, = vals
  bd, = dims
  nd = get_aval(x).ndim
  rd = reduction_dimension % (nd - 1)
  rd = rd + (rd >= bd)
  return approx_top_k_p.bind(x, reduction_dimension=rd, **params), [bd, bd]


def _atk_samples(rng, dtype):
  x = rng.standard_normal((3, 7)).astype(dtype)
  return [([x], dict(k=k, reduction_dimension=rd, recall_target=0.95, is_max_k=mx,
                     reduction_input_size_override=-1, aggregate_to_topk=True))
          for k, rd, mx in ((3, -1, True), (2, 0, False), (7, 1, True), (1, -1, False))]


def _atk_reference(x, *, k, reduction_dimension, is_max_k, **_):
  d = reduction_dimension % x.ndim
  order = np.argsort(-x if is_max_k else x, axis=d, kind="stable")
  idx = np.take(order, np.arange(k), axis=d)
  return [np.take_along_axis(x, idx, d), idx.astype(np.int32)]


approx_top_k_p = Primitive("approx_top_k")
approx_top_k_p.multiple_results = True
registry.register(
    approx_top_k_p, family="sort", abstract_eval=_atk_abstract_eval, jvp=_atk_jvp,
    batch=_atk_batch, policy=("xla", "xla", registry.LARGE),
    meta=dict(dtypes=[np.dtype(np.float32), np.dtype(np.float64)], reference=_atk_reference,
              samples=_atk_samples,
              note="xla: XLA's sort with JAX's GT/LT comparator (its exact CPU fallback; "
                   "NaNs land where XLA's sort puts them)"))


def _approx_k(operand, k, reduction_dimension, recall_target, reduction_input_size_override,
              aggregate_to_topk, is_max):
  if not hasattr(operand, "aval") and not isinstance(operand, core.Tracer):
    operand = _as_array(operand)
  return tuple(approx_top_k_p.bind(
      operand, k=operator.index(k), reduction_dimension=operator.index(reduction_dimension),
      recall_target=float(recall_target), is_max_k=is_max,
      reduction_input_size_override=operator.index(reduction_input_size_override),
      aggregate_to_topk=bool(aggregate_to_topk)))


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
  """The ``k`` largest entries along ``reduction_dimension`` (descending) and their int32
  indices. As JAX's CPU fallback the result is exact (``recall_target`` and the other
  knobs do not change it); ``operand`` must be floating."""
  return _approx_k(operand, k, reduction_dimension, recall_target,
                   reduction_input_size_override, aggregate_to_topk, True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
  """The ``k`` smallest entries along ``reduction_dimension`` (ascending) and their int32
  indices; exact, as JAX's CPU fallback."""
  return _approx_k(operand, k, reduction_dimension, recall_target,
                   reduction_input_size_override, aggregate_to_topk, False)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
  """Grouped matmul: rows ``[start_g, start_g + group_sizes[g])`` of ``lhs`` (m, k) times
  ``rhs[g]`` (k, n), for consecutive groups; rows past ``sum(group_sizes)`` are zero.

  Computed as one batched ``dot_general`` over the groups of ``lhs`` masked to each
  group's rows, summed over the groups. ``out_sharding``: the result's sharding (JAX's).
  """
  lax = _lax()
  if group_offset is not None:
    raise NotImplementedError("Unimplemented group_offset support.")
  la, ra, ga = get_aval(lhs), get_aval(rhs), get_aval(group_sizes)
  if la.ndim != 2 or ra.ndim != 3 or ga.ndim != 1 or ga.shape[0] != ra.shape[0] or \
      la.shape[1] != ra.shape[1]:
    raise TypeError(f"ragged_dot requires lhs (m, k), rhs (g, k, n) and group_sizes (g,), got "
                    f"{la.shape}, {ra.shape}, {ga.shape}")
  m, g = la.shape[0], ra.shape[0]
  gs = group_sizes if hasattr(group_sizes, "aval") or isinstance(group_sizes, core.Tracer) \
      else _as_array(group_sizes)
  ends = lax.cumsum(lax.convert_element_type(gs, np.int32), 0)
  starts = lax.sub(ends, lax.convert_element_type(gs, np.int32))
  rows = lax.broadcasted_iota(np.int32, (g, m), 1)
  mask = lax.bitwise_and(lax.ge(rows, lax.broadcast_in_dim(starts, (g, m), (0,))),
                         lax.lt(rows, lax.broadcast_in_dim(ends, (g, m), (0,))))
  lhs_g = lax.broadcast_in_dim(lhs, (g,) + la.shape, (1, 2))
  zero = lax.broadcast_in_dim(np.zeros((), la.dtype), (g,) + la.shape, ())
  lhs_g = lax.select(lax.broadcast_in_dim(mask, (g,) + la.shape, (0, 1)), lhs_g, zero)
  out = lax.dot_general(lhs_g, rhs, (((2,), (1,)), ((0,), (0,))), precision=precision,
                        preferred_element_type=preferred_element_type)
  from nbjax.sharding import apply_out_sharding
  return apply_out_sharding(lax.reduce_sum(out, (0,)), out_sharding, "ragged_dot")


def _ragged_mode(ndim, dnums):
  """JAX's three modes: the lhs ragged dimension is non-contracting (1), contracting (2) or
  batch (3); with the lhs dimensions that prefix ``group_sizes``'s shape."""
  (lc, _), (lb, _) = dnums.dot_dimension_numbers
  r, = dnums.lhs_ragged_dimensions
  free = [d for d in range(ndim) if d not in lc and d not in lb]
  if r in free:
    return 1, [*lb, *free[:free.index(r)]]
  if r in lc:
    return 2, [*lb, *lc[:list(lc).index(r)]]
  return 3, list(lb[:list(lb).index(r)])


def _ragged_to_dense(x, dim, gs, prefix):
  """``x`` with a leading group axis: copy ``g`` keeps the entries of group ``g`` along
  ``dim`` (``gs``: group sizes of shape ``[x.shape[p] for p in prefix] + [g]``), zeros
  elsewhere."""
  lax = _lax()
  g = gs.shape[-1]
  shape = (g,) + x.shape
  order = sorted(range(len(prefix)), key=lambda i: prefix[i])
  ends = lax.cumsum(gs, gs.ndim - 1)
  starts = lax.sub(ends, gs)
  perm = (gs.ndim - 1, *order)
  dims = (0, *[prefix[i] + 1 for i in order])
  ends, starts = (lax.broadcast_in_dim(lax.transpose(v, perm), shape, dims)
                  for v in (ends, starts))
  iota = lax.broadcasted_iota(gs.dtype, shape, dim + 1)
  mask = lax.bitwise_and(lax.le(starts, iota), lax.lt(iota, ends))
  xb = lax.broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
  return lax.select(mask, xb, lax.full_like(xb, 0))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, *, out_sharding=None):
  """Ragged matrix multiplication (``lax.dot_general`` with one ragged ``lhs`` dimension
  split into consecutive groups of ``group_sizes``). As JAX's three modes:

  1. ragged non-contracting: ``[b,m,k], [g,b,k,n], [b,g] -> [b,m,n]`` (group ``i``'s rows
     times ``rhs``'s group ``i``);
  2. ragged contracting: ``[b,m,k], [b,k,n], [b,g] -> [g,b,m,n]`` (one product per group);
  3. ragged batch: ``[b,m,k], [b,k,n], [g] -> [b,m,n]`` (``dot_general``).

  ``group_sizes`` of shape ``[g]`` is broadcast over the prefix dimensions.
  """
  del out_sharding
  lax = _lax()
  if group_offset is not None:
    raise NotImplementedError("Unimplemented group_offset support.")
  dn = ragged_dot_dimension_numbers
  la, ra, ga = get_aval(lhs), get_aval(rhs), get_aval(group_sizes)
  if len(dn.lhs_ragged_dimensions) != 1:
    raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")

  def in_range(d, rank, what, arg):
    if not 0 <= d < rank:
      raise TypeError(f"ragged_dot_general requires {what} numbers to be nonnegative and less "
                      f"than the number of axes of the {arg} value, got {d} for {arg} of "
                      f"rank {rank}.")
  r, = dn.lhs_ragged_dimensions
  in_range(r, la.ndim, "lhs ragged dimension", "lhs")
  mode, prefix = _ragged_mode(la.ndim, dn)
  (lc, rc), (lb, rb) = dn.dot_dimension_numbers
  if ga.ndim == 0:
    raise TypeError("expected rank of group_sizes to be >=1.")
  want = tuple(la.shape[i] for i in prefix) + (ga.shape[-1],)
  if ga.ndim != 1 and ga.shape != want:
    raise TypeError(f"expected group_sizes to have shape {want}, got {ga.shape}.")
  g = ga.shape[-1]
  groups = dn.rhs_group_dimensions
  if mode != 1 and groups:
    raise TypeError("ragged_dot_general requires zero group dimensions in the rhs when lhs "
                    "ragged dimension is contracting or batch.")
  if mode == 1:
    if len(groups) != 1:
      raise TypeError("ragged_dot_general requires exactly one rhs group dimension when lhs "
                      "ragged dimension is noncontracting.")
    gd, = groups
    in_range(gd, ra.ndim, "rhs group dimension", "rhs")
    if gd in rb or gd in rc:
      raise TypeError("ragged_dot_general requires rhs group dimension numbers to be distinct "
                      "from contracting and batch dimensions.")
    if ra.shape[gd] != g:
      raise TypeError(f"expected rhs group dimension size to be {g}, got {ra.shape[gd]}.")
  if not dtypes.issubdtype(ga.dtype, np.integer):
    raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of "
                    "np.integer.")
  dot = lambda a, b, dims: lax.dot_general(  # noqa: E731
      a, b, dims, precision=precision, preferred_element_type=preferred_element_type)
  if mode == 3:
    return dot(lhs, rhs, dn.dot_dimension_numbers)
  gs = group_sizes if hasattr(group_sizes, "aval") or isinstance(group_sizes, core.Tracer) \
      else _as_array(group_sizes)
  if ga.ndim == 1:
    gs = lax.broadcast_in_dim(gs, want, (len(want) - 1,))
  inc = lambda ds: [d + 1 for d in ds]  # noqa: E731
  if mode == 1:  # the group axis of the expanded lhs contracts with rhs's group dimension
    return dot(_ragged_to_dense(lhs, r, gs, prefix), rhs,
               ((inc(lc) + [0], list(rc) + [groups[0]]), (inc(lb), list(rb))))
  rr = rc[list(lc).index(r)]
  _, rprefix = _ragged_mode(ra.ndim, type(dn)(((rc, lc), (rb, lb)), (rr,), ()))
  return dot(_ragged_to_dense(lhs, r, gs, prefix), _ragged_to_dense(rhs, rr, gs, rprefix),
             ((inc(lc), inc(rc)), ([0] + inc(lb), [0] + inc(rb))))


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
  """``operand`` with the elementwise ``func`` applied to the elements ``scatter_indices``
  select (those ``lax.scatter`` with updates of ``update_shape`` would write), once per
  update: an element selected ``k`` times is transformed ``k`` times, as JAX's."""
  lax = _lax()
  kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
  i32 = np.dtype(np.int32)
  count = lax.scatter_add(lax.full_like(operand, 0, i32), scatter_indices,
                          lax.full(update_shape, 1, i32), dimension_numbers, **kw)
  return apply_counted(operand, count, func, unique_indices)


def apply_counted(x, count, func, once=False):
  """``x`` with ``func`` applied ``count`` times at each element (at most once: ``once``);
  like JAX's ``scatter-apply`` it has no derivative (NotImplementedError, JAX's message)."""
  lax = _lax()

  @custom_jvp
  def f(x):
    if once:
      return lax.select(lax.gt(count, lax.full_like(count, 0)), func(x), x)
    n = lax.reduce_max(count, tuple(range(count.ndim))) if count.ndim else count
    return lax.fori_loop(0, n, lambda i, v: lax.select(
        lax.lt(lax.full_like(count, i), count), func(v), v), x)

  @f.defjvp
  def _(primals, tangents):
    raise NotImplementedError("Differentiation rule for 'scatter-apply' not implemented")
  return f(x)


# ====================================================================== rng_uniform


def _ru_abstract_eval(a, b, *, shape):
  if a.dtype != b.dtype:
    raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got {a.dtype} "
                     f"and {b.dtype}.")
  if a.shape != () or b.shape != ():
    raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} and "
                     f"{b.shape}.")
  return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


rng_uniform_p = Primitive("rng_uniform")
registry.register(
    rng_uniform_p, family="random", abstract_eval=_ru_abstract_eval,
    policy=("xla", "xla", registry.LARGE),
    meta=dict(note="xla: XLA's RngUniform (stateful, not reproducible, as in JAX)"))
ad.defjvp_zero(rng_uniform_p)


def rng_uniform(a, b, shape):
  """Stateful uniform random numbers in ``[a, b)`` of ``shape`` (XLA's RngUniform;
  experimental in JAX, prefer ``nbjax.random``)."""
  a, b = (v if hasattr(v, "aval") or isinstance(v, core.Tracer) else _as_array(v) for v in (a, b))
  return rng_uniform_p.bind(a, b, shape=tuple(map(operator.index, shape)))


# ----------------------------------------------------------------- jet (Taylor) rules
jet.deflinear(device_put_p)


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import hlo, ir, mlir  # noqa: E402


def _lo_reduce(ctx, *args, computation, jaxpr, dimensions):
  n = len(args) // 2
  dts = [a.dtype for a in ctx.avals_in[:n]]
  op = hlo.ReduceOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(args[:n]),
                    list(args[n:]), mlir.i64_array(dimensions))
  ss = [ir.RankedTensorType.get([], mlir.dtype_to_ir_type(d)) for d in dts]
  blk = op.regions[0].blocks.append(*ss, *ss)
  cvals = [mlir.ir_constant(np.asarray(c)) for c in jaxpr.consts]
  with ir.InsertionPoint(blk):
    hlo.return_(mlir.jaxpr_subcomp(ctx.module_context, jaxpr.jaxpr, cvals, list(blk.arguments)))
  return list(op.results)


lowering.register(reduce_p, _lo_reduce)


def _lo_rp(ctx, x, *, exponent_bits, mantissa_bits):
  return [hlo.reduce_precision(x, mlir.i32_attr(exponent_bits), mlir.i32_attr(mantissa_bits))
          if hasattr(mlir, "i32_attr") else
          hlo.reduce_precision(x, ir.IntegerAttr.get(ir.IntegerType.get_signless(32), exponent_bits),
                               ir.IntegerAttr.get(ir.IntegerType.get_signless(32), mantissa_bits))]


lowering.register(reduce_precision_p, _lo_rp)


def _lo_mulhi(ctx, x, y):
  d = ctx.avals_in[0].dtype
  shape = list(ctx.avals_in[0].shape)
  bits = 8 * d.itemsize
  if bits <= 32:
    wide = np.dtype(("i" if d.kind == "i" else "u") + str(2 * d.itemsize))
    wt = ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(wide))
    p = hlo.multiply(hlo.convert(wt, x), hlo.convert(wt, y))
    sh = mlir.full_like_aval(ctx, bits, ShapedArray(shape, wide))
    p = (hlo.shift_right_arithmetic if d.kind == "i" else hlo.shift_right_logical)(p, sh)
    return [hlo.convert(mlir.aval_to_ir_type(ctx.avals_out[0]), p)]
  # 64 bits: from 32-bit halves (as the kernel)
  u = np.dtype(np.uint64)
  ut = ir.RankedTensorType.get(shape, mlir.dtype_to_ir_type(u))
  c = lambda v: mlir.full_like_aval(ctx, v, ShapedArray(shape, u))  # broadcast scalars
  a, b = hlo.bitcast_convert(ut, x), hlo.bitcast_convert(ut, y)
  m, s = c(0xFFFFFFFF), c(32)
  a0, a1 = hlo.and_(a, m), hlo.shift_right_logical(a, s)
  b0, b1 = hlo.and_(b, m), hlo.shift_right_logical(b, s)
  p00, p01, p10, p11 = (hlo.multiply(a0, b0), hlo.multiply(a0, b1), hlo.multiply(a1, b0),
                        hlo.multiply(a1, b1))
  mid = hlo.add(hlo.add(hlo.shift_right_logical(p00, s), hlo.and_(p01, m)), hlo.and_(p10, m))
  hi = hlo.add(hlo.add(p11, hlo.shift_right_logical(p01, s)),
               hlo.add(hlo.shift_right_logical(p10, s), hlo.shift_right_logical(mid, s)))
  if d.kind == "i":
    zero = mlir.full_like_aval(ctx, 0, ShapedArray(shape, d))
    z64 = c(0)
    neg_x = mlir.compare(x, zero, "LT", d)
    neg_y = mlir.compare(y, zero, "LT", d)
    hi = hlo.subtract(hi, hlo.select(neg_x, b, z64))
    hi = hlo.subtract(hi, hlo.select(neg_y, a, z64))
  return [hlo.bitcast_convert(mlir.aval_to_ir_type(ctx.avals_out[0]), hi)]


lowering.register(mulhi_p, _lo_mulhi)


def _lo_ob(ctx, *xs):
  return list(hlo.OptimizationBarrierOp(list(xs)).results)


lowering.register(optimization_barrier_p, _lo_ob)
lowering.register(device_put_p, lambda ctx, *xs, **_: list(xs))




def _lo_ru(ctx, a, b, *, shape):
  dims = mlir.ir_constant(np.array(shape, np.int64))
  return [hlo.rng(a, b, dims, hlo.RngDistributionAttr.get("UNIFORM"))]


lowering.register(rng_uniform_p, _lo_ru)


def _lo_atk(ctx, x, *, k, reduction_dimension, recall_target, is_max_k,
            reduction_input_size_override, aggregate_to_topk):
  aval = ctx.avals_in[0]
  dim = reduction_dimension % aval.ndim
  it = ir.RankedTensorType.get(list(aval.shape), mlir.dtype_to_ir_type(np.dtype(np.int32)))
  iota = hlo.iota(it, dim)
  op = hlo.SortOp([mlir.aval_to_ir_type(aval), it], [x, iota], dimension=dim, is_stable=False)
  s = ir.RankedTensorType.get([], mlir.dtype_to_ir_type(aval.dtype))
  si = ir.RankedTensorType.get([], mlir.dtype_to_ir_type(np.dtype(np.int32)))
  blk = op.regions[0].blocks.append(s, s, si, si)
  with ir.InsertionPoint(blk):
    a, b = blk.arguments[0], blk.arguments[1]
    hlo.return_([mlir.compare(a, b, "GT" if is_max_k else "LT", aval.dtype)])
  lim = list(aval.shape)
  lim[dim] = k
  return [hlo.slice(r, [0] * aval.ndim, lim, [1] * aval.ndim) for r in op.results]


lowering.register(approx_top_k_p, _lo_atk)
