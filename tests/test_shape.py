"""Shape primitives (broadcast_in_dim, reshape, transpose, squeeze, rev, concatenate, pad,
slice, iota) and their wrappers: edge semantics (negative and interior padding, strides,
empty shapes), JAX-worded errors, and every rule of every primitive: jvp against central
differences, transpose by the inner-product identity, batching at every batch-dim placement
against a Python loop. The ``check_*`` helpers are shared with ``test_indexing.py``.
"""
import numpy as np
import pytest

import nbjax  # noqa: F401
from nbjax import core, lax, registry, testing
from nbjax.array import Array
from nbjax.interpreters import ad
from nbjax.lax.shape import random_array

# ----------------------------------------------------------------------------- shared checks


def float_cases(prim, dtype=np.float64):
  return testing.primitive_cases(prim, dtype, np.random.default_rng(1))


def check_batching(prim, args, params, index_args=(), size=3, limit=12, seed=0):
  """vmap of ``prim`` at every (sampled) batch-dim placement of ``args`` vs a loop. Index
  arguments get shifted copies per batch element (still meaningful: out-of-range values
  are clamped / filled / dropped), data arguments fresh random values."""
  rng = np.random.default_rng(seed)
  f = testing.prim_fun(prim, params)
  for placement in testing.bdim_placements([np.ndim(a) for a in args], limit=limit, seed=seed):
    bargs = []
    for j, (a, b) in enumerate(zip(args, placement)):
      a = np.asarray(a)
      if b is None:
        bargs.append(a)
        continue
      vs = [a + k if j in index_args else random_array(rng, a.shape, a.dtype) for k in range(size)]
      bargs.append(np.stack(vs, axis=b))
    unbatched = all(b is None for b in placement)
    testing.check_vmap(f, bargs, in_axes=tuple(placement), axis_size=size if unbatched else None)


def check_transpose(prim, args, params, linear_args, seed=0):
  """<ct, f(x)> == <f^T(ct), x> over the linear arguments (others held fixed)."""
  rng = np.random.default_rng(seed)
  out = np.asarray(prim.bind(*args, **params))
  ct = random_array(rng, out.shape, out.dtype)
  und = [ad.UndefinedPrimal(core.get_aval(a)) if j in linear_args else a
         for j, a in enumerate(args)]
  cts = prim.transpose(ct, *und, **params)
  lhs = sum(np.vdot(np.asarray(cts[j]), np.asarray(args[j])) for j in linear_args)
  np.testing.assert_allclose(lhs, np.vdot(ct, out), rtol=1e-10, atol=1e-10)
  for j in linear_args:
    assert np.shape(cts[j]) == np.shape(args[j]), (prim, j)
  for j in set(range(len(args))) - set(linear_args):
    assert cts[j] is None


def _all_prims(family):
  return [p for p in registry.primitives(builtin_only=True) if p.family == family]


SHAPE = _all_prims("shape")
LINEAR = [p for p in SHAPE if p.meta.get("linear")]


@pytest.mark.parametrize("prim", [p for p in SHAPE if p.meta.get("differentiable")], ids=str)
def test_jvp_matches_finite_differences(prim):
  for args, params in float_cases(prim):
    testing.check_jvp(testing.prim_fun(prim, params), args)


@pytest.mark.parametrize("prim", LINEAR, ids=str)
def test_transpose_inner_product(prim):
  for args, params in float_cases(prim):
    check_transpose(prim, args, params, range(len(args)))


@pytest.mark.parametrize("prim", [p for p in SHAPE if p is not lax.iota_p], ids=str)
def test_batching_every_placement(prim):
  for args, params in float_cases(prim, np.float32):
    check_batching(prim, args, params)


@pytest.mark.parametrize("prim", SHAPE, ids=str)
def test_every_backend_matches_reference(prim):
  for dtype in (np.float16, np.int8, np.bool_, np.complex128):
    if np.dtype(dtype) not in prim.meta["dtypes"]:
      continue
    for args, params in testing.primitive_cases(prim, dtype):
      want = prim.meta["reference"](*args, **params)
      for name, impl in prim.impls.items():
        got = impl(*[np.asarray(a, order="C") for a in args], **params)
        np.testing.assert_array_equal(got, want, err_msg=f"{prim} {name} {dtype}")

