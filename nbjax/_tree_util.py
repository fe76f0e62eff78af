"""The pytree machinery behind ``nbjax.tree_util`` (flatten/unflatten, tree_map,
registration, key paths), as the transformations see trees.

Sits at the bottom of nbjax and imports nothing from it; ``api`` (jit cache keys, vmap/grad
argument handling) and everything above use it. One difference from the public
``nbjax.tree_util``: types registered with ``register_opaque_node`` (key arrays) are nodes
here, so that a transformation flattens a key array to its physical ``uint32`` data, and
leaves there, as JAX's key arrays are to users. Node types: tuple, list, dict (sorted keys),
None (a node with no children), namedtuples, OrderedDict, defaultdict, and registered types;
everything else is a leaf. ``PyTreeDef`` is structural: equal and hashable by node type, aux
data and children, so it can be a cache key. Flatten is plain recursion with one dict lookup
per node on the type: it is on the jit hot path.
"""
import collections
import difflib
import dataclasses
import functools
import operator
import textwrap

__all__ = [
    "PyTreeDef", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure",
    "tree_reduce", "tree_all", "tree_transpose", "treedef_children", "treedef_is_leaf",
    "treedef_is_strict_leaf", "treedef_tuple", "all_leaves", "register_pytree_node",
    "register_pytree_node_class", "register_pytree_with_keys", "register_pytree_with_keys_class",
    "register_dataclass", "register_static", "Partial", "tree_flatten_with_path",
    "tree_leaves_with_path", "tree_map_with_path", "keystr", "SequenceKey", "DictKey",
    "GetAttrKey", "FlattenedIndexKey", "tree_broadcast",
]


class _Node:
  """How one node type flattens: ``flatten(x) -> (children, aux)``, ``unflatten(aux, children)``."""
  __slots__ = ("type", "flatten", "unflatten", "flatten_with_keys", "kind")

  def __init__(self, typ, flatten, unflatten, flatten_with_keys=None, kind="custom"):
    self.type, self.flatten, self.unflatten = typ, flatten, unflatten
    self.flatten_with_keys, self.kind = flatten_with_keys, kind


def _sorted_keys(d):
  try:
    return sorted(d)
  except TypeError:
    raise ValueError("Comparator raised exception while sorting pytree dictionary keys.") from None


def _flatten_dict(d):
  keys = _sorted_keys(d)
  return [d[k] for k in keys], tuple(keys)


def _flatten_odict(d):
  return list(d.values()), tuple(d)


def _flatten_ddict(d):
  keys = _sorted_keys(d)
  return [d[k] for k in keys], (d.default_factory, tuple(keys))


_NoneType = type(None)
_registry = {
    tuple: _Node(tuple, lambda x: (x, None), lambda _, xs: tuple(xs), kind="tuple"),
    list: _Node(list, lambda x: (x, None), lambda _, xs: list(xs), kind="list"),
    dict: _Node(dict, _flatten_dict, lambda keys, xs: dict(zip(keys, xs)), kind="dict"),
    _NoneType: _Node(_NoneType, lambda x: ((), None), lambda _, xs: None, kind="none"),
    collections.OrderedDict: _Node(
        collections.OrderedDict, _flatten_odict,
        lambda keys, xs: collections.OrderedDict(zip(keys, xs)), kind="odict"),
    collections.defaultdict: _Node(
        collections.defaultdict, _flatten_ddict,
        lambda aux, xs: collections.defaultdict(aux[0], zip(aux[1], xs)), kind="ddict"),
}
# type -> _Node, or None for a leaf type; filled lazily, so a lookup is one dict.get.
_kinds = dict(_registry)
# register_opaque_node's types (nodes here, leaves to users) -> trailing(aux): how many
# trailing axes the node's children have beyond the node's own shape
opaque_types = {}


def _lookup(t):
  """_Node for type ``t`` or None (leaf); caches the answer for the type (one node per
  namedtuple type: treedefs compare their nodes by identity)."""
  if t in _kinds:
    return _kinds[t]
  node = _registry.get(t)
  if node is None and issubclass(t, tuple) and hasattr(t, "_fields"):
    node = _Node(t, lambda x: (x, None), lambda _, xs, t=t: t(*xs), kind="namedtuple")
  _kinds[t] = node
  return node


