"""Mutable array references: ``nbjax.new_ref``/``empty_ref``/``free_ref``/``freeze``, the
``Ref`` type and JAX's state primitives, each with all of its rules.

Pipeline position: above ``nbjax.numpy`` (a ref is read and written with NumPy-style
indexers, applied by the same indexing and ``.at[]`` functions arrays use). ``core`` holds
the types (``Ref``: an eager reference owning an immutable ``Array`` that a write replaces;
``AbstractRef``: its aval). Here: the primitives ``new_ref`` (``mutable_array_p``),
``empty_ref``, ``free_ref``, ``freeze``, ``get``, ``swap`` and ``addupdate`` with their eager,
abstract-eval, JVP and batching rules, and *state discharge*: a jaxpr that reads and writes
refs becomes one threading their values, the refs it takes coming back as extra outputs
(``discharge_state``). jit runs the discharged program and writes those values back into
the refs it was given; lowering discharges refs created inside; ``scan``/``while``/``cond``
and nested ``jit`` discharge by their rules here (``discharge_rules``). What has no rule
raises ``NotImplementedError`` naming the rule and the primitive.
"""
from __future__ import annotations

import re
import weakref

import numpy as np

from nbjax import core
from nbjax.array import Array
from nbjax.core import AbstractRef, Primitive, Ref, ShapedArray, Tracer, get_aval
from nbjax.interpreters import ad, batching
from nbjax.interpreters import lowering as _lowering
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, jaxpr_effects,
                         remat_saving_effects)

__all__ = ["Ref", "AbstractRef", "new_ref", "empty_ref", "free_ref", "freeze", "typeof",
           "ref_get", "ref_set", "ref_swap", "ref_addupdate", "get_p", "swap_p", "addupdate_p",
           "mutable_array_p", "freeze_p", "empty_ref_p", "free_ref_p", "RefEffect",
           "ReadEffect", "WriteEffect", "AccumEffect", "discharge_state", "discharge_rules",
           "TransformedRef", "shaped_array_ref", "run_state", "run_state_reference"]

# ----------------------------------------------------------------------- effects


class RefEffect:
  """A read, write or accumulation of the equation's input ``input_index`` (a ref)."""
  __slots__ = ("input_index",)

  def __init__(self, input_index):
    self.input_index = input_index

  def __eq__(self, other):
    return type(other) is type(self) and other.input_index == self.input_index

  def __hash__(self):
    return hash((type(self), self.input_index))

  def __repr__(self):
    return f"{type(self).__name__[:-6]}<{self.input_index}>"


class ReadEffect(RefEffect):
  __slots__ = ()


class WriteEffect(RefEffect):
  __slots__ = ()


class AccumEffect(RefEffect):
  __slots__ = ()


class InternalMutableArrayEffect:
  """A ref created inside the jaxpr (``new_ref``/``empty_ref``)."""
  local = True  # (not an effect of the jaxpr that makes it: jaxpr.effects leaves it out)

  def __repr__(self):
    return "InternalMutableArrayEffect"


internal_mutable_array_effect = InternalMutableArrayEffect()
_STATE_EFFECTS = (RefEffect, InternalMutableArrayEffect)
remat_saving_effects.update((ReadEffect, WriteEffect, AccumEffect, InternalMutableArrayEffect))


def shaped_array_ref(shape, dtype, weak_type=False):
  """``AbstractRef(ShapedArray(shape, dtype, weak_type))``."""
  return AbstractRef(ShapedArray(shape, dtype, weak_type))

# ----------------------------------------------------------------------- indexers
# An indexer is kept static in the params: a tuple of entries, each an int, None, Ellipsis,
# ("slice", start, stop, step) or ("dyn", k) for an array index (the k-th index operand).
# A transformed ref (``ref.at[i][j]``) keeps one indexer per ``at``: ``tree``, a tuple.


def _encode(idx, dyn):
  entries = []
  for i in (idx if type(idx) is tuple else (idx,)):
    if i is None or i is Ellipsis:
      entries.append(i)
    elif type(i) is slice:
      parts = []
      for p in (i.start, i.stop, i.step):
        if p is not None and not isinstance(p, (int, np.integer)):
          try:
            p = core.concrete_or_error(int, p, "A slice bound of a ref indexer")
          except core.ConcretizationTypeError:
            raise NotImplementedError("Indexing a ref with a traced slice bound is not "
                                      "implemented (use an integer array index)") from None
        parts.append(None if p is None else int(p))
      entries.append(("slice", *parts))
    elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
      entries.append(int(i))
    else:
      if isinstance(i, (list, bool, np.bool_)):
        i = np.asarray(i)
      if isinstance(getattr(i, "dtype", None), np.dtype) and i.dtype == np.bool_:
        raise NotImplementedError("Indexing a ref with a boolean mask is not supported")
      dyn.append(i)
      entries.append(("dyn", len(dyn) - 1))
  return tuple(entries)


def _decode(entries, dyn):
  out = []
  for e in entries:
    if type(e) is tuple:
      out.append(slice(*e[1:]) if e[0] == "slice" else dyn[e[1]])
    else:
      out.append(e)
  return tuple(out)


def _fmt_indexer(entries, names):
  def one(e):
    if e is Ellipsis:
      return "..."
    if e is None:
      return "None"
    if type(e) is tuple:
      if e[0] == "dyn":
        return names[e[1]]
      a, b, c = e[1:]
      s = f"{'' if a is None else a}:{'' if b is None else b}"
      return s + ("" if c is None else f":{c}")
    return str(e)
  return ",".join(one(e) for e in entries) or "..."


def _transforms_str(tree, names=None):
  n = sum(1 for t in tree for e in t if type(e) is tuple and e[0] == "dyn")
  names = names or [f"i{k}" for k in range(n)]
  return "".join(f"[{_fmt_indexer(t, names)}]" for t in tree)


def _index_value(shape, dyn_avals):
  return [np.zeros(a.shape, np.intp) for a in dyn_avals]


_OOB = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def _indexed_shape(shape, tree, dyn_avals):
  """The shape ``ref[i0][i1]...`` reads (NumPy's indexing of a stand-in; no data)."""
  x = np.broadcast_to(np.False_, shape)
  dyn = _index_value(shape, dyn_avals)
  for entries in tree:
    try:
      x = x[_decode(entries, dyn)]
    except IndexError as e:
      m = _OOB.search(str(e))
      if m:
        raise ValueError(f"Out of bound indexer: idx={m.group(1)}, dim={m.group(3)}.") from None
      raise
  return x.shape


