"""Shardings: where an ``Array``'s data lives, as ``Array.sharding`` / ``addressable_shards``
report it, and the device meshes that name it.

Pipeline position: metadata on results. An ordinary ``Array`` (eager kernels, jit) lives on
the first CPU device (``SingleDeviceSharding``); a ``pmap`` output was computed as one piece
per device (``PmapSharding``: piece ``i`` on ``devices[i]`` is index ``i`` along the mapped
axis) and keeps those per-device XLA buffers as its ``addressable_shards`` beside the gathered
host value. ``Mesh``/``PartitionSpec``/``NamedSharding`` describe a global array split
over a named device grid: ``device_put`` (``api.py``) places the pieces, sharded ``jit``
(``interpreters/spmd.py``) annotates its SPMD module with ``hlo_sharding_string``, and
``shard_map`` reads block shapes from it. Nothing here moves data.
"""
from __future__ import annotations

import numpy as np

import collections
import contextlib
import enum
import functools
import math
import threading

__all__ = ["Sharding", "SingleDeviceSharding", "PmapSharding", "Shard", "Mesh", "AbstractMesh",
           "PartitionSpec", "NamedSharding", "AxisType", "make_mesh", "GSPMDSharding", "set_mesh",
           "canonicalize_sharding", "apply_out_sharding", "reshard", "AbstractDevice",
           "get_mesh", "get_abstract_mesh", "make_single_device_sharding", "auto_axes",
           "explicit_axes"]


class IndivisibleError(ValueError):
  """A sharding splits an array dimension into parts that do not divide it (JAX's)."""


class Sharding:
  """Base class of nbjax's shardings."""

  @property
  def device_set(self):
    return set(self._device_assignment)

  @property
  def num_devices(self):
    return len(self._device_assignment)

  memory_kind = "device"
  _spmd = False

  @property
  def is_fully_addressable(self):
    """Whether this process drives every device of the sharding."""
    p = _process_index()
    return all(d.process_index == p for d in self._device_assignment)

  @property
  def addressable_devices(self):
    p = _process_index()
    return {d for d in self._device_assignment if d.process_index == p}

  @property
  def has_addressable_devices(self):
    return bool(self.addressable_devices)

  def is_equivalent_to(self, other, ndim):
    """Whether both shardings place the same pieces of an ``ndim``-dimensional array on the
    same devices (and memory kind)."""
    return (self._device_assignment == other._device_assignment and
            self.memory_kind == other.memory_kind and
            self._hlo_key(ndim) == other._hlo_key(ndim))

  def _hlo_key(self, ndim):
    return "{replicated}" if self.is_fully_replicated else self._to_hlo_string(ndim)

  def _to_hlo_string(self, ndim):
    return "{replicated}"

  def _to_xla_hlo_sharding(self, num_dimensions):
    """XLA's ``HloSharding`` of this sharding for an array of rank ``num_dimensions``."""
    return _xc().HloSharding.from_string(self._to_hlo_string(num_dimensions))

  def addressable_devices_indices_map(self, global_shape):
    p = _process_index()
    return {d: i for d, i in self.devices_indices_map(global_shape).items()
            if d.process_index == p}


def _check_memory_kind(kind, device):
  """JAX's ValueError for a memory kind ``device`` cannot address (nbjax's CPU devices have
  one memory, ``"device"``)."""
  if kind is not None and kind != "device":
    raise ValueError(f"Could not find memory addressable by device {device.device_kind}. "
                     f"Device {device.device_kind} can address the following memory kinds: "
                     f"device. Got memory kind: {kind}")


def _xc():
  from nbjax import xla
  return xla.ensure_jaxlib().xc


def _process_index():
  from nbjax import xla
  return xla.process_index()


class SingleDeviceSharding(Sharding):
  """The whole array on one device."""

  def __init__(self, device, *, memory_kind=None):
    _check_memory_kind(memory_kind, device)
    self._device = device

  _device_assignment = property(lambda s: (s._device,))
  is_fully_replicated = True

  def devices_indices_map(self, global_shape):
    return {self._device: (slice(None),) * len(global_shape)}

  def shard_shape(self, global_shape):
    return tuple(global_shape)

  def __eq__(self, other):
    return type(other) is SingleDeviceSharding and other._device == self._device

  def __hash__(self):
    return hash(self._device)

  def __repr__(self):
    return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


