"""Staging: turning a Python function into a jaxpr (omnistaging), and jaxpr DCE.

Pipeline position: ``make_jaxpr`` and (next) ``jit`` and the control-flow primitives call
``trace_to_jaxpr_dynamic``, the single way a Python function becomes a jaxpr. It makes a
``DynamicJaxprTrace`` the current trace while the function runs, so *every* primitive the
function binds is recorded as an equation, also those whose operands are all constants
(omnistaging, seed 003 Part 2). Transformations applied inside the traced function push
their traces on top and bind down onto this one.

Operands that are not this trace's tracers are constants: scalars become inline
``Literal``s; arrays, and tracers of *other* traces (an enclosing jvp/vmap/staging trace, as
when ``jit`` is traced inside ``jvp``), become constvars whose values are handed back to
the caller in ``consts``, which passes them on as explicit inputs.

Later (reverse mode): the known/unknown split of linearize lives here too; the trace keeps
equations as plain data so a partial evaluator can reuse ``JaxprTracer``/``new_arg``.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import os
import re
import sys
import weakref

import numpy as np

from nbjax import core, registry
from nbjax import jaxpr as _jaxpr_mod
from nbjax.array import Array
from nbjax.core import ShapedArray, Tracer, get_aval
from nbjax.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var,
                         eval_jaxpr, is_literalable, jaxpr_effects)

__all__ = ["JaxprTracer", "DynamicJaxprTracer", "DynamicJaxprTrace", "trace_to_jaxpr_dynamic",
           "dce_jaxpr", "dce_jaxpr_consts", "dce_rules", "convert_constvars_jaxpr",
           "close_jaxpr", "eqn_effects"]


class DynamicJaxprTracer(Tracer):
  """A value being staged: its abstract value and the jaxpr atom (Var/Literal) naming it."""
  __slots__ = ("_aval", "atom")

  def __init__(self, trace, aval, atom):
    self._trace, self._aval, self.atom = trace, aval, atom

  @property
  def aval(self):
    return self._aval

  def to_concrete_value(self):
    return None  # staged values have no concrete value (``if x > 0`` raises)

  def __repr__(self):  # JAX's: ``JitTracer(~float32[])``
    return f"JitTracer({self._aval})"

  def _origin_msg(self):
    """JAX's pointer to where the value came from: the traced function and the arguments
    the value depends on (found by walking the recorded equations backwards)."""
    dbg = getattr(self._trace, "debug_info", None)
    if dbg is None:
      return ""
    origin = f"The error occurred while tracing the function {dbg.func_src_info} for {dbg.traced_for}. "
    need = {self.atom}
    for e in reversed(self._trace.eqns):
      if any(v in need for v in e.outvars):
        need.update(v for v in e.invars if type(v) is Var)
    pos = [i for i, v in enumerate(self._trace.invars) if v in need]
    names = dbg.arg_names
    if pos and names is not None and pos[-1] < len(names):
      n = [names[i] for i in pos]
      s = (f"the argument {n[0]}" if len(n) == 1 else f"the arguments {n[0]} and {n[1]}"
           if len(n) == 2 else f"the arguments {', '.join(n[:-1])}, and {n[-1]}")
      origin += ("This concrete value was not available in Python because it depends on "
                 f"the value{'s' if len(n) > 1 else ''} of {s}.")
    return "\n" + origin


JaxprTracer = DynamicJaxprTracer


def fun_sourceinfo(fun):
  """``"f at file.py:12"`` (JAX's ``DebugInfo.func_src_info``); a builtin by its name."""
  while isinstance(fun, functools.partial):
    fun = fun.func
  try:
    fun = inspect.unwrap(fun)
    return f"{fun.__name__} at {fun.__code__.co_filename}:{fun.__code__.co_firstlineno}"
  except (AttributeError, ValueError):
    try:
      m = re.match(r"<built-in function (\S+)>", str(fun))
    except Exception:  # noqa: BLE001  (a callable whose ``str`` fails)
      return "<unknown>"
    return m.group(1) if m else "<unknown>"


def abstractify_args(fun, flat, dbg):
  """The avals of a staged function's flat arguments, or JAX's error naming the path of the
  first that is not an array (``dbg``: a ``DebugInfo``, or a thunk making one)."""
  try:
    return [core.abstractify(x) for x in flat]
  except TypeError:
    i, x = next((i, x) for i, x in enumerate(flat) if not _is_abstractable(x))
    names = (dbg() if callable(dbg) else dbg).arg_names
    raise TypeError(
        f"Error interpreting argument to {fun} as an abstract array. The problematic value is "
        f"of type {type(x)} and was passed to the function at path "
        f"{names[i] if names is not None and i < len(names) else 'unknown'}.\nThis typically "
        "means that a jit-wrapped function was called with a non-array argument, and this "
        "argument was not marked as static using the static_argnums or static_argnames "
        "parameters of jax.jit.") from None


def _is_abstractable(x):
  try:
    core.abstractify(x)
    return True
  except TypeError:
    return False


_FLAT_INDEX = re.compile(r"<flat index ([^>]+)>")


# ``ad_checkpoint.saved_residuals`` turns this on while it traces: equations then record the
# user code that bound them; otherwise tracing pays nothing for it.
record_source_info = False
_NBJAX = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(functools.__file__)) + os.sep


def _internal(filename):
  return filename.startswith(_NBJAX) or (filename.startswith(_STDLIB)
                                         and "site-packages" not in filename)


def user_site():
  """Where the innermost calling frame outside nbjax and the standard library is, cheaply
  (``(code, lasti, lineno)``; ``summarize_site`` formats it when a message needs it)."""
  f = sys._getframe(1)
  while f is not None and _internal(f.f_code.co_filename):
    f = f.f_back
  return None if f is None else (f.f_code, f.f_lasti, f.f_lineno)


