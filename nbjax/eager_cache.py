"""Trace caching for eager transformations (top-level ``vmap``, ``jvp``, ``jacfwd``).

Pipeline position: with no trace active, ``vmap(f)(*args)`` runs ``f`` under a
``BatchTrace`` on every call (``jvp`` under a ``JVPTrace``), paying Python dispatch per
primitive. When a call signature (treedef; shapes, dtypes and weak types of the arrays;
values of Python scalars; ``registry.epoch``) comes back a second time and ``f`` provably
traces the same way again, ``TraceCache`` stages the whole transformed call once to a jaxpr
(``partial_eval.trace_to_jaxpr_dynamic``, the same staging trace as ``jit``), compiles that
jaxpr into straight-line kernel calls (``registry.eager_program``) and replays it: a call
then costs a key lookup, the pin checks and the kernels themselves. One-off calls never
pay for staging.

The invariant ``guards(f)`` enforces: a replay happens only when every piece of state the
traced call can read is either immutable by construction or pinned, and every pin is
re-checked by identity on every call. ``guards`` returns the pins, or None (``f`` then
takes the per-call path for good). A pin is ``(container, key, object)``: the call replays
only while ``container``'s ``key`` is still ``object`` (``is``). The state and how each
piece is covered:

- Code: ``f.__code__`` is pinned; a code object is immutable, and its bytecode names
  every lookup it can make (``dis``). Code that stores or deletes globals, attributes or
  closed-over cells, imports, builds classes, or is a generator/coroutine is refused, and
  so is every dynamic or introspective route to state (``getattr``, ``vars``,
  ``globals``, ``eval``, ``attrgetter``, frames, any dunder attribute such as
  ``__dict__`` or ``__globals__``...), as are names with side effects or hidden state
  (``print``, ``open``, ``time``, ``config``, ``np.load``...); NumPy's and Python's random
  generators are methods of generator objects, or builtins of NumPy's random modules,
  which ``safe`` refuses (``nbjax.random`` is pure: keys are explicit).
- Globals: each name the code loads globally is pinned in ``f.__globals__`` (also when
  absent), and when absent there, in ``f.__builtins__`` (a global defined later shadows
  the builtin; a rebound builtin is seen too).
- Closure cells: each cell is pinned (``nonlocal`` rebinding from anywhere is seen);
  an empty cell refuses.
- Defaults: ``f.__defaults__`` (a tuple) is pinned; ``f.__kwdefaults__`` (a mutable dict)
  is pinned and so is its entry for each keyword-only parameter. (Absent defaults need no
  pin: a call that relied on one could not have been traced.)
- Module attributes (user or library modules: monkeypatching ``np.sin`` is seen): a module
  can flow anywhere (an argument, a return value), so in every module reached, every
  attribute name that any reached code reads is pinned, present or absent; a user module
  with a ``__getattr__`` refuses.
- Function and partial attributes: the ``__dict__`` of a function or partial that code
  can hold (a global, a cell, a default, ...) is pinned whole: replaced, grown or changed.
- ``functools.partial``: ``.func``, ``.args``, ``.keywords`` are pinned (``__setstate__``
  replaces them), and the keywords dict's entries and length (it is mutable in place).
- nbjax wrappers (``vmap``/``jacfwd``/``vectorize``/... functions, ``jit`` objects): the
  user callable a wrapper runs (its ``__wrapped__``, which an nbjax wrapper must set with
  ``functools.wraps``; ``jit``'s ``_fun``, pinned) must qualify in turn. The rest of a
  wrapper's state, the closure it calls that callable through included, is the library's
  and fixed at creation (``vectorize`` snapshots ``excluded``).
- Every value reached through a pin must itself qualify: ``None``, numbers, strings,
  bytes, ranges, ``nbjax.Array`` (immutable: built from copies), NumPy scalars and dtypes,
  tuples and frozensets of qualifying values, modules (their attributes pinned as above),
  plain functions (recursively, nesting up to ``_MAX_DEPTH``), partials, immutable types (builtins,
  NumPy's) and library classes, library functions, NumPy ufuncs and array functions found
  by name in NumPy, builtin functions of library modules, library enum members.
  Everything else cannot be pinned and refuses: lists, dicts, sets, NumPy arrays, objects
  (a mutable ``__dict__``), bound methods, callable instances, user classes (class
  attributes), unknown C callables, user ``Primitive``s.
- Arguments are the key: Arrays by shape/dtype/weak type, exact Python/NumPy scalars by
  value; their containers must be tuples, lists, dicts or ``None`` with immutable keys
  (``fixed_structure``): any other node type (namedtuples, dataclasses, registered
  classes, ``Partial``) carries a class with methods and attributes, and traces per call.
- The trusted base, not pinned: the library itself (nbjax, NumPy, ``math``, ``cmath``,
  ``operator``, ``functools``...; their internal state is either fixed or covered by
  ``registry.epoch``, which config and backend switches bump) and CPython.

A replay reads its arguments and builds its result with code generated per structure
(``_fast_path``, ``_finisher``: tuples, lists, dicts of Arrays), and a program replayed
``FUSE_AFTER`` times is rebuilt with its exact elementwise chains fused into numba loops.

JAX's semantics, and ours, are that ``vmap`` runs ``f`` on every call: the cache must
never be able to tell otherwise (``tests/test_eager_cache.py`` checks replays against
``config.update("eager_cache", False)`` over every channel above, property-based). A
signature is also traced per call when staging it fails, e.g. because ``f`` branches in
Python on an unmapped argument (concrete under ``vmap``, abstract when staged).
"""
from __future__ import annotations

