"""nbjax.scipy.signal, ndimage, integrate, fft, interpolate and cluster against SciPy:
convolutions and correlations (direct and FFT, every mode), detrend, welch/csd/stft/istft,
map_coordinates (every mode, orders 0 and 1), trapezoid, the type-II DCTs,
RegularGridInterpolator and vq.vq; JAX's dtypes and error messages; jit, vmap and
derivatives (by finite differences)."""
import warnings

import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.fft as sfft
import scipy.integrate as sint
import scipy.interpolate as sinterp
import scipy.ndimage as sndi
import scipy.signal as ssig

import nbjax
import nbjax.numpy as jnp
import nbjax.scipy as jsp
from nbjax.scipy import fft as F
from nbjax.scipy import signal as S
from nbjax.test_util import check_grads

RNG = np.random.default_rng(0)


def _close(got, want, rtol=1e-10, atol=1e-10):
  np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


def test_submodules_load_lazily():
  for name in ("signal", "ndimage", "integrate", "fft", "interpolate", "cluster"):
    assert name in dir(jsp) and getattr(jsp, name).__name__ == f"nbjax.scipy.{name}"
  assert jsp.cluster.vq.vq is __import__("nbjax.scipy.cluster.vq", fromlist=["vq"]).vq
  assert sorted(S.__all__) == ["convolve", "convolve2d", "correlate", "correlate2d", "csd",
                               "detrend", "fftconvolve", "istft", "stft", "welch"]


# ------------------------------------------------------------------ convolution

SHAPES = [((7,), (3,)), ((3,), (7,)), ((4,), (4,)), ((5, 6), (2, 3)), ((2, 4), (5, 6)),
          ((4, 3, 5), (2, 3, 2))]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("method", ["direct", "fft"])
def test_convolve_correlate_vs_scipy(mode, method):
  for s1, s2 in SHAPES:
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    _close(S.convolve(a, b, mode, method), ssig.convolve(a, b, mode, method))
    _close(S.correlate(a, b, mode, method), ssig.correlate(a, b, mode, method))
    _close(S.fftconvolve(a, b, mode), ssig.fftconvolve(a, b, mode))
  a, b = RNG.normal(size=6) + 1j * RNG.normal(size=6), RNG.normal(size=3) - 2j
  _close(S.correlate(a, b, mode, method), ssig.correlate(a, b, mode, method))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve2d_correlate2d_vs_scipy(mode):
  for s1, s2 in [((5, 6), (2, 3)), ((2, 3), (5, 6)), ((4, 4), (4, 4)), ((5, 4), (3, 3))]:
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    _close(S.convolve2d(a, b, mode), ssig.convolve2d(a, b, mode))
    _close(S.correlate2d(a, b, mode), ssig.correlate2d(a, b, mode))


def test_fftconvolve_axes_vs_scipy():
  a, b = RNG.normal(size=(3, 8, 5)), RNG.normal(size=(3, 4, 5))
  for axes in [1, (1,), [-2], (1, 2)]:
    for mode in ["full", "same", "valid"]:
      _close(S.fftconvolve(a, b, mode, axes=axes), ssig.fftconvolve(a, b, mode, axes=axes))
  with pytest.raises(ValueError, match=r"mapped axes must have same shape; got "
                     r"in1.shape=\(3, 8, 5\) in2.shape=\(2, 4, 5\) axes=\(1,\)"):
    S.fftconvolve(a, b[:2], axes=1)


def test_convolution_dtypes():
  i = np.array([1, 2, 3, 2, 1])
  out = S.convolve(i, np.array([1, 1, 1]), "same")  # integers -> the default float
  assert out.dtype == np.float64
  np.testing.assert_array_equal(np.asarray(out), [3.0, 6.0, 7.0, 6.0, 3.0])
  f = np.ones(4, np.float32)
  for fn in (S.convolve, S.correlate, S.fftconvolve):
    assert fn(f, f).dtype == np.float32 and not fn(f, f).weak_type
  assert S.convolve(f, np.ones(2, np.complex64)).dtype == np.complex64
  assert S.correlate2d(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)).dtype == np.float32


