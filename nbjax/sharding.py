"""Shardings: where an ``Array``'s data lives, as ``Array.sharding`` / ``addressable_shards``
report it.

Pipeline position: metadata on results. An ordinary ``Array`` (eager kernels, jit) lives on
the first CPU device (``SingleDeviceSharding``); a ``pmap`` output was computed as one piece
per device (``PmapSharding``: piece ``i`` on ``devices[i]`` is index ``i`` along the mapped
axis) and keeps those per-device XLA buffers as its ``addressable_shards`` beside the gathered
host value. Nothing here moves data.
"""
from __future__ import annotations

import numpy as np

__all__ = ["Sharding", "SingleDeviceSharding", "PmapSharding", "Shard"]


class Sharding:
  """Base class of nbjax's shardings."""

  @property
  def device_set(self):
    return set(self._device_assignment)

  @property
  def num_devices(self):
    return len(self._device_assignment)

  is_fully_addressable = True
  memory_kind = "device"


class SingleDeviceSharding(Sharding):
  """The whole array on one device."""

  def __init__(self, device, *, memory_kind=None):
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

  def __init__(self, devices, sharded_dim, size):
    self.devices = np.array(devices, dtype=object)
    self.sharded_dim, self._size = sharded_dim, size

  _device_assignment = property(lambda s: tuple(s.devices.flat))
  is_fully_replicated = property(lambda s: s.sharded_dim is None)

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
