"""``checkpoint`` (``remat``): trade recomputation for memory in reverse mode (the public
names are in ``nbjax.ad_checkpoint`` and at the top level).

Pipeline position: ``checkpoint(f)(*args)`` stages ``f`` to a jaxpr (cached per signature)
and binds the call primitive ``checkpoint_p`` with it. Evaluated, the jaxpr simply runs. Under
``linearize`` its partial-evaluation rule is what differs from ``jit``'s: the known call
computes the primal outputs and saves only the residuals the ``policy`` allows (by default
none but the inputs), and the unknown call *recomputes* the rest of the primal work from them
before the tangent work, so the backward pass holds inputs instead of every intermediate.
jvp and batching re-stage the inner jaxpr (``pjit.jvp_jaxpr``/``batch_jaxpr``); the lowering
emits a private function; the transpose runs ``ad.backward_pass`` over the inner jaxpr, whose
forward (non-linear) equations are the recomputation.
"""
from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Sequence

import numpy as np

from nbjax import core, registry
from nbjax.traceback_util import api_boundary
from nbjax.array import owned
from nbjax.core import Primitive, get_aval
from nbjax.interpreters import ad, pjit
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr, jaxpr_effects,
                         remat_allowed_effects, remat_saving_effects)
from nbjax._tree_util import broadcast_prefix, tree_flatten, tree_unflatten

_log = logging.getLogger(__name__)

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_p", "checkpoint_name",
           "name_p", "Recompute", "Saveable", "Offloadable"]


# ----------------------------------------------------------------------- names


name_p = Primitive("name")
name_p.def_impl(lambda x, *, name: x)
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.jvp = lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                 tangents[0])  # the tangent is not named
name_p.batch = lambda vals, dims, *, name: (name_p.bind(vals[0], name=name), dims[0])
name_p.transpose = lambda ct, x, *, name: [ct]
name_p.lowerings["cpu"] = lambda ctx, x, *, name: [x]


def checkpoint_name(x, name):
  """``x`` (a pytree of arrays) unchanged, its values named ``name`` for ``checkpoint``
  policies such as ``checkpoint_policies.save_only_these_names(name)``."""
  from nbjax._tree_util import tree_map
  return tree_map(lambda v: name_p.bind(v, name=name), x)


class RecomputeType:
  pass


class SaveableType:
  pass


Recompute, Saveable = RecomputeType(), SaveableType()


class Offloadable(tuple):
  """A policy's answer: save the value in ``dst`` memory (saved, on this backend)."""
  __slots__ = ()

  def __new__(cls, src, dst):
    return tuple.__new__(cls, (src, dst))

  src, dst = property(lambda self: self[0]), property(lambda self: self[1])


def _saves(answer):
  """A policy's answer as a bool (True: save): a bool, ``Saveable``, ``Recompute`` or an
  ``Offloadable``."""
  return answer is not Recompute and (answer is Saveable or bool(answer))


# ----------------------------------------------------------------------- policies


