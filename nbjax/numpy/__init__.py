"""``nbjax.numpy``: JAX's ``jax.numpy`` (NumPy signatures, JAX semantics) over ``nbjax.lax``.

Pipeline position: the user-facing layer. Functions here check and promote their
arguments (JAX's dtype lattice with weak types, NumPy broadcasting and axis conventions)
and bind strict ``lax`` primitives, so everything works eagerly and under every
transformation. Importing this package also attaches operators, methods and ``.at[]`` to
``nbjax.Array`` and to tracers (``_array_methods.attach``).

Submodules: ``_ufuncs`` (elementwise), ``_reductions``, ``_creation``, ``_manip`` (shape,
joining, sorting, selection), ``_indexing`` (``x[idx]``, ``.at[]``, take, nonzero,
diagonals), ``_dot`` (dot, matmul, einsum), ``_dtype_api`` (scalar types, promotion
queries), ``linalg``, ``fft``.
"""
import abc as _abc
import builtins as _builtins
import math as _math

import numpy as _np

from nbjax.eager_cache import staged as _staged
from nbjax import lax as _lax
from nbjax.numpy import _ufuncs
from nbjax.array import Array as _Array
from nbjax.core import Tracer as _Tracer


class ndarray(metaclass=_abc.ABCMeta):
  """The array type for ``isinstance`` checks and annotations (``Array`` and tracers), as
  JAX's ``jnp.ndarray``: it cannot be instantiated (``jnp.array`` makes arrays)."""

  def __new__(cls, *args, **kwargs):
    raise TypeError("jax.Array() takes no arguments")


ndarray.register(_Array)
ndarray.register(_Tracer)
from nbjax.numpy import fft, linalg  # noqa: F401
from nbjax.numpy._array_api import __array_api_version__, __array_namespace_info__  # noqa: F401
from nbjax.numpy._array_methods import attach as _attach
from nbjax.numpy._creation import (arange, array, asarray, copy, diag_indices, empty,  # noqa: F401
                                   empty_like, eye, full, full_like, geomspace, identity, indices,
                                   ix_, linspace, logspace, meshgrid, ones, ones_like, tri, tril,
                                   tril_indices, triu, triu_indices, zeros, zeros_like)
from nbjax.numpy._dot import (dot, einsum, einsum_path, inner, kron, matmul, outer,  # noqa: F401
                              tensordot, vdot, vecdot)
from nbjax.numpy._dtype_api import (bfloat16, bool, bool_, can_cast, cdouble,  # noqa: F401,A004
                                    character, complex64, complex128, complex_, complexfloating,
                                    csingle, double, dtype, finfo, flexible, float0, float16,
                                    float32, float64, float_, floating, generic, half, iinfo,
                                    inexact, int8, int16, int32, int64, int_, integer, isdtype,
                                    issubdtype, number, object_, promote_types, result_type,
                                    signedinteger, single, uint, uint8, uint16, uint32, uint64,
                                    unsignedinteger)
from nbjax.numpy._indexing import (NonConcreteBooleanIndexError, argwhere, compress,  # noqa: F401
                                   diag, diagflat, diagonal, extract, flatnonzero, nonzero,
                                   put_along_axis, take, take_along_axis, trace)
from nbjax.numpy._manip import (array_split, atleast_1d, atleast_2d, atleast_3d,  # noqa: F401
                                argsort, broadcast_arrays, broadcast_shapes, broadcast_to, clip,
                                column_stack, concat, concatenate, dsplit, dstack, expand_dims,
                                flip, fliplr, flipud, hsplit, hstack, matrix_transpose, moveaxis,
                                pad, permute_dims, ravel, repeat, reshape, roll, rollaxis, rot90,
                                searchsorted, select, sort, split, squeeze, stack,
                                swapaxes, tile, transpose, vsplit, vstack, where)
from nbjax.numpy._reductions import (all, amax, amin, any, argmax, argmin,  # noqa: F401,A004
                                     average,
                                     count_nonzero, cumprod, cumsum, cumulative_prod,
                                     cumulative_sum, max, mean, min, nancumprod, nancumsum, nanmax,
                                     nanmean, nanmin, nanprod, nansum, prod, ptp, std, sum, var)
