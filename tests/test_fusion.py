"""Eager fusion (``nbjax.fusion``): pending elementwise chains give the unfused bits, raise at
the operation that fails, never alias their inputs, and release their operands."""
import gc
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbjax
import nbjax.numpy as jnp
from nbjax import fusion, lax, registry
from nbjax.array import Array
from nbjax.config import config
from nbjax.core import ShapedArray
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import eval_jaxpr

BIG = fusion.MIN_SIZE + 3

_OPS = {
    "add": (lambda a, b: a + b, "fib"), "sub": (lambda a, b: a - b, "fi"),
    "mul": (lambda a, b: a * b, "fib"), "max": (jnp.maximum, "fib"),
    "min": (jnp.minimum, "fib"), "div": (lambda a, b: a / b, "f"),
    "lt": (lambda a, b: a < b, "fib"), "eq": (lambda a, b: a == b, "fib"),
    "where": (lambda a, b: jnp.where(a > b, a, b), "fi"),
    "neg": (lambda a, b: -a, "fi"), "abs": (lambda a, b: abs(a), "fi"),
    "sqrt": (lambda a, b: jnp.sqrt(abs(a)), "f"), "scalar": (lambda a, b: a * 3 + 1, "fi"),
    "and": (lambda a, b: a & b, "b"), "not": (lambda a, b: ~a, "b"),
    # libm-based: fused only where NumPy's loop gives numba's bits (``registry._same_bits``)
    "exp": (lambda a, b: jnp.exp(a), "f"), "log1p": (lambda a, b: jnp.log1p(abs(a)), "f"),
    "tanh": (lambda a, b: jnp.tanh(a), "f"), "sin": (lambda a, b: jnp.sin(a), "f"),
    "pow": (lambda a, b: lax.pow(abs(a), b), "f"),
}


def _data(rng, shape, dtype):
  if dtype == np.bool_:
    return rng.random(shape) < 0.5
  if np.dtype(dtype).kind == "i":
    return rng.integers(-2**31, 2**31, shape).astype(dtype)
  v = rng.standard_normal(shape).astype(dtype)
  v.flat[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e38, 3.0][:v.size]
  return v


def _chain(ops, leaves):
  vals = list(leaves)
  for name, i, j in ops:
    vals.append(_OPS[name][0](vals[i % len(vals)], vals[j % len(vals)]))
  return vals[len(leaves):]


