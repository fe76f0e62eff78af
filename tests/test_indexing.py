"""Indexing primitives (dynamic_slice, dynamic_update_slice, gather, scatter*): JAX's
out-of-bounds semantics (clamped starts, FILL_OR_DROP fill values, dropped scatter windows,
CLIP), NumPy-indexing patterns expressed as gathers/scatters, batching dims, errors, kernel
bounds safety, and every rule: jvp vs central differences, transpose by the inner-product
identity, batching at every batch-dim placement vs a loop (one primitive call per batch).
Index dtypes: every indexing entry point (x[idx], .at[], take, take_along_axis, gather,
scatter, dynamic slices) in every mode with negative and uint64 indices, eager and jit;
static out-of-bounds integer indices (clamped, or IndexError under check_static_indices).
"""
import re
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import api, lax, registry, testing
from nbjax.config import config
from nbjax.lax import GatherDimensionNumbers as GDN
from nbjax.lax import GatherScatterMode as Mode
from nbjax.lax import ScatterDimensionNumbers as SDN
from test_shape import check_batching, check_transpose, float_cases

INDEXING = [p for p in registry.primitives(builtin_only=True) if p.family == "indexing"]
_LINEAR_ARGS = {"dynamic_slice": (0,), "dynamic_update_slice": (0, 1), "gather": (0,),
                "scatter": (0, 2), "scatter-add": (0, 2), "scatter-sub": (0, 2)}
_ELEMENTWISE = all(hasattr(lax, n) for n in ("select_n", "eq", "div", "full"))
needs_elementwise = pytest.mark.skipif(not _ELEMENTWISE, reason="needs lax.select_n/eq/div/full")


def _index_args(prim, args):
  if prim.name == "dynamic_slice":
    return set(range(1, len(args)))
  if prim.name == "dynamic_update_slice":
    return set(range(2, len(args)))
  return {1}


def _needs_elementwise(prim):
  return prim.name in ("scatter-min", "scatter-max")


@pytest.mark.parametrize("prim", INDEXING, ids=str)
def test_jvp_matches_finite_differences(prim):
  if _needs_elementwise(prim) and not _ELEMENTWISE:
    pytest.skip("needs lax.select_n/eq/div")
  for args, params in float_cases(prim):
    testing.check_jvp(testing.prim_fun(prim, params), args)


@pytest.mark.parametrize("prim", [p for p in INDEXING if p.name in _LINEAR_ARGS], ids=str)
def test_transpose_inner_product(prim):
  for args, params in float_cases(prim):
    check_transpose(prim, args, params, _LINEAR_ARGS[prim.name])


@pytest.mark.parametrize("prim", INDEXING, ids=str)
def test_batching_every_placement(prim):
  for args, params in float_cases(prim, np.float32):
    check_batching(prim, args, params, index_args=_index_args(prim, args), limit=10)

# ----------------------------------------------------------------------------- dynamic slices


def test_dynamic_slice_clamps_and_wraps_negative():
  x = np.arange(10)
  np.testing.assert_array_equal(lax.dynamic_slice(x, (8,), (4,)), [6, 7, 8, 9])
  np.testing.assert_array_equal(lax.dynamic_slice(x, (np.int32(100),), (3,)), [7, 8, 9])
  np.testing.assert_array_equal(lax.dynamic_slice(x, (-2,), (2,)), [8, 9])     # wraps
  np.testing.assert_array_equal(lax.dynamic_slice_p.bind(x, np.int32(-2), slice_sizes=(2,)),
                                [0, 1])                                        # primitive clamps
  y = np.arange(20.0).reshape(4, 5)
  np.testing.assert_array_equal(lax.dynamic_slice_in_dim(y, 3, 2, axis=0), y[2:4])
  np.testing.assert_array_equal(lax.dynamic_index_in_dim(y, 1, axis=1, keepdims=False), y[:, 1])
  with pytest.raises(ValueError, match="allow_negative_indices=False"):
    lax.dynamic_slice(x, (-1,), (1,), allow_negative_indices=False)
  # unsigned starts beyond int64 clamp to the end, never wrap
  np.testing.assert_array_equal(lax.dynamic_slice_p.bind(x, np.uint64(2**63 + 5), slice_sizes=(2,)),
                                [8, 9])


def test_dynamic_slice_traced_negative_starts_wrap():
  x = np.arange(10)
  f = lambda i: lax.dynamic_slice(x, (i,), (2,))
  np.testing.assert_array_equal(api.vmap(f)(np.array([-1, 3, -10, 12], np.int32)),
                                [[8, 9], [3, 4], [0, 1], [8, 9]])
  g = lambda i: lax.dynamic_update_slice_in_dim(np.zeros(4), np.ones(1), i, 0)
  np.testing.assert_array_equal(api.vmap(g)(np.array([-1, 0], np.int32)), [[0, 0, 0, 1], [1, 0, 0, 0]])


def test_dynamic_update_slice_clamps():
  x = np.zeros((3, 4))
  u = np.ones((2, 2))
  got = lax.dynamic_update_slice(x, u, (5, -7))  # 5 clamps to 1; -7 wraps to -3, clamps to 0
  want = x.copy()
  want[1:3, 0:2] = 1
  np.testing.assert_array_equal(got, want)
  got = lax.dynamic_update_slice_in_dim(np.arange(5.0), np.array([9.0, 9.0]), 4, 0)
  np.testing.assert_array_equal(got, [0, 1, 2, 9, 9])
  got = lax.dynamic_update_index_in_dim(np.zeros((3, 2)), np.array([1.0, 2.0]), 1, 0)
  np.testing.assert_array_equal(got, [[0, 0], [1, 2], [0, 0]])


def test_dynamic_slice_batched_starts_is_one_gather():
  x = np.arange(20.0).reshape(4, 5)
  starts = np.array([0, 2, 9], np.int32)
  f = lambda i: lax.dynamic_slice(x, (np.int32(1), i), (2, 3))
  testing.check_vmap(f, [starts])
  jaxpr = api.make_jaxpr(api.vmap(f))(starts)
  names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
  assert names.count("gather") == 1 and "dynamic_slice" not in names, names
  g = lambda xb, i: lax.dynamic_update_slice(xb, np.ones((1, 2)), (i, np.int32(3)))
  testing.check_vmap(g, [np.zeros((3, 4, 5)), starts], in_axes=(0, 0))
  names = [e.primitive.name for e in api.make_jaxpr(api.vmap(g))(np.zeros((3, 4, 5)), starts).jaxpr.eqns]
  assert names.count("scatter") == 1, names

# ----------------------------------------------------------------------------- gather


def _take_rows(x, idx, mode=None, fill_value=None):
  """``x[idx]`` along axis 0 as a gather (idx: (k,))."""
  dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
  return lax.gather(x, lax.expand_dims(idx, (1,)), dn, (1, x.shape[1]), mode=mode,
                    fill_value=fill_value)


def test_gather_default_mode_clamps_and_fill_or_drop_fills():
  x = np.arange(12.0).reshape(4, 3)
  idx = np.array([0, 3, 7, -1], np.int32)
  np.testing.assert_array_equal(_take_rows(x, idx), x[[0, 3, 3, 0]])          # default: clamp
  np.testing.assert_array_equal(_take_rows(x, idx, mode="clip"), x[[0, 3, 3, 0]])
  got = np.asarray(_take_rows(x, idx, mode="fill"))
  np.testing.assert_array_equal(got[:2], x[[0, 3]])
  assert np.isnan(got[2:]).all()                                              # default fill NaN
  got = np.asarray(_take_rows(x, idx, mode=Mode.FILL_OR_DROP, fill_value=-5))
  np.testing.assert_array_equal(got[2:], -5)


@pytest.mark.parametrize("dtype,fill", [(np.int32, np.iinfo(np.int32).min), (np.uint8, 255),
                                        (np.bool_, True), (np.complex64, np.nan)])
def test_gather_default_fill_values(dtype, fill):
  x = np.zeros((3, 2), dtype)
  got = np.asarray(_take_rows(x, np.array([5]), mode="fill"))
  assert got.dtype == dtype
  if dtype == np.complex64:
    assert np.isnan(got).all()
  else:
    assert (got == fill).all()


def test_gather_window_partially_out_of_bounds():
  x = np.arange(10.0)
  dn = GDN(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
  idx = np.array([[2], [8]], np.int32)
  got = np.asarray(lax.gather(x, idx, dn, (3,), mode="fill", fill_value=0.0))
  np.testing.assert_array_equal(got, [[2, 3, 4], [0, 0, 0]])  # whole window filled
  got = lax.gather(x, idx, dn, (3,), mode="clip")
  np.testing.assert_array_equal(got, [[2, 3, 4], [7, 8, 9]])   # start clamped to fit


def test_gather_without_indices_allows_any_slice_size():
  # JAX 0.10.2 checks slice sizes against the operand only when there are indices (lax_test
  # testGather with an empty operand); jit lowers an empty result to a constant
  dn = GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
  dn2 = GDN(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))
  for f in (lax.gather, nbjax.jit(lax.gather, static_argnums=(2, 3))):
    out = f(np.zeros(0, bool), np.zeros((0, 1), np.int32), dn, (1,))
    assert out.shape == (0,) and out.dtype == np.bool_
    out = f(np.zeros((0, 3)), np.zeros((0, 1), np.int32), dn2, (2, 3))
    assert out.shape == (0, 2, 3) and out.dtype == np.float64
    with pytest.raises(TypeError, match=re.escape(
        "Slice size at index 0 in gather op is out of range, must be within [0, 0 + 1), got 1.")):
      f(np.zeros(0, bool), np.zeros((2, 1), np.int32), dn, (1,))


