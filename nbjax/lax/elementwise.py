"""Elementwise primitives: every rule of each one in one place.

Pipeline position: ``lax.sin(x)`` -> ``sin_p.bind(x)``; with no transformation active the
registry's eager entry (``make_elementwise_eager`` here) runs the selected backend: a numba
kernel from ``kernels.elementwise`` or a NumPy ufunc, resolved once per dtype signature.
Under transformations the jvp/batch/transpose rules below apply; under jit the lowering
rules (``nbjax.lax._lower_elementwise``) emit StableHLO.

Strictness as JAX's lax: operands share one dtype; shapes are equal, broadcast size-1
dims at equal rank, or are rank-0 scalars. Python scalars next to arrays take the array's
dtype, weakly. ``nbjax.numpy`` does promotion and broadcasting.

Semantics are XLA's (checked against jaxlib, special values included, by
tests/test_special_values.py): integer division truncates, ``x // 0`` is -1 (all ones) and
``x % 0`` is ``x``; shift amounts are read as unsigned and amounts past the bit width give 0
(sign fill for arithmetic right shifts); float -> int conversion maps NaN to 0 and saturates;
``max``/``min`` propagate NaN and order -0 below +0; complex ``max``/``min`` compare
lexicographically (JAX's rule). Complex operands of the transcendental and arithmetic
primitives run numba kernels that reproduce XLA's complex expansions on both backends
(``complex_kernel``): NumPy's C99 special values differ. Deliberate difference: float64 ->
float16 rounds once (XLA's CPU rounds via float32, twice).
"""
from __future__ import annotations

import builtins
import cmath
import enum
import functools
import math
import operator

import numpy as np

from kernels import elementwise as K, threads
from nbjax import core, dtypes, earray, fusion, registry
from nbjax.array import Array, _wrap, own
from nbjax.array import POOL_MIN, empty as pooled_empty  # large outputs reuse freed buffers
from nbjax.core import Primitive, ShapedArray
from nbjax.earray import EArray
from nbjax.interpreters import ad, batching, jet, tape
from nbjax.interpreters import partial_eval as pe

# Output elements from which the two-core prange kernels run (measured on the project's shared
# 2-core machines). Memory-bound kernels gain 1.5-2.8x at 1e5-4e6 elements and nothing at 1e7
# (one thread already streams ~50 GB/s), but a prange call stalls 4-45 ms at its join when the
# second core is busy or its fresh output faults in huge pages (about 1 call in 10 on a quiet
# machine, most calls under load): never by default. libm-bound kernels (>= 5 ns/element) gain
# 2x, which from 1M elements (>= 5 ms of work) outweighs that risk.
PAR_MIN = 1 << 62
PAR_MIN_LIBM = 1 << 20
# Output elements from which a kernel runs in chunks (at most 63) on the caller and the native
# team worker (kernels.threads.team_run: a worker descheduled in mid-chunk does not hold the
# caller back, and handing a job over costs about a microsecond). Measured (float32, medians
# of 4 processes, one thread -> team; quiet, then with the other core busy): x + y at 1e5
# 13.5 -> 12.5 us quiet but 16.8 -> 18.5 busy, x * y + x (two kernels) 34 -> 54 busy; at 1e6
# (fused) 195 -> 103 quiet, 196 -> 175 busy; tanh at 1e5 36 -> 20 quiet, 33 -> 27 busy: memory-
# bound kernels from 2^18 elements (where fused loops start), libm-bound ones from 2^15 (at
# 2^13, the first choice, the hand-over lost: float32 tanh one thread -> team 5.1 -> 6.8 us
# at 8192, 7.4 -> 11.8 at 16384, 13.4 -> 16.6 at 32768, 50 -> 36 at 1e5; sin 13.5 -> 17.4 at
# 16384, 57 -> 63 at 1e5 (alternating processes, others paused, 2026-11-30)
TEAM_MIN, TEAM_CHUNK = 1 << 18, 1 << 14
TEAM_MIN_LIBM, TEAM_CHUNK_LIBM = 1 << 15, 1 << 12
threads.TEAM_USES["elementwise kernels"] = (f"from {TEAM_MIN} output elements (libm-based ones "
                                            f"and XLA's float32 expansions from {TEAM_MIN_LIBM})")
_LIBM = {"exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin",
         "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "pow", "atan2",
         "atan2_complex", "rem", "nextafter", "nextafter_f16", "erf", "erfc", "erf_inv",
         "erf_inv_f32", "lgamma", "digamma", "polygamma"} | {
             k + "_complex" for k in ("exp", "exp2", "expm1", "log", "log1p", "logistic", "sin",
                                      "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan",
                                      "asinh", "acosh", "atanh", "sqrt", "rsqrt", "pow", "sign")}

# dtype classes accepted by rules
_bool = {np.dtype(np.bool_)}
_sint = {np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)}
_uint = {np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)}
_int = _sint | _uint
_float = {np.dtype(t) for t in (np.float16, np.float32, np.float64)} | (
    {dtypes._bf16} if dtypes._bf16 is not None else set())
_complex = {np.dtype(t) for t in (np.complex64, np.complex128)}
_complex_elem = {np.dtype(np.float32), np.dtype(np.float64)}
_inexact = _float | _complex
_num = _int | _inexact
_any = _num | _bool


class _NamedDtypes(frozenset):
  """A dtype set named in JAX's order in error messages (``_ordered``: "integer, floating,
  bool")."""
  names = None


_ordered = _NamedDtypes(_int | _float | _bool)
_ordered.names = "integer, floating, bool"
_bool_or_int = _NamedDtypes(_int | _bool)
_bool_or_int.names = "integer, bool"
_KIND_NAMES = [(_bool, "bool"), (_int, "integer"), (_sint, "signedinteger"),
               (_uint, "unsignedinteger"), (_float, "floating"), (_complex, "complexfloating")]

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
_UNSIGNED = {d.itemsize: d for d in _uint}
_SIGNED = {d.itemsize: d for d in _sint}


def _accepted(ok):
  if getattr(ok, "names", None):
    return ok.names
  names, left = [], set(ok)
  for s, n in _KIND_NAMES:
    if s <= left:
      names.append(n)
      left -= s
  return ", ".join(names + sorted(d.name for d in left))


def _real_dtype(d):
  return np.dtype(np.float32) if d == np.complex64 else np.dtype(np.float64) if d == np.complex128 else d


def _complex_dtype(d):
  return np.dtype(np.complex64) if d in (F32, np.complex64) else np.dtype(np.complex128)


def _bool_out(d):
  return BOOL


# ----------------------------------------------------------------- abstract eval

_FLOAT0_MSG = ("Called {} with a float0 array. float0s do not support any operations by design, "
               "because they are not compatible with non-trivial vector spaces. No implicit "
               "dtype conversion is done. You can use np.zeros_like(arr, dtype=np.float) to cast "
               "a float0 array to a regular zeros array. \nIf you didn't expect to get a float0 "
               "you might have accidentally taken a gradient with respect to an integer argument.")


def broadcasting_shape(name, *shapes):
  """JAX's rule: rank-0 operands broadcast; equal ranks broadcast size-1 dims."""
  nz = [s for s in shapes if len(s)]
  if not nz:
    return ()
  if len({len(s) for s in nz}) != 1:
    raise TypeError(f"{name}: arrays must have the same number of dimensions, got "
                    f"{', '.join(map(str, shapes))}.")
  out = []
  for ds in zip(*nz):
    non1 = {d for d in ds if d != 1}
    if len(non1) > 1:
      raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                      f"{', '.join(map(str, shapes))}.")
    out.append(non1.pop() if non1 else 1)
  return tuple(out)


# JAX's dtype classes hold the narrow ml_dtypes types too (``dtypes.issubdtype``): one is
# accepted where its proxy is (float8_* and the other small floats where float16 is, int4 and
# int2 where int8 is, uint4/uint2 where uint8 is). Their eager kernels: ``registry._WIDE``.
_NARROW_PROXY = {d: F16 for d in dtypes._small_float_dtypes}
_NARROW_PROXY.update({d: np.dtype(np.uint8 if d.name.startswith("u") else np.int8)
                      for d in dtypes._small_int_dtypes})
_NARROW_INTS = frozenset(dtypes._small_int_dtypes)


def accepts(ok, d):
  """Whether dtype set ``ok`` takes dtype ``d`` (a narrow ml_dtypes type through its proxy)."""
  return d in ok or _NARROW_PROXY.get(d) in ok


def check_dtypes(name, avals, ok):
  """Raise JAX's TypeError when an operand's dtype is not accepted (``ok``: a set or one per position)."""
  oks = ok if isinstance(ok, list) else [ok] * len(avals)
  for i, (a, s) in enumerate(zip(avals, oks)):
    if not isinstance(a, ShapedArray):
      raise TypeError(f"{name} got a non-array operand {a!r}")
    if a.dtype not in s and _NARROW_PROXY.get(a.dtype) not in s:
      if a.dtype == dtypes.float0:  # JAX's n-ary ops name the position
        raise TypeError(_FLOAT0_MSG.format(name) if len(avals) == 1 else
                        _FLOAT0_MSG.format(name).replace(" array.", f" at position {i}.", 1))
      if len(avals) == 1:
        raise TypeError(f"{name} does not accept dtype {a.dtype.name}. Accepted dtypes are "
                        f"subtypes of {_accepted(s)}.")
      raise TypeError(f"{name} does not accept dtype {a.dtype.name} at position {i}. Accepted "
                      f"dtypes at position {i} are subtypes of {_accepted(s)}.")


# lax operations whose jnp counterpart promotes its inputs: JAX's dtype errors name it
JNP_EQUIVALENTS = {
    "abs": "fabs", "acos": "arccos", "acosh": "arccosh", "add": "add", "asin": "arcsin",
    "asinh": "arcsinh", "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh",
    "cbrt": "cbrt", "ceil": "ceil", "concatenate": "concatenate", "cos": "cos", "cosh": "cosh",
    "div": "divide", "eq": "equal", "exp": "exp", "expm1": "expm1", "floor": "floor",
    "log": "log", "log1p": "log1p", "max": "maximum", "min": "minimum", "mul": "multiply",
    "ne": "not_equal", "neg": "negative", "nextafter": "nextafter", "pow": "float_power",
    "round": "round", "select": "where", "shift_left": "left_shift",
    "shift_right_logical": "right_shift", "shift_right_arithmetic": "right_shift",
    "sign": "sign", "sin": "sin", "sinh": "sinh", "sqrt": "sqrt", "sub": "subtract",
    "tan": "tan", "tanh": "tanh"}


def check_same_dtypes(name, *avals):
  """JAX's error for operands of differing dtypes (with its tip where jnp promotes)."""
  d0 = avals[0].dtype
  if any(a.dtype != d0 for a in avals[1:]):
    name = "add" if name == "add_any" else name  # (JAX's add_jaxvals adds with lax.add)
    tip = JNP_EQUIVALENTS.get(name)
    raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                    f"{', '.join(a.dtype.name for a in avals)}." + (
                        f" (Tip: jnp.{tip} is a similar function that does automatic type "
                        "promotion on inputs)." if tip else ""))


def nary_abstract_eval(name, ok, out_dtype=None, same_dtypes=True, narrow_ints=True):
  """The standard elementwise rule: dtypes checked, shapes broadcast, weak if all operands are.
  ``narrow_ints=False``: int4/uint4/int2/uint2 are refused (JAX's ``supports_narrow_ints``)."""
  def rule(*avals, **params):
    check_dtypes(name, avals, ok)
    if not narrow_ints and avals[0].dtype in _NARROW_INTS:
      raise TypeError(f"{name} does not accept dtype {avals[0].dtype.name}. Support for "
                      "narrow-width integers is platform-dependent and limited to a few specific "
                      "operations, e.g. basic arithmetic and type casting.")
    if same_dtypes and len(avals) > 1:
      check_same_dtypes(name, *avals)
    shape = broadcasting_shape(name, *(a.shape for a in avals))
    od = avals[0].dtype if out_dtype is None else np.dtype(out_dtype(avals[0].dtype))
    return ShapedArray(shape, od, all(a.weak_type for a in avals))  # (bool too, as JAX)
  return rule


# ----------------------------------------------------------------- backends
# A backend of an elementwise primitive is the registry's ``impl(*arrays, **params)``; it
# carries ``impl.resolve(dtypes, params) -> run``, the function of the arrays alone for one
# dtype signature, which the eager entry below caches per signature.

_WORK = {F16: F32}  # numba has no float16: such operands are widened (exactly) to float32
_HALF = {F16} | ({dtypes._bf16} if dtypes._bf16 is not None else set())


def _params_key(params):
  return tuple(sorted(params.items())) if params else ()


def backend(resolve, prim=None):
  """The registry impl of a per-signature ``resolve(dtypes, params) -> run(*arrays)``; with
  ``prim``, bfloat16 signatures resolve to its declared float32 round trip (``registry.
  roundtrip``: per signature, so other dtypes pay nothing)."""
  cache = {}
  if prim is not None:
    resolve = _bf16_resolve(prim, resolve)

  def impl(*xs, **params):
    xs = [x if x.flags.c_contiguous else np.array(x, order="C") for x in xs]
    key = (tuple(x.dtype for x in xs), _params_key(params))
    run = cache.get(key)
    if run is None:
      run = cache[key] = resolve(key[0], params)
    return run(*xs)
  impl.resolve = resolve
  u = getattr(resolve, "ufunc", None)
  if getattr(resolve, "specialize", None) is not None:  # the resolver's own, per avals
    impl.specialize = resolve.specialize
  elif u is not None:  # for eager programs: the ufunc itself (0-d results are fixed up there)
    own = getattr(resolve, "numba_for", None)  # dtypes that run a numba kernel on both backends
    impl.specialize = lambda avals, params: None if params or (
        own and any(own(a.dtype) for a in avals)) else u
  return impl


def _bf16_resolve(prim, resolve):
  def r(dts, params):
    if registry.needs_roundtrip(prim, dts, params):
      return registry.roundtrip(prim, resolve, [ShapedArray((), d) for d in dts], params)
    return resolve(dts, params)
  r.__dict__.update(resolve.__dict__)  # ufunc, numba_for
  return r


def _converter(src, dst):
  if src == dst:
    return None
  if src.kind in "iu" and dst.kind in "iu" and src.itemsize == dst.itemsize:
    return lambda x: x.view(dst)
  return lambda x: x.astype(dst)


def _broadcast_operands(xs):
  shape = np.broadcast_shapes(*(x.shape for x in xs))
  return shape, [x if x.size == 1 or x.shape == shape else
                 np.array(np.broadcast_to(x, shape), order="C") for x in xs]


def _in_place_shape(xs):
  """The output shape when every operand has it or holds one element (of no more axes),
  else None."""
  s = None
  for x in xs:
    if x.size != 1:
      if s is None:
        s = x.shape
      elif x.shape != s:
        return None
  if s is None:
    s = builtins.max((x.shape for x in xs), key=len)
  return s if all(x.ndim <= len(s) for x in xs) else None


def _flat(x):
  return x if x.ndim == 1 else x.reshape(-1)


def _block_plan(sf, so):
  """How an operand of shape ``so`` broadcasts against ``sf`` (the output's) in blocks: one
  value per block of the trailing ``inner`` outputs (``(rows, 1)`` against ``(rows, cols)``),
  ``-inner`` for one value per position in such a block (``(cols,)``), else None."""
  nd = len(sf)
  if len(so) > nd:
    return None
  so = (1,) * (nd - len(so)) + tuple(so)
  j = 0
  while j < nd and so[j] == sf[j]:
    j += 1
  if 0 < j < nd and all(d == 1 for d in so[j:]):
    return math.prod(sf[j:])
  j = 0
  while j < nd and so[j] == 1:
    j += 1
  if 0 < j < nd and so[j:] == tuple(sf[j:]):
    return -math.prod(sf[j:])
  return None


def _block_broadcast(kname, in_dts, wo, team):
  """``bc(x, y)``: binary kernel ``kname`` with one operand broadcast in blocks (a bias per
  row or per column: ``kernels.elementwise``'s ``bc`` form) read in place, the other of the
  output's shape; None where that does not apply (then the broadcast is materialised)."""
  if kname not in K.BINARY or in_dts[0] != in_dts[1]:
    return None
  plans, eps = {}, []

  def bc(x, y):
    swap = x.size < y.size
    sf, so = (y.shape, x.shape) if swap else (x.shape, y.shape)
    key = (sf, so, swap)
    inner = plans.get(key, False)
    if inner is False:
      n = math.prod(sf)
      inner = plans[key] = _block_plan(sf, so) if 1 < math.prod(so) < n < team and (
          np.broadcast_shapes(sf, so) == tuple(sf)) and len(plans) < 1024 else None
    if inner is None:
      return None
    out = np.empty(sf, wo)
    xf, yf, of = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    if not eps:
      eps.append(K.entry(K.kernel(kname + "@bc"), xf, yf, of, np.int64(0), np.int64(0)))
    eps[0](xf, yf, of, np.int64(inner), np.int64(swap))
    return out
  return bc


