"""``jnp.ufunc`` and ``jnp.frompyfunc``: NumPy's ufunc object (``reduce``, ``accumulate``,
``at``, ``reduceat``, ``outer``) over any JAX-compatible elementwise function.

Pipeline position: ``_ufuncs`` wraps its fast elementwise functions (``add``, ``multiply``,
... the names JAX makes ufuncs) with ``_builtin``: each gets a one-instance subclass whose
``__call__`` *is* the fast function (a staticmethod), so ``jnp.add(x, y)`` runs no extra
Python frame. Methods use JAX's fast implementations where JAX has one (``add.reduce`` is
``sum``, ``add.accumulate`` is ``cumsum``, ``maximum.reduce`` is ``max``, ...) and the
generic ``fori_loop``/``scan`` constructions otherwise (so user ufuncs from ``frompyfunc``
get every method); everything is traceable, so the methods work under ``jit``, ``vmap``
and ``grad``.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from nbjax import dtypes, lax
from nbjax.numpy import _reductions, _util
from nbjax.numpy._util import as_array, canonicalize_axes, canonicalize_axis, check_arraylike

__all__ = ["ufunc", "frompyfunc"]

_BOOL = np.dtype(np.bool_)

_AT_INPLACE_WARNING = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""


def _moveaxis(x, src, dst):
  from nbjax.numpy._manip import moveaxis
  return moveaxis(x, src, dst)


def _result_dtype(func, *args):
  """The dtype ``func`` gives on scalar operands like ``args`` (staged, no FLOPs)."""
  from nbjax.api import ShapeDtypeStruct, eval_shape
  return eval_shape(func, *(ShapeDtypeStruct((), as_array(a).dtype) for a in args)).dtype


class ufunc:
  """Universal functions which operate element-by-element on arrays (JAX implementation
  of :class:`numpy.ufunc`).

  Most users use the predefined ufuncs (``jnp.add``, ``jnp.multiply``, ...); build new
  ones with :func:`jax.numpy.frompyfunc`. Binary ufuncs have ``reduce``, ``accumulate``,
  ``at``, ``reduceat`` and ``outer``; ``nin``, ``nout``, ``nargs`` and ``identity``
  describe the function.
  """

  def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None, call=None,
               reduce=None, accumulate=None, at=None, reduceat=None):
    self.__doc__ = func.__doc__
    self.__name__ = name or func.__name__
    # read-only (a ufunc may be a static argument): stored privately, read by properties
    self.__static_props = {
        "func": func, "nin": operator.index(nin), "nout": operator.index(nout),
        "nargs": operator.index(nargs or nin), "identity": identity, "call": call,
        "reduce": reduce, "accumulate": accumulate, "at": at, "reduceat": reduceat}

  _func = property(lambda self: self.__static_props["func"])
  nin = property(lambda self: self.__static_props["nin"])
  nout = property(lambda self: self.__static_props["nout"])
  nargs = property(lambda self: self.__static_props["nargs"])
  identity = property(lambda self: self.__static_props["identity"])

  def _key(self):
    return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

  def __hash__(self):
    return hash(self._key())

  def __eq__(self, other):
    return isinstance(other, ufunc) and self._key() == other._key()

  def __repr__(self):
    return f"<jnp.ufunc '{self.__name__}'>"

  def __call__(self, *args, out=None, where=None):
    check_arraylike(self.__name__, *args)
    if out is not None:
      raise NotImplementedError(f"out argument of {self}")
    if where is not None:
      raise NotImplementedError(f"where argument of {self}")
    call = self.__static_props["call"]
    if call is not None:
      return call(*args)
    from nbjax.numpy._vectorize import vectorize
    return vectorize(self._func)(*args)

  def _check_binary(self, method):
    if self.nin != 2:
      raise ValueError(f"{method} only supported for binary ufuncs")
    if self.nout != 1:
      raise ValueError(f"{method} only supported for functions returning a single value")

  def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Reduction of ``a`` along ``axis`` by this binary ufunc (JAX implementation of
    :meth:`numpy.ufunc.reduce`).

    Args:
      a: input array.
      axis: integer axis to reduce over (default 0), or None for all axes.
      dtype: optional dtype of the result.
      out: unused by JAX.
      keepdims: if True, reduced axes stay in the result with size 1.
      initial: initial value of the reduction (default: the ufunc's identity, if any).
      where: optional boolean mask of the elements to include.

    Returns:
      The reduced array; e.g. ``jnp.add.reduce`` is ``jnp.sum`` along ``axis=0``.
    """
    check_arraylike(f"{self.__name__}.reduce", a)
    self._check_binary("reduce")
    if out is not None:
      raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
    if initial is not None:
      check_arraylike(f"{self.__name__}.reduce", initial)
    if where is not None:
      check_arraylike(f"{self.__name__}.reduce", where)
      if self.identity is None and initial is None:
        raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, "
                         "so to use a where mask one has to specify 'initial'.")
      if as_array(where).dtype != _BOOL:
        raise ValueError(f"where argument must have dtype=bool; got dtype={as_array(where).dtype}")
    reduce = self.__static_props["reduce"] or self._reduce_via_scan
    return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

  def _reduce_via_scan(self, arr, axis=0, dtype=None, keepdims=False, initial=None,
                       where=None):
    arr = as_array(arr)
    if initial is None:
      initial = self.identity
    dtype = _result_dtype(self._func, arr, arr) if dtype is None else \
        _util.canonicalize_user_dtype(dtype, "astype")  # (JAX's arr.astype(dtype))
    if where is not None:
      where = _util.broadcast_to(as_array(where), arr.shape)
    if isinstance(axis, tuple):
      tuple(canonicalize_axis(a, arr.ndim) for a in axis)
      raise NotImplementedError("tuple of axes")
    if axis is None:
      final_shape = (1,) * arr.ndim if keepdims else ()
      arr = lax.reshape(arr, (arr.size,))
      where = None if where is None else lax.reshape(where, (where.size,))
      axis = 0
    else:
      axis = canonicalize_axis(axis, arr.ndim)
      final_shape = (*arr.shape[:axis], *((1,) if keepdims else ()), *arr.shape[axis + 1:])
    if axis != 0:
      arr = _moveaxis(arr, axis, 0)
      where = None if where is None else _moveaxis(where, axis, 0)
    if arr.shape[0] == 0:
      if initial is None:
        raise ValueError(f"zero-size array to reduction operation {self.__name__} which has "
                         "no identity")
      return lax.full(final_shape, initial, dtype)

    def body(i, val):
      new = self(val, arr[i].astype(dtype))
      return new if where is None else lax.select(where[i], new, val)
    start = 1 if initial is None else 0
    init = arr[0] if initial is None else initial
    init = _util.broadcast_to(as_array(init).astype(dtype), arr.shape[1:])
    result = lax.fori_loop(start, arr.shape[0], body, init)
    return lax.reshape(result, final_shape) if keepdims else result

  def accumulate(self, a, axis=0, dtype=None, out=None):
    """Cumulative reduction of ``a`` along ``axis`` by this binary ufunc (JAX
    implementation of :meth:`numpy.ufunc.accumulate`); ``jnp.add.accumulate`` is
    ``jnp.cumsum``.

    Args:
      a: input array.
      axis: integer axis to accumulate along (default 0).
      dtype: optional dtype of the result.
      out: unused by JAX.
    """
    self._check_binary("accumulate")
    if out is not None:
      raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
    accumulate = self.__static_props["accumulate"] or self._accumulate_via_scan
    return accumulate(a, axis=axis, dtype=dtype)

  def _accumulate_via_scan(self, arr, axis=0, dtype=None):
    check_arraylike(f"{self.__name__}.accumulate", arr)
    arr = as_array(arr)
    dtype = _result_dtype(self._func, arr, arr) if dtype is None else \
        _util.canonicalize_user_dtype(dtype, "astype")  # (JAX's arr.astype(dtype))
    if axis is None or isinstance(axis, tuple):
      raise ValueError("accumulate does not allow multiple axes")
    axis = canonicalize_axis(axis, np.ndim(arr))
    if arr.size == 0:
      return lax.full(arr.shape, 0, dtype)
    arr = _moveaxis(arr, axis, 0).astype(dtype)

    def step(carry, x):
      y = self(carry, x).astype(dtype)
      return y, y
    _, rest = lax.scan(step, arr[0], arr[1:])
    from nbjax.numpy._manip import concatenate
    return _moveaxis(concatenate([arr[:1], rest]), 0, axis)

  def at(self, a, indices, b=None, /, *, inplace=True):
    """``a`` with this ufunc applied at ``indices`` (with operand ``b`` for binary ufuncs):
    JAX implementation of :meth:`numpy.ufunc.at`.

    JAX arrays are immutable, so the updated copy is returned, and ``inplace=False`` must be
    passed as a reminder of that difference (the default raises).
    """
    if inplace:
      raise NotImplementedError(_AT_INPLACE_WARNING)
    at = self.__static_props["at"] or self._at_via_scan
    return at(a, indices) if b is None else at(a, indices, b)

  def _at_via_scan(self, a, indices, *args):
    check_arraylike(f"{self.__name__}.at", a, *args)
    dtype = _result_dtype(self._func, a, *args)
    a = as_array(a).astype(dtype)
    args = tuple(as_array(arg).astype(dtype) for arg in args)
    indices = _index_tuple(indices)
    if not indices:
      return a
    shapes = [np.shape(i) for i in indices if not isinstance(i, slice)]
    shape = shapes and _util.broadcast_shapes(*shapes)
    if not shape:
      return a.at[indices].set(self(a.at[indices].get(), *args))
    n = math.prod(shape)
    if args:
      arg = _util.broadcast_to(args[0], (*shape, *args[0].shape[len(shape):]))
      args = (lax.reshape(arg, (n, *args[0].shape[len(shape):])),)
    indices = [i if isinstance(i, slice) else
               lax.reshape(_util.broadcast_to(as_array(i), shape), (n,)) for i in indices]

    def body(k, a):
      idx = tuple(i if isinstance(i, slice) else i[k] for i in indices)
      return a.at[idx].set(self(a.at[idx].get(), *(arg[k] for arg in args)))
    return lax.fori_loop(0, n, body, a)

  def reduceat(self, a, indices, axis=0, dtype=None, out=None):
    """Reductions of ``a`` between consecutive ``indices`` along ``axis`` (JAX
    implementation of :meth:`numpy.ufunc.reduceat`): element ``i`` reduces
    ``a[indices[i]:indices[i+1]]``, or is ``a[indices[i]]`` where ``indices[i] >=
    indices[i+1]``.

    Args:
      a: array of one or more dimensions.
      indices: one-dimensional integer array of segment starts.
      axis: integer axis to reduce along (default 0).
      dtype: optional dtype of the result.
      out: unused by JAX.
    """
    self._check_binary("reduceat")
    if out is not None:
      raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
    reduceat = self.__static_props["reduceat"] or self._reduceat_via_scan
    return reduceat(a, indices, axis=axis, dtype=dtype)

  def _reduceat_via_scan(self, a, indices, axis=0, dtype=None):
    check_arraylike(f"{self.__name__}.reduceat", a, indices)
    from nbjax.numpy._indexing import take
    from nbjax.numpy._setops import append
    a = as_array(a)
    idx = _index_tuple(indices)
    if len(idx) != 1:
      raise ValueError(f"reduceat: indices must be one-dimensional, got {np.shape(indices)=}")
    indices = as_array(idx[0])
    if a.ndim == 0:
      raise ValueError(f"reduceat: a must have 1 or more dimension, got {a.shape=}")
    if indices.ndim != 1:
      raise ValueError(f"reduceat: indices must be one-dimensional, got {indices.shape=}")
    if dtype is not None:
      a = a.astype(_util.canonicalize_user_dtype(dtype))
    if axis is None or isinstance(axis, (tuple, list)):
      raise ValueError("reduceat requires a single integer axis.")
    axis = canonicalize_axis(axis, a.ndim)
    out = take(a, indices, axis=axis)
    others = tuple(i for i in range(out.ndim) if i != axis)
    ind = lax.expand_dims(append(indices, a.shape[axis]), others)
    start = lax.slice_in_dim(ind, 0, ind.shape[axis] - 1, axis=axis)
    end = lax.slice_in_dim(ind, 1, ind.shape[axis], axis=axis)

    def body(i, out):
      inside = (i > start) & (i < end)
      new = self(out, take(a, lax.expand_dims(i, (0,)), axis=axis))
      return _where(inside, new, out)
    return lax.fori_loop(0, a.shape[axis], body, out)

  def outer(self, A, B, /):
    """This binary ufunc applied to every pair of elements of ``A`` and ``B`` (JAX
    implementation of :meth:`numpy.ufunc.outer`): shape ``(*A.shape, *B.shape)``."""
    self._check_binary("outer")
    check_arraylike(f"{self.__name__}.outer", A, B)
    A, B = as_array(A), as_array(B)
    # equal ranks, so that rank promotion (off under jax_numpy_rank_promotion='raise') is unused
    return self(lax.reshape(A, (*A.shape, *(1,) * B.ndim)), lax.reshape(B, (*(1,) * A.ndim, *B.shape)))


