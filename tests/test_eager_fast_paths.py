"""The eager fast paths of jnp (basic indexing, reshape, creation, joins, transposes, casts,
where, at[].set/add with a basic index, matrix-vector products, keepdims reductions) give
what the traced path gives: the same values, shape, dtype and weak type as ``jit`` of the
same call, for strong and weak operands, and results that own or share only immutable memory."""
import warnings

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax

_R = np.random.default_rng(0)
_X = _R.standard_normal((4, 5)).astype(np.float32)
_V = _R.standard_normal(5).astype(np.float32)


def _strong():
  return jnp.asarray(_X)


def _weak():
  return lax.full((4, 5), 1.5, None) * lax.full((4, 5), 2.0, None)  # weak float


CASES = {
    "slice": lambda x: x[1:3],
    "slice_step": lambda x: x[::-2, 1::2],
    "none": lambda x: x[None, :, None],
    "ellipsis_int": lambda x: x[..., -1],
    "int_slice": lambda x: x[2, 1:4],
    "empty_slice": lambda x: x[3:1],
    "oob_slice": lambda x: x[2:100, -100:2],
    "reshape": lambda x: x.reshape(5, 4),
    "reshape_m1": lambda x: jnp.reshape(x, (-1,)),
    "T": lambda x: x.T,
    "astype_f16": lambda x: x.astype(jnp.float16),
    "astype_same": lambda x: x.astype(x.dtype),
    "astype_f64": lambda x: x.astype(np.float64),
    "concat0": lambda x: jnp.concatenate([x, x * 2]),
    "concat1": lambda x: jnp.concatenate((x, x), axis=-1),
    "stack": lambda x: jnp.stack([x, x + 1], axis=1),
    "where_scalar": lambda x: jnp.where(x > 1.6, x, 0.0),
    "where_arrays": lambda x: jnp.where(x > 1.6, x, -x),
    "at_set": lambda x: x.at[1].set(7.5),
    "at_add_neg": lambda x: x.at[-1].add(2),
    "at_set_oob": lambda x: x.at[9].set(1.0),
    "at_slice_set_row": lambda x: x.at[1:3].set(x[0]),
    "at_col_add": lambda x: x.at[:, -2].add(x[:, 0]),
    "at_step_set_scalar": lambda x: x.at[::-2, 1].set(3.5),
    "at_slice_add_int": lambda x: x.at[1:, ::2].add(2),
    "at_oob_set_row": lambda x: x.at[7].set(x[0]),
    "matvec": lambda x: x @ x[0],
    "vecmat": lambda x: x[:, 0] @ x,
    "vecvec": lambda x: x[0] @ x[1],
    "max_keepdims": lambda x: jnp.max(x, axis=1, keepdims=True, initial=-np.inf),
    "sum_keepdims": lambda x: jnp.sum(x, axis=0, keepdims=True),
    "mean_keepdims": lambda x: jnp.mean(x, keepdims=True),
    "softmax": lambda x: nbjax.nn.softmax(x),
    "stop_gradient": lambda x: lax.stop_gradient(x) * 1,
    "clip": lambda x: jnp.clip(x, -1.0, 1.5),
    "clip_int_bounds": lambda x: jnp.clip(x, -1, 2),
    "clip_reversed": lambda x: jnp.clip(x, 2.0, -1.0),
    "clip_one_bound": lambda x: jnp.clip(x, max=0.5),
}


