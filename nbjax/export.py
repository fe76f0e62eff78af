"""``nbjax.export``: JAX's ``jax.export``. A jit function lowered to StableHLO for given
argument shapes (``export(jit(f))(*specs)``: an ``Exported``), serialized to bytes (the
module as a versioned StableHLO portable artifact, with its calling convention: argument and
result pytrees, avals, platforms, and optionally its VJPs), and called again, eagerly, under
``jit`` or ``grad``, possibly in another process (``deserialize(blob).call(*args)``).

Pipeline position: above ``interpreters/pjit.py`` (``jit(f).trace(*specs)`` gives the jaxpr,
``interpreters/mlir.py`` the module). ``call_exported_p`` is the primitive an ``Exported``'s
``call`` binds (inside a ``custom_vjp`` whose backward pass calls the exported VJP): its eager
rule compiles the module (``xla.compile``), its lowering inlines the module's functions into
the caller's module. The module is always the CPU lowering (nbjax lowers for the CPU; other
``platforms`` are recorded, and calling such an export on the CPU raises JAX's error). Not
supported: symbolic shapes, shardings over several devices, effects, host callbacks.
"""
from __future__ import annotations

import base64
import collections
import dataclasses
import json
import re
import struct
import types

import numpy as np

from nbjax import core, dtypes, registry, _tree_util as tree_util

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "call", "call_exported",
           "default_export_platform", "deserialize", "export", "is_symbolic_dim",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_shape"]

minimum_supported_calling_convention_version = 9
maximum_supported_calling_convention_version = 10
_CALLING_CONVENTION = 10  # JAX 0.10's default (jax_export_calling_convention_version)


def _unsupported(what):
  raise NotImplementedError(f"jax.export.{what} is not implemented by nbjax (no symbolic "
                            "shapes)")


class DisabledSafetyCheck:
  """A safety check to skip on (de)serialization (JAX's; recorded in the ``Exported``)."""

  @classmethod
  def platform(cls):
    """Allows the compilation platform to differ from the export platform."""
    return DisabledSafetyCheck("platform")

  @classmethod
  def custom_call(cls, target_name):
    """Allows the serialization of a call target not known to be stable."""
    return DisabledSafetyCheck(f"custom_call:{target_name}")

  def is_custom_call(self):
    """The custom call target this directive allows, or None."""
    m = re.match(r"custom_call:(.+)$", self._impl)
    return m.group(1) if m else None

  def __init__(self, _impl):
    self._impl = _impl

  def __str__(self):
    return self._impl
  __repr__ = __str__

  def __eq__(self, other):
    return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

  def __hash__(self):
    return hash(self._impl)


class SymbolicScope:
  def __init__(self, *args, **kwargs):
    _unsupported("SymbolicScope")


def default_export_platform():
  """The default export platform: ``'cpu'``."""
  return "cpu"


default_lowering_platform = default_export_platform


