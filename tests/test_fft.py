"""``nbjax.numpy.fft`` and ``lax.fft``: every function against ``np.fft`` (shapes, axes, ``n``/``s``
cropping and padding, norms, dtypes), JAX's dtype rules (single precision stays single,
integers promote to the default float), derivatives (jvp and grad against finite differences,
the transposes by the inner-product identity, jacrev against jacfwd), vmap against a loop,
jit against eager, more than three axes (JAX's groups), and the errors."""
import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import lax, registry
from nbjax.array import Array
from nbjax.test_util import check_grads

rng = np.random.default_rng(0)
NORMS = [None, "backward", "ortho", "forward"]
C2C = ["fft", "ifft"]
FUNCS_1D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
FUNCS_ND = ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2"]
# functions whose input is real in NumPy's sense (complex input is an error or discarded)
REAL_IN = {"rfft", "ihfft", "rfftn", "rfft2"}


def _rand(shape, dtype):
  d = np.dtype(dtype)
  if d.kind == "c":
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
  if d.kind in "iu":
    return rng.integers(-5, 6, shape).astype(d)
  return rng.standard_normal(shape).astype(d)


def _want_dtype(name, d):
  """JAX's result dtype: single precision stays single, as do bool and integers of up to 32
  bits (JAX 0.10's ``to_inexact_dtype``); 64-bit integers go to the default float."""
  d = np.dtype(d)
  single = d in (np.float32, np.complex64) or d.kind in "biu" and d.itemsize <= 4
  real_out = name.startswith(("irfft", "hfft"))
  if real_out:
    return np.dtype(np.float32 if single else np.float64)
  return np.dtype(np.complex64 if single else np.complex128)


def _tol(d):
  return (2e-4, 2e-4) if np.dtype(d) in (np.float32, np.complex64) else (1e-10, 1e-10)


def _check(name, x, **kw):
  got = getattr(jnp.fft, name)(Array(x), **kw)
  ref_kw = dict(kw)
  if "s" in kw and "axes" not in kw:  # NumPy 2 deprecates s without axes; JAX's: the last
    ref_kw["axes"] = tuple(range(x.ndim - len(kw["s"]), x.ndim))
  want = getattr(np.fft, name)(x.astype(np.result_type(x.dtype, np.float64)), **ref_kw)
  assert type(got) is Array
  assert got.dtype == _want_dtype(name, x.dtype), (name, kw, got.dtype)
  assert got.shape == want.shape, (name, kw, got.shape, want.shape)
  rtol, atol = _tol(_want_dtype(name, x.dtype))
  scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
  np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol * scale,
                             err_msg=f"{name} {kw} {x.dtype}")


# ------------------------------------------------------------------ against np.fft


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int32"])
@pytest.mark.parametrize("name", FUNCS_1D)
def test_1d_against_numpy(name, dtype):
  if name in REAL_IN and np.dtype(dtype).kind == "c":
    pytest.skip("real-input transform")
  for shape, kw in [((8,), {}), ((7,), {}), ((3, 6), {}), ((3, 6), dict(axis=0)),
                    ((2, 5, 4), dict(axis=1)), ((2, 5, 4), dict(axis=-3)),
                    ((6,), dict(n=4)), ((6,), dict(n=9)), ((3, 6), dict(n=5, axis=0)),
                    ((3, 5), dict(n=11, axis=1)), ((1,), dict(n=1)), ((2, 1), dict(n=2))]:
    x = _rand(shape, dtype)
    for norm in NORMS:
      _check(name, x, norm=norm, **kw)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int64"])
