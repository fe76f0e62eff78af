"""Registry-generated reverse-mode tests: for every registered primitive,

* VJP against JVP by the inner-product identity ``<ct, J t> == <J^T ct, t>`` (random ``t`` and
  ``ct``), for each declared float and complex dtype, eagerly and with the VJP under ``jit``;
* in float64 and complex128: the reverse-mode gradient of a scalarised output
  ``Re(sum(out * w))`` against central differences (order 1), and the reverse-mode gradient
  of a directional derivative of that gradient against central differences (order 2);
* every argument (or set of arguments) a primitive is linear in, found numerically
  (``f(a x + b y) == a f(x) + b f(y)``): ``linear_transpose`` by the inner-product identity;
* zero cotangents through the primitives ``meta`` marks non-differentiable;
* JAX's values where the derivative is a convention (ties of max/min, clamp's bounds);
* the registry table: a transpose for every linear primitive, a jvp for every differentiable.

The pairing is ``Re(sum(a * b))`` (no conjugate): JAX's transposes are transposes of
real-linear maps under it (``imag``'s transpose is ``ct -> -i ct``), and grad of a real
function of complex ``z`` is the ``g`` with ``dF(t) = Re(sum(g * t))``.

Cases come from ``nbjax.testing.primitive_cases`` (as in test_generated_transforms.py), plus
the index modes the samples leave out (``EXTRA``). A case is skipped only where there is no
derivative: one-sided differences disagree (ties, clamps), or the function is not finite;
cases whose parameters have no derivative in JAX (``meta['jvp_undefined']``: eig's
eigenvectors) are left out (tests/test_generated_transforms.py checks they raise), and
derivatives above ``meta['jvp_order']`` must raise NotImplementedError (as JAX's).
"""
import numpy as np
import pytest

import nbjax
from nbjax import dtypes, lax, registry
from nbjax import testing as T
import nbjax.numpy as jnp

PRIMS = registry.primitives(builtin_only=True)
# ``meta['reverse'] is False``: forward-mode only (while: JAX's error, tested with it)
DIFF = [p for p in PRIMS if p.meta.get("differentiable") is not False and p.meta.get("dtypes")
        and p.meta.get("reverse") is not False]
NONDIFF = [p for p in PRIMS if p.meta.get("differentiable") is False]
INEXACT = [np.dtype(d) for d in ("float32", "float64", "complex64", "complex128")]
MAX_GRAD_CASES = 6
MAX_JIT_CASES = 3


def _declared(prim, among=INEXACT):
  ds = {np.dtype(d) for d in prim.meta.get("dtypes", ())}
  return [d for d in among if d in ds]


DIFF_DTYPES = [(p, d) for p in DIFF for d in _declared(p)]
HI_DTYPES = [(p, d) for p in DIFF for d in _declared(p, INEXACT[1::2])]


def _id(x):
  return x.name if hasattr(x, "multiple_results") else str(x)

# ------------------------------------------------------------------ cases

_i = lambda v: np.asarray(v, np.int32)
_G1 = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
_S1 = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0,))
_M = lax.GatherScatterMode
_SC = dict(dimension_numbers=_S1, indices_are_sorted=False, update_jaxpr=None, update_consts=())


def _scatter_modes(unique_only):
  def cases(r):
    out = [([r(5, 3), _i([[0], [9]]), r(2, 3)], dict(_SC, unique_indices=True, mode=_M.CLIP)),
           ([r(5, 3), _i([[4], [1]]), r(2, 3)],
            dict(_SC, unique_indices=True, mode=_M.PROMISE_IN_BOUNDS))]
    if not unique_only:  # overlapping windows
      out.append(([r(5, 3), _i([[1], [1], [3], [1]]), r(4, 3)],
                  dict(_SC, unique_indices=False, mode=_M.FILL_OR_DROP)))
    return out
  return cases


