"""Forward-mode autodiff: the JVP trace, symbolic zeros, and rule-definition helpers.

Pipeline position: ``jvp(f)`` pushes a ``JVPTrace`` whose ``process_primitive`` applies the
primitive's jvp rule (``prim.jvp``, also reachable as ``ad.primitive_jvps[prim]``) with the
parent trace current, so the rule's own binds land one level down. Tangents that are known
to be zero are the symbolic ``Zero(aval)`` and cost nothing. Reverse mode (linearize +
transpose) reuses these rules plus ``prim.transpose`` (``ad.primitive_transposes``).
``custom_jvp``/``custom_vjp`` functions reach the trace through ``process_custom_jvp_call`` /
``process_custom_vjp_call``; a custom_vjp's tangent map is the linear ``custom_lin``, whose
transpose calls the user's backward rule.
"""
from __future__ import annotations

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.core import Trace, Tracer, get_aval, set_current_trace

# ``nbjax.lax`` (a layer above) installs itself here when imported: the array operations the
# helpers below need (zeros, add_any, transpose...) without an import pointing up.
_lax = None

primitive_jvps = registry.RuleView("jvp", "jvp")
primitive_transposes = registry.RuleView("transpose", "transpose")


class Zero:
  """A symbolic zero tangent/cotangent of abstract value ``aval``."""
  __slots__ = ("aval",)

  def __init__(self, aval):
    self.aval = aval

  @staticmethod
  def from_primal_value(x):
    return Zero(get_aval(x).to_tangent_aval())

  from_value = from_primal_value
  shape = property(lambda self: self.aval.shape)
  dtype = property(lambda self: self.aval.dtype)

  def __repr__(self):
    return f"Zero({self.aval})"


SymbolicZero = Zero


class UndefinedPrimal:
  """Marks a linear input of a transpose rule (its value is not known)."""
  __slots__ = ("aval",)

  def __init__(self, aval):
    self.aval = aval

  def __repr__(self):
    return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x):
  return type(x) is UndefinedPrimal


def zeros_like_aval(aval):
  if aval.dtype == dtypes.float0:
    from nbjax.array import Array
    return Array(np.zeros(aval.shape, dtypes.float0))
  return _lax.elementwise._full(aval.shape, 0, aval.dtype, aval.weak_type)  # JAX's: keeps weak


def instantiate_zeros(t):
  return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(x, y):
  if type(x) is Zero:
    return y
  if type(y) is Zero:
    return x
  return _lax.add_any(x, y)


add_jaxvals = add_tangents


def zeros_like_jaxval(x):
  return zeros_like_aval(get_aval(x))


# ------------------------------------------------------------------------ the trace


class JVPTracer(Tracer):
  __slots__ = ("primal", "tangent", "_aval")

  def __init__(self, trace, primal, tangent):
    self._trace, self.primal, self.tangent, self._aval = trace, primal, tangent, None

  def __repr__(self):  # JAX's: ``JVPTracer(primal=1.0, tangent=1.0)``; under linearize
    if self._trace.linearize:  # (vjp, grad, jacrev) JAX's LinearizeTracer, a ``GradTracer``
      return (f"GradTracer(primal={self.primal}, "
              f"typeof(tangent)={self.aval.to_tangent_aval().str_short(True)})")
    return f"JVPTracer(primal={self.primal}, tangent={self.tangent})"

  @property
  def aval(self):
    a = self._aval
    if a is None:
      a = self._aval = get_aval(self.primal)
    return a

  def to_concrete_value(self):
    return core.concrete_aval_or_none(self.primal)

  def full_lower(self):
    return self.primal if type(self.tangent) is Zero else self


