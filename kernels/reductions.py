"""numba kernels for reductions, cumulative reductions, argmin/argmax and sort.

Pipeline position: the bottom of eager execution. ``nbjax.lax.reductions`` views every
operand as a C-contiguous ``(outer, n, inner)`` block whose middle axis is the one reduced
(or scanned, or sorted), and calls the kernels here on it; the caller allocates outputs and
passes the identity ``z`` as a scalar of the type computed in (the operand's own).
Float and complex sums, products and scans run in XLA's order (``tree_*``, ``scan_*``: see
"XLA's order" below), so eager results equal ``jit``'s bit for bit.

Two layouts per operation: ``*_rows`` when ``inner == 1`` (each row is contiguous:
``x2[outer, n]``) and ``*_cols`` otherwise (``x3[outer, n, inner]``, vectorised over
``inner``). Each has a serial kernel and a ``prange`` one (``*_PAR`` tables); the caller
decides when the parallel one pays (on shared 2-core machines it does not: see
``nbjax.lax.reductions.PAR_MIN``).
The ``ROWS``/``COLS`` sums (integers; float sums from 4096 elements, where XLA's order is
YNNPACK's) are cascaded: contiguous blocks of 256 summed by LLVM-vectorised loops
(``reassoc`` only, so NaN/inf semantics are IEEE; 32 partial sums of 8 elements each),
block sums combined pairwise, as NumPy does (whose blocks of 128 give 8 partial sums of 16):
the error bound is NumPy's or better, at the same speed as blocks of 2048.
max/min are IEEE's (NaN-propagating, -0 < +0), as XLA's; on float rows they and argmax/argmin
run as integer reductions over the bits, which vectorise (see "float max/min by bits").

Loops index through slices (``x[lo:hi]``) rather than ``x[lo + i]``: a computed index that
may be negative makes numba emit wraparound checks that stop vectorisation.
Kernels are generated from templates on first lookup (exec'd file-backed, so ``cache=True``
works) and compile lazily per dtype signature. Imports numba and numpy only.
"""
import textwrap

import numpy as np
from numba import carray, cfunc, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from kernels import Lazy
from kernels.elementwise import _fma
from kernels.threads import MAX_ARGS, voidptr

_J = dict(cache=True, nogil=True)

# ----------------------------------------------------------------- scalar helpers


def _max(a, b):
  """lax.max: NaN-propagating; on floats IEEE's maximum (-0 < +0), as XLA's."""


def _min(a, b):
  """lax.min, likewise."""


def _fmax(a, b):
  return (a + b) if (a == 0 and b == 0) else (a if (a > b or a != a) else b)


def _fmin(a, b):
  return -(-a - b) if (a == 0 and b == 0) else (a if (a < b or a != a) else b)


def _imax(a, b):
  return a if (a > b or a != a) else b


def _imin(a, b):
  return a if (a < b or a != a) else b


@overload(_max)
def _max_ol(a, b):
  return _fmax if isinstance(a, types.Float) else _imax


@overload(_min)
def _min_ol(a, b):
  return _fmin if isinstance(a, types.Float) else _imin


@njit(inline="always", **_J)
def _cmul(a, b):
  # XLA's complex product (its LLVM fuses the second product of each part)
  re = _fma(a.real, b.real, -(a.imag * b.imag))
  im = _fma(a.imag, b.real, a.real * b.imag)
  return type(a)(complex(re, im))


@njit(inline="always", **_J)
def _lt(a, b):
  # JAX's sort order: -inf < ... < inf < NaN; -0.0 == 0.0 and all NaNs equal
  return a < b or (b != b and a == a)


# ----------------------------------------------------------------- reductions

# op -> (combine expression over s and v, fastmath flags of the contiguous leaf)
REDUCE_OPS = {
    "sum": ("s + v", {"reassoc"}),
    "prod": ("s * v", {"reassoc"}),
    "max": ("_max(s, v)", False),
    "min": ("_min(s, v)", False),
    "and": ("s & v", False),
    "or": ("s | v", False),
    "xor": ("s ^ v", False),
}

_LEAF = """
def {fn}(y, z):
  s = z
  for i in range(y.size):
    v = y[i]
    s = {expr}
  return s
"""

# max/min leaves: plain compare-select (vectorisable) plus a separate NaN flag; a zero
# result is redone with IEEE's order of signed zeros
_LEAF_CHOOSER = """
def {fn}(y, z):
  s = z
  nan = False
  for i in range(y.size):
    v = y[i]
    s = v if v {cmp} s else s
    nan |= v != v
  if nan:
    for i in range(y.size):
      if y[i] != y[i]:
        return y[i]
  if s == 0:
    for i in range(y.size):
      v = y[i]
      if v == 0:
        s = _{op}(s, v)
  return s
"""

# Cascade: blocks of B summed by the leaf, block sums combined pairwise (binary counter, on
# the stack: a heap array per row cost ~0.15 us, as much as summing 1000 float32s)
_CASCADE = """
def {fn}(y, z):
  B = 256
  n = y.size
  if n <= B:
    return {leaf}(y, z)
  stack = carray(_stack64(z), 64)
  k = 0
  cnt = 0
  for i in range(0, n, B):
    cnt += 1
    k = _cascade_push(stack, k, {leaf}(y[i:i + B], z), cnt)
  return _cascade_fold(stack, k)
"""

# rows up to ``short`` elements call ``leaf`` (what ``row`` would reach) directly: a call
# through the cascade costs ~35 ns a row (NRT and a non-inlined frame), 3x a 10-element leaf
_ROWS = """
def {fn}(x, out, z):
  if x.shape[1] <= {short}:
    for o in range(x.shape[0]):
      out[o] = {leaf}(x[o], z)
  else:
    for o in range(x.shape[0]):
      out[o] = {row}(x[o], z)
"""

