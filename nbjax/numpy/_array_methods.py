"""Operators, methods and properties of ``Array`` and ``Tracer`` (attached here, as JAX does).

Pipeline position: importing ``nbjax.numpy`` calls ``attach()``, which sets ``+``, ``@``,
``[]``, ``.at``, ``.sum()``, ``.T``, ... on both ``nbjax.array.Array`` and
``nbjax.core.Tracer``, so eager arrays and traced values share one implementation: the
``nbjax.numpy`` functions. Binary operators keep the ufuncs' fast path (two Arrays of one
dtype and shape bind the primitive directly) and return ``NotImplemented`` for operand
types nbjax does not know, so Python can try the other operand's reflected method.
"""
from __future__ import annotations

import warnings

import numpy as np

from nbjax import core, dtypes
from nbjax.array import Array
from nbjax.registry import quiet_run
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax import lax
from nbjax.numpy import (_creation, _dot, _indexing, _manip, _reductions, _setops, _ufuncs,
                         _util)

_ACCEPTED = (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex)


def _accepted(x):
  return isinstance(x, _ACCEPTED) or hasattr(x, "__jax_array__")


def _unsupported(opchar, x, y):
  raise TypeError(f"unsupported operand type(s) for {opchar}: {type(x).__name__!r} and "
                  f"{type(y).__name__!r}")


def _forward(ufunc, opchar=None, rejected=()):
  """``self OP other`` with the ufunc's fast path; unknown ``other`` -> NotImplemented, but
  a container of ``rejected`` type -> TypeError (as JAX: ``x == [1]`` is no Python False,
  ``x + [1]`` no concatenation)."""
  general = ufunc._general

  def deferring(x, y):
    if _accepted(y):
      return general(x, y)
    if type(y) in rejected:
      _unsupported(opchar, x, y)
    return NotImplemented
  return _ufuncs._binary(ufunc.__name__, deferring, ufunc._prim_name, ufunc._kinds,
                         fast=ufunc._fast)


_SCALARS = frozenset({int, float, complex, bool})  # (checked before _accepted's slow ABC test)


def _reflected(fn, opchar=None, rejected=()):
  """``other OP self`` (called when ``other`` did not handle the operation)."""
  def op(self, other):
    if type(other) in _SCALARS or _accepted(other):
      return fn(other, self)
    if type(other) in rejected:
      _unsupported(opchar, other, self)
    return NotImplemented
  return op


def _plain(fn):
  def op(self, other):
    return fn(self, other) if type(other) in _SCALARS or _accepted(other) else NotImplemented
  return op


_BINARY = {  # name: (ufunc, reflected)
    "add": (_ufuncs.add, True), "sub": (_ufuncs.subtract, True),
    "mul": (_ufuncs.multiply, True), "truediv": (_ufuncs.true_divide, True),
    "floordiv": (_ufuncs.floor_divide, True), "mod": (_ufuncs.remainder, True),
    "and": (_ufuncs.bitwise_and, True), "or": (_ufuncs.bitwise_or, True),
    "xor": (_ufuncs.bitwise_xor, True), "lshift": (_ufuncs.left_shift, True),
    "rshift": (_ufuncs.right_shift, True),
    "eq": (_ufuncs.equal, False), "ne": (_ufuncs.not_equal, False),
    "lt": (_ufuncs.less, False), "le": (_ufuncs.less_equal, False),
    "gt": (_ufuncs.greater, False), "ge": (_ufuncs.greater_equal, False),
}
# JAX's TypeErrors for these exact operand types (subclasses, as namedtuples, are spared);
# `!=` names "==" in its message, as JAX's does
_REJECTED = {"eq": ("==", (dict, list, set, tuple)), "ne": ("==", (dict, list, set, tuple)),
             "add": ("+", (tuple, list)), "mul": ("*", (tuple, list))}
_OTHER_BINARY = {"pow": _ufuncs.power, "matmul": _dot.matmul, "divmod": _ufuncs.divmod}


