"""``shard_map``: ``f`` on per-device blocks of its inputs over a ``Mesh``, with collectives
over the mesh's axis names.

Pipeline position: ``shard_map(f, mesh=..., in_specs=..., out_specs=...)(*args)`` traces
``f`` once per signature on the block avals (``NamedSharding(mesh, spec).shard_shape``)
with every mesh axis bound (``core.extend_axis_env``), and binds ``shard_map_p``. The impl
takes the *replica route*, as ``pmap`` (``interpreters/pxla.py``): the block jaxpr is lowered
once per device by ``pxla._lower`` with an ``AxisContext`` mapping each mesh axis name to its
replica groups (replica ``i`` is ``mesh.devices.flat[i]``, row-major over the mesh), and
compiled with ``num_replicas = mesh.size`` (``xla.Replicated``); each device gets its block
of each input (``devices_indices_map`` of the in_spec), and outputs are assembled from the
per-device blocks by the out_specs (an axis the out_spec does not name is read from its
first member: ``check_vma=True``, the default, checks statically that the value is replicated
over it, as JAX does). Results keep their per-device buffers (``NamedSharding(mesh,
out_spec)``). Rules: jvp is the jvp of the body; partial eval splits the body (residuals
leave per device); transpose is JAX's unchecked rule (see ``_transpose``); batching adds an
unsplit axis to the blocks. Inside ``jit`` or ``pmap`` it lowers inline in the enclosing
replicated program (``_lowering``, ``pxla.ReplicatedJit``). A mesh spanning several
processes (``nbjax.distributed``): every process compiles the same program over all the
mesh's devices and runs the replicas of its own on its blocks (``_Exe._run_processes``;
collectives cross processes through gloo); the outputs are global Arrays. Inside ``jit``
such a shard_map runs as its own program (``pjit._Interpreted``), not inline.
"""
from __future__ import annotations

import contextlib
import functools
import weakref

import numpy as np

from nbjax import core, dtypes, registry, _tree_util as tree_util
from nbjax.array import Array, _wrap
from nbjax.core import Primitive
from nbjax.interpreters import ad
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters import pjit
from nbjax.jaxpr import ClosedJaxpr, eval_jaxpr, jaxprs_in_params
from nbjax.sharding import Mesh, NamedSharding, PartitionSpec, _current_mesh

__all__ = ["shard_map", "shard_map_p", "smap", "Infer"]

shard_map_p = Primitive("shard_map")
shard_map_p.multiple_results = True
shard_map_p.places_sharded = True


def _axes(mesh):
  return tuple(zip(mesh.axis_names, mesh.devices.shape))


@contextlib.contextmanager
def _env(mesh):
  with contextlib.ExitStack() as st:
    for a, k in _axes(mesh):
      st.enter_context(core.extend_axis_env(a, k))
    yield


def _global_shape(mesh, spec, block):
  sz = mesh.shape
  return tuple(d * int(np.prod([sz[a] for a in p], dtype=np.int64))
               for d, p in zip(block, spec._normalized(len(block))))


def _abstract_eval(*avals, jaxpr, mesh, in_specs, out_specs, **_):
  return [a.update(shape=_global_shape(mesh, s, a.shape))
          for a, s in zip(jaxpr.out_avals, out_specs)]


_compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Exe:
  def __init__(self, closed, mesh, name):
    from nbjax import xla
    from nbjax.interpreters import pxla, spmd
    spmd.sharded_arrays_exist()  # (its outputs are sharded)
    n = mesh.size
    if pxla.replicas(closed.jaxpr) > 1:
      raise NotImplementedError(f"shard_map ({name}): a pmap or shard_map inside its body "
                                "would need more devices than its mesh")
    self.devs = list(mesh.devices.flat)
    ins, outs = closed.in_avals, closed.out_avals
    cbs = []  # host callbacks: each device runs them on its blocks, as JAX's
    module = pxla._lower(closed, None, n, (0,) * len(ins), (0,) * len(outs), name,
                         axes=_axes(mesh), host_callbacks=cbs)
    self.rep = xla.Replicated(module, self.devs, [(a.shape, a.dtype, True) for a in ins],
                              name=f"shard_map_{name}", host_callbacks=cbs)

  def run(self, args, mesh, in_specs, out_specs, out_avals):
    from nbjax import xla
    if mesh.is_multi_process:
      return self._run_processes(args, mesh, in_specs, out_specs, out_avals)
    host = []
    for x, s in zip(args, in_specs):
      v = x._value if type(x) is Array else np.asarray(x)
      idx = NamedSharding(mesh, s).devices_indices_map(v.shape)
      host.append(np.stack([v[idx[d]] for d in self.devs]))
    res = self.rep.run(host)
    outs = []
    for bufs, s, a in zip(res, out_specs, out_avals):
      sh = NamedSharding(mesh, s)
      idx = sh.devices_indices_map(a.shape)
      v = np.empty(a.shape, a.dtype)
      for d, b in reversed(list(zip(self.devs, bufs))):  # the first member of a replica wins
        v[idx[d]] = xla._to_numpy(b).reshape(v[idx[d]].shape)
      o = _wrap(v, a.weak_type)
      o._pmap = (sh, list(bufs), None)
      outs.append(o)
    return outs

  def _run_processes(self, args, mesh, in_specs, out_specs, out_avals):
    """Several processes: each puts every input on ``NamedSharding(mesh, in_spec)`` (a value
    given in every process, or a global Array, resharded by XLA where laid out otherwise),
    runs the replicas of its own devices on its blocks, and gets back global Arrays of its
    output blocks."""
    from nbjax import xla
    from nbjax.interpreters import spmd
    local = self.rep.local
    host = []
    for x, s in zip(args, in_specs):
      blocks = {sh.device: sh.data for sh in
                spmd.put(x, NamedSharding(mesh, s)).addressable_shards}
      host.append(np.stack([np.asarray(blocks[d]) for d in local]))
    outs = []
    for bufs, s, a in zip(self.rep.run(host), out_specs, out_avals):
      sh = NamedSharding(mesh, s)
      mine = dict(zip(local, bufs))
      block = sh.shard_shape(a.shape)
      outs.append(spmd.from_pieces(a.shape, a.dtype, sh,
                                   [xla._to_numpy(mine[d]).reshape(block)
                                    for d in spmd.local_devices(sh)], a.weak_type))
    return outs