class PyTreeDef:
  """Structure of a pytree: node type, aux data and child treedefs; leaves are ``*``."""
  __slots__ = ("node", "data", "kids", "num_leaves", "_hash", "__weakref__")

  def __init__(self, node, data, kids, num_leaves):
    self.node, self.data, self.kids, self.num_leaves, self._hash = node, data, kids, num_leaves, None

  @property
  def num_nodes(self):
    return 1 + sum(k.num_nodes for k in self.kids)

  def children(self):
    return list(self.kids)

  def node_data(self):
    """``None`` for a leaf, else ``(node type, aux data)``."""
    if self.node is None:
      return None
    return (self.node.type, list(self.data) if self.node.kind == "dict" else self.data)

  def __eq__(self, other):
    if self is other:
      return True
    if type(other) is not PyTreeDef:
      return NotImplemented
    if self.node is not other.node or self.num_leaves != other.num_leaves:
      return False
    try:
      same = bool(self.data == other.data)
    except Exception as e:  # noqa: BLE001 -- JAX's error for metadata without equality
      raise ValueError("Exception raised while checking equality of metadata fields of pytree. "
                       "Make sure that metadata fields are hashable and have simple equality "
                       "semantics. (Note: arrays cause this error.)") from e
    return same and self.kids == other.kids

  def __hash__(self):
    h = self._hash
    if h is None:
      try:
        h = hash((None if self.node is None else self.node.type, self.data, self.kids))
      except TypeError:  # unhashable aux data (JAX hashes such treedefs too)
        h = hash((None if self.node is None else self.node.type, self.kids))
      self._hash = h
    return h

  def serialize_using_proto(self):
    """JAX's protocol-buffer bytes of this structure (builtin container nodes only)."""
    def check(t):
      if t.node is not None and t.node.kind not in ("tuple", "list", "dict", "none"):
        raise ValueError("User-defined nodes are not supported when serializing pytrees as "
                         "protocol buffers. You should either convert the user-defined nodes "
                         "to another type or use pickle instead.")
      for k in t.kids:
        check(k)
    check(self)
    from nbjax import xla
    return xla.pytree_to_proto(self.unflatten([0] * self.num_leaves))

  @staticmethod
  def deserialize_using_proto(registry, data):
    """The ``PyTreeDef`` that ``serialize_using_proto`` wrote as ``data``."""
    from nbjax import xla
    return tree_structure(xla.pytree_from_proto(data))

  def unflatten(self, leaves):
    if type(leaves) is not list and type(leaves) is not tuple:
      leaves = list(leaves)
    if len(leaves) != self.num_leaves:
      if len(leaves) < self.num_leaves:
        raise ValueError(f"Too few leaves for PyTreeDef; expected {self.num_leaves}, got "
                         f"{len(leaves)}")
      raise ValueError(f"Too many leaves for PyTreeDef; expected {self.num_leaves}.")
    if self.node is None:
      return leaves[0]
    return self._build(iter(leaves))

  def _build(self, it):
    if self.node is None:
      return next(it)
    return self.node.unflatten(
        self.data, [next(it) if k is _LEAF else k._build(it) for k in self.kids])

  def flatten_up_to(self, tree):
    """Leaves of ``tree`` down to this structure: one subtree of ``tree`` per leaf here."""
    out = []
    self._up_to(tree, out)
    return out

  def _up_to(self, x, out):
    node = self.node
    if node is None:
      out.append(x)
      return
    t = type(x)
    kind = node.kind
    if kind == "tuple" or kind == "list":
      if t is not node.type:
        raise ValueError(f"Expected {kind}, got {x!r}.")
      if len(x) != len(self.kids):
        raise ValueError(f"{kind.capitalize()} arity mismatch: {len(x)} != {len(self.kids)}; "
                         f"{kind}: {x!r}.")
      kids = x
    elif kind == "none":
      if x is not None:
        raise ValueError(f"Expected None, got {x!r}.\n\nIn previous releases of JAX, "
                         "flatten-up-to used to consider None to be a tree-prefix of non-None "
                         "values. To obtain the previous behavior, you can usually write:\n"
                         "  jax.tree.map(lambda x, y: None if x is None else f(x, y), a, b, "
                         "is_leaf=lambda x: x is None)")
      return
    elif kind == "dict":  # (exactly a dict: an OrderedDict or defaultdict is another node)
      if t is not dict:
        raise ValueError(f"Expected dict, got {x!r}.")
      got = tuple(_sorted_keys(x))
      if got != self.data:
        raise ValueError(f"Dict key mismatch; expected keys: {list(self.data)}; present keys: "
                         f"{list(got)}.")
      kids = [x[k] for k in self.data]
    elif kind == "namedtuple":
      if t is not node.type:
        if not (isinstance(x, tuple) and hasattr(x, "_fields")):
          raise ValueError(f"Expected named tuple, got {x!r}.")
        raise ValueError(f"Named tuple type mismatch: expected type: {node.type!r}, tuple: "
                         f"{x!r}.")
      kids = x
    else:  # custom nodes, OrderedDict and defaultdict (their key order, factory: aux data)
      if t is not node.type:
        raise ValueError(f"Custom node type mismatch: expected type: {node.type}, value: "
                         f"{x!r}.")
      kids, data = node.flatten(x)
      if data != self.data:
        raise ValueError(f"Mismatch custom node data: {self.data!r} != {data!r}; value: {x!r}.")
      kids = list(kids)
      if len(kids) != len(self.kids):
        raise ValueError(f"Custom node arity mismatch: {len(kids)} != {len(self.kids)}; "
                         f"value: {x!r}.")
    for k, c in zip(self.kids, kids):
      if k is _LEAF:
        out.append(c)
      else:
        k._up_to(c, out)

  def broadcast_prefix(self, leaves, full):
    """This structure's ``leaves``, each repeated over the leaves of the matching subtree of
    ``full`` (of which this is a prefix), with no unflattening (JAX's
    ``broadcast_flattened_prefix_with_treedef``); ``ValueError`` if not a prefix."""
    out, it = [], iter(leaves)
    def go(p, f):
      if p.node is None:
        out.extend([next(it)] * f.num_leaves)
        return
      if p.node is not f.node or len(p.kids) != len(f.kids):
        raise ValueError("not a tree prefix")
      try:
        same = p.data is f.data or bool(p.data == f.data)
      except Exception:  # noqa: BLE001 (metadata without equality)
        same = False
      if not same:
        raise ValueError("not a tree prefix")
      for pk, fk in zip(p.kids, f.kids):
        go(pk, fk)
    go(self, full)
    return out

  def compose(self, inner):
    """Treedef with ``inner`` in place of each leaf of this one."""
    if self.node is None:
      return inner
    kids = tuple(k.compose(inner) for k in self.kids)
    return PyTreeDef(self.node, self.data, kids, sum(k.num_leaves for k in kids))

  def walk(self, f_node, f_leaf, leaves):
    """Fold over the structure: ``f_node(child_results, aux_data)`` per node (JAX's: the
    node's aux data, a dict's keys as a list), ``f_leaf`` per leaf."""
    it = iter(leaves)
    def go(td):
      if td.node is None:
        x = next(it)
        return f_leaf(x) if f_leaf is not None else x
      return f_node(tuple(go(k) for k in td.kids), td.node_data()[1])
    return go(self)

  def __repr__(self):
    return f"PyTreeDef({self._str()})"

  def _str(self):
    node = self.node
    if node is None:
      return "*"
    kids = [k._str() for k in self.kids]
    kind = node.kind
    if kind == "none":
      return "None"
    if kind == "tuple":
      return f"({kids[0]},)" if len(kids) == 1 else f"({', '.join(kids)})"
    if kind == "list":
      return f"[{', '.join(kids)}]"
    if kind == "dict":
      return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.data, kids)) + "}"
    if kind == "opaque":
      return "*"
    # JAX shows the rest as CustomNode(name[aux data], [children])
    if kind == "odict":
      name, data = "OrderedDict", repr(self.data)
    elif kind == "ddict":
      name, data = "defaultdict", repr(self.data)
    elif kind == "namedtuple":
      name, data = "namedtuple", node.type.__name__
    else:
      name, data = node.type.__name__, str(self.data)
    return f"CustomNode({name}[{data}], [{', '.join(kids)}])"

  def __reduce__(self):
    return (_rebuild, (None if self.node is None else self.node.type, self.data, self.kids))


