"""Operators, methods and properties of ``Array`` and ``Tracer`` (attached here, as JAX does).

Pipeline position: importing ``nbjax.numpy`` calls ``attach()``, which sets ``+``, ``@``,
``[]``, ``.at``, ``.sum()``, ``.T``, ... on both ``nbjax.array.Array`` and
``nbjax.core.Tracer``, so eager arrays and traced values share one implementation: the
``nbjax.numpy`` functions. Binary operators keep the ufuncs' fast path (two Arrays of one
dtype and shape bind the primitive directly) and return ``NotImplemented`` for operand
types nbjax does not know, so Python can try the other operand's reflected method.
"""
from __future__ import annotations

import numpy as np

from nbjax import core
from nbjax.array import Array
from nbjax.core import Tracer
from nbjax.numpy import (_creation, _dot, _indexing, _manip, _reductions, _ufuncs, _util)

_ACCEPTED = (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex)


def _accepted(x):
  return isinstance(x, _ACCEPTED) or hasattr(x, "__jax_array__")


def _forward(ufunc):
  """``self OP other`` with the ufunc's fast path; unknown ``other`` -> NotImplemented."""
  general = ufunc._general

  def deferring(x, y):
    return general(x, y) if _accepted(y) else NotImplemented
  return _ufuncs._binary(ufunc.__name__, deferring, ufunc._prim_name, ufunc._kinds)


def _reflected(fn):
  """``other OP self`` (called when ``other`` did not handle the operation)."""
  def op(self, other):
    return fn(other, self) if _accepted(other) else NotImplemented
  return op


def _plain(fn):
  def op(self, other):
    return fn(self, other) if _accepted(other) else NotImplemented
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
_OTHER_BINARY = {"pow": _ufuncs.power, "matmul": _dot.matmul, "divmod": _ufuncs.divmod}


def _astype(self, dtype, copy=False, device=None):
  """The array converted to ``dtype``."""
  del copy, device
  return _util.convert(self, _util.canonicalize_user_dtype(dtype))


def _reshape(self, *args, order="C", **kw):
  """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
  shape = args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args
  if "shape" in kw:
    shape = kw.pop("shape")
  return _manip.reshape(self, shape, order=order, **kw)


def _transpose(self, *axes):
  """``x.transpose()``, ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
  if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
    axes = axes[0]
  return _manip.transpose(self, axes or None)


def _flatten(self, order="C"):
  return _manip.ravel(self, order)


def _item(self, *args):
  """The element as a Python scalar (concrete arrays only)."""
  v = core.concrete_or_error(None, self, "The item() method was called on a traced array.")
  return np.asarray(v).item(*args)


def _tolist(self):
  v = core.concrete_or_error(None, self, "The tolist() method was called on a traced array.")
  return np.asarray(v).tolist()


def _nonzero(self, *, size=None, fill_value=None):
  return _indexing.nonzero(self, size=size, fill_value=fill_value)


def _matrix_T(self):
  return _manip.matrix_transpose(self)


def _round(self, decimals=0, out=None):
  return _ufuncs.round(self, decimals, out)


def _dunder_round(self, ndigits=None):
  """``round(x)``: an integer array (as builtin ``round``); ``round(x, n)``: same dtype."""
  out = _ufuncs.round(self, ndigits or 0)
  return _astype(out, int) if ndigits is None else out


def _contains(self, item):
  return bool(_reductions.any(_ufuncs.equal(self, item)))


_METHODS = {
    "sum": _reductions.sum, "prod": _reductions.prod, "mean": _reductions.mean,
    "var": _reductions.var, "std": _reductions.std, "max": _reductions.max,
    "min": _reductions.min, "argmax": _reductions.argmax, "argmin": _reductions.argmin,
    "all": _reductions.all, "any": _reductions.any, "cumsum": _reductions.cumsum,
    "cumprod": _reductions.cumprod, "ptp": _reductions.ptp,
    "ravel": _manip.ravel, "swapaxes": _manip.swapaxes, "squeeze": _manip.squeeze,
    "clip": _manip.clip, "sort": _manip.sort, "argsort": _manip.argsort,
    "repeat": _manip.repeat, "searchsorted": _manip.searchsorted,
    "take": _indexing.take, "diagonal": _indexing.diagonal, "trace": _indexing.trace,
    "conj": _ufuncs.conjugate, "conjugate": _ufuncs.conjugate, "dot": _dot.dot,
    "astype": _astype, "reshape": _reshape, "transpose": _transpose, "flatten": _flatten,
    "round": _round, "__round__": _dunder_round, "__contains__": _contains,
    "nonzero": _nonzero,
    "__getitem__": _indexing.getitem,
    "__neg__": _ufuncs._fn["negative"], "__pos__": _ufuncs.positive, "__abs__": _ufuncs.absolute,
    "__invert__": _ufuncs.invert,
}
_TRACER_ONLY = {"item": _item, "tolist": _tolist}
_PROPERTIES = {
    "T": lambda self: _manip.transpose(self), "mT": _matrix_T,
    "real": _ufuncs.real, "imag": _ufuncs.imag,
    "at": _indexing._IndexUpdateHelper,
}


def attach():
  """Install operators, methods and properties on ``Array`` and ``Tracer``."""
  for cls in (Array, Tracer):
    for name, (ufunc, reflected) in _BINARY.items():
      setattr(cls, f"__{name}__", _forward(ufunc))
      if reflected:
        setattr(cls, f"__r{name}__", _reflected(ufunc))
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
