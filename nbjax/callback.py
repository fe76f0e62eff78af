"""Python callbacks from eager, vmapped, differentiated and compiled code: ``pure_callback``,
``io_callback`` (``nbjax.experimental``), ``debug.callback`` and ``debug.print``
(``nbjax.debug``), with JAX's signatures, errors and semantics.

Pipeline position: each API flattens ``(args, kwargs)`` and binds one of three primitives
whose ``callback`` param is a flat Python callable (NumPy arrays in, a list of arrays out):
``pure_callback`` (no effects: DCE may drop it), ``io_callback`` and ``debug_callback``
(``effects``, so staging keeps them, ``registry.eager_program`` neither merges nor folds them
and every loop or call around them carries the effect too). Eagerly the ``"python"`` backend
calls the callback at once. Under ``vmap`` a batching rule binds the primitive again with a
batched callback (``_Sequential`` loops over the batch in Python, calling the user's function
once per element) or, for ``vmap_method="expand_dims"``/``"broadcast_all"``/
``"legacy_vectorized"``, with batched operands. Under ``jit`` (and in the eager XLA loops of
``lax.while_loop``/``scan``) the lowering registers the callable with the module
(``ModuleContext.add_host_callback``) and emits a ``stablehlo.custom_call`` to
``xla_ffi_python_cpu_callback`` (typed FFI, ``backend_config = {index = k : ui64}``); XLA calls
it with NumPy arrays on one of its threads. Effectful callbacks take and return the module's
``!stablehlo.token``, so they run in program order (``ordered=True`` or not). Every result is
checked against ``result_shape_dtypes`` (JAX's messages) in all of these paths.
``debug.inspect_array_sharding`` binds ``inspect_sharding`` (Debug effect): it calls back with
the operand's sharding eagerly, when lowered (one device), or from XLA's SPMD partitioner.
"""
from __future__ import annotations

import copy
import logging
import string
import sys
import warnings

import numpy as np

from nbjax import core, dtypes, registry
from nbjax.array import Array
from nbjax.core import Primitive
from nbjax.interpreters import batching, lowering
from nbjax.interpreters import partial_eval as pe
from nbjax.interpreters.lowering import hlo, ir, mlir
from nbjax.jaxpr import remat_allowed_effects
from nbjax._tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

logger = logging.getLogger(__name__)
debug_logger = logging.getLogger("nbjax.debug")  # (``debug.log``'s records)

__all__ = ["pure_callback", "io_callback", "debug_callback", "debug_print", "effects_barrier",
           "pure_callback_p",
           "io_callback_p", "debug_callback_p", "debug_print_p", "IOEffect", "OrderedIOEffect", "DebugEffect",
           "OrderedDebugEffect", "inspect_array_sharding", "inspect_sharding_p"]

# ----------------------------------------------------------------------- effects


class _Effect:
  """An effect an equation has (``JaxprEqn.effects``): it is never removed or merged;
  ``ordered``: kept in program order (a token threads them); ``shardable``: an ordered
  effect a program over several devices may have (JAX's ``shardable_ordered_effects``)."""
  __slots__ = ("name", "ordered", "shardable")

  def __init__(self, name, ordered=False, shardable=False):
    self.name, self.ordered, self.shardable = name, ordered, shardable

  def __repr__(self):
    return self.name

  __str__ = __repr__


IOEffect, OrderedIOEffect = _Effect("IO"), _Effect("OrderedIO", ordered=True, shardable=True)
DebugEffect, OrderedDebugEffect = _Effect("Debug"), _Effect("OrderedDebug", ordered=True)
remat_allowed_effects.update((DebugEffect, OrderedDebugEffect))

# ----------------------------------------------------------------------- flat callables
# A callback param is compared by value (the user's function by identity, the rest by
# content), so the same function staged twice gives equal params: jaxpr-content caches
# (eager loops) hit, and two different functions never share a compiled executable.


class _Hashed:
  __slots__ = ()

  def _key(self):
    return tuple(getattr(self, k) for k in self.__slots__ if k != "__weakref__")

  def __eq__(self, other):
    return type(other) is type(self) and self._key() == other._key()

  def __hash__(self):
    try:
      return hash((type(self), self._key()))
    except TypeError:  # an unhashable static argument: by identity
      return id(self)

  _unshown = ("__weakref__",)  # (slots the repr leaves out: JAX's fields only)

  def __repr__(self):
    fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__
                       if k not in self._unshown)
    return f"{type(self).__name__}({fields})"


