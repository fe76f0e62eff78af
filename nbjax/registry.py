"""The rule registry: every primitive's rules in one record, and the eager backend policy.

Pipeline position: ``core.Primitive`` owns its rules (``impls`` by backend, ``abstract_eval``,
``jvp``, ``transpose``, ``batch``, ``lowerings``, test ``meta``); this module is the table
of all primitives, the seed-compatible views onto those records (``ad.primitive_jvps[p] =
rule`` is ``p.jvp = rule``), and the policy that picks which eager backend runs each
primitive (chosen by measurement, overridable: ``nbjax.config.set_eager_backend``).
It also builds each primitive's fast eager entry point (``p.eager``), the code that runs
under ``bind`` when no transformation is active (with NumPy's floating-point error reports
off, as JAX never warns: ``quiet_run``), and compiles jaxprs into eager programs
(``eager_program``: the kernels the policy picks, called from generated straight-line code)
for replays and the tape.

``python -m nbjax.registry`` prints the coverage table.
"""
from __future__ import annotations

import contextvars
import functools

import numpy as np

from nbjax import core, dtypes
from nbjax.array import Array, _wrap, own
from nbjax.config import config
from nbjax.jaxpr import ClosedJaxpr, Literal

BACKENDS = ("numba", "numpy", "xla", "python")

# ----------------------------------------------------------------- seed-spelled views


class RuleView:
  """A dict-like view of one rule attribute across primitives (``ad.primitive_jvps``)."""

  def __init__(self, attr, what):
    self.attr, self.what = attr, what

  def __setitem__(self, prim, rule):
    setattr(prim, self.attr, rule)
    bump_epoch()

  def __getitem__(self, prim):
    rule = getattr(prim, self.attr, None)
    if rule is None:
      raise KeyError(prim)
    return rule

  def get(self, prim, default=None):
    rule = getattr(prim, self.attr, None)
    return default if rule is None else rule

  def __contains__(self, prim):
    return getattr(prim, self.attr, None) is not None

  def __delitem__(self, prim):
    setattr(prim, self.attr, None)
    bump_epoch()

  def keys(self):
    return [p for p in core._all_primitives if getattr(p, self.attr, None) is not None]

  __iter__ = lambda self: iter(self.keys())

  def __repr__(self):
    return f"<{self.what} rules for {len(self.keys())} primitives>"


def missing_rule(what, prim):
  """The seed's wording for a missing rule."""
  msgs = {
      "jvp": f"Differentiation rule for '{prim.name}' not implemented",
      "transpose": f"Transpose rule (for reverse-mode differentiation) for '{prim.name}' not implemented",
      "batch": f"Batching rule for '{prim.name}' not implemented",
      "abstract_eval": f"Abstract evaluation for '{prim.name}' not implemented",
      "impl": f"Evaluation rule for '{prim.name}' not implemented",
  }
  if what.startswith("lowering"):
    plat = what.split(":")[1] if ":" in what else "cpu"
    return NotImplementedError(
        f"MLIR translation rule for primitive '{prim.name}' not found for platform {plat}")
  return NotImplementedError(msgs[what])


# ----------------------------------------------------------------- the table


def primitives(builtin_only=False):
  """All primitives, in registration order (``builtin_only``: those of ``nbjax.lax``)."""
  ps = core._all_primitives
  return [p for p in ps if p.family != "user"] if builtin_only else list(ps)


def get(name):
  for p in core._all_primitives:
    if p.name == name:
      return p
  raise KeyError(f"no primitive named {name!r}")


def register(prim, *, family, impls=None, abstract_eval=None, jvp=None, transpose=None,
             batch=None, policy=None, meta=None):
  """Fill a primitive's record in one place (lax modules use this)."""
  prim.family = family
  if impls:
    prim.impls.update(impls)
  for attr, rule in (("abstract_eval_rule", abstract_eval), ("jvp", jvp),
                     ("transpose", transpose), ("batch", batch)):
    if rule is not None:
      setattr(prim, attr, rule)
  if meta:
    prim.meta.update(meta)
  prim.policy = policy or _default_policy(prim)
  select(prim)
  if prim.impl is None:  # JAX's ``p.impl``: callable, and restorable with ``p.def_impl(old)``
    prim.impl = _RegisteredImpl(prim)
  return prim


class _RegisteredImpl:
  """``prim.impl`` of a registered primitive: its eager evaluation (the backend the policy
  selects). Code written for JAX reads ``p.impl``, wraps it and installs the wrapper with
  ``p.def_impl`` (counting calls, say), then reinstalls this object: the registry's own
  eager path comes back, not a Python-backend detour."""
  __slots__ = ("prim",)

  def __init__(self, prim):
    self.prim = prim

  def __call__(self, *args, **params):
    p = self.prim
    if p.eager is self:  # reinstalled by ``def_impl``: the registry's path again
      self.restore()
    return p._registry_eager(*args, **params)

  def restore(self):
    """Undo ``def_impl(self)``: the registry's backends again, no "python" entry."""
    p = self.prim
    if p.impls.get("python") is self:
      del p.impls["python"]
    select(p)


# ----------------------------------------------------------------- backend policy
# policy: (backend, large_backend, threshold): ``backend`` below ``threshold`` output
# elements, ``large_backend`` at or above. Measured with ``python -m nbjax.registry
# --measure``; see README "Backends".

LARGE = 1 << 16
_overrides: dict = {}
_override_all = None


def _default_policy(prim):
  if "numba" in prim.impls:
    return ("numba", "numba", LARGE)
  if "numpy" in prim.impls:
    return ("numpy", "numpy", LARGE)
  if "python" in prim.impls:
    return ("python", "python", LARGE)
  return (None, None, LARGE)


def policy(prim):
  """The (small, large, threshold) backend choice in force for ``prim``."""
  ov = _overrides.get(prim.name)
  if ov is None and _override_all is not None and (
      _override_all in prim.impls or (_override_all == "xla" and prim.family != "call")):
    ov = _override_all
  if ov is not None:
    if ov not in prim.impls and ov != "xla":
      raise ValueError(f"primitive '{prim.name}' has no '{ov}' eager backend "
                       f"(it has {sorted(prim.impls)})")
    return (ov, ov, LARGE)
  return getattr(prim, "policy", None) or _default_policy(prim)


def set_eager_backend(name_or_primitive, backend):
  """Pin the eager backend of one primitive, or of all (``"all"``); ``None`` restores the policy."""
  global _override_all
  if backend is not None and backend not in BACKENDS:
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
  if name_or_primitive in ("all", None):
    _override_all = backend
    _overrides.clear()
    targets = primitives(builtin_only=True)
  else:
    p = get(name_or_primitive) if isinstance(name_or_primitive, str) else name_or_primitive
    if backend is None:
      _overrides.pop(p.name, None)
    else:
      _overrides[p.name] = backend
    targets = [p]
  if backend is not None and name_or_primitive in ("all", None):
    targets = [p for p in targets if backend in p.impls or (backend == "xla" and p.family != "call")]
  for p in targets:
    select(p)


