"""nbjax.nn: activations against NumPy/SciPy formulas, finite-difference gradients, the
special points where JAX picks a derivative or guards against overflow (relu'(0) = 0,
softplus at +-1000, softmax with -inf, logsumexp of all -inf), masked softmax/log_softmax,
logsumexp's ``b``/``return_sign``/``where`` against SciPy, one_hot, standardize,
dot_product_attention against a NumPy reference (masks, causal, windows, sequence lengths,
grouped heads, residuals), jit/vmap agreement, and nn.initializers (JAX's values for a key,
fans, distributions)."""
import numpy as np
import pytest
import scipy.special as sp

import nbjax
import nbjax.numpy as jnp
from nbjax import nn
from nbjax.test_util import check_grads

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 6)) * 3
X[X == 0] = 0.1


_sig = sp.expit


def _gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


SELU_A, SELU_L = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
REFS = {
    "relu": lambda x: np.maximum(x, 0),
    "relu6": lambda x: np.clip(x, 0, 6),
    "sigmoid": _sig,
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "softplus": lambda x: np.logaddexp(x, 0),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "silu": lambda x: x * _sig(x),
    "swish": lambda x: x * _sig(x),
    "gelu": _gelu_tanh,
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: SELU_L * np.where(x > 0, x, SELU_A * np.expm1(x)),
    "celu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "mish": lambda x: x * np.tanh(np.logaddexp(x, 0)),
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip(x + 1, 0, 2) / 2,
    "tanh": np.tanh,
    "identity": lambda x: x,
    "log1mexp": lambda x: np.log(-np.expm1(-x)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(REFS))
def test_activation_matches_reference(name, dtype):
  x = np.abs(X) + 0.1 if name == "log1mexp" else X
  x = x.astype(dtype)
  got = getattr(nn, name)(x)
  assert got.dtype == dtype and got.shape == x.shape
  tol = 2e-6 if dtype == np.float32 else 1e-12
  np.testing.assert_allclose(np.asarray(got), REFS[name](x.astype(np.float64)), rtol=tol,
                             atol=tol)


SMOOTH = ["sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu", "gelu", "elu", "selu",
          "celu", "squareplus", "mish", "relu", "relu6", "leaky_relu", "hard_tanh",
          "hard_sigmoid", "hard_silu", "sparse_plus"]


@pytest.mark.parametrize("name", SMOOTH)
def test_activation_gradients_finite_differences(name):
  # away from the kinks (|x| and |x -+ 1|, |x +- 3|, |x - 6| not small)
  x = np.array([-4.6, -2.3, -0.55, 0.45, 2.2, 4.4, 7.3])
  check_grads(getattr(nn, name), (x,), order=2, modes=("fwd", "rev"), eps=1e-4, atol=1e-5,
              rtol=1e-5)


def test_gelu_exact():
  x = X.astype(np.float32)
  got = nn.gelu(x, approximate=False)
  assert got.dtype == np.float32
  np.testing.assert_allclose(np.asarray(got), 0.5 * x * sp.erfc(-x / np.sqrt(2)), rtol=2e-6,
                             atol=1e-6)
  check_grads(lambda v: nn.gelu(v, False), (X[0],), order=1, eps=1e-4, atol=1e-6, rtol=1e-6)
  assert nn.gelu(np.arange(3)).dtype == np.float64  # ints promote to the default float


def test_relu_derivative_at_kinks_is_zero():
  assert float(nbjax.grad(nn.relu)(0.)) == 0.
  assert float(nbjax.grad(nn.relu)(1e-30)) == 1.
  assert float(nbjax.grad(nn.relu6)(0.)) == 0. and float(nbjax.grad(nn.relu6)(6.)) == 0.
  assert float(nbjax.grad(nn.relu6)(3.)) == 1.
  _, t = nbjax.jvp(nn.relu, (jnp.array([-1., 0., 2.]),), (jnp.ones(3),))
  np.testing.assert_array_equal(np.asarray(t), [0., 0., 1.])
  np.testing.assert_array_equal(np.asarray(nbjax.vmap(nbjax.grad(nn.relu))(jnp.array(
      [-1., 0., 2.]))), [0., 0., 1.])
  assert float(nbjax.jit(nbjax.grad(nn.relu))(0.)) == 0.
  assert nn.relu(np.arange(-2, 3)).dtype == np.int64


def test_softplus_and_log_sigmoid_do_not_overflow():
  x = jnp.array([-1000., -50., 0., 50., 1000.])
  np.testing.assert_allclose(np.asarray(nn.softplus(x)), [0., np.exp(-50.), np.log(2), 50., 1000.],
                             rtol=1e-15)
  np.testing.assert_allclose(np.asarray(nn.log_sigmoid(x)), [-1000., -50., -np.log(2),
                                                             -np.exp(-50.), 0.], rtol=1e-15)
  g = nbjax.vmap(nbjax.grad(nn.softplus))(x)
  np.testing.assert_allclose(np.asarray(g), _sig(np.asarray(x)), rtol=1e-15)
  assert np.isfinite(np.asarray(nbjax.vmap(nbjax.grad(nn.silu))(x))).all()
  assert np.isfinite(np.asarray(nbjax.vmap(nbjax.grad(nn.gelu))(x))).all()


def _softmax_ref(x, axis=-1):
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, (0, 1), None])
def test_softmax_log_softmax(axis):
  ref = _softmax_ref(X, axis)
  np.testing.assert_allclose(np.asarray(nn.softmax(X, axis=axis)), ref, rtol=1e-13)
  np.testing.assert_allclose(np.asarray(nn.log_softmax(X, axis=axis)), np.log(ref), rtol=1e-12,
                             atol=1e-13)
  check_grads(lambda v: nn.softmax(v, axis=axis), (X / 3,), order=2, eps=1e-4, atol=1e-6,
              rtol=1e-6)
  check_grads(lambda v: nn.log_softmax(v, axis=axis), (X / 3,), order=1, eps=1e-4, atol=1e-6,
              rtol=1e-6)