def summarize_site(site):
  """``"file.py:12:4 (fun)"``, with the column of the call (JAX's
  ``source_info_util.summarize``)."""
  if site is None or isinstance(site, str):
    return site
  code, lasti, lineno = site
  pos = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
  line, col = (pos[0], pos[2]) if pos and pos[0] is not None else (lineno, 0)
  return f"{code.co_filename}:{line}:{col or 0} ({code.co_qualname})"


def user_source_info():
  """``"file.py:12:4 (fun)"``: the innermost calling frame outside nbjax and the standard
  library, with the column of the call (JAX's ``source_info_util.summarize``)."""
  f = sys._getframe(1)
  while f is not None and _internal(f.f_code.co_filename):
    f = f.f_back
  return None if f is None else summarize_site((f.f_code, f.f_lasti, f.f_lineno))


class DebugInfo:
  """What a staging trace was tracing, for error messages: ``traced_for`` ("jit",
  "make_jaxpr", ...), the function, and the names of its flat (non-static) arguments,
  computed only when a message needs them."""
  __slots__ = ("traced_for", "fun", "_args", "out_tree")

  def __init__(self, traced_for, fun, args=(), kwargs=None, static_argnums=(),
               static_argnames=(), out_tree=None):
    self.traced_for, self.fun = traced_for, fun
    self._args = (args, kwargs or {}, static_argnums, static_argnames)
    self.out_tree = out_tree  # () -> the output treedef once traced (else None), for messages

  func_src_info = property(lambda self: fun_sourceinfo(self.fun))

  @property
  def arg_names(self):
    """JAX's ``_non_static_arg_names``: ``x``, ``x['a']``, ``args[1]``, ``kwargs['k']``."""
    from nbjax._tree_util import keystr, tree_leaves_with_path
    args, kwargs, nums, names = self._args
    static = object()
    n = len(args)
    nums = {i % n for i in nums if -n <= i < n}
    args_ = [static if i in nums else x for i, x in enumerate(args)]
    kwargs_ = {k: static if k in names else x for k, x in kwargs.items()}
    ordered = None
    try:
      ba = inspect.signature(self.fun).bind(*args_, **kwargs_)
    except (ValueError, TypeError):
      pass
    else:
      kw_name = next((k for k, p in inspect.signature(self.fun).parameters.items()
                      if p.kind == inspect.Parameter.VAR_KEYWORD), None)
      ordered = [(k, x) for k, x in ba.arguments.items() if k not in kwargs and k != kw_name]
      ordered += [(k if k in ba.arguments else f"{kw_name}['{k}']", x)
                  for k, x in sorted(kwargs_.items(), key=lambda kx: kx[0])]
    if ordered is None:
      ordered = [("args", args_)] + sorted(
          (f"kwargs['{k}']", x) for k, x in kwargs_.items() if x is not static)
    return tuple(k + _FLAT_INDEX.sub(r"\1", keystr(p)) for k, x in ordered
                 for p, leaf in tree_leaves_with_path(x) if leaf is not static)


# primitive -> rule(literal values, params, out aval): the value of an equation whose operands
# are all literals, folded while staging (a single-result primitive), or None to stage it
const_fold_rules: dict = {}


