"""Eager reverse mode by tape: the per-call path of top-level ``grad``/``value_and_grad``.

Pipeline position: ``value_and_grad(f)(x)`` at top level either replays a staged program
(``eager_cache``: the whole forward and backward pass, compiled) or, on a first call or when
``f`` fails the purity guard, runs here. ``f`` runs under a ``TapeTrace`` whose parent is the
eval trace: every primitive executes eagerly at once (the primal values are concrete, Python
control flow works), and each application that reads a traced input is recorded as a node.
The backward pass walks the nodes in reverse, calling each node's VJP and accumulating
cotangents per value.

A node's VJP is, by construction, the transpose of the primitive's linearization: for
built-in primitives it is a compiled program (``registry.eager_program``) of ``linearize`` +
``backward_pass`` of the single primitive, staged once per (primitive, avals, params, which
inputs are differentiated) and cached, so a call pays kernel calls, not tracing. Primitives
whose params cannot key a cache, user primitives, and custom-derivative calls are linearized
on the spot (``ad.linearize_flat``, the primal computed exactly once). So the tape has the
semantics of linearize + transpose, one primitive at a time; no jaxpr is built per call.
"""
from __future__ import annotations

import itertools

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.array import Array, _wrap
from nbjax.core import Trace, Tracer, get_aval
from nbjax.interpreters import ad

_programs: dict = {}  # (prim, avals, params, nz, ct mask) -> compiled per-primitive VJP
_MAX_PROGRAMS = 4096


class TapeTracer(Tracer):
  __slots__ = ("val", "id", "_aval")

  def __init__(self, trace, val, id_):
    self._trace, self.val, self.id, self._aval = trace, val, id_, None

  @property
  def aval(self):
    a = self._aval
    if a is None:
      a = self._aval = get_aval(self.val)
    return a

  def to_concrete_value(self):
    return self.val

  def __repr__(self):
    return f"Traced<{self.aval}>with<TapeTrace>"


# user primitives (their impls may have effects: the primal runs once, inside linearize) and
# call primitives without a partial-eval rule are linearized when recorded
_LINEARIZED = frozenset({"user"})


def _inexact(x):
  t = type(x)
  if t is Array:
    return x._value.dtype.kind in "fc"
  return dtypes.is_inexact(get_aval(x).dtype)


def _nz(vals, ids):
  return [i is not None and _inexact(v) for v, i in zip(vals, ids)]


class TapeTrace(Trace):
  """Runs primitives on the parent trace at once and records the differentiable ones."""

  def __init__(self, parent):
    self.parent = parent
    self.nodes = []
    self._ids = itertools.count()

  def __repr__(self):
    return "TapeTrace"

  def new(self, val):
    return TapeTracer(self, val, next(self._ids))

  def _unwrap(self, tracers):
    vals, ids = [], []
    for t in tracers:
      if type(t) is TapeTracer and t._trace is self:
        vals.append(t.val)
        ids.append(t.id)
      else:
        vals.append(t)
        ids.append(None)
    return vals, ids

  def process_primitive(self, prim, tracers, params):
    vals, ids = list(tracers), None
    for k, t in enumerate(tracers):
      if type(t) is TapeTracer and t._trace is self:
        if ids is None:
          ids = [None] * len(tracers)
        vals[k], ids[k] = t.val, t.id
    ctx = core._ctx
    if ids is not None and prim.family in _LINEARIZED:
      out, lin = self._linearize(prim, vals, params, _nz(vals, ids))
      return self._record(prim, params, vals, ids, out, lin)
    prev, ctx.trace = ctx.trace, self.parent
    try:
      out = prim.bind(*vals, **params)
    finally:
      ctx.trace = prev
    return out if ids is None else self._record(prim, params, vals, ids, out, None)

  def _linearize(self, prim, vals, params, nz):
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent
    try:
      outs, lin = ad.linearize_flat(
          lambda *xs: _as_list(prim.bind(*xs, **params), prim), vals, in_nz=nz)
    finally:
      ctx.trace = prev
    return (outs if prim.multiple_results else outs[0]), lin

  def _record(self, prim, params, vals, ids, out, lin):
    if prim.multiple_results:
      if not any(_inexact(o) for o in out):
        return out
      wrapped = [self.new(o) for o in out]
      out_ids = [w.id for w in wrapped]
    else:
      if not _inexact(out):
        return out
      wrapped = self.new(out)
      out_ids = [wrapped.id]
    self.nodes.append((prim, params, vals, ids, out_ids, lin))
    return wrapped

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    return self._custom(lambda *xs: prim.bind_with_trace(
        core.get_current_trace(), fun, jvp, xs, symbolic_zeros), tracers)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    return self._custom(lambda *xs: prim.bind_with_trace(
        core.get_current_trace(), fun, fwd, bwd, xs, out_trees, symbolic_zeros), tracers)

  def _custom(self, call, tracers):
    vals, ids = self._unwrap(tracers)
    nz = _nz(vals, ids)
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent
    try:
      outs, lin = ad.linearize_flat(lambda *xs: list(call(*xs)), vals, in_nz=nz)
    finally:
      ctx.trace = prev
    wrapped = [self.new(o) for o in outs]
    self.nodes.append((None, None, vals, ids, [w.id for w in wrapped], lin))
    return wrapped


