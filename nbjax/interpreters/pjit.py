"""``jit``: the call primitive ``jit_p`` and the user-facing wrapper.

Pipeline position: ``jit(f)(*args)`` looks its argument signature (input treedef, avals with
weak types, static values) up in a per-function cache; on a miss it stages ``f`` to a jaxpr
with the staging trace (``partial_eval.trace_to_jaxpr_dynamic``). At the top level (the
current trace is the eval trace) the cached XLA executable is called directly: lowered by
``interpreters.mlir``, compiled by ``nbjax.xla``, no ``bind``. Under a transformation the
wrapper binds ``jit_p`` with the jaxpr, and ``jit_p``'s own rules (seed 003, Part 3) take
over: jvp and batching re-stage the transformed jaxpr and bind ``jit_p`` again, abstract
eval reads the jaxpr's output types, the lowering emits a private function and a
``func.call`` (so jit nests), and the impl compiles and runs the jaxpr.

jaxlib is imported only when something is compiled or lowered.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import logging
import threading
import traceback
import warnings
import weakref
from contextlib import contextmanager

import numpy as np

from nbjax import core, dtypes, monitoring, registry, traceback_util, _tree_util as tree_util
from nbjax.array import Array, _wrap
from nbjax.config import config
from nbjax.core import Primitive, ShapedArray, Tracer
from nbjax.core import placement as _placement
from nbjax.interpreters import ad, batching, jet
from nbjax.interpreters import partial_eval as pe
from nbjax.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr

__all__ = ["jit", "jit_p", "disable_jit", "block_until_ready", "Lowered", "Compiled", "Traced",
           "stats", "reset_stats"]

_INLINE_CONST_BYTES = 1 << 12   # closed-over arrays larger than this become arguments of main

# ----------------------------------------------------------------------- counters

_stats = {"traces": 0, "lowerings": 0, "fast_calls": 0}
MISS = object()  # a guarded run's answer to arguments of another signature
_log = logging.getLogger("nbjax")


def finish_sharded_run(src, env, shardings, out_avals, out_tree, filename):
  """Ends a generated fast-path ``run`` whose ``o`` holds the output global arrays: each
  becomes an Array placed by its sharding, returned as ``out_tree``; compiles the source and
  returns ``run`` (pmap's and sharded jit's runners)."""
  for i, (sh, a) in enumerate(zip(shardings, out_avals)):
    env[f"_os{i}"], env[f"_ow{i}"] = sh, a.weak_type
    src.append(f"  r{i} = _new(_Array); r{i}._weak = _ow{i}; r{i}._buf = None; "
               f"r{i}._pmap = (_os{i}, None, o[{i}])")
  body = tree_util.build_source(out_tree, "r{}".format, env)
  if body is None:
    env["_unflat"] = tree_util.unflattener(out_tree)
    body = f"_unflat([{', '.join(f'r{i}' for i in range(len(out_avals)))}])"
  src.append(f"  return {body}")
  exec(compile("\n".join(src), filename, "exec"), env)
  return env.pop("run")  # (popped: a function in its own globals is a reference cycle)


def stats():
  """Counters since process start: ``traces`` (jit stagings), ``lowerings``, ``fast_calls``
  (calls served by a signature key; calls served by the last signature's guarded run are
  not counted)."""
  return dict(_stats)


def reset_stats():
  for k in _stats:
    _stats[k] = 0


# ----------------------------------------------------------------------- disable_jit


class _JitState(threading.local):
  def __init__(self):
    self.disabled = config._flags["disable_jit"]  # a new thread starts from the global flag


_state = _JitState()


def _on_config(name, value):
  if name == "disable_jit":  # config.update("jax_disable_jit", ...): this thread's state too
    _state.disabled = value


config.add_listener(_on_config)


@contextmanager
def disable_jit(disable: bool = True):
  """Context manager: jitted functions run their Python bodies eagerly (op by op)."""
  prev = _state.disabled
  _state.disabled = bool(disable)
  try:
    yield
  finally:
    _state.disabled = prev


# ----------------------------------------------------------------------- host values


def _to_host(x, aval):
  """An eager operand as the host value the executable expects for ``aval``."""
  t = type(x)
  if t is Array:
    v = x._value
  elif isinstance(x, Tracer):
    raise core.escaped_tracer_error(x)
  elif t in (bool, int, float, complex):
    return x  # the executable converts Python scalars to the declared dtype
  else:
    v = np.asarray(x)
  if aval.dtype == dtypes.float0 or v.dtype == dtypes.float0:
    return np.zeros(aval.shape, np.bool_)  # float0 travels as bool, as JAX lowers it
  if v.dtype != aval.dtype:
    v = v.astype(aval.dtype)
  return v


_ALIGN = 64                     # XLA aliases host buffers aligned to this; others it copies slowly
_ALIGN_MIN_BYTES = 1 << 16      # below this the copy costs less than checking


def _aligned_empty(shape, dtype):
  dtype = np.dtype(dtype)
  n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  buf = np.empty(n + _ALIGN, np.uint8)
  off = (-buf.ctypes.data) % _ALIGN
  return buf[off:off + n].view(dtype).reshape(shape)


def _aligned(x, v):
  """``v`` in 64-byte-aligned memory, so XLA uses it in place instead of copying it (slowly)
  on every call. An ``Array``'s buffer is immutable: it adopts the aligned copy, so the copy
  is made once; a NumPy input is copied per call."""
  if type(v) is not np.ndarray or v.ctypes.data % _ALIGN == 0:
    return v
  out = _aligned_empty(v.shape, v.dtype)
  np.copyto(out, v)
  if type(x) is Array and x._value is v:
    out.flags.writeable = False
    x._value = out
  return out


def _weakly(method):
  """``method`` on a weak reference to its object, for generated code the object keeps (the
  bound method itself would make a reference cycle, garbage only the collector frees)."""
  return functools.partial(method.__func__, weakref.proxy(method.__self__))


class _Unspecified:
  def __repr__(self):  # (JAX's UNSPECIFIED sharding, as its compile log prints it)
    return "UnspecifiedValue"


_UNSPECIFIED = (_Unspecified(),)


class _Executable:
  """A closed jaxpr compiled for the CPU: ``run(args) -> list of Arrays``.

  Two calling conventions, each compiled on first use: host inputs (NumPy arrays, scalars)
  go through ``exe``, which packs small inputs into one transfer; calls with ``Array`` inputs
  go through ``dexe`` on device buffers: an ``Array`` that came out of an executable keeps
  its XLA buffer (``Array._buf``), and one coming from the host has its transfer cached
  there on first use (Arrays are immutable), so repeated calls move nothing host->device.
  """

  def __init__(self, closed, name, compiler_options=None):
    from nbjax.interpreters import mlir, lowering
    self.compiler_options = compiler_options
    # key arrays (extended dtypes) in and out: the executable takes and gives their data
    ext = lambda a: isinstance(a.dtype, dtypes.ExtendedDType)
    tok = core.abstract_token  # tokens: passed and returned as their empty bool arrays
    self.key_in = [i for i, a in enumerate(closed.in_avals) if a is tok or ext(a)]
    self.key_out = [(i, None if a is tok else a.dtype._impl)
                    for i, a in enumerate(closed.out_avals) if a is tok or ext(a)]
    closed = lowering.physicalize(closed)
    consts = closed.consts
    hoisted = [i for i, c in enumerate(consts)
               if isinstance(c, Tracer) or np.asarray(c).nbytes > _INLINE_CONST_BYTES]
    cavals = [v.aval for v in closed.jaxpr.constvars]
    self.const_vals = [_aligned(None, np.asarray(_to_host(consts[i], cavals[i])))
                       for i in hoisted]
    self.host_callbacks = []  # Python callbacks the module calls (both compiles need them)
    with monitoring.log_elapsed_time(
        "Finished jaxpr to MLIR module conversion {fun_name} in {elapsed_time:.9f} sec",
        f"jit({name})", monitoring.JAXPR_TO_MLIR_MODULE_EVENT, _log, config._flags["log_compiles"]):
      module = mlir.lower_jaxpr_to_module(closed, f"jit_{name}", hoisted=hoisted,
                                          host_callbacks=self.host_callbacks)
    _stats["lowerings"] += 1
    # JAX's message: at WARNING with jax_log_compiles, else at DEBUG
    _log.log(logging.WARNING if config._flags["log_compiles"] else logging.DEBUG,
             "Compiling %s with global shapes and types %s. Argument mapping: %s.",
             f"jit({name})", tuple(closed.in_avals), _UNSPECIFIED * len(closed.in_avals))
    self.text = str(module)
    self.name = name
    self._exe = self._dexe = self._dcall = self._hcall = self.const_bufs = None
    phys = lambda avals: [core.get_token_aval() if a is tok else a for a in avals]
    self.in_avals = phys(closed.in_avals)
    # (aval, dtype a NumPy argument may have to pass as is; None for float0)
    self.in_dtypes = [(a, None if a.dtype == dtypes.float0 else np.dtype(a.dtype))
                      for a in self.in_avals]
    self.big_in = [i for i, a in enumerate(self.in_avals)
                   if a.size * np.dtype(a.dtype).itemsize >= _ALIGN_MIN_BYTES]
    out_avals = phys(closed.out_avals)
    self.out_weak = [a.weak_type for a in out_avals]
    self.float0_out = [i for i, a in enumerate(out_avals) if a.dtype == dtypes.float0]
    self.out_avals = out_avals

  def _compile_timer(self):
    return monitoring.log_elapsed_time(
        "Finished XLA compilation of {fun_name} in {elapsed_time:.9f} sec", f"jit({self.name})",
        monitoring.BACKEND_COMPILE_EVENT, _log, config._flags["log_compiles"])

  @property
  def exe(self):
    """The host-input ``xla.Executable`` (compiled on first use)."""
    if self._exe is None:
      from nbjax import xla
      with self._compile_timer():
        self._exe = xla.compile(self.text, name=self.name, host_callbacks=self.host_callbacks,
                                compiler_options=self.compiler_options)
    return self._exe

  def _device_call(self, out_tree=None, guarded=False):
    """Compile ``dexe`` (once) and generate a run for it: ``run(args)``, per-argument buffer
    lookup and per-output wrapping unrolled (about 1 us less per call than loops), returning
    the list of outputs, or with ``out_tree`` the tree of them, and then taking the host path
    when no argument is an ``Array`` (jit's fast path: one generated frame from the
    arguments to the result).

    ``guarded``: the run checks that the arguments are exactly this signature's (``Array``s
    of the traced shapes, dtypes and weak types, the same ``config.trace_key``) and returns ``MISS``
    otherwise: jit's monomorphic cache, which skips building and hashing a signature key.
    ``None`` where a signature has inputs that are not plain arrays or outputs that need
    conversions."""
    from nbjax import xla
    dexe = self._dexe
    if dexe is None:
      with self._compile_timer():
        dexe = self._dexe = xla.compile(self.text, name=self.name, pack_inputs=False,
                                        host_callbacks=self.host_callbacks,
                                        compiler_options=self.compiler_options)
      self.const_bufs = [dexe.put(i, v, keep=True) for i, v in enumerate(self.const_vals)]
    nc = len(self.const_bufs)
    env = {"_Array": Array, "_new": object.__new__, "_adopt": _weakly(self._adopt), "_to_host": _to_host,
           "_len": len, "_TypeError": TypeError,
           "_put": dexe.put, "_Impl": dexe._rt.impl_type}
    inline = all(dexe.buffer_outputs)  # else the outputs need dexe's conversions
    if guarded and (not inline or any(d is None for _, d in self.in_dtypes)):
      return None
    names, src = self._run_prologue(guarded)
    # the result: built in place for trees of tuples, lists, dicts (else a list, unflattened
    # by a wrapper, which the host branch then returns too)
    body = None if out_tree is None else \
        tree_util.build_source(out_tree, "r{}".format, env)
    if guarded:
      env.update(_MISS=MISS, _config=config, _tkey=config.trace_key)
      src.insert(2, "  if _config.trace_key is not _tkey: return _MISS")
      for i, (x, (a, d)) in enumerate(zip(names, self.in_dtypes)):
        env[f"_ga{i}"], env[f"_d{i}"], env[f"_s{i}"], env[f"_gw{i}"] = \
            dexe._rt.aval(a.shape, d), d, a.shape, a.weak_type
        src += [f"  if type({x}) is not _Array or {x}._weak is not _gw{i}: return _MISS",
                f"  b = {x}._buf",
                f"  if b is None:",
                f"    v = {x}._value",
                f"    if v.dtype is not _d{i} or v.shape != _s{i}: return _MISS",
                f"    {x} = _adopt({i}, {x})",
                f"    if type({x}) is not _Impl: {x} = _put({nc + i}, {x})",
                f"  elif b.aval is not _ga{i}: return _MISS",
                f"  else: {x} = b"]
      names = []  # arguments done
    if out_tree is not None:
      unflat = _first if out_tree.num_leaves == 1 and out_tree.node is None else \
          tree_util.unflattener(out_tree)
    if out_tree is not None and not guarded:
      host = _weakly(self.run_host)
      env["_host"] = host if body is None else (lambda args: unflat(host(args)))
      if names:
        src.append(f"  if {' and '.join(f'type({x}) is not _Array' for x in names)}:")
        src.append("    return _host(args)")
    for i, x in enumerate(names):
      env[f"_av{i}"] = self.in_avals[i]
      src += [f"  if type({x}) is _Array:",
              f"    b = {x}._buf",
              f"    if b is not None: {x} = b",
              f"    else:",
              f"      {x} = _adopt({i}, {x})"]
      if inline:
        src += [f"      if type({x}) is not _Impl: {x} = _put({nc + i}, {x})",
                f"  else: {x} = _put({nc + i}, _to_host({x}, _av{i}))"]
      else:
        src += [f"  else: {x} = _to_host({x}, _av{i})"]
    cargs = [f"_c{k}" for k in range(nc)]
    for k, b in enumerate(self.const_bufs):
      env[f"_c{k}"] = b
    ins = ', '.join(cargs + [f"x{i}" for i in range(len(self.in_avals))])
    if inline:
      env["_exec"], env["_handlers"] = dexe.dispatch_parts()
      src.append(f"  o = _exec([{ins}]).consume_with_handlers(_handlers)")
    else:
      env["_call"] = dexe._make_dcall(lazy=True)
      src.append(f"  v, o = _call({ins})")
    res = []
    f0 = set(self.float0_out)
    for i, (ok, a, w) in enumerate(zip(dexe.buffer_outputs, self.out_avals, self.out_weak)):
      env[f"_w{i}"] = w
      if i in f0:
        env[f"_z{i}"] = np.zeros(a.shape, dtypes.float0)
        env[f"_z{i}"].flags.writeable = False
        src.append(f"  r{i} = _z{i}")  # JAX: float0 values are NumPy arrays, no Arrays
      else:
        # a buffer output's host view is made when first read (Array.__getattr__): the call
        # returns while XLA runs, as JAX's asynchronous dispatch does
        src.append(f"  r{i} = _new(_Array); r{i}._weak = _w{i}; " +
                   (f"r{i}._buf = o[{i}]" if ok else f"r{i}._value = v[{i}]; r{i}._buf = None"))
      res.append(f"r{i}")
    if body is None:
      src.append(f"  return [{', '.join(res)}]")
    else:
      src.append(f"  return {body}")
    exec(compile("\n".join(src), f"<nbjax.jit {self.name} (device)>", "exec"), env)
    run = env.pop("run")
    if body is None and out_tree is not None:
      if guarded:
        return lambda args: r if (r := run(args)) is MISS else unflat(r)
      return lambda args: unflat(run(args))
    return run

  def runner(self, out_tree, guarded=False):
    """``run(args) -> the tree of outputs``: the host or device path picked by the arguments'
    types, as one generated function (jit's fast path); ``guarded``: see ``_device_call``."""
    if self.key_in or self.key_out:
      if guarded:
        return None
      run = self._device_call()
      unflat = tree_util.unflattener(out_tree)
      return lambda args: unflat(self._keys_out(run(self._keys_in(args))))
    return self._device_call(out_tree, guarded)

  def _keys_in(self, args):
    args = list(args)
    for i in self.key_in:
      x = args[i]
      args[i] = x._buf if type(x) is core.Token else x._base_array
    return args

  def _keys_out(self, outs):
    from nbjax.interpreters import lowering
    for i, impl in self.key_out:
      outs[i] = core.Token(outs[i]) if impl is None else lowering.key_wrap(impl, outs[i])
    return outs

  def _adopt(self, i, x):
    """Device buffer of ``Array`` argument ``i``, cached on it when it holds exactly the
    executable's input (a dtype conversion is put afresh each call)."""
    a = self.in_avals[i]
    v = _to_host(x, a)
    if v is not x._value:
      return v
    if i in self.big_in:
      v = _aligned(x, v)  # aligned: the device buffer aliases the host one
    b = x._buf = self._dexe.put(len(self.const_vals) + i, v, keep=True)
    return b

  def run(self, args):
    if self.key_in or self.key_out:
      return self._keys_out(self._run(self._keys_in(args)))
    return self._run(args)

  def _run(self, args):
    for x in args:
      if type(x) is Array:
        return self.run_device(args)
    return self.run_host(args)

  def run_device(self, args):
    """Run with device buffers: ``Array`` inputs' own, others put for this call."""
    if self._dcall is None:
      self._dcall = self._device_call()
    return self._dcall(args)

  def run_host(self, args):
    """Run with host values (the executable checks and converts NumPy arrays and scalars)."""
    return (self._hcall or self._host_call())(args)

  def _run_prologue(self, guarded=False):
    """Start of a generated ``run(args)``: the argument-count check, unpacking to x0..."""
    n = len(self.in_avals)
    names = [f"x{i}" for i in range(n)]
    src = ["def run(args):",
           f"  if _len(args) != {n}: " +
           ("return _MISS" if guarded else f"raise _TypeError('{self.name}: expected {n} arguments')")]
    if n:
      src.append(f"  {', '.join(names)}, = args")
    return names, src

  def _host_call(self):
    """Generate ``run_host``'s body: per-argument conversion and per-output wrapping
    unrolled, as ``_device_call`` does."""
    env = {"_Array": Array, "_ndarray": np.ndarray, "_to_host": _to_host, "_aligned": _aligned,
           "_exe": self.exe, "_wrap": _wrap, "_len": len, "_TypeError": TypeError}
    names, src = self._run_prologue()
    for i, (x, (a, d)) in enumerate(zip(names, self.in_dtypes)):
      env[f"_av{i}"], env[f"_dt{i}"] = a, d
      src += [f"  t = type({x})",
              f"  if t is _Array: v{i} = {x}._value",
              f"  elif t is _ndarray and {x}.dtype is _dt{i}: v{i} = {x}",
              f"  else: v{i} = _to_host({x}, _av{i})"]
      if i in self.big_in:
        src.append(f"  v{i} = _aligned({x}, v{i})")
    for k, c in enumerate(self.const_vals):
      env[f"_c{k}"] = c
    ins = [f"_c{k}" for k in range(len(self.const_vals))] + [f"v{i}" for i in range(len(names))]
    src.append(f"  o = _exe({', '.join(ins)})")
    res = []
    for i, (a, w) in enumerate(zip(self.out_avals, self.out_weak)):
      if i in self.float0_out:
        env[f"_z{i}"] = np.zeros(a.shape, dtypes.float0)
        env[f"_z{i}"].flags.writeable = False
        res.append(f"_z{i}")
      else:
        res.append(f"_wrap(o[{i}], {w})")
    src.append(f"  return [{', '.join(res)}]")
    exec(compile("\n".join(src), f"<nbjax.jit {self.name} (host)>", "exec"), env)
    self._hcall = env.pop("run")
    return self._hcall


# closed jaxpr -> {sorted XLA compiler options (a jit's, Lowered.compile's): its executable}
_compiled: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def _executable_for(closed, name, compiler_options=None):
  from nbjax import xla
  per = _compiled.setdefault(closed, {})
  key = xla.option_items(compiler_options)
  exe = per.get(key)
  if exe is None:
    exe = per[key] = (_Interpreted(closed, name, compiler_options or None)
                      if _has_pmap(closed.jaxpr) else
                      _Executable(closed, name, compiler_options or None))
  return exe


def _has_pmap(jaxpr):
  for e in jaxpr.eqns:
    if e.primitive.name in ("xla_pmap", "shard_map"):
      return True
    for v in e.params.values():
      for j in (v if type(v) is tuple else (v,)):
        if isinstance(j, ClosedJaxpr) and _has_pmap(j.jaxpr) or \
            isinstance(j, Jaxpr) and _has_pmap(j):
          return True
  return False


_maps: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _check_unconstrained(shardings, what):
  """JAX's error for ``P.UNCONSTRAINED`` in jit's ``in_shardings``/``out_shardings``."""
  from nbjax.sharding import NamedSharding, PartitionSpec
  leaf = lambda x: x is None or isinstance(x, (PartitionSpec, NamedSharding))
  for s in tree_util.tree_leaves(shardings, is_leaf=leaf):
    spec = s.spec if isinstance(s, NamedSharding) else s
    if isinstance(spec, PartitionSpec) and PartitionSpec.UNCONSTRAINED in tuple(spec):
      raise ValueError(f"Unconstrained dims are not allowed when passed to {what}: {s}")


_constraint_meshes: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _sharding_key(avals):
  from nbjax.interpreters.sharding_types import key
  return key(avals)


def _constraint_mesh(closed):
  """The mesh of the first ``with_sharding_constraint`` (a NamedSharding) in ``closed`` or
  its sub-jaxprs, else None: such a jit runs as one SPMD program over that mesh."""
  hit = _constraint_meshes.get(closed, False)
  if hit is False:
    hit = _constraint_meshes[closed] = _find_constraint_mesh(closed.jaxpr)
  return hit


def _check_committed(wrapped, args, kwargs, flat, mesh):
  """JAX's error for an argument committed to other devices than those of a sharding
  constraint inside the jit."""
  want = set(mesh.devices.flat)
  for i, x in enumerate(flat):
    if type(x) is Array and x._committed and x._pmap is None and x.devices() != want:
      names = pe.DebugInfo("jit", wrapped._fun, args, kwargs, wrapped._static_argnums,
                           wrapped._static_argnames).arg_names
      name = names[i] if names is not None and i < len(names) else f"args[{i}]"
      a = _abstractify(x)
      raise ValueError(
          "Received incompatible devices for jitted computation. Got argument "
          f"{name} of {wrapped._name} with shape {a.str_short(short_dtypes=False)} and with "
          f"device ids {sorted(d.id for d in x.devices())} on platform CPU and "
          "sharding_constraint inside jit with device ids "
          f"{[d.id for d in mesh.devices.flat]} on platform CPU")


def _find_constraint_mesh(jaxpr):
  from nbjax.jaxpr import jaxprs_in_params
  for e in jaxpr.eqns:
    if e.primitive.name == "sharding_constraint":
      s = e.params["sharding"]
      if getattr(s, "_spmd", False) and hasattr(getattr(s, "mesh", None), "devices"):
        return s.mesh
    for j in jaxprs_in_params(e.params):
      m = _find_constraint_mesh(getattr(j, "jaxpr", j))
      if m is not None:
        return m
  return None


def _holds_maps(closed):
  """Whether ``closed`` holds a pmap or shard_map (then it runs as ``_Interpreted``, also
  with sharded inputs: the maps say where their blocks go)."""
  hit = _maps.get(closed)
  if hit is None:
    hit = _maps[closed] = _has_pmap(closed.jaxpr)
  return hit


class _Interpreted:
  """A jaxpr holding a ``pmap`` or ``shard_map``: compiled as one replicated program with
  the maps inline (``pxla.ReplicatedJit``), or, when that cannot be (host callbacks, a
  ``pmap`` given ``devices``), run equation by equation, each map as its own program (then
  the maps' own programs are compiled without ``compiler_options``)."""

  def __init__(self, closed, name, compiler_options=None):
    from nbjax.interpreters import pxla, lowering
    ext = lambda a: isinstance(a.dtype, dtypes.ExtendedDType)  # key arrays: on their data
    self.key_in = [i for i, a in enumerate(closed.in_avals) if ext(a)]
    self.key_out = [(i, a.dtype._impl) for i, a in enumerate(closed.out_avals) if ext(a)]
    closed = lowering.physicalize(closed)
    self.closed, self.name = closed, name
    try:  # one replicated program, the maps inline (pxla.ReplicatedJit)
      self.prog = pxla.ReplicatedJit(closed, name, compiler_options)
    except NotImplementedError:  # host callbacks, pmap(devices=): equation by equation
      self.prog = None
    self.text = self.prog and self.prog.text

  def run(self, args):
    if self.key_in or self.key_out:
      return _Executable._keys_out(self, self._run(_Executable._keys_in(self, args)))
    return self._run(args)

  def _run(self, args):
    if self.prog is not None:
      return self.prog.run(args)
    return eval_jaxpr(self.closed.jaxpr, self.closed.consts, *args)

  def runner(self, out_tree, guarded=False):
    if guarded:
      return None
    unflat = tree_util.unflattener(out_tree)
    return lambda args: unflat(self.run(args))


# ----------------------------------------------------------------------- the primitive

jit_p = Primitive("jit")
jit_p.multiple_results = True
jit_p.pp_same_names = True  # printed, its jaxpr's binders take its operands' names (JAX's)
from nbjax.jaxpr import params_axis_names as _axes  # noqa: E402
jit_p.named_axes = _axes  # vmap(axis_name=...) batches it when its jaxpr uses the name


def _jit_impl(*args, jaxpr, name, **_):
  """Eager rule: compile the jaxpr (cached per jaxpr object) and run it."""
  if _takes_refs(jaxpr):  # mutable array references in or closed over: nbjax.state runs it
    return core.run_state(jaxpr, list(args), name)
  return _executable_for(jaxpr, name).run(args)


_refs_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _takes_refs(closed):
  """Whether ``closed`` takes or closes over mutable array references (eager ``core.Ref``s)."""
  hit = _refs_memo.get(closed)
  if hit is None:
    hit = _refs_memo[closed] = any(type(v.aval) is core.AbstractRef for v in
                                   (*closed.jaxpr.invars, *closed.jaxpr.constvars))
  return hit


def _jit_abstract_eval(*in_avals, jaxpr, name, **_):
  want = jaxpr.in_avals
  if len(in_avals) != len(want) or any(
      a is not w and (a.shape != w.shape or a.dtype != w.dtype)  # (tokens: the same)
      for a, w in zip(in_avals, want)):
    got = ", ".join(a.str_short() for a in in_avals)
    exp = ", ".join(a.str_short() for a in want)
    raise TypeError(f"jit[name={name}] got arguments ({got}) but its jaxpr takes ({exp})")
  return list(jaxpr.out_avals)


# jvp: re-stage the jvp of the inner jaxpr (symbolic-zero tangents are not passed)

_jvp_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _nonzero(t):
  return type(t) is not ad.Zero and core.get_aval(t).dtype != dtypes.float0


def jvp_jaxpr(closed, nonzeros, name):
  """``(jvp_closed_jaxpr, out_nonzeros)``: inputs primals + nonzero tangents, outputs
  primals + nonzero tangents."""
  per = _jvp_cache.setdefault(closed, {})
  hit = per.get(nonzeros)
  if hit is not None:
    return hit
  in_avals = closed.in_avals
  t_avals = [a.to_tangent_aval() for a, nz in zip(in_avals, nonzeros) if nz]
  n = len(in_avals)
  box = []

  def fun(*args):
    primals, tans = list(args[:n]), iter(args[n:])
    trace = ad.JVPTrace(core.get_current_trace(), core.new_trace_tag())
    ins = [ad.maybe_jvp_tracer(trace, p, next(tans)) if nz else p
           for p, nz in zip(primals, nonzeros)]
    with core.set_current_trace(trace):
      outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
    pairs = [trace.to_primal_tangent_pair(o) for o in outs]
    out_nz = [_nonzero(t) for _, t in pairs]
    box.append(out_nz)
    return [p for p, _ in pairs] + [t for (_, t), nz in zip(pairs, out_nz) if nz]

  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, [*in_avals, *t_avals], fun_name=name)
  res = per[nonzeros] = (ClosedJaxpr(jaxpr, consts), tuple(box[0]))
  return res


