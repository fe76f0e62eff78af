"""Typed PRNG keys (``random.key``): JAX's ``key<impl>`` key arrays, their three
implementations, transformations over them and their errors. Expected values are JAX 0.10.2's
(x64 on), recorded once from ``jax.random``."""
import re

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
import nbjax.random as R
from nbjax import dtypes, lax, tree_util


def data(k):
  return np.asarray(R.key_data(k)).tolist()


def test_key_array_basics():
  k = R.key(42)
  assert k.shape == () and k.ndim == 0 and k.size == 1 and k.itemsize == 8
  assert str(k.dtype) == "key<fry>" and repr(k.dtype) == "key<fry>"
  assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[ 0 42]"
  assert jnp.issubdtype(k.dtype, dtypes.prng_key) and jnp.issubdtype(k.dtype, dtypes.extended)
  assert not jnp.issubdtype(k.dtype, np.integer)
  assert R.key_impl(k) == "threefry2x32" and R.key_dtype() == k.dtype
  assert R.key_dtype("rbg") != k.dtype and str(R.key_dtype("unsafe_rbg")) == "key<urbg>"
  assert data(k) == [0, 42]
  assert data(R.wrap_key_data(np.array([0, 42], np.uint32))) == [0, 42]
  np.testing.assert_array_equal(R.PRNGKey(42), [0, 42])  # the raw form stays raw
  assert isinstance(R.PRNGKey(42), nbjax.Array)


def test_split_fold_in_known_answers():
  k = R.key(42)
  ks = R.split(k, 3)
  assert ks.shape == (3,) and ks.dtype == k.dtype
  assert data(ks) == [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]]
  assert data(R.fold_in(k, 7)) == [2547012911, 1371500959]
  # the raw form gives the same bits, raw
  np.testing.assert_array_equal(R.split(R.PRNGKey(42), 3), data(ks))
  with R._threefry_partitionable(False):
    assert data(R.split(R.key(3), 3)) == [[877192987, 1614509672], [1950127089, 3448417067],
                                          [2823528474, 3529024829]]
    np.testing.assert_array_equal(
        R.uniform(R.key(3), (5,), np.float32),
        np.float32([0.20423734188079834, 0.375907301902771, 0.9640969038009644,
                    0.8028970956802368, 0.6574039459228516]))


@pytest.mark.parametrize("impl,split,fold,randint", [
    ("rbg", [[3625411723, 1954958720, 3625411723, 1954958720],
             [195045567, 4062205631, 195045567, 4062205631]],
     [3583082021, 1947592014, 3583082021, 1947592014], [1, 8, 5, 4]),
    ("unsafe_rbg", [[3109483441, 1367189518, 2515982561, 3310080778],
                    [3848958661, 3271070264, 2639373597, 23941900]],
     [3810769997, 2355009018, 1837142617, 748193193], [7, 9, 8, 9]),
])
def test_rbg_impls_bits_equal_jax(impl, split, fold, randint):
  k = R.key(7, impl=impl)
  assert data(k) == [0, 7, 0, 7] and R.key_impl(k) == impl and k.itemsize == 16
  assert data(R.split(k, 2)) == split
  assert data(R.fold_in(k, 5)) == fold
  np.testing.assert_array_equal(R.uniform(k, (3,)), [0.31832361564132916, 0.7706882382244331,
                                                    0.3584157204389644])
  np.testing.assert_array_equal(R.bits(k, (5,), np.uint8), [177, 14, 225, 10, 220])
  np.testing.assert_array_equal(R.bits(k, (2,), np.uint64),
                                np.uint64([5872034270353486769, 14216688691144218849]))
  np.testing.assert_allclose(R.normal(k, (3,), np.float32),
                             [0.594714879989624, -0.47239163517951965, 0.2167484611272812],
                             rtol=1e-6)
  np.testing.assert_array_equal(R.randint(k, (4,), 0, 10), randint)
  # jit lowers the same computation (XLA's RngBitGenerator) as the eager path
  np.testing.assert_array_equal(nbjax.jit(lambda k: R.key_data(R.split(k, 2)))(k), split)
  np.testing.assert_array_equal(nbjax.jit(lambda k: R.uniform(k, (3,)))(k), R.uniform(k, (3,)))


def test_default_impl_config():
  nbjax.config.update("jax_default_prng_impl", "rbg")
  try:
    assert R.key(0).dtype == R.key_dtype("rbg")
    assert R.PRNGKey(7).shape == (4,)
    np.testing.assert_array_equal(R.bits(R.PRNGKey(7), (5,), np.uint8), [177, 14, 225, 10, 220])
    assert R.default_prng_impl() is nbjax.prng.prngs["rbg"]  # (JAX's private helper)
  finally:
    nbjax.config.update("jax_default_prng_impl", "threefry2x32")
  assert R.default_prng_impl() is nbjax.prng.prngs["threefry2x32"]
  with nbjax.default_prng_impl("philox4x32"):
    assert R.default_prng_impl() is nbjax.prng.prngs["philox4x32"]
  with pytest.raises(ValueError, match=re.escape(  # (JAX's message)
      "new enum value must be in ['threefry2x32', 'threefry4x32', 'rbg', 'unsafe_rbg', "
      "'philox2x32', 'philox4x32'], got philox of type <class 'str'>.")):
    nbjax.config.update("jax_default_prng_impl", "philox")


def test_lax_rng_bit_generator():
  key = np.array([0, 7, 0, 7], np.uint32)
  new, b = lax.rng_bit_generator(key, (5,), np.uint8)
  np.testing.assert_array_equal(b, [177, 14, 225, 10, 220])
  new_j, b_j = nbjax.jit(lambda k: lax.rng_bit_generator(k, (5,), np.uint8))(key)
  np.testing.assert_array_equal(new, new_j)
  np.testing.assert_array_equal(b, b_j)
  with pytest.raises(TypeError, match="rng_bit_generator"):
    lax.rng_bit_generator(np.zeros(3, np.uint32), (2,))


