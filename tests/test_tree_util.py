"""Tests for nbjax.tree_util: round trips, node kinds, tree_map, errors, treedef identity."""
import collections
import dataclasses
import functools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbjax
import nbjax.tree
from nbjax import _tree_util as _tu, tree_util as tu

Point = collections.namedtuple("Point", ["x", "y"])


@tu.register_pytree_node_class
class Box:
  def __init__(self, a, b, name):
    self.a, self.b, self.name = a, b, name

  def tree_flatten(self):
    return (self.a, self.b), self.name

  @classmethod
  def tree_unflatten(cls, name, children):
    return cls(*children, name)

  def __eq__(self, other):
    return type(other) is Box and (self.a, self.b, self.name) == (other.a, other.b, other.name)


@tu.register_dataclass
@dataclasses.dataclass
class Params:
  w: object
  b: object
  act: str = dataclasses.field(default="relu", metadata=dict(static=True))


@dataclasses.dataclass
class Explicit:
  x: object
  n: int

tu.register_dataclass(Explicit, data_fields=["x"], meta_fields=["n"])


class Opaque:
  pass


def roundtrip(tree, **kw):
  leaves, treedef = tu.tree_flatten(tree, **kw)
  assert treedef.num_leaves == len(leaves)
  out = tu.tree_unflatten(treedef, leaves)
  assert tu.tree_structure(out, **kw) == treedef
  return leaves, treedef, out


@pytest.mark.parametrize("tree, nleaves", [
    (1, 1),
    ((1, 2, 3), 3),
    ([1, [2, (3,)]], 3),
    ({"b": 1, "a": (2, 3)}, 3),
    (None, 0),
    ((None, 1, [None]), 1),
    ((), 0),
    ([], 0),
    ({}, 0),
    (Point(1, (2, 3)), 3),
    (collections.OrderedDict([("z", 1), ("a", 2)]), 2),
    (collections.defaultdict(list, {"q": 1, "p": [2]}), 2),
    (Params(np.ones(2), 3.0), 2),
    (Explicit(x=[1, 2], n=5), 2),
    (Box(1, [2, 3], "box"), 3),
    ({"p": Params(1, (2, None)), "t": [Point(Box(1, 2, "n"), 3)]}, 5),
])
def test_roundtrip(tree, nleaves):
  leaves, treedef, out = roundtrip(tree)
  assert len(leaves) == nleaves
  assert type(out) is type(tree)
  if not isinstance(tree, Params) and not isinstance(tree, dict):
    assert out == tree
  assert tu.tree_leaves(tree) == leaves
  assert treedef.num_nodes >= 1


def test_dict_sorted_and_ordered_dicts():
  leaves, td = tu.tree_flatten({"b": 1, "a": 2, "c": 3})
  assert leaves == [2, 1, 3]
  out = td.unflatten([10, 20, 30])
  assert list(out) == ["a", "b", "c"] and out == {"a": 10, "b": 20, "c": 30}
  od = collections.OrderedDict([("z", 1), ("a", 2)])
  leaves, td = tu.tree_flatten(od)
  assert leaves == [1, 2]
  out = td.unflatten([3, 4])
  assert type(out) is collections.OrderedDict and list(out.items()) == [("z", 3), ("a", 4)]
  dd = collections.defaultdict(int, {"b": 1, "a": 2})
  out = tu.tree_map(lambda x: x * 10, dd)
  assert type(out) is collections.defaultdict and out.default_factory is int
  assert out == {"a": 20, "b": 10} and out["missing"] == 0
  assert tu.tree_structure({"a": 1}) != tu.tree_structure(collections.OrderedDict(a=1))


def test_none_is_a_node_not_a_leaf():
  assert tu.tree_leaves(None) == []
  assert tu.tree_leaves([None, 1, {"a": None}]) == [1]
  assert tu.tree_map(lambda x: x + 1, (None, 1)) == (None, 2)
  assert tu.tree_structure(None).num_leaves == 0
  assert tu.treedef_is_leaf(tu.tree_structure(None))
  assert not tu.treedef_is_strict_leaf(tu.tree_structure(None))
  assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
  assert not tu.all_leaves([None, 1])


