"""Eager fusion: chains of exact elementwise primitives on large arrays run as one numba loop.

Pipeline position: between an elementwise primitive's eager entry
(``nbjax.lax.elementwise.make_elementwise_eager``) and its kernel. When every operand is an
nbjax Array (never a caller's NumPy buffer, which could change) of one shape of at least
``MIN_SIZE`` elements, or a scalar, and the primitive's kernel for those dtypes is exact
(``registry.exact_kernel``: NumPy and numba give the same bits), the entry returns a ``Lazy``
array: an ``Array`` whose buffer is not computed yet and which holds the pending expression
(kernel, dtype, shape, operands). An exact primitive applied to pending operands extends the
expression (at most ``MAX_NODES`` primitives over ``MAX_LEAVES`` buffers, so what a pending
array keeps alive stays bounded). The first read of ``_value`` (any other primitive, NumPy
export, printing, jit, ``block_until_ready``) compiles (once per expression structure and
dtypes) a loop that reads each buffer once and writes one (pooled) output, stores it, drops
the expression (releasing its operands) and turns the array into a plain ``Array``.

What the user observes is unchanged: operands are validated by abstract eval when the
primitive is applied (errors are raised there), every intermediate is rounded to its dtype as
the unfused kernels do (so the bits are equal), shape/dtype/weak type are known without
computing, and results are immutable. ``config.update("jax_eager_fusion", False)`` (or
``NBJAX_EAGER_FUSION=0``) turns it off.
"""
from __future__ import annotations

import threading

import numpy as np

from kernels import elementwise as KE
from kernels.threads import MAX_CHUNKS, TEAM_USES, team_run
from nbjax import core, registry
from nbjax.array import Array
from nbjax.array import empty as pooled_empty
from nbjax.config import config

# output elements: below it, a lazy node costs more than it saves. Measured (float32, quiet,
# median CPU time, `x * y + x` / `x + y` fused against unfused): 107/78 us against 88/42 at
# 131K; 139/113 against 153/74 at 262K; 230/200 against 322/156 at 524K. A pending result
# costs ~25 us of Python (building, materializing) and its loop runs on one core, where the
# unfused kernels use two from 1e5: a chain gains from here, a single op still loses
MIN_SIZE = 1 << 18
# fused loops run in chunks of THREAD_CHUNK elements (at most MAX_CHUNKS) on the caller and the
# native team worker (kernels.threads.team_run: a descheduled worker does not hold the caller
# back). The Python-thread worker this replaced paid off only from 2^24 elements (float32
# `x + y`, medians; quiet, then with the other core busy: 4.2e6 elements 1.31 -> 1.06 ms quiet
# but 1.26 -> 1.42 busy).
THREAD_CHUNK = 1 << 14
TEAM_USES["fused elementwise loops"] = f"from {MIN_SIZE} elements (all of them)"
MAX_NODES = 16      # primitives in one pending expression
MAX_LEAVES = 8      # buffers (and scalars) one pending expression reads

on = [config.read("eager_fusion")]
config.add_listener(lambda name, v: on.__setitem__(0, bool(v)) if name == "eager_fusion" else None)

_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64, np.bool_, np.int8, np.int16,
                                   np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64)))
_lock = threading.RLock()
_get_value = Array.__dict__["_value"].__get__  # the slot alone (raises if unset)


class Lazy(Array):
  """A pending elementwise result (an ``Array`` in every respect but ``type(x) is Array``,
  which the first read of its buffer restores)."""
  __slots__ = ()

  def __getattr__(self, name):
    if name == "_value":
      return materialize(self)
    return Array.__getattr__(self, name)

  def block_until_ready(self):
    materialize(self)
    return self

  def _meta(self):
    e = self._expr
    if e is None:  # materialized meanwhile (another thread)
      v = self._value
      return v.shape, v.dtype
    return e[2], e[1]

  shape = property(lambda self: self._meta()[0])
  dtype = property(lambda self: self._meta()[1])
  ndim = property(lambda self: len(self._meta()[0]))
  size = property(lambda self: int(np.prod(self._meta()[0], dtype=np.int64)))
  itemsize = property(lambda self: self._meta()[1].itemsize)
  nbytes = property(lambda self: self.size * self.itemsize)
  aval = property(lambda self: core.ShapedArray(*self._meta(), self._weak))


