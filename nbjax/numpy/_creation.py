"""Array creation in ``nbjax.numpy``: array/asarray, zeros/ones/full, arange, linspace, eye, ...

Pipeline position: Python data (lists, scalars, NumPy arrays) become ``Array``s here
(copied, dtype canonicalized, JAX's weak-type rules); constants of a given shape are
``lax.full``, ranges and masks are ``lax.iota``-based, so creation inside traced functions
stages the same primitives as eager code runs.
"""
from __future__ import annotations

import builtins
import functools
import operator

import numpy as np

from nbjax.eager_cache import staged
from nbjax import core, dtypes, lax, registry
from nbjax.registry import quiet_run
from nbjax.array import Array, empty as pooled_empty
from kernels.shape import tri_select as _tri_kernel
from nbjax.lax.shape import bits
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.numpy import _util
from nbjax.numpy._manip import stack
from nbjax.numpy._ufuncs import exp, log, power
from nbjax.sharding import NamedSharding, apply_out_sharding, device_sharding
from nbjax.numpy._util import as_array, canonicalize_shape, canonicalize_user_dtype, lit

_PY_SCALARS = (bool, int, float, complex)


def _leaves(obj, out, dtype=None):
  """The leaves of nested lists/tuples ``obj``, appended to ``out``; None and Python ints
  beyond int64 are rejected as JAX's ``array`` rejects them (beyond ``dtype``'s range when
  one is given: uint64 holds up to 2**64 - 1, a float dtype any int)."""
  if isinstance(obj, (list, tuple)):
    for o in obj:
      _leaves(o, out, dtype)
  elif obj is None:
    raise ValueError("None is not a valid value for jnp.array")
  else:
    if hasattr(obj, "__jax_array__") and not isinstance(obj, (Array, Tracer)):
      obj = obj.__jax_array__()  # (JAX's array-likes, as leaves too)
    if type(obj) is int and not -2 ** 63 <= obj < 2 ** 63 and not (
        dtype is not None and (dtype.kind not in "iub" or (
            dtype.kind == "u" and 0 <= obj <= np.iinfo(dtype).max))):
      raise OverflowError("Python int too large to convert to C long")
    out.append(obj)
  return out


def array(object, dtype=None, *args, copy=True, order="K", ndmin=0, device=None,  # noqa: A002
          out_sharding=None):
  """Create an array from an array-like: nested lists/tuples (of scalars, arrays or
  tracers), NumPy arrays, Python scalars (JAX implementation of :func:`numpy.array`).

  Python scalars give weakly typed arrays, as in JAX; NumPy data is copied, so later
  mutation of the source never shows through.

  Args:
    object: an array-like: array, NumPy array, scalar, or nested lists/tuples of them.
    dtype: optional dtype of the result (by default inferred from the inputs).
    args: positional ``copy``, ``order`` and ``ndmin`` (deprecated, as in JAX).
    copy: whether to copy the input (arrays are immutable, so rarely matters).
    order: memory layout, accepted for NumPy compatibility (nbjax arrays have no memory
      order).
    ndmin: minimum number of dimensions of the result.
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    A new array.

  Examples:
    >>> jnp.array([1, 2, 3])
    Array([1, 2, 3], dtype=int64)
    >>> jnp.array([[1.0, 2.0]], dtype=jnp.float32)
    Array([[1., 2.]], dtype=float32)
  """
  if args:  # JAX's deprecated positional copy, order, ndmin
    if len(args) > 3:
      raise TypeError(f"array() takes at most 5 positional arguments but {len(args) + 2} were "
                      "given")
    for i, name in enumerate(["copy", "order", "ndmin"]):
      if i < len(args) and [copy, order, ndmin][i] != [True, "K", 0][i]:
        raise TypeError(f"array() got multiple values for argument '{name}'")
    copy, order, ndmin = (list(args) + [copy, order, ndmin][len(args):])[:3]
    import warnings
    warnings.warn("Passing the copy, order, and ndmin arguments to jnp.array positionally is "
                  "deprecated. Use keyword arguments instead.", DeprecationWarning, stacklevel=2)
  if type(object) in _util.key_types:  # a key array (nbjax.prng)
    return _util.key_impls["array"](object, dtype, copy=copy, ndmin=ndmin)
  out_sharding, device = device_sharding(out_sharding, device)
  if out_sharding is not None:
    return apply_out_sharding(array(object, dtype, copy=copy, order=order, ndmin=ndmin),
                              out_sharding, "jnp.array", device)
  if device is not None:  # committed to that device, as JAX's device_put
    return _on_device(array(object, dtype, copy=copy, order=order, ndmin=ndmin), device)
  if order is not None and order != "K":
    raise NotImplementedError("Only implemented for order='K'")
  if object is None:
    raise ValueError("None is not a valid value for jnp.array")
  dtype = canonicalize_user_dtype(dtype, "array")
  if hasattr(object, "__jax_array__") and not isinstance(object, (Array, Tracer)):
    object = object.__jax_array__()
  weak = dtype is None and dtypes.is_weakly_typed(object)
  leaves = _leaves(object, [], dtype) if isinstance(object, (list, tuple)) else None
  if isinstance(object, (Array, Tracer)):
    out = lax.copy_p.bind(object) if copy else object  # (JAX's copy equation: a new buffer)
  elif leaves and any(isinstance(x, (Array, Tracer)) for x in leaves):
    d = dtype or dtypes.result_type(*leaves)
    out = lax.concatenate([lax.expand_dims(array(e, d, copy=False), (0,)) for e in object], 0)
  elif (type(object) is np.ndarray and object.ndim and (dtype is None or dtype == object.dtype)
        and getattr(_ctx.trace, "const_array", None) is not None
        and dtypes.canonicalize_dtype(object.dtype) == object.dtype):
    out = _ctx.trace.const_array(object)  # staged: the array's one constant (as JAX's)
  else:
    if core.h2d_guard is not None:
      core.host_to_device(object)  # (JAX's transfer guard)
    v = _host_copy(object, leaves, dtype)
    if dtype is not None:  # (x64 off, explicit_x64_dtypes='allow': JAX's host data passes
      c = dtypes.canonicalize_dtype(v.dtype)  # through its canonical dtype, unless taken
      if c != v.dtype and (copy or type(object) is not np.ndarray or object.dtype != v.dtype):
        v = v.astype(c).astype(v.dtype)  # without a copy)
    out = Array._new(v, weak)
  if dtype is not None and out.dtype != dtype:
    out = _util.convert(out, dtype)
  elif weak != bool(out.weak_type):
    out = _util.convert(out, out.dtype, weak)
  if ndmin > out.ndim:
    out = lax.expand_dims(out, tuple(range(ndmin - out.ndim)))
  return out


