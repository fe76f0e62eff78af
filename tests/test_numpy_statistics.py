"""``nbjax.numpy`` statistics (``_statistics.py``): quantiles and medians (NaN-aware too),
nanvar/nanstd, nanargmax/nanargmin, cov/corrcoef, histograms, bincount and digitize against
NumPy (values and dtypes), JAX's deliberate departures from NumPy, vmap/jvp/jit, errors."""
import warnings

import numpy as np
import pytest

import nbjax as jax
import nbjax.numpy as jnp
from nbjax import testing
from nbjax.core import ConcretizationTypeError

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4, 5))
XN = X.copy()
XN[0, 1, :] = np.nan  # an all-NaN lane along the last axis
XN[1, 2, 3] = XN[2, 0, 0] = np.nan
METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]
AXES = [None, 0, -1, 1, (0, 2), (1,)]
Q = np.array([0.1, 0.52, 0.93])  # no "nearest" ties: JAX rounds ties down, NumPy to even


def check(got, want, dtype=None, **tol):
  got = np.asarray(got)
  assert got.shape == np.shape(want)
  assert got.dtype == (np.asarray(want).dtype if dtype is None else np.dtype(dtype))
  np.testing.assert_allclose(got, want, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_median_and_quantile_match_numpy(dtype, axis, keepdims):
  x = X.astype(dtype)
  tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12}
  check(jnp.median(x, axis=axis, keepdims=keepdims), np.median(x, axis, keepdims=keepdims), **tol)
  for m in METHODS:
    for q in (Q.astype(dtype), dtype(0.3)):
      check(jnp.quantile(x, q, axis=axis, method=m, keepdims=keepdims),
            np.quantile(x, q, axis=axis, method=m, keepdims=keepdims), **tol)
    check(jnp.percentile(x, 100 * Q.astype(dtype), axis=axis, method=m, keepdims=keepdims),
          np.percentile(x, 100 * Q.astype(dtype), axis=axis, method=m, keepdims=keepdims), **tol)


@pytest.mark.parametrize("axis", [None, 1, -1, (0, 2)])
@pytest.mark.parametrize("method", METHODS)
def test_nan_quantiles_match_numpy(axis, method):
  with warnings.catch_warnings():  # all-NaN lanes
    warnings.simplefilter("ignore")
    want = np.nanquantile(XN, Q, axis=axis, method=method)
    want_p = np.nanpercentile(XN, 40.0, axis=axis, method=method)
    want_med = np.nanmedian(XN, axis=axis)
  check(jnp.nanquantile(XN, Q, axis=axis, method=method), want)
  check(jnp.nanpercentile(XN, 40.0, axis=axis, method=method), want_p)
  check(jnp.nanmedian(XN, axis=axis), want_med)
  # plain quantile: any NaN in a lane makes it NaN
  check(jnp.quantile(XN, Q, axis=axis, method=method), np.quantile(XN, Q, axis=axis,
                                                                     method=method))
  check(jnp.median(XN, axis=axis), np.median(XN, axis=axis))


def test_quantile_dtypes_follow_jax():
  xi = np.arange(24).reshape(4, 6) % 7
  check(jnp.median(xi, axis=1), np.median(xi, axis=1))  # ints -> float64
  check(jnp.quantile(xi, Q, axis=0), np.quantile(xi, Q, axis=0))
  # JAX promotes ints to float even for 'lower'/'higher' (NumPy keeps int64)
  check(jnp.quantile(xi, 0.3, method="lower"), np.quantile(xi, 0.3, method="lower"), np.float64)
  # the result has a's (inexact) dtype, whatever q's dtype
  check(jnp.quantile(X.astype(np.float32), Q), np.quantile(X, Q).astype(np.float32),
        rtol=1e-6)
  assert jnp.percentile(np.float32([1, 2, 3]), 50).dtype == np.float32
  # 'nearest' ties go to the lower neighbour in JAX (NumPy rounds half to even)
  check(jnp.quantile(np.arange(4.), 0.5, method="nearest"), 1.0)
  check(jnp.quantile(np.arange(4.), 0.5, method="midpoint"), 1.5)