class JVPTrace(Trace):
  linearize = False  # True where the tangents are staged (``linearize_flat``)

  def __init__(self, parent_trace, tag):
    self.parent_trace, self.tag = parent_trace, tag

  def to_primal_tangent_pair(self, val):
    if isinstance(val, JVPTracer) and val._trace.tag is self.tag:
      return val.primal, val.tangent
    return val, Zero.from_primal_value(val)

  def process_primitive(self, prim, tracers, params):
    primals, tangents = core.unzip2(map(self.to_primal_tangent_pair, tracers))
    primals, tangents = tuple(primals), tuple(tangents)  # (a rule gets tuples, as JAX's)
    if all(type(t) is Zero for t in tangents) and not prim.rule_always:
      with set_current_trace(self.parent_trace):
        return prim.bind(*primals, **params)
    rule = prim.jvp
    if rule is None:
      raise registry.missing_rule("jvp", prim)
    ctx = core._ctx
    prev, ctx.trace = ctx.trace, self.parent_trace
    try:
      primal_out, tangent_out = rule(primals, tangents, **params)
    finally:
      ctx.trace = prev
    if prim.multiple_results:
      return [maybe_jvp_tracer(self, p, t) for p, t in zip(primal_out, tangent_out)]
    return maybe_jvp_tracer(self, primal_out, tangent_out)

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    primals, tangents = core.unzip2(map(self.to_primal_tangent_pair, tracers))
    if all(type(t) is Zero for t in tangents):
      return prim.bind_with_trace(self.parent_trace, fun, jvp, primals, symbolic_zeros)
    with set_current_trace(self.parent_trace):
      if not symbolic_zeros:
        tangents = [instantiate_zeros(t) for t in tangents]
      outs = jvp(*primals, *tangents)
    n = len(outs) // 2
    return [maybe_jvp_tracer(self, p, t) for p, t in zip(outs[:n], outs[n:])]

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    """The forward rule on the primals; on the tangents ``custom_lin``, linear, which the
    backward pass transposes by calling ``bwd`` (evaluating it forward is an error)."""
    primals, tangents = core.unzip2(map(self.to_primal_tangent_pair, tracers))
    if all(type(t) is Zero for t in tangents):
      return prim.bind_with_trace(self.parent_trace, fun, fwd, bwd, primals, out_trees,
                                  symbolic_zeros)
    in_zeros = tuple(type(t) is Zero for t in tangents)
    with set_current_trace(self.parent_trace):
      outs = fwd(*[v for p, z in zip(primals, in_zeros) for v in (p, not z)])
      num_res = out_trees()[1].num_leaves
      res, primals_out = outs[:num_res], outs[num_res:]
      out_avals = tuple(get_aval(p).to_tangent_aval() for p in primals_out)
      tangents_out = custom_lin_p.bind(
          *res, *[t for t in tangents if type(t) is not Zero], num_res=num_res, bwd=bwd,
          out_avals=out_avals, symbolic_zeros=symbolic_zeros, in_zeros=in_zeros)
    return [p if a.dtype == dtypes.float0 else maybe_jvp_tracer(self, p, t)
            for p, t, a in zip(primals_out, tangents_out, out_avals)]

  def __repr__(self):
    return "JVPTrace"


def maybe_jvp_tracer(trace, primal, tangent):
  if type(tangent) is Zero:
    return primal
  return JVPTracer(trace, primal, tangent)


# ------------------------------------------------------------------------ rule helpers


def _bind_primal(prim, primals, params):
  return prim.bind(*primals, **params)


def defjvp(prim, *jvprules):
  """Per-argument jvp: ``jvprules[i](g, *primals, **params)`` is argument i's tangent term."""
  def rule(primals, tangents, **params):
    ans = prim.bind(*primals, **params)
    return ans, _sum_terms(prim, ans, [r(t, *primals, **params) for r, t in zip(jvprules, tangents)
                                        if r is not None and type(t) is not Zero])
  prim.jvp = rule
  return rule


def defjvp2(prim, *jvprules):
  """Like ``defjvp`` but rules also get the output: ``jvprules[i](g, ans, *primals, **params)``."""
  def rule(primals, tangents, **params):
    ans = prim.bind(*primals, **params)
    return ans, _sum_terms(prim, ans, [r(t, ans, *primals, **params) for r, t in zip(jvprules, tangents)
                                        if r is not None and type(t) is not Zero])
  prim.jvp = rule
  return rule


def _sum_terms(prim, ans, terms):
  if not terms:
    return Zero.from_primal_value(ans)
  out = terms[0]
  for t in terms[1:]:
    out = add_tangents(out, t)
  return out


