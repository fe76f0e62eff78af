"""Test harness shared by nbjax's test suites: differential checks of transformations and
registry-driven test cases.

Pipeline position: test-only code on top of ``api``. ``check_jvp`` compares ``jvp`` with
central differences in float64; ``check_vmap`` compares ``vmap`` with a Python loop over
slices; ``primitive_cases`` turns a primitive's ``meta`` (``samples``, or for elementwise
primitives ``arity``/``domain``) into concrete ``(args, params)`` cases, so every
registered primitive is tested the moment it exists; ``special_cases`` does the same with
special values (NaN, infinities, signed zeros, extremes): grids of them for elementwise
primitives, the sample cases with special values put into the operands for the others.

Elementwise ``meta['domain']`` values understood by the default sampler (one per primitive,
or a tuple with one per argument): ``None``/``"real"``, ``"positive"`` (0.5..3),
``"nonnegative"``, ``"nonzero"``, ``"unit"`` (-0.9..0.9), ``"gt1"`` (1.1..3), ``"small"``
(|x| < 1), ``"int_nonneg"``, ``"shift"`` (0..bit width, for shifts), or a callable
``(rng, shape, dtype) -> ndarray``.
"""
from __future__ import annotations

import itertools

import numpy as np

from nbjax import api, core, dtypes, registry
from nbjax._tree_util import tree_flatten, tree_map, tree_unflatten

__all__ = ["numerical_jvp", "check_jvp", "check_vmap", "sample_values", "primitive_cases",
           "all_cases", "jvp_defined", "bdim_placements", "rand_like", "default_tolerance",
           "prim_fun", "special_values", "special_cases"]

# --------------------------------------------------------------------- tolerances

_DEFAULT_TOL = {np.dtype(np.float16): 1e-2, dtypes._bf16: 1.6e-2, np.dtype(np.float32): 1e-5,
                np.dtype(np.float64): 1e-9, np.dtype(np.complex64): 1e-5,
                np.dtype(np.complex128): 1e-9}
_JVP_TOL = {np.dtype(np.float16): 5e-2, np.dtype(np.float32): 2e-3,
            np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 2e-3,
            np.dtype(np.complex128): 1e-5}


def default_tolerance(dtype, *, jvp=False):
  d = np.dtype(dtype)
  return (_JVP_TOL if jvp else _DEFAULT_TOL).get(d, 0.0)


def _np(x):
  return np.asarray(x)


def _assert_close(a, b, rtol, atol, err_msg=""):
  a, b = _np(a), _np(b)
  if a.dtype == dtypes.float0 or b.dtype == dtypes.float0:
    assert a.shape == b.shape, (a.shape, b.shape, err_msg)
    return
  assert a.shape == b.shape, f"shape mismatch {a.shape} vs {b.shape} {err_msg}"
  if a.dtype.kind in "biu" and b.dtype.kind in "biu":
    np.testing.assert_array_equal(a, b, err_msg=err_msg)
  else:
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=err_msg)

# --------------------------------------------------------------------- jvp


def rand_like(rng, x):
  """A random tangent for ``x``: normal for inexact dtypes, float0 zeros otherwise."""
  aval = core.get_aval(x)
  if not dtypes.is_inexact(aval.dtype):
    return np.zeros(aval.shape, dtypes.float0)
  t = rng.standard_normal(aval.shape)
  if dtypes.is_complex(aval.dtype):
    t = t + 1j * rng.standard_normal(aval.shape)
  return np.asarray(t, aval.dtype)


def _axpy(eps, t, x):
  """``x + eps * t`` leafwise (``t`` float0 -> ``x`` unchanged)."""
  def f(x, t):
    t = _np(t)
    if t.dtype == dtypes.float0:
      return x
    xv = _np(x)
    return np.asarray(xv + eps * t, xv.dtype)
  return tree_map(f, x, t)


