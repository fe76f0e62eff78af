"""numba kernels for windowed reductions: reduce_window sum/max/min and the max-pool
gradient pair select_and_gather_add / select_and_scatter_add.

Pipeline position: the bottom of eager execution. ``nbjax.lax.windowed_reductions`` pads
(and base-dilates) the operand with the reduction's init value, then views it flat with a
plan: ``oshape`` (the output's outer dims), ``ostep`` (how far one step of each outer output
index moves in the flat operand), ``offs`` (the flat offsets of the window's elements from a
window's start, in row-major window order) and ``C``, the lanes: when the last dim is not
windowed (window 1, stride 1) each output position is a contiguous run of ``C`` elements and
the loops over it vectorise (an NHWC pool runs over channels); otherwise ``C == 1``.
Every window is folded in row-major order starting from the init value ``z``, as XLA's CPU
reduce-window does (``acc = reducer(acc, elem)``). max/min are IEEE's (NaN-propagating,
-0 < +0), as XLA's. The select kernels pick, per window, the element XLA's ``select(acc, e)``
keeps (``ge``: the first maximum; a NaN replaces the selection, as comparisons with it fail).
Imports numba and numpy only.
"""
import numpy as np
from numba import njit

from kernels import Lazy
from kernels.reductions import _max, _min  # noqa: F401 (used by the generated kernels)

_J = dict(cache=True, nogil=True)

# the outer-index odometer shared by every kernel (``_HEAD`` sets it up, ``_STEP`` advances
# it): ``n`` output positions, ``idx`` the outer index, ``base`` walks the flat operand
_HEAD = """  nd = oshape.size
  n = 1
  for d in range(nd):
    n *= oshape[d]
  idx = np.zeros(nd, np.int64)"""

_STEP = """
    d = nd - 1
    while d >= 0:
      idx[d] += 1
      base += ostep[d]
      if idx[d] < oshape[d]:
        break
      base -= ostep[d] * oshape[d]
      idx[d] = 0
      d -= 1
"""

_REDUCE = """
def {fn}(p, ostep, oshape, offs, C, z, out):
{head}
  base = 0
  for o in range(n):
    row = out[o * C:(o + 1) * C]
    for c in range(C):
      row[c] = z
    for k in range(offs.size):
      s = base + offs[k]
      src = p[s:s + C]
      for c in range(C):
        a = row[c]
        v = src[c]
        row[c] = {expr}
{step}
"""

# the same fold with the window's ``K`` elements unrolled (``K <= UNROLL``): one pass over
# the lanes reads every window element and writes the output once (an NHWC 2x2 max-pool:
# 0.175 -> 0.111 ms for 32x28x28x32 float32)
_REDUCE_K = """
def {fn}(p, ostep, oshape, offs, C, z, out):
{head}
  base = 0
  for o in range(n):
    row = out[o * C:(o + 1) * C]
{srcs}
    for c in range(C):
      row[c] = {fold}
{step}
"""

# select_and_gather_add: per window the tangent at the selected operand element; the fold
# starts from (z, 0) as XLA's pair reduce-window does and skips padding (``valid == 0``), as
# XLA's reduce-window skips the positions outside the (base-dilated) operand
_GATHER = """
def {fn}(t, p, valid, ostep, oshape, offs, C, z, out):
{head}
  best = np.empty(C, p.dtype)
  base = 0
  for o in range(n):
    row = out[o * C:(o + 1) * C]
    for c in range(C):
      best[c] = z
      row[c] = 0
    for k in range(offs.size):
      s = base + offs[k]
      src = p[s:s + C]
      tsrc = t[s:s + C]
      vsrc = valid[s:s + C]
      for c in range(C):
        keep = best[c] {cmp} src[c] or vsrc[c] == 0
        best[c] = best[c] if keep else src[c]
        row[c] = row[c] if keep else tsrc[c]
{step}
"""

# the same with the window's ``K`` elements unrolled: one pass over the lanes
_GATHER_K = """
def {fn}(t, p, valid, ostep, oshape, offs, C, z, out):
{head}
  zero = np.zeros_like(out[:1])[0]
  base = 0
  for o in range(n):
    row = out[o * C:(o + 1) * C]
{srcs}
{tans}
{oks}
    for c in range(C):
      b = z
      r = zero
{select}
      row[c] = r
{step}
"""

