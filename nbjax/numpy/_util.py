"""Argument normalisation shared by every ``nbjax.numpy`` function.

Pipeline position: ``jnp.f(*args)`` -> helpers here (array-likeness checks, JAX's dtype
promotion with weak types via ``dtypes.result_type``, NumPy rank promotion lowered to
``lax.expand_dims``/``lax.broadcast_in_dim``, axis normalisation) -> strict ``lax``
primitives. Nothing here computes on data.
"""
from __future__ import annotations

import functools
import operator
import warnings

import numpy as np

from nbjax import core, dtypes, lax, registry
from nbjax.array import Array
from nbjax.config import config
from nbjax.core import Tracer, _ctx, eval_trace as _EVAL
from nbjax.lax.elementwise import _convert_element_type as _lax_convert
from nbjax.lax.shape import broadcast_in_dim_p as _bid_p
from nbjax.lax.shape import canonicalize_axis, canonicalize_shape  # noqa: F401 (re-exported)
from nbjax.numpy._dtype_api import _ScalarMeta

_PY_SCALARS = (bool, int, float, complex)
_ARRAY_TYPES = (Array, Tracer, np.ndarray, np.generic) + _PY_SCALARS
_BOOL = np.dtype(np.bool_)
_F32 = np.dtype(np.float32)
_new = Array._new

# ----------------------------------------------------------------- array-likes


def is_arraylike(x):
  """Whether ``x`` is an array or scalar nbjax accepts as an operand."""
  return isinstance(x, _ARRAY_TYPES) or hasattr(x, "__jax_array__")


def check_arraylike(name, *args):
  """JAX's TypeError for lists, tuples and other non-array arguments, and for key arrays
  (``key_types``) where the function takes numbers."""
  for pos, a in enumerate(args):
    if type(a) is int and not -0x80000000 <= a <= 0x7FFFFFFF:
      check_int_arg(_arg_path(name, pos, len(args)), a)
    if type(a) in key_types or not is_arraylike(a):  # (key arrays are jax.Arrays too)
      if type(a) in key_types:
        if len(args) == 1:
          raise TypeError(f"Cannot interpret '{a.dtype}' as a data type")
        if all(type(x) in key_types for x in args):  # the primitive's dtype check
          raise TypeError(f"{name} does not accept dtype {a.dtype} at position 0. Accepted "
                          "dtypes at position 0 are subtypes of integer, floating, "
                          "complexfloating.")
        names = ", ".join(str(x.dtype) if type(x) in key_types else
                          str(dtypes.dtype(x, canonicalize=True)) for x in args)
        raise TypeError(f"{name} does not accept dtypes {names}.")
      raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at "
                      f"position {pos}.")


# JAX's jnp functions whose two operands are named x1, x2 (the others: x, y)
_X1X2 = frozenset("arctan2 atan2 bitwise_right_shift copysign divide divmod floor_divide fmax "
                  "fmin fmod gcd heaviside hypot lcm ldexp matvec mod pow power remainder "
                  "right_shift true_divide vecdot vecmat".split())


def check_int_arg(path, a):
  """JAX's OverflowError for a Python int operand ``a`` (argument ``path``) outside the
  default integer dtype (int64; int32 with x64 off): JAX's jnp functions are jitted and parse
  it as that dtype."""
  info = np.iinfo(dtypes.dtype(int))
  if type(a) is int and not info.min <= a <= info.max:
    raise OverflowError("An overflow was encountered while parsing an argument to a jitted "
                        f"computation, whose argument path is {path}. Got <class 'int'> with "
                        f"value {a}")


def _arg_path(name, pos, n):
  if n == 2:
    return ("x1", "x2")[pos] if name in _X1X2 else ("x", "y")[pos]
  return ("condition", "x", "y")[pos] if name == "where" else "x" if n == 1 else f"args[{pos}]"


# Key arrays (nbjax.prng fills these): their types, and by name the versions of the jnp
# functions JAX allows on them (stack, reshape, where, ...), which those functions call.
key_types = set()
key_impls = {}