@pytest.mark.filterwarnings("ignore:invalid value")  # eager 0/0 of all-NaN lanes
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nanvar_nanstd_match_numpy(dtype):
  x = XN.astype(dtype)
  tol = {"rtol": 1e-5 if dtype == np.float32 else 1e-12}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cases = [(ax, dd, kd, np.nanvar(x, ax, ddof=dd, keepdims=kd),
              np.nanstd(x, ax, ddof=dd, keepdims=kd))
             for ax in (None, 0, -1, (0, 2)) for dd in (0, 1) for kd in (False, True)]
  for ax, dd, kd, v, s in cases:
    check(jnp.nanvar(x, ax, ddof=dd, keepdims=kd), v, **tol)
    check(jnp.nanstd(x, ax, ddof=dd, keepdims=kd), s, **tol)
  xi = np.arange(12).reshape(3, 4)
  check(jnp.nanvar(xi, 1), np.nanvar(xi, 1))
  check(jnp.nanstd(xi, 0, dtype=np.float32), np.nanstd(xi, 0, dtype=np.float32), rtol=1e-6)
  w = RNG.uniform(size=x.shape) > 0.3
  check(jnp.nanvar(x, 1, where=w), np.nanvar(x, 1, where=w), **tol)
  xc = X[0] + 1j * X[1]
  check(jnp.nanvar(xc, 0), np.nanvar(xc, 0))


