"""``nbjax.experimental.multihost_utils``: moving host values between the processes of a
run (``nbjax.distributed.initialize``), as ``jax.experimental.multihost_utils``.

Pipeline position: on top of sharded ``jit``. Each helper builds a global Array with one
block per process over a (processes, local devices) mesh of every device
(``make_array_from_process_local_data``) and runs a small SPMD program whose replicated
output XLA computes with cross-process collectives; nothing here talks to other processes
itself.
"""
from __future__ import annotations

import zlib

import numpy as np

from nbjax import _tree_util as tree_util
from nbjax.array import Array

__all__ = ["process_allgather", "sync_global_devices", "broadcast_one_to_all", "assert_equal",
           "host_local_array_to_global_array", "global_array_to_host_local_array"]


def _process_mesh():
  """A Mesh of every device, shape (processes, devices per process)."""
  import nbjax
  from nbjax.sharding import Mesh
  devs = nbjax.devices()
  procs = sorted({d.process_index for d in devs})
  rows = [[d for d in devs if d.process_index == p] for p in procs]
  if len({len(r) for r in rows}) != 1:
    raise ValueError("multihost_utils needs the same number of devices in every process; "
                     f"got {[len(r) for r in rows]}")
  return Mesh(np.array(rows, dtype=object), ("processes", "local_devices"))


_jits: dict = {}


def _jit(fn, mesh):
  """``fn`` jitted with a replicated output over ``mesh`` (one wrapper per mesh)."""
  f = _jits.get((fn, mesh))
  if f is None:
    from nbjax.interpreters.pjit import jit
    from nbjax.sharding import NamedSharding, PartitionSpec
    f = _jits[(fn, mesh)] = jit(fn, out_shardings=NamedSharding(mesh, PartitionSpec()))
  return f


def _sum0(a):
  return a.sum(0)


def _replicated(x, mesh):
  """``x`` (a global Array) as a NumPy array in every process (XLA gathers the pieces)."""
  from nbjax.interpreters.spmd import _reshard
  from nbjax.sharding import NamedSharding, PartitionSpec
  return np.asarray(_reshard(NamedSharding(mesh, PartitionSpec()))(x))


def _stacked(x, mesh):
  """The global Array of shape ``(process_count, *x.shape)`` whose block ``p`` is process
  ``p``'s ``x``."""
  from nbjax.interpreters.spmd import make_array_from_process_local_data
  from nbjax.sharding import NamedSharding, PartitionSpec
  return make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("processes")),
                                            x[None], (mesh.devices.shape[0], *x.shape))


def process_allgather(in_tree, tiled=False):
  """Every process's value of each leaf of ``in_tree``, as NumPy arrays in every process.

  A leaf that is a global Array (spanning processes) comes back whole; any other leaf is a
  process-local value: the result stacks the processes' values on a new leading axis, or
  (``tiled=True``) concatenates them along axis 0.
  """
  mesh = _process_mesh()

  def gather(x):
    if type(x) is Array and x._pmap is not None and x._pmap[0]._spmd and \
        not x._pmap[0].is_fully_addressable:
      return _replicated(x, x._pmap[0].mesh if hasattr(x._pmap[0], "mesh") else mesh)
    v = np.asarray(x)
    if tiled and v.ndim == 0:
      raise ValueError("process_allgather(tiled=True) needs inputs of rank >= 1, got a "
                       "scalar")
    out = _replicated(_stacked(v, mesh), mesh)
    return out.reshape((-1, *v.shape[1:])) if tiled else out

  return tree_util.tree_map(gather, in_tree)


def broadcast_one_to_all(in_tree, is_source=None):
  """Process 0's value of each leaf of ``in_tree`` (``is_source``: which process is the
  source; default ``process_index() == 0``), in every process."""
  import nbjax
  if is_source is None:
    is_source = nbjax.process_index() == 0
  mesh = _process_mesh()

  def bcast(x):
    v = np.asarray(x)
    src = v if is_source else np.zeros_like(v)
    wide = src.astype(np.int32) if v.dtype == np.bool_ else src
    out = np.asarray(_jit(_sum0, mesh)(_stacked(wide, mesh)))
    return Array(out.astype(v.dtype))

  return tree_util.tree_map(bcast, in_tree)


def assert_equal(in_tree, fail_message=""):
  """Raise AssertionError unless every process holds equal values of ``in_tree``."""
  def check(x):
    got = process_allgather(x)
    if not all(np.array_equal(got[0], g) for g in got[1:]):
      raise AssertionError(f"{fail_message} Expected: {got[0]}; got: {got}.")
  tree_util.tree_map(check, in_tree)


def sync_global_devices(name):
  """Block until every process reaches this call with the same ``name`` (a cross-device
  collective over all devices); AssertionError when the names differ."""
  h = np.uint32(zlib.crc32(name.encode()))
  assert_equal(h, f"sync_global_devices name mismatch ('{name}')")


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
  """Each process's host-local arrays (its block along the dimensions ``pspecs`` splits over
  processes) as global Arrays over ``global_mesh``."""
  from nbjax.interpreters.spmd import flatten_shardings, make_array_from_process_local_data
  from nbjax.sharding import NamedSharding, PartitionSpec
  leaves, tree = tree_util.tree_flatten(local_inputs)
  specs = flatten_shardings("pspecs", local_inputs, pspecs)
  return tree_util.tree_unflatten(tree, [
      make_array_from_process_local_data(
          NamedSharding(global_mesh, PartitionSpec() if s is None else s), np.asarray(x))
      for x, s in zip(leaves, specs)])


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
  """The inverse of ``host_local_array_to_global_array``: each global Array's block this
  process holds, as an Array."""
  from nbjax.interpreters.spmd import _extents
  del global_mesh, pspecs  # the arrays' own shardings say where their pieces are

  def local(x):
    sh = x.sharding
    amap = sh.addressable_devices_indices_map(x.shape)
    ext = _extents(amap, x.shape)
    out = np.empty(tuple(b - a for a, b in ext), x.dtype)
    for s in x.addressable_shards:
      out[tuple(slice(i.indices(n)[0] - a, i.indices(n)[1] - a)
                for i, n, (a, _) in zip(s.index, x.shape, ext))] = np.asarray(s.data)
    return Array(out)

  return tree_util.tree_map(local, global_inputs)