import dis
import enum
import functools
import struct
import sys
import types
import warnings
import weakref

import numpy as np

from nbjax import core, dtypes, registry, xla, _tree_util as tree_util
from nbjax.array import Array, _wrap, own
from nbjax.config import config
from nbjax._tree_util import tree_flatten, tree_unflatten

MISS = object()
_SEEN, _UNCACHEABLE = object(), object()
_MAX_ENTRIES = 64

# ------------------------------------------------------------------ purity guards

_LIBRARY = ("nbjax", "numpy", "math", "cmath", "operator", "functools", "itertools",
            "builtins", "kernels", "numba", "collections", "typing", "dataclasses",
            "_operator", "_functools", "_collections")
_UNSAFE_NAMES = frozenset({
    # side effects, or state outside the program
    "print", "input", "open", "time", "perf_counter", "breakpoint", "id", "hash",
    "callback", "pure_callback", "io_callback", "debug", "debug_callback", "debug_print",
    "seed", "set_printoptions",
    "seterr", "config", "update", "load", "loadtxt", "genfromtxt", "fromfile", "fromregex",
    "memmap", "save", "savez", "savez_compressed", "savetxt", "tofile",
    # dynamic or introspective routes to state no pin covers
    "globals", "locals", "vars", "dir", "getattr", "hasattr", "setattr", "delattr", "exec",
    "eval", "compile", "__import__", "attrgetter", "methodcaller", "import_module",
    "modules", "cell_contents", "f_globals", "f_locals", "f_back", "f_builtins", "gi_frame",
    "cr_frame", "ag_frame", "tb_frame", "_getframe", "currentframe"})
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "LOAD_SUPER_ATTR"})
_DEREF_STORES = frozenset({"STORE_DEREF", "DELETE_DEREF"})
_REFUSED_OPS = frozenset({"IMPORT_STAR", "LOAD_BUILD_CLASS"})
_STATEFUL = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, async generator flags
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: builtin and NumPy types
_IMMUTABLE = frozenset({type(None), bool, int, float, complex, str, bytes, range,
                        type(Ellipsis), type(NotImplemented), Array})
_ARRAY_FUNCTION = type(np.dot)
# library instances the guard trusts like library functions, registered from above (a layer
# up, at import): ``(type, check(obj))``, e.g. nbjax.numpy's ufunc objects (``jnp.add``)
# when ``obj`` is the module attribute of its name
pure_instances: list = []
_MISSING = object()
_MAX_DEPTH = 12


def _library(name):
  """Whether module ``name`` is the trusted base: NumPy's random modules hold global
  generators (nbjax.random's keys are explicit)."""
  parts = name.split(".") if isinstance(name, str) else ()
  return bool(parts) and parts[0] in _LIBRARY and ("random" not in parts or parts[0] == "nbjax")


