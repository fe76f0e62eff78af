"""``nbjax.numpy`` numerical routines (``_numerics``) against NumPy: values and dtypes (JAX's
dtype rules where they differ from NumPy's), the edge cases of the floating-point helpers,
vmap against a loop, jvp against central differences, jit against eager, and JAX's errors."""
import warnings

import numpy as np
import pytest
import scipy.special

import nbjax
import nbjax.numpy as jnp

RNG = np.random.default_rng(0)


def check(got, want, rtol=1e-12, atol=0.0, dtype=None):
  got = np.asarray(got)
  want = np.asarray(want)
  assert got.shape == want.shape, (got.shape, want.shape)
  assert got.dtype == (want.dtype if dtype is None else np.dtype(dtype)), (got.dtype, want.dtype)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def central_diff(f, x, t, eps=1e-6):
  return (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)


def jvp_matches(f, x, rtol=1e-6, atol=1e-8):
  t = RNG.standard_normal(np.shape(x))
  primal, tangent = nbjax.jvp(f, (jnp.asarray(x),), (jnp.asarray(t),))
  np.testing.assert_allclose(np.asarray(primal), np.asarray(f(jnp.asarray(x))), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(tangent), central_diff(lambda v: f(jnp.asarray(v)), x, t),
                             rtol=rtol, atol=atol)

# ----------------------------------------------------------------- vectors and calculus


@pytest.mark.parametrize("sa,sb,kw", [((3,), (3,), {}), ((4, 3), (3,), {}), ((2, 1, 3), (5, 3), {}),
                                      ((3, 4), (3, 4), {"axis": 0}),
                                      ((3, 4), (4, 3), {"axisa": 0, "axisc": 0}),
                                      ((4, 2), (4, 3), {}), ((4, 3), (2,), {}),
                                      ((2, 5), (5, 2), {"axisa": 0, "axisb": 1})])
def test_cross(sa, sb, kw):
  a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors
    check(jnp.cross(a, b, **kw), np.cross(a, b, **kw))
    ai, bi = (a * 10).astype(np.int32), (b * 10).astype(np.int32)
    check(jnp.cross(ai, bi, **kw), np.cross(ai, bi, **kw))
    check(jnp.cross(a.astype(np.float32), bi, **kw), np.cross(a, bi, **kw).astype(np.float32),
          rtol=1e-5)


def test_cross_2d_and_errors():
  a, b = RNG.standard_normal((4, 2)), RNG.standard_normal((4, 2))
  check(jnp.cross(a, b), a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
  with pytest.raises(ValueError, match="2 or 3"):
    jnp.cross(np.ones(4), np.ones(3))
  with pytest.raises(TypeError):
    jnp.cross([1, 2, 3], [4, 5, 6])


def test_cross_vmap_jvp():
  a, b = RNG.standard_normal((5, 3)), RNG.standard_normal(3)
  got = nbjax.vmap(jnp.cross, in_axes=(0, None))(jnp.asarray(a), jnp.asarray(b))
  check(got, np.stack([np.cross(r, b) for r in a]))
  jvp_matches(lambda v: jnp.cross(v, b), a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32])
def test_vander(dtype):
  x = np.array([1.5, -2, 3, 0.5]) if dtype in (np.float64, np.float32) else np.array([1, -2, 3, 4])
  x = x.astype(dtype)
  for N in (None, 0, 1, 3, 6):
    for inc in (False, True):
      check(jnp.vander(x, N, increasing=inc), np.vander(x, N, increasing=inc), rtol=1e-6,
            dtype=dtype)  # JAX keeps x's dtype (NumPy promotes with int64)
  with pytest.raises(ValueError, match="one-dimensional"):
    jnp.vander(np.ones((2, 2)))
  with pytest.raises(ValueError, match="nonnegative"):
    jnp.vander(x, -1)


