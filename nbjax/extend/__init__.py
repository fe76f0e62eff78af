"""``nbjax.extend``: user primitives from numba kernels (write a kernel once, get eager, vmap,
jit and grad), and ``nbjax.extend.core`` (JAX's ``jax.extend.core`` names).

Pipeline position: above ``core``/``registry`` (it registers primitives, family ``"user"``)
and beside ``lax`` (its lowering rule emits a ``stablehlo.custom_call`` through the lazy
``interpreters.lowering`` handles). A kernel is a numba-compilable Python function in
``numba.guvectorize``'s convention: it receives one *core* slice of every input (a scalar for
a ``()`` input, an array otherwise) and of every output (an array; a one-element array for a
``()`` output, written as ``out[0]``) and fills the outputs. ``numba_primitive`` turns it into
a primitive whose rules all come from the gufunc signature:

- eager: a generated numba *driver* loops over the (broadcast, flattened) loop dimensions and
  calls the kernel on each core slice, one compiled call for the whole batch;
- abstract eval: loop dimensions broadcast, core dimensions matched by name, new output
  dimensions from ``shape_fn``, dtypes from the dtype rule;
- vmap: batch dimensions become leading loop dimensions (no Python loop over the batch);
- jit: a numba ``@cfunc`` typed-FFI handler (``kernels.ffi``), generated per dtype
  combination and static parameters, reads ranks and dimensions from XLA's call frame and runs
  the same driver: compiled once per dtypes, for every shape and rank, with no Python in the
  executable's loop;
- derivatives: ``defjvp`` (a ``custom_jvp``-style rule on the primitive; reverse mode by
  linearize + transpose of the tangent ops) or ``defvjp`` (``custom_vjp``-style forward and
  backward rules, the backward one reached through the linear ``custom_lin``);
- persistence: kernel, driver and handler are cached on disk by numba (next to the kernel's
  source file, or under ``NUMBA_CACHE_DIR``), keyed by a hash of the kernel's code.
"""
from __future__ import annotations

import hashlib
import inspect
import math
import os
import re
import threading

import numpy as np

from nbjax import core as _core, dtypes, registry
from nbjax.array import Array, _wrap
from nbjax.interpreters import ad, batching
from nbjax.interpreters import lowering as _lowering
from nbjax.numpy._vectorize import _parse_signature as _parse_gufunc_signature
from nbjax.custom_derivatives import _flat_bwd
from nbjax._tree_util import tree_flatten

from kernels import simd  # noqa: E402  vectorizable exp/log/log1p/softplus/sigmoid for kernels

from nbjax.extend import core  # noqa: E402  (jax.extend.core)
from nbjax.extend import random, sharding  # noqa: E402,F401  (jax.extend.random, .sharding)

__all__ = ["numba_primitive", "NumbaPrimitive", "parse_signature", "simd", "core"]

