"""``nbjax.Array``: the concrete, immutable array every eager computation returns.

Pipeline position: eager kernels (numba/NumPy) and XLA executables produce host buffers;
``Array`` wraps one (a C-contiguous NumPy array that nbjax never mutates) with its
``weak_type`` flag. Operators (``+``, ``@``, ``[]``, ``.at``, methods) are attached by
``nbjax.numpy`` when it is imported, shared with ``core.Tracer``, as JAX does. No one else
can write to the buffer: ``Array(x)`` copies a caller's array, eager entry points copy an
output that would be a view of one (``own``), and the NumPy and DLPack exports are
zero-copy views that cannot be made writeable.
"""
from __future__ import annotations

import abc
import enum
import math
import operator
import sys
import warnings
import weakref

import numpy as np

from nbjax import core, dtypes


_NON_ADDRESSABLE = (
    "Fetching value for `jax.Array` that spans non-addressable (non process local) devices "
    "is not possible. You can use `jax.experimental.multihost_utils.process_allgather` to "
    "print the global array or use `.addressable_shards` method of jax.Array to inspect the "
    "addressable (process local) shards.")


class DLDeviceType(enum.IntEnum):
  """DLPack device types (``Array.__dlpack_device__()[0]``), as JAX's."""
  kDLCPU = 1
  kDLCUDA = 2
  kDLCUDAHost = 3
  kDLROCM = 10


_SCALAR_CONVERSION, _INDEX_CONVERSION = core.SCALAR_CONVERSION, core.INDEX_CONVERSION

_REMOVED = {
    "device_buffer": "arr.device_buffer has been deprecated. Use arr.addressable_data(0)",
    "device_buffers": "arr.device_buffers has been deprecated. Use [x.data for x in "
                      "arr.addressable_shards]"}


def _gather(sh, bufs, shape, dtype):
  """The host value of a sharded Array from its per-device buffers (in ``sh``'s device
  order): a read-only view of one buffer when fully replicated, else the shards copied
  into place."""
  from nbjax.xla import _to_numpy
  if sh.is_fully_replicated:
    return _to_numpy(bufs[0])
  v = np.empty(shape, dtype)
  idx = sh.devices_indices_map(shape)
  for d, b in zip(sh._device_assignment, bufs):
    i = idx[d]
    v[i] = _to_numpy(b).reshape(np.shape(v[i]))  # a pmap piece (1, ...) lacks its index
  v.flags.writeable = False
  return v


_DELETED = {}  # id -> (weak reference, 'float32[3]', aval) of the arrays ``delete()`` released