_ROWS_PAR = """
def {fn}(x, out, z):
  O, N = x.shape
  if O >= 16:
    for o in prange(O):
      out[o] = {row}(x[o], z)
  else:
    T = 16
    ch = ((N + T - 1) // T + 63) // 64 * 64
    parts = np.empty(T, np.asarray(z).dtype)
    for o in range(O):
      xo = x[o]
      for t in prange(T):
        lo = min(t * ch, N)
        parts[t] = {row}(xo[lo:min(lo + ch, N)], z)
      s = z
      for t in range(T):
        v = parts[t]
        s = {expr}
      out[o] = s
"""

# Column kernels take a range of columns [c0, c1) (the team's chunks) and walk it in tiles of
# COL_TILE bytes, so the accumulators stay in L1 however wide the rows (one thread, float32
# sum over axis 0 of (64, 15625): 243 -> 183-188 us); each column still reduces in index order
COL_TILE = 8192
_COLS = """
def {fn}(x, out, z, c0, c1):
  O, N, I = x.shape
  T = max(COL_TILE // x.itemsize, 1)
  acc = np.empty(min(T, max(c1 - c0, 0)), np.asarray(z).dtype)
  for o in range(O):
    for t0 in range(c0, c1, T):
      t1 = min(t0 + T, c1)
      a = acc[:t1 - t0]
      a[:] = z
      for j in range(N):
        r = x[o, j, t0:t1]
        for i in range(t1 - t0):
          s = a[i]
          v = r[i]
          a[i] = {expr}
      out[o, t0:t1] = a
"""

# the whole-array entry of a column kernel
_ALL_COLS = """
def {fn}(x, out, z):
  {kern}(x, out, z, 0, x.shape[2])
"""

_COLS_PAR = """
def {fn}(x, out, z):
  O, N, I = x.shape
  T = 16
  if O >= T:
    ch = (O + T - 1) // T
    for t in prange(T):
      a = min(t * ch, O)
      b = min(a + ch, O)
      {kern}(x[a:b], out[a:b], z, 0, I)
  else:
    ch = ((I + T - 1) // T + 15) // 16 * 16
    for t in prange(T):
      lo = min(t * ch, I)
      {kern}(x, out, z, lo, min(lo + ch, I))
"""

# ----------------------------------------------------------------- float max/min by bits
# Float max/min of rows as integer reductions over the operand's bits, which vectorise (the
# float compare-select reductions do not without fast-math, which would drop NaNs; the
# column kernels vectorise as they are: elementwise over the columns). One pass keeps the
# largest and smallest bits read as signed integers (M, m) and the largest
# read as unsigned (U). Non-negative floats order as their signed bits and lie above every
# negative one; negative floats order by magnitude as their unsigned bits. So:
# max = M if M >= 0 (a sign bit clear exists) else m (the negative of least magnitude);
# min = U if U has the sign bit (a negative exists: the one of most magnitude) else m.
# This is IEEE's order of signed zeros (-0 < +0), as XLA's. A NaN is there iff M lies above
# +inf's bits or U above -inf's; then the first NaN is the result, as before.


def _ibits(x):
  """``x`` (a contiguous float array) viewed as the signed integers of its width."""


def _ubits(x):
  """... and as the unsigned ones."""


def _kconst(x):
  """(+inf's bits signed, -inf's bits unsigned, the sign bit unsigned) for ``x``'s width."""


@overload(_ibits)
def _ibits_ol(x):
  it = np.int32 if x.dtype.bitwidth == 32 else np.int64
  return lambda x: x.view(it)


@overload(_ubits)
def _ubits_ol(x):
  it = np.uint32 if x.dtype.bitwidth == 32 else np.uint64
  return lambda x: x.view(it)


@overload(_kconst)
def _kconst_ol(x):
  if x.dtype.bitwidth == 32:
    return lambda x: (np.int32(0x7F800000), np.uint32(0xFF800000), np.uint32(0x80000000))
  return lambda x: (np.int64(0x7FF0000000000000), np.uint64(0xFFF0000000000000),
                    np.uint64(0x8000000000000000))


_BITS_ROWS = """
def {fn}(x, out, z):
  O, N = x.shape
  w = _ibits(x)
  wu = _ubits(x)
  ob = _ibits(out)
  obu = _ubits(out)
  inf, ninf, sign = _kconst(x)
  for o in range(O):
    if N == 0:
      out[o] = z
      continue
    r = w[o]
    ru = wu[o]
    M = r[0]
    m = r[0]
    U = ru[0]
    for i in range(N):
      v = r[i]
      u = ru[i]
      M = v if v > M else M
      m = v if v < m else m
      U = u if u > U else U
    if M > inf or U > ninf:  # a NaN: the first one
      xr = x[o]
      for i in range(N):
        if xr[i] != xr[i]:
          out[o] = xr[i]
          break
    elif {max}:
      ob[o] = M if M >= 0 else m
    elif U >= sign:
      obu[o] = U
    else:
      ob[o] = m
"""

# ----------------------------------------------------------------- argmin / argmax
# first NaN wins; ties go to the first index (JAX)

# one row, one pass: the first NaN, else the first extremum (also _ARG_BITS_ROWS' short rows)
_ARG_ONE_PASS = """
    r = x[o]
    best = r[0]
    k = 0
    if best == best:
      for j in range(1, N):
        v = r[j]
        if v != v:
          k = j
          break
        if v {cmp} best:
          best = v
          k = j
    out[o] = k
"""
_ARG_ROWS = """
def {fn}(x, out):
  O, N = x.shape
  for o in {rng}(O):""" + _ARG_ONE_PASS