def keys_lifted(f):
  """``f`` (a structural function: it moves, repeats or splits elements, never combines
  them) also on key arrays: ``key_impls["lift"]`` runs it on the keys' positions."""
  @functools.wraps(f)
  def lifted(*args, **kwargs):
    if args and type(args[0]) in key_types:
      if len(args) > 1 and f.__name__.startswith("atleast"):
        return [lifted(a) for a in args]
      return key_impls["lift"](f, *args, **kwargs)
    return f(*args, **kwargs)
  return lifted


def as_array(x):
  """An operand as an ``Array`` or ``Tracer`` (Python scalars stay weakly typed)."""
  t = type(x)
  if t is Array:
    return x
  if core.h2d_guard is not None and not isinstance(x, (Tracer, Array)):
    core.host_to_device(x)  # (JAX's transfer guard)
  if t in _PY_SCALARS:
    try:
      return _new(np.asarray(x, dtypes.dtype(x)), t is not bool)
    except OverflowError:
      raise OverflowError(f"Python int {x} too large to convert to {dtypes.dtype(x)}") from None
  if isinstance(x, (Tracer, Array)):
    return x
  if isinstance(x, np.ndarray):  # Array() copies it: later NumPy writes must not show through
    const = getattr(core._ctx.trace, "const_array", None)  # staging: one Array per array
    return Array(x) if const is None or type(x) is not np.ndarray else const(x)
  if isinstance(x, np.generic):
    return Array(x)
  if hasattr(x, "__jax_array__"):
    return as_array(x.__jax_array__())
  raise TypeError(f"Value {x!r:.80} of type {type(x).__name__} is not a valid nbjax array type")


_PLAIN = frozenset(_ARRAY_TYPES)


def jax_array_protocol(args):
  """``args`` with JAX's array-likes (objects with ``__jax_array__``, not arrays) replaced by
  the arrays their ``__jax_array__()`` returns."""
  for a in args:
    if type(a) not in _PLAIN and not isinstance(a, _ARRAY_TYPES):
      return tuple(x.__jax_array__() if hasattr(x, "__jax_array__") and not isinstance(
          x, _ARRAY_TYPES) else x for x in args)
  return args


def ensure_arraylike(name, *args):
  """``check_arraylike`` then ``as_array`` each argument (one value for one argument)."""
  if len(args) == 2 and isinstance(args[0], (Array, Tracer)) and isinstance(args[1], (Array, Tracer)):
    return args
  check_arraylike(name, *args)
  if len(args) == 1:
    return as_array(args[0])
  return tuple(as_array(a) for a in args)


def ndim(x):
  """Rank of an array-like (no conversion for arrays and tracers)."""
  return x.ndim if isinstance(x, (Array, Tracer, np.ndarray, np.generic)) else np.ndim(x)


def is_concrete(x):
  """Whether ``x`` has a known value (not an abstract tracer)."""
  return not isinstance(x, Tracer) or x.to_concrete_value() is not None


def concrete(x, context=""):
  """The NumPy value of ``x`` or a ConcretizationTypeError naming ``context``."""
  return np.asarray(core.concrete_or_error(None, x, context))

# ----------------------------------------------------------------- dtypes