from nbjax.numpy._ufuncs import (abs, absolute, acos, acosh, add, angle, arccos,  # noqa: F401,A004
                                 arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, around,
                                 asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_invert,
                                 bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift,
                                 bitwise_xor, cbrt, ceil, conj, conjugate, copysign, cos, cosh,
                                 deg2rad, degrees, divide, divmod, equal, exp, exp2, expm1, fabs,
                                 float_power, floor, floor_divide, fmax, fmin, fmod, greater,
                                 greater_equal, heaviside, hypot, imag, invert, isfinite, isinf,
                                 isnan, isneginf, isposinf, left_shift, less, less_equal, log,
                                 log1p, log2, log10, logaddexp, logaddexp2, logical_and,
                                 logical_not, logical_or, logical_xor, maximum, minimum, mod,
                                 multiply, nan_to_num, negative, nextafter, not_equal, positive,
                                 pow, power, rad2deg, radians, real, reciprocal, remainder,
                                 right_shift, rint, round, sign, signbit, sin, sinc, sinh, sqrt,
                                 square, subtract, tan, tanh, true_divide, trunc)
from nbjax.numpy._numerics import *  # noqa: F401,F403
from nbjax.numpy._setops import *  # noqa: F401,F403
from nbjax.numpy._statistics import *  # noqa: F401,F403
from nbjax.numpy._vectorize import *  # noqa: F401,F403
from nbjax.numpy._util import (check_arraylike as _check_arraylike,  # noqa: F401
                               ensure_arraylike as _ensure_arraylike)

pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None


def _warn_non_array(name, a):
  """JAX's DeprecationWarning for a list/tuple (or other non-array) argument."""
  if not (hasattr(a, "shape") or hasattr(a, "__jax_array__")
          or isinstance(a, (bool, int, float, complex, _np.generic))):
    import warnings
    warnings.warn(f"{name} requires ndarray or scalar arguments, got {type(a)} at position 0. "
                  "In a future JAX release this will be an error.", DeprecationWarning,
                  stacklevel=3)


def _jax_array_protocol(a):
  """``a.__jax_array__()`` for JAX's array-likes, else ``a``."""
  m = getattr(a, "__jax_array__", None)
  return a if m is None else m()


def size(a, axis=None):
  """Number of elements (along ``axis``: an int or a tuple of ints).

  Args:
    a: input array (or array-like).
    axis: optional axis (or tuple of axes) to count along.

  Returns:
    An int.

  Examples:
    >>> jnp.size(jnp.zeros((2, 3)))
    6
    >>> jnp.size(jnp.zeros((2, 3)), axis=1)
    3
  """
  _warn_non_array("size", a)
  s = a.shape if hasattr(a, "shape") else _np.shape(_jax_array_protocol(a))
  if axis is None:
    return _math.prod(s)
  from nbjax.numpy._util import canonicalize_axis
  axes = [canonicalize_axis(i, len(s)) for i in (axis if isinstance(axis, (tuple, list))
                                                 else (axis,))]
  if len(set(axes)) != len(axes):
    raise ValueError(f"repeated axis: {axis}")
  return _math.prod(s[i] for i in axes)


def shape(a):
  """The shape of ``a``.

  Args:
    a: input array (or array-like).

  Returns:
    A tuple of ints.

  Examples:
    >>> jnp.shape(jnp.zeros((2, 3)))
    (2, 3)
  """
  _warn_non_array("shape", a)
  return a.shape if hasattr(a, "shape") else _np.shape(_jax_array_protocol(a))


def ndim(a):
  """The number of axes of ``a``.

  Args:
    a: input array (or array-like).

  Returns:
    An int.

  Examples:
    >>> jnp.ndim(jnp.zeros((2, 3)))
    2
  """
  _warn_non_array("ndim", a)
  return a.ndim if hasattr(a, "ndim") else _np.ndim(_jax_array_protocol(a))


