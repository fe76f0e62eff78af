"""Sharded execution: ``device_put`` onto a ``NamedSharding``, ``jit`` with shardings (one
SPMD program partitioned by XLA), and ``with_sharding_constraint``.

Pipeline position: after staging. ``put`` splits a host value by
``sharding.devices_indices_map`` and places the pieces with jaxlib's ``batched_device_put``
over the GSPMD shim (``xla._runtime().gspmd``); the ``Array`` keeps the gathered host value
and ``_pmap = (sharding, per-device buffers, the jaxlib global array)``. A jitted function
whose ``in_shardings``/``out_shardings`` are given, or whose inputs are sharded Arrays, is
lowered once on the *global* avals by ``interpreters/mlir.py`` with Shardy annotations
(``sdy.mesh`` symbols, ``sdy.sharding`` on ``main``'s arguments and results, see
``_Meshes``), compiled with ``num_partitions = mesh.size``, ``use_spmd_partitioning`` and
``use_shardy_partitioner`` over ``mesh.devices.flat`` (as JAX's default
``jax_use_shardy_partitioner``; GSPMD is deprecated in XLA), and run under
``xla._replicated_lock`` (one multi-device run at a time, as pmap). Outputs stay on the
devices as jaxlib global arrays, ``_pmap = (sharding, None, global)``, their host value
gathered when first read (``array._gather``); an output whose sharding was left to XLA gets
the ``NamedSharding`` of the mesh that matches what XLA chose (else a ``GSPMDSharding``, which
a later sharded jit takes as a mesh laid out as its tile assignment). A repeated call runs
``SpmdExecutable.runner``, generated per signature (jit's monomorphic fast path): arguments
already placed as it takes them pass their global arrays as they are. ``sharding_constraint_p``
lowers to ``sdy.sharding_constraint`` in such a module and is the identity elsewhere.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from nbjax import core, dtypes, registry, _tree_util as tree_util
from nbjax.array import Array, _wrap
from nbjax.core import Primitive
from nbjax.interpreters import ad, batching
from nbjax.sharding import AbstractMesh, GSPMDSharding, NamedSharding, PartitionSpec, Sharding

__all__ = ["put", "from_pieces", "local_devices", "make_array_from_callback",
           "make_array_from_single_device_arrays", "make_array_from_process_local_data",
           "SpmdExecutable", "sharding_constraint_p", "with_sharding_constraint",
           "flatten_shardings", "is_sharded"]


def _jl():
  from nbjax import xla
  return xla, xla.ensure_jaxlib().xc, xla._runtime()


_shims: dict = {}


def _shim(sharding, ndim):
  """jaxlib's view of ``sharding`` for an array of rank ``ndim`` (a GSPMDSharding shim)."""
  key = (sharding, ndim)
  s = _shims.get(key)
  if s is None:
    xla, xc, rt = _jl()
    s = _shims[key] = rt.gspmd(xc.DeviceList(tuple(sharding._device_assignment)),
                               xc.HloSharding.from_string(sharding._to_hlo_string(ndim)))
  return s


def is_sharded(x):
  """``x`` is an Array placed by a NamedSharding / sharded jit (not a pmap output)."""
  return type(x) is Array and x._pmap is not None and x._pmap[0]._spmd


def local_devices(sharding):
  """The devices of ``sharding`` this process drives, in its device order."""
  devs = sharding._device_assignment
  if sharding.is_fully_addressable:
    return list(devs)
  mine = sharding.addressable_devices
  return [d for d in devs if d in mine]


_covers: dict = {}


def _full_here(sharding, shape):
  """Whether this process's pieces of an array of ``shape`` hold all of it."""
  key = (sharding, tuple(shape))
  r = _covers.get(key)
  if r is None:
    mask = np.zeros(shape, bool)
    for i in sharding.addressable_devices_indices_map(shape).values():
      mask[i] = True
    r = _covers[key] = bool(mask.all())
  return r


def sharded_arrays_exist():
  """Eager operations check their operands for sharded ones from now on (called where
  sharded arrays are made: device_put, sharded jit and shard_map programs;
  ``core.sharded_eager``)."""
  if not core.placement[0]:
    core.enable_placement()


def _make(g, sharding, bufs, shape, dtype, weak):
  """The Array of the jaxlib global array ``g`` (this process's buffers ``bufs``, in
  ``local_devices(sharding)`` order): with a host value when this process holds all of it."""
  from nbjax import xla
  sharded_arrays_exist()
  if sharding.is_fully_addressable or _full_here(sharding, shape):
    idx = sharding.devices_indices_map(shape)
    v = np.empty(shape, dtype)
    for d, b in zip(local_devices(sharding), bufs):
      v[idx[d]] = xla._to_numpy(b).reshape(v[idx[d]].shape)
    o = _wrap(v, weak)
  else:  # spans other processes: no host value (Array.__getattr__ raises JAX's error)
    o = Array.__new__(Array)
    o._weak, o._buf = weak, None
  o._pmap = (sharding, list(bufs), g)
  return o


def put(x, sharding):
  """``x`` (array-like) as an Array placed as ``sharding`` says (one buffer per device; this
  process's devices only when the sharding spans several processes: every process passes
  the same global value)."""
  weak = x._weak if type(x) is Array else False
  if is_sharded(x):
    p = x._pmap
    if p[0] == sharding:
      if p[2] is None:  # per-device buffers alone (shard_map, a reordered sharded jit output)
        xla, xc, rt = _jl()
        v = x._value
        x._pmap = p = (p[0], p[1], rt.impl_type(rt.aval(v.shape, v.dtype),
                                                _shim(sharding, v.ndim), list(p[1]), True, True))
      return x
    if p[2] is not None and (not p[0].is_fully_addressable or
                             not sharding.is_fully_addressable):
      return _reshard(sharding)(x)  # moves pieces between processes: XLA's job
  v = x._value if type(x) is Array else np.asarray(Array(x)._value)
  if isinstance(sharding, NamedSharding):
    sharding.check(v.shape, "device_put args")
  xla, xc, rt = _jl()
  devs = local_devices(sharding)
  idx = sharding.devices_indices_map(v.shape)
  pieces = [np.array(v[idx[d]], order="C") for d in devs]  # distinct memory per shard
  g = rt.bdp(rt.aval(v.shape, v.dtype), _shim(sharding, v.ndim), pieces, devs, True, False,
             rt.copy, True)
  return _make(g, sharding, list(g._arrays), v.shape, v.dtype, weak)


