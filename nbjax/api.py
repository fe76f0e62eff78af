"""User-facing transformations: ``jvp``, ``jacfwd``, ``vmap``, ``make_jaxpr``, ``eval_shape``.

Pipeline position: the top of nbjax. Each transformation flattens its pytree arguments
(``tree_util``), makes a new trace the current one (``ad.JVPTrace``, ``batching.BatchTrace``,
``partial_eval.DynamicJaxprTrace``) with the trace that was current as its parent, runs the
flattened function on tracers, and unpacks the outputs. Outputs that are not this trace's
tracers (constants, tracers of enclosing transformations) get zero tangents / are unmapped,
and are instantiated (zeros) or broadcast (``out_axes``) on the parent trace. Because every
trace binds onto its parent, the transformations compose to any depth, in any order.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import operator
import types
import warnings
import weakref

import numpy as np

from nbjax import core, dtypes, eager_cache, xla as _xla, _tree_util as tree_util
from nbjax.config import config
from nbjax.traceback_util import api_boundary
from nbjax.array import Array as _Array, owned as _owned
from nbjax.core import ShapeDtypeStruct, Tracer, get_aval
from nbjax.core import _ctx, eval_trace as _eval_trace
from nbjax.eager_cache import MISS as _MISS
from nbjax.interpreters import ad, batching, pxla, tape
from nbjax.interpreters.pjit import jit  # noqa: F401  (JAX's ``api.jit``, defined in pjit here)
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import ClosedJaxpr
from nbjax._tree_util import (Partial, keystr, tree_flatten, tree_flatten_with_path,
                             tree_leaves, tree_map, tree_structure, tree_transpose,
                             tree_unflatten)

__all__ = ["jvp", "jacfwd", "linearize", "vjp", "grad", "value_and_grad", "jacrev", "jacobian",
           "hessian", "linear_transpose", "vmap", "make_jaxpr", "eval_shape", "ShapeDtypeStruct"]

# --------------------------------------------------------------------- helpers


def _tangent_out(x):
  """A tangent/cotangent returned to the user: ``float0`` ones as NumPy arrays, as JAX's
  (they carry no data and support no operations; NumPy's ``==`` still compares them)."""
  x = _owned(x)
  if type(x) is _Array and x._value.dtype == dtypes.float0:
    return np.zeros(x._value.shape, dtypes.float0)
  return x


def _check_callable(fun):
  if not callable(fun):
    raise TypeError(f"Expected a callable value, got {fun}")
  if inspect.isgeneratorfunction(fun):
    raise TypeError(f"Expected a function, got a generator function: {fun}")


def _fun_name(fun):
  while isinstance(fun, functools.partial):
    fun = fun.func
  return getattr(fun, "__name__", type(fun).__name__)


def _flatten_fun(fun, in_tree):
  """``fun`` on the flat leaves of ``(args, kwargs)`` returning flat outputs; ``store()[0]``
  is the output treedef once it ran."""
  box = []

  def flat_fun(*args_flat):
    args, kwargs = tree_unflatten(in_tree, args_flat)
    out, out_tree = tree_flatten(fun(*args, **kwargs))
    box[:] = [out_tree]
    return out

  flat_fun.__name__ = _fun_name(fun)
  return flat_fun, lambda: box


def _dtype(x, what=None):
  """The (canonical) dtype of an operand (JAX's ``typeof`` error for other values)."""
  if type(x) is _Array:
    return x._value.dtype
  return get_aval(x).dtype


def _tangent_dtype(d):
  return d if dtypes.is_inexact(d) else dtypes.float0


def _check_valid(x, what=None):
  """JAX's ``dispatch.check_arg`` (grad, vjp, linearize arguments)."""
  if not (isinstance(x, Tracer) or core.valid_jaxtype(x)) or getattr(x, "dtype", None) == object:
    raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type.")


# argument types vmap's fast path takes as leaves without flattening
_LEAF_TYPES = frozenset({_Array, np.ndarray, float, int, complex, bool, np.float64, np.float32})


_abstractify = core.abstractify

# --------------------------------------------------------------------- jvp


@api_boundary
def jvp(fun, primals, tangents, has_aux=False):
  """Jacobian-vector product of ``fun`` at ``primals`` along ``tangents`` (forward mode).

  ``primals`` and ``tangents`` are tuples/lists of pytrees of the same structure, shapes
  and dtypes (``float0`` tangents for integer/boolean primals). Returns
  ``(primals_out, tangents_out)``, or ``(primals_out, tangents_out, aux)`` with ``has_aux``.

  >>> y, y_dot = jvp(nbjax.numpy.sin, (0.1,), (0.2,))
  """
  _check_callable(fun)
  if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
    raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; "
                    f"found {type(primals).__name__} and {type(tangents).__name__}.")
  if _ctx.trace is _eval_trace:  # top level: replay a staged trace when safe
    cache = eager_cache.for_function(fun, ("jvp", has_aux), lambda: eager_cache.TraceCache(
        lambda p, t: _jvp(fun, p, t, has_aux=has_aux), fun))
    if cache is not None and cache.enabled:
      out = cache.call((tuple(primals), tuple(tangents)), {})
      if out is not _MISS:
        return out
  return _jvp(fun, primals, tangents, has_aux=has_aux)


_key_cls = []


def _is_key(x):
  if not _key_cls:
    from nbjax.prng import PRNGKeyArray
    _key_cls.append(PRNGKeyArray)
  return isinstance(x, _key_cls[0])


def _key_tangents(primals, tangents):
  """JAX's float0 tangent of a key array (shape ``key.shape``) as a key-shaped tree over the
  key's data, so that it lines up with the flattened primal (keys are pytree nodes)."""
  from nbjax.prng import PRNGKeyArray

  def fix(p, t):
    if isinstance(p, PRNGKeyArray) and not isinstance(t, PRNGKeyArray):
      if _dtype(t, "tangent argument") != dtypes.float0 or np.shape(t) != p.shape:
        raise TypeError(f"primal and tangent arguments to jax.jvp do not match; the tangent "
                        f"of a key array of dtype {p.dtype} and shape {p.shape} must be a "
                        f"float0 array of that shape, got "
                        f"{dtypes.short_dtype_name(_dtype(t, 'tangent'))}{list(np.shape(t))}")
      return PRNGKeyArray(p._impl, np.zeros(p.shape, dtypes.float0))
    return t
  try:
    return type(tangents)(tree_map(fix, tuple(primals), tuple(tangents), is_leaf=_is_key))
  except (ValueError, TypeError) as e:
    if "key array" in str(e):
      raise
    return tangents


def _keys_to_float0(g):
  """The gradient of a key array input (``allow_int``): float0 zeros of the key's shape."""
  return tree_map(lambda x: np.zeros(x.shape, dtypes.float0) if _is_key(x) else x, g,
                  is_leaf=_is_key)


