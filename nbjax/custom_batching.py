"""``nbjax.custom_batching``: JAX's ``custom_vmap`` (a function with its own batching rule)
and ``sequential_vmap``.

Sits beside ``custom_derivatives``. Calling a ``custom_vmap`` function eagerly runs the
function; under any other trace it stages the function to a jaxpr and binds
``custom_vmap_call`` (JAX's ``custom_vmap_p``) with that jaxpr (``call``) and the rule, so
the equation survives ``jit`` and later transformations see the rule:

- batching calls the rule with the batch axes in front (``in_batched`` says which);
- the JVP binds ``custom_vmap_call`` again on primals and tangents, with the JVP of ``call``
  and a rule that is the JVP of the user's rule (``vmap(jvp(f))`` uses the rule too);
- linearize (``grad``, ``vjp``) cannot split it into known primal and unknown tangent work:
  JAX's error; combine with ``custom_vjp`` for reverse mode;
- evaluation and lowering run ``call``.
"""
from __future__ import annotations

import functools
import operator
import weakref

from nbjax import core, registry
from nbjax.core import Primitive, get_aval, set_current_trace
from nbjax.custom_derivatives import _forward_attr, _name, _Resolver
from nbjax.interpreters import ad, batching, lowering
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import ClosedJaxpr, eval_jaxpr
from nbjax._tree_util import (broadcast_prefix, tree_flatten, tree_leaves, tree_map,
                             tree_structure, tree_unflatten, treedef_tuple)

__all__ = ["custom_vmap", "sequential_vmap", "custom_vmap_p"]


class custom_vmap:
  """A function with a custom batching rule (JAX's ``jax.custom_batching.custom_vmap``).

  ``f.def_vmap(rule)`` sets ``rule(axis_size, in_batched, *args) -> (out, out_batched)``:
  ``in_batched`` has one pytree of bools per argument (True where that leaf is batched, its
  batch axis then leading), ``out_batched`` is a pytree of bools matching ``out``.
  ``custom_vmap`` functions do not support reverse-mode autodiff; wrap one in
  ``custom_vjp`` for that.

  >>> @custom_vmap
  ... def f(x):
  ...   return jnp.sin(x)
  >>> @f.def_vmap
  ... def rule(axis_size, in_batched, x):
  ...   return jnp.cos(x), in_batched[0]
  """

  def __init__(self, fun):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.vmap_rule = None
    self._closed_rule = None
    self._resolve = _Resolver(fun)

  __getattr__ = _forward_attr

  def def_vmap(self, vmap_rule):
    """Set the batching rule; returns it (a decorator)."""
    self.vmap_rule = vmap_rule
    self._closed_rule = ClosedRule(vmap_rule)
    registry.bump_epoch()  # replayed traces (eager_cache) may hold the old rule
    return vmap_rule

  def __call__(self, *args, **kwargs):
    name = _name(self.fun)
    args = self._resolve(args, kwargs, "custom_vmap", name)
    if self.vmap_rule is None:
      raise AttributeError(f"No batching rule defined for custom_vmap function {name} using "
                           "def_vmap.")
    if core._ctx.trace is core.eval_trace:  # what custom_vmap_call's evaluation does
      return self.fun(*args)
    args_flat, in_tree = tree_flatten(args)
    box = []

    def flat(*xs):
      out, tree = tree_flatten(self.fun(*tree_unflatten(in_tree, xs)))
      box.append(tree)
      return out
    flat.__name__ = name
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat, [get_aval(x) for x in args_flat])
    call = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
    out_tree = box[0]
    outs = custom_vmap_p.bind(*consts, *args_flat, call=call, rule=self._closed_rule,
                              in_tree=treedef_tuple((tree_structure(consts), in_tree)),
                              out_tree=out_tree)
    return tree_unflatten(out_tree, outs)


class ClosedRule:
  """The user's rule as ``custom_vmap_call`` calls it: on ``(consts, args)``, the values the
  function closed over first (they must be unbatched). Prints as the rule."""

  def __init__(self, rule):
    functools.update_wrapper(self, rule)
    self.rule = rule

  def __call__(self, axis_size, all_in_batched, *all_args):
    _, args = all_args
    consts_batched, in_batched = all_in_batched
    if any(tree_leaves(consts_batched)):
      raise ValueError(f"custom vmap rule {_rule_name(self.rule)}: the custom_vmap function "
                       "closes over a value batched by this vmap; pass it as an argument")
    return _call_rule(self.rule, axis_size, in_batched, args)

  def __repr__(self):
    return repr(self.rule)

  __str__ = __repr__