_reshards: dict = {}


def _identity(v):
  return v


def _reshard(sharding):
  """The identity jitted with ``out_shardings=sharding`` (one per sharding)."""
  f = _reshards.get(sharding)
  if f is None:
    from nbjax.interpreters.pjit import jit
    f = _reshards[sharding] = jit(_identity, out_shardings=sharding)
  return f


def from_pieces(shape, dtype, sharding, pieces, weak=False):
  """The Array of this process's ``pieces`` (host arrays, in ``local_devices(sharding)``
  order) of a global array of ``shape``, placed as ``sharding``."""
  from nbjax import dtypes
  xla, xc, rt = _jl()
  dtype = dtypes.canonicalize_dtype(dtype)
  pieces = [np.array(p, dtype=dtype, order="C") for p in pieces]
  if not sharding._spmd:  # a SingleDeviceSharding: the one piece is the array
    return Array(pieces[0].reshape(shape), weak)
  g = rt.bdp(rt.aval(tuple(shape), dtype), _shim(sharding, len(shape)), pieces,
             local_devices(sharding), True, False, rt.copy, True)
  return _make(g, sharding, list(g._arrays), tuple(shape), dtype, weak)


def _global(x, sharding):
  """The jaxlib global array of ``x`` placed as ``sharding``."""
  return put(x, sharding)._pmap[2]


# ----------------------------------------------------------------------- shardings of a call


def _is_sh_leaf(x):
  from nbjax.experimental.layout import Format
  return x is None or isinstance(x, (Sharding, PartitionSpec, Format))


def flatten_shardings(what, tree, shardings):
  """Broadcast the prefix tree ``shardings`` over ``tree``'s leaves (None: unspecified)."""
  from nbjax.experimental.layout import Format
  if shardings is None or isinstance(shardings, (Sharding, Format)):
    return [shardings] * len(tree_util.tree_leaves(tree))
  args = what.endswith("in_shardings") and type(tree) is tuple  # (the positional arguments)
  if args and isinstance(shardings, list):
    shardings = tuple(shardings)  # (JAX's: a list is taken as the tuple)
  leaves, sdef = tree_util.tree_flatten(shardings, is_leaf=_is_sh_leaf)
  try:
    subs = sdef.flatten_up_to(tree)
  except (ValueError, TypeError) as e:
    if args and (type(shardings) is not tuple or len(shardings) != len(tree)):
      msg = (f"{what} specification must be a tree prefix of the positional arguments tuple. "
             f"In particular, {what} must either be a Sharding, a PartitionSpec, or a tuple of "
             "length equal to the number of positional arguments.")
      if type(shardings) is not tuple:
        msg += f" But {what} is not a tuple: got {type(shardings)} instead."
      else:
        msg += (f" But {what} is the wrong length: got a tuple or list of length "
                f"{len(shardings)} for an args tuple of length {len(tree)}.")
      if len(tree) == 1 and None not in tree_util.tree_leaves(  # (JAX's None: no pytree)
          shardings, is_leaf=lambda v: v is None or _is_sh_leaf(v)):
        try:
          flatten_shardings(what, tree, (shardings,))
          msg += (f" Given the corresponding argument being passed, it looks like {what} "
                  "might need to be wrapped in a singleton tuple.")
        except ValueError:
          pass
      raise ValueError(msg) from None
    raise ValueError(f"{what} specification must be a tree prefix of the corresponding value, "
                     f"got specification {shardings} for value tree "
                     f"{tree_util.tree_structure(tree)}. ({e})") from None
  out = []
  for s, sub in zip(leaves, subs):
    out.extend([s] * len(tree_util.tree_leaves(sub)))
  return out


def check_formats(what, shardings, avals):
  """JAX's checks of the ``Format``s among ``shardings`` (flat, one per aval): a concrete
  layout's rank; nbjax's arrays are row-major, so a layout is taken only when it is that
  (``Layout.AUTO`` and None resolve to it)."""
  from nbjax.experimental.layout import Format, Layout
  for s, a in zip(shardings, avals):
    if isinstance(s, Format) and isinstance(s.layout, Layout):
      s.layout.check_compatible_aval(a.shape)
      if s.layout.major_to_minor != tuple(range(len(a.shape))) or s.layout.tiling:
        raise NotImplementedError(f"{what}: nbjax's arrays are row-major; the layout "
                                  f"{s.layout} is not supported")


def _resolve(s, mesh, what):
  from nbjax.experimental.layout import Format, Layout, AutoLayoutSingleton
  if isinstance(s, (Layout, AutoLayoutSingleton)):
    raise ValueError("`jax.jit` does not accept device-local layouts directly. Create a "
                     "`Format` instance wrapping this device-local layout and pass that to "
                     f"`jit` instead. Got {s}")
  if isinstance(s, Format):
    s = s.sharding
  if isinstance(s, PartitionSpec):
    from nbjax.sharding import _current_mesh
    m = mesh or _current_mesh()
    if m is None:
      raise RuntimeError(f"{what}: a PartitionSpec ({s!r}) needs a mesh: use a NamedSharding "
                         "or call under `with mesh:`")
    return NamedSharding(m, s)
  if isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh):
    from nbjax.sharding import _current_mesh  # (over the concrete context mesh, as JAX's)
    m = mesh or _current_mesh()
    if m is not None and not isinstance(m, AbstractMesh) and m.abstract_mesh == s.mesh:
      return NamedSharding(m, s.spec, memory_kind=s.memory_kind)
  if s is not None and not isinstance(s, Sharding):
    raise TypeError(f"{what} leaves must be Shardings or None, got {s!r}")
  return s