class DynamicJaxprTrace(core.Trace):
  """The staging trace: ``process_primitive`` abstract-evaluates and records an equation."""

  debug_info = None
  array_consts = False  # scalar Arrays staged as constvars too (vjp: its residuals, as JAX's)

  def __init__(self, fun_name=None, parent_trace=None):
    self.fun_name = fun_name
    self.parent_trace = parent_trace
    self.invars: list = []
    self.eqns: list = []
    self.constvars: list = []
    self.constvals: list = []
    self._const_ids: dict = {}   # id(value) -> tracer (the value is kept alive in constvals)
    self._np_arrays: dict = {}   # id(NumPy array) -> (it, its Array): see const_array
    self.valid = True

  def __repr__(self):
    return "DynamicJaxprTrace"

  # ------------------------------------------------------------------ operands
  def new_arg(self, aval):
    v = Var(aval)
    self.invars.append(v)
    return JaxprTracer(self, aval, v)

  def const_array(self, x):
    """The ``Array`` of the NumPy array ``x``, one per array object while this trace stages,
    so every use of ``x`` reads one constvar (JAX deduplicates constants by identity)."""
    hit = self._np_arrays.get(id(x))
    if hit is None:
      hit = self._np_arrays[id(x)] = (x, Array(x))  # (holding x keeps its id unique)
      t = self._const_ids.get(id(x))
      if t is not None:  # x is staged already: its Array reads the same constvar
        self._const_ids[id(hit[1])] = t
    return hit[1]

  def new_const(self, c, aval=None):
    """A tracer for a constant: an inline literal for scalars, else a (deduplicated) constvar."""
    t = self._const_ids.get(id(c))
    if t is not None:
      return t
    hit = self._np_arrays.get(id(c)) if type(c) is np.ndarray else None
    if hit is not None and id(hit[1]) in self._const_ids:  # its Array is staged already
      t = self._const_ids[id(c)] = self._const_ids[id(hit[1])]
      return t
    if aval is None:
      aval = get_aval(c)
    if is_literalable(c) and not (self.array_consts and hasattr(c, "_value")):
      return JaxprTracer(self, aval, Literal(c, aval))
    v = Var(aval)
    t = JaxprTracer(self, aval, v)
    self.constvars.append(v)
    self.constvals.append(c)
    self._const_ids[id(c)] = t
    if hit is not None:  # its Array, made but not yet staged, reads this constvar too
      self._const_ids[id(hit[1])] = t
    return t

  pure = lift = new_const

  def to_jaxpr_tracer(self, x):
    if type(x) is JaxprTracer:
      if x._trace is self:
        return x
      if not x._trace.valid:
        raise core.escaped_tracer_error(x)
    elif type(x) is core.ShapeDtypeStruct:  # staged as a constant of its type (as JAX)
      return self.new_const(x, ShapedArray(x.shape, x.dtype, x.weak_type))
    elif not isinstance(x, Tracer):
      try:
        get_aval(x)
      except TypeError:
        raise TypeError(f"Value {x!r:.100} of type {type(x).__name__} is not a valid nbjax "
                        "type (arrays, NumPy arrays and Python scalars are)") from None
    return self.new_const(x)

  # ------------------------------------------------------------------ primitives
  def process_primitive(self, prim, tracers, params):
    ts = [self.to_jaxpr_tracer(t) for t in tracers]
    if prim.abstract_eval_rule is None:
      raise registry.missing_rule("abstract_eval", prim)
    out = prim.abstract_eval(*[t._aval for t in ts], **params)
    multi = prim.multiple_results
    if multi != isinstance(out, (tuple, list)):
      raise ValueError(f"{prim.name}.abstract_eval() method should return a tuple or a list "
                       f"iff {prim.name}.multiple_results.")
    out_avals = list(out) if multi else [out]
    fold = const_fold_rules.get(prim)
    if fold is not None and all(type(t.atom) is Literal for t in ts):
      v = fold([t.atom.val for t in ts], params, out_avals[0])
      if v is not None:  # folded at trace time: a literal, no equation (JAX's const folding)
        return JaxprTracer(self, out_avals[0], Literal(v, out_avals[0]))
    outvars = [Var(a) for a in out_avals]
    self.eqns.append(JaxprEqn([t.atom for t in ts], outvars, prim, params,
                              eqn_effects(prim, params),
                              (_jaxpr_mod.source_info or user_source_info())
                              if record_source_info else None))
    outs = [JaxprTracer(self, a, v) for a, v in zip(out_avals, outvars)]
    return outs if multi else outs[0]

  # custom_jvp / custom_vjp (``nbjax.custom_derivatives``): one equation holding the
  # function's jaxpr (its closed-over values as leading inputs) and a memoized thunk that
  # stages the rule for a given symbolic-zero pattern when a transformation needs it.
  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    ts, params = self._stage_custom(fun, tracers, lambda avals: dict(
        jvp_jaxpr_fun=_memo_thunk(_stage_jvp_rule, jvp, avals, fun),
        symbolic_zeros=symbolic_zeros))
    return DynamicJaxprTrace.process_primitive(self, prim, ts, params)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    ts, params = self._stage_custom(fun, tracers, lambda avals: dict(
        fwd_jaxpr_thunk=_memo_thunk(_stage_fwd_rule, fwd, avals, fun), bwd=bwd,
        out_trees=out_trees, symbolic_zeros=symbolic_zeros))
    return DynamicJaxprTrace.process_primitive(self, prim, ts, params)

  def _stage_custom(self, fun, tracers, rule_params):
    """``(operands, params)``: a function that came from a staged equation brings its params;
    else the function is staged to ``call_jaxpr``, whose closed-over values become leading
    operands (``num_consts``), and ``rule_params(avals)`` adds the rule's thunk."""
    ts = [self.to_jaxpr_tracer(t) for t in tracers]
    params = getattr(fun, "staged_params", None)
    if params is not None:
      return ts, params
    avals = [t._aval for t in ts]
    jaxpr, _, consts = trace_to_jaxpr_dynamic(fun, avals)
    return [*(self.to_jaxpr_tracer(c) for c in consts), *ts], dict(
        call_jaxpr=ClosedJaxpr(convert_constvars_jaxpr(jaxpr), []), num_consts=len(consts),
        **rule_params(avals))

  # ------------------------------------------------------------------ result
  def to_jaxpr(self, out_tracers):
    """``(jaxpr, consts)``; constvars nothing reads are dropped."""
    outvars = [t.atom for t in out_tracers]
    used = set()
    for e in self.eqns:
      used.update(x for x in e.invars if type(x) is Var)
    used.update(x for x in outvars if type(x) is Var)
    keep = [v in used for v in self.constvars]
    constvars = [v for v, k in zip(self.constvars, keep) if k]
    consts = [c for c, k in zip(self.constvals, keep) if k]
    return Jaxpr(constvars, self.invars, outvars, self.eqns,
                 _input_effects(self.eqns, self.invars)), consts

  def invalidate(self):
    self.valid = False
    self._const_ids = {}


def _input_effects(eqns, invars):
  """A staged jaxpr's own effects (JAX's ``jaxpr.effects``): a set of its equations' effects,
  those on an equation's input (a ref: ``input_index``) restated on the jaxpr's input it is,
  dropped when that is made inside; ``()`` when there are none."""
  effs = None
  for e in eqns:
    if not e.effects:
      continue
    own = getattr(e.primitive, "effects", ())
    for f in e.effects:
      if getattr(f, "local", False):  # (a ref made inside: no effect outside)
        continue
      idx = getattr(f, "input_index", None)
      if idx is None:
        effs = effs or set()
        effs.add(f)
      elif type(own) is tuple and f in own and type(idx) is int:
        atom = e.invars[idx]
        if any(atom is v for v in invars):
          effs = effs or set()
          effs.add(type(f)(atom))
  return () if effs is None else effs


