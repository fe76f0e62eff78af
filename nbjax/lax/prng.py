"""``threefry_sample``: JAX's threefry2x32 random bits, and their conversion to floats or
booleans, as one primitive.

Pipeline position: ``nbjax.random``'s samplers (``split``, ``bits``, ``uniform``, ``normal``,
``bernoulli``, ``randint``...) bind ``threefry_sample_p(keys[, p], shape, op, dtype,
partitionable)`` on raw ``uint32[*batch, 2]`` key data. Eagerly the registry runs the fused
numba kernel of ``kernels/random.py``: bits are generated and converted straight into the
output (time and memory proportional to the output, no counter/bits/float temporaries).
Under ``jit`` the primitive lowers (``mlir.lower_fun``) to the same computation written in
lax operations (``sample_lax``: iota counters, the 20 threefry rounds, shifts and a multiply),
which is what JAX emits; the two agree bit for bit. ``vmap`` batches the key array (a leading
key axis is a loop in the kernel); the outputs have no derivative (keys are integers, and a
Bernoulli draw is piecewise constant in ``p``).

``op``: ``"split"`` (``uint32[*batch, *shape, 2]`` new keys), ``"bits"`` (``dtype`` an
unsigned int), ``"uniform"`` (``dtype`` float32/float64, values in ``[0, 1)``: the mantissa
bits of a draw) and ``"bernoulli"`` (``uniform < p`` with ``p`` of ``dtype``, broadcast to
the output; bool output). ``partitionable``: JAX's ``jax_threefry_partitionable`` layout
(default) or the classic one.
"""
from __future__ import annotations

import math

import numpy as np

from nbjax import dtypes, registry
from nbjax.core import Primitive, ShapedArray, get_aval
from nbjax.interpreters import ad, batching
from nbjax.interpreters import lowering
from nbjax.jaxpr import jaxprs_in_params

__all__ = ["threefry_sample_p", "threefry_sample", "threefry2x32", "KeyTy", "random_seed_p",
           "random_split_p", "random_fold_in_p", "random_bits_p", "random_wrap_p",
           "random_unwrap_p"]

_U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: np.dtype(np.uint64)}
_FLOAT = {32: np.dtype(np.float32), 64: np.dtype(np.float64)}
_OPS = ("split", "fold_in", "bits", "uniform", "bernoulli")


def _lax():
  from nbjax import lax
  return lax


_KEY_OUT = ("split", "fold_in")  # ops whose outputs are keys (a trailing axis of 2 words)
_P_OPS = ("fold_in", "bernoulli")  # ops with an operand besides the keys


def _width(op, dtype):
  return 32 if op in _KEY_OUT else np.dtype(dtype).itemsize * 8


def _out_dtype(op, dtype):
  return {"split": _U32, "fold_in": _U32, "bernoulli": np.dtype(np.bool_)}.get(op, np.dtype(dtype))


def _abstract_eval(keys, *p, shape, op, dtype, partitionable):
  if op not in _OPS:
    raise ValueError(f"threefry_sample: unknown op {op!r}; expected one of {_OPS}")
  if keys.dtype != _U32 or keys.ndim < 1 or keys.shape[-1] != 2:
    raise TypeError(f"threefry_sample: keys must be uint32[..., 2], got {keys.str_short()}")
  d = np.dtype(dtype)
  if op == "fold_in" and shape != ():
    raise ValueError(f"threefry_sample: fold_in takes shape=(), got {shape}")
  ok = {"split": d == _U32, "fold_in": d == _U32, "bits": d in _UINT.values(),
        "uniform": d in _FLOAT.values(), "bernoulli": d in _FLOAT.values()}[op]
  if not ok:
    raise TypeError(f"threefry_sample: op {op!r} does not support dtype {d}")
  if len(p) != (op in _P_OPS):
    raise TypeError(f"threefry_sample: op {op!r} takes {int(op in _P_OPS)} operands "
                    f"besides the keys, got {len(p)}")
  out = tuple(keys.shape[:-1]) + tuple(shape) + ((2,) if op in _KEY_OUT else ())
  if op == "fold_in":  # the data broadcasts against the keys' batch shape
    out = out[:-1]
  if p:
    if p[0].dtype != d:
      raise TypeError(f"threefry_sample: p must be {d}, got {p[0].dtype}")
    try:
      ok = np.broadcast_shapes(p[0].shape, out) == out
    except ValueError:
      ok = False
    if not ok:
      raise ValueError(f"threefry_sample: p of shape {p[0].shape} does not broadcast to the "
                       f"output shape {out}")
    if op == "fold_in":
      out = out + (2,)
  check_size(shape, partitionable, 32 * (2 if op == "split" else 1) if op in _KEY_OUT
             else _width(op, dtype))
  return ShapedArray(out, _out_dtype(op, dtype))


