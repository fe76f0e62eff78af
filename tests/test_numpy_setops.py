"""nbjax.numpy differences, insert/delete, set operations and index utilities
(``nbjax/numpy/_setops.py``) against NumPy: values and dtypes, the static ``size=`` forms
under jit, vmap and jvp of the differentiable ones, and JAX's errors."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax.core import ConcretizationTypeError
from nbjax.testing import check_jvp, check_vmap

rng = np.random.default_rng(0)


def check(actual, expected, dtype=True):
  a, e = np.asarray(actual), np.asarray(expected)
  assert a.shape == e.shape, (a.shape, e.shape)
  if dtype:
    assert a.dtype == e.dtype, (a.dtype, e.dtype)
  np.testing.assert_allclose(a, e, rtol=1e-6, atol=0, equal_nan=True)


def check_tuple(actual, expected, dtype=True):
  assert len(actual) == len(expected)
  for a, e in zip(actual, expected):
    check(a, e, dtype)


def ints(shape, lo=-5, hi=6, dtype=np.int64):
  return rng.integers(lo, hi, shape).astype(dtype)

# ----------------------------------------------------------------- differences


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
def test_diff_matches_numpy(dtype):
  x = (rng.standard_normal((3, 5)) * 4).astype(dtype)
  for n in (0, 1, 2, 4, 6):
    for axis in (0, 1, -1):
      check(jnp.diff(x, n, axis), np.diff(x, n, axis))
  check(jnp.diff(x, prepend=x[:, :1], append=x[:, :2]),
        np.diff(x, prepend=x[:, :1], append=x[:, :2]))
  if dtype != np.bool_:
    check(jnp.diff(x, axis=0, prepend=dtype(1), append=dtype(2)),
          np.diff(x, axis=0, prepend=dtype(1), append=dtype(2)))


def test_diff_errors():
  with pytest.raises(ValueError, match="non-negative"):
    jnp.diff(jnp.arange(3), -1)
  with pytest.raises(ValueError, match="at least one dimensional"):
    jnp.diff(jnp.asarray(3.0))
  with pytest.raises(TypeError):
    jnp.diff([1, 2, 3])


def test_ediff1d():
  x = rng.standard_normal((2, 3))
  check(jnp.ediff1d(x), np.ediff1d(x))
  check(jnp.ediff1d(x, to_end=np.array([7.0, 8.0]), to_begin=-1.0),
        np.ediff1d(x, to_end=[7.0, 8.0], to_begin=-1.0))
  xi = ints((5,), dtype=np.int32)
  check(jnp.ediff1d(xi, to_begin=np.array([2])), np.ediff1d(xi, to_begin=np.array([2])))
  check(jnp.ediff1d(np.zeros(0)), np.ediff1d(np.zeros(0)))


def test_append():
  x, y = rng.standard_normal((2, 3)), ints((2, 2), dtype=np.int32)
  check(jnp.append(x, y), np.append(x, y))
  check(jnp.append(x, y, axis=1), np.append(x, y, axis=1))
  check(jnp.append(y, y.astype(np.int8), axis=0), np.append(y, y.astype(np.int8), axis=0))
  with pytest.raises(TypeError):
    jnp.append(x, y, axis=0)

# ----------------------------------------------------------------- insert / delete


def test_insert_matches_numpy():
  a = ints((4, 5))
  cases = [(2, 9, None), (-1, np.array([7, 8]), None),
           (np.array([0, 3, 3, 20]), np.array([1, 2, 3, 4]), None),
           (1, np.arange(5), 0), (1, np.array([1, 2, 3, 4]), 1),
           (np.array([1]), np.array([[1], [2], [3], [4]]), 1), (slice(1, 4), 0, 1),
           (np.array([0, 2]), np.array([[5], [6], [7], [8]]), 1), (np.array([], np.int64), 3, 0),
           (2, 1.7, 1)]
  for obj, vals, axis in cases:
    check(jnp.insert(a, obj, vals, axis), np.insert(a, obj, vals, axis))
  check(jnp.insert(a, np.array([-30, 1, 30]), 0, 1),  # JAX clips out-of-bound indices
        np.insert(a, np.array([0, 1, 5]), 0, 1))
  f = rng.standard_normal((3,)).astype(np.float32)
  check(jnp.insert(f, np.array([0, 3]), np.array([1.5, 2.5])), np.insert(f, [0, 3], [1.5, 2.5]))


def test_insert_traced_obj_and_errors():
  a = jnp.arange(5.0)
  out = nbjax.jit(lambda o, v: jnp.insert(a, o, v))(jnp.array([4, 1]), jnp.array([10.0, 20.0]))
  check(out, np.insert(np.arange(5.0), [4, 1], [10.0, 20.0]))
  with pytest.raises(ValueError, match="one-dimensional"):
    jnp.insert(a, jnp.zeros((2, 2), int), 1.0)
  with pytest.raises(ValueError, match="integer typed"):
    jnp.insert(a, jnp.array([1.0]), 1.0)
  with pytest.raises(TypeError):
    jnp.insert(a, [1], 1.0)


def test_delete_matches_numpy():
  a = rng.standard_normal((4, 6))
  for obj, axis in [(2, None), (-1, 1), (0, 0), (slice(1, 5, 2), 1), (np.array([0, 3, 3, -1]), 1),
                    (np.array([True, False, True, False]), 0), (np.array([], np.int64), 1)]:
    check(jnp.delete(a, obj, axis), np.delete(a, obj, axis))
  obj = np.array([5, 0, 2])
  check(jnp.delete(a, obj, 1, assume_unique_indices=True), np.delete(a, obj, 1))
  traced = nbjax.jit(lambda o: jnp.delete(a, o, 1, assume_unique_indices=True))(obj)
  check(traced, np.delete(a, obj, 1))


def test_delete_errors():
  a = jnp.arange(6)
  with pytest.raises(ConcretizationTypeError):
    nbjax.jit(lambda o: jnp.delete(a, o))(jnp.array([1, 2]))
  with pytest.raises(ValueError, match="boolean indices"):
    jnp.delete(a, np.array([True, False]))
  with pytest.raises(ValueError, match="must be integer or bool"):
    jnp.delete(a, np.array([1.0]))
  with pytest.raises(ValueError):
    jnp.delete(a, 6)


def test_insert_delete_append_diff_vmap():
  x = rng.standard_normal((3, 4, 5))
  check_vmap(lambda v: jnp.diff(v, 2, axis=0, prepend=0.5), (x,))
  check_vmap(lambda v: jnp.append(v, v[:1], axis=0), (x,))
  check_vmap(lambda v: jnp.insert(v, 2, jnp.arange(5.0), axis=0), (x,))
  check_vmap(lambda v, o: jnp.insert(v, o, -1.0, axis=1), (x, np.array([[0, 2], [5, 1], [3, 3]])))
  check_vmap(lambda v: jnp.delete(v, np.array([0, 2]), axis=1), (x,))
  check_vmap(lambda v, o: jnp.delete(v, o, axis=1, assume_unique_indices=True),
             (x, np.array([[0, 2], [4, 1], [3, 0]])))


def test_insert_delete_append_diff_jvp():
  x, y = rng.standard_normal((4, 5)), rng.standard_normal((4,))
  check_jvp(lambda v: jnp.diff(v, 2, axis=1, append=v[:, :1]), (x,))
  check_jvp(jnp.append, (x, y))
  check_jvp(lambda v, w: jnp.insert(v, np.array([0, 3]), w[:2], axis=None), (x, y))
  check_jvp(lambda v, w: jnp.insert(v, 1, w, axis=1), (x, y))
  check_jvp(lambda v: jnp.delete(v, np.array([1, 3]), axis=0), (x,))
  check_jvp(lambda v: jnp.delete(v, np.array([1, 3]), axis=1, assume_unique_indices=True), (x,))
  check_jvp(lambda v: jnp.ediff1d(v, to_begin=1.0), (x,))

# ----------------------------------------------------------------- reshaping helpers


def test_unstack_resize_trim_zeros():
  x = rng.standard_normal((2, 3, 4))
  for axis in (0, 1, -1):
    check_tuple(jnp.unstack(x, axis=axis), tuple(np.moveaxis(x, axis, 0)))
  with pytest.raises(ValueError):
    jnp.unstack(jnp.asarray(1.0))
  for shape in [(3, 5), 7, (2,), (0, 3), ()]:
    check(jnp.resize(x, shape), np.resize(x, shape))
  check(jnp.resize(np.zeros(0, np.int32), (2, 2)), np.zeros((2, 2), np.int32))
  with pytest.raises(ValueError, match="non-negative"):
    jnp.resize(x, (2, -1))
  z = np.array([0, 0, 3, 0, 2, 0, 0])
  for trim in ("fb", "f", "b", "B"):
    check(jnp.trim_zeros(z, trim), np.trim_zeros(z, trim))
  check(jnp.trim_zeros(z, ""), z)
  check(jnp.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
  z2 = np.zeros((4, 5))
  z2[1, 2] = z2[2, 3] = 1.0
  check(jnp.trim_zeros(z2), np.trim_zeros(z2))
  check(jnp.trim_zeros(z2, axis=1), np.trim_zeros(z2, axis=1))
  with pytest.raises(ConcretizationTypeError):
    nbjax.jit(jnp.trim_zeros)(z)

# ----------------------------------------------------------------- set operations


@pytest.mark.parametrize("method", ["auto", "compare_all", "binary_search", "sort"])
def test_isin(method):
  e, t = ints((3, 4)), ints((2, 5))
  for invert in (False, True):
    check(jnp.isin(e, t, invert=invert, method=method), np.isin(e, t, invert=invert))
  ef = np.array([1.0, 2.5, np.nan, 4.0])
  check(jnp.isin(ef, np.array([4, 1, 7]), method=method), np.isin(ef, [4, 1, 7]))
  check(jnp.isin(e, np.zeros(0)), np.isin(e, np.zeros(0)))
  check(nbjax.vmap(lambda a: jnp.isin(a, t, method=method))(e), np.isin(e, t))
  with pytest.raises(ValueError, match="not implemented"):
    jnp.isin(e, t, method="bogus")


SET_INPUTS = [(ints(9), ints(7)), (ints(6, 0, 3).astype(np.int32), ints(4, 0, 3).astype(np.int8)),
              (np.array([1.0, np.nan, 2.0, 2.0]), np.array([2.0, np.nan, 5.0])),
              (np.zeros(0, np.int64), ints(3)), (ints((2, 3)), ints((3, 2)))]


@pytest.mark.parametrize("a,b", SET_INPUTS)
def test_set_operations_match_numpy(a, b):
  check(jnp.union1d(a, b), np.union1d(a, b))
  check(jnp.intersect1d(a, b), np.intersect1d(a, b))
  check_tuple(jnp.intersect1d(a, b, return_indices=True), np.intersect1d(a, b, return_indices=True))
  check(jnp.setdiff1d(a, b), np.setdiff1d(a, b))
  check(jnp.setxor1d(a, b), np.setxor1d(a, b))
  ua, ub = np.unique(a), np.unique(b)[::-1]
  check(jnp.intersect1d(ua, ub, assume_unique=True), np.intersect1d(ua, ub, assume_unique=True))
  check(jnp.setdiff1d(ua[::-1], ub, assume_unique=True),
        np.setdiff1d(ua[::-1], ub, assume_unique=True))
  check(jnp.setxor1d(ua, ub, assume_unique=True), np.setxor1d(ua, ub, assume_unique=True))


def test_setxor1d_assume_unique_with_repeats():
  # JAX (and NumPy) drop every sorted value equal to a neighbour when assume_unique=True,
  # so a repeated value vanishes; values from JAX 0.10.2.
  a, b = np.array([1, 1, 3]), np.array([2, 5])
  check(jnp.setxor1d(a, b, assume_unique=True), np.array([2, 3, 5]))
  check(jnp.setxor1d(a, b, assume_unique=True, size=5), np.array([2, 3, 5, 2, 2]))
  check(nbjax.jit(lambda x, y: jnp.setxor1d(x, y, assume_unique=True, size=2))(a, b),
        np.array([2, 3]))
  check(jnp.setxor1d(np.array([3, 1]), np.array([1, 2]), assume_unique=True, size=5),
        np.array([2, 3, 2, 2, 2]))
  check(jnp.setxor1d(np.array([np.nan, 1.0]), np.array([np.nan]), assume_unique=True),
        np.array([1.0, np.nan, np.nan]))
  check(jnp.setxor1d(np.zeros(0), np.zeros(0), assume_unique=True, size=2), np.zeros(2))


def _padded(want, size, fill):
  want = np.asarray(want)
  if fill is None:
    fill = want.min() if want.size else 0
  return np.concatenate([want, np.full(size, fill, want.dtype)])[:size]


def test_set_operations_with_size_under_jit():
  a, b = np.array([5, 1, 3, 3, 9, 7]), np.array([3, 4, 5, 5, 0])
  for size in (0, 2, 4, 9):
    for fill in (None, -1):
      kw = {"size": size, "fill_value": fill}
      check(nbjax.jit(lambda x, y, kw=kw: jnp.union1d(x, y, **kw))(a, b),
            _padded(np.union1d(a, b), size, fill))
      check(nbjax.jit(lambda x, y, kw=kw: jnp.intersect1d(x, y, **kw))(a, b),
            _padded(np.intersect1d(a, b), size, fill))
      check(nbjax.jit(lambda x, y, kw=kw: jnp.setxor1d(x, y, **kw))(a, b),
            _padded(np.setxor1d(a, b), size, fill))
      check(nbjax.jit(lambda x, y, kw=kw: jnp.setdiff1d(x, y, **kw))(a, b),
            _padded(np.setdiff1d(a, b), size, 0 if fill is None else fill))
      vals, i1, i2 = nbjax.jit(
          lambda x, y, kw=kw: jnp.intersect1d(x, y, return_indices=True, **kw))(a, b)
      w, w1, w2 = np.intersect1d(a, b, return_indices=True)
      check(vals, _padded(w, size, fill))
      check(i1, _padded(w1, size, a.size))
      check(i2, _padded(w2, size, b.size))
  for fn in (jnp.union1d, jnp.intersect1d, jnp.setdiff1d, jnp.setxor1d):
    with pytest.raises(ConcretizationTypeError):
      nbjax.jit(fn)(a, b)


def test_unique_functions_match_numpy():
  for x in [ints((3, 4), 0, 4), np.array([2.0, np.nan, 1.0, np.nan, 2.0]),
            ints((7,), dtype=np.uint8), np.zeros(0, np.float32)]:
    # sorted, NaNs distinct (NumPy >= 2.3's unique_* need not sort: compare with np.unique)
    v, i, inv, c = np.unique(x, True, True, True, equal_nan=False)
    inv = inv.reshape(x.shape)
    check(jnp.unique_values(x), v)
    check_tuple(jnp.unique_counts(x), (v, c))
    check_tuple(jnp.unique_inverse(x), (v, inv))
    r = jnp.unique_all(x)
    check_tuple(r, (v, i, inv, c))
    assert type(r).__name__ == "_UniqueAllResult" and r._fields == (
        "values", "indices", "inverse_indices", "counts")
  assert jnp.unique_counts(np.arange(2))._fields == ("values", "counts")
  assert jnp.unique_inverse(np.arange(2))._fields == ("values", "inverse_indices")


def test_unique_functions_with_size():
  x = np.array([[3, 1, 4], [1, 5, 3]])
  r = nbjax.jit(lambda v: jnp.unique_all(v, size=6))(x)
  check(r.values, [1, 3, 4, 5, 1, 1])
  check(r.indices, [1, 0, 2, 4, 1, 1])
  check(r.inverse_indices, np.unique_all(x).inverse_indices)
  check(r.counts, [2, 2, 1, 1, 0, 0])
  c = jnp.unique_counts(x, size=2, fill_value=-7)
  check_tuple(c, ([1, 3], [2, 2]), dtype=False)
  check(jnp.unique_values(x, size=5, fill_value=-7), [1, 3, 4, 5, -7])
  check(jnp.unique_values(np.zeros(0), size=2, fill_value=1.5), [1.5, 1.5])
  with pytest.raises(ValueError, match="fill_value must be specified"):
    jnp.unique_values(np.zeros(0), size=2)
  with pytest.raises(ConcretizationTypeError):
    nbjax.jit(jnp.unique_values)(x)

# ----------------------------------------------------------------- index utilities


def test_unravel_ravel_multi_index():
  shape = (3, 4, 5)
  flat = rng.integers(0, 60, (2, 7))
  check_tuple(jnp.unravel_index(flat, shape), np.unravel_index(flat, shape))
  check_tuple(jnp.unravel_index(7, 10), np.unravel_index(7, 10))
  check_tuple(jnp.unravel_index(np.array([60, 99, -1, -61]), shape),  # JAX clamps
              ([2, 2, 2, 0], [3, 3, 3, 0], [4, 4, 4, 0]), dtype=False)
  idx = np.unravel_index(flat, shape)
  for order in ("C", "F"):
    check(jnp.ravel_multi_index(idx, shape, order=order),
          np.ravel_multi_index(idx, shape, order=order))
  bad = (np.array([0, 5, -1]), np.array([4, 1, 2]), np.array([0, 9, 3]))
  for mode in ("clip", "wrap"):
    want = np.ravel_multi_index(bad, shape, mode=mode)
    check(jnp.ravel_multi_index(bad, shape, mode=mode), want)
    check(nbjax.jit(lambda *i, m=mode: jnp.ravel_multi_index(i, shape, mode=m))(*bad), want)
  assert jnp.ravel_multi_index(tuple(i.astype(np.int32) for i in idx), shape).dtype == np.int32
  with pytest.raises(ValueError, match="invalid entry"):
    jnp.ravel_multi_index(bad, shape)
  with pytest.raises(ConcretizationTypeError):
    nbjax.jit(lambda *i: jnp.ravel_multi_index(i, shape))(*idx)
  with pytest.raises(TypeError, match="only int indices"):
    jnp.ravel_multi_index((np.array([1.0]),), (3,), dtype=np.int64)
  with pytest.raises(ValueError, match="not an integer type"):
    jnp.ravel_multi_index((np.array([1.0]),), (3,))
  with pytest.raises(ValueError, match="invalid mode"):
    jnp.ravel_multi_index(idx, shape, mode="bogus")


def test_indices_from():
  a = np.zeros((3, 5))
  for k in (-1, 0, 2):
    check_tuple(jnp.tril_indices_from(a, k), np.tril_indices_from(a, k))
    check_tuple(jnp.triu_indices_from(jnp.asarray(a), k), np.triu_indices_from(a, k))
  check_tuple(jnp.diag_indices_from(np.zeros((4, 4, 4))), np.diag_indices_from(np.zeros((4, 4, 4))))
  with pytest.raises(ValueError, match="2-D"):
    jnp.tril_indices_from(np.zeros(3))
  with pytest.raises(ValueError, match="equal length"):
    jnp.diag_indices_from(a)


def test_fill_diagonal_put_place():
  for shape, val in [((3, 3), 5.0), ((5, 3), np.array([1.0, 2.0])), ((3, 3, 3), np.arange(3.0)),
                     ((2, 4), np.array([[7.0, 8.0]]))]:
    a = rng.standard_normal(shape)
    want = a.copy()
    np.fill_diagonal(want, val)
    check(jnp.fill_diagonal(a, val, inplace=False), want)
  with pytest.raises(NotImplementedError, match="immutable"):
    jnp.fill_diagonal(jnp.zeros((2, 2)), 1.0)
  with pytest.raises(NotImplementedError, match="wrap"):
    jnp.fill_diagonal(jnp.zeros((2, 2)), 1.0, wrap=True, inplace=False)
  a = rng.standard_normal((3, 4))
  for ind, v, mode in [(np.array([0, 5, 11]), np.array([1.0, 2.0]), None),
                       (np.array([[1], [20]]), np.array([3.0]), "clip"),
                       (np.array([-1, 13, 2]), np.array([4.0, 5.0, 6.0]), "wrap")]:
    want = a.copy()
    np.put(want, ind, v, mode=mode or "raise")
    check(jnp.put(a, ind, v, mode=mode, inplace=False), want)
  with pytest.raises(ValueError, match="in-place"):
    jnp.put(a, np.array([0]), np.array([1.0]))
  with pytest.raises(NotImplementedError):
    jnp.put(a, np.array([0]), np.array([1.0]), mode="raise", inplace=False)
  mask = rng.random((3, 4)) < 0.5
  want = a.copy()
  np.place(want, mask, [10.0, 20.0, 30.0])
  check(jnp.place(a, mask, np.array([10.0, 20.0, 30.0]), inplace=False), want)
  check(nbjax.jit(lambda m: jnp.place(a, m, np.array([1.0]), inplace=False))(mask),
        np.where(mask, 1.0, a))
  with pytest.raises(ValueError, match="in-place"):
    jnp.place(a, mask, np.array([1.0]))
  with pytest.raises(ValueError, match="same size"):
    jnp.place(a, mask[:2], np.array([1.0]), inplace=False)

# ----------------------------------------------------------------- selection and joining


def test_choose():
  a = rng.integers(0, 3, (2, 4))
  choices = [rng.standard_normal((2, 4)), ints((4,)), np.float32(7.0)]
  check(jnp.choose(a, choices), np.choose(a, choices))
  check(jnp.choose(a, np.stack([np.arange(4), np.arange(4) * 10, -np.arange(4)])),
        np.choose(a, np.stack([np.arange(4), np.arange(4) * 10, -np.arange(4)])))
  b = a + np.array([0, 3, -4, 1])
  for mode in ("wrap", "clip"):
    check(jnp.choose(b, choices, mode=mode), np.choose(b, choices, mode=mode))
    check(nbjax.jit(lambda i, m=mode: jnp.choose(i, choices, mode=m))(b),
          np.choose(b, choices, mode=mode))
  with pytest.raises(ValueError, match="invalid entry"):
    jnp.choose(b, choices)
  with pytest.raises(ConcretizationTypeError):
    nbjax.jit(lambda i: jnp.choose(i, choices))(a)
  with pytest.raises(ValueError, match="integer typed"):
    jnp.choose(a.astype(float), choices)
  check_jvp(lambda c0, c1: jnp.choose(a, [c0, c1, c0 * 2]), (choices[0], choices[0] + 1))


def test_block():
  A, B = np.ones((2, 2)), np.zeros((2, 3), np.int32)
  for arrs in ([A, A], [[A, B], [np.full((1, 5), 7.0)]], 3.0, [1, 2], [[1, 2], [3, 4]],
               [[[A]], [[A]]], [np.arange(3), np.arange(2)]):
    check(jnp.block(arrs), np.block(arrs))
  with pytest.raises(ValueError, match="tuples"):
    jnp.block((A, A))
  with pytest.raises(ValueError, match="empty list"):
    jnp.block([])
  with pytest.raises(ValueError, match="Mismatched list depths"):
    jnp.block([A, [A]])

# ----------------------------------------------------------------- sorting


def test_lexsort():
  keys = rng.integers(0, 3, (3, 4, 6))
  for axis in (-1, 0, 1):
    check(jnp.lexsort(keys, axis=axis), np.lexsort(keys, axis=axis))
  k = (np.array([1.0, 0.5, 1.0]), np.array([True, False, False]))
  check(jnp.lexsort(k), np.lexsort(k))
  check(jnp.lexsort((np.int32(3),)), np.lexsort((np.int32(3),)))
  with pytest.raises(TypeError, match="len > 0"):
    jnp.lexsort(())
  with pytest.raises(ValueError, match="same shape"):
    jnp.lexsort((np.zeros(3), np.zeros(4)))


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8])
def test_partition_and_argpartition_are_valid(dtype):
  x = (rng.standard_normal((4, 7)) * 10).astype(dtype)
  for axis in (0, 1):
    for kth in (0, 2, -1):
      p = np.asarray(jnp.partition(x, kth, axis))
      assert p.dtype == x.dtype
      k = kth % x.shape[axis]
      pk = np.take(p, [k], axis)
      np.testing.assert_array_equal(pk, np.take(np.partition(x, k, axis), [k], axis))
      assert (np.take(p, range(k), axis) <= pk).all()
      assert (np.take(p, range(k + 1, x.shape[axis]), axis) >= pk).all()
      i = np.asarray(jnp.argpartition(x, kth, axis))
      assert i.dtype == np.int32  # lax.top_k's indices, as JAX
      q = np.take_along_axis(x, i, axis)  # a valid partition (JAX's order differs from p's)
      np.testing.assert_array_equal(np.take(q, [k], axis), pk)
      np.testing.assert_array_equal(np.sort(q, axis), np.sort(x, axis))
      assert (np.take(q, range(k), axis) <= pk).all()
      assert (np.take(q, range(k + 1, x.shape[axis]), axis) >= pk).all()
  with pytest.raises(NotImplementedError, match="complex"):
    jnp.partition(x.astype(np.complex64), 1)
  with pytest.raises(ValueError):
    jnp.argpartition(x, 7)


def test_sort_complex():
  for x in (rng.standard_normal(6), ints((2, 5)), rng.standard_normal(5) + 1j * ints(5, 0, 2)):
    check(jnp.sort_complex(x), np.sort_complex(x))
  assert jnp.sort_complex(np.ones(3, np.float32)).dtype == np.complex64


def test_unique_full_signature():
  x = np.array([[3.0, 1.0, 2.0], [3.0, np.nan, np.nan]])
  got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
  want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), w)
  np.testing.assert_array_equal(jnp.unique(x), np.unique(x))
  assert np.isnan(np.asarray(jnp.unique(x, equal_nan=False))).sum() == 2
  padded = nbjax.jit(lambda a: jnp.unique(a, size=6, fill_value=-1.0))(x)
  np.testing.assert_array_equal(np.asarray(padded), [1.0, 2.0, 3.0, np.nan, -1.0, -1.0])
  with pytest.raises(nbjax.core.ConcretizationTypeError):
    nbjax.jit(jnp.unique)(x)


def test_unique_axis():
  m = np.array([[1, 2], [1, 2], [0, 5], [0, 4]])
  vals, idx, inv, cnt = jnp.unique(m, axis=0, return_index=True, return_inverse=True,
                                   return_counts=True)
  check(vals, np.array([[0, 4], [0, 5], [1, 2]]))
  check(idx, np.array([3, 2, 0]))
  check(inv, np.array([2, 2, 1, 0]))
  check(cnt, np.array([1, 1, 2]))
  check(jnp.unique(m, axis=1), np.array([[1, 2], [1, 2], [0, 5], [0, 4]]))
  check(jnp.unique(m, axis=0, size=4, fill_value=9), np.array([[0, 4], [0, 5], [1, 2], [9, 9]]))
  # a fill_value shaped as one slice fills each padded slice (values from JAX 0.10.2)
  check(jnp.unique(m, axis=0, size=4, fill_value=np.array([7, 8])),
        np.array([[0, 4], [0, 5], [1, 2], [7, 8]]))
  x = np.arange(24.0).reshape(2, 3, 4) % 3
  fill = np.arange(6.0).reshape(2, 3) + 100
  out = jnp.unique(x, axis=2, size=5, fill_value=fill)
  check(out[..., :3], np.array([[[0, 1, 2], [1, 2, 0], [2, 0, 1]]] * 2, np.float64))
  check(out[..., 3:], np.repeat(fill[..., None], 2, axis=-1))
  check(jnp.unique(np.array([[1.0, np.nan], [1.0, np.nan]]), axis=0), np.array([[1.0, np.nan]]))
  assert jnp.unique(np.array([[1.0, np.nan], [1.0, np.nan]]), axis=0, equal_nan=False).shape == (2, 2)
  check(jnp.unique(np.array([3, 1]), sorted=False), np.array([1, 3]))


def test_unique_empty_rows_and_empty_operands():
  # rows of zero size are all equal: JAX's one row, index [0], counts [n]; with size and
  # fill_value, size rows (index and counts keep JAX's length 1); values from JAX 0.10.2
  x = np.zeros((3, 0))
  check_tuple(jnp.unique(x, True, True, True, axis=0),
              (np.zeros((1, 0)), np.array([0]), np.array([0, 0, 0]), np.array([3])))
  check_tuple(jnp.unique(x, True, True, True, axis=0, size=2, fill_value=1.0),
              (np.zeros((2, 0)), np.array([0]), np.array([0, 0, 0]), np.array([3])))
  assert jnp.unique(x, axis=0, size=2).shape == (1, 0)
  check(jnp.setxor1d(np.int8(3), np.zeros(0, np.float16), size=2), np.array([3.0, 3.0], np.float16))
  check(jnp.union1d(np.zeros(0), np.zeros(0), size=2, fill_value=5), np.array([5.0, 5.0]))
  check(jnp.intersect1d(np.array([4]), np.zeros(0, np.int64), size=3), np.array([4, 4, 4]))
  check(jnp.intersect1d(np.array([4, 2]), np.zeros(0, np.int64), size=2), np.array([0, 0]))


def test_compress_extract_size():
  check(jnp.extract(np.arange(5) > 2, np.arange(5), size=4, fill_value=9), np.array([3, 4, 9, 9]))
  with pytest.raises(ValueError, match="size must be positive and not greater"):
    jnp.compress(np.array([True, False, True, True]), np.arange(3), size=5)
  with pytest.raises(ValueError, match="condition contains entries that are out of bounds"):
    jnp.compress(np.array([True, False, True, True]), np.arange(3))