def test_softmax_with_minus_inf_and_where():
  x = jnp.array([-np.inf, 0., 1.])
  np.testing.assert_allclose(np.asarray(nn.softmax(x)), [0., *_softmax_ref(np.array([0., 1.]))],
                             rtol=1e-15)
  g = nbjax.grad(lambda v: nn.softmax(v)[1])(x)
  y = _softmax_ref(np.array([0., 1.]))
  np.testing.assert_allclose(np.asarray(g), [0., y[0] * (1 - y[0]), -y[0] * y[1]], atol=1e-15)
  assert float(nn.log_softmax(x)[0]) == -np.inf
  w = X > 0
  w[0] = True  # every column keeps an element
  ref = np.where(w, np.exp(np.where(w, X, -np.inf) - np.where(w, X, -np.inf).max(0)), 0)
  ref = ref / ref.sum(0)
  np.testing.assert_allclose(np.asarray(nn.softmax(X, axis=0, where=w)), ref, rtol=1e-13)
  ls = np.asarray(nn.log_softmax(X, axis=0, where=w))
  np.testing.assert_allclose(ls[w], np.log(ref[w]), rtol=1e-12)
  assert (ls[~w] == -np.inf).all()
  assert nn.softmax(np.arange(3)).dtype == np.float64


def test_softmax_custom_jvp_option():
  f = lambda v: jnp.sum(nn.softmax(v) * jnp.arange(6.))  # noqa: E731
  g_plain = nbjax.grad(f)(X[0])
  with nbjax.config.override("softmax_custom_jvp", True):
    g_custom = nbjax.grad(f)(X[0])
    np.testing.assert_allclose(np.asarray(nn.softmax(X)), _softmax_ref(X), rtol=1e-13)
    check_grads(nn.softmax, (X / 3,), order=2, eps=1e-4, atol=1e-6, rtol=1e-6)
  np.testing.assert_allclose(np.asarray(g_custom), np.asarray(g_plain), rtol=1e-12, atol=1e-15)


def test_logsumexp_matches_scipy():
  for axis in [None, 0, 1, (0, 1)]:
    for keepdims in [False, True]:
      np.testing.assert_allclose(np.asarray(nn.logsumexp(X, axis=axis, keepdims=keepdims)),
                                 sp.logsumexp(X, axis=axis, keepdims=keepdims), rtol=1e-13)
  b = RNG.normal(size=X.shape)
  got, sign = nn.logsumexp(X, axis=1, b=b, return_sign=True)
  ref, rsign = sp.logsumexp(X, axis=1, b=b, return_sign=True)
  np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
  np.testing.assert_array_equal(np.asarray(sign), rsign)
  plain = np.asarray(nn.logsumexp(X, axis=1, b=b))
  np.testing.assert_allclose(plain[rsign > 0], ref[rsign > 0], rtol=1e-12)
  assert np.isnan(plain[rsign < 0]).all()
  w = X > 0
  w[:, 0] = True
  np.testing.assert_allclose(np.asarray(nn.logsumexp(X, axis=1, where=w)),
                             sp.logsumexp(np.where(w, X, -np.inf), axis=1), rtol=1e-13)
  np.testing.assert_allclose(np.asarray(nn.logmeanexp(X, axis=0)),
                             sp.logsumexp(X, axis=0) - np.log(4), rtol=1e-13)
  np.testing.assert_allclose(np.asarray(nn.logmeanexp(X, axis=1, where=w)),
                             sp.logsumexp(np.where(w, X, -np.inf), axis=1) - np.log(w.sum(1)),
                             rtol=1e-13)
  check_grads(lambda v: nn.logsumexp(v, axis=1), (X,), order=2, eps=1e-4, atol=1e-6, rtol=1e-6)