def _apply_get(val, tree, dyn):
  for entries in tree:
    if entries != (Ellipsis,):
      val = val[_decode(entries, dyn)]
  return val


def _same_type(new, old):
  """``new`` with ``old``'s aval (a scatter may drop a weak type)."""
  a, b = get_aval(new), get_aval(old)
  if a == b:
    return new
  from nbjax.lax import elementwise
  return elementwise._convert_element_type(new, b.dtype, weak_type=b.weak_type)


def _apply_update(val, tree, dyn, fn):
  """``val`` with ``fn`` applied to the part ``tree`` indexes."""
  if not tree:
    return _same_type(fn(val), val)
  if tree[0] == (Ellipsis,):
    return _apply_update(val, tree[1:], dyn, fn)
  idx = _decode(tree[0], dyn)
  return _same_type(val.at[idx].set(_apply_update(val[idx], tree[1:], dyn, fn)), val)

# ----------------------------------------------------------------------- primitives

mutable_array_p = ref_p = Primitive("new_ref")
empty_ref_p = Primitive("empty_ref")
free_ref_p = Primitive("free_ref")
free_ref_p.multiple_results = True
freeze_p = Primitive("freeze")
get_p = Primitive("get")
swap_p = Primitive("swap")
addupdate_p = Primitive("addupdate")
addupdate_p.multiple_results = True
mutable_array_p.effects = empty_ref_p.effects = (internal_mutable_array_effect,)
free_ref_p.effects = (WriteEffect(0),)
get_p.effects = (ReadEffect(0),)
swap_p.effects = (WriteEffect(0),)
addupdate_p.effects = (AccumEffect(0),)
_STATE_PRIMS = (mutable_array_p, empty_ref_p, free_ref_p, freeze_p, get_p, swap_p, addupdate_p)
for _p in _STATE_PRIMS:  # (the registry table's notes: no kernel, no lowering of their own)
  _p.meta["note"] = ("state primitive: eagerly a Ref holds an immutable Array that a write "
                     "replaces (the read/update itself is jnp indexing on its kernels)")
  _p.meta["lowering_note"] = ("discharged before lowering (state discharge: the ref's value "
                              "threaded through the program as an ordinary value)")
_ON_A_REF = frozenset(_STATE_PRIMS[2:])  # (a ref left undischarged: staged as it is)


def _ref_aval(aval, where):
  if type(aval) is not AbstractRef:
    raise ValueError(f"`{where}` must be called on `Ref` types: {aval}.")
  return aval


def _new_ref_abstract_eval(aval, *, memory_space=None, kind=None):
  if type(aval) is AbstractRef:
    raise TypeError(f"new_ref: the initial value is itself a mutable array reference "
                    f"({aval}); read it with `ref[...]` first")
  return AbstractRef(aval, memory_space, kind)


def _as_value(x):
  if type(x) is Array or isinstance(x, Tracer):
    return x
  if type(x) is Ref:
    raise TypeError(f"new_ref: the initial value is itself a mutable array reference "
                    f"({x.aval}); read it with `ref[...]` first")
  from nbjax import numpy as jnp
  return jnp.asarray(x)


def _new_ref_impl(x, *, memory_space=None, kind=None):
  v = _as_value(x)
  return Ref(v, AbstractRef(get_aval(v), memory_space, kind))


def _empty_ref_abstract_eval(*, aval, memory_space=None):
  return AbstractRef(aval, memory_space)


def _empty_value(aval):
  from nbjax.lax import elementwise
  return elementwise._full(aval.shape, 0, aval.dtype, aval.weak_type)


def _empty_ref_impl(*, aval, memory_space=None):
  return Ref(_empty_value(aval), AbstractRef(aval, memory_space))


def _freed(ref):
  if ref._ref_value is None:
    raise ValueError(f"the mutable array reference of type {ref.aval} was used after "
                     "free_ref freed it")
  return ref._ref_value


def _free_ref_abstract_eval(ref_aval):
  _ref_aval(ref_aval, "free_ref")
  return []


def _free_ref_impl(ref):
  _freed(ref)
  ref._ref_value = None
  return []


def _freeze_abstract_eval(ref_aval):
  return _ref_aval(ref_aval, "freeze").inner_aval


def _freeze_impl(ref):
  return _freed(ref)


def _get_abstract_eval(ref_aval, *idx_avals, tree):
  inner = _ref_aval(ref_aval, "get").inner_aval
  return inner.update(shape=_indexed_shape(inner.shape, tree, idx_avals))


def _check_value(name, ref_aval, val_aval, idx_avals, tree):
  inner = _ref_aval(ref_aval, name).inner_aval
  if type(val_aval) is AbstractRef:
    raise ValueError("Cannot store a Ref into another Ref. "
                     "Did you forget to load from it using `[...]`?")
  shape = _indexed_shape(inner.shape, tree, idx_avals)
  if shape != val_aval.shape:
    raise ValueError(f"Invalid shape for `{name}`. Ref shape: {inner.shape}. Expected shape: "
                     f"{shape}. Value shape: {val_aval.shape}. Transforms: "
                     f"{_transforms_str(tree) if tree else '()'}. ")
  if inner.dtype != val_aval.dtype:
    raise ValueError(f"Invalid dtype for `{name}`. Ref dtype: {inner.dtype}. "
                     f"Value dtype: {val_aval.dtype}. ")
  return inner.update(shape=shape)


def _swap_abstract_eval(ref_aval, val_aval, *idx_avals, tree):
  return _check_value("swap", ref_aval, val_aval, idx_avals, tree)


def _addupdate_abstract_eval(ref_aval, val_aval, *idx_avals, tree):
  _check_value("addupdate", ref_aval, val_aval, idx_avals, tree)
  return []


def _traced(f):
  """An eager rule that, for a ref holding a traced value (eager reverse mode's tape),
  applies its array operations on that value's trace."""
  def impl(ref, *args, **params):
    v = _freed(ref)
    if isinstance(v, Tracer) and v._trace is not core._ctx.trace:
      with core.set_current_trace(v._trace):
        return f(ref, *args, **params)
    return f(ref, *args, **params)
  return impl


@_traced
def _get_impl(ref, *idx, tree):
  _get_abstract_eval(ref.aval, *[get_aval(i) for i in idx], tree=tree)
  return _apply_get(_freed(ref), tree, idx)


@_traced
def _swap_impl(ref, val, *idx, tree):
  _check_value("swap", ref.aval, get_aval(val), [get_aval(i) for i in idx], tree)
  cur = _freed(ref)
  old = _apply_get(cur, tree, idx)
  ref._ref_value = _apply_update(cur, tree, idx, lambda _: val)
  return old