@dataclasses.dataclass(frozen=True)
class Exported:
  """A JAX function lowered to StableHLO, with its calling convention (JAX's fields).

  Attributes:
    fun_name: the exported function's name, for error messages.
    in_tree: the pytree of ``(args, kwargs)`` it was exported for; ``in_avals`` its leaves.
    out_tree, out_avals: the results' pytree and flat avals.
    nr_devices: devices the module was lowered for (1).
    platforms: the platforms it was exported for.
    mlir_module_serialized: the module as a StableHLO portable artifact.
    calling_convention_version: the module's calling-convention version.
    module_kept_var_idx: the indices of ``in_avals`` the module takes (all of them).
  """
  fun_name: str
  in_tree: tree_util.PyTreeDef
  in_avals: tuple
  out_tree: tree_util.PyTreeDef
  out_avals: tuple
  _has_named_shardings: bool
  _in_named_shardings: tuple
  _out_named_shardings: tuple
  in_shardings_hlo: tuple
  out_shardings_hlo: tuple
  nr_devices: int
  platforms: tuple
  ordered_effects: tuple
  unordered_effects: tuple
  disabled_safety_checks: tuple
  mlir_module_serialized: bytes
  calling_convention_version: int
  module_kept_var_idx: tuple
  uses_global_constants: bool
  _get_vjp: object

  def mlir_module(self, serialized=True):
    """The module's text (``serialized=False``: the ``ir.Module``)."""
    from nbjax import xla
    with xla.mlir_context() as ctx:
      m = _stablehlo().deserialize_portable_artifact(ctx, self.mlir_module_serialized)
      return str(m) if serialized else m

  def __str__(self):
    return f"Exported(fun_name={self.fun_name}, ...)"

  def in_shardings_jax(self, mesh):
    """The inputs' shardings (``None``: unspecified, as every input of an nbjax export)."""
    return tuple(self._in_named_shardings)

  def out_shardings_jax(self, mesh):
    """The results' shardings (``None``: unspecified)."""
    return tuple(self._out_named_shardings)

  def has_vjp(self):
    """Whether this Exported supports VJP."""
    return self._get_vjp is not None

  def vjp(self):
    """The exported VJP: it takes the primal arguments (flat) and a cotangent per result,
    and returns the cotangents of the flat primal arguments."""
    if self._get_vjp is None:
      raise ValueError("No VJP is available")
    return self._get_vjp(self)

  def serialize(self, vjp_order=0):
    """The Exported as bytes, with ``vjp_order`` orders of its VJP (so that ``grad`` of the
    deserialized function works to that order)."""
    return bytearray(_serialize(self, vjp_order))

  def call(self, *args, **kwargs):
    """Call the exported function (eagerly or from a traced program) with arguments of the
    pytree structure, shapes and dtypes it was exported for; reverse-mode AD through it
    uses its exported VJP."""
    f = self.__dict__.get("_call")
    if f is None:  # (built once: its custom_vjp is reused by every call)
      f = call_exported(self)
      object.__setattr__(self, "_call", f)
    return f(*args, **kwargs)


def _stablehlo():
  from nbjax import xla
  return xla.get_hlo()


# ----------------------------------------------------------------------- exporting

def export(fun_jit, *, platforms=None, disabled_checks=()):
  """Exports a ``jit`` function for persistent serialization.

  Args:
    fun_jit: the function to export: the result of :func:`nbjax.jit`.
    platforms: the platforms to export for (default: ``('cpu',)``); the module is nbjax's
      CPU lowering whatever is named, and the ``Exported`` can be called on the CPU only when
      ``'cpu'`` is among them.
    disabled_checks: :class:`DisabledSafetyCheck` s, recorded.

  Returns:
    a function of ``args`` and ``kwargs`` (arrays, or anything with ``shape`` and ``dtype``
    such as :class:`nbjax.ShapeDtypeStruct`) that returns an :class:`Exported`.
  """
  from nbjax.interpreters.pjit import JitWrapped
  if not isinstance(fun_jit, JitWrapped):
    raise ValueError(f"Function to be exported must be the result of `jit` but is: {fun_jit}")

  def do_export(*args_specs, **kwargs_specs):
    plats = tuple(platforms) if platforms is not None else (default_export_platform(),)
    traced = fun_jit.trace(*args_specs, **kwargs_specs)
    return _export_traced(traced._entry, plats, tuple(disabled_checks))
  return do_export


def _export_traced(entry, platforms, disabled_checks):
  from nbjax.interpreters import mlir
  from nbjax.interpreters.pjit import _has_pmap
  closed = entry.closed
  if _has_pmap(closed.jaxpr):
    raise NotImplementedError("nbjax.export: functions that call pmap cannot be exported")
  if mlir.has_effects(closed):
    raise NotImplementedError("nbjax.export: functions with effects (callbacks, debug "
                              "printing) cannot be exported")
  cbs = []
  module = mlir.lower_jaxpr_to_module(closed, f"jit_{entry.name}", host_callbacks=cbs)
  if cbs:
    raise NotImplementedError("serialization of host_callbacks is not yet implemented")
  with module.context:
    st = _stablehlo()
    target = st.get_version_from_compatibility_requirement(
        st.StablehloCompatibilityRequirement.WEEK_4)
    blob = st.serialize_portable_artifact(module, target)
  n_in, n_out = len(closed.in_avals), len(closed.out_avals)
  return Exported(
      fun_name=entry.name, in_tree=entry.in_tree, in_avals=tuple(closed.in_avals),
      out_tree=entry.out_tree, out_avals=tuple(closed.out_avals),
      _has_named_shardings=True, _in_named_shardings=(None,) * n_in,
      _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
      out_shardings_hlo=(None,) * n_out, nr_devices=1, platforms=platforms,
      ordered_effects=(), unordered_effects=(), disabled_safety_checks=disabled_checks,
      mlir_module_serialized=blob, calling_convention_version=_CALLING_CONVENTION,
      module_kept_var_idx=tuple(range(n_in)), uses_global_constants=False,
      _get_vjp=_vjp_getter(closed))


