"""dtypes: JAX's dtype set and type promotion lattice with weak types (x64 on by default).

Sits at the bottom of nbjax beside ``config``: imported by ``core``, ``array``, ``lax`` and
``numpy``; imports only numpy, ml_dtypes (optional) and ``nbjax.config``. Semantics follow
``jax._src.dtypes``: promotion is the join on JAX's lattice, where ``i*``/``f*``/``c*`` are
weakly typed Python scalars (or values with ``weak_type=True``); weak results materialize as
the default dtype of their kind. The only departure from JAX is the default: x64 is on.
``jax_numpy_dtype_promotion='strict'`` swaps in JAX's strict lattice (weak types join their
own kind's dtypes, distinct strong dtypes join nothing).
"""
import functools
import warnings

import numpy as np

from nbjax.config import config

try:
  import ml_dtypes as _ml
except ImportError:  # pragma: no cover
  _ml = None

# ---- dtype names ------------------------------------------------------------------------

bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
bfloat16 = _ml.bfloat16 if _ml is not None else None
int_, uint, float_, complex_ = np.int64, np.uint64, np.float64, np.complex128

# Extended dtypes (JAX's ``dtypes.extended``): PRNG key dtypes ``key<fry>`` etc. are instances
# of ``ExtendedDType`` whose scalar ``type`` is ``prng_key``; ``nbjax.prng`` defines them.


class extended(np.generic):
  """Scalar type of JAX's extended dtypes: ``issubdtype(x.dtype, dtypes.extended)``."""


class prng_key(extended):
  """Scalar type of PRNG key dtypes: ``issubdtype(key.dtype, dtypes.prng_key)``."""


class ExtendedDType:
  """Base of the extended dtype instances (``nbjax.prng.KeyTy``)."""
  type = extended
  _rules = None


# Trivial vector-space dtype: the tangent type of int/bool primals.
float0 = np.dtype([('float0', np.void, 0)])

# Narrow ml_dtypes types: valid dtypes, on the lattice but with no implicit promotion.
_SMALL_FLOAT_NAMES = ('float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz',
                      'float8_e4m3b11fnuz', 'float8_e3m4', 'float8_e4m3', 'float8_e8m0fnu',
                      'float6_e2m3fn', 'float6_e3m2fn', 'float4_e2m1fn')
_SMALL_INT_NAMES = ('int4', 'uint4', 'int2', 'uint2', 'int1', 'uint1')
for _n in _SMALL_FLOAT_NAMES + _SMALL_INT_NAMES:
  globals()[_n] = getattr(_ml, _n, None)
_small_float_dtypes = [np.dtype(getattr(_ml, n)) for n in _SMALL_FLOAT_NAMES if hasattr(_ml, n)]
_small_int_dtypes = [np.dtype(getattr(_ml, n)) for n in _SMALL_INT_NAMES if hasattr(_ml, n)]
_bf16 = np.dtype(bfloat16) if bfloat16 is not None else None
_custom_float_dtypes = _small_float_dtypes + ([_bf16] if _bf16 is not None else [])
_custom_float_types = frozenset(d.type for d in _custom_float_dtypes)
_small_int_types = frozenset(d.type for d in _small_int_dtypes)

_D = np.dtype
_BOOL, _I8, _I16, _I32, _I64 = _D('bool'), _D('int8'), _D('int16'), _D('int32'), _D('int64')
_U8, _U16, _U32, _U64 = _D('uint8'), _D('uint16'), _D('uint32'), _D('uint64')
_F16, _F32, _F64, _C64, _C128 = _D('float16'), _D('float32'), _D('float64'), _D('complex64'), _D('complex128')

_to_32bit = {_I64: _I32, _U64: _U32, _F64: _F32, _C128: _C64}