class _FlatCallback(_Hashed):
  """``callback_func`` called with the ``(args, kwargs)`` of ``in_tree`` rebuilt from flat
  arrays; returns the leaves of its result. An exception it raises is logged (``api``,
  e.g. ``"jax.pure_callback failed"``, with the traceback, at ERROR) and re-raised, as JAX's."""
  __slots__ = ("callback_func", "in_tree", "api", "__weakref__")
  _unshown = ("api", "__weakref__")

  def __init__(self, callback_func, in_tree, api):
    self.callback_func, self.in_tree, self.api = callback_func, in_tree, api

  def __call__(self, *flat):
    args, kwargs = tree_unflatten(self.in_tree, [_as_array(a) for a in flat])
    try:
      return tree_leaves(self.callback_func(*args, **kwargs))
    except BaseException:
      logger.exception(f"{self.api} failed")
      raise


class _DebugCallback(_Hashed):
  """A debug callback: the dynamic (array) leaves come flat, the static ones (strings,
  objects: ``static_args``, ``(position, value)`` pairs) are merged back in; returns ()."""
  __slots__ = ("callback_func", "in_tree", "static_args", "__weakref__")

  def __init__(self, callback_func, in_tree, static_args):
    self.callback_func, self.in_tree, self.static_args = callback_func, in_tree, static_args

  def __call__(self, *flat):
    static = dict(self.static_args)
    dyn = map(_as_array, flat)
    leaves = [static[i] if i in static else next(dyn)
              for i in range(len(static) + len(flat))]
    args, kwargs = tree_unflatten(self.in_tree, leaves)
    try:
      self.callback_func(*args, **kwargs)
    except BaseException:
      logger.exception("jax.debug.callback failed")
      raise
    return ()


class _Print(_Hashed):
  """``debug.print``'s formatter: ``fmt.format(*args, **kwargs)`` under the NumPy print
  options of the call site, printed to stdout, or with ``logging_record`` (``debug.log``)
  logged as a copy of that record with the message."""
  __slots__ = ("fmt", "np_printoptions", "has_placeholders", "logging_record", "__weakref__")

  def __init__(self, fmt, np_printoptions, has_placeholders, logging_record=None):
    self.fmt, self.np_printoptions, self.has_placeholders = fmt, np_printoptions, has_placeholders
    self.logging_record = logging_record

  def __call__(self, *args, **kwargs):
    if self.has_placeholders:
      with np.printoptions(**dict(self.np_printoptions)):
        msg = self.fmt.format(*args, **kwargs)
    else:
      msg = " ".join((self.fmt, *(str(a) for a in args)))
    if self.logging_record is None:
      sys.stdout.write(msg + "\n")  # (one write, as JAX's: replicas' lines stay whole)
    else:
      record = copy.copy(self.logging_record)
      record.msg = msg
      debug_logger.handle(record)


def _logging_record(level):
  """A record of ``debug_logger`` at ``level`` naming the user code that called (JAX's)."""
  from nbjax.interpreters import partial_eval as pe
  site = pe.user_site()
  file_name, line_no = ("(unknown file)", 0) if site is None else \
      (site[0].co_filename, pe.summarize_site(site).rsplit(":", 2)[1])
  return debug_logger.makeRecord(debug_logger.name, level, file_name, int(line_no), "", (),
                                 None)


def _as_array(x):
  """A callback's operand as JAX's ``device_put`` hands it over: an ``Array`` (as it is;
  a Python scalar weakly typed)."""
  if isinstance(x, Array):
    return x
  if type(x) in (bool, int, float, complex):
    a = core.get_aval(x)
    return Array(np.asarray(x, a.dtype), a.weak_type)
  return Array(np.asarray(x))


def _check_results(outs, result_avals, copy=True):
  """The callback's results as arrays of exactly ``result_avals`` (dtypes canonicalized
  first, as JAX does: a float64 result is float32 with x64 off), or JAX's RuntimeError."""
  outs = list(outs)
  if len(outs) != len(result_avals):
    raise RuntimeError("Mismatched number of outputs from callback. "
                       f"Expected: {len(result_avals)}, Actual: {len(outs)}")
  res = []
  for i, (o, a) in enumerate(zip(outs, result_avals)):
    x = np.asarray(o)
    x = x.astype(dtypes.canonicalize_dtype(x.dtype), copy=False)
    if x.shape != a.shape:
      raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                         f"Expected: {a.shape}, Actual: {x.shape}")
    if x.dtype != a.dtype:
      raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                         f"Expected: {a.dtype}, Actual: {x.dtype}")
    res.append(np.array(x, order="C") if copy or not x.flags.c_contiguous else x)
  return res


