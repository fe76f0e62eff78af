"""The core: primitives, bind, traces and tracers, abstract values, errors.

Pipeline position: every operation in nbjax ends in ``Primitive.bind``. ``bind`` asks the
*current trace* (a per-thread context, JAX's "stackless" design) to process the primitive:
the eval trace runs the eager implementation the registry selected (a numba kernel or a
NumPy loop); a transformation's trace (jvp, vmap, staging for jit/make_jaxpr) applies
the primitive's rule, which binds other primitives on the parent trace. Nesting is the
chain of parent traces, so any number of transformations compose; tags keep nested
traces of the same kind apart (perturbation confusion).

Imports: numpy, ``dtypes``, ``config``. Never ``lax``/``numpy`` layers.
"""
from __future__ import annotations

import functools
import itertools
import math
import operator
import threading
import weakref
from contextlib import contextmanager

import numpy as np

from nbjax import dtypes
from nbjax.config import config

# --------------------------------------------------------------------- errors


class _JAXErrorMixin:
  """JAX's error classes: the message ends with a link to the class's entry in JAX's
  error documentation (``jax.errors``' anchors, the page that explains each one)."""
  _error_page = "https://docs.jax.dev/en/latest/errors.html"
  _module_name = "jax.errors"

  def __init__(self, message):
    super().__init__(f"{message}\nSee {self._error_page}#{self._module_name}.{type(self).__name__}")


class JAXTypeError(_JAXErrorMixin, TypeError):
  """JAX-specific :class:`TypeError`"""


class JAXIndexError(_JAXErrorMixin, IndexError):
  """JAX-specific :class:`IndexError`"""


NbjaxTypeError = JAXTypeError


def _error_repr(x):
  f = getattr(x, "_error_repr", None)
  return f() if f is not None else str(x)


def _origin_msg(x):
  f = getattr(x, "_origin_msg", None)
  return f() if f is not None else ""


class ConcretizationTypeError(JAXTypeError):
  """A traced (abstract) value was used where Python needs a concrete one."""

  def __init__(self, tracer, context=""):
    super().__init__("Abstract tracer value encountered where concrete value is expected: "
                     f"{_error_repr(tracer)}\n{context}{_origin_msg(tracer)}\n")


class NonConcreteBooleanIndexError(JAXIndexError):
  """A boolean mask index was traced: its number of ``True`` entries, hence the result's
  shape, is unknown. Use ``jnp.where`` (or the ``size=`` argument of ``nonzero``) instead."""

  def __init__(self, tracer):
    super().__init__(f"Array boolean indices must be concrete; got {tracer}\n")


class TracerArrayConversionError(JAXTypeError):
  def __init__(self, tracer):
    super().__init__("The numpy.ndarray conversion method __array__() was called on "
                     f"{_error_repr(tracer)}{_origin_msg(tracer)}")


class TracerIntegerConversionError(JAXTypeError):
  def __init__(self, tracer):
    super().__init__(f"The __index__() method was called on {_error_repr(tracer)}"
                     f"{_origin_msg(tracer)}")


class TracerBoolConversionError(ConcretizationTypeError):
  def __init__(self, tracer):
    JAXTypeError.__init__(self, f"Attempted boolean conversion of {_error_repr(tracer)}."
                          f"{_origin_msg(tracer)}")


class UnexpectedTracerError(JAXTypeError):
  """A tracer escaped the transformation that created it and was used later."""

  def __init__(self, msg):
    super().__init__(msg)


class KeyReuseError(JAXTypeError):
  """A PRNG key was used twice (raised by key-reuse checking)."""

  def __init__(self, message):
    super().__init__(message)


def _concretization_function_error(fun, suggest_astype=False):
  """``aval._bool`` etc.: the concrete value converted by ``fun``, or JAX's error for it."""
  ctx = f"The problem arose with the `{fun.__name__}` function. "
  if suggest_astype:
    ctx += (f"If trying to convert the data type of a value, try using "
            f"`x.astype({fun.__name__})` or `jnp.array(x, {fun.__name__})` instead.")
  err = (TracerBoolConversionError if fun is bool else
         TracerIntegerConversionError if fun is operator.index else
         lambda t: ConcretizationTypeError(t, ctx))

  def method(self, tracer):
    c = tracer.to_concrete_value()
    if c is None:
      raise err(tracer)
    return fun(c)
  return method


# JAX's messages for converting arrays (concrete or traced) to Python scalars and indices, and
# for item assignment
SCALAR_CONVERSION = "Only scalar arrays can be converted to Python scalars; got arr.ndim={}"
INDEX_CONVERSION = "Only integer scalar arrays can be converted to a scalar index."
BOOL_CONVERSION_EMPTY = ("The truth value of an empty array is ambiguous. Use `array.size > 0` "
                         "to check that an array is not empty.")
BOOL_CONVERSION_MANY = ("The truth value of an array with more than one element is ambiguous. "
                        "Use a.any() or a.all()")
IMMUTABLE = ("JAX arrays are immutable and do not support in-place item assignment. Instead "
             "of x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
             "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")

_FLOAT_CTX, _COMPLEX_CTX = (
    f"The problem arose with the `{f}` function. If trying to convert the data type of a "
    f"value, try using `x.astype({f})` or `jnp.array(x, {f})` instead." for f in ("float",
                                                                                 "complex"))

# --------------------------------------------------------------------- avals


class ShardingTypeError(Exception):
  """Operands' shardings (Explicit mesh axes) that an operation cannot combine (JAX's)."""


# sharding in types (Explicit mesh axes): ``(out_avals, prim, in_avals, params) -> out_avals``
# with the outputs' shardings, set by ``interpreters/sharding_types.py``; run by
# ``Primitive.abstract_eval`` only when an operand's aval carries one
sharding_rule_hook = None


def _sharded(aval):
  """An aval's sharding for comparisons: None also for one that names no mesh axis."""
  sh = getattr(aval, "_sh", None)
  if sh is None or (not sh.spec.unreduced and not sh.spec.reduced and
                    all(p is None for p in sh.spec)):
    return None
  return sh