def test_convolution_errors():
  x, m = np.ones(3), np.ones((2, 3))
  for call, exc, msg in [
      (lambda: S.convolve(x, x, "bad"), ValueError, "mode must be one of ['full', 'same', "
                                                    "'valid']"),
      (lambda: S.convolve(x, x, method="x"), ValueError,
       "Got method='x'; expected 'auto', 'fft', or 'direct'."),
      (lambda: S.convolve(x, m), ValueError, "in1 and in2 must have the same number of "
                                             "dimensions"),
      (lambda: S.convolve(np.ones(0), x), ValueError, "zero-size arrays not supported in "
                                                      "convolutions, got shapes (0,) and (3,)."),
      (lambda: S.convolve(np.ones((2, 5)), np.ones((3, 2))), ValueError,
       "One input must be smaller than the other in every dimension."),
      (lambda: S.convolve2d(x, x), ValueError, "convolve2d() only supports 2-dimensional "
                                               "inputs."),
      (lambda: S.correlate2d(m, m, boundary="wrap"), NotImplementedError,
       "correlate2d() only supports boundary='fill', fillvalue=0"),
      (lambda: S.fftconvolve(x, m), ValueError, "in1 and in2 should have the same "
                                                "dimensionality"),
      (lambda: S.fftconvolve(x, x, "x"), ValueError, "mode must be one of ['same', 'full', "
                                                     "'valid']"),
      (lambda: S.fftconvolve(np.ones((2, 5)), np.ones((3, 2)), "valid"), ValueError,
       "For 'valid' mode, One input must be at least as large as the other in every "
       "dimension."),
      (lambda: S.fftconvolve([1.0], [1.0]), TypeError, "fftconvolve requires ndarray or "
                                                       "scalar arguments"),
  ]:
    with pytest.raises(exc) as e:
      call()
    assert msg in str(e.value)


def test_convolution_transformations():
  x, k = RNG.normal(size=12), RNG.normal(size=4)
  for fn in (lambda a, b: S.convolve(a, b, "same"), lambda a, b: S.correlate(a, b, "valid"),
             lambda a, b: S.fftconvolve(a, b)):
    _close(nbjax.jit(fn)(x, k), np.asarray(fn(x, k)), 1e-12, 1e-12)
    check_grads(fn, (x, k), order=1, modes=("rev",))
  xs = np.stack([x, 2 * x])
  _close(nbjax.vmap(S.convolve, (0, None))(xs, k), [ssig.convolve(v, k) for v in xs])
  m = RNG.normal(size=(5, 6))
  g = nbjax.grad(lambda a: jnp.sum(S.convolve2d(a, m[:2, :2], "same") ** 2))(m)
  check_grads(lambda a: S.correlate2d(a, m[:2, :3], "full"), (m,), order=1, modes=("rev",))
  assert g.shape == m.shape


# ------------------------------------------------------------------ detrend


def test_detrend_vs_scipy():
  x = RNG.normal(size=(3, 20)) + np.arange(20.0)
  for kw in [{}, dict(type="constant"), dict(axis=0), dict(bp=[5, 12]), dict(bp=7),
             dict(axis=0, type="constant")]:
    _close(S.detrend(x, **kw), ssig.detrend(x, **kw))
  _close(S.detrend(x.astype(np.float32)), ssig.detrend(x), 1e-4, 1e-4)
  assert S.detrend(np.arange(5)).dtype == np.float64
  with pytest.raises(ValueError, match="Trend type must be 'linear' or 'constant'."):
    S.detrend(x, type="quadratic")
  with pytest.raises(ValueError, match="Breakpoints must be non-negative"):
    S.detrend(x, bp=30)
  with pytest.raises(NotImplementedError, match="overwrite_data argument not implemented."):
    S.detrend(x, overwrite_data=True)
  check_grads(lambda a: S.detrend(a, bp=[6]), (x,), order=1, modes=("rev",))