def test_gather_numpy_indexing_patterns():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((4, 5, 6))
  i = np.array([3, 0, 4, 4], np.int32)
  j = np.array([5, 1, 0, 2], np.int32)
  # x[:, i]: operand dim 1 indexed, others are slices
  dn = GDN(offset_dims=(0, 2), collapsed_slice_dims=(1,), start_index_map=(1,))
  np.testing.assert_array_equal(lax.gather(x, i[:, None], dn, (4, 1, 6)), x[:, i])
  # x[i, :, j] (advanced indices separated by a slice: the index dim goes first)
  dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0, 2), start_index_map=(0, 2))
  np.testing.assert_array_equal(lax.gather(x, np.stack([i, j], 1) % [4, 6], dn, (1, 5, 1)),
                                x[i % 4, :, j % 6])
  # x[1:3, i] with a static slice: start 1 in dim 0 via a constant index column
  dn = GDN(offset_dims=(0, 2), collapsed_slice_dims=(1,), start_index_map=(0, 1))
  idx = np.stack([np.ones_like(i), i], 1)
  np.testing.assert_array_equal(lax.gather(x, idx, dn, (2, 1, 6)), x[1:3][:, i])


def test_gather_operand_batching_dims():
  rng = np.random.default_rng(1)
  x = rng.standard_normal((3, 5, 2))
  idx = np.array([[4], [0], [2]], np.int32)
  dn = GDN(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,),
           operand_batching_dims=(0,), start_indices_batching_dims=(0,))
  got = lax.gather(x, idx, dn, (1, 1, 2))
  np.testing.assert_array_equal(got, x[np.arange(3), idx[:, 0]])
  for b in ("numba", "numpy"):
    np.testing.assert_array_equal(
        lax.gather_p.impls[b](x, idx, dimension_numbers=dn, slice_sizes=(1, 1, 2),
                              unique_indices=False, indices_are_sorted=False,
                              mode=Mode.PROMISE_IN_BOUNDS, fill_value=None),
        x[np.arange(3), idx[:, 0]])


def test_vmap_gather_batched_indices_is_one_gather_with_batching_dims():
  x = np.random.default_rng(2).standard_normal((3, 7))
  idx = np.array([[1, 6, 6], [0, 0, 2], [5, 9, -3]], np.int32)
  f = lambda row, i: lax.squeeze(_take_rows(lax.expand_dims(row, (1,)), i), (1,))
  testing.check_vmap(f, [x, idx], in_axes=(0, 0))
  testing.check_vmap(f, [x.T, idx], in_axes=(1, 0))
  jaxpr = api.make_jaxpr(api.vmap(f))(x, idx)
  gathers = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "gather"]
  assert len(gathers) == 1
  assert gathers[0].params["dimension_numbers"].operand_batching_dims == (0,)


def test_large_gather_parallel_matches_reference():
  rng = np.random.default_rng(3)
  x = rng.standard_normal((1000, 200))
  idx = rng.integers(-10, 1010, (800,)).astype(np.int32)
  for mode in ("clip", "fill"):
    got = _take_rows(x, idx, mode=mode, fill_value=0.0)
    want = lax.gather_p.impls["numpy"](
        x, idx[:, None], dimension_numbers=GDN((1,), (0,), (0,)), slice_sizes=(1, 200),
        unique_indices=False, indices_are_sorted=False, mode=Mode.from_any(mode), fill_value=0.0)
    np.testing.assert_array_equal(got, want)

# ----------------------------------------------------------------------------- scatter

_ROWS = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


def test_scatter_out_of_bounds_dropped_by_default_and_clip_clamps():
  x = np.zeros((4, 2))
  idx = np.array([[1], [7], [-1], [3]], np.int32)
  u = np.arange(8.0).reshape(4, 2) + 1
  np.testing.assert_array_equal(lax.scatter(x, idx, u, _ROWS), [[0, 0], [1, 2], [0, 0], [7, 8]])
  np.testing.assert_array_equal(lax.scatter_add(x, idx, u, _ROWS, mode="clip"),
                                [[5, 6], [1, 2], [0, 0], [3 + 7, 4 + 8]])


def test_scatter_partially_out_of_bounds_window_dropped_whole():
  x = np.zeros(6)
  dn = SDN(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
  got = lax.scatter_add(x, np.array([[1], [4]], np.int32), np.ones((2, 3)), dn)
  np.testing.assert_array_equal(got, [0, 1, 1, 1, 0, 0])


def test_scatter_combiners_with_duplicates():
  x = np.array([1.0, 5.0, 2.0, 0.0])
  idx = np.array([[1], [1], [3], [1]], np.int32)
  u = np.array([2.0, 7.0, -1.0, 3.0])
  dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
  np.testing.assert_array_equal(lax.scatter_add(x, idx, u, dn), [1, 17, 2, -1])
  np.testing.assert_array_equal(lax.scatter_sub(x, idx, u, dn), [1, -7, 2, 1])
  np.testing.assert_array_equal(lax.scatter_mul(x, idx, u, dn), [1, 210, 2, 0])
  np.testing.assert_array_equal(lax.scatter_min(x, idx, u, dn), [1, 2, 2, -1])
  np.testing.assert_array_equal(lax.scatter_max(x, idx, u, dn), [1, 7, 2, 0])
  b = np.array([False, True, False])
  bi = np.array([[0], [0], [2]], np.int32)
  bu = np.array([True, False, False])
  np.testing.assert_array_equal(lax.scatter_add(b, bi, bu, dn), [True, True, False])
  np.testing.assert_array_equal(lax.scatter_mul(b, bi, bu, dn), [False, True, False])
  h = np.zeros(3, np.float16)
  np.testing.assert_array_equal(lax.scatter_add(h, bi, np.ones(3, np.float16), dn), [2, 0, 1])


def test_scatter_operand_batching_dims_and_vmap_is_one_scatter():
  x = np.zeros((3, 4))
  idx = np.array([[2], [0], [3]], np.int32)
  dn = SDN(update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
           operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
  want = np.zeros((3, 4))
  want[np.arange(3), idx[:, 0]] = [1, 2, 3]
  np.testing.assert_array_equal(lax.scatter(x, idx, np.array([1.0, 2, 3]), dn), want)
  dn1 = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
  f = lambda row, i, u: lax.scatter_add(row, i, u, dn1)
  args = [np.ones((3, 4)), np.array([[[0], [0]], [[3], [9]], [[1], [2]]], np.int32),
          np.arange(6.0).reshape(3, 2)]
  testing.check_vmap(f, args, in_axes=(0, 0, 0))
  testing.check_vmap(f, [args[0][0], args[1], args[2]], in_axes=(None, 0, 0))
  eqns = api.make_jaxpr(api.vmap(f))(*args).jaxpr.eqns
  assert [e.primitive.name for e in eqns].count("scatter-add") == 1


@needs_elementwise
def test_scatter_jvp_overlapping_updates_picks_the_winner():
  x = np.array([1.0, 2.0, 3.0])
  idx = np.array([[1], [1], [5]], np.int32)
  u = np.array([10.0, 20.0, 30.0])
  dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
  f = lambda a, b: lax.scatter(a, idx, b, dn)
  y, t = api.jvp(f, (x, u), (np.array([1.0, 1.0, 1.0]), np.array([100.0, 200.0, 300.0])))
  np.testing.assert_array_equal(y, f(x, u))
  winner = 100.0 if np.asarray(y)[1] == 10.0 else 200.0
  np.testing.assert_array_equal(t, [1.0, winner, 1.0])


@needs_elementwise
def test_scatter_max_jvp_ties_average():
  x = np.array([5.0, 1.0])
  idx = np.array([[0], [0], [1]], np.int32)
  u = np.array([5.0, 2.0, 0.0])
  dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
  _, t = api.jvp(lambda a, b: lax.scatter_max(a, idx, b, dn), (x, u),
                 (np.array([1.0, 10.0]), np.array([3.0, 100.0, 1000.0])))
  np.testing.assert_array_equal(t, [2.0, 10.0])  # tie at 5: mean(1, 3); operand wins at 1

# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: lax.dynamic_slice(np.ones((3, 3)), (0,), (1, 1)), ValueError, "Length of slice indices must match"),
    # JAX's _dynamic_slice_shape_rule says "slice slice_sizes"
    (lambda: lax.dynamic_slice(np.ones(3), (0,), (4,)), TypeError, r"^slice slice_sizes must be less than or equal to operand shape, got slice_sizes \(4,\) for operand shape \(3,\)\.$"),
    (lambda: lax.dynamic_slice(np.ones(3), (0,), (-1,)), TypeError, r"^slice slice_sizes must be greater than or equal to zero, got slice_sizes of \(-1,\)\.$"),
    (lambda: lax.dynamic_slice_p.bind(np.ones(3), np.float32(0), slice_sizes=(1,)), TypeError, "index arguments to dynamic_slice must be integers"),
    (lambda: lax.dynamic_slice_p.bind(np.ones(3), np.zeros(1, np.int32), slice_sizes=(1,)), TypeError, "dynamic_slice must be scalars"),
    (lambda: lax.dynamic_update_slice(np.ones(3), np.ones(4), (0,)), TypeError, "dynamic_update_slice update shape must be smaller"),
    (lambda: lax.dynamic_update_slice(np.ones(3), np.ones((1, 1)), (0,)), TypeError, "dynamic_update_slice update must have the same rank"),
    (lambda: lax.dynamic_update_slice(np.ones(3), np.ones(1, np.float32), (0,)), TypeError, "dynamic_update_slice requires arguments to have the same dtypes"),
    (lambda: _take_rows(np.ones((3, 2)), np.array([0.5])), ValueError, "gather: indices must have an integer type"),
    (lambda: lax.gather(np.ones((3, 2)), np.zeros((1, 2), np.int32), GDN((1,), (0,), (0,)), (1, 2)), TypeError, "Gather op has 1 elements in start_index_map"),
    (lambda: lax.gather(np.ones((3, 2)), np.zeros((1, 1), np.int32), GDN((1,), (0,), (0,)), (2, 2)), TypeError, "Gather op can only collapse slice dims with bound 1"),
    (lambda: lax.gather(np.ones((3, 2)), np.zeros((1, 1), np.int32), GDN((1,), (0,), (0,)), (1, 3)), TypeError, "Slice size at index 1 in gather op is out of range"),
    (lambda: lax.gather(np.ones((3, 2)), np.zeros((1, 1), np.int32), GDN((1,), (0,), (5,)), (1, 2)), TypeError, "Invalid start_index_map; domain is"),
    (lambda: lax.gather(np.ones((3, 2)), np.zeros((1, 1), np.int32), GDN((1,), (0,), (0,)), (1, 2), mode="bogus"), ValueError, 'Unknown gather mode "bogus"'),
    (lambda: lax.scatter_add(np.ones((3, 2)), np.zeros((1, 1), np.int32), np.ones((1, 3)), _ROWS), TypeError, "scatter-add: Bounds of the window dimensions"),
    (lambda: lax.scatter_add(np.ones((3, 2)), np.zeros((1, 1), np.int32), np.ones((2, 2)), _ROWS), TypeError, "scatter-add: Bounds of the scatter dimensions"),
    (lambda: lax.scatter(np.ones((3, 2)), np.zeros((1, 1), np.int32), np.ones(2), _ROWS), TypeError, "scatter: Updates tensor must be of rank 2"),
    (lambda: lax.scatter_mul(np.ones((3, 2)), np.zeros((1, 1), np.int32), np.ones((1, 2), np.float32), _ROWS), TypeError, "lax.scatter requires arguments to have the same dtypes"),
    (lambda: lax.scatter_max(np.ones((3, 2)), np.zeros((1, 1), np.float32), np.ones((1, 2)), _ROWS), ValueError, "scatter-max: indices must have an integer type"),
])
def test_errors(fn, exc, match):
  with pytest.raises(exc, match=match):
    fn()