@_traced
def _addupdate_impl(ref, val, *idx, tree):
  _check_value("addupdate", ref.aval, get_aval(val), [get_aval(i) for i in idx], tree)
  ref._ref_value = _apply_update(_freed(ref), tree, idx, lambda old: old + val)
  return []


for _p, _impl, _ae in ((mutable_array_p, _new_ref_impl, _new_ref_abstract_eval),
                       (empty_ref_p, _empty_ref_impl, _empty_ref_abstract_eval),
                       (free_ref_p, _free_ref_impl, _free_ref_abstract_eval),
                       (freeze_p, _freeze_impl, _freeze_abstract_eval),
                       (get_p, _get_impl, _get_abstract_eval),
                       (swap_p, _swap_impl, _swap_abstract_eval),
                       (addupdate_p, _addupdate_impl, _addupdate_abstract_eval)):
  _p.def_impl(_impl)
  _p.def_abstract_eval(_ae)
  _p.family = "state"
  _p.places_sharded = True  # (a ref's value keeps its placement; no jitted run)

# ----------------------------------------------------------------------- JVP
# The tangent of a ref is a ref of tangents (created with it); a ref from outside the
# differentiated function has a zero tangent, which may be read but not written.


_NO_GRAD = "no_grad_no_remat"  # the kind of a ref whose writes are not differentiated


def _zero_tangent_write(ref):
  """A differentiated value written to a ref with no tangent: dropped for a ``no_grad`` ref,
  else JAX's error."""
  aval = get_aval(ref)
  if aval.kind != _NO_GRAD:
    raise Exception("performing a set/swap operation with a differentiated value on a "
                    f"non-differentiated array reference of type {aval}. Move the array "
                    "reference to be an argument of the differentiated function?")


_TANGENT = "tangent"  # the kind of a tangent ref: staged by linearize even from zeros
mutable_array_p.force_unknown = lambda params: params.get("kind") is _TANGENT


def _new_ref_jvp(primals, tangents, *, memory_space=None, kind=None):
  (x,), (t,) = primals, tangents
  return (mutable_array_p.bind(x, memory_space=memory_space,  # (a tangent ref's primal is
                               kind=None if kind is _TANGENT else kind),  # known)
          mutable_array_p.bind(ad.instantiate_zeros(t), memory_space=memory_space,
                               kind=_TANGENT))


def _empty_ref_jvp(primals, tangents, *, aval, memory_space=None):
  out = empty_ref_p.bind(aval=aval, memory_space=memory_space)
  return out, mutable_array_p.bind(ad.zeros_like_aval(aval.to_tangent_aval()),
                                   memory_space=memory_space, kind=_TANGENT)


def _free_ref_jvp(primals, tangents):
  free_ref_p.bind(primals[0])
  if type(tangents[0]) is not ad.Zero:
    free_ref_p.bind(tangents[0])
  return [], []


def _freeze_jvp(primals, tangents):
  (r,), (t,) = primals, tangents
  return freeze_p.bind(r), (t if type(t) is ad.Zero else freeze_p.bind(t))


def _get_jvp(primals, tangents, *, tree):
  ref, *idx = primals
  t = tangents[0]
  out = get_p.bind(ref, *idx, tree=tree)
  if type(t) is ad.Zero:
    return out, ad.Zero(get_aval(out).to_tangent_aval())
  return out, get_p.bind(t, *idx, tree=tree)


def _swap_jvp(primals, tangents, *, tree):
  ref, val, *idx = primals
  tref, tval = tangents[:2]
  out = swap_p.bind(ref, val, *idx, tree=tree)
  if type(tref) is ad.Zero or get_aval(ref).kind == _NO_GRAD:
    if type(tval) is not ad.Zero and type(tref) is ad.Zero:
      _zero_tangent_write(ref)
    return out, ad.Zero(get_aval(out).to_tangent_aval())
  return out, swap_p.bind(tref, ad.instantiate_zeros(tval), *idx, tree=tree)


def _addupdate_jvp(primals, tangents, *, tree):
  ref, val, *idx = primals
  tref, tval = tangents[:2]
  addupdate_p.bind(ref, val, *idx, tree=tree)
  if type(tref) is ad.Zero or get_aval(ref).kind == _NO_GRAD:
    if type(tval) is not ad.Zero and type(tref) is ad.Zero:
      _zero_tangent_write(ref)
  else:  # (a zero tangent added too, as JAX's)
    addupdate_p.bind(tref, ad.instantiate_zeros(tval), *idx, tree=tree)
  return [], []


mutable_array_p.rule_always = empty_ref_p.rule_always = True  # (a ref made inside is
# written with differentiated or batched values: it has a tangent and a batch axis)
mutable_array_p.jvp, empty_ref_p.jvp, free_ref_p.jvp = _new_ref_jvp, _empty_ref_jvp, _free_ref_jvp
freeze_p.jvp, get_p.jvp, swap_p.jvp, addupdate_p.jvp = (_freeze_jvp, _get_jvp, _swap_jvp,
                                                         _addupdate_jvp)

# ----------------------------------------------------------------------- batching
# A batched ref keeps its batch axis in front; its indexers get a leading full slice. Refs
# from outside vmap are unbatched: they may be read, and written with unbatched values.


def _front(x, d):
  return batching.moveaxis(x, d, 0) if d is not batching.not_mapped and d != 0 else x


def _batched_tree(tree):
  return tuple((("slice", None, None, None),) + tuple(
      e for e in entries) if entries != (Ellipsis,) else (Ellipsis,) for entries in tree)


def _batched_new(x, size):
  from nbjax import lax
  shape = get_aval(x).shape
  return lax.broadcast_in_dim(x, (size, *shape), tuple(range(1, len(shape) + 1)))


def _new_ref_batch(axis_data, vals, dims, **params):
  x, d = vals[0], dims[0]
  x = _batched_new(x, axis_data.size) if d is batching.not_mapped else _front(x, d)
  return mutable_array_p.bind(x, **params), 0


def _empty_ref_batch(axis_data, vals, dims, *, aval, memory_space=None):
  return empty_ref_p.bind(aval=aval.update(shape=(axis_data.size, *aval.shape)),
                          memory_space=memory_space), 0


_new_ref_batch.wants_axis_data = _empty_ref_batch.wants_axis_data = True
empty_ref_p.batch = _empty_ref_batch


def _freeze_batch(vals, dims):
  return freeze_p.bind(vals[0]), dims[0]