def _float0_to_keys(tree, avals, ct):
  """A cotangent for key array outputs (structure ``tree``): each key's float0 cotangent of
  its shape as a key-shaped node over float0 data, lining up with the flattened output."""
  from nbjax.prng import PRNGKeyArray

  def fix(p, c):
    if not _is_key(p) or _is_key(c):
      return c
    if _dtype(c, "cotangent") != dtypes.float0 or np.shape(c) != p.shape:
      raise ValueError("unexpected JAX type (e.g. shape/dtype) for argument to vjp function: "
                       f"the cotangent of a key array output must be float0 of its shape, got "
                       f"{dtypes.short_dtype_name(_dtype(c))}{list(np.shape(c))}")
    return PRNGKeyArray(p._impl, np.zeros(p.shape, dtypes.float0))
  proxy = tree_unflatten(tree, [core.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
  return tree_map(fix, proxy, ct, is_leaf=_is_key)


def _jvp(fun, primals, tangents, has_aux=False):
  if any(_is_key(p) for p in tree_leaves(primals, is_leaf=_is_key)):
    tangents = _key_tangents(primals, tangents)
  ps_flat, tree = tree_flatten(primals)
  ts_flat, tree2 = tree_flatten(tangents)
  if tree != tree2:
    raise TypeError("primal and tangent arguments to jax.jvp must have the same tree "
                    f"structure; primals have tree structure {tree} whereas tangents have "
                    f"tree structure {tree2}.")
  for p, t in zip(ps_flat, ts_flat):
    pd, td = _dtype(p, "primal argument"), _dtype(t, "tangent argument")
    if _tangent_dtype(pd) != td:
      raise TypeError("primal and tangent arguments to jax.jvp do not match; dtypes must be "
                      "equal, or in case of int/bool primal dtype the tangent dtype must be "
                      f"float0.Got primal dtype {pd} and so expected tangent dtype "
                      f"{_tangent_dtype(pd)}, but got tangent dtype {td} instead.")
    if np.shape(p) != np.shape(t):
      raise ValueError("jvp called with different primal and tangent shapes;Got primal "
                       f"shape {np.shape(p)} and tangent shape as {np.shape(t)}")
  box = []

  def flat_fun(*xs):
    ans = fun(*tree_unflatten(tree, xs))
    if has_aux:
      if not (isinstance(ans, (tuple, list)) and len(ans) == 2):
        raise TypeError("has_aux=True requires the function to return a pair (output, aux), "
                        f"got {type(ans).__name__}")
      ans, aux = ans
      aux_flat, aux_tree = tree_flatten(aux)
    out, out_tree = tree_flatten(ans)
    box.append(out_tree)
    if has_aux:
      box.extend([aux_tree, len(out)])
      return [*out, *aux_flat]
    return out

  flat_fun.__name__ = getattr(fun, "__name__", "fun")
  trace, outs = _jvp_run(flat_fun, ps_flat, ts_flat)
  if has_aux:
    out_tree, aux_tree, n = box
    outs, aux = outs[:n], outs[n:]
    aux = [trace.to_primal_tangent_pair(a)[0] for a in aux]
  else:
    out_tree, = box
  outs_p, outs_t = _jvp_outs(trace, outs, True)
  # an input passed through (f = identity, or a rule returning its tangent) is the caller's
  # NumPy array: hand back an Array of its own instead (JAX returns the caller's object)
  outs_p, outs_t = [_owned(x) for x in outs_p], [_tangent_out(x) for x in outs_t]
  outs_t = tree_unflatten(out_tree, outs_t)
  if tree_util.has_opaque(out_tree):  # a key array output's tangent: float0[shape]
    outs_t = _keys_to_float0(outs_t)
  if has_aux:
    return (tree_unflatten(out_tree, outs_p), outs_t,
            tree_unflatten(aux_tree, [_owned(x) for x in aux]))
  return tree_unflatten(out_tree, outs_p), outs_t


def jvp_flat(fun, primals, tangents, *, instantiate=True):
  """jvp of a flat function: ``(primals_out, tangents_out)`` lists.

  Input tangents may be ``ad.Zero``; output tangents are instantiated (zeros; ``float0`` for
  integer/boolean outputs) unless ``instantiate=False``, which leaves symbolic ``Zero``s.
  """
  trace, outs = _jvp_run(fun, primals, tangents)
  return _jvp_outs(trace, outs, instantiate)


def _jvp_run(fun, primals, tangents):
  trace = ad.JVPTrace(core.get_current_trace(), core.new_trace_tag())
  tracers = []
  for p, t in zip(primals, tangents):
    if type(t) is ad.Zero or _dtype(t) == dtypes.float0:
      tracers.append(p)  # a constant for this trace: its tangent is a symbolic zero
    else:
      tracers.append(ad.JVPTracer(trace, p, t))
  with core.set_current_trace(trace):
    outs = fun(*tracers)
  return trace, outs


def _jvp_outs(trace, outs, instantiate):
  outs_p, outs_t = [], []
  for o in outs:
    p, t = trace.to_primal_tangent_pair(o)
    if type(t) is ad.Zero:
      _dtype(p, "jvp function output")  # validates the type
      if instantiate:
        t = ad.instantiate_zeros(t)
    elif not dtypes.is_inexact(_dtype(p)):
      t = ad.Zero(get_aval(p).to_tangent_aval())
      if instantiate:
        t = ad.instantiate_zeros(t)
    outs_p.append(p)
    outs_t.append(t)
  return outs_p, outs_t


def _ensure_index(x):
  x = core.concrete_or_error(None, x, "expected a static index or sequence of indices.")
  try:
    return operator.index(x)
  except TypeError:
    return tuple(map(operator.index, x))


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
  """Jacobian of ``fun`` by forward mode: ``vmap`` of ``jvp`` over the standard basis.

  The result has, for each output leaf, the output's shape followed by each input leaf's
  shape (a pytree over ``argnums`` when it is a tuple). ``has_aux``: ``fun`` returns
  ``(out, aux)`` and the Jacobian function returns ``(jac, aux)``.
  """
  _check_callable(fun)
  argnums = _ensure_index(argnums)

  @api_boundary
  @functools.wraps(fun)
  def jacfun(*args, **kwargs):
    if _ctx.trace is _eval_trace and cache.enabled:  # top level: replay a staged trace
      out = cache.call(args, kwargs)
      if out is not _MISS:
        return out
    return call(*args, **kwargs)

  def call(*args, **kwargs):
    f_partial, dyn_args = _dyn_partial(fun, argnums, args, kwargs)
    tree_map(functools.partial(_check_input_dtype_jacfwd, holomorphic), dyn_args)
    pushfwd = functools.partial(_jvp, f_partial, dyn_args, has_aux=has_aux)
    basis = _std_basis(dyn_args)
    if has_aux:
      y, jac, aux = vmap(pushfwd, out_axes=(None, -1, None))(basis)
    else:
      y, jac = vmap(pushfwd, out_axes=(None, -1))(basis)
      aux = None
    if holomorphic:
      tree_map(_check_output_dtype_holomorphic, y)
    example = dyn_args[0] if isinstance(argnums, int) else dyn_args
    jac_tree = tree_map(lambda y_leaf, arr: _unravel(example, -1, y_leaf, arr), y, jac)
    return (jac_tree, aux) if has_aux else jac_tree

  cache = eager_cache.TraceCache(call, fun)
  jacfun._trace_cache = cache
  return jacfun


def _check_input_dtype_jacfwd(holomorphic, x):
  _check_valid(x, "jacfwd argument")
  d = _dtype(x)
  if holomorphic:
    if not dtypes.is_complex(d):
      raise TypeError("jacfwd with holomorphic=True requires inputs with complex dtype, "
                      f"but got {d.name}.")
  elif not dtypes.is_float(d):
    raise TypeError("jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                    f"np.floating), but got {d.name}. For holomorphic differentiation, pass "
                    "holomorphic=True. For differentiation of non-holomorphic functions "
                    "involving complex inputs or integer inputs, use nbjax.jvp directly.")


def _check_output_dtype_holomorphic(x):
  d = _dtype(x)
  if not dtypes.is_complex(d):
    raise TypeError("jacfwd with holomorphic=True requires outputs with complex dtype, "
                    f"but got {d.name}.")


def _std_basis(pytree):
  """The identity, split into the pytree's leaves: leaf i gets shape ``(N, *leaf.shape)``."""
  leaves, tree = tree_flatten(pytree)
  avals = [get_aval(x) for x in leaves]
  n = sum(a.size for a in avals)
  eye = np.eye(n, dtype=dtypes.result_type(*leaves))
  parts, off = [], 0
  for a in avals:
    block = eye[:, off:off + a.size].reshape((n, *a.shape)).astype(a.dtype)
    parts.append(_Array(block, a.weak_type))
    off += a.size
  return tree_unflatten(tree, parts)


def _possible_downcast(x, example_aval):
  """``x`` cast to the example's dtype and weak type (the real part if ``x`` is complex and
  the example is not)."""
  from nbjax import lax
  from nbjax.lax import elementwise
  a = get_aval(x)
  if example_aval.dtype == dtypes.float0:  # the cotangent of an integer input (allow_int)
    return x if a.dtype == dtypes.float0 else ad.zeros_like_aval(example_aval)
  if a.dtype == dtypes.float0:  # jacfwd's tangent of an integer output, jacrev's of an input
    return lax.full(a.shape, 0, example_aval.dtype)
  if dtypes.is_complex(a.dtype) and not dtypes.is_complex(example_aval.dtype):
    x = lax.real(x)
    a = get_aval(x)
  if a.dtype != example_aval.dtype or a.weak_type != example_aval.weak_type:
    x = elementwise._convert_element_type(x, example_aval.dtype, example_aval.weak_type)
  return x

# --------------------------------------------------------------------- reverse mode


@api_boundary
def linearize(fun, *primals, has_aux=False):
  """``fun``'s value at ``primals`` and its linearization there (jvp + partial evaluation).

  Returns ``(primals_out, f_jvp)`` (``(primals_out, f_jvp, aux)`` with ``has_aux``):
  ``f_jvp(*tangents)`` evaluates the Jacobian-vector product without redoing the primal
  work, which ran once, eagerly, here.

  >>> y, f_jvp = linearize(nbjax.numpy.sin, 1.0)
  >>> f_jvp(2.0)   # 2 * cos(1.0)
  """
  _check_callable(fun)
  out_primals, lin, in_tree, out_tree, aux, _ = _linearize(fun, primals, has_aux, "linearize")
  consts, lin.consts = lin.consts, None  # held by the Partial only (they may be tracers)
  f_jvp = Partial(_JvpFun(lin, in_tree, out_tree, [get_aval(p) for p in tree_leaves(primals)]),
                  consts)
  out = tree_unflatten(out_tree, out_primals)
  return (out, f_jvp, aux) if has_aux else (out, f_jvp)


class _JvpFun:
  """The static half of ``linearize``'s JVP function (the residuals are the ``Partial``'s
  leaves, so it can be passed through ``jit``)."""
  __slots__ = ("lin", "in_tree", "out_tree", "primal_avals")

  def __init__(self, lin, in_tree, out_tree, primal_avals):
    self.lin, self.in_tree, self.out_tree, self.primal_avals = lin, in_tree, out_tree, primal_avals

  def __call__(self, consts, *tangents):
    ts, tree = tree_flatten(tangents)
    if tree != self.in_tree:
      raise TypeError(f"expected {self.in_tree}, got {tree}")
    lin = self.lin
    for t, a, pa in zip(ts, lin.in_avals, self.primal_avals):
      ta = get_aval(t)
      if ta.shape != a.shape or ta.dtype != a.dtype:
        s = lambda v: ("~" if v.weak_type else "") + v.str_short(False)
        raise ValueError("linearized function called on tangent values inconsistent with "
                         f"the original primal values:\nGot tangent aval {s(ta)} for primal "
                         f"aval {s(pa)} but expected {s(a)}.")
    return tree_unflatten(self.out_tree, [_tangent_out(t) for t in lin.jvp(ts, consts)])

  @property
  def args(self):
    """``(jaxpr, primal avals, output tangent avals, output nonzero flags)``: the linear
    jaxpr first, as JAX's ``partial(_lift_linearized, jaxpr, ...)``."""
    return self.lin.jaxpr, self.primal_avals, self.lin.out_avals, self.lin.out_nz

  def __eq__(self, other):
    return self is other

  def __hash__(self):
    return id(self)


def _linearize(fun, primals, has_aux, name, array_consts=False):
  """Flatten, check, linearize: ``(out_primals_flat, Linearized, in_tree, out_tree, aux)``."""
  ps, in_tree = tree_flatten(primals)
  for i, p in enumerate(ps):
    _check_valid(p, f"{name} argument")
    if type(p) in (float, int, complex, bool):  # its value now, in this x64 mode (as JAX's:
      ps[i] = _Array._new(np.asarray(p, dtypes.dtype(p)), type(p) is not bool)  # no widening)
  box = []

  def flat_fun(*xs):
    ans = fun(*tree_unflatten(in_tree, xs))
    if has_aux:
      if not (isinstance(ans, (tuple, list)) and len(ans) == 2):
        raise TypeError("expected function with aux output to return a two-element tuple, "
                        f"but got type {type(ans)} with value {ans!r}")
      ans, aux = ans
      box.append(aux)
    out, out_tree = tree_flatten(ans)
    box.insert(0, out_tree)
    return out

  flat_fun.__name__ = _fun_name(fun)
  outs, lin = ad.linearize_flat(flat_fun, ps, array_consts=array_consts)
  outs = [_owned(o) for o in outs]  # (an input passed through: the caller's array)
  aux = None
  if has_aux:
    aux = tree_map(lambda x: _owned(x.primal if isinstance(x, ad.JVPTracer) else x), box[1])
    core.check_leaked([a for a in tree_leaves(aux)  # (an enclosing jit's tracers are fine)
                       if isinstance(a, pe.JaxprTracer) and not a._trace.valid])
  return outs, lin, in_tree, box[0], aux, ps


@api_boundary
def vjp(fun, *primals, has_aux=False, reduce_axes=()):
  """Vector-Jacobian product of ``fun`` at ``primals`` (reverse mode).

  Returns ``(primals_out, f_vjp)`` (``(primals_out, f_vjp, aux)`` with ``has_aux``), where
  ``f_vjp(ct)`` takes a cotangent with the structure, shapes and dtypes of ``primals_out``
  and returns a tuple with one cotangent per primal. ``f_vjp`` is a ``VJP``: a pytree holding
  the residuals (so it can be passed through ``jit``), the primal inputs among them in
  ``args_res`` (one entry per primal; ``NotNeeded()`` where an input is not read) and the
  others in ``opaque_residuals``; ``f_vjp.with_refs(*wants)`` gives the VJP function that
  computes only the cotangents wanted (``jax.ad.DontWant()`` gives ``DidntWant()``).

  >>> y, f_vjp = vjp(nbjax.numpy.sin, 0.5)
  >>> f_vjp(1.0)   # (cos(0.5),)
  """
  if reduce_axes:
    raise NotImplementedError("reduce_axes argument to vjp is deprecated")
  _check_callable(fun)
  out_primals, lin, in_tree, out_tree, aux, ps = _linearize(fun, primals, has_aux, "vjp", True)
  consts, lin.consts = lin.consts, None  # held by the VJP only (they may be tracers)
  pos = {}  # (JAX's: an input passed twice is read at both places; a Python scalar input's
  for i, p in enumerate(ps):  # residual is opaque)
    if type(p) not in _PY_SCALARS:
      pos.setdefault(id(p), []).append(i)
  spec, used, opaque = [], set(), []  # spec: a primal's flat index, or ~(an opaque index)
  for r in consts:
    at = pos.get(id(r))
    if at is None:
      spec.append(~len(opaque))
      opaque.append(r)
    else:
      spec.append(at[0])
      used.update(at)
  leaves = iter([p if i in used else NotNeeded() for i, p in enumerate(ps)])
  f_vjp = VJP(_VjpFun(lin, in_tree, out_tree, _fun_name(fun), tuple(spec)), in_tree, out_tree,
              [_tuptree(t, leaves) for t in in_tree.children()], opaque)
  out = tree_unflatten(out_tree, out_primals)
  return (out, f_vjp, aux) if has_aux else (out, f_vjp)


_PY_SCALARS = (bool, int, float, complex)


def _tuptree(treedef, leaves):
  """The next leaves of ``leaves`` in ``treedef``'s shape with every node a tuple."""
  if tree_util.treedef_is_leaf(treedef) and treedef.num_leaves == 1:
    return next(leaves)
  return tuple(_tuptree(t, leaves) for t in treedef.children())


_VJP_TOO_MANY_ARGS = (
    "The function returned by `jax.vjp` applied to {} was called with {} arguments, but it "
    "takes exactly one: the cotangent of the differentiated function's single output, with "
    "that output's structure (a tuple output takes one tuple cotangent: `f_vjp((ct1, ct2))`, "
    "not `f_vjp(ct1, ct2)`).")


class _VjpFun:
  """The static half of a VJP function: the linear jaxpr, the trees, and where each residual
  comes from (``spec``); the residuals are the leaves of the ``VJP`` that holds it."""
  __slots__ = ("lin", "in_tree", "out_tree", "keys", "name", "spec")

  def __init__(self, lin, in_tree, out_tree, name="function", spec=None):
    self.lin, self.in_tree, self.out_tree, self.name = lin, in_tree, out_tree, name
    self.keys = tree_util.has_opaque(in_tree)  # key array inputs: float0 cotangents
    self.spec = spec

  def residuals(self, args_res, opaque):
    leaves = tree_leaves(args_res, is_leaf=lambda x: type(x) is NotNeeded)
    return [leaves[i] if i >= 0 else opaque[~i] for i in self.spec]

  def __call__(self, consts, *args, wanted=None):
    if len(args) != 1:
      raise TypeError(_VJP_TOO_MANY_ARGS.format(self.name, len(args)))
    ct, lin = args[0], self.lin
    if tree_util.has_opaque(self.out_tree):
      ct = _float0_to_keys(self.out_tree, lin.out_avals, ct)
    cts, tree = tree_flatten(ct)
    if tree != self.out_tree:
      raise ValueError(
          "unexpected tree structure.\n\nThe argument to a VJP function returned by "
          "`jax.vjp` must match the pytree\nstructure of the differentiated function.\n\n"
          "But the tree structures differ:\n" + "\n".join(
              f"  * out{keystr(p)} was a {t1} in the original output, but a {t2} here, so {why}."
              for p, t1, t2, why in tree_util.tree_diffs(self.out_tree, tree)))
    for c, a, nz in zip(cts, lin.out_avals, lin.out_nz):
      ca = get_aval(c)
      want = a if a.dtype != dtypes.float0 else None
      if want is not None and (ca.shape != want.shape or ca.dtype != want.dtype):
        raise ValueError(
            "unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
            f"{ca.str_short(False)}, but expected {want.str_short(False)} because the "
            "corresponding output of the differentiated function had JAX type "
            f"{want.str_short(False)}")
    outs = [_tangent_out(ad.instantiate_zeros(c)) if w is None or w else DidntWant()
            for c, w in zip(lin.vjp(cts, consts, wanted), wanted or [None] * len(lin.in_avals))]
    outs = tuple(tree_unflatten(self.in_tree, outs))
    return _keys_to_float0(outs) if self.keys else outs

  def __eq__(self, other):
    return self is other

  def __hash__(self):
    return id(self)


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class NotNeeded:
  """Stands in ``VJP.args_res`` for a primal input the backward pass does not read."""


@dataclasses.dataclass(frozen=True, slots=True)
class GradValue:
  """``VJP.with_refs``: compute this input's cotangent (the default)."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class GradRef:
  """What ``VJP.with_refs`` returns for an input whose cotangent it accumulated into the
  mutable array reference given for it."""


@dataclasses.dataclass(frozen=True, slots=True)
class DontWant:
  """``VJP.with_refs``: do not compute this input's cotangent (it comes back ``DidntWant()``)."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class DidntWant:
  """The cotangent of an input marked ``DontWant()`` in ``VJP.with_refs``."""


class VJP:
  """The VJP function ``vjp`` returns: ``f_vjp(ct)`` gives the input cotangents.

  ``args_res`` holds the primal inputs the backward pass reads (one entry per primal,
  containers as tuples, ``NotNeeded()`` for leaves not read; they may be replaced before a
  call), ``opaque_residuals`` the other residuals. A pytree of those two."""
  __slots__ = ("fun", "in_tree", "out_tree", "args_res", "opaque_residuals", "__weakref__")

  def __init__(self, fun, in_tree, out_tree, args_res, opaque_residuals):
    self.fun, self.in_tree, self.out_tree = fun, in_tree, out_tree
    self.args_res, self.opaque_residuals = args_res, opaque_residuals

  jaxpr = property(lambda self: self.fun.lin.jaxpr,
                   doc="The linear jaxpr the backward pass transposes (residuals as consts).")

  def __call__(self, out_ct, *extra_args):
    if extra_args:
      raise TypeError(_VJP_TOO_MANY_ARGS.format(self.fun.name, len(extra_args) + 1))
    return self.fun(self.fun.residuals(self.args_res, self.opaque_residuals), out_ct)

  def with_refs(self, *maybe_ct_refs):
    """The VJP function computing only the cotangents wanted: ``maybe_ct_refs`` has the
    structure of the primals, a leaf ``DontWant()`` where that input's cotangent is not
    wanted (it comes back ``DidntWant()``), anything else (``GradValue()``) where it is."""
    wants, tree = tree_flatten(maybe_ct_refs)
    if tree != self.in_tree:
      raise ValueError(f"VJP.with_refs takes the structure of the primals, {self.in_tree}, "
                       f"but got {tree}")
    f = Partial(functools.partial(self.fun, wanted=[type(w) is not DontWant for w in wants]),
                self.fun.residuals(self.args_res, self.opaque_residuals))
    if not any(isinstance(w, core.Ref) for w in wants):
      return f

    def accumulate(out_ct):  # a mutable array reference leaf: its cotangent added into it
      from nbjax.state import ref_addupdate
      cts, ct_tree = tree_flatten(f(out_ct))
      for i, (w, ct) in enumerate(zip(wants, cts)):
        if isinstance(w, core.Ref):
          ref_addupdate(w, ..., ct)
          cts[i] = GradRef()  # (JAX's: the cotangent went into the ref)
      return tree_unflatten(ct_tree, cts)
    return accumulate


tree_util.register_pytree_node(
    VJP, lambda v: ((v.args_res, v.opaque_residuals), (v.fun, v.in_tree, v.out_tree)),
    lambda meta, res: VJP(*meta, *res))


def _check_input_dtype_revderiv(name, holomorphic, allow_int, x):
  if _is_key(x):
    if not allow_int:
      raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype that is a "
                      f"sub-dtype of np.inexact), but got {x.dtype}. If you want to use "
                      "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")
    return
  _check_valid(x, f"{name} argument")
  d = _dtype(x)
  if holomorphic and not dtypes.is_complex(d):
    raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, "
                    f"but got {d.name}.")
  if dtypes.is_int(d) or d == np.bool_:
    if not allow_int:
      raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype that is a "
                      f"sub-dtype of np.inexact), but got {d.name}. If you want to use "
                      "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")
  elif not dtypes.is_inexact(d):
    raise TypeError(f"{name} requires numerical-valued inputs (input dtype that is a sub-dtype "
                    f"of np.bool_ or np.number), but got {d.name}.")