# The index modes the registry samples leave out: out-of-bounds starts and indices per mode,
# overlapping scatter windows. ``r(*shape)`` draws a random operand of the case's dtype.
EXTRA = {
    "gather": lambda r: [
        ([r(5, 3), _i([[1], [7], [-2]])],
         dict(dimension_numbers=_G1, slice_sizes=(1, 3), unique_indices=False,
              indices_are_sorted=False, mode=_M.FILL_OR_DROP, fill_value=2.0))],
    "scatter": _scatter_modes(False),
    "scatter-add": _scatter_modes(False),
    "scatter-sub": _scatter_modes(False),
    "scatter-mul": _scatter_modes(True),  # JAX: its updates' gradient needs unique indices
    "dynamic_slice": lambda r: [([r(5), _i(4)], dict(slice_sizes=(3,))),
                                ([r(4, 6), _i(-1), _i(5)], dict(slice_sizes=(2, 3)))],
    "dynamic_update_slice": lambda r: [([r(5), r(2), _i(7)], {}),
                                       ([r(4, 6), r(2, 3), _i(-2), _i(5)], {})],
}


# Primitives of Hermitian matrices (they read one triangle; JAX's jvp rules take Hermitian
# tangents): central differences along Hermitian directions.
HERMITIAN = {"cholesky", "eigh"}
# Complex eigenvectors and singular vectors are unique only up to a phase per column: central
# differences of the phase-invariant |v|^2 (with the eigen/singular values).
PHASE_FREE = {"eigh": lambda v, w: [v * v.conj(), w],
              "svd": lambda *o: [o[0]] if len(o) == 1 else [o[1] * o[1].conj(), o[0],
                                                            o[2] * o[2].conj()]}


def _cases(prim, dtype, n=None, seed=0):
  """The sample cases (``n``: at most that many, spread over the list) and the extra ones."""
  rng = np.random.default_rng(seed)
  cases = [c for c in T.primitive_cases(prim, dtype, rng) if T.jvp_defined(prim, c[1])]
  if n is not None and len(cases) > n:
    cases = [cases[i] for i in sorted({round(k) for k in np.linspace(0, len(cases) - 1, n)})]
  if prim.name in EXTRA:
    cases = cases + EXTRA[prim.name](lambda *s: T.sample_values(rng, s, dtype))
  if not cases:
    pytest.skip(f"'{prim.name}': no meta['samples'] to draw cases from")
  return cases

# ------------------------------------------------------------------ helpers


def _outs(x, prim):
  return list(x) if prim.multiple_results else [x]


def _inexact(x):
  return dtypes.is_inexact(np.asarray(x).dtype)


def _finite(xs):
  return all(np.asarray(x).dtype == dtypes.float0 or np.all(np.isfinite(np.asarray(x)))
             for x in xs)


def _diff_argnums(prim, args):
  nondiff = set(prim.meta.get("nondiff_argnums", ()))
  return [i for i, a in enumerate(args) if i not in nondiff and _inexact(a)]


def _partial(prim, params, args, argnums):
  """``prim`` as a function of the arguments ``argnums`` only (the rest held fixed)."""
  def f(*xs):
    a = list(args)
    for i, x in zip(argnums, xs):
      a[i] = x
    return prim.bind(*a, **params)
  f.__name__ = prim.name
  return f


def _random_like(rng, xs):
  return tuple(T.rand_like(rng, x) for x in xs)


def _ct_tree(prim, cts):
  return list(cts) if prim.multiple_results else cts[0]


def _pair(a, b):
  """``Re(sum(a * b))`` in complex128, and the scale ``sum(|a| |b|)``."""
  a, b = np.asarray(a), np.asarray(b)
  if a.dtype == dtypes.float0 or b.dtype == dtypes.float0:
    return 0.0, 0.0
  a, b = a.astype(np.complex128), b.astype(np.complex128)
  return float(np.sum(a * b).real), float(np.sum(np.abs(a) * np.abs(b)))


def _identity(jt, t, ct, ct_in):
  """``(<ct, J t>, <J^T ct, t>, scale)``."""
  lhs = [_pair(c, j) for c, j in zip(ct, jt)]
  rhs = [_pair(c, x) for c, x in zip(ct_in, t)]
  return (sum(v for v, _ in lhs), sum(v for v, _ in rhs),
          sum(s for _, s in lhs) + sum(s for _, s in rhs))


_EPS = {np.dtype(np.float16): 5e-3, dtypes._bf16: 2e-2, np.dtype(np.float32): 2e-4,
        np.dtype(np.complex64): 2e-4}


def _rtol(prim, dtype, outs=()):
  """Relative tolerance of an inner-product identity at ``dtype`` with outputs ``outs``."""
  t = max([_EPS.get(np.dtype(dtype), 1e-10)] + [_EPS.get(np.asarray(o).dtype, 0) for o in outs])
  mt = prim.meta.get("tol")
  if isinstance(mt, dict) and np.dtype(dtype) in mt:
    t = max(t, (10 if t > 1e-10 else 1) * mt[np.dtype(dtype)][0])
  return t


