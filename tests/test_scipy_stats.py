"""nbjax.scipy.stats against scipy.stats: every distribution's functions over ranges that
include the support's edges, float32 and float64, loc/scale defaults and broadcasting,
jit, and gradients of log densities against central differences."""
import numpy as np
import pytest
from scipy import stats as ss

import nbjax
from nbjax.scipy import stats as S

X = np.concatenate([np.linspace(-3, 6, 19), [0.0, -0.0, 1.0]])
XU = np.concatenate([np.linspace(-0.2, 1.2, 15), [0.0, 1.0]])
K = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 2.5])
KI = K[K != 2.5]  # (JAX's geom/binom/nbinom/betabinom do not check integrality: below)
Q = np.array([0.0, 1e-6, 0.05, 0.3, 0.5, 0.9, 1 - 1e-6, 1.0])
# (distribution, function names, x, shape parameters, loc/scale (None: JAX has none))
CASES = [
    ("norm", "logpdf pdf cdf logcdf sf logsf ppf isf", X, (), (0.5, 2.0)),
    ("gamma", "logpdf pdf cdf logcdf sf logsf", X, (2.5,), (-0.5, 1.5)),
    ("beta", "logpdf pdf cdf logcdf sf logsf", XU, (2.5, 1.5), (0.0, 1.0)),
    ("t", "logpdf pdf", X, (3.5,), (0.2, 1.3)),
    ("laplace", "logpdf pdf cdf", X, (), (0.3, 1.3)),
    ("logistic", "logpdf pdf cdf sf ppf isf", X, (), (0.3, 1.3)),
    ("uniform", "logpdf pdf cdf ppf", X, (), (-1.0, 3.0)),
    ("expon", "logpdf pdf cdf logcdf sf logsf ppf", X, (), (0.5, 2.0)),
    ("cauchy", "logpdf pdf cdf logcdf sf logsf ppf isf", X, (), (0.5, 2.0)),
    ("chi2", "logpdf pdf cdf logcdf sf logsf", X, (3.0,), (0.0, 1.5)),
    ("poisson", "logpmf pmf cdf", K, (2.2,), (0.0, None)),
    ("bernoulli", "logpmf pmf", K, (0.3,), (0.0, None)),
    ("bernoulli", "cdf ppf", K, (0.3,), None),
    ("pareto", "logpdf pdf cdf logcdf sf logsf ppf", X, (2.5,), (-0.5, 1.2)),
    ("gumbel_r", "logpdf pdf cdf logcdf sf logsf ppf", X, (), (0.5, 1.5)),
    ("gumbel_l", "logpdf pdf cdf logcdf sf logsf ppf", X, (), (0.5, 1.5)),
    ("geom", "logpmf pmf", KI, (0.3,), (0.0, None)),
    ("binom", "logpmf pmf", KI, (10.0, 0.3), (0.0, None)),
    ("nbinom", "logpmf pmf", KI, (4.5, 0.3), (0.0, None)),
    ("betabinom", "logpmf pmf", KI, (10.0, 2.5, 1.5), (0.0, None)),
    ("gennorm", "logpdf pdf cdf", X, (1.5,), None),
    ("vonmises", "logpdf pdf", X, (2.0,), None),
    ("wrapcauchy", "logpdf pdf", X, (0.4,), None),
    ("truncnorm", "logpdf pdf cdf logcdf sf logsf", X, (-1.0, 2.0), (0.5, 1.5)),
    ("truncnorm", "logpdf cdf logcdf sf logsf", X * 4, (2.0, 5.0), (0.0, 1.0)),
]
PARAMS = [(d, f, x, sh, ls) for d, fs, x, sh, ls in CASES for f in fs.split()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dist,fn,x,shape,locscale", PARAMS,
                         ids=[f"{p[0]}.{p[1]}" for p in PARAMS])