def test_trapezoid():
  y = RNG.standard_normal((3, 6))
  x1 = np.sort(RNG.standard_normal(6))
  x2 = np.sort(RNG.standard_normal((3, 6)), axis=1)
  check(jnp.trapezoid(y), np.trapezoid(y))
  check(jnp.trapezoid(y, dx=0.3, axis=0), np.trapezoid(y, dx=0.3, axis=0))
  check(jnp.trapezoid(y, x1), np.trapezoid(y, x1))
  check(jnp.trapezoid(y, x2), np.trapezoid(y, x2))
  check(jnp.trapezoid(y.T, x2.T, axis=0), np.trapezoid(y.T, x2.T, axis=0))
  check(jnp.trapezoid(np.arange(5)), np.trapezoid(np.arange(5)))  # ints -> float64
  assert jnp.trapezoid(y.astype(np.float32)).dtype == np.float32
  got = nbjax.vmap(lambda r: jnp.trapezoid(r, x1))(jnp.asarray(y))
  check(got, np.array([np.trapezoid(r, x1) for r in y]))
  jvp_matches(lambda v: jnp.trapezoid(v, x1), y)
  jvp_matches(lambda v: jnp.trapezoid(y, v), x2)


def test_trapezoid_bfloat16_eager_is_jits():
  """jnp.trapezoid is jitted as JAX's: the product fused into the sum (no bfloat16 rounding
  of each product), so eager and jit agree (lax_numpy_test test_trapezoid, bfloat16)."""
  rng = np.random.RandomState(0)
  y = (rng.randn(3, 10) * 5).astype(jnp.bfloat16)
  x = (rng.randn(10) * 5).astype(jnp.bfloat16)
  eager = np.asarray(jnp.trapezoid(y, x)).astype(np.float32)
  np.testing.assert_array_equal(eager, np.asarray(nbjax.jit(jnp.trapezoid)(y, x)).astype(
      np.float32))
  np.testing.assert_array_equal(eager, [34, -5, -36.75])  # (JAX 0.10.2's; op by op 34.5...)
  with pytest.raises(TypeError, match="trapezoid requires ndarray or scalar arguments"):
    jnp.trapezoid([1.0, 2.0])


def test_gradient():
  f = RNG.standard_normal((5, 7))
  check(jnp.gradient(f[0]), np.gradient(f[0]))
  for got, want in zip(jnp.gradient(f), np.gradient(f)):
    check(got, want)
  for got, want in zip(jnp.gradient(f, 0.5, 2.0), np.gradient(f, 0.5, 2.0)):
    check(got, want)
  check(jnp.gradient(f, axis=-1), np.gradient(f, axis=-1))
  x = np.cumsum(RNG.uniform(0.5, 1.5, 7))
  check(jnp.gradient(f, x, axis=1), np.gradient(f, x, axis=1), rtol=1e-10)
  for order in (1, 2):
    check(jnp.gradient(f, edge_order=order, axis=1), np.gradient(f, edge_order=order, axis=1),
          rtol=1e-10)
    check(jnp.gradient(f, x, edge_order=order, axis=1),
          np.gradient(f, x, edge_order=order, axis=1), rtol=1e-10)
  check(jnp.gradient(np.arange(4) ** 2), np.gradient(np.arange(4) ** 2))
  with pytest.raises(ValueError, match="too small"):
    jnp.gradient(np.ones(2), edge_order=2)
  with pytest.raises(TypeError, match="spacing"):
    jnp.gradient(f, 1.0, 2.0, 3.0)


def test_gradient_is_jitted_as_jax():
  # JAX's gradient is jitted: eager values are XLA's compiled ones (bits from JAX 0.10.2,
  # which differ from NumPy's in the last place at [3] and [4]), equal under jit
  f = np.array([1.79, 0.44, 0.1, -1.86, -0.28, -0.35])
  h = np.array([0.25, 0.89, 1.12, 1.78, 2.63, 3.11])
  want = np.array([float.fromhex(v) for v in (
      "-0x1.0e00000000000p+1", "-0x1.a525bdbaa89e9p+0", "-0x1.dd1aab1753668p+0",
      "-0x1.b7eb659e06d4cp-1", "0x1.27c1fbba48b89p-1", "-0x1.2aaaaaaaaaaa7p-3")])
  np.testing.assert_array_equal(jnp.gradient(f, h), want)
  np.testing.assert_array_equal(nbjax.jit(jnp.gradient)(f, h), want)
  jaxpr = nbjax.make_jaxpr(lambda v: jnp.gradient(v, 2.0))(np.arange(3.0))
  assert [e.primitive.name for e in jaxpr.eqns] == ["jit"]
  assert jaxpr.eqns[0].params["name"] == "gradient"
  assert jnp.gradient(np.ones((5, 6)), axis=()) == []
  with pytest.raises(ValueError, match="Spacing arrays must be 1D arrays or scalars."):
    jnp.gradient(np.ones((5, 6)), np.ones((5, 1)))
  with pytest.raises(ValueError, match="Spacing arrays must have the same length as the "
                     "dimension along which the gradient is calculated."):
    jnp.gradient(np.ones((5, 6)), np.ones(4), axis=0)
  with pytest.raises(ValueError, match="at least 2 elements are required"):
    jnp.gradient(np.ones((1, 5)))