class _Sequential(_Hashed):
  """The batched form of ``fn`` (results ``result_avals``): called with operands batched
  along ``dims`` (None: unbatched), it calls ``fn`` once per element, in order, and stacks
  the results along a new leading axis."""
  __slots__ = ("fn", "result_avals", "dims", "size", "__weakref__")

  def __init__(self, fn, result_avals, dims, size):
    self.fn, self.result_avals, self.dims, self.size = fn, result_avals, dims, size

  def __call__(self, *args):
    rows = []
    for i in range(self.size):
      ins = [a if d is None else np.take(np.asarray(a), i, axis=d)
             for a, d in zip(args, self.dims)]
      rows.append(_check_results(self.fn(*ins), self.result_avals, copy=False))
    if not self.size:
      return [np.zeros((0, *a.shape), a.dtype) for a in self.result_avals]
    return [np.stack(col) for col in zip(*rows)] if self.result_avals else ()


def _invoke(callback, result_avals, args):
  """Eager call: the callback on ``args``, results checked."""
  return _check_results(callback(*args), result_avals)


class _HostCall(_Hashed):
  """What XLA calls (``xla.compile``'s ``host_callbacks``): ``callback`` on the operands,
  results checked; with ``token``, the token comes first in and first out."""
  __slots__ = ("callback", "result_avals", "token", "__weakref__")

  def __init__(self, callback, result_avals, token):
    self.callback, self.result_avals, self.token = callback, result_avals, token

  def __call__(self, *args):
    if self.token:
      tok, *args = args
      return (tok, *_check_results(self.callback(*args), self.result_avals, copy=False))
    return tuple(_check_results(self.callback(*args), self.result_avals, copy=False))

# ----------------------------------------------------------------------- shared rules


def _axis_size(args, dims):
  return next(core.get_aval(a).shape[d] for a, d in zip(args, dims) if d is not None)


def _batched_avals(size, avals):
  return tuple(a.update(shape=(size, *a.shape)) for a in avals)


def _emit(ctx, host, args, effectful, sharding=None, partitioned=False):
  """The custom call running ``host`` (registered with the module); an effectful one takes
  and returns the module's token. In a sharded jit it runs on one device (``sharding``'s, a
  ``SingleDeviceSharding``, else the first), on the whole value, as JAX's; a
  ``partitioned`` one (debug callbacks) runs on each device's shards of its operands, with
  no token unless ``effectful == "ordered"`` (as JAX's: XLA partitions no token)."""
  mctx = ctx.module_context
  meshes = getattr(mctx, "spmd", None)
  target, side_effect = "xla_ffi_python_cpu_callback", bool(effectful)
  if partitioned and meshes:
    target, effectful = "xla_ffi_partitioned_python_cpu_callback", effectful == "ordered"
    host = _HostCall(host.callback, host.result_avals, effectful)
  index = mctx.add_host_callback(host)
  types = mlir.aval_to_ir_types(ctx.avals_out)
  operands = list(args)
  ranks_in, ranks_out = [a.ndim for a in ctx.avals_in], [a.ndim for a in ctx.avals_out]
  if effectful:
    types, operands = [mlir.token_type(), *types], [mctx.get_token(), *operands]
    ranks_in, ranks_out = [0, *ranks_in], [0, *ranks_out]
  layouts = lambda ranks: ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(
      np.arange(r - 1, -1, -1, dtype=np.int64), type=ir.IndexType.get()) for r in ranks])
  op = hlo.CustomCallOp.build_generic(
      results=types, operands=operands,
      attributes=dict(call_target_name=ir.StringAttr.get(target),
                      operand_layouts=layouts(ranks_in), result_layouts=layouts(ranks_out),
                      has_side_effect=ir.BoolAttr.get(side_effect), api_version=mlir.i32_attr(1),
                      backend_config=ir.StringAttr.get(""),
                      **{"mhlo.backend_config": ir.DictAttr.get({"index": ir.IntegerAttr.get(
                          ir.IntegerType.get_unsigned(64), index)})},
                      called_computations=ir.ArrayAttr.get([])))
  if meshes:
    op.attributes["sdy.sharding"] = meshes.callback_attr(sharding, len(types))
  outs = list(op.results)
  if effectful:
    mctx.token = outs.pop(0)
  return outs


def _check_shape_dtype(shape_dtype):
  dt = np.dtype(shape_dtype.dtype)
  if dtypes.canonicalize_dtype(dt) != dt:
    raise ValueError(
        "result_shape_dtypes cannot specify 64-bit types when `jax_enable_x64` is disabled")


def _result_avals(result_shape_dtypes):
  tree_map(_check_shape_dtype, result_shape_dtypes)
  flat, out_tree = tree_flatten(result_shape_dtypes)
  return tuple(core.ShapedArray(x.shape, x.dtype) for x in flat), out_tree