class PmapSharding(Sharding):
  """A ``pmap`` output: piece ``i`` (index ``i`` along ``sharded_dim``, which it lacks) on
  ``devices[i]``; ``sharded_dim=None``: the same value on every device."""

  _spmd = False

  def __init__(self, devices, sharded_dim, size):
    self.devices = np.array(devices, dtype=object)
    self.sharded_dim, self._size = sharded_dim, size

  _device_assignment = property(lambda s: tuple(s.devices.flat))
  is_fully_replicated = property(lambda s: s.sharded_dim is None)

  def _hlo_key(self, ndim):
    return "{replicated}" if self.sharded_dim is None else ("pmap", self.sharded_dim)

  def _index(self, i, ndim):
    idx = [slice(None)] * ndim
    if self.sharded_dim is not None:
      idx[self.sharded_dim] = i
    return tuple(idx)

  def devices_indices_map(self, global_shape):
    return {d: self._index(i, len(global_shape)) for i, d in enumerate(self.devices.flat)}

  def shard_shape(self, global_shape):
    d = self.sharded_dim
    if d is None:
      return tuple(global_shape)
    if global_shape[d] != self._size:
      raise ValueError(f"The sharded dimension must be equal to the number of devices passed "
                       f"to PmapSharding. Got sharded dimension {d} with value "
                       f"{global_shape[d]} in shape {tuple(global_shape)} and the number of "
                       f"devices={self._size}")
    return tuple(global_shape[:d]) + tuple(global_shape[d + 1:])

  def __repr__(self):
    return (f"PmapSharding(sharding_spec=ShardingSpec(sharded_dim={self.sharded_dim}, "
            f"size={self._size}), device_ids={[d.id for d in self.devices.flat]}, "
            f"device_platform=CPU, device_shape={self.devices.shape})")


class Shard:
  """One device's piece of an ``Array``: ``device``, ``index`` (into the global array),
  ``replica_id`` and ``data`` (an ``Array`` of that piece)."""
  __slots__ = ("device", "index", "replica_id", "_data")

  def __init__(self, device, index, data, replica_id=0):
    self.device, self.index, self.replica_id, self._data = device, index, replica_id, data

  @property
  def data(self):
    d = self._data
    return d() if callable(d) else d

  def __repr__(self):
    return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id})"


# ----------------------------------------------------------------------- meshes


class AxisType(enum.Enum):
  Auto = enum.auto()
  Explicit = enum.auto()
  Manual = enum.auto()

  def __repr__(self):  # (JAX's: ``axis_types=(Auto, Explicit)``)
    return self.name


_mesh_ctx = threading.local()
_manual_axes: list = []  # the manual axes of the shard_maps being traced (innermost last)


def _normalize_axis_types(axis_names, axis_types, name):
  """``axis_types`` as a tuple (default all ``Auto``), with JAX's errors."""
  axis_types = (AxisType.Auto,) * len(axis_names) if axis_types is None else axis_types
  if not isinstance(axis_types, tuple):
    axis_types = (axis_types,)
  if not all(isinstance(a, AxisType) for a in axis_types):
    raise TypeError(f"axis_types passed to {name} must be of type `jax.sharding.AxisType`. Got "
                    f"{axis_types} of type {tuple(type(a) for a in axis_types)}")
  if len(axis_names) != len(axis_types):
    raise ValueError("Number of axis names should match the number of axis_types. Got "
                     f"axis_names={axis_names} and axis_types={axis_types}")
  if AxisType.Explicit in axis_types:  # sharding in types from now on (its rules' hook)
    from nbjax.interpreters import sharding_types
    sharding_types.install()
  return axis_types


class _MeshAxes:
  """What ``Mesh`` and ``AbstractMesh`` share: names, types, sizes."""
  shape = property(lambda s: collections.OrderedDict(zip(s.axis_names, s.axis_sizes)))
  shape_tuple = property(lambda s: tuple(zip(s.axis_names, s.axis_sizes)))
  empty = property(lambda s: s.size == 0)
  auto_axes = property(lambda s: s._axes_of(AxisType.Auto))
  explicit_axes = property(lambda s: s._axes_of(AxisType.Explicit))
  manual_axes = property(lambda s: s._axes_of(AxisType.Manual))

  def _axes_of(self, t):
    return tuple(n for n, a in zip(self.axis_names, self.axis_types) if a == t)

  def __str__(self):
    shape = ", ".join(f"'{k}': {v}" for k, v in self.shape.items())
    return f"{type(self).__name__}({shape}, axis_types={self.axis_types})"


_meshes: dict = {}