def test_bernoulli_known_answers():
  bits = lambda x: np.packbits(np.asarray(x)).tolist()
  assert bits(R.bernoulli(R.key(3), 0.3, (64,))) == [48, 3, 30, 96, 160, 178, 3, 94]
  assert bits(R.bernoulli(R.key(3), np.float32(0.3), (64,))) == [138, 213, 22, 68, 32, 3, 144, 193]
  p = jnp.array([0., 0.2, 0.5, 0.9, 1.0, np.nan])
  np.testing.assert_array_equal(R.bernoulli(R.key(3), p, (2, 6)),
                                [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0]])
  np.testing.assert_array_equal(nbjax.jit(lambda k, p: R.bernoulli(k, p, (2, 6)))(R.key(3), p),
                                [[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0]])
  with R._threefry_partitionable(False):
    assert bits(R.bernoulli(R.key(3), 0.3, (64,))) == [16, 100, 34, 122, 27, 130, 24, 112]


def test_indexing_and_reshape():
  ks = R.split(R.key(0), 6)
  raw = np.asarray(R.key_data(ks))
  assert data(ks[2]) == raw[2].tolist()
  assert data(ks[1:4]) == raw[1:4].tolist() and ks[1:4].shape == (3,)
  assert data(ks[::-2]) == raw[::-2].tolist()
  assert data(ks[np.array([True, False] * 3)]) == raw[::2].tolist()
  r = ks.reshape(2, 3)
  assert r.shape == (2, 3) and data(r[1, 2]) == raw[5].tolist()
  assert data(r[..., 0]) == raw.reshape(2, 3, 2)[:, 0].tolist()
  assert r.T.shape == (3, 2) and data(r.T[2, 1]) == raw[5].tolist()
  assert r.ravel().shape == (6,) and ks[None].shape == (1, 6) and ks[None].squeeze().shape == (6,)
  assert len(ks) == 6 and [data(k) for k in ks] == raw.tolist()
  np.testing.assert_array_equal(ks == ks, [True] * 6)
  np.testing.assert_array_equal(ks[0] != ks[1], True)
  with pytest.raises(IndexError):
    R.key(0)[0]


def test_transformations():
  k = R.key(0)
  ks = R.split(k, 3)
  # jit: key arrays in and out (lowered as their uint32 data)
  out = nbjax.jit(lambda k: R.split(k))(k)
  assert out.dtype == k.dtype and data(out) == data(R.split(k))
  np.testing.assert_allclose(nbjax.jit(lambda k: R.normal(k, (3,)))(k), R.normal(k, (3,)),
                             rtol=1e-15)
  # vmap over a key array: each key's draws (JAX's values)
  v = nbjax.vmap(lambda k: R.normal(k))(ks)
  np.testing.assert_array_equal(v, [R.normal(ks[i]) for i in range(3)])
  assert data(nbjax.vmap(lambda k: R.fold_in(k, 1))(R.split(R.key(42), 2))) == [
      [1705926158, 899080142], [2350016172, 1168365246]]
  # loops carry keys
  assert data(lax.fori_loop(0, 3, lambda i, k: R.split(k)[0], k)) == [683029726, 1624662641]
  ys = lax.scan(lambda k, _: (R.split(k)[0], R.uniform(k)), k, None, length=3)[1]
  np.testing.assert_allclose(ys, [0.41845711, 0.969948, 0.15903025], rtol=1e-7)
  # grad and jvp with a key as a non-differentiable input
  g = nbjax.grad(lambda x, k: x * R.normal(k))(1.0, k)
  np.testing.assert_allclose(g, -0.2058421394796434, rtol=1e-14)
  np.testing.assert_allclose(nbjax.jvp(lambda x: x * R.normal(k), (1.0,), (1.0,))[1],
                             -0.2058421394796434, rtol=1e-14)
  # pytrees: keys travel through tree_map inside containers
  tree = {"a": k, "b": [ks]}
  back = tree_util.tree_unflatten(*reversed(tree_util.tree_flatten(tree)))
  assert back["a"].dtype == k.dtype and data(back["b"][0]) == data(ks)


def test_errors_match_jax():
  k = R.key(0)
  with pytest.raises(TypeError, match="add does not accept dtypes key<fry>"):
    k + 1
  with pytest.raises(TypeError, match="mul does not accept dtypes"):
    2 * k
  with pytest.raises(TypeError, match="cannot be converted to a NumPy array"):
    np.asarray(k)
  with pytest.raises(ValueError, match='unrecognized PRNG implementation "foo"'):
    R.key(0, impl="foo")
  with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(2,\)"):
    R.wrap_key_data(np.zeros(3, np.uint32))
  with pytest.raises(TypeError, match=r"expected key_data.shape to end with \(4,\)"):
    R.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")
  with pytest.raises(ValueError, match="split accepts a single key"):
    R.split(R.split(k, 3))
  with pytest.raises(ValueError, match="uniform accepts a single key"):
    R.uniform(R.split(k, 3))


def test_keys_as_nondifferentiable_inputs():
  k = R.key(0)
  f = lambda x, k: x * R.normal(k)
  # grad w.r.t. a key is JAX's TypeError; with allow_int its gradient is float0 of key shape
  with pytest.raises(TypeError, match="but got key<fry>"):
    nbjax.grad(lambda k: 1.0)(k)
  gx, gk = nbjax.grad(f, argnums=(0, 1), allow_int=True)(1.0, k)
  np.testing.assert_allclose(gx, -0.2058421394796434, rtol=1e-14)
  assert gk.dtype == dtypes.float0 and gk.shape == ()
  # jvp: a key's tangent is a float0 array of the key's shape
  ks = R.split(k, 3)
  y, t = nbjax.jvp(lambda ks, x: nbjax.vmap(R.normal)(ks) * x, (ks, 2.0),
                   (np.zeros((3,), dtypes.float0), 1.0))
  np.testing.assert_allclose(t, y / 2, rtol=1e-15)
  with pytest.raises(TypeError, match="must be a float0 array of that shape"):
    nbjax.jvp(f, (1.0, k), (1.0, np.zeros((2,), dtypes.float0)))


