"""``nbjax.nn.scaled_matmul``, ``scaled_dot_general`` and ``get_scaled_dot_general_config``
(``nbjax/nn/_scaled.py``): JAX 0.10.2's config objects, argument errors, block
quantization (mxfp8: float8_e4m3fn data with float8_e8m0fnu power-of-two scales; nvfp4:
float4_e2m1fn data, float8_e4m3fn scales and a global scale), the custom VJP, eager and under
jit/vmap. Expected values come from JAX 0.10.2 (x64) running its own ``scaled_dot_general``
under ``jit`` with the f32 dequantize-and-dot reference standing in for the GPU-only
``scaled_matmul`` lowering."""
import warnings

import ml_dtypes
import numpy as np
import pytest

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import nn

A = ((np.arange(32 * 64, dtype=np.float32).reshape(32, 64) % 7 - 3) * np.float32(0.37)
     + np.float32(0.011))
B = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) % 11 - 5) * np.float32(0.21)
DN = (((1,), (0,)), ((), ()))

# mode -> (global scale, out[0, :6], d/dA[0, :6], d/dB[:3, :2], (sum out, sum dA, sum dB))
JAX_VALUES = {
    "mxfp8": (None,
              [-0.2780914306640625, 0.36175537109375, 1.7740631103515625, 4.00048828125,
               1.2825775146484375, -0.63812255859375],
              [-1.0, -0.8125, -0.625, -0.40625, -0.203125, 0.0],
              [-2.0400390625, -2.0400390625, -0.5400390625, -0.5400390625, 0.9599609375,
               0.9599609375],
              (1.072113037109375, -58.0, 321.71875)),
    "nvfp4": (0.5,
              [-0.515625, 0.515625, 1.546875, 3.931640625, 1.16015625, -0.451171875],
              [-1.0499999523162842, -0.8399999141693115, -0.630000114440918,
               -0.41999995708465576, -0.21000002324581146, 1.4901161193847656e-08],
              [-1.8680000305175781, -1.8680000305175781, -0.38800010085105896,
               -0.38800010085105896, 1.092000126838684, 1.092000126838684],
              (1.546875, -60.48000717163086, 649.8563299179077)),
}


def _configs(mode):
  gs = JAX_VALUES[mode][0]
  return [nn.get_scaled_dot_general_config(mode, None if gs is None else
                                           jnp.array([gs], np.float32))] * 3


def test_configs_match_jax():
  c = nn.get_scaled_dot_general_config("mxfp8")
  assert repr(c) == ("BlockScaleConfig(mode='mxfp8', block_size=32, data_type=<class "
                     "'ml_dtypes.float8_e4m3fn'>, scale_type=<class 'ml_dtypes.float8_e8m0fnu'>,"
                     " global_scale=None, infer_only=False)")
  c = nn.get_scaled_dot_general_config("nvfp4")
  assert (c.mode, c.block_size, c.data_type, c.scale_type, c.infer_only) == (
      "nvfp4", 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, False)
  assert c.global_scale.dtype == np.float32 and c.global_scale.shape == (1,)
  assert float(c.global_scale[0]) == 1.0
  g = jnp.array([0.25], np.float32)
  assert nn.get_scaled_dot_general_config("nvfp4", g).global_scale is g
  with pytest.raises(ValueError, match="^Unsupported mode: fp8$"):
    nn.get_scaled_dot_general_config("fp8")


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
@pytest.mark.parametrize("jit", [False, True])
def test_scaled_dot_general_matches_jax(mode, jit):
  cfg = _configs(mode)
  _, out_w, ga_w, gb_w, sums = JAX_VALUES[mode]
  f = lambda a, b: nn.scaled_dot_general(a, b, DN, configs=cfg)
  g = jax.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))
  if jit:
    f, g = jax.jit(f), jax.jit(g)
  a, b = jnp.asarray(A), jnp.asarray(B)  # (as JAX: without batch dims, operands need .aval)
  out = f(a, b)
  ga, gb = g(a, b)
  assert out.dtype == np.float32 and out.shape == (32, 32)
  np.testing.assert_array_equal(np.asarray(out)[0, :6], np.float32(out_w))
  # (JAX's figures from its machine: the gradients' float32 dots round 1.3e-6 apart on an
  # AVX-512 AMD machine's BLAS)
  np.testing.assert_allclose(np.asarray(ga)[0, :6], ga_w, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(np.asarray(gb)[:3, :2].ravel(), gb_w, rtol=1e-5)
  np.testing.assert_allclose([float(np.sum(np.asarray(x, np.float64))) for x in (out, ga, gb)],
                             sums, rtol=1e-6)


def test_quantization_against_ml_dtypes():
  # one mxfp8 block: scale 2 ** ceil(log2(amax / 448)), elements rounded to float8_e4m3fn
  rng = np.random.default_rng(0)
  for scale in (1e-3, 1.0, 37.0, 1e4):
    a = (rng.standard_normal((1, 3, 64)) * scale).astype(np.float32)
    b = np.zeros((1, 1, 64), np.float32)
    b[0, 0, 5] = 1.0  # picks a[..., 5] (b's own block scale is 2**-8: exact)
    cfg = [nn.get_scaled_dot_general_config("mxfp8")] * 3
    got = nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))), configs=cfg)
    blk = a[..., :32]
    amax = np.abs(blk).max(-1, keepdims=True)
    s = np.exp2(np.ceil(np.log2(amax / np.float32(448)))).astype(np.float32)
    want = (blk / s).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * s
    np.testing.assert_array_equal(np.asarray(got)[0, :, 0], want[0, :, 5])