def numba_run(kname, in_dts, out_dt, extra=(), work=None, work_out=None):
  """``run(*arrays)``: kernel ``kname`` over operands of dtypes ``in_dts`` into a new
  ``out_dt`` array. Operands are converted to the ``work`` dtypes the kernel sees (float16
  -> float32, or same-width integer views), the kernel writes ``work_out`` (float16 results
  are computed in float32 and rounded once), and ``extra`` scalars follow the operands.
  Entry points are resolved once per variant (serial below PAR_MIN elements, else prange)."""
  in_dts = [np.dtype(d) for d in in_dts]
  work = [_WORK.get(d, d) for d in in_dts] if work is None else [np.dtype(w) for w in work]
  out_dt = np.dtype(out_dt)
  wo = _WORK.get(out_dt, out_dt) if work_out is None else np.dtype(work_out)
  convs = [_converter(d, w) for d, w in zip(in_dts, work)]
  conv_any = any(c is not None for c in convs)
  oconv = _converter(wo, out_dt)
  extra = tuple(extra)
  eps = {}
  libm = kname in _LIBM
  heavy = libm or kname.endswith("_f32")  # (and XLA's float32 expansions: compute-bound)
  team = 1 << 62 if extra or len(in_dts) >= threads.MAX_ARGS or not threads.TEAM else \
      TEAM_MIN_LIBM if heavy else TEAM_MIN
  chunk = TEAM_CHUNK_LIBM if heavy else TEAM_CHUNK
  team_fn = []

  def call(flat, o):
    n = o.size
    if n >= team:
      if not team_fn:
        team_fn.append(K.chunked(K.kernel(kname), [*work, wo]))
      threads.team_run(team_fn[0], (*flat, o), builtins.min(n // chunk, threads.MAX_CHUNKS))
      return
    par = n >= (PAR_MIN_LIBM if libm else PAR_MIN)
    ep = eps.get(par)
    if ep is None:
      ep = eps[par] = K.entry(K.kernel(kname, par), *flat, *extra, o)
    ep(*flat, *extra, o)

  bc = _block_broadcast(kname, in_dts, wo, team) if (
      len(in_dts) == 2 and not conv_any and oconv is None and not extra) else None

  def run(*xs):
    shape = xs[0].shape
    for x in xs[1:]:
      if x.shape != shape:
        s = _in_place_shape(xs)
        if s is not None:  # one-element operands (``x * 2.0``): the kernels read them in place
          shape = s
          break
        if bc is not None:
          out = bc(*xs)
          if out is not None:
            return out
        shape, xs = _broadcast_operands(xs)
        break
    if conv_any:
      xs = [x if c is None else c(x) for x, c in zip(xs, convs)]
    out = pooled_empty(shape, wo)
    call([_flat(x) for x in xs], _flat(out))
    return out if oconv is None else oconv(out)
  # what an eager program needs to fuse this kernel into a loop (``registry.eager_program``):
  # its scalar expression applies when no operand is widened and nothing extra is passed
  run.kname = kname if not extra and work == in_dts and wo == out_dt else None
  if conv_any or oconv is not None or extra or len(in_dts) > 2:
    return run
  # the common calls, about 0.4 us less: one or two operands of one shape, a small fresh
  # output (below the pool and the threads' thresholds), the serial entry once resolved
  small = builtins.min(PAR_MIN_LIBM if libm else PAR_MIN, POOL_MIN // wo.itemsize, team)
  if len(in_dts) == 1:
    def fast(x):
      ep = eps.get(False)
      if x.size >= small or ep is None:
        return run(x)
      out = np.empty(x.shape, wo)
      if x.ndim == 1:
        ep(x, out)
      else:
        ep(x.reshape(-1), out.reshape(-1))
      return out
  else:
    def fast(x, y):
      ep = eps.get(False)
      sx, sy = x.shape, y.shape
      if sx == sy or y.size == 1 and len(sy) <= len(sx):  # (``x * 2.0``: read in place)
        s, n = sx, x.size
      elif x.size == 1 and len(sx) <= len(sy):
        s, n = sy, y.size
      else:
        return run(x, y)
      if n >= small or ep is None:
        return run(x, y)
      out = np.empty(s, wo)
      ep(x if x.ndim == 1 else x.reshape(-1), y if y.ndim == 1 else y.reshape(-1),
         out if out.ndim == 1 else out.reshape(-1))
      return out
  fast.kname = run.kname
  return fast


def _nb(kname, out_dtype=None):
  """numba resolver for a kernel (a name, or ``f(dtypes, params) -> name``)."""
  def resolve(dts, params):
    name = kname(dts, params) if callable(kname) else kname
    return numba_run(name, dts, dts[0] if out_dtype is None else out_dtype(dts[0]))
  return resolve


def _np(f):
  """NumPy resolver of a ufunc (called with ``out=...``: arrays even for 0-d results)."""
  def resolve(dts, params):
    if len(dts) == 1:
      return lambda a: f(a, out=...)
    if len(dts) == 2:
      return lambda a, b: f(a, b, out=...)
    return lambda *xs: f(*xs, out=...)
  resolve.ufunc = f
  return resolve


def _with_kernels(resolve, complex_kernel=None, f32_kernel=None, out_dtype=None, f16=True):
  """``resolve`` with complex operands on numba kernel ``complex_kernel`` (XLA's complex
  arithmetic, special values included, which NumPy's C99 loops do not give) and float32
  operands on ``f32_kernel`` (XLA's float32 expansion: JAX's bits, and vectorised, faster
  than NumPy's loops), float16 ones too with ``f16`` (where XLA computes float16 in float32).
  Both backends use them."""
  f32 = (F32, F16) if f16 else (F32,)

  def own(d):
    return complex_kernel if d.kind == "c" else f32_kernel if d in f32 else None

  def r(dts, params):
    k = own(dts[0])
    if k is None:
      return resolve(dts, params)
    od = dts[0] if out_dtype is None else out_dtype(dts[0])
    return numba_run(k, dts, od, work=[dts[0]] * len(dts) if dts[0].kind == "c" else None)
  r.ufunc, r.numba_for = getattr(resolve, "ufunc", None), own
  r.specialize = getattr(resolve, "specialize", None)
  return r


def _np_fn(fn):
  """NumPy resolver of a plain function of the arrays (and params)."""
  def resolve(dts, params):
    return (lambda *xs: fn(*xs, **params)) if params else fn
  return resolve


# ----------------------------------------------------------------- eager entry


def make_elementwise_eager(prim, f_small, f_large, thr):
  """Fast eager entry: one dict lookup per call resolves (small run, large run, weak flags) for
  the operand dtypes; the first call of each signature validates with abstract eval. Shapes
  are checked inline on the fast path (equal, or rank-0 operands; binary operands broadcasting
  size-1 axes by a per-shape-pair cache) and by abstract eval otherwise."""
  rs, rl = getattr(f_small, "resolve", None), getattr(f_large, "resolve", None)
  if rs is None or rl is None:
    return registry.make_generic_eager(prim, f_small, f_large, thr)
  ae = prim.abstract_eval
  wf = getattr(prim, "weak_from", 0)
  fast, slow, checked_shapes = {}, {}, {}
  new = object.__new__
  run, retry = registry.quiet_run, registry.quiet_retry  # NumPy FP errors ignored (registry)
  Lazy, fuse_on, fuse_min = fusion.Lazy, fusion.on, fusion.MIN_SIZE
  exact, fchecked = {}, {}

  def deferred(args, params):
    """A pending result (``nbjax.fusion``) of Arrays / pending arrays, or None."""
    sig = []
    for a in args:
      t = type(a)
      if t is Lazy:
        e = a._expr
        if e is None:
          return None
        sig.append((e[2], e[1], a._weak))
      elif t is Array:
        v = a._value
        sig.append((v.shape, v.dtype, a._weak))
      else:
        return None
    pkey = _params_key(params)
    dts = tuple(s[1] for s in sig)
    k = exact.get((dts, pkey))
    if k is None:
      name = registry.exact_kernel(prim, dts, params)
      out_dt = ae(*(ShapedArray((), d) for d in dts), **params).dtype
      k = exact[(dts, pkey)] = (name if fusion.fusable(name, dts, out_dt) else False,
                                rl(dts, params))
    if not k[0]:
      return None
    key = (tuple(sig), pkey)
    out_aval = fchecked.get(key)
    if out_aval is None:  # the validation the unfused entry does (same errors)
      out_aval = ae(*(ShapedArray(*s) for s in sig), **params)
      if len(fchecked) < 4096:
        fchecked[key] = out_aval
    shape = out_aval.shape
    if out_aval.size < fuse_min or any(s[0] != shape and s[0] for s in sig):
      return None
    return fusion.defer(k[0], k[1], out_aval, args)

  def call(f, *xs):
    try:
      return run(f, *xs)
    except RuntimeError as err:
      return retry(err, f, *xs)

  def resolve(vals, params, pkey):
    dts = tuple(v.dtype for v in vals)
    e = slow.get((dts, pkey))
    if e is None:
      avals = [ShapedArray((), d) for d in dts]
      w1 = ae(*avals[:wf], *(a.update(weak_type=True) for a in avals[wf:]), **params).weak_type
      w0 = ae(*avals, **params).weak_type
      e = slow[(dts, pkey)] = (rs(dts, params), rl(dts, params), w1, w0, dts[0])
      if not params and all(d == dts[0] for d in dts):
        fast[dts[0]] = e
    return e

  def general(args, params):
    if fuse_on[0]:
      for a in args:
        t = type(a)
        if t is Lazy or t is Array and a._value.size >= fuse_min:
          r = deferred(args, params)
          if r is not None:
            return r
          break
    vals, ws, foreign = [], [], []
    for a in args:
      if type(a) is Array:
        vals.append(a._value)
        ws.append(a._weak)
      else:
        if registry.extended_eager is not None and isinstance(getattr(a, "dtype", None),
                                                              dtypes.ExtendedDType):
          return registry.extended_eager(prim, args, params)  # key arrays (nbjax.lax.prng)
        v, w = registry.coerce(a, prim)
        vals.append(v if v.flags.c_contiguous else np.array(v, order="C"))
        foreign.append(vals[-1])
        ws.append(w)
    pkey = _params_key(params)
    key = (tuple((v.shape, v.dtype, w) for v, w in zip(vals, ws)), pkey)
    out_aval = checked_shapes.get(key)
    if out_aval is None:  # validate this signature once (broadcasting shapes, dtypes)
      out_aval = ae(*(ShapedArray(*k) for k in key[0]), **params)
      if len(checked_shapes) < 4096:
        checked_shapes[key] = out_aval
    e = resolve(vals, params, pkey)
    out = call(e[0] if out_aval.size < thr else e[1], *vals)
    return _wrap(own(out, foreign) if foreign else out, e[2] if all(ws[wf:]) else e[3])

  if prim.arity == 1:
    pfast = {}

    def eager(x, **params):
      if type(x) is Array:
        v = x._value
        if params:
          k = (v.dtype, *params.items())
          e = pfast.get(k)
          if e is None:  # (validated once with the real aval: errors name its shape)
            ae(ShapedArray(v.shape, v.dtype, x._weak), **params)
            e = pfast[k] = resolve([v], params, _params_key(params))
        else:
          e = fast.get(v.dtype)
        if e is not None:
          if v.size >= fuse_min and fuse_on[0]:
            r = deferred((x,), params)
            if r is not None:
              return r
          a = new(Array)
          try:
            a._value = run(e[0], v) if v.size < thr else run(e[1], v)
          except RuntimeError as err:
            a._value = retry(err, e[0] if v.size < thr else e[1], v)
          a._weak = e[2] if x._weak else e[3]
          a._buf = None
          return a
      return general((x,), params)

  elif prim.arity == 2:
    sizes = {}  # (shape, shape, dtype) -> output size, for operands broadcasting size-1 axes
    same = builtins.min(thr, getattr(prim, "same_shape_min", thr))
    np_bcast = registry.policy(prim)[:2] == ("numpy", "numba")

    def eager(x, y, **params):
      if type(x) is Array and type(y) is Array and not params:
        vx, vy = x._value, y._value
        e = fast.get(vx.dtype)
        if e is not None and vy.dtype is e[4]:
          sx, sy = vx.shape, vy.shape
          if sx == sy:
            n = vx.size
            lim = same
          elif not sy:
            n, lim = vx.size, thr
          elif not sx:
            n, lim = vy.size, thr
          else:
            lim = thr
            n = sizes.get((sx, sy, vx.dtype))
            if n is None:  # validated once per shape pair: general's checks and errors
              out = general((x, y), params)
              if len(sizes) < 4096:  # NumPy's broadcasting loops at every size where the
                # policy's large backend is numba and its kernel gives NumPy's bits: numba
                # copies both operands to full size (1000x1 * 1x1000 float32: 2.0 -> 0.6 ms)
                sizes[(sx, sy, vx.dtype)] = 0 if np_bcast and registry.exact_kernel(
                    prim, (vx.dtype, vy.dtype), {}) else out.size
              return out
          if n >= fuse_min and fuse_on[0]:
            r = deferred((x, y), params)
            if r is not None:
              return r
          a = new(Array)
          try:
            a._value = run(e[0], vx, vy) if n < lim else run(e[1], vx, vy)
          except RuntimeError as err:
            a._value = retry(err, e[0] if n < lim else e[1], vx, vy)
          a._weak = e[2] if (x._weak and y._weak) else e[3]
          a._buf = None
          return a
      return general((x, y), params)

  else:
    checked = {}

    def eager(*args, **params):
      if len(args) == 3 and not params:  # select(p, a, b), clamp(lo, x, hi)
        a, b, c = args
        if type(a) is Array and type(b) is Array and type(c) is Array:
          va, vb, vc = a._value, b._value, c._value
          hit = checked.get((va.dtype, va.shape, vb.dtype, vb.shape, vc.dtype, vc.shape))
          if hit is not None:
            e, small, big = hit
            if big and fuse_on[0]:
              r = deferred(args, params)
              if r is not None:
                return r
            r = new(Array)
            r._value = call(e[0] if small else e[1], va, vb, vc)
            r._weak = e[2] if ((wf or a._weak) and b._weak and c._weak) else e[3]
            r._buf = None
            return r
      if not params and all(type(a) is Array for a in args):
        vals = [a._value for a in args]
        key = tuple([v.dtype for v in vals] + [v.shape for v in vals]) if len(vals) != 3 else \
            (vals[0].dtype, vals[0].shape, vals[1].dtype, vals[1].shape, vals[2].dtype, vals[2].shape)
        hit = checked.get(key)
        if hit is None:
          out_aval = ae(*[ShapedArray(v.shape, v.dtype) for v in vals])
          if len(checked) > 4096:
            checked.clear()
          hit = checked[key] = (resolve(vals, params, ()), out_aval.size < thr,
                                out_aval.size >= fuse_min)
        e, small, big = hit
        if big and fuse_on[0]:
          r = deferred(args, params)
          if r is not None:
            return r
        weak = e[2] if all([a._weak for a in args[wf:]]) else e[3]
        return _wrap(call(e[0] if small else e[1], *vals), weak)
      return general(args, params)
  return eager


# ----------------------------------------------------------------- definition helper

# Backend policies (small backend, large backend, threshold in output elements), chosen by
# measuring every primitive at 1e2..1e7 float32 elements side by side:
NUMPY = ("numpy", "numpy", 1 << 62)  # NumPy's SIMD loops beat libm-bound numba 3-20x at every size
NUMBA = ("numba", "numba", 1 << 62)  # no NumPy equivalent
ARITH = ("numpy", "numba", 1 << 14)  # kernels tie: ufunc dispatch wins small arrays
KERNEL = ("numpy", "numba", 1 << 10)  # numba's one fused pass beats NumPy's several from ~1e3


_dtype_str = functools.cache(str)  # (a dtype's str is slow: the registry sorts by it at import)


def standard_elementwise(name, arity, ok, *, numba, numpy=None, out_dtype=None, policy=None,
                         abstract_eval=None, domain=None, differentiable=True, linear=False,
                         note=None, reference=None, samples=None, tol=None, weak_from=0,
                         bad_params=None, bad_inputs=None, complex_kernel=None,
                         f32_kernel=None, f16_on_f32=True, same_shape_min=None):
  """Define an elementwise primitive: numba kernel (a kernel name or a resolver), NumPy
  backend (a ufunc, a resolver, or None), abstract eval, batching, test metadata.
  ``complex_kernel``/``f32_kernel``: the numba kernels both backends run on complex and on
  float32 operands (float16 too with ``f16_on_f32``)."""
  p = Primitive(name)
  p.arity = arity
  p.weak_from = weak_from
  p.make_eager = make_elementwise_eager
  if same_shape_min is not None:  # (binary: operands of one shape switch to numba earlier)
    p.same_shape_min = same_shape_min
  res = {"numba": _nb(numba, out_dtype) if isinstance(numba, str) else numba}
  if numpy is not None:
    res["numpy"] = _np(numpy) if isinstance(numpy, np.ufunc) else numpy
  own = complex_kernel or f32_kernel
  impls = {k: backend(_with_kernels(r, complex_kernel, f32_kernel, out_dtype, f16_on_f32)
                      if own else r, p)
           for k, r in res.items()}
  if policy is None:
    policy = NUMBA if numpy is None else ARITH
  if note is None and numpy is not None and policy[0] == "numpy":
    note = ("numpy: ufunc SIMD loops beat libm-bound numba" if policy[1] == "numpy"
            else f"numpy < {policy[2]} elements (ufunc dispatch), numba kernels above")
    if same_shape_min is not None:
      note += f" (from {same_shape_min} for two operands of one shape)"
  nb_numpy = _numba_path_numpy(arity, ok) if "numba" in policy[:2] else None
  if nb_numpy:
    note = f"{note}; {nb_numpy}" if note else nb_numpy
  meta = dict(arity=arity, dtypes=sorted(ok[0] if isinstance(ok, list) else ok, key=_dtype_str),
              reference=reference or impls.get("numpy"), domain=domain,
              differentiable=differentiable, linear=linear,
              bad_inputs=bad_inputs or _bad_inputs(arity, ok, bad_params or {}))
  if note:
    meta["note"] = note
  if samples is not None:
    meta["samples"] = samples
  if tol:
    meta["tol"] = tol
  registry.register(
      p, family="elementwise", impls=impls,
      abstract_eval=abstract_eval or nary_abstract_eval(name, ok, out_dtype),
      batch=batching.broadcast_batcher(p) if arity > 1 else batching_unary(p),
      policy=policy, meta=meta)
  return p


def _numba_path_numpy(arity, ok):
  """What NumPy does on an elementwise primitive's numba path (``numba_run``), for its note:
  float16 operands widened to float32 and results rounded back by ``astype`` (``_WORK``:
  numba has no float16), and operands broadcast other than in place (one element) or in
  blocks (``_block_broadcast``: a row/column operand of two, below the threads' threshold)
  copied to full size first (``_broadcast_operands``); an exact kernel under a numpy/numba
  policy leaves broadcasting operands to NumPy's loops at every size (the eager entry's
  ``np_bcast``, ``registry._raw_kernel``)."""
  parts = []
  if F16 in (set().union(*ok) if isinstance(ok, list) else ok):
    parts.append("float16 cast to/from float32 by NumPy")
  if arity > 1:
    parts.append("broadcast operands (but one-element ones and small row/column ones) copied "
                 "full-size by NumPy (exact kernels of a numpy<N<=numba policy: NumPy's "
                 "broadcasting loop at every size instead)")
  return "numba path: " + ", ".join(parts) if parts else None


def batching_unary(p):
  return lambda vals, dims, **params: (p.bind(vals[0], **params), dims[0])


def _bad_inputs(arity, ok, params):
  """Default bad inputs: a rejected dtype; mismatched dtypes and shapes for binary ops
  (worked out when a test asks, not at import)."""
  oks = ok if isinstance(ok, list) else [ok] * arity

  def cases(rng):
    good = sorted(oks[0], key=_dtype_str)[0]
    bad = next((np.dtype(d) for d in (np.bool_, np.int32, np.float32, np.complex64)
                if np.dtype(d) not in oks[0]), None)
    other = next((d for d in sorted(_any, key=_dtype_str) if d not in oks[-1]), None)
    out = []
    if bad is not None:
      out.append(([np.zeros(3, bad)] + [np.zeros(3, good)] * (arity - 1), params, TypeError))
    if arity == 2:
      out.append(([np.zeros((2, 3), good), np.zeros((3, 2), good)], params, TypeError))
      if other is not None:
        out.append(([np.zeros(3, good), np.zeros(3, other)], params, TypeError))
    return out
  return cases


# ----------------------------------------------------------------- NumPy implementations


def _np_sign(x):
  if x.dtype.kind == "f":  # keep -0.0 (np.sign gives +0.0; XLA keeps the sign)
    s = np.sign(x, out=...)
    return np.copysign(s, x, out=s)
  return np.sign(x, out=...)


def _np_exp2(x):  # XLA's exp2: exp(x * log(2)) in x's dtype (np.exp2(3.) is 8, XLA's not)
  t = np.multiply(x, x.dtype.type(np.log(2)), out=...)
  return np.exp(t, out=t)


def _np_logistic(x):
  t = np.negative(x, out=...)
  np.exp(t, out=t)
  np.add(t, 1, out=t)
  return np.divide(1, t, out=t)


def _np_rsqrt(x):
  t = np.sqrt(x, out=...)
  return np.divide(1, t, out=t)


_all = np.logical_and.reduce


def _int64_exponent(y):
  """integer_pow's ``y`` for the kernels: past int64, ``x ** y`` depends only on ``y``'s sign
  and its residue mod 2**62 (floats with ``|x| != 1`` reach inf or 0 long before; odd
  integers' powers repeat with a period dividing 2**62; even ones are 0)."""
  y = int(y)
  return y if -2**62 <= y <= 2**62 else \
      (2**62 + builtins.abs(y) % 2**62) * (1 if y > 0 else -1)


def _np_integer_pow_resolve(dts, params):
  y = _int64_exponent(params["y"])
  if dts[0].kind == "c":  # XLA's complex products and quotient
    return _nb_integer_pow(dts, params)
  if y == 2:
    return lambda x: np.multiply(x, x, out=...)
  return lambda x: _np_integer_pow(x, y)


def _np_round_resolve(dts, params):
  return (lambda x: np.rint(x, out=...)) if int(params["rounding_method"]) == 1 else _np_round_away


def _np_round_away(x):
  t = np.trunc(x, out=...)
  return np.where(np.abs(x - t) >= 0.5, t + np.copysign(1, x), t)


def binary_power(x, n, mul):
  """``x ** n`` for an integer ``n >= 1`` by square-and-multiply: about log2(n) calls of
  ``mul`` (NumPy, StableHLO or matrix products: integer_pow's backends, matrix_power)."""
  acc = None
  while n:
    if n & 1:
      acc = x if acc is None else mul(acc, x)
    n >>= 1
    if n:
      x = mul(x, x)
  return acc


def _np_mul(a, b):
  return np.multiply(a, b, out=...)


def _np_integer_pow(x, y):
  if y == 0:
    return np.ones_like(x)
  acc = binary_power(x, builtins.abs(y), _np_mul)
  if y < 0:
    return np.divide(np.ones((), acc.dtype), acc, out=...)
  return acc.copy() if acc is x and y == 1 else acc


def _np_pow(x, y):
  if y.dtype != x.dtype:
    y = y.astype(x.dtype)
  # NumPy takes sqrt for a constant exponent of 0.5, where C's (and XLA's) pow(-0, .5) is +0
  # and pow(-inf, .5) +inf: the square root, those two fixed (10^4 float32: 73 -> 10 us)
  if x.dtype.kind == "f" and y.size == 1 and y.ndim <= x.ndim and y.reshape(-1)[0] == 0.5:
    r = np.sqrt(x, out=...)
    r += 0  # (-0.0 + 0 is +0.0)
    r[x == -np.inf] = np.inf
    return r
  r = np.power(x, y, out=...)
  if x.dtype.kind == "f" and (y == 0.5).any():  # (an exponent array constant along rows)
    h = y == 0.5
    r = np.where(h & (x == 0), np.zeros((), r.dtype), r)
    r = np.where(h & (x == -np.inf), np.asarray(np.inf, r.dtype), r)
  return r


def _np_mul_resolve(dts, params):
  """NumPy's multiply; complex products equal XLA's (fused) ones up to rounding while finite,
  so only results with an infinity or NaN are recomputed by XLA's formula (numba)."""
  if dts[0].kind != "c":
    return lambda a, b: np.multiply(a, b, out=...)
  exact = numba_run("mul_complex", dts, dts[0])

  def run(a, b):  # (the sum of squares, one BLAS call, is finite iff every product is)
    r = np.multiply(a, b, out=...)
    return r if cmath.isfinite(np.vdot(r, r)) else exact(a, b)
  return run


_np_mul_resolve.ufunc = np.multiply
_np_mul_resolve.numba_for = lambda d: d.kind == "c"


def _np_div(x, y):
  if x.dtype.kind == "f" and _broadcast_divisor(x, y):  # XLA's a / broadcast(b) (``_nb_div``)
    return _np_div_recip(x, y)
  return np.divide(x, y, out=...)


def _np_rem(x, y):
  return np.fmod(x, y, out=...)


def _ints_on_numba(resolve, nb_resolve):
  """NumPy resolver ``resolve`` with integer operands on numba's kernel: NumPy has no
  truncating integer division, and XLA's results for zero (and INT_MIN / -1) divisors took it
  three to ten passes (10 int32: div 7.8 -> 1.4 us, rem 3.6 -> 1.2; 10^6: div 14.5 -> 3.4 ms,
  rem 2.8 -> 2.9)."""
  def r(dts, params):
    return (nb_resolve if dts[0].kind in "iu" else resolve)(dts, params)
  r.numba_for = lambda d: d.kind in "iu"
  return r


def _np_nextafter(x, y):
  r = np.nextafter(x, y, out=...)
  if x.dtype in _HALF:  # NumPy's half nextafter returns x where x == y, C's (and XLA's) y
    return np.where(x == y, y, r)
  return r


def _np_shift(f, view):
  def run(x, y):
    d = x.dtype
    w = (_UNSIGNED if view == "u" else _SIGNED)[d.itemsize]
    return f(x.view(w), y.view(w), out=...).view(d)
  return run


def _np_popcount(x):
  return np.bitwise_count(x.view(_UNSIGNED[x.dtype.itemsize]), out=...).astype(x.dtype)


def _np_clz(x):
  v = x.view(_UNSIGNED[x.dtype.itemsize]).copy()
  for k in (1, 2, 4, 8, 16, 32):
    if k < 8 * x.dtype.itemsize:
      v |= v >> k
  return np.asarray(8 * x.dtype.itemsize - np.bitwise_count(v), x.dtype)


def _np_select_n(which, *cases):
  n = len(cases)
  if n == 1:
    return np.array(cases[0])
  if which.dtype == BOOL:
    return np.where(which, cases[1], cases[0])
  if n == 2:
    return np.where(which >= 1, cases[1], cases[0])
  w = np.clip(which, 0, n - 1)
  if n <= 32:
    return np.asarray(np.choose(w, cases))
  out = np.array(cases[0])
  for k in range(1, n):
    out = np.where(w == k, cases[k], out)
  return out


def _np_clamp(lo, x, hi):
  if x.dtype.kind == "f":  # IEEE max/min, as XLA's clamp
    return _np_fmin(_np_fmax(x, lo), hi)
  return np.minimum(np.maximum(x, lo), hi, out=...)


def _np_real(x):
  return np.array(x.real)


def _np_imag(x):
  return np.array(x.imag)


def _np_conj(x, input_dtype=None):
  if x.dtype.kind == "c":
    return np.conjugate(x, out=...)
  return x.astype(_complex_dtype(x.dtype))


def _np_complex(x, y):
  shape = np.broadcast_shapes(x.shape, y.shape)
  out = np.empty(shape, _complex_dtype(x.dtype))
  out.real = x
  out.imag = y
  return out


def _f2i_bounds(dst):
  info = np.iinfo(dst)
  signed = dst.kind == "i"
  return float(info.min), float(2 ** (8 * dst.itemsize - signed)), dst.type(info.min), dst.type(info.max)


def _np_convert_resolve(dts, params):
  """convert_element_type in NumPy with XLA's semantics (see module docstring)."""
  src, dst = dts[0], np.dtype(params["new_dtype"])
  real = src.kind == "c" and dst.kind != "c"
  if dst == BOOL:
    return (lambda x: np.not_equal(x.real, 0, out=...)) if real else \
        (lambda x: np.not_equal(x, 0, out=...))
  if src.kind in "fc" and dst.kind in "iu":
    w = F32 if src == F16 else _real_dtype(src)
    lo, hi, ilo, ihi = _f2i_bounds(dst)
    with np.errstate(over="ignore"):
      bound = np.array(hi, w)  # a power of two: exact
    signed = dst.kind == "i"

    def run(x):
      if real:
        x = x.real
      if src == F16:
        x = x.astype(F32)
      # common case: every value truncates into range (NaN fails both tests)
      ok = np.abs(x) < bound if signed else (x > -1) & (x < bound)
      if _all(ok, axis=None):
        return x.astype(dst)
      low, high = x <= lo, x >= hi
      out = np.where(low | high | np.isnan(x), 0, x).astype(dst)
      out[low] = ilo
      out[high] = ihi
      return out
    return run
  if real:
    return lambda x: np.array(x.real, dst)
  return lambda x: np.array(x, dst)


_np_convert_impl = backend(_np_convert_resolve)


def _np_convert(x, new_dtype):
  return _np_convert_impl(x, new_dtype=np.dtype(new_dtype), weak_type=False)


def _np_copy(x):
  return np.array(x)


# ----------------------------------------------------------------- numba resolvers


def _nb_round(dts, params):
  return numba_run("round_even" if int(params["rounding_method"]) == 1 else "round_away",
                   dts, dts[0])


def _nb_integer_pow(dts, params):
  d = dts[0]
  y = _int64_exponent(params["y"])
  return numba_run("integer_pow_complex" if d.kind == "c" else "integer_pow", dts, d,
                   extra=(np.int64(y), _WORK.get(d, d).type(1)))


def _nb_pow(dts, params):
  x, y = dts
  return numba_run("pow", dts, x, work=[_WORK.get(x, x)] * 2)


def _broadcast_divisor(x, y):
  """Whether ``y`` is broadcast against ``x`` (its shape is not the result's: a scalar against
  an array, or a size-1 axis against a longer one)."""
  ys, xs = y.shape, x.shape  # ((1,) / (): no value repeated, XLA divides exactly)
  return ys != xs and (not ys and x.size > 1 or y.size < x.size or any(
      b == 1 and a != 1 for a, b in zip(xs, ys)))


def _reciprocal(y):
  """``1 / y`` in ``y``'s dtype (a 0-d divisor's computed in float64 and rounded once more:
  the correctly rounded quotient of float32 or float16 values)."""
  if y.ndim:
    return np.reciprocal(y)
  v = float(y)
  return np.asarray(1.0 / v if v else math.copysign(math.inf, v), y.dtype)


def _nb_div(dts, params):
  k = dts[0].kind
  if k != "f":
    return numba_run("div_int" if k == "i" else "div_uint" if k == "u" else "div", dts, dts[0])
  # XLA's algebraic simplifier computes a real ``a / broadcast(b)`` as ``a * broadcast(1/b)``
  # (the reciprocal rounded in the dtype; bfloat16 gets here as float32): ``x / 3.0``,
  # ``jnp.mean``, softmax's normalisation. Eager results are jit's bits.
  div, mul = numba_run("div", dts, dts[0]), numba_run("mul", dts, dts[0])

  def run(x, y):
    return mul(x, _reciprocal(y)) if _broadcast_divisor(x, y) else div(x, y)
  run.kname = div.kname  # fused loops: "div", or "div_recip" for a broadcast divisor
  return run


def _nb_rem(dts, params):
  k = dts[0].kind
  return numba_run("rem_int" if k == "i" else "rem_uint" if k == "u" else "rem", dts, dts[0])


def _nb_ieee(name):
  """Kernel ``name``, its ``_float`` variant (IEEE max/min: -0 < +0) for float operands."""
  return _nb(lambda d, p: name + ("_float" if d[0].kind == "f" else ""))


def _np_minmax(f, bits):
  """NumPy's maximum/minimum with IEEE's -0 < +0 (XLA's): ``f`` returns its second operand on
  ties, so it is wrong only for the tie (+0, -0) (max) or (-0, +0) (min). A 0-d operand picks
  the safe order; for two arrays, results holding a zero combine both orders bitwise
  (``bits``: and for max, or for min)."""
  neg = f is np.minimum  # the tie f gets wrong has its second operand negative for max

  def run(a, b):
    if a.dtype == F16:  # (NumPy's float16 loop keeps the first operand of a tie: both orders)
      r = f(a, b, out=...)
      if np.count_nonzero(r) == r.size:
        return r
      u = _UNSIGNED[2]
      return bits(r.view(u), f(b, a).view(u), out=r.view(u)).view(F16)
    if b.ndim == 0:
      v = b.item()
      return f(b, a, out=...) if (v == 0 and (math.copysign(1, v) < 0) != neg) else f(a, b, out=...)
    if a.ndim == 0:
      v = a.item()
      return f(b, a, out=...) if (v == 0 and (math.copysign(1, v) < 0) == neg) else f(a, b, out=...)
    r = f(a, b, out=...)
    if np.count_nonzero(r) == r.size:
      return r
    u = _UNSIGNED[a.dtype.itemsize]
    bits(r.view(u), f(b, a).view(u), out=r.view(u))
    return r

  def resolve(dts, params):
    return run if dts[0].kind == "f" else (lambda a, b: f(a, b, out=...))
  return resolve


def _nb_nextafter(dts, params):
  d = dts[0]
  if d not in _HALF:
    return numba_run("nextafter", dts, d)
  u16 = np.dtype(np.uint16)
  bits = numba_run("nextafter_f16", [F32, F32, u16, u16], u16)

  def run(x, y):  # float16/bfloat16 by bits (a float32 round trip would give x back)
    if x.shape != y.shape:
      _, (x, y) = _broadcast_operands([x, y])
    x32, y32 = x.astype(F32), y.astype(F32)
    r = bits(x32, y32, x.view(u16), y.view(u16)).view(d)
    if d != F16:  # the kernel writes float16's NaN
      r[np.isnan(x32) | np.isnan(y32)] = np.nan
    return r
  return run


def _nb_not(dts, params):
  return numba_run("not_bool" if dts[0] == BOOL else "not", dts, dts[0])


def _nb_shift(name, view):
  def resolve(dts, params):
    d = dts[0]
    w = (_UNSIGNED if view == "u" else _SIGNED)[d.itemsize]
    return numba_run(name, dts, d, work=[w, w], work_out=w)
  return resolve


def _nb_popcount(dts, params):
  d = dts[0]
  u = _UNSIGNED[d.itemsize]
  return numba_run("population_count", dts, d, work=[u], work_out=u)


def _nb_clz(dts, params):
  d = dts[0]
  u = _UNSIGNED[d.itemsize]
  return numba_run("clz", dts, d, work=[u], work_out=u)


def _nb_select_n(dts, params):
  return numba_run(f"select_n{len(dts) - 1}", dts, dts[1])


def _nb_conj(dts, params):
  d = dts[0]
  return numba_run("conj" if d.kind == "c" else "convert", dts, _complex_dtype(d))


def _nb_convert(dts, params):
  src, dst = dts[0], np.dtype(params["new_dtype"])
  if dst == F16:  # numba cannot write float16: NumPy's astype rounds once
    return lambda x: _np_convert(x, dst)
  real = src.kind == "c" and dst.kind != "c"
  if dst == BOOL:
    return numba_run("convert_bool_real" if real else "convert_bool", dts, dst)
  if src.kind in "fc" and dst.kind in "iu":
    return numba_run("convert_f2i", dts, dst, extra=_f2i_bounds(dst))
  return numba_run("real" if real else "convert", dts, dst)


# ----------------------------------------------------------------- references (scipy; tests only)


def _scipy(fname, fix_poles=False):
  def ref(x, *rest):
    from scipy import special
    with np.errstate(all="ignore"):
      args = [np.asarray(a, np.float64) for a in (x, *rest)]
      r = getattr(special, fname)(*args)
      if fix_poles:  # XLA: NaN at non-positive integers
        z = args[-1]
        r = np.where((z <= 0) & (z == np.floor(z)), np.nan, r)
    return np.asarray(r).astype(np.asarray(x).dtype)
  return ref


# ----------------------------------------------------------------- samples for params
# Test metadata: ``meta['samples'](rng, dtype)`` builders. Their only caller is the test
# harness (``nbjax.testing``), which installs its ``sample_values`` here when imported.
_sample = None


def _cases(rng, dtype, shapes, domain=None, params=None):
  doms = domain if isinstance(domain, (tuple, list)) else [domain] * len(shapes[0])
  return [([_sample(rng, s, dtype, d) for s, d in zip(ss, doms)], dict(params or {}))
          for ss in shapes]


_U1 = [[()], [(3,)], [(2, 3)], [(0,)]]
_U2 = [[(), ()], [(3,), (3,)], [(2, 3), ()], [(), (2, 3)], [(1, 3), (2, 3)], [(0,), (0,)]]


def _round_samples(rng, dtype):
  out = []
  for m in (RoundingMethod.AWAY_FROM_ZERO, RoundingMethod.TO_NEAREST_EVEN):
    out += _cases(rng, dtype, _U1, params=dict(rounding_method=m))
    out.append(([np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49, -2.51], dtype)], dict(rounding_method=m)))
  return out


def _integer_pow_samples(rng, dtype):
  ys = (0, 1, 2, 3, 5) if np.dtype(dtype).kind in "iu" else (0, 1, 2, 3, -1, -2, 5)
  dom = "small" if np.dtype(dtype).kind in "iu" else "nonzero"
  return [c for y in ys for c in _cases(rng, dtype, [[(3,)], [(2, 3)], [()]], dom, dict(y=y))]


def _pow_samples(rng, dtype):
  out = _cases(rng, dtype, _U2, ("positive", None))
  x = [np.asarray(np.abs(rng.standard_normal((2, 3))) + 0.5, dtype)]
  out.append((x + [rng.integers(-3, 4, (2, 3)).astype(np.int32)], {}))
  return out


def _convert_samples(rng, dtype):
  out = []
  for nd in sorted(_any, key=str):
    out += _cases(rng, dtype, [[(3,)], [()]], params=dict(new_dtype=nd, weak_type=False))
  out += _cases(rng, dtype, [[(2, 3)]], params=dict(new_dtype=np.dtype(dtype), weak_type=True))
  return out


def _select_n_samples(rng, dtype):
  out = []
  for n, wd in ((1, np.int32), (2, np.bool_), (2, np.int32), (3, np.int32)):
    for ws, cs in (((), ()), ((), (2, 3)), ((2, 3), (2, 3)), ((0,), (0,))):
      which = (rng.random(ws) < 0.5 if wd == np.bool_ else rng.integers(-1, n + 1, ws).astype(wd))
      out.append(([np.asarray(which)] + [_sample(rng, cs, dtype) for _ in range(n)], {}))
  return out


def _clamp_samples(rng, dtype):
  out = []
  for ls, xs, hs in (((), (), ()), ((), (2, 3), ()), ((2, 3), (2, 3), (2, 3)), ((), (4,), (4,)),
                     ((), (0,), ())):
    lo = _sample(rng, ls, dtype)
    hi = np.maximum(_sample(rng, hs, dtype), lo) if np.dtype(dtype) != BOOL else \
        np.ones(hs, BOOL)
    out.append(([lo, _sample(rng, xs, dtype), np.asarray(hi, dtype)], {}))
  return out


def _polygamma_samples(rng, dtype):
  out = []
  for shape in ((), (3,), (2, 3)):
    m = rng.integers(0, 4, shape).astype(dtype)
    out.append(([np.asarray(m), np.asarray(rng.uniform(0.5, 4.0, shape), dtype)], {}))
  return out


def _shift_samples(rng, dtype):
  d = np.dtype(dtype)
  out = _cases(rng, dtype, _U2, (None, "shift"))
  x = rng.integers(np.iinfo(d).min, np.iinfo(d).max, (6,), dtype=d, endpoint=True)
  y = np.array([0, 1, 8 * d.itemsize - 1, 8 * d.itemsize, 8 * d.itemsize + 3,
                np.iinfo(d).max], d)
  out.append(([x, y], {}))
  return out


def _int_div_samples(rng, dtype):
  d = np.dtype(dtype)
  out = _cases(rng, dtype, _U2, (None, "nonzero"))
  if d.kind in "iu":
    info = np.iinfo(d)
    vals = [7, 0, 5, info.max, info.min] + ([-7, -7, info.min, info.min] if d.kind == "i" else [])
    dens = [2, 3, 0, 0, 0] + ([2, -2, -1, 0] if d.kind == "i" else [])
    out.append(([np.array(vals, d), np.array(dens, d)], {}))
  return out


# ----------------------------------------------------------------- primitives

_TR = dict(policy=NUMPY)        # transcendental: NumPy at every size
_NB_ONLY = "numba only (NumPy has no {}; reference: scipy.special)"

neg_p = standard_elementwise("neg", 1, _num, numba="neg", numpy=np.negative, linear=True)
sign_p = standard_elementwise("sign", 1, _num, numba="sign", numpy=_np_fn(_np_sign), policy=KERNEL,
                              differentiable=False, complex_kernel="sign_complex")
floor_p = standard_elementwise("floor", 1, _float, numba="floor", numpy=np.floor,
                               differentiable=False)
ceil_p = standard_elementwise("ceil", 1, _float, numba="ceil", numpy=np.ceil, differentiable=False)


class RoundingMethod(enum.IntEnum):
  """Rounding of halfway values in :func:`round`."""
  AWAY_FROM_ZERO = 0
  TO_NEAREST_EVEN = 1


def _round_abstract_eval(x, *, rounding_method):
  if int(rounding_method) not in (0, 1):
    raise ValueError(f"round: rounding_method must be a RoundingMethod, got {rounding_method!r}")
  return nary_abstract_eval("round", _float)(x)


round_p = standard_elementwise("round", 1, _float, numba=_nb_round, numpy=_np_round_resolve,
                               policy=KERNEL,
                               abstract_eval=_round_abstract_eval, differentiable=False,
                               samples=_round_samples, bad_params=dict(rounding_method=0))
is_finite_p = standard_elementwise("is_finite", 1, _float, numba="is_finite", numpy=np.isfinite,
                                   out_dtype=_bool_out, differentiable=False)
_XLA_F32 = ("float64: numpy (ufunc SIMD loops beat libm-bound numba); float32/float16: numba's "
            "vectorised port of XLA's float32 expansion (JAX's bits, faster than NumPy)")
_XLA_F32_ONLY = _XLA_F32.replace("/float16", "").replace("float64:", "float64, float16:")
exp_p = standard_elementwise("exp", 1, _inexact, numba="exp", numpy=np.exp, domain="small",
                             complex_kernel="exp_complex", f32_kernel="exp_f32", note=_XLA_F32,
                             **_TR)
exp2_p = standard_elementwise("exp2", 1, _inexact, numba="exp2", numpy=_np_fn(_np_exp2),
                              domain="small", complex_kernel="exp2_complex",
                              f32_kernel="exp2_f32", f16_on_f32=False, note=_XLA_F32_ONLY,
                              **_TR)
log_p = standard_elementwise("log", 1, _inexact, numba="log", numpy=np.log, domain="positive",
                             complex_kernel="log_complex", f32_kernel="log_f32", note=_XLA_F32,
                             **_TR)
log1p_p = standard_elementwise("log1p", 1, _inexact, numba="log1p", numpy=np.log1p,
                               domain="positive", complex_kernel="log1p_complex",
                               f32_kernel="log1p_f32", note=_XLA_F32, **_TR)
expm1_p = standard_elementwise("expm1", 1, _inexact, numba="expm1", numpy=np.expm1, domain="small",
                               complex_kernel="expm1_complex", f32_kernel="expm1_f32",
                               f16_on_f32=False, note=_XLA_F32_ONLY, **_TR)
tanh_p = standard_elementwise("tanh", 1, _inexact, numba="tanh", numpy=np.tanh,
                              complex_kernel="tanh_complex", f32_kernel="tanh_f32",
                              note=_XLA_F32, **_TR)
logistic_p = standard_elementwise("logistic", 1, _inexact, numba="logistic",
                                  numpy=_np_fn(_np_logistic), complex_kernel="logistic_complex",
                                  f32_kernel="logistic_f32", f16_on_f32=False,
                                  note=_XLA_F32_ONLY, **_TR)
# float8 and the other narrow floats: XLA rounds between the steps of these (exp2 is
# exp(log(2) * x), logistic 1 / (1 + exp(-x)), lgamma's expansion) in the operand's type
for _p in (exp2_p, logistic_p):
  _p.meta["narrow"] = "xla"
# bfloat16 too (exp2, logistic, log1p: a float32 kernel rounded once gave other bits for
# 30-45% of inputs)
for _p in (exp2_p, logistic_p, log1p_p):
  _p.meta["bf16"] = "xla"
sin_p = standard_elementwise("sin", 1, _inexact, numba="sin", numpy=np.sin,
                             complex_kernel="sin_complex", **_TR)
cos_p = standard_elementwise("cos", 1, _inexact, numba="cos", numpy=np.cos,
                             complex_kernel="cos_complex", **_TR)
tan_p = standard_elementwise("tan", 1, _inexact, numba="tan", numpy=np.tan, domain="small",
                             complex_kernel="tan_complex", **_TR)
asin_p = standard_elementwise("asin", 1, _inexact, numba="asin", numpy=np.arcsin, domain="unit",
                              complex_kernel="asin_complex", **_TR)
acos_p = standard_elementwise("acos", 1, _inexact, numba="acos", numpy=np.arccos, domain="unit",
                              complex_kernel="acos_complex", **_TR)
atan_p = standard_elementwise("atan", 1, _inexact, numba="atan", numpy=np.arctan,
                              complex_kernel="atan_complex", **_TR)
sinh_p = standard_elementwise("sinh", 1, _inexact, numba="sinh", numpy=np.sinh, domain="small",
                              complex_kernel="sinh_complex", **_TR)
cosh_p = standard_elementwise("cosh", 1, _inexact, numba="cosh", numpy=np.cosh, domain="small",
                              complex_kernel="cosh_complex", **_TR)
asinh_p = standard_elementwise("asinh", 1, _inexact, numba="asinh", numpy=np.arcsinh,
                               complex_kernel="asinh_complex", **_TR)
acosh_p = standard_elementwise("acosh", 1, _inexact, numba="acosh", numpy=np.arccosh, domain="gt1",
                               complex_kernel="acosh_complex", **_TR)
atanh_p = standard_elementwise("atanh", 1, _inexact, numba="atanh", numpy=np.arctanh, domain="unit",
                               complex_kernel="atanh_complex", **_TR)
sqrt_p = standard_elementwise("sqrt", 1, _inexact, numba="sqrt", numpy=np.sqrt, domain="positive",
                              policy=KERNEL, complex_kernel="sqrt_complex")
rsqrt_p = standard_elementwise("rsqrt", 1, _inexact, numba="rsqrt", numpy=_np_fn(_np_rsqrt),
                               domain="positive", policy=KERNEL, complex_kernel="rsqrt_complex")
cbrt_p = standard_elementwise("cbrt", 1, _float, numba="cbrt", numpy=np.cbrt, **_TR)
abs_p = standard_elementwise("abs", 1, _sint | _inexact, numba="abs", numpy=np.abs,
                             out_dtype=_real_dtype, domain="nonzero", complex_kernel="abs_complex",
                             abstract_eval=nary_abstract_eval("abs", _sint | _inexact, _real_dtype,
                                                              narrow_ints=False))
square_p = standard_elementwise("square", 1, _num, numba="square", numpy=np.square,
                                complex_kernel="square_complex")


def _integer_pow_abstract_eval(x, *, y):
  if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
    raise TypeError(f"integer_pow requires an integer exponent y, got {y!r}")
  out = nary_abstract_eval("integer_pow", _num)(x)
  if y < 0 and x.dtype in _int:
    raise TypeError(f"Integers cannot be raised to negative powers, got integer_pow({x}, {y})")
  return out


integer_pow_p = standard_elementwise(
    "integer_pow", 1, _num, numba=_nb_integer_pow, numpy=_np_integer_pow_resolve,
    abstract_eval=_integer_pow_abstract_eval, samples=_integer_pow_samples,
    bad_params=dict(y=2))


def _pow_abstract_eval(x, y):
  check_dtypes("pow", (x, y), [_inexact, _num])
  if not (y.dtype == x.dtype or y.dtype in _int):
    raise TypeError("the first argument to pow must have an inexact dtype (float or complex), and "
                    "the second argument must have an inexact or integer dtype, and two inexact "
                    f"dtypes must match, but got {x.dtype} and {y.dtype} respectively.")
  shape = broadcasting_shape("pow", x.shape, y.shape)
  return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


pow_p = standard_elementwise("pow", 2, [_inexact, _num], numba=_nb_pow, numpy=_np_fn(_np_pow),
                             abstract_eval=_pow_abstract_eval, samples=_pow_samples,
                             complex_kernel="pow_complex", **_TR)
# add/sub/mul of two operands of one shape: numba's kernel from 8192 elements (float32 1.2e4:
# NumPy 3.7-4.3 us, numba 2.8-3.0; with a 0-d operand NumPy's loop stays faster up to the
# ARITH switch; comparisons and bitwise ops too; 2026-12-01, others paused)
_SAME = 1 << 13
add_p = standard_elementwise("add", 2, _num, numba="add", numpy=np.add, linear=True,
                             same_shape_min=_SAME)
sub_p = standard_elementwise("sub", 2, _num, numba="sub", numpy=np.subtract, linear=True,
                             same_shape_min=_SAME)
mul_p = standard_elementwise("mul", 2, _num,
                             numba=_nb(lambda d, p: "mul_complex" if d[0].kind == "c" else "mul"),
                             numpy=_np_mul_resolve, same_shape_min=_SAME)


def _np_div_recip(x, y):
  return np.multiply(x, _reciprocal(y), out=...)


def _np_div_specialize(avals, params):
  """NumPy's division for one real signature (the hot path and eager programs): the ufunc,
  or, for a broadcast divisor, the product with its reciprocal (``_nb_div``)."""
  x, y = avals
  if x.dtype.kind != "f" or y.dtype != x.dtype:  # (bfloat16: kind "V", a float32 round trip)
    return None
  return _np_div_recip if _broadcast_divisor(x, y) else np.divide


_np_div_resolve = _ints_on_numba(_np_fn(_np_div), _nb_div)
_np_div_resolve.specialize = _np_div_specialize
div_p = standard_elementwise("div", 2, _num, numba=_nb_div, numpy=_np_div_resolve,
                             domain=(None, "nonzero"), samples=_int_div_samples,
                             complex_kernel="div_complex")
div_p.meta["note"] += ("; a real divisor broadcast against the dividend: the product with its "
                       "reciprocal (the reciprocal by NumPy, the product by the mul kernel, as "
                       "XLA compiles it); integers: numba at every size")
rem_p = standard_elementwise("rem", 2, _int | _float, numba=_nb_rem,
                             numpy=_ints_on_numba(_np_fn(_np_rem), _nb_rem),
                             domain=(None, "nonzero"), samples=_int_div_samples, **_TR)
rem_p.meta["note"] += "; integers: numba at every size"
_np_fmax = _np_minmax(np.maximum, np.bitwise_and)((F32,), None)
_np_fmin = _np_minmax(np.minimum, np.bitwise_or)((F32,), None)
# (KERNEL: NumPy's two-array float maximum needs a second pass for signed zeros; float32
# (x, y) at 1e3 / 1e4 / 1e5: numba 1.9 / 3.9 / 25 us, NumPy 3.1 / 13.5 / 116, 2026-12-01)
max_p = standard_elementwise("max", 2, _any, numba=_nb_ieee("max"),
                             numpy=_np_minmax(np.maximum, np.bitwise_and),
                             complex_kernel="max_complex", policy=KERNEL)
min_p = standard_elementwise("min", 2, _any, numba=_nb_ieee("min"),
                             numpy=_np_minmax(np.minimum, np.bitwise_or),
                             complex_kernel="min_complex", policy=KERNEL)
atan2_p = standard_elementwise("atan2", 2, _inexact, numba="atan2", numpy=np.arctan2,
                               domain=(None, "nonzero"), complex_kernel="atan2_complex", **_TR)
nextafter_p = standard_elementwise("nextafter", 2, _float, numba=_nb_nextafter,
                                   numpy=_np_fn(_np_nextafter), differentiable=False)
nextafter_p.meta["bf16"] = "native"  # by bits (registry.bf16_mode)
nextafter_p.meta["narrow"] = "xla"  # (no kernel steps through float8 bits)
_cmp = dict(out_dtype=_bool_out, differentiable=False)
eq_p = standard_elementwise("eq", 2, _any, numba="eq", numpy=np.equal, **_cmp)
ne_p = standard_elementwise("ne", 2, _any, numba="ne", numpy=np.not_equal, **_cmp)
lt_p = standard_elementwise("lt", 2, _ordered, numba="lt", numpy=np.less, **_cmp)
le_p = standard_elementwise("le", 2, _ordered, numba="le", numpy=np.less_equal, **_cmp)
gt_p = standard_elementwise("gt", 2, _ordered, numba="gt", numpy=np.greater, **_cmp)
ge_p = standard_elementwise("ge", 2, _ordered, numba="ge", numpy=np.greater_equal, **_cmp)
_bits = dict(differentiable=False)
not_p = standard_elementwise("not", 1, _bool_or_int, numba=_nb_not, numpy=np.invert, **_bits)
and_p = standard_elementwise("and", 2, _bool_or_int, numba="and", numpy=np.bitwise_and, **_bits)
or_p = standard_elementwise("or", 2, _bool_or_int, numba="or", numpy=np.bitwise_or, **_bits)
xor_p = standard_elementwise("xor", 2, _bool_or_int, numba="xor", numpy=np.bitwise_xor, **_bits)
population_count_p = standard_elementwise(
    "population_count", 1, _int, numba=_nb_popcount, numpy=_np_fn(_np_popcount), policy=KERNEL,
    **_bits)
clz_p = standard_elementwise("clz", 1, _int, numba=_nb_clz, numpy=_np_fn(_np_clz),
                             policy=KERNEL, **_bits)
# narrow ints: XLA's clz counts within the 4 or 2 bits; its population_count counts int4's
# int8 bits (-8 has 5) but int2's own: no widened kernel does both
clz_p.meta["narrow"] = population_count_p.meta["narrow"] = "xla"
shift_left_p = standard_elementwise(
    "shift_left", 2, _int, numba=_nb_shift("shift_left", "u"),
    numpy=_np_fn(_np_shift(np.left_shift, "u")), domain=(None, "shift"), samples=_shift_samples,
    **_bits)
shift_right_arithmetic_p = standard_elementwise(
    "shift_right_arithmetic", 2, _int, numba=_nb_shift("shift_right_arithmetic", "s"),
    numpy=_np_fn(_np_shift(np.right_shift, "s")), domain=(None, "shift"), samples=_shift_samples,
    **_bits)
shift_right_logical_p = standard_elementwise(
    "shift_right_logical", 2, _int, numba=_nb_shift("shift_right_logical", "u"),
    numpy=_np_fn(_np_shift(np.right_shift, "u")), domain=(None, "shift"), samples=_shift_samples,
    **_bits)
shift_right_logical_p.meta["narrow"] = "bits"  # int4 -8 >> 1 is 4: shifts the 4 bits (registry)
shift_right_arithmetic_p.meta["narrow"] = "sbits"  # uint4 8 >> 1 is 12: fills with bit 3
erf_p = standard_elementwise("erf", 1, _float, numba="erf", reference=_scipy("erf"),
                             f32_kernel="erf_f32",
                             note=_NB_ONLY.format("erf") + "; float32/float16: XLA's float32 "
                             "rational interpolant (JAX's bits)")
erfc_p = standard_elementwise("erfc", 1, _float, numba="erfc", reference=_scipy("erfc"),
                              note=_NB_ONLY.format("erfc"))
erf_inv_p = standard_elementwise("erf_inv", 1, _float,
                                 numba=_nb(lambda d, p: "erf_inv" if d[0] == F64 else "erf_inv_f32"),
                                 reference=_scipy("erfinv"),
                                 domain="unit", note=_NB_ONLY.format("erf_inv") + "; XLA's "
                                 "polynomials (JAX's bits) in float32 and float64")
lgamma_p = standard_elementwise("lgamma", 1, _float, numba="lgamma", reference=_scipy("gammaln"),
                                domain="positive", f32_kernel="lgamma_f32",
                                note=_NB_ONLY.format("lgamma") + "; XLA's Lanczos expansion "
                                "(JAX's bits) in float32 and float64")
lgamma_p.meta["narrow"] = "xla"
digamma_p = standard_elementwise("digamma", 1, _float, numba="digamma",
                                 reference=_scipy("digamma", fix_poles=True), domain="positive",
                                 f32_kernel="digamma_f32",
                                 note=_NB_ONLY.format("digamma") + "; XLA's Lanczos expansion "
                                 "(JAX's bits) in float32 and float64")
digamma_p.meta["narrow"] = "xla"
polygamma_p = standard_elementwise("polygamma", 2, _float, numba="polygamma",
                                   reference=_scipy("polygamma", fix_poles=True),
                                   samples=_polygamma_samples, note=_NB_ONLY.format("polygamma"))
real_p = standard_elementwise("real", 1, _complex, numba="real", numpy=_np_fn(_np_real),
                              out_dtype=_real_dtype, linear=True)
imag_p = standard_elementwise("imag", 1, _complex, numba="imag", numpy=_np_fn(_np_imag),
                              out_dtype=_real_dtype, linear=True)


def _conj_abstract_eval(x, *, input_dtype=None):
  return nary_abstract_eval("conj", _complex_elem | _complex, _complex_dtype)(x)


conj_p = standard_elementwise("conj", 1, _complex_elem | _complex, numba=_nb_conj,
                              numpy=_np_fn(_np_conj), abstract_eval=_conj_abstract_eval,
                              linear=True, policy=KERNEL,
                              samples=lambda rng, d: _cases(rng, d, _U1, params=dict(input_dtype=d)))
complex_p = standard_elementwise("complex", 2, _complex_elem, numba="complex",
                                 numpy=_np_fn(_np_complex), out_dtype=_complex_dtype, linear=True,
                                 policy=KERNEL)


def _select_n_abstract_eval(which, *cases):
  # JAX's checks, in its order and words (shapes, then dtypes; the operation is "select")
  if not cases:
    raise TypeError("select must have at least one case")
  if any(c.shape != cases[0].shape for c in cases[1:]):
    raise TypeError(f"select cases must have the same shapes, got "
                    f"[{', '.join(str(c.shape) for c in cases)}].")
  if which.shape and which.shape != cases[0].shape:
    raise TypeError("select `which` must be scalar or have the same shape as cases, got "
                    f"`which` shape {which.shape} but case shape {cases[0].shape}.")
  check_dtypes("select_n", cases, _any)
  if len(cases) > 1:
    check_same_dtypes("select", *cases)
  if which.dtype not in _bool | _int:
    raise TypeError(f"select `which` must be boolean or integer type, got {which.dtype.name}.")
  if which.dtype == BOOL and len(cases) > 2:
    raise TypeError("select with boolean `which` cannot have > 2 cases.")
  return ShapedArray(cases[0].shape, cases[0].dtype, all(c.weak_type for c in cases))


select_n_p = standard_elementwise(
    "select_n", 3, _any, numba=_nb_select_n, numpy=_np_fn(_np_select_n),
    abstract_eval=_select_n_abstract_eval, samples=_select_n_samples, weak_from=1, policy=KERNEL,
    bad_inputs=lambda rng: [
        ([np.zeros(3, np.float32), np.zeros(3), np.zeros(3)], {}, TypeError),
        ([np.zeros(3, np.bool_), np.zeros(3), np.zeros(3), np.zeros(3)], {}, TypeError),
        ([np.zeros(3, np.int32), np.zeros(3), np.zeros(4)], {}, TypeError),
        ([np.zeros(2, np.int32), np.zeros(3), np.zeros(3)], {}, TypeError),
        ([np.zeros(3, np.int32), np.zeros(3), np.zeros(3, np.float32)], {}, TypeError)])
select_n_p.arity = None  # variadic: ``select_n(which, *cases)``
select_n_p.meta["error_names"] = ("select",)  # JAX's messages name the operation "select"


def _clamp_abstract_eval(lo, x, hi):
  check_dtypes("clamp", (lo, x, hi), _ordered)
  check_same_dtypes("clamp", lo, x, hi)
  for nm, a in (("min", lo), ("max", hi)):
    if a.shape and a.shape != x.shape:
      raise TypeError(f"clamp requires {nm}.shape == operand.shape or {nm}.shape == (), got "
                      f"{nm}.shape={a.shape}, operand.shape={x.shape}.")
  return ShapedArray(x.shape, x.dtype, lo.weak_type and x.weak_type and hi.weak_type)


clamp_p = standard_elementwise("clamp", 3, _ordered, numba=_nb_ieee("clamp"),
                               numpy=_np_fn(_np_clamp),
                               abstract_eval=_clamp_abstract_eval, samples=_clamp_samples,
                               policy=KERNEL,
                               bad_inputs=lambda rng: [
                                   ([np.zeros(()), np.zeros(3), np.zeros(2)], {}, TypeError),
                                   ([np.zeros((), np.float32), np.zeros(3), np.zeros(())], {},
                                    TypeError),
                                   ([np.zeros(3, np.complex64)] * 3, {}, TypeError)])


def _convert_narrow(resolve):
  """convert_element_type's own rule for the narrow ml_dtypes types (the registry's narrow
  "own"): a narrow operand is widened exactly (``registry._WIDE``) and converted from there; a
  narrow float result is ml_dtypes' rounding of the float64 one (once, to nearest even, as
  XLA); a narrow integer result is the int8/uint8 one, clamped to its range from a float
  operand (XLA saturates) and wrapped from an integer one."""
  def r(dts, params):
    src, dst = dts[0], np.dtype(params["new_dtype"])
    if src not in _NARROW_PROXY and dst not in _NARROW_PROXY:
      return resolve(dts, params)
    ws = registry._WIDE.get(src, src) if src in _NARROW_PROXY else src
    wd = (F64 if dtypes.is_float(dst) else registry._WIDE[dst]) if dst in _NARROW_PROXY else dst
    inner = resolve((ws,), {**params, "new_dtype": wd})
    clip = (dtypes.iinfo(dst).min, dtypes.iinfo(dst).max) if dst in _NARROW_INTS and \
        ws.kind in "fc" else None

    def run(x):
      y = inner(x if ws is src else x.astype(ws))
      if wd is dst:
        return y
      if clip is not None:
        y = np.clip(y, *clip)
      return np.asarray(y).astype(dst)
    return run
  r.__dict__.update(resolve.__dict__)
  return r


def _convert_abstract_eval(x, *, new_dtype, weak_type):
  d = np.dtype(new_dtype)
  if not accepts(_any, d):
    raise TypeError(f"convert_element_type: new_dtype {d} is not a valid nbjax array type "
                    "(only numeric and bool dtypes are supported)")
  if x.dtype == dtypes.float0:
    raise TypeError(_FLOAT0_MSG.format("convert_element_type"))
  check_dtypes("convert_element_type", (x,), _any)
  return ShapedArray(x.shape, d, bool(weak_type))


convert_element_type_p = standard_elementwise(
    "convert_element_type", 1, _any, numba=_convert_narrow(_nb_convert),
    numpy=_convert_narrow(_np_convert_resolve),
    abstract_eval=_convert_abstract_eval, samples=_convert_samples,
    bad_inputs=lambda rng: [([np.zeros(3)], dict(new_dtype=np.dtype("O"), weak_type=False),
                             TypeError)],
    note="numpy < 16384 elements (ufunc dispatch), numba kernels above; float16 results are "
         "rounded by NumPy's astype (numba has no float16); narrow ml_dtypes types: from/to "
         "their widened type, results rounded (floats) or wrapped/clamped (ints) by ml_dtypes")
convert_element_type_p.meta["narrow"] = "own"
copy_p = standard_elementwise("copy", 1, _any, numba="copy", numpy=_np_fn(_np_copy), linear=True)
# stop_gradient: the identity whose derivative is zero (eager Arrays skip the bind entirely)
stop_gradient_p = standard_elementwise("stop_gradient", 1, _any, numba="copy",
                                       numpy=_np_fn(_np_copy), differentiable=False)

# add_any: tangent accumulation (JAX's add_jaxvals); same kernel as add, any dtype
add_any_p = standard_elementwise("add_any", 2, _num, numba="add", numpy=np.add, linear=True,
                                 same_shape_min=_SAME)


# ----------------------------------------------------------------- wrappers
# With no transformation active the wrappers call the eager entry directly (what ``bind``
# does on the eval trace, minus argument packing).

_ctx, _EVAL = core._ctx, core.eval_trace
_PY = (int, float, complex, bool)
_weak_consts = {}


def _scalars_like(x, y):
  """lax accepts Python scalars next to arrays: they take the array's dtype, weakly."""
  tx, ty = type(x), type(y)
  if tx in _PY and ty not in _PY:
    x = _as_weak(x, y)
  elif ty in _PY and tx not in _PY:
    y = _as_weak(y, x)
  return x, y


def _as_weak(s, like):
  if core.h2d_guard is not None:
    core.host_to_device(s)  # (JAX's transfer guard)
  d = like._value.dtype if type(like) is Array else core.get_aval(like).dtype
  if type(s) is bool:
    return Array._new(np.asarray(s, d), False)
  key = (s, d)
  a = _weak_consts.get(key) if s else None  # (0.0 and -0.0 are equal keys: not cached)
  if a is None:
    try:
      v = np.asarray(s, d)
    except (OverflowError, TypeError):
      raise TypeError(f"Python scalar {s!r} cannot be converted to the dtype {d} of the other "
                      "operand") from None
    a = Array._new(v, True)
    if s:
      if len(_weak_consts) > 1024:
        _weak_consts.clear()
      _weak_consts[key] = a
  return a


def _reraise_invalid(p, args, e):
  """Re-raise ``e``, as JAX's error naming the position when an operand is no JAX value."""
  err = core.invalid_value_error(p.name, args)
  if err is None:
    raise e
  raise err from e


def _un(p, doc, accuracy=False):
  if accuracy:
    def f(x, accuracy=None):
      try:
        return p.eager(x) if _ctx.trace is _EVAL else p.bind(x)
      except TypeError as e:
        _reraise_invalid(p, (x,), e)
  else:
    def f(x):
      try:
        return p.eager(x) if _ctx.trace is _EVAL else p.bind(x)
      except TypeError as e:
        _reraise_invalid(p, (x,), e)
  f.__name__ = f.__qualname__ = p.name
  f.__doc__ = doc
  return f


def _bin(p, doc, name=None):
  def f(x, y):
    try:
      if type(x) is not Array or type(y) is not Array:
        x, y = _scalars_like(x, y)
      return p.eager(x, y) if _ctx.trace is _EVAL else p.bind(x, y)
    except TypeError as e:
      _reraise_invalid(p, (x, y), e)
  f.__name__ = f.__qualname__ = name or p.name
  f.__doc__ = doc
  return f


neg = _un(neg_p, r"""Elementwise negation: :math:`-x`.""")
sign = _un(sign_p, r"""Elementwise sign: -1, 0 or 1 (``x/|x|`` for complex); NaN and signed zeros kept.""")
floor = _un(floor_p, r"""Elementwise floor: :math:`\lfloor x \rfloor`.""")
ceil = _un(ceil_p, r"""Elementwise ceiling: :math:`\lceil x \rceil`.""")
is_finite = _un(is_finite_p, r"""Elementwise :math:`\mathrm{isfinite}(x)`: False for inf and NaN.""")
exp = _un(exp_p, r"""Elementwise exponential: :math:`e^x`.""", True)
exp2 = _un(exp2_p, r"""Elementwise base-2 exponential: :math:`2^x`.""", True)
log = _un(log_p, r"""Elementwise natural logarithm: :math:`\log(x)`.""", True)
log1p = _un(log1p_p, r"""Elementwise :math:`\log(1 + x)`.""", True)
expm1 = _un(expm1_p, r"""Elementwise :math:`e^x - 1`.""", True)
tanh = _un(tanh_p, r"""Elementwise hyperbolic tangent: :math:`\tanh(x)`.""", True)
logistic = _un(logistic_p, r"""Elementwise logistic (sigmoid): :math:`\frac{1}{1 + e^{-x}}`.""", True)
sin = _un(sin_p, r"""Elementwise sine: :math:`\sin(x)`.""", True)
cos = _un(cos_p, r"""Elementwise cosine: :math:`\cos(x)`.""", True)
tan = _un(tan_p, r"""Elementwise tangent: :math:`\tan(x)`.""", True)
asin = _un(asin_p, r"""Elementwise arc sine: :math:`\mathrm{asin}(x)`.""")
acos = _un(acos_p, r"""Elementwise arc cosine: :math:`\mathrm{acos}(x)`.""")
atan = _un(atan_p, r"""Elementwise arc tangent: :math:`\mathrm{atan}(x)`.""")
sinh = _un(sinh_p, r"""Elementwise hyperbolic sine: :math:`\sinh(x)`.""")
cosh = _un(cosh_p, r"""Elementwise hyperbolic cosine: :math:`\cosh(x)`.""")
asinh = _un(asinh_p, r"""Elementwise inverse hyperbolic sine: :math:`\mathrm{asinh}(x)`.""")
acosh = _un(acosh_p, r"""Elementwise inverse hyperbolic cosine: :math:`\mathrm{acosh}(x)`.""")
atanh = _un(atanh_p, r"""Elementwise inverse hyperbolic tangent: :math:`\mathrm{atanh}(x)`.""")
sqrt = _un(sqrt_p, r"""Elementwise square root: :math:`\sqrt{x}`.""", True)
rsqrt = _un(rsqrt_p, r"""Elementwise reciprocal square root: :math:`1 / \sqrt{x}`.""", True)
cbrt = _un(cbrt_p, r"""Elementwise cube root: :math:`\sqrt[3]{x}`.""", True)
abs = _un(abs_p, r"""Elementwise absolute value: :math:`|x|` (real dtype for complex input).""")
square = _un(square_p, r"""Elementwise square: :math:`x^2`.""")
bitwise_not = _un(not_p, r"""Elementwise NOT: :math:`\neg x` (logical for bool).""")
population_count = _un(population_count_p,
                       r"""Elementwise popcount: the number of set bits (two's complement).""")
clz = _un(clz_p, r"""Elementwise count of leading zero bits (in the dtype's width).""")
erf = _un(erf_p, r"""Elementwise error function: :math:`\mathrm{erf}(x)`.""")
erfc = _un(erfc_p, r"""Elementwise complementary error function: :math:`1 - \mathrm{erf}(x)`.""")
erf_inv = _un(erf_inv_p, r"""Elementwise inverse error function: :math:`\mathrm{erf}^{-1}(x)`.""")
lgamma = _un(lgamma_p, r"""Elementwise log of the absolute gamma function: :math:`\log|\Gamma(x)|`.""")
digamma = _un(digamma_p, r"""Elementwise digamma: :math:`\psi(x) = \frac{d}{dx}\log\Gamma(x)`.""")
real = _un(real_p, r"""Elementwise real part: :math:`\mathrm{Re}(x)`.""")
imag = _un(imag_p, r"""Elementwise imaginary part: :math:`\mathrm{Im}(x)`.""")
copy = _un(copy_p, """A copy of ``x`` (a fresh buffer).""")


def _stop_gradient(x):
  if isinstance(x, ad.JVPTracer):
    return _stop_gradient(x.primal)
  if type(x) is tape.TapeTracer:  # grad's recording: the recorded value, off the tape
    return _stop_gradient(x.val)
  if type(x) is Array or not dtypes.is_inexact(core.get_aval(x).dtype):
    return x  # an immutable concrete value, or one with no tangent space
  return stop_gradient_p.bind(x)


def stop_gradient(x):
  """The identity on ``x`` (an array or a pytree of arrays), but a constant to every level of
  autodiff: its jvp is zero and no cotangent flows back through it.

  >>> nbjax.grad(lambda x: lax.stop_gradient(x) ** 2)(3.0)   # 0.0
  """
  if type(x) is Array:  # (eager: an immutable concrete value is its own stopped gradient)
    return x
  from nbjax._tree_util import tree_map
  return tree_map(_stop_gradient, x)

add = _bin(add_p, r"""Elementwise addition: :math:`x + y`.""")
sub = _bin(sub_p, r"""Elementwise subtraction: :math:`x - y`.""")


def mul(x, y, *, out_dtype=None):
  r"""Elementwise multiplication: :math:`x \times y`. ``out_dtype`` (JAX's): operands of
  different dtypes multiplied in the widest of theirs and ``out_dtype``, rounded once to
  ``out_dtype``."""
  if out_dtype is None:
    if type(x) is not Array or type(y) is not Array:
      x, y = _scalars_like(x, y)
    return mul_p.eager(x, y) if _ctx.trace is _EVAL else mul_p.bind(x, y)
  return _mul_out_dtype(x, y, out_dtype)


def _mul_out_dtype(x, y, out_dtype):
  out = dtypes.canonicalize_dtype(np.dtype(out_dtype))
  dx, dy = (None if type(v) in _PY else core.get_aval(v).dtype for v in (x, y))
  wide = out
  for d in (dx, dy):
    if d is not None and d != wide:
      wide = dtypes.standard_promote_types(wide, d)  # (even when promotion is strict)
  x, y = (convert_element_type(v, wide) for v in (x, y))
  r = mul_p.bind(x, y)
  return r if wide == out else convert_element_type(r, out)
div = _bin(div_p, r"""Elementwise division: :math:`x / y` (integers truncate toward zero; ``x // 0`` is -1).""")
rem = _bin(rem_p, r"""Elementwise remainder with the sign of the dividend (C ``fmod``); ``x % 0`` is ``x``.""")
max = _bin(max_p, r"""Elementwise maximum: :math:`\max(x, y)`, propagating NaN.""")
min = _bin(min_p, r"""Elementwise minimum: :math:`\min(x, y)`, propagating NaN.""")
atan2 = _bin(atan2_p, r"""Elementwise arc tangent of :math:`x / y` in the quadrant of ``(y, x)``.""")
nextafter = _bin(nextafter_p, r"""The next representable value after ``x1`` toward ``x2``.""")
eq = _bin(eq_p, r"""Elementwise equals: :math:`x = y`.""")
ne = _bin(ne_p, r"""Elementwise not-equals: :math:`x \neq y`.""")
lt = _bin(lt_p, r"""Elementwise less-than: :math:`x < y`.""")
le = _bin(le_p, r"""Elementwise less-than-or-equals: :math:`x \leq y`.""")
gt = _bin(gt_p, r"""Elementwise greater-than: :math:`x > y`.""")
ge = _bin(ge_p, r"""Elementwise greater-than-or-equals: :math:`x \geq y`.""")
bitwise_and = _bin(and_p, r"""Elementwise AND: :math:`x \wedge y`.""", "bitwise_and")
bitwise_or = _bin(or_p, r"""Elementwise OR: :math:`x \vee y`.""", "bitwise_or")
bitwise_xor = _bin(xor_p, r"""Elementwise exclusive OR: :math:`x \oplus y`.""", "bitwise_xor")
shift_left = _bin(shift_left_p, r"""Elementwise left shift: :math:`x \ll y` (0 once ``y`` reaches the bit width).""")
shift_right_arithmetic = _bin(shift_right_arithmetic_p,
                              r"""Elementwise arithmetic right shift: :math:`x \gg y`, filling with the sign bit.""")
shift_right_logical = _bin(shift_right_logical_p,
                           r"""Elementwise logical right shift: :math:`x \gg y`, filling with zeros.""")
polygamma = _bin(polygamma_p, r"""Elementwise polygamma :math:`\psi^{(m)}(x)` for integer-valued ``m >= 0``.""")
complex = _bin(complex_p, r"""Elementwise complex number :math:`x + i y` from float32/float64 parts.""")
add_any = _bin(add_any_p, """Adds tangents/cotangents (``add_jaxvals``); any numeric dtype.""")


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
  r"""Elementwise round to the nearest integer; halfway cases per ``rounding_method``."""
  return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


def reciprocal(x):
  r"""Elementwise reciprocal: :math:`1 / x`."""
  return integer_pow(x, -1)


def integer_pow(x, y):
  r"""Elementwise power :math:`x^y` for a static Python integer ``y`` (by repeated squaring)."""
  if type(y) is float and y.is_integer():  # JAX takes an integral float exponent too
    y = int(y)
  return integer_pow_p.bind(x, y=operator.index(y))


def pow(x, y):
  r"""Elementwise power :math:`x^y`: float/complex ``x``, ``y`` of the same dtype or integer."""
  if type(x) in _PY and type(y) not in _PY:
    x = _as_weak(x, y) if core.get_aval(y).dtype in _inexact else x
  elif type(y) in _PY and type(x) not in _PY:
    y = _as_weak(y, x)
  return pow_p.bind(x, y)


def conj(x):
  r"""Elementwise complex conjugate :math:`\overline{x}` (complex result for real input)."""
  return conj_p.bind(x, input_dtype=core.get_aval(x).dtype)


def select_n(which, *cases):
  """Chooses ``cases[which]`` elementwise; ``which`` is bool (two cases) or integer.

  ``which`` is a scalar or has the cases' shape; all cases share shape and dtype. Values of
  ``which`` outside ``[0, len(cases))`` pick the first/last case (as JAX's lowering)."""
  if not cases:
    raise ValueError("select_n() must have at least one case")
  return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
  """Elementwise ``on_true if pred else on_false`` (``select_n(pred, on_false, on_true)``)."""
  if _ctx.trace is _EVAL:
    return select_n_p.eager(pred, on_false, on_true)
  return select_n_p.bind(pred, on_false, on_true)


def clamp(min, x, max):
  r"""Elementwise clamp :math:`\min(\max(x, \mathit{min}), \mathit{max})`; bounds may be scalars."""
  if type(x) in _PY:
    x = _as_weak(x, min if type(min) not in _PY else max)
  if type(min) in _PY:
    min = _as_weak(min, x)
  if type(max) in _PY:
    max = _as_weak(max, x)
  return clamp_p.eager(min, x, max) if _ctx.trace is _EVAL else clamp_p.bind(min, x, max)


def convert_element_type(operand, new_dtype):
  """Elementwise cast to ``new_dtype`` (canonicalized: 64-bit types need x64).

  Float to integer maps NaN to 0 and saturates out-of-range values; complex to real keeps
  the real part. Returns ``operand`` itself when nothing changes."""
  if new_dtype is None:
    raise ValueError("dtype must be specified.")
  if type(operand) is EArray:  # to and from a user's extended dtype (nbjax.earray)
    return earray.from_edtype(operand, new_dtype)
  if isinstance(new_dtype, dtypes.ExtendedDType) and new_dtype._rules is not None:
    return earray.to_edtype(operand, new_dtype)
  if type(operand) is not Array and isinstance(getattr(operand, "dtype", None),
                                               dtypes.ExtendedDType):  # a key array (nbjax.prng)
    raise ValueError(f"Cannot convert_element_type from {operand.dtype} to "
                     f"{dtypes.canonicalize_dtype(new_dtype)}")
  if isinstance(new_dtype, dtypes.ExtendedDType):  # to a key dtype: JAX's error
    raise ValueError(f"Cannot convert_element_type from "
                     f"{dtypes.dtype(operand, canonicalize=True)} to {new_dtype}")
  new_dtype = dtypes.canonicalize_explicit_dtype(new_dtype, "convert_element_type")
  return _convert_element_type(operand, new_dtype, False)


_I64_MAX = np.iinfo(np.int64).max


def _convert_element_type(operand, new_dtype=None, weak_type=False):
  """convert_element_type with an explicit result weak type (``new_dtype=None``: keep dtype)."""
  t = type(operand)
  if t is Array:
    v = operand._value
    nd = v.dtype if new_dtype is None else new_dtype
    if v.dtype == nd and operand._weak == weak_type:
      return operand
    p = dict(new_dtype=np.dtype(nd), weak_type=bool(weak_type))
    return (convert_element_type_p.eager(operand, **p) if _ctx.trace is _EVAL else
            convert_element_type_p.bind(operand, **p))
  if hasattr(operand, "__jax_array__"):
    operand = operand.__jax_array__()
    t = type(operand)
  if t in _PY or isinstance(operand, (np.ndarray, np.generic)):
    # constants: convert here (Python ints too large for int64 convert exactly)
    if t is int and new_dtype is not None:
      nd = np.dtype(new_dtype)
      v = np.asarray(operand).astype(nd) if nd.kind in "fc" else _np_convert(np.asarray(
          operand, np.uint64 if operand > _I64_MAX else np.int64), nd)  # (NumPy's, as JAX's:
      # wraps to nd whatever the x64 mode; past int64's max through uint64, to 2**64 - 1)
    else:
      src = dtypes.dtype(operand, canonicalize=True) if t in _PY else None
      if src is not None and src.itemsize < 8 and new_dtype is not None and \
          np.dtype(new_dtype).itemsize >= 8:
        src = None  # (a Python float for a 64-bit dtype, x64 off: exact, as JAX's)
      v = np.asarray(operand, src)
      d = dtypes.canonicalize_dtype(v.dtype)
      v = _np_convert(v, d if new_dtype is None else new_dtype)
    return Array._new(np.array(v, order="C", copy=None), bool(weak_type))
  aval = core.get_aval(operand)
  new_dtype = aval.dtype if new_dtype is None else np.dtype(new_dtype)
  weak_type = bool(weak_type)
  if aval.dtype == new_dtype and aval.weak_type == weak_type:
    return operand
  return convert_element_type_p.bind(operand, new_dtype=new_dtype, weak_type=weak_type)


def _canonicalize_shape(shape):
  try:
    return tuple(operator.index(d) for d in (shape if isinstance(shape, (tuple, list)) else
                                              np.shape(shape) and list(shape) or [shape]))
  except TypeError:
    raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got {shape}.") from None


def full(shape, fill_value, dtype=None, *, sharding=None):
  """An array of ``shape`` filled with the scalar ``fill_value`` (cast to ``dtype`` if given),
  placed with ``sharding`` if given (ignored under a transformation, as JAX's)."""
  out = _full_unplaced(shape, fill_value, dtype)
  if sharding is not None and type(out) is Array:
    from nbjax.interpreters import spmd
    if not sharding._spmd:  # a device's
      return spmd.device_put(out, sharding)
    v = out._value  # each device's block (JAX's make_array_from_callback: no rank check)
    placed = spmd.make_array_from_callback(v.shape, sharding, lambda idx: v[idx])
    placed._weak = out._weak
    return placed
  return out


def _full_unplaced(shape, fill_value, dtype):
  shape = _canonicalize_shape(shape)
  if np.shape(fill_value):
    raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                    f"{np.shape(fill_value)}.")
  if dtype is None:
    weak = dtypes.is_weakly_typed(fill_value)
    d = dtypes.dtype(fill_value, canonicalize=True)
  else:
    weak = False
    d = dtypes.canonicalize_explicit_dtype(dtypes.dtype(dtype), "full")
  return _full(shape, fill_value, d, weak)