def _host_copy(object, leaves, dtype):  # noqa: A002
  """A fresh C-contiguous NumPy copy of host data in the requested or JAX-inferred dtype."""
  if dtype is None:
    if type(object) in _PY_SCALARS:
      dtype = dtypes.dtype(object)
      if type(object) is int and not np.iinfo(dtype).min <= object <= np.iinfo(dtype).max:
        raise OverflowError(f"Python int {object} too large to convert to {dtype}")
    elif leaves is not None and not all(type(x) in _PY_SCALARS for x in leaves):
      dtype = dtypes.result_type(*leaves)
    elif leaves == []:
      dtype = dtypes.default_float_dtype()
    else:
      dtype = dtypes.canonicalize_dtype(dtypes.dtype(np.asarray(object)))
  return np.array(object, dtype=dtype, copy=True, order="C")  # NumPy's OverflowError, as JAX


def _on_device(x, device):
  """An eager ``x`` committed to ``device`` (a device or ``SingleDeviceSharding``), as JAX's
  creation functions' ``device=`` (a traced one as it is)."""
  if type(x) is not Array:
    return x
  from nbjax.api import device_put
  return device_put(x, device)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
  """Convert ``a`` to an array (no copy of an ``Array`` of the requested dtype).

  Args:
    a: an array-like.
    dtype: optional dtype of the result (by default inferred from the inputs).
    order: memory layout, accepted for NumPy compatibility (nbjax arrays have no memory
      order).
    copy: whether to copy: ``None`` copies only when needed.
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array (``a`` itself when it already is an array of the requested dtype).

  Examples:
    >>> jnp.asarray([1, 2, 3])
    Array([1, 2, 3], dtype=int64)
    >>> jnp.asarray(2.5, dtype=jnp.float32)
    Array(2.5, dtype=float32)
  """
  out_sharding, device = device_sharding(out_sharding, device)
  if out_sharding is not None:
    return apply_out_sharding(asarray(a, dtype, order, copy=copy), out_sharding, "jnp.array",
                              device)
  if device is not None:  # committed to that device, as JAX's device_put
    return _on_device(asarray(a, dtype, order, copy=copy), device)
  if dtype is None and (type(a) is Array or isinstance(a, Tracer)):
    if type(a) is Array or a.to_concrete_value() is None:
      return a
    aval = a.aval  # a tracer of a concrete value (jvp's): converted, as JAX's
    return lax.convert_element_type_p.bind(a, new_dtype=aval.dtype, weak_type=aval.weak_type)
  if dtype is not None and not isinstance(dtype, dtypes.ExtendedDType):
    dtype = canonicalize_user_dtype(dtype, "asarray")
  return array(a, dtype=dtype, copy=bool(copy), order=order)


def copy(a, order=None):
  """A copy of ``a`` (arrays are immutable, so this only matters for NumPy inputs).

  Args:
    a: input array (or array-like).
    order: memory layout, accepted for NumPy compatibility (nbjax arrays have no memory
      order).

  Returns:
    An array with the same values as ``a``.

  Examples:
    >>> jnp.copy(jnp.array([1, 2]))
    Array([1, 2], dtype=int64)
  """
  if type(a) in _util.key_types:  # a key array (nbjax.prng): its copy, as JAX's
    return array(a, copy=True)
  _util.check_arraylike("copy", a)
  return array(a, copy=True, order=order)


def _full_scalar(shape, fill_value, dtype):
  """Eager ``full`` of a static shape and a Python scalar that converts exactly (a bool; an
  int into an integer dtype holding it or a float dtype; a float into a float dtype), with no
  or a plain dtype: the NumPy array made directly; None for the general path."""
  t = type(fill_value)
  if t not in _FILLS or _ctx.trace is not _EVAL or core.placement[0] or not (
      type(shape) is int and shape >= 0 or type(shape) is tuple and all(
          type(n) is int and n >= 0 for n in shape)):
    return None
  if dtype is None:
    d, weak = dtypes.dtype(fill_value), t is not bool
    if t is int and not np.iinfo(d).min <= fill_value <= np.iinfo(d).max:
      return None  # (JAX's weak int: an int32 fill wraps with x64 off, past int64 raises)
  else:
    d, weak = _util.plain_dtype(dtype), False
    if d is None or d.kind not in "biuf" or t is float and d.kind != "f":
      return None
    if t is int and d.kind in "iu" and not np.iinfo(d).min <= fill_value <= np.iinfo(d).max:
      return None
  return Array._new(quiet_run(np.full, shape, fill_value, d), weak)