# ----------------------------------------------------------------------- pure_callback

pure_callback_p = Primitive("pure_callback")
pure_callback_p.multiple_results = True

_VMAP_METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None]


def check_vmap_method(vmap_method):
  """JAX's ValueError for a ``vmap_method`` of ``pure_callback`` / ``ffi_call`` it does not
  know."""
  if vmap_method not in _VMAP_METHODS:
    raise ValueError(f"vmap_method must be on of the allowed methods {_VMAP_METHODS}, but "
                     f"got: {vmap_method}")


def vectorized_operands(args, dims, size, vmap_method):
  """The operands of one call on the whole batch: batch axes moved to the front; unbatched
  operands given a leading axis of size 1 (``"expand_dims"``) or ``size``
  (``"broadcast_all"``), or left as they are (``"legacy_vectorized"``)."""
  moved = [a if d is None else batching.moveaxis(a, d, 0) for a, d in zip(args, dims)]
  if vmap_method == "legacy_vectorized":
    return moved
  from nbjax import lax
  n = size if vmap_method == "broadcast_all" else 1
  return [lax.broadcast(a, (n,)) if d is None else a for a, d in zip(moved, dims)]


class _Deprecated:
  def __repr__(self):
    return "DeprecatedArg"


_DEPRECATED = _Deprecated()


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vectorized=_DEPRECATED,
                  vmap_method=None, **kwargs):
  """Calls a pure Python callback, from eager, transformed or compiled code.

  The callback gets ``Array``s (pytrees of them, as ``args``/``kwargs``), as JAX's, and must return
  arrays (or a pytree of them) matching ``result_shape_dtypes``. It is assumed pure: it may
  be called more than once (under ``vmap``) or not at all (when its result is unused).

  Args:
    callback: the function to call on the host.
    result_shape_dtypes: pytree whose leaves have ``shape`` and ``dtype`` (e.g.
      ``nbjax.ShapeDtypeStruct``), the structure of the callback's result.
    *args: arguments passed to ``callback``.
    sharding: a ``SingleDeviceSharding``: the device the callback runs on in a sharded jit
      (default: the first of its devices).
    vectorized: deprecated; ``True`` is ``vmap_method="legacy_vectorized"``.
    vmap_method: how the callback is batched by ``vmap``: ``"sequential"`` (or
      ``"sequential_unrolled"``) calls it once per batch element; ``"expand_dims"`` calls it
      once with batched operands, unbatched ones given a leading axis of size 1;
      ``"broadcast_all"`` likewise with every operand broadcast to the batch size;
      ``"legacy_vectorized"`` with unbatched operands left as they are. ``None`` (the
      default) makes ``vmap`` raise.
    **kwargs: keyword arguments passed to ``callback``.

  Returns:
    A pytree of arrays with the structure of ``result_shape_dtypes``.
  """
  if vectorized is not _DEPRECATED and vectorized is not None:
    warnings.warn(
        "The vectorized argument of jax.pure_callback is deprecated and setting "
        "it will soon raise an error. To avoid an error in the future, and to "
        "suppress this warning, please use the vmap_method argument instead.",
        DeprecationWarning, stacklevel=2)
    if vmap_method is not None:
      raise ValueError(
          "the vectorized and vmap_method arguments of jax.pure_callback cannot "
          "be used together. Please use the vmap_method argument.")
    vmap_method = "legacy_vectorized" if vectorized else "sequential"
  check_vmap_method(vmap_method)
  return _bind_callback(pure_callback_p, callback, result_shape_dtypes, args, kwargs,
                        sharding=sharding, vmap_method=vmap_method)


def _bind_callback(prim, callback, result_shape_dtypes, args, kwargs, **params):
  """Flatten ``(args, kwargs)``, bind ``prim`` with the flat callback, unflatten the result."""
  flat_args, in_tree = tree_flatten((args, kwargs))
  result_avals, out_tree = _result_avals(result_shape_dtypes)
  api = "jax.pure_callback" if prim is pure_callback_p else "jax.io_callback"
  out = prim.bind(*flat_args, callback=_FlatCallback(callback, in_tree, api),
                  result_avals=result_avals, **params)
  return tree_unflatten(out_tree, out)


def _result_abstract_eval(*avals, result_avals, **_):
  return list(result_avals)


def _callback_impl(*args, callback, result_avals, **_):
  try:
    return _invoke(callback, result_avals, args)
  except Exception as e:  # (as from a compiled call, as JAX's)
    from nbjax import xla
    raise xla.callback_error(e) from None


def _pure_jvp(primals, tangents, **params):
  raise ValueError("Pure callbacks do not support JVP. "
                   "Please use `jax.custom_jvp` to use callbacks while taking gradients.")