# ----------------------------------------------------------------------------- semantics


def test_broadcast_in_dim_any_order_and_size_one():
  x = np.arange(6.0).reshape(2, 3)
  got = lax.broadcast_in_dim(x, (3, 4, 2), (2, 0))
  np.testing.assert_array_equal(got, np.broadcast_to(x.T[:, None, :], (3, 4, 2)))
  y = np.arange(3.0).reshape(3, 1)
  np.testing.assert_array_equal(lax.broadcast_in_dim(y, (2, 3, 4), (1, 2)),
                                np.broadcast_to(y, (2, 3, 4)))


def test_broadcast_in_dim_backends_large():
  x = np.arange(1000.0).reshape(1000, 1)
  for b in ("numba", "numpy"):
    got = lax.broadcast_in_dim_p.impls[b](x, shape=(300, 1000, 2), broadcast_dimensions=(1, 2))
    np.testing.assert_array_equal(got, np.broadcast_to(x, (300, 1000, 2)))


def test_weak_type_preserved():
  w = Array(np.asarray(2.0, np.float32), weak_type=True)
  assert lax.broadcast_in_dim(w, (3,), ()).weak_type
  assert lax.reshape(lax.broadcast_in_dim(w, (4,), ()), (2, 2)).weak_type
  assert not lax.iota(np.float32, 3).weak_type


def test_reshape_with_dimensions():
  y = np.arange(6).reshape(2, 3)
  np.testing.assert_array_equal(lax.reshape(y, (6,), (1, 0)), [0, 3, 1, 4, 2, 5])
  np.testing.assert_array_equal(lax.collapse(np.zeros((2, 3, 4)), 0, 2).shape, (6, 4))
  np.testing.assert_array_equal(lax.collapse(np.zeros((2, 3, 4)), 1).shape, (2, 12))


def test_transpose_and_rev_and_squeeze():
  x = np.arange(24).reshape(2, 3, 4)
  np.testing.assert_array_equal(lax.transpose(x, (2, 0, 1)), x.transpose(2, 0, 1))
  np.testing.assert_array_equal(lax.rev(x, (0, 2)), x[::-1, :, ::-1])
  np.testing.assert_array_equal(lax.squeeze(np.zeros((1, 3, 1)), (-1, 0)).shape, (3,))
  np.testing.assert_array_equal(lax.expand_dims(np.zeros((3,)), (0, -1)).shape, (1, 3, 1))


def test_pad_negative_and_interior():
  x = np.array([1, 2, 3, 4], np.int32)
  np.testing.assert_array_equal(lax.pad(x, np.int32(0), [(2, 3, 0)]), [0, 0, 1, 2, 3, 4, 0, 0, 0])
  np.testing.assert_array_equal(lax.pad(x, np.int32(0), [(0, 0, 1)]), [1, 0, 2, 0, 3, 0, 4])
  np.testing.assert_array_equal(lax.pad(np.arange(1, 6, dtype=np.int32), np.int32(0), [(-1, -2, 0)]),
                                [2, 3])
  # negative low cuts into interior padding; a fully cut dimension is empty
  np.testing.assert_array_equal(lax.pad(x, np.int32(9), [(-2, -1, 2)]), [9, 2, 9, 9, 3, 9, 9])
  assert lax.pad(x, np.int32(0), [(-4, 0, 0)]).shape == (0,)
  assert lax.pad(np.zeros((0,), np.int32), np.int32(7), [(1, 2, 3)]).tolist() == [7, 7, 7]
  y = np.arange(6.0).reshape(2, 3)
  for b in ("numba", "numpy"):
    got = lax.pad_p.impls[b](y, np.asarray(-1.0), padding_config=((1, -1, 1), (-1, 2, 0)))
    assert got.shape == (3, 4)
    np.testing.assert_array_equal(got, [[-1, -1, -1, -1], [1, 2, -1, -1], [-1, -1, -1, -1]])


