"""tree_util: JAX's pytree API (flatten/unflatten, tree_map, registration, key paths).

The machinery is ``nbjax/_tree_util.py``, which the transformations use; this is the view
users get, where key arrays (``register_opaque_node`` types) are leaves, as in JAX:
``tree_leaves(random.key(0))`` is ``[key]`` and ``tree_structure(key)`` is ``PyTreeDef(*)``.
Node types: tuple, list, dict (sorted keys), None (a node with no children), namedtuples,
OrderedDict, defaultdict, and registered types; everything else is a leaf.
"""
from typing import Any, TypeVar

from nbjax import _tree_util as _t
from nbjax._tree_util import (  # noqa: F401
    PyTreeDef, tree_unflatten, treedef_children, treedef_is_leaf, treedef_is_strict_leaf,
    treedef_tuple, register_pytree_node, register_pytree_node_class, register_pytree_with_keys,
    register_pytree_with_keys_class, register_dataclass, register_static, Partial, keystr,
    SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)

__all__ = list(_t.__all__) + [
    "KeyEntry", "KeyPath", "default_registry", "flatten_one_level",
    "flatten_one_level_with_keys", "is_tree_node", "tree_reduce_associative"]


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


def _leafy_path(is_leaf, takes_path):
  if not takes_path or is_leaf is None:
    return _leafy(is_leaf)
  return lambda p, x: type(x) in _t.opaque_types or is_leaf(p, x)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
  """``([(key_path, leaf), ...], treedef)``; with ``is_leaf_takes_path`` the predicate is
  called as ``is_leaf(key_path, x)``."""
  return _t.tree_flatten_with_path(tree, _leafy_path(is_leaf, is_leaf_takes_path),
                                   is_leaf_takes_path)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
  return _t.tree_leaves_with_path(tree, _leafy_path(is_leaf, is_leaf_takes_path),
                                  is_leaf_takes_path)


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
  """``f(key_path, leaf, *other_leaves)`` applied leafwise."""
  return _t.tree_map_with_path(f, tree, *rest, is_leaf=_leafy_path(is_leaf, is_leaf_takes_path),
                               is_leaf_takes_path=is_leaf_takes_path)


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None):
  return _t.broadcast_prefix(prefix_tree, full_tree, _leafy(is_leaf))


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
  """``prefix_tree`` broadcast to ``full_tree``'s structure: each of its leaves replaces
  every leaf of the corresponding ``full_tree`` subtree.

  >>> tree_broadcast([1, 2], [[3, 4], (5,)])
  [[1, 1], (2,)]
  """
  return _t.tree_broadcast(prefix_tree, full_tree, _leafy(is_leaf))


# ---- one level, registry queries ----------------------------------------------------------

KeyEntry = TypeVar("KeyEntry", bound=Any)
KeyPath = tuple[KeyEntry, ...]


def _user_node(typ):
  return _t._user_kinds[typ] if typ in _t._user_kinds else _t._user_lookup(typ)


def _one_level(tree):
  """``(children, aux)`` of ``tree``'s own node, as JAX's registry gives them, or None for a
  leaf."""
  node = _user_node(type(tree))
  if node is None:
    return None
  kind = node.kind
  if kind in ("tuple", "list"):
    return tree, None
  if kind == "none":
    return (), None
  if kind == "namedtuple":
    return list(tree), node.type
  children, aux = node.flatten(tree)
  if kind == "dict":  # (a dict's children as a tuple, OrderedDict's and defaultdict's as a
    return tuple(children), aux  # list, as JAX's)
  return (list(children) if kind in ("odict", "ddict") else children), aux


def _one_level_with_keys(tree):
  node = _user_node(type(tree))
  if node is None:
    return None
  pairs = _t._keyed_children(tree, node)
  aux = _one_level(tree)[1]
  if node.kind in ("tuple", "list", "none", "dict", "odict", "ddict"):
    return tuple(pairs), aux
  return list(pairs), aux


def flatten_one_level(tree):
  """``(children, aux_data)`` of the node at ``tree``'s root (one level only).

  ``ValueError`` when ``tree`` is a leaf.

  >>> flatten_one_level({'a': [1, 2], 'b': {'c': 3}})
  (([1, 2], {'c': 3}), ('a', 'b'))
  """
  out = _one_level(tree)
  if out is None:
    raise ValueError(f"can't tree-flatten type: {type(tree)}")
  return out


def flatten_one_level_with_keys(tree):
  """``flatten_one_level`` with each child paired with its key: ``([(key, child), ...],
  aux_data)``."""
  out = _one_level_with_keys(tree)
  if out is None:
    raise ValueError(f"can't tree-flatten type: {type(tree)}")
  return out


def is_tree_node(typ):
  """Whether the type ``typ`` is a pytree node type (built in, a namedtuple or registered)."""
  return isinstance(typ, type) and _user_node(typ) is not None


class _Unspecified:
  def __repr__(self):
    return "Unspecified"


_UNSPECIFIED = _Unspecified()


def _balanced_reduce(items, operation, identity):
  n = len(items)
  if n == 0:
    if identity is _UNSPECIFIED:
      raise TypeError("Must specify identity for parallel reduction of empty sequence.")
    return identity
  if n == 1:
    return items[0]
  half = n // 2
  return operation(_balanced_reduce(items[:half], operation, identity),
                   _balanced_reduce(items[half:], operation, identity))


def tree_reduce_associative(operation, tree, *, identity=_UNSPECIFIED, is_leaf=None):
  """``tree``'s leaves combined by the associative ``operation`` as a balanced binary tree
  (the left half, then the right, recursively); ``identity`` is the result for no leaves."""
  return _balanced_reduce(tree_leaves(tree, is_leaf), operation, identity)


class PyTreeRegistry:
  """The registry of pytree node types (JAX's ``default_registry`` object): flattening and
  node queries through it, and registration into it."""

  def flatten(self, tree, leaf_predicate=None):
    return tree_flatten(tree, leaf_predicate)

  def flatten_one_level(self, tree):
    return _one_level(tree)

  def flatten_one_level_with_keys(self, tree):
    return _one_level_with_keys(tree)

  def flatten_with_path(self, tree, leaf_predicate=None):
    return tree_flatten_with_path(tree, leaf_predicate)

  def is_node(self, typ):
    return is_tree_node(typ)

  def register_node(self, typ, to_iterable, from_iterable, to_iterable_with_keys=None):
    register_pytree_node(typ, to_iterable, from_iterable, to_iterable_with_keys)

  def register_dataclass_node(self, typ, data_fields, meta_fields):
    register_dataclass(typ, list(data_fields), list(meta_fields))


default_registry = PyTreeRegistry()
# JAX's private spellings (jax._src.tree_util), for code and tests written against them
dispatch_registry = default_registry
from nbjax._tree_util import (  # noqa: E402,F401
    broadcast_flattened_prefix_with_treedef, broadcast_prefix, prefix_errors)
