"""Registry-generated transformation tests: for every registered primitive,

* jvp vs central differences in float64 along random directions (differentiable ones), and
  zero/float0 tangents for the ones ``meta`` marks non-differentiable;
* vmap vs a Python loop over slices, for every placement of the batch dimension in every
  argument (unbatched included; all-unbatched with ``axis_size``), and the batched jaxpr's
  equations independent of the batch size (one batched bind, no loop over the batch);
* jvp of vmap, vmap of jvp, and jvp of jvp of vmap on the first case.

Cases come from ``nbjax.testing.primitive_cases`` (``meta['samples']``, or ``arity``/``domain``
for elementwise primitives). A primitive without cases or rules is skipped with the reason.
"""
import numpy as np
import pytest

import nbjax
from nbjax import dtypes, registry
from nbjax import testing as T

PRIMS = registry.primitives(builtin_only=True)
NONDIFF = [p for p in PRIMS if p.meta.get("differentiable") is False]
DIFF = [p for p in PRIMS if p.meta.get("differentiable") is not False]
B = 3  # batch size
MAX_CASES = 6


def _ids(p):
  return p.name


def _float_dtype(prim):
  ds = [np.dtype(d) for d in prim.meta.get("dtypes", ())]
  for d in (np.float64, np.complex128):
    if np.dtype(d) in ds:
      return np.dtype(d)
  return None


def _any_dtype(prim):
  ds = [np.dtype(d) for d in prim.meta.get("dtypes", ())]
  if not ds:
    return None
  for d in (np.float64, np.float32, np.int64, np.int32, np.bool_):
    if np.dtype(d) in ds:
      return np.dtype(d)
  return ds[0]


def _cases(prim, dtype, seed=0):
  cases = T.primitive_cases(prim, dtype, np.random.default_rng(seed))
  if not cases:
    pytest.skip(f"'{prim.name}': no meta['samples'] (nor elementwise arity) to draw cases from")
  return cases[:MAX_CASES]


def _outs(x, prim):
  return list(x) if prim.multiple_results else [x]


def _tol(prim, dtype, jvp=False):
  t = T.default_tolerance(dtype, jvp=jvp)
  mt = prim.meta.get("tol", {}).get(np.dtype(dtype)) if isinstance(prim.meta.get("tol"), dict) else None
  if mt is not None:
    return max(t, mt[0]), max(t, mt[1])
  return t, t

# ------------------------------------------------------------------ jvp


