"""nbjax.scipy.stats beyond the distributions' interiors: ``mode``, ``rankdata``, ``sem`` and
``gaussian_kde`` against scipy.stats, and the distributions' edges (quantiles at 0, 1 and
outside [0, 1], non-positive ``scale``, invalid shape parameters, non-integral counts) with
the values JAX 0.10.2 gives (x64), eagerly and under jit."""
import numpy as np
import pytest
from scipy import stats as ss

import nbjax
import nbjax.numpy as jnp
from nbjax.scipy import stats as S

nan, inf = np.nan, np.inf
X1 = np.array([[1, 2, 1, 3, 2, 1], [3, 1, 3, 2, 1, 3], [1, 2, 2, 3, 1, 2]])
XN = np.array([[1., nan, 2., 4.], [nan, 5., 2., 1.], [3., 3., 6., 1.]])
D1 = np.array([0.1, 0.5, 0.9, 1.4, 2.2, -0.3, 0.7, 1.1])
D2 = np.array([[0.1, 0.5, 0.9, 1.4, 2.2, -0.3, 0.7, 1.1],
               [1.0, 0.2, -0.4, 0.3, 0.8, 1.1, -0.9, 0.0]])


def _same(got, want, rtol=1e-12):
  np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), rtol=rtol,
                             atol=0, equal_nan=True)


# ----------------------------------------------------------------------------- mode


@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, False), (-1, True), (None, False),
                                           (None, True)])
def test_mode_vs_scipy(axis, keepdims):
  m, n = S.mode(X1, axis=axis, keepdims=keepdims)
  want = ss.mode(X1, axis=axis, keepdims=keepdims)
  np.testing.assert_array_equal(m, want.mode)
  np.testing.assert_array_equal(n, want.count)
  assert m.dtype == X1.dtype and n.dtype == np.int64 and m.shape == want.mode.shape
  r = nbjax.jit(S.mode, static_argnames=("axis", "keepdims"))(X1, axis=axis, keepdims=keepdims)
  np.testing.assert_array_equal(r.mode, m)
  np.testing.assert_array_equal(r.count, n)


def test_mode_results_and_errors_as_jax():
  r = S.mode(np.array([2., 4., 1., 1., 3., 4., 4., 2., 3.], np.float32))
  assert type(r).__name__ == "ModeResult" and r._fields == ("mode", "count")
  assert float(r.mode) == 4.0 and int(r.count) == 3 and r.mode.dtype == np.float32
  # ties: the smallest value; NaNs count as one value (JAX's unique)
  np.testing.assert_array_equal(S.mode(XN).mode, [1., 3., 2., 1.])
  np.testing.assert_array_equal(S.mode(XN).count, [1, 1, 2, 2])
  assert S.mode(3).mode.weak_type and int(S.mode(3).count) == 1
  # empty slices: a NaN mode and a zero count, floating point (JAX's)
  m, n = S.mode(np.zeros((0, 3)))
  _same(m, [nan] * 3)
  assert n.dtype == np.float64 and list(np.asarray(n)) == [0., 0., 0.]
  m, n = S.mode(np.zeros((3, 0)))
  assert m.shape == n.shape == (0,) and n.dtype == np.int64
  with pytest.raises(TypeError):
    S.mode([1, 2, 2])
  with pytest.raises(ValueError, match="Illegal nan_policy"):
    S.mode(X1, nan_policy="x")
  for p in ("omit", "raise"):
    with pytest.raises(NotImplementedError):
      S.mode(X1, nan_policy=p)
  with pytest.raises(ValueError, match="out of bounds"):
    S.mode(X1, axis=2)
  np.testing.assert_array_equal(nbjax.vmap(lambda v: S.mode(v).mode)(X1), [1, 3, 2])


# ----------------------------------------------------------------------------- rankdata

METHODS = ["average", "min", "max", "dense", "ordinal"]