_FILLS = frozenset({bool, int, float})


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
  """An array of ``shape`` filled with ``fill_value`` (an array fill broadcasts; a Python
  scalar fill with no dtype gives a weakly typed array, as JAX).

  Args:
    shape: int or sequence of ints: the shape of the result.
    fill_value: scalar or array value to fill with.
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of ``shape`` filled with ``fill_value``.

  Examples:
    >>> jnp.full((2, 2), 7)
    Array([[7, 7],
           [7, 7]], dtype=int64, weak_type=True)
  """
  out = _full_scalar(shape, fill_value, dtype) if device is None and out_sharding is None \
      else None
  if out is not None:
    return out
  out_sharding, device = device_sharding(out_sharding, device)
  if out_sharding is not None or device is not None:
    return _place(full(shape, fill_value, dtype), out_sharding, device, "full")
  shape = canonicalize_shape(shape)
  if any(d < 0 for d in shape):
    raise TypeError(f"broadcast_in_dim shape must have every element be nonnegative, got "
                    f"{shape}.")
  if isinstance(dtype, dtypes.ExtendedDType) or type(fill_value) in _util.key_types:
    return _util.key_impls["full"](shape, fill_value, dtype)  # key arrays (nbjax.prng)
  dtype = canonicalize_user_dtype(dtype, "full")
  if type(fill_value) not in _PY_SCALARS:
    _util.check_arraylike("full", fill_value)
  if _util.ndim(fill_value) == 0:
    return lax.full(shape, fill_value, dtype)
  return _util.broadcast_to(asarray(fill_value, dtype=dtype), shape)


def _shape_dtype_hint(name, shape, dtype):
  """JAX's hint for ``jnp.zeros(2, 3)`` (a shape given as two arguments)."""
  if dtype is None or isinstance(dtype, dtypes.ExtendedDType):
    return
  if isinstance(dtype, int):  # (no dtype is an int; nor a bool, which JAX's check counts)
    hint = ""
    if isinstance(shape, int):
      hint = (f"\n\nDid you accidentally write `jax.numpy.{name}({shape}, {dtype})` when you "
              f"meant `jax.numpy.{name}(({shape}, {dtype}))`, i.e. with a single tuple "
              "argument for the shape?")
    raise TypeError(f"Cannot interpret '{dtype}' as a data type.{hint}")


def _filled(make, shape, dtype):
  """Eager ``zeros``/``ones`` of a static shape and no or a plain NumPy dtype: the NumPy
  array made directly (no primitive to trace); None for the general path."""
  if _ctx.trace is not _EVAL or not (type(shape) is int and shape >= 0 or type(shape) is tuple
                                     and all(type(d) is int and d >= 0 for d in shape)):
    return None
  d = dtypes.default_float_dtype() if dtype is None else _util.plain_dtype(dtype)
  return None if d is None or d.kind not in "biufc" else Array._new(make(shape, d))


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
  """An array of zeros (default dtype: the default float).

  Args:
    shape: int or sequence of ints: the shape of the result.
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of zeros.

  Examples:
    >>> jnp.zeros((2, 3), dtype=int)
    Array([[0, 0, 0],
           [0, 0, 0]], dtype=int64)
  """
  out_sharding, device = device_sharding(out_sharding, device)
  out = _filled(np.zeros, shape, dtype)
  out = _zeros(shape, dtype) if out is None else out
  if out_sharding is None and device is None:
    return out
  return _place(out, out_sharding, device, "jnp.zeros")


def _zeros(shape, dtype):
  _shape_dtype_hint("zeros", shape, dtype)
  return full(shape, 0, _named_dtype(dtype, "zeros"))


def ones(shape, dtype=None, *, device=None, out_sharding=None):
  """An array of ones (default dtype: the default float).

  Args:
    shape: int or sequence of ints: the shape of the result.
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of ones.

  Examples:
    >>> jnp.ones((2, 2))
    Array([[1., 1.],
           [1., 1.]], dtype=float64)
  """
  out_sharding, device = device_sharding(out_sharding, device)
  out = _filled(np.ones, shape, dtype)
  out = _ones(shape, dtype) if out is None else out
  if out_sharding is None and device is None:
    return out
  return _place(out, out_sharding, device, "jnp.ones")


def _ones(shape, dtype):
  _shape_dtype_hint("ones", shape, dtype)
  return full(shape, 1, _named_dtype(dtype, "ones"))


def _named_dtype(dtype, name):
  """The dtype of ``name``'s result: the default float, or ``dtype`` checked as JAX's
  ``check_and_canonicalize_user_dtype(dtype, name)`` (key dtypes as they are)."""
  if dtype is None:
    return dtypes.default_float_dtype()
  return dtype if isinstance(dtype, dtypes.ExtendedDType) else canonicalize_user_dtype(dtype,
                                                                                       name)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
  """Like ``zeros`` (nbjax arrays are never uninitialised).

  Args:
    shape: int or sequence of ints: the shape of the result.
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of zeros of ``shape``.

  Examples:
    >>> jnp.empty((2,))
    Array([0., 0.], dtype=float64)
  """
  _shape_dtype_hint("empty", shape, dtype)
  out_sharding, device = device_sharding(out_sharding, device)
  out = zeros(shape, dtype if dtype is None else _named_dtype(dtype, "empty"))
  if out_sharding is None and device is None:
    return out
  return _place(out, out_sharding, device, "jnp.zeros")


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None,
              _name="full_like", _placed=False):
  """An array like ``a`` (shape, dtype; weak type kept) filled with ``fill_value``; ``a``
  may be any object with ``shape`` and ``dtype`` (e.g. a ``ShapeDtypeStruct``), as JAX.

  Args:
    a: array (or any object with ``shape`` and ``dtype``) to take the shape and dtype from.
    fill_value: scalar or array value to fill with.
    dtype: optional dtype of the result (by default inferred from the inputs).
    shape: optional shape overriding that of ``a``.
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array like ``a`` filled with ``fill_value``.

  Examples:
    >>> jnp.full_like(jnp.array([1.0, 2.0]), 3)
    Array([3., 3.], dtype=float64)
  """
  out_sharding, device = device_sharding(out_sharding, device)
  if out_sharding is None and device is None and not _placed and not isinstance(a, Tracer):
    s = getattr(a, "sharding", None)  # as JAX's: a committed sharded ``a``'s layout
    if isinstance(s, NamedSharding) and hasattr(s.mesh, "devices") and \
        getattr(a, "_committed", True) and \
        not getattr(a, "weak_type", getattr(a, "_weak", False)) and \
        (shape is None or canonicalize_shape(shape) == tuple(a.shape) or s.is_fully_replicated):
      out_sharding = s
  if out_sharding is not None or device is not None:
    return _place(full_like(a, fill_value, dtype, shape, _name=_name, _placed=True),
                  out_sharding, device, "full_like" if _name == "full_like" else "jnp." + _name)
  if type(a) in _util.key_types or isinstance(dtype, dtypes.ExtendedDType):  # (nbjax.prng)
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None
                else dtype)
  if hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, (Array, Tracer,
                                                                        np.ndarray)):
    _util.check_arraylike("full_like", 0, fill_value)
    d = canonicalize_user_dtype(dtype, _name) or canonicalize_user_dtype(a.dtype)
    return _util.broadcast_to(asarray(fill_value, d),
                              canonicalize_shape(a.shape if shape is None else shape))
  if type(fill_value) in _PY_SCALARS:
    _util.check_arraylike(_name, a)
  else:
    _util.check_arraylike(_name, a, fill_value)
    fill_value, = _util.jax_array_protocol((fill_value,))
  a = as_array(a)
  if _util.ndim(fill_value) != 0:
    d = canonicalize_user_dtype(dtype, _name) or a.dtype
    return _util.broadcast_to(asarray(fill_value, d), a.shape if shape is None else shape)
  dtype = canonicalize_user_dtype(dtype, _name)
  return lax.full_like(a, fill_value, dtype, None if shape is None else canonicalize_shape(shape))


