"""Jaxprs: nbjax's typed, first-order IR (seed 001, seed 003 Part 2).

Pipeline position: the staging trace (``interpreters.partial_eval.DynamicJaxprTrace``)
records every primitive a Python function binds as a ``JaxprEqn``; ``make_jaxpr`` returns
the result as a ``ClosedJaxpr`` (the program plus its hoisted constants); ``jit`` lowers
one to StableHLO; ``eval_jaxpr`` interprets one by binding each equation, so evaluating a
jaxpr is itself traceable by every transformation.

Printing follows today's JAX: ``{ lambda consts ; args. let eqns in (outs) }`` with typed
binders (``a:f32[8]``), params in brackets, inline scalar literals (``3.0:f32[]``), and
variable names a..z, ba, bb... unique across nested jaxprs; a Wadler-style layout puts a
short jaxpr on one line and breaks long ones one equation per line.
"""
from __future__ import annotations

import collections
import itertools
import re
import weakref
from typing import Any, NamedTuple

import numpy as np

from nbjax import dtypes
from nbjax.core import Tracer, get_aval

__all__ = ["Var", "DropVar", "Literal", "JaxprEqn", "new_jaxpr_eqn", "Jaxpr", "ClosedJaxpr",
           "JaxprType", "JaxprTypeError", "check_jaxpr", "typecheck_jaxpr", "eval_jaxpr",
           "jaxpr_as_fun", "jaxprs_in_params", "jaxpr_effects", "pp_jaxpr", "Atom"]

# --------------------------------------------------------------------- terms

_var_ids = itertools.count()


class Var:
  """A jaxpr variable: bound once (as an input, constant, or equation output)."""
  __slots__ = ("count", "suffix", "aval")

  def __init__(self, aval, suffix=""):
    self.count = next(_var_ids)
    self.suffix = suffix
    self.aval = aval

  def __repr__(self):
    return f"Var({self.count}{self.suffix}):{self.aval.str_short()}"


class DropVar(Var):
  """An equation output that nothing reads (printed ``_``)."""
  __slots__ = ()

  def __repr__(self):
    return "_"


class Literal:
  """An inline scalar constant operand. ``val`` is kept as given (a Python scalar stays
  weakly typed when the jaxpr is evaluated)."""
  __slots__ = ("val", "aval")

  def __init__(self, val, aval=None):
    self.val = val
    self.aval = get_aval(val) if aval is None else aval

  def __repr__(self):
    return f"Literal({_literal_str(self.val)})"


Atom = Any  # Var | Literal


def _literal_str(val):
  v = np.asarray(val)
  return str(v.item()) if v.ndim == 0 else "[...]"


def is_literalable(x):
  """Values staged inline as ``Literal``s: scalars that are not tracers."""
  if isinstance(x, Tracer):
    return False
  t = type(x)
  if t in (bool, int, float, complex):
    return True
  if isinstance(x, (np.ndarray, np.generic)):
    return x.ndim == 0 and x.dtype != dtypes.float0
  shape = getattr(x, "shape", None)
  return shape == () and hasattr(x, "_value")


class JaxprEqn:
  """``outvars = primitive[params] invars``."""
  __slots__ = ("invars", "outvars", "primitive", "params", "effects", "source_info")

  def __init__(self, invars, outvars, primitive, params, effects=(), source_info=None):
    self.invars, self.outvars = list(invars), list(outvars)
    self.primitive, self.params = primitive, dict(params)
    self.effects, self.source_info = effects, source_info

  def replace(self, **kw):
    d = {k: getattr(self, k) for k in self.__slots__}
    d.update(kw)
    return JaxprEqn(**d)

  def __repr__(self):
    return pp_eqn_str(self)


def new_jaxpr_eqn(invars, outvars, primitive, params, effects=(), source_info=None):
  return JaxprEqn(invars, outvars, primitive, params, effects, source_info)


class Jaxpr:
  """``{ lambda constvars ; invars. let eqns in (outvars) }``."""
  __slots__ = ("constvars", "invars", "outvars", "eqns", "effects", "debug_info", "__weakref__")

  def __init__(self, constvars, invars, outvars, eqns, effects=(), debug_info=None):
    self.constvars, self.invars = list(constvars), list(invars)
    self.outvars, self.eqns = list(outvars), list(eqns)
    self.effects, self.debug_info = effects, debug_info

  in_avals = property(lambda self: [v.aval for v in self.invars])
  out_avals = property(lambda self: [v.aval for v in self.outvars])

  def replace(self, **kw):
    d = {k: getattr(self, k) for k in ("constvars", "invars", "outvars", "eqns", "effects",
                                       "debug_info")}
    d.update(kw)
    return Jaxpr(**d)

  def __str__(self):
    return pp_jaxpr(self)

  __repr__ = __str__

  def pretty_print(self, **kw):
    return pp_jaxpr(self, **kw)

  def _repr_pretty_(self, p, cycle):
    p.text(str(self))