def _vmap(f, in_axes, out_axes=0):
  from nbjax import api
  return api.vmap(f, in_axes=in_axes, out_axes=out_axes)


def _get_batch(vals, dims, *, tree):
  if dims[0] not in (0, batching.not_mapped) or any(  # batched indices, or a ref batched
      d is not batching.not_mapped for d in dims[1:]):  # along another axis: the whole
    whole = get_p.bind(vals[0], tree=())  # ref read, indexed per batch element
    return _vmap(lambda v, *i: _apply_get(v, tree, i), tuple(dims))(whole, *vals[1:]), 0
  if dims[0] is batching.not_mapped:
    return get_p.bind(*vals, tree=tree), batching.not_mapped
  return get_p.bind(vals[0], *vals[1:], tree=_batched_tree(tree)), 0


def _write_batch(prim, vals, dims, tree):
  ref, val = vals[:2]
  if dims[0] not in (0, batching.not_mapped) or any(  # batched indices, or a ref batched
      d is not batching.not_mapped for d in dims[2:]):  # along another axis: the whole ref
    if dims[0] is batching.not_mapped:                  # read, updated per element, written
      raise NotImplementedError(f"Batching rule for '{prim.name}' with batched indices into "
                                "an unbatched array reference not implemented")
    whole = get_p.bind(ref, tree=())
    fn = (lambda old, v: v) if prim is swap_p else (lambda old, v: old + v)

    def update(w, v, *i):
      return _apply_get(w, tree, i), _apply_update(w, tree, i, lambda old: fn(old, v))
    old, new = _vmap(update, tuple(dims), (0, dims[0]))(whole, val, *vals[2:])
    swap_p.bind(ref, new, tree=())
    return old if prim is swap_p else []
  if dims[0] is batching.not_mapped:
    if dims[1] is not batching.not_mapped:
      raise Exception(f"{prim.name}: a batched value was written to an unbatched array "
                      "reference (one created outside vmap and closed over)")
    return prim.bind(*vals, tree=tree)
  if dims[1] is batching.not_mapped:
    shape = (ref.shape[0], *get_aval(val).shape)
    from nbjax import lax
    val = lax.broadcast_in_dim(val, shape, tuple(range(1, len(shape))))
  else:
    val = _front(val, dims[1])
  return prim.bind(ref, val, *vals[2:], tree=_batched_tree(tree))


def _swap_batch(vals, dims, *, tree):
  return _write_batch(swap_p, vals, dims, tree), 0


def _addupdate_batch(vals, dims, *, tree):
  return _write_batch(addupdate_p, vals, dims, tree), []


mutable_array_p.batch, freeze_p.batch = _new_ref_batch, _freeze_batch
get_p.batch, swap_p.batch, addupdate_p.batch = _get_batch, _swap_batch, _addupdate_batch

# ----------------------------------------------------------------------- public functions


def new_ref(init_val, *, memory_space=None, kind=None):
  """A mutable array reference holding ``init_val`` (JAX's ``jax.new_ref``).

  Args:
    init_val: the initial value, an array or a scalar.
    memory_space: accepted for JAX compatibility.
    kind: accepted for JAX compatibility.

  Returns:
    A ``Ref``: read it with ``ref[idx]``, write it with ``ref[idx] = v`` or ``ref[idx] += v``.
  """
  return mutable_array_p.bind(init_val, memory_space=memory_space, kind=kind)


mutable_array = new_ref


def empty_ref(ty, memory_space=None):
  """A mutable array reference of ``ty`` (a ``ShapeDtypeStruct`` or aval) whose contents are
  unspecified until written (JAX's ``jax.empty_ref``; nbjax fills it with zeros)."""
  aval = ty if type(ty) is ShapedArray else core.abstractify(ty)
  return empty_ref_p.bind(aval=aval, memory_space=memory_space)


def free_ref(ref):
  """Release ``ref``'s buffer; using the ref afterwards is an error (JAX's
  ``jax.free_ref``)."""
  free_ref_p.bind(ref)


def freeze(ref):
  """The value of ``ref`` as an immutable array (JAX's ``jax.freeze``)."""
  return freeze_p.bind(ref)


def typeof(x):
  """The abstract value of ``x`` (a ref's is ``AbstractRef``, printed ``Ref{float32[3]}``)."""
  from nbjax import api
  return api.typeof(x)


def run_state(f):
  """JAX's ``run_state``: ``run_state(f)(init)`` runs ``f`` on refs holding ``init`` (a
  pytree of arrays) and returns their final values (``f`` returns nothing)."""
  from nbjax import tree_util

  def wrapped(init):
    flat, tree = tree_util.tree_flatten(init)
    refs = [new_ref(x) for x in flat]
    f(tree_util.tree_unflatten(tree, refs))
    return tree_util.tree_unflatten(tree, [freeze(r) for r in refs])
  return wrapped


run_state_reference = run_state


def _split_ref(ref, idx):
  """``(ref, tree, dyn)`` of ``ref[idx]`` (``ref`` may be a ``TransformedRef``)."""
  tree, dyn = (), []
  if type(ref) is TransformedRef:
    ref, tree, dyn = ref.ref, ref.tree, list(ref.dyn)
  if idx is not None:
    tree = tree + (_encode(idx, dyn),)
  return ref, tree, dyn


def _implicit_cast(dtype, value):
  """JAX's implicit cast of a value written to a ref: a weakly typed float into a float ref,
  an integer into an integer ref."""
  aval = get_aval(value)
  if type(aval) is not ShapedArray or aval.dtype == dtype:
    return value
  k, kv = np.dtype(dtype).kind, aval.dtype.kind
  if (aval.weak_type and k in "fc" and kv == "f" or k in "iu" and kv in "iu") and \
      not (k == "c" and kv == "f" and not aval.weak_type):
    from nbjax.lax import elementwise
    return elementwise._convert_element_type(value, dtype)
  return value


def _ref_value(v):
  if type(v) in (int, float, complex, bool) or isinstance(v, (np.ndarray, np.generic, list)):
    from nbjax import numpy as jnp
    return jnp.asarray(v)
  return v


def ref_get(ref, idx=None):
  """``ref[idx]``: the indexed elements of ``ref`` as an array."""
  ref, tree, dyn = _split_ref(ref, idx)
  return get_p.bind(ref, *dyn, tree=tree)


def ref_swap(ref, idx, value):
  """Writes ``value`` at ``ref[idx]`` and returns the previous value there."""
  value = _implicit_cast(ref.dtype, _ref_value(value))
  ref, tree, dyn = _split_ref(ref, idx)
  return swap_p.bind(ref, value, *dyn, tree=tree)


