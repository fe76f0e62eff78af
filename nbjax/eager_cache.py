"""Trace caching for eager transformations (top-level ``vmap``, ``jvp``, ``jacfwd``).

Pipeline position: with no trace active, ``vmap(f)(*args)`` runs ``f`` under a
``BatchTrace`` on every call (``jvp`` under a ``JVPTrace``), paying Python dispatch per
primitive. When a call signature (treedef; shapes, dtypes and weak types of the arrays;
values of Python scalars; ``registry.epoch``) comes back a second time and ``f`` provably
traces the same way again, ``TraceCache`` stages the whole transformed call once to a jaxpr
(``partial_eval.trace_to_jaxpr_dynamic``, the same staging trace as ``jit``), compiles that
jaxpr into straight-line kernel calls (``registry.eager_program``) and replays it: a call
then costs a key lookup, the guard checks and the kernels themselves. One-off calls never
pay for staging.

"Provably" is decided conservatively by ``guards(f)``. ``f`` qualifies when everything it can
reach besides its arguments is immutable or pinned by an identity guard:
- the globals and closure cells it (and the plain Python functions it reaches) reads hold
  numbers, strings, ``nbjax.Array``s, dtypes, tuples of those, nbjax/numpy/math modules
  and functions, or further qualifying functions; each such binding is re-checked by
  identity on every call, so rebinding a global or a closed-over variable retraces;
- it names nothing with side effects or hidden state (``print``, ``random``, ``open``...).
Anything else (a list, dict or NumPy array global, an object, a method, a callable class,
a user ``Primitive``) keeps the per-call trace: JAX's semantics, and ours, are that ``vmap``
runs ``f`` on every call, and the cache must never be able to tell otherwise. A signature
is also traced per call when staging it fails, e.g. because ``f`` branches in Python on an
unmapped argument (concrete under ``vmap``, abstract when staged).
"""
from __future__ import annotations

import builtins
import functools
import types
import weakref

import numpy as np

from nbjax import core, registry
from nbjax.array import Array, _wrap
from nbjax.config import config
from nbjax.tree_util import tree_flatten, tree_structure, tree_unflatten

MISS = object()
_SEEN, _UNCACHEABLE = object(), object()
_MAX_ENTRIES = 64

# ------------------------------------------------------------------ purity guards

_SAFE_MODULES = ("nbjax", "numpy", "math", "cmath", "operator", "functools", "itertools",
                 "builtins", "kernels", "numba", "collections", "typing", "dataclasses")
_UNSAFE_NAMES = frozenset({
    "print", "input", "open", "random", "time", "perf_counter", "globals", "locals", "vars",
    "exec", "eval", "compile", "setattr", "delattr", "__import__", "breakpoint", "id",
    "hash", "callback", "pure_callback", "io_callback", "debug", "seed", "set_printoptions",
    "seterr", "config", "update"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), slice, range,
            np.generic, np.dtype, Array)
_MISSING = object()


def _module_safe(name):
  parts = name.split(".") if name else ()
  return bool(parts) and parts[0] in _SAFE_MODULES and "random" not in parts


def _is_fun(f):
  return isinstance(f, (types.FunctionType, functools.partial)) or (
      hasattr(f, "__wrapped__") and _module_safe(type(f).__module__))


def _cell(c):
  try:
    return c.cell_contents
  except ValueError:  # an empty cell
    return None


