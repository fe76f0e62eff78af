"""Structured control flow: ``cond``/``switch``, ``while_loop``/``fori_loop``,
``scan``/``map`` and ``associative_scan`` (seed 001; seed 003 Part 5).

Pipeline position: the Python API stages each function argument to a jaxpr with the staging
trace (``partial_eval.trace_to_jaxpr_dynamic``), its closed-over values hoisted to leading
operands, and binds one of three primitives holding those jaxprs: ``cond`` (``branches``,
picked by an int32 index), ``while`` (``cond_jaxpr``/``body_jaxpr``) and ``scan``
(``jaxpr``). Every rule of the three lives here: abstract eval, StableHLO lowering
(``stablehlo.case``; ``stablehlo.while``; scan as a while over a counter with dynamic slices
and updates), jvp, batching (a batched predicate turns ``cond`` into a select and runs a
``while`` until every lane is done), partial evaluation (so ``linearize``/``grad`` work),
transpose (``cond``, ``scan``; ``while`` raises JAX's reverse-mode error) and DCE.

Eagerly, ``cond`` runs only the taken branch's kernels; ``while`` and ``scan`` run as one XLA
executable for the whole loop (``stats()`` counts), cached by the jaxpr's *content*, so a
loop written with a new lambda on every call compiles once. A function object seen before
is not traced again while the purity pins of ``eager_cache.guards`` hold.
"""
from __future__ import annotations

import collections.abc as _abc
import functools
import inspect
import itertools
import types
import weakref

import numpy as np

from nbjax import core, dtypes, eager_cache, registry
from nbjax.traceback_util import api_boundary
from nbjax.array import Array, _wrap, own
from nbjax.config import config
from nbjax.core import Primitive, ShapedArray, Tracer, get_aval
from nbjax.interpreters import ad, batching
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters.lowering import hlo, ir, mlir
from nbjax.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr,
                         jaxpr_effects, params_axis_names, typecheck_param)
from nbjax.lax import elementwise as _ew
from nbjax.lax import indexing as _ix
from nbjax.lax import shape as _sh
from nbjax._tree_util import (keystr, tree_diffs as _tree_diffs, treedef_tuple, tree_flatten,
                              tree_flatten_with_path, tree_map as _tree_map, tree_unflatten)

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map", "associative_scan",
           "platform_dependent",
           "cond_p", "while_p", "scan_p", "stats", "reset_stats"]

_map = map  # (``map`` below is lax.map)
not_mapped = batching.not_mapped

# ----------------------------------------------------------------------- counters

_stats = {"loop_compiles": 0, "loop_cache_hits": 0, "trace_cache_hits": 0,
          "branch_programs": 0}


def stats():
  """Counters since process start: ``loop_compiles`` (eager while/scan executables built),
  ``loop_cache_hits`` (eager loops that found theirs by jaxpr content), ``trace_cache_hits``
  (functions whose jaxprs were reused), ``branch_programs`` (eager cond branches compiled
  to straight-line kernel calls)."""
  return dict(_stats)


def reset_stats():
  for k in _stats:
    _stats[k] = 0

# ----------------------------------------------------------------------- jaxpr helpers


def _typematch(a, b):
  return a.shape == b.shape and a.dtype == b.dtype


def _avals_str(avals):
  return ", ".join(a.str_short() for a in avals)


def _stage(fun, avals, name=None, dbg=None):
  """``(closed, consts)``: ``fun`` staged on ``avals``; its consts become leading invars.
  ``dbg``: ``(traced_for, user function, input tree[, _flat_fun's box])``, for JAX's error
  messages."""
  if dbg is not None:
    traced_for, user_fun, tree, *box = dbg
    out_tree = (lambda: box[0][0][0] if box[0] else None) if box else None
    dbg = pe.DebugInfo(traced_for, user_fun, tuple(tree_unflatten(tree, list(avals))),
                       out_tree=out_tree)
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, list(avals), fun_name=name, debug_info=dbg)
  return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), list(consts)


def _call(closed, *args):
  return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _permute(closed, in_order, out_order=None):
  """The jaxpr with its binders (outputs) reordered: ``in_order[k]`` is the old position of
  new input ``k``."""
  j = closed.jaxpr
  outs = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
  return ClosedJaxpr(j.replace(invars=[j.invars[i] for i in in_order], outvars=outs),
                     closed.consts)


def _join_consts(closeds, consts_list):
  """Jaxprs that each take their own leading consts -> jaxprs that all take every jaxpr's
  consts (deduplicated by identity; unused binders for the others'), and those consts."""
  all_consts, index = [], {}
  for cs in consts_list:
    for c in cs:
      if id(c) not in index:
        index[id(c)] = len(all_consts)
        all_consts.append(c)
  out = []
  for closed, cs in zip(closeds, consts_list):
    j = closed.jaxpr
    binders = [Var(get_aval(c)) for c in all_consts]
    for v, c in zip(j.invars, cs):
      binders[index[id(c)]] = v
    out.append(ClosedJaxpr(j.replace(invars=binders + j.invars[len(cs):]), closed.consts))
  return out, all_consts


def _nonzero(t):
  return type(t) is not ad.Zero and get_aval(t).dtype != dtypes.float0


def _inexact(aval):
  return dtypes.is_inexact(aval.dtype)


def _jvp_jaxpr(closed, nonzeros, instantiate):
  """``(closed, consts, out_nz)``: the jvp of ``closed`` staged with inputs ``[*primals,
  *nonzero tangents]`` (consts leading) and outputs ``[*primals, *tangents]`` for outputs
  whose tangent is nonzero or in ``instantiate`` (inexact outputs only)."""
  in_avals = closed.in_avals
  n = len(in_avals)
  t_avals = [a.to_tangent_aval() for a, nz in zip(in_avals, nonzeros) if nz]
  box = []

  def fun(*args):
    tans = iter(args[n:])
    trace = ad.JVPTrace(core.get_current_trace(), core.new_trace_tag())
    ins = [ad.JVPTracer(trace, p, next(tans)) if nz else p for p, nz in zip(args[:n], nonzeros)]
    with core.set_current_trace(trace):
      outs = _call(closed, *ins)
    pairs = [trace.to_primal_tangent_pair(o) for o in outs]
    out_nz = [(_nonzero(t) or bool(i)) and _inexact(a)
              for (_, t), i, a in zip(pairs, instantiate, closed.out_avals)]
    box.append(out_nz)
    return [p for p, _ in pairs] + [ad.instantiate_zeros(t) for (_, t), nz in zip(pairs, out_nz)
                                    if nz]

  new, consts = _stage(fun, [*in_avals, *t_avals], "jvp")
  return new, consts, box[0]


