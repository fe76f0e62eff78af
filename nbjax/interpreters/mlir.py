"""Lowering: jaxpr -> StableHLO module, one rule per primitive.

Pipeline position: ``jit`` stages a function to a jaxpr (``partial_eval``); the call
primitive's impl lowers that jaxpr here to a StableHLO module whose public function is
``main`` (each equation through its primitive's lowering rule, nested jaxprs of higher-order
primitives as private functions reached by ``func.call``), and ``nbjax.xla`` compiles and
runs it. A rule is ``rule(ctx, *operands, **params) -> [ir.Value]`` registered with
``register_lowering(prim, rule, platform="cpu")`` (stored in ``prim.lowerings``); ``ctx``
carries ``avals_in``/``avals_out``. ``hlo`` is the StableHLO dialect (seed 002's spelling).

This module imports jaxlib (through ``nbjax.xla``), so nothing imports it at ``import
nbjax`` time: the registry loads it on first use of the ``"xla"`` backend and jit on its
first compile. Lowering rules live with their primitives in ``nbjax/lax/*.py`` (through the lazy
handles of ``nbjax.interpreters.lowering``). ``single_primitive_impl(p)`` compiles one primitive to XLA: the
registry's ``"xla"`` eager backend.

Host callbacks (``nbjax/callback.py``): a rule registers a Python callable with
``ModuleContext.add_host_callback`` and emits a custom call naming its index; the callables
travel with the module (``lower_jaxpr_to_module(..., host_callbacks=list)``) to
``xla.compile``. Equations with effects are kept in program order by a ``!stablehlo.token``
threaded through the module (``ModuleContext.token``/``get_token``): loops carry it, ``case``
branches return it, and a call whose jaxpr has effects is emitted inline.

Named axes (pmap): ``ModuleContext.axis_context`` (``pxla.AxisContext``) maps each bound axis
name to replica ids; collectives (``nbjax/lax/parallel.py``) read it for their replica groups.
"""
from __future__ import annotations

import math

import numpy as np

from nbjax import core, dtypes, registry, xla
from nbjax.interpreters import lowering

ir = xla.get_ir()
hlo = xla.get_hlo()
func_dialect = xla.get_func()


def _chlo():
  """The CHLO dialect (erf, lgamma, asin, top_k, ...: XLA legalizes it), registered on the
  shared context (``xla.mlir_context`` registers only func/stablehlo)."""
  from jaxlib.mlir.dialects import chlo as _c
  _c.register_dialect(xla.mlir_context())
  return _c


chlo = _chlo()

__all__ = [
    "ir", "hlo", "chlo", "func_dialect", "register_lowering", "LoweringRuleContext", "ModuleContext",
    "ir_constant", "ir_constants", "aval_to_ir_type", "aval_to_ir_types", "dtype_to_ir_type",
    "full_like_aval", "broadcast_in_dim", "broadcast_to", "convert", "convert_hlo", "compare",
    "compare_type", "lower_fun", "jaxpr_subcomp", "lower_jaxpr_to_fun", "lower_jaxpr_to_module",
    "single_primitive_impl", "get_lowering", "make_ir_context", "i32_attr", "i64_array",
    "token_type", "has_effects",
]

# ----------------------------------------------------------------------- types and constants


def dtype_to_ir_type(dtype):
  """MLIR element type of a numpy dtype (float0 -> i1, as JAX lowers it)."""
  dtype = np.dtype(dtype)
  if dtype == dtypes.float0:
    return ir.IntegerType.get_signless(1)
  return xla.dtype_to_ir_type(dtype)


def aval_to_ir_type(aval):
  """``ir.RankedTensorType`` of an aval (``ShapedArray``); ``!stablehlo.token`` of a token's."""
  if aval is core.abstract_token:
    return hlo.TokenType.get()
  return ir.RankedTensorType.get([int(d) for d in aval.shape], dtype_to_ir_type(aval.dtype))


def aval_to_ir_types(avals):
  return [aval_to_ir_type(a) for a in avals]