def guards(fun):
  """``(global_guards, cell_guards)`` pinning every binding ``fun`` can read, or None when
  ``fun`` may not trace the same way twice (see the module docstring)."""
  gg, cg, seen = [], [], set()

  def safe(obj, depth):
    if isinstance(obj, _SCALARS):
      return True
    if isinstance(obj, (tuple, frozenset)):
      return depth < 4 and all(safe(o, depth + 1) for o in obj)
    if isinstance(obj, types.ModuleType):
      return _module_safe(obj.__name__)
    if isinstance(obj, type):
      return _module_safe(obj.__module__)
    if isinstance(obj, (types.BuiltinFunctionType, np.ufunc)):
      owner = getattr(obj, "__self__", None)
      return (owner is None or (isinstance(owner, types.ModuleType) and
                                _module_safe(owner.__name__))) and obj.__name__ not in _UNSAFE_NAMES
    if isinstance(obj, functools.partial):
      return safe(obj.func, depth) and safe(obj.args, depth) and \
          safe(tuple(obj.keywords.values()), depth)
    if isinstance(obj, types.FunctionType):
      if not _module_safe(obj.__globals__.get("__name__")):
        return walk(obj, depth)
      if id(obj) in seen:
        return True
      seen.add(id(obj))
      # nbjax's own wrappers (vmap_f, grad_f) hold the user's function: check that one
      inner = [getattr(obj, "__wrapped__", None)] + [_cell(c) for c in obj.__closure__ or ()]
      return depth < 8 and all(safe(f, depth + 1) for f in inner if _is_fun(f))
    if _module_safe(type(obj).__module__) and hasattr(obj, "__wrapped__"):
      # an nbjax object carrying user functions (jit(f): traced once per signature anyway)
      return all(safe(f, depth + 1) for f in (obj.__wrapped__, *vars(obj).values()) if _is_fun(f))
    return False

  def names(code):
    out = set(code.co_names)
    for c in code.co_consts:
      if isinstance(c, types.CodeType):
        out |= names(c)
    return out

  def walk(f, depth):
    if id(f) in seen:
      return True
    seen.add(id(f))
    if depth > 8 or not isinstance(f, types.FunctionType):
      return False
    code = f.__code__
    used = names(code)
    if used & _UNSAFE_NAMES or code.co_flags & 0x20:  # generator functions: stateful
      return False
    g = f.__globals__
    b = g.get("__builtins__", builtins)
    b = b.__dict__ if isinstance(b, types.ModuleType) else b
    for n in used:
      if n in g:
        obj = g[n]
        if not safe(obj, depth + 1):
          return False
        gg.append((g, n, obj))
      elif n in b:
        gg.append((g, n, _MISSING))  # a global defined later would shadow the builtin
        if not safe(b[n], depth + 1):
          return False
    for c in f.__closure__ or ():
      try:
        obj = c.cell_contents
      except ValueError:
        return False
      if not safe(obj, depth + 1):
        return False
      cg.append((c, obj))
    return all(safe(d, depth + 1) for d in (f.__defaults__ or ()) + tuple(
        (f.__kwdefaults__ or {}).values()))

  return (gg, cg) if safe(fun, 0) else None


def _guards_hold(gg, cg):
  for d, k, o in gg:
    if d.get(k, _MISSING) is not o:
      return False
  for c, o in cg:
    if c.cell_contents is not o:
      return False
  return True


# ------------------------------------------------------------------ the cache

_ARRAY_LEAVES = frozenset({Array, np.ndarray})
_STATIC_LEAVES = (bool, int, float, complex, np.generic)


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
  __slots__ = ("program", "dyn", "out_tree", "single", "weaks", "weak0", "copy", "gg", "cg")


def _fast_path(n, entries):
  a = [f"a{i}" for i in range(n)]
  key = "".join(f"v{i}.shape, v{i}.dtype, a{i}._weak, " for i in range(n))
  src = f"""def fast({', '.join(a)}):
  if {' or '.join(f'type({x}) is not Array' for x in a) or 'False'}:
    return MISS
  {''.join(f'v{i} = a{i}._value; ' for i in range(n))}
  e = get(({n}, {key}registry.epoch))
  if type(e) is not _Entry:
    return MISS
  if e.gg:
    for d, k, o in e.gg:
      if d.get(k, _MISSING) is not o:
        return MISS
  if e.cg:
    for c, o in e.cg:
      if c.cell_contents is not o:
        return MISS
  outs = e.program({''.join(f'v{i}, ' for i in range(n))})
  if e.single:
    return _wrap(outs[0], e.weak0)
  return TraceCache._finish(e, outs)
"""
  ns = dict(Array=Array, MISS=MISS, get=entries.get, registry=registry, _Entry=_Entry,
            _MISSING=_MISSING, _wrap=_wrap, TraceCache=TraceCache)
  exec(src, ns)
  return ns["fast"]


