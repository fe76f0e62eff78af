"""lax.reduce (generic and monoids), reduce_precision, mulhi, optimization_barrier,
tile/split/broadcast_shapes/index_take, approx_max_k/min_k, ragged_dot, scatter_apply,
rng_bit_generator/rng_uniform, custom_root and custom_linear_solve, against NumPy
references (values checked against JAX 0.10.2 on CPU when written)."""
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax


@pytest.mark.parametrize("jit", [False, True])
def test_reduce_generic_two_operands(jit):
  rng = np.random.default_rng(0)
  x = rng.uniform(0.5, 1.5, (3, 5, 4))
  J = nbjax.jit if jit else (lambda f: f)
  f = J(lambda v: lax.reduce((v, v), (0.0, 1.0), lambda a, b: (a[0] + b[0], a[1] * b[1]),
                             (0, 2)))
  s, p = f(x)
  np.testing.assert_allclose(np.asarray(s), x.sum((0, 2)), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(p), x.prod((0, 2)), rtol=1e-12)
  # argmax as a variadic reduce
  idx = np.broadcast_to(np.arange(5.0)[None, :, None], x.shape)
  pick = lambda a, b: (lax.max(a[0], b[0]), lax.select(lax.ge(a[0], b[0]), a[1], b[1]))
  m, i = J(lambda v, i: lax.reduce((v, i), (-np.inf, -1.0), pick, (1,)))(x, idx)
  np.testing.assert_array_equal(np.asarray(i), x.argmax(1))
  np.testing.assert_array_equal(np.asarray(m), x.max(1))


def test_reduce_monoids_use_fast_primitives():
  x = np.arange(6.0).reshape(2, 3)
  for op, init, name in ((lax.add, 0.0, "reduce_sum"), (lax.mul, 1.0, "reduce_prod"),
                         (lax.max, -np.inf, "reduce_max"), (lax.min, np.inf, "reduce_min")):
    eqn, = nbjax.make_jaxpr(lambda v: lax.reduce(v, init, op, (1,)))(x).eqns
    assert eqn.primitive.name == name
  eqn, = nbjax.make_jaxpr(lambda v: lax.reduce(v, 2.0, lax.add, (1,)))(x).eqns
  assert eqn.primitive.name == "reduce"
  np.testing.assert_array_equal(np.asarray(lax.reduce(x, 2.0, lax.add, (1,))), [5.0, 14.0])
  # the bitwise monoids (booleans and integers only) and max/min of a float8 without
  # infinities (its finite extreme), as JAX 0.10.2's _get_monoid_reducer (lax_test testReduce)
  import ml_dtypes
  f8 = ml_dtypes.float8_e4m3fn
  u = np.array([[1, 2, 4], [8, 0, 3]], np.uint16)
  for v, init, op, name in (
      (u, 0, lax.bitwise_or, "reduce_or"), (u, 0xFFFF, lax.bitwise_and, "reduce_and"),
      (u, 0, lax.bitwise_xor, "reduce_xor"), (u, 1, lax.bitwise_or, "reduce"),
      (u > 1, True, lax.bitwise_and, "reduce_and"), (u > 1, False, lax.bitwise_or, "reduce_or"),
      (x.astype(f8), float(ml_dtypes.finfo(f8).min), lax.max, "reduce_max"),
      (x.astype(f8), float(ml_dtypes.finfo(f8).max), lax.min, "reduce_min")):
    iv = np.array(init).astype(v.dtype)
    eqn, = nbjax.make_jaxpr(lambda a: lax.reduce(a, iv, op, (1,)))(v).eqns
    assert eqn.primitive.name == name, (op, v.dtype, init)
  np.testing.assert_array_equal(lax.reduce(u, np.uint16(0), lax.bitwise_or, (1,)), [7, 11])
  np.testing.assert_array_equal(lax.reduce(u, np.uint16(1), lax.bitwise_or, (0,)), [9, 3, 7])


def test_reduce_jvp_vmap_batched_init():
  x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
  f = lambda v: lax.reduce(v, 1.0, lax.mul, (1,))
  _, t = nbjax.jvp(f, (x,), (np.ones_like(x),))
  np.testing.assert_allclose(np.asarray(t), [2 * 3 + 3 + 2, 30 + 24 + 20])
  out = nbjax.vmap(lambda v, z: lax.reduce(v, z, lax.mul, (0,)))(x, np.array([2.0, 3.0]))
  np.testing.assert_allclose(np.asarray(out), [12.0, 360.0])


def test_reduce_precision_as_casts():
  rng = np.random.default_rng(1)
  x = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-9, 9, 200),
                      [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65520, 1e-7]])
  with np.errstate(over="ignore"):
    h = x.astype(np.float16).astype(np.float64)
  h[np.abs(h) < np.finfo(np.float16).tiny] = 0.0  # XLA flushes the format's denormals
  h = np.copysign(h, x)
  for jit in (False, True):
    f = (nbjax.jit if jit else lambda g: g)(lambda v: lax.reduce_precision(v, 5, 10))
    np.testing.assert_array_equal(np.asarray(f(x)), h)
    np.testing.assert_array_equal(np.asarray(f(x.astype(np.float32))), h.astype(np.float32))
  assert lax.reduce_precision(np.float32(1.0), 8, 23).dtype == np.float32
  with pytest.raises(TypeError, match="floating"):
    lax.reduce_precision(np.arange(3), 5, 10)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
                                   np.uint64])
