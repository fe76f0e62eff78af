"""Elementwise ``nbjax.numpy`` functions (NumPy's ufuncs) over strict ``lax`` primitives.

Pipeline position: ``jnp.add(x, y)`` / ``x + y`` -> fast path when both operands are
``Array``s of one dtype the primitive accepts and one shape (straight to ``add_p``'s eager
entry, or ``add_p.bind`` under a transformation); ``x * 2.0`` likewise when JAX's
promotion keeps the Array's dtype -> otherwise ``_util.promote_args`` (JAX promotion with
weak types, NumPy rank promotion) -> ``lax.add``. Functions with no primitive of their own
(``floor_divide``, ``hypot``, ``logaddexp``, ...) are compositions of lax calls with JAX's
semantics.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from nbjax import core, dtypes, lax, registry
from nbjax.config import config
from nbjax.array import Array
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.custom_derivatives import custom_jvp
from nbjax.eager_cache import staged
from nbjax.fusion import Lazy
from nbjax.registry import quiet_run
from nbjax.numpy import _ufunc_docs, _util
from nbjax.numpy._util import (as_array, check_arraylike, ensure_arraylike, lit, promote_args,
                               promote_args_inexact, promote_args_numeric, promote_dtypes_inexact,
                               promote_dtypes_numeric)

_BOOL = np.dtype(np.bool_)
_ranks, _PROMOTE = _util._ranks, (None, True)  # (shape pairs not seen yet: promote_shapes)


def _is_int(d):
  return dtypes.is_int(d)


def _is_intlike(d):
  return d == _BOOL or dtypes.is_int(d)


def _const(x, v):
  """A weak 0-d literal of ``x``'s dtype (keeps ``x``'s weak flag through lax ops)."""
  return lit(v, x.dtype, True)


def _prim(name):
  return getattr(lax, f"{name}_p", None)


def _accepted(prim):
  return frozenset(prim.meta.get("dtypes", ())) if prim is not None else frozenset()

# ----------------------------------------------------------------- ufunc factories


_FAST_SETS = []  # (the live set, its dtypes): emptied under strict promotion


def _fast_dtypes(prim, kinds, binary=False):
  """The dtypes (of ``kinds``) for which the ufunc is exactly one bind of ``prim``; for a
  binary one none while ``jax_numpy_dtype_promotion='strict'`` (there two weak operands
  promote even when of one dtype)."""
  full = frozenset(d for d in prim.meta.get("dtypes", ()) if d.kind in kinds)
  if not binary:
    return full
  live = set() if config._flags["numpy_dtype_promotion"] == "strict" else set(full)
  _FAST_SETS.append((live, full))
  return live


def _promotion_listener(name, value):
  if name == "numpy_dtype_promotion":
    for live, full in _FAST_SETS:
      live.clear()
      if value != "strict":
        live.update(full)


config.add_listener(_promotion_listener)


def _float0_checked(name, general):
  """``general``, raising JAX's float0 TypeError when it fails on a float0 operand."""
  def checked(*args):
    try:
      return general(*args)
    except (TypeError, ValueError):
      _util.check_no_float0s(name, *args)
      raise
  return checked


def _unary(name, general, prim_name=None, kinds="biufc", ufunc=False):
  """A unary ufunc: an Array of a dtype in ``kinds`` that the primitive accepts binds it
  directly; anything else goes through ``general`` (checks, promotion)."""
  prim = _prim(prim_name) if prim_name else None
  general = staged(_float0_checked(name, general))  # (eagerly, a composite's repeated
  if prim is None:  # signature replays one program)
    def f(x, /):
      return general(x)
  elif ufunc:  # jnp.negative: a ufunc, taking (and rejecting) out=/where=
    ok = _fast_dtypes(prim, kinds)

    def f(x, /, out=None, where=None):
      if out is not None or where is not None:
        _no_out_where(name, True, out, where)
      if type(x) is Array and x._value.dtype in ok:
        return prim.eager(x) if _ctx.trace is _EVAL else prim.bind(x)
      if isinstance(x, Tracer) and x.aval.dtype in ok:
        return prim.bind(x)
      return general(x)
  else:
    ok = _fast_dtypes(prim, kinds)

    def f(x, /):
      if type(x) is Array and x._value.dtype in ok:
        return prim.eager(x) if _ctx.trace is _EVAL else prim.bind(x)
      if isinstance(x, Tracer) and x.aval.dtype in ok:
        return prim.bind(x)
      return general(x)
  f.__name__ = f.__qualname__ = name
  f.__doc__ = _ufunc_docs.doc(name, f)
  return f


_SCALAR_FAST = {"f": (int, float), "c": (int, float, complex), "i": (int,), "u": (int,)}


_LITERALS: dict = {}  # (type, value, dtype) -> its 0-d buffer (never written to)


def _weak_literal(s, d):
  """Python scalar ``s`` as a weak 0-d Array of dtype ``d`` (None if it does not fit); the
  buffers of scalars met again (an optimiser's ``0.9 * m``) are made once, each call wrapping
  it in a new Array (which a caller may delete or donate). A float zero's key holds its
  sign (``0.0 == -0.0``); not cached: complex numbers with a zero part and NaN (which matches
  no key)."""
  if core.h2d_guard is not None:
    core.host_to_device(s)  # (JAX's transfer guard)
  t = type(s)
  k = (t, s, d) if s or t is not float else (t, s, d, str(s))
  v = _LITERALS.get(k)
  if v is None:
    if t is int and not -0x80000000 <= s <= 0x7FFFFFFF and not (
        dtypes._x64 and -2**63 <= s < 2**63):
      return None  # (out of the default int's range: the general path's OverflowError)
    try:
      v = np.asarray(s, d)
    except OverflowError:
      return None
    if s == s and (s.real and s.imag if t is complex else True):
      if len(_LITERALS) >= 512:
        _LITERALS.clear()
      _LITERALS[k] = v
  return Array._new(v, True)


_ARRAYS = (Array, Lazy)


def _traced(name, prim, ok, scalar_fast, x, y):
  """``x op y`` with a tracer operand, bound directly when dtype promotion has nothing to do
  (one dtype, shapes at most rank-promoted, or a Python scalar that keeps the other
  operand's dtype); else None."""
  ax = x.aval if type(x) in _ARRAYS or isinstance(x, Tracer) else None
  ay = y.aval if type(y) in _ARRAYS or isinstance(y, Tracer) else None
  if ax is not None and ay is not None:
    # one dtype and weak type: at most a rank promotion to do (a weak operand meeting a strong
    # one is converted, a convert_element_type whose transpose restores the weak type)
    if ax.dtype == ay.dtype and ax.weak_type == ay.weak_type and ax.dtype in ok:
      return prim.bind(x, y) if ax.shape == ay.shape else \
          prim.bind(*_util.promote_shapes(name, x, y))
  elif ax is not None and type(y) in scalar_fast(ax.dtype.kind, ()) and ax.dtype in ok:
    lit = _weak_literal(y, ax.dtype)
    return None if lit is None else prim.bind(x, lit)
  elif ay is not None and type(x) in scalar_fast(ay.dtype.kind, ()) and ay.dtype in ok:
    lit = _weak_literal(x, ay.dtype)
    return None if lit is None else prim.bind(lit, y)
  return None


