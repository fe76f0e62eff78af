"""``pmap``: the map primitive ``xla_pmap_p`` and its replicated XLA execution.

Pipeline position: ``pmap(f)(*args)`` traces ``f`` once per signature on the per-device
avals (the mapped axis removed) under ``core.extend_axis_env(axis_name, n)``, so collectives
(``nbjax/lax/parallel.py``) see their axis, and binds ``xla_pmap_p`` with that jaxpr
(``call_jaxpr``; its consts become leading unmapped inputs, as seed 001 prints it). The impl
lowers the per-device jaxpr (``interpreters/mlir.py``, with an ``AxisContext`` mapping the
axis to replica ids) and compiles it with ``num_replicas = n`` over the chosen devices
(``xla.Replicated``): mapped inputs are split one row per device, unmapped ones replicated,
and the per-device outputs, XLA buffers, are gathered on the host along ``out_axes`` into an
``Array`` that keeps them as its ``addressable_shards`` (a ``NamedSharding`` over a one-axis
mesh of the devices, as JAX 0.10.2's: ``out_shardings``). The primitive's
jvp / partial-eval / transpose / batching rules follow ``jit_p``'s (``pjit.py``), mapping
``in_axes``/``out_axes`` as JAX's ``MapPrimitive`` does (an unmapped output's cotangent
counts once, as JAX 0.10.2). Inside another pmap's body or a jit, a pmap (or shard_map) lowers
inline in that replicated program (``lower_inline``, ``ReplicatedJit``): nested pmaps run on
the product of their sizes, a jit holding maps is one XLA program.

jaxlib is imported only when something is compiled.
"""
from __future__ import annotations

import contextlib
import weakref

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.array import Array, _wrap
from nbjax.core import Primitive
from nbjax.interpreters import ad, batching
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters import pjit
from nbjax.jaxpr import ClosedJaxpr

__all__ = ["pmap", "xla_pmap_p", "AxisContext", "stats"]

_stats = {"traces": 0, "compiles": 0}


def stats():
  """Counts since start: ``traces`` (pmap wrappers staging ``f``), ``compiles``."""
  return dict(_stats)


