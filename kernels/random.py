"""numba kernels for ``nbjax.random``: threefry2x32 bits generated and converted in one pass.

Pipeline position: the bottom of eager sampling. ``nbjax.lax.prng``'s ``threefry_sample``
primitive calls ``sample(op, width, partitionable, parallel)`` kernels with a ``(nb, 2)``
``uint32`` array of keys and writes ``nb * n`` outputs straight into a caller-allocated flat
``out``: no counter array, no bits array, no float temporary. The bit layouts are JAX's:

- partitionable (``jax_threefry_partitionable``, JAX's default): output ``i`` of a key hashes
  the counter pair ``(i >> 32, i & 0xFFFFFFFF)`` (``(0, i)`` below ``2**32``); 32 bits are
  ``y0 ^ y1``, 64 bits ``y0 << 32 | y1``, 8 and 16
  bits the low bits of ``y0 ^ y1``;
- classic: the ``m = ceil(width * n / 32)`` words of ``threefry_2x32(key, iota(m))``
  (counters ``(j, h + j)``, ``h = ceil(m / 2)``, a zero pad when ``m`` is odd), 64-bit values
  pairing word ``i`` (high) with word ``n + i``, 8/16-bit values the low-first pieces of a
  word.

Ops (the conversion from bits, per output): ``fold_in`` (one new key per key: the hash of
``(0, p[b])``), ``split`` (``n`` new keys, ``2 n`` words:
partitionable ``(y0, y1)`` of counter ``i``, classic the ``2 n`` classic words), ``bits`` (the unsigned value), ``uniform`` (JAX's
``[0, 1)`` float: ``(bits >> (width - nmant)) * 2**-nmant`` for float32/float64) and
``bernoulli`` (that float ``< p``, computed exactly as ``m < t[i * pstep]`` on the float's
integer mantissa ``m`` and ``threshold(p)``, ``pstep`` 0 for a scalar ``p``). The
``parallel`` variant splits the outputs into ``prange`` chunks. Imports numba and numpy only.
"""
import numpy as np
from numba import njit, prange

_M = np.uint64(0xFFFFFFFF)
_C240 = np.uint64(0x1BD11BDA)


@njit(inline="always", cache=True)
def _rotl(x, r):
  return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M


@njit(inline="always", cache=True)
def _rounds(x0, x1, a, b, c, d):
  x0 = (x0 + x1) & _M
  x1 = x0 ^ _rotl(x1, a)
  x0 = (x0 + x1) & _M
  x1 = x0 ^ _rotl(x1, b)
  x0 = (x0 + x1) & _M
  x1 = x0 ^ _rotl(x1, c)
  x0 = (x0 + x1) & _M
  x1 = x0 ^ _rotl(x1, d)
  return x0, x1


@njit(inline="always", cache=True)
def threefry2x32(k0, k1, x0, x1):
  """threefry2x32 (20 rounds) on ``uint64`` lanes holding 32-bit values."""
  k2 = k0 ^ k1 ^ _C240
  x0 = (x0 + k0) & _M
  x1 = (x1 + k1) & _M
  x0, x1 = _rounds(x0, x1, 13, 15, 26, 6)
  x0 = (x0 + k1) & _M
  x1 = (x1 + k2 + np.uint64(1)) & _M
  x0, x1 = _rounds(x0, x1, 17, 29, 16, 24)
  x0 = (x0 + k2) & _M
  x1 = (x1 + k0 + np.uint64(2)) & _M
  x0, x1 = _rounds(x0, x1, 13, 15, 26, 6)
  x0 = (x0 + k0) & _M
  x1 = (x1 + k1 + np.uint64(3)) & _M
  x0, x1 = _rounds(x0, x1, 17, 29, 16, 24)
  x0 = (x0 + k1) & _M
  x1 = (x1 + k2 + np.uint64(4)) & _M
  x0, x1 = _rounds(x0, x1, 13, 15, 26, 6)
  x0 = (x0 + k2) & _M
  x1 = (x1 + k0 + np.uint64(5)) & _M
  return x0, x1


@njit(inline="always", cache=True)
def _f32(v):  # 32 random bits -> float32 in [0, 1)
  return np.float32(np.int32(v >> np.uint64(9))) * np.float32(1.1920928955078125e-07)


@njit(inline="always", cache=True)
def _f64(v):  # 64 random bits -> float64 in [0, 1)
  return np.float64(np.int64(v >> np.uint64(12))) * 2.220446049250313e-16


_CACHE = {}
_KINDS = {("bits", 8): 0, ("bits", 16): 0, ("bits", 32): 0, ("bits", 64): 0,
          ("uniform", 32): 1, ("uniform", 64): 2, ("bernoulli", 32): 3, ("bernoulli", 64): 4}


@njit(inline="always", cache=True)
def _store(kind, v, out, i, p, pstep):
  """Store the output for random bits ``v`` at ``out[i]``; ``kind`` (a compile-time constant
  of the calling kernel: ``_KINDS``) picks the conversion. Bernoulli: ``m * 2**-nmant < p``
  as an integer comparison (exact; no float conversion).

  The kernels below are closures over plain values only (never over another dispatcher):
  numba keys a closure's disk cache entry on its pickled cells, and a dispatcher pickles
  with a per-process uuid, so such a kernel would compile again in every process."""
  if kind == 0:
    out[i] = v
  elif kind == 1:
    out[i] = _f32(v)
  elif kind == 2:
    out[i] = _f64(v)
  elif kind == 3:
    out[i] = np.int64(v >> np.uint64(9)) < p[i * pstep]
  else:
    out[i] = np.int64(v >> np.uint64(12)) < p[i * pstep]