def numerical_jvp(f, primals, tangents, eps=1e-4):
  """Central differences ``(f(x + eps t) - f(x - eps t)) / (2 eps)`` (pytrees)."""
  fp = f(*_axpy(eps, tangents, primals))
  fm = f(*_axpy(-eps, tangents, primals))

  def d(a, b):
    a, b = _np(a), _np(b)
    if not dtypes.is_inexact(a.dtype):
      return np.zeros(a.shape, dtypes.float0)
    with np.errstate(invalid="ignore", over="ignore"):
      return (a - b) / (2 * eps)
  return tree_map(d, fp, fm)


def check_jvp(f, args, order=1, eps=None, rtol=None, atol=None, rng=None, tangents=None):
  """Check ``jvp(f, args, t)`` against central differences for a random ``t``.

  ``order > 1`` also checks the jvp of the jvp (``f -> partial(jvp, f)``) recursively, as
  JAX's ``check_grads`` does. Use float64 arguments for tight tolerances.
  """
  rng = np.random.default_rng(0) if rng is None else rng
  args = tuple(args)
  if tangents is None:
    tangents = tree_map(lambda x: rand_like(rng, x), args)
  leaves = [x for x in tree_flatten(args)[0]]
  d = np.result_type(*[_np(x).dtype for x in leaves if dtypes.is_inexact(core.get_aval(x).dtype)]
                     or [np.float64])
  eps = (1e-4 if d in (np.float64, np.complex128) else 1e-2) if eps is None else eps
  tol = default_tolerance(d, jvp=True)
  rtol = tol if rtol is None else rtol
  atol = tol if atol is None else atol
  y, y_dot = api.jvp(f, args, tangents)
  y_ref = f(*args)
  y_dot_num = numerical_jvp(f, args, tangents, eps)
  for a, b in zip(tree_flatten(y)[0], tree_flatten(y_ref)[0]):
    _assert_close(a, b, rtol, atol, "jvp primal output")
  for a, b in zip(tree_flatten(y_dot)[0], tree_flatten(y_dot_num)[0]):
    _assert_close(a, b, rtol, atol, "jvp tangent output vs central differences")
  if order > 1:
    check_jvp(lambda p, t: api.jvp(f, p, t), (args, tangents), order - 1, eps, rtol, atol, rng)

# --------------------------------------------------------------------- vmap


def _take(x, i, axis):
  return np.take(_np(x), i, axis=axis)


def check_vmap(f, args, in_axes=0, out_axes=0, *, axis_size=None, rtol=None, atol=None):
  """Check ``vmap(f, in_axes, out_axes)(*args)`` against a Python loop over slices."""
  args = tuple(args)
  in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
  out = api.vmap(f, in_axes, out_axes, axis_size=axis_size)(*args)
  args_flat, in_tree = tree_flatten((args, {}))
  axes_flat = api._flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True)
  n = api._mapped_axis_size(f, in_tree, args_flat, axes_flat, "vmap", axis_size)
  rows = []
  for i in range(n):
    sl = [x if ax is None else _take(x, i, ax) for x, ax in zip(args_flat, axes_flat)]
    a, _ = tree_unflatten(in_tree, sl)
    rows.append(f(*a))
  out_flat, out_tree = tree_flatten(out)
  oaxes = api._flatten_axes("vmap out_axes", out_tree, out_axes)
  per_row = [tree_flatten(r)[0] for r in rows]
  for k, (o, oax) in enumerate(zip(out_flat, oaxes)):
    ref = [_np(r[k]) for r in per_row]
    if oax is None:
      expect = ref[0]
    else:
      expect = np.stack(ref, axis=oax % (ref[0].ndim + 1)) if ref else None
    d = _np(o).dtype
    tol = default_tolerance(d)
    _assert_close(o, expect, tol if rtol is None else rtol, tol if atol is None else atol,
                  f"vmap output {k} vs loop")
  return out

# --------------------------------------------------------------------- registry cases


def _kind(dtype):
  d = np.dtype(dtype)
  return "b" if d == np.bool_ else d.kind


