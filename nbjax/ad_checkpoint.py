"""``nbjax.ad_checkpoint``: JAX's public names for rematerialisation (``checkpoint_name``,
``checkpoint_policies``, ``print_saved_residuals``, the policy results), over the
``checkpoint_p`` machinery in ``interpreters/remat.py``. ``checkpoint``/``remat`` are at the
top level only (JAX 0.10 removed them here).
"""
from nbjax import api
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters.remat import (Offloadable, Recompute, Saveable, checkpoint_name,
                                      checkpoint_policies, name_p)
from nbjax.jaxpr import Literal
from nbjax._tree_util import tree_flatten, tree_leaves, tree_unflatten

__all__ = ["checkpoint_name", "checkpoint_policies", "print_saved_residuals", "Recompute",
           "Saveable", "Offloadable"]

_REMOVED = {n: f"jax.ad_checkpoint.{n} was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; "
               f"use jax.{n} instead." for n in ("checkpoint", "remat")}


def __getattr__(name):
  if name in _REMOVED:
    raise AttributeError(_REMOVED[name])
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------- inspection


def saved_residuals(f, *args, **kwargs):
  """What reverse mode of ``f`` at ``args`` keeps for the backward pass: a list of
  ``(aval, description)``, one per residual, in JAX's order and words (literals, constants,
  arguments by name, then intermediate values with the user code that computed them).
  The residuals are those of ``vjp(f, *args)``, found by staging it."""
  leaves, tree = tree_flatten((args, kwargs))

  def f_(*xs):
    a, k = tree_unflatten(tree, xs)
    return f(*a, **k)

  pe.record_source_info, before = True, pe.record_source_info
  try:
    closed, shape = api.make_jaxpr(lambda *xs: api.vjp(f_, *xs), return_shape=True)(*leaves)
  finally:
    pe.record_source_info = before
  jaxpr = closed.jaxpr
  res = jaxpr.outvars[len(jaxpr.outvars) - len(tree_leaves(shape[1])):]
  names = pe.DebugInfo("saved_residuals", f, args, kwargs).arg_names
  # a residual rounded by ``reduce_precision`` (remat's) is named by what made the value
  subst = {e.outvars[0]: e.invars[0] for e in jaxpr.eqns
           if e.primitive.name == "reduce_precision"}
  res_vars = {subst.get(v, v) for v in res if not isinstance(v, Literal)}
  out = [(v.aval, "from a literal") for v in res if isinstance(v, Literal)]
  out += [(v.aval, "from a constant") for v in jaxpr.constvars if v in res_vars]
  out += [(v.aval, f"from the argument {names[i]}" if i < len(names) and names[i] else
           f"from the argument at flattened index {i}")
          for i, v in enumerate(jaxpr.invars) if v in res_vars]
  for e in jaxpr.eqns:
    for v in e.outvars:
      if v in res_vars:
        src = e.source_info or "<unknown>"
        if e.primitive is name_p:
          out.append((v.aval, f"named '{e.params['name']}' from {src}"))
        elif e.primitive.name == "jit":
          out.append((v.aval, f"output of jitted function '{e.params['name']}' from {src}"))
        else:
          out.append((v.aval, f"output of {e.primitive.name} from {src}"))
  return out


def print_saved_residuals(f, *args, **kwargs):
  """Print ``saved_residuals(f, *args, **kwargs)``, one residual per line
  (``f32[3] output of sin from model.py:12:8 (loss)``)."""
  for aval, src in saved_residuals(f, *args, **kwargs):
    print(f"{aval.str_short(short_dtypes=True)} {src}")
