"""nbjax.example_libraries (optimizers, stax) against JAX 0.10.2: the numbers below were
computed with JAX 0.10.2 (x64 on) running the same programs."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import random
from nbjax.example_libraries import optimizers, stax

PARAMS = {"w": jnp.array([[1.0, -2.0], [0.5, 3.0]]), "b": (jnp.array([0.1, -0.2], jnp.float32),)}


def _loss(p):
  return jnp.sum(jnp.sin(p["w"]) ** 2) + jnp.sum(jnp.cos(p["b"][0]) * 3)


# params (b, then w) after 6 steps of each optimizer on _loss, from JAX 0.10.2
JAX_AFTER_6 = {
    "sgd": [[0.4767873287200928, -0.9205727577209473],
            [[0.4330299526217684, -2.548861481562798], [0.14656451678625915, 3.104151859050176]]],
    "momentum": [[1.3527956008911133, -2.441877603530884],
                 [[-0.41041561008374866, -3.4321718930218608],
                  [-0.32918995260782996, 3.2414882458301366]]],
    "nesterov": [[2.4704184532165527, -3.5080461502075195],
                 [[-0.3543470856969568, -3.4855942924345933],
                  [-0.20009952919327087, 3.1980120763533555]]],
    "adagrad": [[0.23225906491279602, -0.3275669515132904],
                [[0.8771788943135964, -2.123831861409641], [0.38012723984873203, 3.1108158836154467]]],
    "rmsprop": [[1.632930874824524, -1.6853177547454834],
                [[0.05157520991859839, -3.058181733170409], [5.089115377270411e-05, 3.135118871551588]]],
    "rmsprop_momentum": [[4.481871128082275, -4.44536828994751],
                         [[-0.7677183064018991, -4.066352725504499],
                          [0.020733831446940076, 3.1254640389792128]]],
    "adam": [[0.6842688918113708, -0.7966617345809937],
             [[0.40002220858226095, -2.6027773280004545], [-0.05425934139028625, 3.173979695773719]]],
    "adamax": [[0.5554861426353455, -0.6873819828033447],
               [[0.4185444320795185, -2.5625296079105064], [0.029289256844526525, 3.195562407939407]]],
    "sm3": [[0.23225906491279602, -0.3275669515132904],
            [[0.8771788943135964, -2.123831861409641], [0.38012723984873203, 3.0748548910752054]]],
    "adam_sched": [[0.45675382018089294, -0.5625317692756653],
                   [[0.6358512845276016, -2.3648225135989707],
                    [0.14594206612413657, 3.200641416522379]]],
    "sgd_pw": [[0.29779158738043876, -0.5869931618564005],
               [[0.6048660224909204, -2.3614150358092414], [0.2237293329231796, 3.0836062161933877]]],
    "sgd_poly": [[0.1869630366563797, -0.3720542788505554],
                 [[0.7824788103273578, -2.1892515054589285], [0.32658992275634346, 3.05453515586827]]],
    "sgd_inv": [[0.31994351744651794, -0.628907322883606],
                [[0.5826020679589017, -2.385717490207592], [0.21432854116541408, 3.086040033192438]]],
    "sgd_inv2": [[0.29386863112449646, -0.5792068243026733],
                 [[0.615599662988241, -2.3519456229117], [0.2315333465656945, 3.0812696862358284]]],
}


def _make(name):
  o = optimizers
  return {
      "sgd": lambda: o.sgd(0.1), "momentum": lambda: o.momentum(0.1, 0.9),
      "nesterov": lambda: o.nesterov(0.1, 0.9), "adagrad": lambda: o.adagrad(0.1),
      "rmsprop": lambda: o.rmsprop(0.1), "rmsprop_momentum": lambda: o.rmsprop_momentum(0.1),
      "adam": lambda: o.adam(0.1), "adamax": lambda: o.adamax(0.1), "sm3": lambda: o.sm3(0.1),
      "adam_sched": lambda: o.adam(o.exponential_decay(0.1, 3, 0.5)),
      "sgd_pw": lambda: o.sgd(o.piecewise_constant([2, 4], [0.1, 0.05, 0.01])),
      "sgd_poly": lambda: o.sgd(o.polynomial_decay(0.1, 4, 0.01, 2.0)),
      "sgd_inv": lambda: o.sgd(o.inverse_time_decay(0.1, 2, 0.5, staircase=True)),
      "sgd_inv2": lambda: o.sgd(o.inverse_time_decay(0.1, 2, 0.5)),
  }[name]()


def _check_params(p, expected, name, rtol32=2e-6):
  b, w = expected
  # piecewise_constant's values are a float64 array: its step sizes promote the float32 leaf
  assert p["b"][0].dtype == (np.float64 if name == "sgd_pw" else np.float32)
  assert p["w"].dtype == np.float64
  np.testing.assert_allclose(np.asarray(p["b"][0]), b, rtol=rtol32)
  np.testing.assert_allclose(np.asarray(p["w"]), w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(JAX_AFTER_6))
def test_optimizer_matches_jax(name):
  init, update, get_params = _make(name)
  state = init(PARAMS)
  assert isinstance(state, optimizers.OptimizerState)
  for i in range(6):
    state = update(i, nbjax.grad(_loss)(get_params(state)), state)
  _check_params(get_params(state), JAX_AFTER_6[name], name)


@pytest.mark.parametrize("name", ["adam", "momentum", "sgd_pw", "rmsprop_momentum"])
def test_optimizer_under_jit(name):
  init, update, get_params = _make(name)

  @nbjax.jit
  def step(i, s):
    return update(i, nbjax.grad(_loss)(get_params(s)), s)

  state = init(PARAMS)
  for i in range(6):
    state = step(i, state)
  # XLA's fused float32 arithmetic may differ from eager's by a few ulp (JAX's does too)
  _check_params(get_params(state), JAX_AFTER_6[name], name, rtol32=2e-5)


def test_optimizer_state_structure_and_errors():
  init, update, _ = optimizers.adam(0.1)
  state = init(PARAMS)
  assert type(state.packed_state) is tuple and type(state.packed_state[0]) is list
  assert len(nbjax.tree.leaves(state)) == 6  # x, m, v per parameter leaf
  assert state.tree_def == nbjax.tree.structure(PARAMS)
  with pytest.raises(TypeError, match="optimizer update function was passed a gradient tree "
                     "that did not match the parameter tree structure"):
    update(0, {"w": 1.0}, state)
  o = optimizers.optimizer(lambda: (lambda x: (x, 0.), lambda i, g, s: (s[0], 0., 1.),
                                     lambda s: s[0]))()
  with pytest.raises(TypeError, match="optimizer update function produced an output structure"):
    o.update_fn(0, 1.0, o.init_fn(1.0))


def test_pack_unpack_round_trip():
  state = optimizers.momentum(0.1, 0.9)[0](PARAMS)
  marked = optimizers.unpack_optimizer_state(state)
  assert isinstance(marked["w"], optimizers.JoinPoint)
  x, v = marked["w"].subtree
  np.testing.assert_array_equal(np.asarray(x), np.asarray(PARAMS["w"]))
  assert float(jnp.sum(jnp.abs(v))) == 0.0
  back = optimizers.pack_optimizer_state(marked)
  assert back.tree_def == state.tree_def and back.subtree_defs == state.subtree_defs
  for a, b in zip(nbjax.tree.leaves(back), nbjax.tree.leaves(state)):
    assert a is b


def test_schedules_and_norms():
  assert optimizers.constant(0.3)(100) == 0.3
  np.testing.assert_allclose(float(optimizers.exponential_decay(1.0, 2, 0.5)(4)), 0.25)
  np.testing.assert_allclose(float(optimizers.inverse_time_decay(1.0, 2, 1.0, True)(3)), 0.5)
  np.testing.assert_allclose(float(optimizers.polynomial_decay(1.0, 4, 0.0)(10)), 0.0)
  pw = optimizers.piecewise_constant([2, 4], [3., 2., 1.])
  assert [float(pw(i)) for i in (0, 2, 3, 4, 5)] == [3., 3., 2., 2., 1.]
  with pytest.raises(ValueError, match="one shorter"):
    optimizers.piecewise_constant([1, 2], [1.])
  with pytest.raises(TypeError):
    optimizers.sgd(jnp.ones(2))
  np.testing.assert_allclose(float(optimizers.l2_norm(PARAMS)), 3.78153408, rtol=1e-8)
  clipped = optimizers.clip_grads(PARAMS, 1.0)
  np.testing.assert_allclose(np.asarray(clipped["b"][0]), [0.02644429, -0.05288859], rtol=1e-6)
  np.testing.assert_allclose(float(optimizers.l2_norm(clipped)), 1.0, rtol=1e-9)
  same = optimizers.clip_grads(PARAMS, 10.0)
  np.testing.assert_array_equal(np.asarray(same["w"]), np.asarray(PARAMS["w"]))


def test_stax_dense_mlp_matches_jax():
  init, apply = stax.serial(stax.Dense(3), stax.Relu, stax.Dense(2))
  shape, params = init(random.PRNGKey(0), (-1, 4))
  assert shape == (-1, 2)
  (W1, b1), (), (W2, b2) = params
  np.testing.assert_allclose(np.asarray(W1)[0], [-0.027245927685194016, -0.831595639598423,
                                                 0.4534177695369182], rtol=1e-12)
  np.testing.assert_allclose(np.asarray(b2), [-0.0026089602319918008, 0.011989971647241604],
                             rtol=1e-12)
  x = jnp.arange(8.).reshape(2, 4) / 8
  expected = [[0.10731732376445889, -0.29832368398111525],
              [-0.30387361461252865, -0.4607822521880781]]
  np.testing.assert_allclose(np.asarray(apply(params, x)), expected, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(nbjax.jit(apply)(params, x)), expected, rtol=1e-12)


def test_stax_conv_pool_flatten_matches_jax():
  init, apply = stax.serial(stax.Conv(2, (2, 2), padding="SAME"),
                            stax.MaxPool((2, 2), strides=(2, 2)), stax.Flatten)
  shape, params = init(random.PRNGKey(1), (1, 4, 4, 1))
  assert tuple(shape) == (1, 8)
  x = jnp.arange(16.).reshape(1, 4, 4, 1) / 16
  expected = [[-0.12868002226846914, -0.26491586062166106, -0.2640292399196883,
               -0.033185225544303976, -0.37834370797538963, 0.020950193791787013,
               -0.44440759247009887, 0.02193439177177845]]
  np.testing.assert_allclose(np.asarray(apply(params, x)), expected, rtol=1e-11)
  g = nbjax.grad(lambda p: jnp.sum(apply(p, x)))(params)
  assert g[0][0].shape == (2, 2, 1, 2) and g[0][1].shape == (1, 1, 1, 2)


def test_stax_dropout():
  _, apply = stax.Dropout(0.5)
  out = apply((), jnp.ones((2, 4)), rng=random.PRNGKey(0))
  np.testing.assert_array_equal(np.asarray(out), [[2., 2., 0., 0.], [0., 2., 0., 0.]])
  with pytest.raises(ValueError, match="Dropout layer requires apply_fun to be called with a "
                     "PRNG key argument"):
    apply((), jnp.ones(3))
  np.testing.assert_array_equal(np.asarray(stax.Dropout(0.5, mode="test")[1]((), jnp.ones(3),
                                                                  rng=random.PRNGKey(1))),
                                [1., 1., 1.])
  _, apply2 = stax.serial(stax.Dropout(0.5), stax.Dense(2))
  out = apply2(((), (jnp.ones((4, 2)), jnp.zeros(2))), jnp.ones((2, 4)), rng=random.PRNGKey(0))
  np.testing.assert_array_equal(np.asarray(out), [[2., 2.], [6., 6.]])


def test_stax_combinators_and_shapes():
  init, apply = stax.serial(stax.Dense(4), stax.FanOut(2), stax.parallel(stax.Dense(4), stax.Tanh),
                            stax.FanInSum)
  shape, params = init(random.PRNGKey(0), (3, 5))
  assert shape == (3, 4)
  x = jnp.ones((3, 5))
  h = stax.Dense(4)[1](params[0], x)
  branch = stax.Dense(4)[1](params[2][0], h) + jnp.tanh(h)
  np.testing.assert_allclose(np.asarray(apply(params, x)), np.asarray(branch), rtol=1e-14)
  init, apply = stax.serial(stax.FanOut(3), stax.parallel(stax.Identity, stax.Exp, stax.Sigmoid),
                            stax.FanInConcat(axis=1))
  shape, params = init(random.PRNGKey(0), (2, 3))
  assert shape == (2, 9)
  x = jnp.arange(6.).reshape(2, 3)
  np.testing.assert_allclose(np.asarray(apply(params, x)),
                             np.concatenate([x, np.exp(x), 1 / (1 + np.exp(-np.asarray(x)))], 1))
  init, apply = stax.shape_dependent(lambda s: stax.Dense(s[-1]))
  shape, params = init(random.PRNGKey(0), (3, 5))
  assert shape == (3, 5) and params[0].shape == (5, 5)
  assert stax.GeneralConv(("NCHW", "OIHW", "NCHW"), 2, (2, 2), strides=(2, 1),
                          padding=((1, 0), (0, 1)))[0](random.PRNGKey(0), (2, 3, 6, 5))[0] \
      == (2, 2, 3, 5)
  assert stax.ConvTranspose(2, (3, 3), strides=(2, 2), padding="SAME")[0](
      random.PRNGKey(0), (1, 4, 4, 3))[0] == (1, 8, 8, 2)
  assert stax.Conv1DTranspose(2, (3,), strides=(2,))[0](random.PRNGKey(0), (2, 5, 3))[0] \
      == (2, 11, 2)


def test_stax_batchnorm_and_pools():
  x = jnp.arange(15.).reshape(3, 5) ** 1.5
  init, apply = stax.BatchNorm(axis=0, center=False)
  shape, (beta, gamma) = init(random.PRNGKey(0), (3, 5))
  assert shape == (3, 5) and beta == () and gamma.shape == (5,)
  xn = np.asarray(x)
  ref = (xn - xn.mean(0)) / np.sqrt(xn.var(0) + 1e-5)
  np.testing.assert_allclose(np.asarray(apply((beta, gamma), x)), ref, rtol=1e-12)
  img = jnp.arange(2 * 3 * 6 * 5.).reshape(2, 3, 6, 5)
  init, apply = stax.AvgPool((3, 2), strides=(2, 1), padding="SAME", spec="NCHW")
  assert init(None, (2, 3, 6, 5))[0] == (2, 3, 3, 5)
  out = np.asarray(apply((), img))
  # SAME pads one row and one column after the image: each output is the mean of the
  # window's cells inside the image only
  im = np.asarray(img)[0, 0]
  np.testing.assert_allclose(out[0, 0, 0, 0], im[0:3, 0:2].mean())
  np.testing.assert_allclose(out[0, 0, 1, 4], im[2:5, 4:5].mean())
  np.testing.assert_allclose(out[0, 0, 2, 4], im[4:6, 4:5].mean())
  init, apply = stax.SumPool((2, 2))
  assert init(None, (1, 4, 4, 1))[0] == (1, 3, 3, 1)
  np.testing.assert_allclose(np.asarray(apply((), jnp.ones((1, 4, 4, 1)))), 4 * np.ones((1, 3, 3, 1)))