class AxisContext:
  """Named axes -> replicas of the module being lowered (JAX's ``ReplicaAxisContext``):
  ``names``/``sizes`` outermost first, ``nreps`` replicas in all."""
  __slots__ = ("names", "sizes", "nreps")

  def __init__(self, names, sizes, nreps):
    self.names, self.sizes, self.nreps = tuple(names), tuple(sizes), nreps

  def groups(self, axes):
    """Replica groups of a collective over ``axes`` (JAX's ``axis_groups``)."""
    for a in axes:
      if a not in self.names:
        raise NameError(f"unbound axis name: {a}")
    spec = self.sizes + (self.nreps // int(np.prod(self.sizes)),)
    idx = [self.names.index(a) for a in axes]
    iota = np.arange(int(np.prod(spec))).reshape(spec)
    g = np.moveaxis(iota, idx, np.arange(len(idx))).reshape(int(np.prod([spec[i] for i in idx])),
                                                            -1)
    return np.ascontiguousarray(g.T, dtype=np.int64)


def _unmap(aval, size, axis):
  if axis is None:
    return aval
  s = aval.shape
  return aval.update(shape=s[:axis] + (size,) + s[axis:])


def _map(aval, axis):
  if axis is None:
    return aval
  s = aval.shape
  return aval.update(shape=s[:axis] + s[axis + 1:])


# ----------------------------------------------------------------------- the primitive

xla_pmap_p = Primitive("xla_pmap")
xla_pmap_p.multiple_results = True
xla_pmap_p.map_primitive = True


def _pmap_abstract_eval(*avals, call_jaxpr, axis_size, in_axes, out_axes, name, **_):
  for a, ax, w in zip(avals, in_axes, call_jaxpr.in_avals):
    m = _map(a, ax)
    if m.shape != w.shape or m.dtype != w.dtype or (ax is not None and a.shape[ax] != axis_size):
      raise TypeError(f"xla_pmap[name={name}] got an argument {a.str_short()} mapped on axis "
                      f"{ax}, but its jaxpr takes {w.str_short()} over {axis_size} devices")
  return [_unmap(a, axis_size, ax) for a, ax in zip(call_jaxpr.out_avals, out_axes)]


_compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _pick_devices(n, devices):
  from nbjax import xla
  if devices is not None:
    if len(devices) != n:
      raise ValueError("Leading axis size of input to pmapped function must equal the number "
                       "of local devices passed to pmap. Got axis_size="
                       f"{n}, num_local_devices={len(devices)}.")
    return list(devices)
  avail = xla.local_devices()
  if n > len(avail):
    raise ValueError(f"compiling computation that requires {n} logical devices, but only "
                     f"{len(avail)} XLA devices are available (num_replicas={n})")
  return avail[:n]


class _PmapExecutable:
  """The per-device jaxpr compiled for ``n`` replicas: ``run(args) -> list of Arrays``."""

  def __init__(self, closed, axis_name, n, devices, in_axes, out_axes, name):
    from nbjax import xla
    self.inner = inner = replicas(closed.jaxpr)  # nested maps: each row on `inner` replicas
    if inner < 0 or inner > 1 and devices is not None:
      raise ValueError("Nested pmap with explicit devices argument.")
    self.devs = _pick_devices(n * inner, devices)
    if len(self.devs) > 1:  # JAX's: no order across devices' programs
      from nbjax.jaxpr import jaxpr_effects
      ordered = [e for e in jaxpr_effects(closed) if getattr(e, "ordered", False)]
      if ordered:
        raise ValueError("The following ordered effects are not supported for more than 1 "
                         f"device: {ordered}")
    self.n, self.in_axes, self.out_axes, self.name = n, in_axes, out_axes, name
    self.in_avals, self.out_avals = in_avals, _ = closed.in_avals, closed.out_avals
    cbs = []  # debug callbacks (jax.debug.print, breakpoint): each replica runs them
    module = _lower(closed, axis_name, n, in_axes, out_axes, name, host_callbacks=cbs)
    self.rep = xla.Replicated(module, self.devs, [(a.shape, a.dtype, ax is not None)
                                                 for a, ax in zip(in_avals, in_axes)],
                              name=f"pmap_{name}", host_callbacks=cbs)
    _stats["compiles"] += 1
    self.shardings = out_shardings(self.devs, axis_name, out_axes, n, inner)
    self._to_numpy = xla._to_numpy

  def run(self, args):
    host = []
    for x, ax in zip(args, self.in_axes):
      v = x._value if type(x) is Array else np.asarray(x)
      if v.dtype == dtypes.float0:  # float0 travels as bool, as JAX lowers it
        v = np.zeros(v.shape, np.bool_)
      v = v if not ax else np.moveaxis(v, ax, 0)
      host.append(v if ax is None or self.inner == 1 else np.repeat(v, self.inner, 0))
    res = self.rep.run(host)
    if self.inner > 1:
      res = [bufs[::self.inner] for bufs in res]
    outs, to_np = [], self._to_numpy
    for bufs, ax, aval, sh in zip(res, self.out_axes, self.out_avals, self.shardings):
      if aval.dtype == dtypes.float0:  # (a NumPy float0 array, as JAX's)
        outs.append(np.zeros(_unmap(aval, self.n, ax).shape, dtypes.float0))
        continue
      if ax is None:
        v = to_np(bufs[0])
      else:
        v = np.concatenate([to_np(b) for b in bufs], 0)
        if ax:
          v = np.ascontiguousarray(np.moveaxis(v, 0, ax))
      o = _wrap(v, aval.weak_type)
      o._pmap = (sh, bufs, None)
      outs.append(o)
    return outs


  def runner(self, n_consts, consts, out_tree, miss):
    """pmap's monomorphic fast path: ``run(flat_args)`` -> the tree of outputs, or ``miss``
    unless every argument has the traced shape and dtype (``config.trace_key`` unchanged)
    and is a NumPy array or Array (put, one row per device) or a pmap output over this
    executable's devices mapped on axis 0, whose per-device buffers are passed as they are
    (no host round trip); outputs come back as jaxlib global
    arrays (``Array._pmap = (PmapSharding, None, global)``) whose host value is gathered
    when first read. None where the signature needs the general path (an unmapped or
    non-leading mapped argument, an output on another axis)."""
    from nbjax import dtypes, xla
    from nbjax.config import config
    from nbjax.sharding import PmapSharding
    args_axes = self.in_axes[n_consts:]
    if any(ax != 0 for ax in args_axes) or any(ax not in (0, None) for ax in self.out_axes) \
        or any(a.dtype == dtypes.float0 for a in self.out_avals) or self.inner > 1 \
        or xla._dist is not None:  # (nested maps: rows repeated; several processes)
      return None
    rt, xc, rep, n = xla._runtime(), xla.ensure_jaxlib().xc, self.rep, self.n
    dl = xc.DeviceList(tuple(self.devs))
    cg = []
    for c, (av, sh, dt, mapped) in zip(consts, rep._ins):  # closed-over values: put once
      v = np.asarray(c._value if type(c) is Array else c, dtype=dt, order="C")
      cg.append(rt.bdp(av, sh, [v] * n, self.devs, True, False, rt.copy, True))
    env = {"_Array": Array, "_new": object.__new__, "_MISS": miss, "_config": config,
           "_tkey": config.trace_key, "_len": len, "_PS": PmapSharding, "_rows": _rows,
           "_devs": tuple(self.devs),
           "_Impl": rt.impl_type, "_xe": rep._exe, "_lock": xla._replicated_lock}
    env["_hs"] = [rt.handler(rt.aval(((n,) if ax == 0 else ()) + tuple(a.shape), np.dtype(a.dtype)),
                             rt.gspmd(dl, xc.HloSharding.iota_tile([n] + [1] * a.ndim))
                             if ax == 0 else rt.gspmd(dl, xc.HloSharding.replicate()), True, True)
                  for a, ax in zip(self.out_avals, self.out_axes)]
    k = len(args_axes)
    names = [f"x{i}" for i in range(k)]
    src = ["def run(args):",
           f"  if _config.trace_key is not _tkey or _len(args) != {k}: return _MISS"]
    if k:
      src.append(f"  {', '.join(names)}, = args")
    env.update(_ndarray=np.ndarray, _bdp=rt.bdp, _sem=rt.copy, _dl=list(self.devs))
    for i, (x, (av, sh, dt, mapped)) in enumerate(zip(names, rep._ins[n_consts:])):
      w = self.in_avals[n_consts + i].weak_type
      env[f"_a{i}"], env[f"_sh{i}"], env[f"_w{i}"], env[f"_dt{i}"] = av, sh, w, dt
      pieces = ", ".join(f"v[{k}:{k + 1}]" for k in range(n))  # distinct memory per device
      src += [f"  t = type({x})",
              f"  if t is _Array:",
              f"    if {x}._weak is not _w{i}: return _MISS",
              f"    p = {x}._pmap",
              f"    v = {x}._value if p is None else None",
              f"  elif t is _ndarray{' and False' if w else ''}: p, v = None, {x}",
              f"  else: return _MISS",
              f"  if v is not None:",
              f"    if v.dtype is not _dt{i} or v.shape != _a{i}.shape: return _MISS",
              f"    {x} = _bdp(_a{i}, _sh{i}, [{pieces}], _dl, True, False, _sem, True)",
              f"  else:",
              f"    q = p[0]",
              f"    if not (type(q) is _PS and q.sharded_dim == 0 or _rows(q)) "
              f"or q._device_assignment != _devs: return _MISS",
              f"    g = p[2] if _len(p) > 2 else None",
              f"    if g is None:",
              f"      g = _Impl(_a{i}, _sh{i}, p[1], True, True)",
              f"      if g.aval is not _a{i}: return _MISS",
              f"      {x}._pmap = (q, p[1], g)",
              f"    elif g.aval is not _a{i}: return _MISS",
              f"    {x} = g"]
    for j, g in enumerate(cg):
      env[f"_c{j}"] = g
    ins = [f"_c{j}" for j in range(len(cg))] + names
    src += ["  with _lock:",
            f"    res = _xe.execute_sharded([{', '.join(ins)}], with_tokens=True)",
            "    res.consume_token().block_until_ready()",
            "  o = res.consume_with_handlers(_hs)"]
    return pjit.finish_sharded_run(src, env, self.shardings, self.out_avals, out_tree,
                                   f"<nbjax.pmap {self.name} (fast path)>")


def out_shardings(devs, axis_name, out_axes, n, inner=1):
  """pmap's outputs' shardings, as JAX 0.10.2's: ``NamedSharding`` over a one-axis mesh of
  the devices, named ``axis_name`` (``_internal_pmap_axis_name`` without one), mapped on the
  output axis (``P()`` for an unmapped output); nested maps: ``PmapSharding``."""
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec, PmapSharding
  if inner > 1:
    return [PmapSharding(devs, ax, n) for ax in out_axes]
  name = "_internal_pmap_axis_name" if axis_name is None else axis_name
  mesh = Mesh(np.array(devs, dtype=object), (name,))
  return [NamedSharding(mesh, PartitionSpec() if ax is None else
                        PartitionSpec(*(None,) * ax, name)) for ax in out_axes]


def _rows(q):
  """Whether sharding ``q`` puts row ``i`` of the leading axis on device ``i`` (one-axis
  mesh, mapped on axis 0 alone): its buffers are a pmap's mapped input as they are."""
  if not q._spmd or type(q).__name__ != "NamedSharding":
    return False
  names, spec = q.mesh.axis_names, tuple(q.spec)
  return len(names) == 1 and spec[:1] == names and not any(spec[1:])


def runner(call_jaxpr, consts, out_tree, miss, *, axis_name, axis_size, devices, in_axes,
           out_axes, **_):
  """The compiled pmap's fast path (``_PmapExecutable.runner``) for a signature ``bind``
  has just run, or None."""
  exe = _compiled.get(call_jaxpr, {}).get((axis_name, axis_size, devices, in_axes, out_axes))
  if exe is None:
    return None
  runs = exe.__dict__.setdefault("_runners", {})
  if out_tree not in runs:
    runs[out_tree] = exe.runner(len(consts), consts, out_tree, miss)
  return runs[out_tree]


def _lower(closed, axis_name, n, in_axes, out_axes, name, axes=None, host_callbacks=None):
  """A module whose ``main`` takes ``(1, *shape)`` for a mapped input and returns ``(1,
  *shape)`` for a mapped output (one row of the global value per replica). ``axes``:
  ``((name, size), ...)`` for several named axes over the replicas (shard_map's mesh). Maps
  nested in the body multiply the replicas: ``n * replicas(body)`` in all. The Python
  callables of its callbacks are appended to ``host_callbacks`` (each replica calls them;
  None: a module with callbacks is an error)."""
  axes = ((axis_name, n),) if axes is None else axes
  from nbjax import xla
  from nbjax.interpreters import mlir
  ir, hlo, func = mlir.ir, mlir.hlo, mlir.func_dialect
  in_avals, out_avals = closed.in_avals, closed.out_avals
  row = lambda a, ax: a if ax is None else a.update(shape=(1, *a.shape))
  with xla.mlir_context(), ir.Location.unknown():
    m = mlir._new_module(f"pmap_{name}")
    mctx = mlir.ModuleContext(m)
    mctx.axis_context = AxisContext([a for a, _ in axes], [k for _, k in axes],
                                    n * max(replicas(closed.jaxpr), 1))
    mctx._names.add("main")
    ft = ir.FunctionType.get(mlir.aval_to_ir_types([row(a, ax) for a, ax in zip(in_avals, in_axes)]),
                             mlir.aval_to_ir_types([row(a, ax) for a, ax in zip(out_avals, out_axes)]))
    f = func.FuncOp("main", ft)
    m.body.append(f)
    entry = f.add_entry_block()
    with ir.InsertionPoint(entry):
      args = [x if ax is None else hlo.reshape(mlir.aval_to_ir_type(a), x)
              for x, a, ax in zip(entry.arguments, in_avals, in_axes)]
      consts = mlir._const_values(closed.consts, mlir._consts_avals(closed))
      with contextlib.ExitStack() as st:
        for a, k in axes:
          st.enter_context(core.extend_axis_env(a, k))
        outs = mlir.jaxpr_subcomp(mctx, closed.jaxpr, consts, args)
      outs = [o if ax is None else hlo.reshape(mlir.aval_to_ir_type(row(a, ax)), o)
              for o, a, ax in zip(outs, out_avals, out_axes)]
      func.ReturnOp(outs)
  if mctx.host_callbacks:
    if host_callbacks is None:
      raise NotImplementedError("nbjax's pmap does not run host callbacks (they would run "
                                "once per device, each able to stall the others' collectives)")
    host_callbacks.extend(mctx.host_callbacks)
  return m


def _pmap_impl(*args, call_jaxpr, axis_name, axis_size, devices, in_axes, out_axes, name,
               **_):
  from nbjax.interpreters import lowering
  with core.extend_axis_env(axis_name, axis_size):  # (the body's collectives see their axis)
    outs = lowering.on_key_data(  # key arrays: the map runs on their data
        call_jaxpr, args, lambda cj, xs: _pmap_impl(
            *xs, call_jaxpr=cj, axis_name=axis_name, axis_size=axis_size, devices=devices,
            in_axes=in_axes, out_axes=out_axes, name=name))
  if outs is not None:
    return outs
  per = _compiled.get(call_jaxpr)
  if per is None:
    per = _compiled[call_jaxpr] = {}
  key = (axis_name, axis_size, devices, in_axes, out_axes)
  exe = per.get(key)
  if exe is None:
    exe = per[key] = _PmapExecutable(call_jaxpr, axis_name, axis_size, devices, in_axes,
                                     out_axes, name)
  return exe.run(args)


# ------------------------------------------- maps inside a replicated program (nested, jit)
# A pmap or shard_map inside a module that is already replicated (a pmap's body, or a jit
# holding maps, compiled as one replicated program by ``ReplicatedJit``) lowers inline: its
# axes are appended to the module's ``AxisContext`` (innermost), each replica takes its
# slice of the map's global inputs by its axis index, runs the body, and gathers the
# outputs back to global values with ``all_gather``. The map's results are thus global
# values held by every replica, as in the enclosing program.

_inline_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _placed(devices, n):
  """Whether a pmap's ``devices`` place it other than the default (the first ``n`` local
  devices in order, as a map inlined in a replicated program runs)."""
  from nbjax import xla
  return devices is not None and list(devices) != xla.local_devices()[:n]


def replicas(jaxpr):
  """Replicas the maps in ``jaxpr`` need (the largest product of nested map sizes); -1 when
  one is a pmap given ``devices`` other than the default (that runs as its own program)."""
  best = 1
  for e in jaxpr.eqns:
    if e.primitive is xla_pmap_p and _placed(e.params["devices"], e.params["axis_size"]):
      return -1
    own = e.params["axis_size"] if e.primitive is xla_pmap_p else \
        e.params["mesh"].size if e.primitive.name == "shard_map" else 1
    for v in e.params.values():
      for j in (v if type(v) is tuple else (v,)):
        j = j.jaxpr if isinstance(j, ClosedJaxpr) else j
        if hasattr(j, "eqns"):
          r = replicas(j)
          if r < 0:
            return -1
          best = max(best, own * r)
    best = max(best, own)
  return best


def _inline(key, closed, axes, avals, slice_in, gather_out):
  """A closed jaxpr of the map on one replica (cached per map jaxpr and ``key``)."""
  per = _inline_cache.setdefault(closed, {})
  hit = per.get(key)
  if hit is not None:
    return hit

  def fun(*args):
    ins = [slice_in(i, x) for i, x in enumerate(args)]
    from nbjax.jaxpr import eval_jaxpr
    outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
    return [gather_out(i, o) for i, o in enumerate(outs)]

  with contextlib.ExitStack() as st:
    for a, k in axes:
      st.enter_context(core.extend_axis_env(a, k))
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, avals, fun_name="inline")
  res = per[key] = ClosedJaxpr(jaxpr, consts)
  return res