@pytest.mark.parametrize("make", [_strong, _weak], ids=["strong", "weak"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_fast_path_is_jit(name, make):
  f, x = CASES[name], make()
  got, want = f(x), nbjax.jit(f)(x)
  assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [None, np.float32, jnp.int8, np.dtype("uint16"), jnp.bool_,
                                   jnp.complex64])
@pytest.mark.parametrize("shape", [3, (2, 0), (), (2, 3)])
def test_zeros_ones_as_jit(shape, dtype):
  for f in (jnp.zeros, jnp.ones):
    got, want = f(shape, dtype), nbjax.jit(lambda: f(shape, dtype))()
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("args", [(7,), (0,), (-3,), (2, 9), (2, 9, 3), (9, 2, -2), (5, 5)])
def test_arange_ints_as_jit(args):
  got, want = jnp.arange(*args), nbjax.jit(lambda: jnp.arange(*args))()
  assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
  np.testing.assert_array_equal(got, want)


def test_fast_paths_keep_jax_errors():
  x = jnp.asarray(_X)
  with pytest.raises(TypeError, match="cannot reshape array of shape"):
    x.reshape(3, 3)
  with pytest.raises(TypeError, match="Cannot concatenate arrays with shapes that differ"):
    jnp.concatenate([x, x[:, :2]])
  with pytest.raises(ValueError, match="All input arrays must have the same shape"):
    jnp.stack([x, x[:2]])
  with pytest.raises(IndexError, match="Too many indices"):
    x[1, 2, 3]
  with pytest.raises(TypeError, match="dot_general requires contracting dimensions"):
    x @ jnp.ones(4, np.float32)
  # JAX clamps a static out-of-bounds integer index (NumPy raises)
  np.testing.assert_array_equal(x[9, 1:3], _X[3, 1:3])


def test_fast_paths_never_expose_or_keep_caller_memory():
  v = _X.copy()
  x = jnp.asarray(v)
  outs = [x[1:3], x.reshape(20), x.T, x.astype(np.float32), x.at[0].set(1.0), x[None]]
  v[:] = 0  # the caller's array changes; nothing made from it may
  np.testing.assert_array_equal(outs[0], _X[1:3])
  np.testing.assert_array_equal(outs[1], _X.reshape(20))
  np.testing.assert_array_equal(outs[2], _X.T)
  np.testing.assert_array_equal(outs[4][1:], _X[1:])
  for o in (x[1:3], x[2], x.at[0].set(1.0), jnp.concatenate([x, x]), x.T):
    assert not np.shares_memory(np.asarray(o), np.asarray(x))  # copies, as JAX's ops
  with pytest.raises(ValueError):  # results are read-only, as every nbjax array
    np.asarray(x.reshape(20))[0] = 1


@pytest.mark.parametrize("args,kw", [((1, 5), {}), ((1, 5, 2), {}), ((1.0, 5, 0.5), dict(dtype=jnp.float16)),
                                     ((3.5,), {}), ((2.5, 7), {}), ((5, 1, -1.5), {})])
def test_arange_stages_jax_construction(args, kw):
  # JAX 0.10.2 builds arange from iota (times step, plus start, in float32 below 32 bits):
  # its jaxpr (lax_numpy_test testArangeJaxpr*) and its rounding
  jaxpr = nbjax.make_jaxpr(lambda: jnp.arange(*args, **kw))()
  prims = [e.primitive.name for e in jaxpr.jaxpr.eqns]
  want = {(1, 5): ["iota", "add"], (1, 5, 2): ["iota", "mul", "add"],
          (1.0, 5, 0.5): ["iota", "mul", "add", "convert_element_type"], (3.5,): ["iota"],
          (2.5, 7): ["iota", "add"], (5, 1, -1.5): ["iota", "mul", "add"]}[args]
  assert prims == want
  np.testing.assert_array_equal(jnp.arange(*args, **kw), nbjax.jit(lambda: jnp.arange(*args, **kw))())


def test_array_copies_as_jax():
  # jnp.array / jnp.copy of an array stage JAX's copy (a new buffer); asarray does not
  x = jnp.ones(3)
  assert [e.primitive.name for e in nbjax.make_jaxpr(lambda x: jnp.array(x))(x).jaxpr.eqns] == ["copy"]
  assert [e.primitive.name for e in nbjax.make_jaxpr(jnp.copy)(x).jaxpr.eqns] == ["copy"]
  assert not nbjax.make_jaxpr(jnp.asarray)(x).jaxpr.eqns
  assert jnp.asarray(x) is x and jnp.array(x) is not x
  assert jnp.array(x).unsafe_buffer_pointer() != x.unsafe_buffer_pointer()
  y, ydot = nbjax.jvp(jnp.array, (x,), (x,))
  assert y is not x and ydot is not x


@pytest.mark.parametrize("fn", [jnp.inner, jnp.matmul, jnp.dot, jnp.vdot, jnp.vecdot,
                                lambda a, b: jnp.tensordot(a, b, 0), lambda a, b: a @ b])
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_products_carry_preferred_element_type(fn, dtype):
  # JAX's jnp products always name the accumulation dtype in their dot_general (lax_numpy_test
  # testPreferredElementType), and weak operands keep a weak result
  x = np.ones(2, dtype)
  eqns = [e for e in nbjax.make_jaxpr(fn)(x, x).jaxpr.eqns if e.primitive.name == "dot_general"]
  assert eqns and all(e.params["preferred_element_type"] == np.dtype(dtype) for e in eqns)
  w = lax.full((2,), 1.0, None)
  assert fn(w, w).weak_type


@pytest.mark.parametrize("sa,sb", [((1, 5, 4), (1, 4, 3)), ((2, 1, 5, 4), (1, 1, 4, 3)),
                                   ((1, 2, 5, 4), (3, 1, 4, 3)), ((1, 5, 4), (4,)), ((4,), (1, 4, 3))])
def test_matmul_squeezes_size1_batch_axes_of_both(sa, sb):
  # JAX squeezes a batch axis of size 1 in both operands and restores it in the result
  # (lax_numpy_test testMatmulBothSize1BatchDimsSqueezedJaxpr)
  a, b = _R.standard_normal(sa), _R.standard_normal(sb)
  np.testing.assert_allclose(jnp.matmul(a, b), np.matmul(a, b), rtol=1e-12)
  np.testing.assert_allclose(nbjax.jit(jnp.matmul)(a, b), np.matmul(a, b), rtol=1e-12)
  if (sa, sb) == ((1, 5, 4), (1, 4, 3)):
    [dot] = [e for e in nbjax.make_jaxpr(jnp.matmul)(a, b).jaxpr.eqns
             if e.primitive.name == "dot_general"]
    assert [v.aval.shape for v in dot.invars] == [(5, 4), (4, 3)]


def test_split_traced_sizes_raise_concretization_error():
  # JAX lax_numpy_test testSplitTypeError
  for f in (lambda i: jnp.split(jnp.zeros((12, 2)), i), lambda i: jnp.split(jnp.zeros((12, 2)), [2, i])):
    with pytest.raises(nbjax.errors.ConcretizationTypeError,
                       match="Abstract tracer value encountered where concrete value is expected"):
      nbjax.jit(f)(2.)
  assert len(jnp.split(jnp.zeros(3), jnp.array([1, 2]))) == 3


def test_eval_shape_takes_avals_and_shape_dtype_objects():
  # JAX's eval_shape abstracts any object with a shape and a dtype, avals included
  # (lax_numpy_test testSearchsortedDtype: int64 indices past 2**31 - 1 elements)
  from nbjax import core
  v = core.ShapedArray((), np.float32)
  small = core.ShapedArray((np.iinfo(np.int32).max,), np.float32)
  big = core.ShapedArray((np.iinfo(np.int32).max + 1,), np.float32)
  assert nbjax.eval_shape(jnp.searchsorted, small, v).dtype == np.int32
  assert nbjax.eval_shape(jnp.searchsorted, big, v).dtype == np.int64

  class S:
    shape, dtype = (3, 2), np.float32
  assert nbjax.eval_shape(jnp.sin, S()).shape == (3, 2)
  with pytest.raises(TypeError):
    nbjax.jit(jnp.sin)(S())


def test_eval_shape_uses_jits_trace_cache():
  # JAX's eval_shape is jit(fun).trace(...).out_info: a second call with the same argument
  # types does not trace again, and a weakly typed scalar stays weak (api_test
  # test_eval_shape_weak_type)
  n = []

  def f(x):
    n.append(1)
    return jnp.array(x)

  a, b = nbjax.eval_shape(f, 1), nbjax.eval_shape(f, 1)
  assert len(n) == 1 and a == b and a.weak_type
  nbjax.eval_shape(f, 1.0)
  assert len(n) == 2

  class Unhashable:
    __hash__ = None

    def __call__(self, x):
      return x * 2

  assert nbjax.eval_shape(Unhashable(), np.ones(3, np.float32)).shape == (3,)


def test_array_constructor_as_jax():
  # JAX lax_numpy_test testArrayPositionalDeprecation, testArrayFromMasked,
  # testArrayUnsupportedDtypeError, testJaxArrayOps
  x = jnp.array([1, 2, 3])
  with pytest.warns(DeprecationWarning, match="Passing the copy, order, and ndmin arguments"):
    assert jnp.array(x, None, False) is x
  with pytest.warns(DeprecationWarning, match="Passing the copy, order, and ndmin arguments"):
    assert jnp.array(x, None, True) is not x
  with pytest.raises(TypeError, match="got multiple values for argument 'copy'"):
    jnp.array(x, None, True, copy=False)
  m = np.ma.array([1, 2], mask=[True, False])
  np.testing.assert_array_equal(jnp.array(m), [1, 2])  # the mask is stripped, as NumPy's
  with pytest.raises(ValueError, match="numpy masked arrays are not supported"):
    nbjax.jit(jnp.asarray)(m)
  with pytest.raises(TypeError, match="JAX only supports number, bool, and string dtypes"):
    jnp.array(3, [("a", "<i4"), ("b", "<i4")])

  class ArrayLike:
    def __jax_array__(self):
      return jnp.array(3.)
  np.testing.assert_array_equal(ArrayLike() * jnp.arange(4.), 3. * np.arange(4.))
  np.testing.assert_array_equal(jnp.arange(4.) - ArrayLike(), np.arange(4.) - 3.)


def test_split_takes_concrete_tracers_as_jax():
  # JAX lax_numpy_test testSplitTypeError: a concrete (jvp) float index counts as its int
  f = lambda i: jnp.split(jnp.zeros((12, 2)), i)
  assert len(nbjax.jvp(f, (2.,), (1.,))[0]) == 2
  g = lambda i: jnp.split(jnp.zeros((12, 2)), (1, i.astype(np.int32)))
  assert len(nbjax.jvp(g, (2.,), (1.,))[0]) == 3
  with pytest.raises(TypeError):
    jnp.split(jnp.zeros(4), 2.)


_MEMO_FNS = ["sum", "prod", "max", "min", "argmax", "argmin", "cumsum", "cumprod"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("axis", [None, 0, -1, (1,)])
@pytest.mark.parametrize("name", _MEMO_FNS)
def test_memoised_reductions_as_first_call_and_jit(name, axis, dtype):
  """A repeated eager reduction runs the kernel its first call ran (``_memo_run``): same
  value, dtype and weak type as the first call and as jit; a fresh buffer every call."""
  from nbjax.numpy import _util
  if name.startswith(("cum", "arg")) and type(axis) is tuple:
    pytest.skip("scans and arg-reductions take one int axis")
  f = getattr(jnp, name)
  x = jnp.asarray((_X * 3).astype(dtype))
  want = nbjax.jit(lambda x: f(x, axis=axis))(x)
  first = f(x, axis=axis)
  hit = _util.memo_run(name, x, axis)
  if (np.dtype(dtype).kind == "f" or name.startswith("arg")) and (
      axis is not None or name in ("sum", "prod", "max", "min")) and not _placing():
    assert hit is not None  # the memo serves the repeated call (the reason it exists)
  for got in (first, f(x, axis=axis), f(x, axis)):
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert not np.shares_memory(got._value, x._value)
  assert f(x, axis=axis)._value is not f(x, axis=axis)._value


def _placing():
  # once a process has committed an array to a device, every eager entry is the placing
  # wrapper (core.enable_placement), which the memo leaves alone: no hits to expect
  return bool(nbjax.core.placement[0])


def test_memoised_reductions_follow_the_registry_and_traces():
  from nbjax import registry
  from nbjax.numpy import _util
  x = jnp.asarray(_X)
  jnp.sum(x, axis=1)
  assert _placing() or _util.memo_run("sum", x, 1) is not None
  registry.set_eager_backend("reduce_sum", "xla")  # a new eager entry: the memo steps aside
  try:
    assert _util.memo_run("sum", x, 1) is None
    np.testing.assert_allclose(np.asarray(jnp.sum(x, axis=1)), _X.sum(1), rtol=1e-6)
  finally:
    registry.set_eager_backend("reduce_sum", None)
  # traced and weak operands take the general path
  g = nbjax.grad(lambda v: jnp.sum(v, axis=1).sum())(x)
  np.testing.assert_array_equal(np.asarray(g), np.ones_like(_X))
  w = _weak()
  jnp.sum(w, axis=1)
  assert jnp.sum(w, axis=1).weak_type == nbjax.jit(lambda v: jnp.sum(v, axis=1))(w).weak_type
  assert _util.memo_run("sum", w, 1) is None


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("stable", [True, False])
def test_memoised_sort_as_first_call(dtype, stable):
  from nbjax.numpy import _util
  x = jnp.asarray(np.array([[3, -0.0, 1, 0.0, 2], [5, 4, np.nan, 4, -1]], np.float32).astype(
      dtype) if dtype == np.float32 else (_X * 10).astype(dtype))
  for axis in (0, 1, -1):
    want = nbjax.jit(lambda v: jnp.sort(v, axis=axis, stable=stable))(x)
    first = jnp.sort(x, axis=axis, stable=stable)
    assert _placing() or _util.memo_run("sort", x, (axis, stable)) is not None
    for got in (first, jnp.sort(x, axis=axis, stable=stable)):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
      np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(np.asarray(want)))
      assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
      assert not np.shares_memory(got._value, x._value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32, np.float16])
