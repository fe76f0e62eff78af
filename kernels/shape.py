"""numba kernels for data-movement (shape) primitives.

Pipeline position: the bottom of eager execution for ``nbjax.lax.shape`` (broadcast_in_dim,
reshape, transpose, squeeze, rev, concatenate, pad, slice, iota) and the window copies of
``kernels.indexing``. One general kernel, ``copy_strided``, walks an n-d index space and
copies ``src[soff + i . sst]`` to ``dst[doff + i . dst_st]`` (strides in elements, any sign,
0 for broadcast); every data-movement primitive is that kernel with different strides.
Before touching memory it checks the extreme source and destination offsets, so no input
can make it read or write out of bounds. Caller allocates outputs; buffers are flat.
Imports numba and numpy only.
"""
import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True, inline="always")
def _extent_ok(off, st, shape, size):
  lo = off
  hi = off
  for k in range(shape.size):
    e = (shape[k] - 1) * st[k]
    if e < 0:
      lo += e
    else:
      hi += e
  return lo >= 0 and hi < size


@njit(cache=True, nogil=True)
def copy_window(src, soff, sst, dst, doff, dst_st, shape):
  """Serial strided copy of an n-d window (no bounds check: callers check)."""
  nd = shape.size
  if nd == 0:
    dst[doff] = src[soff]
    return
  n = 1
  for k in range(nd):
    n *= shape[k]
  if n == 0:
    return
  m = shape[nd - 1]
  si = sst[nd - 1]
  di = dst_st[nd - 1]
  outer = n // m
  idx = np.zeros(nd, np.int64)
  s = soff
  d = doff
  for _ in range(outer):
    if di == 1:  # contiguous destination rows: loops over views vectorize (memcpy speed)
      b = dst[d:d + m]
      if si == 1:
        a = src[s:s + m]
        for j in range(m):
          b[j] = a[j]
      elif si == 0:
        v = src[s]
        for j in range(m):
          b[j] = v
      else:
        for j in range(m):
          b[j] = src[s + j * si]
    else:
      for j in range(m):
        dst[d + j * di] = src[s + j * si]
    k = nd - 2
    while k >= 0:
      idx[k] += 1
      s += sst[k]
      d += dst_st[k]
      if idx[k] < shape[k]:
        break
      s -= sst[k] * shape[k]
      d -= dst_st[k] * shape[k]
      idx[k] = 0
      k -= 1


@njit(cache=True, nogil=True)
def copy_strided(src, soff, sst, dst, doff, dst_st, shape):
  """``dst[doff + i.dst_st] = src[soff + i.sst]`` for every i in ``shape``; bounds-checked."""
  for k in range(shape.size):
    if shape[k] == 0:
      return
  if not (_extent_ok(soff, sst, shape, src.size) and _extent_ok(doff, dst_st, shape, dst.size)):
    raise IndexError("copy_strided: window out of bounds")
  copy_window(src, soff, sst, dst, doff, dst_st, shape)


@njit(cache=True, nogil=True)
def _row_offsets(row, soff, sst, doff, dst_st, shape):
  """Source and destination offsets of row ``row`` (rows run along the last axis)."""
  r = row
  s = soff
  d = doff
  for k in range(shape.size - 2, -1, -1):
    q = r % shape[k]
    r //= shape[k]
    s += q * sst[k]
    d += q * dst_st[k]
  return s, d


@njit(cache=True, nogil=True, parallel=True)
def copy_strided_par(src, soff, sst, dst, doff, dst_st, shape):
  """Two-core variant of ``copy_strided`` (rows of the last axis split across threads)."""
  nd = shape.size
  n = 1
  for k in range(nd):
    n *= shape[k]
  if n == 0:
    return
  if not (_extent_ok(soff, sst, shape, src.size) and _extent_ok(doff, dst_st, shape, dst.size)):
    raise IndexError("copy_strided: window out of bounds")
  if nd == 0:
    dst[doff] = src[soff]
    return
  m = shape[nd - 1]
  si = sst[nd - 1]
  di = dst_st[nd - 1]
  for o in prange(n // m):
    s, d = _row_offsets(np.int64(o), soff, sst, doff, dst_st, shape)
    for j in range(m):
      dst[d + j * di] = src[s + j * si]


@njit(cache=True, nogil=True)
def fill(dst, value):
  v = value[0]
  for i in range(dst.size):
    dst[i] = v


@njit(cache=True, nogil=True)
def iota(out, inner, size):
  """``out[i] = (i // inner) % size``: the flat form of ``broadcasted_iota``."""
  if inner <= 0 or size <= 0:
    return
  block = inner * size
  for o in range(out.size // block):
    row = out[o * block:(o + 1) * block]
    if inner == 1:
      for k in range(size):
        row[k] = k
    else:
      for k in range(size):
        seg = row[k * inner:(k + 1) * inner]
        for j in range(inner):
          seg[j] = k


@njit(cache=True, nogil=True)
def copy_bytes(src, dst):
  """``dst[:] = src`` for flat uint8 buffers of one length (bitcast_convert_type)."""
  for i in range(min(src.size, dst.size)):
    dst[i] = src[i]


@njit(cache=True, nogil=True)
def tri_select(src, dst, rows, cols, k, upper):
  """``tril``/``triu`` of a stack of ``rows x cols`` matrices in one pass, on flat buffers
  (any element type viewed as unsigned words of its size: zero is all-zero bits): row ``i``
  keeps columns ``j <= i + k`` (lower) or ``j >= i + k`` (upper) and zeroes the rest. ``k``
  is clamped to ``[-rows - 1, cols + 1]`` by the caller."""
  n = rows * cols
  if n == 0:
    return
  for b in range(min(src.size, dst.size) // n):
    for i in range(rows):
      s = src[b * n + i * cols:b * n + (i + 1) * cols]
      d = dst[b * n + i * cols:b * n + (i + 1) * cols]
      cut = min(max(i + k + (0 if upper else 1), 0), cols)
      if upper:
        d[:cut] = 0
        d[cut:] = s[cut:]
      else:
        d[:cut] = s[:cut]
        d[cut:] = 0
