"""``nbjax.ffi``: JAX's ``jax.ffi``, calling foreign functions registered with XLA as
typed-FFI custom-call targets (C/C++ handlers from a shared library through ``pycapsule``,
or numba ``@cfunc`` handlers written with ``kernels.ffi``).

Pipeline position: ``ffi_call_p`` is a primitive like the lax ones, its rules here: the
lowering emits ``stablehlo.custom_call`` (api_version 4: keyword attributes go in the call's
backend config), eager evaluation runs it as a one-primitive XLA executable (the registry's
``xla`` backend), ``vmap`` follows ``vmap_method`` as ``pure_callback`` does, and it has no
derivative (JAX's error). Registration goes through ``nbjax.xla``.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.callback import (_axis_size, _batched_avals, _result_abstract_eval,
                            check_vmap_method, vectorized_operands)
from nbjax.core import Primitive
from nbjax.experimental.layout import Layout
from nbjax.interpreters import batching, lowering
from nbjax.interpreters.lowering import hlo, ir, mlir

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable"]


def register_ffi_target(name, fn, platform="cpu", api_version=1, **kwargs):
  """Registers a foreign function target.

  Args:
    name: the name of the target.
    fn: a ``PyCapsule`` holding the handler's function pointer (:func:`pycapsule`), or a
      ``dict`` from FFI stage names (``"execute"``, ...) to such capsules.
    platform: the target platform (``"cpu"``).
    api_version: 1 (default) for the typed FFI, 0 for the earlier custom-call API.
  """
  from nbjax import xla
  xla.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_target_as_batch_partitionable(name):
  """Registers an FFI target as batch partitionable: XLA's SPMD partitioner may then split
  its calls along their leading (batch) dimensions.

  Args:
    name: the name of the target.
  """
  from nbjax import xla
  xla.ensure_jaxlib().xc.register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr):
  """Wrap a ctypes function pointer (or an address) in a ``PyCapsule`` for
  :func:`register_ffi_target`."""
  from nbjax import xla
  return xla.pycapsule(funcptr if isinstance(funcptr, int) else
                       ctypes.cast(funcptr, ctypes.c_void_p).value)


def include_dir():
  """The folder of the XLA FFI headers bundled with jaxlib (``xla/ffi/api/ffi.h``)."""
  from nbjax import xla
  return os.path.join(os.path.dirname(xla.ensure_jaxlib()._jax.__file__), "include")


# ----------------------------------------------------------------------- the primitive

class _FfiEffect:
  def __repr__(self):
    return "FFI"
  __str__ = __repr__


FfiEffect = _FfiEffect()

ffi_call_p = Primitive("ffi_call")
ffi_call_p.multiple_results = True
ffi_call_p.effects = lambda params: (FfiEffect,) if params["has_side_effect"] else ()


def _layout(aval, layout=None):
  """A layout in XLA's minor-to-major order (default: row-major; a ``Layout``: its
  major-to-minor order reversed)."""
  n = len(aval.shape)
  if layout is None:
    return tuple(range(n - 1, -1, -1))
  if isinstance(layout, Layout):
    if layout.tiling is not None:
      raise ValueError("The FFI does not support layouts with tiling")
    layout = layout.major_to_minor[::-1]
  layout = tuple(layout)
  if sorted(layout) != list(range(n)):
    raise ValueError(f"The layout {layout} is not a permutation of the dimensions of an array "
                     f"of rank {n}")
  return layout


def _layouts(avals, layouts, what, whose):
  """The minor-to-major layouts of ``avals`` from the user's major-to-minor ``layouts``."""
  if layouts is None:
    return tuple(map(_layout, avals))
  if len(layouts) != len(avals):
    raise ValueError(f"The number of {what} ({len(avals)}) must equal the number of {whose} "
                     f"({len(layouts)}).")
  return tuple(_layout(a, l if l is None or isinstance(l, Layout) else tuple(l)[::-1])
               for a, l in zip(avals, layouts))


def _result_avals(results):
  avals = []
  for i, r in enumerate(results):
    if not hasattr(r, "shape") or not hasattr(r, "dtype"):
      raise ValueError("All elements of result_shape_dtypes must have 'shape' and 'dtype' "
                       f"attributes. Got {r} at position {i}.")
    avals.append(core.ShapedArray(tuple(r.shape), np.dtype(r.dtype)))
  return tuple(avals)