class Array(metaclass=abc.ABCMeta):
  """An immutable n-dimensional array on the host (CPU). Tracers are registered as virtual
  subclasses, so ``isinstance(tracer, nbjax.Array)`` holds, as for ``jax.Array``;
  ``type(x) is Array`` is the concrete check."""
  # _buf: the XLA device buffer holding the same data as _value (None until there is one):
  # an executable's output (_value is a view of it) or the put of _value cached by jit. It is
  # set by every maker, so the hot paths test it without raising (a failed slot read costs
  # ~0.4 us); one left unset reads as None through __getattr__ (correct, only slower).
  # _pmap: (PmapSharding, per-device XLA buffers) for a pmap output; (NamedSharding or
  # GSPMDSharding, this process's per-device buffers, the jaxlib global array) for a sharded
  # one (sharded jit's fast path: buffers None and _value unset until read, see _gather);
  # else unset (None). An array spread over several processes whose pieces here do not
  # hold all of it has no _value (reading it raises JAX's RuntimeError).
  # _expr: the pending expression of a lazy elementwise result (``nbjax.fusion.Lazy``, which
  # materialises it on the first read of _value); unset (None) on every other array.
  # _committed: True for an array placed on a device explicitly (device_put with a device or
  # sharding, as JAX's), or computed from such arrays (computation follows data,
  # ``core.placement``); unset: whether it is sharded (jnp.array and eager results are not).
  # _dev: the device a committed single-device array is on (its data is on the host, as
  # every array's); unset: the default device.
  __slots__ = ("_value", "_weak", "_buf", "_pmap", "_expr", "_committed", "_dev",
               "__weakref__", "__dict__")  # (attributes may be set on arrays, as on JAX's)
  __array_priority__ = 100

  def __init__(self, value, weak_type=False):
    mine = type(value) is Array
    v = value._value if mine else np.asarray(value)
    d = dtypes.canonicalize_dtype(v.dtype)
    if d != v.dtype or not v.flags.c_contiguous or not (mine or isinstance(value, _FRESH)):
      # own a copy: any other array-like (a NumPy array, even a read-only one, a view, a
      # subclass, a buffer) is memory its holder may write to later
      v = np.array(v, dtype=d, order="C")
    self._value = v
    self._weak = weak_type
    self._buf = None

  def __getattr__(self, name):
    # Reached only for an unset slot. A jit output starts with its XLA buffer alone (the call
    # returned while XLA ran): its host view is made here on first read, waiting for XLA.
    if name == "_value":
      if _DELETED and self.is_deleted():
        raise RuntimeError(f"Array has been deleted with shape={_DELETED[id(self)][1]}.")
      buf = self._buf
      if buf is not None:
        v = self._value = np.asarray(memoryview(buf))
        return v
      p = self._pmap
      if p is not None and p[0]._spmd and not p[0].is_fully_addressable:
        raise RuntimeError(_NON_ADDRESSABLE)
      if p is not None and len(p) > 2 and p[2] is not None:
        g = p[2]
        v = self._value = _gather(p[0], p[1] or g._arrays, g.aval.shape, g.aval.dtype)
        return v
    elif name == "_buf" or name == "_pmap" or name == "_expr" or name == "_dev":
      return None  # unset: no buffer / not pmap's / not lazy / on the default device
    elif name == "_committed":
      return self._pmap is not None
    elif name in _REMOVED:
      raise AttributeError(_REMOVED[name])
    elif name == "__cuda_array_interface__":
      raise AttributeError("__cuda_array_interface__ is only defined for GPU buffers.")
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

  def block_until_ready(self):
    buf = self._buf
    if buf is not None:  # wait on XLA (a pending jit output), make no host view
      buf.block_until_ready()
    elif _DELETED and self.is_deleted():
      from nbjax import xla
      raise xla.ensure_jaxlib()._jax.JaxRuntimeError(
          "INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer")
    return self

  def is_ready(self):
    """Whether the data is computed (a pending jit output: whether XLA has finished)."""
    buf = self._buf
    return True if buf is None or not hasattr(buf, "is_ready") else bool(buf.is_ready())

  @property
  def format(self):
    """The array's ``Format``: its layout (row-major, as every nbjax array's) and sharding."""
    from nbjax.experimental.layout import Format, Layout
    return Format(Layout(tuple(range(self.ndim)), ()), self.sharding)

  def is_deleted(self):
    e = _DELETED.get(id(self))
    return e is not None and e[0]() is self

  def _global_aval(self):
    """The aval of an array without host data here: one spanning other processes, or one
    ``delete()`` released (its shape and dtype stay readable, as JAX's)."""
    p = self._pmap
    return p[2].aval if p is not None else _DELETED[id(self)][2]

  def delete(self):
    """Release the data: reading it afterwards raises JAX's ``RuntimeError`` ('Array has
    been deleted')."""
    if self.is_deleted():
      return
    aval = core.ShapedArray(self.shape, self.dtype)
    desc = f"{self.dtype.name}{list(self.shape)}".replace(" ", "")
    i = id(self)
    _DELETED[i] = (weakref.ref(self, lambda _, i=i: _DELETED.pop(i, None)), desc, aval)
    self._buf = self._pmap = None
    try:
      del self._value
    except AttributeError:
      pass

  def platform(self):
    return "cpu"

  def copy_to_host_async(self):
    """Nothing to do: the data lives on the host (a pending jit output is read on demand)."""

  def unsafe_buffer_pointer(self):
    """The address of the (host) buffer's first element."""
    if self._pmap is not None and len(self.sharding.device_set) > 1:
      raise ValueError("unsafe_buffer_pointer() is supported only for unsharded arrays.")
    return self._value.ctypes.data

  def on_device_size_in_bytes(self):
    """Bytes held over all devices (a sharded array: its shard's size on each device)."""
    p = self._pmap
    if p is None:
      return self.nbytes
    sh = p[0]
    return math.prod(sh.shard_shape(self.shape)) * self.itemsize * len(sh.device_set)

  @property
  def aval(self):
    try:
      v = self._value
    except RuntimeError:  # spans other processes: the global array's shape and dtype
      v = self._global_aval()
    return core.ShapedArray(v.shape, v.dtype, self._weak)  # (sharding_types.install: typed)

  @property
  def shape(self):
    try:
      return self._value.shape
    except RuntimeError:
      return self._global_aval().shape

  @property
  def dtype(self):
    try:
      return self._value.dtype
    except RuntimeError:
      return self._global_aval().dtype

  @property
  def ndim(self):
    try:
      return self._value.ndim
    except RuntimeError:
      return len(self._global_aval().shape)

  @property
  def size(self):
    try:
      return self._value.size
    except RuntimeError:
      return math.prod(self._global_aval().shape)

  @property
  def itemsize(self):
    try:
      return self._value.itemsize
    except RuntimeError:
      return self._global_aval().dtype.itemsize

  @property
  def nbytes(self):
    try:
      return self._value.nbytes
    except RuntimeError:
      return self.size * self.itemsize
  weak_type = property(lambda self: self._weak)
  @property
  def sharding(self):
    """``SingleDeviceSharding`` on the first CPU device (or the device the array is committed
    to), or a pmap output's ``PmapSharding``, or a sharded array's ``NamedSharding``."""
    p = self._pmap
    if p is not None:
      return p[0]
    d = self._dev
    return _single_sharding() if d is None else _device_sharding(d)

  def devices(self):
    return set(self.sharding.device_set)

  @property
  def addressable_shards(self):
    """The per-device pieces (``nbjax.sharding.Shard``): one for an ordinary array; a pmap
    output's per-device XLA buffers."""
    from nbjax.sharding import Shard
    p = self._pmap
    if p is None:
      return [Shard(self.sharding._device, (slice(None),) * self.ndim, self)]
    sh, bufs = p[0], p[1]
    if bufs is None:
      bufs = p[2]._arrays
    if sh._spmd:  # a NamedSharding / GSPMDSharding (device_put, sharded jit, shard_map)
      return [s for s in self._spmd_shards() if s._data is not None]
    shape = sh.shard_shape(self.shape)
    repl = sh.sharded_dim is None
    return [Shard(d, sh._index(i, self.ndim),
                  lambda b=b: _wrap(np.asarray(memoryview(b)).reshape(shape), self._weak),
                  i if repl else 0) for i, (d, b) in enumerate(zip(sh.devices.flat, bufs))]

  def _spmd_shards(self):
    """Every device's Shard of a sharded array (``data`` None for another process's)."""
    sh, bufs, g = self._pmap
    bufs = bufs if bufs is not None else g._arrays  # (a fast-path output: its global array's)
    idx, reps = sh.devices_indices_map(self.shape), sh._replica_ids(self.ndim)
    from nbjax.sharding import Shard
    from nbjax.xla import _to_numpy
    shape, weak = sh.shard_shape(self.shape), self._weak
    devs = sh._device_assignment
    mine = iter(bufs)
    local = set(devs) if sh.is_fully_addressable else sh.addressable_devices
    return [Shard(d, idx[d], (lambda b=next(mine): _wrap(_to_numpy(b).reshape(shape), weak))
                  if d in local else None, int(r))
            for d, r in zip(devs, reps)]

  @property
  def global_shards(self):
    """Every device's piece; ``data`` is None for the pieces other processes hold."""
    p = self._pmap
    if p is not None and p[0]._spmd:
      return self._spmd_shards()
    return self.addressable_shards

  @property
  def is_fully_addressable(self):
    return self.sharding.is_fully_addressable

  def addressable_data(self, index):
    """The data of ``addressable_shards[index]``."""
    return self.addressable_shards[index].data

  @property
  def is_fully_replicated(self):
    return self.sharding.is_fully_replicated

  @property
  def committed(self):
    return self._committed

  def _placed(self, device=None):
    """This array's data as an Array committed to ``device`` (``device_put`` with a device;
    None: the device it is on), as JAX's; ``self`` itself stays as it is."""
    if device is None:
      if self._committed:
        return self
      device = self._dev
    elif self._pmap is None and self._committed and self._dev == _default_device(device):
      return self  # (a sharded array: gathered onto ``device``)
    a = _wrap(self._value, self._weak)
    a._buf, a._committed = self._buf, True
    a._dev = _default_device(device)
    core.mark_placed(a)
    if a._dev is not None:  # eager results and jit outputs now follow committed inputs (a
      core.enable_placement()  # commit to the default device changes no placement: no cost)
    return a

  @property
  def _arrays(self):
    """The per-device pieces as single-device Arrays, each committed to its device (JAX's
    ``ArrayImpl._arrays``); None once deleted."""
    if _DELETED and self.is_deleted():
      return None
    return [s.data._placed(s.device) for s in self.addressable_shards]

  @property
  def _npy_value(self):
    """The host value if it has been made (JAX's cache of ``_value``), None before that (a
    sharded jit output not yet read) and once deleted."""
    try:
      return _VALUE_SLOT.__get__(self)
    except AttributeError:
      return None

  def _check_if_deleted(self):
    if _DELETED and self.is_deleted():
      raise RuntimeError(f"Array has been deleted with shape={_DELETED[id(self)][1]}.")

  def _fully_replicated_shard(self):
    """A fully replicated array's first piece, a single-device array committed to its
    device."""
    s = self.addressable_shards[0]
    return s.data._placed(s.device)

  def __len__(self):
    if not self._value.ndim:
      raise TypeError("len() of unsized object")
    return self._value.shape[0]

  def __iter__(self):
    if not self._value.ndim:
      raise TypeError("iteration over a 0-d array")
    p = self._pmap  # JAX's: a replicated (or one-device) sharded array's rows are placed as
    if p is not None and p[0]._spmd and (  # XLA places x[i]; a split array's are host rows
        p[0].is_fully_replicated or len(p[0]._device_assignment) == 1):
      return (self[i] for i in range(len(self)))
    w = self._weak
    return (_wrap(np.asarray(v), w) for v in self._value)  # rows of an immutable buffer

  # NumPy interop ---------------------------------------------------------------
  # Exports are zero-copy and read-only for good: the NumPy array handed out is imported from
  # a read-only DLPack capsule (or, for dtypes DLPack lacks, a read-only memoryview), so no
  # array in its base chain can be made writeable again (NumPy refuses `flags.writeable =
  # True`). The export references the buffer, so the pool never reuses it while it lives.
  def __array__(self, dtype=None, copy=None):
    if copy:
      return np.array(self._value, dtype=dtype)
    v = _readonly(self._value)
    if dtype is None or np.dtype(dtype) == v.dtype:
      return v
    return np.asarray(v, dtype=dtype, copy=copy)  # copy=False: NumPy's ValueError

  def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    v = self._value
    if max_version is None or max_version[0] < 1:
      # an unversioned (pre-1.0) consumer cannot be told the data is read-only: it gets a copy
      if copy is False:
        raise BufferError("nbjax.Array is immutable: a zero-copy DLPack export is marked "
                          "read-only, which needs a consumer of DLPack >= 1.0 (max_version)")
      return np.array(v).__dlpack__(stream=stream)
    ro = v.view()
    ro.flags.writeable = False  # DLPack 1.0 exports it with the read-only flag
    return ro.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

  @property
  def _buffer_export(self):
    """What ``memoryview(x)`` exports (see ``_enable_buffer_protocol``): a read-only view of
    the host buffer; JAX's BufferError for dtypes the buffer protocol lacks, and once
    deleted."""
    if _DELETED and self.is_deleted():
      raise BufferError("INVALID_ARGUMENT: Array is null")
    v = self._value.view()
    v.flags.writeable = False
    if v.dtype.kind == "V" or v.dtype.type.__module__.startswith("ml_dtypes"):
      raise BufferError(f"INVALID_ARGUMENT: Buffers of type {_xla_type_name(v.dtype)} are not "
                        "supported by the Python buffer protocol.")
    return v

  def __dlpack_device__(self):
    return DLDeviceType.kDLCPU, 0

  @property
  def __numpy_dtype__(self):  # (NumPy >= 2.4's protocol for np.dtype(x), dtype=x)
    warnings.warn("Implicit conversion of an array to a dtype is deprecated; rather than "
                  "dtype=arr use dtype=arr.dtype. In the future this will result in an error.",
                  DeprecationWarning, stacklevel=2)
    return self.dtype

  def tolist(self):
    return self._value.tolist()

  def tobytes(self, order="C"):
    return self._value.tobytes(order)

  def item(self, *args):
    return self._value.item(*args)

  def __bool__(self):
    return bool(self._value)

  def __int__(self):
    v = self._value
    if v.ndim:
      raise TypeError(_SCALAR_CONVERSION.format(v.ndim))
    return int(v)

  def __float__(self):
    v = self._value
    if v.ndim:
      raise TypeError(_SCALAR_CONVERSION.format(v.ndim))
    return float(v)

  def __complex__(self):
    v = self._value
    if v.ndim:
      raise TypeError(_SCALAR_CONVERSION.format(v.ndim))
    return complex(v)

  def __index__(self):
    v = self._value
    if v.ndim or v.dtype.kind not in "iu":  # (not bool, as JAX)
      raise TypeError(_INDEX_CONVERSION)
    return operator.index(v.item())

  __hash__ = None  # unhashable, as jax.Array (not even collections.abc.Hashable)

  def __setitem__(self, idx, val):
    raise TypeError(core.IMMUTABLE)

  def __reduce__(self):
    return (Array, (np.array(self._value), self._weak))

  def copy(self):
    return _wrap(self._value.copy(), self._weak)

  def __copy__(self):
    # a new Array on a new buffer, as JAX's (copy.copy(x) outlives x.delete()); a sharded
    # one keeps itself
    if self._pmap is not None:
      return self
    return _wrap(copy(self._value), self._weak)

  def __deepcopy__(self, memo):
    return self.__copy__()

  def __format__(self, spec):
    v = self._value  # an n-d array takes only the empty spec (NumPy's TypeError otherwise)
    return format(v.item(), spec) if v.ndim == 0 else format(v, spec)

  def __str__(self):
    return str(self._value)

  def __repr__(self):
    try:
      v = self._value
    except RuntimeError:  # spans other processes (JAX prints shape and dtype alone)
      if self._pmap is None:  # deleted
        raise
      weak = ", weak_type=True" if self._weak else ""
      return f"Array(shape={self.shape}, dtype={self.dtype.name}{weak})"
    prefix = "Array("
    dt = f"dtype={v.dtype.name}, weak_type=True" if self._weak else f"dtype={v.dtype.name}"
    width = np.get_printoptions()["linewidth"]  # np.printoptions govern
    if v.size == 0:
      body = f"[], shape={v.shape}"
    else:
      body = np.array2string(v, max_line_width=width, separator=", ", prefix=prefix, suffix=",")
    # JAX's layout: the dtype goes after a run of spaces when the last line is too long
    sep = " " * len(prefix) if len(body) - body.rfind("\n") + 3 + len(dt) > width else " "
    return f"{prefix}{body},{sep}{dt})"