def test_leaves_are_anything_unregistered():
  o, a = Opaque(), np.arange(3)
  leaves, td = tu.tree_flatten([o, a, "s", 1.5, b"b"])
  assert leaves[0] is o and leaves[1] is a and leaves[2:] == ["s", 1.5, b"b"]
  assert tu.all_leaves([o, a, 1]) and not tu.all_leaves([o, (1,)])
  assert tu.treedef_is_strict_leaf(tu.tree_structure(a))

  class MyTuple(tuple):  # a tuple subclass without _fields is a leaf
    pass
  assert tu.tree_leaves(MyTuple((1, 2))) == [MyTuple((1, 2))]


def test_tree_map_multi_and_is_leaf():
  t1 = {"a": (1, 2), "b": [3]}
  t2 = {"a": (10, 20), "b": [30]}
  assert tu.tree_map(lambda x, y: x + y, t1, t2) == {"a": (11, 22), "b": [33]}
  assert tu.tree_map(lambda x, y, z: x + y + z, [1], [2], [3]) == [6]
  # rest trees may have subtrees where the first has leaves
  assert tu.tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"k": 5}]) == [(1, (3, 4)), (2, {"k": 5})]
  pairs = [(1, 2), (3, 4)]
  assert tu.tree_map(lambda p: p[0] * p[1], pairs, is_leaf=lambda x: isinstance(x, tuple)) == [2, 12]
  assert tu.tree_map(lambda x: x, Point(1, 2)) == Point(1, 2)
  out = tu.tree_map(lambda x: x * 2, Params(np.ones(2), 3.0, "tanh"))
  assert out.act == "tanh" and out.b == 6.0 and np.array_equal(out.w, [2, 2])


@pytest.mark.parametrize("t1, t2, fragment", [
    ((1, 2), (1, 2, 3), "Tuple arity mismatch"),
    ((1, 2), [1, 2], "Expected tuple"),
    ([1, 2], [1], "List arity mismatch"),
    ({"a": 1}, {"b": 1}, "Dict key mismatch"),
    ((None,), (1,), "Expected None"),
    (Point(1, 2), (1, 2), "Expected named tuple"),
    (Box(1, 2, "x"), Box(1, 2, "y"), "Mismatch custom node data"),
    (Box(1, 2, "x"), (1, 2), "Custom node type mismatch"),
])
def test_tree_map_mismatch(t1, t2, fragment):
  with pytest.raises(ValueError) as e:
    tu.tree_map(lambda x, y: x, t1, t2)
  assert str(e.value).startswith("pytree structure error: different ")
  with pytest.raises(ValueError, match=fragment):
    tu.tree_structure(t1).flatten_up_to(t2)


def _map_error(t1, t2, f=tu.tree_map):
  with pytest.raises(ValueError) as e:
    f(lambda *a: a[-1], t1, t2)
  return str(e.value)