def _check_output_dtype_revderiv(name, holomorphic, x):
  d = _dtype(x)
  if holomorphic:
    if not dtypes.is_complex(d):
      raise TypeError(f"{name} with holomorphic=True requires outputs with complex dtype, "
                      f"but got {d.name}.")
  elif dtypes.is_complex(d):
    raise TypeError(f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                    f"np.floating), but got {d.name}. For holomorphic differentiation, pass "
                    "holomorphic=True. For differentiation of non-holomorphic functions "
                    "involving complex outputs, use nbjax.vjp directly.")
  elif not dtypes.is_float(d):
    raise TypeError(f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
                    f"np.floating), but got {d.name}. For differentiation of functions with "
                    "integer outputs, use nbjax.vjp directly.")


def _check_scalar(x):
  msg = "Gradient only defined for scalar-output functions. Output {}.".format
  try:
    aval = get_aval(x)
  except TypeError as e:
    raise TypeError(msg(f"was {x}")) from e
  if aval.shape != ():
    raise TypeError(msg(f"had shape: {aval.shape}"))


def _check_argnums(argnums, args):
  top = argnums if isinstance(argnums, int) else max(argnums)
  if top >= len(args):
    raise TypeError(f"differentiating with respect to argnums={argnums} requires at least "
                    f"{top + 1} positional arguments to be passed by the caller, but got "
                    f"only {len(args)} positional arguments.")


def _dyn_partial(fun, argnums, args, kwargs):
  """``fun`` of the ``argnums`` arguments only, and those arguments."""
  if argnums == 0 and len(args) == 1 and not kwargs and type(fun) in _PLAIN_FUNS:
    return fun, args  # (grad's usual call: nothing to close over)
  nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
  n = len(args)
  for i in nums:
    if not -n <= i < n:
      raise ValueError("Positional argument indices, e.g. for `static_argnums`, must have value "
                       "greater than or equal to -len(args) and less than len(args), but got "
                       f"value {i} for len(args) == {n}.")
  nums = tuple(i % n for i in nums)
  dyn = tuple(args[i] for i in nums)

  def f_partial(*dyn_args):
    a = list(args)
    for i, x in zip(nums, dyn_args):
      a[i] = x
    return fun(*a, **kwargs)

  f_partial.__name__ = _fun_name(fun)
  return f_partial, dyn


_PLAIN_FUNS = (types.FunctionType, types.MethodType)


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=(), *, _value=True):
  """A function that evaluates both ``fun`` and its gradient (reverse mode).

  ``fun`` must return a scalar (shape ``()``), real unless ``holomorphic``. ``argnums``
  selects the positional argument(s) to differentiate; with a tuple the gradient is a tuple.
  With ``has_aux`` the function returns ``((value, aux), gradient)``. At top level, calls
  whose signature repeats replay one compiled program of the forward and backward pass when
  ``fun`` provably traces the same way again (``nbjax/eager_cache.py``).

  >>> value_and_grad(lambda x: x ** 2)(3.0)   # (9.0, 6.0)
  """
  if reduce_axes:
    raise NotImplementedError("reduce_axes argument to grad is deprecated")
  _check_callable(fun)
  argnums = core.concrete_or_error(_ensure_index, argnums)

  @api_boundary
  @functools.wraps(fun)
  def value_and_grad_f(*args, **kwargs):
    if _ctx.trace is _eval_trace:
      if cache.enabled:  # top level: replay a staged program of the forward and backward pass
        out = cache.replay(args, kwargs)  # (never across processes: the cache says MISS)
        if out is not _MISS:
          return out
      # the tape reads host values, which a global array spanning processes does not have
      return call(*args, _tape=_xla._dist is None, **kwargs)
    return call(*args, **kwargs)

  def call(*args, _tape=False, **kwargs):
    _check_argnums(argnums, args)
    f_partial, dyn_args = _dyn_partial(fun, argnums, args, kwargs)
    leaves, in_tree = tree_flatten(dyn_args)
    has_keys = False
    for leaf in leaves:
      if holomorphic or type(leaf) is not _Array or leaf.dtype.kind != "f":
        key_leaves = tree_leaves(dyn_args, is_leaf=_is_key)  # a key array is checked as one
        for x in key_leaves:
          _check_input_dtype_revderiv("grad", holomorphic, allow_int, x)
        has_keys = any(map(_is_key, key_leaves))
        break
    if _tape:
      outs, grads, out_tree, aux = _grad_tape(f_partial, leaves, in_tree, has_aux, holomorphic)
    else:
      outs, grads, in_tree, out_tree, aux = _grad_linearize(f_partial, dyn_args, has_aux,
                                                            holomorphic)
    if core.sharding_rule_hook is not None:  # (Explicit mesh axes: a gradient as its input)
      from nbjax.interpreters.sharding_types import match_cotangent
      grads = [match_cotangent(g, get_aval(x)) for g, x in zip(grads, leaves)]
    g = tree_unflatten(in_tree, grads)
    g = _keys_to_float0(g) if has_keys else g
    g = g[0] if isinstance(argnums, int) else g
    if not _value:  # grad: the replayed program need not return the value
      return (g, aux) if has_aux else g
    ans = tree_unflatten(out_tree, outs)
    return ((ans, aux) if has_aux else ans), g

  # the replay stages the tape's own steps (the per-call path), not linearize + transpose:
  # the two accumulate cotangents in different orders, which rounds differently
  cache = eager_cache.TraceCache(functools.partial(call, _tape=True), fun)
  value_and_grad_f._trace_cache = cache
  return value_and_grad_f


