"""Sharding in types: the shardings avals carry under a mesh with Explicit axes (JAX's
``jax.typeof(x).sharding``), and their propagation through the primitives.

Pipeline position: abstract evaluation. An ``Array`` placed by a ``NamedSharding`` whose spec
names Explicit mesh axes has an aval with that sharding (over the mesh's ``AbstractMesh``,
its Auto axes dropped: ``aval_sharding``). The first mesh with Explicit axes installs
``_propagate`` as ``core.sharding_rule_hook``, which ``Primitive.abstract_eval`` runs when an
operand carries a sharding, so the cost stays on the Explicit-mesh path (``Array.aval`` gives
shardings, and jit's cache key looks at them, only once it is set). The rules are by primitive name, else
by registry family (elementwise operands broadcast their specs, reductions drop the reduced
dimensions); a primitive without one gives unsharded outputs, and call primitives keep what
their inner jaxpr gave. Sharded jit (``interpreters/spmd.py``) places its outputs as their avals
say; ``sharding_constraint`` (``reshard``) sets its output's.
"""
from __future__ import annotations

from nbjax import core
from nbjax.core import ShardingTypeError
from nbjax.sharding import AxisType, NamedSharding, PartitionSpec

__all__ = ["aval_sharding", "with_sharding", "rules", "forced", "key"]


def _entry(parts):
  return None if not parts else parts[0] if len(parts) == 1 else tuple(parts)


def aval_sharding(sharding, ndim):
  """The sharding an aval of rank ``ndim`` carries for an array laid out as ``sharding``:
  its spec's Explicit axes over the abstract mesh, padded to ``ndim``; None when the mesh has
  no Explicit axis."""
  if type(sharding) is not NamedSharding:
    return None
  mesh = sharding.mesh
  if AxisType.Explicit not in mesh.axis_types:
    return None
  ex = mesh.explicit_axes
  spec = sharding.spec
  parts = [_entry([a for a in p if a in ex]) for p in spec._normalized(ndim)]
  return NamedSharding(mesh.abstract_mesh, PartitionSpec(*parts, unreduced=spec.unreduced,
                                                         reduced=spec.reduced))


def with_sharding(aval, sharding):
  """``aval`` carrying ``sharding`` (a NamedSharding as ``aval_sharding`` gives, or None)."""
  if sharding is None:
    if getattr(aval, "_sh", None) is None:
      return aval
    return core.ShapedArray(aval.shape, aval.dtype, aval.weak_type)
  return aval.update(sharding=sharding)


def _spec(a):
  """An aval's spec as a list of entries, one per dimension."""
  sh = getattr(a, "_sh", None)
  if sh is None:
    return [None] * len(a.shape)
  return list(sh.spec) + [None] * (len(a.shape) - len(sh.spec))


def _mesh(avals):
  for a in avals:
    sh = getattr(a, "_sh", None)
    if sh is not None:
      return sh.mesh
  return None


def _named(mesh, parts):
  """The aval sharding for ``parts`` on ``mesh`` (None when it names no axis)."""
  if all(p is None for p in parts):
    return None
  return NamedSharding(mesh, PartitionSpec(*parts))


def _broadcasting(name, avals):
  """JAX's rule for operands of equal shape (rank-0 ones broadcast): a dimension's spec is
  the one its operands agree on; a size-1 unsharded operand does not count."""
  ops = [a for a in avals if a.shape]
  if not ops:
    return None
  specs = [_spec(a) for a in ops]
  out = []
  for i in range(len(ops[0].shape)):
    ss = [s[i] for s in specs]
    if all(s == ss[0] for s in ss):
      out.append(ss[0])
      continue
    nt = [s for s, a in zip(ss, ops) if not (a.shape[i] == 1 and s is None)]
    r = None
    for s in nt:
      if r is None:
        r = s
      elif s is not None and s != r:
        raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                f"{', '.join(str(tuple(s)) for s in specs)}.")
    out.append(r)
  return _named(_mesh(avals), out)


def _elementwise(prim, avals, params, outs):
  return [_broadcasting(prim.name, avals)] * len(outs)


def _reduction(prim, avals, params, outs):
  x = avals[0]
  axes = params.get("axes")
  if axes is None:  # cumulative ops, sort, top_k: the operand's dims (top_k's last unsharded)
    spec = _spec(x)
    if prim.name == "top_k":
      spec[-1] = None
    return [_named(_mesh(avals), spec) if len(o.shape) == len(spec) else None for o in outs]
  keep = [s for i, s in enumerate(_spec(x)) if i not in set(axes)]
  return [_named(_mesh(avals), keep) if len(o.shape) == len(keep) else None for o in outs]