def _vjp_getter(closed):
  """``exp -> the Exported VJP of exp``: primal arguments and result cotangents in, the
  arguments' cotangents out (exported lazily, while the jaxpr is at hand)."""
  def get_vjp(exp):
    from nbjax import api
    from nbjax.interpreters.pjit import jit
    from nbjax.jaxpr import jaxpr_as_fun
    fun, n = jaxpr_as_fun(closed), len(exp.in_avals)

    def fun_vjp_jax(*args_and_out_cts_flat_jax):
      args, cts = args_and_out_cts_flat_jax[:n], args_and_out_cts_flat_jax[n:]
      _, pullback = api.vjp(fun, *args)
      return pullback(list(cts))
    specs = [core.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in
             (*exp.in_avals, *(a.to_tangent_aval() for a in exp.out_avals))]
    return export(jit(fun_vjp_jax), platforms=exp.platforms,
                  disabled_checks=exp.disabled_safety_checks)(*specs)
  return get_vjp


# ----------------------------------------------------------------------- calling

def _args_kwargs_path(path):
  """JAX's name of a place in the ``(args, kwargs)`` tuple: ``args[0]``, ``kwargs['x']``."""
  return ("args", "kwargs")[path[0].idx] + tree_util.keystr(tuple(path[1:]))


def call(exported):
  """``exported`` as a function of arguments of the pytree it was exported for."""
  if not isinstance(exported, Exported):
    raise ValueError(f"The exported argument must be an export.Exported. Found {exported}.")
  from nbjax.custom_derivatives import custom_vjp

  @custom_vjp
  def f_flat(*args_flat):
    return call_exported_p.bind(*args_flat, exported=exported)

  def f_flat_vjp_fwd(*args_flat):
    return f_flat(*args_flat), args_flat

  def f_flat_vjp_bwd(residual, ct_res_flat):
    from nbjax import lax
    exp_vjp = exported.vjp()
    cts = [ct if a.dtype != dtypes.float0 else lax.full(a.shape, np.zeros((), a.dtype))
           for ct, a in zip(ct_res_flat, exp_vjp.in_avals[len(residual):])]
    return tuple(call_exported(exp_vjp)(*residual, *cts))
  f_flat.defvjp(f_flat_vjp_fwd, f_flat_vjp_bwd)

  def f_imported(*args, **kwargs):
    args_flat, in_tree = tree_util.tree_flatten((args, kwargs))
    if in_tree != exported.in_tree:
      raise ValueError(
          "The invocation args and kwargs must have the same pytree structure as when the "
          f"function '{exported.fun_name}' was exported, but they have the following "
          "structural differences:\n" + "\n".join(
              f"   - {_args_kwargs_path(path)} is a {thing1} in the invocation and a "
              f"{thing2} when exported, so {why}.\n"
              for path, thing1, thing2, why in tree_util.tree_diffs(in_tree,
                                                                     exported.in_tree)))
    return exported.out_tree.unflatten(f_flat(*args_flat))
  return f_imported


call_exported = call

call_exported_p = core.Primitive("call_exported")
call_exported_p.multiple_results = True


def _arg_str(exported, i, dim=None):
  leaves = tree_util.tree_flatten_with_path(
      exported.in_tree.unflatten(range(exported.in_tree.num_leaves)))[0]
  s = _args_kwargs_path(leaves[i][0])
  return s if dim is None else f"{s}.shape[{dim}]"


def _check_platform(exported):
  if "cpu" not in exported.platforms:
    raise ValueError(f"Function '{exported.fun_name}' was exported for platforms "
                     f"'{exported.platforms}' but it is used on '('cpu',)'.")