def convert(x, dtype, weak_type=False):
  """``x`` as ``dtype`` (an Array or Tracer) with JAX's explicit ``weak_type`` (as
  ``lax._convert_element_type``); Python scalars become literals: ints in int64's range
  wrap into narrower integer dtypes (as JAX), larger ones raise OverflowError."""
  dtype = np.dtype(dtype)
  if type(x) in _PY_SCALARS:
    if type(x) is int and not -2 ** 63 <= x < 2 ** 63 and not (  # JAX: Python ints are
        dtype.kind == "u" and 0 <= x <= np.iinfo(dtype).max):  # int64 first (uint64 values
      raise OverflowError(f"Python int {x} too large to convert to int64")  # for uint64 kept)
    v = np.asarray(x)
    if v.dtype != dtype:
      try:
        v = np.asarray(x, dtype)
      except (OverflowError, ValueError):
        if type(x) is float and dtype.kind in "iu":  # inf/NaN: convert_element_type's
          return _lax_convert(x, dtype, weak_type)  # saturation (NaN -> 0), as JAX's
        if not (dtype.kind in "iu" and -2 ** 63 <= x < 2 ** 63):
          raise OverflowError(f"Python int {x} too large to convert to {dtype}") from None
        v = np.asarray(x, np.int64).astype(dtype)  # JAX's int64 literal, cast: wraps
      except TypeError:  # complex -> real: keep the real part, as convert_element_type
        v = v.real.astype(dtype)
    return _new(v, weak_type and dtype != _BOOL)
  return _lax_convert(as_array(x), dtype, weak_type)


def _common(args):
  """The (dtype, weak_type) every argument already has (arrays and tracers only), or None:
  the common case, where promotion has nothing to convert."""
  dw = None
  for x in args:
    if type(x) is Array:
      v = x._value
      d, w = v.dtype, x._weak
    elif isinstance(x, Tracer):
      a = x.aval
      d, w = a.dtype, a.weak_type
    else:
      return None
    if dw is None:
      dw = d, w
    elif d is not dw[0] or w is not dw[1]:
      return None
  return dw


def promote_dtypes(*args):
  """Convert all arguments to their joint JAX result type (weak when all are weak)."""
  if len(args) == 1:
    return [as_array(args[0])]
  dw = _common(args)
  if dw is not None and not (dw[1] and dtypes._lat == "strict"):  # (strict: weak -> default)
    return list(args)
  to, weak = dtypes.result_type(*args, return_weak_type_flag=True)
  return [convert(a, to, weak) for a in args]


def promote_dtypes_inexact(*args):
  """Promote to a common inexact dtype (integers and bools go to the default float)."""
  dw = _common(args)
  if dw is not None and dw[0].kind in "fc" and not (
      dw[1] and len(args) > 1 and dtypes._lat == "strict"):
    return list(args)
  to, weak = dtypes.result_type(*args, return_weak_type_flag=True)
  to = to_inexact_dtype(to)
  return [convert(a, to, weak) for a in args]


def promote_dtypes_complex(*args):
  """Promote to a common complex dtype (reals to the complex of their precision)."""
  to, weak = dtypes.result_type(*args, return_weak_type_flag=True)
  to = to_complex_dtype(to)
  return [convert(a, to, weak) for a in args]


def promote_dtypes_numeric(*args):
  """Promote to a common numeric dtype (bool goes to the default int)."""
  to, weak = dtypes.result_type(*args, return_weak_type_flag=True)
  to = to_numeric_dtype(to)
  return [convert(a, to, weak) for a in args]


def to_inexact_dtype(d):
  """``d`` if inexact, else JAX's float for it: 64-bit integers the default float, narrower
  integers and bool float32."""
  if dtypes.is_inexact(d):
    return d
  return dtypes.default_float_dtype() if d.itemsize == 8 else _F32


def to_numeric_dtype(d):
  """``d`` unless bool, which becomes int32 (as JAX's)."""
  return np.dtype(np.int32) if d == _BOOL else d


def to_complex_dtype(d):
  """The complex dtype of ``d``'s precision (``to_inexact_dtype``'s for non-floats)."""
  if dtypes.is_complex(d):
    return d
  d = to_inexact_dtype(d)
  return dtypes.default_complex_dtype() if d == np.float64 else np.dtype(np.complex64)


def check_no_float0s(name, *args):
  """JAX's TypeError for float0 (tangent-of-integer) operands."""
  for a in args:
    if getattr(a, "dtype", None) == dtypes.float0:
      raise TypeError(
          f"Called {name} with a float0 array. float0s do not support any operations by design "
          "because they are not compatible with non-trivial vector spaces. No implicit dtype "
          "conversion is done. You can use np.zeros_like(arr, dtype=np.float) to cast a float0 "
          "array to a regular zeros array. \nIf you didn't expect to get a float0 you might "
          "have accidentally taken a gradient with respect to an integer argument.")