def _broadcast_in_dim(prim, avals, params, outs):
  x = avals[0]
  spec, bd = _spec(x), params["broadcast_dimensions"]
  out = [None] * len(outs[0].shape)
  for s, d, n in zip(spec, bd, x.shape):
    out[d] = s
  return [_named(_mesh(avals), out)]


def _transpose(prim, avals, params, outs):
  spec = _spec(avals[0])
  return [_named(_mesh(avals), [spec[p] for p in params["permutation"]])]


def _squeeze(prim, avals, params, outs):
  spec, dims = _spec(avals[0]), set(params["dimensions"])
  return [_named(_mesh(avals), [s for i, s in enumerate(spec) if i not in dims])]


def _same(prim, avals, params, outs):
  sh = getattr(avals[0], "_sh", None)
  return [sh if o.shape == avals[0].shape else None for o in outs]


def _kept_dims(prim, avals, params, outs):
  """slice, pad, dynamic_slice: a dimension keeps its spec where its size is unchanged."""
  x = avals[0]
  spec = _spec(x)
  return [_named(_mesh(avals), [s if a == b else None for s, a, b in
                              zip(spec, x.shape, outs[0].shape)])]


def _concatenate(prim, avals, params, outs):
  d = params["dimension"]
  specs = [_spec(a) for a in avals]
  if any(s[d] is not None for s in specs):
    raise ShardingTypeError(f"concatenate along a sharded dimension {d}: "
                            f"{', '.join(str(tuple(s)) for s in specs)}")
  return [_broadcasting(prim.name, avals)]


def _reshape(prim, avals, params, outs):
  x = avals[0]
  spec, new = _spec(x), params["new_sizes"]
  if all(s is None for s in spec):
    return [None]
  if [n for n in x.shape if n != 1] == [n for n in new if n != 1]:  # only size-1 dims change
    it = iter(s for s, n in zip(spec, x.shape) if n != 1)
    return [_named(_mesh(avals), [None if n == 1 else next(it) for n in new])]
  # split or merge of dimensions whose major part is the sharded one
  out, i, j, mesh = [], 0, 0, _mesh(avals)
  sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
  while i < len(x.shape) and j < len(new):
    a, b = x.shape[i], new[j]
    if a == b:
      out.append(spec[i])
      i, j = i + 1, j + 1
      continue
    if a > b:  # split x's dim i into new[j:k]
      k, p = j, 1
      while p < a:
        p *= new[k]
        k += 1
      axes = list(spec[i] if isinstance(spec[i], tuple) else () if spec[i] is None
                  else (spec[i],))
      for n in new[j:k]:
        got = []
        while axes and n % sizes[axes[0]] == 0 and n > 1:
          n //= sizes[axes[0]]
          got.append(axes.pop(0))
        out.append(_entry(got))
      if axes:
        _reshape_error(x, new)
      i, j = i + 1, k
    else:  # merge x's dims i..k into new[j]: their axes, major first, split it
      k, p = i, 1
      while p < b:
        p *= x.shape[k]
        k += 1
      parts = spec[i:k]
      while parts and parts[-1] is None:
        parts.pop()
      if None in parts:
        _reshape_error(x, new)
      axes = [a for q in parts for a in (q if isinstance(q, tuple) else (q,))]
      n = b
      for a in axes:
        n, r = divmod(n, sizes[a])
        if r:
          _reshape_error(x, new)
      out.append(_entry(axes))
      i, j = k, j + 1
  out += [None] * (len(new) - len(out))
  return [_named(mesh, out)]


def _reshape_error(x, new):
  raise ShardingTypeError(
      "This reshape is not supported. Please specify the sharding of the output via the "
      f"`out_sharding` argument of jax.lax.reshape. Got operand shape: {x.shape}, new sizes: "
      f"{tuple(new)} and operand spec: {x.sharding.spec}")


def _check_match(a, b, msg):
  for x, y in zip(a, b):
    if x is not None and y is not None and x != y:
      raise ShardingTypeError(msg)


