"""nbjax.scipy.special's Bessel J_n, Dawson, Faddeeva, Fresnel, exponential and trigonometric
integrals, Spence, Owen's T, hypergeometric functions and spherical harmonics: values against
SciPy (float32 and float64, over ranges and at the region boundaries), eager against jit, vmap
against a loop, derivatives against central differences, and JAX 0.10.2's dtypes, conventions
and errors."""
import numpy as np
import pytest
from scipy import special as sp

import nbjax
from nbjax import numpy as jnp
from nbjax.scipy import special as S

RNG = np.random.default_rng(7)
U = RNG.uniform


def _check(got, want, dtype, rtol, atol=0.0):
  got = np.asarray(got)
  assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def _cat(*parts):
  return np.concatenate([np.atleast_1d(np.asarray(p, np.float64)) for p in parts])


# (name, arguments, SciPy reference, (rtol, atol) for float32, (rtol, atol) for float64)
DAWSN_X = _cat(U(-10, 10, 40), [0.0, 3.25, -3.25, 6.25, -6.25, 1e-20, 50.0, 1e10, np.inf,
                                -np.inf, np.nan])
EXPI_X = _cat(U(-40, 40, 30), U(-3, 3, 20), [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 65.0, -1e-3,
                                             1e-10, 700.0, 1e-300])
SPENCE_X = _cat(U(0, 5, 30), U(5, 100, 10), [0.0, 0.5, 1.0, 1.5, 2.0, 1e-300, 1e10, -1.0,
                                             np.nan])
SICI_X = _cat(U(-20, 20, 40), [0.0, 4.0, 8.0, -8.0, 1e9, 2e9, 1e-300, np.inf, np.nan])
FRESNEL_X = _cat(U(-10, 10, 40), [0.0, 1.6, 1.6008, -1.6, 36974.0, 36975.0, 1e5, np.inf,
                                  -np.inf, np.nan])