def test_matmul_eager_fast_path_as_jit(dtype):
  """x @ y of eager Arrays (the direct np.dot path for BLAS dtypes): values, dtype, weak type
  and errors as jit's, for every rank pair."""
  rng = np.random.default_rng(5)
  for sa, sb in [((3, 4), (4, 5)), ((3, 4), (4,)), ((4,), (4, 5)), ((4,), (4,)), ((2, 3, 4), (4,)),
                 ((4,), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((1, 4), (4, 1))]:
    a = jnp.asarray(rng.standard_normal(sa).astype(dtype))
    b = jnp.asarray(rng.standard_normal(sb).astype(dtype))
    got, want = a @ b, nbjax.jit(lambda a, b: a @ b)(a, b)
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-2 if dtype == np.float16 else 1e-5)
  s = jnp.asarray(np.array(2.0, np.float32))
  with pytest.raises(ValueError, match="matmul input operand 0 must have ndim at least 1"):
    s @ jnp.ones((2, 3, 4), np.float32)
  with pytest.raises(TypeError):
    jnp.ones((2, 3), np.float32) @ jnp.ones((4, 2), np.float32)
  w = _weak()
  assert (w @ w.T).weak_type == nbjax.jit(lambda v: v @ v.T)(w).weak_type


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32])
def test_vector_products_eager_as_jit(dtype):
  """jnp.dot / matmul / vdot / inner of eager vectors (np.dot, a NumPy scalar made a 0-d
  Array): shape (), dtype, weak type and value as jit's, for both operand orders of a
  matrix-vector pair too; vdot of complex vectors conjugates its first operand."""
  rng = np.random.default_rng(7)
  mk = lambda *s: jnp.asarray((rng.standard_normal(s) + (1j * rng.standard_normal(s)
                                                          if dtype == np.complex64 else 0)).astype(dtype))
  a, b, m = mk(50), mk(50), mk(3, 50)
  for f in (jnp.dot, jnp.matmul, jnp.vdot, jnp.inner, lambda x, y: x @ y):
    for x, y in ((a, b), (m, b)) if f is not jnp.vdot else ((a, b),):
      got, want = f(x, y), nbjax.jit(f)(x, y)
      assert type(got) is type(want) and isinstance(got._value, np.ndarray)
      assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
  w = _weak().reshape(-1)
  assert jnp.dot(w, w).weak_type and jnp.dot(w, w).shape == ()
  with pytest.raises(TypeError):
    jnp.dot(a, mk(49))


def test_shape_bare_kernels_as_jit():
  """transpose / rev / slice on their bare specialised kernels (the registry's hot path and
  eager programs): values as jit's, C-order buffers that never alias a live operand's
  elements in the wrong order, and repeated calls equal to the first."""
  x = jnp.asarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
  cases = [lambda v: lax.transpose(v, (2, 0, 1)), lambda v: jnp.transpose(v),
           lambda v: jnp.transpose(v, (1, 0, 2)), lambda v: lax.rev(v, (0, 2)),
           lambda v: lax.slice(v, (0, 1, 0), (2, 3, 4), (1, 1, 2)), lambda v: v[:, 1:]]
  for f in cases:
    want = np.asarray(nbjax.jit(f)(x))
    for _ in range(3):
      got = f(x)
      np.testing.assert_array_equal(np.asarray(got), want)
      assert got._value.flags.c_contiguous
  assert jnp.transpose(jnp.ones(3)).shape == (3,)


@pytest.mark.parametrize("n", [4095, 4096, 50000])
def test_where_arrays_as_jit_both_sides_of_the_kernel_switch(n):
  """jnp.where(c, x, y) of eager Arrays: np.where below _WHERE_KERNEL elements, select_n's
  branch-free kernel from there; the same values (NaN, -0.0), dtype and weak type as jit."""
  rng = np.random.default_rng(n)
  for dtype in (np.float32, np.float64, np.complex64):
    xv = rng.standard_normal(n).astype(dtype)
    xv[::7] = np.nan
    xv[1::7] = -0.0
    x, y = jnp.asarray(xv), jnp.asarray(rng.standard_normal(n).astype(dtype))
    c = jnp.asarray(rng.random(n) < 0.5)
    for a, b in ((x, y), (y, x)):
      got, want = jnp.where(c, a, b), nbjax.jit(jnp.where)(c, a, b)
      assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
      np.testing.assert_array_equal(np.signbit(np.asarray(got).real), np.signbit(np.asarray(want).real))
      assert not np.shares_memory(got._value, a._value)
    got = jnp.where(c, x, -0.0)
    np.testing.assert_array_equal(np.signbit(np.asarray(got).real),
                                  np.signbit(np.where(np.asarray(c), xv, -0.0).real))


def test_memo_keys_weak_types_config_and_argument_types():
  """The reductions/sort memo never serves a call the general path would answer otherwise:
  a weak operand's entry is not kept for strong ones, a config change (x64) starts over,
  and 1.0 / True are not the axis 1."""
  w = jnp.broadcast_to(2.0, (3,))
  assert w.weak_type
  jnp.sort(w), jnp.sort(w)
  s = jnp.asarray(np.array([3.0, 1.0, 2.0], np.float32))
  r = jnp.sort(s)
  assert not r.weak_type and not jnp.sort(s).weak_type
  x = jnp.asarray(_X)
  jnp.sum(x, axis=1), jnp.sum(x, axis=1)
  with pytest.raises(TypeError):
    jnp.sum(x, axis=1.0)
  want = np.dtype(np.int64) if nbjax.config.read("jax_enable_x64") else np.dtype(np.int32)
  flip = not nbjax.config.read("jax_enable_x64")
  jnp.argmax(x, axis=1), jnp.argmax(x, axis=1)
  with nbjax.enable_x64(flip):
    other = jnp.argmax(x, axis=1).dtype
  assert other != want and jnp.argmax(x, axis=1).dtype == want