def _batch_jaxpr(closed, size, in_dims, out_dims, axis_name):
  """``(closed, consts, out_dims)``: ``closed`` vmapped with inputs batched along ``in_dims``
  (None: unbatched). ``out_dims``: per output the wanted batch dim (an int: moved or
  broadcast there), or None to leave it where the rule put it (moved to 0 when batched)."""
  in_avals = [a if d is None else a.update(shape=(*a.shape[:d], size, *a.shape[d:]))
              for a, d in zip(closed.in_avals, in_dims)]
  box = []

  def fun(*args):
    trace = batching.BatchTrace(core.get_current_trace(), core.new_trace_tag(), size, axis_name)
    ins = [a if d is None else batching.BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
    with core.set_current_trace(trace), core.extend_axis_env(axis_name, size):
      outs = _call(closed, *ins)
    res, dims = [], []
    for o, want in zip(outs, out_dims):
      v, d = trace.to_batch_info(o)
      if want is None:
        want = None if d is not_mapped else 0
      res.append(v if d == want else batching.matchaxis(d, want, size, v))
      dims.append(want)
    box.append(dims)
    return res

  new, consts = _stage(fun, in_avals, "vmap")
  return new, consts, box[0]


def _batched(closed, size, in_dims, axis_name):
  """Which outputs of ``closed`` come out batched for inputs batched along ``in_dims``."""
  return [d is not None for d in _batch_jaxpr(closed, size, in_dims,
                                              [None] * len(closed.out_avals), axis_name)[2]]


def _fixpoint(carry, step):
  """The least fixed point from ``carry`` (one flag per loop carry: unknown, nonzero
  tangent, batched or used) under ``step`` (the flags one trip through the body gives the
  carries): a flag once set stays set, so at most ``len(carry)`` rounds."""
  for _ in range(len(carry) + 1):
    new = [x or y for x, y in zip(carry, step(carry))]
    if new == carry:
      break
    carry = new
  return carry


def _zeros_eqns(aval):
  """``(eqns, atom)``: a zero of ``aval`` as a literal or a broadcast of one."""
  z = Literal(np.zeros((), aval.dtype), ShapedArray((), aval.dtype))
  if not aval.shape:
    return [], z
  v = Var(aval.update(weak_type=False))
  return [JaxprEqn([z], [v], _sh.broadcast_in_dim_p,
                   dict(shape=tuple(aval.shape), broadcast_dimensions=(), sharding=None))], v


_split = core.split_list

# ----------------------------------------------------------------------- content keys
# An eager loop's executable is cached by what its jaxprs compute, not by their identity:
# the key spells out every equation (primitive, operands by position, output types, params
# with sub-jaxprs recursively, literal values by their bytes). Keys are memoized per jaxpr.


class _Uncacheable(Exception):
  pass


_key_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # (closed) jaxpr -> token
_PLAIN = (str, int, bool, type(None), np.dtype)


def _aval_key(a):
  return (a.shape, a.dtype, a.weak_type)


def _value_key(v):
  t = type(v)
  if t in _PLAIN:
    return v if t is not int else (int, v)
  if t is float or t is complex:
    return (t, repr(v))  # 0.0 and -0.0 compare equal; their programs differ
  if t is ClosedJaxpr:
    k = _key_memo.get(v)
    if k is None:
      k = _key_memo[v] = _intern(("closed", _jaxpr_key(v.jaxpr),
                                  tuple(_value_key(c) for c in v.consts)))
    return k
  if t is Jaxpr:
    return _jaxpr_key(v)
  if t is tuple or t is list:
    return (t, tuple(_value_key(x) for x in v))
  if t is dict:
    return (dict, tuple(sorted((k, _value_key(x)) for k, x in v.items())))
  if t is Array:
    v = v._value
    t = np.ndarray
  if t is np.ndarray or isinstance(v, np.generic):
    v = np.asarray(v)
    return (np.ndarray, v.shape, v.dtype, v.tobytes())
  if isinstance(v, tuple):  # NamedTuples (dimension numbers)
    return (t, tuple(_value_key(x) for x in v))
  if isinstance(v, Tracer):
    raise _Uncacheable
  try:
    hash(v)
  except TypeError:
    raise _Uncacheable from None
  return (t, v)  # primitives, enums, functions: by identity (kept alive by the key)


def _jaxpr_key(jaxpr):
  k = _key_memo.get(jaxpr)
  if k is not None:
    return k
  ids = {}

  def atom(x):
    if type(x) is Literal:
      return ("lit", _value_key(np.asarray(x.val)), _aval_key(x.aval))
    return ids[x]

  parts = []
  for v in (*jaxpr.constvars, *jaxpr.invars):
    ids[v] = len(ids)
    parts.append(_aval_key(v.aval))
  for e in jaxpr.eqns:
    ins = tuple(atom(x) for x in e.invars)
    for v in e.outvars:
      ids[v] = len(ids)
    parts.append((e.primitive, ins, tuple(_aval_key(v.aval) for v in e.outvars),
                  tuple(sorted((k, _value_key(x)) for k, x in e.params.items()))))
  parts.append(tuple(atom(x) for x in jaxpr.outvars))
  k = _key_memo[jaxpr] = _intern(("jaxpr", *parts))
  return k


_interned: dict = {}  # content key -> a small token standing for it in enclosing keys


def _intern(key):
  """A token (``("k", n)``) for ``key``: equal keys get the same token, so the keys that
  contain it stay small and cheap to hash."""
  t = _interned.get(key)
  if t is None:
    if len(_interned) >= _MAX_INTERNED:  # forget everything keyed by the old tokens
      _interned.clear()
      _key_memo.clear()
      _executables.clear()
    t = _interned[key] = ("k", next(_tokens))
  return t


_tokens = itertools.count()
_MAX_INTERNED = 1 << 14


def _params_key(params):
  return tuple(sorted((k, _value_key(v)) for k, v in params.items()))

# ----------------------------------------------------------------------- eager loops


_executables: dict = {}  # (primitive, params content, argument avals) -> pjit._Executable
_MAX_EXECUTABLES = 256


# Staging inlines a scalar Array a loop body closes over as a Literal (as JAX does, and as
# jaxprs print it). An eager loop passes those values to its executable as arguments instead:
# the executable is then found again when only such a value changed (a closed-over learning
# rate, a custom_jvp's primal arguments), and it is the very program a replay runs, where the
# same values are tracers (XLA folds constants: the bits would differ).

def _lifted(closed):
  """``(closed2, lits)``: ``closed`` with every Literal holding an Array, at its top level and
  (through the loops and conds there) below, taken as a new leading invar; ``lits`` are those
  Literals. ``(closed, [])`` when there is none."""
  got = _lift_memo.get(closed)
  if got is not None:
    return (closed, []) if got is _NONE else got
  j, lits, new = closed.jaxpr, [], []

  def atom(x):
    if type(x) is Literal and type(x.val) is Array:
      v = Var(x.aval)
      lits.append(x)
      new.append(v)
      return v
    return x

  eqns = []
  for e in j.eqns:
    ins, params = e.invars, e.params
    lift = _LIFTS.get(e.primitive)
    if lift is not None:
      params, inserts = lift(params)
      ins = _insert(ins, inserts)
    ins2 = [atom(x) for x in ins]
    eqns.append(e if ins2 == e.invars and params is e.params else
                e.replace(invars=ins2, params=params))
  outs = [atom(x) for x in j.outvars]
  if not lits:
    _lift_memo[closed] = _NONE  # (a memo value may not hold its key: it would never die)
    return closed, []
  got = _lift_memo[closed] = (
      ClosedJaxpr(j.replace(invars=[*new, *j.invars], outvars=outs, eqns=eqns), closed.consts),
      lits)
  return got


_lift_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_NONE = object()


def _insert(args, inserts):
  """``args`` with each ``(position, items)`` of ``inserts`` placed before ``args[position]``."""
  out, prev = [], 0
  for pos, items in inserts:
    out += args[prev:pos]
    out += items
    prev = pos
  out += args[prev:]
  return out


# per primitive: params -> (the params taking the lifted values, where they go among the args)
def _lift_while(p):
  (c2, lc), (b2, lb) = _lifted(p["cond_jaxpr"]), _lifted(p["body_jaxpr"])
  if not (lc or lb):
    return p, []
  n = p["cond_nconsts"]
  return (dict(p, cond_jaxpr=c2, body_jaxpr=b2, cond_nconsts=n + len(lc),
               body_nconsts=p["body_nconsts"] + len(lb)), [(0, lc), (n, lb)])


def _lift_scan(p):
  j2, lits = _lifted(p["jaxpr"])
  if not lits:
    return p, []
  return dict(p, jaxpr=j2, num_consts=p["num_consts"] + len(lits)), [(0, lits)]


def _lift_cond(p):
  got = [_lifted(b) for b in p["branches"]]
  every = [lit for _, lits in got for lit in lits]
  if not every:
    return p, []
  branches = []
  for i, (b2, lits) in enumerate(got):  # each branch takes every branch's values
    own, ops = b2.jaxpr.invars[:len(lits)], b2.jaxpr.invars[len(lits):]
    ins = [*(Var(lit.aval) for _, ls in got[:i] for lit in ls), *own,
           *(Var(lit.aval) for _, ls in got[i + 1:] for lit in ls), *ops]
    branches.append(ClosedJaxpr(b2.jaxpr.replace(invars=ins), b2.consts))
  return dict(p, branches=tuple(branches)), [(1, every)]


_LIFTS: dict = {}  # filled below, once the primitives exist
_plans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # loop body -> _Plan


class _Plan:
  """An eager loop's params with its Array literals lifted (``_lifted``): the values to insert
  among the arguments, and the lifted params' content key (None: uncacheable). Kept per loop
  body (weakly), so it holds no reference to the body itself."""
  __slots__ = ("main", "rest", "lifted", "inserts", "key")

  def __init__(self, prim, params, main):
    body = params[main]
    self.main, self.rest = main, [(k, v) for k, v in params.items() if k != main]
    lifted, inserts = _LIFTS[prim](params)
    self.lifted = {k: _NONE if v is body else v for k, v in lifted.items()}
    self.inserts = [(pos, [lit.val for lit in lits]) for pos, lits in inserts if lits]
    try:
      self.key = _params_key(lifted)
    except _Uncacheable:
      self.key = None

  def matches(self, params):
    if len(params) != len(self.rest) + 1:
      return False
    for k, v in self.rest:
      w = params.get(k, _NONE)
      if w is not v and (w is _NONE or w != v):
        return False
    return True

  def params(self, body):
    return {k: body if v is _NONE else v for k, v in self.lifted.items()}


def _loop_executable(prim, args, params):
  """``(exe, args)``: the XLA executable running ``prim`` (a whole loop) on arguments like
  ``args``, found by content (None when the loop cannot be lowered: a primitive without a
  lowering), and the arguments it takes (``args`` with the loop's Array literals)."""
  from nbjax.interpreters import pjit
  main = "body_jaxpr" if prim is while_p else "jaxpr"
  body = params[main]
  plan = _plans.get(body)
  if plan is None or not plan.matches(params):
    plan = _plans[body] = _Plan(prim, params, main)
  key = None if plan.key is None else \
      (prim, plan.key, tuple([_aval_key(get_aval(a)) for a in args]))  # (literals': in plan.key)
  if plan.inserts:
    args = _insert(args, plan.inserts)
  exe = _executables.get(key) if key is not None else None
  if exe is not None:
    _stats["loop_cache_hits"] += 1
    return exe, args
  params, avals = plan.params(body), [get_aval(a) for a in args]
  out_avals = prim.abstract_eval(*avals, **params)
  invars = [Var(a) for a in avals]
  outvars = [Var(a) for a in out_avals]
  closed = ClosedJaxpr(Jaxpr([], invars, outvars, [JaxprEqn(invars, outvars, prim, params)]), [])
  try:
    exe = pjit._Executable(closed, prim.name)
  except NotImplementedError:
    return None, args
  _stats["loop_compiles"] += 1
  if key is not None:
    if len(_executables) >= _MAX_EXECUTABLES:
      _executables.pop(next(iter(_executables)))
    _executables[key] = exe
  return exe, args


_scalars: dict = {}  # Python scalar operands (a fori_loop's start) as Arrays keeping their buffer
_PY_SCALARS = (bool, int, float, complex)


def _operand(x, prim):
  if isinstance(x, Tracer):
    raise core.escaped_tracer_error(x, prim)
  if type(x) is core.Ref:  # a mutable array reference: the loop runs discharged (nbjax.state)
    return x
  if isinstance(getattr(x, "dtype", None), dtypes.ExtendedDType) and hasattr(x, "aval"):
    return x  # an eager key array (nbjax.prng): the executable takes its data
  registry.coerce(x, prim)  # a TypeError naming the primitive for anything else
  return x


def _scalar_array(x):
  k = (type(x), repr(x), config.trace_key)
  a = _scalars.get(k)
  if a is None:
    if len(_scalars) > 256:
      _scalars.clear()
    a = _scalars[k] = _wrap(registry.coerce(x)[0], True)
  return a


def _eager_loop(python_impl):
  def impl(*args, **params):
    args = [a if type(a) is Array else _scalar_array(a) if type(a) in _PY_SCALARS else
            _operand(a, impl.primitive) for a in args]
    if any(type(a) is core.Ref for a in args):
      return core.run_with_refs(impl.primitive, args, params)
    exe, lifted = _loop_executable(impl.primitive, args, params)
    if exe is None:
      return python_impl(*args, **params)
    return exe.run(lifted)
  return impl


def _pred_any(p):
  p = np.asarray(p._value if type(p) is Array else p)
  return bool(p.any()) if p.ndim else bool(p)


def _select_rows(pred, new, old):
  """Where the (batched) predicate holds, ``new``, else ``old`` (pred's shape a prefix)."""
  p = np.asarray(pred._value if type(pred) is Array else pred)
  out = []
  for n, o in zip(new, old):
    nv, ov = registry.coerce(n)[0], registry.coerce(o)[0]
    pb = p.reshape(p.shape + (1,) * (nv.ndim - p.ndim))
    out.append(_wrap(np.where(pb, nv, ov), getattr(n, "weak_type", False)))
  return out

# ----------------------------------------------------------------------- trace cache
# Functions seen a second time with the same argument signature are traced once more and
# the result kept, guarded by the pins of ``eager_cache.guards`` (globals, module attributes,
# functions reached...). A plain function is known by what it computes with: its code,
# globals, closure contents and defaults (by identity), not by the function object, so
# the inline style (a new lambda with the same code and captures on every call) finds the
# jaxprs of its predecessors; the pins on the function object itself are replaced by those
# identity checks. A function seen once never pays for the guards.


class _Entry:
  __slots__ = ("refs", "res", "holds", "state")

  def __init__(self, refs):  # weakly where it can: a cache entry must not keep an array alive
    self.refs, self.res, self.holds, self.state = tuple(_map(_weak, refs)), None, None, "seen"


class _Strong:
  __slots__ = ("obj",)

  def __init__(self, obj):
    self.obj = obj

  def __call__(self):
    return self.obj


def _weak(x):
  try:
    return weakref.ref(x)
  except TypeError:
    return _Strong(x)


_fun_cache: dict = {}
_MAX_FUNS = 128


def _ident(f):
  """``(key, refs)``: a hashable key for what ``f`` computes with, and the objects the key
  names by ``id`` (kept and compared by identity, so a reused id never matches)."""
  if type(f) is types.FunctionType and not f.__dict__ and f.__kwdefaults__ is None:
    cells = f.__closure__ or ()
    try:
      contents = tuple(c.cell_contents for c in cells)
    except ValueError:  # an empty cell
      return None
    refs = (f.__globals__, f.__defaults__, *contents)
    return (f.__code__, tuple(_map(id, refs))), refs
  return ("obj", id(f)), (f,)


def _same(a, b):
  """Whether an entry's (weak) refs ``a`` are the objects ``b`` (a dead one never is)."""
  return len(a) == len(b) and all(x() is y for x, y in zip(a, b))


def _own_pin(pin, f):
  box = pin[1]
  return box is f or any(box is c for c in (getattr(f, "__closure__", None) or ()))


def _cached(funs, key, build):
  """``build()`` (a tuple whose second item is the list of consts), reused for the functions
  ``funs`` and ``key`` while the pins hold; results holding tracers are never kept."""
  if funs is None or not config._flags["eager_cache"]:
    return build()
  ids = [_ident(f) for f in funs]
  if any(i is None for i in ids):
    return build()
  k = (tuple(i[0] for i in ids), key, registry.epoch, config.trace_key)
  refs = tuple(r for i in ids for r in i[1])
  e = _fun_cache.get(k)
  if e is not None and not _same(e.refs, refs):
    e = None
  if e is not None:
    if e.state == "never":
      return build()
    if e.state == "kept":
      if e.holds is None or e.holds():
        _stats["trace_cache_hits"] += 1
        return e.res
      e.state, e.res, e.holds = "seen", None, None
  res = build()
  if any(isinstance(c, Tracer) for c in res[1]):
    return res
  if e is None:
    if len(_fun_cache) >= _MAX_FUNS:
      _fun_cache.clear()
    _fun_cache[k] = _Entry(refs)
    return res
  pins = []
  for f in funs:
    p = eager_cache.guards(f)
    if p is None:
      e.state = "never"
      return res
    pins += [x for x in p if not _own_pin(x, f)]
  e.state, e.res, e.holds = "kept", res, eager_cache._checker(pins)
  return res


def _flat_fun(fun, in_tree, box):
  def flat(*args):
    out = fun(*tree_unflatten(in_tree, list(args)))
    flat_out, out_tree = tree_flatten(out)
    box.append((out_tree,))  # (not the outputs: tracers outliving their trace are leaks)
    return flat_out
  flat.__name__ = getattr(fun, "__name__", type(fun).__name__)
  return flat


_jit_state = []  # pjit's thread-local state (``disable_jit``), looked up once


def _jit_disabled():
  if not _jit_state:
    from nbjax.interpreters import pjit
    _jit_state.append(pjit._state)
  return _jit_state[0].disabled


def _asarray(x):
  """``lax.asarray``: arrays pass through, Python scalars become weakly typed arrays."""
  if isinstance(x, (Array, Tracer)):
    return x
  return Array(x, weak_type=type(x) in _SCALAR_TYPES)


def _abstractify(x, api):
  try:
    return core.abstractify(x)
  except TypeError:
    raise TypeError(f"{api}: value {x!r:.100} of type {type(x).__name__} is not a valid nbjax "
                    "type (arrays, NumPy arrays and Python scalars are)") from None


_SCALAR_TYPES = frozenset({bool, int, float, complex})


def _sig(flat, api):
  """The signature of flat operands (what their avals depend on) without building avals."""
  out = []
  for x in flat:
    t = type(x)
    if t is Array:
      v = x._value
      out.append((v.shape, v.dtype, x._weak))
    elif t in _SCALAR_TYPES:
      out.append(t)
    else:
      out.append(_aval_key(_abstractify(x, api)))
  return tuple(out)

# ----------------------------------------------------------------------- error messages


def _short(a):
  """An aval as JAX's error messages write it (``float32[3]``)."""
  return a.str_short(short_dtypes=False)


def _mismatch_extra(a, b):
  """``, so the dtypes do not match`` (JAX's ``aval_mismatch_extra``)."""
  why = []
  if a.dtype != b.dtype:
    why.append("the dtypes do not match")
  if a.shape != b.shape:
    why.append("the shapes do not match")
  if not why:
    return ""
  return ", so " + (why[0] if len(why) == 1 else ", ".join(why[:-1]) + ", and " + why[-1])


def _bullets(diffs, capitalize=True, tight=False):
  """JAX's bullet lists: a blank line between items, or (``tight``, as in cond's type
  check) none."""
  if len(diffs) == 1:
    d = diffs[0]
    return (d[0].upper() + d[1:] if capitalize else d) + ".\n"
  if tight:
    return "".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"
  return "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"


def _paths(tree, n):
  leaves, _ = tree_flatten_with_path(tree_unflatten(tree, list(range(n))))
  return [p for p, _ in leaves]


def _check_branch_outputs(api, name1, name2, f1, f2, tree1, avals1, tree2, avals2):
  info = f"{name1} is {pe.fun_sourceinfo(f1)}\n{name2} is {pe.fun_sourceinfo(f2)}\n\n"
  if tree1 != tree2:
    diffs = [f"{name1} output{' at path ' + keystr(p) if p else ''} is a {a} but {name2} "
             f"output{' at path ' + keystr(p) if p else ''} is a {b}, so {why}"
             for p, a, b, why in _tree_diffs(tree1, tree2)]
    raise TypeError(
        f"{api} branch outputs must have the same pytree structure, but they differ:\n\n"
        f"{info}{_bullets(diffs, False)}\nRevise {name1} and/or {name2} so that they have the same "
        "pytree structure.")
  if not all(_map(_typematch, avals1, avals2)):
    paths = _paths(tree1, len(avals1))
    diffs = [f"the output of {name1}{' at path ' + keystr(p) if p else ''} has type "
             f"{_short(a)} but the corresponding output of {name2} has type {_short(b)}"
             f"{_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, avals1, avals2) if not _typematch(a, b)]
    raise TypeError(
        f"{api} branches must have equal output types but they differ.\n\n{info}"
        f"{_bullets(diffs, tight=True)}\nRevise {name1} and/or {name2} so that all output types "
        "match.")


def _check_carry_type(name, body_fun, in_tree, in_avals, out_tree, out_avals):
  if in_tree == out_tree and all(_map(_typematch, in_avals, out_avals)):
    return
  try:
    carry_name = next(iter(inspect.signature(body_fun).parameters), None)
  except (TypeError, ValueError):
    carry_name = None

  def component(p):
    if carry_name:
      return f"the input carry component {carry_name}{keystr(p)}" if p else \
          f"the input carry {carry_name}"
    return f"the input carry at path {keystr(p)}" if p else "the input carry"

  if in_tree != out_tree:
    diffs = [f"{component(p)} is a {a} but the corresponding component of the carry output is "
             f"a {b}, so {why}"
             for p, a, b, why in _tree_diffs(in_tree, out_tree, leaf=str(ShapedArray))]
    raise TypeError(
        f"{name} function carry input and carry output must have the same pytree structure, "
        f"but they differ:\n\n{_bullets(diffs)}\nRevise the function so that the carry output "
        "has the same pytree structure as the carry input.")
  if not all(_map(_typematch, in_avals, out_avals)):
    paths = _paths(in_tree, len(in_avals))
    diffs = [f"{component(p)} has type {_short(a)} but the corresponding output carry "
             f"component has type {_short(b)}{_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not _typematch(a, b)]
    raise TypeError(
        f"{name} function carry input and carry output must have equal types, but they "
        f"differ:\n\n{_bullets(diffs)}\nRevise the function so that all output types match "
        "the corresponding input types.")


# ======================================================================= cond

cond_p = Primitive("cond")
cond_p.multiple_results = True
cond_p.typecheck_params = lambda *, branches, **_: typecheck_param(
    "cond", branches, "branches", "tuple of ClosedJaxpr",
    type(branches) is tuple and all(type(b) is ClosedJaxpr for b in branches))
_no_operand = object()


def _scalar_check(x):
  shape = np.shape(x) if not isinstance(x, (Tracer, Array)) else x.shape
  return shape


def _dtype_of(x):
  return get_aval(x).dtype if not isinstance(x, (list, tuple)) else None


@api_boundary
def switch(index, branches, *operands, operand=_no_operand):
  """``branches[clamp(index, 0, len(branches) - 1)](*operands)``: only the selected branch
  runs (under ``vmap`` with a batched index every branch runs and the results are selected).
  All branches must return the same pytree of types."""
  if not all(callable(b) for b in branches):
    raise TypeError("lax.switch: branches argument should be a sequence of callables.")
  if operand is not _no_operand:
    if operands:
      raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                      f"passed, got operand={operand!r} and positional operands {operands}")
    operands = (operand,)
  if len(_scalar_check(index)) != 0:
    raise TypeError(f"Branch index must be scalar, got {index} of shape {np.shape(index)}.")
  try:
    d = _dtype_of(index)
  except TypeError:
    raise TypeError(f"Index type must be an integer, got {index}.") from None
  if d is None or d.kind not in "iu":
    raise TypeError(f"Index type must be an integer, got {index} as {d}")
  branches = tuple(branches)
  if not branches:
    raise ValueError("Empty branch sequence")
  if len(branches) == 1:
    return branches[0](*operands)
  n = len(branches)
  if _jit_disabled() and _is_concrete(index):
    return branches[min(max(core.concrete_or_error(int, index), 0), n - 1)](*operands)
  if core.is_eval() and not isinstance(index, Tracer):
    i = int(registry.coerce(index)[0])
    index = np.int32(min(max(i, 0), n - 1))
  else:
    index = _ew.convert_element_type(index, np.int32)
    index = _ew.clamp(np.int32(0), index, np.int32(n - 1))
  names = [f"branch {i}" for i in range(n)]
  return _cond(index, branches, operands, "switch", names)


@api_boundary
def cond(pred, true_fun, false_fun, *operands, operand=_no_operand):
  """``true_fun(*operands) if pred else false_fun(*operands)``, staged: both functions are
  traced (their output types must match), only one runs (under ``vmap`` with a batched
  ``pred`` both run and the results are selected). Operands and outputs may be pytrees."""
  if not (callable(true_fun) and callable(false_fun)):
    raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
  if operand is not _no_operand:
    if operands:
      raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                      f"passed, got operand={operand!r} and positional operands {operands}")
    operands = (operand,)
  if type(pred) is Array and core._ctx.trace is core.eval_trace and not _jit_disabled():
    v = pred._value
    if v.ndim == 0 and v.dtype.kind in "biuf":
      return _cond(np.int32(bool(v)), (false_fun, true_fun), operands, "cond", _COND_NAMES)
  if pred is None:
    raise TypeError("cond predicate is None")
  if isinstance(pred, _abc.Sequence):
    raise TypeError(f"Pred must be a scalar, got {pred} of type {type(pred)}")
  if len(_scalar_check(pred)) != 0:
    raise TypeError(f"Pred must be a scalar, got {pred} of shape {np.shape(pred)}.")
  try:
    d = _dtype_of(pred)
  except TypeError:
    raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from None
  if d.kind != "b" and d.kind not in "iuf":
    raise TypeError(f"Pred type must be either boolean or number, got {d}.")
  if _jit_disabled() and _is_concrete(pred):  # as JAX: run the Python function
    return true_fun(*operands) if core.concrete_or_error(bool, pred) else false_fun(*operands)
  if core.is_eval() and not isinstance(pred, Tracer):
    index = np.int32(bool(registry.coerce(pred)[0]))
  else:
    if d.kind != "b":
      pred = _ew.ne(pred, _ew._const(pred, 0))
    index = _ew.convert_element_type(pred, np.int32)
  return _cond(index, (false_fun, true_fun), operands, "cond", _COND_NAMES)


_COND_NAMES = ("false_fun", "true_fun")


_PLATFORM = "cpu"  # the one platform programs here are lowered for


def _staged():
  """Whether the current trace (or one below it) stages out to a jaxpr (jit, make_jaxpr):
  only then is ``platform_dependent``'s platform left to lowering; under jvp, vmap or
  linearize alone it is known at once."""
  t = core.get_current_trace()
  while t is not None:
    if type(t) is pe.DynamicJaxprTrace:
      return True
    t = getattr(t, "parent_trace", None)
  return False


def platform_dependent(*args, default=None, **per_platform):
  """Stages out platform-specific code.

  ``platform_dependent(*args, cpu=cpu_code, tpu=tpu_code, default=other_code)`` is
  ``cpu_code(*args)`` when the program runs on a CPU, ``tpu_code(*args)`` on a TPU and
  ``other_code(*args)`` on any other platform. Programs here always run on the CPU, so
  the ``cpu`` branch (else ``default``) is the one that runs; under a trace every branch is
  traced, as in :func:`~switch`, so their output types must match.

  Args:
    *args: JAX arrays passed to each of the branches. May be PyTrees.
    **per_platform: branches to use for different platforms. The branches are
      JAX callables invoked with ``*args``. The keywords are platform names,
      e.g., 'cpu', 'tpu', 'cuda', 'rocm'.
    default: optional default branch to use for a platform not mentioned in
      ``per_platform``. If there is no ``default`` there will be an error when
      the code is lowered for a platform not mentioned in ``per_platform``.

  Returns:
    The value ``per_platform[execution_platform](*args)``.
  """
  groups = []  # [platform names, branch], identical branches joined
  for pname, pbranch in per_platform.items():
    if not callable(pbranch):
      raise TypeError(f"lax.platform_dependent: the '{pname}' branch must be a callable.")
    if pname == "gpu":
      raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
    for g in groups:
      if g[1] == pbranch:
        g[0].append(pname)
        break
    else:
      groups.append([[pname], pbranch])
  branches = [b for _, b in groups]
  platforms = [tuple(ps) for ps, _ in groups]
  if default is not None:
    if not callable(default):
      raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
    branches.append(default)
    platforms.append(None)
  index = next((i for i, ps in enumerate(platforms) if ps is None or _PLATFORM in ps), None)
  traced = _staged()  # (else the platform is known now, as JAX's concrete platform_index)
  if traced and len(branches) == 1:  # (switch calls a lone branch without an index)
    return branches[0](*args)
  if index is None:
    raise NotImplementedError("MLIR translation rule for primitive 'platform_index(platforms="
                              f"{tuple(platforms)})' not found for platform {_PLATFORM}")
  if not traced:
    return branches[index](*args)
  # (a NumPy index: a literal an eager loop does not lift, so the lowering sees the constant)
  return _cond(np.int32(index), branches, args, "switch",
               [f"branch {i}" for i in range(len(branches))])


def _cond(index, funs, operands, api, names):
  flat, in_tree = tree_flatten(operands)

  def build():
    avals = [_abstractify(x, api) for x in flat]
    staged, seen = [], {}
    for f, name in zip(funs, names):
      if id(f) not in seen:  # one function given for several branches is traced once (JAX)
        box = []
        closed, consts = _stage(_flat_fun(f, in_tree, box), avals, name,
                                (api, f, in_tree, box))
        seen[id(f)] = (closed, consts, box[0][0])
      staged.append(seen[id(f)])
    t0 = staged[0][2]
    if api == "cond":  # JAX reports true_fun first
      (cf, cc, ct), (tf, tc, tt) = staged
      _check_branch_outputs("cond", "true_fun", "false_fun", funs[1], funs[0],
                            tt, tf.out_avals, ct, cf.out_avals)
    else:
      for i in range(1, len(staged)):
        _check_branch_outputs("switch", "branch 0", f"branch{i}", funs[0], funs[i], t0,
                              staged[0][0].out_avals, staged[i][2], staged[i][0].out_avals)
    jaxprs, consts = _join_consts([s[0] for s in staged], [s[1] for s in staged])
    # an output every branch forwards from the same input is that input, pruned (as JAX)
    fwds = [_in_forwards(c.jaxpr) for c in jaxprs]
    in_fwd = [f[0] if len(set(f)) == 1 else None for f in zip(*fwds)]
    if any(f is not None for f in in_fwd):
      keep = [k for k, f in enumerate(in_fwd) if f is None]
      jaxprs = [_permute(c, range(len(c.jaxpr.invars)), keep) for c in jaxprs]
    return tuple(jaxprs), consts, t0, in_fwd

  refs = any(type(x) is core.Ref or pe._is_ref(x) for x in flat)
  if refs:  # JAX's errors for a mutable array reference passed twice, before tracing
    pe.check_ref_args(pe.DebugInfo(api, funs[-1], operands), flat)
  branches, consts, out_tree, in_fwd = _cached(funs, (api, in_tree, _sig(flat, api)), build)
  if refs and any(pe._is_ref(x) for x in consts):  # (or closed over and passed)
    pe.check_ref_args(pe.DebugInfo(api, funs[-1], operands), flat, consts)
  outs = cond_p.bind(index, *consts, *flat, branches=branches)
  if len(outs) < len(in_fwd):
    ins, it = [*consts, *flat], iter(outs)
    outs = [next(it) if f is None else _asarray(ins[f]) for f in in_fwd]
  return tree_unflatten(out_tree, outs)


def _in_forwards(jaxpr):
  """For each output of ``jaxpr``, the position of the input it returns unchanged, or None."""
  pos = {id(v): i for i, v in enumerate(jaxpr.invars)}
  return [pos.get(id(v)) for v in jaxpr.outvars]


# -- rules


def _cond_abstract_eval(index, *avals, branches):
  if index.shape != () or index.dtype != np.int32:
    raise TypeError(f"cond: the branch index must be an int32 scalar, got {index.str_short()}")
  if not branches:
    raise TypeError("cond: no branches")
  outs = branches[0].out_avals
  for i, b in enumerate(branches):
    ins = b.in_avals
    if len(ins) != len(avals) or not all(_map(_typematch, ins, avals)):
      raise TypeError(f"cond: branch {i} takes ({_avals_str(ins)}) but the operands are "
                      f"({_avals_str(avals)})")
    if len(b.out_avals) != len(outs) or not all(_map(_typematch, b.out_avals, outs)):
      raise TypeError(f"cond: branch {i} returns ({_avals_str(b.out_avals)}) but branch 0 "
                      f"returns ({_avals_str(outs)})")
  return list(outs)


_programs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _branch_program(closed):
  """The branch as straight-line kernel calls (``registry.eager_program``) from its second
  run on; None the first time (it runs by binding each equation)."""
  p = _programs.get(closed)
  if p is None:
    _programs[closed] = False
    return None
  if p is False:
    p = _programs[closed] = registry.eager_program(pe.inline_calls(closed.jaxpr), closed.consts)
    _stats["branch_programs"] += 1
  return p


def _has_keys(closed):
  from nbjax.interpreters import lowering
  h = lowering.physicalize_hook
  return h is not None and h[0](closed.jaxpr)


def _cond_eager(index, *args, branches):
  """Run the branch ``index`` picks (out of range: the last one, as XLA's case)."""
  if any(type(a) is core.Ref for a in args):  # mutable array references (nbjax.state)
    return core.run_with_refs(cond_p, (index, *args), dict(branches=branches))
  i = int(index) if type(index) is np.int32 else int(registry.coerce(index, cond_p)[0])
  n = len(branches)
  b = branches[i if 0 <= i < n else n - 1]
  ins = b.jaxpr.invars
  if len(args) != len(ins):
    raise TypeError(f"cond: branch takes {len(ins)} operands, got {len(args)}")
  if _has_keys(b):  # key arrays (nbjax.prng): the branch runs compiled, on the keys' data
    from nbjax.interpreters import pjit
    return pjit._executable_for(b, "cond").run(list(args))
  vals, foreign = [], []
  for a, v in zip(args, ins):
    x = a._value if type(a) is Array else registry.coerce(a, cond_p)[0]
    if x.shape != v.aval.shape or x.dtype != v.aval.dtype:
      raise TypeError(f"cond: operand of type {x.dtype}{list(x.shape)} where the branches "
                      f"take {v.aval.str_short()}")
    if type(a) is not Array:
      foreign.append(x)
    vals.append(x)
  prog = _branch_program(b)
  out_avals = branches[0].out_avals  # (weak types as abstract eval says)
  if prog is None:
    outs = eval_jaxpr(b.jaxpr, b.consts, *[_wrap(x, v.aval.weak_type) for x, v in zip(vals, ins)])
    outs = [registry.as_output(registry.coerce(o)[0], a) for o, a in zip(outs, out_avals)]
  else:
    outs = prog(*vals)
  return [_wrap(own(o, foreign) if foreign else o, a.weak_type) for o, a in zip(outs, out_avals)]


def _cond_jvp(primals, tangents, *, branches):
  index, *ops = primals
  nz = [_nonzero(t) for t in tangents[1:]]
  n_out = len(branches[0].out_avals)
  out_nz = [False] * n_out
  for b in branches:
    out_nz = [x or y for x, y in zip(out_nz, _jvp_jaxpr(b, nz, [False] * n_out)[2])]
  staged = [_jvp_jaxpr(b, nz, out_nz) for b in branches]
  jaxprs, consts = _join_consts([s[0] for s in staged], [s[1] for s in staged])
  dots = [t for t, z in zip(tangents[1:], nz) if z]
  outs = cond_p.bind(index, *consts, *ops, *dots, branches=tuple(jaxprs))
  tans = iter(outs[n_out:])
  return outs[:n_out], [next(tans) if z else ad.Zero(a.to_tangent_aval())
                        for z, a in zip(out_nz, branches[0].out_avals)]


def _bcast(pred, aval):
  """``pred`` (shape a prefix of ``aval``'s) broadcast to ``aval``'s shape."""
  pa = get_aval(pred)
  if pa.shape == aval.shape:
    return pred
  return _sh.broadcast_in_dim(pred, aval.shape, tuple(range(pa.ndim)))


def _io_effects(jaxpr):
  from nbjax.callback import IOEffect, OrderedIOEffect
  return [e for e in jaxpr_effects(jaxpr) if e is IOEffect or e is OrderedIOEffect]


def _cond_batch(axis_data, vals, dims, *, branches):
  index, *ops = vals
  idim, *odims = dims
  size, name = axis_data.size, axis_data.name
  n_out = len(branches[0].out_avals)
  if any(_io_effects(b) for b in branches):  # (JAX's: whether the index is batched or not)
    raise NotImplementedError("IO effect not supported in vmap-of-cond.")
  if idim is not not_mapped:
    # a batched index: every branch runs on every lane, the index selects (as JAX)
    index = batching.bdim_at_front(index, idim, size)
    ops = [batching.bdim_at_front(x, d, size) for x, d in zip(ops, odims)]
    n = len(branches)
    index = _ew.select_n(_ew.bitwise_or(_ew.lt(index, np.int32(0)), _ew.ge(index, np.int32(n))),
                         index, _ew.full_like(index, n - 1))
    outs = []
    for i, b in enumerate(branches):
      bb, consts, _ = _batch_jaxpr(b, size, [0] * len(ops), [0] * n_out, name)
      taken = _ew.eq(index, np.int32(i))
      # inputs of the lanes a branch does not take carry no gradient (NaNs stay out)
      ops_i = [_ew.select_n(_bcast(taken, get_aval(x)), _ew.stop_gradient(x), x) for x in ops]
      outs.append(_call(bb, *consts, *ops_i))
    res = [_ew.select_n(_bcast(index, get_aval(cases[0])), *cases) for cases in zip(*outs)]
    return res, [0] * n_out
  in_dims = [None if d is not_mapped else 0 for d in odims]
  ops = [x if d is not_mapped else batching.moveaxis(x, d, 0) for x, d in zip(ops, odims)]
  out_bat = [False] * n_out
  for b in branches:
    out_bat = [x or y for x, y in zip(out_bat, _batched(b, size, in_dims, name))]
  out_dims = [0 if x else None for x in out_bat]
  staged = [_batch_jaxpr(b, size, in_dims, out_dims, name) for b in branches]
  jaxprs, consts = _join_consts([s[0] for s in staged], [s[1] for s in staged])
  outs = cond_p.bind(index, *consts, *ops, branches=tuple(jaxprs))
  return outs, [not_mapped if d is None else d for d in out_dims]


_cond_batch.wants_axis_data = True


def _residual_slots(splits, read_operands):
  """The residuals of branches split by ``partial_eval_jaxpr(_custom)``, in slots shared
  across branches by type: ``(slot avals, per branch each residual's slot)``; with
  ``read_operands``, a residual that is a known operand ``p`` is ``-1 - p`` (read, not
  saved)."""
  slots, assign = [], []
  for jk, _, _, nres in splits:
    used, idxs = set(), []
    kpos = {v: p for p, v in enumerate(jk.jaxpr.invars)} if read_operands else {}
    for v in jk.jaxpr.outvars[len(jk.jaxpr.outvars) - nres:]:
      if v in kpos:
        idxs.append(-1 - kpos[v])
        continue
      k = next((k for k, a in enumerate(slots) if k not in used and _typematch(a, v.aval)),
               None)
      if k is None:
        k = len(slots)
        slots.append(v.aval)
      used.add(k)
      idxs.append(k)
    assign.append(idxs)
  return slots, assign


def _split_branches(splits, slots, assign, read_operands):
  """Per branch, the known half returning its outputs then every slot (zeros where it
  saves none), and the other half taking the slots (then the known operands, with
  ``read_operands``) before its own remaining inputs."""
  known, other = [], []
  for (jk, ju, _, nres), idxs in zip(splits, assign):
    j = jk.jaxpr
    n_out = len(j.outvars) - nres
    res = {k: v for k, v in zip(idxs, j.outvars[n_out:]) if k >= 0}
    eqns, outs = list(j.eqns), list(j.outvars[:n_out])
    for k, a in enumerate(slots):
      if k in res:
        outs.append(res[k])
      else:
        zs, z = _zeros_eqns(a)
        eqns += zs
        outs.append(z)
    known.append(ClosedJaxpr(j.replace(eqns=eqns, outvars=outs), jk.consts))
    uj = ju.jaxpr
    r = dict(zip(idxs, uj.invars[:nres]))
    binders = [r[k] if k in r else Var(a) for k, a in enumerate(slots)]
    if read_operands:
      binders += [r[-1 - p] if -1 - p in r else Var(v.aval) for p, v in enumerate(j.invars)]
    other.append(ClosedJaxpr(uj.replace(invars=binders + uj.invars[nres:]), ju.consts))
  return known, other


def _cond_partial_eval(unknowns, *, branches, custom=False, saveable=None):
  """Known branches compute the known outputs and their residuals (slots shared across
  branches by type, zeros where a branch has none); unknown branches take the index (a
  residual of the enclosing split), the residual slots and the unknown operands.
  ``custom`` (``partial_eval_custom``, under a ``checkpoint`` policy ``saveable``): the
  branches split by ``partial_eval_jaxpr_custom``, and the unknown branches also take the
  known operands, so a residual that is one is read, not saved (JAX's
  ``_cond_partial_eval_custom``)."""
  idx_uk, *ops_uk = unknowns
  if idx_uk:
    return None
  split = (functools.partial(pe.partial_eval_jaxpr_custom, saveable=saveable) if custom
           else pe.partial_eval_jaxpr)
  n_out = len(branches[0].out_avals)
  out_uk = [False] * n_out
  for b in branches:
    out_uk = [x or y for x, y in zip(out_uk, pe.partial_eval_jaxpr(b, ops_uk)[2])]
  splits = [split(b, ops_uk, instantiate=out_uk) for b in branches]
  slots, assign = _residual_slots(splits, custom)
  known, unknown = _split_branches(splits, slots, assign, custom)
  kp, up = dict(branches=tuple(known)), dict(branches=tuple(unknown))
  if custom:
    return kp, up, out_uk, len(slots), None, lambda res, kins, uins: [kins[0], *res, *kins[1:],
                                                                       *uins], None
  return kp, up, out_uk, len(slots), None, lambda res, kins, uins: [kins[0], *res, *uins], None


def _cond_recompute_custom(saveable, eqn, needed):
  """A known cond whose ``needed`` outputs a ``checkpoint`` recomputes, split under the
  policy ``saveable`` branch by branch (as ``pjit._jit_recompute_custom``): the known cond
  also returns the residuals its branches save (slots shared by type, zeros where a branch
  has none); the recomputing cond takes the index, the slots and the operands."""
  branches = eqn.params["branches"]
  n_ops = len(eqn.invars) - 1
  splits = [pe.partial_eval_jaxpr_custom(b, [False] * n_ops, saveable, ensure_out=needed)
            for b in branches]
  slots, assign = _residual_slots(splits, True)
  if not slots:
    return None  # nothing saved: the whole cond is recomputed
  known, recompute = _split_branches(splits, slots, assign, True)
  res_vars = [Var(a) for a in slots]
  known_eqn = eqn.replace(outvars=list(eqn.outvars) + res_vars,
                          params=dict(eqn.params, branches=tuple(known)))
  recompute_eqn = eqn.replace(
      invars=[eqn.invars[0], *res_vars, *eqn.invars[1:]],
      outvars=[v for v, n in zip(eqn.outvars, needed) if n],
      params=dict(eqn.params, branches=tuple(recompute)))
  return known_eqn, recompute_eqn, res_vars


def _cond_transpose(cts, index, *args, branches):
  undef = [ad.is_undefined_primal(x) for x in args]
  if all(type(c) is ad.Zero for c in cts):
    return [None] + [ad.Zero(x.aval) if u else None for x, u in zip(args, undef)]
  if not isinstance(index, Tracer):  # a known branch: transpose it alone
    i, n = int(registry.coerce(index)[0]), len(branches)
    b = branches[i if 0 <= i < n else n - 1]
    return [None, *ad.backward_pass(b.jaxpr, b.consts, list(args), list(cts))]
  res = [x for x, u in zip(args, undef) if not u]
  ct_nz = [type(c) is not ad.Zero for c in cts]
  cts_nz = [c for c, z in zip(cts, ct_nz) if z]
  out_avals = branches[0].out_avals
  avals = [get_aval(x) for x in res] + [get_aval(c) for c in cts_nz]

  def transposed(b):
    def fun(*ins):
      r, c = iter(ins[:len(res)]), iter(ins[len(res):])
      full = [ad.UndefinedPrimal(x.aval) if u else next(r) for x, u in zip(args, undef)]
      cfull = [next(c) if z else ad.Zero(a.to_tangent_aval()) for z, a in zip(ct_nz, out_avals)]
      outs = ad.backward_pass(b.jaxpr, b.consts, full, cfull)
      return [ad.instantiate_zeros(o) for o, u in zip(outs, undef) if u]
    return _stage(fun, avals, "transpose")

  staged = [transposed(b) for b in branches]
  jaxprs, consts = _join_consts([s[0] for s in staged], [s[1] for s in staged])
  outs = iter(cond_p.bind(index, *consts, *res, *cts_nz, branches=tuple(jaxprs)))
  return [None] + [next(outs) if u else None for u in undef]


def _cond_dce(used_outs, eqn):
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  branches = eqn.params["branches"]
  used = [False] * (len(eqn.invars) - 1)
  for b in branches:
    used = [x or y for x, y in zip(used, pe.dce_jaxpr(b.jaxpr, used_outs)[1])]
  new = tuple(ClosedJaxpr(pe.dce_jaxpr(b.jaxpr, used_outs, instantiate=used)[0], b.consts)
              for b in branches)
  new_eqn = eqn.replace(
      invars=[eqn.invars[0]] + [x for x, u in zip(eqn.invars[1:], used) if u],
      outvars=[v for v, u in zip(eqn.outvars, used_outs) if u],
      params=dict(eqn.params, branches=new))
  return [True] * len(new_eqn.invars), new_eqn


def _consts_ir(closed):
  return [mlir.ir_constant(np.asarray(c, v.aval.dtype))
          for c, v in zip(closed.consts, closed.jaxpr.constvars)]


def _constant_int(v):
  """The value of a scalar integer computed from constants only (``stablehlo.constant``,
  ``clamp`` of those: a switch on a static index), else None."""
  op = getattr(v.owner, "operation", v.owner)
  if not isinstance(op, ir.Operation):
    return None
  if op.name == "stablehlo.constant":
    a = np.asarray(ir.DenseElementsAttr(op.attributes["value"]))
    return int(a.reshape(-1)[0]) if a.size == 1 and a.dtype.kind in "iu" else None
  if op.name == "stablehlo.clamp":
    lo, x, hi = (_constant_int(o) for o in op.operands)
    return None if None in (lo, x, hi) else min(max(x, lo), hi)
  return None


def _cond_lowering(ctx, index, *args, branches):
  mctx = ctx.module_context
  i = _constant_int(index)
  if i is not None:  # only the branch taken (lax.platform_dependent's, as JAX lowers it)
    b = branches[i if 0 <= i < len(branches) else len(branches) - 1]  # (XLA's case)
    return mlir.jaxpr_subcomp(mctx, b.jaxpr, _consts_ir(b), list(args))
  types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
  outer = mctx.token
  tok = mctx.get_token() if mlir.has_effects(*branches) else None  # each branch returns it
  case = hlo.CaseOp(types + [mlir.token_type()] * (tok is not None), index, len(branches))
  for i, b in enumerate(branches):
    block = case.regions[i].blocks.append()
    mctx.token = tok
    with ir.InsertionPoint(block):
      outs = mlir.jaxpr_subcomp(mctx, b.jaxpr, _consts_ir(b), list(args))
      hlo.return_(outs + [mctx.token] * (tok is not None))
  outs = list(case.results)
  mctx.token = outs.pop() if tok is not None else outer
  return outs

# ======================================================================= while


while_p = Primitive("while")
while_p.multiple_results = True


@api_boundary
def while_loop(cond_fun, body_fun, init_val):
  """``while cond_fun(val): val = body_fun(val)``, staged as one loop; the carry keeps one
  pytree of types. Forward-mode differentiable; reverse mode needs ``scan`` (or
  ``fori_loop`` with static bounds)."""
  if not (callable(body_fun) and callable(cond_fun)):
    raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
  if _jit_disabled():
    try:
      val = _tree_map(_asarray, init_val)
      while cond_fun(val):
        val = _tree_map(_asarray, body_fun(val))
      return val
    except core.ConcretizationTypeError:
      pass  # under a transformation: the primitive
  return _while_loop(cond_fun, body_fun, init_val, (body_fun, cond_fun), "while")


def _while_loop(cond_fun, body_fun, init_val, cache_funs, tag):
  flat, in_tree = tree_flatten(init_val)
  call_tree = tree_flatten((init_val,))[1]

  def build(avals):
    cbox, bbox = [], []
    user = tag != "fori_while"  # (fori_loop's own functions: no message names them)
    cj, cc = _stage(_flat_fun(cond_fun, call_tree, cbox), avals, "cond_fun",
                    ("while_cond", cond_fun, call_tree) if user else None)
    if cbox[0][0].num_leaves != 1 or cbox[0][0].node is not None:
      raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {cbox[0][0]}.")
    pa = cj.out_avals[0]
    if pa.shape != () or pa.dtype != np.bool_:
      raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                      f"{cj.out_avals!r}.")
    bj, bc = _stage(_flat_fun(body_fun, call_tree, bbox), avals, "body_fun",
                    ("while_body", body_fun, call_tree) if user else None)
    return cj, cc, bj, bc, bbox[0][0]

  def build_checked():
    avals = [_abstractify(x, "while_loop") for x in flat]
    cj, cc, bj, bc, out_tree = build(avals)
    promote = None
    if out_tree == in_tree and not all(_map(_typematch, avals, bj.out_avals)):
      new = [dtypes.result_type(_weak_example(a), o.dtype) if a.weak_type and not
             _typematch(a, o) else None for a, o in zip(avals, bj.out_avals)]
      if any(d is not None for d in new):
        promote = new
        avals2 = [a if d is None else ShapedArray(a.shape, d) for a, d in zip(avals, new)]
        cj, cc, bj, bc, out_tree = build(avals2)
        _check_carry_type("while_loop body", body_fun, in_tree, avals2, out_tree, bj.out_avals)
        return cj, cc, bj, bc, promote, _while_forwards(cj, len(cc), bj, len(bc))
    _check_carry_type("while_loop body", body_fun, in_tree, avals, out_tree, bj.out_avals)
    return cj, cc, bj, bc, promote, _while_forwards(cj, len(cc), bj, len(bc))

  cj, cc, bj, bc, promote, fwd = _cached(cache_funs, (tag, in_tree, _sig(flat, "while_loop")),
                                         lambda: _consts_pair(build_checked()))[0]
  if promote is not None:
    flat = [x if d is None else _ew.convert_element_type(x, d) for x, d in zip(flat, promote)]
  outs = while_p.bind(*cc, *bc, *flat, cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=len(cc),
                      body_nconsts=len(bc))
  if fwd:  # a carry the body passes through and cond_fun ignores is the init value itself
    outs = [_forwarded(flat[i], o) if i in fwd else o for i, o in enumerate(outs)]
  return tree_unflatten(in_tree, outs)