def ir_constant(val, dtype=None):
  """A ``stablehlo.constant`` for a numpy value, built with its explicit element type."""
  x = np.asarray(val) if dtype is None else np.asarray(val, dtype=dtype)
  if x.dtype == dtypes.float0:
    x = np.zeros(x.shape, np.bool_)
  return xla.ir_constant(x)


def ir_constants(val, dtype=None):
  return [ir_constant(val, dtype)]


def full_like_aval(ctx, value, aval):
  """A constant of ``aval``'s shape and dtype filled with ``value``."""
  zero = ir_constant(np.array(value, aval.dtype))
  if not aval.shape:
    return zero
  return hlo.broadcast_in_dim(aval_to_ir_type(aval), zero, i64_array([]))


def i64_array(xs):
  return ir.DenseI64ArrayAttr.get([int(x) for x in xs])


def i32_attr(v):
  return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(v))


def token_type():
  return hlo.TokenType.get()


def has_effects(*closed_jaxprs):
  """Whether any of these (closed) jaxprs has effects: its lowering must thread the token."""
  from nbjax.jaxpr import jaxpr_effects
  return any(jaxpr_effects(j) for j in closed_jaxprs)


def broadcast_in_dim(ctx, op, aval_out, *, broadcast_dimensions):
  """``stablehlo.broadcast_in_dim`` of ``op`` to ``aval_out``'s shape."""
  return hlo.broadcast_in_dim(aval_to_ir_type(aval_out), op, i64_array(broadcast_dimensions))


def broadcast_to(ctx, op, aval_in, aval_out):
  """Broadcast an elementwise operand to the output shape (lax's rules: rank-0 operands,
  or equal rank with size-1 dims). A no-op when shapes already match."""
  if tuple(aval_in.shape) == tuple(aval_out.shape):
    return op
  out = aval_out.update(dtype=aval_in.dtype, weak_type=False)
  dims = range(len(aval_out.shape)) if aval_in.shape else ()
  return broadcast_in_dim(ctx, op, out, broadcast_dimensions=dims)


def compare_type(dtype):
  """StableHLO comparison type for a dtype: FLOAT, SIGNED or UNSIGNED (bool is unsigned)."""
  dtype = np.dtype(dtype)
  if dtypes.is_inexact(dtype) or dtype.kind in "fc" or dtype == dtypes._bf16:
    return "FLOAT"
  if dtypes.kind(dtype) == "i":  # (int4: NumPy's kind is 'V')
    return "SIGNED"
  return "UNSIGNED"


def compare(x, y, direction, dtype, cmp_type=None):
  """``stablehlo.compare`` with the comparison type proper for ``dtype``."""
  return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get(direction),
                     compare_type=hlo.ComparisonTypeAttr.get(cmp_type or compare_type(dtype)))


def convert_hlo(ctx, x, aval_in, aval_out):
  """Element-type conversion with JAX's semantics: to bool means ``x != 0``; complex to real
  keeps the real part."""
  din, dout = np.dtype(aval_in.dtype), np.dtype(aval_out.dtype)
  if din == dout:
    return x
  if dout == np.bool_:
    zero = full_like_aval(ctx, 0, aval_in.update(weak_type=False))
    return compare(x, zero, "NE", din)
  if din.kind == "c" and dout.kind != "c":
    x = hlo.real(x)
    aval_in = aval_in.update(dtype=np.float32 if din == np.complex64 else np.float64)
    if np.dtype(aval_in.dtype) == dout:
      return x
  return hlo.convert(aval_to_ir_type(aval_out), x)


convert = convert_hlo


# ----------------------------------------------------------------------- contexts


def make_ir_context():
  """The shared MLIR context (func, stablehlo, ... registered)."""
  return xla.mlir_context()


