"""The per-call reverse mode (``nbjax/interpreters/tape.py``): ``grad`` of a function the eager
cache may not replay (a method of a mutable object) records a tape per call; a tape
structure seen twice runs one compiled backward program. That program is keyed by structure
only, so it must give, bit for bit, what the node-by-node pass gives for the current call's
values, and must never serve a call whose structure differs (state changed between calls:
values, shapes, dtypes, weak types, control flow). Every differentiable primitive of the
registry goes through both passes; functions through the tape, the replay and ``jit``."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import dtypes, lax, registry
from nbjax import testing as T
from nbjax.interpreters import tape

pytestmark = pytest.mark.skipif(bool(__import__("os").environ.get("NBJAX_REPLAY_CHECK")),
                                reason="the replay check bypasses the purity guard")
rng = np.random.default_rng(0)


class _Holder:
  """A mutable object whose method is the function: the purity guard refuses to replay it."""

  def __init__(self, f, **state):
    self.f = f
    self.__dict__.update(state)

  def loss(self, *args):
    return self.f(self, *args)


def _same(a, b):
  for x, y in zip(nbjax.tree_util.tree_leaves(a), nbjax.tree_util.tree_leaves(b), strict=True):
    x, y = np.asarray(x), np.asarray(y)
    assert (x.dtype, x.shape) == (y.dtype, y.shape)
    np.testing.assert_array_equal(x, y)


def _compiled():
  return sum(type(b) is tape._Backward for b in tape._tapes.values())


def _per_node(g, *args):
  """``g(*args)`` with no compiled tape to find: the node-by-node pass."""
  tape._tapes.clear()
  return g(*args)

# ------------------------------------------------------------------ every primitive

PRIMS = [p for p in registry.primitives(builtin_only=True)
         if p.meta.get("differentiable") is not False and p.meta.get("dtypes")
         and p.meta.get("reverse") is not False]  # while: forward mode only (JAX's error)


def _dtype(prim):
  ds = [np.dtype(d) for d in prim.meta["dtypes"]]
  for d in ("float64", "float32", "complex128"):
    if np.dtype(d) in ds:
      return np.dtype(d)
  return None


def _inexact(x):
  return dtypes.is_inexact(np.asarray(x).dtype)


@pytest.mark.parametrize("prim", PRIMS, ids=lambda p: p.name)
def test_compiled_tape_equals_node_by_node(prim):
  """For each sample case: ``Re(sum(out * w))`` differentiated per call; the compiled pass
  (from the third call) equals the node-by-node pass bit for bit, for the recorded values and
  for new values of the same structure."""
  dtype = _dtype(prim)
  if dtype is None:
    pytest.skip(f"'{prim.name}': no inexact dtype")
  r = np.random.default_rng(1)
  cases = T.primitive_cases(prim, dtype, r)[:4]
  nondiff = set(prim.meta.get("nondiff_argnums", ()))
  checked = 0
  for args, params in cases:
    argnums = tuple(i for i, a in enumerate(args) if i not in nondiff and _inexact(a))
    if not argnums or not T.jvp_defined(prim, params):
      continue
    out = prim.bind(*args, **params)
    outs = list(out) if prim.multiple_results else [out]
    ws = [T.rand_like(r, o) if _inexact(o) else None for o in outs]
    if not any(w is not None for w in ws):
      continue

    def f(self, *xs):
      a = list(args)
      for i, x in zip(argnums, xs):
        a[i] = x
      o = prim.bind(*a, **params)
      o = list(o) if prim.multiple_results else [o]
      return sum(jnp.sum(jnp.real(x * w)) for x, w in zip(o, self.ws) if w is not None)

    h = _Holder(f, ws=ws)
    g = nbjax.grad(h.loss, argnums=tuple(range(len(argnums))))
    xs = [args[i] for i in argnums]
    with np.errstate(all="ignore"):
      first = _per_node(g, *xs)
      g(*xs)
      third = g(*xs)
      _same(first, third)
      try:
        hash(tuple(params.items()))
      except TypeError:
        pass  # params that cannot key a compiled tape: node by node only
      else:
        assert _compiled(), f"'{prim.name}': no compiled tape"
      ys = [T.rand_like(r, x) for x in xs]  # new values, same structure
      h.ws = [None if w is None else T.rand_like(r, w) for w in ws]
      compiled = g(*ys)
      _same(compiled, _per_node(g, *ys))
    checked += 1
  if not checked:
    pytest.skip(f"'{prim.name}': no case with a differentiable argument")

# ------------------------------------------------------------------ state between calls


def _chain(self, x):
  return jnp.sum(jnp.sin(jnp.cos(x) * x + self.k) * self.w - x)


@pytest.mark.parametrize("change", [
    ("k", 3.5),                                  # a Python scalar: a weak literal's value
    ("k", np.float64(3.5)),                      # ... now a strong NumPy scalar
    ("w", jnp.asarray([1.0, -2.0, 0.5, 4.0])),   # an array's values
    ("w", jnp.asarray([[2.0], [3.0]])),          # ... its shape (broadcasting changes)
    ("w", jnp.asarray([1.0, 2.0, 3.0, 4.0], np.float32)),  # ... its dtype
    ("w", 7),                                    # ... a Python int
])
def test_state_changes_are_seen(change):
  """The compiled tape of a method never serves a call after the object's state changed:
  every call equals ``jit(grad)`` of the same function with the state as explicit inputs."""
  x = jnp.asarray(rng.standard_normal(4))
  h = _Holder(_chain, k=1.0, w=jnp.asarray(rng.standard_normal(4)))
  g = nbjax.value_and_grad(h.loss)
  ref = nbjax.jit(nbjax.value_and_grad(lambda x, k, w: _chain(_Holder(None, k=k, w=w), x)))
  for _ in range(3):
    got = g(x)
  assert _compiled()
  np.testing.assert_allclose(got[1], ref(x, h.k, h.w)[1], rtol=1e-12)
  setattr(h, *change)
  for _ in range(3):
    got = g(x)
    want = ref(x, h.k, h.w)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-12)
    assert np.asarray(got[1]).dtype == np.asarray(want[1]).dtype


def test_control_flow_changes_are_seen():
  """A branch on the object's state: the two structures alternate, each pass its own."""
  def f(self, x):
    y = jnp.sin(x) if self.mode else jnp.cos(x) * x
    return jnp.sum(y * self.k)
  h = _Holder(f, mode=True, k=2.0)
  g = nbjax.grad(h.loss)
  x = jnp.asarray(rng.standard_normal(3))
  for i in range(8):
    h.mode, h.k = i % 3 == 0, float(i)
    want = i * (np.cos(x) if h.mode else np.cos(x) - np.sin(x) * x)
    np.testing.assert_allclose(g(x), want, rtol=1e-12, atol=1e-15)