def _call_exported_abstract_eval(*in_avals, exported):
  for i, (want, got) in enumerate(zip(exported.in_avals, in_avals)):
    if len(want.shape) != len(got.shape):
      raise ValueError(f"Rank mismatch for {_arg_str(exported, i)}: expected {want.shape} "
                       f"and called with {got.shape}")
    if want.dtype != got.dtype:
      raise ValueError(f"Dtype mismatch for {_arg_str(exported, i)}: expected {want.dtype} "
                       f"and called with {got.dtype}")
    for d, (w, g) in enumerate(zip(want.shape, got.shape)):
      if w != g:
        raise ValueError(f"Shape mismatch for {_arg_str(exported, i, d)} (expected same "
                         f"constant): expected {want.shape} and called with {got.shape}")
  return list(exported.out_avals)


def _ensure_targets(text):
  """The FFI handlers of nbjax's kernels that the module calls, registered in this process
  (the module may come from another one)."""
  if "custom_call @nbjax_" in text:
    from nbjax.lax import linalg
    linalg.ensure_ffi_targets(text)


def _call_exported_lowering(ctx, *args, exported):
  """The module's functions copied into the caller's module (renamed, private), and a call
  of its ``main`` (eagerly too: the registry's ``xla`` backend compiles this lowering alone,
  once per signature)."""
  from nbjax.interpreters.mlir import aval_to_ir_types
  from nbjax.xla import get_func, get_ir
  ir, func = get_ir(), get_func()
  _check_platform(exported)
  mctx = ctx.module_context
  sub = _stablehlo().deserialize_portable_artifact(mctx.context, exported.mlir_module_serialized)
  _ensure_targets(str(sub))
  ops = list(sub.body.operations)
  names = [ir.StringAttr(op.attributes["sym_name"]).value for op in ops]
  new = [mctx.unique_name(f"{exported.fun_name}_{n}") for n in names]
  for k, (op, old) in enumerate(zip(ops, names)):  # (via temporary names: no clashes)
    ir.SymbolTable.replace_all_symbol_uses(old, f"__nbjax_export_{k}", sub.operation)
    ir.SymbolTable.set_symbol_name(op, f"__nbjax_export_{k}")
  for k, (op, name) in enumerate(zip(ops, new)):
    ir.SymbolTable.replace_all_symbol_uses(f"__nbjax_export_{k}", name, sub.operation)
    ir.SymbolTable.set_symbol_name(op, name)
    op.attributes["sym_visibility"] = ir.StringAttr.get("private")
  for op in ops:
    mctx.body.append(op.detach_from_parent())
  main = new[names.index("main")]
  c = func.CallOp(aval_to_ir_types(ctx.avals_out), ir.FlatSymbolRefAttr.get(main), list(args))
  return list(c.results)


registry.register(
    call_exported_p, family="call", abstract_eval=_call_exported_abstract_eval,
    policy=("xla", "xla", registry.LARGE),
    meta=dict(differentiable=False, note="call primitive: an exported module compiled by XLA "
              "(nbjax.export); differentiated by the custom_vjp around it (the exported VJP)"))
call_exported_p.lowerings["cpu"] = _call_exported_lowering


# ----------------------------------------------------------------------- serialization

_MAGIC = b"nbjax.export\x00"
_FORMAT = 1
serialization_registry: dict = {}    # node type -> (serialized name, serialize_auxdata)
deserialization_registry: dict = {}  # serialized name -> (type, deserialize_auxdata, from_children)


def _is_namedtuple(t):
  return (issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), (tuple, list))
          and all(isinstance(f, str) for f in t._fields))