def _astype(self, dtype, copy=False, device=None):
  """The array converted to ``dtype`` (``None``: the default float type); ``copy=True``
  always gives a new array. Complex to bool tests for nonzero (not the real part alone);
  complex to real warns of its deprecation, as JAX's."""
  del device
  d = _util.plain_dtype(dtype) if type(self) is Array and _ctx.trace is _EVAL else None
  if d is not None:  # eager: NumPy's cast where it is XLA's
    v = self._value
    if v.dtype.kind in "biu" and d.kind in "biuf" or v.dtype.kind == "f" and d.kind == "f":
      if d == v.dtype and not copy:
        return Array._new(v, False) if self._weak else self
      out = Array._new(quiet_run(v.astype, d), False)  # (overflow: inf, as XLA, unwarned)
      if not core.placement[0]:
        return out
      out = core.follow(out, self)
      if out is not None:  # (None: self is sharded, convert_element_type_p places the result)
        return out
  if dtype is None:
    dtype = dtypes.default_float_dtype()
  else:
    if isinstance(dtype, (Array, Tracer)):
      raise ValueError("Passing an array as a dtype argument is no longer supported; instead "
                       "of dtype=arr use dtype=arr.dtype.")
    try:
      dtype = _util.canonicalize_user_dtype(dtype, "astype")
    except TypeError:
      raise TypeError("JAX only supports number, bool, and string dtypes, got dtype "
                      f"{dtype} in astype") from None
  if self.dtype.kind == "c":
    if dtype.kind in "iuf":
      warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. Please "
                    "first use jnp.real or jnp.imag to take the real/imaginary component of "
                    "your input.", DeprecationWarning, stacklevel=2)
    elif dtype == np.bool_:
      return _ufuncs.not_equal(self, 0)
  out = _util.convert(self, dtype)
  return out.copy() if copy and out is self else out


def _reshape(self, *args, order="C", out_sharding=None):
  """``x.reshape(2, 3)`` or ``x.reshape((2, 3))`` (no ``shape=`` keyword, as JAX's)."""
  shape = args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args
  if out_sharding is None:
    return _manip.reshape(self, shape, order=order)
  return _manip.reshape(self, shape, order=order, out_sharding=out_sharding)


def _sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
  """``jnp.sum`` of the array. JAX 0.10.2's method drops ``initial`` (``x.sum(initial=10)``
  is ``jnp.sum(x)``), and so does this one, to give JAX's values."""
  del initial
  return _reductions.sum(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=where,
                         promote_integers=promote_integers)


def _clip(self, min=None, max=None):
  """``jnp.clip(self, min, max)`` (only these two, as JAX's method)."""
  return _manip.clip(self, min, max)