def lower_inline(ctx, args, inner, axes, what):
  """Emit ``inner`` (from ``_inline``) with ``axes`` appended to the module's replicas."""
  from nbjax.interpreters import mlir
  mctx = ctx.module_context
  ac = mctx.axis_context
  if ac is None:
    raise NotImplementedError(f"{what} lowers only inside a replicated program (a pmap, or "
                              "a jit that holds maps)")
  names = [a for a, _ in axes]
  if any(a in ac.names for a in names):
    raise ValueError(f"{what}: axis names {names} are already bound by an enclosing map "
                     f"({ac.names})")
  sizes = ac.sizes + tuple(k for _, k in axes)
  if ac.nreps % int(np.prod(sizes)):
    raise ValueError(f"{what} over {dict(axes)} inside {ac.nreps} replicas "
                     f"({dict(zip(ac.names, ac.sizes))}): the sizes do not divide")
  mctx.axis_context = AxisContext(ac.names + tuple(names), sizes, ac.nreps)
  try:
    with contextlib.ExitStack() as st:
      for a, k in axes:
        st.enter_context(core.extend_axis_env(a, k))
      consts = mlir._const_values(inner.consts, mlir._consts_avals(inner))
      return mlir.jaxpr_subcomp(mctx, inner.jaxpr, consts, list(args))
  finally:
    mctx.axis_context = ac