@pytest.mark.parametrize("n", [7, 1024, 20000])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_one_element_operands_read_in_place_as_jit(name, n):
  """A binary op with a one-element operand (``x * 2.0``, ``maximum(x, 0.0)``; shapes ``()``,
  ``(1,)``, ``(1, 1)``, Python scalars) on either side, below and above the backend switch:
  the numba kernels read that operand in place; the values (signed zeros, NaN), dtype and
  weak type are jit's, and the result owns its memory."""
  rng = np.random.default_rng(n)
  xv = rng.standard_normal((2, n // 2 or 1)).astype(np.float32)
  xv.flat[::5] = np.nan
  xv.flat[1::5] = -0.0
  xv.flat[2::5] = 0.0
  x = jnp.asarray(xv)
  f = getattr(jnp, name)
  for s in (0.0, -0.0, 1.5):
    for c in (s, jnp.asarray(np.float32(s)), jnp.asarray(np.full((1,), s, np.float32)),
              jnp.asarray(np.full((1, 1), s, np.float32)), lax.full((), s, None)):
      for a, b in ((x, c), (c, x)):
        for _ in range(2):  # (the second call: the hot path of a seen signature)
          got, want = f(a, b), nbjax.jit(f)(a, b)
          assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
          g, w = np.asarray(got), np.asarray(want)  # (a NaN's sign is XLA's fusion's choice)
          np.testing.assert_array_equal(g, w)
          np.testing.assert_array_equal(np.signbit(g[g == g]), np.signbit(w[w == w]))
          assert not np.shares_memory(got._value, x._value)


@pytest.mark.parametrize("n", [5, 1024, 20000])
def test_clip_python_bounds_one_pass_as_jit(n):
  """jnp.clip of a float Array with Python bounds runs clamp's one-pass kernel eagerly: jit's
  values bit for bit (NaN, signed zeros, infinities, NaN or reversed bounds), dtype and weak
  type, for float32 and float64, below and above the backend switch."""
  rng = np.random.default_rng(n)
  for dtype in (np.float32, np.float64):
    xv = (rng.standard_normal(n) * 3).astype(dtype)
    xv[::6], xv[1::6], xv[2::6], xv[3::6] = np.nan, -0.0, 0.0, -np.inf
    for x in (jnp.asarray(xv), jnp.asarray(xv) * 1.0, lax.full((n,), -0.0, None)):
      for lo, hi in ((-1.0, 1.5), (0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (2, -1),
                     (float("nan"), 1.0), (-1.0, float("inf")), (1, 3)):
        got, want = jnp.clip(x, lo, hi), nbjax.jit(lambda v: jnp.clip(v, lo, hi))(x)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        g, w = np.asarray(got), np.asarray(want)
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g[g == g]), np.signbit(w[w == w]))


def test_all_one_element_operands_of_mixed_ranks_as_jit():
  """Operands that all hold one element but differ in rank (a (1, 1) array with 0-d bounds,
  float16 operands that the kernels widen, complex ones that run numba's kernels at every
  size): the output takes the largest rank, as jit's."""
  for dt in (np.float32, np.float16, np.complex64):
    x = jnp.asarray(np.full((1, 1), -0.5, dt))
    lo, hi = jnp.asarray(np.array(0.0, dt)), jnp.asarray(np.array(2.0, dt))
    fs = [lambda a, b, c: jnp.where(a.real > 0, b, c), lambda a, b, c: a * b + c / a]
    if dt != np.complex64:
      fs += [lambda a, b, c: lax.clamp(b, a, c), lambda a, b, c: jnp.clip(a, b, c)]
    for f in fs:
      for _ in range(2):
        got, want = f(x, lo, hi), nbjax.jit(f)(x, lo, hi)
        assert (got.shape, got.dtype) == (want.shape, want.dtype)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.bool_, np.int8, np.complex64,
                                   np.complex128])
def test_vector_point_gather_as_jit(dtype):
  """x[i] of a vector by an integer index vector (the planned one-call path from the second
  call of a dtype pair): negative indices from the end, out-of-range ones clamped, jit's
  values and weak type, a result that owns its memory."""
  xv = (np.arange(12) - 5).astype(dtype)
  for idt in (np.int32, np.int64, np.uint8):
    iv = np.array([0, 11, 3, 200, 7] + ([-1, -12, -300] if idt != np.uint8 else []), idt)
    x, i = jnp.asarray(xv), jnp.asarray(iv)
    for _ in range(3):
      got, want = x[i], nbjax.jit(lambda a, b: a[b])(x, i)
      assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
      assert not np.shares_memory(got._value, x._value)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16, np.complex64])
def test_vector_point_scatter_as_jit(dtype):
  """x.at[i].<op>(y) of a vector by an integer index vector with y of x[i]'s shape (one
  planned kernel call from the second call): duplicates combined in index order, negative
  indices from the end, out-of-range updates dropped; jit's values, the input unchanged."""
  xv = (np.arange(12) % 5 - 2).astype(dtype)
  x = jnp.asarray(xv)
  for idt in (np.int32, np.int64):
    i = jnp.asarray(np.array([0, 11, 3, 3, 200, -1, -12, -300], idt))
    y = jnp.asarray((np.arange(8) - 3).astype(dtype))
    for op in ("set", "add", "mul", "min", "max"):
      if op in ("min", "max") and np.dtype(dtype).kind == "c":
        continue
      f = lambda a, b, c: getattr(a.at[b], op)(c)
      if op in ("add", "mul") and dtype == np.bool_:  # (JAX's error, eager and traced)
        for g in (f, nbjax.jit(f), f):
          with pytest.raises(TypeError, match=f"{op} does not accept dtype bool"):
            g(x, i, y)
        continue
      for _ in range(3):
        got, want = f(x, i, y), nbjax.jit(f)(x, i, y)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  np.testing.assert_array_equal(np.asarray(x), xv)


@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_same_shape_switch_to_numba_earlier_as_jit(name):
  """add/sub/mul of two operands of one shape run numba's kernel from 8192 elements (a 0-d
  operand keeps NumPy's loop up to ARITH's 16384; the registry's note says so): jit's values
  on both sides of each switch, int overflow wrapping, signed zeros and NaN kept."""
  p = getattr(lax, name + "_p")
  assert p.same_shape_min == 8192 and "8192 for two operands of one shape" in p.meta["note"]
  rng = np.random.default_rng(1)
  f = getattr(lax, name)
  for n in (8191, 8192, 12000, 16384):
    for dt in (np.float32, np.int32, np.complex64):
      xv = (rng.standard_normal(n) * 1e9).astype(dt)
      yv = (rng.standard_normal(n) * 1e9).astype(dt)
      if dt == np.float32:
        xv[:3], yv[:3] = [-0.0, np.nan, 0.0], [-0.0, 1.0, -0.0]
      x, y = jnp.asarray(xv), jnp.asarray(yv)
      for a, b in ((x, y), (x, jnp.asarray(yv[:1].reshape(())))):
        for _ in range(2):
          got, want = f(a, b), nbjax.jit(f)(a, b)
          g, w = np.asarray(got), np.asarray(want)
          np.testing.assert_array_equal(g, w)
          if dt == np.float32:
            np.testing.assert_array_equal(np.signbit(g[g == g]), np.signbit(w[w == w]))


@pytest.mark.parametrize("n", [1, 4, 1023])
def test_float16_signed_zeros_and_unbroadcast_division_as_jit(n):
  """float16 max/min/clip below the numba switch (NumPy's float16 loop keeps the first operand
  of a tie, unlike its float32 one) give jit's signed zeros; a real division whose divisor
  repeats no value ((1,) / ()) is exact, as XLA's, not a product with the reciprocal."""
  xv = np.resize(np.array([-0.0, 1.0, -1.0, 0.0], np.float16), n)
  x = jnp.asarray(xv)
  fs = [lambda v: jnp.maximum(v, 0.0), lambda v: jnp.minimum(v, -0.0),
        lambda v: jnp.maximum(0.0, v), lambda v: jnp.minimum(-0.0, v),
        lambda v: jnp.clip(v, 0.0, 2.0), lambda v: jnp.maximum(v, v[::-1]),
        lambda v: jnp.minimum(v[::-1], v)]
  for f in fs:
    got, want = np.asarray(f(x)), np.asarray(nbjax.jit(f)(x))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
  for dt in (np.float32, np.float16):
    y, d = jnp.asarray(np.array([3.0], dt)), jnp.asarray(np.array(7.0, dt))
    u = np.uint32 if dt == np.float32 else np.uint16
    np.testing.assert_array_equal(np.asarray(y / d).view(u),
                                  np.asarray(nbjax.jit(lambda a, b: a / b)(y, d)).view(u))


# ----------------------------------------------------------------- composites, replayed
_I = _R.integers(-50, 50, (4, 5))
_J = _R.integers(-4, 5, (4, 5))