def _jit_jvp(primals, tangents, *, jaxpr, name, **params):
  nonzeros = tuple(_nonzero(t) for t in tangents)
  new, out_nz = jvp_jaxpr(jaxpr, nonzeros, name)
  outs = jit_p.bind(*primals, *[t for t, nz in zip(tangents, nonzeros) if nz],
                    jaxpr=new, name=name, **params)
  n = len(jaxpr.out_avals)
  primals_out, tans = outs[:n], iter(outs[n:])
  tangents_out = [next(tans) if nz else ad.Zero(a.to_tangent_aval())
                  for a, nz in zip(jaxpr.out_avals, out_nz)]
  return primals_out, tangents_out


# jet: re-stage the Taylor propagation of the inner jaxpr (every series passed, zeros too)

_jet_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def jet_jaxpr(closed, order, term_avals, name):
  """The closed jaxpr of ``closed``'s jet: inputs primals then each input's ``order`` terms
  (``term_avals``), outputs primals then each output's ``order`` terms."""
  per = _jet_cache.setdefault(closed, {})
  hit = per.get((order, term_avals))
  if hit is not None:
    return hit
  n = len(closed.in_avals)

  def fun(*args):
    terms = args[n:]
    series = [terms[i * order:(i + 1) * order] for i in range(n)]
    outs, out_series = jet.jet_fun(functools.partial(eval_jaxpr, closed.jaxpr, closed.consts),
                                   args[:n], series, order)
    return [*outs, *(t for ts in out_series for t in ts)]

  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, [*closed.in_avals, *term_avals],
                                               fun_name=name)
  res = per[(order, term_avals)] = ClosedJaxpr(jaxpr, consts)
  return res