def test_key_arrays_are_pytree_leaves():
  k, ks = R.key(0), R.split(R.key(1), 3)
  assert tree_util.tree_leaves(k) == [k] and tree_util.tree_leaves({"a": [k, ks]})[1] is ks
  assert repr(nbjax.tree.structure(k)) == "PyTreeDef(*)"
  assert (repr(tree_util.tree_structure({"a": k, "b": (ks, 1.0)}))
          == "PyTreeDef({'a': *, 'b': (*, *)})")
  seen = []
  out = nbjax.tree.map(lambda x: seen.append(x) or x.shape, {"a": k, "b": [ks]})
  assert out == {"a": (), "b": [(3,)]} and seen[0] is k and seen[1] is ks
  assert nbjax.tree.map(lambda x, y: (x.dtype, y), [k, ks], [1, 2]) == [(k.dtype, 1),
                                                                       (k.dtype, 2)]
  assert tree_util.tree_leaves_with_path({"a": k}) == [((tree_util.DictKey("a"),), k)]
  assert tree_util.all_leaves([k, ks]) and tree_util.tree_all([True, k.shape == ()])
  leaves, tree = tree_util.tree_flatten([k, (ks,)])
  assert len(leaves) == 2 and tree_util.tree_unflatten(tree, leaves)[1][0] is ks
  # the is_leaf form sees keys as leaves too (it is not asked about their data)
  assert tree_util.tree_leaves([k], is_leaf=lambda x: False) == [k]
  assert tree_util.tree_transpose(tree_util.tree_structure([0, 0]),
                                  tree_util.tree_structure((0, 0)),
                                  [(k, ks), (ks, k)]) == ([k, ks], [ks, k])


@pytest.mark.needs_guard  # records the values a function sees (impure)
def test_keys_through_jit():
  k, ks = R.key(0), R.split(R.key(1), 3)
  # arguments and results in containers, and a closed-over key
  out = nbjax.jit(lambda t: {"s": R.split(t["k"], 3), "f": [R.fold_in(t["k"], 5)]})({"k": k})
  assert out["s"].dtype == k.dtype and out["s"].shape == (3,)
  assert data(out["s"]) == data(R.split(k, 3)) and data(out["f"][0]) == data(R.fold_in(k, 5))
  assert data(nbjax.jit(lambda: R.split(ks[1]))()) == data(R.split(ks[1]))
  # structural jnp functions on traced keys
  st = nbjax.jit(lambda a, b: jnp.stack([a, b], axis=-1))(ks, ks[::-1])
  assert st.shape == (3, 2) and data(st[2, 1]) == data(ks[0])
  w = nbjax.jit(lambda c, a, b: jnp.where(c, a, b))(np.array([True, False, True]), ks, k)
  assert [data(x) for x in w] == [data(ks[0]), data(k), data(ks[2])]
  # a traced key prints as a traced key, and arithmetic on it is JAX's error
  shown = []
  nbjax.jit(lambda k: shown.append(repr(k[1:])) or k)(ks)
  nbjax.vmap(lambda k: shown.append(repr(k)) or k)(ks)
  assert shown == ["JitTracer(key<fry>[2])", "VmapTracer(aval=key<fry>[], batched=key<fry>[3])"]
  with pytest.raises(TypeError, match="add does not accept dtypes key<fry>, int64"):
    nbjax.jit(lambda k: k + 1)(k)


def test_keys_through_vmap():
  ks = R.split(R.key(1), 4)
  s = nbjax.vmap(R.split)(ks)
  assert s.shape == (4, 2) and data(s) == [data(R.split(x)) for x in ks]
  s3 = nbjax.vmap(lambda k: R.split(k, 3), out_axes=1)(ks)
  assert s3.shape == (3, 4) and data(s3[:, 2]) == data(R.split(ks[2], 3))
  # negative axes count the key array's axes, not its data's
  assert nbjax.vmap(R.key_data, in_axes=-1)(ks).shape == (4, 2)
  sm = nbjax.vmap(lambda k: R.split(k, 3), out_axes=-1)(ks)
  assert sm.shape == (3, 4) and data(sm[1, 3]) == data(R.split(ks[3], 3)[1])
  kk = ks.reshape(2, 2)
  col = nbjax.vmap(lambda k: k, in_axes=1, out_axes=0)(kk)
  assert data(col) == data(kk.T)
  # a key and an array mapped together; keys unmapped (in_axes None)
  u = nbjax.vmap(lambda k, x: R.uniform(k) + x, in_axes=(None, 0))(ks[0], jnp.arange(3.))
  np.testing.assert_allclose(u, R.uniform(ks[0]) + np.arange(3.), rtol=1e-15)


def test_keys_through_control_flow():
  k, ks = R.key(0), R.split(R.key(1), 4)
  n, kw = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, R.split(c[1])[0]), (0, k))
  assert n == 3 and data(kw) == data(lax.fori_loop(0, 3, lambda i, k: R.split(k)[0], k))
  assert data(lax.cond(True, lambda k: R.split(k)[1], lambda k: k, k)) == data(R.split(k)[1])
  assert data(lax.switch(1, [lambda k: R.split(k)[0], lambda k: k], k)) == data(k)
  # keys as scan xs and ys
  tot, ys = lax.scan(lambda c, x: (c + R.uniform(x), R.fold_in(x, 1)), 0., ks)
  np.testing.assert_allclose(tot, sum(float(R.uniform(x)) for x in ks), rtol=1e-14)
  assert ys.shape == (4,) and data(ys) == [data(R.fold_in(x, 1)) for x in ks]
  jw = nbjax.jit(lambda p, k: lax.cond(p, lambda k: R.split(k)[0], lambda k: k, k))(True, k)
  assert data(jw) == data(R.split(k)[0])