def _filled_like(make, a, dtype, shape, device, out_sharding):
  """Eager ``zeros_like``/``ones_like`` of an Array with no or a plain NumPy dtype, no shape,
  device or sharding: the NumPy array made directly (the weak type kept without a dtype);
  None for the general path."""
  if type(a) is not Array or _ctx.trace is not _EVAL or shape is not None or \
      device is not None or out_sharding is not None or core.placement[0] or a.is_deleted() \
      or core.placed_device(a)[0]:  # (committed, if only to the default device: full_like's)
    return None
  v = a._value
  if dtype is None:
    return Array._new(make(v.shape, v.dtype), a._weak)
  d = _util.plain_dtype(dtype)
  return None if d is None or d.kind not in "biufc" else Array._new(make(v.shape, d))


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
  """Zeros with the shape and dtype of ``a``.

  Args:
    a: input array (or array-like).
    dtype: optional dtype of the result (by default inferred from the inputs).
    shape: optional shape overriding that of ``a``.
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of zeros like ``a``.

  Examples:
    >>> jnp.zeros_like(jnp.array([1.5, 2.5]))
    Array([0., 0.], dtype=float64)
  """
  out = _filled_like(np.zeros, a, dtype, shape, device, out_sharding)
  return full_like(a, 0, dtype, shape, device=device, out_sharding=out_sharding,
                   _name="zeros_like") if out is None else out


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
  """Ones with the shape and dtype of ``a``.

  Args:
    a: input array (or array-like).
    dtype: optional dtype of the result (by default inferred from the inputs).
    shape: optional shape overriding that of ``a``.
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    An array of ones like ``a``.

  Examples:
    >>> jnp.ones_like(jnp.array([1, 2]))
    Array([1, 1], dtype=int64)
  """
  out = _filled_like(np.ones, a, dtype, shape, device, out_sharding)
  return full_like(a, 1, dtype, shape, device=device, out_sharding=out_sharding,
                   _name="ones_like") if out is None else out


def empty_like(prototype, dtype=None, shape=None, *, device=None):
  """Like ``zeros_like``.

  Args:
    prototype: array whose shape and dtype the result takes.
    dtype: optional dtype of the result (by default inferred from the inputs).
    shape: optional shape overriding that of ``prototype``.
    device: optional device to place the result on (nbjax runs on one device).

  Returns:
    An array of zeros like ``prototype``.

  Examples:
    >>> jnp.empty_like(jnp.array([1, 2]))
    Array([0, 0], dtype=int64)
  """
  return full_like(prototype, 0, dtype, shape, device=device, _name="ones_like")  # (JAX's)


def _concrete_scalar(x, name):
  return core.concrete_or_error(None, x, f"It arose in the jnp.arange argument '{name}'")


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
  """Evenly spaced values in ``[start, stop)`` (arguments must be concrete, as in JAX).

  Args:
    start: start of the interval (or its end, when ``stop`` is None).
    stop: end of the interval (excluded).
    step: spacing between values (default 1).
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).
    out_sharding: optional ``NamedSharding`` or ``PartitionSpec`` (of the context mesh) to
      place the result as.

  Returns:
    A 1-d array of evenly spaced values.

  Examples:
    >>> jnp.arange(5)
    Array([0, 1, 2, 3, 4], dtype=int64)
    >>> jnp.arange(1.0, 2.0, 0.25)
    Array([1.  , 1.25, 1.5 , 1.75], dtype=float64)
  """
  out = _arange(start, stop, step, dtype)
  return _place(out, out_sharding, device, "jnp.arange")


def _place(x, out_sharding, device, name):
  """``x`` on ``device`` (a device or a sharding; eagerly strongly typed there, as JAX's) or
  as ``out_sharding`` (JAX's error if both are given)."""
  if out_sharding is not None:
    return apply_out_sharding(x, out_sharding, name, device)
  if device is None:
    return x
  return _put(_util.convert(x, x.dtype, False) if x.weak_type and _ctx.trace is _EVAL else x,
              device)


def _put(x, device):
  """``device_put(x, device)``: under a trace, JAX's staged device_put equation."""
  from nbjax.api import device_put
  return device_put(x, device)