def test_kernels_reject_plans_that_would_go_out_of_bounds():
  from kernels import indexing as K
  a = lambda *v: np.array(v, np.int64)
  op, out = np.zeros(6), np.zeros(4)
  idx = np.zeros((2, 1), np.int64)
  with pytest.raises(IndexError):  # window of 3 at clamp bound 4 would read op[4:7]
    K.gather(op, idx, out, a(2), a(2), a(0), a(1), a(4), 0, np.zeros(1), a(3), a(1), a(1))
  with pytest.raises(IndexError):
    K.SCATTER["add"](op, idx, np.zeros(4), a(2), a(2), a(0), a(1), a(9), 1, a(2), a(1), a(1))
  with pytest.raises(IndexError):
    K.dynamic_slice(op, a(6), a(1), a(0), a(7), np.zeros(7))

# ----------------------------------------------------------------------------- index dtypes
# Every way of indexing, with signed indices (negative, past either end) and unsigned ones up
# to the dtype's maximum (2**64-1 must stay past the end, never wrap to -1), eagerly and under
# jit, against the semantics written out in Python integers (N = 5 elements).

_N = 5
_X = np.arange(10.0, 10.0 + _N)
_ROW = GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
_SROW = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


def _index_values(dtype):
  info = np.iinfo(dtype)
  vals = [0, 2, _N - 1, _N, 7, info.max, info.max // 2 + 1]
  if info.min < 0:
    vals += [-1, -2, -_N, -_N - 1, -7, info.min]
  return np.array(vals, dtype)


def _norm(i, signed):  # NumPy's negative indices, for signed index dtypes only
  return i + _N if signed and i < 0 else i


def _clip(i):
  return min(max(i, 0), _N - 1)


def _get(i, mode, normalize, signed):
  """x[i] (a float) by the mode: clip, fill (NaN out of bounds) or wrap."""
  if mode == "wrap":
    return _X[i % _N]
  j = _norm(i, signed) if normalize else i
  if mode == "clip":
    return _X[_clip(j)]
  return _X[j] if 0 <= j < _N else np.nan


def _set(idx, mode, normalize, signed):
  """x.at[idx].set(-1) by the mode: clip, or drop out-of-bounds updates."""
  out = _X.copy()
  for i in idx:
    j = _norm(int(i), signed) if normalize else int(i)
    if mode == "clip":
      out[_clip(j)] = -1
    elif 0 <= j < _N:
      out[j] = -1
  return out


def _i32(i):
  return int(np.array(int(i) & 0xFFFFFFFF, np.uint32).view(np.int32))


# (name, f(x, idx), expected(idx ints, signed) -> ndarray); idx is a 1-d index array
_INDEX_OPS = [
    ("take-fill", lambda x, i: jnp.take(x, i),
     lambda ii, s: [_get(i, "fill", True, s) for i in ii]),
    ("take-clip", lambda x, i: jnp.take(x, i, mode="clip"),  # no wrapping: -1 clips to 0
     lambda ii, s: [_get(i, "clip", False, s) for i in ii]),
    ("take-wrap", lambda x, i: jnp.take(x, i, mode="wrap"),
     lambda ii, s: [_get(i, "wrap", False, s) for i in ii]),
    ("getitem", lambda x, i: x[i], lambda ii, s: [_get(i, "clip", True, s) for i in ii]),
    ("getitem-2d", lambda x, i: x[None][0, i],
     lambda ii, s: [_get(i, "clip", True, s) for i in ii]),
    ("at-get-fill", lambda x, i: x.at[i].get(mode="fill"),
     lambda ii, s: [_get(i, "fill", True, s) for i in ii]),
    # (JAX's: the indices cast to int32 first, wrapping: uint64/int64 max is -1, the last)
    ("take_along_axis-fill", lambda x, i: jnp.take_along_axis(x, i, 0),
     lambda ii, s: [_get(_i32(i), "fill", True, True) for i in ii]),
    ("take_along_axis-clip", lambda x, i: jnp.take_along_axis(x, i, 0, mode="clip"),
     lambda ii, s: [_get(_i32(i), "clip", True, True) for i in ii]),  # wraps first
    ("gather-clip", lambda x, i: lax.gather(x, i[:, None], _ROW, (1,), mode="clip"),
     lambda ii, s: [_get(i, "clip", False, s) for i in ii]),
    ("gather-fill", lambda x, i: lax.gather(x, i[:, None], _ROW, (1,), mode="fill"),
     lambda ii, s: [_get(i, "fill", False, s) for i in ii]),
    ("at-set", lambda x, i: x.at[i].set(-1.0), lambda ii, s: _set(ii, "drop", True, s)),
    ("at-set-clip", lambda x, i: x.at[i].set(-1.0, mode="clip"),
     lambda ii, s: _set(ii, "clip", True, s)),
    ("at-set-promise", lambda x, i: x.at[i].set(-1.0, mode="promise_in_bounds"),
     lambda ii, s: _set(ii, "drop", True, s)),  # out of bounds: dropped (as XLA does)
    ("at-get-promise", lambda x, i: x.at[i].get(mode="promise_in_bounds"),
     lambda ii, s: [_get(i, "clip", True, s) for i in ii]),  # out of bounds: clamped (XLA)
    ("scatter-fill", lambda x, i: lax.scatter(x, i[:, None], -jnp.ones(i.shape), _SROW,
                                              mode="fill"),
     lambda ii, s: _set(ii, "drop", False, s)),
    ("scatter-clip", lambda x, i: lax.scatter(x, i[:, None], -jnp.ones(i.shape), _SROW,
                                              mode="clip"),
     lambda ii, s: _set(ii, "clip", False, s)),
]
_INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", _INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,f,want", _INDEX_OPS, ids=[o[0] for o in _INDEX_OPS])
def test_index_dtypes_and_modes_eager_and_jit(name, f, want, dtype):
  idx = _index_values(dtype)
  signed = np.dtype(dtype).kind == "i"
  if name.startswith("scatter") or name.startswith("at-set"):
    expect = want([int(i) for i in idx], signed)
    for i in idx:  # one index at a time too: a drop must not hide a wrong clamp
      for fn in (f, nbjax.jit(f)):
        np.testing.assert_array_equal(fn(jnp.asarray(_X), jnp.asarray(i[None])),
                                      want([int(i)], signed), err_msg=f"{name} {i!r}")
  else:
    expect = np.array(want([int(i) for i in idx], signed))
  for what, fn in (("eager", f), ("jit", nbjax.jit(f))):
    np.testing.assert_array_equal(fn(jnp.asarray(_X), jnp.asarray(idx)), expect,
                                  err_msg=f"{name} {what} {idx!r}")