def test_tree_map_mismatch_messages_are_jaxs():
  assert _map_error([1, 2], [3, 4, 5]) == (
      "pytree structure error: different lengths of list at key path\n    tree_map tree\n"
      "At that key path, the prefix pytree tree_map tree has a subtree of type list of length "
      "2, but the full pytree has a subtree of the same type but of length 3.")
  assert _map_error({"a": {"b": (1, 2)}}, {"a": {"b": [1, 2]}}) == (
      "pytree structure error: different types at key path\n    tree_map tree['a']['b']\n"
      "At that key path, the prefix pytree tree_map tree has a subtree of type\n"
      "    <class 'tuple'>\nbut at the same key path the full pytree has a subtree of "
      "different type\n    <class 'list'>.")
  assert _map_error({"a": 1, "b": 2}, {"a": 1}) == (
      "pytree structure error: different numbers of pytree children at key path\n"
      "    tree_map tree\nAt that key path, the prefix pytree tree_map tree has a subtree of "
      "type\n    <class 'dict'>\nwith 2 child keys\n    a b\nbut at the same key path the "
      "full pytree has a subtree of the same type but with 1 child keys\n    a\n"
      "so the symmetric difference on key sets is\n    b")
  assert _map_error({"a": 1, "c": 2}, {"a": 1, "b": 2}) == (
      "pytree structure error: different pytree metadata at key path\n    tree_map tree\n"
      "At that key path, the prefix pytree tree_map tree has a subtree of type\n"
      "    <class 'dict'>\nwith metadata\n    ('a', 'c')\nbut at the same key path the full "
      "pytree has a subtree of the same type but with metadata\n    ('a', 'b')\n"
      "so the diff in the metadata at these pytree nodes is\n    - ('a', 'c')\n"
      "    ?        ^\n\n    + ('a', 'b')\n    ?        ^\n")
  assert "tree_map_with_path tree" in _map_error([1, 2], [3], tu.tree_map_with_path)
  with pytest.raises(ValueError, match=r"different lengths of list at key path\n"
                                       r"    broadcast_prefix prefix_tree\n"):
    nbjax.tree.broadcast([1, 2], [3])
  # OrderedDict / defaultdict / dict are different node types; OrderedDict key order counts
  od = collections.OrderedDict
  assert "<class 'collections.OrderedDict'>" in _map_error({"a": 1}, od(a=1))
  assert "with metadata\n    ('b', 'a')" in _map_error(od(b=1, a=2), od(a=1, b=2))
  with pytest.raises(ValueError, match=r"Expected dict, got OrderedDict"):
    tu.tree_structure({"a": 1}).flatten_up_to(od(a=1))
  with pytest.raises(ValueError, match=r"Custom node type mismatch: expected type: "
                                       r"<class 'collections.OrderedDict'>, value: \{'a': 1\}."):
    tu.tree_structure(od(a=1)).flatten_up_to({"a": 1})
  with pytest.raises(ValueError, match=r"^Dict key mismatch; expected keys: \['a', 'b'\]; "
                                       r"present keys: \['a'\].$"):
    tu.tree_structure({"a": 1, "b": 2}).flatten_up_to({"a": 1})
  with pytest.raises(ValueError, match=r"^Expected named tuple, got \(1, 2\).$"):
    tu.tree_structure(Point(1, 2)).flatten_up_to((1, 2))
  with pytest.raises(ValueError, match=r"Mismatch custom node data: 'x' != 'y'"):
    tu.tree_structure(Box(1, 2, "x")).flatten_up_to(Box(1, 2, "y"))
  with pytest.raises(ValueError, match=r"Expected None, got 1.\n\nIn previous releases"):
    tu.tree_structure([None]).flatten_up_to([1])


def test_treedef_node_data_and_unhashable_aux():
  assert tu.tree_structure({"b": 1, "a": 2}).node_data() == (dict, ["a", "b"])
  assert tu.tree_structure(collections.OrderedDict(b=1, a=2)).node_data() == (
      collections.OrderedDict, ("b", "a"))
  td = tu.tree_structure(Box(1, 2, ["unhashable"]))
  assert hash(td) == hash(tu.tree_structure(Box(3, 4, ["unhashable"])))


def test_unflatten_wrong_count():
  td = tu.tree_structure((1, 2))
  with pytest.raises(ValueError, match=r"^Too few leaves for PyTreeDef; expected 2, got 1$"):
    td.unflatten([1])
  with pytest.raises(ValueError, match=r"^Too many leaves for PyTreeDef; expected 2.$"):
    td.unflatten([1, 2, 3])
  assert td.unflatten(iter([5, 6])) == (5, 6)


def test_treedef_equality_hash():
  a = tu.tree_structure((np.ones(2), {"x": 1, "y": [2]}))
  b = tu.tree_structure((0, {"y": [np.zeros(1)], "x": "leaf"}))
  assert a == b and hash(a) == hash(b)
  assert len({a, b}) == 1
  assert a != tu.tree_structure((0, {"x": 1, "y": (2,)}))
  assert tu.tree_structure([1, 2]) != tu.tree_structure((1, 2))
  assert tu.tree_structure(Box(1, 2, "a")) != tu.tree_structure(Box(1, 2, "b"))
  assert tu.tree_structure(Box(1, 2, "a")) == tu.tree_structure(Box(3, 4, "a"))
  assert tu.tree_structure(Point(1, 2)) != tu.tree_structure((1, 2))
  assert tu.tree_structure(Params(1, 2, "relu")) != tu.tree_structure(Params(1, 2, "tanh"))
  cache = {a: "hit"}
  assert cache[tu.tree_structure((1, {"x": 2, "y": [3]}))] == "hit"
  assert pickle.loads(pickle.dumps(a)) == a
  assert a != "not a treedef"