def _impl(*args, jaxpr, mesh, in_specs, out_specs, name, **_):
  from nbjax.interpreters import lowering
  outs = lowering.on_key_data(  # key arrays: the map runs on their data
      jaxpr, args, lambda cj, xs: _impl(*xs, jaxpr=cj, mesh=mesh, in_specs=in_specs,
                                        out_specs=out_specs, name=name))
  if outs is not None:
    return outs
  per = _compiled.get(jaxpr)
  if per is None:
    per = _compiled[jaxpr] = {}
  exe = per.get(mesh)
  if exe is None:
    exe = per[mesh] = _Exe(jaxpr, mesh, name)
  out_avals = _abstract_eval(*[core.get_aval(x) for x in args], jaxpr=jaxpr, mesh=mesh,
                             in_specs=in_specs, out_specs=out_specs)
  return exe.run(args, mesh, in_specs, out_specs, out_avals)


def _jvp(primals, tangents, *, jaxpr, mesh, in_specs, out_specs, name, **params):
  nonzeros = tuple(pjit._nonzero(t) for t in tangents)
  with _env(mesh):
    new, out_nz = pjit.jvp_jaxpr(jaxpr, nonzeros, name)
  p = dict(params, jaxpr=new, mesh=mesh, name=name,
           in_specs=in_specs + tuple(s for s, nz in zip(in_specs, nonzeros) if nz),
           out_specs=out_specs + tuple(s for s, nz in zip(out_specs, out_nz) if nz))
  outs = shard_map_p.bind(*primals, *[t for t, nz in zip(tangents, nonzeros) if nz], **p)
  k = len(jaxpr.out_avals)
  tans = iter(outs[k:])
  avals = _abstract_eval(jaxpr=jaxpr, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
  return outs[:k], [next(tans) if nz else ad.Zero(a.to_tangent_aval())
                    for a, nz in zip(avals, out_nz)]


def _spmd_names():
  """The mesh axes enclosing vmaps split their batch axes over (their ``spmd_axis_name``)."""
  from nbjax.interpreters import batching
  return {a for names in batching.spmd_names for a in names}


def _unmentioned(mesh, spec):
  """The mesh axes ``spec`` does not name (an enclosing vmap's spmd axes aside, as JAX's)."""
  named = {a for p in spec for a in ((p,) if isinstance(p, str) else p or ())} | _spmd_names()
  return tuple(a for a in mesh.axis_names if a not in named)


def _factor(mesh, spec):
  return int(np.prod([mesh.shape[a] for a in _unmentioned(mesh, spec)], dtype=np.int64))


_LAX = []  # nbjax.lax, installed by nbjax.lax at import (this layer does not import it)


def _lax():
  return _LAX[0]


_rule_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # jaxpr -> {key: rule}


def _transpose(cts, *args, jaxpr, mesh, in_specs, out_specs, name, **params):
  """Transpose as JAX's unchecked (``check_vma=False``) rule: each member of a replicated
  output's axes gets ``ct / replicas``, the body is transposed per block (``psum``'s
  transpose is ``psum``), and an input's cotangent is summed over the axes its in_spec does
  not name. Known args are residuals, passed with their in_specs."""
  lax = _lax()
  undef = [ad.is_undefined_primal(x) for x in args]
  res = [x for x, u in zip(args, undef) if not u]
  res_specs = tuple(s for s, u in zip(in_specs, undef) if not u)
  cts = [ad.instantiate_zeros(c) for c in cts]
  per_in = jaxpr.in_avals

  def fun(*ins):
    r, c = iter(ins[:len(res)]), list(ins[len(res):])
    c = [x if _factor(mesh, s) == 1 or x.dtype == dtypes.float0 else
         lax.div(x, lax.full_like(x, _factor(mesh, s))) for x, s in zip(c, out_specs)]
    full = [ad.UndefinedPrimal(a) if u else next(r) for a, u in zip(per_in, undef)]
    outs = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, full, c)
    outs = [ad.instantiate_zeros(o) for o, u in zip(outs, undef) if u]
    specs = [s for s, u in zip(in_specs, undef) if u]
    return [o if not _unmentioned(mesh, s) or o.dtype == dtypes.float0 else
            lax.psum(o, _unmentioned(mesh, s)) for o, s in zip(outs, specs)]

  per = _rule_cache.setdefault(jaxpr, {})
  key = ("transpose", tuple(undef), mesh, in_specs, out_specs, core._axis_env.env,
         frozenset(_spmd_names()))
  if key not in per:
    avals = [a for a, u in zip(per_in, undef) if not u] + list(jaxpr.out_avals)
    with _env(mesh):
      tj, _, consts = pe.trace_to_jaxpr_dynamic(fun, avals, fun_name=f"transpose({name})")
    per[key] = ClosedJaxpr(pe.convert_constvars_jaxpr(tj), []), consts
  tj, consts = per[key]
  outs = iter(shard_map_p.bind(
      *consts, *res, *cts, jaxpr=tj, mesh=mesh,
      in_specs=(PartitionSpec(),) * len(consts) + res_specs + tuple(out_specs),
      out_specs=tuple(s for s, u in zip(in_specs, undef) if u), name=f"transpose({name})",
      **params))
  return [next(outs) if u else None for u in undef]