def _rebuild(typ, data, kids):
  if typ is None:
    return _LEAF
  node = _kinds.get(typ) or _lookup(typ)
  return PyTreeDef(node, data, kids, sum(k.num_leaves for k in kids))


_LEAF = PyTreeDef(None, None, (), 1)
_NONE_DEF = PyTreeDef(_registry[_NoneType], None, (), 0)


# ---- generated code for fixed structures (the hot paths of jit and the replay cache) ------

_PLAIN = {"tuple": "tuple", "list": "list", "dict": "dict"}


def flatten_source(treedef, root, ns, fail):
  """Straight-line code reading the leaves of the tree ``root`` (an expression) whose
  structure is ``treedef``'s, for structures of tuples, lists, dicts and None only (else
  None): ``(lines, leaf expressions)``. The lines check each container's exact type and
  length and each dict's keys, running ``fail`` (a statement) on a mismatch; they do not
  check that the leaves are leaves (the caller must: a container in a leaf's place). Names
  the code needs are added to ``ns``."""
  lines, leaves = [], []

  def walk(expr, d):
    if d.node is None:
      leaves.append(expr)
      return True
    kind = d.node.kind
    if kind == "none":
      lines.append(f"  if {expr} is not None: {fail}")
      return True
    t = _PLAIN.get(kind)
    if t is None:
      return False
    var = f"n{len(lines)}"
    lines.append(f"  {var} = {expr}")
    lines.append(f"  if type({var}) is not {t} or len({var}) != {len(d.kids)}: {fail}")
    for j, k in enumerate(d.kids):
      if t == "dict":  # same length and every key found: the same keys
        key = f"K{len(ns)}"
        ns[key], ns["_MISSING"] = d.data[j], _MISSING
        sub = f"n{len(lines)}"
        lines.append(f"  {sub} = {var}.get({key}, _MISSING)")
        if k.node is None:
          lines.append(f"  if {sub} is _MISSING: {fail}")
      else:
        sub = f"{var}[{j}]"
      if not walk(sub, k):
        return False
    return True

  try:
    return (lines, leaves) if walk(root, treedef) else None
  finally:
    del walk  # (a recursive closure is a reference cycle: broken here, no garbage for gc)


