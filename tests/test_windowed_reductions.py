"""lax.reduce_window and its primitives against an independent NumPy reference (explicit
loops over output positions and window elements), across strides, paddings (pairs,
negative, "SAME"/"VALID"), base and window dilations and dtypes; max-pool gradients;
the generic reducer (several operands) eagerly, under jit, vmap and jvp."""
import itertools

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax


def _ref(x, init, op, window, strides, padding, base, wdil):
  """Fold ``op`` from ``init`` over each window in row-major order; positions of the padded,
  base-dilated operand that hold no operand element hold ``init``."""
  nd = x.ndim
  dil = [0 if n == 0 else (n - 1) * b + 1 for n, b in zip(x.shape, base)]
  padded = [d + lo + hi for d, (lo, hi) in zip(dil, padding)]
  wsz = [(w - 1) * r + 1 for w, r in zip(window, wdil)]
  out_shape = [max(0, (p - w) // s + 1) for p, w, s in zip(padded, wsz, strides)]
  out = np.empty(out_shape, x.dtype)
  for o in itertools.product(*map(range, out_shape)):
    acc = init
    for k in itertools.product(*map(range, window)):
      v = init
      pos = [oi * s + ki * r - lo for oi, s, ki, r, (lo, _) in zip(o, strides, k, wdil, padding)]
      if all(0 <= q < d and q % b == 0 for q, d, b in zip(pos, dil, base)):
        v = x[tuple(q // b for q, b in zip(pos, base))]
      acc = op(acc, v)
    out[o] = acc
  return out


CONFIGS = [((9,), (3,), (2,), ((0, 0),), (1,), (1,)),
           ((8,), (2,), (3,), ((2, 1),), (2,), (1,)),
           ((8,), (3,), (1,), ((-2, 1),), (1,), (2,)),
           ((5, 7), (2, 3), (2, 1), ((1, 0), (0, 2)), (1, 2), (2, 1)),
           ((4, 6, 3), (2, 2, 1), (2, 2, 1), ((0, 1), (1, 1), (0, 0)), (1, 1, 1), (1, 1, 1)),
           ((3, 5, 4, 2), (1, 3, 2, 1), (1, 1, 2, 1), ((0, 0), (1, 1), (0, -1), (0, 0)),
            (1, 2, 1, 1), (1, 1, 1, 1)),
           ((2, 3), (4, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1))]
OPS = {"sum": (lax.add, lambda a, b: a + b, 0), "max": (lax.max, max, -np.inf),
       "min": (lax.min, min, np.inf)}


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("jit", [False, True])
def test_fast_reducers_against_loops(cfg, op, dtype, jit):
  shape, *wp = cfg
  rng = np.random.default_rng(0)
  x = (rng.integers(0, 50, shape) if np.dtype(dtype).kind in "iu" else
       rng.standard_normal(shape)).astype(dtype)
  lax_op, np_op, init = OPS[op]
  if np.dtype(dtype).kind in "iu" and op != "sum":
    info = np.iinfo(dtype)
    init = info.min if op == "max" else info.max
  init = np.asarray(init, dtype)[()]
  f = lambda v: lax.reduce_window(v, init, lax_op, *wp)
  got = np.asarray((nbjax.jit(f) if jit else f)(jnp.asarray(x)))
  want = _ref(x, init, lambda a, b: np.asarray(np_op(a, b), dtype)[()], *wp)
  assert got.dtype == np.dtype(dtype)
  np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-12)
  # the monoids take the fast primitives, as JAX's
  eqn, = nbjax.make_jaxpr(f)(x).eqns
  assert eqn.primitive.name == f"reduce_window_{op}"


@pytest.mark.parametrize("padding", ["SAME", "VALID", "SAME_LOWER"])
def test_string_padding(padding):
  x = np.arange(35.0).reshape(5, 7)
  got = lax.reduce_window(jnp.asarray(x), 0.0, lax.add, (2, 3), (2, 2), padding)
  pads = {"VALID": ((0, 0), (0, 0)), "SAME": ((0, 1), (1, 1)), "SAME_LOWER": ((1, 0), (1, 1))}
  want = _ref(x, 0.0, lambda a, b: a + b, (2, 3), (2, 2), pads[padding], (1, 1), (1, 1))
  np.testing.assert_array_equal(np.asarray(got), want)


def test_nan_and_signed_zero_as_xla():
  x = np.array([1.0, np.nan, 2.0, -0.0, 0.0, -1.0], np.float32)
  mx = np.asarray(lax.reduce_window(x, -np.inf, lax.max, (2,), (2,), "VALID"))
  np.testing.assert_array_equal(mx, [np.nan, 2.0, 0.0])
  z = np.asarray(lax.reduce_window(x[3:5], np.inf, lax.min, (2,), (1,), "VALID"))
  assert np.signbit(z[0])


def test_maxpool_gradient_first_maximum():
  x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 5.0, 5.0]])
  pool = lambda v: lax.reduce_window(v, -np.inf, lax.max, (1, 2), (1, 2), "VALID")
  for J in (lambda f: f, nbjax.jit):
    g = np.asarray(J(nbjax.grad(lambda v: (pool(v) * np.array([[1.0, 2.0], [3.0, 4.0]])).sum()))(x))
    np.testing.assert_array_equal(g, [[0, 1, 2, 0], [3, 0, 4, 0]])  # ties: the first
  jaxpr = str(nbjax.make_jaxpr(nbjax.grad(lambda v: pool(v).sum()))(x))
  assert "select_and_scatter_add" in jaxpr


