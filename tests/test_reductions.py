"""Reductions, argmin/argmax, cumulative reductions and sort: the semantics the
registry-generated suite cannot see (identities of empty reductions, NaN and tie rules,
stability and key order of sort, zero-safe derivatives, transposes, batching rules at every
batch-dim placement, error messages) and the kernels the default policy does not select
(the prange variants)."""
import math

import numpy as np
import pytest

import nbjax  # noqa: F401
from nbjax import api, dtypes, lax, registry, testing
from nbjax.array import Array
from nbjax.interpreters import ad
from kernels import reductions as K

R = lax.reductions if hasattr(lax, "reductions") else __import__("nbjax.lax.reductions",
                                                                 fromlist=["x"])
BACKENDS = ("numba", "numpy")


def impl(prim, backend):
  return registry.get(prim).impls[backend]


def A(x):
  return Array(np.asarray(x))


# ----------------------------------------------------------------- reductions


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64, np.bool_])
def test_empty_reductions_give_identity(backend, dtype):
  d = np.dtype(dtype)
  x = np.zeros((3, 0, 2), d)
  ops = {"max": (-np.inf if d.kind == "f" else False if d.kind == "b" else np.iinfo(d).min),
         "min": (np.inf if d.kind == "f" else True if d.kind == "b" else np.iinfo(d).max)}
  if d.kind != "b":
    ops.update(sum=0, prod=1)
  if d.kind in "biu":
    ops.update({"and": True if d.kind == "b" else np.array(-1).astype(d), "or": 0, "xor": 0})
  for op, want in ops.items():
    got = impl("reduce_" + op, backend)(x, axes=(1,))
    assert got.shape == (3, 2) and got.dtype == d, op
    np.testing.assert_array_equal(got, np.full((3, 2), want, d), err_msg=op)
    got = lax.reduce_sum(A(x), (0, 1)) if op == "sum" else None
  full = lax.reduce_max(A(np.zeros((0,), d)), (0,))
  assert full.shape == () and full.dtype == d


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_axis_and_layouts_match_numpy(backend):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((3, 4, 5, 6))
  xi = rng.integers(-50, 50, (3, 4, 5, 6)).astype(np.int32)
  for axes in [(0,), (3,), (1, 2), (0, 2), (0, 3), (1, 3), (0, 1, 2, 3), (0, 2, 3)]:
    np.testing.assert_allclose(impl("reduce_sum", backend)(x, axes=axes), x.sum(axes), rtol=1e-12)
    np.testing.assert_allclose(impl("reduce_prod", backend)(x, axes=axes), x.prod(axes),
                               rtol=1e-10)
    np.testing.assert_array_equal(impl("reduce_max", backend)(x, axes=axes), x.max(axes))
    np.testing.assert_array_equal(impl("reduce_min", backend)(xi, axes=axes), xi.min(axes))
    np.testing.assert_array_equal(impl("reduce_xor", backend)(xi, axes=axes),
                                  np.bitwise_xor.reduce(xi, axis=axes))
    np.testing.assert_array_equal(impl("reduce_or", backend)(xi > 0, axes=axes),
                                  (xi > 0).any(axes))


def test_float32_sum_accuracy_and_integer_wraparound():
  rng = np.random.default_rng(1)
  x = rng.random(1_000_003).astype(np.float32)
  exact = np.sum(x.astype(np.float64))
  for backend in BACKENDS:
    got = impl("reduce_sum", backend)(x, axes=(0,))
    assert got.dtype == np.float32
    assert abs(float(got) - exact) / exact < 1e-6, backend
  # column sums too (float32, as XLA: windows of 32 summed, their sums summed alike)
  x2 = rng.random((100_000, 3)).astype(np.float32)
  for backend in BACKENDS:
    got = impl("reduce_sum", backend)(x2, axes=(0,))
    np.testing.assert_allclose(got, x2.astype(np.float64).sum(0), rtol=1e-6)
  # integer sums wrap like XLA (no upcast)
  x8 = np.full(300, 100, np.int8)
  want = np.array(300 * 100, np.int64).astype(np.int8)
  for backend in BACKENDS:
    assert impl("reduce_sum", backend)(x8, axes=(0,)) == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_min_propagate_nan(backend):
  x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 0.0]], np.float32)
  np.testing.assert_array_equal(impl("reduce_max", backend)(x, axes=(1,)), [np.nan, 2.0])
  np.testing.assert_array_equal(impl("reduce_min", backend)(x, axes=(0,)), [-np.inf, np.nan, 0])
  np.testing.assert_array_equal(impl("cummax", backend)(x[0], axis=0, reverse=False),
                                [1, np.nan, np.nan])


def test_weak_type_rules():
  x = Array(np.ones(3, np.float32), weak_type=True)
  assert lax.reduce_sum(x, (0,)).weak_type
  assert lax.reduce_max(x, (0,)).weak_type
  assert not lax.argmax(x, 0, np.int32).weak_type
  xi = Array(np.ones(3, np.int64), weak_type=True)
  assert not lax.reduce_and(xi, (0,)).weak_type


@pytest.mark.parametrize("name,kw,exc,msg", [
    ("reduce_sum", dict(axes=(2,)), ValueError, "out-of-bounds"),
    ("reduce_sum", dict(axes=(-1,)), ValueError, "out-of-bounds"),
    ("reduce_max", dict(axes=(0, 0)), ValueError, "duplicate"),
    ("cumsum", dict(axis=5, reverse=False), ValueError, "out of bounds"),
    ("argmax", dict(axes=(3,), index_dtype=np.dtype(np.int32)), ValueError, "Invalid axis"),
])
def test_error_messages_name_primitive_and_problem(name, kw, exc, msg):
  p = registry.get(name)
  with pytest.raises(exc, match=msg) as info:
    p.bind(A(np.ones((2, 3), np.float32)), **kw)
  assert name in str(info.value)
  assert "float32[2,3]" in str(info.value) or "(2, 3)" in str(info.value) or name != "reduce_sum"


def test_dtype_errors():
  with pytest.raises(TypeError, match="reduce_sum does not accept dtype bool"):
    lax.reduce_sum(A(np.ones(3, bool)), (0,))
  with pytest.raises(TypeError, match="reduce_and: logical reduction requires operand dtype "
                                      "bool or int, got float32"):
    lax.reduce_and(A(np.ones(3, np.float32)), (0,))
  with pytest.raises(TypeError, match="cumsum does not accept dtype bool"):
    lax.cumsum(A(np.ones(3, bool)))
  with pytest.raises(TypeError, match="index_dtype must be an integer type"):
    lax.argmax(A(np.ones(3)), 0, np.float32)