class _Attr:
  """A hashable keyword attribute (arrays and dicts by content), printed as JAX's
  ``HashableArray``/``FrozenDict``."""
  __slots__ = ("val", "_key")

  def __init__(self, val):
    self.val = val
    self._key = ((val.dtype.str, val.shape, val.tobytes()) if isinstance(val, np.ndarray)
                 else tuple(sorted(val.items())))

  def __hash__(self):
    return hash(self._key)

  def __eq__(self, other):
    return isinstance(other, _Attr) and self._key == other._key

  def __repr__(self):
    kind = "HashableArray" if isinstance(self.val, np.ndarray) else "FrozenDict"
    return f"{kind}({self.val!r})"


def _hashable_kwargs(kwargs):
  out = []
  for k, v in sorted(kwargs.items()):
    if isinstance(v, (np.ndarray, dict)):
      v = _Attr(v)
    else:
      try:
        hash(v)
      except TypeError as e:
        raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
    out.append((k, v))
  return tuple(out)


def ffi_call(target_name, result_shape_dtypes, *, has_side_effect=False, vmap_method=None,
             input_layouts=None, output_layouts=None, input_output_aliases=None,
             custom_call_api_version=4, legacy_backend_config=None):
  """Call a foreign function interface (FFI) target.

  Args:
    target_name: the name of a target registered with :func:`register_ffi_target`.
    result_shape_dtypes: an object with ``shape`` and ``dtype`` (a
      :class:`nbjax.ShapeDtypeStruct`), or a sequence of them, describing the results.
    has_side_effect: whether the call has side effects (then it is never removed as unused).
    vmap_method: how ``vmap`` batches the call: ``"sequential"`` (a loop of calls),
      ``"sequential_unrolled"``, ``"expand_dims"`` (unbatched inputs get a leading axis of
      size 1), ``"broadcast_all"`` (every input batched) or ``"legacy_vectorized"``; None:
      ``vmap`` raises.
    input_layouts, output_layouts: per argument/result, ``None`` (row-major) or the
      major-to-minor axis order the target expects.
    input_output_aliases: ``{input index: output index}`` of buffers the call may reuse.
    custom_call_api_version: 4 (the typed FFI) or an earlier custom-call API.
    legacy_backend_config: the backend config string of an api_version < 4 target.

  Returns:
    a function of the arrays to pass and of keyword attributes (Python or NumPy scalars,
    strings, arrays, dicts) for the handler, returning the result array(s).
  """
  check_vmap_method(vmap_method)
  multiple = isinstance(result_shape_dtypes, (list, tuple))
  result_avals = _result_avals(result_shape_dtypes if multiple else [result_shape_dtypes])
  out_layouts = output_layouts if multiple else (output_layouts,)
  if custom_call_api_version >= 4 and legacy_backend_config is not None:
    raise ValueError("The use of the legacy_backend_config parameter requires "
                     f"custom_call_api_version < 4; got {custom_call_api_version}.")

  def wrapped(*args, **kwargs):
    in_avals = [core.get_aval(x) for x in args]
    in_l = _layouts(in_avals, input_layouts, "input arguments", "input layouts")
    out_l = _layouts(result_avals, out_layouts, "outputs", "output layouts")
    aliases = []
    for i, o in sorted((input_output_aliases or {}).items()):
      i, o = int(i), int(o)
      if i >= len(args):
        raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with input "
                         f"index {i} outside the range [0, {len(args)}).")
      if o >= len(result_avals):
        raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with output "
                         f"index {o} outside the range [0, {len(result_avals)}).")
      a, r = in_avals[i], result_avals[o]
      if (a.shape, a.dtype) != (r.shape, r.dtype):
        raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring to "
                         f"an input with abstract value {a} and an output with a different "
                         f"abstract value {r}.")
      if in_l[i] != out_l[o]:
        raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' referring to "
                         f"an input with layout {in_l[i]} and an output with a different "
                         f"layout {out_l[o]}.")
      aliases.append((i, o))
    outs = ffi_call_p.bind(
        *args, result_avals=result_avals, vmap_method=vmap_method, target_name=target_name,
        has_side_effect=has_side_effect, input_layouts=in_l, output_layouts=out_l,
        input_output_aliases=tuple(aliases), custom_call_api_version=custom_call_api_version,
        legacy_backend_config=legacy_backend_config, attributes=_hashable_kwargs(kwargs))
    if multiple:
      return tuple(outs) if isinstance(result_shape_dtypes, tuple) else list(outs)
    return outs[0]
  return wrapped


def _no_derivative(*args, target_name, **_):
  raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                   "`jax.custom_jvp` or `jax.custom_jvp` to add support.")