def defjvp_zero(prim):
  """Piecewise-constant or non-differentiable output: the tangent is a symbolic zero."""
  def rule(primals, tangents, **params):
    ans = prim.bind(*primals, **params)
    if prim.multiple_results:
      return ans, [Zero.from_primal_value(a) for a in ans]
    return ans, Zero.from_primal_value(ans)
  prim.jvp = rule
  return rule


def linear_jvp(prim, primals, tangents, **params):
  val_out = prim.bind(*primals, **params)
  if all(type(t) is Zero for t in tangents):
    return val_out, (Zero.from_primal_value(val_out) if not prim.multiple_results
                     else [Zero.from_primal_value(v) for v in val_out])
  return val_out, prim.bind(*map(instantiate_zeros, tangents), **params)


def deflinear(prim, transpose_rule):
  """A linear primitive: jvp binds it on the tangents; ``transpose_rule(ct, **params)``."""
  prim.jvp = lambda primals, tangents, **params: linear_jvp(prim, primals, tangents, **params)

  def transpose(ct, *args, **params):
    if type(ct) is Zero:
      return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
    return transpose_rule(ct, **params)
  prim.transpose = transpose


def deflinear2(prim, transpose_rule):
  """Linear primitive whose transpose needs the (undefined) operands: ``rule(ct, *args, **params)``."""
  prim.jvp = lambda primals, tangents, **params: linear_jvp(prim, primals, tangents, **params)

  def transpose(ct, *args, **params):
    if type(ct) is Zero:
      return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
    return transpose_rule(ct, *args, **params)
  prim.transpose = transpose


def defbilinear(prim, lhs_rule, rhs_rule):
  """``prim(x, y)`` linear in each argument (mul, dot_general). Rules transpose one side."""
  defjvp(prim, lambda g, x, y, **p: prim.bind(g, y, **p), lambda g, x, y, **p: prim.bind(x, g, **p))

  def transpose(ct, x, y, **params):
    if type(ct) is Zero:
      return [Zero(x.aval) if is_undefined_primal(x) else None,
              Zero(y.aval) if is_undefined_primal(y) else None]
    if is_undefined_primal(x):
      return [lhs_rule(ct, x, y, **params), None]
    return [None, rhs_rule(ct, x, y, **params)]
  prim.transpose = transpose


# ------------------------------------------------------------------------ transposition


def backward_pass(jaxpr, consts, args, cts_out, wanted=None):
  """Transpose a jaxpr that is linear in the ``args`` given as ``UndefinedPrimal``.

  Equations whose inputs are all known are evaluated forward (residual work); the rest are
  transposed in reverse order with each primitive's transpose rule. Returns the cotangents of
  the undefined args (``Zero`` when nothing flows back) and ``None`` for the known ones.
  ``wanted`` (a bool per invar): only the equations that reach a wanted one are transposed.
  """
  from nbjax.jaxpr import ClosedJaxpr, Literal
  from nbjax.interpreters import lowering
  d = lowering.discharge_hook  # refs created inside (nbjax.state): transposed discharged
  if d is not None and d[0](jaxpr) and not any(  # (refs it is given: used as they are)
      type(v.aval) is core.AbstractRef for v in (*jaxpr.constvars, *jaxpr.invars)):
    closed = d[1](ClosedJaxpr(jaxpr, consts))
    jaxpr, consts = closed.jaxpr, closed.consts
  primal_env, ct_env = {}, {}

  def read_primal(x):
    return x.val if type(x) is Literal else primal_env.get(x, UndefinedPrimal(x.aval))

  def write_cotangent(x, ct):
    if type(x) is not Literal and ct is not None and type(ct) is not Zero:
      ct_env[x] = add_tangents(ct_env[x], ct) if x in ct_env else ct

  for v, x in zip(jaxpr.constvars, consts):
    primal_env[v] = x
  for v, x in zip(jaxpr.invars, args):
    if not is_undefined_primal(x):
      primal_env[v] = x
  linear = []
  for eqn in jaxpr.eqns:
    ins = [read_primal(x) for x in eqn.invars]
    if any(is_undefined_primal(x) for x in ins):
      linear.append(eqn)
      continue
    outs = eqn.primitive.bind(*ins, **eqn.params)
    for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]):
      primal_env[v] = o
  if wanted is not None:
    live = {v for v, w in zip(jaxpr.invars, wanted) if w}
    linear = [e for e in linear if any(type(x) is not Literal and x in live for x in e.invars)
              and not live.update(e.outvars)]
  for v, ct in zip(jaxpr.outvars, cts_out):
    write_cotangent(v, ct)
  for eqn in reversed(linear):
    cts_in = [ct_env.pop(v, Zero(v.aval.to_tangent_aval())) for v in eqn.outvars]
    if all(type(c) is Zero for c in cts_in):  # nothing flows back through it
      continue
    rule = eqn.primitive.transpose
    if rule is None:
      raise registry.missing_rule("transpose", eqn.primitive)
    cts = rule(cts_in if eqn.primitive.multiple_results else cts_in[0],
               *[read_primal(x) for x in eqn.invars], **eqn.params)
    for x, ct in zip(eqn.invars, cts):
      write_cotangent(x, ct)
  out = [ct_env.pop(v, Zero(v.aval.to_tangent_aval())) if is_undefined_primal(x) else None
         for v, x in zip(jaxpr.invars, args)]
  if core.sharding_rule_hook is not None:  # (Explicit mesh axes: a cotangent as its primal)
    from nbjax.interpreters.sharding_types import match_cotangent
    out = [c if c is None or type(c) is Zero else match_cotangent(c, v.aval)
           for c, v in zip(out, jaxpr.invars)]
  return out