def _while_forwards(cj, ncc, bj, nbc):
  """The carries that the body returns unchanged and the condition never reads (as JAX,
  ``while_loop`` returns those init values themselves)."""
  b, c = bj.jaxpr, cj.jaxpr
  fwd = [i for i in range(len(b.outvars)) if b.outvars[i] is b.invars[nbc + i]]
  if not fwd:
    return frozenset()
  used = {id(v) for e in c.eqns for v in e.invars} | {id(v) for v in c.outvars}
  return frozenset(i for i in fwd if id(c.invars[ncc + i]) not in used)


def _consts_pair(r):
  """``(r, consts)`` for ``_cached`` (which reads the consts at index 1)."""
  return r, [c for c in (*r[1], *r[3])]


def _weak_example(aval):
  """A Python scalar standing for a weakly typed aval in dtype promotion."""
  k = np.dtype(aval.dtype).kind
  return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(k, 0.0)


def _fori_cond(loop_carry):
  i, upper, _ = loop_carry
  return _ew.lt(i, upper)


def _fori_while_body(body_fun):
  def body(loop_carry):  # (the name shows in carry type errors, as JAX's)
    i, upper, x = loop_carry
    return _ew.add(i, _ew._const(i, 1)), upper, body_fun(i, x)
  return body


def _fori_scan_body(body_fun):
  def body(loop_carry, _):
    i, x = loop_carry
    # ``i + 1``: a Python int stays one under ``disable_jit`` (as JAX's counter)
    return (i + 1, body_fun(i, x)), None
  return body