def _batch(args, dims, *, result_avals, vmap_method, **params):
  size = _axis_size(args, dims)
  grow = lambda l: tuple(n + 1 for n in l) + (0,)  # (minor-to-major: the batch axis major)
  if vmap_method in ("sequential", "sequential_unrolled"):
    from nbjax import lax
    batched = [d is not None for d in dims]
    moved = [a if d is None else batching.moveaxis(a, d, 0) for a, d in zip(args, dims)]

    def one(_, xs):
      it = iter(xs)
      return (), ffi_call_p.bind(*(next(it) if b else a for a, b in zip(moved, batched)),
                                 result_avals=result_avals, vmap_method=vmap_method, **params)
    _, outs = lax.scan(one, (), [a for a, b in zip(moved, batched) if b],
                       unroll=vmap_method == "sequential_unrolled")
  elif vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
    params["output_layouts"] = tuple(map(grow, params["output_layouts"]))
    params["input_layouts"] = tuple(  # (legacy_vectorized leaves unbatched ones as they are)
        l if d is None and vmap_method == "legacy_vectorized" else grow(l)
        for l, d in zip(params["input_layouts"], dims))
    outs = ffi_call_p.bind(*vectorized_operands(args, dims, size, vmap_method),
                           result_avals=_batched_avals(size, result_avals),
                           vmap_method=vmap_method, **params)
  else:
    raise NotImplementedError(
        "vmap is only supported for the ffi_call primitive when vmap_method is one of "
        "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
        f"'legacy_vectorized'. Got {vmap_method=}.")
  return list(outs), [0] * len(result_avals)


def build_ffi_lowering_function(call_target_name, *, operand_layouts=None,
                                result_layouts=None, backend_config=None,
                                skip_ffi_layout_processing=False, **lowering_args):
  """``op(ctx, *operands, **attributes)``: the ``stablehlo.custom_call`` of
  ``call_target_name`` (row-major layouts by default; layouts minor-to-major, as XLA's;
  keyword attributes into the backend config). ``lowering_args``: ``api_version``
  (default 4), ``has_side_effect``, ``operand_output_aliases``, ``extra_attributes`` (more
  attributes of the op). As JAX's, a typed-FFI call's config dictionary is the op's
  ``mhlo.backend_config`` attribute (``backend_config`` the empty string, API version 1)."""
  api_version = lowering_args.get("api_version", 4)

  def op(ctx, *operands, **params):
    attrs = dict(call_target_name=ir.StringAttr.get(call_target_name),
                 has_side_effect=ir.BoolAttr.get(bool(lowering_args.get("has_side_effect"))),
                 api_version=mlir.i32_attr(api_version))
    if api_version >= 4:
      if backend_config is not None and not isinstance(backend_config, dict):
        raise ValueError("When api_version > 4, backend_config must be a dictionary.")
      cfg = dict(backend_config or {}, **{k: _ir_attribute(v) for k, v in params.items()})
      attrs["backend_config"] = ir.StringAttr.get("")
      attrs["api_version"] = mlir.i32_attr(1)
      attrs["mhlo.backend_config"] = ir.DictAttr.get(cfg)
    else:
      if params:
        raise ValueError("The use of ffi_call attributes requires a custom call API version "
                         f"of at least 4; got api_version={api_version}.")
      attrs["backend_config"] = ir.StringAttr.get(backend_config or "")
    if not skip_ffi_layout_processing:
      idx = lambda l: ir.DenseIntElementsAttr.get(np.asarray(l, np.int64),
                                                  type=ir.IndexType.get())
      # (as JAX's: None row-major, a Layout reversed, a sequence minor-to-major as is)
      conv = lambda a, l: tuple(l) if l is not None and not isinstance(l, Layout) else \
          _layout(a, l)
      ins = [conv(a, l) for a, l in zip(ctx.avals_in, operand_layouts or
                                        [None] * len(ctx.avals_in))]
      outs = [conv(a, l) for a, l in zip(ctx.avals_out, result_layouts or
                                         [None] * len(ctx.avals_out))]
      attrs["operand_layouts"] = ir.ArrayAttr.get([idx(l) for l in ins])
      attrs["result_layouts"] = ir.ArrayAttr.get([idx(l) for l in outs])
    aliases = lowering_args.get("operand_output_aliases") or {}
    if aliases:
      many = len(ctx.avals_out) > 1
      attrs["output_operand_aliases"] = ir.ArrayAttr.get([
          hlo.OutputOperandAlias.get(output_tuple_indices=[o] if many else [],
                                     operand_index=i, operand_tuple_indices=[])
          for i, o in sorted(aliases.items())])
    attrs["called_computations"] = ir.ArrayAttr.get([])
    attrs.update(lowering_args.get("extra_attributes") or {})
    return hlo.CustomCallOp.build_generic(results=mlir.aval_to_ir_types(ctx.avals_out),
                                          operands=list(operands), attributes=attrs)
  return op