def _jit_jet(primals, series, *, jaxpr, name, **params):
  order = len(series[0])
  terms = [t for ts in series for t in ts]
  new = jet_jaxpr(jaxpr, order, tuple(core.get_aval(t) for t in terms), name)
  outs = jit_p.bind(*primals, *terms, jaxpr=new, name=name, **params)
  n = len(jaxpr.out_avals)
  return outs[:n], [outs[n + i * order:n + (i + 1) * order] for i in range(n)]


# batching: re-stage the vmap of the inner jaxpr

_batch_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def batch_jaxpr(closed, axis_size, dims, axis_name, name, vals=None):
  """``(batched_closed_jaxpr, out_dims)`` for inputs batched along ``dims`` (None: unmapped);
  ``vals``: the batched operands, whose avals' shardings (Explicit mesh axes) it takes."""
  per = _batch_cache.setdefault(closed, {})
  typed = vals is not None and core.sharding_rule_hook is not None
  key = (axis_size, dims, axis_name, typed and _sharding_key(map(core.get_aval, vals)))
  hit = per.get(key)
  if hit is not None:
    return hit
  in_avals = [a if d is None else core.get_aval(v) if typed else
              a.update(shape=(*a.shape[:d], axis_size, *a.shape[d:]))
              for a, d, v in zip(closed.in_avals, dims, vals or dims)]
  box = []

  def fun(*args):
    trace = batching.BatchTrace(core.get_current_trace(), core.new_trace_tag(), axis_size,
                                axis_name)
    ins = [a if d is None else batching.BatchTracer(trace, a, d) for a, d in zip(args, dims)]
    with core.set_current_trace(trace), core.extend_axis_env(axis_name, axis_size):
      outs = eval_jaxpr(closed.jaxpr, closed.consts, *ins)
    vals, odims = core.unzip2(trace.to_batch_info(o) for o in outs)
    box.append(tuple(odims))
    return vals

  jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, in_avals, fun_name=name)
  res = per[key] = (ClosedJaxpr(jaxpr, consts), box[0])
  return res


def _jit_batch(axis_data, vals, dims, *, jaxpr, name, **params):
  dims = tuple(None if d is batching.not_mapped else int(d) for d in dims)
  new, out_dims = batch_jaxpr(jaxpr, axis_data.size, dims, axis_data.name, name, vals)
  outs = jit_p.bind(*vals, jaxpr=new, name=name, **params)
  return outs, [batching.not_mapped if d is None else d for d in out_dims]


_jit_batch.wants_axis_data = True


def _jit_transpose(cts, *args, jaxpr, name, **params):
  """Transpose of a call: stage ``ad.backward_pass`` of the inner jaxpr and call it with jit.
  Known args are residuals; undefined ones (linear inputs) get the cotangents back."""
  undef = [ad.is_undefined_primal(x) for x in args]
  res = [x for x, u in zip(args, undef) if not u]
  used = [type(c) is not ad.Zero for c in cts]
  cts = [c for c, u in zip(cts, used) if u]
  res_avals = [core.get_aval(x) for x in res]
  ct_avals = [core.get_aval(c) for c in cts]
  # the staged transpose, kept per jaxpr (so a repeated backward pass finds it compiled)
  per = _transpose_memo.setdefault(jaxpr, {})
  key = (tuple(undef), tuple(used), tuple(res_avals), tuple(ct_avals), name)
  got = per.get(key)
  if got is None:
    got = _stage_transpose(jaxpr, name, args, undef, used, res_avals, ct_avals)
    if not any(isinstance(c, core.Tracer) for c in got[1]):
      per[key] = got
  tj, consts = got
  outs = iter(jit_p.bind(*consts, *res, *cts, jaxpr=tj, name=f"transpose({name})", **params))
  return [next(outs) if u else None for u in undef]


_transpose_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _stage_transpose(jaxpr, name, args, undef, used, res_avals, ct_avals):
  """``(closed jaxpr, consts)``: ``ad.backward_pass`` of ``jaxpr`` staged, taking the
  residuals then the (used) output cotangents."""
  if not all(used):  # outputs with zero cotangents (a boolean one) are not transposed
    jaxpr = ClosedJaxpr(pe.dce_jaxpr(jaxpr.jaxpr, used, instantiate=True)[0], jaxpr.consts)
  nres = len(res_avals)

  def fun(*ins):
    r, c = iter(ins[:nres]), list(ins[nres:])
    full = [ad.UndefinedPrimal(a.aval) if u else next(r) for a, u in zip(args, undef)]
    outs = ad.backward_pass(jaxpr.jaxpr, jaxpr.consts, full, c)
    return [ad.instantiate_zeros(o) for o, u in zip(outs, undef) if u]

  tj, _, consts = pe.trace_to_jaxpr_dynamic(fun, [*res_avals, *ct_avals],
                                            fun_name=f"transpose({name})")
  return ClosedJaxpr(pe.convert_constvars_jaxpr(tj), []), consts


def _jit_partial_eval(in_unknowns, *, jaxpr, name, saveable=False, **params):
  """Partial-eval rule: ``(known_params, unknown_params, out_unknowns, num_res)``. The known
  call computes the known outputs and the residuals; the unknown call takes the residuals
  then the unknown inputs (seed 003's ``partial_eval_jaxpr`` on the inner jaxpr). Under a
  ``checkpoint`` policy (``saveable`` not False) the policy applies inside the call."""
  # (kept per jaxpr, as JAX's: the known call's jaxpr is then the same object each time,
  # found compiled: vjp in a loop)
  per = _pe_memo.setdefault(jaxpr, {})
  key = (tuple(in_unknowns), saveable)
  try:
    got = per.get(key)
  except TypeError:  # (an unhashable policy)
    key = got = None
  if got is None:
    got = (pe.partial_eval_jaxpr(jaxpr, in_unknowns) if saveable is False else
           pe.partial_eval_jaxpr_custom(jaxpr, in_unknowns, saveable))
    if key is not None and got[0] is not jaxpr and got[1] is not jaxpr:  # (a value holding
      per[key] = got                                                    # its key never dies)
  known, unknown, out_unknowns, num_res = got
  return (dict(params, jaxpr=known, name=name), dict(params, jaxpr=unknown, name=name),
          out_unknowns, num_res)


_pe_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # jaxpr -> {unknowns: split}


def _jit_lowering(ctx, *args, jaxpr, name, **_):
  from nbjax.interpreters import mlir
  return mlir.call_jaxpr(ctx, jaxpr, args, name=name)


jit_p.make_eager = lambda prim, f_small, f_large, thr: _jit_impl
registry.register(
    jit_p, family="call", impls={"python": _jit_impl}, abstract_eval=_jit_abstract_eval,
    jvp=_jit_jvp, batch=_jit_batch, transpose=_jit_transpose,
    meta=dict(differentiable=True, note="call primitive: its jaxpr runs as one XLA executable"))
jit_p.jet = _jit_jet
jit_p.partial_eval = pe.forward_inputs(_jit_partial_eval)
jit_p.partial_eval_custom = lambda saveable, unknowns, **params: jit_p.partial_eval(
    unknowns, saveable=saveable, **params)


