"""numba kernels for ``conv_general_dilated``: patch extraction (im2col) for a BLAS gemm.

Pipeline position: the bottom of eager execution. ``nbjax.lax.convolution`` brings every
convolution to three spatial dimensions (size-1 ones added), dilates the input where
asked (``im2col_cl`` reads around the padding itself; the others take a padded copy),
and calls one of these kernels to gather the windows of a chunk of rows into a patch
matrix, which one gemm per group multiplies with the kernel. Two patch layouts, whichever
reads longer contiguous runs:

- ``im2col_cl`` (channels last): input ``(N, P0, P1, P2, C)``, patch columns ordered
  ``(k0, k1, k2, c)``: runs of ``k2 * C`` (``Cg`` with dilation or groups);
- ``im2col_cf`` (channels first): input ``(N, C, P0, P1, P2)``, columns ``(c, k0, k1, k2)``:
  runs of ``k2`` (single elements with dilation).

Both write ``out[g, row - r0, col]`` for feature group ``g`` (``C = G * Cg``), ``row`` running
over ``(n, o0, o1, o2)`` from ``r0`` (a chunk of ``out.shape[1]`` rows), copying runs through
slices of flat views (``_copy``: loops LLVM vectorizes). ``col2im_cl`` and ``shift_sum`` add
gemm products into outputs; ``depthwise_cl`` and ``depthwise_rhs_grad`` compute a depthwise
convolution and its kernel gradient directly. Callers allocate outputs. Imports numba and
numpy only.
"""
import numpy as np
from numba import carray, cfunc, njit, types

from kernels.microkernel import tile
from kernels.threads import MAX_ARGS, voidptr

_J = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_J)
def _unravel_row(r, m0, m1, m2):
  """Row ``r`` of a ``(N, m0, m1, m2)`` grid as its index ``(n, i0, i1, i2)``."""
  i2 = r % m2
  t = r // m2
  i1 = t % m1
  t //= m1
  return t // m0, t % m0, i1, i2


@njit(**_J)
def _copy(dst, src):
  """``dst[:] = src`` through views: indices from 0 need no wraparound checks, so the loop
  vectorizes (``o[dst + q]`` with a computed ``dst`` does not: 1.5x slower gathers)."""
  for q in range(dst.size):
    dst[q] = src[q]


@njit(**_J)
def _zero(dst):
  for q in range(dst.size):
    dst[q] = 0


@njit(**_J)
def im2col_cl(x5, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, lo0, lo1, lo2, r0, out):
  """Padding folded in: window position ``p = o * s + k * d - lo`` on each axis reads
  ``x5[..., p, ...]`` where ``0 <= p < X`` and writes zeros elsewhere (``lo < 0``: a crop;
  the high padding is where windows run past ``X``), so no padded copy of the input is made."""
  N, X0, X1, X2, C = x5.shape
  G, R, L = out.shape
  Cg = C // G
  x = x5.reshape(-1)
  o = out.reshape(-1)
  run = k2 * C if d2 == 1 and G == 1 else Cg
  per = k2 * Cg // run  # runs per tap of the first two axes
  row = 0
  while row < R:  # the rows up to the end of a line of the last output axis, tap by tap
    n, a, b, c = _unravel_row(r0 + row, o0, o1, o2)
    cnt = min(o2 - c, R - row)
    for g in range(G):
      for i in range(k0):
        p0 = a * s0 + i * d0 - lo0
        for j in range(k1):
          p1 = b * s1 + j * d1 - lo1
          dst = (g * R + row) * L + (i * k1 + j) * k2 * Cg
          if p0 < 0 or p0 >= X0 or p1 < 0 or p1 >= X1:  # a padding row: zeros
            for q in range(cnt):
              _zero(o[dst + q * L:dst + q * L + k2 * Cg])
            continue
          line = (n * X0 + p0) * X1 + p1
          for q in range(cnt):
            e = (c + q) * s2 - lo2  # the first tap's position along the last axis
            at = dst + q * L
            if e >= 0 and e + (k2 - 1) * d2 < X2:
              src = (line * X2 + e) * C + g * Cg
              for k in range(per):
                _copy(o[at + k * run:at + (k + 1) * run], x[src + k * d2 * C:src + k * d2 * C + run])
            else:  # a window over the padding: tap by tap
              for k in range(k2):
                pk = e + k * d2
                seg = o[at + k * Cg:at + (k + 1) * Cg]
                if 0 <= pk < X2:
                  src = (line * X2 + pk) * C + g * Cg
                  _copy(seg, x[src:src + Cg])
                else:
                  _zero(seg)
    row += cnt


