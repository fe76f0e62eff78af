"""Named-axis collectives: ``psum``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``,
``psum_scatter``, ``all_to_all``, ``ppermute``, ``pshuffle``, ``axis_index``, ``axis_size``.

Pipeline position: primitives of ``nbjax.lax`` whose operands are the per-member values of a
named mapped axis (``vmap(f, axis_name="i")``; ``pmap`` and ``shard_map`` later). A named
axis is bound while its transformation traces (``core.extend_axis_env``), so abstract eval
can check names and sizes. Under ``vmap`` the batching rules turn each collective into
ordinary array operations over the batch axis (a ``reduce_sum`` for ``psum``, a gather for
``ppermute``): the collective never runs as such, so there is no eager kernel. Under
``pmap`` (``interpreters/pxla.py``) each lowers to its StableHLO collective (``all_reduce``,
``all_gather``, ``reduce_scatter``, ``all_to_all``, ``collective_permute``, ``replica_id``)
over the replica groups of its axis (``ModuleContext.axis_context``). Rules
follow JAX's: the linear collectives transpose into each other (``psum`` into ``psum``,
``all_gather`` into ``psum_scatter``, ``all_to_all`` into itself with the axes swapped,
``ppermute`` into the inverse permutation); ``pmax``/``pmin`` have no derivative.
``axis_index_groups`` (reductions, ``all_gather``, ``psum_scatter``, ``all_to_all``) split each replica group
of the lowering into the given groups of axis indices; vmap over the grouped axis raises, as
JAX.
"""
from __future__ import annotations

import math

import numpy as np

from nbjax import core, dtypes, registry, _tree_util as tree_util
from nbjax.array import Array
from nbjax.core import Primitive, ShapedArray
from nbjax.interpreters import ad, batching
from nbjax.interpreters.batching import not_mapped

_NOTE = ("named-axis collective: vmap batches it into array operations over the mapped axis; "
         "with no axis bound there is nothing to run")


def _names(axis_name):
  return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _unbound(name):
  return NameError(f"unbound axis name: {name}")


def _size(names, who):
  env = dict(core.axis_env())
  n = 1
  for a in names:
    if a not in env:
      raise NameError(f"Found an unbound axis name: {a}. To fix this, please call {who} under "
                      "`jax.shard_map`.")
    n *= env[a]
  return n


def axis_size(axis_name):
  """The size of the named mapped axis (the product for a tuple of names)."""
  names = _names(axis_name)
  env = dict(core.axis_env())
  for a in names:
    if a not in env:
      raise _unbound(a)
  return int(np.prod([env[a] for a in names], dtype=np.int64))


def _eager(prim):
  def impl(*args, **params):
    raise _unbound((params.get("axes") or (params.get("axis_name"),))[0])
  return impl


def _register(prim, abstract_eval, batch, *, linear=None):
  prim.named_axes = lambda params: params["axes"] if "axes" in params else (params["axis_name"],)
  batch.wants_axis_data = True
  registry.register(prim, family="parallel", impls={"python": _eager(prim)},
                    abstract_eval=abstract_eval, batch=batch,
                    meta=dict(note=_NOTE, linear=bool(linear),
                              differentiable=bool(linear)))  # pmax/pmin: no rule, as JAX
  if callable(linear):  # the transpose rule (psum's is set after its definition)
    ad.deflinear2(prim, linear)


def _front(x, d, size):
  return batching.bdim_at_front(x, d, size)


def _lax():
  return batching._lax


def _split(axes, name):
  """``(mine, rest)``: whether this vmap's axis is among ``axes``, and the others."""
  return name in axes, tuple(a for a in axes if a != name)


# ----------------------------------------------------------------- psum / pmax / pmin


def _reduction(name, reduce, scale):
  prim = Primitive(name)

  def abstract_eval(x, *, axes, axis_index_groups):
    _size(axes, name)
    return ShapedArray(x.shape, x.dtype, x.weak_type)

  def batch(axis_data, vals, dims, *, axes, axis_index_groups):
    (x,), (d,) = vals, dims
    mine, rest = _split(axes, axis_data.name)
    if not mine:  # another axis's collective: per member of this one, bound below
      return prim.bind(x, axes=axes, axis_index_groups=axis_index_groups), d
    if axis_index_groups is not None:
      raise NotImplementedError("axis_index_groups not supported in vmap collectives. "
                                "Please open a feature request!")
    if d is not_mapped:
      out = scale(x, axis_data.size)
    else:
      out = reduce(x, (d,))
    if rest:
      out = prim.bind(out, axes=rest, axis_index_groups=None)
    return out, not_mapped

  _register(prim, abstract_eval, batch, linear=name == "psum")
  return prim


