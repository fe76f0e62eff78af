"""``lax.custom_root`` and ``lax.custom_linear_solve``: solvers whose derivatives are
defined implicitly (JAX's semantics), not by differentiating the solver.

Pipeline position: both trace the user's functions to jaxprs, taking what they close over
as explicit inputs (closure conversion), so derivatives reach those values too.
``custom_root`` is a ``custom_jvp`` function of (closed-over values, initial guess): the
solution's tangent is ``-tangent_solve(J, df/dparams)`` with ``J`` the linearization of
``f`` at the solution (the initial guess gets no derivative). ``custom_linear_solve`` binds
``linear_solve_p``, linear in the right-hand side ``b``: its jvp solves again for
``b_dot - matvec_dot(x)``, its transpose runs ``transpose_solve`` on the transposed matvec
(JAX's ``vecmat``), batching vmaps the four jaxprs, and it lowers by inlining ``solve``.
Eagerly it evaluates the ``solve`` jaxpr (the user's solver, primitive by primitive).
"""
from __future__ import annotations

import numpy as np

from nbjax import core, registry
from nbjax.traceback_util import api_boundary
from nbjax.core import Primitive, ShapedArray, get_aval, split_list
from nbjax.custom_derivatives import custom_jvp
from nbjax.interpreters import ad, batching
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import ClosedJaxpr, eval_jaxpr
from nbjax._tree_util import tree_flatten, tree_unflatten, treedef_tuple

__all__ = ["custom_root", "custom_linear_solve", "linear_solve_p"]


def _avals(flat):
  return [ShapedArray(np.shape(x), a.dtype, weak_type=a.weak_type)
          for x in flat for a in [get_aval(x)]]


def _trace(fun, in_tree, avals, name):
  """``fun`` (pytree in ``in_tree`` -> pytree) as (jaxpr with consts as leading invars,
  consts, out_tree)."""
  box = []

  def flat(*xs):
    out, out_tree = tree_flatten(fun(tree_unflatten(in_tree, list(xs))))
    box.append(out_tree)
    return out
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat, list(avals), fun_name=name)
  return pe.convert_constvars_jaxpr(jaxpr), list(consts), box[0]



# ====================================================================== custom_root


@api_boundary
def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
  """Differentiably solve for the root of ``f``.

  Args:
    f: the function whose root is sought; ``f(x)`` has ``x``'s structure.
    initial_guess: the starting point (it receives no derivative).
    solve: ``solve(f, initial_guess) -> solution`` (``(solution, aux)`` if ``has_aux``); it
      is not differentiated.
    tangent_solve: ``tangent_solve(g, y)`` solves the linear system ``g(x) = y`` (``g`` is
      ``f`` linearized at the solution); it must be linear in ``y`` for reverse mode.
    has_aux: whether ``solve`` also returns auxiliary data (not differentiated).

  Returns:
    The solution (and ``aux``); its derivatives with respect to values ``f`` closes over
    follow from the implicit function theorem.
  """
  from nbjax import api
  guess_flat, in_tree = tree_flatten(initial_guess)
  avals = _avals(guess_flat)
  f_jaxpr, f_consts, out_tree = _trace(f, in_tree, avals, "custom_root")
  _check_tree("f", "initial_guess", out_tree, in_tree)
  solve_jaxpr, solve_consts, solution_tree = _trace(lambda x: solve(f, x), in_tree, avals,
                                                    "custom_root solve")
  _check_tree("solve", "initial_guess", solution_tree, in_tree, has_aux)

  def linearize_and_solve(xb):  # traced now, as JAX's: its errors surface at the call
    return tangent_solve(api.linearize(f, xb[0])[1], xb[1])
  l_and_s_jaxpr, l_and_s_consts, ls_tree = _trace(
      linearize_and_solve, treedef_tuple((in_tree, in_tree)), avals * 2,
      "custom_root tangent_solve")
  _check_tree("tangent_solve", "x", ls_tree, in_tree)
  all_consts = (f_consts, solve_consts, l_and_s_consts)
  const_lengths = tuple(map(len, all_consts))
  jaxprs = (f_jaxpr, solve_jaxpr, l_and_s_jaxpr)
  solution_flat = _custom_root(const_lengths, jaxprs, *[c for cs in all_consts for c in cs],
                               *guess_flat)
  return tree_unflatten(solution_tree, solution_flat)