def test_unwrap():
  p = np.cumsum(RNG.uniform(-3, 3, (3, 20)), axis=1)
  wrapped = np.angle(np.exp(1j * p))
  check(jnp.unwrap(wrapped), np.unwrap(wrapped))
  check(jnp.unwrap(wrapped.T, axis=0), np.unwrap(wrapped.T, axis=0))
  check(jnp.unwrap(wrapped, discont=4.0), np.unwrap(wrapped, discont=4.0))
  q = np.array([1., 5, 2, 7, 0, 3])
  check(jnp.unwrap(q, period=6), np.unwrap(q, period=6.0))
  check(jnp.unwrap(np.zeros((2, 0))), np.zeros((2, 0)))
  with pytest.raises(ValueError, match="complex"):
    jnp.unwrap(np.ones(3, complex))


def test_interp():
  xp = np.sort(RNG.uniform(-5, 5, 12))
  fp = RNG.standard_normal(12)
  x = RNG.uniform(-7, 7, (4, 9))
  x[0, :3] = xp[:3]  # exact knots
  check(jnp.interp(x, xp, fp), np.interp(x, xp, fp))
  check(jnp.interp(x, xp, fp, left=-1.0, right=2), np.interp(x, xp, fp, left=-1.0, right=2))
  check(jnp.interp(x, xp, fp, period=3.0), np.interp(x, xp, fp, period=3.0))
  got = jnp.interp(x, xp, fp, left="extrapolate", right="extrapolate")
  lo, hi = x < xp[0], x > xp[-1]
  want = np.interp(x, xp, fp)
  want[lo] = fp[0] + (x[lo] - xp[0]) * (fp[1] - fp[0]) / (xp[1] - xp[0])
  want[hi] = fp[-1] + (x[hi] - xp[-1]) * (fp[-1] - fp[-2]) / (xp[-1] - xp[-2])
  check(got, want, rtol=1e-10)
  fc = fp + 1j * RNG.standard_normal(12)
  check(jnp.interp(x, xp, fc), np.interp(x, xp, fc))
  check(jnp.interp(np.arange(4), np.arange(3), np.array([1, 5, 2])),
        np.interp(np.arange(4), np.arange(3), np.array([1, 5, 2])))
  assert jnp.interp(x.astype(np.float32), xp.astype(np.float32),
                    fp.astype(np.float32)).dtype == np.float32
  # repeated xp: no NaN, left value as NumPy
  check(jnp.interp(np.array([0.5, 1.0, 1.5]), np.array([0., 1, 1, 2]), np.array([0., 1, 3, 4])),
        np.interp(np.array([0.5, 1.0, 1.5]), np.array([0., 1, 1, 2]), np.array([0., 1, 3, 4])))
  with pytest.raises(ValueError, match="one-dimensional"):
    jnp.interp(x, np.ones((2, 2)), np.ones((2, 2)))
  with pytest.raises(ValueError, match="one-dimensional arrays of equal size"):
    jnp.interp(x, xp, fp[:-1])
  with pytest.raises(ValueError, match="extrapolate"):
    jnp.interp(x, xp, fp, left="nearest")


def test_interp_vmap_jvp():
  xp = np.linspace(0, 1, 8)
  fps = RNG.standard_normal((5, 8))
  x = RNG.uniform(-0.2, 1.2, 6)
  got = nbjax.vmap(lambda f: jnp.interp(jnp.asarray(x), xp, f))(jnp.asarray(fps))
  check(got, np.stack([np.interp(x, xp, f) for f in fps]))
  got = nbjax.vmap(lambda v: jnp.interp(v, xp, fps[0]))(jnp.asarray(x))
  check(got, np.interp(x, xp, fps[0]))
  jvp_matches(lambda v: jnp.interp(v, xp, fps[0]), np.array([0.05, 0.3, 0.61, 0.99]))
  jvp_matches(lambda f: jnp.interp(jnp.asarray(x), xp, f), fps[1])