class Mesh(_MeshAxes, contextlib.ContextDecorator):
  """A named grid of devices: ``devices`` (an ndarray of them) with one name per axis and a
  type per axis (``AxisType``). Equal meshes are one object, as JAX's."""

  def __new__(cls, devices, axis_names, axis_types=None):
    devices = np.array(devices, dtype=object)
    if isinstance(axis_names, str):
      axis_names = (axis_names,)
    axis_names = tuple(axis_names)
    if any(n is None for n in axis_names):
      raise ValueError(f"Mesh axis names cannot be None. Got: {axis_names}")
    if devices.ndim != len(axis_names):
      raise ValueError("Mesh requires the ndim of its first argument (`devices`) to equal the "
                       "length of its second argument (`axis_names`), but got devices.ndim == "
                       f"{devices.ndim} and len(axis_names) == {len(axis_names)}.")
    if len(set(axis_names)) != len(axis_names):
      raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
    axis_types = _normalize_axis_types(axis_names, axis_types, "Mesh")
    flat = tuple(devices.flat)
    empty = not axis_names and flat[0] is None
    if not empty:
      ids = [d.id for d in flat]
      if len(set(ids)) != len(ids):
        raise ValueError(f"Mesh devices must be distinct, got device ids {ids}")
    key = (cls, flat, devices.shape, axis_names, axis_types)
    m = _meshes.get(key)
    if m is None:
      m = _meshes[key] = object.__new__(cls)
      m.devices, m.axis_names, m.axis_types = devices, axis_names, axis_types
      m.size = 0 if empty else int(devices.size)
    return m

  def __getnewargs_ex__(self):
    return (self.devices, self.axis_names, self.axis_types), {}

  axis_sizes = property(lambda s: tuple(s.devices.shape))
  _flat_devices_tuple = property(lambda s: tuple(s.devices.flat))
  device_ids = property(lambda s: np.vectorize(lambda d: d.id, otypes=[int])(s.devices))
  local_devices = property(lambda s: [d for d in s.devices.flat
                                      if d.process_index == _process_index()])
  is_multi_process = property(lambda s: any(d.process_index != _process_index()
                                            for d in s.devices.flat))
  local_mesh = property(lambda s: s)

  @property
  def abstract_mesh(self):
    """This mesh without its devices (``AbstractMesh``)."""
    if not self.axis_names:
      return AbstractMesh((), ())
    d = self.devices.flat[0]
    return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                        abstract_device=None if d is None else
                        AbstractDevice(d.device_kind, getattr(d, "num_cores", None), d.platform))

  def update(self, devices=None, axis_names=None, axis_types=None):
    return Mesh(self.devices if devices is None else devices,
                self.axis_names if axis_names is None else axis_names,
                self.axis_types if axis_types is None else axis_types)

  def _key(self):
    return (tuple(d.id for d in self.devices.flat) if self.size else (), self.devices.shape,
            self.axis_names, self.axis_types)

  def __eq__(self, other):
    return isinstance(other, Mesh) and self._key() == other._key()

  def __hash__(self):
    return hash(self._key())

  def __enter__(self):
    st = getattr(_mesh_ctx, "stack", None)
    if st is None:
      st = _mesh_ctx.stack = []
    st.append(self)
    return self

  def __exit__(self, *exc):
    _mesh_ctx.stack.pop()
    return False

  def __str__(self):
    return "Mesh()" if self.empty else super().__str__()

  def __repr__(self):
    if self.empty:
      return "Mesh(axis_sizes=(), axis_names=())"
    return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names!r}, "
            f"axis_types={self.axis_types})")


class AbstractDevice(collections.namedtuple("AbstractDevice",
                                             "device_kind num_cores platform")):
  """What an ``AbstractMesh`` keeps of its devices: their kind, cores and platform."""
  __slots__ = ()

  def __repr__(self):
    return (f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, "
            f"platform={self.platform})")


empty_concrete_mesh = Mesh(np.empty((), dtype=object), ())
_abstract_meshes: dict = {}


class AbstractMesh(_MeshAxes):
  """A mesh's axis sizes, names and types without its devices (JAX's); equal ones are one
  object."""

  def __new__(cls, axis_sizes, axis_names, axis_types=None, *, abstract_device=None):
    if isinstance(axis_names, str):
      axis_names = (axis_names,)
    axis_sizes, axis_names = tuple(axis_sizes), tuple(axis_names)
    axis_types = _normalize_axis_types(axis_names, axis_types, "AbstractMesh")
    key = (axis_sizes, axis_names, axis_types, abstract_device)
    m = _abstract_meshes.get(key)
    if m is None:
      m = _abstract_meshes[key] = object.__new__(cls)
      m.axis_sizes, m.axis_names, m.axis_types = axis_sizes, axis_names, axis_types
      m.abstract_device = abstract_device
    return m

  size = property(lambda s: math.prod(s.axis_sizes) if s.axis_sizes else 0)
  abstract_mesh = property(lambda s: s)

  def update(self, axis_sizes=None, axis_names=None, axis_types=None):
    return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                        self.axis_names if axis_names is None else axis_names,
                        self.axis_types if axis_types is None else axis_types,
                        abstract_device=self.abstract_device)

  def update_axis_types(self, name_to_type):
    return self.update(axis_types=tuple(name_to_type.get(n, a) for n, a in
                                        zip(self.axis_names, self.axis_types)))

  def __repr__(self):
    shape = ", ".join(f"'{n}': {v}" for n, v in self.shape_tuple) or "()"
    d = self.abstract_device
    dev = "" if d is None else f", device_kind={d[0]}, num_cores={d[1]}, platform={d[2]}"
    return f"AbstractMesh({shape}, axis_types={self.axis_types}{dev})"

  __str__ = __repr__