class _Unnamed:
  """The axis of a pmap given no ``axis_name``, while it lowers inline (one per lowering:
  nested unnamed maps do not clash)."""
  __slots__ = ("name",)

  def __init__(self, name):
    self.name = name

  def __repr__(self):
    return f"<unnamed axis of pmap {self.name}>"


def _pmap_lowering(ctx, *args, call_jaxpr, axis_name, axis_size, devices, in_axes, out_axes,
                   name, **_):
  ac = ctx.module_context.axis_context
  if _placed(devices, axis_size) or (devices is not None and ac is not None and ac.names):
    raise ValueError("Nested pmap with explicit devices argument.")
  lax = batching._lax
  if axis_name is None:  # (an unnamed map: its body binds no collective; a private name)
    axis_name = _Unnamed(name)

  def slice_in(i, x):
    ax = in_axes[i]
    return x if ax is None else lax.dynamic_index_in_dim(x, lax.axis_index(axis_name), ax,
                                                         keepdims=False)

  def gather_out(i, o):
    ax = out_axes[i]
    return o if ax is None else lax.all_gather(o, axis_name, axis=ax)

  inner = _inline((axis_name, axis_size, in_axes, out_axes), call_jaxpr,
                  ((axis_name, axis_size),), ctx.avals_in, slice_in, gather_out)
  return lower_inline(ctx, args, inner, ((axis_name, axis_size),), f"pmap ({name})")