def _no_out_where(name, ufunc, out, where):
  kw = "out" if out is not None else "where"
  if ufunc:
    raise NotImplementedError(f"{kw} argument of <jnp.ufunc '{name}'>")
  raise TypeError(f"{name}() got an unexpected keyword argument '{kw}'")


def _binary(name, general, prim_name=None, kinds="biufc", ufunc=False, fast=None):
  """A binary ufunc with the hot paths of ``x + y`` and ``x * 2.0``: two Arrays of one
  dtype (of ``kinds``, accepted by the primitive; shapes rank-promoted), or an Array and a Python
  scalar that JAX's promotion leaves at the Array's dtype, bind the primitive directly;
  anything else goes through ``general`` (checks, promotion, broadcasting), after
  ``fast(x, y)`` where one is given and returns a result. ``out`` and
  ``where`` (``jnp.ufunc.__call__``'s keywords; positional defaults cost nothing) are
  rejected as JAX does when ``ufunc``, else as unknown keywords."""
  prim = _prim(prim_name) if prim_name else None
  raw, general = general, staged(general)  # (eagerly, a repeated signature replays one
  if prim is None and fast is not None:  # program)
    def f(x, y, /, out=None, where=None):
      if out is not None or where is not None:
        _no_out_where(name, ufunc, out, where)
      r = fast(x, y)
      return general(x, y) if r is None else r
  elif prim is None:
    def f(x, y, /, out=None, where=None):
      if out is not None or where is not None:
        _no_out_where(name, ufunc, out, where)
      return general(x, y)
  else:
    ok = _fast_dtypes(prim, kinds, binary=True)
    scalar_fast = _SCALAR_FAST.get

    def f(x, y, /, out=None, where=None):
      if out is not None or where is not None:
        _no_out_where(name, ufunc, out, where)
      tx, ty = type(x), type(y)
      if tx is Array:
        vx = x._value
        if ty is Array:
          vy = y._value
          if vx.dtype is vy.dtype and vx.dtype in ok:
            if vx.shape != vy.shape and _ranks.get((vx.shape, vy.shape), _PROMOTE)[1]:
              x, y = _util.promote_shapes(name, x, y)  # (equal ranks: size-1 axes broadcast)
            return prim.eager(x, y) if _ctx.trace is _EVAL else prim.bind(x, y)
        elif ty in scalar_fast(vx.dtype.kind, ()) and vx.dtype in ok:
          lit = _weak_literal(y, vx.dtype)
          if lit is not None:
            return prim.eager(x, lit) if _ctx.trace is _EVAL else prim.bind(x, lit)
      elif ty is Array and tx in scalar_fast(y._value.dtype.kind, ()) and y._value.dtype in ok:
        lit = _weak_literal(x, y._value.dtype)
        if lit is not None:
          return prim.eager(lit, y) if _ctx.trace is _EVAL else prim.bind(lit, y)
      # the same hot paths for tracers and pending results (``type(x) is Lazy``: Array's ABC
      # makes isinstance checks against it slow)
      if type(x) is Lazy or type(y) is Lazy or isinstance(x, Tracer) or isinstance(y, Tracer):
        out = _traced(name, prim, ok, scalar_fast, x, y)
        if out is not None:
          return out
      if hasattr(x, "__jax_array__") or hasattr(y, "__jax_array__"):  # (JAX's array-likes)
        x, y = (a.__jax_array__() if hasattr(a, "__jax_array__") and not isinstance(
            a, (Array, Tracer)) else a for a in (x, y))
      return general(x, y)
  f.__name__ = f.__qualname__ = name
  f.__doc__ = _ufunc_docs.doc(name, f)
  f._general, f._prim_name, f._kinds, f._fast = raw, prim_name, kinds, fast
  return f


def _inexact_unary(name, lax_fn, prim_name=None):
  def general(x):
    x, = promote_dtypes_inexact(ensure_arraylike(name, x))
    return lax_fn(x)
  return _unary(name, general, prim_name)


def _numeric_unary(name, lax_fn, prim_name=None, ufunc=False):
  def general(x):
    x = x if type(x) in _util.key_types else ensure_arraylike(name, x)
    if type(x) in _util.key_types or x.dtype == _BOOL:  # the primitive's dtype check
      raise TypeError(f"{prim_name or name} does not accept dtype {x.dtype}. Accepted dtypes "
                      "are subtypes of integer, floating, complexfloating.")
    return lax_fn(x)
  return _unary(name, general, prim_name, ufunc=ufunc)


def _std_binary(name, lax_fn, prim_name=None, promote=promote_args, kinds="biufc",
                ufunc=False):
  def general(x, y):
    return lax_fn(*promote(name, x, y))
  return _binary(name, general, prim_name, kinds, ufunc)

# ----------------------------------------------------------------- arithmetic


def _add(x, y):
  x, y = promote_args("add", x, y)
  return lax.bitwise_or(x, y) if x.dtype == _BOOL else lax.add(x, y)


def _multiply(x, y):
  x, y = promote_args("multiply", x, y)
  return lax.bitwise_and(x, y) if x.dtype == _BOOL else lax.mul(x, y)


add = _binary("add", _add, "add", ufunc=True)
subtract = _std_binary("subtract", lax.sub, "sub", ufunc=True)
multiply = _binary("multiply", _multiply, "mul", ufunc=True)
true_divide = _std_binary("true_divide", lax.div, "div", promote_args_inexact,
                          kinds="fc")
divide = _std_binary("divide", lax.div, "div", promote_args_inexact, kinds="fc")
divide.__doc__ = "Alias of :func:`nbjax.numpy.true_divide`."


def _replace_zero(x):
  """Integer divisors: 0 -> 1, so that integer division by zero cannot trap."""
  return lax.select(lax.eq(x, _const(x, 0)), lax.full_like(x, 1), x)