epoch = 0
"""Bumped whenever a rule or a backend choice changes (``select``, rule views, config
updates): caches of traced programs (``nbjax.eager_cache``) key on it."""


def bump_epoch(*_):
  global epoch
  epoch += 1


config.add_listener(bump_epoch)


def backend_label(prim):
  small, large, thr = policy(prim)
  if small is None:
    return "-"
  return small if small == large else f"{small}<{thr}<={large}"


# ----------------------------------------------------------------- bfloat16
# numba has no bfloat16 (nor do most NumPy loops). A primitive's eager backends take it in
# one of two declared ways (``meta["bf16"]``, the ``bf16`` column of the table): "native"
# (the kernels handle bf16 operands themselves: data movement, bit-level rules) or "f32", the
# default for every primitive that accepts floats: bf16 operands (and bf16 dtype params) are
# widened (exactly) to float32, the float32 kernels run, and the outputs whose abstract eval
# says bf16 are rounded to nearest even (ml_dtypes' cast), as XLA's CPU code computes most
# bf16 ops. Only signature resolution (a cache miss) looks for bf16: other dtypes pay nothing.

BF16, F32 = dtypes._bf16, np.dtype(np.float32)


def bf16_mode(prim):
  """"f32" (round trip through float32), "native", "xla" (compiled by XLA alone, where XLA
  rounds to bf16 between the steps of an expansion), "-" (bf16 is not accepted), or "n/a" (no
  kernels of its own: control flow and calls bind the primitives of their bodies)."""
  m = prim.meta.get("bf16")
  if m is not None:
    return m
  if not ("numba" in prim.impls or "numpy" in prim.impls):
    return "n/a"
  return "f32" if BF16 is not None and BF16 in prim.meta.get("dtypes", ()) else "-"


def _is_bf16(d):
  return BF16 is not None and isinstance(d, np.dtype) and d == BF16


# The narrow ml_dtypes types (float8_*, float6_*, float4_e2m1fn; int4/uint4, int2/uint2) take
# the same road, declared per primitive by ``meta["narrow"]`` (the ``narrow`` column):
# "wide" (the default where the primitive has eager kernels: operands and dtype params widened
# exactly, floats to float16 (float8_e8m0fnu, whose range float16 lacks, to float32) and
# integers to int8/uint8, the kernels run, outputs of a narrow dtype cast back by ml_dtypes:
# round to nearest even, integers wrap around; that is how XLA's CPU code computes them, bit
# for bit: its float16 ops round their float32 results to float16 first), "bits" (as "wide",
# but signed integers widen to the uint8 of their bits: logical shifts), "sbits" (unsigned
# ones to the int8 of their bits read as signed: arithmetic shifts), "xla" (the primitive
# compiled by XLA alone, the ``"xla"`` backend: where XLA rounds between the steps of an
# expansion, exp2 and logistic, or counts within the narrow bits), "own" (the primitive's
# rules handle them) or "-" (not accepted). float8_e8m0fnu (exponent only: XLA's arithmetic
# on it is no float32 round trip) takes "xla" wherever the primitive has a lowering.
_WIDE = {d: F32 if d.name == "float8_e8m0fnu" else np.dtype(np.float16)
         for d in dtypes._small_float_dtypes}
_WIDE.update({d: np.dtype(np.uint8 if d.name.startswith("u") else np.int8)
              for d in dtypes._small_int_dtypes})
_NARROW = frozenset(_WIDE)
if BF16 is not None:
  _WIDE[BF16] = F32
_U8, _I8 = np.dtype(np.uint8), np.dtype(np.int8)
_E8M0 = next((d for d in _NARROW if d.name == "float8_e8m0fnu"), None)
_XLA = "xla"  # (_wide's mark: run by the "xla" backend)


def narrow_mode(prim):
  """"wide", "bits", "sbits", "xla", "own", "-" or "n/a" (no eager kernels): see ``_WIDE``."""
  m = prim.meta.get("narrow")
  if m is not None:
    return m
  return "wide" if bf16_mode(prim) != "n/a" else "n/a"


def _wide(d, prim):
  """The dtype ``prim``'s kernels see for a bf16 or narrow operand or dtype param ``d``
  (``d`` itself where they take it as it is)."""
  if not isinstance(d, np.dtype) or d not in _WIDE:
    return d
  if d not in _NARROW:
    m = bf16_mode(prim)
    return _WIDE[d] if m == "f32" else _XLA if m == "xla" else d
  m = narrow_mode(prim)
  if m == "xla" or d == _E8M0 and m != "own" and "cpu" in prim.lowerings:
    return _XLA
  if m == "-":
    raise TypeError(f"{prim.name} does not accept dtype {d.name} (nbjax has no eager "
                    "implementation of it for the narrow ml_dtypes types)")
  if m == "bits" and _WIDE[d] == _I8:
    return _U8
  if m == "sbits" and _WIDE[d] == _U8:
    return _I8
  return _WIDE[d] if m in ("wide", "bits", "sbits") else d


def needs_roundtrip(prim, in_dtypes, params):
  """True where ``prim`` runs these operand dtypes / params as a round trip through wider
  types (bfloat16, the narrow ml_dtypes types: ``_WIDE``)."""
  return any(_wide(d, prim) is not d for d in in_dtypes) or any(
      _wide(v, prim) is not v for v in params.values())


def roundtrip(prim, make, in_avals, params):
  """``run(*arrays)`` of ``prim`` for a bf16 or narrow signature ``in_avals``/``params``:
  ``make(dtypes, params)`` (a run for the widened signature) on the widened operands, results
  cast back to the dtypes abstract eval gives (validating the signature first)."""
  out = prim.abstract_eval(*in_avals, **params)
  outs = [a.dtype for a in (out if prim.multiple_results else [out])]
  wides = [_wide(a.dtype, prim) for a in in_avals]
  if _XLA in wides or any(_wide(v, prim) is _XLA for v in params.values()):
    run = backend_factories["xla"](prim)
    return lambda *xs: run(*xs, **params)
  run = make(tuple(wides), {k: _wide(v, prim) for k, v in params.items()})

  def up(x, w):
    if w is x.dtype:
      return x
    if x.dtype in _NARROW and w is not _WIDE[x.dtype]:  # "bits"/"sbits": reinterpreted
      k = 8 - dtypes.itemsize_bits(x.dtype)
      b = x.view(_U8) << k  # (ml_dtypes stores the bits in the low end of the byte)
      return b >> k if w is _U8 else b.view(_I8) >> k
    return x.astype(w)

  def down(o, d):
    return np.asarray(o).astype(d) if d in _WIDE else o

  if prim.multiple_results:
    return lambda *xs: [down(o, d) for o, d in zip(run(*map(up, xs, wides)), outs)]
  d = outs[0]
  return lambda *xs: down(run(*map(up, xs, wides)), d)