def check_size(shape, partitionable, width=32):
  """JAX's size limits: ``2**64`` counters (partitionable: two words of an index); the classic
  layout here hashes one ``uint32`` iota of its ``ceil(width * size / 32)`` words (JAX
  splits the key into blocks of ``2**32 - 1`` words beyond that)."""
  n = math.prod(shape)
  if partitionable and n > 2 ** 64:
    raise NotImplementedError("random bits array of size exceeding 2 ** 64")
  if not partitionable and -(-width * n // 32) >= 2 ** 32 - 1:
    raise NotImplementedError("random bits array of size exceeding 2 ** 32")


def iota_2x32(shape, dim):
  """``(hi, lo)``: the ``uint32`` words of a 64-bit iota of ``shape`` along ``dim`` (JAX's
  ``iota_2x32_shape``); ``hi`` is None below ``2**32``."""
  lax = _lax()
  if shape[dim] < 2 ** 32:
    return None, lax.broadcasted_iota(_U32, shape, dim)
  from nbjax.config import config
  with config.override("enable_x64", True):  # uint64 inside the computation, as JAX's lowering
    i = lax.broadcasted_iota(np.uint64, shape, dim)
    return (lax.convert_element_type(lax.shift_right_logical(i, np.uint64(32)), _U32),
            lax.convert_element_type(i, _U32))


def _numba(keys, *p, shape, op, dtype, partitionable):
  from kernels import random as K
  kb = keys.shape[:-1]
  keys = np.ascontiguousarray(keys.reshape(-1, 2))
  n = math.prod(shape)
  out_shape = tuple(kb) + tuple(shape) + ((2,) if op in _KEY_OUT else ())
  out = np.empty(math.prod(out_shape), _out_dtype(op, dtype))
  if op == "fold_in":
    pa = np.asarray(p[0], np.uint32)
    pa = pa.reshape(1) if pa.size == 1 else np.broadcast_to(pa, kb).reshape(-1)
    pstep = int(pa.size != 1)
  elif p:
    pa = K.threshold(p[0], _width(op, dtype))
    pa = pa.reshape(1) if pa.size == 1 else np.broadcast_to(pa, out_shape).reshape(-1)
    pstep = int(pa.size != 1)
  else:
    pa, pstep = np.zeros(1, np.float64), 0
  width = _width(op, dtype)
  par = out.size >= 1 << 18
  k = K.sample(op, width, partitionable, par)
  k(keys, 2 * n if op == "split" and not partitionable else n, out, pa, pstep)
  return out.reshape(out_shape)


# ------------------------------------------------------------------ the lax composition

def threefry2x32(k0, k1, x0, x1):
  """threefry2x32 (20 rounds) of ``uint32`` counter words ``x0, x1`` (same shape) under key
  words ``k0, k1`` (broadcast to that shape), as lax operations."""
  lax = _lax()
  shape = get_aval(x0).shape
  k0, k1 = (lax.broadcast_in_dim(k, shape, tuple(range(get_aval(k).ndim))) for k in (k0, k1))
  u = np.uint32
  rotl = lambda v, d: lax.bitwise_or(lax.shift_left(v, u(d)), lax.shift_right_logical(v, u(32 - d)))
  ks = [k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), u(0x1BD11BDA))]
  rots = [(13, 15, 26, 6), (17, 29, 16, 24)]
  x0, x1 = lax.add(x0, ks[0]), lax.add(x1, ks[1])
  for i in range(5):
    for r in rots[i % 2]:
      x0 = lax.add(x0, x1)
      x1 = lax.bitwise_xor(x0, rotl(x1, r))
    x0 = lax.add(x0, ks[(i + 1) % 3])
    x1 = lax.add(lax.add(x1, ks[(i + 2) % 3]), u(i + 1))
  return x0, x1


def _words(keys, kb, m, partitionable):
  """The ``m`` 32-bit classic words (``partitionable=False``) of each key: ``kb + (m,)``."""
  lax = _lax()
  h = (m + 1) // 2
  shape = tuple(kb) + (h,)
  j = lax.broadcasted_iota(_U32, shape, len(kb))
  x1 = lax.add(j, np.uint32(h))
  x1 = lax.select(lax.lt(x1, np.uint32(m)), x1, lax.full(shape, 0, _U32))
  y0, y1 = threefry2x32(keys[0], keys[1], j, x1)
  return lax.slice_in_dim(lax.concatenate([y0, y1], len(kb)), 0, m, axis=len(kb))