@pytest.mark.parametrize("dtype", _INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dynamic_slice_start_dtypes_eager_and_jit(dtype):
  x = np.arange(10.0, 10.0 + _N)
  signed = np.dtype(dtype).kind == "i"
  ds = lambda x, i: lax.dynamic_slice(x, (i,), (2,))
  dus = lambda x, i: lax.dynamic_update_slice(x, np.array([-1.0, -2.0]), (i,))
  for i in _index_values(dtype):
    s = min(max(_norm(int(i), signed), 0), _N - 2)
    want_dus = x.copy()
    want_dus[s:s + 2] = [-1, -2]
    for what, (f, g) in (("eager", (ds, dus)), ("jit", (nbjax.jit(ds), nbjax.jit(dus)))):
      np.testing.assert_array_equal(f(x, i), x[s:s + 2], err_msg=f"dynamic_slice {what} {i!r}")
      np.testing.assert_array_equal(g(x, i), want_dus, err_msg=f"dus {what} {i!r}")


@pytest.mark.parametrize("i,j", [(2**64 - 1, 4), (2**63, 4), (2**63 - 1, 4), (1, 1)])
def test_every_backend_reads_uint64_indices_past_int64(i, j):
  """Each eager backend on its own: clip mode takes the last element for uint64 indices at or
  past 2**63 (converted through int64 they would wrap negative and clip to 0)."""
  x = np.arange(10.0, 15.0)
  idx = np.array([[i]], np.uint64)
  kw = dict(indices_are_sorted=False, unique_indices=False, mode=Mode.CLIP)
  for backend, impl in lax.gather_p.impls.items():
    got = impl(x, idx, dimension_numbers=_ROW, slice_sizes=(1,), fill_value=None, **kw)
    np.testing.assert_array_equal(got, [x[j]], err_msg=f"gather {backend}")
  want = x.copy()
  want[j] = -1
  for backend, impl in lax.scatter_p.impls.items():
    got = impl(x, idx, np.array([-1.0]), dimension_numbers=_SROW, update_jaxpr=None,
               update_consts=(), **kw)
    np.testing.assert_array_equal(got, want, err_msg=f"scatter {backend}")


@pytest.mark.parametrize("dtype", [np.int8, np.int16], ids=lambda d: np.dtype(d).name)
def test_narrow_negative_indices_into_a_long_axis(dtype):
  """-1 + 300 does not fit int8: indices are widened before counting from the end."""
  n = np.iinfo(dtype).max + 100
  x = np.arange(float(n))
  i = np.array([-1, 5, -100], dtype)
  want = x[i.astype(np.int64)]
  upd = x.copy()
  upd[i.astype(np.int64)] = -1
  for jit in (False, True):
    J = nbjax.jit if jit else (lambda f: f)
    np.testing.assert_array_equal(J(lambda x, i: x[i])(x, i), want)
    np.testing.assert_array_equal(J(lambda x, i: jnp.take(x, i))(x, i), want)
    np.testing.assert_array_equal(J(lambda x, i: jnp.take_along_axis(x, i, 0))(x, i), want)
    np.testing.assert_array_equal(J(lambda x, i: jnp.asarray(x).at[i].set(-1.0))(x, i), upd)
    np.testing.assert_array_equal(J(lambda x, i: lax.dynamic_slice(x, (i[0],), (1,)))(x, i),
                                  x[-1:])
    np.testing.assert_array_equal(
        J(lambda x, i: lax.dynamic_update_slice(x, np.array([-1.0]), (i[2],)))(x, i)[n - 100],
        -1.0)


def test_take_rejects_unknown_modes_as_jax():
  with pytest.raises(ValueError, match="Invalid mode 'promise_in_bounds' for np.take"):
    jnp.take(jnp.arange(3.0), jnp.array([1]), mode="promise_in_bounds")
  with pytest.raises(NotImplementedError, match="'raise' mode"):
    jnp.take(jnp.arange(3.0), jnp.array([1]), mode="raise")


def test_take_along_axis_promise_in_bounds_does_not_wrap():
  x = jnp.arange(10.0, 15.0)
  i = jnp.array([-1, 2])
  np.testing.assert_array_equal(jnp.take_along_axis(x, i, 0, mode="promise_in_bounds"), [10, 12])
  np.testing.assert_array_equal(
      jnp.take_along_axis(x, i, 0, mode="clip", wrap_negative_indices=False), [10, 12])
  np.testing.assert_array_equal(jnp.take_along_axis(x, i, 0, mode="clip"), [14, 12])


def test_take_along_axis_empty_axis_and_errors_as_jax():
  # JAX 0.10.2: an empty axis gives zeros of the broadcast shape whatever the indices
  out = jnp.take_along_axis(jnp.zeros((2, 0)), jnp.array([[0, 1]]), axis=1)
  assert out.shape == (2, 2) and out.dtype == np.float64 and not out.any()
  with pytest.raises(ValueError, match=re.escape(
      "take_along_axis indices must be 1D if axis=None, got shape (1, 2)")):
    jnp.take_along_axis(jnp.zeros((2, 3)), jnp.array([[0, 1]]), axis=None)
  with pytest.raises(TypeError, match="take_along_axis indices must be of integer type, got "
                                      "float64"):  # checked before the axis=None shape
    jnp.take_along_axis(jnp.zeros((2, 3)), jnp.zeros((1, 2)), axis=None)
  with pytest.raises(ValueError, match=re.escape(
      "indices and arr must have the same number of dimensions; 1 vs. 2")):
    jnp.take_along_axis(jnp.zeros((2, 0)), jnp.array([0, 1]), axis=1)

# ----------------------------------------------------------------------------- static indices
# JAX clamps an out-of-bounds static integer index like a traced one (``jnp.arange(10)[11]``
# is 9: the "Sharp Bits" out-of-bounds rule); its ``jax_check_static_indices`` flag (default
# off) makes the PROMISE_IN_BOUNDS default mode raise IndexError instead.


def test_static_out_of_bounds_index_clamps_by_default():
  x = jnp.arange(6.0).reshape(2, 3)
  np.testing.assert_array_equal(x[5], [3, 4, 5])
  np.testing.assert_array_equal(x[-3], [0, 1, 2])
  assert float(x[0, 5]) == 2.0
  np.testing.assert_array_equal(nbjax.jit(lambda x: x[5])(x), [3, 4, 5])


@pytest.mark.parametrize("fn,msg", [
    (lambda x: x[5], "index 5 out of bounds for axis 0 with size 2 (normalize_indices=True)"),
    (lambda x: x[-3], "index -3 out of bounds for axis 0 with size 2"),
    (lambda x: x[np.int64(2)], "index 2 out of bounds for axis 0 with size 2"),
    (lambda x: x[0, 3], "index 3 out of bounds for axis 1 with size 3"),
    (lambda x: x[None, 1, -4], "index -4 out of bounds for axis 1 with size 3"),
    (lambda x: x[..., 7], "index 7 out of bounds for axis 1 with size 3"),
    (lambda x: x[jnp.array([0, 1]), 3], "index 3 out of bounds for axis 1 with size 3"),
    (lambda x: x.at[5].get(), "index 5 out of bounds for axis 0 with size 2"),
    (lambda x: x.at[5].get(mode="promise_in_bounds"), "index 5 out of bounds"),
    (lambda x: nbjax.jit(lambda y: y[5])(x), "index 5 out of bounds for axis 0 with size 2"),
], ids=["x[5]", "x[-3]", "x[np.int64(2)]", "x[0,3]", "x[None,1,-4]", "x[...,7]",
        "x[arr,3]", "at[5].get", "at[5].get-promise", "jit"])
def test_check_static_indices_raises_as_jax(fn, msg):
  x = jnp.arange(6.0).reshape(2, 3)
  with config.override("check_static_indices", True):
    with pytest.raises(IndexError, match=re.escape(msg)):
      fn(x)
  fn(x)  # off again: clamps


def test_check_static_indices_leaves_other_indices_alone():
  x = jnp.arange(6.0).reshape(2, 3)
  with config.override("jax_check_static_indices", True):
    np.testing.assert_array_equal(x[1], [3, 4, 5])
    np.testing.assert_array_equal(x[-2, -1], 2.0)
    np.testing.assert_array_equal(x[jnp.array(5)], [3, 4, 5])      # an array, not static
    np.testing.assert_array_equal(x[jnp.array([5])], [[3, 4, 5]])
    assert np.isnan(np.asarray(x.at[5].get(mode="fill"))).all()     # fill mode: no check
    np.testing.assert_array_equal(x.at[5, 0].get(mode="clip"), 3.0)
    np.testing.assert_array_equal(x.at[5].set(9.0), x)              # scatters drop, never raise
    np.testing.assert_array_equal(jnp.take(x, jnp.array([9]), mode="clip"), [5.0])


def test_at_jax010_casts_and_bool_errors():
  check_eq = np.testing.assert_array_equal
  check_eq(np.asarray(jnp.arange(5, dtype=jnp.int8).at[1].set(300)), [0, 44, 2, 3, 4])
  check_eq(np.asarray(jnp.arange(3, dtype=jnp.uint8).at[1].set(-1)), [0, 255, 2])
  with pytest.raises(TypeError, match="add does not accept dtype bool"):
    jnp.zeros(3, bool).at[1].add(True)
  with pytest.raises(TypeError, match="mul does not accept dtype bool"):
    jnp.zeros(3, bool).at[1].mul(True)
  with pytest.raises(ValueError, match="indices must have an integer type"):
    jnp.take(jnp.arange(5), jnp.array([1.0]))
  # scatter_apply transforms an element once per update, as JAX
  dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
  out = lax.scatter_apply(jnp.ones(3), jnp.array([[1], [1]]), lambda v: v * 2, dn, update_shape=(2,))
  check_eq(np.asarray(out), [1.0, 4.0, 1.0])


@pytest.mark.parametrize("op", ["set", "add", "mul", "min", "max"])
def test_at_update_with_one_index_array_matches_jit(op):
  """``x.at[i].op(y)`` with one integer Array ``i`` (the cached scatter and the point kernel),
  ``y`` an array or a scalar: negative indices count from the end, out-of-bounds ones are dropped (clamped with
  ``mode='clip'``), repeated ones combine; as the compiled scatter does."""
  x = jnp.asarray(np.arange(10.0, dtype=np.float32))
  for idx in [np.array([0, 3, 3, -1, 12, -11]), np.array([[1, 2], [2, 9]]),
              np.array([2**40, -2**40, 5], np.int64), np.array([1, 250], np.uint8),
              np.array([1, -3], np.int8)]:
    i = jnp.asarray(idx)
    y = jnp.asarray(np.arange(1, idx.size + 1, dtype=np.float32).reshape(idx.shape))
    for kw in ({}, {"mode": "clip"}):
      for upd in (y, 2.5, jnp.float32(3)):  # (a scalar update broadcasts)
        got = getattr(x.at[i], op)(upd, **kw)
        want = nbjax.jit(lambda x, i, y: getattr(x.at[i], op)(y, **kw))(x, i, upd)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{idx} {kw}")
  ref = np.arange(10.0, dtype=np.float32)
  np.add.at(ref, [0, 3, 3, 9], [1, 2, 3, 4])
  if op == "add":
    np.testing.assert_array_equal(
        x.at[jnp.asarray([0, 3, 3, -1, 12, -11])].add(jnp.asarray([1., 2., 3., 4., 5., 6.],
                                                                  np.float32)), ref)


_POINT_COMB = {"set": lambda a, b: b, "add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
               "multiply": lambda a, b: a * b, "min": min, "max": max}


# every operand dtype with int64 indices, every index dtype into float32 (each pair compiles
# the point kernels for every combiner: the cross product would cost minutes of CI)
_POINT_CASES = ([(d, np.int64) for d in (np.float32, np.int32, np.complex128, np.uint8, np.bool_,
                                         np.float16, jnp.bfloat16)]
                + [(np.float32, i) for i in (np.int32, np.uint8, np.uint32, np.int8)])


@pytest.mark.parametrize("xdt,idt", _POINT_CASES,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in _POINT_CASES])
def test_point_take_and_update_of_a_1d_array(xdt, idt):
  """Eager ``x[i]`` and ``x.at[i].op(y)`` of a 1-D ``x`` (one kernel call that also counts
  negative indices from the end) against a NumPy loop: clamped gets, dropped updates applied
  in index order, the operand's weak type, ``x`` itself unchanged."""
  rng = np.random.default_rng(0)
  n = 7
  xv = (rng.integers(0, 2, n) if xdt == np.bool_ else rng.integers(1, 9, n)).astype(xdt)
  x = jnp.asarray(xv)
  iv = np.array([0, 3, 3, -1, n, -n - 1, 2, n - 1, 100], np.int64)
  iv = (iv[iv >= 0] if np.dtype(idt).kind == "u" else iv).astype(idt)
  j = np.where(iv.astype(np.int64) < 0, iv.astype(np.int64) + n, iv.astype(np.int64))
  got = x[jnp.asarray(iv)]
  np.testing.assert_array_equal(np.asarray(got), xv[np.clip(j, 0, n - 1)], err_msg=str(idt))
  assert got.dtype == xv.dtype and not got.weak_type
  yv = (rng.integers(0, 2, iv.size) if xdt == np.bool_ else rng.integers(1, 5, iv.size)).astype(xdt)
  for op, comb in _POINT_COMB.items():
    if xdt == np.bool_ and op in ("add", "subtract", "multiply"):  # JAX 0.10: TypeError
      continue
    if xdt == np.complex128 and op in ("min", "max"):  # the primitive's error, as JAX's
      with pytest.raises(TypeError, match=f"scatter-{op} does not accept dtype complex128"):
        getattr(x.at[jnp.asarray(iv)], op)(jnp.asarray(yv))
      continue
    for upd in (yv, yv[0]):
      want = xv.copy()
      for t, k in enumerate(j):
        if 0 <= k < n:
          u = upd if np.ndim(upd) == 0 else upd[t]
          with np.errstate(over="ignore"):  # (uint8 wraps, as the kernel)
            want[k] = comb(want[k], u)
      out = getattr(x.at[jnp.asarray(iv)], op)(jnp.asarray(upd))
      np.testing.assert_array_equal(np.asarray(out), want, err_msg=f"{op} {idt} {upd!r}")
      assert out.dtype == xv.dtype and not out.weak_type
  np.testing.assert_array_equal(np.asarray(x), xv)


