"""Registry-generated special-value checks: every built-in elementwise primitive, every declared
dtype, every eager backend it declares (numba and NumPy, each pinned in turn with
``config.set_eager_backend``) against jit (XLA, ``mlir.single_primitive_impl``) on NaN,
+-inf, +-0, huge and tiny values and, for complex dtypes, every combination of such parts
(``testing.special_cases``). jit's result is the reference: it is what JAX gives on CPU.

Results are compared part by part (real and imaginary apart): NaN exactly where jit has NaN,
other values within the dtype's tolerance, infinities and the sign of zeros exactly.
Subnormal results are read as (signed) zeros and zero signs of complex results are not
compared for operands with a big part: XLA's CPU code flushes subnormals to zero, also inside
complex kernels (``testing.special_values`` says more).
"""
import numpy as np
import pytest

import nbjax
from nbjax import registry, testing
from nbjax.array import Array

mlir = pytest.importorskip("nbjax.interpreters.mlir", reason="jaxlib (XLA backend) not installed")

PRIMS = [p for p in registry.primitives(builtin_only=True) if p.family == "elementwise"]
BACKENDS = ("numba", "numpy")
_TOL = {"f": {2: (2e-2, 2e-2), 4: (5e-5, 1e-6), 8: (1e-12, 1e-13)},
        "c": {8: (5e-5, 1e-6), 16: (1e-12, 1e-13)}}

# Known differences left (strict: a fix must remove its entry).
KNOWN = {("atan2", "c"): "complex atan2: XLA's expansion is not reproduced"}


def _tol(prim, dtype):
  d = np.dtype(dtype)
  base = _TOL.get(d.kind, {}).get(d.itemsize, (0, 0))
  t = prim.meta.get("tol", {}).get(d) or prim.meta.get("tol", {}).get(d.name)
  return (max(base[0], t[0]), max(base[1], t[1])) if t else base


def _flush(x):
  """Subnormals as signed zeros (XLA's CPU code flushes them)."""
  tiny = np.finfo(x.dtype).tiny
  return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x)


def _big_part(args):
  """Per element: an operand has a part of magnitude above 1e10 or below 1e-10 (not 0)."""
  out = False
  for a in args:
    a = np.asarray(a)
    if a.dtype.kind in "fc":
      for part in ((a.real, a.imag) if a.dtype.kind == "c" else (a,)):
        m = np.abs(part.astype(np.float64))
        out = out | (np.isfinite(m) & ((m > 1e10) | ((m < 1e-10) & (m > 0))))
  return np.broadcast_to(out, np.broadcast_shapes(*[np.shape(a) for a in args]))


def _mismatch(got, want, rtol, atol, zero_sign):
  """Elementwise: ``got`` differs from ``want`` (one real part)."""
  got, want = _flush(got), _flush(want)
  gn, wn = np.isnan(got), np.isnan(want)
  with np.errstate(all="ignore"):
    g, w = got.astype(np.float64), want.astype(np.float64)
    near = np.abs(g - w) <= atol + rtol * np.abs(w)
    close = (g == w) | (np.isfinite(g) & np.isfinite(w) & near)
    sign = (np.signbit(got) == np.signbit(want)) | (w != 0) | ~zero_sign
  return np.where(gn | wn, gn != wn, ~(close & sign))


def _compare(prim, dtype, args, got, want, what):
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype, (
      f"{what}: {got.dtype}{got.shape} != jit {want.dtype}{want.shape}")
  if got.dtype.kind not in "fc":
    bad = got != want
  else:
    rtol, atol = _tol(prim, dtype)
    zsign = np.ones(got.shape, bool) if got.dtype.kind == "f" else ~_big_part(args)
    bad = _mismatch(got.real, want.real, rtol, atol, zsign)
    if got.dtype.kind == "c":
      bad = bad | _mismatch(got.imag, want.imag, rtol, atol, zsign)
  if bad.any():
    idx = np.flatnonzero(bad)
    rows = "\n".join(f"  {tuple(np.asarray(a)[i] for a in args)}: eager {got[i]!r}, jit {want[i]!r}"
                     for i in idx[:12])
    pytest.fail(f"{what}: {idx.size} of {bad.size} results differ from jit:\n{rows}")


_IMPLS = {}


def _xla(prim):
  if prim not in _IMPLS:
    _IMPLS[prim] = mlir.single_primitive_impl(prim)
  return _IMPLS[prim]


def _cases():
  for p in PRIMS:
    for d in p.meta.get("dtypes", ()):
      d = np.dtype(d)
      for b in BACKENDS:
        if b in p.impls:
          reason = KNOWN.get((p.name, d.kind)) or KNOWN.get((p.name, d.name))
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
  cases = testing.special_cases(prim, dtype)
  assert cases, f"{prim.name}: no special-value cases at {dtype}"
  pinned(prim, backend)
  impl = _xla(prim)
  outs = (lambda r: list(r)) if prim.multiple_results else (lambda r: [r])
  for args, params in cases:
    want = outs(impl(*args, **params))
    got = outs(prim.bind(*[Array(a) for a in args], **params))
    for g, w in zip(got, want):
      _compare(prim, dtype, args, g, w, f"{prim.name} {dtype} {backend} {params}")


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
