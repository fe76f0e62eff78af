"""tree_util: JAX's pytree API (flatten/unflatten, tree_map, registration, key paths).

The machinery is ``nbjax/_tree_util.py``, which the transformations use; this is the view
users get, where key arrays (``register_opaque_node`` types) are leaves, as in JAX:
``tree_leaves(random.key(0))`` is ``[key]`` and ``tree_structure(key)`` is ``PyTreeDef(*)``.
Node types: tuple, list, dict (sorted keys), None (a node with no children), namedtuples,
OrderedDict, defaultdict, and registered types; everything else is a leaf.
"""
from nbjax import _tree_util as _t
from nbjax._tree_util import (  # noqa: F401
    PyTreeDef, tree_unflatten, treedef_children, treedef_is_leaf, treedef_is_strict_leaf,
    treedef_tuple, register_pytree_node, register_pytree_node_class, register_pytree_with_keys,
    register_pytree_with_keys_class, register_dataclass, register_static, Partial, keystr,
    SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)

__all__ = list(_t.__all__)


def _is_opaque(x):
  return type(x) in _t.opaque_types


def _leafy(is_leaf):
  if is_leaf is None:
    return _is_opaque
  return lambda x: type(x) in _t.opaque_types or is_leaf(x)


def tree_flatten(tree, is_leaf=None):
  """``(leaves, treedef)``; ``is_leaf(x)`` true stops the recursion at ``x``."""
  leaves = []
  if is_leaf is None:
    return leaves, _t._user_flat(tree, leaves)
  return leaves, _t._flat_is_leaf(tree, leaves, _leafy(is_leaf))


def tree_leaves(tree, is_leaf=None):
  if is_leaf is None:
    out = []
    _t._user_leaves(tree, out)
    return out
  return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
  return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None):
  """``f`` applied leafwise; ``rest`` trees must have ``tree``'s structure (or extend it)."""
  return _t.tree_map(f, tree, *rest, is_leaf=is_leaf, _flatten=tree_flatten)


def tree_reduce(function, tree, initializer=_t._MISSING, is_leaf=None):
  return _t.tree_reduce(function, tree, initializer, is_leaf=_leafy(is_leaf))


def tree_all(tree, *, is_leaf=None):
  return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None):
  """True iff every element of ``iterable`` is a leaf."""
  lst = list(iterable)
  leaves = tree_leaves(lst, is_leaf)
  return len(leaves) == len(lst) and all(a is b for a, b in zip(leaves, lst))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
  """Turn a tree of trees (outer of inner) into an inner tree of outer trees."""
  return _t.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose, _is_opaque)


def tree_flatten_with_path(tree, is_leaf=None):
  """``([(key_path, leaf), ...], treedef)``."""
  return _t.tree_flatten_with_path(tree, _leafy(is_leaf))


def tree_leaves_with_path(tree, is_leaf=None):
  return _t.tree_leaves_with_path(tree, _leafy(is_leaf))


def tree_map_with_path(f, tree, *rest, is_leaf=None):
  """``f(key_path, leaf, *other_leaves)`` applied leafwise."""
  return _t.tree_map_with_path(f, tree, *rest, is_leaf=_leafy(is_leaf))


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None):
  return _t.broadcast_prefix(prefix_tree, full_tree, _leafy(is_leaf))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
  """``prefix_tree`` broadcast to ``full_tree``'s structure: each of its leaves replaces
  every leaf of the corresponding ``full_tree`` subtree.

  >>> tree_broadcast([1, 2], [[3, 4], (5,)])
  [[1, 1], (2,)]
  """
  return _t.tree_broadcast(prefix_tree, full_tree, _leafy(is_leaf))