def _is_concrete(x):
  return not isinstance(x, Tracer) or x.to_concrete_value() is not None


@api_boundary
def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
  """``for i in range(lower, upper): val = body_fun(i, val)``. With bounds known at trace
  time it is a ``scan`` (reverse-mode differentiable); otherwise a ``while_loop``."""
  if not callable(body_fun):
    raise TypeError("lax.fori_loop: body_fun argument should be callable.")
  ld, ud = get_aval(lower).dtype, get_aval(upper).dtype
  if ld == ud:
    dtype = ld
  else:
    dtype = None
    if ld.kind == "i" and ud.kind == "i":
      lw, uw = dtypes.is_weakly_typed(lower), dtypes.is_weakly_typed(upper)
      if lw and not uw:
        dtype = ud
      elif uw and not lw:
        dtype = ld
    if dtype is None:
      raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                      f"{ld.name} and {ud.name}")
  if _is_concrete(lower) and _is_concrete(upper):
    try:
      lo, hi = int(core.concrete_or_error(None, lower)), int(core.concrete_or_error(None, upper))
      use_scan = True
    except (TypeError, ValueError):
      use_scan = False
  else:
    use_scan = False
  if use_scan:
    if unroll is None:
      unroll = False
    if _jit_disabled() and hi <= lo:
      return init_val
    (_, result), _ = _scan(_fori_scan_body(body_fun), (lo, init_val), None, max(hi - lo, 0),
                           False, unroll, (body_fun,), "fori")
    return result
  if unroll is not None and unroll is not False and unroll != 1:
    raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are statically "
                     "known.")
  if ld != dtype:
    lower = _ew.convert_element_type(lower, dtype)
  if ud != dtype:
    upper = _ew.convert_element_type(upper, dtype)
  _, _, result = _while_loop(_fori_cond, _fori_while_body(body_fun), (lower, upper, init_val),
                             (body_fun,), "fori_while")
  return result