def _reranked(sh, old, new):
  """A sharding for ``new``, the shape ``old`` with a leading dimension added (unsharded) or
  removed (a scan's slice, a stacked output); None (untyped) for any other change of rank."""
  spec = tuple(sh.spec) + (None,) * (len(old) - len(sh.spec))
  if tuple(new[1:]) == tuple(old):
    return sh.with_spec(type(sh.spec)(None, *spec))
  if tuple(old[1:]) == tuple(new):
    return sh.with_spec(type(sh.spec)(*spec[1:]))
  return None


class ShapedArray:
  """Abstract value: shape, dtype and weak_type. ``ShapedArray((3,), np.float32)``. Under a mesh
  with Explicit axes it also carries a ``sharding`` (``_sh``, None otherwise)."""
  __slots__ = ("shape", "dtype", "weak_type", "_sh")
  array_abstraction_level = 1

  def __init__(self, shape, dtype, weak_type=False):
    self.shape = tuple(shape)
    self.dtype = dtype if isinstance(dtype, dtypes.ExtendedDType) else np.dtype(dtype)
    self.weak_type = weak_type
    self._sh = None  # (set: getattr(a, "_sh", None) never raises and catches inside)

  ndim = property(lambda self: len(self.shape))
  size = property(lambda self: math.prod(self.shape))

  def update(self, shape=None, dtype=None, weak_type=None, sharding=None):
    a = ShapedArray(self.shape if shape is None else shape,
                    self.dtype if dtype is None else dtype,
                    self.weak_type if weak_type is None else weak_type)
    sh = getattr(self, "_sh", None) if sharding is None else sharding
    if sh is not None:
      if sharding is None and len(a.shape) != len(self.shape):
        sh = _reranked(sh, self.shape, a.shape)
      if sh is not None:
        a._sh = sh
    return a

  @property
  def sharding(self):
    """The ``NamedSharding`` (over an ``AbstractMesh``) of an array of this type: its Explicit
    mesh axes, else unsharded over the context mesh (JAX's ``aval.sharding``)."""
    sh = getattr(self, "_sh", None)
    if sh is None:
      from nbjax.sharding import NamedSharding, PartitionSpec, get_abstract_mesh
      sh = NamedSharding(get_abstract_mesh(), PartitionSpec(*(None,) * len(self.shape)))
    return sh

  def strip_weak_type(self):
    return self.update(weak_type=False) if self.weak_type else self

  def to_tangent_aval(self):
    return self.update(dtype=self.dtype if dtypes.is_inexact(self.dtype) else dtypes.float0)

  def str_short(self, short_dtypes=True):
    d = (dtypes.short_dtype_name(self.dtype) if short_dtypes or self.dtype == dtypes.float0
         else self.dtype.name)
    sh = getattr(self, "_sh", None)
    if sh is None:
      return f"{d}[{','.join(map(str, self.shape))}]"
    spec = tuple(sh.spec) + (None,) * (len(self.shape) - len(sh.spec))
    dims = [f"{n}" if p is None else f"{n}@{p}" if isinstance(p, str) else
            f"{n}@({','.join(p)})" for n, p in zip(self.shape, spec)]
    return f"{d}[{','.join(dims)}]"

  def __eq__(self, other):
    return (type(other) is ShapedArray and self.shape == other.shape
            and self.dtype == other.dtype and self.weak_type == other.weak_type
            and _sharded(self) == _sharded(other))

  def __hash__(self):
    return hash((self.shape, self.dtype, self.weak_type))

  def __repr__(self):
    w = ", weak_type=True" if self.weak_type else ""
    return f"ShapedArray({self.str_short(short_dtypes=False)}{w})"

  def __str__(self):  # JAX's: ``~float32[]`` for a weak type, ``int32[2,3]``
    return ("~" if self.weak_type else "") + self.str_short(short_dtypes=False)

  _bool = _concretization_function_error(bool)
  _int = _concretization_function_error(int, True)
  _float = _concretization_function_error(float, True)
  _complex = _concretization_function_error(complex, True)
  _index = _concretization_function_error(operator.index)


AbstractValue = ShapedArray


class AbstractRef:
  """A mutable array reference's abstract value, ``Ref{float32[3]}`` (JAX's ``AbstractRef``):
  the ``ShapedArray`` it holds (``inner_aval``). Refs and their primitives: ``nbjax.state``."""
  __slots__ = ("inner_aval", "memory_space", "kind")
  array_abstraction_level = 1

  def __init__(self, inner_aval, memory_space=None, kind=None):
    self.inner_aval, self.memory_space, self.kind = inner_aval, memory_space, kind

  shape = property(lambda self: self.inner_aval.shape)
  dtype = property(lambda self: self.inner_aval.dtype)
  weak_type = property(lambda self: self.inner_aval.weak_type)
  ndim = property(lambda self: len(self.inner_aval.shape))
  size = property(lambda self: self.inner_aval.size)

  def update(self, inner_aval=None, **kw):  # (shape=, dtype=, weak_type=: of the inner aval)
    inner = self.inner_aval if inner_aval is None else inner_aval
    return AbstractRef(inner.update(**kw) if kw else inner, self.memory_space, self.kind)

  def strip_weak_type(self):
    return AbstractRef(self.inner_aval.strip_weak_type(), self.memory_space, self.kind)

  def to_tangent_aval(self):
    return AbstractRef(self.inner_aval.to_tangent_aval(), self.memory_space, self.kind)

  def str_short(self, short_dtypes=True):
    return f"Ref{{{self.inner_aval.str_short(short_dtypes)}}}"

  def __eq__(self, other):
    return type(other) is AbstractRef and self.inner_aval == other.inner_aval

  def __hash__(self):
    return hash((AbstractRef, self.inner_aval))

  def __repr__(self):
    return self.str_short(short_dtypes=False)

  __str__ = __repr__


class AbstractToken:
  """The abstract value of an ordering token (``lax.create_token``), printed ``Tok``: no shape
  or dtype. Staged, it lowers to ``!stablehlo.token``."""
  __slots__ = ()
  array_abstraction_level = 1

  def str_short(self, short_dtypes=True):
    return "Tok"

  def to_tangent_aval(self):
    return self

  to_ct_aval = strip_weak_type = to_tangent_aval

  def __repr__(self):
    return "AbstractToken()"


abstract_token = AbstractToken()


def get_token_aval():
  """The array a token stands for at the runtime's boundary: ``bool[0]``."""
  return ShapedArray((0,), np.bool_)


