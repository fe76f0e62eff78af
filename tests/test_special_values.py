"""Registry-generated special-value checks: every built-in primitive, every declared dtype,
every eager backend it declares (numba and NumPy, each pinned in turn with
``config.set_eager_backend``) against jit (XLA: all cases of a primitive and dtype in one
jitted function) on NaN, +-inf, +-0, huge and tiny values (``testing.special_cases``): for elementwise primitives
every combination of such values (for complex dtypes, of such parts); for the other
families (reductions, scans, sort, shape and indexing ops, dot_general, linalg) their sample
cases with such values put into the float/complex operands (narrowed where the result is
not defined by the values alone: ``NARROW``). jit's result is the reference: it is what JAX
gives on CPU (sums, products and scans bit for bit: tests/test_reductions.py).

Results are compared part by part (real and imaginary apart): NaN exactly where jit has NaN,
other values within the dtype's tolerance, infinities and the sign of zeros exactly.
Subnormal results are read as zeros (their signs not compared) and zero signs of complex
results are not compared for operands with a big part: XLA's CPU code flushes subnormals to
zero, also inside complex kernels (``testing.special_values`` says more).
"""
import numpy as np
import pytest

import nbjax
from nbjax import registry, testing
from nbjax.array import Array

mlir = pytest.importorskip("nbjax.interpreters.mlir", reason="jaxlib (XLA backend) not installed")

PRIMS = [p for p in registry.primitives(builtin_only=True) if p.family != "call"]
BACKENDS = ("numba", "numpy")
_TOL = {"f": {2: (2e-2, 2e-2), 4: (5e-5, 1e-6), 8: (1e-12, 1e-13)},
        "c": {8: (5e-5, 1e-6), 16: (1e-12, 1e-13)}}

# Known differences left (strict: a fix must remove its entry). A key is the primitive's name
# and any of: dtype kind, dtype name, backend.
KNOWN = {("atan2", "c"): "complex atan2: XLA's expansion is not reproduced",
         ("zeta", "float16"): "XLA evaluates float16 zeta in float16 (x (x + 1) overflows: NaN "
                              "for x near the float16 maximum); the eager kernel runs float32",
         **dict.fromkeys([("select_and_gather_add", "float32"), ("select_and_gather_add",
                                                                 "float64")],
                         "ties (the special values repeat): XLA's CPU reduce-window visits "
                         "some padded, strided windows in another order than row-major, so "
                         "another of the tied elements is selected (not met by the float16 "
                         "and bfloat16 samples)"),
         ("qr", "numpy"): "the factors of rank-deficient matrices (special values put zeros "
                          "in) are not unique: NumPy's LAPACK (geqrf/orgqr) and the "
                          "Householder kernel jit runs (the numba backend's) pick others",
         ("eigh", "float32", "numpy"): "eigenvector signs are not unique: NumPy's LAPACK "
                                       "build picks others than scipy's, which the numba "
                                       "kernel jit runs calls (as JAX does)"}


def _parts(v):
  """The real parts of ``v``, as float64."""
  return tuple(p.astype(np.float64) for p in ((v.real, v.imag) if v.dtype.kind == "c" else (v,)))


def _finite(v):
  return np.all([np.isfinite(p) for p in _parts(v)], axis=0)


def _no_huge(v):
  """No finite part above 1e10: sums of products cannot overflow, whatever the order."""
  return np.all([~(np.isfinite(p) & (np.abs(p) > 1e10)) for p in _parts(v)], axis=0)


def _dot_values(v):
  return _no_huge(v) & (_finite(v) if v.dtype.kind == "c" else True)


def _moderate(v):
  """Finite, every nonzero part between 1e-10 and 1e10 in magnitude."""
  return _finite(v) & np.all([(p == 0) | ((np.abs(p) <= 1e10) & (np.abs(p) >= 1e-10))
                              for p in _parts(v)], axis=0)


_ORDER = ("its sums of products run in BLAS's order eagerly and in XLA's dot emitter's "
          "under jit: finite operands near the overflow threshold overflow in one order and "
          "not in the other; complex: BLAS accumulates the real and imaginary parts of the "
          "products apart, XLA adds whole complex products, so infinite parts meet "
          "differently (NaN in one, inf in the other): finite values only, and the signs of "
          "their zero parts are not compared")
_DEFINED = ("a decomposition is defined on finite matrices: with NaN or infinite entries "
            "the NaN pattern is the algorithm's (eager LAPACK-style kernels, XLA's "
            "expanders under jit); huge entries overflow inside either algorithm "
            "differently, and tiny ones give subnormal intermediates that XLA flushes to "
            "zero (its FFI calls run with flush-to-zero on); the sign of a zero result is "
            "the algorithm's too (not compared)")
_TRANSFORM = ("every output of an FFT sums every input times a twiddle factor: NaN and "
              "infinite inputs give NaN or infinite parts where the algorithm's order of "
              "operations puts them (NumPy's pocketfft eagerly, XLA's FFT under jit), and "
              "huge ones overflow in one order and not in the other: finite values of "
              "moderate size only, zero signs not compared")