class ModuleContext:
  """State of one module being built: the module, its symbol names, lowered callees, the
  Python callables its custom calls call back (``host_callbacks``, by index) and the effect
  token of the region being emitted (``token``: None until an effect needs one)."""

  def __init__(self, module, platform="cpu"):
    self.module = module
    self.platform = platform
    self.context = module.context
    self._names = set()
    self.cached_funcs = {}    # (id(closed_jaxpr), name) -> (func name, closed_jaxpr kept alive)
    self.keepalives = []
    self.host_callbacks = []
    self.token = None
    self.axis_context = None  # pmap: named axes -> replica ids (pxla.AxisContext)
    # each equation's op is located at a name ``f"{name_stack}/{primitive}"`` (JAX's name
    # locations: shown by ``as_text(debug_info=True)``, XLA's op_name metadata)
    self.name_stack = ""

  def add_host_callback(self, fn):
    """Register ``fn`` for the compiled module to call; returns its index."""
    self.host_callbacks.append(fn)
    return len(self.host_callbacks) - 1

  def get_token(self):
    """The current effect token, created (``stablehlo.create_token``) at first use."""
    if self.token is None:
      self.token = hlo.create_token()
    return self.token

  def unique_name(self, base):
    base = "".join(c if c.isalnum() or c in "_." else "_" for c in str(base)) or "f"
    name, k = base, 0
    while name in self._names:
      k += 1
      name = f"{base}_{k}"
    self._names.add(name)
    return name

  @property
  def body(self):
    return self.module.body


class LoweringRuleContext:
  """What a lowering rule sees besides its operands (JAX's field names)."""
  __slots__ = ("module_context", "primitive", "avals_in", "avals_out")

  def __init__(self, module_context, primitive, avals_in, avals_out):
    self.module_context = module_context
    self.primitive = primitive
    self.avals_in = list(avals_in)
    self.avals_out = list(avals_out)

  def replace(self, **kw):
    new = LoweringRuleContext(self.module_context, self.primitive, self.avals_in, self.avals_out)
    for k, v in kw.items():
      setattr(new, k, list(v) if k in ("avals_in", "avals_out") else v)
    return new

  def __repr__(self):
    return (f"LoweringRuleContext(primitive={self.primitive}, avals_in={self.avals_in}, "
            f"avals_out={self.avals_out})")


# ----------------------------------------------------------------------- the rule table

def register_lowering(prim, rule, platform=None, inline=True, cacheable=True):
  """Register ``rule(ctx, *operands, **params) -> [ir.Value]`` as ``prim``'s lowering
  (``platform`` None: every platform, i.e. the CPU; ``inline`` and ``cacheable`` are
  accepted for JAX compatibility: nbjax lowers every equation inline). An unknown platform
  raises NotImplementedError, as JAX's."""
  del inline, cacheable
  if platform is not None and platform not in _KNOWN_PLATFORMS:
    raise NotImplementedError(
        f"Registering an MLIR lowering rule for primitive {prim} for an unknown platform "
        f"{platform}. Known platforms are: {', '.join(_KNOWN_PLATFORMS)}.")
  lowering.register(prim, rule, "cpu" if platform is None else platform)


_KNOWN_PLATFORMS = ("cpu", "cuda", "gpu", "oneapi", "rocm", "tpu")  # (JAX's known_platforms)


def get_lowering(prim, platform="cpu"):
  """``prim``'s lowering rule for ``platform``, or the seed's NotImplementedError."""
  rule = prim.lowerings.get(platform)
  if rule is None:
    raise registry.missing_rule(f"lowering:{platform}", prim)
  return rule


def _as_values(out, prim):
  if isinstance(out, ir.Value):
    return [out]
  if isinstance(out, (ir.Operation, ir.OpView)):
    return list(out.results)
  vals = []
  for o in out:
    if isinstance(o, (ir.Operation, ir.OpView)):
      vals.extend(o.results)
    else:
      vals.append(o)
  return vals


# ----------------------------------------------------------------------- jaxpr lowering

_Literal = None


def _literal_type():
  global _Literal
  if _Literal is None:
    from nbjax.jaxpr import Literal
    _Literal = Literal
  return _Literal


def lower_eqn(mctx, prim, params, avals_in, avals_out, args):
  """Lower one primitive application; returns its output values."""
  rule = get_lowering(prim, mctx.platform)
  rctx = LoweringRuleContext(mctx, prim, avals_in, avals_out)
  outs = _as_values(rule(rctx, *args, **params), prim)
  if len(outs) != len(avals_out):
    raise ValueError(f"lowering rule for '{prim.name}' returned {len(outs)} values, "
                     f"expected {len(avals_out)}")
  return outs