def _where(c, x, y):
  from nbjax.numpy._manip import where
  return where(c, x, y)


def _index_tuple(idx):
  """An index as a tuple (a NumPy list index is one integer array, as JAX)."""
  if isinstance(idx, tuple):
    return idx
  if isinstance(idx, list):
    return (as_array(np.asarray(idx)) if all(np.ndim(i) == 0 for i in idx) else idx,) \
        if not any(isinstance(i, slice) or i is None or i is Ellipsis for i in idx) else tuple(idx)
  return (idx,)


def frompyfunc(func, /, nin, nout, *, identity=None):
  """Create a JAX ufunc from an arbitrary JAX-compatible scalar function.

  Args:
    func: a callable that takes ``nin`` scalar arguments and returns ``nout`` outputs.
    nin: integer specifying the number of scalar inputs.
    nout: integer specifying the number of scalar outputs.
    identity: (optional) a scalar specifying the identity of the operation, if any.

  Returns:
    wrapped: :class:`jax.numpy.ufunc` wrapper of ``func``; every ufunc method works on it.
  """
  return ufunc(func, nin, nout, identity=identity)


def _builtin(f, nin, *, identity=None, reduce=None, accumulate=None, at=None):
  """``f`` (a fast elementwise function taking ``out=``/``where=`` keywords) as a ufunc of
  its own one-instance subclass, whose ``__call__`` is ``f`` itself: calling the ufunc costs
  no extra Python frame over calling ``f``."""
  cls = type("ufunc", (ufunc,), {"__call__": staticmethod(f), "__module__": __name__,
                                 "__qualname__": "ufunc", "__slots__": ()})
  u = cls(f, nin, 1, identity=identity, call=f, reduce=reduce, accumulate=accumulate, at=at)
  for k in ("_general", "_prim_name", "_kinds", "_fast"):  # the operators' fast paths read these
    if hasattr(f, k):
      setattr(u, k, getattr(f, k))
  return u