def _check_tree(func_name, expected_name, actual_tree, expected_tree, has_aux=False):
  if has_aux:
    children = actual_tree.children()
    if len(children) != 2:
      raise ValueError(
          f"{func_name}() produced a pytree with structure {actual_tree}, but a pytree "
          "tuple with auxiliary output was expected because has_aux was set to True.")
    actual_tree = children[0]
  if actual_tree != expected_tree:
    raise TypeError(f"{func_name}() output pytree structure must match {expected_name}, "
                    f"got {actual_tree} and {expected_tree}.")


def _check_shapes(func_name, expected_name, actual, expected):
  actual_shapes = [np.shape(x) for x in actual]
  expected_shapes = [np.shape(x) for x in expected]
  if actual_shapes != expected_shapes:
    raise ValueError(f"{func_name}() output shapes must match {expected_name}, "
                     f"got {actual_shapes} and {expected_shapes}")


def _split(args, const_lengths):
  """The consts of each jaxpr (``const_lengths`` of them) and the remaining arguments."""
  *consts, rest = split_list(args, const_lengths)
  return consts, rest


def _custom_root_impl(const_lengths, jaxprs, *args):
  params, initial_guess = _split(args, const_lengths)
  return eval_jaxpr(jaxprs[1], [], *params[1], *initial_guess)


def _root_jvp(const_lengths, jaxprs, primals, tangents):
  """Implicit differentiation: F(m, u*(m)) = 0 gives
  du*(m)[v] = -(d_1 F(m, u*))^{-1} [d_0 F(m, u*)[v]]; the solve is never differentiated
  (the solution comes from ``_custom_root`` again, so higher orders use this rule too)."""
  from nbjax import api
  params, _ = _split(primals, const_lengths)
  sol = _custom_root(const_lengths, jaxprs, *primals)
  n = len(jaxprs[0].outvars)
  solution, aux = list(sol[:n]), list(sol[n:])
  params_dot, _ = _split(tangents, const_lengths)
  f_at_solution = lambda *ps: eval_jaxpr(jaxprs[0], [], *ps, *solution)
  _, rhs = api.jvp(f_at_solution, tuple(params[0]), tuple(params_dot[0]))
  solution_dot = [-t for t in eval_jaxpr(jaxprs[2], [], *params[2], *solution, *rhs)]
  return solution + aux, solution_dot + [ad.zeros_like_jaxval(a) for a in aux]


_custom_root = custom_jvp(_custom_root_impl, nondiff_argnums=(0, 1))
_custom_root.defjvp(_root_jvp)

# ====================================================================== custom_linear_solve


def _ls_abstract_eval(*avals, const_lengths, jaxprs, transposable):
  """``x`` (``b``'s types) and the solve's aux outputs."""
  _, b = _split(avals, const_lengths)
  return [ShapedArray(a.shape, a.dtype, weak_type=a.weak_type) for a in b] + \
      [v.aval for v in jaxprs[2].outvars[len(b):]]


def _call(jaxpr, consts, xs):
  return eval_jaxpr(jaxpr, [], *consts, *xs)


def _ls_impl(*args, const_lengths, jaxprs, transposable):
  (_, _, solve_c, _), b = _split(args, const_lengths)
  return [np.asarray(x) for x in _call(jaxprs[2], solve_c, b)]


def _ls_jvp(primals, tangents, *, const_lengths, jaxprs, transposable):
  from nbjax import api, lax
  (mv_c, _, _, _), b = _split(primals, const_lengths)
  (mv_t, _, _, _), b_t = _split(tangents, const_lengths)
  kw = dict(const_lengths=const_lengths, jaxprs=jaxprs, transposable=transposable)
  x_aux = linear_solve_p.bind(*primals, **kw)
  x, aux = x_aux[:len(b)], x_aux[len(b):]
  b_t = [ad.instantiate_zeros(t) for t in b_t]
  rhs = b_t
  if any(type(t) is not ad.Zero for t in mv_t):
    # d(A x) = A' x + A x_dot = b_dot  =>  x_dot = solve(b_dot - A' x)
    mv_t = [ad.instantiate_zeros(t) for t in mv_t]
    _, ax_dot = api.jvp(lambda *c: _call(jaxprs[0], c, x), tuple(mv_c), tuple(mv_t))
    rhs = [lax.sub(r, a) for r, a in zip(rhs, ax_dot)]
  n = sum(const_lengths)
  x_dot = linear_solve_p.bind(*primals[:n], *rhs, **kw)[:len(b)]
  return x_aux, list(x_dot) + [ad.zeros_like_jaxval(a) for a in aux]  # (aux: no tangent)