def test_repr():
  r = lambda t: repr(tu.tree_structure(t))
  assert r((1, {"a": 2})) == "PyTreeDef((*, {'a': *}))"
  assert r(1) == "PyTreeDef(*)"
  assert r(None) == "PyTreeDef(None)"
  assert r((1,)) == "PyTreeDef((*,))"
  assert r([1, None, ()]) == "PyTreeDef([*, None, ()])"
  # JAX's CustomNode(name[aux], [...]) for namedtuples, OrderedDict, defaultdict and
  # registered types (the aux data as str)
  assert r(Point(1, 2)) == "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))"
  assert r(Box(1, 2, "n")) == "PyTreeDef(CustomNode(Box[n], [*, *]))"
  assert r(collections.OrderedDict(b=1, a=2)) == (
      "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))")
  assert r(collections.defaultdict(list, {"b": 1, "a": None})) == (
      "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a', 'b'))], [None, *]))")
  assert r({"a": collections.OrderedDict()}) == "PyTreeDef({'a': CustomNode(OrderedDict[()], [])})"


def test_treedef_methods():
  td = tu.tree_structure((1, [2, 3], {"a": 4}))
  assert td.num_leaves == 4 and td.num_nodes == 7
  kids = tu.treedef_children(td)
  assert [k.num_leaves for k in kids] == [1, 2, 1]
  assert kids[1] == tu.tree_structure([0, 0])
  assert td.node_data() == (tuple, None)
  assert tu.tree_structure({"a": 1}).node_data() == (dict, ["a"])  # a list, as JAX's
  assert tu.tree_structure(1).node_data() is None
  inner = tu.tree_structure((0, 0))
  comp = tu.tree_structure([0, 0]).compose(inner)
  assert comp == tu.tree_structure([(0, 0), (0, 0)]) and comp.num_leaves == 4
  assert td.flatten_up_to((1, [(2, 2), 3], {"a": [4]})) == [1, (2, 2), 3, [4]]
  assert tu.treedef_tuple([tu.tree_structure(1), inner]) == tu.tree_structure((0, (0, 0)))


def test_reduce_all_transpose():
  assert tu.tree_reduce(lambda a, b: a + b, [1, (2, 3)]) == 6
  assert tu.tree_reduce(lambda a, b: a + b, [], 10) == 10
  assert tu.tree_all([True, (1, {"a": True})]) and not tu.tree_all([True, 0])
  outer = tu.tree_structure([0, 0, 0])
  inner = tu.tree_structure({"a": 0, "b": 0})
  tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
  assert tu.tree_transpose(outer, inner, tree) == {"a": [1, 3, 5], "b": [2, 4, 6]}
  assert tu.tree_transpose(outer, None, tree) == {"a": [1, 3, 5], "b": [2, 4, 6]}
  with pytest.raises(TypeError, match="Mismatch"):
    tu.tree_transpose(outer, inner, tree[:2])


def test_partial():
  def f(a, b, c=0):
    return a + b + c
  p = tu.Partial(f, np.float64(1.0), c=np.float64(3.0))
  leaves, td = tu.tree_flatten(p)
  assert leaves == [1.0, 3.0]
  q = tu.tree_map(lambda x: x * 10, p)
  assert isinstance(q, tu.Partial) and q(2.0) == 42.0
  assert tu.tree_structure(tu.Partial(f, 5.0)) == tu.tree_structure(tu.Partial(f, 6.0))
  inner = functools.partial(f, 1.0)
  p2 = tu.Partial(inner, 2.0)
  assert tu.tree_leaves(p2) == [2.0] and p2() == 3.0
  assert tu.tree_map(lambda x: x, p2)(c=1.0) == 4.0


def test_register_pytree_node_and_keys():
  class Pair:
    def __init__(self, l, r):
      self.l, self.r = l, r
  tu.register_pytree_node(Pair, lambda p: ((p.l, p.r), None), lambda _, xs: Pair(*xs))
  out = tu.tree_map(lambda x: x + 1, Pair(1, [2]))
  assert isinstance(out, Pair) and out.l == 2 and out.r == [3]
  with pytest.raises(ValueError, match="Duplicate"):
    tu.register_pytree_node(Pair, lambda p: ((), None), lambda _, xs: None)

  class Keyed:
    def __init__(self, u, v):
      self.u, self.v = u, v
  tu.register_pytree_with_keys(
      Keyed, lambda k: (((tu.GetAttrKey("u"), k.u), (tu.GetAttrKey("v"), k.v)), None),
      lambda _, xs: Keyed(*xs))
  assert tu.tree_leaves(Keyed(1, (2,))) == [1, 2]
  paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(Keyed(1, (2,)))[0]]
  assert paths == [".u", ".v[0]"]