def ref_set(ref, idx, value):
  """``ref[idx] = value``."""
  ref_swap(ref, idx, value)


def ref_addupdate(ref, idx, value):
  """``ref[idx] += value`` in one operation (no read of the old value)."""
  value = _ref_value(value)
  ref, tree, dyn = _split_ref(ref, idx)
  addupdate_p.bind(ref, value, *dyn, tree=tree)


class TransformedRef:
  """``ref.at[idx]``: a view of part of a ref, read and written with ``[...]``."""
  __slots__ = ("ref", "tree", "dyn")

  def __init__(self, ref, tree, dyn):
    self.ref, self.tree, self.dyn = ref, tree, tuple(dyn)

  @property
  def shape(self):
    return _indexed_shape(self.ref.shape, self.tree, [get_aval(d) for d in self.dyn])

  dtype = property(lambda self: self.ref.dtype)
  ndim = property(lambda self: len(self.shape))

  @property
  def at(self):
    return _RefAt(self)

  def __getitem__(self, idx):
    return ref_get(self, idx)

  def __setitem__(self, idx, value):
    ref_set(self, idx, value)

  def __repr__(self):
    return f"TransformedRef(ref={self.ref!r}, transforms={_transforms_str(self.tree)})"


def _register_transformed_ref():
  from nbjax import tree_util  # (a pytree: jit and the loops take it as its ref, re-viewed)
  tree_util.register_pytree_node(
      TransformedRef, lambda t: ((t.ref, *t.dyn), t.tree),
      lambda tree, kids: TransformedRef(kids[0], tree, kids[1:]))


_register_transformed_ref()


class _RefAt:
  __slots__ = ("ref",)

  def __init__(self, ref):
    self.ref = ref

  def __getitem__(self, idx):
    ref, tree, dyn = _split_ref(self.ref, idx)
    return TransformedRef(ref, tree, dyn)


def _ref_getitem(self, idx):
  return ref_get(self, idx)


def _ref_setitem(self, idx, value):
  ref_set(self, idx, value)


Ref.__getitem__, Ref.__setitem__ = _ref_getitem, _ref_setitem
Ref.at = property(_RefAt)
Ref.get, Ref.set = (lambda self, idx=...: ref_get(self, idx),
                    lambda self, value, idx=...: ref_set(self, idx, value))
Ref.addupdate = lambda self, x, idx=(): ref_addupdate(self, idx, x)
Ref.sharding = property(lambda self: self._ref_value.sharding)
Ref.freeze = freeze


def _attach_tracer():
  """``Tracer``'s indexing reads or writes a ref when the tracer stands for one (its other
  tracers keep the array operators ``nbjax.numpy`` attached)."""
  getitem, setitem, at = Tracer.__getitem__, Tracer.__setitem__, Tracer.at

  def __getitem__(self, idx):
    if type(self.aval) is AbstractRef:
      return ref_get(self, idx)
    return getitem(self, idx)

  def __setitem__(self, idx, value):
    if type(self.aval) is AbstractRef:
      return ref_set(self, idx, value)
    return setitem(self, idx, value)

  def _at(self):
    return _RefAt(self) if type(self.aval) is AbstractRef else at.fget(self)

  Tracer.__getitem__, Tracer.__setitem__, Tracer.at = __getitem__, __setitem__, property(_at)
  Tracer.addupdate = lambda self, x, idx=(): ref_addupdate(self, idx, x)


_attach_tracer()

# ----------------------------------------------------------------------- printing
# JAX's layout: ``b:f32[1] <- a[1:2]``, ``a[0] <- d``, ``a[...] += d``.


def _pp_get(eqn, lhs, ins):
  return f"{lhs} <- {ins[0]}{_transforms_str(eqn.params['tree'], ins[1:])}"


def _pp_swap(eqn, lhs, ins):
  ref = f"{ins[0]}{_transforms_str(eqn.params['tree'], ins[2:])}"
  if lhs.startswith("_:"):
    return f"{ref} <- {ins[1]}"
  return f"{lhs}, {ref} <- {ref}, {ins[1]}"


def _pp_addupdate(eqn, lhs, ins):
  return f"{ins[0]}{_transforms_str(eqn.params['tree'], ins[2:])} += {ins[1]}"


get_p.pp_eqn, swap_p.pp_eqn, addupdate_p.pp_eqn = _pp_get, _pp_swap, _pp_addupdate

# ----------------------------------------------------------------------- discharge


class _BoxBase:
  __slots__ = ()


class _Box(_BoxBase):
  """A ref's current value while a jaxpr is discharged."""
  __slots__ = ("val",)

  def __init__(self, val):
    self.val = val


class _RowBox(_BoxBase):
  """Row ``i`` of a ref (a loop's step over a ref it scans)."""
  __slots__ = ("box", "i")

  def __init__(self, box, i):
    self.box, self.i = box, i

  @property
  def val(self):
    return self.box.val[self.i]

  @val.setter
  def val(self, v):
    self.box.val = self.box.val.at[self.i].set(v)


discharge_rules: dict = {}  # primitive -> rule(operands (a _Box per ref), **params) -> outs
_has_state_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def has_state(jaxpr):
  """Whether ``jaxpr`` (or a jaxpr in its equations' params) creates, reads or writes refs,
  or takes or closes over one."""
  if isinstance(jaxpr, ClosedJaxpr):
    if any(type(c) is Ref for c in jaxpr.consts):
      return True
    jaxpr = jaxpr.jaxpr
  hit = _has_state_memo.get(jaxpr)
  if hit is None:
    hit = _has_state_memo[jaxpr] = (
        any(type(v.aval) is AbstractRef for v in (*jaxpr.invars, *jaxpr.constvars))
        or any(isinstance(e, _STATE_EFFECTS) for e in jaxpr_effects(jaxpr)))
  return hit


def _read(env, a):
  return a.val if type(a) is Literal else env[a]


