"""Sharding in types: the shardings avals carry under a mesh with Explicit axes (JAX's
``jax.typeof(x).sharding``), and their propagation through the primitives.

Pipeline position: abstract evaluation. An ``Array`` placed by a ``NamedSharding`` whose spec
names Explicit mesh axes has an aval with that sharding (over the mesh's ``AbstractMesh``,
its Auto axes dropped: ``aval_sharding``). The first mesh with Explicit axes installs
``_propagate`` as ``core.sharding_rule_hook``, which ``Primitive.abstract_eval`` runs when an
operand carries a sharding, so the cost stays on the Explicit-mesh path (``Array.aval`` gives
shardings, and jit's cache key looks at them, only once it is set). The rules are by primitive
name, else by registry family (elementwise operands broadcast their specs, reductions drop the
reduced dimensions); a primitive without one gives untyped outputs, and call primitives keep
what their inner jaxpr gave. Sharded jit (``interpreters/spmd.py``) places its outputs as their avals
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
  """The aval sharding for ``parts`` on ``mesh`` (unsharded ones too: the result is typed,
  and pinned so when lowered, as JAX's)."""
  return None if mesh is None else NamedSharding(mesh, PartitionSpec(*parts))


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


def _axes_size(mesh, p):
  sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
  n = 1
  for a in (p if isinstance(p, tuple) else (p,)):
    n *= sizes[a]
  return n


def _varying(what):
  """slice, pad, dynamic_slice: the operand's spec, where a sharded dimension whose size
  changes still divides over its axes (JAX's error else)."""
  def rule(prim, avals, params, outs):
    x, mesh = avals[0], _mesh(avals)
    spec = _spec(x)
    for a, b, p in zip(x.shape, outs[0].shape, spec):
      if a != b and p is not None and b % _axes_size(mesh, p):
        raise ShardingTypeError(
            f"{what} on sharded dims where out dim ({b}) is not divisible by mesh axes "
            f"({_axes_size(mesh, p)}) with spec ({p}) is not implemented. Got input "
            f"type={x} and output shape={outs[0].shape}")
    return [_named(mesh, spec)]
  return rule


def _cumulative(prim, avals, params, outs):
  x, ax = avals[0], params["axis"]
  if _spec(x)[ax] is not None:
    raise ShardingTypeError("Input should be unsharded over the axis being reduced. Got input "
                            f"type={x} and axis={ax}")
  return [getattr(x, "_sh", None)]


def drop_dim(aval, d):
  """``aval`` without its dimension ``d`` (a vmapped one), in its shape and its spec."""
  shape, spec = list(aval.shape), _spec(aval)
  del shape[d], spec[d]
  return aval.update(shape=tuple(shape), sharding=NamedSharding(aval._sh.mesh,
                                                                PartitionSpec(*spec)))


def _concatenate(prim, avals, params, outs):
  specs = [s for s in map(_spec, avals) if any(p is not None for p in s)]  # (unsharded: any)
  if not specs:
    return [None]
  if any(s != specs[0] for s in specs):
    raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                            f"{', '.join(str(a.sharding) for a in avals)}")
  return [_named(_mesh(avals), specs[0])]