def _restage(closed, fun, avals, name):
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, avals, fun_name=name)
  return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), consts


def _partial_eval(in_unknowns, *, jaxpr, mesh, in_specs, out_specs, name, **params):
  """The known shard_map computes the known outputs and the residuals, each a per-device
  value: it leaves with a leading axis of size 1 split over every mesh axis (global leading
  axis ``mesh.size``), and the unknown shard_map takes it back with that spec."""
  per = _rule_cache.setdefault(jaxpr, {})
  from nbjax.interpreters import batching
  key = ("pe", tuple(in_unknowns), mesh, in_specs, out_specs, name, tuple(params.items()),
         core._axis_env.env, tuple(batching.spmd_names))
  if key not in per:
    per[key] = _partial_eval_(in_unknowns, jaxpr=jaxpr, mesh=mesh, in_specs=in_specs,
                              out_specs=out_specs, name=name, **params)
  return per[key]


def _partial_eval_(in_unknowns, *, jaxpr, mesh, in_specs, out_specs, name, **params):
  lax = _lax()
  with _env(mesh):
    known, unknown, out_unk, num_res = pe.partial_eval_jaxpr(jaxpr, in_unknowns)
  spmd = _spmd_names()  # (an enclosing vmap's: it splits the batch axis over them)
  rspec = PartitionSpec(tuple(a for a in mesh.axis_names if a not in spmd))
  nk = len(known.out_avals) - num_res

  def kfun(*xs):
    outs = eval_jaxpr(known.jaxpr, known.consts, *xs)
    return outs[:nk] + [lax.expand_dims(r, (0,)) for r in outs[nk:]]

  def ufun(*xs):
    rs = [lax.reshape(r, r.shape[1:]) for r in xs[:num_res]]
    return eval_jaxpr(unknown.jaxpr, unknown.consts, *rs, *xs[num_res:])

  r_avals = [a.update(shape=(1, *a.shape)) for a in known.out_avals[nk:]]
  with _env(mesh):
    kj, kc = _restage(known, kfun, known.in_avals, name)
    uj, uc = _restage(unknown, ufun, r_avals + list(unknown.in_avals[num_res:]), name)
  if kc or uc:  # trace constants would be inputs of their own: stage the whole equation
    return None
  kp = dict(params, jaxpr=kj, mesh=mesh, name=name,
            in_specs=tuple(s for s, u in zip(in_specs, in_unknowns) if not u),
            out_specs=tuple(s for s, u in zip(out_specs, out_unk) if not u) + (rspec,) * num_res)
  up = dict(params, jaxpr=uj, mesh=mesh, name=name,
            in_specs=(rspec,) * num_res + tuple(s for s, u in zip(in_specs, in_unknowns) if u),
            out_specs=tuple(s for s, u in zip(out_specs, out_unk) if u))
  return kp, up, out_unk, num_res


def _insert(spec, ndim, d, val=None):
  """``spec`` with ``val`` inserted at ``d`` (padded with None up to ``d``: JAX's
  ``batch_spec``)."""
  parts = tuple(spec) + (None,) * (d - len(spec))
  return PartitionSpec(*parts[:d], val, *parts[d:])


