"""numba kernels for the PRNG implementations beside threefry2x32: philox2x32, philox4x32 and
threefry4x32 (Random123's counter-based hashes, as JAX 0.10.2's ``jax._src.random``).

Pipeline position: the bottom of eager sampling for keys of those implementations
(``nbjax.prng``). ``hash_kernel(name, parallel)`` is ``run(keys, hi, lo, iota, n, pos_hi,
pos_lo, out)``: for every key ``b`` (a row of the ``(nb, key_words)`` ``uint32`` array
``keys``) it hashes ``n`` counters whose words are all zero but word ``pos_lo`` (the output's
index ``i``'s low 32 bits when ``iota``, else ``lo[b]``) and word ``pos_hi`` (``i >> 32``
when ``iota``, else ``hi[b]``; ``pos_hi < 0``: none), writing the hash's output words to
``out[b, i, :]``. The callers combine those words into keys or bits with NumPy.
Arithmetic is on ``uint64`` lanes holding 32-bit values; the ``parallel`` variant splits
each key's outputs over ``prange``. ``threefry2x32_flat`` is the ``threefry2x32`` primitive's
elementwise hash (``kernels.random``'s rounds). Imports numba and numpy only.
"""
import numpy as np
from numba import njit, prange

from kernels.random import _M, _rotl, threefry2x32 as _tf2


@njit(inline="always", cache=True)
def _mulhilo(a, b):
  p = a * b  # (< 2**64: both are 32-bit values)
  return p & _M, p >> np.uint64(32)


@njit(inline="always", cache=True)
def philox2x32(k0, x0, x1):
  """Philox 2x32 (10 rounds) of counter ``(x0, x1)`` under key ``k0``."""
  m = np.uint64(0xD256D193)
  w = np.uint64(0x9E3779B9)
  for r in range(10):
    if r > 0:
      k0 = (k0 + w) & _M
    lo, hi = _mulhilo(m, x0)
    x0 = hi ^ x1 ^ k0
    x1 = lo
  return x0, x1


@njit(inline="always", cache=True)
def philox4x32(k0, k1, x0, x1, x2, x3):
  """Philox 4x32 (10 rounds) of counter ``(x0, x1, x2, x3)`` under key ``(k0, k1)``."""
  m0 = np.uint64(0xD2511F53)
  m1 = np.uint64(0xCD9E8D57)
  w0 = np.uint64(0x9E3779B9)
  w1 = np.uint64(0xBB67AE85)
  for r in range(10):
    if r > 0:
      k0 = (k0 + w0) & _M
      k1 = (k1 + w1) & _M
    lo0, hi0 = _mulhilo(m0, x0)
    lo1, hi1 = _mulhilo(m1, x2)
    x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
  return x0, x1, x2, x3


@njit(inline="always", cache=True)
def _even(x0, x1, x2, x3, a, b):
  x0 = (x0 + x1) & _M
  x1 = x0 ^ _rotl(x1, a)
  x2 = (x2 + x3) & _M
  x3 = x2 ^ _rotl(x3, b)
  return x0, x1, x2, x3


@njit(inline="always", cache=True)
def _odd(x0, x1, x2, x3, a, b):
  x0 = (x0 + x3) & _M
  x3 = x0 ^ _rotl(x3, a)
  x2 = (x2 + x1) & _M
  x1 = x2 ^ _rotl(x1, b)
  return x0, x1, x2, x3


@njit(inline="always", cache=True)
def _four_a(x0, x1, x2, x3):  # rounds 8j..8j+3: rotation rows 0-3
  x0, x1, x2, x3 = _even(x0, x1, x2, x3, 10, 26)
  x0, x1, x2, x3 = _odd(x0, x1, x2, x3, 11, 21)
  x0, x1, x2, x3 = _even(x0, x1, x2, x3, 13, 27)
  return _odd(x0, x1, x2, x3, 23, 5)


@njit(inline="always", cache=True)
def _four_b(x0, x1, x2, x3):  # rounds 8j+4..8j+7: rotation rows 4-7
  x0, x1, x2, x3 = _even(x0, x1, x2, x3, 6, 20)
  x0, x1, x2, x3 = _odd(x0, x1, x2, x3, 17, 11)
  x0, x1, x2, x3 = _even(x0, x1, x2, x3, 25, 10)
  return _odd(x0, x1, x2, x3, 18, 20)