# Category of every valid dtype: 'b' bool, 'i' signed, 'u' unsigned, 'f' real float, 'c' complex.
_CAT = {_BOOL: 'b', _I8: 'i', _I16: 'i', _I32: 'i', _I64: 'i', _U8: 'u', _U16: 'u', _U32: 'u',
        _U64: 'u', _F16: 'f', _F32: 'f', _F64: 'f', _C64: 'c', _C128: 'c'}
_CAT.update({d: 'f' for d in _custom_float_dtypes})
_CAT.update({d: ('u' if d.name.startswith('u') else 'i') for d in _small_int_dtypes})
_jax_dtype_set = frozenset(_CAT) | {float0}

python_scalar_dtypes = {bool: _BOOL, int: _I64, float: _F64, complex: _C128}
_weak_py_types = (int, float, complex)

iinfo = _ml.iinfo if _ml is not None else np.iinfo
finfo = _ml.finfo if _ml is not None else np.finfo


class TypePromotionError(ValueError):
  """Raised when JAX type promotion fails."""

# ---- x64 state, kept current by a config listener ----------------------------------------

_x64 = True
_lat = True             # the lattice in use: x64 (True/False), or "strict"
_defaults = {}          # kind char -> default dtype under the current x64 mode
_canon_cache = {}       # dtype-like -> canonical np.dtype under the current x64 mode
_result_cache = {}      # ((dtype, weak), ...) -> (dtype, weak)


def _sync(*_):
  global _x64, _lat
  _x64 = bool(config.enable_x64)
  _lat = "strict" if config._flags["numpy_dtype_promotion"] == "strict" else _x64
  _defaults.update({'b': _BOOL, 'i': _I64 if _x64 else _I32, 'u': _U64 if _x64 else _U32,
                    'f': _F64 if _x64 else _F32, 'c': _C128 if _x64 else _C64})
  _canon_cache.clear()
  _result_cache.clear()

_sync()
config.add_listener(_sync)


def default_int_dtype():
  return _defaults['i']

def default_uint_dtype():
  return _defaults['u']

def default_float_dtype():
  return _defaults['f']

def default_complex_dtype():
  return _defaults['c']


def canonicalize_dtype(dtype, allow_extended_dtype=False):
  """np.dtype of ``dtype``; with x64 off, 64-bit types map to their 32-bit counterparts. An
  extended dtype (``key<fry>``) is returned as it is when ``allow_extended_dtype``."""
  try:
    return _canon_cache[dtype]
  except KeyError:
    pass
  except TypeError:  # unhashable dtype spec
    return _canonicalize(dtype)
  if isinstance(dtype, ExtendedDType):
    if allow_extended_dtype:
      return dtype
    raise ValueError(f"Internal: canonicalize_dtype called on extended dtype {dtype} with "
                     "allow_extended_dtype=False")
  out = _canon_cache[dtype] = _canonicalize(dtype)
  return out


def _canonicalize(dtype):
  if isinstance(dtype, type) and dtype in python_scalar_dtypes:
    d = python_scalar_dtypes[dtype]
  else:
    try:
      d = np.dtype(dtype)
    except TypeError as e:
      raise TypeError(f"dtype {dtype!r} not understood") from e
  return d if _x64 else _to_32bit.get(d, d)


