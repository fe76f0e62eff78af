"""Custom derivative rules: ``custom_jvp``, ``custom_vjp`` and ``closure_convert``.

Pipeline position: above the interpreters, below ``nbjax.numpy`` (which uses ``custom_jvp``
for numerically safe derivatives). Calling a ``custom_jvp``/``custom_vjp`` function flattens
its arguments and binds ``custom_jvp_call``/``custom_vjp_call``, whose ``bind`` hands the
*Python* function and its rules to the current trace (``Trace.process_custom_jvp_call`` /
``process_custom_vjp_call``):

- the eval trace runs the function (the rules are not needed);
- the JVP trace runs the user's JVP rule, or for ``custom_vjp`` the forward rule on the
  primals and the linear primitive ``custom_lin`` (``interpreters.ad``) on the tangents,
  whose transpose calls the backward rule: linearize stages it, the backward pass
  transposes it, and evaluating it forward (plain ``jvp``) is JAX's error;
- the batch trace batches the function and the rules and binds again on its parent;
- the staging trace (jit, make_jaxpr) records one equation holding the function's jaxpr
  (``call_jaxpr``) and thunks that stage the rules on demand (per symbolic-zero pattern).

A staged equation that is evaluated or transformed again (``eval_jaxpr`` under jvp/vmap,
eager replay) turns its params back into functions in ``bind``, so every transformation
still sees the rules. The lowering inlines ``call_jaxpr``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect

from nbjax import core, dtypes, registry
from nbjax.array import Array
from nbjax.config import config
from nbjax.traceback_util import api_boundary
from nbjax.core import Primitive, Tracer, get_aval, set_current_trace
from nbjax.interpreters import ad, batching, lowering
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters.ad import (CustomVJPException, SymbolicZero, Zero, custom_lin_p,
                                   zeros_like_aval)
from nbjax.jaxpr import ClosedJaxpr, eval_jaxpr
from nbjax._tree_util import (keystr, register_pytree_node, tree_flatten,
                             tree_flatten_with_path, tree_map, tree_unflatten, treedef_children)
from nbjax import _tree_util

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "SymbolicZero", "CustomVJPPrimal",
           "custom_vjp_primal_tree_values", "zero_from_primal", "custom_jvp_call_p",
           "custom_vjp_call_p", "custom_lin_p"]


def _name(f):
  while isinstance(f, functools.partial):
    f = f.func
  return getattr(f, "__name__", type(f).__name__)


def _ty(aval):
  return aval.str_short(short_dtypes=False)


def _typematch(a, b):
  return a.shape == b.shape and a.dtype == b.dtype


def _stop_gradient(x):
  from nbjax import lax
  return tree_map(lambda v: lax.stop_gradient(v) if isinstance(v, Tracer) else v, x)


def zero_from_primal(val, symbolic_zeros=False):
  """A zero tangent for each leaf of ``val``: ``SymbolicZero``s, or zero arrays."""
  def f(x):
    aval = get_aval(x).to_tangent_aval()
    return Zero(aval) if symbolic_zeros else zeros_like_aval(aval)
  return tree_map(f, val)


def _forward_attr(self, name):
  """JAX's ``custom_api_util.forward_attr``: the ``def*`` methods of a wrapped custom
  function (``custom_vjp(custom_vmap(f)).def_vmap``) are reachable from its wrapper."""
  if name.startswith("def"):
    return getattr(self.fun, name)
  raise AttributeError(name)


class _Resolver:
  """Binds a call's arguments to the wrapped function's positional parameters (defaults
  filled in), as JAX does before flattening; cheap when no binding is needed."""
  __slots__ = ("fun", "sig", "npos")

  def __init__(self, fun):
    self.fun, self.sig, self.npos = fun, None, -1

  def __call__(self, args, kwargs, kind, name):
    if not kwargs and len(args) == self.npos:
      return args
    if self.sig is None:
      f = self.fun
      try:
        sig = inspect.signature(f)
      except (TypeError, ValueError):  # no signature: take the arguments as they come
        sig = None
      if sig is None or isinstance(f, functools.partial):
        sig = inspect.signature(lambda *a, **k: None)
      ps = list(sig.parameters.values())
      simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or
                   (p.kind is p.KEYWORD_ONLY and p.default is not p.empty) for p in ps)
      self.sig = sig
      self.npos = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in ps) \
          if simple else -1
      if not kwargs and len(args) == self.npos:
        return args
    try:
      ba = self.sig.bind(*args, **kwargs)
      ba.apply_defaults()
      passed = [k for k in ba.kwargs if k in kwargs]
      if passed:
        raise TypeError("The following keyword arguments could not be resolved to "
                        f"positions: {', '.join(passed)}")
    except TypeError as e:
      raise TypeError(f"The input arguments to the {kind}-decorated function {name} could "
                      "not be resolved to positional-only arguments. Binding failed with "
                      f"the error:\n{e}") from e
    return ba.args


def _nondiff_argnums(fun, argnums, argnames):
  nums = set(argnums)
  if argnames:
    params = list(inspect.signature(fun).parameters)
    for n in argnames:
      if n in params:
        nums.add(params.index(n))
  return tuple(sorted(nums))


class _Store:
  """What the flattened function and rules record when they run: output treedef and
  avals (``fun``, ``rule``) and the residual treedef (``res``)."""
  __slots__ = ("fun", "rule", "res")

  def __init__(self):
    self.fun = self.rule = self.res = None

  def out_tree(self):
    return (self.fun or self.rule)[0]


def _flat_fun(fun, in_tree, store, name):
  def flat(*xs):
    out, tree = tree_flatten(fun(*tree_unflatten(in_tree, xs)))
    store.fun = (tree, [get_aval(x) for x in out])
    return out
  flat.__name__ = name
  return flat


def _check_primal_out(store, tree, avals, what, fun_name, rule_name):
  """The rule's primal output must match the function's (when the function ran)."""
  if store.fun is None:
    return
  tree_, avals_ = store.fun
  mine = str(tree_unflatten(tree, [_ty(a) for a in avals])).replace("'", "")
  theirs = str(tree_unflatten(tree_, [_ty(a) for a in avals_])).replace("'", "")
  if what == "jvp":
    head = (f"Custom JVP rule {rule_name} for function {fun_name} must produce a pair (list or "
            "tuple of length two) where the first element represents the primal output (equal "
            f"in value to the output of the custom_jvp-decorated function {fun_name}, and in "
            "particular ")
    tail = "the JVP rule output's first element"
    kind = "custom_jvp"
  else:
    head = (f"Custom VJP fwd rule {rule_name} for function {fun_name} must produce a pair (list "
            "or tuple of length two) where the first element represents the primal output "
            f"(equal to the output of the custom_vjp-decorated function {fun_name}) and the "
            "second element represents residuals (i.e. values stored from the forward pass "
            "for use on the backward pass), but ")
    tail = "the fwd rule output's first element"
    kind = "custom_vjp"
  if tree_ != tree:
    mid = ("of the same container/pytree structure), but " if what == "jvp" else "")
    raise TypeError(f"{head}{mid}instead {tail} had container/pytree structure:\n    {mine}\n"
                    f"while the {kind}-decorated function {fun_name} had output "
                    f"container/pytree structure:\n    {theirs}.")
  if not all(map(_typematch, avals, avals_)):
    mid = ("with leaves of the same shape/dtype), but " if what == "jvp" else "")
    raise TypeError(f"{head}{mid}instead {tail} had shapes/dtypes of:\n    {mine}\n"
                    f"while the {kind}-decorated function {fun_name} had output "
                    f"shapes/dtypes of:\n    {theirs}")


def _is_key_node(x):
  return type(x) in _tree_util.opaque_types


def _rule_view(treedef, xs):
  """``xs`` unflattened for a user's rule, as JAX's rules see them: where a key array is, its
  tangent or cotangent itself (a float0 array, a ``SymbolicZero``), or a ``CustomVJPPrimal``
  of the key (the transformations flatten keys as nodes over one value)."""
  tree = tree_unflatten(treedef, xs)
  if not _tree_util.has_opaque(treedef):
    return tree

  def view(x):
    if not _is_key_node(x):
      return x
    b = x._base_array
    if type(b) is CustomVJPPrimal:
      return CustomVJPPrimal(type(x)(x._impl, b.value), b.perturbed)
    if type(b) is Zero or getattr(b, "dtype", None) == dtypes.float0:
      return b
    return x
  return tree_map(view, tree, is_leaf=_is_key_node)


def _key_tangents_out(primals, tangents):
  """A rule's tangents for key outputs (float0 arrays, ``SymbolicZero``s) as key nodes over
  them, lining up with the flattened primal outputs."""
  def fix(p, t):
    if _is_key_node(p) and not _is_key_node(t):
      return type(p)(p._impl, t)
    return t
  try:
    return tree_map(fix, primals, tangents, is_leaf=_is_key_node)
  except (ValueError, TypeError):
    return tangents  # (the structure check below reports it)


def _flat_jvp(rule, in_tree, store, fun_name, rule_name):
  """The user's JVP rule on flat ``(*primals, *tangents)`` returning flat
  ``[*primals_out, *tangents_out]``, checked as JAX checks it; zero tangents out (symbolic,
  or of integer outputs) become ``Zero``."""
  def flat(*xs):
    n = len(xs) // 2
    xs = list(xs)
    pair = rule(tree_unflatten(in_tree, xs[:n]), _rule_view(in_tree, xs[n:]))
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
      raise TypeError(f"Custom JVP rule {rule_name} for function {fun_name} must produce a pair "
                      "(list or tuple of length two) representing primal and tangent outputs, "
                      f"but got {pair}.")
    ps, tree = tree_flatten(pair[0])
    t_out = _key_tangents_out(pair[0], pair[1]) if _tree_util.has_opaque(tree) else pair[1]
    ts, tree2 = tree_flatten(t_out)
    if tree != tree2:
      raise TypeError(f"Custom JVP rule {rule_name} for function {fun_name} must produce primal "
                      "and tangent outputs with equal container (pytree) structures, but got "
                      f"{tree} and {tree2} respectively.")
    avals = [get_aval(p) for p in ps]
    _check_primal_out(store, tree, avals, "jvp", fun_name, rule_name)
    p_avals = [a.strip_weak_type() for a in avals]
    want = [a.to_tangent_aval() for a in p_avals]
    got = [(t.aval if type(t) is Zero else get_aval(t)).strip_weak_type() for t in ts]
    if not all(map(_typematch, want, got)):
      if len(want) == 1:
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes. Expected {_ty(want[0])} (tangent "
                        f"type of {_ty(p_avals[0])}) but got {_ty(got[0])}.")
      bad = "\n".join(f"  primal {_ty(p)} with tangent {_ty(g)}, expecting tangent {_ty(w)}"
                      for p, w, g in zip(p_avals, want, got) if not _typematch(w, g))
      raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                      f"corresponding shapes and dtypes, but got:\n{bad}")
    store.rule = (tree, avals)
    ts = [Zero(w) if type(t) is Zero or w.dtype == dtypes.float0 else t
          for t, w in zip(ts, want)]
    return [*ps, *ts]
  flat.__name__ = rule_name
  return flat


# ----------------------------------------------------------------------------- custom_jvp


class custom_jvp:
  """A function with a custom JVP rule (JAX's ``jax.custom_jvp``), used as a decorator.

  ``f.defjvp(rule)`` sets the rule ``rule(primals, tangents) -> (primal_out, tangent_out)``
  (``primals``/``tangents`` are tuples over the arguments; with ``nondiff_argnums`` the
  rule is ``rule(*nondiff_args, primals, tangents)`` and the tuples hold the other
  arguments); ``f.defjvps(*rules)`` gives one rule per argument. Calling ``f`` runs the
  function; ``jvp``/``grad``/``linearize`` use the rule, under ``jit`` and ``vmap`` too.

  >>> @custom_jvp
  ... def f(x):
  ...   return jnp.sin(x)
  >>> f.defjvp(lambda primals, tangents: (f(*primals), 2 * jnp.cos(*primals) * tangents[0]))
  """

  def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.nondiff_argnums = _nondiff_argnums(fun, nondiff_argnums, nondiff_argnames)
    self.jvp = None
    self.symbolic_zeros = False
    self._resolve = _Resolver(fun)

  __getattr__ = _forward_attr

  def __get__(self, obj, objtype=None):
    return self if obj is None else functools.partial(self, obj)

  def defjvp(self, jvp, symbolic_zeros=False):
    """Set the JVP rule; ``symbolic_zeros=True`` passes ``SymbolicZero``s for the tangents of
    unperturbed inputs (and lets the rule return them). Returns ``jvp`` (a decorator)."""
    self.jvp = jvp
    self.symbolic_zeros = symbolic_zeros
    registry.bump_epoch()  # replayed traces (eager_cache) may hold the old rule
    return jvp

  def defjvps(self, *jvps):
    """One rule per argument: ``jvps[i](t_i, primal_out, *primals)`` is argument i's
    contribution to the output tangent (``None``: the output does not depend on it)."""
    if self.nondiff_argnums:
      raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

    def jvp(primals, tangents):
      out = self(*primals)
      terms = [r(t, out, *primals) for t, r in zip(tangents, jvps) if r is not None]
      if not terms:
        return out, zero_from_primal(out)
      return out, tree_map(lambda *xs: functools.reduce(ad.add_tangents, xs), *terms)
    jvp.__name__ = f"{_name(self.fun)}_jvps"
    self.defjvp(jvp)

  @api_boundary
  def __call__(self, *args, **kwargs):
    name = _name(self.fun)
    if self.jvp is None:
      raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
    args = self._resolve(args, kwargs, "custom_jvp", name)
    trace = core._ctx.trace
    if trace is core.eval_trace:  # nothing is differentiated here: run the function
      return self.fun(*args)
    nums = self.nondiff_argnums
    if nums:
      args = tuple(_stop_gradient(x) if i in nums else x for i, x in enumerate(args))
      fun, dyn = _splice(self.fun, nums, args)
      rule = functools.partial(self.jvp, *[args[i] for i in nums])
    else:
      fun, dyn, rule = self.fun, args, self.jvp
    args_flat, in_tree = tree_flatten(dyn)
    store = _Store()
    outs = custom_jvp_call_p.bind_with_trace(
        trace, _flat_fun(fun, in_tree, store, name),
        _flat_jvp(rule, in_tree, store, name, _name(self.jvp)), args_flat, self.symbolic_zeros)
    return tree_unflatten(store.out_tree(), outs)


def _splice(fun, nums, args):
  """``(f, dyn)``: ``f(*dyn)`` calls ``fun`` with the ``nums`` arguments fixed."""
  dyn = tuple(x for i, x in enumerate(args) if i not in nums)

  def f(*dyn_args):
    it = iter(dyn_args)
    return fun(*[args[i] if i in nums else next(it) for i in range(len(args))])
  return f, dyn


# ----------------------------------------------------------------------------- custom_vjp


@dataclasses.dataclass
class CustomVJPPrimal:
  """A ``custom_vjp`` forward rule's argument leaf when ``symbolic_zeros=True``: the primal
  ``value`` and whether it is ``perturbed`` (involved in differentiation)."""
  value: object
  perturbed: bool


def custom_vjp_primal_tree_values(tree):
  """``tree`` with each ``CustomVJPPrimal`` leaf replaced by its value."""
  def value(leaf):
    if type(leaf) is not CustomVJPPrimal:
      raise TypeError(f"unexpected leaf type {type(leaf)}")
    return leaf.value
  return tree_map(value, tree)


_NOT_REFS = {Array, float, int, bool, complex}


def _check_aliased_refs(f, nums, args):
  """JAX's error for one mutable array reference passed as two (differentiable) arguments;
  whether any argument is a ref."""
  for a in args:  # (arrays, scalars, tracers of arrays: no ref, no pytree to look into)
    if type(a) not in _NOT_REFS and (not isinstance(a, Tracer) or
                                     type(a.aval) is core.AbstractRef):
      break
  else:
    return False
  leaves = [x for i, a in enumerate(args) if i not in nums for x in tree_flatten(a)[0]]
  seen, any_ref = {}, False
  for i, x in enumerate(leaves):
    if pe._is_ref(x):
      any_ref = True
      j = seen.setdefault(id(pe._referent(x)), i)
      if j != i:
        names = pe.DebugInfo("custom_vjp", f, tuple(a for k, a in enumerate(args)
                                                     if k not in nums)).arg_names
        raise ValueError("only one reference to a mutable array may be passed as an argument "
                         f"to a function, but custom_vjp function {f} got the same mutable "
                         f"array reference of type {get_aval(x).str_short()} at {names[j]} "
                         f"and {names[i]}.")
  return any_ref


def _check_returned_refs(f, out, kind, args, after):
  """JAX's errors for a custom_vjp function (``kind``: primal or fwd) returning a mutable
  array reference among its first ``after`` outputs, or one that is not an argument."""
  ids = {id(x) for x in args if pe._is_ref(x)}
  for i, (path, leaf) in enumerate(_tree_util.tree_flatten_with_path(out)[0]):
    if pe._is_ref(leaf):
      a, loc = get_aval(leaf).str_short(), f" at output tree path {keystr(path)}" if path else ""
      if i < after:
        raise ValueError(f"custom_vjp {kind} function {f} returned a mutable array reference "
                         f"of type {a}{loc}, but mutable array references cannot be returned "
                         "there.")
      if id(leaf) not in ids:
        raise ValueError(f"custom_vjp {kind} function {f} returned a mutable array reference "
                         f"of type {a}{loc} that was not an argument.")


def _checking_refs(f, kind):
  def checked(*xs):
    if kind == "fwd":
      _check_aliased_refs(f, (), xs)
    out = f(*xs)
    _check_returned_refs(f, out, kind, tree_flatten(xs)[0], len(tree_flatten(out[0])[0])
                         if kind == "fwd" and isinstance(out, (tuple, list)) and len(out) == 2
                         else 0)
    return out
  return checked


def _flat_fwd(fwd, in_tree, store, symbolic_zeros, fun_name, fwd_name):
  """The forward rule on interleaved ``(primal, perturbed)`` pairs, returning flat
  ``[*residuals, *primals_out]``; the residual treedef goes to ``store.res``."""
  def flat(*xs):
    vals = list(xs[::2])
    if symbolic_zeros:
      vals = [CustomVJPPrimal(x, nz) for x, nz in zip(vals, xs[1::2])]
    pair = fwd(*_rule_view(in_tree, vals))
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
      raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fun_name} must produce a "
                      "pair (list or tuple of length two) where the first element represents "
                      "the primal output (equal to those of the custom_vjp-decorated function "
                      f"{fun_name}) and the second element represents residuals (i.e. values "
                      "stored from the forward pass for use on the backward pass), but instead "
                      f"of a pair the fwd rule {fwd_name} produced {pair}.")
    ps, tree = tree_flatten(pair[0])
    res, res_tree = tree_flatten(pair[1])
    for r in res:  # JAX's error for a residual that is no array (a string, an object)
      if not isinstance(r, Tracer):
        get_aval(r)
    avals = [get_aval(p) for p in ps]
    _check_primal_out(store, tree, avals, "vjp", fun_name, fwd_name)
    store.rule, store.res = (tree, avals), res_tree
    return [*res, *ps]
  flat.__name__ = fwd_name
  return flat


def _flat_bwd(bwd, in_tree, in_avals, store, fun):
  """The backward rule on flat ``(*residuals, *cotangents)`` returning one cotangent per flat
  input (``Zero`` for ``None`` entries and integer inputs), checked as JAX checks it."""
  def flat(*xs):
    nres = store.res.num_leaves
    cts_in = bwd(tree_unflatten(store.res, xs[:nres]), _rule_view(store.out_tree(), xs[nres:]))
    nargs = len(treedef_children(in_tree))
    if isinstance(cts_in, list) and len(cts_in) == nargs:
      cts_in = tuple(cts_in)
    skeleton = tree_unflatten(in_tree, [object()] * in_tree.num_leaves)
    zero = object()
    try:
      if not isinstance(cts_in, tuple):
        raise ValueError
      leaves, tree = tree_flatten(cts_in, is_leaf=lambda x: x is None)
      # (no unflattening: a pytree type need not take None children)
      flat_cts = [zero if ct is None else ct for ct in tree.broadcast_prefix(leaves, in_tree)]
    except ValueError:
      raise TypeError("Custom VJP bwd rule must produce an output with the same container "
                      "(pytree) structure as the args tuple of the primal function, and in "
                      "particular must produce a tuple of length equal to the number of "
                      "arguments to the primal function, but got bwd output structure "
                      f"{tree_flatten(cts_in)[1]} for primal input structure {in_tree}."
                      ) from None
    paths = [p for p, _ in tree_flatten_with_path(skeleton)[0]]
    out = []
    for kp, a, ct in zip(paths, in_avals, flat_cts):
      ta = a.to_tangent_aval()
      if ct is zero or ta.dtype == dtypes.float0:
        out.append(Zero(ta))
      elif type(ct) is Zero:
        if not _typematch(ta, ct.aval):
          raise ValueError("Custom VJP bwd rule produced a SymbolicZero with a shape/dtype that "
                           "does not match the corresponding input tangent shape/dtype: at "
                           f"output{keystr(kp)} the SymbolicZero had shape/dtype "
                           f"{_ty(ct.aval)} while the corresponding input had shape/dtype "
                           f"{_ty(a)}. Consider just returning a None here instead of a "
                           "SymbolicZero object.")
        out.append(Zero(ta))
      else:
        ca = get_aval(ct)
        if (ca.shape != ta.shape or (ca.dtype != ta.dtype and not dtypes.is_inexact(a.dtype))
            ) and not config.read("disable_bwd_checks"):
          why = [w for w, bad in (("the dtypes do not match", ca.dtype != ta.dtype),
                                  ("the shapes do not match", ca.shape != ta.shape)) if bad]
          raise ValueError("Custom VJP bwd rule must produce an output with the same type as "
                           "the args tuple of the primal function, but at "
                           f"output{keystr(kp)} the bwd rule produced an output of type "
                           f"{_ty(ca)} corresponding to an input of type {_ty(a)}, so "
                           + ", and ".join(why))
        out.append(ct)  # (an inexact input takes a cotangent of another dtype as it is, as JAX's)
    return out
  flat.__name__ = _name(bwd)
  return flat


def _check_for_tracers(x):
  for leaf in tree_flatten(x)[0]:
    if isinstance(leaf, Tracer):
      raise core.UnexpectedTracerError(
          "Found a JAX Tracer object passed as an argument to a custom_vjp function in a "
          "position indicated by nondiff_argnums as non-differentiable. Tracers cannot be "
          "passed as non-differentiable arguments to custom_vjp functions; instead, "
          "nondiff_argnums should only be used for arguments that can't be or contain JAX "
          "tracers, e.g. function-valued arguments. In particular, array-valued arguments "
          "should typically not be indicated as nondiff_argnums.")


class custom_vjp:
  """A function with a custom VJP rule (JAX's ``jax.custom_vjp``), used as a decorator.

  ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` (residuals any pytree) runs on
  the forward pass, ``bwd(residuals, out_ct) -> tuple`` with one cotangent per argument
  (``None`` for zero) on the backward pass; with ``nondiff_argnums`` ``bwd`` takes the
  non-differentiable arguments first and returns cotangents for the others only. Calling
  ``f`` runs the function; forward-mode ``jvp`` of it raises, as in JAX.
  """

  def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
    functools.update_wrapper(self, fun)
    self.fun = fun
    self.nondiff_argnums = _nondiff_argnums(fun, nondiff_argnums, nondiff_argnames)
    self.fwd = self.bwd = None
    self.symbolic_zeros = False
    self.optimize_remat = False
    self._resolve = _Resolver(fun)

  __getattr__ = _forward_attr

  def __get__(self, obj, objtype=None):
    return self if obj is None else functools.partial(self, obj)

  def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
    """Set the forward and backward rules. ``symbolic_zeros=True``: ``fwd`` gets
    ``CustomVJPPrimal(value, perturbed)`` leaves and ``bwd`` may get ``SymbolicZero``
    cotangents."""
    if symbolic_zeros and optimize_remat:
      raise NotImplementedError("remat optimization for custom_vjp does not support symbolic "
                                "zeros")
    self.fwd, self.bwd = fwd, bwd
    self.symbolic_zeros, self.optimize_remat = symbolic_zeros, optimize_remat
    registry.bump_epoch()

  @api_boundary
  def __call__(self, *args, **kwargs):
    name = _name(self.fun)
    if self.fwd is None or self.bwd is None:
      raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
    args = self._resolve(args, kwargs, "custom_vjp", name)
    trace = core._ctx.trace
    nums = self.nondiff_argnums
    if nums:
      for i in nums:
        _check_for_tracers(args[i])
    refs = _check_aliased_refs(self.fun, nums, args)
    if trace is core.eval_trace:
      out = self.fun(*args)
      if refs:
        _check_returned_refs(self.fun, out, "primal", [], 0)
      return out
    if nums:
      fun, dyn = _splice(self.fun, nums, args)
      fwd, _ = _splice(self.fwd, nums, args)
      bwd = functools.partial(self.bwd, *[args[i] for i in nums])
    else:
      fun, fwd, bwd, dyn = self.fun, self.fwd, self.bwd, args
    args_flat, in_tree = tree_flatten(dyn)
    in_avals = [get_aval(x) for x in args_flat]
    store = _Store()
    if refs:  # (mutable array references: JAX's checks of what the functions return)
      fun, fwd = _checking_refs(fun, "primal"), _checking_refs(fwd, "fwd")
    flat_fwd = _flat_fwd(fwd, in_tree, store, self.symbolic_zeros, name, _name(self.fwd))
    flat_bwd = _flat_bwd(bwd, in_tree, in_avals, store, self.fun)
    flat_bwd.__name__ = _name(self.bwd)
    outs = custom_vjp_call_p.bind_with_trace(
        trace, _flat_fun(fun, in_tree, store, name), flat_fwd, flat_bwd, args_flat,
        lambda: (store.out_tree(), store.res), self.symbolic_zeros)
    return tree_unflatten(store.out_tree(), outs)


# ----------------------------------------------------------------------------- primitives


class CustomJVPCallPrimitive(Primitive):
  """``custom_jvp_call``: ``bind_with_trace`` hands function and rule to the trace; ``bind``
  with a staged equation's params (``call_jaxpr``, ``jvp_jaxpr_fun``, ``num_consts``,
  ``symbolic_zeros``) turns them back into a function and a rule first."""
  multiple_results = True

  def bind(self, *args, call_jaxpr, jvp_jaxpr_fun, num_consts, symbolic_zeros):
    fun, jvp = _lift_jvp(call_jaxpr, jvp_jaxpr_fun, num_consts, symbolic_zeros)
    return self.bind_with_trace(core._ctx.trace, fun, jvp, args, symbolic_zeros)

  def bind_with_trace(self, trace, fun, jvp, args, symbolic_zeros):
    with set_current_trace(trace):
      return trace.process_custom_jvp_call(self, fun, jvp, args, symbolic_zeros=symbolic_zeros)


class CustomVJPCallPrimitive(Primitive):
  """``custom_vjp_call``: as ``custom_jvp_call``, with a forward rule, a backward rule and
  ``out_trees()`` (output and residual treedefs, known once a rule ran)."""
  multiple_results = True

  def bind(self, *args, call_jaxpr, fwd_jaxpr_thunk, num_consts, bwd, out_trees,
           symbolic_zeros):
    fun, fwd, bwd = _lift_vjp(call_jaxpr, fwd_jaxpr_thunk, num_consts, bwd, out_trees,
                              symbolic_zeros)
    return self.bind_with_trace(core._ctx.trace, fun, fwd, bwd, args, out_trees,
                                symbolic_zeros)

  def bind_with_trace(self, trace, fun, fwd, bwd, args, out_trees, symbolic_zeros):
    with set_current_trace(trace):
      return trace.process_custom_vjp_call(self, fun, fwd, bwd, args, out_trees,
                                           symbolic_zeros)


custom_jvp_call_p = CustomJVPCallPrimitive("custom_jvp_call")
custom_vjp_call_p = CustomVJPCallPrimitive("custom_vjp_call")
for _p in (custom_jvp_call_p, custom_vjp_call_p):
  _p.family = "call"
  _p.meta["differentiable"] = True  # by its custom rule
  _p.meta["by_trace"] = True  # JVPTrace/BatchTrace.process_custom_*_call, not p.jvp/p.batch
  _p.meta["note"] = ("call primitive: eagerly its function runs primitive by primitive; the "
                     "custom rule applies under jvp/vjp (staged in jaxprs for jit)")


def _lift_jvp(call_jaxpr, jvp_jaxpr_fun, num_consts, symbolic_zeros):
  """A staged ``custom_jvp_call``'s params as ``(fun, jvp)``: the function evaluates
  ``call_jaxpr``; the rule stages the user's rule for the zero pattern of its tangents
  (``jvp_jaxpr_fun``, memoized) and evaluates that. Closed-over constants (the first
  ``num_consts`` inputs) get no tangent, as in JAX."""
  def fun(*xs):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *xs)

  def jvp(*xs):
    n = len(xs) // 2
    primals, tangents = xs[num_consts:n], xs[n + num_consts:]
    jaxpr, consts, out_zeros = jvp_jaxpr_fun(*[type(t) is Zero for t in tangents])
    outs = eval_jaxpr(jaxpr, consts, *primals, *[t for t in tangents if type(t) is not Zero])
    m = len(out_zeros)
    nz = iter(outs[m:])
    return [*outs[:m], *[Zero(get_aval(p).to_tangent_aval()) if z else next(nz)
                         for p, z in zip(outs[:m], out_zeros)]]

  fun.__name__, jvp.__name__ = jvp_jaxpr_fun.fun_name, jvp_jaxpr_fun.__name__
  fun.staged_params = dict(call_jaxpr=call_jaxpr, jvp_jaxpr_fun=jvp_jaxpr_fun,
                           num_consts=num_consts, symbolic_zeros=symbolic_zeros)
  return fun, jvp


def _lift_vjp(call_jaxpr, fwd_jaxpr_thunk, num_consts, bwd, out_trees, symbolic_zeros):
  """A staged ``custom_vjp_call``'s params as ``(fun, fwd, bwd)``. Differentiating with
  respect to a closed-over constant is JAX's ``CustomVJPException``."""
  const_avals = call_jaxpr.in_avals[:num_consts]

  def fun(*xs):
    return eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *xs)

  def fwd(*xs):
    vals, nonzeros = xs[::2], xs[1::2]
    if any(nonzeros[:num_consts]):
      raise CustomVJPException()
    jaxpr, consts = fwd_jaxpr_thunk(*nonzeros[num_consts:])
    return eval_jaxpr(jaxpr, consts, *vals[num_consts:])

  def bwd_(*xs):
    return [*[Zero(a.to_tangent_aval()) for a in const_avals], *bwd(*xs)]

  fun.__name__, fwd.__name__, bwd_.__name__ = (fwd_jaxpr_thunk.fun_name,
                                               fwd_jaxpr_thunk.__name__, _name(bwd))
  fun.staged_params = dict(call_jaxpr=call_jaxpr, fwd_jaxpr_thunk=fwd_jaxpr_thunk,
                           num_consts=num_consts, bwd=bwd, out_trees=out_trees,
                           symbolic_zeros=symbolic_zeros)
  return fun, fwd, bwd_


def _call_abstract_eval(*avals, call_jaxpr, **_):
  return list(call_jaxpr.out_avals)


def _call_lowering(ctx, *args, call_jaxpr, **_):
  from nbjax.interpreters import mlir
  consts = mlir._const_values(call_jaxpr.consts, [v.aval for v in call_jaxpr.jaxpr.constvars])
  return mlir.jaxpr_subcomp(ctx.module_context, call_jaxpr.jaxpr, consts, list(args))


def _custom_jvp_call_transpose(cts, *args, call_jaxpr, **_):
  """A ``custom_jvp_call`` left in a linear jaxpr is transposed through its function."""
  return ad.backward_pass(call_jaxpr.jaxpr, call_jaxpr.consts, args, cts)


def _pp_jvp_params(params):
  p = dict(name=params["jvp_jaxpr_fun"].fun_name, call_jaxpr=params["call_jaxpr"],
           jvp=params["jvp_jaxpr_fun"].__name__, symbolic_zeros=params["symbolic_zeros"])
  if params["num_consts"]:
    p["num_consts"] = params["num_consts"]
  return p


def _pp_vjp_params(params):
  p = dict(name=params["fwd_jaxpr_thunk"].fun_name, call_jaxpr=params["call_jaxpr"],
           fwd=params["fwd_jaxpr_thunk"].__name__, bwd=_name(params["bwd"]),
           symbolic_zeros=params["symbolic_zeros"])
  if params["num_consts"]:
    p["num_consts"] = params["num_consts"]
  return p


for _p, _pp in ((custom_jvp_call_p, _pp_jvp_params), (custom_vjp_call_p, _pp_vjp_params)):
  _p.def_abstract_eval(_call_abstract_eval)
  _p.pp_params = _pp
  _p.inline_call = True  # eager replay (registry.eager_program) may inline call_jaxpr
  lowering.register(_p, _call_lowering)
custom_jvp_call_p.transpose = _custom_jvp_call_transpose


def _memo(f, like):
  """``f`` memoized on its (hashable) arguments, named for printing as the thunk ``like``."""
  cache = {}

  def thunk(*pattern):
    r = cache.get(pattern)
    if r is None:
      r = cache[pattern] = f(*pattern)
    return r
  thunk.__name__, thunk.fun_name = like.__name__, like.fun_name
  return thunk


def _dce_custom_call(used_outs, eqn, prune_rules):
  """JAX's ``dce_jaxpr_custom_jvp_rule``/``dce_jaxpr_custom_vjp_rule``: unused outputs leave
  the call, its ``call_jaxpr`` and (``prune_rules(params)``) its rules; inputs stay."""
  if not any(used_outs) and not eqn.effects:
    return [False] * len(eqn.invars), None
  if all(used_outs):
    return [True] * len(eqn.invars), eqn
  p = eqn.params
  cj = p["call_jaxpr"]
  call = ClosedJaxpr(pe.dce_jaxpr(cj.jaxpr, used_outs, True)[0], cj.consts)
  return [True] * len(eqn.invars), eqn.replace(
      outvars=[v for v, u in zip(eqn.outvars, used_outs) if u],
      params=dict(p, call_jaxpr=call, **prune_rules(p)))


def _dce_custom_jvp_call(used_outs, eqn):
  def prune(p):
    fun = p["jvp_jaxpr_fun"]

    def thunk(*in_zeros):
      jaxpr, consts, out_zeros = fun(*in_zeros)
      used = [*used_outs, *(u for u, z in zip(used_outs, out_zeros) if not z)]
      return (pe.dce_jaxpr(jaxpr, used, True)[0], consts,
              [z for z, u in zip(out_zeros, used_outs) if u])
    return dict(jvp_jaxpr_fun=_memo(thunk, fun))
  return _dce_custom_call(used_outs, eqn, prune)


def _dce_custom_vjp_call(used_outs, eqn):
  out_avals = eqn.params["call_jaxpr"].out_avals

  def prune(p):
    fwd, bwd, out_trees = p["fwd_jaxpr_thunk"], p["bwd"], p["out_trees"]

    def thunk(*nonzeros):
      jaxpr, consts = fwd(*nonzeros)
      num_res = out_trees()[1].num_leaves
      return pe.dce_jaxpr(jaxpr, [True] * num_res + list(used_outs), True)[0], consts

    def dce_bwd(*args):
      num_res = out_trees()[1].num_leaves
      cts = iter(args[num_res:])
      full = [next(cts) if u else Zero(a.to_tangent_aval()) if p["symbolic_zeros"]
              else zeros_like_aval(a.to_tangent_aval()) for a, u in zip(out_avals, used_outs)]
      return bwd(*args[:num_res], *full)
    dce_bwd.__name__ = _name(bwd)
    return dict(fwd_jaxpr_thunk=_memo(thunk, fwd), bwd=dce_bwd)
  return _dce_custom_call(used_outs, eqn, prune)


pe.dce_rules[custom_jvp_call_p] = _dce_custom_jvp_call
pe.dce_rules[custom_vjp_call_p] = _dce_custom_vjp_call

# ----------------------------------------------------------------------------- closure_convert


def _maybe_perturbed(x):
  """False when ``x`` certainly carries no tangent (conservative otherwise)."""
  if not isinstance(x, Tracer):
    return False
  if isinstance(x, ad.JVPTracer):
    return True
  if isinstance(x, batching.BatchTracer):
    return _maybe_perturbed(x.val)
  if isinstance(x, pe.JaxprTracer):
    return x.aval.to_tangent_aval().dtype != dtypes.float0
  return True


def closure_convert(fun, *example_args):
  """Closure conversion for higher-order custom derivatives (JAX's ``closure_convert``).

  Stages ``fun`` on the types of ``example_args``; returns ``(converted, consts)`` where
  ``converted(*args, *consts)`` computes ``fun(*args)`` and ``consts`` are the values
  ``fun`` closes over that may be differentiated (tracers of enclosing transformations),
  hoisted to explicit arguments so custom rules can see them. Other closed-over values
  stay inside ``converted``.
  """
  flat, in_tree = tree_flatten((example_args, {}))
  box = []

  def flat_fun(*xs):
    args, kwargs = tree_unflatten(in_tree, xs)
    out, tree = tree_flatten(fun(*args, **kwargs))
    box.append(tree)
    return out

  flat_fun.__name__ = _name(fun)
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, [get_aval(x) for x in flat])
  out_tree = box[0]
  hoist = [_maybe_perturbed(c) for c in consts]
  kept = [c for c, h in zip(consts, hoist) if not h]
  hoisted = [c for c, h in zip(consts, hoist) if h]

  def converted_fun(*args_hconsts):
    n = len(args_hconsts) - len(hoisted)
    args, hc = args_hconsts[:n], iter(args_hconsts[n:])
    k = iter(kept)
    cs = [next(hc) if h else next(k) for h in hoist]
    all_args, tree2 = tree_flatten((tuple(args), {}))
    if tree2 != in_tree:
      raise TypeError("The inputs to the closure produced by closure_convert must have the "
                      "same Pytree structure as the example arguments passed when "
                      f"closure_convert was called. Expected {in_tree}, but got {tree2}")
    return tree_unflatten(out_tree, eval_jaxpr(jaxpr, cs, *all_args))

  return converted_fun, hoisted


def custom_gradient(fun):
  """A function with its gradient rule in its return value (JAX's ``jax.custom_gradient``):
  ``fun(*args) -> (out, vjp)`` with ``vjp(out_ct)`` returning the argument cotangents (one
  value or a tuple). The result is a ``custom_vjp`` function returning ``out``.

  >>> @custom_gradient
  ... def f(x):
  ...   return x ** 2, lambda g: g * x
  """
  @custom_vjp
  def wrapped_fun(*args, **kwargs):
    return fun(*args, **kwargs)[0]

  def fwd(*args, **kwargs):
    ans, rule = fun(*args, **kwargs)
    converted, consts = closure_convert(rule, ans)  # the rule's closure as residuals
    return ans, (tuple(consts), _Static(converted))

  def bwd(res, ct):
    consts, converted = res
    out = converted.value(ct, *consts)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
  wrapped_fun.defvjp(fwd, bwd)
  return wrapped_fun


class _Static:
  """A residual leaf-less pytree node carrying a Python value (the converted rule)."""
  __slots__ = ("value",)

  def __init__(self, value):
    self.value = value


register_pytree_node(_Static, lambda s: ((), s.value), lambda v, _: _Static(v))