def test_mulhi(dtype):
  info = np.iinfo(dtype)
  rng = np.random.default_rng(2)
  x = np.concatenate([rng.integers(info.min, info.max, 50, dtype=dtype, endpoint=True),
                      np.array([info.min, info.max, 0, 1], dtype)])
  y = np.concatenate([rng.integers(info.min, info.max, 50, dtype=dtype, endpoint=True),
                      np.array([info.min, info.min, info.max, info.max], dtype)])
  bits = 8 * np.dtype(dtype).itemsize
  want = np.array([(int(a) * int(b)) >> bits for a, b in zip(x, y)], dtype)
  np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)), want)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lax.mulhi)(x, y)), want)


def test_optimization_barrier():
  f = lambda x: lax.optimization_barrier((x, x + 1))
  for g in (f, nbjax.jit(f)):
    a, b = g(np.float32(1.0))
    assert (float(a), float(b)) == (1.0, 2.0)
  assert nbjax.grad(lambda x: f(x)[1] * 3)(2.0) == 3.0
  assert "optimization_barrier" in str(nbjax.jit(f).lower(1.0).as_text())


def test_tile_split_broadcast_shapes_index_take():
  x = np.arange(12.0).reshape(3, 4)
  np.testing.assert_array_equal(np.asarray(lax.tile(x, (2, 3))), np.tile(x, (2, 3)))
  parts = lax.split(np.arange(5.0), (2, 0, 3))
  assert [np.asarray(p).tolist() for p in parts] == [[0, 1], [], [2, 3, 4]]
  with pytest.raises(ValueError, match="Sum of sizes"):
    lax.split(np.arange(5.0), (2, 2))
  assert lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
  with pytest.raises(ValueError, match="Incompatible shapes"):
    lax.broadcast_shapes((2,), (3,))
  # JAX's TypeErrors (lax_vmap_test.testBroadcastShapesFaultyInputs)
  with pytest.raises(TypeError, match=r"Only non-negative indices are allowed when "
                     r"broadcasting static shapes, but got shape \(-1,\)\."):
    lax.broadcast_shapes((-1,))
  with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
    lax.broadcast_shapes("hello")
  assert all(type(d) is int for d in lax.broadcast_shapes((np.int64(1), 2), (2,)))
  got = lax.index_take(x, (np.array([0, -1]), np.array([1, 2])), (0, 1))
  np.testing.assert_array_equal(np.asarray(got), [1.0, 10.0])
  np.testing.assert_array_equal(np.asarray(lax.index_take(x, (np.array([2, 0]),), (0,))),
                                x[[2, 0]])


def test_approx_k_exact_as_jax_cpu():
  rng = np.random.default_rng(3)
  x = rng.standard_normal((4, 50)).astype(np.float32)
  v, i = lax.approx_max_k(x, 5)
  np.testing.assert_array_equal(np.asarray(v), -np.sort(-x, 1)[:, :5])
  np.testing.assert_array_equal(np.take_along_axis(x, np.asarray(i), 1), np.asarray(v))
  assert np.asarray(i).dtype == np.int32
  v, i = lax.approx_min_k(x, 3, reduction_dimension=0)
  np.testing.assert_array_equal(np.asarray(v), np.sort(x, 0)[:3])
  # JAX 0.10.2's values with a NaN (XLA's sort with a GT comparator)
  v, i = lax.approx_max_k(np.array([3., 1., np.nan, 3., -2., 7.]), 6)
  np.testing.assert_array_equal(np.asarray(i), [5, 0, 1, 2, 3, 4])
  with pytest.raises(ValueError, match="floating"):
    lax.approx_max_k(np.arange(5), 2)
  _, t = nbjax.jvp(lambda a: lax.approx_max_k(a, 2)[0], (np.array([1., 5., 3.]),),
                   (np.array([10., 20., 30.]),))
  np.testing.assert_array_equal(np.asarray(t), [20.0, 30.0])


def test_ragged_dot():
  rng = np.random.default_rng(4)
  lhs, rhs = rng.standard_normal((7, 3)), rng.standard_normal((3, 3, 2))
  gs = np.array([2, 0, 4], np.int32)
  want = np.zeros((7, 2))
  want[0:2] = lhs[0:2] @ rhs[0]
  want[2:6] = lhs[2:6] @ rhs[2]
  for f in (lax.ragged_dot, nbjax.jit(lax.ragged_dot)):
    np.testing.assert_allclose(np.asarray(f(lhs, rhs, gs)), want, rtol=1e-12, atol=1e-12)
  g = nbjax.grad(lambda a: lax.ragged_dot(a, rhs, gs).sum())(lhs)
  np.testing.assert_allclose(np.asarray(g)[6], 0.0)
  np.testing.assert_allclose(np.asarray(g)[0], rhs[0].sum(1))


def test_scatter_apply():
  dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                   scatter_dims_to_operand_dims=(0,))
  got = lax.scatter_apply(np.arange(5.0), np.array([[1], [3]]), lambda t: t * 10, dn,
                          update_shape=(2,))
  np.testing.assert_array_equal(np.asarray(got), [0, 10, 2, 30, 4])


@pytest.mark.parametrize("how", ["jacfwd", "grad"])
def test_scatter_apply_has_no_derivative(how):
  """As JAX's scatter-apply (lax_autodiff_test test_scatter_apply_jvp/vjp): applying a
  function at indices works eagerly, under jit and vmap, and differentiating it raises."""
  x = jnp.array([1.0, 2.0])
  f = lambda x: x.at[1].apply(jnp.sin)
  np.testing.assert_allclose(nbjax.vmap(f)(jnp.stack([x, x]))[1], [1.0, np.sin(2.0)])
  with pytest.raises(NotImplementedError,
                     match="Differentiation rule for 'scatter-apply' not implemented"):
    getattr(nbjax, how)(lambda x: f(x).sum() if how == "grad" else f(x))(x)