# ----------------------------------------------------------------- argmin / argmax


@pytest.mark.parametrize("backend", BACKENDS)
def test_argminmax_first_nan_wins_and_ties_go_first(backend):
  amax, amin = impl("argmax", backend), impl("argmin", backend)
  i32 = np.dtype(np.int32)
  x = np.array([1.0, 5.0, 5.0, np.nan, 7.0, np.nan], np.float64)
  assert amax(x, axes=(0,), index_dtype=i32) == 3
  assert amin(x, axes=(0,), index_dtype=i32) == 3
  y = np.array([3, 1, 3, 1, 2], np.int16)
  assert amax(y, axes=(0,), index_dtype=i32) == 0
  assert amin(y, axes=(0,), index_dtype=i32) == 1
  # column layout (reduced axis not last) and a NaN at position 0
  z = np.array([[np.nan, 1.0], [2.0, 3.0], [2.0, np.nan], [9.0, 3.0]], np.float32)
  np.testing.assert_array_equal(amax(z, axes=(0,), index_dtype=i32), [0, 2])
  np.testing.assert_array_equal(amin(z, axes=(0,), index_dtype=i32), [0, 2])
  np.testing.assert_array_equal(amax(np.array([[True, False], [True, True]]), axes=(0,),
                                     index_dtype=i32), [0, 1])


def test_argmax_of_empty_axis_raises():
  with pytest.raises(ValueError, match="argmax.*non-empty"):
    lax.argmax(A(np.zeros((2, 0))), 1, np.int32)
  assert lax.argmax(A(np.zeros((0, 3))), 1, np.int32).shape == (0,)


# ----------------------------------------------------------------- cumulative


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumulative_reverse_and_axes(backend):
  rng = np.random.default_rng(2)
  x = rng.uniform(0.5, 1.5, (3, 4, 5))
  for axis in range(3):
    for reverse in (False, True):
      flip = (lambda v: np.flip(v, axis)) if reverse else (lambda v: v)
      for name, ref in [("cumsum", np.cumsum), ("cumprod", np.cumprod),
                        ("cummax", np.maximum.accumulate), ("cummin", np.minimum.accumulate),
                        ("cumlogsumexp", np.logaddexp.accumulate)]:
        got = impl(name, backend)(x, axis=axis, reverse=reverse)
        np.testing.assert_allclose(got, flip(ref(flip(x), axis)), rtol=1e-12, err_msg=name)


def test_cumlogsumexp_handles_infinities():
  x = np.array([-np.inf, -np.inf, 0.0, np.inf, 1.0])
  for backend in BACKENDS:
    np.testing.assert_array_equal(impl("cumlogsumexp", backend)(x, axis=0, reverse=False),
                                  [-np.inf, -np.inf, 0.0, np.inf, np.inf])


def test_jvp_of_cumulative_ops_vs_finite_differences():
  rng = np.random.default_rng(3)
  x = A(rng.uniform(0.5, 2.0, (4, 7)) * rng.choice([-1, 1], (4, 7)))
  for f in [lambda v: lax.cumprod(v, 1), lambda v: lax.cumprod(v, 0, reverse=True),
            lambda v: lax.cummax(v, 1), lambda v: lax.cummin(v, 0, reverse=True),
            lambda v: lax.cumlogsumexp(v, 1), lambda v: lax.cumlogsumexp(v, 0, reverse=True),
            lambda v: lax.cumsum(v, 1, reverse=True)]:
    testing.check_jvp(f, (x,))


def test_cumprod_and_reduce_prod_jvp_are_zero_safe():
  x = np.array([2.0, 0.0, 3.0, 4.0])
  t = np.array([1.0, 10.0, 100.0, 1000.0])
  _, dy = api.jvp(lambda v: lax.cumprod(v, 0), (A(x),), (A(t),))
  # d/dx of prefix products, exact with a zero inside
  want = [1.0, 1 * 0 + 2 * 10, 2 * 10 * 3, 2 * 10 * 3 * 4]
  np.testing.assert_allclose(np.asarray(dy), want)
  _, dp = api.jvp(lambda v: lax.reduce_prod(v, (0,)), (A(x),), (A(t),))
  np.testing.assert_allclose(np.asarray(dp), 10 * 2 * 3 * 4)
  x2 = np.array([[0.0, 0.0, 5.0], [1.0, 2.0, 3.0]])
  _, dp2 = api.jvp(lambda v: lax.reduce_prod(v, (1,)), (A(x2),), (A(np.ones_like(x2)),))
  np.testing.assert_allclose(np.asarray(dp2), [0.0, 2 * 3 + 1 * 3 + 1 * 2])


def test_reduce_max_jvp_averages_ties():
  x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]])
  t = np.array([[5.0, 1.0, 3.0], [7.0, 1.0, 1.0]])
  _, d = api.jvp(lambda v: lax.reduce_max(v, (1,)), (A(x),), (A(t),))
  np.testing.assert_allclose(np.asarray(d), [2.0, 7.0])
  testing.check_jvp(lambda v: lax.reduce_min(v, (0, 2)),
                    (A(np.random.default_rng(4).standard_normal((3, 2, 4))),))


def test_linear_transposes_inner_product_identity():
  rng = np.random.default_rng(5)
  x = rng.standard_normal((3, 4, 5))
  for axes in [(1,), (0, 2), ()]:
    y = np.asarray(lax.reduce_sum(A(x), axes))
    ct = rng.standard_normal(y.shape)
    xt, = R.reduce_sum_p.transpose(A(ct), ad.UndefinedPrimal(Array(x).aval), axes=axes)
    np.testing.assert_allclose(np.vdot(ct, y), np.vdot(np.asarray(xt), x), rtol=1e-12)
  for reverse in (False, True):
    y = np.asarray(lax.cumsum(A(x), 1, reverse))
    ct = rng.standard_normal(y.shape)
    xt, = R.cumsum_p.transpose(A(ct), ad.UndefinedPrimal(Array(x).aval), axis=1,
                               reverse=reverse)
    np.testing.assert_allclose(np.vdot(ct, y), np.vdot(np.asarray(xt), x), rtol=1e-12)