_FRESH = (list, tuple, bool, int, float, complex, np.generic)  # np.asarray makes new memory
_DLPACK_KINDS = frozenset("biufc")


def _readonly(v):
  """A zero-copy view of ``v`` that nobody can make writeable: a NumPy array imported from a
  read-only DLPack capsule (its base, an opaque capsule, keeps ``v`` alive)."""
  ro = v.view()
  ro.flags.writeable = False
  if v.dtype.kind in _DLPACK_KINDS:
    try:
      return np.from_dlpack(ro)
    except BufferError:  # ml_dtypes' float8_e5m2 says kind 'f' but has no DLPack dtype
      pass
  # float0, bfloat16: no DLPack dtype; a read-only memoryview base refuses writes as well
  try:
    m = np.asarray(memoryview(ro))
  except (ValueError, NotImplementedError):  # no buffer format (bfloat16): its bits
    m = np.asarray(memoryview(ro.view(f"u{v.dtype.itemsize}")))
  return m if m.dtype == v.dtype else m.view(v.dtype)


def _xla_type_name(dtype):
  """XLA's name of an ml_dtypes type: BF16, F8E4M3FN, S4, U2, F4E2M1FN..."""
  n = dtype.name
  if n == "bfloat16":
    return "BF16"
  if n.startswith("float"):
    bits, _, rest = n[5:].partition("_")
    return f"F{bits}{rest.upper()}"
  return ("U" if n.startswith("u") else "S") + n.lstrip("uint")