def trace_to_jaxpr_dynamic(fun, in_avals, *, fun_name=None, debug_info=None):
  """Stage ``fun`` (flat list of inputs -> flat list of outputs) out to a jaxpr.

  Returns ``(jaxpr, out_avals, consts)``: ``consts`` are the values of ``jaxpr.constvars``
  (array constants, and tracers of enclosing traces the function closed over).
  """
  name = fun_name or getattr(fun, "__name__", None)
  trace = DynamicJaxprTrace(name, core.get_current_trace())
  trace.debug_info = debug_info
  in_tracers = [trace.new_arg(a) for a in in_avals]
  try:
    with core.set_current_trace(trace):
      ans = fun(*in_tracers)
    ans = list(ans)
    for i, x in enumerate(ans):
      if not (isinstance(x, Tracer) or core.valid_jaxtype(x)):
        src, traced_for = ((debug_info.func_src_info, debug_info.traced_for) if debug_info
                           else (name, "jit"))
        tree = debug_info.out_tree() if debug_info and debug_info.out_tree else None
        extra = ""
        if tree is not None and tree.num_leaves == len(ans):
          from nbjax._tree_util import keystr, tree_flatten_with_path
          path = tree_flatten_with_path(tree.unflatten(list(range(len(ans)))))[0][i][0]
          extra = f" at output component {keystr(path)}" if path else ""
        raise TypeError(f"function {src} traced for {traced_for} returned a value of type "
                        f"{type(x)}{extra}, which is not a valid JAX type")
    out_tracers = [trace.to_jaxpr_tracer(x) for x in ans]
    if debug_info is not None and debug_info.traced_for != "make_jaxpr":
      for t in out_tracers:
        if type(t._aval) is core.AbstractRef:
          raise _returned_ref_error(debug_info, trace, in_tracers, t)
    jaxpr, consts = trace.to_jaxpr(out_tracers)
    out_avals = [t._aval for t in out_tracers]
  finally:
    trace.invalidate()
  in_tracers = ans = out_tracers = x = t = None  # (the leak check finds any tracer left)
  core.check_leaks(trace)
  return jaxpr, out_avals, consts


def _returned_ref_error(dbg, trace, in_tracers, t):
  """JAX's error for a traced function returning a mutable array reference: where the ref
  came from (an argument, or the line that created it)."""
  i = next((i for i, x in enumerate(in_tracers) if x is t), None)
  if i is not None:
    where = f"was passed in as the argument {dbg.arg_names[i]}"
  else:
    e = next((e for e in trace.eqns if any(v is t.atom for v in e.outvars)), None)
    where = f"was created on line {(e.source_info if e is not None else None) or ''}"
  return ValueError(f"function {dbg.func_src_info} traced for {dbg.traced_for} returned a "
                    f"mutable array reference of type {t._aval}, but mutable array references "
                    f"cannot be returned.\n\nThe returned mutable array {where}.")


def _is_ref(x):
  return type(x) is core.Ref or isinstance(x, Tracer) and type(x.aval) is core.AbstractRef


def _referent(x):
  """The ref a tracer stands for (JAX's ``get_referent``): under jvp/vmap, its primal's."""
  while isinstance(x, Tracer):
    nxt = getattr(x, "primal", None)
    if nxt is None:
      nxt = getattr(x, "val", None)
    if nxt is None:
      break
    x = nxt
  return x


def check_ref_args(dbg, flat, consts=()):
  """JAX's errors for one mutable array reference passed as two arguments of a traced
  function, or both closed over and passed."""
  seen = {}
  for i, x in enumerate(flat):
    if _is_ref(x):
      j = seen.setdefault(id(_referent(x)), i)
      if j != i:
        names = dbg.arg_names
        raise ValueError(
            "only one reference to a mutable array may be passed as an argument to a "
            f"function, but when tracing {dbg.func_src_info} for {dbg.traced_for} the mutable "
            f"array reference of type {core.get_aval(x)} appeared at both {names[j]} and "
            f"{names[i]}.")
  for c in consts:
    i = seen.get(id(_referent(c)))
    if i is not None and _is_ref(c):
      raise ValueError(f"when tracing {dbg.func_src_info} for {dbg.traced_for}, a mutable "
                       f"array reference of type {core.get_aval(c)} was both closed over and "
                       f"passed as the argument {dbg.arg_names[i]}")


def _memo_thunk(stage, rule, avals, fun):
  """``thunk(*pattern)``: ``stage(rule, avals, pattern)``, computed once per pattern; named
  after the rule (``__name__``) and the function (``fun_name``) for printing."""
  cache = {}

  def thunk(*pattern):
    r = cache.get(pattern)
    if r is None:
      r = cache[pattern] = stage(rule, avals, pattern)
    return r
  thunk.__name__ = getattr(rule, "__name__", "rule")
  thunk.fun_name = getattr(fun, "__name__", "fun")
  return thunk


def _stage_jvp_rule(jvp, avals, in_zeros):
  """``(jaxpr, consts, out_zeros)``: the flat jvp rule staged on the primals and the
  tangents not in ``in_zeros`` (symbolic zeros), with the outputs' zero pattern."""
  from nbjax.interpreters.ad import Zero
  n = len(avals)
  t_avals = [a.to_tangent_aval() for a in avals]
  box = []

  def f(*xs):
    nz = iter(xs[n:])
    outs = jvp(*xs[:n], *[Zero(a) if z else next(nz) for a, z in zip(t_avals, in_zeros)])
    m = len(outs) // 2
    zs = [type(t) is Zero for t in outs[m:]]
    box[:] = [zs]
    return [*outs[:m], *(t for t, z in zip(outs[m:], zs) if not z)]

  jaxpr, _, consts = trace_to_jaxpr_dynamic(
      f, [*avals, *(a for a, z in zip(t_avals, in_zeros) if not z)],
      fun_name=getattr(jvp, "__name__", None))
  return jaxpr, consts, box[0]


def _stage_fwd_rule(fwd, avals, nonzeros):
  """``(jaxpr, consts)``: the flat forward rule staged for this perturbation pattern."""
  def f(*xs):
    return fwd(*[v for pair in zip(xs, nonzeros) for v in pair])
  jaxpr, _, consts = trace_to_jaxpr_dynamic(f, avals, fun_name=getattr(fwd, "__name__", None))
  return jaxpr, consts


def close_jaxpr(jaxpr, consts=()):
  return ClosedJaxpr(jaxpr, list(consts))


def convert_constvars_jaxpr(jaxpr):
  """The same jaxpr with its constvars moved to the front of its invars."""
  return jaxpr.replace(constvars=[], invars=[*jaxpr.constvars, *jaxpr.invars])