def typed_out_shardings(outs, out_avals, ins):
  """``outs`` (jit's out shardings) with an unspecified one whose aval carries a sharding
  (Explicit mesh axes) placed so, over the inputs' or the context's concrete mesh."""
  from nbjax.sharding import _current_mesh
  res = []
  for s, a in zip(outs, out_avals):
    sh = getattr(a, "_sh", None)
    if s is None and sh is not None:
      m = next((i.mesh for i in ins if isinstance(i, NamedSharding) and
                i.mesh.abstract_mesh == sh.mesh), None) or _current_mesh()
      if m is not None and not isinstance(m, AbstractMesh) and m.abstract_mesh == sh.mesh:
        s = NamedSharding(m, sh.spec)
    res.append(s)
  return res


def _mesh_of(shardings):
  mesh, devs = None, None
  for s in shardings:
    if s is None:
      continue
    d = tuple(s._device_assignment)
    if devs is not None and set(d) != set(devs):
      raise ValueError("Received incompatible devices for jitted computation. Got "
                       f"{[x.id for x in devs]} and {[x.id for x in d]}")
    if mesh is None and isinstance(s, NamedSharding):
      mesh, devs = s.mesh, d
    elif devs is None:
      devs = d
  return mesh, devs


# ----------------------------------------------------------------------- Shardy annotations


def _context():
  """The shared MLIR context, with the ``sdy`` (Shardy) dialect registered (once)."""
  from nbjax import xla
  ctx = xla.mlir_context()
  if not getattr(ctx, "_nbjax_sdy", False):
    from jaxlib.mlir.dialects import sdy
    sdy.register_dialect(ctx)
    ctx._nbjax_sdy = True
  return ctx


def _sdy_dim(p):
  if p is PartitionSpec.UNCONSTRAINED:
    return "{?}"
  names = () if p is None else (p,) if isinstance(p, str) else p
  return "{%s}" % ", ".join(f'"{a}"' for a in names)


class _Meshes:
  """The ``sdy.mesh`` symbols one SPMD module refers to, one per distinct (axes, device
  order): a NamedSharding's mesh, or for a GSPMDSharding a mesh with one axis per tiled
  dimension laid out as its tile assignment. Device ids are logical (positions in ``devs``,
  the executable's device assignment)."""

  def __init__(self, devs, mesh):
    self.devs, self.mesh = devs, mesh
    self.pos = {d: i for i, d in enumerate(devs)}
    self.names = {}
    self.maximal = set()  # logical ids of the one-device meshes host callbacks run on
    self.default = (tuple(mesh.shape.items()), self._ids(mesh.devices.flat)) \
        if mesh is not None else ((("_d", len(devs)),), tuple(range(len(devs))))
    if mesh is not None:
      self._name(self.default)  # the executable's own mesh is @mesh

  def _ids(self, devices):
    return tuple(self.pos[d] for d in devices)

  def _name(self, key):
    n = self.names.get(key)
    if n is None:
      n = self.names[key] = "mesh" if not self.names else f"mesh_{len(self.names)}"
    return n

  def body(self, s, ndim):
    """``<@mesh, [{"x"}, {}]>``: ``s`` on an array of rank ``ndim``."""
    if isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh):
      key = self.default  # (an AbstractMesh: the executable's own mesh, of its shape)
      if key[0] != tuple(s.mesh.shape.items()):
        raise ValueError(f"The mesh of the sharding {s} does not match the shape of the "
                         f"computation's mesh {dict(key[0])}")
      dims = [_sdy_dim(p) for p in tuple(s.spec) + (None,) * (ndim - len(s.spec))]
    elif isinstance(s, NamedSharding):
      key = (tuple(s.mesh.shape.items()), self._ids(s.mesh.devices.flat))
      dims = [_sdy_dim(p) for p in tuple(s.spec) + (None,) * (ndim - len(s.spec))]
    elif not isinstance(s, GSPMDSharding) or s._hlo.is_replicated():  # (one device's)
      key, dims = self.default, ["{}"] * ndim
    elif s._hlo.is_tiled() and not s._hlo.subgroup_types():
      tiles = list(s._hlo.tile_assignment_dimensions())
      devs = s._device_assignment
      ids = tuple(self.pos[devs[i]] for i in s._hlo.tile_assignment_devices())
      key = (tuple((f"_{k}", t) for k, t in enumerate(tiles) if t > 1), ids)
      dims = ['{"_%d"}' % k if t > 1 else "{}" for k, t in enumerate(tiles[:ndim])]
    else:
      raise NotImplementedError(f"sharded jit: no Shardy form for the sharding {s}")
    return f"<@{self._name(key)}, [{', '.join(dims)}]>"

  def attr(self, s, ndim):
    from nbjax.interpreters.lowering import ir
    return ir.Attribute.parse("#sdy.sharding" + self.body(s, ndim))

  def callback_attr(self, sharding, nresults):
    """A host callback's ``sdy.sharding`` (JAX's ``_callback_op_sharding``): every result
    on one device (MAXIMAL), the one ``sharding`` names (a ``SingleDeviceSharding``) or
    the first, so the callback runs once, on the whole value."""
    from nbjax.interpreters.lowering import ir
    from nbjax.sharding import SingleDeviceSharding
    index = 0
    if sharding is not None:
      scalar = isinstance(sharding, NamedSharding) and sharding.mesh.size == 1
      if not scalar and not isinstance(sharding, SingleDeviceSharding):
        raise NotImplementedError(
            f"pure_callback only supports SingleDeviceSharding, but got {type(sharding)}")
      device = next(iter(sharding.device_set))
      if device not in self.pos:
        raise ValueError(f"Sharding provided to pure_callback specifies a device {device} "
                         f"that is not in the device assignment ({list(self.pos)})")
      index = self.pos[device]
    self.maximal.add(index)
    one = f"<@maximal_mesh_{index}, []>"
    return ir.Attribute.parse(
        f"#sdy.sharding_per_value<[{', '.join([one] * max(1, nresults))}]>")

  def emit(self, module):
    """Put the ``sdy.mesh`` ops at the top of ``module`` (after lowering: all are known)."""
    from jaxlib.mlir.dialects import sdy
    from nbjax.interpreters.lowering import ir
    with ir.InsertionPoint.at_block_begin(module.body):
      for (axes, ids), name in self.names.items():
        ax = ", ".join(f'"{a}"={k}' for a, k in axes)
        dev = "" if ids == tuple(range(len(ids))) else \
            ", device_ids=[%s]" % ", ".join(map(str, ids))
        sdy.MeshOp(name, ir.Attribute.parse(f"#sdy.mesh<[{ax}]{dev}>"))
      for i in sorted(self.maximal):
        sdy.MeshOp(f"maximal_mesh_{i}", ir.Attribute.parse(f"#sdy.mesh<[], device_ids=[{i}]>"))