class checkpoint_policies:
  """Which intermediate values a ``checkpoint`` may save for the backward pass. A policy is
  ``policy(prim, *avals, **params) -> bool`` (True: save this equation's outputs)."""

  @staticmethod
  def everything_saveable(*_, **__):
    return True

  @staticmethod
  def nothing_saveable(*_, **__):
    return False

  @staticmethod
  def dots_saveable(prim, *_, **__):
    return prim.name == "dot_general"

  checkpoint_dots = dots_saveable

  @staticmethod
  def dots_with_no_batch_dims_saveable(prim, *_, **params):
    if prim.name != "dot_general":
      return False
    (_, _), (lb, rb) = params["dimension_numbers"]
    return not lb and not rb

  checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

  @staticmethod
  def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    def policy(prim, *avals, **params):
      if checkpoint_policies.dots_with_no_batch_dims_saveable(prim, *avals, **params):
        return Offloadable(src=offload_src, dst=offload_dst)
      return Recompute
    return policy

  @staticmethod
  def save_anything_except_these_names(*names_not_to_save):
    return lambda *_, **__: True

  @staticmethod
  def save_any_names_but_these(*names_not_to_save):
    names = frozenset(names_not_to_save)
    return lambda prim, *_, **params: prim is name_p and params["name"] not in names

  @staticmethod
  def save_only_these_names(*names_which_can_be_saved):
    names = frozenset(names_which_can_be_saved)
    return lambda prim, *_, **params: prim is name_p and params["name"] in names

  @staticmethod
  def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                        names_which_can_be_offloaded, offload_src, offload_dst):
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    if saved & offloaded:
      raise ValueError(
          "The names should be exclusive and should not intersect in "
          "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
          f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} and "
          f"the intersection={saved & offloaded}")

    def policy(prim, *_, **params):
      if prim is name_p and params["name"] in saved:
        return Saveable
      if prim is name_p and params["name"] in offloaded:
        return Offloadable(src=offload_src, dst=offload_dst)
      return Recompute
    return policy

  @staticmethod
  def save_from_both_policies(policy_1, policy_2):
    def policy(prim, *args, **params):
      out1, out2 = policy_1(prim, *args, **params), policy_2(prim, *args, **params)
      if not (isinstance(out1, bool) and isinstance(out2, bool)):
        raise ValueError(
            f"The return value of the policies should be a boolean. Got: {out1} and {out2}. "
            "Please write a custom policy function directly, rather than using this helper "
            "function.")
      return out1 or out2
    return policy


# ----------------------------------------------------------------------- the primitive

checkpoint_p = Primitive("remat2")  # (JAX's name: jaxprs print remat2[...])
checkpoint_p.multiple_results = True
from nbjax.jaxpr import params_axis_names as _axes  # noqa: E402
checkpoint_p.named_axes = _axes  # vmap(axis_name=...) batches it when its jaxpr uses the name


def _impl(*args, jaxpr, **_):
  return [owned(o) for o in eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)]  # (as jit's results)


def _abstract_eval(*in_avals, jaxpr, **_):
  return list(jaxpr.out_avals)


def _jvp(primals, tangents, *, jaxpr, **params):
  nonzeros = tuple(pjit._nonzero(t) for t in tangents)
  new, out_nz = pjit.jvp_jaxpr(jaxpr, nonzeros, "checkpoint")
  if isinstance(params["prevent_cse"], tuple):  # per input (JAX's): tangents are barred
    params = dict(params, prevent_cse=params["prevent_cse"] + (True,) * sum(nonzeros))
  outs = checkpoint_p.bind(*primals, *[t for t, nz in zip(tangents, nonzeros) if nz],
                           jaxpr=new, **params)
  n = len(jaxpr.out_avals)
  tans = iter(outs[n:])
  return outs[:n], [next(tans) if nz else ad.Zero(a.to_tangent_aval())
                    for a, nz in zip(jaxpr.out_avals, out_nz)]


def _batch(axis_data, vals, dims, *, jaxpr, **params):
  from nbjax.interpreters import batching
  dims = tuple(None if d is batching.not_mapped else int(d) for d in dims)
  new, out_dims = pjit.batch_jaxpr(jaxpr, axis_data.size, dims, axis_data.name, "checkpoint")
  outs = checkpoint_p.bind(*vals, jaxpr=new, **params)
  return outs, [batching.not_mapped if d is None else d for d in out_dims]


_batch.wants_axis_data = True