def test_rng_bit_generator_is_xlas():
  key = np.array([1, 2, 3, 4], np.uint32)
  k2, bits = lax.rng_bit_generator(key, (2, 3))
  # JAX 0.10.2 on CPU (RNG_DEFAULT)
  np.testing.assert_array_equal(np.asarray(k2), [1, 2, 5, 4])
  np.testing.assert_array_equal(np.asarray(bits), [[512747620, 1298009047, 1267190206],
                                                   [761827841, 1383286907, 1639995030]])
  three = lax.rng_bit_generator(key, (3,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)[1]
  np.testing.assert_array_equal(np.asarray(three), [1576285164, 2249660814, 740599976])
  j = nbjax.jit(lambda k: lax.rng_bit_generator(k, (2, 3)))(key)[1]
  np.testing.assert_array_equal(np.asarray(j), np.asarray(bits))
  assert lax.rng_bit_generator(key, (4,), np.uint8)[1].dtype == np.uint8
  with pytest.raises(TypeError, match="unsupported dtype"):
    lax.rng_bit_generator(key, (2,), np.int32)
  vb = nbjax.vmap(lambda k: lax.rng_bit_generator(k, (2,))[1])(np.stack([key, key + 1]))
  np.testing.assert_array_equal(np.asarray(vb), np.asarray(bits).ravel()[:4].reshape(2, 2))
  u = np.asarray(lax.rng_uniform(np.float32(2), np.float32(3), (500,)))
  assert u.shape == (500,) and u.dtype == np.float32 and (u >= 2).all() and (u < 3).all()


def _sqrt_newton(a):
  f = lambda x: x ** 2 - a
  solve = lambda f, x0: lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)
  return lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))


def test_custom_root_implicit_derivatives():
  assert abs(float(_sqrt_newton(2.0)) - np.sqrt(2)) < 1e-12
  np.testing.assert_allclose(float(nbjax.grad(_sqrt_newton)(2.0)), 0.5 / np.sqrt(2), rtol=1e-12)
  np.testing.assert_allclose(float(nbjax.jit(nbjax.grad(_sqrt_newton))(3.0)), 0.5 / np.sqrt(3),
                             rtol=1e-12)
  _, t = nbjax.jvp(_sqrt_newton, (4.0,), (1.0,))
  assert float(t) == 0.25


def _newton(func, x0):
  def cond(s):
    it, x = s
    return (jnp.abs(func(x)) > 1e-15) & (it < 30)

  def body(s):
    it, x = s
    return it + 1, x - func(x) / nbjax.grad(func)(x)
  return lax.while_loop(cond, body, (0, x0))[1]


def _sqrt_cubed(x):
  return lax.custom_root(lambda y: y ** 2 - x ** 3, 1.0, _newton, lambda g, y: y / g(1.0))


def test_custom_root_never_differentiates_the_solve():
  # a while_loop solve (which reverse mode cannot differentiate) under grad, grad of grad,
  # vmap and jit: JAX's implicit rule applies at every order (custom_root_test
  # test_custom_root_scalar_newton_raphson); values and weak types from JAX 0.10.2
  v, g = nbjax.value_and_grad(_sqrt_cubed)(5.0)
  assert v.weak_type and g.weak_type
  np.testing.assert_allclose([v, g], [11.18033989, 3.35410197], rtol=1e-8)
  np.testing.assert_allclose(nbjax.grad(nbjax.grad(_sqrt_cubed))(5.0), 0.33541019662496874,
                             rtol=1e-12)
  np.testing.assert_allclose(nbjax.vmap(_sqrt_cubed)(jnp.array([4.0, 9.0])), [8., 27.])
  assert float(nbjax.jit(nbjax.grad(_sqrt_cubed))(4.0)) == 3.0
  # a solve closing over the differentiated value, and aux (zero tangents)
  a = np.array([[3., 1.], [1., 2.]])
  b = np.array([1., -1.])

  def root_aux(b):
    sol = jnp.linalg.solve(a, b)
    return lax.custom_root(lambda x: a @ x - b, b, lambda f, x: (sol, {"n": jnp.float32(3)}),
                           lambda g, y: jnp.linalg.solve(a, y), has_aux=True)
  x, aux = root_aux(b)
  np.testing.assert_allclose(x, np.linalg.solve(a, b))
  jac, jaux = nbjax.jacfwd(root_aux)(b)
  np.testing.assert_allclose(jac, np.linalg.inv(a), rtol=1e-12)
  assert jaux["n"].dtype == np.float32 and float(jaux["n"].sum()) == 0


def test_custom_root_and_linear_solve_errors_as_jax():
  s = lambda f, x: x
  for args, err, msg in [
      ((lambda x: (x, x), 0.0, s, s), TypeError,
       "f() output pytree structure must match initial_guess, got PyTreeDef((*, *)) and "
       "PyTreeDef(*)."),
      ((lambda x: x, 0.0, lambda f, x: (x, x), s), TypeError,
       "solve() output pytree structure must match initial_guess, got PyTreeDef((*, *)) and "
       "PyTreeDef(*)."),
      ((lambda x: x, 0.0, s, s, True), ValueError,
       "solve() produced a pytree with structure PyTreeDef(*), but a pytree tuple with "
       "auxiliary output was expected because has_aux was set to True.")]:
    with pytest.raises(err, match=re.escape(msg)):
      lax.custom_root(*args)
  for args, err, msg in [
      ((lambda x: [x], 1.0, s, s), TypeError,
       "matvec() output pytree structure must match b, got PyTreeDef([*]) and PyTreeDef(*)."),
      ((lambda x: x, 1.0, lambda f, x: [x], s), TypeError,
       "solve() output pytree structure must match b, got PyTreeDef([*]) and PyTreeDef(*)."),
      ((lambda x: x, 1.0, s, lambda f, x: [x]), TypeError,
       "transpose_solve() output pytree structure must match b, got PyTreeDef([*]) and "
       "PyTreeDef(*)."),
      ((lambda x: x, 1.0, lambda f, x: jnp.ones(2), s), ValueError,
       "solve() output shapes must match b, got [(2,)] and [()]")]:
    with pytest.raises(err, match=re.escape(msg)):
      lax.custom_linear_solve(*args)
  with pytest.raises(ValueError, match=re.escape(
      "matvec() output shapes must match b, got [(2,)] and [()]")):
    nbjax.jvp(lambda a: lax.custom_linear_solve(lambda x: a * jnp.ones(2), 1.0, s, s),
              (1.0,), (1.0,))