def test_register_dataclass_forms():
  with pytest.raises(TypeError):
    tu.register_dataclass(Opaque)

  @tu.register_dataclass
  @dataclasses.dataclass
  class Model:
    a: object
    cfg: tuple = dataclasses.field(default=(1, 2), metadata=dict(static=True))
  leaves, td = tu.tree_flatten(Model([1, 2], cfg=("x",)))
  assert leaves == [1, 2]
  out = td.unflatten([3, 4])
  assert out.a == [3, 4] and out.cfg == ("x",)

  @tu.register_dataclass(data_fields=["p"], meta_fields=[])
  @dataclasses.dataclass
  class Single:
    p: object
  assert tu.tree_leaves(Single(7)) == [7]


def test_paths():
  tree = {"a": [1, (2, 3)], "b": Point(4, None), "c": Params(5, 6)}
  pl, td = tu.tree_flatten_with_path(tree)
  assert [x for _, x in pl] == tu.tree_leaves(tree)
  assert [tu.keystr(p) for p, _ in pl] == [
      "['a'][0]", "['a'][1][0]", "['a'][1][1]", "['b'].x", "['c'].w", "['c'].b"]
  assert tu.keystr(pl[1][0], simple=True, separator="/") == "a/1/0"
  assert td == tu.tree_structure(tree)
  out = tu.tree_map_with_path(lambda p, x: tu.keystr(p), [1, {"k": 2}])
  assert out == ["[0]", {"k": "[1]['k']"}]
  assert tu.tree_map_with_path(lambda p, x, y: x + y, [1, 2], [10, 20]) == [11, 22]
  assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Box(1, 2, "n"))] == [
      "[<flat index 0>]", "[<flat index 1>]"]


# ---- generated structures -----------------------------------------------------------------

leaf_st = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
                    st.builds(Opaque))
key_st = st.text(alphabet="abcdef", min_size=1, max_size=3)
tree_st = st.recursive(
    leaf_st | st.none(),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(key_st, kids, max_size=4),
        st.dictionaries(key_st, kids, max_size=4).map(collections.OrderedDict),
        st.tuples(kids, kids).map(lambda t: Point(*t)),
        st.tuples(kids, kids).map(lambda t: Box(t[0], t[1], "g")),
    ),
    max_leaves=20)


def _same(a, b):
  if type(a) is not type(b):
    return False
  if isinstance(a, dict):
    return list(a) == list(b) if isinstance(a, collections.OrderedDict) else (
        sorted(a) == sorted(b)) and all(_same(a[k], b[k]) for k in a)
  if isinstance(a, (list, tuple)):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  if isinstance(a, Box):
    return a.name == b.name and _same(a.a, b.a) and _same(a.b, b.b)
  return a is b or a == b


@settings(max_examples=300, deadline=None)
@given(tree_st)
def test_roundtrip_generated(tree):
  leaves, td = tu.tree_flatten(tree)
  out = td.unflatten(leaves)
  assert _same(out, tree)
  assert all(x is y for x, y in zip(tu.tree_leaves(out), leaves))
  assert tu.tree_structure(out) == td and hash(tu.tree_structure(out)) == hash(td)
  assert td.flatten_up_to(tree) == leaves
  assert _same(tu.tree_map(lambda x, y: y, tree, out), tree)
  assert td.num_leaves == len(leaves) and td.num_nodes >= 1
  assert pickle.loads(pickle.dumps(td)) == td


def test_tree_namespace_is_tree_util():
  import nbjax
  t = {"b": [1, 2], "a": (3, None)}
  assert nbjax.tree.map(lambda x: x * 10, t) == {"b": [10, 20], "a": (30, None)}
  assert nbjax.tree.leaves(t) == [3, 1, 2]
  leaves, td = nbjax.tree.flatten(t)
  assert nbjax.tree.unflatten(td, leaves) == t and nbjax.tree.structure(t) == td
  assert nbjax.tree.reduce(lambda a, b: a + b, t) == 6 and nbjax.tree.all([True, 1])
  assert [k for k, _ in nbjax.tree.leaves_with_path(t)][0] == (nbjax.tree_util.DictKey("a"),
                                                              nbjax.tree_util.SequenceKey(0))