def _enable_buffer_protocol(cls, attr):
  """Give ``cls`` Python's buffer protocol, as jax.Array has it (``memoryview(x)``,
  ``bytes(x)``, ``np.frombuffer(x)``): the export is that of ``obj.<attr>`` (a NumPy array),
  which the memoryview then holds. Python >= 3.12 takes ``__buffer__``; before that a class
  defined in Python has no buffer slot, so its (heap) type's ``bf_getbuffer`` is set to a
  three-call C function compiled with llvmlite (numba's, already loaded):
  ``PyObject_GetBuffer(getattr(obj, attr))``; errors (a Python exception from ``attr``)
  propagate as Python's own. Returns whether it is enabled."""
  if sys.version_info >= (3, 12):
    cls.__buffer__ = lambda self, flags: memoryview(getattr(self, attr))
    return True
  import ctypes
  import llvmlite.binding as llvm
  tp, ptr = id(cls), ctypes.sizeof(ctypes.c_void_p)
  slot = ctypes.c_void_p.from_address(tp + 20 * ptr).value  # PyTypeObject.tp_as_buffer
  if not slot or not tp < slot < tp + type(cls).__basicsize__:  # (a heap type's own struct)
    return False
  api = ctypes.pythonapi
  for f in ("PyObject_GetAttrString", "PyObject_GetBuffer", "Py_DecRef"):
    llvm.add_symbol(f, ctypes.cast(getattr(api, f), ctypes.c_void_p).value)
  n = len(attr) + 1
  mod = llvm.parse_assembly(f"""
@name = private constant [{n} x i8] c"{attr}\\00"
declare i8* @PyObject_GetAttrString(i8*, i8*)
declare i32 @PyObject_GetBuffer(i8*, i8*, i32)
declare void @Py_DecRef(i8*)
define i32 @getbuffer(i8* %obj, i8* %view, i32 %flags) {{
  %p = getelementptr [{n} x i8], [{n} x i8]* @name, i32 0, i32 0
  %v = call i8* @PyObject_GetAttrString(i8* %obj, i8* %p)
  %null = icmp eq i8* %v, null
  br i1 %null, label %fail, label %ok
ok:
  %r = call i32 @PyObject_GetBuffer(i8* %v, i8* %view, i32 %flags)
  call void @Py_DecRef(i8* %v)
  ret i32 %r
fail:
  ret i32 -1
}}""")
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  ee = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
  ee.finalize_object()
  _enable_buffer_protocol.engine = ee  # (the code lives as long as the engine)
  ctypes.c_void_p.from_address(slot).value = ee.get_function_address("getbuffer")
  return True