def _interpret(jaxpr, consts, args):
  """Evaluate ``jaxpr`` (binding on the current trace) with refs as ``_Box``es."""
  env = {}
  for v, x in zip(jaxpr.constvars, consts):
    if type(x) is Ref:  # (callers pass refs as inputs, so that their writes come back)
      raise TypeError("state discharge: a jaxpr closing over an eager ref")
    env[v] = x
  for v, x in zip(jaxpr.invars, args):
    env[v] = x
  for eqn in jaxpr.eqns:
    ins = [_read(env, a) for a in eqn.invars]
    prim = eqn.primitive
    rule = discharge_rules.get(prim)
    if rule is not None and (prim not in _ON_A_REF or isinstance(ins[0], _BoxBase)):
      outs = rule(ins, **eqn.params)
    elif any(isinstance(x, _BoxBase) for x in ins):
      raise NotImplementedError(f"State discharge rule for '{prim.name}' not implemented "
                                "(a mutable array reference is one of its operands)")
    else:
      outs = prim.bind(*ins, **_discharged_params(eqn.params))
      if not prim.multiple_results:
        outs = [outs]
    for v, o in zip(eqn.outvars, outs):
      if type(v) is not DropVar:
        env[v] = o
  return [_read(env, v) for v in jaxpr.outvars]


def _discharged_params(params):
  """``params`` with the jaxprs in them that use refs internally discharged."""
  new = None
  for k, v in params.items():
    if isinstance(v, (ClosedJaxpr, Jaxpr)) and has_state(v):
      new = dict(params) if new is None else new
      new[k] = _discharge_internal(v)
    elif type(v) is tuple and v and isinstance(v[0], (ClosedJaxpr, Jaxpr)) and \
        any(has_state(j) for j in v):
      new = dict(params) if new is None else new
      new[k] = tuple(_discharge_internal(j) for j in v)
  return params if new is None else new


def _discharge_internal(j):
  closed = j if isinstance(j, ClosedJaxpr) else ClosedJaxpr(j, [])
  if any(type(v.aval) is AbstractRef for v in closed.jaxpr.invars):
    raise NotImplementedError("State discharge of a jaxpr parameter that takes refs not "
                              "implemented")
  out = discharge_state(closed)
  if isinstance(j, Jaxpr):
    return pe.convert_constvars_jaxpr(out.jaxpr) if out.consts else out.jaxpr
  return out


_discharged: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def discharge_state(closed, should_discharge=True):
  """The jaxpr of ``closed`` (a ``ClosedJaxpr`` whose consts hold no eager refs) with its
  refs replaced by values: each ref input takes the ref's value and its final value is
  appended to the outputs (in input order). Refs created inside become values threaded
  through. ``should_discharge`` (a bool, or one per input): the ref inputs to discharge;
  the others stay refs. Cached per jaxpr."""
  jaxpr = closed.jaxpr
  full = should_discharge is True
  cache = not closed.consts and full
  if cache:
    hit = _discharged.get(jaxpr)
    if hit is not None:
      return hit
  sd = [should_discharge] * len(jaxpr.invars) if isinstance(should_discharge, bool) else \
      list(should_discharge)
  is_ref = [type(v.aval) is AbstractRef and d for v, d in zip(jaxpr.invars, sd)]
  in_avals = [v.aval.inner_aval if r else v.aval for v, r in zip(jaxpr.invars, is_ref)]

  def fun(*vals):
    args = [_Box(x) if r else x for x, r in zip(vals, is_ref)]
    outs = _interpret(jaxpr, closed.consts, args)
    if any(isinstance(o, _BoxBase) for o in outs):
      raise ValueError("a jaxpr returning a mutable array reference cannot be discharged")
    return [*outs, *(b.val for b, r in zip(args, is_ref) if r)]

  with core.set_current_trace(core.eval_trace):
    j, _, consts = pe.trace_to_jaxpr_dynamic(fun, in_avals, fun_name="discharged")
  j, _ = pe.dce_jaxpr(j, True, instantiate=True)
  out = ClosedJaxpr(j, consts)
  if cache:
    _discharged[jaxpr] = out
  return out


def run_with_refs(closed, args, name="jit"):
  """Run ``closed`` (refs among its inputs or consts) compiled: the discharged program on
  the refs' values, the final values written back into the refs. Returns the outputs."""
  from nbjax.interpreters import pjit
  jaxpr, consts = closed.jaxpr, list(closed.consts)
  allargs = [*consts, *args]
  refs = [x for x in allargs if type(x) is Ref]
  held = next((r._ref_value for r in refs if isinstance(r._ref_value, Tracer)), None)
  if held is not None:  # refs holding traced values (eager grad's tape): run on that trace
    boxes = [_Box(_freed(x)) if type(x) is Ref else x for x in allargs]
    with core.set_current_trace(held._trace):
      outs = _interpret(pe.convert_constvars_jaxpr(jaxpr) if consts else jaxpr, [], boxes)
    for x, b in zip(allargs, boxes):
      if type(x) is Ref:
        x._ref_value = b.val
    return outs
  mask = tuple(type(x) is Ref for x in allargs)
  runs = _runs.get(jaxpr)
  if runs is None:
    runs = _runs[jaxpr] = {}
  exe = runs.get(mask)
  if exe is None:
    exe = runs[mask] = pjit._executable_for(discharged_call(closed), name)
  outs = exe.run([_freed(x) if r else x for x, r in zip(allargs, mask)])
  n = len(jaxpr.outvars)
  for r, v in zip(refs, outs[n:]):
    r._ref_value = v
  return outs[:n]


def discharged_call(closed):
  """The program ``run_with_refs`` compiles for ``closed``: its consts as leading inputs, refs
  discharged (their final values appended to the outputs)."""
  jaxpr = closed.jaxpr
  jx = pe.convert_constvars_jaxpr(jaxpr) if closed.consts else jaxpr
  return discharge_state(ClosedJaxpr(jx, []))


core.discharged_call = discharged_call
_runs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # jaxpr -> {ref mask: exe}
_prim_jaxprs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _run_prim(prim, args, params):
  """An eager primitive (a loop, a cond, a jit call) with eager refs among its operands: run
  compiled as a one-equation jaxpr (kept per body jaxpr and operand types)."""
  avals = tuple(get_aval(a) for a in args)
  body = params.get("jaxpr", params.get("body_jaxpr"))
  body = body if body is not None else params.get("branches", (None,))[0]
  per = _prim_jaxprs.get(body) if body is not None else None
  if per is None:
    per = {} if body is None else _prim_jaxprs.setdefault(body, {})
  key = (prim, avals)
  hit = per.get(key)
  if hit is None or hit[0] != params:
    out = prim.abstract_eval(*avals, **params)
    outs_avals = list(out) if prim.multiple_results else [out]
    invars = [Var(a) for a in avals]
    outvars = [Var(a) for a in outs_avals]
    eqn = JaxprEqn(invars, outvars, prim, params, pe.eqn_effects(prim, params))
    hit = per[key] = (params, ClosedJaxpr(Jaxpr([], invars, outvars, [eqn]), []))
  outs = run_with_refs(hit[1], list(args), prim.name)
  return outs if prim.multiple_results else outs[0]