def _ls_transpose(cts, *args, const_lengths, jaxprs, transposable):
  (mv_c, vm_c, s_c, ts_c), b = _split(args, const_lengths)
  if any(ad.is_undefined_primal(c) for c in mv_c + vm_c + s_c + ts_c):
    raise NotImplementedError("custom_linear_solve: transposition with respect to the "
                              "linear operator is not supported (as JAX)")
  if not transposable:
    raise TypeError("transpose_solve required for backwards mode automatic differentiation "
                    "of custom_linear_solve")
  cts = [ad.instantiate_zeros(c) if type(c) is ad.Zero else c for c in cts[:len(b)]]
  swapped = (jaxprs[1], jaxprs[0], jaxprs[3], jaxprs[2])
  lens = (const_lengths[1], const_lengths[0], const_lengths[3], const_lengths[2])
  ct_b = linear_solve_p.bind(*vm_c, *mv_c, *ts_c, *s_c, *cts, const_lengths=lens,
                             jaxprs=swapped, transposable=True)[:len(b)]
  return [None] * sum(const_lengths) + list(ct_b)


def _ls_batch(vals, dims, *, const_lengths, jaxprs, transposable):
  """JAX's rule: a fixpoint over the four jaxprs finds which parts of ``x`` and ``b`` are
  batched (consistently for the solve and its transpose), so outputs that depend on no
  batched value stay unbatched."""
  from nbjax.lax.control_flow import _batch_jaxpr
  nm = batching.not_mapped
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not nm)
  vals = [v if d is nm else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
  params, b = _split(vals, const_lengths)
  params_dims, b_dims = _split(dims, const_lengths)
  params_bat = [[d is not nm for d in ds] for ds in params_dims]
  orig_b_bat = [d is not nm for d in b_dims]
  closed = [ClosedJaxpr(j, []) for j in jaxprs]

  def batch(k, ops_bat, instantiate):
    in_dims = [0 if bt else None for bt in params_bat[k] + list(ops_bat)]
    new, consts, out_dims = _batch_jaxpr(closed[k], size, in_dims,
                                         [0 if i else None for i in instantiate], None)
    return (new.jaxpr, consts), [d is not None for d in out_dims]

  or_ = lambda *ls: [any(t) for t in zip(*ls)]
  nb, num_aux = len(b), len(jaxprs[2].outvars) - len(b)
  num_t_aux = len(jaxprs[3].outvars) - nb
  b_bat, x_bat = orig_b_bat, [False] * (nb + num_aux)
  for _ in range(1 + 2 * nb + num_aux):
    s_new, solve_x_bat = batch(2, b_bat, x_bat)
    vm_new, vecmat_x_bat = batch(1, b_bat, b_bat)
    x_bat_out = or_(vecmat_x_bat + [True] * num_aux, solve_x_bat)  # (aux: batched)
    mv_new, matvec_b_bat = batch(0, x_bat_out[:nb], b_bat)
    ts_new, solve_t_b_bat = batch(3, x_bat_out[:nb], x_bat_out[:nb] + [True] * num_t_aux)
    b_bat_out = or_(matvec_b_bat, solve_t_b_bat[:nb], orig_b_bat)
    if x_bat_out == x_bat and b_bat_out == b_bat:
      break
    x_bat, b_bat = x_bat_out, b_bat_out
  else:
    raise AssertionError("custom_linear_solve batching: fixedpoint not reached")
  new = (mv_new, vm_new, s_new, ts_new)  # (each jaxpr's consts lead its params)
  new_params = [list(c) + ps for (_, c), ps in zip(new, params)]
  new_b = [batching.bdim_at_front(x, nm, size) if now and not was else x
           for x, was, now in zip(b, orig_b_bat, b_bat)]
  outs = linear_solve_p.bind(*[x for ps in new_params for x in ps], *new_b,
                             const_lengths=tuple(map(len, new_params)),
                             jaxprs=tuple(j for j, _ in new), transposable=transposable)
  return outs, [0 if bt else nm for bt in solve_x_bat]


linear_solve_p = Primitive("custom_linear_solve")
linear_solve_p.multiple_results = True
registry.register(
    linear_solve_p, family="control_flow", impls={"python": _ls_impl},
    abstract_eval=_ls_abstract_eval, jvp=_ls_jvp, transpose=_ls_transpose, batch=_ls_batch,
    meta=dict(note="python: the user's solve jaxpr, primitive by primitive"))


@api_boundary
def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
  """Solve ``matvec(x) == b`` with ``solve``, differentiating implicitly (JAX's semantics).

  Args:
    matvec: the linear operator, ``x -> A x`` (pytree to pytree of ``b``'s structure).
    b: the right-hand side.
    solve: ``solve(matvec, b) -> x`` (``(x, aux)`` with ``has_aux``).
    transpose_solve: ``transpose_solve(vecmat, b) -> x`` for the transposed system (needed
      for reverse mode unless ``symmetric``).
    symmetric: ``A`` is symmetric: ``solve`` serves as ``transpose_solve``.
    has_aux: ``solve`` also returns auxiliary data (not differentiated).

  Returns:
    ``x`` (and ``aux``): linear in ``b``; derivatives with respect to values ``matvec``
    closes over follow from ``A x = b``.
  """
  from nbjax import api
  b_flat, tree = tree_flatten(b)
  avals = _avals(b_flat)

  aux_trees = []

  def checked(fun, name, aux):  # JAX's output checks, in the traced function
    def f(bb):
      out = fun(bb)
      y = out[0] if aux and isinstance(out, (tuple, list)) and len(out) == 2 else out
      _check_shapes(name, "b", tree_flatten(y)[0], b_flat)
      _check_tree(name, "b", tree_flatten(out)[1], tree, aux)
      if aux:  # x, then the aux leaves (outputs of the primitive too)
        aux_flat, aux_tree = tree_flatten(out[1])
        aux_trees.append(aux_tree)
        return (y, aux_flat)
      return y
    return f
  mv_j, mv_c, _ = _trace(checked(matvec, "matvec", False), tree, avals, "matvec")
  s_j, s_c, _ = _trace(checked(lambda bb: solve(matvec, bb), "solve", has_aux), tree, avals,
                       "solve")
  if symmetric:
    vm_j, vm_c = mv_j, mv_c
  else:
    def vecmat(y):
      (out,) = api.linear_transpose(matvec, tree_unflatten(tree, b_flat))(y)
      return out
    vm_j, vm_c, _ = _trace(vecmat, tree, avals, "vecmat")
  if symmetric:
    ts_j, ts_c = s_j, s_c
  elif transpose_solve is not None:
    ts_j, ts_c, _ = _trace(checked(lambda bb: transpose_solve(vecmat, bb), "transpose_solve",
                                   has_aux), tree, avals, "transpose_solve")
  else:  # a stand-in (the transpose rule raises JAX's error)
    ts_j, ts_c = s_j, s_c
  lens = (len(mv_c), len(vm_c), len(s_c), len(ts_c))
  x = linear_solve_p.bind(*mv_c, *vm_c, *s_c, *ts_c, *b_flat, const_lengths=lens,
                          jaxprs=(mv_j, vm_j, s_j, ts_j),
                          transposable=symmetric or transpose_solve is not None)
  nb = len(b_flat)
  if has_aux:
    return tree_unflatten(tree, list(x[:nb])), tree_unflatten(aux_trees[0], list(x[nb:]))
  return tree_unflatten(tree, list(x))


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import mlir  # noqa: E402


def _ls_lowering(ctx, *args, const_lengths, jaxprs, transposable):
  (_, _, s_c, _), b = _split(args, const_lengths)
  return mlir.jaxpr_subcomp(ctx.module_context, jaxprs[2], [], [*s_c, *b])


lowering.register(linear_solve_p, _ls_lowering)