# Special values narrowed for some primitives: (the values kept, the dtype kinds whose zero
# signs are compared, why).
def _no_huge_half(v):
  """``_no_huge``, and for float16 nothing above 100: its sums round every step in XLA."""
  return _no_huge(v) & ((np.abs(v.astype(np.float64)) <= 100) if v.dtype == np.float16 else True)


def _distinct_finite(v):
  """``_moderate`` without zeros: -0.0 and 0.0 tie, and XLA breaks ties in its own order."""
  return _moderate(v) & (v != 0)


_CONV = (_ORDER + "; and the eager im2col multiplies padded zeros by the kernel (0 * inf "
         "is NaN) where XLA's convolution skips the padding: finite values only")
_WINDOW_SUM = ("XLA's CPU reduce-window sums a multi-dimensional window in its own order "
               "(not row-major): finite operands near the overflow threshold overflow in "
               "one order and not in the other")
_WINDOW_SELECT = ("which element a window selects when a NaN is in it depends on the order "
                  "XLA's CPU reduce-window visits the window (not row-major with padding and "
                  "strides), and so does which of tied zeros (-0.0, 0.0) it selects: finite nonzero "
                  "values only")
NARROW = {"dot_general": (_dot_values, "f", _ORDER), "conv_general_dilated": (lambda v: _finite(v) & _no_huge(v), "", _CONV),
          "fft": (_moderate, "", _TRANSFORM),
          "reduce_window_sum": (_no_huge_half, "f", _WINDOW_SUM),
          "select_and_gather_add": (_distinct_finite, "", _WINDOW_SELECT),
          **{p: (_moderate, "", _DEFINED)
             for p in ("triangular_solve", "cholesky", "lu", "qr", "eigh", "eig", "svd",
                       "schur", "hessenberg", "householder_product", "ormqr", "tridiagonal",
                       "tridiagonal_solve", "geqrf")}}


def _special_cases(prim, dtype):
  return testing.special_cases(prim, dtype, NARROW.get(prim.name, (None,))[0])


def _tol(prim, dtype):
  d = np.dtype(dtype)
  base = (2e-2, 1e-6) if d == registry.BF16 else _TOL.get(d.kind, {}).get(d.itemsize, (0, 0))
  t = prim.meta.get("tol", {}).get(d) or prim.meta.get("tol", {}).get(d.name)
  return (max(base[0], t[0]), max(base[1], t[1])) if t else base


def _flush(x):
  """Subnormals as signed zeros (XLA's CPU code flushes them)."""
  tiny = np.finfo(x.dtype).tiny
  return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x)


def _big_part(args, elementwise=True):
  """Per element (or, not ``elementwise``, anywhere): an operand has a part of magnitude
  above 1e10 or below 1e-10 (not 0)."""
  out = False
  for a in args:
    a = np.asarray(a)
    if a.dtype.kind in "fc":
      for part in ((a.real, a.imag) if a.dtype.kind == "c" else (a,)):
        m = np.abs(part.astype(np.float64))
        big = np.isfinite(m) & ((m > 1e10) | ((m < 1e-10) & (m > 0)))
        out = out | (big if elementwise else big.any())
  if not elementwise:
    return out
  return np.broadcast_to(out, np.broadcast_shapes(*[np.shape(a) for a in args]))


def _mismatch(got, want, rtol, atol, zero_sign):
  """Elementwise: ``got`` differs from ``want`` (one real part). The sign of a zero read from
  a subnormal is not compared: where XLA flushes decides it."""
  sub = ((got != 0) & (np.abs(got) < np.finfo(got.dtype).tiny)) | (
      (want != 0) & (np.abs(want) < np.finfo(want.dtype).tiny))
  got, want = _flush(got), _flush(want)
  gn, wn = np.isnan(got), np.isnan(want)
  with np.errstate(all="ignore"):
    g, w = got.astype(np.float64), want.astype(np.float64)
    near = np.abs(g - w) <= atol + rtol * np.abs(w)
    close = (g == w) | (np.isfinite(g) & np.isfinite(w) & near)
    sign = (np.signbit(got) == np.signbit(want)) | (w != 0) | ~zero_sign | sub
  return np.where(gn | wn, gn != wn, ~(close & sign))