def register_pytree_node_serialization(nodetype, *, serialized_name, serialize_auxdata,
                                       deserialize_auxdata, from_children=None):
  """Registers a custom pytree node type for serialization in an ``Exported``'s trees
  (after :func:`nbjax.tree_util.register_pytree_node`, unless ``from_children`` is given).

  Args:
    nodetype: the type.
    serialized_name: the name the serialization stores for it.
    serialize_auxdata: ``aux_data -> bytes``.
    deserialize_auxdata: ``bytes -> aux_data``.
    from_children: ``(aux_data, children) -> node`` (default: the registered unflatten).

  Returns:
    ``nodetype`` (so that this can decorate a class).
  """
  if nodetype in serialization_registry:
    raise ValueError(
        f"Duplicate serialization registration for type `{nodetype}`. Previous registration "
        f"was with serialized_name `{serialization_registry[nodetype][0]}`.")
  if serialized_name in deserialization_registry:
    raise ValueError(
        f"Duplicate serialization registration for serialized_name `{serialized_name}`. "
        f"Previous registration was for type `{deserialization_registry[serialized_name][0]}`.")
  if from_children is None:
    node = tree_util._registry.get(nodetype)
    if node is None:
      raise ValueError("If `from_children` is not present, you must call first"
                       f"`jax.tree_util.register_pytree_node` for `{nodetype}`")
    from_children = node.unflatten
  serialization_registry[nodetype] = (serialized_name, serialize_auxdata)
  deserialization_registry[serialized_name] = (nodetype, deserialize_auxdata, from_children)
  return nodetype


def register_namedtuple_serialization(nodetype, *, serialized_name):
  """Registers a ``collections.namedtuple`` type for serialization (its field names are
  stored; on deserialization the type must have the same fields).

  Returns:
    ``nodetype``.
  """
  if not _is_namedtuple(nodetype):
    raise ValueError("Use `jax.export.register_pytree_node_serialization` for types other "
                     "than `collections.namedtuple`.")

  def from_children(aux_data, children):
    return nodetype(**dict(zip(aux_data, children)))
  return register_pytree_node_serialization(
      nodetype, serialized_name=serialized_name,
      serialize_auxdata=lambda _: json.dumps(nodetype._fields).encode("utf-8"),
      deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")),
      from_children=from_children)


def _ordereddict_keys(keys):
  if all(isinstance(k, str) for k in keys):
    return json.dumps(list(keys)).encode("utf-8")
  raise NotImplementedError("Serialization of collections.OrderedDict is supported only when "
                            f"the keys are strings. Found keys: {keys}.")


register_pytree_node_serialization(
    collections.OrderedDict, serialized_name="collections.OrderedDict",
    serialize_auxdata=_ordereddict_keys,
    deserialize_auxdata=lambda b: json.loads(b.decode("utf-8")))


def _tree_json(t):
  """A treedef as JSON: ``None`` for a leaf, else ``[kind, kids, ...]``."""
  nd = t.node_data()
  if nd is None:
    return None
  kids = [_tree_json(k) for k in t.children()]
  typ = nd[0]
  if typ is types.NoneType:
    return ["none"]
  if typ is tuple or typ is list:
    return [typ.__name__, kids]
  if typ is dict:
    for k in nd[1]:
      if not isinstance(k, str):
        raise TypeError("Serialization is supported only for dictionaries with string keys. "
                        f"Found key {k} of type {type(k)}.")
    return ["dict", kids, list(nd[1])]
  if typ in serialization_registry:
    name, ser = serialization_registry[typ]
    aux = ser(nd[1])
    if not isinstance(aux, (bytes, bytearray)):
      raise ValueError("The custom serialization function for `node_type` must return a "
                       f"`bytes` object. It returned a {type(aux)}.")
    return ["custom", kids, name, base64.b64encode(bytes(aux)).decode("ascii")]
  raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type `{typ}`. "
                   "Use `export.register_pytree_node_serialization` or "
                   "`export.register_namedtuple_serialization`.")


def _tree_value(j):
  """The pytree (leaves 0.0) that ``_tree_json`` described."""
  if j is None:
    return 0.0
  kind, kids = j[0], [_tree_value(k) for k in (j[1] if len(j) > 1 else [])]
  if kind == "none":
    return None
  if kind == "tuple":
    return tuple(kids)
  if kind == "list":
    return kids
  if kind == "dict":
    return dict(zip(j[2], kids))
  if kind == "custom":
    if j[2] not in deserialization_registry:
      raise ValueError(f"Cannot deserialize a PyTreeDef containing an unregistered type "
                       f"`{j[2]}`. Use `export.register_pytree_node_serialization` or "
                       "`export.register_namedtuple_serialization`.")
    _, deser, from_children = deserialization_registry[j[2]]
    return from_children(deser(base64.b64decode(j[3])), kids)
  raise ValueError(f"Cannot deserialize PyTreeDef with unknown kind: {kind}")


