"""The eager trace cache (``nbjax/eager_cache.py``) and eager programs
(``registry.eager_program``).

* Registry-generated: every primitive, dtype and sample case run as a compiled eager program
  reproduces the eager ``bind`` (dtype, shape and values), and every primitive's batched
  program, replayed from the cache, reproduces the per-call ``vmap``.
* Semantics: a top-level ``vmap`` replays only when ``f`` would trace the same way again.
  Rebinding a global or closed-over variable (also one read by a helper), mutable state,
  side effects, Python branching on unmapped arguments, Python scalar arguments, config and
  backend changes all behave exactly as without the cache.
"""
import functools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import eager_cache, registry
from nbjax import testing as T
from nbjax.array import Array

PRIMS = [p for p in registry.primitives(builtin_only=True) if p.family != "call"]


def _outs(prim, r):
  return list(r) if prim.multiple_results else [r]


def _same(got, want, what):
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape, \
      f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
  if got.dtype.kind in "fc":
    tol = 1e-5 if got.dtype.itemsize <= 4 or got.dtype == np.complex64 else 1e-12
    if got.dtype == np.float16:
      tol = 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
  else:
    np.testing.assert_array_equal(got, want, err_msg=what)


def _raw(a):
  return registry.coerce(a)[0]


@pytest.mark.parametrize("prim", PRIMS, ids=lambda p: p.name)
def test_eager_program_matches_eager(prim):
  n = 0
  for d in prim.meta.get("dtypes", ()):
    for args, params in T.primitive_cases(prim, d):
      want = _outs(prim, prim.bind(*[a if np.ndim(a) == 0 and not isinstance(a, np.ndarray)
                                     else Array(a) for a in args], **params))
      closed = nbjax.make_jaxpr(T.prim_fun(prim, params))(*args)
      got = registry.eager_program(closed.jaxpr, closed.consts)(*map(_raw, args))
      assert len(got) == len(want)
      for g, w in zip(got, want):
        assert type(g) is np.ndarray and g.flags.c_contiguous, f"{prim} {d}: not a C buffer"
        _same(g, w, f"{prim} {d} {[np.shape(a) for a in args]} {params}")
      n += 1
  if not n:
    pytest.skip(f"{prim} has no sample cases")


@pytest.mark.parametrize("prim", PRIMS, ids=lambda p: p.name)
def test_replayed_vmap_matches_per_call_vmap(prim):
  """The staged, compiled batched program of every primitive reproduces the per-call trace
  (the guard is bypassed: prim_fun closes over the primitive, which the guard refuses)."""
  for d in (np.float64, np.float32, np.int64, np.int32, np.bool_, *prim.meta.get("dtypes", ())):
    if np.dtype(d) in [np.dtype(x) for x in prim.meta.get("dtypes", ())]:
      cases = T.primitive_cases(prim, d)
      if cases:
        break
  else:
    pytest.skip(f"{prim} has no sample cases")
  args, params = cases[0]
  args = [np.asarray(a) for a in args]
  batched = [np.stack([a] * 3) for a in args]
  vf = nbjax.vmap(T.prim_fun(prim, params), axis_size=None if args else 3)
  want = nbjax.tree_util.tree_leaves(vf(*batched))
  cache = eager_cache.TraceCache(lambda *a: vf(*a), guard_fun=lambda: None)
  xs = [Array(b) for b in batched]
  assert cache.call(xs, {}) is eager_cache.MISS  # first sighting: per-call path
  assert cache.call(xs, {}) is not eager_cache.MISS, f"{prim}: the batched trace did not stage"
  got = nbjax.tree_util.tree_leaves(cache.fast[len(xs)](*xs))
  for g, w in zip(got, want):
    _same(g, w, f"{prim} replayed vmap")


# ------------------------------------------------------------------ semantics


def _cache(vf):
  return vf._trace_cache


def _calls(vf, *args, n=3, **kw):
  return [np.asarray(vf(*args, **kw)) for _ in range(n)]


X = jnp.asarray(np.arange(12.0).reshape(4, 3))
W_GLOBAL = jnp.asarray([1.0, 2.0, 3.0])
LIST_GLOBAL = [1.0]
NP_GLOBAL = np.ones(3)