def test_keys_float0_tangents_and_cotangents():
  k = R.key(0)
  _, f_vjp = nbjax.vjp(lambda x, k: x * R.normal(k), 1.0, k)
  gx, gk = f_vjp(1.0)
  assert gk.dtype == dtypes.float0 and gk.shape == ()
  # a key output: float0 tangent out, float0 cotangent in, both of the key array's shape
  f = lambda x, k: (x * 2, R.split(k, 3))
  (y, ko), (ty, tk) = nbjax.jvp(f, (1.0, k), (1.0, np.zeros((), dtypes.float0)))
  assert ko.shape == (3,) and tk.dtype == dtypes.float0 and tk.shape == (3,) and ty == 2
  _, f_vjp = nbjax.vjp(f, 1.0, k)
  gx, gk = f_vjp((1.0, np.zeros((3,), dtypes.float0)))
  assert gx == 2 and gk.dtype == dtypes.float0 and gk.shape == ()
  with pytest.raises(ValueError, match="float0 of its shape"):
    f_vjp((1.0, np.zeros((2,), dtypes.float0)))
  # grad through a scan over keys, and a jitted grad taking a key
  ks = R.split(k, 3)
  g = nbjax.grad(lambda x: lax.scan(lambda c, kk: (c * R.normal(kk), None), x, ks)[0])(1.0)
  np.testing.assert_allclose(g, np.prod([float(R.normal(x)) for x in ks]), rtol=1e-14)
  np.testing.assert_allclose(nbjax.jit(nbjax.grad(lambda x, k: x * R.normal(k)))(1.0, k),
                             R.normal(k), rtol=1e-15)
  # a key as a custom_vjp residual, under checkpoint, and under jacfwd
  @nbjax.custom_vjp
  def f(x, k):
    return x * R.normal(k)
  f.defvjp(lambda x, k: (f(x, k), k), lambda k, g: (2 * g * R.normal(k), None))
  np.testing.assert_allclose(nbjax.grad(f)(1.0, k), 2 * R.normal(k), rtol=1e-15)
  np.testing.assert_allclose(nbjax.grad(nbjax.checkpoint(lambda x, k: x * R.normal(k)))(1.0, k),
                             R.normal(k), rtol=1e-15)
  np.testing.assert_allclose(nbjax.jacfwd(lambda x, k: x * R.normal(k, (2,)))(1.0, k),
                             R.normal(k, (2,)), rtol=1e-15)


def test_jnp_functions_on_keys():
  k, ks = R.key(0), R.split(R.key(1), 4)
  raw = np.asarray(R.key_data(ks))
  assert data(jnp.stack([k, k])) == [[0, 0], [0, 0]]
  assert data(jnp.concatenate([ks, ks[:1]])) == raw.tolist() + raw[:1].tolist()
  r = jnp.reshape(ks, (2, 2))
  assert r.shape == (2, 2) and data(jnp.ravel(r)) == raw.tolist()
  assert data(jnp.transpose(r, (-1, 0))) == raw.reshape(2, 2, 2).transpose(1, 0, 2).tolist()
  assert jnp.expand_dims(k, 0).shape == (1,) and jnp.squeeze(ks[None]).shape == (4,)
  assert data(jnp.broadcast_to(k, (3,))) == [[0, 0]] * 3
  assert data(jnp.take(ks, jnp.array([0, 2]))) == raw[[0, 2]].tolist()
  np.testing.assert_array_equal(jnp.equal(ks, ks[0]), [True, False, False, False])
  np.testing.assert_array_equal(jnp.not_equal(ks, ks[0]), [False, True, True, True])
  assert jnp.asarray(k) is k and data(jnp.array(ks)) == raw.tolist()
  assert jnp.shape(ks) == (4,) and jnp.ndim(ks) == 1 and len(ks) == 4
  assert repr(ks[:2]) == ("Array((2,), dtype=key<fry>) overlaying:\n"
                          f"{np.asarray(raw[:2])}")
  with pytest.raises(TypeError, match="add does not accept dtypes key<fry>, int64"):
    jnp.add(k, 1)
  with pytest.raises(TypeError, match="Cannot interpret 'key<fry>' as a data type"):
    jnp.sin(k)
  with pytest.raises(TypeError, match="sub does not accept dtype key<fry> at position 0"):
    k - k
  with pytest.raises(TypeError, match="lt does not accept dtype key<fry> at position 0"):
    ks < ks
  with pytest.raises(TypeError, match="stack does not accept dtypes key<fry>, float64"):
    jnp.stack([k, 1.0])
  with pytest.raises(TypeError, match="stack does not accept dtypes key<fry>, key<rbg>"):
    jnp.stack([k, R.key(0, impl="rbg")])
  with pytest.raises(ValueError, match="Zero-dimensional"):
    jnp.concatenate([k, k])


def test_eval_shape_device_put_with_keys():
  k = R.key(0)
  s = nbjax.eval_shape(lambda k: (R.split(k, 3), R.uniform(k)), k)
  assert s[0] == nbjax.ShapeDtypeStruct((3,), k.dtype)
  assert s[1] == nbjax.ShapeDtypeStruct((), np.float64)
  rbg = nbjax.ShapeDtypeStruct((5,), R.key_dtype("rbg"))
  assert nbjax.eval_shape(lambda k: k[1:], rbg) == nbjax.ShapeDtypeStruct((4,), rbg.dtype)
  assert nbjax.eval_shape(R.key_data, rbg) == nbjax.ShapeDtypeStruct((5, 4), np.uint32)
  d = nbjax.device_put({"k": k})["k"]
  assert d.dtype == k.dtype and data(d) == data(k)