def _batch(axis_data, vals, dims, *, jaxpr, mesh, in_specs, out_specs, name, **params):
  """vmap of shard_map: the batch axis is an unsplit axis of each block (first in the
  inputs); the body is batched (collectives over mesh axes see the batch axis as data)."""
  from nbjax.interpreters import batching
  vals = [x if d is batching.not_mapped else batching.moveaxis(x, d, 0)
          for x, d in zip(vals, dims)]
  inner = tuple(None if d is batching.not_mapped else 0 for d in dims)
  spmd, size = axis_data.spmd_name, axis_data.size
  if spmd is not None:  # the batch axis split over these mesh axes too (JAX's spmd_axis_name)
    for what, specs in (("in_specs", in_specs), ("out_specs", out_specs)):
      if set(spmd) & {a for s in specs for p in s._normalized(len(s)) for a in p}:
        raise ValueError(f"vmap spmd_axis_name cannot appear in shard_map {what}")
    size //= int(np.prod([mesh.shape[a] for a in spmd]))
  with _env(mesh):
    new, odims = pjit.batch_jaxpr(jaxpr, size, inner, axis_data.name, name)
  ins = tuple(s if d is None else _insert(s, len(a.shape), 0, spmd)
              for s, d, a in zip(in_specs, inner, jaxpr.in_avals))
  outs = tuple(s if d is None else _insert(s, len(a.shape), d, spmd)
               for s, d, a in zip(out_specs, odims, jaxpr.out_avals))
  res = shard_map_p.bind(*vals, jaxpr=new, mesh=mesh, in_specs=ins, out_specs=outs, name=name,
                         **params)
  return res, [batching.not_mapped if d is None else d for d in odims]


_batch.wants_axis_data = True


def _lowering(ctx, *args, jaxpr, mesh, in_specs, out_specs, name, **_):
  """Inline in an enclosing replicated program (``pxla.lower_inline``): each replica
  slices its block of every input by its mesh coordinates and gathers the outputs' blocks
  back (``all_gather`` per named axis, minor first)."""
  from nbjax.interpreters import pxla
  if mesh.is_multi_process:  # (pjit._Interpreted then runs it as its own program: _impl)
    raise NotImplementedError(f"shard_map ({name}) over a mesh spanning several processes "
                              "does not lower inside a replicated program")
  lax, size = _lax(), mesh.shape

  def slice_in(i, x):
    aval = ctx.avals_in[i]
    for d, p in enumerate(in_specs[i]._normalized(len(aval.shape))):
      if p:
        block = aval.shape[d] // int(np.prod([size[a] for a in p]))
        lin = 0
        for a in p:
          lin = lin * size[a] + lax.axis_index(a)
        x = lax.dynamic_slice_in_dim(x, lin * block, block, d)
    return x

  def gather_out(i, o):
    for d, p in enumerate(out_specs[i]._normalized(len(jaxpr.out_avals[i].shape))):
      for a in reversed(p):
        o = lax.all_gather(o, a, axis=d, tiled=True)
    return o

  inner = pxla._inline((mesh, in_specs, out_specs), jaxpr, _axes(mesh), ctx.avals_in,
                       slice_in, gather_out)
  return pxla.lower_inline(ctx, args, inner, _axes(mesh), f"shard_map ({name})")


shard_map_p.make_eager = lambda prim, f_small, f_large, thr: _impl
registry.register(
    shard_map_p, family="call", impls={"python": _impl}, abstract_eval=_abstract_eval,
    jvp=_jvp, transpose=_transpose, batch=_batch,
    meta=dict(differentiable=True,
              note="map over mesh blocks: its block jaxpr runs as one replicated XLA program",
              lowering_note="runs as its own replicated XLA program (num_replicas = "
                            "mesh.size); inside jit or pmap, inline in that replicated program"))
shard_map_p.partial_eval = _partial_eval
shard_map_p.lowerings["cpu"] = _lowering


# ------------------------------------------------------------ check_vma: replication check
# Which mesh axes each value of the body may vary over (JAX's ``vma`` type, inferred here from
# the jaxpr instead of carried on avals): an input varies over the axes its in_spec names; a
# reduction or gather over axes (without axis_index_groups) makes them invariant; ``axis_index``, ``ppermute``,
# ``all_to_all`` and ``psum_scatter`` make their axes varying; anything else varies over the
# union of its inputs. Calls, ``scan``, ``while`` (carries to a fixed point) and ``cond`` are
# followed into; other sub-jaxprs count with every input at the union.

_REDUCE = frozenset({"psum", "pmax", "pmin", "all_gather"})
_VARY = frozenset({"ppermute", "all_to_all", "reduce_scatter"})


def _carried(body, consts, carry, rest, k):
  """Loop carries' vma to a fixed point: ``(carry, outs of the last pass)``."""
  while True:
    outs = _vma(body, consts + carry + rest)
    new = [c | o for c, o in zip(carry, outs[:k])]
    if new == carry:
      return carry, outs
    carry = new


def _eqn_vma(e, ins):
  name, p, u = e.primitive.name, e.params, frozenset().union(*ins)
  if name in _REDUCE:  # (grouped: each group has its own value)
    return [u if p["axis_index_groups"] is not None else u - set(p["axes"])]
  if name in _VARY:
    return [u | set(p["axes"])]
  if name == "axis_index":
    return [frozenset({p["axis_name"]})]
  if name == "scan":
    c, k = p["num_consts"], p["num_carry"]
    carry, outs = _carried(p["jaxpr"].jaxpr, ins[:c], ins[c:c + k], ins[c + k:], k)
    return carry + outs[k:]
  if name == "while":
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    carry, pred = list(ins[cn + bn:]), frozenset()
    while True:  # a varying predicate makes every carry varying
      carry, _ = _carried(p["body_jaxpr"].jaxpr, ins[cn:cn + bn], carry, [], len(carry))
      pred = _vma(p["cond_jaxpr"].jaxpr, ins[:cn] + carry)[0]
      new = [c | pred for c in carry]
      if new == carry:
        return carry
      carry = new
  if name == "cond":
    outs = [_vma(b.jaxpr, ins[1:]) for b in p["branches"]]
    return [frozenset().union(ins[0], *o) for o in zip(*outs)]
  subs = jaxprs_in_params(p)
  if len(subs) == 1 and len(subs[0].invars) == len(ins) and name != "shard_map":
    return _vma(subs[0], ins)  # a call (jit, custom_jvp/vjp, checkpoint...)
  out = u  # anything else: the union of its inputs, and of what its sub-jaxprs may add
  for j in subs:
    for _ in range(2):
      out = out.union(*_vma(j, [out] * len(j.invars)))
  return [out] * len(e.outvars)