def test_logsumexp_infinities():
  assert float(nn.logsumexp(jnp.array([-np.inf, -np.inf]))) == -np.inf
  assert float(nn.logsumexp(jnp.array([1e308, 1e308]))) == pytest.approx(1e308 + np.log(2))
  assert float(nn.logsumexp(jnp.array([np.inf, 0.]))) == np.inf
  g = nbjax.grad(nn.logsumexp)(jnp.array([-np.inf, 0., 0.]))
  np.testing.assert_array_equal(np.asarray(g), [0., 0.5, 0.5])
  assert float(nn.logsumexp(jnp.array([1000., 1000.]))) == pytest.approx(1000 + np.log(2))


def test_glu_one_hot_standardize():
  x = X.astype(np.float32)
  np.testing.assert_allclose(np.asarray(nn.glu(x)), x[:, :3] * _sig(x[:, 3:]), rtol=2e-6)
  np.testing.assert_allclose(np.asarray(nn.glu(x, axis=0)), x[:2] * _sig(x[2:]), rtol=2e-6)
  idx = np.array([[0, 2], [5, -1]])
  oh = nn.one_hot(idx, 4)
  assert oh.dtype == np.float64 and oh.shape == (2, 2, 4)
  np.testing.assert_array_equal(np.asarray(oh), (idx[..., None] == np.arange(4)).astype(float))
  oh0 = nn.one_hot(idx, 4, axis=0, dtype=np.int8)
  assert oh0.dtype == np.int8
  np.testing.assert_array_equal(np.asarray(oh0), np.moveaxis(idx[..., None] == np.arange(4),
                                                             -1, 0))
  # along a named axis: member j holds x[j] == j (the one-hot vectors spread over the axis)
  got = nbjax.vmap(lambda i: nn.one_hot(i, 3, axis="i"), axis_name="i")(jnp.array([0, 1, 1]))
  np.testing.assert_array_equal(np.asarray(got), [1., 1., 0.])
  with pytest.raises(ValueError, match="Expected num_classes to match"):
    nbjax.vmap(lambda i: nn.one_hot(i, 4, axis="i"), axis_name="i")(jnp.array([0, 2, 1]))
  ref = (X - X.mean(-1, keepdims=True)) / np.sqrt(X.var(-1, keepdims=True) + 1e-5)
  for algorithm in ["fast", "stable"]:
    np.testing.assert_allclose(np.asarray(nn.standardize(X, algorithm=algorithm)), ref,
                               rtol=1e-10)
  ref0 = (X - 1.) / np.sqrt(4. + 1e-5)
  np.testing.assert_allclose(np.asarray(nn.standardize(X, 0, mean=1., variance=4.)), ref0)
  with pytest.raises(ValueError, match="Unknown algorithm"):
    nn.standardize(X, algorithm="slow")