def _current_mesh():
  st = getattr(_mesh_ctx, "stack", None)
  return st[-1] if st else None


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
  """A ``Mesh`` of shape ``axis_shapes`` over ``devices`` (default: all of them, in id order)."""
  from nbjax import xla
  axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
  if not all(isinstance(k, (int, np.integer)) for k in axis_shapes):
    raise ValueError("`axis_shapes` passed to `make_mesh` should be a sequence of ints. Got "
                     f"{axis_shapes}")
  if len(axis_shapes) != len(axis_names):
    raise ValueError(f"Length of axis_shapes {axis_shapes} and axis_names {axis_names} should "
                     "match.")
  devs = list(xla.devices() if devices is None else devices)
  n = int(np.prod(axis_shapes, dtype=np.int64))
  if n > len(devs) or (devices is not None and n != len(devs)):
    raise ValueError(f"Number of devices {len(devs)} must be >= the product of mesh_shape "
                     f"{axis_shapes}" if devices is None else
                     f"Number of devices {len(devs)} must equal the product of mesh_shape "
                     f"{axis_shapes}")
  return Mesh(np.array(devs[:n], dtype=object).reshape(axis_shapes), axis_names, axis_types)


class set_mesh:
  """Make ``mesh`` the context mesh (``PartitionSpec``s name its axes): for the rest of the
  thread (``jax.set_mesh(mesh)``) or for a ``with`` block (``with jax.set_mesh(mesh):``);
  ``None`` clears it. Only outside ``jit``."""
  __slots__ = ("_prev",)

  def __init__(self, mesh):
    if mesh is not None and not isinstance(mesh, Mesh):
      raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
    from nbjax import core
    if not isinstance(core._ctx.trace, core.EvalTrace):  # (debug_nans' bottom trace is one)
      raise ValueError("`set_mesh` can only be used outside of `jax.jit`.")
    if mesh is not None and mesh.manual_axes:
      raise ValueError(f"mesh {mesh} contains manual axes which is not allowed when using "
                       "`jax.set_mesh`. Please use `jax.shard_map` to enter into `Manual` "
                       "mode instead.")
    self._prev = getattr(_mesh_ctx, "stack", None)
    _mesh_ctx.stack = [] if mesh is None else [*(self._prev or ()), mesh]

  def __enter__(self):
    pass

  def __exit__(self, *exc):
    _mesh_ctx.stack = self._prev
    return False


def get_mesh():
  """The context mesh ``set_mesh`` entered (an empty ``Mesh`` if none); only outside ``jit``."""
  from nbjax import core
  if not isinstance(core._ctx.trace, core.EvalTrace):
    raise ValueError("`get_mesh` can only be used outside of `jax.jit`. Maybe you want "
                     "`jax.sharding.get_abstract_mesh()`?")
  m = _current_mesh()
  return empty_concrete_mesh if m is None else m


def get_abstract_mesh():
  """The context mesh without its devices (an empty ``AbstractMesh`` if none)."""
  m = _current_mesh()
  return AbstractMesh((), ()) if m is None else m.abstract_mesh


def make_single_device_sharding(device, memory_kind=None):
  """A ``SingleDeviceSharding`` on ``device``."""
  return SingleDeviceSharding(device, memory_kind=memory_kind)


def canonicalize_sharding(sharding, api_name):
  """An ``out_sharding`` argument as JAX's: None (also for an empty mesh), a
  ``NamedSharding``, or a ``PartitionSpec`` over the context mesh."""
  if sharding is None or isinstance(sharding, NamedSharding) and sharding.mesh.empty:
    return None
  if not isinstance(sharding, (NamedSharding, PartitionSpec)):
    raise TypeError(f"`out_sharding` argument of {api_name} only supports instances of "
                    f"`NamedSharding` or `PartitionSpec`. Got {sharding} of type: "
                    f"{type(sharding)}")
  if isinstance(sharding, PartitionSpec):
    mesh = _current_mesh()
    if mesh is None or mesh.empty:
      raise ValueError("Using PartitionSpec when you are not under a mesh context is not "
                       "allowed. Please pass a NamedSharding instance or enter into a mesh "
                       f"context via `jax.set_mesh`. Got {sharding}")
    sharding = NamedSharding(mesh, sharding)
  return sharding


def device_sharding(out_sharding, device):
  """``(out_sharding, device)`` with a ``NamedSharding`` passed as ``device`` (JAX's creation
  functions take one there) moved to ``out_sharding`` when that is not given."""
  if out_sharding is None and isinstance(device, NamedSharding):
    return device, None
  return out_sharding, device


def apply_out_sharding(x, out_sharding, api_name, device=None):
  """``x`` placed as JAX's ``out_sharding`` argument of ``api_name`` says (None: as it is):
  ``device_put`` eagerly, a sharding constraint under a trace."""
  if device is not None and out_sharding is not None:
    raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got {device=} and "
                     f"{out_sharding=}")
  s = canonicalize_sharding(out_sharding, api_name)
  if s is None:
    return x
  from nbjax import core, lax
  from nbjax.api import device_put
  from nbjax.array import Array
  return (device_put(x, s) if isinstance(x, Array) and core._ctx.trace is core.eval_trace
          else lax.with_sharding_constraint(x, s))


