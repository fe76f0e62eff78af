"""nbjax.image: resize (every method, up- and downsampling, with and without antialiasing),
scale_and_translate and ResizeMethod, against JAX 0.10.2's outputs recorded as literals for
a small image; dtypes, errors, jit, vmap and gradients."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import image

X = np.arange(12.0).reshape(3, 4) ** 1.5

# jax.image.resize(X, shape, method, antialias), JAX 0.10.2 with x64 (printed to 10 decimals)
RESIZED = {
    ((5, 6), "nearest", True): [
        [0.0, 1.0, 1.0, 2.8284271247, 5.1961524227, 5.1961524227],
        [0.0, 1.0, 1.0, 2.8284271247, 5.1961524227, 5.1961524227],
        [8.0, 11.1803398875, 11.1803398875, 14.6969384567, 18.5202591775, 18.5202591775],
        [22.627416998, 27.0, 27.0, 31.6227766017, 36.4828726939, 36.4828726939],
        [22.627416998, 27.0, 27.0, 31.6227766017, 36.4828726939, 36.4828726939]],
    ((2, 3), "nearest", True): [[0.0, 2.8284271247, 5.1961524227],
                                [22.627416998, 31.6227766017, 36.4828726939]],
    ((5, 6), "linear", True): [
        [0.0, 0.5, 1.3047378541, 2.5236892706, 4.0122897737, 5.1961524227],
        [3.2, 4.1360679775, 5.4894185721, 7.1585490404, 9.0508133911, 10.5257951246],
        [8.0, 9.5901699437, 11.766439649, 14.1108386952, 16.6085988171, 18.5202591775],
        [16.7764501988, 18.7242930769, 21.3688535198, 24.1557237789, 27.0751343155,
         29.2978272873],
        [22.627416998, 24.813708499, 27.7704627669, 30.8523138347, 34.0528246478,
         36.4828726939]],
    ((2, 3), "linear", True): [[3.5452882373, 6.048373166, 9.3186203813],
                               [18.319783174, 23.1716073776, 28.4055010269]],
    ((2, 3), "linear", False): [[2.257514162, 4.6703199648, 8.0719084191],
                                [19.6496497857, 25.2182010187, 31.2254022732]],
    ((5, 6), "cubic", True): [
        [-0.6587371406, -0.3106823843, 0.4586394517, 1.6069440556, 3.2280927331, 4.3391034758],
        [2.03842157, 2.8168864662, 4.2140345326, 5.8039170788, 7.8720746186, 9.2515427583],
        [7.7907671127, 9.2897717959, 11.7434302097, 14.0891966878, 16.9279081659,
         18.7717934354],
        [17.5885327489, 19.5084025004, 22.607687399, 25.4816015646, 28.8860585427,
         31.0792618565],
        [23.4377832863, 25.5545640084, 28.9615245386, 32.0995701668, 35.7914543101,
         38.1634326445]],
    ((2, 2), "cubic", True): [[3.2316157384, 7.4703334476], [20.2047565251, 28.0606612091]],
    ((5, 6), "lanczos3", True): [
        [-0.4117635322, -0.1435322111, 0.6232668842, 1.675391495, 3.4855179023, 4.5030100387],
        [1.0460013246, 1.678066458, 3.0674687287, 4.4727679521, 6.6915833028, 7.9192877082],
        [7.8073331511, 9.1623762456, 11.8104243167, 13.969168845, 17.0827688834,
         18.7721460287],
        [18.3805602707, 20.1913597625, 23.6678947191, 26.3859448149, 30.1986156432,
         32.250809599],
        [23.6718511932, 25.5777465726, 29.2442848332, 32.1202681496, 36.1448034362,
         38.3077927691]],
    ((2, 3), "lanczos5", True): [[1.7334481742, 4.2312935869, 7.7885351486],
                                 [18.9255340446, 24.5740658056, 30.6713079274]],
    ((5, 7), "cubic-pytorch", False): [
        [-0.8464492116, -0.6010561254, -0.0995245043, 0.721121757, 1.8934981438, 3.2603434918,
         4.1380912976],
        [1.8761920498, 2.5027508517, 3.5992139251, 4.9099416876, 6.4892983568, 8.2466325452,
         9.3561433164],
        [7.6844578956, 8.8674168317, 10.8359367421, 12.878359719, 15.0781302285, 17.4337508446,
         18.8995955718],
        [17.1244680774, 18.6484040581, 21.1629381743, 23.7060528166, 26.3704615446,
         29.1833989813, 30.9254024007],
        [23.5864609145, 25.2697566148, 28.0435190297, 30.8388670747, 33.7498648892,
         36.8081446819, 38.6993602395]],
    ((2, 3), "cubic-pytorch", False): [[1.4689450019, 3.7229876177, 7.2391944938],
                                       [20.1174877564, 25.9428969498, 32.2874331939]],
    ((6, 2), "area", True): [[0.5, 4.0122897737], [0.5, 4.0122897737],
                             [9.5901699437, 16.6085988171], [9.5901699437, 16.6085988171],
                             [24.813708499, 34.0528246478], [24.813708499, 34.0528246478]],
    ((2, 6), "area", True): [
        [2.6666666667, 3.5300566479, 4.3934466292, 6.7845975687, 8.2110594548, 9.637521341],
        [17.751611332, 19.7391956472, 21.7267799625, 25.9808305534, 28.2380827042,
         30.4953348551]],
}


@pytest.mark.parametrize("key", list(RESIZED), ids=[f"{m}-{s}-{a}" for s, m, a in RESIZED])
def test_resize_matches_jax(key):
  shape, method, antialias = key
  out = image.resize(X, shape, method, antialias)
  assert out.shape == shape and out.dtype == np.float64
  np.testing.assert_allclose(np.asarray(out), RESIZED[key], rtol=1e-9, atol=1e-9)
  jitted = nbjax.jit(lambda a: image.resize(a, shape, method, antialias))(X)
  np.testing.assert_allclose(np.asarray(jitted), np.asarray(out), rtol=1e-12, atol=1e-12)


def test_resize_method_aliases_and_enum():
  assert [m.name for m in image.ResizeMethod] == [
      "NEAREST", "LINEAR", "LANCZOS3", "LANCZOS5", "CUBIC", "CUBIC_PYTORCH", "AREA"]
  assert image.ResizeMethod.from_string("bilinear") is image.ResizeMethod.LINEAR
  assert image.ResizeMethod.from_string("tricubic") is image.ResizeMethod.CUBIC
  assert image.ResizeMethod.from_string("bicubic-pytorch") is image.ResizeMethod.CUBIC_PYTORCH
  want = np.asarray(image.resize(X, (5, 6), "linear"))
  for m in ("bilinear", "trilinear", "triangle", image.ResizeMethod.LINEAR):
    np.testing.assert_array_equal(np.asarray(image.resize(X, (5, 6), m)), want)
  # with antialiasing, the PyTorch cubic is the Keys cubic
  np.testing.assert_array_equal(np.asarray(image.resize(X, (2, 3), "cubic-pytorch")),
                                np.asarray(image.resize(X, (2, 3), "cubic")))
  assert nbjax.image is image and set(image.__all__) == {
      "ResizeMethod", "resize", "scale_and_translate"}


def test_resize_dtypes():
  u8 = np.arange(6, dtype=np.uint8).reshape(2, 3)
  out = image.resize(u8, (3, 5), "nearest")  # nearest keeps the dtype
  assert out.dtype == np.uint8
  np.testing.assert_array_equal(np.asarray(out), [[0, 0, 1, 2, 2], [3, 3, 4, 5, 5],
                                                  [3, 3, 4, 5, 5]])
  want = [[0.0, 0.4, 1.0, 1.6, 2.0], [1.5, 1.9, 2.5, 3.1, 3.5], [3.0, 3.4, 4.0, 4.6, 5.0]]
  for dt in (np.int32, np.float32):  # JAX's: int32 -> float32
    out = image.resize(np.arange(6, dtype=dt).reshape(2, 3), (3, 5), "linear")
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
  assert image.resize(np.arange(6).reshape(2, 3), (3, 5), "cubic").dtype == np.float64
  same = image.resize(X, X.shape, "lanczos3")  # identity: no axis is resampled
  np.testing.assert_array_equal(np.asarray(same), X)


def test_scale_and_translate_matches_jax():
  s, t = jnp.array([1.5, 1.2]), jnp.array([0.5, -0.4])
  out = image.scale_and_translate(X, (4, 5), (0, 1), s, t, "linear")
  np.testing.assert_allclose(np.asarray(out), [
      [0.25, 1.1523689271, 2.6760581977, 4.6042210982, 0.0],
      [1.6741808286, 2.8725390673, 4.6306965941, 6.7642557481, 0.0],
      [7.3709041432, 9.7532196281, 12.4492501796, 15.4043943474, 0.0],
      [16.2578238602, 19.4293105759, 22.8207168971, 26.4161388341, 0.0]], rtol=1e-9, atol=1e-9)
  out = image.scale_and_translate(X, (4, 5), (0, 1), s, t, "lanczos3", antialias=False)
  np.testing.assert_allclose(np.asarray(out), [
      [-1.0267248968, -0.4129131497, 0.8059905572, 2.7853675089, 0.0],
      [0.4911419481, 1.7004823913, 3.2954003159, 5.6620038822, 0.0],
      [5.5261882362, 8.1360088607, 10.6356510973, 13.9446308866, 0.0],
      [17.8060104383, 21.7688037411, 25.2460433099, 29.626092561, 0.0]], rtol=1e-9, atol=1e-9)
  # resize is scale_and_translate with scale out/in and no translation
  np.testing.assert_allclose(
      np.asarray(image.scale_and_translate(X, (5, 6), (0, 1), jnp.array([5 / 3, 1.5]),
                                           jnp.zeros(2), "cubic")),
      np.asarray(image.resize(X, (5, 6), "cubic")), rtol=1e-12, atol=1e-12)
  f32 = image.scale_and_translate(X.astype(np.float32), (4, 5), (0, 1), s, t, "linear")
  assert f32.dtype == np.float32


def test_gradients_match_jax():
  g = nbjax.grad(lambda a: (image.resize(a, (5, 6), "cubic") ** 2).sum())(X)
  np.testing.assert_allclose(np.asarray(g), [
      [-0.0674322962, 5.1290520786, 15.1752612346, 26.9470541884],
      [43.7741070145, 56.0515920155, 74.306467894, 94.1433823075],
      [113.7960294658, 129.8526898604, 154.8366201525, 182.921132464]], rtol=1e-8)
  t = jnp.array([0.5, -0.4])
  loss = lambda s: (image.scale_and_translate(X, (4, 5), (0, 1), s, t, "linear") ** 2).sum()
  gs = nbjax.grad(loss)(jnp.array([1.5, 1.2]))
  np.testing.assert_allclose(np.asarray(gs), [-4813.6798412829, -2089.4142607269], rtol=1e-8)


def test_vmap_over_batch():
  batch = np.stack([X, 2 * X + 1])
  out = nbjax.vmap(lambda a: image.resize(a, (5, 6), "linear"))(batch)
  np.testing.assert_allclose(np.asarray(out[0]), RESIZED[((5, 6), "linear", True)], rtol=1e-9)
  np.testing.assert_allclose(np.asarray(out[1]), 2 * np.asarray(out[0]) + 1, rtol=1e-9)
  # the same as resizing the batch with its batch axis left alone
  np.testing.assert_allclose(np.asarray(image.resize(batch, (2, 5, 6), "linear")),
                             np.asarray(out), rtol=1e-12)


def test_errors():
  with pytest.raises(ValueError, match='Unknown resize method "foo"'):
    image.resize(X, (2, 2), "foo")
  with pytest.raises(ValueError, match=r"shape must have length equal to the number of "
                     r"dimensions of x;  \(2,\) vs \(3, 4\)"):
    image.resize(X, (2,), "linear")
  with pytest.raises(ValueError, match="Nearest neighbor resampling is not currently "
                     "supported for scale_and_translate."):
    image.scale_and_translate(X, (4, 5), (0, 1), jnp.ones(2), jnp.zeros(2), "nearest")
  with pytest.raises(ValueError, match="shape must have length equal"):
    image.scale_and_translate(X, (4,), (0,), jnp.ones(1), jnp.zeros(1), "linear")
  with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values of "
                     "integer type"):
    image.resize(X, (2.5, 3), "linear")
