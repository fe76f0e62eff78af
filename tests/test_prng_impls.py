"""Typed PRNG keys in jaxprs (JAX's key avals and key primitives) and the PRNG
implementations JAX 0.10.2 registers (threefry2x32, philox2x32, philox4x32, threefry4x32):
jaxpr text and bits compared with what JAX 0.10.2 prints and returns (the strings and numbers
below were copied from it), eagerly, under jit and under vmap."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import dtypes, lax
from nbjax import random as R

# JAX 0.10.2's jaxprs (x64 on), as printed
JAX_JAXPRS = {
    'split': (
        '{ lambda ; a:key<fry>[]. let\n'
        '    b:key<fry>[2] = random_split[shape=(2,)] a\n'
        '  in (b,) }'),
    'split_shape': (
        '{ lambda ; a:key<fry>[]. let\n'
        '    b:key<fry>[2,3] = random_split[shape=(2, 3)] a\n'
        '  in (b,) }'),
    'fold_in': (
        '{ lambda ; a:key<fry>[]. let b:key<fry>[] = random_fold_in a 3:u32[] in (b,) }'),
    'bits': (
        '{ lambda ; a:key<fry>[]. let\n'
        '    b:u64[3] = random_bits[bit_width=64 shape=(3,)] a\n'
        '  in (b,) }'),
    'bits8': (
        '{ lambda ; a:key<fry>[]. let\n'
        '    b:u8[2,2] = random_bits[bit_width=8 shape=(2, 2)] a\n'
        '  in (b,) }'),
    'key_data': (
        '{ lambda ; a:key<fry>[]. let b:u32[2] = random_unwrap a in (b,) }'),
    'wrap_key_data': (
        '{ lambda ; a:u32[2]. let b:key<fry>[] = random_wrap[impl=fry] a in (b,) }'),
    'key': (
        '{ lambda ; a:i64[]. let b:key<fry>[] = random_seed[impl=fry] a in (b,) }'),
    'PRNGKey': (
        '{ lambda ; a:i64[]. let\n'
        '    b:key<fry>[] = random_seed[impl=fry] a\n'
        '    c:u32[2] = random_unwrap b\n'
        '  in (c,) }'),
    'raw_split': (
        '{ lambda ; a:u32[2]. let\n'
        '    b:key<fry>[] = random_wrap[impl=fry] a\n'
        '    c:key<fry>[2] = random_split[shape=(2,)] b\n'
        '    d:u32[2,2] = random_unwrap c\n'
        '  in (d,) }'),
    'raw_fold_in': (
        '{ lambda ; a:u32[2] b:u32[]. let\n'
        '    c:key<fry>[] = random_wrap[impl=fry] a\n'
        '    d:key<fry>[] = random_fold_in c b\n'
        '    e:u32[2] = random_unwrap d\n'
        '  in (e,) }'),
    'vmap_split': (
        '{ lambda ; a:key<fry>[3]. let\n'
        '    b:key<fry>[3,2] = random_split[shape=(2,)] a\n'
        '  in (b,) }'),
    'vmap_fold_in': (
        '{ lambda ; a:key<fry>[3] b:u32[3]. let\n'
        '    c:key<fry>[3] = random_fold_in a b\n'
        '  in (c,) }'),
    'index': (
        '{ lambda ; a:key<fry>[3]. let\n'
        '    b:key<fry>[1] = slice[limit_indices=(1,) start_indices=(0,) strides=None] a\n'
        '    c:key<fry>[] = squeeze[dimensions=(0,)] b\n'
        '  in (c,) }'),
    'unpack': (
        '{ lambda ; a:key<fry>[]. let\n'
        '    b:key<fry>[2] = random_split[shape=(2,)] a\n'
        '    c:key<fry>[1] = slice[limit_indices=(1,) start_indices=(0,) strides=(1,)] b\n'
        '    d:key<fry>[] = squeeze[dimensions=(0,)] c\n'
        '    e:u64[] = random_bits[bit_width=64 shape=()] d\n'
        '    f:key<fry>[1] = slice[limit_indices=(2,) start_indices=(1,) strides=(1,)] b\n'
        '    g:key<fry>[] = squeeze[dimensions=(0,)] f\n'
        '    h:u64[] = random_bits[bit_width=64 shape=()] g\n'
        '  in (e, h) }'),
    'phx2_split': (
        '{ lambda ; a:key<phx2>[]. let\n'
        '    b:key<phx2>[2] = random_split[shape=(2,)] a\n'
        '  in (b,) }'),
    'phx4_bits': (
        '{ lambda ; a:key<phx4>[]. let\n'
        '    b:u16[2] = random_bits[bit_width=16 shape=(2,)] a\n'
        '  in (b,) }'),
    'fry4_seed': (
        '{ lambda ; a:i64[]. let b:key<fry4>[] = random_seed[impl=fry4] a in (b,) }'),
}

# JAX 0.10.2's values: key data of seeds 0, 42, -1, 2**40 + 7; of key 42: split (2, 2),
# fold_in 7, bits of shape (5,) per width, float32 uniform of shape (3,)
KNOWN = {'philox2x32': {'bits16': [65355, 8299, 37782, 25431, 2124],
                'bits32': [944504651, 856563819, 3743454102, 2331796311, 1668286540],
                'bits64': [9326519094073462008, 1774487527444324202, 12300852922594753305,
                           8663690145302052639, 2088845990656023056],
                'bits8': [75, 107, 150, 87, 76],
                'fold_in': [684560128],
                'seed': [[4280135257], [3991259024], [1428173101], [2904916827]],
                'split': [[[2171499443], [413155073]], [[2864015503], [2017172552]]],
                'uniform32': [0.21990954875946045, 0.1994342803955078, 0.8715907335281372]},
 'philox4x32': {'bits16': [12805, 58575, 44543, 35151, 8794],
                'bits32': [1373712901, 3223971023, 2207559167, 2345961807, 3130401370],
                'bits64': [9371197513079807646, 6039109255449763556, 10865517904694927394,
                           16977171097406057257, 8349727591308415139],
                'bits8': [5, 207, 255, 79, 90],
                'fold_in': [41828760, 81464021],
                'seed': [[1713891541, 3781805453], [3717705800, 533567081],
                         [4090393677, 3753482255], [4079153542, 280436817]],
                'split': [[[2181901948, 3341115038], [969239790, 3857553174]],
                          [[3980413867, 158073360], [2370221029, 1163415375]]],
                'uniform32': [0.31984245777130127, 0.7506392002105713, 0.5139873027801514]},
 'threefry2x32': {'bits16': [5026, 12505, 63993, 49623, 29461],
                  'bits32': [2098992034, 2919706841, 2646866425, 2409546199, 1935504149],
                  'bits64': [7871734211187709741, 276886910877598708, 10591095138341673235,
                             13462782411356743825, 12687676868490354166],
                  'bits8': [162, 217, 249, 215, 21],
                  'fold_in': [2547012911, 1371500959],
                  'seed': [[0, 0], [0, 42], [4294967295, 4294967295], [256, 7]],
                  'split': [[[1832780943, 270669613], [64467757, 2916123636]],
                            [[2465931498, 255383827], [3134548294, 894150801]]],
                  'uniform32': [0.48870956897735596, 0.6797971725463867, 0.6162714958190918]},
 'threefry4x32': {'bits16': [1393, 31377, 61782, 47106, 61104],
                  'bits32': [2739996017, 3649338001, 3087855958, 731494402, 64614064],
                  'bits64': [16831092290058782770, 15459856458627681051, 2723202120932536496,
                             3236638314454016356, 16604656364068173900],
                  'bits8': [113, 145, 86, 2, 176],
                  'fold_in': [2445197787, 3874293641, 4221169969, 2984886860],
                  'seed': [[2624366954, 3783175782, 4228967636, 1381410776],
                           [1605953687, 3689221460, 1722219033, 3178796034],
                           [892984893, 2998605019, 1655112252, 2597012397],
                           [2823047714, 75794641, 2492749853, 83919787]],
                  'split': [[[3188509147, 2083947553, 1469629592, 921930771],
                             [361144456, 1418825268, 1547191614, 2559243763]],
                            [[1650616655, 2909718409, 1895971994, 1205228181],
                             [3638420798, 1056358023, 1845934114, 3863752555]]],
                  'uniform32': [0.6379549503326416, 0.8496776819229126, 0.7189474105834961]}}

IMPLS = ("threefry2x32", "philox2x32", "philox4x32", "threefry4x32")
_u32 = jnp.uint32

# the functions whose jaxprs JAX_JAXPRS holds, and their arguments
CASES = {
    "split": (lambda k: R.split(k), lambda: (R.key(0),)),
    "split_shape": (lambda k: R.split(k, (2, 3)), lambda: (R.key(0),)),
    "fold_in": (lambda k: R.fold_in(k, 3), lambda: (R.key(0),)),
    "bits": (lambda k: R.bits(k, (3,)), lambda: (R.key(0),)),
    "bits8": (lambda k: R.bits(k, (2, 2), jnp.uint8), lambda: (R.key(0),)),
    "key_data": (R.key_data, lambda: (R.key(0),)),
    "wrap_key_data": (R.wrap_key_data, lambda: (R.key_data(R.key(0)),)),
    "key": (R.key, lambda: (0,)),
    "PRNGKey": (R.PRNGKey, lambda: (0,)),
    "raw_split": (lambda k: R.split(k), lambda: (R.PRNGKey(0),)),
    "raw_fold_in": (lambda k, i: R.fold_in(k, i), lambda: (R.PRNGKey(0), np.uint32(1))),
    "vmap_split": (nbjax.vmap(R.split), lambda: (R.split(R.key(0), 3),)),
    "vmap_fold_in": (nbjax.vmap(R.fold_in),
                     lambda: (R.split(R.key(0), 3), jnp.arange(3, dtype=_u32))),
    "index": (lambda k: k[0], lambda: (R.split(R.key(0), 3),)),
    "unpack": (lambda k: [R.bits(x) for x in R.split(k)], lambda: (R.key(0),)),
    "phx2_split": (lambda k: R.split(k), lambda: (R.key(0, impl="philox2x32"),)),
    "phx4_bits": (lambda k: R.bits(k, (2,), jnp.uint16), lambda: (R.key(0, impl="philox4x32"),)),
    "fry4_seed": (lambda s: R.key(s, impl="threefry4x32"), lambda: (1,)),
}


@pytest.mark.parametrize("name", sorted(JAX_JAXPRS))
def test_jaxpr_text_is_jaxs(name):
  f, args = CASES[name]
  assert str(nbjax.make_jaxpr(f)(*args())) == JAX_JAXPRS[name]


def test_samplers_stage_key_primitives():
  # uniform and normal: JAX's operations on random_bits (JAX wraps them in a jit of its own)
  text = str(nbjax.make_jaxpr(lambda k: R.uniform(k, (3,)))(R.key(0)))
  for op in ["u64[3] = random_bits[bit_width=64 shape=(3,)] a", "shift_right_logical",
             "4607182418800017408:u64[]", "bitcast_convert_type[new_dtype=float64]"]:
    assert op in text
  assert "threefry" not in text
  text = str(nbjax.make_jaxpr(lambda k: R.randint(k, (3,), 0, 10))(R.key(0)))
  assert "key<fry>[2] = random_split[shape=(2,)] a" in text
  assert "key<fry>[1] = slice[limit_indices=(1,) start_indices=(0,) strides=(1,)]" in text
  assert text.count("random_bits[bit_width=64 shape=(3,)]") == 2


def test_scan_and_cond_carry_key_avals():
  k = R.key(0)
  f = lambda k: lax.scan(lambda c, x: (R.split(c)[0], R.bits(c)), k, None, length=3)
  text = str(nbjax.make_jaxpr(f)(k))
  assert "b:key<fry>[] c:u64[3] = scan[" in text
  assert "jaxpr={ lambda ; d:key<fry>[]. let" in text
  assert "e:key<fry>[2] = random_split[shape=(2,)] d" in text
  c, ys = nbjax.jit(f)(k)
  c2, ys2 = f(k)
  assert c.dtype == k.dtype and c.shape == ()
  np.testing.assert_array_equal(R.key_data(c), R.key_data(c2))
  np.testing.assert_array_equal(ys, ys2)
  # JAX 0.10.2's values
  np.testing.assert_array_equal(R.key_data(c), [683029726, 1624662641])
  np.testing.assert_array_equal(ys, [7719171245655871230, 17892382483726427379,
                                     2933590336990503537])
  g = nbjax.jit(lambda p, k: lax.cond(p, lambda k: R.split(k)[1], lambda k: k, k))
  np.testing.assert_array_equal(R.key_data(g(True, k)), R.key_data(R.split(k)[1]))
  np.testing.assert_array_equal(R.key_data(g(False, k)), R.key_data(k))


@pytest.mark.parametrize("impl", IMPLS)
def test_known_answer_bits_eager_and_jit(impl):
  want = KNOWN[impl]
  for s, w in zip((0, 42, -1, 2 ** 40 + 7), want["seed"]):
    np.testing.assert_array_equal(R.key_data(R.key(s, impl=impl)), w)
    np.testing.assert_array_equal(nbjax.jit(lambda s: R.key_data(R.key(s, impl=impl)))(s), w)
  k = R.key(42, impl=impl)
  jk = lambda f: nbjax.jit(f)(k)
  for get in (lambda f: f(k), jk):
    np.testing.assert_array_equal(get(lambda k: R.key_data(R.split(k, (2, 2)))), want["split"])
    np.testing.assert_array_equal(get(lambda k: R.key_data(R.fold_in(k, 7))), want["fold_in"])
    for w in (8, 16, 32, 64):
      got = get(lambda k: R.bits(k, (5,), f"uint{w}"))
      assert got.dtype == np.dtype(f"uint{w}")
      np.testing.assert_array_equal(got, want[f"bits{w}"])
    np.testing.assert_array_equal(get(lambda k: R.uniform(k, (3,), jnp.float32)),
                                  np.array(want["uniform32"], np.float32))


@pytest.mark.parametrize("impl", IMPLS)
def test_vmap_of_split_and_fold_in_over_key_arrays(impl):
  ks = R.split(R.key(7, impl=impl), 4)
  data = lambda k: np.asarray(R.key_data(k))
  per_key = np.stack([data(R.split(k, 3)) for k in ks])
  for f in (nbjax.vmap(lambda k: R.split(k, 3)), nbjax.jit(nbjax.vmap(lambda k: R.split(k, 3)))):
    out = f(ks)
    assert out.shape == (4, 3) and out.dtype == ks.dtype
    np.testing.assert_array_equal(data(out), per_key)
  msgs = jnp.arange(4, dtype=_u32) * 3
  per_key = np.stack([data(R.fold_in(k, int(m))) for k, m in zip(ks, msgs)])
  np.testing.assert_array_equal(data(nbjax.vmap(R.fold_in)(ks, msgs)), per_key)
  np.testing.assert_array_equal(data(nbjax.jit(nbjax.vmap(R.fold_in))(ks, msgs)), per_key)
  # one key, batched data; batched keys, one datum
  k = ks[0]
  np.testing.assert_array_equal(data(nbjax.vmap(lambda m: R.fold_in(k, m))(msgs)),
                                np.stack([data(R.fold_in(k, int(m))) for m in msgs]))
  np.testing.assert_array_equal(data(nbjax.vmap(lambda k: R.fold_in(k, 5))(ks)),
                                np.stack([data(R.fold_in(k, 5)) for k in ks]))
  # key arrays out of vmap on another axis, and bits per key
  out = nbjax.vmap(lambda k: R.split(k, 2), out_axes=1)(ks)
  assert out.shape == (2, 4)
  np.testing.assert_array_equal(data(out), np.swapaxes(np.stack([data(R.split(k, 2))
                                                                  for k in ks]), 0, 1))
  np.testing.assert_array_equal(nbjax.vmap(lambda k: R.bits(k, (3,)))(ks),
                                np.stack([R.bits(k, (3,)) for k in ks]))


def test_key_arrays_through_jit_eval_shape_and_pytrees():
  k = R.key(0)
  out = nbjax.jit(lambda k: R.split(k))(k)
  assert type(out) is type(k) and out.dtype == k.dtype and out.shape == (2,)
  np.testing.assert_array_equal(R.key_data(out), [[1797259609, 2579123966],
                                                  [928981903, 3453687069]])  # JAX's
  s = nbjax.eval_shape(R.key, 0)
  assert s.shape == () and s.dtype == k.dtype and repr(s) == \
      "ShapeDtypeStruct(shape=(), dtype=key<fry>)"
  assert nbjax.eval_shape(lambda k: R.split(k, 3), k).shape == (3,)
  assert nbjax.tree_util.tree_leaves({"a": k, "b": 1}) == [k, 1]
  assert jnp.issubdtype(k.dtype, dtypes.prng_key)
  assert jnp.issubdtype(R.key(0, impl="philox2x32").dtype, dtypes.extended)
  # a key closed over, and made, inside jit
  np.testing.assert_allclose(nbjax.jit(lambda: R.normal(k, (2,)))(), R.normal(k, (2,)),
                             rtol=1e-15)
  np.testing.assert_array_equal(nbjax.jit(lambda s: R.bits(R.key(s), (2,)))(3),
                                R.bits(R.key(3), (2,)))
  np.testing.assert_array_equal(R.key_data(nbjax.jit(R.PRNGKey)(7)), R.PRNGKey(7))


def test_impl_registry_as_jaxs():
  names = [str(R.key(0, impl=n).dtype) for n in IMPLS]
  assert names == ["key<fry>", "key<phx2>", "key<phx4>", "key<fry4>"]
  assert [R.key_data(R.key(0, impl=n)).shape for n in IMPLS] == [(2,), (1,), (2,), (4,)]
  with pytest.raises(ValueError, match='Did you mean one of: "philox2x32", "philox4x32", '
                     '"threefry2x32", "rbg", "unsafe_rbg", "threefry4x32"'):
    R.key(0, impl="philox")
  for n in IMPLS[1:]:
    with nbjax.default_prng_impl(n):
      assert R.key_impl(R.key(0)) == n
      np.testing.assert_array_equal(R.key_data(R.key(0)), KNOWN[n]["seed"][0])


def test_key_primitives_rules():
  from nbjax.lax import prng as lp
  k = R.key(0)
  # eager binds on key arrays, and their abstract eval
  ks = lp.random_split_p.bind(k, shape=(3,))
  assert ks.shape == (3,) and ks.dtype == k.dtype
  np.testing.assert_array_equal(R.key_data(ks), R.key_data(R.split(k, 3)))
  b = lp.random_bits_p.bind(ks, bit_width=16, shape=(2,))
  assert b.shape == (3, 2) and b.dtype == np.uint16
  np.testing.assert_array_equal(b, np.stack([R.bits(x, (2,), jnp.uint16) for x in R.split(k, 3)]))
  with pytest.raises(TypeError, match="random_split takes key array operand"):
    lp.random_split_p.abstract_eval(nbjax.core.ShapedArray((2,), np.uint32), shape=(2,))
  with pytest.raises(TypeError, match="expected key_data.shape to end with"):
    R.wrap_key_data(jnp.zeros((3,), _u32))
  # keys are not differentiable: float0 tangents of the key array's shape
  (y, ko), (ty, tk) = nbjax.jvp(lambda x, k: (x * 2, R.split(k, 3)), (1.0, k),
                                (1.0, np.zeros((), dtypes.float0)))
  assert tk.dtype == dtypes.float0 and tk.shape == (3,)
  g = nbjax.jit(nbjax.grad(lambda x, k: x * R.normal(k)))(2.0, k)
  np.testing.assert_allclose(g, R.normal(k), rtol=1e-15)


def test_eager_keys_do_not_stage():
  # eagerly the key primitives are not bound: the implementation runs on the data directly
  from nbjax.lax import prng as lp
  calls = []
  orig = lp.random_split_p.eager
  lp.random_split_p.eager = lambda *a, **p: calls.append(1) or orig(*a, **p)
  try:
    R.split(R.key(0))
    R.normal(R.key(0), (3,))
  finally:
    lp.random_split_p.eager = orig
  assert not calls


def test_eval_jaxpr_of_key_operations_eagerly():
  # core.eval_jaxpr runs a jaxpr's key equations (slice/squeeze of keys, key primitives) eagerly
  k = R.key(3)
  closed = nbjax.make_jaxpr(lambda k: R.bits(R.split(k)[1]))(k)
  out, = nbjax.core.eval_jaxpr(closed.jaxpr, closed.consts, k)
  assert out == np.uint64(7420877412274788091)  # JAX 0.10.2's
  with pytest.raises(TypeError, match="add"):
    lax.add_p.bind(k, k)
  with pytest.raises(TypeError, match="cumsum does not accept dtype key<fry>"):
    lax.cumsum_p.bind(k.reshape(1), axis=0, reverse=False)


# JAX 0.10.2's jaxprs of structural operations on key arrays
JAX_STRUCTURAL = {
    'reshape': (
        '{ lambda ; a:key<fry>[4]. let\n'
        '    b:key<fry>[2,2] = reshape[dimensions=None new_sizes=(2, 2) sharding=None] a\n'
        '  in (b,) }'),
    'concatenate': (
        '{ lambda ; a:key<fry>[4]. let\n'
        '    b:key<fry>[8] = concatenate[dimension=0] a a\n'
        '  in (b,) }'),
    'transpose': (
        '{ lambda ; a:key<fry>[2,3]. let\n'
        '    b:key<fry>[3,2] = transpose[permutation=(1, 0)] a\n'
        '  in (b,) }'),
    'slice': (
        '{ lambda ; a:key<fry>[4]. let\n'
        '    b:key<fry>[2] = slice[limit_indices=(3,) start_indices=(1,) strides=None] a\n'
        '  in (b,) }'),
    'expand_dims': (
        '{ lambda ; a:key<fry>[4]. let\n'
        '    b:key<fry>[1,4] = broadcast_in_dim[broadcast_dimensions=(1,)] a\n'
        '  in (b,) }'),
    'broadcast_to': (
        '{ lambda ; a:key<fry>[]. let b:key<fry>[3] = broadcast_in_dim a in (b,) }'),
    'vmap_index': (
        '{ lambda ; a:key<fry>[2,3]. let\n'
        '    b:key<fry>[2,1] = slice[\n'
        '      limit_indices=(2, 1)\n'
        '      start_indices=(0, 0)\n'
        '      strides=None\n'
        '    ] a\n'
        '    c:key<fry>[2] = squeeze[dimensions=(1,)] b\n'
        '  in (c,) }'),
    'vmap_fold_in_one_key': (
        '{ lambda a:key<fry>[]; b:u32[3]. let\n'
        '    c:key<fry>[3] = random_fold_in a b\n'
        '  in (c,) }'),
}
STRUCTURAL_CASES = {
    "reshape": (lambda ks: ks.reshape(2, 2), lambda: R.split(R.key(0), 4)),
    "concatenate": (lambda a: jnp.concatenate([a, a]), lambda: R.split(R.key(0), 4)),
    "transpose": (lambda ks: ks.T, lambda: R.split(R.key(0), (2, 3))),
    "slice": (lambda ks: ks[1:3], lambda: R.split(R.key(0), 4)),
    "expand_dims": (lambda ks: jnp.expand_dims(ks, 0), lambda: R.split(R.key(0), 4)),
    "broadcast_to": (lambda k: jnp.broadcast_to(k, (3,)), lambda: R.key(0)),
    "vmap_index": (nbjax.vmap(lambda ks: ks[0]), lambda: R.split(R.key(0), (2, 3))),
    "vmap_fold_in_one_key": (lambda i: nbjax.vmap(lambda i: R.fold_in(_K0, i))(i),
                             lambda: jnp.arange(3, dtype=_u32)),
}
_K0 = R.key(0)


@pytest.mark.parametrize("name", sorted(JAX_STRUCTURAL))
def test_structural_jaxpr_text_is_jaxs(name):
  f, arg = STRUCTURAL_CASES[name]
  assert str(nbjax.make_jaxpr(f)(arg())) == JAX_STRUCTURAL[name]


STRUCTURAL_OPS = {
    "reshape": lambda k: k.reshape(3, 2), "ravel": lambda k: k.ravel(), "T": lambda k: k.T,
    "slice": lambda k: k[:, 1:3], "rev": lambda k: k[::-1], "int": lambda k: k[1, 2],
    "none": lambda k: k[None], "ellipsis": lambda k: k[..., 0],
    "iterate": lambda k: jnp.stack(list(k)), "concat": lambda k: jnp.concatenate([k, k[:1]]),
    "expand": lambda k: jnp.expand_dims(k, 1), "bcast": lambda k: jnp.broadcast_to(k[0], (4, 3)),
    "where": lambda k: jnp.where(jnp.array([True, False, True]), k, k[::-1]),
    "take": lambda k: jnp.take(k, jnp.array([2, 0]), axis=1), "roll": lambda k: jnp.roll(k, 1, 1),
    "at_set": lambda k: k.at[0, 1].set(k[1, 2]), "squeeze": lambda k: k[:1].squeeze(0),
    "array_index": lambda k: k[jnp.array([1, 0])],
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL_OPS))
def test_structural_ops_on_keys_agree_across_transformations(name):
  f = STRUCTURAL_OPS[name]
  keys = R.split(R.key(5), (2, 3))
  data = lambda k: np.asarray(R.key_data(k))
  want = data(f(keys))  # eagerly: on the keys' data
  np.testing.assert_array_equal(data(nbjax.jit(f)(keys)), want)
  two = jnp.stack([keys, keys[::-1]])
  want2 = np.stack([want, data(f(keys[::-1]))])
  np.testing.assert_array_equal(data(nbjax.vmap(f)(two)), want2)
  np.testing.assert_array_equal(data(nbjax.jit(nbjax.vmap(f))(two)), want2)
  (_, out), _ = nbjax.jvp(lambda x, k: (x, f(k)), (1.0, keys),
                          (1.0, np.zeros(keys.shape, dtypes.float0)))
  np.testing.assert_array_equal(data(out), want)



def test_keys_through_pmap_shard_map_and_traced_key_structs():
  from nbjax.experimental.shard_map import shard_map
  from nbjax.sharding import Mesh, PartitionSpec as P
  k = R.key(1)
  ks = R.split(k, 1)
  np.testing.assert_array_equal(R.key_data(nbjax.pmap(lambda k: R.split(k))(ks)),
                                [[[3704974950, 1863054868], [2705940334, 2639757084]]])  # JAX's
  mesh = Mesh(np.array(nbjax.devices()[:1]), ("x",))
  f = shard_map(lambda k: nbjax.vmap(lambda k: R.bits(k, (2,)))(k), mesh=mesh,
                in_specs=P("x"), out_specs=P("x"))
  want = [[15912746244612290068, 11621925242097073948],
          [14074288286176949340, 9514423493698938477]]  # JAX's
  np.testing.assert_array_equal(f(R.split(k, 2)), want)
  np.testing.assert_array_equal(nbjax.jit(f)(R.split(k, 2)), want)
  # a key-typed ShapeDtypeStruct traced by jit: the function sees a key array
  t = nbjax.jit(R.split).trace(nbjax.ShapeDtypeStruct((), k.dtype))
  assert str(t.jaxpr) == JAX_JAXPRS["split"]
  s = nbjax.eval_shape(lambda k: R.normal(k, (2,)), nbjax.ShapeDtypeStruct((), k.dtype))
  assert s.shape == (2,) and s.dtype == np.float64


def test_extend_random():
  import nbjax.extend.random as xr
  hexes = lambda r: tuple(hex(int(x)) for x in np.asarray(r))
  # Random123's known answers for threefry2x32 (as JAX's tests)
  assert hexes(xr.threefry_2x32(np.uint32([0, 0]), np.uint32([0, 0]))) == \
      ("0x6b200159", "0x99ba4efe")
  assert hexes(xr.threefry_2x32(np.uint32([0xFFFFFFFF] * 2), np.uint32([0xFFFFFFFF] * 2))) == \
      ("0x1cb996fc", "0xbb002be7")
  k, c = np.uint32([0x13198a2e, 0x03707344]), np.uint32([0x243f6a88, 0x85a308d3])
  assert hexes(xr.threefry_2x32(k, c)) == ("0xc4923a9c", "0x483df7a0")
  assert hexes(nbjax.jit(xr.threefry_2x32)(k, c)) == ("0xc4923a9c", "0x483df7a0")
  odd = np.arange(5, dtype=np.uint32)
  want = [2052595727, 3504730591, 2527474599, 1880214352, 1914734168]  # JAX's
  np.testing.assert_array_equal(xr.threefry_2x32(np.uint32([1, 2]), odd), want)
  np.testing.assert_array_equal(nbjax.jit(xr.threefry_2x32)(np.uint32([1, 2]), odd), want)
  text = str(nbjax.make_jaxpr(xr.threefry_2x32)(np.uint32([1, 2]), np.arange(4, dtype=np.uint32)))
  assert "i:u32[2] j:u32[2] = threefry2x32 d f g h" in text
  # the primitive under vmap and jit, broadcasting its key words (JAX's values)
  f = lambda a, b: xr.threefry2x32_p.bind(np.uint32(1), np.uint32(2), a, b)
  a, b = jnp.arange(3, dtype=_u32), jnp.arange(3, dtype=_u32) + 7
  for g in (nbjax.vmap(f), nbjax.jit(f), f):
    y0, y1 = g(a, b)
    np.testing.assert_array_equal(y0, [3427225942, 3751333951, 1919560299])
    np.testing.assert_array_equal(y1, [3095793599, 42289287, 984910620])
  # seeding with an implementation; arrays of seeds; a user-defined implementation
  np.testing.assert_array_equal(R.key_data(xr.seed_with_impl(xr.threefry_prng_impl, 5)), [0, 5])
  ks = xr.random_seed(jnp.arange(3), xr.threefry_prng_impl)
  assert ks.shape == (3,)
  np.testing.assert_array_equal(R.key_data(ks), [[0, 0], [0, 1], [0, 2]])
  t = xr.threefry_prng_impl
  mine = xr.define_prng_impl(key_shape=(2,), seed=t.seed, split=t.split,
                             random_bits=t.random_bits, fold_in=t.fold_in, name="mine",
                             tag="mn")
  assert repr(mine) == "PRNGSpec('mine')"  # (JAX's define_prng_impl gives its PRNGSpec)
  k = R.key(3, impl=mine)
  assert R.key_impl(k) == mine and R.key_dtype(mine) == k.dtype
  assert str(k.dtype) == "key<mn>"
  np.testing.assert_array_equal(R.bits(k, (2,)), R.bits(R.key(3), (2,)))
  np.testing.assert_array_equal(nbjax.jit(lambda k: R.bits(k, (2,)))(k), R.bits(R.key(3), (2,)))
  np.testing.assert_array_equal(R.key_data(nbjax.vmap(R.split)(R.split(k, 2))),
                                R.key_data(nbjax.vmap(R.split)(R.split(R.key(3), 2))))
  assert str(nbjax.make_jaxpr(lambda k: R.split(k))(k)) == \
      "{ lambda ; a:key<mn>[]. let b:key<mn>[2] = random_split[shape=(2,)] a in (b,) }"  # JAX's