def _low(xs):
  return any(np.asarray(x).dtype in _EPS for x in xs)


def _assert_identity(prim, dtype, what, lhs, rhs, scale, rtol, params, args):
  assert abs(lhs - rhs) <= rtol * (scale + 1e-300), (
      f"'{prim.name}' {dtype} {what}: <ct, J t> = {lhs} but <J^T ct, t> = {rhs} "
      f"(params {params}, shapes {[np.shape(a) for a in args]})")

# ------------------------------------------------------------------ VJP vs JVP


def _jit_vjp(prim, f, dargs, ct):
  """The VJP under jit; float0 cotangents (of integer outputs) are closed over."""
  nz = [i for i, c in enumerate(ct) if c.dtype != dtypes.float0]

  def vjp_fun(d, c_nz):
    c = list(ct)
    for i, x in zip(nz, c_nz):
      c[i] = x
    return nbjax.vjp(f, *d)[1](_ct_tree(prim, c))
  return T.fast_jit(vjp_fun)(dargs, [ct[i] for i in nz])


def _check_identity(prim, dtype, jit):
  rng = np.random.default_rng(3)
  checked = 0
  for args, params in _cases(prim, dtype, MAX_JIT_CASES if jit else None):
    argnums = _diff_argnums(prim, args)
    if not argnums:
      continue
    f = _partial(prim, params, args, argnums)
    dargs = tuple(args[i] for i in argnums)
    out = _outs(f(*dargs), prim)
    t, ct = _random_like(rng, dargs), _random_like(rng, out)
    with np.errstate(invalid="ignore", divide="ignore"):
      _, jt = nbjax.jvp(f, dargs, t)
    if not _finite(_outs(jt, prim)):
      continue  # no derivative here (the max of an empty array is -inf)
    if jit:
      ct_in = _jit_vjp(prim, f, dargs, ct)
    else:
      ct_in = nbjax.vjp(f, *dargs)[1](_ct_tree(prim, ct))
    assert len(ct_in) == len(dargs)
    for c, x in zip(ct_in, dargs):
      assert np.shape(c) == np.shape(x) and np.asarray(c).dtype == np.asarray(x).dtype, (
          f"'{prim.name}' cotangent {np.shape(c)} {np.asarray(c).dtype} for primal "
          f"{np.shape(x)} {np.asarray(x).dtype}")
    _assert_identity(prim, dtype, "vjp", *_identity(_outs(jt, prim), t, ct, ct_in),
                     _rtol(prim, dtype, out), params, args)
    checked += 1
  if not checked:
    pytest.skip(f"'{prim.name}' {dtype}: no case with a differentiable argument")


@pytest.mark.parametrize("prim,dtype", DIFF_DTYPES, ids=_id)
def test_vjp_matches_jvp(prim, dtype):
  _check_identity(prim, dtype, jit=False)


@pytest.mark.parametrize("prim,dtype", DIFF_DTYPES, ids=_id)
def test_vjp_matches_jvp_under_jit(prim, dtype):
  _check_identity(prim, dtype, jit=True)

# ------------------------------------------------------------------ gradients vs differences


def _np_scalar(F):
  return lambda *xs: float(np.asarray(F(*xs)))


def _directional(g, x, t, eps):
  return (g(*T._axpy(eps, t, x)) - g(*T._axpy(-eps, t, x))) / (2 * eps)


def _at_kink(g, x, t):
  """The one-sided differences of scalar ``g`` at ``x`` along ``t`` disagree by more than
  a curvature explains (their gap does not shrink with the step): ties, clamps."""
  g0, gaps = g(*x), []
  for eps in (1e-4, 1e-5):
    fwd = (g(*T._axpy(eps, t, x)) - g0) / eps
    bwd = (g0 - g(*T._axpy(-eps, t, x))) / eps
    gaps.append((abs(fwd - bwd), abs(fwd) + abs(bwd) + 1))
  (d0, _), (d1, scale) = gaps
  return d1 > 1e-6 * scale and d1 > 0.3 * d0


def _real_sum(a, w):
  return jnp.sum(lax.real(a * w) if np.iscomplexobj(w) else a * w)