COMPOSITES = {  # f(x, i, j): x float32 (4, 5), i/j int64 (4, 5) (j with zeros)
    "floordiv_scalar": lambda x, i, j: i // 3,
    "floordiv_neg_scalar": lambda x, i, j: i // -7,
    "mod_scalar": lambda x, i, j: i % 3,
    "mod_neg_scalar": lambda x, i, j: jnp.remainder(i, -4),
    "divmod_scalar": lambda x, i, j: divmod(i, 6),
    "floordiv_arrays": lambda x, i, j: i // j,
    "mod_arrays": lambda x, i, j: i % j,
    "floordiv_zero": lambda x, i, j: jnp.floor_divide(i, 0),
    "floordiv_i8_scalar": lambda x, i, j: i.astype(jnp.int8) // 5,
    "mod_u16_scalar": lambda x, i, j: (i.astype(jnp.uint16) % 7),
    "float_floordiv": lambda x, i, j: x // 0.3,
    "float_mod": lambda x, i, j: x % -0.7,
    "hypot": lambda x, i, j: jnp.hypot(x, x[0]),
    "copysign": lambda x, i, j: jnp.copysign(x, -x[:, :1]),
    "heaviside": lambda x, i, j: jnp.heaviside(x, 0.5),
    "logaddexp": lambda x, i, j: jnp.logaddexp(x, x.T.reshape(4, 5)),
    "sinc": lambda x, i, j: jnp.sinc(x),
    "nan_to_num": lambda x, i, j: jnp.nan_to_num(x / (x > 0)),
    "isclose": lambda x, i, j: jnp.isclose(x, x * 1.0000001),
    "allclose": lambda x, i, j: jnp.allclose(x, x + 1e-9),
    "roll": lambda x, i, j: jnp.roll(x, 3),
    "repeat": lambda x, i, j: jnp.repeat(x, 2, axis=1),
    "tile": lambda x, i, j: jnp.tile(x, (2, 1)),
    "diff": lambda x, i, j: jnp.diff(x, axis=0),
    "outer": lambda x, i, j: jnp.outer(x[0], x[1]),
    "cross": lambda x, i, j: jnp.cross(x[:, :3], x[:, 1:4]),
    "einsum": lambda x, i, j: jnp.einsum("ij,ij->i", x, x),
    "argsort": lambda x, i, j: jnp.argsort(x, axis=1),
    "median": lambda x, i, j: jnp.median(x, axis=0),
    "percentile": lambda x, i, j: jnp.percentile(x, 30.0),
    "nanmean": lambda x, i, j: jnp.nanmean(x / (x > 0)),
    "searchsorted": lambda x, i, j: jnp.searchsorted(jnp.sort(x[0]), x[1]),
    "histogram": lambda x, i, j: jnp.histogram(x, 4)[0],
    "power_int_array": lambda x, i, j: x ** jnp.abs(j),
    "int_power_int_array": lambda x, i, j: i ** jnp.abs(j),
    "any": lambda x, i, j: jnp.any(x > 1.0),
    "all_axis": lambda x, i, j: jnp.all(x > -3.0, axis=1),
    "bool_mask": lambda x, i, j: x[x > 0.2],
    "bool_mask_rows": lambda x, i, j: x[jnp.asarray([True, False, True, True])],
    "bincount_length": lambda x, i, j: jnp.bincount(j.ravel(), length=4),
    "bincount_minlength": lambda x, i, j: jnp.bincount(j.ravel(), minlength=9, length=9),
    "count_nonzero": lambda x, i, j: jnp.count_nonzero(x > 0),
    "count_nonzero_axis": lambda x, i, j: jnp.count_nonzero(j, axis=-1),
    "count_nonzero_nan": lambda x, i, j: jnp.count_nonzero(x / (x > 0), axis=0),
    "take": lambda x, i, j: jnp.take(x, j.ravel()),
    "take_clip_axis": lambda x, i, j: jnp.take(x, j[0], axis=1, mode="clip"),
    "unravel_index": lambda x, i, j: jnp.unravel_index(jnp.abs(i), (10, 10)),
    "partition": lambda x, i, j: jnp.partition(x, 2, axis=1),
    "argpartition": lambda x, i, j: jnp.argpartition(x[0], 3),
    "diag": lambda x, i, j: jnp.diag(x[0], 1),
    "vdot": lambda x, i, j: jnp.vdot(x, x),
    "signbit": lambda x, i, j: jnp.signbit(x),
    "isinf": lambda x, i, j: jnp.isinf(x / (x > 0)),
    "nanargmax": lambda x, i, j: jnp.nanargmax(x / (x > -0.5), axis=1),
    "inv": lambda x, i, j: jnp.linalg.inv(x[:, :4] + 4 * jnp.eye(4, dtype=x.dtype)),
    "solve": lambda x, i, j: jnp.linalg.solve(x[:, :4] + 4 * jnp.eye(4, dtype=x.dtype), x[:, 4]),
    "det": lambda x, i, j: jnp.linalg.det(x[:, :4]),
    "zeros_like": lambda x, i, j: jnp.zeros_like(x),
    "ones_like_dtype": lambda x, i, j: jnp.ones_like(i, dtype=jnp.float32),
}
_NOT_JITTABLE = {"bool_mask", "bool_mask_rows"}  # (a boolean mask's shape is its value's)


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_replay_as_per_call_and_jit(name):
  # eager calls run per call three times, then replay one staged program (``eager_cache.staged``)
  # or take a fast path: every call gives the first call's bits, and jit's shape, dtype, weak
  # type and values (to an ulp: XLA may contract a product and a sum into one FMA)
  f = COMPOSITES[name]
  x, i, j = jnp.asarray(_X), jnp.asarray(_I), jnp.asarray(_J)
  if name in _NOT_JITTABLE:  # NumPy's boolean indexing is JAX's concrete-mask gather
    want = [_X[_X > 0.2] if name == "bool_mask" else _X[np.array([True, False, True, True])]]
    avals = [(want[0].shape, want[0].dtype, False)]
  else:
    want = nbjax.tree_util.tree_leaves(nbjax.jit(f)(x, i, j))
    avals = [(w.shape, w.dtype, w.weak_type) for w in want]
  first = None
  for _ in range(6):  # (the STAGED_BUILD_ON-th call builds the replayed program)
    got = nbjax.tree_util.tree_leaves(f(x, i, j))
    assert [(g.shape, g.dtype, g.weak_type) for g in got] == avals
    first = first or [np.asarray(g) for g in got]
    for g, w, g0 in zip(got, want, first):
      np.testing.assert_array_equal(np.asarray(g), g0)
      np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-7, atol=0)
      assert not np.shares_memory(np.asarray(g), np.asarray(x))