# ----------------------------------------------------------------- JAX's fast methods


def _bool_at(method):
  def at(a, indices, b):
    a = as_array(a)
    if a.dtype == _BOOL:  # as JAX: through int32, since scatters do not combine bools
      b = _util.convert(_util.convert(as_array(b), _BOOL), np.int32)
      return _util.convert(getattr(_util.convert(a, np.int32).at[indices], method)(b), _BOOL)
    return getattr(a.at[indices], method)(b)
  return at


def _subtract_at(a, indices, b):
  return as_array(a).at[indices].subtract(b)


def _bit_reduce(name, lax_fn, combine, init, to_bool):
  """JAX's ``_reduce_bitwise_*``/``_reduce_logical_*``: integers (or bools) reduced by a
  bitwise monoid with identity ``init``."""
  def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    a = _util.ensure_arraylike(name, a)
    if dtype is not None:
      a = _util.convert(a, _util.canonicalize_user_dtype(dtype, name))
    if to_bool:
      a = a if a.dtype == _BOOL else lax.ne(a, _util.lit(0, a.dtype, True))
    elif not (a.dtype == _BOOL or dtypes.is_int(a.dtype)):
      raise ValueError(f"{name} requires integer dtype; got {a.dtype}")
    axes = canonicalize_axes(axis, a.ndim)
    if where is not None:
      w = _util.broadcast_to(_util.convert(as_array(where), _BOOL), a.shape)
      a = lax.select(w, a, lax.full_like(a, np.array(init).astype(a.dtype)))
    out = lax_fn(a, axes) if axes else a
    if initial is not None:
      out = combine(out, _util.convert(as_array(initial), out.dtype))
    return lax.expand_dims(out, tuple(sorted(axes))) if keepdims and axes else out
  reduce.__name__ = name
  return reduce