def replicated_module(closed, name):
  """``(module, num_replicas)``: ``closed`` (a jaxpr holding maps) as one replicated
  program, every input and output whole on each replica (``ReplicatedJit``)."""
  n = replicas(closed.jaxpr)
  if n < 0:
    raise NotImplementedError("a pmap with explicit devices runs as its own program")
  return _lower(closed, None, 1, (None,) * len(closed.in_avals),
                (None,) * len(closed.out_avals), name, axes=()), n


class ReplicatedJit:
  """A jit whose jaxpr holds maps (pmap, shard_map), compiled as ONE replicated XLA program
  (``num_replicas`` = what its maps need): every replica computes the unmapped parts on the
  same values (they are replicated), each map lowers inline (``lower_inline``) and leaves
  its outputs gathered, so every replica ends with the same results; replica 0's are
  returned (an output a top-level shard_map returns placed as its out_spec says, as JAX's). Why replicas: the maps' collectives already lower to replica groups (pmap's
  route, jaxlib's PJRT CPU client runs it), with no SPMD partitioner or manual-sharding
  custom calls involved. Built by ``pjit`` for such a jaxpr; a jaxpr that cannot be one
  program (host callbacks, a pmap given ``devices``) runs equation by equation instead
  (``pjit._Interpreted``)."""

  def __init__(self, closed, name, compiler_options=None):
    from nbjax import xla
    module, n = replicated_module(closed, name)
    self.devs, self.text = _pick_devices(n, None), str(module)
    self.rep = xla.Replicated(self.text, self.devs, [(a.shape, a.dtype, False)
                                                 for a in closed.in_avals],
                              name=f"jit_{name}", compiler_options=compiler_options)
    _stats["compiles"] += 1
    self.out_avals, self._to_numpy = closed.out_avals, xla._to_numpy
    self.places = _shard_map_out_shardings(closed.jaxpr)

  def run(self, args):
    host = [x._value if type(x) is Array else np.asarray(x) for x in args]
    res = self.rep.run(host)
    outs = [_wrap(self._to_numpy(bufs[0]), a.weak_type) for bufs, a in zip(res, self.out_avals)]
    if self.places:  # a shard_map's outputs: laid out as its out_specs say, as JAX's
      from nbjax.interpreters import spmd
      for i, s in self.places:
        outs[i] = spmd.put(outs[i], s)
    return outs