def sample_values(rng, shape, dtype, domain=None):
  """Random values of ``shape``/``dtype`` inside ``domain`` (see module docstring)."""
  d = np.dtype(dtype)
  if callable(domain):
    return np.asarray(domain(rng, shape, d), d)
  k = _kind(d)
  if k == "b":
    return rng.random(shape) < 0.5
  if k in "iu":
    if domain == "shift":
      return rng.integers(0, 8 * d.itemsize, shape).astype(d)
    lo = 1 if domain in ("positive", "nonzero", "gt1") else 0 if (
        k == "u" or domain in ("nonnegative", "int_nonneg")) else -5
    hi = 9
    return rng.integers(lo, hi, shape).astype(d)

  def real(shape):
    if domain in ("positive",):
      return rng.uniform(0.5, 3.0, shape)
    if domain in ("nonnegative",):
      return rng.uniform(0.1, 3.0, shape)
    if domain == "nonzero":
      return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 3.0, shape)
    if domain in ("unit", "open_unit"):
      return rng.uniform(-0.9, 0.9, shape)
    if domain in ("gt1", "above_one"):
      return rng.uniform(1.1, 3.0, shape)
    if domain == "small":
      return rng.uniform(-0.9, 0.9, shape)
    return rng.standard_normal(shape)

  v = real(shape)
  if k == "c":
    v = v + 1j * real(shape) * (0.5 if domain else 1.0)
  return np.asarray(v, d)


_EW_SHAPES = {
    1: [[()], [(3,)], [(2, 3)], [(0,)]],
    2: [[(), ()], [(3,), (3,)], [(2, 3), (2, 3)], [(2, 3), ()], [(), (2, 3)], [(1, 3), (2, 3)],
        [(0,), (0,)]],
    3: [[(), (), ()], [(4,), (4,), (4,)], [(2, 3), (2, 3), (2, 3)], [(), (2, 3), (2, 3)],
        [(0,), (0,), (0,)]],
}



def _install():
  from nbjax.lax import elementwise
  elementwise._sample = sample_values  # the samples builders in lax files draw with it


_install()

def _elementwise_cases(prim, dtype, rng):
  n = prim.meta.get("arity")
  dom = prim.meta.get("domain")
  doms = dom if isinstance(dom, (tuple, list)) else [dom] * n
  shape_sets = _EW_SHAPES.get(n) or [[(3,)] * n, [(2, 3)] * n, [()] * n]
  out = []
  for shapes in shape_sets:
    out.append(([sample_values(rng, s, dtype, d) for s, d in zip(shapes, doms)], {}))
  return out


def primitive_cases(prim, dtype, rng=None):
  """Concrete test cases ``[(args, params), ...]`` for ``prim`` at ``dtype``.

  From ``prim.meta['samples'](rng, dtype)`` when present; for elementwise primitives with
  ``meta['arity']`` a default set (equal shapes, rank-0 and size-1 broadcasting, empty)
  with values in ``meta['domain']``; ``[]`` when neither exists.
  """
  rng = np.random.default_rng(0) if rng is None else rng
  samples = prim.meta.get("samples")
  if samples is not None:
    cases = samples(rng, np.dtype(dtype))
    return [(list(a), dict(p)) for a, p in cases]
  if prim.meta.get("arity") is not None:
    return _elementwise_cases(prim, dtype, rng)
  return []


def jvp_defined(prim, params):
  """Whether ``prim`` has a derivative at ``params``: ``meta['jvp_undefined'](params)`` marks
  the parameter combinations whose jvp rule raises NotImplementedError as JAX's does (eig's
  eigenvectors)."""
  undefined = prim.meta.get("jvp_undefined")
  return not (undefined and undefined(params))


# --------------------------------------------------------------------- special values