_LEAF = tree_structure(0)


def _check_output(outs, out_tree, holomorphic):
  """JAX's checks of ``grad``'s output: a real (or, ``holomorphic``, complex) scalar."""
  ans = outs[0] if len(outs) == 1 and out_tree.num_leaves == 1 and not out_tree.children() \
      else tree_unflatten(out_tree, outs)
  _check_scalar(ans)
  _check_output_dtype_revderiv("grad", holomorphic, ans)


def _seed(outs, out_tree, holomorphic):
  """The cotangent 1 for the scalar output, after the output checks."""
  from nbjax import lax
  _check_output(outs, out_tree, holomorphic)
  return lax.full_like(outs[0], 1)


def _grad_linearize(f, primals, has_aux, holomorphic):
  """grad by linearize + transpose (any trace): ``(outs, grads, trees..., aux)``."""
  outs, lin, in_tree, out_tree, aux, _ = _linearize(f, primals, has_aux, "grad")
  cts = lin.vjp([_seed(outs, out_tree, holomorphic)])
  return outs, [_grad_leaf(c, a) for c, a in zip(cts, lin.in_avals)], in_tree, out_tree, aux


def _grad_leaf(ct, tangent_aval):
  """The gradient of an input leaf from its cotangent (``Zero`` where none flowed): dtype and
  weak type as the backward pass made them (JAX's: a ``custom_vjp`` bwd's bfloat16 cotangent
  of a float32 input stays bfloat16)."""
  ct = ad.instantiate_zeros(ct)
  if tangent_aval.dtype == dtypes.float0:
    return _tangent_out(ct)  # (NumPy float0 zeros, as JAX's)
  return ct


def _grad_tape(f, leaves, in_tree, has_aux, holomorphic):
  """grad at top level by a recorded tape (``interpreters/tape.py``): ``(outs, grads,
  out_tree, aux)``, as ``_grad_linearize``."""
  Tracer_ = tape.TapeTracer
  trace = tape.TapeTrace(_ctx.trace)  # the eval trace, or the replay's staging trace
  ins = [trace.arg(x) for x in leaves]
  prev, _ctx.trace = _ctx.trace, trace
  try:
    ans = f(*tree_unflatten(in_tree, ins))
  finally:
    _ctx.trace = prev
  if has_aux:
    if not (isinstance(ans, (tuple, list)) and len(ans) == 2):
      raise TypeError("expected function with aux output to return a two-element tuple, "
                      f"but got type {type(ans)} with value {ans!r}")
    ans, aux = ans
    aux = tree_map(lambda x: _owned(x.val if type(x) is Tracer_ and x._trace is trace
                                    else x), aux)
  else:
    aux = None
  if type(ans) is Tracer_ and ans._trace is trace:  # a single traced output
    out_leaves, out_tree, outs = [ans], _LEAF, [_owned(ans.val)]
  else:
    out_leaves, out_tree = tree_flatten(ans)
    outs = [_owned(o.val if type(o) is Tracer_ and o._trace is trace else o)
            for o in out_leaves]
  v = outs[0]._value if out_tree is _LEAF and type(outs[0]) is _Array else None
  if v is None or v.shape or v.dtype.kind != "f" or holomorphic:  # else a real scalar: fine
    _check_output(outs, out_tree, holomorphic)
  o = out_leaves[0]
  if type(o) is not Tracer_ or o._trace is not trace:
    cts = {}
  elif trace.direct:
    cts, weak = tape.backward(trace, o.slot, _dtype(outs[0]), o.aval.weak_type)
  else:  # staged for a replay: symbolic cotangents
    cts = tape.staged_backward(trace, o.slot, _seed(outs, out_tree, holomorphic))
    grads = []
    for x, t in zip(leaves, ins):
      a = get_aval(x).to_tangent_aval()
      c = cts.get(t.slot) if type(t) is Tracer_ else None
      grads.append(_grad_leaf(ad.Zero(a) if c is None else c, a))
    return outs, grads, out_tree, aux
  grads = []
  for x, t in zip(leaves, ins):
    c = None
    if type(t) is Tracer_:
      c = cts.get(t.slot)
      if c is not None:  # the gradient as it is
        grads.append(_Array._new(c, weak[t.slot]))
        continue
    a = get_aval(x).to_tangent_aval()
    grads.append(_grad_leaf(ad.Zero(a) if c is None else c, a))
  return outs, grads, out_tree, aux


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
  """The gradient of scalar-valued ``fun`` (reverse mode): ``value_and_grad`` without the value.

  >>> grad(nbjax.numpy.tanh)(0.2)
  >>> grad(lambda w, x: (w * x).sum(), argnums=(0, 1))(w, x)   # a tuple of two gradients
  """
  return value_and_grad(fun, argnums, has_aux=has_aux, holomorphic=holomorphic,
                        allow_int=allow_int, reduce_axes=reduce_axes, _value=False)


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
  """Jacobian of ``fun`` by reverse mode: ``vmap`` of the VJP over the output basis.

  For each input leaf and output leaf the block has the output's shape followed by the
  input's shape; ``has_aux`` returns ``(jacobian, aux)``.
  """
  _check_callable(fun)
  argnums = _ensure_index(argnums)

  @api_boundary
  @functools.wraps(fun)
  def jacfun(*args, **kwargs):
    if _ctx.trace is _eval_trace and cache.enabled:
      out = cache.call(args, kwargs)
      if out is not _MISS:
        return out
    return call(*args, **kwargs)

  def call(*args, **kwargs):
    f_partial, dyn_args = _dyn_partial(fun, argnums, args, kwargs)
    tree_map(functools.partial(_check_input_dtype_revderiv, "jacrev", holomorphic, allow_int),
             dyn_args)
    y, pullback, *aux = vjp(f_partial, *dyn_args, has_aux=has_aux)
    tree_map(functools.partial(_check_output_dtype_revderiv, "jacrev", holomorphic), y)
    jac = vmap(pullback)(_std_basis(y))
    jac = jac[0] if isinstance(argnums, int) else jac
    example = dyn_args[0] if isinstance(argnums, int) else dyn_args
    jac_tree = tree_map(lambda leaf, arr: _unravel(y, 0, leaf, arr), example, jac)
    jac_tree = tree_transpose(tree_structure(example), tree_structure(y), jac_tree)
    return (jac_tree, *aux) if has_aux else jac_tree

  cache = eager_cache.TraceCache(call, fun)
  jacfun._trace_cache = cache
  return jacfun


def jacobian(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
  """Alias of ``jacrev``."""
  return jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
  """Hessian of ``fun``: ``jacfwd(jacrev(fun))``. For an output leaf of shape ``out`` and
  input leaves of shapes ``in1``, ``in2`` the block has shape ``out + in1 + in2``."""
  return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic),
                argnums, has_aux=has_aux, holomorphic=holomorphic)


@api_boundary
def linear_transpose(fun, *primals, reduce_axes=()):
  """The transpose of ``fun``, which is promised to be linear in its arguments.

  ``primals`` give the input structure, shapes and dtypes (arrays or ``ShapeDtypeStruct``s).
  The returned function maps an output cotangent to a tuple of input cotangents, with the
  inputs' exact dtypes.

  >>> f_t = linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, 1.0, 1.0)
  >>> f_t(1.0)   # (0.5, -0.5)
  """
  if reduce_axes:
    raise NotImplementedError("reduce_axes argument to transpose is deprecated")
  ps, in_tree = tree_flatten(primals)
  in_avals = [core.ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype))
              if not core.valid_jaxtype(x) and hasattr(x, "shape") and hasattr(x, "dtype")
              else _abstractify(x) for x in ps]  # (any object with a shape and a dtype)
  flat_fun, store = _flatten_fun(lambda *a: fun(*a), tree_structure((primals, {})))
  pvals = [pe.PartialVal.unknown(a) for a in in_avals]
  jaxpr, out_pvals, consts = pe.trace_to_jaxpr(lambda *xs: flat_fun(*xs), pvals,
                                               fun_name=_fun_name(fun))
  out_tree = store()[0]
  out_avals = [pv.get_aval() for pv in out_pvals]
  in_dtypes, out_dtypes = [a.dtype for a in in_avals], [a.dtype for a in out_avals]
  if not (all(dtypes.is_inexact(d) for d in in_dtypes + out_dtypes) or
          all(dtypes.is_int(d) for d in in_dtypes + out_dtypes)):
    raise TypeError("linear_transpose only supports [float or complex] -> [float or complex], "
                    f"and integer -> integer functions, but got {in_dtypes} -> {out_dtypes}.")
  unknown = [not pv.is_known() for pv in out_pvals]

  @api_boundary
  def transposed_fun(consts, out_cotangent):
    cts, tree = tree_flatten(out_cotangent)
    if tree != out_tree:
      raise TypeError("cotangent tree does not match function output, "
                      f"expected {out_tree} but got {tree}")
    if [(get_aval(c).shape, _dtype(c)) for c in cts] != [(a.shape, a.dtype) for a in out_avals]:
      raise TypeError("cotangent type does not match function output, "
                      f"expected {tuple(out_avals)} but got {cts}")
    undef = [ad.UndefinedPrimal(a.strip_weak_type()) for a in in_avals]
    in_cts = ad.backward_pass(jaxpr, consts, undef, [c for c, u in zip(cts, unknown) if u])
    in_cts = [_tangent_out(_possible_downcast(ad.instantiate_zeros(c), a))
              for c, a in zip(in_cts, in_avals)]
    return tuple(tree_unflatten(in_tree, in_cts))

  return Partial(transposed_fun, consts)


def _unravel(pytree, axis, example, arr):
  """Split ``arr`` along ``axis`` into the leaves of ``pytree`` (each leaf's shape replaces
  that axis), cast to ``example``'s dtype (each leaf's own when ``example`` is None)."""
  from nbjax import lax
  leaves, tree = tree_flatten(pytree)
  a_aval = get_aval(arr)
  axis %= a_aval.ndim
  out, off = [], 0
  for leaf in leaves:
    la = get_aval(leaf)
    part = arr
    if len(leaves) > 1:
      part = lax.slice_in_dim(arr, off, off + la.size, axis=axis)
    off += la.size
    shape = (*a_aval.shape[:axis], *la.shape, *a_aval.shape[axis + 1:])
    if get_aval(part).shape != shape:
      part = lax.reshape(part, shape)
    out.append(_possible_downcast(part, la if example is None else get_aval(example)))
  return tree_unflatten(tree, out)