@pytest.mark.parametrize("op,want_sel", [("max", np.argmax), ("min", np.argmin)])
@pytest.mark.parametrize("padding", [((0, 0), (0, 0)), ((1, 0), (0, 1))])
def test_pool_vjp_against_loops(op, want_sel, padding):
  rng = np.random.default_rng(1)
  x = rng.permutation(48).reshape(6, 8).astype(np.float64)
  lax_op, _, init = OPS[op]
  f = lambda v: lax.reduce_window(v, init, lax_op, (2, 3), (2, 2), padding)
  y, vjp = nbjax.vjp(f, jnp.asarray(x))
  ct = rng.standard_normal(np.shape(y))
  got = np.asarray(vjp(ct)[0])
  want = np.zeros_like(x)
  xp = np.pad(x, padding, constant_values=init)
  for o in np.ndindex(*ct.shape):
    w = xp[o[0] * 2:o[0] * 2 + 2, o[1] * 2:o[1] * 2 + 3]
    i, j = np.unravel_index(want_sel(w), w.shape)
    pi, pj = o[0] * 2 + i - padding[0][0], o[1] * 2 + j - padding[1][0]
    if 0 <= pi < 6 and 0 <= pj < 8:
      want[pi, pj] += ct[o]
  np.testing.assert_allclose(got, want, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nbjax.jit(lambda v, c: nbjax.vjp(f, v)[1](c)[0])(x, ct)),
                             want, rtol=1e-12)


@pytest.mark.parametrize("shape,window,padding", [
    ((3, 8, 6, 5), (1, 2, 2, 1), "VALID"),      # NHWC max-pool: windows tile the operand
    ((2, 7, 5, 3), (1, 2, 2, 1), "SAME"),       # tiling the padded operand
    ((2, 7, 5, 3), (1, 2, 2, 1), "VALID"),      # a row and a column no window covers
    ((2, 3, 34), (1, 1, 17), "VALID"),          # 17 elements: the loop kernels, not unrolled
    ((4, 9), (3, 3), ((1, 2), (0, 0))),
    ((6, 6), (2, 3), ((0, 0), (0, 0)))])
@pytest.mark.parametrize("op", ["max", "min"])
def test_pool_gradient_bits_eager_as_jit(shape, window, padding, op):
  # the selected element gets the cotangent added into zeros (a -0 cotangent gives +0, as
  # XLA's), ties and NaNs select as XLA's; exact tiling writes each element once
  rng = np.random.default_rng(0)
  x = rng.integers(-3, 3, shape).astype(np.float32)  # many ties
  x.flat[rng.integers(0, x.size, 3)] = np.nan
  x.flat[rng.integers(0, x.size, 3)] = -0.0
  lax_op, _, init = OPS[op]
  f = lambda v: lax.reduce_window(v, init, lax_op, window, window, padding)
  y = f(x)
  ct = rng.standard_normal(np.shape(y)).astype(np.float32)
  ct.flat[::3] = -0.0
  g = lambda v, c: nbjax.vjp(f, v)[1](c)[0]
  got, want = np.asarray(g(x, ct)), np.asarray(nbjax.jit(g)(x, ct))
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
  np.testing.assert_array_equal(np.asarray(y), np.asarray(nbjax.jit(f)(x)))