# ----------------------------------------------------------------- eager entry points
# NumPy reports floating-point exceptions (divide by zero, invalid value, overflow) as
# RuntimeWarnings; JAX never warns. A warning filter cannot hide them for good (pytest's
# ``-W error`` / ``filterwarnings = error`` go in front of it) and ``np.errstate`` costs ~1 us
# a call, so the eager entry points run numba/NumPy backends inside a private context whose
# NumPy error state (a context variable) ignores everything: entering it costs ~40 ns and
# leaves the caller's own error state alone. ``quiet_run(f, *args)`` raises RuntimeError
# when the context is in use (a nested eager call, or another thread): see ``quiet_retry``.
_quiet = contextvars.Context()
_inside = contextvars.ContextVar("nbjax_quiet", default=False)
_quiet.run(np.seterr, all="ignore")
_quiet.run(_inside.set, True)
quiet_run = _quiet.run


def quiet_retry(err, f, *args, **params):
  """After ``quiet_run(f, *args, **params)`` raised RuntimeError ``err``: if the context
  refused entry, ``f(*args, **params)`` with NumPy's floating-point errors ignored; any other
  RuntimeError is ``f``'s own, re-raised."""
  if not str(err).endswith("is already entered"):
    raise err
  if _inside.get():  # nested in quiet_run: already quiet
    return f(*args, **params)
  with np.errstate(all="ignore"):  # another thread is inside
    return f(*args, **params)


# backends made on demand, by name: ``"xla"`` (one primitive compiled by XLA) is installed by
# ``nbjax.interpreters.lowering``, above this module
backend_factories: dict = {}


def _impl_for(prim, backend):
  """The primitive's own implementation for ``backend``, else one made by the backend's
  factory (the generic ``"xla"`` single-primitive executable)."""
  impl = prim.impls.get(backend)
  return impl if impl is not None else backend_factories[backend](prim)


def select(prim):
  """(Re)build ``prim.eager`` from its policy."""
  bump_epoch()
  if getattr(prim, "family", "user") == "user" and "python" in prim.impls and len(prim.impls) == 1:
    prim.eager, prim.backend = prim.impls["python"], "python"
    return
  small, large, thr = policy(prim)
  if small is None:
    prim.eager, prim.backend = prim._eager_unset, None
    return
  make = getattr(prim, "make_eager", None) or make_generic_eager
  f_small = _impl_for(prim, small)
  f_large = f_small if large == small else _impl_for(prim, large)
  prim.backend = backend_label(prim)
  prim.eager = make(prim, f_small, f_large, thr)
  prim._registry_eager = prim.eager
  if core.placement[0]:  # (computation follows committed data: core.enable_placement)
    core.place_eager(prim)


def coerce(x, prim=None):
  """An eager operand as (ndarray, weak_type); NumPy/Python scalars canonicalized as JAX."""
  if type(x) is Array:
    return x._value, x._weak
  if isinstance(x, core.Tracer):
    raise core.escaped_tracer_error(x, prim)
  if isinstance(x, np.ndarray):
    d = dtypes.canonicalize_dtype(x.dtype)
    return (x if d == x.dtype else x.astype(d)), False
  if isinstance(x, Array) and not isinstance(x.dtype, dtypes.ExtendedDType):  # (not keys)
    return x._value, x._weak
  if isinstance(x, (bool, int, float, complex, np.generic)):
    aval = core.get_aval(x)
    try:
      return np.asarray(x, aval.dtype), aval.weak_type
    except OverflowError:
      raise OverflowError(f"Python int {x} too large to convert to {aval.dtype}") from None
  if hasattr(x, "__jax_array__"):
    raise ValueError(core.JAX_ARRAY_ABSTRACTIFY)
  name = f"'{prim.name}' " if prim is not None else ""
  raise TypeError(f"primitive {name}got an argument of type {type(x).__name__} ({x!r:.80}), "
                  "which is not a valid nbjax type (arrays, NumPy arrays and Python scalars are)")


def as_output(o, aval):
  """A backend result as the canonical host buffer of ``aval`` (dtype, C order)."""
  if type(o) is not np.ndarray or o.dtype != aval.dtype:
    o = np.asarray(o, dtype=aval.dtype)
  if not o.flags.c_contiguous:
    o = np.ascontiguousarray(o)
  return o


def _out_size(vals, out_aval):
  return max((a.size for a in out_aval), default=0) if isinstance(out_aval, (list, tuple)) else out_aval.size


def eager_size(prim):
  """``size(vals, out_aval)``: the count ``prim``'s policy threshold compares against."""
  return getattr(getattr(prim, "make_eager", None), "size", _out_size)


def _call(f, quiet, vals, params):
  """``f(*vals, **params)``, inside the quiet context when ``quiet`` (a numba/NumPy run)."""
  if not quiet:
    return f(*vals, **params)
  try:
    return quiet_run(f, *vals, **params)
  except RuntimeError as e:
    return quiet_retry(e, f, *vals, **params)


_NO_PARAMS: dict = {}
# a specialised kernel marked ``bare``: it allocates its output (C order, the result's dtype)
# and runs numba code only (no NumPy arithmetic whose floating-point warnings need silencing)
_BARE = "bare"
_new = object.__new__


# ``(prim, args, params) -> result`` for operands of an extended dtype (key arrays), installed
# by ``nbjax.lax.prng``: the structural primitives JAX allows on keys act on their data
extended_eager = None