def _shard_map_out_shardings(jaxpr):
  """``(i, NamedSharding(mesh, out_spec))`` for each output of ``jaxpr`` that a top-level
  ``shard_map`` (over a mesh of this process) returns."""
  from nbjax.sharding import NamedSharding
  made = {}
  for e in jaxpr.eqns:
    if e.primitive.name == "shard_map" and not e.params["mesh"].is_multi_process:
      for v, spec in zip(e.outvars, e.params["out_specs"]):
        made[v] = NamedSharding(e.params["mesh"], spec)
  return [(i, made[v]) for i, v in enumerate(jaxpr.outvars) if v in made]


# ----------------------------------------------------------------------- transformation rules


def _env(params):
  return core.extend_axis_env(params["axis_name"], params["axis_size"])


def _pmap_jvp(primals, tangents, **params):
  closed, name = params["call_jaxpr"], params["name"]
  nonzeros = tuple(pjit._nonzero(t) for t in tangents)
  with _env(params):
    new, out_nz = pjit.jvp_jaxpr(closed, nonzeros, name)
  in_axes, out_axes = params["in_axes"], params["out_axes"]
  p = dict(params, call_jaxpr=new,
           in_axes=in_axes + tuple(a for a, nz in zip(in_axes, nonzeros) if nz),
           out_axes=out_axes + tuple(a for a, nz in zip(out_axes, out_nz) if nz),
           donated_invars=(False,) * (len(in_axes) + sum(nonzeros)))
  outs = xla_pmap_p.bind(*primals, *[t for t, nz in zip(tangents, nonzeros) if nz], **p)
  k = len(closed.out_avals)
  tans = iter(outs[k:])
  n = params["axis_size"]
  return outs[:k], [next(tans) if nz else ad.Zero(_unmap(a, n, ax).to_tangent_aval())
                    for a, ax, nz in zip(closed.out_avals, out_axes, out_nz)]


