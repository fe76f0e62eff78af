"""lax.conv_general_dilated and its wrappers against an independent reference: SciPy's
``correlate`` per (batch, output feature, input feature) on an input dilated and padded with
NumPy (no im2col), across strides, dilations, paddings, groups, layouts, 1-3 spatial dims and
dtypes; gradients against the same reference's adjoint; the API's errors as JAX words them.
(The registry-generated checks cover jvp, transposes, vmap and jit per sample as well.)
"""
import functools

import numpy as np
import pytest
from scipy import signal

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import lax
from nbjax.lax import convolution as conv_mod


def _dilate(a, axes, d):
  for ax, f in zip(axes, d):
    if f > 1 and a.shape[ax]:
      shape = list(a.shape)
      shape[ax] = (a.shape[ax] - 1) * f + 1
      out = np.zeros(shape, a.dtype)
      idx = [slice(None)] * a.ndim
      idx[ax] = slice(None, None, f)
      out[tuple(idx)] = a
      a = out
  return a


def _pad(a, axes, pads):
  for ax, (lo, hi) in zip(axes, pads):
    width = [(0, 0)] * a.ndim
    width[ax] = (max(lo, 0), max(hi, 0))
    a = np.pad(a, width)
    idx = [slice(None)] * a.ndim
    idx[ax] = slice(max(-lo, 0), a.shape[ax] - max(-hi, 0))
    a = a[tuple(idx)]
  return a


def ref_conv(x, w, strides, pads, lhs_dil=None, rhs_dil=None, G=1, Gb=1):
  """x: (N, C, *S), w: (O, I, *K): out (N // Gb, O, *S') by scipy.signal.correlate (which
  conjugates its second argument: XLA's convolution does not)."""
  if x.shape[0] == 0:  # the output's spatial shape from one zero example
    return ref_conv(np.zeros((max(Gb, 1),) + x.shape[1:], x.dtype), w, strides, pads, lhs_dil,
                    rhs_dil, G, Gb)[:0]
  k = x.ndim - 2
  sp = tuple(range(2, 2 + k))
  xd = _pad(_dilate(x, sp, lhs_dil or (1,) * k), sp, pads)
  wd = _dilate(w, sp, rhs_dil or (1,) * k)
  N, C, O = x.shape[0], x.shape[1], w.shape[0]
  Nb, Cg, Og = N // Gb, C // G, O // max(G, Gb)
  outs = []
  for n in range(Nb):
    row = []
    for o in range(O):
      g = o // Og
      xn = xd[g * Nb + n] if Gb > 1 else xd[n, g * Cg:(g + 1) * Cg]
      acc = sum(signal.correlate(xn[i], np.conj(wd[o, i]), mode="valid")
                for i in range(xn.shape[0]))
      row.append(acc[tuple(slice(None, None, s) for s in strides)])
    outs.append(row)
  return np.array(outs)


def _rand(rng, shape, dtype):
  d = np.dtype(dtype)
  if d.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
  if d.kind in "iu":
    return rng.integers(-3, 4, shape).astype(d)
  return rng.standard_normal(shape).astype(d)


def _tol(dtype):
  return dict(rtol=2e-5, atol=2e-5) if np.dtype(dtype) in (np.float32, np.complex64) else \
      dict(rtol=1e-12, atol=1e-12)