# -- rules


def _while_abstract_eval(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  cc, bc, carry = _split(avals, [cond_nconsts, body_nconsts])
  cin, bin_ = cond_jaxpr.in_avals, body_jaxpr.in_avals
  if len(cin) != len(cc) + len(carry) or not all(_map(_typematch, cin, [*cc, *carry])):
    raise TypeError(f"while: cond_jaxpr takes ({_avals_str(cin)}) but is given "
                    f"({_avals_str([*cc, *carry])})")
  if len(bin_) != len(bc) + len(carry) or not all(_map(_typematch, bin_, [*bc, *carry])):
    raise TypeError(f"while: body_jaxpr takes ({_avals_str(bin_)}) but is given "
                    f"({_avals_str([*bc, *carry])})")
  bout = body_jaxpr.out_avals
  if len(bout) != len(carry) or not all(_map(_typematch, bout, carry)):
    raise TypeError(f"while: body_jaxpr returns ({_avals_str(bout)}) for a carry of "
                    f"({_avals_str(carry)})")
  (pa,) = cond_jaxpr.out_avals
  if pa.dtype != np.bool_ or any(c.shape[:pa.ndim] != pa.shape for c in carry):
    raise TypeError(f"while: cond_jaxpr must return a bool scalar (or a predicate batched "
                    f"along the carry's leading axes), got {pa.str_short()}")
  return list(bout)


def _while_python(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  """Reference: the loop in Python, each iteration binding the jaxprs' equations."""
  cc, bc, carry = _split(args, [cond_nconsts, body_nconsts])
  while True:
    pred = _call(cond_jaxpr, *cc, *carry)[0]
    if not _pred_any(pred):
      return list(carry)
    new = _call(body_jaxpr, *bc, *carry)
    carry = new if not np.ndim(pred) else _select_rows(pred, new, carry)


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  nz = [_nonzero(t) for t in tangents]
  cc_nz, bc_nz, init_nz = _split(nz, [cond_nconsts, body_nconsts])
  nk = len(init_nz)
  carry_nz = _fixpoint([z and _inexact(a) for z, a in zip(init_nz, body_jaxpr.out_avals)],
                       lambda c: _jvp_jaxpr(body_jaxpr, bc_nz + c, c)[2])
  bj, bconsts, _ = _jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
  # bj: [new consts, bc, carry, bc_dot, carry_dot] -> [new consts, bc, bc_dot, carry, carry_dot]
  m, nb, nbd, nkd = len(bconsts), body_nconsts, sum(bc_nz), sum(carry_nz)
  order = [*range(m + nb), *range(m + nb + nk, m + nb + nk + nbd), *range(m + nb, m + nb + nk),
           *range(m + nb + nk + nbd, m + nb + nk + nbd + nkd)]
  bj = _permute(bj, order)
  cc, bc, init = _split(primals, [cond_nconsts, body_nconsts])
  _, bc_t, init_t = _split(tangents, [cond_nconsts, body_nconsts])
  bc_dot = [t for t, z in zip(bc_t, bc_nz) if z]
  init_dot = [ad.instantiate_zeros(t) for t, z in zip(init_t, carry_nz) if z]
  init_dot = [_ew.convert_element_type(t, a.dtype) if get_aval(t).dtype != a.dtype else t
              for t, a in zip(init_dot, [a for a, z in zip(body_jaxpr.out_avals, carry_nz) if z])]
  cj = cond_jaxpr.jaxpr
  cjx = ClosedJaxpr(cj.replace(invars=cj.invars + [Var(get_aval(t)) for t in init_dot]),
                    cond_jaxpr.consts)
  outs = while_p.bind(*cc, *bconsts, *bc, *bc_dot, *init, *init_dot, cond_jaxpr=cjx,
                      body_jaxpr=bj, cond_nconsts=cond_nconsts,
                      body_nconsts=m + nb + nbd)
  carry_out, dots = outs[:nk], iter(outs[nk:])
  return carry_out, [next(dots) if z else ad.Zero(a.to_tangent_aval())
                     for z, a in zip(carry_nz, body_jaxpr.out_avals)]


def _while_batch(axis_data, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  size, name = axis_data.size, axis_data.name
  dims = [None if d is not_mapped else d for d in dims]
  cc, bc, init = _split(vals, [cond_nconsts, body_nconsts])
  cc_d, bc_d, init_d = _split(dims, [cond_nconsts, body_nconsts])
  nk = len(init)
  cc_b = [None if d is None else 0 for d in cc_d]
  bc_b = [None if d is None else 0 for d in bc_d]
  cc = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(cc, cc_d)]
  bc = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(bc, bc_d)]
  carry_bat = _fixpoint([d is not None for d in init_d], lambda c: _batched(
      body_jaxpr, size, bc_b + [0 if b else None for b in c], name))
  pred_bat = _batched(cond_jaxpr, size, cc_b + [0 if b else None for b in carry_bat], name)[0]
  cond_rank = cond_jaxpr.out_avals[0].ndim
  if pred_bat:  # the predicate differs per lane: every lane runs until all are done
    from nbjax.callback import IOEffect
    if any(IOEffect in jaxpr_effects(j) for j in (body_jaxpr, cond_jaxpr)):
      raise Exception("Unordered IO effects not supported in while_loop with batched "
                      "predicate")
    carry_dims = [0] * nk
    pred_dim = [0]
  else:
    carry_dims = [cond_rank if b else None for b in carry_bat]
    pred_dim = [None]
  bj, bconsts, _ = _batch_jaxpr(body_jaxpr, size, bc_b + carry_dims, carry_dims, name)
  cj, cconsts, _ = _batch_jaxpr(cond_jaxpr, size, cc_b + carry_dims, pred_dim, name)
  new_init = [x if (d is None and w is None) else batching.matchaxis(d, w, size, x)
              for x, d, w in zip(init, init_d, carry_dims)]
  outs = while_p.bind(*cconsts, *cc, *bconsts, *bc, *new_init, cond_jaxpr=cj, body_jaxpr=bj,
                      cond_nconsts=len(cconsts) + cond_nconsts,
                      body_nconsts=len(bconsts) + body_nconsts)
  return outs, [not_mapped if d is None else d for d in carry_dims]


_while_batch.wants_axis_data = True


def _while_partial_eval(unknowns, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  """The known carries come from a loop over the known part alone; the unknown ones from
  the whole loop, staged (so ``linearize`` works, and transposing it gives JAX's error)."""
  params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                body_nconsts=body_nconsts)
  cc_uk, bc_uk, init_uk = _split(unknowns, [cond_nconsts, body_nconsts])
  nk = len(init_uk)
  carry_uk = _fixpoint(list(init_uk), lambda c: pe.partial_eval_jaxpr(
      body_jaxpr, bc_uk + c, instantiate=c)[2])
  if pe.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk)[2][0] or all(carry_uk):
    return None
  ck = _known_part(cond_jaxpr, cc_uk + carry_uk, 1, False)
  bk = _known_part(body_jaxpr, bc_uk + carry_uk, nk - sum(carry_uk), carry_uk)
  known_pos = [i for i, u in enumerate(cc_uk + bc_uk + carry_uk) if not u]
  kp = dict(cond_jaxpr=ck, body_jaxpr=bk, cond_nconsts=len(cc_uk) - sum(cc_uk),
            body_nconsts=len(bc_uk) - sum(bc_uk))
  kin_pos = [i for i, u in enumerate(unknowns) if not u]
  pick = [kin_pos.index(i) for i in known_pos]

  def whole(res, kins, uins):
    return core.merge_lists(unknowns, kins, uins)

  if not any(carry_uk):
    return kp, None, [False] * nk, 0, lambda kins: [kins[i] for i in pick], None, None
  return kp, params, carry_uk, 0, lambda kins: [kins[i] for i in pick], whole, carry_uk


def _known_part(closed, unknowns, n_out, instantiate):
  """The jaxpr computing ``closed``'s first ``n_out`` known outputs (the others unknown as
  ``instantiate`` says) from its known inputs."""
  jk = pe.partial_eval_jaxpr(closed, unknowns, instantiate)[0].jaxpr
  j, _ = pe.dce_jaxpr(jk.replace(outvars=jk.outvars[:n_out]), True, instantiate=True)
  return ClosedJaxpr(j, closed.consts)


def _while_transpose_error(*_, **__):
  raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                   "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using "
                   "fori_loop with static start/stop.")


def _while_dce(used_outs, eqn):
  p = eqn.params
  nc, nb = p["cond_nconsts"], p["body_nconsts"]
  cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  cond_used = pe.dce_jaxpr(cj.jaxpr, [True])[1]
  carry = _fixpoint([u or c for u, c in zip(used_outs, cond_used[nc:])],
                    lambda c: pe.dce_jaxpr(bj.jaxpr, c)[1][nb:])
  new_b, b_used = pe.dce_jaxpr(bj.jaxpr, carry, instantiate=[False] * nb + carry)
  new_c, c_used = pe.dce_jaxpr(cj.jaxpr, [True], instantiate=[False] * nc + carry)
  cu, bu = c_used[:nc], b_used[:nb]
  used_in = [*cu, *bu, *carry]
  new_eqn = eqn.replace(
      invars=[x for x, u in zip(eqn.invars, used_in) if u],
      outvars=[v for v, u in zip(eqn.outvars, carry) if u],
      params=dict(p, cond_jaxpr=ClosedJaxpr(new_c, cj.consts), body_jaxpr=ClosedJaxpr(
          new_b, bj.consts), cond_nconsts=sum(cu), body_nconsts=sum(bu)))
  return [True] * len(new_eqn.invars), new_eqn


def _reduce_or_ir(x, aval):
  i1 = ir.IntegerType.get_signless(1)
  red = hlo.ReduceOp([ir.RankedTensorType.get([], i1)], [x],
                     [mlir.ir_constant(np.array(False))], mlir.i64_array(range(aval.ndim)))
  s = ir.RankedTensorType.get([], i1)
  blk = red.regions[0].blocks.append(s, s)
  with ir.InsertionPoint(blk):
    hlo.return_([hlo.or_(*blk.arguments)])
  return red.result


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  mctx = ctx.module_context
  types = [mlir.aval_to_ir_type(a) for a in ctx.avals_in]
  nin = len(types)
  tok = mlir.has_effects(cond_jaxpr, body_jaxpr)  # the effect token rides in the carry, last
  op = hlo.WhileOp(types + [mlir.token_type()] * tok,
                   list(args) + ([mctx.get_token()] if tok else []))
  pa = cond_jaxpr.out_avals[0]
  carry_avals = ctx.avals_in[cond_nconsts + body_nconsts:]

  def pred_of(vals):
    cc, _, carry = _split(vals[:nin], [cond_nconsts, body_nconsts])
    p = mlir.jaxpr_subcomp(mctx, cond_jaxpr.jaxpr, _consts_ir(cond_jaxpr), [*cc, *carry])[0]
    return p

  cblock = op.regions[0].blocks.append(*types, *[mlir.token_type()] * tok)
  outer = mctx.token
  mctx.token = cblock.arguments[nin] if tok else None
  with ir.InsertionPoint(cblock):
    p = pred_of(list(cblock.arguments))
    hlo.return_([_reduce_or_ir(p, pa) if pa.ndim else p])
  bblock = op.regions[1].blocks.append(*types, *[mlir.token_type()] * tok)
  mctx.token = bblock.arguments[nin] if tok else None
  with ir.InsertionPoint(bblock):
    vals = list(bblock.arguments)
    cc, bc, carry = _split(vals[:nin], [cond_nconsts, body_nconsts])
    new = mlir.jaxpr_subcomp(mctx, body_jaxpr.jaxpr, _consts_ir(body_jaxpr), [*bc, *carry])
    if pa.ndim:  # batched predicate: finished lanes keep their carry
      p = pred_of(vals)
      new = [hlo.select(mlir.broadcast_in_dim(ctx, p, a.update(dtype=np.bool_),
                                              broadcast_dimensions=range(pa.ndim)), n, o)
             if a.ndim else hlo.select(p, n, o) for n, o, a in zip(new, carry, carry_avals)]
    hlo.return_([*cc, *bc, *new] + [mctx.token] * tok)
  outs = list(op.results)
  mctx.token = outs.pop() if tok else outer
  return outs[cond_nconsts + body_nconsts:]

