"""Smaller pieces of ``jax.lax``'s surface: type aliases and small classes
(``DotDimensionNumbers``, ``PrecisionLike``, ``RaggedDotDimensionNumbers``, ``Tolerance``,
``AccuracyMode``), shape helpers (``reduce_window_shape_tuple``, ``shape_as_value``),
``stage``, ``dce_sink``, ``composite``, tokens (``create_token``, ``after_all``) and the
collectives that are compositions of others (``pbroadcast``, ``pswapaxes``, ``pcast``).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from nbjax._tree_util import tree_map

__all__ = ["AccuracyMode", "DotDimensionNumbers", "PrecisionLike", "RaggedDotDimensionNumbers",
           "Tolerance", "after_all", "composite", "create_token", "dce_sink",
           "pbroadcast", "pcast", "pswapaxes", "reduce_window_shape_tuple", "shape_as_value",
           "stage"]

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]

PrecisionLike = Union[None, str, Any, tuple[str, str], tuple[Any, Any]]
"""A ``precision`` argument: None, a string, a ``lax.Precision``, a pair of them, or a
``lax.DotAlgorithmPreset``."""


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
  """Describes ragged, group, and dot dimensions for ragged dot general.

  Args:
    dot_dimension_numbers: a tuple of tuples of sequences of ints of the form
      ``((lhs_contracting_dims, rhs_contracting_dims), (lhs_batch_dims,
      rhs_batch_dims))``.
    lhs_ragged_dimensions: a sequence of ints indicating the 'lhs' ragged
      dimensions.
    rhs_group_dimensions: a sequence of ints indicating the 'rhs' group
      dimensions.
  """
  dot_dimension_numbers: DotDimensionNumbers
  lhs_ragged_dimensions: Sequence[int]
  rhs_group_dimensions: Sequence[int]

  def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
    object.__setattr__(self, "dot_dimension_numbers",
                       tuple(tuple(tuple(s) for s in t) for t in dot_dimension_numbers))
    object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
    object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


class Tolerance:
  """Specify the tolerances used for computing unary functions (their ``accuracy``
  argument).

  Maximum two tolerances can be specified: (atol and rtol) or (atol and ulps). The CPU
  kernels here have one implementation per function, so the value only documents intent.
  """

  def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
    if atol < 0.0 or rtol < 0.0 or ulps < 0.0:
      raise ValueError("Tolerances must be non-negative.")
    if atol == 0.0 and rtol == 0.0 and ulps == 0:
      raise ValueError("At least one of atol, rtol, or ulps must be set.")
    self.atol = atol
    self.rtol = rtol
    self.ulps = ulps


class AccuracyMode(enum.Enum):
  """The accuracy modes a unary function's ``accuracy`` argument may name."""
  HIGHEST = 1
  DEFAULT = 2


# ----------------------------------------------------------------------- shapes