@njit(inline="always", cache=True)
def threefry4x32(k0, k1, k2, k3, x0, x1, x2, x3):
  """Threefry 4x32 (20 rounds) of counter ``(x0..x3)`` under key ``(k0..k3)``: five blocks
  of four rounds, each followed by a key injection."""
  k4 = k0 ^ k1 ^ k2 ^ k3 ^ np.uint64(0x1BD11BDA)
  x0 = (x0 + k0) & _M
  x1 = (x1 + k1) & _M
  x2 = (x2 + k2) & _M
  x3 = (x3 + k3) & _M
  x0, x1, x2, x3 = _four_a(x0, x1, x2, x3)
  x0, x1, x2, x3 = (x0 + k1) & _M, (x1 + k2) & _M, (x2 + k3) & _M, (x3 + k4 + np.uint64(1)) & _M
  x0, x1, x2, x3 = _four_b(x0, x1, x2, x3)
  x0, x1, x2, x3 = (x0 + k2) & _M, (x1 + k3) & _M, (x2 + k4) & _M, (x3 + k0 + np.uint64(2)) & _M
  x0, x1, x2, x3 = _four_a(x0, x1, x2, x3)
  x0, x1, x2, x3 = (x0 + k3) & _M, (x1 + k4) & _M, (x2 + k0) & _M, (x3 + k1 + np.uint64(3)) & _M
  x0, x1, x2, x3 = _four_b(x0, x1, x2, x3)
  x0, x1, x2, x3 = (x0 + k4) & _M, (x1 + k0) & _M, (x2 + k1) & _M, (x3 + k2 + np.uint64(4)) & _M
  x0, x1, x2, x3 = _four_a(x0, x1, x2, x3)
  x0, x1, x2, x3 = (x0 + k0) & _M, (x1 + k1) & _M, (x2 + k2) & _M, (x3 + k3 + np.uint64(5)) & _M
  return x0, x1, x2, x3


@njit(inline="always", cache=True)
def _word(j, pos_hi, pos_lo, ch, cl):
  if j == pos_lo:
    return cl
  if j == pos_hi:
    return ch
  return np.uint64(0)


def _make(name, parallel):
  """The hash kernel of algorithm ``name`` (serial, or over ``prange`` chunks)."""
  rng = prange if parallel else range

  if name == "philox2x32":
    @njit(parallel=parallel, cache=True)
    def run(keys, hi, lo, iota, n, pos_hi, pos_lo, out):
      nb = keys.shape[0]
      for b in range(nb):
       for i in rng(n):
        cl = np.uint64(i) & _M if iota else np.uint64(lo[b])
        ch = np.uint64(i) >> np.uint64(32) if iota else np.uint64(hi[b])
        y0, y1 = philox2x32(np.uint64(keys[b, 0]), _word(0, pos_hi, pos_lo, ch, cl),
                            _word(1, pos_hi, pos_lo, ch, cl))
        out[b, i, 0] = np.uint32(y0)
        out[b, i, 1] = np.uint32(y1)
    return run

  if name == "philox4x32":
    @njit(parallel=parallel, cache=True)
    def run(keys, hi, lo, iota, n, pos_hi, pos_lo, out):
      nb = keys.shape[0]
      for b in range(nb):
       for i in rng(n):
        cl = np.uint64(i) & _M if iota else np.uint64(lo[b])
        ch = np.uint64(i) >> np.uint64(32) if iota else np.uint64(hi[b])
        y0, y1, y2, y3 = philox4x32(
            np.uint64(keys[b, 0]), np.uint64(keys[b, 1]), _word(0, pos_hi, pos_lo, ch, cl),
            _word(1, pos_hi, pos_lo, ch, cl), _word(2, pos_hi, pos_lo, ch, cl),
            _word(3, pos_hi, pos_lo, ch, cl))
        out[b, i, 0] = np.uint32(y0)
        out[b, i, 1] = np.uint32(y1)
        out[b, i, 2] = np.uint32(y2)
        out[b, i, 3] = np.uint32(y3)
    return run

  @njit(parallel=parallel, cache=True)
  def run(keys, hi, lo, iota, n, pos_hi, pos_lo, out):
    nb = keys.shape[0]
    for b in range(nb):
     for i in rng(n):
      cl = np.uint64(i) & _M if iota else np.uint64(lo[b])
      ch = np.uint64(i) >> np.uint64(32) if iota else np.uint64(hi[b])
      y0, y1, y2, y3 = threefry4x32(
          np.uint64(keys[b, 0]), np.uint64(keys[b, 1]), np.uint64(keys[b, 2]),
          np.uint64(keys[b, 3]), _word(0, pos_hi, pos_lo, ch, cl),
          _word(1, pos_hi, pos_lo, ch, cl), _word(2, pos_hi, pos_lo, ch, cl),
          _word(3, pos_hi, pos_lo, ch, cl))
      out[b, i, 0] = np.uint32(y0)
      out[b, i, 1] = np.uint32(y1)
      out[b, i, 2] = np.uint32(y2)
      out[b, i, 3] = np.uint32(y3)
  return run


_kernels = {}


def hash_kernel(name, parallel):
  """``run(keys, hi, lo, iota, n, pos_hi, pos_lo, out)`` for ``name`` (see the module doc)."""
  k = _kernels.get((name, parallel))
  if k is None:
    k = _kernels[(name, parallel)] = _make(name, parallel)
  return k


@njit(cache=True)
def threefry2x32_flat(k0, k1, x0, x1, y0, y1):
  """``(y0, y1) = threefry2x32(k0, k1, x0, x1)`` elementwise over flat ``uint32`` arrays."""
  for i in range(x0.shape[0]):
    a, b = _tf2(np.uint64(k0[i]), np.uint64(k1[i]), np.uint64(x0[i]), np.uint64(x1[i]))
    y0[i] = np.uint32(a)
    y1[i] = np.uint32(b)