def _attention_ref(q, k, v, bias=None, mask=None, causal=False, scale=None, ql=None, kl=None,
                   window=None):
  B, T, N, H = q.shape
  S, K = k.shape[1], k.shape[2]
  kk, vv = np.repeat(k, N // K, axis=2), np.repeat(v, N // K, axis=2)
  scale = 1 / np.sqrt(H) if scale is None else scale
  logits = np.einsum("btnh,bsnh->bnts", q, kk) * scale
  if bias is not None:
    logits = logits + bias
  keep = np.ones(logits.shape, bool)
  if mask is not None:
    keep &= mask
  t, s = np.arange(T)[:, None], np.arange(S)[None, :]
  if causal:
    keep &= t >= s
  if window is not None:
    keep &= (t <= s + window[0]) & (t >= s - window[1])
  if ql is not None:
    keep &= (np.arange(T)[None, :, None] < ql[:, None, None])[:, None]
  if kl is not None:
    keep &= (np.arange(S)[None, None, :] < kl[:, None, None])[:, None]
  logits = np.where(keep, logits, -0.7 * np.finfo(np.float32).max)
  out = np.einsum("bnts,bsnh->btnh", _softmax_ref(logits), vv)
  if ql is not None:
    out = out * (np.arange(T)[None, :] < ql[:, None])[:, :, None, None]
  return out, sp.logsumexp(logits, axis=-1).transpose(0, 2, 1)


B, T, S, N, K, H = 2, 3, 5, 4, 2, 8
Q, KE, V = (RNG.normal(size=s) for s in [(B, T, N, H), (B, S, K, H), (B, S, K, H)])
BIAS = RNG.normal(size=(1, N, T, S))
MASK = RNG.random((B, 1, T, S)) > 0.3
QL, KL = np.array([2, 3], np.int32), np.array([5, 1], np.int32)


@pytest.mark.parametrize("kw", [
    {}, dict(bias=BIAS), dict(mask=MASK), dict(is_causal=True),
    dict(scale=0.3, bias=BIAS, mask=MASK, is_causal=True),
    dict(query_seq_lengths=QL, key_value_seq_lengths=KL), dict(local_window_size=1),
    dict(local_window_size=(0, 2), implementation="xla")], ids=str)
def test_dot_product_attention(kw):
  rk = dict(bias=kw.get("bias"), mask=kw.get("mask"), causal=kw.get("is_causal", False),
            scale=kw.get("scale"), ql=kw.get("query_seq_lengths"),
            kl=kw.get("key_value_seq_lengths"))
  w = kw.get("local_window_size")
  rk["window"] = (w, w) if isinstance(w, int) else w
  ref, lse = _attention_ref(Q, KE, V, **rk)
  # JAX computes the softmax in float32 whatever the inputs' dtype
  np.testing.assert_allclose(np.asarray(nn.dot_product_attention(Q, KE, V, **kw)), ref,
                             rtol=2e-6, atol=2e-6)
  out, res = nn.dot_product_attention(Q, KE, V, return_residual=True, **kw)
  assert res.shape == (B, T, N)
  np.testing.assert_allclose(np.asarray(res), lse, rtol=2e-6)


@pytest.mark.parametrize("kw", [
    dict(is_causal=True, query_seq_lengths=QL, key_value_seq_lengths=KL),
    dict(is_causal=True, local_window_size=(3, 2), key_value_seq_lengths=KL),
    dict(local_window_size=1, query_seq_lengths=QL),
    dict(mask=MASK, is_causal=True, query_seq_lengths=QL)], ids=str)
def test_dot_product_attention_needs_no_rank_promotion(kw):
  # JAX builds every mask 5-D, so all combinations work under jax_numpy_rank_promotion='raise'
  rk = dict(mask=kw.get("mask"), causal=kw.get("is_causal", False),
            ql=kw.get("query_seq_lengths"), kl=kw.get("key_value_seq_lengths"))
  w = kw.get("local_window_size")
  rk["window"] = (w, w) if isinstance(w, int) else w
  ref = _attention_ref(Q, KE, V, **rk)[0]
  with nbjax.numpy_rank_promotion("raise"):
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(Q, KE, V, **kw)), ref,
                               rtol=2e-6, atol=2e-6)
    g = nbjax.grad(lambda q: jnp.sum(nn.dot_product_attention(q, KE, V, **kw) ** 2))(Q)
    assert g.shape == Q.shape
    if "mask" not in kw:  # unbatched inputs: one sequence
      one = {k: (v[:1] if k.endswith("lengths") else v) for k, v in kw.items()}
      rk1 = dict(rk, ql=None if rk["ql"] is None else rk["ql"][:1],
                 kl=None if rk["kl"] is None else rk["kl"][:1])
      np.testing.assert_allclose(np.asarray(nn.dot_product_attention(Q[0], KE[0], V[0], **one)),
                                 _attention_ref(Q[:1], KE[:1], V[:1], **rk1)[0][0],
                                 rtol=2e-6, atol=2e-6)