def _compare(prim, dtype, args, got, want, what):
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype, (
      f"{what}: {got.dtype}{got.shape} != jit {want.dtype}{want.shape}")
  if got.dtype == registry.BF16:  # exactly in float32 (same exponent range: same subnormals)
    got, want = got.astype(np.float32), want.astype(np.float32)
  if got.dtype.kind not in "fc":
    bad = got != want
  else:
    rtol, atol = _tol(prim, dtype)
    ew = prim.family == "elementwise"
    zsign = np.ones(got.shape, bool) if got.dtype.kind == "f" else np.broadcast_to(
        ~_big_part(args, ew), got.shape)
    zsign = zsign & (got.dtype.kind in NARROW.get(prim.name, (None, "fc"))[1])
    bad = _mismatch(got.real, want.real, rtol, atol, zsign)
    if got.dtype.kind == "c":
      bad = bad | _mismatch(got.imag, want.imag, rtol, atol, zsign)
  if bad.any():
    idx = np.flatnonzero(bad)
    g, w = got.ravel(), want.ravel()
    if prim.family == "elementwise":
      rows = "\n".join(f"  {tuple(np.asarray(a)[i] for a in args)}: eager {g[i]!r}, jit {w[i]!r}"
                       for i in idx[:12])
    else:
      rows = "\n".join(f"  at {np.unravel_index(i, got.shape)}: eager {g[i]!r}, jit {w[i]!r}"
                       for i in idx[:12])
      rows += "\n  operands:\n" + "\n".join(f"  {np.asarray(a)!r}" for a in args)
    pytest.fail(f"{what}: {idx.size} of {bad.size} results differ from jit:\n{rows}")


_WANTS = {}


def _jit_results(prim, dtype, cases):
  """jit's results for every case, computed by one jitted function of all of them (one XLA
  compile per primitive and dtype, shared by the backends' tests)."""
  key = (prim, dtype)
  if key not in _WANTS:
    flat = [Array(a) for args, _ in cases for a in args]
    _WANTS[key] = [[np.asarray(o) for o in (r if prim.multiple_results else [r])]
                   for r in nbjax.jit(testing.cases_fun(prim, cases))(*flat)]
  return _WANTS[key]


def _known(prim, dtype, backend):
  """The KNOWN entry of a case: its key is the primitive's name and any of the dtype's kind,
  the dtype's name and the backend."""
  for key, why in KNOWN.items():
    if key[0] == prim.name and all(k in (dtype.kind, dtype.name, backend) for k in key[1:]):
      return why
  return None


def _cases():
  for p in PRIMS:
    for d in p.meta.get("dtypes", ()):
      d = np.dtype(d)
      if p.family != "elementwise" and (d.kind not in "fc" or not _special_cases(p, d)):
        continue  # special values go into float/complex operands (iota has none)
      for b in BACKENDS:
        if b in p.impls:
          reason = _known(p, d, b)
          marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
          yield pytest.param(p, d, b, id=f"{p.name}-{d.name}-{b}", marks=marks)


@pytest.fixture
def pinned():
  """``pinned(prim, backend)`` pins the eager backend for the test's duration."""
  done = []

  def pin(prim, backend):
    nbjax.config.set_eager_backend(prim, backend)
    done.append(prim)
  yield pin
  for p in done:
    nbjax.config.set_eager_backend(p, None)


@pytest.mark.parametrize("prim,dtype,backend", list(_cases()))
def test_eager_matches_jit_on_special_values(prim, dtype, backend, pinned):
  cases = _special_cases(prim, dtype)
  assert cases, f"{prim.name}: no special-value cases at {dtype}"
  cases = [(args, params) for args, params in cases if not _non_adjacent(prim, params)]
  wants = _jit_results(prim, dtype, cases)
  pinned(prim, backend)
  outs = (lambda r: list(r)) if prim.multiple_results else (lambda r: [r])
  for (args, params), want in zip(cases, wants):
    got = outs(prim.bind(*[Array(a) for a in args], **params))
    for g, w in zip(got, want):
      _compare(prim, dtype, args, g, w, f"{prim.name} {dtype} {backend} {params}")


def _non_adjacent(prim, params):
  """A sum or product over non-adjacent axes: XLA's association there depends on the host
  CPU (tests/test_reductions.py), so it is not compared."""
  axes = params.get("axes", ()) if prim.name in ("reduce_sum", "reduce_prod") else ()
  return len(axes) > 1 and max(axes) - min(axes) >= len(axes)


def test_special_values_cover_the_parts():
  """The grids hold what the module docstring promises (NaN, infinities, signed zeros,
  extremes; complex: every pair of parts, signed zeros told apart)."""
  f = testing.special_values(np.float32)
  assert np.isnan(f).any() and np.isposinf(f).any() and np.isneginf(f).any()
  assert (np.signbit(f) & (f == 0)).any() and ((f == 0) & ~np.signbit(f)).any()
  assert np.finfo(np.float32).max in f and -np.finfo(np.float32).max in f
  assert not (np.abs(f[f != 0]) < np.finfo(np.float32).tiny).any()  # no subnormals
  c = testing.special_values(np.complex64)
  key = lambda v: (str(float(v)), bool(np.signbit(v)))
  parts = {key(v) for v in c.real}
  assert len(parts) == 8 and len(c) == 64
  assert {(key(a), key(b)) for a, b in zip(c.real, c.imag)} == {(a, b) for a in parts for b in parts}
  i = testing.special_values(np.int8)
  assert {-128, 127, 0, -1} <= set(i.tolist())