def _full(shape, fill_value, d, weak):
  if core.h2d_guard is not None and not isinstance(fill_value, (Array, core.Tracer)):
    core.host_to_device(fill_value if weak else np.asarray(fill_value, d))  # (transfer guard)
  if core.is_eval() and not isinstance(fill_value, core.Tracer):
    v = fill_value._value if type(fill_value) is Array else np.asarray(fill_value)
    if v.dtype != d:
      v = _np_convert(v, d) if type(fill_value) is not int else \
          _convert_element_type(fill_value, d)._value
    return Array._new(np.full(shape, v, d), weak)
  from nbjax import lax
  x = _convert_element_type(fill_value, d, weak)
  return lax.broadcast_in_dim(x, shape, ()) if shape else x


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
  """An array like ``x`` (shape, dtype, weak type) filled with ``fill_value``; placed with
  ``sharding``, or, as JAX's, with the sharding of a committed, not weakly typed ``x`` when
  the shape is ``x``'s or that sharding is fully replicated."""
  fill_shape = np.shape(x) if shape is None else _canonicalize_shape(shape)
  weak = dtype is None and dtypes.is_weakly_typed(x)
  if dtype is None and isinstance(x, (Array, core.Tracer)):
    d = x.dtype  # an nbjax array keeps its dtype whatever the x64 mode (as JAX)
  elif dtype is None:
    d = dtypes.dtype(x, canonicalize=True)
  else:
    d = dtypes.canonicalize_explicit_dtype(dtypes.dtype(dtype), "dtype")  # (JAX's _dtype)
  out = _full(tuple(fill_shape), fill_value, d, weak)
  if sharding is None and not weak and core.placed_device(x)[0]:
    sharding = x.sharding  # (a single-device sharding: fully replicated, whatever the shape)
  if sharding is not None and type(out) is Array:
    from nbjax.interpreters import spmd
    return spmd.device_put(out, sharding)
  return out