# ---- generated flatten/unflatten (jit's and the replay cache's hot paths) --------------

_plain = st.recursive(
    st.integers(0, 9),
    lambda kids: st.one_of(st.none(), st.tuples(kids, kids), st.lists(kids, max_size=3),
                           st.dictionaries(st.sampled_from("abc"), kids, max_size=3)),
    max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(_plain, _plain)
def test_generated_flatten_agrees_with_tree_flatten(a, b):
  """``flattener(treedef_a)(b)`` gives ``b``'s leaves exactly when ``b`` has ``a``'s
  containers (a leaf position may hold anything: the caller checks leaves); ``unflattener``
  rebuilds as ``unflatten`` does."""
  leaves_a, ta = tu.tree_flatten(a)
  flat = _tu.flattener(ta)
  assert flat(a) == leaves_a
  assert _tu.unflattener(ta)(leaves_a) == ta.unflatten(leaves_a) == a
  got = flat(b)
  same_containers = tu.tree_structure(b) == ta
  if same_containers:
    assert got == tu.tree_leaves(b)
  elif got is not None:  # only leaves of ``a`` replaced by subtrees may still match
    assert ta.flatten_up_to(b) == got


def test_generated_code_declines_other_nodes():
  _, t = tu.tree_flatten((Point(1, 2), 3))
  assert _tu.flattener(t) is None
  assert _tu.unflattener(t) == t.unflatten
  _, t = tu.tree_flatten({"a": 1, "b": 2})
  flat = _tu.flattener(t)
  assert flat({"b": 4, "a": 3}) == [3, 4]
  assert flat({"a": 3, "c": 4}) is None and flat(collections.OrderedDict(a=1, b=2)) is None
  assert flat({"a": 1}) is None and flat([1, 2]) is None


# ---- names added to match JAX 0.10.2's tree_util/tree (expected values from JAX) ----------

def test_flatten_one_level_matches_jax():
  assert tu.flatten_one_level({"a": [1, 2], "b": {"c": 3}}) == (([1, 2], {"c": 3}), ("a", "b"))  # (a tuple, as JAX 0.10.2)
  assert tu.flatten_one_level([1, (2, 3)]) == ([1, (2, 3)], None)
  assert tu.flatten_one_level((1,)) == ((1,), None)
  assert tu.flatten_one_level(None) == ((), None)
  assert tu.flatten_one_level(collections.OrderedDict(b=1, a=2)) == ([1, 2], ("b", "a"))
  assert tu.flatten_one_level(collections.defaultdict(list, {"b": 1, "a": 2})) == \
      ([2, 1], (list, ("a", "b")))
  assert tu.flatten_one_level(Point(1, [2])) == ([1, [2]], Point)
  assert tu.flatten_one_level(Box(1, 2, "n")) == ((1, 2), "n")
  assert tu.flatten_one_level(tu.Partial(max, 1, 2)) == (((1, 2), {}), max)
  for leaf in (3, nbjax.numpy.ones(2), nbjax.random.key(0)):
    with pytest.raises(ValueError, match="can't tree-flatten type: <class"):
      tu.flatten_one_level(leaf)


def test_flatten_one_level_with_keys_matches_jax():
  assert tu.flatten_one_level_with_keys({"a": [1, 2], "b": 3}) == \
      (((tu.DictKey("a"), [1, 2]), (tu.DictKey("b"), 3)), ("a", "b"))
  assert tu.flatten_one_level_with_keys([1, 2]) == \
      (((tu.SequenceKey(0), 1), (tu.SequenceKey(1), 2)), None)
  assert tu.flatten_one_level_with_keys(None) == ((), None)
  assert tu.flatten_one_level_with_keys(Box(1, 2, "n")) == \
      ([(tu.FlattenedIndexKey(0), 1), (tu.FlattenedIndexKey(1), 2)], "n")
  with pytest.raises(ValueError, match="can't tree-flatten type: <class 'int'>"):
    tu.flatten_one_level_with_keys(3)


def test_is_tree_node_and_default_registry():
  assert tu.is_tree_node(list) and tu.is_tree_node(type(None)) and tu.is_tree_node(Point)
  assert tu.is_tree_node(collections.OrderedDict) and tu.is_tree_node(Box)
  assert tu.is_tree_node(tu.Partial)
  assert not tu.is_tree_node(int) and not tu.is_tree_node(nbjax.Array)
  assert not tu.is_tree_node(type(nbjax.random.key(0)))  # key arrays are leaves to users
  assert not tu.is_tree_node([1])  # an instance, not a type
  reg = tu.default_registry
  leaves, treedef = reg.flatten([1, {"a": 2}])
  assert leaves == [1, 2] and treedef == tu.tree_structure([0, {"a": 0}])
  assert reg.flatten_one_level(3) is None and reg.flatten_one_level((1, 2)) == ((1, 2), None)
  assert reg.is_node(dict) and not reg.is_node(float)
  assert tu.KeyPath == tuple[tu.KeyEntry, ...]


def test_tree_reduce_associative_is_balanced():
  def show(a, b):
    return f"({a}{b})"
  assert tu.tree_reduce_associative(show, list("abcdefg")) == "((a(bc))((de)(fg)))"
  assert nbjax.tree.reduce_associative(show, {"x": "a", "y": ("b", "c")}) == "(a(bc))"
  assert tu.tree_reduce_associative(show, ["a"]) == "a"
  assert tu.tree_reduce_associative(show, [], identity="e") == "e"
  assert tu.tree_reduce_associative(show, ([1], [2]), is_leaf=lambda x: isinstance(x, list)) \
      == "([1][2])"
  with pytest.raises(TypeError, match="Must specify identity for parallel reduction of empty "
                     "sequence."):
    nbjax.tree.reduce_associative(show, [])


def test_tree_static_field():
  @tu.register_dataclass
  @dataclasses.dataclass
  class Op:
    x: object
    op: str = nbjax.tree.static(default="add")
    note: str = nbjax.tree.static(default="n", metadata={"doc": 1})

  leaves, treedef = nbjax.tree.flatten(Op(1))
  assert leaves == [1]
  assert nbjax.tree.unflatten(treedef, [5]) == Op(5, "add", "n")
  assert {f.name: dict(f.metadata) for f in dataclasses.fields(Op)}["note"] == \
      {"static": True, "doc": 1}


# -------------------------------------------------- as JAX 0.10.2's tree_util_test (x64)

def test_path_aware_is_leaf_as_jax():
  from nbjax import tree_util as tu
  tree = {"a": [1, 2], "b": (3, [4])}
  is_leaf = lambda path, x: len(path) == 1 and path[0] == tu.DictKey("b")
  leaves, treedef = tu.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path=True)
  assert [x for _, x in leaves] == [1, 2, (3, [4])]
  assert treedef.num_leaves == 3
  assert [x for _, x in tu.tree_leaves_with_path(tree, is_leaf, is_leaf_takes_path=True)] == [
      1, 2, (3, [4])]
  out = tu.tree_map_with_path(lambda p, x: len(p), tree, is_leaf=is_leaf,
                              is_leaf_takes_path=True)
  assert out == {"a": [2, 2], "b": 1}