def build_source(treedef, leaf, ns):
  """An expression building a tree of ``treedef``'s structure whose leaf ``i`` is the
  expression ``leaf(i)``, for structures of tuples, lists, dicts and None only (else None);
  names it needs are added to ``ns``."""
  it = iter(range(treedef.num_leaves))

  def build(d):
    if d.node is None:
      return leaf(next(it))
    kind = d.node.kind
    if kind == "none":
      return "None"
    if kind not in _PLAIN:
      return None
    kids = [build(k) for k in d.kids]
    if None in kids:
      return None
    if kind == "tuple":
      return f"({''.join(k + ', ' for k in kids)})"
    if kind == "list":
      return f"[{', '.join(kids)}]"
    names = []
    for key in d.data:
      names.append(f"K{len(ns)}")
      ns[names[-1]] = key
    return "{" + ", ".join(f"{n}: {k}" for n, k in zip(names, kids)) + "}"

  try:
    return build(treedef)
  finally:
    del build  # (a recursive closure is a reference cycle: broken here, no garbage for gc)


def flattener(treedef):
  """``flat(tree)``: the leaves of ``tree`` (a list) when its containers match ``treedef``'s
  (types, lengths, dict keys), else None, as generated straight-line code; None for
  structures other than tuples, lists, dicts and None. The caller checks the leaves."""
  ns = {}
  got = flatten_source(treedef, "x", ns, "return None")
  if got is None:
    return None
  lines, leaves = got
  exec("\n".join(["def flat(x):", *lines, f"  return [{', '.join(leaves)}]"]), ns)
  return ns.pop("flat")  # (popped: a function in its own globals is a reference cycle)


def unflattener(treedef):
  """``treedef.unflatten`` as one generated expression for structures of tuples, lists,
  dicts and None (else ``treedef.unflatten`` itself); takes a list or tuple of exactly
  ``treedef.num_leaves`` leaves."""
  ns = {}
  body = build_source(treedef, "o[{}]".format, ns)
  if body is None:
    return treedef.unflatten
  exec(f"def unflatten(o):\n  return {body}\n", ns)
  return ns.pop("unflatten")


_MISSING = object()


# ---- flatten ---------------------------------------------------------------------------

def _flatteners(kinds, lookup):
  """``_flat`` (leaves and treedef) and ``_leaves`` over the node table ``kinds``."""
  def _flat(x, leaves):
    t = type(x)
    node = kinds[t] if t in kinds else lookup(t)
    if node is None:
      leaves.append(x)
      return _LEAF
    if t is tuple or t is list:
      kids, data = x, None
    elif t is _NoneType:
      return _NONE_DEF
    else:
      kids, data = node.flatten(x)
    start = len(leaves)
    kdefs = []
    for c in kids:
      ct = type(c)
      if (kinds[ct] if ct in kinds else lookup(ct)) is None:
        leaves.append(c)
        kdefs.append(_LEAF)
      else:
        kdefs.append(_flat(c, leaves))
    return PyTreeDef(node, data, tuple(kdefs), len(leaves) - start)

  def _leaves(x, out):
    t = type(x)
    node = kinds[t] if t in kinds else lookup(t)
    if node is None:
      out.append(x)
    elif t is tuple or t is list:
      for c in x:
        _leaves(c, out)
    else:
      for c in node.flatten(x)[0]:
        _leaves(c, out)

  return _flat, _leaves


_flat, _leaves = _flatteners(_kinds, _lookup)
# The public tree_util's view: opaque types (key arrays) are leaves.
_user_kinds = {}


def _user_lookup(t):
  node = None if t in opaque_types else _lookup(t)
  _user_kinds[t] = node
  return node


_user_flat, _user_leaves = _flatteners(_user_kinds, _user_lookup)


def _flat_is_leaf(x, leaves, is_leaf):
  if is_leaf(x):
    leaves.append(x)
    return _LEAF
  t = type(x)
  node = _kinds[t] if t in _kinds else _lookup(t)
  if node is None:
    leaves.append(x)
    return _LEAF
  kids, data = node.flatten(x)
  start = len(leaves)
  kdefs = tuple([_flat_is_leaf(c, leaves, is_leaf) for c in kids])
  return PyTreeDef(node, data, kdefs, len(leaves) - start)


def tree_flatten(tree, is_leaf=None):
  """``(leaves, treedef)``; ``is_leaf(x)`` true stops the recursion at ``x``."""
  leaves = []
  if is_leaf is None:
    return leaves, _flat(tree, leaves)
  return leaves, _flat_is_leaf(tree, leaves, is_leaf)


def tree_leaves(tree, is_leaf=None):
  if is_leaf is None:
    out = []
    _leaves(tree, out)
    return out
  return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
  return tree_flatten(tree, is_leaf)[1]