def zeros_like_array(x):
  """Zeros with the shape, dtype and weak type of ``x``."""
  return full_like(x, 0)


# ----------------------------------------------------------------- rule helpers


_PY_SCALAR = {"b": bool, "i": int, "u": int, "f": float, "c": builtins.complex}  # (not lax.complex)


def _const(x, v):
  """``v`` as a constant of ``x``'s dtype: a weak Python scalar when ``x`` is a weakly typed
  scalar (so the rule's result stays weak, as JAX's ``_const``), else a 0-d NumPy array."""
  a = core.get_aval(x)
  if a.weak_type and not a.shape and a.dtype.kind in _PY_SCALAR:  # (not bfloat16's "V")
    py = _PY_SCALAR[a.dtype.kind](v)
    if dtypes.canonicalize_dtype(np.result_type(py)) == a.dtype:
      return py
  return np.array(v, a.dtype)


def _zeros(x):
  return full_like(x, 0)


def _ones(x):
  return full_like(x, 1)


def _bcast_to(x, shape):
  """``x`` (rank 0, or equal rank with size-1 dims) broadcast to ``shape``."""
  aval = core.get_aval(x)
  if aval.shape == tuple(shape):  # (a Python/NumPy tangent passed through becomes an Array,
    # as JAX's jvp gives)
    return x if isinstance(x, (Array, core.Tracer)) else _wrap(
        np.asarray(x, aval.dtype), aval.weak_type)
  from nbjax import lax
  return lax.broadcast_in_dim(x, shape, tuple(range(len(shape))) if aval.shape else ())