def _dilate(shape, dilation):
  if not np.all(np.greater(dilation, 0)):
    raise TypeError(f"All dilations must be positive, got {dilation}.")
  dilation = (1,) * (len(shape) - len(dilation)) + tuple(dilation)
  return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
  """The output shape of a ``reduce_window`` over ``operand_shape``.

  Args:
    operand_shape: the operand's shape.
    window_dimensions: the window size per dimension.
    window_strides: the window stride per dimension.
    padding: ``(low, high)`` padding per dimension.
    base_dilation: optional dilation of the operand per dimension.
    window_dilation: optional dilation of the window per dimension.

  Returns:
    A tuple of ints: ``max(0, (padded - window) // stride + 1)`` per dimension.
  """
  if base_dilation is not None:
    operand_shape = _dilate(operand_shape, base_dilation)
  if window_dilation is not None:
    window_dimensions = _dilate(window_dimensions, window_dilation)
  padded = tuple(d + lo + hi for d, (lo, hi) in zip(operand_shape, padding))
  return tuple(max((d - w) // s + 1, 0)
               for d, w, s in zip(padded, window_dimensions, window_strides))


def shape_as_value(shape):
  """Converts a shape into an integer array value (int32 unless a dimension needs int64):
  a NumPy array for a non-empty shape, as JAX returns for a constant shape."""
  from nbjax.lax.elementwise import full
  dtype = np.dtype(np.int64) if any(d > np.iinfo(np.int32).max for d in shape) \
      else np.dtype(np.int32)
  if len(shape) == 0:
    return full((0,), np.array(0, dtype=dtype))
  return np.asarray(shape, dtype=dtype)


# ----------------------------------------------------------------------- misc


def stage(x, /):
  """Lifts a value into a trace.

  This operation is logically the identity function that lifts a value, such as a Python
  scalar or NumPy ndarray, into an array (a Python scalar becomes a weakly typed one).
  Tracers pass through unchanged.
  """
  from nbjax.array import Array
  from nbjax.core import Tracer
  if isinstance(x, (Array, Tracer)):
    return x
  if type(x) in (bool, int, float, complex):
    return Array(x, weak_type=True)
  from nbjax.core import get_aval
  get_aval(x)  # (a TypeError for a value that is not an array type)
  return Array(x)


def dce_sink(val, *, prevent_mlir_dce: bool = False):
  """Marks the leaves of ``val`` as used. Returns None.

  Staged, each leaf gets a ``dce_sink`` equation that dead-code elimination never removes,
  so the computation producing it is kept; with ``prevent_mlir_dce``, XLA keeps it too (a
  side-effecting ``dce_sink`` custom call).
  """
  tree_map(lambda x: dce_sink_p.bind(x, prevent_mlir_dce=prevent_mlir_dce), val)


class NoDCEEffect:
  """The effect of ``dce_sink``'s equations (JAX's): they are never removed."""
  __slots__ = ()
  ordered = shardable = False

  def __repr__(self):
    return "NoDCEEffect()"


no_dce_effect = NoDCEEffect()


def _dce_sink_eager(x, **_):
  from nbjax.core import get_aval
  get_aval(x)  # (JAX's TypeError for a value that is no array)
  return []


def _dce_sink_jvp(primals, tangents, **params):
  from nbjax.interpreters import ad
  dce_sink_p.bind(*primals, **params)
  if type(tangents[0]) is not ad.Zero:
    dce_sink_p.bind(*tangents, **params)
  return [], []


def _dce_sink_lowering(ctx, x, *, prevent_mlir_dce):
  if not prevent_mlir_dce:
    return []
  from nbjax.ffi import ffi_lowering
  return ffi_lowering("dce_sink", has_side_effect=True)(ctx, x)


def _register_dce_sink():
  from nbjax import registry
  from nbjax.core import Primitive
  p = Primitive("dce_sink")
  p.multiple_results = True
  p.effects = (no_dce_effect,)
  p.make_eager = lambda *_: _dce_sink_eager
  registry.register(p, family="other", impls={"python": _dce_sink_eager},
                    abstract_eval=lambda x, **_: [], jvp=_dce_sink_jvp,
                    transpose=lambda cts, x, **_: [None],
                    batch=lambda vals, dims, **_: ([], []),  # (JAX's: dropped under vmap)
                    meta=dict(linear=True, note="no outputs: an equation DCE keeps"))
  p.lowerings["cpu"] = _dce_sink_lowering
  return p


dce_sink_p = _register_dce_sink()


def composite(decomposition, name: str, version: int = 0):
  """Composite with semantics defined by the decomposition function.

  A composite is a higher-order operation that bundles ``decomposition`` under a ``name``
  (and ``version``) so that a compiler may substitute its own implementation. Calling the
  returned function stages ``decomposition`` to a jaxpr and binds the ``composite``
  primitive with it (keyword arguments are static ``attributes``): evaluated, the jaxpr runs;
  ``make_jaxpr`` shows one ``composite`` equation; ``jit`` lowers it to a
  ``stablehlo.composite`` whose decomposition XLA compiles. As JAX's, it has no derivative or
  batching rule (wrap it in ``custom_jvp`` for derivatives).

  Args:
    decomposition: function that implements the semantics of the composite.
    name: name of the composite.
    version: optional int indicating the version of the composite.

  Returns:
    A callable with the decomposition's signature.
  """
  @functools.wraps(decomposition)
  def _decorator(*args, **kwargs):
    from nbjax import core
    from nbjax._tree_util import tree_flatten, tree_unflatten
    from nbjax.interpreters import partial_eval as pe
    from nbjax.jaxpr import ClosedJaxpr
    flat, in_tree = tree_flatten(args)
    avals = [core.get_aval(x) for x in flat]
    if any(isinstance(v, core.Tracer) for v in kwargs.values()):
      raise core.UnexpectedTracerError(
          "Found a JAX Tracer as an attribute in the decomposition for the composite op "
          f"'{name}'. This means that the decomposition function closes over a value that is "
          "involved in a JAX transformation. Any values that aren't explicitly known at "
          "compile time must be explicitly passed as arguments to the composite.\n\nNote: If "
          "you are passing jax arrays as attributes, use numpy arrays instead.")
    box = []

    def flat_fun(*xs):
      out, out_tree = tree_flatten(decomposition(*tree_unflatten(in_tree, xs), **kwargs))
      box.append(out_tree)
      return out
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, avals, fun_name=name)
    if any(isinstance(c, core.Tracer) for c in consts):
      raise core.UnexpectedTracerError(
          f"Found a JAX Tracer as a constant in the decomposition for the composite op "
          f"'{name}'. This means that the decomposition function closes over a value that is "
          "involved in a JAX transformation. Any values that aren't explicitly known at "
          "compile time must be explicitly passed as arguments to the composite.")
    attributes = []
    for k, v in kwargs.items():
      leaves, treedef = tree_flatten(v)
      attributes.append((k, tuple(_Hashable(x) if isinstance(x, np.ndarray) else x
                                  for x in leaves), treedef))
    out = composite_p.bind(*consts, *flat, name=name, attributes=tuple(attributes),
                           version=version,
                           jaxpr=ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []))
    return tree_unflatten(box[0], out)
  return _decorator