@pytest.mark.parametrize("fn", ["nanargmax", "nanargmin"])
def test_nanargmax_nanargmin(fn):
  x = XN[1:]  # no all-NaN lane: NumPy raises there
  for ax in (None, 0, 1, -1):
    check(getattr(jnp, fn)(x, ax), getattr(np, fn)(x, ax))
    check(getattr(jnp, fn)(x, ax, keepdims=True), getattr(np, fn)(x, ax, keepdims=True))
  xi = (np.arange(20) * 7 % 11).reshape(4, 5)
  check(getattr(jnp, fn)(xi, 1), getattr(np, fn)(xi, 1))
  out = np.asarray(getattr(jnp, fn)(XN, 2))  # JAX: -1 for an all-NaN lane
  assert out[0, 1] == -1 and out.dtype == np.int64


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_cov_corrcoef_match_numpy(dtype):
  m = (RNG.normal(size=(3, 7)) * 5).astype(dtype)
  y = (RNG.normal(size=(2, 7)) * 5).astype(dtype)
  tol = {"rtol": 2e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}
  fdt = np.float32 if dtype == np.float32 else np.float64  # NumPy: always float64
  fw = np.array([1, 2, 3, 1, 1, 2, 4])
  aw = RNG.uniform(0.1, 1, size=7).astype(dtype if dtype != np.int64 else np.float64)
  for kw in ({}, {"rowvar": False}, {"bias": True}, {"ddof": 2}, {"fweights": fw},
             {"aweights": aw}, {"fweights": fw, "aweights": aw, "ddof": 1},
             {"fweights": fw, "aweights": aw, "bias": True}):
    mm = m.T if kw.get("rowvar") is False else m
    check(jnp.cov(mm, **kw), np.cov(mm, **kw), fdt, **tol)
  check(jnp.cov(m, y), np.cov(m, y), fdt, **tol)
  check(jnp.cov(m[0]), np.cov(m[0]), fdt, **tol)  # one variable: a 0-d result
  check(jnp.corrcoef(m), np.corrcoef(m), fdt, **tol)
  check(jnp.corrcoef(m.T, y.T, rowvar=False), np.corrcoef(m.T, y.T, rowvar=False), fdt,
        **tol)
  check(jnp.corrcoef(m[0]), np.corrcoef(m[0]), fdt, **tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_histogram_matches_numpy(dtype):
  a = (RNG.normal(size=(4, 25)) * 10).astype(dtype)
  fdt = np.float64 if dtype == np.int64 else dtype
  # (JAX's linspace interpolates start * (1 - t) + stop * t: near zero its error is the
  # bounds' ulps, absolute)
  tol = ({"rtol": 1e-6, "atol": 1e-6 * float(np.abs(a).max())} if dtype == np.float32 else
         {"rtol": 1e-12})
  for bins, rng in ((10, None), (7, (-5, 5)), (np.array([-30., -2., 0., 3., 40.]), None)):
    check(jnp.histogram_bin_edges(a, bins, rng), np.histogram_bin_edges(a, bins, rng)
          .astype(fdt), **tol)
    counts, edges = jnp.histogram(a, bins, rng)
    want_e = np.histogram(a, bins, rng)[1]
    check(edges, want_e.astype(fdt), **tol)
    # JAX counts in a's inexact dtype (NumPy: int64), into its own edges: an integer on a
    # NumPy edge may sit an ulp past JAX's (as in JAX), so NumPy counts into those edges
    want_c = np.histogram(a, np.asarray(edges) if np.ndim(bins) == 0 else bins)[0]
    check(counts, want_c.astype(fdt))
    counts, _ = jnp.histogram(a, bins, rng, density=True)
    check(counts, np.histogram(a, np.asarray(edges), density=True)[0].astype(fdt), rtol=1e-5)
  w = RNG.uniform(size=a.shape).astype(fdt)
  counts, edges = jnp.histogram(a, 6, weights=w)
  check(counts, np.histogram(a, np.asarray(edges), weights=w)[0], rtol=1e-5)
  check(jnp.histogram_bin_edges(np.ones(4), 4), np.histogram_bin_edges(np.ones(4), 4))


def test_histogram_traced_range():
  """``range`` may be traced (jit, vmap, grad), as JAX's; values from JAX 0.10.2."""
  x = jnp.array([0.5, 1.5, 2.5, 3.5, 1.0], "float32")
  edges = jax.jit(lambda a, lo, hi: jnp.histogram_bin_edges(a, 4, range=(lo, hi)))
  check(edges(x, 0., 4.), np.array([0., 1., 2., 3., 4.], np.float32))
  check(edges(x, 4., 0.), np.array([4., 3., 2., 1., 0.], np.float32))
  check(edges(x, 1., 1.), np.array([0.5, 0.75, 1., 1.25, 1.5], np.float32))
  check(jax.jit(lambda a, r: jnp.histogram_bin_edges(a, 4, range=r))(x, jnp.array([0., 4.])),
        np.array([0., 1., 2., 3., 4.], np.float32))
  def hist(**kw):
    return jax.jit(lambda a, lo, hi: jnp.histogram(a, 4, range=(lo, hi), **kw))(x, 0., 4.)[0]
  check(hist(), np.array([1., 2., 1., 1.], np.float32))
  check(hist(density=True), np.array([.2, .4, .2, .2], np.float32))
  check(hist(weights=x), np.array([.5, 2.5, 2.5, 3.5], np.float32))
  check(jax.jit(lambda a, lo, hi: jnp.histogram(a, 4, range=(lo, hi)))(jnp.arange(5), 0, 4)[0],
        np.array([1., 1., 1., 2.]))
  check(jax.vmap(lambda hi: jnp.histogram_bin_edges(x, 2, range=(0., hi)))(jnp.array([2., 4.])),
        np.array([[0., 1., 2.], [0., 2., 4.]], np.float32))
  assert float(jax.grad(lambda hi: jnp.histogram_bin_edges(x, 2, range=(0., hi)).sum())(4.)) == 1.5
  with pytest.raises(ValueError, match=r"`range` must be either None or a sequence of scalars, "
                                       r"got \[0\. 1\. 2\.\]"):
    jnp.histogram_bin_edges(x, 4, range=(0., 1., 2.))


def test_bincount_and_digitize():
  x = np.array([0, 1, 1, 3, 2, 1, 7])
  check(jnp.bincount(x), np.bincount(x))
  check(jnp.bincount(x, minlength=10), np.bincount(x, minlength=10))
  w = RNG.uniform(size=7)
  check(jnp.bincount(x, w), np.bincount(x, w))
  check(jnp.bincount(x, length=4), np.bincount(x)[:4])  # values >= length are dropped
  check(jnp.bincount(np.array([-1, 2])), np.array([1, 0, 1]))  # negatives go to bin 0
  check(jnp.bincount(np.array([True, False, True])), np.array([1, 2]))
  v = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 4.0])
  for bins in (np.array([0.0, 1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0, 0.0]),
               np.array([0, 1, 1, 2])):
    for right in (False, True):
      check(jnp.digitize(v, bins, right), np.digitize(v, bins, right), dtype=np.int32)
  check(jnp.digitize(v.reshape(7, 1), np.array([0.0, 2.0])),
        np.digitize(v.reshape(7, 1), np.array([0.0, 2.0])), dtype=np.int32)
  check(jnp.digitize(np.arange(5), np.array([1, 3])), np.digitize(np.arange(5), [1, 3]),
        dtype=np.int32)