@pytest.mark.parametrize("method", METHODS)
def test_rankdata_vs_scipy(method):
  x = np.array([3., 1., 4., 1., 5., 9., 2., 6., 5., 3., 5.], np.float32)
  got = S.rankdata(x, method)
  assert got.dtype == np.float64 and not got.weak_type
  np.testing.assert_array_equal(got, ss.rankdata(x, method))
  np.testing.assert_array_equal(S.rankdata(X1, method), ss.rankdata(X1, method))  # flattened
  for ax in (0, 1, -1):
    np.testing.assert_array_equal(S.rankdata(X1, method, axis=ax),
                                  ss.rankdata(X1, method, axis=ax))
  # NaN: the whole (flattened, or per-axis) ranking is NaN (JAX's "propagate")
  _same(S.rankdata(XN, method), np.full(XN.size, nan))
  _same(S.rankdata(XN, method, axis=0), ss.rankdata(XN, method, axis=0))
  f = nbjax.jit(S.rankdata, static_argnames=("method", "axis"))
  np.testing.assert_array_equal(f(X1, method=method, axis=1), S.rankdata(X1, method, axis=1))


def test_rankdata_edges_and_errors_as_jax():
  np.testing.assert_array_equal(S.rankdata(3.0), [1.])
  assert S.rankdata(np.zeros(0)).shape == (0,)
  assert S.rankdata(np.zeros((2, 0)), axis=1).shape == (2, 0)
  np.testing.assert_array_equal(S.rankdata(np.array([inf, -inf, 0., inf])), [3.5, 1., 2., 3.5])
  np.testing.assert_array_equal(S.rankdata(np.array([True, False, True])), [2.5, 1., 2.5])
  np.testing.assert_array_equal(nbjax.vmap(S.rankdata)(X1.astype(float)),
                                ss.rankdata(X1, axis=1))
  with pytest.raises(ValueError, match="unknown method 'foo'"):
    S.rankdata(X1, "foo")
  with pytest.raises(TypeError):
    S.rankdata([1, 2])
  with pytest.raises(ValueError, match="Illegal nan_policy"):
    S.rankdata(X1, nan_policy="x")
  for p in ("omit", "raise"):
    with pytest.raises(NotImplementedError):
      S.rankdata(X1, nan_policy=p)
  with pytest.raises(ValueError, match="out of bounds"):
    S.rankdata(X1, axis=2)