def jaxpr_subcomp(mctx, jaxpr, consts, args):
  """Emit ``jaxpr``'s equations at the current insertion point; ``consts``/``args`` are the
  values of its constvars/invars. Returns the values of its outvars."""
  Literal = _literal_type()
  env = {}

  def read(a):
    if isinstance(a, Literal):
      return ir_constant(np.asarray(a.val, a.aval.dtype))
    return env[a]

  for v, x in zip(jaxpr.constvars, consts):
    env[v] = x
  for v, x in zip(jaxpr.invars, args):
    env[v] = x
  loc = ir.Location.name
  stack = mctx.name_stack + "/" if mctx.name_stack else ""
  for eqn in jaxpr.eqns:
    ins = [read(a) for a in eqn.invars]
    with loc(stack + eqn.primitive.name):
      outs = lower_eqn(mctx, eqn.primitive, eqn.params, [a.aval for a in eqn.invars],
                       [v.aval for v in eqn.outvars], ins)
      if core.sharding_rule_hook is not None and getattr(mctx, "spmd", None):
        outs = _pin_typed(mctx, eqn, outs)
    for v, o in zip(eqn.outvars, outs):
      env[v] = o
  return [read(v) for v in jaxpr.outvars]


def _pin_typed(mctx, eqn, outs):
  """Each result whose aval carries a sharding (Explicit mesh axes) pinned to it by an
  ``sdy.sharding_constraint``, as JAX's lowering of sharding in types."""
  if eqn.primitive.name == "sharding_constraint":
    return outs
  from jaxlib.mlir.dialects import sdy
  return [o if getattr(v.aval, "_sh", None) is None else sdy.ShardingConstraintOp(
      o, mctx.spmd.attr(v.aval._sh, v.aval.ndim)).result for v, o in zip(eqn.outvars, outs)]


def _const_values(consts, avals):
  try:
    return [_const(c, a) for c, a in zip(consts, avals)]
  except RuntimeError as e:  # a global array of another process's data is no constant
    if "spans non-addressable" not in str(e):
      raise
    a = next(a for c, a in zip(consts, avals) if getattr(c, "is_fully_addressable", True)
             is False)
    raise RuntimeError("Closing over jax.Array that spans non-addressable (non process "
                       "local) devices is not allowed. Please pass such arrays as arguments "
                       f"to the function. Got jax.Array: {a.str_short()}") from e


def _const(c, aval):
  return hlo.create_token() if aval is core.abstract_token else \
      ir_constant(np.asarray(c, aval.dtype))


def _consts_avals(closed_jaxpr):
  return [v.aval for v in closed_jaxpr.jaxpr.constvars]


def lower_jaxpr_to_fun(mctx, name, closed_jaxpr, *, public=False, hoisted=()):
  """Lower a ClosedJaxpr to a function in ``mctx``'s module; returns its symbol name.

  Consts are baked in as constants, except indices in ``hoisted``, which become leading
  function parameters (the caller passes their values). Private functions are cached per
  (jaxpr identity, name) within a module, so a callee used twice is emitted once.
  """
  key = (id(closed_jaxpr), name, tuple(hoisted))
  hit = mctx.cached_funcs.get(key)
  if hit is not None:
    return hit[0]
  jaxpr = closed_jaxpr.jaxpr
  cavals = _consts_avals(closed_jaxpr)
  hoisted = list(hoisted)
  in_avals = [cavals[i] for i in hoisted] + [v.aval for v in jaxpr.invars]
  out_avals = [getattr(v, "aval", None) for v in jaxpr.outvars]
  in_types = aval_to_ir_types(in_avals)
  out_types = aval_to_ir_types(out_avals)
  sym = "main" if public and name == "main" else mctx.unique_name(name)
  with ir.InsertionPoint(mctx.body):
    f = func_dialect.FuncOp(sym, ir.FunctionType.get(in_types, out_types))
    if not public:
      f.attributes["sym_visibility"] = ir.StringAttr.get("private")
  entry = f.add_entry_block()
  prev, mctx.token = mctx.token, None  # a function body is a region of its own
  try:
    with ir.InsertionPoint(entry):
      args = list(entry.arguments)
      hv = dict(zip(hoisted, args[:len(hoisted)]))
      consts = [hv[i] if i in hv else _const(c, a)
                for i, (c, a) in enumerate(zip(closed_jaxpr.consts, cavals))]
      outs = jaxpr_subcomp(mctx, jaxpr, consts, args[len(hoisted):])
      func_dialect.ReturnOp(outs)
  finally:
    mctx.token = prev
  mctx.cached_funcs[key] = (sym, closed_jaxpr)
  return sym