def make_generic_eager(prim, f_small, f_large, thr, size=_out_size):
  """Eager entry: validate with abstract_eval (cached per operand signature and params), pick
  the backend by ``size(vals, out_aval)`` (output elements by default), run it, wrap."""
  ae = prim.abstract_eval
  multi = prim.multiple_results
  cache = {}  # (shapes, dtypes, weak types, params) -> validated output aval(s)
  bf = {}  # the same for bf16 signatures -> (output aval(s), small run, large run): ``roundtrip``
  small, large, _ = policy(prim)
  q_small, q_large = small in ("numba", "numpy"), large in ("numba", "numpy")
  # the hot path: operands all Arrays, a signature (shapes, dtypes, weak types, params) seen
  # before -> (backend run, whether it runs quiet, output aval(s)), decided once
  hot = {}

  def eager(*args, **params):
    try:
      if len(args) == 1:
        a = args[0]
        if type(a) is not Array:
          return general(args, params)
        vals = (a._value,)
        h = hot.get((vals[0].shape, vals[0].dtype, a._weak, *params.items()))
      elif len(args) == 2:
        a, b = args
        if type(a) is not Array or type(b) is not Array:
          return general(args, params)
        vals = (a._value, b._value)
        h = hot.get((vals[0].shape, vals[0].dtype, a._weak, vals[1].shape, vals[1].dtype,
                     b._weak, *params.items()))
      elif len(args) == 3:  # scatters, select_n, clamp, dynamic_update_slice
        a, b, c = args
        if type(a) is not Array or type(b) is not Array or type(c) is not Array:
          return general(args, params)
        vals = (a._value, b._value, c._value)
        h = hot.get((vals[0].shape, vals[0].dtype, a._weak, vals[1].shape, vals[1].dtype,
                     b._weak, vals[2].shape, vals[2].dtype, c._weak, *params.items()))
      else:
        return general(args, params)
    except TypeError:  # unhashable params (lists, arrays): no caching
      return general(args, params)
    if h is None:
      return general(args, params)
    f, q, out_aval, raw = h
    if raw is _BARE:  # a specialised kernel-only run: its output is the result's buffer
      a = _new(Array)
      a._value, a._weak, a._buf = f(*vals), out_aval.weak_type, None
      return a
    out = _call(f, q, vals, _NO_PARAMS if raw else params)
    if multi:
      return [_wrap(as_output(o, a), a.weak_type) for o, a in zip(out, out_aval)]
    return _wrap(as_output(out, out_aval), out_aval.weak_type)

  def general(args, params):
    vals, sig, foreign = [], [], None
    for a in args:
      if type(a) is Array:
        v, w = a._value, a._weak
      else:
        if extended_eager is not None and isinstance(getattr(a, "dtype", None),
                                                     dtypes.ExtendedDType):
          return extended_eager(prim, args, params)  # key arrays (nbjax.lax.prng)
        v, w = coerce(a, prim)
        foreign = [v] if foreign is None else [*foreign, v]
      vals.append(v)
      sig.append((v.shape, v.dtype, w))
    try:
      key = (tuple(sig), tuple(params.items()))
      out_aval = cache.get(key)
    except TypeError:  # unhashable params (lists, arrays): no caching
      key = out_aval = None
    rt = None
    if out_aval is None:
      rt = bf.get(key) if key is not None else None
      if rt is None:
        avals = [core.ShapedArray(*s) for s in sig]
        out_aval = ae(*avals, **params)
        if needs_roundtrip(prim, [s[1] for s in sig], params):
          rt = (out_aval, *(roundtrip(prim, lambda _, p, f=f: functools.partial(f, **p), avals,
                                      params) for f in (f_small, f_large)))
          if key is not None:
            bf[key] = rt
        elif key is not None:
          if len(cache) > 4096:
            cache.clear()
          cache[key] = out_aval
      if rt is not None:
        out_aval, params = rt[0], {}
    f, q = (f_small, q_small) if size(vals, out_aval) < thr else (f_large, q_large)
    if rt is not None:
      f = rt[1] if f is f_small else rt[2]
    elif foreign is None and key is not None and len(vals) <= 3:
      if len(hot) > 4096:
        hot.clear()
      # the backend's kernel for these exact avals where it has one (``x @ W``: np.dot), as
      # eager programs run it (``_raw_kernel``): a function of the arrays alone
      spec = getattr(f, "specialize", None)
      k = spec([core.ShapedArray(*s) for s in sig], params) if spec is not None else None
      hot[tuple(x for s in sig for x in s) + key[1]] = (f, q, out_aval, False) if k is None \
          else (k, q, out_aval, _BARE if getattr(k, "bare", False) and not multi else True)
    out = _call(f, q, vals, params)
    if multi:
      outs = [as_output(o, a) for o, a in zip(out, out_aval)]
      if foreign is not None:  # a caller's NumPy input: no output may be a view of it
        outs = [own(o, foreign) for o in outs]
      return [_wrap(o, a.weak_type) for o, a in zip(outs, out_aval)]
    out = as_output(out, out_aval)
    return _wrap(out if foreign is None else own(out, foreign), out_aval.weak_type)

  eager.hot = hot
  return eager


def bare_kernel(prim, x, params):
  """``(kernel, weak_type)`` when ``prim.eager(x, **params)`` (``x`` an Array) last ran a
  bare specialised kernel on its hot path (a function of the raw array returning the result's
  own buffer, or a list of them with a tuple of weak types for a primitive of several
  results) and ``prim.eager`` is still the registry's entry, else None: for callers that
  memoise the call (``nbjax.numpy``'s reductions and sort), keyed on the entry it came from."""
  e = prim.eager
  hot = getattr(e, "hot", None)
  if hot is None or e is not getattr(prim, "_registry_eager", None):
    return None
  v = x._value
  try:
    h = hot.get((v.shape, v.dtype, x._weak, *params.items()))
  except TypeError:
    return None
  if h is None:
    return None
  if prim.multiple_results:
    return (h[0], tuple(a.weak_type for a in h[2])) if h[3] is True and getattr(
        h[0], "bare", False) else None
  return (h[0], h[2].weak_type) if h[3] is _BARE else None


# ----------------------------------------------------------------- eager programs


def _raw_kernel(eqn):
  """``eqn`` as a function of raw ndarrays: the kernel the policy picks for its static avals
  (specialised to the dtypes where the backend can), or a ``bind`` on wrapped values for
  primitives without raw backends (user and call primitives)."""
  prim, params = eqn.primitive, eqn.params
  in_avals = [x.aval for x in eqn.invars]
  out_avals = [v.aval for v in eqn.outvars]
  small, large, thr = policy(prim)
  if small in ("numba", "numpy") and large in ("numba", "numpy") and (
      prim.family != "user" or prim.meta.get("pure")):  # pure: a numba_primitive's kernel
    n = eager_size(prim)(in_avals, out_avals if prim.multiple_results else out_avals[0])
    if n >= thr and (small, large) == ("numpy", "numba") and prim.family == "elementwise" and \
        len(in_avals) == 2 and in_avals[0].shape and in_avals[1].shape and \
        in_avals[0].shape != in_avals[1].shape and \
        exact_kernel(prim, tuple(a.dtype for a in in_avals), params):
      n = 0  # operands broadcasting size-1 axes: NumPy's loops, as the eager entry runs them
    impl = prim.impls[small if n < thr else large]
    if needs_roundtrip(prim, [a.dtype for a in in_avals], params):
      resolve = getattr(impl, "resolve", None)
      return roundtrip(prim, resolve or (lambda _, p: functools.partial(impl, **p)),
                       in_avals, params)
    spec = getattr(impl, "specialize", None)  # a kernel for these exact avals, if simpler
    k = spec(in_avals, params) if spec is not None else None
    if k is not None:
      return k
    resolve = getattr(impl, "resolve", None)  # elementwise: the kernel for these dtypes
    if resolve is not None:
      return resolve(tuple(a.dtype for a in in_avals), params)
    return functools.partial(impl, **params) if params else impl
  weaks = [a.weak_type for a in in_avals]

  def via_bind(*xs):
    out = prim.bind(*[_wrap(x, w) for x, w in zip(xs, weaks)], **params)
    return [coerce(o, prim)[0] for o in out] if prim.multiple_results else coerce(out, prim)[0]
  return via_bind