# numba-supported dtypes (float16/bfloat16 have no numba arithmetic)
_NUMBA_DTYPES = tuple(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128"))

def parse_signature(signature):
  """``"(m,n),(n,p)->(m,p)"`` -> ``([("m","n"), ("n","p")], [("m","p")])`` (NumPy's gufunc
  grammar, as ``jnp.vectorize`` reads it; at least one output)."""
  outs = None
  if isinstance(signature, str):
    try:
      ins, outs = _parse_gufunc_signature(signature)
    except ValueError:
      pass
  if not outs:
    raise ValueError(f"not a valid gufunc signature: {signature!r} (expected e.g. "
                     "'(m,n),(n,p)->(m,p)' or '(),()->()')")
  return ins, outs


def _generator_hash():
  """A hash of the code that generates drivers and handlers (this file, ``kernels/ffi.py``):
  part of every generated name, so numba's disk cache never serves code an older nbjax made."""
  from kernels import ffi
  h = hashlib.sha256()
  for f in (__file__, ffi.__file__):
    with open(f, "rb") as fh:
      h.update(fh.read())
  return h.hexdigest()


_GEN_HASH = _generator_hash()


def _code_hash(py, *extra):
  code = py.__code__
  parts = [code.co_code, code.co_consts, code.co_names, extra, _GEN_HASH]
  g = getattr(py, "__globals__", {})
  for name in code.co_names:
    obj = g.get(name)
    f = getattr(obj, "py_func", obj)
    if hasattr(f, "__code__"):
      parts.append((f.__code__.co_code, f.__code__.co_consts))
    elif inspect.ismodule(obj) and getattr(obj, "__file__", None) and obj.__name__ != "numpy":
      try:
        with open(obj.__file__, "rb") as fh:
          parts.append(hashlib.sha256(fh.read()).hexdigest())
      except OSError:
        pass
  return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def _ident(s):
  return re.sub(r"\W", "_", s)


class NumbaPrimitive:
  """A primitive made from a numba kernel (see ``numba_primitive``).

  Calling it binds ``primitive`` (returns one array, or a tuple for several outputs); static
  keyword parameters are passed to the kernel by name. ``defjvp``/``defvjp`` give it
  derivatives. ``eager_calls`` counts eager executions (a jitted call never touches it).
  """

  def __init__(self, kernel, signature, *, name=None, dtypes=None, out_dtypes=None,
               shape_fn=None, cache=True, fastmath=False):
    import numba
    py = getattr(kernel, "py_func", kernel)
    if not callable(py):
      raise TypeError(f"numba_primitive: the kernel must be a Python function, got {kernel!r}")
    self.name = name or py.__name__
    self.signature = signature
    self.in_core, self.out_core = parse_signature(signature)
    nin, nout = len(self.in_core), len(self.out_core)
    params = [p for p in inspect.signature(py).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < nin + nout or any(p.default is not p.empty for p in params[:nin + nout]):
      raise TypeError(f"numba_primitive '{self.name}': signature {signature!r} has {nin} inputs "
                      f"and {nout} outputs, so the kernel's first {nin + nout} parameters are "
                      f"arrays (inputs, then outputs, no defaults) and static parameters follow; "
                      f"{py.__name__}{inspect.signature(py)} does not fit")
    known = {d for c in self.in_core for d in c}
    self.new_dims = tuple(dict.fromkeys(d for c in self.out_core for d in c if d not in known))
    if self.new_dims and shape_fn is None:
      raise ValueError(f"numba_primitive '{self.name}': output dimensions {self.new_dims} do "
                       "not appear in the inputs; pass shape_fn(dims, **static) returning "
                       "their sizes")
    self.shape_fn = shape_fn
    self.allowed = self._allowed(dtypes)
    self.out_dtypes = out_dtypes
    src_file = inspect.getsourcefile(py) if not py.__code__.co_filename.startswith("<") else None
    self.cache = bool(cache) and src_file is not None and os.path.exists(src_file)
    self._file = src_file or py.__code__.co_filename
    self._module = py.__module__ or "__main__"
    # the kernel is inlined into the driver (numba IR), so LLVM sees and vectorizes the loop
    opts = dict(getattr(kernel, "targetoptions", None) or {})
    opts.setdefault("error_model", "numpy")
    opts.setdefault("fastmath", fastmath)
    opts.update(inline="always", cache=self.cache)
    opts.pop("nopython", None)
    self.kernel = numba.njit(**opts)(py)
    # numba's cache keys on a function's own bytecode only: the generated driver/handler names
    # carry a hash of the kernel, its options and the code it reaches (one level)
    self._hash = _code_hash(py, signature, sorted(map(str, opts.items())))
    self._driver = None
    self._plans = {}
    self._handlers = {}
    self._cfuncs = []
    self._lock = threading.RLock()
    self.eager_calls = 0
    self.primitive = p = _core.Primitive(self.name)
    p.multiple_results = nout > 1
    p.make_eager = self._make_eager
    self._nin, self._multi = nin, nout > 1
    registry.register(p, family="user", impls={"numba": self._eager},
                      abstract_eval=self._abstract_eval, batch=self._batch,
                      meta={"numba_primitive": self, "signature": signature, "pure": True,
                            "note": f"numba_primitive {signature}"})
    _lowering.register(p, self._lowering)
    self.__name__, self.__doc__ = self.name, py.__doc__
    self.__wrapped__ = py

  def __repr__(self):
    return f"numba_primitive({self.name}, {self.signature!r})"

  def cache_stats(self):
    """numba's on-disk cache for this primitive's compiled code so far: ``{"hits": n,
    "misses": n}`` over the eager drivers' compiled signatures and the jit handlers."""
    hits = misses = 0
    for d in (self._driver._by_names.values() if self._driver is not None else ()):
      hits += sum(d.stats.cache_hits.values())
      misses += sum(d.stats.cache_misses.values())
    for h in self._cfuncs:
      hits += h.cache_hits
      misses += not h.cache_hits
    return {"hits": hits, "misses": misses}

  # -------------------------------------------------------------------- calling

  def __call__(self, *args, **static):
    if len(args) != self._nin:
      raise TypeError(f"{self.name}() takes {self._nin} array arguments ({self.signature}), "
                      f"got {len(args)}")
    if static:
      for k, v in static.items():
        if not isinstance(v, (bool, int, float, complex, str, np.generic)):
          raise TypeError(f"{self.name}(): static parameter {k}={v!r:.60} must be a Python "
                          f"scalar or string (it is part of the compiled kernel's key), got "
                          f"{type(v).__name__}")
    out = self.primitive.bind(*args, **static)
    return tuple(out) if self._multi else out

  # -------------------------------------------------------------------- dtype and shape rules

  def _allowed(self, spec):
    nin = len(self.in_core)
    if spec is None:
      return None
    spec = list(spec)
    if spec and isinstance(spec[0], (tuple, list)):
      combos = [tuple(np.dtype(d) for d in c) for c in spec]
      for c in combos:
        if len(c) != nin:
          raise ValueError(f"numba_primitive '{self.name}': dtype combination {c} has "
                           f"{len(c)} entries for {nin} inputs")
      return ("combos", frozenset(combos))
    ds = [np.dtype(d) for d in spec]
    for d in ds:
      if d not in _NUMBA_DTYPES:
        raise ValueError(f"numba_primitive '{self.name}': numba kernels cannot take {d}")
    return ("each", frozenset(ds))

  def _check_dtypes(self, in_dtypes):
    names = ", ".join(d.name for d in in_dtypes)
    bad = [d for d in in_dtypes if d not in _NUMBA_DTYPES]
    ok = not bad
    if ok and self.allowed is not None:
      kind, allowed = self.allowed
      ok = all(d in allowed for d in in_dtypes) if kind == "each" else tuple(in_dtypes) in allowed
    if not ok:
      if self.allowed is None:
        what = ", ".join(d.name for d in _NUMBA_DTYPES)
      elif self.allowed[0] == "each":
        what = ", ".join(sorted(d.name for d in self.allowed[1]))
      else:
        what = "; ".join("(" + ", ".join(d.name for d in c) + ")" for c in sorted(self.allowed[1], key=str))
      raise TypeError(f"numba primitive '{self.name}' got input dtypes ({names}); it accepts "
                      f"{what}")

  def _result_dtypes(self, in_dtypes, static):
    nout = len(self.out_core)
    rule = self.out_dtypes
    if rule is None:
      d = dtypes.result_type(*in_dtypes) if in_dtypes else dtypes.default_float_dtype()
      outs = [d] * nout
    elif callable(rule) and not isinstance(rule, (type, np.dtype, str)):
      r = rule(*in_dtypes, **static)
      outs = list(r) if isinstance(r, (tuple, list)) else [r] * nout
    elif isinstance(rule, (tuple, list)):
      outs = list(rule)
    else:
      outs = [rule] * nout
    if len(outs) != nout:
      raise ValueError(f"numba primitive '{self.name}': the dtype rule gave {len(outs)} dtypes "
                       f"for {nout} outputs")
    outs = [dtypes.canonicalize_dtype(np.dtype(d)) for d in outs]
    for d in outs:
      if d not in _NUMBA_DTYPES:
        raise TypeError(f"numba primitive '{self.name}': output dtype {d} is not supported by "
                        "numba kernels")
    return outs

  def _dims(self, shapes, static):
    """(loop shape, {dim name: size}) for operand shapes, validated."""
    dims, loops = {}, []
    for i, (shp, core_dims) in enumerate(zip(shapes, self.in_core)):
      c = len(core_dims)
      if len(shp) < c:
        raise TypeError(f"numba primitive '{self.name}': operand {i} has shape {tuple(shp)}, "
                        f"but its core signature ({','.join(core_dims)}) needs at least {c} "
                        f"dimension{'s' if c != 1 else ''}")
      for name, size in zip(core_dims, shp[len(shp) - c:]):
        if dims.setdefault(name, size) != size:
          raise TypeError(f"numba primitive '{self.name}': core dimension '{name}' is "
                          f"{dims[name]} in one operand and {size} in operand {i} (shapes "
                          f"{', '.join(str(tuple(s)) for s in shapes)}; signature "
                          f"{self.signature})")
      loops.append(tuple(shp[:len(shp) - c]))
    try:
      loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
    except ValueError:
      raise TypeError(f"numba primitive '{self.name}': loop dimensions "
                      f"{', '.join(map(str, loops))} of operands with shapes "
                      f"{', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None
    if self.new_dims:
      new = self.shape_fn(dict(dims), **static)
      for d in self.new_dims:
        if d not in new:
          raise ValueError(f"numba primitive '{self.name}': shape_fn returned no size for "
                           f"output dimension '{d}'")
        size = int(new[d])
        if size < 0:
          raise ValueError(f"numba primitive '{self.name}': shape_fn gave '{d}' = {size}")
        dims[d] = size
    return loop, dims

  def _abstract_eval(self, *avals, **static):
    in_dtypes = [np.dtype(a.dtype) for a in avals]
    self._check_dtypes(in_dtypes)
    loop, dims = self._dims([a.shape for a in avals], static)
    outs = [_core.ShapedArray(loop + tuple(dims[d] for d in c), dt)
            for c, dt in zip(self.out_core, self._result_dtypes(in_dtypes, static))]
    return outs if self.primitive.multiple_results else outs[0]

  # -------------------------------------------------------------------- eager: the driver

  def driver(self):
    """The numba driver: ``driver(*inputs, *outputs, *statics)`` with every operand as
    ``(B_i, *core)`` (``B_i`` is the loop size or 1, broadcast) calls the kernel per slice."""
    if self._driver is None:
      with self._lock:
        if self._driver is None:
          self._driver = self._make_driver()
    return self._driver

  def _make_driver(self):
    return _DriverFamily(self)

  def _runner(self, xs, static):
    """``run(xs) -> outputs`` for eager operands of these shapes and dtypes: the operands
    reshaped to ``(B_i, *core)`` (``B_i`` the loop size, or 1 to broadcast), fresh outputs,
    one driver call. Built once per (shapes, dtypes, statics) after abstract eval checks."""
    outs = self._abstract_eval(*(_core.ShapedArray(x.shape, x.dtype) for x in xs), **static)
    outs = outs if self.primitive.multiple_results else [outs]
    loop = tuple(outs[0].shape[:len(outs[0].shape) - len(self.out_core[0])])
    B = math.prod(loop)
    shapes = []  # per operand: None (as is), a shape to reshape to, or ("bcast", shape, full)
    for x, c in zip(xs, self.in_core):
      nc = len(c)
      lp, core_shape = x.shape[:x.ndim - nc], x.shape[x.ndim - nc:]
      if math.prod(lp) == 1 and B != 1:
        shp = (1,) + core_shape
      elif B == 1 or (1,) * (len(loop) - len(lp)) + lp == loop:
        shp = (B,) + core_shape
      else:  # a partial broadcast of the loop dimensions: materialized
        shapes.append(("bcast", (B,) + core_shape, loop + core_shape))
        continue
      shapes.append(None if shp == x.shape else shp)
    names = tuple(sorted(static))
    full = B == 1 or not any(math.prod(x.shape[:x.ndim - len(c)]) == 1
                             for x, c in zip(xs, self.in_core))
    ns = {"empty": np.empty, "bcast": np.broadcast_to, "DRV": self.driver().for_names(names, full)}
    xs_ = [f"x{i}" for i in range(len(xs))]
    args = []
    for i, shp in enumerate(shapes):
      if shp is None:
        args.append(f"x{i}")
      elif shp[0] == "bcast":
        ns[f"F{i}"], ns[f"S{i}"] = shp[2], shp[1]
        args.append(f"bcast(x{i}, F{i}).reshape(S{i})")
      else:
        ns[f"S{i}"] = shp
        args.append(f"x{i}.reshape(S{i})")
    lines = []
    for j, o in enumerate(outs):  # outputs in their final shape, seen as (B, *core) or (B, 1)
      ns[f"OS{j}"], ns[f"OD{j}"] = o.shape, o.dtype
      view = (B,) + (o.shape[len(loop):] or (1,))
      lines.append(f"  o{j} = empty(OS{j}, OD{j})")
      if view == o.shape:
        args.append(f"o{j}")
      else:
        ns[f"V{j}"] = view
        args.append(f"o{j}.reshape(V{j})")
    args += [repr(static[n]) for n in names]
    ret = ", ".join(f"o{j}" for j in range(len(outs)))
    src = "\n".join([f"def run({', '.join(xs_)}):", *lines, f"  DRV({', '.join(args)})",
                     f"  return {'[' + ret + ']' if self.primitive.multiple_results else ret}"])
    exec(src, ns)
    run = ns["run"]

    try:  # the first call compiles: numba's typing errors name the primitive
      out = run(*xs)
    except Exception as e:
      raise self._compile_error(e, [x.dtype for x in xs], static) from None
    return run, out

  def _compile_error(self, e, in_dtypes, static):
    """numba's TypingError as a TypeError naming the primitive (other errors unchanged)."""
    import numba
    if not isinstance(e, numba.core.errors.TypingError):
      return e
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("Failed in", "During:", "File "))]
    why = "; ".join(lines[:3])
    return TypeError(f"numba primitive '{self.name}': the kernel does not compile for input "
                     f"dtypes ({', '.join(np.dtype(d).name for d in in_dtypes)}) and static "
                     f"parameters {static}: {why}")

  def _eager(self, *xs, **static):
    """The ``numba`` backend: ndarrays in, ndarrays out."""
    self.eager_calls += 1
    xs = [x if x.flags.c_contiguous else np.ascontiguousarray(x) for x in xs]
    key = tuple((x.shape, x.dtype.num) for x in xs)
    key = (key, tuple(static.items())) if static else key
    run = self._plans.get(key)
    if run is None:
      if len(self._plans) > 1024:
        self._plans.clear()
      run, out = self._runner(xs, static)
      self._plans[key] = run
      return out
    return run(*xs)

  def _make_eager(self, prim, f_small, f_large, thr):
    """``prim.eager``: Arrays (or NumPy arrays, Python scalars) in, Arrays out, through the
    cached runner; outputs are fresh buffers (never views of an input)."""
    if getattr(f_small, "__func__", None) is not NumbaPrimitive._eager:  # another backend pinned
      return registry.make_generic_eager(prim, f_small, f_large, thr)
    raw, multi, coerce, wrap, A = self._eager, self.primitive.multiple_results, registry.coerce, _wrap, Array

    def eager(*args, **static):
      out = raw(*[a._value if type(a) is A else coerce(a, prim)[0] for a in args], **static)
      return [wrap(o) for o in out] if multi else wrap(out)

    return eager

  # -------------------------------------------------------------------- vmap

  def _batch(self, vals, bdims, **static):
    # batch dimensions become the leading loop dimension; unbatched operands broadcast
    # against it as they are (loop dimensions align on the right)
    nd = lambda v: len(_core.get_aval(v).shape)
    lrank = max(nd(v) - len(c) - (d is not batching.not_mapped)
                for v, d, c in zip(vals, bdims, self.in_core))
    args = []
    for v, d, c in zip(vals, bdims, self.in_core):
      if d is not batching.not_mapped:
        v = batching.moveaxis(v, d, 0)
        pad = lrank - (nd(v) - 1 - len(c))
        if pad:
          v = v.reshape((v.shape[0],) + (1,) * pad + tuple(v.shape[1:]))
      args.append(v)
    out = self.primitive.bind(*args, **static)
    return (out, [0] * len(out)) if self.primitive.multiple_results else (out, 0)

  # -------------------------------------------------------------------- jit: the FFI handler

  def handler(self, in_dtypes, static):
    """The registered FFI target name for these input dtypes and static parameters."""
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    key = (in_dtypes, tuple(sorted(static.items())))
    hit = self._handlers.get(key)
    if hit is None:
      with self._lock:
        hit = self._handlers.get(key)
        if hit is None:
          hit = self._handlers[key] = self._make_handler(in_dtypes, static)
    return hit

  def _make_handler(self, in_dtypes, static):
    from numba import cfunc, types
    from kernels import ffi
    from nbjax import xla
    out_dtypes = self._result_dtypes(list(in_dtypes), static)
    tag = hashlib.sha256(repr((self._hash, [d.name for d in in_dtypes], sorted(static.items()))
                              ).encode()).hexdigest()[:12]
    fn = f"nbjax_user_{_ident(self.name)}_{tag}"
    nin, nout = len(self.in_core), len(self.out_core)
    pre = f"numba primitive '{self.name}'"
    msg = lambda s: repr(f"{pre}: {s}")
    L = [f"def {fn}(cf):", "  if ffi_metadata_query(cf):", "    return 0",
         f"  if num_args(cf) != {nin} or num_rets(cf) != {nout}:",
         f"    return ffi_error(cf, {msg(f'expected {nin} operands and {nout} results')})"]
    seen = {}

    def check(kind, i, c, d, r, b, what):  # dtype, rank, named dims; loop size into ``b``
      nonlocal L
      L += [f"  if {kind}_dtype(cf, {i}) != {ffi.FFI_DTYPE[d.name]}:",
            f"    return ffi_error(cf, {msg(f'{what} {i} is not {d.name}')})",
            f"  {r} = {kind}_rank(cf, {i})",
            f"  if {r} < {len(c)}:",
            f"    return ffi_error(cf, {msg(f'{what} {i} has fewer than {len(c)} dimensions')})"]
      for k, name in enumerate(c):
        dim = f"{kind}_dim(cf, {i}, {r} - {len(c) - k})"
        if name in seen:
          L += [f"  if {dim} != d_{name}:",
                f"    return ffi_error(cf, {msg(f'dimension {name} of {what} {i} does not match')})"]
        else:
          seen[name] = True
          L.append(f"  d_{name} = {dim}")
      L += [f"  {b} = 1", f"  for k in range({r} - {len(c)}):", f"    {b} *= {kind}_dim(cf, {i}, k)"]

    for i, (c, d) in enumerate(zip(self.in_core, in_dtypes)):
      check("arg", i, c, d, f"r{i}", f"b{i}", "operand")
    for j, (c, d) in enumerate(zip(self.out_core, out_dtypes)):
      check("ret", j, c, d, f"q{j}", f"c{j}", "result")
      if j:
        L += [f"  if c{j} != c0:", f"    return ffi_error(cf, {msg('results have different loop sizes')})"]
    for i in range(nin):
      L += [f"  if b{i} != 1 and b{i} != c0:",
            f"    return ffi_error(cf, {msg(f'operand {i} loop size does not match the results')})"]
    shape = lambda b, c: "(" + ", ".join([b] + ([f"d_{n}" for n in c] or ["1"])) + ",)"
    size = lambda b, c: " * ".join([b] + [f"d_{n}" for n in c])
    args = []
    for i, (c, d) in enumerate(zip(self.in_core, in_dtypes)):
      shp = "(" + ", ".join([f"b{i}"] + [f"d_{n}" for n in c]) + ",)"
      L.append(f"  x{i} = arg_flat(cf, {i}, np.{d.name}, {size(f'b{i}', c)}).reshape({shp})")
      args.append(f"x{i}")
    for j, (c, d) in enumerate(zip(self.out_core, out_dtypes)):
      L.append(f"  o{j} = ret_flat(cf, {j}, np.{d.name}, {size('c0', c)}).reshape({shape('c0', c)})")
      args.append(f"o{j}")
    stat = [repr(v) for _, v in sorted(static.items())]
    full = " and ".join(f"b{i} == c0" for i in range(nin)) or "True"
    L += [f"  if {full}:", f"    FULL({', '.join(args + stat)})", "  else:",
          f"    DRIVER({', '.join(args + stat)})", "  return 0"]
    names = tuple(sorted(static))
    drv, drv_full = self.driver().for_names(names), self.driver().for_names(names, True)
    src = ("import numpy as np\nfrom kernels.ffi import (ffi_metadata_query, ffi_error, num_args, "
           "num_rets, arg_dtype, ret_dtype, arg_rank, ret_rank, arg_dim, ret_dim, arg_flat, "
           "ret_flat)\n" + "\n".join(L) + "\n")
    ns = {"__name__": self._module, "DRIVER": drv, "FULL": drv_full}
    exec(compile(src, self._file, "exec"), ns)
    try:
      handler = cfunc(types.int64(types.voidptr), nopython=True, cache=self.cache,
                      error_model="numpy")(ns[fn])
    except Exception as e:
      raise self._compile_error(e, in_dtypes, static) from None
    xla.register_ffi_target(fn, handler)
    self._cfuncs.append(handler)
    return fn, out_dtypes

  def _lowering(self, ctx, *operands, **static):
    mlir, hlo, ir = _lowering.mlir, _lowering.hlo, _lowering.ir
    avals_in, avals_out = ctx.avals_in, ctx.avals_out
    target, _ = self.handler([a.dtype for a in avals_in], static)
    loop = tuple(avals_out[0].shape[:len(avals_out[0].shape) - len(self.out_core[0])])
    ops = []
    for x, a, c in zip(operands, avals_in, self.in_core):
      nc = len(a.shape) - len(c)
      lp, core_shape = tuple(a.shape[:nc]), tuple(a.shape[nc:])
      if lp == loop:
        ops.append(x)
      elif math.prod(lp) == 1:
        ops.append(hlo.reshape(mlir.aval_to_ir_type(a.update(shape=core_shape)), x))
      else:
        full = a.update(shape=loop + core_shape)
        off = len(loop) - len(lp)
        dims = list(range(off, off + len(lp))) + list(range(len(loop), len(loop) + len(core_shape)))
        ops.append(hlo.broadcast_in_dim(mlir.aval_to_ir_type(full), x, mlir.i64_array(dims)))
    op = hlo.CustomCallOp.build_generic(
        results=mlir.aval_to_ir_types(avals_out), operands=ops,
        attributes=dict(call_target_name=ir.StringAttr.get(target),
                        has_side_effect=ir.BoolAttr.get(False), api_version=mlir.i32_attr(4),
                        backend_config=ir.DictAttr.get({}),
                        called_computations=ir.ArrayAttr.get([])))
    return list(op.results)

  # -------------------------------------------------------------------- derivatives

  def defjvp(self, jvp):
    """Define the primitive's JVP, ``jvp(primals, tangents, **static) -> (primal_out,
    tangent_out)`` as ``custom_jvp.defjvp`` (tuples; one output per kernel output, a bare value
    for a single output). Written with nbjax ops (and this or other numba primitives); reverse
    mode transposes its tangent computation, which must be linear in ``tangents``."""
    multi = self.primitive.multiple_results

    def rule(primals, tangents, **static):
      tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
      out, tan = jvp(tuple(primals), tangents, **static)
      if multi:
        return list(out), list(tan)
      return out, tan

    self.primitive.jvp = rule
    registry.bump_epoch()
    return jvp

  def defvjp(self, fwd, bwd):
    """Define reverse-mode rules as ``custom_vjp.defvjp``: ``fwd(*args, **static) -> (out,
    residuals)`` and ``bwd(residuals, ct, **static) -> one cotangent per input`` (``None`` for
    zero). Forward mode (``jvp``, ``jacfwd``) then raises JAX's custom_vjp error."""
    multi = self.primitive.multiple_results

    def rule(primals, tangents, **static):
      in_zeros = tuple(type(t) is ad.Zero for t in tangents)
      out, res = fwd(*primals, **static)
      res_flat, res_tree = tree_flatten(res)
      outs = list(out) if multi else [out]
      out_avals = tuple(_core.get_aval(o).to_tangent_aval() for o in outs)
      in_avals = [_core.get_aval(p) for p in primals]

      store = _VJPStore(res_tree, tree_flatten(tuple(outs) if multi else out)[1])
      bwd_flat = _flat_bwd(lambda r, ct: _as_tuple(bwd(r, ct, **static)),
                           tree_flatten(tuple(primals))[1], in_avals, store, self)

      tans = ad.custom_lin_p.bind(
          *res_flat, *[t for t in tangents if type(t) is not ad.Zero], num_res=len(res_flat),
          bwd=bwd_flat, out_avals=out_avals, symbolic_zeros=False, in_zeros=in_zeros)
      return (outs, tans) if multi else (out, tans[0])

    self.primitive.jvp = rule
    self.primitive.meta["note"] = f"numba_primitive {self.signature}; defvjp (reverse mode only)"
    registry.bump_epoch()
    return fwd, bwd




class _VJPStore:
  """The treedefs ``custom_derivatives._flat_bwd`` reads (its ``_Store``'s interface)."""

  def __init__(self, res, out):
    self.res, self._out = res, out

  def out_tree(self):
    return self._out


def _as_tuple(cts):
  """A bwd rule's result: a tuple (a bare cotangent for a one-input primitive is accepted)."""
  return tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)


