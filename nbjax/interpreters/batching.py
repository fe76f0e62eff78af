"""Vectorization: the batch trace and batching-rule helpers.

Pipeline position: ``vmap(f)`` pushes a ``BatchTrace``; its ``process_primitive`` calls the
primitive's batching rule (``prim.batch`` = ``batching.primitive_batchers[prim]``), a function
``(vals, bdims, **params) -> (out, out_bdim)`` that binds other primitives (usually the same
one, with the batch axis folded in) on the parent trace, so batched work runs as one batched
kernel call, never a Python loop over the batch.
"""
from __future__ import annotations

from nbjax import core, registry
from nbjax.core import Trace, Tracer, get_aval, set_current_trace
from nbjax.dtypes import ExtendedDType

# ``nbjax.lax`` (a layer above) installs itself here when imported: the array operations the
# helpers below need (zeros, add_any, transpose...) without an import pointing up.
_lax = None

not_mapped = None
primitive_batchers = registry.RuleView("batch", "batching")


class BatchTracer(Tracer):
  __slots__ = ("val", "batch_dim", "_aval", "source_info")  # (source_info: inputs' call site)

  def __init__(self, trace, val, batch_dim):
    self._trace, self.val, self.batch_dim, self._aval = trace, val, batch_dim, None

  def __repr__(self):  # JAX's: ``VmapTracer(aval=float32[], batched=float32[3])``
    return f"VmapTracer(aval={self.aval}, batched={get_aval(self.val)})"

  @property
  def aval(self):
    a = self._aval
    if a is None:
      a = get_aval(self.val)
      if self.batch_dim is not not_mapped:
        if core.sharding_rule_hook is not None and getattr(a, "_sh", None) is not None:
          from nbjax.interpreters.sharding_types import drop_dim  # (its spec's entry too)
          a = drop_dim(a, self.batch_dim)
        else:
          shape = list(a.shape)
          del shape[self.batch_dim]
          a = a.update(shape=tuple(shape))
      self._aval = a
    return a

  def to_concrete_value(self):
    return None

  def _origin_msg(self):
    from nbjax.interpreters.partial_eval import summarize_site
    src = summarize_site(getattr(self, "source_info", None))
    if src is None:
      return ""
    return f"\nThis BatchTracer with object id {id(self)} was created on line:\n  {src}"

  def full_lower(self):
    return self.val if self.batch_dim is not_mapped else self


class BatchTrace(Trace):
  spmd_name = None  # vmap's spmd_axis_name (a tuple of mesh axis names), if given

  def __init__(self, parent_trace, tag, axis_size, axis_name=None):
    self.parent_trace, self.tag = parent_trace, tag
    self.axis_size, self.axis_name = axis_size, axis_name

  def to_batch_info(self, val):
    if isinstance(val, BatchTracer) and val._trace.tag is self.tag:
      return val.val, val.batch_dim
    return val, not_mapped

  def process_primitive(self, prim, tracers, params):
    vals, dims = core.unzip2(map(self.to_batch_info, tracers))
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent_trace
    if all(d is not_mapped for d in dims) and not prim.rule_always and not (
        prim.named_axes is not None and self.axis_name in prim.named_axes(params)):
      try:
        return prim.bind(*vals, **params)
      finally:
        ctx.trace = prev
    rule = prim.batch
    try:
      if rule is None:
        raise registry.missing_rule("batch", prim)
      if getattr(rule, "wants_axis_data", False):
        out, out_dim = rule(self.axis_data(), vals, dims, **params)
      else:
        out, out_dim = rule(vals, dims, **params)
    finally:
      ctx.trace = prev
    if prim.multiple_results:
      return [BatchTracer(self, o, d) if d is not not_mapped else o for o, d in zip(out, out_dim)]
    return BatchTracer(self, out, out_dim) if out_dim is not not_mapped else out

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    """Batch the function and the rule (with this trace's tag, so values they close over
    stay batched) and bind again below."""
    vals, dims = core.unzip2(map(self.to_batch_info, tracers))
    agreed, key = [], self._key()
    outs = prim.bind_with_trace(self.parent_trace, _batch_fun(key, fun, dims, agreed),
                                _batch_jvp(key, jvp, dims, agreed), vals, symbolic_zeros)
    return [o if d is not_mapped else BatchTracer(self, o, d) for o, d in zip(outs, agreed[0])]

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    vals, dims = core.unzip2(map(self.to_batch_info, tracers))
    agreed, res_dims, key = [], [], self._key()
    outs = prim.bind_with_trace(
        self.parent_trace, _batch_fun(key, fun, dims, agreed),
        _batch_fwd(key, fwd, dims, agreed, res_dims, out_trees),
        _batch_bwd(key, bwd, vals, dims, agreed, res_dims), vals, out_trees, symbolic_zeros)
    return [o if d is not_mapped else BatchTracer(self, o, d) for o, d in zip(outs, agreed[0])]

  def _key(self):
    """This trace's tag and axis without its parent traces: what the batched rules of a
    custom function need (they run later, on a subtrace of the trace current then), so the
    staged equations that hold them keep no finished trace, nor its tracers, alive."""
    t = BatchTrace(None, self.tag, self.axis_size, self.axis_name)
    t.spmd_name = self.spmd_name
    return t

  def axis_data(self):
    return AxisData(self.axis_name, self.axis_size, self.spmd_name)

  def __repr__(self):
    return "BatchTrace"