# ------------------------------------------------------------------ spectral analysis


def test_welch_csd_vs_scipy():
  x, y = RNG.normal(size=(2, 64)), RNG.normal(size=(1, 64))  # (JAX: equal ranks)
  for kw in [dict(nperseg=16), dict(nperseg=16, noverlap=4, nfft=20), dict(nperseg=15),
             dict(nperseg=16, scaling="spectrum", fs=8.0), dict(nperseg=16, average="median"),
             dict(nperseg=16, detrend="linear"), dict(nperseg=16, return_onesided=False),
             dict(nperseg=16, window="hamming"), dict(window=np.hanning(12))]:
    f, p = S.welch(x, **kw)
    fs, ps = ssig.welch(x, **kw)
    _close(f, fs)
    _close(p, ps)
    f, p = S.csd(x, y, **kw)
    fs, ps = ssig.csd(x, y, **kw)
    _close(f, fs)
    _close(p, ps)
  f, p = S.welch(x[0].astype(np.float32), nperseg=16)
  assert f.dtype == p.dtype == np.float32
  _close(p, ssig.welch(x[0], nperseg=16)[1], 1e-5, 1e-6)
  assert S.csd(x[0], y[0], nperseg=16)[1].dtype == np.complex128
  _close(S.welch(x.T, nperseg=16, axis=0)[1], ssig.welch(x.T, nperseg=16, axis=0)[1])


def test_stft_istft_vs_scipy():
  x = RNG.normal(size=(2, 50))
  for kw in [dict(nperseg=16), dict(nperseg=16, noverlap=12), dict(nperseg=16, nfft=20),
             dict(nperseg=16, boundary="even"), dict(nperseg=16, boundary="odd"),
             dict(nperseg=16, boundary=None, padded=False), dict(nperseg=16, window="hamming")]:
    f, t, z = S.stft(x, **kw)
    fs, ts, zs = ssig.stft(x, **kw)
    _close(f, fs)
    _close(t, ts)
    _close(z, zs)
  f, t, z = S.stft(x, nperseg=16)
  tr, xr = S.istft(z, nperseg=16)
  trs, xrs = ssig.istft(np.asarray(z), nperseg=16)
  _close(tr, trs)
  _close(xr, xrs)
  _close(xr[..., :50], x)  # the round trip
  z2 = S.stft(x[0] + 1j * x[1], nperseg=8, return_onesided=False)[2]
  _close(S.istft(z2, input_onesided=False)[1][:50], x[0] + 1j * x[1])
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    S.stft(x[0])  # nperseg=256 > 50
  assert "nperseg=256 is greater than input_length=50, using nperseg=50" in str(w[0].message)


def test_spectral_transformations():
  x = RNG.normal(size=(3, 32))
  f = lambda a: S.welch(a, nperseg=8)[1]
  _close(nbjax.jit(f)(x), np.asarray(f(x)), 1e-12, 1e-12)
  _close(nbjax.vmap(f)(x), ssig.welch(x, nperseg=8)[1])
  check_grads(f, (x[0],), order=1, modes=("rev",))
  g = lambda a: jnp.abs(S.stft(a, nperseg=8)[2])
  check_grads(g, (x[0],), order=1, modes=("rev",))
  z = S.stft(x, nperseg=8)[2]
  _close(nbjax.jit(lambda z: S.istft(z, nperseg=8)[1])(z), ssig.istft(np.asarray(z),
                                                                      nperseg=8)[1])
  _close(nbjax.jit(lambda a, fs: S.welch(a, fs, nperseg=8)[0])(x, 4.0),
         ssig.welch(x, 4.0, nperseg=8)[0])