def test_vmap_matches_loop():
  xb = RNG.normal(size=(4, 6, 5))
  testing.check_vmap(lambda v: jnp.median(v, axis=0), (xb,))
  testing.check_vmap(lambda v: jnp.quantile(v, Q, axis=1, keepdims=True), (xb,), in_axes=2)
  testing.check_vmap(lambda v, q: jnp.nanquantile(v, q), (np.where(xb > 1, np.nan, xb),
                                                          RNG.uniform(size=(4, 3))))
  testing.check_vmap(jnp.cov, (xb,))
  testing.check_vmap(lambda v: jnp.nanvar(v, 0), (np.where(xb > 1, np.nan, xb),))
  testing.check_vmap(lambda v: jnp.histogram(v, 5, (-2, 2))[0], (xb,))
  testing.check_vmap(lambda v: jnp.digitize(v, np.array([-1.0, 0.0, 1.0])), (xb,))
  testing.check_vmap(lambda v: jnp.nanargmax(v, 1), (xb,))


def test_jvp_matches_finite_differences():
  x = RNG.normal(size=(5, 6))
  testing.check_jvp(lambda v: jnp.median(v, axis=1), (x,))
  testing.check_jvp(lambda v: jnp.median(v), (x,))
  testing.check_jvp(lambda v, q: jnp.quantile(v, q, axis=0), (x, np.array([0.13, 0.71])))
  testing.check_jvp(lambda v: jnp.nanquantile(v, 0.4, axis=(0, 1)),
                    (np.where(x > 1, np.nan, x),))
  testing.check_jvp(jnp.cov, (x,))
  testing.check_jvp(lambda v: jnp.cov(v, aweights=np.linspace(0.5, 2, 6)), (x,))
  testing.check_jvp(jnp.corrcoef, (x,))
  testing.check_jvp(lambda v: jnp.nanstd(v, 0), (np.where(x > 1, np.nan, x),))


def test_jit_and_concreteness():
  x = RNG.normal(size=(5, 6))
  f = jax.jit(lambda v: jnp.quantile(v, Q, axis=1, method="linear"))
  check(f(x), np.quantile(x, Q, axis=1))
  check(jax.jit(lambda v: jnp.histogram(v, 4)[0])(x), np.histogram(x, 4)[0].astype(float))
  xi = np.array([0, 2, 2, 5])
  check(jax.jit(lambda v: jnp.bincount(v, length=7))(xi), np.bincount(xi, minlength=7))
  with pytest.raises(ConcretizationTypeError):
    jax.jit(jnp.bincount)(xi)
  with pytest.raises(ConcretizationTypeError):
    jax.jit(lambda v, b: jnp.histogram(v, b))(x, 4)


def test_errors():
  x = X[0]
  with pytest.raises(ValueError, match="method"):
    jnp.quantile(x, 0.5, method="bogus")
  with pytest.raises(ValueError, match="rank"):
    jnp.quantile(x, np.ones((2, 2)) / 2)
  with pytest.raises(ValueError, match="complex"):
    jnp.median(x + 1j)
  with pytest.raises(ValueError):
    jnp.median(x, out=np.zeros(()))
  with pytest.raises(ValueError):
    jnp.median(x, axis=(0, 0))
  with pytest.raises(TypeError):
    jnp.median([1.0, 2.0])
  with pytest.raises(ValueError, match="more than 2"):
    jnp.cov(X)
  with pytest.raises(TypeError, match="fweights"):
    jnp.cov(x, fweights=np.ones(5))
  with pytest.raises(RuntimeError, match="incompatible"):
    jnp.cov(x, aweights=np.ones(3))
  with pytest.raises(TypeError, match="integer"):
    jnp.bincount(np.array([1.0]))
  with pytest.raises(ValueError, match="1-dimensional"):
    jnp.bincount(np.zeros((2, 2), int))
  with pytest.raises(ValueError, match="weights"):
    jnp.histogram(x, 3, weights=np.ones(3))
  with pytest.raises(ValueError, match="range"):
    jnp.histogram(x, 3, range=(0, 1, 2))
  with pytest.raises(NotImplementedError):
    jnp.histogram_bin_edges(x, "auto")
  with pytest.raises(ValueError, match="1-dimensional"):
    jnp.digitize(x, np.ones((2, 2)))
  with pytest.raises(NotImplementedError):
    jnp.nanargmax(x, out=np.zeros(()))