# ----------------------------------------------------------------------- SPMD executable


def _candidates(mesh, ndim):
  """PartitionSpecs of rank ``ndim`` over ``mesh``, fewest named axes first (size-1 axes
  never named)."""
  names = tuple(a for a, k in mesh.shape.items() if k > 1)
  for assign in sorted(itertools.product(range(ndim + 1), repeat=len(names)),
                       key=lambda t: sum(k < ndim for k in t)):
    for order in itertools.permutations(names):
      spec = [[] for _ in range(ndim)]
      for a in order:
        k = assign[names.index(a)]
        if k < ndim:
          spec[k].append(a)
      yield PartitionSpec(*[None if not p else p[0] if len(p) == 1 else tuple(p)
                            for p in spec])


def _named_for(hlo, mesh, devs, shape, prefer=()):
  """The NamedSharding over ``mesh`` equal to XLA's ``hlo`` for this shape (one of
  ``prefer``, the inputs', if any matches), else a GSPMDSharding."""
  xla, xc, rt = _jl()
  if mesh is not None and len(mesh.axis_names) <= 4:
    first = [s.spec for s in prefer if isinstance(s, NamedSharding) and s.mesh == mesh]
    for spec in itertools.chain(first, _candidates(mesh, len(shape))):
      s = NamedSharding(mesh, spec)
      try:
        s.check(shape)
      except ValueError:
        continue
      if xc.HloSharding.from_string(s._to_hlo_string(len(shape))) == hlo:
        if spec not in first:
          while len(spec) and spec[-1] is None:
            spec = PartitionSpec(*spec[:-1])
        return NamedSharding(mesh, spec)
  return GSPMDSharding(devs, hlo)


def sharded_module(closed, name, in_shs, out_shs, mesh=None):
  """``(mesh, devices, in_shs, module, host callbacks, keepalives)``: ``closed`` (physical
  avals) as one SPMD module over the shardings' devices (``mesh``: a sharding constraint's,
  where no input or output names one), inputs without a sharding replicated."""
  from nbjax.interpreters import mlir
  xla, xc, rt = _jl()
  hint = mesh
  mesh, devs = _mesh_of(list(in_shs) + list(out_shs))
  if devs is None and hint is not None:  # (the mesh of a sharding constraint inside)
    mesh, devs = hint, tuple(hint.devices.flat)
  devs = list(devs)
  if len(devs) > 1:  # as JAX's: only ordered IO callbacks have an order across devices
    from nbjax.jaxpr import jaxpr_effects
    bad = [e for e in jaxpr_effects(closed) if getattr(e, "ordered", False)
           and not getattr(e, "shardable", False)]
    if bad:
      raise ValueError(f"The following ordered effects are not supported for more than 1 "
                       f"device: {bad}")
  in_avals, out_avals = closed.in_avals, closed.out_avals
  repl = NamedSharding(mesh, PartitionSpec()) if mesh is not None else \
      GSPMDSharding(devs, xc.HloSharding.replicate())
  in_shs = [repl if s is None else s for s in in_shs]
  for s, a in zip(in_shs, in_avals):
    if isinstance(s, NamedSharding):
      s.check(a.shape, "pjit arguments")
  for s, a in zip(out_shs, out_avals):
    if isinstance(s, NamedSharding):
      s.check(a.shape, "pjit outputs")
  with _context(), mlir.ir.Location.unknown():
    ir = mlir.ir
    m = mlir._new_module(f"jit_{name}")
    mctx = mlir.ModuleContext(m)
    mctx.spmd = meshes = _Meshes(devs, mesh)
    mctx._names.add("main")
    mlir.lower_jaxpr_to_fun(mctx, "main", closed, public=True)
    main = xla._find_main(m)
    attr = lambda s, a: ir.DictAttr.get(
        {} if s is None else {"sdy.sharding": meshes.attr(s, a.ndim)})
    main.arg_attrs = ir.ArrayAttr.get([attr(s, a) for s, a in zip(in_shs, in_avals)])
    main.result_attrs = ir.ArrayAttr.get([attr(s, a) for s, a in zip(out_shs, out_avals)])
    meshes.emit(m)
  return mesh, devs, in_shs, m, mctx.host_callbacks, mctx.keepalives