def test_dot_product_attention_shapes_grads_and_errors():
  out3 = nn.dot_product_attention(Q[0], KE[0], V[0])  # no batch dimension
  np.testing.assert_allclose(np.asarray(out3), _attention_ref(Q, KE, V)[0][0], rtol=2e-6,
                             atol=2e-6)
  q32, k32, v32 = (a.astype(np.float32) for a in (Q, KE, V))
  assert nn.dot_product_attention(q32, k32, v32).dtype == np.float32
  f = lambda q: jnp.sum(nn.dot_product_attention(q, KE, V, is_causal=True) ** 2)  # noqa: E731
  np.testing.assert_allclose(np.asarray(nbjax.jit(nbjax.grad(f))(Q)),  # float32 softmax
                             np.asarray(nbjax.grad(f)(Q)), rtol=1e-5, atol=2e-6)
  def plain(q, k, v):  # float64 throughout (nbjax's own derivatives of einsum/softmax)
    logits = jnp.einsum("btnh,bsnh->bnts", q, jnp.repeat(k, 2, axis=2)) / np.sqrt(H) + BIAS
    return jnp.einsum("bnts,bsnh->btnh", nn.softmax(logits), jnp.repeat(v, 2, axis=2))
  for argnum in range(3):
    g = nbjax.grad(lambda *a: jnp.sum(jnp.sin(nn.dot_product_attention(*a, bias=BIAS))),
                   argnums=argnum)(Q, KE, V)
    want = nbjax.grad(lambda *a: jnp.sum(jnp.sin(plain(*a))), argnums=argnum)(Q, KE, V)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-5, atol=1e-6)
  check_grads(plain, (Q, KE, V), order=1, eps=1e-4, atol=1e-6, rtol=1e-6)
  with pytest.raises(ValueError, match="multiple of key/value heads"):
    nn.dot_product_attention(Q[:, :, :3], KE, V)
  with pytest.raises(ValueError, match="value shape should be"):
    nn.dot_product_attention(Q, KE, V[:, :4])
  with pytest.raises(ValueError, match="mask dtype should be bool"):
    nn.dot_product_attention(Q, KE, V, mask=MASK.astype(np.float64))
  with pytest.raises(ValueError, match="query_seq_lengths dtype should be int32"):
    nn.dot_product_attention(Q, KE, V, query_seq_lengths=QL.astype(np.int64))
  with pytest.raises(ValueError, match="Unsupported implementation option"):
    nn.dot_product_attention(Q, KE, V, implementation="flash")
  with pytest.raises(NotImplementedError, match="cudnn"):
    nn.dot_product_attention(Q, KE, V, implementation="cudnn")


@pytest.mark.parametrize("name", ["relu", "gelu", "softmax", "log_softmax", "silu",
                                  "softplus", "logsumexp", "standardize", "hard_swish"])
def test_jit_and_vmap_agree_with_eager(name):
  f = getattr(nn, name)
  eager = np.asarray(f(X))
  np.testing.assert_allclose(np.asarray(nbjax.jit(f)(X)), eager, rtol=1e-13, atol=1e-15)
  if name != "logsumexp":
    np.testing.assert_allclose(np.asarray(nbjax.vmap(f)(X)), eager, rtol=1e-13, atol=1e-15)


# -- initializers ------------------------------------------------------------------------------

I = nn.initializers
# jax.nn.initializers' values for jax.random.key(42), shape (2, 3) (JAX 0.10.2, x64 on)
JAX_VALUES = {
    "glorot_normal": (I.glorot_normal(), np.float32, (2, 3), [
        -0.019425004720687866, 0.31951215863227844, 0.2026711106300354, 0.10534006357192993,
        -0.0851031169295311, 0.14876757562160492]),
    "he_uniform": (I.he_uniform(), np.float64, (2, 3), [
        -0.25382315471312344, -1.680054401517546, 0.25684379779922845, 0.7961160119565088,
        0.650559465380225, 0.49861496425261115]),
    "lecun_normal": (I.lecun_normal(), np.float64, (2, 3), [
        -0.14165649467936764, -1.43544201006416, 0.14336016699490525, 0.46700764292797425,
        0.3742971267446852, 0.28255079816481615]),
    "orthogonal": (I.orthogonal(), np.float32, (2, 3), [
        -0.08792734146118164, 0.918591320514679, -0.3853037655353546, 0.8722633719444275,
        0.2578020393848419, 0.41556569933891296]),
    "normal": (I.normal(5.), np.float32, (2, 3), [
        -0.141523078083992, 2.3356592655181885, 1.4785147905349731, 0.7677295804023743,
        -0.6201640963554382, 1.084615707397461]),
    "variance_scaling": (I.variance_scaling(2., "fan_geo_avg", "normal", in_axis=0,
                                            out_axis=(1, 2)), np.float64, (2, 3, 2), [
        -0.14035057562418365, -1.6487101325934932, 0.14204030316992045, 0.4652210673756366,
        0.37203450995683196, 0.28038263887640785, 0.2818037846930561, 0.178810098700211,
        -0.5447253151901692, -0.4822102150176179, -0.5319016064280265, -1.1979251290881476]),
}