def _arange(start, stop, step, dtype):
  if type(start) is int and dtype is None and _ctx.trace is _EVAL and (
      stop is None and step is None or type(stop) is int and (step is None or type(step) is int
                                                             and step)):
    d = dtypes.default_int_dtype()  # eager, Python ints: NumPy's range of the default int
    if stop is None:
      return Array._new(np.arange(builtins.max(start, 0), dtype=d))
    if all(-2**31 <= a < 2**31 for a in (start, stop, step or 1)):
      return Array._new(np.arange(start, stop, step or 1, dtype=d))
  start_name = "stop" if stop is None and step is None else "start"
  start = _concrete_scalar(start, start_name)
  stop = None if stop is None else _concrete_scalar(stop, "stop")
  step = None if step is None else _concrete_scalar(step, "step")
  dtype = canonicalize_user_dtype(dtype, "arange")
  for name, a in ((start_name, start), ("stop", stop), ("step", step)):
    if a is not None and np.ndim(a) != 0:
      raise ValueError(f"jax.numpy.arange: arguments must be scalars; got {name}={a}")
  if start is None:  # (JAX: np.ceil(None))
    raise TypeError("must be real number, not NoneType")
  args = [x for x in (start, stop, step) if x is not None]
  if dtype is None:
    dtype = dtypes.result_type(*args)
  if builtins.any(np.iscomplexobj(a) for a in args):
    raise ValueError("Passing complex start/stop/step to jnp.arange is no longer supported "
                     "starting in JAX v0.10.0.")
  if dtype == np.bool_:  # (JAX builds it with iota)
    raise TypeError("iota does not accept dtype bool. Accepted dtypes are subtypes of integer, "
                    "floating, complexfloating.")
  int_start = dtypes.is_int(np.asarray(start).dtype)
  if stop is None and step is None and dtypes.is_int(dtype) and int_start:
    return lax.iota(dtype, max(operator.index(start), 0))
  if stop is None:
    start, stop = 0, start
  start, stop = (np.asarray(x).item() for x in (start, stop))
  cv = lax.convert_element_type
  if step is not None:  # JAX's construction (its jaxpr and its float rounding): start + step * i
    step = np.asarray(step).item()
    work = np.dtype(np.float32) if dtype.kind == "f" and dtype.itemsize < 4 else dtype
    n = builtins.max(0, int(np.ceil((stop - start) / step)))
    return cv(lax.add(cv(start, work), lax.mul(cv(step, work), lax.iota(work, n))), dtype)
  if start == 0:
    return lax.iota(dtype, builtins.max(0, int(np.ceil(stop))))
  return lax.add(cv(start, dtype), lax.iota(dtype, builtins.max(0, int(np.ceil(stop - start)))))


def _space_dtypes(name, start, stop, dtype):
  """(result dtype, computation dtype) of linspace/logspace/geomspace."""
  if dtype is None:
    dtype = _util.to_inexact_dtype(dtypes.result_type(start, stop))
  else:
    dtype = canonicalize_user_dtype(dtype, name)
  return dtype, _util.to_inexact_dtype(dtype)


_CREATED: dict = {}  # an eager creation call of static arguments -> its (read-only) buffer
_STATIC = frozenset({int, float, bool, type(None)})


def _memo_static(fun):
  """``fun``, a creation function (``eye``, ``linspace``...), made once per eager call
  signature whose arguments are all Python numbers, None or plain dtypes (and the config in
  force: ``registry.epoch``): repeated calls (``jnp.eye(8)`` in a loop) wrap the first
  call's buffer in a new Array. Buffers are never written to, and NumPy sees them read-only.
  Other calls (tracers, arrays, devices; weak or tuple results) run ``fun`` as it is."""
  name = fun.__name__

  @functools.wraps(fun)
  def memo(*args, **kwargs):
    if _ctx.trace is not _EVAL or core.h2d_guard is not None or core.placement[0]:
      return fun(*args, **kwargs)
    key = [name, registry.epoch]
    for a in (*args, *kwargs.values()):
      if type(a) not in _STATIC and _util.plain_dtype(a) is None:
        return fun(*args, **kwargs)
      key.append((type(a), a.hex() if type(a) is float else a))  # (-0.0 differs from 0.0)
    key = (*key, *kwargs)
    v = _CREATED.get(key)
    if v is not None:
      return Array._new(v, False)
    out = fun(*args, **kwargs)
    if type(out) is Array and not out._weak and out._value.size <= 1 << 16:
      if len(_CREATED) >= 256:
        _CREATED.clear()
      _CREATED[key] = out._value
    return out
  return memo


@_memo_static
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
  """``num`` evenly spaced samples over ``[start, stop]`` (``start``/``stop`` may be arrays):
  JAX's ``start * (1 - t) + stop * t`` for ``t = i / div`` in the computation dtype (exact
  endpoints), floored for an integer ``dtype``; ``retstep``'s step is NaN when undefined.

  Args:
    start: start value.
    stop: end value.
    num: number of samples to generate.
    endpoint: if True (default), ``stop`` is the last sample.
    retstep: if True, also return the spacing between samples.
    dtype: optional dtype of the result (by default inferred from the inputs).
    axis: axis of the result holding the samples (when ``start``/``stop`` are arrays).
    device: optional device to place the result on (nbjax runs on one device).

  Returns:
    An array of ``num`` samples (and the step when ``retstep``).

  Examples:
    >>> jnp.linspace(0.0, 1.0, 5)
    Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float64)
  """
  num = _util.index(num, "num")
  if num < 0:
    raise ValueError(f"Number of samples, {num}, must be non-negative.")
  start, stop = _util.ensure_arraylike("linspace", start, stop)
  # jitted as JAX's (static num, endpoint, retstep, dtype, axis): eager values are XLA's,
  # JAX's bits (linspace(0, 25, 6)[3] is 15.0, not the op-by-op 15.000000000000002)
  out = _linspace_jit()(start, stop, num=num, endpoint=bool(endpoint), retstep=bool(retstep),
                        dtype=dtype, axis=axis)
  if device is None:
    return out
  return (_put(out[0], device), out[1]) if retstep else _put(out, device)