def _aval_json(a):
  return [list(a.shape), "float0" if a.dtype == dtypes.float0 else np.dtype(a.dtype).name,
          bool(a.weak_type)]


def _aval_of(j):
  shape, name, weak = j
  return core.ShapedArray(tuple(shape), dtypes.float0 if name == "float0" else np.dtype(name),
                          weak)


def _serialize(exp, vjp_order):
  if vjp_order > 0 and not exp.has_vjp():
    raise ValueError("serialization of an Exported that does not have vjps of high-enough "
                     "order")
  head = json.dumps(dict(
      format=_FORMAT, fun_name=exp.fun_name, in_tree=_tree_json(exp.in_tree),
      out_tree=_tree_json(exp.out_tree), in_avals=[_aval_json(a) for a in exp.in_avals],
      out_avals=[_aval_json(a) for a in exp.out_avals], nr_devices=exp.nr_devices,
      platforms=list(exp.platforms),
      disabled_safety_checks=[str(c) for c in exp.disabled_safety_checks],
      calling_convention_version=exp.calling_convention_version,
      module_kept_var_idx=list(exp.module_kept_var_idx),
      uses_global_constants=exp.uses_global_constants)).encode("utf-8")
  vjp = _serialize(exp.vjp(), vjp_order - 1) if vjp_order > 0 else b""
  mod = exp.mlir_module_serialized
  return b"".join([_MAGIC, struct.pack("<QQQ", len(head), len(mod), len(vjp)), head, mod, vjp])


def deserialize(blob):
  """The :class:`Exported` that :meth:`Exported.serialize` wrote as ``blob``.

  Args:
    blob: the bytes (``bytearray``) of a serialized Exported.
  """
  blob = bytes(blob)
  if not blob.startswith(_MAGIC):
    raise ValueError("jax.export.deserialize: not a serialized nbjax Exported")
  at = len(_MAGIC)
  nh, nm, nv = struct.unpack_from("<QQQ", blob, at)
  at += 24
  head = json.loads(blob[at:at + nh].decode("utf-8"))
  if head.get("format") != _FORMAT:
    raise ValueError(f"jax.export.deserialize: unsupported format {head.get('format')}")
  mod, vjp = blob[at + nh:at + nh + nm], blob[at + nh + nm:at + nh + nm + nv]
  checks = tuple(DisabledSafetyCheck(c) for c in head["disabled_safety_checks"])
  n_in, n_out = len(head["in_avals"]), len(head["out_avals"])
  return Exported(
      fun_name=head["fun_name"],
      in_tree=tree_util.tree_structure(_tree_value(head["in_tree"])),
      in_avals=tuple(map(_aval_of, head["in_avals"])),
      out_tree=tree_util.tree_structure(_tree_value(head["out_tree"])),
      out_avals=tuple(map(_aval_of, head["out_avals"])),
      _has_named_shardings=True, _in_named_shardings=(None,) * n_in,
      _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
      out_shardings_hlo=(None,) * n_out, nr_devices=head["nr_devices"],
      platforms=tuple(head["platforms"]), ordered_effects=(), unordered_effects=(),
      disabled_safety_checks=checks, mlir_module_serialized=mod,
      calling_convention_version=head["calling_convention_version"],
      module_kept_var_idx=tuple(head["module_kept_var_idx"]),
      uses_global_constants=head["uses_global_constants"],
      _get_vjp=(lambda _: deserialize(vjp)) if vjp else None)


# ----------------------------------------------------------------------- symbolic shapes

def symbolic_shape(shape_spec, *, constraints=(), scope=None, like=None):
  _unsupported("symbolic_shape")


def symbolic_args_specs(args, shapes_specs, constraints=(), scope=None):
  _unsupported("symbolic_args_specs")


def is_symbolic_dim(p):
  """Whether ``p`` is a symbolic dimension: never, in nbjax (shapes are concrete ints)."""
  return False
