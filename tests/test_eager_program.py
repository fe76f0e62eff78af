"""Eager programs (``registry.eager_program``) as replays run them, and the kernels they call.

* Generated: random programs (exact and libm elementwise chains, literals and constants,
  reshapes, expand_dims broadcasts, reductions over size-1 axes, ``x * 1``, converts,
  products with every 2-D contraction, transposes) compiled plain and fused equal the eager
  ``bind`` of every equation bit for bit, at sizes on NumPy's and on numba's side of the
  elementwise policy.
* ``dot_general``'s backend choice, pinned: one contracted axis of rank <= 2 operands is one
  ``np.dot`` of (transposed) views, no copy; floating products switch to NumPy's batched
  matmul from 4096 outputs, integer products stay on numba's loop; the transpose rule puts a
  weight gradient in ``x.T @ ct`` order (no transpose equation).
* Replays: nested argument structures take the generated fast path; hot programs are
  rebuilt with fused loops and still equal the per-call tape bit for bit.
"""
import tracemalloc

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import eager_cache, lax, registry
from nbjax.array import Array
from nbjax.config import config
from nbjax.core import ShapedArray
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import eval_jaxpr
from nbjax.lax import linalg as L

DOT = registry.get("dot_general")
MM = (((1,), (0,)), ((), ()))


def _same(got, want, what=""):
  got, want = np.asarray(got), np.asarray(want)
  assert (got.dtype, got.shape) == (want.dtype, want.shape), what
  np.testing.assert_array_equal(got, want, err_msg=what)


def _trace(f, avals):
  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(f, avals)
  return pe.dce_jaxpr(jaxpr, True, instantiate=True)[0], consts


# ------------------------------------------------------------------ generated programs