def test_wiring_changes_are_seen():
  """The same primitives on the same avals, with operands swapped: another structure."""
  h = _Holder(lambda self, a, b: jnp.sum(jnp.sin(a) * (a - b if self.flip else b - a)))
  g = nbjax.grad(h.loss, argnums=(0, 1))
  a, b = jnp.asarray(rng.standard_normal(3)), jnp.asarray(rng.standard_normal(3))
  for i in range(7):
    h.flip = i % 3 == 2
    s = 1 if h.flip else -1
    ga, gb = g(a, b)
    np.testing.assert_allclose(ga, np.cos(a) * s * (a - b) + s * np.sin(a), rtol=1e-12)
    np.testing.assert_allclose(gb, -s * np.sin(a), rtol=1e-12)


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_input_shapes_and_values_change(argnums):
  """The batch size of an input changes (a constant on the tape, or a differentiated input)."""
  h = _Holder(lambda self, w, x: jnp.mean(jnp.tanh(x @ w) ** 2))
  g = nbjax.grad(h.loss, argnums)
  ref = nbjax.jit(nbjax.grad(lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2), argnums))
  for n in (3, 3, 3, 5, 5, 3):
    w, x = jnp.asarray(rng.standard_normal((4, 2))), jnp.asarray(rng.standard_normal((n, 4)))
    got, want = g(w, x), ref(w, x)
    for a, b in zip(*(nbjax.tree_util.tree_leaves(t) for t in (got, want)), strict=True):
      np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)  # (XLA sums in its order)


def test_gradient_of_caller_numpy_array_is_its_own():
  """Inputs given as NumPy arrays (constants on the tape too): the gradient never aliases
  them, from either pass."""
  w = np.ones(3)
  h = _Holder(lambda self, x: jnp.sum(x * self.w), w=w)
  g = nbjax.grad(h.loss)
  for _ in range(3):
    x = rng.standard_normal(3)
    out = g(x)
    np.testing.assert_array_equal(out, w)
    assert not np.shares_memory(np.asarray(out), w) and not np.shares_memory(np.asarray(out), x)

# ------------------------------------------------------------------ tape, replay, jit


