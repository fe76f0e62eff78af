"""nbjax.scipy.special and the lax special-function primitives against SciPy (values over
ranges and edge cases, float32 and float64), eager against jit, gradients against central
differences, and JAX 0.10.2's values at the points where it defines derivatives by rule."""
import numpy as np
import pytest
from scipy import special as sp

import nbjax
from nbjax import lax
from nbjax.scipy import special as S

RNG = np.random.default_rng(0)
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def _close(got, want, dtype, rtol=None, atol=0.0):
  got = np.asarray(got)
  assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
  np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=rtol or TOL[dtype],
                             atol=atol, equal_nan=True)


U = RNG.uniform
X = np.concatenate([U(-6, 6, 40), [0.0, -0.0, 1.0, -1.0, 1e-8, 30.0, -30.0]])
POS = np.concatenate([U(0.01, 20, 40), [1e-6, 1.0, 100.0, 0.5]])
UNIT = np.concatenate([U(0.001, 0.999, 40), [0.0, 1.0, 1e-10, 0.5]])
# (function, scipy reference, arguments, float32 rtol)
UNARY = [("erf", X, 1e-5), ("erfc", X, 2e-5), ("expit", X, 1e-5), ("gammaln", POS, 1e-5),
         ("gamma", U(-4.5, 6, 40), 1e-4), ("digamma", POS, 2e-5), ("i0e", X, 1e-5),
         ("i1e", X, 1e-5), ("i0", X, 1e-5), ("i1", X, 1e-5), ("ndtr", X, 1e-5),
         ("log_ndtr", np.concatenate([X, [-25.0, -15.0, -60.0, 9.0]]), 1e-5),
         ("entr", np.concatenate([X, [0.0]]), 1e-5), ("logit", UNIT, 1e-5),
         ("erfinv", 2 * UNIT - 1, 2e-5), ("gammasgn", np.array([-0.0, 0.0, -1.5, -2.5, 3.0]), 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,x,rtol32", UNARY, ids=[u[0] for u in UNARY])
def test_unary_vs_scipy(name, x, rtol32, dtype):
  x = x.astype(dtype)
  want = getattr(sp, name)(x.astype(np.float64))
  # (log ndtr near 0 is log of a float32 near 1: absolute precision, as JAX's)
  atol = (1e-7 if dtype == np.float32 else 1e-15) if name == "log_ndtr" else 1e-30
  if name == "gammaln" and dtype == np.float32:  # XLA's float32 Lanczos, JAX's bits: absolute
    atol = 2e-6                                   # error near the zeros (lgamma(1) = 4.8e-7)
  _close(getattr(S, name)(x), want, dtype, rtol=rtol32 if dtype == np.float32 else 1e-11,
         atol=atol)


BINARY = [("gammainc", POS, POS, 1e-4), ("gammaincc", POS, POS, 1e-4),
          ("xlogy", np.concatenate([X, [0.0, 0.0]]), np.concatenate([np.abs(X), [0.0, np.nan]]), 1e-5),
          ("xlog1py", X, np.abs(X), 1e-5), ("betaln", POS, POS[::-1], 1e-5),
          ("rel_entr", np.concatenate([X, [0.0]]), np.concatenate([np.abs(X), [0.0]]), 1e-5),
          ("kl_div", np.abs(X), np.abs(X[::-1]), 1e-5),
          ("zeta", 1.0 + POS, POS[::-1], 1e-4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,a,b,rtol32", BINARY, ids=[u[0] for u in BINARY])
def test_binary_vs_scipy(name, a, b, rtol32, dtype):
  a, b = a.astype(dtype), b.astype(dtype)
  want = getattr(sp, name)(a.astype(np.float64), b.astype(np.float64))
  if name == "zeta":  # float32 underflows where the reference is below its range
    want = np.where(np.abs(want) < 1e-37, 0.0, want).astype(dtype)
  # float32: 1 - P and rel_entr - p + q cancel (absolute precision, as JAX's)
  atol = 1e-5 if dtype == np.float32 and name in ("gammaincc", "gammainc", "kl_div") else 1e-30
  # float64 gamma integrals: JAX's own error (XLA's Lanczos lgamma), e.g. Q(1e-6, 1e-6)
  rtol64 = 2e-10 if name in ("gammaincc", "gammainc") else 1e-10
  _close(getattr(S, name)(a, b), want, dtype, rtol=rtol32 if dtype == np.float32 else rtol64,
         atol=atol)


def test_gamma_functions_keep_jax_float64_bits():
  """Eager lgamma/digamma/gammaincc give JAX 0.10.2's (XLA's) float64 values, not libm's."""
  x = np.array([1e-6, 0.3, 2.5, 7.1, -2.7, 33.3])
  assert float(S.gammaincc(1e-6, 1e-6)) == 1.323820909104878e-05  # (scipy: ...089664829e-05)
  for f in (lax.lgamma, lax.digamma):
    np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(nbjax.jit(f)(x)))
  for f in (lax.lgamma, lax.digamma):
    xf = x.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(f(xf)), np.asarray(nbjax.jit(f)(xf)))


# inputs where libm's exp / unfused arithmetic gave other bits than XLA's (values: JAX 0.10.2)
_IG_A = np.array([1.1856095556986879, 328.312168897675, 76.78655990337758, 0.011118056063593177,
                  8.032809426279643, 19.744676523423678])
_IG_X = np.array([1.2294385476286962, 48.89992436763802, 0.0028813686009961253,
                  0.9734012173586164, 5.271266589014674, 8.238727626497912])
_IG_WANT = {
    "igamma": [0.636347959983235, 1.7882249569262474e-152, 0.0, 0.9974207591014351,
               0.16010614637288695, 0.0004631181872678423],
    "igammac": [0.36365204001676504, 1.0, 1.0, 0.002579240898564872, 0.839893853627113,
                0.9995368818127321],
    "igamma_grad_a": [-0.3847856700274131, -3.408785623721581e-152, -1.5127947887455787e-307,
                      -0.23453076652693258, -0.09351593493454693, -0.00042960546773209725],
    "random_gamma_grad": [1.167597211982755, 0.3334031203115323, 0.00038265100318464766,
                          54.02473198478414, 0.8208419112432936, 0.6310109651595156]}  # (jit)


@pytest.mark.parametrize("name", sorted(_IG_WANT))
def test_incomplete_gamma_float64_is_xlas_bit_for_bit(name):
  """Eager igamma and its kin give XLA's float64 bits (its exp, fused multiply-adds, flushed
  subnormals: 76.8, 0.0029 underflows to 0 as jit's), equal to jit's and JAX's."""
  f = getattr(lax, name)
  got = np.asarray(f(_IG_A, _IG_X))
  np.testing.assert_array_equal(got, np.asarray(nbjax.jit(f)(_IG_A, _IG_X)))
  assert got.tolist() == _IG_WANT[name]


def test_betainc_float64_is_xlas_bit_for_bit():
  """Eager betainc gives XLA's float64 bits (one element at a time: JAX's continued fraction
  runs until every element of the array converges, which nbjax's does not)."""
  a = [0.1783184955694006, 11.40059147329574, 155.88323474738823, 0.7298072415145223]
  b = [0.0003846641004292834, 0.000584079729839019, 191.54568426375266, 0.0007070548744671047]
  x = [0.5868024493688078, 0.9379367327932719, 0.39570625129472115, 0.6530657207405337]
  want = [0.0022279546380445936, 0.00021887877448389936, 0.022718551552235046,
          0.0010692294355393317]
  for args, w in zip(zip(a, b, x), want):
    assert float(lax.betainc(*args)) == w
    assert float(nbjax.jit(lax.betainc)(*args)) == w


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_betainc_beta_polygamma_vs_scipy(dtype):
  a, b, x = (v.astype(dtype) for v in (POS[:44], POS[::-1][:44], UNIT))
  _close(S.betainc(a, b, x), sp.betainc(*(v.astype(np.float64) for v in (a, b, x))), dtype,
         rtol=5e-4 if dtype == np.float32 else 1e-10, atol=1e-30)
  ab = U(-3.3, 4, (2, 10)).astype(dtype)
  _close(S.beta(ab[0], ab[1]), sp.beta(*ab.astype(np.float64)), dtype,
         rtol=1e-4 if dtype == np.float32 else 1e-10)
  _close(S.polygamma(np.array([0, 1, 2, 3]), np.array([0.5, 2.0, 3.5, 7.0], dtype)),
         sp.polygamma([0, 1, 2, 3], [0.5, 2.0, 3.5, 7.0]), dtype)
  with pytest.raises(ValueError, match="must be of integer type"):
    S.polygamma(1.0, 2.0)


def test_incomplete_gamma_and_beta_edges():
  a = np.array([0.0, 0.0, 1.0, 2.0, -1.0, np.nan, 3.0, 3.0])
  x = np.array([0.0, 1.5, 0.0, np.inf, 1.0, 1.0, -1.0, 3.0])
  np.testing.assert_array_equal(np.isnan(lax.igamma(a, x)), [1, 0, 0, 0, 1, 1, 1, 0])
  np.testing.assert_array_equal(np.asarray(lax.igamma(a, x))[[1, 2, 3]], [1.0, 0.0, 1.0])
  np.testing.assert_array_equal(np.asarray(lax.igammac(a, x))[[1, 2, 3]], [0.0, 1.0, 0.0])
  r = np.asarray(lax.betainc(np.array([0.0, 2.0, 2.0, 2.0, 2.0, -1.0]),
                             np.array([1.0, np.inf, 3.0, 3.0, 3.0, 1.0]),
                             np.array([0.5, 0.5, 0.0, 1.0, 1.5, 0.5])))
  np.testing.assert_array_equal(r[:4], [1.0, 1.0, 0.0, 1.0])
  assert np.isnan(r[4:]).all()
  # large a, x near a: the series' long tail
  np.testing.assert_allclose(lax.igamma(np.array([500.0]), np.array([480.0])),
                             sp.gammainc(500.0, 480.0), rtol=1e-11)


def test_lax_derivative_primitives():
  a, x = np.array([0.5, 2.0, 10.0]), np.array([0.3, 1.5, 12.0])
  # JAX 0.10.2's values
  np.testing.assert_allclose(lax.igamma_grad_a(a, x), [-0.77057035, -0.31348864, -0.09717797],
                             rtol=1e-7)
  np.testing.assert_allclose(lax.random_gamma_grad(a, x), [1.00980195, 0.93663907, 1.11232944],
                             rtol=1e-7)
  h = 1e-6  # d/da of P by central differences
  np.testing.assert_allclose(lax.igamma_grad_a(a, x),
                             (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h), rtol=1e-6)
  with pytest.raises(NotImplementedError, match="Differentiation rule for 'zeta'"):
    nbjax.grad(lambda q: lax.zeta(3.0, q))(2.0)


def test_special_point_gradients_match_jax():
  g = nbjax.grad
  assert float(g(S.xlogy)(0.0, 2.0)) == pytest.approx(0.6931471805599453)
  assert float(g(S.xlogy, 1)(0.0, 2.0)) == 0.0
  assert float(g(S.xlogy)(0.0, 0.0)) == -np.inf
  assert float(g(S.xlog1py)(0.0, -0.5)) == pytest.approx(-0.6931471805599453)
  assert float(g(S.xlog1py, 1)(0.0, 1.0)) == 0.0
  assert float(g(S.entr)(0.0)) == np.inf and float(g(S.entr)(1.0)) == -1.0
  np.testing.assert_array_equal(g(S.logsumexp)(np.array([1000.0, 1000.0, -np.inf])),
                                [0.5, 0.5, 0.0])
  assert float(g(S.log_ndtr)(-40.0)) == pytest.approx(40.02496884784338, rel=1e-12)
  assert float(g(S.log_ndtr)(10.0)) == pytest.approx(7.694598626706409e-23, rel=1e-8)
  assert float(g(S.rel_entr)(0.5, 2.0)) == pytest.approx(-0.3862943611198906)
  assert float(g(S.kl_div)(0.5, 2.0)) == pytest.approx(-1.3862943611198906)
  assert float(g(S.gammainc)(2.0, 1.5)) == pytest.approx(-0.3134886378250792, rel=1e-10)
  assert float(g(S.gammainc, 1)(2.0, 1.5)) == pytest.approx(0.33469524022264474, rel=1e-12)
  assert float(g(S.gammaincc)(2.0, 1.5)) == pytest.approx(0.3134886378250792, rel=1e-10)
  assert float(g(S.betainc, 2)(2.0, 3.0, 0.4)) == pytest.approx(1.728, rel=1e-10)
  assert float(g(S.i0e)(0.0)) == 0.0 and float(g(S.i1e)(0.0)) == 0.5
  assert float(g(S.i1e)(1e-20)) == 0.5
  with pytest.raises(ValueError, match="Betainc gradient with respect to a and b"):
    g(S.betainc)(2.0, 3.0, 0.4)


GRADS = [(S.erf, (0.3,)), (S.gammaln, (2.5,)), (S.digamma, (1.7,)), (S.i0, (1.3,)),
         (S.i1, (-2.1,)), (S.i0e, (9.5,)), (S.i1e, (-0.7,)), (S.ndtr, (0.4,)),
         (S.log_ndtr, (-3.0,)), (S.ndtri, (0.2,)), (S.logit, (0.3,)), (S.expit, (1.2,)),
         (S.gammainc, (2.3, 1.1)), (S.gammaincc, (0.7, 2.9)), (S.xlogy, (1.5, 2.5)),
         (S.xlog1py, (1.5, 0.5)), (S.entr, (0.4,)), (S.rel_entr, (0.7, 1.9)),
         (S.kl_div, (0.7, 1.9)), (S.betaln, (1.5, 2.5)), (S.gamma, (-1.5,)),
         (lambda x: S.betainc(2.0, 3.5, x), (0.35,)), (lambda x: S.multigammaln(x, 3), (3.5,)),
         (lambda x: S.logsumexp(x * np.array([1.0, 2.0, -1.0]), b=np.array([1.0, 0.5, 2.0])), (0.7,)),
         (lambda x: S.softmax(x * np.array([1.0, 2.0, -1.0]))[1], (0.7,)),
         (lambda x: S.log_softmax(x * np.array([1.0, 2.0, -1.0]))[0], (0.7,))]


@pytest.mark.parametrize("f,args", GRADS, ids=range(len(GRADS)))
def test_grad_vs_central_differences(f, args):
  h = 1e-6
  for i in range(len(args)):
    g = float(nbjax.grad(f, argnums=i)(*args))
    up = [float(a) + (h if j == i else 0) for j, a in enumerate(args)]
    dn = [float(a) - (h if j == i else 0) for j, a in enumerate(args)]
    num = (float(f(*up)) - float(f(*dn))) / (2 * h)
    assert g == pytest.approx(num, rel=1e-6, abs=1e-8)


def test_logsumexp_vs_scipy():
  a = RNG.standard_normal((3, 4, 5)) * 10
  b = RNG.standard_normal((3, 4, 5))
  for axis in (None, 0, -1, (0, 2)):
    for keepdims in (False, True):
      np.testing.assert_allclose(S.logsumexp(a, axis=axis, keepdims=keepdims),
                                 sp.logsumexp(a, axis=axis, keepdims=keepdims), rtol=1e-13)
      got, sgn = S.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
      want, wsgn = sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
      np.testing.assert_allclose(got, want, rtol=1e-12)
      np.testing.assert_array_equal(sgn, wsgn)
  mask = RNG.random((3, 4, 5)) < 0.6
  np.testing.assert_allclose(S.logsumexp(a, axis=1, where=mask),
                             sp.logsumexp(np.where(mask, a, -np.inf), axis=1), rtol=1e-13)
  assert np.isnan(S.logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0])))
  assert float(S.logsumexp(np.array([-np.inf, -np.inf]))) == -np.inf
  assert float(S.logsumexp(np.array([1e308, 1e308]))) == pytest.approx(1e308)
  x32 = a.astype(np.float32)
  assert S.logsumexp(x32, axis=0).dtype == np.float32
  np.testing.assert_allclose(nbjax.jit(lambda v: S.logsumexp(v, axis=1))(a),
                             sp.logsumexp(a, axis=1), rtol=1e-13)
  np.testing.assert_allclose(S.softmax(a, axis=1), sp.softmax(a, axis=1), rtol=1e-12)
  np.testing.assert_allclose(S.softmax(a), sp.softmax(a), rtol=1e-12)
  np.testing.assert_allclose(S.log_softmax(a, axis=(0, 2)), sp.log_softmax(a, axis=(0, 2)),
                             rtol=1e-12, atol=1e-15)  # (near 0: -log(1 + tiny) cancels)