def _pure_transpose(cts, *args, **params):
  raise ValueError("Pure callbacks do not support transpose. "
                   "Please use `jax.custom_vjp` to use callbacks while taking gradients.")


def _pure_batch(args, dims, *, callback, result_avals, sharding, vmap_method):
  size = _axis_size(args, dims)
  out_avals = _batched_avals(size, result_avals)
  params = dict(result_avals=out_avals, sharding=sharding, vmap_method=vmap_method)
  if vmap_method in ("sequential", "sequential_unrolled"):
    fn = _Sequential(callback, result_avals, tuple(dims), size)
    outs = pure_callback_p.bind(*args, callback=fn, **params)
  elif vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
    outs = pure_callback_p.bind(*vectorized_operands(args, dims, size, vmap_method),
                                callback=callback, **params)
  else:
    raise NotImplementedError(
        "vmap is only supported for the pure_callback primitive when vmap_method is one "
        "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
        f"'legacy_vectorized'. Got {vmap_method=}.")
  return outs, [0] * len(outs)


def _pure_lowering(ctx, *args, callback, result_avals, sharding, vmap_method):
  return _emit(ctx, _HostCall(callback, tuple(ctx.avals_out), False), args, False, sharding)

# ----------------------------------------------------------------------- io_callback

io_callback_p = Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.effects = lambda params: (OrderedIOEffect if params["ordered"] else IOEffect,)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False, **kwargs):
  """Calls an impure Python callback, from eager, vmapped or compiled code.

  Never removed when its result is unused, never merged with an identical call; under
  ``jit`` the calls run in program order. Not differentiable.

  Args:
    callback: the function to call on the host (NumPy arrays in).
    result_shape_dtypes: pytree whose leaves have ``shape`` and ``dtype`` (e.g.
      ``nbjax.ShapeDtypeStruct``), the structure of the callback's result.
    *args: arguments passed to ``callback``.
    sharding: a ``SingleDeviceSharding``: the device the callback runs on in a sharded jit
      (default: the first of its devices).
    ordered: whether the calls must keep their order with other ordered callbacks (such a
      callback cannot be ``vmap``-ed; an unordered one runs once per batch element).
    **kwargs: keyword arguments passed to ``callback``.

  Returns:
    A pytree of arrays with the structure of ``result_shape_dtypes``.
  """
  return _bind_callback(io_callback_p, callback, result_shape_dtypes, args, kwargs,
                        sharding=sharding, ordered=bool(ordered))


def _io_jvp(primals, tangents, **params):
  raise ValueError("IO callbacks do not support JVP.")


def _io_transpose(cts, *args, **params):
  raise ValueError("IO callbacks do not support transpose.")


def _io_batch(args, dims, *, callback, result_avals, sharding, ordered):
  if ordered:
    raise ValueError("Cannot `vmap` ordered IO callback.")
  size = _axis_size(args, dims)
  outs = io_callback_p.bind(*args, callback=_Sequential(callback, result_avals, tuple(dims), size),
                            result_avals=_batched_avals(size, result_avals), sharding=sharding,
                            ordered=False)
  return outs, [0] * len(outs)


def _io_lowering(ctx, *args, callback, result_avals, sharding, ordered):
  return _emit(ctx, _HostCall(callback, tuple(ctx.avals_out), True), args, True, sharding)

# ----------------------------------------------------------------------- debug callbacks

debug_callback_p = Primitive("debug_callback")
debug_callback_p.multiple_results = True
debug_callback_p.effects = lambda params: (params["effect"],)  # (ordered or not)


def _split_callback_args(args, kwargs):
  """``(in_tree, dynamic leaves, static leaves as (position, value) pairs)``: array-like
  leaves are operands, anything else (strings, objects) stays a Python value."""
  flat, in_tree = tree_flatten((args, kwargs))
  dyn, static = [], []
  for i, a in enumerate(flat):
    if core.valid_jaxtype(a):
      dyn.append(a)
    else:
      static.append((i, a))
  return in_tree, dyn, tuple(static)