@functools.lru_cache(maxsize=4096)
def _scan(code):
  """``(global names, attribute names)`` that ``code`` and the code nested in it (lambdas,
  comprehensions, inner functions) load, or None when it writes shared state (globals,
  attributes, closed-over cells), imports, builds classes, is a generator or coroutine, or
  reaches state by a route no pin covers (``getattr``, ``__dict__``, frames...)."""
  if code.co_flags & _STATEFUL:
    return None
  glob, attr, cells, todo = set(), set(), set(), [code]
  while todo:
    c = todo.pop()
    todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    for ins in dis.get_instructions(c):
      op = ins.opname
      if op in _GLOBAL_OPS:
        glob.add(ins.argval)
      elif op in _ATTR_OPS:
        attr.add(ins.argval)
      elif op in _DEREF_STORES:
        cells.add(ins.argval)
      elif ins.opcode in dis.hasname or op in _REFUSED_OPS:  # stores, deletes, imports
        return None
  if ((glob | attr) & _UNSAFE_NAMES or cells & set(code.co_freevars)
      or any(n[:2] == "__" == n[-2:] for n in attr)):
    return None
  return frozenset(glob), frozenset(attr)


def guards(fun):
  """The pins ``(kind, container, key, object)`` under which a staged call of ``fun``
  stays valid, or None when ``fun`` can read something no pin covers (the invariant in
  the module docstring). Kinds: ``"item"`` (``container[key] is object``; ``_MISSING``:
  absent), ``"attr"`` (``getattr(container, key) is object``), ``"cell"``
  (``container.cell_contents is object``), ``"len"`` (``len(container) == object``),
  ``"empty"`` (``getattr(container, key)`` is empty)."""
  from nbjax.custom_derivatives import custom_jvp, custom_vjp
  from nbjax.interpreters.pjit import JitWrapped
  from nbjax._tree_util import Partial
  pins, seen, names, modules = {}, set(), set(), {}

  def pin(kind, box, key, obj):
    pins[kind, id(box), key] = (kind, box, key, obj)

  def own_dict(o, depth, skip=lambda k: False):
    """A function's, partial's or custom rule's ``__dict__`` (replaceable, mutable): pinned
    whole where code can hold the object (not the transformed function itself, unless it
    reaches itself; not what a partial or wrapper only calls); values whose key ``skip``
    names are pinned but not followed."""
    if ("dict", id(o)) in seen:
      return True
    seen.add(("dict", id(o)))
    d = o.__dict__
    if type(d) is not dict:
      return False
    if not d:
      pin("empty", o, "__dict__", None)
      return True
    pin("attr", o, "__dict__", d)
    pin("len", d, None, len(d))
    for k, v in d.items():
      pin("item", d, k, v)
    return all(safe(v, depth + 1) for k, v in d.items() if not skip(k))

  def function(f, depth, held):
    if held and not own_dict(f, depth):
      return False
    if id(f) in seen:
      return True
    seen.add(id(f))
    code = f.__code__
    pin("attr", f, "__code__", code)
    scan = _scan(code)
    if scan is None:
      return False
    glob, attr = scan
    names.update(attr)
    g, b = f.__globals__, f.__builtins__
    b = b.__dict__ if isinstance(b, types.ModuleType) else b
    if type(g) is not dict or type(b) is not dict:  # (a subclass can compute its lookups)
      return False
    for n in glob:
      v = g.get(n, _MISSING)
      pin("item", g, n, v)
      if v is _MISSING:  # a builtin, or a NameError: either changes if the global appears
        v = b.get(n, _MISSING)
        pin("item", b, n, v)
      if v is not _MISSING and not safe(v, depth + 1):
        return False
    for c in f.__closure__ or ():
      try:
        v = c.cell_contents
      except ValueError:
        return False
      pin("cell", c, None, v)
      if not safe(v, depth + 1):
        return False
    if f.__defaults__ is not None:
      pin("attr", f, "__defaults__", f.__defaults__)
      if not safe(f.__defaults__, depth + 1):
        return False
    kd = f.__kwdefaults__
    if kd is not None:
      if type(kd) is not dict:
        return False
      pin("attr", f, "__kwdefaults__", kd)
      i = code.co_argcount
      for n in code.co_varnames[i:i + code.co_kwonlyargcount]:
        v = kd.get(n, _MISSING)
        pin("item", kd, n, v)
        if v is not _MISSING and not safe(v, depth + 1):
          return False
    return True

  def attributes():
    """Pin, in every module reached, every attribute name any reached code reads (a module
    can flow anywhere: an argument, a return value), present or absent; to a fixpoint, as
    the values found reach more code and modules."""
    done = set()
    while True:
      todo = [(m, n) for m in list(modules.values()) for n in list(names)
              if (id(m), n) not in done]
      if not todo:
        return True
      for m, n in todo:
        done.add((id(m), n))
        d = m.__dict__
        v = d.get(n, _MISSING)
        pin("item", d, n, v)
        if v is _MISSING:
          if "__getattr__" in d and not _library(m.__name__):
            return False  # a user module serving attributes dynamically
        elif not safe(v, 1):
          return False

  def safe(o, depth, held=True):
    t = type(o)
    if t in _IMMUTABLE or isinstance(o, (np.generic, np.dtype)) and _library(t.__module__):
      return True
    if depth > _MAX_DEPTH:
      return False
    if t is tuple or t is frozenset:
      return all(safe(x, depth + 1) for x in o)
    if t is slice:
      return safe((o.start, o.stop, o.step), depth + 1)
    if isinstance(o, types.ModuleType):  # (a user subclass can compute its attributes)
      modules[id(o)] = o
      return t is types.ModuleType or _library(o.__name__)
    if t is types.FunctionType:
      if not _library(o.__globals__.get("__name__")):
        return function(o, depth, held)
      # a library function is trusted; an nbjax wrapper (vmap, jacfwd, vectorize...) says
      # which user callable it runs with functools.wraps, and that callable must qualify
      w = o.__dict__.get("__wrapped__", _MISSING)
      return o.__name__ not in _UNSAFE_NAMES and (w is _MISSING or safe(w, depth + 1, False))
    if t is functools.partial or t is Partial:
      kw = o.keywords
      if type(kw) is not dict or held and not own_dict(o, depth):
        return False
      for a in ("func", "args", "keywords"):  # __setstate__ replaces them
        pin("attr", o, a, getattr(o, a))
      pin("len", kw, None, len(kw))  # the keywords dict is mutable in place
      for k, v in kw.items():
        pin("item", kw, k, v)
      return (safe(o.func, depth + 1, False) and safe(o.args, depth + 1)
              and all(safe(v, depth + 1) for v in kw.values()))
    if t is custom_jvp or t is custom_vjp:  # (``jax.nn.relu``, user rules): a rule changes
      # by defjvp/defvjp, which bump registry.epoch, or by assigning an attribute: all pinned
      # (``_resolve``: the signature cache made from ``fun``; dunders: no code reads them)
      if not own_dict(o, depth, lambda k: k == "_resolve" or k[:2] == "__" == k[-2:]):
        return False
      for v in o.__dict__.values():  # (``defjvps``' library rule calls the user's rules)
        if type(v) is types.FunctionType and _library(v.__globals__.get("__name__")):
          for c in v.__closure__ or ():
            try:
              w = c.cell_contents
            except ValueError:
              return False
            pin("cell", c, None, w)
            if w is not o and not safe(w, depth + 1):
              return False
      return True
    if t is JitWrapped:  # traced once per signature anyway; pin the function it holds
      pin("item", o.__dict__, "_fun", o._fun)
      return safe(o._fun, depth + 1, False)
    if isinstance(o, enum.Enum):
      return _library(t.__module__)
    if t is types.BuiltinFunctionType:
      s = o.__self__
      return o.__name__ not in _UNSAFE_NAMES and (
          s is None or isinstance(s, types.ModuleType) and _library(s.__name__))
    if t is np.ufunc:
      return getattr(np, o.__name__, None) is o
    for cls, check in pure_instances:
      if issubclass(t, cls):  # (type-level: no user code runs)
        return check(o)
    if t is _ARRAY_FUNCTION:
      return (_library(o.__module__) and o.__name__ not in _UNSAFE_NAMES
              and getattr(sys.modules.get(o.__module__), o.__name__, None) is o)
    if isinstance(o, type):  # a user class is mutable (class attributes, methods); other
      # modules' C types can read state (``datetime.now``): builtins' and the library's only
      return o.__module__ == "builtins" or _library(o.__module__)
    return False  # objects, bound methods, unknown C callables...

  return list(pins.values()) if safe(fun, 0, False) and attributes() else None