@pytest.mark.parametrize("name", sorted(JAX_VALUES))
def test_initializers_give_jax_values(name):
  init, dtype, shape, want = JAX_VALUES[name]
  got = init(nbjax.random.key(42), shape, dtype)
  assert got.dtype == dtype and got.shape == shape
  np.testing.assert_allclose(np.asarray(got).ravel(), want, rtol=2e-6 if dtype == np.float32
                             else 1e-12)


def test_initializer_distributions():
  key = nbjax.random.key(0)
  assert np.asarray(I.zeros(key, (2, 3))).tolist() == [[0.] * 3] * 2
  assert I.ones(key, (2,), np.float32).dtype == np.float32
  assert np.asarray(I.constant(-7)(key, (2, 2), np.int32)).tolist() == [[-7, -7]] * 2
  u = np.asarray(I.uniform(3.)(key, (20000,)))
  assert u.min() >= 0 and u.max() < 3 and abs(u.mean() - 1.5) < 0.05
  t = np.asarray(I.truncated_normal(2., lower=-1., upper=1.5)(key, (20000,)))
  assert t.min() > -2 and t.max() < 3
  # variance_scaling: std sqrt(scale / fan) for every distribution (fan_in = 64 * 3 * 3)
  shape = (3, 3, 64, 32)
  for dist in ["truncated_normal", "normal", "uniform"]:
    w = np.asarray(I.variance_scaling(2., "fan_in", dist)(key, shape))
    assert abs(w.std() / np.sqrt(2. / (64 * 9)) - 1) < 0.03, dist
  w = np.asarray(I.glorot_uniform()(key, (300, 100)))
  lim = np.sqrt(6 / 400)
  assert np.abs(w).max() <= lim and np.abs(w).max() > 0.99 * lim
  c = np.asarray(I.he_normal()(key, (200, 200), np.complex64))
  assert c.dtype == np.complex64 and abs(np.sqrt((np.abs(c) ** 2).mean()) / 0.1 - 1) < 0.03
  with pytest.raises(ValueError, match="invalid mode"):
    I.variance_scaling(1., "fan_max", "normal")(key, (2, 2))
  with pytest.raises(ValueError, match="invalid distribution"):
    I.variance_scaling(1., "fan_in", "cauchy")(key, (2, 2))
  with pytest.raises(ValueError, match="Can't compute input and output sizes"):
    I.lecun_normal()(key, (5,))
  assert I.xavier_normal is I.glorot_normal and I.kaiming_uniform is I.he_uniform


def test_orthogonal_initializers():
  key = nbjax.random.key(3)
  for shape, axis in [((5, 3), -1), ((3, 5), -1), ((4, 2, 6), 1), ((6, 6), 0)]:
    w = np.asarray(I.orthogonal(scale=2., column_axis=axis)(key, shape))
    m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis])
    g = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(g, 4 * np.eye(len(g)), atol=1e-12)
  d = np.asarray(I.delta_orthogonal()(key, (3, 3, 4, 4)))
  centre = d[1, 1]
  np.testing.assert_allclose(centre @ centre.T, np.eye(4), atol=1e-12)
  assert np.count_nonzero(d) == np.count_nonzero(centre)
  with pytest.raises(ValueError, match="requires at least a 2D shape"):
    I.orthogonal()(key, (3,))
  with pytest.raises(ValueError, match="3D, 4D or 5D"):
    I.delta_orthogonal()(key, (4, 4))
  assert I.orthogonal()(key, (0, 3)).shape == (0, 3)


def test_log_softmax_of_integers_and_float_initial_of_integer_reductions():
  # an integer input: the -inf initial of the max saturates (convert_element_type), as JAX's
  x = jnp.arange(3)
  np.testing.assert_allclose(nn.log_softmax(x), sp.log_softmax(np.arange(3.)), rtol=1e-12)
  assert int(jnp.max(x, initial=-np.inf)) == 2 and int(jnp.max(x, initial=2.7)) == 2
  assert int(jnp.sum(x, initial=np.nan)) == 3  # NaN converts to 0