_ROW_CASES = [(np.float32, np.int64, (7, 3)), (np.int32, np.int32, (7, 2, 2)),
              (np.complex128, np.int64, (7, 1)), (np.uint8, np.uint8, (7, 4)),
              (np.float64, np.int64, (7, 0))]


@pytest.mark.parametrize("xdt,idt,shape", _ROW_CASES,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}-{len(c)}d" for a, b, c in _ROW_CASES])
def test_row_take_and_update_of_an_nd_array(xdt, idt, shape):
  """Eager ``x[i]`` and ``x.at[i].op(y)`` of an n-d ``x`` by one index Array (whole rows:
  one kernel call over ``x`` viewed as 2-D) against a NumPy loop: clamped gets, dropped
  updates applied in index order (duplicates combine), scalar updates broadcast, the same
  values as ``jit``; ``x`` itself unchanged and never shared with a result."""
  rng = np.random.default_rng(0)
  n = shape[0]
  xv = rng.integers(1, 9, shape).astype(xdt)
  x = jnp.asarray(xv)
  iv = np.array([0, 3, 3, -1, n, -n - 1, 2, n - 1, 100], np.int64)
  iv = (iv[iv >= 0] if np.dtype(idt).kind == "u" else iv).astype(idt).reshape(-1, 1)
  j = np.where(iv.astype(np.int64) < 0, iv.astype(np.int64) + n, iv.astype(np.int64)).ravel()
  got = x[jnp.asarray(iv)]
  np.testing.assert_array_equal(np.asarray(got), xv[np.clip(j, 0, n - 1)].reshape(iv.shape + shape[1:]))
  assert got.dtype == xv.dtype and not np.shares_memory(np.asarray(got), np.asarray(x))
  yv = rng.integers(1, 5, iv.shape + shape[1:]).astype(xdt)
  combs = {"set": lambda a, b: np.broadcast_to(b, a.shape), "add": np.add,
           "subtract": np.subtract, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}
  for op, comb in combs.items():
    if xdt == np.complex128 and op in ("min", "max"):
      continue
    for upd in (yv, yv.flat[0] if yv.size else xdt(1)):
      want = xv.copy()
      for t, k in enumerate(j):
        if 0 <= k < n:
          u = upd if np.ndim(upd) == 0 else upd.reshape(len(j), *shape[1:])[t]
          want[k] = comb(want[k], np.asarray(u, xdt))
      f = lambda x, i, y: getattr(x.at[i], op)(y)
      out = f(x, jnp.asarray(iv), jnp.asarray(upd))
      np.testing.assert_array_equal(np.asarray(out), want, err_msg=f"{op} {upd!r}")
      np.testing.assert_array_equal(np.asarray(out), nbjax.jit(f)(x, jnp.asarray(iv), jnp.asarray(upd)))
      assert out.dtype == xv.dtype and not np.shares_memory(np.asarray(out), np.asarray(x))
  np.testing.assert_array_equal(np.asarray(x), xv)