def _transpose(self, *axes):
  """``x.transpose()``, ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
  if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
    axes = axes[0]
  return _manip.transpose(self, axes or None)


def _view(self, dtype=None, type=None):
  """The array's bits reinterpreted as ``dtype`` (the last axis rescaled by the itemsizes'
  ratio), as ``jax.Array.view``."""
  if type is not None:
    raise NotImplementedError("`type` argument of array.view() is not supported.")
  if dtype is None:
    return self
  dtype = _util.canonicalize_user_dtype(dtype, "view")
  bits_in, bits_out = dtypes.itemsize_bits(self.dtype), dtypes.itemsize_bits(dtype)
  if self.ndim == 0:
    if bits_in != bits_out:
      raise ValueError("view() of a 0d array is only supported if the itemsize is unchanged.")
    return _manip.squeeze(_view(_manip.expand_dims(self, 0), dtype))
  if (self.shape[-1] * bits_in) % bits_out:
    raise ValueError("When changing to a larger dtype, its size must be a divisor "
                     "of the total size in bytes of the last axis of the array.")
  if self.dtype == dtype:
    return self
  if self.dtype == np.bool_:
    return _view(_astype(self, np.uint8), dtype)
  if self.dtype.kind == "c":  # interleaved (real, imag) pairs of the component float type
    parts = _manip.stack([_ufuncs.real(self), _ufuncs.imag(self)], axis=-1)
    return _view(_manip.reshape(parts, (*self.shape[:-1], 2 * self.shape[-1])), dtype)
  if dtype == np.bool_:
    return _astype(_view(self, np.uint8), np.bool_)
  if dtype.kind == "c":
    part = np.dtype(f"f{dtype.itemsize // 2}")
    out = _view(self, part)
    return lax.complex(out[..., 0::2], out[..., 1::2])
  if bits_in < bits_out:
    k = bits_out // bits_in
    return lax.bitcast_convert_type(
        _manip.reshape(self, (*self.shape[:-1], self.shape[-1] // k, k)), dtype)
  out = lax.bitcast_convert_type(self, dtype)
  if bits_in > bits_out:
    out = _manip.reshape(out, (*out.shape[:-2], out.shape[-2] * out.shape[-1]))
  return out


def _byteswap(self):
  """Each element's bytes reversed (same dtype), as ``jax.Array.byteswap``."""
  if self.dtype.kind == "c":
    return lax.complex(_byteswap(_ufuncs.real(self)), _byteswap(_ufuncs.imag(self)))
  if self.dtype.itemsize == 1:
    return _creation.array(self)
  b = lax.bitcast_convert_type(self, np.uint8)
  return lax.bitcast_convert_type(lax.rev(b, (self.ndim,)), self.dtype)


def _choose(self, choices, out=None, mode="raise"):
  return _setops.choose(self, choices, out=out, mode=mode)


def _compress(self, condition, axis=None, *, out=None, size=None, fill_value=0):
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
  return _indexing.compress(condition, self, axis=axis, size=size, fill_value=fill_value)


def _argpartition(self, kth, axis=-1):
  return _setops.argpartition(self, kth, axis=axis)


def _flat(self):
  raise NotImplementedError("JAX Arrays do not implement the arr.flat property: "
                            "consider arr.flatten() instead.")


def _flatten(self, order="C", *, out_sharding=None):
  return _manip.ravel(self, order, out_sharding=out_sharding)


def _item(self, *args):
  """The element as a Python scalar (concrete arrays only)."""
  v = core.concrete_or_error(None, self, "This occurred in the item() method of jax.Array")
  return np.asarray(v).item(*args)


def _tolist(self):
  v = core.concrete_or_error(
      None, self, f"The tolist() method was called on {self._error_repr()}.")
  return np.asarray(v).tolist()


def _tobytes(self, order="C"):
  v = core.concrete_or_error(
      None, self, f"The tobytes() method was called on {self._error_repr()}.")
  return np.asarray(v).tobytes(order)


def _nonzero(self, *, size=None, fill_value=None):
  return _indexing.nonzero(self, size=size, fill_value=fill_value)


_REVERSED = {n: tuple(range(n - 1, -1, -1)) for n in range(2, 9)}


def _T(self):
  """``x.T``: the axes reversed (``x`` itself below 2-D), straight to ``transpose_p``."""
  if type(self) is Array and _ctx.trace is _EVAL:  # eager: NumPy's reversed axes, in C order
    v = self._value
    if v.ndim < 2:
      return self
    out = Array._new(np.ascontiguousarray(v.T), self._weak)
    if not core.placement[0]:
      return out
    out = core.follow(out, self)
    if out is not None:  # (None: self is sharded, transpose_p places the result)
      return out
  perm = _REVERSED.get(self.ndim)
  if perm is None:
    return self if self.ndim < 2 else _manip.transpose(self)
  return lax.transpose_p.bind(self, permutation=perm)


def _matrix_T(self):
  return _manip.matrix_transpose(self)


def _round(self, decimals=0, out=None):
  return _ufuncs.round(self, decimals, out)


def _dunder_round(self, ndigits=None):
  """``round(x)``: an integer array (as builtin ``round``); ``round(x, n)``: same dtype."""
  out = _ufuncs.round(self, ndigits or 0)
  return _astype(out, int) if ndigits is None else out