def _reshape(prim, avals, params, outs):
  """JAX's rule: dims that only gain or lose size-1 neighbours keep their spec; a sharded dim
  split into several gives its axes to them major first, several merged into one give it
  theirs (each split dividing over its axes); anything else is an error."""
  x = avals[0]
  spec, new, mesh = _spec(x), tuple(params["new_sizes"]), _mesh(avals)
  if all(s is None for s in spec):
    return [None]
  sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
  ops = [(n, p) for n, p in zip(x.shape, spec) if n != 1]
  news = [j for j, n in enumerate(new) if n != 1]
  out, i, k, kinds = [None] * len(new), 0, 0, []

  def split(axes, n):  # the axes (major first) that divide a dim of size n
    got = []
    while n > 1 and axes:
      n, r = divmod(n, sizes[axes[0]])
      if r:
        _reshape_error(x, new)
      got.append(axes.pop(0))
    return _entry(got)

  while i < len(ops) and k < len(news):
    gi, gk = [ops[i]], [news[k]]
    a, b = ops[i][0], new[news[k]]
    i, k = i + 1, k + 1
    while a != b:
      if a < b:
        gi.append(ops[i])
        a *= ops[i][0]
        i += 1
      else:
        gk.append(news[k])
        b *= new[news[k]]
        k += 1
    parts = [p for _, p in gi]
    if len(gi) == 1 and len(gk) == 1:
      out[gk[0]] = parts[0]
      continue
    kinds.append(gi)
    if len(gi) > 1 and len(gk) > 1 or len(kinds) > 1:  # (JAX's: one axis split or merged)
      _reshape_error(x, new)
    if all(p is None for p in parts):
      continue
    if params.get("dimensions") is not None:
      _reshape_error(x, new)
    while parts[-1] is None:
      parts.pop()
    if None in parts:
      _reshape_error(x, new)
    axes = [a for p in parts for a in (p if isinstance(p, tuple) else (p,))]
    for j in gk:
      out[j] = split(axes, new[j])
    if axes:
      _reshape_error(x, new)
  return [_named(mesh, out)]


def _reshape_error(x, new):
  raise ShardingTypeError(
      "This reshape is not supported. Please specify the sharding of the output via the "
      f"`out_sharding` argument of jax.lax.reshape. Got operand type: {x}, "
      f"new sizes: {tuple(new)}")


def _check_match(a, b, msg):
  for x, y in zip(a, b):
    if x is not None and y is not None and x != y:
      raise ShardingTypeError(msg)


def _dot_general(prim, avals, params, outs):
  lhs, rhs = avals
  (lc, rc), (lb, rb) = params["dimension_numbers"]
  ls, rs = _spec(lhs), _spec(rhs)
  f = params.get("out_sharding") or (_forced[-1] if _forced else None)
  if f is not None:  # (the param, or a jnp contraction's ``forced``: an out_sharding argument)
    n = len(outs[0].shape)
    k = max(0, n - len(f.spec))  # (vmapped: the leading batch dims it added keep the lhs's)
    g = aval_sharding(f, n - k)
    return [None if g is None else
            _named(_mesh(avals), [ls[i] for i in lb[:k]] + list(g.spec))]
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


def dot_out_sharding(out_sharding):
  """``(params, place)`` for ``lax.dot_general``'s ``out_sharding`` argument (or the one of
  the jnp contraction being bound, ``forced``): dot_general's ``out_sharding`` param (a
  NamedSharding, absent when none), and the sharding to place the result on (None: none)."""
  from nbjax.sharding import canonicalize_sharding
  s = canonicalize_sharding(out_sharding, "dot_general") if out_sharding is not None else \
      _forced[-1] if _forced else None
  if s is None:
    return None, None
  return {"out_sharding": s}, (s if out_sharding is not None else None)


def _constraint(prim, avals, params, outs):
  return [aval_sharding(params["sharding"], len(outs[0].shape))]


def _unsharded(prim, avals, params, outs):
  return [None] * len(outs)


rules = {
    "broadcast_in_dim": _broadcast_in_dim, "transpose": _transpose, "squeeze": _squeeze,
    "reshape": _reshape, "rev": _same, "slice": _varying("slicing"),
    "pad": _varying("padding"), "dynamic_slice": _varying("dynamic_slice"),
    "dynamic_update_slice": _same, "concatenate": _concatenate, "cumsum": _cumulative,
    "cumprod": _cumulative, "cummax": _cumulative, "cummin": _cumulative,
    "cumlogsumexp": _cumulative,
    "dot_general": _dot_general, "sharding_constraint": _constraint,
    "copy": _same, "copy_p": _same, "optimization_barrier": lambda p, a, pr, o: [
        getattr(x, "_sh", None) for x in a],
    "scatter": _same, "scatter-add": _same, "scatter-mul": _same, "scatter-min": _same,
    "scatter-max": _same, "scatter-sub": _same,
    "bitcast_convert_type": _same, "gather": _unsharded, "iota": _unsharded,
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
