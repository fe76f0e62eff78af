"""numba kernels for ``lax.reduce_precision`` and ``lax.mulhi`` (``nbjax.lax.other``).

Pipeline position: the bottom of eager execution; the caller passes C-contiguous flat
operands (``reduce_precision``: the float's bits as unsigned integers) and allocates the
output. ``reduce_precision`` is XLA's bit algorithm: round the mantissa to nearest even,
then overflow to a signed infinity and underflow (denormals included) to a signed zero;
NaNs pass through. ``mulhi`` is the high half of the double-width product (64-bit operands:
from 32-bit partial products). Imports numba and numpy only.
"""
import numpy as np
from numba import njit

_J = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_J)
def reduce_precision(bits, nbits, src_exp, src_mant, exp_bits, mant_bits, out):
  one = bits.dtype.type(1)
  sign_mask = one << (nbits - 1)
  exp_mask = ((one << src_exp) - one) << src_mant
  mant_mask = (one << src_mant) - one
  bias = (1 << (src_exp - 1)) - 1
  red_bias = (1 << (exp_bits - 1)) - 1
  max_exp = bits.dtype.type(bias + red_bias) << src_mant
  min_exp = bits.dtype.type(bias - red_bias) << src_mant
  shift = src_mant - mant_bits
  for i in range(bits.size):
    x = bits[i]
    if (x & exp_mask) == exp_mask and (x & mant_mask) != 0:  # NaN: unchanged
      out[i] = x
      continue
    if shift > 0:
      last = one << shift
      bias_r = (last >> one) - one + ((x & last) >> shift)
      x = (x + bias_r) & ~(last - one)
    if exp_bits < src_exp:
      e = x & exp_mask
      s = x & sign_mask
      if e > max_exp:
        x = s | exp_mask
      elif e <= min_exp:
        x = s
    out[i] = x


@njit(**_J)
def mulhi_narrow(x, y, bits, out):
  # operands of up to 32 bits: the exact product fits in 64
  for i in range(x.size):
    out[i] = (np.int64(x[i]) * np.int64(y[i])) >> bits


@njit(**_J)
def _umulhi64(a, b):
  # the high 64 bits of the unsigned 128-bit product, from 32-bit partial products
  m = np.uint64(0xFFFFFFFF)
  s = np.uint64(32)
  a0, a1, b0, b1 = a & m, a >> s, b & m, b >> s
  p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
  mid = (p00 >> s) + (p01 & m) + (p10 & m)
  return p11 + (p01 >> s) + (p10 >> s) + (mid >> s)


@njit(**_J)
def mulhi64u(x, y, out):
  for i in range(x.size):
    out[i] = _umulhi64(np.uint64(x[i]), np.uint64(y[i]))


@njit(**_J)
def mulhi64(x, y, out):
  # signed: the unsigned high half minus the wrap-around corrections
  for i in range(x.size):
    a, b = np.uint64(x[i]), np.uint64(y[i])
    hi = _umulhi64(a, b)
    if x[i] < 0:
      hi -= b
    if y[i] < 0:
      hi -= a
    out[i] = np.int64(hi)