def _ls(a, b, sym=False):
  mv = lambda x: jnp.dot(a, x)
  return lax.custom_linear_solve(mv, b, lambda m, x: jnp.linalg.solve(a, x),
                                 None if sym else (lambda vm, x: jnp.linalg.solve(a.T, x)),
                                 symmetric=sym)


def test_custom_linear_solve_derivatives():
  a = np.array([[4.0, 1.0], [2.0, 3.0]])
  b = np.array([1.0, 2.0])
  x = np.linalg.solve(a, b)
  np.testing.assert_allclose(np.asarray(_ls(a, b)), x, rtol=1e-12)
  # d(sum x)/db = A^-T 1, d(sum x)/dA = -(A^-T 1) x^T
  w = np.linalg.solve(a.T, np.ones(2))
  np.testing.assert_allclose(np.asarray(nbjax.grad(lambda v: _ls(a, v).sum())(b)), w, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nbjax.grad(lambda m: _ls(m, b).sum())(a)),
                             -np.outer(w, x), rtol=1e-12)
  jf = np.asarray(nbjax.jacfwd(lambda m: _ls(m, b))(a))
  np.testing.assert_allclose(jf.sum((0,)), -np.outer(w, x), rtol=1e-12)
  s = a + a.T
  g = nbjax.jit(nbjax.grad(lambda m: _ls(m, b, True).sum()))(s)
  ws = np.linalg.solve(s, np.ones(2))
  np.testing.assert_allclose(np.asarray(g), -np.outer(ws, np.linalg.solve(s, b)), rtol=1e-12,
                             atol=1e-15)
  vb = nbjax.vmap(lambda v: _ls(a, v))(np.stack([b, 2 * b]))
  np.testing.assert_allclose(np.asarray(vb), [x, 2 * x], rtol=1e-12)
  with pytest.raises(TypeError, match="transpose_solve required"):
    nbjax.grad(lambda v: lax.custom_linear_solve(lambda z: jnp.dot(a, z), v,
                                                 lambda m, z: jnp.linalg.solve(a, z)).sum())(b)


def test_custom_linear_solve_batching_keeps_unbatched_parts_unbatched():
  # JAX's fixpoint over matvec/vecmat/solve/transpose_solve: a part of x that depends on no
  # batched value stays unbatched, so out_axes=None is allowed for it (JAX 0.10.2 gives
  # [[1, 2, 3], 2.]; custom_linear_solve_test test_custom_linear_solve_pytree)
  def solve_diag(b):
    mv = lambda x: [2. * x[0], 4. * x[1]]
    s = lambda m, b: [b[0] / 2., b[1] / 4.]
    return lax.custom_linear_solve(mv, b, s, s)
  f = nbjax.vmap(solve_diag, in_axes=([0, None],), out_axes=[0, None])
  x0, x1 = f([jnp.array([2., 4., 6.]), jnp.float64(8.)])
  np.testing.assert_array_equal(x0, [1., 2., 3.])
  assert x1.shape == () and float(x1) == 2.
  np.testing.assert_array_equal(
      nbjax.jacfwd(lambda b0: f([b0, jnp.float64(8.)])[0])(jnp.array([2., 4., 6.])),
      0.5 * np.eye(3))
  np.testing.assert_array_equal(
      nbjax.grad(lambda b0: f([b0, jnp.float64(8.)])[0].sum())(jnp.array([2., 4., 6.])),
      [0.5, 0.5, 0.5])


def test_custom_linear_solve_aux_comes_from_the_primitive():
  # has_aux: the solve runs once (its aux are outputs of custom_linear_solve, as JAX's), aux
  # get zero (float0 for ints) tangents and are batched; values from JAX 0.10.2
  calls = []
  a = np.array([[4., 1.], [1., 3.]])

  def solve(mv, b):
    calls.append(1)
    x = jnp.linalg.solve(a, b)
    return x, {'res': jnp.sum(x), 'it': jnp.int32(7)}
  f = lambda b: lax.custom_linear_solve(lambda x: a @ x, b, solve, symmetric=True,
                                        has_aux=True)
  b = jnp.array([1., 2.])
  x, aux = f(b)
  assert len(calls) == 1
  np.testing.assert_allclose(x, [0.09090909, 0.63636364], rtol=1e-7)
  assert aux['it'].dtype == np.int32 and int(aux['it']) == 7
  np.testing.assert_allclose(aux['res'], 0.72727273, rtol=1e-7)
  xs, auxs = nbjax.vmap(f)(jnp.stack([b, 2 * b]))
  np.testing.assert_array_equal(auxs['it'], [7, 7])
  np.testing.assert_allclose(auxs['res'], [0.72727273, 1.45454545], rtol=1e-7)
  np.testing.assert_allclose(nbjax.grad(lambda b: f(b)[0].sum())(b), [0.18181818, 0.27272727],
                             rtol=1e-7)
  np.testing.assert_array_equal(nbjax.grad(lambda b: f(b)[1]['res'])(b), [0., 0.])
  (_, _), (_, aux_dot) = nbjax.jvp(f, (b,), (b,))
  assert aux_dot['it'].dtype == nbjax.dtypes.float0 and float(aux_dot['res']) == 0.
  # x keeps b's weak type
  g = nbjax.grad(lambda b: lax.custom_linear_solve(lambda x: x, b, lambda f, x: x,
                                                   lambda f, x: x))(1.0)
  assert g.weak_type and float(g) == 1.