def debug_callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
  """Calls a Python callback for its side effects (printing, logging), from eager,
  transformed or compiled code.

  It changes the computation as little as possible: under ``vmap`` it runs once per batch
  element, under ``jvp``/``grad`` it sees the primal values (and contributes nothing to
  derivatives); under ``jit`` it runs in program order. Two call forms:
  ``debug.callback(fn, *args, **kwargs)`` and ``debug.callback(ordered=...)(fn, *args)``.

  Args:
    callback: a Python callable returning None; it gets ``Array``s for array arguments, as
      JAX's (other arguments as they are).
    *args: positional arguments of the callback.
    ordered: whether to keep program order with the other ordered callbacks.
    partitioned: in a sharded jit, call ``callback`` once per device on its shards of the
      operands (else once, on the whole values).
    **kwargs: keyword arguments of the callback.

  Returns:
    None (a function taking the callback and its arguments in the two-call form).
  """
  def _debug_callback(callback, *c_args, **c_kwargs):
    if not callable(callback):
      raise TypeError("first argument to jax.debug.callback must be callable, "
                      f"but got an object of type {type(callback)}")
    in_tree, dyn, static = _split_callback_args(c_args, c_kwargs)
    debug_callback_p.bind(*dyn, callback=_DebugCallback(callback, in_tree, static),
                          effect=OrderedDebugEffect if ordered else DebugEffect,
                          partitioned=partitioned)

  if callback is not None:
    _debug_callback(callback, *args, **kwargs)
    return None
  if args or kwargs:
    raise TypeError("debug_callback received unexpected arguments in the two-call form:"
                    f" {args=} {kwargs=}")
  return _debug_callback


class _FormatChecker(string.Formatter):
  """Walks a format string without formatting: every field must name a given argument, and
  every argument must be used (JAX's messages)."""

  def format_field(self, value, format_spec):
    return ""

  def check_unused_args(self, used_args, args, kwargs):
    unused = [a for i, a in enumerate(args) if i not in used_args]
    if unused:
      raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
    unused_kw = [k for k in kwargs if k not in used_args]
    if unused_kw:
      raise ValueError(
          f"Unused keyword arguments to `jax.debug.print`: {unused_kw}. "
          "You may be passing an f-string (i.e, `f\"{x}\"`) into "
          "`jax.debug.print` and instead should pass in a regular string.")


_format_checker = _FormatChecker()


def debug_print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
                _use_logging=False, **kwargs):
  """Prints values from eager, transformed or compiled code: ``fmt.format(*args,
  **kwargs)`` on the values (``Array``s), to stdout, when the computation runs.

  Not an f-string: write ``debug.print("x = {x}", x=x)``. Under ``vmap`` it prints once per
  batch element, under ``grad`` the primal values. Two call forms:
  ``debug.print(fmt, *args)`` and ``debug.print(ordered=...)(fmt, *args)``.

  Args:
    fmt: a ``str.format`` format string (without placeholders, the arguments are printed
      after it, separated by spaces).
    *args: positional arguments to format.
    ordered: whether to keep program order with the other ordered callbacks.
    partitioned: in a sharded jit, print each device's shards (else the whole values).
    skip_format_check: do not check ``fmt`` against the arguments.
    **kwargs: keyword arguments to format.

  Returns:
    None (a function taking ``fmt`` and its arguments in the two-call form).
  """
  def _debug_print(fmt, *c_args, **c_kwargs):
    if not skip_format_check:
      _format_checker.format(fmt, *c_args, **c_kwargs)
    has_placeholders = False
    if fmt:
      _, field_name, *_ = next(iter(string.Formatter().parse(fmt)))
      has_placeholders = field_name is not None
    in_tree, dyn, static = _split_callback_args(c_args, c_kwargs)
    debug_print_p.bind(*dyn, fmt=fmt, has_placeholders=has_placeholders, in_tree=in_tree,
                       logging_record=_logging_record(logging.INFO) if _use_logging else None,
                       np_printoptions=tuple(np.get_printoptions().items()),
                       ordered=ordered, partitioned=partitioned, static_args=static)

  if fmt is not None:
    _debug_print(fmt, *args, **kwargs)
    return None
  if args or kwargs:
    raise TypeError("debug_print received unexpected arguments in the two-call form:"
                    f" {args=} {kwargs=}")
  return _debug_print


def _debug_abstract_eval(*avals, callback, effect, partitioned):
  return []


def _debug_impl(*args, callback, effect, partitioned):
  callback(*args)
  return []


def _debug_jvp(primals, tangents, **params):
  return debug_callback_p.bind(*primals, **params), []


def _debug_transpose(cts, *args, **params):
  return [None] * len(args)


def _unrolled(prim, args, dims, **params):
  """JAX's batching rule of the debug primitives: one ``prim`` per batch element, on that
  element of the batched operands (so nested maps print in JAX's order, and a partitioned
  callback gets each device's part of every element)."""
  from nbjax import lax
  for i in range(_axis_size(args, dims)):
    prim.bind(*[a if d is None else lax.index_in_dim(a, i, d, keepdims=False)
                for a, d in zip(args, dims)], **params)
  return [], []