# ----------------------------------------------------------------------------- sem


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (SciPy's, at ddof >= n)
@pytest.mark.parametrize("axis,ddof,keepdims", [(0, 1, False), (1, 1, True), (None, 1, False),
                                                (-1, 0, False), (0, 2, True)])
def test_sem_vs_scipy(axis, ddof, keepdims):
  want = ss.sem(X1, axis=axis, ddof=ddof, keepdims=keepdims)
  got = S.sem(X1, axis, ddof, keepdims=keepdims)
  assert got.dtype == np.float64 and got.shape == np.shape(want)
  _same(got, want, 1e-14)
  got32 = S.sem(X1.astype(np.float32), axis, ddof, keepdims=keepdims)
  assert got32.dtype == np.float32
  _same(got32, want, 1e-6)
  # NaN: propagated, or left out of the deviation and the count
  _same(S.sem(XN, axis, ddof, keepdims=keepdims),
        ss.sem(XN, axis=axis, ddof=ddof, keepdims=keepdims), 1e-14)
  want = np.asarray(ss.sem(XN, axis=axis, ddof=ddof, nan_policy="omit", keepdims=keepdims))
  want = np.where(np.isinf(want), nan, want)  # (no more values than ddof: JAX's nanstd is NaN)
  _same(S.sem(XN, axis, ddof, "omit", keepdims=keepdims), want, 1e-14)


def test_sem_transformations_and_errors_as_jax():
  x = X1.astype(float)
  _same(nbjax.jit(S.sem)(x), S.sem(x), 1e-15)
  # a traced ddof works (as JAX's)
  _same(nbjax.jit(lambda v, d: S.sem(v, ddof=d))(x, 2), S.sem(x, ddof=2), 1e-15)
  _same(nbjax.vmap(S.sem)(x), ss.sem(x, axis=1), 1e-14)
  v = np.array([1., 2., 4.])
  n, mu = 3, v.mean()  # d sem / dv = (v - mean) / ((n - 1) n sem)
  _same(nbjax.grad(S.sem)(v), (v - mu) / ((n - 1) * n * ss.sem(v)), 1e-13)
  assert float(S.sem(3.0, axis=None)) != float(S.sem(3.0, axis=None))  # NaN (ddof 1, n 1)
  with pytest.raises(ValueError, match="raise is not supported"):
    S.sem(x, nan_policy="raise")
  with pytest.raises(TypeError):
    S.sem([1., 2.])


# ----------------------------------------------------------------------------- gaussian_kde


def _tol(dtype):
  return dict(rtol=1e-12, atol=1e-15) if dtype == np.float64 else dict(rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("data,bw,weighted", [(D1, None, False), (D1, "silverman", True),
                                              (D2, 0.6, False), (D2, "scott", True)],
                         ids=["1d-scott", "1d-silverman-w", "2d-scalar", "2d-scott-w"])
def test_gaussian_kde_vs_scipy(data, bw, weighted, dtype):
  w = np.linspace(0.5, 2.0, data.shape[-1]) if weighted else None
  data = data.astype(dtype)
  k = S.gaussian_kde(data, bw, None if w is None else w.astype(dtype))
  ref = ss.gaussian_kde(data.astype(float), bw, w)
  tol = _tol(dtype)
  assert k.covariance.dtype == k.dataset.dtype == k.weights.dtype == dtype
  assert k.d == ref.d and k.n == ref.n
  np.testing.assert_allclose(float(k.neff), ref.neff, **tol)
  np.testing.assert_allclose(k.covariance, ref.covariance, **tol)
  np.testing.assert_allclose(k.inv_cov, ref.inv_cov, rtol=1e-10 if dtype == np.float64 else 1e-3)
  pts = np.linspace(-1, 2, 5 * ref.d).reshape(ref.d, 5).astype(dtype)
  for f, g in ((k.evaluate, ref.evaluate), (k, ref), (k.pdf, ref.pdf), (k.logpdf, ref.logpdf)):
    got = f(pts)
    assert got.dtype == dtype and got.shape == (5,)
    np.testing.assert_allclose(got, g(pts.astype(float)), **tol)
  mean, cov = np.full(ref.d, 0.3, dtype), (0.7 * np.eye(ref.d)).astype(dtype)
  np.testing.assert_allclose(float(k.integrate_gaussian(mean, cov)),
                             ref.integrate_gaussian(mean.astype(float), cov.astype(float)), **tol)
  other = S.gaussian_kde(data[..., :5] + dtype(0.5))
  np.testing.assert_allclose(float(k.integrate_kde(other)),
                             ref.integrate_kde(ss.gaussian_kde(data[..., :5].astype(float) + 0.5)),
                             **tol)
  if ref.d == 1:
    box = k.integrate_box_1d(-0.5, 1.2)
    assert box.dtype == dtype
    np.testing.assert_allclose(float(box), ref.integrate_box_1d(-0.5, 1.2), **tol)
    np.testing.assert_allclose(float(k.integrate_box_1d(-inf, inf)), 1.0, **tol)


def test_gaussian_kde_pytree_transformations():
  k = S.gaussian_kde(D2, weights=np.arange(1., 9.))
  leaves, tree = nbjax.tree_util.tree_flatten(k)
  assert len(leaves) == 5
  k2 = nbjax.tree_util.tree_unflatten(tree, leaves)
  assert type(k2) is S.gaussian_kde and k2.d == 2 and k2.n == 8
  pts = np.array([[0.2, 1.0, -0.5], [0.3, 0.1, 0.9]])
  want = k.evaluate(pts)
  np.testing.assert_allclose(nbjax.jit(lambda kk, p: kk.evaluate(p))(k, pts), want, rtol=1e-13)
  np.testing.assert_allclose(nbjax.jit(lambda kk, p: kk.logpdf(p))(k, pts), np.log(want),
                             rtol=1e-13)
  # built under vmap and differentiated (the estimator is traceable)
  lp = nbjax.vmap(lambda d: S.gaussian_kde(d).logpdf(0.3)[0])(np.stack([D1, 2 * D1]))
  np.testing.assert_allclose(lp, [ss.gaussian_kde(D1).logpdf(0.3)[0],
                                  ss.gaussian_kde(2 * D1).logpdf(0.3)[0]], rtol=1e-12)
  k1 = S.gaussian_kde(D1)
  g = nbjax.grad(lambda h: k1.integrate_box_1d(0., h))(1.0)
  np.testing.assert_allclose(float(g), float(k1.evaluate(1.0)[0]), rtol=1e-12)
  with pytest.raises(AttributeError):  # frozen
    k.neff = 1.0


def test_gaussian_kde_resample_as_jax():
  # JAX 0.10.2's draws for the same keys (the same PRNG streams)
  r = S.gaussian_kde(D2[:, :6], weights=np.arange(1., 7.)).resample(nbjax.random.key(42), (3,))
  np.testing.assert_allclose(r, [[0.23405082505667624, 0.9215826484772556, 1.492537420928096],
                                 [1.068717952975601, 0.7992193825033065, 0.24034324652348849]],
                             rtol=1e-12)
  assert r.shape == (2, 3) and r.dtype == np.float64
  with pytest.raises(TypeError, match="must be a sequence"):
    S.gaussian_kde(D1).resample(nbjax.random.key(0), 4)


def test_gaussian_kde_errors_as_jax():
  k1, k2 = S.gaussian_kde(D1), S.gaussian_kde(D2)
  with pytest.raises(NotImplementedError, match="integrate_box_1d"):
    k1.integrate_box([0.], [1.])
  with pytest.raises(NotImplementedError, match="bandwidth"):
    k1.set_bandwidth("scott")
  with pytest.raises(TypeError):
    S.gaussian_kde([1., 2., 3.])
  with pytest.raises(NotImplementedError, match="complex data"):
    S.gaussian_kde(D1 + 1j)
  with pytest.raises(NotImplementedError, match="complex coordinates"):
    k1.evaluate(np.array([0.5j]))
  with pytest.raises(ValueError, match="multiple elements"):
    S.gaussian_kde(np.array([1.0]))
  with pytest.raises(ValueError, match="one-dimensional"):
    S.gaussian_kde(D1, weights=np.ones((2, 4)))
  with pytest.raises(ValueError, match="length n"):
    S.gaussian_kde(D1, weights=np.ones(5))
  with pytest.raises(ValueError, match="bw_method"):
    S.gaussian_kde(D1, "foo")
  with pytest.raises(ValueError, match="points have dimension 3, dataset has dimension 2"):
    k2.evaluate(np.ones((3, 2)))
  np.testing.assert_allclose(k2.evaluate(np.array([0.2, 0.3])),  # (d,) as one point
                             ss.gaussian_kde(D2)(np.array([0.2, 0.3])), rtol=1e-12)
  with pytest.raises(ValueError, match="only handles 1D"):
    k2.integrate_box_1d(0., 1.)
  with pytest.raises(ValueError, match="must be scalars"):
    k1.integrate_box_1d(np.zeros(1), 1.)
  with pytest.raises(ValueError, match="mean does not have dimension 2"):
    k2.integrate_gaussian(np.zeros(3), np.eye(2))
  with pytest.raises(ValueError, match="covariance does not have dimension 2"):
    k2.integrate_gaussian(np.zeros(2), np.eye(3))
  with pytest.raises(ValueError, match="same dimensionality"):
    k2.integrate_kde(k1)


# ----------------------------------------------------------------------------- distribution edges

Q = np.array([-0.5, 0.0, 0.5, 1.0, 1.5, nan])
# JAX 0.10.2's values at Q (x64): Cauchy's are tan(pi q - pi/2) there (finite at 0 and 1,
# periodic outside); Gumbel's are NaN unless 0 < q < 1
PPF_EDGES = {
    ("cauchy", "ppf", np.float64): [1.2246467991473532e-16, -1.633123935319537e+16, 0.0,
                                    1.633123935319537e+16, -1.2246467991473532e-16, nan],
    ("cauchy", "isf", np.float64): [-1.2246467991473532e-16, 1.633123935319537e+16, 0.0,
                                    -1.633123935319537e+16, 1.2246467991473532e-16, nan],
    ("cauchy", "ppf", np.float32): [-8.742277657347586e-08, 22877334.0, 0.0, -22877334.0,
                                    -1.5099580252808664e-07, nan],
    ("cauchy", "isf", np.float32): [8.742277657347586e-08, -22877334.0, 0.0, 22877334.0,
                                    1.5099580252808664e-07, nan],
    ("gumbel_r", "ppf", np.float64): [nan, nan, 0.36651292058166435, nan, nan, nan],
    ("gumbel_l", "ppf", np.float64): [nan, nan, -0.36651292058166435, nan, nan, nan],
    ("gumbel_r", "ppf", np.float32): [nan, nan, 0.3665129244327545, nan, nan, nan],
    ("gumbel_l", "ppf", np.float32): [nan, nan, -0.3665129244327545, nan, nan, nan],
}


@pytest.mark.parametrize("key", list(PPF_EDGES), ids=[f"{d}.{f}-{t.__name__}"
                                                      for d, f, t in PPF_EDGES])
def test_quantile_edges_as_jax(key):
  dist, fn, dtype = key
  f = getattr(getattr(S, dist), fn)
  q = Q.astype(dtype)
  got = f(q)
  assert got.dtype == dtype
  _same(got, PPF_EDGES[key], 1e-6 if dtype == np.float32 else 1e-12)
  # (under jit the argument pi q - pi/2 may fuse: outside [0, 1] the values near 0 differ in
  # the last place of pi, as JAX's jit's do)
  np.testing.assert_allclose(nbjax.jit(f)(q), got, rtol=1e-6, atol=3e-7 if dtype == np.float32
                             else 1e-15)
  # near 0 and 1 JAX's tan(pi q - pi/2) loses digits; these are JAX 0.10.2's values
  if dist == "cauchy":
    tiny = np.array([1e-6, 1 - 1e-6], dtype)
    want = 327254.03125 if dtype == np.float32 else 318309.88617781905
    sign = -1 if fn == "ppf" else 1
    np.testing.assert_allclose(f(tiny), [sign * want, -sign * want],
                               rtol=1e-12 if dtype == np.float64 else 1e-6)


def test_quantiles_at_nonpositive_scale_as_jax():
  s = np.array([-1.0, 0.0, nan])
  want = {"norm.ppf": [0.5244005127080408, 0.0, nan], "norm.isf": [-0.5244005127080406, 0., nan],
          "logistic.ppf": [0.8472978603872036, 0.0, nan],
          "logistic.isf": [-0.8472978603872036, 0.0, nan],
          "cauchy.ppf": [0.7265425280053609, 0.0, nan],
          "cauchy.isf": [-0.7265425280053609, 0.0, nan],
          "expon.ppf": [-0.3566749439387324, 0.0, nan], "uniform.ppf": [-0.3, 0.0, nan],
          "gumbel_r.ppf": [0.18562675886236574, 0.0, nan],
          "gumbel_l.ppf": [1.030930433158723, 0.0, nan]}
  for name, w in want.items():
    dist, fn = name.split(".")
    _same(getattr(getattr(S, dist), fn)(0.3, 0.0, s), w)
  _same(S.pareto.ppf(0.3, 2.0, 0.0, s), [-1.1952286093343938, 0.0, nan])
  assert float(S.pareto.ppf(0.0, 0.0)) == 1.0  # (1 - 0)^(-1/0) = 1
  # Cauchy at q = 0 with scale -2 (a weak Python-scalar result, as JAX's)
  r = S.cauchy.ppf(0.0, 1.0, -2.0)
  assert r.weak_type and float(r) == pytest.approx(3.266247870639074e+16, rel=1e-12)


def test_densities_at_invalid_parameters_as_jax():
  s = np.array([-1.0, 0.0, nan])
  _same(S.norm.logpdf(0.7, 0.2, s), [-1.0439385332046727, nan, nan])  # scale^2: |scale|
  assert float(S.t.logpdf(0.7, 3.0, 0.0, -2.0)) == pytest.approx(-1.7740793788824272, rel=1e-13)
  # expon: the support test is x < loc whatever scale's sign
  _same(S.expon.logpdf(np.array([-1., 1.]), 0., -1.), [-inf, nan])
  _same(S.expon.cdf(np.array([-1., 1.]), 0., -1.), [0.0, -1.7182818284590455])
  _same(S.expon.sf(np.array([-1., 1.]), 0., -1.), [1.0, 2.7182818284590455])
  # pareto: the support test is x < loc + scale
  _same(S.pareto.logpdf(np.array([-3., 0.5, 2.]), 2., 0., -1.), [-inf, nan, nan])
  _same(S.pareto.cdf(np.array([-3., 0.5, 2.]), 2., 0., -1.), [0.0, -3.0, 0.75])
  # gumbel: NaN unless scale > 0
  for fn in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"):
    for dist in (S.gumbel_r, S.gumbel_l):
      _same(getattr(dist, fn)(0.3, 0., s), [nan, nan, nan])
  # beta: NaN unless a, b, scale > 0
  _same(S.beta.logpdf(0.5, np.array([-1., 0., 2.]), 2.), [nan, nan, 0.40546510810816505])
  assert np.isnan(float(S.beta.logpdf(-0.5, 2., 2., 0., -1.)))
  # chi2: (df/2 - 1) log y as a plain product (NaN at y = 0 for df = 2); -inf below loc
  _same(S.chi2.logpdf(np.array([-1., 0., 1.]), 2.), [-inf, nan, -1.1931471805599454])
  assert float(S.chi2.logpdf(-1., 3., 0., -1.)) == -inf
  _same(S.gamma.sf(np.array([-1., -inf]), -1.), [1.0, 1.0])  # 1 below the support, any a
  # truncnorm's log CDF where no case holds (a NaN x) is 0, as JAX's select
  _same(S.truncnorm.cdf(np.array([nan, 0.3]), -1., 2.), [1.0, 0.5610300389662324])
  assert float(S.truncnorm.sf(nan, -1., 2.)) == 1.0
  assert float(S.truncnorm.logcdf(nan, -1., 2.)) == 0.0
  assert float(nbjax.jit(S.poisson.entropy)(np.float32(0.0))) == 0.0


def test_betabinom_and_poisson_counts_as_jax():
  k = np.array([-0.5, 0., 2., 2.5, 2.99, 10., 10.5, 11.])
  # k floored (JAX's; its betaln is good to ~1e-7, these to SciPy's 1e-12)
  want = ss.betabinom.logpmf(np.floor(k), 10, 2., 3.)
  assert want[0] == want[-1] == -inf
  _same(S.betabinom.logpmf(k, 10., 2., 3.), want, 1e-12)
  np.testing.assert_allclose(S.betabinom.pmf(2.5, 10, 2., 3.), ss.betabinom.pmf(2, 10, 2., 3.),
                             rtol=1e-12)
  _same(S.betabinom.logpmf(2., np.array([-1., 10., 10.]), np.array([2., 0., 2.]),
                           np.array([3., 3., -1.])), [nan, nan, nan])
  # floor(k) - loc + a <= 0: -inf (JAX's), even where SciPy's support starts at loc
  _same(S.betabinom.logpmf(np.array([0., 1., 2.]), 10., 0.5, 3., 2.),
        [-inf, -inf, ss.betabinom.logpmf(0, 10, 0.5, 3.)])
  assert float(S.betabinom.logpmf(0., 0., 2., 3.)) == 0.0
  # poisson tests k (not k - loc) for integrality, as JAX's
  _same(S.poisson.logpmf(np.array([1., 1.5, 2.]), 2.5, 0.5),
        [-1.9210723964276775, -inf, -1.410246772661687])
  assert np.isnan(float(S.poisson.logpmf(1., -1.)))


# eager and jit agree over grids of edge values (every function the edits touched)
EDGE_X = np.array([-inf, -3., -0.5, 0., 0.3, 1., 2.5, 10., inf, nan])
EDGE_FNS = [("norm", "logpdf pdf", ()), ("expon", "logpdf cdf logcdf sf", ()),
            ("gumbel_r", "logpdf logcdf sf logsf", ()), ("gumbel_l", "logpdf cdf logcdf sf", ()),
            ("cauchy", "cdf sf", ()), ("pareto", "logpdf cdf logcdf logsf", (2.0,)),
            ("chi2", "logpdf", (2.0,))]


@pytest.mark.parametrize("dist,fns,shape", EDGE_FNS, ids=[e[0] for e in EDGE_FNS])
def test_edges_eager_equals_jit(dist, fns, shape):
  x = EDGE_X[:, None]
  scale = np.array([-1.0, 0.0, 1.5, nan])
  fs = [getattr(getattr(S, dist), fn) for fn in fns.split()]
  both = lambda *a: [f(*a) for f in fs]  # noqa: E731  (one compilation for all)
  for fn, eager, jitted in zip(fns.split(), both(x, *shape, 0.25, scale),
                               nbjax.jit(both)(x, *shape, 0.25, scale)):
    # (atol: XLA fuses cauchy.cdf's 1/2 + atan(y)/pi into an FMA, -1e-17 for 0, as JAX's jit)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-13, atol=1e-16,
                               equal_nan=True, err_msg=f"{dist}.{fn}")
  for f in fs:
    assert f(0.3, *shape).weak_type  # Python scalars: weak (JAX's constants)
    assert f(np.float32(0.3), *shape).dtype == np.float32


def test_new_functions_exported_as_jax():
  for name in ("gaussian_kde", "mode", "rankdata", "sem"):
    assert name in dir(S)
  assert isinstance(jnp.asarray(S.sem(np.float32([1, 2, 4]))), nbjax.Array)