@pytest.mark.parametrize("name", FUNCS_ND)
def test_nd_against_numpy(name, dtype):
  if name in REAL_IN and np.dtype(dtype).kind == "c":
    pytest.skip("real-input transform")
  two = name.endswith("2")
  cases = [((4, 6), {}), ((3, 4, 5), {}), ((3, 4, 5), dict(axes=(0, 2))),
           ((3, 4, 5), dict(axes=(2, 0))), ((3, 4, 5), dict(s=(3, 7))),
           ((3, 4, 5), dict(s=(2, 6), axes=(1, 0))), ((3, 4, 5), dict(axes=(-1, -3)))]
  if not two:
    cases += [((3, 4, 5), dict(axes=(1,))), ((3, 4, 5), dict(s=(5,))),
              ((2, 3, 4), dict(s=(3, 2, 6))), ((2, 3, 4), dict(axes=(2, 0, 1)))]
  for shape, kw in cases:
    x = _rand(shape, dtype)
    for norm in NORMS:
      _check(name, x, norm=norm, **kw)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_more_than_three_axes(name):
  x = _rand((2, 3, 2, 4, 3), "complex128" if name not in REAL_IN else "float64")
  for kw in [{}, dict(axes=(0, 1, 2, 4)), dict(s=(2, 2, 3, 4)), dict(axes=(4, 3, 1, 0, 2))]:
    for norm in (None, "ortho"):
      _check(name, x, norm=norm, **kw)
  # under jit and grad too (the groups are ordinary lax.fft calls)
  f = lambda v: getattr(jnp.fft, name)(v)
  np.testing.assert_allclose(np.asarray(nbjax.jit(f)(x)), np.asarray(f(x)), rtol=1e-12, atol=1e-12)


def test_empty_batch_and_length_one():
  for name, d in [("fft", "complex128"), ("rfft", "float32"), ("irfft", "complex64"),
                  ("ifft", "complex64")]:
    x = _rand((0, 4), d)
    got = getattr(jnp.fft, name)(x)
    assert got.shape == getattr(np.fft, name)(x.astype(np.complex128 if d[0] == "c" else
                                                       np.float64)).shape
  _check("fft", _rand((3, 1), "complex128"))
  _check("rfft", _rand((1,), "float64"))


def test_dtypes_follow_jax():
  f32, c64 = np.ones(8, np.float32), np.ones(8, np.complex64)
  assert jnp.fft.fft(f32).dtype == np.complex64
  assert jnp.fft.rfft(f32).dtype == np.complex64
  assert jnp.fft.irfft(c64).dtype == np.float32
  assert jnp.fft.hfft(c64).dtype == np.float32
  assert jnp.fft.ihfft(f32).dtype == np.complex64
  assert jnp.fft.fft(np.arange(8)).dtype == np.complex128
  assert jnp.fft.rfft(np.arange(8)).dtype == np.complex128
  assert jnp.fft.fft(np.ones(8, bool)).dtype == np.complex64
  assert jnp.fft.fft(np.ones(8, np.int32)).dtype == np.complex64
  assert jnp.fft.irfft(np.ones(8, np.int32)).dtype == np.float32
  assert jnp.fft.rfft(np.ones(8, np.float16)).dtype == np.complex64
  assert jnp.fft.fft(np.ones(8, np.float32), norm="ortho").dtype == np.complex64
  assert jnp.fft.fftfreq(5).dtype == np.float64
  assert jnp.fft.fftfreq(5, dtype=np.float32).dtype == np.float32
  assert jnp.fft.rfftfreq(5, dtype=jnp.float32).dtype == np.float32
  # lists are not array-likes (JAX's TypeError); NumPy arrays are
  with pytest.raises(TypeError, match="jax.numpy.fft.fft requires ndarray"):
    jnp.fft.fft([1.0, 2.0, 3.0])
  np.testing.assert_allclose(np.asarray(jnp.fft.fft(np.array([1.0, 2.0]))), [3.0, -1.0])