# ------------------------------------------------------------------------ custom_vjp's linear part


def raise_custom_vjp_error_on_jvp(*_, **__):
  raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


class CustomVJPException(Exception):
  def __init__(self):
    super().__init__(
        "Detected differentiation of a custom_vjp function with respect to a closed-over "
        "value. That isn't supported because the custom VJP rule only specifies how to "
        "differentiate the custom_vjp function with respect to explicit input parameters. "
        "Try passing the closed-over value into the custom_vjp function as an argument, and "
        "adapting the custom_vjp fwd and bwd rules.")


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, symbolic_zeros, in_zeros):
  del out_avals
  if not symbolic_zeros:
    cts = [instantiate_zeros(c) for c in cts]
  cts_in = bwd(*args[:num_res], *cts)
  return [None] * num_res + [c for c, z in zip(cts_in, in_zeros) if not z]


def _custom_lin_pp_params(params):
  p = {k: v for k, v in params.items() if k != "out_avals"}
  p["in_zeros"] = list(p["in_zeros"])
  return p


# ``custom_lin(*residuals, *nonzero_tangents)``: the tangent map of a custom_vjp function,
# known only through its transpose (the user's bwd rule).
custom_lin_p = core.Primitive("custom_lin")
custom_lin_p.multiple_results = True
custom_lin_p.def_abstract_eval(lambda *_, out_avals, **__: list(out_avals))
custom_lin_p.def_impl(raise_custom_vjp_error_on_jvp)
custom_lin_p.jvp = raise_custom_vjp_error_on_jvp
custom_lin_p.batch = raise_custom_vjp_error_on_jvp
custom_lin_p.transpose = _custom_lin_transpose
custom_lin_p.pp_params = _custom_lin_pp_params
custom_lin_p.family = "call"
custom_lin_p.meta["differentiable"] = False  # differentiating it is JAX's custom_vjp error
custom_lin_p.meta["note"] = ("a custom_vjp's linear tangent map: only transposed (to the bwd "
                             "rule); evaluating or batching it is JAX's custom_vjp error")
custom_lin_p.lowerings["cpu"] = raise_custom_vjp_error_on_jvp

# ------------------------------------------------------------------------ linearize