def call_jaxpr(ctx, closed_jaxpr, args, name="jit"):
  """Emit ``func.call`` of ``closed_jaxpr`` lowered as a private function (nested jit); a
  jaxpr with effects is emitted inline instead, so that the caller's token orders them."""
  mctx = ctx.module_context
  if has_effects(closed_jaxpr):
    consts = _const_values(closed_jaxpr.consts, _consts_avals(closed_jaxpr))
    return jaxpr_subcomp(mctx, closed_jaxpr.jaxpr, consts, list(args))
  sym = lower_jaxpr_to_fun(mctx, name, closed_jaxpr)
  out_types = aval_to_ir_types([v.aval for v in closed_jaxpr.jaxpr.outvars])
  call = func_dialect.CallOp(out_types, ir.FlatSymbolRefAttr.get(sym), list(args))
  return list(call.results)


def _new_module(name):
  m = ir.Module.create()
  m.operation.attributes["sym_name"] = ir.StringAttr.get(_module_name(name))
  return m


def _module_name(name):
  return "".join(c if c.isalnum() or c in "_." else "_" for c in str(name)) or "main"


def lower_jaxpr_to_module(closed_jaxpr, name="main", *, hoisted=(), platform="cpu",
                          host_callbacks=None):
  """A StableHLO ``ir.Module`` named ``name`` whose public ``main`` computes ``closed_jaxpr``.

  ``hoisted``: indices of consts passed as leading ``main`` parameters instead of baked in.
  ``host_callbacks``: a list the module's host callables are appended to (in index order),
  for ``xla.compile(..., host_callbacks=...)``; a jaxpr with callbacks needs one.
  """
  from nbjax.interpreters import lowering as _lowering
  check_jaxpr_constants(closed_jaxpr)
  closed_jaxpr = _lowering.physicalize(closed_jaxpr)  # key arrays: lowered as their data
  with xla.mlir_context(), ir.Location.unknown():
    m = _new_module(name)
    i32 = ir.IntegerType.get_signless(32)
    for k in ("mhlo.num_partitions", "mhlo.num_replicas"):  # one device, as JAX's jit module
      m.operation.attributes[k] = ir.IntegerAttr.get(i32, 1)
    mctx = ModuleContext(m, platform)
    mctx._names.add("main")
    if name.startswith("jit_"):  # (JAX's name stack: jit(f))
      mctx.name_stack = f"jit({name[4:]})"
    lower_jaxpr_to_fun(mctx, "main", closed_jaxpr, public=True, hoisted=hoisted)
  _hand_over(mctx, host_callbacks)
  return m


def check_jaxpr_constants(closed_jaxpr):
  """JAX's warning for a jaxpr whose constants (values captured from the traced function's
  closure) take at least ``jax_captured_constants_warn_bytes`` bytes (-1: never)."""
  threshold = core.config._flags["captured_constants_warn_bytes"]
  if threshold == -1:
    return
  total = sum(getattr(c, "nbytes", 0) for c in closed_jaxpr.consts)
  if total < threshold:
    return
  import warnings
  warnings.warn(f"A large amount of constants were captured during lowering "
                f"({_pprint_bytes(total)} total). If this is intentional, disable this warning "
                "by setting JAX_CAPTURED_CONSTANTS_WARN_BYTES=-1. To obtain a report of where "
                "these constants were encountered, set JAX_CAPTURED_CONSTANTS_REPORT_FRAMES=-1.")


def _pprint_bytes(n):
  if n <= 0:
    return "0.00B"
  e = min(math.floor(math.log(n, 1000)), 4)  # (JAX's util.pprint_bytes)
  return f"{n / 1000 ** e:.2f}{('', 'K', 'M', 'G', 'T')[e]}B"