def test_int_floor_divide_and_mod_by_python_ints_as_jit():
  # the eager shortcut (NumPy's floor division and modulo by a nonzero Python int) gives
  # XLA's composite's values on every integer dtype, at the extremes too (INT_MIN // -1 wraps)
  for d in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64):
    info = np.iinfo(d)
    v = np.array([info.min, info.min + 1, -7, -1, 0, 1, 6, 7, info.max], d) if info.min else \
        np.array([0, 1, 6, 7, info.max - 1, info.max], d)
    x = jnp.asarray(v)
    for s in (1, 2, 3, 7, 100, -1, -3) if info.min else (1, 2, 3, 7, 100):
      if not info.min <= s <= info.max:
        continue
      for f in (lambda a, s=s: a // s, lambda a, s=s: a % s, lambda a, s=s: divmod(a, s)[0]):
        np.testing.assert_array_equal(f(x), nbjax.jit(f)(x), err_msg=f"{d} {s}")
    # an Array divisor of the dtype and shape: NumPy's modulo (by zero: 0, as JAX's) and
    # floor division where no divisor is zero (JAX's x // 0 is not NumPy's)
    w = np.resize(np.array([-1, 3, 0, -3, 5, 2, -7] if info.min else [1, 3, 0, 5, 2, 7], d), v.shape)
    for ys in (w, np.where(w == 0, np.ones_like(w), w)):
      y = jnp.asarray(ys)
      for f in (lambda a, b: a // b, lambda a, b: a % b, lambda a, b: jnp.divmod(a, b)[1]):
        got, want = f(x, y), nbjax.jit(f)(x, y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"{d} {ys}")


def test_python_int_operands_overflow_as_jax():
  x, i = jnp.arange(3.0), jnp.arange(3)
  msg = "An overflow was encountered while parsing an argument to a jitted computation, " \
        "whose argument path is {}"
  for f, path in [(lambda: x + 2**70, "y"), (lambda: 2**64 + x, "x"), (lambda: x * 2**63, "y"),
                  (lambda: jnp.maximum(x, -2**63 - 1), "y"), (lambda: i + 2**63, "y"),
                  (lambda: jnp.arctan2(x, 2**70), "x2"), (lambda: jnp.clip(x, 0, 2**70), "max"),
                  (lambda: jnp.clip(x, -2**70), "min"), (lambda: x < 2**64, "y"),
                  (lambda: jnp.where(x > 1, x, 2**64), "y"),
                  (lambda: nbjax.jit(lambda a: a + 2**70)(x), "y")]:
    with pytest.raises(OverflowError, match=msg.format(path)):
      f()
  np.testing.assert_array_equal(x + (2**63 - 1), np.arange(3.0) + float(2**63 - 1))
  np.testing.assert_array_equal(x + (-2**63), np.arange(3.0) - float(2**63))
  with _x64_off():
    with pytest.raises(OverflowError, match=msg.format("y")):
      jnp.arange(3.0) + 2**31
    assert (jnp.arange(3.0) + (2**31 - 1)).dtype == np.float32


class _x64_off:
  def __enter__(self):
    nbjax.config.update("jax_enable_x64", False)

  def __exit__(self, *a):
    nbjax.config.update("jax_enable_x64", True)


def test_integer_pow_of_huge_exponents_as_jax():
  # past int64, x ** y depends on y's sign and parity (JAX computes it by squarings)
  i, x = jnp.arange(4), jnp.arange(4.0)
  odd = pow(3, 2**70 + 1, 2**64)  # (int64 wraparound: 3 ** y mod 2**64, as a signed value)
  for f, want in [(lambda a: a ** (2**70), [0, 1, 0, 1]),
                  (lambda a: a ** (2**70 + 1), [0, 1, 0, odd - 2**64 if odd >= 2**63 else odd])]:
    np.testing.assert_array_equal(f(i), want)
    np.testing.assert_array_equal(nbjax.jit(f)(i), want)
  for e, want in [(2**70, [0, 1, np.inf, np.inf]), (-2**70, [np.inf, 1, 0, 0]),
                  (2**70 + 1, [0, 1, np.inf, np.inf])]:
    np.testing.assert_array_equal(x ** e, want)
    np.testing.assert_array_equal(nbjax.jit(lambda a: a ** e)(x), want)
  np.testing.assert_array_equal((-x) ** (2**70 + 1), [-0.0, -1, -np.inf, -np.inf])


def test_creation_memo_returns_fresh_arrays_of_one_readonly_buffer():
  a, b = jnp.eye(4), jnp.eye(4)
  assert a is not b
  np.testing.assert_array_equal(a, np.eye(4))
  with pytest.raises(ValueError):
    np.asarray(b)[0, 0] = 5.0
  b.delete()
  np.testing.assert_array_equal(jnp.eye(4), np.eye(4))  # a deleted result leaves the memo
  np.testing.assert_array_equal(jnp.linspace(0, 25, 6), nbjax.jit(lambda: jnp.linspace(0, 25, 6))())
  for f, args in [(jnp.tri, (4,)), (jnp.identity, (3,)), (jnp.logspace, (0, 2, 5)),
                  (jnp.geomspace, (1, 8, 4))]:
    first, again = f(*args), f(*args)
    np.testing.assert_array_equal(first, again)
    assert first is not again and not again.weak_type
  lin, step = jnp.linspace(0, 1, 5, retstep=True)  # (tuples are not memoised)
  assert float(step) == 0.25
  assert jnp.linspace(-0.0, 1, 3, endpoint=False)[0] == 0  # (keyed by bits: -0.0 != 0.0)
  with _x64_off():
    assert jnp.eye(2).dtype == np.float32 and jnp.linspace(0, 1, 3).dtype == np.float32
  assert jnp.eye(2).dtype == np.float64 and jnp.linspace(0, 1, 3).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8,
                                   jnp.bfloat16, np.complex64])
def test_searchsorted_eager_as_jit(dtype):
  # a sorted real ``a`` takes NumPy's binary search (lax.sort's order); an unsorted one, or
  # one with NaNs, complex and bfloat16 take JAX's halving steps: every call is jit's
  r = np.random.default_rng(1)
  sorted_a = np.sort(r.integers(0, 40, 64)).astype(dtype)
  cases = [sorted_a, r.integers(0, 40, 64).astype(dtype)]
  if np.dtype(dtype).kind in "fc":
    cases.append(np.concatenate([sorted_a[:60], np.full(4, np.nan, dtype)]))
    cases.append(np.array([-0.0, 0.0, -0.0, 1.0], dtype))
  v = np.concatenate([r.integers(-3, 45, 20), [0]]).astype(dtype)
  if np.dtype(dtype).kind in "fc":
    v = np.concatenate([v, np.array([np.nan, -0.0], dtype)])
  for a in cases:
    for side in ("left", "right"):
      f = lambda a, v, side=side: jnp.searchsorted(a, v, side=side)
      want = nbjax.jit(f)(jnp.asarray(a), jnp.asarray(v))
      for _ in range(3):
        got = f(jnp.asarray(a), jnp.asarray(v))
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_power_one_half_as_c_pow(dtype):
  # NumPy computes x ** 0.5 (a constant exponent) as sqrt: -0.0 and NaN for -0.0 and -inf,
  # where C's pow, XLA's and JAX's give +0.0 and +inf
  x = jnp.asarray(np.array([-0.0, 0.0, -np.inf, np.inf, 2.0, 7.0, -1.0, 1e-4], dtype))
  want = nbjax.jit(lambda x: x ** 0.5)(x)
  for got in (x ** 0.5, jnp.power(x, 0.5), lax.pow(x, jnp.asarray(0.5, dtype))):
    np.testing.assert_array_equal(np.signbit(np.asarray(got))[:6], [False] * 6)
    np.testing.assert_array_equal(got, want)
  # an exponent constant along rows (NumPy's sqrt per row; its pow loop elsewhere, to an ulp)
  got = jnp.power(jnp.stack([x, x]), jnp.asarray([[0.5], [2.0]], dtype))
  np.testing.assert_array_equal(np.signbit(np.asarray(got[0]))[:6], [False] * 6)
  np.testing.assert_allclose(got, nbjax.jit(jnp.power)(jnp.stack([x, x]), jnp.asarray(
      [[0.5], [2.0]], dtype)), rtol=2e-7 if dtype != np.float16 else 1e-3)


@pytest.mark.parametrize("shape", [(40, 1, 10, 1), (20, 3, 3, 3), (16, 2, 5, 4), (15, 2, 5, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_batched_small_dots_as_jit(shape, dtype):
  # 16 batch items and more take NumPy's batched matmul on numba's path (fewer: a gemm per item)
  B, M, K, N = shape
  r = np.random.default_rng(2)
  a = (r.standard_normal((B, M, K)) + (1j * r.standard_normal((B, M, K)) if dtype == np.complex64 else 0)).astype(dtype)
  b = r.standard_normal((B, K, N)).astype(dtype)
  dn = (((2,), (1,)), ((0,), (0,)))
  got = lax.dot_general(jnp.asarray(a), jnp.asarray(b), dn)
  want = nbjax.jit(lambda a, b: lax.dot_general(a, b, dn))(jnp.asarray(a), jnp.asarray(b))
  assert got.dtype == want.dtype and got.shape == (B, M, N)
  tol = 1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 1e-12
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
  np.testing.assert_allclose(got, np.matmul(a, b), rtol=tol, atol=tol)
  v = jnp.asarray(a[:, 0, :])  # einsum's row-wise dot products
  np.testing.assert_allclose(jnp.einsum("ij,ij->i", v, v), np.einsum("ij,ij->i", a[:, 0], a[:, 0]),
                             rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, jnp.bfloat16])
def test_float_bit_tests_as_jit(dtype):
  # eagerly, isinf and signbit of a NumPy float take NumPy's ufunc (bfloat16: the composite)
  x = jnp.asarray(np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -np.nan, 1.0, -2.0], dtype))
  for f in (jnp.isinf, jnp.signbit):
    for _ in range(5):
      got, want = f(x), nbjax.jit(f)(x)
      assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type) == (np.bool_, False)
      np.testing.assert_array_equal(got, want)