def owned(x):
  """``x``, or an Array of its own when it is a NumPy array: a transformation's result that
  is a caller's input passed through (the identity, a rule returning its tangent)."""
  return Array(x) if isinstance(x, np.ndarray) else x  # Array() copies it


def own(o, foreign):
  """``o`` (an output buffer), or a copy of it when it may share memory with one of
  ``foreign``: the NumPy arrays a caller passed in, which they may write to later. nbjax's
  own buffers are immutable and shared freely; only views (``reshape``, ``slice``...) or a
  returned input can share, so a buffer that owns its memory costs one check."""
  if o.base is None:
    for f in foreign:
      if o is f:
        return copy(o)
    return o
  for f in foreign:
    if np.may_share_memory(o, f):
      return copy(o)
  return o


_single = []


def _default_device(d):
  """A device or ``SingleDeviceSharding`` as the ``_dev`` slot holds it (None: the default
  device)."""
  d = getattr(d, "_device", d)
  return None if d is None or d == _single_sharding()._device else d


def _device_sharding(d):
  s = _dev_shardings.get(d)
  if s is None:
    from nbjax.sharding import SingleDeviceSharding
    s = _dev_shardings[d] = SingleDeviceSharding(d)
  return s


_dev_shardings = {}


def _single_sharding():
  if not _single:
    from nbjax import xla
    from nbjax.sharding import SingleDeviceSharding
    _single.append(SingleDeviceSharding(xla.local_devices()[0]))
  return _single[0]