def _hand_over(mctx, host_callbacks):
  if mctx.host_callbacks:
    if host_callbacks is None:
      raise ValueError("the module calls Python callbacks: pass host_callbacks=[] to receive "
                       "them (xla.compile needs them)")
    host_callbacks.extend(mctx.host_callbacks)


# ----------------------------------------------------------------------- lower_fun


def lower_fun(fun, multiple_results=True):
  """A lowering rule made by tracing ``fun`` (a Python function of other primitives) to a
  jaxpr on the rule's input avals and emitting it inline (JAX's ``mlir.lower_fun``)."""
  def rule(ctx, *args, **params):
    from nbjax.interpreters import partial_eval as pe

    def flat(*xs):
      out = fun(*xs, **params)
      return list(out) if multiple_results else [out]

    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(
        flat, list(ctx.avals_in), fun_name=getattr(fun, "__name__", "lower_fun"))
    from nbjax.interpreters import lowering
    d = lowering.discharge_hook  # refs made inside: their values threaded (nbjax.state)
    if d is not None and d[0](jaxpr):
      from nbjax.jaxpr import ClosedJaxpr
      closed = d[1](ClosedJaxpr(jaxpr, consts))
      jaxpr, consts = closed.jaxpr, closed.consts
    cvals = _const_values(consts, [v.aval for v in jaxpr.constvars])
    return jaxpr_subcomp(ctx.module_context, jaxpr, cvals, list(args))
  return rule


# ----------------------------------------------------------------------- one primitive on XLA


def _hashable(x):
  """A hashable stand-in for a params value (lists -> tuples, arrays -> bytes, else identity)."""
  if isinstance(x, (str, int, float, complex, bool, type(None), np.dtype, np.generic)):
    return (type(x), x)
  if isinstance(x, (tuple, list)):
    return (type(x), tuple(_hashable(e) for e in x))
  if isinstance(x, dict):
    return (dict, tuple(sorted((k, _hashable(v)) for k, v in x.items())))
  if isinstance(x, np.ndarray):
    return (np.ndarray, x.dtype, x.shape, x.tobytes())
  try:
    hash(x)
    return (type(x), x)
  except TypeError:
    return (type(x), id(x))


def build_primitive_module(prim, in_avals, params, name=None, host_callbacks=None):
  """A module whose ``main`` applies ``prim`` once to arguments of ``in_avals``.
  Returns ``(module, out_avals)``; ``host_callbacks`` as for ``lower_jaxpr_to_module``."""
  out = prim.abstract_eval(*in_avals, **params)
  out_avals = list(out) if prim.multiple_results else [out]
  with xla.mlir_context(), ir.Location.unknown():
    m = _new_module(name or f"prim_{prim.name}")
    mctx = ModuleContext(m)
    mctx._names.add("main")
    f = func_dialect.FuncOp("main", ir.FunctionType.get(aval_to_ir_types(in_avals),
                                                        aval_to_ir_types(out_avals)))
    m.body.append(f)
    entry = f.add_entry_block()
    with ir.InsertionPoint(entry):
      outs = lower_eqn(mctx, prim, params, in_avals, out_avals, list(entry.arguments))
      func_dialect.ReturnOp(outs)
  _hand_over(mctx, host_callbacks)
  return m, out_avals


def single_primitive_impl(prim):
  """``impl(*np_arrays, **params)``: run ``prim`` alone as an XLA executable (compiled once per
  argument avals and params). The registry's ``"xla"`` eager backend."""
  cache = {}

  def impl(*args, **params):
    args = [np.asarray(a) for a in args]
    key = (tuple((a.shape, a.dtype) for a in args), _hashable(params))
    hit = cache.get(key)
    if hit is None:
      in_avals = [core.ShapedArray(a.shape, a.dtype) for a in args]
      cbs = []
      module, out_avals = build_primitive_module(prim, in_avals, params, host_callbacks=cbs)
      hit = cache[key] = (xla.compile(module, name=prim.name, host_callbacks=cbs), out_avals)
    exe, out_avals = hit
    outs = exe(*args)
    return outs if prim.multiple_results else outs[0]

  impl.primitive = prim
  impl.cache = cache
  return impl

