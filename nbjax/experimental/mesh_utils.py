"""``nbjax.experimental.mesh_utils``: JAX's helpers arranging devices into a mesh array for
``nbjax.sharding.Mesh`` (CPU devices in their order; no TPU/GPU topology)."""
from __future__ import annotations

import collections
import math

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

# device kind -> handler(mesh_shape, devices, contiguous_submeshes=...) -> mesh or None
device_kind_handler_dict: dict = {}


def _sizes(shape):
  try:
    return tuple(int(s) for s in shape)
  except (TypeError, ValueError):
    return None


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes=False,
                       allow_split_physical_axes=False):
  """An array of ``devices`` (default: all of them) of shape ``mesh_shape``, to build a
  :class:`nbjax.sharding.Mesh` from.

  Raises:
    ValueError: if the number of devices is not the product of ``mesh_shape``.
  """
  if devices is None:
    from nbjax import devices as _devices
    devices = _devices()
  shape = _sizes(mesh_shape)
  if shape is None:
    raise ValueError("`mesh_shape` passed to `create_device_mesh` should be a sequence of "
                     f"ints. Got {mesh_shape}")
  if math.prod(shape) != len(devices):
    raise ValueError(f"Number of devices {len(devices)} must equal the product of mesh_shape "
                     f"{shape}")
  handler = device_kind_handler_dict.get(devices[-1].device_kind)
  if handler is not None:
    mesh = handler(shape, devices, contiguous_submeshes=contiguous_submeshes)
    if mesh is not None:
      return mesh
  return np.asarray(devices).reshape(shape)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule=False, should_sort_granules_by_key=True,
                              allow_split_physical_axes=False):
  """A mesh for hybrid parallelism: a ``mesh_shape`` mesh within each granule (a slice, or a
  process with ``process_is_granule``) and the granules laid out as ``dcn_mesh_shape``; the
  result has shape ``mesh_shape * dcn_mesh_shape`` (elementwise)."""
  if devices is None:
    from nbjax import devices as _devices
    devices = _devices()
  attr = "process_index" if process_is_granule else "slice_index"
  if not hasattr(devices[0], attr):
    raise ValueError(f"Device {devices[0]} does not have attribute {attr}. See "
                     "`process_is_granule` option.")
  groups = collections.defaultdict(list)
  for d in devices:
    groups[getattr(d, attr)].append(d)
  granules = ([groups[k] for k in sorted(groups)] if should_sort_granules_by_key
              else list(groups.values()))
  if np.prod(dcn_mesh_shape) != len(granules):
    raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                     f"dcn_mesh_shape {dcn_mesh_shape}")
  meshes = [create_device_mesh(mesh_shape, g) for g in granules]
  index = np.arange(len(granules)).reshape(dcn_mesh_shape)
  blocks = np.vectorize(lambda i: meshes[i], otypes=[object])(index)
  return np.block(blocks.tolist())