def canonicalize_explicit_dtype(dtype, fun_name=""):
  """``canonicalize_dtype`` of a dtype the user asked for (JAX's
  ``_maybe_canonicalize_explicit_dtype``): with x64 off a 64-bit dtype is kept under
  ``jax_explicit_x64_dtypes='allow'``, truncated with JAX's warning under ``'warn'``, refused
  with JAX's ValueError under ``'error'``; both name ``fun_name``. The Python types ``int``,
  ``float``, ... give the default dtypes."""
  if _x64:  # (canonicalize_dtype's cache, without its call)
    try:
      return _canon_cache[dtype]
    except (KeyError, TypeError):
      return canonicalize_dtype(dtype)
  out = canonicalize_dtype(dtype)
  if isinstance(dtype, type) and dtype in python_scalar_dtypes:
    return out
  d = np.dtype(dtype)
  if out == d:
    return out
  mode = config._flags["explicit_x64_dtypes"]
  if mode == "allow":
    return d
  where = f" requested in {fun_name}" if fun_name else ""
  if mode == "error":
    raise ValueError(f"Explicitly requested dtype {d}{where} is not available. To enable more "
                     "dtypes, set the jax_enable_x64 or allow_explicit_x64_dtypes configuration "
                     "options.See https://github.com/jax-ml/jax#current-gotchas for more.")
  warnings.warn(f"Explicitly requested dtype {d}{where} is not available, and will be "
                f"truncated to dtype {out.name}. To enable more dtypes, set the jax_enable_x64 "
                "configuration option or the JAX_ENABLE_X64 shell environment variable. See "
                "https://github.com/jax-ml/jax#current-gotchas for more.", stacklevel=4)
  return out

# ---- predicates ---------------------------------------------------------------------------

def _cat(d):
  try:
    return _CAT[d]
  except (KeyError, TypeError):
    pass
  try:
    return _CAT.get(np.dtype(d))
  except TypeError:
    return None

def kind(d):
  """NumPy's kind character, with the ml_dtypes types in their category (bfloat16 is 'f',
  int4 'i'; NumPy says 'V'): the one to test where a rule branches on the kind."""
  d = np.dtype(d)
  return _CAT.get(d) or d.kind


def is_float(d):
  """Real floating dtype (including bfloat16 and the ml_dtypes floats)."""
  return _cat(d) == 'f'

def is_int(d):
  """Signed or unsigned integer dtype (not bool)."""
  c = _cat(d)
  return c == 'i' or c == 'u'

def is_complex(d):
  return _cat(d) == 'c'

def is_inexact(d):
  c = _cat(d)
  return c == 'f' or c == 'c'

# JAX's inexact counterparts (not canonicalized: int64 -> float64 even with x64 off).
_to_inexact = {_BOOL: _F32, _I8: _F32, _U8: _F32, _I16: _F32, _U16: _F32, _I32: _F32,
               _U32: _F32, _I64: _F64, _U64: _F64}
_to_inexact.update({d: _F32 for d in _small_int_dtypes if d.name in ('int4', 'uint4')})

def to_numeric_dtype(dtype):
  """``dtype``, with bool promoted to int32."""
  d = np.dtype(dtype)
  return _I32 if d == _BOOL else d

def to_inexact_dtype(dtype):
  """``dtype`` if inexact, else its float: float32 for bool and integers up to 32 bits,
  float64 for 64-bit integers."""
  d = np.dtype(dtype)
  return _to_inexact.get(d, d)

def to_floating_dtype(dtype):
  """The real floating dtype of ``dtype``'s precision (a complex dtype's component)."""
  return np.dtype(finfo(to_inexact_dtype(dtype)).dtype)

def to_complex_dtype(dtype):
  """complex128 for float64/complex128 (and 64-bit integers), else complex64."""
  return _C128 if to_inexact_dtype(dtype) in (_F64, _C128) else _C64

def is_python_scalar(x):
  return type(x) in python_scalar_dtypes

def is_weakly_typed(x):
  """Python int/float/complex are weak (bool never is); else ``x.weak_type`` or ``x.aval.weak_type``."""
  t = type(x)
  if t in python_scalar_dtypes:
    return t is not bool
  w = getattr(x, 'weak_type', None)
  if w is None:
    aval = getattr(x, 'aval', None)
    w = getattr(aval, 'weak_type', False) if aval is not None else False
  return bool(w)


def _issubclass(a, b):
  try:
    return issubclass(a, b)
  except TypeError:
    return False