def isscalar(element):
  """Whether ``element`` is a scalar: a Python/NumPy scalar or a 0-d (nbjax or NumPy) array.

  Args:
    element: any object.

  Returns:
    A Python bool.

  Examples:
    >>> jnp.isscalar(3.0)
    True
    >>> jnp.isscalar(jnp.array(3.0))
    True
    >>> jnp.isscalar(jnp.array([3.0]))
    False
  """
  if isinstance(element, (bool, int, float, complex, _np.generic)):
    return True
  if hasattr(element, "__jax_array__") and not isinstance(element, (_Array, _Tracer)):
    element = element.__jax_array__()
  return isinstance(element, (_Array, _Tracer, _np.ndarray)) and element.ndim == 0


def iscomplexobj(x):
  """Whether ``x`` has a complex dtype (lists and other array-likes: as ``asarray`` sees
  them, as JAX's).

  Args:
    x: input array (or array-like).

  Returns:
    A Python bool.

  Examples:
    >>> jnp.iscomplexobj(jnp.array([1 + 0j]))
    True
    >>> jnp.iscomplexobj([1.0, 2.0])
    False
  """
  if isinstance(x, (complex, _np.complexfloating)):  # (no transfer for a scalar, as JAX's)
    return True
  if x is None or isinstance(x, (_builtins.bool, int, float, str, _np.generic)):
    return False
  try:
    typ = x.dtype.type
  except AttributeError:
    typ = asarray(x).dtype.type
  return issubdtype(typ, complexfloating)


def isrealobj(x):
  """Whether ``x`` has a non-complex dtype.

  Args:
    x: input array (or array-like).

  Returns:
    A Python bool.

  Examples:
    >>> jnp.isrealobj(jnp.array([1.0]))
    True
  """
  return not iscomplexobj(x)


def iscomplex(x):
  """Elementwise: non-zero imaginary part.

  Args:
    x: input array (or array-like).

  Returns:
    A boolean array of the shape of ``x``.

  Examples:
    >>> jnp.iscomplex(jnp.array([1 + 1j, 2 + 0j]))
    Array([ True, False], dtype=bool)
  """
  i = imag(asarray(x))
  return _lax.ne(i, _ufuncs._const(i, 0))  # (weak iff the imaginary part is, as JAX's)


def isreal(x):
  """Elementwise: zero imaginary part.

  Args:
    x: input array (or array-like).

  Returns:
    A boolean array of the shape of ``x``.

  Examples:
    >>> jnp.isreal(jnp.array([1 + 1j, 2 + 0j]))
    Array([False,  True], dtype=bool)
  """
  i = imag(asarray(x))
  return _lax.eq(i, _ufuncs._const(i, 0))  # (weak iff the imaginary part is, as JAX's)


@_staged
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
  """Elementwise ``|a - b| <= atol + rtol * |b|`` with NumPy's treatment of inf and NaN
  (JAX's formula: integers compare as the default float, ``a == b`` or finite ``b`` in range).

  Args:
    a: first input array.
    b: second input array (broadcast against ``a``).
    rtol: relative tolerance.
    atol: absolute tolerance.
    equal_nan: whether NaNs compare equal to each other.

  Returns:
    A boolean array of the broadcast shape.

  Examples:
    >>> jnp.isclose(jnp.array([1.0, 1.1, jnp.nan]), 1.0)
    Array([ True, False, False], dtype=bool)
  """
  from nbjax import lax as _lax
  from nbjax.numpy import _util
  if type(a) in _util.key_types or type(b) in _util.key_types:  # key arrays: equality (JAX)
    return equal(a, b)
  a, b = _ensure_arraylike("isclose", a, b)
  a, b = _util.promote_args("isclose", a, b)
  a, b = _util.promote_args_inexact("isclose", a, b)
  d = a.dtype
  if _np.issubdtype(d, _np.complexfloating):
    d = _np.array(0, d).real.dtype
  rtol = _lax.convert_element_type(rtol, d)
  atol = _lax.convert_element_type(atol, d)
  in_range = _lax.le(_lax.abs(_lax.sub(a, b)), _lax.add(atol, _lax.mul(rtol, _lax.abs(b))))
  out = logical_or(_lax.eq(a, b), logical_and(isfinite(b), in_range))
  return logical_or(out, logical_and(isnan(a), isnan(b))) if equal_nan else out