def _rule_name(rule):
  return getattr(rule, "__name__", "<unnamed rule>")


def _call_rule(rule, axis_size, in_batched, args):
  return rule(axis_size, list(in_batched), *args)


def _check_rule_trees(rule, original_out_tree, out_tree, out_batched_tree):
  if out_tree != out_batched_tree:
    raise ValueError("structure of output value and output batching specification returned "
                     f"by custom vmap rule ({_rule_name(rule)}) do not match.\n"
                     f"Output values: {out_tree}\nBatching spec: {out_batched_tree}")
  if out_tree != original_out_tree:
    raise ValueError(f"structure of output returned by custom vmap rule ({_rule_name(rule)}) "
                     "does not match that of original custom-vmapped function.\n"
                     f"Original output: {original_out_tree}\nRule output: {out_tree}")


def _front(x, d):
  """``x`` with batch axis ``d`` first (unmapped values stay unbroadcast)."""
  return x if d is batching.not_mapped else batching.moveaxis(x, d, 0)


def _vmap_unrestricted(f, args, in_axes, axis_size):
  """``vmap`` of flat ``f`` over ``in_axes`` (None: unmapped) returning the outputs with the
  batch axes they came out with (None: unbatched), instead of matching a spec."""
  trace = batching.BatchTrace(core.get_current_trace(), core.new_trace_tag(), axis_size)
  ins = [x if d is None else batching.BatchTracer(trace, x, d) for x, d in zip(args, in_axes)]
  with set_current_trace(trace):
    outs = f(*ins)
  vals, dims = core.unzip2(map(trace.to_batch_info, outs))
  return list(vals), [None if d is batching.not_mapped else d for d in dims]


# ----------------------------------------------------------------------------- the primitive


def _impl(*args, call, **_):
  return eval_jaxpr(call.jaxpr, call.consts, *args)


def _abstract_eval(*in_avals, call, **_):
  return list(call.out_avals)


def _batch(axis_data, vals, dims, *, call, rule, in_tree, out_tree):
  size = axis_data.size
  args = tree_unflatten(in_tree, list(map(_front, vals, dims)))
  in_batched = tree_unflatten(in_tree, [d is not batching.not_mapped for d in dims])
  out, out_batched = _call_rule(rule, size, in_batched, args)
  flat_outs, tree1 = tree_flatten(out)
  flat_batched, tree2 = tree_flatten(out_batched)
  _check_rule_trees(rule, out_tree, tree1, tree2)
  for o, b in zip(flat_outs, flat_batched):
    if b and get_aval(o).shape[:1] != (size,):
      raise ValueError(f"custom vmap rule {_rule_name(rule)} returned an output marked "
                       f"batched whose leading axis is not of size {size}: shape "
                       f"{get_aval(o).shape}")
  return flat_outs, [0 if b else batching.not_mapped for b in flat_batched]


_batch.wants_axis_data = True

_jvp_calls: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _jvp_call(call):
  """``call``'s JVP as a jaxpr: primals and tangents in, primals and tangents out (every
  tangent instantiated)."""
  hit = _jvp_calls.get(call)
  if hit is not None:
    return hit
  n = len(call.in_avals)

  def fun(*xs):
    trace = ad.JVPTrace(core.get_current_trace(), core.new_trace_tag())
    ins = [ad.JVPTracer(trace, p, t) for p, t in zip(xs[:n], xs[n:])]
    with set_current_trace(trace):
      outs = eval_jaxpr(call.jaxpr, call.consts, *ins)
    pairs = [trace.to_primal_tangent_pair(o) for o in outs]
    return [p for p, _ in pairs] + [ad.instantiate_zeros(t) for _, t in pairs]
  fun.__name__ = "jvp"
  avals = call.in_avals
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(
      fun, [*avals, *[a.to_tangent_aval() for a in avals]])
  res = _jvp_calls[call] = ClosedJaxpr(jaxpr, consts)
  return res