class _DriverFamily:
  """The numba driver of one NumbaPrimitive: ``driver(*inputs, *outputs, *statics)``, every
  operand ``(B_i, *core)`` (``B_i``: the loop size, or 1 to broadcast), calling the kernel on
  each slice. One dispatcher per set of static parameter names (they reach the kernel by
  keyword); numba compiles each per operand types."""

  def __init__(self, owner):
    self.owner = owner
    self._by_names = {}

  def for_names(self, names, full=False):
    """The driver for these static names; ``full``: every operand has the whole loop (no
    broadcast index select in the loop, which then vectorizes better)."""
    d = self._by_names.get((names, full))
    if d is None:
      import numba
      o = self.owner
      nin, nout = len(o.in_core), len(o.out_core)
      fn = (f"_nbjax_driver_{_ident(o.name)}_{o._hash}" + "".join(f"_{n}" for n in names)
            + ("_full" if full else ""))
      params = [f"x{i}" for i in range(nin)] + [f"o{j}" for j in range(nout)] + [f"s_{n}" for n in names]
      # array inputs reach the kernel typed read-only: writing them is a typing error
      ro = lambda i, e: f"RO({e})" if o.in_core[i] else e
      call = ([ro(i, f"x{i}[b]" if full else f"x{i}[b if m{i} else 0]") for i in range(nin)]
              + [f"o{j}[b]" for j in range(nout)] + [f"{n}=s_{n}" for n in names])
      src = "\n".join([f"def {fn}({', '.join(params)}):", "  B = o0.shape[0]"]
                      + ([] if full else [f"  m{i} = x{i}.shape[0] != 1" for i in range(nin)])
                      + ["  for b in range(B):", f"    KERNEL({', '.join(call)})", ""])
      from kernels.ffi import readonly
      ns = {"__name__": o._module, "KERNEL": o.kernel, "RO": readonly}
      exec(compile(src, o._file, "exec"), ns)
      opts = {k: v for k, v in o.kernel.targetoptions.items() if k in ("fastmath", "error_model")}
      d = self._by_names[(names, full)] = numba.njit(cache=o.cache, nogil=True, **opts)(ns[fn])
    return d