core.run_with_refs = _run_prim
core.run_state = run_with_refs


def _physicalize(closed):
  return discharge_state(closed) if not any(
      type(v.aval) is AbstractRef for v in closed.jaxpr.invars) else closed


_lowering.discharge_hook = (has_state, _physicalize)

# discharge rules -------------------------------------------------------------------------


def _box(x, name):
  if not isinstance(x, _BoxBase):
    raise TypeError(f"{name}: expected a mutable array reference, got {get_aval(x)}")
  if x.val is None:
    raise ValueError(f"{name}: the mutable array reference was used after free_ref freed it")
  return x


def _new_ref_discharge(ins, **_):
  return [_Box(ins[0])]


def _empty_ref_discharge(ins, *, aval, memory_space=None):
  return [_Box(_empty_value(aval))]


def _free_ref_discharge(ins):
  _box(ins[0], "free_ref").val = None
  return []


def _freeze_discharge(ins):
  return [_box(ins[0], "freeze").val]


def _get_discharge(ins, *, tree):
  return [_apply_get(_box(ins[0], "get").val, tree, ins[1:])]


def _swap_discharge(ins, *, tree):
  b, val, *idx = ins
  cur = _box(b, "swap").val
  old = _apply_get(cur, tree, idx)
  b.val = _apply_update(cur, tree, idx, lambda _: val)
  return [old]


def _addupdate_discharge(ins, *, tree):
  b, val, *idx = ins
  b.val = _apply_update(_box(b, "addupdate").val, tree, idx, lambda old: old + val)
  return []


discharge_rules.update({mutable_array_p: _new_ref_discharge, empty_ref_p: _empty_ref_discharge,
                        free_ref_p: _free_ref_discharge, freeze_p: _freeze_discharge,
                        get_p: _get_discharge, swap_p: _swap_discharge,
                        addupdate_p: _addupdate_discharge})


def _unique_boxes(xs):
  boxes = []
  for x in xs:
    if isinstance(x, _BoxBase) and all(x is not b for b in boxes):
      boxes.append(x)
  return boxes


def _boxed(closed, ins, boxes):
  """``run(plain, vals) -> (outs, finals)``: ``closed`` on ``ins``, whose refs (``boxes``)
  take the values ``vals`` and whose other operands are ``plain``; ``finals``: the refs'
  values afterwards."""
  pos = [next(k for k, b in enumerate(boxes) if b is x) if isinstance(x, _BoxBase) else None
         for x in ins]

  def run(plain, vals):
    fresh = [_Box(v) for v in vals]
    it = iter(plain)
    args = [fresh[p] if p is not None else next(it) for p in pos]
    outs = _interpret(closed.jaxpr, closed.consts, args)
    return outs, [b.val for b in fresh]
  return run


def _stage(fun, avals):
  """``(jaxpr with its consts as leading inputs, consts)`` of ``fun`` on ``avals``."""
  j, _, consts = pe.trace_to_jaxpr_dynamic(fun, avals)
  return ClosedJaxpr(pe.convert_constvars_jaxpr(j), []), consts


def _box_aval(b):
  return get_aval(b.val)


def _plain_avals(avals, ins):
  return [a for a, x in zip(avals, ins) if not isinstance(x, _BoxBase)]


def _scan_discharge(ins, *, jaxpr, num_consts, num_carry, length, reverse, **params):
  """Refs a scan closes over become carries; a ref it scans over is carried whole, each step
  reading and writing its row (a step counter is carried too)."""
  from nbjax.lax.control_flow import scan_p
  boxes = _unique_boxes(ins)
  if not boxes:
    return scan_p.bind(*ins, **_discharged_params(dict(
        params, jaxpr=jaxpr, num_consts=num_consts, num_carry=num_carry, length=length,
        reverse=reverse)))
  nx = num_consts + num_carry
  if any(isinstance(x, _BoxBase) for x in ins[num_consts:nx]):
    raise NotImplementedError("State discharge rule for 'scan' with a mutable array reference "
                              "in its carry not implemented")
  pos = [next(k for k, b in enumerate(boxes) if b is x) if isinstance(x, _BoxBase) else None
         for x in ins]
  consts = [x for x in ins[:num_consts] if not isinstance(x, _BoxBase)]
  xs = [x for x in ins[nx:] if not isinstance(x, _BoxBase)]
  nc, nb = len(consts), len(boxes)

  def body(*args):
    fresh = [_Box(v) for v in args[nc:nc + nb]]
    i = args[nc + nb]
    carry = args[nc + nb + 1:nc + nb + 1 + num_carry]
    it_c, it_x = iter(args[:nc]), iter(args[nc + nb + 1 + num_carry:])
    step = [fresh[p] if p is not None and k < num_consts else
            _RowBox(fresh[p], i) if p is not None else
            next(it_c) if k < num_consts else None for k, p in enumerate(pos)]
    step = [*step[:num_consts], *carry,
            *(s if s is not None else next(it_x) for s in step[nx:])]
    outs = _interpret(jaxpr.jaxpr, jaxpr.consts, step)
    return [*(b.val for b in fresh), i - 1 if reverse else i + 1, *outs]

  avals = jaxpr.in_avals
  i_aval = ShapedArray((), np.dtype(np.int32))
  in_avals = [a for a, x in zip(avals[:num_consts], ins) if not isinstance(x, _BoxBase)] + \
      [_box_aval(b) for b in boxes] + [i_aval] + list(avals[num_consts:nx]) + \
      [a for a, x in zip(avals[nx:], ins[nx:]) if not isinstance(x, _BoxBase)]
  new, cs = _stage(body, in_avals)
  i0 = np.int32(length - 1 if reverse else 0)
  outs = scan_p.bind(*cs, *consts, *(b.val for b in boxes), i0, *ins[num_consts:nx], *xs,
                     jaxpr=new, num_consts=len(cs) + nc, num_carry=nb + 1 + num_carry,
                     length=length, reverse=reverse, **params)
  for b, v in zip(boxes, outs[:nb]):
    b.val = v
  return outs[nb + 1:]


