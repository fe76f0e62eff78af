"""``nbjax.experimental.topologies``: JAX's device topologies for ahead-of-time compilation.
nbjax runs on the attached CPU devices only: ``get_attached_topology`` describes them, and a
compile-only topology (``get_topology_desc``) is not implemented for any platform, as JAX's
CPU build reports."""
from __future__ import annotations

from collections.abc import Sequence

from nbjax.experimental import mesh_utils

__all__ = ["TopologyDescription", "get_attached_topology", "get_topology_desc", "make_mesh"]


class TopologyDescription:
  """The devices of a topology."""

  def __init__(self, devices):
    self.devices = devices


def get_attached_topology(platform=None) -> TopologyDescription:
  """The topology of the devices of ``platform`` (default: the default backend's)."""
  from nbjax import api
  return TopologyDescription(api.devices(backend=platform))


def get_topology_desc(topology_name: str = "", platform: str | None = None,
                      **kwargs) -> TopologyDescription:
  """A compile-only topology of ``platform``: raises as JAX's CPU-only build does
  (``NotImplementedError`` for a named platform, ``RuntimeError`` for TPU, the default)."""
  if platform == "tpu" or platform is None:
    raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology. See "
                       "https://github.com/jax-ml/jax#installation")
  if platform == "gpu":
    raise RuntimeError("Unknown backend: 'gpu' requested, but no platforms that are instances "
                       "of gpu are present. Platforms present are: cpu")
  raise NotImplementedError(f"topology not implemented for {platform}")


def make_mesh(topo: TopologyDescription, mesh_shape: Sequence[int],
              axis_names: tuple[str, ...], *, contiguous_submeshes: bool = False):
  """A :class:`nbjax.sharding.Mesh` of ``topo``'s devices of ``mesh_shape``."""
  from nbjax.sharding import Mesh
  devices = mesh_utils.create_device_mesh(mesh_shape, list(topo.devices),
                                          contiguous_submeshes=contiguous_submeshes)
  return Mesh(devices, axis_names)
