"""nbjax.Array: immutability, attributes, NumPy/DLPack interop, conversions, repr,
operators, indexing (basic, integer arrays, boolean masks) and ``.at[]`` updates vs NumPy."""
import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import nbjax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.array import Array

rng = np.random.default_rng(1)


def check(actual, expected):
  a, e = np.asarray(actual), np.asarray(expected)
  assert a.shape == e.shape, (a.shape, e.shape)
  assert a.dtype == e.dtype, (a.dtype, e.dtype)
  np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-6, equal_nan=True)

# ----------------------------------------------------------------- basics


def test_immutable():
  x = jnp.arange(3)
  with pytest.raises(TypeError, match=r"\.at\["):
    x[0] = 1
  v = np.asarray(x)
  with pytest.raises(ValueError):
    v[0] = 5  # the NumPy view is read-only
  assert int(x[0]) == 0
  with pytest.raises(TypeError, match="unhashable"):
    hash(x)


def test_attributes():
  x = jnp.ones((2, 3), jnp.float32)
  assert x.shape == (2, 3) and x.dtype == np.float32 and x.ndim == 2 and x.size == 6
  assert x.T.shape == (3, 2) and x.mT.shape == (3, 2) and x.itemsize == 4 and x.nbytes == 24
  assert len(x) == 2 and [r.shape for r in x] == [(3,), (3,)]
  with pytest.raises(TypeError):
    len(jnp.float32(1))
  z = jnp.asarray(np.array([1 + 2j, 3 - 1j], np.complex64))
  check(z.real, np.array([1, 3], np.float32))
  check(z.imag, np.array([2, -1], np.float32))
  check(z.conj(), np.array([1 - 2j, 3 + 1j], np.complex64))
  check(x.real, np.ones((2, 3), np.float32))
  check(x.imag, np.zeros((2, 3), np.float32))
  check(x.astype(jnp.int32), np.ones((2, 3), np.int32))
  check(x.astype("float16"), np.ones((2, 3), np.float16))
  assert x.item(1) == 1.0 and jnp.arange(3).tolist() == [0, 1, 2]
  assert x.weak_type is False and jnp.asarray(1.0).weak_type


def test_numpy_interop():
  x = jnp.arange(6.0).reshape(2, 3)
  a = np.asarray(x)
  assert isinstance(a, np.ndarray) and a.dtype == np.float64
  check(np.asarray(x, dtype=np.float32), np.arange(6.0, dtype=np.float32).reshape(2, 3))
  assert np.array(x, copy=True).flags.writeable
  assert float(np.sum(x)) == 15.0  # NumPy calls x.sum(): an Array, as with JAX
  r = np.add(x, 1)
  assert isinstance(r, np.ndarray)
  check(r, np.arange(6.0).reshape(2, 3) + 1)
  assert isinstance(np.sin(x), np.ndarray)
  # a NumPy array on the left defers to nbjax (higher __array_priority__), as with JAX
  r = np.ones((2, 3)) + x
  assert isinstance(r, Array)
  check(r, np.arange(6.0).reshape(2, 3) + 1)
  assert isinstance(np.float32(2) * x, Array)


def test_dlpack_roundtrip():
  for d in (np.float32, np.int64, np.bool_, np.complex64):
    src = (rng.standard_normal((3, 4)) * 5).astype(d)
    x = jnp.asarray(src)
    y = np.from_dlpack(x)
    check(y, src)
    assert x.__dlpack_device__() == src.__dlpack_device__()
  x = jnp.arange(4.0)
  back = jnp.asarray(np.from_dlpack(x))
  check(back, np.arange(4.0))


def test_scalar_conversions():
  assert float(jnp.float32(2.5)) == 2.5 and int(jnp.int32(7)) == 7
  assert bool(jnp.array([True])) and not bool(jnp.float32(0))
  assert complex(jnp.complex64(1 + 2j)) == 1 + 2j
  assert operator.index(jnp.int32(3)) == 3
  assert [10, 20, 30][jnp.int32(1)] == 20
  with pytest.raises(TypeError):
    operator.index(jnp.float32(1))
  with pytest.raises((TypeError, ValueError)):
    float(jnp.ones(3))
  with pytest.raises(ValueError):
    bool(jnp.ones(3))
  r = round(jnp.float32(2.6))
  assert r == 3 and r.dtype == np.int64
  assert float(round(jnp.float64(2.567), 2)) == 2.57
  assert 2 in jnp.arange(3) and 5 not in jnp.arange(3)
  assert f"{jnp.float32(1.5):.2f}" == "1.50"


def test_repr():
  assert repr(jnp.array([1.0, 2.0], jnp.float32)) == "Array([1., 2.], dtype=float32)"
  assert repr(jnp.array([1, 2], jnp.int32)) == "Array([1, 2], dtype=int32)"
  assert repr(jnp.asarray(1.5)) == "Array(1.5, dtype=float64, weak_type=True)"
  assert repr(jnp.zeros((2, 0))) == "Array([], shape=(2, 0), dtype=float64)"
  assert repr(jnp.array([[1, 2], [3, 4]], jnp.int8)) == \
      "Array([[1, 2],\n       [3, 4]], dtype=int8)"
  assert str(jnp.array([1, 2])) == "[1 2]"

# ----------------------------------------------------------------- operators


BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge,
          operator.eq, operator.ne]
INTOPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