def _vma(jaxpr, in_vma):
  from nbjax.jaxpr import Literal
  env = dict(zip(jaxpr.invars, in_vma))
  read = lambda x: frozenset() if type(x) is Literal else env.get(x, frozenset())
  for e in jaxpr.eqns:
    outs = _eqn_vma(e, [read(x) for x in e.invars])
    for v, o in zip(e.outvars, outs if len(outs) == len(e.outvars) else [outs[0]] * len(e.outvars)):
      env[v] = o
  return [read(v) for v in jaxpr.outvars]


def _named(spec):
  return {a for p in spec for a in ((p,) if isinstance(p, str) else p or ())}


def _check_vma(f, mesh, jaxpr, in_specs, out_specs):
  got = _vma(jaxpr, [frozenset(_named(s)) for s in in_specs])
  order = lambda axes: ",".join(a for a in mesh.axis_names if a in axes)
  msgs = []
  for v, s in zip(got, out_specs):  # (JAX 0.10.2 prints no key path)
    v = v & set(mesh.axis_names)  # (an enclosing pmap's axes are not this map's business)
    bad = v - _named(s)
    if not bad:
      continue
    unmentioned = _unmentioned(mesh, s)
    if len(unmentioned) > 1:
      msgs.append(f"* out_specs is {s} which implies that the corresponding output value "
                  f"is only varying across mesh axes {{{order(_named(s))}}} and not "
                  f"{{{order(bad)}}}, but it was inferred to be possibly varying over "
                  f"{{{order(v)}}}")
    else:
      msgs.append(f"* out_specs is {s} which implies that the corresponding output value "
                  f"is replicated across mesh axis '{unmentioned[0]}', but could not infer "
                  "replication over any axes")
  if msgs:
    if len(msgs) == 1:
      msgs = [msgs[0][2:]]
    raise ValueError(
        f"shard_map applied to the function '{getattr(f, '__name__', str(f))}' was given "
        "out_specs which require replication which can't be statically inferred given the "
        f"mesh:\n\nThe mesh given has shape {tuple(mesh.devices.shape)} with corresponding "
        f"axis names {mesh.axis_names}.\n\n" + "\n\n".join(msgs) + "\n\nCheck if these "
        "output values are meant to be replicated over those mesh axes. If not, consider "
        "revising the corresponding out_specs entries. If so, consider disabling the check by "
        "passing the check_vma=False argument to `jax.shard_map`.")


class InferFromArgs:
  """``in_specs``' default: read them from the arguments' shardings (Explicit axes only)."""

  def __repr__(self):
    return "jax.sharding.Infer"


Infer = InferFromArgs()


def _specs(what, tree, specs, none_leaf=False):
  """``specs`` (a prefix of ``tree``) broadcast to its leaves; a ``None`` leaf is ``P()``, or,
  with ``none_leaf``, stays ``None`` (an input passed to ``f`` as it is)."""
  leaf = lambda x: x is None or isinstance(x, PartitionSpec)
  fill = None if none_leaf else PartitionSpec()
  if leaf(specs):
    return [fill if specs is None else specs] * len(tree_util.tree_leaves(tree))
  leaves, sdef = tree_util.tree_flatten(specs, is_leaf=leaf)
  try:
    subs = sdef.flatten_up_to(tree)
  except (ValueError, TypeError) as e:
    errs = tree_util.prefix_errors(specs, tree, is_leaf=leaf)
    if errs:
      raise errs[0](f"shard_map {what}") from None
    raise ValueError(f"shard_map {what} must be a tree prefix of the corresponding value, got "
                     f"{specs} for value tree {tree_util.tree_structure(tree)}. ({e})") from None
  out = []
  for s, sub in zip(leaves, subs):
    if s is not None and not isinstance(s, PartitionSpec):
      raise TypeError(f"shard_map {what} leaves must be PartitionSpecs, got {s!r}")
    out.extend([fill if s is None else s] * len(tree_util.tree_leaves(sub)))
  return out