def test_poch_comb_boxcox_vs_scipy():
  z, m = U(0.2, 6, 20), np.concatenate([U(-0.5, 4, 19), [0.0]])
  np.testing.assert_allclose(S.poch(z, m), sp.poch(z, m), rtol=1e-12)
  n, k = np.array([5.0, 10.0, 3.0, 4.0, -1.0, 7.5]), np.array([2.0, 3.0, 4.0, 0.0, 1.0, 2.0])
  np.testing.assert_allclose(S.comb(n, k), sp.comb(n, k), rtol=1e-12)
  np.testing.assert_allclose(S.comb(n[:4], k[:4], repetition=True),
                             sp.comb(n[:4], k[:4], repetition=True), rtol=1e-12)
  x, lm = U(0.1, 5, 20), np.concatenate([U(-2, 2, 18), [0.0, 1e-12]])
  np.testing.assert_allclose(S.boxcox(x, lm), sp.boxcox(x, lm), rtol=1e-9)
  np.testing.assert_allclose(S.boxcox1p(x, lm), sp.boxcox1p(x, lm), rtol=1e-9)
  assert float(nbjax.grad(S.boxcox)(2.0, 0.0)) == pytest.approx(0.5)


def test_bernoulli_numbers():
  np.testing.assert_allclose(S.bernoulli(30), sp.bernoulli(30), rtol=1e-11)  # (ours exact)
  np.testing.assert_array_equal(S.bernoulli(0), [1.0])
  np.testing.assert_array_equal(S.bernoulli(4), [1.0, -0.5, 1 / 6, 0.0, -1 / 30])
  with pytest.raises(ValueError):
    S.bernoulli(-1)