# the spmd_axis_names of the vmaps being traced (innermost last): shard_map's partial eval
# leaves them out of its residuals' specs, as JAX's (vmap then splits the batch axis over them)
spmd_names: list = []


class AxisData:
  __slots__ = ("name", "size", "spmd_name")

  def __init__(self, name, size, spmd_name=None):
    self.name, self.size, self.spmd_name = name, size, spmd_name


# ------------------------------------------------------------------------ vmappable types
# JAX's vmappable typeclass: a registered type is one vmap argument/output (not flattened);
# ``to_elt(cont, get_idx, x, spec)`` makes its per-element value (``cont(array, axis)`` maps
# an array) and ``from_elt(cont, axis_size, elt, spec)`` rebuilds it from the element
# (``cont(axis_size, array, axis)`` moves an array's batch axis), for specs of ``spec_type``.

vmappables: dict = {}
spec_types: set = set()
to_elt_handlers: dict = {}
from_elt_handlers: dict = {}
make_iota_handlers: dict = {}


def register_vmappable(data_type, spec_type, axis_size_type, to_elt, from_elt, make_iota):
  """Make ``data_type`` a vmap argument/output type (JAX's ``register_vmappable``)."""
  vmappables[data_type] = (spec_type, axis_size_type)
  spec_types.add(spec_type)
  to_elt_handlers[data_type] = to_elt
  from_elt_handlers[data_type] = from_elt
  if make_iota:
    make_iota_handlers[axis_size_type] = make_iota


def unregister_vmappable(data_type):
  """A no-op, as JAX's (it keeps the registration)."""


def is_vmappable(x):
  return type(x) in vmappables


# ------------------------------------------------------------------------ helpers


# key arrays (extended dtypes): their moves and broadcasts act on their data; ``nbjax.lax``
# installs them (``(moveaxis, broadcast_in_dim)``)
extended_rules = None


def moveaxis(x, src, dst):
  """Move axis ``src`` of ``x`` to ``dst`` (a ``transpose`` bind; no-op when equal)."""
  aval = get_aval(x)
  nd = aval.ndim
  src, dst = src % nd, dst % nd
  if src == dst:
    return x
  if isinstance(aval.dtype, ExtendedDType):
    return extended_rules[0](x, src, dst)
  perm = [i for i in range(nd) if i != src]
  perm.insert(dst, src)
  return _lax.transpose(x, perm)


def broadcast_in_dim(x, shape, dims):
  """``lax.broadcast_in_dim`` (key arrays too)."""
  if isinstance(get_aval(x).dtype, ExtendedDType):
    return extended_rules[1](x, shape, dims)
  return _lax.broadcast_in_dim(x, shape, dims)