def special_values(dtype):
  """The special-value grid of ``dtype`` (1-D): for floats 0, -0, 1, -1, 0.5, -2.5, pi, NaN,
  +-inf, +-max, 4 * tiny (just above the subnormal range) and a small normal value; for
  complex every combination of 0, -0, 1, -1.5, NaN, +-inf and a big part (the square root of
  max, doubled: its square overflows); for integers 0, +-1, +-2, +-7, min, max and their
  neighbours; False and True.

  Subnormal numbers are left out: XLA's CPU code flushes them to zero (inputs read as zero,
  results written as zero), which eager kernels do not emulate; parts near max or min normal
  would produce subnormal intermediates inside complex kernels for the same reason.
  """
  d = np.dtype(dtype)
  if d == np.bool_:
    return np.array([False, True])
  if d.kind in "iu":
    info = np.iinfo(d)
    v = {0, 1, 2, 7, info.max, info.max - 1} | (
        {-1, -2, -7, info.min, info.min + 1} if d.kind == "i" else set())
    return np.array(sorted(v), d)
  if d.kind == "c":
    fi = np.finfo(d)
    parts = [0.0, -0.0, 1.0, -1.5, np.nan, np.inf, -np.inf, 2 * float(np.sqrt(fi.max))]
    return np.array([complex(a, b) for a in parts for b in parts], d)
  fi = dtypes.finfo(d)  # (ml_dtypes': bfloat16 too)
  small = {2: 1e-4, 4: 1e-30, 8: 1e-300}[d.itemsize]
  v = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.pi, np.nan, np.inf, -np.inf, float(fi.max),
       -float(fi.max), 4 * float(fi.tiny), small]
  return np.array(v, d)


def _grid(dts):
  """Every combination of the special values of ``dts`` (one flat array per operand)."""
  grids = np.meshgrid(*[special_values(d) for d in dts], indexing="ij")
  return [np.ascontiguousarray(g.ravel()) for g in grids]


def special_cases(prim, dtype, keep=None):
  """``[(args, params), ...]`` of special values for ``prim`` at ``dtype``.

  Elementwise primitives: every combination of the operands' special values, once per
  operand-dtype and params signature their sample cases use (or the primitive's arity).
  Other primitives: their sample cases (``primitive_cases``: shapes and params) with special
  values put into every float/complex operand, five variants each (every element special;
  a third from the grid without NaN; half from its finite values, extremes included; half
  signed zeros; a sixth from the whole grid), so reductions, scans and sorts meet NaN,
  infinities, signed zeros and overflow both alone and mixed with ordinary values;
  ``keep(values) -> mask`` narrows the special values put in. ``[]`` where no operand is
  float/complex."""
  if prim.family != "elementwise":
    return _special_operand_cases(prim, dtype, keep)
  sigs = {}
  for args, params in primitive_cases(prim, dtype):
    key = (tuple(np.asarray(a).dtype for a in args), tuple(sorted(params.items(), key=str)))
    sigs.setdefault(key, params)
  if not sigs and prim.meta.get("arity"):
    sigs[((np.dtype(dtype),) * prim.meta["arity"], ())] = {}
  out = []
  for (dts, _), params in sigs.items():
    if len(dts) > 2:  # ternary: the first two operands' grid, the others cycling through theirs
      head = _grid(dts[:2])
      n = head[0].size
      rest = [np.resize(special_values(d), n) for d in dts[2:]]
      out.append((head + [np.roll(r, k + 1) for k, r in enumerate(rest)], params))
    else:
      out.append((_grid(dts), params))
  return out


def _pools(d, keep=None):
  """(whole grid, grid without NaN, finite values, signed zeros) of dtype ``d``."""
  g = special_values(d)
  if keep is not None:
    g = g[keep(g)]
  parts = (g.real, g.imag) if d.kind == "c" else (g,)
  nonan = ~np.any([np.isnan(p) for p in parts], axis=0)
  finite = np.all([np.isfinite(p) for p in parts], axis=0)
  zeros = g[g == 0]
  return g, g[nonan], g[finite], zeros if zeros.size else g  # (a grid narrowed past zeros)