# ======================================================================= scan


scan_p = Primitive("scan")
scan_p.multiple_results = True


def _scan_typecheck_params(*, reverse, length, num_consts, num_carry, jaxpr, unroll, **_):
  tc = functools.partial(typecheck_param, "scan")
  tc(reverse, "reverse", "bool", type(reverse) is bool)
  tc(num_consts, "num_consts", "non-negative int", type(num_consts) is int and num_consts >= 0)
  tc(num_carry, "num_carry", "non-negative int", type(num_carry) is int and num_carry >= 0)
  tc(jaxpr, "jaxpr", "ClosedJaxpr", type(jaxpr) is ClosedJaxpr)
  tc(unroll, "unroll", "non-negative int", type(unroll) is int and unroll >= 0)
  tc(length, "length", "non-negative int", length >= 0)


scan_p.typecheck_params = _scan_typecheck_params


def _infer_length(xs_flat, length):
  try:
    lengths = [x.shape[0] for x in xs_flat]
  except AttributeError:  # (a 0-d array raises IndexError, as in JAX)
    bad = [x for x in xs_flat if not hasattr(x, "shape")]
    raise ValueError("scan got value with no leading axis to scan over: "
                     f"{', '.join(str(x) for x in bad)}.") from None
  if length is not None:
    try:
      length = int(core.concrete_or_error(None, length))
    except core.ConcretizationTypeError:
      raise core.ConcretizationTypeError(
          length, "The `length` argument to `scan` expects a concrete `int` value. For "
          "scan-like iteration with a dynamic length, use `while_loop` or `fori_loop`.") from None
    if not all(length == n for n in lengths):
      raise ValueError(f"scan got `length` argument of {length} which disagrees with leading "
                       f"axis sizes {lengths}.")
    return length
  if len(set(lengths)) > 1:
    raise ValueError("scan got values with different leading axis sizes: "
                     f"{', '.join(str(n) for n in lengths)}.")
  if not lengths:
    raise ValueError("scan got no values to scan over and `length` not provided.")
  return lengths[0]


@api_boundary
def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
  """Loop ``f(carry, x) -> (carry, y)`` over the leading axis of ``xs`` (``length`` steps when
  ``xs`` is None), returning the final carry and the stacked ``y``s: JAX's ``lax.scan``.
  ``reverse`` runs from the end; ``unroll`` steps run per loop iteration.
  ``_split_transpose`` (an experimental JAX flag about how the transpose is staged) is
  accepted and ignored: it does not change any value."""
  if not callable(f):
    raise TypeError("lax.scan: f argument should be a callable.")
  return _scan(f, init, xs, length, reverse, unroll, (f,), "scan")


def _scan(f, init, xs, length, reverse, unroll, cache_funs, tag):
  init_flat, init_tree = tree_flatten(init)
  xs_flat, xs_tree = tree_flatten(xs)
  length = _infer_length(xs_flat, length)
  if _jit_disabled():
    return _scan_python_api(f, init, xs_flat, xs_tree, length, reverse)
  in_tree = treedef_tuple([init_tree, xs_tree])
  nk = len(init_flat)

  def build(carry_avals):
    box = []
    x_avals = [_abstractify(x, "scan") for x in xs_flat]
    if core.sharding_rule_hook is not None and any(
        getattr(a, "_sh", None) is not None and a._sh.spec and a._sh.spec[0] is not None
        for a in x_avals):  # (Explicit mesh axes: JAX's error)
      raise ValueError("0th dimension of all xs should be replicated. Got "
                       f"{', '.join(str(a.sharding.spec) for a in x_avals)}")
    x_avals = [a.update(shape=a.shape[1:]) for a in x_avals]

    def body(carry, x):
      out = f(carry, x)
      if not isinstance(out, (tuple, list)) or len(out) != 2:
        shown = _tree_map(lambda v: v.aval if isinstance(v, Tracer) else get_aval(v), out)
        raise TypeError(f"scan body output must be a pair, got {shown}.")
      return out

    closed, consts = _stage(_flat_fun(lambda c, x: body(c, x), in_tree, box),
                            [*carry_avals, *x_avals], getattr(f, "__name__", "scan"),
                            ("fori_loop", cache_funs[0], init_tree) if tag == "fori" else
                            ("scan", f, in_tree, box))
    out_tree = box[0][0]
    carry_tree, ys_tree = out_tree.kids
    return closed, consts, carry_tree, ys_tree

  def build_checked():
    init_avals = [_abstractify(x, "scan") for x in init_flat]
    closed, consts, carry_tree, ys_tree = build(init_avals)
    nkc = carry_tree.num_leaves
    outs = closed.out_avals
    promote = None
    if carry_tree == init_tree and not all(_map(_typematch, init_avals, outs[:nkc])):
      new = [dtypes.result_type(_weak_example(a), o.dtype) if a.weak_type and not
             _typematch(a, o) else None for a, o in zip(init_avals, outs[:nkc])]
      if any(d is not None for d in new):
        promote = new
        avals2 = [a if d is None else ShapedArray(a.shape, d) for a, d in zip(init_avals, new)]
        closed, consts, carry_tree, ys_tree = build(avals2)
        _check_carry_type("scan body", f, init_tree, avals2, carry_tree,
                          closed.out_avals[:carry_tree.num_leaves])
        return (*_scan_forwarding(closed, consts, nk), ys_tree, promote)
    _check_carry_type("scan body", f, init_tree, init_avals, carry_tree, outs[:nkc])
    return (*_scan_forwarding(closed, consts, nk), ys_tree, promote)

  if isinstance(unroll, bool):
    unroll = max(length, 1) if unroll else 1
  unroll = int(core.concrete_or_error(None, unroll, "The `unroll` argument to `scan` expects "
                                      "a concrete `int` or `bool` value."))
  if unroll < 0:
    raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
  refs = any(type(x) is core.Ref or pe._is_ref(x) for x in init_flat)
  if refs:  # JAX's errors for a mutable array reference passed twice, before tracing
    pe.check_ref_args(pe.DebugInfo(tag, f, (init, xs)), init_flat)
  closed, consts, fwd, ext_fwd, ys_tree, promote = _cached(
      cache_funs, (tag, in_tree, _sig(init_flat, "scan"), _sig(xs_flat, "scan")),
      build_checked)
  if refs and any(pe._is_ref(x) for x in consts):  # (or closed over and passed)
    pe.check_ref_args(pe.DebugInfo(tag, f, (init, xs)), init_flat, consts)
  if promote is not None:
    init_flat = [x if d is None else _ew.convert_element_type(x, d)
                 for x, d in zip(init_flat, promote)]
  if not fwd and ext_fwd is None:
    outs = scan_p.bind(*consts, *init_flat, *xs_flat, jaxpr=closed, length=length,
                       reverse=bool(reverse),
                       unroll=unroll, num_consts=len(consts), num_carry=nk)
    return tree_unflatten(init_tree, outs[:nk]), tree_unflatten(ys_tree, outs[nk:])
  # as JAX: a carry the body passes through is a const (the result is the init value itself),
  # a ys that is an xs is that xs
  moved = [init_flat[i] for i in fwd]
  rest = [x for i, x in enumerate(init_flat) if i not in fwd]
  nc = len(consts) + len(moved)
  outs = scan_p.bind(*moved, *consts, *rest, *xs_flat, jaxpr=closed, length=length,
                     reverse=bool(reverse),
                     unroll=unroll, num_consts=nc, num_carry=len(rest))
  it = iter(outs)
  carry = [_forwarded(x) if i in fwd else next(it) for i, x in enumerate(init_flat)]
  ys = list(it) if ext_fwd is None else [next(it) if m is None else _forwarded(xs_flat[m])
                                         for m in ext_fwd]
  return tree_unflatten(init_tree, carry), tree_unflatten(ys_tree, ys)


def _forwarded(init, out=None):
  """A loop's output for a carry (or scan output) it passes through: the input itself (JAX
  returns it, so a Python scalar stays one) unless that is a NumPy array, whose later mutation
  must not show in a result (there the loop's own output ``out``, or a copy)."""
  if type(init) in _SCALAR_TYPES or isinstance(init, (Array, Tracer)):
    return init
  return Array(init) if out is None else out


def _scan_forwarding(closed, consts, nk):
  """``(closed, consts, fwd, ext_fwd)``: the scan body with the carries it passes through moved to
  the front as consts (``fwd``, their positions) and the ys that are xs pruned (``ext_fwd``:
  per ys, the xs position it is, or None; None when there are none), as JAX's ``scan``."""
  j, nconsts = closed.jaxpr, len(consts)
  nin = len(j.invars)
  fwd = frozenset(i for i in range(nk) if j.outvars[i] is j.invars[nconsts + i])
  xpos = {id(v): m for m, v in enumerate(j.invars[nconsts + nk:])}
  ext_fwd = [xpos.get(id(v)) for v in j.outvars[nk:]]
  if all(m is None for m in ext_fwd):
    ext_fwd = None
  if not fwd and ext_fwd is None:
    return closed, consts, fwd, ext_fwd
  carry = range(nconsts, nconsts + nk)
  in_order = ([nconsts + i for i in sorted(fwd)] + list(range(nconsts)) +
              [c for c in carry if c - nconsts not in fwd] + list(range(nconsts + nk, nin)))
  out_order = ([i for i in range(nk) if i not in fwd] +
               [nk + k for k, m in enumerate(ext_fwd or ()) if m is None] +
               ([] if ext_fwd is not None else list(range(nk, len(j.outvars)))))
  return _permute(closed, in_order, out_order), consts, fwd, ext_fwd


def _scan_python_api(f, carry, xs_flat, xs_tree, length, reverse):
  """``scan`` under ``disable_jit``: a Python loop calling ``f``, as JAX runs it."""
  if length == 0:
    raise ValueError("zero-length scan is not supported in disable_jit() mode because the "
                     "output type is unknown.")
  ys = []
  for k in (range(length - 1, -1, -1) if reverse else range(length)):
    x = tree_unflatten(xs_tree, [_ix.dynamic_index_in_dim(a, k, 0, keepdims=False)
                                 for a in xs_flat])
    carry, y = f(carry, x)
    ys.append(y)
  if reverse:
    ys = ys[::-1]
  return carry, _tree_map(lambda *y: _sh.concatenate([_sh.expand_dims(_asarray(v), (0,))
                                                      for v in y], 0), *ys)


@api_boundary
def map(f, xs, *, batch_size=None):  # noqa: A001  (lax.map)
  """``stack([f(x) for x in xs])`` as a ``scan``; with ``batch_size``, chunks of that many
  elements go through ``vmap(f)`` per step (the remainder in one more ``vmap``)."""
  if batch_size is None:
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys
  from nbjax import api
  leaves, tree = tree_flatten(xs)
  if not leaves:  # (scan says there is nothing to scan over, as in JAX)
    _, ys = scan(lambda _, x: ((), api.vmap(f)(x)), (), xs)
    return ys
  n = leaves[0].shape[0]
  nb, rem = divmod(n, batch_size) if batch_size else (0, n)
  k = nb * batch_size
  parts = []
  if nb:
    chunks = tree_unflatten(tree, [_sh.reshape(_sh.slice_in_dim(x, 0, k), (nb, batch_size,
                                                                          *x.shape[1:]))
                                   for x in leaves])
    _, ys = scan(lambda _, x: ((), api.vmap(f)(x)), (), chunks)
    parts.append(_tree_map(lambda y: _sh.reshape(y, (k, *y.shape[2:])), ys))
  if rem or not nb:  # (no whole batch: one vmap over the rest, even when that is empty)
    parts.append(api.vmap(f)(tree_unflatten(tree, [_sh.slice_in_dim(x, k, n) for x in leaves])))
  if len(parts) == 1:
    return parts[0]
  return _tree_map(lambda a, b: _sh.concatenate([a, b], 0), *parts)


# -- rules


def _scan_abstract_eval(*avals, jaxpr, num_consts, num_carry, length, reverse, unroll):
  consts, init, xs = _split(avals, [num_consts, num_carry])
  jin = jaxpr.in_avals
  jc, jk, jx = _split(jin, [num_consts, num_carry])
  if len(jin) != len(avals):
    raise TypeError(f"scan: the body takes {len(jin)} inputs but the scan has {len(avals)} "
                    "operands")
  if not all(_map(_typematch, jc, consts)):
    raise TypeError(f"scan jaxpr takes input const types\n{_avals_str(jc)},\ncalled with "
                    f"consts of type\n{_avals_str(consts)}")
  if not all(_map(_typematch, jk, init)):
    raise TypeError(f"scan jaxpr takes input carry types\n{_avals_str(jk)},\ncalled with "
                    f"initial carry of type\n{_avals_str(init)}")
  xm = [a.update(shape=a.shape[1:]) for a in xs]
  if any(a.shape[:1] != (length,) for a in xs) or not all(_map(_typematch, jx, xm)):
    raise TypeError(f"scan jaxpr takes input sequence types\n{_avals_str(jx)},\ncalled with "
                    f"sequence whose items have type\n{_avals_str(xm)} (length {length})")
  outs = jaxpr.out_avals
  if not all(_map(_typematch, outs[:num_carry], jk)):
    raise TypeError(f"scan input carry input and output types mismatch:\n{_avals_str(jk)}\nvs\n"
                    f"{_avals_str(outs[:num_carry])}")
  return [*outs[:num_carry], *(a.update(shape=(length, *a.shape)) for a in outs[num_carry:])]