def test_ndtri_and_misc():
  p = np.array([1e-300, 1e-100, 1e-20, 1e-10, 0.01, 0.3, 0.5, 0.9, 1 - 1e-12])
  np.testing.assert_allclose(S.ndtri(p), sp.ndtri(p), rtol=1e-14)
  p32 = np.array([1e-37, 1e-20, 1e-3, 0.3, 0.9], np.float32)  # (subnormals flush, as XLA's)
  _close(S.ndtri(p32), sp.ndtri(p32.astype(np.float64)), np.float32, rtol=2e-7)
  np.testing.assert_array_equal(S.ndtri(np.array([0.0, 1.0, 0.5, -0.1])), [-np.inf, np.inf, 0.0, np.nan])
  with pytest.raises(TypeError, match="not supported"):
    S.ndtri(np.array([1, 2]))
  np.testing.assert_allclose(S.factorial(np.array([-1.0, 0.0, 5.0])), [0.0, 1.0, 120.0], rtol=1e-14)
  with pytest.raises(NotImplementedError):
    S.factorial(3, exact=True)
  with pytest.raises(NotImplementedError, match="Riemann zeta"):
    S.zeta(2.0)
  np.testing.assert_allclose(S.multigammaln(np.array([2.5, 3.0, 7.1]), 3),
                             sp.multigammaln(np.array([2.5, 3.0, 7.1]), 3), rtol=1e-13)
  np.testing.assert_allclose(S.sinc(X), np.sinc(X), rtol=1e-13)
  with pytest.raises(ValueError, match="complex"):
    S.entr(np.array([1j]))