def out_sharding_of(thunk, out_sharding, api_name):
  """``thunk()`` (a contraction) computed with ``out_sharding`` as its result's sharding
  (``apply_out_sharding``): under Explicit mesh axes its dot_generals take it as theirs."""
  s = canonicalize_sharding(out_sharding, api_name)
  if s is None:
    return thunk()
  from nbjax import core
  from nbjax.interpreters.sharding_types import forced
  with forced(s):
    x = thunk()
  if isinstance(x, core.Tracer) and getattr(x.aval, "_sh", None) is not None:
    return x  # (traced with sharding in types: its type says it already)
  return apply_out_sharding(x, s, api_name)


def reshard(xs, out_shardings):
  """``xs`` (a pytree of arrays) laid out as ``out_shardings`` (a prefix of it:
  ``NamedSharding``s, or ``PartitionSpec``s on the current mesh), eagerly or under jit."""
  from nbjax.interpreters.spmd import reshard as _reshard
  return _reshard(xs, out_shardings)


def _axes_mesh(axes, axis_type, name):
  """The context mesh with ``axes`` (default: all) made ``axis_type`` (None if no mesh)."""
  m = _current_mesh()
  if m is None or m.empty:
    return None
  axes = m.axis_names if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
  for a in axes:
    if a not in m.axis_names:
      raise ValueError(f"{name}: axis {a!r} is not in the context mesh's axes {m.axis_names}")
  return m.update(axis_types=tuple(axis_type if n in axes else t
                                   for n, t in zip(m.axis_names, m.axis_types)))


def _with_mesh(mesh, fun, args, kwargs):
  st = getattr(_mesh_ctx, "stack", None)
  _mesh_ctx.stack = [*(st or ()), mesh]
  try:
    return fun(*args, **kwargs)
  finally:
    _mesh_ctx.stack = st


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
  """``f`` run with the context mesh's ``axes`` (default: all) ``Auto``, its result laid out
  as ``out_sharding`` (given here or as a keyword of the call)."""
  if f is None:
    return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

  @functools.wraps(f)
  def wrapped(*args, **kwargs):
    out_s = out_sharding
    if out_s is None:
      if "out_sharding" not in kwargs:
        raise TypeError("Missing required keyword argument: 'out_sharding'")
      out_s = kwargs.pop("out_sharding")
    mesh = _axes_mesh(axes, AxisType.Auto, "auto_axes")
    if mesh is None:
      return f(*args, **kwargs)
    return reshard(_with_mesh(mesh, f, args, kwargs), out_s)
  return wrapped


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
  """``f`` run with the context mesh's ``axes`` (default: all) ``Explicit``, its arguments
  laid out as ``in_sharding`` (given here or as a keyword of the call) first."""
  if f is None:
    return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

  @functools.wraps(f)
  def wrapped(*args, **kwargs):
    in_s = in_sharding
    if in_s is None:
      if "in_sharding" not in kwargs:
        raise TypeError("Missing required keyword argument: 'in_sharding'")
      in_s = kwargs.pop("in_sharding")
    mesh = _axes_mesh(axes, AxisType.Explicit, "explicit_axes")
    if mesh is None:
      raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to enter "
                       "into a mesh context when using `explicit_axes` API.")
    return _with_mesh(mesh, f, reshard(args, in_s), kwargs)
  return wrapped


class _Unconstrained:
  def __repr__(self):
    return "UNCONSTRAINED"


def _canonical_partition(p):
  """A PartitionSpec entry as JAX keeps it: ``()`` is None, a 1-tuple its name, a list a
  tuple; JAX's errors for nested tuples and other values."""
  if isinstance(p, (tuple, list)):
    for q in p:
      if isinstance(q, (tuple, list)):
        raise ValueError("A tuple inside PartitionSpec cannot contain a nested tuple. Got "
                         f"partition: {p} and the nested tuple: {q}")
      if not isinstance(q, str):
        raise TypeError(f"PartitionSpec entries must be None, an axis name, or a tuple of "
                        f"axis names, got {p!r}")
    return None if not p else p[0] if len(p) == 1 else tuple(p)
  if not (p is None or isinstance(p, str) or p is PartitionSpec.UNCONSTRAINED):
    raise TypeError(f"PartitionSpec entries must be None, an axis name, or a tuple of axis "
                    f"names, got {p!r}")
  return p


_interned: dict = {}


def _axis_set(v, name):
  if isinstance(v, frozenset):
    return v
  if not isinstance(v, set):
    raise TypeError(f"{name} argument of PartitionSpec should of type `frozenset` or `set`. "
                    f"Got type {v}")
  return frozenset(v)