FUNS = [
    lambda x: jnp.sum(jnp.sin(jnp.cos(x) * x + 1) * 2 - x),
    lambda x: jnp.sum(jnp.tanh(x @ x.T) * x[:, :1]),
    lambda x: jnp.linalg.norm(jnp.cumsum(x, axis=1)) + jnp.max(x),
    lambda x: jnp.sum(jnp.sort(x, axis=0)[::-1] * jnp.arange(3.0)[None, :]),
    lambda x: jnp.sum(jnp.where(x > 0, x ** 3, jnp.exp(x))) / x.size,
    lambda x: jnp.sum(nbjax.jit(lambda y: jnp.sin(y) * y)(x) ** 2),
    lambda x: jnp.sum(nbjax.vmap(lambda r: jnp.dot(r, r))(x)),
    lambda x: jnp.logaddexp(x, 2 * x).sum(),  # a custom_jvp: node by node only
    lambda x: jnp.mean((jnp.tanh(x @ jnp.ones((3, 2))) + 1.0) ** 2),
]


@pytest.mark.parametrize("f", FUNS)
def test_tape_equals_replay_equals_jit(f):
  """Node by node (first call), compiled (third call, a method), the eager cache's replay
  (third call, the plain function) and ``jit``: one gradient."""
  x = jnp.asarray(rng.standard_normal((4, 3)))
  g = nbjax.value_and_grad(_Holder(lambda self, x: f(x)).loss)
  nodes = _per_node(g, x)
  g(x)
  compiled = g(x)
  vg = nbjax.value_and_grad(f)
  replayed = [vg(x) for _ in range(3)][-1]
  assert any(type(e).__name__ == "_Entry" for e in vg._trace_cache.entries.values())
  _same(nodes, compiled)
  _same(nodes, replayed)
  jitted = nbjax.jit(nbjax.value_and_grad(f))(x)
  np.testing.assert_allclose(compiled[0], jitted[0], rtol=1e-12)
  np.testing.assert_allclose(compiled[1], jitted[1], rtol=1e-10, atol=1e-12)


def test_lax_primitive_outputs_and_aux():
  """has_aux and several argnums through the compiled pass; an input no cotangent reaches."""
  def f(self, a, b, c):
    y = lax.mul(jnp.sin(a), b) + self.k
    return jnp.sum(y), {"y": y, "k": self.k}
  h = _Holder(f, k=1.5)
  g = nbjax.value_and_grad(h.loss, argnums=(0, 1, 2), has_aux=True)
  a, b, c = (jnp.asarray(rng.standard_normal(3)) for _ in range(3))
  outs = [g(a, b, c) for _ in range(3)]
  _same(outs[0], outs[2])
  (v, aux), (ga, gb, gc) = outs[2]
  np.testing.assert_allclose(ga, np.cos(a) * b, rtol=1e-12)
  np.testing.assert_allclose(gb, np.sin(a), rtol=1e-12)
  np.testing.assert_array_equal(gc, np.zeros(3))
  np.testing.assert_allclose(aux["y"], np.sin(a) * b + 1.5, rtol=1e-12)


def test_compiled_tape_holds_no_input_sized_constants():
  """The seed is an input of the compiled pass: a broadcast of it is computed per call, not
  folded into a constant as large as the input and kept in the cache."""
  h = _Holder(lambda self, x: jnp.sum(x) + self.k, k=2.0)
  g = nbjax.grad(h.loss)
  x = jnp.ones(100_000)
  for _ in range(3):
    np.testing.assert_array_equal(g(x), np.ones(100_000))
  progs = [b.program for b in tape._tapes.values() if type(b) is tape._Backward]
  assert progs
  for p in progs:
    assert all(np.size(v) < 1000 for v in p.__globals__.values() if isinstance(v, np.ndarray))


def test_large_tapes_run_node_by_node():
  """Above ``_MAX_BYTES`` of recorded values a tape is not compiled (a program keeps every
  intermediate alive to its end); the gradient is the same either way."""
  n = tape._MAX_BYTES // 8 // 2 + 1  # two float64 values of this size exceed the bound
  h = _Holder(lambda self, x: jnp.sum(jnp.sin(x) * self.k), k=2.0)
  g = nbjax.grad(h.loss)
  x = jnp.asarray(rng.standard_normal(n))
  tape._tapes.clear()
  outs = [g(x) for _ in range(3)]
  assert not _compiled() and None in tape._tapes.values()
  _same(outs[0], outs[2])
  np.testing.assert_allclose(outs[2], 2 * np.cos(x), rtol=1e-12)