@_staged
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
  """Whether all elements are close (``isclose``), as a 0-d bool array.

  Args:
    a: first input array.
    b: second input array (broadcast against ``a``).
    rtol: relative tolerance.
    atol: absolute tolerance.
    equal_nan: whether NaNs compare equal to each other.

  Returns:
    A 0-d boolean array: True when every pair of elements is close.

  Examples:
    >>> jnp.allclose(jnp.array([1.0, 2.0]), jnp.array([1.0, 2.0 + 1e-9]))
    Array(True, dtype=bool)
  """
  return all(isclose(a, b, rtol, atol, equal_nan))


@_staged
def array_equal(a1, a2, equal_nan=False):
  """Whether two arrays have the same shape and elements (0-d bool array).

  Args:
    a1: first input array (or array-like).
    a2: second input array (or array-like).
    equal_nan: whether NaNs compare equal to each other.

  Returns:
    A 0-d boolean array.

  Examples:
    >>> jnp.array_equal(jnp.array([1, 2]), jnp.array([1, 2]))
    Array(True, dtype=bool)
    >>> jnp.array_equal(jnp.array([1, 2]), jnp.array([[1, 2]]))
    Array(False, dtype=bool)
  """
  try:
    a1, a2 = asarray(a1), asarray(a2)
  except Exception:  # noqa: BLE001 (NumPy: anything unconvertible is unequal)
    return False
  if a1.shape != a2.shape:
    return asarray(False)
  eq = equal(a1, a2)
  if equal_nan:
    eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
  return all(eq)


def array_equiv(a1, a2):
  """Whether two arrays are equal after broadcasting (0-d bool array).

  Args:
    a1: first input array (or array-like).
    a2: second input array (or array-like).

  Returns:
    A 0-d boolean array.

  Examples:
    >>> jnp.array_equiv(jnp.array([1, 2]), jnp.array([[1, 2], [1, 2]]))
    Array(True, dtype=bool)
  """
  a1, a2 = asarray(a1), asarray(a2)
  try:
    broadcast_shapes(a1.shape, a2.shape)
  except ValueError:
    return asarray(False)
  return all(equal(a1, a2))


def astype(x, dtype, /, *, copy=False, device=None):
  """``x`` (an array or scalar) converted to ``dtype``, as ``x.astype``.

  Args:
    x: input array or scalar.
    dtype: dtype to convert to.
    copy: accepted for Array API compatibility (arrays are immutable).
    device: optional device to place the result on (nbjax runs on one device).

  Returns:
    An array with the values of ``x`` in ``dtype``.

  Examples:
    >>> jnp.astype(jnp.array([1.7, -2.2]), jnp.int32)
    Array([ 1, -2], dtype=int32)
  """
  from nbjax.numpy import _array_methods, _util
  return _array_methods._astype(_util.ensure_arraylike("astype", x), dtype, copy=copy)


_attach()

from nbjax.numpy._ufunc_api import frompyfunc, ufunc  # noqa: E402,F401
import sys as _sys  # noqa: E402
from nbjax import eager_cache as _eager_cache  # noqa: E402
# the replay guard trusts jnp's own ufunc objects (jnp.add, ...) as it trusts its functions
_eager_cache.pure_instances.append(
    (ufunc, lambda o: getattr(_sys.modules[__name__], o.__name__, None) is o))
from nbjax.numpy._surface import *  # noqa: E402,F401,F403


def __getattr__(name):  # JAX's deprecation error for a removed name
  if name == "fix":
    raise AttributeError("jax.numpy.fix was deprecated in JAX v0.9.0, and will be removed in JAX "
                         "v0.10.0. Use jax.numpy.trunc instead.")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