def _check_specs(prefix, specs, manual_axes):
  """JAX's check that ``specs`` are PartitionSpecs naming only manual axes."""
  paths = tree_util.tree_flatten_with_path(specs, is_leaf=lambda x: x is None)[0]
  bad = [f"  {prefix}_specs{tree_util.keystr(k)} is {x} of type {type(x).__name__}, "
         for k, x in paths if x is not None and not isinstance(x, PartitionSpec)]
  if bad:
    raise TypeError(f"shard_map {prefix}_specs argument must be a pytree of "
                    "`jax.sharding.PartitionSpec` instances, but:\n\n" + "\n\n".join(bad)
                    + f"\n\nCheck the {prefix}_specs values passed to shard_map.")
  msgs = [f"  {prefix}_specs{tree_util.keystr(k)} refers to {n!r}" for k, p in paths
          if p is not None for n in (a for q in p for a in (q if isinstance(q, tuple) else (q,)))
          if n is not None and n is not PartitionSpec.UNCONSTRAINED and n not in manual_axes]
  if msgs:
    raise ValueError(f"shard_map {prefix}_specs argument must refer to an axis marked as "
                     f"manual ({manual_axes}), but:\n\n" + "\n\n".join(msgs) + "\n\n"
                     f"Check the {prefix}_specs values passed to shard_map.")


def _fun_name(f):
  return getattr(f, "__name__", str(f))


def _arg_where(f, args, key):
  """JAX's ``, where args[i] is bound to f's parameter 'p',`` for an input's key path."""
  import inspect
  try:
    sig = inspect.signature(f)
    sig.bind(*args)
  except (TypeError, ValueError):
    return ""
  params = [q for q in sig.parameters.values()
            if q.kind not in (q.KEYWORD_ONLY, q.VAR_KEYWORD)]
  i, name = key[0].idx, _fun_name(f)
  if i >= len(params) or params[i].kind == params[i].VAR_POSITIONAL:
    return (f", where args{tree_util.keystr(key[:1])} is the index {i - len(params) + 1} "
            f"component of {name}'s varargs parameter '{params[-1].name}',")
  return f", where args{tree_util.keystr(key[:1])} is bound to {name}'s parameter '{params[i].name}',"


def _spec_key(specs, key):
  """The key path of the ``specs`` leaf (a prefix of the arguments) covering ``key``."""
  leaf = lambda x: x is None or isinstance(x, PartitionSpec)
  for k, _ in tree_util.tree_flatten_with_path(specs, is_leaf=leaf)[0]:
    if tuple(key[:len(k)]) == tuple(k):
      return k
  return ()


def _rank_error(what, f, fails):
  """JAX's message for specs longer than their values' ranks: ``fails`` holds
  ``(spec_key, spec, where, aval)``."""
  prefix, put = ("in", "input") if what == "in" else ("out", "output")
  msgs = [f"* {prefix}_specs{tree_util.keystr(sk)} is {spec} which has length {len(spec)}, but "
          f"{where} has shape {a.str_short(short_dtypes=False)}, which has rank {a.ndim} (and "
          f"{a.ndim} < {len(spec)})" for sk, spec, where, a in fails]
  if len(msgs) == 1:
    msgs = [msgs[0][2:]]
  name = _fun_name(f)
  msg = (f"shard_map applied to the function '{name}' was given an {prefix}_specs entry which "
         f"is too long to be compatible with the corresponding {put} value from the function:"
         "\n\n" + "\n\n".join(msgs) + "\n\n" + f"Entries in {prefix}_specs must be of length "
         f"no greater than the number of axes in the corresponding {put} value.\n\nEither "
         f"revise the spec to be shorter, or modify '{name}' so that its {put}s have sufficient "
         "rank.")
  if any(not a.ndim for *_, a in fails):
    msg += (f"\n\nFor scalar values (rank 0), consider using an {prefix}_specs entry of `P()`, "
            "where `P = jax.sharding.PartitionSpec`.")
    if what == "out":
      msg += (" In particular, for rank 0 outputs which are not constant over the mesh, add "
              "at least one (singleton) axis to them so that they can be concatenated using "
              "out_specs.")
  return ValueError(msg)


def _check_specs_vs_args(f, mesh, args, specs, in_specs_flat, which):
  """JAX's rank and divisibility errors for the inputs of a shard_map call."""
  paths = [k for k, _ in tree_util.tree_flatten_with_path(args)[0]]
  rows = [(k, s, core.get_aval(x)) for k, s, x, dyn in
          zip(paths, in_specs_flat, tree_util.tree_leaves(args), which) if dyn]
  where = lambda k: f"the passed args{tree_util.keystr(k)}{_arg_where(f, args, k)}"
  fails = [(_spec_key(specs, k), s, where(k), a) for k, s, a in rows if len(s) > a.ndim]
  if fails:
    raise _rank_error("in", f, fails)
  msgs, size = [], mesh.shape
  for k, s, a in rows:
    for d, ns in enumerate(s._normalized(a.ndim)):
      n = int(np.prod([size[x] for x in ns])) if ns else 1
      if ns and a.shape[d] % n:
        axis = f"axes {ns}" if len(ns) > 1 else f"axis '{ns[0]}'"
        total = "total " if len(ns) > 1 else ""
        msgs.append(f"* the passed args{tree_util.keystr(k)} of shape "
                    f"{a.str_short(short_dtypes=False)}{_arg_where(f, args, k)} corresponds to "
                    f"in_specs{tree_util.keystr(_spec_key(specs, k))} of value {s}, which maps "
                    f"array axis {d} (of size {a.shape[d]}) to mesh {axis} (of {total}size {n}), "
                    f"but {n} does not evenly divide {a.shape[d]}")
  if msgs:
    if len(msgs) == 1:
      msgs = [msgs[0][2:]]
    name = _fun_name(f)
    raise ValueError(
        f"shard_map applied to the function '{name}' was given argument arrays with axis "
        "sizes that are not evenly divisible by the corresponding mesh axis sizes:\n\n"
        f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis names "
        f"{mesh.axis_names}.\n\n" + "\n\n".join(msgs) + "\n\nArray arguments' axis sizes "
        "must be evenly divisible by the mesh axis or axes indicated by the corresponding "
        "elements of the argument's in_specs entry. Consider checking that in_specs are "
        f"correct, and if so consider changing the mesh axis sizes or else padding the input "
        f"and adapting '{name}' appropriately.")