def _pmap_partial_eval(in_unknowns, **params):
  # (kept per jaxpr, as jit's: a repeated vjp finds the known and unknown maps compiled)
  per = _pe_memo.setdefault(params["call_jaxpr"], {})
  key = (tuple(in_unknowns), params["axis_name"], params["axis_size"])
  got = per.get(key)
  if got is None:
    with _env(params):
      got = pe.partial_eval_jaxpr(params["call_jaxpr"], in_unknowns)
    if got[0] is not params["call_jaxpr"] is not got[1]:  # (else a value holds its key)
      per[key] = got
  known, unknown, out_unk, num_res = got
  ia, oa, don = params["in_axes"], params["out_axes"], params["donated_invars"]
  kp = dict(params, call_jaxpr=known,
            in_axes=tuple(a for a, u in zip(ia, in_unknowns) if not u),
            out_axes=tuple(a for a, u in zip(oa, out_unk) if not u) + (0,) * num_res,
            donated_invars=tuple(d for d, u in zip(don, in_unknowns) if not u))
  up = dict(params, call_jaxpr=unknown,
            in_axes=(0,) * num_res + tuple(a for a, u in zip(ia, in_unknowns) if u),
            out_axes=tuple(a for a, u in zip(oa, out_unk) if u),
            donated_invars=(False,) * (num_res + sum(map(bool, in_unknowns))))
  return kp, up, out_unk, num_res