def _ref(key_fn, data_fn, *keys):
  """``key_fn`` on key arrays, eagerly and under jit, against ``data_fn`` on their data (as
  JAX's JnpWithKeyArrayTest checks)."""
  want = data_fn(*[R.key_data(k) if isinstance(k.dtype, dtypes.ExtendedDType) else k
                   for k in keys])
  for f in (key_fn, nbjax.jit(key_fn)):
    got = f(*keys)
    for g, w in zip(got if isinstance(got, list) else [got],
                    want if isinstance(want, list) else [want]):
      assert isinstance(g.dtype, dtypes.ExtendedDType), g
      np.testing.assert_array_equal(R.key_data(g), w)


@pytest.mark.parametrize("name,key_fn,data_fn", [
    ("flip", jnp.flip, lambda d: jnp.flip(d, 0)),
    ("roll", lambda k: jnp.roll(k, 1), lambda d: jnp.roll(d, 1, axis=0)),
    ("tile", lambda k: jnp.tile(k, 2), lambda d: jnp.tile(d, (2, 1))),
    ("repeat", lambda k: jnp.repeat(k, 2), lambda d: jnp.repeat(d, 2, axis=0)),
    ("swapaxes", lambda k: jnp.swapaxes(k[None], 0, 1), lambda d: jnp.swapaxes(d[None], 0, 1)),
    ("moveaxis", lambda k: jnp.moveaxis(k[None], 0, -1), lambda d: jnp.moveaxis(d[None], 0, 1)),
    ("split", lambda k: jnp.split(k, 2), lambda d: jnp.split(d, 2)),
    ("atleast_2d", jnp.atleast_2d, lambda d: d[None]),
    ("rot90", lambda k: jnp.rot90(k.reshape(2, 2)),
     lambda d: jnp.rot90(d.reshape(2, 2, 2), axes=(0, 1))),
    ("at_get", lambda k: k.at[np.array([False, True, True, False])].get(), lambda d: d[1:3]),
    ("at_set", lambda k: k.at[1:3].set(k[0]), lambda d: d.at[1:3].set(d[0])),
    ("zeros_like", jnp.zeros_like, jnp.zeros_like),
    ("ones_like", jnp.ones_like, jnp.ones_like),
    ("full_like", lambda k: jnp.full_like(k, 100), lambda d: jnp.full_like(d, 100)),
    ("full_like_key", lambda k: jnp.full_like(k, k[0]), lambda d: jnp.full_like(d, d[0])),
    ("full", lambda k: jnp.full(k.shape, 7, dtype=k.dtype), lambda d: jnp.full(d.shape, 7, d.dtype)),
    ("zeros", lambda k: jnp.zeros(k.shape, k.dtype), lambda d: jnp.zeros(d.shape, d.dtype)),
    ("broadcast_arrays", lambda k: jnp.broadcast_arrays(k[0], k)[0],
     lambda d: jnp.broadcast_to(d[0], d.shape)),
])
def test_structural_jnp_functions_on_keys(name, key_fn, data_fn):
  """The structural functions JAX allows on key arrays act on the keys (their data moved,
  repeated, split or filled as JAX's key rules do)."""
  _ref(key_fn, data_fn, R.split(R.key(3), 4))


def test_key_dtype_errors_and_result_type():
  k = R.key(0)
  assert jnp.result_type(k) == k.dtype and jnp.result_type(k, k) == k.dtype
  with pytest.raises(TypeError, match="add does not accept dtype key<fry> at position 0"):
    jnp.add(k, k)
  with pytest.raises(TypeError, match="neg does not accept dtype key<fry>. Accepted"):
    jnp.negative(k)
  with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry> to int64"):
    lax.convert_element_type(k, int)
  with pytest.raises(TypeError, match="scatter does not accept dtypes key<fry>, float64"):
    R.split(k, 2).at[0].set(1.0)


def test_key_data_errors_and_bounds_as_jax():
  bad = "JAX encountered invalid PRNG key data: expected key_data"
  with pytest.raises(TypeError, match=f"^{bad}.dtype = uint32; got dtype=int64$"):
    R.wrap_key_data(np.array([0, 42]))
  with pytest.raises(TypeError, match=rf"^{bad}.shape to end with \(2,\); got shape=\(3,\)"):
    R.wrap_key_data(np.array([0, 42, 1], np.uint32))
  with pytest.raises(TypeError, match=f"^{bad}.ndim >= 1; got ndim=0$"):
    R.wrap_key_data(R.key(0))
  with pytest.raises(TypeError, match=f"^{bad}.dtype = uint32; got dtype=int64$"):
    R.uniform(np.array([1, 2]), (2,))
  with pytest.raises(ValueError, match=r"key array of shape \(2, 2\) != \(\)"):
    R.uniform(R.split(R.PRNGKey(0)), (2,))  # (a raw key array: its data's shape)
  with pytest.raises(OverflowError, match="^Python integer -1 out of bounds for uint32$"):
    R.fold_in(R.key(0), -1)
  with pytest.raises(TypeError, match=r"^mul got incompatible shapes for broadcasting: \(3,\), "
                     r"\(2,\).$"):
    R.uniform(R.key(0), (3,), minval=jnp.zeros(2))
  # minval/maxval broadcast against the shape (JAX 0.10.2's values)
  got = R.uniform(R.key(0), (2, 3), minval=-2.0, maxval=jnp.array([1.0, 2.0, 3.0]))
  np.testing.assert_allclose(got, [[-0.7446286648508407, -1.1348181815779546, 2.8266073055949876],
                                   [-0.27649839881748606, 0.128905953002171, -0.22547409865127865]],
                             rtol=1e-14)