def _random_fun(rng, shape, dtype, n_in):
  """A random chain over values of ``shape``: each step reads earlier values (inputs,
  constants, results) and appends one; the last three are the outputs."""
  d = np.dtype(dtype)
  other = np.float64 if d == np.float32 else np.float32
  m, n = shape
  ops = [
      lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
      lambda a, b: lax.max(a, b), lambda a, b: lax.min(a, b),
      lambda a, b: lax.select(a > b, a, b), lambda a, b: lax.select(a == b, b, a * 2.0),
      lambda a, b: -a, lambda a, b: jnp.abs(a), lambda a, b: jnp.sqrt(jnp.abs(a)),
      lambda a, b: jnp.floor(a), lambda a, b: jnp.tanh(a), lambda a, b: jnp.exp(-jnp.abs(a)),
      lambda a, b: a * 1.0, lambda a, b: 1.0 * a + 0.5,
      lambda a, b: lax.convert_element_type(lax.convert_element_type(a, other), d),
      lambda a, b: lax.convert_element_type(a, d),
      lambda a, b: a.reshape(-1).reshape(shape),
      lambda a, b: lax.reduce_sum_p.bind(lax.broadcast_in_dim(a, (1, m, n), (1, 2)), axes=(0,)),
      lambda a, b: lax.reduce_max_p.bind(lax.broadcast_in_dim(a, (m, 1, n), (0, 2)), axes=(1,)),
      lambda a, b: lax.broadcast_in_dim(jnp.sum(a, axis=0), shape, (1,)) + b,
      lambda a, b: lax.broadcast_in_dim(jnp.sum(a, axis=1), shape, (0,)) * b,
      lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ()))) @ b / n,
      lambda a, b: lax.transpose(lax.dot_general(a, b, (((0,), (0,)), ((), ()))), (1, 0))
      @ lax.transpose(b, (1, 0)) / m if m == n else a * b,
      lambda a, b: lax.dot_general(b, a, (((0,), (0,)), ((), ()))).sum() * a,
      lambda a, b: lax.max(a, jnp.sum(b, axis=0, keepdims=True)) - 1.0,
      lambda a, b: lax.select(a > jnp.min(b, axis=1, keepdims=True), a, -a) / 3.0,
  ]
  consts = [np.full(shape, 1.5, d), rng.standard_normal(shape).astype(d)]
  steps = [(rng.integers(len(ops)), rng.integers(1 << 30, size=2)) for _ in range(24)]

  def f(*xs):
    pool = list(xs) + [jnp.asarray(c) for c in consts]
    for op, (i, j) in steps:
      pool.append(ops[op](pool[i % len(pool)], pool[j % len(pool)]))
    return pool[-3:]
  return f


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_equal_eager_bind(seed):
  """Rewrites, views, buffer reuse and fused loops change no bit: plain and fused programs
  equal the per-equation eager ``bind`` of the same jaxpr."""
  rng = np.random.default_rng(seed)
  shape = [(3, 3), (8, 5), (1, 7), (130, 130), (16, 16), (129, 140)][seed % 6]
  dtype = [np.float32, np.float64][seed // 6 % 2]
  n_in = 2 + seed % 2
  f = _random_fun(rng, shape, dtype, n_in)
  jaxpr, consts = _trace(f, [ShapedArray(shape, np.dtype(dtype))] * n_in)
  args = [(rng.standard_normal(shape) * 2).astype(dtype) for _ in range(n_in)]
  args[0].flat[::7] = 0.0  # ties, zeros of both signs, NaN and inf through the chain
  args[0].flat[1::11] = -0.0
  args[-1].flat[3::13] = np.nan
  args[-1].flat[5::17] = np.inf
  want = eval_jaxpr(jaxpr, consts, *[Array(a) for a in args])
  plain = registry.eager_program(jaxpr, consts)
  fused = registry.eager_program(jaxpr, consts, fuse=True)
  for prog in (plain, fused):
    for _ in range(2):  # (a second run: reused buffers hold the last run's values)
      got = prog(*args)
      for g, w in zip(got, want):
        _same(g, w, f"seed {seed}, fused loops {prog.fused}:\n{prog.source}")


def test_rewrites_leave_views_and_no_kernels_for_identities():
  """A reduction over axes of size 1 and a reshape of a reshape are one view of the first
  operand; ``x * 1`` and a same-dtype convert are the operand itself."""
  def f(x):
    y = lax.reduce_sum_p.bind(lax.broadcast_in_dim(x, (1, 4, 3), (1, 2)), axes=(0,))
    z = y.reshape(12).reshape(2, 6) * 1.0
    return lax.convert_element_type(z, np.float32) + 1.0, y
  jaxpr, consts = _trace(f, [ShapedArray((4, 3), np.dtype(np.float32))])
  prog = registry.eager_program(jaxpr, consts)
  body = prog.source.split("def program")[0]
  assert body.count(".reshape(") == 1 and body.count("= k") == 1, body
  x = np.arange(12, dtype=np.float32).reshape(4, 3)
  a, b = prog(x)
  _same(a, x.reshape(2, 6) + 1)
  _same(b, x)
  assert b is x or np.shares_memory(b, x)  # the identity: the input buffer, not a copy


def test_a_pinned_backend_is_not_fused():
  """``set_eager_backend`` pins what runs: a pinned primitive stays its own kernel call."""
  def f(x):
    return [lax.max(x, 0.0) * 2.0 - x]
  jaxpr, consts = _trace(f, [ShapedArray((8, 8), np.dtype(np.float64))])
  assert registry.eager_program(jaxpr, consts, fuse=True).fused == 1
  registry.set_eager_backend("mul", "numpy")
  try:
    assert registry.eager_program(jaxpr, consts, fuse=True).fused == 0
  finally:
    registry.set_eager_backend("mul", None)


def test_fused_loop_replaces_the_chain():
  """An exact chain (relu and its JVP mask: max, eq, select_n, div) is one loop; a libm
  function (exp) stays NumPy's ufunc between loops."""
  def f(x, y):
    r = lax.max(x, 0.0)
    m = lax.select(x == r, jnp.ones_like(x), jnp.zeros_like(x)) / lax.select(
        r == 0.0, jnp.full_like(x, 2.0), jnp.ones_like(x))
    return [jnp.exp(r * y) - m + y]
  shape = (64, 32)
  jaxpr, consts = _trace(f, [ShapedArray(shape, np.dtype(np.float32))] * 2)
  prog = registry.eager_program(jaxpr, consts, fuse=True)
  assert prog.fused == 1, prog.source
  x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  x[::3] = 0
  for g, w in zip(prog(x, x), eval_jaxpr(jaxpr, consts, Array(x), Array(x))):
    _same(g, w)


# ------------------------------------------------------------------ dot_general


def test_dot_general_backend_choice_is_pinned():
  """The registry says what runs: numba below 4096 floating outputs, NumPy's batched matmul
  from 4096, numba's integer loop at every size (its measure is 0 for integer products)."""
  assert registry.policy(DOT) == ("numba", "numpy", 1 << 12)
  assert registry.backend_label(DOT) == "numba<4096<=numpy"
  size = registry.eager_size(DOT)
  assert size(None, ShapedArray((64, 64), np.dtype(np.float32))) == 4096
  assert size(None, ShapedArray((64, 64), np.dtype(np.int32))) == 0
  assert "transposed views" in DOT.meta["note"]


@pytest.mark.parametrize("lc,rc", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("k", [400, 40])
def test_dot_of_transposed_operands_copies_nothing(lc, rc, dtype, k):
  """Each 2-D contraction is one np.dot of views: the only new memory is the output; but a
  small transposed right operand (``ct @ W.T``, at most ``_NT_COPY`` elements) is copied
  first, as OpenBLAS stalls on that layout."""
  rng = np.random.default_rng(0)
  a = rng.standard_normal((300, k) if lc == 1 else (k, 300)).astype(dtype)
  b = rng.standard_normal((k, 250) if rc == 0 else (250, k)).astype(dtype)
  dn = (((lc,), (rc,)), ((), ()))
  want = np.dot(a.T if lc == 0 else a, b.T if rc == 1 else b)
  copied = b.nbytes if (lc, rc) == (1, 1) and b.size <= L._NT_COPY else 0
  assert copied or k == 400 or (lc, rc) != (1, 1)
  for backend in ("numba", "numpy"):
    impl = DOT.impls[backend]
    impl(a, b, dimension_numbers=dn, precision=None, preferred_element_type=None)
    tracemalloc.start()
    got = impl(a, b, dimension_numbers=dn, precision=None, preferred_element_type=None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < want.nbytes + copied + 4096, (backend, peak, want.nbytes)
    assert got.flags.c_contiguous and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-4)
  k = registry._raw_kernel(_dot_eqn(a, b, dn))
  assert k is np.dot or getattr(k, "fresh", False)


def _dot_eqn(a, b, dn):
  jaxpr, _ = _trace(lambda x, y: [lax.dot_general(x, y, dn)],
                    [ShapedArray(a.shape, a.dtype), ShapedArray(b.shape, b.dtype)])
  return jaxpr.eqns[0]


def test_dot_without_contraction_is_an_elementwise_product():
  """Per-example outer products (vmap of grad): no 128 tiny BLAS calls, same values."""
  rng = np.random.default_rng(1)
  z, x = rng.standard_normal(128), rng.standard_normal((128, 100))
  dn = (((), ()), ((0,), (0,)))
  for backend in ("numba", "numpy"):
    got = DOT.impls[backend](z, x, dimension_numbers=dn, precision=None,
                             preferred_element_type=None)
    _same(got, z[:, None] * x)


def test_integer_products_stay_on_numba_at_every_size():
  x = np.arange(130 * 64, dtype=np.int32).reshape(130, 64) % 7
  eqn = _dot_eqn(x, x.T.copy(), MM)
  k = registry._raw_kernel(eqn)
  assert getattr(k, "func", k) is DOT.impls["numba"], k
  _same(k(x, x.T.copy()), (x.astype(np.int64) @ x.T).astype(np.int32))


def test_weight_gradient_has_no_transpose():
  """grad of x @ W: W's cotangent is dot_general(x, ct) contracting the batch axis (x.T @ ct,
  BLAS reads x transposed in place); x's is ct @ W.T; neither needs a transpose."""
  def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w))
  w = np.random.default_rng(2).standard_normal((5, 3))
  x = np.random.default_rng(3).standard_normal((4, 5))
  jx = nbjax.make_jaxpr(nbjax.grad(loss, argnums=(0, 1)))(w, x)
  names = [e.primitive.name for e in jx.jaxpr.eqns]
  assert "transpose" not in names, jx
  dims = [e.params["dimension_numbers"] for e in jx.jaxpr.eqns if e.primitive.name == "dot_general"]
  assert (((0,), (0,)), ((), ())) in dims and (((1,), (1,)), ((), ())) in dims, dims
  gw, gx = nbjax.grad(loss, argnums=(0, 1))(w, x)
  ct = 1 - np.tanh(x @ w) ** 2
  np.testing.assert_allclose(gw, x.T @ ct, rtol=1e-12)
  np.testing.assert_allclose(gx, ct @ w.T, rtol=1e-12)