def test_spectral_errors():
  x = np.ones(32)
  for call, exc, msg in [
      (lambda: S.welch(x, nperseg=0), ValueError, "nperseg must be a positive integer"),
      (lambda: S.welch(x, nperseg=8, nfft=4), ValueError, "nfft must be greater than or "
                                                          "equal to nperseg."),
      (lambda: S.welch(x, nperseg=8, noverlap=8), ValueError, "noverlap must be less than "
                                                              "nperseg."),
      (lambda: S.welch(x, nperseg=8, scaling="x"), ValueError, "Unknown scaling: x"),
      (lambda: S.welch(x, nperseg=8, average="x"), ValueError,
       'average must be "median" or "mean", got x'),
      (lambda: S.welch(x, nperseg=8, detrend=True), ValueError, "Unsupported detrend type: "
                                                                "True"),
      (lambda: S.welch(x, window=np.ones((2, 2))), ValueError, "window must be 1-D"),
      (lambda: S.welch(x, window=np.ones(40)), ValueError, "window is longer than input "
                                                           "signal"),
      (lambda: S.welch(x, window=np.ones(5), nperseg=6), ValueError,
       "value specified for nperseg is different from length of window"),
      (lambda: S.csd(np.ones((3, 8)), np.ones((2, 8))), ValueError,
       "x and y cannot be broadcast together."),
      (lambda: S.stft(x, boundary="q"), ValueError, "Unknown boundary option 'q', must be one "
                                                    "of: ['even', 'odd', 'constant', 'zeros', "
                                                    "None]"),
      (lambda: S.istft(np.ones(5)), ValueError, "Input stft must be at least 2d!"),
      (lambda: S.istft(np.ones((5, 3)), time_axis=0, freq_axis=0), ValueError,
       "Must specify differing time and frequency axes!"),
      (lambda: S.istft(np.ones((5, 3)), nfft=4), ValueError, "FFT length (4) must be longer "
                                                             "than nperseg (8)."),
      (lambda: S.istft(np.ones((5, 3)), noverlap=9), ValueError, "noverlap must be less than "
                                                                 "nperseg."),
      (lambda: S.istft(np.ones((5, 3)), window=np.ones(5)), ValueError,
       "window must have length of 8"),
  ]:
    with pytest.raises(exc) as e:
      call()
    assert msg in str(e.value)


# ------------------------------------------------------------------ ndimage

# JAX's "constant" and "wrap" are SciPy's "grid-constant" and "grid-wrap"
_SCIPY_MODE = {"constant": "grid-constant", "wrap": "grid-wrap", "nearest": "nearest",
               "mirror": "mirror", "reflect": "reflect"}


@pytest.mark.parametrize("order", [0, 1])
def test_map_coordinates_vs_scipy(order):
  img = RNG.normal(size=(5, 6))
  coords = [RNG.uniform(-4, 9, (4, 3)), RNG.uniform(-4, 10, (4, 3))]
  for mode, smode in _SCIPY_MODE.items():
    got = jsp.ndimage.map_coordinates(img, coords, order, mode, cval=1.5)
    assert got.shape == (4, 3) and got.dtype == np.float64
    _close(got, sndi.map_coordinates(img, np.stack(coords), order=order, mode=smode,
                                     cval=1.5))