class _Hashable:
  """A NumPy array attribute, hashable by identity (as JAX's ``HashableArray``)."""
  __slots__ = ("val",)

  def __init__(self, val):
    self.val = val

  def __repr__(self):
    return f"HashableArray({self.val!r})"


def _composite_impl(*args, jaxpr, **_):
  from nbjax.array import owned
  from nbjax.jaxpr import eval_jaxpr
  return [owned(o) for o in eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)]


def _composite_jvp(*_, **__):
  raise ValueError("JVP rule for composite not implemented. You can use `jax.custom_jvp` to "
                   "add support. See "
                   "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")


def _composite_transpose(*_, **__):
  raise ValueError("Transpose rule for composite not implemented. You can use"
                   "`jax.custom_jvp` or `jax.custom_vjp` to add support. See "
                   "https://docs.jax.dev/en/latest/_autosummary/jax.custom_jvp.html")


def _composite_batch(*_, **__):
  raise NotImplementedError("Batching rule for 'composite' not implemented")


def _composite_attr(v):
  from nbjax.interpreters.mlir import ir
  if isinstance(v, _Hashable):
    v = v.val
  if isinstance(v, (bool, np.bool_)):
    return ir.BoolAttr.get(bool(v))
  if isinstance(v, (int, np.integer)):
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))
  if isinstance(v, (float, np.floating)):
    return ir.FloatAttr.get(ir.F64Type.get(), float(v))
  if isinstance(v, str):
    return ir.StringAttr.get(v)
  if isinstance(v, np.ndarray):
    return ir.DenseElementsAttr.get(np.ascontiguousarray(v))
  if isinstance(v, np.dtype):
    from nbjax.interpreters.mlir import dtype_to_ir_type
    return ir.TypeAttr.get(dtype_to_ir_type(v))
  if isinstance(v, (tuple, list)):
    return ir.ArrayAttr.get([_composite_attr(x) for x in v])
  raise TypeError(f"composite attribute of type {type(v).__name__} cannot be lowered: {v!r}")


def _composite_lowering(ctx, *args, name, attributes, version, jaxpr):
  """A ``stablehlo.composite`` whose decomposition is ``jaxpr`` as a private function."""
  from nbjax.interpreters import mlir
  sym = mlir.lower_jaxpr_to_fun(ctx.module_context, name, jaxpr)
  attrs = {k: _composite_attr(treedef.unflatten(leaves)) for k, leaves, treedef in attributes
           if treedef.unflatten(leaves) is not None}
  op = mlir.hlo.CompositeOp(
      mlir.aval_to_ir_types(ctx.avals_out), list(args), name=mlir.ir.StringAttr.get(name),
      decomposition=mlir.ir.FlatSymbolRefAttr.get(sym),
      composite_attributes=mlir.ir.DictAttr.get(attrs),
      version=mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_signless(32), version))
  return list(op.results)


def _register_composite():
  from nbjax import registry
  from nbjax.core import Primitive
  p = Primitive("composite")
  p.multiple_results = True
  p.pp_name_first = False  # (its params print sorted, name among them, as JAX's)
  p.make_eager = lambda prim, f_small, f_large, thr: _composite_impl
  registry.register(p, family="call", impls={"python": _composite_impl},
                    abstract_eval=lambda *_, jaxpr, **__: list(jaxpr.out_avals),
                    jvp=_composite_jvp, batch=_composite_batch,
                    transpose=_composite_transpose,
                    meta=dict(differentiable=False, note="call primitive: its decomposition "
                              "runs; no jvp or batching rule, as JAX's"))
  p.lowerings["cpu"] = _composite_lowering
  return p


composite_p = _register_composite()