def test_window_dilation_vjp_is_jaxs_error():
  f = lambda v: lax.reduce_window(v, -np.inf, lax.max, (2,), (1,), "VALID", None, (2,))
  np.testing.assert_array_equal(np.asarray(f(np.arange(5.0))), [2, 3, 4])
  with pytest.raises(NotImplementedError, match="window dilation"):
    nbjax.grad(lambda v: f(v).sum())(np.arange(5.0))


def test_sum_transpose_with_dilations():
  rng = np.random.default_rng(2)
  x = rng.standard_normal((5, 6))
  wp = ((2, 2), (2, 1), ((1, 0), (0, 2)), (2, 1), (1, 2))
  f = lambda v: lax.reduce_window(v, 0.0, lax.add, *wp)
  y = f(x)
  ct = rng.standard_normal(np.shape(y))
  g = np.asarray(nbjax.vjp(f, x)[1](ct)[0])
  # <ct, f(e_i)> for every basis vector e_i
  want = np.array([np.sum(ct * np.asarray(f(np.eye(30)[i].reshape(5, 6)))) for i in range(30)])
  np.testing.assert_allclose(g.ravel(), want, rtol=1e-12, atol=1e-12)


def _argmax_pair(a, b):
  (va, ia), (vb, ib) = a, b
  keep = lax.ge(va, vb)
  return lax.select(keep, va, vb), lax.select(keep, ia, ib)


def test_generic_two_operands_eager_jit_vmap():
  rng = np.random.default_rng(3)
  x = rng.permutation(20).reshape(4, 5).astype(np.float32)
  idx = np.arange(20, dtype=np.float32).reshape(4, 5)
  args = ((2, 2), (1, 2), ((0, 1), (1, 0)))
  f = lambda v, i: lax.reduce_window((v, i), (np.float32(-np.inf), np.float32(-1)), _argmax_pair,
                                     *args)
  v, i = f(x, idx)
  want_v = _ref(x, np.float32(-np.inf), max, *args, (1, 1), (1, 1))
  np.testing.assert_array_equal(np.asarray(v), want_v)
  flat = np.asarray(i).astype(int)
  ok = flat >= 0
  np.testing.assert_array_equal(x.ravel()[flat[ok]], want_v[ok])
  vj, ij = nbjax.jit(f)(x, idx)
  np.testing.assert_array_equal(np.asarray(vj), np.asarray(v))
  np.testing.assert_array_equal(np.asarray(ij), np.asarray(i))
  vb, _ = nbjax.vmap(f)(np.stack([x, -x]), np.stack([idx, idx]))
  np.testing.assert_array_equal(np.asarray(vb[1]), np.asarray(f(-x, idx)[0]))
  eqn, = nbjax.make_jaxpr(f)(x, idx).eqns
  assert eqn.primitive.name == "reduce_window"


def test_generic_product_jvp():
  x = np.array([1.0, 2.0, 3.0, 4.0])
  f = lambda v: lax.reduce_window(v, 1.0, lax.mul, (2,), (1,), "VALID")
  y, t = nbjax.jvp(f, (x,), (np.ones(4),))
  np.testing.assert_allclose(np.asarray(y), [2, 6, 12])
  np.testing.assert_allclose(np.asarray(t), [3, 5, 7])


@pytest.mark.parametrize("kw,exc,msg", [
    (dict(window_dimensions=(2,)), TypeError, "wrong number of window_dimensions"),
    (dict(window_strides=(1,)), TypeError, "inconsistent window_strides"),
    (dict(window_dimensions=(0, 1)), TypeError, "positive"),
])
def test_errors(kw, exc, msg):
  a = dict(window_dimensions=(2, 2), window_strides=(1, 1))
  a.update(kw)
  with pytest.raises(exc, match=msg):
    lax.reduce_window(np.ones((3, 3)), 0.0, lax.add, a["window_dimensions"], a["window_strides"])
  with pytest.raises(ValueError, match="same tree structure"):
    lax.reduce_window((np.ones(3),), 0.0, lax.add, (2,))