# --------------------------------------------------------------------- vmap


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
  """Vectorizing map: ``fun`` mapped over array axes, as one batched computation.

  ``in_axes``: an int, None, or a tuple (a list is taken as a tuple) with one entry per
  positional argument, each an int, None, or a pytree prefix of that argument (negative
  ints count from the end); keyword arguments are mapped over axis 0. ``out_axes``: the
  same for the outputs (unmapped outputs are broadcast; ``None`` requires an unmapped
  output). ``axis_size`` is needed when no argument is mapped. ``axis_name`` names the
  axis for collectives; ``spmd_axis_name`` (a mesh axis name or a tuple of them) splits the
  batch axis over those mesh axes in the sharding constraints and shard_maps ``fun`` holds.

  At top level, a call whose signature repeats replays a compiled program of the batched
  computation when ``fun`` provably traces the same way again (``nbjax/eager_cache.py``).
  """
  _check_callable(fun)
  if isinstance(in_axes, list):
    in_axes = tuple(in_axes)
  if not (in_axes is None or type(in_axes) in (int, tuple)
          or type(in_axes) in batching.spec_types):
    raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                    f"to the positional arguments passed to the function, but got {in_axes}.")
  spec = lambda l: type(l) is int or type(l) in batching.spec_types  # noqa: E731
  if not all(spec(l) for l in tree_leaves(in_axes)):
    raise TypeError("vmap in_axes must be an int, None, or (nested) container with those "
                    f"types as leaves, but got {in_axes}.")
  if not all(spec(l) for l in tree_leaves(out_axes)):
    raise TypeError("vmap out_axes must be an int, None, or (nested) container with those "
                    f"types as leaves, but got {out_axes}.")
  if spmd_axis_name is not None and not isinstance(spmd_axis_name, tuple):
    spmd_axis_name = (spmd_axis_name,)

  @api_boundary
  @functools.wraps(fun)
  def vmap_f(*args, **kwargs):
    if batching.vmappables:
      return _vmap_vmappables(fun, in_axes, out_axes, axis_name, axis_size, args, kwargs)
    if _ctx.trace is _eval_trace and cache.enabled:  # top level: replay a staged trace
      out = cache.replay(args, kwargs)
      if out is not _MISS:
        return out
    return call(args, kwargs)

  def call(args, kwargs):
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
      msg = ("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
             "positional arguments passed to the function, but got "
             f"len(in_axes)={len(in_axes)}, len(args)={len(args)}")
      raise ValueError(msg)
    if not kwargs and all(type(a) in _LEAF_TYPES or isinstance(a, Tracer) for a in args):
      out = _vmap_leaves(args)  # fast path: every argument is an array
      if out is not None:
        return out[0]
    args_flat, in_tree = tree_flatten((args, kwargs))
    if any(type(x) is core.Ref for x in args_flat):  # JAX's error for a ref passed twice
      pe.check_ref_args(pe.DebugInfo("vmap", fun, args, kwargs), args_flat)
    in_axes_flat = in_cache.get(in_tree)
    if in_axes_flat is None:
      in_axes_flat = _flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True)
      if len(in_cache) < 64:
        in_cache[in_tree] = in_axes_flat
    size = _mapped_axis_size(fun, in_tree, args_flat, in_axes_flat, "vmap", axis_size)
    flat_fun, store = _flatten_fun(fun, in_tree)

    def out_axes_flat():
      out_tree = store()[0]
      r = out_cache.get(out_tree)
      if r is None:
        r = _flatten_axes("vmap out_axes", out_tree, out_axes)
        if len(out_cache) < 64:
          out_cache[out_tree] = r
      return r

    try:
      outs = batch_flat(flat_fun, args_flat, in_axes_flat, size, out_axes_flat,
                        axis_name=axis_name, spmd_axis_name=spmd_axis_name)
    except _SpecMatchError as e:
      raise e.at(store()[0]) from None
    return tree_unflatten(store()[0], outs)

  in_cache, out_cache = {}, {}
  cache = eager_cache.TraceCache(lambda *a, **k: call(a, k), fun)

  def _vmap_leaves(args):
    n = len(args)
    in_axes_flat = in_cache.get(n)
    if in_axes_flat is None:
      in_axes_flat = in_cache[n] = _flatten_axes(
          "vmap in_axes", tree_structure((args, {})), (in_axes, 0), kws=True)
    sz = None
    for x, d in zip(args, in_axes_flat):
      if d is not None:
        shape = np.shape(x)
        if not -len(shape) <= d < len(shape) or (sz is not None and shape[d] != sz):
          return None  # the general path raises the error
        sz = shape[d]
    if sz is None or (axis_size is not None and axis_size != sz):
      return None
    box = []

    def flat_fun(*xs):
      ans = fun(*xs)
      if type(ans) in _LEAF_TYPES or isinstance(ans, Tracer):
        box.append(None)
        return [ans]
      leaves, tree = tree_flatten(ans)
      box.append(tree)
      return leaves

    def out_axes_flat():
      tree = box[0]
      if tree is None:
        if type(out_axes) is int or out_axes is None:
          return [out_axes]
        tree = tree_structure(0)
      r = out_cache.get(tree)
      if r is None:
        r = out_cache[tree] = _flatten_axes("vmap out_axes", tree, out_axes)
      return r

    try:
      outs = batch_flat(flat_fun, args, in_axes_flat, sz, out_axes_flat, axis_name=axis_name,
                        spmd_axis_name=spmd_axis_name)
    except _SpecMatchError as e:
      raise e.at(tree_structure(0) if box[0] is None else box[0]) from None
    return (outs[0] if box[0] is None else tree_unflatten(box[0], outs),)

  vmap_f.__doc__ = (f"Vectorized version of {_fun_name(fun)}. Takes similar arguments as "
                    f"{_fun_name(fun)} but with additional array axes over which it is mapped."
                    + (f"\n\nOriginal documentation:\n\n{fun.__doc__}" if fun.__doc__ else ""))
  vmap_f._trace_cache = cache
  return vmap_f


def _vmap_vmappables(fun, in_axes, out_axes, axis_name, axis_size, args, kwargs):
  """vmap where registered vmappable types (``batching.register_vmappable``) are arguments
  or outputs, whole: their ``to_elt``/``from_elt`` handlers map them, as JAX's vmap."""
  is_v = batching.is_vmappable
  args_flat, in_tree = tree_flatten((args, kwargs), is_leaf=is_v)
  in_axes_flat = _flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True)
  if axis_size is None:
    plain = [(x, d) for x, d in zip(args_flat, in_axes_flat) if not is_v(x)]
    axis_size = _mapped_axis_size(fun, in_tree, [x for x, _ in plain], [d for _, d in plain],
                                  "vmap")
  trace = batching.BatchTrace(core.get_current_trace(), core.new_trace_tag(), axis_size,
                              axis_name)

  def get_idx():
    make = batching.make_iota_handlers.get(type(axis_size))
    return batching.BatchTracer(trace, make(axis_size) if make else
                                _lax_iota(np.int32, int(axis_size)), 0)

  def to_elt(x, spec):
    handler = batching.to_elt_handlers.get(type(x))
    if handler:
      return handler(to_elt, get_idx, x, spec)
    return x if spec is None else batching.BatchTracer(trace, x, spec % np.ndim(x))

  def from_elt(i, x, spec):
    handler = batching.from_elt_handlers.get(type(x))
    if handler:
      return handler(lambda size, elt, axis: from_elt(i, elt, axis), axis_size, x, spec)
    val, src = trace.to_batch_info(x)
    r = _match_out_axis(val, src, spec, axis_size, axis_name, i, None)
    return r if isinstance(r, (Tracer, _Array)) or type(r) in _PY_SCALAR_TYPES else _Array(r)

  with core.set_current_trace(trace), core.extend_axis_env(axis_name, axis_size):
    a, k = tree_unflatten(in_tree, [to_elt(x, d) for x, d in zip(args_flat, in_axes_flat)])
    outs, out_tree = tree_flatten(fun(*a, **k), is_leaf=is_v)
    out_axes_flat = _flatten_axes("vmap out_axes", out_tree, out_axes)
    outs = [from_elt(i, o, d) for i, (o, d) in enumerate(zip(outs, out_axes_flat))]
  return tree_unflatten(out_tree, outs)


def _lax_iota(dtype, n):
  from nbjax import lax
  return lax.iota(dtype, n)


def batch_flat(fun, args, in_axes, axis_size, out_axes_thunk, *, axis_name=None,
               spmd_axis_name=None):
  """vmap of a flat function. ``in_axes``: int or None per flat argument; ``out_axes_thunk()``
  gives int or None per flat output (called after ``fun`` ran). Returns the flat outputs."""
  trace = batching.BatchTrace(core.get_current_trace(), core.new_trace_tag(), axis_size,
                              axis_name)
  if spmd_axis_name is not None:
    trace.spmd_name = spmd_axis_name
  tracers = [x if ax is None else batching.BatchTracer(trace, x, ax % np.ndim(x))
             for x, ax in zip(args, in_axes)]
  src = pe.user_site()  # where the inputs were made, for messages (formatted when needed)
  for i in range(len(tracers)):  # (no local may hold a tracer: the leak checker looks)
    if type(tracers[i]) is batching.BatchTracer:
      tracers[i].source_info = src
  if spmd_axis_name is None:
    with core.set_current_trace(trace), core.extend_axis_env(axis_name, axis_size):
      outs = fun(*tracers)
  else:
    batching.spmd_names.append(spmd_axis_name)
    try:
      with core.set_current_trace(trace), core.extend_axis_env(axis_name, axis_size):
        outs = fun(*tracers)
    finally:
      batching.spmd_names.pop()
  out_axes = out_axes_thunk()
  results = []
  for i, (o, dst) in enumerate(zip(outs, out_axes)):
    if not (isinstance(o, Tracer) or core.valid_jaxtype(o)):
      raise TypeError(f"Output from batched function {o!r:.100} with type {type(o)} is not a "
                      "valid JAX type")
    val, src = trace.to_batch_info(o)
    r = _match_out_axis(val, src, dst, axis_size, axis_name, i, out_axes)
    results.append(r if isinstance(r, (Tracer, _Array)) or _is_key(r)
                   or type(r) in _PY_SCALAR_TYPES  # (a Python scalar stays one, as JAX's)
                   else _Array(r))  # a passed-through input
  tracers = outs = o = None  # (the leak check finds any tracer left)
  core.check_leaks(trace)
  return results


class _SpecMatchError(ValueError):
  """A batched output whose out_axes spec is None; ``at(out_tree)`` is JAX's error, naming
  the output's path."""

  def __init__(self, i, src, dst):
    super().__init__(f"vmap has mapped output but out_axes is None (output {i} was batched "
                     f"on axis {src}, and its out_axes spec is None)")
    self.i, self.src, self.dst = i, src, dst

  def at(self, out_tree):
    paths = [p for p, _ in tree_flatten_with_path(
        tree_unflatten(out_tree, list(range(out_tree.num_leaves))))[0]]
    return ValueError(f"at vmap out_axes{keystr(paths[self.i])}, got axis spec {self.dst} "
                      f"but output was batched on axis {self.src}")


def _match_out_axis(x, src, dst, size, axis_name, i, out_axes):
  nd = np.ndim(x) + (src is None)
  if dst is not None:
    if not -nd <= dst < nd:
      raise ValueError(f"axis {dst} is out of bounds for array of dimension {nd}")
    dst %= nd
  if src == dst:
    return x
  if src is None:
    return _broadcast_at(x, size, dst)
  if dst is None:
    if axis_name is not None:
      raise ValueError(f"vmap has mapped output (axis_name={axis_name}) but out_axes is None")
    raise _SpecMatchError(i, src, dst)
  return batching.moveaxis(x, src, dst)


def _broadcast_at(x, size, axis):
  from nbjax import lax
  aval = get_aval(x)
  shape = list(aval.shape)
  shape.insert(axis, size)
  if aval.dtype == dtypes.float0:  # float0 carries no data: no primitive to run
    return _Array(np.zeros(shape, dtypes.float0))
  dims = tuple(d for d in range(len(shape)) if d != axis)
  return batching.broadcast_in_dim(x, tuple(shape), dims)