def test_prefix_errors_and_broadcast_flattened_prefix_as_jax():
  from nbjax._src.tree_util import (broadcast_flattened_prefix_with_treedef, prefix_errors,
                                    dispatch_registry, default_registry)
  e1, e2 = prefix_errors(((1,), (2,)), ([3], [4]))
  with pytest.raises(ValueError, match=r"different types at key path\n    in_axes\[0\]"):
    raise e1("in_axes")
  with pytest.raises(ValueError, match=r"in_axes\[1\]"):
    raise e2("in_axes")
  assert prefix_errors((1, 2), ((11, 12, 13), 2)) == []
  from nbjax import tree_util as tu
  prefix, full = (1, 2, 3), (0, {"a": 0, "b": 0}, (0, 0))
  flat = broadcast_flattened_prefix_with_treedef(*tu.tree_flatten(prefix), tu.tree_structure(full))
  assert flat == [1, 2, 2, 3, 3]
  with pytest.raises(Exception):
    broadcast_flattened_prefix_with_treedef(*tu.tree_flatten((1, 2)), tu.tree_structure(full))
  assert dispatch_registry.flatten([1, (2,)]) == default_registry.flatten([1, (2,)])


def test_tree_util_errors_and_keys_as_jax():
  import collections
  import dataclasses
  from nbjax import tree_util as tu

  class Bad:
    pass
  tu.register_pytree_node(Bad, lambda x: "hello", lambda a, c: Bad())
  with pytest.raises(ValueError, match=r"should return a \(children, aux_data\) tuple, got "
                                       "'hello'"):
    tu.tree_flatten(Bad())

  class Bad2:
    pass
  tu.register_pytree_node(Bad2, lambda x: (7, 7), lambda a, c: Bad2())
  with pytest.raises(ValueError, match=r"where 'children' is iterable, got \(7, 7\)"):
    tu.tree_flatten(Bad2())

  @dataclasses.dataclass
  class Foo:
    x: int
    y: float
  with pytest.raises(ValueError, match="Unexpected fields: {'z'}"):
    tu.register_dataclass(Foo, data_fields=["x"], meta_fields=["y", "z"])
  with pytest.raises(ValueError, match="Overlapping fields: {'x'}"):
    tu.register_dataclass(Foo, data_fields=["x", "y"], meta_fields=["x"])
  with pytest.raises(TypeError, match="must both be specified when either is specified"):
    tu.register_dataclass(Foo, data_fields=["x"])

  assert hash(tu.FlattenedIndexKey(1)) != hash(tu.SequenceKey(1))
  A = collections.namedtuple("A", "foo bar")
  B = collections.namedtuple("B", "foo bar")
  with pytest.raises(ValueError, match="Named tuple type mismatch"):
    tu.tree_structure(A(1, 2)).flatten_up_to(B(1, 2))
  with pytest.raises(ValueError, match=r"Expected named tuple, got \(1, 2\)"):
    tu.tree_structure(A(1, 2)).flatten_up_to((1, 2))
  seen = []
  tu.tree_structure({"b": 2, "a": 1}).walk(lambda n, d: seen.append(d), None, [1, 2])
  assert seen == [["a", "b"]]