@functools.cache
def _linspace_jit():
  from nbjax.interpreters.pjit import jit
  return jit(_linspace, static_argnames=("num", "endpoint", "retstep", "dtype", "axis"))


def _linspace(start, stop, num, endpoint, retstep, dtype, axis):
  dtype, comp = _space_dtypes("linspace", start, stop, dtype)
  start, stop = _util.convert(start, comp), _util.convert(stop, comp)
  bshape = _util.broadcast_shapes(start.shape, stop.shape)
  axis = _util.canonicalize_axis(axis, len(bshape) + 1)
  b_start = _util.broadcast_to(start, bshape)
  b_stop = _util.broadcast_to(stop, bshape)
  div = num - 1 if endpoint else num
  if num > 1:
    from nbjax.numpy._ufuncs import add, multiply, subtract
    delta = lax.div(lax.sub(b_stop, b_start), lit(div, comp))
    real = dtypes.finfo(comp).dtype
    t = lax.div(lax.iota(real, div), lit(div, real))
    t = _util.convert(lax.reshape(t, tuple(div if i == axis else 1
                                           for i in range(len(bshape) + 1))), comp)
    s1 = lax.expand_dims(b_stop, (axis,))
    out = add(multiply(lax.expand_dims(b_start, (axis,)), subtract(1, t)), multiply(s1, t))
    if endpoint:
      out = lax.concatenate([out, s1], axis)
  elif num == 1:
    delta = (_util.convert(np.nan, comp) if endpoint else
             lax.sub(b_stop, b_start))
    out = lax.expand_dims(b_start, (axis,))
  else:
    delta = _util.convert(np.nan, comp)
    out = lax.full(bshape[:axis] + (0,) + bshape[axis:], 0, comp)
  if dtypes.is_int(dtype) and dtype != np.bool_ and not dtypes.is_int(out.dtype):
    out = lax.floor(out)
  out = _util.convert(out, dtype)
  return (out, delta) if retstep else out


@_memo_static
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
  """``base ** linspace(start, stop, num)``, computed in the inexact dtype and converted.

  Args:
    start: exponent of the first value.
    stop: exponent of the last value.
    num: number of samples to generate.
    endpoint: if True (default), ``stop`` is the last sample.
    base: base of the exponentials (default 10).
    dtype: optional dtype of the result (by default inferred from the inputs).
    axis: axis of the result holding the samples (when ``start``/``stop`` are arrays).

  Returns:
    An array of ``num`` samples.

  Examples:
    >>> jnp.logspace(0.0, 3.0, 4)
    Array([   1.,   10.,  100., 1000.], dtype=float64)
  """
  start, stop = _util.ensure_arraylike("logspace", start, stop)
  dtype, comp = _space_dtypes("logspace", start, stop, dtype)
  lin = linspace(_util.convert(start, comp), _util.convert(stop, comp), num,
                 endpoint=endpoint, axis=axis)
  return _util.convert(power(base, lin), dtype)


@_memo_static
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
  """Samples evenly spaced on a log scale between ``start`` and ``stop`` (the sign of
  ``start`` carried through, as JAX's).

  Args:
    start: start value.
    stop: end value.
    num: number of samples to generate.
    endpoint: if True (default), ``stop`` is the last sample.
    dtype: optional dtype of the result (by default inferred from the inputs).
    axis: axis of the result holding the samples (when ``start``/``stop`` are arrays).

  Returns:
    A 1-d array of ``num`` samples (or more dimensions for array ``start``/``stop``).

  Examples:
    >>> jnp.geomspace(1.0, 1000.0, num=4)
    Array([   1.,   10.,  100., 1000.], dtype=float64)
  """
  from nbjax.numpy._ufuncs import divide, log10, multiply, sign
  start, stop = _util.ensure_arraylike("geomspace", start, stop)
  dtype, comp = _space_dtypes("geomspace", start, stop, dtype)
  start, stop = _util.convert(start, comp), _util.convert(stop, comp)
  sg = sign(start)
  res = multiply(sg, logspace(log10(divide(start, sg)), log10(divide(stop, sg)), num,
                              endpoint=endpoint, base=10.0, dtype=comp, axis=0))
  axis = _util.canonicalize_axis(axis, res.ndim)
  if axis:
    res = lax.transpose(res, tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, res.ndim)))
  return _util.convert(res, dtype)


def _diag_offset(k, N, M, d):
  """``k`` (JAX: may be traced) as an operand of ``d``; a static one clamped to
  ``[-N, M]`` (a larger one selects nothing, and must not overflow ``d``)."""
  if isinstance(k, core.Tracer) and not _util.is_concrete(k):
    if not dtypes.is_int(k.dtype):
      raise TypeError(f"k must be an integer, got {k.dtype}")
    return _util.convert(k, d)
  k = _util.index(k, "k")
  return lit(min(max(k, -N - 1), M + 1), d, True)