def tree_unflatten(treedef, leaves):
  return treedef.unflatten(leaves)


def _prefix_error(path, prefix, full, is_leaf=None):
  """JAX's description of where ``full`` stops extending ``prefix`` (the first difference,
  depth first): ``name -> ValueError``, or None when none is found. Below the root the
  walk ignores ``is_leaf``, as JAX's does."""
  return next(_prefix_errors(path, prefix, full, is_leaf), None)


def prefix_errors(prefix_tree, full_tree, is_leaf=None):
  """Every place ``full_tree`` stops extending ``prefix_tree`` (JAX's
  ``jax._src.tree_util.prefix_errors``): a list of ``name -> ValueError``; a mismatched
  subtree is reported once and not searched further."""
  return list(_prefix_errors((), prefix_tree, full_tree, is_leaf))


def _prefix_errors(path, prefix, full, is_leaf=None):
  if is_leaf is not None and is_leaf(prefix):
    return
  t = type(prefix)
  node = _kinds[t] if t in _kinds else _lookup(t)
  if node is None:
    return  # a leaf is a prefix of anything
  where = keystr(path)
  if t is not type(full):
    yield lambda name: ValueError(
        f"pytree structure error: different types at key path\n    {name}{where}\nAt that key "
        f"path, the prefix pytree {name} has a subtree of type\n    {t}\nbut at the same key "
        f"path the full pytree has a subtree of different type\n    {type(full)}.")
    return
  kids1, meta1 = node.flatten(prefix)
  kids2, meta2 = node.flatten(full)
  keyed1, keyed2 = _keyed_children(prefix, node), _keyed_children(full, node)
  if node.kind in ("tuple", "list"):
    if len(prefix) != len(full):
      tn = t.__name__
      yield lambda name: ValueError(
          f"pytree structure error: different lengths of {tn} at key path\n    {name}{where}\n"
          f"At that key path, the prefix pytree {name} has a subtree of type {tn} of length "
          f"{len(prefix)}, but the full pytree has a subtree of the same type but of length "
          f"{len(full)}.")
      return
  elif len(kids1) != len(kids2):
    names1 = " ".join(str(_key_of(k)) for k, _ in keyed1)
    names2 = " ".join(str(_key_of(k)) for k, _ in keyed2)
    try:
      diff = set(k for k, _ in keyed1).symmetric_difference(k for k, _ in keyed2)
      diff = "so the symmetric difference on key sets is\n    " + " ".join(
          str(_key_of(k)) for k in diff)
    except Exception:  # noqa: BLE001 -- unhashable keys: no difference shown
      diff = ""
    yield lambda name: ValueError(
        f"pytree structure error: different numbers of pytree children at key path\n"
        f"    {name}{where}\nAt that key path, the prefix pytree {name} has a subtree of type\n"
        f"    {t}\nwith {len(kids1)} child keys\n    {names1}\nbut at the same key path the "
        f"full pytree has a subtree of the same type but with {len(kids2)} child keys\n"
        f"    {names2}\n{diff}")
    return
  if meta1 != meta2:
    s1, s2 = str(meta1), str(meta2)
    diff = textwrap.indent("\n".join(difflib.ndiff(s1.splitlines(), s2.splitlines())), "    ")
    yield lambda name: ValueError(
        f"pytree structure error: different pytree metadata at key path\n    {name}{where}\n"
        f"At that key path, the prefix pytree {name} has a subtree of type\n    {t}\nwith "
        f"metadata\n    {s1}\nbut at the same key path the full pytree has a subtree of the "
        f"same type but with metadata\n    {s2}\nso the diff in the metadata at these pytree "
        f"nodes is\n{diff}")
    return
  for (k, c1), (_, c2) in zip(keyed1, keyed2):
    yield from _prefix_errors((*path, k), c1, c2)


def _key_of(k):
  return getattr(k, "key", k)


def _mismatch(name, tree, other, is_leaf, err):
  """The error for ``other`` not extending ``tree``'s structure (JAX's, else ``err``)."""
  try:
    found = _prefix_error((), tree, other, is_leaf)
  except Exception:  # noqa: BLE001 -- the description is only for the message
    found = None
  return err if found is None else found(name)


def tree_map(f, tree, *rest, is_leaf=None, _flatten=None):
  """``f`` applied leafwise; ``rest`` trees must have ``tree``'s structure (or extend it)."""
  leaves, treedef = (_flatten or tree_flatten)(tree, is_leaf)
  if not rest:
    return treedef.unflatten([f(x) for x in leaves])
  all_leaves = [leaves]
  for r in rest:
    try:
      all_leaves.append(treedef.flatten_up_to(r))
    except Exception as e:  # noqa: BLE001 -- re-raised, described as JAX's
      raise _mismatch("tree_map tree", tree, r, is_leaf, e) from None
  return treedef.unflatten([f(*xs) for xs in zip(*all_leaves)])


_MISSING = object()