def _sum(x, axes):
  return _lax().reduce_sum(x, axes)


def _times(x, n):
  lax = _lax()
  return lax.mul(x, lax.full_like(x, n)) if core.get_aval(x).dtype != np.bool_ else x


psum_p = _reduction("psum", _sum, _times)
pmax_p = _reduction("pmax", lambda x, a: _lax().reduce_max(x, a), lambda x, n: x)
pmin_p = _reduction("pmin", lambda x, a: _lax().reduce_min(x, a), lambda x, n: x)
ad.deflinear2(psum_p, lambda ct, x, *, axes, axis_index_groups: [
    psum_p.bind(ad.instantiate_zeros(ct), axes=axes, axis_index_groups=axis_index_groups)])


def _canon_groups(axis_index_groups):
  """``axis_index_groups`` as a tuple of tuples of ints (JAX's canonical form), or None:
  each group of indices along the named axes reduces (gathers) on its own."""
  if axis_index_groups is None:
    return None
  return tuple(tuple(int(i) for i in g) for g in axis_index_groups)


def _reduce_groups(axis_index_groups):
  """JAX's check of a reduction's groups, canonicalized."""
  g = _canon_groups(axis_index_groups)
  if g is not None and {i for grp in g for i in grp} != set(range(sum(map(len, g)))):
    raise ValueError("axis_index_groups must cover all indices exactly once")
  return g


def _group_size(axis_name, groups):
  return len(groups[0]) if groups is not None else axis_size(axis_name)


def _tree_bind(prim, x, axis_name, axis_index_groups, **params):
  groups = _reduce_groups(axis_index_groups)
  axes = _names(axis_name)
  leaves, tree = tree_util.tree_flatten(x)
  return tree.unflatten([prim.bind(v, axes=axes, axis_index_groups=groups, **params)
                         for v in leaves])


def psum(x, axis_name, *, axis_index_groups=None):
  """Sum of ``x`` (a pytree) over the members of the named axis (axes), the same for each.

  Booleans are summed as int32, as JAX's. A Python or NumPy scalar outside any mapped value
  is multiplied by the axis size, as JAX does."""
  groups = _reduce_groups(axis_index_groups)
  leaves, tree = tree_util.tree_flatten(x)
  axes = _names(axis_name)
  outs = []
  for v in leaves:
    if dtypes.dtype(v) == np.bool_:
      v = _lax().convert_element_type(v, np.int32)
    if isinstance(v, (core.Tracer, Array)):
      outs.append(psum_p.bind(v, axes=axes, axis_index_groups=groups))
    else:  # a constant (Python, NumPy): the same for every member
      outs.append(v * _group_size(axes, groups))
  return tree.unflatten(outs)


def pmean(x, axis_name, *, axis_index_groups=None):
  """Mean of ``x`` (a pytree) over the members of the named axis (axes)."""
  n = _group_size(axis_name, _reduce_groups(axis_index_groups))
  return tree_util.tree_map(lambda v: v / n, psum(x, axis_name,
                                                 axis_index_groups=axis_index_groups))