def _debug_batch(args, dims, **params):
  return _unrolled(debug_callback_p, args, dims, **params)


def _debug_lowering(ctx, *args, callback, effect, partitioned):
  return _emit(ctx, _HostCall(callback, (), True), args, "ordered" if effect.ordered else True,
               partitioned=partitioned)

# debug_print: its own primitive (as JAX's), run as a debug callback of its formatter

debug_print_p = Primitive("debug_print")
debug_print_p.multiple_results = True
debug_print_p.effects = lambda params: (
    OrderedDebugEffect if params["ordered"] else DebugEffect,)


def _printer(fmt, has_placeholders, in_tree, np_printoptions, static_args, logging_record,
             **_):
  return _DebugCallback(_Print(fmt, np_printoptions, has_placeholders, logging_record),
                        in_tree, static_args)


def _print_impl(*args, **params):
  return _debug_impl(*args, callback=_printer(**params), effect=None, partitioned=False)


def _print_jvp(primals, tangents, **params):
  return debug_print_p.bind(*primals, **params), []


def _print_batch(args, dims, **params):
  return _unrolled(debug_print_p, args, dims, **params)


def _print_lowering(ctx, *args, **params):
  return _emit(ctx, _HostCall(_printer(**params), (), True), args,
               "ordered" if params["ordered"] else True, partitioned=params["partitioned"])


def _debug_pe_custom(saveable, inst_in, eqn):
  """JAX's rule for a debug callback of known values under a ``checkpoint`` policy: it also
  runs in the recomputation unless the policy saves it, or when its inputs are all the
  checkpointed function's own (so a rematerialized print prints again)."""
  saves = saveable is not None and saveable(eqn.primitive, *[v.aval for v in eqn.invars],
                                            **eqn.params)
  return True, not saves or all(inst_in)


pe.partial_eval_jaxpr_custom_rules[debug_callback_p] = _debug_pe_custom
pe.partial_eval_jaxpr_custom_rules[debug_print_p] = _debug_pe_custom

# key arrays: eagerly the callback gets them as they are; under jit their data (as JAX's)
debug_callback_p.extended_eager, debug_print_p.extended_eager = _debug_impl, _print_impl
debug_callback_p.physical_rule = lambda avals, *xs, **params: debug_callback_p.bind(*xs,
                                                                                    **params)
debug_print_p.physical_rule = lambda avals, *xs, **params: debug_print_p.bind(*xs, **params)


# ----------------------------------------------------------------------- inspect_array_sharding

inspect_sharding_p = Primitive("inspect_sharding")
inspect_sharding_p.multiple_results = True
inspect_sharding_p.effects = lambda params: (DebugEffect,)  # (kept though it has no outputs)


def _inspect_impl(x, *, callback):
  if isinstance(x, Array):
    callback(x.sharding)
  else:
    from nbjax.array import _single_sharding
    callback(_single_sharding())
  return []


def _inspect_jvp(primals, tangents, **params):
  return inspect_sharding_p.bind(*primals, **params), []


def _inspect_batch(args, dims, **params):
  return inspect_sharding_p.bind(*args, **params), []


def _inspect_lowering(ctx, x, *, callback):
  """As JAX's: one device, the value is replicated on it (the callback runs now); over several,
  XLA's SPMD partitioner calls back with the sharding it chose (an ``InspectSharding`` custom
  call, removed when partitioning)."""
  from nbjax import xla
  from nbjax.interpreters import spmd
  from nbjax.sharding import GSPMDSharding
  xc = xla.ensure_jaxlib().xc
  meshes = getattr(ctx.module_context, "spmd", None)
  if not meshes or len(meshes.devs) == 1:
    from nbjax.array import _single_sharding
    devs = meshes.devs if meshes else [_single_sharding()._device]
    callback(GSPMDSharding.get_replicated(devs))
    return []
  shape = ctx.avals_in[0].shape

  def on_hlo(hlo):
    callback(spmd._named_for(hlo, meshes.mesh, meshes.devs, shape))
  ctx.module_context.keepalives.append(on_hlo)  # (alive until the module is compiled)
  hlo.CustomCallOp.build_generic(
      results=[x.type], operands=[x],
      attributes=dict(call_target_name=ir.StringAttr.get("InspectSharding"),
                      has_side_effect=ir.BoolAttr.get(True), api_version=mlir.i32_attr(1),
                      called_computations=ir.ArrayAttr.get([]),
                      backend_config=ir.StringAttr.get(
                          xc.encode_inspect_sharding_callback(on_hlo))))
  return []


