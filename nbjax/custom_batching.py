"""``nbjax.custom_batching``: JAX's ``custom_vmap`` (a function with its own batching rule)
and ``sequential_vmap``.

Sits beside ``custom_derivatives``: calling a ``custom_vmap`` function under a ``vmap``
(the current trace a ``BatchTrace``) unboxes the arguments, moves their batch dimensions to
the front and runs the user's rule on the parent trace; anywhere else (eager, ``jit``
staging, differentiation) it runs the function itself. The rule is therefore used when
``vmap`` is the innermost transformation applied to the call; a transformation applied
inside the ``vmap`` (``vmap(grad(f))``, ``vmap(jit(f))``) batches the function's own
operations instead.
"""
from __future__ import annotations

import functools

from nbjax import core
from nbjax.custom_derivatives import _name, _Resolver
from nbjax.interpreters import batching
from nbjax._tree_util import (broadcast_prefix, tree_flatten, tree_map, tree_structure,
                             tree_unflatten)

__all__ = ["custom_vmap", "sequential_vmap"]


class custom_vmap:
  """A function with a custom batching rule (JAX's ``jax.custom_batching.custom_vmap``).

  ``f.def_vmap(rule)`` sets ``rule(axis_size, in_batched, *args) -> (out, out_batched)``:
  ``in_batched`` has one pytree of bools per argument (True where that leaf is batched, its
  batch axis then leading), ``out_batched`` is a pytree of bools matching ``out``.

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
    self._resolve = _Resolver(fun)

  def def_vmap(self, vmap_rule):
    """Set the batching rule; returns it (a decorator)."""
    self.vmap_rule = vmap_rule
    return vmap_rule

  def __call__(self, *args, **kwargs):
    name = _name(self.fun)
    args = self._resolve(args, kwargs, "custom_vmap", name)
    if self.vmap_rule is None:
      raise AttributeError(f"No batching rule defined for custom_vmap function {name} using "
                           "def_vmap.")
    trace = core._ctx.trace
    if not isinstance(trace, batching.BatchTrace):
      return self.fun(*args)
    flat, in_tree = tree_flatten(args)
    vals, dims = core.unzip2(map(trace.to_batch_info, flat))
    vals = [v if d is batching.not_mapped else batching.moveaxis(v, d, 0)
            for v, d in zip(vals, dims)]
    in_batched = list(tree_unflatten(in_tree, [d is not batching.not_mapped for d in dims]))
    with core.set_current_trace(trace.parent_trace):
      out, out_batched = self.vmap_rule(trace.axis_size, in_batched,
                                        *tree_unflatten(in_tree, vals))
    out_flat, out_tree = tree_flatten(out)
    try:
      batched = broadcast_prefix(out_batched, out)
    except ValueError:
      raise ValueError(
          "structure of output value and output batching specification returned by custom "
          f"vmap rule ({_name(self.vmap_rule)}) do not match.\nOutputs: {out_tree}\nBatching "
          f"spec: {tree_structure(out_batched)}") from None
    outs = []
    for o, b in zip(out_flat, batched):
      if b:
        if core.get_aval(o).shape[:1] != (trace.axis_size,):
          raise ValueError(f"custom vmap rule {_name(self.vmap_rule)} returned an output "
                           f"marked batched whose leading axis is not of size "
                           f"{trace.axis_size}: shape {core.get_aval(o).shape}")
        o = batching.BatchTracer(trace, o, 0)
      outs.append(o)
    return tree_unflatten(out_tree, outs)


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