UNARY = [
    ("dawsn", DAWSN_X, (2e-6, 1e-30), (1e-14, 0)),
    ("expi", EXPI_X, (2e-6, 1e-30), (1e-13, 0)),
    ("spence", SPENCE_X, (2e-6, 1e-30), (1e-14, 0)),
    ("sici", SICI_X, (2e-6, 2e-7), (1e-14, 1e-16)),
    ("fresnel", FRESNEL_X, (5e-6, 1e-5), (1e-14, 1e-16)),  # (fresnlf: 1/2 past 36974)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,x,tol32,tol64", UNARY, ids=[u[0] for u in UNARY])
def test_unary_vs_scipy(name, x, tol32, tol64, dtype):
  x = x.astype(dtype)
  got, want = getattr(S, name)(x), getattr(sp, name)(x.astype(np.float64))
  with np.errstate(over="ignore"):  # (beyond float32's range: inf, as the result)
    want = tuple(np.asarray(w).astype(dtype) for w in want) if isinstance(want, tuple) else (
        np.asarray(want).astype(dtype))
  rtol, atol = tol32 if dtype == np.float32 else tol64
  if name == "sici":  # JAX's Ci is Ci(|x|) (SciPy's real part), NaN at -inf
    want = (want[0], np.where(x == -np.inf, np.nan, want[1]))
  if name == "expi":  # JAX's: NaN at 0 (also where float32 rounds 1e-300 to 0)
    want = np.where(x == 0, np.nan, want)
  for g, w in zip(got, want) if isinstance(got, tuple) else [(got, want)]:
    _check(g, w, dtype, rtol, atol)


def test_wofz_vs_scipy():
  re, im = U(-6, 6, (2, 60))
  z = _cat(re) + 1j * _cat(im)
  z = np.concatenate([z, [0j, 1j, -1j, 1 + 0j, -3 + 0j, 1e-10j, 30 + 30j, -5 - 5j, 100j,
                          0.5 - 7j]])
  want = sp.wofz(z)
  # Weideman's expansion: about 3e-13 relative (float64), as JAX's
  for ct, rtol in ((np.complex128, 1e-12), (np.complex64, 1e-5)):
    got = np.asarray(S.wofz(z.astype(ct)))
    assert got.dtype == ct
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3)
  # real input is taken as complex
  assert S.wofz(1.0).dtype == np.complex128 and S.wofz(np.float32(1)).dtype == np.complex64
  np.testing.assert_allclose(S.wofz(np.array([0.5, -2.0])), sp.wofz([0.5, -2.0]), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_expn_vs_scipy(dtype):
  n = _cat(RNG.integers(0, 30, 60), [1, 2, 3, 0, 0, 5000, 6000, 1, 2, 7])
  x = _cat(U(1e-3, 1, 20), U(1, 40, 20), U(0, 3, 20), [0.5, 2.0, 1.0, 0.3, 2.0, 2.0, 0.5,
                                                       1e-5, 1.0000001, 0.9999])
  want = sp.expn(n.astype(int), x.astype(dtype).astype(np.float64))
  rtol = 2e-6 if dtype == np.float32 else 1e-14
  _check(S.expn(n.astype(dtype), x.astype(dtype)), want, dtype, rtol, 1e-37)
  # the edges: x = 0 (1/(n - 1) for n >= 2), x = inf, n = 0, negative x
  n = np.array([0.0, 1.0, 2.0, 3.0, 2.0, 0.0, 0.0, 3.0])
  x = np.array([0.0, 0.0, 0.0, 0.0, np.inf, 2.0, 0.3, -1.0])
  _check(S.expn(n, x), [np.inf, np.inf, 1.0, 0.5, 0.0, sp.expn(0, 2.0), sp.expn(0, 0.3),
                        np.nan], np.float64, 1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_owens_t_vs_scipy(dtype):
  h = _cat(U(-5, 5, 60), [0.0, 1.0, 0.0, 2.0, 1.0, 3.0, 0.5, 0.1, np.nan, 1.0])
  a = _cat(U(-5, 5, 60), [0.5, 0.0, 1.0, -1.0, -1.0, 30.0, 1.5, -20.0, 1.0, np.nan])
  want = sp.owens_t(h.astype(dtype).astype(np.float64), a.astype(dtype).astype(np.float64))
  # (the float64 quadrature constants make the result float64 for any input, as JAX's)
  got = S.owens_t(h.astype(dtype), a.astype(dtype))
  _check(got, want, np.float64, 2e-6 if dtype == np.float32 else 1e-13, 1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hyp1f1_vs_scipy(dtype):
  a = _cat(U(-3, 3, 40), U(0.1, 4, 20), [0.5, 1.0, 2.0, 3.0, -2.0])
  b = _cat(U(0.5, 6, 40), U(0.1, 4, 20), [1.5, 1.0, 3.0, 4.0, 3.0])
  x = _cat(U(-8, 20, 40), U(100, 200, 20), [-3.0, 1.0, 0.0, 120.0, 5.0])
  args = [v.astype(dtype) for v in (a, b, x)]
  with np.errstate(over="ignore"):  # (e^x past float32's range: inf, as the result)
    want = sp.hyp1f1(*(v.astype(np.float64) for v in args)).astype(dtype)
  # (the series cancels for negative x: relative accuracy there is JAX's, about 1e-11)
  _check(S.hyp1f1(*args), want, dtype, 2e-4 if dtype == np.float32 else 1e-10)
  # JAX's conventions: 1 at a = 0 (also a = b = 0), exp(x) at a = b, inf at b = 0
  _check(S.hyp1f1(np.array([0.0, 0.0, 2.0, 1.5]), np.array([0.0, 3.0, 2.0, 0.0]), 2.0),
         [1.0, 1.0, np.exp(2.0), np.inf], np.float64, 1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hyp2f1_vs_scipy(dtype):
  a = _cat(U(-3, 3, 30), U(0.1, 2, 12), [0.0, -2.0, -3.0, 1.0, 0.5, 1.0, 1.0, 1.5, -1.0, 2.0])
  b = _cat(U(-3, 3, 30), U(0.1, 2, 12), [1.0, 1.0, 2.5, 2.0, 0.5, 2.0, 1.0, 2.5, 2.0, 2.0])
  c = _cat(U(0.5, 5, 30), U(0.1, 2, 12), [3.0, 2.0, 4.0, 2.0, 2.0, 5.0, 4.0, 5.0, 3.0, 4.0])
  x = _cat(U(-1, 0.9, 30), U(0.9, 0.99, 12), [0.5, 0.3, 0.5, 0.0, 0.95, 1.0, 0.999, 1.0, 0.5,
                                              0.5])
  c[30:42] = a[30:42] + b[30:42] + RNG.integers(-2, 3, 12)  # c - a - b integral near x = 1
  c[30:42] = np.where(c[30:42] <= 0.1, c[30:42] + 4, c[30:42])
  args = [v.astype(dtype) for v in (a, b, c, x)]
  want = sp.hyp2f1(*(v.astype(np.float64) for v in args))
  _check(S.hyp2f1(*args), want, dtype, 5e-4 if dtype == np.float32 else 1e-11)
  # JAX's cases: inf for x > 1, at non-positive integers c (even where SciPy's polynomial is
  # finite: 2F1(-3, 2.5; -4; 1/2)) and at x = 1 with c - a - b <= 0; 1 for a = 0
  _check(S.hyp2f1(np.array([1.0, 1.0, -3.0, 1.0, 0.0]), np.array([1.0, 1.0, 2.5, 2.0, 1.0]),
                  np.array([2.0, -2.0, -4.0, 3.0, 1.0]), np.array([1.5, 0.5, 0.5, 1.0, 0.7])),
         [np.inf, np.inf, np.inf, np.inf, 1.0], np.float64, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bessel_jn_vs_scipy(dtype):
  # below 1e-3 the recurrence would overflow: float32 everywhere near 1, float64 below 1e-5
  z = _cat(U(-18, 18, 40), [0.0, 1e-3, -1e-3, 1e-8, 1e-30, 1.0, 17.0, 9e-6, 2e-5])
  got = S.bessel_jn(z.astype(dtype), v=6)
  assert got.shape == (7, z.size)
  want = sp.jv(np.arange(7)[:, None], z.astype(dtype).astype(np.float64))
  _check(got, want, dtype, 2e-4 if dtype == np.float32 else 1e-12,
         2e-6 if dtype == np.float32 else 1e-15)
  # more orders than n_iter + 1: n_iter + 1 rows, as JAX's; any z shape
  assert S.bessel_jn(np.ones((2, 3)), v=60, n_iter=30).shape == (31, 2, 3)
  assert S.bessel_jn(2.0, v=0).shape == (1,)


def test_sph_harm_y_vs_scipy():
  n = RNG.integers(0, 7, 40)
  m = np.array([RNG.integers(-k, k + 1) for k in n])
  n[:3], m[:3] = [0, 6, 6], [0, 6, -6]
  theta, phi = U(0, np.pi, 40), U(0, 2 * np.pi, 40)
  theta[:3] = [0.0, np.pi, 1e-3]
  want = sp.sph_harm_y(n, m, theta, phi)
  got = S.sph_harm_y(n, m, theta, phi)
  assert got.dtype == np.complex128 and got.shape == (40,)
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
  got32 = S.sph_harm_y(n, m, theta.astype(np.float32), phi.astype(np.float32))
  assert got32.dtype == np.complex128  # (the sign (-1)^m is float64, as JAX's)
  np.testing.assert_allclose(got32, want, rtol=1e-4, atol=2e-5)
  # a scalar theta is broadcast; degrees clip to n_max; |m| > n gives 0
  np.testing.assert_allclose(S.sph_harm_y(np.array([2, 3]), np.array([1, -1]), 0.3, 0.2),
                             sp.sph_harm_y([2, 3], [1, -1], 0.3, 0.2), rtol=1e-12)
  clipped = S.sph_harm_y(np.array([2, 9, 3]), np.array([1, 2, -4]), np.array([0.3, 0.5, 1.0]),
                         np.array([0.1, 0.2, 0.3]), n_max=4)
  np.testing.assert_allclose(clipped, [sp.sph_harm_y(2, 1, 0.3, 0.1),
                                       sp.sph_harm_y(4, 2, 0.5, 0.2), 0], rtol=1e-12)


# ----------------------------------------------------------------- transformations

F32 = np.float32
JIT_CASES = [
    ("dawsn", S.dawsn, (DAWSN_X,)),
    ("wofz", S.wofz, (U(-5, 5, 20) + 1j * U(-5, 5, 20),)),
    ("fresnel", S.fresnel, (FRESNEL_X,)),
    ("expi", S.expi, (EXPI_X,)),
    ("sici", S.sici, (SICI_X,)),
    ("spence", S.spence, (SPENCE_X,)),
    ("expn", S.expn, (np.array([0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 5000.0]),
                      np.array([0.5, 2.0, 0.1, 3.5, 1.0, 20.0, 0.5]))),
    ("owens_t", S.owens_t, (U(-4, 4, 20), U(-4, 4, 20))),
    ("hyp1f1", S.hyp1f1, (U(-2, 2, 12), U(0.5, 3, 12), U(-5, 120, 12))),
    ("hyp2f1", S.hyp2f1, (U(-2, 2, 12), U(0.2, 2, 12), U(0.5, 4, 12), U(-0.9, 0.97, 12))),
    ("bessel_jn", lambda z: S.bessel_jn(z, v=4), (U(-15, 15, 12),)),
    ("sph_harm_y", lambda t, p: S.sph_harm_y(np.array([0, 1, 2, 3, 2]),
                                             np.array([0, -1, 2, 1, 0]), t, p, n_max=3),
     (U(0.1, 3, 5), U(0, 6, 5))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,f,args", JIT_CASES, ids=[c[0] for c in JIT_CASES])
def test_eager_matches_jit(name, f, args, dtype):
  if name == "hyp2f1" and dtype == F32:
    pytest.skip("(its compile is the slowest: float64 only)")
  if name == "wofz":
    args = tuple(a.astype(np.complex64 if dtype == F32 else np.complex128) for a in args)
  else:
    args = tuple(a.astype(dtype) for a in args)
  eager, jitted = f(*args), nbjax.jit(f)(*args)
  eager = eager if isinstance(eager, tuple) else (eager,)
  jitted = jitted if isinstance(jitted, tuple) else (jitted,)
  for e, j in zip(eager, jitted):
    assert e.dtype == j.dtype and e.shape == j.shape
    # (the kernels and XLA round differently: a few ulps, more through the long sums;
    # owens_t and sph_harm_y return float64 and complex128 with float32 ingredients)
    tol = 1e-5 if dtype == F32 else 1e-13
    np.testing.assert_allclose(np.asarray(e), np.asarray(j), rtol=tol, atol=tol * 1e-6,
                               equal_nan=True)


VMAP_CASES = [c for c in JIT_CASES if c[0] not in ("sph_harm_y",)]


@pytest.mark.parametrize("name,f,args", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_matches_loop(name, f, args):
  args = tuple(a[:4] for a in args)
  got = nbjax.vmap(f)(*args)
  rows = [f(*(a[i] for a in args)) for i in range(4)]
  if isinstance(got, tuple):
    want = tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(got)))
  else:
    got, want = (got,), (np.stack([np.asarray(r) for r in rows]),)
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-13, atol=1e-300, equal_nan=True)


def test_vmap_sph_harm_y_and_expn_batched_order():
  n, m = np.array([1, 2, 3]), np.array([0, -1, 2])
  th, ph = U(0.1, 3, (3, 3)), U(0, 6, (3, 3))
  got = nbjax.vmap(lambda t, p: S.sph_harm_y(n, m, t, p, n_max=3))(th, ph)
  np.testing.assert_allclose(got, sp.sph_harm_y(n, m, th, ph), rtol=1e-12)
  # the order (not differentiable) batched under jit, the derivative in x
  ns, xs = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.5, 2.5])
  d = nbjax.jit(nbjax.vmap(nbjax.grad(S.expn, 1)))(ns, xs)
  np.testing.assert_allclose(d, -sp.expn([0, 1, 2], xs), rtol=1e-13)


def _central(f, args, i, h):
  up, dn = list(args), list(args)
  up[i], dn[i] = args[i] + h, args[i] - h
  return (f(*up) - f(*dn)) / (2 * h)


# (function of float64 scalars, arguments, argnums): JAX's derivative rules (custom for all
# but spence, bessel_jn and sph_harm_y, differentiated through)
GRAD_CASES = [
    ("dawsn", S.dawsn, (1.3,), (0,)), ("dawsn_tail", S.dawsn, (7.5,), (0,)),
    ("wofz_re", lambda x: S.wofz(x).real, (0.7,), (0,)),
    ("wofz_im", lambda x: S.wofz(x).imag, (-1.2,), (0,)),
    ("fresnel_s", lambda x: S.fresnel(x)[0], (1.3,), (0,)),
    ("fresnel_c", lambda x: S.fresnel(x)[1], (2.7,), (0,)),
    ("expi_pos", S.expi, (3.0,), (0,)), ("expi_neg", S.expi, (-0.7,), (0,)),
    ("si", lambda x: S.sici(x)[0], (2.5,), (0,)), ("ci", lambda x: S.sici(x)[1], (6.0,), (0,)),
    ("spence", S.spence, (0.3,), (0,)), ("spence_above", S.spence, (1.7,), (0,)),
    ("spence_far", S.spence, (3.5,), (0,)),
    ("expn", lambda x: S.expn(3, x), (0.7,), (0,)), ("expn_cf", lambda x: S.expn(2, x), (2.5,),
                                                     (0,)),
    ("owens_t", S.owens_t, (0.8, 0.6), (0, 1)), ("owens_t_far", S.owens_t, (0.5, 2.5), (0, 1)),
    ("hyp1f1", S.hyp1f1, (0.7, 1.6, 1.3), (0, 1, 2)),
    ("hyp2f1", S.hyp2f1, (0.7, 1.3, 2.6, 0.4), (0, 2, 3)),  # (b's rule is a's)
    ("bessel_jn", lambda z: S.bessel_jn(z, v=3)[2], (2.5,), (0,)),
    ("bessel_jn_small", lambda z: S.bessel_jn(z, v=2)[1], (1e-3,), (0,)),
    ("sph_harm_y", lambda t: S.sph_harm_y(np.array([3]), np.array([2]), t, 0.4).real[0],
     (0.9,), (0,)),
]


@pytest.mark.parametrize("name,f,args,argnums", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_vs_central_differences(name, f, args, argnums):
  for i in argnums:
    g = float(nbjax.grad(f, argnums=i)(*args))
    fd = float(_central(lambda *a: float(f(*a)), args, i, 1e-6))
    assert g == pytest.approx(fd, rel=1e-6, abs=1e-9), (i, g, fd)


def test_jvp_of_pairs_and_derivative_formulas():
  x = np.array([0.5, 2.0, 7.0])
  (s, c), (ds, dc) = nbjax.jvp(S.fresnel, (x,), (np.ones_like(x),))
  # (the argument reduced exactly: 0 where NumPy's sin(pi x^2/2) is about 1e-14)
  np.testing.assert_allclose(ds, np.sin(np.pi * x * x / 2), rtol=1e-13, atol=1e-13)
  np.testing.assert_allclose(dc, np.cos(np.pi * x * x / 2), rtol=1e-13, atol=1e-13)
  (si, ci), (dsi, dci) = nbjax.jvp(S.sici, (x,), (np.ones_like(x),))
  np.testing.assert_allclose(dsi, np.sin(x) / x, rtol=1e-13)
  np.testing.assert_allclose(dci, np.cos(x) / x, rtol=1e-13)
  z = np.array([0.5 + 0.3j, -1.0 + 2.0j])
  w, dw = nbjax.jvp(S.wofz, (z,), (np.ones_like(z),))
  np.testing.assert_allclose(dw, -2 * z * sp.wofz(z) + 2j / np.sqrt(np.pi), rtol=1e-12)
  # hyp2f1's x derivative a b / c 2F1(a+1, b+1; c+1; x)
  g = nbjax.grad(S.hyp2f1, 3)(0.5, 1.5, 2.5, 0.3)
  assert float(g) == pytest.approx(0.5 * 1.5 / 2.5 * sp.hyp2f1(1.5, 2.5, 3.5, 0.3), rel=1e-13)
  # bessel_jn's derivative at z = 0 (the exact series there): J_1'(0) = 1/2
  assert float(nbjax.grad(lambda z: S.bessel_jn(z, v=1)[1])(0.0)) == pytest.approx(0.5)


# ----------------------------------------------------------------- JAX's dtypes and errors

DTYPE_CASES = [
    (S.dawsn, 1), (S.expi, 1), (S.fresnel, 1), (S.sici, 1), (lambda x: S.expn(2, x), 1),
    (lambda x: S.hyp1f1(0.5, 1.5, x), 1), (lambda x: S.hyp2f1(0.5, 1.5, 2.5, x), 1),
    (lambda x: S.bessel_jn(x, v=2), 1), (lambda x: S.owens_t(x, 0.5), 1), (S.wofz, 1),
]


@pytest.mark.parametrize("i", range(len(DTYPE_CASES)))
def test_result_dtypes_and_weak_types(i):
  f, _ = DTYPE_CASES[i]
  for arg, want in ((0.5, np.float64), (1, np.float64), (np.float32(0.5), np.float32)):
    out = f(arg)
    for o in out if isinstance(out, tuple) else (out,):
      assert not o.weak_type  # (Python scalars give strongly typed results, as JAX's)
      if f is S.wofz:
        assert o.dtype == (np.complex64 if want == np.float32 else np.complex128)
      elif i == 8:  # owens_t: float64 constants, float64 result
        assert o.dtype == np.float64
      else:
        assert o.dtype == want, (o.dtype, want)
  assert S.spence(np.float32(0.5)).dtype == np.float32
  assert S.dawsn(np.float16(0.5)).dtype == np.float16
  assert S.fresnel(np.float16(0.5))[0].dtype == np.float16


def test_errors_as_jax():
  for f, exc, msg in [(S.dawsn, ValueError, "dawsn does not support complex"),
                      (S.expi, ValueError, "expi does not support complex"),
                      (lambda z: S.expn(1, z), ValueError, "expn does not support complex"),
                      (S.sici, ValueError, "must be real-valued"),
                      (S.fresnel, NotImplementedError, "complex-valued inputs"),
                      (lambda z: S.hyp1f1(1.0, 2.0, z), ValueError, "hyp1f1 does not support"),
                      (lambda z: S.hyp2f1(1.0, 2.0, 3.0, z), TypeError, "rem does not accept"),
                      (lambda z: S.bessel_jn(z, v=1), ValueError, "complex input not supported"),
                      (S.spence, TypeError, "not supported")]:
    with pytest.raises(exc, match=msg):
      f(1j)
  with pytest.raises(TypeError, match="x.dtype=int64 is not supported"):
    S.spence(2)
  with pytest.raises(TypeError):
    S.bessel_jn(1.0, v=2.0)
  with pytest.raises(NotImplementedError, match="diff_n"):
    S.sph_harm_y(np.array([1]), np.array([0]), np.array([0.3]), np.array([0.1]), diff_n=1)
  with pytest.raises(TypeError, match="len"):
    S.sph_harm_y(2, 1, 0.3, 0.2)
  with pytest.raises(TypeError, match="Indexer must have integer"):
    S.sph_harm_y(np.array([2.0]), np.array([1]), np.array([0.3]), np.array([0.1]))
  with pytest.raises(nbjax.errors.ConcretizationTypeError):
    nbjax.jit(S.sph_harm_y)(np.array([2]), np.array([1]), np.array([0.3]), np.array([0.1]))
  # owens_t takes complex arguments as JAX's does: T(|h|, |a|) times sign(a)
  assert S.owens_t(1j, 2.0).dtype == np.complex128
  np.testing.assert_allclose(S.owens_t(1j, 2.0), sp.owens_t(1.0, 2.0), rtol=1e-13)


def test_jax_conventions_at_special_points():
  # expi: NaN at 0 (JAX's rule for the interval beyond 64 there); sici: Ci(-inf) NaN
  assert np.isnan(float(S.expi(0.0)))
  si, ci = S.sici(np.array([-np.inf, np.inf, 0.0]))
  np.testing.assert_allclose(si, [-np.pi / 2, np.pi / 2, 0.0])
  np.testing.assert_array_equal(ci, [np.nan, 0.0, -np.inf])
  # spence: NaN below 0, pi^2/6 at 0, 0 at 1; its derivative is log(x)/(1 - x) also above 1.5
  np.testing.assert_allclose(S.spence(np.array([-1.0, 0.0, 1.0])), [np.nan, np.pi ** 2 / 6, 0])
  d = nbjax.vmap(nbjax.grad(S.spence))(np.array([0.5, 1.6, 2.0, 3.0]))
  x = np.array([0.5, 1.6, 2.0, 3.0])
  np.testing.assert_allclose(d, np.log(x) / (1 - x), rtol=1e-12)
  # dawsn, fresnel at infinity
  np.testing.assert_array_equal(S.dawsn(np.array([np.inf, -np.inf])), [0.0, -0.0])
  np.testing.assert_array_equal(S.fresnel(np.array([np.inf, -np.inf]))[1], [0.5, -0.5])
  # owens_t: exact at h = 0 and a = 1, odd in a, NaN propagates
  np.testing.assert_allclose(S.owens_t(np.array([0.0, 0.7, 0.7, 0.7]),
                                       np.array([0.5, 1.0, -2.0, np.nan])),
                             [np.arctan(0.5) / (2 * np.pi), sp.owens_t(0.7, 1.0),
                              -sp.owens_t(0.7, 2.0), np.nan], rtol=1e-13)
  # bessel_jn at z = 0 and in float32 where the plain recurrence would overflow
  np.testing.assert_array_equal(S.bessel_jn(np.array([0.0]), v=2)[:, 0], [1.0, 0.0, 0.0])
  j32 = S.bessel_jn(np.array([1.0, 0.01], np.float32), v=2)
  np.testing.assert_allclose(j32, sp.jv([[0], [1], [2]], [1.0, 0.01]), rtol=2e-6)
  assert jnp.isfinite(S.bessel_jn(np.array([1e-4, 1e-30]), v=5)).all()


def test_complex_gamma_loggamma_erfcx_as_jax():
  """JAX 0.10.2's values (x64): Lanczos with reflection; loggamma on SciPy's branch."""
  import nbjax
  from nbjax.scipy import special as jsp
  z = np.array([-0.5 + 0j, -1.5 + 0j, 0.5 + 1j, 3 + 4j, -7.3 + 0.2j, 0.1 - 5j])
  np.testing.assert_allclose(np.asarray(jsp.gamma(z)), [
      -3.54490770e+00 - 4.34125987e-16j, 2.36327180e+00 + 0.0j, 3.00694617e-01 - 4.24967879e-01j,
      5.22553847e-03 - 1.72547079e-01j, 2.26061315e-04 + 2.30654345e-04j,
      -3.80860691e-04 - 3.41117012e-04j], rtol=1e-8, atol=1e-12)
  want = [1.26551212 - 3.14159265j, 0.86004702 - 6.28318531j, -0.65279064 - 0.95500772j,
          -1.75662678 + 4.74266444j, -8.03797257 - 24.33728675j, -7.57857702 - 2.41118733j]
  np.testing.assert_allclose(np.asarray(jsp.loggamma(z)), want, rtol=1e-8)
  np.testing.assert_allclose(np.asarray(nbjax.jit(jsp.loggamma)(z)), want, rtol=1e-8)
  np.testing.assert_allclose(np.asarray(jsp.erfcx(z[2:4])), [
      3.54900333e-01 - 3.42871719e-01j, 6.97909616e-02 - 8.93400002e-02j], rtol=1e-8)
  poles = np.asarray(jsp.gamma(nbjax.numpy.array([0 + 0j, -1 + 0j, -5 + 0j])))
  assert np.all(np.isnan(poles.real)) and np.all(np.isnan(poles.imag))


def test_bessel_jn_multigammaln_without_implicit_rank_promotion():
  """JAX's tests run with jax_numpy_rank_promotion='raise': nbjax's own code must broadcast
  explicitly."""
  with nbjax.numpy_rank_promotion("raise"):
    z = np.random.RandomState(0).rand(5, 3) * 10
    np.testing.assert_allclose(np.asarray(S.bessel_jn(z, v=3)),
                               np.stack([sp.jv(k, z) for k in range(4)]), atol=1e-13)
    a = np.array([[3., 4.], [5., 6.]])
    np.testing.assert_allclose(np.asarray(S.multigammaln(a, 3)), sp.multigammaln(a, 3))
    assert float(S.multigammaln(4., 2)) == pytest.approx(sp.multigammaln(4., 2))


def test_complex_gamma_and_ndtri_under_strict_promotion_and_debug_infs():
  # JAX lax_scipy_special_functions_test testComplexGammaBranchCut (run under strict dtype
  # promotion, as JAX's test base class) and testNdtriDebugInfs (no intermediate inf)
  import scipy.special as osp
  from nbjax.scipy import special as sp
  z = np.array([-0.5 + 0j, -1.5 + 0j, 0.5 + 1j, 0.5 - 1j, -2.5 + 1e-12j, -2.5 - 1e-12j])
  with nbjax.numpy_dtype_promotion("strict"):
    np.testing.assert_allclose(sp.gamma(z), osp.gamma(z), rtol=1e-5, atol=1e-5)
  for f in (sp.ndtri, nbjax.jit(sp.ndtri)):
    with nbjax.debug_infs(True):
      assert float(f(0.5)) == 0.0
      for v in (0.0, 1.0):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\)"):
          f(v)


def test_lgamma_float32_is_xlas_bit_for_bit():
  # the eager float32/float16 lgamma is a port of XLA's float32 Lanczos expansion: eager equals
  # jit (as in JAX, where both are XLA), reflection, poles and infinities included (JAX
  # lax_test testOp lgamma compares them at 1e-6)
  rng = np.random.default_rng(3)
  x = np.concatenate([rng.uniform(0.5, 10, 20000), rng.uniform(-10, 0.5, 10000),
                      rng.uniform(0, 1e6, 5000), [0.0, -0.0, 1.0, 2.0, -1.0, -2.5, np.inf,
                                                  -np.inf, np.nan, 1e-30, 3e38]])
  for dt in (np.float32, np.float16):
    v = x.astype(dt)
    got, want = np.asarray(nbjax.lax.lgamma(v)), np.asarray(nbjax.jit(nbjax.lax.lgamma)(v))
    up = ~(v < 0.5)  # (below 1/2 the reflection's sin is libm's, not XLA's: an ulp at most)
    np.testing.assert_array_equal(got[up], want[up])
    np.testing.assert_array_max_ulp(got[~up & np.isfinite(want)], want[~up & np.isfinite(want)], 2)


def test_erf_float32_is_xlas_bit_for_bit():
  # the eager float32/float16 erf is XLA's float32 rational interpolant: eager equals jit (as
  # in JAX, where both are XLA), saturation at +-1, signed zeros, subnormals and NaN included
  rng = np.random.default_rng(4)
  x = np.concatenate([np.linspace(-5, 5, 100001), rng.standard_normal(20000) * 3,
                      [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.8325, 3.83251]])
  for dt in (np.float32, np.float16):
    v = x.astype(dt)
    got, want = np.asarray(nbjax.lax.erf(v)), np.asarray(nbjax.jit(nbjax.lax.erf)(v))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
  np.testing.assert_allclose(np.asarray(nbjax.lax.erf(x.astype(np.float32)))[:100001],
                             sp.erf(x[:100001]), atol=2e-7)