def _jit_recompute_custom(saveable, eqn, needed):
  """A known jit call whose ``needed`` outputs a ``checkpoint`` recomputes, split under the
  policy ``saveable``: ``(known_eqn, recompute_eqn, residuals)``; the known call also returns
  the residuals the policy saves, the recomputing call maps them (and the inputs it reads)
  to the needed outputs."""
  jaxpr = eqn.params["jaxpr"]
  n_in = len(eqn.invars)
  jk, ju, _, nres = pe.partial_eval_jaxpr_custom(jaxpr, [False] * n_in, saveable,
                                                 ensure_out=needed)
  kj = jk.jaxpr
  n_out = len(kj.outvars) - nres
  pos = {v: i for i, v in enumerate(kj.invars)}
  res_in = [eqn.invars[pos[v]] if v in pos else None for v in kj.outvars[n_out:]]
  new = [Var(v.aval) for v, r in zip(kj.outvars[n_out:], res_in) if r is None]
  kj = kj.replace(outvars=kj.outvars[:n_out] + [v for v, r in zip(kj.outvars[n_out:], res_in)
                                                if r is None])
  known = eqn.replace(outvars=list(eqn.outvars) + new,
                      params=dict(eqn.params, jaxpr=ClosedJaxpr(kj, jk.consts)))
  it = iter(new)
  ins = [next(it) if r is None else r for r in res_in]
  recompute = eqn.replace(invars=ins, outvars=[v for v, n in zip(eqn.outvars, needed) if n],
                          params=dict(eqn.params, jaxpr=ju))
  return known, recompute, new


jit_p.recompute_custom = _jit_recompute_custom


pe.dce_rules[jit_p] = pe.dce_call_rule  # (JAX's dce_jaxpr_pjit_rule)
jit_p.lowerings["cpu"] = _jit_lowering

# ----------------------------------------------------------------------- abstract values


_abstractify = core.abstractify


def _valid(x):
  try:
    _abstractify(x)
    return True
  except TypeError:
    return False


def _sds(aval):
  if aval is core.abstract_token:
    return aval
  return core.ShapeDtypeStruct(aval.shape, aval.dtype, aval.weak_type)


# ----------------------------------------------------------------------- the wrapper

_SCALARS = (bool, int, float, complex)
_NP_SCALARS = frozenset(np.dtype(c).type for c in "?bhilqBHILQefdgFDG")
_ctx, _eval_trace = core._ctx, core.eval_trace


def _leaf_key(flat):
  """The signature of flat arguments (``config.trace_key``, then shape/dtype/weak per array, the type
  per scalar) without building avals; ``None`` if a leaf is anything else (a tracer, ...)."""
  key = [config.trace_key]
  for a in flat:
    t = type(a)
    if t is Array:
      if a._pmap is not None and a._pmap[0]._spmd:
        return None  # a sharded input: the SPMD path (_call) picks its sharding up
      b = a._buf  # a jit output, or an Array jit has seen: no host view (it has no _value)
      if b is None:
        v = a._value
        key.append((v.shape, v.dtype, a._weak))
      else:
        key.append((b.aval, a._weak))  # the interned xla._Aval of the buffer's shape, dtype
    elif t in _SCALARS or t in _NP_SCALARS:
      key.append(t)
    elif t is np.ndarray:
      key.append((a.shape, a.dtype, False))
    elif isinstance(getattr(a, "dtype", None), dtypes.ExtendedDType) and hasattr(a, "aval"):
      if isinstance(a, Tracer):
        return None
      key.append((a.shape, a.dtype, t))  # an eager key array (nbjax.prng)
    else:
      return None
  return tuple(key)


_MAX_FLATTENERS = 4


class _Entry:
  """One traced signature: the closed jaxpr, output treedef, and (lazily) its executable."""
  __slots__ = ("closed", "out_tree", "name", "exe", "unflatten", "compiler_options",
               "in_tree", "refs", "__weakref__")

  def __init__(self, closed, out_tree, name, compiler_options=None, in_tree=None):
    self.closed, self.out_tree, self.name = closed, out_tree, name
    self.in_tree = in_tree  # of the (non-static) (args, kwargs)
    self.compiler_options = compiler_options
    self.exe = None
    self.refs = _takes_refs(closed)  # mutable array references: run by nbjax.state
    self.unflatten = _first if out_tree.num_leaves == 1 and out_tree.node is None else \
        tree_util.unflattener(out_tree)

  def executable(self):
    if self.exe is None:
      self.exe = _executable_for(self.closed, self.name, self.compiler_options)
    return self.exe


def _first(outs):
  return outs[0]


def _miss(args):
  return MISS


_all_jitted: "weakref.WeakSet[JitWrapped]" = weakref.WeakSet()


def clear_caches():
  """Forget every jitted function's traces and executables (each retraces on its next
  call), and the in-process compile cache, as ``jax.clear_caches``; also drop the eager
  output pool's free buffers and trim the heap (``array.clear_pool``)."""
  from nbjax import array, xla
  for f in list(_all_jitted):
    f.clear_cache()
  _compiled.clear()
  xla.clear_compile_cache()
  array.clear_pool()


_trace_caches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_miss_callsites: set = set()  # where a never-seen function missed (explain_cache_misses)


def _explain_miss(wrapped, key, avals, args, kwargs):
  """JAX's ``explain_cache_misses`` warning for a tracing cache miss: where, and how the
  closest previous key of the function differs (context, input pytree, static arguments,
  input types), or that the function was never seen (and whether another function missed
  at the same call site: one re-defined on every call)."""
  fun = wrapped._fun
  code = getattr(inspect.unwrap(fun), "__code__", None)
  if code is not None and pe._internal(code.co_filename):
    return
  where = f" defined at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
  callsite = pe.user_source_info()
  msg = [f"TRACING CACHE MISS at {callsite}:"]
  keys = list(wrapped._cache)
  if not keys:
    msg.append(f"  never seen function:\n    {wrapped._name} id={id(fun)}{where}")
    if callsite in _miss_callsites:
      msg.append("  but seen another function defined on the same line; maybe the function "
                 "is\n  being re-defined repeatedly, preventing caching?")
    else:
      _miss_callsites.add(callsite)
    _log.warning("\n".join(msg))
    return
  msg.append(f"  for {wrapped._name}{where}")
  names = pe.DebugInfo("jit", fun, args, kwargs, wrapped._static_argnums,
                       wrapped._static_argnames).arg_names
  diff = min(_key_diff(key, k, avals, names) for k in keys)[-1]
  msg.append("  all previously seen cache keys differ. For the closest previous key:")
  msg.append("  " + diff)
  _log.warning("\n".join(msg))


def _key_diff(new, old, avals, names):
  """``(severity, number of differences, explanation)`` of two trace cache keys (JAX's
  ``diff_tracing_cache_keys``; lower severity is closer)."""
  (tree, types, statics, ctx, axes, *_), (tree0, types0, statics0, ctx0, axes0, *_) = new, old
  if ctx != ctx0 or axes != axes0:
    lines = [f"  * {'user_context' if n.startswith('user_context') else 'jax_' + n} differs: "
             f"now {a} and before {b}" for n, a, b in zip(config.trace_options, ctx, ctx0)
             if a != b]
    if axes != axes0:
      lines.append(f"  * axis environment differs: now {axes} and before {axes0}")
    return (0, len(lines), "Tracing context doesn't match, e.g. due to config or context "
            "manager.\n" + "\n".join(lines))
  if tree != tree0:
    lines = [f"  * at input path {tree_util.keystr(tuple(p))}, now {a} and before {b}, so {w}"
             for p, a, b, w in tree_util.tree_diffs(tree, tree0)]
    return 1, len(lines), "different input pytree:\n" + "\n".join(lines)
  if statics != statics0:
    return 2, 1, "different static arguments."
  lines, weak = [], False
  for name, a, t0 in zip(names or [""] * len(avals), avals, types0):
    b = ShapedArray(*t0[:3])  # (a mutable array reference's has a 4th entry)
    if (a.shape, a.dtype, a.weak_type) != t0[:3]:
      sa, sb = a.str_short(short_dtypes=True), b.str_short(short_dtypes=True)
      if a.weak_type != b.weak_type:
        weak = True
        sa, sb = sa + f"{{weak_type={a.weak_type}}}", sb + f"{{weak_type={b.weak_type}}}"
      lines.append(f"  * at {name}, now {sa} and before {sb}")
  if lines:
    return (3, len(lines), "different input types:\n" + "\n".join(lines)
            + ("https://docs.jax.dev/en/latest/type_promotion.html#weak-types" if weak else ""))
  return 4, 0, "cache miss explanation unavailable"


def _shared_cache(fun, options):
  """The trace cache of jits of ``fun`` with these options (a fresh one when ``fun`` or the
  options cannot key it)."""
  try:
    if options[-1]:  # in/out shardings: not keyed
      raise TypeError
    options = options[:5] + (tuple(sorted(options[5].items())) if options[5] else None,)
    per = _trace_caches.get(fun)
    if per is None:
      per = _trace_caches[fun] = {}
    return per.setdefault(options, {})
  except TypeError:  # unhashable (or not weakly referenceable) function or options
    return {}


def _fun_name(fun):
  """JAX's name for a function: its ``__name__``, a partial's function's, else a default."""
  name = getattr(fun, "__name__", None)
  if name is not None:
    return name
  return _fun_name(fun.func) if isinstance(fun, functools.partial) else "<unnamed function>"


def _ensure_tuple(x):
  if x is None:
    return ()
  if isinstance(x, (int, str)):
    return (x,)
  return tuple(x)


def _unpickle_jit(fun, options):
  return JitWrapped(fun, **options)