def _bits_lax(keys, kb, shape, width, partitionable):
  lax = _lax()
  n = math.prod(shape)
  out = tuple(kb) + tuple(shape)
  nd = len(kb)
  dt = _UINT[width]
  if partitionable:
    hi, lo = iota_2x32((*kb, n), nd)
    y0, y1 = threefry2x32(keys[0], keys[1], lax.full((*kb, n), 0, _U32) if hi is None else hi, lo)
    if width == 64:
      hi = lax.convert_element_type(y0, dt)
      b = lax.bitwise_or(lax.shift_left(hi, lax.convert_element_type(32, dt)),
                         lax.convert_element_type(y1, dt))
    else:
      b = lax.bitwise_xor(y0, y1)
      if width < 32:
        b = lax.convert_element_type(lax.bitwise_and(b, np.uint32((1 << width) - 1)), dt)
    return lax.reshape(b, out)
  if width == 64:
    w = _words(keys, kb, 2 * n, False)
    hi = lax.convert_element_type(lax.slice_in_dim(w, 0, n, axis=nd), dt)
    lo = lax.convert_element_type(lax.slice_in_dim(w, n, 2 * n, axis=nd), dt)
    return lax.reshape(lax.bitwise_or(lax.shift_left(hi, np.uint64(64 // 2)), lo), out)
  m = -(-width * n // 32)
  w = _words(keys, kb, m, False)
  if width < 32:
    per = 32 // width
    sh = lax.broadcasted_iota(_U32, (*kb, m, per), nd + 1)
    sh = lax.mul(sh, np.uint32(width))
    wb = lax.broadcast_in_dim(w, (*kb, m, per), tuple(range(nd + 1)))
    parts = lax.bitwise_and(lax.shift_right_logical(wb, sh), np.uint32((1 << width) - 1))
    w = lax.slice_in_dim(lax.reshape(parts, (*kb, m * per)), 0, n, axis=nd)
    w = lax.convert_element_type(w, dt)
  return lax.reshape(w, out)


def sample_lax(keys, *p, shape, op, dtype, partitionable):
  """``threefry_sample`` as lax operations (its lowering; JAX's computation)."""
  lax = _lax()
  ka = get_aval(keys)
  kb = ka.shape[:-1]
  nd = len(kb)
  keys = [lax.squeeze(lax.slice_in_dim(keys, i, i + 1, axis=nd), (nd,)) for i in (0, 1)]
  if op == "fold_in":
    pa = get_aval(p[0])
    d = lax.broadcast_in_dim(p[0], tuple(kb), tuple(range(nd - pa.ndim, nd)))
    y0, y1 = threefry2x32(keys[0], keys[1], lax.full(tuple(kb), 0, _U32), d)
    pair = (*kb, 1)
    return lax.concatenate([lax.reshape(y0, pair), lax.reshape(y1, pair)], nd)
  if op == "split":
    n = math.prod(shape)
    if partitionable:
      hi, lo = iota_2x32((*kb, n), nd)
      y0, y1 = threefry2x32(keys[0], keys[1], lax.full((*kb, n), 0, _U32) if hi is None else hi,
                            lo)
      pair = (*kb, n, 1)
      w = lax.concatenate([lax.reshape(y0, pair), lax.reshape(y1, pair)], nd + 1)
    else:
      w = _words(keys, kb, 2 * n, False)
    return lax.reshape(w, (*kb, *shape, 2))
  width = _width(op, dtype)
  b = _bits_lax(keys, kb, shape, width, partitionable)
  if op == "bits":
    return b
  fdt = _FLOAT[width]
  nmant = dtypes.finfo(fdt).nmant
  m = lax.shift_right_logical(b, _UINT[width].type(width - nmant))
  u = lax.mul(lax.convert_element_type(m, fdt), fdt.type(2.0 ** -nmant))
  if op == "uniform":
    return u
  pv = p[0]
  out = tuple(kb) + tuple(shape)
  pa = get_aval(pv)
  pv = lax.broadcast_in_dim(pv, out, tuple(range(len(out) - pa.ndim, len(out))))
  return lax.lt(u, pv)


# ------------------------------------------------------------------ rules

def _batch(vals, dims, *, shape, op, dtype, partitionable):
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
  keys = batching.bdim_at_front(vals[0], dims[0], size)
  p = vals[1:]
  if p:
    pv, pd = p[0], dims[1]
    if pd is not batching.not_mapped:  # p's batch axis first, then p padded to full rank
      lax = _lax()
      pv = batching.moveaxis(pv, pd, 0)
      pa = get_aval(pv)
      rank = get_aval(keys).ndim - 1 + len(shape)  # fold_in: shape is ()
      pv = lax.broadcast_in_dim(pv, (pa.shape[0],) + (1,) * (rank - pa.ndim) + pa.shape[1:],
                                (0, *range(rank - pa.ndim + 1, rank)))
    p = (pv,)
  return threefry_sample_p.bind(keys, *p, shape=shape, op=op, dtype=dtype,
                                partitionable=partitionable), 0


def _reference(keys, *p, shape, op, dtype, partitionable):
  """The test oracle: the hash in NumPy ``uint32`` arithmetic, one output at a time."""
  keys = np.asarray(keys)
  kb = keys.shape[:-1]
  n = math.prod(shape)
  flat = keys.reshape(-1, 2)
  out = []
  if op == "fold_in":
    d = np.broadcast_to(np.asarray(p[0], np.uint32), kb).reshape(-1)
    out = [_np_threefry(int(k0), int(k1), 0, int(x)) for (k0, k1), x in zip(flat, d)]
    return np.array(out, np.uint32).reshape(tuple(kb) + (2,))
  for k0, k1 in flat:
    out.append(_np_sample(int(k0), int(k1), n, op, dtype, partitionable))
  out = np.stack(out) if out else np.zeros((0, 2 * n if op == "split" else n))
  res = out.reshape(tuple(kb) + tuple(shape) + ((2,) if op == "split" else ()))
  if op == "bernoulli":
    res = res < np.asarray(p[0])
  return res.astype(_out_dtype(op, dtype))


def _np_threefry(k0, k1, x0, x1):
  m = 0xFFFFFFFF
  ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
  rots = [(13, 15, 26, 6), (17, 29, 16, 24)]
  x0, x1 = (x0 + ks[0]) & m, (x1 + ks[1]) & m
  for i in range(5):
    for r in rots[i % 2]:
      x0 = (x0 + x1) & m
      x1 = x0 ^ (((x1 << r) | (x1 >> (32 - r))) & m)
    x0 = (x0 + ks[(i + 1) % 3]) & m
    x1 = (x1 + ks[(i + 2) % 3] + i + 1) & m
  return x0, x1


def _np_sample(k0, k1, n, op, dtype, partitionable):
  width = _width(op, dtype)
  if op == "split":
    if partitionable:
      return np.array([w for i in range(n) for w in _np_threefry(k0, k1, 0, i)], np.uint64)
    return _np_words(k0, k1, 2 * n)
  if partitionable:
    pairs = [_np_threefry(k0, k1, 0, i) for i in range(n)]
    if width == 64:
      b = [(a << 32) | c for a, c in pairs]
    else:
      b = [(a ^ c) & ((1 << width) - 1) for a, c in pairs]
  elif width == 64:
    w = _np_words(k0, k1, 2 * n)
    b = [(int(w[i]) << 32) | int(w[n + i]) for i in range(n)]
  else:
    w = _np_words(k0, k1, -(-width * n // 32))
    per = 32 // width
    b = [(int(w[i // per]) >> (width * (i % per))) & ((1 << width) - 1) for i in range(n)]
  b = np.array(b, np.uint64)
  if op == "bits":
    return b
  nmant = dtypes.finfo(dtype).nmant
  return (b >> np.uint64(width - nmant)).astype(np.float64) * 2.0 ** -nmant


def _np_words(k0, k1, m):
  h = (m + 1) // 2
  y = [_np_threefry(k0, k1, j, h + j if h + j < m else 0) for j in range(h)]
  return np.array([a for a, _ in y] + [c for _, c in y], np.uint64)[:m]


def _samples(rng, dtype):
  d = np.dtype(dtype)
  keys = [np.array([0, 42], np.uint32), np.array([[1, 2], [0xFFFFFFFF, 7], [5, 0]], np.uint32)]
  cases = []
  for part in (True, False):
    for k in keys:
      for shape in [(), (5,), (2, 3), (0,)]:
        base = dict(shape=shape, partitionable=part)
        if d == _U32:
          cases.append(([k], dict(base, op="split", dtype=d)))
          if shape == ():
            data = rng.integers(0, 2 ** 32, k.shape[:-1], dtype=np.uint32)
            cases.append(([k, data], dict(base, op="fold_in", dtype=d)))
            cases.append(([k, np.uint32(7)], dict(base, op="fold_in", dtype=d)))
        if d in _UINT.values():
          cases.append(([k], dict(base, op="bits", dtype=d)))
        if d in _FLOAT.values():
          cases.append(([k], dict(base, op="uniform", dtype=d)))
          p = rng.uniform(size=k.shape[:-1] + shape).astype(d)
          cases.append(([k, p], dict(base, op="bernoulli", dtype=d)))
          cases.append(([k, d.type(0.3)], dict(base, op="bernoulli", dtype=d)))
  return cases


def _bad(rng):
  from nbjax.array import Array
  k = Array(np.zeros(2, np.uint32))
  P = dict(shape=(3,), partitionable=True)
  return [([Array(np.zeros(2, np.int32))], dict(P, op="bits", dtype=_U32), TypeError),
          ([Array(np.zeros(3, np.uint32))], dict(P, op="bits", dtype=_U32), TypeError),
          ([k], dict(P, op="uniform", dtype=_U32), TypeError),
          ([k], dict(P, op="bits", dtype=np.dtype(np.int32)), TypeError),
          ([k], dict(P, op="hash", dtype=_U32), ValueError),
          ([k, Array(np.zeros(4, np.float32))], dict(P, op="bernoulli", dtype=np.float32),
           ValueError),
          ([k], dict(P, op="bernoulli", dtype=np.dtype(np.float32)), TypeError)]


threefry_sample_p = Primitive("threefry_sample")
ad.defjvp_zero(threefry_sample_p)
registry.register(
    threefry_sample_p, family="random", impls={"numba": _numba}, abstract_eval=_abstract_eval,
    batch=_batch,
    meta=dict(dtypes=[np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64", "float32",
                                            "float64")],
              reference=_reference, samples=_samples, bad_inputs=_bad, differentiable=False,
              note="numba; bernoulli: p's integer thresholds computed by NumPy (clip, ceil); "
                   "a p (or fold_in data) that broadcasts: copied to full size by NumPy"))


def threefry_sample(keys, *p, shape, op, dtype, partitionable):
  """Bind ``threefry_sample_p`` (``shape`` a tuple of ints)."""
  return threefry_sample_p.bind(keys, *p, shape=tuple(shape), op=op, dtype=np.dtype(dtype),
                                partitionable=bool(partitionable))


# ====================================================================== lowering (StableHLO)
from nbjax.interpreters import lowering  # noqa: E402  (no jaxlib import until jit lowers)


def _sample_lowering(ctx, *args, **params):
  from nbjax.interpreters import mlir
  return mlir.lower_fun(sample_lax, multiple_results=False)(ctx, *args, **params)


lowering.register(threefry_sample_p, _sample_lowering)


# ====================================================================== rng_bit_generator
# XLA's RngBitGenerator (JAX's ``lax.rng_bit_generator``): the bits of the ``rbg`` and
# ``unsafe_rbg`` PRNG implementations. Its algorithm (the platform's default, Philox on CPU)
# lives in XLA, so the eager backend is XLA itself (one cached executable per signature).

import enum  # noqa: E402
import weakref  # noqa: E402


class RandomAlgorithm(enum.IntEnum):
  """Which algorithm ``rng_bit_generator`` uses (JAX's names and values)."""
  RNG_DEFAULT = 0
  RNG_THREE_FRY = 1
  RNG_PHILOX = 2

  def __str__(self):
    return self.name


def _rbg_abstract_eval(key, *, shape, dtype, algorithm):
  ok = (key.shape == (4,) and key.dtype == _U32) or (
      key.shape == (2,) and key.dtype == np.dtype(np.uint64))
  if not ok:
    raise TypeError(f"rng_bit_generator: key must be uint32[4] or uint64[2], got "
                    f"{key.str_short()}")
  d = np.dtype(dtype)
  if not dtypes.issubdtype(d, np.integer):
    raise TypeError(f"rng_bit_generator: dtype must be an integer dtype, got {d}")
  return [ShapedArray(key.shape, key.dtype), ShapedArray(tuple(shape), d)]


def _rbg_batch(vals, dims, *, shape, dtype, algorithm):
  """JAX's rule: the first key of the batch draws for all of them (then is advanced)."""
  keys, = vals
  bd, = dims
  keys = batching.moveaxis(keys, bd, 0)
  n = get_aval(keys).shape[0]
  lax = _lax()
  key = lax.squeeze(lax.slice_in_dim(keys, 0, 1, axis=0), (0,))
  new_key, b = rng_bit_generator_p.bind(key, shape=(n, *shape), dtype=dtype, algorithm=algorithm)
  new_keys = lax.dynamic_update_slice(keys, lax.expand_dims(new_key, (0,)),
                                      (np.int32(0),) * get_aval(keys).ndim)
  return (new_keys, b), (0, 0)


def _rbg_xla(*args, **params):
  from nbjax.interpreters import mlir
  impl = _rbg_xla.impl = getattr(_rbg_xla, "impl", None) or mlir.single_primitive_impl(
      rng_bit_generator_p)
  return impl(*args, **params)


rng_bit_generator_p = Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
ad.defjvp_zero(rng_bit_generator_p)
registry.register(
    rng_bit_generator_p, family="random", impls={"xla": _rbg_xla},
    abstract_eval=_rbg_abstract_eval, batch=_rbg_batch, policy=("xla", "xla", registry.LARGE),
    meta=dict(differentiable=False,
              note="XLA's RngBitGenerator: its algorithm is XLA's, so XLA runs it eagerly"))


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
  """Stateless bits from XLA's RngBitGenerator: ``(new_key, bits)`` of ``shape``/``dtype``."""
  if np.dtype(dtype) not in (np.uint8, np.uint16, np.uint32, np.uint64):
    raise TypeError(f"rng_bit_generator: unsupported dtype {np.dtype(dtype)}")
  return tuple(rng_bit_generator_p.bind(key, shape=tuple(int(d) for d in shape),
                                        dtype=np.dtype(dtype),
                                        algorithm=RandomAlgorithm(algorithm)))


def _rbg_lowering(ctx, key, *, shape, dtype, algorithm):
  from nbjax.interpreters import mlir
  from nbjax.interpreters.lowering import hlo, ir
  u32, u64 = ir.IntegerType.get_unsigned(32), ir.IntegerType.get_unsigned(64)
  kaval = ctx.avals_in[0]
  d = np.dtype(dtype)
  unsigned = d in _UINT.values()
  etype = mlir.dtype_to_ir_type(d)
  gen = etype if unsigned else u32
  if kaval.dtype == _U32:
    key = hlo.bitcast_convert(ir.RankedTensorType.get([2], u64),
                              hlo.reshape(ir.RankedTensorType.get([2, 2], u32), key))
  name = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}[int(algorithm)]
  new_key, vals = hlo.RngBitGeneratorOp(key.type, ir.RankedTensorType.get(list(shape), gen),
                                        hlo.RngAlgorithmAttr.get(name), key).results
  if kaval.dtype == _U32:
    new_key = hlo.reshape(ir.RankedTensorType.get([4], u32), hlo.bitcast_convert(
        ir.RankedTensorType.get([2, 2], u32), new_key))
  if gen != etype:
    vals = hlo.convert(ir.RankedTensorType.get(list(shape), etype), vals)
  return [new_key, vals]


lowering.register(rng_bit_generator_p, _rbg_lowering)


# ====================================================================== typed PRNG keys
# JAX's key arrays as first-class values of extended dtype ``key<impl>``: in a jaxpr a key
# array is ``key<fry>[*shape]``, and the key primitives ``random_seed``, ``random_split``,
# ``random_fold_in``, ``random_bits``, ``random_wrap`` and ``random_unwrap`` act on it. The
# implementation's functions (``PRNGImpl``: seed/split/fold_in/random_bits on one key's raw
# ``uint32[*key_shape]`` data) give the primitives' eager rules and lowerings; ``nbjax.prng``
# (the layer above, owner of ``PRNGKeyArray``) installs the eager key values and the
# iterated vmap they need through ``key_hooks``.
#
# Under jit nothing below the jaxpr sees a key aval: before lowering, ``physicalize`` rewrites
# a jaxpr holding key avals into one over their ``uint32[*shape, *key_shape]`` data (the key
# primitives become their implementation's lax operations, wrap/unwrap the identity, the
# structural primitives JAX allows on keys get the key axes appended to their parameters,
# and control flow is rewritten recursively), so every lowering rule sees ordinary arrays.

class KeyTy(dtypes.ExtendedDType):
  """The dtype of a key array: ``key<fry>`` for threefry2x32 keys (``_impl`` a PRNGImpl)."""
  type = dtypes.prng_key

  def __init__(self, impl):
    self._impl = impl

  name = property(lambda self: f"key<{self._impl.tag}>")
  itemsize = property(lambda self: 4 * math.prod(self._impl.key_shape))
  kind = "V"
  _physical_shape = property(lambda self: tuple(self._impl.key_shape))
  _physical_dtype = _U32

  def __repr__(self):
    return self.name

  __str__ = __repr__

  def __eq__(self, other):
    return type(other) is KeyTy and self._impl is other._impl

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash((KeyTy, self._impl.name))


key_hooks = {"wrap": None, "vmap": None}  # filled by nbjax.prng


def is_key_aval(a):
  return type(a.dtype) is KeyTy


def physical_aval(a):
  d = a.dtype
  if type(d) is KeyTy:
    return ShapedArray((*a.shape, *d._impl.key_shape), _U32)
  return a


def _iterated(n, f):
  """``f`` (on one key's data) mapped over ``n`` leading key-array axes (JAX's
  ``iterated_vmap_unary``)."""
  vmap = key_hooks["vmap"]
  for _ in range(n):
    f = vmap(f)
  return f


def _batched_impl(impl):
  return getattr(impl, "batched", False)


def phys_seed(impl, seeds):
  n = get_aval(seeds).ndim
  return _iterated(n, impl.seed)(seeds)


def phys_split(impl, data, nkeys, shape):
  if nkeys and _batched_impl(impl):
    return impl.split(data, shape)
  return _iterated(nkeys, lambda k: impl.split(k, shape))(data)


def phys_bits(impl, data, nkeys, bit_width, shape):
  if nkeys and _batched_impl(impl):
    return impl.random_bits(data, bit_width, shape)
  return _iterated(nkeys, lambda k: impl.random_bits(k, bit_width, shape))(data)


def phys_fold_in(impl, data, msgs, keys_shape):
  lax = _lax()
  ks = tuple(impl.key_shape)
  ma = get_aval(msgs)
  shape = tuple(np.broadcast_shapes(tuple(keys_shape), ma.shape))
  nd = len(shape)
  if tuple(keys_shape) != shape:
    data = lax.broadcast_in_dim(data, (*shape, *ks),
                                (*range(nd - len(keys_shape), nd), *range(nd, nd + len(ks))))
  if ma.shape != shape:
    msgs = lax.broadcast_in_dim(msgs, shape, tuple(range(nd - ma.ndim, nd)))
  if nd and _batched_impl(impl):
    return impl.fold_in(data, msgs)
  f = impl.fold_in
  vmap = key_hooks["vmap"]
  for _ in range(nd):
    f = vmap(f)
  return f(data, msgs)


def _key_dtype_error(name, aval):
  raise TypeError(f"{name} takes key array operand, got keys.dtype={aval.dtype}")


def _seed_abstract_eval(seeds, *, impl):
  if not (isinstance(seeds.dtype, np.dtype) and dtypes.issubdtype(seeds.dtype, np.integer)):
    raise TypeError(f"random_seed: seeds must be an integer array, got {seeds.str_short()}")
  return ShapedArray(seeds.shape, KeyTy(impl))


def _split_abstract_eval(keys, *, shape):
  if not is_key_aval(keys):
    _key_dtype_error("random_split", keys)
  return ShapedArray((*keys.shape, *shape), keys.dtype)


def _fold_in_abstract_eval(keys, msgs):
  if not is_key_aval(keys):
    _key_dtype_error("random_fold_in", keys)
  if msgs.dtype != _U32:
    raise TypeError(f"random_fold_in: msgs must be uint32, got {msgs.str_short()}")
  try:
    shape = np.broadcast_shapes(keys.shape, msgs.shape)
  except ValueError:
    raise TypeError(f"random_fold_in got incompatible shapes for broadcasting: "
                    f"{keys.shape}, {msgs.shape}.") from None
  return ShapedArray(shape, keys.dtype)


def _bits_abstract_eval(keys, *, bit_width, shape):
  if not is_key_aval(keys):
    _key_dtype_error("random_bits", keys)
  if bit_width not in _UINT:
    raise TypeError(f"random_bits: bit_width must be 8, 16, 32 or 64, got {bit_width}")
  return ShapedArray((*keys.shape, *shape), _UINT[bit_width])


def check_key_data(d, impl, impl_text):
  """JAX's checks of raw key data ``d`` (an array or aval) for ``impl`` (named
  ``impl_text`` in the errors)."""
  ks = tuple(impl.key_shape)
  bad = "JAX encountered invalid PRNG key data: expected key_data"
  if d.ndim < 1:
    raise TypeError(f"{bad}.ndim >= 1; got ndim={d.ndim}")
  if tuple(d.shape[d.ndim - len(ks):]) != ks:
    raise TypeError(f"{bad}.shape to end with {ks}; got shape={d.shape} for impl={impl_text}")
  if d.dtype != _U32:
    raise TypeError(f"{bad}.dtype = uint32; got dtype={d.dtype}")


def _wrap_abstract_eval(base, *, impl):
  check_key_data(base, impl, repr(impl))
  return ShapedArray(base.shape[:base.ndim - len(impl.key_shape)], KeyTy(impl))


def _unwrap_abstract_eval(keys):
  if not is_key_aval(keys):
    raise TypeError(f"random_unwrap takes key array operand, got keys.dtype={keys.dtype}")
  return physical_aval(keys)


# eager rules: ``keys`` is an eager key value (``nbjax.prng.PRNGKeyArray``: ``_impl`` and
# ``_base_array``, its raw data)

def _seed_impl(seeds, *, impl):
  return key_hooks["wrap"](impl, phys_seed(impl, seeds))


def _split_impl(keys, *, shape):
  impl = keys._impl
  return key_hooks["wrap"](impl, phys_split(impl, keys._base_array, keys.ndim, shape))


def _fold_in_impl(keys, msgs):
  impl = keys._impl
  return key_hooks["wrap"](impl, phys_fold_in(impl, keys._base_array, msgs, keys.shape))


def _bits_impl(keys, *, bit_width, shape):
  impl = keys._impl
  return phys_bits(impl, keys._base_array, keys.ndim, bit_width, shape)


def _wrap_impl(base, *, impl):
  _wrap_abstract_eval(get_aval(base), impl=impl)
  return key_hooks["wrap"](impl, base)


def _unwrap_impl(keys):
  if not hasattr(keys, "_base_array"):
    raise TypeError(f"random_unwrap takes key array operand, got {type(keys).__name__}")
  return keys._base_array


# batching: the key axes come first in the data, so a batch axis of a key array is one of
# its data's and the shape parameters append axes after it (JAX's ``defvectorized``)

def _vectorized(prim):
  def rule(vals, dims, **params):
    return prim.bind(*vals, **params), dims[0]
  return rule


def key_moveaxis(x, src, dst):
  """Move axis ``src`` of a key array (eager or traced) to ``dst``."""
  nd = get_aval(x).ndim
  src, dst = src % nd, dst % nd
  if src == dst:
    return x
  lax = _lax()
  perm = [i for i in range(nd) if i != src]
  perm.insert(dst, src)
  d = random_unwrap_p.bind(x)
  nk = get_aval(d).ndim - nd
  d = lax.transpose(d, (*perm, *range(nd, nd + nk)))
  return random_wrap_p.bind(d, impl=get_aval(x).dtype._impl)


def key_broadcast_in_dim(x, shape, dims):
  """``broadcast_in_dim`` of a key array (eager or traced), on its data."""
  lax = _lax()
  a = get_aval(x)
  d = random_unwrap_p.bind(x)
  nk = get_aval(d).ndim - a.ndim
  n = len(shape)
  d = lax.broadcast_in_dim(d, (*shape, *a.dtype._impl.key_shape),
                           (*dims, *range(n, n + nk)))
  return random_wrap_p.bind(d, impl=a.dtype._impl)


def _fold_in_batch(vals, dims, **params):
  keys, msgs = vals
  kd, md = dims
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
  ka, ma = get_aval(keys), get_aval(msgs)
  rank = max(ka.ndim - (kd is not None), ma.ndim - (md is not None))
  lax = _lax()

  def front(x, d, is_key):
    a = get_aval(x)
    if d is None:
      return x  # unmapped: broadcasting aligns it on the right
    x = key_moveaxis(x, d, 0) if is_key else batching.moveaxis(x, d, 0)
    r = a.ndim - 1
    if r < rank:  # pad the example axes on the left, after the batch axis
      shape = (size, *(1,) * (rank - r), *a.shape[:d], *a.shape[d + 1:])
      dims_ = (0, *range(1 + rank - r, 1 + rank))
      x = key_broadcast_in_dim(x, shape, dims_) if is_key else lax.broadcast_in_dim(
          x, shape, dims_)
    return x

  return random_fold_in_p.bind(front(keys, kd, True), front(msgs, md, False)), 0


def _wrap_batch(vals, dims, *, impl):
  x, = vals
  d, = dims
  x = batching.moveaxis(x, d, 0)
  return random_wrap_p.bind(x, impl=impl), 0


def _key_lowering(phys):
  """A lowering rule from ``phys(avals_in, *physical values, **params)`` (lax operations on
  the keys' data), traced on the physical avals."""
  def rule(ctx, *args, **params):
    from nbjax.interpreters import mlir
    avals_in = ctx.avals_in
    ctx2 = ctx.replace(avals_in=[physical_aval(a) for a in avals_in],
                       avals_out=[physical_aval(a) for a in ctx.avals_out])
    return mlir.lower_fun(lambda *xs, **p: phys(avals_in, *xs, **p),
                          multiple_results=False)(ctx2, *args, **params)
  return rule


def _phys_seed_rule(avals_in, seeds, *, impl):
  return phys_seed(impl, seeds)


def _phys_split_rule(avals_in, keys, *, shape):
  a = avals_in[0]
  return phys_split(a.dtype._impl, keys, a.ndim, shape)


def _phys_fold_in_rule(avals_in, keys, msgs):
  a = avals_in[0]
  return phys_fold_in(a.dtype._impl, keys, msgs, a.shape)


def _phys_bits_rule(avals_in, keys, *, bit_width, shape):
  a = avals_in[0]
  return phys_bits(a.dtype._impl, keys, a.ndim, bit_width, shape)


def _phys_identity(avals_in, x, **_):
  return x


random_seed_p = Primitive("random_seed")
random_split_p = Primitive("random_split")
random_fold_in_p = Primitive("random_fold_in")
random_bits_p = Primitive("random_bits")
random_wrap_p = Primitive("random_wrap")
random_unwrap_p = Primitive("random_unwrap")

_KEY_META = dict(differentiable=False, note="typed PRNG keys (JAX's key primitives)")
for _p, _ae, _impl, _batch_rule, _phys in [
    (random_seed_p, _seed_abstract_eval, _seed_impl, None, _phys_seed_rule),
    (random_split_p, _split_abstract_eval, _split_impl, None, _phys_split_rule),
    (random_fold_in_p, _fold_in_abstract_eval, _fold_in_impl, _fold_in_batch,
     _phys_fold_in_rule),
    (random_bits_p, _bits_abstract_eval, _bits_impl, None, _phys_bits_rule),
    (random_wrap_p, _wrap_abstract_eval, _wrap_impl, _wrap_batch, _phys_identity),
    (random_unwrap_p, _unwrap_abstract_eval, _unwrap_impl, None, _phys_identity)]:
  ad.defjvp_zero(_p)
  _p.make_eager = lambda prim, f_small, f_large, thr: f_small  # key values: no coercion
  registry.register(_p, family="random", impls={"python": _impl}, abstract_eval=_ae,
                    batch=_batch_rule or _vectorized(_p), policy=("python", "python", 0),
                    meta=dict(_KEY_META))
  lowering.register(_p, _key_lowering(_phys))
  _p.physical_rule = _phys
del _p, _ae, _impl, _batch_rule, _phys


def random_seed(seeds, impl):
  return random_seed_p.bind(seeds, impl=impl)


def random_split(keys, shape):
  return random_split_p.bind(keys, shape=tuple(shape))


def random_fold_in(keys, msgs):
  return random_fold_in_p.bind(keys, msgs)


def random_bits(keys, bit_width, shape):
  return random_bits_p.bind(keys, bit_width=int(bit_width), shape=tuple(shape))


def random_wrap(base, *, impl):
  return random_wrap_p.bind(base, impl=impl)


def random_unwrap(keys):
  return random_unwrap_p.bind(keys)


# ---------------------------------------------------------------------- physicalize
# The structural primitives JAX allows on key arrays, on the keys' data: the data's key axes
# trail, so each gets them appended to its parameters.

def _nk(a):
  return len(a.dtype._impl.key_shape)


def _ks(a):
  return tuple(a.dtype._impl.key_shape)


def _phys_struct_rules():
  from nbjax.lax import shape as _sh, indexing as _ix, elementwise as _ew
  lax = _lax()

  def slice_(ins, outs, x, *, start_indices, limit_indices, strides):
    a, n = ins[0], _nk(ins[0])
    return _sh.slice_p.bind(x, start_indices=(*start_indices, *(0,) * n),
                            limit_indices=(*limit_indices, *_ks(a)),
                            strides=None if strides is None else (*strides, *(1,) * n))

  def same(prim):
    return lambda ins, outs, *xs, **p: prim.bind(*xs, **p)

  def reshape(ins, outs, x, *, new_sizes, dimensions, **p):
    a = ins[0]
    if dimensions is not None:
      x = lax.transpose(x, (*dimensions, *range(a.ndim, a.ndim + _nk(a))))
    return _sh.reshape_p.bind(x, new_sizes=(*new_sizes, *_ks(a)), dimensions=None, **p)

  def bid(ins, outs, x, *, shape, broadcast_dimensions, **p):
    n = len(shape)
    return _sh.broadcast_in_dim_p.bind(
        x, shape=(*shape, *_ks(outs[0])),
        broadcast_dimensions=(*broadcast_dimensions, *range(n, n + _nk(outs[0]))), **p)

  def transpose(ins, outs, x, *, permutation):
    n = len(permutation)
    return _sh.transpose_p.bind(x, permutation=(*permutation, *range(n, n + _nk(ins[0]))))

  def select_n(ins, outs, pred, *cases):
    o = outs[0]
    if ins[0].ndim:
      pred = lax.broadcast_in_dim(pred, physical_aval(o).shape, tuple(range(o.ndim)))
    return _ew.select_n_p.bind(pred, *cases)

  def zeros(a, idx_avals):  # the key axes' start indices, of the given ones' dtype
    d = idx_avals[0].dtype if idx_avals else np.dtype(np.int32)
    return (np.zeros((), d),) * _nk(a)

  def dynamic_slice(ins, outs, x, *idx, slice_sizes):
    a = ins[0]
    return _ix.dynamic_slice_p.bind(x, *idx, *zeros(a, ins[1:]),
                                    slice_sizes=(*slice_sizes, *_ks(a)))

  def dynamic_update_slice(ins, outs, x, u, *idx):
    return _ix.dynamic_update_slice_p.bind(x, u, *idx, *zeros(ins[0], ins[2:]))

  rules = {_sh.slice_p: slice_, _sh.squeeze_p: same(_sh.squeeze_p), _sh.reshape_p: reshape,
           _sh.broadcast_in_dim_p: bid, _sh.transpose_p: transpose,
           _sh.concatenate_p: same(_sh.concatenate_p), _sh.rev_p: same(_sh.rev_p),
           _ew.select_n_p: select_n, _ix.dynamic_slice_p: dynamic_slice,
           _ix.dynamic_update_slice_p: dynamic_update_slice, _ew.copy_p: same(_ew.copy_p)}
  return rules


_struct_rules = {}


def struct_rules():
  if not _struct_rules:
    _struct_rules.update(_phys_struct_rules())
  return _struct_rules


def has_keys(jaxpr):
  """Whether ``jaxpr`` (or a jaxpr in its equations' parameters) holds a key aval."""
  for v in (*jaxpr.constvars, *jaxpr.invars, *jaxpr.outvars):
    a = getattr(v, "aval", None)
    if type(getattr(a, "dtype", None)) is KeyTy:
      return True
  for e in jaxpr.eqns:
    for v in e.outvars:
      if type(getattr(v.aval, "dtype", None)) is KeyTy:  # (a token's has none)
        return True
    if any(has_keys(j) for j in jaxprs_in_params(e.params)):
      return True
  return False


def _phys_value(x):
  return x._base_array if hasattr(x, "_base_array") and not isinstance(x, np.ndarray) else x


def _phys_params(params):
  from nbjax.jaxpr import ClosedJaxpr, Jaxpr
  out = {}
  for k, v in params.items():
    def conv(j):
      if isinstance(j, ClosedJaxpr):
        return physicalize(j) if has_keys(j.jaxpr) else j
      if isinstance(j, Jaxpr):
        if not has_keys(j):
          return j
        c = physicalize(ClosedJaxpr(j, ()))
        if c.consts:
          raise NotImplementedError("key arrays in an open jaxpr parameter with constants")
        return c.jaxpr
      return j
    out[k] = tuple(conv(j) for j in v) if type(v) is tuple else conv(v)
  return out


def _phys_eval(jaxpr, consts, args):
  from nbjax.jaxpr import Literal
  env = {}

  def read(a):
    return a.val if isinstance(a, Literal) else env[a]

  for v, x in zip(jaxpr.constvars, consts):
    env[v] = x
  for v, x in zip(jaxpr.invars, args):
    env[v] = x
  rules = struct_rules()
  for e in jaxpr.eqns:
    ins = [read(a) for a in e.invars]
    in_avals = [a.aval for a in e.invars]
    out_avals = [v.aval for v in e.outvars]
    prim = e.primitive
    phys = getattr(prim, "physical_rule", None)
    keys = any(type(a.dtype) is KeyTy for a in (*in_avals, *out_avals))
    if phys is not None:
      outs = phys(in_avals, *ins, **e.params)
      if not prim.multiple_results:
        outs = [outs]
    elif keys and prim in rules:
      outs = [rules[prim](in_avals, out_avals, *ins, **e.params)]
    else:
      params = e.params
      if any(has_keys(j) for j in jaxprs_in_params(params)):
        params = _phys_params(params)
      elif keys:
        raise NotImplementedError(f"{prim.name} of key arrays (dtype "
                                  f"{next(a.dtype for a in (*in_avals, *out_avals) if type(a.dtype) is KeyTy)}) "
                                  "under jit")
      outs = prim.bind(*ins, **params)
      if not prim.multiple_results:
        outs = [outs]
    for v, o in zip(e.outvars, outs):
      env[v] = o
  return [read(v) for v in jaxpr.outvars]


_physicalized = weakref.WeakKeyDictionary()  # closed jaxpr -> its physicalized version


def physicalize(closed):
  """``closed`` (a ClosedJaxpr) over the keys' data: no key avals left (see above). Its
  consts keep their positions (leading), followed by any new ones. Cached per jaxpr."""
  hit = _physicalized.get(closed)
  if hit is None:
    hit = _physicalized[closed] = _physicalize(closed)
  return hit


def _physicalize(closed):
  from nbjax.interpreters import partial_eval as pe
  from nbjax.jaxpr import ClosedJaxpr, Jaxpr
  jaxpr = closed.jaxpr
  consts = [_phys_value(c) for c in closed.consts]
  nc = len(consts)
  avals = [physical_aval(v.aval) for v in (*jaxpr.constvars, *jaxpr.invars)]

  def fn(*xs):
    return _phys_eval(jaxpr, xs[:nc], xs[nc:])

  new, _, new_consts = pe.trace_to_jaxpr_dynamic(fn, avals, fun_name="physicalize")
  j = Jaxpr([*new.invars[:nc], *new.constvars], new.invars[nc:], new.outvars, new.eqns,
            new.effects, getattr(jaxpr, "debug_info", None))
  return ClosedJaxpr(j, [*consts, *new_consts])


lowering.physicalize_hook = registry.physicalize_hook = (has_keys, physicalize)
lowering.key_wrap = lambda impl, data: key_hooks["wrap"](impl, data)
batching.extended_rules = (key_moveaxis, key_broadcast_in_dim)


def _extended_eager(prim, args, params):
  """An eager structural primitive (``slice``, ``squeeze``...) on key arrays: its physical
  rule on their data (``core.eval_jaxpr`` of a jaxpr indexing keys, say)."""
  avals = [get_aval(a) for a in args]
  rules = struct_rules()
  eager = getattr(prim, "extended_eager", None)  # (debug callbacks: the key arrays as they are)
  if eager is not None:
    return eager(*args, **params)
  if prim not in rules:
    if prim.abstract_eval_rule is not None:
      prim.abstract_eval(*avals, **params)  # its dtype check: JAX's message (as under jit)
    d = next(a.dtype for a in avals if type(a.dtype) is KeyTy)
    raise TypeError(f"{prim.name} does not accept dtype {d}.")
  out = prim.abstract_eval(*avals, **params)
  outs = list(out) if prim.multiple_results else [out]
  r = rules[prim](avals, outs, *[_phys_value(a) for a in args], **params)
  o = outs[0]
  return key_hooks["wrap"](o.dtype._impl, r) if type(o.dtype) is KeyTy else r


registry.extended_eager = _extended_eager


def _key_aware_abstract_eval(prim):
  """``prim``'s abstract eval taking key arrays too: its shape rule on ``uint32`` stand-ins
  of the keys' shape, its result of their key dtype (``select_n`` of key arrays)."""
  rule = prim.abstract_eval_rule

  def abstract_eval(*avals, **params):
    kd = None
    for a in avals:
      if type(a.dtype) is KeyTy:
        kd = a.dtype
        break
    if kd is None:
      return rule(*avals, **params)
    out = rule(*[ShapedArray(a.shape, _U32) if type(a.dtype) is KeyTy else a for a in avals],
               **params)
    return out.update(dtype=kd)
  abstract_eval.__wrapped__ = rule
  prim.abstract_eval_rule = abstract_eval


def _install_key_aware():
  from nbjax.lax import elementwise as _ew
  _key_aware_abstract_eval(_ew.select_n_p)
  _key_aware_abstract_eval(_ew.copy_p)


_install_key_aware()


# ---------------------------------------------------------------------- threefry2x32
# JAX's ``threefry2x32_p`` (``jax.extend.random``): the threefry2x32 hash of counter words
# ``(x0, x1)`` under key words ``(k0, k1)``, elementwise over broadcast ``uint32`` arrays.

def _tf2_shape(*avals):
  if any(a.dtype != _U32 for a in avals):
    raise TypeError(f"Arguments to threefry2x32 must have uint32 type, got "
                    f"{[a.str_short() for a in avals]}")
  try:
    return tuple(np.broadcast_shapes(*(a.shape for a in avals)))
  except ValueError:
    raise TypeError(f"threefry2x32: incompatible shapes for broadcasting: "
                    f"{[a.shape for a in avals]}") from None


def _tf2_abstract_eval(*avals):
  if len(avals) != 4:
    raise TypeError(f"threefry2x32_p expects 4 arguments, got {len(avals)}.")
  shape = _tf2_shape(*avals)
  return [ShapedArray(shape, _U32)] * 2


def _tf2_impl(k0, k1, x0, x1):
  from kernels import prng_impls as K
  from nbjax.array import Array
  vals = [np.asarray(v, _U32) for v in (k0, k1, x0, x1)]
  shape = _tf2_shape(*(get_aval(v) for v in vals))
  flat = [np.ascontiguousarray(np.broadcast_to(v, shape)).reshape(-1) for v in vals]
  y0, y1 = np.empty(flat[0].size, _U32), np.empty(flat[0].size, _U32)
  K.threefry2x32_flat(*flat, y0, y1)
  return [Array(y0.reshape(shape)), Array(y1.reshape(shape))]


def _tf2_lax(k0, k1, x0, x1):
  lax = _lax()
  shape = _tf2_shape(*(get_aval(v) for v in (k0, k1, x0, x1)))
  k0, k1, x0, x1 = (lax.broadcast_in_dim(v, shape, tuple(range(len(shape) - get_aval(v).ndim,
                                                                 len(shape))))
                    for v in (k0, k1, x0, x1))
  return list(threefry2x32(k0, k1, x0, x1))


def _tf2_batch(vals, dims):
  size = next(get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not batching.not_mapped)
  rank = max(get_aval(v).ndim - (d is not None) for v, d in zip(vals, dims))
  lax = _lax()
  out = []
  for v, d in zip(vals, dims):
    a = get_aval(v)
    if d is None:
      v = lax.broadcast_in_dim(v, (1, *(1,) * (rank - a.ndim), *a.shape),
                               tuple(range(1 + rank - a.ndim, 1 + rank)))
    else:
      v = batching.moveaxis(v, d, 0)
      r = a.ndim - 1
      v = lax.broadcast_in_dim(v, (size, *(1,) * (rank - r), *get_aval(v).shape[1:]),
                               (0, *range(1 + rank - r, 1 + rank)))
    out.append(v)
  shape = (size, *np.broadcast_shapes(*(get_aval(v).shape[1:] for v in out)))
  out = [lax.broadcast_in_dim(v, shape, tuple(range(len(shape)))) for v in out]
  return threefry2x32_p.bind(*out), [0, 0]


def _tf2_lowering(ctx, *args):
  from nbjax.interpreters import mlir
  return mlir.lower_fun(_tf2_lax, multiple_results=True)(ctx, *args)


threefry2x32_p = Primitive("threefry2x32")
threefry2x32_p.multiple_results = True
ad.defjvp_zero(threefry2x32_p)
registry.register(threefry2x32_p, family="random", impls={"python": _tf2_impl},
                  abstract_eval=_tf2_abstract_eval, batch=_tf2_batch,
                  policy=("python", "python", 0),
                  meta=dict(differentiable=False, note="JAX's threefry2x32 hash (elementwise)"))
lowering.register(threefry2x32_p, _tf2_lowering)