@pytest.mark.parametrize("prim", DIFF, ids=_ids)
def test_jvp_vs_central_differences(prim):
  diff = prim.meta.get("differentiable")
  if prim.jvp is None and prim.family == "call":
    pytest.skip(f"'{prim.name}': each trace processes it with the user's rule "
                "(tests/test_custom_derivatives.py)")
  if prim.jvp is None:
    pytest.fail(f"'{prim.name}' has no jvp rule and meta['differentiable'] is {diff!r}")
  dtype = _float_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}' accepts no float64/complex128 dtype for central differences")
  rng = np.random.default_rng(1)
  nondiff = set(prim.meta.get("nondiff_argnums", ()))
  checked, unsupported = 0, []
  for args, params in _cases(prim, dtype):
    f = T.prim_fun(prim, params)
    if not T.jvp_defined(prim, params):  # JAX's NotImplementedError, not a derivative
      with pytest.raises(NotImplementedError):
        nbjax.jvp(f, tuple(args), tuple(T.rand_like(rng, a) for a in args))
      continue
    tangents = tuple(np.zeros(np.shape(a), dtypes.float0) if i in nondiff and
                     not dtypes.is_inexact(np.asarray(a).dtype) else
                     np.zeros_like(a) if i in nondiff else T.rand_like(rng, a)
                     for i, a in enumerate(args))
    out_dtypes = [np.asarray(o).dtype for o in _outs(f(*args), prim)]
    if dtypes._bf16 in out_dtypes:
      continue  # rounded to 8 bits: central differences are noise (the jvp identity holds)
    low = any(d in (np.float32, np.complex64, np.float16) for d in out_dtypes)
    rtol, atol = _tol(prim, np.float32 if low else dtype, jvp=True)
    eps = 1e-3 if low else 1e-4
    num = T.numerical_jvp(f, tuple(args), tangents, eps=eps)
    num_flat = _outs(num, prim)
    if not all(_finite(n) for n in num_flat):
      # an argument the function is not differentiable in along real directions (an
      # integer-valued order, say; meta['nondiff_argnums'] declares these): hold it fixed
      tangents = tuple(_zero_tangent(t) if not all(_finite(n) for n in _outs(
          T.numerical_jvp(f, tuple(args), _only(tangents, i), eps=eps), prim)) else t
          for i, t in enumerate(tangents))
      num_flat = _outs(T.numerical_jvp(f, tuple(args), tangents, eps=eps), prim)
      if not all(_finite(n) for n in num_flat):
        continue  # a case at the edge of the domain
    if _at_kink(f, args, tangents, eps, prim, rtol):
      continue  # one-sided differences disagree: not differentiable there (ties, clamps)
    try:
      _, tout = nbjax.jvp(f, tuple(args), tangents)
    except NotImplementedError as e:
      if "Differentiation rule for" in str(e):
        raise
      unsupported.append(str(e))  # e.g. a parameter combination JAX does not differentiate
      continue
    for k, (a, b) in enumerate(zip(_outs(tout, prim), num_flat)):
      T._assert_close(a, b, rtol, atol, f"'{prim.name}' output {k}, params {params}, "
                      f"shapes {[np.shape(x) for x in args]}")
    checked += 1
  if not checked and unsupported:
    pytest.skip(f"'{prim.name}': jvp not defined for its cases: {unsupported[0]}")
  assert checked, f"no finite case for '{prim.name}'"


def _zero_tangent(t):
  t = np.asarray(t)
  return t if t.dtype == dtypes.float0 else np.zeros_like(t)


def _only(tangents, i):
  return tuple(t if j == i else _zero_tangent(t) for j, t in enumerate(tangents))


def _finite(x):
  x = np.asarray(x)
  return x.dtype == dtypes.float0 or bool(np.all(np.isfinite(x)))


def _at_kink(f, args, tangents, eps, prim, tol):
  fx = _outs(f(*args), prim)
  fp = _outs(f(*T._axpy(eps, tangents, tuple(args))), prim)
  fm = _outs(f(*T._axpy(-eps, tangents, tuple(args))), prim)
  for a, b, c in zip(fp, fx, fm):
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if not dtypes.is_inexact(b.dtype):
      continue
    fwd, bwd = (a - b) / eps, (b - c) / eps
    if not np.allclose(fwd, bwd, rtol=100 * tol, atol=100 * tol):
      return True
  return False


@pytest.mark.parametrize("prim", NONDIFF, ids=_ids)
def test_nondifferentiable_gives_zero_tangents(prim):
  dtype = _any_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}': no meta['dtypes']")
  rng = np.random.default_rng(2)
  for args, params in _cases(prim, dtype)[:2]:
    tangents = tuple(T.rand_like(rng, a) for a in args)
    if prim.meta.get("jvp_error"):  # JAX's own error (callbacks): differentiating is one
      exc, msg = prim.meta["jvp_error"]
      with pytest.raises(exc, match=msg):
        nbjax.jvp(T.prim_fun(prim, params), tuple(args), tangents)
      continue
    if prim.jvp is None:  # as in JAX (e.g. nextafter): differentiating it is an error
      if any(np.asarray(t).dtype != dtypes.float0 for t in tangents):
        with pytest.raises(NotImplementedError,
                           match=f"Differentiation rule for '{prim.name}' not implemented"):
          nbjax.jvp(T.prim_fun(prim, params), tuple(args), tangents)
      continue
    _, tout = nbjax.jvp(T.prim_fun(prim, params), tuple(args), tangents)
    for t in _outs(tout, prim):
      t = np.asarray(t)
      assert t.dtype == dtypes.float0 or not np.any(t), f"'{prim.name}' tangent {t}"