class SpmdExecutable:
  """``closed`` (on global avals) compiled as one SPMD program over the shardings' devices.
  ``in_shs``/``out_shs``: per flat input/output, a Sharding or None (inputs: replicated;
  outputs: XLA's choice)."""

  def __init__(self, closed, name, in_shs, out_shs, mesh=None):
    from nbjax.interpreters import lowering
    xla, xc, rt = _jl()
    sharded_arrays_exist()
    # key arrays (extended dtypes) in and out: the program takes and gives their data, placed
    # as the keys' shardings say (the trailing key-data axes replicated)
    ext = lambda a: isinstance(a.dtype, dtypes.ExtendedDType)
    self.key_in = [i for i, a in enumerate(closed.in_avals) if ext(a)]
    self.key_out = [(i, a.dtype._impl) for i, a in enumerate(closed.out_avals) if ext(a)]
    if self.key_in or self.key_out:
      closed = lowering.physicalize(closed)
    self.mesh, self.devs, self.in_shs, m, cbs, self._keepalive = sharded_module(
        closed, name, in_shs, out_shs, mesh)
    mesh, devs, in_avals, out_avals = self.mesh, self.devs, closed.in_avals, closed.out_avals
    with _context():
      text = str(m)
    self.text = text
    n = len(devs)
    opts = xc.CompileOptions()
    opts.num_replicas, opts.num_partitions = 1, n
    opts.device_assignment = xc.DeviceAssignment.create(
        np.array([d.id for d in devs], np.int32).reshape(1, n))
    eb = opts.executable_build_options
    eb.use_spmd_partitioning = True
    eb.allow_spmd_sharding_propagation_to_output = [s is None for s in out_shs]
    eb.use_shardy_partitioner = True
    # host callbacks (each runs on one device, as its custom call's sharding says)
    self.host_callbacks = cbs = xla.HostCallbacks(cbs) if cbs else None
    with xla._lock:
      if cbs is None:
        self._exe = rt.client.compile_and_load(text, xc.DeviceList(tuple(devs)), opts)
      else:
        with xla.mlir_context():  # (only the ir.Module overload takes callbacks)
          self._exe = rt.client.compile_and_load(xla.get_ir().Module.parse(text),
                                                 xc.DeviceList(tuple(devs)), opts,
                                                 host_callbacks=list(cbs))
    xla._stats["compiles"] += 1
    got = [h if isinstance(h, xc.HloSharding) else xc.HloSharding.from_proto(h)
           for h in self._exe.get_output_shardings() or
           [xc.HloSharding.replicate()] * len(out_avals)]  # one device: no partitioning
    self.out_shs = [s if s is not None else _named_for(h, mesh, devs, a.shape, self.in_shs)
                    for s, h, a in zip(out_shs, got, out_avals)]
    self.out_avals = out_avals
    mine = set(rt.local_devs)
    self.local = [d for d in self.devs if d in mine]
    self._rt_array = xla.ensure_jaxlib()._jax.ArrayImpl
    self.in_avals = in_avals
    self._handlers = None

  def _outputs(self):
    """``(handlers, sharding per output)`` when every output can come back as one jaxlib
    global array (its sharding's devices in the executable's order, a plain dtype), else
    None (the per-device buffers are reordered and gathered by ``run``)."""
    if self._handlers is None:
      from nbjax import dtypes
      xla, xc, rt = _jl()
      ok = xla._dist is None and all(  # (several processes: run's general path)
          tuple(sh._device_assignment) == tuple(self.devs) and a.dtype != dtypes.float0
          for sh, a in zip(self.out_shs, self.out_avals))
      self._handlers = [rt.handler(rt.aval(a.shape, np.dtype(a.dtype)), _shim(sh, a.ndim),
                                   True, True)
                        for sh, a in zip(self.out_shs, self.out_avals)] if ok else False
    return self._handlers or None

  def _execute(self, gs):
    from nbjax import xla
    with xla._replicated_lock:  # one multi-device run in flight at a time (see xla.Replicated)
      if self.host_callbacks is not None:
        return xla._raising(self._exe.execute_sharded, self.host_callbacks.errors)(gs)
      res = self._exe.execute_sharded(gs, with_tokens=True)
      res.consume_token().block_until_ready()
    return res

  def run(self, args):
    """Outputs for ``args`` (anything array-like; put onto ``in_shs`` where not already)."""
    if self.key_in or self.key_out:
      from nbjax.interpreters import lowering
      args = list(args)
      for i in self.key_in:
        args[i] = args[i]._base_array
      outs = self._run(args)
      for i, impl in self.key_out:
        outs[i] = lowering.key_wrap(impl, outs[i])
      return outs
    return self._run(args)

  def _run(self, args):
    xla, xc, rt = _jl()
    gs = [_global(x, s) for x, s in zip(args, self.in_shs)]
    hs = self._outputs()
    if hs is not None:  # one process, outputs as global arrays read on demand (Array._gather)
      outs = []
      for g, sh, a in zip(self._execute(gs).consume_with_handlers(hs), self.out_shs,
                          self.out_avals):
        o = object.__new__(Array)
        o._weak, o._buf, o._pmap = a.weak_type, None, (sh, None, g)
        outs.append(o)
      return outs
    with xla._replicated_lock:
      if self.host_callbacks is not None and xla._dist is None:  # (run to its end)
        res = xla._raising(self._exe.execute_sharded, self.host_callbacks.errors)(gs)
      else:
        res = self._exe.execute_sharded(gs, with_tokens=True)
      if xla._dist is None:
        if self.host_callbacks is None:
          res.consume_token().block_until_ready()
        per_out = res.disassemble_into_single_device_arrays()
      else:  # other processes take part: wait in Python, watching for their failure
        per_out = res.disassemble_into_single_device_arrays()
        xla.wait_sharded([b for bufs in per_out for b in bufs])
    outs = []
    for bufs, sh, aval in zip(per_out, self.out_shs, self.out_avals):
      # buffers come in the executable's (local) device order; the sharding's may differ
      order = {d: b for d, b in zip(self.local, bufs)}
      bufs = [order[d] for d in local_devices(sh)]
      g = self._rt_array(rt.aval(aval.shape, aval.dtype), _shim(sh, len(aval.shape)), bufs,
                         True, True)
      outs.append(_make(g, sh, bufs, aval.shape, aval.dtype, aval.weak_type))
    return outs

  def runner(self, out_tree):
    """jit's monomorphic fast path for this executable: ``run(flat_args)`` returning the
    tree of outputs, or ``MISS`` unless every argument is an Array already placed as this
    executable takes it (its sharding, shape, dtype, weak type; the same
    ``config.trace_key``), whose jaxlib global array is passed as is. None where the
    outputs need the general path."""
    from nbjax.config import config
    from nbjax.interpreters.pjit import MISS, finish_sharded_run
    hs = self._outputs()
    if hs is None or self.key_in or self.key_out:
      return None
    xla, xc, rt = _jl()
    env = {"_Array": Array, "_new": object.__new__, "_MISS": MISS, "_config": config,
           "_tkey": config.trace_key, "_len": len, "_exec": self._execute, "_hs": hs}
    n = len(self.in_shs)
    names = [f"x{i}" for i in range(n)]
    src = ["def run(args):",
           "  if _config.trace_key is not _tkey or _len(args) != %d: return _MISS" % n]
    if n:
      src.append(f"  {', '.join(names)}, = args")
    for i, (x, s, a) in enumerate(zip(names, self.in_shs, self.in_avals)):
      env[f"_s{i}"], env[f"_w{i}"] = s, a.weak_type
      env[f"_a{i}"] = rt.aval(a.shape, np.dtype(a.dtype))
      src += [f"  if type({x}) is not _Array or {x}._weak is not _w{i}: return _MISS",
              f"  p = {x}._pmap",
              f"  if p is None or p[0] is not _s{i} and p[0] != _s{i}: return _MISS",
              f"  {x} = p[2]",
              f"  if {x} is None or {x}.aval is not _a{i}: return _MISS"]
    src.append(f"  o = _exec([{', '.join(names)}]).consume_with_handlers(_hs)")
    return finish_sharded_run(src, env, self.out_shs, self.out_avals, out_tree,
                              "<nbjax.jit (sharded)>")