def _checker(pins):
  """``holds()``: whether every pin still holds, one generated expression of identity
  checks; None when there is nothing to check."""
  if not pins:
    return None
  ns, terms = {}, []
  for i, (kind, box, key, obj) in enumerate(pins):
    ns[f"b{i}"], ns[f"k{i}"], ns[f"o{i}"] = box, key, obj
    if kind == "item":
      terms.append(f"k{i} not in b{i}" if obj is _MISSING else f"b{i}[k{i}] is o{i}")
    elif kind == "attr":
      terms.append(f"b{i}.{key} is o{i}")
    elif kind == "cell":
      terms.append(f"b{i}.cell_contents is o{i}")
    elif kind == "empty":
      terms.append(f"not b{i}.{key}")
    else:
      terms.append(f"len(b{i}) == o{i}")
  src = (f"def holds():\n  try:\n    return {' and '.join(terms)}\n"
         "  except Exception:\n    return False\n")
  exec(src, ns)  # (an emptied cell raises: the pin does not hold)
  return ns["holds"]


_FIXED_NODES = frozenset({"tuple", "list", "dict", "odict", "none"})
_KEY_TYPES = frozenset({str, int, bool, float, complex, bytes, type(None)})


def fixed_structure(treedef):
  """Whether an argument structure is built of tuples, lists, dicts and OrderedDicts with
  immutable keys, and ``None``: any other node type is a class (a namedtuple, dataclass,
  registered class, ``Partial``) whose methods and attributes a trace can read."""
  node = treedef.node
  if node is None:
    return True
  if node.kind not in _FIXED_NODES or node.kind in ("dict", "odict") and not all(
      type(k) in _KEY_TYPES for k in treedef.data):
    return False
  return all(fixed_structure(k) for k in treedef.kids)