def _scan_python(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
  """Reference: the loop in Python, each step binding the body's equations."""
  consts, carry, xs = _split(args, [num_consts, num_carry])
  xs = [registry.coerce(x)[0] for x in xs]
  ys = [[] for _ in jaxpr.out_avals[num_carry:]]
  for k in range(length):
    t = length - 1 - k if reverse else k
    outs = _call(jaxpr, *consts, *carry, *[_wrap(np.array(x[t])) for x in xs])
    carry = outs[:num_carry]
    for acc, y in zip(ys, outs[num_carry:]):
      acc.append(registry.coerce(y)[0])
  res = []
  for acc, a in zip(ys, jaxpr.out_avals[num_carry:]):
    if reverse:
      acc = acc[::-1]
    res.append(_wrap(np.stack(acc).astype(a.dtype) if acc else np.zeros((0, *a.shape), a.dtype),
                     a.weak_type))
  return [*carry, *res]


def _row(x, t):
  """``x[t]`` for an int32 ``t`` in range."""
  a = get_aval(x)
  row = _ix.dynamic_slice_p.bind(x, t, *[np.int32(0)] * (a.ndim - 1),
                                 slice_sizes=(1, *a.shape[1:]))
  return _sh.reshape(row, a.shape[1:])


def _set_row(buf, y, t):
  """``buf`` with ``buf[t] = y`` for an int32 ``t`` in range."""
  a = get_aval(buf)
  if get_aval(y).dtype != a.dtype:
    y = _ew.convert_element_type(y, a.dtype)
  return _ix.dynamic_update_slice_p.bind(buf, _sh.reshape(y, (1, *a.shape[1:])), t,
                                         *[np.int32(0)] * (a.ndim - 1))


def _scan_as_while(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
  """The scan as a ``while`` over a counter: each trip runs ``unroll`` steps, reading ``xs``
  with dynamic slices and writing the stacked ``ys`` with dynamic updates; the steps left
  over run after the loop. (Its lowering is this function's jaxpr.)"""
  consts, init, xs = _split(args, [num_consts, num_carry])
  y_avals = jaxpr.out_avals[num_carry:]
  ys0 = [_ew._full((length, *a.shape), 0, a.dtype, False) for a in y_avals]  # (exact dtype)
  unroll = max(1, min(unroll or length, length)) if length else 1
  trips, rem = divmod(length, unroll)

  def step(k, carry, ys):
    if isinstance(k, int):
      t = np.int32(length - 1 - k if reverse else k)
    else:
      t = _ew.sub(np.int32(length - 1), k) if reverse else k
    outs = _call(jaxpr, *consts, *carry, *[_row(x, t) for x in xs])
    carry, y = outs[:num_carry], outs[num_carry:]
    return carry, [_set_row(b, v, t) for b, v in zip(ys, y)]

  def body(state):
    i, carry, ys = state
    for j in range(unroll):
      k = i if unroll == 1 else _ew.add(_ew.mul(i, np.int32(unroll)), np.int32(j))
      carry, ys = step(k, carry, ys)
    return _ew.add(i, np.int32(1)), carry, ys

  if unroll != 1 and trips == 1 and not rem:  # fully unrolled: no loop at all, as JAX's
    trips, rem = 0, length
  carry, ys = list(init), ys0
  if trips:
    _, carry, ys = _while_loop(lambda s: _ew.lt(s[0], np.int32(trips)), body,
                               (np.int32(0), carry, ys), None, None)
  for j in range(rem):
    carry, ys = step(trips * unroll + j, carry, ys)
  return [*carry, *ys]


def _scan_jvp(primals, tangents, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
  nc, nk = num_consts, num_carry
  nz = [_nonzero(t) for t in tangents]
  c_nz, init_nz, xs_nz = _split(nz, [nc, nk])
  ny = len(jaxpr.out_avals) - nk
  carry_avals = jaxpr.out_avals[:nk]
  carry_nz = _fixpoint([z and _inexact(a) for z, a in zip(init_nz, carry_avals)], lambda c: (
      _jvp_jaxpr(jaxpr, c_nz + c + xs_nz, c + [False] * ny)[2][:nk]))
  j, new_consts, out_nz = _jvp_jaxpr(jaxpr, c_nz + carry_nz + xs_nz, carry_nz + [False] * ny)
  ys_nz = out_nz[nk:]
  m, nx = len(new_consts), len(xs_nz)
  ncd, nkd, nxd = sum(c_nz), sum(carry_nz), sum(xs_nz)
  base = m + nc + nk + nx  # j's inputs: [new consts, consts, carry, xs, c_dot, k_dot, x_dot]
  order = [*range(m + nc), *range(base, base + ncd), *range(m + nc, m + nc + nk),
           *range(base + ncd, base + ncd + nkd), *range(m + nc + nk, base),
           *range(base + ncd + nkd, base + ncd + nkd + nxd)]
  # outputs: [carry, ys, carry_dot, ys_dot] -> [carry, carry_dot, ys, ys_dot]
  n_out = nk + ny
  oorder = [*range(nk), *range(n_out, n_out + nkd), *range(nk, n_out),
            *range(n_out + nkd, n_out + nkd + sum(ys_nz))]
  j = _permute(j, order, oorder)
  consts, init, xs = _split(primals, [nc, nk])
  c_t, init_t, xs_t = _split(tangents, [nc, nk])
  c_dot = [t for t, z in zip(c_t, c_nz) if z]
  init_dot = [ad.instantiate_zeros(t) for t, z in zip(init_t, carry_nz) if z]
  x_dot = [t for t, z in zip(xs_t, xs_nz) if z]
  outs = scan_p.bind(*new_consts, *consts, *c_dot, *init, *init_dot, *xs, *x_dot, jaxpr=j,
                     num_consts=m + nc + ncd, num_carry=nk + nkd, length=length,
                     reverse=reverse, unroll=unroll)
  carry, k_dot, ys, y_dot = _split(outs, [nk, nkd, ny])
  k_dot, y_dot = iter(k_dot), iter(y_dot)
  y_avals = [a.update(shape=(length, *a.shape)) for a in jaxpr.out_avals[nk:]]
  return [*carry, *ys], [
      *(next(k_dot) if z else ad.Zero(a.to_tangent_aval()) for z, a in zip(carry_nz, carry_avals)),
      *(next(y_dot) if z else ad.Zero(a.to_tangent_aval()) for z, a in zip(ys_nz, y_avals))]


def _scan_batch(axis_data, vals, dims, *, jaxpr, num_consts, num_carry, length, reverse,
                unroll):
  size, name = axis_data.size, axis_data.name
  nc, nk = num_consts, num_carry
  dims = [None if d is not_mapped else d for d in dims]
  c_d, k_d, x_d = _split(dims, [nc, nk])
  consts, init, xs = _split(vals, [nc, nk])
  c_b = [None if d is None else 0 for d in c_d]
  x_b = [None if d is None else 0 for d in x_d]
  carry_bat = _fixpoint([d is not None for d in k_d], lambda c: _batched(
      jaxpr, size, c_b + [0 if b else None for b in c] + x_b, name)[:nk])
  k_b = [0 if b else None for b in carry_bat]
  ys_bat = _batched(jaxpr, size, c_b + k_b + x_b, name)[nk:]
  j, new_consts, _ = _batch_jaxpr(jaxpr, size, c_b + k_b + x_b,
                                  k_b + [0 if b else None for b in ys_bat], name)
  consts = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(consts, c_d)]
  init = [x if (d is None and w is None) else batching.matchaxis(d, w, size, x)
          for x, d, w in zip(init, k_d, k_b)]
  xs = [x if d is None else batching.moveaxis(x, d, 1) for x, d in zip(xs, x_d)]
  m = len(new_consts)
  outs = scan_p.bind(*new_consts, *consts, *init, *xs, jaxpr=j, num_consts=m + nc,
                     num_carry=nk, length=length, reverse=reverse,
                     unroll=unroll)
  return outs, [*(not_mapped if d is None else 0 for d in k_b),
                *(1 if b else not_mapped for b in ys_bat)]


_scan_batch.wants_axis_data = True


def _scan_partial_eval(unknowns, *, jaxpr, num_consts, num_carry, length, reverse, unroll):
  """Known steps run as one scan that also stacks the residuals the unknown steps read;
  residuals that are loop-invariant known consts, or known ``xs`` as they are, are passed
  through instead of stacked. The unknown scan takes ``[consts: forwarded consts, unknown
  consts; carry: unknown carries; xs: unknown xs, forwarded xs, stacked residuals]``."""
  nc, nk = num_consts, num_carry
  ny = len(jaxpr.out_avals) - nk
  c_uk, init_uk, x_uk = _split(unknowns, [nc, nk])
  carry_uk = _fixpoint(list(init_uk), lambda c: pe.partial_eval_jaxpr(
      jaxpr, c_uk + c + x_uk, instantiate=c + [False] * ny)[2][:nk])
  in_uk = c_uk + carry_uk + x_uk
  if all(in_uk):
    return None
  jk, ju, out_uk, nres = pe.partial_eval_jaxpr(jaxpr, in_uk, instantiate=carry_uk + [False] * ny)
  kj, uj = jk.jaxpr, ju.jaxpr
  n_kout = len(kj.outvars) - nres
  res = kj.outvars[n_kout:]
  known_orig = [i for i, u in enumerate(in_uk) if not u]   # kj.invars[p] is operand known_orig[p]
  kc, kk = nc - sum(c_uk), nk - sum(carry_uk)
  pos = {v: p for p, v in enumerate(kj.invars)}
  fwd_c, fwd_x, stacked = [], [], []   # (position in res, operand index)
  for r, v in enumerate(res):
    p = pos.get(v)
    if p is not None and p < kc:
      fwd_c.append((r, known_orig[p]))
    elif p is not None and p >= kc + kk:
      fwd_x.append((r, known_orig[p]))
    else:
      stacked.append(r)
  known_j = ClosedJaxpr(kj.replace(outvars=kj.outvars[:n_kout] + [res[r] for r in stacked]),
                        jk.consts)
  kp = dict(jaxpr=known_j, num_consts=kc, num_carry=kk, length=length, reverse=reverse,
            unroll=unroll)
  # the unknown jaxpr's binders: [res..., unknown consts, carries, xs] -> the scan's order
  ur, u_rest = uj.invars[:nres], uj.invars[nres:]
  uc, uk_, ux = _split(u_rest, [sum(c_uk), sum(carry_uk)])
  binders = [*(ur[r] for r, _ in fwd_c), *uc, *uk_, *ux, *(ur[r] for r, _ in fwd_x),
             *(ur[r] for r in stacked)]
  unk_j = ClosedJaxpr(uj.replace(invars=binders), ju.consts)
  up = dict(jaxpr=unk_j, num_consts=len(fwd_c) + sum(c_uk), num_carry=sum(carry_uk),
            length=length, reverse=reverse, unroll=unroll)
  kin_pos = [i for i, u in enumerate(unknowns) if not u]
  pick = [kin_pos.index(i) for i in known_orig]
  unk_ops = [i for i, u in enumerate(in_uk) if u]

  def sel_unknown(res_vals, kins, uins):
    full = core.merge_lists(unknowns, kins, uins)
    return [*(full[i] for _, i in fwd_c), *(full[i] for i in unk_ops),
            *(full[i] for _, i in fwd_x), *res_vals]

  return kp, up, out_uk, len(stacked), (lambda kins: [kins[i] for i in pick]), sel_unknown, None


def _scan_partial_eval_custom(saveable, unknowns, *, jaxpr, num_consts, num_carry, length,
                              reverse, unroll):
  """``_scan_partial_eval`` under a ``checkpoint`` policy ``saveable`` (JAX's
  ``_scan_partial_eval_custom``): the body splits by ``partial_eval_jaxpr_custom``, the
  known scan stacks only what the policy saves, and the unknown scan recomputes the rest,
  carrying the known carries it reads (recomputing them step by step) instead of stacking
  them. The unknown scan takes ``[consts: forwarded consts, unknown consts; carry: the
  unknown and the carried known carries, in order; xs: unknown xs, forwarded xs, stacked
  residuals]``."""
  nc, nk = num_consts, num_carry
  ny = len(jaxpr.out_avals) - nk
  c_uk, init_uk, x_uk = _split(unknowns, [nc, nk])
  carry_uk = _fixpoint(list(init_uk), lambda c: pe.partial_eval_jaxpr(
      jaxpr, c_uk + c + x_uk, instantiate=c + [False] * ny)[2][:nk])
  in_uk = c_uk + carry_uk + x_uk
  if all(in_uk):
    return None
  j = jaxpr.jaxpr
  carried = [False] * nk  # known carries the unknown steps read: carried, so recomputed
  while True:
    jk, ju, out_uk, nres = pe.partial_eval_jaxpr_custom(
        jaxpr, in_uk, saveable, instantiate=carry_uk + [False] * ny,
        ensure_out=carried + [False] * ny)
    res = jk.jaxpr.outvars[len(jk.jaxpr.outvars) - nres:]
    read = set(res)
    new = [c or v in read for c, v in zip(carried, j.invars[nc:nc + nk])]
    if new == carried:
      break
    carried = new
  kj, uj = jk.jaxpr, ju.jaxpr
  n_kout = len(kj.outvars) - nres
  known_orig = [i for i, u in enumerate(in_uk) if not u]   # kj.invars[p] is operand known_orig[p]
  pos = {v: p for p, v in enumerate(kj.invars)}
  kc, kk = nc - sum(c_uk), nk - sum(carry_uk)
  fwd_c, fwd_k, fwd_x, stacked = {}, {}, {}, []   # residual position -> operand index
  for r, v in enumerate(res):
    p = pos.get(v)
    if p is None:
      stacked.append(r)
    else:
      (fwd_c if p < kc else fwd_k if p < kc + kk else fwd_x)[r] = known_orig[p]
  known_j = ClosedJaxpr(kj.replace(outvars=kj.outvars[:n_kout] + [res[r] for r in stacked]),
                        jk.consts)
  kp = dict(jaxpr=known_j, num_consts=kc, num_carry=kk, length=length, reverse=reverse,
            unroll=unroll)
  ur, u_rest = uj.invars[:nres], uj.invars[nres:]
  uc, uk_, ux = _split(u_rest, [sum(c_uk), sum(carry_uk)])
  by_op = {i: ur[r] for d in (fwd_c, fwd_k, fwd_x) for r, i in d.items()}
  uk_it = iter(uk_)
  carry_ops = [nc + k for k in range(nk) if carry_uk[k] or carried[k]]
  carry_binders = [next(uk_it) if carry_uk[k] else by_op[nc + k]
                   for k in range(nk) if carry_uk[k] or carried[k]]
  fc, fx = sorted(fwd_c.items()), sorted(fwd_x.items())
  binders = [*(ur[r] for r, _ in fc), *uc, *carry_binders, *ux, *(ur[r] for r, _ in fx),
             *(ur[r] for r in stacked)]
  unk_j = ClosedJaxpr(uj.replace(invars=binders), ju.consts)
  up = dict(jaxpr=unk_j, num_consts=len(fc) + sum(c_uk), num_carry=len(carry_ops),
            length=length, reverse=reverse, unroll=unroll)
  kin_pos = [i for i, u in enumerate(unknowns) if not u]
  pick = [kin_pos.index(i) for i in known_orig]
  unk_c = [i for i in range(nc) if in_uk[i]]
  unk_x = [i for i in range(nc + nk, len(in_uk)) if in_uk[i]]

  def sel_unknown(res_vals, kins, uins):
    full = core.merge_lists(unknowns, kins, uins)
    return [*(full[i] for _, i in fc), *(full[i] for i in unk_c), *(full[i] for i in carry_ops),
            *(full[i] for i in unk_x), *(full[i] for _, i in fx), *res_vals]

  staged_outs = [carry_uk[k] for k in range(nk) if carry_uk[k] or carried[k]] + [True] * sum(
      out_uk[nk:])
  return (kp, up, out_uk, len(stacked), (lambda kins: [kins[i] for i in pick]), sel_unknown,
          staged_outs)


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
  """Transpose of a scan linear in its undefined operands: a scan the other way, carrying
  the cotangents of the carry and the accumulated cotangents of the linear consts, reading
  the output cotangents and the residual ``xs``."""
  nc, nk = num_consts, num_carry
  consts, init, xs = _split(args, [nc, nk])
  c_lin = [ad.is_undefined_primal(x) for x in consts]
  x_lin = [ad.is_undefined_primal(x) for x in xs]
  k_lin = [ad.is_undefined_primal(x) for x in init]
  ct_carry, ct_ys = cts[:nk], cts[nk:]
  if all(type(c) is ad.Zero for c in cts):
    return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None for x in args]
  jc, jk, jx = _split(jaxpr.in_avals, [nc, nk])
  y_avals = jaxpr.out_avals[nk:]
  ct_carry = [ad.instantiate_zeros(c) for c in ct_carry]
  ys_nz = [type(c) is not ad.Zero for c in ct_ys]
  ct_ys_nz = [c for c, z in zip(ct_ys, ys_nz) if z]
  res_c = [x for x, l in zip(consts, c_lin) if not l]
  res_x = [x for x, l in zip(xs, x_lin) if not l]
  lin_c_avals = [a.to_tangent_aval() for a, l in zip(jc, c_lin) if l]
  ct_c0 = [ad.zeros_like_aval(a) for a in lin_c_avals]
  avals = [*(get_aval(x) for x in res_c), *lin_c_avals, *(a.to_tangent_aval() for a in jk),
           *(a.to_tangent_aval() for a, z in zip(y_avals, ys_nz) if z),
           *(a for a, l in zip(jx, x_lin) if not l)]
  nrc, nlc, nys = len(res_c), len(lin_c_avals), len(ct_ys_nz)

  def body(*a):
    rc, acc, ck, cy, rx = _split(a, [nrc, nlc, nk, nys])
    rc, rx, cy = iter(rc), iter(rx), iter(cy)
    full = [*(ad.UndefinedPrimal(av) if l else next(rc) for av, l in zip(jc, c_lin)),
            *(ad.UndefinedPrimal(av) for av in jk),
            *(ad.UndefinedPrimal(av) if l else next(rx) for av, l in zip(jx, x_lin))]
    cts_out = [*ck, *(next(cy) if z else ad.Zero(av.to_tangent_aval())
                      for z, av in zip(ys_nz, y_avals))]
    outs = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, full, cts_out)
    oc, ok, ox = _split(outs, [nc, nk])
    new_acc = [ad.add_tangents(s, c) if type(c) is not ad.Zero else s
               for s, c in zip(acc, [c for c, l in zip(oc, c_lin) if l])]
    return [*new_acc, *(ad.instantiate_zeros(c) for c in ok),
            *(ad.instantiate_zeros(c) for c, l in zip(ox, x_lin) if l)]

  tj, tconsts = _stage(body, avals, "transpose(scan)")
  m = len(tconsts)
  outs = scan_p.bind(*tconsts, *res_c, *ct_c0, *ct_carry, *ct_ys_nz, *res_x, jaxpr=tj,
                     num_consts=m + nrc, num_carry=nlc + nk, length=length,
                     reverse=not reverse, unroll=unroll)
  ct_c, ct_k, ct_x = _split(outs, [nlc, nk])
  ct_c, ct_x = iter(ct_c), iter(ct_x)
  return [*(next(ct_c) if l else None for l in c_lin),
          *(c if l else None for c, l in zip(ct_k, k_lin)),
          *(next(ct_x) if l else None for l in x_lin)]


