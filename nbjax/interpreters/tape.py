"""Eager reverse mode by tape: the per-call path of top-level ``grad``/``value_and_grad``.

Pipeline position: ``value_and_grad(f)(x)`` at top level either replays a staged program
(``eager_cache``: the whole forward and backward pass, compiled) or, on a first call or when
``f`` fails the purity guard, runs here. ``f`` runs under a ``TapeTrace`` whose parent is the
eval trace: every primitive executes eagerly at once (the primal values are concrete, Python
control flow works), and each application that reads a traced input is recorded as a node.

Every operand of a recorded node has a slot in ``trace.vals``: a traced value's slot is its
tracer's, a constant operand (a literal, a closed-over array) gets a fresh one, stored as
``~slot`` in the node so that constness is part of the node. A tape's *structure* (the
primitives, params, slot wiring, constant avals and input avals) decides every step of the
backward pass; the values never do. The backward pass is, by construction, the transpose of
each node's linearization, accumulated per slot (symbolic zeros skipped, as
``ad.backward_pass`` does):

- A structure seen before compiles once into one program (``registry.eager_program``) of
  the whole backward pass, keyed by the structure, fed the current call's slot values: a
  call pays one key lookup and the kernels. Only structure-derived things are cached; a
  call whose structure differs, in any node, misses and builds (or falls back). Only small
  tapes (``_MAX_BYTES``) compile: on large arrays the kernels dominate anyway.
- Otherwise (a first sight, or nodes that cannot be compiled), node by node: each node's
  VJP is a compiled program of ``linearize`` + ``backward_pass`` of the single primitive,
  cached per (primitive, avals, params, which inputs are differentiated). Primitives whose
  params cannot key a cache, user primitives, and custom-derivative calls are linearized
  on the spot when recorded (``ad.linearize_flat``, the primal computed exactly once); a
  tape holding one of those is never compiled whole.
"""
from __future__ import annotations

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.array import Array, own
from nbjax.core import ShapedArray, Trace, Tracer, get_aval
from nbjax.interpreters import ad
from nbjax.interpreters import partial_eval as pe

_programs: dict = {}  # (prim, avals, params, nz, ct mask, epoch) -> per-primitive VJP, mask
_tapes: dict = {}  # tape structure -> _Backward, _SEEN (build on the next sight) or None
_SEEN = object()
_MAX_PROGRAMS = 4096
_MAX_TAPES = 64
# Compiled tapes pay off where dispatch dominates; a program keeps every intermediate alive
# to its end, so above this many bytes of recorded values node by node is as fast or faster
_MAX_BYTES = 1 << 20
_new = object.__new__


class TapeTracer(Tracer):
  """A value on the tape: ``val`` (concrete), its ``slot`` and its ``aval`` (attributes, as
  are ``shape`` and ``dtype``, set once: the jnp functions read them on every operation)."""
  __slots__ = ("val", "slot", "aval", "shape", "dtype")

  def __init__(self, trace, val, slot):
    self._trace, self.val, self.slot, self.aval = trace, val, slot, _aval(val)
    self.shape, self.dtype = self.aval.shape, self.aval.dtype

  def to_concrete_value(self):
    return self.val

  def __repr__(self):  # JAX's: ``GradTracer(primal=1.0, typeof(tangent)=f32[])``
    return f"GradTracer(primal={self.val}, typeof(tangent)={self.aval.str_short()})"


_PY_SCALARS = (float, int, complex, bool)


def _aval(v):
  if type(v) is Array and (core.sharding_rule_hook is None or v._pmap is None):
    # canonical already: skip ShapedArray's __init__ (not for a type with a sharding)
    x = v._value
    a = _new(ShapedArray)
    a.shape, a.dtype, a.weak_type = x.shape, x.dtype, v._weak
    return a
  return get_aval(v)


# user primitives (their impls may have effects: the primal runs once, inside linearize;
# not the pure kernels of ``nbjax.extend.numba_primitive``) and call primitives without a
# partial-eval rule are linearized when recorded; so are applications with effects (a
# callback, a loop around one): a per-node VJP program would run the primal again; callbacks
# always (pure_callback's JVP error comes from the forward pass, before grad's output checks,
# as JAX's)
_LINEARIZED = frozenset({"user", "callback"})
_MAY_HAVE_EFFECTS = frozenset({"callback", "control_flow", "call"})
# kernel families: their eager entries run kernels on the raw operands and never bind
_DIRECT = frozenset({"elementwise", "indexing", "linalg", "reduction", "shape"})