def _is_literal(x):
  return type(x) is Literal


# primitives whose result holds its operand's elements in the same order (C order) when the
# element count is unchanged: a reshape, a zero-copy view in an eager program
_SAME_ORDER = frozenset({"reshape", "squeeze", "broadcast_in_dim", "reduce_sum", "reduce_max",
                         "reduce_min", "reduce_prod"})


def _rewrite(eqn, ins, views):
  """``eqn`` (inputs ``ins``) as ``("alias", atom)`` when its result is ``atom`` itself,
  ``("view", atom)`` when it is ``atom``'s elements in a new shape (a reshape: an expand_dims
  broadcast, a reduction over axes of size 1 as XLA's simplifier rewrites it, a reshape of a
  reshape reads the first operand), or None. ``views``: var -> the atom it is a view of."""
  name, p = eqn.primitive.name, eqn.params
  x = ins[0] if ins else None
  if x is None or _is_literal(x) or eqn.primitive.multiple_results:
    return None
  o = eqn.outvars[0].aval
  if name in _SAME_ORDER and x.aval.size == o.size and x.aval.dtype == o.dtype and (
      name != "reshape" or p.get("dimensions") is None) and (
      name != "broadcast_in_dim" or list(p["broadcast_dimensions"]) == sorted(p["broadcast_dimensions"])):
    x = views.get(x, x)
    return ("alias" if x.aval.shape == o.shape else "view", x)
  if (name == "convert_element_type" and p["new_dtype"] == x.aval.dtype or
      name == "transpose" and tuple(p["permutation"]) == tuple(range(o.ndim)) or
      name.startswith("reduce_") and p.get("axes") == ()):
    return "alias", x
  if name == "mul" and o.dtype.kind in "fiu":  # x * 1 is x (IEEE: exactly, NaN, inf, -0)
    for one, y in ((ins[0], ins[1]), (ins[1], ins[0])):
      if (_is_literal(one) and not _is_literal(y) and y.aval.shape == o.shape and
          y.aval.dtype == o.dtype and np.ndim(one.val) == 0 and one.val == 1):
        return "alias", y
  return None


def _cse(jaxpr):
  """``(eqns, canon)``: the equations left after rewriting identities and views
  (``_rewrite``) and common-subexpression elimination (jvp rules recompute primal pieces,
  e.g. ``sin`` and ``cos`` of one operand), as ``(eqn, inputs, view)`` (``view``: the eqn
  is a reshape of ``inputs[0]`` to its output shape), and the map from each dropped output
  to the atom that replaces it."""
  canon, seen, eqns, views = {}, {}, [], {}
  for e in jaxpr.eqns:
    ins = [canon.get(x, x) if not _is_literal(x) else x for x in e.invars]
    view = False
    r = _rewrite(e, ins, views)
    if r is not None:
      if r[0] == "alias":
        canon[e.outvars[0]] = r[1]
        continue
      ins, view = [r[1]], True
      views[e.outvars[0]] = r[1]
    key = hit = None
    if not e.effects:  # an effect runs each time it is written: never merged
      try:
        key = ("view" if view else e.primitive,
               tuple((x.val, x.aval) if _is_literal(x) else x for x in ins),
               e.outvars[0].aval.shape if view else tuple(e.params.items()))
        hit = seen.get(key)
      except TypeError:  # unhashable params or literal values
        key = hit = None
    if hit is not None:
      canon.update(zip(e.outvars, hit))
      continue
    if key is not None:
      seen[key] = e.outvars
    eqns.append((e, ins, view))
  live = {x for x in jaxpr.outvars if not _is_literal(x)}
  live = {canon.get(x, x) for x in live}
  kept = []
  for e, ins, view in reversed(eqns):  # what the rewrites left unread (a view read by a view)
    if e.effects or any(v in live for v in e.outvars):
      kept.append((e, ins, view))
      live.update(x for x in ins if not _is_literal(x))
  return kept[::-1], canon


def _fresh(k, out_avals):
  """Whether kernel ``k`` returns new C-contiguous buffers of its out avals' dtypes, never a
  view of an operand: ``np.dot`` as ``dot_general`` specializes to it (one BLAS dtype) for
  outputs of rank >= 1, kernels marked ``fresh``."""
  return getattr(k, "fresh", False) or k is np.dot and out_avals[0].ndim > 0


_FUSE_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64, np.bool_)))
FUSE_MIN = 3  # equations one fused loop must replace to be worth compiling


def _fusable(eqn, ins, scalar):
  """``eqn``'s numba kernel name when it may join a fused loop: an exact kernel
  (``kernels.elementwise.EXACT``: every backend gives the same bits) over float32, float64 or
  bool operands of its output's rank (size-1 axes broadcast) or constant scalars, where its
  policy runs numba or NumPy; else None."""
  prim, o = eqn.primitive, eqn.outvars[0].aval
  if (prim.family != "elementwise" or prim.multiple_results or not o.ndim or
      o.dtype not in _FUSE_DTYPES or not all(
          x.aval.dtype in _FUSE_DTYPES and (scalar(x) or x.aval.ndim == o.ndim and all(
              d in (1, n) for d, n in zip(x.aval.shape, o.shape))) for x in ins)):
    return None
  name = exact_kernel(prim, tuple(x.aval.dtype for x in ins), eqn.params)
  # a real division by a broadcast divisor is XLA's product with the reciprocal (lax's div)
  return "div_recip" if name == "div" and ins[1].aval.shape != o.shape else name


def exact_kernel(prim, in_dtypes, params):
  """The name of ``prim``'s numba kernel for operands of ``in_dtypes`` when a loop running its
  scalar expression gives the bits of every backend its policy runs (numba or NumPy, not a
  pinned backend); else None. Exact arithmetic (``kernels.elementwise.EXACT``) always does;
  a libm-based kernel (exp, log, sin...) does where NumPy's loop calls the same libm as numba,
  which ``_same_bits`` measures once per signature. Eager programs (``_fuse``) and eager fusion
  (``nbjax.fusion``) fuse only these."""
  small, large, _ = policy(prim)
  resolve = getattr(prim.impls.get("numba"), "resolve", None)
  if (small not in ("numba", "numpy") or large not in ("numba", "numpy") or resolve is None
      or prim.name in _overrides or _override_all is not None):  # (a pinned backend runs)
    return None
  from kernels import elementwise as KE
  try:
    name = getattr(resolve(in_dtypes, params), "kname", None)
  except Exception:  # noqa: BLE001  (no numba kernel for these dtypes)
    return None
  if name in KE.EXACT:
    return name
  if name in KE.PROBED and _same_bits(prim, {small, large} - {"numba"}, in_dtypes, params):
    return name
  return None