def test_binary_operators():
  xf = rng.standard_normal((3, 4)).astype(np.float32)
  yf = (np.abs(rng.standard_normal((4,))) + 0.5).astype(np.float32)
  xi = rng.integers(-9, 10, (3, 4)).astype(np.int32)
  yi = rng.integers(1, 4, (4,)).astype(np.int32)
  # JAX 0.10: int32 / int32 is float32 (NumPy's float64 values, rounded)
  jaxish = lambda op, w: w.astype(np.float32) if op is operator.truediv and w.dtype == np.float64 \
      else w
  for op in BINOPS:
    for x, y in ((xf, yf), (xi, yi)):
      with np.errstate(all="ignore"):
        want = jaxish(op, op(np.abs(x) if op is operator.pow else x, y))
      jx = jnp.asarray(np.abs(x) if op is operator.pow else x)
      check(op(jx, jnp.asarray(y)), want)
      check(op(jx, y), want)  # NumPy operand on the right
      check(op(jx, 2), jaxish(op, op(np.abs(x) if op is operator.pow else x, x.dtype.type(2))))
      check(op(3, jnp.asarray(y)), jaxish(op, op(y.dtype.type(3), y)))  # reflected
  for op in INTOPS:
    check(op(jnp.asarray(xi), jnp.asarray(yi)), op(xi, yi))
    check(op(jnp.asarray(xi), 1), op(xi, np.int32(1)))
    check(op(5, jnp.asarray(yi)), op(np.int32(5), yi))
  b = rng.random((4,)) < 0.5
  check(jnp.asarray(b) & jnp.asarray(~b), b & ~b)
  check(jnp.asarray(b) | True, b | True)
  q, r = divmod(jnp.asarray(xi), jnp.asarray(yi))
  check(q, xi // yi)
  check(r, xi % yi)
  q, r = divmod(7, jnp.asarray(yi))
  check(q, np.int32(7) // yi)
  m1, m2 = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
  check(jnp.asarray(m1) @ jnp.asarray(m2), m1 @ m2)
  check(m1 @ jnp.asarray(m2), m1 @ m2)
  check(2.0 ** jnp.asarray(yf), np.float32(2.0) ** yf)


def test_unary_operators():
  x = rng.standard_normal((5,)).astype(np.float32)
  i = rng.integers(-5, 5, (5,)).astype(np.int32)
  check(-jnp.asarray(x), -x)
  check(+jnp.asarray(x), +x)
  check(abs(jnp.asarray(x)), abs(x))
  check(~jnp.asarray(i), ~i)
  check(~jnp.asarray(i > 0), ~(i > 0))


def test_operator_deferral():
  class Other:
    def __radd__(self, other):
      return "radd"

    def __eq__(self, other):
      return "eq"
  x = jnp.arange(3)
  assert x + Other() == "radd"
  assert (x == Other()) == "eq"
  assert (x == None) is False  # noqa: E711 (NotImplemented -> identity comparison)
  assert (x != "a") is True
  with pytest.raises(TypeError):
    x + "a"
  with pytest.raises(TypeError):
    x + [1, 2, 3]


def test_methods():
  x = rng.standard_normal((3, 4)).astype(np.float32)
  jx = jnp.asarray(x)
  for name in ("sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin", "cumsum",
               "cumprod"):
    check(getattr(jx, name)(axis=0), getattr(x, name)(axis=0))
  check(jx.all(), x.all())
  check(jx.any(axis=1), x.any(axis=1))
  check(jx.squeeze(), x.squeeze())
  check(jx.swapaxes(0, 1), x.swapaxes(0, 1))
  check(jx.clip(-0.5, 0.5), x.clip(-0.5, 0.5))
  check(jx.round(1), x.round(1))
  check(jx.argsort(axis=0), x.argsort(axis=0, kind="stable"))
  check(jx.take(jnp.array([0, 2]), axis=1), x.take([0, 2], axis=1))
  check(jx.ravel(), x.ravel())
  check(jx.copy(), x)
  check(jx.conjugate(), x.conjugate())

# ----------------------------------------------------------------- indexing


X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)

INDICES = [
    0, -1, 1, (1, 2), (1, 2, 3), (-1, -2, -3), slice(None), slice(1, None), slice(None, None, -1),
    (slice(None), slice(0, 3, 2)), (Ellipsis, 1), (1, Ellipsis), (Ellipsis, slice(None, None, -2)),
    (None,), (None, 1, None), (slice(None), None, 0), (Ellipsis, None), (1, None, Ellipsis, 2),
    (slice(10, 20),), (slice(-100, 100, 3),), (slice(3, 0, -1), 1), (),
    np.array([0, 1]), (np.array([1, 0, 1]), 1), (np.array([[0], [1]]), slice(None), np.array([0, 3])),
    (slice(None), np.array([2, 0]), np.array([1, 3])), (np.array([1, 0]), slice(None), np.array([3, 2])),
    (Ellipsis, np.array([3, -1])), (0, slice(None), np.array([1, 2])), (np.array([1]), 1, slice(1, 3)),
    (np.array([0, 1]), None, np.array([0, 2])), (slice(None, None, -1), np.array([[0, 1]]), slice(None, 3, 2)),
    ([0, 1], [1, 2]), (np.int32(1), np.array(2)), (1, [0, 2]), (np.array([], np.int64),),
    (True,), (False,), (slice(None), True), X > 10, (X[:, :, 0] > 3,), (1, X[0, :, 0] > 1),
    (Ellipsis, np.array([True, False, True, True])), (np.array([True, False]), slice(None), 0),
]


@pytest.mark.parametrize("idx", INDICES, ids=[repr(i)[:40] for i in range(len(INDICES))])
def test_getitem_vs_numpy(idx):
  jx = jnp.asarray(X)
  check(jx[idx], X[idx])


def test_getitem_traced_index_and_oob():
  x = jnp.arange(5.0)
  # integer-array indices out of bounds clamp (JAX's gather semantics)
  check(x[jnp.array([0, 7, -8])], np.array([0.0, 4.0, 0.0]))
  check(x[7], np.float64(4.0))
  with pytest.raises(IndexError):
    jnp.zeros((0, 3))[0]
  with pytest.raises(IndexError, match="Too many indices"):
    x[0, 0]
  with pytest.raises(IndexError, match="single ellipsis"):
    x[..., ...]
  with pytest.raises(TypeError, match="non-tuple sequence"):
    jnp.ones((2, 2))[[slice(None), 0]]
  with pytest.raises(TypeError):
    x[1.5]
  with pytest.raises(TypeError):
    x[jnp.array([0.5])]
  with pytest.raises(IndexError):
    x[jnp.array([True, False])]
  f = lambda i: x[i]
  check(nbjax.vmap(f)(jnp.array([1, 3])), np.array([1.0, 3.0]))
  check(nbjax.jit(f)(jnp.int32(2)), np.float64(2.0))
  check(nbjax.jit(lambda x, i: x[i, ::-1])(jnp.ones((3, 2)) * jnp.arange(2.0), 1), np.array([1.0, 0.0]))


@pytest.mark.parametrize("k", range(8))
def test_traced_integer_indices_match_concrete(k):
  x = np.arange(60.0).reshape(3, 4, 5)
  f = [lambda x, i: x[i, 1:3], lambda x, i: x[:, i, ::-2], lambda x, i: x[None, 1, i, ::2],
       lambda x, i: x[i, :, i], lambda x, i: x[..., i], lambda x, i: x.at[i, ::2].add(1.0),
       lambda x, i: x.at[:, i, None].set(0.0), lambda x, i: x.at[i, 1, i].mul(2.0)][k]
  i = np.array([2, 0, 1])
  check(nbjax.jit(f)(jnp.asarray(x), jnp.asarray(i)), f(jnp.asarray(x), i))


def test_boolean_mask_under_trace_raises():
  x = jnp.arange(4.0)
  with pytest.raises(jnp.NonConcreteBooleanIndexError, match="concrete"):
    nbjax.jit(lambda x: x[x > 1])(x)
  with pytest.raises(IndexError):
    nbjax.jit(lambda x: x.at[x > 1].set(0.0))(x)
  check(nbjax.jit(lambda x: jnp.where(x > 1, 0.0, x))(x), np.array([0.0, 1.0, 0.0, 0.0]))


def test_tracer_methods():
  x = rng.standard_normal((3, 4)).astype(np.float32)
  f = lambda x: (x.T @ x).sum(axis=0) + x[1:, ::2].mean() - abs(-x).max() + x.at[0].add(1.0)[0, 0]
  want = (x.T @ x).sum(axis=0) + x[1:, ::2].mean() - abs(-x).max() + (x[0, 0] + 1)
  check(nbjax.jit(f)(jnp.asarray(x)), want.astype(np.float32))
  check(nbjax.vmap(lambda r: r[::-1] * 2 + r.sum())(jnp.asarray(x)), x[:, ::-1] * 2 + x.sum(1, keepdims=True))
  with pytest.raises(nbjax.core.ConcretizationTypeError):
    nbjax.jit(lambda x: x.item())(jnp.asarray(x))
  # indexing and .at[] under vmap: one batched gather/scatter
  f = lambda r: r.at[np.array([0, 2])].add(1.0)[np.array([1, 2])] + r[::-1][jnp.array(1)]
  want = np.stack([np.array([r[1], r[2] + 1]) + r[::-1][1] for r in x])
  check(nbjax.vmap(f)(jnp.asarray(x)), want)
  g = lambda r, i: r.at[i].set(-1.0)
  want = x.copy()
  want[[0, 1, 2], [0, 1, 3]] = -1
  check(nbjax.vmap(g)(jnp.asarray(x), jnp.array([0, 1, 3])), want)


def _index_strategy(shape):
  """Random NumPy index expressions for an array of ``shape`` (ints, slices with steps,
  None, Ellipsis, integer arrays with broadcasting, boolean masks)."""
  @st.composite
  def strat(draw):
    idx, arr_shape = [], draw(st.sampled_from([(2,), (2, 1), (1, 3), ()]))
    dims = list(shape)
    used_ellipsis = False
    while dims:
      kind = draw(st.sampled_from(["int", "slice", "slice", "array", "none", "ellipsis",
                                   "mask", "stop"]))
      if kind == "stop":
        break
      if kind == "none":
        idx.append(None)
        continue
      if kind == "ellipsis":
        if not used_ellipsis:
          idx.append(Ellipsis)
          used_ellipsis = True
          dims = dims[-draw(st.integers(0, len(dims))):] if draw(st.booleans()) else []
        continue
      n = dims.pop(0)
      if kind == "int":
        idx.append(draw(st.integers(-n, n - 1)))
      elif kind == "slice":
        idx.append(slice(draw(st.one_of(st.none(), st.integers(-n - 2, n + 2))),
                         draw(st.one_of(st.none(), st.integers(-n - 2, n + 2))),
                         draw(st.sampled_from([None, 1, 2, -1, -2, 3]))))
      elif kind == "array":
        idx.append(rng.integers(-n, n, arr_shape))
      else:
        idx.append(rng.random((n,)) < 0.5)
    return tuple(idx)
  return strat()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_getitem_hypothesis(data):
  shape = data.draw(st.sampled_from([(4,), (3, 4), (2, 3, 4), (3, 1, 2)]))
  x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
  idx = data.draw(_index_strategy(shape))
  masks = sum(isinstance(i, np.ndarray) and i.dtype == bool for i in idx)
  arrays = [i for i in idx if isinstance(i, np.ndarray) and i.dtype != bool]
  if masks and arrays:
    return  # NumPy broadcasts a mask's nonzero() with the other arrays; shapes rarely fit
  try:
    want = x[idx]
  except IndexError:
    return
  check(jnp.asarray(x)[idx], want)

# ----------------------------------------------------------------- .at[]


def test_at_methods():
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  jx = jnp.asarray(x)

  def np_update(fn, idx, v):
    y = x.copy()
    fn(y, idx, v)
    return y
  idx = (1, np.array([0, 2]))
  check(jx.at[idx].set(9.0), np_update(lambda y, i, v: y.__setitem__(i, v), idx, 9.0))
  check(jx.at[idx].add(2.0), np_update(np.add.at, idx, 2.0))
  check(jx.at[idx].subtract(2.0), np_update(np.subtract.at, idx, 2.0))
  check(jx.at[idx].multiply(3.0), np_update(np.multiply.at, idx, 3.0))
  check(jx.at[idx].mul(3.0), np_update(np.multiply.at, idx, 3.0))
  check(jx.at[idx].divide(2.0), np_update(np.divide.at, idx, 2.0))
  check(jx.at[idx].power(2.0), np_update(np.power.at, idx, 2.0))
  check(jx.at[idx].min(1.5), np_update(np.minimum.at, idx, 1.5))
  check(jx.at[idx].max(4.5), np_update(np.maximum.at, idx, 4.5))
  check(jx.at[idx].apply(lambda v: v * 10), np_update(lambda y, i, v: y.__setitem__(i, y[i] * 10), idx, None))
  check(jx.at[idx].get(), x[idx])
  check(jx.at[:, 1:].set(jnp.array([7.0, 8.0])), np_update(lambda y, i, v: y.__setitem__(i, v), (slice(None), slice(1, None)), [7.0, 8.0]))
  check(jx.at[..., ::-2].add(1.0), np_update(lambda y, i, v: y.__setitem__(i, y[i] + v), (Ellipsis, slice(None, None, -2)), 1.0))
  check(jx.at[None, 0].set(5.0), np_update(lambda y, i, v: y.__setitem__(i, v), (None, 0), 5.0))
  check(jx.at[jx > 2].set(0.0), np.where(x > 2, 0, x))
  check(jx.at[jx > 2].add(jnp.array([1.0, 2.0, 3.0])), np.where(x > 2, x + np.array([0, 0, 0, 1, 2, 3], np.float32).reshape(2, 3), x))
  check(jx.at[0].set(jnp.array([[1.0, 2.0, 3.0]])), np.array([[1, 2, 3], [3, 4, 5]], np.float32))
  for kw in (dict(indices_are_sorted=True), dict(unique_indices=True), dict(mode="drop")):
    check(jx.at[idx].set(1.0, **kw), np_update(lambda y, i, v: y.__setitem__(i, v), idx, 1.0))
  assert jx.at[0].set(1).dtype == np.float32  # values cast to the array's dtype
  check(jx, x)  # the original never changes


def test_at_out_of_bounds_and_repeats():
  x = jnp.zeros(5)
  check(x.at[np.array([1, 1, 3, 3, 3])].add(1.0), np.array([0, 2, 0, 3, 0.0]))
  check(x.at[np.array([1, 7, -1, -9])].set(5.0), np.array([0, 5, 0, 0, 5.0]))  # OOB dropped
  check(x.at[np.array([7])].add(1.0, mode="clip"), np.array([0, 0, 0, 0, 1.0]))
  check(x.at[10].set(1.0), np.zeros(5))
  check(jnp.arange(5.0).at[np.array([0, 9])].get(mode="fill", fill_value=-1.0), np.array([0.0, -1.0]))
  check(jnp.arange(5.0).at[9].get(), np.float64(4.0))  # default: clamp
  assert np.isnan(float(jnp.arange(5.0).at[9].get(mode="fill")))
  check(jnp.ones((2, 3), jnp.int32).at[np.array([0, 0]), np.array([1, 1])].add(2), np.array([[1, 5, 1], [1, 1, 1]], np.int32))
  check(jnp.zeros(3).at[np.array([], np.int64)].add(1.0), np.zeros(3))
  with pytest.raises(ValueError):
    x.at[0].set(1.0, mode="bogus")
  s = jnp.float32(1)  # 0-d operands
  check(s.at[()].set(2), np.float32(2))
  check(s.at[...].add(2), np.float32(3))
  check(s.at[None].set(3), np.float32(3))
  check(jnp.arange(4.0).at[:].set(7), np.full(4, 7.0))
  check(jnp.arange(4.0).at[::-1].set(jnp.arange(4.0)), np.arange(4.0)[::-1])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_at_add_hypothesis(data):
  shape = data.draw(st.sampled_from([(5,), (3, 4), (2, 3, 2)]))
  x = rng.integers(-5, 5, shape).astype(np.int32)
  idx = tuple(rng.integers(-n, n, data.draw(st.sampled_from([(3,), (2, 2), ()]))) if
              data.draw(st.booleans()) else slice(None, None, data.draw(st.sampled_from([1, -1, 2])))
              for n in shape[:data.draw(st.integers(1, len(shape)))])
  try:
    sub = x[idx]
  except IndexError:
    return
  v = rng.integers(-3, 3, sub.shape).astype(np.int32)
  want = x.copy()
  np.add.at(want, idx, v)
  check(jnp.asarray(x).at[idx].add(jnp.asarray(v)), want)


def test_device_put_get_devices_typeof():
  import nbjax
  src = np.arange(3.0)
  put = nbjax.device_put({"x": src, "n": 2})
  assert type(put["x"]) is nbjax.Array and type(put["n"]) is nbjax.Array
  src[0] = 99.0  # device_put copies: later NumPy writes do not show through
  assert float(put["x"][0]) == 0.0
  got = nbjax.device_get(put)
  assert type(got["x"]) is np.ndarray and got["x"].tolist() == [0.0, 1.0, 2.0]
  assert nbjax.default_backend() == "cpu" and len(nbjax.devices()) >= 1
  assert nbjax.typeof(put["x"]).shape == (3,) and nbjax.typeof(put["x"]).dtype == np.float64


def test_isinstance_holds_for_tracers_as_jax_array_does():
  import nbjax
  import nbjax.numpy as jnp
  seen = []

  def f(x):
    seen.append((isinstance(x, jnp.ndarray), isinstance(x, nbjax.Array), type(x) is nbjax.Array))
    return x
  nbjax.vmap(f)(np.ones(3))
  nbjax.jit(f)(1.0)
  nbjax.jvp(f, (1.0,), (1.0,))
  nbjax.make_jaxpr(f)(1.0)
  assert len(seen) >= 4 and set(seen) == {(True, True, False)}  # (replay checks rerun f)
  assert isinstance(jnp.ones(2), jnp.ndarray) and type(jnp.ones(2)) is nbjax.Array
  assert not isinstance(np.ones(2), jnp.ndarray) and not isinstance(1.0, nbjax.Array)

# ----------------------------------------------------------------- JAX's exact surface


_IMMUTABLE = ("JAX arrays are immutable and do not support in-place item assignment. Instead "
              "of x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
              "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")


def test_setitem_hash_messages_are_jaxs():
  import collections.abc
  x = jnp.arange(3)
  with pytest.raises(TypeError) as e:
    x[0] = 1
  assert str(e.value) == _IMMUTABLE
  with pytest.raises(TypeError) as e:
    nbjax.jit(lambda y: y.__setitem__(0, 1))(x)
  assert str(e.value) == _IMMUTABLE
  assert not isinstance(x, collections.abc.Hashable)
  with pytest.raises(TypeError, match="^unhashable type: 'ArrayImpl'$"):
    hash(x)
  with pytest.raises(TypeError, match="^unhashable type: '"):
    nbjax.jit(hash)(x)


def test_scalar_conversions_check_shape_first():
  a = jnp.ones((2, 3))
  for f in (int, float, complex):
    with pytest.raises(TypeError, match=r"^Only scalar arrays can be converted to Python "
                                        r"scalars; got arr.ndim=2$"):
      f(a)
    with pytest.raises(TypeError, match=r"got arr.ndim=1$"):
      f(jnp.ones(1))  # size 1 is not enough
    with pytest.raises(TypeError, match=r"got arr.ndim=1$"):
      nbjax.jit(f)(jnp.ones(1))
  msg = r"^Only integer scalar arrays can be converted to a scalar index.$"
  for bad in (jnp.array(1.0), jnp.array(True), jnp.arange(1)):
    with pytest.raises(TypeError, match=msg):
      operator.index(bad)
  with pytest.raises(TypeError, match=msg):
    nbjax.jit(operator.index)(jnp.array(1.0))
  assert operator.index(jnp.array(3, jnp.uint8)) == 3 and [1, 2, 3][jnp.array(2)] == 3
  with pytest.raises(ValueError, match="more than one element is ambiguous"):
    nbjax.jit(bool)(jnp.ones(2))
  with pytest.raises(ValueError, match="empty array is ambiguous"):
    nbjax.jit(bool)(jnp.ones(0))


def test_repr_and_format_are_jaxs():
  assert repr(jnp.zeros((0,), jnp.float32)) == "Array([], shape=(0,), dtype=float32)"
  assert repr(jnp.zeros((2, 0), jnp.int32)) == "Array([], shape=(2, 0), dtype=int32)"
  # the dtype goes after 6 spaces when the last line leaves it too little room
  assert repr(jnp.arange(8, dtype=jnp.float32) * 1e8 + 0.5) == (
      "Array([5.e-01, 1.e+08, 2.e+08, 3.e+08, 4.e+08, 5.e+08, 6.e+08, 7.e+08],      "
      "dtype=float32)")
  assert repr(jnp.arange(17) > 3) == (
      "Array([False, False, False, False,  True,  True,  True,  True,  True,\n"
      "        True,  True,  True,  True,  True,  True,  True,  True],      dtype=bool)")
  with np.printoptions(precision=2):
    assert repr(jnp.arange(4.0) / 3) == "Array([0.  , 0.33, 0.67, 1.  ], dtype=float64)"
  assert f"{jnp.array(3.14159):.3f}" == "3.142" and f"{jnp.arange(3)}" == "[0 1 2]"
  with pytest.raises(TypeError, match="unsupported format string passed to numpy.ndarray"):
    f"{jnp.arange(3):>20}"


def test_numpy_dlpack_copy_semantics():
  import copy
  import pickle
  a = jnp.arange(6.0).reshape(2, 3)
  assert a.tobytes() == np.arange(6.0).reshape(2, 3).tobytes()
  assert a.tobytes("F") == np.arange(6.0).reshape(2, 3).tobytes("F")
  with pytest.raises(ValueError, match="Unable to avoid copy"):
    np.array(a, dtype=np.int32, copy=False)
  assert np.asarray(a, dtype=np.int32).dtype == np.int32
  dev = a.__dlpack_device__()
  assert dev == (1, 0) and type(dev[0]).__name__ == "DLDeviceType" and dev[0].name == "kDLCPU"
  for c in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
    assert c is not a and type(c) is Array
    check(c, np.arange(6.0).reshape(2, 3))
  # copies are new buffers that outlive the original's delete(), as JAX's
  # (lax_numpy_test testArrayCopy); asarray is a view of it
  copies = [copy.copy(a), copy.deepcopy(a)]
  view = jnp.asarray(a)
  assert view.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
  assert all(c.unsafe_buffer_pointer() != a.unsafe_buffer_pointer() for c in copies)
  assert copy.copy(jnp.asarray(2.0)).weak_type
  a.delete()
  assert view.is_deleted() and not any(c.is_deleted() for c in copies)
  check(copies[0], np.arange(6.0).reshape(2, 3))


def test_deleted_array_internals_as_jax():
  # JAX's ArrayImpl: _npy_value (the cached host value), _check_if_deleted, _arrays, as
  # array_test test_array_delete / test_device_put_array_delete read them
  a = nbjax.device_put(np.array([1, 2, 3], np.int32), nbjax.devices()[0])
  np.testing.assert_array_equal(a._npy_value, [1, 2, 3])
  a._check_if_deleted()
  assert len(a._arrays) == 1 and a._arrays[0]._committed
  fs = a._fully_replicated_shard()
  assert fs.sharding.num_devices == 1 and fs._committed
  a.delete()
  with pytest.raises(RuntimeError, match=r"^Array has been deleted with shape=int32\[3\]\.$"):
    a._check_if_deleted()
  assert a._npy_value is None and a._arrays is None


def test_comparisons_with_containers_raise_as_jax():
  x = jnp.arange(3.0)
  with pytest.raises(TypeError, match=r"^unsupported operand type\(s\) for ==: 'ArrayImpl' and "
                                      r"'list'$"):
    x == [0, 1, 2]  # noqa: B015
  with pytest.raises(TypeError, match=r"for ==: 'ArrayImpl' and 'tuple'$"):
    x != (0, 1, 2)  # noqa: B015  (JAX's message names == here too)
  with pytest.raises(TypeError, match=r"for \+: 'ArrayImpl' and 'list'$"):
    x + [1]
  with pytest.raises(TypeError, match=r"for \*: 'tuple' and 'ArrayImpl'$"):
    (1,) * jnp.arange(2)
  assert (x == None) is False and (x != None) is True  # noqa: E711
  p = __import__("collections").namedtuple("P", "a b c")(0.0, 1.0, 5.0)
  assert (x == p) is False  # a namedtuple is no plain tuple: Python's identity comparison


def test_contains_is_jaxs():
  assert 2 in jnp.arange(3) and 5 not in jnp.arange(3)
  with pytest.raises(ValueError, match=r"^Array.__contains__: search array must be "
                                       r"one-dimensional, got arr.shape=\(2, 3\).$"):
    1 in jnp.ones((2, 3))  # noqa: B015
  with pytest.raises(ValueError, match=r"query value must be a scalar, got "
                                       r"query.shape=\(2,\)"):
    jnp.arange(2) in jnp.arange(3)  # noqa: B015
  with pytest.raises(TypeError, match=r"unsupported operand type <class 'NoneType'>"):
    None in jnp.arange(3)  # noqa: B015


def test_astype_is_jaxs():
  check(jnp.arange(3).astype(None), np.arange(3.0))
  nbjax.config.update("enable_x64", False)
  try:
    check(jnp.arange(3).astype(None), np.arange(3, dtype=np.float32))
  finally:
    nbjax.config.update("enable_x64", True)
  a = jnp.arange(3.0)
  assert a.astype(a.dtype) is a and a.astype(a.dtype, copy=True) is not a
  check(jnp.array([0j, 1j, 2.0]).astype(bool), np.array([False, True, True]))
  with pytest.warns(DeprecationWarning, match="Casting from complex to real"):
    check(jnp.array([1 + 2j]).astype(jnp.float32), np.array([1.0], np.float32))
  with pytest.raises(TypeError, match=r"^JAX only supports number, bool, and string dtypes, "
                                      r"got dtype <class 'object'> in astype$"):
    a.astype(object)
  with pytest.raises(ValueError, match="Passing an array as a dtype argument"):
    a.astype(a)
  with pytest.raises(TypeError, match="astype requires ndarray or scalar arguments"):
    jnp.astype([1, 2], float)
  check(nbjax.jit(lambda v: v.astype(bool))(jnp.array([0j, 1j])), np.array([False, True]))


def test_view_byteswap_and_other_methods():
  a = jnp.arange(6.0).reshape(2, 3)
  check(jnp.arange(4, dtype=jnp.int8).view(jnp.int16), np.array([256, 770], np.int16))
  check(jnp.array([1, 0, 1], jnp.int8).view(jnp.bool_), np.array([True, False, True]))
  check(jnp.array(2.0).view(jnp.int64), np.array(4611686018427387904))
  check(jnp.array([1 + 2j, 3 - 4j]).view(jnp.float64), np.array([1.0, 2.0, 3.0, -4.0]))
  check(jnp.array([1.0, 2.0, 3.0, -4.0]).view(jnp.complex128), np.array([1 + 2j, 3 - 4j]))
  check(nbjax.jit(lambda v: v.view(jnp.int32))(a), np.arange(6.0).reshape(2, 3).view(np.int32))
  assert a.view() is a
  # sub-byte integers count their bits (jnp.int4 is 4 bits wide, not its 1-byte numpy storage)
  check(jnp.arange(4, dtype=jnp.uint8).view(jnp.int4),
        np.array([0, 0, 1, 0, 2, 0, 3, 0], jnp.int4))
  check(jnp.array([1, -2, 3, -8, 7, 0, 5, 6], jnp.int4).view(jnp.uint16),
        np.array([33761, 25863], np.uint16))
  check(jnp.array([1, -2, 3, -8], jnp.int4).view(jnp.uint4), np.array([1, 14, 3, 8], jnp.uint4))
  with pytest.raises(ValueError, match="view\\(\\) of a 0d array is only supported if the "
                                       "itemsize is unchanged."):
    jnp.array(2.0).view(jnp.int32)
  with pytest.raises(ValueError, match="When changing to a larger dtype, its size must be a "
                                       "divisor of the total size in bytes of the last axis"):
    jnp.arange(3, dtype=jnp.int8).view(jnp.int16)
  check(jnp.arange(3, dtype=jnp.int32).byteswap(), np.array([0, 16777216, 33554432], np.int32))
  check(jnp.array([2, 0, 1]).choose([jnp.arange(3), 10 + jnp.arange(3), 20 + jnp.arange(3)]),
        np.array([20, 1, 12]))
  check(a.compress(jnp.array([False, True]), axis=0), np.array([[3.0, 4.0, 5.0]]))
  check(jnp.array([3, 1, 2, 0]).argpartition(2), np.array([3, 1, 2, 0], np.int32))
  with pytest.raises(NotImplementedError, match="JAX Arrays do not implement the arr.flat"):
    a.flat  # noqa: B018
  # JAX 0.10.2's sum method drops `initial` (jnp.sum honours it)
  assert float(a.sum(initial=10)) == 15.0 and float(jnp.sum(a, initial=10)) == 25.0
  with pytest.raises(TypeError, match="unexpected keyword argument 'a_min'"):
    a.clip(a_min=1)
  with pytest.raises(TypeError, match="unexpected keyword argument 'shape'"):
    a.reshape(shape=(6,))
  with pytest.raises(ValueError, match=r"Use jnp.atleast_1d\(scalar\).nonzero\(\) instead."):
    jnp.array(3).nonzero()
  assert a.platform() == "cpu" and not a.is_deleted() and a.is_ready()
  assert a.on_device_size_in_bytes() == 48 and a.copy_to_host_async() is None
  assert a.unsafe_buffer_pointer() == np.asarray(a).ctypes.data
  with pytest.raises(AttributeError, match=r"^arr.device_buffer has been deprecated. Use "
                                           r"arr.addressable_data\(0\)$"):
    a.device_buffer  # noqa: B018
  with pytest.raises(Exception, match="The tobytes\\(\\) method was called on traced array "
                                      "with shape float64\\[2,3\\]"):
    nbjax.jit(lambda v: v.tobytes())(a)


def test_pickle_tracer_and_jitted_function_as_jax():
  # JAX's pickle_test: pickling a tracer is a ConcretizationTypeError; a jitted function
  # pickles (cloudpickle) as its function and jit's options
  import pickle
  cloudpickle = pytest.importorskip("cloudpickle")
  with pytest.raises(nbjax.errors.ConcretizationTypeError, match="__reduce__ method"):
    nbjax.jit(pickle.dumps)(0)

  @nbjax.jit
  def f(x, y):
    return x * y

  g = nbjax.jit(lambda z, k: f(z, z + 77) + k, static_argnums=1)
  h = pickle.loads(cloudpickle.dumps(g))
  assert type(h) is type(g) and h is not g
  assert int(h(32, 1)) == 32 * 109 + 1 == int(g(32, 1))
  assert h._static_argnums == (1,)


def _aligned(arr, alignment):
  """A copy of ``arr`` whose data starts exactly ``alignment`` bytes past a 128-byte
  boundary (``alignment`` 64: aligned for XLA's CPU buffers)."""
  buf = np.empty(arr.nbytes + 256, np.int8)
  start = (-buf.ctypes.data) % 128 + alignment
  out = buf[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
  out[...] = arr
  return out


def test_from_dlpack_copy_and_device_as_jax():
  """jnp.from_dlpack's copy=False as JAX's: a buffer not aligned to 64 bytes is JAX's
  ValueError, an aligned one is shared (array_interoperability_test testNumpyToJax); a
  non-CUDA array has no __cuda_array_interface__ (JAX's AttributeError)."""
  x = np.arange(6, dtype=np.float32)
  with pytest.raises(ValueError, match="Specified input which requires a copy since the "
                     "source data buffer is not aligned to 64 bytes.  However copy=False"):
    jnp.from_dlpack(_aligned(x, 2), copy=False)
  for copy in (None, True):
    check(jnp.from_dlpack(_aligned(x, 2), copy=copy, device=nbjax.devices()[0]), x)
  shared = _aligned(x, 64)
  y = jnp.from_dlpack(shared, copy=False)
  check(y, x)
  assert np.shares_memory(np.asarray(y), shared)
  z = jnp.from_dlpack(shared)  # copy=None: nbjax owns a copy
  assert not np.shares_memory(np.asarray(z), shared)
  with pytest.raises(TypeError, match="must have __dlpack__ and __dlpack_device__"):
    jnp.from_dlpack([1, 2])
  a = jnp.arange(5)
  assert not hasattr(a, "__cuda_array_interface__")
  with pytest.raises(AttributeError, match="^__cuda_array_interface__ is only defined for GPU "
                     "buffers.$"):
    a.__cuda_array_interface__


def test_committed_as_jax():
  """An array is committed to its device when device_put places it there explicitly, as
  JAX's (array_test test_device_put, test_jnp_array, test_array_shards_committed,
  test_sds_like); the input of device_put stays uncommitted."""
  from nbjax.sharding import SingleDeviceSharding
  dev = nbjax.devices()[0]
  x = jnp.array([1, 2, 3])
  assert not x.committed and not x._committed and not nbjax.device_put(x).committed
  for spec in (dev, SingleDeviceSharding(dev), {"a": dev}):
    y = nbjax.device_put({"a": x} if isinstance(spec, dict) else x, spec)
    y = y["a"] if isinstance(spec, dict) else y
    assert y.committed and y._committed and not x.committed
    assert y.sharding == SingleDeviceSharding(dev)
    assert [s.data._committed for s in y.addressable_shards] == [True]
    check(y, x)
  assert [s.data._committed for s in x.addressable_shards] == [False]
  assert nbjax.device_put(np.arange(3), dev)._committed
  assert nbjax.ShapeDtypeStruct.like(jnp.array(1.)).sharding is None
  sds = nbjax.ShapeDtypeStruct.like(nbjax.device_put(x, dev))
  assert sds.sharding == SingleDeviceSharding(dev) and sds.shape == (3,)
  assert nbjax.ShapeDtypeStruct.like(np.array(1.)).sharding is None


def test_full_like_of_a_committed_array_is_committed_as_jax():
  """lax.full_like (and jnp's zeros_like/ones_like/full_like over it) of an array committed to
  a device, the default one included, is committed with its sharding (lax_numpy_test
  test_full_like_committed); of an uncommitted one, uncommitted."""
  x = jnp.array((1, 2, 3), dtype=np.int32)
  assert not lax.full_like(x, 1.1)._committed and not jnp.zeros_like(x)._committed
  x = nbjax.device_put(x, nbjax.devices()[-1])
  for y in (lax.full_like(x, 1.1), jnp.zeros_like(x), jnp.ones_like(x), jnp.full_like(x, 2),
            jnp.zeros_like(x, dtype=float)):
    assert y._committed and y.sharding == x.sharding
  np.testing.assert_array_equal(lax.full_like(x, 1.1), [1, 1, 1])


def test_implicit_dtype_conversion_is_deprecated_as_jax():
  """np.dtype(arr) (NumPy's __numpy_dtype__ protocol) warns as JAX's (array_test
  test_deprecated_dtype_conversion); arr.dtype is the way."""
  x = jnp.arange(4, dtype=jnp.int32)
  with pytest.warns(DeprecationWarning, match="Implicit conversion of an array to a dtype is "
                    "deprecated; rather than dtype=arr use dtype=arr.dtype"):
    assert np.dtype(x) == np.int32
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    assert np.asarray(x).dtype == np.int32 and jnp.zeros(2, x.dtype).dtype == np.int32


def test_array_takes_attributes():
  # garbage_collection_guard_test builds cycles through attributes (n1.next = n2): jax.Array
  # objects have a __dict__; copies and pickles do not carry it (as JAX 0.10.2's)
  import copy
  import pickle
  x = jnp.ones(2)
  x.foo = 3
  assert x.foo == 3 and vars(x) == {"foo": 3}
  assert not hasattr(copy.copy(x), "foo") and not hasattr(pickle.loads(pickle.dumps(x)), "foo")


def test_buffer_protocol_as_jax():
  # memoryview(x) exports a read-only view (JAX's buffer protocol); the view outlives delete()
  a = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
  m = memoryview(a)
  assert m.readonly and m.shape == (2, 3) and m.strides == (12, 4) and m.format == "f"
  assert m.tobytes() == np.arange(6.0, dtype=np.float32).tobytes()
  assert bytes(jnp.array([0, 1], jnp.int8)) == b"\x00\x01"
  assert np.frombuffer(jnp.array([1.5], jnp.float64)).tolist() == [1.5]
  import ctypes
  with pytest.raises(TypeError, match="not writable"):
    ctypes.c_char.from_buffer(a)
  a.delete()
  assert m.tolist() == [[0, 1, 2], [3, 4, 5]]
  with pytest.raises(BufferError, match="^INVALID_ARGUMENT: Array is null$"):
    memoryview(a)
  # JAX's BufferError for the dtypes the buffer protocol lacks (XLA's type names)
  for dt, name in ((jnp.bfloat16, "BF16"), (jnp.float8_e4m3fn, "F8E4M3FN"), (jnp.int4, "S4"),
                   (jnp.uint4, "U4"), (jnp.float4_e2m1fn, "F4E2M1FN")):
    with pytest.raises(BufferError, match=f"^INVALID_ARGUMENT: Buffers of type {name} are not "
                       "supported by the Python buffer protocol.$"):
      memoryview(jnp.zeros(2, dt))
  b = np.asarray(jnp.ones(2, jnp.bfloat16))  # NumPy falls back to __array__
  assert b.dtype == jnp.bfloat16 and not b.flags.writeable
  with pytest.raises(ValueError):
    np.asarray(jnp.arange(3.0)).flags.writeable = True