@njit(**_J)
def _mul_add(acc, x, w):
  """``acc += x * w`` through views (vectorised, as ``_copy``)."""
  for q in range(acc.size):
    acc[q] += x[q] * w[q]


@njit(**_J)
def depthwise_cl(xp, w, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, l0, out):
  """A convolution with one input channel per group (depthwise), directly, a line of the
  last output axis at a time: ``out[line, (q, g * M + m)] = sum over taps t of xp[n, window
  of t at q, g] * w[t, g * M + m]`` for the lines ``l0 ...`` of the ``(n, o0, o1)`` grid,
  taps summed in order. ``w`` is ``(taps, C * M)``, or ``(taps, o2 * C)`` (each tap's
  weights repeated along the line: one vectorised loop a tap) for stride 1 and ``M = 1``.
  (A gemm per group would multiply by a single column.)"""
  N, P0, P1, P2, C = xp.shape
  lines, L = out.shape
  O = L // o2
  M = O // C
  x = xp.reshape(-1)
  tiled = w.shape[1] == L
  for line in range(lines):
    n, a, b, _ = _unravel_row(l0 + line, o0, o1, 1)
    al = out[line]
    al[:] = 0
    t = 0
    for i in range(k0):
      for j in range(k1):
        for k in range(k2):
          base = (((n * P0 + a * s0 + i * d0) * P1 + b * s1 + j * d1) * P2 + k * d2) * C
          wt = w[t]
          if tiled:
            _mul_add(al, x[base:base + L], wt)
          elif M == 1:
            for q in range(o2):
              at = base + q * s2 * C
              _mul_add(al[q * C:(q + 1) * C], x[at:at + C], wt)
          else:
            for q in range(o2):
              for g in range(C):
                v = x[base + q * s2 * C + g]
                for m in range(M):
                  al[q * O + g * M + m] += v * wt[g * M + m]
          t += 1


@njit(**_J)
def depthwise_rhs_grad(xp, ct, k0, k1, k2, s0, s1, s2, d0, d1, l0, l1, acc):
  """The kernel gradient of a depthwise convolution (stride 1 along the last axis), as
  partial sums: ``acc[t, (c, g)] += xp[n, i * s0 + a * d0, j * s1 + b * d1, k * s2 + c, g] *
  ct[n, a, b, c, g]`` over the lines ``l0 <= line < l1`` of ``ct``'s ``(n, a, b)`` grid, for
  each tap ``t = (i, j, k)``; the caller sums ``acc`` over ``c``. One vectorised loop per
  line and tap, with no reduction inside it."""
  N, P0, P1, P2, C = xp.shape
  _, Q0, Q1, Q2, _ = ct.shape
  L = Q2 * C
  x = xp.reshape(-1)
  y = ct.reshape(-1)
  for line in range(l0, l1):
    n, a, b, _ = _unravel_row(line, Q0, Q1, 1)
    yl = y[line * L:(line + 1) * L]
    t = 0
    for i in range(k0):
      for j in range(k1):
        for k in range(k2):
          base = (((n * P0 + i * s0 + a * d0) * P1 + j * s1 + b * d1) * P2 + k * s2) * C
          _mul_add(acc[t], x[base:base + L], yl)
          t += 1


@njit(**_J)
def im2col_cf(xp, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, r0, out):
  N, C, P0, P1, P2 = xp.shape
  G, R, L = out.shape
  Cg = C // G
  x = xp.reshape(-1)
  o = out.reshape(-1)
  for row in range(R):
    n, a, b, c = _unravel_row(r0 + row, o0, o1, o2)
    for g in range(G):
      dst = (g * R + row) * L
      for ch in range(Cg):
        for i in range(k0):
          for j in range(k1):
            base = (((n * C + g * Cg + ch) * P0 + a * s0 + i * d0) * P1 + b * s1 + j * d1) * P2 \
                + c * s2
            if d2 == 1:  # a contiguous view: the copy vectorizes
              _copy(o[dst:dst + k2], x[base:base + k2])
            else:
              _copy(o[dst:dst + k2], x[base:base + (k2 - 1) * d2 + 1:d2])
            dst += k2