def test_point_hot_paths_follow_a_pinned_backend():
  """A backend pinned with ``config.set_eager_backend`` is what runs ``x[i]`` and ``x.at[i]``:
  the one-kernel hot paths step aside, and the results stay the same."""
  x, i = jnp.arange(5.0), jnp.asarray(np.array([4, -1, 9]))
  from nbjax.lax import indexing as L
  assert L.take_points(x, i, True) is not None
  try:
    config.set_eager_backend(lax.gather_p, "numpy")
    config.set_eager_backend(lax.scatter_add_p, "numpy")
    assert L.take_points(x, i, True) is None
    assert L.scatter_points(lax.scatter_add_p, x, i, x[i], True) is None
    np.testing.assert_array_equal(x[i], [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(x.at[i].add(1.0), [0.0, 1.0, 2.0, 3.0, 6.0])
  finally:
    config.set_eager_backend(lax.gather_p, None)
    config.set_eager_backend(lax.scatter_add_p, None)
  assert L.scatter_points(lax.scatter_add_p, x, i, x[i], True) is not None
  x2 = jnp.ones((5, 2))  # (rows of an n-d x: the same test)
  assert L.take_points(x2, i, True) is not None
  try:
    config.set_eager_backend(lax.gather_p, "numpy")
    assert L.take_points(x2, i, True) is None
    np.testing.assert_array_equal(x2[i], np.ones((3, 2)))
  finally:
    config.set_eager_backend(lax.gather_p, None)


# ------------------------------------------ as JAX 0.10.2's own indexing tests (x64 values)

def test_ds_dynamic_slice_index_as_jax():
  import nbjax
  x = jnp.arange(10)
  for s, want in [(nbjax.ds(8, 5), [5, 6, 7, 8, 9]), (nbjax.ds(2, 3), [2, 3, 4]),
                  (nbjax.ds(-3, 2), [7, 8]), (nbjax.ds(1, 3, 2), [1, 3, 5]),
                  (nbjax.ds(8, 3, 2), [8, 9, 9]), (nbjax.ds(3), [0, 1, 2])]:
    assert np.asarray(x[s]).tolist() == want, s
  assert nbjax.ds(None) == slice(None)
  f = nbjax.jit(lambda x, i: x[nbjax.ds(i, 3)])
  assert np.asarray(f(x, 8)).tolist() == [7, 8, 9]
  assert np.asarray(f(x, -2)).tolist() == [7, 8, 9]
  y = jnp.arange(20).reshape(4, 5)
  assert np.asarray(y[nbjax.ds(1, 2), nbjax.ds(2, 2)]).tolist() == [[7, 8], [12, 13]]
  assert np.asarray(y[nbjax.ds(1, 2), 3]).tolist() == [8, 13]
  assert np.asarray(x.at[nbjax.ds(2, 3)].set(0)).tolist() == [0, 1, 0, 0, 0, 5, 6, 7, 8, 9]
  leaves, _ = nbjax.tree_util.tree_flatten(nbjax.ds(jnp.array(1), 3))
  assert len(leaves) == 1


def test_traced_scalar_index_is_a_dynamic_slice_as_jax():
  import nbjax
  jaxpr = nbjax.make_jaxpr(lambda x, i: x[i])(jnp.ones((4,)), 2)
  prims = [str(e.primitive) for e in jaxpr.jaxpr.eqns]
  assert len(prims) == 6 and prims[-2:] == ["dynamic_slice", "squeeze"]
  x = jnp.arange(20.).reshape(4, 5)
  f = nbjax.jit(lambda x, i, j: (x[i], x[i, 1:3], x[::-1, i], x[i, j], x[None, i, ..., 2:]))
  for got, want in zip(f(x, -1, np.int32(7)),
                       (x[-1], x[-1, 1:3], x[::-1, -1], x[-1, 4], x[None, -1, ..., 2:])):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_gather_indexing_promises_in_bounds_as_jax():
  """x[idx] with no mode gathers with PROMISE_IN_BOUNDS, as JAX 0.10.2: values clamp, but the
  transpose drops out-of-bounds cotangents; static integers out of bounds (and traced scalars)
  are a clamped dynamic_slice, whose gradient reaches the clamped element (JAX's values)."""
  x = jnp.arange(5.)
  g = nbjax.grad(lambda x, i: x[i].sum())
  np.testing.assert_array_equal(g(x, jnp.array([7, 1])), [0., 1., 0., 0., 0.])
  np.testing.assert_array_equal(g(x, jnp.array([7, 1], np.uint8)), [0., 1., 0., 0., 0.])
  np.testing.assert_array_equal(nbjax.grad(lambda x: x[np.array([7, 1])].sum())(x),
                                [0., 1., 0., 0., 0.])
  np.testing.assert_array_equal(nbjax.grad(lambda x: x[7])(x), [0., 0., 0., 0., 1.])
  np.testing.assert_array_equal(nbjax.grad(lambda x: x[-9])(x), [1., 0., 0., 0., 0.])
  np.testing.assert_array_equal(g(x, jnp.array(7)), [0., 0., 0., 0., 1.])
  y = jnp.arange(12.).reshape(3, 4)
  for f, val, gsum in [(lambda y: y[5, 1:3], [9., 10.], 2.), (lambda y: y[::2, 9], [3., 11.], 0.),
                       (lambda y: y[7, jnp.array([1, 2])], [9., 10.], 0.)]:
    np.testing.assert_array_equal(f(y), val)
    assert float(nbjax.grad(lambda y: f(y).sum())(y).sum()) == gsum
  eqns = nbjax.make_jaxpr(lambda x, i: x[i])(x, jnp.array([1])).eqns
  assert eqns[-1].params["mode"] == lax.GatherScatterMode.PROMISE_IN_BOUNDS
  assert [str(e.primitive) for e in nbjax.make_jaxpr(lambda x: x[7])(x).eqns] == [
      "dynamic_slice", "squeeze"]


def test_index_errors_and_empty_masks_as_jax():
  import nbjax
  with pytest.raises(IndexError, match="Slice entries must be static integers"):
    nbjax.jit(lambda x, i: x[i:])(jnp.ones(4), 1)
  assert jnp.ones(3)[jnp.empty((0,), bool)].shape == (0,)       # JAX: a 0-size mask axis
  assert jnp.ones((3, 4, 5))[jnp.empty((3, 0), bool)].shape == (0, 5)  # matches any size
  x = jnp.arange(60.).reshape(3, 4, 5)
  idx = ([[0], [-1]], np.array([[2, 3, 0, 3]]))  # lists of traced ints: stacked
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lambda x, i: x[i])(x, idx)),
                                np.asarray(x)[idx])


def test_scatter_unsafe_cast_warns_as_jax():
  x = jnp.arange(5, dtype=jnp.int16)
  with pytest.warns(FutureWarning, match="scatter inputs have incompatible types: cannot "
                                         "safely cast value from dtype=int32 to dtype=int16"):
    out = x.at[0].set(jnp.array(0, jnp.int32))
  assert out.dtype == np.int16
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    x.at[0].set(3)                                   # weak Python scalars: no warning
    jnp.arange(5.).at[0].set(jnp.array(1, jnp.int32))  # safe cast: no warning


def test_scatter_int_in_range_of_the_target_dtype_with_x64_off():
  """x.at[i].set(int) makes an int in range of an integer x's dtype of that dtype (JAX's, issue
  15505: uint32 2**32 - 1 with x64 off); one out of range still overflows as JAX's."""
  old = config.enable_x64
  config.update("enable_x64", False)
  try:
    a = jnp.zeros(2, dtype=jnp.uint32)
    assert int(a.at[0].set(2**32 - 1)[0]) == 2**32 - 1
    assert int(a.at[1].add(2**32 - 1)[1]) == 2**32 - 1
    assert int(nbjax.jit(lambda a: a.at[0].set(2**32 - 1))(a)[0]) == 2**32 - 1
    assert a.at[0].set(7).dtype == np.uint32
    with pytest.raises(OverflowError, match="Python int 2147483648 too large to convert to "
                       "int32"):
      jnp.zeros(1, jnp.int32).at[0].set(2**31)
  finally:
    config.update("enable_x64", old)


def test_bfloat16_fill_and_searchsorted_nan_order_as_jax():
  """bfloat16's NumPy kind is 'V', not 'f': out-of-bounds 'fill' gives NaN and
  searchsorted puts NaN last, as for the other floats."""
  import nbjax
  bf = jnp.bfloat16
  assert np.isnan(float(jnp.ones(3, bf).at[5].get(mode="fill")))
  assert np.isnan(float(nbjax.jit(lambda x: x.at[5].get(mode="fill"))(jnp.ones(3, bf))))
  x = np.array([-np.inf, -1.0, 0.0, -0.0, 1.0, np.inf, np.nan, -np.nan], dtype=bf)
  xe = np.array([0, 1, 2, 2, 3, 4, 5, 5])
  for method in ("scan", "compare_all"):
    for side in ("left", "right"):
      np.testing.assert_array_equal(np.asarray(jnp.searchsorted(x, x, side=side, method=method)),
                                    np.asarray(jnp.searchsorted(xe, xe, side=side)))