class JitWrapped:
  """A jitted function: call it, or ``.lower(*args)``, ``.trace(*args)``, ``.eval_shape``."""

  def __init__(self, fun, *, static_argnums=None, static_argnames=None, donate_argnums=None,
               donate_argnames=None, keep_unused=False, inline=False, name=None,
               in_shardings=None, out_shardings=None, compiler_options=None, device=None):
    if isinstance(fun, staticmethod):
      raise TypeError(f"staticmethod arguments are not supported, got {fun}")
    if not callable(fun):
      raise TypeError(f"Expected a callable value, got {fun!r}")
    if inspect.isgeneratorfunction(fun):
      raise TypeError(f"Expected a function, got a generator function: {fun}")
    self._options = dict(  # (for pickling: JitWrapped(fun, **options) again)
        static_argnums=static_argnums, static_argnames=static_argnames,
        donate_argnums=donate_argnums, donate_argnames=donate_argnames, keep_unused=keep_unused,
        inline=inline, name=name, in_shardings=in_shardings, out_shardings=out_shardings,
        compiler_options=compiler_options, device=device)
    self._fun = fun
    self._device = device  # (outputs committed to it: _call_placed)
    if device is not None:
      from nbjax.array import _default_device
      self._placed_dev = _default_device(device)
      if self._placed_dev is not None:  # (the default device: outputs are where they'd be)
        core.enable_placement()
    self._compiler_options = dict(compiler_options) if compiler_options else None
    self.__wrapped__ = fun
    functools.update_wrapper(self, fun, updated=())
    # JAX: the function's own attributes show through the wrapper (not private ones, which
    # for a jit of a jit are the inner wrapper's state)
    self.__dict__.update({k: v for k, v in getattr(fun, "__dict__", {}).items()
                          if not k.startswith("_") and k not in self.__dict__})
    self._name = name or _fun_name(fun)
    # JAX: given both, static_argnums and static_argnames are taken as they are (they may
    # disagree); given one, the other is inferred from the signature
    infer = static_argnums is None or static_argnames is None
    static_argnums = tuple(int(i) for i in _ensure_tuple(static_argnums))
    static_argnames = tuple(_ensure_tuple(static_argnames))
    try:
      sig = inspect.signature(fun)
    except (TypeError, ValueError):
      sig = None
    if sig is None and donate_argnames is not None:
      raise ValueError(f"Getting the signature of function {fun} failed. "
                       "Pass donate_argnums instead of donate_argnames.")
    if sig is not None and not infer:
      _validate_argnums(sig, static_argnums, "static_argnums")
      _validate_argnames(sig, static_argnames, "static_argnames")
    if sig is not None and infer:
      _check_static_donate_disjoint(sig, static_argnums, static_argnames, donate_argnums,
                                    donate_argnames)
      params = list(sig.parameters.values())
      pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
      _validate_argnums(sig, static_argnums, "static_argnums")
      _validate_argnums(sig, tuple(int(i) for i in _ensure_tuple(donate_argnums)),
                        "donate_argnums")
      _validate_argnames(sig, static_argnames, "static_argnames")
      _validate_argnames(sig, tuple(_ensure_tuple(donate_argnames)), "donate_argnames")
      nums = [i if i >= 0 else i + len(pos) for i in static_argnums]
      names = set(static_argnames)
      # JAX: static_argnums and static_argnames name the same parameters both ways
      names.update(pos[i].name for i in nums if 0 <= i < len(pos)
                   and pos[i].kind is not inspect.Parameter.POSITIONAL_ONLY)
      nums = set(nums)
      nums.update(i for i, p in enumerate(pos) if p.name in static_argnames)
      static_argnums, static_argnames = tuple(sorted(nums)), tuple(sorted(names))
    self._static_argnums = static_argnums
    self._static_argnames = static_argnames
    # accepted (host buffers are not donated), resolved as JAX's for ``args_info``
    self._donate_argnums, self._donate_argnames = _infer_argnums_and_argnames(
        sig, donate_argnums, donate_argnames)
    self._keep_unused = keep_unused
    self._inline = inline
    self._in_shardings, self._out_shardings = in_shardings, out_shardings
    _check_unconstrained(in_shardings, "in_shardings")
    _check_unconstrained(out_shardings, "out_shardings")
    self._sharded = any(_places(s) for s in (in_shardings, out_shardings))
    self._simple = not static_argnums and not static_argnames
    # donated inputs are deleted after a call (``_run_donating``), so no fast path serves it
    self._donating = bool(self._donate_argnums or self._donate_argnames)
    self._donations = weakref.WeakKeyDictionary()  # _Entry -> flat inputs its outputs reuse
    if self._donating:
      self._simple = False
    # as JAX's: the traces are cached per function, shared by every jit of it with the same
    # options (jit(f)(x) in a loop traces once)
    self._cache = _shared_cache(fun, (static_argnums, static_argnames, name, keep_unused,
                                      inline, self._compiler_options, self._sharded))
    self._flatteners = []  # (treedef of (args, {}), generated flatten of args)
    self._fast = {}  # (treedef, _leaf_key) -> the executable's runner for that signature
    # the latest signature's guarded run (``MISS`` for other arguments), and for pytree
    # arguments its flattener: most calls repeat it, and need no key
    self._mono = self._mono_flat = _miss
    self._trace_count = 0
    _all_jitted.add(self)

  def __repr__(self):
    try:
      return f"<PjitFunction of {self.__wrapped__!r}>"
    except Exception:  # noqa: BLE001 -- as JAX's: a repr that fails, or no __wrapped__
      return "<PjitFunction>"

  def __get__(self, obj, objtype=None):
    if obj is None:
      return self
    return functools.partial(self, obj)

  def __reduce__(self):  # as JAX's: the function and jit's options (cloudpickle of a jit)
    return _unpickle_jit, (self._fun, self._options)

  def __getstate__(self):  # (JAX's keys that describe the function)
    return {"function_name": self._name, "fun": self._fun,
            "static_argnums": self._static_argnums, "static_argnames": self._static_argnames}

  # -------------------------------------------------------------- calling
  def __call__(self, *args, **kwargs):
    # fast path, eager: the latest signature's guarded run, else positional array arguments
    # keyed by their leaves (no avals built)
    __tracebackhide__ = True  # noqa: F841  (an API boundary: nbjax.traceback_util)
    try:
      if _placement[0] and _ctx.trace is _eval_trace:  # (arrays have been committed)
        return self._call_placed(args, kwargs)
      if not kwargs and _ctx.trace is _eval_trace:
        if not _state.disabled:
          r = self._mono(args)
          if r is not MISS:
            return r
        key = _leaf_key(args)
        if key is not None:
          run = self._fast.get(key)
          if run is not None and not _state.disabled:
            _stats["fast_calls"] += 1
            return run(args)
          return self._call(args, kwargs, key if self._simple else None)
      return self._call_tree(args, kwargs)
    except Exception as e:  # (a try costs nothing until it catches)
      if type(e) is OverflowError:
        try:
          self._overflow_error(args, kwargs)
        except OverflowError as e2:
          traceback_util.reraise_filtered(e2)
          raise
      traceback_util.reraise_filtered(e)
      raise

  def _call_placed(self, args, kwargs):
    """A call once arrays have been committed to devices (``core.enable_placement``): the
    outputs committed to ``device=`` if given, else to the device of the committed inputs
    (JAX's computation follows data; inputs committed to two devices are an error)."""
    flat = tree_util.tree_leaves((args, kwargs))
    if self._device is not None:
      committed, dev = True, self._placed_dev
    else:
      committed, dev = core.committed_device(self._name, flat, lambda: pe.DebugInfo(
          "jit", self._fun, args, kwargs, self._static_argnums, self._static_argnames).arg_names)
    out = self._call_tree(args, kwargs)
    if not committed:
      return out
    return tree_util.tree_map(lambda o: core.commit_outputs(o, dev, flat), out)

  def _overflow_error(self, args, kwargs):
    """JAX's OverflowError for a Python int argument out of the default int's range."""
    info = np.iinfo(dtypes.canonicalize_dtype(np.int64))
    dyn_args, dyn_kwargs, _ = self._split_statics(args, kwargs)
    flat = tree_util.tree_leaves((dyn_args, dyn_kwargs))
    names = pe.DebugInfo("jit", self._fun, args, kwargs, self._static_argnums,
                         self._static_argnames).arg_names
    for x, name in zip(flat, names):
      if type(x) is int and not info.min <= x <= info.max:
        raise OverflowError("An overflow was encountered while parsing an argument to a jitted "
                            f"computation, whose argument path is {name}. Got {type(x)} with "
                            f"value {x}") from None

  def _call_tree(self, args, kwargs):
    """``__call__`` with keyword or pytree arguments (or under a transformation)."""
    if _ctx.trace is _eval_trace and self._simple:
      key, in_tree = None, None
      if kwargs:
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        key = _leaf_key(flat)
      else:
        flat = self._mono_flat(args)
        if flat is not MISS and flat is not None and not _state.disabled:
          r = self._mono(flat)
          if r is not MISS:
            return r
        for in_tree, flat_fn in self._flatteners:  # a structure seen before: generated code
          flat = flat_fn(args)
          if flat is not None:
            key = _leaf_key(flat)
            break
        if key is None:
          flat, in_tree = tree_util.tree_flatten((args, kwargs))
          key = _leaf_key(flat)
          if key is not None and len(self._flatteners) < _MAX_FLATTENERS:
            flat_fn = tree_util.flattener(in_tree.kids[0])
            if flat_fn is not None:
              self._flatteners.append((in_tree, flat_fn))
      if key is not None:
        key = (in_tree, key)
        run = self._fast.get(key)
        if run is not None and not _state.disabled:
          _stats["fast_calls"] += 1
          return run(flat)
        return self._call(args, kwargs, key)
    return self._call(args, kwargs, None)

  def _call(self, args, kwargs, fast_key):
    if _state.disabled:
      return self._fun(*args, **kwargs)
    trace = core.get_current_trace()
    if trace is core.debug_trace:  # top level under jax_debug_nans/jax_debug_infs
      return self._call_checked(args, kwargs)
    if trace is core.eval_trace:
      if config._flags["no_execution"]:  # (in jit's key: no fast path of this runs either)
        raise RuntimeError(f"JAX tried to execute function jit({self._name}), but the "
                           "no_execution config option is set")
      for x in tree_util.tree_leaves((args, kwargs)):
        if isinstance(x, (Tracer, core.ShapeDtypeStruct)):
          if isinstance(x, Tracer):
            raise core.escaped_tracer_error(x)
          self._not_a_value(args, kwargs)
    entry, flat = self._entry(args, kwargs, fast_key)
    consts = entry.closed.consts
    if trace is core.eval_trace:
      if entry.refs:
        return entry.unflatten(core.run_state(entry.closed, flat, self._name))
      if (self._sharded or any(type(x) is Array and x._pmap is not None and x._pmap[0]._spmd
                               for x in flat) or _constraint_mesh(entry.closed) is not None
          ) and not _holds_maps(entry.closed):
        exe = self._spmd_executable(entry, args, kwargs, flat)
        if self._donating and not core._debugging():
          return entry.unflatten(self._run_donating(entry, flat, exe.run))
        if self._simple and not kwargs:
          self._spmd_mono(exe, entry, args)
        return entry.unflatten(exe.run(flat))
      if self._donating and not core._debugging():  # (JAX's: no donation under debug_nans,
        return entry.unflatten(self._run_donating(entry, flat))  # which may rerun the call)
      return entry.unflatten(entry.executable().run(flat))
    if self._compiler_options and _staging(trace):
      raise ValueError(
          "`compiler_options` can only be passed to top-level `jax.jit`. Got "
          f"compiler_options={self._compiler_options} specified on a nested jit with name: "
          f"{self._name} and source info: {pe.user_source_info()}")
    if self._inline and isinstance(trace, pe.DynamicJaxprTrace):
      return entry.unflatten(eval_jaxpr(entry.closed.jaxpr, consts, *flat))
    if any(isinstance(c, Tracer) or type(c) is core.Ref for c in consts):
      # closed over tracers of an enclosing transformation (or mutable array references):
      # pass them as explicit inputs
      closed = ClosedJaxpr(pe.convert_constvars_jaxpr(entry.closed.jaxpr), [])
      outs = jit_p.bind(*consts, *flat, jaxpr=closed, name=self._name)
    else:
      outs = jit_p.bind(*flat, jaxpr=entry.closed, name=self._name)
    return entry.unflatten(outs)

  def _run_donating(self, entry, flat, run=None):
    """Run ``entry`` on ``flat`` (with ``run``, a sharded jit's executable, else its own),
    then delete the donated input arrays an output reuses (each output takes the first
    donated input of its shape and dtype left), as JAX's: reading one afterwards raises
    'Array has been deleted'. Passing such an array twice is JAX's error."""
    used = self._donations.get(entry)
    if used is None:
      flags = _donated_flags(self, entry.in_tree)
      if self._sharded or self._in_shardings is not None or self._out_shardings is not None:
        _check_donated_layouts(self, entry, flags)
      used = self._donations[entry] = _donation_plan(flags, entry.closed.in_avals,
                                                     entry.closed.out_avals)[0]
    for i in used:
      for j, x in enumerate(flat):
        if x is flat[i] and j != i:
          from nbjax import xla
          raise xla.ensure_jaxlib()._jax.JaxRuntimeError(
              "INVALID_ARGUMENT: Attempt to use a buffer that was previously donated in the "
              f"same call to Execute() (flattened argument {max(i, j)}, replica 0, partition "
              f"0, first use: {min(i, j)}). Toy example for this bug: `f(donate(a), a)`.")
    outs = (run or entry.executable().run)(flat)
    for i in used:
      x = flat[i]
      if type(x) is Array and not any(o is x for o in outs):
        x.delete()
    return outs

  def _call_checked(self, args, kwargs):
    """An eager call under ``jax_debug_nans``/``jax_debug_infs``: run compiled; if an output
    holds a NaN (inf), call the Python function itself (the de-optimized version, with these
    very arguments) to find the operation that produced it, as JAX's ``jit`` does. Under a
    transfer guard (``core.host_to_device``) the host values among its arguments are
    checked first."""
    if core.h2d_guard is not None:
      for x in tree_util.tree_leaves(self._split_statics(args, kwargs)[:2]):
        if getattr(x, "aval", None) is None:
          core.host_to_device(x)
    with core.set_current_trace(core.eval_trace):
      out = self._call(args, kwargs, None)
    bad = core._invalid(tree_util.tree_leaves(out))
    if bad is None:
      return out
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the "
          "de-optimized version.")
    try:
      self._fun(*args, **kwargs)
    except (FloatingPointError, ZeroDivisionError) as e:
      raise e from None
    raise FloatingPointError(
        f"{('jit(' + self._name + ')', bad)}. Because jax_config.debug_nans.value and/or "
        "config.jax_debug_infs is set, the de-optimized function (i.e., the function as if the "
        "`jit` decorator were removed) was called in an attempt to get a more precise error "
        "message. However, the de-optimized function did not produce invalid values during its "
        "execution. This behavior can result from `jit` optimizations causing the invalid "
        "value to be produced. It may also arise from having nan/inf literals as inputs or "
        "outputs, like `jax.jit(lambda ...: jax.numpy.nan)(...)`. \n\nIt may be possible to "
        "avoid the invalid value by removing the `jit` decorator, at the cost of losing "
        "optimizations. \n\nIf you see this error, consider opening a bug report at "
        "https://github.com/jax-ml/jax.") from None

  def _not_a_value(self, args, kwargs):
    """JAX's error for a ``ShapeDtypeStruct`` among the arguments of an eager call (under a
    trace it stands for a value of its type)."""
    dyn_args, dyn_kwargs, _ = self._split_statics(args, kwargs)
    flat = tree_util.tree_leaves((dyn_args, dyn_kwargs))
    i, x = next((i, x) for i, x in enumerate(flat) if type(x) is core.ShapeDtypeStruct)
    names = pe.DebugInfo("jit", self._fun, args, kwargs, self._static_argnums,
                         self._static_argnames).arg_names
    name = names[i] if names is not None and i < len(names) else ""
    aval = _abstractify(x).str_short(short_dtypes=False)
    raise TypeError(f"Argument '{name}' of shape {aval} of type {type(x)} is not a valid JAX "
                    "type.")

  def _spmd_executable(self, entry, args, kwargs, flat, dynamic=False):
    """The SPMD executable for these arguments: ``in_shardings`` (a prefix of the positional
    arguments), else a sharded input's own sharding, else replicated; ``out_shardings``.
    ``dynamic``: ``args``/``kwargs`` are the non-static ones already (a ``Compiled``'s)."""
    from nbjax.interpreters import spmd
    dyn_args, dyn_kwargs = (args, kwargs) if dynamic else self._split_statics(args, kwargs)[:2]
    n_kw = len(tree_util.tree_leaves(dyn_kwargs))
    ins = spmd.flatten_shardings("pjit in_shardings", dyn_args, self._in_shardings)
    ins = ins + [None] * n_kw
    spmd.check_formats("jit in_shardings", ins, entry.closed.in_avals)
    ins = [spmd._resolve(s, None, "jit in_shardings") for s in ins]
    for s, x in zip(ins, flat):  # (JAX's: a committed array is not resharded to in_shardings)
      if s is not None and spmd.is_sharded(x) and x.committed and \
          s._hlo_key(x.ndim) != x._pmap[0]._hlo_key(x.ndim):
        raise ValueError("Sharding passed to jit does not match the sharding on the "
                         f"respective arg. Got jit sharding: {s},\narg sharding: "
                         f"{x._pmap[0]} for arg type: {x.aval}")
    ins = [x._pmap[0] if s is None and spmd.is_sharded(x) else s for s, x in zip(ins, flat)]
    outs_tree = entry.out_tree.unflatten([0] * entry.out_tree.num_leaves)
    outs = spmd.flatten_shardings("pjit out_shardings", outs_tree, self._out_shardings)
    spmd.check_formats("jit out_shardings", outs, entry.closed.out_avals)
    outs = [spmd._resolve(s, None, "jit out_shardings") for s in outs]
    if core.sharding_rule_hook is not None:  # (Explicit mesh axes: as the out avals say)
      outs = spmd.typed_out_shardings(outs, entry.closed.out_avals, ins)
    mesh = _constraint_mesh(entry.closed)
    if mesh is not None and all(s is None for s in ins + outs):
      _check_committed(self, args, kwargs, flat, mesh)
    return spmd.executable(entry.closed, self._name, ins, outs, mesh=mesh)

  def _spmd_mono(self, exe, entry, args):
    """Make ``exe``'s guarded runner (``SpmdExecutable.runner``) the monomorphic fast path:
    the next calls with arguments already placed as it takes them skip the general path."""
    runs = exe.__dict__.setdefault("_runners", {})
    mono = runs.get(entry.out_tree, MISS)
    if mono is MISS:
      mono = runs[entry.out_tree] = exe.runner(entry.out_tree)
    if mono is None:
      return
    kids = tree_util.tree_structure(args)
    flat_fn = _miss if all(k.node is None for k in kids.kids) else tree_util.flattener(kids)
    if flat_fn is not None:
      self._mono, self._mono_flat = mono, flat_fn

  def _split_statics(self, args, kwargs):
    if self._simple:
      return args, kwargs, ()
    nums, names = self._static_argnums, self._static_argnames
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in names}
    # (where, value, type): as JAX's, equal values of other types (1, True, 1.0) trace anew
    statics = tuple((i, args[i], type(args[i])) for i in nums if i < len(args))
    statics += tuple(sorted((k, v, type(v)) for k, v in kwargs.items() if k in names))
    for where, v, _ in statics:
      try:
        hash(v)
      except TypeError as e:
        raise ValueError(
            "Non-hashable static arguments are not supported. An error occurred while trying "
            f"to hash an object of type {type(v)}, {v}. The error was:\n"
            f"TypeError: {e}\n") from None
    return dyn_args, dyn_kwargs, statics

  def _entry(self, args, kwargs, fast_key=None, abstract=False):
    dyn_args, dyn_kwargs, statics = self._split_statics(args, kwargs)
    flat, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
    try:
      avals = [_abstractify(x) for x in flat]
    except TypeError:
      try:
        if not abstract:  # trace/eval_shape, as JAX's: also avals, objects with shape and dtype
          raise
        avals = [_duck_aval(x) for x in flat]
      except TypeError:
        pe.abstractify_args(self._fun, flat, lambda: pe.DebugInfo(
            "jit", self._fun, args, kwargs, self._static_argnums, self._static_argnames))
        raise
    key = (in_tree, tuple(a if a is core.abstract_token else
                          (a.shape, a.dtype, a.weak_type) if type(a) is not core.AbstractRef
                          else (a.shape, a.dtype, a.weak_type, "ref") for a in avals), statics,
           config.trace_key, core.axis_env(), core.sharding_rule_hook and _sharding_key(avals))
    try:
      entry = self._cache.get(key)
    except Exception as e:  # noqa: BLE001 -- a static argument's __eq__ failed: JAX's error
      if not statics:
        raise
      types = (statics[0][2], statics[0][2])
      for k in list(self._cache):  # the pair that failed to compare
        for (_, v, t), old in zip(statics, k[2]):
          try:
            v == old[1]  # noqa: B015
          except Exception:  # noqa: BLE001
            types = (t, old[2])
      raise ValueError(
          "static arguments should be comparable using __eq__.The following error was raised "
          f"when comparing two objects of types {types[0]} and {types[1]}. The error was:\n"
          + "".join(traceback.format_exception(e)).rstrip("\n")) from None
    if entry is None:
      if config._flags["no_tracing"]:
        raise RuntimeError(f"re-tracing function {pe.fun_sourceinfo(self._fun)} for `jit`, "
                           "but 'no_tracing' is set")
      if config._flags["explain_cache_misses"]:
        _explain_miss(self, key, avals, args, kwargs)
      if any(type(a) is core.AbstractRef for a in avals):  # JAX's aliasing error, first
        pe.check_ref_args(self._debug_info(args, kwargs), flat)
      entry = self._trace(in_tree, avals, args, kwargs, statics)
      if entry.refs:
        pe.check_ref_args(self._debug_info(args, kwargs), flat, entry.closed.consts)
      if self._donate_argnums or self._donate_argnames:
        _warn_unusable_donations(_donated_flags(self, in_tree), entry.closed.in_avals,
                                 entry.closed.out_avals)
      if not any(isinstance(c, Tracer) for c in entry.closed.consts):
        self._cache[key] = entry
    if fast_key is not None and core._ctx.trace is core.eval_trace and not entry.refs and \
        self._cache.get(key) is entry and not self._sharded and \
        _constraint_mesh(entry.closed) is None:  # sharded: _spmd_mono
      exe = entry.executable()
      self._fast[fast_key] = exe.runner(entry.out_tree)
      mono = exe.runner(entry.out_tree, guarded=True)
      flat_fn = _miss if type(fast_key[0]) is tuple else \
          next((f for t, f in self._flatteners if t == fast_key[0]), None)
      if mono is not None and flat_fn is not None:
        self._mono, self._mono_flat = mono, flat_fn
    return entry, flat

  def _debug_info(self, args, kwargs):
    return pe.DebugInfo("jit", self._fun, args, kwargs, self._static_argnums,
                        self._static_argnames)

  def _trace(self, in_tree, avals, args, kwargs, statics):
    if self._in_shardings is not None and not self._sharded:  # (checked when placing else)
      from nbjax.interpreters import spmd
      spmd.flatten_shardings("pjit in_shardings", in_tree.unflatten(avals)[0],
                             self._in_shardings)
    static_pos = dict((i, v) for i, v, _ in statics if isinstance(i, int))
    static_kw = {k: v for k, v, _ in statics if isinstance(k, str)}
    nargs = len(args)
    box = []
    fun = self._fun
    weakref.ref(fun)  # JAX's jit caches by weak reference: "cannot create weak reference"

    def flat_fun(*flat):
      dyn_args, dyn_kwargs = in_tree.unflatten(flat)
      if static_pos:
        it = iter(dyn_args)
        full = [static_pos[i] if i in static_pos else next(it) for i in range(nargs)]
      else:
        full = dyn_args
      out = fun(*full, **dyn_kwargs, **static_kw)
      out_flat, out_tree = tree_util.tree_flatten(out)
      box.append(out_tree)
      return out_flat

    dbg = pe.DebugInfo("jit", fun, args, kwargs, self._static_argnums, self._static_argnames,
                       out_tree=lambda: box[0] if box else None)
    with monitoring.log_elapsed_time(
        "Finished tracing {fun_name} for jit in {elapsed_time:.9f} sec", self._name,
        monitoring.JAXPR_TRACE_EVENT, _log, config._flags["log_compiles"]):
      jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, avals, fun_name=self._name,
                                                   debug_info=dbg)
    self._trace_count += 1
    _stats["traces"] += 1
    return _Entry(ClosedJaxpr(jaxpr, consts), box[0], self._name, self._compiler_options,
                  in_tree)

  # -------------------------------------------------------------- AOT API
  @traceback_util.api_boundary
  def trace(self, *args, **kwargs):
    """Stage to a jaxpr for these arguments (arrays or ``ShapeDtypeStruct``s): a ``Traced``."""
    entry, flat = self._entry(args, kwargs, abstract=True)
    return Traced(self, entry, [_arg_sharding(x) for x in flat])

  @traceback_util.api_boundary
  def lower(self, *args, **kwargs):
    """Stage and lower to StableHLO for these arguments: a ``Lowered`` (``.as_text()``,
    ``.compile()``)."""
    return self.trace(*args, **kwargs).lower()

  @traceback_util.api_boundary
  def eval_shape(self, *args, **kwargs):
    """Output shapes/dtypes (``ShapeDtypeStruct`` pytree), without compiling."""
    entry, _ = self._entry(args, kwargs, abstract=True)
    sds = [_sds(a) for a in entry.closed.out_avals]
    if self._out_shardings is not None:  # as JAX's: the outputs carry their out_shardings
      from nbjax.interpreters import spmd
      shs = spmd.flatten_shardings("out_shardings", entry.out_tree.unflatten(sds),
                                   self._out_shardings)
      sds = [core.ShapeDtypeStruct(d.shape, d.dtype, d.weak_type, s) for d, s in zip(sds, shs)]
    return entry.out_tree.unflatten(sds)

  def _cache_size(self):
    return len({id(e) for e in self._cache.values()})

  def clear_cache(self):
    self._cache.clear()
    self._fast.clear()
    self._mono = self._mono_flat = _miss

  @property
  def trace_count(self):
    """How many times the Python function has been staged (cache misses)."""
    return self._trace_count