@pytest.mark.needs_guard  # records the values a function sees (impure)
def test_typeof_a_key_array_is_its_key_aval():
  k = nbjax.random.key(0)
  assert str(nbjax.typeof(k)) == "key<fry>[]" and repr(nbjax.typeof(k)) == "ShapedArray(key<fry>[])"
  assert nbjax.typeof(nbjax.random.split(k, 3)).shape == (3,)
  seen = []
  nbjax.jit(lambda k: seen.append(nbjax.typeof(k)))(k)
  nbjax.vmap(lambda k: seen.append(nbjax.typeof(k)))(nbjax.random.split(k, 2))
  assert [str(a) for a in seen] == ["key<fry>[]", "key<fry>[]"]
  assert str(nbjax.typeof(1.0)) == "~float64[]"
  assert repr(nbjax.typeof(jnp.ones((2, 3), "int32"))) == "ShapedArray(int32[2,3])"


def test_invalid_key_errors_as_jax():
  from nbjax import random
  with pytest.raises(TypeError, match=r"^JAX encountered invalid PRNG key data: expected "
                     r"key_data to have ndim, shape, and dtype attributes. Got 5$"):
    random.uniform(5, (2,))
  with pytest.raises(TypeError, match=r"^unexpected PRNG key type <class 'list'>$"):
    random.uniform([1, 2], (2,))
  with pytest.raises(TypeError, match=r"expected key_data.dtype = uint32; got dtype=float32"):
    random.uniform(np.ones(2, np.float32), (2,))


def test_prng_impl_name_and_tag_default_as_jax():
  # PRNGImpl(key_shape=, seed=, split=, random_bits=, fold_in=, tag=) as JAX's tests build one
  # (jax._src.random.prng.PRNGImpl: name '<unnamed>', tag '?' by default; hashed by tag)
  from nbjax import prng as xr
  base = xr.prngs["threefry2x32"]
  impl = xr.PRNGImpl(key_shape=base.key_shape, seed=base.seed, split=base.split,
                     random_bits=base.random_bits, fold_in=base.fold_in, tag="fry2")
  assert impl.name == "<unnamed>" and hash(impl) == hash("fry2")
  assert xr.PRNGImpl(base.key_shape, base.seed, base.split, base.random_bits, base.fold_in).tag == "?"


def test_key_impl_given_as_key_dtype_or_spec():
  # JAX's resolve_prng_impl: a name, a key dtype or PRNGSpec; both impl and dtype a ValueError
  rbg = R.key_dtype("rbg")
  assert R.key(0, dtype=rbg).dtype == rbg and R.key(0, impl=rbg).dtype == rbg
  assert R.key_impl(R.key(0, dtype=rbg)) == "rbg"
  k = R.key(42, impl="philox4x32")
  assert R.key(42, dtype=k.dtype).dtype == k.dtype and data(R.key(42, dtype=k.dtype)) == data(k)
  w = R.wrap_key_data(np.array([1, 2, 3, 4], np.uint32), dtype=R.key(0, impl="rbg").dtype)
  assert w.dtype == rbg and data(w) == [1, 2, 3, 4]
  with pytest.raises(ValueError, match="Cannot specify both `impl` and `dtype`"):
    R.key(42, impl="threefry2x32", dtype=R.key_dtype("threefry2x32"))
  with pytest.raises(ValueError, match="Cannot specify both `impl` and `dtype`"):
    R.wrap_key_data(np.zeros(2, np.uint32), impl="threefry2x32", dtype=R.key_dtype())
  with pytest.raises(TypeError, match="unrecognized type .* PRNG"):
    R.key(42, impl=object())
  # a key's filled gather under jit: the fill key wraps uint32 max (JAX's)
  keys = R.split(R.key(3, impl="rbg"), 4)
  out = nbjax.jit(lambda x: x.at[100].get(mode="fill"))(keys)
  assert out.dtype == rbg and data(out) == [4294967295] * 4


def test_lax_structural_ops_on_key_arrays():
  # lax.slice/select/dynamic_(update_)slice given key arrays, under jit and vmap and eagerly
  # (JAX 0.10.2's key data)
  ks = R.split(R.key(0), 12).reshape(3, 4)
  lo = lambda k: np.asarray(R.key_data(k))[..., 1].tolist()
  assert lo(ks) == [[2579123966, 3453687069, 2718843009, 3840466878],
                    [433833334, 1887795613, 2909014575, 292468403],
                    [931858003, 450340679, 652965180, 156206175]]
  ys = nbjax.jit(lambda x: lax.slice_in_dim(x, 1, 3))(ks)
  assert type(ys) is type(ks) and ys.shape == (2, 4) and lo(ys) == lo(ks)[1:]
  cs = jnp.ones((3, 4), bool)
  assert str(nbjax.make_jaxpr(lambda c, x: lax.select(c, x, x))(cs, ks)) == (
      "{ lambda ; a:bool[3,4] b:key<fry>[3,4]. let\n    c:key<fry>[3,4] = select_n a b b\n"
      "  in (c,) }")
  assert nbjax.jit(lax.select)(cs, ks, ks).shape == (3, 4)
  assert lo(lax.select(True, ks[0], ks[1])) == lo(ks)[0]
  v = nbjax.vmap(lambda c: lax.select(c, R.key(1), R.key(2)))(jnp.array([True, False]))
  assert data(v) == [[0, 1], [0, 2]]
  i16 = np.int16(1)  # the key axes' start indices take the given indices' dtype
  ds = nbjax.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2))(ks, i16)
  assert ds.shape == (2, 4) and lo(ds) == lo(ks)[1:]
  du = nbjax.jit(lambda x, i: lax.dynamic_update_slice_in_dim(x, x[2:], i, 0))(ks, np.int16(0))
  assert lo(du) == [lo(ks)[2], lo(ks)[1], lo(ks)[2]]
  # the key array keeps working inside the transformation
  n = nbjax.jit(lambda x: R.normal(lax.slice_in_dim(x, 1, 3)[0, 0], (2,)))(ks)
  np.testing.assert_array_equal(n, R.normal(ks[1, 0], (2,)))


