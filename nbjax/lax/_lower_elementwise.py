"""StableHLO lowering rules for the elementwise primitives, registered by primitive name.

Pipeline position: loaded by ``nbjax.interpreters.mlir`` the first time a lowering is looked
up (never at ``import nbjax``: it imports jaxlib). Each rule broadcasts its operands to the
output shape (lax allows rank-0 operands and size-1 dims at equal rank; StableHLO does not)
and emits StableHLO (or CHLO, which XLA legalizes: erf, lgamma, asin, ...). Rules for
primitives that do not exist yet stay pending by name and attach when they are created.
"""
import numpy as np

from nbjax.interpreters import mlir
from nbjax.interpreters.mlir import chlo, hlo


def _reg(name, rule):
  mlir.register_lowering_by_name(name, rule)


def _bcast(ctx, args):
  out = ctx.avals_out[0]
  return [mlir.broadcast_to(ctx, x, a, out) for x, a in zip(args, ctx.avals_in)]


def _nary(op):
  def rule(ctx, *args, **params):
    return [op(*_bcast(ctx, args))]
  return rule


def _cmp(direction):
  def rule(ctx, x, y, **params):
    x, y = _bcast(ctx, (x, y))
    return [mlir.compare(x, y, direction, ctx.avals_in[0].dtype)]
  return rule


def _kind(aval):
  return np.dtype(aval.dtype).kind


# ------------------------------------------------------------------ one-op rules

_DIRECT = {
    "neg": hlo.negate, "sin": hlo.sine, "cos": hlo.cosine, "tan": chlo.tan,
    "asin": chlo.asin, "acos": chlo.acos, "atan": chlo.atan, "sinh": chlo.sinh,
    "cosh": chlo.cosh, "tanh": hlo.tanh, "asinh": chlo.asinh, "acosh": chlo.acosh,
    "atanh": chlo.atanh, "exp": hlo.exponential, "log": hlo.log, "log1p": hlo.log_plus_one,
    "expm1": hlo.exponential_minus_one, "logistic": hlo.logistic, "sqrt": hlo.sqrt,
    "rsqrt": hlo.rsqrt, "cbrt": hlo.cbrt, "floor": hlo.floor, "ceil": hlo.ceil,
    "is_finite": hlo.is_finite, "erf": chlo.erf, "erfc": chlo.erfc, "erf_inv": chlo.erf_inv,
    "lgamma": chlo.lgamma, "digamma": chlo.digamma, "real": hlo.real, "imag": hlo.imag,
    "population_count": hlo.popcnt, "clz": hlo.count_leading_zeros, "not": hlo.not_,
    "add": hlo.add, "add_any": hlo.add, "sub": hlo.subtract, "mul": hlo.multiply,
    "div": hlo.divide, "rem": hlo.remainder, "pow": hlo.power, "atan2": hlo.atan2,
    "nextafter": chlo.next_after, "and": hlo.and_, "or": hlo.or_, "xor": hlo.xor,
    "shift_left": hlo.shift_left, "shift_right_logical": hlo.shift_right_logical,
    "shift_right_arithmetic": hlo.shift_right_arithmetic, "complex": hlo.complex,
    "polygamma": chlo.polygamma, "zeta": chlo.zeta, "bessel_i1e": chlo.bessel_i1e,
}
for _name, _op in _DIRECT.items():
  _reg(_name, _nary(_op))

for _name, _dir in {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}.items():
  _reg(_name, _cmp(_dir))


def _identity(ctx, x, **params):
  return [x]


for _name in ("copy", "copy_p", "optimization_barrier_1", "stop_gradient"):
  _reg(_name, _identity)


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
  return [hlo.multiply(x, x)]


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
  aval = ctx.avals_in[0]
  if y == 0:
    return [mlir.full_like_aval(ctx, 1, aval)]
  acc, base, n = None, x, abs(int(y))
  while n:
    if n & 1:
      acc = base if acc is None else hlo.multiply(acc, base)
    n >>= 1
    if n:
      base = hlo.multiply(base, base)
  if y < 0:
    acc = hlo.divide(mlir.full_like_aval(ctx, 1, aval), acc)
  return [acc]


def _minmax(direction, op):
  def rule(ctx, x, y, **params):
    x, y = _bcast(ctx, (x, y))
    aval = ctx.avals_in[0]
    if _kind(aval) != "c":
      return [op(x, y)]
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


def _convert_element_type(ctx, x, new_dtype=None, **params):
  return [mlir.convert_hlo(ctx, x, ctx.avals_in[0], ctx.avals_out[0])]


def _bitcast_convert_type(ctx, x, new_dtype=None, **params):
  return [hlo.bitcast_convert(mlir.aval_to_ir_type(ctx.avals_out[0]), x)]


def _reduce_precision(ctx, x, exponent_bits, mantissa_bits, **params):
  return [hlo.reduce_precision(x, int(exponent_bits), int(mantissa_bits))]


for _name, _rule in {
    "sign": _sign, "abs": _abs, "square": _square, "exp2": _exp2, "round": _round,
    "conj": _conj, "integer_pow": _integer_pow, "max": _minmax("GT", hlo.maximum),
    "min": _minmax("LT", hlo.minimum), "pow": _pow, "select_n": _select_n, "clamp": _clamp,
    "convert_element_type": _convert_element_type,
    "bitcast_convert_type": _bitcast_convert_type, "reduce_precision": _reduce_precision,
}.items():
  _reg(_name, _rule)