class Token:
  """An ordering token (``lax.create_token``, a jit output): no data; ``_buf`` is the empty
  ``bool[0]`` array it stands for."""
  __slots__ = ("_buf",)
  aval = abstract_token

  def __init__(self, buf):
    self._buf = buf

  def block_until_ready(self):
    self._buf.block_until_ready()


class _RefMeta(type):
  def __instancecheck__(cls, x):  # a tracer standing for a ref is one too (JAX's)
    return type(x) is cls or isinstance(x, Tracer) and type(x.aval) is AbstractRef


class Ref(metaclass=_RefMeta):
  """A mutable array reference (``nbjax.new_ref(x)``): it owns an immutable ``Array`` and a
  write replaces it, so a value read from a ref never changes afterwards. Indexing, ``.at``
  and the state primitives are attached by ``nbjax.state``."""
  __slots__ = ("_ref_value", "aval", "__weakref__")

  def __init__(self, value, aval):
    self._ref_value, self.aval = value, aval

  shape = property(lambda self: self.aval.shape)
  dtype = property(lambda self: self.aval.dtype)
  ndim = property(lambda self: len(self.aval.shape))
  size = property(lambda self: self.aval.size)
  weak_type = property(lambda self: self.aval.weak_type)

  def __len__(self):
    if not self.aval.shape:
      raise TypeError("len() of unsized object")
    return self.aval.shape[0]

  def __repr__(self):
    r = repr(self._ref_value)
    return "Ref" + r[5:] if r.startswith("Array") else f"Ref({r})"

  __hash__ = object.__hash__


# installed by nbjax.state: run_state(closed, args, name) runs a jaxpr taking or closing over
# eager refs (written back); run_with_refs(prim, args, params) one primitive with ref operands
run_state = run_with_refs = discharged_call = None


def raise_to_shaped(aval, weak_type=None):
  return aval if weak_type is None else aval.update(weak_type=weak_type)


_PY_SCALARS = (bool, int, float, complex)


# JAX's error for an object with __jax_array__ reaching a primitive or a transformation
# unconverted (jnp functions convert such objects; lax functions and jit do not)
JAX_ARRAY_ABSTRACTIFY = (
    "Triggering __jax_array__() during abstractification is no longer supported. To avoid "
    "this error, either explicitly convert your object using jax.numpy.array(), or register "
    "your object as a pytree.")


def get_aval(x):
  """The abstract value of anything nbjax accepts as an operand."""
  aval = getattr(x, "aval", None)
  if aval is not None and not isinstance(x, np.ndarray):
    return aval
  t = type(x)
  if isinstance(x, (np.ndarray, np.generic)):  # before Python scalars: np.float64 is a float
    if isinstance(x, np.ma.MaskedArray):
      raise ValueError("numpy masked arrays are not supported as direct inputs to JAX "
                       "functions. Use arr.filled() to convert the value to a standard numpy "
                       "array.")
    return ShapedArray(x.shape, dtypes.canonicalize_dtype(x.dtype))
  if t in _PY_SCALARS or isinstance(x, _PY_SCALARS):
    return ShapedArray((), dtypes.dtype(x, canonicalize=True), t is not bool)
  if hasattr(x, "__jax_array__"):
    raise ValueError(JAX_ARRAY_ABSTRACTIFY)
  if isinstance(x, str):
    raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type")
  raise TypeError(f"Argument '{x}' of type '{type(x)}' is not a valid JAX type")


def _invalid_value(x):
  """Whether ``x`` is no JAX value at all (strings, containers, object/string arrays)."""
  if isinstance(x, (np.ndarray, np.generic)):
    d = x.dtype
    return d.kind in "USOMm"  # (ml_dtypes' int4, float8_*, bfloat16 are kind "V": valid)
  return isinstance(x, (str, bytes, list, tuple, dict, set, type(None))) or type(x) is object


def invalid_value_error(name, args):
  """JAX's TypeError for a primitive operand that is no JAX value (None if all are): only
  consulted once the operation failed."""
  for i, a in enumerate(args):
    if _invalid_value(a):
      return TypeError(f"Error interpreting argument to {name} as a JAX value. The problematic "
                       f"value is of type {type(a)} and was passed to {name} at position {i}.\n")
  return None


def _sds_sharding(s, shape):
  """A ShapeDtypeStruct's sharding checked against the rank, as JAX's."""
  from nbjax import sharding as sh
  from nbjax.experimental.layout import Format, Layout
  if isinstance(s, Format):  # (its layout checked and kept apart: ShapeDtypeStruct._dll)
    if not isinstance(s.layout, (Layout, type(None))):
      raise TypeError("`Layout.AUTO` cannot be used in place of a device-local layout in a "
                      f"`ShapeDtypeStruct`. Got {s}")
    if s.layout is not None:
      s.layout.check_compatible_aval(shape)
    s = s.sharding
    if s is None:
      return None
  if isinstance(s, sh.PartitionSpec):
    if len(s) > len(shape):
      raise ValueError(f"PartitionSpec {s} is only valid for values of rank at least {len(s)}, "
                       f"but was applied to a value of rank {len(shape)}.")
    return s  # (taken on the context mesh when read: ShapeDtypeStruct.sharding)
  if isinstance(s, sh.NamedSharding):
    s.check_compatible_aval(shape)
  return s