def _scalarised(prim, f, dargs, rng):
  """``F(x) = Re(sum(f(x) * w))`` over the inexact outputs, for a fixed random ``w``."""
  outs = lambda *xs: _outs(f(*xs), prim)
  if prim.name in PHASE_FREE and any(np.iscomplexobj(x) for x in dargs):
    outs = lambda *xs: PHASE_FREE[prim.name](*_outs(f(*xs), prim))
  ws = [T.rand_like(rng, o) for o in outs(*dargs)]

  def F(*xs):
    return sum(_real_sum(o, w) for o, w in zip(outs(*xs), ws) if w.dtype != dtypes.float0)
  return F


def _hold_fixed(F, dargs, t, eps):
  """Zero the directions along which ``F`` has no finite central difference (an argument
  like polygamma's order); ``None`` when none is left."""
  g, t = _np_scalar(F), list(t)
  for i in range(len(t)):
    only = tuple(ti if j == i else np.zeros_like(ti) for j, ti in enumerate(t))
    if not np.isfinite(_directional(g, dargs, only, eps)):
      t[i] = np.zeros_like(t[i])
  return tuple(t) if np.isfinite(_directional(g, dargs, tuple(t), eps)) else None


def _check_grad(prim, dtype, order):
  rng = np.random.default_rng(5)
  mt = prim.meta.get("tol")
  checked = 0
  for args, params in _cases(prim, dtype, MAX_GRAD_CASES):
    argnums = _diff_argnums(prim, args)
    if not argnums or not all(np.size(args[i]) for i in argnums):
      continue
    f = _partial(prim, params, args, argnums)
    dargs = tuple(args[i] for i in argnums)
    out = _outs(f(*dargs), prim)
    if not any(_inexact(o) for o in out):
      continue  # nothing to differentiate (a cast to an integer type)
    if any(np.asarray(o).dtype in (np.float16, dtypes._bf16) for o in out):
      continue  # central differences of 16-bit outputs are noise (the jvp identity holds)
    # float32 outputs (casts): a wider step and a looser tolerance
    eps, tol = (1e-3, (2e-3, 1e-2)) if _low(out) else (1e-5, (1e-5, 2e-4))
    tol = tol[order - 1]
    if isinstance(mt, dict) and np.dtype(dtype) in mt:
      tol = max(tol, 10 * mt[np.dtype(dtype)][0])
    F = _scalarised(prim, f, dargs, rng)
    t = _random_like(rng, dargs)
    if prim.name in HERMITIAN:
      t = tuple((x + np.swapaxes(x, -1, -2).conj()) / 2 for x in t)
    t = _hold_fixed(F, dargs, t, eps)
    if t is None or _at_kink(_np_scalar(F), dargs, t):
      continue  # the edge of the domain, or no derivative here
    every = tuple(range(len(dargs)))
    if order == 1:
      G = F
    else:  # a directional derivative of the gradient, itself by reverse mode
      u = _random_like(rng, dargs)

      def G(*xs):
        return sum(_real_sum(g, ui) for g, ui in zip(nbjax.grad(F, every)(*xs), u))
    if order > prim.meta.get("jvp_order", order):  # as JAX: no derivative of this order
      with pytest.raises(NotImplementedError):
        nbjax.grad(G, every)(*dargs)
      checked += 1
      continue
    got = sum(_pair(g, ti)[0] for g, ti in zip(nbjax.grad(G, every)(*dargs), t))
    num = _directional(_np_scalar(G), dargs, t, eps)
    if not np.isfinite(num):
      continue
    np.testing.assert_allclose(got, num, rtol=tol, atol=tol, err_msg=(
        f"'{prim.name}' {dtype} order-{order} gradient along t vs central differences, "
        f"params {params}, shapes {[np.shape(a) for a in dargs]}"))
    checked += 1
  if not checked:
    pytest.skip(f"'{prim.name}': every case sits at a kink or the edge of the domain")


@pytest.mark.parametrize("prim,dtype", HI_DTYPES, ids=_id)
def test_grad_vs_central_differences(prim, dtype):
  _check_grad(prim, dtype, 1)


@pytest.mark.parametrize("prim,dtype", HI_DTYPES, ids=_id)
def test_grad_of_grad_vs_central_differences(prim, dtype):
  _check_grad(prim, dtype, 2)