CASES = [  # x shape (NC...), w shape (OI...), strides, pads, lhs_dil, rhs_dil, G, Gb
    ((2, 3, 9), (4, 3, 3), (1,), [(1, 1)], None, None, 1, 1),
    ((2, 3, 9), (4, 3, 3), (2,), [(0, 2)], None, (2,), 1, 1),
    ((1, 2, 6), (3, 2, 2), (1,), [(1, -1)], (3,), None, 1, 1),
    ((2, 4, 7, 6), (6, 2, 3, 3), (1, 2), [(1, 1), (2, 0)], None, None, 2, 1),
    ((2, 3, 8, 7), (5, 3, 3, 2), (2, 3), [(1, 2), (0, 0)], (1, 2), (2, 1), 1, 1),
    ((4, 2, 6, 5), (6, 2, 2, 3), (1, 1), [(0, 0), (1, 1)], None, None, 1, 2),
    ((3, 4, 5, 5), (4, 1, 3, 3), (1, 1), [(1, 1), (1, 1)], None, None, 4, 1),  # depthwise
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 1), [(0, 1), (1, 1), (0, 0)], None, (1, 1, 2),
     1, 1),
    ((0, 3, 6), (2, 3, 2), (1,), [(0, 0)], None, None, 1, 1),
    # pads the gathers read around (no padded copy): negative (a crop), wider than a window
    ((2, 3, 9, 7), (4, 3, 3, 3), (2, 1), [(-1, 3), (4, -2)], None, (1, 2), 1, 1),
    ((2, 4, 6, 5), (6, 2, 2, 3), (1, 2), [(3, 3), (2, 4)], None, None, 2, 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_scipy_reference(case, dtype):
  xs, ws, strides, pads, ld, rd, G, Gb = CASES[case]
  rng = np.random.default_rng(case)
  x, w = _rand(rng, xs, dtype), _rand(rng, ws, dtype)
  got = lax.conv_general_dilated(x, w, strides, pads, ld, rd, feature_group_count=G,
                                 batch_group_count=Gb)
  want = ref_conv(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64),
                  w.astype(np.complex128 if w.dtype.kind == "c" else np.float64),
                  strides, pads, ld, rd, G, Gb)
  assert got.dtype == np.dtype(dtype) and got.shape == want.shape
  np.testing.assert_allclose(np.asarray(got), want, **_tol(dtype))
  jitted = jax.jit(lambda a, b: lax.conv_general_dilated(
      a, b, strides, pads, ld, rd, feature_group_count=G, batch_group_count=Gb))(x, w)
  np.testing.assert_allclose(np.asarray(jitted), want, **_tol(dtype))


@pytest.mark.parametrize("layout", ["cl", "cf", "swap", "col2im", "rows", "direct",
                                    "direct_swap"])
@pytest.mark.parametrize("budget", [None, 7, 100])
def test_every_patch_strategy_and_chunking(monkeypatch, layout, budget):
  """Each strategy (im2col layouts, col2im, the direct register tiles computing a forward
  convolution as such or by the kernel gradient's swapped roles), and patches built a few
  rows at a time (chunks run by two threads), give the same result."""
  monkeypatch.setattr(conv_mod, "_strategy", lambda *a: layout)
  monkeypatch.setattr(conv_mod, "_plan", functools.lru_cache(conv_mod._plan.__wrapped__))
  if budget:
    monkeypatch.setattr(conv_mod, "_PATCH_BUDGET", budget)
    monkeypatch.setattr(conv_mod, "_CHUNK", budget)
  ungrouped = layout in ("swap", "col2im", "rows")  # these take no groups
  cases = ((0, 1, 7, 9) if layout.startswith("direct") else  # (no groups, no input dilation)
           (0, 1, 2, 4, 7, 9) if ungrouped else (0, 3, 4, 5, 7, 10))
  for case in cases:
    xs, ws, strides, pads, ld, rd, G, Gb = CASES[case]
    rng = np.random.default_rng(case)
    x, w = _rand(rng, xs, np.float64), _rand(rng, ws, np.float64)
    got = lax.conv_general_dilated(x, w, strides, pads, ld, rd, feature_group_count=G,
                                   batch_group_count=Gb)
    np.testing.assert_allclose(np.asarray(got), ref_conv(x, w, strides, pads, ld, rd, G, Gb),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spec,perm_x,perm_w", [
    (("NHWC", "HWIO", "NHWC"), (0, 2, 3, 1), (2, 3, 1, 0)),
    (("NCHW", "OIHW", "NCHW"), (0, 1, 2, 3), (0, 1, 2, 3)),
    (("CHWN", "IOHW", "HNWC"), (1, 2, 3, 0), (1, 0, 2, 3)),
])
def test_string_dimension_numbers(spec, perm_x, perm_w):
  rng = np.random.default_rng(1)
  x, w = _rand(rng, (2, 3, 7, 6), np.float64), _rand(rng, (4, 3, 3, 2), np.float64)
  want = ref_conv(x, w, (2, 1), lax.padtype_to_pads((7, 6), (3, 2), (2, 1), "SAME"))
  got = lax.conv_general_dilated(x.transpose(perm_x), w.transpose(perm_w), (2, 1), "SAME",
                                 dimension_numbers=spec)
  out_perm = [{"N": 0, "C": 1, "H": 2, "W": 3}[c] for c in spec[2]]
  np.testing.assert_allclose(np.asarray(got), want.transpose(out_perm), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["int32", "int8", "bool", "float16"])