def eqn_effects(prim, params):
  """An equation's effects: its primitive's own (``prim.effects``) and those of the jaxprs
  in its params (a loop or call around an effect has it too: DCE must keep it)."""
  effs = getattr(prim, "effects", ())
  if callable(effs):  # effects that depend on the params (checkify's check_p)
    effs = effs(params)
  for v in params.values():
    t = type(v)
    if t is ClosedJaxpr or t is Jaxpr:
      sub = jaxpr_effects(v)
    elif t is tuple and v and type(v[0]) in (ClosedJaxpr, Jaxpr):
      sub = tuple(e for j in v for e in jaxpr_effects(j))
    else:
      continue
    if sub:
      effs = tuple(dict.fromkeys((*effs, *sub)))
  return effs

# --------------------------------------------------------------------- DCE

dce_rules: dict = {}  # primitive -> (used_outs, eqn) -> (used_ins, new_eqn or None)


def _default_dce_rule(used_outs, eqn):
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  return [True] * len(eqn.invars), eqn


_dce_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def dce_call_rule(used_outs, eqn, fix_params=None):
  """DCE rule of a call whose ``jaxpr`` param is a ClosedJaxpr (JAX's
  ``dce_jaxpr_pjit_rule``/``remat_dce``): unused outputs and inputs leave the call and its
  jaxpr; ``fix_params(params, used_ins)`` drops per-input params of the removed inputs."""
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  j = eqn.params["jaxpr"]
  per = _dce_memo.setdefault(j, {})  # (the same pruned jaxpr each time: found compiled)
  got = per.get(tuple(used_outs))
  if got is None:
    new, used_ins = dce_jaxpr(j.jaxpr, used_outs)
    got = per[tuple(used_outs)] = (  # (None: the jaxpr itself, which the value may not hold)
        None if new is j.jaxpr else ClosedJaxpr(new, j.consts), used_ins)
  new, used_ins = got[0] or j, got[1]
  if all(used_outs) and all(used_ins):
    return used_ins, eqn
  params = dict(eqn.params, jaxpr=new)
  new_eqn = eqn.replace(invars=[x for x, u in zip(eqn.invars, used_ins) if u],
                        outvars=[v for v, u in zip(eqn.outvars, used_outs) if u],
                        params=fix_params(params, used_ins) if fix_params else params)
  return [True] * len(new_eqn.invars), new_eqn


def dce_jaxpr(jaxpr, used_outputs, instantiate=False):
  """Dead-code elimination: ``(new_jaxpr, used_inputs)``.

  ``used_outputs``: bools (or one bool) selecting the outputs to keep; ``instantiate``:
  bools (or one bool) for inputs to keep even if unused. Equations whose outputs are all
  unused (and that have no effects) are dropped; unused outputs of kept equations become
  ``DropVar``s; constvars are kept.
  """
  if isinstance(used_outputs, bool):
    used_outputs = [used_outputs] * len(jaxpr.outvars)
  if isinstance(instantiate, bool):
    instantiate = [instantiate] * len(jaxpr.invars)
  live = set()
  for v, u in zip(jaxpr.outvars, used_outputs):
    if u and type(v) is Var:
      live.add(v)
  new_eqns = []
  for eqn in reversed(jaxpr.eqns):
    used_outs = [v in live for v in eqn.outvars]
    rule = dce_rules.get(eqn.primitive, _default_dce_rule)
    used_ins, new_eqn = rule(used_outs, eqn)
    if new_eqn is None:
      continue
    if new_eqn is eqn and not all(used_outs):
      new_eqn = eqn.replace(outvars=[v if u else DropVar(v.aval)
                                     for v, u in zip(eqn.outvars, used_outs)])
    new_eqns.append(new_eqn)
    for x, u in zip(new_eqn.invars, used_ins):
      if u and type(x) is Var:
        live.add(x)
  used_inputs = [(v in live) or bool(i) for v, i in zip(jaxpr.invars, instantiate)]
  new = jaxpr.replace(invars=[v for v, u in zip(jaxpr.invars, used_inputs) if u],
                      outvars=[v for v, u in zip(jaxpr.outvars, used_outputs) if u],
                      eqns=new_eqns[::-1])
  return new, used_inputs


def dce_jaxpr_consts(jaxpr, used_outputs, instantiate=False):
  """DCE that also drops unused constvars: ``(new_jaxpr, used_consts, used_inputs)``."""
  n = len(jaxpr.constvars)
  if isinstance(instantiate, bool):
    instantiate = [instantiate] * len(jaxpr.invars)
  new, used = dce_jaxpr(convert_constvars_jaxpr(jaxpr), used_outputs,
                        [False] * n + list(instantiate))
  used_consts, used_inputs = used[:n], used[n:]
  new = new.replace(constvars=new.invars[:sum(used_consts)],
                    invars=new.invars[sum(used_consts):])
  return new, used_consts, used_inputs


# --------------------------------------------------------------------- inlining


def inline_calls(jaxpr):
  """``jaxpr`` with each equation whose primitive sets ``inline_call`` (custom_jvp_call,
  custom_vjp_call: to evaluate them only their function matters) replaced by the equations
  of its ``call_jaxpr`` (recursively, with fresh variables), for eager replay."""
  if not any(getattr(e.primitive, "inline_call", False) for e in jaxpr.eqns):
    return jaxpr
  eqns, sub = [], {}

  def read(x):
    return x if type(x) is Literal else sub.get(x, x)

  def emit(eqn_list, fresh):
    for e in eqn_list:
      ins = [read(x) for x in e.invars]
      cj = e.params.get("call_jaxpr") if getattr(e.primitive, "inline_call", False) else None
      if cj is not None and not cj.consts:
        sub.update(zip(cj.jaxpr.invars, ins))
        emit(cj.jaxpr.eqns, True)
        sub.update((v, read(o)) for v, o in zip(e.outvars, cj.jaxpr.outvars))
        continue
      outs = e.outvars
      if fresh:
        outs = [DropVar(v.aval) if type(v) is DropVar else Var(v.aval) for v in outs]
        sub.update(zip(e.outvars, outs))
      eqns.append(e.replace(invars=ins, outvars=outs))

  emit(jaxpr.eqns, False)
  return jaxpr.replace(eqns=eqns, outvars=[read(x) for x in jaxpr.outvars])