def _check_reduced(partitions, unreduced, reduced):
  """JAX's checks of a PartitionSpec's ``unreduced``/``reduced`` axes."""
  for v, name in ((unreduced, "unreduced"), (reduced, "reduced")):
    if None in v:
      raise ValueError(f"{name} cannot contain None. All elements in {name} should refer to "
                       "the mesh axes.")
  if unreduced & reduced:
    raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. "
                     f"Got unreduced: {unreduced} and reduced: {reduced}")
  for p in partitions:
    for a in p if isinstance(p, tuple) else (p,):
      for v, name in ((unreduced, "unreduced"), (reduced, "reduced")):
        if a in v:
          raise ValueError(f"partitions cannot overlap with {name} axes passed to "
                           f"PartitionSpec. Got partitions: {partitions} and {name} axes: {v}")


class PartitionSpec(tuple):
  """How each array dimension is split over mesh axes: an entry is ``None`` (not split), an
  axis name, or a tuple of names (split over their product, major first)."""
  UNCONSTRAINED = _Unconstrained()

  unreduced = reduced = frozenset()

  def __new__(cls, *partitions, unreduced=frozenset(), reduced=frozenset()):
    key = tuple(_canonical_partition(p) for p in partitions)
    if unreduced or reduced:
      unreduced, reduced = (_axis_set(unreduced, "unreduced"), _axis_set(reduced, "reduced"))
      _check_reduced(key, unreduced, reduced)
      ikey = (key, unreduced, reduced)
    else:
      ikey = key
    spec = _interned.get(ikey)
    if spec is None:  # as JAX's: equal specs are one object (P((), 'x') is P(None, 'x'))
      spec = _interned[ikey] = tuple.__new__(cls, key)
      if ikey is not key:
        spec.unreduced, spec.reduced = unreduced, reduced
    return spec

  def __init_subclass__(cls, **kwargs):
    raise TypeError("Subclassing `jax.P` is prohibited.")

  partitions = property(tuple)

  def __eq__(self, other):
    return (tuple.__eq__(self, other) is True and
            getattr(other, "unreduced", frozenset()) == self.unreduced and
            getattr(other, "reduced", frozenset()) == self.reduced)

  def __ne__(self, other):
    return not self == other

  __hash__ = tuple.__hash__

  def __add__(self, other):
    if isinstance(other, PartitionSpec):
      return PartitionSpec(*self, *other, unreduced={*self.unreduced, *other.unreduced},
                           reduced={*self.reduced, *other.reduced})
    if not isinstance(other, tuple):
      return NotImplemented
    self._check_tuple_operand(other, "__add__")
    return PartitionSpec(*self, *other)

  def __radd__(self, other):
    if not isinstance(other, tuple):
      return NotImplemented
    self._check_tuple_operand(other, "__radd__")
    return PartitionSpec(*other, *self)

  def _check_tuple_operand(self, other, op):
    for v, name in ((self.unreduced, "unreduced"), (self.reduced, "reduced")):
      if v:
        raise TypeError(f"other {other} cannot be of instance `tuple` when self {self} has "
                        f"{name} in `{op}` of PartitionSpec.")

  def update(self, partitions=None, unreduced=None, reduced=None):
    return PartitionSpec(*(self if partitions is None else partitions),
                         unreduced=self.unreduced if unreduced is None else unreduced,
                         reduced=self.reduced if reduced is None else reduced)

  def __repr__(self):
    pr = ", ".join(map(repr, self)) + ("," if len(self) == 1 else "")
    if not self.unreduced and not self.reduced:
      return f"P({pr})"
    ur = ", ".join(f"{k}={set(v)!r}" for k, v in (("unreduced", self.unreduced),
                                                  ("reduced", self.reduced)) if v)
    return f"P({pr} {ur})" if pr.endswith(",") else f"P({pr}, {ur})" if pr else f"P({ur})"

  def __reduce__(self):
    if self.unreduced or self.reduced:
      return (functools.partial(PartitionSpec, unreduced=self.unreduced, reduced=self.reduced),
              tuple(self))
    return (PartitionSpec, tuple(self))

  def _normalized(self, ndim):
    """Entries padded with ``None`` to ``ndim``, each a tuple of names."""
    out = []
    for p in tuple(self) + (None,) * (ndim - len(self)):
      out.append(() if p is None or p is PartitionSpec.UNCONSTRAINED else
                 (p,) if isinstance(p, str) else tuple(p))
    return out


P = PartitionSpec