# ----------------------------------------------------------------- sort


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [9, 300])  # short rows (merge sort) and long rows (radix sort)
def test_sort_float_total_order_nan_last_and_signed_zero_stable(backend, n):
  rng = np.random.default_rng(6)
  x = rng.standard_normal(n)
  x[:8] = [np.nan, -np.inf, 0.0, -0.0, np.inf, -np.nan, 0.0, -0.0]
  rng.shuffle(x[8:])
  for dt in (np.float64, np.float32, np.float16):
    xs = x.astype(dt)
    got, = impl("sort", backend)(xs, dimension=0, is_stable=True, num_keys=1)
    assert got.dtype == dt
    finite = np.sort(xs[~np.isnan(xs)], kind="stable")
    np.testing.assert_array_equal(got[:len(finite)], finite)
    assert np.isnan(got[len(finite):]).all() and len(finite) == n - 2
    zeros = got[got == 0]
    # -0.0 == 0.0 in the order: the stable sort keeps their input order 0, -0, 0, -0
    np.testing.assert_array_equal(np.signbit(zeros), [False, True, False, True])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [11, 500])
def test_sort_stability_and_num_keys(backend, n):
  rng = np.random.default_rng(7)
  k1 = rng.integers(0, 3, n).astype(np.int32)
  k2 = rng.standard_normal(n).round(0)
  v = np.arange(n, dtype=np.int64)
  f = impl("sort", backend)
  sk, sv = f(k1, v, dimension=0, is_stable=True, num_keys=1)
  np.testing.assert_array_equal(sv, np.argsort(k1, kind="stable"))
  np.testing.assert_array_equal(sk, np.sort(k1))
  a, b, c = f(k1, k2, v, dimension=0, is_stable=True, num_keys=2)
  order = np.lexsort((k2, k1))
  np.testing.assert_array_equal(c, order)
  np.testing.assert_array_equal(a, k1[order])
  np.testing.assert_array_equal(b, k2[order])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_key_dtypes_extremes(backend):
  f = impl("sort", backend)
  for dt in (np.int8, np.int64, np.uint8, np.uint64, np.uint32, np.int16):
    info = np.iinfo(dt)
    x = np.array([info.max, 0, info.min, 1, info.max - 1, info.min + 1, 7] * 40, dt)
    np.testing.assert_array_equal(f(x, dimension=0, is_stable=True, num_keys=1)[0], np.sort(x))
  b = np.array([True, False, True, False] * 80)
  v = np.arange(b.size)
  sb, sv = f(b, v, dimension=0, is_stable=True, num_keys=1)
  np.testing.assert_array_equal(sv, np.argsort(b, kind="stable"))
  c = np.array([1 + 2j, 1 + 1j, np.nan + 0j, 0 + 5j, 1 + np.nan * 1j, -1 - 1j] * 50,
               np.complex128)
  got, = f(c, dimension=0, is_stable=True, num_keys=1)
  want = np.sort(c, kind="stable")  # NumPy's complex order is JAX's: (real, imag), NaNs last
  np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_along_each_dimension(backend):
  rng = np.random.default_rng(8)
  x = rng.standard_normal((4, 300, 3)).astype(np.float32)
  y = rng.integers(0, 9, x.shape).astype(np.int16)
  for dim in range(3):
    sx, sy = impl("sort", backend)(x, y, dimension=dim, is_stable=True, num_keys=1)
    perm = np.argsort(x, axis=dim, kind="stable")
    np.testing.assert_array_equal(sx, np.take_along_axis(x, perm, dim))
    np.testing.assert_array_equal(sy, np.take_along_axis(y, perm, dim))


def test_sort_wrappers_and_errors():
  x = A(np.array([3, 1, 2]))
  np.testing.assert_array_equal(lax.sort(x), [1, 2, 3])
  k, v = lax.sort_key_val(x, A(np.array([0, 1, 2])))
  np.testing.assert_array_equal(v, [1, 2, 0])
  out = lax.sort((x, A(np.array([9, 8, 7]))), num_keys=2)
  assert isinstance(out, tuple) and len(out) == 2
  with pytest.raises(ValueError, match="num_keys=2 must equal 1"):
    lax.sort(x, num_keys=2)
  with pytest.raises(ValueError, match="num_keys=3"):
    lax.sort((x, x), num_keys=3)
  with pytest.raises(TypeError, match="sort: Arguments to sort must have equal shapes"):
    R.sort_p.bind(x, A(np.ones(4)), dimension=0, is_stable=True, num_keys=1)


def test_sort_jvp_and_transpose():
  rng = np.random.default_rng(9)
  keys = A(rng.permutation(12).reshape(3, 4) * 0.5)
  vals = A(rng.standard_normal((3, 4)))
  testing.check_jvp(lambda k, v: lax.sort((k, v), dimension=1, num_keys=1), (keys, vals))
  testing.check_jvp(lambda k: lax.sort(k, dimension=0), (keys,))
  # transpose w.r.t. a non-key operand: the inverse permutation (inner-product identity)
  ct = rng.standard_normal((3, 4))
  y = np.asarray(lax.sort((keys, vals), dimension=1)[1])
  res = R.sort_p.transpose([ad.Zero(keys.aval), A(ct)], keys, ad.UndefinedPrimal(vals.aval),
                           dimension=1, is_stable=True, num_keys=1)
  assert res[0] is None
  np.testing.assert_allclose(np.vdot(ct, y), np.vdot(np.asarray(res[1]), np.asarray(vals)))


# ----------------------------------------------------------------- batching


def _batched(x, bd, n=3):
  x = np.asarray(x)
  return A(np.stack([x * (i + 1) if x.dtype != bool else x ^ (i % 2 == 1) for i in range(n)],
                    axis=bd))


@pytest.mark.parametrize("bd", [0, 1, 2, 3])
def test_vmap_reductions_and_scans_every_bdim(bd):
  rng = np.random.default_rng(10)
  x = rng.standard_normal((2, 3, 4))
  xb = _batched(x, bd)
  for f in [lambda v: lax.reduce_sum(v, (0, 2)), lambda v: lax.reduce_max(v, (1,)),
            lambda v: lax.reduce_prod(v, ()), lambda v: lax.argmin(v, 2, np.int32),
            lambda v: lax.cumsum(v, 1, reverse=True), lambda v: lax.cummax(v, 0),
            lambda v: lax.sort(v, dimension=1)]:
    testing.check_vmap(f, (xb,), in_axes=bd)