class ClosedJaxpr:
  """A jaxpr together with the values of its constvars (``consts``, alias ``literals``)."""
  __slots__ = ("jaxpr", "consts", "__weakref__")

  def __init__(self, jaxpr, consts):
    assert len(jaxpr.constvars) == len(consts), (len(jaxpr.constvars), len(consts))
    self.jaxpr, self.consts = jaxpr, list(consts)

  in_avals = property(lambda self: [v.aval for v in self.jaxpr.invars])
  out_avals = property(lambda self: [v.aval for v in self.jaxpr.outvars])
  eqns = property(lambda self: self.jaxpr.eqns)
  constvars = property(lambda self: self.jaxpr.constvars)  # (JAX's)
  invars = property(lambda self: self.jaxpr.invars)
  outvars = property(lambda self: self.jaxpr.outvars)
  # (a set, as JAX's: the effects of its equations, those of inner jaxprs included)
  effects = property(lambda self: {*self.jaxpr.effects, *jaxpr_effects(self.jaxpr)})
  literals = property(lambda self: self.consts)  # the name seed 001 (TypedJaxpr) uses

  def map_jaxpr(self, f):
    return ClosedJaxpr(f(self.jaxpr), self.consts)

  def replace(self, *, jaxpr=None, consts=None):
    return ClosedJaxpr(self.jaxpr if jaxpr is None else jaxpr,
                       self.consts if consts is None else consts)

  def __call__(self, *args):
    return eval_jaxpr(self.jaxpr, self.consts, *args)

  def __str__(self):
    return pp_jaxpr(self.jaxpr)

  __repr__ = __str__

  def pretty_print(self, **kw):
    return pp_jaxpr(self.jaxpr, **kw)

  def _repr_pretty_(self, p, cycle):
    p.text(str(self))


def jaxprs_in_params(params):
  """Sub-jaxprs (open ``Jaxpr``s) held by an equation's params, in order."""
  out = []
  for v in params.values():
    vs = v if type(v) in (tuple, list) else (v,)
    for j in vs:
      if isinstance(j, ClosedJaxpr):
        out.append(j.jaxpr)
      elif isinstance(j, Jaxpr):
        out.append(j)
  return out


def subjaxprs(jaxpr):
  """The jaxprs held by the params of ``jaxpr``'s equations, in order, not descending into
  them (JAX's ``core.subjaxprs``)."""
  return [j for eqn in jaxpr.eqns for j in jaxprs_in_params(eqn.params)]


_effects_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# the effects checkpoint's partial evaluation may split (JAX's effects.remat_allowed_effects):
# a debug print may run in both the forward and the recomputation, an IO callback may not
remat_allowed_effects = set()
# effect types under which checkpoint saves every residual instead of recomputing (a ref
# write recomputed would run twice): the state effects (nbjax.state)
remat_saving_effects = set()


def jaxpr_effects(jaxpr):
  """The effects of a (closed) jaxpr: those of its equations and of the jaxprs their params
  hold, each once, in first-seen order (memoized per jaxpr object: jaxprs are not mutated)."""
  if isinstance(jaxpr, ClosedJaxpr):
    jaxpr = jaxpr.jaxpr
  effs = _effects_memo.get(jaxpr)
  if effs is None:
    seen = {}
    for e in jaxpr.eqns:
      seen.update(dict.fromkeys(e.effects))
      for j in jaxprs_in_params(e.params):
        seen.update(dict.fromkeys(jaxpr_effects(j)))
    effs = _effects_memo[jaxpr] = tuple(seen)
  return effs

_axes_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def jaxpr_axis_names(jaxpr):
  """The axis names that the collectives of a (closed) jaxpr and of its sub-jaxprs act over
  (a frozenset, memoized per jaxpr object)."""
  if isinstance(jaxpr, ClosedJaxpr):
    jaxpr = jaxpr.jaxpr
  names = _axes_memo.get(jaxpr)
  if names is None:
    names = set()
    for e in jaxpr.eqns:
      if e.primitive.named_axes is not None:
        names.update(e.primitive.named_axes(e.params))
      for j in jaxprs_in_params(e.params):
        names |= jaxpr_axis_names(j)
    names = _axes_memo[jaxpr] = frozenset(names)
  return names