# ----------------------------------------------------------------- inverted_cdf and weights
# Expected values and messages from JAX 0.10.2 (x64), jnp.quantile(..., weights=...) etc.
nan = np.nan
_QX1 = np.array([3., 1., 4., 1., 5., 9., 2., 6.])
_QX1N = np.array([3., np.nan, 4., 1., 5., np.nan, 2., 6.])
_QX2 = np.arange(24.).reshape(2, 3, 4)[:, ::-1] * np.array([1., -1, 2, 0.5])
_QX2N = _QX2.copy()
_QX2N[0, 1, 2] = np.nan
_QX2N[1, :, 3] = np.nan
_QENV = dict(
    np=np, jnp=jnp, jax=jax, nan=np.nan, f32=np.float32, x1=_QX1, x1n=_QX1N, x2=_QX2, x2n=_QX2N,
    xi=np.array([5, 2, 8, 1, 7], dtype=np.int32), w1=np.array([1., 2., 0., 1., 3., 1., 2., 1.]),
    w1b=np.array([1., -2., 0., 1., 3., 1., 2., 1.]),
    w1n=np.array([1., np.nan, 0., 1., 3., 1., 2., 1.]),
    w2=np.abs(np.sin(np.arange(24.))).reshape(2, 3, 4), w4=np.array([1., 2., 3., 0.5]),
    w23=np.array([[1., 2., 0., 1.], [3., 1., 2., 1.], [1., 1., 1., 1.]]),
    w43=np.abs(np.cos(np.arange(12.))).reshape(4, 3), wi=np.array([1, 2, 1, 3, 1], dtype=np.int32),
    qs=np.array([0., 0.1, 0.25, 0.5, 0.7, 1.]))

