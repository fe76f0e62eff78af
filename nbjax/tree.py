"""``nbjax.tree``: JAX's short names for the pytree utilities (``jax.tree.map`` is
``tree_util.tree_map``). The implementations live in ``nbjax/tree_util.py``."""
import dataclasses as _dataclasses

from nbjax import tree_util as _tu
from nbjax.tree_util import (all_leaves, tree_all as all, tree_flatten as flatten,  # noqa: F401
                             tree_flatten_with_path as flatten_with_path,
                             tree_leaves as leaves, tree_leaves_with_path as leaves_with_path,
                             tree_map as map, tree_map_with_path as map_with_path,
                             tree_reduce as reduce, tree_structure as structure,
                             tree_transpose as transpose, tree_unflatten as unflatten)
from nbjax.tree_util import tree_broadcast as broadcast  # noqa: F401

__all__ = ["all", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "structure", "transpose", "unflatten", "broadcast",
           "reduce_associative", "static"]


def reduce_associative(operation, tree, *, identity=_tu._UNSPECIFIED, is_leaf=None):
  """``tree``'s leaves combined by the associative ``operation`` as a balanced binary tree;
  ``identity`` is the result when there are no leaves."""
  return _tu.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def static(**kwargs):
  """``dataclasses.field(**kwargs)`` marked ``static=True`` in its metadata: a field that
  ``tree_util.register_dataclass`` keeps as aux data rather than as a child."""
  metadata = {"static": True, **(kwargs.pop("metadata", {}) or {})}
  return _dataclasses.field(metadata=metadata, **kwargs)