@pytest.mark.parametrize("bds", [(0, None), (None, 1), (2, 0), (1, 1), (None, 2)])
def test_vmap_multi_operand_sort_mixed_batching(bds):
  rng = np.random.default_rng(11)
  k = rng.permutation(8).reshape(2, 4).astype(np.float64)
  v = rng.integers(0, 5, (2, 4)).astype(np.int32)
  args = [_batched(a, b) if b is not None else A(a) for a, b in zip((k, v), bds)]
  testing.check_vmap(lambda a, b: lax.sort((a, b), dimension=1, num_keys=2), args, in_axes=bds)
  testing.check_vmap(lambda a, b: lax.sort((b, a), dimension=0, num_keys=1), args, in_axes=bds)


def test_vmap_of_jvp_of_cumprod():
  x = _batched(np.array([[1.0, 2.0, 0.5], [3.0, 0.0, 2.0]]), 1)
  t = A(np.ones((2, 3, 3)))
  f = lambda v, tv: api.jvp(lambda u: lax.cumprod(u, 1), (v,), (tv,))[1]
  testing.check_vmap(f, (x, t), in_axes=(1, 1))


# ----------------------------------------------------------------- XLA's association

_WIDE_DTYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]


def _wide_range(rng, shape, d, op):
  """Values whose sums/products round differently in every association order."""
  d = np.dtype(d)
  if op in ("prod", "cumprod"):  # magnitudes near 1, every phase: no overflow
    m = rng.uniform(0.9, 1.1, shape)
    return (m * np.exp(1j * rng.uniform(0, 6.3, shape)) if d.kind == "c" else
            m * rng.choice([-1, 1], shape)).astype(d)
  lim = 6 if d == np.float16 else 30
  x = rng.standard_normal(shape) * 2.0 ** rng.integers(-lim, lim, shape)
  if d.kind == "c":
    x = x + 1j * rng.standard_normal(shape) * 2.0 ** rng.integers(-lim, lim, shape)
  if op == "cumlogsumexp":
    x = rng.uniform(-20, 20, shape)
  return x.astype(d)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", _WIDE_DTYPES)
def test_sums_products_and_scans_associate_as_xla(backend, dtype):
  """Eager float/complex sums, products and scans equal jit's bit for bit (XLA's CPU order:
  kernels.reductions), below the size from which XLA hands sums to YNNPACK."""
  mlir = pytest.importorskip("nbjax.interpreters.mlir")
  rng = np.random.default_rng(21)
  d = np.dtype(dtype)
  cases = [("reduce_sum", s, dict(axes=a)) for s, a in [
      ((7,), (0,)), ((300,), (0,)), ((4000,), (0,)), ((3, 40), (1,)), ((40, 3), (0,)),
      ((3, 100, 4), (1,)), ((5, 33), (1,)), ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)),
      ((4, 3, 2), (1, 2)), ((1, 5), (0,)), ((50, 10), (1,)), ((9, 32), (1,)),
      ((7, 100), (1,)), ((5, 256), (1,)), ((3, 257), (1,)), ((9, 10, 3), (1,))]]
  cases += [("reduce_prod", s, p) for _, s, p in cases[:8] + cases[-6:]]
  scans = ["cumsum", "cumprod"] + (["cumlogsumexp"] if d.kind == "f" else [])
  cases += [(n, s, dict(axis=a, reverse=r)) for n in scans for r in (False, True)
            for s, a in [((1,), 0), ((16,), 0), ((17,), 0), ((300,), 0), ((3000,), 0),
                         ((3, 40), 1), ((40, 3), 0), ((2, 300, 3), 1), ((30, 10), 1),
                         ((5, 16), 1), ((5, 17), 1)]]
  for name, shape, params in cases:
    prim = registry.get(name)
    x = _wide_range(rng, shape, d, name.split("_")[-1])
    want = mlir.single_primitive_impl(prim)(x, **params)
    got = impl(name, backend)(x, **params)
    axes = params.get("axes", ())
    if name == "cumlogsumexp":  # (exp and log1p are XLA's own polynomials: rounding apart)
      np.testing.assert_allclose(got, want, rtol=4e-3 if d == np.float16 else 1e-5
                                 if d == np.float32 else 1e-13, err_msg=f"{name} {shape}")
    elif len(axes) > 1 and max(axes) - min(axes) >= len(axes):
      # non-adjacent reduced axes: XLA's association depends on the host CPU (row-major on
      # the AVX-512 machines, the minor run first on an AVX2 EPYC): equal to rounding
      np.testing.assert_allclose(got, want, rtol=8 * np.finfo(d).eps, atol=0,
                                 err_msg=f"{name} {shape} {params} ({backend})")
    else:
      np.testing.assert_array_equal(got, want, err_msg=f"{name} {shape} {params} ({backend})")


# ----------------------------------------------------------------- parallel kernels


def test_parallel_kernels_match_serial():
  """The prange kernels are off by default on the 2-core machines (see reductions.PAR_MIN)."""
  rng = np.random.default_rng(12)
  x2 = rng.standard_normal((5, 3001))
  x3 = rng.standard_normal((3, 700, 5))
  z = np.float64(0)
  for op in ("sum", "max"):
    zz = z if op == "sum" else np.float64(-np.inf)
    a, b = np.empty(5), np.empty(5)
    K.ROWS[op](x2, a, zz)
    K.ROWS_PAR[op](x2, b, zz)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    K.ROWS_PAR[op](np.ascontiguousarray(x2[:1]), b[:1], zz)
    np.testing.assert_allclose(a[:1], b[:1], rtol=1e-12)
    c, d = np.empty((3, 5)), np.empty((3, 5))
    K.COLS[op](x3, c, zz)
    K.COLS_PAR[op](x3, d, zz)
    np.testing.assert_allclose(c, d, rtol=1e-12)
    K.COLS_PAR[op](np.ascontiguousarray(x3[:1]), d[:1], zz)
    np.testing.assert_allclose(c[:1], d[:1], rtol=1e-12)
  i1, i2 = np.empty(5, np.int64), np.empty(5, np.int64)
  K.ARG_ROWS["argmax"](x2, i1)
  K.ARG_ROWS_PAR["argmax"](x2, i2)
  np.testing.assert_array_equal(i1, i2)
  o1, o2 = np.empty_like(x3), np.empty_like(x3)
  K.CUM_COLS["cumsum"](x3, o1, z, True)
  K.CUM_COLS_PAR["cumsum"](x3, o2, z, True)
  np.testing.assert_allclose(o1, o2)
  keys = rng.integers(-9, 9, (4, 500))
  p1 = np.tile(np.arange(500), (4, 1))
  p2 = p1.copy()
  K.RADIX_ROWS(keys, p1, 64)
  K.RADIX_ROWS_PAR(keys, p2, 64)
  np.testing.assert_array_equal(p1, p2)
  np.testing.assert_array_equal(p1, np.argsort(keys, axis=1, kind="stable"))


