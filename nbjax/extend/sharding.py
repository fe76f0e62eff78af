"""``nbjax.extend.sharding``: JAX's ``jax.extend.sharding``: XLA's ``HloSharding`` to and from
its serialized ``OpSharding`` proto, and ``GSPMDSharding``."""
from __future__ import annotations

from nbjax.sharding import GSPMDSharding

__all__ = ["GSPMDSharding", "get_hlo_sharding_from_serialized_proto",
           "get_op_sharding_from_serialized_proto", "get_serialized_proto_from_hlo_sharding"]


def _xc():
  from nbjax import xla
  return xla.ensure_jaxlib().xc


def get_op_sharding_from_serialized_proto(sharding: bytes):
  """The ``xla_client.OpSharding`` of its serialized proto ``sharding``."""
  proto = _xc().OpSharding()
  proto.ParseFromString(sharding)
  return proto


def get_hlo_sharding_from_serialized_proto(sharding: bytes):
  """The ``xla_client.HloSharding`` of a serialized ``OpSharding`` proto."""
  return _xc().HloSharding.from_proto(get_op_sharding_from_serialized_proto(sharding))


def get_serialized_proto_from_hlo_sharding(sharding) -> bytes:
  """The serialized ``OpSharding`` proto of an ``xla_client.HloSharding``."""
  return sharding.to_proto().SerializeToString()