def test_other_dtypes(dtype):
  rng = np.random.default_rng(2)
  x = _rand(rng, (2, 3, 6), np.int32).astype(dtype)
  w = _rand(rng, (2, 3, 3), np.int32).astype(dtype)
  got = lax.conv_general_dilated(x, w, (1,), "SAME")
  want = ref_conv(x.astype(np.float64), w.astype(np.float64), (1,), [(1, 1)])
  assert got.dtype == np.dtype(dtype)
  if dtype == "bool":
    want = want != 0
  np.testing.assert_array_equal(np.asarray(got), want.astype(dtype))


def test_preferred_element_type():
  x, w = np.ones((1, 2, 4), np.float32), np.ones((1, 2, 2), np.float32)
  out = lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.float64)
  assert out.dtype == np.float64 and np.all(np.asarray(out) == 4.0)
  with pytest.raises(TypeError, match="must not be narrower"):
    lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.float16)
  with pytest.raises(TypeError, match="Input type is incompatible with"):
    lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.int32)
  xi, wi = x.astype(np.int8), w.astype(np.int8)  # integers may accumulate as floats
  out = lax.conv_general_dilated(xi, wi, (1,), "VALID", preferred_element_type=np.float32)
  assert out.dtype == np.float32 and np.all(np.asarray(out) == 4.0)
  out = lax.conv_general_dilated(xi, wi, (1,), "VALID", preferred_element_type=np.int32)
  assert out.dtype == np.int32 and np.all(np.asarray(out) == 4)
  with pytest.raises(TypeError, match="same signedness"):
    lax.conv_general_dilated(xi, wi, (1,), "VALID", preferred_element_type=np.uint32)


def test_padtype_to_pads_and_dimension_numbers():
  assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
  assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME_LOWER") == [(1, 1), (1, 0)]
  assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "VALID") == [(0, 0), (0, 0)]
  with pytest.raises(RuntimeError, match="Unrecognized padding type"):
    lax.padtype_to_pads((5,), (3,), (1,), "foo")
  dn = lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), ("NHWC", "HWIO", "NHWC"))
  assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
  assert lax.conv_dimension_numbers((1,) * 3, (1,) * 3, None) == ((0, 1, 2),) * 3
  with pytest.raises(TypeError, match="must contain the characters 'N' and 'C' exactly once"):
    lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("NHWW", "HWIO", "NHWC"))
  with pytest.raises(TypeError, match="must be length 3"):
    lax.conv_dimension_numbers((1,) * 4, (1,) * 4, ("NHWC", "HWIO"))


def test_errors_as_jax_words_them():
  x, w = np.ones((2, 3, 5), np.float32), np.ones((4, 3, 2), np.float32)
  with pytest.raises(TypeError, match="requires arguments to have the same dtypes, got "
                                      "float32, float64"):
    lax.conv_general_dilated(x, w.astype(np.float64), (1,), "VALID")
  with pytest.raises(ValueError, match="window and window_strides must have the same number"):
    lax.conv_general_dilated(x, w, (1, 1), "VALID")
  with pytest.raises(ValueError, match="feature_group_count must divide lhs feature dimension "
                                       "size, but 2 does not divide 3"):
    lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=2)
  with pytest.raises(ValueError, match="should be a string or a sequence of"):
    lax.conv_general_dilated(x, w, (1,), [(1,)])
  with pytest.raises(ValueError, match="String padding is not implemented for transposed"):
    lax.conv_general_dilated(x, w, (1,), "SAME", lhs_dilation=(2,))
  with pytest.raises(ValueError, match="Negative padding is larger than the size"):
    lax.conv_general_dilated(x, w, (1,), [(-3, -3)])
  with pytest.raises(ValueError, match="window_strides must be positive"):
    lax.conv_general_dilated(x, w, (0,), "VALID")