def _run(ops, data, fuse):
  with config.override("eager_fusion", fuse):
    leaves = [jnp.asarray(d) for d in data]
    outs = _chain(ops, leaves)
    meta = [(o.dtype, o.weak_type, o.shape) for o in outs]
    vals = [np.asarray(o) for o in outs[::-1]][::-1]  # the last first: the whole chain fuses
    return [(v, *m) for v, m in zip(vals, meta)], outs


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([np.float32, np.float64, np.int32, np.bool_]),
       st.sampled_from([(BIG,), (7,), (2, BIG // 2 + 1), (1, BIG)]),
       st.lists(st.tuples(st.sampled_from(sorted(_OPS)), st.integers(0, 9), st.integers(0, 9)),
                min_size=1, max_size=12),
       st.integers(0, 2**31))
def test_fused_chain_bits_equal_unfused(dtype, shape, ops, seed):
  kind = np.dtype(dtype).kind
  ops = [o for o in ops if kind in _OPS[o[0]][1]]
  rng = np.random.default_rng(seed)
  data = [_data(rng, shape, dtype) for _ in range(3)]
  # keep one dtype per chain: ops whose result changes the dtype read only the leaves
  ops = [(n, i % 3, j % 3) if n in ("lt", "eq") else (n, i, j) for n, i, j in ops]
  ops = [o for o in ops if o[0] not in ("lt", "eq")] + [o for o in ops if o[0] in ("lt", "eq")]
  got, outs = _run(ops, data, True)
  want, _ = _run(ops, data, False)
  for (g, gd, gw, gs), (w, wd, ww, ws) in zip(got, want):
    assert (gd, gw, gs) == (wd, ww, ws)
    if g.dtype.kind == "f":  # a NaN's sign and payload are unspecified (NumPy's SIMD add of
      # two NaNs returns either operand's): NaNs where NaNs are, every other value bit for bit
      nan = np.isnan(w)
      assert (np.isnan(g) == nan).all()
      g, w = np.where(nan, 0, g), np.where(nan, 0, w)
    assert g.tobytes() == w.tobytes()
  for o in outs:
    assert type(o) is Array  # materialised by the reads above


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_fused_loop_in_chunks_on_two_threads(dtype, monkeypatch):
  # the fused loop runs in chunks taken by two threads (the native team): the same bits as
  # one call (and as the unfused kernels), the last chunk a partial one
  monkeypatch.setattr(fusion, "THREAD_CHUNK", 4099)
  rng = np.random.default_rng(1)
  ops = [("scalar", 0, 0), ("mul", 1, 3), ("add", 4, 2), ("max", 5, 0)] if dtype != np.bool_ \
      else [("and", 0, 1), ("not", 3, 0), ("and", 4, 2)]
  data = [_data(rng, (BIG,), dtype) for _ in range(3)]
  got, _ = _run(ops, data, True)
  want, _ = _run(ops, data, False)
  for g, w in zip(got, want):
    assert g[0].tobytes() == w[0].tobytes() and g[1:] == w[1:]


def test_large_chain_is_pending_then_plain():
  x, y, z = (jnp.asarray(np.full(BIG, v, np.float32)) for v in (2.0, 3.0, 4.0))
  r = x * y + z
  assert type(r) is fusion.Lazy and isinstance(r, Array)
  assert (r.shape, r.dtype, r.weak_type, r.ndim, r.size) == ((BIG,), np.float32, False, 1, BIG)
  assert type(r) is fusion.Lazy  # metadata does not compute
  assert r.block_until_ready() is r and type(r) is Array
  np.testing.assert_array_equal(np.asarray(r), 10.0)
  with config.override("eager_fusion", False):
    assert type(x * y) is Array
  assert type(jnp.asarray(np.ones(7, np.float32)) * 2) is Array  # small: not deferred


def test_shape_error_raised_at_the_failing_op():
  x = jnp.asarray(np.ones(BIG, np.float32))
  bad = jnp.asarray(np.ones(BIG + 1, np.float32))
  r = x * 2.0 + x
  with pytest.raises(TypeError) as fused:
    lax.add(r, bad)
  assert type(r) is fusion.Lazy  # the failing op raised before computing anything
  with config.override("eager_fusion", False):
    with pytest.raises(TypeError) as unfused:
      lax.add(x * 2.0 + x, bad)
  assert str(fused.value) == str(unfused.value)
  with pytest.raises(TypeError):
    lax.add(r, bad.astype(np.float64))
  np.testing.assert_array_equal(np.asarray(r), 3.0)


def test_result_never_aliases_inputs():
  x = jnp.asarray(np.arange(BIG, dtype=np.float32))
  r = (x * 1.0) + 0.0
  v = np.asarray(r)
  assert not np.shares_memory(v, np.asarray(x))
  with pytest.raises(ValueError):
    v[0] = 5.0  # read-only export


def test_caller_numpy_buffers_are_never_deferred():
  a = np.ones(BIG, np.float32)
  r = jnp.add(jnp.asarray(a), 1.0) * 2.0
  a[:] = 100.0  # jnp.asarray copied: the pending chain does not see it
  np.testing.assert_array_equal(np.asarray(r), 4.0)
  assert type(lax.add(a, a)) is Array


def test_operands_released_after_materialisation():
  a = jnp.asarray(np.ones(BIG, np.float32))
  buf = weakref.ref(a._value)
  r = a * 2.0 + 1.0
  del a
  gc.collect()
  assert buf() is not None  # the pending chain holds its operand
  np.testing.assert_array_equal(np.asarray(r), 3.0)
  gc.collect()
  assert buf() is None


def test_expression_size_is_bounded():
  x = jnp.asarray(np.ones(BIG, np.float32))
  r = x
  for _ in range(100):
    r = r * 1.0 + 0.5
    if type(r) is fusion.Lazy:
      assert r._expr[4] <= fusion.MAX_NODES and r._expr[5] <= fusion.MAX_LEAVES
  want = np.ones(BIG, np.float32)
  for _ in range(100):
    want = want * np.float32(1.0) + np.float32(0.5)
  np.testing.assert_array_equal(np.asarray(r), want)


def test_shared_subexpression_and_threads():
  x = jnp.asarray(np.linspace(-1, 1, BIG, dtype=np.float32))
  t = x * x
  r = t + t * 3.0
  outs = []
  ths = [threading.Thread(target=lambda: outs.append(np.asarray(r))) for _ in range(4)]
  for th in ths:
    th.start()
  for th in ths:
    th.join()
  xv = np.asarray(x)
  want = xv * xv + (xv * xv) * np.float32(3.0)
  assert len(outs) == 4 and all(o.tobytes() == want.tobytes() for o in outs)
  assert outs[0].ctypes.data == outs[3].ctypes.data  # computed once
  np.testing.assert_array_equal(np.asarray(t), xv * xv)


def test_transformations_read_pending_arrays():
  x = jnp.asarray(np.linspace(0, 1, BIG, dtype=np.float32))
  p = x * 2.0
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lambda a: a + 1)(p)), np.asarray(x) * 2 + 1)
  np.testing.assert_allclose(np.asarray(nbjax.grad(lambda a: (a * a).sum())(x * 1.0)),
                             2 * np.asarray(x))
  assert nbjax.vmap(lambda a: a * 2)((x * 1.0).reshape(1, -1)).shape == (1, BIG)
  assert "Array(" in repr(x + 1.0)
  assert float((x * 2.0)[1]) == float(np.asarray(x)[1] * 2)