def numba_primitive(kernel=None, signature=None, *, name=None, dtypes=None, out_dtypes=None,
                    shape_fn=None, cache=True, fastmath=False):
  """Make a primitive from a numba kernel with a gufunc-style core signature.

  Args:
    kernel: a Python function (or ``numba.njit`` dispatcher) in ``numba.guvectorize``'s
      convention: ``kernel(*inputs, *outputs, **static)`` receives one core slice of each input
      (a scalar for a ``()`` input) and each output (an array; ``out[0]`` for a ``()`` output)
      and writes the outputs.
    signature: the core signature, e.g. ``"(n),(n)->()"`` or ``"(m,n),(n,p)->(m,p)"``. Leading
      dimensions beyond the core ones are loop dimensions; they broadcast as NumPy's.
    name: the primitive's name (default: the kernel's).
    dtypes: the input dtypes allowed: a list of dtypes (each input any of them) or of tuples
      (allowed combinations); default: every dtype numba supports. The kernel is compiled per
      combination used.
    out_dtypes: the output dtype rule: a dtype, a tuple of dtypes (one per output) or a
      function ``(*in_dtypes, **static) -> dtype(s)``; default: the inputs' promoted dtype.
    shape_fn: ``shape_fn(dims, **static) -> {name: size}`` for output dimensions that no input
      has (``dims`` maps the input dimension names to sizes).
    cache: numba's on-disk cache for the kernel, driver and jit handler.
    fastmath: numba's ``fastmath`` for the kernel (e.g. ``{"reassoc"}`` lets LLVM vectorize a
      floating-point sum). Kernels compile with ``error_model="numpy"``: division by zero
      gives inf/NaN as in JAX, never an exception. For transcendental functions that
      vectorize, call ``nbjax.extend.simd.exp``/``log``/``log1p``/``softplus``/``sigmoid``
      (numba's ``np.exp`` and friends call scalar libm).

  Returns:
    A ``NumbaPrimitive``: call it with arrays (and static keyword parameters: Python scalars,
    passed to the kernel by name and part of the compiled key). It works eagerly, under
    ``vmap`` (batch dimensions become loop dimensions), under ``jit`` (an XLA custom call to a
    numba ``@cfunc`` running the same kernel) and, after ``defjvp`` or ``defvjp``, under every
    differentiation transformation.

  Usable as a decorator: ``@numba_primitive(signature="(n)->()")``.
  """
  if isinstance(kernel, str) and signature is None:
    kernel, signature = None, kernel
  if signature is None:
    raise TypeError("numba_primitive() needs a core signature, e.g. signature='(n)->()'")
  make = lambda k: NumbaPrimitive(k, signature, name=name, dtypes=dtypes, out_dtypes=out_dtypes,
                                  shape_fn=shape_fn, cache=cache, fastmath=fastmath)
  return make if kernel is None else make(kernel)