def test_slice_strides_and_wrappers():
  x = np.arange(20).reshape(4, 5)
  np.testing.assert_array_equal(lax.slice(x, (1, 0), (4, 5), (2, 3)), x[1:4:2, 0:5:3])
  np.testing.assert_array_equal(lax.slice_in_dim(x, -3, None, 2, axis=1), x[:, -3::2])
  np.testing.assert_array_equal(lax.index_in_dim(x, -1, 0, keepdims=False), x[-1])
  np.testing.assert_array_equal(lax.index_in_dim(x, 2, 1), x[:, 2:3])
  assert lax.slice(x, (2, 2), (2, 5)).shape == (0, 3)


def test_concatenate_with_empty():
  a, b = np.ones((2, 0)), np.zeros((2, 3))
  np.testing.assert_array_equal(lax.concatenate([a, b, a], 1), np.zeros((2, 3)))


def test_iota_and_broadcasted_iota():
  np.testing.assert_array_equal(lax.iota(np.int32, 5), np.arange(5))
  got = lax.broadcasted_iota(np.float32, (2, 3), 1)
  assert got.dtype == np.float32
  np.testing.assert_array_equal(got, [[0, 1, 2], [0, 1, 2]])
  np.testing.assert_array_equal(lax.broadcasted_iota(np.int8, (3, 2), -2), [[0, 0], [1, 1], [2, 2]])
  assert lax.iota(np.float16, 4).dtype == np.float16


def test_large_copies_use_parallel_kernel_correctly():
  x = np.random.default_rng(0).standard_normal((300, 700))
  np.testing.assert_array_equal(lax.transpose(x, (1, 0)), x.T)
  np.testing.assert_array_equal(lax.rev(x, (1,)), x[:, ::-1])
  for b in ("numba", "numpy"):
    np.testing.assert_array_equal(lax.slice_p.impls[b](x, start_indices=(1, 3), limit_indices=(300, 700),
                                                       strides=(1, 2)), x[1:, 3::2])

# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: lax.broadcast_in_dim(np.ones(3), (2, 4), (1,)), TypeError, "broadcast_in_dim operand dimension sizes"),
    (lambda: lax.broadcast_in_dim(np.ones(3), (3,), (1,)), TypeError, "broadcast_in_dim broadcast_dimensions must be a subset"),
    (lambda: lax.broadcast_in_dim(np.ones((2, 3)), (3,), (0, 1)), TypeError, "broadcast_in_dim target broadcast shape"),
    (lambda: lax.reshape(np.ones((2, 3)), (4, 2)), TypeError, r"reshape total size must be unchanged.*\(2, 3\)"),
    (lambda: lax.reshape(np.ones((2, 3)), (6,), (0, 0)), TypeError, "reshape dimensions must be a permutation"),
    (lambda: lax.transpose(np.ones((2, 3)), (0, 0)), TypeError, r"transpose permutation isn't a permutation.*\(2, 3\)"),
    (lambda: lax.squeeze(np.ones((2, 3)), (0,)), ValueError, "squeeze.*size not equal to one"),
    (lambda: lax.squeeze(np.ones((1, 3)), (2,)), ValueError, "out of bounds"),
    (lambda: lax.expand_dims(np.ones(3), (0, 0)), ValueError, "repeated axis in lax.expand_dims"),
    (lambda: lax.rev(np.ones((2, 3)), (2,)), TypeError, "rev dimensions must all be less than operand ndim"),
    (lambda: lax.concatenate([np.ones((2, 3)), np.ones(3)], 0), TypeError, "concatenate arrays with different numbers of dimensions"),
    (lambda: lax.concatenate([np.ones((2, 3)), np.ones((2, 4))], 0), TypeError, "differ in dimensions other than"),
    (lambda: lax.concatenate([np.ones((2, 3)), np.ones((2, 3))], 2), TypeError, "concatenate dimension out of bounds"),
    (lambda: lax.concatenate([np.ones(2), np.ones(2, np.int32)], 0), TypeError, "concatenate requires arguments to have the same dtypes"),
    (lambda: lax.pad(np.ones(3), np.float64(0), [(-2, -2, 0)]), ValueError, "pad.*not at least 0"),
    (lambda: lax.pad(np.ones(3), np.float64(0), [(0, 0, -1)]), ValueError, "pad.*interior padding.*nonnegative"),
    (lambda: lax.pad(np.ones(3), np.float32(0), [(0, 0, 0)]), TypeError, "pad operand and padding_value must be same dtype"),
    (lambda: lax.pad(np.ones(3), np.zeros(2), [(0, 0, 0)]), ValueError, "pad.*padding_value must be a scalar"),
    (lambda: lax.slice(np.ones(3), (0,), (4,)), TypeError, "slice limit_indices must be less than or equal to operand shape"),
    (lambda: lax.slice(np.ones(3), (2,), (1,)), TypeError, "slice limit_indices must be greater than or equal to start_indices"),
    (lambda: lax.slice(np.ones(3), (0,), (3,), (0,)), TypeError, "slice strides must be positive"),
    (lambda: lax.slice(np.ones((3, 3)), (0,), (3,)), TypeError, "slice start_indices must have length"),
    (lambda: lax.broadcasted_iota(np.float32, (3,), 1), ValueError, "axis 1 is out of bounds"),
    (lambda: lax.iota_p.bind(dtype=np.dtype(np.bool_), shape=(3,), dimension=0, sharding=None), TypeError, "iota does not accept dtype bool"),
    (lambda: lax.reshape(np.ones(4), (2, 2.5)), TypeError, "Shapes must be 1D sequences of concrete values of integer type"),
])
def test_errors(fn, exc, match):
  with pytest.raises(exc, match=match):
    fn()