@pytest.mark.parametrize("jit", [False, True])
def test_padding_is_skipped_not_folded(jit):
  """XLA's reduce-window skips positions outside the operand (JAX's values): a
  non-identity init counts once per window, and a NaN's tangent survives a padded slot."""
  J = nbjax.jit if jit else (lambda f: f)
  x = np.arange(1.0, 8.0)
  got = J(lambda v: lax.reduce_window(v, 2.0, lax.mul, (3,), (1,), ((1, 2),)))(x)
  np.testing.assert_array_equal(np.asarray(got), [4, 12, 48, 120, 240, 420, 84, 14])
  got = J(lambda v: lax.reduce_window(v, 2.0, lax.mul, (2,), (2,), ((2, 1),), (2,)))(x)
  np.testing.assert_array_equal(np.asarray(got), [2, 2, 4, 6, 8, 10, 12, 14])
  f = lambda v: lax.reduce_window(v, -np.inf, lax.max, (2,), (1,), ((0, 1),))
  _, t = J(lambda v, t: nbjax.jvp(f, (v,), (t,)))(np.array([np.nan]), np.array([5.0]))
  np.testing.assert_array_equal(np.asarray(t), [5.0])
  zs = np.array([2.0, 3.0])
  got = nbjax.vmap(lambda v, z: lax.reduce_window(v, z, lax.mul, (3,), (2,), "SAME"))(
      np.stack([x, x]), zs)
  np.testing.assert_array_equal(np.asarray(got), [[4, 48, 240, 84], [6, 72, 360, 126]])


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.float32, np.float64])
def test_select_and_gather_scatter_wrappers(dtype):
  """lax.windowed_reductions._select_and_gather_add / _select_and_scatter_add (the names
  JAX's lax_vmap_test calls), bf16 and float16 included; values from JAX 0.10.2."""
  from nbjax.lax import windowed_reductions as W
  x = np.array([[1., 3., 3., 0.], [2., -1., 5., 5.], [0.5, 4., -2., 1.]]).astype(dtype)
  t = np.arange(12.).reshape(3, 4).astype(dtype)
  cases = [(W._select_and_gather_add(t, x, lax.ge_p, (2, 2), (1, 2), ((0, 0), (0, 0)), (1, 1),
                                     (1, 1)), [[1, 6], [9, 6]]),
           (W._select_and_gather_add(t, x, lax.le_p, [2, 2], [1, 1], [(1, 0), (0, 0)], [1, 1],
                                     [1, 1]), [[0, 1, 3], [5, 5, 3], [5, 10, 10]]),
           (W._select_and_scatter_add(np.array([[1., 2.], [3., 4.]]).astype(dtype), x, lax.ge_p,
                                      (2, 2), (1, 2), ((0, 0), (0, 0))),
            [[0, 1, 0, 0], [0, 0, 6, 0], [0, 3, 0, 0]])]
  for got, want in cases:
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)
  g = nbjax.vmap(lambda a, b: W._select_and_gather_add(a, b, lax.ge_p, (2,), (1,), ((0, 0),),
                                                       (1,), (1,)), in_axes=(1, 0))(t.T, x)
  np.testing.assert_array_equal(np.asarray(g, np.float64), [[1, 1, 2], [4, 6, 6], [9, 9, 11]])


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn",
                                   "float8_e8m0fnu"])
def test_select_and_gather_scatter_narrow_floats(dtype, jit):
  """JAX takes any floating dtype; the scatter's zero is ``np.array(0, dtype)`` (NaN in
  float8_e8m0fnu, which has no zero), as JAX 0.10.2's lowering builds it."""
  import ml_dtypes
  from nbjax.lax import windowed_reductions as W
  d = getattr(ml_dtypes, dtype)
  x, t = np.array([1., 3., 2., 0.5]).astype(d), np.array([1., 2., 4., 4.]).astype(d)
  J = nbjax.jit if jit else (lambda f: f)
  g = J(lambda t, x: W._select_and_gather_add(t, x, lax.ge_p, (2,), (2,), ((1, 1),), (1,), (1,)))
  s = J(lambda s, x: W._select_and_scatter_add(s, x, lax.le_p, (2,), (1,), ((0, 0),)))
  got_g, got_s = g(t, x), s(t[:3], x)
  assert got_g.dtype == got_s.dtype == np.dtype(d)
  np.testing.assert_array_equal(np.asarray(got_g, np.float32), [1, 2, 4])
  np.testing.assert_array_equal(np.asarray(got_s, np.float32),
                                [np.nan] * 4 if dtype == "float8_e8m0fnu" else [1, 0, 2, 4])
  with pytest.raises(TypeError, match="select_and_gather_add requires floating"):
    W._select_and_gather_add(np.arange(4), np.arange(4), lax.ge_p, (2,), (1,), ((0, 0),), (1,),
                             (1,))