def _jvp(primals, tangents, *, call, rule, in_tree, out_tree):
  """JAX's ``custom_vmap_jvp``: ``custom_vmap_call`` of ``call``'s JVP whose rule is the JVP
  of ``rule``, vmapped over the axes where only primals or only tangents are batched."""
  def jvp_of_rule_rule(axis_size, in_batched, primals, tangents):
    from nbjax import api
    in_batched_ps, in_batched_ts = in_batched
    mutually_batched = tree_map(operator.and_, in_batched_ps, in_batched_ts)
    extra_ps = tree_map(lambda pb, tb: 0 if pb and not tb else None,
                        in_batched_ps, in_batched_ts)
    extra_ts = tree_map(lambda pb, tb: 0 if tb and not pb else None,
                        in_batched_ps, in_batched_ts)
    out_mutually_batched = []

    def to_jvp(*primals):
      out, out_batched = _call_rule(rule, axis_size, mutually_batched, primals)
      _check_rule_trees(rule, out_tree, tree_structure(out), tree_structure(out_batched))
      out_mutually_batched.append(out_batched)
      return out

    flat_ps_ts, tree_ps_ts = tree_flatten((primals, tangents))
    flat_extra = tree_leaves((extra_ps, extra_ts), is_leaf=lambda x: x is None)
    box = []

    def flat(*xs):
      ps, ts = tree_unflatten(tree_ps_ts, xs)
      out, tree = tree_flatten(api.jvp(to_jvp, ps, ts))
      box.append(tree)
      return out
    outs, axes = _vmap_unrestricted(flat, flat_ps_ts, flat_extra, axis_size)
    outs = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(outs, axes)]
    out_ps, out_ts = tree_unflatten(box[0], outs)
    extra_out_ps, extra_out_ts = tree_unflatten(box[0], [d is not None for d in axes])
    batched_ps = tree_map(operator.or_, out_mutually_batched[0], extra_out_ps)
    batched_ts = tree_map(operator.or_, out_mutually_batched[0], extra_out_ts)
    return (out_ps, out_ts), (batched_ps, batched_ts)
  jvp_of_rule_rule.__name__ = f"jvp_of_{_rule_name(rule)}"

  tangents = [ad.instantiate_zeros(t) for t in tangents]
  outs = custom_vmap_p.bind(*primals, *tangents, call=_jvp_call(call), rule=jvp_of_rule_rule,
                            in_tree=treedef_tuple((in_tree, in_tree)),
                            out_tree=treedef_tuple((out_tree, out_tree)))
  n = len(outs) // 2
  return outs[:n], outs[n:]


def _lowering(ctx, *args, call, **_):
  from nbjax.interpreters import mlir
  consts = mlir._const_values(call.consts, [v.aval for v in call.jaxpr.constvars])
  return mlir.jaxpr_subcomp(ctx.module_context, call.jaxpr, consts, list(args))


custom_vmap_p = Primitive("custom_vmap_call")
custom_vmap_p.multiple_results = True
custom_vmap_p.make_eager = lambda prim, f_small, f_large, thr: _impl
registry.register(
    custom_vmap_p, family="call", impls={"python": _impl}, abstract_eval=_abstract_eval,
    jvp=_jvp, batch=_batch,
    meta=dict(differentiable=False, note="call primitive: its function runs eagerly; vmap "
              "calls the user's rule, jvp the rule's jvp; no reverse mode"))
lowering.register(custom_vmap_p, _lowering)


# ----------------------------------------------------------------------------- applications


def sequential_vmap(f):
  """A ``custom_vmap`` whose batching rule loops over the batch with ``lax.map``: for a
  function that does not batch natively."""
  from nbjax import lax

  f = custom_vmap(f)

  @f.def_vmap
  def rule(axis_size, in_batched, *args):
    leaves, tree = tree_flatten(list(args))
    flags = broadcast_prefix(in_batched, list(args))
    mapped = [x for x, b in zip(leaves, flags) if b]

    def one(xs):
      it = iter(xs)
      return f(*tree_unflatten(tree, [next(it) if b else x for x, b in zip(leaves, flags)]))
    out = lax.map(one, mapped)
    return out, tree_map(lambda _: True, out)
  return f