def test_stack_unstack_broadcast_like_empty_dtype_as_jax():
  b = lax.broadcast_like(jnp.float32(1), jnp.ones((2, 3)))
  assert b.shape == (2, 3) and b.dtype == np.float32
  assert lax.broadcast_to_rank(jnp.ones(3), 3).shape == (1, 1, 3)
  assert lax.broadcast_to_rank(jnp.ones((2, 3)), 1).shape == (2, 3)
  np.testing.assert_array_equal(lax.stack([jnp.ones(2), jnp.zeros(2)], axis=1), [[1, 0], [1, 0]])
  np.testing.assert_array_equal(lax.stack([jnp.ones(2), jnp.zeros(2)], axis=-1), [[1, 0], [1, 0]])
  parts = lax.unstack(jnp.arange(6).reshape(2, 3), axis=1)
  assert type(parts) is tuple and [p.tolist() for p in parts] == [[0, 3], [1, 4], [2, 5]]
  with pytest.raises(IndexError):
    lax.stack([])
  e = lax.empty((2,), jnp.float32)
  assert e.shape == (2,) and e.dtype == np.float32
  assert lax.dtype(1.0) == np.float64 and lax.dtype(int) == np.int64
  assert lax.dtype(np.int8(1)) == np.int8
  f = nbjax.jit(lambda x: lax.stack(lax.unstack(x), 1))
  np.testing.assert_array_equal(f(jnp.arange(6.).reshape(2, 3)), np.arange(6.).reshape(2, 3).T)


# ------------------------------------------------ cumulative errors, smaller jax.lax names


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
def test_cumulative_error_wording(name):
  f = getattr(lax, name)
  # (JAX's wording after the primitive's name, which this project's errors lead with)
  with pytest.raises(ValueError, match=r"XLA operations do not allow negative axes"):
    f(np.ones((2, 3)), axis=-1)
  with pytest.raises(ValueError, match=r"axis 2 is out of bounds for array of shape \(2,\)$"):
    f(np.array([1., 2.]), axis=2)
  with pytest.raises(ValueError, match=r"axis 0 is out of bounds for array of shape \(\)$"):
    f(2.0)
  if name != "cumsum" and name != "cumprod":
    with pytest.raises(TypeError, match=f"^{name} does not accept dtype bool. Accepted dtypes "
                       "are subtypes of number.$"):
      f(np.array([True, False]))
  x = np.array([[1., 5.], [3., 2.]])
  ref = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
         "cummin": np.minimum.accumulate, "cumlogsumexp": np.logaddexp.accumulate}[name]
  np.testing.assert_allclose(f(x, axis=0, reverse=True), ref(x[::-1], axis=0)[::-1])
  np.testing.assert_allclose(nbjax.jit(lambda v: f(v, axis=1, reverse=True))(x),
                             ref(x[:, ::-1], axis=1)[:, ::-1])


def test_reduce_window_shape_tuple_and_shape_as_value():
  assert lax.reduce_window_shape_tuple((4, 5), (2, 2), (1, 2), [(0, 0), (1, 1)]) == (3, 3)
  assert lax.reduce_window_shape_tuple((4, 5), (2, 2), (1, 2), [(0, 0), (1, 1)],
                                       (2, 1), (1, 2)) == (6, 3)
  assert lax.reduce_window_shape_tuple((1,), (3,), (1,), [(0, 0)]) == (0,)
  v = lax.shape_as_value((2, 3))
  assert type(v) is np.ndarray and v.dtype == np.int32 and v.tolist() == [2, 3]
  e = lax.shape_as_value(())
  assert isinstance(e, nbjax.Array) and e.shape == (0,) and e.dtype == np.int32


def test_stage_dce_sink_composite():
  s = lax.stage(1.)
  assert isinstance(s, nbjax.Array) and s.dtype == np.float64 and s.weak_type
  s = lax.stage(np.ones(2, np.float32))
  assert isinstance(s, nbjax.Array) and s.dtype == np.float32 and not s.weak_type
  assert int(nbjax.jit(lambda x: lax.stage(x) * 2)(3)) == 6
  assert lax.dce_sink((np.ones(2), 1.)) is None
  f = lax.composite(lambda x, *, k=1: x * k, name="my.op")
  np.testing.assert_array_equal(f(np.arange(3.), k=2), [0., 2., 4.])
  g = lax.composite(lambda x: x * 2, name="my.op", version=1)
  np.testing.assert_array_equal(nbjax.jit(g)(np.arange(3.)), [0., 2., 4.])
  assert f.__name__ == "<lambda>"