def test_replays_a_pure_function():
  vf = nbjax.vmap(lambda x, w, b: jnp.tanh(jnp.dot(x, w) + b), in_axes=(0, None, None))
  w, b = jnp.asarray([0.1, 0.2, 0.3]), jnp.asarray(0.5)
  r = _calls(vf, X, w, b)
  want = np.tanh(np.asarray(X) @ np.asarray(w) + 0.5)
  for x in r:
    np.testing.assert_allclose(x, want, rtol=1e-15)
  assert any(type(e) is eager_cache._Entry for e in _cache(vf).entries.values())
  # a new signature (shape, dtype, weak type) is a new entry, never a wrong replay
  r32 = _calls(vf, X.astype(np.float32), w.astype(np.float32), b.astype(np.float32))
  assert r32[-1].dtype == np.float32
  wide = jnp.asarray(np.ones((2, 3)))
  assert _calls(vf, wide, w, b)[-1].shape == (2,)


def _reads_global(x):
  return x * W_GLOBAL


def test_rebinding_a_global_retraces():
  global W_GLOBAL
  vf = nbjax.vmap(_reads_global)
  old = W_GLOBAL
  try:
    _calls(vf, X)
    W_GLOBAL = old * 10
    np.testing.assert_array_equal(vf(X), np.asarray(X) * np.asarray(W_GLOBAL))
  finally:
    W_GLOBAL = old


def _helper(x):
  return x + W_GLOBAL


def test_a_global_read_by_a_helper_is_guarded():
  global W_GLOBAL
  vf = nbjax.vmap(lambda x: _helper(x) * 2)
  old = W_GLOBAL
  try:
    _calls(vf, X)
    W_GLOBAL = old + 100
    np.testing.assert_array_equal(vf(X), (np.asarray(X) + np.asarray(W_GLOBAL)) * 2)
  finally:
    W_GLOBAL = old


def test_rebinding_a_closed_over_variable_retraces():
  scale = jnp.asarray(2.0)
  vf = nbjax.vmap(lambda x: x * scale)
  _calls(vf, X)
  scale = jnp.asarray(3.0)  # noqa: F841  (read by the lambda)
  np.testing.assert_array_equal(vf(X), np.asarray(X) * 3.0)


def test_mutable_state_is_never_cached():
  vf = nbjax.vmap(lambda x: x * LIST_GLOBAL[0])
  _calls(vf, X)
  LIST_GLOBAL[0] = 5.0
  try:
    np.testing.assert_array_equal(vf(X), np.asarray(X) * 5.0)
  finally:
    LIST_GLOBAL[0] = 1.0
  assert not _cache(vf).enabled
  vg = nbjax.vmap(lambda x: x + NP_GLOBAL)  # NumPy arrays are mutable too
  _calls(vg, X)
  NP_GLOBAL[:] = 7.0
  try:
    np.testing.assert_array_equal(vg(X), np.asarray(X) + 7.0)
  finally:
    NP_GLOBAL[:] = 1.0


def test_side_effects_run_on_every_call(capsys):
  vf = nbjax.vmap(lambda x: (print("traced"), x + 1)[1])
  _calls(vf, X, n=3)
  assert capsys.readouterr().out.count("traced") == 3


def test_numpy_random_is_drawn_on_every_call():
  vf = nbjax.vmap(lambda x: x + np.random.standard_normal())
  a, b, c = _calls(vf, X)
  assert not (np.array_equal(a, b) and np.array_equal(b, c))


def test_python_branch_on_an_unmapped_argument():
  def f(x, n):
    return x * 2 if n > 0 else x - 1
  vf = nbjax.vmap(f, in_axes=(0, None))
  for n, want in ((jnp.asarray(1.0), np.asarray(X) * 2), (jnp.asarray(-1.0), np.asarray(X) - 1)):
    for r in _calls(vf, X, n):
      np.testing.assert_array_equal(r, want)


@pytest.mark.parametrize("s", [2.0, 3.0, 0.0, -0.0, float("nan"), 2, True])
def test_python_scalar_arguments_are_keyed_by_value(s):
  vf = nbjax.vmap(lambda x, s: x / s if isinstance(s, float) else x * s, in_axes=(0, None))
  x = jnp.asarray(np.array([[1.0, -1.0]]))
  for other in (5.0, s):
    for r in _calls(vf, x, other):
      want = np.asarray(x) / other if isinstance(other, float) else np.asarray(x) * other
      np.testing.assert_array_equal(r, want)