def plain_dtype(dtype):
  """The canonical np.dtype of a NumPy dtype, NumPy scalar type or ``jnp`` scalar type
  (``jnp.float32``), else None: the eager fast paths' test (no parsing, no errors). None too
  for a 64-bit dtype with x64 off (``canonicalize_user_dtype`` warns of the truncation)."""
  t = type(dtype)
  if t is not np.dtype:
    if t is _ScalarMeta:
      dtype = dtype.dtype
    elif t is type and issubclass(dtype, np.generic):
      dtype = np.dtype(dtype)
    else:
      return None
  d = dtypes.canonicalize_dtype(dtype)
  return d if d is dtype else None


def canonicalize_user_dtype(dtype, name=None):
  """A user-supplied dtype as a canonical np.dtype (``None`` stays ``None``), as JAX's
  ``check_and_canonicalize_user_dtype(dtype, name)``: a NumPy dtype JAX has no arrays of
  (structured, object) raises JAX's TypeError, and a 64-bit dtype with x64 off follows
  ``jax_explicit_x64_dtypes`` (``dtypes.canonicalize_explicit_dtype``), both naming ``name``."""
  if dtype is None:
    return None
  if not isinstance(dtype, (np.dtype, type, str, dtypes.ExtendedDType)):
    if isinstance(dtype, (Array, Tracer)):
      raise ValueError("Passing an array as a dtype argument is no longer supported; instead "
                       "of dtype=arr use dtype=arr.dtype.")
    np.dtype(dtype)  # (a value is no dtype: NumPy's TypeError, as JAX's)
  try:
    d = dtypes.dtype(dtype)
  except TypeError:
    try:
      np.dtype(dtype)
    except TypeError:
      raise
    raise TypeError("JAX only supports number, bool, and string dtypes, got dtype "
                    f"{dtype}" + (f" in {name}" if name else "")) from None
  if isinstance(dtype, type) and dtype in dtypes.python_scalar_dtypes:
    return d
  return dtypes.canonicalize_explicit_dtype(d, name or "")

# ----------------------------------------------------------------- shapes


@functools.lru_cache(4096)
def broadcast_shapes(*shapes):
  """NumPy's broadcast of static shapes, with NumPy's ValueError."""
  nd = max((len(s) for s in shapes), default=0)
  out = [1] * nd
  for s in shapes:
    for i, d in enumerate(s, nd - len(s)):
      if d != out[i]:
        if out[i] == 1:
          out[i] = d
        elif d != 1:
          raise ValueError(f"Incompatible shapes for broadcasting: shapes={list(shapes)}")
  return tuple(out)


_ranks: dict = {}  # operand shapes -> (output rank, whether a non-scalar operand is promoted)


# jnp names -> the lax operation JAX's shape errors name
_LAX_NAMES = {"multiply": "mul", "subtract": "sub", "maximum": "max", "minimum": "min",
              "arctan2": "atan2", "power": "pow", "float_power": "pow", "true_divide": "div",
              "divide": "div", "logical_and": "and", "logical_or": "or", "logical_xor": "xor",
              "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor", "equal": "eq",
              "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
              "greater_equal": "ge", "left_shift": "shift_left", "remainder": "rem",
              "fmod": "rem", "nextafter": "nextafter", "hypot": "hypot"}