class ShapeDtypeStruct:
  """A shape, dtype (and weak type) stand-in for an array (``eval_shape``, ``make_jaxpr``)."""
  __slots__ = ("shape", "dtype", "weak_type", "_sharding", "_dll")

  def __init__(self, shape, dtype, weak_type=False, sharding=None):
    self.shape = tuple(shape)
    if dtype is None:
      raise ValueError("ShapeDtypeStruct: dtype must be specified.")
    self.dtype = (dtype if isinstance(dtype, dtypes.ExtendedDType)  # (not canonicalized:
                  else np.dtype(dtype))  # JAX's; an aval of it is, ``abstractify``)
    self.weak_type = weak_type
    self._dll = getattr(sharding, "layout", None)  # (a Format's layout)
    if sharding is not None:
      sharding = _sds_sharding(sharding, self.shape)
    self._sharding = sharding

  @property
  def format(self):
    """The ``Format``: the layout (a Format's, else None) and the sharding."""
    from nbjax.experimental.layout import Format
    return Format(self._dll, self.sharding)

  @property
  def sharding(self):
    """The sharding given; a PartitionSpec as a NamedSharding on the context mesh (JAX's)."""
    s = self._sharding
    if s is not None and type(s).__name__ == "PartitionSpec":
      from nbjax import sharding as sh
      m = sh._current_mesh()
      if m is None or m.empty:
        raise TypeError("When specifying PartitionSpec to `ShapeDtypeStruct`, the context mesh "
                        "cannot be empty. Please use `jax.set_mesh` to set the mesh context.")
      return sh.NamedSharding(m, s)
    return s

  ndim = property(lambda self: len(self.shape))
  size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

  @classmethod
  def like(cls, x):
    """The ``ShapeDtypeStruct`` of ``x`` (an array, a key array, a scalar, a tracer)."""
    a = abstractify(x)  # (as JAX's: the sharding of a committed array, else None)
    sharding = getattr(x, "sharding", None) if getattr(x, "_committed", True) else None
    return cls(a.shape, a.dtype, weak_type=a.weak_type, sharding=sharding)

  def __len__(self):
    if not self.shape:
      raise TypeError("len() of unsized object")
    return self.shape[0]

  def __eq__(self, other):
    return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
            and self.dtype == other.dtype and self.weak_type == other.weak_type)

  def __hash__(self):
    return hash((self.shape, self.dtype, self.weak_type))

  def __repr__(self):
    w = ", weak_type=True" if self.weak_type else ""
    return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{w})"

  def update(self, **kw):
    d = dict(shape=self.shape, dtype=self.dtype, weak_type=self.weak_type,
             sharding=self.sharding if self._dll is None else self.format)
    d.update(kw)
    return ShapeDtypeStruct(**d)


abstractify_sharding = None
"""``(aval, sharding) -> aval`` typed with a ``ShapeDtypeStruct``'s mesh sharding; installed
by ``nbjax.sharding`` (a layer above: sharding in types lives in ``interpreters``)."""


def abstractify(x):
  """The aval of an argument to a staged function: arrays, scalars, tracers,
  ``ShapeDtypeStruct``s or avals (NumPy scalars are never weakly typed, even ``np.float64``)."""
  if isinstance(x, ShapeDtypeStruct):
    d = x.dtype
    a = ShapedArray(x.shape, d if isinstance(d, dtypes.ExtendedDType) else
                    dtypes.canonicalize_dtype(d), x.weak_type)
    if x._sharding is not None and getattr(x._sharding, "mesh", None) is not None and \
        abstractify_sharding is not None:
      a = abstractify_sharding(a, x.sharding)
    return a
  if isinstance(x, np.generic):
    return ShapedArray((), dtypes.canonicalize_dtype(x.dtype))
  aval = getattr(x, "aval", None)
  if aval is not None and not isinstance(x, np.ndarray):
    return aval
  if isinstance(x, ShapedArray):  # an abstract value stands for itself (jit(f).lower(aval))
    return x
  if hasattr(x, "__jax_array__") and not isinstance(x, np.ndarray):
    raise ValueError(JAX_ARRAY_ABSTRACTIFY)
  return get_aval(x)


def valid_jaxtype(x):
  """Whether ``x`` is a JAX value: not a string, object, datetime, void or structured array
  (whose avals ``get_aval`` does not refuse); float0 arrays are."""
  try:
    d = getattr(get_aval(x), "dtype", None)  # (a token has none)
  except TypeError:
    return False
  return not (isinstance(d, np.dtype) and (d.kind in "USOMm" or d.type is np.void)
              and d != dtypes.float0)


# --------------------------------------------------------------------- primitives

_all_primitives: list = []  # every Primitive ever created; the registry reads it


class Primitive:
  """A primitive operation; it owns all its rules (see ``nbjax.registry``).

  ``bind(*args, **params)`` hands the operation to the current trace.
  """
  multiple_results = False
  call_primitive = False
  map_primitive = False
  named_axes = None  # collectives: params -> the axis names they act over (lax.parallel)
  places_sharded = False  # its eager impl places sharded operands itself (no jitted run;
  # call and map primitives do as well)
  rule_always = False  # its JVP and batching rules run even on untransformed operands (new_ref)

  def __init__(self, name: str):
    self.name = name
    self.impls: dict = {}          # eager implementations by backend: numba / numpy / xla / python
    self.impl = None               # user-level impl set by def_impl (called with the raw args)
    self.abstract_eval_rule = None
    self.jvp = None                # (primals, tangents, **params) -> (primal_out, tangent_out)
    self.transpose = None          # (ct, *args, **params) -> cts (linear args are UndefinedPrimal)
    self.batch = None              # (vals, bdims, **params) -> (out, out_bdim)
    self.jet = None                # (primals, series, **params) -> (primal_out, series_out)
    self.lowerings: dict = {}      # platform -> (ctx, *operands, **params) -> [ir.Value]
    self.partial_eval = None
    self.partial_eval_custom = None  # (saveable, unknowns, **params): under a checkpoint policy
    self.recompute_custom = None   # (saveable, eqn, needed_outs): a known call's recompute split
    self.meta: dict = {}           # test/benchmark metadata (dtypes, domain, differentiable, ...)
    self.family = "user"
    self.backend = None            # selected eager backend name (registry policy)
    self.eager = self._eager_unset  # fast eager callable chosen by the registry
    _all_primitives.append(self)

  def __repr__(self):
    return self.name

  def bind(self, *args, **params):
    trace = _ctx.trace
    try:
      if trace is eval_trace:
        return self.eager(*args, **params)
      for a in args:
        if type(a) is key_array_type:  # a key array (nbjax.prng): bound as its key-dtype value
          return key_bind(self, trace, args, params)
      return trace.process_primitive(self, args, params)
    except TypeError as e:
      err = invalid_value_error(self.name, args)
      if err is None:
        raise
      raise err from e

  # seed-compatible definers -------------------------------------------------
  def def_impl(self, impl):
    self.impl = impl
    self.impls["python"] = impl
    self.backend = "python"
    self.eager = impl
    return impl

  def def_abstract_eval(self, abstract_eval):
    self.abstract_eval_rule = abstract_eval
    return abstract_eval

  def def_effectful_abstract_eval(self, effectful_abstract_eval):
    self.abstract_eval_rule = lambda *a, **kw: effectful_abstract_eval(*a, **kw)[0]
    return effectful_abstract_eval

  def abstract_eval(self, *avals, **params):
    if self.abstract_eval_rule is None:
      raise NotImplementedError(f"Abstract evaluation for '{self.name}' not implemented")
    out = self.abstract_eval_rule(*avals, **params)
    if sharding_rule_hook is not None and any(getattr(a, "_sh", None) is not None
                                               for a in avals):
      out = sharding_rule_hook(out, self, avals, params)
    return out

  def _eager_unset(self, *args, **params):
    raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented")

  def impl_eager(self, *args, **params):
    return self.eager(*args, **params)