@pytest.mark.parametrize("shape", [(5,), (4, 3), (2, 3, 2)])
def test_eager_integer_index_copies_as_jit(shape):
  # eager x[i] takes a direct copy (no slice + squeeze binds): the same values, dtype and
  # weak type as jit, every valid negative index, and a buffer of its own (a small result
  # never keeps its parent's memory alive, as JAX's slice copies)
  v = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  x = jnp.asarray(v)
  weak = nbjax.lax.full((shape[0],), 2.0, None)  # weakly typed, as a Python scalar's
  for i in range(-shape[0], shape[0]):
    got, want = x[i], nbjax.jit(lambda a, i=i: a[i])(x)
    np.testing.assert_array_equal(got, v[i])
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    assert not np.shares_memory(np.asarray(got), np.asarray(x))
    assert got.weak_type is False
  assert weak.weak_type and weak[-1].weak_type and nbjax.jit(lambda a: a[-1])(weak).weak_type


def test_non_tuple_sequence_index_message_is_jaxs():
  # JAX's eliminate_deprecated_list_indexing suggests tuple(seq) when the list holds slices,
  # arrays, sequences, Ellipsis or None, array(seq) otherwise
  y = jnp.arange(12).reshape(3, 4)
  for idx, what in [([0, 2], "array"), ([slice(0, 1), 0], "tuple"), ([None, 1], "tuple"),
                    ([np.arange(2), 0], "tuple"), ([jnp.array(1)], "array"), ([...], "tuple")]:
    with pytest.raises(TypeError) as e:
      y[idx]
    assert str(e.value) == (
        "Using a non-tuple sequence for multidimensional indexing is not allowed; "
        f"use `arr[{what}(seq)]` instead of `arr[seq]`. "
        "See https://github.com/jax-ml/jax/issues/4564 for more information.")


def test_nonzero_under_jit_concretizes_the_count():
  # JAX's nonzero concretizes mask.sum(), so the error names an int scalar, not the operand
  for f in (jnp.nonzero, jnp.argwhere, jnp.flatnonzero, lambda x: jnp.where(x)):
    with pytest.raises(nbjax.errors.ConcretizationTypeError) as e:
      nbjax.jit(f)(jnp.arange(3))
    assert str(e.value).startswith(
        "Abstract tracer value encountered where concrete value is expected: traced array with "
        "shape int64[]\nThe size argument of jnp.nonzero must be statically specified to use "
        "jnp.nonzero within JAX transformations.\n"), str(e.value)


def test_basic_indexing_promises_unique_sorted_indices():
  # JAX's _index_to_gather: unique_indices = indices_are_sorted = no advanced (rank > 0 integer
  # array) index; integer scalars, traced or not, and strided slices are basic
  def flags(f, *args):
    eqn = nbjax.make_jaxpr(f)(*args).eqns[-1]
    return eqn.params["unique_indices"], eqn.params["indices_are_sorted"]
  x = jnp.ones((3, 4))
  assert flags(lambda x: x.at[0].set(5.), x) == (True, True)
  assert flags(lambda x: x.at[0, 1].add(1.), x) == (True, True)
  assert flags(lambda x, i: x.at[i, 1:].add(1.), x, 2) == (True, True)
  assert flags(lambda x: x.at[:, ::2].mul(2.), x) == (True, True)
  assert flags(lambda x, i: x[i, ::2], x, 1) == (True, True)
  assert flags(lambda x: x.at[jnp.array([0, 0])].add(1.), x) == (False, False)
  assert flags(lambda x, i: x[i], x, jnp.array([2, 0])) == (False, False)
  np.testing.assert_array_equal(nbjax.jit(lambda x, i: x.at[i, ::2].add(1.))(x, 1),
                                [[1, 1, 1, 1], [2, 1, 2, 1], [1, 1, 1, 1]])


def test_index_with_dunder_jax_array_raises_as_jax():
  # JAX 0.10.2 abstractifies an index, and no longer calls __jax_array__ to do so; the
  # indexed update's values are converted (as an operand of jnp functions)
  class W:
    def __init__(self, v):
      self.v = v

    def __jax_array__(self):
      return jnp.asarray(self.v)

  x = jnp.arange(5.0)
  msg = re.escape("Triggering __jax_array__() during abstractification is no longer supported. "
                  "To avoid this error, either explicitly convert your object using "
                  "jax.numpy.array(), or register your object as a pytree.")
  for f in (lambda: x[W(1)], lambda: x[W(np.array([0, 2]))], lambda: x[W(1), ...],
            lambda: x.at[W(1)].set(7.0), lambda: x.at[W(1)].get(),
            lambda: nbjax.jit(lambda a: a[W(1)])(x)):
    with pytest.raises(ValueError, match=msg):
      f()
  np.testing.assert_array_equal(x.at[1].set(W(3.0)), [0., 3., 2., 3., 4.])
  assert float(x[jnp.asarray(W(1))]) == 1.0


def test_rewriting_take_strategies_as_jax():
  """rewriting_take(strategy=IndexingStrategy...) (JAX's lax_numpy_indexing_test): every
  strategy gives x[idx] (clip mode clamps); STATIC_SLICE and DYNAMIC_SLICE raise JAX's
  errors for indices or modes a slice cannot express; a non-enum strategy is a TypeError."""
  from nbjax.numpy._indexing import IndexingStrategy as S, Slice, rewriting_take
  x = np.arange(24.).reshape(2, 3, 4)
  for idx in [(1,), (slice(0, 2), 1), (None, -1), (Ellipsis, 2), (5, 1), (0, slice(None, None, -1))]:
    want = x[tuple(np.clip(i, -n, n - 1) if type(i) is int else i
                   for i, n in zip(idx, x.shape))]
    for s in (S.AUTO, S.GATHER, S.STATIC_SLICE, S.DYNAMIC_SLICE):
      np.testing.assert_array_equal(rewriting_take(jnp.asarray(x), idx, strategy=s, mode="clip"),
                                    want)
  np.testing.assert_array_equal(
      rewriting_take(jnp.asarray(x), (0, Slice(1, 2)), strategy=S.DYNAMIC_SLICE), x[0, 1:3])
  z = jnp.zeros((2, 3))
  for idx, err, msg in [
      ((4,), IndexError, "index 4 out of bounds for axis 0 with size 2"),
      ((Ellipsis, -4), IndexError, "index -4 out of bounds for axis 1 with size 3"),
      (([1, 2], 0), TypeError, "static_slice: indices must be static scalars or slices. Got "
       "index of type <class 'list'> at position 0"),
      ((1, 2, 3), IndexError, "Too many indices: array is 2-dimensional, but 3 were indexed")]:
    with pytest.raises(err, match=re.escape(msg)):
      rewriting_take(z, idx, strategy=S.STATIC_SLICE)
  with pytest.raises(ValueError, match="^static_slice requires mode='promise_in_bounds' or "
                     "mode='clip'$"):
    rewriting_take(z, 0, strategy=S.STATIC_SLICE, mode="fill")
  with pytest.raises(TypeError, match=re.escape(
      "dynamic_slice: only scalar indices allowed. Got index of type <class 'numpy.ndarray'> "
      "at position 0")):
    rewriting_take(z, (np.arange(2),), strategy=S.DYNAMIC_SLICE)
  with pytest.raises(TypeError, match="^dynamic_slice: only unit steps supported in slice"):
    rewriting_take(z, (slice(None, None, 2),), strategy=S.DYNAMIC_SLICE)
  with pytest.raises(TypeError, match="^Expected strategy to be IndexingStrategy; got auto$"):
    rewriting_take(z, 0, strategy="auto")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64])
def test_at_int_index_python_int_on_integer_arrays(dtype):
  """x.at[i].set/add(python int) of an integer x (the eager one-store path): the scatter's
  values (an add wraps as XLA's; an out-of-bounds index drops the update; negative wraps)."""
  info = np.iinfo(dtype)
  base = np.array([info.max, info.min, 3, 0, 7], dtype)
  x = jnp.asarray(base)
  for i in (0, 1, 4, -1, -5, 5, -6):
    for v in (1, info.max, info.min, 0):
      for op in ("set", "add"):
        got = np.asarray(getattr(x.at[i], op)(v))
        want = np.asarray(getattr(x.at[jnp.asarray(i)], op)(jnp.asarray(v, dtype)))
        assert got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{op} {i} {v}")
        exp = base.copy()
        if -5 <= i < 5:
          with np.errstate(over="ignore"):
            exp[i] = v if op == "set" else exp[i] + dtype(v)
        np.testing.assert_array_equal(got, exp, err_msg=f"{op} {i} {v}")
  np.testing.assert_array_equal(np.asarray(x), base)  # (x itself unchanged)


_BASIC_IDX = [1, -1, 4, -5, 9, -10, slice(1, 3), slice(None, None, -2), slice(3, 3), slice(2, 99),
              (slice(None), 1), (..., -1), (None, 2), (1, None, slice(3, 0, -1)), (0, 0), (),
              (1, 9), (1, 2, 3)]