# rows: up to ARG_SHORT elements one pass (~1.3 ns an element, against ~250 ns a row for the
# blocks' calls below); longer ones the extremum of each block of 16 KiB (floats: by bits,
# above), then the first index in the first block holding the best one (== : -0 ties +0),
# or the first NaN (one pass); columns: one branch-free pass, vectorised over the columns
ARG_SHORT = 256
_ARG_BITS_ROWS = """
def {fn}(x, out):
  O, N = x.shape
  if N <= ARG_SHORT:
    for o in range(O):""" + textwrap.indent(_ARG_ONE_PASS, "  ") + """    return
"""
_ARG_BITS_ROWS += """  t = np.empty(1, x.dtype)
  B = 16384 // x.itemsize
  for o in range(O):
    r = x[o]
    best = r[0]
    bb = 0
    k = -1
    for lo in range(0, N, B):  # blocks' extrema; the first block holding the best one
      c = r[lo:min(lo + B, N)]
      {ext}(c.reshape(1, c.size), t, best)
      e = t[0]
      if e != e:  # a NaN: the first one
        for i in range(c.size):
          if c[i] != c[i]:
            k = lo + i
            break
        break
      if e {cmp} best:
        best = e
        bb = lo
    if k < 0:  # in runs of 64: a vectorised test for a hit, then the run's first hit
      hi = min(bb + B, N)
      for lo in range(bb, hi, 64):
        c = r[lo:min(lo + 64, hi)]
        hit = False
        for i in range(c.size):
          hit |= c[i] == best
        if hit:
          for i in range(c.size):
            if c[i] == best:
              k = lo + i
              break
          break
    out[o] = k
"""

_ARG_COLS = """
def {fn}(x, out):
  O, N, I = x.shape
  for o in {rng}(O):
    best = x[o, 0].copy()
    idx = out[o]
    idx[:] = 0
    for j in range(1, N):
      r = x[o, j]
      for i in range(I):  # branch-free: vectorised over the columns
        v = r[i]
        b = best[i]
        up = (v {cmp} b) | ((v != v) & (b == b))
        best[i] = v if up else b
        idx[i] = j if up else idx[i]
"""

# ----------------------------------------------------------------- cumulative reductions

CUM_OPS = {"cumsum": "s + v", "cumprod": "s * v", "cummax": "_max(s, v)",
           "cummin": "_min(s, v)", "cumlogsumexp": "_logaddexp(s, v)"}


@njit(inline="always", **_J)
def _logaddexp(a, b):
  if a != a or b != b:
    return a + b
  if a == b:
    return a + np.log(2.0)  # also inf + inf and -inf + -inf
  m = a if a > b else b
  return m + np.log1p(np.exp(-abs(a - b)))


_CUM_ROWS = """
def {fn}(x, out, z, reverse):
  O, N = x.shape
  for o in {rng}(O):
    r = x[o]
    w = out[o]
    s = z
    if reverse:
      for j in range(N - 1, -1, -1):
        v = r[j]
        s = {expr}
        w[j] = s
    else:
      for j in range(N):
        v = r[j]
        s = {expr}
        w[j] = s
"""

_CUM_COLS = """
def {fn}(x, out, z, reverse):
  O, N, I = x.shape
  for o in {rng}(O):
    acc = np.empty(I, np.asarray(z).dtype)
    acc[:] = z
    for jj in range(N):
      j = N - 1 - jj if reverse else jj
      r = x[o, j]
      w = out[o, j]
      for i in range(I):
        s = acc[i]
        v = r[i]
        s = {expr}
        acc[i] = s
        w[i] = s
"""

# ----------------------------------------------------------------- XLA's order
# Float and complex sums, products and scans associate as XLA's CPU code does, so eager
# results equal ``jit``'s bit for bit (overflow, NaN and signed zeros included): they are
# computed in the operand's own type (``cmul`` is XLA's complex product), folded in order
# from the identity (``fold``: no reassociation), in XLA's blocks:
# - reductions (``tree``): an axis longer than W = 32 is cut into windows of 32, the padding
#   to a multiple of 32 split evenly between the two ends (XLA's tree-reduction rewrite);
#   each window is folded and the window results are reduced the same way. (From 4096
#   elements XLA hands float32/float64 sums to YNNPACK, whose vector kernels associate by
#   the machine's vector width: results agree to rounding there.)
# - scans (``scan``): an axis longer than S = 16 is cut into blocks of 16 from the start;
#   each block is scanned, the block totals are scanned the same way, and each element is
#   combined with the scan of the totals before its block (XLA's rewrite of the
#   whole-axis reduce_window JAX emits). Every output is a fold in index order, also for
#   ``reverse`` (a suffix folded from its first element on).
TREE_W = 32
SCAN_B = 16

_TREE = """
def {fn}(y, z, buf):
  n = y.size
  src = y
  while n > 32:
    nw = (n + 31) // 32
    st = 32 - (nw * 32 - n) // 2
    buf[0] = {fold}(src[:st], z)
    k = 1
    while st + 128 <= n:  # four windows at a time: independent chains
      a0 = src[st:st + 32]
      a1 = src[st + 32:st + 64]
      a2 = src[st + 64:st + 96]
      a3 = src[st + 96:st + 128]
      s0 = z
      s1 = z
      s2 = z
      s3 = z
      for j in range(32):
{body4}
      buf[k] = s0
      buf[k + 1] = s1
      buf[k + 2] = s2
      buf[k + 3] = s3
      k += 4
      st += 128
    while st < n:
      buf[k] = {fold}(src[st:min(st + 32, n)], z)
      k += 1
      st += 32
    src = buf
    n = nw
  return {fold}(src[:n], z)
"""

# Rows of one window are folded in the rows loop; rows of up to 8 windows (two levels:
# the windows' folds folded in order as they come) four rows at a time, four independent
# chains (a fold is latency-bound: ~1.3 ns an element on one chain); longer rows the tree.
_TREE_ROWS = """
def {fn}(x, out, z):
  O, N = x.shape
  if N <= 32:
    for o in range(O):
      out[o] = {fold}(x[o], z)
    return
  if N <= 256:
    nw = (N + 31) // 32
    lo = (nw * 32 - N) // 2
    o = 0
    while o < O:
      q4 = o + 4 <= O
      r0 = x[o]
      r1 = x[o + 1] if q4 else r0
      r2 = x[o + 2] if q4 else r0
      r3 = x[o + 3] if q4 else r0
      u0 = z
      u1 = z
      u2 = z
      u3 = z
      for q in range(nw):
        a = max(32 * q - lo, 0)
        b = min(32 * q + 32 - lo, N)
        s0 = z
        s1 = z
        s2 = z
        s3 = z
        for j in range(a, b):
{body4}
        s = u0
        v = s0
        u0 = {expr}
        s = u1
        v = s1
        u1 = {expr}
        s = u2
        v = s2
        u2 = {expr}
        s = u3
        v = s3
        u3 = {expr}
      out[o] = u0
      if q4:
        out[o + 1] = u1
        out[o + 2] = u2
        out[o + 3] = u3
        o += 4
      else:
        o += 1
    return
  buf = np.empty((N + 31) // 32, out.dtype)
  for o in range(O):
    out[o] = {tree}(x[o], z, buf)
"""