def test_roundtrips():
  x = _rand((4, 10), "float64")
  np.testing.assert_allclose(np.asarray(jnp.fft.irfft(jnp.fft.rfft(x))), x, atol=1e-12)
  np.testing.assert_allclose(np.asarray(jnp.fft.irfftn(jnp.fft.rfftn(x), x.shape)), x, atol=1e-12)
  z = _rand((3, 5), "complex128")
  np.testing.assert_allclose(np.asarray(jnp.fft.ifft2(jnp.fft.fft2(z))), z, atol=1e-12)
  h = z.copy()
  h[:, 0] = h[:, 0].real  # a half spectrum of a real signal: its DC term is real
  np.testing.assert_allclose(np.asarray(jnp.fft.ihfft(jnp.fft.hfft(h, 9), 9)), h, atol=1e-12)


def test_fast_eager_path_matches_general_path():
  x = Array(_rand((3, 16), "complex64"))
  np.testing.assert_array_equal(np.asarray(jnp.fft.fft(x)), np.asarray(jnp.fft.fftn(x, axes=(1,))))
  r = Array(_rand((3, 16), "float32"))
  np.testing.assert_array_equal(np.asarray(jnp.fft.rfft(r)),
                                np.asarray(jnp.fft.rfftn(r, axes=(1,))))
  np.testing.assert_array_equal(np.asarray(jnp.fft.fft(r)), np.asarray(jnp.fft.fftn(r, axes=(1,))))


# ------------------------------------------------------------------ frequencies and shifts


@pytest.mark.parametrize("n", [1, 2, 7, 8])
@pytest.mark.parametrize("d", [1.0, 0.25, 3])
def test_fftfreq_rfftfreq(n, d):
  np.testing.assert_allclose(np.asarray(jnp.fft.fftfreq(n, d)), np.fft.fftfreq(n, d), rtol=1e-15)
  np.testing.assert_allclose(np.asarray(jnp.fft.rfftfreq(n, d)), np.fft.rfftfreq(n, d),
                             rtol=1e-15)
  np.testing.assert_allclose(np.asarray(jnp.fft.fftfreq(n, d, dtype=np.float32)),
                             np.fft.fftfreq(n, d).astype(np.float32), rtol=1e-6)
  assert jnp.fft.fftfreq(n, d, device=None).shape == (n,)


def test_fftfreq_rfftfreq_place_on_device():
  # JAX's: device= commits the result to that device (as jnp.arange(device=...))
  dev = nbjax.devices()[-1]
  for f in (jnp.fft.fftfreq, jnp.fft.rfftfreq):
    assert not f(6, 0.5)._committed
    r = f(6, 0.5, device=dev)
    assert r._committed and r.devices() == {dev}
    np.testing.assert_array_equal(np.asarray(r), np.asarray(f(6, 0.5)))


def test_promote_dtypes_complex():
  # JAX's private numpy util, used by its fft tests: reals to the complex of their precision
  from nbjax.numpy import _util
  a, b = _util.promote_dtypes_complex(np.float32(1), jnp.arange(3, dtype=jnp.int16))
  assert a.dtype == b.dtype == np.complex64
  c, = _util.promote_dtypes_complex(np.ones(2))
  assert c.dtype == np.complex128


def test_shifts():
  x = np.arange(30).reshape(5, 6)
  for axes in [None, 0, 1, -1, (0, 1), (1,), [1, 0]]:
    for name in ("fftshift", "ifftshift"):
      np.testing.assert_array_equal(np.asarray(getattr(jnp.fft, name)(x, axes)),
                                    getattr(np.fft, name)(x, axes), err_msg=f"{name} {axes}")
  np.testing.assert_array_equal(np.asarray(jnp.fft.ifftshift(jnp.fft.fftshift(x))), x)
  np.testing.assert_array_equal(np.asarray(jnp.fft.fftshift(np.arange(5.0))),
                                np.fft.fftshift(np.arange(5.0)))


# ------------------------------------------------------------------ derivatives