# ----------------------------------------------------------------- polynomials


def test_polyval():
  p = RNG.standard_normal(6)
  x = RNG.standard_normal((3, 4))
  check(jnp.polyval(p, x), np.polyval(p, x))
  check(jnp.polyval(np.array([1, 2, 3]), np.array([0, 1, 2])), np.array([3, 6, 11]))  # JAX: ints
  check(jnp.polyval(p, 2.0), np.polyval(p, 2.0))
  check(jnp.polyval(np.zeros(0), x), np.zeros_like(x))
  assert jnp.polyval(p.astype(np.float32), x.astype(np.float32)).dtype == np.float32
  got = nbjax.vmap(jnp.polyval, in_axes=(None, 0))(jnp.asarray(p), jnp.asarray(x))
  check(got, np.stack([np.polyval(p, r) for r in x]))
  ps = RNG.standard_normal((4, 6))
  got = nbjax.vmap(jnp.polyval, in_axes=(0, None))(jnp.asarray(ps), jnp.asarray(x[0]))
  check(got, np.stack([np.polyval(q, x[0]) for q in ps]))
  jvp_matches(lambda v: jnp.polyval(p, v), x)
  jvp_matches(lambda q: jnp.polyval(q, x), p)
  with pytest.raises(TypeError):
    jnp.polyval([1, 2], 3.0)


def test_polyadd_polysub_polymul():
  a, b = np.array([1, 2, 3]), np.array([4, 5])
  for x, y in ((a, b), (b, a), (a, a)):
    check(jnp.polyadd(x, y), np.polyadd(x, y))
    check(jnp.polysub(x, y), np.polysub(x, y))
    check(jnp.polymul(x, y), np.polymul(x, y).astype(float))
  fa, fb = RNG.standard_normal(5), RNG.standard_normal(3) + 1j
  check(jnp.polymul(fa, fb), np.polymul(fa, fb))
  check(jnp.polyadd(fa.astype(np.float32), fa.astype(np.float32)), 2 * fa.astype(np.float32))
  x, y = np.array([0., 0, 2, 1]), np.array([0, 5., 0, 3])
  check(jnp.polymul(x, y), np.convolve(x, y))
  check(jnp.polymul(x, y, trim_leading_zeros=True), np.polymul(x, y))
  check(jnp.polyadd(np.ones((1, 3)), np.ones((2, 3))), np.array([[1, 1, 1], [2, 2, 2.]]))


def test_polyder_polyint():
  p = RNG.standard_normal(6)
  for m in range(4):
    check(jnp.polyder(p, m), np.polyder(p, m))
    check(jnp.polyint(p, m), np.polyint(p, m), rtol=1e-12)
  check(jnp.polyder(np.array([2, -5, 3, -1])), np.array([6., -10, 3]))
  check(jnp.polyint(p, 3, k=np.array([1., 2, 3])), np.polyint(p, 3, k=[1., 2, 3]))
  check(jnp.polyint(p, 2, k=4.0), np.polyint(p, 2, k=4.0))
  check(jnp.polyint(np.array([12, 12, 6]), 2, k=np.array([4, 5])), np.array([1., 2, 3, 4, 5]))
  with pytest.raises(ValueError, match="positive"):
    jnp.polyder(p, -1)
  with pytest.raises(ValueError, match="positive"):
    jnp.polyint(p, -1)
  with pytest.raises(ValueError, match="length 1 or m"):
    jnp.polyint(p, 2, k=np.ones(3))