def pmax(x, axis_name, *, axis_index_groups=None):
  """Maximum of ``x`` (a pytree) over the members of the named axis (axes)."""
  return _tree_bind(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
  """Minimum of ``x`` (a pytree) over the members of the named axis (axes)."""
  return _tree_bind(pmin_p, x, axis_name, axis_index_groups)


# ----------------------------------------------------------------- all_gather / psum_scatter

all_gather_p = Primitive("all_gather")
reduce_scatter_p = Primitive("reduce_scatter")


def _single(axes, who):
  if len(axes) != 1:
    raise NotImplementedError(f"{who} over several named axes is not implemented in nbjax")
  return axes[0]


def _gather_shape(shape, dim, n, tiled):
  if tiled:
    return shape[:dim] + (shape[dim] * n,) + shape[dim + 1:]
  return shape[:dim] + (n,) + shape[dim:]


def _all_gather_abstract_eval(x, *, axes, axis_index_groups, all_gather_dimension, axis_size,
                              tiled):
  _size(axes, "all_gather")
  return ShapedArray(_gather_shape(x.shape, all_gather_dimension, axis_size, tiled), x.dtype,
                     x.weak_type)


def _all_gather_batch(axis_data, vals, dims, **params):
  (x,), (d,) = vals, dims
  if _single(params["axes"], "all_gather") != axis_data.name:
    return _per_member(all_gather_p, x, d, params, "all_gather_dimension")
  if params["axis_index_groups"] is not None:
    raise NotImplementedError("axis_index_groups not supported in vmap")
  lax, all_gather_dimension, tiled = _lax(), params["all_gather_dimension"], params["tiled"]
  x = _front(x, d, axis_data.size)  # (n, *s): every member sees all of it
  out = batching.moveaxis(x, 0, all_gather_dimension)
  if tiled:
    s = _shape(out)
    k = all_gather_dimension
    out = lax.reshape(out, s[:k] + (s[k] * s[k + 1],) + s[k + 2:])
  return out, not_mapped


def _shape(x):
  return core.get_aval(x).shape


def _per_member(prim, x, d, params, *dim_params):
  """Another axis's collective, per member of this vmap's axis: bound below with this axis
  moved first, so the dimensions named by ``dim_params`` shift by one."""
  shifted = {k: params[k] + 1 for k in dim_params}
  return prim.bind(batching.moveaxis(x, d, 0), **{**params, **shifted}), 0


def _all_gather_transpose(ct, x, *, axes, axis_index_groups, all_gather_dimension, axis_size,
                          tiled):
  return [reduce_scatter_p.bind(ad.instantiate_zeros(ct), axes=axes,
                                axis_index_groups=axis_index_groups,
                                scatter_dimension=all_gather_dimension, axis_size=axis_size,
                                tiled=tiled)]


def _reduce_scatter_abstract_eval(x, *, axes, axis_index_groups, scatter_dimension, axis_size,
                                  tiled):
  _size(axes, "psum_scatter")
  s, k = x.shape, scatter_dimension
  if tiled:
    if s[k] % axis_size:
      raise ValueError(f"psum_scatter: the scattered dimension of size {s[k]} must be a "
                       f"multiple of the axis size {axis_size}")
    out = s[:k] + (s[k] // axis_size,) + s[k + 1:]
  else:
    if s[k] != axis_size:
      raise ValueError(f"psum_scatter: the scattered dimension has size {s[k]}, which must "
                       f"equal the axis size {axis_size} (or pass tiled=True)")
    out = s[:k] + s[k + 1:]
  return ShapedArray(out, x.dtype, x.weak_type)


def _reduce_scatter_batch(axis_data, vals, dims, **params):
  (x,), (d,) = vals, dims
  if _single(params["axes"], "psum_scatter") != axis_data.name:
    return _per_member(reduce_scatter_p, x, d, params, "scatter_dimension")
  if params["axis_index_groups"] is not None:
    raise NotImplementedError("axis_index_groups not supported in vmap")
  lax, tiled = _lax(), params["tiled"]
  n, k = axis_data.size, params["scatter_dimension"]
  total = _times(x, n) if d is not_mapped else _sum(x, (d,))  # the sum every member shares
  s = _shape(total)
  if tiled:
    total = lax.reshape(total, s[:k] + (n, s[k] // n) + s[k + 1:])
  return batching.moveaxis(total, k, 0), 0  # member i keeps block i


def _reduce_scatter_transpose(ct, x, *, axes, axis_index_groups, scatter_dimension, axis_size,
                              tiled):
  return [all_gather_p.bind(ad.instantiate_zeros(ct), axes=axes,
                            axis_index_groups=axis_index_groups,
                            all_gather_dimension=scatter_dimension, axis_size=axis_size,
                            tiled=tiled)]


_register(all_gather_p, _all_gather_abstract_eval, _all_gather_batch,
          linear=_all_gather_transpose)
_register(reduce_scatter_p, _reduce_scatter_abstract_eval, _reduce_scatter_batch,
          linear=_reduce_scatter_transpose)


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
  """Every member's ``x`` (a pytree), stacked along a new axis ``axis`` (concatenated along
  ``axis`` when ``tiled``), the same for each member."""
  groups = _canon_groups(axis_index_groups)
  n = _group_size(axis_name, groups)

  def one(v):
    nd = np.ndim(v) if not isinstance(v, core.Tracer) else v.aval.ndim
    ax = int(axis) + (nd + (not tiled) if axis < 0 else 0)
    if not 0 <= ax <= nd - tiled:
      raise ValueError(f"all_gather: axis {axis} is out of bounds for a value of rank {nd}")
    return all_gather_p.bind(v, axes=_names(axis_name), axis_index_groups=groups,
                             all_gather_dimension=ax, axis_size=n, tiled=bool(tiled))
  return tree_util.tree_map(one, x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
  """``psum`` of ``x`` (a pytree) scattered over the members: member ``i`` gets block ``i``
  of the sum along ``scatter_dimension`` (an index when not ``tiled``)."""
  groups = _canon_groups(axis_index_groups)
  n = _group_size(axis_name, groups)

  def one(v):
    params = dict(axes=_names(axis_name), axis_index_groups=groups,
                  scatter_dimension=int(scatter_dimension) % max(len(_shape(v)), 1), axis_size=n,
                  tiled=bool(tiled))
    _reduce_scatter_abstract_eval(core.get_aval(v), **params)  # JAX's shape errors, eagerly
    return reduce_scatter_p.bind(v, **params)
  return tree_util.tree_map(one, x)


# ----------------------------------------------------------------- all_to_all

all_to_all_p = Primitive("all_to_all")  # tiled: the non-tiled form adds and drops a size-1 axis


def _all_to_all_abstract_eval(x, *, axes, axis_index_groups, split_axis, concat_axis,
                              axis_size):
  _size(axes, "all_to_all")
  s = list(x.shape)
  if s[split_axis] % axis_size:
    raise ValueError(f"all_to_all: the split axis has size {s[split_axis]}, not a multiple of "
                     f"the axis size {axis_size}")
  s[split_axis] //= axis_size
  s[concat_axis] *= axis_size
  return ShapedArray(tuple(s), x.dtype, x.weak_type)


def _all_to_all_batch(axis_data, vals, dims, **params):
  (x,), (d,) = vals, dims
  if _single(params["axes"], "all_to_all") != axis_data.name:
    return _per_member(all_to_all_p, x, d, params, "split_axis", "concat_axis")
  if params["axis_index_groups"] is not None:
    raise NotImplementedError("axis_index_groups not supported in vmap")
  lax = _lax()
  n, sa, ca = axis_data.size, params["split_axis"], params["concat_axis"]
  x = _front(x, d, n)                                      # (j, *s): member j's value
  s = _shape(x)[1:]
  k = s[sa] // n
  x = lax.reshape(x, (n,) + s[:sa] + (n, k) + s[sa + 1:])  # (j, ..., i, k, ...)
  x = batching.moveaxis(x, 1 + sa, 0)                      # (i, j, ...): member i's blocks
  rest = s[:sa] + (k,) + s[sa + 1:]
  x = batching.moveaxis(x, 1, 1 + ca)                      # j just before the concat axis
  return lax.reshape(x, (n,) + rest[:ca] + (n * rest[ca],) + rest[ca + 1:]), 0


def _all_to_all_transpose(ct, x, *, axes, axis_index_groups, split_axis, concat_axis,
                          axis_size):
  return [all_to_all_p.bind(ad.instantiate_zeros(ct), axes=axes,
                            axis_index_groups=axis_index_groups, split_axis=concat_axis, concat_axis=split_axis, axis_size=axis_size)]


_register(all_to_all_p, _all_to_all_abstract_eval, _all_to_all_batch,
          linear=_all_to_all_transpose)


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
  """Member ``i`` gets block ``i`` (along ``split_axis``) of every member's ``x``, stacked
  (concatenated when ``tiled``) along ``concat_axis`` in member order."""
  groups = _canon_groups(axis_index_groups)
  n = _group_size(axis_name, groups)
  lax = _lax()

  names = _names(axis_name)

  def bind(v, sa, ca):
    if len(names) > 1 and groups is None:
      return _all_to_all_axes(v, names, sa, ca)
    return all_to_all_p.bind(v, axes=names, axis_index_groups=groups, split_axis=sa,
                             concat_axis=ca, axis_size=n)

  def one(v):
    nd = _shape(v).__len__()
    sa, ca = int(split_axis) % nd, int(concat_axis) % nd
    if tiled:
      if _shape(v)[sa] % n:
        raise ValueError(f"The size of all_to_all split_axis ({_shape(v)[sa]}) has to be "
                         f"divisible by the size of the named axis {axis_name} ({n})")
      return bind(v, sa, ca)
    if _shape(v)[sa] != n:
      raise ValueError("all_to_all requires the size of the mapped axis axis_name to equal "
                       f"x.shape[split_axis], but they are {n} and {_shape(v)[sa]} "
                       "respectively.")
    e = ca + (ca >= sa)  # the new axis's place, counted before the split axis goes
    sa1 = sa + (e <= sa)
    out = bind(lax.expand_dims(v, (e,)), sa1, e)
    return lax.squeeze(out, (sa1,))
  return tree_util.tree_map(one, x)


def _all_to_all_axes(v, names, sa, ca):
  """Tiled ``all_to_all`` over several named axes (member index row-major over ``names``):
  one all_to_all per axis, each sending the blocks of its own digit of the member index."""
  lax = _lax()
  sizes = [axis_size(a) for a in names]
  s, n = _shape(v), math.prod(sizes)
  k = s[sa] // n  # (all_to_all checked that n divides it)
  x = batching.moveaxis(v, sa, 0)                        # (split, *rest)
  x = lax.reshape(x, (*sizes, k, *_shape(x)[1:]))        # (n0, ..., k, *rest)
  for a, m in zip(names, sizes):                         # A_l goes, R_l comes in last
    x = all_to_all_p.bind(lax.expand_dims(x, (_shape(x).__len__(),)), axes=(a,),
                          axis_index_groups=None, split_axis=0,
                          concat_axis=_shape(x).__len__(), axis_size=m)
    x = lax.squeeze(x, (0,))                             # (..., k, *rest, R0..R_l)
  L, nd = len(names), _shape(x).__len__()
  c = 0 if ca == sa else 1 + ca - (ca > sa)              # the concat axis in (k, *rest)
  x = lax.transpose(x, (*range(c), *range(nd - L, nd), *range(c, nd - L)))  # R's before it
  sh = _shape(x)
  x = lax.reshape(x, sh[:c] + (math.prod(sh[c:c + L + 1]),) + sh[c + L + 1:])
  return batching.moveaxis(x, 0, sa)


# ----------------------------------------------------------------- ppermute / pshuffle

ppermute_p = Primitive("ppermute")


def _ppermute_abstract_eval(x, *, axes, perm):
  n = _size(axes, "ppermute")
  srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
  if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or \
      not all(0 <= i < n for i in srcs + dsts):
    raise ValueError(f"ppermute: perm {perm} must be pairs (source, destination) of distinct "
                     f"indices in [0, {n})")
  return ShapedArray(x.shape, x.dtype, x.weak_type)


def _ppermute_batch(axis_data, vals, dims, *, axes, perm):
  (x,), (d,) = vals, dims
  lax = _lax()
  if _single(axes, "ppermute") != axis_data.name:
    return ppermute_p.bind(x, axes=axes, perm=perm), d
  n = axis_data.size
  x = _front(x, d, n)
  shape = _shape(x)
  src, got = np.zeros((n, 1), np.int32), np.zeros(n, bool)
  for a, b in perm:
    src[b], got[b] = a, True
  dnums = lax.GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape))),
                                     collapsed_slice_dims=(0,), start_index_map=(0,))
  out = lax.gather(x, Array(src), dnums, (1,) + shape[1:], mode="clip")  # member b <- a
  if not got.all():  # members no pair sends to get zeros
    keep = lax.broadcast_in_dim(Array(got), shape, (0,))
    out = lax.select(keep, out, lax.full_like(out, 0))
  return out, 0


def _ppermute_transpose(ct, x, *, axes, perm):
  inv = tuple((t, s) for s, t in perm)
  return [ppermute_p.bind(ad.instantiate_zeros(ct), axes=axes, perm=inv)]


_register(ppermute_p, _ppermute_abstract_eval, _ppermute_batch, linear=_ppermute_transpose)


def ppermute(x, axis_name, perm):
  """Member ``dst`` gets member ``src``'s ``x`` (a pytree) for each ``(src, dst)`` in
  ``perm``; members no pair sends to get zeros."""
  perm = tuple((int(s), int(t)) for s, t in perm)
  axes = _names(axis_name)
  axis_size(axes)

  def one(v):
    _ppermute_abstract_eval(core.get_aval(v), axes=axes, perm=perm)  # JAX's errors, eagerly
    return ppermute_p.bind(v, axes=axes, perm=perm)
  return tree_util.tree_map(one, x)


def pshuffle(x, axis_name, perm):
  """Member ``i`` gets member ``perm[i]``'s ``x`` (a pytree); ``perm`` is a permutation."""
  if set(perm) != set(range(len(perm))):
    raise ValueError(f"`perm` does not represent a permutation: {perm}")
  return ppermute(x, axis_name, [(int(p), i) for i, p in enumerate(perm)])


# ----------------------------------------------------------------- axis_index

axis_index_p = Primitive("axis_index")


def _axis_index_abstract_eval(*, axis_name):
  _size((axis_name,), "axis_index")
  return ShapedArray((), np.dtype(np.int32))


def _axis_index_batch(axis_data, vals, dims, *, axis_name):
  if axis_name != axis_data.name:
    return axis_index_p.bind(axis_name=axis_name), not_mapped
  return _lax().iota(np.int32, axis_data.size), 0


_register(axis_index_p, _axis_index_abstract_eval, _axis_index_batch)


def axis_index(axis_name):
  """This member's index along the named axis (an int32 scalar); for a tuple of names, the
  row-major index over them."""
  names = _names(axis_name)
  out = None
  for a in names:
    i = axis_index_p.bind(axis_name=a)
    out = i if out is None else out * axis_size(a) + i
  return out


def pargmax(x, axis_name):
  """Index along the named axis of the member holding the maximum of ``x``, elementwise (the
  first one on ties): JAX's private ``parallel.pargmax``."""
  return _parg("pargmax", x, pmax(x, axis_name), axis_name)


def pargmin(x, axis_name):
  """``pargmax``'s counterpart for the minimum."""
  return _parg("pargmin", x, pmin(x, axis_name), axis_name)


def _parg(who, x, best, axis_name):
  if isinstance(axis_name, (tuple, list)):
    raise TypeError(f"pargmin only accepts a single axis, got {axis_name}")  # (JAX's, both)
  lax, i = _lax(), axis_index(axis_name)
  big = lax.full(np.shape(x), np.iinfo(np.int32).max, np.int32)
  return pmin(lax.select(lax.eq(best, x), lax.full(np.shape(x), i, np.int32), big), axis_name)


# ----------------------------------------------------------------- lowering (pmap)

from nbjax.interpreters.lowering import hlo, ir, mlir  # noqa: E402  (lazy: no jaxlib import)
from nbjax.interpreters.lowering import register as _lower  # noqa: E402


def _axis_ctx(ctx, axes):
  ac = ctx.module_context.axis_context
  if ac is None:
    raise NameError(f"unbound axis name: {axes[0]} (collectives lower only inside pmap; "
                    "under vmap they are batched away)")
  return ac


def _groups(ctx, axes, axis_index_groups=None, even=False):
  """The replica groups attribute; uneven groups padded with -1, as JAX's (``even``: they
  must not be, as all_to_all's)."""
  g = _axis_ctx(ctx, axes).groups(axes)
  if axis_index_groups is not None:  # each group of axis indices within each replica group
    if any(not 0 <= i < g.shape[1] for grp in axis_index_groups for i in grp):
      raise ValueError(f"axis_index_groups {axis_index_groups} index outside the axis "
                       f"{axes} of size {g.shape[1]}")
    k = max(map(len, axis_index_groups))
    if even and any(len(grp) != k for grp in axis_index_groups):
      raise ValueError("Replica groups must be equally sized")
    g = np.array([[row[i] for i in grp] + [-1] * (k - len(grp))
                  for row in g for grp in axis_index_groups], np.int64)
  return ir.DenseElementsAttr.get(np.ascontiguousarray(g))


def _scalar_region(op, aval, combine):
  s = mlir.aval_to_ir_type(aval.update(shape=(), weak_type=False))
  b = op.regions[0].blocks.append(s, s)
  with ir.InsertionPoint(b):
    hlo.return_([combine(*b.arguments)])


def _combiner(name, dtype):
  if np.dtype(dtype) == np.bool_:
    return {"psum": hlo.or_, "pmax": hlo.or_, "pmin": hlo.and_}[name]
  return {"psum": hlo.add, "pmax": hlo.maximum, "pmin": hlo.minimum}[name]


def _allreduce_lowering(ctx, x, *, axes, axis_index_groups):
  aval = ctx.avals_in[0]
  op = hlo.AllReduceOp([mlir.aval_to_ir_type(aval)], [x], _groups(ctx, axes, axis_index_groups))
  _scalar_region(op, aval, _combiner(ctx.primitive.name, aval.dtype))
  return [op.results[0]]


def _all_gather_lowering(ctx, x, *, axes, axis_index_groups, all_gather_dimension, axis_size,
                         tiled):
  aval, out = ctx.avals_in[0], ctx.avals_out[0]
  d = all_gather_dimension
  if not tiled:  # a size-1 axis to gather along
    s = aval.shape
    x = hlo.reshape(mlir.aval_to_ir_type(aval.update(shape=s[:d] + (1,) + s[d:])), x)
  op = hlo.AllGatherOp([mlir.aval_to_ir_type(out)], [x], d,
                       _groups(ctx, axes, axis_index_groups))
  return [op.results[0]]


def _reduce_scatter_lowering(ctx, x, *, axes, axis_index_groups, scatter_dimension, axis_size,
                             tiled):
  aval, out = ctx.avals_in[0], ctx.avals_out[0]
  k, s = scatter_dimension, aval.shape
  tiled_aval = aval.update(shape=s[:k] + (s[k] // axis_size,) + s[k + 1:])
  op = hlo.ReduceScatterOp(mlir.aval_to_ir_type(tiled_aval), x, k,
                           _groups(ctx, axes, axis_index_groups))
  _scalar_region(op, aval, _combiner("psum", aval.dtype))
  r = op.results[0]
  return [r if tiled else hlo.reshape(mlir.aval_to_ir_type(out), r)]


def _all_to_all_lowering(ctx, x, *, axes, axis_index_groups, split_axis, concat_axis,
                         axis_size):
  op = hlo.AllToAllOp([x], split_axis, concat_axis, axis_size,
                      _groups(ctx, axes, axis_index_groups, even=True),
                      results=[mlir.aval_to_ir_type(ctx.avals_out[0])])
  return [op.results[0]]


def _ppermute_lowering(ctx, x, *, axes, perm):
  groups = _axis_ctx(ctx, axes).groups(axes)
  pairs = np.array([(g[s], g[t]) for g in groups for s, t in perm], np.int64).reshape(-1, 2)
  return [hlo.CollectivePermuteOp(x, ir.DenseIntElementsAttr.get(pairs)).results[0]]


def _axis_index_lowering(ctx, *, axis_name):
  ac = _axis_ctx(ctx, (axis_name,))
  if axis_name not in ac.names:
    raise NameError(f"unbound axis name: {axis_name}")
  i = ac.names.index(axis_name)
  u32 = lambda v: mlir.ir_constant(np.array(v, np.uint32))
  div = ac.nreps // int(np.prod(ac.sizes[:i + 1]))
  r = hlo.remainder(hlo.divide(hlo.replica_id(), u32(div)), u32(ac.sizes[i]))
  return [hlo.convert(mlir.aval_to_ir_type(ctx.avals_out[0]), r)]


for _p in (psum_p, pmax_p, pmin_p):
  _lower(_p, _allreduce_lowering)
_lower(all_gather_p, _all_gather_lowering)
_lower(reduce_scatter_p, _reduce_scatter_lowering)
_lower(all_to_all_p, _all_to_all_lowering)
_lower(ppermute_p, _ppermute_lowering)
_lower(axis_index_p, _axis_index_lowering)


__all__ = ["all_gather", "all_gather_p", "all_to_all", "all_to_all_p", "axis_index",
           "axis_index_p", "axis_size", "pmax", "pmax_p", "pmean", "pmin", "pmin_p", "ppermute",
           "ppermute_p", "pshuffle", "psum", "psum_p", "psum_scatter", "reduce_scatter_p"]