# rows lo..hi of ``src`` folded in order into ``acc`` (per column: XLA's order), four rows a
# pass so ``acc`` is loaded and stored once per four rows (vectorised along the columns)
_FOLD_ROWS = """
def {fn}(src, lo, hi, acc, z, c0):
  I = acc.size
  acc[:] = z
  j = lo
  while j + 4 <= hi:
    r0 = src[j, c0:c0 + I]
    r1 = src[j + 1, c0:c0 + I]
    r2 = src[j + 2, c0:c0 + I]
    r3 = src[j + 3, c0:c0 + I]
    for i in range(I):
      s = acc[i]
      v = r0[i]
      s = {expr}
      v = r1[i]
      s = {expr}
      v = r2[i]
      s = {expr}
      v = r3[i]
      s = {expr}
      acc[i] = s
    j += 4
  while j < hi:
    r = src[j, c0:c0 + I]
    for i in range(I):
      s = acc[i]
      v = r[i]
      acc[i] = {expr}
    j += 1
"""

_TREE_COLS = """
def {fn}(x, out, z, c0, c1):
  O, N, I = x.shape
  T = max(COL_TILE // x.itemsize, 1)
  if N <= 32 and c1 - c0 <= T:  # one window, one tile: folded in place, in the outer loop
    for o in range(O):
      w = out[o, c0:c1]
      w[:] = z
      for j in range(N):
        r = x[o, j, c0:c1]
        for i in range(c1 - c0):
          s = w[i]
          v = r[i]
          w[i] = {expr}
    return
  w = min(T, max(c1 - c0, 0))
  buf = np.empty((N + 31) // 32 * w, out.dtype)
  acc = np.empty(w, out.dtype)
  for o in range(O):
    for t0 in range(c0, c1, T):
      k = min(t0 + T, c1) - t0
      a = acc[:k]
      src = x[o]
      s0 = t0
      n = N
      while n > 32:
        nw = (n + 31) // 32
        lo = (nw * 32 - n) // 2
        b = buf[:nw * k].reshape((nw, k))
        for q in range(nw):
          {fold}(src, max(32 * q - lo, 0), min(32 * q + 32 - lo, n), a, z, s0)
          b[q] = a
        src = b
        s0 = 0
        n = nw
      {fold}(src, np.int64(0), n, a, z, s0)  # (a literal 0 would compile {fold} once more)
      out[o, t0:t0 + k] = a
"""

_SCAN1_BLOCKS = """
def {fn}(src, dst, z, reverse):
  # each block of 16 of the 1-d ``src`` scanned into ``dst``
  n = src.size
  nb = (n + 15) // 16
  acc = np.empty(16, dst.dtype)
  b0 = 0
{fwd8}
  for b in range(b0, nb):
    lo = 16 * b
    hi = min(lo + 16, n)
    if reverse:  # the suffix folds of the block side by side (vectorised)
      acc[:] = z
      blk = src[lo:hi]
      if hi - lo == 16:  # unrolled: the 16 accumulators in registers
{rev16}
      else:
        for j in range(hi - lo):
          v = blk[j]
          for k in range(j + 1):
            s = acc[k]
            acc[k] = {expr}
      dst[lo:hi] = acc[:hi - lo]
    else:
      s = z
      for k in range(lo, hi):
        v = src[k]
        s = {expr}
        dst[k] = s
"""

# XLA's scan of a 1-d ``src`` into ``dst``: blocks of 16 scanned ({blk}), the blocks' totals
# scanned the same way, level by level up to one block, then every block combined with the
# scan of the totals before it, level by level down (as XLA's recursive rewrite; a loop, not
# a recursive call: numba's cached recursive functions crashed once jaxlib had run)
_SCAN1 = """
def {fn}(src, dst, z, reverse):
  n = src.size
  {blk}(src, dst, z, reverse)
  if n <= 16:
    return
  b = _scan_levels(n)
  L = b.size - 1
  buf = np.empty(b[L], dst.dtype)
  t = np.empty(b[1], dst.dtype)
  for l in range(L):
    lvl = dst if l == 0 else buf[b[l - 1]:b[l]]
    c = lvl.size
    m = b[l + 1] - b[l]
    for q in range(m):
      t[q] = lvl[16 * q] if reverse else lvl[min(16 * q + 16, c) - 1]
    {blk}(t[:m], buf[b[l]:b[l + 1]], z, reverse)
  for l in range(L - 1, -1, -1):
    pre = buf[b[l]:b[l + 1]]
    lvl = dst if l == 0 else buf[b[l - 1]:b[l]]
    c = lvl.size
    nb = b[l + 1] - b[l]
    for q in range(nb):
      e = z if q == (nb - 1 if reverse else 0) else pre[q + 1 if reverse else q - 1]
      blk = lvl[16 * q:min(16 * q + 16, c)]  # (a slice: no wraparound checks, vectorised)
      for k in range(blk.size):
        s = blk[k]
        v = e
        blk[k] = {expr}
"""