def _while_discharge(ins, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
  from nbjax.lax.control_flow import while_p
  boxes = _unique_boxes(ins)
  if not boxes:
    return while_p.bind(*ins, **_discharged_params(dict(
        cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
        body_nconsts=body_nconsts)))
  n = cond_nconsts + body_nconsts
  if any(isinstance(x, _BoxBase) for x in ins[n:]):
    raise NotImplementedError("State discharge rule for 'while' with a mutable array "
                              "reference in its carry not implemented")
  cins, bins, init = ins[:cond_nconsts], ins[cond_nconsts:n], ins[n:]
  crun = _boxed(cond_jaxpr, [*cins, *init], boxes)
  brun = _boxed(body_jaxpr, [*bins, *init], boxes)
  cc = [x for x in cins if not isinstance(x, _BoxBase)]
  bc = [x for x in bins if not isinstance(x, _BoxBase)]
  nb = len(boxes)

  def cond(*args):
    vals = args[len(cc):len(cc) + nb]
    outs, finals = crun([*args[:len(cc)], *args[len(cc) + nb:]], vals)
    if any(f is not v for f, v in zip(finals, vals)):  # (never a silently lost write)
      raise NotImplementedError("State discharge rule for 'while' with a write to a mutable "
                                "array reference in its cond_fun not implemented")
    return outs

  def body(*args):
    outs, finals = brun([*args[:len(bc)], *args[len(bc) + nb:]], args[len(bc):len(bc) + nb])
    return [*finals, *outs]

  bavals = [_box_aval(b) for b in boxes]
  carry = list(cond_jaxpr.in_avals[cond_nconsts:])
  cj, ccs = _stage(cond, _plain_avals(cond_jaxpr.in_avals[:cond_nconsts], cins) + bavals + carry)
  bj, bcs = _stage(body, _plain_avals(body_jaxpr.in_avals[:body_nconsts], bins) + bavals + carry)
  outs = while_p.bind(*ccs, *cc, *bcs, *bc, *(b.val for b in boxes), *init, cond_jaxpr=cj,
                      body_jaxpr=bj, cond_nconsts=len(ccs) + len(cc),
                      body_nconsts=len(bcs) + len(bc))
  for b, v in zip(boxes, outs[:nb]):
    b.val = v
  return outs[nb:]


def _cond_discharge(ins, *, branches, **params):
  from nbjax.lax.control_flow import cond_p
  boxes = _unique_boxes(ins)
  if not boxes:
    return cond_p.bind(*ins, **_discharged_params(dict(params, branches=branches)))
  index, ops = ins[0], ins[1:]
  plain = [x for x in ops if not isinstance(x, _BoxBase)]
  nb = len(boxes)
  bavals = [_box_aval(b) for b in boxes]
  staged, all_consts = [], []
  for br in branches:
    run = _boxed(br, ops, boxes)

    def fun(*args, run=run):
      outs, finals = run(args[:len(plain)], args[len(plain):])
      return [*outs, *finals]
    j, _, cs = pe.trace_to_jaxpr_dynamic(fun, _plain_avals(br.in_avals, ops) + bavals)
    staged.append((j, cs))
    all_consts.extend(cs)
  new, k = [], 0
  for j, cs in staged:  # every branch takes every branch's consts (leading)
    before = [Var(get_aval(c)) for c in all_consts[:k]]
    after = [Var(get_aval(c)) for c in all_consts[k + len(cs):]]
    new.append(ClosedJaxpr(j.replace(constvars=[], invars=[*before, *j.constvars, *after,
                                                           *j.invars]), []))
    k += len(cs)
  outs = cond_p.bind(index, *all_consts, *plain, *(b.val for b in boxes), branches=tuple(new),
                     **params)
  for b, v in zip(boxes, outs[len(outs) - nb:]):
    b.val = v
  return outs[:len(outs) - nb]


def _call_discharge(call_p):
  """The discharge rule of a call primitive whose ``jaxpr`` takes all its operands (jit,
  checkpoint): the refs among them become extra operands and outputs."""
  def rule(ins, *, jaxpr, **params):
    return _call_discharge_rule(call_p, ins, jaxpr, params)
  return rule


def _call_discharge_rule(jit_p, ins, jaxpr, params):
  boxes = _unique_boxes(ins)
  if not boxes:
    return jit_p.bind(*ins, **_discharged_params(dict(params, jaxpr=jaxpr)))
  if isinstance(jaxpr, Jaxpr):
    jaxpr = ClosedJaxpr(jaxpr, [])
  run = _boxed(jaxpr, ins, boxes)
  plain = [x for x in ins if not isinstance(x, _BoxBase)]

  def fun(*args):
    outs, finals = run(args[:len(plain)], args[len(plain):])
    return [*outs, *finals]
  j, _, cs = pe.trace_to_jaxpr_dynamic(
      fun, _plain_avals(jaxpr.in_avals, ins) + [_box_aval(b) for b in boxes])
  new = ClosedJaxpr(pe.convert_constvars_jaxpr(j), [])
  nb = len(boxes)
  pc = params.get("prevent_cse")
  if isinstance(pc, tuple):  # (checkpoint's, per operand)
    params = dict(params, prevent_cse=(True,) * len(cs) + tuple(
        p for p, x in zip(pc, ins) if not isinstance(x, _BoxBase)) + (True,) * nb)
  outs = jit_p.bind(*cs, *plain, *(b.val for b in boxes), jaxpr=new, **params)
  for b, v in zip(boxes, outs[len(outs) - nb:]):
    b.val = v
  return outs[:len(outs) - nb]


def _inline_discharge(ins, *, call_jaxpr, **_):
  """A custom-derivative call, discharged: its function inlined (its rules are no longer
  needed once refs are discharged, which happens after differentiation)."""
  return _interpret(call_jaxpr.jaxpr, call_jaxpr.consts, ins)


def _custom_lin_discharge(ins, **params):
  """The linear part of a custom_vjp call taking a (tangent) ref: it takes the ref's value,
  and its transpose gives that value's cotangent."""
  return ad.custom_lin_p.bind(*[x.val if isinstance(x, _BoxBase) else x for x in ins],
                              **params)


def _install_rules():
  from nbjax.interpreters.pjit import jit_p
  from nbjax.lax.control_flow import cond_p, scan_p, while_p
  from nbjax.interpreters.remat import checkpoint_p
  from nbjax.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
  discharge_rules.update({ad.custom_lin_p: _custom_lin_discharge,
                          custom_jvp_call_p: _inline_discharge,
                          custom_vjp_call_p: _inline_discharge})
  discharge_rules.update({scan_p: _scan_discharge, while_p: _while_discharge,
                          cond_p: _cond_discharge, jit_p: _call_discharge(jit_p),
                          checkpoint_p: _call_discharge(checkpoint_p)})


_install_rules()