def promote_shapes(name, *args):
  """NumPy rank promotion: operands of lower (non-zero) rank get leading size-1 axes
  (``lax.expand_dims``); lax elementwise primitives broadcast size-1 axes and scalars."""
  if len(args) < 2:
    return list(args)
  shapes = tuple([a.shape for a in args])
  plan = _ranks.get(shapes)
  if plan is None:
    try:
      broadcast_shapes(*shapes)
    except ValueError:  # JAX's: ranks differ, NumPy's ValueError (rank promotion checks
      if len({len(s) for s in shapes if s}) > 1:  # the shapes); else the lax operation's
        raise  # TypeError, named as lax names it
      raise TypeError(f"{_LAX_NAMES.get(name, name)} got incompatible shapes for "
                      f"broadcasting: {', '.join(map(str, shapes))}.") from None
    plan = (max(len(s) for s in shapes), len({len(s) for s in shapes if s}) > 1)
    if len(_ranks) < 4096:
      _ranks[shapes] = plan
  nd, promoted = plan
  if not promoted:  # equal ranks (or scalars): the primitives broadcast size-1 axes
    return list(args)
  mode = config._flags["numpy_rank_promotion"]
  if mode != "allow":
    msg = (f"Following NumPy automatic rank promotion for {name} on shapes "
           f"{' '.join(map(str, shapes))}. Set the jax_numpy_rank_promotion config option to "
           "'allow' to disable this message; for more information, see "
           "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
    if mode == "raise":
      raise ValueError(msg)
    warnings.warn(msg)
  eager = core._ctx.trace is core.eval_trace
  out = list(args)
  for i, s in enumerate(shapes):
    if len(s) in (0, nd):
      continue
    a, full = args[i], (1,) * (nd - len(s)) + s
    if eager and type(a) is Array:  # the expand_dims is a view of the immutable buffer
      out[i] = Array._new(a._value.reshape(full), a._weak)
    elif isinstance(a, (Array, core.Tracer)):  # lax.expand_dims's equation (dims are valid)
      out[i] = _bid_p.bind(a, shape=full, broadcast_dimensions=tuple(range(nd - len(s), nd)),
                           sharding=None)
    else:
      out[i] = lax.expand_dims(a, tuple(range(nd - len(s))))
  return out


def promote_args(name, *args):
  """Check, promote dtypes and ranks: the arguments of a binary ufunc as lax takes them."""
  check_arraylike(name, *args)
  args = jax_array_protocol(args)
  try:
    return promote_shapes(name, *promote_dtypes(*args))
  except (TypeError, ValueError):
    check_no_float0s(name, *args)  # JAX's error for float0 operands comes first
    raise


def promote_args_inexact(name, *args):
  """``promote_args`` to a common inexact dtype."""
  check_arraylike(name, *args)
  args = jax_array_protocol(args)
  try:
    return promote_shapes(name, *promote_dtypes_inexact(*args))
  except (TypeError, ValueError):
    check_no_float0s(name, *args)
    raise


def promote_args_numeric(name, *args):
  """``promote_args`` to a common numeric (non-bool) dtype."""
  check_arraylike(name, *args)
  args = jax_array_protocol(args)
  try:
    return promote_shapes(name, *promote_dtypes_numeric(*args))
  except (TypeError, ValueError):
    check_no_float0s(name, *args)
    raise


def broadcast_to(array, shape, *, out_sharding=None):
  """``array`` broadcast to ``shape`` by NumPy rules (``lax.broadcast_in_dim``);
  ``out_sharding`` is accepted for JAX's signature (one device: nothing to shard).

  Args:
    array: input array.
    shape: target shape.
    out_sharding: accepted for JAX compatibility (one device: nothing to shard).

  Returns:
    An array of ``shape``.

  Examples:
    >>> jnp.broadcast_to(jnp.array([1, 2]), (2, 2))
    Array([[1, 2],
           [1, 2]], dtype=int64)
  """
  x = array
  if type(x) in key_types:  # a key array (nbjax.prng)
    return key_impls["broadcast_to"](x, shape)
  x = as_array(x)
  shape = canonicalize_shape(shape)
  xs = x.shape
  if xs == shape:
    return x
  nd = len(shape)
  if len(xs) > nd:
    raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={xs} "
                     f"shape={shape}")
  if any(a != 1 and a != b for a, b in zip(xs[::-1], shape[::-1])):
    a = core.get_aval(x)
    raise ValueError(f"Incompatible types for broadcasting: input type={'~' * a.weak_type}"
                     f"{a.str_short(short_dtypes=False)} and requested type="
                     f"{a.update(shape=shape).str_short(short_dtypes=False)}")
  return lax.broadcast_in_dim(x, shape, tuple(range(nd - len(xs), nd)),
                              out_sharding=out_sharding)