_SCAN2_BLOCKS = """
def {fn}(src, dst, z, reverse):
  # the same for each column of the 2-d ``src`` (n, I)
  n, I = src.shape
  acc = np.empty(I, dst.dtype)
  nb = (n + 15) // 16
  for b in range(nb):
    lo = 16 * b
    hi = min(lo + 16, n)
    if reverse:
      for k in range(lo, hi):
        acc[:] = z
        for j in range(k, hi):
          r = src[j]
          for i in range(I):
            s = acc[i]
            v = r[i]
            acc[i] = {expr}
        dst[k] = acc
    else:
      acc[:] = z
      for k in range(lo, hi):
        r = src[k]
        w = dst[k]
        for i in range(I):
          s = acc[i]
          v = r[i]
          s = {expr}
          acc[i] = s
          w[i] = s
"""

_SCAN2 = """
def {fn}(src, dst, z, reverse):
  n, I = src.shape
  {blk}(src, dst, z, reverse)
  if n <= 16:
    return
  b = _scan_levels(n)
  L = b.size - 1
  buf = np.empty((b[L], I), dst.dtype)
  t = np.empty((b[1], I), dst.dtype)
  acc = np.empty(I, dst.dtype)
  acc[:] = z
  for l in range(L):
    lvl = dst if l == 0 else buf[b[l - 1]:b[l]]
    c = lvl.shape[0]
    m = b[l + 1] - b[l]
    for q in range(m):
      t[q] = lvl[16 * q] if reverse else lvl[min(16 * q + 16, c) - 1]
    {blk}(t[:m], buf[b[l]:b[l + 1]], z, reverse)
  for l in range(L - 1, -1, -1):
    pre = buf[b[l]:b[l + 1]]
    lvl = dst if l == 0 else buf[b[l - 1]:b[l]]
    c = lvl.shape[0]
    nb = b[l + 1] - b[l]
    for q in range(nb):
      e = acc if q == (nb - 1 if reverse else 0) else pre[q + 1 if reverse else q - 1]
      for k in range(16 * q, min(16 * q + 16, c)):
        w = lvl[k]
        for i in range(I):
          s = w[i]
          v = e[i]
          w[i] = {expr}
"""

_SCAN_ROWS = """
def {fn}(x, out, z, reverse):
  for o in range(x.shape[0]):
    {scan}(x[o], out[o], z, reverse)
"""

# rows of one block (up to 16): each output the fold in index order of its prefix (suffix),
# in the rows loop (a call per row, with its buffer, cost ~100 ns)
_SCAN_ROWS1 = """
def {fn}(x, out, z, reverse):
  O, N = x.shape
  if N > 16:
    for o in range(O):
      {scan}(x[o], out[o], z, reverse)
  elif reverse:
    for o in range(O):
      r = x[o]
      w = out[o]
      for k in range(N):
        s = z
        for j in range(k, N):
          v = r[j]
          s = {expr}
        w[k] = s
  else:
    for o in range(O):
      r = x[o]
      w = out[o]
      s = z
      for j in range(N):
        v = r[j]
        s = {expr}
        w[j] = s
"""

# ----------------------------------------------------------------- sort (stable merge sort)
# ``_key(key, p)`` is the sort key of element p: p itself (values sort) or key[p] (perm sort)

_MSORT = """
def {fn}(a, tmp, key):
  n = a.size
  RUN = 24
  for lo in range(0, n, RUN):
    hi = min(lo + RUN, n)
    for i in range(lo + 1, hi):
      p = a[i]
      kp = _key(key, p)
      j = i - 1
      while j >= lo:
        q = a[j]
        if _lt(kp, _key(key, q)):
          a[j + 1] = q
          j -= 1
        else:
          break
      a[j + 1] = p
  width = RUN
  src = a
  dst = tmp
  flips = 0
  while width < n:
    for lo in range(0, n, 2 * width):
      mid = min(lo + width, n)
      hi = min(lo + 2 * width, n)
      i = lo
      j = mid
      k = lo
      if mid < hi and not _lt(_key(key, src[mid]), _key(key, src[mid - 1])):
        for t in range(lo, hi):
          dst[t] = src[t]
        continue
      while i < mid and j < hi:
        p = src[i]
        q = src[j]
        if _lt(_key(key, q), _key(key, p)):
          dst[k] = q
          j += 1
        else:
          dst[k] = p
          i += 1
        k += 1
      while i < mid:
        dst[k] = src[i]
        i += 1
        k += 1
      while j < hi:
        dst[k] = src[j]
        j += 1
        k += 1
    src, dst = dst, src
    flips += 1
    width *= 2
  if flips % 2 == 1:
    a[:] = tmp
"""


@njit(inline="always", **_J)
def _key_val(key, p):
  return p


@njit(inline="always", **_J)
def _key_idx(key, p):
  return key[p]


_SORT_ROWS = """
def {fn}(x, out):
  O, N = x.shape
  for o in {rng}(O):
    r = out[o]
    r[:] = x[o]
    tmp = np.empty(N, x.dtype)
    _msort_vals(r, tmp, r)
"""

_TAKE_ROWS = """
def {fn}(x, perm, out):
  O, N = x.shape
  for o in {rng}(O):
    r = x[o]
    p = perm[o]
    w = out[o]
    for j in range(N):
      w[j] = r[p[j]]
"""

# LSD radix argsort (stable) on order-preserving integer keys: ``nbjax.lax.reductions`` maps
# every key dtype to a signed integer whose (signed) order is JAX's sort order. Digits are
# bytes; the top byte's sign bit is flipped so that unsigned digit order is signed order.

_RADIX_ROWS = """
def {fn}(keys, perm, nbits):
  # stable-sort each row of ``perm`` by keys[row, perm[row, :]]
  O, N = keys.shape
  for o in {rng}(O):
    p = perm[o]
    k = keys[o]
    if N <= 64:
      tmp = np.empty(N, perm.dtype)
      _msort_perm(p, tmp, k)
      continue
    kk = np.empty(N, keys.dtype)
    for i in range(N):
      kk[i] = k[p[i]]
    pp = p.copy()
    kt = np.empty_like(kk)
    pt = np.empty_like(pp)
    cnt = np.empty(256, np.int64)
    for shift in range(0, nbits, 8):
      flip = 128 if shift == nbits - 8 else 0
      cnt[:] = 0
      for i in range(N):
        cnt[((kk[i] >> shift) & 255) ^ flip] += 1
      if cnt[((kk[0] >> shift) & 255) ^ flip] == N:
        continue  # one digit value: the pass would not move anything
      tot = 0
      for d in range(256):
        c = cnt[d]
        cnt[d] = tot
        tot += c
      for i in range(N):
        d = ((kk[i] >> shift) & 255) ^ flip
        pos = cnt[d]
        kt[pos] = kk[i]
        pt[pos] = pp[i]
        cnt[d] = pos + 1
      kk, kt = kt, kk
      pp, pt = pt, pp
    p[:] = pp
"""