def _wrap(v, weak=False):
  """Fast constructor for kernel outputs (already canonical and C-contiguous)."""
  a = object.__new__(Array)
  a._value = v
  a._weak = weak
  a._buf = None
  return a


Array._new = staticmethod(_wrap)
_VALUE_SLOT = Array.__dict__["_value"]
try:
  _enable_buffer_protocol(Array, "_buffer_export")
except Exception:  # (no llvmlite target: arrays export through __array__/__dlpack__ alone)
  pass
Array.register(core.Tracer)
ArrayImpl = Array
# the concrete array type's name is JAX's (errors say "unsupported operand type(s) for +:
# 'ArrayImpl' and 'dict'"); nbjax.array.ArrayImpl is the same class, so pickle finds it
Array.__name__ = Array.__qualname__ = "ArrayImpl"


def to_numpy(x):
  """The host buffer of an eager operand (Array, NumPy array, or Python/NumPy scalar)."""
  if type(x) is Array:
    return x._value
  return np.asarray(x)


# ----------------------------------------------------------------- large-buffer pool
# Eager outputs of >= POOL_MIN bytes come from a free list instead of fresh memory: glibc
# mmaps big blocks, so every fresh 40 MB result pays ~7 ms of first-touch page faults (more
# than the arithmetic). A pooled buffer is handed out again only when nothing references it
# any more: every NumPy view of it (an Array's buffer, a user's np.asarray view, a DLPack
# export) holds a reference to its base, so the base's refcount says whether it is free.
# Buffers are 64-byte aligned, which also lets XLA alias them as jit inputs.
# Below POOL_MIN a pool does not pay: glibc reuses freed blocks up to its (dynamic, up to
# 32 MB) mmap threshold, so a fresh output costs what a reused one does (float32 add,
# interleaved medians: 64 KiB 2.1 vs 2.2 us, 256 KiB 9.3 vs 8.2, 1 MiB 155 vs 155,
# 2 MiB 312 vs 313; np.empty itself 0.2 us).