def _float_divmod(x, y):
  mod = lax.rem(x, y)
  div = lax.div(lax.select(lax.eq(y, _const(y, 0)), x, lax.sub(x, mod)), y)
  fix = lax.bitwise_and(lax.ne(mod, _const(mod, 0)), lax.ne(lax.sign(y), lax.sign(mod)))
  mod = lax.select(fix, lax.add(mod, _bcast_like(y, mod)), mod)
  div = lax.select(fix, lax.sub(div, _const(div, 1)), div)
  return lax.round(div), mod


def _bcast_like(y, x):
  return y if y.shape == x.shape else _util.broadcast_to(y, x.shape)


def _full_shape(*xs):
  """Operands broadcast to one shape (for ``lax.select``, which does not broadcast)."""
  s = _util.broadcast_shapes(*(x.shape for x in xs))
  return [x if x.shape == s else _util.broadcast_to(x, s) for x in xs]


def _floor_divide(x, y):
  x, y = promote_args_numeric("floor_divide", x, y)
  x, y = _full_shape(x, y)
  d = x.dtype
  if dtypes.is_int(d):  # lax.div / lax.rem by zero: XLA's -1 (all ones) and x
    if dtypes.issubdtype(d, np.unsignedinteger):
      return lax.div(x, y)
    div = lax.div(x, y)
    adjust = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)),
                             lax.ne(lax.rem(x, y), _const(x, 0)))
    return lax.select(adjust, lax.sub(div, _const(div, 1)), div)
  if dtypes.is_complex(d):
    raise TypeError("floor_divide does not support complex-valued inputs")
  # IEEE 754 special cases as the array API (and NumPy) have them: a zero or infinite operand
  # (x / 0 = +-inf, inf / y = +-inf, x / inf and 0 / y signed zeros) is floor(x / y)
  zero, inf = _const(x, 0), _const(x, np.inf)
  special = lax.bitwise_or(lax.bitwise_or(lax.eq(x, zero), lax.eq(y, zero)),
                           lax.bitwise_or(lax.eq(lax.abs(x), inf), lax.eq(lax.abs(y), inf)))
  return lax.select(special, lax.floor(lax.div(x, y)), _float_divmod(x, y)[0])


def _int_by_scalar(np_fn, zeros_ok):
  """Eagerly, an integer Array divided by a nonzero Python int that fits its dtype, or by an
  integer Array of its dtype and shape (with no zero, unless ``zeros_ok``: JAX's modulo by
  zero is 0, as NumPy's): NumPy's floor division or modulo, whose values are JAX's there
  (INT_MIN // -1 wraps in both); else None. (10 int64: ``i // 3`` 7.0 -> 1.4 us, the
  composite's replay; 10^6 ``i % j`` 15.2 -> 3.4 ms.)"""
  def fast(x, y):
    if type(x) is Array and _ctx.trace is _EVAL:
      v = x._value
      if v.dtype.kind in "iu":
        if type(y) is int and y:
          lit = _weak_literal(y, v.dtype)
          if lit is not None:
            return Array._new(quiet_run(np_fn, v, lit._value, out=...), x._weak)
        elif type(y) is Array:
          w = y._value
          if w.dtype is v.dtype and w.shape == v.shape and (zeros_ok or w.all()):
            return Array._new(quiet_run(np_fn, v, w, out=...), x._weak and y._weak)
    return None
  return fast


floor_divide = _binary("floor_divide", _floor_divide,
                       fast=_int_by_scalar(np.floor_divide, False))


def _remainder(x, y):
  x, y = promote_args_numeric("remainder", x, y)
  x, y = _full_shape(x, y)
  if dtypes.is_complex(x.dtype):  # (JAX's message: lax.rem refuses it)
    raise TypeError(f"rem does not accept dtype {x.dtype.name} at position 0. Accepted dtypes "
                    "at position 0 are subtypes of integer, floating.")
  if dtypes.is_int(y.dtype):
    y = _replace_zero(y)
  mod = lax.rem(x, y)
  zero = _const(mod, 0)
  fix = lax.bitwise_and(lax.ne(lax.lt(mod, zero), lax.lt(y, zero)), lax.ne(mod, zero))
  mod = lax.select(fix, lax.add(mod, y), mod)
  if dtypes.is_float(mod.dtype):  # a zero result takes the divisor's sign (IEEE, array API)
    signed = lax.select(lax.lt(y, zero), lax.full_like(mod, -0.0), lax.full_like(mod, 0.0))
    mod = lax.select(lax.eq(mod, zero), signed, mod)
  return mod


remainder = _binary("remainder", _remainder, fast=_int_by_scalar(np.remainder, True))
mod = _binary("mod", _remainder, fast=remainder._fast)
mod.__doc__ = "Alias of :func:`nbjax.numpy.remainder`."


def _fmod(x, y):
  x, y = promote_args_numeric("fmod", x, y)
  if dtypes.is_int(y.dtype):
    x, y = _full_shape(x, y)
    y = _replace_zero(y)
  return lax.rem(x, y)


fmod = _binary("fmod", _fmod)


def divmod(x, y, /):  # noqa: A001 (NumPy's name)
  """Elementwise ``(x // y, x % y)`` (JAX implementation of :func:`numpy.divmod`)."""
  q = floor_divide._fast(x, y)
  return _divmod(x, y) if q is None else (q, remainder._fast(x, y))


@staged
def _divmod(x, y):
  x, y = promote_args_numeric("divmod", x, y)
  if dtypes.is_int(x.dtype) or x.dtype == _BOOL:
    return floor_divide(x, y), remainder(x, y)
  return _float_divmod(*_full_shape(x, y))


def _pow_int_int(x, y):
  """Integer ``x ** y`` by binary exponentiation (negative exponents give 0, as JAX)."""
  x, y = _full_shape(x, y)
  one, zero = _const(y, 1), _const(y, 0)
  acc = lax.select(lax.bitwise_and(lax.eq(x, _const(x, 0)), lax.ne(y, zero)),
                   lax.full_like(x, 0), lax.full_like(x, 1))
  for _ in range(6):  # 2**64 overflows every dtype: six squarings suffice
    acc = lax.select(lax.ne(lax.bitwise_and(y, one), zero), lax.mul(acc, x), acc)
    x = lax.mul(x, x)
    y = lax.shift_right_logical(y, one)
  return acc


def power(x1, x2, /):
  """Elementwise ``x1 ** x2`` (JAX implementation of :func:`numpy.power`).

  A concrete integer exponent uses ``lax.integer_pow`` (exact, differentiable at 0);
  integer bases with integer exponents use binary exponentiation.
  """
  if type(x2) is int:  # ``x ** 2`` on a float array or tracer: the general path's equation
    d = x1._value.dtype if type(x1) is Array else x1.aval.dtype if isinstance(x1, Tracer) \
        else None
    if d is not None and d.kind in "fc":
      return lax.integer_pow(x1, x2)
  return _power(x1, x2)  # (inexact operands of one dtype, or one and a Python float: one pow)