def test_grad_of_power_spectrum_vs_finite_differences():
  x = _rand((10,), "float64")
  f = lambda v: jnp.sum(jnp.abs(jnp.fft.rfft(v)) ** 2)
  check_grads(f, (x,), order=2, modes=("fwd", "rev"))
  # against the explicit derivative: d/dx_j sum_k |X_k|^2 = sum_k 2 Re(conj(X_k) e^{-2 pi i kj/n})
  n = x.size
  X = np.fft.rfft(x)
  g_want = np.array([np.sum(2 * np.real(np.conj(X) * np.exp(-2j * np.pi * np.arange(
      n // 2 + 1) * j / n))) for j in range(n)])
  np.testing.assert_allclose(np.asarray(nbjax.grad(f)(x)), g_want, rtol=1e-10)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2",
                                  "rfftn", "irfftn"])
def test_grads_of_each_function(name):
  x = _rand((3, 6), "float64" if name in REAL_IN else "complex128")
  f = lambda v: jnp.abs(getattr(jnp.fft, name)(v, norm="ortho")) ** 2
  check_grads(f, (x,), order=1, modes=("fwd", "rev"))
  g = lambda v: getattr(jnp.fft, name)(v)
  check_grads(g, (x,), order=2, modes=("fwd", "rev"))


def _pair(a, b):
  """JAX's pairing for transposes: Re(sum(a * b)), no conjugate."""
  return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


@pytest.mark.parametrize("fft_type,lengths,shape", [
    ("fft", (8,), (2, 8)), ("ifft", (5,), (5,)), ("fft", (3, 4), (2, 3, 4)),
    ("ifft", (2, 3, 4), (2, 3, 4)), ("rfft", (8,), (3, 8)), ("rfft", (7,), (7,)),
    ("rfft", (4, 6), (4, 6)), ("irfft", (8,), (2, 5)), ("irfft", (7,), (4,)),
    ("irfft", (3, 6), (2, 3, 4)), ("irfft", (2, 3, 5), (2, 3, 3))])
@pytest.mark.parametrize("jit", [False, True])
def test_transpose_inner_product_identity(fft_type, lengths, shape, jit):
  x = _rand(shape, "float64" if fft_type == "rfft" else "complex128")
  f = lambda v: lax.fft(v, fft_type, lengths)
  y = f(x)
  ct = _rand(y.shape, y.dtype)
  t = nbjax.linear_transpose(f, x)
  (ct_x,) = (nbjax.jit(t) if jit else t)(ct)
  assert ct_x.dtype == x.dtype and ct_x.shape == x.shape
  # for IRFFT the pairing identity holds for the real-linear map; test it on random x
  np.testing.assert_allclose(_pair(ct, y), _pair(ct_x, x), rtol=1e-10)
  # and vjp gives the same cotangent
  _, vjp = nbjax.vjp(f, x)
  np.testing.assert_allclose(np.asarray(vjp(ct)[0]), np.asarray(ct_x), rtol=1e-12, atol=1e-12)


def test_jvp_is_the_transform_of_the_tangent():
  x, t = _rand((4, 6), "complex128"), _rand((4, 6), "complex128")
  y, yt = nbjax.jvp(jnp.fft.fft2, (x,), (t,))
  np.testing.assert_allclose(np.asarray(y), np.fft.fft2(x), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(yt), np.fft.fft2(t), rtol=1e-12)


def test_jacrev_matches_jacfwd_real_to_real():
  w = _rand((5,), "complex128")
  f = lambda v: jnp.fft.irfft(jnp.fft.rfft(v) * w, n=8)
  x = _rand((8,), "float64")
  np.testing.assert_allclose(np.asarray(nbjax.jacrev(f)(x)), np.asarray(nbjax.jacfwd(f)(x)),
                             rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ vmap, jit


@pytest.mark.parametrize("name,kw", [("fft", {}), ("fft", dict(axis=0)), ("rfft", dict(n=6)),
                                     ("irfft", {}), ("fft2", {}), ("rfftn", dict(axes=(0,))),
                                     ("ihfft", dict(axis=0)), ("hfft", dict(n=5))])
@pytest.mark.parametrize("in_axis", [0, 1, 2, -1])
def test_vmap_vs_loop(name, kw, in_axis):
  x = _rand((3, 4, 6), "float64" if name in REAL_IN else "complex128")
  f = lambda v: getattr(jnp.fft, name)(v, **kw)
  got = nbjax.vmap(f, in_axes=in_axis)(x)
  want = np.stack([np.asarray(f(np.take(x, i, in_axis))) for i in range(x.shape[in_axis])])
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_vmap_keeps_a_leading_batch_axis_in_place():
  x = _rand((3, 4, 6), "complex128")
  jaxpr = nbjax.make_jaxpr(nbjax.vmap(lambda v: lax.fft(v, "fft", (6,)), in_axes=1,
                                      out_axes=1))(x)
  assert [e.primitive.name for e in jaxpr.eqns] == ["fft"]
  jaxpr = nbjax.make_jaxpr(nbjax.vmap(lambda v: lax.fft(v, "fft", (6,)), in_axes=2,
                                      out_axes=0))(
      _rand((3, 6, 4), "complex128"))
  assert [e.primitive.name for e in jaxpr.eqns] == ["transpose", "fft"]


@pytest.mark.parametrize("name,kw", [("fft", {}), ("ifft", dict(n=5, norm="ortho")),
                                     ("rfft", dict(axis=0)), ("irfft", dict(n=7)),
                                     ("hfft", {}), ("ihfft", dict(norm="forward")),
                                     ("fftn", dict(s=(3, 5))), ("irfft2", {}),
                                     ("rfftn", dict(axes=(1, 0)))])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_jit_matches_eager(name, kw, dtype):
  if name in REAL_IN and dtype.startswith("complex"):
    dtype = "float64"
  x = _rand((4, 6), dtype)
  f = lambda v: getattr(jnp.fft, name)(v, **kw)
  got, want = nbjax.jit(f)(x), f(x)
  assert got.dtype == want.dtype and got.shape == want.shape
  rtol, atol = _tol(dtype)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol * 10)


def test_jit_of_frequencies_and_shifts():
  f = nbjax.jit(lambda x: jnp.fft.fftshift(x) * jnp.fft.fftfreq(6))
  x = _rand((6,), "float64")
  np.testing.assert_allclose(np.asarray(f(x)), np.fft.fftshift(x) * np.fft.fftfreq(6))


# ------------------------------------------------------------------ lax.fft, the registry


def test_lax_fft_types_and_strings():
  x = _rand((2, 8), "complex128")
  assert [t.value for t in lax.FftType] == [0, 1, 2, 3]
  assert [t.name for t in lax.FftType] == ["FFT", "IFFT", "RFFT", "IRFFT"]
  for s, t in [("fft", lax.FftType.FFT), ("IFFT", lax.FftType.IFFT)]:
    np.testing.assert_array_equal(np.asarray(lax.fft(x, s, (8,))), np.asarray(lax.fft(x, t, [8])))
  assert lax.fft(np.ones(4), "fft", ()).dtype == np.complex128  # cast, no transform
  assert "fft_type=RFFT" in str(nbjax.make_jaxpr(lambda v: lax.fft(v, "rfft", (8,)))(x.real))
  assert lax.fft_p is registry.get("fft")
  assert registry.policy(lax.fft_p)[0] == "numpy"
  assert "pocketfft" in lax.fft_p.meta["note"]


def test_errors():
  c = np.ones((2, 8), np.complex128)
  with pytest.raises(ValueError, match="Unknown|unknown FFT type 'dct'"):
    lax.fft(c, "dct", (8,))
  with pytest.raises(TypeError, match="fft: unknown FFT type value 7"):
    lax.fft(c, 7, (8,))
  with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
    lax.fft(c, "rfft", (8,))
  with pytest.raises(ValueError, match=r"fft: FFT input shape \(2, 8\) minor dimensions"):
    lax.fft(c, "fft", (4,))
  with pytest.raises(ValueError, match=r"at least as many input dimensions"):
    lax.fft(c, "fft", (2, 2, 8))
  with pytest.raises(ValueError, match="1 to 3 nonnegative ints"):
    lax.fft(np.ones((1, 2, 2, 2), complex), "fft", (1, 2, 2, 2))
  with pytest.raises(ValueError, match="IRFFT input shape"):
    lax.fft(c, "irfft", (8,))
  with pytest.raises(ValueError, match="fft: FFT input must be complex64 or complex128, got "
                                       "float32"):
    lax.fft_p.bind(Array(np.ones(8, np.float32)), fft_type=lax.FftType.FFT, fft_lengths=(8,))
  with pytest.raises(ValueError, match="RFFT input must be float32 or float64"):
    lax.fft_p.bind(Array(c), fft_type=lax.FftType.RFFT, fft_lengths=(8,))
  F = jnp.fft
  with pytest.raises(ValueError, match="Shape should be positive"):
    F.fft(c, n=0)
  with pytest.raises(ValueError, match="Shape and axes have different lengths"):
    F.fftn(c, s=(2, 3), axes=(0,))
  with pytest.raises(ValueError, match="does not support repeated axes"):
    F.fftn(c, axes=(0, -2))
  with pytest.raises(ValueError, match="does not support multiple axes. Please use"):
    F.fft(c, axis=(0, 1))
  with pytest.raises(ValueError, match="only supports 2 axes"):
    F.fft2(c, axes=(0,))
  with pytest.raises(ValueError, match="invalid norm value 'bad'"):
    F.fft(c, norm="bad")
  with pytest.raises(IndexError):  # NumPy's AxisError: a ValueError and an IndexError
    F.fft(c, axis=2)
  with pytest.raises(ValueError):
    F.fft(c, axis=-3)
  with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
    F.rfft(c)
  with pytest.raises(ValueError, match="invalid number of data points"):
    F.irfft(np.ones(1, complex))
  with pytest.raises(TypeError):
    F.fft(c, n=2.5)
  with pytest.raises(TypeError, match="jax.numpy.fft.fft"):
    F.fft("abc")
  with pytest.raises(ValueError, match="only takes an int"):
    F.fftfreq([3])
  with pytest.raises(ValueError, match="only takes a single value"):
    F.rfftfreq(3, [1.0])


def test_fft_error_messages_and_empty_as_jax():
  """JAX's fft_test testFftErrors/testFftnErrors/testLaxFftErrors/testFftEmpty: messages name
  ``jax.numpy.fft.<name>`` and show the axes as given; a length-0 transform is empty."""
  x = np.ones((2, 3))
  with pytest.raises(ValueError, match=r"^jax\.numpy\.fft\.ifftn does not support repeated axes\. "
                                       r"Got axes \[1, 1\]\.$"):
    jnp.fft.ifftn(x, axes=[1, 1])
  with pytest.raises(ValueError, match=r"^jax\.numpy\.fft\.rfft does not support multiple axes\. "
                                       r"Please use jax\.numpy\.fft\.rfftn\. Got axis = \[1, 1\]\.$"):
    jnp.fft.rfft(x, axis=[1, 1])
  with pytest.raises(ValueError, match=r"^The n argument of jax\.numpy\.fft\.fftfreq only takes"):
    jnp.fft.fftfreq([0, 1, 2])
  with pytest.raises(ValueError, match=r"IRFFT input shape \(2, 14, 15\) minor dimensions must be "
                     r"equal to all except the last fft_length, got fft_lengths=\(13, 15\)"):
    lax.fft(np.ones((2, 14, 15)), fft_type="irfft", fft_lengths=(13, 15))
  out = jnp.fft.fft(jnp.zeros((0,), jnp.complex64))
  assert out.shape == (0,) and out.dtype == np.complex64
  assert lax.fft(jnp.zeros((3, 0), jnp.complex64), "fft", (0,)).shape == (3, 0)