def test_vs_scipy(dist, fn, x, shape, locscale, dtype):
  if fn in ("ppf", "isf"):
    x = Q
  x = x.astype(dtype)
  mine, ref = getattr(getattr(S, dist), fn), getattr(getattr(ss, dist), fn)
  extra = () if locscale is None else tuple(v for v in locscale if v is not None)
  with np.errstate(all="ignore"):
    want = ref(x.astype(np.float64), *shape, *extra)
  if dist == "bernoulli" and fn == "ppf":
    want = np.where(x == 0, 0.0, want)  # JAX's ppf(0) is 0 (SciPy's -1)
  if dist in ("logistic", "gumbel_r", "gumbel_l", "pareto") and fn in ("ppf", "isf") and \
      dtype == np.float32:
    x, want = x[2:-2], want[2:-2]  # logit(q) near q = 1 cancels in float32 (as JAX's)
  if (dist, fn) in (("cauchy", "ppf"), ("cauchy", "isf"), ("norm", "isf")):
    x, want = x[2:-2], want[2:-2]  # JAX's formulas (tan(pi q - pi/2), ppf(1 - q)) lose digits
    # at q = 1e-6 and 1 - 1e-6: JAX's values there in test_scipy_stats_more.py
  if dist in ("cauchy", "gumbel_r", "gumbel_l") and fn in ("ppf", "isf") and x[0] == 0:
    x, want = x[1:-1], want[1:-1]  # JAX's values at q = 0, 1 (not SciPy's infinities): in
    # test_scipy_stats_more.py::test_quantile_edges_as_jax
  got = np.asarray(mine(x, *shape, *extra))
  # JAX's norm.ppf/isf return the default float type (float64 here: x64 is on)
  assert got.dtype == (np.float64 if dist == "norm" and fn in ("ppf", "isf") else dtype)
  rtol, atol = (2e-5, 1e-6) if dtype == np.float32 else (1e-12, 1e-14)
  if fn in ("ppf", "isf") and dtype == np.float32:
    rtol = 2e-4  # q near 1 in float32
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
  if locscale in ((0.0, 1.0), (0.0, None)):  # the defaults give the same
    np.testing.assert_array_equal(np.asarray(mine(x, *shape)), got)


def test_non_integer_counts_as_jax():
  # JAX 0.10.2's values at k = 2.5 (SciPy's are -inf; poisson checks integrality in both)
  assert float(S.geom.logpmf(2.5, 0.3)) == pytest.approx(-1.7389852202340346, rel=1e-13)
  assert float(S.binom.logpmf(2.5, 10.0, 0.3)) == pytest.approx(-1.3308223769278982, rel=1e-13)
  assert float(S.nbinom.logpmf(2.5, 4.5, 0.3)) == pytest.approx(-3.3850239404929603, rel=1e-13)
  assert float(S.poisson.logpmf(2.5, 2.2)) == -np.inf


def test_dirichlet():
  a = np.array([1.5, 2.0, 3.5])
  xs = np.random.default_rng(0).dirichlet(a, 5).T
  np.testing.assert_allclose(S.dirichlet.logpdf(xs, a), ss.dirichlet.logpdf(xs, a), rtol=1e-12)
  np.testing.assert_allclose(S.dirichlet.pdf(xs[:2], a), ss.dirichlet.pdf(xs, a), rtol=1e-11)
  assert float(S.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), a)) == -np.inf
  with pytest.raises(ValueError, match="alpha"):
    S.dirichlet.logpdf(xs, a[None])


def test_defaults_broadcasting_and_jit():
  x = np.linspace(-2, 2, 5)
  np.testing.assert_allclose(S.norm.logpdf(x), ss.norm.logpdf(x), rtol=1e-14)
  loc = np.array([[0.0], [1.0]])
  np.testing.assert_allclose(S.norm.cdf(x, loc, 2.0), ss.norm.cdf(x, loc, 2.0), rtol=1e-13)
  np.testing.assert_allclose(nbjax.jit(S.gamma.logpdf)(x + 3, 2.0), ss.gamma.logpdf(x + 3, 2.0),
                             rtol=1e-13)
  np.testing.assert_allclose(nbjax.jit(S.beta.cdf)(np.array([0.2, 0.7]), 2.0, 3.0),
                             ss.beta.cdf([0.2, 0.7], 2.0, 3.0), rtol=1e-12)
  assert S.norm.logpdf(np.float32(1.0)).dtype == np.float32
  assert S.poisson.logpmf(3, 2.0).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multivariate_normal(dtype):
  rng = np.random.default_rng(0)
  A = rng.standard_normal((3, 3))
  cov = (A @ A.T + np.eye(3)).astype(dtype)
  mean = np.array([0.5, -1.0, 2.0], dtype)
  xs = rng.standard_normal((4, 3)).astype(dtype)
  tol = 1e-4 if dtype == np.float32 else 1e-12
  got = S.multivariate_normal.logpdf(xs, mean, cov)
  assert got.dtype == dtype
  np.testing.assert_allclose(got, ss.multivariate_normal.logpdf(xs, mean, cov), rtol=tol)
  np.testing.assert_allclose(S.multivariate_normal.pdf(xs, mean, cov),
                             ss.multivariate_normal.pdf(xs, mean, cov), rtol=tol)
  np.testing.assert_allclose(S.multivariate_normal.logpdf(xs, mean, dtype(2.0)),
                             ss.multivariate_normal.logpdf(xs, mean, 2.0), rtol=tol)
  np.testing.assert_allclose(nbjax.jit(S.multivariate_normal.logpdf)(xs, mean, cov),
                             ss.multivariate_normal.logpdf(xs, mean, cov), rtol=tol)
  with pytest.raises(NotImplementedError):
    S.multivariate_normal.logpdf(xs, mean, cov, allow_singular=True)