def _power_general(x1, x2):
  check_arraylike("power", *((x1,) if type(x2) is int else (x1, x2)))  # (any int exponent)
  _util.check_no_float0s("power", x1, x2)
  if _util.is_concrete(x2) and (isinstance(x2, int) or _is_intlike(_util.as_array(x2).dtype)
                                 and _util.ndim(x2) == 0) and not isinstance(x2, bool):
    x1, = promote_dtypes_numeric(as_array(x1))
    return lax.integer_pow(x1, operator.index(x2))
  a, b = _util.promote_shapes("power", as_array(x1), as_array(x2))
  a_, b_ = promote_args_numeric("power", a, b)
  if _is_intlike(a_.dtype):
    if a_.dtype == _BOOL:
      i = dtypes.default_int_dtype()
      a_, b_ = _util.convert(a_, i), _util.convert(b_, i)
    return _pow_int_int(a_, b_)
  if dtypes.is_inexact(a.dtype) and dtypes.is_int(b.dtype):
    # JAX: an integer exponent is not promoted, so the derivative at x = 0 of x ** 0 is 0
    out = lax.pow(a_, b)
  else:
    out = lax.pow(a_, b_)
  if dtypes.is_inexact(a.dtype) and dtypes.is_int(b.dtype) and not dtypes.is_weakly_typed(b):
    out = _util.convert(out, out.dtype)  # JAX: lax.pow(x1, x2) unpromoted, strong as x2
  return out


_power = _binary("_power", _power_general, "pow", kinds="fc")
pow = _ufunc_docs.alias(power, "pow")  # noqa: A001 (NumPy's name)


def float_power(x1, x2, /):
  """Elementwise ``x1 ** x2`` in the default float (or complex) dtype."""
  return lax.pow(*promote_args_inexact("float_power", x1, x2))


negative = _numeric_unary("negative", lax.neg, "neg", ufunc=True)


def positive(x, /):
  """Elementwise ``+x``."""
  return ensure_arraylike("positive", x)


def _abs(x):
  x = ensure_arraylike("absolute", x)
  if x.dtype == _BOOL or dtypes.issubdtype(x.dtype, np.unsignedinteger):
    return x
  return lax.abs(x)


absolute = _unary("absolute", _abs, "abs", kinds="ifc")
abs = _unary("abs", _abs, "abs", kinds="ifc")  # noqa: A001
abs.__doc__ = "Alias of :func:`nbjax.numpy.absolute`."


def fabs(x, /):
  """Elementwise absolute value of a real array, in an inexact dtype."""
  x, = promote_dtypes_inexact(ensure_arraylike("fabs", x))
  if dtypes.is_complex(x.dtype):
    raise TypeError("ufunc 'fabs' does not support complex dtypes")
  return lax.abs(x)


def _sign(x):
  x = ensure_arraylike("sign", x)
  if x.dtype == _BOOL:
    raise TypeError("sign does not accept dtype bool. Accepted dtypes are subtypes of integer, "
                    "floating, complexfloating.")
  if dtypes.is_float(x.dtype) or dtypes.is_complex(x.dtype):
    # sign(-0.0) is +0.0, as the Array API and NumPy have it; else lax.sign, as JAX's (for
    # complex x / |x| with real divisions: sign(-1.5-0j) = -1-0j, sign(-inf-1.5j) = nan-0j)
    return lax.select(lax.eq(x, _const(x, 0)), lax.full_like(x, 0), lax.sign(x))
  return lax.sign(x)


def _sign_eager(f):
  """Eagerly, ``sign`` of a float16/32/64 Array is NumPy's, whose bits are the composite's
  (``sign(-0.0) = +0.0``, NaNs kept with their sign bit): one pass instead of four
  primitives (100 float32: 20 -> 7 us, slow Zen 1 machine)."""
  @functools.wraps(f)
  def sign(x, /):
    if type(x) is Array and _ctx.trace is _EVAL and not core.placement[0] and \
        x._value.dtype in _NP_FLOATS and not registry._overrides and \
        registry._override_all is None:  # (a pinned backend runs the composite)
      return Array._new(np.asarray(np.sign(x._value)), x._weak)  # (0-d: a NumPy scalar)
    return f(x)
  return sign


sign = _sign_eager(_unary("sign", _sign, "sign", kinds="iu"))


def _int_passthrough(name, lax_fn, prim_name):
  def general(x):
    x = ensure_arraylike(name, x)
    if _is_intlike(x.dtype):
      return x
    if dtypes.is_complex(x.dtype):  # (JAX's message: its floor/ceil, or trunc's lt, refuse it)
      if prim_name is None:
        raise TypeError(f"lt does not accept dtype {x.dtype.name} at position 0. Accepted "
                        "dtypes at position 0 are subtypes of integer, floating, bool.")
      raise TypeError(f"{prim_name} does not accept dtype {x.dtype.name}. Accepted dtypes are "
                      "subtypes of floating.")
    return lax_fn(x)
  return _unary(name, general, prim_name)


floor = _int_passthrough("floor", lax.floor, "floor")
ceil = _int_passthrough("ceil", lax.ceil, "ceil")


def _trunc(x):
  return lax.select(lax.lt(x, _const(x, 0)), lax.ceil(x), lax.floor(x))


trunc = _int_passthrough("trunc", _trunc, None)


def _round_even(x):
  if dtypes.is_complex(x.dtype):
    return lax.complex(_round_even(lax.real(x)), _round_even(lax.imag(x)))
  return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def round(a, decimals=0, out=None):  # noqa: A001
  """Round to ``decimals`` decimals, halves to even (JAX implementation of :func:`numpy.round`)."""
  if out is not None:
    raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
  a = ensure_arraylike("round", a)
  decimals = _util.index(decimals, "decimals")
  if a.dtype == _BOOL:
    raise ValueError(f"data type {np.bool_} not inexact")
  if _is_intlike(a.dtype):
    if decimals < 0:
      raise NotImplementedError("integer np.round not implemented for decimals < 0")
    return a
  if decimals == 0:
    return _round_even(a)
  if decimals > np.log10(float(dtypes.finfo(a.dtype).max)):
    return a  # finer than the dtype resolves (and 10**decimals would overflow): as JAX
  x = _util.convert(a, np.float32, a.weak_type) if a.dtype == np.float16 else a  # as JAX
  f = _const(x, 10.0 ** decimals)
  out = lax.div(_round_even(lax.mul(x, f)), f)
  return _util.convert(out, a.dtype, a.weak_type) if a.dtype == np.float16 else out