def test_poly():
  z = RNG.standard_normal(5)
  check(jnp.poly(z), np.poly(z))
  check(jnp.poly(np.array([1, 2, 3])), np.array([1., -6, 11, -6]))
  zc = np.array([2, 1 + 2j, 1 - 2j])
  check(jnp.poly(zc), np.poly(zc).astype(complex))
  check(jnp.poly(np.zeros(0)), np.ones(()))
  check(jnp.poly(2.0), np.array([1., -2]))
  a = RNG.standard_normal((4, 4))
  check(jnp.poly(a), np.poly(a).astype(complex), rtol=1e-10, atol=1e-12)  # JAX: complex
  with pytest.raises(ValueError, match="square"):
    jnp.poly(np.ones((2, 3)))

# ----------------------------------------------------------------- convolutions


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("na,nv", [(7, 3), (3, 7), (5, 5), (6, 1), (1, 4), (8, 4)])
def test_convolve_correlate(mode, na, nv):
  a, v = RNG.standard_normal(na), RNG.standard_normal(nv)
  check(jnp.convolve(a, v, mode), np.convolve(a, v, mode))
  check(jnp.correlate(a, v, mode), np.correlate(a, v, mode))
  ac, vc = a + 1j * RNG.standard_normal(na), v - 1j * RNG.standard_normal(nv)
  check(jnp.convolve(ac, vc, mode), np.convolve(ac, vc, mode))
  check(jnp.correlate(ac, vc, mode), np.correlate(ac, vc, mode))
  ai, vi = (a * 10).astype(np.int32), (v * 10).astype(np.int32)
  # JAX 0.10: inexact, int32 -> float32
  check(jnp.convolve(ai, vi, mode), np.convolve(ai, vi, mode).astype(np.float32))
  check(jnp.convolve(ai, vi, mode, preferred_element_type=np.int32), np.convolve(ai, vi, mode),
        dtype=np.int32)


def test_convolve_errors_and_transforms():
  assert jnp.correlate(np.ones(3), np.ones(2)).shape == (2,)  # default mode 'valid'
  with pytest.raises(ValueError, match="1-dimensional"):
    jnp.convolve(np.ones((2, 2)), np.ones(2))
  with pytest.raises(ValueError, match="empty"):
    jnp.convolve(np.ones(0), np.ones(2))
  with pytest.raises(ValueError, match="mode"):
    jnp.convolve(np.ones(3), np.ones(2), mode="bad")
  a, v = RNG.standard_normal((4, 9)), RNG.standard_normal(3)
  got = nbjax.vmap(lambda r: jnp.convolve(r, v, "same"))(jnp.asarray(a))
  check(got, np.stack([np.convolve(r, v, "same") for r in a]))
  got = nbjax.jit(lambda x, y: jnp.correlate(x, y, "full"))(a[0], v)
  check(got, np.correlate(a[0], v, "full"))
  jvp_matches(lambda x: jnp.convolve(x, v), a[0])

# ----------------------------------------------------------------- integers


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32,
                                   np.uint64])
def test_gcd_lcm(dtype):
  info = np.iinfo(dtype)
  lo = max(info.min + 1, -1000)
  a = RNG.integers(lo, min(info.max, 1000), 50).astype(dtype)
  b = RNG.integers(lo, min(info.max, 1000), 50).astype(dtype)
  a[:3], b[:3] = 0, [0, 5, 0]
  check(jnp.gcd(a, b), np.gcd(a, b))
  small = (a % 11).astype(dtype), (b % 11).astype(dtype)
  check(jnp.lcm(*small), np.lcm(*small))


def test_gcd_worst_case_and_errors():
  fib = [1, 1]
  while fib[-1] < 2 ** 62:
    fib.append(fib[-1] + fib[-2])
  a, b = np.array(fib[-1], np.int64), np.array(fib[-2], np.int64)
  check(jnp.gcd(a, b), np.gcd(a, b))
  check(jnp.gcd(np.int64(fib[-4] * 3), np.int64(fib[-5] * 3)), np.array(3))
  f8 = [n for n in fib if n < 128]
  check(jnp.gcd(np.int8(f8[-1]), np.int8(f8[-2])), np.int8(1))
  check(jnp.gcd(np.array([12, 18]), 8), np.array([4, 2]))
  with pytest.raises(ValueError, match="must be integers"):  # JAX: bool is not an integer
    jnp.gcd(np.array([True, False]), np.array([True, True]))
  check(nbjax.jit(jnp.lcm)(np.array([4, 6, 0]), 6), np.array([12, 6, 0]))
  with pytest.raises(ValueError, match="integers"):
    jnp.gcd(1.0, 2)
  with pytest.raises(ValueError, match="integers"):
    jnp.lcm(np.ones(2), np.ones(2))