@pytest.mark.parametrize("prim", [p for p, d in HI_DTYPES if d == np.float64], ids=_id)
def test_jacrev_matches_jacfwd(prim):
  """``jacrev`` (vmap of the VJP over the output basis: batching of the transposes' own
  primitives) against ``jacfwd``, on the first case with nonempty float64 operands."""
  for args, params in _cases(prim, np.dtype(np.float64)):
    argnums = _diff_argnums(prim, args)
    g = _partial(prim, params, args, argnums)
    dargs = tuple(args[i] for i in argnums)
    out = _outs(g(*dargs), prim)
    keep = [i for i, o in enumerate(out) if _inexact(o)]  # lu's pivots: integers
    f = lambda *a, g=g, keep=keep: [_outs(g(*a), prim)[i] for i in keep]
    if argnums and all(np.size(a) for a in args) and keep and all(
        np.asarray(x).dtype == np.float64 for x in [*dargs, *f(*dargs)]):
      break
  else:
    pytest.skip(f"'{prim.name}': no case with nonempty float64 operands and outputs")
  every = tuple(range(len(dargs)))
  rev, fwd = nbjax.jacrev(f, every)(*dargs), nbjax.jacfwd(f, every)(*dargs)
  for a, b in zip(nbjax.tree_util.tree_leaves(rev), nbjax.tree_util.tree_leaves(fwd)):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != dtypes.float0:
      np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10, err_msg=prim.name)

# ------------------------------------------------------------------ linear primitives


def _linear_in(f, xs, rng, rtol):
  """``f`` is numerically linear (and not identically empty): ``f(a x + b y) == a f(x) +
  b f(y)``."""
  ys = _random_like(rng, xs)
  a, b = 0.7, -1.3
  lhs = f(*[np.asarray(a * np.asarray(x) + b * y, np.asarray(x).dtype) for x, y in zip(xs, ys)])
  rhs = [a * np.asarray(p) + b * np.asarray(q) for p, q in zip(f(*xs), f(*ys))]
  return any(np.size(r) for r in rhs) and all(
      np.sum(np.abs(np.asarray(l) - r)) <= rtol * (np.sum(np.abs(r)) + np.sum(np.abs(l)))
      for l, r in zip(lhs, rhs))


TRANSPOSABLE = [(p, d) for p in PRIMS if p.transpose is not None or p.meta.get("linear")
                for d in _declared(p)]


@pytest.mark.parametrize("prim,dtype", TRANSPOSABLE, ids=_id)
def test_linear_transpose_identity(prim, dtype):
  rng = np.random.default_rng(11)
  checked = 0
  for args, params in _cases(prim, dtype):
    diff = _diff_argnums(prim, args)
    # every argument alone, and all together (add and pad are linear only jointly)
    for argnums in [[i] for i in diff] + ([diff] if len(diff) > 1 else []):
      xs = tuple(args[i] for i in argnums)
      if not all(np.size(x) for x in xs):
        continue
      g = _partial(prim, params, args, argnums)
      keep = [i for i, o in enumerate(_outs(g(*xs), prim)) if _inexact(o)]
      # the inexact outputs (sort's integer keys do not depend on the other operands)
      f = lambda *a, g=g, keep=keep: [_outs(g(*a), prim)[i] for i in keep]
      out = f(*xs)
      if not out or not _linear_in(f, xs, rng, 10 * _rtol(prim, dtype, out)):
        continue
      t, ct = _random_like(rng, xs), list(_random_like(rng, out))
      if prim.name == "scatter" and not params["unique_indices"]:
        # as JAX: which of overlapping updates wins is not known statically
        with pytest.raises(NotImplementedError, match="unique_indices=True"):
          nbjax.linear_transpose(f, *xs)(ct)
        continue
      ct_in = nbjax.linear_transpose(f, *xs)(ct)
      for c, x in zip(ct_in, xs):
        assert np.asarray(c).dtype == np.asarray(x).dtype and np.shape(c) == np.shape(x)
      _assert_identity(prim, dtype, f"transpose in arguments {argnums}",
                       *_identity(f(*t), t, ct, ct_in), _rtol(prim, dtype, out), params, args)
      checked += 1
  if prim.meta.get("linear"):
    assert checked, f"'{prim.name}' is declared linear but no case is linear in an argument"
  elif not checked:
    pytest.skip(f"'{prim.name}' {dtype}: no case is linear in its arguments")