around = _ufunc_docs.alias(round, "around")


def rint(x, /):
  """Round to the nearest integer, halves to even; integers give the default float."""
  x = ensure_arraylike("rint", x)
  if _is_intlike(x.dtype):  # (strong, as JAX's convert_element_type)
    return _util.convert(x, dtypes.default_float_dtype())
  return _round_even(x)

# ----------------------------------------------------------------- transcendental


exp = _inexact_unary("exp", lax.exp, "exp")
exp2 = _inexact_unary("exp2", lax.exp2, "exp2")
expm1 = _inexact_unary("expm1", lax.expm1, "expm1")
log = _inexact_unary("log", lax.log, "log")
log1p = _inexact_unary("log1p", lax.log1p, "log1p")
sqrt = _inexact_unary("sqrt", lax.sqrt, "sqrt")
cbrt = _inexact_unary("cbrt", lax.cbrt, "cbrt")
sin = _inexact_unary("sin", lax.sin, "sin")
cos = _inexact_unary("cos", lax.cos, "cos")
tan = _inexact_unary("tan", lax.tan, "tan")
arcsin = _inexact_unary("arcsin", lax.asin, "asin")
arccos = _inexact_unary("arccos", lax.acos, "acos")
arctan = _inexact_unary("arctan", lax.atan, "atan")
sinh = _inexact_unary("sinh", lax.sinh, "sinh")
cosh = _inexact_unary("cosh", lax.cosh, "cosh")
tanh = _inexact_unary("tanh", lax.tanh, "tanh")
arcsinh = _inexact_unary("arcsinh", lax.asinh, "asinh")
arccosh = _inexact_unary("arccosh", lax.acosh, "acosh")
arctanh = _inexact_unary("arctanh", lax.atanh, "atanh")
asin, acos, atan, asinh, acosh, atanh = (_ufunc_docs.alias(f, "a" + f.__name__[3:])
                                         for f in (arcsin, arccos, arctan, arcsinh, arccosh, arctanh))


def _log_scaled(name, div, scale):
  """``log(x)`` divided by ``div`` (if given, bfloat16) or multiplied by ``scale(dtype)``: a strong
  constant of ``x``'s real precision (the result is strongly typed), applied to the real and
  imaginary parts of a complex log."""
  def f(x):
    x, = promote_dtypes_inexact(ensure_arraylike(name, x))
    r, dt = lax.log(x), dtypes.finfo(x.dtype).dtype
    op, c = (lax.div, lit(div, dt)) if div and dt == dtypes.bfloat16 else \
        (lax.mul, lit(scale(dt.type), dt))
    if not dtypes.is_complex(x.dtype):
      return op(r, c)
    return lax.complex(op(lax.real(r), c), op(lax.imag(r), c))
  return f


# JAX's log2 is log(x) / log(2), which XLA compiles to a product with the reciprocal rounded
# in x's precision (bfloat16 computes in float32: a division, as written); its log10
# multiplies by 1/log(10)
_log2 = _log_scaled("log2", np.log(2.0), lambda t: t(1) / t(np.log(2.0)))
_log10 = _log_scaled("log10", None, lambda t: t(0.4342944819032518))
log2 = _unary("log2", _log2)
log10 = _unary("log10", _log10)


def _square(x):
  x, = promote_dtypes_numeric(ensure_arraylike("square", x))
  return lax.square(x)


square = _unary("square", _square, "square")


def _reciprocal(x):
  x, = promote_dtypes_inexact(ensure_arraylike("reciprocal", x))
  return lax.integer_pow(x, -1)


reciprocal = _unary("reciprocal", _reciprocal)
arctan2 = _std_binary("arctan2", lax.atan2, "atan2", promote_args_inexact,
                      kinds="f")
atan2 = _ufunc_docs.alias(arctan2, "atan2")


def _scale(name, factor):
  def f(x):
    x, = promote_dtypes_inexact(ensure_arraylike(name, x))
    return lax.mul(x, _const(x, factor))
  return _unary(name, f)


deg2rad = _scale("deg2rad", np.pi / 180)
rad2deg = _scale("rad2deg", 180 / np.pi)
radians = _ufunc_docs.alias(deg2rad, "radians")
degrees = _ufunc_docs.alias(rad2deg, "degrees")


def _strong_unless_both_weak(x1, x2, promoted):
  """``promoted``, made strong unless both inputs are weak (JAX's hypot and heaviside mix in
  strong constants)."""
  if dtypes.is_weakly_typed(x1) and dtypes.is_weakly_typed(x2):
    return promoted
  return [_util.convert(p, p.dtype) for p in promoted]


@staged
def hypot(x1, x2, /):
  """Elementwise ``sqrt(x1**2 + x2**2)`` without intermediate overflow."""
  x1, x2 = _strong_unless_both_weak(x1, x2, promote_args_inexact("hypot", x1, x2))
  if dtypes.is_complex(x1.dtype):
    raise ValueError("jnp.hypot is not well defined for complex-valued inputs. "
                     "Please convert to real values first, such as by using abs(x)")
  x1, x2 = _full_shape(lax.abs(x1), lax.abs(x2))
  inf = lax.bitwise_or(isposinf(x1), isposinf(x2))
  big, small = lax.max(x1, x2), lax.min(x1, x2)
  zero = lax.eq(big, _const(big, 0))
  safe = lax.select(zero, lax.full_like(big, 1), big)
  r = lax.mul(big, lax.sqrt(lax.add(_const(big, 1), lax.integer_pow(lax.div(small, safe), 2))))
  return lax.select(inf, lax.full_like(r, np.inf), lax.select(zero, big, r))


@staged
def logaddexp(x1, x2, /, out=None, where=None):
  """Elementwise ``log(exp(x1) + exp(x2))`` without overflow (JAX's custom derivative:
  finite where an input is ``inf``)."""
  if out is not None or where is not None:
    _no_out_where("logaddexp", True, out, where)
  return _logaddexp(*_full_shape(*promote_args_inexact("logaddexp", x1, x2)))


@staged
def logaddexp2(x1, x2, /, out=None, where=None):
  """Elementwise ``log2(2**x1 + 2**x2)`` without overflow."""
  if out is not None or where is not None:
    _no_out_where("logaddexp2", True, out, where)
  return _logaddexp2(*_full_shape(*_strong_unless_both_weak(
      x1, x2, promote_args_inexact("logaddexp2", x1, x2))))