_INEXACT: dict = {}  # dtype -> is it inexact


def _is_inexact(d):
  r = _INEXACT.get(d)
  if r is None:
    r = _INEXACT[d] = dtypes.is_inexact(d)
  return r


def _inexact(x):
  return _is_inexact(x._value.dtype if type(x) is Array else get_aval(x).dtype)


def _key_part(v):
  if type(v) is Array:
    x = v._value
    return (x.shape, x.dtype, v._weak)
  a = get_aval(v)
  return (a.shape, a.dtype, a.weak_type)


def _raw(v):
  if type(v) is Array:
    return v._value
  x = registry.coerce(v)[0]
  return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def _nbytes(vals):
  return sum(v._value.nbytes if type(v) is Array else np.asarray(v).nbytes for v in vals)


def _as_list(out, prim):
  return list(out) if prim.multiple_results else [out]


class TapeTrace(Trace):
  """Runs primitives on the parent trace at once and records the differentiable ones.

  ``vals``: slot -> value (inputs first); ``nodes``: ``(prim, params, ins, outs, lin,
  const avals)`` with ``ins`` the operand slots (``~s`` for a constant's), ``outs`` the
  result slots (None for a result not recorded), ``lin`` a ``Linearized`` where the node was
  linearized when recorded (``prim`` None for a custom-derivative call)."""

  def __init__(self, parent):
    self.parent = parent
    self.direct = parent is core.eval_trace  # kernels may run with the tape current
    self.vals = []
    self.nodes = []
    self.in_keys = []  # avals (as key tuples) of the input slots

  def __repr__(self):
    return "TapeTrace"

  def arg(self, x):
    """A tracer for input leaf ``x`` when it is inexact (else ``x``)."""
    a = _aval(x)
    shape, dtype = a.shape, a.dtype
    if not _is_inexact(dtype):
      return x
    self.in_keys.append((shape, dtype, a.weak_type))
    if type(x) in _PY_SCALARS:  # its value now, in this x64 mode (as JAX's: an enable_x64
      x = Array._new(np.asarray(x, dtype), a.weak_type)  # inside cannot widen it)
    t = _new(TapeTracer)
    t._trace, t.val, t.slot, t.aval, t.shape, t.dtype = self, x, len(self.vals), a, shape, dtype
    self.vals.append(x)
    return t

  def process_primitive(self, prim, tracers, params):
    args, ins, nc = [], [], 0  # operand values, their slots (None: a constant), constants
    for t in tracers:
      if type(t) is TapeTracer and t._trace is self:
        args.append(t.val)
        ins.append(t.slot)
      else:
        args.append(t)
        ins.append(None)
        nc += 1
    if nc == len(ins):  # nothing traced: nothing to record
      ctx = core._ctx
      prev, ctx.trace = ctx.trace, self.parent
      try:
        return prim.bind(*tracers, **params)
      finally:
        ctx.trace = prev
    if prim.family in _DIRECT and self.direct:
      out = prim.eager(*args, **params)  # a kernel: it never binds, the tape may stay current
    elif (prim.family in _LINEARIZED and not prim.meta.get("pure")) or (
        prim.family in _MAY_HAVE_EFFECTS and pe.eqn_effects(prim, params)):
      outs, lin = self._linearize(prim, args, params, [s is not None for s in ins])
      outs = self._record(prim, params, args, ins, outs, lin)
      return outs if prim.multiple_results else outs[0]
    elif prim.family == "state":  # a ref holding traced values: its reads and writes are
      ctx = core._ctx             # the array operations they apply, recorded here
      prev, ctx.trace = ctx.trace, self
      try:
        return prim.impl(*tracers, **params)
      finally:
        ctx.trace = prev
    else:
      ctx = core._ctx
      prev, ctx.trace = ctx.trace, self.parent
      try:
        out = prim.bind(*args, **params)
      finally:
        ctx.trace = prev
    if type(out) is not Array:  # several results, or a backend's non-Array one
      outs = self._record(prim, params, args, ins, _as_list(out, prim), None)
      return outs if prim.multiple_results else outs[0]
    x = out._value
    dtype = x.dtype
    if not (_INEXACT.get(dtype) or _is_inexact(dtype)):
      return out
    vals = self.vals
    cav = self._wire(args, ins) if nc else ()
    s = len(vals)
    vals.append(out)
    self.nodes.append((prim, params, tuple(ins), (s,), None, cav))
    t, a = _new(TapeTracer), _new(ShapedArray)
    a.shape = t.shape = x.shape
    a.dtype = t.dtype = dtype
    a.weak_type = out._weak
    if core.sharding_rule_hook is not None and out._pmap is not None:  # (its sharding)
      a = out.aval
    t._trace, t.val, t.slot, t.aval = self, out, s, a
    return t

  def _wire(self, args, ins):
    """Give the constant operands (None in ``ins``) slots of their own: their avals."""
    vals, cav = self.vals, []
    for k, s in enumerate(ins):
      if s is None:
        v = args[k]
        ins[k] = ~len(vals)
        vals.append(v)
        if type(v) is Array:
          x = v._value
          cav.append((x.shape, x.dtype, v._weak))
        else:
          cav.append(_key_part(v))
    return tuple(cav)

  def _linearize(self, prim, args, params, nz):
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent
    try:
      return ad.linearize_flat(lambda *xs: _as_list(prim.bind(*xs, **params), prim), args,
                               in_nz=nz)
    finally:
      ctx.trace = prev

  def _record(self, prim, params, args, ins, outs, lin):
    """Record a node with results ``outs`` (a list): their tracers (inexact ones only)."""
    if not any(_inexact(o) for o in outs):
      return outs
    cav = self._wire(args, ins)
    vals, res, slots = self.vals, [], []
    for o in outs:
      if _inexact(o):
        slots.append(len(vals))
        res.append(TapeTracer(self, o, len(vals)))
        vals.append(o)
      else:
        slots.append(None)
        res.append(o)
    self.nodes.append((prim, params, tuple(ins), tuple(slots), lin, cav))
    return res

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    return self._custom(lambda *xs: prim.bind_with_trace(
        core.get_current_trace(), fun, jvp, xs, symbolic_zeros), tracers)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    return self._custom(lambda *xs: prim.bind_with_trace(
        core.get_current_trace(), fun, fwd, bwd, xs, out_trees, symbolic_zeros), tracers)

  def _custom(self, call, tracers):
    ins = [t.slot if type(t) is TapeTracer and t._trace is self else None for t in tracers]
    args = [t if s is None else t.val for t, s in zip(tracers, ins)]
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent
    try:
      outs, lin = ad.linearize_flat(lambda *xs: list(call(*xs)), args,
                                    in_nz=[s is not None for s in ins])
    finally:
      ctx.trace = prev
    return outs if ins.count(None) == len(ins) else self._record(None, None, args, ins, outs, lin)

  def structure(self, out):
    """The key of this tape's backward pass to slot ``out``: None when it cannot be compiled
    whole (a node linearized when recorded); unhashable when params cannot key a cache."""
    key = [registry.epoch, out, len(self.vals), *self.in_keys]
    for prim, params, ins, _, lin, cav in self.nodes:
      if lin is not None:
        return None
      key += (prim, tuple(params.items()) if params else (), ins, cav)
    return tuple(key)  # (unhashable where params are: ``backward`` tells)