# ----------------------------------------------------------------- floating point

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 0.75, 2.0, -3.0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_frexp(dtype):
  fi = np.finfo(dtype)
  x = np.concatenate([SPECIAL, [fi.max, -fi.max, fi.tiny, fi.smallest_subnormal,
                                -fi.smallest_subnormal, fi.tiny * 0.75, fi.eps,
                                1 - fi.epsneg, 1 + fi.eps]]).astype(dtype)
  r = RNG.standard_normal(200) * np.exp2(RNG.integers(fi.minexp - fi.nmant, fi.maxexp, 200))
  x = np.concatenate([x, r.astype(dtype)])
  m, e = jnp.frexp(x)
  wm, we = np.frexp(x)
  check(m, wm, dtype=dtype)
  check(e, we, dtype=np.int32)
  np.testing.assert_array_equal(np.signbit(np.asarray(m)), np.signbit(wm))
  with pytest.raises(TypeError, match="complex"):
    jnp.frexp(np.ones(2, complex))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_ldexp(dtype):
  fi = np.finfo(dtype)
  x = np.array(SPECIAL + [fi.max, fi.tiny, fi.smallest_subnormal, 1.5, 1 + fi.eps], dtype)
  span = fi.maxexp - fi.minexp + fi.nmant + 3
  for k in (0, 1, -1, fi.maxexp, -fi.maxexp, fi.minexp - fi.nmant, span, -span, 10 ** 6):
    with np.errstate(over="ignore", under="ignore"):
      check(jnp.ldexp(x, k), np.ldexp(x, k), dtype=dtype)
  m = (RNG.uniform(0.5, 1, 300) * RNG.choice([-1, 1], 300)).astype(dtype)
  e = RNG.integers(-span, span, 300)
  with np.errstate(over="ignore", under="ignore"):
    check(jnp.ldexp(m, e), np.ldexp(m, e), dtype=dtype)
  check(jnp.ldexp(np.array([3, 1]), np.array([2, -1])), np.array([12., 0.5]))
  check(jnp.ldexp(*jnp.frexp(x)), x, dtype=dtype)
  with pytest.raises(ValueError, match="ldexp"):
    jnp.ldexp(1.0, 2.0)
  with pytest.raises(ValueError, match="ldexp"):
    jnp.ldexp(np.ones(2, complex), 1)


def test_frexp_ldexp_transforms():
  x = np.array([3.0, -0.3, 1e300, 1e-300, 0.0, 7.5])
  f = lambda v: jnp.ldexp(*jnp.frexp(v))  # noqa: E731
  jitted = nbjax.jit(jnp.frexp)(x)
  check(jitted[0], np.frexp(x)[0])
  check(jitted[1], np.frexp(x)[1], dtype=np.int32)
  check(nbjax.jit(f)(x), x)
  check(nbjax.jit(jnp.ldexp)(x, np.array([1, -2, 3, -4, 5, 100])),
        np.ldexp(x, [1, -2, 3, -4, 5, 100]))
  check(nbjax.vmap(f)(jnp.asarray(x)), x)
  _, t = nbjax.jvp(lambda v: jnp.ldexp(v, 3), (jnp.asarray(x),), (jnp.ones(6),))
  check(t, np.full(6, 8.0))