# --------------------------------------------------------------------- traces


class Trace:
  """Base trace. Subclasses implement ``process_primitive`` and the higher-order hooks."""
  fun_name = None

  def process_primitive(self, primitive, tracers, params):
    raise NotImplementedError

  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    raise NotImplementedError(f"custom_jvp is not supported by {type(self).__name__}")

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    raise NotImplementedError(f"custom_vjp is not supported by {type(self).__name__}")

  def __repr__(self):
    return f"{type(self).__name__}"


class EvalTrace(Trace):
  """The bottom trace: evaluate eagerly. A Tracer here is an escaped tracer."""

  def process_primitive(self, primitive, args, params):
    for a in args:
      if isinstance(a, Tracer):
        raise escaped_tracer_error(a, primitive)
    return primitive.eager(*args, **params)

  # custom_jvp / custom_vjp (``nbjax.custom_derivatives``): nothing is differentiated here
  def process_custom_jvp_call(self, prim, fun, jvp, tracers, *, symbolic_zeros):
    with set_current_trace(self):
      return fun(*tracers)

  def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, out_trees, symbolic_zeros):
    with set_current_trace(self):
      return fun(*tracers)


def check_leaks(trace):
  """JAX's tracer-leak check (``jax.checking_leaks``; ``jax_check_tracer_leaks``): with the
  flag set, a finished ``trace`` (its caller holding no tracer of it any more) must have no
  live tracer left; one the traced function stored away raises, naming each leaked tracer,
  where it was made and the chain of references that keeps it."""
  if not config._flags["check_tracer_leaks"]:
    return
  import gc
  gc.collect()  # (tracers kept only by unreachable cycles cannot be used again: not leaks)
  tracers = [x for x in gc.get_referrers(trace) if isinstance(x, Tracer)]
  if tracers:
    raise leaked_tracer_error("trace", trace, tracers)


def leaked_tracer_error(name, t, tracers):
  why = functools.partial(_why_alive, {id(tracers)})
  msgs = "\n\n".join(f"{x}{_origin_msg(x)}{why(x)}" for x in tracers)
  return Exception(f"Leaked {name} {t}. Leaked tracer(s):\n\n{msgs}\n")


def _why_alive(ignore_ids, x):
  """JAX's chain of referrers keeping ``x`` alive, one per line, up to a module."""
  import gc
  import types
  parents = lambda x: [r for r in gc.get_referrers(x) if id(r) not in ignore_ids]
  child, lines, seen = x, [], set()
  while id(child) not in seen and type(child) is not types.ModuleType and parents(child):
    parent = parents(child)[0]
    # an instance's __dict__, or a closure's cell: one step from the instance or function
    # (no list of referrers is kept across calls: it would be a referrer itself)
    first = lambda x: next(iter(parents(x)), None)
    if isinstance(parent, dict) and getattr(first(parent), "__dict__", None) is parent:
      parent = first(parent)
    elif type(parent) is types.CellType and first(parent) is not None and (
        first(first(parent)) is not None):
      parent = first(first(parent))
    lines.append(f"<{type(child).__name__} {id(child)}> is referred to by "
                 + _why_alive_container_info(parent, id(child)))
    seen.add(id(child))
    child = parent
  return "\n" + "\n".join(lines) if lines else ""


def _why_alive_container_info(container, obj_id):
  import inspect
  import types
  name = f"<{type(container).__name__} {id(container)}>"
  if type(container) is types.ModuleType:
    name = getattr(container, "__name__", name)
  if type(container) is types.FunctionType:
    name_ = getattr(container, "__name__", "<no-name>")
    closure = inspect.getclosurevars(container)
    keys = [k for k, v in dict(closure.nonlocals, **closure.globals).items() if id(v) == obj_id]
    if len(keys) == 1:
      return f"{name} ({name_}) closed-over variable {keys[0]}"
    elif len(keys) > 1:
      return f"{name} in closed-over variables " + ", ".join(map(repr, keys))
  if hasattr(container, "__dict__"):
    keys = [k for k in vars(container) if id(vars(container)[k]) == obj_id]
    if len(keys) == 1:
      return f"{name}.{keys[0]}"
    elif len(keys) > 1:
      return f"{name} in vars " + ", ".join(map(repr, keys))
  if isinstance(container, (list, tuple)):
    idxs = [i for i, x in enumerate(container) if id(x) == obj_id]
    if len(idxs) == 1:
      return f"{name}[{idxs[0]}]"
    return f"{name} at indices " + ", ".join(map(str, idxs))
  if isinstance(container, dict):
    keys = [k for k in container if id(container[k]) == obj_id]
    if len(keys) == 1:
      return f"{name}[{keys[0]!r}]"
    return f"{name} at keys " + ", ".join(map(repr, keys))
  return name


def escaped_tracer_error(tracer, primitive=None):
  name = type(tracer).__name__
  dbg = getattr(tracer._trace, "debug_info", None)
  where = (f"\nThe function being traced when the value leaked was {dbg.func_src_info} traced "
           f"for {dbg.traced_for}." if dbg is not None else "")
  return UnexpectedTracerError(
      "Encountered an unexpected tracer. A function transformed by JAX had a side effect, "
      f"allowing for a reference to an intermediate value with type "
      f"{tracer.aval.str_short(short_dtypes=False)} "
      f"wrapped in a {name} to escape the scope of the transformation.\nJAX transformations "
      "require that functions explicitly return their outputs, and disallow saving "
      f"intermediate values to global state.{where}\nTo catch the leak earlier, try setting "
      "the environment variable JAX_CHECK_TRACER_LEAKS or using the `jax.checking_leaks` "
      "context manager.")