# ----------------------------------------------------------------- backward pass


def _node_vjp(prim, params, args, nz, cts):
  """One node's input cotangents, by position (None where none flows: an operand not in
  ``nz``, a symbolic zero), by linearize + transpose of its primitive at ``args`` (concrete
  values or tracers) for output cotangents ``cts`` (None: none)."""
  _, lin = ad.linearize_flat(lambda *xs: _as_list(prim.bind(*xs, **params), prim), args,
                             in_nz=nz)
  return _transpose(lin, cts)


def _transpose(lin, cts):
  full = [ad.Zero(a) if c is None else c for c, a in zip(cts, lin.out_avals)]
  return [None if c is None or type(c) is ad.Zero else c for c in lin.vjp(full)]


class _Backward:
  """A compiled whole backward pass: ``program(seed, *values of the slots in used)`` -> the
  cotangents of the input slots in ``grads`` (the others get none), weakly typed where
  ``weak`` says."""
  __slots__ = ("program", "used", "grads", "weak")


def _backward_symbolic(nodes, out, seed, xs):
  """The backward pass over ``nodes`` on any values (tracers of a staging trace: the same
  steps, in the same order, as ``_backward_nodes`` takes on ndarrays), ``{slot: ct}``."""
  cts = {out: seed}
  for prim, params, ins, outs, lin, _ in reversed(nodes):
    ocs = [None if s is None else cts.pop(s, None) for s in outs]
    if all(c is None for c in ocs):
      continue
    args = [xs[s if s >= 0 else ~s] for s in ins]
    got = _node_vjp(prim, params, args, [s >= 0 for s in ins], ocs) if lin is None else \
        _transpose(lin, ocs)
    for s, c in zip(ins, got):
      if c is not None:
        cts[s] = ad.add_tangents(cts[s], c) if s in cts else c
  return cts