def test_map_coordinates_dtypes_errors_transforms():
  img = np.arange(12).reshape(3, 4)
  got = jsp.ndimage.map_coordinates(img, [np.array([0.5, 1.25]), np.array([1.5, 2.0])], 1)
  assert got.dtype == img.dtype  # integer inputs: rounded half away from zero
  np.testing.assert_array_equal(np.asarray(got), [4, 7])
  f32 = jsp.ndimage.map_coordinates(img.astype(np.float32), [np.array([0.5])] * 2, 1)
  assert f32.dtype == np.float32 and float(f32[0]) == 2.5
  with pytest.raises(ValueError, match=r"coordinates must be a sequence of length "
                     r"input.ndim, but 1 != 2"):
    jsp.ndimage.map_coordinates(img, [np.zeros(2)], 1)
  with pytest.raises(NotImplementedError, match="does not yet support mode grid-wrap"):
    jsp.ndimage.map_coordinates(img, [np.zeros(2)] * 2, 1, "grid-wrap")
  with pytest.raises(NotImplementedError, match="currently requires order<=1"):
    jsp.ndimage.map_coordinates(img, [np.zeros(2)] * 2, 3)
  with pytest.raises(ValueError, match="Non-hashable static arguments are not supported"):
    jsp.ndimage.map_coordinates(img, [np.zeros(2)] * 2, 1, cval=np.array(1.0))
  x = RNG.normal(size=(4, 5))
  c = np.stack([RNG.uniform(0.1, 2.9, 6), RNG.uniform(0.1, 3.9, 6)])
  f = lambda a, c: jsp.ndimage.map_coordinates(a, c, 1, "reflect")
  _close(nbjax.jit(f)(x, c), np.asarray(f(x, c)), 1e-12, 1e-12)
  _close(nbjax.vmap(f, (None, 1))(x, c), np.asarray(f(x, c)), 1e-12, 1e-12)
  check_grads(f, (x, c), order=1, modes=("rev",))


# ------------------------------------------------------------------ integrate


def test_trapezoid_vs_scipy():
  y, x = RNG.normal(size=(4, 6)), np.cumsum(RNG.uniform(0.1, 1, 6))
  trap = jsp.integrate.trapezoid
  _close(trap(y), sint.trapezoid(y))
  _close(trap(y, x), sint.trapezoid(y, x))
  _close(trap(y, dx=0.5, axis=0), sint.trapezoid(y, dx=0.5, axis=0))
  assert trap(np.arange(5)).dtype == np.float64 and float(trap(np.arange(5))) == 8.0
  assert trap(y.astype(np.float32)).dtype == np.float32
  _close(nbjax.jit(trap)(y, x), sint.trapezoid(y, x))
  _close(nbjax.grad(lambda a: trap(a, x).sum())(y), np.broadcast_to(
      np.r_[x[1] - x[0], x[2:] - x[:-2], x[-1] - x[-2]] / 2, y.shape))


# ------------------------------------------------------------------ fft


@pytest.mark.parametrize("norm", [None, "backward", "ortho"])
def test_dct_idct_vs_scipy(norm):
  x = RNG.normal(size=(4, 7))
  for kw in [{}, dict(n=5), dict(n=9), dict(axis=0), dict(axis=0, n=3)]:
    _close(F.dct(x, norm=norm, **kw), sfft.dct(x, norm=norm, **kw))
    _close(F.idct(x, norm=norm, **kw), sfft.idct(x, norm=norm, **kw))
  x3 = RNG.normal(size=(3, 4, 5))
  for kw in [{}, dict(s=[3, 6]), dict(axes=(0, 2)), dict(s=4), dict(axes=[1]),
             dict(s=[2, 5, 6])]:
    _close(F.dctn(x3, norm=norm, **kw), sfft.dctn(x3, norm=norm, **kw))
    _close(F.idctn(x3, norm=norm, **kw), sfft.idctn(x3, norm=norm, **kw))
  _close(F.idctn(F.dctn(x3, norm=norm), norm=norm), x3)
  c = x + 1j * x[::-1]
  _close(F.dct(c, norm=norm), sfft.dct(c, norm=norm))