traceback_util.register_boundary(JitWrapped.__call__)


def _infer_argnums_and_argnames(sig, argnums, argnames):
  """JAX's completion of argnums from argnames (or back) where only one is given."""
  if argnums is None and argnames is None:
    return (), ()
  if argnums is not None and argnames is not None or sig is None:
    return tuple(_ensure_tuple(argnums)), tuple(_ensure_tuple(argnames))
  params = list(sig.parameters.items())
  if argnums is None:
    argnames = tuple(_ensure_tuple(argnames))
    return tuple(i for i, (k, p) in enumerate(params)
                 if p.kind is p.POSITIONAL_OR_KEYWORD and k in argnames), argnames
  argnums = tuple(_ensure_tuple(argnums))
  return argnums, tuple(k for i, (k, p) in enumerate(params)
                        if p.kind is p.POSITIONAL_OR_KEYWORD and i in argnums)


class ArgInfo:
  """An argument of a staged computation: its abstract value and whether it is donated."""
  __slots__ = ("_aval", "donated")

  def __init__(self, _aval, donated):
    self._aval, self.donated = _aval, donated

  shape = property(lambda self: self._aval.shape)
  dtype = property(lambda self: self._aval.dtype)

  def __eq__(self, other):
    return (type(other) is ArgInfo and self._aval == other._aval
            and self.donated == other.donated)

  def __hash__(self):
    return hash((self._aval, self.donated))

  def __repr__(self):
    return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