PROBED = registry.probed()


def test_every_probed_kernel_is_covered():
  names = {p.name for p, _ in PROBED}
  assert {"exp", "log", "log1p", "tanh", "sin", "logistic", "pow", "atan2", "erf"} <= names


@pytest.mark.parametrize("prim,dtype", PROBED, ids=[f"{p.name}-{d.name}" for p, d in PROBED])
def test_probed_kernel_fuses_exactly_when_bits_are_equal(prim, dtype):
  """A libm-based primitive joins an eager program's fused loop only where
  ``registry.exact_kernel`` found NumPy's loop giving numba's bits, and then the loop gives
  the per-equation eager bits on values the probe never saw."""
  def f(*xs):
    return [prim.bind(*(x * 1.5 for x in xs)) + 0.25]
  avals = [ShapedArray((4099,), dtype)] * prim.arity
  closed = pe.trace_to_jaxpr_dynamic(f, avals)
  jaxpr, consts = closed[0], closed[2]
  prog = registry.eager_program(jaxpr, consts, fuse=True)
  exact = registry.exact_kernel(prim, (dtype,) * prim.arity, {})
  assert prog.fused == (1 if exact else 0), prog.source
  rng = np.random.default_rng(7)
  xs = []
  for _ in range(prim.arity):
    x = np.concatenate([rng.standard_normal(2048) * 3, np.exp(rng.uniform(-80, 80, 2048)),
                        [0.0, -0.0, np.inf, -np.inf]]).astype(dtype)
    x[1::2] *= -1
    xs.append(rng.permutation(x[:4099]))
  got, = prog(*xs)
  want, = eval_jaxpr(jaxpr, consts, *map(Array, xs))
  want = np.asarray(want)
  nan = np.isnan(want)
  assert (np.isnan(got) == nan).all()
  assert np.where(nan, 0, got).tobytes() == np.where(nan, 0, want).tobytes()


@pytest.mark.parametrize("where", ["everywhere", "subnormals", "large"])
def test_bit_probe_sees_one_ulp(monkeypatch, where):
  """``registry._same_bits`` finds a NumPy loop that differs from numba's by one ulp, also
  when only on subnormal or only on large inputs."""
  monkeypatch.setattr(registry, "_SAME_BITS", {})
  f64 = (np.dtype(np.float64),)
  numpy_exp = lax.exp_p.impls["numpy"]
  assert registry._same_bits(lax.exp_p, {"numpy"}, f64, {}) == \
      registry._same_bits(lax.exp_p, {"numpy"}, f64, {})  # (cached)

  def off(x, **params):
    r = numpy_exp(x, **params)
    hit = {"everywhere": np.ones(x.shape, bool), "subnormals": (x != 0) & (abs(x) < 1e-308),
           "large": abs(x) > 1e4}[where]
    return np.where(hit, np.nextafter(r, np.inf), r)
  monkeypatch.setitem(lax.exp_p.impls, "numpy", off)
  registry._SAME_BITS.clear()
  assert not registry._same_bits(lax.exp_p, {"numpy"}, f64, {})


def test_registry_cli_says_which_libm_kernels_fuse(capsys):
  registry.main([])
  line = capsys.readouterr().out.strip().splitlines()[-1]
  fused, not_fused = line.split(": ", 1)[1].split("; not fused: ")
  for p, d in PROBED:
    tag = f"{p.name}:{d.name[5:]}"
    assert (tag in fused.split()) == bool(registry.exact_kernel(p, (d,) * p.arity, {})), tag
    assert (tag in not_fused.split()) != (tag in fused.split()), tag