def _transpose(cts, *args, jaxpr, **params):
  """JAX's ``remat_transpose``: the backward pass is itself a ``checkpoint`` call (so under
  jit its recomputation sits behind the optimization barrier, not merged with the forward
  pass by CSE). Its jaxpr splits the inner jaxpr into the recomputation (non-linear; it runs
  forward) and the linear part, which it transposes; a loop recomputing known carries next to
  linear ones is split the same way."""
  undef = tuple(ad.is_undefined_primal(a) for a in args)
  ct_nz = tuple(type(c) is not ad.Zero for c in cts)
  key = (undef, ct_nz)
  tj = _transpose_split.get(jaxpr, {}).get(key)
  if tj is None:
    tj = _transpose_jaxpr(jaxpr, undef, ct_nz)
    _transpose_split.setdefault(jaxpr, {})[key] = tj
  pc = params["prevent_cse"]
  if isinstance(pc, tuple):  # the known inputs' flags, then the cotangents barred (JAX's)
    pc = tuple(p for p, u in zip(pc, undef) if not u) + (True,) * sum(ct_nz)
  outs = iter(checkpoint_p.bind(*[a for a, u in zip(args, undef) if not u],
                                *[c for c, nz in zip(cts, ct_nz) if nz], jaxpr=tj,
                                **dict(params, differentiated=True, prevent_cse=pc)))
  return [next(outs) if u else None for u in undef]


def _transpose_jaxpr(jaxpr, undef, ct_nz):
  """``(known inputs, nonzero cotangents) -> cotangents of the undefined inputs``."""
  jk, ju = pe.partial_eval_jaxpr(jaxpr, list(undef), instantiate=True)[:2]
  lin_avals = [a for a, u in zip(jaxpr.in_avals, undef) if u]
  nk = len(undef) - sum(undef)

  def backward(*xs):
    res = eval_jaxpr(jk.jaxpr, jk.consts, *xs[:nk])
    nz = iter(xs[nk:])
    cts = [next(nz) if z else ad.Zero(a.to_tangent_aval())
           for a, z in zip(jaxpr.out_avals, ct_nz)]
    outs = ad.backward_pass(ju.jaxpr, ju.consts,
                            [*res, *[ad.UndefinedPrimal(a) for a in lin_avals]], cts)
    return [ad.instantiate_zeros(o) if o is not None and type(o) is not ad.Zero else
            ad.zeros_like_aval(a.to_tangent_aval()) for o, a in zip(outs[len(res):], lin_avals)]
  in_avals = [a for a, u in zip(jaxpr.in_avals, undef) if not u] + [
      a.to_tangent_aval() for a, z in zip(jaxpr.out_avals, ct_nz) if z]
  tj, _, consts = pe.trace_to_jaxpr_dynamic(backward, in_avals, fun_name="checkpoint")
  return ClosedJaxpr(tj, consts)


_transpose_split = weakref.WeakKeyDictionary()  # jaxpr -> {(undefined, nonzero cts): jaxpr}


def _partial_eval(in_unknowns, *, jaxpr, policy, **params):
  """Known call: known outputs + the residuals ``policy`` saves (known inputs count as saved).
  Unknown call: recomputes every other known value it needs, then the unknown work."""
  effs = [e for e in jaxpr_effects(jaxpr) if e not in remat_allowed_effects]
  saveable = _saveable(policy)
  if effs and all(type(e) in remat_saving_effects for e in effs):
    saveable = _save_all  # (mutable array references: nothing is recomputed)
  elif effs:
    raise NotImplementedError(f"Effects not supported in partial-eval of `checkpoint`/`remat`: "
                              f"{effs}")
  jk, ju, out_unknowns, nres = pe.partial_eval_jaxpr_custom(jaxpr, in_unknowns, saveable)
  jk = ClosedJaxpr(_insert_reduce_precision(jk.jaxpr, nres), jk.consts)
  kp = dict(params, jaxpr=jk, policy=policy)
  up = dict(params, jaxpr=ju, policy=policy, differentiated=True)
  pc = params["prevent_cse"]
  if isinstance(pc, tuple):  # per input (JAX's): a residual that is a known input keeps its
    known = kp["prevent_cse"] = tuple(p for p, u in zip(pc, in_unknowns) if not u)
    flag = dict(zip(jk.jaxpr.invars, known))  # flag, one made inside is barred
    res = jk.jaxpr.outvars[len(jk.jaxpr.outvars) - nres:]
    up["prevent_cse"] = (tuple(flag.get(v, True) if type(v) is Var else True for v in res)
                         + tuple(p for p, u in zip(pc, in_unknowns) if u))
  level = logging.WARNING if core.config._flags["log_checkpoint_residuals"] else logging.DEBUG
  if _log.isEnabledFor(level):
    _log_residuals(level, jk.jaxpr, nres)
  return kp, up, out_unknowns, nres