def _resolve_mesh(mesh, args):
  """The concrete mesh of a ``shard_map`` call, with JAX's checks: the context mesh when
  ``mesh`` is None; an ``AbstractMesh`` made concrete by the inputs' ``NamedSharding``s."""
  from nbjax.sharding import AbstractMesh
  ctx = _current_mesh()
  if mesh is None:
    if ctx is None or ctx.empty:
      raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to enter "
                       "into a mesh context")
    mesh = ctx
  elif (isinstance(mesh, (Mesh, AbstractMesh)) and ctx is not None and not ctx.empty and
        mesh.abstract_mesh != ctx.abstract_mesh):
    raise ValueError(f"The context mesh {ctx.abstract_mesh} should match the mesh passed to "
                     f"shard_map {mesh}")
  if not isinstance(mesh, (Mesh, AbstractMesh)):
    raise TypeError("shard_map requires a `jax.sharding.Mesh` or a "
                    "`jax.sharding.AbstractMesh` instance for its second argument, but got "
                    f"{mesh} of type {type(mesh)}.")
  if mesh.empty:
    raise ValueError(f"shard_map requires a non-empty mesh. Got {mesh}")
  if isinstance(mesh, AbstractMesh):
    found = None
    for x in tree_util.tree_leaves(args):
      sh = getattr(x, "sharding", None) if type(x) is Array else None
      if isinstance(sh, NamedSharding):
        if sh.mesh.abstract_mesh.shape_tuple != mesh.shape_tuple:
          raise ValueError(f"Mesh shape of the input {sh.mesh.shape_tuple} does not match the "
                           f"mesh shape passed to shard_map {mesh.shape_tuple}")
        found = found or sh.mesh
    if found is None:
      raise ValueError("Please pass `jax.Array`s with a `NamedSharding` as input to "
                       "`shard_map` when passing `AbstractMesh` to the mesh argument.")
    mesh = found
  return mesh


def shard_map(f=None, /, *, out_specs, in_specs=Infer, mesh=None, axis_names=frozenset(),
              check_vma=True):
  """Map ``f`` over the blocks of its inputs on ``mesh`` (default: the context mesh):
  ``in_specs`` (a prefix of the positional arguments, ``PartitionSpec``s; a ``None`` leaf
  passes its input to ``f`` as it is) says how each input is split; ``f`` sees one device's
  block and may call collectives (``psum``, ``all_gather``, ``ppermute``, ``axis_index``...)
  over mesh axis names; ``out_specs`` says how blocks form the outputs (an axis an out_spec
  does not name: the output is replicated over it). ``check_vma`` (default True): check
  statically that each output varies only over the mesh axes its out_spec names (else a
  ``ValueError``, as JAX); False: an unnamed axis's value is read from its first member.
  ``axis_names``: the mesh axes ``f`` is manual over (default: all); the others are left to
  the partitioner (values as if ``f`` ran replicated over them)."""
  if f is None:
    return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                             axis_names=axis_names, check_vma=check_vma)
  return _shard_map(f, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                    axis_names=axis_names, check_vma=check_vma)