_INVERTED_CDF_CASES = [
    ("jnp.quantile(x2, qs, axis=-1, method='inverted_cdf', keepdims=False)",
     (6, 2, 3), 'float64', [-9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, 5.5, 3.5, 0.0, 11.5, 9.5, 7.5, 8.0, 4.0, 1.5, 20.0, 16.0, 12.0, 20.0, 12.0, 4.0, 44.0, 36.0, 28.0]),
    ("jnp.quantile(x2, qs, axis=(0, 2), method='inverted_cdf', keepdims=True)",
     (6, 1, 3, 1), 'float64', [-21.0, -17.0, -13.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, 8.0, 4.0, 1.5, 20.0, 12.0, 7.5, 44.0, 36.0, 28.0]),
    ("jnp.nanquantile(x2n, qs, axis=(0, 2), method='inverted_cdf', keepdims=False)",
     (6, 3), 'float64', [-21.0, -17.0, -13.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, 8.0, 3.5, 1.5, 20.0, 16.0, 4.0, 44.0, 36.0, 28.0]),
    ("jnp.quantile(x2n, 0.5, axis=(1,), method='inverted_cdf', keepdims=False)",
     (2, 4), 'float64', [4.0, -5.0, nan, 3.5, 16.0, -17.0, 36.0, nan]),
    ("jnp.nanquantile(x2n, 0.333, axis=None, method='inverted_cdf', keepdims=True)",
     (1, 1, 1), 'float64', [0.0]),
    ("jnp.quantile(x1, qs, axis=None, method='inverted_cdf', keepdims=False, weights=w1)",
     (6,), 'float64', [1.0, 1.0, 1.0, 3.0, 5.0, 9.0]),
    ("jnp.quantile(x1, qs, axis=None, method='inverted_cdf', keepdims=False, weights=w1b)",
     (6,), 'float64', [nan, nan, nan, nan, nan, nan]),
    ("jnp.quantile(x1, qs, axis=None, method='inverted_cdf', keepdims=False, weights=w1n)",
     (6,), 'float64', [nan, nan, nan, nan, nan, nan]),
    ("jnp.nanquantile(x1n, qs, axis=None, method='inverted_cdf', keepdims=False, weights=w1)",
     (6,), 'float64', [1.0, 1.0, 2.0, 3.0, 5.0, 6.0]),
    ("jnp.quantile(x2, qs, axis=2, method='inverted_cdf', keepdims=False, weights=w4)",
     (6, 2, 3), 'float64', [-9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, 8.0, 4.0, 1.5, 20.0, 16.0, 12.0, 20.0, 12.0, 4.0, 44.0, 36.0, 28.0, 20.0, 12.0, 4.0, 44.0, 36.0, 28.0]),
    ("jnp.nanquantile(x2n, qs, axis=-1, method='inverted_cdf', keepdims=True, weights=w4)",
     (6, 2, 3, 1), 'float64', [-9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -21.0, -17.0, -13.0, 8.0, -5.0, 1.5, 20.0, 16.0, 12.0, 20.0, 3.5, 4.0, 44.0, 36.0, 28.0, 20.0, 4.0, 4.0, 44.0, 36.0, 28.0]),
    ("jnp.quantile(x2, qs, axis=(1, 2), method='inverted_cdf', keepdims=False, weights=w23)",
     (6, 2), 'float64', [-9.0, -21.0, -9.0, -21.0, -1.0, -13.0, 4.0, 12.0, 4.0, 16.0, 12.0, 36.0]),
    ("jnp.quantile(x2, qs, axis=(2, 1), method='inverted_cdf', weights=w43)",
     (6, 2), 'float64', [-9.0, -21.0, -9.0, -21.0, -1.0, -13.0, 4.0, 12.0, 8.0, 20.0, 20.0, 44.0]),
    ("jnp.nanquantile(x2n, qs, axis=(1, 2), method='inverted_cdf', keepdims=True, weights=w23)",
     (6, 2, 1, 1), 'float64', [-9.0, -21.0, -9.0, -21.0, -1.0, -17.0, 3.5, 16.0, 4.0, 20.0, 8.0, 36.0]),
    ("jnp.quantile(x2, qs, axis=None, method='inverted_cdf', keepdims=False, weights=w2)",
     (6,), 'float64', [-21.0, -13.0, -5.0, 4.0, 12.0, 44.0]),
    ("jnp.quantile(x2, 0.5, axis=1, method='inverted_cdf', keepdims=False, weights=w2)",
     (2, 4), 'float64', [0.0, -5.0, 20.0, 1.5, 12.0, -17.0, 44.0, 7.5]),
    ("jnp.quantile(xi, qs.astype(f32), axis=None, method='inverted_cdf', keepdims=False, weights=wi.astype(f32))",
     (6,), 'float32', [1.0, 1.0, 1.0, 2.0, 5.0, 8.0]),
    ("jnp.quantile(x1, np.array([nan, 2., -1.]), method='inverted_cdf')",
     (3,), 'float64', [1.0, 9.0, 1.0]),
    ("jnp.quantile(x1, 0.5, axis=None, method='inverted_cdf', keepdims=False, weights=np.zeros(8))",
     (), 'float64', [1.0]),
    ("jnp.percentile(x1n, qs * 100, method='inverted_cdf')",
     (6,), 'float64', [nan, nan, nan, nan, nan, nan]),
    ("jnp.nanpercentile(x1n, 50, method='inverted_cdf')",
     (), 'float64', [3.0]),
    ("jax.grad(lambda a: jnp.quantile(a, qs, axis=(2, 1), method='inverted_cdf', weights=w43).sum())(x2)",
     (2, 3, 4), 'float64', [1.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]),
    ("jax.jit(lambda a, w: jnp.nanpercentile(a, qs * 100, axis=(0, 2), method='inverted_cdf', weights=w, keepdims=True))(x2, w2[:, 0])",
     (6, 1, 3, 1), 'float64', [-21.0, -17.0, -13.0, -9.0, -5.0, -1.0, -9.0, -5.0, -1.0, 20.0, 12.0, 4.0, 20.0, 16.0, 12.0, 44.0, 36.0, 28.0]),
]