def _insert_reduce_precision(jaxpr, num_res):
  """JAX's: each floating residual an equation of the known part makes, and that other
  equations there read, is rounded to its dtype (``reduce_precision``) where it is made, so
  the forward pass and the backward pass see the same value even where XLA would keep excess
  precision in a fused computation (a bfloat16 ``dot`` computed in float32)."""
  if not num_res:
    return jaxpr
  from nbjax import dtypes
  used = {x for e in jaxpr.eqns for x in e.invars if type(x) is Var}
  made = {v: i for i, e in enumerate(jaxpr.eqns) for v in e.outvars}
  eqns, rp = list(jaxpr.eqns), registry.get("reduce_precision")
  for v in jaxpr.outvars[len(jaxpr.outvars) - num_res:]:
    if (type(v) is not Var or v not in used or v not in made
        or not dtypes.issubdtype(v.aval.dtype, np.floating)):
      continue
    fi = dtypes.finfo(v.aval.dtype)
    params = dict(exponent_bits=int(fi.nexp), mantissa_bits=int(fi.nmant))
    e = jaxpr.eqns[made[v]]
    if e.primitive is rp and e.params == params:
      continue
    new = Var(v.aval)
    i = eqns.index(e)
    eqns[i] = e.replace(outvars=[new if o is v else o for o in e.outvars])
    eqns.insert(i + 1, JaxprEqn([new], [v], rp, params, (), e.source_info))
  return jaxpr.replace(eqns=eqns)


def _log_residuals(level, jaxpr, nres):
  """JAX's log of what a checkpoint saves: the known inputs the recomputation reads, and the
  intermediates (what made each, and where)."""
  res = jaxpr.outvars[len(jaxpr.outvars) - nres:]
  ins = set(jaxpr.invars)
  inputs = [v.aval for v in res if type(v) is Var and v in ins]
  made = {}
  for e in jaxpr.eqns:
    for v in e.outvars:
      made[v] = e
  subst = {e.outvars[0]: e.invars[0] for e in jaxpr.eqns if e.primitive.name == "reduce_precision"}
  body = []
  for v in res:
    if type(v) is not Var or v in ins:
      continue
    e = made.get(subst.get(v, v))
    src = (e.source_info if e is not None else None) or "<unknown>"  # (as saved_residuals)
    what = ("from a constant" if e is None else
            f"named '{e.params['name']}' from {src}" if e.primitive is name_p else
            f"output of jitted function '{e.params['name']}' from {src}"
            if e.primitive.name == "jit" else f"output of {e.primitive.name} from {src}")
    body.append((v.aval, what))
  _log.log(level, "remat-decorated function " + "saving inputs with shapes:\n" * bool(inputs)
           + "  %s\n" * len(inputs) + "and " * bool(inputs) * bool(body)
           + "saving these intermediates:\n" * bool(body) + "  %s from %s\n" * len(body),
           *[a.str_short(short_dtypes=False) for a in inputs],
           *[x for a, s in body for x in (a.str_short(short_dtypes=False), s)])


def _save_all(*_, **__):
  return True


def _saveable(policy):
  """``policy`` as ``partial_eval_jaxpr_custom``'s ``saveable`` (a bool-valued function)."""
  return None if policy is None else lambda *a, **k: _saves(policy(*a, **k))


def _lowering(ctx, *args, jaxpr, prevent_cse=True, differentiated=False, **_):
  """A private function; a differentiated call's inputs (those ``prevent_cse`` flags, when
  it is a tuple) pass an optimization barrier first (JAX's), so XLA does not merge its
  recomputation with the forward pass."""
  from nbjax.interpreters import mlir
  flags = prevent_cse if isinstance(prevent_cse, tuple) else (prevent_cse,) * len(args)
  if differentiated and any(flags):
    barred = iter(mlir.hlo.OptimizationBarrierOp([a for a, p in zip(args, flags) if p]).results)
    args = [next(barred) if p else a for a, p in zip(args, flags)]
  return mlir.call_jaxpr(ctx, jaxpr, args, name="checkpoint")