def params_axis_names(params):
  """``Primitive.named_axes`` of a higher-order primitive: the axis names its jaxprs use (so
  ``vmap`` with ``axis_name`` batches it even when no operand is mapped, as JAX)."""
  out = frozenset()
  for j in jaxprs_in_params(params):
    out |= jaxpr_axis_names(j)
  return out


# --------------------------------------------------------------------- typecheck


class JaxprTypeError(TypeError):
  pass


def typecheck_param(prim, param, name, required, ok):
  """JAX's ``JaxprTypeError`` for a primitive's parameter of the wrong kind (``ok`` false):
  ``invalid scan param reverse of type int, bool required: 4``. A primitive's
  ``typecheck_params(**params)`` (read by ``check_jaxpr``) calls it per parameter."""
  if not ok:
    text = str(param)
    sep = "\n" if "\n" in text or len(text) > 60 else " "
    raise JaxprTypeError(f"invalid {prim} param {name} of type {type(param).__name__}, "
                         f"{required} required:{sep}{text}")


class JaxprType(NamedTuple):
  in_types: list
  out_types: list

  def __repr__(self):
    ins = ", ".join(a.str_short() for a in self.in_types)
    outs = ", ".join(a.str_short() for a in self.out_types)
    return f"({ins}) -> ({outs})"


def _typematch(a, b):
  """Equal shape and dtype (weak_type may differ, as in JAX)."""
  return a.shape == b.shape and a.dtype == b.dtype


def check_jaxpr(jaxpr):
  """Type-check ``jaxpr`` (a ``Jaxpr`` or ``ClosedJaxpr``) and its sub-jaxprs.

  Checks that every variable is bound exactly once before use, re-runs each primitive's
  abstract evaluation on the operand types and compares with the output binders. Raises
  ``JaxprTypeError`` naming the offending equation. Returns the ``JaxprType``.
  """
  closed = jaxpr if isinstance(jaxpr, ClosedJaxpr) else None
  jaxpr = jaxpr.jaxpr if closed is not None else jaxpr
  ctx = _PpContext(_dropvars(jaxpr))
  for v in (*jaxpr.constvars, *jaxpr.invars, *(v for e in jaxpr.eqns for v in e.outvars)):
    if isinstance(v, Var):
      ctx.name(v)  # names as the printed jaxpr has them
  env = set()

  def where(i, eqn):
    return f"in equation {i} of the jaxpr:\n  {_pp_eqn_doc(eqn, ctx).format()}\n"

  def bind(v, what):
    if not isinstance(v, Var):
      raise JaxprTypeError(f"{what} {v!r} is not a Var")
    if v in env:
      raise JaxprTypeError(f"Variable '{ctx.name(v)}' is bound more than once ({what})")
    env.add(v)

  def read(x, what):
    if isinstance(x, Literal):
      la = get_aval(x.val)
      if not _typematch(la, x.aval):
        raise JaxprTypeError(f"Literal {_literal_str(x.val)} has type {la.str_short()} but is "
                             f"annotated {x.aval.str_short()} ({what})")
      return x.aval
    if not isinstance(x, Var):
      raise JaxprTypeError(f"Operand {x!r} is neither a Var nor a Literal ({what})")
    if x not in env:
      raise JaxprTypeError(f"Variable '{ctx.name(x)}' not defined ({what})")
    return x.aval

  if closed is not None:
    for v, c in zip(jaxpr.constvars, closed.consts):
      ca = get_aval(c)
      if not _typematch(ca, v.aval):
        raise JaxprTypeError(f"constant of type {ca.str_short()} bound to constvar of type "
                             f"{v.aval.str_short()}")
  for v in jaxpr.constvars:
    bind(v, "constvar")
  for v in jaxpr.invars:
    bind(v, "invar")
  for i, eqn in enumerate(jaxpr.eqns):
    in_avals = [read(x, where(i, eqn)) for x in eqn.invars]
    prim = eqn.primitive
    if getattr(prim, "typecheck_params", None) is not None:
      prim.typecheck_params(**eqn.params)
    try:
      out = prim.abstract_eval(*in_avals, **eqn.params)
    except NotImplementedError:
      raise
    except Exception as e:
      raise JaxprTypeError(f"abstract evaluation of '{prim.name}' failed {where(i, eqn)}"
                           f"{type(e).__name__}: {e}") from e
    outs = list(out) if prim.multiple_results else [out]
    if len(outs) != len(eqn.outvars):
      raise JaxprTypeError(f"'{prim.name}' produces {len(outs)} outputs but the equation binds "
                           f"{len(eqn.outvars)} {where(i, eqn)}")
    for v, a in zip(eqn.outvars, outs):
      if not _typematch(a, v.aval):
        raise JaxprTypeError(
            f"'{prim.name}' returns type {a.str_short()} but the output binder "
            f"'{ctx.name(v)}' has type {v.aval.str_short()} {where(i, eqn)}")
    for sub in jaxprs_in_params(eqn.params):
      check_jaxpr(sub)
    for v in eqn.outvars:
      if type(v) is DropVar:
        continue
      bind(v, f"output of equation {i}")
  out_types = [read(x, "jaxpr outputs") for x in jaxpr.outvars]
  return JaxprType([v.aval for v in jaxpr.invars], out_types)