# ----------------------------------------------------------------- generation

@intrinsic
def _stack64(typingctx, z):
  """A pointer to 64 elements of ``z``'s type in the calling function's stack frame
  (allocated in its entry block: once per call, however often a loop reaches this)."""
  t = types.unliteral(z)

  def codegen(context, builder, sig, args):
    return cgutils.alloca_once(builder, context.get_value_type(t), size=64)
  return types.CPointer(t)(z), codegen


@njit(error_model="numpy", **_J)
def _cascade_push(stack, k, s, cnt):
  """Push the ``cnt``-th block sum ``s`` onto the cascade's binary counter (``stack[:k]``,
  the sums of whole subtrees, merging equal-sized ones); returns the new height."""
  c = cnt
  while c & 1 == 0:
    k -= 1
    s = stack[k] + s
    c >>= 1
  stack[k] = s
  return k + 1


@njit(error_model="numpy", **_J)
def _cascade_fold(stack, k):
  """The cascade's result: the counter's subtree sums added from the smallest up."""
  r = stack[k - 1]
  for j in range(k - 2, -1, -1):
    r = stack[j] + r
  return r


@njit(error_model="numpy", **_J)
def _scan_levels(n):
  """Where a scan of ``n`` > 16 elements keeps its levels of block totals: level ``l`` (one
  total per block of 16 of the level below) at ``buf[b[l]:b[l + 1]]``, up to one block;
  ``b[-1]`` is the buffer's length."""
  b = np.zeros(24, np.int64)
  L = 0
  m = n
  while m > 16:
    m = (m + 15) // 16
    b[L + 1] = b[L] + m
    L += 1
  return b[:L + 1]


_NS = dict(np=np, prange=prange, __name__=__name__, _max=_max, _min=_min, _lt=_lt,
           _ibits=_ibits, _ubits=_ubits, _kconst=_kconst,
           _logaddexp=_logaddexp, _cmul=_cmul, carray=carray, voidptr=voidptr,
           _stack64=_stack64, COL_TILE=COL_TILE, ARG_SHORT=ARG_SHORT, MAX_ARGS=MAX_ARGS,
           _cascade_push=_cascade_push,
           _cascade_fold=_cascade_fold, _scan_levels=_scan_levels)


def _make(src, fn, parallel=False, fastmath=False, **fmt):
  """The dispatcher of template ``src`` formatted as function ``fn``, generated once per
  process (kernels call each other by name, through ``_NS``)."""
  k = _BUILT.get(fn)
  if k is not None:
    return k
  ns = _NS
  exec(compile(src.format(fn=fn, rng="prange" if parallel else "range", **fmt), __file__,
               "exec"), ns)
  f = ns[fn]
  f.__qualname__ = fn
  k = ns[fn] = _BUILT[fn] = njit(parallel=parallel, fastmath=fastmath, error_model="numpy",
                                 **_J)(f)
  return k


_BUILT = {}


def _row(op):
  """The name of ``op``'s row kernel (generated with its leaf): what ``*_rows`` loops call."""
  expr, fm = REDUCE_OPS[op]
  if op in ("max", "min"):
    _make(_LEAF_CHOOSER, f"_leaf_{op}", cmp=">" if op == "max" else "<", op=op)
  else:
    _make(_LEAF, f"_leaf_{op}", fastmath=fm, expr=expr)
  if op != "sum":
    return f"_leaf_{op}"
  _make(_CASCADE, "_cascade_sum", leaf="_leaf_sum")
  return "_cascade_sum"


def _by_float(fn, fkern, kern, nargs=3):
  """A kernel ``fn`` running ``fkern`` on float operands and ``kern`` on the others."""
  def stub(*a):
    pass

  @overload(stub)
  def _ol(*a):
    k = fkern if isinstance(a[0].dtype, types.Float) else kern
    return lambda *a: k(*a)
  _NS["_sel_" + fn] = stub
  args = ", ".join("abcdefgh"[:nargs])
  return _make(f"def {{fn}}({args}):\n  return _sel_{{fn}}({args})\n", fn)


def _rows(op):
  row = _row(op)
  k = _make(_ROWS, f"reduce_{op}_rows", row=row, leaf=f"_leaf_{op}",
            short=256 if row == "_cascade_sum" else 0)
  if op not in ("max", "min"):
    return k
  bits = _make(_BITS_ROWS, f"_bits_{op}_rows", max=str(op == "max"))
  return _by_float(f"reduce_{op}_rows_sel", bits, k)


ROWS = Lazy(REDUCE_OPS, _rows)
ROWS_PAR = Lazy(REDUCE_OPS, lambda op: _make(_ROWS_PAR, f"reduce_{op}_rows_par", parallel=True,
                                              row=_row(op), expr=REDUCE_OPS[op][0]))