def test_review_edge_cases_of_the_numpy_routes():
  # bincount sizes its bins by ``length``, not by the largest value (NumPy's own would
  # allocate max(x) + 1 bins)
  np.testing.assert_array_equal(jnp.bincount(jnp.array([1, 10**15]), length=3), [0, 1, 0])
  np.testing.assert_array_equal(jnp.bincount(jnp.array([-3, 0, 1, 1, 5])), [2, 2, 0, 0, 0, 1])
  with pytest.raises(TypeError, match="must have every element be nonnegative"):
    jnp.bincount(jnp.array([1]), length=-1)
  d = jnp.array([1, 2, 3])  # *_like of a deleted array: its shape and dtype, as JAX's
  d.delete()
  np.testing.assert_array_equal(jnp.zeros_like(d), [0, 0, 0])
  np.testing.assert_array_equal(jnp.ones_like(d), [1, 1, 1])
  with _x64_off():  # a weak int fill past int32 wraps, as jit's (JAX's convert_element_type)
    for v in (2**40, 2**31, -2**31 - 1):
      got, want = jnp.full((2,), v), nbjax.jit(lambda v=v: jnp.full((2,), v))()
      assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
      np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_jit_integer_division_by_a_constant_zero(dtype):
  # a closed-over dividend and a zero divisor are both constants: XLA's constant folding
  # used to divide by zero (SIGFPE, the process died); XLA's results are all ones / x
  x = jnp.asarray(np.array([3, 5, 0], dtype))
  z = jnp.asarray(np.array([0, 2, 0], dtype))
  f = lambda: (lax.div(x, z), lax.rem(x, z))
  for got, want in zip(nbjax.jit(f)(), f()):
    np.testing.assert_array_equal(got, want)
  ones = np.array(-1).astype(dtype)
  np.testing.assert_array_equal(nbjax.jit(f)()[0], [ones, 2, ones])
  np.testing.assert_array_equal(nbjax.jit(f)()[1], [3, 1, 0])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, jnp.bfloat16, np.float32,
                                   np.int64, np.complex64, np.complex128])
def test_tril_triu_kernel_as_jit(dtype):
  # eagerly, tril/triu with a Python int k run one pass of kernels.shape.tri_select
  rng = np.random.default_rng(0)
  for shape in [(3, 5), (2, 5, 3), (3, 0), (2, 0, 3, 3)]:
    a = (rng.standard_normal(shape) * 3 + 1j * rng.standard_normal(shape)).astype(dtype) \
        if np.dtype(dtype).kind == "c" else (rng.standard_normal(shape) * 3).astype(dtype)
    for x in (jnp.asarray(a), jnp.asarray(a).mT):
      for k in (-(1 << 31) + 1, -4, -1, 0, 2, (1 << 31) - 1):
        for f in (jnp.tril, jnp.triu):  # (vs the composite it bypasses, and jit once)
          got = f(x, k)
          want = f.__wrapped__(x, k) if k else nbjax.jit(f, static_argnums=1)(x, k)
          assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
          np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  w = jnp.full((3, 3), 2.0)  # a weak operand keeps its weak type, as under jit
  assert jnp.tril(w).weak_type == nbjax.jit(jnp.tril)(w).weak_type == w.weak_type == True


@pytest.mark.parametrize("fun", [jnp.tri, jnp.eye])
def test_tri_eye_numpy_route_as_jit(fun):
  # eagerly, tri and eye with a Python int k are NumPy's (memoised up to 2^16 elements)
  jfun = nbjax.jit(fun, static_argnums=(0, 1, 2, 3))
  for dtype in (None, jnp.bfloat16, np.float16, bool, np.int8, np.complex64, int):
    for n, m in ((3, None), (3, 5), (0, 2), (4, 0), (300, 301)):
      for k in (-5, -1, 0, 2, 7):
        got, want = fun(n, m, k, dtype), jfun(n, m, k, dtype)
        assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  for k in (-(1 << 62), 1 << 62):  # clamped: NumPy's arange(-k, M - k) would overflow
    np.testing.assert_array_equal(fun(3, 4, k), fun(3, 4, jnp.asarray(k)))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.bool_, jnp.bfloat16,
                                   np.complex128])
def test_take_fill_kernel_as_jit(dtype):
  # eagerly, jnp.take's default fill mode of a vector is one pass of take_filled (negative
  # indices from the end, out-of-range ones filled), as is a gather's fill of single elements
  rng = np.random.default_rng(1)
  x = jnp.asarray((rng.standard_normal(50) * 10).astype(dtype))
  for idt in (np.int32, np.int64, np.uint8, np.int16):
    lo = 0 if np.dtype(idt).kind == "u" else -70
    for shape in ((0,), (9,), (3, 4), ()):
      i = jnp.asarray(rng.integers(lo, 70, shape).astype(idt))
      for fv in (None, 3, 1e40):  # (1e40: inf or a wrapped int, without a warning)
        f = lambda x, i: jnp.take(x, i, fill_value=fv)
        g = lambda x, i: x.at[i].get(mode="fill", fill_value=fv)
        for h in (f, g):
          with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = h(x, i)
          want = nbjax.jit(h)(x, i)
          assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
          np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histogram_kernel_as_composite(dtype):
  # eagerly, float32/64 counts are one pass of histogram_counts over the composite's edges
  rng = np.random.default_rng(2)
  composite = jnp.histogram.__wrapped__
  for n in (0, 10, 1000):
    a = rng.standard_normal(n).astype(dtype)
    if n >= 100:  # specials, and values on the edges used below
      a[:19] = [np.nan, np.inf, -np.inf, 0.0, -0.0, *np.linspace(-1, 1, 8, dtype=dtype),
                -1, -0.5, 0, 0, 0.5, 2]
    x, w = jnp.asarray(a), jnp.asarray(rng.random(n).astype(dtype))
    edges = jnp.asarray(np.array([-1, -0.5, 0, 0, 0.5, 2], dtype))  # (a repeated edge)
    odd = [jnp.asarray(np.array(e, dtype)) for e in ([-np.inf, 0, np.inf], [-np.inf, 5],
                                                         [3, 2, 1, 0], [np.nan, 0, 1])]
    for bins in (1, 7, edges, jnp.zeros(3, dtype), *odd):  # (infinite, unsorted, NaN edges)
      for rng_ in (None, (-1, 1), (0, 0)):
        for weights, density in ((None, None), (w, None), (w, True)):
          args = (x, bins, rng_, weights, density)
          try:
            want = composite(*args)
          except Exception as e:  # (inf in the data with range None: the same error)
            with pytest.raises(type(e)):
              jnp.histogram(*args)
            continue
          for g, v in zip(jnp.histogram(*args), want):
            assert (g.dtype, g.shape, g.weak_type) == (v.dtype, v.shape, v.weak_type)
            np.testing.assert_array_equal(np.asarray(g), np.asarray(v))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint32, np.int64])