def test_modf_spacing():
  x = np.concatenate([RNG.standard_normal(20) * 100, [0.0, -0.0, 2.0, -2.5, 1e20, np.nan]])
  for got, want in zip(jnp.modf(x), np.modf(x)):
    check(got, want)
  for got, want in zip(jnp.modf(np.arange(-3, 3)), np.modf(np.arange(-3, 3))):
    check(got, want)
  assert jnp.modf(x.astype(np.float32))[0].dtype == np.float32
  for dtype in (np.float64, np.float32):  # float16: test_spacing_as_jax
    fi = np.finfo(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
      y = np.concatenate([x, [np.inf, -np.inf, fi.max, fi.tiny, fi.smallest_subnormal]])
      y = y.astype(dtype)
      want = np.where(np.signbit(y), -1, 1).astype(dtype) * np.abs(np.spacing(y))
      check(jnp.spacing(y), want, dtype=dtype)  # signed as x, -0.0 included (JAX)
  check(jnp.spacing(np.array([1, 2])), np.spacing(np.array([1., 2])))
  with pytest.raises(ValueError, match="complex"):
    jnp.spacing(np.ones(2, complex))



@pytest.mark.parametrize("jit", [False, True])
def test_spacing_as_jax(jit):
  """JAX 0.10.2's values (x64): float16 steps towards +inf (negative x give positive
  spacing, -inf gives inf); float32/64 step away from zero, -0.0 included, and under jit
  (denormals flushed) the smallest subnormal is kept."""
  f = nbjax.jit(jnp.spacing) if jit else jnp.spacing
  x = np.array([0., -0., np.inf, -np.inf, np.nan, 1., -1., 5e-324, -5e-324])
  np.testing.assert_array_equal(np.asarray(f(x.astype(np.float16))), np.array(
      [5.960e-08, 5.960e-08, np.nan, np.inf, np.nan, 9.766e-04, 4.883e-04, 5.960e-08,
       5.960e-08], np.float16))
  np.testing.assert_array_equal(np.asarray(f(x.astype(np.float32))), np.array(
      [1.4012985e-45, -1.4012985e-45, np.nan, np.nan, np.nan, 1.1920929e-07, -1.1920929e-07,
       1.4012985e-45, -1.4012985e-45], np.float32))
  np.testing.assert_array_equal(np.asarray(f(x)), np.array(
      [5e-324, -5e-324, np.nan, np.nan, np.nan, 2.220446049250313e-16,
       -2.220446049250313e-16, 5e-324, -5e-324]))
  np.testing.assert_array_equal(np.asarray(f(np.array([0, 1, -3], np.int32))),
                                np.array([1.4012985e-45, 1.1920929e-07, -2.3841858e-07],
                                         np.float32))


def test_heaviside_nan_as_jax():
  got = jnp.heaviside(jnp.array([np.nan, -1., 0., 2.]), jnp.array([0.5, np.nan, np.nan, np.nan]))
  np.testing.assert_array_equal(np.asarray(got), [np.nan, 0., np.nan, 1.])


# ----------------------------------------------------------------- special functions, windows


def test_i0():
  x = np.concatenate([np.linspace(-30, 30, 601), [0.0, 8.0, 8.0 + 1e-12, 100.0, 700.0, 1e-8]])
  got = np.asarray(jnp.i0(x))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, np.i0(x), rtol=1e-14)
  np.testing.assert_allclose(got, scipy.special.i0(x), rtol=2e-14)
  with np.errstate(over="ignore"):
    check(jnp.i0(x.astype(np.float32)), np.i0(x).astype(np.float32), rtol=1e-5)
    assert np.isinf(np.asarray(jnp.i0(800.0)))
  check(jnp.i0(np.arange(4)), np.i0(np.arange(4.)), rtol=1e-14)
  _, t = nbjax.jvp(jnp.i0, (jnp.asarray(x[::20]),), (jnp.ones(len(x[::20])),))
  np.testing.assert_allclose(np.asarray(t), scipy.special.i1(x[::20]), rtol=1e-11, atol=1e-14)
  with pytest.raises(ValueError, match="i0"):
    jnp.i0(np.ones(2, complex))


@pytest.mark.parametrize("M", [0, 1, 2, 5, 16, 33])
def test_windows(M):
  for name in ("hamming", "hanning", "blackman", "bartlett"):
    check(getattr(jnp, name)(M), getattr(np, name)(M), atol=1e-15)
  for beta in (0.0, 3.5, 14.0):
    check(jnp.kaiser(M, beta), np.kaiser(M, beta), rtol=1e-13, atol=1e-15)

# ----------------------------------------------------------------- construction