POOL_MIN = 1 << 22          # bytes
POOL_MAX_BYTES = 1 << 30    # total memory the pool may hold
_pool: dict = {}            # nbytes -> [base uint8 arrays]
_pool_bytes = 0
_FREE_REFS = 3              # the pool's list + the loop variable + getrefcount's argument


def empty(shape, dtype):
  """An uninitialised C-contiguous output buffer, from the pool when it is large."""
  dtype = np.dtype(dtype)
  nbytes = math.prod(shape) * dtype.itemsize
  if nbytes < POOL_MIN:
    return np.empty(shape, dtype)
  global _pool_bytes
  bases = _pool.get(nbytes)
  if bases is None:
    bases = _pool[nbytes] = []
  for base in bases:
    if sys.getrefcount(base) <= _FREE_REFS:
      return _view(base, nbytes, shape, dtype)
  base = np.empty(nbytes + 64, np.uint8)
  if _pool_bytes + nbytes <= POOL_MAX_BYTES and len(bases) < 8:
    bases.append(base)
    _pool_bytes += nbytes
  return _view(base, nbytes, shape, dtype)


def copy(x):
  """A C-contiguous copy of ``x`` in a pool buffer when large (no page faults on reuse)."""
  if x.nbytes < POOL_MIN:
    return x.copy()
  out = empty(x.shape, x.dtype)
  np.copyto(out, x)
  return out