def test_searchsorted_kernel_as_numpy(dtype):
  # from 256 queries, a sorted NaN-free ``a`` is searched by kernels.indexing.search_sorted
  rng = np.random.default_rng(3)
  for na in (1, 2, 51, 1000):
    a = np.sort((rng.standard_normal(na) * 50).astype(dtype))
    v = (rng.standard_normal(777) * 60).astype(dtype)
    v[:3] = a[0], a[-1], a[na // 2]
    if v.dtype.kind == "f":
      v[3:6] = np.nan, -0.0, np.inf
    for side in ("left", "right"):
      got = jnp.searchsorted(jnp.asarray(a), jnp.asarray(v.reshape(7, 111)), side=side)
      assert got.dtype == np.int32 and got.shape == (7, 111)
      np.testing.assert_array_equal(got, np.searchsorted(a, v, side).reshape(7, 111))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_convolve_correlate_numpy_route_as_composite(dtype):
  # eagerly, 1-d convolve/correlate of one float or complex dtype are NumPy's
  rng = np.random.default_rng(4)
  tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
  for f in (jnp.convolve, jnp.correlate):
    for na, nv in ((1, 1), (5, 3), (3, 5), (10, 4), (4, 10), (100, 6)):
      a, v = (rng.standard_normal(n) + (1j * rng.standard_normal(n) if np.dtype(dtype).kind == "c"
                                        else 0) for n in (na, nv))
      a, v = jnp.asarray(a.astype(dtype)), jnp.asarray(v.astype(dtype))
      w = jnp.full(4, 2.0, dtype)  # (weak)
      inf = jnp.asarray(np.array([np.inf, 1.0], dtype))  # (the composite's inf * 0 = NaN)
      for x, y in ((a, v), (w, w), (a, inf), (inf, a)):
        for mode in ("full", "same", "valid"):
          got, want = f(x, y, mode), f.__wrapped__(x, y, mode)
          assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
          np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norm_blas_route_as_jit(dtype):
  # eagerly, the 2-norm of a whole float32/64 Array is NumPy's sqrt(dot(v, v)), quietly
  rng = np.random.default_rng(5)
  tol = 2e-6 if dtype == np.float32 else 1e-14
  for x in [jnp.asarray(rng.standard_normal(s).astype(dtype)) for s in ((0,), (7,), (999,), (3, 4), ())] + \
      [jnp.full(3, 2.0, dtype), jnp.asarray(np.array([np.nan, np.inf], dtype))]:
    for ord_, keepdims in ((None, False), (None, True), (2, False)):
      f = lambda x: jnp.linalg.norm(x, ord_, None, keepdims)
      try:
        want = nbjax.jit(f)(x)
      except ValueError:
        continue  # (ord=2 of a matrix: the composite's error)
      got = f(x)
      assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol)
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # (overflow to inf without NumPy's warning)
    assert np.isinf(jnp.linalg.norm(jnp.full(2, 1e30, np.float32)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nan_to_num_numpy_route_as_jit(dtype):
  # eagerly, nan_to_num of a NumPy float with Python-number replacements is NumPy's
  a = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, -2.0, 6e4], dtype)
  for kw in ({}, dict(nan=1.0), dict(posinf=1e40, neginf=-1e40), dict(nan=5, posinf=7, neginf=-7),
             dict(nan=-0.0)):
    for x in (jnp.asarray(a), jnp.full(3, np.nan, dtype)):
      with warnings.catch_warnings():
        warnings.simplefilter("error")  # (1e40 rounds to inf quietly)
        got = jnp.nan_to_num(x, **kw)
      with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the composite, traced, quiet too)
        want = nbjax.jit(lambda x: jnp.nan_to_num(x, **kw))(x)
        composite = jnp.nan_to_num.__wrapped__(x, **kw)
      np.testing.assert_array_equal(np.asarray(composite), np.asarray(want))
      assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
      np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(np.asarray(want)))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sign_numpy_route_bits_as_jit(dtype):
  """jnp.sign of an eager float Array (NumPy's sign): the composite's bits, as jit's, for
  -0.0 (+0.0), NaNs of either sign, infinities; weak type kept."""
  x = np.random.default_rng(3).standard_normal(40).astype(dtype)
  x[:8] = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -2, 3]
  for a in (jnp.asarray(x), _weak() if dtype == np.float32 else jnp.asarray(x)):
    got, want = jnp.sign(a), nbjax.jit(jnp.sign)(a)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.asarray(want).view(np.uint8))
  from nbjax.numpy import _ufuncs
  composite = _ufuncs._sign(jnp.asarray(x))  # (the composite's primitives, one by one)
  np.testing.assert_array_equal(np.asarray(composite).view(np.uint8),
                                np.asarray(jnp.sign(jnp.asarray(x))).view(np.uint8))


def test_diagonal_numpy_route_as_jit():
  """jnp.diagonal / jnp.diag of an eager Array (NumPy's diagonal, copied): values, shape,
  dtype and weak type as jit's for offsets in and out of range and any axes; a fresh buffer;
  JAX's errors for bad axes."""
  rng = np.random.default_rng(11)
  for shape in ((4, 6), (6, 4), (3, 4, 5), (1, 1)):
    x = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    nd = len(shape)
    for off in (-7, -2, -1, 0, 1, 3, 9):
      for ax1, ax2 in ((0, 1), (1, 0), (-1, 0), (nd - 1, nd - 2)):
        f = lambda v: jnp.diagonal(v, off, ax1, ax2)
        got, want = f(x), nbjax.jit(f)(x)
        assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert got._value.flags.c_contiguous
      if nd == 2:
        for k in (-3, 0, 2):
          np.testing.assert_array_equal(np.asarray(jnp.diag(x, k)),
                                        np.asarray(nbjax.jit(lambda v: jnp.diag(v, k))(x)))
  assert jnp.diagonal(_weak()).weak_type
  with pytest.raises(ValueError, match="axis1 and axis2 must not be equal"):
    jnp.diagonal(jnp.ones((3, 3)), 0, 1, 1)
  with pytest.raises(ValueError):
    jnp.diagonal(jnp.ones(3))
  with pytest.raises(Exception):
    jnp.diagonal(jnp.ones((3, 3)), 0, 0, 2)


def test_lax_reshape_eager_view_and_errors():
  """lax.reshape of an eager Array to a tuple of ints (NumPy's view): values and weak type as
  jit's; -1, negative sizes and a wrong element count still raise JAX's TypeError."""
  x = jnp.asarray(np.arange(12, dtype=np.float32))
  for shape in ((3, 4), (12,), (2, 2, 3), (1, 12, 1)):
    got, want = lax.reshape(x, shape), nbjax.jit(lambda v: lax.reshape(v, shape))(x)
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  assert lax.reshape(_weak(), (20,)).weak_type
  for bad in ((5, 3), (-1, 3), (-3, -4)):
    with pytest.raises(TypeError):
      lax.reshape(x, bad)
    with pytest.raises(TypeError):
      nbjax.jit(lambda v: lax.reshape(v, bad))(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
def test_broadcasting_binary_ops_above_the_kernel_switch_as_jit(dtype):
  """Binary ops whose operands broadcast size-1 axes, above the numpy/numba switch (NumPy's
  broadcasting loops for exact kernels, per call and in replayed programs such as jnp.outer's):
  the values, dtype and weak type of jit, equal to NumPy's for exact arithmetic."""
  rng = np.random.default_rng(13)
  col = (rng.standard_normal((300, 1)) * 8).astype(dtype)
  row = (rng.standard_normal((1, 300)) * 8).astype(dtype)
  full = (rng.standard_normal((300, 300)) * 8).astype(dtype)
  ops = [(lax.add, np.add), (lax.sub, np.subtract), (lax.mul, np.multiply),
         (lax.max, np.maximum), (lax.lt, np.less)]
  for a, b in ((col, row), (full, row), (col, full), (row[0][None], full)):
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    for op, ref in ops:
      for _ in range(2):  # (the shape pair's first call validates; the second takes the cache)
        got = op(ja, jb)
      want = nbjax.jit(op)(ja, jb)
      assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
      np.testing.assert_array_equal(np.asarray(got), ref(a, b))
  v, w = jnp.asarray(col[:, 0]), jnp.asarray(row[0])
  outs = [np.asarray(jnp.outer(v, w)) for _ in range(4)]  # per call, then replayed
  for o in outs:
    np.testing.assert_array_equal(o, np.multiply.outer(col[:, 0], row[0]))


def test_numpy_routes_of_0d_arrays_hold_arrays():
  """NumPy's ufunc-like routines return NumPy scalars for 0-d arrays: the eager routes (sign,
  nan_to_num, a vector dot) still hold 0-d ndarrays, as jit's results."""
  x = jnp.asarray(np.float32(-np.inf))
  for f in (jnp.sign, jnp.nan_to_num, lambda v: jnp.dot(v.reshape(1), v.reshape(1)) * 0):
    got, want = f(x), nbjax.jit(f)(x)
    assert type(got._value) is np.ndarray and got.shape == want.shape == ()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_fast_path_review_regressions():
  """Review findings: jnp.transpose/.T of a concrete Array of more than 8 dims under a trace
  (it looped between _T and jnp.transpose); jnp.diagonal/diag offsets beyond NumPy's C int
  (an OverflowError, and a view 48 GiB before the buffer at -2**31); jnp.sign with a pinned
  eager backend runs that backend; nan_to_num's route does not warn."""
  c9 = jnp.zeros((1,) * 9)
  assert nbjax.jit(lambda v: v + jnp.transpose(c9))(1.0).shape == (1,) * 9
  assert nbjax.vmap(lambda v: v + c9.T)(jnp.ones(2)).shape == (2,) + (1,) * 9
  x = jnp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
  for off in (2**31, -2**31, 2**40, -(2**40), 4, -3):
    for f in (lambda v: jnp.diagonal(v, off), lambda v: jnp.diag(v, off)):
      got, want = f(x), nbjax.jit(f)(x)
      assert got.shape == want.shape == (0,)
  v = jnp.asarray(np.array([1e-45, -1e-45, 0.5, -0.0], np.float32))
  try:
    nbjax.config.set_eager_backend("all", "xla")
    np.testing.assert_array_equal(np.asarray(jnp.sign(v)), np.asarray(nbjax.jit(jnp.sign)(v)))
  finally:
    nbjax.config.set_eager_backend("all", None)
  if not _placing():  # (committed arrays take the composite's placing entry, which still
    with warnings.catch_warnings():  # warns on this cast: not the route under test)
      warnings.simplefilter("error")
      jnp.nan_to_num(jnp.asarray(np.array([np.inf, 1], np.float16)), posinf=1e10)