def _bcast_like(g, x, other):
  """The tangent of one operand, broadcast to the output shape of ``x op other``."""
  out = broadcasting_shape("add", core.get_aval(x).shape, core.get_aval(other).shape)
  return _bcast_to(g, out)


def _unbroadcast(aval, x):
  """Sum ``x`` down to ``aval.shape`` (the transpose of lax's implicit broadcasting)."""
  from nbjax import lax
  xs = core.get_aval(x).shape
  if xs == aval.shape:
    return x
  if not aval.shape:
    return lax.reduce_sum(x, tuple(range(len(xs))))
  dims = tuple(i for i, (a, b) in enumerate(zip(aval.shape, xs)) if a == 1 and b != 1)
  return lax.reshape(lax.reduce_sum(x, dims), aval.shape) if dims else x


def _replace_zero(x):
  return select(eq(x, _const(x, 0)), _ones(x), x)


def _balanced_eq(x, z, y):
  """1 where ``x == z`` (0.5 where ``y`` ties too), as JAX's max/min jvp."""
  return div(select(eq(x, z), _ones(z), _zeros(z)), select(eq(y, z), full_like(z, 2), _ones(z)))


# ----------------------------------------------------------------- jvp / transpose rules

ad.deflinear2(neg_p, lambda ct, x: [neg(ct)])
for _p in (stop_gradient_p, sign_p, floor_p, ceil_p, round_p, is_finite_p, eq_p, ne_p, lt_p, le_p,
           gt_p, ge_p, not_p, and_p, or_p, xor_p, population_count_p, clz_p, shift_left_p,
           shift_right_arithmetic_p, shift_right_logical_p):
  ad.defjvp_zero(_p)

ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
ad.defjvp2(exp2_p, lambda g, ans, x: mul(_const(x, math.log(2)), mul(g, ans)))
ad.defjvp(log_p, lambda g, x: div(g, x))
ad.defjvp(log1p_p, lambda g, x: div(g, add(x, _const(x, 1))))
ad.defjvp2(expm1_p, lambda g, ans, x: mul(g, add(ans, _const(ans, 1))))
ad.defjvp2(tanh_p, lambda g, ans, x: mul(add(g, mul(g, ans)), sub(_const(x, 1), ans)))
ad.defjvp2(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(_const(ans, 1), ans))))
ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
ad.defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
ad.defjvp2(tan_p, lambda g, ans, x: mul(g, add(_const(x, 1), square(ans))))
ad.defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(_const(x, 1), square(x)))))
ad.defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(sub(_const(x, 1), square(x))))))
ad.defjvp(atan_p, lambda g, x: div(g, add(_const(x, 1), square(x))))
ad.defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
ad.defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
ad.defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(square(x), _const(x, 1)))))
ad.defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(square(x), _const(x, 1)))))
ad.defjvp(atanh_p, lambda g, x: mul(reciprocal(add(_const(x, 1), x)), div(g, sub(_const(x, 1), x))))
ad.defjvp2(sqrt_p, lambda g, ans, x: mul(g, div(_const(x, 0.5), ans)))
ad.defjvp2(rsqrt_p, lambda g, ans, x: mul(g, mul(_const(x, -0.5), div(ans, x))))
ad.defjvp2(cbrt_p, lambda g, ans, x: mul(g, mul(_const(x, 1 / 3), integer_pow(ans, -2))))
ad.defjvp2(square_p, lambda g, ans, x: mul(g, mul(_const(x, 2), x)))
ad.defjvp(erf_p, lambda g, x: mul(_const(x, 2 / math.sqrt(math.pi)), mul(g, exp(neg(square(x))))))
ad.defjvp(erfc_p, lambda g, x: mul(_const(x, -2 / math.sqrt(math.pi)), mul(g, exp(neg(square(x))))))
ad.defjvp2(erf_inv_p, lambda g, ans, x: mul(_const(x, math.sqrt(math.pi) / 2),
                                            mul(g, exp(square(ans)))))
