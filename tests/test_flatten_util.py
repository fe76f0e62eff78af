"""nbjax.flatten_util.ravel_pytree against JAX 0.10.2's behaviour (values taken from JAX)."""
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.flatten_util import ravel_pytree


def _same(a, b):
  assert type(a) is type(b)
  if isinstance(a, dict):
    assert a.keys() == b.keys()
    for k in a:
      _same(a[k], b[k])
  elif isinstance(a, (list, tuple)):
    assert len(a) == len(b)
    for x, y in zip(a, b):
      _same(x, y)
  else:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_mixed_dtypes_promote_and_round_trip():
  tree = {"a": jnp.ones(2, jnp.float32), "b": 1.0, "c": (np.int32(3), True)}
  flat, unravel = ravel_pytree(tree)
  assert flat.dtype == np.float64 and not flat.weak_type
  np.testing.assert_array_equal(np.asarray(flat), [1., 1., 1., 3., 1.])
  back = unravel(flat)
  assert back["a"].dtype == np.float32 and back["b"].dtype == np.float64
  assert back["c"][0].dtype == np.int32 and back["c"][1].dtype == np.bool_
  assert back["c"][1].shape == () and bool(back["c"][1])


def test_mixed_dtype_unravel_checks_dtype_and_size():
  flat, unravel = ravel_pytree({"a": jnp.ones(2, jnp.float32), "b": 1.0})
  with pytest.raises(TypeError, match="unravel function given array of dtype float32, but "
                     "expected dtype float64"):
    unravel(jnp.ones(3, jnp.float32))
  with pytest.raises(ValueError, match=r"Sum of sizes 3 must be equal to dimension 0 of the "
                     r"operand shape \[4\]"):
    unravel(jnp.ones(4))


def test_single_dtype_unravel_is_dtype_polymorphic():
  flat, unravel = ravel_pytree([jnp.ones(2, jnp.float32), jnp.ones((1, 1), jnp.float32)])
  assert flat.dtype == np.float32
  out = unravel(jnp.arange(3))
  assert [o.dtype for o in out] == [np.int64, np.int64]
  assert out[1].shape == (1, 1) and int(out[1][0, 0]) == 2
  with pytest.raises(ValueError, match="Sum of sizes 3"):
    unravel(jnp.ones(4))


def test_empty_trees():
  for tree in ({}, None, [], ((),)):
    flat, unravel = ravel_pytree(tree)
    assert flat.shape == (0,) and flat.dtype == np.float32
    assert unravel(flat) == tree
  assert ravel_pytree([])[1]("anything") == []


def test_weak_and_complex_leaves():
  flat = ravel_pytree([3, 4])[0]
  assert flat.dtype == np.int64 and flat.weak_type
  flat = ravel_pytree([np.float32(3), 2.0])[0]
  assert flat.dtype == np.float64 and not flat.weak_type
  flat, unravel = ravel_pytree([1, 2.0, 1j])
  assert flat.dtype == np.complex128
  np.testing.assert_array_equal(np.asarray(flat), [1, 2, 1j])
  flat, unravel = ravel_pytree([jnp.ones(2), 1j])
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # complex -> float is silent in unravel, as in JAX
    back = unravel(flat + 5j)
  assert back[0].dtype == np.float64 and back[1].dtype == np.complex128
  np.testing.assert_array_equal(np.asarray(back[0]), [1., 1.])
  flat = ravel_pytree([jnp.ones(2, jnp.bfloat16), jnp.ones(1, jnp.int8)])[0]
  assert flat.dtype == jnp.bfloat16
  assert ravel_pytree(jnp.float32(3))[0].shape == (1,)


def test_unravel_hashable_and_equal():
  t1 = {"a": jnp.ones(2, jnp.float32), "b": 1.0}
  t2 = {"a": jnp.zeros(2, jnp.float32), "b": 2.0}
  u1, u2 = ravel_pytree(t1)[1], ravel_pytree(t2)[1]
  assert u1 == u2 and hash(u1) == hash(u2)
  assert u1 != ravel_pytree({"a": jnp.zeros(3, jnp.float32), "b": 2.0})[1]


def test_transformations():
  p = {"w": jnp.arange(6.).reshape(2, 3), "b": jnp.ones(3, jnp.float32)}

  def loss(p):
    return jnp.sum(ravel_pytree(p)[0] ** 2)

  g = nbjax.grad(loss)(p)
  assert g["b"].dtype == np.float32
  np.testing.assert_array_equal(np.asarray(g["w"]), 2 * np.arange(6.).reshape(2, 3))
  np.testing.assert_array_equal(np.asarray(g["b"]), [2., 2., 2.])
  flat, unravel = ravel_pytree(p)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lambda p: ravel_pytree(p)[0])(p)),
                                [1., 1., 1., 0., 1., 2., 3., 4., 5.])
  _same(nbjax.jit(unravel)(flat), unravel(flat))
  _same(nbjax.jit(lambda u, x: u(x), static_argnums=0)(unravel, flat), unravel(flat))
  batched = nbjax.vmap(unravel)(jnp.stack([flat, 2 * flat]))
  assert batched["w"].shape == (2, 2, 3) and batched["b"].dtype == np.float32
  gx = nbjax.grad(lambda x: jnp.sum(unravel(x)["w"]))(flat)
  np.testing.assert_array_equal(np.asarray(gx), [0., 0., 0., 1., 1., 1., 1., 1., 1.])