def create_token(_=None):
  """Creates an XLA token value with no preconditions for sequencing effects.

  Experimental.

  The argument is ignored. It exists for backward compatibility.
  """
  return create_token_p.bind()


def after_all(*operands):
  """Merges one or more XLA token values. Experimental.

  Wraps the XLA after all operator."""
  return after_all_p.bind(*operands)


def _new_token(*operands):
  from nbjax.array import Array
  from nbjax.core import Token
  if any(type(x) is not Token for x in operands):
    raise TypeError("Arguments to after_all must be tokens")
  return Token(Array(np.zeros(0, np.bool_)))


def _after_all_abstract_eval(*avals):
  from nbjax.core import abstract_token
  if any(a is not abstract_token for a in avals):
    raise TypeError("Arguments to after_all must be tokens")
  return abstract_token


def _register_tokens():
  from nbjax import registry
  from nbjax.core import Primitive, abstract_token
  from nbjax.interpreters.lowering import hlo
  ps = []
  for name, aeval, lower in (
      ("create_token", lambda: abstract_token, lambda ctx: [hlo.create_token()]),
      ("after_all", _after_all_abstract_eval, lambda ctx, *ts: [hlo.after_all(list(ts))])):
    p = Primitive(name)
    p.make_eager = lambda *_: _new_token
    registry.register(p, family="other", impls={"python": _new_token}, abstract_eval=aeval,
                      meta=dict(differentiable=False, note="tokens (no data): no jvp, "
                                "transpose or batching rule, as JAX's"))
    p.lowerings["cpu"] = lower
    ps.append(p)
  return ps


create_token_p, after_all_p = _register_tokens()


# ----------------------------------------------------------------------- collectives

_ALLOWED_PCAST_TO = {"unreduced", "reduced", "varying"}


def pcast(x, axis_name, *, to: str):
  """Casts ``x``'s type along the named axes ``axis_name`` to ``to`` (one of 'varying',
  'reduced', 'unreduced').

  Values do not change: this framework does not track which named axes a value varies
  over, so after checking its arguments the cast returns ``x`` itself.
  """
  if isinstance(axis_name, (set, frozenset)):
    raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
  if not axis_name:
    return x
  if to not in _ALLOWED_PCAST_TO:
    raise ValueError("Got unexpected `to` value. Allowed `to` values are:"
                     f" {_ALLOWED_PCAST_TO}")
  return x


def pbroadcast(x, axis_name, source):
  """Perform a collective broadcast and replicate from ``source``.

  This is equivalent to::

    def pbroadcast(x, axis_name, source):
      masked = jnp.where(axis_index(axis_name) == source, x, zeros_like(x))
      return psum(masked, axis_name)

  If ``x`` is a pytree then the result is equivalent to mapping this function to
  each leaf in the tree.

  Args:
    x: array(s) with a mapped axis named ``axis_name``.
    axis_name: hashable Python object used to name a pmapped axis.
    source: int, representing which index into ``axis_name`` that should be copied.

  Returns:
    Array(s) with ``x`` being copied from the ``source`` index slice of ``axis_name``.
  """
  from nbjax.lax import elementwise as ew, parallel

  def leaf(v):
    here = ew.eq(parallel.axis_index(axis_name), np.int32(source))
    out = parallel.psum(ew.select(_bcast_pred(here, v), v, ew.full_like(v, 0)), axis_name)
    return out if out.dtype == v.dtype else ew.convert_element_type(out, v.dtype)
  return tree_map(leaf, x)


def _bcast_pred(pred, v):
  from nbjax.lax import shape as sh
  from nbjax.core import get_aval
  shape = get_aval(v).shape
  return sh.broadcast_in_dim(pred, shape, ()) if shape else pred


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
  """Swap the pmapped axis ``axis_name`` with the unmapped axis ``axis``.

  If ``x`` is a pytree then the result is equivalent to mapping this function to
  each leaf in the tree.

  The mapped axis size must be equal to the size of the unmapped axis; that is, we must
  have ``lax.psum(1, axis_name, axis_index_groups=axis_index_groups) == x.shape[axis]``.
  The mapped axis in the input is placed at the position ``axis`` in the output. That is,
  it is equivalent to ``all_to_all(x, axis_name, axis, axis)``.

  Args:
    x: array(s) with a mapped axis named ``axis_name``.
    axis_name: hashable Python object used to name a pmapped axis.
    axis: int indicating the unmapped axis of ``x`` to map with the name ``axis_name``.
    axis_index_groups: optional list of lists containing axis indices.

  Returns:
    Array(s) with the same shape as ``x``.
  """
  from nbjax.lax import parallel
  return parallel.all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