def issubdtype(a, b):
  """``np.issubdtype`` that also places bfloat16 (and ml_dtypes types) in numpy's hierarchy."""
  if isinstance(a, ExtendedDType) or isinstance(b, ExtendedDType):  # key<fry> and friends
    if isinstance(b, ExtendedDType):
      return a == b
    at = a.type if isinstance(a, ExtendedDType) else a
    return isinstance(at, type) and isinstance(b, type) and issubclass(at, b)
  a = a if isinstance(a, (type, np.dtype)) else np.dtype(a)
  b = b if isinstance(b, (type, np.dtype)) else np.dtype(b)
  return _issubdtype(a, b)


@functools.lru_cache(512)
def _issubdtype(a, b):
  a = a if isinstance(a, type) and _issubclass(a, np.generic) else np.dtype(a).type
  b = b if isinstance(b, type) and _issubclass(b, np.generic) else np.dtype(b).type
  if a in _custom_float_types:
    return b in (a, np.floating, np.inexact, np.number, np.generic)
  if a in _small_int_types:
    kind = np.unsignedinteger if a.__name__.startswith('u') else np.signedinteger
    return b in (a, kind, np.integer, np.number, np.generic)
  return bool(np.issubdtype(a, b))

_KINDS = {"bool": lambda d: d == np.bool_,
          "signed integer": lambda d: is_int(d) and issubdtype(d, np.signedinteger),
          "unsigned integer": lambda d: is_int(d) and issubdtype(d, np.unsignedinteger),
          "integral": is_int, "real floating": is_float, "complex floating": is_complex,
          "numeric": lambda d: is_int(d) or is_float(d) or is_complex(d)}


def isdtype(dtype, kind):
  """Whether ``dtype`` is of ``kind`` (JAX's ``jnp.isdtype``): a kind name of ``_KINDS``, a
  dtype, or a tuple of those (any one matching)."""
  d = np.dtype(dtype)
  for k in kind if isinstance(kind, tuple) else (kind,):
    if isinstance(k, str) and k in _KINDS:
      if _KINDS[k](d):
        return True
      continue
    try:
      kd = np.dtype(k)
    except TypeError as e:
      if isinstance(k, str):
        raise ValueError(f"Unrecognized kind={k!r} expected one of {list(_KINDS)}, or a "
                         "compatible input for jnp.dtype()") from None
      raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}") from e
    if d == kd:
      return True
  return False


def safe_to_cast(input_dtype_or_value, output_dtype_or_value):
  """Whether casting to the output dtype loses nothing under the promotion rules (JAX's
  ``dtypes.safe_to_cast``): the input promoted with the (strong) output dtype is the output's.
  Raises ``TypePromotionError`` where the two do not promote."""
  out = dtype(output_dtype_or_value)
  return dtype(input_dtype_or_value) == out or result_type(input_dtype_or_value, out) == out


# ---- dtype of a value ---------------------------------------------------------------------

def dtype(x, canonicalize=False):
  """dtype of a value or dtype-like, as ``jax.dtypes.dtype``.

  Python scalars and the types ``bool``/``int``/``float``/``complex`` give the default dtype of
  their kind; objects with a ``.dtype`` give it; dtype-likes (``'float32'``, ``np.float32``)
  are converted. ``canonicalize=True`` applies ``canonicalize_dtype``.
  """
  t = type(x)
  if t in python_scalar_dtypes:
    return _defaults[python_scalar_dtypes[t].kind]
  if x is None:
    raise ValueError(f"Invalid argument to dtype: {x}.")
  if t is type:
    if x in python_scalar_dtypes:
      return _defaults[python_scalar_dtypes[x].kind]
    d = np.dtype(x)
  elif isinstance(x, (np.dtype, str)) or isinstance(x, type):
    d = np.dtype(x)
  else:
    d = getattr(x, 'dtype', None)
    if not isinstance(d, np.dtype):
      try:
        d = np.result_type(x)
      except TypeError as err:
        raise TypeError(f"Cannot determine dtype of {x}") from err
  if d not in _jax_dtype_set:
    raise TypeError(f"Value '{x}' with dtype {d} is not a valid JAX array type. "
                    "Only arrays of numeric types are supported by JAX.")
  return canonicalize_dtype(d) if canonicalize else d