class Linearized:
  """The linear part of a function at a point (seed 003 Part 4): ``jaxpr`` maps the tangents
  of the differentiable inputs (``in_nz``) to the nonzero output tangents (``out_nz``),
  reading the residuals ``consts``; ``in_avals``/``out_avals`` are all tangent avals."""
  __slots__ = ("jaxpr", "consts", "in_nz", "out_nz", "in_avals", "out_avals")

  def jvp(self, tangents, consts=None):
    """Output tangents (zeros instantiated) for input tangents (one per input); ``consts``:
    the residuals, where they are held elsewhere (``self.consts`` None)."""
    from nbjax.jaxpr import eval_jaxpr
    ts = [t for t, nz in zip(tangents, self.in_nz) if nz]
    outs = iter(eval_jaxpr(self.jaxpr, self.consts if consts is None else consts, *ts))
    return [next(outs) if nz else zeros_like_aval(a) for a, nz in zip(self.out_avals, self.out_nz)]

  def vjp(self, cts, consts=None, wanted=None):
    """Input cotangents (``Zero`` where none flows back) for output cotangents; ``consts`` as
    for ``jvp``; ``wanted`` (a bool per input): those not wanted may be ``Zero``."""
    cts = [c for c, nz in zip(cts, self.out_nz) if nz]  # symbolic zeros stay symbolic
    undef = [UndefinedPrimal(v.aval) for v in self.jaxpr.invars]
    if wanted is not None:
      wanted = [w for w, nz in zip(wanted, self.in_nz) if nz]
    it = iter(backward_pass(self.jaxpr, self.consts if consts is None else consts, undef, cts,
                            wanted))
    return [next(it) if nz else Zero(a) for a, nz in zip(self.in_avals, self.in_nz)]


def _dce_linear(jaxpr, consts):
  """The linear jaxpr without the tangent work no output reads, and without the residuals
  only that work read (JAX's linearize DCEs too: ``saved_residuals`` of ``softmax`` with a
  ``stop_gradient`` keeps none of ``max``'s tangent)."""
  from nbjax.jaxpr import Var
  live = {v for v in jaxpr.outvars if type(v) is Var}
  for e in reversed(jaxpr.eqns):
    if e.effects or any(v in live for v in e.outvars):
      live.update(x for x in e.invars if type(x) is Var)
    else:
      break  # (a dead equation: DCE properly)
  else:
    return jaxpr, consts
  from nbjax.interpreters import partial_eval as pe
  new, used_consts, _ = pe.dce_jaxpr_consts(jaxpr, True, True)
  return new, [c for c, u in zip(consts, used_consts) if u]


def linearize_flat(fun, primals, in_nz=None, array_consts=False):
  """Run ``fun`` (flat inputs -> flat outputs) under a JVP trace on a partial-evaluation trace:
  primal work runs now on the current trace, tangent work is staged. Returns
  ``(primals_out, Linearized)``. ``in_nz``: which inputs to differentiate (default: every
  inexact one); ``array_consts``: scalar Array residuals are consts too, not literals."""
  from nbjax.interpreters import partial_eval as pe
  avals = [get_aval(p) for p in primals]
  if in_nz is None:
    in_nz = [dtypes.is_inexact(a.dtype) for a in avals]
  pt = pe.JaxprTrace(getattr(fun, "__name__", None), core.get_current_trace())
  pt.array_consts = array_consts
  jt = JVPTrace(pt, core.new_trace_tag())
  jt.linearize = True
  ins = [JVPTracer(jt, p, pt.new_arg(a.to_tangent_aval())) if nz else p
         for p, a, nz in zip(primals, avals, in_nz)]
  try:
    with set_current_trace(jt):
      outs = fun(*ins)
    pairs = [jt.to_primal_tangent_pair(o) for o in outs]
    primals_out = [p for p, _ in pairs]
    for p in primals_out:
      if type(p) is pe.JaxprTracer and p._trace is pt:
        raise ValueError(
            "Linearization failed to produce known values for all output primals. This is "
            "typically caused by attempting to differentiate a function uses an operation "
            "that does not support reverse-mode autodiff.")
    out_avals = [get_aval(p).to_tangent_aval() for p in primals_out]
    out_nz = [type(t) is not Zero and a.dtype != dtypes.float0 for (_, t), a in zip(pairs, out_avals)]
    jaxpr, consts = pt.to_jaxpr([pt.to_jaxpr_tracer(t) for (_, t), nz in zip(pairs, out_nz) if nz])
    jaxpr, consts = _dce_linear(jaxpr, consts)
  finally:
    pt.invalidate()
  lin = Linearized()
  lin.jaxpr, lin.consts, lin.in_nz, lin.out_nz = jaxpr, consts, in_nz, out_nz
  lin.in_avals, lin.out_avals = [a.to_tangent_aval() for a in avals], out_avals
  return primals_out, lin