GRADS = [(lambda m: S.norm.logpdf(1.3, m, 2.0), 0.4), (lambda s: S.norm.logcdf(-1.0, 0.0, s), 0.7),
         (lambda a: S.gamma.logpdf(2.0, a, 0.0, 1.5), 2.5), (lambda x: S.gamma.cdf(x, 2.5), 1.2),
         (lambda a: S.beta.logpdf(0.3, a, 1.5), 2.5), (lambda x: S.beta.cdf(x, 2.5, 1.5), 0.3),
         (lambda d: S.t.logpdf(0.7, d), 3.5), (lambda s: S.laplace.logpdf(0.7, 0.1, s), 1.3),
         (lambda x: S.logistic.cdf(x, 0.3, 1.3), 0.4), (lambda s: S.expon.logsf(2.0, 0.0, s), 2.0),
         (lambda s: S.cauchy.logpdf(0.7, 0.0, s), 1.3), (lambda d: S.chi2.logpdf(2.0, d), 3.0),
         (lambda m: S.poisson.logpmf(3.0, m), 2.2), (lambda p: S.bernoulli.logpmf(1.0, p), 0.3),
         (lambda m: S.multivariate_normal.logpdf(np.array([0.3, -0.2]), m * np.ones(2),
                                                 np.array([[2.0, 0.3], [0.3, 1.0]])), 0.5)]


@pytest.mark.parametrize("f,x", GRADS, ids=range(len(GRADS)))
def test_grad_vs_central_differences(f, x):
  h = 1e-6
  assert float(nbjax.grad(f)(x)) == pytest.approx((float(f(x + h)) - float(f(x - h))) / (2 * h),
                                                  rel=1e-6, abs=1e-9)


def test_edges_and_large_df_as_scipy():
  # t at large df: JAX's difference of two log-gammas (exact under jit; eagerly within the
  # last places of lgamma)
  x = np.array([-5.0, -1.0, 0.0, 3.0])
  np.testing.assert_allclose(S.t.logpdf(x, 1e6), ss.t.logpdf(x, 1e6), rtol=1e-9)
  inf = np.array([-np.inf, np.inf])
  np.testing.assert_array_equal(S.logistic.logpdf(inf), [-np.inf, -np.inf])  # (was NaN)
  np.testing.assert_array_equal(S.bernoulli.logpmf(np.array([np.nan, 2.0]), 0.3), [np.nan, -np.inf])
  # truncnorm deep in a tail: masses in log space
  np.testing.assert_allclose(S.truncnorm.logpdf(np.array([20.5, 25.0]), 20.0, 30.0),
                             ss.truncnorm.logpdf([20.5, 25.0], 20.0, 30.0), rtol=1e-9)
  np.testing.assert_allclose(S.truncnorm.logcdf(np.array([-29.0, -26.0]), -30.0, -25.0),
                             ss.truncnorm.logcdf([-29.0, -26.0], -30.0, -25.0), rtol=1e-9)
  assert np.isnan(float(S.truncnorm.logpdf(0.0, 1.0, 1.0)))
  assert np.isnan(float(S.vonmises.logpdf(0.0, -1.0)))
  assert np.isnan(float(S.wrapcauchy.logpdf(0.0, 1.0)))


