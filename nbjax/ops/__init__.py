"""``nbjax.ops``: JAX's segment reductions (``jax.ops.segment_sum`` etc.).

A library layer over the scatter primitives (``nbjax/lax/indexing.py``) through
``nbjax.numpy``'s indexed-update path: each reduction scatters ``data`` into an array of the
reduction's identity, one row per segment.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from nbjax import dtypes, lax
from nbjax import numpy as jnp
from nbjax.numpy import _util
from nbjax.numpy._indexing import scatter_update

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op, dtype):
  if op == "add":
    return 0
  if op == "mul":
    return 1
  big = op == "min"
  if dtype == np.bool_:
    return big
  if dtypes.is_int(dtype):
    info = np.iinfo(dtype)
    return info.max if big else info.min
  return np.inf if big else -np.inf


_SCATTER = {"add": lax.scatter_add, "mul": lax.scatter_mul, "min": lax.scatter_min,
            "max": lax.scatter_max}
_REDUCE = {"add": jnp.sum, "mul": jnp.prod, "min": jnp.min, "max": jnp.max}


def _segment(name, op, data, segment_ids, num_segments, indices_are_sorted, unique_indices,
             bucket_size, mode, out_sharding):
  _util.check_arraylike(name, data, segment_ids)
  if out_sharding is not None:
    raise NotImplementedError(f"{name}: out_sharding is not supported by nbjax (one CPU "
                              "device); pass None")
  mode = lax.GatherScatterMode.FILL_OR_DROP if mode is None else mode
  data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
  dtype = data.dtype
  if num_segments is None:
    num_segments = np.max(np.asarray(_util.concrete(
        segment_ids, f"{name}() `num_segments` argument."))) + 1
  num_segments = operator.index(_util.concrete(num_segments,
                                               f"{name}() `num_segments` argument."))
  if num_segments < 0:
    raise ValueError("num_segments must be non-negative.")
  kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            normalize_indices=False)
  fill = _identity(op, dtype)
  if bucket_size is None:
    out = jnp.full((num_segments,) + data.shape[1:], fill, dtype=dtype)
    return scatter_update(out, segment_ids, data, _SCATTER[op], **kw)
  num_buckets = math.ceil(segment_ids.size / bucket_size)
  out = jnp.full((num_buckets, num_segments) + data.shape[1:], fill, dtype=dtype)
  out = scatter_update(out, (jnp.arange(segment_ids.shape[0]) // bucket_size,
                             segment_ids[None, :]), data, _SCATTER[op], **kw)
  return _REDUCE[op](out, axis=0).astype(dtype)


def _make(op, what):
  name = "segment_" + {"add": "sum", "mul": "prod"}.get(op, op)

  def segment(data, segment_ids, num_segments=None, indices_are_sorted=False,
              unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    return _segment(name, op, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode, out_sharding)
  segment.__name__ = segment.__qualname__ = name
  segment.__doc__ = f"""Computes the {what} within segments of an array (``jax.ops.{name}``).

  Args:
    data: an array; its leading axis is segmented.
    segment_ids: an int array of ``data.shape[0]`` segment indices (values outside
      ``[0, num_segments)`` are dropped, or clamped with ``mode='clip'``).
    num_segments: the output's leading size, static; default ``max(segment_ids) + 1``
      (which needs concrete ids).
    indices_are_sorted, unique_indices: promises about ``segment_ids`` passed to the scatter.
    bucket_size: reduce in buckets of this many elements, then across buckets.
    mode: a ``lax.GatherScatterMode`` (default ``FILL_OR_DROP``).

  Returns:
    An array of shape ``(num_segments,) + data.shape[1:]``; an empty segment holds the
    identity of the {what}.
  """
  return segment


segment_sum = _make("add", "sum")
segment_prod = _make("mul", "product")
segment_max = _make("max", "maximum")
segment_min = _make("min", "minimum")