def test_treedef_protocol_buffer_round_trip_as_jax():
  """PyTreeDef.serialize_using_proto writes jaxlib's bytes (these are JAX 0.10.2's) and
  deserialize_using_proto reads them back; user-defined nodes (namedtuples, OrderedDict,
  registered classes) are JAX's ValueError (tree_util_test test_serialize_treedef)."""
  t = tu.tree_structure([1, [2], (3,), {'a': 4, 'b': 5}])
  b = t.serialize_using_proto()
  assert b == (b'\n\x02\x10\x01\n\x02\x10\x01\n\x04\x08\x01\x10\x02\n\x02\x10\x01\n\x04\x08\x01'
               b'\x10\x04\n\x02\x10\x01\n\x02\x10\x01\n\n\x08\x02\x10\x05\x1a\x04\n\x02\x00\x01'
               b'\n\x04\x08\x04\x10\x02\x12\x01a\x12\x01b')
  assert tu.PyTreeDef.deserialize_using_proto(tu.default_registry, b) == t
  assert tu.tree_structure(None).serialize_using_proto() == b'\n\x02\x10\x03'
  assert tu.tree_structure(1).serialize_using_proto() == b'\n\x02\x10\x01'
  P = collections.namedtuple('P', 'a b')
  for x in (P(1, 2), collections.OrderedDict(b=1, a=2), [1, {'k': P(1, 2)}]):
    with pytest.raises(ValueError, match="User-defined nodes are not supported"):
      tu.tree_structure(x).serialize_using_proto()


def test_generated_flatteners_make_no_reference_cycles():
  """The code generators behind jit's fast path (``flattener``/``unflattener``) leave no
  garbage for the cycle collector (core_test.test_reference_cycles_jit)."""
  import gc
  tree = ({'a': 1, 'b': [2, (3, None)]}, (4,))
  treedef = tu.tree_structure(tree)
  while gc.collect():  # (earlier tests' garbage: a collection's weakref callbacks can free
    pass             # more, e.g. eager programs evicted from their caches)
  debug = gc.get_debug()
  try:
    gc.set_debug(gc.DEBUG_SAVEALL)
    flat, unflat = _tu.flattener(treedef), _tu.unflattener(treedef)
    assert flat(tree) == [1, 2, 3, 4] and unflat([1, 2, 3, 4]) == tree
    del flat, unflat
    assert gc.collect() == 0, gc.garbage
  finally:
    gc.set_debug(debug)
    gc.garbage.clear()