# ------------------------------------------------------------------ non-differentiable


@pytest.mark.parametrize("prim", [p for p in NONDIFF if _declared(p)], ids=_id)
def test_nondifferentiable_gives_zero_cotangents(prim):
  dtype = _declared(prim)[-1]
  rng = np.random.default_rng(13)
  for args, params in _cases(prim, dtype, 2):
    argnums = [i for i, a in enumerate(args) if _inexact(a)]
    if not argnums:
      continue
    f = _partial(prim, params, args, argnums)
    dargs = tuple(args[i] for i in argnums)
    if prim.meta.get("jvp_error"):  # JAX's own error (callbacks): differentiating is one
      exc, msg = prim.meta["jvp_error"]
      with pytest.raises(exc, match=msg):
        nbjax.vjp(f, *dargs)
      continue
    if prim.jvp is None:  # as in JAX (nextafter): differentiating it is an error
      with pytest.raises(NotImplementedError,
                         match=f"Differentiation rule for '{prim.name}' not implemented"):
        nbjax.vjp(f, *dargs)
      continue
    out, f_vjp = nbjax.vjp(f, *dargs)
    for c in f_vjp(_ct_tree(prim, _random_like(rng, _outs(out, prim)))):
      assert not np.any(np.asarray(c)), f"'{prim.name}' cotangent {c}"

# ------------------------------------------------------------------ JAX's conventions


@pytest.mark.parametrize("jit", [False, True])
def test_ties_and_bounds_as_jax(jit):
  """Where the derivative is a convention, JAX's values: ties share the gradient equally
  (max/min, reduce_max/reduce_min), clamp passes none at its bounds, abs takes +1 at 0."""
  J = nbjax.jit if jit else (lambda f: f)
  g = lambda f, *a, **k: np.asarray(J(nbjax.grad(f, **k))(*a))
  x = np.array([1.0, 3.0, 3.0, -2.0])
  np.testing.assert_array_equal(g(lambda v: lax.reduce_max(v, (0,)), x), [0, .5, .5, 0])
  np.testing.assert_array_equal(g(lambda v: lax.reduce_min(v, (0,)), -x), [0, .5, .5, 0])
  m = np.array([[1.0, 1.0, 0.0], [2.0, 0.0, 2.0]])
  np.testing.assert_array_equal(g(lambda v: (lax.reduce_max(v, (1,)) * np.array([1., 2.])).sum(),
                                  m), [[.5, .5, 0], [1, 0, 1]])
  assert J(nbjax.grad(lax.max, argnums=(0, 1)))(2.0, 2.0) == (0.5, 0.5)
  assert J(nbjax.grad(lax.min, argnums=(0, 1)))(2.0, 2.0) == (0.5, 0.5)
  assert J(nbjax.grad(lax.clamp, argnums=(0, 1, 2)))(1.0, 1.0, 2.0) == (0.0, 0.0, 0.0)
  assert J(nbjax.grad(lax.clamp, argnums=(0, 1, 2)))(1.0, 2.0, 2.0) == (0.0, 0.0, 0.0)
  assert J(nbjax.grad(lax.clamp, argnums=(0, 1, 2)))(1.0, 3.0, 2.0) == (0.0, 0.0, 1.0)
  assert J(nbjax.grad(lax.abs))(0.0) == 1.0
  for f in (lax.round, lax.floor, lax.ceil, lax.sign):
    assert J(nbjax.grad(f))(1.5) == 0.0

# ------------------------------------------------------------------ the table


def test_registry_table_rules_complete():
  rows = {r["primitive"]: r for r in registry.rows()}
  for p in PRIMS:
    r = rows[p.name]
    if p.meta.get("linear"):
      assert p.transpose is not None and r["transpose"] == "yes", p.name
    elif p.transpose is None:
      assert r["transpose"] == "n/a", (p.name, r["transpose"])
    if p.meta.get("by_trace"):  # custom_jvp/custom_vjp calls: the traces apply the rules
      assert p.jvp is None and r["jvp"] == r["batch"] == "trace", p.name
    elif p.meta.get("differentiable") is not False:
      assert p.jvp is not None and r["jvp"] == "yes", p.name
  builtin = [rows[p.name] for p in PRIMS]
  assert "-" not in {r["transpose"] for r in builtin} | {r["jvp"] for r in builtin}