class NamedSharding(Sharding):
  """A global array split over ``mesh`` as ``spec`` says; pieces on devices that differ only
  along mesh axes the spec does not name hold the same data (replicas)."""
  _spmd = True

  def __init__(self, mesh, spec=PartitionSpec(), *, memory_kind=None):
    if not isinstance(mesh, (Mesh, AbstractMesh)):
      raise TypeError(f"NamedSharding's mesh must be a Mesh or an AbstractMesh, got {mesh!r}")
    if spec is None:  # (JAX's binding refuses it)
      raise TypeError("NamedSharding: incompatible function arguments: spec must be a "
                      "PartitionSpec (Unexpected None; did you mean P()?)")
    if not isinstance(spec, PartitionSpec):
      if not isinstance(spec, tuple):
        raise TypeError("spec of NamedSharding must be a PartitionSpec, got "
                        f"{spec!r} of type {type(spec)}")
      spec = PartitionSpec(*spec)
    self.mesh, self.spec = mesh, spec
    used = []
    for p in spec._normalized(len(spec)):
      for a in p:
        if a not in mesh.axis_names:
          raise ValueError(f"Resource axis: {a} of {spec!r} is not found in mesh: "
                           f"{tuple(mesh.axis_names)}.")
        if a in used:
          raise ValueError(f"A single NamedSharding spec specification can map every mesh "
                           f"axis to at most one positional dimension, but {spec!r} has "
                           f"duplicate entries for `{a}`")
        used.append(a)
    for v, name in ((spec.unreduced, "Unreduced"), (spec.reduced, "Reduced")):
      for u in v:
        if u not in mesh.axis_names:
          raise ValueError(f"{name} axes {u} is not found in mesh.axis_names="
                           f"{mesh.axis_names!r}. Got pspec={spec!r}")
        if mesh.axis_types[mesh.axis_names.index(u)] != AxisType.Explicit:
          raise ValueError(f"{name} axes can only refer to mesh axes that is of type "
                           f"`Explicit`. Got {name.lower()} axes: {v} and mesh: {mesh}")
    if isinstance(mesh, AbstractMesh):  # (no devices: any memory kind XLA knows, as given)
      if memory_kind not in (None, "device", "pinned_host", "unpinned_host"):
        raise ValueError(f"Got invalid memory kind: {memory_kind}. Valid memory kinds are: "
                         "device, pinned_host, unpinned_host")
      self.memory_kind = memory_kind
    elif memory_kind is not None:
      _check_memory_kind(memory_kind, mesh.devices.flat[0])

  _device_assignment = property(lambda s: tuple(s.mesh.devices.flat))
  memory_kind = "device"

  @property
  def is_fully_replicated(self):
    sz = self.mesh.shape
    return all(sz[a] == 1 for p in self.spec._normalized(len(self.spec)) for a in p)

  def _key(self):
    s = list(self.spec._normalized(len(self.spec)))
    while s and s[-1] == ():
      s.pop()
    return (self.mesh, tuple(s), self.memory_kind)

  def __eq__(self, other):
    return isinstance(other, NamedSharding) and self._key() == other._key()

  def __hash__(self):
    return hash(self._key())

  def __repr__(self):
    mem = "" if self.memory_kind is None else f", memory_kind={self.memory_kind}"
    return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}{mem})"

  def is_equivalent_to(self, other, ndim):
    if isinstance(self.mesh, AbstractMesh) and isinstance(getattr(other, "mesh", None),
                                                          AbstractMesh):
      return (self.memory_kind == other.memory_kind and
              self._hlo_key(ndim) == other._hlo_key(ndim))
    return super().is_equivalent_to(other, ndim)

  def with_spec(self, spec):
    return NamedSharding(self.mesh, spec, memory_kind=self.memory_kind)

  def check_compatible_aval(self, aval_shape):
    """JAX's ValueError when the spec names more axes than ``aval_shape`` has."""
    if len(aval_shape) < len(self.spec):
      extra = " For scalars the PartitionSpec should be P()" if not len(aval_shape) else ""
      raise ValueError(f"Sharding {self!r} is only valid for values of rank at least "
                       f"{len(self.spec)}, but was applied to a value of rank "
                       f"{len(aval_shape)}.{extra}")

  def check(self, shape, what="device_put"):
    """Raise JAX's errors for a spec that does not fit ``shape``."""
    if len(self.spec) > len(shape):
      raise ValueError(f"One of {what} is incompatible with its sharding annotation {self!r}: "
                       f"Sharding {self!r} is only valid for values of rank at least "
                       f"{len(self.spec)}, but was applied to a value of rank {len(shape)}.")
    sz = self.mesh.shape
    ks = [int(np.prod([sz[a] for a in p], dtype=np.int64))
          for p in self.spec._normalized(len(shape))]
    for i, (d, k) in enumerate(zip(shape, ks)):
      if d % k:
        raise IndivisibleError(
            f"Sharding {self!r} implies that array axis {i} is partitioned {k} times, but the "
            f"dimension size is {d} (full shape: {tuple(shape)}, per-dimension tiling "
            f"factors: {ks} should evenly divide the shape)")

  def shard_shape(self, global_shape):
    self.check(global_shape)
    sz = self.mesh.shape
    return tuple(d // int(np.prod([sz[a] for a in p], dtype=np.int64))
                 for d, p in zip(global_shape, self.spec._normalized(len(global_shape))))

  def _tiles(self, ndim):
    """(tiles per dimension, logical device ids as an ndarray ``tiles + [replicas]``)."""
    names, sizes = self.mesh.axis_names, self.mesh.axis_sizes
    spec = self.spec._normalized(ndim)
    order = [names.index(a) for p in spec for a in p]
    rest = [i for i in range(len(names)) if i not in order]
    iota = np.arange(math.prod(sizes)).reshape(sizes).transpose(order + rest)
    tiles = [int(np.prod([sizes[names.index(a)] for a in p], dtype=np.int64)) for p in spec]
    return tiles, iota.reshape(tiles + [-1])

  def devices_indices_map(self, global_shape):
    shard = self.shard_shape(global_shape)
    tiles, ids = self._tiles(len(global_shape))
    devs = self._device_assignment
    out = {}
    for pos in np.ndindex(*ids.shape):
      idx = tuple(slice(None) if t == 1 else slice(p * s, (p + 1) * s)
                  for p, s, t in zip(pos, shard, tiles))
      out[devs[ids[pos]]] = idx
    return {d: out[d] for d in devs}

  def _replica_ids(self, ndim):
    """Per device (mesh order): its replica number among the devices holding its piece."""
    _, ids = self._tiles(ndim)
    r = np.empty(self.mesh.size, int)
    flat = ids.reshape(-1, ids.shape[-1])
    for row in flat:
      r[row] = np.arange(len(row))
    return r

  def _to_hlo_string(self, ndim):
    tiles, ids = self._tiles(ndim)
    rep = ids.shape[-1]
    if all(t == 1 for t in tiles):
      return "{replicated}"
    dims = tiles + ([rep] if rep > 1 else [])
    s = "{devices=[%s]%s" % (",".join(map(str, dims)), ",".join(map(str, ids.flat)))
    return s + (" last_tile_dim_replicate}" if rep > 1 else "}")