# select_and_scatter_add: per window, add the source value at the selected element (the
# first window element to start, as XLA's SelectAndScatter); ``_WRITE`` assigns (``=``)
# when the windows tile the operand exactly (stride == window, nothing left over): each
# element of ``out`` is then written once, by its window (``out`` needs no zeros first,
# nothing is read; ``+ zero`` keeps XLA's sum into zeros: a -0 source gives +0)
_WRITE = """    srow = src[o * C:(o + 1) * C]
    for k in range(offs.size):
      s = base + offs[k]
      dst = out[s:s + C]
      for c in range(C):
        dst[c] {} srow[c] + zero if at[c] == k else zero"""

_SCATTER = """
def {fn}(src, p, ostep, oshape, offs, C, out):
{head}
  zero = np.zeros_like(out[:1])[0]
  best = np.empty(C, p.dtype)
  at = np.empty(C, np.int64)
  base = 0
  for o in range(n):
    s0 = base + offs[0]
    first = p[s0:s0 + C]
    for c in range(C):
      best[c] = first[c]
      at[c] = 0
    for k in range(1, offs.size):
      s = base + offs[k]
      cand = p[s:s + C]
      for c in range(C):
        keep = best[c] {cmp} cand[c]
        best[c] = best[c] if keep else cand[c]
        at[c] = at[c] if keep else k
{write}
{step}
"""

# the same with the window's ``K`` elements unrolled: one pass over the lanes selects and
# writes (the 2x2 max-pool gradient above: 0.31 -> 0.18 ms, with exact tiling)
_SCATTER_K = """
def {fn}(src, p, ostep, oshape, offs, C, out):
{head}
  zero = np.zeros_like(out[:1])[0]
  at = np.empty(C, np.int32)
  base = 0
  for o in range(n):
{srcs}
    for c in range(C):
      b = a0[c]
      i = 0
{select}
      at[c] = i
{write}
{step}
"""

UNROLL = 16  # windows of at most this many elements run the unrolled kernels

_EXPR = {"sum": "a + v", "max": "_max(a, v)", "min": "_min(a, v)"}
_FOLD = {"sum": "({}) + {}", "max": "_max({}, {})", "min": "_min({}, {})"}


def _build(template, fn, **fmt):
  ns = {"np": np, "_max": _max, "_min": _min, "__name__": __name__}
  exec(compile(template.format(fn=fn, head=_HEAD, step=_STEP, **fmt), __file__, "exec"), ns)
  f = ns[fn]
  f.__qualname__ = fn
  return njit(error_model="numpy", **_J)(f)


def _slices(name, arr, K):
  return "\n".join(f"    s = base + offs[{k}]\n    {name}{k} = {arr}[s:s + C]" for k in range(K))


def _reduce(key):
  op, K = key
  if not K:
    return _build(_REDUCE, f"reduce_window_{op}", expr=_EXPR[op])
  fold = "z"
  for k in range(K):
    fold = _FOLD[op].format(fold, f"a{k}[c]")
  return _build(_REDUCE_K, f"reduce_window_{op}_{K}", srcs=_slices("a", "p", K), fold=fold)


def _gather(key):
  sel, K = key
  if not K:
    return _build(_GATHER, f"select_gather_{sel}", cmp=_CMP[sel])
  select = "\n".join(f"      keep = b {_CMP[sel]} a{k}[c] or ok{k}[c] == 0\n"
                      f"      b = b if keep else a{k}[c]\n      r = r if keep else t{k}[c]"
                      for k in range(K))
  return _build(_GATHER_K, f"select_gather_{sel}_{K}", srcs=_slices("a", "p", K),
                tans=_slices("t", "t", K), oks=_slices("ok", "valid", K), select=select)


def _scatter(key):
  sel, tile, K = key
  write = _WRITE.format("=" if tile else "+=")
  name = f"select_scatter_{sel}{'_tile' * tile}"
  if not K:
    return _build(_SCATTER, name, cmp=_CMP[sel], write=write)
  select = "\n".join(f"      v = a{k}[c]\n      keep = b {_CMP[sel]} v\n"
                      f"      b = b if keep else v\n      i = i if keep else {k}"
                      for k in range(1, K))
  return _build(_SCATTER_K, f"{name}_{K}", srcs=_slices("a", "p", K), select=select,
                write=write)


def unrolled(offs):
  """The ``K`` of the kernels' keys for a window of ``offs``: its size when unrolled, else 0."""
  return offs.size if offs.size <= UNROLL else 0


_CMP = {"ge": ">=", "le": "<="}
_KS = range(UNROLL + 1)
REDUCE = Lazy([(op, K) for op in _EXPR for K in _KS], _reduce)
GATHER = Lazy([(sel, K) for sel in _CMP for K in _KS], _gather)
SCATTER = Lazy([(sel, tile, K) for sel in _CMP for tile in (False, True) for K in _KS], _scatter)