class TraceCache:
  """Replays ``fun`` (a transformed function, e.g. the body of ``vmap(f)``) from a staged
  program once a signature repeats and ``guards(guard_fun)`` holds. ``call`` returns
  ``MISS`` when the caller must run ``fun`` itself."""

  def __init__(self, fun, guard_fun):
    self.fun, self.guard_fun = fun, guard_fun
    self.entries: dict = {}
    self.enabled = True
    self.fast: dict = {}  # arity -> replay of positional nbjax Arrays (MISS if not cached)

  def call(self, args, kwargs):
    if not config._flags["eager_cache"]:
      return MISS  # (switching it bumps registry.epoch: no stale entry can be found either)
    sig = []
    leaves, tree = _shallow(args) if not kwargs else (None, None)
    if leaves is None:
      leaves, tree = tree_flatten((args, kwargs))
    for x in leaves:
      t = type(x)
      if t is Array:
        v = x._value
        sig += (v.shape, v.dtype, x._weak)
      elif t is np.ndarray:
        sig += (x.shape, x.dtype, None)
      elif isinstance(x, _STATIC_LEAVES):
        sig += (t, repr(x), None)  # repr: 0.0 and -0.0 differ, nan matches itself
      else:
        return MISS
    key = (tree, *sig, registry.epoch)
    e = self.entries.get(key)
    if type(e) is _Entry:
      if not _guards_hold(e.gg, e.cg):
        self.entries.clear()
        return MISS
      vals = []
      for i in e.dyn:
        x = leaves[i]
        vals.append(x._value if type(x) is Array else _c_buffer(registry.coerce(x)[0]))
      return self._finish(e, e.program(*vals))
    if e is None:
      if len(self.entries) >= _MAX_ENTRIES:
        self.entries.clear()
      self.entries[key] = _SEEN
      return MISS
    if e is _SEEN:
      self.entries[key] = e = self._build(args, kwargs, leaves, tree) or _UNCACHEABLE
      if e is not _UNCACHEABLE and type(tree) is int and tree not in self.fast:
        self.fast[tree] = _fast_path(tree, self.entries)
    return MISS if self.entries[key] is _UNCACHEABLE else self.call(args, kwargs)

  @staticmethod
  def _finish(e, outs):
    if e.copy:  # an output that is an input: never share a caller's NumPy buffer
      outs = [o.copy() if i in e.copy else o for i, o in enumerate(outs)]
    return tree_unflatten(e.out_tree, [_wrap(o, w) for o, w in zip(outs, e.weaks)])

  def _build(self, args, kwargs, leaves, tree):
    from nbjax.interpreters import partial_eval as pe
    g = guards(self.guard_fun)
    if g is None:
      self.enabled = False
      return None
    treedef = tree_flatten((args, kwargs))[1] if type(tree) in (int, tuple) else tree
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
      return out

    try:
      avals = [core.get_aval(leaves[i]) for i in dyn]
      jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat, avals)
      jaxpr, _ = pe.dce_jaxpr(jaxpr, True, instantiate=True)
      jaxpr = pe.inline_calls(jaxpr)
      program = registry.eager_program(jaxpr, consts)
    except Exception:  # noqa: BLE001  (the per-call path raises it, or handles it)
      return None
    e = _Entry()
    e.program, e.dyn, e.out_tree = program, dyn, box[0]
    e.weaks = [a.weak_type for a in out_avals]
    e.weak0 = e.weaks[0] if e.weaks else False
    ins = set(jaxpr.invars)
    e.copy = frozenset(i for i, v in enumerate(jaxpr.outvars) if v in ins)
    e.single = e.out_tree == tree_structure(0)
    e.gg, e.cg = g
    return e


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