def tree_reduce(function, tree, initializer=_MISSING, is_leaf=None):
  leaves = tree_leaves(tree, is_leaf)
  if initializer is _MISSING:
    return functools.reduce(function, leaves)
  return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf=None):
  return all(tree_leaves(tree, is_leaf))


def treedef_children(treedef):
  return treedef.children()


def treedef_is_leaf(treedef):
  """True for a structure with one node: a leaf, None, or an empty container."""
  return not treedef.kids


def treedef_is_strict_leaf(treedef):
  return treedef.node is None


def treedef_tuple(treedefs):
  kids = tuple(treedefs)
  return PyTreeDef(_registry[tuple], None, kids, sum(k.num_leaves for k in kids))


def all_leaves(iterable, is_leaf=None):
  """True iff every element of ``iterable`` is a leaf."""
  if is_leaf is None:
    return all((_kinds[type(x)] if type(x) in _kinds else _lookup(type(x))) is None
               for x in iterable)
  lst = list(iterable)
  return lst == tree_leaves(lst, is_leaf)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose, is_leaf=None):
  """Turn a tree of trees (outer of inner) into an inner tree of outer trees."""
  if inner_treedef is None:
    inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0],
                                   is_leaf)
  flat, treedef = tree_flatten(pytree_to_transpose, is_leaf)
  inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
  if treedef.num_leaves != inner_size * outer_size:
    raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
  it = iter(flat)
  lol = [[next(it) for _ in range(inner_size)] for _ in range(outer_size)]
  return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in zip(*lol)])


# ---- registration -----------------------------------------------------------------------

def _register(node):
  if node.type in _registry:
    raise ValueError(f"Duplicate custom PyTreeDef type registration for {node.type}.")
  _registry[node.type] = node
  _kinds[node.type] = node
  _user_kinds[node.type] = None if node.kind == "opaque" else node


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
  """Make ``nodetype`` a node: ``flatten_func(x) -> (children, aux)``; ``unflatten_func(aux, children)``.

  ``aux`` must be hashable and comparable: it is part of the treedef. A ``flatten_func``
  returning anything but a ``(children, aux)`` pair with iterable children raises JAX's
  ValueError.
  """
  _register(_Node(nodetype, _checked_flatten(flatten_func), unflatten_func,
                  flatten_with_keys_func))


def _checked_flatten(flatten_func):
  def flatten(x):
    out = flatten_func(x)
    if type(out) is not tuple or len(out) != 2:
      raise ValueError("The to_iterable function for a custom PyTree node should return a "
                       f"(children, aux_data) tuple, got {out!r}")
    try:
      iter(out[0])
    except TypeError:
      raise ValueError("The to_iterable function for a custom PyTree node should return a "
                       f"(children, aux_data) tuple where 'children' is iterable, got "
                       f"{out!r}") from None
    return out
  flatten.__wrapped__ = flatten_func
  return flatten


def register_opaque_node(nodetype, flatten_func, unflatten_func, trailing):
  """Make ``nodetype`` a node for the transformations (which flatten it to its children)
  but a leaf to users (``nbjax.tree_util``): JAX's key arrays. ``trailing(aux)``: how many
  trailing axes each child has beyond the node's own shape (a key's data: the key shape)."""
  opaque_types[nodetype] = trailing
  _register(_Node(nodetype, flatten_func, unflatten_func, kind="opaque"))


def has_opaque(treedef):
  """Whether ``treedef`` holds a ``register_opaque_node`` node (a key array)."""
  if treedef.node is not None and treedef.node.kind == "opaque":
    return True
  return any(has_opaque(k) for k in treedef.kids)


def trailing_axes(treedef):
  """Per leaf of ``treedef``: the trailing axes an opaque node above it adds (else 0), so
  that a negative axis of the user's value (a key array's) can be made the leaf's."""
  out = []

  def go(td, extra):
    if td.node is None:
      out.append(extra)
      return
    if td.node.kind == "opaque":
      extra = opaque_types[td.node.type](td.data)
    for k in td.kids:
      go(k, extra)
  go(treedef, 0)
  return out