@njit(inline="always", cache=True)
def _word_out(kind, width, w, v, out, base, n, p, pstep):
  """One classic 32-bit word ``v`` (word ``w``) -> its 1 to 4 outputs of ``width`` bits."""
  if width == 32:
    _store(kind, v, out, base + w, p, pstep)
  else:
    per = 32 // width
    mask = np.uint64((1 << width) - 1)
    for q in range(per):
      i = w * per + q
      if i < n:
        _store(kind, (v >> np.uint64(q * width)) & mask, out, base + i, p, pstep)


def _partitionable(kind, width, parallel):
  rng = prange if parallel else range
  mask = np.uint64((1 << width) - 1 if width < 64 else 0)

  @njit(parallel=parallel, cache=True)
  def kern(keys, n, out, p, pstep):
    chunk = 1 << 16
    nc = (n + chunk - 1) // chunk
    for t in rng(keys.shape[0] * nc):  # (key, chunk) pairs: parallel over either
      b, c = t // nc, t % nc
      k0, k1 = np.uint64(keys[b, 0]), np.uint64(keys[b, 1])
      base = b * n
      for i in range(c * chunk, min(n, (c + 1) * chunk)):
        y0, y1 = threefry2x32(k0, k1, np.uint64(i) >> np.uint64(32), np.uint64(i) & _M)
        if width == 64:
          v = (y0 << np.uint64(32)) | y1
        elif width == 32:
          v = y0 ^ y1
        else:
          v = (y0 ^ y1) & mask
        _store(kind, v, out, base + i, p, pstep)
  return kern


def _classic(kind, width, parallel):
  rng = prange if parallel else range

  @njit(parallel=parallel, cache=True)
  def kern(keys, n, out, p, pstep):
    m = n if width == 64 else (width * n + 31) // 32  # words (64 bits: pairs of words)
    h = n if width == 64 else (m + 1) // 2
    chunk = 1 << 16
    nc = (h + chunk - 1) // chunk
    for t in rng(keys.shape[0] * nc):
      b, c = t // nc, t % nc
      k0, k1 = np.uint64(keys[b, 0]), np.uint64(keys[b, 1])
      base = b * n
      for j in range(c * chunk, min(h, (c + 1) * chunk)):
        if width == 64:
          y0, y1 = threefry2x32(k0, k1, np.uint64(j), np.uint64(n + j))
          _store(kind, (y0 << np.uint64(32)) | y1, out, base + j, p, pstep)
        else:
          x1 = h + j
          y0, y1 = threefry2x32(k0, k1, np.uint64(j), np.uint64(x1 if x1 < m else 0))
          _word_out(kind, width, j, y0, out, base, n, p, pstep)
          if x1 < m:
            _word_out(kind, width, x1, y1, out, base, n, p, pstep)
  return kern


def _split(parallel):
  rng = prange if parallel else range

  @njit(parallel=parallel, cache=True)
  def kern(keys, n, out, p, pstep):  # out[2 i], out[2 i + 1] = threefry(key, (i >> 32, i))
    chunk = 1 << 16
    nc = (n + chunk - 1) // chunk
    for t in rng(keys.shape[0] * nc):
      b, c = t // nc, t % nc
      k0, k1 = np.uint64(keys[b, 0]), np.uint64(keys[b, 1])
      base = 2 * b * n
      for i in range(c * chunk, min(n, (c + 1) * chunk)):
        y0, y1 = threefry2x32(k0, k1, np.uint64(i) >> np.uint64(32), np.uint64(i) & _M)
        out[base + 2 * i] = y0
        out[base + 2 * i + 1] = y1
  return kern


def _fold_in(parallel):
  rng = prange if parallel else range

  @njit(parallel=parallel, cache=True)
  def kern(keys, n, out, p, pstep):  # out[b] = threefry(key[b], (0, p[b * pstep]))
    for b in rng(keys.shape[0]):
      y0, y1 = threefry2x32(np.uint64(keys[b, 0]), np.uint64(keys[b, 1]), np.uint64(0),
                            np.uint64(p[b * pstep]))
      out[2 * b] = y0
      out[2 * b + 1] = y1
  return kern


def sample(op, width, partitionable=True, parallel=False):
  """The kernel ``kern(keys, n, out, p, pstep)`` for ``op`` in ``bits``/``uniform``/
  ``bernoulli`` on ``width``-bit draws (``uniform``/``bernoulli``: 32 -> float32, 64 ->
  float64). ``keys``: C-contiguous ``uint32[nb, 2]``; ``out``: flat, ``nb * n`` long;
  ``p``: for ``bernoulli`` the flat ``threshold(p)`` of ``nb * n`` (``pstep=1``) or 1
  (``pstep=0``) entries (unused by the other ops: pass any 1-entry array)."""
  key = (op, width, partitionable, parallel)
  k = _CACHE.get(key)
  if k is None and op == "fold_in":
    k = _CACHE[key] = _fold_in(parallel)
  if k is None and op == "split":  # n new keys: 2 n words (classic: 2 n words of bits)
    k = _CACHE[key] = _split(parallel) if partitionable else _classic(0, 32, parallel)
  if k is None:
    make = _partitionable if partitionable else _classic
    k = _CACHE[key] = make(_KINDS[op, width], width, parallel)
  return k


def threshold(p, width):
  """``int64`` thresholds ``t`` with ``m * 2**-nmant < p`` exactly when ``m < t``, for the
  ``nmant``-bit mantissas ``m`` of ``width``-bit uniform draws (NaN and ``p <= 0``: 0)."""
  nmant = 23 if width == 32 else 52
  p = np.asarray(p, np.float64)
  with np.errstate(invalid="ignore"):
    t = np.ceil(np.clip(np.nan_to_num(p, nan=0.0), 0.0, 1.0) * 2.0 ** nmant)
  return np.asarray(t, np.int64)