def bdim_at_front(x, bdim, size):
  """``x`` with its batch axis first; unmapped values are broadcast to ``size``."""
  if bdim is not_mapped:
    aval = get_aval(x)
    return broadcast_in_dim(x, (size, *aval.shape), tuple(range(1, aval.ndim + 1)))
  return moveaxis(x, bdim, 0)


def matchaxis(src, dst, sz, x):
  """Move (or broadcast) ``x``'s batch axis from ``src`` to ``dst``."""
  if src == dst:
    return x
  if src is not_mapped:
    x = broadcast_in_dim(x, (sz, *get_aval(x).shape), tuple(range(1, get_aval(x).ndim + 1)))
    src = 0
  if dst is not_mapped:
    raise ValueError("cannot unbatch a mapped value")
  return moveaxis(x, src, dst)


def broadcast_batcher(prim):
  """Batching rule for elementwise n-ary primitives (equal ranks broadcast size-1 dims;
  rank-0 operands broadcast). Batched operands get the batch axis first; unbatched
  non-scalar operands get a size-1 leading axis, so one primitive call does all the work."""

  def rule(vals, dims, **params):
    avals = [get_aval(v) for v in vals]
    # fast path: all mapped operands share shape and bdim, unmapped ones are scalars
    shapes = {a.shape for a, d in zip(avals, dims) if d is not not_mapped}
    bd = {d for d in dims if d is not not_mapped}
    if len(shapes) == 1 and len(bd) == 1 and all(
        d is not not_mapped or a.ndim == 0 for a, d in zip(avals, dims)):
      out = prim.bind(*vals, **params)
      return out, (bd.pop() if not prim.multiple_results else [bd.pop()] * len(out))
    nd = max(a.ndim - (d is not not_mapped) for a, d in zip(avals, dims))
    args = []
    for v, a, d in zip(vals, avals, dims):
      if d is not_mapped:
        if a.ndim == 0:
          args.append(v)
          continue
        v = _lax.expand_dims(v, tuple(range(nd + 1 - a.ndim)))
      else:
        v = moveaxis(v, d, 0)
        if a.ndim - 1 < nd:
          v = _lax.expand_dims(v, tuple(range(1, nd + 1 - (a.ndim - 1))))
      args.append(v)
    out = prim.bind(*args, **params)
    return out, ([0] * len(out) if prim.multiple_results else 0)
  return rule


def defbroadcasting(prim):
  prim.batch = broadcast_batcher(prim)


def defvectorized(prim):
  """Unary elementwise: the batch axis stays where it is."""
  prim.batch = lambda vals, dims, **params: (prim.bind(vals[0], **params), dims[0])


# ------------------------------------------------------------------------ custom_jvp / custom_vjp
# A custom function's primal computation may run as the function (eval, staging) or inside
# its rule (jvp), at different times; the first to run fixes the output batch dims
# (``agreed``: 0 where batched) and the other conforms to them.


def _subtrace(trace):
  t = BatchTrace(core.get_current_trace(), trace.tag, trace.axis_size, trace.axis_name)
  t.spmd_name = trace.spmd_name
  return t


def _agree(agreed, dims):
  want = [not_mapped if d is not_mapped else 0 for d in dims]
  if not agreed:
    agreed.append(want)
  elif any(a is not_mapped and w is not not_mapped for a, w in zip(agreed[0], want)):
    raise ValueError("vmap of a custom_jvp/custom_vjp function: its rule produced a batched "
                     "primal output where the function's output is unbatched (the rule's "
                     "primal output must equal the function's)")
  return agreed[0]


def _batch_zero(z, src, dst, size):
  """A symbolic zero with its batch dim moved from ``src`` to ``dst`` (None: unbatched)."""
  from nbjax.interpreters.ad import Zero
  if src == dst:
    return z
  shape = list(z.aval.shape)
  if src is not not_mapped:
    del shape[src]
  if dst is not not_mapped:
    shape.insert(dst, size)
  return Zero(z.aval.update(shape=tuple(shape)))