def test_dct_dtypes_errors_transforms():
  assert F.dct(np.ones(4, np.float32)).dtype == np.float32
  assert F.idct(np.arange(4)).dtype == np.float64
  assert F.dctn(np.ones((2, 3), np.complex64)).dtype == np.complex64
  with pytest.raises(NotImplementedError, match="Only DCT type 2 is implemented."):
    F.dct(np.ones(3), type=3)
  with pytest.raises(ValueError, match="jax.scipy.fft.idctn: norm='forward' is not "
                     "implemented"):
    F.idctn(np.ones(3), norm="forward")
  with pytest.raises(ValueError, match=r"s must have at most x.ndim \(1\) elements, got 2"):
    F.dctn(np.ones(3), s=[2, 2])
  with pytest.raises(ValueError, match=r"repeated axis: \(0, 0\)"):
    F.dctn(np.ones((3, 3)), axes=(0, 0))
  with pytest.raises(TypeError, match="dct requires ndarray or scalar arguments"):
    F.dct([1.0, 2.0])
  x = RNG.normal(size=(3, 6))
  for fn in (F.dct, F.idct, F.dctn, F.idctn):
    g = lambda a: fn(a, norm="ortho")
    _close(nbjax.jit(g)(x), np.asarray(g(x)), 1e-12, 1e-12)
    check_grads(g, (x,), order=1, modes=("rev",))
  _close(nbjax.vmap(F.dct)(x), sfft.dct(x))


# ------------------------------------------------------------------ interpolate


def test_regular_grid_interpolator_vs_scipy():
  grid = (np.linspace(0, 1, 5), np.array([0.0, 0.5, 2.0, 3.0]))
  values = RNG.normal(size=(5, 4, 2))
  q = np.stack([RNG.uniform(-0.2, 1.2, 9), RNG.uniform(-0.3, 3.3, 9)], -1)
  for method in ("linear", "nearest"):
    for fill in (np.nan, 0.5, None):
      mine = jsp.interpolate.RegularGridInterpolator(grid, values, method, fill_value=fill)
      ref = sinterp.RegularGridInterpolator(grid, values, method, bounds_error=False,
                                            fill_value=fill)
      _close(mine(q), ref(q))
      _close(mine((q[:, 0], q[:, 1])), ref((q[:, 0], q[:, 1])))
      _close(mine(q.reshape(3, 3, 2)), ref(q.reshape(3, 3, 2)))
  r = jsp.interpolate.RegularGridInterpolator(grid, values[..., 0])
  assert r(q).dtype == np.float64 and r(q.astype(np.float32)).shape == (9,)
  grid32 = tuple(g.astype(np.float32) for g in grid)
  assert jsp.interpolate.RegularGridInterpolator(
      grid32, values.astype(np.float32))(q.astype(np.float32)).dtype == np.float32


def test_regular_grid_interpolator_errors_transforms():
  RGI = jsp.interpolate.RegularGridInterpolator
  grid, v = (np.linspace(0, 1, 4), np.linspace(0, 2, 3)), RNG.normal(size=(4, 3))
  with pytest.raises(ValueError, match="method 'cubic' is not defined"):
    RGI(grid, v, "cubic")
  with pytest.raises(NotImplementedError, match="`bounds_error` takes no effect under JIT"):
    RGI(grid, v, bounds_error=True)
  with pytest.raises(ValueError, match="there are 3 point arrays, but values has 2 dimensions"):
    RGI(grid + grid[:1], v)
  with pytest.raises(ValueError, match="fill_value must be either 'None' or of a type "
                     "compatible with values"):
    RGI(grid, v, fill_value=1j)
  with pytest.raises(ValueError, match="the requested sample points xi have dimension 3, but "
                     "this RegularGridInterpolator has dimension 2"):
    RGI(grid, v)(np.ones((2, 3)))
  r = RGI(grid, v)
  q = np.array([[0.2, 0.3], [0.9, 1.7], [0.5, 1.1]])  # (away from the kinks at grid lines)
  _close(nbjax.jit(lambda r, q: r(q))(r, q), np.asarray(r(q)), 1e-12, 1e-12)
  _close(nbjax.vmap(lambda r, q: r(q), (None, 0))(r, q[None]), np.asarray(r(q))[None])
  check_grads(lambda v, q: RGI(grid, v)(q), (v, q), order=1, modes=("rev",))