class GSPMDSharding(Sharding):
  """A sharding XLA chose (an ``HloSharding``, or the ``OpSharding`` proto of one, over
  ``devices``), for outputs of sharded jit whose layout matches no ``PartitionSpec`` of the
  mesh."""
  _spmd = True

  def __init__(self, devices, op_sharding, *, memory_kind=None):
    xc = _xc()
    self._devices = tuple(devices)
    self._hlo = (xc.HloSharding.from_proto(op_sharding)
                 if isinstance(op_sharding, xc.OpSharding) else op_sharding)
    if memory_kind is not None:
      _check_memory_kind(memory_kind, self._devices[0])

  @classmethod
  def get_replicated(cls, device_assignment, *, memory_kind=None):
    return cls(device_assignment, _xc().HloSharding.replicate(), memory_kind=memory_kind)

  _device_assignment = property(lambda s: s._devices)
  _hlo_sharding = property(lambda s: s._hlo)
  # (JAX's: a MAXIMAL sharding, one device's value, counts as replicated)
  is_fully_replicated = property(lambda s: len(s._devices) == 1 or s._hlo.is_replicated()
                                 or s._hlo.is_maximal())

  def _to_hlo_string(self, ndim):
    return str(self._hlo)

  def _to_xla_hlo_sharding(self, num_dimensions):
    return self._hlo

  def with_memory_kind(self, kind):
    return GSPMDSharding(self._devices, self._hlo, memory_kind=kind)

  def devices_indices_map(self, global_shape):
    h, n = self._hlo, len(self._devices)
    if self.is_fully_replicated:
      return {d: (slice(None),) * len(global_shape) for d in self._devices}
    dims = list(h.tile_assignment_dimensions())
    ids = np.array(h.tile_assignment_devices()).reshape(dims)
    nd = len(global_shape)
    out = {}
    for pos in np.ndindex(*dims):
      idx = []
      for k in range(nd):
        s = -(-global_shape[k] // dims[k])
        idx.append(slice(None) if dims[k] == 1 else slice(pos[k] * s, (pos[k] + 1) * s))
      out[self._devices[ids[pos]]] = tuple(idx)
    return {d: out[d] for d in self._devices}

  def shard_shape(self, global_shape):
    idx = next(iter(self.devices_indices_map(global_shape).values()))
    return tuple(len(range(*i.indices(d))) for i, d in zip(idx, global_shape))

  def _replica_ids(self, ndim):
    return np.zeros(len(self._devices), int)

  def _hlo_eq_key(self):
    return "{replicated}" if self.is_fully_replicated else str(self._hlo)

  def __eq__(self, other):
    return (isinstance(other, GSPMDSharding) and self._devices == other._devices and
            self._hlo_eq_key() == other._hlo_eq_key())

  def __hash__(self):
    return hash((self._devices, self._hlo_eq_key()))

  def __repr__(self):
    return f"GSPMDSharding({self._hlo!r}, memory_kind=device)"


def _abstractify_sharding(aval, sharding):
  """``core.abstractify``'s hook: a ``ShapeDtypeStruct``'s mesh sharding in its aval's type."""
  from nbjax.interpreters.sharding_types import aval_sharding, with_sharding
  try:
    return with_sharding(aval, aval_sharding(sharding, aval.ndim))
  except (TypeError, ValueError):  # (a PartitionSpec without a context mesh)
    return aval


from nbjax import core as _core  # noqa: E402  (core never imports this module at its top)
_core.abstractify_sharding = _abstractify_sharding