def test_batched_and_swapped_transpose_rules_match_jit():
  """The swapped-operand transpose agrees with XLA on batch and multi-axis contractions."""
  rng = np.random.default_rng(4)
  cases = [((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
           ((4, 2, 3), (3, 5, 2), (((2,), (0,)), ((1,), (2,)))),
           ((3, 4, 2), (2, 4, 6), (((1, 2), (1, 0)), ((), ())))]
  for ls, rs, dn in cases:
    a, b = rng.standard_normal(ls), rng.standard_normal(rs)
    f = lambda a, b: jnp.sum(jnp.sin(lax.dot_general(a, b, dn)))
    g = nbjax.grad(f, argnums=(0, 1))
    for got, want in zip(g(a, b), nbjax.jit(g)(a, b)):
      np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ replays


def _mlp_loss(params, x, y):
  h = x
  for i, (w, b) in enumerate(params):
    h = h @ w + b
    if i < len(params) - 1:
      h = jnp.maximum(h, 0.0)
  return jnp.mean((h - y) ** 2)


def _tape(f, *args):
  with config.override("eager_cache", False):
    return f(*args)


def test_nested_arguments_take_the_generated_fast_path(monkeypatch):
  """Lists of tuples and dicts of Arrays: the fast path replays them (same key as the
  general path), a different structure of the same arity misses it and is still right."""
  monkeypatch.setattr(eager_cache, "FUSE_AFTER", 4)
  rng = np.random.default_rng(5)
  sizes = [6, 8, 8, 2]
  params = [(jnp.asarray(rng.standard_normal((a, b)).astype(np.float32)),
             jnp.asarray(np.zeros(b, np.float32))) for a, b in zip(sizes[:-1], sizes[1:])]
  x = jnp.asarray(rng.standard_normal((4, 6)).astype(np.float32))
  y = jnp.asarray(rng.standard_normal((4, 2)).astype(np.float32))
  vg = nbjax.value_and_grad(_mlp_loss)
  want = _tape(vg, params, x, y)
  for _ in range(8):  # plain replays, then the fused build
    got = vg(params, x, y)
    assert type(got[1]) is list and type(got[1][0]) is tuple
    for g, w in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(want)):
      _same(g, w)
  cache = vg._trace_cache
  assert cache.fast[3](params, x, y) is not eager_cache.MISS
  assert cache.fast[3](tuple(params), x, y) is eager_cache.MISS
  for g, w in zip(nbjax.tree_util.tree_leaves(vg(tuple(params), x, y)),
                  nbjax.tree_util.tree_leaves(want)):
    _same(g, w)

  def dict_loss(p, x):
    h = jnp.tanh(x @ p["l1"]["w"] + p["l1"]["b"])
    return jnp.sum((h @ p["l2"]["w"]) * p["s"]) + (p["none"] is None)
  p = {"l1": {"w": params[0][0], "b": params[0][1]}, "l2": {"w": params[1][0]},
       "s": jnp.asarray(np.float32(0.5)), "none": None}
  vg = nbjax.value_and_grad(dict_loss)
  want = _tape(vg, p, x)
  for _ in range(3):
    got = vg(p, x)
    assert type(got[1]) is dict and sorted(got[1]) == ["l1", "l2", "none", "s"]
    assert sorted(got[1]["l1"]) == ["b", "w"] and list(got[1]["l2"]) == ["w"]
    assert got[1]["none"] is None
    for g, w in zip(nbjax.tree_util.tree_leaves(got), nbjax.tree_util.tree_leaves(want)):
      _same(g, w)
  fast = vg._trace_cache.fast[2]
  assert fast(p, x) is not eager_cache.MISS
  assert fast({**p, "extra": x}, x) is eager_cache.MISS
  assert fast({**p, "l2": {"v": params[1][0]}}, x) is eager_cache.MISS
  assert fast({**p, "none": x}, x) is eager_cache.MISS


def test_hot_program_is_fused_and_equals_the_tape(monkeypatch):
  """Per-example logistic gradients: after FUSE_AFTER replays the program runs fused loops
  (exact chains around exp and log1p) and its results are the tape's, bit for bit."""
  monkeypatch.setattr(eager_cache, "FUSE_AFTER", 3)
  rng = np.random.default_rng(6)
  w, X, Y = rng.standard_normal(20), rng.standard_normal((16, 20)), (rng.random(16) > .5) * 1.

  def loss(w, x, y):
    z = jnp.dot(x, w)
    return jnp.logaddexp(0.0, z) - y * z
  g = nbjax.vmap(nbjax.grad(loss), in_axes=(None, 0, 0))
  args = [jnp.asarray(a) for a in (w, X, Y)]
  with config.override("eager_cache", False):
    want = g(*args)
  for _ in range(6):
    _same(g(*args), want)
  entries = [e for e in g._trace_cache.entries.values() if type(e) is eager_cache._Entry]
  assert entries, g._trace_cache.entries
  prog = entries[0].program
  f64 = (np.dtype(np.float64),)
  if all(registry.exact_kernel(p, f64, {}) for p in (lax.exp_p, lax.log1p_p)):
    assert prog.fused == 1, prog.source  # (NumPy's exp and log1p are libm's here: one loop)
  else:
    assert prog.fused >= 2, prog.source