# ------------------------------------------------------------------ vmap


def _stack_slices(prim, args, params, dtype, seed):
  """B slices per argument: same shapes and params, from other seeds when the sampler gives
  structurally equal cases, else the case perturbed (floats) or repeated."""
  out = [[a] for a in args]
  for k in range(1, B):
    alt = None
    try:
      cs = T.primitive_cases(prim, dtype, np.random.default_rng(seed + 101 * k))
      for a2, p2 in cs:
        if (len(a2) == len(args) and all(np.shape(x) == np.shape(y) and np.asarray(x).dtype ==
                                          np.asarray(y).dtype for x, y in zip(a2, args))
            and _same_params(p2, params)):
          alt = a2
          break
    except Exception:
      alt = None
    for i, a in enumerate(args):
      if alt is not None:
        out[i].append(np.asarray(alt[i]))
      else:
        v = np.asarray(a)
        out[i].append(np.asarray(v * (1 + 0.01 * k), v.dtype) if dtypes.is_inexact(v.dtype) else v)
  return out


def _same_params(p, q):
  if p.keys() != q.keys():
    return False
  try:
    return all(bool(np.all(p[k] == q[k])) if not isinstance(p[k], (np.ndarray,)) else
               np.array_equal(p[k], q[k]) for k in p)
  except Exception:
    return False


def _loop_ref(prim, params, slices, bdims):
  f = T.prim_fun(prim, params)
  rows = []
  for k in range(B):
    a = [s[k] if d is not None else s[0] for s, d in zip(slices, bdims)]
    rows.append([np.asarray(o) for o in _outs(f(*a), prim)])
  return [np.stack([r[j] for r in rows]) for j in range(len(rows[0]))]


def _batched_args(slices, bdims):
  return [s[0] if d is None else np.stack(s, axis=d) for s, d in zip(slices, bdims)]


@pytest.mark.parametrize("prim", PRIMS, ids=_ids)
def test_vmap_vs_loop_every_bdim_placement(prim):
  dtype = _any_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}': no meta['dtypes']")
  if not any(args for args, _ in _cases(prim, dtype)):
    pytest.skip(f"'{prim.name}' takes no array operands: nothing to batch")
  if prim.batch is None:
    pytest.fail(f"'{prim.name}' has no batching rule")
  rtol, atol = _tol(prim, dtype)
  for ci, (args, params) in enumerate(_cases(prim, dtype)):
    slices = _stack_slices(prim, args, params, dtype, ci)
    f = T.prim_fun(prim, params)
    for bdims in T.bdim_placements([np.ndim(a) for a in args]):
      ref = _loop_ref(prim, params, slices, bdims)
      out = nbjax.vmap(f, in_axes=tuple(bdims), axis_size=B)(*_batched_args(slices, bdims))
      for j, (o, r) in enumerate(zip(_outs(out, prim), ref)):
        T._assert_close(o, r, rtol, atol, f"'{prim.name}' in_axes={bdims} output {j} params "
                        f"{params} shapes {[np.shape(a) for a in args]}")


@pytest.mark.parametrize("prim", PRIMS, ids=_ids)
def test_batched_jaxpr_independent_of_batch_size(prim):
  dtype = _any_dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}': no meta['dtypes']")
  args, params = next(((a, p) for a, p in _cases(prim, dtype) if a), (None, None))
  if args is None:
    pytest.skip(f"'{prim.name}' takes no array operands: nothing to batch")
  if prim.batch is None:
    pytest.skip(f"'{prim.name}' has no batching rule (reported by the vmap test)")
  f = T.prim_fun(prim, params)
  placements = [tuple(0 for _ in args), tuple(np.ndim(a) if i % 2 == 0 else None
                                             for i, a in enumerate(args))]
  for bdims in placements:
    if all(d is None for d in bdims):
      continue
    sig = []
    for n in (2, 7):
      xs = [a if d is None else np.stack([a] * n, axis=d) for a, d in zip(args, bdims)]
      j = nbjax.make_jaxpr(nbjax.vmap(f, in_axes=bdims))(*xs)
      sig.append([e.primitive.name for e in j.eqns])
    assert sig[0] == sig[1], f"'{prim.name}' batched jaxpr depends on the batch size: {sig}"