def _dce_params(params, used_ins):
  """JAX's ``remat_dce``: a per-input ``prevent_cse`` keeps the used inputs' flags."""
  pc = params["prevent_cse"]
  return dict(params, prevent_cse=tuple(p for p, u in zip(pc, used_ins) if u)) \
      if isinstance(pc, tuple) else params


pe.dce_rules[checkpoint_p] = lambda used_outs, eqn: pe.dce_call_rule(
    used_outs, eqn, _dce_params)
checkpoint_p.make_eager = lambda prim, f_small, f_large, thr: _impl
registry.register(
    checkpoint_p, family="call", impls={"python": _impl}, abstract_eval=_abstract_eval,
    jvp=_jvp, batch=_batch, transpose=_transpose,
    meta=dict(differentiable=True, note="call primitive: its jaxpr runs eagerly; reverse mode "
              "recomputes what the policy does not save"))
checkpoint_p.partial_eval = pe.forward_inputs(_partial_eval)
checkpoint_p.inline_known = True  # linearize evaluates the known half in place, as JAX
checkpoint_p.lowerings["cpu"] = _lowering


# ----------------------------------------------------------------------- the wrapper


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
  """Make ``fun`` recompute its internal values in the backward pass instead of saving them.

  Values are unchanged; only what reverse mode keeps between the forward and the backward
  pass differs. ``policy`` (see ``checkpoint_policies``) names intermediates that may be saved
  anyway, e.g. ``checkpoint_policies.dots_saveable``; by default only the inputs are saved.
  ``static_argnums`` arguments are passed to ``fun`` as Python values. ``prevent_cse`` is kept
  as a parameter of the staged ``checkpoint`` equation.

  >>> g = nbjax.grad(nbjax.checkpoint(lambda x: jnp.sin(jnp.sin(x))))
  """
  static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
  if isinstance(prevent_cse, Sequence):
    prevent_cse = tuple(prevent_cse)
  if not isinstance(prevent_cse, (tuple, bool)):
    raise TypeError("prevent_cse must be a bool or tuple of bools, got "
                    f"{type(prevent_cse)=}")
  cache = weakref.WeakKeyDictionary()

  @api_boundary
  @functools.wraps(fun)
  def fun_remat(*args, **kwargs):
    n = len(args)
    st = sorted({i % n for i in static})
    dyn = [a for i, a in enumerate(args) if i not in st]
    flat, in_tree = tree_flatten((dyn, kwargs))
    avals = tuple(get_aval(x) for x in flat)
    key = (in_tree, avals, tuple((i, args[i]) for i in st))
    try:
      per = cache.setdefault(fun, {})
      hit = per.get(key)
    except TypeError:
      per = hit = None
    if hit is None:
      box = []

      def flat_fun(*xs):
        d, kw = tree_unflatten(in_tree, xs)
        full, it = [], iter(d)
        for i in range(n):
          full.append(args[i] if i in st else next(it))
        out, out_tree = tree_flatten(fun(*full, **kw))
        box.append(out_tree)
        return out

      jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, list(avals),
                                                   fun_name=getattr(fun, "__name__", None))
      hit = (ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), consts, box[0])
      if per is not None and not any(isinstance(c, core.Tracer) for c in consts):
        per[key] = hit
    closed, consts, out_tree = hit
    cse = prevent_cse
    if isinstance(cse, tuple):  # a prefix of the arguments (JAX's): constants are not barred
      cse = (False,) * len(consts) + tuple(broadcast_prefix(
          cse, (tuple(dyn), kwargs) if kwargs else tuple(dyn)))
    outs = checkpoint_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=cse,
                             differentiated=False, policy=policy)
    return tree_unflatten(out_tree, outs)

  return fun_remat


remat = checkpoint