def test_conv_wrappers():
  rng = np.random.default_rng(3)
  x, w = _rand(rng, (2, 3, 6, 5), np.float64), _rand(rng, (4, 3, 3, 3), np.float64)
  np.testing.assert_allclose(np.asarray(lax.conv(x, w, (1, 2), "SAME")),
                             ref_conv(x, w, (1, 2), [(1, 1), (1, 1)]), rtol=1e-12)
  np.testing.assert_allclose(
      np.asarray(lax.conv_with_general_padding(x, w, (1, 1), [(0, 1), (2, 0)], (2, 1), (1, 2))),
      ref_conv(x, w, (1, 1), [(0, 1), (2, 0)], (2, 1), (1, 2)), rtol=1e-12)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (2, 1)])
def test_conv_transpose_kernel_is_the_gradient(padding, strides):
  """conv_transpose(transpose_kernel=True) is the input gradient of the forward conv
  (Keras' Conv2DTranspose) when the shapes line up."""
  rng = np.random.default_rng(4)
  dn = ("NHWC", "HWIO", "NHWC")
  x, w = _rand(rng, (2, 8, 8, 3), np.float64), _rand(rng, (3, 3, 3, 5), np.float64)
  f = lambda a: lax.conv_general_dilated(a, w, strides, padding, dimension_numbers=dn)
  y, vjp = jax.vjp(f, x)
  ct = _rand(rng, y.shape, np.float64)
  want, = vjp(ct)
  got = lax.conv_transpose(ct, w, strides, padding, dimension_numbers=dn, transpose_kernel=True)
  if got.shape == want.shape:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)
  else:  # 'VALID' with a stride that drops the last input rows: the rest agrees
    assert padding == "VALID" and got.shape[1] < 8
    n, m = got.shape[1:3]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want)[:, :n, :m], rtol=1e-12,
                               atol=1e-12)


def test_conv_transpose_shapes_as_keras():
  x, w = np.ones((1, 5, 5, 2), np.float32), np.ones((3, 3, 2, 4), np.float32)
  assert lax.conv_transpose(x, w, (2, 2), "SAME").shape == (1, 10, 10, 4)
  assert lax.conv_transpose(x, w, (2, 2), "VALID").shape == (1, 11, 11, 4)
  assert lax.conv_transpose(x, w, (1, 1), [(1, 1), (0, 0)]).shape == (1, 5, 3, 4)
  assert lax.conv_transpose(x[:, :, 0], w[:, 0], (2,), "SAME").shape == (1, 10, 4)