def ffi_lowering(call_target_name, *, operand_layouts=None, result_layouts=None,
                 backend_config=None, skip_ffi_layout_processing=False, **lowering_args):
  """A lowering rule ``(ctx, *operands, **attributes) -> results`` calling the FFI target
  ``call_target_name`` (see :func:`build_ffi_lowering_function`)."""
  def rule(ctx, *operands, **params):
    op = build_ffi_lowering_function(
        call_target_name, operand_layouts=operand_layouts, result_layouts=result_layouts,
        backend_config=backend_config, skip_ffi_layout_processing=skip_ffi_layout_processing,
        **lowering_args)(ctx, *operands, **params)
    return list(op.results)
  return rule


def _ir_attribute(v):
  """A keyword attribute as an MLIR attribute (JAX's conversions: Python ints i64, floats
  f64, NumPy scalars their own type, arrays dense elements, dicts and sequences nested)."""
  if isinstance(v, _Attr):
    v = v.val
  if isinstance(v, ir.Attribute):
    return v
  if isinstance(v, bool) or isinstance(v, np.bool_):
    return ir.BoolAttr.get(bool(v))
  if isinstance(v, (str, bytes)):
    return ir.StringAttr.get(v)
  if isinstance(v, dict):
    return ir.DictAttr.get({k: _ir_attribute(x) for k, x in v.items()})
  if isinstance(v, (list, tuple)):
    return ir.ArrayAttr.get([_ir_attribute(x) for x in v])
  if isinstance(v, (int, float)) and not isinstance(v, np.generic):
    v = np.asarray(v, np.int64 if isinstance(v, int) else np.float64)[()]
  if isinstance(v, np.dtype):
    return ir.TypeAttr.get(mlir.dtype_to_ir_type(v))
  if isinstance(v, np.generic):
    t = mlir.dtype_to_ir_type(v.dtype)
    if isinstance(t, ir.IntegerType):
      return ir.IntegerAttr.get(t, int(v))
    if isinstance(t, ir.FloatType):
      return ir.FloatAttr.get(t, float(v))
    raise TypeError(f"Unsupported scalar attribute type: {type(v)}")
  if isinstance(v, np.ndarray):
    if v.dtype == dtypes.float0:  # (as JAX's: float0 zeros are boolean falses)
      v = np.zeros(v.shape, np.bool_)
    return ir.DenseElementsAttr.get(np.ascontiguousarray(v),
                                    type=mlir.dtype_to_ir_type(v.dtype), shape=v.shape)
  raise TypeError(f"No attribute handler defined for type: {type(v)}")


def _lowering(ctx, *operands, target_name, has_side_effect, input_layouts, output_layouts,
              input_output_aliases, custom_call_api_version, legacy_backend_config, attributes,
              **_):
  rule = ffi_lowering(target_name, has_side_effect=has_side_effect,
                      operand_layouts=input_layouts, result_layouts=output_layouts,
                      operand_output_aliases=dict(input_output_aliases),
                      api_version=custom_call_api_version, backend_config=legacy_backend_config)
  return rule(ctx, *operands, **dict(attributes))


registry.register(
    ffi_call_p, family="callback", abstract_eval=_result_abstract_eval, jvp=_no_derivative,
    transpose=_no_derivative, batch=_batch, policy=("xla", "xla", registry.LARGE),
    meta=dict(note="a foreign function (XLA FFI custom-call target): eager and jit run it "
                   "in an XLA executable"))
lowering.register(ffi_call_p, _lowering)


def _physical(in_avals, *args, input_layouts, result_avals, **params):
  """Under jit, key-array operands pass their data (row-major over its shape), as JAX's
  lowering passes their physical arrays."""
  from nbjax.lax.prng import physical_aval
  if any(isinstance(a.dtype, dtypes.ExtendedDType) for a in result_avals):
    raise NotImplementedError("ffi_call with key array results under jit")
  layouts = tuple(_layout(physical_aval(a)) if isinstance(a.dtype, dtypes.ExtendedDType) else l
                  for a, l in zip(in_avals, input_layouts))
  return ffi_call_p.bind(*args, input_layouts=layouts, result_avals=result_avals, **params)


ffi_call_p.physical_rule = _physical