def test_eager_policy_switches_backend_by_input_size():
  small, large, thr = registry.policy(R.sort_p)
  assert (small, large) == ("numpy", "numba")
  x = np.random.default_rng(13).standard_normal(thr + 5)
  got = lax.sort(A(x))
  np.testing.assert_array_equal(got, np.sort(x))
  nbjax.config.set_eager_backend("reduce_sum", "numpy")
  try:
    assert R.reduce_sum_p.backend == "numpy"
    np.testing.assert_allclose(lax.reduce_sum(A(x), (0,)), x.sum())
  finally:
    nbjax.config.set_eager_backend("reduce_sum", None)


def test_top_k_order_ties_nan_and_jvp():
  x = A(np.array([[1.0, 3.0, np.nan, 3.0, -0.0, 0.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]]))
  v, i = lax.top_k(x, 3)
  np.testing.assert_array_equal(np.asarray(i), [[2, 1, 3], [0, 1, 2]])
  np.testing.assert_array_equal(np.asarray(v), [[np.nan, 3.0, 3.0], [5.0, 4.0, 3.0]])
  assert i.dtype == np.int32
  u = A(np.array([3, 250, 7, 250], np.uint8))
  np.testing.assert_array_equal(np.asarray(lax.top_k(u, 2)[1]), [1, 3])
  v0, i0 = lax.top_k(x, 2, axis=0)
  np.testing.assert_array_equal(np.asarray(i0)[:, 0], [1, 0])
  with pytest.raises(ValueError, match="nonnegative"):
    lax.top_k(x, -1)
  rng = np.random.default_rng(14)
  testing.check_jvp(lambda a: lax.top_k(a, 2)[0], (A(rng.permutation(10).reshape(2, 5) * 1.0),))


def test_single_operand_sort_fast_path_matches_stable_sort():
  # one operand takes NumPy's SIMD quicksort unless NaN/-0.0 force the stable sort
  import nbjax.numpy as jnp
  rng = np.random.default_rng(3)
  for x in (rng.standard_normal(20000).astype(np.float32),
            np.array([0.0, -0.0, 1.0, -0.0, np.nan, 0.0, -np.inf], np.float32),
            rng.integers(-5, 5, 20000).astype(np.int32)):
    got = np.asarray(jnp.sort(jnp.asarray(x)))
    want = np.sort(x, kind="stable")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_or_negzero_check_finds_one_anywhere(dtype):
  # the stable-sort guard scans in blocks of 2048: one NaN/-0.0 at every block edge
  from nbjax.lax.reductions import _nan_or_negzero
  base = np.abs(np.random.default_rng(0).standard_normal(5000)).astype(dtype) + 1
  assert not _nan_or_negzero(base) and not _nan_or_negzero(base[:0])
  for special in (np.nan, -np.nan, -0.0):
    for at in (0, 1, 2046, 2047, 2048, 4095, 4096, 4999):
      x = base.copy()
      x[at] = special
      assert _nan_or_negzero(x), (special, at)
      assert _nan_or_negzero(x[:at + 1]) and not _nan_or_negzero(x[:at])
  assert not _nan_or_negzero(np.array([0.0, np.inf, -np.inf], dtype))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32])
def test_specialized_kernel_is_the_impl_bit_for_bit(name, dtype):
  """``impl.specialize`` (the per-aval kernel eager programs call) reduces in exactly the
  impl's order: XLA's association for float/complex sums and products (windows of 32),
  across window boundaries, leading/trailing/inner/all axes."""
  if name in ("max", "min") and np.dtype(dtype).kind == "c":
    pytest.skip("no complex max/min")
  f = impl(f"reduce_{name}", "numba")
  rng = np.random.default_rng(1)
  for shape, axes in [((8, 1), (0, 1)), ((8, 16), (0,)), ((8, 16), (1,)), ((3, 70, 5), (1,)),
                      ((65, 4), (0,)), ((2, 33, 3), (0, 1)), ((2, 5, 40), (1, 2)), ((300,), (0,))]:
    x = rng.standard_normal(shape) * 1e3
    if np.dtype(dtype).kind == "c":
      x = x + 1j * rng.standard_normal(shape)
    x = (x if name != "prod" else 1 + x * 1e-4).astype(dtype)
    k = f.specialize([nbjax.core.ShapedArray(x.shape, x.dtype)], {"axes": axes})
    if k is None:
      continue
    np.testing.assert_array_equal(k(x), f(x, axes=axes), err_msg=f"{name} {shape} {axes}")
    assert k(x).dtype == f(x, axes=axes).dtype


# ----------------------------------------------------------------- accuracy and special values