def defer(kname, run, out_aval, args):
  """A ``Lazy`` result of kernel ``kname`` (the unfused ``run`` as fallback) over ``args``
  (Arrays and Lazy arrays of ``out_aval``'s shape, or rank 0), or None when it may not."""
  ops, nodes, leaves = [], 1, 0
  if kname == "div" and type(args[1]) is not Lazy and not args[1]._value.ndim:
    kname = "div_recip"  # a real division by a broadcast scalar, as lax's div computes it
  for a in args:
    if type(a) is Lazy:
      e = a._expr
      if e is not None:
        ops.append(a)
        nodes += e[4]
        leaves += e[5]
        continue
    v = a._value
    ops.append(v if v.ndim else v[()])
    leaves += 1
  if nodes > MAX_NODES or leaves > MAX_LEAVES:  # compute the pending operands first
    ops = [o._value if type(o) is Lazy else o for o in ops]
    nodes, leaves = 1, len(ops)
  r = object.__new__(Lazy)
  r._weak = out_aval.weak_type
  r._buf = None
  r._expr = (kname, out_aval.dtype, out_aval.shape, tuple(ops), nodes, leaves, run)
  return r


def fusable(kname, in_dtypes, out_dtype):
  """Whether kernel ``kname`` may join a fused loop for these dtypes."""
  if kname is None or out_dtype not in _DTYPES or not all(d in _DTYPES for d in in_dtypes):
    return False
  return "nbits" not in KE.expression(kname)


def materialize(a):
  """Compute pending ``a`` (once, whichever thread reads it first) and return its buffer."""
  with _lock:
    try:
      return _get_value(a)
    except AttributeError:
      pass
    try:  # (one primitive over buffers: its own kernel, without building a loop's key)
      out = _unfused(a) if a._expr[4] == 1 else _fused(a)
    except Exception:  # noqa: BLE001  (numba cannot compile it: the kernels run one by one)
      out = _unfused(a)
    a._value = out
    a._expr = None
    a.__class__ = Array
    return out


def _unfused(x):
  if type(x) is not Lazy:
    return x._value if type(x) is Array else x
  e = x._expr
  vals = [_unfused(o) for o in e[3]]
  vals = [v if isinstance(v, np.ndarray) else np.asarray(v) for v in vals]
  return registry.quiet_run(e[6], *vals)


_kernels = {}  # (steps, array dtypes, scalar dtypes) -> its chunk function's address


def _fused(root):
  arrays, scalars, steps, names = [], [], [], {}

  def visit(x):
    if type(x) is Lazy:
      n = names.get(id(x))
      if n is None:
        kname, dt, _, ops = x._expr[:4]
        args = tuple(visit(o) for o in ops)
        n = names[id(x)] = f"t{len(steps)}"
        steps.append((kname, dt, args))
      return n
    if type(x) is Array:
      x = x._value
    if isinstance(x, np.ndarray):
      n = names.get(id(x))
      if n is None:
        n = names[id(x)] = f"a{len(arrays)}"
        arrays.append(x)
      return n
    scalars.append(x)
    return f"s{len(scalars) - 1}"

  visit(root)
  key = (tuple(steps), tuple(x.dtype for x in arrays), tuple(s.dtype for s in scalars))
  shape, dt = root._expr[2], root._expr[1]
  out = pooled_empty(shape, dt)
  fn = _kernels.get(key)
  if fn is None:
    fn = _kernels[key] = KE.chunked(KE.fused(_source(steps, len(arrays), len(scalars))),
                                    [*key[1], *key[2], dt], len(scalars))
  team_run(fn, (*(x.reshape(-1) for x in arrays), *(np.reshape(s, 1) for s in scalars),
                out.reshape(-1)), min(out.size // THREAD_CHUNK, MAX_CHUNKS))
  return out


def _source(steps, narrays, nscalars):
  body = []
  for i, (kname, dt, ops) in enumerate(steps):
    body.append(f"    t{i} = {KE.step(kname, ops, 'bool' if dt.kind == 'b' else f'np.{dt.name}')}")
  params = [f"x{j}" for j in range(narrays)] + [f"s{j}" for j in range(nscalars)]
  return "\n".join([f"def {{fn}}({', '.join(params)}, out):", "  for i in range(out.size):",
                    *(f"    a{j} = x{j}[i]" for j in range(narrays)), *body,
                    f"    out[i] = t{len(steps) - 1}"]) + "\n"