def _logaddexp_fn(name, exp, scale):
  def f(x1, x2):
    x1, x2 = as_array(x1), as_array(x2)  # (a rule's primals: Python scalars under jvp)
    amax = lax.max(x1, x2)

    def log1p_exp(d):
      soft = lax.log1p(exp(d))
      return soft if scale is None else lax.mul(soft, _const(soft, scale))
    if dtypes.is_complex(x1.dtype):  # JAX's: the imaginary part wrapped into one period
      out = lax.add(amax, log1p_exp(lax.sub(lax.add(x1, x2), lax.mul(amax, _const(amax, 2)))))
      return lax.complex(lax.real(out), _wrap_between(lax.imag(out), np.pi * (scale or 1)))
    delta = lax.sub(x1, x2)
    out = lax.add(amax, log1p_exp(lax.neg(lax.abs(delta))))
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), out)  # NaN, or infs of one sign
  f.__name__ = name
  return f


def _wrap_between(x, a):
  """``x`` wrapped into ``[-a, a)``."""
  rem = lax.rem(lax.add(x, _const(x, a)), _const(x, 2 * a))
  rem = lax.select(lax.lt(rem, _const(rem, 0)), lax.add(rem, _const(rem, 2 * a)), rem)
  return lax.sub(rem, _const(rem, a))


def _replace_inf(x):
  re = lax.real(x) if dtypes.is_complex(x.dtype) else x
  return lax.select(lax.eq(re, _const(re, np.inf)), lax.full_like(x, 0), x)


def _logaddexp_jvp_fn(name, f, exp):
  def jvp(primals, tangents):
    (x1, x2), (t1, t2) = map(as_array, primals), tangents
    out = f(x1, x2)
    r = _replace_inf(out)
    return out, lax.add(lax.mul(t1, exp(lax.sub(_replace_inf(x1), r))),
                        lax.mul(t2, exp(lax.sub(_replace_inf(x2), r))))
  jvp.__name__ = f"_{name}_jvp"
  return jvp


_logaddexp = custom_jvp(_logaddexp_fn("logaddexp", lax.exp, None))
_logaddexp2 = custom_jvp(_logaddexp_fn("logaddexp2", lax.exp2, 1 / np.log(2)))
_logaddexp.defjvp(_logaddexp_jvp_fn("logaddexp", _logaddexp, lax.exp))
_logaddexp2.defjvp(_logaddexp_jvp_fn("logaddexp2", _logaddexp2, lax.exp2))


@staged
def sinc(x, /):
  """Elementwise normalized sinc: ``sin(pi x) / (pi x)``, 1 at 0 (with every derivative
  exact there, via a custom JVP); NaN at infinity, as JAX's and NumPy's."""
  x, = promote_dtypes_inexact(ensure_arraylike("sinc", x))
  zero = lax.eq(x, _const(x, 0))
  pix = lax.mul(_const(x, np.pi), x)
  safe = lax.select(zero, lax.full_like(x, 1), pix)
  return lax.select(zero, _sinc_maclaurin(0, pix), lax.div(lax.sin(safe), safe))