@_memo_static
def tri(N, M=None, k=0, dtype=None):
  """Lower-triangular ones: ``out[i, j] = j <= i + k`` (``k`` may be traced).

  Args:
    N: number of rows.
    M: number of columns (default: ``N``).
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    A 2-d array of shape ``(N, M)``.

  Examples:
    >>> jnp.tri(3, dtype=int)
    Array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]], dtype=int64)
  """
  N = canonicalize_shape((N,), "argument of 'N' jnp.tri()")[0]
  M = N if M is None else canonicalize_shape((M,), "argument 'M' of jnp.tri()")[0]
  d = dtypes.default_int_dtype()
  if type(k) is int and not np.iinfo(d).min <= k <= np.iinfo(d).max:  # (JAX's: k is an array)
    raise OverflowError(f"Python int {k} too large to convert to {d}")
  # (JAX's default dtype here is float32, whatever the x64 mode)
  dtype = canonicalize_user_dtype(dtype, "tri") or np.dtype(np.float32)
  if type(k) is int and _ctx.trace is _EVAL and not core.placement[0]:  # eagerly NumPy's
    return Array._new(np.tri(N, M, builtins.min(builtins.max(k, -N - 1), M + 1), dtype))
  rows = lax.add(lax.broadcasted_iota(d, (N, M), 0), _diag_offset(k, N, M, d))
  return _util.convert(lax.ge(rows, lax.broadcasted_iota(d, (N, M), 1)), dtype)


@_memo_static
def eye(N, M=None, k=0, dtype=None, *, device=None):
  """Ones on the ``k``-th diagonal, zeros elsewhere.

  Args:
    N: number of rows.
    M: number of columns (default: ``N``).
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.
    dtype: optional dtype of the result (by default inferred from the inputs).
    device: optional device to place the result on (nbjax runs on one device).

  Returns:
    A 2-d array of shape ``(N, M)``.

  Examples:
    >>> jnp.eye(2)
    Array([[1., 0.],
           [0., 1.]], dtype=float64)
    >>> jnp.eye(2, 3, k=1, dtype=int)
    Array([[0, 1, 0],
           [0, 0, 1]], dtype=int64)
  """
  N_, M_ = N, M
  N = canonicalize_shape((N,), "argument of 'N' jnp.eye()")[0]
  M = N if M is None else canonicalize_shape((M,), "argument 'M' of jnp.eye()")[0]
  if N < 0 or M < 0:
    raise ValueError(f"negative dimensions are not allowed, got {N_} and {M_}")
  d = dtypes.default_int_dtype()
  dtype = canonicalize_user_dtype(dtype, "eye") or dtypes.default_float_dtype()
  if type(k) is int and _ctx.trace is _EVAL and not core.placement[0]:  # eagerly NumPy's
    out = Array._new(np.eye(N, M, builtins.min(builtins.max(k, -N - 1), M + 1), dtype))
  else:
    rows = lax.add(lax.broadcasted_iota(d, (N, M), 0), _diag_offset(k, N, M, d))
    out = _util.convert(lax.eq(rows, lax.broadcasted_iota(d, (N, M), 1)), dtype)
  return out if device is None else _put(out, device)


@_memo_static
def identity(n, dtype=None):
  """The ``n x n`` identity matrix.

  Args:
    n: number of rows and columns.
    dtype: optional dtype of the result (by default inferred from the inputs).

  Returns:
    A 2-d array of shape ``(n, n)``.

  Examples:
    >>> jnp.identity(2, dtype=int)
    Array([[1, 0],
           [0, 1]], dtype=int64)
  """
  return eye(n, dtype=canonicalize_user_dtype(dtype, "identity"))


def _tri_select_eager(upper):
  """Eagerly, ``tril``/``triu`` of an Array with a Python int ``k`` run one pass of
  ``kernels.shape.tri_select`` (where the composite builds a mask, broadcasts it and selects:
  1000 x 1000 float32 ~9 -> ~0.5 ms); the values are the composite's (zero is all-zero bits in
  every dtype). Traced calls and anything else keep the staged composite (JAX's jaxpr)."""
  def wrap(general):
    @functools.wraps(general)
    def f(m, k=0):
      if type(m) is Array and type(k) is int and -1 << 31 < k < 1 << 31 and \
          _ctx.trace is _EVAL and m.ndim >= 2 and not core.placement[0]:
        v = np.ascontiguousarray(m._value)
        rows, cols = v.shape[-2:]
        out = pooled_empty(v.shape, v.dtype)
        _tri_kernel(bits(v.reshape(-1)), bits(out.reshape(-1)), rows, cols,
                    builtins.min(builtins.max(k, -rows - 1), cols + 1), upper)
        return Array._new(out, m._weak)
      return general(m, k)
    return f
  return wrap


def _tri_mask(m, k, upper):
  rows, cols = m.shape[-2:]
  mask = tri(rows, cols, k - 1 if upper else k, dtype=np.bool_)
  return lax.bitwise_not(mask) if upper else mask


@_tri_select_eager(upper=False)
@staged
def tril(m, k=0):
  """Zero the elements above the ``k``-th diagonal (last two axes).

  Args:
    m: input array, at least 2-d.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    An array of the shape and dtype of ``m``.

  Examples:
    >>> jnp.tril(jnp.ones((3, 3), dtype=int))
    Array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]], dtype=int64)
  """
  m = _util.ensure_arraylike("tril", m)
  if m.ndim < 2:
    raise ValueError("Argument to jax.numpy.tril must be at least 2D")
  mask = _util.broadcast_to(_tri_mask(m, _util.index(k, "k"), False), m.shape)
  return lax.select(mask, m, lax.full_like(m, 0))


