"""Arrays of user-defined extended dtypes (JAX's ``jax._src.earray.EArray``).

Pipeline position: beside ``Array``. An extended dtype (a ``dtypes.ExtendedDType`` whose
``_rules`` give ``physical_element_aval`` and ``allow_conversion``) is represented by an array
of its physical dtype with the element's shape as trailing axes; ``lax.convert_element_type``
to it wraps that array (``to_edtype``), and back to the physical dtype unwraps it
(``from_edtype``). To the transformations an ``EArray`` is a node over its physical data (a
leaf to users, as key arrays), so it passes through ``jit`` and ``vmap``.
"""
from __future__ import annotations

import math

import numpy as np

from nbjax import _tree_util as tree_util, core, dtypes
from nbjax.array import Array


def physical_element_aval(edtype):
  """The shape and dtype of one element of ``edtype`` in its physical representation."""
  a = edtype._rules.physical_element_aval(edtype)
  return core.ShapedArray(tuple(a.shape), np.dtype(a.dtype))


def _allows(rules, hook, src, dst):
  f = getattr(rules, hook, None)  # (as JAX's: a convert_to/convert_from rule takes precedence)
  return f(src, dst) if f is not None else getattr(rules, "allow_conversion", False)


class EArray:
  """An array of extended dtype ``aval.dtype`` over its physical data ``_data`` (shape
  ``aval.shape + physical_element_aval(dtype).shape``)."""
  __slots__ = ("_dtype", "_data")
  __array_priority__ = 100

  def __init__(self, dtype, data):
    self._dtype, self._data = dtype, data

  dtype = property(lambda self: self._dtype)
  weak_type = False

  @property
  def shape(self):
    s = tuple(self._data.shape)
    return s[:len(s) - len(physical_element_aval(self._dtype).shape)]

  ndim = property(lambda self: len(self.shape))
  size = property(lambda self: math.prod(self.shape))
  aval = property(lambda self: core.ShapedArray(self.shape, self._dtype))

  def __len__(self):
    if not self.shape:
      raise TypeError("len() of unsized object")
    return self.shape[0]

  def block_until_ready(self):
    self._data.block_until_ready()
    return self

  def __repr__(self):
    return f"EArray({self._data!r}, dtype={self._dtype.name})"


def _name(d):
  return d.name if isinstance(d, dtypes.ExtendedDType) else np.dtype(d).name


def to_edtype(x, edtype):
  """``x`` (an array of ``edtype``'s physical dtype, with its element shape as trailing axes)
  as an array of ``edtype``, with JAX's errors."""
  d = dtypes.dtype(x)
  if not _allows(edtype._rules, "convert_to", d, edtype):
    raise ValueError(f"Cannot convert_element_type from {_name(d)} to {_name(edtype)}")
  rep = physical_element_aval(edtype)
  if d != rep.dtype:
    raise ValueError(
        "can only convert to extended dtype from its representation dtype, but tried to "
        f"convert from {_name(d)} to {_name(edtype)} which doesn't match the representation "
        f"type {_name(rep.dtype)}.")
  shape = tuple(np.shape(x))
  if len(shape) < rep.ndim:
    raise ValueError(
        "can only convert to extended dtype from an array of its representation type, but "
        f"the extended dtype {_name(edtype)} has a representation shape {rep.shape} (rank "
        f"{rep.ndim}) while the given representation array has shape {shape} (rank "
        f"{len(shape)} < {rep.ndim}).")
  suffix = shape[len(shape) - rep.ndim:]
  if suffix != rep.shape:
    raise ValueError(
        "can only convert to extended dtype from an array of its representation type, but "
        f"the extended dtype {_name(edtype)} has a representation shape {rep.shape} while the "
        f"given representation array has shape {shape}, so the shape suffix does not match: "
        f"given {suffix} but required {rep.shape}.")
  return EArray(edtype, x if isinstance(x, (Array, core.Tracer)) else Array(x))


def from_edtype(x, new_dtype):
  """The physical data of ``x`` (an array of an extended dtype) when ``new_dtype`` is its
  representation dtype, with JAX's errors."""
  old = x.dtype
  if isinstance(new_dtype, dtypes.ExtendedDType):
    if new_dtype == old:
      return x
    old_rep, new_rep = (physical_element_aval(d).dtype for d in (old, new_dtype))
    raise ValueError(
        f"cannot directly convert between extended dtypes: from {_name(old)} to "
        f"{_name(new_dtype)}. Instead, convert to and from their representation dtypes, e.g.:"
        f"\n{_name(old)} -> {_name(old_rep)} -> {_name(new_rep)} -> {_name(new_dtype)}")
  new_dtype = np.dtype(new_dtype)
  if not _allows(old._rules, "convert_from", old, new_dtype):
    raise ValueError(f"Cannot convert_element_type from {_name(old)} to {_name(new_dtype)}")
  rep = physical_element_aval(old)
  if rep.dtype != new_dtype:
    raise ValueError(
        "can only convert from extended dtype to its representation dtype, but tried to "
        f"convert from {_name(old)} to {_name(new_dtype)} which doesn't match the "
        f"representation type {_name(rep.dtype)}.")
  return x._data


tree_util.register_opaque_node(EArray, lambda e: ((e._data,), e._dtype),
                               lambda d, kids: EArray(d, kids[0]),
                               lambda d: len(physical_element_aval(d).shape))
Array.register(EArray)  # isinstance(x, jax.Array), as JAX's