def _scan_dce(used_outs, eqn):
  p = eqn.params
  nc, nk = p["num_consts"], p["num_carry"]
  j = p["jaxpr"].jaxpr
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  used_ys = list(used_outs[nk:])
  used_carry = _fixpoint(list(used_outs[:nk]),
                         lambda c: pe.dce_jaxpr(j, c + used_ys)[1][nc:nc + nk])
  nx = len(eqn.invars) - nc - nk
  new_j, used_in = pe.dce_jaxpr(j, used_carry + used_ys,
                                instantiate=[False] * nc + used_carry + [False] * nx)
  uc = used_in[:nc]
  new_eqn = eqn.replace(
      invars=[x for x, u in zip(eqn.invars, used_in) if u],
      outvars=[v for v, u in zip(eqn.outvars, used_carry + used_ys) if u],
      params=dict(p, jaxpr=ClosedJaxpr(new_j, p["jaxpr"].consts), num_consts=sum(uc),
                  num_carry=sum(used_carry)))
  return [True] * len(new_eqn.invars), new_eqn


def _scan_lowering(ctx, *args, **params):
  return mlir.lower_fun(_scan_as_while, multiple_results=True)(ctx, *args, **params)

# ======================================================================= associative_scan


@api_boundary
def associative_scan(fn, elems, reverse=False, axis=0):
  """All prefix combinations ``[a, fn(a, b), fn(fn(a, b), c), ...]`` of ``elems`` along
  ``axis`` for an associative ``fn`` (applied elementwise along that axis), in
  ``O(log n)`` rounds of ``fn`` (Blelloch's odd/even recursion)."""
  if not callable(fn):
    raise TypeError("lax.associative_scan: fn argument should be callable.")
  flat, tree = tree_flatten(elems)
  if reverse:  # (before ``axis`` is normalized: a negative axis fails in rev, as in JAX)
    flat = [_sh.rev(x, (axis,)) for x in flat]
  nd = flat[0].ndim
  if not -nd <= axis < nd:
    raise ValueError(f"axis {axis} is out of bounds for array of dimension {nd}")
  axis = axis + nd if axis < 0 else axis
  n = flat[0].shape[axis]
  if not all(x.shape[axis] == n for x in flat[1:]):
    raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                     f"(saw: {[tuple(x.shape) for x in flat]})")

  def combine(a, b):
    out, _ = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
    return out

  def sl(x, start, stop, stride=1):
    return _sh.slice_in_dim(x, start, stop, stride, axis)

  def rec(xs):
    m = xs[0].shape[axis]
    if m < 2:
      return xs
    red = combine([sl(x, 0, m - 1, 2) for x in xs], [sl(x, 1, m, 2) for x in xs])
    odd = rec(red)
    if m % 2 == 0:
      even = combine([sl(o, 0, o.shape[axis] - 1) for o in odd], [sl(x, 2, m, 2) for x in xs])
    else:
      even = combine(odd, [sl(x, 2, m, 2) for x in xs])
    even = [_sh.concatenate([sl(x, 0, 1), e], axis) for x, e in zip(xs, even)]
    return [_interleave(e, o, axis) for e, o in zip(even, odd)]

  out = rec(flat)
  if reverse:
    out = [_sh.rev(x, (axis,)) for x in out]
  return tree_unflatten(tree, out)


def _interleave(a, b, axis):
  """``a[0], b[0], a[1], b[1], ...`` along ``axis`` (``a`` as long as ``b`` or one longer)."""
  na, nb = a.shape[axis], b.shape[axis]
  pa = [(0, 0, 0)] * a.ndim
  pb = [(0, 0, 0)] * b.ndim
  pa[axis] = (0, 1 if na == nb else 0, 1)
  pb[axis] = (1, 0 if na == nb else 1, 1)
  op = _ew.bitwise_or if a.dtype == np.bool_ else _ew.add
  return op(_sh.pad(a, _ew._const(a, 0), pa), _sh.pad(b, _ew._const(b, 0), pb))

# ======================================================================= test samples
# ``meta['samples']`` for the registry-generated tests: small jaxprs per dtype (kept, so
# cases drawn with other seeds share params and differ only in their operands).

_sample_jaxprs: dict = {}


def _sample_jaxpr(name, dtype, fun, avals):
  k = (name, np.dtype(dtype))
  j = _sample_jaxprs.get(k)
  if j is None:
    j = _sample_jaxprs[k] = _stage(fun, avals)[0]
  return j


def _cond_samples(rng, dtype):
  r = lambda *s: _sh.random_array(rng, s, dtype)
  a2, a0 = ShapedArray((2,), dtype), ShapedArray((), dtype)
  nonlin = tuple(_sample_jaxpr(f"cond{k}", dtype, f, [a2, a0]) for k, f in enumerate([
      lambda x, y: [_ew.sin(x) * y, x - y],
      lambda x, y: [x * x, _sh.broadcast_in_dim(_ew.cos(y), (2,), ())],
      lambda x, y: [x * 0.5, x + y]]))
  lin = tuple(_sample_jaxpr(f"cond_lin{k}", dtype, f, [a2, a0]) for k, f in enumerate([
      lambda x, y: [x * 2.0 - y], lambda x, y: [-x + y * 3.0]]))
  i = lambda n: np.int32(rng.integers(0, n))
  return [([i(3), r(2), r()], dict(branches=nonlin)),
          ([np.int32(7), r(2), r()], dict(branches=nonlin)),
          ([i(2), r(2), r()], dict(branches=lin))]


def _while_samples(rng, dtype):
  r = lambda *s: _sh.random_array(rng, s, dtype)
  i32, a2, a0 = ShapedArray((), np.int32), ShapedArray((2,), dtype), ShapedArray((), dtype)
  cj = _sample_jaxpr("while_cond", dtype, lambda n, i, x: [_ew.lt(i, n)], [i32, i32, a2])
  bj = _sample_jaxpr("while_body", dtype, lambda w, i, x: [
      _ew.add(i, np.int32(1)), _ew.sin(x) * w + x * 0.5], [a0, i32, a2])
  p = dict(cond_jaxpr=cj, body_jaxpr=bj, cond_nconsts=1, body_nconsts=1)
  return [([np.int32(rng.integers(1, 4)), r(), np.int32(rng.integers(0, 3)), r(2)], p)]


def _scan_samples(rng, dtype):
  r = lambda *s: _sh.random_array(rng, s, dtype)
  a0, a2 = ShapedArray((), dtype), ShapedArray((2,), dtype)
  nonlin = _sample_jaxpr("scan", dtype, lambda w, c, x: [
      _ew.tanh(c * w + x), _ew.sin(c) * x], [a0, a2, a2])
  lin = _sample_jaxpr("scan_lin", dtype, lambda w, c, x: [
      c * 0.5 + w * 2.0 + x, c - x * 3.0], [a0, a2, a2])
  base = dict(num_consts=1, num_carry=1, length=3, unroll=1)
  return [([r(), r(2), r(3, 2)], dict(base, jaxpr=nonlin, reverse=False)),
          ([r(), r(2), r(3, 2)], dict(base, jaxpr=nonlin, reverse=True, unroll=2)),
          ([r(), r(2), r(3, 2)], dict(base, jaxpr=lin, reverse=False))]


def _cond_reference(index, *args, branches):
  n = len(branches)
  i = int(index)
  b = branches[i if 0 <= i < n else n - 1]
  return eval_jaxpr(b.jaxpr, b.consts, *args)


_FLOATS = [np.float32, np.float64]

# ======================================================================= registration


def _eager_backend(prim, f_small, f_large, thr):
  """Loops and cond take and return nbjax values themselves; a generic backend (the
  registry's single-primitive ``"xla"`` one) gets the usual wrapper."""
  if getattr(f_small, "wrapped_values", False):
    return f_small
  return registry.make_generic_eager(prim, f_small, f_large, thr)


_cond_eager.wrapped_values = True
_while_python.wrapped_values = True
_scan_python.wrapped_values = True
_while_xla = _eager_loop(_while_python)
_while_xla.primitive, _while_xla.wrapped_values = while_p, True
_scan_xla = _eager_loop(_scan_python)
_scan_xla.primitive, _scan_xla.wrapped_values = scan_p, True

for _p in (cond_p, while_p, scan_p):
  _p.make_eager = _eager_backend
_LIFTS.update({cond_p: _lift_cond, while_p: _lift_while, scan_p: _lift_scan})

registry.register(
    cond_p, family="control_flow", impls={"python": _cond_eager},
    abstract_eval=_cond_abstract_eval, jvp=_cond_jvp, batch=_cond_batch,
    transpose=_cond_transpose,
    meta=dict(differentiable=True, dtypes=_FLOATS, samples=_cond_samples,
              reference=_cond_reference, note="runs the taken branch's kernels (straight-line "
              "program from its second run)"))
registry.register(
    while_p, family="control_flow", impls={"xla": _while_xla, "python": _while_python},
    abstract_eval=_while_abstract_eval, jvp=_while_jvp, batch=_while_batch,
    transpose=_while_transpose_error, policy=("xla", "xla", registry.LARGE),
    meta=dict(differentiable=True, reverse=False, dtypes=_FLOATS, samples=_while_samples,
              reference=_while_python, note="the whole loop is one XLA executable, cached by "
              "jaxpr content; python: reference loop; transpose: JAX's reverse-mode error"))
registry.register(
    scan_p, family="control_flow", impls={"xla": _scan_xla, "python": _scan_python},
    abstract_eval=_scan_abstract_eval, jvp=_scan_jvp, batch=_scan_batch,
    transpose=_scan_transpose, policy=("xla", "xla", registry.LARGE),
    meta=dict(differentiable=True, dtypes=_FLOATS, samples=_scan_samples,
              reference=_scan_python, note="the whole loop is one XLA executable, cached by "
              "jaxpr content; python: reference loop"))
cond_p.named_axes = while_p.named_axes = scan_p.named_axes = params_axis_names
cond_p.partial_eval = _cond_partial_eval
cond_p.partial_eval_custom = lambda saveable, unknowns, **params: _cond_partial_eval(
    unknowns, custom=True, saveable=saveable, **params)
cond_p.recompute_custom = _cond_recompute_custom
while_p.partial_eval = _while_partial_eval
scan_p.partial_eval = _scan_partial_eval
scan_p.partial_eval_custom = _scan_partial_eval_custom
pe.dce_rules[cond_p] = _cond_dce
pe.dce_rules[while_p] = _while_dce
pe.dce_rules[scan_p] = _scan_dce
cond_p.lowerings["cpu"] = _cond_lowering
while_p.lowerings["cpu"] = _while_lowering
scan_p.lowerings["cpu"] = _scan_lowering