def inspect_array_sharding(value, *, callback):
  """Enables inspecting array sharding inside JIT-ted functions.

  Calls ``callback`` with the ``Sharding`` of each array in ``value`` (a pytree) as early as
  it is known: at once outside ``jit``; inside a ``jit``, when the function is lowered (one
  device) or compiled (several: the sharding XLA chose). Once the function is compiled and
  cached, the callback no longer runs.

  Args:
    value: A Pytree of JAX arrays.
    callback: A callable that takes in a ``Sharding`` and doesn't return a value.
  """
  tree_map(lambda x: inspect_sharding_p.bind(x, callback=callback), value)


def effects_barrier():
  """Waits until every effect issued so far has run. nbjax runs a program with callbacks to
  its end before the call returns (eagerly, and compiled: ``xla.compile``), so nothing is
  ever pending; kept for JAX code that calls it."""

# ----------------------------------------------------------------------- registration


def _sample_fn(x, y):
  return np.sin(x) * y, np.asarray(x).sum()


_SAMPLE_TREE = tree_flatten(((0, 0), {}))[1]


def _samples(extra):
  """Cases for the registry-generated tests: ``sin(x) * y`` and ``sum(x)`` through a
  callback (batched sequentially), on a few shapes."""
  def samples(rng, dtype):
    cases = []
    for shape in [(), (3,), (2, 3)]:
      x = rng.uniform(-2, 2, shape).astype(dtype)
      y = rng.uniform(-2, 2, shape).astype(dtype)
      avals = (core.ShapedArray(shape, dtype), core.ShapedArray((), dtype))
      cases.append(([x, y], dict(callback=_FlatCallback(_sample_fn, _SAMPLE_TREE, "test"),
                                 result_avals=avals, sharding=None, **extra)))
    return cases
  return samples


def _sample_reference(*args, callback, result_avals, **_):
  return [np.asarray(o, a.dtype) for o, a in zip(callback(*args), result_avals)]


_FLOATS = [np.float32, np.float64]
_NOTE = "calls the user's Python function on NumPy arrays; under jit, from XLA ({})"
_NO_AD = "; jvp, transpose: JAX's errors"
registry.register(
    pure_callback_p, family="callback", impls={"python": _callback_impl},
    abstract_eval=_result_abstract_eval, jvp=_pure_jvp, transpose=_pure_transpose,
    batch=_pure_batch,
    meta=dict(differentiable=False, dtypes=_FLOATS, reference=_sample_reference,
              samples=_samples(dict(vmap_method="sequential")),
              jvp_error=(ValueError, "Pure callbacks do not support JVP"),
              note=_NOTE.format("no effects: may be removed when unused") + _NO_AD))
registry.register(
    io_callback_p, family="callback", impls={"python": _callback_impl},
    abstract_eval=_result_abstract_eval, jvp=_io_jvp, transpose=_io_transpose, batch=_io_batch,
    meta=dict(differentiable=False, dtypes=_FLOATS, reference=_sample_reference,
              samples=_samples(dict(ordered=False)),
              jvp_error=(ValueError, "IO callbacks do not support JVP"),
              note=_NOTE.format("IO effect: kept, run in program order") + _NO_AD))
# eagerly the callback gets the operands as they are (an Array keeps its weak type, as JAX's)
debug_callback_p.make_eager = lambda prim, f_small, f_large, thr: _debug_impl
registry.register(
    debug_callback_p, family="callback", impls={"python": _debug_impl},
    abstract_eval=_debug_abstract_eval, jvp=_debug_jvp, transpose=_debug_transpose,
    batch=_debug_batch,
    meta=dict(differentiable=True,
              note=_NOTE.format("Debug effect: sees primal values, no derivative")))
lowering.register(pure_callback_p, _pure_lowering)
lowering.register(io_callback_p, _io_lowering)
lowering.register(debug_callback_p, _debug_lowering)
registry.register(
    debug_print_p, family="callback", impls={"python": _print_impl},
    abstract_eval=lambda *avals, **_: [], jvp=_print_jvp, transpose=_debug_transpose,
    batch=_print_batch,
    meta=dict(differentiable=True, note="debug.print: formats and prints the primal values"))
lowering.register(debug_print_p, _print_lowering)
inspect_sharding_p.make_eager = lambda prim, f_small, f_large, thr: _inspect_impl
registry.register(
    inspect_sharding_p, family="callback", impls={"python": _inspect_impl},
    abstract_eval=lambda aval, **_: [], jvp=_inspect_jvp, transpose=_debug_transpose,
    batch=_inspect_batch,
    meta=dict(differentiable=True, note="debug.inspect_array_sharding: calls back with the "
              "operand's sharding (eagerly, when lowered, or from XLA's partitioner)"))
lowering.register(inspect_sharding_p, _inspect_lowering)