# Chunk functions for kernels.threads.team_run over (x, [z], [m], out), the job's size out's:
# chunk i of one long row of n elements (elements [i * m, (i + 1) * m)) reduced into out[i],
# or a block of rows of m elements each (rows [lo, hi)) into out[lo:hi]
_ROW_CHUNKS = """
def {fn}(lo, hi, argv):
  p = carray(voidptr(argv), 2 * MAX_ARGS, np.int64)
  n = p[MAX_ARGS]
  z = carray(voidptr(p[1]), 1, np.{dt})[0]
  m = carray(voidptr(p[2]), 1, np.int64)[0]
  out = carray(voidptr(p[3]), p[MAX_ARGS + 3], np.{dt})
  for i in range(lo, hi):
    a = i * m
    b = min(a + m, n)
    {kern}(carray(voidptr(p[0] + a * {size}), (1, b - a), np.{dt}), out[i:i + 1], z)
"""
_ROW_BLOCKS = """
def {fn}(lo, hi, argv):
  p = carray(voidptr(argv), 2 * MAX_ARGS, np.int64)
  z = carray(voidptr(p[1]), 1, np.{dt})[0]
  m = carray(voidptr(p[2]), 1, np.int64)[0]
  out = carray(voidptr(p[3]), p[MAX_ARGS + 3], np.{dt})
  {kern}(carray(voidptr(p[0] + lo * m * {size}), (hi - lo, m), np.{dt}), out[lo:hi], z)
"""
# ... and over (x, [z], [O, N, I, by], out, out[:units]) for a column kernel's range form on
# an (O, N, I) block: the job's units (the last array's size) are outer blocks (by == 1) or
# columns (by == 0), each output element one unit's
_COL_CHUNKS = """
def {fn}(lo, hi, argv):
  p = carray(voidptr(argv), 2 * MAX_ARGS, np.int64)
  z = carray(voidptr(p[1]), 1, np.{dt})[0]
  d = carray(voidptr(p[2]), 4, np.int64)
  x = carray(voidptr(p[0]), (d[0], d[1], d[2]), np.{dt})
  out = carray(voidptr(p[3]), (d[0], d[2]), np.{dt})
  if d[3]:
    {kern}(x[lo:hi], out[lo:hi], z, 0, d[2])
  else:
    {kern}(x, out, z, lo, hi)
"""
_chunk_fns = {}


def row_chunks(op, dtype, blocks=False):
  """The address of ``op``'s chunk function on ``dtype`` rows: ``_ROW_BLOCKS`` (``blocks``)
  or ``_ROW_CHUNKS``."""
  return _chunks("row_blocks" if blocks else "row_chunks", _ROW_BLOCKS if blocks else _ROW_CHUNKS,
                 op, dtype, ROWS[op].py_func.__name__)


def col_chunks(op, dtype, tree):
  """The address of ``op``'s ``_COL_CHUNKS`` function on ``dtype`` blocks: over its XLA-order
  column kernel (``tree``: float sums and products) or its plain one."""
  kern = (TREE_COLS if tree else COLS)[op].py_func.__name__ + "_range"
  return _chunks("col_tree_chunks" if tree else "col_chunks", _COL_CHUNKS, op, dtype, kern)


def _chunks(kind, src, op, dtype, kern):
  f = _chunk_fns.get((kind, op, dtype))
  if f is None:
    fn = f"reduce_{op}_{kind}_{dtype.name}"
    exec(compile(src.format(fn=fn, kern=kern, dt=dtype.name, size=dtype.itemsize), __file__,
                 "exec"), _NS)
    g = _NS[fn]
    g.__qualname__ = fn
    f = _chunk_fns[(kind, op, dtype)] = cfunc(
        types.void(types.int64, types.int64, types.int64), error_model="numpy", **_J)(g)
  return f.address


@njit(error_model="numpy", **_J)
def cascade_parts(parts):
  """The sum of ``parts``, the sums of consecutive whole subtrees of one cascade (the last
  one's may be partial), combined as the cascade combines subtrees: the one-call bits."""
  stack = np.empty(64, parts.dtype)
  k = 0
  for i in range(parts.size):
    k = _cascade_push(stack, k, parts[i], i + 1)
  return _cascade_fold(stack, k)


def _cols(op):
  _make(_COLS, f"reduce_{op}_cols_range", expr=REDUCE_OPS[op][0])
  return _make(_ALL_COLS, f"reduce_{op}_cols", kern=f"reduce_{op}_cols_range")


COLS = Lazy(REDUCE_OPS, _cols)
COLS_PAR = Lazy(REDUCE_OPS, lambda op: COLS[op] and _make(
    _COLS_PAR, f"reduce_{op}_cols_par", parallel=True, kern=f"reduce_{op}_cols_range"))

_ARG = {"argmax": (">", "max"), "argmin": ("<", "min")}


def _arg_rows(op):
  cmp, ext = _ARG[op]
  ROWS[ext]  # noqa: B018  (the float kernel calls reduce_{ext}_rows_sel by name)
  return _make(_ARG_BITS_ROWS, f"{op}_rows", ext=f"reduce_{ext}_rows_sel", cmp=cmp)


ARG_ROWS = Lazy(_ARG, _arg_rows)
ARG_ROWS_PAR = Lazy(_ARG, lambda op: _make(_ARG_ROWS, f"{op}_rows_par", parallel=True,
                                            cmp=_ARG[op][0]))
ARG_COLS = Lazy(_ARG, lambda op: _make(_ARG_COLS, f"{op}_cols", cmp=_ARG[op][0]))
ARG_COLS_PAR = Lazy(_ARG, lambda op: _make(_ARG_COLS, f"{op}_cols_par", parallel=True,
                                            cmp=_ARG[op][0]))

CUM_ROWS = Lazy(CUM_OPS, lambda op: _make(_CUM_ROWS, f"{op}_rows", expr=CUM_OPS[op]))
CUM_ROWS_PAR = Lazy(CUM_OPS, lambda op: _make(_CUM_ROWS, f"{op}_rows_par", parallel=True,
                                               expr=CUM_OPS[op]))
CUM_COLS = Lazy(CUM_OPS, lambda op: _make(_CUM_COLS, f"{op}_cols", expr=CUM_OPS[op]))
CUM_COLS_PAR = Lazy(CUM_OPS, lambda op: _make(_CUM_COLS, f"{op}_cols_par", parallel=True,
                                               expr=CUM_OPS[op]))

# XLA-order sums, products and scans (float and complex)
TREE_OPS = {"sum": "s + v", "prod": "s * v", "prod_complex": "_cmul(s, v)"}
SCAN_OPS = {"cumsum": "s + v", "cumprod": "s * v", "cumprod_complex": "_cmul(s, v)",
            "cumlogsumexp": "_logaddexp(s, v)"}