def _adversarial(n, rng):
  big = rng.standard_normal(n // 2) * 1e4
  yield "cancellation", np.concatenate([big, -big[::-1] * (1 + 1e-6)])[rng.permutation(2 * (n // 2))]
  s = np.full(n, 1e-3)
  s[n // 3] = 1e4
  yield "many small + one large", s
  yield "alternating signs", np.where(np.arange(n) % 2, 1.0, -1.0) * (1 + rng.random(n))
  yield "uniform", rng.random(n)


@pytest.mark.parametrize("n", [3000, 10**4, 2 * 10**5])
def test_float32_sum_error_is_pairwise_or_better(n):
  """The eager float32 sum's error against an exact (fsum) reference stays within NumPy's
  pairwise bound (a naive running sum of these is off by ~n * eps relative to sum|x|).
  Below 4096 elements the sum is XLA's (windows of 32 folded in order, bit for bit jit's):
  its bound is ~(32 + depth) eps sum|x|."""
  rng = np.random.default_rng(n)
  eps = np.finfo(np.float32).eps
  for name, x in _adversarial(n, rng):
    x = x.astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    scale = math.fsum(np.abs(x.astype(np.float64)))
    err = abs(float(lax.reduce_sum(A(x), (0,))) - exact)
    err_np = abs(float(np.sum(x)) - exact)
    bound = 4 * eps * scale if n >= 4096 else 40 * eps * scale
    assert err <= max(2 * err_np, bound), (name, err, err_np, scale)
    # and along the non-contiguous axis (column sums in XLA's windows)
    cols = np.asarray(lax.reduce_sum(A(np.stack([x, x[::-1]], 1)), (0,)))
    assert abs(float(cols[0]) - exact) <= max(2 * err_np, 40 * eps * scale), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_rows_sum_as_their_long_row_cascade(dtype):
  """Row sums from 4096 elements (the vectorised cascade): rows of up to 256 elements take
  the leaf directly, longer ones the cascade; a row's bits are the one-row call's at every
  length around the boundary, and within the pairwise bound of an exact reference."""
  rng = np.random.default_rng(7)
  eps = np.finfo(dtype).eps
  for n in (1, 3, 10, 255, 256, 257, 600):
    x = (rng.standard_normal((max(1, 8192 // n), n)) * 1e3).astype(dtype)
    got = np.asarray(lax.reduce_sum(A(x), (1,)))
    for i in (0, x.shape[0] // 2, x.shape[0] - 1):  # (the row first in a block of zeros)
      blk = np.pad(x[i:i + 1], ((0, -(-4096 // n)), (0, 0)))
      assert got[i] == np.asarray(lax.reduce_sum(A(blk), (1,)))[0], (n, i)
      r = x[i].astype(np.float64)
      assert abs(float(got[i]) - math.fsum(r)) <= 8 * eps * math.fsum(np.abs(r)), (n, i)


_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 2.5, -2.5])


def _ref_arg(x, op):
  """JAX's argmax/argmin per row: the first NaN, else the first index equal to the extremum."""
  out = []
  for r in x:
    nan = np.flatnonzero(np.isnan(r))
    e = r.max() if op == "argmax" else r.min()
    out.append(nan[0] if nan.size else np.flatnonzero(r == e)[0])
  return np.array(out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bit_kernels_max_min_argmax_special_values(dtype):
  """max/min (NaN first, -0 < +0) and argmax/argmin (first NaN, first extremum with -0 == +0)
  on mixes of signed zeros, infinities and NaNs of both signs, rows and columns layouts."""
  rng = np.random.default_rng(5)
  for _ in range(150):
    O, N = int(rng.integers(1, 4)), int(rng.choice([1, 2, 7, 33, 256, 257, 300, 700, 5000]))
    pool = np.concatenate([_SPECIAL[rng.integers(0, _SPECIAL.size, rng.integers(1, 4))],
                           rng.standard_normal(2)])
    x = rng.choice(pool, size=(O, N)).astype(dtype)
    for axis in (1, 0):
      xa = x if axis == 1 else np.ascontiguousarray(x.T)
      for op in ("argmax", "argmin"):
        got = np.asarray(getattr(lax, op)(A(xa), axis, np.int32))
        np.testing.assert_array_equal(got, _ref_arg(x, op))
      for op in ("max", "min"):
        got = np.asarray(getattr(lax, "reduce_" + op)(A(xa), (axis,)))
        want = getattr(np, op)(x, axis=1)
        z = want == 0  # IEEE's signed zeros: max is +0 if any +0, min -0 if any -0
        neg = (x == 0) & np.signbit(x)
        pos = (x == 0) & ~np.signbit(x)
        want[z] = np.where(~pos.any(1) if op == "max" else neg.any(1), -0.0, 0.0)[z]
        np.testing.assert_array_equal(got, want)
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got)[ok], np.signbit(want)[ok])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
def test_argmax_across_kernel_blocks(dtype):
  """argmax/argmin of rows longer than the kernel's blocks: the best block is a later one,
  ties across blocks go to the first, a NaN anywhere wins, -0 ties +0."""
  n = 40000
  x = np.full(n, -1, dtype)
  x[[30000, 35000]] = 3
  x[[20000, 39000]] = -5
  for axis_last in (True, False):  # (one row: NumPy's argmax; two: the numba kernel's blocks)
    for xa in ((x[None], np.stack([x, x])) if axis_last else (x[:, None], np.stack([x, x], 1))):
      ax = 1 if axis_last else 0
      assert (np.asarray(lax.argmax(A(xa), ax, np.int32)) == 30000).all()
      assert (np.asarray(lax.argmin(A(xa), ax, np.int32)) == 20000).all()
  if np.dtype(dtype).kind == "f":
    z = np.full(n, -0.0, dtype)
    z[25000:] = 0.0
    assert int(lax.argmax(A(z), 0, np.int32)) == 0
    assert not np.signbit(lax.reduce_max(A(z), (0,)))
    assert np.signbit(lax.reduce_min(A(z), (0,)))
    x[37000] = np.nan
    assert int(lax.argmax(A(x), 0, np.int32)) == 37000
    assert int(lax.argmin(A(x), 0, np.int32)) == 37000


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_argmax_first_best_within_the_block(dtype):
  """The last step searches the best block in runs of 64: the first best element wherever it
  falls (a run's edges, a later run than a tie's, -0 after +0), against NumPy's argmax."""
  rng = np.random.default_rng(3)
  for n in (63, 64, 65, 200, 4095, 4097, 9000):
    for first in sorted(f for f in {0, 62, 63, 64, 65, 127, 128, n // 2, n - 1} if f < n):
      x = rng.integers(-50, 0, n).astype(dtype)
      x[first] = 7
      x[rng.integers(first, n, 3)] = 7  # ties after the first
      for f, np_f in ((lax.argmax, np.argmax), (lax.argmin, np.argmin)):
        y = x if f is lax.argmax else -x
        assert int(f(A(y), 0, np.int32)) == np_f(y) == first, (n, first)
        assert (np.asarray(f(A(np.stack([y, y])), 1, np.int32)) == first).all()  # (numba)
  z = np.zeros(300, dtype)
  z[:130] = -1
  z[130] = 0.0
  z[129] = -0.0  # -0 ties +0: the first zero
  assert int(lax.argmax(A(z), 0, np.int32)) == 129


def test_top_k_list_total_order_and_errors_as_jax():
  import nbjax.numpy as jnp
  out = lax.top_k(jnp.array([0.0, -0.0, 0.0]), 3)
  assert isinstance(out, list)  # (JAX 0.10.2 returns a list)
  np.testing.assert_array_equal(np.asarray(out[1]), [0, 2, 1])  # -0.0 below 0.0 (XLA's TopK)
  assert np.signbit(np.asarray(out[0])).tolist() == [False, False, True]
  v, i = lax.top_k(jnp.array([1.0, -0.0, 0.0, 3.0], jnp.bfloat16), 3)
  np.testing.assert_array_equal(np.asarray(i), [3, 0, 2])
  v, i = nbjax.jit(lambda a: lax.top_k(a, 2))(jnp.array([-0.0, 0.0, -1.0]))
  np.testing.assert_array_equal(np.asarray(i), [1, 0])
  with pytest.raises(ValueError, match=r"k argument to top_k must be no larger than size along "
                     r"axis; got k=3 with shape=\[2\] and axis=0"):
    lax.top_k(jnp.array([1.0, 2.0]), 3)
  with pytest.raises(ValueError, match="axis -1 is out of bounds for array of dimension 0"):
    lax.top_k(jnp.array(1.0), 1)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_sums_compute_in_float32_as_jax(dtype):
  """jnp.sum/prod (no dtype asked), mean and var of float16/bfloat16 convert to float32,
  reduce and round once (JAX's ``_upcast_f16``): in the jaxpr, and eager bits equal jit's."""
  import nbjax.numpy as jnp
  x = jnp.asarray(np.random.default_rng(3).standard_normal((300, 7)).astype(dtypes.dtype(dtype)))
  for f in (lambda a: jnp.sum(a, 1), lambda a: jnp.sum(a), lambda a: jnp.mean(a, 0),
            lambda a: jnp.mean(a), lambda a: jnp.prod(a[:, :3], 1), lambda a: jnp.var(a, 1),
            lambda a: jnp.std(a, 0)):
    assert any(e.primitive.name == "convert_element_type" and e.params["new_dtype"] == np.float32
               for e in api.make_jaxpr(f)(x).eqns)
    got, want = np.asarray(f(x)), np.asarray(nbjax.jit(f)(x))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
  # a dtype asked for is the computation's: no upcast
  assert [e.primitive.name for e in api.make_jaxpr(lambda a: jnp.sum(a, 1, dtype=x.dtype))(
      x).eqns] == ["reduce_sum"]


# ------------------------------------- jnp reductions: arguments as JAX's own test suite
# (values from JAX 0.10.2 with x64)

def test_average_weights_over_several_axes_as_jax():
  import nbjax.numpy as jnp
  x = np.arange(24.).reshape(2, 3, 4)
  w = np.arange(1., 13.).reshape(4, 3)  # weights over axes (2, 1), in that order
  np.testing.assert_allclose(np.asarray(jnp.average(x, (2, 1), w)),
                             [6.48717949, 18.48717949], rtol=1e-8)
  np.testing.assert_allclose(np.asarray(nbjax.jit(lambda a, b: jnp.average(a, (2, 1), b))(x, w)),
                             np.average(x, (2, 1), w), rtol=1e-12)
  with pytest.raises(ValueError, match="Shape of weights must be consistent"):
    jnp.average(x, (1, 2), w)


def test_var_std_mean_argument_and_complex_dtype_as_jax():
  import nbjax.numpy as jnp
  assert float(jnp.var(jnp.array([1., 2., 4.]), mean=jnp.array(2.0))) == pytest.approx(
      1.66666667)
  out = jnp.std(jnp.array([[1., 2., 4.]]), axis=1, mean=jnp.array([[1.0]]), ddof=1)
  np.testing.assert_allclose(np.asarray(out), [2.23606798])
  v = jnp.var(jnp.arange(4.), dtype=jnp.complex64)   # JAX: the result in the complex dtype
  assert v.dtype == np.complex64 and complex(v) == 1.25
  with pytest.raises(ValueError, match="real dtype parameters"):
    jnp.var(jnp.arange(4.) + 1j, dtype=jnp.float32)


@pytest.mark.parametrize("name", ["sum", "max", "mean", "var", "std", "all", "nansum",
                                  "nanmax", "nanmean"])
def test_reductions_reject_non_boolean_where_as_jax(name):
  import nbjax.numpy as jnp
  kw = {"initial": 0.} if name in ("max", "nanmax") else {}
  with pytest.raises(ValueError, match=f"jnp.{name}: where must be None or a boolean array; "
                                       r"got where.dtype=dtype\('int64'\)"):
    getattr(jnp, name)(jnp.ones(3), where=jnp.ones(3, int), **kw)


def test_reduction_initial_must_be_scalar_and_nanmax_initial_of_empty():
  import nbjax.numpy as jnp
  with pytest.raises(ValueError, match=r"initial value must be a scalar. Got array of shape "
                                       r"\(1, 2, 3\)"):
    jnp.sum(jnp.ones((2, 3, 4)), axis=-1, initial=jnp.zeros((1, 2, 3)))
  np.testing.assert_array_equal(np.asarray(jnp.nanmax(jnp.zeros((3, 0)), axis=1, initial=0)),
                                [0., 0., 0.])
  assert float(jnp.nanmin(jnp.array([np.nan, np.nan]), initial=5.)) == 5.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("chunk", [1 << 12, 1 << 20])
def test_long_row_reductions_on_two_threads_keep_the_bits(dtype, chunk, monkeypatch):
  """A full reduction of a long row runs in chunks on two threads: sums give the one-call
  cascade's bits (chunks are whole subtrees, combined as the cascade combines them), max/min
  the same value, NaN and signed zero, for any chunk count and a partial last chunk."""
  from nbjax.lax import reductions as R
  import nbjax.numpy as jnp
  monkeypatch.setattr(R, "_ROW_CHUNK", chunk)
  monkeypatch.setattr(R, "ROW_TEAM_MIN", 2 * chunk)
  rng = np.random.default_rng(7)
  for n in (2 * chunk, 5 * chunk + 3, 7 * chunk, 13 * chunk + chunk // 2, 16 * chunk - 1):
    if dtype == np.int32:
      x = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    else:  # magnitudes that change from chunk to chunk: a reassociation changes the rounding
      x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 3, n)).astype(dtype)
      x[::chunk // 3] *= dtype(1e7 if dtype == np.float32 else 1e16)
    want = np.empty(1, dtype)
    K.ROWS["sum"](x.reshape(1, -1), want, dtype(0))  # (rows of >= 4096: the cascade)
    assert np.asarray(lax.reduce_sum(A(x), (0,))).tobytes() == want[0].tobytes(), n
    if dtype != np.int32:
      assert np.asarray(jnp.sum(A(x))).tobytes() == want[0].tobytes(), n
    for op, f in (("max", jnp.max), ("min", jnp.min)):
      y = x.copy()
      if dtype != np.int32:
        y[:] = np.abs(y) * (1 if op == "min" else -1)
        y[n - 3] = 0.0
        y[chunk + 1] = -0.0  # max: +0 wins wherever it is; min: -0
      w = np.empty(1, dtype)
      K.ROWS[op](y.reshape(1, -1), w, dtype(-np.inf if op == "max" else np.inf)
                 if dtype != np.int32 else (np.iinfo(dtype).min if op == "max"
                                            else np.iinfo(dtype).max))
      g = np.asarray(f(A(y)))
      assert g.tobytes() == w[0].tobytes(), (op, n, g, w)
      if dtype != np.int32:
        y[n // 2 + 1] = np.nan
        assert np.isnan(np.asarray(f(A(y))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_column_ranges_on_two_threads_keep_the_bits(dtype, monkeypatch):
  """Reductions over a leading or middle axis of ROW_TEAM_MIN elements run as ranges of
  columns (or of outer blocks) on the caller and the team worker, the columns in tiles: each
  result is the one-call column kernel's (float sums: XLA's windows; max/min: NaN, -0)."""
  import nbjax.numpy as jnp
  from kernels import threads as T
  from nbjax.lax import reductions as R
  monkeypatch.setattr(R, "ROW_TEAM_MIN", 1 << 16)
  jobs, team_run = [], R.team_run
  monkeypatch.setattr(R, "team_run", lambda fn, arrays, nch: (jobs.append(nch),
                                                              team_run(fn, arrays, nch))[1])
  rng = np.random.default_rng(4)
  for shape, axis in (((40, 5000), 0), ((3, 20, 6000), 1), ((200, 30, 40), 1),
                      ((1, 70000, 3), 1), ((33, 9000), 0)):
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 3, shape)).astype(dtype)
    if dtype != np.int32:
      x.reshape(-1)[::11] = -0.0
      x.reshape(-1)[5::4001] = np.nan
    O, N = math.prod(shape[:axis]), shape[axis]
    x3 = x.reshape(O, N, -1)
    for op, f in (("sum", jnp.sum), ("max", jnp.max), ("min", jnp.min)):
      if op == "sum" and dtype == np.int32:
        continue  # (jnp.sum of int32 is int64's)
      z = {"sum": dtype(0), "max": dtype(-np.inf), "min": dtype(np.inf)}[op] \
          if dtype != np.int32 else (np.iinfo(dtype).min if op == "max" else np.iinfo(dtype).max)
      want = np.empty((O, x3.shape[2]), dtype)
      (K.TREE_COLS if op == "sum" else K.COLS)[op](x3, want, z)
      if op == "sum" and dtype != np.int32:  # the tiles: XLA's order as NumPy ops compute it
        assert want.tobytes() == R._tree_np(x3, np.add, dtype(0)).tobytes(), shape
      else:
        np.testing.assert_array_equal(want, getattr(np, op)(x3, axis=1))
      got = np.asarray(f(A(x), axis=axis))
      assert got.tobytes() == want.tobytes(), (shape, op)
  assert jobs and min(jobs) >= 2  # ((40, 5000) over axis 0: two column ranges at least)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_row_blocks_on_two_threads_keep_the_bits(dtype, monkeypatch):
  """Rows of ROW_TEAM_MIN elements in all run as blocks of rows on the caller and the team
  worker: each row's result is the one-call kernel's (sums: the cascade's bits; max/min: the
  value, NaN and signed zero)."""
  import nbjax.numpy as jnp
  from nbjax.lax import reductions as R
  monkeypatch.setattr(R, "ROW_TEAM_MIN", 1 << 16)
  rng = np.random.default_rng(3)
  for shape in ((1000, 1000), (3, 40000), (40000, 2), (5, 13107), (64, 1024)):
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 3, shape)).astype(dtype)
    if dtype != np.int32:
      x[1, ::7] = -0.0
      x[2, -1] = np.nan
    for op, f in (("sum", jnp.sum), ("max", jnp.max), ("min", jnp.min)):
      if op == "sum" and dtype == np.int32:
        continue  # (jnp.sum of int32 is int64's)
      z = {"sum": dtype(0), "max": dtype(-np.inf), "min": dtype(np.inf)}[op] \
          if dtype != np.int32 else (np.iinfo(dtype).min if op == "max" else np.iinfo(dtype).max)
      want = np.empty(shape[0], dtype)
      K.ROWS[op](x, want, z)
      assert np.asarray(f(A(x), axis=1)).tobytes() == want.tobytes(), (shape, op)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, dtypes.bfloat16, np.int32,
                                   np.uint8, np.bool_])
def test_argmax_one_row_backend_switch_as_jit(dtype):
  """argmax/argmin reducing one row: NumPy's argmax from 4096 elements (not float16/bfloat16),
  numba's kernel below and for batches of rows (but float32/float64 rows of 64+ along the last
  axis: NumPy's); both give jit's index (the first NaN, else the first extremum, -0.0 == 0.0)
  for every placement of the row's axis."""
  assert registry.policy(lax.argmax_p) == ("numba", "numpy", 4096)
  rng = np.random.default_rng(7)
  for n in (4095, 4096, 70000):
    x = (rng.standard_normal(n) * 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
      x[[5, 3000, n - 1]] = [-0.0, 0.0, np.nan]
      x[n // 2] = np.nan
    for op in (lax.argmax, lax.argmin):
      for xa, ax in ((x, 0), (x[None], 1), (x[:, None], 0), (np.stack([x, x[::-1]]), 1)):
        got = op(A(xa), ax, np.int32)
        want = nbjax.jit(lambda v: op(v, ax, np.int32))(A(xa))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got.dtype == want.dtype and got.shape == want.shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_argmax_rows_numpy_as_jit(dtype):
  """Float32/float64 rows of 64+ along the last axis take NumPy's per-row argmax: jit's index
  (first NaN, else first extremum, -0.0 == 0.0) in every row, for 63/64 and other lengths."""
  rng = np.random.default_rng(8)
  for shape in ((5, 63), (5, 64), (3, 4, 100), (7, 1000), (3, 64)):
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    x[..., 0, 3] = x[..., 0, :].max() + 1  # then its -0.0/0.0 ties and NaNs below
    x[..., -1, :] = 0.0
    x[..., -1, 5] = -0.0
    x[..., 1, [7, 40]] = np.nan
    for op in (lax.argmax, lax.argmin):
      for idt in (np.int32, np.int64):
        got = op(A(x), x.ndim - 1, idt)
        want = nbjax.jit(lambda v: op(v, x.ndim - 1, idt))(A(x))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