def broadcast_arrays(*args):
  """Every argument broadcast to the joint shape.

  Args:
    args: arrays (or array-likes) to broadcast.

  Returns:
    A list of arrays, all of the broadcast shape.

  Examples:
    >>> jnp.broadcast_arrays(jnp.array([1, 2]), jnp.array([[3], [4]]))
    [Array([[1, 2],
           [1, 2]], dtype=int64), Array([[3, 3],
           [4, 4]], dtype=int64)]
  """
  if any(type(a) in key_types for a in args):
    return key_impls["broadcast_arrays"](*args)
  args = [as_array(a) for a in args]
  s = broadcast_shapes(*(a.shape for a in args))
  return [broadcast_to(a, s) for a in args]


def canonicalize_axes(axis, ndim, name="axis"):
  """``None`` -> all axes; an int or a sequence -> a sorted-as-given tuple of non-negative
  axes (repeats raise ValueError as NumPy)."""
  if axis is None:
    return tuple(range(ndim))
  if isinstance(axis, (tuple, list)):
    axes = tuple(canonicalize_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
      raise ValueError(f"duplicate value in '{name}': {axis}")
    return axes
  return (canonicalize_axis(axis, ndim),)


def index(x, name):
  """A static Python int from ``x`` (a concrete integer), else JAX's concretization error."""
  try:
    return operator.index(x)
  except TypeError:
    pass
  return operator.index(core.concrete_or_error(None, x, f"The {name} argument must be static."))


def lit(value, dtype, weak=False):
  """A 0-d literal (constant) of ``dtype``."""
  return _new(np.asarray(value, dtype), weak)


# (function, shape, dtype, key, its types) -> (primitive, its eager entry then, (kernel, weak)
# or None, registry.epoch then: config changes bump it): the registry's bare kernel that a
# jnp function's eager hot path ran for a strong Array
_MEMO: dict = {}
_blank = object.__new__


def memo_run(name, a, key):
  """``name(a, ...)`` (arguments summed up by the hashable ``key``) straight on the kernel the
  registry's eager entry ran for it before (``registry.bare_kernel``, see ``remember``), while
  that entry is unchanged and no trace is active: the function's argument handling and the
  registry's lookup are skipped, the result is the same. None: the general path."""
  if type(a) is not Array:
    return None
  v = a._value
  try:
    e = _MEMO.get((name, v.shape, v.dtype, key, _types(key)))
  except TypeError:  # (an unhashable argument: an axis given as a list)
    return None
  if e is None or e[2] is None or e[1] is not e[0].eager or e[3] != registry.epoch or \
      a._weak or _ctx.trace is not _EVAL:
    return None
  k, weak = e[2]
  r = _blank(Array)
  if type(weak) is tuple:  # (a primitive of several results: the first)
    r._value, r._weak, r._buf = k(v)[0], weak[0], None
  else:
    r._value, r._weak, r._buf = k(v), weak, None
  return r


def remember(name, a, key, p, params):
  """After ``p.eager(a, **params)`` ran as ``name(a, ...)``: memoise its kernel for
  ``memo_run`` (a strong Array ``a``; the caller's hot path decided the rest)."""
  if a._weak:  # (a weak result: only strong operands are looked up)
    return
  v = a._value
  if len(_MEMO) > 4096:
    _MEMO.clear()
  try:
    _MEMO[(name, v.shape, v.dtype, key, _types(key))] = (
        p, p.eager, registry.bare_kernel(p, a, params), registry.epoch)
  except TypeError:  # (an unhashable key)
    pass


def _types(key):
  """The exact types in a memo key (1, 1.0 and True are equal keys, not equal arguments)."""
  return tuple(map(type, key)) if type(key) is tuple else type(key)
