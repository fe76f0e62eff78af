"""dtype names and queries of ``nbjax.numpy``: ``jnp.float32``, ``result_type``, ``finfo``, ...

Pipeline position: a thin layer over ``nbjax.dtypes`` (JAX's promotion lattice). The
scalar types are JAX's: ``jnp.float32`` is usable wherever a dtype is (``np.dtype(jnp.float32)``,
``x.dtype == jnp.float32``) and calling it makes an Array, ``jnp.float32(3)`` being a
0-d float32 ``Array``.
"""
from __future__ import annotations

import numpy as np

from nbjax import dtypes


class _ScalarMeta(type):
  """Metaclass of the scalar types: a dtype-like class whose call builds an Array."""

  def __hash__(cls):
    return hash(cls.dtype.type)

  def __eq__(cls, other):
    return cls is other or cls.dtype.type == other

  def __ne__(cls, other):
    return not cls == other

  def __call__(cls, x):
    from nbjax.numpy._creation import asarray
    return asarray(x, dtype=cls.dtype)

  def __instancecheck__(cls, instance):
    return isinstance(instance, cls.dtype.type)

  def __repr__(cls):
    return f"<class 'nbjax.numpy.{cls.__name__}'>"


def _scalar_type(name, np_type):
  return _ScalarMeta(name, (object,), {"dtype": np.dtype(np_type),
                                       "__doc__": f"The {np.dtype(np_type).name} scalar type: "
                                                  f"``jnp.{name}(x)`` is an Array of that dtype."})


bool_ = _scalar_type("bool_", np.bool_)
int8, int16 = _scalar_type("int8", np.int8), _scalar_type("int16", np.int16)
int32, int64 = _scalar_type("int32", np.int32), _scalar_type("int64", np.int64)
uint8, uint16 = _scalar_type("uint8", np.uint8), _scalar_type("uint16", np.uint16)
uint32, uint64 = _scalar_type("uint32", np.uint32), _scalar_type("uint64", np.uint64)
float16, float32 = _scalar_type("float16", np.float16), _scalar_type("float32", np.float32)
float64 = _scalar_type("float64", np.float64)
complex64 = _scalar_type("complex64", np.complex64)
complex128 = _scalar_type("complex128", np.complex128)
bfloat16 = _scalar_type("bfloat16", dtypes.bfloat16) if dtypes.bfloat16 is not None else None
int_, uint, float_, complex_ = int64, uint64, float64, complex128
single, double, csingle, cdouble, half = float32, float64, complex64, complex128, float16
bool = bool_  # noqa: A001 (NumPy 2's name)

# abstract types of NumPy's hierarchy
generic, number, inexact, floating = np.generic, np.number, np.inexact, np.floating
complexfloating, integer = np.complexfloating, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
character, flexible, object_ = np.character, np.flexible, np.object_

dtype = np.dtype
float0 = dtypes.float0


def result_type(*args, return_weak_type_flag=False):
  """The dtype of an operation on ``args`` under JAX's promotion (canonicalized).

  Args:
    args: arrays, scalars or dtypes.
    return_weak_type_flag: if True, also return whether the result is weakly typed.

  Returns:
    A NumPy dtype (and, with ``return_weak_type_flag``, whether it is weak).

  Examples:
    >>> jnp.result_type(jnp.float32, 1.0)
    dtype('float32')
    >>> jnp.result_type(jnp.int32, jnp.float16)
    dtype('float16')
  """
  return dtypes.result_type(*args, return_weak_type_flag=return_weak_type_flag)


def promote_types(a, b):
  """The dtype two dtypes promote to on JAX's lattice (Python ``int``/``float``/``complex``
  are weak types).

  Args:
    a: first dtype (or Python scalar type).
    b: second dtype (or Python scalar type).

  Returns:
    A NumPy dtype.

  Examples:
    >>> jnp.promote_types(jnp.int8, jnp.uint8)
    dtype('int16')
  """
  return dtypes.dtype(dtypes.promote_types(a, b))


def can_cast(from_, to, casting="safe"):
  """NumPy's ``can_cast`` for dtypes and arrays.

  Args:
    from_: dtype, dtype-like or array to cast from.
    to: dtype to cast to.
    casting: casting rule, as in NumPy (``'no'``, ``'equiv'``, ``'safe'``, ``'same_kind'`` or
      ``'unsafe'``).

  Returns:
    A Python bool.

  Examples:
    >>> jnp.can_cast(jnp.int32, jnp.float64)
    True
    >>> jnp.can_cast(jnp.float64, jnp.int32)
    False
  """
  return np.can_cast(dtypes.dtype(from_), np.dtype(to), casting=casting)


def issubdtype(arg1, arg2):
  """``numpy.issubdtype`` aware of bfloat16 and the ml_dtypes types.

  Args:
    arg1: dtype (or dtype-like) to test.
    arg2: dtype or abstract type such as ``jnp.floating``.

  Returns:
    A Python bool.

  Examples:
    >>> jnp.issubdtype(jnp.bfloat16, jnp.floating)
    True
    >>> jnp.issubdtype(jnp.int32, jnp.floating)
    False
  """
  return dtypes.issubdtype(arg1, arg2)


def isdtype(dtype, kind):
  """Array-API dtype kind test: 'bool', 'signed integer', 'unsigned integer', 'integral',
  'real floating', 'complex floating', 'numeric', or a dtype / tuple of those.

  Args:
    dtype: the dtype to test.
    kind: a kind name, a dtype, or a tuple of them.

  Returns:
    A Python bool.

  Examples:
    >>> jnp.isdtype(jnp.float32, 'real floating')
    True
  """
  return dtypes.isdtype(dtype, kind)


class finfo:
  """Machine limits of a floating dtype (or of an array's dtype). As the Array API standard
  requires, ``bits`` is a Python ``int`` and the limits (``eps``, ``max``, ``min``,
  ``smallest_normal``, ``tiny``, ``resolution``, ``epsneg``, ``smallest_subnormal``) are
  Python ``float``s; ``dtype`` is the real dtype (float32 for complex64). Other attributes
  (``nmant``, ``maxexp``, ...) are NumPy's (ml_dtypes' for the narrow floats)."""
  _FLOATS = ("eps", "epsneg", "max", "min", "resolution", "smallest_normal",
             "smallest_subnormal", "tiny")

  def __init__(self, dtype):
    info = self._info = dtypes.finfo(dtypes.dtype(dtype))
    self.bits, self.dtype = int(info.bits), np.dtype(info.dtype)
    for k in self._FLOATS:
      setattr(self, k, float(getattr(info, k)))

  def __getattr__(self, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return getattr(self._info, name)

  def __repr__(self):
    return repr(self._info)


def iinfo(int_type):
  """Machine limits of an integer dtype (or of an array's dtype).

  Args:
    int_type: an integer dtype, dtype-like, or an array of integer dtype.

  Returns:
    A ``numpy.iinfo`` object with ``min``, ``max`` and ``bits``.

  Examples:
    >>> jnp.iinfo(jnp.int8).max
    127
  """
  return dtypes.iinfo(dtypes.dtype(int_type))