# ------------------------------------------------------------------ the cache

_ARRAY_LEAVES = frozenset({Array, np.ndarray})
# exact types: a subclass (an IntEnum...) is a class whose methods a trace can read
_STATIC_LEAVES = frozenset({bool, int, float, complex, *(
    t for t in np.sctypeDict.values() if issubclass(t, (np.number, np.bool_)))})


def _c_buffer(v):
  return v if v.flags.c_contiguous else np.array(v, order="C")  # (ascontiguousarray makes 0-d 1-d)


def _shallow(args):
  """``(leaves, key)`` for positional Arrays, or tuples/lists of them (``jvp``'s primals and
  tangents), without a pytree flatten: the key is the arity, or the containers' types and
  lengths; ``(None, None)`` for anything else."""
  if all(type(a) is Array for a in args):
    return args, len(args)
  leaves, key = [], []
  for a in args:
    t = type(a)
    if t is Array or t is np.ndarray:
      leaves.append(a)
      key.append(None)
    elif (t is tuple or t is list) and all(type(x) is Array for x in a):
      leaves += a
      key.append((t, len(a)))
    else:
      return None, None
  return leaves, tuple(key)


class _Entry:
  __slots__ = ("program", "dyn", "out_tree", "weaks", "holds", "finish", "weak0")


def _fast_path(key_tree, args_def, entries):
  """``fast(*args)``: the replay of positional arguments of structure ``args_def`` (tuples,
  lists, dicts and ``None`` around nbjax Arrays) as straight-line code, or None for other
  structures: a call checks each container's type and length and each leaf's type, reads the
  signature key (the same key ``call`` builds, ``key_tree`` first), then the pins, and runs
  the program; ``MISS`` on any mismatch (``call`` then decides)."""
  ns = dict(Array=Array, MISS=MISS, get=entries.get, registry=registry, _Entry=_Entry,
            T=key_tree, W=_wrap)
  got = tree_util.flatten_source(args_def, "args", ns, "return MISS") \
      if args_def.node is not None and args_def.node.kind == "tuple" else None
  if got is None:
    return None
  lines, leaves = got
  for i, expr in enumerate(leaves):
    lines.append(f"  x{i} = {expr}")
  m = len(leaves)
  xs = [f"x{i}" for i in range(m)]
  key = "".join(f"v{i}.shape, v{i}.dtype, x{i}._weak, " for i in range(m))
  src = "\n".join([
      "def fast(*args):", *lines,
      f"  if {' or '.join(f'type({x}) is not Array' for x in xs) or 'False'}:",
      "    return MISS",
      f"  {''.join(f'v{i} = x{i}._value; ' for i in range(m))}pass",
      f"  e = get((T, {key}registry.epoch))",
      "  if type(e) is not _Entry:",
      "    return MISS",
      "  h = e.holds",
      "  if h is not None and not h():",
      "    return MISS",
      f"  o = e.program({''.join(f'v{i}, ' for i in range(m))})",
      "  w = e.weak0",  # (one Array out: no call to build the structure)
      "  return e.finish(o) if w is None else W(o[0], w)"])
  exec(src, ns)
  return ns["fast"]