def staged_backward(trace, out, seed):
  """``backward`` on a tape whose parent stages (``trace.direct`` false: the replay of a
  top-level ``grad`` is staged through the tape, so that it takes the per-call path's steps
  exactly), seeded with ``seed`` (the scalar 1): ``{input slot: ct}``, tracers of the
  parent."""
  cts = _backward_symbolic(trace.nodes, out, seed, trace.vals)
  return {s: cts[s] for s in range(len(trace.in_keys)) if s in cts}


def _build_tape(trace, out, dtype):
  """Stage the backward pass of ``trace`` from slot ``out`` into one program. The seed is an
  input: folded into the program, its broadcasts would be constants as large as inputs."""
  from nbjax.interpreters import partial_eval as pe
  nodes, n_in = trace.nodes, len(trace.in_keys)
  avals = [get_aval(v) for v in trace.vals]
  grads = []

  def backward_fun(seed, *xs):
    cts = _backward_symbolic(nodes, out, seed, xs)
    grads.extend(s for s in range(n_in) if s in cts)
    return [cts[s] for s in grads]

  seed_aval = ShapedArray((), dtype, avals[out].weak_type)
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(backward_fun, [seed_aval, *avals],
                                               fun_name="tape_backward")
  jaxpr, used = pe.dce_jaxpr(jaxpr, True, instantiate=[True] + [False] * len(avals))
  jaxpr = pe.inline_calls(jaxpr)
  b = _Backward()
  # hot tapes fuse their elementwise chains, as replays do
  b.program = registry.eager_program(jaxpr, consts)
  b.used, b.grads = [i for i, u in enumerate(used[1:]) if u], grads
  b.weak = [v.aval.weak_type for v in jaxpr.outvars]
  return b


_SEEDS: dict = {}


def _seed(dtype):
  """The cotangent 1 of a scalar output of ``dtype`` (one read-only array per dtype)."""
  s = _SEEDS.get(dtype)
  if s is None:
    s = _SEEDS[dtype] = np.ones((), dtype)
    s.flags.writeable = False
  return s


def backward(trace, out, dtype, weak):
  """``({input slot: raw ndarray}, {input slot: weak type})``: the cotangents of the tape's
  inputs that one flows to, seeded at slot ``out`` (a scalar of ``dtype``, weakly typed if
  ``weak``, as JAX's seed follows the output) with 1. Weak types follow the transposes, as
  in JAX's backward pass (a strong constant in a rule makes the cotangent strong)."""
  key = trace.structure(out)
  try:
    b = _tapes.get(key) if key is not None else None
  except TypeError:  # params that cannot key a cache: node by node
    key = None
  if key is not None:
    if type(b) is _Backward:
      vals, args, foreign = trace.vals, [_seed(dtype)], None
      for i in b.used:
        v = vals[i]
        if type(v) is Array:
          args.append(v._value)
        else:
          args.append(_raw(v))
          foreign = [*(foreign or ()), args[-1]]
      outs = b.program(*args)
      if foreign:  # a caller's NumPy input: no gradient may be it or a view of it
        outs = [own(o, foreign) for o in outs]
      return dict(zip(b.grads, outs)), dict(zip(b.grads, b.weak))
    if b is _SEEN:  # a structure seen twice: compile its backward pass, if small
      try:
        b = _build_tape(trace, out, dtype) if _nbytes(trace.vals) <= _MAX_BYTES else None
      except Exception:  # noqa: BLE001  (node by node raises it, or handles it)
        b = None
      _tapes[key] = b
      if b is not None:
        return backward(trace, out, dtype, weak)
    elif key not in _tapes:
      if len(_tapes) >= _MAX_TAPES:
        _tapes.clear()
      _tapes[key] = _SEEN
  return _backward_nodes(trace, out, _seed(dtype), weak)