@pytest.mark.parametrize("G,Gb", [(1, 1), (2, 1), (1, 2)])
def test_grad_against_reference_adjoint(G, Gb):
  """Both gradients by reverse mode, eagerly and under jit, against the reference: <ct,
  conv(x, w)> is linear in each, so its gradient is read off by finite differences of
  the reference in every coordinate (exact for a bilinear map)."""
  rng = np.random.default_rng(5)
  x, w = _rand(rng, (4, 4, 5, 4), np.float64), _rand(rng, (4, 4 // G, 3, 2), np.float64)
  args = dict(strides=(2, 1), pads=[(1, 0), (0, 1)], lhs_dil=(1, 2), rhs_dil=(2, 1), G=G, Gb=Gb)
  ct = _rand(rng, ref_conv(x, w, **args).shape, np.float64)
  loss = lambda a, b: jnp.sum(lax.conv_general_dilated(
      a, b, args["strides"], args["pads"], args["lhs_dil"], args["rhs_dil"],
      feature_group_count=G, batch_group_count=Gb) * ct)
  ref_loss = lambda a, b: np.sum(ref_conv(a, b, **args) * ct)

  def fd(v, i):
    g = np.zeros_like(v[i])
    for idx in np.ndindex(*v[i].shape):
      e = np.zeros_like(v[i])
      e[idx] = 1.0
      g[idx] = ref_loss(*[e if j == i else v[j] for j in range(2)])
    return g
  gx, gw = jax.grad(loss, argnums=(0, 1))(x, w)
  np.testing.assert_allclose(np.asarray(gx), fd((x, w), 0), rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(gw), fd((x, w), 1), rtol=1e-10, atol=1e-10)
  jx, jw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
  np.testing.assert_allclose(np.asarray(jx), np.asarray(gx), rtol=1e-10, atol=1e-10)
  np.testing.assert_allclose(np.asarray(jw), np.asarray(gw), rtol=1e-10, atol=1e-10)


def test_vmap_per_example_kernels():
  rng = np.random.default_rng(6)
  x, w = _rand(rng, (3, 2, 4, 6), np.float32), _rand(rng, (3, 5, 4, 2), np.float32)
  f = lambda a, b: lax.conv_general_dilated(a, b, (1,), "SAME")
  got = jax.vmap(f)(x, w)
  for i in range(3):
    np.testing.assert_allclose(np.asarray(got[i]), ref_conv(x[i], w[i], (1,), [(0, 1)]),
                               rtol=2e-5, atol=2e-5)


def test_benchmark_shape_nhwc_and_gradients():
  """The benchmarked case (batch 32, 28x28x16 -> 32 features, 3x3, NHWC/HWIO) and its two
  gradients, eagerly and under jit, against the reference (float32)."""
  rng = np.random.default_rng(7)
  x, w = _rand(rng, (32, 28, 28, 16), np.float32), _rand(rng, (3, 3, 16, 32), np.float32)
  dn = ("NHWC", "HWIO", "NHWC")
  f = lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=dn)
  y = f(x, w)
  xr, wr = x.transpose(0, 3, 1, 2).astype(np.float64), w.transpose(3, 2, 0, 1).astype(np.float64)
  want = ref_conv(xr[:2], wr, (1, 1), [(1, 1), (1, 1)]).transpose(0, 2, 3, 1)
  np.testing.assert_allclose(np.asarray(y)[:2], want, rtol=1e-4, atol=1e-4)
  ct = _rand(rng, y.shape, np.float32)
  gx, gw = jax.vjp(f, x, w)[1](ct)
  jx, jw = jax.jit(lambda a, b, c: jax.vjp(f, a, b)[1](c))(x, w, ct)
  np.testing.assert_allclose(np.asarray(gx), np.asarray(jx), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(np.asarray(gw), np.asarray(jw), rtol=1e-4, atol=1e-2)
  # the kernel gradient's entry (0, 0, c, o) is sum over n, h, w of x[n, h-1, w-1, c] * ct
  want_w00 = np.einsum("nhwc,nhwo->co", x[:, :-1, :-1].astype(np.float64),
                       ct[:, 1:, 1:].astype(np.float64))
  np.testing.assert_allclose(np.asarray(gw)[0, 0], want_w00, rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("xs,ws,kw", [
    ((5, 9, 11, 3), (3, 3, 3, 16), dict(window_strides=(1, 1), padding="SAME")),
    ((1, 12, 10, 6), (3, 2, 6, 40), dict(window_strides=(2, 1), padding=((2, 0), (1, 3)))),
    ((2, 13, 9, 4), (2, 3, 4, 24), dict(window_strides=(1, 2), padding="VALID",
                                        rhs_dilation=(2, 2))),
    ((3, 8, 4, 1), (3, 3, 1, 8), dict(window_strides=(1, 1), padding=((-1, 2), (1, 1)))),
    ((2, 17, 5), (5, 5, 12), dict(window_strides=(1,), padding="SAME", rhs_dilation=(3,))),
    ((2, 5, 6, 7, 3), (2, 3, 2, 3, 20), dict(window_strides=(1, 1, 2), padding="SAME",
                                             rhs_dilation=(2, 1, 1))),
    # contractions over 1024 (kernels.convolution._KB): blocks of taps, of channels
    ((2, 6, 7, 130), (3, 3, 130, 16), dict(window_strides=(1, 1), padding="SAME")),
    ((2, 9, 400), (3, 400, 16), dict(window_strides=(1,), padding="VALID")),
    ((1, 6, 9, 200), (2, 3, 200, 16), dict(window_strides=(1, 1), padding="VALID",
                                           rhs_dilation=(1, 2))),
    # strided: input gradients by residue classes (one with no taps: 1x1 windows)
    ((2, 11, 10, 8), (3, 3, 8, 16), dict(window_strides=(2, 2), padding="SAME")),
    ((2, 13, 12, 8), (3, 2, 8, 16), dict(window_strides=(2, 3), padding=((1, 2), (0, 1)),
                                         rhs_dilation=(2, 1))),
    ((2, 9, 9, 8), (1, 1, 8, 16), dict(window_strides=(2, 2), padding="VALID")),
])
def test_direct_kernels_forward_and_gradients_match_xla(monkeypatch, xs, ws, kw):
  """The direct register-tile kernels (forward, stride-1 input gradient, kernel gradient)
  against XLA, float64 and float32: features that fill no whole vector, a last partial
  vector, one image (its lines split between threads), strides, dilations, a cropped input,
  1-3 spatial axes, long contractions in blocks, strided input gradients by residue classes;
  blocks of images, of lines and of cotangent rows on two threads (small convolutions
  otherwise run as one block on the calling thread); the kernels are the ones that ran."""
  from kernels import convolution as K
  monkeypatch.setattr(conv_mod, "_PAR_FLOPS", 0)  # blocks on two threads, however small
  monkeypatch.setattr(conv_mod, "_TEAM_FLOPS", 0)
  ran = {"fwd": 0, "rhs": 0, "residues": 0}
  for mod, name, key in ((K, "direct_fwd", "fwd"), (K, "direct_rhs_grad", "rhs"),
                         (conv_mod, "_conv_residues", "residues")):
    real = getattr(mod, name)
    monkeypatch.setattr(mod, name, lambda *a, _r=real, _k=key: (ran.__setitem__(_k, ran[_k] + 1),
                                                                 _r(*a))[1])
  real = K.team_chunks  # (small batches: the kernels' chunk functions, on the native team)
  monkeypatch.setattr(K, "team_chunks", lambda fwd, dt: (
      ran.__setitem__("fwd" if fwd else "rhs", ran["fwd" if fwd else "rhs"] + 1), real(fwd, dt))[1])
  _check_vjp_against_xla(xs, ws, kw, np.random.default_rng(sum(xs) + ws[-1]), 3e-5, scaled=True)
  assert ran["fwd"] >= 2 and ran["rhs"] >= 2
  assert ran["residues"] == (2 if max(kw["window_strides"]) > 1 and ws[-2] >= 8 else
                             1 if max(kw["window_strides"]) > 1 and ws[-2] >= 4 else 0)


@pytest.mark.parametrize("xs,ws,kw,par", [
    ((100, 8, 8, 1), (3, 3, 1, 16), dict(window_strides=(1, 1), padding="SAME"), False),  # the
    ((100, 4, 4, 16), (3, 3, 16, 32), dict(window_strides=(1, 1), padding="SAME"), False),  # demo's
    ((100, 4, 4, 16), (3, 3, 16, 32), dict(window_strides=(1, 1), padding="SAME"), True),
    ((120, 6, 4, 3), (3, 2, 3, 20), dict(window_strides=(1, 1), padding=((-1, 2), (1, 0))), True),
    ((120, 5, 4), (3, 4, 24), dict(window_strides=(1,), padding=((3, 1),), rhs_dilation=(2,)),
     False),
    ((120, 5, 4), (3, 4, 24), dict(window_strides=(1,), padding=((3, 1),), rhs_dilation=(2,)),
     True),
])
def test_small_images_tile_across_the_batch(monkeypatch, par, xs, ws, kw):
  """A small batch whose lines are shorter than a register tile is padded whole and tiled
  across images (``by_image``; its kernel gradient sums over all of a block's images in each
  tile: ``fold``), in one block or in blocks of images on the native team: forward and both
  gradients against XLA; the tiled paths are the ones that ran."""
  from kernels import convolution as K
  monkeypatch.setattr(conv_mod, "_TEAM_FLOPS", 0 if par else 1e30)
  seen = set()
  real, fwd = K.team_chunks, K.direct_fwd  # (a dilated last axis: by_image in two passes)
  monkeypatch.setattr(K, "team_chunks", lambda f, dt: (seen.add(f), real(f, dt))[1])
  monkeypatch.setattr(K, "direct_fwd",
                      lambda *a: (seen.add("by_image" if a[-1] else "lines"), fwd(*a))[1])
  _check_vjp_against_xla(xs, ws, kw, np.random.default_rng(sum(xs) + ws[-1]), 3e-5, scaled=True)
  assert False in seen and (True in seen or "by_image" in seen)


def test_inputs_not_aliased():
  x, w = np.ones((1, 1, 4), np.float32), np.ones((1, 1, 2), np.float32)
  out = lax.conv_general_dilated(x, w, (1,), "VALID")
  x[...] = 7.0
  np.testing.assert_array_equal(np.asarray(out), np.full((1, 1, 3), 2.0, np.float32))


def test_registry_row_names_the_backend():
  from nbjax import registry
  p = registry.get("conv_general_dilated")
  assert p.family == "convolution" and set(p.impls) >= {"numba"}
  assert "im2col" in p.meta["note"] and "matmul" in p.meta["note"]


def test_conv_general_dilated_patches():
  """Feature c * prod(window) + window position of the output is the padded input there."""
  x = np.arange(2 * 5 * 4 * 3, dtype=np.float32).reshape(2, 5, 4, 3)
  p = np.asarray(lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME",
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC")))
  pads = lax.padtype_to_pads((5, 4), (2, 3), (1, 2), "SAME")
  xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
  assert p.shape == (2, 5, 2, 18)
  for n, oh, ow, c, kh, kw in np.ndindex(2, 5, 2, 3, 2, 3):
    assert p[n, oh, ow, c * 6 + kh * 3 + kw] == xp[n, oh + kh, ow * 2 + kw, c]


def test_shape_tuples():
  assert lax.conv_shape_tuple((1, 2, 5, 5), (3, 2, 3, 3), (1, 1), "SAME") == (1, 3, 5, 5)
  assert lax.conv_shape_tuple((4, 2, 7), (3, 2, 3), (2,), [(0, 0)], 2) == (2, 3, 3)
  dn = ("NHWC", "HWIO", "NHWC")
  assert lax.conv_general_shape_tuple((1, 5, 5, 2), (3, 3, 2, 3), (1, 1), "VALID", dn) == \
      (1, 3, 3, 3)
  shape = lax.conv_transpose_shape_tuple((1, 5, 5, 2), (3, 3, 2, 3), (2, 2), "SAME", dn)
  x, w = np.ones((1, 5, 5, 2), np.float32), np.ones((3, 3, 2, 3), np.float32)
  assert shape == (1, 10, 10, 3) == lax.conv_transpose(x, w, (2, 2), "SAME").shape


def test_conv_general_dilated_local():
  """Unshared weights: each output position's own matrix applied to its patch."""
  rng = np.random.default_rng(8)
  x, w = rng.standard_normal((2, 5, 4, 3)), rng.standard_normal((5, 2, 18, 4))
  dn = ("NHWC", "HWIO", "NHWC")
  got = lax.conv_general_dilated_local(x, w, (1, 2), "SAME", (2, 3), dimension_numbers=dn)
  patches = np.asarray(lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME",
                                                        dimension_numbers=dn))
  np.testing.assert_allclose(np.asarray(got), np.einsum("nhwf,hwfo->nhwo", patches, w),
                             rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs,ws,kw", [
    ((4, 9, 9, 6), (3, 3, 1, 6), dict(window_strides=(1, 1), padding="SAME")),
    ((4, 9, 9, 6), (3, 3, 1, 12), dict(window_strides=(1, 1), padding="SAME")),
    ((4, 9, 9, 6), (3, 2, 1, 6), dict(window_strides=(2, 1), padding="VALID", rhs_dilation=(2, 1))),
    ((4, 9, 9, 6), (3, 3, 1, 6), dict(window_strides=(1, 2), padding="SAME")),
    ((3, 9, 9, 5), (2, 3, 1, 5), dict(window_strides=(1, 1), padding=((2, 0), (1, 2)),
                                      rhs_dilation=(1, 2))),
    ((4, 9, 6), (3, 1, 6), dict(window_strides=(1,), padding="SAME")),
    ((2, 5, 6, 7, 4), (2, 3, 2, 1, 4), dict(window_strides=(1, 1, 1), padding="SAME")),
])
def test_depthwise_forward_and_gradients_match_xla(xs, ws, kw):
  """One input channel per group (depthwise, with channel multipliers): the direct eager
  kernels (forward, its input gradient, and the kernel gradient's batch-grouped form)
  against XLA, float64 and float32."""
  _check_vjp_against_xla(xs, ws, dict(kw, feature_group_count=xs[-1]),
                         np.random.default_rng(len(xs) + ws[-1]), 2e-5)


def _check_vjp_against_xla(xs, ws, kw, rng, tol32, scaled=False):
  """A channels-last convolution of ``xs``/``ws`` shapes (``kw`` its parameters), forward and
  both gradients eagerly against the same under ``jit`` (XLA), float64 and float32; with
  ``scaled`` the absolute tolerance grows with the largest result."""
  nd = len(xs) - 2
  dn = {1: ("NWC", "WIO", "NWC"), 2: ("NHWC", "HWIO", "NHWC"), 3: ("NDHWC", "DHWIO", "NDHWC")}[nd]
  f = lambda x, w: lax.conv_general_dilated(x, w, dimension_numbers=dn, **kw)
  for dt, tol in ((np.float64, 1e-12), (np.float32, tol32)):
    x, w = _rand(rng, xs, dt), _rand(rng, ws, dt)
    y, vjp = jax.vjp(f, x, w)
    ct = _rand(rng, y.shape, dt)
    want_y, want_g = jax.jit(lambda x, w, c: (f(x, w), jax.vjp(f, x, w)[1](c)))(x, w, ct)
    for got, want in zip((y, *vjp(ct)), (want_y, *want_g)):
      assert got.dtype == want.dtype and got.shape == want.shape
      scale = max(1.0, float(np.abs(np.asarray(want)).max())) if scaled else 1.0
      np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("pads", [[(-1, 1)], [(2, 0)], [(1, -1)], [(-2, -1)]])
def test_negative_padding_under_jit(pads):
  """XLA's CPU convolution reads garbage for a negative low padding (JAX 0.10.2 returns
  values of 1e34 for window 3, padding (-1, 1)); nbjax's lowering crops the input by a slice
  instead: jit agrees with the reference, and so do the input gradients (whose padding is
  negative for a forward padding of (2, 0)), eagerly and under jit."""
  rng = np.random.default_rng(11)
  for _ in range(3):
    x, w = _rand(rng, (2, 3, 9), np.float32), _rand(rng, (4, 3, 3), np.float32)
    f = lambda a, b: lax.conv_general_dilated(a, b, (1,), pads)
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), (1,), pads)
    for got in (f(x, w), jax.jit(f)(x, w)):
      np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)
    g = lambda a, b: jax.grad(lambda a: (f(a, b) ** 2).sum())(a)
    np.testing.assert_allclose(np.asarray(jax.jit(g)(x, w)), np.asarray(g(x, w)), rtol=1e-4,
                               atol=1e-4)