def _tree_rows(op):
  expr = TREE_OPS[op]
  _make(_LEAF, f"_fold_{op}", expr=expr)  # an in-order fold: a leaf without fastmath
  body = "\n".join(f"        v = a{c}[j]\n        s = s{c}\n        s{c} = {expr}"
                   for c in range(4))
  _make(_TREE, f"_tree_{op}", fold=f"_fold_{op}", body4=body)
  rows = "\n".join(f"          v = r{c}[j]\n          s = s{c}\n          s{c} = {expr}"
                   for c in range(4))
  return _make(_TREE_ROWS, f"tree_{op}_rows", tree=f"_tree_{op}", fold=f"_fold_{op}",
               body4=rows, expr=expr)


def _tree_cols(op):
  _make(_FOLD_ROWS, f"_fold_rows_{op}", expr=TREE_OPS[op])
  _make(_TREE_COLS, f"tree_{op}_cols_range", fold=f"_fold_rows_{op}", expr=TREE_OPS[op])
  return _make(_ALL_COLS, f"tree_{op}_cols", kern=f"tree_{op}_cols_range")


def _scan_rows(op):
  expr = SCAN_OPS[op]
  # a combiner that is a call (logaddexp, complex _cmul) stays a loop: 136 inlined logaddexp
  # calls cost ~50 s of numba compile per dtype, for no speed (libm-bound)
  if "(" in expr:
    rev = [f"        for j in range(16):\n          v = blk[j]\n          for k in range(j + 1):"
           f"\n            s = acc[k]\n            acc[k] = {expr}"]
  else:
    rev = ["        " + "\n        ".join(f"a{k} = z" for k in range(16))]
    for j in range(16):
      rev.append(f"        v = blk[{j}]")
      rev += [f"        s = a{k}\n        a{k} = {expr}" for k in range(j + 1)]
    rev.append("        " + "\n        ".join(f"acc[{k}] = a{k}" for k in range(16)))
  fwd = []
  if "(" not in expr:  # eight whole blocks at a time: eight independent chains in flight
    fwd = ["  if not reverse:\n    while 128 * b0 + 128 <= n:"]
    fwd += [f"      a{c} = src[128 * b0 + {16 * c}:128 * b0 + {16 * c + 16}]\n"
           f"      d{c} = dst[128 * b0 + {16 * c}:128 * b0 + {16 * c + 16}]\n      s{c} = z"
           for c in range(8)]
    fwd.append("      for k in range(16):")
    fwd += [f"        v = a{c}[k]\n        s = s{c}\n        s{c} = {expr}\n        d{c}[k] = s{c}"
            for c in range(8)]
    fwd.append("      b0 += 1\n    b0 *= 8")
  _make(_SCAN1_BLOCKS, f"_scan1b_{op}", expr=expr, rev16="\n".join(rev), fwd8="\n".join(fwd))
  _make(_SCAN1, f"_scan1_{op}", expr=expr, blk=f"_scan1b_{op}")
  return _make(_SCAN_ROWS1, f"scan_{op}_rows", scan=f"_scan1_{op}", expr=expr)


def _scan_cols(op):
  _make(_SCAN2_BLOCKS, f"_scan2b_{op}", expr=SCAN_OPS[op])
  _make(_SCAN2, f"_scan2_{op}", expr=SCAN_OPS[op], blk=f"_scan2b_{op}")
  return _make(_SCAN_ROWS, f"scan_{op}_cols", scan=f"_scan2_{op}")


TREE_ROWS, TREE_COLS = Lazy(TREE_OPS, _tree_rows), Lazy(TREE_OPS, _tree_cols)
SCAN_ROWS, SCAN_COLS = Lazy(SCAN_OPS, _scan_rows), Lazy(SCAN_OPS, _scan_cols)

_NS.update(_key_val=_key_val, _key_idx=_key_idx)


def _with_msort(src, name, parallel=False):
  """A kernel calling the merge sorts (``_msort_vals``/``_msort_perm``), generated with them."""
  _make(_MSORT.replace("_key(", "_key_val("), "_msort_vals")
  _make(_MSORT.replace("_key(", "_key_idx("), "_msort_perm")
  return _make(src, name, parallel=parallel)


# the single kernels, generated on first attribute access (PEP 562)
_SINGLE = {
    "SORT_ROWS": lambda: _with_msort(_SORT_ROWS, "sort_rows"),
    "SORT_ROWS_PAR": lambda: _with_msort(_SORT_ROWS, "sort_rows_par", True),
    "RADIX_ROWS": lambda: _with_msort(_RADIX_ROWS, "radix_argsort_rows"),
    "RADIX_ROWS_PAR": lambda: _with_msort(_RADIX_ROWS, "radix_argsort_rows_par", True),
    "TAKE_ROWS": lambda: _make(_TAKE_ROWS, "take_rows"),
    "TAKE_ROWS_PAR": lambda: _make(_TAKE_ROWS, "take_rows_par", parallel=True),
}


def __getattr__(name):
  build = _SINGLE.get(name)
  if build is None:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  k = globals()[name] = build()
  return k


@njit(**_J)
def has_nan_or_negzero(u, absmask, inf, negzero):
  """Whether the floats whose bits are ``u`` (an unsigned view) hold a NaN (magnitude bits
  above infinity's) or a -0.0: the keys that compare equal but differ, for which a sort must
  be stable (``lax.sort``'s single-operand path). One pass in blocks, stopping after the
  first block that holds one: a count inside a block, without branches, vectorises (1e4
  float32: 2.8 us, 8.0 with an exit test per element)."""
  n = u.size
  s = 0
  while s < n:
    e = min(s + 2048, n)
    y = u[s:e]
    hits = 0
    for t in range(y.size):
      b = y[t]
      hits += ((b & absmask) > inf) + (b == negzero)
    if hits:
      return True
    s = e
  return False