# ------------------------------------------------------------------ nesting


@pytest.mark.parametrize("prim", DIFF, ids=_ids)
def test_nested_jvp_vmap(prim):
  if prim.jvp is None or prim.batch is None:
    pytest.skip(f"'{prim.name}': needs jvp and batching rules (reported above)")
  dtype = _float_dtype(prim)
  if dtype is None or np.dtype(dtype) != np.float64:
    pytest.skip(f"'{prim.name}': no float64")
  if prim.meta.get("nondiff_argnums"):
    pytest.skip(f"'{prim.name}': not differentiable in every float operand (as JAX's)")
  args, params = next(((a, p) for a, p in _cases(prim, dtype)
                       if a and all(np.size(x) > 0 for x in a) and T.jvp_defined(prim, p)
                       and any(np.asarray(x).dtype == np.float64 for x in a)), (None, None))
  if args is None:
    pytest.skip(f"'{prim.name}': no float64 case with nonempty operands")
  rtol, atol = _tol(prim, dtype, jvp=True)
  f = T.prim_fun(prim, params)
  xs = _batched_args(_stack_slices(prim, args, params, dtype, 7), [0] * len(args))
  fl = [i for i, x in enumerate(xs) if np.asarray(x).dtype == np.float64]
  others = {i: x for i, x in enumerate(xs) if i not in fl}

  def merge(fa, oth):
    it = iter(fa)
    return [oth[i] if i in oth else next(it) for i in range(len(xs))]

  rng = np.random.default_rng(3)
  fxs = tuple(xs[i] for i in fl)
  ts = tuple(rng.standard_normal(np.shape(x)) for x in fxs)
  vf = lambda *fa: nbjax.vmap(f)(*merge(fa, others))
  # jvp of vmap == vmap of jvp, and both match central differences
  _, t1 = nbjax.jvp(vf, fxs, ts)
  k = len(fl)

  def per_example(*a):
    oth = dict(zip(others, a[2 * k:]))
    return nbjax.jvp(lambda *fa: f(*merge(fa, oth)), a[:k], a[k:2 * k])
  _, t2 = nbjax.vmap(per_example)(*fxs, *ts, *others.values())
  for a, b in zip(_outs(t1, prim), _outs(t2, prim)):
    T._assert_close(a, b, 1e-10, 1e-10, f"'{prim.name}' jvp(vmap) vs vmap(jvp)")
  if _at_kink(vf, fxs, ts, 1e-4, prim, rtol):
    return  # the case sits where the function is not differentiable (ties, clamps)
  num = T.numerical_jvp(vf, fxs, ts)
  if all(_finite(n) for n in _outs(num, prim)):
    for a, b in zip(_outs(t1, prim), _outs(num, prim)):
      T._assert_close(a, b, rtol, atol, f"'{prim.name}' jvp(vmap) vs central differences")
  # second order through vmap: jvp of (jvp of vmap) vs central differences of the first jvp
  g = lambda *p: nbjax.jvp(vf, p, ts)[1]
  if prim.meta.get("jvp_order", 2) < 2:  # as JAX: no second derivative
    with pytest.raises(NotImplementedError):
      nbjax.jvp(g, fxs, ts)
    return
  t3 = nbjax.jvp(g, fxs, ts)[1]
  num2 = T.numerical_jvp(g, fxs, ts, eps=1e-5)  # the inner jvp is exact: a small eps is fine
  for a, b in zip(_outs(t3, prim), _outs(num2, prim)):
    b = np.asarray(b)
    if _finite(b):
      T._assert_close(a, b, max(rtol, 1e-5), max(atol, 1e-5),
                      f"'{prim.name}' jvp(jvp(vmap)) vs differences")