def _places(shardings):
  """Whether ``shardings`` (jit's in_/out_shardings) name a sharding anywhere (a ``Format``
  without one only asks for a layout)."""
  from nbjax.interpreters.spmd import _is_sh_leaf
  return any(s is not None and getattr(s, "layout", False) is False or
             getattr(s, "sharding", None) is not None
             for s in tree_util.tree_leaves(shardings, is_leaf=_is_sh_leaf))


def _donated_flags(w, tree):
  """One bool per flat traced argument of ``w`` (a jit) for the input tree ``tree``: donated
  (``donate_argnums``/``donate_argnames``)."""
  args_tree, kwargs_tree = tree.children()
  statics = set(w._static_argnums)
  pos = (i for i in itertools.count() if i not in statics)  # the positions traced
  flags = []
  for i, sub in zip(pos, args_tree.children()):
    flags += [i in w._donate_argnums] * sub.num_leaves
  for k, sub in zip(kwargs_tree.data or (), kwargs_tree.children()):
    flags += [k in w._donate_argnames] * sub.num_leaves
  return flags


def _donation_plan(flags, in_avals, out_avals):
  """``(used, unused)``: the flat indices of the donated inputs an output reuses (each output
  takes the first donated input of its shape and dtype left, as XLA's aliasing), and of the
  donated inputs no output can."""
  free = {}
  for i, (a, d) in enumerate(zip(in_avals, flags)):
    if d:
      free.setdefault((a.shape, a.dtype), []).append(i)
  used = []
  for a in out_avals:
    ids = a is not core.abstract_token and free.get((a.shape, a.dtype))
    if ids:
      used.append(ids.pop(0))
  return used, [i for i, d in enumerate(flags) if d and i not in used]


def _check_donated_layouts(w, entry, flags):
  """JAX's errors for a donated input whose output (the first of its shape and dtype left)
  has ``Layout.AUTO`` on one side only."""
  from nbjax.experimental.layout import AutoLayoutSingleton
  from nbjax.interpreters import spmd
  n_in, n_out = len(entry.closed.in_avals), len(entry.closed.out_avals)
  args, _ = entry.in_tree.unflatten([0] * n_in)
  ins = spmd.flatten_shardings("pjit in_shardings", args, w._in_shardings)
  outs = spmd.flatten_shardings("pjit out_shardings", entry.out_tree.unflatten([0] * n_out),
                                w._out_shardings)
  lay = lambda s: getattr(s, "layout", None)
  free = {}
  for i, (a, d) in enumerate(zip(entry.closed.in_avals, flags)):
    if d and i < len(ins):
      free.setdefault((a.shape, a.dtype), []).append(i)
  for j, a in enumerate(entry.closed.out_avals):
    ids = free.get((a.shape, a.dtype))
    if not ids:
      continue
    li, lo = lay(ins[ids.pop(0)]), lay(outs[j])
    auto_in, auto_out = (isinstance(v, AutoLayoutSingleton) for v in (li, lo))
    if auto_in != auto_out:
      which = "output" if auto_in else "input"
      raise ValueError(
          f"Input layout being donated was {li} while output layout was {lo}. Did you mean to "
          f"set the **{which} layout** to **Layout.AUTO**?\nThis will allow for the input and "
          f"output layout to be chosen by XLA and not the layout of the {which} which might "
          "not be optimal.")


def _warn_unusable_donations(flags, in_avals, out_avals):
  """JAX's lowering warning: a donated input no output of its shape and dtype could reuse
  (each output takes the first such donated input left)."""
  unused = [in_avals[i].str_short(short_dtypes=False)
            for i in _donation_plan(flags, in_avals, out_avals)[1]]
  if unused:
    warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)}.\n"
                  "See an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation.")


class _Stage:
  """What the AOT stages share: ``args_info`` (a pytree of ``ArgInfo``, as the non-static
  ``(args, kwargs)``), ``in_tree``, ``in_avals``, ``donate_argnums`` (flat indices)."""

  @property
  def args_info(self):
    tree = self._entry.in_tree
    return tree.unflatten([ArgInfo(a, d) for a, d in zip(
        self._entry.closed.in_avals, _donated_flags(self._wrapped, tree))])

  in_tree = property(lambda self: self._entry.in_tree)
  out_tree = property(lambda self: self._entry.out_tree)
  _no_kwargs = False  # (JAX's: True for stages whose callers pass no keyword arguments)
  in_avals = property(lambda self: tree_util.tree_map(lambda x: x._aval, self.args_info))

  @property
  def donate_argnums(self):
    return tuple(i for i, x in enumerate(tree_util.tree_leaves(self.args_info)) if x.donated)


def _duck_aval(x):
  """An argument's aval for ``trace``/``eval_shape``: jit's, else (as JAX's) an aval itself or
  an object with a ``shape`` and a ``dtype``."""
  if isinstance(x, ShapedArray):
    return x
  try:
    return _abstractify(x)
  except TypeError:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
      return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype))
    raise


def _arg_sharding(x):
  """The sharding a traced argument brings (a ShapeDtypeStruct's, a sharded array's), else
  None."""
  if type(x) is core.ShapeDtypeStruct:
    try:
      s = x.sharding
    except (TypeError, ValueError):  # (a PartitionSpec without a context mesh)
      return None
    return s if getattr(s, "_spmd", False) else None
  p = getattr(x, "_pmap", None) if type(x) is Array else None
  return p[0] if p is not None and p[0]._spmd else None


class Traced(_Stage):
  """``jit(f).trace(*args)``: the staged jaxpr (``.jaxpr``) and output structure."""

  def __init__(self, wrapped, entry, arg_shardings=()):
    self._wrapped, self._entry, self._arg_shardings = wrapped, entry, arg_shardings

  jaxpr = property(lambda self: self._entry.closed)
  out_info = property(lambda self: self._entry.out_tree.unflatten(
      [_sds(a) for a in self._entry.closed.out_avals]))
  # (JAX's: the traced function's name, and the outputs' avals as a pytree)
  fun_name = property(lambda self: self._entry.name)
  out_avals = property(lambda self: self._entry.out_tree.unflatten(self._entry.closed.out_avals))

  def lower(self, *, lowering_platforms=None, _private_parameters=None):
    """The StableHLO module; ``lowering_platforms`` is accepted, as JAX's (nbjax lowers for
    the CPU)."""
    return Lowered(self._wrapped, self._entry, self._arg_shardings)


class Lowered(_Stage):
  """``jit(f).lower(*args)``: the StableHLO module (``.as_text()``); ``.compile()`` builds it."""

  def __init__(self, wrapped, entry, arg_shardings=()):
    from nbjax.interpreters import mlir
    self._wrapped, self._entry, self._arg_shardings = wrapped, entry, arg_shardings
    if _has_pmap(entry.closed.jaxpr):  # maps: one replicated module (pxla.ReplicatedJit)
      from nbjax.interpreters import pxla
      self._module = pxla.replicated_module(entry.closed, f"jit_{entry.name}")[0]
      return
    if wrapped._sharded:  # in_/out_shardings: the SPMD module the call compiles
      from nbjax.interpreters import lowering, spmd
      ins, outs = Compiled._given_shardings(wrapped, entry)
      closed = entry.closed
      if any(isinstance(a.dtype, dtypes.ExtendedDType) for a in closed.in_avals +
             closed.out_avals):
        closed = lowering.physicalize(closed)
      self._module = spmd.sharded_module(closed, entry.name, ins, outs,
                                         _constraint_mesh(entry.closed))[3]
      return
    if core.sharding_rule_hook is not None and any(
        s is not None for s in arg_shardings) and not _holds_maps(entry.closed):
      from nbjax.interpreters import spmd  # (sharded arguments: the SPMD module a call runs)
      outs = spmd.typed_out_shardings([None] * len(entry.closed.out_avals),
                                      entry.closed.out_avals, arg_shardings)
      self._module = spmd.sharded_module(entry.closed, entry.name, list(arg_shardings), outs,
                                         _constraint_mesh(entry.closed))[3]
      return
    closed = core.discharged_call(entry.closed) if entry.refs else entry.closed  # (refs:
    self._module = mlir.lower_jaxpr_to_module(closed, f"jit_{entry.name}",  # what runs)
                                              host_callbacks=[])

  def as_text(self, dialect=None, *, debug_info=False, **_):
    """The module's text: StableHLO (default), or XLA's HLO (``dialect='hlo'``), as JAX's;
    ``debug_info``: with the ops' locations (HLO: their metadata)."""
    if dialect == "hlo":
      from nbjax import xla
      return xla.hlo_text(self._module, debug_info)
    if dialect not in (None, "stablehlo", "mhlo"):
      raise ValueError(f"unknown dialect: {dialect}")
    if debug_info:
      return self._module.operation.get_asm(enable_debug_info=True)
    return str(self._module)

  def compiler_ir(self, dialect=None):
    """The StableHLO module, or (``dialect='hlo'``) jaxlib's ``XlaComputation``."""
    if dialect == "hlo":
      from nbjax import xla
      return xla.hlo_computation(self._module)
    if dialect not in (None, "stablehlo", "mhlo"):
      raise ValueError(f"unknown dialect: {dialect}")
    return self._module

  def cost_analysis(self):
    """XLA's cost estimates of the module (a dict: ``flops``, ``bytes accessed``, ...)."""
    from nbjax import xla
    return xla.hlo_cost_analysis(self._module)

  out_info = property(lambda self: self._entry.out_tree.unflatten(
      [_sds(a) for a in self._entry.closed.out_avals]))

  def compile(self, compiler_options=None):
    """The executable, compiled with ``compiler_options`` (XLA options by name, added to the
    jit's own) if given."""
    opts = {**(self._entry.compiler_options or {}), **(compiler_options or {})}
    return Compiled(self._wrapped, self._entry, opts or None, self._arg_shardings)