def _shard_map(f, *, out_specs, in_specs, mesh, axis_names, check_vma, _smap=False):
  if not callable(f):
    raise TypeError("shard_map requires a callable for its first argument, but got "
                    f"{f} of type {type(f)}.")
  mesh_ = mesh
  cache = {}  # traces per mesh, input structure, block avals and enclosing axes

  def _trace(m, in_tree, avals, ins, which, static, names):
    box = []

    def body(*xs):
      it, st = iter(xs), iter(static)
      args = [next(it) if dyn else next(st) for dyn in which]
      leaves, t = tree_util.tree_flatten(f(*tree_util.tree_unflatten(in_tree, args)))
      box.append(t)
      return leaves

    from nbjax import sharding as sh
    sh._manual_axes.append(names)  # (with_sharding_constraint in the body may not name them)
    try:
      with _env(m):
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(body, avals,
                                                     fun_name=getattr(f, "__name__", "f"))
    finally:
      sh._manual_axes.pop()
    out_tree = box[0]
    outs = _specs("out_specs", out_tree.unflatten([0] * out_tree.num_leaves), out_specs)
    fails = [(_spec_key(out_specs, k), sp, f"{_fun_name(f)}(*args){tree_util.keystr(k)}", a)
             for (k, _), sp, a in zip(tree_util.tree_flatten_with_path(
                 out_tree.unflatten(jaxpr.out_avals))[0], outs, jaxpr.out_avals)
             if len(sp) > a.ndim]
    if fails:
      raise _rank_error("out", f, fails)
    for s in outs:
      NamedSharding(m, s)  # names exist, none twice
    closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    if check_vma:
      _check_vma(f, m, closed.jaxpr, (PartitionSpec(),) * len(consts) + tuple(ins), outs)
    return closed, consts, out_tree, outs

  @functools.wraps(f)
  def wrapped(*args):
    m = _resolve_mesh(mesh_, args)
    if not isinstance(axis_names, (frozenset, set)):
      raise TypeError("`axis_names` argument of shard_map should be of type `frozenset` or "
                      f"`set`. Got type: {type(axis_names)}")
    names = frozenset(axis_names) or frozenset(m.axis_names)
    if not names <= frozenset(m.axis_names):
      raise ValueError(f"jax.shard_map requires axis_names={names} to be a subset of "
                       f"mesh.axis_names={frozenset(m.axis_names)}")
    specs = in_specs
    if specs is Infer:
      from nbjax.sharding import AxisType
      types = dict(zip(m.axis_names, m.axis_types))
      shs = [getattr(x, "sharding", None) if type(x) is Array else None
             for x in tree_util.tree_leaves(args)]
      if not all(types[a] == AxisType.Explicit for a in names) or not all(
          isinstance(s, NamedSharding) and s.mesh == m for s in shs):
        kinds = ", ".join(str(types[a]) for a in names)
        raise TypeError(f"in_axes was not specified when axis_name={names} was of type {kinds}"
                        if _smap else "shard_map in_specs argument must be a pytree of "
                        "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                        f"axis_names={names} are of type {kinds}")
      specs = tuple(tree_util.tree_unflatten(tree_util.tree_structure(args),
                                             [s.spec for s in shs]))
    elif specs is not None:
      _check_specs("in", specs, names)
    _check_specs("out", out_specs, names)
    flat, in_tree = tree_util.tree_flatten(args)
    all_ins = _specs("in_specs", args, specs, none_leaf=True)
    which = tuple(s is not None for s in all_ins)
    static = [x for x, dyn in zip(flat, which) if not dyn]
    dyn = [x for x, d in zip(flat, which) if d]
    ins = [s for s in all_ins if s is not None]
    _check_specs_vs_args(f, m, args, specs, all_ins, which)
    avals = []
    for i, (x, s) in enumerate(zip(dyn, ins)):
      a = core.get_aval(x)
      sh = NamedSharding(m, s)
      sh.check(a.shape, f"shard_map in_specs (argument {i})")
      avals.append(a.update(shape=sh.shard_shape(a.shape)))
    key = (m, in_tree, which, tuple((a.shape, a.dtype, a.weak_type) for a in avals),
           core._axis_env.env, names)
    hit = None
    if not static:
      hit = cache.get(key)
    if hit is None:
      hit = _trace(m, in_tree, avals, ins, which, static, names)
      if not static and not any(isinstance(c, core.Tracer) for c in hit[1]):
        cache[key] = hit  # (closed-over tracers, static arguments: not kept)
    closed, consts, out_tree, outs = hit
    res = shard_map_p.bind(*consts, *dyn, jaxpr=closed, mesh=m,
                           in_specs=(PartitionSpec(),) * len(consts) + tuple(ins),
                           out_specs=tuple(outs), name=getattr(f, "__name__", "f"),
                           check_vma=check_vma)
    return tree_util.tree_unflatten(out_tree, res)

  return wrapped


def _axes_to_pspec(axis_name, axis):
  return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)


def smap(f=None, /, *, in_axes=Infer, out_axes, axis_name):
  """Single-axis ``shard_map``: ``f`` manual over the context mesh's axis ``axis_name``, each
  input split along its ``in_axes`` entry (an int, or None: not split) and each output
  joined along its ``out_axes`` entry, as ``vmap``'s axes say."""
  if f is None:
    return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
  if isinstance(axis_name, (list, tuple)):
    raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
  if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
    raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of "
                    "entries corresponding to the positional arguments passed to the "
                    f"function, but got {in_axes}.")
  if in_axes is not Infer and not all(isinstance(a, int)
                                      for a in tree_util.tree_leaves(in_axes)):
    raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) "
                    f"container with those types as leaves, but got {in_axes}.")
  if not all(isinstance(a, int) for a in tree_util.tree_leaves(out_axes)):
    raise TypeError("smap out_axes must be an int, None, or (nested) container with those "
                    f"types as leaves, but got {out_axes}.")
  to_spec = functools.partial(_axes_to_pspec, axis_name)
  in_specs = (Infer if in_axes is Infer else
              tree_util.tree_map(to_spec, in_axes, is_leaf=lambda x: x is None))
  out_specs = tree_util.tree_map(to_spec, out_axes, is_leaf=lambda x: x is None)
  return _shard_map(f, mesh=None, in_specs=in_specs, out_specs=out_specs,
                    axis_names={axis_name}, check_vma=True, _smap=True)