def _contains(self, item):
  """``item in x``: ``x`` must be 1-D and ``item`` a scalar (JAX departs from NumPy)."""
  if item is None or isinstance(item, str):
    raise TypeError(f"Array.__contains__: unsupported operand type {type(item)}.")
  query = _util.ensure_arraylike("Array.__contains__", item)
  if self.ndim != 1:
    raise ValueError("Array.__contains__: search array must be one-dimensional, got "
                     f"arr.shape={self.shape}.")
  if query.ndim != 0:
    raise ValueError(f"Array.__contains__: query value must be a scalar, got query.shape="
                     f"{query.shape}")
  return _reductions.any(_ufuncs.equal(self, query))  # (`in` makes it a bool)


_METHODS = {
    "sum": _sum, "prod": _reductions.prod, "mean": _reductions.mean,
    "var": _reductions.var, "std": _reductions.std, "max": _reductions.max,
    "min": _reductions.min, "argmax": _reductions.argmax, "argmin": _reductions.argmin,
    "all": _reductions.all, "any": _reductions.any, "cumsum": _reductions.cumsum,
    "cumprod": _reductions.cumprod, "ptp": _reductions.ptp,
    "ravel": _manip.ravel, "swapaxes": _manip.swapaxes, "squeeze": _manip.squeeze,
    "clip": _clip, "sort": _manip.sort, "argsort": _manip.argsort,
    "repeat": _manip.repeat, "searchsorted": _manip.searchsorted,
    "take": _indexing.take, "diagonal": _indexing.diagonal, "trace": _indexing.trace,
    "conj": _ufuncs.conjugate, "conjugate": _ufuncs.conjugate, "dot": _dot.dot,
    "astype": _astype, "reshape": _reshape, "transpose": _transpose, "flatten": _flatten,
    "round": _round, "__round__": _dunder_round, "__contains__": _contains,
    "nonzero": _nonzero, "view": _view, "byteswap": _byteswap, "choose": _choose,
    "compress": _compress, "argpartition": _argpartition,
    "__getitem__": _indexing.getitem,
    "__neg__": _ufuncs._fn["negative"], "__pos__": _ufuncs.positive, "__abs__": _ufuncs.absolute,
    "__invert__": _ufuncs.invert,
}
_TRACER_ONLY = {"item": _item, "tolist": _tolist, "tobytes": _tobytes}
_PROPERTIES = {
    "T": _T, "mT": _matrix_T,
    "real": _ufuncs.real, "imag": _ufuncs.imag,
    "at": _indexing._IndexUpdateHelper, "flat": _flat,
}


def attach():
  """Install operators, methods and properties on ``Array`` and ``Tracer``."""
  for cls in (Array, Tracer):
    for name, (ufunc, reflected) in _BINARY.items():
      opchar, rejected = _REJECTED.get(name, (None, ()))
      setattr(cls, f"__{name}__", _forward(ufunc, opchar, rejected))
      if reflected:
        setattr(cls, f"__r{name}__", _reflected(ufunc, opchar, rejected))
    for name, fn in _OTHER_BINARY.items():
      setattr(cls, f"__{name}__", _plain(fn))
      setattr(cls, f"__r{name}__", _reflected(fn))
    for name, fn in _METHODS.items():
      setattr(cls, name, fn)
    for name, fn in _PROPERTIES.items():
      setattr(cls, name, property(fn))
  for name, fn in _TRACER_ONLY.items():
    setattr(Tracer, name, fn)
  from nbjax.numpy import _array_api
  for cls in (Array, Tracer):
    cls.__array_namespace__ = _array_api.array_namespace
    cls.to_device = _array_api.to_device
    cls.device = property(_array_api.device)
  Tracer.copy = lambda self: _creation.array(self)
  # static facts of a traced value, as JAX's tracers have them
  Tracer.itemsize = property(lambda self: np.dtype(self.dtype).itemsize)
  Tracer.nbytes = property(lambda self: np.dtype(self.dtype).itemsize * int(np.prod(self.shape)))