def _finisher(out_tree, weaks):
  """``finish(outs)``: the program's output buffers wrapped as Arrays in the structure
  ``out_tree``, built by one generated expression (tuples, lists, dicts, ``None``), else by
  ``tree_unflatten``."""
  ns = dict(W=_wrap)
  body = tree_util.build_source(out_tree, lambda i: f"W(o[{i}], {bool(weaks[i])})", ns)
  if body is None:
    return lambda outs: tree_unflatten(out_tree, [_wrap(o, w) for o, w in zip(outs, weaks)])
  exec(f"def finish(o):\n  return {body}\n", ns)
  return ns["finish"]


class TraceCache:
  """Replays ``fun`` (a transformed function, e.g. the body of ``vmap(f)``) from a staged
  program once a signature repeats, while the pins of ``guards(guard_fun)`` hold. ``call`` returns
  ``MISS`` when the caller must run ``fun`` itself. ``guard_fun=None``: ``fun`` is the
  library's own (trusted: it reads no user state), replayed without pins."""

  def __init__(self, fun, guard_fun):
    self.fun, self.guard_fun = fun, guard_fun
    self.entries: dict = {}
    self.enabled = True
    self.fuse = True  # (hot programs rebuilt with fused loops: ``FUSE_AFTER``)
    self.build_on = 2  # the call of a signature that builds its program (earlier: per call)
    self.fast: dict = {}  # arity -> generated replay of one structure of positional Arrays

  def replay(self, args, kwargs):
    """A top-level call's result replayed (positional Arrays take the generated fast path),
    or ``MISS``. Never in a run spanning processes (an array's host value may not exist),
    nor with an argument committed to a device (outputs follow it per call)."""
    if xla._dist is not None:
      return MISS
    fast = self.fast.get(len(args)) if not kwargs and not core.placement[0] else None
    if fast is not None:
      out = fast(*args)
      if out is not MISS:
        return out
    return self.call(args, kwargs)

  def call(self, args, kwargs):
    if not config._flags["eager_cache"]:
      return MISS  # (switching it bumps registry.epoch: no stale entry can be found either)
    sig = []
    leaves, tree = _shallow(args) if not kwargs else (None, None)
    if leaves is None:
      leaves, tree = tree_flatten((args, kwargs))
    if core.placement[0] and any(type(x) is Array and core.placed_device(x)[0] for x in leaves):
      return MISS  # (outputs follow committed inputs per call: programs carry no placement)
    for x in leaves:
      t = type(x)
      if t is Array:
        v = x._value
        sig += (v.shape, v.dtype, x._weak)
      elif t is np.ndarray:
        sig += (x.shape, x.dtype, None)
      elif t in _STATIC_LEAVES:
        sig += (t, repr(x), None)  # repr: 0.0 and -0.0 differ, nan matches itself
      else:
        return MISS
    key = (tree, *sig, registry.epoch)
    e = self.entries.get(key)
    if type(e) is _Entry:
      if e.holds is not None and not e.holds():
        self.entries.clear()
        return MISS
      vals, foreign = [], []
      for i in e.dyn:
        x = leaves[i]
        if type(x) is Array:
          vals.append(x._value)
        else:
          vals.append(_c_buffer(registry.coerce(x)[0]))
          foreign.append(vals[-1])
      outs = e.program(*vals)
      if foreign:  # a caller's NumPy input: no output may be it or a view of it
        outs = [own(o, foreign) for o in outs]
      return e.finish(outs)
    if e is None:
      if len(self.entries) >= _MAX_ENTRIES:
        self.entries.clear()
      self.entries[key] = _SEEN if self.build_on <= 2 else 1
      return MISS
    if type(e) is int:  # (sightings so far, below ``build_on - 1``)
      if e + 1 < self.build_on:
        self.entries[key] = e + 1
        return MISS
      e = _SEEN
    if e is _SEEN:  # (stored under this call's key: the fast path's ``tree`` is its own)
      del self.entries[key]
      self.entries[key] = e = self._build(args, kwargs, leaves, tree) or _UNCACHEABLE
      if e is not _UNCACHEABLE and not kwargs and all(type(x) is Array for x in leaves):
        args_def = tree_flatten(args)[1] if type(tree) in (int, tuple) else tree.kids[0]
        fast = _fast_path(tree, args_def, self.entries)
        if fast is not None:
          self.fast[len(args)] = fast
    return MISS if self.entries[key] is _UNCACHEABLE else self.call(args, kwargs)

  def _build(self, args, kwargs, leaves, tree):
    from nbjax.interpreters import partial_eval as pe
    pins = [] if self.guard_fun is None else guards(self.guard_fun)
    if pins is None:
      self.enabled = False
      return None
    if type(tree) in (int, tuple):  # (positional Arrays, or tuples/lists of them)
      treedef = tree_flatten((args, kwargs))[1]
    elif fixed_structure(tree):
      treedef = tree
    else:
      return None
    dyn = [i for i, x in enumerate(leaves) if type(x) in _ARRAY_LEAVES]
    statics = list(leaves)
    box = []

    def flat(*xs):
      full = list(statics)
      for i, x in zip(dyn, xs):
        full[i] = x
      args, kwargs = tree_unflatten(treedef, full)
      out, out_tree = tree_flatten(self.fun(*args, **kwargs))
      box.append(out_tree)
      box.append(any(not isinstance(o, core.Tracer) for o in out))
      return out

    try:
      avals = [core.get_aval(leaves[i]) for i in dyn]
      jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat, avals)
      jaxpr, _ = pe.dce_jaxpr(jaxpr, True, instantiate=True)
      jaxpr = pe.inline_calls(jaxpr)
      if _places(jaxpr):
        return None  # (placements and maps over devices: the per-call path's)
      program = registry.eager_program(jaxpr, consts)
    except Exception:  # noqa: BLE001  (the per-call path raises it, or handles it)
      return None
    if box[1] or any(a.dtype == dtypes.float0 for a in out_avals):
      return None  # values passed through untraced (vmap's out_axes=None, a NumPy aux) and
      # float0 results (NumPy arrays) are the per-call path's; a replay would return Arrays
    e = _Entry()
    e.program, e.dyn, e.out_tree = (_warming(e, program, jaxpr, consts) if self.fuse else
                                    program), dyn, box[0]
    e.weaks = [a.weak_type for a in out_avals]
    e.finish = _finisher(e.out_tree, e.weaks)
    e.weak0 = e.weaks[0] if e.out_tree.node is None else None
    e.holds = _checker(pins)
    return e