def test_key_arrays_are_arrays_with_their_data_attributes():
  # JAX's PRNGKeyArray is a jax.Array; its device/sharding/buffer attributes are its data's
  keys = R.split(R.key(0), 10)
  assert isinstance(keys, nbjax.Array)
  b = keys._base_array
  assert keys.device == b.device and keys.devices() == b.devices()
  assert keys.sharding == b.sharding and keys.committed == b.committed
  assert keys.is_fully_addressable == b.is_fully_addressable
  assert keys.is_fully_replicated == b.is_fully_replicated
  assert keys.on_device_size_in_bytes() == b.on_device_size_in_bytes() == 80
  assert keys.unsafe_buffer_pointer() == b.unsafe_buffer_pointer()
  assert data(keys.addressable_data(0)) == data(keys)
  (s,) = keys.addressable_shards
  assert s.index == (slice(None),) and data(s.data) == data(keys)
  assert len(keys.global_shards) == 1
  assert keys.copy_to_host_async() is None and keys.block_until_ready() is keys
  assert type(nbjax.device_get(keys)) is type(keys)  # (keys stay keys)
  # still no arithmetic, JAX's messages
  for f, msg in [(lambda: jnp.add(keys, 1), "add does not accept dtypes key<fry>, int"),
                 (lambda: jnp.add(keys, keys), "add does not accept dtype key<fry> at position 0"),
                 (lambda: jnp.sin(keys), "Cannot interpret 'key<fry>' as a data type"),
                 (lambda: jnp.sum(keys), "Cannot interpret 'key<fry>' as a data type")]:
    with pytest.raises(TypeError, match=msg):
      f()
  assert jnp.array([keys[0], keys[1]]).shape == (2,)
  assert not keys.is_deleted()
  keys.delete()
  assert keys.is_deleted() and b.is_deleted()


def test_array_delete():
  # JAX's: a deleted array keeps its shape and dtype; reading it raises RuntimeError
  x = nbjax.device_put(jnp.ones((2, 3), jnp.float32))
  view = jnp.asarray(x)
  copy = jnp.array(x, copy=True)
  x.delete()
  assert x.is_deleted() and view.is_deleted() and not copy.is_deleted()
  assert x.shape == (2, 3) and x.dtype == np.float32
  for f in (repr, lambda a: a + 1, nbjax.jit(lambda a: a)):
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[2,3\]."):
      f(x)
  x.delete()  # (again: nothing)
  np.testing.assert_array_equal(copy, np.ones((2, 3)))


def test_custom_derivative_rules_see_float0_key_tangents():
  # JAX's rules see a key's tangent/cotangent as a float0 array (a SymbolicZero with
  # symbolic_zeros), and CustomVJPPrimal leaves over keys
  seen = {}
  f = nbjax.custom_jvp(lambda x, k: x * R.normal(k, ()))

  @f.defjvp
  def f_jvp(primals, tangents):
    (x, k), (xd, kd) = primals, tangents
    seen["jvp"] = kd
    r = R.normal(k, ())
    return x * r, xd * r

  k = R.key(1)
  assert nbjax.grad(f)(0.0, k) == nbjax.grad(lambda x, k: x * R.normal(k, ()))(0.0, k)
  assert seen["jvp"].dtype == dtypes.float0 and seen["jvp"].shape == ()

  for symbolic in (False, True):
    g = nbjax.custom_vjp(lambda _, state: state)

    def fwd(_, state, symbolic=symbolic):
      if symbolic:
        assert type(state[1]).__name__ == "CustomVJPPrimal" and state[1].value.dtype == k.dtype
        state = tree_util.tree_map(lambda x: x.value, state)
      return state, None

    def bwd(_, bar, symbolic=symbolic):
      seen["bwd"] = bar[1]
      return bar[0], bar
    g.defvjp(fwd, bwd, symbolic_zeros=symbolic)
    assert nbjax.grad(lambda t: g(t, (8.0, k))[0])(3.0) == 1.0
    assert seen["bwd"].dtype == dtypes.float0
    assert (type(seen["bwd"]).__name__ == "Zero") == symbolic

  # a rule's float0 tangent for a key output
  h = nbjax.custom_jvp(lambda x, k: (x * 2.0, R.fold_in(k, 3)))

  @h.defjvp
  def h_jvp(p, t):
    (x, k), (xd, _) = p, t
    return h(x, k), (2.0 * xd, np.zeros(k.shape, dtypes.float0))

  out, tout = nbjax.jvp(h, (1.0, k), (1.0, np.zeros((), dtypes.float0)))
  assert data(out[1]) == [3568232559, 2761185182] and tout[0] == 2.0
  assert tout[1].dtype == dtypes.float0
  assert nbjax.jit(nbjax.grad(lambda x: h(x, k)[0]))(1.0) == 2.0