_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def executable(closed, name, in_shs, out_shs, mesh=None):
  per = _cache.get(closed)
  if per is None:
    per = _cache[closed] = {}
  key = (tuple(in_shs), tuple(out_shs), mesh)
  exe = per.get(key)
  if exe is None:
    exe = per[key] = SpmdExecutable(closed, name, in_shs, out_shs, mesh)
  return exe


# ----------------------------------------------------------------------- with_sharding_constraint

sharding_constraint_p = Primitive("sharding_constraint")
sharding_constraint_p.places_sharded = True


def _sc_impl(x, *, sharding):
  if is_sharded(x):  # as JAX's: a sharding over the same devices in another order is an error
    have, want = x._pmap[0]._device_assignment, sharding._device_assignment
    if set(have) == set(want) and tuple(have) != tuple(want):
      a = core.get_aval(x)
      raise ValueError(
          "Received incompatible devices for jitted computation. Got argument x of "
          f"_identity_fn with shape {a.str_short(short_dtypes=False)} and with device ids "
          f"{[d.id for d in have]} on platform CPU and explicit output sharding with device "
          f"ids {[d.id for d in want]} on platform CPU")
  return put(x if type(x) is Array else Array(*registry.coerce(x, sharding_constraint_p)),
             sharding)


def _sc_lowering(ctx, x, *, sharding):
  meshes = getattr(ctx.module_context, "spmd", None)
  if not meshes:
    return [x]
  from jaxlib.mlir.dialects import sdy
  return [sdy.ShardingConstraintOp(x, meshes.attr(sharding, ctx.avals_in[0].ndim)).result]


def _sc_batch(axis_data, vals, dims, *, sharding):
  x, d = vals[0], dims[0]
  spmd = axis_data.spmd_name
  if d is not batching.not_mapped and spmd is not None:
    if not isinstance(sharding, NamedSharding):
      raise ValueError(
          "If you are using spmd_axis_name parameter of jax.vmap, please make sure to run "
          "your jitted function inside the mesh context manager. Only "
          "`jax.lax.with_sharding_constraint` with `jax.sharding.NamedSharding` as an input "
          "can be transformed with spmd_axis_name batching rules outside of an explicit mesh "
          f"context manager scope {sharding!r}")
    if set(spmd) & {a for p in sharding.spec._normalized(len(sharding.spec)) for a in p}:
      raise ValueError(f"vmap spmd_axis_name {spmd} cannot appear in with_sharding_constraint "
                       f"spec, but got spec {sharding.spec}")
  if d is batching.not_mapped or not isinstance(sharding, NamedSharding):
    return sharding_constraint_p.bind(x, sharding=sharding), d
  spec = list(sharding.spec) + [None] * (x.ndim - 1 - len(sharding.spec))
  spec.insert(d, spmd)
  return sharding_constraint_p.bind(x, sharding=NamedSharding(sharding.mesh,
                                                              PartitionSpec(*spec))), d


_sc_batch.wants_axis_data = True

sharding_constraint_p.make_eager = lambda prim, f_small, f_large, thr: _sc_impl  # (placed)
# on key arrays' data (under jit): the same sharding, the trailing key-data axes replicated
sharding_constraint_p.physical_rule = lambda avals, x, *, sharding: sharding_constraint_p.bind(
    x, sharding=sharding)
registry.register(
    sharding_constraint_p, family="parallel", impls={"python": _sc_impl},
    abstract_eval=lambda aval, **_: aval, batch=_sc_batch,
    meta=dict(differentiable=True, linear=True,
              note="identity that pins its operand's sharding (sdy.sharding_constraint in a "
                   "sharded jit)"))
ad.deflinear2(sharding_constraint_p, lambda ct, x, *, sharding: [
    sharding_constraint_p.bind(ad.instantiate_zeros(ct), sharding=sharding)])
from nbjax.interpreters.lowering import register as _lower_register  # noqa: E402
_lower_register(sharding_constraint_p, _sc_lowering)


def with_sharding_constraint(x, shardings):
  """Pin the sharding of the arrays in ``x`` (a pytree; ``shardings`` a prefix of it,
  ``NamedSharding``s, or ``PartitionSpec``s under ``with mesh:``)."""
  flat, tree = tree_util.tree_flatten(x)
  shs = flatten_shardings("with_sharding_constraint shardings", x, shardings)
  out = []
  for v, s in zip(flat, shs):
    s = _resolve(s, None, "with_sharding_constraint")
    if s is None:
      raise ValueError("One of with_sharding_constraint arguments got sharding None which is "
                       "not allowed. Please only pass `jax.sharding.Sharding` instances.")
    if isinstance(s, NamedSharding) and isinstance(s.mesh, AbstractMesh) and \
        not isinstance(v, core.Tracer):  # eagerly: the input's mesh, of the same shape
      a = core.get_aval(v)
      if not isinstance(v, Array):
        raise ValueError("Target sharding contains a `jax.sharding.AbstractMesh` which "
                         "requires the input passed should be a `jax.Array`. Got "
                         f"{type(v)} with shape {a.str_short(short_dtypes=False)}")
      if not isinstance(v.sharding, NamedSharding):
        raise TypeError("The sharding on the input must be a `NamedSharding` since the "
                        "target sharding has an `AbstractMesh` in it. Got sharding type "
                        f"{type(v.sharding)} for shape {a.str_short(short_dtypes=False)}")
      if v.sharding.mesh.shape_tuple != s.mesh.shape_tuple:
        raise ValueError(f"Mesh shape of the input {v.sharding.mesh.shape_tuple} does not "
                         "match the mesh shape of the target sharding "
                         f"{s.mesh.shape_tuple} for shape {a.str_short(short_dtypes=False)}")
      s = NamedSharding(v.sharding.mesh, s.spec)
    if isinstance(s, NamedSharding):
      s.check(np.shape(v), "with_sharding_constraint arguments")
      from nbjax.sharding import _manual_axes
      if _manual_axes:  # inside a shard_map: its manual axes may not be named (JAX's error)
        used = {a for p in s.spec._normalized(len(s.spec)) for a in p}
        bad = tuple(a for a in s.mesh.axis_names if a in used and a in _manual_axes[-1])
        if bad:
          raise ValueError(f"pspec {s.spec} contains a manual axes {bad} of mesh which is not "
                           "allowed. If you are using a with_sharding_constraint under a "
                           "shard_map, only use the mesh axis in PartitionSpec which are not "
                           "manual.")
    out.append(sharding_constraint_p.bind(v, sharding=s))
  return tree_util.tree_unflatten(tree, out)