ad.defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
ad.defjvp(digamma_p, lambda g, x: mul(g, polygamma(_const(x, 1), x)))
ad.defjvp(polygamma_p, None, lambda g, m, x: mul(g, polygamma(add(m, _const(m, 1)), x)))


def _abs_jvp(g, ans, x):
  if core.get_aval(x).dtype in _complex:
    return real(mul(g, div(conj(x), _replace_zero(convert_element_type(ans, core.get_aval(x).dtype)))))
  return select(ge(x, _const(x, 0)), g, neg(g))


ad.defjvp2(abs_p, _abs_jvp)


def _integer_pow_jvp(g, x, *, y):
  if y == 0:
    return _zeros(g)
  if y == 1:
    return g
  return mul(g, mul(_const(x, y), x if y == 2 else integer_pow(x, y - 1)))


ad.defjvp(integer_pow_p, _integer_pow_jvp)


def _pow_jvp_lhs(g, ans, x, y):
  # JAX's rule: both operands cast (strong) to the result dtype, so the jacobian is not weak
  rd = core.get_aval(ans).dtype
  int_y = core.get_aval(y).dtype in _int
  x, y = convert_element_type(x, rd), convert_element_type(y, rd)
  if int_y:
    shape = core.get_aval(ans).shape
    x, y = _bcast_to(x, shape), _bcast_to(y, shape)
    jac = select(eq(y, _const(y, 0)), _zeros(y),
                 mul(_replace_zero(y), pow(x, sub(y, _const(y, 1)))))
  else:
    jac = mul(y, pow(x, sub(y, _const(y, 1))))
  return mul(g, jac)