def test_kernel_never_copies_out_of_bounds():
  from kernels import shape as K
  i64 = lambda *v: np.array(v, np.int64)
  src, dst = np.zeros(10), np.zeros(10)
  with pytest.raises(IndexError):
    K.copy_strided(src, 5, i64(1), dst, 0, i64(1), i64(6))
  with pytest.raises(IndexError):
    K.copy_strided(src, 0, i64(-1), dst, 0, i64(1), i64(2))
  with pytest.raises(IndexError):
    K.copy_strided(src, 0, i64(1), dst, 9, i64(1), i64(2))
  K.copy_strided(src, 9, i64(-1), dst, 0, i64(1), i64(10))  # full reversed window is fine


# ----------------------------------------------------------------------------- transformations


def test_vmap_of_wrappers_compose():
  from nbjax import api
  x = np.random.default_rng(0).standard_normal((4, 2, 3))
  f = lambda v: lax.transpose(lax.pad(lax.rev(v, (0,)), 0.0, [(1, -1, 1), (0, 2, 0)]), (1, 0))
  testing.check_vmap(f, [x], in_axes=0)
  testing.check_vmap(f, [np.moveaxis(x, 0, 2)], in_axes=2)
  out = api.vmap(lambda v: lax.broadcast_in_dim(v, (5, 3), (1,)), in_axes=0)(x[0])
  assert out.shape == (2, 5, 3)
  np.testing.assert_array_equal(out, np.broadcast_to(x[0][:, None, :], (2, 5, 3)))


def test_pad_batched_padding_value():
  if not hasattr(lax, "select_n"):
    pytest.skip("lax.select_n not available yet")
  x = np.random.default_rng(0).standard_normal((3, 4))
  pv = np.array([1.0, 2.0, 3.0])
  testing.check_vmap(lambda a, v: lax.pad(a, v, [(1, 2, 1)]), [x, pv], in_axes=(0, 0))
  testing.check_vmap(lambda a, v: lax.pad(a, v, [(-1, 2, 1)]), [x[0], pv], in_axes=(None, 0))


def test_squeeze_errors_are_jaxs_messages():
  import nbjax.numpy as jnp
  for call in (lambda: lax.squeeze(jnp.ones((2, 3)), (0,)), lambda: jnp.squeeze(jnp.ones((2, 3)), 0)):
    with pytest.raises(ValueError) as e:
      call()
    assert str(e.value) == ("cannot select an axis to squeeze out which has size not equal to one, "
                            "got shape=(2, 3) and dimensions=(0,)")