def reshard(xs, out_shardings):
  """``xs`` (a pytree of arrays) laid out as ``out_shardings`` (a prefix of it:
  ``NamedSharding``s, or ``PartitionSpec``s on the current mesh), eagerly or under jit."""
  flat, _ = tree_util.tree_flatten(xs)
  for s in flatten_shardings("reshard out_shardings", xs, out_shardings):
    if _resolve(s, None, "reshard") is None:
      raise ValueError("Reshard should only be used with out_shardings which are non-None and "
                       f"have a non-empty mesh. Got sharding {s}.")
  return with_sharding_constraint(xs, out_shardings)


# ----------------------------------------------------------------------- global arrays from pieces


def _check_pieces(what, sharding, shape, pieces):
  want = tuple(sharding.shard_shape(shape))
  for p in pieces:
    if tuple(np.shape(p)) != want:
      aval = core.ShapedArray(tuple(shape), pieces[0].dtype)
      raise ValueError(f"Expected shard shape {want} doesn't match the single device array "
                       f"shape {tuple(np.shape(p))}. Shape of Array is {aval.str_short(short_dtypes=False)} with "
                       f"sharding {sharding}")


def _is_keys(x):
  return isinstance(getattr(x, "dtype", None), dtypes.ExtendedDType)


def _keys_from_pieces(what, shape, sharding, pieces):
  """A key array of global ``shape`` placed as ``sharding`` from per-device key arrays: its
  data (``shape + key_shape``, the key axes whole on every device) from theirs."""
  impl = pieces[0]._impl
  if any(getattr(p, "_impl", None) is not impl for p in pieces):
    raise TypeError(f"{what}: the pieces must be key arrays of one dtype, got "
                    f"{', '.join(str(p.dtype) for p in pieces)}")
  _check_pieces(what, sharding, shape, pieces)
  data = [np.asarray(p._base_array) for p in pieces]  # (concrete keys' uint32 data)
  phys = (*shape, *impl.key_shape)
  return type(pieces[0])(impl, from_pieces(phys, np.dtype(np.uint32), sharding, data))


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
  """An Array of global ``shape`` placed as ``sharding``: ``data_callback(index)`` gives the
  data of each of this process's devices (``index``: a tuple of slices into the global
  array), as ``jax.make_array_from_callback``. Key arrays (the callback's) give a key array."""
  from nbjax.experimental.layout import Format, Layout
  if isinstance(sharding, Format):  # (its layout checked: nbjax's arrays are row-major)
    if not isinstance(sharding.layout, (Layout, type(None))):
      raise TypeError("`Layout.AUTO` cannot be used in place of a device-local layout when "
                      f"calling `jax.make_array_from_callback`. Got {sharding}")
    check_formats("make_array_from_callback", [sharding], [core.ShapedArray(shape, np.int8)])
    sharding = sharding.sharding
  if not isinstance(sharding, Sharding):
    raise TypeError(f"sharding should be an instance of `jax.sharding`. Got {sharding} of type "
                    f"{type(sharding)}")
  shape = tuple(shape)
  callback = data_callback

  def data_callback(index):
    r = callback(index)
    if isinstance(r, core.Tracer):
      raise core.UnexpectedTracerError(
          "jax.make_array_from_callback cannot be called within a traced context.")
    return r
  if not sharding._spmd:
    v = data_callback((slice(None),) * len(shape))
    if _is_keys(v):
      _check_pieces("make_array_from_callback", sharding, shape, [v])
      return v
    v = np.asarray(v)
    return Array(v if dtype is None else v.astype(dtype))
  idx = sharding.devices_indices_map(shape)
  pieces = [data_callback(idx[d]) for d in local_devices(sharding)]
  if pieces and _is_keys(pieces[0]):
    return _keys_from_pieces("make_array_from_callback", shape, sharding, pieces)
  pieces = [np.asarray(p) for p in pieces]
  if dtype is None:
    if not pieces:
      raise ValueError("Please pass `dtype` to `make_array_from_callback` when this process "
                       "has no addressable shards.")
    dtype = pieces[0].dtype
  _check_pieces("make_array_from_callback", sharding, shape, pieces)
  return from_pieces(shape, dtype, sharding, pieces)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
  """An Array of global ``shape`` placed as ``sharding`` from this process's per-device
  arrays (one per device of ``sharding`` this process drives, in its device order), as
  ``jax.make_array_from_single_device_arrays``."""
  shape = tuple(shape)
  fname = "make_array_from_single_device_arrays"
  if not isinstance(arrays, (list, tuple)):
    raise TypeError(f"jax.{fname} `arrays` argument must be a list or tuple, but got "
                    f"{type(arrays)}.")
  arrays = list(arrays)
  if dtype is None:
    if not arrays:
      raise ValueError("If the Array has no addressable shards, `dtype` must be provided via "
                       f"the `dtype` argument to `jax.{fname}`.")
    dtype = arrays[0].dtype
  else:
    if not isinstance(dtype, dtypes.ExtendedDType):
      dtype = dtypes.canonicalize_explicit_dtype(dtype, fname)
    if arrays and arrays[0].dtype != dtype:
      raise ValueError(f"If `dtype` is provided to `jax.{fname}`, it must match the dtype of "
                       f"the addressable shards. Got dtype={dtype} and shard "
                       f"dtype={arrays[0].dtype}`.")
  if any(isinstance(a, core.Tracer) for a in arrays):
    raise ValueError(f"jax.{fname} requires a list of concrete arrays as input, but got types "
                     f"{set(map(type, arrays))}")
  for a in arrays:
    n = len(a.addressable_shards) if isinstance(a, Array) else 1
    if n != 1:
      raise ValueError("When making an array from single-device arrays the input arrays must "
                       f"have one shard each. An argument array had {n} shard(s).")
  devs = local_devices(sharding)
  if len(arrays) != len(devs):
    raise ValueError(f"The number of arrays ({len(arrays)}) must equal the number of "
                     f"addressable devices of the sharding ({len(devs)}).")
  if arrays and _is_keys(arrays[0]):
    return _keys_from_pieces(fname, shape, sharding, arrays)
  pieces = [np.asarray(a) for a in arrays]
  _check_pieces("make_array_from_single_device_arrays", sharding, shape, pieces)
  return from_pieces(shape, dtype, sharding, pieces)