def _flatten_axes(name, treedef, axis_tree, *, kws=False):
  """Broadcast the prefix tree ``axis_tree`` (None counts as a leaf) over ``treedef``."""
  leaves, axis_def = tree_flatten(axis_tree, is_leaf=lambda x: x is None)
  try:  # (on the structures: the value tree's nodes are not rebuilt, as JAX's)
    out = axis_def.broadcast_prefix(leaves, treedef)
  except ValueError:
    proxy = tree_unflatten(treedef, [_Leaf()] * treedef.num_leaves)
    try:
      axis_def.flatten_up_to(proxy)
    except ValueError as e:
      shown_tree, shown_axes = treedef, axis_tree
      if kws:  # the error is about the positional arguments
        shown_tree, shown_axes = treedef.children()[0], axis_tree[0]
      raise _prefix_error(name, shown_tree, shown_axes, e) from None
    raise
  assert len(out) == treedef.num_leaves
  if any(type(a) is int and a < 0 for a in out):  # a key array's -1 is its data's -2
    out = [a - t if type(a) is int and a < 0 else a
           for a, t in zip(out, tree_util.trailing_axes(treedef))]
  return out


class _Leaf:
  __slots__ = ()

  def __repr__(self):
    return "*"


class PytreeLeaf:
  """A leaf of the value tree in JAX's tree-prefix errors."""
  __slots__ = ()

  def __repr__(self):
    return "pytree leaf"


def _prefix_error(name, treedef, axis_tree, err=None):
  """JAX's error for ``axis_tree`` that is no tree prefix of ``treedef``: every mismatch,
  compared with ``None`` as a pytree node (so a ``None`` above a leaf is one too, as JAX's)."""
  dummy = tree_unflatten(treedef, [PytreeLeaf()] * treedef.num_leaves)
  errors = tree_util.prefix_errors(axis_tree, dummy)
  if not errors:
    return ValueError(f"{name} specification must be a tree prefix of the corresponding value, "
                      f"got specification {axis_tree} for value tree {treedef}. ({err})")
  details = "\n  ".join(e(name).args[0] for e in errors)
  return ValueError(f"{name} specification must be a tree prefix of the corresponding value; "
                    f"\n  Mismatch details ({len(errors)} found):\n  {details}")


def _mapped_axis_size(fn, tree, vals, dims, name, axis_size=None):
  if not vals:
    if axis_size is not None:
      return axis_size
    if name == "pmap":
      raise ValueError("pmap requires at least one argument with a mapped axis.")
    args, kwargs = tree_unflatten(tree, vals)
    raise ValueError(f"{name} wrapped function must be passed at least one argument "
                     "containing an array or axis_size must be specified, got empty "
                     f"*args={args} and **kwargs={kwargs}")

  if axis_size is None:  # fast path: all mapped sizes agree
    sz = None
    for x, d in zip(vals, dims):
      if d is not None:
        shape = getattr(x, "shape", None)
        if shape is None or not -len(shape) <= d < len(shape) or (sz is not None and
                                                                   shape[d] != sz):
          break
        sz = shape[d]
    else:
      if sz is not None:
        return sz

  def size_of(x, axis):
    shape = np.shape(x)
    try:
      return shape[axis]
    except IndexError:
      get_aval(x)  # JAX's error for a value that is not an array comes first
      min_rank = axis + 1 if axis >= 0 else -axis
      raise ValueError(f"{name} was requested to map its argument along axis {axis}, which "
                       f"implies that its rank should be at least {min_rank}, but is only "
                       f"{len(shape)} (its shape is {shape})") from None

  mapped = [None if d is None else size_of(x, d) for x, d in zip(vals, dims)]
  sizes = {s for s in mapped if s is not None}
  if axis_size is not None:
    sizes.add(axis_size)
  if len(sizes) == 1:
    return sizes.pop()
  if not sizes:
    if name == "pmap":
      raise ValueError("pmap requires at least one argument with a mapped axis.")
    raise ValueError(f"{name} must have at least one non-None value in in_axes or axis_size "
                     "must be specified")
  # inconsistent sizes: name the arguments, JAX style
  args, kwargs = tree_unflatten(tree, vals)
  try:
    params = list(inspect.signature(fn).parameters)
  except (TypeError, ValueError):
    params = None

  def arg_name(path):
    i = path[0].idx
    if params is None or i >= len(params):
      return f"args{keystr(path)}"
    return f"argument {params[i]}" + (keystr(path[1:]) if len(path) > 1 else "")

  def type_str(x):
    try:
      return get_aval(x).str_short(short_dtypes=False)
    except TypeError:
      return "unknown"

  descr = [f"{arg_name(p)} of type {type_str(x)}" for p, x in tree_flatten_with_path(args)[0]]
  descr += [f"kwargs{keystr(p)} of type {type_str(x)}"
            for p, x in tree_flatten_with_path(kwargs)[0]]
  counts = collections.Counter(s for s in mapped if s is not None).most_common()
  first = {}
  for i, s in enumerate(mapped):
    if s is not None and s not in first:
      first[s] = i
  msg = [f"{name} got inconsistent sizes for array axes to be mapped:\n"]
  if axis_size is not None:
    msg.append(f"  * the `axis_size` argument was {axis_size};\n")
  for k, (sz, ct) in enumerate(counts):
    j = first[sz]
    if ct == 1:
      msg.append(f"  * one axis had size {sz}: axis {dims[j]} of {descr[j]};\n")
    elif k == 0:
      msg.append(f"  * most axes ({ct} of them) had size {sz}, e.g. axis {dims[j]} of "
                 f"{descr[j]};\n")
    else:
      msg.append(f"  * some axes ({ct} of them) had size {sz}, e.g. axis {dims[j]} of "
                 f"{descr[j]};\n")
  raise ValueError("".join(msg)[:-2])

# --------------------------------------------------------------------- staging


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False, abstracted_axes=None):
  """A function that returns the ``ClosedJaxpr`` of ``fun`` for the given example arguments.

  Every primitive ``fun`` binds is staged (omnistaging), also those on constants; array
  constants become constvars (their values in ``.consts``), scalars inline literals.
  ``static_argnums`` positions are passed to ``fun`` as Python values; ``axis_env``: (name,
  size) pairs of named axes bound while tracing (for collectives). Arguments may also be
  ``ShapeDtypeStruct``s or any objects with ``shape`` and ``dtype``. With
  ``return_shape=True`` the function also returns the output as a pytree of
  ``ShapeDtypeStruct``s.

  >>> print(make_jaxpr(lambda x: nbjax.numpy.sin(x) * 2.0)(1.0))
  { lambda ; a:f64[]. let b:f64[] = sin a; c:f64[] = mul b 2.0:f64[] in (c,) }
  """
  _check_callable(fun)
  if abstracted_axes is not None:
    raise NotImplementedError("make_jaxpr: abstracted_axes (dynamic shapes) is not supported")
  static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

  @api_boundary
  @functools.wraps(fun)
  def make_jaxpr_f(*args, **kwargs):
    n = len(args)
    st = {i % n for i in static if -n <= i < n}
    dyn_idx = [i for i in range(n) if i not in st]

    def f_dyn(*dyn_args, **kw):
      a = list(args)
      for i, x in zip(dyn_idx, dyn_args):
        a[i] = x
      return fun(*a, **kw)

    dyn_args = tuple(args[i] for i in dyn_idx)
    args_flat, in_tree = tree_flatten((dyn_args, kwargs))
    dbg = pe.DebugInfo("jit", fun, args, kwargs, static)
    try:
      in_avals = pe.abstractify_args(fun, args_flat, dbg)
    except TypeError:  # as JAX's: anything with a shape and a dtype stands for an array
      if not all(hasattr(x, "shape") and hasattr(x, "dtype") or pe._is_abstractable(x)
                 for x in args_flat):
        raise
      in_avals = [_shape_abstractify(x) for x in args_flat]
    flat_fun, store = _flatten_fun(f_dyn, in_tree)
    with contextlib.ExitStack() as stack:
      for name, size in axis_env or ():
        stack.enter_context(core.extend_axis_env(name, size))
      jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
          flat_fun, in_avals, fun_name=_fun_name(fun),
          debug_info=dbg)
    closed = ClosedJaxpr(jaxpr, consts)
    if return_shape:
      shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in out_avals]
      return closed, tree_unflatten(store()[0], shapes)
    return closed

  make_jaxpr_f.__name__ = f"make_jaxpr({_fun_name(fun)})"
  make_jaxpr_f.__qualname__ = f"make_jaxpr({getattr(fun, '__qualname__', _fun_name(fun))})"
  make_jaxpr_f.__module__ = "jax"  # as JAX's
  return make_jaxpr_f


# --------------------------------------------------------------------- devices and values


def _check_backend(backend):
  if backend not in (None, "cpu"):
    raise RuntimeError(f"Unknown backend {backend}: nbjax runs on the CPU")


def devices(backend=None):
  """The CPU devices of every process (the PJRT CPU client's; imports jaxlib): one, or N when
  asked with ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` or ``config.update(
  "jax_num_cpu_devices", N)`` before the client is created; after
  ``nbjax.distributed.initialize``, every process's devices (each has ``process_index``)."""
  _check_backend(backend)
  from nbjax import xla
  return xla.devices()


def local_devices(process_index=None, backend=None, host_id=None):
  """The devices of process ``process_index`` (default: this process)."""
  _check_backend(backend)
  from nbjax import xla
  p = host_id if process_index is None else process_index
  if p is None:
    return xla.local_devices()
  if not 0 <= p < process_count():
    raise ValueError(f"Unknown process_index {p}")
  return [d for d in xla.devices() if d.process_index == p]


def default_backend():
  return "cpu"


def device_count(backend=None):
  """Number of devices of every process (``len(devices(backend))``)."""
  return len(devices(backend))


def local_device_count(backend=None):
  """Number of devices this process drives."""
  return len(local_devices(backend=backend))


def process_index(backend=None):
  """This process's index among the processes of a run (one process: 0)."""
  _check_backend(backend)
  from nbjax import xla
  return xla.process_index()


def process_count(backend=None):
  """Number of processes of a run (``nbjax.distributed.initialize``'s ``num_processes``)."""
  _check_backend(backend)
  return len({d.process_index for d in devices()})


def process_indices(backend=None):
  """Indices of the processes of a run."""
  return list(range(process_count(backend)))


def _renamed(old, new, fun):
  def alias(backend=None):
    warnings.warn(f"jax.{old} has been renamed to jax.{new}. This alias will eventually be "
                  "removed; please update your code.")
    return fun(backend)
  alias.__name__ = alias.__qualname__ = fun.__name__.replace("process", "host")
  alias.__doc__ = f"Deprecated alias of ``{new}``."
  return alias


# JAX's deprecated aliases, warning as JAX's do (its messages, typos included)
host_count = _renamed("process_count", "process_count", process_count)
host_id = _renamed("process_index", "process_index", process_index)
host_ids = _renamed("process_indexs", "process_indices", process_indices)


def copy_to_host_async(x):
  """Start the host copy of every Array leaf of pytree ``x`` (leaves without a
  ``copy_to_host_async`` method are left alone); returns ``x``."""
  for leaf in tree_util.tree_leaves(x):
    copy = getattr(leaf, "copy_to_host_async", None)
    if copy is not None:
      copy()
  return x


@api_boundary
def named_call(fun, *, name=None):
  """``fun`` under the name ``name`` in staged programs and profiles; values unchanged."""
  _check_callable(fun)
  return fun


@contextlib.contextmanager
def named_scope(name):
  """Context manager naming the operations staged inside it (for profiles); values
  unchanged."""
  if not isinstance(name, str):
    raise TypeError("named_scope name argument must be a string.")
  yield


@contextlib.contextmanager
def ensure_compile_time_eval():
  """Context manager: operations on concrete values inside it run now, even while a
  function is being traced by ``jit`` or another transformation (their results become
  constants of the staged program), as ``jax.ensure_compile_time_eval``."""
  with core.take_current_trace():
    yield