@pytest.mark.parametrize("expr,shape,dtype,want", _INVERTED_CDF_CASES)
def test_inverted_cdf_and_weights_match_jax(expr, shape, dtype, want):
  got = eval(expr, dict(_QENV))
  assert got.shape == shape and str(got.dtype) == dtype
  np.testing.assert_array_equal(np.asarray(got).ravel(), np.array(want, dtype))


_QUANTILE_ERRORS = [
    ("jnp.quantile(x1, 0.5, method='bogus')", ValueError, "method can only be 'linear', 'lower', 'higher', 'midpoint', 'nearest' or 'inverted_cdf'"),
    ("jnp.quantile(x1, 0.5, method='lower', weights=w1)", NotImplementedError, "lower doesn't support weights. Only method 'inverted_cdf' supports weights."),
    ("jnp.quantile(x2, 0.5, method='inverted_cdf', weights=w4)", ValueError, "Weights shape must match 'a' shape when axis is None."),
    ("jnp.quantile(x2, 0.5, axis=(1, 2), method='inverted_cdf', weights=w4)", ValueError, 'Weights shape (4,) must match reduction axes (3, 4)'),
    ("jnp.quantile(x2, 0.5, axis=(1, 1), method='inverted_cdf', weights=w23)", ValueError, 'repeated axis: (1, 1)'),
    ('jnp.quantile(x2, 0.5, axis=(1, 1))', ValueError, 'repeated axis'),
    ("jnp.quantile(x1, 0.5, axis=None, method='inverted_cdf', keepdims=False, weights=w1.astype(np.complex64))", ValueError, 'Weights cannot be complex types.'),
    ("jnp.quantile(x1, f32(0.3), axis=None, method='inverted_cdf', keepdims=False)", TypeError, 'lax.mul requires arguments to have the same dtypes, got float32, float64. (Tip: jnp.multiply is a similar function that does automatic type promotion on inputs).'),
    ("jnp.quantile(xi, 0.5, axis=None, method='inverted_cdf', keepdims=False)", TypeError, 'lax.mul requires arguments to have the same dtypes, got float64, float32. (Tip: jnp.multiply is a similar function that does automatic type promotion on inputs).'),
    ("jnp.quantile(x1, 1, method='linear')", TypeError, 'floor does not accept dtype int64. Accepted dtypes are subtypes of floating.'),
    ('jnp.quantile(x1, True)', TypeError, 'mul does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.'),
    ('jnp.nanquantile(x1, True)', TypeError, 'sub does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.'),
    ('jnp.quantile(np.zeros(0), 0.5)', TypeError, 'Slice size at index 0 in gather op is out of range, must be within [0, 0 + 1), got 1.'),
    ('jnp.nanquantile(np.zeros(0), 0.5)', IndexError, 'index is out of bounds for axis 0 with size 0'),
    ("jnp.percentile(x1, 50, method='nearest', weights=np.ones(8))", NotImplementedError, "nearest doesn't support weights. Only method 'inverted_cdf' supports weights."),
]


@pytest.mark.parametrize("expr,exc,msg", _QUANTILE_ERRORS)
def test_quantile_errors_match_jax(expr, exc, msg):
  with pytest.raises(exc) as info:
    eval(expr, dict(_QENV))
  assert str(info.value) == msg


def test_unhashable_axis_as_jax_jit():
  msg = ("Non-hashable static arguments are not supported. An error occurred while trying to "
         "hash an object of type <class 'list'>, [0, 1]. The error was:\nTypeError: unhashable "
         "type: 'list'\n")
  for f in (jnp.median, jnp.nanmedian, lambda a, axis: jnp.quantile(a, 0.5, axis=axis),
            lambda a, axis: jnp.nanpercentile(a, 50, axis=axis)):
    with pytest.raises(ValueError) as e:
      f(_QX2, axis=[0, 1])
    assert str(e.value) == msg