class DebugNansTrace(EvalTrace):
  """The bottom trace while ``jax_debug_nans`` or ``jax_debug_infs`` is set (or a transfer
  guard: ``host_to_device``): evaluates as ``EvalTrace`` does, then raises
  ``FloatingPointError`` naming the primitive when a floating output holds a NaN (or an inf).
  A jitted call that produces one is run again op by op (``jaxpr`` eagerly, under this
  trace) to name the primitive, as JAX does. (Eager fast paths, which test for
  ``eval_trace``, are off while it is the bottom trace.)"""

  def process_primitive(self, primitive, args, params):
    if h2d_guard is not None:  # a host value bound eagerly (a jitted call's NumPy argument)
      for a in args:
        if getattr(a, "aval", None) is None:
          host_to_device(a)
      if primitive.name == "slice" and params["strides"] is None:
        for s in params["start_indices"]:  # (JAX's eager slice: a dynamic_slice of them)
          host_to_device(s)
      if primitive.name in jitted_impls:  # (only the arguments of JAX's jitted impl transfer)
        _ctx.trace = eval_trace
        try:
          out = EvalTrace.process_primitive(self, primitive, args, params)
        finally:
          _ctx.trace = self
        return out
    out = EvalTrace.process_primitive(self, primitive, args, params)
    bad = _invalid(out if primitive.multiple_results else [out])
    if bad:
      if primitive.name in ("xla_pmap", "shard_map"):  # (JAX's pmap is a shard_map)
        raise FloatingPointError(f"Invalid value ({bad}) encountered in sharded computation.")
      if "jaxpr" in params and hasattr(params["jaxpr"], "jaxpr"):  # a call: find the op
        from nbjax.jaxpr import eval_jaxpr
        eval_jaxpr(params["jaxpr"].jaxpr, params["jaxpr"].consts, *args)
        name = params.get("name", primitive.name)
        raise FloatingPointError(
            f"invalid value ({bad}) encountered in {primitive.name}({name}). Because "
            "jax_config.debug_nans.value and/or config.jax_debug_infs is set, the "
            "de-optimized function (i.e., the function as if the `jit` decorator were "
            "removed) was called in an attempt to get a more precise error message. However, "
            "the de-optimized function did not produce invalid values during its execution. "
            "This behavior can result from `jit` optimizations causing the invalid value to be "
            "produced. It may also arise from having nan/inf literals as inputs or outputs, "
            "like `jax.jit(lambda ...: jax.numpy.nan)(...)`.")
      raise FloatingPointError(f"invalid value ({bad}) encountered in {primitive.name}")
    return out


def _invalid(outs):
  nans, infs = config._flags["debug_nans"], config._flags["debug_infs"]
  if not (nans or infs):  # (the bottom trace for a transfer guard alone: nothing to check)
    return None
  for o in outs:
    if getattr(getattr(o, "dtype", None), "kind", None) not in ("f", "c"):
      continue  # (no floating values: key arrays, which have no NumPy form, among them)
    v = np.asarray(o)
    if v.dtype.kind in "fc":
      if nans and np.isnan(v).any():
        return "nan"
      if infs and np.isinf(v).any():
        return "inf"
  return None


class _Ctx(threading.local):
  def __init__(self):
    self.trace = debug_trace if _debugging() else eval_trace


def _debugging():
  return config._flags["debug_nans"] or config._flags["debug_infs"] or h2d_guard is not None


# JAX's host-to-device transfer guard (``jax.transfer_guard``): the level in effect, None
# while transfers are allowed
# Computation follows data (JAX's committed arrays): once an array has been committed to a
# device (``device_put`` with a device: ``Array._placed`` calls ``enable_placement``), an
# eager primitive or a jit whose inputs include arrays committed to one device gives outputs
# committed to that device, and inputs committed to different devices are an error. Every
# array's data is on the host: the device is a tag, kept as JAX keeps it (``Array.sharding``,
# ``devices()``). Until then nothing is checked: ``enable_placement`` wraps every
# primitive's ``eager`` (which ``bind`` and the numpy layer's fast paths call), so programs
# that never place anything pay nothing.
placement = [False]
_placed_ids: dict = {}  # id -> weak reference of each array committed to one device


def mark_placed(a):
  """Record ``a`` (an Array whose ``_committed``/``_dev`` are set) as committed to a device."""
  i = id(a)
  _placed_ids[i] = weakref.ref(a, lambda _, i=i: _placed_ids.pop(i, None))


def placed_device(a):
  """``(True, device)`` for an array (or key array) committed to one device, else
  ``(False, None)``: a dict lookup, so cheap for the uncommitted."""
  a = a._base_array if type(a) is key_array_type else a
  r = _placed_ids.get(id(a))
  if r is None or r() is not a:
    return False, None
  return True, a._dev


def enable_placement():
  if not placement[0]:
    placement[0] = True
    for p in _all_primitives:
      place_eager(p)


def place_eager(prim):
  """Wrap ``prim.eager`` with ``placed_call`` (once; the registry rewraps a re-selected one)."""
  f = prim.eager
  if getattr(f, "_placed", False) or f == prim._eager_unset:
    return
  name = prim.name
  mine = prim.places_sharded or prim.call_primitive or prim.map_primitive

  def eager(*args, **params):
    if sharded_eager is not None and not mine and has_sharded(args):
      return sharded_eager(prim, args, params)
    return placed_call(name, f, args, params)
  eager._placed = True
  prim.eager = eager


def committed_device(name, args, arg_names=None):
  """``(committed, device)`` of ``args``' single-device committed arrays (key arrays: their
  data's), ``device`` None for the default one; JAX's ValueError when two differ."""
  found = None
  for i, a in enumerate(args):
    placed, dev = placed_device(a)
    if placed:
      if found is None:
        found = (i, a, dev)
      elif dev != found[2]:
        j, c, d = found
        ids = lambda dev: [0 if dev is None else dev.id]
        names = arg_names() if callable(arg_names) else arg_names
        nm = lambda k: names[k] if names and k < len(names) else f"args[{k}]"
        raise ValueError(
            "Received incompatible devices for jitted computation. Got argument "
            f"{nm(j)} of {name} with shape {get_aval(c).str_short(short_dtypes=False)} and with "
            f"device ids {ids(d)} on platform CPU and argument {nm(i)} of {name} with shape "
            f"{get_aval(a).str_short(short_dtypes=False)} and with device ids {ids(dev)} on "
            "platform CPU")
  return (False, None) if found is None else (True, found[2])