def test_piecewise():
  x = np.linspace(-3, 3, 13)
  conds = [x < -1, (x >= -1) & (x < 1), x >= 0]  # overlapping: the last true one wins
  funcs = [lambda v, s, off: -v * s, 7.0, lambda v, s, off: s * v ** 2 + off]
  check(jnp.piecewise(x, conds, funcs, 2.0, off=1.0),
        np.piecewise(x, conds, funcs, 2.0, off=1.0))
  funcs = [lambda v: -v, 7.0, lambda v: v * 0 + 5]
  check(jnp.piecewise(x, conds[:2], funcs), np.piecewise(x, conds[:2], funcs))
  with pytest.raises(ValueError, match="with 13 condition\\(s\\), either 13 or 14"):
    jnp.piecewise(x, x > 0, [1.0, -1.0])  # (NumPy's one-condition array: not JAX's)
  xi = np.arange(-3, 4)
  f = [lambda v: v * 2.5]  # values cast to x's int dtype, as NumPy
  check(jnp.piecewise(xi, [xi < 0], f), np.piecewise(xi, [xi < 0], f))
  f = [1.0, 2.0, 3.0]
  check(jnp.piecewise(2.0, [True, False], f), np.piecewise(2.0, [True, False], f))
  got = nbjax.vmap(lambda v: jnp.piecewise(v, [v < 0], [lambda u: -u, lambda u: u]))(
      jnp.asarray(x))
  check(got, np.abs(x))
  with pytest.raises(ValueError, match="functions are expected"):
    jnp.piecewise(x, conds, [1.0])


def test_piecewise_is_a_vectorized_switch_jitted_on_its_functions():
  """JAX's piecewise: each function sees one element (a vectorized lax.switch), a condition
  array may hold one boolean per function, and calling it again with the same functions does
  not retrace them (lax_numpy_test testPiecewiseRecompile). Values from JAX 0.10.2."""
  x = jnp.arange(-2., 3.)
  check(jnp.piecewise(x, [x < 0], [lambda v: v - v.mean(), 7.]), np.array([0., 0., 7., 7., 7.]))
  check(jnp.piecewise(x, jnp.array([False, True, False]),
                      [lambda v: v * 0, lambda v: v * 10, lambda v: v * 100]),
        np.array([-20., -10., 0., 10., 20.]))
  check(jnp.piecewise(x, [True, False], [1., 2.]), np.ones(5))
  with pytest.raises(TypeError, match="switch branches must have equal output types"):
    jnp.piecewise(x, [x < 0], [lambda v: jnp.ones(2), 1])

  def g(v):
    g.num_traces += 1
    return v
  g.num_traces = 0
  for _ in range(5):
    jnp.piecewise(x, [x < 0], [g, 0.])
  assert g.num_traces == 1


def test_fromfunction():
  f = lambda i, j: i * 10 + j  # noqa: E731
  check(jnp.fromfunction(f, (3, 4)), np.fromfunction(f, (3, 4)))
  check(jnp.fromfunction(f, (3, 4), dtype=int), np.fromfunction(f, (3, 4), dtype=int))
  check(jnp.fromfunction(lambda i, s: i * s, (5,), s=2.0), np.arange(5) * 2.0)
  g = lambda i, j, k: i + j * k  # noqa: E731
  check(jnp.fromfunction(g, (2, 3, 4)), np.fromfunction(g, (2, 3, 4)))


def test_from_dlpack():
  x = RNG.standard_normal((2, 3)).astype(np.float32)
  check(jnp.from_dlpack(x), x)
  y = jnp.asarray(x)
  check(jnp.from_dlpack(y), x)


def test_jit_matches_eager():
  y = RNG.standard_normal((4, 5))
  xp, fp = np.linspace(0, 1, 5), RNG.standard_normal(5)
  fns = [lambda a: jnp.cross(a[:, :3], a[:, 2:]), lambda a: jnp.trapezoid(a, axis=0),
         lambda a: jnp.interp(a, xp, fp), lambda a: jnp.polyval(a[0], a[1:]),
         lambda a: jnp.gradient(a)[1], lambda a: jnp.unwrap(a * 3), lambda a: jnp.i0(a * 10),
         lambda a: jnp.spacing(a), lambda a: jnp.modf(a * 10)[0],
         lambda a: jnp.piecewise(a, [a > 0], [lambda v: v * 2, 0.5])]
  for f in fns:
    check(nbjax.jit(f)(y), f(jnp.asarray(y)), rtol=1e-13)
  assert "pow" in str(nbjax.make_jaxpr(jnp.ldexp)(1.0, 3))