def scalar_type_of(x):
  """Python scalar type (bool/int/float/complex) of a value's dtype."""
  c = _CAT.get(dtype(x))
  if c == 'b': return bool
  if c in ('i', 'u'): return int
  if c == 'f': return float
  if c == 'c': return complex
  raise TypeError(f"Invalid scalar value {x}")

# ---- the promotion lattice ----------------------------------------------------------------
# Nodes are short names, not dtypes, so that np.dtype's lax __eq__ (dtype('int64') == int)
# can never conflate a weak node with a strong one.

_NODE = {_BOOL: 'b1', _U8: 'u1', _U16: 'u2', _U32: 'u4', _U64: 'u8', _I8: 'i1', _I16: 'i2',
         _I32: 'i4', _I64: 'i8', _F16: 'f2', _F32: 'f4', _F64: 'f8', _C64: 'c8', _C128: 'c16'}
if _bf16 is not None:
  _NODE[_bf16] = 'bf'
_NODE.update({d: d.name for d in _small_float_dtypes + _small_int_dtypes})
_NODE_DTYPE = {v: k for k, v in _NODE.items()}
_WEAK_NODES = {'i*': 'i', 'f*': 'f', 'c*': 'c'}


def _lattice(x64):
  small_f = [_NODE[d] for d in _small_float_dtypes]
  small_i = [_NODE[d] for d in _small_int_dtypes]
  bf = ['bf'] if _bf16 is not None else []
  out = {
      'b1': ['i*'], 'i*': ['u1', 'i1', *small_i],
      'u1': ['i2', 'u2'], 'u2': ['i4', 'u4'], 'u4': ['i8', 'u8'] if x64 else ['i4', 'u8'],
      'u8': ['f*'],
      'i1': ['i2'], 'i2': ['i4'], 'i4': ['i8'], 'i8': ['f*'],
      'f*': [*small_f, *bf, 'f2', 'c*'], 'f2': ['f4'], 'f4': ['f8', 'c8'], 'f8': ['c16'],
      'c*': ['c8'], 'c8': ['c16'], 'c16': [],
      **{n: [] for n in small_f + small_i}}
  if bf:
    out['bf'] = ['f4']
  return out


def _upper_bounds(lattice):
  ub = {}
  def up(n):
    if n not in ub:
      ub[n] = frozenset({n}).union(*(up(m) for m in lattice[n]))
    return ub[n]
  for n in lattice:
    up(n)
  return ub

def _strict_lattice():
  """JAX's strict lattice: a weak type is below its kind's dtypes (and the next weak kind)."""
  def of(cats):
    return [n for d, n in _NODE.items() if _CAT.get(d) in cats]
  return {**{n: [] for n in _lattice(True)},
          'i*': ['f*', *of('iu')], 'f*': ['c*', *of('f')], 'c*': of('c')}

_UB = {True: _upper_bounds(_lattice(True)), False: _upper_bounds(_lattice(False)),
       "strict": _upper_bounds(_strict_lattice())}


class _NoLub(Exception):
  pass


@functools.lru_cache(1024)
def _lub(lat, nodes):
  """Least upper bound of a frozenset of lattice nodes (raises _NoLub/ValueError)."""
  UB = _UB[lat]
  try:
    cub = frozenset.intersection(*(UB[n] for n in nodes))
  except KeyError:
    bad = next(n for n in nodes if n not in UB)
    raise ValueError(f"dtype={bad!r} is not a valid dtype for JAX type promotion.") from None
  lub = (cub & nodes) or {c for c in cub if cub <= UB[c]}
  if len(lub) == 1:
    return next(iter(lub))
  raise _NoLub()


_SMALL_FLOAT_BITS = {d: int(d.name[5]) for d in _small_float_dtypes}   # float8_* -> 8, ...
_small_int_set = frozenset(_small_int_dtypes)
_NODE_STR = {'i*': str(int), 'f*': str(float), 'c*': str(complex)}