def _dot_general(prim, avals, params, outs):
  lhs, rhs = avals
  if _forced and _forced[-1] is not None:
    return [aval_sharding(_forced[-1], len(outs[0].shape))]
  (lc, rc), (lb, rb) = params["dimension_numbers"]
  ls, rs = _spec(lhs), _spec(rhs)
  lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
  lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
  _check_match(lbs, rbs, "dot_general requires lhs batch dimensions and rhs batch dimensions "
               f"to have the consistent sharding, got {lbs} and {rbs}.")
  _check_match(lcs, rcs, "dot_general requires contracting dimensions to have consistent "
               f"sharding, got {lcs} and {rcs}.")
  for a, b in zip(lcs, rcs):
    if a is not None and b is not None:
      raise ShardingTypeError(
          "Contracting dimensions are sharded and it is ambiguous how the output should be "
          "sharded. Please specify the output sharding via the `out_sharding` parameter. "
          f"Got lhs_contracting_spec={lcs} and rhs_contracting_spec={rcs}")
  lfree = [s for i, s in enumerate(ls) if i not in {*lc, *lb}]
  rfree = [s for i, s in enumerate(rs) if i not in {*rc, *rb}]
  out = [*lbs, *lfree, *rfree]
  used = [a for p in out if p is not None for a in (p if isinstance(p, tuple) else (p,))]
  if len(set(used)) != len(used):
    raise ShardingTypeError(
        f"dot_general operation with inputs: {lhs.str_short()}, {rhs.str_short()} produces an "
        f"illegally sharded result: {outs[0].str_short()}[{', '.join(map(str, out))}]")
  return [_named(_mesh(avals), out)]


_forced: list = []  # the ``out_sharding``s of the dot_generals being bound (innermost last)


class forced:
  """``with forced(sharding):`` contractions bound inside take ``sharding`` (an
  ``out_sharding`` argument) as their result's instead of the rule's (and its errors)."""

  def __init__(self, sharding):
    self.s = sharding

  def __enter__(self):
    _forced.append(self.s)

  def __exit__(self, *exc):
    _forced.pop()


def _constraint(prim, avals, params, outs):
  return [aval_sharding(params["sharding"], len(outs[0].shape))]


def _unsharded(prim, avals, params, outs):
  return [None] * len(outs)


rules = {
    "broadcast_in_dim": _broadcast_in_dim, "transpose": _transpose, "squeeze": _squeeze,
    "reshape": _reshape, "rev": _same, "slice": _kept_dims, "pad": _kept_dims,
    "dynamic_slice": _kept_dims, "dynamic_update_slice": _same, "concatenate": _concatenate,
    "dot_general": _dot_general, "sharding_constraint": _constraint,
    "copy": _same, "copy_p": _same, "optimization_barrier": lambda p, a, pr, o: [
        getattr(x, "_sh", None) for x in a],
    "scatter": _same, "scatter-add": _same, "scatter-mul": _same, "scatter-min": _same,
    "scatter-max": _same, "scatter-sub": _same,
    "bitcast_convert_type": _kept_dims, "gather": _unsharded, "iota": _unsharded,
}
_family = {"elementwise": _elementwise, "reduction": _reduction}


def _propagate(outs, prim, avals, params):
  """``core.sharding_rule_hook``: ``outs`` (the primitive's output avals) with the shardings
  its rule gives for operands ``avals``; call primitives' outputs as their jaxprs gave."""
  rule = rules.get(prim.name) or _family.get(getattr(prim, "family", None))
  multi = prim.multiple_results
  out_list = list(outs) if multi else [outs]
  given = params.get("sharding")
  if isinstance(given, NamedSharding) and not multi:  # (an ``out_sharding`` argument)
    shs = [aval_sharding(given, len(outs.shape))]
  elif rule is None:
    return outs
  else:
    shs = rule(prim, avals, params, out_list)
  res = [o if type(o) is not core.ShapedArray else with_sharding(o, s)
         for o, s in zip(out_list, shs)]
  return res if multi else res[0]


def key(avals):
  """The part of a jit cache key that sharding in types adds: the avals' shardings and a
  forced ``out_sharding``."""
  return tuple(getattr(a, "_sh", None) for a in avals), _forced[-1] if _forced else None


def match_cotangent(ct, aval):
  """``ct`` (a cotangent or gradient) laid out as its primal's ``aval`` says, where that
  carries a sharding: JAX's cotangents have their primals' types."""
  sh = getattr(aval, "_sh", None)
  if sh is None or getattr(core.get_aval(ct), "_sh", None) == sh:
    return ct
  from nbjax.interpreters import spmd
  s = spmd._resolve(sh, None, "grad")
  if not isinstance(ct, core.Tracer) and not hasattr(s.mesh, "devices"):
    return ct  # (eagerly, no concrete mesh of that shape to place it on)
  return spmd.sharding_constraint_p.bind(ct, sharding=s)


def install():
  """Once a mesh has Explicit axes: ``_propagate`` becomes ``core.sharding_rule_hook`` and
  ``Array.aval`` gives a sharded array's sharding in its type (before, neither costs)."""
  if core.sharding_rule_hook is None:
    from nbjax.array import Array
    untyped = Array.aval.fget

    def aval(self):
      a = untyped(self)
      p = self._pmap
      if p is not None and p[0]._spmd:
        a = with_sharding(a, aval_sharding(p[0], a.ndim))
      return a
    Array.aval = property(aval, doc=Array.aval.__doc__)
    core.sharding_rule_hook = _propagate