@_tri_select_eager(upper=True)
@staged
def triu(m, k=0):
  """Zero the elements below the ``k``-th diagonal (last two axes).

  Args:
    m: input array, at least 2-d.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.

  Returns:
    An array of the shape and dtype of ``m``.

  Examples:
    >>> jnp.triu(jnp.ones((3, 3), dtype=int), k=1)
    Array([[0, 1, 1],
           [0, 0, 1],
           [0, 0, 0]], dtype=int64)
  """
  m = _util.ensure_arraylike("triu", m)
  if m.ndim < 2:
    raise ValueError("Argument to jax.numpy.triu must be at least 2D")
  mask = _util.broadcast_to(_tri_mask(m, _util.index(k, "k"), True), m.shape)
  return lax.select(mask, m, lax.full_like(m, 0))


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
  """Coordinate arrays from 1-d coordinate vectors (``indexing`` 'xy' or 'ij').

  Args:
    xi: 1-d coordinate arrays.
    copy: whether to copy the input; nbjax arrays are immutable, so this rarely matters.
    sparse: if True, return broadcastable arrays instead of full grids.
    indexing: ``'xy'`` (Cartesian, default) or ``'ij'`` (matrix) indexing.

  Returns:
    A list of coordinate arrays, one per input.

  Examples:
    >>> jnp.meshgrid(jnp.array([1, 2, 3]), jnp.array([4, 5]))
    [Array([[1, 2, 3],
           [1, 2, 3]], dtype=int64), Array([[4, 4, 4],
           [5, 5, 5]], dtype=int64)]
  """
  xs = [_util.ensure_arraylike("meshgrid", x) for x in xi]
  if not copy:
    raise ValueError("jax.numpy.meshgrid only supports copy=True")
  if indexing not in ("xy", "ij"):
    raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
  if builtins.any(x.ndim != 1 for x in xs):
    raise ValueError("Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                     f"{[x.shape for x in xs]}")
  shape = [x.shape[0] for x in xs]
  if indexing == "xy" and len(xs) >= 2:
    shape[0], shape[1] = shape[1], shape[0]
  out = []
  for i, x in enumerate(xs):
    dim = 1 - i if indexing == "xy" and len(xs) >= 2 and i < 2 else i
    if sparse:
      s = [1] * len(xs)
      s[dim] = x.shape[0]
      out.append(lax.reshape(x, tuple(s)))
    else:
      out.append(lax.broadcast_in_dim(x, tuple(shape), (dim,)))
  return out


def tril_indices(n, k=0, m=None):
  """Indices of the lower triangle of an ``(n, m)`` array (static).

  Args:
    n: number of rows.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.
    m: number of columns (default: ``n``).

  Returns:
    A tuple of two index arrays (rows, columns).

  Examples:
    >>> jnp.tril_indices(3)
    (Array([0, 1, 1, 2, 2, 2], dtype=int64), Array([0, 0, 1, 0, 1, 2], dtype=int64))
  """
  n = core.concrete_or_error(operator.index, n, "n argument of jnp.tril_indices")
  m = n if m is None else core.concrete_or_error(operator.index, m,
                                                 "m argument of jnp.tril_indices")
  return tuple(Array._new(i.astype(dtypes.default_int_dtype())) for i in np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
  """Indices of the upper triangle of an ``(n, m)`` array (static).

  Args:
    n: number of rows.
    k: diagonal offset: 0 is the main diagonal, positive above, negative below.
    m: number of columns (default: ``n``).

  Returns:
    A tuple of two index arrays (rows, columns).

  Examples:
    >>> jnp.triu_indices(3)
    (Array([0, 0, 0, 1, 1, 2], dtype=int64), Array([0, 1, 2, 1, 2, 2], dtype=int64))
  """
  n = core.concrete_or_error(operator.index, n, "n argument of jnp.triu_indices")
  m = n if m is None else core.concrete_or_error(operator.index, m,
                                                 "m argument of jnp.triu_indices")
  return tuple(Array._new(i.astype(dtypes.default_int_dtype())) for i in np.triu_indices(n, k, m))


def diag_indices(n, ndim=2):
  """Indices of the main diagonal of an ``ndim``-d array of side ``n`` (static).

  Args:
    n: length of each axis.
    ndim: number of dimensions.

  Returns:
    A tuple of ``ndim`` index arrays.

  Examples:
    >>> jnp.diag_indices(3)
    (Array([0, 1, 2], dtype=int64), Array([0, 1, 2], dtype=int64))
  """
  i = lax.iota(dtypes.default_int_dtype(), _util.index(n, "n"))
  return (i,) * ndim


def indices(dimensions, dtype=None, sparse=False):
  """Grid index arrays of ``dimensions``.

  Args:
    dimensions: the shape of the grid.
    dtype: optional dtype of the result (by default inferred from the inputs).
    sparse: if True, return broadcastable sparse index arrays instead of a dense stack.

  Returns:
    An array of shape ``(len(dimensions), *dimensions)``, or a tuple of arrays when
    ``sparse``.

  Examples:
    >>> jnp.indices((2, 3))
    Array([[[0, 0, 0],
            [1, 1, 1]],
    <BLANKLINE>
           [[0, 1, 2],
            [0, 1, 2]]], dtype=int64)
  """
  iter(dimensions)  # (JAX iterates it: an int raises TypeError)
  dimensions = canonicalize_shape(dimensions)
  d = canonicalize_user_dtype(dtype, "indices") or dtypes.default_int_dtype()
  out = []
  for i, n in enumerate(dimensions):
    if sparse:
      s = [1] * len(dimensions)
      s[i] = n
      out.append(lax.reshape(lax.iota(d, n), tuple(s)))
    else:
      out.append(lax.broadcasted_iota(d, dimensions, i))
  if sparse:
    return tuple(out)
  return stack(out) if out else Array._new(np.zeros((0,), d), False)


def ix_(*args):
  """Open mesh from 1-d index sequences (for cross-product indexing).

  Args:
    args: 1-d integer or boolean sequences.

  Returns:
    A tuple of arrays, each with one non-unit axis.

  Examples:
    >>> jnp.ix_(jnp.array([0, 1]), jnp.array([2, 4]))
    (Array([[0],
           [1]], dtype=int64), Array([[2, 4]], dtype=int64))
  """
  out = []
  for i, a in enumerate(args):
    a = _util.ensure_arraylike("ix_", a)
    if a.ndim != 1:
      raise ValueError(f"Cross index must be 1 dimensional, got {a.ndim}")
    s = [1] * len(args)
    s[i] = a.shape[0]
    out.append(lax.reshape(a, tuple(s)))
  return tuple(out)