typecheck_jaxpr = check_jaxpr

# --------------------------------------------------------------------- evaluation


source_info = None  # the source info of the equation ``eval_jaxpr`` is binding, if it has one


def eval_jaxpr(jaxpr, consts, *args, propagate_source_info=True):
  """Evaluate ``jaxpr`` on ``consts`` and ``args`` by binding every equation (traceable)."""
  del propagate_source_info
  if isinstance(jaxpr, ClosedJaxpr):
    jaxpr = jaxpr.jaxpr
  env = {}
  if len(consts) != len(jaxpr.constvars) or len(args) != len(jaxpr.invars):
    raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.constvars)} consts and "
                    f"{len(jaxpr.invars)} args, got {len(consts)} and {len(args)}")
  for v, x in zip(jaxpr.constvars, consts):
    env[v] = x
  for v, x in zip(jaxpr.invars, args):
    env[v] = x

  def read(x):
    return x.val if type(x) is Literal else env[x]

  global source_info
  for eqn in jaxpr.eqns:
    if eqn.source_info is None:
      ans = eqn.primitive.bind(*[read(x) for x in eqn.invars], **eqn.params)
    else:  # (restaged equations keep the user code that made them, as JAX's)
      prev, source_info = source_info, eqn.source_info
      try:
        ans = eqn.primitive.bind(*[read(x) for x in eqn.invars], **eqn.params)
      finally:
        source_info = prev
    if eqn.primitive.multiple_results:
      for v, a in zip(eqn.outvars, ans):
        env[v] = a
    else:
      env[eqn.outvars[0]] = ans
  return [read(x) for x in jaxpr.outvars]


def jaxpr_as_fun(closed_jaxpr, *args):
  """The function a ``ClosedJaxpr`` denotes: ``f(*args) -> list of outputs``."""
  if args:
    return eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
  return lambda *args: eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)

# --------------------------------------------------------------------- pretty printing
# A small Wadler/Lindig document printer: a group is laid out flat when it fits in the
# remaining width (up to the next possible line break after it), else its breaks are
# newlines at the current nesting.


class _Doc:
  __slots__ = ()

  def __add__(self, other):
    return _Concat((self, other))

  def format(self, width=80):
    return _format(self, width)


class _Text(_Doc):
  __slots__ = ("text",)

  def __init__(self, text):
    self.text = text


class _Concat(_Doc):
  __slots__ = ("docs",)

  def __init__(self, docs):
    self.docs = tuple(docs)


class _Brk(_Doc):
  __slots__ = ("text",)

  def __init__(self, text=" "):
    self.text = text


class _Group(_Doc):
  __slots__ = ("doc",)

  def __init__(self, doc):
    self.doc = doc


class _Nest(_Doc):
  __slots__ = ("n", "doc")

  def __init__(self, n, doc):
    self.n, self.doc = n, doc


def _join(sep, docs):
  out = []
  for i, d in enumerate(docs):
    if i:
      out.append(sep)
    out.append(d)
  return _Concat(out)


_FLAT, _BREAK = True, False


def _fits(width, item, rest):
  agenda = list(rest)
  agenda.append(item)
  while width >= 0 and agenda:
    i, flat, d = agenda.pop()
    t = type(d)
    if t is _Text:
      width -= len(d.text)
    elif t is _Concat:
      agenda.extend((i, flat, c) for c in reversed(d.docs))
    elif t is _Nest:
      agenda.append((i + d.n, flat, d.doc))
    elif t is _Group:
      agenda.append((i, flat, d.doc))
    elif t is _Brk:
      if not flat:
        return True
      width -= len(d.text)
  return width >= 0