def _places(jaxpr):
  """Whether ``jaxpr`` (or a jaxpr inside it) places values on devices or maps over them."""
  from nbjax.jaxpr import subjaxprs
  for e in jaxpr.eqns:
    n = e.primitive.name
    if n in ("shard_map", "xla_pmap", "sharding_constraint") or n == "device_put" and any(
        d is not None for d in e.params["devices"]):
      return True
  return any(_places(getattr(j, "jaxpr", j)) for j in subjaxprs(jaxpr))


FUSE_AFTER = 16
"""Replays after which a program is rebuilt with its chains of exact elementwise equations
fused into numba loops (``registry.eager_program(fuse=True)``): only hot programs pay for
the compile (numba's disk cache then serves it to later processes)."""


def _warming(e, program, jaxpr, consts):
  """``program``, counting its calls: the ``FUSE_AFTER``-th installs the fused program as
  ``e.program`` (or ``program`` itself when nothing fuses), which later calls run directly."""
  left = [FUSE_AFTER]

  def warming(*xs):
    left[0] -= 1
    if left[0] == 0:
      try:
        fused = registry.eager_program(jaxpr, consts, fuse=True)
      except Exception:  # noqa: BLE001  (the program built once already: keep it)
        fused = program
      e.program = fused if fused.fused else program
    return program(*xs)
  warming.source = program.source
  return warming