JIT = [(lax.igamma, 2), (lax.igammac, 2), (lax.igamma_grad_a, 2), (lax.random_gamma_grad, 2),
       (lax.zeta, 2), (lax.bessel_i0e, 1), (lax.bessel_i1e, 1), (lax.betainc, 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("f,n", JIT, ids=[f.__name__ for f, _ in JIT])
def test_lax_eager_matches_jit_over_ranges(f, n, dtype):
  if f is lax.betainc:
    args = [POS[:44].astype(dtype), POS[::-1][:44].astype(dtype), UNIT.astype(dtype)]
  elif f is lax.zeta:
    args = [(1.0 + POS).astype(dtype), POS[::-1].astype(dtype)]
  elif n == 1:
    args = [X.astype(dtype) * 3]
  else:
    args = [POS.astype(dtype), POS[::-1].astype(dtype)]
  eager, jitted = np.asarray(f(*args)), np.asarray(nbjax.jit(f)(*args))
  assert eager.dtype == jitted.dtype == np.dtype(dtype)
  np.testing.assert_allclose(eager, jitted, rtol=5e-5 if dtype == np.float32 else 1e-11,
                             atol=1e-35, equal_nan=True)


def test_vmap_of_special_functions():
  a = POS[:12].reshape(3, 4)
  x = POS[12:24].reshape(3, 4)
  np.testing.assert_allclose(nbjax.vmap(S.gammainc)(a, x), sp.gammainc(a, x), rtol=1e-12)
  np.testing.assert_allclose(nbjax.vmap(lambda v: S.logsumexp(v))(a), sp.logsumexp(a, axis=1),
                             rtol=1e-13)
  np.testing.assert_allclose(nbjax.vmap(nbjax.grad(S.gammaincc, 1), (None, 0))(2.0, x[0]),
                             -np.exp(np.log(x[0]) - x[0] - sp.gammaln(2.0)), rtol=1e-12)


def test_betaln_no_cancellation_and_zeta_grads():
  # log-gamma differences by Stirling's series: float32 betaln/beta with one large argument
  a = np.array([0.5, 1e-3, 2.0, 1.0, 200.0, 1e10], np.float32)
  b = np.array([1e5, 1e3, 8.0, 1e30, 300.0, 1e10], np.float32)
  want = sp.betaln(a.astype(np.float64), b.astype(np.float64))
  np.testing.assert_allclose(S.betaln(a, b), want, rtol=2e-6)
  np.testing.assert_allclose(S.beta(a[:3], b[:3]), sp.beta(a[:3], b[:3]), rtol=2e-5)
  np.testing.assert_allclose(S.betaln(-1.5, 10.0), sp.betaln(-1.5, 10.0), rtol=1e-13)
  # zeta: d/dq = -x zeta(x + 1, q); d/dx by Euler-Maclaurin (JAX 0.10.2: -0.7642614591758574)
  assert float(nbjax.grad(S.zeta)(2.0, 3.0)) == pytest.approx(-0.7642614591758574, rel=1e-12)
  assert float(nbjax.grad(S.zeta, 1)(2.0, 3.0)) == pytest.approx(-0.15411380631918856, rel=1e-12)
  xs, qs = np.array([1.5, 4.0, 10.0, 30.0]), np.array([0.5, 2.5, 0.1, 1.0])
  want = [-2.0682093782329916, -0.04058323777208362, 23025850929.903236, -6.45548953880003e-10]
  np.testing.assert_allclose(nbjax.vmap(nbjax.grad(S.zeta))(xs, qs), want, rtol=1e-10)
  np.testing.assert_allclose(nbjax.vmap(nbjax.grad(S.zeta))(xs.astype(np.float32),
                                                            qs.astype(np.float32)), want, rtol=2e-5)


def test_ndtr_dtype_checked_before_promotion():
  with pytest.raises(TypeError, match=r"x.dtype=int64 is not supported, see docstring"):
    S.ndtr(np.array([1, 2]))
  with pytest.raises(TypeError, match=r"^x.dtype=int64 is not supported.$"):
    S.log_ndtr(np.array([1, 2]))
  with pytest.raises(TypeError, match="float16"):
    S.ndtr(np.array([1.0], np.float16))
  assert S.ndtr(np.float32(0.5)).dtype == np.float32
  assert float(S.ndtr(0.0)) == 0.5


def test_loggamma_poch_and_complex_errors_as_jax():
  np.testing.assert_array_equal(
      S.loggamma(np.array([-0.5, -2.5, 0., -1., -np.inf, np.nan])), np.full(6, np.nan))
  np.testing.assert_allclose(S.loggamma(np.array([0.5, 3.])), sp.loggamma([0.5, 3.]))
  # JAX's poch derivatives hold at m == 0 too (where the value is the constant 1)
  np.testing.assert_allclose(nbjax.grad(lambda m: S.poch(1., m))(0.), sp.digamma(1.))
  np.testing.assert_allclose(nbjax.grad(lambda m: S.poch(3., m))(0.), sp.digamma(3.))
  np.testing.assert_allclose(nbjax.grad(lambda z: S.poch(z, 2.))(3.),
                             (sp.digamma(5.) - sp.digamma(3.)) * 12., rtol=1e-12)
  c = np.array([1 + 1j])
  with pytest.raises(TypeError, match=r"^erf does not accept dtype complex128\. Accepted"):
    S.erf(c)
  with pytest.raises(TypeError, match=r"^lgamma does not accept dtype complex128"):
    S.gammaln(c)
  with pytest.raises(TypeError, match=r"^igamma does not accept dtype complex128 at position 0"):
    S.gammainc(c, c)
  with pytest.raises(ValueError, match="jnp.poch does not support complex-valued inputs"):
    S.poch(c, c)
  assert not S.ndtr(0.3).weak_type and not S.ndtri(0.3).weak_type  # NumPy scalars in JAX's
  assert S.logit(0.3).weak_type and S.betaln(2., 3.).weak_type


@pytest.mark.parametrize("name", ["erfcx", "exp1"])
def test_erfcx_and_exp1_against_scipy(name):
  f, ref = getattr(S, name), getattr(sp, name)
  lo = -26.0 if name == "erfcx" else 1e-8
  x = np.concatenate([np.linspace(lo, 60, 4001), np.geomspace(1e-8, 650, 2000),
                      np.linspace(0.5, 3, 501)])
  np.testing.assert_allclose(f(x), ref(x), rtol=1e-13)
  np.testing.assert_allclose(nbjax.jit(f)(x), ref(x), rtol=1e-13)
  x32 = x[np.abs(x) < (9 if name == "erfcx" else 80)].astype(np.float32)
  got = f(x32)
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, ref(x32.astype(np.float64)), rtol=1e-6)
  np.testing.assert_allclose(nbjax.jit(f)(x32), ref(x32.astype(np.float64)), rtol=1e-5)
  special = np.array([-np.inf, -30., -1., 0., np.inf, np.nan])
  np.testing.assert_array_equal(f(special), ref(special))
  assert f(3).dtype == np.float64 and not f(3.).weak_type  # (strong, as JAX's)
  # derivatives: closed forms (custom_jvp), against central differences
  for x0 in (0.3, 1.5, 2.5, 12.):
    h = 1e-6 * x0
    np.testing.assert_allclose(nbjax.grad(f)(x0), (ref(x0 + h) - ref(x0 - h)) / (2 * h),
                               rtol=1e-6)
