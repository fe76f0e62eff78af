"""numba kernels for ``conv_general_dilated``: patch extraction (im2col) for a BLAS gemm.

Pipeline position: the bottom of eager execution. ``nbjax.lax.convolution`` brings every
convolution to three spatial dimensions (size-1 ones added), pads and dilates the input,
and calls one of these kernels to gather the windows into a patch matrix, which one gemm per
group multiplies with the kernel. Two patch layouts, whichever reads longer contiguous runs:

- ``im2col_cl`` (channels last): input ``(N, P0, P1, P2, C)``, patch columns ordered
  ``(k0, k1, k2, c)``;
- ``im2col_cf`` (channels first): input ``(N, C, P0, P1, P2)``, columns ``(c, k0, k1, k2)``.

Both write ``out[g, row, col]`` for feature group ``g`` (``C = G * Cg``), ``row`` running over
``(n, o0, o1, o2)``. Callers allocate outputs. Imports numba and numpy only.
"""
import numpy as np
from numba import njit, prange

_J = dict(cache=True, nogil=True, error_model="numpy")


@njit(parallel=True, **_J)
def im2col_cl(xp, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, out):
  N = xp.shape[0]
  C = xp.shape[4]
  G = out.shape[0]
  Cg = C // G
  for t in prange(N * o0):
    n = t // o0
    a = t - n * o0
    for b in range(o1):
      for c in range(o2):
        row = ((n * o0 + a) * o1 + b) * o2 + c
        for g in range(G):
          col = 0
          for i in range(k0):
            for j in range(k1):
              src = xp[n, a * s0 + i * d0, b * s1 + j * d1]
              for k in range(k2):
                w = c * s2 + k * d2
                for ch in range(Cg):
                  out[g, row, col + ch] = src[w, g * Cg + ch]
                col += Cg


@njit(parallel=True, **_J)
def im2col_cf(xp, k0, k1, k2, s0, s1, s2, d0, d1, d2, o0, o1, o2, out):
  N = xp.shape[0]
  C = xp.shape[1]
  G = out.shape[0]
  Cg = C // G
  kk = k0 * k1 * k2
  for t in prange(N * o0):
    n = t // o0
    a = t - n * o0
    for b in range(o1):
      for c in range(o2):
        row = ((n * o0 + a) * o1 + b) * o2 + c
        for g in range(G):
          for ch in range(Cg):
            col = ch * kk
            for i in range(k0):
              for j in range(k1):
                src = xp[n, g * Cg + ch, a * s0 + i * d0, b * s1 + j * d1]
                for k in range(k2):
                  out[g, row, col] = src[c * s2 + k * d2]
                  col += 1