def _program(prim, params, args, nz, ct_mask):
  """One node's compiled VJP at these avals, ``(program, mask, weak)`` (``mask``: the
  operand positions it returns a cotangent for; ``weak``: the weak types of those), or None
  where params cannot key a cache. ``ct_mask``: per output, 0 (no cotangent), 1 (a strong
  one) or 2 (a weak one)."""
  for v in args:
    if type(v) is not Array and (isinstance(getattr(v, "dtype", None), dtypes.ExtendedDType)
                                 or type(v) is core.Ref):
      return None  # a key array operand (nbjax.prng), a ref: linearize this node directly
  try:
    key = (prim, tuple(map(_key_part, args)), tuple(params.items()), nz, ct_mask,
           registry.epoch)
    prog = _programs.get(key)
  except TypeError:  # unhashable params: linearize this node directly
    return None
  if prog is None:
    prog = _build_node(prim, params, [get_aval(v) for v in args], nz, ct_mask)
    if len(_programs) >= _MAX_PROGRAMS:
      _programs.clear()
    _programs[key] = prog
  return prog


def _build_node(prim, params, avals, nz, ct_mask):
  from nbjax.interpreters import partial_eval as pe
  out_avals = prim.abstract_eval(*avals, **params)
  out_avals = list(out_avals) if prim.multiple_results else [out_avals]
  ct_avals = [a.to_tangent_aval().update(weak_type=m == 2) for a, m in zip(out_avals, ct_mask)
              if m]
  k = len(avals)
  mask = []

  def fun(*args):
    cts = iter(args[k:])
    got = _node_vjp(prim, params, list(args[:k]), nz, [next(cts) if m else None for m in ct_mask])
    mask.extend(c is not None for c in got)
    return [c for c in got if c is not None]

  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, [*avals, *ct_avals],
                                               fun_name=f"vjp({prim.name})")
  jaxpr, _ = pe.dce_jaxpr(jaxpr, True, instantiate=True)
  return registry.eager_program(jaxpr, consts), mask, [v.aval.weak_type for v in jaxpr.outvars]


def _acc(a, b):
  r = np.add(a, b)
  return r if type(r) is np.ndarray else np.asarray(r)


def _backward_nodes(trace, out, seed, weak):
  """The backward pass node by node (per-primitive compiled VJPs): ``(cts, weak types)``.
  A custom rule's cotangent keeps the dtype the rule gave it (JAX's: a ``custom_vjp`` bwd
  may return bfloat16 for a float32 primal); from then on (``mixed``) a node whose output
  cotangent's dtype is not its output's transposes directly, and sums check dtypes, so
  that the rules raise JAX's errors."""
  vals, cts, wk = trace.vals, {out: seed}, {out: weak}
  pop = cts.pop
  mixed = False
  for prim, params, ins, outs, lin, _ in reversed(trace.nodes):
    ocs = [None if s is None else pop(s, None) for s in outs]
    if all(c is None for c in ocs):
      continue
    ows = [c is not None and wk[s] for s, c in zip(outs, ocs)]
    args = [vals[s if s >= 0 else ~s] for s in ins]
    got = None
    if mixed and lin is None and any(c is not None and c.dtype != get_aval(vals[s]).dtype
                                     for s, c in zip(outs, ocs)):
      lin = trace._linearize(prim, args, params, tuple(s >= 0 for s in ins))[1]
    if lin is None:
      nz = tuple(s >= 0 for s in ins)
      prog = _program(prim, params, args, nz,
                      tuple(0 if c is None else 1 + w for c, w in zip(ocs, ows)))
      if prog is None:
        lin = trace._linearize(prim, args, params, nz)[1]
      else:
        prog, mask, pw = prog
        res, rw = iter(prog(*map(_raw, args), *[c for c in ocs if c is not None])), iter(pw)
        got = [next(res) if m else None for m in mask]
        gw = [next(rw) if m else None for m in mask]
    if got is None:
      ts = _transpose(lin, [None if c is None else Array._new(c, w) for c, w in zip(ocs, ows)])
      gw = [None if c is None else get_aval(c).weak_type for c in ts]
      got = [None if c is None else registry.as_output(_raw(c), get_aval(c)) for c in ts]
      mixed = mixed or any(c is not None and c.dtype != a.dtype
                           for c, a in zip(got, lin.in_avals))
    for s, c, w in zip(ins, got, gw):
      if c is not None:
        if s not in cts:
          cts[s], wk[s] = c, w
        elif mixed and cts[s].dtype != c.dtype:  # JAX's eager add_jaxvals: lax.add's error
          ad.add_tangents(Array._new(cts[s]), Array._new(c))
        else:
          cts[s], wk[s] = _acc(cts[s], c), wk[s] and w
  return cts, wk