class Compiled(_Stage):
  """``jit(f).lower(*args).compile()``: call it with arguments of the lowered signature."""

  def __init__(self, wrapped, entry, compiler_options=None, arg_shardings=()):
    self._wrapped, self._entry, self._arg_shardings = wrapped, entry, arg_shardings
    closed = core.discharged_call(entry.closed) if entry.refs else entry.closed
    self._exe = (entry.executable() if compiler_options == entry.compiler_options and
                 not entry.refs else _executable_for(closed, entry.name, compiler_options))
    if core.sharding_rule_hook is not None and not wrapped._sharded and any(
        s is not None for s in arg_shardings) and not _holds_maps(closed):
      from nbjax.interpreters import spmd  # (sharded arguments: the SPMD program, its HLO)
      outs = spmd.typed_out_shardings([None] * len(closed.out_avals), closed.out_avals,
                                      arg_shardings)
      exe = spmd.executable(closed, entry.name, list(arg_shardings), outs,
                            mesh=_constraint_mesh(closed))
      self._text = exe._exe.hlo_modules()[0].to_string()
    if compiler_options and isinstance(self._exe, _Executable):
      self._exe.exe  # compiled now, as JAX's: invalid options raise XLA's error here

  _text = None

  def as_text(self):
    """XLA's optimized HLO text of the compiled program, as JAX's ``Compiled.as_text`` (what
    XLA made of the module: dead code gone, fusions formed); ``Lowered.as_text()`` is the
    StableHLO module it was compiled from."""
    if self._text is None:
      exe = self._xla()
      mods = getattr(exe, "_exe", None)
      self._text = (mods.hlo_modules()[0].to_string() if mods is not None
                    else self._exe.text)  # (programs of maps: their module's text)
    return self._text

  def _xla(self):  # the XLA executable (None for programs of maps run per equation)
    exe = self._exe
    return exe.exe if isinstance(exe, _Executable) else exe.prog and exe.prog.rep

  def cost_analysis(self):
    """A summary of execution cost estimates (XLA's dict of ``flops``, ``bytes accessed``,
    ...), or ``None`` if unavailable."""
    exe = self._xla()
    return None if exe is None else exe.cost_analysis()

  def memory_analysis(self):
    """A summary of estimated memory requirements (XLA's ``CompiledMemoryStats``), or
    ``None`` if unavailable."""
    exe = self._xla()
    return None if exe is None else exe.memory_analysis()

  def runtime_executable(self):
    """An arbitrary object representation of this executable (jaxlib's
    ``LoadedExecutable``), for debugging; ``None`` if unavailable."""
    exe = self._xla()
    return None if exe is None else exe.runtime_executable()

  out_info = property(lambda self: self._entry.out_tree.unflatten(
      [_sds(a) for a in self._entry.closed.out_avals]))

  @staticmethod
  def _given_shardings(w, e):
    """The flat ``in_shardings`` and ``out_shardings`` of a sharded jit ``w`` (None where
    not given) for the staged ``e``."""
    from nbjax.interpreters import spmd
    n_in, n_out = len(e.closed.in_avals), len(e.closed.out_avals)
    args, kwargs = e.in_tree.unflatten([0] * n_in)
    ins = spmd.flatten_shardings("pjit in_shardings", args, w._in_shardings)
    spmd.check_formats("jit in_shardings", ins, e.closed.in_avals)
    ins = [spmd._resolve(s, None, "jit in_shardings") for s in ins]
    ins += [None] * (n_in - len(ins))
    outs = spmd.flatten_shardings("pjit out_shardings", e.out_tree.unflatten([0] * n_out),
                                  w._out_shardings)
    spmd.check_formats("jit out_shardings", outs, e.closed.out_avals)
    return ins, [spmd._resolve(s, None, "jit out_shardings") for s in outs]

  def _shardings_flat(self):
    """The flat input shardings (``in_shardings``' where given, else the device's; None for
    an argument the program does not use, as JAX's, unless ``keep_unused``) and outputs'."""
    from nbjax.array import _single_sharding
    w, e = self._wrapped, self._entry
    n_in, n_out = len(e.closed.in_avals), len(e.closed.out_avals)
    ins, outs = [None] * n_in, [None] * n_out
    default = _single_sharding()
    if w._sharded:  # (unspecified ones: replicated over the given ones' mesh, as JAX's)
      ins, outs = self._given_shardings(w, e)
      mesh = next((s.mesh for s in ins + outs if getattr(s, "mesh", None) is not None), None)
      if mesh is not None:
        from nbjax.sharding import NamedSharding, PartitionSpec
        default = NamedSharding(mesh, PartitionSpec())
    elif any(s is not None for s in self._arg_shardings) and not _holds_maps(e.closed):
      # lowered for sharded arguments: placed as their call is, outputs as XLA chose
      from nbjax.interpreters import spmd
      exe = spmd.executable(e.closed, e.name, list(self._arg_shardings), [None] * n_out,
                            mesh=_constraint_mesh(e.closed))
      ins, outs = list(exe.in_shs), list(exe.out_shs)
    used = [True] * n_in if w._keep_unused else pe.dce_jaxpr(e.closed.jaxpr, True)[1]
    ins = [(s or default) if u else None for s, u in zip(ins, used)]
    return ins, [s or default for s in outs]

  @property
  def input_shardings(self):
    """The arguments' shardings, a pytree as the (non-static) ``(args, kwargs)``; None for an
    argument the compiled program does not use."""
    return self._entry.in_tree.unflatten(self._shardings_flat()[0])

  @property
  def output_shardings(self):
    """The outputs' shardings, a pytree as the outputs."""
    return self._entry.out_tree.unflatten(self._shardings_flat()[1])

  def _formats(self, avals, shardings):
    from nbjax.experimental.layout import Format, Layout
    return [Format() if s is None else
            Format(Layout(tuple(range(len(a.shape))), ()), s) for a, s in zip(avals, shardings)]

  @property
  def input_formats(self):
    """The arguments' ``Format``s (row-major layout and sharding; ``Format()`` for an
    unused argument), a pytree as ``(args, kwargs)``."""
    return self._entry.in_tree.unflatten(
        self._formats(self._entry.closed.in_avals, self._shardings_flat()[0]))

  @property
  def output_formats(self):
    """The outputs' ``Format``s, a pytree as the outputs."""
    return self._entry.out_tree.unflatten(
        self._formats(self._entry.closed.out_avals, self._shardings_flat()[1]))

  @staticmethod
  def call(*args, **kwargs):
    """``Compiled.call(compiled, *args, **kwargs)``: ``compiled(*args, **kwargs)``."""
    return args[0](*args[1:], **kwargs)

  def __call__(self, *args, **kwargs):
    # as JAX's: called with the lowered (non-static) arguments' pytree, static ones omitted
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    if in_tree != self._entry.in_tree:
      raise TypeError(_in_tree_mismatch(in_tree, self._entry.in_tree))
    for x in flat:
      if isinstance(x, Tracer):
        raise TypeError(
            "Cannot apply JAX transformations to a function lowered and compiled for a "
            f"particular signature. Detected argument of Tracer type {type(x)}.")
    want = self._entry.closed.in_avals
    got = [_abstractify(x) for x in flat]
    if any(g.shape != w.shape or g.dtype != w.dtype for g, w in zip(got, want)):
      names = pe.DebugInfo("jit", self._wrapped._fun, args, kwargs).arg_names
      errors = [f"Argument '{n}' compiled with {w.str_short(short_dtypes=False)} and called "
                f"with {g.str_short(short_dtypes=False)}"
                for n, g, w in zip(names, got, want) if (g.shape, g.dtype) != (w.shape, w.dtype)]
      k = "The" if len(errors) < 5 else f"The first 5 of {len(errors)}"
      raise TypeError(
          "Argument types differ from the types for which this computation was compiled. "
          "Perhaps you are calling the compiled executable with a different enable_x64 mode "
          f"than when it was AOT compiled? {k} mismatches are:\n" + "\n".join(errors[:5]))
    w, entry = self._wrapped, self._entry
    if (w._sharded or any(type(x) is Array and x._pmap is not None and x._pmap[0]._spmd
                          for x in flat) or _constraint_mesh(entry.closed) is not None
        ) and not _holds_maps(entry.closed):  # placed as the jit's call places (its shardings)
      return entry.unflatten(w._spmd_executable(entry, args, kwargs, flat, True).run(flat))
    if entry.refs:  # mutable array references: read, then written back (nbjax.state)
      return entry.unflatten(core.run_state(entry.closed, flat, entry.name))
    return entry.unflatten(self._exe.run(flat))


def _in_tree_mismatch(new, old):
  """JAX's message for a ``Compiled`` called with another pytree of arguments."""
  errs = tree_util.tree_diffs(new, old)
  msg = ["Function compiled with input pytree does not match the input pytree it was called "
         f"with. There are {len(errs)} mismatches, including:"]
  for path, thing1, thing2, why in errs:
    base = ("args", "kwargs")[path[0].idx]
    msg.append(f"    * at {base}{tree_util.keystr(tuple(path[1:]))}, seen {thing2} but now "
               f"given {thing1}, so {why}")
  return "\n".join(msg)


def _check_static_donate_disjoint(sig, static_argnums, static_argnames, donate_argnums,
                                  donate_argnames):
  """JAX's ``static_argnames and donate_argnames cannot intersect``, with argnames inferred
  from argnums (and back) only where one of the two is given, as JAX's."""
  def names(nums, nms):
    if nms is not None:
      return set(_ensure_tuple(nms))
    nums = set(_ensure_tuple(nums))
    return {k for i, (k, p) in enumerate(sig.parameters.items())
            if p.kind is p.POSITIONAL_OR_KEYWORD and i in nums}
  static = names(static_argnums, static_argnames or None)
  both = static and static & names(donate_argnums, donate_argnames)
  if both:
    raise ValueError("static_argnames and donate_argnames cannot intersect. Argument names "
                     f"{both} appear in both static_argnames and donate_argnames")


def _validate_argnums(sig, argnums, argnums_name):
  """JAX's check of ``static_argnums``/``donate_argnums`` against the signature (any
  positional index is valid with ``*args``)."""
  n_pos = 0
  for p in sig.parameters.values():
    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
      n_pos += 1
    elif p.kind is p.VAR_POSITIONAL:
      return
  if argnums and (-min(argnums) > n_pos or max(argnums) >= n_pos):
    raise ValueError(f"Jitted function has {argnums_name}={argnums}, but only accepts "
                     f"{n_pos} positional arguments.")


def _validate_argnames(sig, argnames, argnames_name):
  """JAX's check of ``static_argnames``/``donate_argnames``: no positional-only or ``*args``
  names; without ``**kwargs``, only the function's parameter names."""
  valid, invalid, var_kw = set(), set(), False
  for name, p in sig.parameters.items():
    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
      valid.add(name)
    elif p.kind is p.VAR_KEYWORD:
      var_kw = True
    else:
      invalid.add(name)
  if bad := invalid & set(argnames):
    raise ValueError(f"Jitted function has invalid argnames {bad} in {argnames_name}. These "
                     "are positional-only")
  if not var_kw and (bad := set(argnames) - valid):
    raise ValueError(f"Jitted function has invalid argnames {bad} in {argnames_name}. "
                     "Function does not take these args.")


def jit(fun=None, in_shardings=None, out_shardings=None, static_argnums=None,
        static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
        device=None, backend=None, inline=False, abstracted_axes=None, compiler_options=None):
  """Compile ``fun`` with XLA: traced once per input signature (treedef, shapes, dtypes,
  weak types, static values), then run as one executable.

  Args:
    fun: the function to compile (pure; arrays in, arrays out, pytrees allowed).
    static_argnums, static_argnames: arguments treated as compile-time constants (hashable);
      a new value retraces.
    donate_argnums, donate_argnames: accepted for compatibility (host buffers are never
      donated).
    in_shardings, out_shardings: ``NamedSharding``s (pytree prefixes of the positional
      arguments / the outputs; ``None`` leaves: replicated inputs, XLA's choice of output).
      With them, or with sharded Array arguments, ``fun`` runs as one SPMD program
      partitioned over the mesh's devices (``interpreters/spmd.py``).
    device, backend: accepted; nbjax runs on CPU devices.
    inline: when traced inside another jit, inline the jaxpr instead of a nested call.
    compiler_options: XLA options by name for this function's compiles
      (``{"xla_backend_optimization_level": 0}``); an unknown name raises XLA's error.
  """
  if fun is None:
    return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                             static_argnums=static_argnums, static_argnames=static_argnames,
                             donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                             keep_unused=keep_unused, device=device, backend=backend,
                             inline=inline, compiler_options=compiler_options)
  if backend is not None or device is not None:  # (JAX's checks, warning and errors)
    warnings.warn("backend and device argument on jit is deprecated. You can use "
                  '`jax.device_put(..., jax.local_devices(backend="cpu")[0])` on the inputs to '
                  "the jitted function to get the same behavior.", DeprecationWarning,
                  stacklevel=2)
    if device is not None and backend is not None:
      raise ValueError("can't specify both a device and a backend for jit, "
                       f"got {device=} and {backend=}")
    for name, s in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
      if s is not None:
        raise ValueError(f"If backend or device is specified on jit, then {name} should not "
                         "be specified.")
  if backend not in (None, "cpu"):
    raise ValueError(f"nbjax.jit supports only backend='cpu', got {backend!r}")
  return JitWrapped(fun, static_argnums=static_argnums, static_argnames=static_argnames,
                    donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                    keep_unused=keep_unused, inline=inline, in_shardings=in_shardings,
                    out_shardings=out_shardings, compiler_options=compiler_options,
                    device=device)


# ----------------------------------------------------------------------- utilities


def _staging(trace):
  """Whether ``trace`` stages into a jaxpr (jit, make_jaxpr, the linearization of grad) rather
  than running the call (eager jvp, vmap)."""
  from nbjax.interpreters.tape import TapeTrace  # (eager grad's linearization)
  while trace is not None and trace is not core.eval_trace:
    if isinstance(trace, (pe.DynamicJaxprTrace, pe.JaxprTrace, TapeTrace)):
      return True
    trace = getattr(trace, "parent_trace", None)
  return False


def block_until_ready(x):
  """Wait for every array in the pytree ``x`` to be computed; returns ``x``."""
  for leaf in tree_util.tree_leaves(x):
    f = getattr(leaf, "block_until_ready", None)
    if f is not None:
      f()
  return x