_SAME_BITS: dict = {}  # (primitive, backends, dtypes, params) -> bool


def _same_bits(prim, backends, in_dtypes, params):
  """Whether ``backends`` of ``prim`` give its numba kernel's bits (NaNs as NaNs) on probe
  operands of ``in_dtypes`` (real floats): special values, subnormals, every binade of both
  signs, dense samples of [-8, 8]. NumPy's float loops call the C library's libm on some
  machines (float64 exp, log, sin... with AVX2), the same functions numba's code calls, and
  their own SIMD approximations on others (float32 exp on AVX2, float64 on AVX-512), which
  differ by an ulp somewhere on every probe. numba vectorizing libm calls (SVML) would make a
  loop's bits depend on its shape: then never."""
  try:
    key = (prim, frozenset(backends), in_dtypes, tuple(sorted(params.items())))
    hit = _SAME_BITS.get(key)
  except TypeError:  # unhashable params
    return False
  if hit is not None:
    return hit
  import numba
  same = not numba.config.USING_SVML and all(np.dtype(d).kind == "f" for d in in_dtypes)
  if same:
    xs = _probe_operands(in_dtypes)
    want = quiet_run(prim.impls["numba"], *xs, **params)
    for b in backends:
      got = quiet_run(prim.impls[b], *xs, **params)
      same = same and got.dtype == want.dtype and got.shape == want.shape and bool(np.all(
          (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) |
          (np.isnan(got) & np.isnan(want))))
  _SAME_BITS[key] = same
  return same


def probed():
  """``(primitive, dtype)`` for every elementwise primitive whose numba kernel at float32 or
  float64 operands is libm-based (``kernels.elementwise.PROBED``): those ``exact_kernel``
  fuses only where ``_same_bits`` measured NumPy giving numba's bits."""
  from kernels import elementwise as KE
  out = []
  for p in primitives(builtin_only=True):
    resolve = getattr(p.impls.get("numba"), "resolve", None)
    if p.family != "elementwise" or resolve is None:
      continue
    for d in map(np.dtype, (np.float32, np.float64)):
      try:
        name = resolve((d,) * p.arity, {}).kname
      except Exception:  # noqa: BLE001  (needs params, or not for this dtype)
        continue
      if name in KE.PROBED:
        out.append((p, d))
  return out


def _probe_operands(in_dtypes, n=1 << 14):
  """Operands for ``_same_bits``: each a float array of ``in_dtypes[i]``; binary and ternary
  operands pair every special value with every other and random values with each other."""
  out = []
  for i, d in enumerate(in_dtypes):
    d = np.dtype(d)
    fi, rng = np.finfo(d), np.random.default_rng(i)
    special = np.array([0.0, np.inf, np.nan, fi.smallest_subnormal, fi.tiny, fi.eps, fi.max,
                        0.5, 1.0, 2.0, np.pi, 1e-3, 20.0, 100.0, 700.0, 1e10], d)
    special = np.concatenate([special, -special])
    binades = np.ldexp(rng.uniform(1, 2, n), rng.integers(fi.minexp - fi.nmant, fi.maxexp, n))
    dense = rng.uniform(-8, 8, n)
    sign = np.where(rng.random(n) < .5, -1.0, 1.0)
    with np.errstate(all="ignore"):
      rand = np.concatenate([binades * sign, dense]).astype(d)
    k = len(special)  # special x special, arranged so operand i cycles at its own stride
    grid = np.indices((k,) * len(in_dtypes)).reshape(len(in_dtypes), -1)[i]
    out.append(np.concatenate([special[grid], rng.permutation(rand)]))
  return out


def _groups(steps, fusable):
  """Runs of at least ``FUSE_MIN`` consecutive fusable steps of one output shape."""
  groups, cur = [], []
  for i in steps:
    shape = fusable[i] and fusable[i][1]
    if cur and shape != fusable[cur[0]][1]:
      if len(cur) >= FUSE_MIN:
        groups.append(cur)
      cur = []
    if shape:
      cur.append(i)
  if len(cur) >= FUSE_MIN:
    groups.append(cur)
  return groups


_CAST = {np.dtype(np.float32): "np.float32", np.dtype(np.float64): "np.float64",
         np.dtype(np.bool_): "bool"}


def _fuse(group, eqns, kinds, known, live, dead, name, ns):
  """The program lines running ``group`` (equation indices) as one numba loop: its operands
  are read per element (a flat loop when all have the output's shape, else nested loops
  that broadcast size-1 axes), constants and literals are scalar arguments (a constant
  array of one repeated value too), and each value read after the group is written to the
  buffer of an operand of its shape and dtype that dies in the loop (``dead(x)``: an
  iteration reads its elements before it writes them), else to a new buffer."""
  from kernels import elementwise as KE
  shape = eqns[group[0]][0].outvars[0].aval.shape
  arrays, scalars, temps, body = {}, {}, {}, []
  for i in group:
    eqn, ins, _ = eqns[i]
    ops = []
    for x in ins:
      if x in temps:
        ops.append(temps[x])
        continue
      v = ns[name(x)] if _is_literal(x) or x in known else None
      if v is not None and v.size and (v.ndim == 0 or np.all(
          v.view(f"u{v.itemsize}") == v.view(f"u{v.itemsize}").flat[0])):
        n = scalars.setdefault(x, (f"s{len(scalars)}", v.flat[0]))[0]
      else:
        n = arrays.setdefault(x, f"a{len(arrays)}")
      ops.append(n)
    t = temps[eqn.outvars[0]] = f"t{len(temps)}"
    body.append(f"    {t} = {KE.step(kinds[i], ops, _CAST[eqn.outvars[0].aval.dtype])}")
  outs = [v for v in temps if v in live]
  params = [f"x{j}" for j in range(len(arrays))] + [n for n, _ in scalars.values()] + \
      [f"o{j}" for j in range(len(outs))]
  if all(x.aval.shape == shape for x in arrays):  # one flat loop over 1-D views
    head = ["  n = o0.size", *(f"  y{j} = x{j}.reshape(n)" for j in range(len(arrays))),
            *(f"  q{j} = o{j}.reshape(n)" for j in range(len(outs))), "  for i in range(n):"]
    depth, src_in, src_out, at = 1, "y", "q", lambda v: "[i]"
  else:  # nested loops over the output's axes; a size-1 axis of an operand reads index 0
    head = [f"{'  ' * (d + 1)}for i{d} in range(o0.shape[{d}]):" for d in range(len(shape))]
    depth, src_in, src_out, at = len(shape), "x", "o", lambda v: "[" + ", ".join(
        f"i{d}" if v is None or v.aval.shape[d] == n else "0" for d, n in enumerate(shape)) + "]"
  ind = "  " * (depth + 1)
  src = "\n".join(
      [f"def {{fn}}({', '.join(params)}):", *head,
       *(f"{ind}a{j} = {src_in}{j}{at(v)}" for j, v in enumerate(arrays)),
       *(ind + b.lstrip() for b in body),
       *(f"{ind}{src_out}{j}{at(None)} = {temps[v]}" for j, v in enumerate(outs))]) + "\n"
  k = KE.fused(src)
  example = [np.empty(shape, x.aval.dtype) for x in arrays] + [v for _, v in scalars.values()] + \
      [np.empty(shape, v.aval.dtype) for v in outs]
  f = f"f{len(ns)}"
  ns[f] = KE.entry(k, *example)
  for n, v in scalars.values():
    ns[f"{f}{n}"] = v
  lines, donors = [], [x for x in arrays if x.aval.shape == shape and dead(x)]
  for v in outs:
    d = next((x for x in donors if x.aval.dtype == v.aval.dtype), None)
    if d is None:
      ns[f"d{name(v)}"] = v.aval.dtype
      lines.append(f"  {name(v)} = _empty({shape!r}, d{name(v)})")
    else:
      donors.remove(d)
      lines.append(f"  {name(v)} = {name(d)}")
  args = [name(x) for x in arrays] + [f"{f}{n}" for n, _ in scalars.values()] + \
      [name(v) for v in outs]
  lines.append(f"  {f}({', '.join(args)})")
  return lines, outs


