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

# ``nbjax.lax`` (a layer above) installs itself here when imported: the array operations the
# helpers below need (zeros, add_any, transpose...) without an import pointing up.
_lax = None

not_mapped = None
primitive_batchers = registry.RuleView("batch", "batching")


class BatchTracer(Tracer):
  __slots__ = ("val", "batch_dim", "_aval")

  def __init__(self, trace, val, batch_dim):
    self._trace, self.val, self.batch_dim, self._aval = trace, val, batch_dim, None

  @property
  def aval(self):
    a = self._aval
    if a is None:
      a = get_aval(self.val)
      if self.batch_dim is not not_mapped:
        shape = list(a.shape)
        del shape[self.batch_dim]
        a = a.update(shape=tuple(shape))
      self._aval = a
    return a

  def to_concrete_value(self):
    return None

  def full_lower(self):
    return self.val if self.batch_dim is not_mapped else self


class BatchTrace(Trace):
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
    if all(d is not_mapped for d in dims):
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

  def axis_data(self):
    return AxisData(self.axis_name, self.axis_size)

  def __repr__(self):
    return "BatchTrace"


class AxisData:
  __slots__ = ("name", "size")

  def __init__(self, name, size):
    self.name, self.size = name, size


# ------------------------------------------------------------------------ helpers


def moveaxis(x, src, dst):
  """Move axis ``src`` of ``x`` to ``dst`` (a ``transpose`` bind; no-op when equal)."""
  nd = get_aval(x).ndim
  src, dst = src % nd, dst % nd
  if src == dst:
    return x
  perm = [i for i in range(nd) if i != src]
  perm.insert(dst, src)
  return _lax.transpose(x, perm)


def bdim_at_front(x, bdim, size):
  """``x`` with its batch axis first; unmapped values are broadcast to ``size``."""
  if bdim is not_mapped:
    aval = get_aval(x)
    return _lax.broadcast_in_dim(x, (size, *aval.shape), tuple(range(1, aval.ndim + 1)))
  return moveaxis(x, bdim, 0)


def matchaxis(src, dst, sz, x):
  """Move (or broadcast) ``x``'s batch axis from ``src`` to ``dst``."""
  if src == dst:
    return x
  if src is not_mapped:
    x = _lax.broadcast_in_dim(x, (sz, *get_aval(x).shape), tuple(range(1, get_aval(x).ndim + 1)))
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