def _format(doc, width):
  out, col = [], 0
  agenda = [(0, _BREAK, doc)]
  while agenda:
    i, flat, d = agenda.pop()
    t = type(d)
    if t is _Text:
      out.append(d.text)
      col += len(d.text)
    elif t is _Concat:
      agenda.extend((i, flat, c) for c in reversed(d.docs))
    elif t is _Nest:
      agenda.append((i + d.n, flat, d.doc))
    elif t is _Group:
      f = flat or _fits(width - col, (i, _FLAT, d.doc), agenda)
      agenda.append((i, f, d.doc))
    elif t is _Brk:
      if flat:
        out.append(d.text)
        col += len(d.text)
      else:
        out.append("\n" + " " * i)
        col = i
  return "".join(out)


def _encode_alpha(n):
  s = ""
  while not s or n:
    n, r = divmod(n, 26)
    s = chr(97 + r) + s
  return s


class _PpContext:
  """Variable names, assigned on first print, unique across nested jaxprs (none taken by a
  shared jaxpr's name); ``shared``: jaxpr -> its name, for those printed once up front."""

  def __init__(self, names=None):
    self.names = dict(names or {})
    self.n = 0
    self.shared = {}

  def name(self, v):
    if type(v) is DropVar:
      return "_"
    s = self.names.get(v)
    if s is None:
      taken = self.shared.values()
      while (s := _encode_alpha(self.n)) in taken:
        self.n += 1
      s = self.names[v] = s + v.suffix
      self.n += 1
    return s

  def same_names(self, for_vars, like_vars):
    """Name ``for_vars`` (an inner jaxpr's binders) as the ``like_vars`` they alias (JAX's
    ``suggest_same_var_names``)."""
    if len(for_vars) != len(like_vars):
      return
    used = set()
    for f, like in zip(for_vars, like_vars):
      if type(like) is not Literal and like not in used and type(f) is not Literal \
          and f not in self.names:
        used.add(like)
        self.names[f] = self.name(like)


def _pp_atom(x, ctx):
  if type(x) is Literal:
    return f"{_literal_str(x.val)}:{x.aval.str_short()}"
  return ctx.name(x)


def _pp_vars(vs, ctx, *, binders=False, sep=""):
  if binders:
    items = [_Text(f"{ctx.name(v)}:{v.aval.str_short()}") for v in vs]
  else:
    items = [_Text(_pp_atom(v, ctx)) for v in vs]
  return _Nest(2, _Group(_join(_Text(sep) + _Group(_Brk()), items)))


def _pp_param(k, v, ctx):
  if isinstance(v, (Jaxpr, ClosedJaxpr)):
    pv = _pp_jaxpr_doc(v.jaxpr if isinstance(v, ClosedJaxpr) else v, ctx)
  elif type(v) in (tuple, list) and v and all(isinstance(j, (Jaxpr, ClosedJaxpr)) for j in v):
    docs = [_pp_jaxpr_doc(j.jaxpr if isinstance(j, ClosedJaxpr) else j, ctx) for j in v]
    pv = _Group(_Nest(2, _Text("(") + _Brk("") + _join(_Brk(), docs)) + _Brk("") + _Text(")"))
  else:
    pv = _Text(_param_str(v))
  return _Text(f"{k}=") + pv


def _param_str(v):
  if isinstance(v, np.dtype):
    return v.name
  if isinstance(v, type) and issubclass(v, np.generic):
    return np.dtype(v).name
  if isinstance(v, frozenset):
    return "frozenset({" + ", ".join(repr(e) for e in sorted(v)) + "})"
  if callable(v) and not isinstance(v, (str, tuple, list)):
    name = getattr(v, "__name__", None)
    if name is not None:
      return name
  s = str(v)
  return re.sub(r" at 0x([0-9a-fA-F]+)", lambda m: " at 0x" + "X" * len(m.group(1)), s)


def _pp_params(params, ctx, name_first=True):
  if not params:
    return _Concat(())
  # JAX prints params sorted, except that a call's name comes first (``jit[name=f jaxpr=...]``)
  # (a map primitive, xla_pmap, keeps them all sorted, as seed 001 prints it)
  keys = sorted(params, key=lambda k: (k != "name" or not name_first, k))
  pairs = [_pp_param(k, params[k], ctx) for k in keys]
  return _Group(_Nest(2, _Text("[") + _Brk("") + _join(_Brk(), pairs)) + _Brk("") + _Text("]"))