_reduce_bitwise_and = _bit_reduce("reduce_bitwise_and", lax.reduce_and, lax.bitwise_and, -1,
                                  False)
_reduce_bitwise_or = _bit_reduce("reduce_bitwise_or", lax.reduce_or, lax.bitwise_or, 0, False)
_reduce_bitwise_xor = _bit_reduce("reduce_bitwise_xor", lax.reduce_xor, lax.bitwise_xor, 0,
                                  False)
_reduce_logical_and = _bit_reduce("reduce_logical_and", lax.reduce_and, lax.bitwise_and, True,
                                  True)
_reduce_logical_or = _bit_reduce("reduce_logical_or", lax.reduce_or, lax.bitwise_or, False,
                                 True)
_reduce_logical_xor = _bit_reduce("reduce_logical_xor", lax.reduce_xor, lax.bitwise_xor, False,
                                  True)


def _extreme(fn):
  def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    if dtype is not None:
      a = as_array(a).astype(_util.canonicalize_user_dtype(dtype, fn.__name__))
    return fn(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
  return reduce


def _logsumexp(base_e):
  def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    from nbjax.numpy import _ufuncs
    name = "jnp.logaddexp.reduce" if base_e else "jnp.logaddexp2.reduce"
    if dtype is not None:
      _util.canonicalize_user_dtype(dtype, name)  # checked, then unused (as JAX)
    a, = _util.promote_dtypes_inexact(_util.ensure_arraylike(name, a))
    if not base_e:  # log2(sum 2**a) = logsumexp(a ln 2) / ln 2
      a = lax.mul(a, _util.lit(np.log(2), a.dtype, True))
    axes = canonicalize_axes(axis, a.ndim)
    re = lax.real(a) if dtypes.is_complex(a.dtype) else a
    amax = _reductions.max(re, axis=axes, keepdims=True, where=where, initial=-np.inf)
    amax = lax.stop_gradient(lax.select(lax.is_finite(amax), amax, lax.full_like(amax, 0)))
    e = lax.exp(lax.sub(a, _util.broadcast_to(_util.convert(amax, a.dtype), a.shape)))
    s = _reductions.sum(e, axis=axes, keepdims=keepdims, where=where)
    m = amax if keepdims else lax.squeeze(amax, axes)
    out = lax.add(lax.log(s), _util.convert(m, s.dtype))
    if not base_e:
      out = lax.div(out, _util.lit(np.log(2), out.dtype, True))
    if initial is None:
      return out
    return (_ufuncs.logaddexp if base_e else _ufuncs.logaddexp2)(initial, out)
  return reduce