def _as_list(out, prim):
  return list(out) if prim.multiple_results else [out]


def _key_part(v):
  if type(v) is Array:
    x = v._value
    return (x.shape, x.dtype, v._weak)
  a = get_aval(v)
  return (a.shape, a.dtype, a.weak_type)


def _raw(v):
  return v._value if type(v) is Array else registry.coerce(v)[0]


def _program(prim, params, vals, nz, ct_mask):
  """The compiled VJP of ``prim`` at these avals, or None where params cannot key a cache."""
  try:
    key = (prim, tuple(map(_key_part, vals)), tuple(params.items()), tuple(nz), tuple(ct_mask))
    prog = _programs.get(key)
  except TypeError:  # unhashable params: linearize this node directly
    return None
  if prog is None:
    prog = _build(prim, params, [get_aval(v) for v in vals], nz, ct_mask)
    if len(_programs) >= _MAX_PROGRAMS:
      _programs.clear()
    _programs[key] = prog
  return prog


def _build(prim, params, avals, nz, ct_mask):
  from nbjax.interpreters import partial_eval as pe
  out_avals = prim.abstract_eval(*avals, **params)
  out_avals = list(out_avals) if prim.multiple_results else [out_avals]
  ct_avals = [a.to_tangent_aval() for a, m in zip(out_avals, ct_mask) if m]
  k = len(avals)

  def fun(*args):
    cts = iter(args[k:])
    _, lin = ad.linearize_flat(lambda *xs: _as_list(prim.bind(*xs, **params), prim),
                               list(args[:k]), in_nz=nz)
    full = [next(cts) if m else ad.Zero(a.to_tangent_aval()) for a, m in zip(out_avals, ct_mask)]
    return [ad.instantiate_zeros(c) for c, z in zip(lin.vjp(full), nz) if z]

  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, [*avals, *ct_avals],
                                               fun_name=f"vjp({prim.name})")
  jaxpr, _ = pe.dce_jaxpr(jaxpr, True, instantiate=True)
  return registry.eager_program(jaxpr, consts)


def _acc(a, b):
  r = np.add(a, b)
  return r if type(r) is np.ndarray else np.asarray(r)


def backward(trace, out_ids, seeds):
  """Cotangents of the recorded values: ``{id: raw ndarray}`` for every id reached from
  ``out_ids`` (seeded with the raw ndarrays ``seeds``)."""
  cts = {}
  for i, s in zip(out_ids, seeds):
    if i is not None:
      cts[i] = s if i not in cts else _acc(cts[i], s)
  pop = cts.pop
  for prim, params, vals, ids, out_ids, lin in reversed(trace.nodes):
    outs = [pop(i, None) for i in out_ids]
    if all(c is None for c in outs):
      continue
    if lin is None:
      nz = _nz(vals, ids)
      prog = _program(prim, params, vals, nz, [c is not None for c in outs])
      if prog is None:
        lin = trace._linearize(prim, vals, params, nz)[1]
      else:
        in_cts = iter(prog(*map(_raw, vals), *[c for c in outs if c is not None]))
    if lin is not None:
      nz = lin.in_nz
      full = [ad.Zero(a) if c is None else _wrap(c) for c, a in zip(outs, lin.out_avals)]
      in_cts = iter(None if type(c) is ad.Zero else registry.as_output(_raw(c), a)
                    for c, z, a in zip(lin.vjp(full), nz, lin.in_avals) if z)
    for i, z in zip(ids, nz):
      if z:
        c = next(in_cts)
        if c is not None:
          cts[i] = c if i not in cts else _acc(cts[i], c)
  return cts