def _pow_jvp_rhs(g, ans, x, y):
  return mul(g, mul(log(_replace_zero(x)), ans))


ad.defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)


def _add_jvp(primals, tangents):
  x, y = primals
  xt, yt = tangents
  out = add(x, y)
  if type(xt) is ad.Zero:
    return out, _bcast_like(yt, y, x)
  if type(yt) is ad.Zero:
    return out, _bcast_like(xt, x, y)
  return out, add(xt, yt)


def _sub_jvp(primals, tangents):
  x, y = primals
  xt, yt = tangents
  out = sub(x, y)
  if type(xt) is ad.Zero:
    return out, _bcast_like(neg(yt), y, x)
  if type(yt) is ad.Zero:
    return out, _bcast_like(xt, x, y)
  return out, sub(xt, yt)


def _add_transpose(ct, x, y):
  if type(ct) is ad.Zero:
    return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None,
            ad.Zero(y.aval) if ad.is_undefined_primal(y) else None]
  return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
          _unbroadcast(y.aval, ct) if ad.is_undefined_primal(y) else None]


def _sub_transpose(ct, x, y):
  if type(ct) is ad.Zero:
    return [ad.Zero(x.aval) if ad.is_undefined_primal(x) else None,
            ad.Zero(y.aval) if ad.is_undefined_primal(y) else None]
  return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
          _unbroadcast(y.aval, neg(ct)) if ad.is_undefined_primal(y) else None]


add_p.jvp, add_p.transpose = _add_jvp, _add_transpose
sub_p.jvp, sub_p.transpose = _sub_jvp, _sub_transpose
ad.defbilinear(mul_p, lambda ct, x, y: _unbroadcast(x.aval, mul(ct, y)),
               lambda ct, x, y: _unbroadcast(y.aval, mul(x, ct)))
ad.deflinear2(add_any_p, lambda ct, x, y: [_unbroadcast(x.aval, ct), _unbroadcast(y.aval, ct)])
ad.deflinear2(copy_p, lambda ct, x: [copy(ct)])

ad.defjvp(div_p, lambda g, x, y: div(g, y),
          lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))


def _div_transpose(ct, x, y):
  if ad.is_undefined_primal(y):
    raise ValueError("div transpose: the divisor is not linear (nonlinear div can't be transposed)")
  if type(ct) is ad.Zero:
    return [ad.Zero(x.aval), None]
  return [_unbroadcast(x.aval, div(ct, y)), None]