def _join(lat, ordered):
  """``_lub`` on lattice ``lat`` of the nodes in ``ordered``; on failure JAX's error, naming
  them in order."""
  try:
    return _lub(lat, frozenset(ordered))
  except _NoLub:
    pass
  ordered = tuple(dict.fromkeys(ordered))
  names = tuple(_NODE_STR.get(n) or str(_NODE_DTYPE.get(n, n)) for n in ordered)
  dts = [_NODE_DTYPE.get(n) for n in ordered]
  if lat == "strict":
    raise TypePromotionError(
        f"Input dtypes {names} have no available implicit dtype promotion path when "
        "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired "
        "output type, or set jax_numpy_dtype_promotion=standard.")
  head = f"Input dtypes {names} have no available implicit dtype promotion path."
  for bits in (8, 6, 4):
    if any(_SMALL_FLOAT_BITS.get(d) == bits for d in dts):
      raise TypePromotionError(
          f"{head} To avoid unintended promotion, {bits}-bit floats do not support implicit "
          "promotion. If you'd like your inputs to be promoted to another type, you can do so "
          "explicitly using e.g. x.astype('float32')")
  if any(d in _small_int_set for d in dts):
    raise TypePromotionError(
        f"{head} To avoid unintended promotion, 1-bit, 2-bit and 4-bit integers do not "
        "support implicit promotion. If you'd like your inputs to be promoted to another "
        "type, you can do so explicitly using e.g. x.astype('int32')")
  raise TypePromotionError(f"{head} Try explicitly casting inputs to the desired output type.")


def _node(d, weak):
  if weak:
    c = _CAT.get(d)
    if c == 'b':
      return 'b1'
    return 'i*' if c in ('i', 'u') else 'f*' if c == 'f' else 'c*' if c == 'c' else _NODE.get(d, d)
  return _NODE.get(d, d)


def _materialize(n):
  k = _WEAK_NODES.get(n)
  return _defaults[k] if k else _NODE_DTYPE[n]


def promote_types(a, b):
  """Join of two dtypes on the lattice, as ``jnp.promote_types``.

  Built-in ``int``/``float``/``complex`` are treated as weak; the result is not canonicalized.
  """
  return _promote_types(_lat, a, b)


def standard_promote_types(a, b):
  """``promote_types`` on the standard lattice whatever ``jax_numpy_dtype_promotion`` says:
  for internal widening that JAX does not route through promotion (``lax.mul``'s
  ``out_dtype``)."""
  return _promote_types(_x64, a, b)


def _promote_types(lat, a, b):
  na = _weak_type_node(a) or _NODE.get(np.dtype(a)) or np.dtype(a)
  nb = _weak_type_node(b) or _NODE.get(np.dtype(b)) or np.dtype(b)
  n = _join(lat, (na, nb))
  k = _WEAK_NODES.get(n)
  return python_scalar_dtypes[{'i': int, 'f': float, 'c': complex}[k]] if k else _NODE_DTYPE[n]


def _weak_type_node(x):
  return 'i*' if x is int else 'f*' if x is float else 'c*' if x is complex else None


def _dtype_and_weaktype(value):
  """``(dtype, weak_type)`` of ``value`` (JAX's private helper): the Python scalar types
  themselves are weak."""
  return (dtype(value, canonicalize=True),
          any(value is t for t in (int, float, complex)) or is_weakly_typed(value))


def _jax_type(dtype_, weak_type):
  """The promotion-lattice type of ``dtype_`` (JAX's private helper): when ``weak_type``, the
  Python scalar type of its kind (bool stays a dtype); else the dtype."""
  if not weak_type or dtype_ == np.bool_:
    return dtype_
  return {"i": int, "u": int, "f": float, "c": complex}[kind(dtype_)]