def test_poisson_entropy_and_multinomial():
  mu = np.array([0.0, 1e-3, 0.5, 3.0, 10.0, 50.0, 99.0, 100.0, 150.0])
  # JAX's rule: sums below mu = 100, then log(2 pi e mu) / 2 - 1 / (12 mu)
  np.testing.assert_allclose(S.poisson.entropy(mu[:-2]), ss.poisson.entropy(mu[:-2]), rtol=1e-9,
                             atol=1e-15)
  np.testing.assert_allclose(S.poisson.entropy(mu[-2:]), [3.7206902928653847, 3.923700624697245],
                             rtol=1e-11)  # JAX 0.10.2's
  assert S.poisson.entropy(np.float32(3.0)).dtype == np.float32
  assert S.poisson.entropy(2.0, loc=np.zeros(3)).shape == (3,)
  x, p = np.array([1, 2, 3]), np.array([0.2, 0.3, 0.5])
  np.testing.assert_allclose(S.multinomial.logpmf(x, 6, p), ss.multinomial.logpmf(x, 6, p),
                             rtol=1e-12)
  np.testing.assert_allclose(S.multinomial.pmf(x, 6, p), ss.multinomial.pmf(x, 6, p), rtol=1e-12)
  assert float(S.multinomial.logpmf(x, 5, p)) == -np.inf
  with pytest.raises(ValueError, match="x and n must be of integer type"):
    S.multinomial.logpmf(x.astype(float), 6, p)


# weak types at a Python-scalar x (JAX 0.10.2, x64): JAX's ``_const`` keeps weak scalars
# weak; ndtr-based functions multiply by NumPy scalars (strong), as does uniform.cdf's select
_STATS_STRONG = {("norm", "cdf"), ("norm", "logcdf"), ("norm", "sf"), ("norm", "logsf"),
                 ("norm", "ppf"), ("norm", "isf"), ("uniform", "cdf")}
_STATS_ARGS = {"gamma": (2.5,), "t": (3.,), "chi2": (3.,), "pareto": (2.,), "poisson": (3.,),
               "geom": (0.3,), "bernoulli": (0.3,), "beta": (2., 3.), "binom": (10, 0.3),
               "nbinom": (5, 0.3), "gennorm": (1.5,), "vonmises": (2.,),
               "wrapcauchy": (0.5,), "betabinom": (10, 2., 3.)}


@pytest.mark.parametrize("mod", ["norm", "expon", "gamma", "t", "cauchy", "chi2", "laplace",
                                 "logistic", "pareto", "poisson", "geom", "uniform",
                                 "bernoulli", "beta", "binom", "nbinom", "gennorm", "vonmises",
                                 "wrapcauchy", "betabinom"])
def test_weak_types_at_python_scalars_as_jax(mod):
  m = getattr(S, mod)
  for fn in ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "pmf", "logpmf"):
    f = getattr(m, fn, None)
    if f is not None:
      r = f(2. if fn in ("pmf", "logpmf") else 0.3, *_STATS_ARGS.get(mod, ()))
      assert r.weak_type == ((mod, fn) not in _STATS_STRONG), (mod, fn)


def test_uniform_cdf_selects_as_jax():
  # JAX's select: 0 below, 1 above, the ramp inside, and 0 where no case holds (NaN)
  np.testing.assert_array_equal(S.uniform.cdf(np.array([-1., .25, 2., np.nan])),
                                [0., .25, 1., 0.])


def test_binom_and_bernoulli_edges_as_jax():
  # JAX 0.10.2's values: no integrality test; NaN k is outside binom's support
  np.testing.assert_allclose(
      S.binom.logpmf(np.array([np.nan, -1, 11, 10.5, 3.5]), 10, .3),
      [-np.inf, -np.inf, -np.inf, -14.22332982, -1.41598019], rtol=1e-8)
  assert float(S.binom.pmf(np.nan, 10, .3)) == 0.0
  np.testing.assert_allclose(S.bernoulli.logpmf(np.array([0.3, 0.5, np.nan, 2., -1]), 0.3),
                             [-0.6108643, -0.78032387, np.nan, -np.inf, -np.inf], rtol=1e-7)
  assert float(S.binom.logpmf(0., 0., .3)) == 0.0  # n == k == 0
  np.testing.assert_allclose(S.gamma.logpdf(np.array([np.nan, -1., 0., 0.5, 3.]), 2.5),
                             [-np.inf, -np.inf, -np.inf, -1.82440364, -1.63676444], rtol=1e-8)