def _run_batched(trace, f, vals, dims):
  t = _subtrace(trace)
  ins = [v if d is not_mapped else BatchTracer(t, v, d) for v, d in zip(vals, dims)]
  with set_current_trace(t):
    outs = f(*ins)
  return t, outs


def _batch_fun(trace, fun, dims, agreed):
  def bfun(*xs):
    t, outs = _run_batched(trace, fun, xs, dims)
    vals, ods = core.unzip2(map(t.to_batch_info, outs))
    return [matchaxis(d, w, t.axis_size, v) for v, d, w in zip(vals, ods, _agree(agreed, ods))]
  bfun.__name__ = getattr(fun, "__name__", "fun")
  return bfun


def _batch_jvp(trace, jvp, dims, agreed):
  from nbjax.interpreters.ad import Zero

  def bjvp(*xs):
    n = len(xs) // 2
    tdims = [d if type(x) is not Zero else not_mapped for x, d in zip(xs[n:], dims)]
    ins = [*xs[:n], *[_batch_zero(x, d, not_mapped, None) if type(x) is Zero else x
                      for x, d in zip(xs[n:], dims)]]
    t, outs = _run_batched(trace, jvp, ins, [*dims, *tdims])
    m = len(outs) // 2
    info = [(o, not_mapped) if type(o) is Zero else t.to_batch_info(o) for o in outs]
    pdims, tdims = [d for _, d in info[:m]], [d for _, d in info[m:]]
    want = _agree(agreed, [a if a is not not_mapped else b for a, b in zip(pdims, tdims)])
    ps = [matchaxis(d, w, t.axis_size, v) for (v, d), w in zip(info[:m], want)]
    ts = [_batch_zero(v, d, w, t.axis_size) if type(v) is Zero else
          matchaxis(d, w, t.axis_size, v) for (v, d), w in zip(info[m:], want)]
    return [*ps, *ts]
  bjvp.__name__ = getattr(jvp, "__name__", "jvp")
  return bjvp


def _batch_fwd(trace, fwd, dims, agreed, res_dims, out_trees):
  def bfwd(*xs):
    vals, nonzeros = xs[::2], xs[1::2]
    t = _subtrace(trace)
    ins = [v if d is not_mapped else BatchTracer(t, v, d) for v, d in zip(vals, dims)]
    with set_current_trace(t):
      outs = fwd(*[x for pair in zip(ins, nonzeros) for x in pair])
    nres = out_trees()[1].num_leaves
    info = [t.to_batch_info(o) for o in outs]
    res_dims[:] = [[d for _, d in info[:nres]]]
    want = _agree(agreed, [d for _, d in info[nres:]])
    return [v for v, _ in info[:nres]] + [matchaxis(d, w, t.axis_size, v)
                                          for (v, d), w in zip(info[nres:], want)]
  bfwd.__name__ = getattr(fwd, "__name__", "fwd")
  return bfwd


def _batch_bwd(trace, bwd, vals, dims, agreed, res_dims):
  """The backward rule batched over the residuals' and cotangents' batch dims; each input
  cotangent is moved to its input's batch dim, or summed over the batch when the input is
  unbatched."""
  from nbjax.interpreters.ad import Zero
  in_avals = [get_aval(v).to_tangent_aval() for v in vals]

  def bbwd(*xs):
    rd, od = res_dims[0], agreed[0]
    nres = len(rd)
    cts = [_batch_zero(c, d, not_mapped, None) if type(c) is Zero else c
           for c, d in zip(xs[nres:], od)]
    cdims = [not_mapped if type(c) is Zero else d for c, d in zip(xs[nres:], od)]
    t, outs = _run_batched(trace, bwd, [*xs[:nres], *cts], [*rd, *cdims])
    res = []
    for o, a, d in zip(outs, in_avals, dims):
      if type(o) is Zero:
        res.append(Zero(a))
        continue
      v, src = t.to_batch_info(o)
      if d is not_mapped and src is not not_mapped:
        v = _lax.reduce_sum(v, (src,))
      elif src != d:
        v = matchaxis(src, d, t.axis_size, v)
      res.append(v)
    return res
  bbwd.__name__ = getattr(bwd, "__name__", "bwd")
  return bbwd