def test_dce_sink_staged():
  # JAX 0.10.2: one dce_sink equation per leaf, kept by DCE; with prevent_mlir_dce a
  # side-effecting dce_sink custom call keeps the value's computation in XLA too
  def f(x):
    y = x + 1
    lax.dce_sink(y, prevent_mlir_dce=True)
    lax.dce_sink((y, x))
    return x
  x = np.float32(1)
  assert str(nbjax.make_jaxpr(f)(x)) == (
      "{ lambda ; a:f32[]. let\n    b:f32[] = add a 1.0:f32[]\n"
      "    dce_sink[prevent_mlir_dce=True] b\n    dce_sink[prevent_mlir_dce=False] b\n"
      "    dce_sink[prevent_mlir_dce=False] a\n  in (a,) }")
  text = nbjax.jit(f).lower(x).as_text()
  assert "stablehlo.custom_call @dce_sink(%0) {backend_config = \"\", has_side_effect = true" in text
  assert float(nbjax.jit(f)(x)) == 1.0

  def g(x):
    lax.dce_sink(x * 2)
    return x * 3
  assert str(nbjax.make_jaxpr(nbjax.grad(g))(x)) == (
      "{ lambda ; a:f32[]. let\n    b:f32[] = mul a 2.0:f32[]\n"
      "    dce_sink[prevent_mlir_dce=False] b\n    _:f32[] = mul a 3.0:f32[]\n"
      "    c:f32[] = mul 1.0:f32[] 3.0:f32[]\n  in (c,) }")
  assert "dce_sink" not in str(nbjax.make_jaxpr(nbjax.vmap(g))(np.ones(3, np.float32)))
  assert str(nbjax.make_jaxpr(lambda x: nbjax.jvp(g, (x,), (x,)))(x)).count("dce_sink") == 2
  assert float(nbjax.grad(g)(x)) == 3.0


def test_tokens():
  t = lax.create_token()
  assert type(lax.after_all(t, lax.create_token(1))) is type(t)
  assert type(lax.after_all()) is type(t)
  with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
    lax.after_all(t, np.ones(2))


def test_tokens_through_jit():
  # JAX 0.10.2: tokens are jit inputs and outputs (AbstractToken, printed Tok), lowered as
  # !stablehlo.token in main's signature; each output is a new Token
  from nbjax import core
  t = lax.create_token()
  assert isinstance(t, core.Token) and core.get_aval(t) is core.abstract_token
  assert str(nbjax.make_jaxpr(lambda x, t: (x, t))(np.float32(1), t)) == \
      "{ lambda ; a:f32[] b:Tok. let  in (a, b) }"
  assert str(nbjax.make_jaxpr(lambda: lax.after_all(lax.create_token(), lax.create_token()))()) \
      == ("{ lambda ; . let\n    a:Tok = create_token \n    b:Tok = create_token \n"
          "    c:Tok = after_all a b\n  in (c,) }")
  text = nbjax.jit(lambda x, t: (x, t)).lower(np.float32(1), t).as_text()
  assert "@main(%arg0: tensor<f32>, %arg1: !stablehlo.token)" in text
  x, out = nbjax.jit(lambda x, t: (x * 2, t))(jnp.ones(3), t)
  assert isinstance(out, core.Token) and out is not t
  np.testing.assert_array_equal(x, [2., 2., 2.])
  assert isinstance(nbjax.jit(lax.create_token)(1.0), core.Token)
  y, tok = nbjax.jit(lambda x: (x + 2, t))(7)  # a captured token
  assert int(y) == 9 and isinstance(tok, core.Token)
  assert isinstance(nbjax.jit(lambda t: lax.after_all(t, t))(t), core.Token)
  assert nbjax.eval_shape(lambda t: t, t) is core.abstract_token
  with pytest.raises(TypeError, match="Arguments to after_all must be tokens"):
    nbjax.jit(lax.after_all)(1.0)
  out.block_until_ready()
  inner = nbjax.jit(lambda x, t: (x * 2, lax.after_all(t)))  # a nested jit takes and gives one
  y, tok = nbjax.jit(lambda x, t: inner(x, t))(1.0, t)
  assert float(y) == 2.0 and isinstance(tok, core.Token)
  y, tok = nbjax.jit(lambda x, t: (x, t), donate_argnums=0)(np.ones(3), t)
  assert isinstance(tok, core.Token)


def test_small_classes():
  r = lax.RaggedDotDimensionNumbers(dot_dimension_numbers=(([1], [1]), ([], [])),
                                    lhs_ragged_dimensions=[0], rhs_group_dimensions=[0])
  assert r.dot_dimension_numbers == (((1,), (1,)), ((), ()))
  assert r.lhs_ragged_dimensions == (0,) and r.rhs_group_dimensions == (0,)
  assert r == lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
  assert [(m.name, m.value) for m in lax.AccuracyMode] == [("HIGHEST", 1), ("DEFAULT", 2)]
  t = lax.Tolerance(atol=1e-3, ulps=2)
  assert (t.atol, t.rtol, t.ulps) == (1e-3, 0.0, 2)
  with pytest.raises(ValueError, match="At least one of atol, rtol, or ulps must be set."):
    lax.Tolerance()
  with pytest.raises(ValueError, match="Tolerances must be non-negative."):
    lax.Tolerance(atol=-1.)
  np.testing.assert_allclose(lax.exp(np.float32(1.), accuracy=t), np.exp(np.float32(1.)))
  assert lax.linear_solve_p.name == "custom_linear_solve"
  assert lax.approx_top_k_p.name == "approx_top_k"
  assert lax.DotDimensionNumbers is not None and lax.PrecisionLike is not None