div_p.transpose = _div_transpose
ad.defjvp(rem_p, lambda g, x, y: _bcast_like(g, x, y),
          lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
ad.defjvp2(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
ad.defjvp2(min_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
ad.defjvp(atan2_p, lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
          lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))

ad.deflinear2(real_p, lambda ct, x: [complex(ct, np.zeros((), dtypes.dtype(ct)))])  # (strong)
ad.deflinear2(imag_p, lambda ct, x: [complex(np.zeros((), dtypes.dtype(ct)), neg(ct))])


def _complex_transpose(ct, x, y):
  return [_unbroadcast(x.aval, real(ct)) if ad.is_undefined_primal(x) else None,
          _unbroadcast(y.aval, imag(neg(ct))) if ad.is_undefined_primal(y) else None]


ad.deflinear2(complex_p, _complex_transpose)


def _conj_transpose(ct, x, *, input_dtype=None):
  d = x.aval.dtype
  return [conj(ct) if d in _complex else real(ct)]


ad.deflinear2(conj_p, _conj_transpose)


def _convert_jvp(primals, tangents, *, new_dtype, weak_type):
  (x,), (t,) = primals, tangents
  ans = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
  if type(t) is ad.Zero or np.dtype(new_dtype) not in _inexact:
    return ans, ad.Zero.from_primal_value(ans)
  return ans, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _convert_transpose(ct, x, *, new_dtype, weak_type):
  aval = x.aval
  if type(ct) is ad.Zero:
    return [ad.Zero(aval)]
  if aval.dtype not in _inexact:
    return [ad.Zero(aval.update(dtype=dtypes.float0, weak_type=False))]
  return [convert_element_type_p.bind(ct, new_dtype=aval.dtype, weak_type=aval.weak_type)]


convert_element_type_p.jvp = _convert_jvp


def _convert_fold(vals, params, aval):
  """JAX's _convert_elt_type_folding_rule: a scalar literal converted while staging (a float
  to an integer only in range, where NumPy's cast and XLA's agree)."""
  c, d = np.asarray(vals[0]), aval.dtype
  if c.ndim or not isinstance(d, np.dtype) or d == dtypes.float0:
    return None
  if c.dtype.kind == "c" and d.kind != "c":
    c = c.real
  if d.kind in "iu" and c.dtype.kind not in "iub":  # (floats, NumPy's and ml_dtypes')
    i = np.iinfo(d)
    if not (np.isfinite(c) and i.min <= c <= i.max):
      return None
  with np.errstate(all="ignore"):
    return Array._new(c.astype(d), aval.weak_type)


pe.const_fold_rules[convert_element_type_p] = _convert_fold
convert_element_type_p.transpose = _convert_transpose


def _select_n_jvp(primals, tangents):
  which, *cases = primals
  cts = tangents[1:]
  out = select_n(which, *cases)
  if all(type(t) is ad.Zero for t in cts):
    return out, ad.Zero.from_primal_value(out)
  z = _zeros(next(t for t in cts if type(t) is not ad.Zero))
  return out, select_n(which, *[z if type(t) is ad.Zero else t for t in cts])


def _select_n_transpose(ct, which, *cases):
  if ad.is_undefined_primal(which):
    raise ValueError("select_n transpose: `which` is not linear")
  if type(ct) is ad.Zero:
    return [None] + [ad.Zero(c.aval) if ad.is_undefined_primal(c) else None for c in cases]
  zeros = full_like(ct, 0)
  return [None] + [select_n(which, *[ct if j == i else zeros for j in range(len(cases))])
                   if ad.is_undefined_primal(c) else None for i, c in enumerate(cases)]


select_n_p.jvp, select_n_p.transpose = _select_n_jvp, _select_n_transpose


def _clamp_jvp_term(pick):
  def term(g, lo, x, hi):
    shape = core.get_aval(x).shape
    return select(pick(lo, x, hi), _bcast_to(g, shape), _zeros(x))
  return term


ad.defjvp(clamp_p,
          _clamp_jvp_term(lambda lo, x, hi: bitwise_and(gt(lo, x), lt(lo, hi))),
          _clamp_jvp_term(lambda lo, x, hi: bitwise_and(gt(x, lo), lt(x, hi))),
          _clamp_jvp_term(lambda lo, x, hi: lt(hi, x)))


# ----------------------------------------------------------------- jet (Taylor) rules
# Coefficients are not factorial-scaled here (``jet.jet2``): ``u = [x, u_1, ..., u_K]``.

for _p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, not_p, and_p, or_p, xor_p, floor_p, ceil_p,
           round_p, sign_p, stop_gradient_p, is_finite_p, shift_left_p,
           shift_right_arithmetic_p, shift_right_logical_p):
  jet.defzero(_p)
for _p in (neg_p, real_p, complex_p, conj_p, imag_p, add_p, add_any_p, sub_p,
           convert_element_type_p, copy_p):
  jet.deflinear(_p)
jet.defbilinear(mul_p)

jet.def_deriv(erf_p, lambda x: mul(_const(x, 2 / math.sqrt(math.pi)), exp(neg(square(x)))))
jet.def_comp(expm1_p, lambda x: exp(x) - 1)
jet.def_comp(log1p_p, lambda x: log(1 + x))
jet.def_comp(sqrt_p, lambda x: x ** 0.5)
jet.def_comp(square_p, lambda x: x * x)
jet.def_comp(rsqrt_p, lambda x: x ** -0.5)
jet.def_comp(asinh_p, lambda x: log(x + sqrt(square(x) + 1)))
jet.def_comp(acosh_p, lambda x: log(x + sqrt(square(x) - 1)))
jet.def_comp(atanh_p, lambda x: 0.5 * log(div(1 + x, 1 - x)))
jet.def_comp(erfc_p, lambda x: 1 - erf(x))
jet.def_comp(clamp_p, lambda lo, x, hi: min(max(lo, x), hi))


def _rem_jet(primals, series):
  # rem(x, y) = x - y q with q = trunc(x / y) locally constant (JAX's rule composes with
  # floor, which gives a primal other than rem's for operands of opposite signs)
  x, y = primals
  q = div(x, y)
  q = mul(sign(q), floor(abs(q)))
  return rem(x, y), [a - b * q for a, b in zip(*series)]


def _erf_inv_jet(primals, series):
  # v' = c u' with c = sqrt(pi)/2 exp(v^2): c's coefficients follow v's, one order behind
  (x,), (u,) = primals, series
  u, k_max = [x, *u], len(u)
  v = [erf_inv(x)]
  sq = [square(v[0])]
  ex = [exp(sq[0])]
  c = [mul(_const(x, math.sqrt(math.pi) / 2), ex[0])]
  for k in range(1, k_max + 1):
    v.append(sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k)
    if k < k_max:
      sq.append(sum(v[k - j] * v[j] for j in range(k + 1)))
      ex.append(sum(j * ex[k - j] * sq[j] for j in range(1, k + 1)) / k)
      c.append(math.sqrt(math.pi) / 2 * ex[k])
  return v[0], v[1:]


def _exp_jet(primals, series):
  (x,), (u,) = primals, series
  u, v = [x, *u], [exp(x)]  # v' = v u'
  for k in range(1, len(u)):
    v.append(sum(j * v[k - j] * u[j] for j in range(1, k + 1)) / k)
  return v[0], v[1:]


def _pow_jet(primals, series):
  # x ** y = exp(y log x): the exp recurrence over the series of y log x
  x, y = primals
  z0, zs = jet.jet2(lambda x, y: mul(y, log(x)), primals, series)
  v0 = x ** y
  v, u = [v0], [z0, *zs]
  for k in range(1, len(u)):
    v.append(sum(j * v[k - j] * u[j] for j in range(1, k + 1)) / k)
  return v0, v[1:]


def _pow_by_squaring(x, n):
  if n < 0:
    return _pow_by_squaring(1 / x, -n)
  if n == 0:
    return 1
  half = _pow_by_squaring(x * x, n // 2)
  return half if n % 2 == 0 else x * half


def _integer_pow_jet(primals, series, *, y):
  if y == 0:
    return jet.jet2(lambda x: full_like(x, 1), primals, series)
  return jet.jet2(lambda x: _pow_by_squaring(x, y), primals, series)


def _logistic_taylor(primals, series):
  """The jet of ``logistic``: ``v' = e u'`` with ``e = v (1 - v)``."""
  (x,), (u,) = primals, series
  u = [x, *u]
  v = [logistic(x)]
  e = [v[0] * (1 - v[0])]
  for k in range(1, len(u)):
    v.append(sum(j * e[k - j] * u[j] for j in range(1, k + 1)) / k)
    e.append((1 - v[0]) * v[k] - sum(v[j] * v[k - j] for j in range(1, k + 1)))
  return v[0], v[1:]


def _tanh_jet(primals, series):
  # tanh(x) = 2 logistic(2x) - 1
  (x,), (u,) = primals, series
  p, s = _logistic_taylor((2 * x,), ([2 * t for t in u],))
  return 2 * p - 1, [2 * t for t in s]


def _log_jet(primals, series):
  # u = x: k v_k u_0 = k u_k - sum_{j<k} j v_j u_{k-j}
  (x,), (u,) = primals, series
  u = [x, *u]
  v = [log(x)]
  for k in range(1, len(u)):
    conv = sum(j * v[j] * u[k - j] for j in range(1, k))
    v.append((u[k] - conv / k) / u[0])
  return v[0], v[1:]


def _atan2_jet(primals, series):
  # atan2(x, y) = atan(x / y): v' = c z' with z = x / y, c = 1 / (1 + z^2)
  x, y = primals
  v0 = atan2(x, y)
  z0, zs = jet.jet2(div, primals, series)
  one = _const(z0, 1)
  c0, cs = jet.jet2(lambda z: div(one, 1 + square(z)), (z0,), (zs,))
  return v0, jet.chain(v0, [c0, *cs], [z0, *zs])


def _div_jet(primals, series):
  # u = v w: v_k = (u_k - sum_{j<k} v_j w_{k-j}) / w_0
  x, y = primals
  u, w = [x, *series[0]], [y, *series[1]]
  v = []
  for k in range(len(u)):
    v.append((u[k] - sum(v[j] * w[k - j] for j in range(k))) / w[0])
  return v[0], v[1:]


def _sinusoidal_jet(sign, s_fn, c_fn, pick):
  # s' = c u', c' = sign s u' (sin/cos: sign -1; sinh/cosh: +1)
  def rule(primals, series):
    (x,), (u,) = primals, series
    u = [x, *u]
    s, c = [s_fn(x)], [c_fn(x)]
    for k in range(1, len(u)):
      s.append(sum(j * u[j] * c[k - j] for j in range(1, k + 1)) / k)
      c.append(sum(j * u[j] * s[k - j] for j in range(1, k + 1)) / k * sign)
    out = s if pick == 0 else c
    return out[0], out[1:]
  return rule


def _abs_jet(primals, series):
  (x,), (u,) = primals, series
  negs = select(lt(x, full_like(x, 0, shape=())), full_like(x, -1), full_like(x, 1.0))
  return abs(x), [negs * t for t in u]


def _select_n_jet(primals, series):
  which, *cases = primals
  return select_n(which, *cases), [select_n(which, *ts[1:]) for ts in zip(*series)]


def _minmax_jet(name, pick):
  # the chosen operand's coefficients; their mean where the operands tie (JAX's rule)
  def rule(primals, series):
    shape = broadcasting_shape(name, *(core.get_aval(p).shape for p in primals))
    x, y = (_bcast_to(p, shape) for p in primals)
    chosen, tie = pick(x, y), eq(x, y)

    def term(a, b):
      a, b = _bcast_to(a, shape), _bcast_to(b, shape)
      return select(tie, (a + b) / 2, select(chosen, a, b))
    return select(chosen, x, y), [term(a, b) for a, b in zip(*series)]
  return rule


exp_p.jet, erf_inv_p.jet, pow_p.jet, rem_p.jet = _exp_jet, _erf_inv_jet, _pow_jet, _rem_jet
integer_pow_p.jet, logistic_p.jet, tanh_p.jet = _integer_pow_jet, _logistic_taylor, _tanh_jet
log_p.jet, atan2_p.jet, div_p.jet, abs_p.jet = _log_jet, _atan2_jet, _div_jet, _abs_jet
select_n_p.jet = _select_n_jet
sin_p.jet = _sinusoidal_jet(-1, sin, cos, 0)
cos_p.jet = _sinusoidal_jet(-1, sin, cos, 1)
sinh_p.jet = _sinusoidal_jet(1, sinh, cosh, 0)
cosh_p.jet = _sinusoidal_jet(1, sinh, cosh, 1)
max_p.jet, min_p.jet = _minmax_jet("max", gt), _minmax_jet("min", lt)


# ----------------------------------------------------------------- batching rules


def _select_n_batch(vals, dims):
  which, *cases = vals
  wd, *cds = dims
  size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
  wshape, cshape = core.get_aval(which).shape, core.get_aval(cases[0]).shape
  if all(d == wd for d in cds) and wshape == cshape:
    return select_n_p.bind(which, *cases), wd
  if wd is None and not wshape and all(d is not None and d == cds[0] for d in cds):
    return select_n_p.bind(which, *cases), cds[0]
  cases = [batching.bdim_at_front(c, d, size) for c, d in zip(cases, cds)]
  if wd is not None or wshape:
    which = batching.bdim_at_front(which, wd, size)
    if core.get_aval(which).ndim < core.get_aval(cases[0]).ndim:  # per-example scalar `which`
      which = _bcast_which(which, core.get_aval(cases[0]).shape)
  return select_n_p.bind(which, *cases), 0


def _bcast_which(w, shape):
  from nbjax import lax
  return lax.broadcast_in_dim(w, shape, (0,))


def _clamp_batch(vals, dims):
  lo, x, hi = vals
  ld, xd, hd = dims
  size = next(core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not None)
  shapes = [core.get_aval(v).shape for v in vals]
  if ld == xd == hd and shapes[0] == shapes[1] == shapes[2]:
    return clamp_p.bind(lo, x, hi), xd
  if xd is not None and ld is None and hd is None and not shapes[0] and not shapes[2]:
    return clamp_p.bind(lo, x, hi), xd
  x = batching.bdim_at_front(x, xd, size)
  xshape = core.get_aval(x).shape
  bounds = []
  for b, d, s in ((lo, ld, shapes[0]), (hi, hd, shapes[2])):
    if d is None and not s:
      bounds.append(b)
      continue
    b = batching.bdim_at_front(b, d, size)
    if core.get_aval(b).ndim < len(xshape):
      b = _bcast_which(b, xshape)
    bounds.append(b)
  return clamp_p.bind(bounds[0], x, bounds[1]), 0


select_n_p.batch = _select_n_batch
clamp_p.batch = _clamp_batch


__all__ = [n for n in list(globals()) if n.endswith("_p") and not n.startswith("_")] + [
    "RoundingMethod", "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log",
    "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "abs", "square", "reciprocal",
    "integer_pow", "pow", "add", "sub", "mul", "div", "rem", "max", "min", "atan2", "nextafter",
    "eq", "ne", "lt", "le", "gt", "ge", "bitwise_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "population_count", "clz", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "erf", "erfc", "erf_inv", "lgamma", "digamma", "polygamma", "real",
    "imag", "conj", "complex", "select_n", "select", "clamp", "copy", "add_any", "stop_gradient",
    "convert_element_type", "full", "full_like", "zeros_like_array"]

# ====================================================================== lowering (StableHLO)
# Rules run under jit only; ``mlir``/``hlo``/``ir`` are lazy proxies, so importing this
# file never imports jaxlib.
from nbjax.interpreters import lowering  # noqa: E402
from nbjax.interpreters.lowering import chlo, hlo, i64_array, ir, mlir  # noqa: E402,F401


def _reg(name, rule):
  lowering.register(name, rule)


def _bcast(ctx, args):
  out = ctx.avals_out[0]
  return [mlir.broadcast_to(ctx, x, a, out) for x, a in zip(args, ctx.avals_in)]


def _nary(op):
  """Rule emitting one op; ``op`` is an hlo/chlo builder or its name ``"hlo.add"``."""
  def rule(ctx, *args, **params):
    f = op
    if isinstance(f, str):
      mod, name = f.split(".")
      f = getattr(hlo if mod == "hlo" else chlo, name)
    return [f(*_bcast(ctx, args))]
  return rule


def _lo_cmp(direction):
  def rule(ctx, x, y, **params):
    x, y = _bcast(ctx, (x, y))
    return [mlir.compare(x, y, direction, ctx.avals_in[0].dtype)]
  return rule


def _kind(aval):
  return dtypes.kind(aval.dtype)


# ------------------------------------------------------------------ one-op rules

_DIRECT = {
    "neg": "hlo.negate", "tan": "hlo.tan",
    "asin": "chlo.asin", "acos": "chlo.acos", "atan": "chlo.atan", "sinh": "chlo.sinh",
    "cosh": "chlo.cosh", "tanh": "hlo.tanh", "asinh": "chlo.asinh", "acosh": "chlo.acosh",
    "atanh": "chlo.atanh", "exp": "hlo.exponential", "log": "hlo.log", "log1p": "hlo.log_plus_one",
    "expm1": "hlo.exponential_minus_one", "sqrt": "hlo.sqrt",
    "rsqrt": "hlo.rsqrt", "cbrt": "hlo.cbrt", "floor": "hlo.floor", "ceil": "hlo.ceil",
    "is_finite": "hlo.is_finite", "erf": "chlo.erf", "erfc": "chlo.erfc", "erf_inv": "chlo.erf_inv",
    "lgamma": "chlo.lgamma", "digamma": "chlo.digamma", "real": "hlo.real", "imag": "hlo.imag",
    "population_count": "hlo.popcnt", "clz": "hlo.count_leading_zeros", "not": "hlo.not_",
    "add": "hlo.add", "add_any": "hlo.add", "sub": "hlo.subtract", "mul": "hlo.multiply",
    "pow": "hlo.power", "atan2": "hlo.atan2",
    "nextafter": "chlo.next_after", "and": "hlo.and_", "or": "hlo.or_", "xor": "hlo.xor",
    "shift_left": "hlo.shift_left", "shift_right_logical": "hlo.shift_right_logical",
    "shift_right_arithmetic": "hlo.shift_right_arithmetic", "complex": "hlo.complex",
    "polygamma": "chlo.polygamma",
}
for _name, _op in _DIRECT.items():  # op named, looked up when the rule runs (no jaxlib import here)
  _reg(_name, _nary(_op))


def _division(op):
  """div/rem: for integers, XLA's results for a zero divisor (all ones; the dividend) made
  explicit around a divisor of 1 there, so that XLA's constant folding never divides by zero
  (it traps, SIGFPE, when a closed-over dividend and a zero divisor are both constants)."""
  def rule(ctx, x, y, **params):
    aval = ctx.avals_out[0]
    x, y = _bcast(ctx, (x, y))
    f = getattr(hlo, op)
    if _kind(aval) not in "iu":
      return [f(x, y)]
    zero = mlir.compare(y, mlir.full_like_aval(ctx, 0, aval), "EQ", aval.dtype)
    out = f(x, hlo.select(zero, mlir.full_like_aval(ctx, 1, aval), y))
    fill = x if op == "remainder" else mlir.full_like_aval(
        ctx, -1 if _kind(aval) == "i" else np.iinfo(aval.dtype).max, aval)
    return [hlo.select(zero, fill, out)]
  return rule


_reg("div", _division("divide"))
_reg("rem", _division("remainder"))


# The Array API's (C99 Annex G's) special values of complex results where XLA's expansions
# give others, put over the op's result ``r + i s`` of ``a + i b`` (eagerly: the ``_s_*``
# functions of kernels.elementwise, the same cases).
def _c99_exp(m):
  def fix(a, b, r, s):
    hit = bitwise_and(_isinf(a), bitwise_not(is_finite(b)))
    neg_ = lt(a, _fill(a, 0))
    return (select(hit, select(neg_, _fill(a, m), a), r),
            select(hit, select(neg_, _zeros(a), _fill(a, np.nan)), s))
  return fix


def _c99_sinh(a, b, r, s):
  hit = bitwise_and(bitwise_not(is_finite(b)), bitwise_or(eq(a, _zeros(a)), _isinf(a)))
  return select(hit, a, r), select(hit, _fill(a, np.nan), s)


def _c99_cosh(a, b, r, s):
  nf = bitwise_not(is_finite(b))
  z, i = bitwise_and(nf, eq(a, _zeros(a))), bitwise_and(nf, _isinf(a))
  return (select(z, _fill(a, np.nan), select(i, _fill(a, np.inf), r)),
          select(z, _zeros(a), select(i, _fill(a, np.nan), s)))


def _c99_tanh(a, b, r, s):
  i, z = _isinf(a), bitwise_and(eq(a, _zeros(a)), bitwise_not(is_finite(b)))
  return (select(i, _copysign(_fill(a, 1), a), select(z, a, r)),
          select(i, _copysign(_zeros(a), b), select(z, _fill(a, np.nan), s)))


def _c99_log(a, b, r, s):
  return select(bitwise_or(_isinf(a), _isinf(b)), _fill(a, np.inf), r), s


def _c99_sqrt(a, b, r, s):
  hit, pos = bitwise_and(_isinf(a), _isnan(b)), gt(a, _zeros(a))
  return select(hit, select(pos, a, b), r), select(hit, select(pos, b, neg(a)), s)


def _c99_atanh(a, b, r, s):
  nan, bn = _fill(a, np.nan), _isnan(b)
  z, i = bitwise_and(bn, eq(a, _zeros(a))), bitwise_and(bn, _isinf(a))
  n = bitwise_or(bn, bitwise_and(_isnan(a), is_finite(b)))
  return select(z, a, select(i, _copysign(_zeros(a), a), select(n, nan, r))), select(n, nan, s)


def _c99_asinh(a, b, r, s):
  hit = bitwise_and(_isnan(a), is_finite(b))
  return select(hit, a, r), select(hit, select(eq(b, _zeros(b)), b, a), s)


def _c99_acos(a, b, r, s):
  hit = bitwise_and(is_finite(a), _isnan(b))
  return select(hit, select(eq(a, _zeros(a)), _fill(a, np.pi / 2), b), r), select(hit, b, s)


def _c99_acosh(a, b, r, s):
  hit = bitwise_and(is_finite(a), _isnan(b))
  return (select(hit, b, r),
          select(hit, select(eq(a, _zeros(a)), _fill(a, np.pi / 2), b), s))


def _fill(x, v):
  return full_like(x, v)


def _isinf(v):
  return eq(abs(v), _fill(v, np.inf))


def _isnan(v):
  return ne(v, v)


def _copysign(x, y):
  # |x| with y's sign bit (that of -0 and -NaN too)
  from nbjax.lax.shape import bitcast_convert_type
  bits = bitcast_convert_type(y, np.int32 if np.dtype(y.dtype).itemsize == 4 else np.int64)
  return select(lt(bits, _zeros(bits)), neg(abs(x)), abs(x))


_C99 = {"exp": _c99_exp(0), "expm1": _c99_exp(-1), "sinh": _c99_sinh, "cosh": _c99_cosh,
        "tanh": _c99_tanh, "log": _c99_log, "log1p": _c99_log, "sqrt": _c99_sqrt,
        "atanh": _c99_atanh, "asinh": _c99_asinh, "acos": _c99_acos, "acosh": _c99_acosh}


def _c99(op, fix):
  raw = _nary(op)

  def fixed(x, y):
    r, s = fix(real(x), imag(x), real(y), imag(y))
    return complex(r, s)

  def rule(ctx, x, **params):
    out, = raw(ctx, x)
    aval = ctx.avals_in[0]
    if _kind(aval) != "c":
      return [out]
    return mlir.lower_fun(fixed, False)(ctx.replace(avals_in=(aval, aval)), x, out)
  return rule


for _name, _fix in _C99.items():
  _reg(_name, _c99(_DIRECT[_name], _fix))

for _name, _dir in {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}.items():
  _reg(_name, _lo_cmp(_dir))


def _identity(ctx, x, **params):
  return [x]


_reg("copy", _identity)
_reg("stop_gradient", _identity)


# ------------------------------------------------------------------ rules with dtype cases


def _sign(ctx, x, **params):
  aval = ctx.avals_in[0]
  if _kind(aval) == "u":
    zero = mlir.full_like_aval(ctx, 0, aval)
    one = mlir.full_like_aval(ctx, 1, aval)
    return [hlo.select(mlir.compare(x, zero, "EQ", aval.dtype), zero, one)]
  return [hlo.sign(x)]


def _abs(ctx, x, **params):
  if _kind(ctx.avals_in[0]) in "ub":
    return [x]
  return [hlo.abs(x)]


def _square(ctx, x, **params):
  return [hlo.multiply(x, x) if _kind(ctx.avals_in[0]) in "iu" else chlo.square(x)]


def _sinh_cosh(b):
  """``sinh(b)``, ``cosh(b)`` from ``expm1`` (accurate for small ``b``)."""
  two = _const(b, 2)
  p, m = expm1(b), expm1(neg(b))
  return div(sub(p, m), two), div(add(add(p, m), two), two)


def _sin_complex(x):
  # JAX's rule: sin(a) cosh(b) + i cos(a) sinh(b), a real part 0 where a == 0
  a, b = real(x), imag(x)
  sh, ch = _sinh_cosh(b)
  zero = _const(a, 0)
  return select(eq(a, zero), complex(_zeros(a), mul(cos(a), sh)),
                complex(mul(sin(a), ch), mul(cos(a), sh)))


def _cos_complex(x):
  a, b = real(x), imag(x)
  sh, ch = _sinh_cosh(b)
  zero = _const(a, 0)
  re = mul(cos(a), ch)
  return select(eq(a, zero), complex(re, _zeros(a)), complex(re, mul(neg(sin(a)), sh)))


def _trig(op, cplx):
  def rule(ctx, x, **params):
    if _kind(ctx.avals_in[0]) == "c":
      return mlir.lower_fun(cplx, multiple_results=False)(ctx, x)
    return [getattr(hlo, op)(x)]
  return rule


def _logistic_fun(x):
  one = _const(x, 1)
  return div(one, add(one, exp(neg(x))))


def _exp2(ctx, x, **params):
  aval = ctx.avals_in[0]
  return [hlo.exponential(hlo.multiply(mlir.full_like_aval(ctx, np.log(2), aval), x))]


def _round(ctx, x, rounding_method=0, **params):
  m = getattr(rounding_method, "name", rounding_method)
  even = (isinstance(m, str) and "EVEN" in m.upper()) or (not isinstance(m, str) and int(m) == 1)
  return [hlo.round_nearest_even(x) if even else hlo.round_nearest_afz(x)]


def _conj(ctx, x, **params):
  ain, aout = ctx.avals_in[0], ctx.avals_out[0]
  if _kind(ain) != "c":
    return [mlir.convert_hlo(ctx, x, ain, aout)]
  return [hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))]


def _integer_pow(ctx, x, y, **params):
  # JAX's rule: y = 3 multiplies (x * x) * x; others square and multiply (acc * x)
  aval = ctx.avals_in[0]
  if y == 0:
    return [mlir.full_like_aval(ctx, 1, aval)]
  acc = hlo.multiply(hlo.multiply(x, x), x) if y == 3 else \
      binary_power(x, builtins.abs(int(y)), lambda a, b: hlo.multiply(a, b))
  if y < 0:
    acc = hlo.divide(mlir.full_like_aval(ctx, 1, aval), acc)
  return [acc]


def _minmax(direction, op):
  def rule(ctx, x, y, **params):
    x, y = _bcast(ctx, (x, y))
    aval = ctx.avals_in[0]
    if _kind(aval) != "c":
      return [getattr(hlo, op)(x, y)]
    # complex: lexicographic on (real, imag), as lax.max/min
    rx, ry, ix, iy = hlo.real(x), hlo.real(y), hlo.imag(x), hlo.imag(y)
    fdt = np.float32 if aval.dtype == np.complex64 else np.float64
    pick = hlo.select(mlir.compare(rx, ry, "EQ", fdt), mlir.compare(ix, iy, direction, fdt),
                      mlir.compare(rx, ry, direction, fdt))
    return [hlo.select(pick, x, y)]
  return rule


def _pow(ctx, x, y, **params):
  ax, ay, aout = ctx.avals_in[0], ctx.avals_in[1], ctx.avals_out[0]
  if np.dtype(ay.dtype) != np.dtype(ax.dtype):
    y = mlir.convert_hlo(ctx, y, ay, ay.update(dtype=ax.dtype))
  return [hlo.power(mlir.broadcast_to(ctx, x, ax, aout),
                    mlir.broadcast_to(ctx, y, ay.update(dtype=ax.dtype), aout))]


def _select_n(ctx, which, *cases, **params):
  aw, aout = ctx.avals_in[0], ctx.avals_out[0]
  cases = [mlir.broadcast_to(ctx, c, a, aout) for c, a in zip(cases, ctx.avals_in[1:])]
  if len(cases) == 1:
    return [cases[0]]
  if aw.shape and tuple(aw.shape) != tuple(aout.shape):
    which = mlir.broadcast_to(ctx, which, aw, aout.update(dtype=aw.dtype))
    aw = aout.update(dtype=aw.dtype)
  if np.dtype(aw.dtype) == np.bool_:
    return [hlo.select(which, cases[1], cases[0])]

  def pick(offset, cs):
    if len(cs) == 1:
      return cs[0]
    mid = len(cs) // 2
    pred = mlir.compare(which, mlir.full_like_aval(ctx, offset + mid, aw), "LT", aw.dtype)
    return hlo.select(pred, pick(offset, cs[:mid]), pick(offset + mid, cs[mid:]))
  return [pick(0, cases)]


def _clamp(ctx, lo, x, hi, **params):
  ax = ctx.avals_in[1]
  if _kind(ax) == "c":
    raise NotImplementedError("clamp does not support complex operands")
  return [hlo.clamp(lo, x, hi)]


def _lo_convert_element_type(ctx, x, new_dtype=None, **params):
  ain, aout = ctx.avals_in[0], ctx.avals_out[0]
  if _kind(ain) == "c" and _kind(aout) != "c":  # JAX's rule: the real part (to bool too)
    x, ain = hlo.real(x), ain.update(dtype=_real_dtype(np.dtype(ain.dtype)))
  return [mlir.convert_hlo(ctx, x, ain, aout)]


for _name, _rule in {
    "sign": _sign, "abs": _abs, "square": _square, "exp2": _exp2, "round": _round,
    "conj": _conj, "integer_pow": _integer_pow, "max": _minmax("GT", "maximum"),
    "min": _minmax("LT", "minimum"), "pow": _pow, "select_n": _select_n, "clamp": _clamp,
    "convert_element_type": _lo_convert_element_type, "sin": _trig("sine", _sin_complex),
    "cos": _trig("cosine", _cos_complex),
    "logistic": lambda ctx, x, **p: mlir.lower_fun(_logistic_fun, False)(ctx, x),
}.items():
  _reg(_name, _rule)