def print_environment_info(return_string=False):
  """Versions of nbjax, its dependencies, Python and the platform."""
  import platform
  import sys

  import jaxlib
  import numba

  import nbjax
  info = (f"nbjax:    {nbjax.__version__}\njaxlib: {jaxlib.__version__}\n"  # (JAX's spacing:
          f"numpy:  {np.__version__}\n"  # "jax:    ", "jaxlib: ", "numpy:  ")
          f"numba:  {numba.__version__}\npython: {sys.version}\n"
          f"device info: cpu-{device_count()}, {local_device_count()} local devices\n"
          f"process_count: {process_count()}\nplatform: {platform.uname()}\n")
  if return_string:
    return info
  print(info)


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
  """``x`` (a pytree) as nbjax Arrays. ``device`` (or a pytree prefix of them) a
  ``NamedSharding``: each leaf split over the mesh, one XLA buffer per device
  (``addressable_shards``); a device or ``None``: host and device memory are the same here.
  ``src``, ``donate`` and ``may_alias`` (or pytree prefixes of them) are checked as JAX's;
  host buffers are never donated. A ``Format`` places by its sharding; its layout must be
  concrete, and row-major (nbjax's arrays are)."""
  from nbjax.experimental.layout import Format
  if isinstance(device, Format) or device is not None and any(
      isinstance(d, Format) for d in tree_leaves(device, is_leaf=_is_format)):
    device = _format_shardings(x, device)
  if device is not None or src is not None or donate is not False or may_alias is not None:
    _check_device_put(x, device, src, donate, may_alias)
    if may_alias is False and donate is False:  # as JAX's: always a new Array
      x = tree_map(lambda v: _Array._new(v._value, v._weak) if type(v) is _Array else v, x)
  from nbjax.sharding import NamedSharding, GSPMDSharding, PartitionSpec
  leaf = lambda s: isinstance(s, (NamedSharding, GSPMDSharding, PartitionSpec))
  if any(leaf(s) for s in tree_leaves(device, is_leaf=leaf)):
    from nbjax.interpreters import spmd
    flat, tree = tree_flatten(x)
    shs = spmd.flatten_shardings("device_put device", x, device)
    out = []
    for v, s in zip(flat, shs):
      s = spmd._resolve(s, None, "device_put")
      if isinstance(v, Tracer):
        out.append(spmd.sharding_constraint_p.bind(v, sharding=s) if s is not None else v)
      elif _is_key(v):  # a key array: its data placed (the trailing key axes replicated)
        out.append(type(v)(v._impl, v._base_array if s is None else
                           spmd.put(v._base_array, s)))
      else:
        out.append(_Array(v) if s is None else spmd.put(v, s))
    return tree_unflatten(tree, out)
  flat, tree = tree_flatten(x, is_leaf=_is_key)
  traced = [i for i, v in enumerate(flat) if not _is_key(v)]
  if any(isinstance(flat[i], Tracer) for i in traced):  # JAX's staged device_put: one
    # equation for the (non-key) leaves
    from nbjax.lax.other import ArrayCopySemantics, device_put_p
    devs, srcs = (spec if spec is not None and tree_leaves(spec) == [spec] or spec is None
                  else None for spec in (device, src))
    devs = [devs] * len(flat) if devs is not None or device is None else _flatten_axes(
        "device_put device", tree, device)
    srcs = [srcs] * len(flat) if srcs is not None or src is None else _flatten_axes(
        "device_put source", tree, src)
    if src is None:  # JAX's source inference: a traced value's committed concrete array
      srcs = [_infer_src(v) for v in flat]
    outs = device_put_p.bind(*[flat[i] for i in traced], devices=tuple(devs[i] for i in traced),
                             srcs=tuple(srcs[i] for i in traced),
                             copy_semantics=(ArrayCopySemantics.REUSE_INPUT,) * len(traced))
    for i, o in zip(traced, outs):
      flat[i] = o
  out = [_put_leaf(v) for v in flat]
  if device is not None:  # placed on a device explicitly: committed to it, as JAX's
    devs = ([device] * len(out) if tree_leaves(device) == [device] else
            _flatten_axes("device_put device", tree, device))
    out = [o._placed(d) if d is not None and type(o) is _Array else
           type(o)(o._impl, o._base_array._placed(d)) if d is not None and _is_key(o) and
           type(o._base_array) is _Array else o for o, d in zip(out, devs)]
  return tree_unflatten(tree, out)


from nbjax.interpreters import spmd as _spmd  # noqa: E402
_spmd.device_put = device_put  # (make_array_from_process_local_data places with it)


def _infer_src(x):
  """JAX's ``_infer_src_sharding``: the device of the array a traced value stands for, when
  that array is committed to one (the transpose puts cotangents back there)."""
  v = x.to_concrete_value() if isinstance(x, Tracer) else x
  placed, dev = core.placed_device(v)
  return v.sharding._device if placed else None


def _put_leaf(v):
  if isinstance(v, (_Array, Tracer)) or _is_key(v):
    if type(v) is _Array and v.is_deleted():
      v._value  # noqa: B018  (JAX's RuntimeError: 'Array has been deleted with shape=...')
    return v
  if core.h2d_guard is not None:
    core.host_to_device(v, explicit=True)  # (JAX's transfer guard)
  if type(v) in _PY_SCALAR_TYPES:  # weakly typed, as JAX's (an int out of range: OverflowError)
    from nbjax import registry
    return _Array(*registry.coerce(v))
  if isinstance(v, np.ndarray) and not isinstance(v, np.ma.MaskedArray):
    if v.dtype.kind in "OUS":
      raise TypeError(f"Dtype {v.dtype} is not a valid JAX array type. Only arrays of numeric "
                      "types are supported by JAX.")
  elif not hasattr(v, "__array__") or isinstance(v, np.ma.MaskedArray):
    get_aval(v)  # (JAX's errors: masked arrays, __jax_array__ objects, strings, ...)
  return _Array(v)


_PY_SCALAR_TYPES = (bool, int, float, complex)


def _is_format(d):
  from nbjax.experimental.layout import Format
  return d is None or isinstance(d, Format)


def _format_shardings(x, device):
  """``device_put``'s ``device`` with each ``Format`` replaced by its sharding, after JAX's
  checks of its layout against the value it places."""
  from nbjax.experimental.layout import Format, Layout
  from nbjax.interpreters import spmd
  flat, tree = tree_flatten(x, is_leaf=_is_key)
  devs = ([device] * len(flat) if isinstance(device, Format) else
          _flatten_axes("device_put device", tree, device))
  out = []
  for v, d in zip(flat, devs):
    if isinstance(d, Format):
      aval = core.get_aval(v)
      if not isinstance(d.layout, (Layout, type(None))):
        raise ValueError("sharding and layout in `Layout` instance should be concrete. Got "
                         f"layout: {d} for input {aval.str_short(short_dtypes=False)}")
      try:
        spmd.check_formats("device_put", [d], [aval])
      except ValueError as e:
        raise ValueError("One of jit outputs with pytree key path result is incompatible "
                         f"with its layout annotation {d.layout}: {e}") from None
      d = d.sharding
    out.append(d)
  return tree_unflatten(tree, out)


def _check_device_put(x, device, src, donate, may_alias):
  """JAX's checks of ``device_put``'s specifications: tree prefixes of ``x`` (the leaves of
  ``device`` devices, shardings or ``None``); ``donate`` and ``may_alias`` not both true."""
  from nbjax.sharding import Sharding, PartitionSpec
  from jaxlib import _jax
  targets = (Sharding, PartitionSpec, _jax.Sharding, _jax.Device)
  treedef = tree_util.tree_structure(x, is_leaf=_is_key)
  flat = {}
  for name, spec in (("device", device), ("source", src)):
    if spec is not None and not isinstance(spec, targets):
      flat[name] = _flatten_axes(f"device_put {name}", treedef, spec)
  for s in flat.get("device", ()):
    if s is not None and not isinstance(s, targets):
      raise ValueError("`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, "
                       "`jax.Device`, `Format`, `jax.memory.Space` or a pytree of these values. "
                       f"Received invalid value: {s}")
  n = treedef.num_leaves
  donate_flat = ([donate] * n if isinstance(donate, bool) else
                 _flatten_axes("device_put donate", treedef, donate))
  alias_flat = ([may_alias] * n if isinstance(may_alias, bool) or may_alias is None else
                _flatten_axes("device_put may_alias", treedef, may_alias))
  if any(m and d for m, d in zip(alias_flat, donate_flat)):
    raise ValueError("may_alias and donate cannot be True at the same time.")


def device_put_sharded(shards, devices):
  """``shards`` (a sequence of pytrees, one per device) stacked leaf by leaf along a new
  leading axis, row ``i`` on ``devices[i]`` (a ``NamedSharding`` over a one-axis mesh), as
  JAX's ``jax._src.api.device_put_sharded`` (deprecated in JAX's public namespace)."""
  import collections.abc
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec
  if not isinstance(shards, collections.abc.Sequence):
    raise TypeError("device_put_sharded `shards` input must be a sequence; "
                    f"got {type(shards)}")
  if len(shards) != len(devices):
    raise ValueError(f"len(shards) = {len(shards)} must equal len(devices) = {len(devices)}.")
  sharding = NamedSharding(Mesh(np.array(devices), ("_device_put_sharded",)),
                           PartitionSpec("_device_put_sharded"))

  def one(*xs):
    avals = [typeof(x) for x in xs]
    for a1, a2 in zip(avals[:-1], avals[1:]):
      if a1 != a2:
        raise ValueError("the shards passed to device_put_sharded must have consistent shape "
                         f"and dtype, but got {a1} and {a2}.")
    # the shards' data as they are (JAX's batched_device_put: already on their devices, no
    # computation across them)
    if _is_key(xs[0]):
      data = np.stack([x._base_array._value for x in xs])
      return device_put(type(xs[0])(xs[0]._impl, _Array(data)), sharding)
    stacked = np.stack([x._value if type(x) is _Array else np.asarray(x) for x in xs])
    return device_put(_Array(stacked, all(dtypes.is_weakly_typed(x) for x in xs)), sharding)
  return tree_map(one, *shards, is_leaf=_is_key)


def device_put_replicated(x, devices):
  """``x`` (a pytree) broadcast along a new leading axis of size ``len(devices)``, row ``i``
  on ``devices[i]``, as JAX's ``jax._src.api.device_put_replicated`` (deprecated in JAX's
  public namespace)."""
  import collections.abc
  from nbjax.sharding import Mesh, NamedSharding, PartitionSpec
  if not isinstance(devices, collections.abc.Sequence) or not devices:
    raise ValueError("`devices` argument to `device_put_replicated must be a non-empty "
                     "sequence.")
  sharding = NamedSharding(Mesh(np.array(devices), ("_device_put_replicated",)),
                           PartitionSpec("_device_put_replicated"))

  def one(v):
    import nbjax.numpy as jnp
    return device_put(jnp.stack([v] * len(devices)), sharding)
  return tree_map(one, x, is_leaf=_is_key)


def device_get(x):
  """``x`` (a pytree) with every Array as a NumPy array."""
  return tree_map(lambda v: np.asarray(v) if isinstance(v, _Array) and not isinstance(
      v.dtype, dtypes.ExtendedDType) else v, x)  # (key arrays stay key arrays, as JAX's)


def typeof(x):
  """The abstract value (``ShapedArray``) of ``x``; a key array's has its key dtype
  (``key<fry>[]``)."""
  from nbjax.prng import PRNGKeyArray
  if isinstance(x, PRNGKeyArray):
    return core.ShapedArray(x.shape, x.dtype)
  return get_aval(x)


def _shape_abstractify(x):
  """eval_shape's argument avals: as jit's, and, as JAX's, an aval itself or any object
  with a ``shape`` and a ``dtype``."""
  if isinstance(x, core.ShapedArray):
    return x
  try:
    return _abstractify(x)
  except TypeError:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
      return core.ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype))
    raise