def _pp_eqn_doc(eqn, ctx):
  if getattr(eqn.primitive, "pp_same_names", False):  # (jit: the inner binders read as the
    inner = eqn.params["jaxpr"].jaxpr                # call's operands and results)
    if inner not in ctx.shared:
      ctx.same_names(inner.invars, eqn.invars)
      ctx.same_names(inner.outvars, eqn.outvars)
  lhs = _pp_vars(eqn.outvars, ctx, binders=True)  # outputs are named first, as JAX does
  rule = getattr(eqn.primitive, "pp_eqn", None)  # its own layout (the state primitives')
  if rule is not None:
    return _Text(rule(eqn, lhs.format(1 << 30),
                      [_pp_vars([a], ctx).format(1 << 30) for a in eqn.invars]))
  pp = getattr(eqn.primitive, "pp_params", None)  # a primitive may show its params its own way
  rhs = [_Text(eqn.primitive.name), _pp_params(pp(eqn.params) if pp else eqn.params, ctx,
                                              getattr(eqn.primitive, "pp_name_first",
                                                      not eqn.primitive.map_primitive)),
         _Text(" ") + _pp_vars(eqn.invars, ctx)]
  if eqn.outvars:
    return _Concat([lhs, _Text(" = "), *rhs])
  return _Concat(rhs)


def _pp_jaxpr_doc(jaxpr, ctx):
  name = ctx.shared.get(jaxpr)
  if name is not None:
    return _Text(name)
  return _pp_jaxpr_body(jaxpr, ctx)


def _pp_jaxpr_body(jaxpr, ctx):
  constvars = _pp_vars(jaxpr.constvars, ctx, binders=True)
  invars = _pp_vars(jaxpr.invars, ctx, binders=True)
  eqns = _join(_Brk("; "), [_pp_eqn_doc(e, ctx) for e in jaxpr.eqns])
  outs = _Text("(") + _pp_vars(jaxpr.outvars, ctx, sep=",") + _Text(
      ")" if len(jaxpr.outvars) != 1 else ",)")
  return _Group(_Nest(2, _Concat([
      _Text("{ lambda "), constvars, _Text("; "), invars, _Text(". let"),
      _Nest(2, _Brk() + eqns), _Brk(), _Text("in "), outs]))) + _Text(" }")


def _dropvars(jaxpr):
  """The top-level equations' outputs nothing reads, which print as ``_`` (JAX's ``_dropvars``)."""
  names, used = {}, {v for v in jaxpr.outvars if type(v) is not Literal}
  for eqn in reversed(jaxpr.eqns):
    for v in eqn.outvars:
      if v not in used:
        names[v] = "_"
    used.update(v for v in eqn.invars if type(v) is not Literal)
  return names


def _shared_jaxprs(top):
  """``[(name, jaxpr)]``: the inner jaxprs printed once up front as ``let name = ... in``
  (JAX's): those used more than once, and those of more than 10 equations; each named after
  the first equation holding it that has a ``name`` param, made unique with a count."""
  counts, names, queue = {}, {}, collections.deque([top])
  while queue:
    j = queue.popleft()
    counts[j] = counts.get(j, 0) + 1 + (j is not top and len(j.eqns) > 10)
    for eqn in j.eqns:
      name = eqn.params.get("name")
      for sub in jaxprs_in_params(eqn.params):
        queue.append(sub)
        if isinstance(name, str):
          names.setdefault(sub, name.strip("<>"))
  used, shared = collections.Counter(), []
  for j, c in counts.items():
    if c > 1:
      name = names.get(j, "jaxpr")
      if (k := used[name]) > 0:
        used[name] += 1
        name += str(k)
      used[name] += 1
      shared.append((name, j))
  return shared


def pp_jaxpr(jaxpr, *, width=80, **_):
  """The jaxpr in today's JAX text format."""
  if isinstance(jaxpr, ClosedJaxpr):
    jaxpr = jaxpr.jaxpr
  ctx = _PpContext(_dropvars(jaxpr))
  shared = _shared_jaxprs(jaxpr)
  ctx.shared = {j: name for name, j in shared}
  docs = [_Text(f"let {name} = ") + _pp_jaxpr_body(j, ctx) + _Text(" in") + _Brk()
          for name, j in shared]
  return _Concat(docs + [_pp_jaxpr_doc(jaxpr, ctx)]).format(width)


def pp_eqn_str(eqn, width=80):
  return _pp_eqn_doc(eqn, _PpContext()).format(width)