_BASIC_DTYPES = [np.float32, np.float64, np.int32, np.uint8, np.int64, np.complex64, np.bool_,
                 np.float16, jnp.bfloat16]


def _bits(a):
  a = np.asarray(a)
  return a.dtype, a.shape, a.view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype", _BASIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_at_basic_index_update_is_the_scatter(dtype):
  """Eager ``x.at[idx].set/add(y)`` with a basic index (static ints, slices, None, ...; the
  NumPy-assignment path) against the same update through the scatter primitive (the eager
  ``mode='drop'`` path, JAX's default for updates) and ``jit``: bit-identical values, dtype
  and weak type, for Array updates (broadcast, leading unit axes, of another dtype) and
  Python scalars (a float32 overflow, a NaN, an int), out-of-bounds ints dropped, negative
  ones counted from the end; the same exception where one fails; ``x`` unchanged."""
  rng = np.random.default_rng(1)
  xv = (rng.standard_normal((5, 4)) * 10).astype(dtype)
  for x in (jnp.asarray(xv), lax.full((5, 4), 2, None) if dtype == np.int32 else None):
    if x is None:
      continue
    for idx in _BASIC_IDX:
      try:
        shape = np.empty((5, 4))[idx].shape
      except IndexError:
        shape = ()
      ys = [jnp.asarray((rng.standard_normal(shape) * 9).astype(dtype)),
            jnp.asarray((rng.standard_normal((1, 1) + shape) * 9).astype(dtype)),
            jnp.asarray(np.ones(shape[-1:], dtype)), jnp.asarray(np.ones((2, 3), dtype)),
            jnp.asarray(np.ones(shape, np.float64 if dtype != np.float64 else np.float32)),
            2, -3, 2.5, 1e39, float("nan"), 2**40]
      for op in ("set", "add"):
        for y in ys:
          res = []
          for f in (lambda x, y: getattr(x.at[idx], op)(y),
                    lambda x, y: getattr(x.at[idx], op)(y, mode="drop")):
            try:
              with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = f(x, y)
              res.append((_bits(out), out.weak_type))
            except Exception as e:  # noqa: BLE001 (the same exception either way)
              res.append((type(e), str(e)))
          assert res[0] == res[1], (idx, op, y)
          if isinstance(res[0][0], tuple) and y is ys[0] and type(idx) is not int:
            want = nbjax.jit(lambda x, y: getattr(x.at[idx], op)(y))(x, y)  # (and XLA's)
            assert res[0] == (_bits(want), want.weak_type), (idx, op, y)
  np.testing.assert_array_equal(np.asarray(jnp.asarray(xv)), xv)


def test_at_basic_index_update_owns_its_result():
  """The NumPy-assignment update copies: the result never shares memory with ``x`` or
  ``y``, and neither later changes to the caller's buffers nor ``x`` see the update."""
  v, w = np.arange(12.0).reshape(3, 4), np.full(4, -1.0)
  x, y = jnp.asarray(v), jnp.asarray(w)
  outs = [x.at[1].set(y), x.at[1:].add(y), x.at[:, 2].set(7.0), x.at[0, 0].add(1)]
  v[:] = 0
  w[:] = 0
  for o in outs:
    assert not np.shares_memory(np.asarray(o), np.asarray(x))
    assert not np.shares_memory(np.asarray(o), np.asarray(y))
  np.testing.assert_array_equal(outs[0][1], [-1.0] * 4)
  np.testing.assert_array_equal(outs[1][1:], np.arange(4.0, 12.0).reshape(2, 4) - 1)
  np.testing.assert_array_equal(outs[2][:, 2], [7.0] * 3)
  assert float(outs[3][0, 0]) == 1.0
  np.testing.assert_array_equal(np.asarray(x), np.arange(12.0).reshape(3, 4))


def test_take_along_axis_is_a_nested_jit_of_one_gather_as_jax():
  """JAX's take_along_axis: a jit named take_along_axis around one gather whose indices are
  the given ones along the axis (other axes batching dimensions), cast to int32 when
  negative indices wrap, kept (int8 here) with promise_in_bounds and no wrapping."""
  arr = jnp.arange(200, dtype=jnp.float32)
  i8 = jnp.array([1, 2, 3], dtype=jnp.int8)
  for wrap, want in ((False, np.int8), (True, np.int32)):
    jaxpr = nbjax.make_jaxpr(lambda i: jnp.take_along_axis(
        arr, i, axis=0, mode="promise_in_bounds", wrap_negative_indices=wrap))(i8)
    [e] = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "jit"]
    assert e.params["name"] == "take_along_axis"
    [g] = [q for q in e.params["jaxpr"].jaxpr.eqns if q.primitive is lax.gather_p]
    assert g.invars[1].aval.dtype == want
  x = np.arange(24.0).reshape(2, 3, 4)
  idx = np.array([[[0, 3]], [[-1, 2]]])  # (2, 1, 2): the middle axis whole
  jaxpr = nbjax.make_jaxpr(lambda a, i: jnp.take_along_axis(a, i, axis=2))(x, idx)
  [g] = [q for q in jaxpr.jaxpr.eqns[0].params["jaxpr"].jaxpr.eqns if q.primitive is lax.gather_p]
  dn = g.params["dimension_numbers"]
  assert (dn.offset_dims, dn.collapsed_slice_dims, dn.operand_batching_dims) == ((1,), (2,), (0,))
  np.testing.assert_array_equal(jnp.take_along_axis(x, idx, axis=2),
                                np.take_along_axis(x, idx % 4, axis=2))
  np.testing.assert_array_equal(nbjax.jit(lambda a, i: jnp.take_along_axis(a, i, axis=2))(x, idx),
                                np.take_along_axis(x, idx % 4, axis=2))
  # mode="one_hot": a one-hot product (out-of-range indices give 0)
  y = jnp.arange(12.0).reshape(3, 4)
  np.testing.assert_array_equal(
      jnp.take_along_axis(y, jnp.array([[0, 3], [1, -1], [2, 5]]), axis=1, mode="one_hot"),
      [[0.0, 3.0], [5.0, 7.0], [10.0, 0.0]])


def test_at_point_update_fast_path_as_scatter():
  """x.at[i].set/add/... with an Array index and updates of x[i]'s shape and x's dtype (the
  method's direct kernel call) equals the scatter primitives under jit, negative indices
  wrapped or not, out-of-bounds updates dropped, duplicates applied in order."""
  import nbjax
  rng = np.random.default_rng(3)
  for shape in [(7,), (7, 3)]:
    x = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    i = jnp.asarray(np.array([0, 6, -1, 9, -9, 2, 2], np.int32))
    y = jnp.asarray(rng.standard_normal((7,) + shape[1:]).astype(np.float32))
    for op in ("set", "add", "multiply", "min", "max"):
      for wrap in (True, False):
        f = lambda x, i, y: getattr(x.at[i], op)(y, wrap_negative_indices=wrap)
        got, want = f(x, i, y), nbjax.jit(f)(x, i, y)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{op} {wrap}")
        assert got._value is not x._value and not np.shares_memory(got._value, y._value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_, np.complex128,
                                   np.float16])
def test_take_along_axis_kernel_as_jit(dtype):
  """take_along_axis's gather (one element along an axis, every other axis batched: the
  take_along/take_along_rows kernels) equals XLA's for every axis of 1-3-d operands, in- and
  out-of-range indices (negative ones unwrapped too) and every mode."""
  import nbjax
  rng = np.random.default_rng(11)
  for shape in [(7,), (4, 6), (3, 5, 4), (2, 1, 3)]:
    x = jnp.asarray((rng.standard_normal(shape) * 4).astype(dtype))
    for axis in range(len(shape)):
      ishape = shape[:axis] + (5,) + shape[axis + 1:]
      i = jnp.asarray(rng.integers(-shape[axis] - 2, shape[axis] + 2, ishape).astype(np.int32))
      for mode, wrap in [(None, None), ("clip", None), ("fill", False), ("promise_in_bounds", True)]:
        kw = dict(axis=axis, mode=mode, wrap_negative_indices=wrap)
        if mode == "fill":
          kw["fill_value"] = 3
        if mode == "promise_in_bounds":
          i = jnp.asarray(np.clip(np.asarray(i), 0, shape[axis] - 1).astype(np.int32))
        got = jnp.take_along_axis(x, i, **kw)
        want = nbjax.jit(lambda x, i: jnp.take_along_axis(x, i, **kw))(x, i)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{shape} {axis} {mode}")
        assert got.dtype == want.dtype and not np.shares_memory(got._value, x._value)


def test_bool_index_shape_error_and_signbit_error_are_jaxs():
  import nbjax.numpy as jnp
  with pytest.raises(IndexError) as e:
    jnp.ones((2, 3))[jnp.ones((3, 2), bool)]
  assert str(e.value) == ("boolean index did not match shape of indexed array in index 0: got "
                          "(3, 2), expected [2, 3]")
  with pytest.raises(ValueError) as e:
    jnp.signbit(jnp.ones(2, jnp.complex64))
  assert str(e.value) == "jax.numpy.signbit is not well defined for complex64"