@api_boundary
def eval_shape(fun, *args, **kwargs):
  """The output shapes/dtypes of ``fun(*args, **kwargs)`` as ``ShapeDtypeStruct``s, computed
  by staging (no FLOPs). Arguments may be arrays or ``ShapeDtypeStruct``s."""
  from nbjax.prng import KeyTy, PRNGKeyArray
  _check_callable(fun)
  if getattr(fun, "_out_shardings", None) is not None and hasattr(fun, "eval_shape"):
    return fun.eval_shape(*args, **kwargs)  # a jit's outputs carry its out_shardings
  key_sds = lambda x: type(x) is ShapeDtypeStruct and type(x.dtype) is KeyTy
  args, kwargs = tree_map(  # a key-typed struct stands for a key array over uint32 data
      lambda x: PRNGKeyArray(x.dtype._impl, ShapeDtypeStruct(
          x.shape + x.dtype._impl.key_shape, np.uint32)) if key_sds(x) else x,
      (args, kwargs), is_leaf=lambda x: key_sds(x) or _is_key(x))
  try:  # as JAX's: jit's trace, so its trace cache (an unhashable callable is wrapped)
    hash(fun)
  except TypeError:
    fun = functools.partial(fun)
  out = jit(fun).eval_shape(*args, **kwargs)
  return tree_map(lambda x: ShapeDtypeStruct(x.shape, x.dtype) if _is_key(x) else x, out,
                  is_leaf=_is_key)


# --------------------------------------------------------------------- pmap


def _pmap_in_axes_error(msg, kwargs):
  """JAX's message for pmap ``in_axes`` that are no tree prefix of the arguments."""
  msg += ("\n\nThe 'full pytree' here is the tuple of arguments passed positionally to the "
          "pmapped function, and the value of `in_axes` must be a tree prefix of that tuple. "
          "But it was not a prefix.")
  if kwargs:
    msg += ("\n\nWhen some arguments are passed by keyword to the pmapped function, they are "
            "not included in the comparison to `in_axes`. Instead, each argument passed by "
            "keyword is mapped over its leading axis. See the description of `in_axes` in the "
            "`pmap` docstring: "
            "https://docs.jax.dev/en/latest/_autosummary/jax.pmap.html#jax.pmap")
  return msg + ("\n\nCheck that the value of the `in_axes` argument to `pmap` is a tree "
                "prefix of the tuple of arguments passed positionally to the pmapped function.")


def _delete_donated(ins, outs):
  """Deletes the donated input arrays ``ins`` that an output reuses (the first of its shape
  and dtype left, as ``jit``'s donation): reading one afterwards raises, as JAX's."""
  from nbjax.interpreters.pjit import _donation_plan
  used, _ = _donation_plan([True] * len(ins), list(map(get_aval, ins)), list(map(get_aval, outs)))
  for i in used:
    if type(ins[i]) is _Array and not any(o is ins[i] for o in outs):
      ins[i].delete()


_pmap_traces: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _pmap_trace_cache(fun, options):
  """The trace cache of the pmaps of ``fun`` with these options, shared by all of them (as
  JAX's: ``pmap(f)(x)`` in a loop traces and compiles once); a fresh one when ``fun`` or the
  options cannot key it."""
  try:
    return _pmap_traces.setdefault(fun, {}).setdefault(options, {})
  except TypeError:  # unhashable (or not weakly referenceable) function or options
    return {}


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(),
         global_arg_shapes=None):
  """Parallel map over devices: ``fun`` runs once per device (SPMD), each device getting one
  slice of the mapped inputs (``in_axes``; ``None``: the same value everywhere), as one
  replicated XLA program; collectives over ``axis_name`` communicate between devices.
  Outputs are stacked along ``out_axes``. The mapped axis size must not exceed the device
  count (``nbjax.device_count()``; ask for more CPU devices with
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` or ``jax_num_cpu_devices``).
  The arrays of ``donate_argnums`` that an output reuses are deleted after the call, as JAX's.
  """
  _check_callable(fun)
  if global_arg_shapes is not None:
    raise ValueError("global_arg_shapes only worked with sharded_jit which has long been "
                     "removed from JAX. Please remove usages of global_arg_shapes.")
  if isinstance(in_axes, list):
    in_axes = tuple(in_axes)
  if not all(type(l) is int for l in tree_util.tree_leaves(in_axes)):
    raise TypeError("pmap in_axes must be an int, None, or (nested) container with those "
                    f"types as leaves, but got {in_axes}.")
  if not all(type(l) is int for l in tree_util.tree_leaves(out_axes)):
    raise TypeError("pmap out_axes must be an int, None, or (nested) container with those "
                    f"types as leaves, but got {out_axes}.")
  if devices is not None and len(devices) == 0:
    raise ValueError("'devices' argument to pmap must be non-empty, or None.")
  if backend not in (None, "cpu"):
    raise RuntimeError(f"Unknown backend {backend}: nbjax runs on the CPU")
  if isinstance(static_broadcasted_argnums, int):
    static_broadcasted_argnums = (static_broadcasted_argnums,)
  statics = tuple(static_broadcasted_argnums)
  donate = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
  if any(i in statics for i in donate):
    raise ValueError("static_broadcasted_argnums and donate_argnums cannot intersect.")
  devs = None if devices is None else tuple(devices)
  name = _fun_name(fun)
  cache = _pmap_trace_cache(fun, (axis_name, in_axes, out_axes, statics, devs, axis_size))
  axes_cache = {}

  def trace(dyn_args, kwargs, static_vals):
    """-> (closed per-device jaxpr with consts as leading invars, consts, flat in axes, flat
    out axes, out tree, size); cached by the signature."""
    args_flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
    ax_flat = axes_cache.get(in_tree)
    if ax_flat is None:
      dyn_in_axes = in_axes
      if isinstance(in_axes, tuple) and statics:
        dyn_in_axes = tuple(a for i, a in enumerate(in_axes) if i not in statics)
      try:
        ax_flat = _flatten_axes("pmap in_axes", in_tree, (dyn_in_axes, 0), kws=True)
      except ValueError:
        errs = tree_util.prefix_errors((dyn_in_axes, 0), (dyn_args, kwargs))
        if not errs:
          raise
        raise ValueError(_pmap_in_axes_error(errs[0]("pmap in_axes").args[0], kwargs)) from None
      if len(axes_cache) < 64:
        axes_cache[in_tree] = ax_flat
    n = _mapped_axis_size(fun, in_tree, args_flat, ax_flat, "pmap", axis_size)
    avals = []
    for x, a in zip(args_flat, ax_flat):
      av = core.get_aval(x)
      if a is not None:
        a %= av.ndim
        av = pxla._map(av, a)
      avals.append(av)
    ax_flat = tuple(None if a is None else a % np.ndim(x) for x, a in zip(args_flat, ax_flat))
    key = (in_tree, tuple((a.shape, a.dtype, a.weak_type) for a in avals), ax_flat, n,
           static_vals, config.trace_key, core.axis_env())
    hit = cache.get(key)
    if hit is not None:
      return hit + (args_flat,)

    def flat(*xs):
      args, kw = tree_util.tree_unflatten(in_tree, list(xs))
      it = iter(args)
      full = [static_vals[statics.index(i)] if i in statics else next(it)
              for i in range(len(args) + len(statics))]
      leaves, tree = tree_util.tree_flatten(fun(*full, **kw))
      box.append(tree)
      return leaves

    box = []
    pxla._stats["traces"] += 1
    with core.extend_axis_env(axis_name, n):
      jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat, avals, fun_name=name)
    out_tree = box[0]
    out_ax = tuple(_flatten_axes("pmap out_axes", out_tree, out_axes))
    for a, o in zip(out_avals, out_ax):
      if o is not None and not -a.ndim - 1 <= o <= a.ndim:
        raise ValueError(f"pmap out_axes entry {o} is out of bounds for an output of rank "
                         f"{a.ndim + 1} (including the mapped axis)")
    out_ax = tuple(None if o is None else o % (a.ndim + 1) for a, o in zip(out_avals, out_ax))
    closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    hit = (closed, consts, (None,) * len(consts) + ax_flat, out_ax, out_tree, n)
    if not any(isinstance(c, core.Tracer) for c in consts):
      cache[key] = hit
    return hit + (args_flat,)

  def split(args):
    """``(static values, dynamic args)`` of a call's positional ``args``."""
    if not statics:
      return (), args
    nargs = len(args)
    for i in statics:
      if not -nargs <= i < nargs:
        raise ValueError(f"pmapped function has static_broadcasted_argnums={statics} but "
                         f"was called with only {nargs} positional "
                         f"argument{'s' if nargs > 1 else ''}. All static broadcasted "
                         "arguments must be passed positionally.")
    st = tuple(args[i] for i in statics)
    for v in st:
      try:
        hash(v)
      except TypeError:
        raise ValueError("Non-hashable static arguments are not supported. An error occurred "
                         f"while trying to hash an object of type {type(v)}, {v}.") from None
    return st, tuple(a for i, a in enumerate(args) if i not in statics)

  mono = [None, None]  # the latest signature's fast run (pxla.runner) and its flattener

  @api_boundary
  @functools.wraps(fun)
  def pmap_f(*args, **kwargs):
    if mono[0] is not None and not kwargs and _ctx.trace is _eval_trace:
      flat = args if mono[1] is None else mono[1](args)
      if flat is not None:
        r = mono[0](flat)
        if r is not _MISS:
          return r
    st, dyn = split(args)
    closed, consts, ax, oax, out_tree, n, flat = trace(dyn, kwargs, st)
    outs = pxla.xla_pmap_p.bind(
        *consts, *flat, call_jaxpr=closed, axis_name=axis_name, axis_size=n,
        global_axis_size=n, devices=devs, backend=backend, in_axes=ax, out_axes=oax,
        name=name, donated_invars=(False,) * len(ax), is_explicit_global_axis_size=False)
    if donate and _ctx.trace is _eval_trace:
      _delete_donated([x for i, a in enumerate(args) if i in donate and i not in statics
                       for x in tree_util.tree_leaves(a)], outs)
    elif not statics and not kwargs and _ctx.trace is _eval_trace:
      run = pxla.runner(closed, consts, out_tree, _MISS, axis_name=axis_name, axis_size=n,
                        devices=devs, in_axes=ax, out_axes=oax)
      kids = tree_util.tree_structure(dyn)
      flat_fn = None if all(k.node is None for k in kids.kids) else tree_util.flattener(kids)
      if run is not None and (flat_fn is not None or all(k.node is None for k in kids.kids)):
        mono[:] = run, flat_fn
    return tree_util.tree_unflatten(out_tree, outs)

  def lower(*args, **kwargs):
    """Ahead-of-time lowering for these arguments (arrays or ``ShapeDtypeStruct``s), as
    JAX's: the ``Lowered`` of ``jit`` over the map (its ``args_info`` of the non-static
    ``(args, kwargs)``; ``.compile()`` takes them)."""
    st, dyn = split(args)
    nargs = len(args)
    pos = [i for i in range(nargs) if i not in statics]
    donated = tuple(k for k, i in enumerate(pos) if i in donate)

    def flat_args_fn(*flat_args, **kw):
      it = iter(flat_args)
      return pmap_f(*[st[statics.index(i)] if i in statics else next(it)
                      for i in range(nargs)], **kw)

    flat_args_fn.__name__ = name
    return jit(flat_args_fn, donate_argnums=donated).lower(*dyn, **kwargs)

  pmap_f.lower = lower
  pmap_f._cache = cache
  pmap_f.__wrapped__ = fun
  return pmap_f


def live_arrays(platform=None):
  """The live ``Array``s (JAX's ``jax.live_arrays``; tracers excluded): a diagnostic that
  scans the garbage collector's objects, so it costs time proportional to the heap."""
  import gc
  if platform not in (None, "cpu"):
    raise RuntimeError(f"Unknown backend {platform}: nbjax runs on the CPU only")
  return [o for o in gc.get_objects() if type(o) is _Array]