def test_config_and_backend_changes_retrace():
  vf = nbjax.vmap(lambda x: jnp.sin(x) + 1.0)
  x = np.linspace(0, 1, 6).reshape(2, 3)
  want = np.sin(x) + 1.0
  _calls(vf, x)
  with nbjax.config.override("jax_enable_x64", False):
    assert np.asarray(vf(x)).dtype == np.float32
    assert np.asarray(vf(x)).dtype == np.float32
  np.testing.assert_array_equal(vf(x), want)
  try:
    nbjax.config.set_eager_backend("sin", "numba")
    e0 = registry.epoch
    np.testing.assert_allclose(vf(x), want, rtol=1e-15)
    assert registry.epoch == e0  # replays use the new choice: the epoch moved at the switch
  finally:
    nbjax.config.set_eager_backend("sin", None)


def test_nested_vmap_and_jit_checks_the_inner_function():
  vf = nbjax.vmap(nbjax.vmap(lambda x: x * LIST_GLOBAL[0]))
  _calls(vf, X)
  assert not _cache(vf).enabled
  vj = nbjax.vmap(nbjax.jit(lambda x: jnp.sum(x ** 2)))
  for r in _calls(vj, X):
    np.testing.assert_allclose(r, (np.asarray(X) ** 2).sum(1))
  assert _cache(vj).enabled


def test_pytrees_kwargs_and_numpy_inputs():
  def f(p, x, *, k):
    return {"y": p["w"] * x + p["b"], "k": k * 2}
  vf = nbjax.vmap(f, in_axes=({"w": None, "b": None}, 0))
  p = {"w": jnp.asarray(2.0), "b": jnp.asarray(np.ones(3))}
  xn = np.arange(6.0).reshape(2, 3)
  for _ in range(3):
    r = vf(p, xn, k=np.ones(2))
    np.testing.assert_array_equal(r["y"], 2 * xn + 1)
    np.testing.assert_array_equal(r["k"], np.full(2, 2.0))
  ident = nbjax.vmap(lambda x: x)
  src = np.arange(4.0)
  outs = [ident(src) for _ in range(3)]
  src[:] = -1  # the caller's buffer is never shared with a returned Array
  for o in outs:
    np.testing.assert_array_equal(o, np.arange(4.0))


def test_errors_are_the_per_call_errors():
  vf = nbjax.vmap(lambda x, y: x + y)
  ok = (jnp.ones((2, 3)), jnp.ones((2, 3)))
  _calls(vf, *ok)
  for _ in range(3):
    with pytest.raises(ValueError, match="inconsistent sizes"):
      vf(jnp.ones((2, 3)), jnp.ones((4, 3)))


def test_guard_analysis():
  g = eager_cache.guards
  assert g(lambda x: jnp.sin(x)) is not None
  assert g(lambda x: x + LIST_GLOBAL[0]) is None
  assert g(lambda x: x + NP_GLOBAL) is None
  assert g(lambda x: print(x)) is None
  assert g(functools.partial(lambda x, y: x * y, 2.0)) is not None
  assert g(functools.partial(lambda x, y: x * y, [2.0])) is None

  class C:
    def __call__(self, x):
      return x
  assert g(C()) is None
  assert g(C().__call__) is None

  def gen(x):
    yield x
  assert g(gen) is None
  import numpy.random as npr
  import os
  assert g(lambda x: x + npr.standard_normal()) is None  # a random module under any name
  urandom = os.urandom
  assert g(lambda x: x + len(urandom(1))) is None  # builtins of modules outside nbjax/numpy
  assert g(nbjax.jit(lambda x: x * LIST_GLOBAL[0])) is None
  assert g(nbjax.jit(lambda x: x * 2)) is not None


def _branchy(x):
  return jnp.sin(x) if x > 0 else jnp.cos(x)  # concrete under jvp: never staged