# --------------------------------------------------------------------- known/unknown split


def _forced_unknown(prim, params):
  """Whether an equation is staged (unknown) even with known inputs: a primitive's
  ``force_unknown(params)`` says so (the tangent ref JVP creates, nbjax.state)."""
  f = getattr(prim, "force_unknown", None)
  return f is not None and f(params)


def partial_eval_jaxpr(closed, in_unknowns, instantiate=False):
  """Split ``closed`` into a known part and an unknown part (seed 003's partial evaluation).

  Returns ``(jaxpr_known, jaxpr_unknown, out_unknowns, num_res)``: ``jaxpr_known`` maps the
  known inputs to the known outputs followed by ``num_res`` residuals; ``jaxpr_unknown`` maps
  the residuals followed by the unknown inputs to the unknown outputs. An equation is unknown
  when any of its inputs is; ``instantiate`` (a bool, or one per output) makes outputs
  unknown.

  A primitive holding jaxprs splits itself with its ``partial_eval`` rule,
  ``rule(in_unknowns, **params)``: None (stage the whole equation as unknown), or
  ``(known_params, unknown_params, out_unknowns, num_res)``, optionally followed by
  ``(select_known, select_unknown, staged_outs)`` (see ``_split``).
  """
  jaxpr = closed.jaxpr
  unknown = {v for v, u in zip(jaxpr.invars, in_unknowns) if u}
  known_eqns, unknown_eqns = [], []
  for eqn in jaxpr.eqns:
    unk = [type(x) is not Literal and x in unknown for x in eqn.invars]
    split = split_eqn(eqn, unk)
    if split is not None:  # split a call: known part + residuals
      known_eqn, unknown_eqn, out_unk = split
      known_eqns.append(known_eqn)
      unknown.update(v for v, u in zip(eqn.outvars, out_unk) if u)
      if unknown_eqn is not None:
        unknown_eqns.append(unknown_eqn)
    elif any(unk) or _forced_unknown(eqn.primitive, eqn.params):
      unknown_eqns.append(eqn)
      unknown.update(eqn.outvars)
    else:
      known_eqns.append(eqn)
  n_out = len(jaxpr.outvars)
  if isinstance(instantiate, bool):
    instantiate = [instantiate] * n_out
  out_unknowns = [bool(i) or (type(v) is not Literal and v in unknown)
                  for v, i in zip(jaxpr.outvars, instantiate)]
  res, seen = [], set()

  def need(x):
    if type(x) is not Literal and x not in unknown and x not in seen:
      seen.add(x)
      res.append(x)

  for eqn in unknown_eqns:
    for x in eqn.invars:
      need(x)
  for v, u in zip(jaxpr.outvars, out_unknowns):
    if u:
      need(v)
  known_outs = [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u]
  jk = Jaxpr(jaxpr.constvars, [v for v, u in zip(jaxpr.invars, in_unknowns) if not u],
             known_outs + res, known_eqns)
  ju = Jaxpr([], res + [v for v, u in zip(jaxpr.invars, in_unknowns) if u],
             [v for v, u in zip(jaxpr.outvars, out_unknowns) if u], unknown_eqns)
  return ClosedJaxpr(jk, closed.consts), ClosedJaxpr(ju, []), out_unknowns, len(res)


# JAX's ``partial_eval_jaxpr_custom_rules``, here for an equation whose inputs are all known
# (debug callbacks): ``rule(saveable, inst_in, eqn) -> (in_known, in_unknown)``, whether it
# runs in the known part, and again in the unknown part (where the values it reads are then
# recomputed or saved); ``inst_in``: per input, whether the unknown part has it anyway (an
# input, a literal, or made by an equation the policy does not save, so recomputed).
partial_eval_jaxpr_custom_rules = {}