def _extents(index_map, shape):
  """Per dimension, the (start, stop) the devices of ``index_map`` cover together."""
  out = []
  for k, n in enumerate(shape):
    r = [i[k].indices(n)[:2] for i in index_map.values()]
    out.append((min(a for a, _ in r), max(b for _, b in r)) if r else (0, 0))
  return out


device_put = None  # nbjax.api.device_put, installed by nbjax.api (interpreters never import it)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
  """An Array placed as ``sharding`` from the data this process holds (``local_data``: its
  block of the global array along the dimensions the sharding splits over processes, or the
  whole extent of a dimension), as ``jax.make_array_from_process_local_data``. Without
  ``global_shape`` each process is taken to hold an equal block. ``sharding`` and
  ``global_shape`` may be pytree prefixes of ``local_data`` (a pytree); a ``PartitionSpec``
  is over the mesh of ``set_mesh``."""
  from nbjax import xla
  leaves, tree = tree_util.tree_flatten(local_data)
  shs = tree_util.broadcast_prefix(sharding, local_data, is_leaf=lambda x: x is None or
                                   isinstance(x, (Sharding, PartitionSpec)))
  shs = [_pspec_sharding(s) for s in shs]
  shapes = tree_util.broadcast_prefix(global_shape, local_data,
                                      is_leaf=lambda x: x is None or isinstance(x, tuple))
  if len({d.process_index for d in xla.devices()}) == 1:  # (one process)
    for g, v in zip(shapes, leaves):
      if g is not None and tuple(g) != np.shape(v):
        raise ValueError(
            "When calling `make_array_from_process_local_data` on a single process, "
            f"global_shape should be None or equal to local_data.shape.Got global_shape={g} "
            f"and local_data.shape={np.shape(v)}.")
    return tree_util.tree_unflatten(tree, [device_put(v, s) for v, s in zip(leaves, shs)])
  return tree_util.tree_unflatten(tree, [
      _from_process_local_data(s, v, g) for v, s, g in zip(leaves, shs, shapes)])


def _pspec_sharding(s):
  """A PartitionSpec over the mesh of ``set_mesh`` (JAX's ``pspec_to_sharding``)."""
  if isinstance(s, PartitionSpec):
    from nbjax.sharding import _current_mesh
    mesh = _current_mesh()
    if mesh is None or not mesh.devices.size:
      raise ValueError("Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to "
                       "make_array_from_process_local_data")
    return NamedSharding(mesh, s)
  return s


def _from_process_local_data(sharding, local_data, global_shape):
  local = np.asarray(local_data)
  if not sharding._spmd:
    return Array(local)
  if global_shape is None:  # each dimension: global / local blocks, on a divisible probe shape
    n = len(sharding._device_assignment)
    probe = tuple(max(k, 1) * n for k in local.shape)
    whole = _extents(sharding.devices_indices_map(probe), probe)
    mine = _extents(sharding.addressable_devices_indices_map(probe), probe)
    global_shape = tuple(k * ((b - a) // max(d - c, 1))
                         for k, (a, b), (c, d) in zip(local.shape, whole, mine))
  global_shape = tuple(global_shape)
  if len(global_shape) != local.ndim:
    raise ValueError(f"make_array_from_process_local_data: local_data of shape {local.shape} "
                     f"does not match global_shape {global_shape}")
  amap = sharding.addressable_devices_indices_map(global_shape)
  offsets = []
  for k, (a, b) in enumerate(_extents(amap, global_shape)):
    if local.shape[k] == global_shape[k]:
      offsets.append(0)
    elif local.shape[k] == b - a:
      offsets.append(a)
    else:
      raise ValueError(f"make_array_from_process_local_data: local_data's dimension {k} has "
                       f"size {local.shape[k]}, but this process's devices hold {b - a} of "
                       f"the global {global_shape[k]} (global_shape {global_shape})")
  pieces = []
  for d in local_devices(sharding):
    i = amap[d]
    pieces.append(local[tuple(slice(s.indices(n)[0] - o, s.indices(n)[1] - o)
                              for s, n, o in zip(i, global_shape, offsets))])
  return from_pieces(global_shape, local.dtype, sharding, pieces)


_eager_jits: dict = {}


def sharded_eager(prim, args, params):
  """``prim`` applied eagerly to operands of which some are sharded: one jitted computation
  of the primitive, as JAX's eager ops run, so the result is placed as XLA's sharding
  propagation says (``core.sharded_eager``). Jits are kept per primitive and params."""
  from nbjax import registry
  from nbjax.interpreters.pjit import jit
  if prim.name == "slice" and params["strides"] is None:
    # JAX's eager slice: a dynamic_slice from start indices passed as arguments, so XLA places
    # the result without knowing where it starts
    x, = args
    sizes = tuple(b - a for a, b in zip(params["start_indices"], params["limit_indices"]))
    return sharded_eager(registry.get("dynamic_slice"),
                         (x, *map(np.int32, params["start_indices"])), {"slice_sizes": sizes})
  try:
    key = (prim, tuple(sorted(params.items())))
    f = _eager_jits.get(key)
  except TypeError:  # (unhashable params: a jit for this call)
    key, f = None, None
  if f is None:
    f = jit(lambda *a: prim.bind(*a, **params))
    if key is not None:
      _eager_jits[key] = f
  return f(*args)


core.sharded_eager = sharded_eager