def commit_outputs(outs, device, args=()):
  """``outs`` (an array or a sequence of them) committed to ``device`` (None: the default
  one); an output that is one of ``args`` is rewrapped rather than retagged."""
  if isinstance(outs, (list, tuple)):
    return type(outs)([_commit(o, device, args) for o in outs])
  return _commit(outs, device, args)


def _commit(o, device, args):
  b = getattr(o, "_base_array", None)
  if b is not None:  # a key array: its data committed
    return type(o)(o._impl, _commit(b, device, args))
  if not hasattr(o, "_dev") or getattr(o, "_pmap", None) is not None:
    return o
  is_arg = any(o is a for a in args)
  if not is_arg and placed_device(o)[0]:  # placed by the primitive itself (device_put)
    return o
  if is_arg:
    return o._placed(device) if device is not None else o._placed()
  o._committed, o._dev = True, device
  mark_placed(o)
  return o


# Sharded operands (a NamedSharding's or XLA's placement over devices): an eager primitive
# runs as a jitted computation of its own, as JAX's eager ops do, so its result is placed as
# XLA's sharding propagation says (``spmd.sharded_eager``; making a sharded array turns
# placement on: ``spmd.sharded_arrays_exist``).
sharded_eager = None


def has_sharded(args):
  """Whether one of ``args`` is an array placed by a NamedSharding / GSPMDSharding."""
  for a in args:
    p = getattr(a, "_pmap", None)
    if p is not None and p[0]._spmd:
      return True
  return False


def follow(out, *args):
  """A numpy-layer eager fast path's ``out`` (one that calls no primitive), committed as
  ``placed_call`` would commit it (callers test ``placement[0]`` first); None when an
  argument is sharded: the caller takes its primitive path (``sharded_eager``)."""
  if sharded_eager is not None and has_sharded(args):
    return None
  committed, dev = committed_device("jit", args)
  return commit_outputs(out, dev, args) if committed else out


def placed_call(name, fn, args, params):
  """``fn(*args, **params)`` (an eager primitive) with computation following data."""
  committed, dev = committed_device(name, args)
  out = fn(*args, **params)
  return commit_outputs(out, dev, args) if committed else out


h2d_guard = None
# primitives whose eager implementation JAX runs as one jitted computation (JAX's
# ``random_seed``): under a transfer guard only their arguments are checked, not the
# constants their implementation binds
jitted_impls = {"random_seed"}


def host_to_device(x, explicit=False):
  """Check host value ``x`` (a NumPy array or scalar, a Python scalar) becoming an array of
  an eager operation (or of ``device_put``: ``explicit``) against the transfer guard, as
  JAX's: "disallow" refuses implicit transfers, "disallow_explicit" all; "log" and
  "log_explicit" log them (a WARNING of the "nbjax" logger). Staged values (constants of a
  traced function) are no transfers. Callers test ``h2d_guard is not None`` first."""
  level = h2d_guard
  if (level is None or _ctx.trace is not debug_trace
      or explicit and not level.endswith("_explicit")):
    return
  try:
    aval = get_aval(x if type(x) not in (list, tuple) else np.asarray(x))
  except (TypeError, ValueError):
    return  # (no JAX value: the operation's own error follows)
  from nbjax.array import _single_sharding
  msg = f"host-to-device transfer: aval={aval!r}, dst_sharding={_single_sharding()!r}"
  if level.startswith("log"):
    import logging
    logging.getLogger("nbjax").warning(msg)
  else:
    from nbjax import errors
    raise errors.JaxRuntimeError(f"INVALID_ARGUMENT: Disallowed {msg}")


eval_trace = EvalTrace()
# ``nbjax.prng.PRNGKeyArray`` and ``(prim, trace, args, params) -> out``: a primitive bound
# under a transformation on key arrays (``lax.slice(keys, ...)`` in jit) sees their key-dtype
# values and gives key arrays back (installed by ``nbjax.prng``)
key_array_type = key_bind = None
debug_trace = DebugNansTrace()
_ctx = _Ctx()


def _on_config(name, value):
  global h2d_guard
  if name == "transfer_guard_host_to_device":
    h2d_guard = None if value in (None, "allow") else value
  if name in ("debug_nans", "debug_infs", "transfer_guard_host_to_device"):
    # swap this thread's bottom trace
    if _debugging() and _ctx.trace is eval_trace:
      _ctx.trace = debug_trace
    elif not _debugging() and _ctx.trace is debug_trace:
      _ctx.trace = eval_trace


config.add_listener(_on_config)
_on_config("transfer_guard_host_to_device", config._flags["transfer_guard_host_to_device"])


def get_current_trace():
  return _ctx.trace


class _AxisEnv(threading.local):
  def __init__(self):
    self.env = ()


_axis_env = _AxisEnv()


def axis_env():
  """The named mapped axes bound now, outermost first: ``((name, size), ...)``."""
  return _axis_env.env


@contextmanager
def extend_axis_env(name, size):
  """Bind the named axis ``name`` of ``size`` members while a mapped function traces (vmap
  with ``axis_name``): collectives check their names and sizes against it. ``None``: no-op."""
  prev = _axis_env.env
  if name is not None:
    _axis_env.env = prev + ((name, size),)
  try:
    yield
  finally:
    _axis_env.env = prev


@contextmanager
def set_current_trace(trace):
  prev = _ctx.trace
  _ctx.trace = trace
  try:
    yield
  finally:
    _ctx.trace = prev


@contextmanager
def take_current_trace():
  prev = _ctx.trace
  _ctx.trace = eval_trace
  try:
    yield prev
  finally:
    _ctx.trace = prev


def is_eval():
  return _ctx.trace is eval_trace


class TraceTag:
  """Identity of one transformation instance (tracers of a trace carry it)."""
  __slots__ = ()


_trace_ids = itertools.count()