def _static_key(v):
  """A static argument's part of a ``staged`` call's key: its type and value (floats by
  bits); TypeError for an array or a value that
  cannot be hashed (the call then runs per call). Floats and NumPy scalars by their bits:
  0.0 and -0.0 differ, a NaN matches itself."""
  t = type(v)
  if t is float or t is complex:
    return t, struct.pack("<2d", v.real, v.imag)  # (bits: -0.0, NaN signs and payloads differ)
  if isinstance(v, np.generic):
    return t, v.tobytes()
  if t is Array or t is np.ndarray or isinstance(v, core.Tracer):
    raise TypeError("an array as a static argument")
  if t is tuple:
    return t, tuple(_static_key(x) for x in v)
  hash(v)
  return t, v


STAGED_MAX = 1 << 18
"""Operand elements from which ``staged`` composites run per call: there a primitive's
dispatch is small against its work, and chains of elementwise primitives fuse per call
(``nbjax.fusion``, on two threads)."""


staged_check = None  # tests/conftest.py's check of every ``staged`` replay (NBJAX_REPLAY_CHECK)


STAGED_BUILD_ON = 4
"""The call of a ``staged`` signature that builds its program (~1-1.5 ms: the trace and the
program's source): shapes met two or three times (the last, short batch of an epoch;
sequences of varying lengths) keep the per-call path, whose first call at a new shape costs
~0.2-0.9 ms and later ones ~10-100 us at 10 elements."""


def staged(fun):
  """``fun``, a composite of the library's own (``jnp.var``, ``nn.softmax``...): a function
  of leading positional Arrays and static Python values (axes, flags, dtypes, Python
  scalars) whose primitives depend on nothing else. Eagerly, a call signature (static values,
  the Arrays' shapes, dtypes and weak types) that repeats replays one staged program of it
  (``TraceCache`` without pins: the library's code reads no user state) instead of its
  primitives' dispatch one by one, as ``nbjax.random``'s samplers do (unfused: a fused loop
  may differ in a NaN's sign bit); the first ``STAGED_BUILD_ON - 1`` calls of a signature, signatures that warn,
  calls with other arguments (NumPy arrays, lists, Array keywords) or from
  ``STAGED_MAX`` elements, under a transformation or the transfer guard run ``fun`` itself."""
  caches = {}

  @functools.wraps(fun)
  def staged_fun(*args, **kwargs):
    if core._ctx.trace is not core.eval_trace or core.h2d_guard is not None:
      return fun(*args, **kwargs)
    n = size = 0
    for a in args:
      if type(a) is not Array:
        break
      n += 1
      size += a._value.size
    if not n or size >= STAGED_MAX:
      return fun(*args, **kwargs)
    try:
      sk = (n, *(_static_key(a) for a in args[n:]),
            *((k, _static_key(v)) for k, v in kwargs.items()))
      cache = caches.get(sk)
    except TypeError:
      return fun(*args, **kwargs)
    if cache is None:
      if len(caches) >= 256:
        caches.clear()
      rest = args[n:]
      cache = caches[sk] = TraceCache(lambda *xs: fun(*xs, *rest, **kwargs), None)
      cache.fuse = False  # (a fused loop may give another NaN's sign than the per-call bits)
      cache.build_on = STAGED_BUILD_ON
    elif cache is _PER_CALL:
      return fun(*args, **kwargs)
    out = cache.replay(args[:n], {})
    if out is not MISS:
      if staged_check is not None:  # (tests: NBJAX_REPLAY_CHECK compares the per-call run)
        staged_check(fun, args, kwargs, out)
      return out
    caught = []
    try:  # a signature whose call warns runs per call for good: a replay would not warn
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fun(*args, **kwargs)
    finally:
      if caught:
        caches[sk] = _PER_CALL
        for m in caught:
          warnings.warn_explicit(m.message, m.category, m.filename, m.lineno)
    return out
  return staged_fun


_PER_CALL = object()


_by_fun = weakref.WeakKeyDictionary()


def for_function(fun, kind, make):
  """The ``TraceCache`` of transformation ``kind`` of ``fun`` (``make()`` builds it), kept
  as long as ``fun`` lives; None when ``fun`` cannot be weakly referenced."""
  try:
    caches = _by_fun.get(fun)
    if caches is None:
      caches = _by_fun[fun] = {}
  except TypeError:
    return None
  c = caches.get(kind)
  if c is None:
    c = caches[kind] = make()
  return c