def partial_eval_jaxpr_custom(closed, in_unknowns, saveable, instantiate=False,
                              ensure_out=None):
  """``partial_eval_jaxpr`` under a ``checkpoint`` policy: the residuals are the known inputs
  and constants the unknown part reads and the outputs of known equations for which
  ``saveable(prim, *in_avals, **params)`` is true (``saveable=None``: none); the unknown part
  recomputes every other known value it needs. A control-flow or call equation with mixed
  inputs splits with its ``partial_eval_custom`` rule, the policy applying inside it (the
  residuals it makes are saved), else with its ``partial_eval`` rule (the policy decides on
  the whole equation). Same results as ``partial_eval_jaxpr``, except that the unknown part
  also returns the known outputs ``ensure_out`` flags (one bool per output), in order."""
  j = closed.jaxpr
  unknown = {v for v, u in zip(j.invars, in_unknowns) if u}
  known_eqns, unknown_eqns = [], []
  saved = {v for v, u in zip(j.invars, in_unknowns) if not u}
  inst = {*j.constvars, *j.invars}  # known values the unknown part has or would recompute

  def policy_saves(e):
    return saveable is not None and saveable(e.primitive, *[x.aval for x in e.invars],
                                             **e.params)
  for e in j.eqns:
    unk = [type(x) is not Literal and x in unknown for x in e.invars]
    split = split_eqn(e, unk, custom=True, saveable=saveable)
    if split is not None:
      ke, ue, out_unk = split
      known_eqns.append(ke)
      if policy_saves(ke):
        saved.update(ke.outvars)
      elif e.primitive.partial_eval_custom is not None:  # its residuals: the policy's choice
        saved.update(ke.outvars[len(e.outvars) - sum(out_unk):])
      if ue is not None:
        unknown_eqns.append(ue)
        unknown.update(v for v, u in zip(e.outvars, out_unk) if u)
    elif any(unk) or _forced_unknown(e.primitive, e.params):
      unknown_eqns.append(e)
      unknown.update(e.outvars)
    else:
      rule = partial_eval_jaxpr_custom_rules.get(e.primitive)
      keep, again = (True, False) if rule is None else rule(
          saveable, [type(x) is Literal or x in inst for x in e.invars], e)
      if keep:
        known_eqns.append(e)
        (saved if policy_saves(e) else inst).update(e.outvars)
      if again:
        unknown_eqns.append(e)
  n_out = len(j.outvars)
  if isinstance(instantiate, bool):
    instantiate = [instantiate] * n_out
  out_unknowns = [bool(i) or (type(v) is not Literal and v in unknown)
                  for v, i in zip(j.outvars, instantiate)]
  # the unknown side: its equations, plus the known ones it needs that are not saved
  need, recompute = set(), []
  for e in unknown_eqns:
    need.update(x for x in e.invars if type(x) is Var and x not in unknown)
  u_outs = out_unknowns if ensure_out is None else [u or e for u, e in zip(out_unknowns,
                                                                          ensure_out)]
  need.update(v for v, u in zip(j.outvars, u_outs) if u and type(v) is Var)
  for i in reversed(range(len(known_eqns))):
    e = known_eqns[i]
    needed = [v in need and v not in saved for v in e.outvars]
    if any(needed):
      split = (None if e.primitive.recompute_custom is None else
               e.primitive.recompute_custom(saveable, e, needed))
      if split is not None:  # a call: the policy applies inside it too (JAX)
        known_eqns[i], e, res_vars = split
        saved.update(res_vars)
      recompute.append(e)
      need.update(x for x in e.invars if type(x) is Var)
  recompute.reverse()
  made = {v for e in recompute for v in e.outvars}
  res = [v for v in (*j.constvars, *j.invars, *[v for e in known_eqns for v in e.outvars])
         if v in need and v not in unknown and v not in made]
  res = list(dict.fromkeys(res))
  known_outs = [v for v, u in zip(j.outvars, out_unknowns) if not u]
  jk = Jaxpr(j.constvars, [v for v, u in zip(j.invars, in_unknowns) if not u],
             known_outs + res, known_eqns)
  jk, _ = dce_jaxpr(jk, True, instantiate=True)
  ju = Jaxpr([], res + [v for v, u in zip(j.invars, in_unknowns) if u],
             [v for v, u in zip(j.outvars, u_outs) if u], recompute + unknown_eqns)
  ju, _ = dce_jaxpr(ju, True, instantiate=True)  # what a recomputed call need not return
  return ClosedJaxpr(jk, closed.consts), ClosedJaxpr(ju, []), out_unknowns, len(res)


def split_eqn(eqn, unk, custom=False, saveable=None):
  """A call equation with some unknown inputs (``unk``) split by its primitive's
  ``partial_eval`` rule (``custom``: under a ``checkpoint`` policy ``saveable``, by its
  ``partial_eval_custom(saveable, unk, **params)`` rule when it has one): ``(known_eqn,
  unknown_eqn or None, out_unknowns)``, the known equation's outputs being its known outputs
  then the residuals the unknown one reads; None when the equation does not split (no rule,
  or all/none of its inputs unknown)."""
  rule = eqn.primitive.partial_eval
  if custom and eqn.primitive.partial_eval_custom is not None:
    rule = functools.partial(eqn.primitive.partial_eval_custom, saveable)
  split = rule(unk, **eqn.params) if any(unk) and not all(unk) and rule is not None else None
  if split is None:
    return None
  kp, up, out_unk, num_res, sel_known, sel_unknown, staged_outs = _split(split)
  prim = eqn.primitive
  kins = [x for x, u in zip(eqn.invars, unk) if not u]
  uins = [x for x, u in zip(eqn.invars, unk) if u]
  kins_ = sel_known(kins) if sel_known else kins
  k_avals = prim.abstract_eval(*[x.aval for x in kins_], **kp)
  res = [Var(a) for a in k_avals[len(k_avals) - num_res:]]
  known_eqn = eqn.replace(
      invars=kins_, outvars=[v for v, u in zip(eqn.outvars, out_unk) if not u] + res, params=kp)
  if up is None:  # every output is known: nothing to stage
    return known_eqn, None, out_unk
  uins_ = sel_unknown(res, kins, uins) if sel_unknown else res + uins
  # a constant of the call forwarded to the staged equation (``forward_inputs``) is a value,
  # not an atom: inline it (a jaxpr equation's operands are variables and literals)
  uins_ = [x if isinstance(x, (Var, Literal)) else Literal(x) for x in uins_]
  uouts = [v for v, u in zip(eqn.outvars, out_unk) if u]
  if staged_outs is not None:  # the staged equation's other outputs are dropped
    it = iter(uouts)
    s_avals = prim.abstract_eval(*[x.aval for x in uins_], **up)
    uouts = [next(it) if m else DropVar(a) for m, a in zip(staged_outs, s_avals)]
  return known_eqn, eqn.replace(invars=uins_, outvars=uouts, params=up), out_unk


# --------------------------------------------------------------------- partial evaluation
# (seed 003 Part 4) ``linearize`` runs the JVP trace on top of a ``JaxprTrace``: primal work,
# whose inputs are all known, runs eagerly on the parent trace as it happens; tangent work,
# which touches an unknown input, is recorded as equations. Execution order is already a
# topological order, so the recorded equations form the linear jaxpr directly, with the known
# values they read (the residuals) as its constvars.


def _split(split):
  """A partial-eval rule's result, padded: ``(known_params, unknown_params, out_unknowns,
  num_res, select_known, select_unknown, staged_outs)``. ``select_known(known_ins)``: the
  known equation's operands (default: the known inputs); ``select_unknown(res, known_ins,
  unknown_ins)``: the staged equation's operands (default: residuals, then the unknown
  inputs; known inputs it takes become residuals of the enclosing split); ``staged_outs``:
  which outputs of the staged equation are the unknown outputs (default: all of them).
  ``unknown_params=None``: every output is known and nothing is staged."""
  return (*split, None, None, None)[:7]