def test_zero_block_is_zero():
  # JAX's eager CPU ops flush the 2**-127 scale of an all-zero block to 0 (NaN results);
  # under jit (and here) the block quantizes to zeros.
  a = np.zeros((1, 2, 32), np.float32)
  b = np.ones((1, 3, 32), np.float32)
  out = nn.scaled_dot_general(a, b, (((2,), (2,)), ((0,), (0,))), configs=_configs("mxfp8"))
  np.testing.assert_array_equal(out, np.zeros((1, 2, 3), np.float32))


def test_scaled_dot_general_options_and_errors():
  a = jnp.ones((2, 64), np.float32)
  b = jnp.ones((64, 3), np.float32)
  np.testing.assert_array_equal(nn.scaled_dot_general(a, b, DN), a @ b)  # no configs
  out = nn.scaled_dot_general(a, b, DN, preferred_element_type=jnp.bfloat16,
                              configs=_configs("mxfp8"))
  assert out.dtype == jnp.bfloat16 and out.shape == (2, 3)
  with pytest.raises(TypeError) as e:
    nn.scaled_dot_general(a, b, DN, preferred_element_type=np.float64, configs=_configs("mxfp8"))
  assert str(e.value) == ("Only support preferred_element_type in (f32, bf16, f16), but got "
                          "{preferred_element_type}")
  with pytest.raises(AssertionError):  # contracting size must be a multiple of the block
    nn.scaled_dot_general(a[:, :48], b[:48], DN, configs=_configs("mxfp8"))
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    nn.scaled_dot_general(a, b, DN, configs=_configs("mxfp8"), implementation="cudnn")
  assert any(issubclass(x.category, DeprecationWarning) for x in w)


def test_scaled_dot_general_vmap():
  cfg = _configs("mxfp8")
  f = lambda a: nn.scaled_dot_general(a, jnp.asarray(B), DN, configs=cfg)
  xs = jnp.asarray(np.stack([A[:4], -A[4:8]]))
  np.testing.assert_array_equal(jax.vmap(f)(xs), np.stack([f(xs[0]), f(xs[1])]))


def test_scaled_matmul():
  a = jnp.array([1, 2, 3]).reshape((1, 1, 3))
  b = jnp.array([4, 5, 6]).reshape((1, 1, 3))
  s = jnp.array([0.5]).reshape((1, 1, 1))
  out = nn.scaled_matmul(a, b, s, s)  # JAX's docstring example
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out, [[[8.0]]])
  rng = np.random.default_rng(1)
  a8 = rng.standard_normal((2, 3, 64)).astype(ml_dtypes.float8_e4m3fn)
  b8 = rng.standard_normal((2, 4, 64)).astype(ml_dtypes.float8_e4m3fn)
  sa = np.exp2(rng.integers(-3, 4, (2, 3, 2))).astype(ml_dtypes.float8_e8m0fnu)
  sb = np.exp2(rng.integers(-3, 4, (2, 4, 2))).astype(ml_dtypes.float8_e8m0fnu)
  deq = lambda x, s: x.astype(np.float32) * np.repeat(s.astype(np.float32), 32, axis=-1)
  want = np.einsum("BMK,BNK->BMN", deq(a8, sa), deq(b8, sb))
  got = nn.scaled_matmul(jnp.asarray(a8), jnp.asarray(b8), jnp.asarray(sa), jnp.asarray(sb),
                         preferred_element_type=jnp.bfloat16)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(jnp.bfloat16).astype(
      np.float32), rtol=1e-2)
  f = jax.jit(lambda *x: nn.scaled_matmul(*x))
  np.testing.assert_allclose(f(deq(a8, np.ones_like(sa)), deq(b8, np.ones_like(sb)),
                               sa.astype(np.float32), sb.astype(np.float32)), want, rtol=1e-5)
  # (rtol 1e-5: float32 BLAS rounds ~1e-6 apart across machines; a Zen 1 VM differed so)
  with pytest.raises(TypeError, match="on the host only"):  # no float8 primitives under jit
    jax.jit(nn.scaled_matmul)(jnp.asarray(a8), jnp.asarray(b8), jnp.asarray(sa), jnp.asarray(sb))
  with pytest.raises(NotImplementedError, match="scaled_matmul_wrapper"):
    jax.grad(lambda x: nn.scaled_matmul(x, b, s, s).sum())(a.astype(np.float32))


def test_scaled_matmul_errors():
  x = jnp.ones((1, 2, 4))
  s = jnp.ones((1, 2, 2))
  with pytest.raises(ValueError, match="^scaled_matmul requires all inputs to be 3-dim"):
    nn.scaled_matmul(x[0], x, s, s)
  with pytest.raises(ValueError) as e:
    nn.scaled_matmul(x, jnp.ones((1, 2, 6)), s, s)
  assert str(e.value) == ("scaled_matmul requires inputs a and b to have matching batch (B) "
                          "and contract (K) dimensions, but got shapes (1, 2, 4) and (1, 2, 6)")
  with pytest.raises(ValueError) as e:
    nn.scaled_matmul(x, x, s, jnp.ones((1, 2, 1)))
  assert str(e.value) == ("scaled_matmul requires scales to have matching batch (B) and "
                          "contract (K) dimensions, but got shapes (1, 2, 2) and (1, 2, 1)")
  with pytest.raises(ValueError) as e:
    nn.scaled_matmul(x, x, jnp.ones((1, 3, 2)), s)
  assert str(e.value) == ("scaled_matmul requires scales to match non-contract dimensions of "
                          "inputs, but got shapes a: (1, 2, 4), b: (1, 2, 4), a_scales: "
                          "(1, 3, 2), b_scales: (1, 2, 2)")