def _view(base, nbytes, shape, dtype):
  off = -base.ctypes.data % 64
  return base[off:off + nbytes].view(dtype).reshape(shape)


# Mid-size temporaries (a composite's intermediates, NumPy's own buffers) come from glibc's
# heap, and glibc's dynamic thresholds make them expensive: its mmap threshold only rises to
# the size of the last mmapped block freed, and it hands the heap's free top back to the
# kernel past twice that. A composite keeping a few 4 MB intermediates alive then releases
# and re-faults its pages on every call (jnp.hypot of 10^6 float32: ~7500 page faults and
# 13 ms per call against 3 ms without them; nanmean 5.9 -> 0.8 ms, take 18.7 -> 6.7 ms). So
# at import nbjax fixes both (setting either turns the dynamic rule off): blocks below
# 32 MiB (glibc's largest mmap threshold) come from the heap, and up to 256 MiB of free heap
# top stays mapped. The cost: freed memory stays with the process (a thread's arena, whose
# heaps are at most 64 MiB, is never trimmed at all) until ``clear_pool`` (and so
# ``jax.clear_caches``) calls malloc_trim. Skipped with NBJAX_MALLOC_TUNING=0, where the user
# tuned these (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES), and off glibc.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20


def _tune_malloc():
  """glibc's thresholds set as above; the libc handle, or None where untouched."""
  import os
  if os.environ.get("NBJAX_MALLOC_TUNING", "1") == "0" or sys.platform != "linux" or any(
      k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")) or \
      "threshold" in os.environ.get("GLIBC_TUNABLES", ""):
    return None
  import ctypes
  try:
    libc = ctypes.CDLL(None)
    libc.gnu_get_libc_version  # glibc (musl has a mallopt that ignores these)
    mallopt = libc.mallopt
  except (OSError, AttributeError):
    return None
  mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
  ok = mallopt(-3, MMAP_THRESHOLD) == 1 and mallopt(-1, TRIM_THRESHOLD) == 1  # M_MMAP_, M_TRIM_
  return libc if ok else None


_libc = _tune_malloc()
malloc_tuned = _libc is not None


def clear_pool():
  """Drop the pool's free buffers (buffers still in use stay with their arrays) and, where
  nbjax tuned glibc's malloc, hand the free heap memory of every arena back (malloc_trim)."""
  global _pool_bytes
  _pool.clear()
  _pool_bytes = 0
  if _libc is not None:
    _libc.malloc_trim(0)


# jax_array_garbage_collection_guard: while it is "log" or "fatal", Array has a __del__
# (none otherwise: deletion stays free) reporting an array freed during a garbage
# collection, i.e. held by a reference cycle rather than freed by reference counting.
_GC_MESSAGE = ("`jax.Array` was deleted by the Python garbage collector instead of reference "
               "counting. Break the reference cycle that delays the deletion of this "
               "`jax.Array` to avoid hogging memory.\n")
_collecting = [False]


def _gc_phase(phase, info):
  _collecting[0] = phase == "start"


def _gc_guard_del(self):
  if _collecting[0]:
    mode = core.config._flags["array_garbage_collection_guard"]
    if mode == "log" or mode == "fatal":
      sys.stderr.write(_GC_MESSAGE)
      if mode == "fatal":
        import os
        sys.stderr.flush()
        os.abort()


def _gc_guard(name, value):
  if name == "array_garbage_collection_guard":
    import gc
    on = value == "log" or value == "fatal"
    if on and "__del__" not in Array.__dict__:
      Array.__del__ = _gc_guard_del
      gc.callbacks.append(_gc_phase)
    elif not on and "__del__" in Array.__dict__:
      del Array.__del__
      gc.callbacks.remove(_gc_phase)
      _collecting[0] = False


core.config.add_listener(_gc_guard)
_gc_guard("array_garbage_collection_guard", core.config._flags["array_garbage_collection_guard"])