@njit(**_J)
def col2im_cl(z, n0, P0, P1, P2, s0, s1, s2, k0, k1, k2, d0, d1, d2, l0, l1, l2, lo0, lo1, lo2,
              out):
  """The output side of a convolution: ``z[(n, p0, p1, p2), (k0, k1, k2, o)]`` (each input
  position times each kernel tap: one gemm) added into ``out[n0 + n, q0, q1, q2, o]`` where
  ``p * l + lo - k * d == q * s`` on each axis (``l`` the input dilation, ``lo`` the low
  padding); ``out`` starts zeroed. No padded or dilated copy of the input is made."""
  _, Q0, Q1, Q2, O = out.shape
  zf = z.reshape(-1)
  of = out.reshape(-1)
  L = z.shape[1]
  for r in range(z.shape[0]):
    n, p0, p1, p2 = _unravel_row(r, P0, P1, P2)
    n += n0
    for i in range(k0):
      e0 = p0 * l0 + lo0 - i * d0
      if e0 < 0 or e0 % s0 != 0 or e0 // s0 >= Q0:
        continue
      for j in range(k1):
        e1 = p1 * l1 + lo1 - j * d1
        if e1 < 0 or e1 % s1 != 0 or e1 // s1 >= Q1:
          continue
        for k in range(k2):
          e2 = p2 * l2 + lo2 - k * d2
          if e2 < 0 or e2 % s2 != 0 or e2 // s2 >= Q2:
            continue
          dst = (((n * Q0 + e0 // s0) * Q1 + e1 // s1) * Q2 + e2 // s2) * O
          src = r * L + ((i * k1 + j) * k2 + k) * O
          acc, add = of[dst:dst + O], zf[src:src + O]
          for q in range(O):
            acc[q] += add[q]


@njit(**_J)
def shift_sum(z, P, k, s, d, out):
  """``out[line, q] = sum over t < k of z[line * P + q * s + t * d, t * O:(t + 1) * O]``: the
  products of every position of a line with each of ``k`` taps (one gemm) summed into the
  outputs (stride ``s``, dilation ``d``) of ``out[line, q, o]``."""
  lines, Q, O = out.shape
  for line in range(lines):
    for q in range(Q):
      acc = out[line, q]
      r = line * P + q * s
      _copy(acc, z[r, 0:O])
      for t in range(1, k):
        add = z[r + t * d, t * O:(t + 1) * O]
        for i in range(O):
          acc[i] += add[i]


# Direct convolutions: register tiles (``kernels.microkernel``) multiply the padded input in
# place with the kernel, no patch matrix. Rows of a tile are output positions along the last
# spatial axis (forward) or kernel taps of the last axis times input features (kernel
# gradient); its vectors run along output features.
_KB = 1024  # contraction block of direct_fwd: 1024 x 32 float32 weights, 128 KiB (in L2)
_t72, _t42, _t22, _t12 = (tile(r, 2) for r in (7, 4, 2, 1))
_t141, _t41, _t21, _t11 = (tile(r, 1) for r in (14, 4, 2, 1))


@njit(**_J)
def _tile(nv, R, a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc):
  """The ``R x nv`` register tile (``_t72`` ... ``_t11``) at rows ``a_off``/``c_off``."""
  if nv == 2:
    if R == 7:
      _t72(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
    elif R == 4:
      _t42(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
    elif R == 2:
      _t22(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
    else:
      _t12(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
  elif R == 14:
    _t141(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
  elif R == 4:
    _t41(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
  elif R == 2:
    _t21(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)
  else:
    _t11(a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc)


@njit(**_J)
def _rows(nv, n, overlap, a, a_off, a_rs, a_k, b, b_off, b_k, k_n, c, c_off, c_rs, last, acc):
  """Rows ``[0, n)`` of a tile product in blocks of the largest register tiles; with
  ``overlap`` (results written, not added) the last block may overlap the one before."""
  big = 7 if nv == 2 else 14
  r = 0
  for R in (big, 4, 2, 1):
    while n - r >= R:
      _tile(nv, R, a, a_off + r * a_rs, a_rs, a_k, b, b_off, b_k, k_n, c, c_off + r * c_rs, c_rs,
            last, acc)
      r += R
    if R == big and overlap and big < n and r < n:
      r = n - big
      _tile(nv, R, a, a_off + r * a_rs, a_rs, a_k, b, b_off, b_k, k_n, c, c_off + r * c_rs, c_rs,
            last, acc)
      return


@njit(**_J)
def _pad_image(x5, n, lo0, lo1, lo2, p1a, p1b, buf):
  """``buf[p0, p1, p2, :] = x5[n, p0 - lo0, p1 - lo1, p2 - lo2, :]`` (zero outside ``x5``) for
  the rows ``p1a <= p1 < p1b`` of the padded image ``buf``."""
  _, X0, X1, X2, C = x5.shape
  P0, P1, P2, _ = buf.shape
  x, o = x5.reshape(-1), buf.reshape(-1)
  for p0 in range(P0):
    i0 = p0 - lo0
    for p1 in range(p1a, p1b):
      i1 = p1 - lo1
      at = (p0 * P1 + p1) * P2 * C
      if i0 < 0 or i0 >= X0 or i1 < 0 or i1 >= X1:
        _zero(o[at:at + P2 * C])
        continue
      a, b = max(0, lo2), min(P2, X2 + lo2)  # the padded row's span inside x5
      _zero(o[at:at + a * C])
      src = (((n * X0 + i0) * X1 + i1) * X2 + a - lo2) * C
      _copy(o[at + a * C:at + b * C], x[src:src + (b - a) * C])
      _zero(o[at + b * C:at + P2 * C])


@njit(**_J)
def direct_fwd(x5, n0, n1, l0, l1, lo0, lo1, lo2, k0, k1, k2, s0, s1, s2, d0, d1, d2, w, O, buf,
               out, by_image):
  """Output lines ``l0 <= l < l1`` (of the ``(o0, o1)`` grid) of images ``n0 <= n < n1``:
  ``out[n, i0, i1, q, o] = sum over taps and c of xp[i0*s0 + t0*d0, i1*s1 + t1*d1,
  q*s2 + t2*d2, c] * w[(t0, t1, t2, c), o]``, ``xp`` the image padded by ``_pad_image`` into
  ``buf`` (the image itself where it needs no padding). ``w`` is ``(k0 * k1 * k2 * C, Op)``,
  its columns padded to whole vectors. A contraction longer than ``_KB`` runs in blocks (first
  taps, then channels) whose weights stay in L2, each over all lines, adding to the outputs:
  the same sums, in the same order (3x3x256 -> 256 features: 7% less time). ``by_image``
  (``x5`` padded already, ``buf`` one of its images): the rows of a tile are the images at
  one output position, not the positions of a line (for lines shorter than a tile: the
  CNN demo's 4x4 images fill 7 x 32 tiles instead of 4 x 32 ones)."""
  _, o0, o1, o2, _ = out.shape
  P0, P1, P2, C = buf.shape
  _, X0, X1, X2, _ = x5.shape
  Op = w.shape[1]
  L = 64 // w.itemsize  # (kernels.microkernel's vector lanes)
  inplace = lo0 == lo1 == lo2 == 0 and (P0, P1, P2) == (X0, X1, X2)
  p1a = (l0 % o1) * s1 if o0 == 1 else 0
  p1b = min(P1, ((l1 - 1) % o1) * s1 + (k1 - 1) * d1 + 1) if o0 == 1 else P1
  wf, of = w.reshape(-1), out.reshape(-1)
  K = k0 * k1 * k2 * C
  if d2 == 1 and K <= _KB:  # (taps, c) in one pass: the last axis' taps and c contiguous
    a_k, b_k, k_n = (d0 * P1 * P2 * C, d1 * P2 * C, 1), (k1 * k2 * C * Op, k2 * C * Op, Op), (
        k0, k1, k2 * C)
    t0s, cb = 1, C
  else:  # blocks: a tap of the first axis, channels in chunks of cb
    t0s, cb = k0, min(C, max(1, _KB // (k1 * k2)))
    if d2 == 1 and cb == C:  # (a tap of the first axis a block, (taps, c) contiguous)
      a_k, b_k, k_n = (0, d1 * P2 * C, 1), (0, k2 * C * Op, Op), (1, k1, k2 * C)
    else:
      a_k, b_k, k_n = (d1 * P2 * C, d2 * C, 1), (k2 * C * Op, C * Op, Op), (k1, k2, cb)
  img = P0 * P1 * P2 * C
  for n in range(n0, n0 + 1 if by_image else n1):
    if by_image:
      xb = x5.reshape(-1)
    elif inplace:
      xb = x5[n].reshape(-1)
    else:
      _pad_image(x5, n, lo0, lo1, lo2, p1a, p1b, buf)
      xb = buf.reshape(-1)
    x_off = n0 * img if by_image else 0
    for oc in range(0, O, 2 * L):
      nv = 2 if O - oc > L else 1
      last = min(L, O - oc - (nv - 1) * L)
      for t0 in range(t0s):
        for c0 in range(0, C, cb):
          if cb < C:
            k_n = (k1, k2, min(cb, C - c0))
          first = t0 == 0 and c0 == 0
          b_off = (t0 * k1 * k2 * C + c0) * Op + oc
          for l in range(l0, l1):
            i0, i1 = l // o1, l % o1
            a_off = x_off + ((i0 * s0 + t0 * d0) * P1 + i1 * s1) * P2 * C + c0
            c_off = ((n * o0 + i0) * o1 + i1) * o2 * O + oc
            if by_image:
              for q in range(o2):
                _rows(nv, n1 - n0, t0s == 1 and cb == C, xb, a_off + q * s2 * C, img, a_k, wf,
                      b_off, b_k, k_n, of, c_off + q * O, o0 * o1 * o2 * O, last, not first)
            else:
              _rows(nv, o2, t0s == 1 and cb == C, xb, a_off, s2 * C, a_k, wf, b_off, b_k, k_n,
                    of, c_off, O, last, not first)


@njit(**_J)
def direct_rhs_grad(x5, n0, n1, q1a, q1b, lo0, lo1, lo2, s0, s1, s2, d0, d1, d2, ct, buf, part,
                    fold):
  """A kernel gradient (a convolution with batch and feature roles swapped) directly, as a
  partial sum over images ``n0 <= n < n1`` and cotangent rows ``q1a <= q1 < q1b``:
  ``part[t0, t1, (t2, c), o] = sum of xp[t0*s0 + q0*d0, t1*s1 + q1*d1, t2*s2 + q2*d2, c] *
  ct[n, q0, q1, q2, o]``, ``xp`` image ``n`` padded into ``buf`` (or itself, unpadded);
  ``ct``'s features padded to whole vectors. Sums run over images, then ``q0, q1, q2``, in
  order. ``fold`` (``x5`` padded already, ``buf`` one of its images, one ``q0``): the images
  are the contraction's outer loop, so each tile runs once over all of them (the same sums
  in the same order, without a tile's load and store per image: small images)."""
  _, Q0, Q1, Q2, Op = ct.shape
  T0, T1, J, _ = part.shape
  P0, P1, P2, C = buf.shape
  T2 = J // C
  L = 64 // ct.itemsize
  cf, pf = ct.reshape(-1), part.reshape(-1)
  a_k, b_k = (d0 * P1 * P2 * C, d1 * P2 * C, d2 * C), (Q1 * Q2 * Op, Q2 * Op, Op)
  k_n = (Q0, q1b - q1a, Q2)
  if fold:  # (Q0 == 1: the first loop runs over images)
    a_k, k_n = (P0 * P1 * P2 * C, a_k[1], a_k[2]), (n1 - n0, k_n[1], k_n[2])
  p1b = min(P1, (T1 - 1) * s1 + (q1b - 1) * d1 + 1)
  _, X0, X1, X2, _ = x5.shape
  inplace = lo0 == lo1 == lo2 == 0 and (P0, P1, P2) == (X0, X1, X2)
  for n in range(n0, n0 + 1 if fold else n1):
    if fold:
      xb = x5.reshape(-1)[n0 * P0 * P1 * P2 * C:]
    elif inplace:
      xb = x5[n].reshape(-1)
    else:
      _pad_image(x5, n, lo0, lo1, lo2, q1a * d1, p1b, buf)
      xb = buf.reshape(-1)
    b_off0 = (n * Q0 * Q1 + q1a) * Q2 * Op
    for t0 in range(T0):
      for t1 in range(T1):
        a_off = ((t0 * s0) * P1 + t1 * s1 + q1a * d1) * P2 * C
        c_off = (t0 * T1 + t1) * J * Op
        for oc in range(0, Op, 2 * L):
          nv = 2 if Op - oc > L else 1
          if s2 == 1:  # (t2, c) contiguous: rows of one tile product
            _rows(nv, J, False, xb, a_off, 1, a_k, cf, b_off0 + oc, b_k, k_n, pf, c_off + oc, Op,
                  L, n > n0)
          else:
            for t2 in range(T2):
              _rows(nv, C, False, xb, a_off + t2 * s2 * C, 1, a_k, cf, b_off0 + oc, b_k, k_n, pf,
                    c_off + t2 * C * Op + oc, Op, L, n > n0)


# Chunk functions for ``kernels.threads.team_run`` (the native two-thread team): chunk ``b`` is
# block ``b`` of a convolution tiled across images, whose tiles only write (so a chunk may run
# twice, even at once, with the same result). Arrays: the padded batch, then the weights and
# the output (forward) or the cotangent and the partial sums (kernel gradient), ``q`` (int64:
# shapes, parameters, then four numbers a block), and the job (one element a block).
_TEAM_SRC = """
def {fn}(lo, hi, argv):
  p = carray(voidptr(argv), 2 * MAX_ARGS, np.int64)
  q = carray(voidptr(p[3]), p[MAX_ARGS + 3], np.int64)
  x5 = carray(voidptr(p[0]), (q[0], q[1], q[2], q[3], q[4]), np.{dt})
  {arrays}
  for b in range(lo, hi):
    n0, n1, r0, r1 = q[20 + 4 * b], q[21 + 4 * b], q[22 + 4 * b], q[23 + 4 * b]
    {call}
"""
_TEAM_FWD = (  # q: x5's shape, w's, out's (o0, o1, o2, O), k, s, d
    "w = carray(voidptr(p[1]), (q[5], q[6]), np.{dt})\n"
    "  out = carray(voidptr(p[2]), (q[0], q[7], q[8], q[9], q[10]), np.{dt})",
    "direct_fwd(x5, n0, n1, r0, r1, 0, 0, 0, q[11], q[12], q[13], q[14], q[15], q[16], q[17], "
    "q[18], q[19], w, q[10], x5[0], out, True)")
_TEAM_RHS = (  # q: x5's shape, blocks, J, ct's (Q0, Q1, Q2, Op), T0, T1, -, s, d
    "ct = carray(voidptr(p[1]), (q[0], q[7], q[8], q[9], q[10]), np.{dt})\n"
    "  parts = carray(voidptr(p[2]), (q[5], q[11], q[12], q[6], q[10]), np.{dt})",
    "direct_rhs_grad(x5, n0, n1, r0, r1, 0, 0, 0, q[14], q[15], q[16], q[17], q[18], q[19], "
    "ct, x5[0], parts[b], True)")
_team_chunks = {}
# the kernels the chunk functions call, as defined here (not whatever the module's globals hold
# when one is first compiled: a wrapper put there would not type in numba)
_TEAM_NS = dict(direct_fwd=direct_fwd, direct_rhs_grad=direct_rhs_grad, np=np, carray=carray,
                voidptr=voidptr, MAX_ARGS=MAX_ARGS)


def team_chunks(fwd, dtype):
  """The address of the chunk function of ``direct_fwd`` (``fwd``) or ``direct_rhs_grad``
  tiled across images (``by_image``, ``fold``) on ``dtype`` arrays, for ``team_run``."""
  f = _team_chunks.get((fwd, dtype))
  if f is None:
    fn = f"direct_{'fwd' if fwd else 'rhs_grad'}_team_{dtype.name}"
    ns = dict(globals(), **_TEAM_NS)
    arrays, call = _TEAM_FWD if fwd else _TEAM_RHS
    src = _TEAM_SRC.format(fn=fn, dt=dtype.name, arrays=arrays.format(dt=dtype.name), call=call)
    exec(compile(src, __file__, "exec"), ns)
    g = ns[fn]
    g.__qualname__ = fn
    f = _team_chunks[(fwd, dtype)] = cfunc(types.void(types.int64, types.int64, types.int64),
                                           **_J)(g)
  return f.address
