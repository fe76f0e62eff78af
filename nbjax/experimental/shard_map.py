"""``nbjax.experimental.shard_map.shard_map``: the older positional signature of
``nbjax.shard_map`` (``interpreters/shard_map.py``), as ``jax.experimental.shard_map``."""
from nbjax.interpreters.shard_map import shard_map as _shard_map

__all__ = ["shard_map"]


def shard_map(f, mesh, in_specs, out_specs, check_rep=True, auto=frozenset()):
  """``f`` mapped over the blocks of its inputs on ``mesh`` (see ``nbjax.shard_map``)."""
  return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)