def test_quantile_weights_keyword_only_and_percentile_scaling():
  with pytest.raises(TypeError):
    jnp.quantile(_QX1, 0.5, 0, None, False, "inverted_cdf", False, np.ones(8))
  # JAX's q / 100 runs compiled as q * (1 / 100): percentile 70 of 20 values is the 15th
  assert float(jnp.percentile(np.arange(20.), 70., method="inverted_cdf")) == 14.0
  assert float(jax.jit(lambda a: jnp.percentile(a, 70., method="inverted_cdf"))(
      np.arange(20.))) == 14.0
  # percentile q / 100 as JAX's compiled q * (1 / 100): the linear quantile of [0, 1] is
  # that value itself
  import ml_dtypes
  q = np.linspace(0, 100, 401)
  for dt in (np.float64, np.float32, np.float16):
    for f in (jnp.percentile, jax.jit(jnp.percentile)):
      np.testing.assert_array_equal(np.asarray(f(np.arange(2.).astype(dt), q.astype(dt))),
                                    q.astype(dt) * dt(0.01))
  # bfloat16 arithmetic runs in float32 in XLA (JAX 0.10.2's values)
  bf = ml_dtypes.bfloat16
  q = np.array([0.55078125, 0.6484375, 1.1015625, 1.296875, 1.3515625, 1.546875], bf)
  want = [0.0054931640625, 0.0064697265625, 0.010986328125, 0.012939453125, 0.01348876953125,
          0.01544189453125]
  for f in (jnp.percentile, jax.jit(jnp.percentile)):
    np.testing.assert_array_equal(np.asarray(f(np.arange(2.).astype(bf), q), np.float64), want)


def test_inverted_cdf_transforms():
  w = _QENV["w43"]
  f = lambda a: jnp.nanquantile(a, _QENV["qs"], axis=(2, 1), method="inverted_cdf", weights=w)
  want = f(_QX2N)
  np.testing.assert_array_equal(jax.jit(f)(_QX2N), want)
  np.testing.assert_array_equal(jax.vmap(f)(np.stack([_QX2N, _QX2])),
                                np.stack([want, f(_QX2)]))
  g = jax.grad(lambda a: f(a).sum())
  np.testing.assert_array_equal(jax.jit(g)(_QX2), g(_QX2))
  wg = jax.grad(lambda w: jnp.quantile(_QX1, 0.3, method="inverted_cdf", weights=w))(
      _QENV["w1"])
  np.testing.assert_array_equal(wg, np.zeros(8))


def test_mean_var_integer_dtype_compute_in_integers_as_jax():
  # JAX 0.10.2: an integer dtype= converts the elements (truncating), sums and divides in that
  # dtype; var's final where(count > 0, result, nan) makes the result the weak default float
  x = np.array([[-3.3, 0.73, -3.29], [-0.8, -1.89, 5.25], [-4.9, -5.5, 2.03]])
  out = jnp.mean(x, 0, dtype=np.int64)
  assert out.dtype == np.int64 and out.tolist() == [-2, -2, 1]
  assert jnp.mean(x, 0, dtype=np.uint8).tolist() == [0, 0, 2]
  out = jnp.mean(x, 0, dtype=np.int32, where=np.array([[1, 0, 1]] * 3, bool))
  assert out.dtype == np.int32 and out.tolist() == [-2, -1, 1]
  for dt, want in ((np.int8, [3., 4., 11.]), (np.uint16, [0., 0., 4.])):
    out = jnp.var(x, 0, dtype=dt)
    assert out.dtype == np.float64 and out.weak_type and out.tolist() == want
  assert jnp.var(x, 0, dtype=np.int32, ddof=1.5).tolist() == [4., 7., 16.]
  assert np.isnan(jnp.var(x[:1], 0, dtype=np.int32, ddof=1)).all()
  out = jax.jit(lambda v: jnp.var(v, 1, dtype=np.int16, keepdims=True))(x)
  assert out.weak_type and out.tolist() == [[2.], [7.], [9.]]
  msg = "div does not accept dtype bool at position 0"
  with pytest.raises(TypeError, match=msg):
    jnp.mean(np.array([True, False]), dtype=bool)
  with pytest.raises(TypeError, match=msg):
    jnp.var(x, 0, dtype=bool)
  # a float16 dtype= is computed in float16 (only the default dtype upcasts)
  out = jnp.mean(np.full(3000, 0.1, np.float16), dtype=np.float16)
  assert out.dtype == np.float16 and float(out) == float(np.float16(0.0997))
  assert jnp.var(x, 0, dtype=np.float16).tolist() == np.array([2.846, 6.523, 12.4],
                                                               np.float16).tolist()