_forwarded: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def forward_inputs(rule):
  """Wrap a call primitive's partial-eval rule so residuals that are just known inputs or
  constants of the call are not outputs of its known part: the staged part takes those inputs
  (constants) directly (as JAX forwards them; fewer values cross, and ``saved_residuals``
  names them as arguments and constants)."""
  @functools.wraps(rule)
  def forwarding(in_unknowns, **params):
    split = rule(in_unknowns, **params)
    if split is None or len(split) > 4:
      return split
    kp, up, out_unknowns, num_res = split
    kc = kp["jaxpr"]
    kj = kc.jaxpr
    n_out = len(kj.outvars) - num_res
    pos = {v: i for i, v in enumerate(kj.invars)}
    pos.update({v: -1 - i for i, v in enumerate(kj.constvars)})  # (a constant: its value)
    fwd = [pos.get(v) if type(v) is Var else None for v in kj.outvars[n_out:]]
    if up is None or all(f is None for f in fwd):
      return split
    per = _forwarded.setdefault(kc, {})
    closed = per.get(num_res)  # (the same object for the same known jaxpr: found compiled)
    if closed is None:
      kj = kj.replace(outvars=kj.outvars[:n_out] + [v for v, f in zip(kj.outvars[n_out:], fwd)
                                                    if f is None])
      closed = per[num_res] = ClosedJaxpr(kj, kc.consts)
    kp = dict(kp, jaxpr=closed)

    def select_unknown(res, kins, uins):
      res = iter(res)
      return [next(res) if f is None else kins[f] if f >= 0 else kc.consts[-1 - f]
              for f in fwd] + list(uins)
    return kp, up, out_unknowns, sum(f is None for f in fwd), None, select_unknown
  return forwarding


class PartialVal(tuple):
  """A value that is either known (``const``) or unknown (only its ``aval``)."""

  def __new__(cls, xs):
    return tuple.__new__(cls, xs)

  @classmethod
  def known(cls, const):
    return PartialVal((None, const))

  @classmethod
  def unknown(cls, aval):
    return PartialVal((aval, None))

  def is_known(self):
    return self[0] is None

  def get_known(self):
    return self[1] if self[0] is None else None

  def get_aval(self):
    return get_aval(self[1]) if self[0] is None else self[0]


class JaxprTrace(DynamicJaxprTrace):
  """The partial-evaluation trace: an operation with no unknown input (no tracer of this
  trace) is bound on the parent trace at once; the rest are staged. Primitives with a
  ``partial_eval`` rule (call primitives) are split into a known and an unknown part."""

  def __repr__(self):
    return "JaxprTrace"

  def process_primitive(self, prim, tracers, params):
    unknowns = [type(t) is JaxprTracer and t._trace is self for t in tracers]
    if not any(unknowns) and not _forced_unknown(prim, params):
      ctx = core._ctx
      prev, ctx.trace = ctx.trace, self.parent_trace
      try:
        return prim.bind(*tracers, **params)
      finally:
        ctx.trace = prev
    rule = prim.partial_eval
    split = None if rule is None or all(unknowns) else rule(unknowns, **params)
    if split is None:
      return super().process_primitive(prim, tracers, params)
    known_params, unknown_params, out_unknowns, num_res, sel_known, sel_unknown, staged_outs = \
        _split(split)
    kins = [t for t, u in zip(tracers, unknowns) if not u]
    uins = [t for t, u in zip(tracers, unknowns) if u]
    with core.set_current_trace(self.parent_trace):
      kins_ = sel_known(kins) if sel_known else kins
      if getattr(prim, "inline_known", False):  # checkpoint: the known half is hoisted (JAX)
        kj = known_params["jaxpr"]
        outs = eval_jaxpr(kj.jaxpr, kj.consts, *kins_)
      else:
        outs = prim.bind(*kins_, **known_params)
    known_outs, res = outs[:len(outs) - num_res], outs[len(outs) - num_res:]
    if unknown_params is None:  # every output is known
      return list(known_outs)
    staged = super().process_primitive(
        prim, sel_unknown(res, kins, uins) if sel_unknown else [*res, *uins], unknown_params)
    if staged_outs is not None:
      staged = [s for s, m in zip(staged, staged_outs) if m]
    staged, known_outs = iter(staged), iter(known_outs)
    return [next(staged) if u else next(known_outs) for u in out_unknowns]


  def _any_unknown(self, tracers):
    return any(type(t) is JaxprTracer and t._trace is self for t in tracers)

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    if not self._any_unknown(tracers):
      return prim.bind_with_trace(self.parent_trace, fun, jvp, tracers, symbolic_zeros)
    return fun(*tracers)  # building a linear function: the rule is not needed (as JAX)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    if not self._any_unknown(tracers):
      return prim.bind_with_trace(self.parent_trace, fun, fwd, bwd, tracers, out_trees,
                                  symbolic_zeros)
    return DynamicJaxprTrace.process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers,
                                                     out_trees, symbolic_zeros)


def trace_to_subjaxpr_nounits(fun, pvals, *, fun_name=None):
  """Partially evaluate flat ``fun`` on ``pvals`` (``PartialVal``s): ``(jaxpr, out_pvals,
  consts)``. ``jaxpr`` maps the unknown inputs to the unknown outputs, with the residuals
  (known values it reads) as constvars bound to ``consts``."""
  trace = JaxprTrace(fun_name or getattr(fun, "__name__", None), core.get_current_trace())
  ins = [pv.get_known() if pv.is_known() else trace.new_arg(pv.get_aval()) for pv in pvals]
  try:
    with core.set_current_trace(trace):
      outs = list(fun(*ins))
    unknown = [type(o) is JaxprTracer and o._trace is trace for o in outs]
    jaxpr, consts = trace.to_jaxpr([o for o, u in zip(outs, unknown) if u])
  finally:
    trace.invalidate()
  out_pvals = [PartialVal.unknown(o._aval) if u else PartialVal.known(o)
               for o, u in zip(outs, unknown)]
  return jaxpr, out_pvals, consts


trace_to_jaxpr = trace_to_subjaxpr_nounits