def _special_operand_cases(prim, dtype, keep):
  rng = np.random.default_rng(0)
  out = []
  for args, params in primitive_cases(prim, dtype, rng):
    args = [np.asarray(a) for a in args]
    if not any(a.dtype.kind in "fc" and a.size for a in args):
      continue
    for pool, frac in ((0, 1.0), (1, 0.35), (2, 0.5), (3, 0.5), (0, 0.15)):
      new = []
      for a in args:
        if a.dtype.kind in "fc" and a.size:
          a = a.copy()
          mask = rng.random(a.shape) < frac
          a[mask] = rng.choice(_pools(a.dtype, keep)[pool], int(mask.sum()))
        new.append(a)
      out.append((new, params))
  return out


# XLA options for the registry-generated jit checks: they check the lowering, not XLA's code
# generation, and compile one program per primitive and dtype (most of the suite's time).
# Without the fusion emitters and LLVM's optimisation XLA compiles them about 3x faster;
# the rest of the suite (tests/test_jit.py, the transformations) compiles with the defaults,
# as does a check whose program the older emitters reject (UNIMPLEMENTED: clamp of bool).
FAST_COMPILE = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 0}


class fast_jit:
  """``nbjax.jit(fun)`` compiled with ``FAST_COMPILE``; where XLA rejects the program with
  those options (UNIMPLEMENTED), with the defaults. ``trace_count`` is the running jit's."""

  def __init__(self, fun):
    from nbjax import jit
    self._fun, self._jit = fun, jit(fun, compiler_options=FAST_COMPILE)
    self._fast = True

  def __call__(self, *args, **kwargs):
    try:
      return self._jit(*args, **kwargs)
    except Exception as e:  # (jaxlib's JaxRuntimeError)
      if not self._fast or "UNIMPLEMENTED" not in str(e):
        raise
      from nbjax import jit
      self._jit, self._fast = jit(self._fun), False
      return self._jit(*args, **kwargs)

  trace_count = property(lambda self: self._jit.trace_count)


def all_cases(builtin_only=True):
  """``(prim, dtype, args, params)`` for every registered primitive and accepted dtype."""
  for p in registry.primitives(builtin_only=builtin_only):
    for d in p.meta.get("dtypes", ()):
      for args, params in primitive_cases(p, d):
        yield p, np.dtype(d), args, params


def prim_fun(prim, params):
  """``lambda *args: prim.bind(*args, **params)``."""
  def f(*args):
    return prim.bind(*args, **params)
  f.__name__ = prim.name
  return f


def cases_fun(prim, cases):
  """``f(*flat)``: ``prim`` applied to every ``(args, params)`` of ``cases``, the cases'
  arguments passed one after another; returns the list of results. Jitted, it checks every
  case with one XLA compile."""
  def f(*flat):
    outs, k = [], 0
    for args, params in cases:
      outs.append(prim.bind(*flat[k:k + len(args)], **params))
      k += len(args)
    return outs
  f.__name__ = prim.name + "_cases"
  return f


def bdim_placements(ndims, limit=64, seed=0):
  """Batch-dim placements to test: per argument ``None`` (unbatched) or 0..ndim.

  The full product when it has at most ``limit`` entries; otherwise a covering set (every
  placement of every argument appears) plus a random sample. The all-``None`` placement is
  included (it needs ``axis_size``).
  """
  opts = [[None, *range(nd + 1)] for nd in ndims]
  total = int(np.prod([len(o) for o in opts], dtype=np.int64)) if opts else 1
  if total <= limit:
    return [tuple(c) for c in itertools.product(*opts)]
  out = []
  m = max(len(o) for o in opts)
  for k in range(m):
    out.append(tuple(o[k % len(o)] for o in opts))
    out.append(tuple(o[(k + i) % len(o)] for i, o in enumerate(opts)))
  r = np.random.default_rng(seed)
  while len(set(out)) < limit:
    out.append(tuple(o[r.integers(len(o))] for o in opts))
  seen, res = set(), []
  for c in out:
    if c not in seen:
      seen.add(c)
      res.append(c)
  return res