def register_pytree_node_class(cls):
  """Class decorator: uses ``x.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
  register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
  return cls


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
  """Like ``register_pytree_node``, with ``flatten_with_keys(x) -> (((key, child), ...), aux)``."""
  if flatten_func is None:
    def flatten_func(x):
      kc, aux = flatten_with_keys(x)
      return [c for _, c in kc], aux
  register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls):
  register_pytree_with_keys(cls, operator.methodcaller("tree_flatten_with_keys"),
                            cls.tree_unflatten,
                            operator.methodcaller("tree_flatten") if hasattr(cls, "tree_flatten") else None)
  return cls


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None, drop_fields=()):
  """Register a dataclass: ``data_fields`` are children, ``meta_fields`` are aux data.

  With neither given, fields are inferred: ``field(metadata=dict(static=True))`` marks meta.
  Usable as a bare decorator, or called with fields to get one.
  """
  if nodetype is None:
    return functools.partial(register_dataclass, data_fields=data_fields,
                             meta_fields=meta_fields, drop_fields=drop_fields)
  if data_fields is None or meta_fields is None:
    if (data_fields is None) != (meta_fields is None):
      raise TypeError("register_dataclass: data_fields and meta_fields must both be specified"
                      f" when either is specified. Got {data_fields=} {meta_fields=}.")
    if not dataclasses.is_dataclass(nodetype):
      raise TypeError("register_dataclass: data_fields and meta_fields are required when"
                      f" nodetype is not a dataclass. Got {nodetype=}.")
    fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
    meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
  data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
  if dataclasses.is_dataclass(nodetype):  # JAX's checks and messages
    init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
    if {*meta_fields, *data_fields} != init:
      msg = ("data_fields and meta_fields must include all dataclass fields with ``init=True`` "
             "and only them.")
      if missing := init - {*meta_fields, *data_fields}:
        msg += f" Missing fields: {missing}. Add them to drop_fields to suppress this error."
      if unexpected := {*meta_fields, *data_fields} - init:
        msg += f" Unexpected fields: {unexpected}."
      raise ValueError(msg)
  if overlap := set(data_fields) & set(meta_fields):
    raise ValueError(f"data_fields and meta_fields must not overlap. Overlapping fields: "
                     f"{overlap}.")

  def flatten(x):
    return [getattr(x, n) for n in data_fields], tuple(getattr(x, n) for n in meta_fields)

  def flatten_with_keys(x):
    return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
            tuple(getattr(x, n) for n in meta_fields))

  def unflatten(meta, data):
    return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

  register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
  return nodetype


def register_static(cls):
  """Register ``cls`` as a node with no children whose value is its aux data."""
  register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
  return cls


class _HashableCallableShim:
  """Wraps a functools.partial passed to Partial, so its arguments are not merged in."""
  def __init__(self, fun):
    self.fun = fun

  def __call__(self, *args, **kw):
    return self.fun(*args, **kw)

  def __hash__(self):
    return hash(self.fun)

  def __eq__(self, other):
    if isinstance(other, _HashableCallableShim):
      return self.fun == other.fun
    return self.fun == other


class Partial(functools.partial):
  """``functools.partial`` as a pytree: the arguments are children, the function is aux data.

  Use it to pass a function with bound array arguments through ``jit`` or ``tree_map``.
  """
  def __new__(klass, func, *args, **kw):
    if isinstance(func, functools.partial):
      original = func
      func = _HashableCallableShim(original)
      out = super().__new__(klass, func, *args, **kw)
      func.func, func.args, func.keywords = original.func, original.args, original.keywords
      return out
    return super().__new__(klass, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)


# ---- key paths ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
  idx: int
  def __str__(self):
    return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
  key: object
  def __str__(self):
    return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
  name: str
  def __str__(self):
    return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
  key: int
  def __str__(self):
    return f"[<flat index {self.key}>]"

  def __hash__(self):  # (not SequenceKey(i)'s hash, as JAX's)
    return hash((FlattenedIndexKey, self.key))


def keystr(keys, *, simple=False, separator=""):
  """``keystr((DictKey('a'), SequenceKey(0))) == "['a'][0]"``."""
  if simple:
    return separator.join(str(next((getattr(k, a) for a in ("idx", "key", "name")
                                    if hasattr(k, a)), k)) for k in keys)
  return separator.join(str(k) for k in keys)


def _keyed_children(x, node):
  kind = node.kind
  if kind in ("tuple", "list"):
    return [(SequenceKey(i), c) for i, c in enumerate(x)]
  if kind == "namedtuple":
    return [(GetAttrKey(f), c) for f, c in zip(node.type._fields, x)]
  if kind in ("dict", "ddict"):
    return [(DictKey(k), x[k]) for k in _sorted_keys(x)]
  if kind == "odict":
    return [(DictKey(k), v) for k, v in x.items()]
  if kind == "none":
    return []
  if node.flatten_with_keys is not None:
    return list(node.flatten_with_keys(x)[0])
  return [(FlattenedIndexKey(i), c) for i, c in enumerate(node.flatten(x)[0])]


def _flat_with_path(x, path, out, is_leaf, forced=None):
  """``is_leaf(path, x)`` (path-aware) or ``is_leaf(x)``; ``forced`` collects the ids of the
  nodes a path-aware predicate made leaves."""
  if is_leaf is not None and (is_leaf(path, x) if forced is not None else is_leaf(x)):
    out.append((path, x))
    if forced is not None:
      forced.add(id(x))
    return
  t = type(x)
  node = _kinds[t] if t in _kinds else _lookup(t)
  if node is None:
    out.append((path, x))
    return
  for k, c in _keyed_children(x, node):
    _flat_with_path(c, path + (k,), out, is_leaf, forced)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
  """``([(key_path, leaf), ...], treedef)``; ``is_leaf_takes_path``: ``is_leaf(path, x)``."""
  out = []
  if is_leaf_takes_path and is_leaf is not None:
    forced = set()
    _flat_with_path(tree, (), out, is_leaf, forced)
    return out, tree_structure(tree, lambda x: id(x) in forced)
  _flat_with_path(tree, (), out, is_leaf)
  return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
  out = []
  _flat_with_path(tree, (), out, is_leaf,
                  set() if is_leaf_takes_path and is_leaf is not None else None)
  return out


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
  """``f(key_path, leaf, *other_leaves)`` applied leafwise."""
  path_leaves, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
  paths, leaves = [p for p, _ in path_leaves], [x for _, x in path_leaves]
  all_leaves = [leaves]
  for r in rest:
    try:
      all_leaves.append(treedef.flatten_up_to(r))
    except Exception as e:  # noqa: BLE001 -- re-raised, described as JAX's
      raise _mismatch("tree_map_with_path tree", tree, r, is_leaf, e) from None
  return treedef.unflatten([f(p, *xs) for p, *xs in zip(paths, *all_leaves)])


def broadcast_prefix(prefix_tree, full_tree, is_leaf=None):
  """The leaves of ``prefix_tree``, each repeated once per leaf of the ``full_tree`` subtree
  it is a prefix of."""
  result = []
  leaves, treedef = tree_flatten(prefix_tree, is_leaf)
  try:
    subs = treedef.flatten_up_to(full_tree)
  except Exception as e:  # noqa: BLE001 -- re-raised, described as JAX's
    raise _mismatch("broadcast_prefix prefix_tree", prefix_tree, full_tree, is_leaf, e) from None
  for x, sub in zip(leaves, subs):
    result.extend([x] * tree_structure(sub, is_leaf).num_leaves)
  return result


class _Slot:
  """A placeholder leaf (never a pytree node)."""
  __slots__ = ()


def broadcast_flattened_prefix_with_treedef(prefix_leaves, prefix_treedef, full_treedef):
  """``broadcast_prefix`` on flattened trees (JAX's private helper): each prefix leaf
  repeated once per leaf of the ``full_treedef`` subtree it is a prefix of."""
  prefix_leaves = list(prefix_leaves)
  positions = prefix_treedef.unflatten(list(range(len(prefix_leaves))))  # (ints: leaves)
  full = full_treedef.unflatten([_Slot() for _ in range(full_treedef.num_leaves)])
  return [prefix_leaves[i] for i in broadcast_prefix(positions, full)]


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
  """``prefix_tree`` broadcast to ``full_tree``'s structure: each of its leaves replaces
  every leaf of the corresponding ``full_tree`` subtree.

  >>> tree_broadcast([1, 2], [[3, 4], (5,)])
  [[1, 1], (2,)]
  """
  return tree_structure(full_tree, is_leaf).unflatten(
      broadcast_prefix(prefix_tree, full_tree, is_leaf))


# ----------------------------------------------------------------- treedef differences


def _type_str(t, leaf="pytree leaf"):
  return leaf if t.node is None else str(t.node.type)


def _children(t):
  n = len(t.kids)
  return f"{_type_str(t)} with {n} child{'ren' if n > 1 else ''}"


def tree_diffs(t1, t2, path=(), leaf="pytree leaf"):
  """``(keypath, thing1, thing2, explanation)`` for each place two treedefs differ (the
  wording of JAX's ``equality_errors``); ``leaf`` names a leaf."""
  if t1 == t2:
    return []
  n1, n2 = t1.node, t2.node
  if (None if n1 is None else n1.type) is not (None if n2 is None else n2.type):
    return [(path, _type_str(t1, leaf), _type_str(t2, leaf), "their Python types differ")]
  if n1.kind in ("tuple", "list") and len(t1.kids) != len(t2.kids):
    return [(path, f"{n1.kind} of length {len(t1.kids)}", f"{n2.kind} of length {len(t2.kids)}",
             "the lengths do not match")]
  if len(t1.kids) != len(t2.kids):
    why = "the numbers of children do not match"
    if n1.kind in ("dict", "odict"):  # JAX names the keys in just one of them
      diff = " ".join(repr(k) for k in set(t1.data) ^ set(t2.data))
      why += diff and f", with the symmetric difference of key sets: {{{diff}}}"
    return [(path, _children(t1), _children(t2), why)]
  if t1.data != t2.data:
    return [(path, f"{_type_str(t1)} with pytree metadata {t1.data}",
             f"{_type_str(t2)} with pytree metadata {t2.data}",
             "the pytree node metadata does not match")]
  out = []
  keyed = n1.kind in ("dict", "odict")
  for k, a, b in zip(t1.data if keyed else range(len(t1.kids)), t1.kids, t2.kids):
    out += tree_diffs(a, b, (*path, DictKey(k) if keyed else SequenceKey(k)), leaf)
  return out