class Tracer:
  """A value being traced by ``_trace``. Operators are attached by ``nbjax.numpy``."""
  __array_priority__ = 1000
  __slots__ = ("_trace", "__weakref__")

  def __init__(self, trace, aval=None):  # JAX's signature, for subclasses outside nbjax
    self._trace = trace
    self._aval = aval

  @property
  def aval(self):  # (nbjax's tracers define their own)
    return getattr(self, "_aval", None)

  shape = property(lambda self: self.aval.shape)
  dtype = property(lambda self: self.aval.dtype)
  ndim = property(lambda self: len(self.aval.shape))
  size = property(lambda self: self.aval.size)
  weak_type = property(lambda self: self.aval.weak_type)

  def to_concrete_value(self):
    return None

  def full_lower(self):
    return self

  def __len__(self):
    if not self.aval.shape:
      raise TypeError("len() of unsized object")
    return self.aval.shape[0]

  def __iter__(self):
    if not self.aval.shape:
      raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.aval.shape[0]))

  # JAX's shape checks come before the concreteness ones (a concrete value raises the same)
  def __bool__(self):
    size = self.aval.size
    if size != 1:
      raise ValueError(BOOL_CONVERSION_EMPTY if size == 0 else BOOL_CONVERSION_MANY)
    return self.aval._bool(self)

  def __int__(self):
    if self.aval.shape:
      raise TypeError(SCALAR_CONVERSION.format(len(self.aval.shape)))
    return self.aval._int(self)

  def __float__(self):  # an error even when concrete (JAX's): it would drop the derivative
    if self.aval.shape:
      raise TypeError(SCALAR_CONVERSION.format(len(self.aval.shape)))
    raise ConcretizationTypeError(self, _FLOAT_CTX)

  def __complex__(self):
    if self.aval.shape:
      raise TypeError(SCALAR_CONVERSION.format(len(self.aval.shape)))
    raise ConcretizationTypeError(self, _COMPLEX_CTX)

  def __index__(self):
    if self.aval.shape or self.aval.dtype.kind not in "iu":
      raise TypeError(INDEX_CONVERSION)
    return self.aval._index(self)

  def _error_repr(self):
    if self.aval is None:
      return f"traced array with aval {self.aval}"
    return f"traced array with shape {self.aval.str_short(short_dtypes=False)}"

  def __copy__(self):  # as JAX's: a copy is the ``copy`` primitive's output
    return self.copy()

  def __deepcopy__(self, memo):
    return self.copy()

  @property
  def sharding(self):  # an Array's attribute: an AttributeError on tracers, as JAX's
    raise AttributeError(f"The 'sharding' attribute is not available on {self._error_repr()}. "
                         "To query sharding information on tracers, use `jax.typeof(x)`.")

  def _origin_msg(self):
    return ""

  def __array__(self, dtype=None, copy=None):
    raise TracerArrayConversionError(self)

  __hash__ = None  # unhashable (Python's TypeError), as JAX's tracers

  def __reduce__(self):
    raise ConcretizationTypeError(
        self, "The error occurred in the __reduce__ method, which may indicate an attempt "
        "to serialize/pickle a traced value.")

  def __setitem__(self, idx, val):
    raise TypeError(IMMUTABLE)

  def __repr__(self):
    return f"Traced<{self.aval}>with<{self._trace!r}>"

  def __str__(self):  # (not an Array's: that prints a value)
    return repr(self)


def concrete_or_error(force, val, context=""):
  """``val`` as a concrete value, or a ConcretizationTypeError explaining why not."""
  force = force or (lambda x: x)
  if isinstance(val, Tracer):
    c = val.to_concrete_value()
    if c is None:
      raise ConcretizationTypeError(val, context)
    return force(c)
  return force(val)


def concrete_aval_or_none(x):
  return x.to_concrete_value() if isinstance(x, Tracer) else x


def find_top_trace_tracer(xs):
  return next((x for x in xs if isinstance(x, Tracer)), None)


# --------------------------------------------------------------------- helpers


def check_leaked(tracers):
  for t in tracers:
    if isinstance(t, Tracer):
      raise escaped_tracer_error(t)


def new_trace_tag():
  return TraceTag()


def unzip2(pairs):
  xs, ys = [], []
  for x, y in pairs:
    xs.append(x)
    ys.append(y)
  return xs, ys


def safe_map(f, *args):
  n = len(args[0])
  for a in args[1:]:
    assert len(a) == n, f"length mismatch: {list(map(len, args))}"
  return list(map(f, *args))


def safe_zip(*args):
  n = len(args[0])
  for a in args[1:]:
    assert len(a) == n, f"length mismatch: {list(map(len, args))}"
  return list(zip(*args))


def split_list(xs, ns):
  xs = list(xs)
  out = []
  for n in ns:
    out.append(xs[:n])
    xs = xs[n:]
  out.append(xs)
  return out


def partition_list(bs, xs):
  a, b = [], []
  for t, x in zip(bs, xs):
    (b if t else a).append(x)
  return a, b


def merge_lists(bs, l0, l1):
  l0, l1 = iter(l0), iter(l1)
  return [next(l1) if b else next(l0) for b in bs]



# ---------------------------------------------------------------- jaxpr names (lazy)
# ``core.Jaxpr``, ``core.eval_jaxpr``... as in JAX; resolved on first use so that core never
# imports ``nbjax.jaxpr`` at module import (which imports core).
_JAXPR_NAMES = frozenset({"Var", "DropVar", "Literal", "JaxprEqn", "new_jaxpr_eqn", "Jaxpr",
                          "ClosedJaxpr", "JaxprType", "JaxprTypeError", "check_jaxpr",
                          "typecheck_jaxpr", "eval_jaxpr", "jaxpr_as_fun", "jaxprs_in_params",
                          "subjaxprs", "pp_jaxpr", "Atom"})


_STATE_NAMES = frozenset({"new_ref", "empty_ref", "free_ref", "freeze", "mutable_array_p",
                          "ref_p", "freeze_p", "empty_ref_p", "free_ref_p", "typeof"})


def __getattr__(name):
  if name in _JAXPR_NAMES:
    from nbjax import jaxpr
    return getattr(jaxpr, name)
  if name in _STATE_NAMES:  # JAX's ``core.new_ref``..., defined with their rules in nbjax.state
    from nbjax import state
    return getattr(state, name)
  raise AttributeError(f"module 'nbjax.core' has no attribute {name!r}")