def _sinc_maclaurin(k, x):
  """The k-th derivative of ``sin(x) / x`` at 0, shaped like ``x``; its JVP is the next
  one, so derivatives of every order are exact at 0. ``x * 0`` (JAX's), not a constant:
  under ``vmap`` the function's output is then batched as its rule's is."""
  zero = lax.mul(x, _const(x, 0))
  return zero if k % 2 else lax.add(zero, _const(x, (-1) ** (k // 2) / (k + 1)))


def _sinc_maclaurin_jvp(k, primals, tangents):
  (x,), (t,) = primals, tangents
  return _sinc_maclaurin(k, x), lax.mul(_sinc_maclaurin(k + 1, x), t)


_sinc_maclaurin = custom_jvp(_sinc_maclaurin, nondiff_argnums=(0,))
_sinc_maclaurin.defjvp(_sinc_maclaurin_jvp)

# ----------------------------------------------------------------- comparisons and logic


def _cmp(name, op, prim_name):
  def general(x, y):
    if name in _util.key_impls and (type(x) in _util.key_types or type(y) in _util.key_types):
      return _util.key_impls[name](x, y)  # key arrays (nbjax.prng): equal, not_equal
    x, y = promote_args(name, x, y)
    if dtypes.is_complex(x.dtype) and name not in ("equal", "not_equal"):  # lexicographic
      x, y = _full_shape(x, y)
      xr, yr = lax.real(x), lax.real(y)
      return lax.select(lax.eq(xr, yr), op(lax.imag(x), lax.imag(y)), op(xr, yr))
    return op(x, y)
  return _binary(name, general, prim_name, "biufc" if name in ("equal", "not_equal") else "biuf")


equal = _cmp("equal", lax.eq, "eq")
not_equal = _cmp("not_equal", lax.ne, "ne")
less = _cmp("less", lax.lt, "lt")
less_equal = _cmp("less_equal", lax.le, "le")
greater = _cmp("greater", lax.gt, "gt")
greater_equal = _cmp("greater_equal", lax.ge, "ge")


def _maxmin(name, op, prim_name):
  def general(x, y):
    x, y = promote_args(name, x, y)
    if dtypes.is_complex(x.dtype):  # NumPy: lexicographic order
      x, y = _full_shape(x, y)
      pick = _cmp_complex_gt(x, y) if name == "maximum" else _cmp_complex_gt(y, x)
      return lax.select(pick, x, y)
    return op(x, y)
  return _binary(name, general, prim_name, "biuf", ufunc=True)


def _cmp_complex_gt(x, y):
  xr, yr = lax.real(x), lax.real(y)
  return lax.select(lax.eq(xr, yr), lax.gt(lax.imag(x), lax.imag(y)), lax.gt(xr, yr))


maximum = _maxmin("maximum", lax.max, "max")
minimum = _maxmin("minimum", lax.min, "min")


def fmax(x1, x2, /):
  """Elementwise maximum ignoring NaNs (complex: lexicographic, as ``greater``)."""
  x1, x2 = _full_shape(*promote_args("fmax", x1, x2))
  gt = greater(x1, x2) if dtypes.is_complex(x1.dtype) else lax.gt(x1, x2)
  return lax.select(lax.bitwise_or(gt, isnan(x2)), x1, x2)


def fmin(x1, x2, /):
  """Elementwise minimum ignoring NaNs (complex: lexicographic, as ``less``)."""
  x1, x2 = _full_shape(*promote_args("fmin", x1, x2))
  lt = less(x1, x2) if dtypes.is_complex(x1.dtype) else lax.lt(x1, x2)
  return lax.select(lax.bitwise_or(lt, isnan(x2)), x1, x2)


def _to_bool(x):
  # (against JAX's lax._const: strong for a weak x of more than 0 dimensions)
  return x if x.dtype == _BOOL else lax.ne(x, lit(0, x.dtype, not (x.weak_type and x.ndim)))


def _logical(name, op):
  def general(x, y):  # (promoted first, as JAX: True and a weak float give a weak bool)
    return op(*map(_to_bool, promote_args(name, x, y)))
  return _binary(name, general, ufunc=True)


logical_and = _logical("logical_and", lax.bitwise_and)
logical_or = _logical("logical_or", lax.bitwise_or)
logical_xor = _logical("logical_xor", lax.bitwise_xor)


def logical_not(x, /):
  """Elementwise logical NOT."""
  return lax.bitwise_not(_to_bool(ensure_arraylike("logical_not", x)))


def _bitwise(name, op, prim_name):
  def general(x, y):
    return op(*promote_args(name, x, y))  # (lax's dtype error, as JAX)
  return _binary(name, general, prim_name, "biu", ufunc=True)


bitwise_and = _bitwise("bitwise_and", lax.bitwise_and, "and")
bitwise_or = _bitwise("bitwise_or", lax.bitwise_or, "or")
bitwise_xor = _bitwise("bitwise_xor", lax.bitwise_xor, "xor")


def _invert(x):
  return lax.bitwise_not(ensure_arraylike("invert", x))  # (lax's dtype error, as JAX)


invert = _unary("invert", _invert, "not")
bitwise_not = _ufunc_docs.alias(invert, "bitwise_not")
bitwise_invert = _ufunc_docs.alias(invert, "bitwise_invert")


def _left_shift(x, y):
  return lax.shift_left(*promote_args_numeric("left_shift", x, y))


def _right_shift(x, y):
  x, y = promote_args_numeric("right_shift", x, y)
  if dtypes.issubdtype(x.dtype, np.unsignedinteger):
    return lax.shift_right_logical(x, y)
  return lax.shift_right_arithmetic(x, y)


left_shift = _binary("left_shift", _left_shift)
right_shift = _binary("right_shift", _right_shift)
bitwise_left_shift = _ufunc_docs.alias(left_shift, "bitwise_left_shift")
bitwise_right_shift = _ufunc_docs.alias(right_shift, "bitwise_right_shift")

# ----------------------------------------------------------------- floating-point classes


def isnan(x, /):
  """Elementwise test for NaN."""
  x = ensure_arraylike("isnan", x)
  return lax.ne(x, x)  # (integers too: a weak input gives a weak result, as JAX's)


_NP_FLOATS = frozenset(map(np.dtype, (np.float16, np.float32, np.float64)))


def _float_bits_test(np_fn):
  """A test of a float's bits (``isinf``, ``signbit``): eagerly, an Array of a NumPy float
  dtype takes NumPy's ufunc (the same test of the same bits: a strong boolean); anything
  else the staged composite."""
  def wrap(general):
    @functools.wraps(general)
    def f(x, /):
      if type(x) is Array and _ctx.trace is _EVAL and x._value.dtype in _NP_FLOATS:
        return Array._new(np_fn(x._value, out=...))
      return general(x)
    return f
  return wrap


@_float_bits_test(np.isinf)
@staged
def isinf(x, /):
  """Elementwise test for positive or negative infinity."""
  x = ensure_arraylike("isinf", x)
  d = x.dtype
  if dtypes.is_complex(d):
    return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
  if not dtypes.is_float(d):
    return lax.full_like(x, False, _BOOL)
  return lax.eq(lax.abs(x), np.array(np.inf, d))  # (a strong constant: JAX's result is strong)


def _no_complex_inf(x):
  if dtypes.is_complex(x.dtype):
    raise ValueError("isposinf/isneginf are not well defined for complex types")


@staged
def isposinf(x, /, out=None):
  """Elementwise test for +inf."""
  if out is not None:
    raise NotImplementedError("The 'out' argument to isneginf/isposinf is not supported.")
  x = ensure_arraylike("isposinf", x)
  _no_complex_inf(x)
  if not dtypes.is_float(x.dtype):
    return lax.full_like(x, False, _BOOL)
  return lax.eq(x, np.array(np.inf, x.dtype))  # (strong, as JAX's _constant_like)


@staged
def isneginf(x, /, out=None):
  """Elementwise test for -inf."""
  if out is not None:
    raise NotImplementedError("The 'out' argument to isneginf/isposinf is not supported.")
  x = ensure_arraylike("isneginf", x)
  _no_complex_inf(x)
  if not dtypes.is_float(x.dtype):
    return lax.full_like(x, False, _BOOL)
  return lax.eq(x, np.array(-np.inf, x.dtype))


def isfinite(x, /):
  """Elementwise test for finiteness (not inf, not NaN)."""
  x = ensure_arraylike("isfinite", x)
  d = x.dtype
  if dtypes.is_complex(d):
    return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
  if not dtypes.is_float(d):
    return lax.full_like(x, True, _BOOL)
  return lax.is_finite(x)


@_float_bits_test(np.signbit)
@staged
def signbit(x, /):
  """Elementwise test of the sign bit (true for negative values and -0.0)."""
  x = ensure_arraylike("signbit", x)
  d = x.dtype
  if dtypes.is_int(d):  # (against a strong 0, as JAX's: strong for weak x)
    return lax.lt(x, np.array(0, d))
  if d == _BOOL:
    return lax.full_like(x, False, _BOOL)
  if not dtypes.is_float(d):
    raise ValueError(f"jax.numpy.signbit is not well defined for {d}")
  bits = {2: np.int16, 4: np.int32, 8: np.int64}[d.itemsize]  # the sign bit (NaNs too)
  ints = lax.bitcast_convert_type(x, bits)
  return lax.lt(ints, _const(ints, 0))


@staged
def copysign(x1, x2, /):
  """Elementwise magnitude of ``x1`` with the sign of ``x2``."""
  x1, x2 = _full_shape(*promote_args_inexact("copysign", x1, x2))
  if dtypes.is_complex(x1.dtype):
    raise TypeError("copysign does not support complex-valued inputs")
  a = lax.abs(x1)
  return lax.select(signbit(x2), lax.neg(a), a)


@staged
def heaviside(x1, x2, /):
  """Elementwise Heaviside step: 0 below 0, ``x2`` at 0, 1 above."""
  x1, x2 = _full_shape(*_strong_unless_both_weak(
      x1, x2, promote_args_inexact("heaviside", x1, x2)))
  zero = _const(x1, 0)
  return lax.select(lax.lt(x1, zero), lax.full_like(x1, 0),
                    lax.select(lax.gt(x1, zero), lax.full_like(x1, 1),
                               lax.select(lax.ne(x1, x1), x1, x2)))  # NaN stays NaN (JAX)


def nextafter(x1, x2, /):
  """Next representable float after ``x1`` towards ``x2``."""
  return lax.nextafter(*_full_shape(*promote_args_inexact("nextafter", x1, x2)))


def _nan_to_num_fills(d, nan, posinf, neginf):
  """``nan_to_num``'s replacements for dtype ``d`` (infinities: its extremes by default),
  Python numbers rounded to ``d`` quietly (1e40 as float32 is inf, as JAX's, no warning)."""
  info = dtypes.finfo(d)
  fills = (nan, info.max if posinf is None else posinf, info.min if neginf is None else neginf)
  if all(type(r) in (int, float) for r in fills):
    with np.errstate(over="ignore"):
      fills = tuple(np.array(r, d) for r in fills)
  return fills


def _nan_to_num_eager(general):
  """Eagerly, ``nan_to_num`` of a float16/32/64 Array with Python-number (or default)
  replacements is NumPy's (the replacements rounded to the dtype first, as the composite's
  ``full_like``): 10^6 float32 1.57 -> ~0.6 ms, where the composite fills three full arrays."""
  @functools.wraps(general)
  def f(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if type(x) is Array and _ctx.trace is _EVAL and not core.placement[0] and \
        x._value.dtype in _NP_FLOATS and all(
        v is None or type(v) in (int, float) for v in (nan, posinf, neginf)):
      v = x._value
      with np.errstate(all="ignore"):  # (fills rounded to float16 warned as casts)
        return Array._new(np.asarray(np.nan_to_num(  # (0-d: a NumPy scalar)
            v, True, *_nan_to_num_fills(v.dtype, nan, posinf, neginf))))
    return general(x, copy, nan, posinf, neginf)
  return f


@_nan_to_num_eager
@staged
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
  """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the dtype's
  extremes)."""
  del copy
  x = ensure_arraylike("nan_to_num", x)
  d = x.dtype
  if not dtypes.is_inexact(d):
    return x
  if dtypes.is_complex(d):
    return lax.complex(nan_to_num(lax.real(x), nan=nan, posinf=posinf, neginf=neginf),
                       nan_to_num(lax.imag(x), nan=nan, posinf=posinf, neginf=neginf))
  nan, posinf, neginf = _nan_to_num_fills(d, nan, posinf, neginf)
  x = _util.convert(x, d)  # strong, as JAX's
  out = lax.select(isnan(x), lax.full_like(x, nan), x)
  out = lax.select(isposinf(out), lax.full_like(x, posinf), out)
  return lax.select(isneginf(out), lax.full_like(x, neginf), out)

# ----------------------------------------------------------------- complex parts


def real(val, /):
  """Real part (the array itself for real dtypes)."""
  val = ensure_arraylike("real", val)
  return lax.real(val) if dtypes.is_complex(val.dtype) else val


def imag(val, /):
  """Imaginary part (zeros for real dtypes)."""
  val = ensure_arraylike("imag", val)
  return lax.imag(val) if dtypes.is_complex(val.dtype) else lax.full_like(val, 0)


def conjugate(x, /):
  """Complex conjugate (the array itself for real dtypes)."""
  x = ensure_arraylike("conjugate", x)
  return lax.conj(x) if dtypes.is_complex(x.dtype) else x


conj = _ufunc_docs.alias(conjugate, "conj")


def angle(z, deg=False):
  """Counterclockwise angle from the positive real axis (radians, or degrees with ``deg``)."""
  z = ensure_arraylike("angle", z)
  if dtypes.is_complex(z.dtype):
    re, im = lax.real(z), lax.imag(z)
  else:
    keep = dtypes.is_inexact(z.dtype) and z.ndim  # JAX: 0-d reals go to the default float
    re = z if keep else _util.convert(z, dtypes.default_float_dtype())
    im = lax.full_like(re, 0)
  out = lax.atan2(im, re)
  return lax.mul(out, _const(out, 180 / np.pi)) if deg else out

# ----------------------------------------------------------------- docstrings
# The hand-written functions' docstrings: their own summary, then the table's Args/Returns/
# Examples (the factories' functions took theirs at creation).
for _f in (angle, conjugate, copysign, divmod, fabs, float_power, fmax, fmin, heaviside, hypot,
           imag, isfinite, isinf, isnan, isneginf, isposinf, logical_not, nan_to_num, nextafter,
           positive, power, real, rint, round, signbit, sinc, logaddexp, logaddexp2):
  _f.__doc__ = _ufunc_docs.doc(_f.__name__, _f)
del _f

# ----------------------------------------------------------------- jnp.ufunc instances
# The names JAX makes ufuncs, with JAX's identities and fast methods. The plain functions
# stay reachable (``_fn``) for class attributes such as ``Array.__neg__``: a ufunc is not a
# descriptor, so it would not bind ``self``.
from nbjax.numpy import _reductions as _r, _ufunc_api as _u  # noqa: E402

_fn = {f.__name__: f for f in (add, subtract, multiply, negative, maximum, minimum, bitwise_and,
                               bitwise_or, bitwise_xor, logical_and, logical_or, logical_xor,
                               logaddexp, logaddexp2)}
negative = _u._builtin(negative, 1)
add = _u._builtin(add, 2, identity=0, reduce=_r.sum, accumulate=_r.cumsum,
                  at=_u._bool_at("add"))
multiply = _u._builtin(multiply, 2, identity=1, reduce=_r.prod, accumulate=_r.cumprod,
                       at=_u._bool_at("mul"))
subtract = _u._builtin(subtract, 2, at=_u._subtract_at)
maximum = _u._builtin(maximum, 2, reduce=_u._extreme(_r.max))
minimum = _u._builtin(minimum, 2, reduce=_u._extreme(_r.min))
bitwise_and = _u._builtin(bitwise_and, 2, identity=-1, reduce=_u._reduce_bitwise_and)
bitwise_or = _u._builtin(bitwise_or, 2, identity=0, reduce=_u._reduce_bitwise_or)
bitwise_xor = _u._builtin(bitwise_xor, 2, identity=0, reduce=_u._reduce_bitwise_xor)
logical_and = _u._builtin(logical_and, 2, identity=True, reduce=_u._reduce_logical_and)
logical_or = _u._builtin(logical_or, 2, identity=False, reduce=_u._reduce_logical_or)
logical_xor = _u._builtin(logical_xor, 2, identity=False, reduce=_u._reduce_logical_xor)
logaddexp = _u._builtin(logaddexp, 2, identity=-np.inf, reduce=_u._logsumexp(True))
logaddexp2 = _u._builtin(logaddexp2, 2, identity=-np.inf, reduce=_u._logsumexp(False))