# ``(has_keys(jaxpr), physicalize(closed))``, installed by ``nbjax.lax.prng`` (as for jit's
# lowering): a program holding key arrays (extended dtypes) runs on their raw data
physicalize_hook = None


def eager_program(jaxpr, consts, fuse=False):
  """Compile a jaxpr into straight-line Python over raw host buffers: each equation calls the
  kernel its primitive's policy picks for the equation's (static) avals, with none of the
  per-call validation, dispatch or wrapping of ``bind``. Identities (``x * 1``, a
  same-dtype convert) are dropped, reshapes and their equivalents (expand_dims broadcasts,
  reductions over axes of size 1) are views, repeated subexpressions run once, constant
  subexpressions are folded at build time (equations with effects, callbacks, are neither
  folded nor merged: they run on every call); a kernel whose operand is a buffer the program
  allocated, that only fresh-buffer kernels read (no view of it can exist) and that it reads
  for the last time writes into it (a ufunc's ``out=``), as XLA reuses dead buffers. With
  ``fuse``, runs of at least ``FUSE_MIN`` exact elementwise equations (``_fusable``: results
  are the same bits on every backend) become one numba loop each (compiled now: replays of
  hot programs, ``nbjax.eager_cache``). ``program(*ndarrays)`` returns the output ndarrays
  (C-contiguous, of the out avals' dtypes); ``program.fused`` counts the loops. Replays
  cached traces (``nbjax.eager_cache``) and the tape's per-primitive VJPs; the avals were
  checked when the jaxpr was traced."""
  h = physicalize_hook
  if h is not None and h[0](jaxpr):  # key arrays: the program runs on their data, as jit's
    closed = h[1](ClosedJaxpr(jaxpr, consts))
    jaxpr, consts = closed.jaxpr, closed.consts
  ns = {"_fix": as_output, "_nd": np.ndarray, "_run": quiet_run, "_retry": quiet_retry,
        "_empty": np.empty}
  env = {}
  eqns, canon = _cse(jaxpr)
  outvars = [canon.get(x, x) if not _is_literal(x) else x for x in jaxpr.outvars]

  def name(atom, prefix="v"):
    if _is_literal(atom):
      n = env.get(("lit", id(atom)))
      if n is None:
        n = env[("lit", id(atom))] = f"l{len(ns)}"
        ns[n] = np.asarray(atom.val, atom.aval.dtype)
      return n
    n = env.get(atom)
    if n is None:
      n = env[atom] = f"{prefix}{len(env)}"
    return n

  known = {}  # constvars and folded equations: atom -> value
  for v, c in zip(jaxpr.constvars, consts):
    n = name(v, "c")
    ns[n] = known[v] = as_output(c._value if isinstance(c, Array) else np.asarray(c), v.aval)
  args = [name(v, "a") for v in jaxpr.invars]
  ks, steps = {}, []  # the kernels of the equations that run per call, in order
  for i, (eqn, invars, view) in enumerate(eqns):
    if view:
      if invars[0] in known or _is_literal(invars[0]):
        ns[name(eqn.outvars[0], "c")] = known[eqn.outvars[0]] = ns[name(invars[0])].reshape(
            eqn.outvars[0].aval.shape)
      else:
        steps.append(i)
      continue
    k = _raw_kernel(eqn)
    if eqn.primitive.family not in ("user", "call", "callback") and not eqn.effects and all(
        _is_literal(x) or x in known for x in invars):  # constant folding, at build time
      vals = k(*[ns[name(x)] for x in invars])
      for v, o in zip(eqn.outvars, vals if eqn.primitive.multiple_results else [vals]):
        ns[name(v, "c")] = known[v] = as_output(o, v.aval)
      continue
    ks[i] = k
    steps.append(i)

  groups, kinds = [], {}
  if fuse:
    scalar = lambda x: x.aval.ndim == 0 and (_is_literal(x) or x in known)
    fusable = {}
    for i in steps:
      eqn, ins, view = eqns[i]
      kinds[i] = None if view else _fusable(eqn, ins, scalar)
      fusable[i] = kinds[i] and (kinds[i], eqn.outvars[0].aval.shape)
    groups = _groups(steps, fusable)
  grouped = {i: g for g in groups for i in g}
  inside = {v: id(g) for g in groups for i in g for v in eqns[i][0].outvars}
  live = set(outvars)  # what is read outside the group defining it
  for i in steps:
    g = id(grouped.get(i))
    live.update(x for x in eqns[i][1] if not _is_literal(x) and inside.get(x) != g)

  last = {x: i for i in steps for x in eqns[i][1]}  # an atom's last reader
  keep = set(outvars)
  for i in steps:  # a reader that may return a view (reshape...) shares its operands
    eqn, ins, view = eqns[i]
    k = ks.get(i)
    if view or i not in grouped and not (
        type(k) is np.ufunc or k is np.dot or _fresh(k, [v.aval for v in eqn.outvars])):
      keep.update(ins)
  fresh = set()  # vars whose buffer this program allocated and nothing else can see

  lines = [f"def body({', '.join(args)}):"]
  nfused = 0
  for i in steps:
    eqn, invars, view = eqns[i]
    if i in grouped:
      g = grouped[i]
      if i == g[0]:
        try:
          gs = set(g)
          dead = lambda x: x in fresh and last[x] in gs and x not in keep
          more, outs = _fuse(g, eqns, kinds, known, live, dead, name, ns)
        except Exception:  # noqa: BLE001  (numba cannot compile it: the equations run one by one)
          for j in g:
            del grouped[j]
        else:
          lines += more
          fresh.update(outs)
          nfused += 1
          continue
      else:
        continue
    out_avals = [v.aval for v in eqn.outvars]
    if view:
      lines.append(f"  {name(eqn.outvars[0])} = {name(invars[0])}.reshape({out_avals[0].shape!r})")
      continue
    k = ns[f"k{i}"] = ks[i]
    ins = [name(x) for x in invars]
    outs = [name(v) for v in eqn.outvars]
    checked = not _fresh(k, out_avals)
    if type(k) is np.ufunc and k.nout == 1:
      o = out_avals[0]
      donor = [x for x in invars if x in fresh and last[x] == i and x not in keep]
      if o.ndim and donor and all(x.aval.dtype == o.dtype for x in invars) and \
          donor[0].aval.shape == o.shape:
        ins.append(f"out={name(donor[0])}")  # the result is that buffer: nothing to check
        checked = False
      elif not o.ndim:
        ins.append("out=...")  # a 0-d array, not a NumPy scalar
      # same-dtype C-contiguous operands (every buffer here is): the result is already canonical
      checked = checked and not all(x.aval.dtype == o.dtype for x in invars)
      fresh.add(eqn.outvars[0])
    elif k is np.dot or not checked:
      fresh.update(eqn.outvars)
    trail = "," if len(outs) == 1 and eqn.primitive.multiple_results else ""
    call = f"k{i}({', '.join(ins)})"
    lines.append(f"  {', '.join(outs)}{trail} = {call}" if outs else f"  {call}")  # effects only
    for v, o in zip(eqn.outvars, outs):
      if checked:
        ns[f"t{o}"], ns[f"d{o}"] = v.aval, v.aval.dtype
        lines.append(f"  if type({o}) is not _nd or {o}.dtype is not d{o} or "
                     f"not {o}.flags.c_contiguous: {o} = _fix({o}, t{o})")
  lines.append(f"  return ({''.join(name(x) + ', ' for x in outvars)})")
  a = ", ".join(args)  # the program runs the body with NumPy's floating-point errors ignored
  lines += [f"def program({a}):", "  try:", f"    return _run(body{', ' * bool(a)}{a})",
            "  except RuntimeError as e:", f"    return _retry(e, body{', ' * bool(a)}{a})"]
  src = "\n".join(lines)
  exec(src, ns)
  program = ns["program"]
  program.source, program.fused = src, nfused  # for reading what runs
  return program