def test_jvp_replays_and_keeps_python_control_flow():
  f = lambda x: jnp.sin(x) * jnp.cos(x) + x
  x, t = jnp.asarray(0.5), jnp.asarray(1.0)
  for _ in range(3):
    y, yd = nbjax.jvp(f, (x,), (t,))
    np.testing.assert_allclose(y, np.sin(0.5) * np.cos(0.5) + 0.5, rtol=1e-15)
    np.testing.assert_allclose(yd, np.cos(1.0) + 1.0, rtol=1e-15)
  caches = eager_cache._by_fun[f]
  assert any(type(e) is eager_cache._Entry for c in caches.values() for e in c.entries.values())
  for v in (0.5, -0.5, 0.7, -0.7, 0.5):
    y, yd = nbjax.jvp(_branchy, (jnp.asarray(v),), (jnp.asarray(1.0),))
    np.testing.assert_allclose((y, yd), (np.sin(v), np.cos(v)) if v > 0 else (np.cos(v), -np.sin(v)))
  g = lambda x: (x * 2, {"aux": x + 1})
  for _ in range(3):
    y, yd, aux = nbjax.jvp(g, (x,), (t,), has_aux=True)
    assert float(aux["aux"]) == 1.5 and float(yd) == 2.0


def test_jacfwd_replays():
  jf = nbjax.jacfwd(lambda x: jnp.sin(x) * 2.0)
  x = jnp.asarray(np.linspace(0, 1, 4))
  for _ in range(3):
    np.testing.assert_allclose(jf(x), np.diag(2 * np.cos(np.linspace(0, 1, 4))), rtol=1e-15)
  assert any(type(e) is eager_cache._Entry for e in jf._trace_cache.entries.values())
  # exp(x) is read by a ufunc and by a broadcast (a view): its buffer must not be reused
  jg = nbjax.jacfwd(lambda x: jnp.sin(x) * jnp.exp(x))
  xn = np.array([0.1, 0.2, 0.3])
  for _ in range(3):
    np.testing.assert_allclose(jg(xn), np.diag(np.cos(xn) * np.exp(xn) + np.sin(xn) * np.exp(xn)),
                               rtol=1e-15)
  assert any(type(e) is eager_cache._Entry for e in jg._trace_cache.entries.values())


def test_suites_replay_what_they_trace():
  """Run the vmap and jvp suites with every top-level vmap called three times and the purity
  guard bypassed: each replayed result equals the per-call result (NBJAX_REPLAY_CHECK)."""
  import os
  import subprocess
  import sys
  here = os.path.dirname(__file__)
  r = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-x", "-p", "no:cacheprovider",
       os.path.join(here, "test_vmap.py"), os.path.join(here, "test_jvp.py")],
      env={**os.environ, "NBJAX_REPLAY_CHECK": "1"}, capture_output=True, text=True,
      timeout=600)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert "passed" in r.stdout


def test_no_buffer_reuse_under_a_live_view():
  """e = exp(x) is read by a broadcast (a view of e; the second broadcast is the same
  subexpression), then for the last time by a ufunc: writing the ufunc's result into e's
  buffer would corrupt the view that the third product still reads."""
  def f(b, x):
    e = jnp.exp(x)
    return b * e, e * jnp.sin(x), (b + 1) * e
  vf = nbjax.vmap(f, in_axes=(0, None))
  x, b = np.array([0.1, 0.2, 0.3]), np.eye(3)
  for _ in range(3):
    z1, y, z2 = vf(b, x)
    np.testing.assert_allclose(z1, b * np.exp(x), rtol=1e-15)
    np.testing.assert_allclose(y, np.broadcast_to(np.sin(x) * np.exp(x), (3, 3)), rtol=1e-15)
    np.testing.assert_allclose(z2, (b + 1) * np.exp(x), rtol=1e-15)
  assert any(type(e) is eager_cache._Entry for e in vf._trace_cache.entries.values())


def test_config_switch():
  vf = nbjax.vmap(lambda x: x * 2.0)
  try:
    nbjax.config.update("eager_cache", False)
    _calls(vf, X)
    assert not any(type(e) is eager_cache._Entry for e in _cache(vf).entries.values())
  finally:
    nbjax.config.update("eager_cache", True)
  for r in _calls(vf, X):
    np.testing.assert_array_equal(r, np.asarray(X) * 2)
  assert any(type(e) is eager_cache._Entry for e in _cache(vf).entries.values())