def test_pcast_pbroadcast_pswapaxes():
  x = np.ones(2)
  assert lax.pcast(x, (), to="varying") is x
  with pytest.raises(ValueError, match="Got unexpected `to` value"):
    lax.pcast(x, "i", to="foo")
  with pytest.raises(TypeError, match="must be a tuple or a str"):
    lax.pcast(x, {"i"}, to="varying")
  out = nbjax.vmap(lambda v: lax.pbroadcast(v, "i", 1), axis_name="i")(np.arange(3.))
  np.testing.assert_array_equal(out, [1., 1., 1.])
  a = np.arange(6, dtype=np.int32).reshape(3, 2)
  out = nbjax.vmap(lambda v: lax.pbroadcast(v, "i", 2), axis_name="i")(a)
  assert out.dtype == np.int32
  np.testing.assert_array_equal(out, np.broadcast_to(a[2], (3, 2)))
  m = np.arange(9.).reshape(3, 3)
  out = nbjax.vmap(lambda v: lax.pswapaxes(v, "i", 0), axis_name="i")(m)
  np.testing.assert_array_equal(out, m.T)


# ------------------------------------------- as JAX 0.10.2's lax_autodiff_test (x64 values)

def test_reduce_of_a_pair_has_a_reverse_mode_as_jax():
  x = np.array([[1.764, 0.4, 0.979, 2.241], [1.868, -0.977, 0.95, -0.151],
                [-0.103, 0.411, 0.144, 1.454]])
  y = np.array([[0.761, 0.122, 0.444, 0.334], [1.494, -0.205, 0.313, -0.854],
                [-2.553, 0.654, 0.864, -0.742]])
  f = lambda x, y: lax.reduce((x, y), (np.array(0.), np.array(1.)),
                              lambda a, b: (a[0] + b[0], a[1] * b[1]), (1,))
  gx, gy = nbjax.grad(lambda x, y: sum(t.sum() for t in f(x, y)), (0, 1))(x, y)
  np.testing.assert_allclose(np.asarray(gx), np.ones((3, 4)))
  np.testing.assert_allclose(np.asarray(gy), [
      [0.018092112, 0.112853256, 0.031009228, 0.041221848],
      [0.05479691, -0.399349188, 0.26155458, -0.09586251],
      [-0.419271552, 1.636697664, 1.238889204, -1.442587968]], rtol=1e-9)
  nbjax.test_util.check_grads(f, (x, y), 2, ["fwd", "rev"], 1e-4, 1e-4)


def test_complex_reduce_max_min_lexicographic_as_jax():
  x = jnp.array([1 + 2j, 3 - 1j, 3 + 0.5j, -1 + 5j], jnp.complex64)
  assert complex(lax.reduce_max(x, (0,))) == 3 + 0.5j
  assert complex(lax.reduce_min(x, (0,))) == -1 + 5j
  assert complex(lax.reduce(x, np.complex64(-np.inf), lax.max, (0,))) == 3 + 0.5j
  assert complex(nbjax.jit(lambda v: lax.reduce_max(v, (0,)))(x)) == 3 + 0.5j
  g = nbjax.grad(lambda v: lax.reduce_max(v, (0,)).real)(x)
  np.testing.assert_array_equal(np.asarray(g), [0, 0, 1, 0])


def test_mul_out_dtype_and_int_power_derivative_at_zero_as_jax():
  out = lax.mul(jnp.float32(2), jnp.bfloat16(3), out_dtype="float64")
  assert out.dtype == np.float64 and float(out) == 6.0
  out = lax.mul(jnp.float32(1.1), jnp.float32(3.3), out_dtype="bfloat16")
  assert out.dtype == jnp.bfloat16 and float(out) == 3.625
  g = nbjax.grad(lambda a, b: lax.mul(a, b, out_dtype="float32"))(jnp.float16(2), jnp.bfloat16(3))
  assert g.dtype == np.float16 and float(g) == 3.0
  # x ** n with a traced integer n: lax.pow with the integer exponent (d/dx x**0 = 0 at 0)
  assert float(nbjax.grad(nbjax.jit(lambda x, n: x ** n))(0., 0)) == 0.0
  jaxpr = nbjax.make_jaxpr(lambda x, n: x ** n)(0., 0)
  pow_eqn = [e for e in jaxpr.jaxpr.eqns if str(e.primitive) == "pow"][0]
  assert pow_eqn.invars[1].aval.dtype == np.int64


def test_conv_accepts_bfloat16_as_jax():
  x = jnp.arange(2 * 3 * 5 * 5, dtype="bfloat16").reshape(2, 3, 5, 5) / 50
  w = jnp.ones((4, 3, 2, 2), "bfloat16")
  y = lax.conv(x, w, (1, 1), "VALID")
  assert y.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(y[0, 0, 0, :3], np.float32), [6.71875, 6.96875, 7.1875])
  yj = nbjax.jit(lambda a, b: lax.conv(a, b, (1, 1), "VALID"))(x, w)
  np.testing.assert_array_equal(np.asarray(yj[0, 0, 0, :3], np.float32), [6.71875, 6.96875, 7.1875])


def test_dot_algorithm_and_export_module_as_jax():
  import importlib
  a = lax.DotAlgorithm(lhs_precision_type=np.float16, rhs_precision_type=np.float16,
                       accumulation_type=np.float32)
  assert a.lhs_component_count == 1 and a.allow_imprecise_accumulation is False
  x = jnp.ones((3, 4), "float16")
  for p in (a, "F16_F16_F32", lax.DotAlgorithmPreset.F32_F32_F32):
    assert lax.dot(x, x.T, precision=p).dtype == np.float16
    out = nbjax.jit(lambda v: lax.dot(v, v.T, precision=p))(x)
    assert out.dtype == np.float16 and float(out[0, 0]) == 4.0
  export = importlib.import_module("nbjax.export")  # `from jax import export` imports
  assert nbjax.export is export and not export.is_symbolic_dim(3)
  with pytest.raises(NotImplementedError, match="not implemented by nbjax"):
    export.symbolic_shape("a, b")