_pe_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_transpose_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _pmap_transpose(cts, *args, **params):
  closed, name, n = params["call_jaxpr"], params["name"], params["axis_size"]
  in_axes, out_axes = params["in_axes"], params["out_axes"]
  undef = [ad.is_undefined_primal(x) for x in args]
  res = [x for x, u in zip(args, undef) if not u]
  res_axes = tuple(a for a, u in zip(in_axes, undef) if not u)
  cts = [ad.instantiate_zeros(c) for c in cts]
  per_in = closed.in_avals

  def fun(*ins):
    r, c = iter(ins[:len(res)]), list(ins[len(res):])
    lax = batching._lax  # an unmapped output is one value: each member gets ct / n (as
    c = [x if a is not None or x.dtype == dtypes.float0 else  # shard_map's P() outputs)
         lax.div(x, lax.full_like(x, n)) for x, a in zip(c, out_axes)]
    full = [ad.UndefinedPrimal(a) if u else next(r) for a, u in zip(per_in, undef)]
    outs = ad.backward_pass(closed.jaxpr, closed.consts, full, c)
    return [ad.instantiate_zeros(o) for o, u in zip(outs, undef) if u]

  avals = ([a for a, u in zip(per_in, undef) if not u] + list(closed.out_avals))
  per = _transpose_memo.setdefault(closed, {})  # (as jit's: found compiled the next time)
  key = (tuple(undef), out_axes, params["axis_name"], n)
  got = per.get(key)
  if got is None:
    with _env(params):
      tj, _, consts = pe.trace_to_jaxpr_dynamic(fun, avals, fun_name=f"transpose({name})")
    got = ClosedJaxpr(pe.convert_constvars_jaxpr(tj), []), consts
    if not any(isinstance(c, core.Tracer) for c in consts):
      per[key] = got
  tj, consts = got
  t_out_axes = tuple(0 if a is None else a for a, u in zip(in_axes, undef) if u)
  p = dict(params, call_jaxpr=tj,
           name=f"transpose({name})",
           in_axes=(None,) * len(consts) + res_axes + out_axes, out_axes=t_out_axes,
           donated_invars=(False,) * (len(consts) + len(res) + len(cts)))
  outs = iter(xla_pmap_p.bind(*consts, *res, *cts, **p))
  lax = batching._lax
  result = []
  for a, u in zip(in_axes, undef):
    if not u:
      result.append(None)
      continue
    o = next(outs)
    result.append(lax.reduce_sum(o, (0,)) if a is None else o)  # fan-out's dual: fan-in sum
  return result


def _pmap_batch(axis_data, vals, dims, **params):
  closed, name = params["call_jaxpr"], params["name"]
  in_axes, out_axes = params["in_axes"], params["out_axes"]
  new_vals, new_in, inner = [], [], []
  for x, d, a in zip(vals, dims, in_axes):
    if d is batching.not_mapped:
      new_vals.append(x), new_in.append(a), inner.append(None)
    else:  # the batch axis first: inside, the per-device value is batched on axis 0
      new_vals.append(batching.moveaxis(x, d, 0))
      new_in.append(None if a is None else a + 1)
      inner.append(0)
  with _env(params):
    new, odims = pjit.batch_jaxpr(closed, axis_data.size, tuple(inner), axis_data.name, name)
  new_out, bdims = [], []
  for d, o in zip(odims, out_axes):
    if d is None or o is None:
      new_out.append(o), bdims.append(batching.not_mapped if d is None else d)
    elif d < o:  # the device axis lands after the batch axis
      new_out.append(o + 1), bdims.append(d)
    else:
      new_out.append(o), bdims.append(d + 1)
  p = dict(params, call_jaxpr=new, in_axes=tuple(new_in), out_axes=tuple(new_out))
  return xla_pmap_p.bind(*new_vals, **p), bdims


_pmap_batch.wants_axis_data = True

xla_pmap_p.make_eager = lambda prim, f_small, f_large, thr: _pmap_impl
registry.register(
    xla_pmap_p, family="call", impls={"python": _pmap_impl}, abstract_eval=_pmap_abstract_eval,
    jvp=_pmap_jvp, batch=_pmap_batch, transpose=_pmap_transpose,
    meta=dict(differentiable=True,
              note="map primitive: its per-device jaxpr runs as one replicated XLA program",
              lowering_note="runs as its own replicated XLA program (num_replicas); inside "
                            "jit or another pmap, inline in that replicated program"))
xla_pmap_p.partial_eval = _pmap_partial_eval
xla_pmap_p.lowerings["cpu"] = _pmap_lowering