# ----------------------------------------------------------------- printing


def rows():
  out = []
  for p in primitives():
    out.append(dict(
        primitive=p.name, family=p.family,
        eager=backend_label(p) if p.family != "user" else (p.backend or "-"),
        kernels=",".join(b for b in BACKENDS if b in p.impls) or "-",
        abstract_eval="yes" if p.abstract_eval_rule else "-",
        # "trace": each trace processes the primitive itself (custom_jvp/custom_vjp calls)
        jvp="yes" if p.jvp else "trace" if p.meta.get("by_trace") else (
            "n/a" if p.meta.get("differentiable") is False else "-"),
        transpose="yes" if p.transpose else ("-" if p.meta.get("linear") else "n/a"),
        batch="yes" if p.batch else "trace" if p.meta.get("by_trace") else "-",
        jet="yes" if p.jet else "trace" if p.meta.get("by_trace") else "-",  # Taylor rule
        lowering=",".join(sorted(p.lowerings)) or "-",
        # bfloat16 in eager backends: "f32" round trip, "native" kernels, "-" not accepted
        bf16=bf16_mode(p) if p.family != "user" else "-",
        # float8/6/4, int4/2: "wide" round trip (float32, int8/uint8), "bits", "own", "-": see _WIDE
        narrow=narrow_mode(p) if p.family != "user" else "-",
        note=p.meta.get("note", ""),
    ))
  return out


def table(markdown=False):
  rs = rows()
  if not rs:
    return "(no primitives registered)"
  cols = list(rs[0])
  if markdown:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rs]
    return "\n".join(lines)
  w = {c: max(len(c), *(len(str(r[c])) for r in rs)) for c in cols[:-1]}
  w[cols[-1]] = len(cols[-1])  # the last column (notes) is not padded: lines end with it
  lines = ["  ".join(c.ljust(w[c]) for c in cols), "  ".join("-" * w[c] for c in cols)]
  lines += ["  ".join(str(r[c]).ljust(w[c]) for c in cols).rstrip() for r in rs]
  return "\n".join(lines)


def main(argv=None):
  import argparse
  # ``python -m nbjax.registry`` has imported the package (so every primitive) already
  ap = argparse.ArgumentParser(prog="python -m nbjax.registry", description=__doc__.split("\n")[0])
  ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
  ap.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                  help="import MODULE first, so the primitives it defines (family 'user', "
                       "e.g. nbjax.extend.numba_primitive) are listed too")
  a = ap.parse_args(argv)
  import importlib
  for m in a.modules:
    importlib.import_module(m)
  print(table(markdown=a.markdown))
  print()
  ps = primitives(builtin_only=True)
  for i, which in ((0, "small arrays"), (1, "large arrays")):
    counts = {b: sum(policy(p)[i] == b for p in ps) for b in BACKENDS}
    print(f"{which}: " + ", ".join(f"{b} {n}" for b, n in counts.items() if n))
  print(f"{len(ps)} primitives, {sum(bool(p.lowerings) for p in ps)} with a StableHLO lowering")
  from kernels import threads
  print(("threads: two (the native team, kernels.threads): " + "; ".join(
      f"{k} {v}" for k, v in threads.TEAM_USES.items())) if threads.TEAM else
      "threads: one for elementwise work and row reductions (NBJAX_TEAM=0, one allowed core, "
      "or not Linux on x86-64)")
  fuse = {}
  for p, d in probed():
    fuse.setdefault(bool(exact_kernel(p, (d,) * p.arity, {})), []).append(f"{p.name}:{d.name[5:]}")
  print("libm-based kernels fused into eager loops here (NumPy's loop measured giving numba's "
        f"bits): {' '.join(fuse.get(True, [])) or '-'}; not fused: {' '.join(fuse.get(False, [])) or '-'}")


if __name__ == "__main__":
  main()