# ------------------------------------------------------------------ cluster


def test_vq_vs_scipy():
  vq = jsp.cluster.vq.vq
  obs, book = RNG.normal(size=(8, 3)), RNG.normal(size=(4, 3))
  code, dist = vq(obs, book)
  want_code, want_dist = svq.vq(obs, book)
  np.testing.assert_array_equal(np.asarray(code), want_code)
  assert code.dtype == np.int64 and dist.dtype == np.float64
  _close(dist, want_dist)
  code, dist = vq(obs[:, 0], book[:, 0])
  np.testing.assert_array_equal(np.asarray(code), svq.vq(obs[:, 0], book[:, 0])[0])
  assert vq(obs.astype(np.float32), book.astype(np.float32))[1].dtype == np.float32
  _close(nbjax.jit(vq)(obs, book)[1], want_dist)
  check_grads(lambda o: vq(o, book)[1], (obs,), order=1, modes=("rev",))
  with pytest.raises(ValueError, match="Observation and code_book should have the same rank"):
    vq(obs, book[0])
  with pytest.raises(ValueError, match="ndim different than 1 or 2 are not supported"):
    vq(obs[None], book[None])
  with pytest.raises(TypeError, match="scipy.cluster.vq.vq requires ndarray or scalar "
                     "arguments"):
    vq([1.0], [1.0])


def test_spectral_under_strict_promotion_and_rank_raise_as_jax():
  """JAX's scipy_signal_test testCsd/testWelch/testIstft run under strict dtype promotion
  and rank promotion 'raise': the one-sided fold and istft's normalization promote nothing
  (values from jax 0.10.2)."""
  from nbjax.scipy import signal as S
  x = (np.arange(12.0) * 0.3 + 1j * np.cos(np.arange(12.0))).astype(np.complex64).reshape(2, 6)
  y = np.sin(np.arange(6.0)).astype(np.complex64).reshape(1, 6)
  with nbjax.numpy_dtype_promotion("strict"), nbjax.numpy_rank_promotion("raise"):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      _, p = S.csd(x, y, nperseg=4)
    assert p.dtype == np.complex64
    np.testing.assert_allclose(p[1], [-0.0378 - 0.0125j, -0.4122 - 0.0107j, -0.0354j,
                                      0.2168 - 0.0699j], atol=1e-4)
    _, p = S.welch(np.cos(np.arange(24.0)).reshape(2, 12), nperseg=5)
    np.testing.assert_allclose(p, [[0.51034, 1.41833, 0.20251], [0.15533, 1.51355, 0.18965]],
                               atol=1e-5)
    _, _, z = S.stft(np.cos(np.arange(20.0)).reshape(2, 10), nperseg=4)
    _, xr = S.istft(z, nperseg=4)
    np.testing.assert_allclose(xr, np.cos(np.arange(20.0)).reshape(2, 10), atol=1e-12)


def test_dct_idct_under_strict_promotion():
  """JAX's scipy_fft_test testDct*/testiDct* run under strict dtype promotion: the
  rotations are complex constants, the real input converted explicitly."""
  from nbjax.scipy import fft as F
  x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
  with nbjax.numpy_dtype_promotion("strict"):
    for norm in (None, "ortho"):
      got = F.dctn(x, norm=norm)
      assert got.dtype == np.float32
      np.testing.assert_allclose(got, sfft.dctn(x, norm=norm), rtol=2e-5, atol=2e-5)
      back = F.idctn(got, norm=norm)
      assert back.dtype == np.float32
      np.testing.assert_allclose(back, x, rtol=2e-5, atol=2e-5)
      np.testing.assert_allclose(F.idct(x, norm=norm, axis=0), sfft.idct(x, norm=norm, axis=0),
                                 rtol=2e-5, atol=2e-5)