def test_key_equality_rank_promotion_and_conversions():
  # a scalar key against a key array broadcasts under rank promotion 'raise' (JAX's); key
  # arrays of different ranks follow the rank promotion config
  key = R.key(123)
  ka = R.split(key, 5).at[2:4].set(key)
  with nbjax.numpy_rank_promotion("raise"):
    np.testing.assert_array_equal(key == ka, [False, False, True, True, False])
    np.testing.assert_array_equal(ka != key, [True, True, False, False, True])
    np.testing.assert_array_equal(jnp.equal(key, ka), key == ka)
    with pytest.raises(ValueError, match="rank promotion for equal on shapes"):
      R.split(key, 2) == R.split(key, 10).reshape(5, 2)
  with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry> to int"):
    lax.convert_element_type(key, int)
  with pytest.raises(ValueError, match="Cannot convert_element_type from int32 to key<fry>"):
    lax.convert_element_type(np.int32(0), key.dtype)
  s = nbjax.ShapeDtypeStruct.like(key)
  assert s.shape == () and s.dtype == key.dtype and nbjax.eval_shape(lambda x: x, s) == s
  f = nbjax.ShapeDtypeStruct.like(jnp.ones(3, jnp.float32))
  assert (f.shape, f.dtype, f.weak_type) == ((3,), np.float32, False)
  assert nbjax.ShapeDtypeStruct.like(1.0).weak_type


def test_random_seed_offset():
  # jax_random_seed_offset adds to every seed (JAX 0.10.2: key(17) at offset 3 is key(20))
  try:
    nbjax.config.update("jax_random_seed_offset", 3)
    assert data(R.key(17)) == [0, 20] and data(R.key(17, impl="rbg")) == [0, 20, 0, 20]
    np.testing.assert_array_equal(R.PRNGKey(17), [0, 20])
    assert nbjax.jit(lambda s: R.key_data(R.key(s)))(17).tolist() == [0, 20]
  finally:
    nbjax.config.update("jax_random_seed_offset", 0)
  assert data(R.key(17)) == [0, 17]
  assert nbjax.jit(lambda s: R.key_data(R.key(s)))(17).tolist() == [0, 17]
  with pytest.raises(ValueError, match="must be None or of type int"):
    nbjax.config.update("jax_random_seed_offset", "3")


def test_global_key_arrays_from_pieces():
  devices = nbjax.devices()
  mesh = nbjax.sharding.Mesh(np.array(devices), ("x",))
  sharding = nbjax.sharding.NamedSharding(mesh, nbjax.sharding.PartitionSpec("x"))
  n = len(devices)
  out = nbjax.make_array_from_callback(
      (n,), sharding, lambda i: nbjax.vmap(R.key)(jnp.arange(n)[i[0]]))
  assert out.dtype == R.key_dtype() and data(out) == [[0, i] for i in range(n)]
  keys = R.split(R.key(0), n)
  arrays = [nbjax.device_put(keys[i:i + 1], d) for i, d in enumerate(devices)]
  out = nbjax.make_array_from_single_device_arrays((n,), sharding, arrays)
  assert out.dtype == keys.dtype and data(out) == data(keys)


def test_lax_ops_on_eager_key_arrays_errors_and_copy():
  # eager lax ops on keys give the primitive's dtype error, as under jit (JAX's texts)
  k = R.split(R.key(0), 3)
  with pytest.raises(TypeError, match="add does not accept dtype key<fry> at position 0. "
                                      "Accepted dtypes at position 0 are subtypes of integer, "
                                      "floating, complexfloating."):
    lax.add(k, k)
  with pytest.raises(TypeError, match="neg does not accept dtype key<fry>. Accepted dtypes"):
    lax.neg(k)
  from nbjax.lax import elementwise as ew
  lo = [2579123966, 3453687069, 2718843009]
  for c in (ew.copy_p.bind(k), nbjax.jit(lambda k: ew.copy_p.bind(k))(k), jnp.copy(k),
            nbjax.jit(jnp.copy)(k), nbjax.vmap(lambda k: ew.copy_p.bind(k))(k)):
    assert c.dtype == k.dtype and np.asarray(R.key_data(c))[:, 1].tolist() == lo
  assert R.key_data(lax.rev(k, (0,)))[:, 1].tolist() == lo[::-1]


def test_legacy_prng_key_flag_allows_warns_or_refuses_raw_keys():
  """JAX's ``jax_legacy_prng_key``: raw uint32 keys pass ('allow', the default), warn
  (UserWarning) or raise ValueError, with JAX's message; typed keys are never affected and
  an invalid key's TypeError comes first."""
  import warnings
  raw = jnp.zeros(2, dtype="uint32")
  msg = "Legacy uint32 key array passed as key to jax.random function."
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    R.uniform(raw)
    with nbjax.legacy_prng_key("warn"):
      with pytest.warns(UserWarning, match=msg):
        R.uniform(raw)
    with nbjax.legacy_prng_key("error"):
      with pytest.raises(ValueError, match=msg):
        R.normal(R.PRNGKey(0))
      with pytest.raises(TypeError, match="JAX encountered invalid PRNG key data"):
        R.uniform(jnp.zeros(1, dtype="float32"))
      assert R.normal(R.key(0)).shape == ()


def test_enable_custom_prng_makes_typed_keys_from_raw_ones():
  """Under ``jax_enable_custom_prng`` (JAX's): PRNGKey gives a typed key, split and fold_in
  of raw keys give typed keys, and a raw key warns (FutureWarning) that it is assumed a
  threefry2x32 key; the bits are the raw key's."""
  raw = R.PRNGKey(3)
  assert raw.dtype == np.uint32 and raw.shape == (2,)
  halves = R.split(raw)
  with nbjax.enable_custom_prng(True):
    k = R.PRNGKey(3)
    assert dtypes.issubdtype(k.dtype, dtypes.prng_key) and k.shape == ()
    np.testing.assert_array_equal(R.key_data(k), raw)
    with pytest.warns(FutureWarning, match="Raw arrays as random keys"):
      s = R.split(raw)
    assert dtypes.issubdtype(s.dtype, dtypes.prng_key) and s.shape == (2,)
    np.testing.assert_array_equal(R.key_data(s), halves)
    with pytest.warns(FutureWarning):
      assert dtypes.issubdtype(R.fold_in(raw, 1).dtype, dtypes.prng_key)