def _dtype_and_weak(x):
  t = type(x)
  d = python_scalar_dtypes.get(t)
  if d is not None:
    return _defaults[d.kind], t is not bool
  if t is np.dtype or isinstance(x, np.dtype):
    d = x
  elif x is int or x is float or x is complex:
    return _defaults[python_scalar_dtypes[x].kind], True
  else:
    d = getattr(x, 'dtype', x)
    if isinstance(d, np.dtype):
      return (d if _x64 else _to_32bit.get(d, d)), is_weakly_typed(x)
    if isinstance(d, ExtendedDType):  # a key array or key dtype (nbjax.prng)
      return d, False
    d = dtype(x)
  return (d if _x64 else _to_32bit.get(d, d)), False


def result_type(*args, return_weak_type_flag=False):
  """dtype of the result of an operation on ``args`` (arrays, Python scalars, dtype-likes).

  Follows ``jax.dtypes.result_type``: the join on the lattice, weak iff the join is a weak
  node (``i*``/``f*``/``c*``), weak results take the default dtype of their kind, and the
  result is canonicalized. ``None`` stands for the default float dtype.
  """
  if not args:
    raise ValueError("at least one array or dtype is required")
  key = tuple([_dtype_and_weak(_defaults['f'] if a is None else a) for a in args])
  try:
    out = _result_cache[key]
  except KeyError:
    for a, (d, _) in zip(args, key):
      if d not in _jax_dtype_set and not isinstance(d, ExtendedDType):
        raise TypeError(f"Value '{a}' with dtype {d} is not a valid JAX array type. "
                        "Only arrays of numeric types are supported by JAX.")
    out = _result_cache[key] = _result_type(key)
  return out if return_weak_type_flag else out[0]


def _result_type(pairs):
  dtypes = {d for d, _ in pairs}
  if any(isinstance(d, ExtendedDType) for d in dtypes):  # key dtypes join nothing else
    if len(dtypes) == 1:
      return pairs[0][0], False
    raise TypeError("Cannot promote extended dtypes with other dtypes: "
                    f"{', '.join(str(d) for d in dtypes)}")
  all_weak = all(w for _, w in pairs)
  if len(pairs) == 1:
    d, weak = pairs[0]
  elif len(dtypes) == 1 and not all_weak:
    d, weak = pairs[0][0], False
  elif all_weak and _lat != "strict":
    d, weak = _materialize(_join(_lat, [_node(d, False) for d, _ in pairs])), True
  else:
    n = _join(_lat, [_node(d, w) for d, w in pairs])
    d, weak = _materialize(n), n in _WEAK_NODES
  weak = weak and d != _BOOL
  if weak:
    d = _defaults.get(_CAT.get(d), d)
  return canonicalize_dtype(d), weak


_SHORT = {"bool": "bool", "bfloat16": "bf16"}


def itemsize_bits(dtype):
  """Bits per element of ``dtype`` (sub-byte integers included: ``int4`` is 4; ``bool`` is 8,
  its storage)."""
  if dtype is None:
    raise ValueError("dtype cannot be None.")
  if dtype == np.dtype(bool):
    return 8
  if issubdtype(dtype, np.integer):
    return iinfo(dtype).bits
  if issubdtype(dtype, np.floating):
    return finfo(dtype).bits
  if issubdtype(dtype, np.complexfloating):
    return 2 * finfo(dtype).bits
  raise ValueError(f"unexpected input: {dtype=}")


def short_dtype_name(d):
  """JAX's short names in jaxprs and avals: f32, i64, u8, c64, bf16, bool (``key<fry>``)."""
  if isinstance(d, ExtendedDType):
    return d.name
  d = np.dtype(d)
  if d == float0:
    return "float0"
  n = _SHORT.get(d.name)
  if n is None:
    n = {"f": "f", "i": "i", "u": "u", "c": "c"}.get(d.kind, d.kind) + str(d.itemsize * 8)
  return n