def test_lax_errors_weak_types_and_bf16_reduce_precision_as_jax():
  with pytest.raises(ValueError, match=r"Sizes passed to split must be nonnegative, got \[-1\]"):
    lax.split(np.arange(5), [-1])
  with pytest.raises(ValueError, match="reduce found non-scalar initial value"):
    lax.reduce({"x": np.ones(5)}, {"x": np.ones(5)}, lambda x, y: dict(x=x["x"] + y["x"]), [0])
  with pytest.raises(ValueError, match="top_k returns int32 indices, which will overflow"):
    nbjax.eval_shape(lambda x: lax.top_k(x, 100),
                     nbjax.ShapeDtypeStruct((2 ** 31 + 1,), np.dtype("bfloat16")))
  with pytest.raises(TypeError, match="Scatter op has window of size 1; doesn't match operand "
                                      "of rank 2"):
    lax.scatter(np.ones((3, 2)), np.zeros((1, 1), np.int32), np.ones((1, 2)),
                lax.ScatterDimensionNumbers((1,), (), (0,)))
  for op, init0 in ((lax.mul, 1), (lax.add, 0), (lax.add, 5)):
    for aw in (True, False):
      for iw in (True, False):
        arr = lax._convert_element_type(np.arange(10), np.dtype(int), weak_type=aw)
        init = lax._convert_element_type(init0, np.dtype(int), weak_type=iw)
        f = lambda a, i: lax.reduce(a, i, op, (0,))
        assert f(arr, init).weak_type == (aw and iw) == nbjax.jit(f)(arr, init).weak_type
  x = jnp.array([1.2345, -3.75, 1e-3, 70000.0], jnp.bfloat16)
  y = lax.reduce_precision(x, 5, 10)  # bfloat16 eagerly as under jit (float16's format)
  np.testing.assert_array_equal(np.asarray(y, np.float32),
                                np.asarray(nbjax.jit(lambda v: lax.reduce_precision(v, 5, 10))(x),
                                           np.float32))
  assert np.isinf(np.asarray(y, np.float32)[3]) and y.dtype == jnp.bfloat16
  with nbjax.default_matmul_precision("F32_F32_F32"):
    assert nbjax.jit(lax.dot)(jnp.ones((3, 4), "float32"), jnp.ones((4, 3), "float32")).dtype == \
        np.float32


def test_mulhi_size1_broadcast_and_patches_precision_as_jax():
  x = np.random.RandomState(0).randint(-2 ** 31, 2 ** 31 - 1, (3, 4)).astype(np.int32)
  y = np.random.RandomState(1).randint(-2 ** 31, 2 ** 31 - 1, (3, 1)).astype(np.int32)
  want = ((x.astype(np.int64) * y.astype(np.int64)) >> 32).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(lax.mulhi(x, y)), want)
  np.testing.assert_array_equal(np.asarray(nbjax.jit(lax.mulhi)(x, y)), want)
  v = jnp.arange(2 * 3 * 5 * 6.).reshape(2, 3, 5, 6)
  for p in (None, lax.Precision.DEFAULT, lax.Precision.HIGHEST, "highest"):
    assert lax.conv_general_dilated_patches(v, (2, 3), (2, 3), "VALID",
                                            precision=p).shape == (2, 18, 2, 2)


def test_top_k_is_a_primitive_lowered_to_chlo_top_k():
  # JAX 0.10.2: top_k[axis k] in jaxprs, chlo.top_k under jit; XLA's total order (-NaN last)
  import nbjax
  from nbjax import lax
  import nbjax.numpy as jnp
  x = jnp.array([[1.0, np.nan, -0.0, 0.0, 5.0, 5.0, -np.nan], [3, 2, 1, 0, -1, -2, -3]])
  assert "top_k[axis=1 k=2]" in str(nbjax.make_jaxpr(lambda x: lax.top_k(x, 2))(x))
  text = nbjax.jit(lambda x: lax.top_k(x, 3)).lower(jnp.arange(5.)).as_text()
  assert "chlo.top_k(%arg0, k = 3) : tensor<5xf64> -> (tensor<3xf64>, tensor<3xi32>)" in text
  for f in (lambda x: lax.top_k(x, 4), nbjax.jit(lambda x: lax.top_k(x, 4))):
    v, i = f(x)
    np.testing.assert_array_equal(np.asarray(v), [[np.nan, 5, 5, 1], [3, 2, 1, 0]])
    np.testing.assert_array_equal(np.asarray(i), [[1, 4, 5, 0], [0, 1, 2, 3]])
  v, i = lax.top_k(x, 1, axis=0)
  np.testing.assert_array_equal(np.asarray(v), [[3, np.nan, 1, 0, 5, 5, -3]])
  v, i = lax.top_k(jnp.array([-0.0, 0.0, -0.0], np.float32), 3)
  assert np.signbit(np.asarray(v)).tolist() == [False, True, True] and i.tolist() == [1, 0, 2]


def test_const_of_weak_ml_dtypes_scalars():
  # lax._const keeps the operand's dtype for weak bfloat16/float8/int4 scalars (kind "V"):
  # JAX lax_test test_const
  import ml_dtypes
  from nbjax.lax import _convert_element_type
  for d in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.int4, np.float16):
    c = lax._const(_convert_element_type(0, np.dtype(d), weak_type=True), 0)
    assert np.dtype(c.dtype) == np.dtype(d)
  assert type(lax._const(_convert_element_type(0, np.dtype("float64"), weak_type=True), 1)) is float
